// SPDX-License-Identifier: MIT
// Backward for sm_90a with warpgroup MMA (wgmma), f16 and bf16 at head dims 64 and 128 (smaller
// head dims padded with zeros up to them): the algorithm and results of backward v4
// (fa_backward_v4.cuh: dK, dV in registers, dQ added into the f32 accumulator that
// fa_bwd_dq_convert scales), with FlashAttention-3's split of a block into warpgroups.
//
// A block of 3 warpgroups owns BN = 128 keys of one (batch, KV head); K and V stay in shared
// memory. Warpgroup 0 is the producer: it keeps few registers (setmaxnreg) and fills a ring of
// FA_BWD_WGMMA_STAGES stages with the query tiles (BM = 64 rows of Q and dO, plus the rows'
// LSE in log2 units and Delta) by cp.async, each stage guarded by a "full" and an "empty"
// mbarrier. Warpgroups 1 and 2 are the consumers: consumer c owns keys 64 c.. 64 c + 63 (the
// M = 64 of wgmma) and, per tile,
//   1. S^T = K_c Q^T and dP^T = V_c dO^T (m64n64k16, both operands from shared memory),
//   2. P^T = exp2(S^T scale_log2 - LSE log2e) (0 where masked), dS^T = P^T (dP^T - Delta),
//      (with a softcap: S^T capped by fa_softcap_tanh, dS^T times 1 - tanh^2; tanh is kept in
//      S^T's registers until dP^T is in; with ALiBi or (head dim 64) a bias, P^T is made then
//      too, ALiBi's term, fa_alibi, and the bias, fa_bias, added to the (capped) log2-unit S^T)
//      kept in registers as the A operands (rounded to T) of
//   3. dV += P^T dO and dK += dS^T Q (m64nDk16, B = dO, Q transposed from shared memory),
//   4. dS^T also goes to a shared tile (two buffers), and after one barrier of the two
//      consumers, dQ = dS K (A = dS^T transposed, B = K transposed, 128 keys deep; consumer c
//      owns dims c D / 2..; issued before 3., FA_BWD_WGMMA_DQ_FIRST, so that its adds run
//      while the tensor cores do dV and dK) is added into the accumulator: by one bulk reduction a
//      warp from shared memory into an accumulator in the kernel's tiles (FA_BWD_WGMMA_DQ_BULK;
//      a packed batch only with FA_BWD_WGMMA_VARLEN_BULK), else with red.global.add (.v4.f32
//      after a shuffle of lane pairs, FA_BWD_WGMMA_DQ_V4; else .v2).
// Every shared tile is stored as 64-column blocks of 128-byte rows ([D / 64][rows][64]), the
// 16-byte chunk c of row r at chunk c ^ (r & 7), block bases on 1 KiB: wgmma's 128-byte
// swizzle, which also keeps the 4-byte stores of dS^T free of bank conflicts.
// An additive bias only at head dim 64: at 128 its 32 global loads a tile spill (60 bytes, however
// they are ordered), so the planner sends such calls to backward v4 and the kernel reads none.
// Compile-time variants, all on by default (measured on the H200 and H100; fa_cuda_abi.h):
// FA_BWD_WGMMA_PINGPONG, FA_BWD_WGMMA_DQ_V4, FA_BWD_WGMMA_EARLY_S, FA_BWD_WGMMA_LD_EARLY,
// FA_BWD_WGMMA_DQ_BULK, FA_BWD_WGMMA_DQ_FIRST.
#pragma once

#include "fa_mask.cuh"
#include "fa_wgmma.cuh"

// cp.async of rows [r0, r0 + ROWS) of a (rows x head_dim) view into a [D / 64][ROWS][64]
// swizzled tile, zeros past n or head_dim, by the 128 threads of a warpgroup: thread `tid`
// copies chunk tid % CH of rows tid / CH + k 128 / CH, at the same swizzle on every pass where
// 128 / CH is 8 or 16 rows; at head dim 256 (4 rows a pass) every other pass flips chunk bit 2.
template <int D, int ROWS>
__device__ __forceinline__ void fa_bwg_load(unsigned dst, const void *src_v, long long stride,
                                            int r0, int n, int head_dim, int tid)
{
    constexpr int CH = D / 8, RPI = 128 / CH;
    static_assert((RPI % 8 == 0 || RPI == 4) && ROWS % RPI == 0, "whole passes");
    const unsigned short *src = (const unsigned short *)src_v;
    const int ch = tid % CH, row = tid / CH;
    const bool ch_ok = ch * 8 < head_dim;
    const unsigned short *s = src + (long long)(r0 + row) * stride + ch * 8;
    unsigned d = dst + (ch / 8) * ROWS * 128 + row * 128 + (((ch % 8) ^ (row & 7)) << 4);
#pragma unroll 1
    for (int r = r0 + row; r < r0 + ROWS; r += RPI) {
        const bool ok = ch_ok && r < n;
        fa_cp_async16(d, ok ? s : src, ok);
        s += RPI * stride;
        d += RPI * 128;
        if constexpr (RPI == 4)
            d ^= 4 << 4;
    }
}

