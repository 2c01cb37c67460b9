// SPDX-License-Identifier: MIT
// The general kernels: every dtype (f32, f16, bf16), every head dim (multiple of 8 up to 256),
// any strides and alignment, on CUDA cores with f32 arithmetic. They serve what the tensor-core
// kernels do not (f32, unaligned views, head dims over 128) and the backward.
//
// Tiling: a block of 256 threads owns 32 rows of one operand (queries for the forward and dQ,
// keys for dK/dV); 8 consecutive threads share a row, thread s of them holding dims
// s, s + 8, s + 16, ... in registers (head_dim / 8 values, at most DPT). The other operand streams
// through shared memory in tiles of 16 rows, converted to f32; each dot product is 8 partial sums
// joined by three shuffles. The forward keeps a running max and sum per row (online softmax), so
// no score matrix touches global memory; the backward recomputes P from the LSE. They take every
// mask (causal, a sliding window: fa_cuda_abi.h), the softcap, whose scores are
// c log2(e) tanh(s / c) in log2 units, and whose dS gains the factor 1 - tanh^2 in the backward,
// and ALiBi and the additive bias, added to the (capped) log2-unit scores; dS is unchanged by
// them (constants).
#pragma once

#include "fa_mask.cuh"

#define FA_GEN_SPLIT 8 // threads per query row

__device__ __forceinline__ float fa_row_sum8(float x)
{
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    x += __shfl_xor_sync(0xffffffffu, x, 2);
    x += __shfl_xor_sync(0xffffffffu, x, 4);
    return x;
}

// Loads rows [r0, r0 + FA_GEN_TILE) of two (b, *, h) views as f32 into shared memory, zeros past n.
template <typename T>
__device__ __forceinline__ void fa_gen_load_tile(float *dst_a, float *dst_b, const T *a, const T *b,
                                                 long long stride_a, long long stride_b, int r0,
                                                 int n, int dim)
{
    for (int e = threadIdx.x; e < FA_GEN_TILE * dim; e += FA_GEN_THREADS) {
        int j = e / dim, d = e - j * dim, r = r0 + j;
        float x = 0.f, y = 0.f;
        if (r < n) {
            x = fa_to_float(a[(long long)r * stride_a + d]);
            y = fa_to_float(b[(long long)r * stride_b + d]);
        }
        dst_a[e] = x;
        dst_b[e] = y;
    }
}

// Query i's visible keys [lo, hi] (hi = -1 where the row does not count: past seq_q, or, in the
// backward, a row that sees no key).
__device__ __forceinline__ void fa_gen_row_keys(const fa_cuda_params &p, int i, bool ok, int &lo,
                                                int &hi)
{
    lo = p.has_left ? i + p.left_offset : 0; // in [-seq_q, seq_k]
    hi = !ok        ? -1
         : p.causal ? (int)min((long long)i + p.causal_offset, p.seq_k - 1LL)
                    : p.seq_k - 1;
}

