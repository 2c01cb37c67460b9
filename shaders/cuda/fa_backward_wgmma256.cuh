// SPDX-License-Identifier: MIT
// Backward for sm_90a with warpgroup MMA at head dim 256 (129-256 padded with zeros), f16 and
// bf16: the algorithm and results of fa_backward_wgmma.cuh (dK, dV in registers, dQ through
// red.global.add into the f32 accumulator), with the tiles that fit 256 columns.
//
// dK and dV of 64 keys x 256 dims are 128 f32 registers a thread for one warpgroup, so the two
// consumers split the head dim instead of the keys: consumer c owns dims 128 c.. 128 c + 127 of
// dK, dV and dQ. S^T and dP^T (64 keys x 64 queries) are split by queries: consumer c makes the
// queries 32 c.. 32 c + 31 (m64n32k16 over the 256 dims), so no product is made twice, and P^T
// and dS^T meet in shared memory, where both consumers read them as the A operands of
//   dV_c += P^T dO_c, dK_c += dS^T Q_c   (m64n128k16, dims of c)
//   dQ_c  = dS K_c                      (m64n128k16 over the 64 keys)
// (FlashAttention-3 shares P and dS through shared memory at this head dim too).
// A block of 3 warpgroups owns BN = 64 keys; warpgroup 0 is the producer, as at 64 and 128,
// with 2 stages of (Q, dO): K, V, the stages and two (P^T, dS^T) buffers are 224 KiB.
// A tile, for each consumer: S^T, dP^T; P^T, dS^T to the shared buffer (it & 1); one barrier of
// the two; dV, dK (one commit group) and dQ (the next); stage released once dV, dK are done;
// dQ added. The next tile's writes to the other buffer come after the next barrier, which each
// consumer reaches only once its products of this tile are done, so two buffers suffice.
// No additive bias (the host runs v4 for it); windows, softcaps and ALiBi as at 64 and 128.
#pragma once

#include "fa_backward_wgmma.cuh"