// d = A B^T over the D dims (no commit): A of 64 rows at descriptor a, B of N rows at b, both
// K-major in 64-column blocks (A's AR rows, B's BR rows of 128 bytes apart), 32 bytes a k16 step.
template <typename T, int D, int N, int AR, int BR>
__device__ __forceinline__ void fa_bwg_products_over_d(float (&d)[N / 2], unsigned long long a,
                                                       unsigned long long b)
{
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        const unsigned off = ((kk / 4) * AR * 128 + (kk % 4) * 32) >> 4;
        const unsigned offq = ((kk / 4) * BR * 128 + (kk % 4) * 32) >> 4;
        fa_wgmma_ss<T, N>(d, a + off, b + offq, kk > 0);
    }
}

// A wgmma backward block's shared memory: the dynamic base aligned up to 1 KiB (wgmma's swizzle
// needs 1 KiB-aligned tiles; FA_BWD_WGMMA_SMEM has the slack), each stage's LSE and Delta rows
// at O_LSE and O_DELTA, and at O_BAR the ring's full (the producer's 128 threads arrive) and
// empty (the consumers' 256) mbarriers, then bar_kv (K and V in), which thread 0 sets up before
// the whole block goes on.
struct fa_bwg_block {
    unsigned base;       // shared-space address of the aligned base
    unsigned char *smem; // the same, generic
    float *sL, *sDl;     // [stage][row]
    unsigned bar_full, bar_empty, bar_kv;
};
template <int ST, unsigned O_LSE, unsigned O_DELTA, unsigned O_BAR>
__device__ __forceinline__ fa_bwg_block fa_bwg_block_begin(int tid)
{
    extern __shared__ __align__(1024) unsigned char fa_bwg_smem[];
    fa_bwg_block k;
    const unsigned raw = fa_smem_addr(fa_bwg_smem);
    k.base = (raw + 1023) & ~1023u;
    k.smem = fa_bwg_smem + (k.base - raw);
    k.sL = (float *)(k.smem + O_LSE);
    k.sDl = (float *)(k.smem + O_DELTA);
    k.bar_full = k.base + O_BAR;
    k.bar_empty = k.bar_full + 8 * ST;
    k.bar_kv = k.bar_empty + 8 * ST;
    if (tid == 0) {
        for (int s = 0; s < ST; s++) {
            fa_mbar_init(k.bar_full + 8 * s, 128);
            fa_mbar_init(k.bar_empty + 8 * s, 256);
        }
        fa_mbar_init(k.bar_kv, 128);
    }
    __syncthreads();
    return k;
}

// The producer warpgroup of the wgmma backward kernels: K and V of the block's BN keys into
// the first two tiles at `base` (then one arrive on bar_kv, the mbarrier after the ring's), then
// each query tile's Q and dO into stage it % ST of the ring at base + stages (Q, then dO), with
// its rows' LSE (sL) and Delta (sDl), behind the stage's empty mbarrier and before its full one.
// TMA (FA_BWD_WGMMA_TMA; taken where p.use_tma): Q and dO by its first thread's tensor-memory
// copies (p.tma_map[0] and [3]: 64 x 64 boxes, swizzled as cp.async lays them), whose bytes the
// full barrier also waits for; LSE and Delta still by the 128 threads.
template <typename T, int D, int BN, int BM, int ST, bool TMA>
__device__ __forceinline__ void fa_bwg_produce(const fa_cuda_params &p,
                                               const fa_query_tiles<BM> &tiles, unsigned base,
                                               unsigned stages, float *sL, float *sDl,
                                               unsigned bar_full, int j0, int hk, int b, int wt)
{
    constexpr unsigned KV_BYTES = BN * D * 2, Q_BYTES = BM * D * 2, STAGE_BYTES = 2 * Q_BYTES;
    static_assert(BM == 64, "a box's 64 rows a tile");
    const unsigned bar_empty = bar_full + 8 * ST, bar_kv = bar_empty + 8 * ST;
    const bool tma = TMA && p.use_tma;
    fa_setmaxnreg_dec<FA_BWD_WGMMA_PRODUCER_REGS>();
    fa_bwg_load<D, BN>(base, (const T *)p.k.ptr + fa_at(p.k, b, 0, hk), p.k.stride_s, j0, p.seq_k,
                       p.head_dim, wt);
    fa_bwg_load<D, BN>(base + KV_BYTES, (const T *)p.v.ptr + fa_at(p.v, b, 0, hk), p.v.stride_s, j0,
                       p.seq_k, p.head_dim, wt);
    fa_cp_async_commit();
    fa_cp_async_wait<0>();
    fa_fence_proxy_async();
    fa_mbar_arrive(bar_kv);
#pragma unroll 1
    for (int it = 0; it < tiles.total; it++) {
        const int s = it % ST, use = it / ST;
        if (use > 0)
            while (!fa_mbar_try_wait(bar_empty + 8 * s, (use - 1) & 1)) {
            }
        int hq, i0;
        tiles.tile(p, hk, it, hq, i0);
        const unsigned q = base + stages + s * STAGE_BYTES;
        if (tma) {
            if (wt == 0) { // (rows past seq_q and dims past head_dim land as zeros)
                fa_mbar_expect_tx(bar_full + 8 * s, STAGE_BYTES);
#pragma unroll 1
                for (int i = 0; i < D / 64; i++) {
                    fa_tma_load_4d(q + i * BM * 128, p.tma_map[0], 64 * i, i0, hq, b,
                                   bar_full + 8 * s);
                    fa_tma_load_4d(q + Q_BYTES + i * BM * 128, p.tma_map[3], 64 * i, i0, hq, b,
                                   bar_full + 8 * s);
                }
            }
        } else {
            fa_bwg_load<D, BM>(q, (const T *)p.q.ptr + fa_at(p.q, b, 0, hq), p.q.stride_s, i0,
                               p.seq_q, p.head_dim, wt);
            fa_bwg_load<D, BM>(q + Q_BYTES, (const T *)p.d_o.ptr + fa_at(p.d_o, b, 0, hq),
                               p.d_o.stride_s, i0, p.seq_q, p.head_dim, wt);
            fa_cp_async_commit();
        }
        // LSE in log2 units, +inf for rows past seq_q and rows that see no key (LSE = -inf),
        // so that P = exp2(s - inf) = 0 there; Delta 0 past seq_q
        const int r = wt % BM, i = i0 + r;
        if (wt < BM) {
            float l2 = INFINITY;
            if (i < p.seq_q) {
                const float lse = ((const float *)p.lse.ptr)[fa_at(p.lse, b, i, hq)];
                l2 = lse != -INFINITY ? fa_lse_log2(lse) : INFINITY;
            }
            sL[s * BM + r] = l2;
        } else {
            sDl[s * BM + r] =
                i < p.seq_q
                    ? ((const float *)p.delta)[((long long)b * p.heads_q + hq) * p.seq_q + i]
                    : 0.f;
        }
        if (!tma) {
            fa_cp_async_wait<0>();
            fa_fence_proxy_async();
        }
        fa_mbar_arrive(bar_full + 8 * s);
    }
}