template <typename T, int DPT>
__device__ __forceinline__ void fa_gen_forward(const fa_cuda_params &p)
{
    extern __shared__ float fa_gen_smem[];
    const int dim = p.head_dim, nd = dim / FA_GEN_SPLIT;
    const int b = blockIdx.z, h = blockIdx.y, hk = h / p.group;
    const int r = threadIdx.x / FA_GEN_SPLIT, s = threadIdx.x % FA_GEN_SPLIT;
    const int row0 = blockIdx.x * FA_GEN_ROWS, i = row0 + r;
    const bool row_ok = i < p.seq_q;
    const T *Q = (const T *)p.q.ptr + fa_at(p.q, b, i, h);
    const T *K = (const T *)p.k.ptr + fa_at(p.k, b, 0, hk);
    const T *V = (const T *)p.v.ptr + fa_at(p.v, b, 0, hk);
    float *sK = fa_gen_smem, *sV = fa_gen_smem + FA_GEN_TILE * dim;

    float q[DPT], o[DPT];
#pragma unroll
    for (int t = 0; t < DPT; t++) {
        o[t] = 0.f;
        q[t] = (row_ok && t < nd) ? fa_to_float(Q[s + FA_GEN_SPLIT * t]) * p.scale_log2 : 0.f;
    }
    int lo, hi;
    fa_gen_row_keys(p, i, row_ok, lo, hi);
    const float cap_k = 2.f / p.softcap; // the softcap's k on log2-unit scores (fa_softcap_tanh)
    const float slope = fa_alibi_slope(p, b, h);
    const int diag = i + (p.seq_k - p.seq_q); // ALiBi's distance to key j: diag - j
    const long long brow = fa_bias_row(p, b, i, h);
    const int kend = fa_key_end(p, row0, FA_GEN_ROWS);
    float m = -INFINITY, l = 0.f;
    for (int k0 = fa_key_begin(p, row0); k0 < kend; k0 += FA_GEN_TILE) {
        __syncthreads();
        fa_gen_load_tile(sK, sV, K, V, p.k.stride_s, p.v.stride_s, k0, p.seq_k, dim);
        __syncthreads();
        float sc[FA_GEN_TILE], mx = -INFINITY;
#pragma unroll
        for (int j = 0; j < FA_GEN_TILE; j++) {
            float acc = 0.f;
#pragma unroll
            for (int t = 0; t < DPT; t++)
                if (t < nd)
                    acc += q[t] * sK[j * dim + s + FA_GEN_SPLIT * t];
            acc = fa_row_sum8(acc);
            if (p.softcap != 0.f)
                acc = p.softcap_log2 * fa_softcap_tanh(acc, cap_k);
            const int kj = k0 + j;
            if (p.has_alibi)
                acc = fa_alibi(acc, slope, (float)(diag - kj));
            if (p.bias_dtype)
                acc += fa_bias(p, brow, kj);
            sc[j] = (kj >= lo && kj <= hi) ? acc : -INFINITY;
            mx = fmaxf(mx, sc[j]);
        }
        const float m_new = fmaxf(m, mx);
        const float m_use = m_new == -INFINITY ? 0.f : m_new;
        const float alpha = fa_exp2(m - m_use);
        l *= alpha;
#pragma unroll
        for (int t = 0; t < DPT; t++)
            o[t] *= alpha;
#pragma unroll
        for (int j = 0; j < FA_GEN_TILE; j++) {
            const float pj = fa_exp2(sc[j] - m_use);
            l += pj;
#pragma unroll
            for (int t = 0; t < DPT; t++)
                if (t < nd)
                    o[t] += pj * sV[j * dim + s + FA_GEN_SPLIT * t];
        }
        m = m_new;
    }
    if (!row_ok)
        return;
    const float inv = l != 0.f ? 1.f / l : 0.f;
    T *O = (T *)p.o.ptr + fa_at(p.o, b, i, h);
#pragma unroll
    for (int t = 0; t < DPT; t++)
        if (t < nd)
            O[s + FA_GEN_SPLIT * t] = fa_from_float<T>(o[t] * inv);
    if (p.has_lse && s == 0)
        ((float *)p.lse.ptr)[fa_at(p.lse, b, i, h)] =
            l != 0.f ? (m + log2f(l)) * FA_LN2 : -INFINITY;
}