template <typename T> __device__ __forceinline__ void fa_bwd_wgmma256(const fa_cuda_params &p)
{
    constexpr int D = 256, BN = FA_BWD_WGMMA_KEYS(256), BM = FA_BWD_WGMMA_QTILE;
    constexpr int ST = FA_BWD_WGMMA256_STAGES, CH = D / 8;
    constexpr unsigned KV_BYTES = BN * D * 2, Q_BYTES = BM * D * 2, PT_BYTES = BN * BM * 2;
    constexpr unsigned STAGE_BYTES = 2 * Q_BYTES; // Q, then dO
    constexpr unsigned O_STAGES = 2 * KV_BYTES, O_PDS = O_STAGES + ST * STAGE_BYTES;
    constexpr unsigned O_LSE = O_PDS + 4 * PT_BYTES, O_DELTA = O_LSE + ST * BM * 4;
    constexpr unsigned O_BAR = O_DELTA + ST * BM * 4, BYTES = O_BAR + 8 * (2 * ST + 1);
    static_assert(BN == 64 && BM == 64, "64 keys, 64-row query tiles");
    static_assert(FA_BWD_WGMMA_THREADS == 384, "a producer and two consumer warpgroups");
    static_assert(128 * FA_BWD_WGMMA_PRODUCER_REGS + 256 * FA_BWD_WGMMA_CONSUMER_REGS <= 384 * 168,
                  "producer and consumer registers within the block's");
    static_assert(BYTES + 1024 <= FA_BWD_WGMMA_SMEM(256), "the host's shared memory size");
    const int tid = threadIdx.x, wg = tid / 128, wt = tid % 128;
    const int j0 = blockIdx.x * BN, hk = blockIdx.y, b = blockIdx.z;
    const fa_bwg_block blk = fa_bwg_block_begin<ST, O_LSE, O_DELTA, O_BAR>(tid);
    const unsigned base = blk.base, sK = base, sV = base + KV_BYTES;
    unsigned char *smem = blk.smem;
    float *sL = blk.sL, *sDl = blk.sDl;
    const unsigned bar_full = blk.bar_full, bar_empty = blk.bar_empty, bar_kv = blk.bar_kv;

    const fa_query_tiles<BM> tiles(p, j0, BN);
    const int total = tiles.total;

    if (wg == 0) { // producer
        fa_bwg_produce<T, D, BN, BM, ST, FA_BWD_WGMMA_TMA>(p, tiles, base, O_STAGES, sL, sDl,
                                                           bar_full, j0, hk, b, wt);
        return;
    }

    // consumers
    fa_setmaxnreg_inc<FA_BWD_WGMMA_CONSUMER_REGS>();
    const int c = wg - 1, w = wt / 32, lane = wt % 32, g = lane / 4, t = lane % 4;
    // K and V as the K-major A of S^T, dP^T (the next 64-column block BN 128 bytes on); K as
    // dQ's MN-major B over consumer c's dims (64-column blocks 2 c, 2 c + 1, BN 128 bytes apart)
    const unsigned long long dKa = fa_wgmma_desc(sK, 1, 1024), dVa = fa_wgmma_desc(sV, 1, 1024);
    const unsigned long long dKb = fa_wgmma_desc(sK + 2 * c * BN * 128, BN * 128, 1024);

    float dk[64], dv[64];
#pragma unroll
    for (int i = 0; i < 64; i++)
        dk[i] = dv[i] = 0.f;

    while (!fa_mbar_try_wait(bar_kv, 0)) {
    }
#pragma unroll 1
    for (int it = 0; it < total; it++) {
        const int s = it % ST;
        int hq, i0;
        tiles.tile(p, hk, it, hq, i0);
        const unsigned q = base + O_STAGES + s * STAGE_BYTES, go = q + Q_BYTES;
        const unsigned pt = base + O_PDS + (it & 1) * 2 * PT_BYTES, dst = pt + PT_BYTES;
        while (!fa_mbar_try_wait(bar_full + 8 * s, (it / ST) & 1)) {
        }

        // S^T = K Q_c^T, dP^T = V dO_c^T: 64 keys x this consumer's 32 queries, over 256 dims
        float st[16], dp[16];
        const unsigned long long dQb = fa_wgmma_desc(q + 32 * c * 128, 1, 1024);
        const unsigned long long dGb = fa_wgmma_desc(go + 32 * c * 128, 1, 1024);
        fa_wgmma_hold(dk);
        fa_wgmma_hold(dv);
        fa_wgmma_fence();
        fa_bwg_products_over_d<T, D, 32, BN, BM>(st, dKa, dQb);
        fa_wgmma_commit();
        fa_bwg_products_over_d<T, D, 32, BN, BM>(dp, dVa, dGb);
        fa_wgmma_commit();

        // P^T, element 4 j + 2 r + e at key j0 + 16 w + g + 8 r and query i0 + 32 c + 8 j + 2 t
        // + e; 0 where the query does not see the key (the tile crosses the end of the keys,
        // the diagonal or a window's left edge: warpgroup-uniform), and dS^T = P^T (dP^T -
        // Delta) (with a softcap, times 1 - tanh^2)
        const int qc = 32 * c + 2 * t; // this thread's first query in the tile
        const float *l2 = sL + s * BM + qc, *dl = sDl + s * BM + qc;
        const bool mask = j0 + BN - 1 >= p.seq_k ||
                          (p.causal && j0 + BN - 1 > i0 + p.causal_offset) ||
                          (p.has_left && j0 < i0 + BM - 1 + p.left_offset);
        // the queries i0 + qc + q that see row r's key: q in [lo[r], hi[r]]
        int lo[2] = {0, 0}, hi[2] = {32, 32};
        if (mask) {
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int key = j0 + 16 * w + g + 8 * r, at = i0 + qc;
                lo[r] = p.causal ? key - p.causal_offset - at : 0;
                hi[r] = key >= p.seq_k ? -1 : p.has_left ? key - p.left_offset - at : 32;
            }
        }
        const bool cap = p.softcap != 0.f, alibi = p.has_alibi;
        const float slope = alibi ? fa_alibi_slope(p, b, hq) : 0.f;
        // d0 + 8 (j - r) + e: element 4 j + 2 r + e's distance query + seq_k - seq_q - key
        const float d0 = (float)(i0 + qc + (p.seq_k - p.seq_q) - j0 - 16 * w - g);
        // P of element i = 4 j + 2 r + e from x, S^T in log2 units (capped)
        auto make_p = [&](float x, int j, int r, int e, float2 l) {
            if (alibi)
                x = fa_alibi(x, slope, d0 + (float)(8 * (j - r) + e));
            const float pr = fa_exp2(x - (e ? l.y : l.x));
            return 8 * j + e < lo[r] || 8 * j + e > hi[r] ? 0.f : pr;
        };
        // P^T to row 16 w + g + 8 r of the [key][query] buffer, chunk 4 c + j (bank-free: the 8
        // rows of a store land on 8 different chunks)
        unsigned char *const smem_pt = smem + (pt - base);
        auto store = [&](unsigned char *tile, const float(&v)[16]) {
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int row = 16 * w + g + 8 * r;
#pragma unroll
                for (int j = 0; j < 4; j++)
                    *(unsigned *)(tile + row * 128 + (((4 * c + j) ^ (row & 7)) << 4) + 4 * t) =
                        fa_pack2<T>(v[4 * j + 2 * r], v[4 * j + 2 * r + 1]);
            }
        };
        fa_wgmma_wait<1>();
        fa_wgmma_hold(st);
        if (cap) { // S^T := tanh; P^T once dP^T is in (1 - tanh^2 would be 16 registers more)
#pragma unroll
            for (int i = 0; i < 16; i++)
                st[i] = fa_softcap_tanh(st[i], p.softcap_k);
        } else {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float2 l = *(const float2 *)(l2 + 8 * j);
#pragma unroll
                for (int r = 0; r < 2; r++)
#pragma unroll
                    for (int e = 0; e < 2; e++)
                        st[4 * j + 2 * r + e] =
                            make_p(st[4 * j + 2 * r + e] * p.scale_log2, j, r, e, l);
            }
            store(smem_pt, st);
        }
        fa_wgmma_wait<0>();
        fa_wgmma_hold(dp);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const float2 l = *(const float2 *)(l2 + 8 * j);
            const float2 d = *(const float2 *)(dl + 8 * j);
