// SPDX-License-Identifier: MIT
// The deterministic tensor-core backward for f16 and bf16, head dim 64 or 128 (smaller ones
// padded): no atomics, so results are bitwise reproducible run to run; S and dP are recomputed
// in a separate dQ kernel (7 GEMM-equivalents; the atomic backward, v4 or wgmma, needs 5).
//
//  dK/dV: a block of 8 warps owns 128 keys of one (batch, KV head); warp w owns keys
//    16w..16w+15, and computes everything transposed so that no operand leaves registers:
//    S^T = K Q^T and dP^T = V dO^T (mma.sync, K and V resident in shared memory, the Q and dO
//    tiles of 64 (head dim 128: 32) query rows streamed two buffers deep with cp.async over
//    every query head of the group), P^T = exp2(S^T * scale * log2e - LSE2) and
//    dS^T = P^T (dP^T - Delta), then
//    dV += P^T dO and dK += dS^T Q with P^T and dS^T fed from the accumulators as A operands and
//    dO, Q read through ldmatrix.trans. Rows without visible keys carry LSE2 = +inf, so P = 0.
//  dQ: a block of 8 warps owns 128 query rows (Q and dO resident), streams
//    K/V tiles of 64 keys as the forward does, recomputes S, dP, P, dS and accumulates dQ += dS K.
//
// Causal or windowed: every kernel visits only the tiles that hold visible pairs and masks only
// the tiles that cross the diagonal, a window's edge (or the end of the keys). A softcap caps S
// (fa_softcap_tanh) and multiplies dS by 1 - tanh^2; ALiBi adds its term (fa_alibi) to the
// (capped) log2-unit S in a branch of its own. An additive bias (the BIAS instantiations) is S^T's
// initial value in dK/dV, in raw units (fa_fwd_mma's; not with a softcap: the planner sends those
// calls to other kernels), and added in ALiBi's branch in dQ (fa_bias; fewer spills each way).
// Shared tiles use the forward's XOR swizzle.
#pragma once

#include "fa_mask.cuh"
#include "fa_mma.cuh"