// dQ of a warpgroup's m64nNk16 accumulator (element 4 j + 2 r + e at row 16 w + g + 8 r, column
// 8 j + 2 t + e) added at rows i0.., dims col0.. of the f32 accumulator with 16-byte
// red.global.add: lanes t, t ^ 1 swap halves, so that even t adds row 16 w + g and odd t row + 8,
// each the 4 dims col0 + 8 j + 4 (t / 2).. (head_dim is a multiple of 8 and dq_accum 256-byte
// aligned: 16-byte aligned, and col < head_dim covers all 4)
template <int N>
__device__ __forceinline__ void fa_bwg_add_dq_v4(const fa_cuda_params &p, const float (&dq)[N / 2],
                                                 int b, int hq, int i0, int col0, int w, int g,
                                                 int t)
{
    float *acc =
        (float *)p.dq_accum + (((long long)b * p.heads_q + hq) * p.seq_q + i0) * p.head_dim;
    const int odd = t & 1, row = 16 * w + g + 8 * odd;
    const bool row_ok = i0 + row < p.seq_q;
    float *at = acc + (long long)row * p.head_dim + col0 + 4 * (t / 2);
#pragma unroll
    for (int j = 0; j < N / 8; j++) {
        const float s0 = odd ? dq[4 * j] : dq[4 * j + 2];
        const float s1 = odd ? dq[4 * j + 1] : dq[4 * j + 3];
        const float r0 = __shfl_xor_sync(0xffffffffu, s0, 1);
        const float r1 = __shfl_xor_sync(0xffffffffu, s1, 1);
        const float v0 = odd ? r0 : dq[4 * j], v1 = odd ? r1 : dq[4 * j + 1];
        const float v2 = odd ? dq[4 * j + 2] : r0, v3 = odd ? dq[4 * j + 3] : r1;
        const int col = col0 + 8 * j + 4 * (t / 2);
        if (row_ok && col < p.head_dim)
            asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(at + 8 * j),
                         "f"(v0), "f"(v1), "f"(v2), "f"(v3)
                         : "memory");
    }
}