// Delta = rowsum(dO * O) per query row, f32, into the (batch, heads_q, seq_q) workspace.
template <typename T> __device__ __forceinline__ void fa_gen_delta(const fa_cuda_params &p)
{
    const int b = blockIdx.z, h = blockIdx.y;
    const int r = threadIdx.x / FA_GEN_SPLIT, s = threadIdx.x % FA_GEN_SPLIT;
    const int i = blockIdx.x * FA_GEN_ROWS + r;
    float acc = 0.f;
    if (i < p.seq_q) {
        const T *O = (const T *)p.o.ptr + fa_at(p.o, b, i, h);
        const T *dO = (const T *)p.d_o.ptr + fa_at(p.d_o, b, i, h);
        for (int d = s; d < p.head_dim; d += FA_GEN_SPLIT)
            acc += fa_to_float(O[d]) * fa_to_float(dO[d]);
    }
    acc = fa_row_sum8(acc);
    if (i < p.seq_q && s == 0)
        ((float *)p.delta)[((long long)b * p.heads_q + h) * p.seq_q + i] = acc;
}

// dQ for 32 query rows: loops over the key tiles they see, recomputing P = exp2(S - LSE) and
// dS = P * (dO V^T - Delta); dQ = scale * dS K. Deterministic: no atomics.
template <typename T, int DPT>
__device__ __forceinline__ void fa_gen_bwd_dq(const fa_cuda_params &p)
{
    extern __shared__ float fa_gen_smem[];
    const int dim = p.head_dim, nd = dim / FA_GEN_SPLIT;
    const int b = blockIdx.z, h = blockIdx.y, hk = h / p.group;
    const int r = threadIdx.x / FA_GEN_SPLIT, s = threadIdx.x % FA_GEN_SPLIT;
    const int row0 = blockIdx.x * FA_GEN_ROWS, i = row0 + r;
    const bool row_ok = i < p.seq_q;
    const T *Q = (const T *)p.q.ptr + fa_at(p.q, b, i, h);
    const T *dO = (const T *)p.d_o.ptr + fa_at(p.d_o, b, i, h);
    const T *K = (const T *)p.k.ptr + fa_at(p.k, b, 0, hk);
    const T *V = (const T *)p.v.ptr + fa_at(p.v, b, 0, hk);
    float *sK = fa_gen_smem, *sV = fa_gen_smem + FA_GEN_TILE * dim;

    float q[DPT], g[DPT], dq[DPT];
#pragma unroll
    for (int t = 0; t < DPT; t++) {
        dq[t] = 0.f;
        const bool ok = row_ok && t < nd;
        q[t] = ok ? fa_to_float(Q[s + FA_GEN_SPLIT * t]) * p.scale_log2 : 0.f;
        g[t] = ok ? fa_to_float(dO[s + FA_GEN_SPLIT * t]) : 0.f;
    }
    float lse2 = -INFINITY, delta = 0.f;
    if (row_ok) {
        lse2 = fa_lse_log2(((const float *)p.lse.ptr)[fa_at(p.lse, b, i, h)]);
        delta = ((const float *)p.delta)[((long long)b * p.heads_q + h) * p.seq_q + i];
    }
    const bool sees = row_ok && lse2 != -INFINITY;
    int lo, hi;
    fa_gen_row_keys(p, i, sees, lo, hi);
    const float cap_k = 2.f / p.softcap; // the softcap's k on log2-unit scores (fa_softcap_tanh)
    const float slope = fa_alibi_slope(p, b, h);
    const int diag = i + (p.seq_k - p.seq_q); // ALiBi's distance to key j: diag - j
    const long long brow = fa_bias_row(p, b, i, h);
    const int kend = fa_key_end(p, row0, FA_GEN_ROWS);
    for (int k0 = fa_key_begin(p, row0); k0 < kend; k0 += FA_GEN_TILE) {
        __syncthreads();
        fa_gen_load_tile(sK, sV, K, V, p.k.stride_s, p.v.stride_s, k0, p.seq_k, dim);
        __syncthreads();
#pragma unroll 4
        for (int j = 0; j < FA_GEN_TILE; j++) {
            float sd = 0.f, dp = 0.f;
#pragma unroll
            for (int t = 0; t < DPT; t++)
                if (t < nd) {
                    sd += q[t] * sK[j * dim + s + FA_GEN_SPLIT * t];
                    dp += g[t] * sV[j * dim + s + FA_GEN_SPLIT * t];
                }
            sd = fa_row_sum8(sd);
            dp = fa_row_sum8(dp);
            const int kj = k0 + j;
            const bool seen = kj >= lo && kj <= hi;
            float ds;
            if (p.softcap != 0.f) { // capped scores; dS times the cap's derivative 1 - tanh^2
                const float t = fa_softcap_tanh(sd, cap_k);
                float sc = p.softcap_log2 * t;
                if (p.has_alibi)
                    sc = fa_alibi(sc, slope, (float)(diag - kj));
                if (p.bias_dtype)
                    sc += fa_bias(p, brow, kj);
                ds = (seen ? fa_exp2(sc - lse2) : 0.f) * (dp - delta) * (1.f - t * t);
            } else {
                if (p.has_alibi)
                    sd = fa_alibi(sd, slope, (float)(diag - kj));
                if (p.bias_dtype)
                    sd += fa_bias(p, brow, kj);
                ds = (seen ? fa_exp2(sd - lse2) : 0.f) * (dp - delta);
            }
#pragma unroll
            for (int t = 0; t < DPT; t++)
                if (t < nd)
                    dq[t] += ds * sK[j * dim + s + FA_GEN_SPLIT * t];
        }
    }
    if (!row_ok)
        return;
    T *dQ = (T *)p.d_q.ptr + fa_at(p.d_q, b, i, h);
#pragma unroll
    for (int t = 0; t < DPT; t++)
        if (t < nd)
            dQ[s + FA_GEN_SPLIT * t] = fa_from_float<T>(dq[t] * p.scale);
}