#pragma unroll
            for (int r = 0; r < 2; r++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int i = 4 * j + 2 * r + e;
                    const float delta = e ? d.y : d.x;
                    if (cap) {
                        const float th = st[i];
                        st[i] = make_p(p.softcap_log2 * th, j, r, e, l);
                        dp[i] = st[i] * (dp[i] - delta) * (1.f - th * th);
                    } else {
                        dp[i] = st[i] * (dp[i] - delta);
                    }
                }
        }
        if (cap)
            store(smem_pt, st);
        store(smem_pt + PT_BYTES, dp);
        fa_fence_proxy_async();
        fa_named_barrier(1, 256); // both consumers' queries of P^T and dS^T are in

        // dV_c += P^T dO_c, dK_c += dS^T Q_c (A K-major from the buffer, B MN-major: dims 128 c..
        // in 64-column blocks BM 128 bytes apart, 16 query rows a k16 step)
        const unsigned long long dPa = fa_wgmma_desc(pt, 1, 1024),
                                 dSa = fa_wgmma_desc(dst, 1, 1024);
        const unsigned long long dGt = fa_wgmma_desc(go + 2 * c * BM * 128, BM * 128, 1024);
        const unsigned long long dQt = fa_wgmma_desc(q + 2 * c * BM * 128, BM * 128, 1024);
        fa_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BM / 16; kk++)
            fa_wgmma_ss<T, 128, 0, 1>(dv, dPa + kk * 2, dGt + kk * 128, 1);
#pragma unroll
        for (int kk = 0; kk < BM / 16; kk++)
            fa_wgmma_ss<T, 128, 0, 1>(dk, dSa + kk * 2, dQt + kk * 128, 1);
        fa_wgmma_commit();
        // dQ_c = dS K_c: A = dS^T read MN-major (64 queries a row), 16 keys a k16 step
        float dq[64];
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++)
            fa_wgmma_ss<T, 128, 1, 1>(dq, dSa + kk * 128, dKb + kk * 128, kk > 0);
        fa_wgmma_commit();
        fa_wgmma_wait<1>();
        fa_wgmma_hold(dv);
        fa_wgmma_hold(dk);
        fa_mbar_arrive(bar_empty + 8 * s); // done with Q and dO of this stage
        fa_wgmma_wait<0>();
        fa_wgmma_hold(dq);

        fa_bwg_add_dq_v4<128>(p, dq, b, hq, i0, 128 * c, w, g, t); // dims 128 c..
    }

    // dK (times scale) and dV through the K and V tiles, once both consumers' last dQ is done
    // with K; then both consumers store the 64 rows, 16 bytes at a time
    fa_named_barrier(1, 256);
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = 16 * w + g + 8 * r;
#pragma unroll
        for (int j = 0; j < 16; j++) { // dims 128 c + 8 j..: block 2 c + j / 8, chunk j % 8
            const unsigned o =
                (2 * c + j / 8) * BN * 128 + row * 128 + (((j % 8) ^ (row & 7)) << 4) + 4 * t;
            const int i = 4 * j + 2 * r;
            *(unsigned *)(smem + o) = fa_pack2<T>(dk[i] * p.scale, dk[i + 1] * p.scale);
            *(unsigned *)(smem + KV_BYTES + o) = fa_pack2<T>(dv[i], dv[i + 1]);
        }
    }
    fa_named_barrier(1, 256);
    T *dK = (T *)p.d_k.ptr + fa_at(p.d_k, b, 0, hk), *dV = (T *)p.d_v.ptr + fa_at(p.d_v, b, 0, hk);
#pragma unroll 1
    for (int x = tid - 128; x < BN * CH; x += 256) {
        const int row = x / CH, ch = x % CH, j = j0 + row;
        if (j < p.seq_k && ch * 8 < p.head_dim) {
            const unsigned o = (ch / 8) * BN * 128 + row * 128 + (((ch % 8) ^ (row & 7)) << 4);
            *(uint4 *)(dK + (long long)j * p.d_k.stride_s + ch * 8) = *(const uint4 *)(smem + o);
            *(uint4 *)(dV + (long long)j * p.d_v.stride_s + ch * 8) =
                *(const uint4 *)(smem + KV_BYTES + o);
        }
    }
}

// The catalogue's BWD_WGMMA rows: head dim 256 here, 64 and 128 in fa_backward_wgmma.cuh.
template <typename T, int D>
__device__ __forceinline__ void fa_bwd_wgmma_at(const fa_cuda_params &p)
{
    if constexpr (D == 256)
        fa_bwd_wgmma256<T>(p);
    else
        fa_bwd_wgmma<T, D>(p);
}