// dK, dV of 128 keys (see the top).
template <typename T, int D, bool BIAS>
__device__ __forceinline__ void fa_bwd_dkdv_mma(const fa_cuda_params &p)
{
    constexpr int BN = FA_BWD_ROWS, BQ = FA_BWD_QTILE(D);
    constexpr unsigned KV_BYTES = BN * D * 2, Q_BYTES = BQ * D * 2;
    extern __shared__ __align__(128) unsigned char fa_bwd_smem[];
    unsigned char *pK = fa_bwd_smem, *pV = fa_bwd_smem + KV_BYTES;
    const unsigned sK = fa_smem_addr(pK), sV = sK + KV_BYTES;
    const unsigned sQ = sV + KV_BYTES;    // 2 buffers
    const unsigned sG = sQ + 2 * Q_BYTES; // dO, 2 buffers
    float *sL = (float *)(fa_bwd_smem + 2 * KV_BYTES + 4 * Q_BYTES);
    float *sD = sL + BQ;

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int j0 = blockIdx.x * BN, hk = blockIdx.y, b = blockIdx.z;
    const int jw = j0 + warp * 16; // this warp's first key
    fa_load_rows<D, BN>(sK, (const T *)p.k.ptr + fa_at(p.k, b, 0, hk), p.k.stride_s, j0, p.seq_k,
                        p.head_dim);
    fa_load_rows<D, BN>(sV, (const T *)p.v.ptr + fa_at(p.v, b, 0, hk), p.v.stride_s, j0, p.seq_k,
                        p.head_dim);

    // query tiles: from the first that sees key j0 to the last that sees the block's last key,
    // for each head of the group
    const int qbeg = fa_query_begin<BQ>(p, j0);
    const int qend = fa_query_end(p, min(j0 + BN, p.seq_k) - 1);
    const int nq = qbeg < qend ? (qend - qbeg + BQ - 1) / BQ : 0;
    const int total = nq * p.group;
    auto load_q = [&](int it, int buf) {
        const int hq = hk * p.group + it / nq, i0 = qbeg + (it % nq) * BQ;
        fa_load_rows<D, BQ>(sQ + buf * Q_BYTES, (const T *)p.q.ptr + fa_at(p.q, b, 0, hq),
                            p.q.stride_s, i0, p.seq_q, p.head_dim);
        fa_load_rows<D, BQ>(sG + buf * Q_BYTES, (const T *)p.d_o.ptr + fa_at(p.d_o, b, 0, hq),
                            p.d_o.stride_s, i0, p.seq_q, p.head_dim);
    };
    if (total > 0)
        load_q(0, 0);
    fa_cp_async_commit();

    float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
    for (int c = 0; c < D / 8; c++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            dk[c][e] = dv[c][e] = 0.f;
    const int t2 = (lane & 3) * 2;
    const int key_lo = jw + (lane >> 2); // this thread's keys: key_lo, key_lo + 8

    for (int it = 0; it < total; it++) {
        const int buf = it & 1;
        const int hq = hk * p.group + it / nq, i0 = qbeg + (it % nq) * BQ;
        if (it + 1 < total) {
            load_q(it + 1, buf ^ 1);
            fa_cp_async_commit();
        }
        if (tid < BQ) { // this tile's LSE (log2 units) and Delta
            const int i = i0 + tid;
            float l2 = INFINITY, dl = 0.f;
            if (i < p.seq_q) {
                const float lse = ((const float *)p.lse.ptr)[fa_at(p.lse, b, i, hq)];
                l2 = lse == -INFINITY ? INFINITY : fa_lse_log2(lse);
                dl = ((const float *)p.delta)[((long long)b * p.heads_q + hq) * p.seq_q + i];
            }
            sL[tid] = l2;
            sD[tid] = dl;
        }
        if (it + 1 < total)
            fa_cp_async_wait<1>();
        else
            fa_cp_async_wait<0>();
        __syncthreads();
        const unsigned qb = sQ + buf * Q_BYTES, gb = sG + buf * Q_BYTES;

        float s[BQ / 8][4], dp[BQ / 8][4];
#pragma unroll
        for (int n = 0; n < BQ / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                s[n][e] = dp[n][e] = 0.f;
        if (BIAS && p.bias_dtype) { // S^T from the bias in raw units: key key_lo + 8 (e >> 1),
                                    // query i0 + n * 8 + t2 + (e & 1)
            const float to_raw = 1.f / p.scale_log2; // (fa_bias has log2(e))
#pragma unroll
            for (int n = 0; n < BQ / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    s[n][e] = to_raw * fa_bias(p, fa_bias_row(p, b, i0 + n * 8 + t2 + (e & 1), hq),
                                               key_lo + (e >> 1) * 8);
        }
        fa_mma_abt<T, D, BQ / 8>(s, sK, warp * 16, qb, lane);  // S^T = K Q^T
        fa_mma_abt<T, D, BQ / 8>(dp, sV, warp * 16, gb, lane); // dP^T = V dO^T

        // (keys past seq_k only reach dK/dV rows that are not stored)
        const bool mask = (p.causal && i0 + p.causal_offset < jw + 15) ||
                          (p.has_left && jw < i0 + BQ - 1 + p.left_offset);
        // key (of this thread's) outside the keys query i sees
        auto hidden = [&](int key, int i) {
            return (p.causal && key > i + p.causal_offset) ||
                   (p.has_left && key < i + p.left_offset);
        };
        if (p.has_alibi) {
            // S^T in log2 units (capped) and dP^T - Delta (times 1 - tanh^2) in place, then P^T
            // with the term of query i0 + qi's distance from key key_lo + 8 (e >> 1), and dS^T
            if (p.softcap != 0.f) {
#pragma unroll
                for (int n = 0; n < BQ / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const float t = fa_softcap_tanh(s[n][e], p.softcap_k);
                        s[n][e] = p.softcap_log2 * t;
                        dp[n][e] = (dp[n][e] - sD[n * 8 + t2 + (e & 1)]) * (1.f - t * t);
                    }
            } else {
#pragma unroll
                for (int n = 0; n < BQ / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        s[n][e] *= p.scale_log2;
                        dp[n][e] -= sD[n * 8 + t2 + (e & 1)];
                    }
            }
            const float slope = fa_alibi_slope(p, b, hq);
            const float d0 = (float)(i0 + t2 + (p.seq_k - p.seq_q) - key_lo);
#pragma unroll
            for (int n = 0; n < BQ / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int qi = n * 8 + t2 + (e & 1);
                    const float d = d0 + (float)(8 * n + (e & 1) - 8 * (e >> 1));
                    float pr = fa_exp2(fa_alibi(s[n][e], slope, d) - sL[qi]);
                    if (mask && hidden(key_lo + (e >> 1) * 8, i0 + qi))
                        pr = 0.f;
                    s[n][e] = pr;
                    dp[n][e] *= pr;
                }
        } else if (p.softcap != 0.f) { // S^T capped, dS^T times the cap's derivative 1 - tanh^2
#pragma unroll
            for (int n = 0; n < BQ / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int qi = n * 8 + t2 + (e & 1);
                    const float t = fa_softcap_tanh(s[n][e], p.softcap_k);
                    float pr = fa_exp2(p.softcap_log2 * t - sL[qi]);
                    if (mask && hidden(key_lo + (e >> 1) * 8, i0 + qi))
                        pr = 0.f;
                    s[n][e] = pr;
                    dp[n][e] = pr * (dp[n][e] - sD[qi]) * (1.f - t * t);
                }
        } else {
#pragma unroll
            for (int n = 0; n < BQ / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int qi = n * 8 + t2 + (e & 1);
                    float pr = fa_exp2(s[n][e] * p.scale_log2 - sL[qi]);
                    if (mask && hidden(key_lo + (e >> 1) * 8, i0 + qi))
                        pr = 0.f;
                    s[n][e] = pr;
                    dp[n][e] = pr * (dp[n][e] - sD[qi]);
                }
        }
        fa_mma_pb<T, D, BQ / 8>(dv, s, gb, lane);  // dV += P^T dO
        fa_mma_pb<T, D, BQ / 8>(dk, dp, qb, lane); // dK += dS^T Q
        __syncthreads();
    }
    if (total == 0) {
        fa_cp_async_wait<0>();
        __syncthreads();
    }
    // each warp stages through its own 16 rows of the K and V tiles (only it read them last)
    fa_store_rows<T, D>(pK, warp * 16, dk, p.scale, (T *)p.d_k.ptr + fa_at(p.d_k, b, 0, hk),
                        p.d_k.stride_s, jw, p.seq_k, p.head_dim, lane);
    fa_store_rows<T, D>(pV, warp * 16, dv, 1.f, (T *)p.d_v.ptr + fa_at(p.d_v, b, 0, hk),
                        p.d_v.stride_s, jw, p.seq_k, p.head_dim, lane);
}

template <typename T, int D, bool BIAS>
__device__ __forceinline__ void fa_bwd_dq_mma(const fa_cuda_params &p)
{
    constexpr int BM = FA_BWD_ROWS, BK = FA_BWD_TILE;
    constexpr unsigned Q_BYTES = BM * D * 2, KV_BYTES = BK * D * 2;
    extern __shared__ __align__(128) unsigned char fa_bwd_smem[];
    unsigned char *pQ = fa_bwd_smem;
    const unsigned sQ = fa_smem_addr(pQ), sG = sQ + Q_BYTES;
    const unsigned sK = sG + Q_BYTES, sV = sK + 2 * KV_BYTES;

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int qt = p.causal ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
    const int q0 = qt * BM, h = blockIdx.y, b = blockIdx.z, hk = h / p.group;
    const T *Kg = (const T *)p.k.ptr + fa_at(p.k, b, 0, hk);
    const T *Vg = (const T *)p.v.ptr + fa_at(p.v, b, 0, hk);
    fa_load_rows<D, BM>(sQ, (const T *)p.q.ptr + fa_at(p.q, b, 0, h), p.q.stride_s, q0, p.seq_q,
                        p.head_dim);
    fa_load_rows<D, BM>(sG, (const T *)p.d_o.ptr + fa_at(p.d_o, b, 0, h), p.d_o.stride_s, q0,
                        p.seq_q, p.head_dim);

    const int kend = fa_key_end(p, q0, BM);
    const int ntiles = (kend + BK - 1) / BK;
    const int t0 = fa_key_begin(p, q0) / BK; // the first tile any row of the block sees
    if (t0 < ntiles) {
        fa_load_rows<D, BK>(sK + (t0 & 1) * KV_BYTES, Kg, p.k.stride_s, t0 * BK, p.seq_k,
                            p.head_dim);
        fa_load_rows<D, BK>(sV + (t0 & 1) * KV_BYTES, Vg, p.v.stride_s, t0 * BK, p.seq_k,
                            p.head_dim);
    }
    fa_cp_async_commit();

    const int row_lo = q0 + warp * 16 + (lane >> 2), t2 = (lane & 3) * 2;
    float l2[2], dl[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int i = row_lo + 8 * r;
        l2[r] = INFINITY;
        dl[r] = 0.f;
        if (i < p.seq_q) {
            const float lse = ((const float *)p.lse.ptr)[fa_at(p.lse, b, i, h)];
            l2[r] = lse == -INFINITY ? INFINITY : fa_lse_log2(lse);
            dl[r] = ((const float *)p.delta)[((long long)b * p.heads_q + h) * p.seq_q + i];
        }
    }
    float dq[D / 8][4];
#pragma unroll
    for (int c = 0; c < D / 8; c++)
        dq[c][0] = dq[c][1] = dq[c][2] = dq[c][3] = 0.f;
    fa_cp_async_wait<0>();
    __syncthreads();

    for (int it = t0; it < ntiles; it++) {
        const int buf = it & 1;
        if (it + 1 < ntiles) {
            fa_load_rows<D, BK>(sK + (buf ^ 1) * KV_BYTES, Kg, p.k.stride_s, (it + 1) * BK, p.seq_k,
                                p.head_dim);
            fa_load_rows<D, BK>(sV + (buf ^ 1) * KV_BYTES, Vg, p.v.stride_s, (it + 1) * BK, p.seq_k,
                                p.head_dim);
            fa_cp_async_commit();
            fa_cp_async_wait<1>();
        } else {
            fa_cp_async_wait<0>();
        }
        __syncthreads();
        const unsigned kb = sK + buf * KV_BYTES, vb = sV + buf * KV_BYTES;
        float s[BK / 8][4], dp[BK / 8][4];
#pragma unroll
        for (int n = 0; n < BK / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                s[n][e] = dp[n][e] = 0.f;
        fa_mma_abt<T, D, BK / 8>(s, sQ, warp * 16, kb, lane);  // S = Q K^T
        fa_mma_abt<T, D, BK / 8>(dp, sG, warp * 16, vb, lane); // dP = dO V^T
        const int k0 = it * BK;
        const bool mask = k0 + BK > p.seq_k ||
                          (p.causal && k0 + BK - 1 > q0 + warp * 16 + p.causal_offset) ||
                          (p.has_left && k0 < q0 + warp * 16 + 15 + p.left_offset);
        // key outside the keys of this thread's row r
        auto hidden = [&](int key, int r) {
            const int i = row_lo + 8 * r;
            return key >= p.seq_k || (p.causal && key > i + p.causal_offset) ||
                   (p.has_left && key < i + p.left_offset);
        };
        if (p.has_alibi || (BIAS && p.bias_dtype)) {
            // S in log2 units (capped) and dP - Delta (times 1 - tanh^2) in place, then P with the
            // term of row row_lo + 8 r's distance from key k0 + 8 n + t2 + (e & 1) (slope 0
            // without ALiBi) and the bias, and dS
            if (p.softcap != 0.f) {
#pragma unroll
                for (int n = 0; n < BK / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const float t = fa_softcap_tanh(s[n][e], p.softcap_k);
                        s[n][e] = p.softcap_log2 * t;
                        dp[n][e] = (dp[n][e] - dl[e >> 1]) * (1.f - t * t);
                    }
            } else {
#pragma unroll
                for (int n = 0; n < BK / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        s[n][e] *= p.scale_log2;
                        dp[n][e] -= dl[e >> 1];
                    }
            }
            const float slope = fa_alibi_slope(p, b, h);
            const float d0 = (float)(row_lo + (p.seq_k - p.seq_q) - k0 - t2);
            const long long brow[2] = {fa_bias_row(p, b, row_lo, h),
                                       fa_bias_row(p, b, row_lo + 8, h)};
#pragma unroll
            for (int n = 0; n < BK / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int r = e >> 1, key = k0 + n * 8 + t2 + (e & 1);
                    const float d = d0 + (float)(8 * r - 8 * n - (e & 1));
                    float x = fa_alibi(s[n][e], slope, d);
                    if (BIAS && p.bias_dtype)
                        x += fa_bias(p, brow[r], key);
                    float pr = fa_exp2(x - l2[r]);
                    if (mask && hidden(key, r))
                        pr = 0.f;
                    s[n][e] = pr * dp[n][e]; // dS
                }
        } else if (p.softcap != 0.f) { // S capped, dS times the cap's derivative 1 - tanh^2
#pragma unroll
            for (int n = 0; n < BK / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int r = e >> 1, key = k0 + n * 8 + t2 + (e & 1);
                    const float t = fa_softcap_tanh(s[n][e], p.softcap_k);
                    float pr = fa_exp2(p.softcap_log2 * t - l2[r]);
                    if (mask && hidden(key, r))
                        pr = 0.f;
                    s[n][e] = pr * (dp[n][e] - dl[r]) * (1.f - t * t); // dS
                }
        } else {
#pragma unroll
            for (int n = 0; n < BK / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int r = e >> 1, key = k0 + n * 8 + t2 + (e & 1);
                    float pr = fa_exp2(s[n][e] * p.scale_log2 - l2[r]);
                    if (mask && hidden(key, r))
                        pr = 0.f;
                    s[n][e] = pr * (dp[n][e] - dl[r]); // dS
                }
        }
        fa_mma_pb<T, D, BK / 8>(dq, s, kb, lane); // dQ += dS K
        __syncthreads();
    }
    fa_store_rows<T, D>(pQ, warp * 16, dq, p.scale, (T *)p.d_q.ptr + fa_at(p.d_q, b, 0, h),
                        p.d_q.stride_s, q0 + warp * 16, p.seq_q, p.head_dim, lane);
}

// Atomic mode's last step: dQ = scale * accumulator, 8 dims (16 bytes out) per thread; grid
// (seq_q * head_dim / 8 / threads, heads_q, batch).
template <typename T> __device__ __forceinline__ void fa_bwd_dq_convert(const fa_cuda_params &p)
{
    const int chunks = p.head_dim / 8, h = blockIdx.y, b = blockIdx.z;
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= (long long)p.seq_q * chunks)
        return;
    const int i = (int)(c / chunks), ch = (int)(c % chunks);
    const float *acc = (const float *)p.dq_accum;
    long long at = (((long long)b * p.heads_q + h) * p.seq_q + i) * p.head_dim + ch * 8;
    // the tiled layout (fa_cuda_abi.h): dims 8 ch.. lie in one half, in units u, u + 1 (u even)
    if (FA_BWD_WGMMA_DQ_BULK && p.dq_tiled) {
        constexpr int BM = FA_BWD_WGMMA_QTILE;
        const int w = p.dq_tiled, half = w / 2, r = i % BM, col = ch * 8 % half;
        const long long rows = FA_BWD_DQ_TILED_ROWS(p.seq_q);
        at = (((long long)b * p.heads_q + h) * rows + (i - r)) * w +
             (ch * 8 / half * BM + r) * half + ((col / 4) ^ ((r & 3) << 1)) * 4;
    }
    const float4 *src = (const float4 *)(acc + at);
    const float4 x = src[0], y = src[1];
    const float sc = p.scale;
    const uint4 out = {fa_pack2<T>(x.x * sc, x.y * sc), fa_pack2<T>(x.z * sc, x.w * sc),
                       fa_pack2<T>(y.x * sc, y.y * sc), fa_pack2<T>(y.z * sc, y.w * sc)};
    *(uint4 *)((T *)p.d_q.ptr + fa_at(p.d_q, b, i, h) + ch * 8) = out;
}