// dK and dV for 32 keys of one KV head: loops over every query head of its group and the query
// tiles that see the keys; dV = P^T dO, dK = scale * dS^T Q. Deterministic: no atomics.
template <typename T, int DPT>
__device__ __forceinline__ void fa_gen_bwd_dkdv(const fa_cuda_params &p)
{
    extern __shared__ float fa_gen_smem[];
    const int dim = p.head_dim, nd = dim / FA_GEN_SPLIT;
    const int b = blockIdx.z, hk = blockIdx.y;
    const int r = threadIdx.x / FA_GEN_SPLIT, s = threadIdx.x % FA_GEN_SPLIT;
    const int key0 = blockIdx.x * FA_GEN_ROWS, j = key0 + r;
    const bool key_ok = j < p.seq_k;
    const T *K = (const T *)p.k.ptr + fa_at(p.k, b, j, hk);
    const T *V = (const T *)p.v.ptr + fa_at(p.v, b, j, hk);
    float *sQ = fa_gen_smem, *sG = fa_gen_smem + FA_GEN_TILE * dim;
    float *sL = sG + FA_GEN_TILE * dim, *sD = sL + FA_GEN_TILE;

    float kk[DPT], vv[DPT], dk[DPT], dv[DPT];
#pragma unroll
    for (int t = 0; t < DPT; t++) {
        dk[t] = dv[t] = 0.f;
        const bool ok = key_ok && t < nd;
        kk[t] = ok ? fa_to_float(K[s + FA_GEN_SPLIT * t]) * p.scale_log2 : 0.f;
        vv[t] = ok ? fa_to_float(V[s + FA_GEN_SPLIT * t]) : 0.f;
    }
    // The block's first key bounds the first query (causal), its last key the last (left bound).
    const long long qbeg = fa_first_query(p, key0);
    const int qend = fa_query_end(p, min(key0 + FA_GEN_ROWS, p.seq_k) - 1);
    const float cap_k = 2.f / p.softcap; // the softcap's k on log2-unit scores (fa_softcap_tanh)
    // The queries [qlo, qhi] that see this thread's key j (none where j is past the keys).
    const int qlo = (int)fa_first_query(p, j);
    const int qhi = !key_ok ? -1 : fa_query_end(p, j) - 1;
    const int off = p.seq_k - p.seq_q;
    for (int hq = hk * p.group; hq < (hk + 1) * p.group; hq++) {
        const T *Q = (const T *)p.q.ptr + fa_at(p.q, b, 0, hq);
        const T *dO = (const T *)p.d_o.ptr + fa_at(p.d_o, b, 0, hq);
        const float *L = (const float *)p.lse.ptr + fa_at(p.lse, b, 0, hq);
        const float *Dl = (const float *)p.delta + ((long long)b * p.heads_q + hq) * p.seq_q;
        const float slope = fa_alibi_slope(p, b, hq);
        for (int q0 = (int)qbeg; q0 < qend; q0 += FA_GEN_TILE) {
            __syncthreads();
            fa_gen_load_tile(sQ, sG, Q, dO, p.q.stride_s, p.d_o.stride_s, q0, p.seq_q, dim);
            if (threadIdx.x < FA_GEN_TILE) {
                const int qi = q0 + threadIdx.x;
                sL[threadIdx.x] = qi < p.seq_q ? fa_lse_log2(L[qi * p.lse.stride_s]) : -INFINITY;
                sD[threadIdx.x] = qi < p.seq_q ? Dl[qi] : 0.f;
            }
            __syncthreads();
            const int d0 = q0 + off - j; // ALiBi's distance of query q0 + jj from key j: d0 + jj
#pragma unroll 4
            for (int jj = 0; jj < FA_GEN_TILE; jj++) {
                float sd = 0.f, dp = 0.f;
#pragma unroll
                for (int t = 0; t < DPT; t++)
                    if (t < nd) {
                        sd += kk[t] * sQ[jj * dim + s + FA_GEN_SPLIT * t];
                        dp += vv[t] * sG[jj * dim + s + FA_GEN_SPLIT * t];
                    }
                sd = fa_row_sum8(sd);
                dp = fa_row_sum8(dp);
                const int qi = q0 + jj;
                const float lse2 = sL[jj];
                const bool valid = qi >= qlo && qi <= qhi && lse2 != -INFINITY;
                float pj, ds;
                if (p.softcap != 0.f) { // capped scores; dS times the cap's derivative 1 - tanh^2
                    const float t = fa_softcap_tanh(sd, cap_k);
                    float sc = p.softcap_log2 * t;
                    if (p.has_alibi)
                        sc = fa_alibi(sc, slope, (float)(d0 + jj));
                    if (p.bias_dtype)
                        sc += fa_bias(p, fa_bias_row(p, b, qi, hq), j);
                    pj = valid ? fa_exp2(sc - lse2) : 0.f;
                    ds = pj * (dp - sD[jj]) * (1.f - t * t);
                } else {
                    if (p.has_alibi)
                        sd = fa_alibi(sd, slope, (float)(d0 + jj));
                    if (p.bias_dtype)
                        sd += fa_bias(p, fa_bias_row(p, b, qi, hq), j);
                    pj = valid ? fa_exp2(sd - lse2) : 0.f;
                    ds = pj * (dp - sD[jj]);
                }
#pragma unroll
                for (int t = 0; t < DPT; t++)
                    if (t < nd) {
                        dv[t] += pj * sG[jj * dim + s + FA_GEN_SPLIT * t];
                        dk[t] += ds * sQ[jj * dim + s + FA_GEN_SPLIT * t];
                    }
            }
        }
    }
    if (!key_ok)
        return;
    T *dK = (T *)p.d_k.ptr + fa_at(p.d_k, b, j, hk);
    T *dV = (T *)p.d_v.ptr + fa_at(p.d_v, b, j, hk);
#pragma unroll
    for (int t = 0; t < DPT; t++)
        if (t < nd) {
            dK[s + FA_GEN_SPLIT * t] = fa_from_float<T>(dk[t] * p.scale);
            dV[s + FA_GEN_SPLIT * t] = fa_from_float<T>(dv[t]);
        }
}