// VARLEN: the packed-batch kernel (a tiled accumulator only with FA_BWD_WGMMA_VARLEN_BULK)
template <typename T, int D, bool VARLEN = false>
__device__ __forceinline__ void fa_bwd_wgmma(const fa_cuda_params &p)
{
    constexpr int BN = FA_BWD_WGMMA_KEYS(D), BM = FA_BWD_WGMMA_QTILE, ST = FA_BWD_WGMMA_STAGES;
    constexpr int CH = D / 8;
    constexpr unsigned KV_BYTES = BN * D * 2, Q_BYTES = BM * D * 2, DS_BYTES = BN * BM * 2;
    constexpr unsigned STAGE_BYTES = 2 * Q_BYTES; // Q, then dO
    constexpr unsigned O_STAGES = 2 * KV_BYTES, O_DS = O_STAGES + ST * STAGE_BYTES;
    constexpr unsigned O_LSE = O_DS + 2 * DS_BYTES, O_DELTA = O_LSE + ST * BM * 4;
    constexpr unsigned O_BAR = O_DELTA + ST * BM * 4;
    // FA_BWD_WGMMA_DQ_BULK: each warp's SR rows of D / 2 dQ floats (a packed batch's kernel: 8)
    constexpr bool TILED = FA_BWD_WGMMA_DQ_BULK && (!VARLEN || FA_BWD_WGMMA_VARLEN_BULK);
    constexpr int SR = VARLEN ? 8 : 16;
    constexpr unsigned O_DQ = (O_BAR + 8 * (2 * ST + 1) + 127) / 128 * 128;
    constexpr unsigned BYTES = TILED ? O_DQ + 8 * SR * D / 2 * 4 : O_BAR + 8 * (2 * ST + 1);
    static_assert((D == 64 || D == 128) && BN == 128 && BM == 64,
                  "two consumers of 64 keys, 64-row query tiles, 64-column blocks");
    static_assert(FA_BWD_WGMMA_THREADS == 384, "a producer and two consumer warpgroups");
    // setmaxnreg.inc waits for registers the producer gave back: the pair must fit the 168 a
    // thread that __launch_bounds__(384, 1) allots the block
    static_assert(128 * FA_BWD_WGMMA_PRODUCER_REGS + 256 * FA_BWD_WGMMA_CONSUMER_REGS <= 384 * 168,
                  "producer and consumer registers within the block's");
    static_assert(BYTES + 1024 <= (VARLEN ? FA_BWD_WGMMA_SMEM_VARLEN(D) : FA_BWD_WGMMA_SMEM(D)),
                  "the host's shared memory size");
    const int tid = threadIdx.x, wg = tid / 128, wt = tid % 128;
    const int j0 = blockIdx.x * BN, hk = blockIdx.y, b = blockIdx.z;
    const fa_bwg_block blk = fa_bwg_block_begin<ST, O_LSE, O_DELTA, O_BAR>(tid);
    const unsigned base = blk.base, sK = base, sV = base + KV_BYTES;
    unsigned char *smem = blk.smem;
    float *sL = blk.sL, *sDl = blk.sDl;
    const unsigned bar_full = blk.bar_full, bar_empty = blk.bar_empty, bar_kv = blk.bar_kv;

    // query tiles: from the first that sees key j0 to the last that sees the block's last key,
    // for each head of the group
    // (as v4, non-causal blocks rotated so that their dQ atomics spread)
    const fa_query_tiles<BM> tiles(p, j0, BN);
    const int total = tiles.total;
    auto tile_of = [&](int it, int &hq, int &i0) { tiles.tile(p, hk, it, hq, i0); };

    if (wg == 0) { // producer
        fa_bwg_produce<T, D, BN, BM, ST, FA_BWD_WGMMA_TMA && !VARLEN>(p, tiles, base, O_STAGES, sL,
                                                                      sDl, bar_full, j0, hk, b, wt);
        return;
    }

    // consumers
    fa_setmaxnreg_inc<FA_BWD_WGMMA_CONSUMER_REGS>();
    const int c = wg - 1, w = wt / 32, lane = wt % 32, g = lane / 4, t = lane % 4;
    const int kw = j0 + 64 * c; // this consumer's first key
    // descriptors of this consumer's 64 keys of K and V (K-major A of S^T and dP^T; the next
    // 64-column block BN 128 bytes on) and of K as dQ's B (MN-major: consumer c's D / 2 dims;
    // at D = 64 that is half a swizzle row, 64 bytes in, which relies on the swizzle being a
    // function of the address as with the K-major k16 steps)
    const unsigned long long dKa = fa_wgmma_desc(sK + 64 * c * 128, 1, 1024);
    const unsigned long long dVa = fa_wgmma_desc(sV + 64 * c * 128, 1, 1024);
    const unsigned long long dKb =
        fa_wgmma_desc(sK + (D == 128 ? c * BN * 128 : c * 64), BN * 128, 1024);

    float dk[D / 2], dv[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; i++)
        dk[i] = dv[i] = 0.f;

    constexpr bool BIAS = D == 64; // (see the top)
    // FA_BWD_WGMMA_LD_EARLY, except at D = 128 with both PINGPONG and DQ_V4, where ptxas spills
    // (4 bytes)
    constexpr bool LDE =
        FA_BWD_WGMMA_LD_EARLY && !(D == 128 && FA_BWD_WGMMA_PINGPONG && FA_BWD_WGMMA_DQ_V4);
    // Pingpong (FA_BWD_WGMMA_PINGPONG): the consumers take turns to issue their S^T/dP^T batch
    // and their dV/dK batch, 2 turns a tile for each: every turn waits for the other
    // consumer's arrive (barrier 4 + c), consumer 1 gives the first turn and skips its last
    // arrive. Both run the same `total` tiles, and each turn ends before barrier 1, so that the
    // turns alternate C0, C1, C0, .. and every arrive meets a wait.
    auto turn_begin = [&]() {
        if constexpr (FA_BWD_WGMMA_PINGPONG)
            fa_named_barrier(4 + c, 256);
    };
    auto turn_end = [&](bool last) {
        if constexpr (FA_BWD_WGMMA_PINGPONG)
            if (!(last && c == 1))
                fa_named_arrive(4 + (1 - c), 256);
    };
    // FA_BWD_WGMMA_DQ_BULK, where the host lays the accumulator out in tiles (p.dq_tiled; a
    // packed batch only with FA_BWD_WGMMA_VARLEN_BULK): each warp puts its 16 rows of dQ into
    // shared memory and adds them with one bulk reduction (cp.reduce.async.bulk) to its 16 rows
    // of the tile's block, [consumer][64 rows][D / 2] floats, 16-byte unit u of row r at u ^ ((r
    // & 3) << 1) (so that the 8-byte stores meet no bank conflict; fa_bwd_dq_convert reads them
    // back); in a packed batch's kernel (SR = 8 staged rows) rows 16 w.. and 16 w + 8.. in turn.
    // The warp's previous add has read its rows before it stores again.
    constexpr unsigned DQ_ROW = D / 2 * 4; // bytes of a consumer's row
    auto add_dq_bulk = [&](const float(&dq)[D / 4], int hq, int i0) {
        // (computed here: kept across the loop, it spilled)
        const unsigned buf = fa_smem_addr(smem + O_DQ) + (c * 4 * SR + SR * w) * DQ_ROW;
        // r0: the first of the rows' halves in this pass (both where SR = 16)
        auto pass = [&](int r0) {
            if (lane == 0)
                fa_bulk_wait<0, true>();
            __syncwarp();
            // element 4 j + 2 r + e: row 16 w + g + 8 r, unit 2 j + t / 2; rows g and g + 8
            // share the swizzle, so four addresses and immediate offsets cover the 16 stores
            const unsigned at0 = buf + g * DQ_ROW + (t >> 1) * 16 + (t & 1) * 8;
            unsigned at[4];
#pragma unroll
            for (int k = 0; k < 4; k++)
                at[k] = at0 + ((k ^ (g & 3)) << 5);
#pragma unroll
            for (int r = r0; r < r0 + SR / 8; r++)
#pragma unroll
                for (int j = 0; j < D / 16; j++)
                    asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(
                                     at[j & 3] + (j >> 2) * 128 + (r - r0) * 8 * DQ_ROW),
                                 "f"(dq[4 * j + 2 * r]), "f"(dq[4 * j + 2 * r + 1])
                                 : "memory");
            fa_fence_proxy_async();
            __syncwarp();
            if (lane == 0) {
                const long long rows = FA_BWD_DQ_TILED_ROWS(p.seq_q);
                float *dst = (float *)p.dq_accum +
                             (((long long)b * p.heads_q + hq) * rows + i0) * D +
                             (c * BM + 16 * w + 8 * r0) * (D / 2);
                asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], "
                             "[%1], %2;\n" ::"l"(dst),
                             "r"(buf), "n"(SR * DQ_ROW)
                             : "memory");
                fa_bulk_commit();
            }
        };
        pass(0);
        if constexpr (SR == 8)
            pass(1);
    };
    // dQ of the tile (hq, i0) into the f32 accumulator
    auto add_dq = [&](const float(&dq)[D / 4], int hq, int i0) {
        if (TILED && p.dq_tiled) {
            add_dq_bulk(dq, hq, i0);
            return;
        }
        // element 4 j + 2 r + e: query i0 + 16 w + g + 8 r, dim c D / 2 + 8 j + 2 t + e
#if FA_BWD_WGMMA_DQ_V4
        fa_bwg_add_dq_v4<D / 2>(p, dq, b, hq, i0, c * (D / 2), w, g, t);
#else
        float *acc =
            (float *)p.dq_accum + (((long long)b * p.heads_q + hq) * p.seq_q + i0) * p.head_dim;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int row = 16 * w + g + 8 * r;
            if (i0 + row >= p.seq_q)
                continue;
#pragma unroll
            for (int j = 0; j < D / 16; j++) {
                const int col = c * (D / 2) + 8 * j + 2 * t;
                if (col < p.head_dim)
                    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(
                                     acc + (long long)row * p.head_dim + col),
                                 "f"(dq[4 * j + 2 * r]), "f"(dq[4 * j + 2 * r + 1])
                                 : "memory");
            }
        }
#endif
    };
    while (!fa_mbar_try_wait(bar_kv, 0)) {
    }
    if (FA_BWD_WGMMA_PINGPONG && c == 1 && total > 0)
        fa_named_arrive(4, 256);
    // Steps 2-4 of a tile, shared by the two loops below (the plain one and EARLY's).
    // 2. P^T, element 4 j + 2 r + e at key kw + 16 w + g + 8 r, query i0 + 8 j + 2 t + e, from
    // S^T (after a wait<wait_s>: 0 if dP^T is in S^T's commit group, 1 if in the next), and
    // dS^T = P^T (dP^T - Delta), as the A fragments pa, da of k16 step kk (pairs 4 kk..4 kk + 3)
    // FA_BWD_WGMMA_LD_EARLY: this tile's LSE and Delta read before the waits, whose memory
    // clobber keeps the compiler from hoisting the loads
    auto p_ds = [&](float(&st)[32], float(&dp)[32], int s, int hq, int i0, unsigned(&pa)[4][4],
                    unsigned(&da)[4][4], auto wait_s) {
        float2 lv[8], dlv[8];
        if constexpr (LDE) {
#pragma unroll
            for (int j = 0; j < 8; j++)
                lv[j] = *(const float2 *)(sL + s * BM + 2 * t + 8 * j);
        }
        fa_wgmma_wait<decltype(wait_s)::value>();
        fa_wgmma_hold(st);
        const float *l2 = sL + s * BM + 2 * t, *dl = sDl + s * BM + 2 * t;
        // warpgroup-uniform: the tile crosses the end of the keys, the diagonal or a window's
        // left edge, and P := 0 (it may be inf there) where a query does not see the key.
        const bool mask = kw + 63 >= p.seq_k || (p.causal && kw + 63 > i0 + p.causal_offset) ||
                          (p.has_left && kw < i0 + 63 + p.left_offset);
        // The queries i0 + 2 t + q that see this thread's key of row r: q in [lo, hi] (q = 8 j + e
        // is a constant of the unrolled loops, so each element is two compares).
        auto seen_by = [&](int r, int &lo, int &hi) {
            const int key = kw + 16 * w + g + 8 * r, base = i0 + 2 * t;
            lo = p.causal ? key - p.causal_offset - base : 0;
            hi = key >= p.seq_k ? -1 : p.has_left ? key - p.left_offset - base : BM;
        };
        const bool cap = p.softcap != 0.f;
        if (cap) { // S^T := tanh, the rest once dP^T is in
#pragma unroll
            for (int i = 0; i < 32; i++)
                st[i] = fa_softcap_tanh(st[i], p.softcap_k);
        } else if (!p.has_alibi && !(BIAS && p.bias_dtype)) { // (else once dP^T is in, as capped)
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float2 l = LDE ? lv[j] : *(const float2 *)(l2 + 8 * j);
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    st[4 * j + 2 * r] = fa_exp2(st[4 * j + 2 * r] * p.scale_log2 - l.x);
                    st[4 * j + 2 * r + 1] = fa_exp2(st[4 * j + 2 * r + 1] * p.scale_log2 - l.y);
                }
            }
            if (mask) {
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    int lo, hi;
                    seen_by(r, lo, hi);
#pragma unroll
                    for (int j = 0; j < 8; j++)
#pragma unroll
                        for (int e = 0; e < 2; e++)
                            if (8 * j + e < lo || 8 * j + e > hi)
                                st[4 * j + 2 * r + e] = 0.f;
                }
            }
        }
        if constexpr (LDE) {
#pragma unroll
            for (int j = 0; j < 8; j++)
                dlv[j] = *(const float2 *)(sDl + s * BM + 2 * t + 8 * j);
        }
        fa_wgmma_wait<0>();
        fa_wgmma_hold(dp);
        // P^T from st (CAP: tanh, else raw) with, where TERMS, ALiBi's term (element 4 j + 2 r +
        // e's distance d0 + 8 (j - r) + e; slope 0 without ALiBi) and the bias of query i0 + 8 j
        // + 2 t + e and key kw + 16 w + g + 8 r, masked; dS^T = P^T (dP^T - Delta) (CAP: times
        // 1 - tanh^2)
        auto late = [&](auto CAP, auto TERMS) {
            constexpr bool capped = decltype(CAP)::value, alibi = decltype(TERMS)::value;
            int lo[2] = {0, 0}, hi[2] = {BM, BM};
            if (mask) {
                seen_by(0, lo[0], hi[0]);
                seen_by(1, lo[1], hi[1]);
            }
            float d0 = 0.f, slope = 0.f;
            if constexpr (alibi) {
                d0 = (float)(i0 + 2 * t + (p.seq_k - p.seq_q) - kw - 16 * w - g);
                slope = fa_alibi_slope(p, b, hq);
            }
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float2 l = *(const float2 *)(l2 + 8 * j);
                const float2 d = LDE ? dlv[j] : *(const float2 *)(dl + 8 * j);
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const int i = 4 * j + 2 * r;
                    const float t0 = st[i], t1 = st[i + 1];
                    float x0 = capped ? p.softcap_log2 * t0 : t0 * p.scale_log2;
                    float x1 = capped ? p.softcap_log2 * t1 : t1 * p.scale_log2;
                    if constexpr (alibi) {
                        const float dd = d0 + (float)(8 * (j - r));
                        x0 = fa_alibi(x0, slope, dd);
                        x1 = fa_alibi(x1, slope, dd + 1.f);
                        if (BIAS && p.bias_dtype) {
                            const int qi = i0 + 8 * j + 2 * t, key = kw + 16 * w + g + 8 * r;
                            x0 += fa_bias(p, fa_bias_row(p, b, qi, hq), key);
                            x1 += fa_bias(p, fa_bias_row(p, b, qi + 1, hq), key);
                        }
                    }
                    float p0 = fa_exp2(x0 - l.x);
                    float p1 = fa_exp2(x1 - l.y);
                    if (8 * j < lo[r] || 8 * j > hi[r])
                        p0 = 0.f;
                    if (8 * j + 1 < lo[r] || 8 * j + 1 > hi[r])
                        p1 = 0.f;
                    pa[j / 2][(j % 2) * 2 + r] = fa_pack2<T>(p0, p1);
                    da[j / 2][(j % 2) * 2 + r] =
                        capped ? fa_pack2<T>(p0 * (dp[i] - d.x) * (1.f - t0 * t0),
                                             p1 * (dp[i + 1] - d.y) * (1.f - t1 * t1))
                               : fa_pack2<T>(p0 * (dp[i] - d.x), p1 * (dp[i + 1] - d.y));
                }
            }
        };
        using Y = std::true_type;
        using N = std::false_type;
        const bool terms = p.has_alibi || (BIAS && p.bias_dtype);
        if (cap && terms)
            late(Y{}, Y{});
        else if (cap)
            late(Y{}, N{});
        else if (terms)
            late(N{}, Y{});
        else {
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float2 d = LDE ? dlv[j] : *(const float2 *)(dl + 8 * j);
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const int i = 4 * j + 2 * r;
                    pa[j / 2][(j % 2) * 2 + r] = fa_pack2<T>(st[i], st[i + 1]);
                    da[j / 2][(j % 2) * 2 + r] =
                        fa_pack2<T>(st[i] * (dp[i] - d.x), st[i + 1] * (dp[i + 1] - d.y));
                }
            }
        }
    };
    // dS^T to the shared [key][query] tile: row 64 c + 16 w + g + 8 r, chunk j
    auto store_ds = [&](const unsigned(&da)[4][4], int it) {
        unsigned char *dst = smem + O_DS + (it & 1) * DS_BYTES;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int row = 64 * c + 16 * w + g + 8 * r;
#pragma unroll
            for (int j = 0; j < 8; j++)
                *(unsigned *)(dst + row * 128 + ((j ^ (row & 7)) << 4) + 4 * t) =
                    da[j / 2][(j % 2) * 2 + r];
        }
        fa_fence_proxy_async();
    };
    // 3. dV += P^T dO, dK += dS^T Q: B = dO, Q (64 queries x D, MN-major, 64-column blocks
    // BM 128 bytes apart), a k16 step 16 rows on; one commit group, in a pingpong turn
    auto issue_dvdk = [&](const unsigned(&pa)[4][4], const unsigned(&da)[4][4], unsigned q,
                          unsigned go, int it) {
        const unsigned long long dGt = fa_wgmma_desc(go, BM * 128, 1024);
        const unsigned long long dQt = fa_wgmma_desc(q, BM * 128, 1024);
        turn_begin();
        // (the accumulate flag from a register: the form this was validated in)
        fa_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
            fa_wgmma_rs<T, D>(dv, pa[kk], dGt + kk * 128, 1);
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
            fa_wgmma_rs<T, D>(dk, da[kk], dQt + kk * 128, 1);
        fa_wgmma_commit();
        turn_end(it == total - 1);
    };
    // 4. dQ (64 queries x D / 2 dims of consumer c) = dS K over the 128 keys: A = dS^T
    // (MN-major), B = K (MN-major), one commit group
    auto issue_dq = [&](float(&dq)[D / 4], unsigned ds) {
        fa_named_barrier(1, 256); // both halves of dS^T are in
        const unsigned long long dSa = fa_wgmma_desc(ds, 1, 1024);
        fa_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++)
            fa_wgmma_ss<T, D / 2, 1, 1>(dq, dSa + kk * 128, dKb + kk * 128, kk > 0);
        fa_wgmma_commit();
    };
    // once dV/dK are done: stage s released
    auto release = [&](int s) {
        fa_wgmma_hold(dv);
        fa_wgmma_hold(dk);
        fa_mbar_arrive(bar_empty + 8 * s); // done with Q and dO of this stage
    };
    // 3. and 4. of a tile with dS^T in shared memory (ds), but for the last wait: with DQ_FIRST
    // dQ's group goes first and is added while dV/dK run, `between` (the next tile's S^T and
    // dP^T, one group, or nothing) is issued after the adds, and dV/dK are awaited (wait<1>
    // behind `between`'s group, else wait<0>) before the stage's release; else dV/dK first, dQ
    // behind them (the stage released once dV/dK are done), `between`, and dQ awaited and added.
    auto products = [&](const unsigned(&pa)[4][4], const unsigned(&da)[4][4], unsigned q,
                        unsigned go, unsigned ds, int it, int s, int hq, int i0, auto between,
                        auto grouped) {
        constexpr bool busy = decltype(grouped)::value; // `between` issues a group
        float dq[D / 4];
        if constexpr (FA_BWD_WGMMA_DQ_FIRST) {
            issue_dq(dq, ds);
            issue_dvdk(pa, da, q, go, it);
            fa_wgmma_wait<1>();
            fa_wgmma_hold(dq);
            add_dq(dq, hq, i0);
            between();
            fa_wgmma_wait<busy ? 1 : 0>();
            release(s);
        } else {
            issue_dvdk(pa, da, q, go, it);
            issue_dq(dq, ds);
            fa_wgmma_wait<1>();
            release(s);
            between();
            // (busy: one group, S^T and dP^T, may run on: a wait<2> behind two makes ptxas
            // serialise, C7514)
            fa_wgmma_wait<busy ? 1 : 0>();
            fa_wgmma_hold(dq);
            add_dq(dq, hq, i0);
        }
    };
    using YES = std::true_type;
    using NO = std::false_type;
    auto nothing = []() {};
    constexpr bool EARLY = FA_BWD_WGMMA_EARLY_S && D == 64;
#if FA_BWD_WGMMA_EARLY_S
    // FA_BWD_WGMMA_EARLY_S, at D = 64: tile it + 1's S^T and dP^T (one commit group) are issued
    // within tile it's products (`between`: after its dQ adds, with DQ_FIRST; else right after
    // its dQ product), so that the tensor cores have them while this tile's products finish.
    // Not at D = 128, where dQ, S^T, dP^T, dK and dV together (224 of the 232 registers)
    // spill, and ptxas serialises the wgmma (C7514) even with S^T alone early.
    if constexpr (EARLY) {
        float st[32], dp[32];
        // S^T = K_c Q^T of tile `it` (its stage awaited first), and dP^T = V_c dO^T: 64 keys x 64
        // queries, over the D dims; no commit
        auto issue_s = [&](int it) {
            const int s = it % ST;
            const unsigned q = base + O_STAGES + s * STAGE_BYTES;
            while (!fa_mbar_try_wait(bar_full + 8 * s, (it / ST) & 1)) {
            }
            const unsigned long long dQb = fa_wgmma_desc(q, 1, 1024);
            fa_wgmma_hold(dk);
            fa_wgmma_hold(dv);
            fa_wgmma_fence();
            fa_bwg_products_over_d<T, D, 64, BN, BM>(st, dKa, dQb);
        };
        auto issue_dp = [&](int it) {
            const unsigned go = base + O_STAGES + (it % ST) * STAGE_BYTES + Q_BYTES;
            const unsigned long long dGb = fa_wgmma_desc(go, 1, 1024);
            fa_wgmma_hold(dk);
            fa_wgmma_hold(dv);
            fa_wgmma_fence();
            fa_bwg_products_over_d<T, D, 64, BN, BM>(dp, dVa, dGb);
        };
        // one turn: S^T and dP^T of tile it, one commit group
        auto issue_next = [&](int it) {
            turn_begin();
            issue_s(it);
            issue_dp(it);
            fa_wgmma_commit();
            turn_end(false);
        };
        // tile `it`, whose S^T and dP^T were issued before; with `early`, those of it + 1 too
        auto step = [&](int it, auto early_c) {
            const int s = it % ST;
            int hq, i0;
            tile_of(it, hq, i0);
            const unsigned q = base + O_STAGES + s * STAGE_BYTES, go = q + Q_BYTES;
            const unsigned ds = base + O_DS + (it & 1) * DS_BYTES;

            unsigned pa[4][4], da[4][4];
            p_ds(st, dp, s, hq, i0, pa, da,
                 std::integral_constant<int, 0>{}); // S^T, dP^T: one group
            store_ds(da, it);
            if constexpr (decltype(early_c)::value)
                products(
                    pa, da, q, go, ds, it, s, hq, i0, [&]() { issue_next(it + 1); }, YES{});
            else
                products(pa, da, q, go, ds, it, s, hq, i0, nothing, NO{});
        };
        // the last tile apart, so that no wgmma sits in a branch ptxas cannot prove uniform
        if (total > 0) {
            issue_next(0);
#pragma unroll 1
            for (int it = 0; it < total - 1; it++)
                step(it, std::true_type{});
            step(total - 1, std::false_type{});
        }
    }
#endif
#pragma unroll 1
    for (int it = 0; it < (EARLY ? 0 : total); it++) { // (EARLY: above)
        const int s = it % ST;
        int hq, i0;
        tile_of(it, hq, i0);
        const unsigned q = base + O_STAGES + s * STAGE_BYTES, go = q + Q_BYTES;
        const unsigned ds = base + O_DS + (it & 1) * DS_BYTES;
        while (!fa_mbar_try_wait(bar_full + 8 * s, (it / ST) & 1)) {
        }

        // 1. S^T = K_c Q^T, dP^T = V_c dO^T: 64 keys x 64 queries, over the D dims
        float st[32], dp[32];
        const unsigned long long dQb = fa_wgmma_desc(q, 1, 1024), dGb = fa_wgmma_desc(go, 1, 1024);
        fa_wgmma_hold(dk);
        fa_wgmma_hold(dv);
        turn_begin();
        fa_wgmma_fence();
        fa_bwg_products_over_d<T, D, 64, BN, BM>(st, dKa, dQb);
        fa_wgmma_commit();
        fa_bwg_products_over_d<T, D, 64, BN, BM>(dp, dVa, dGb);
        fa_wgmma_commit();
        turn_end(false);

        // 2.-4. (above)
        unsigned pa[4][4], da[4][4];
        p_ds(st, dp, s, hq, i0, pa, da, std::integral_constant<int, 1>{});
        store_ds(da, it);
        products(pa, da, q, go, ds, it, s, hq, i0, nothing, NO{});
    }

    if (TILED && p.dq_tiled && lane == 0) // the bulk adds done before the block ends
        fa_bulk_wait<0, false>();
    // dK (times scale) and dV through the K and V tiles (once the other consumer's last dQ is
    // done with K), then 16-byte stores of this consumer's 64 rows
    fa_named_barrier(1, 256);
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = 64 * c + 16 * w + g + 8 * r;
#pragma unroll
        for (int j = 0; j < D / 8; j++) {
            const unsigned o =
                (j / 8) * BN * 128 + row * 128 + (((j % 8) ^ (row & 7)) << 4) + 4 * t;
            const int i = 4 * j + 2 * r;
            *(unsigned *)(smem + o) = fa_pack2<T>(dk[i] * p.scale, dk[i + 1] * p.scale);
            *(unsigned *)(smem + KV_BYTES + o) = fa_pack2<T>(dv[i], dv[i + 1]);
        }
    }
    if (c == 0)
        fa_named_barrier(2, 128);
    else
        fa_named_barrier(3, 128);
    T *dK = (T *)p.d_k.ptr + fa_at(p.d_k, b, 0, hk), *dV = (T *)p.d_v.ptr + fa_at(p.d_v, b, 0, hk);
#pragma unroll 1
    for (int x = wt; x < 64 * CH; x += 128) {
        const int row = 64 * c + x / CH, ch = x % CH, j = j0 + row;
        if (j < p.seq_k && ch * 8 < p.head_dim) {
            const unsigned o = (ch / 8) * BN * 128 + row * 128 + (((ch % 8) ^ (row & 7)) << 4);
            *(uint4 *)(dK + (long long)j * p.d_k.stride_s + ch * 8) = *(const uint4 *)(smem + o);
            *(uint4 *)(dV + (long long)j * p.d_v.stride_s + ch * 8) =
                *(const uint4 *)(smem + KV_BYTES + o);
        }
    }
}
