// SPDX-License-Identifier: MIT
// The Hopper forward (sm_90a): the same exact online softmax as fa_forward_mma.cuh, with both
// products on warpgroup MMA (wgmma) instead of mma.sync, for f16 and bf16 at head dim 64, 128 or
// 256 (smaller head dims padded up with zeros; at 256, tiles of 64 keys and two stages), and for
// e4m3 (FP8) at head dim 128 (below).
//
// A block of 1 + NC warpgroups (FA_FWD_WGMMA_NC: two computing ones, or three at head dim 64
// with FA_FWD_WGMMA_WG3_D64) owns BQ = 64 NC query rows of one (batch, head) at a time: one such
// work item, or where persistent (FA_FWD_WGMMA_PERSISTENT_CALL: head dims up to 128, causal
// calls with FA_FWD_WGMMA_CAUSAL_DYN) one item after another, the next one's Q loaded into a
// second buffer. Warpgroup 0 only loads: an item's Q, then its K and V tiles of BK keys by
// cp.async into a ring of FA_FWD_WGMMA_STAGES_D(D) shared buffers, K and V each guarded by a
// "full" and an "empty" mbarrier, and it gives most of its registers to the others
// (setmaxnreg). Warpgroups 1..NC own 64 query rows each. S = Q K^T is one chain of wgmma with
// both operands in shared memory (64 x BK accumulators in registers); P stays in registers as the
// A operand of O += P V, V read transposed from shared memory. Step n issues S of tile n together
// with O += P V of tile n - 1, then runs tile n's mask and online softmax, so the tensor cores get
// the next batch as soon as the last one ends; the computing warpgroups take turns to issue
// (pingpong), so that one's exp2 runs while another's products hold the tensor cores.
//
// A block visits the key tiles from the one of the first key its first row sees (a window's left
// bound) to the one of the last key its last row sees; tiles that a window's edge, the causal
// diagonal or the end of the keys cross are masked (decided per block, see below). A softcap
// replaces S by its capped scores in log2 units (fa_softcap_tanh) before the mask (alone, on
// tiles without a mask, by the reciprocal those scores are made of: see `fold`), and ALiBi or an
// additive bias by its log2-unit scores plus the term of each element's distance (fa_alibi) and
// its bias (fa_bias).
//
// Tiles are stored as 64-column blocks of 128-byte rows in the 128-byte swizzle that wgmma's
// descriptors name (fa_wgmma.cuh); zero-filled past the end of the keys, of the queries and of
// the head dim.
//
// FP8 (T = fa_e4m3, head dim 128, 128-key tiles): rows of 128 bytes, products of k32. 8-bit wgmma
// reads B K-major only, so V lands in a tile of its own and the loader transposes it into the ring
// (fa_fp8_transpose_v), its keys permuted so that P's f32 accumulators become the A fragments of
// O += P V in place: each thread converts its own scores, no shuffle. The descales fold into the
// scores' scale (dq dk) and into the epilogue's 1 / l (dv). P is exp2(s - m + 8) with m the row's
// running max itself (no lagging max: P at most 256 of e4m3's 448), so that small probabilities
// keep e4m3's normal range; l sums the same f32 values, and LSE takes the 8 back off. O leaves
// from registers in o's dtype (f32, f16 or bf16).
#pragma once

#include "fa_mask.cuh"
#include "fa_wgmma.cuh"

// Rows [r0, r0 + ROWS) of a (rows x head_dim) view into a tile of ROWS rows: 64-column blocks of
// ROWS 128-byte rows, swizzled; zeros past row n or column head_dim (FROM_NEG: and before row 0,
// where r0 may be negative). Called by the 128 threads of the loading warpgroup (t = 0..127):
// thread t copies chunk t % CH of every (128 / CH)-th row.
// Rows a multiple of 8 apart have the same swizzled chunk, so one pointer and one address step
// through them (few registers: the loader keeps FA_FWD_WGMMA_LOAD_REGS); at head dim 256 they
// are 4 apart, and every other row's chunk has its bit 2 flipped.
template <int D, int ROWS, bool FROM_NEG = false, typename T>
__device__ __forceinline__ void fa_fwdw_load(unsigned dst, const T *src, long long stride, int r0,
                                             int n, int head_dim, int t)
{
    constexpr int E = 16 / (int)sizeof(T); // elements a chunk
    constexpr int CH = D / E, STEP = 128 / CH;
    static_assert((STEP % 8 == 0 || STEP == 4) && ROWS % STEP == 0, "rows 4 or 8k apart");
    const int row = t / CH, ch = t % CH;
    dst += (unsigned)((ch >> 3) * ROWS * 128 + row * 128 + (((ch & 7) ^ (row & 7)) << 4));
    const bool col_ok = ch * E < head_dim;
    const T *g = src + (long long)(r0 + row) * stride + ch * E;
#pragma unroll 2
    for (int i = 0; i < ROWS / STEP; i++) {
        const int at = r0 + row + i * STEP;
        const bool ok = col_ok && at < n && (!FROM_NEG || at >= 0);
        const unsigned flip = STEP == 4 ? (unsigned)(i & 1) << 6 : 0u;
        fa_cp_async16((dst + i * STEP * 128) ^ flip, ok ? g : src, ok);
        g += STEP * stride;
    }
}

// FP8: the key that position j of a 32-key step of O += P V's A fragments holds. Lane t's S
// accumulators hold keys 8 n + 2 t, + 1 (n = 0..3) of rows g and g + 8; its A fragment wants
// positions 4 t..4 t + 3 and 16 + 4 t.. of the same rows. So position 16 h + 4 t + i holds key
// 16 h + 8 (i >> 1) + 2 t + (i & 1), and V's rows are stored in that order.
__device__ __forceinline__ int fa_fp8_key_of(int j)
{
    return (j & 16) | ((j & 2) << 2) | ((j >> 1) & 6) | (j & 1);
}

// FP8: a V tile of 128 keys x 128 head dims (e4m3, as fa_fwdw_load stores it: 128-byte rows,
// swizzled) transposed into O += P V's B operand: a 128-byte row per head dim, the keys in
// fa_fp8_key_of's order, swizzled alike. By the loading warpgroup (t = 0..127): 4 x 4-byte blocks,
// each read as a word from four key rows and written as a word to four head-dim rows (byte
// permutes between), the lanes spread so that reads and writes meet 2-way bank conflicts at most.
// Two blocks in flight (the FP8 loader keeps the registers for them).
__device__ __forceinline__ void fa_fp8_transpose_v(unsigned dst, unsigned src, int t)
{
    const int lane = t & 31, w = t >> 5;
    const int dlo = lane & 3, tq = (lane >> 2) & 3, hb = lane >> 4;
#pragma unroll 2
    for (int i = 0; i < 8; i++) {
        const int block = w * 8 + i, kc = block >> 3; // 32-key step kc
        const int d4 = 4 * (block & 7) + dlo;         // head dims 4 d4..4 d4 + 3
        const int kg = 8 * kc + 4 * hb + tq;          // positions 4 kg..4 kg + 3
        unsigned x[4], y[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int key = 32 * kc + fa_fp8_key_of(16 * hb + 4 * tq + j);
            const unsigned at = src + key * 128 + (((d4 >> 2) ^ (key & 7)) << 4) + (d4 & 3) * 4;
            asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(x[j]) : "r"(at));
        }
        // x[j] holds head dims 4 d4.. of position 4 kg + j; y[e] the four positions of dim 4 d4 + e
        const unsigned a0 = __byte_perm(x[0], x[1], 0x5140), a1 = __byte_perm(x[0], x[1], 0x7362);
        const unsigned b0 = __byte_perm(x[2], x[3], 0x5140), b1 = __byte_perm(x[2], x[3], 0x7362);
        y[0] = __byte_perm(a0, b0, 0x5410);
        y[1] = __byte_perm(a0, b0, 0x7632);
        y[2] = __byte_perm(a1, b1, 0x5410);
        y[3] = __byte_perm(a1, b1, 0x7632);
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int d = 4 * d4 + e;
            const unsigned at = dst + d * 128 + (((kg >> 2) ^ (d & 7)) << 4) + (kg & 3) * 4;
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at), "r"(y[e]) : "memory");
        }
    }
}

// FP8: descale factor i (0: q, 1: k, 2: v) of batch entry b, KV head hk (1 where absent).
__device__ __forceinline__ float fa_descale(const fa_cuda_params &p, int i, int b, int hk)
{
    const fa_cuda_tensor &t = p.descale[i];
    return t.ptr ? ((const float *)t.ptr)[b * t.stride_b + hk * t.stride_h] : 1.f;
}

// FP8: O (a warpgroup's 64 x D accumulators, rows row_lo and row_lo + 8 of this thread) times
// inv[r] into o, whose dtype is p.o_dtype: each thread's two adjacent columns as one store.
template <int D>
__device__ __forceinline__ void fa_fwdw_store_o(const fa_cuda_params &p, const float (&o)[D / 2],
                                                const float (&inv)[2], int b, int h, int row_lo,
                                                int t2)
{
    const long long base = fa_at(p.o, b, 0, h);
    auto store = [&](auto out_c) {
        using O = decltype(out_c);
        O *og = (O *)p.o.ptr + base;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int row = row_lo + 8 * r;
            if (row >= p.seq_q)
                continue;
#pragma unroll
            for (int n = 0; n < D / 8; n++) {
                const int col = 8 * n + t2;
                if (col >= p.head_dim)
                    continue;
                const float x = o[4 * n + 2 * r] * inv[r], y = o[4 * n + 2 * r + 1] * inv[r];
                O *at = og + (long long)row * p.o.stride_s + col;
                if constexpr (std::is_same<O, float>::value)
                    *(float2 *)at = make_float2(x, y);
                else
                    *(unsigned *)at = fa_pack2<O>(x, y);
            }
        }
    };
    if (p.o_dtype == FA_CUDA_BIAS_F32)
        store(0.f);
    else if (p.o_dtype == FA_CUDA_BIAS_F16)
        store(__half());
    else
        store(__nv_bfloat16());
}

// The key tile of the kernel for T at head dim D (PLAIN: neither the softcap's nor the packed
// batches' kernel): FA_FWD_WGMMA_BK, except 64 with three computing warpgroups but for plain f16,
// since at 128 keys the others overflow their 160 registers (bf16's masked tiles' remainders of
// P: 1,108 bytes of spills; the softcap's fold: 56; the packed batches' bound parameters: 44).
// Plain bf16 has a 128-key twin too (the catalogue's k128 row), whose masked tiles run in halves
// (HALF below); the host takes it for long rows only (cuda_plan.c).
template <typename T, int D, bool PLAIN>
constexpr int fa_fwdw_bk = FA_FWD_WGMMA_NC(D) == 3 && !(PLAIN && std::is_same<T, __half>::value)
                               ? 64
                               : FA_FWD_WGMMA_BK(D);

// FOLD: the kernel for a softcap alone (the FWD_WGMMA_SOFTCAP rows), which folds the cap into the
// exponent (below); in a kernel of its own because the fold's code cost the plain path 4-5 % at
// head dim 64 when every kernel carried it (docs/PERF.md).
// TMA: the tensor-memory loader compiled in where FA_FWD_WGMMA_TMA (p.use_tma chooses it at run
// time): the kernels with two computing warpgroups, and at head dim 64 (three) the catalogue's
// FWD_WGMMA rows with P2 = 1 alone, whose loader then keeps 24 registers (LEAN, below).
template <typename T, int D, int BK, bool PERSIST, bool FOLD = false, bool TMA = true>
__device__ __forceinline__ void fa_fwd_wgmma(const fa_cuda_params &p)
{
    constexpr bool FP8 = fa_is_e4m3<T>;
    constexpr int NC = FA_FWD_WGMMA_NC(D), BQ = FA_FWD_WGMMA_BQ_D(D), CH = D / 8;
    constexpr int THREADS = FA_FWD_WGMMA_THREADS_D(D);
    constexpr int ST = FP8 ? FA_FWD_WGMMA_STAGES_E4M3 : FA_FWD_WGMMA_STAGES_D(D);
    constexpr int NQ = PERSIST ? 2 : 1; // Q buffers: the next item's Q lands during this one
    static_assert(!PERSIST || FA_FWD_WGMMA_PERSISTENT(D), "the host's grid");
    static_assert(!FP8 || (D == 128 && BK == 128), "FP8: 128-byte rows, fa_fp8_transpose_v's tile");
    constexpr unsigned ES = sizeof(T), Q_BYTES = BQ * D * ES, TILE_BYTES = BK * D * ES;
    constexpr int KSTEP = 32 / ES; // keys (or head dims) a wgmma takes: k16, FP8 k32
    // FP8: no lagging max (FA_FWD_RESCALE_SLACK), so that P = exp2(s - m + 8) stays <= 256
    constexpr float SLACK = FP8 ? 0.f : FA_FWD_RESCALE_SLACK;
    constexpr int NV = FP8 ? 2 : 0;     // FP8: tiles where V lands before its transpose
    constexpr int OH = D > 128 ? 2 : 1; // O += P V in OH products of D / OH columns
    static_assert(THREADS == 128 * (NC + 1) && BQ == 64 * NC && (NC == 2 || (NC == 3 && !FP8)),
                  "a loading warpgroup and NC computing ones of 64 rows");
    // setmaxnreg.inc waits for registers the loader gave back: both must fit what
    // __launch_bounds__(THREADS, 1) allots the block (168 a thread at 384, 128 at 512)
    // FP8: its loader's transpose and copies in flight take more registers, P's fragments half
    // as many
    constexpr int LOAD_REGS = FP8 ? 56 : FA_FWD_WGMMA_LOAD_REGS_D(D);
    constexpr int MATH_REGS = FP8 ? 224 : FA_FWD_WGMMA_MATH_REGS_D(D);
    static_assert(128 * LOAD_REGS + 128 * NC * MATH_REGS <= THREADS * (65536 / THREADS / 8 * 8),
                  "loading and computing registers within the block's");
    static_assert(NQ * Q_BYTES + (2 * ST + NV) * TILE_BYTES + 8 * (4 + 4 * ST) + 1024 <=
                      (FP8 ? FA_FWD_WGMMA_SMEM_E4M3(D) : FA_FWD_WGMMA_SMEM(D)),
                  "the host's shared memory size");
    // wgmma's swizzle needs 1 KiB-aligned tiles; dynamic shared memory is only promised 16 bytes
    extern __shared__ __align__(1024) unsigned char fa_fwdw_raw[];
    const unsigned raw = fa_smem_addr(fa_fwdw_raw), sQ = (raw + 1023) & ~1023u;
    unsigned char *const fa_fwdw_smem = fa_fwdw_raw + (sQ - raw);
    const unsigned sK = sQ + NQ * Q_BYTES, sV = sK + ST * TILE_BYTES; // stage s at + s TILE_BYTES
    const unsigned sV_land = sV + ST * TILE_BYTES; // FP8: tile n's V lands at + (n & 1) TILE_BYTES
    // mbarriers: Q full and Q empty (two each), then per stage K full, V full, K empty, V empty
    // (stage s at + 8 s)
    const unsigned bar_q = sV_land + NV * TILE_BYTES, bar_q_empty = bar_q + 16;
    const unsigned bar_full_k = bar_q + 32;
    const unsigned bar_full_v = bar_full_k + 8 * ST, bar_empty_k = bar_full_v + 8 * ST;
    const unsigned bar_empty_v = bar_empty_k + 8 * ST;

    const int tid = threadIdx.x, wg = tid >> 7, wt = tid & 127;
    // Work items (query tile, head, batch entry): the grid's one (causal without
    // FA_FWD_WGMMA_CAUSAL_DYN: heaviest first), or where persistent and not causal items
    // blockIdx.x, + gridDim.x, ...: a tile's neighbours in that order are the other query tiles
    // of its head, whose K and V are then read from L2 (but for a bias shared by the batch
    // entries: those first, fa_bias_order).
    const bool persist = PERSIST && FA_FWD_WGMMA_PERSISTENT_CALL(D, p.causal);
    const int nqt = (p.seq_q + BQ - 1) / BQ;
    // p.use_tma: the loader's one thread copies each tile by the tensor-memory accelerator and
    // alone arrives at the full barriers (16-bit dtypes; FP8 transposes V on the way)
    constexpr bool TMA_IN = FA_FWD_WGMMA_TMA && TMA && !FP8;
    // and (TMA_OUT) stores O out of the Q buffer the computing warpgroups left it in
    constexpr bool TMA_OUT = TMA_IN && FA_FWD_WGMMA_TMA_STORE;
    // query tile qt's first row: qt BQ, or (FA_FWD_WGMMA_CAUSAL_END, 192-row tiles) that less the
    // last tile's padding, the partial tile then the first and rows before 0 neither read nor
    // written (with two computing warpgroups the switch cost 2-3 % where it had nothing to do);
    // with TMA_OUT the padding is whole 64-row boxes, which are skipped: a tensor-memory store
    // whose box starts before row 0 stops with an illegal instruction (H100)
    constexpr bool CEND = FA_FWD_WGMMA_CAUSAL_END && NC == 3;
    const int q_pad_rows = CEND && p.causal && !p.bias_dtype ? nqt * BQ - p.seq_q : 0;
    const int q_pad = TMA_OUT && p.use_tma ? q_pad_rows & ~63 : q_pad_rows;
    const int items = persist ? nqt * p.heads_q * p.batch : 1;
    auto item_of = [&](int k) { return persist ? k * (int)gridDim.x + (int)blockIdx.x : k; };
    // FA_FWD_WGMMA_CAUSAL_DYN: a causal call's items go to the blocks as their loaders ask
    // (p.item_counter), heaviest first; the loader passes each on to the computing warpgroups as
    // its query tile and (batch, head) pair in item_slot[k % NQ], written before it arrives at
    // that Q buffer's barrier (query tile -1: no more).
    const bool dyn = FA_FWD_WGMMA_CAUSAL_DYN && persist && p.causal;
    __shared__ int item_slot[2][2], item_taken[2];
    int *const counter = (int *)p.item_counter; // [0] items taken, [1] blocks done
    auto work = [&](int item, int &qt, int &h, int &b) {
        if (!persist) {
            qt = blockIdx.x;
            h = blockIdx.y;
            b = blockIdx.z;
            if (p.bias_dtype)
                fa_bias_order(p, blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z),
                              gridDim.x, gridDim.y, gridDim.z, qt, h, b);
            qt = p.causal ? (int)gridDim.x - 1 - qt : qt;
            return;
        }
        if (dyn) { // sections of gn (batch, head) pairs, each's last (heaviest) query tiles first
            const int hb = p.heads_q * p.batch; // gn: the pairs whose K and V fit DYN_L2 bytes
            const long long kv = max(1LL, 2LL * p.seq_k * D * ES); // (a 32-bit division below)
            const int fit = kv >= FA_FWD_WGMMA_DYN_L2 ? 1 : FA_FWD_WGMMA_DYN_L2 / (int)kv;
            const int gn = max(1, min(hb, fit));
            const int sec = item / (nqt * gn), r = item - sec * nqt * gn;
            const int n = min(gn, hb - sec * gn), pair = sec * gn + r % n;
            qt = nqt - 1 - r / n;
            const bool by_b = p.bias_dtype && p.batch > 1 && p.bias.stride_b == 0;
            h = by_b ? pair / p.batch : pair % p.heads_q; // (fa_bias_order)
            b = by_b ? pair % p.batch : pair / p.heads_q;
            return;
        }
        if (p.bias_dtype) {
            fa_bias_order(p, item, nqt, p.heads_q, p.batch, qt, h, b);
            return;
        }
        qt = item % nqt;
        h = item / nqt % p.heads_q;
        b = item / nqt / p.heads_q;
    };
    // The key tiles of query rows q0..: from t0 (a window's left edge), ntiles of them.
    auto key_tiles = [&](int q0, int &t0, int &ntiles) {
        t0 = fa_key_begin(p, q0) / BK;
        ntiles = max(0, (fa_key_end(p, q0, BQ) + BK - 1) / BK - t0);
    };

    const bool tma = TMA_IN && p.use_tma; // this call's loader
    const unsigned loaders = tma ? 1 : 128;
    if (tid == 0) {
        for (int i = 0; i < 2; i++) {
            fa_mbar_init(bar_q + 8 * i, loaders);
            fa_mbar_init(bar_q_empty + 8 * i, 128 * NC);
        }
        for (int s = 0; s < ST; s++) {
            fa_mbar_init(bar_full_k + 8 * s, loaders);
            fa_mbar_init(bar_full_v + 8 * s, loaders);
            fa_mbar_init(bar_empty_k + 8 * s, 128 * NC);
            fa_mbar_init(bar_empty_v + 8 * s, 128 * NC);
        }
    }
    __syncthreads();

    // FP8's loader: each K and V copy is issued before the previous one is waited for, so that a
    // copy's latency overlaps the transpose and the other copy (the 16-bit loader waits for all
    // its copies after each issue, which at FP8's rate put a whole copy's latency into every
    // step: 578 against 661 TF/s, docs/PERF.md). V(it) lands in its own tile as soon as one is
    // free; the ring's V stage is only needed, and waited for, when V(it) is transposed, in the
    // next step.
    auto fp8_load_tiles = [&](int t0, int ntiles, int g, const T *Kg, const T *Vg) {
        for (int it = 0; it <= ntiles; it++) {
            const int s = (g + it) % ST, use = (g + it) / ST;
            if (it < ntiles) {
                if (use > 0)
                    fa_mbar_wait(bar_empty_k + 8 * s, (use - 1) & 1);
                fa_fwdw_load<D, BK>(sK + s * TILE_BYTES, Kg, p.k.stride_s, (t0 + it) * BK, p.seq_k,
                                    p.head_dim, wt);
                fa_cp_async_commit();
            }
            if (it > 0) { // V(it - 1): every thread's copies landed (K(it) may still fly)
                const int sp = (g + it - 1) % ST, usep = (g + it - 1) / ST;
                if (it < ntiles)
                    fa_cp_async_wait<1>();
                else
                    fa_cp_async_wait<0>();
                if (usep > 0)
                    fa_mbar_wait(bar_empty_v + 8 * sp, (usep - 1) & 1);
                fa_named_barrier(5, 128);
                fa_fp8_transpose_v(sV + sp * TILE_BYTES, sV_land + ((g + it - 1) & 1) * TILE_BYTES,
                                   wt);
                fa_fence_proxy_async();
                fa_mbar_arrive(bar_full_v + 8 * sp);
            }
            if (it < ntiles) { // (V(it - 2)'s landing tile was read before the barrier above)
                fa_fwdw_load<D, BK>(sV_land + ((g + it) & 1) * TILE_BYTES, Vg, p.v.stride_s,
                                    (t0 + it) * BK, p.seq_k, p.head_dim, wt);
                fa_cp_async_commit();
                fa_cp_async_wait<1>(); // K(it) landed (V(it) may fly)
                fa_fence_proxy_async();
                fa_mbar_arrive(bar_full_k + 8 * s);
            }
        }
    };

    // Before the loader's item k (query tile qt of head h, batch entry b) goes into its Q
    // buffer: the item before last has written its O out of it; (dyn) the computing warpgroups
    // are told the item in item_slot, before the Q barrier's arrive.
    auto q_buffer_for = [&](int k, int qt, int h, int b) {
        if (k >= NQ)
            fa_mbar_wait(bar_q_empty + 8 * (k % NQ), (k / NQ - 1) & 1);
        if (dyn && wt == 0) {
            item_slot[k % NQ][0] = qt;
            item_slot[k % NQ][1] = b * p.heads_q + h;
        }
    };
    // FA_FWD_WGMMA_CAUSAL_DYN, after the loader's last item k - 1 (by every thread that arrives
    // at the Q barriers): the computing warpgroups hear that none is left as item k = -1, and the
    // last block to stop taking items puts the counter back for the next call.
    auto no_more_items = [&](int k) {
        if (k >= NQ)
            fa_mbar_wait(bar_q_empty + 8 * (k % NQ), (k / NQ - 1) & 1);
        if (wt == 0)
            item_slot[k % NQ][0] = -1;
        fa_mbar_arrive(bar_q + 8 * (k % NQ));
        if (wt == 0 && atomicAdd(counter + 1, 1) == (int)gridDim.x - 1) {
            atomicExch(counter, 0);
            atomicExch(counter + 1, 0);
        }
    };
    // The tensor-memory loader (thread 0 of the loading warpgroup): the same order of items,
    // waits and tiles as the copying loader below, each tile as boxes of 64 rows x 64 head dims
    // (p.tma_map: q, k, v) landing in the tile's 128-byte-row blocks, swizzled as wgmma reads
    // them; rows and head dims outside the tensor (before row 0 too) land as zeros.
    auto tma_tile = [&](auto rows_c, unsigned dst, int which, int row0, int head, int b,
                        unsigned bar) {
        constexpr int ROWS = decltype(rows_c)::value;
#pragma unroll 1
        for (int i = 0; i < D / 64 * (ROWS / 64); i++) // box i: column block i / (ROWS / 64)
            fa_tma_load_4d(dst + i * 64 * 128, p.tma_map[which], 64 * (i / (ROWS / 64)),
                           row0 + 64 * (i % (ROWS / 64)), head, b, bar);
    };
    // TMA_OUT: O of the loader's item j (BQ rows from q0 of head h, batch entry b) out of its Q
    // buffer once the computing warpgroups have left it there (their arrive at its empty barrier).
    // LEAN (three computing warpgroups, whose loader has 24 registers): the item's coordinates
    // read back from its slot (dyn) or worked out again, not kept
    constexpr bool LEAN = NC == 3;
    struct Item {
        int q0, h, b;
    };
    auto store_o = [&](int j, Item it) {
        fa_mbar_wait<FA_FWD_WGMMA_LOADER_HINT>(bar_q_empty + 8 * (j % NQ), (j / NQ) & 1);
        if (LEAN) {
            int qt;
            if (dyn) { // (item_slot[j % NQ] is item j's until item j + NQ's Q goes in)
                const volatile int *const slot = item_slot[j % NQ];
                const int pair = slot[1];
                qt = slot[0];
                it.h = pair % p.heads_q;
                it.b = pair / p.heads_q;
            } else {
                work(item_of(j), qt, it.h, it.b);
            }
            it.q0 = qt * BQ - q_pad;
        }
#pragma unroll 1
        for (int i = 0; i < D / 64 * (BQ / 64); i++) // box i: column block i / (BQ / 64)
            if (!CEND || it.q0 + 64 * (i % (BQ / 64)) >= 0)
                fa_tma_store_4d(p.tma_map[3], sQ + (j % NQ) * Q_BYTES + i * 64 * 128,
                                64 * (i / (BQ / 64)), it.q0 + 64 * (i % (BQ / 64)), it.h, it.b);
        fa_bulk_commit();
    };
    auto tma_loader = [&]() {
        int g = 0, k = 0;
        Item last{}, before{}; // TMA_OUT, not LEAN: items k - 1 and k - 2, O maybe in a Q buffer
        for (;; k++) {
            const int item = dyn ? atomicAdd(counter, 1) : item_of(k);
            if (item >= items)
                break;
            int qt, h, b, t0, ntiles;
            work(item, qt, h, b);
            const int q0 = qt * BQ - q_pad, hk = h / p.group;
            key_tiles(q0, t0, ntiles);
            if (TMA_OUT && k >= NQ) { // item k - NQ's O out before Q(k) goes in
                store_o(k - NQ, NQ == 2 ? before : last);
                fa_bulk_wait<0, true>();
            }
            if (!LEAN) {
                before = last;
                last = Item{q0, h, b};
            }
            q_buffer_for(k, qt, h, b);
            fa_mbar_arrive_expect_tx(bar_q + 8 * (k % NQ), Q_BYTES);
            tma_tile(std::integral_constant<int, BQ>{}, sQ + (k % NQ) * Q_BYTES, 0, q0, h, b,
                     bar_q + 8 * (k % NQ));
            for (int it = 0; it < ntiles; it++) {
                const int s = (g + it) % ST, use = (g + it) / ST, key0 = (t0 + it) * BK;
                if (use > 0)
                    fa_mbar_wait<FA_FWD_WGMMA_LOADER_HINT>(bar_empty_k + 8 * s, (use - 1) & 1);
                fa_mbar_arrive_expect_tx(bar_full_k + 8 * s, TILE_BYTES);
                tma_tile(std::integral_constant<int, BK>{}, sK + s * TILE_BYTES, 1, key0, hk, b,
                         bar_full_k + 8 * s);
                if (use > 0)
                    fa_mbar_wait<FA_FWD_WGMMA_LOADER_HINT>(bar_empty_v + 8 * s, (use - 1) & 1);
                fa_mbar_arrive_expect_tx(bar_full_v + 8 * s, TILE_BYTES);
                tma_tile(std::integral_constant<int, BK>{}, sV + s * TILE_BYTES, 2, key0, hk, b,
                         bar_full_v + 8 * s);
            }
            g += ntiles;
        }
        if (TMA_OUT && k >= NQ)
            store_o(k - NQ, NQ == 2 ? before : last);
        if (dyn)
            no_more_items(k);
        if (TMA_OUT && NQ == 2 && k >= 1)
            store_o(k - 1, last);
        if (TMA_OUT) // (read out before the block's shared memory goes)
            fa_bulk_wait<0, false>();
    };

    if (wg == 0) { // the loader
        fa_setmaxnreg_dec<LOAD_REGS>();
        if (tma) {
            if (wt == 0)
                tma_loader();
            return;
        }
        int g = 0; // key tiles of the earlier items: the ring's position
        // the loader's item k: its turn in the grid's order, or (dyn) the counter's next, which
        // thread 0 takes and the loader's warps share (named barrier 7)
        auto take = [&](int k) {
            if (!dyn)
                return item_of(k);
            if (wt == 0)
                item_taken[k & 1] = atomicAdd(counter, 1);
            fa_named_barrier(7, 128);
            return *(volatile int *)&item_taken[k & 1];
        };
        int k = 0;
#pragma unroll 1
        for (int item = 0; (item = take(k)) < items; k++) {
            int qt, h, b, t0, ntiles;
            work(item, qt, h, b);
            const int q0 = qt * BQ - q_pad, hk = h / p.group;
            key_tiles(q0, t0, ntiles);
            const T *Qg = (const T *)p.q.ptr + fa_at(p.q, b, 0, h);
            const T *Kg = (const T *)p.k.ptr + fa_at(p.k, b, 0, hk);
            const T *Vg = (const T *)p.v.ptr + fa_at(p.v, b, 0, hk);
            q_buffer_for(k, qt, h, b);
            fa_fwdw_load<D, BQ, CEND>(sQ + (k % NQ) * Q_BYTES, Qg, p.q.stride_s, q0, p.seq_q,
                                      p.head_dim, wt);
            fa_cp_async_commit();
            // The copies must have landed, and be ordered before wgmma's async-proxy reads, before
            // the barrier releases them.
            fa_cp_async_wait<0>();
            fa_fence_proxy_async();
            fa_mbar_arrive(bar_q + 8 * (k % NQ));
            // K of tile it is needed by step it's S and free once that S is done; V only by step
            // it + 1's P V. So iteration it copies K(it) once S(it - ST) is done and V(it) once P V
            // of tile it - ST is, and K(it) and V(it - 1) are released together: copies that one
            // buffer for both would start a step later (a whole step's slack with two stages).
            // FP8: V lands in a tile of its own and is transposed into the ring a step later.
            if constexpr (FP8) {
                fp8_load_tiles(t0, ntiles, g, Kg, Vg);
            } else {
                for (int it = 0; it <= ntiles; it++) {
                    const int s = (g + it) % ST, use = (g + it) / ST;
                    if (it < ntiles) {
                        if (use > 0)
                            fa_mbar_wait(bar_empty_k + 8 * s, (use - 1) & 1);
                        fa_fwdw_load<D, BK>(sK + s * TILE_BYTES, Kg, p.k.stride_s, (t0 + it) * BK,
                                            p.seq_k, p.head_dim, wt);
                        fa_cp_async_commit();
                    }
                    fa_cp_async_wait<0>();
                    fa_fence_proxy_async();
                    if (it < ntiles)
                        fa_mbar_arrive(bar_full_k + 8 * s);
                    if (it > 0)
                        fa_mbar_arrive(bar_full_v + 8 * ((g + it - 1) % ST));
                    if (it < ntiles) {
                        if (use > 0)
                            fa_mbar_wait(bar_empty_v + 8 * s, (use - 1) & 1);
                        fa_fwdw_load<D, BK>(sV + s * TILE_BYTES, Vg, p.v.stride_s, (t0 + it) * BK,
                                            p.seq_k, p.head_dim, wt);
                        fa_cp_async_commit();
                    }
                }
            }
            g += ntiles;
        }
        if (dyn)
            no_more_items(k);
        return;
    }

    fa_setmaxnreg_inc<MATH_REGS>();
    const int cw = wg - 1, wq = wt >> 5, lane = tid & 31;
    int g = 0; // as the loader's
    // the computing warpgroups' item k: as the loader's, or (dyn) k itself until the loader's slot
    // says none is left (the item is then read from the slot; a form returning the item's fields
    // through references made the softcap's bf16 head-dim-128 kernel spill 44 bytes more)
    auto given = [&](int k) {
        if (!dyn)
            return item_of(k);
        fa_mbar_wait(bar_q + 8 * (k % NQ), (k / NQ) & 1);
        return *(volatile int *)&item_slot[k % NQ][0] < 0 ? items : k;
    };
    // Pingpong (FA_FWD_WGMMA_PINGPONG): the computing warpgroups take turns in a ring to issue
    // their wgmma, so that the others' softmax (exp2 on the SFU) runs while one's products hold
    // the tensor cores. Warpgroup cw's turn waits on named barrier TURN + cw, which the one before
    // it in the ring arrives at when its turn is issued; the last warpgroup gives the first turn
    // and skips its last arrive, so every arrive meets a wait. (Barriers 1..NC are the
    // epilogue's.) RING (FA_FWD_WGMMA_RING_ITEMS): one ring over all of the block's items, so
    // that the first warpgroup's next item starts while the last one's product and epilogue
    // finish; its last arrive is then taken by the first warpgroup after the last item.
    constexpr int TURN = 1 + NC;
    constexpr bool RING = FA_FWD_WGMMA_PINGPONG && FA_FWD_WGMMA_RING_ITEMS;
    if (RING && cw == NC - 1)
        fa_named_arrive(TURN, 256);
#pragma unroll 1
    for (int k = 0, item = 0; (item = given(k)) < items; k++) {
        int qt, h, b, t0, ntiles;
        if (dyn) {
            const volatile int *const slot = item_slot[k % NQ];
            const int pair = slot[1];
            qt = slot[0];
            h = pair % p.heads_q;
            b = pair / p.heads_q;
        } else {
            work(item, qt, h, b);
        }
        const int q0 = qt * BQ - q_pad;
        key_tiles(q0, t0, ntiles);
        const unsigned sQk = sQ + (k % NQ) * Q_BYTES; // this item's Q, then its O on the way out
        unsigned char *const q_smem = fa_fwdw_smem + (k % NQ) * Q_BYTES;
        const int r0 = q0 + 64 * cw; // this warpgroup's first row
        // Tiles (counted from t0) before `lead` and from `full` on are masked. Both warpgroups run
        // every tile of the block and decide everything per block, not per warpgroup: the control
        // flow around wgmma is then uniform (ptxas serialises wgmma in paths it cannot prove
        // uniform), and pingpong turns pair up.
        int nfull = p.seq_k / BK, nlead = 0; // absolute tile indices
        if (p.causal) {
            // keys the block's row 0 sees
            const long long vis = (long long)q0 + p.causal_offset + 1;
            nfull = (int)min((long long)nfull, max(0LL, vis) / BK);
        }
        if (p.has_left) { // the first key the block's last row sees
            const long long first = (long long)q0 + BQ - 1 + p.left_offset;
            nlead = (int)((max(0LL, first) + BK - 1) / BK);
        }
        const int lead = min(max(nlead - t0, 0), ntiles);
        const int full = max(lead, min(max(nfull - t0, 0), ntiles));
        const int row_lo = r0 + 16 * wq + (lane >> 2); // this thread's rows: row_lo, row_lo + 8
        const int t2 = (lane & 3) * 2;
        // c takes S to log2 units in the exponent's multiply. A softcap or a bias (or ALiBi where c
        // would be 0) makes S the (capped, biased) scores in log2 units, with c = 1; ALiBi alone
        // leaves S as q.k (c = scale log2 e) and adds its term divided by c: one FFMA a score.
        // FP8: dq dk scale the scores, dv the output (fa_cuda_params.descale)
        float scale_log2 = p.scale_log2, softcap_k = p.softcap_k, dv = 1.f;
        if constexpr (FP8) {
            const int hk = h / p.group;
            const float dqk = fa_descale(p, 0, b, hk) * fa_descale(p, 1, b, hk);
            scale_log2 *= dqk;
            softcap_k *= dqk;
            dv = fa_descale(p, 2, b, hk);
        }
        const bool cap = p.softcap != 0.f;
        const bool logs = cap || p.bias_dtype || (p.has_alibi && scale_log2 == 0.f);
        // FA_FWD_WGMMA_BIAS_PAIRS: the bias's base and strides even (in elements, the base
        // aligned to two), so that a lane reads its two neighbouring keys in one load
        const bool bias_f32 = p.bias_dtype == FA_CUDA_BIAS_F32;
        const bool bias_pairs =
            p.bias_dtype &&
            (((unsigned long long)p.bias.ptr & (bias_f32 ? 7u : 3u)) |
             ((unsigned long long)(p.bias.stride_b | p.bias.stride_s | p.bias.stride_h) & 1u)) == 0;
        const float c = logs ? 1.f : scale_log2;
        const float slope = fa_alibi_slope(p, b, h) / c;
        const float masked = c > 0.f ? -INFINITY : INFINITY;
        // A softcap alone (FOLD, chosen by the host), on steps that need no mask: S keeps
        // r = fa_softcap_recip, the capped score in log2 units being C (1 - 2 r), C = softcap
        // log2 e. The row maximum is then C (1 - 2 min r), and P = exp2(fma(r, -2 C, C - m)): the
        // two instructions a score that made C (1 - 2 r) - m go into the exponent's FFMA. Only
        // where C < 1024, so that C - m keeps the LSE's precision.
        const bool fold = FOLD && cap && !p.has_alibi && !p.bias_dtype && p.softcap_log2 < 1024.f;
        constexpr bool BF16 = std::is_same<T, __nv_bfloat16>::value;
        // HALF (bf16 at 128-key tiles with three computing warpgroups, the k128 kernel): masked
        // tiles, whose P goes in with its remainder P - bf16(P), run as two halves of 64 keys
        // (half_tiles), a half's P in ph's first four quads and its remainder in the last four,
        // so that the registers are a whole tile's as for f16; the last tile always so, so that
        // the item's last product is always a half's.
        constexpr bool HALF = BF16 && NC == 3 && BK == 128;
        // OVERLAP where it measured faster (forty-second session): three computing warpgroups
        // on 64-key tiles, +1-4 %, not the softcap's kernels (-3.5 %); with two warpgroups -3 to
        // +2 % (pingpong already keeps the tensor cores busy through a softmax), and f16's
        // 128-key tiles spill (184 bytes). bf16 (OVERLAP_BF16) on its unmasked steps alone (the
        // remainders of its masked tiles: 40-88 bytes of spills).
        constexpr bool OV_REGS = NC == 3 && BK == 64 && !FOLD;
        constexpr bool OVERLAP = FA_FWD_WGMMA_OVERLAP && OV_REGS && !BF16;
        constexpr bool OVERLAP_BF16 = FA_FWD_WGMMA_OVERLAP && OV_REGS && BF16;

        float o[D / 2];
#pragma unroll
        for (int i = 0; i < D / 2; i++)
            o[i] = 0.f;
        float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
        float sc[BK / 2]; // S: sc[4 n + e] = row row_lo + 8 (e >> 1), key 8 n + t2 + (e & 1)
        // P of the previous tile, rounded to T, as the A fragments of O += P V (keys KSTEP k2..,
        // FP8 in fa_fp8_key_of's order); for bf16 on the masked tiles also the remainder
        // P - bf16(P), as in fa_forward_mma.cuh
        unsigned ph[BK / KSTEP][4], pl[BF16 && !HALF ? BK / 16 : 1][4];
        const unsigned q_at = sQk + cw * 64 * 128;
        // the descriptor of the operand a + b bytes after `at` (FA_FWD_WGMMA_DESC_ADD: added to
        // `at`'s, where building each one from its address took four instructions a product;
        // not for bf16, whose kernels then spill 8-84 bytes)
        auto desc = [&](unsigned at, unsigned a, unsigned b, unsigned lbo) {
            if constexpr (FA_FWD_WGMMA_DESC_ADD && !BF16)
                return fa_wgmma_desc_add(fa_wgmma_desc(at, lbo, 1024), a + b);
            else
                return fa_wgmma_desc(at + a + b, lbo, 1024);
        };

        auto issue_s = [&](int it) {
            const unsigned k_at = sK + ((g + it) % ST) * TILE_BYTES;
#pragma unroll
            for (int kk = 0; kk < D / KSTEP; kk++) {
                const unsigned long long qd = desc(q_at, (kk >> 2) * BQ * 128, (kk & 3) * 32, 16);
                const unsigned long long kd = desc(k_at, (kk >> 2) * BK * 128, (kk & 3) * 32, 16);
                if constexpr (FP8)
                    fa_wgmma_ss_e4m3_n128(sc, qd, kd, kk > 0);
                else
                    fa_wgmma_ss<T, BK>(sc, qd, kd, kk > 0);
            }
        };
        auto issue_pv = [&](int it, auto lo_c) {
            const unsigned v_at = sV + ((g + it) % ST) * TILE_BYTES;
            if constexpr (FP8) { // V^T: 128-byte rows of keys, k32 steps along them
#pragma unroll
                for (int k2 = 0; k2 < BK / KSTEP; k2++)
                    fa_wgmma_rs_e4m3_n128(o, ph[k2], desc(v_at, k2 * 32, 0, 16));
            } else {
#pragma unroll
                for (int k2 = 0; k2 < BK / 16; k2++)
#pragma unroll
                    for (int h = 0; h < OH; h++) { // head dim 256: two products of 128 columns
                        float(&oh)[D / 2 / OH] =
                            *reinterpret_cast<float(*)[D / 2 / OH]>(&o[h * D / 2 / OH]);
                        const unsigned long long vd =
                            desc(v_at, k2 * 2048, h * 2 * BK * 128, BK * 128);
                        fa_wgmma_rs<T, D / OH>(oh, ph[k2], vd);
                        if constexpr (decltype(lo_c)::value)
                            fa_wgmma_rs<T, D / OH>(oh, pl[k2 % (BF16 && !HALF ? BK / 16 : 1)], vd);
                    }
            }
        };
        // P of keys 8 n + t2, + 1 of row row_lo + 8 r into ph (bf16 on masked tiles: and the
        // remainder P - bf16(P))
        auto pack_p = [&](int n, int r, float p0, float p1, auto mask_c) {
            if constexpr (FP8) { // keys 8 n + t2, + 1: bytes 2 (n & 1), + 1 of the fragment
                // register of rows r and key half (n & 2) / 2
                unsigned &f = ph[n / 4][r + (n & 2)];
                const unsigned e = fa_e4m3x2(p0, p1);
                f = n & 1 ? __byte_perm(f, e, 0x5410) : e;
            } else {
                const unsigned hi = fa_pack2<T>(p0, p1);
                ph[n / 2][(n & 1) * 2 + r] = hi;
                if constexpr (BF16 && decltype(mask_c)::value) { // (HALF: in ph's second half)
                    const unsigned lo = fa_pack2<T>(p0 - __uint_as_float(hi << 16),
                                                    p1 - __uint_as_float(hi & 0xffff0000u));
                    if constexpr (HALF)
                        ph[BK / 32 + n / 2][(n & 1) * 2 + r] = lo;
                    else
                        pl[n / 2][(n & 1) * 2 + r] = lo;
                }
            }
        };
        // O's row r (row_lo + 8 r) times a
        auto scale_o = [&](int r, float a) {
#pragma unroll
            for (int n = 0; n < D / 8; n++) {
                o[4 * n + 2 * r] *= a;
                o[4 * n + 2 * r + 1] *= a;
            }
        };
        // OVERLAP's deferred work: O's rescale (alpha_o, where rescale_o) and P's fragments
        float alpha_o[2] = {1.f, 1.f};
        bool rescale_o = false;
        // Mask, online softmax and P of tile `it` from sc (O is not in flight here); fold_c: the
        // softcap folded (a code path of its own, so that the others' code stays as it was);
        // defer_c (OVERLAP, while O += P V of the tile before is in flight): P stays in sc as
        // f32, and O's rescale and P's fragments wait for finish_p.
        auto softmax_as = [&](int it, int koff, auto w_c, auto mask_c, auto fold_c, auto defer_c) {
            constexpr int W = decltype(w_c)::value; // keys from koff: the tile, or half of it
            constexpr bool mask = decltype(mask_c)::value;
            constexpr bool fold_s = decltype(fold_c)::value;
            constexpr bool defer = decltype(defer_c)::value;
            const int k0 = (t0 + it) * BK + koff;
            // S in units of cs, plus c0: c and 0, or folded -2 C and C
            const float cs = fold_s ? -2.f * p.softcap_log2 : c;
            const float c0 = fold_s ? p.softcap_log2 : 0.f;
            if constexpr (fold_s) {
#pragma unroll
                for (int i = 0; i < W / 2; i++)
                    sc[i] = fa_softcap_recip(sc[i], softcap_k);
            } else if (cap) {
#pragma unroll
                for (int i = 0; i < W / 2; i++)
                    sc[i] = p.softcap_log2 * fa_softcap_tanh(sc[i], softcap_k);
            }
            // row row_lo + 8 r's distance from key k0 + t2 is d(r); sc[4 n + 2 r + e] is that
            // key + 8 n + e
            auto d = [&](int r) { return (float)(row_lo + 8 * r + (p.seq_k - p.seq_q) - k0 - t2); };
            if (logs && (p.has_alibi || p.bias_dtype)) {  // (slope 0 without ALiBi)
                const float s_c = cap ? 1.f : scale_log2; // to log2 units where not capped
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const long long brow = fa_bias_row(p, b, row_lo + 8 * r, h);
                    if (p.bias_dtype) // the next tile's row, a line a lane (128 keys of f32; two
                        // tiles ahead measured slower)
                        fa_bias_prefetch(
                            p, brow,
                            k0 + W + (t2 >> 1) * (p.bias_dtype == FA_CUDA_BIAS_F32 ? 32 : 64));
#pragma unroll
                    for (int n = 0; n < W / 8; n++)
#pragma unroll
                        for (int e = 0; e < 2; e++)
                            sc[4 * n + 2 * r + e] = fa_alibi(sc[4 * n + 2 * r + e] * s_c, slope,
                                                             d(r) - (float)(8 * n + e));
                    if (FA_FWD_WGMMA_BIAS_PAIRS && !mask && bias_pairs) {
                        // a tile without a mask has every key inside: a lane's two keys in one
                        // load at an immediate offset from the row's pointer
                        const char *row =
                            (const char *)p.bias.ptr + (brow + k0 + t2) * (bias_f32 ? 4 : 2);
#pragma unroll
                        for (int n = 0; n < W / 8; n++) {
                            const float2 v = fa_bias_pair(p, bias_f32, row, 8 * n);
                            sc[4 * n + 2 * r] += FA_LOG2E * v.x;
                            sc[4 * n + 2 * r + 1] += FA_LOG2E * v.y;
                        }
                    } else if (p.bias_dtype) {
#pragma unroll
                        for (int n = 0; n < W / 8; n++)
#pragma unroll
                            for (int e = 0; e < 2; e++)
                                sc[4 * n + 2 * r + e] += fa_bias(p, brow, k0 + t2 + 8 * n + e);
                    }
                }
            } else if (p.has_alibi) {
#pragma unroll
                for (int r = 0; r < 2; r++)
#pragma unroll
                    for (int n = 0; n < W / 8; n++)
#pragma unroll
                        for (int e = 0; e < 2; e++)
                            sc[4 * n + 2 * r + e] =
                                fa_alibi(sc[4 * n + 2 * r + e], slope, d(r) - (float)(8 * n + e));
            }
            if constexpr (mask) { // per row: the visible keys [beg, end) relative to key k0 + t2
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const int row = row_lo + 8 * r, kt = k0 + t2;
                    const int end =
                        (p.causal ? min(p.seq_k, row + p.causal_offset + 1) : p.seq_k) - kt;
                    const int beg = p.has_left ? row + p.left_offset - kt : 0;
#pragma unroll
                    for (int n = 0; n < W / 8; n++)
#pragma unroll
                        for (int e = 0; e < 2; e++)
                            if (n * 8 + e >= end || n * 8 + e < beg)
                                sc[4 * n + 2 * r + e] = masked;
                }
            }
            float tm[2];
            bool grow = false;
#pragma unroll
            for (int r = 0; r < 2; r++) {
                float mx = sc[2 * r];
                if (cs > 0.f) {
#pragma unroll
                    for (int n = 0; n < W / 8; n++)
                        mx = fmaxf(mx, fmaxf(sc[4 * n + 2 * r], sc[4 * n + 2 * r + 1]));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                } else {
#pragma unroll
                    for (int n = 0; n < W / 8; n++)
                        mx = fminf(mx, fminf(sc[4 * n + 2 * r], sc[4 * n + 2 * r + 1]));
                    mx = fminf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                    mx = fminf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                }
                if constexpr (fold_s)
                    tm[r] = fmaf(mx, cs, c0);
                else
                    tm[r] = mx * c;
                grow |= tm[r] > m[r] + SLACK;
            }
            // the lagging max of fa_forward_mma.cuh (FA_FWD_RESCALE_SLACK; FP8: none)
            if constexpr (defer)
                rescale_o = false;
            if (__any_sync(0xffffffffu, grow)) {
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const float m_new = fmaxf(m[r], tm[r]);
                    const float alpha = fa_exp2(m[r] - (m_new == -INFINITY ? 0.f : m_new));
                    m[r] = m_new;
                    l[r] *= alpha;
                    if constexpr (defer) {
                        alpha_o[r] = alpha;
                        rescale_o = true;
                    } else {
                        scale_o(r, alpha);
                    }
                }
            }
            float m_use[2], sum[2] = {0.f, 0.f};
#pragma unroll
            for (int r = 0; r < 2; r++) // FP8: P = exp2(s - m + 8), up to 256
                m_use[r] = (m[r] == -INFINITY ? 0.f : m[r]) - (FP8 ? 8.f : 0.f) - c0;
            auto make_p = [&](auto fused_c) {
                constexpr bool fused = decltype(fused_c)::value;
                auto arg = [&](float s, int r) {
                    return fused ? fmaf(s, cs, -m_use[r]) : __fmul_rn(s, cs) - m_use[r];
                };
#pragma unroll
                for (int n = 0; n < W / 8; n++)
#pragma unroll
                    for (int r = 0; r < 2; r++) {
                        const float p0 = fa_exp2(arg(sc[4 * n + 2 * r], r));
                        const float p1 = fa_exp2(arg(sc[4 * n + 2 * r + 1], r));
                        sum[r] += p0 + p1;
                        if constexpr (defer) {
                            sc[4 * n + 2 * r] = p0;
                            sc[4 * n + 2 * r + 1] = p1;
                        } else {
                            pack_p(n, r, p0, p1, mask_c);
                        }
                    }
            };
            // One FFMA a score where the warp's row maxima are below 64 (log2 units): the residual
            // of RN(s c) that fma(s, c, -m) leaves in the largest score's exponent is then below
            // 2^-19, far under P's rounding to T. Larger maxima take RN(s c) - m, so that the
            // largest score's P is exactly 1 (the eleventh session's numerics, docs/PERF.md).
            if (__all_sync(0xffffffffu, fabsf(m_use[0]) < 64.f && fabsf(m_use[1]) < 64.f))
                make_p(std::true_type{});
            else
                make_p(std::false_type{});
            l[0] += sum[0];
            l[1] += sum[1];
        };
        using WB = std::integral_constant<int, BK>;
        using Now = std::false_type;
        auto softmax = [&](int it, auto mask_c, auto defer_c) {
            if constexpr (FOLD && !decltype(mask_c)::value)
                if (fold) {
                    softmax_as(it, 0, WB{}, mask_c, std::true_type{}, defer_c);
                    return;
                }
            softmax_as(it, 0, WB{}, mask_c, std::false_type{}, defer_c);
        };
        // the deferred softmax's end, once O += P V of the tile before has completed
        auto finish_p = [&](auto mask_c) {
            if (rescale_o) {
                scale_o(0, alpha_o[0]);
                scale_o(1, alpha_o[1]);
            }
#pragma unroll
            for (int n = 0; n < BK / 8; n++)
#pragma unroll
                for (int r = 0; r < 2; r++)
                    pack_p(n, r, sc[4 * n + 2 * r], sc[4 * n + 2 * r + 1], mask_c);
        };
        // K and V of tile it (counted from this item's first) have landed
        auto wait_k = [&](int it) {
            fa_mbar_wait(bar_full_k + 8 * ((g + it) % ST), ((g + it) / ST) & 1);
        };
        auto wait_v = [&](int it) {
            fa_mbar_wait(bar_full_v + 8 * ((g + it) % ST), ((g + it) / ST) & 1);
        };
        auto turn_begin = [&]() {
            if constexpr (FA_FWD_WGMMA_PINGPONG)
                fa_named_barrier(TURN + cw, 256);
        };
        auto turn_end = [&](bool last) {
            if constexpr (FA_FWD_WGMMA_PINGPONG)
                if (RING || !(last && cw == NC - 1)) // (1 - cw at two: the modulo's spilled)
                    fa_named_arrive(TURN + (NC == 2 ? 1 - cw : (cw + 1) % NC), 256);
        };
        // Step `it`: S of tile it and O += P V of tile it - 1 in one turn, then (while the other
        // warpgroup's turn runs) K of tile it and V of tile it - 1 go back to the loader and tile
        // it's softmax runs.
        // OVERLAP (FA_FWD_WGMMA_OVERLAP): S and O += P V committed apart, the softmax run once S
        // has landed while the product is still in flight, O's rescale and P's fragments after.
        auto step = [&](int it, auto lo_c, auto mask_c) {
            constexpr bool OV =
                OVERLAP || (OVERLAP_BF16 && !decltype(lo_c)::value && !decltype(mask_c)::value);
            wait_k(it);
            wait_v(it - 1);
            fa_wgmma_hold(o);
            fa_wgmma_hold_u(ph);
            if constexpr (!(OV && BF16)) // (bf16's unmasked steps neither read nor write it)
                fa_wgmma_hold_u(pl);
            turn_begin();
            fa_wgmma_fence();
            issue_s(it);
            if constexpr (OV)
                fa_wgmma_commit();
            issue_pv(it - 1, lo_c);
            fa_wgmma_commit();
            turn_end(false);
            if constexpr (OV) {
                fa_wgmma_wait<1>();
                fa_wgmma_hold(sc);
                fa_mbar_arrive(bar_empty_k + 8 * ((g + it) % ST));
                softmax(it, mask_c, std::true_type{});
                fa_wgmma_wait<0>();
                fa_wgmma_hold(o);
                fa_wgmma_hold_u(ph);
                fa_mbar_arrive(bar_empty_v + 8 * ((g + it - 1) % ST));
                finish_p(mask_c);
            } else {
                fa_wgmma_wait<0>();
                fa_wgmma_hold(sc);
                fa_wgmma_hold(o);
                fa_mbar_arrive(bar_empty_k + 8 * ((g + it) % ST));
                fa_mbar_arrive(bar_empty_v + 8 * ((g + it - 1) % ST));
                softmax(it, mask_c, Now{});
            }
        };

        // HALF's tiles: S of half h of tile it (64 keys), and the products of P V owed: a whole
        // tile's (P in ph) or half h's (the first four quads of ph and the remainder's pl)
        auto half_tiles = [&](int lead, int full) {
            if constexpr (HALF) {
                using None = std::integral_constant<int, 0>;  // no product owed
                using Whole = std::integral_constant<int, 1>; // tile it - 1's, unmasked
                using HalfB = std::integral_constant<int, 2>; // tile it - 1's second half
                using W64 = std::integral_constant<int, BK / 2>;
                float(&s2)[BK / 4] = *reinterpret_cast<float(*)[BK / 4]>(sc); // a half's S
                auto s_half = [&](int it, int h) {
                    const unsigned k_at = sK + ((g + it) % ST) * TILE_BYTES + h * (BK / 2) * 128;
#pragma unroll
                    for (int kk = 0; kk < D / KSTEP; kk++)
                        fa_wgmma_ss<T, BK / 2>(
                            s2, desc(q_at, (kk >> 2) * BQ * 128, (kk & 3) * 32, 16),
                            desc(k_at, (kk >> 2) * BK * 128, (kk & 3) * 32, 16), kk > 0);
                };
                auto pv_half = [&](int it, int h) {
                    const unsigned v_at = sV + ((g + it) % ST) * TILE_BYTES + h * (BK / 32) * 2048;
#pragma unroll
                    for (int k2 = 0; k2 < BK / 32; k2++) {
                        const unsigned long long vd = desc(v_at, k2 * 2048, 0, BK * 128);
                        fa_wgmma_rs<T, D>(o, ph[k2], vd);
                        fa_wgmma_rs<T, D>(o, ph[BK / 32 + k2], vd);
                    }
                };
                // one turn: S (whole, or half h) of tile it with the product owed for tile it - 1
                auto turn = [&](int it, int h, auto owed_c) {
                    constexpr int owed = decltype(owed_c)::value;
                    fa_wgmma_hold(o);
                    if constexpr (owed != None::value)
                        fa_wgmma_hold_u(ph);
                    if (h < 0) // (S's old values: not read, whatever ran last)
                        fa_wgmma_fresh(sc);
                    else
                        fa_wgmma_fresh(s2);
                    turn_begin();
                    fa_wgmma_fence();
                    if (h < 0)
                        issue_s(it);
                    else
                        s_half(it, h);
                    if constexpr (owed == Whole::value)
                        issue_pv(it - 1, std::false_type{});
                    if constexpr (owed == HalfB::value)
                        pv_half(it - 1, 1);
                    fa_wgmma_commit();
                    turn_end(false);
                    fa_wgmma_wait<0>();
                    fa_wgmma_hold(o);
                };
                auto whole_tile = [&](int it, auto owed_c) {
                    constexpr bool owes = decltype(owed_c)::value != None::value;
                    wait_k(it);
                    if (owes)
                        wait_v(it - 1);
                    turn(it, -1, owed_c);
                    fa_wgmma_hold(sc);
                    fa_mbar_arrive(bar_empty_k + 8 * ((g + it) % ST));
                    if (owes)
                        fa_mbar_arrive(bar_empty_v + 8 * ((g + it - 1) % ST));
                    softmax_as(it, 0, WB{}, std::false_type{}, std::false_type{}, Now{});
                };
                auto halved_tile = [&](int it, auto owed_c) {
                    constexpr bool owes = decltype(owed_c)::value != None::value;
                    wait_k(it);
                    if (owes)
                        wait_v(it - 1);
                    turn(it, 0, owed_c);
                    fa_wgmma_hold(s2);
                    if (owes)
                        fa_mbar_arrive(bar_empty_v + 8 * ((g + it - 1) % ST));
                    softmax_as(it, 0, W64{}, std::true_type{}, std::false_type{}, Now{});
                    wait_v(it); // the first half's product now, with the second half's S
                    fa_wgmma_hold_u(ph);
                    fa_wgmma_hold(o);
                    fa_wgmma_fresh(s2);
                    turn_begin();
                    fa_wgmma_fence();
                    s_half(it, 1);
                    pv_half(it, 0);
                    fa_wgmma_commit();
                    turn_end(false);
                    fa_wgmma_wait<0>();
                    fa_wgmma_hold(s2);
                    fa_wgmma_hold(o);
                    fa_mbar_arrive(bar_empty_k + 8 * ((g + it) % ST));
                    softmax_as(it, BK / 2, W64{}, std::true_type{}, std::false_type{}, Now{});
                };
                // masked [0, lead), whole [lead, fullh), masked [fullh, ntiles): the last tile
                // halved
                const int fullh = max(lead, min(full, ntiles - 1));
                int it = 1;
                if (lead == 0 && fullh > 0)
                    whole_tile(0, None{});
                else
                    halved_tile(0, None{});
                for (; it < lead; it++)
                    halved_tile(it, HalfB{});
                if (it < fullh && lead > 0)
                    whole_tile(it++, HalfB{});
                for (; it < fullh; it++)
                    whole_tile(it, Whole{});
                if (it < ntiles && it == fullh && fullh > lead)
                    halved_tile(it++, Whole{});
                for (; it < ntiles; it++)
                    halved_tile(it, HalfB{});
                // the last tile's second half
                wait_v(ntiles - 1);
                fa_wgmma_hold_u(ph);
                fa_wgmma_hold(o);
                turn_begin();
                fa_wgmma_fence();
                pv_half(ntiles - 1, 1);
                fa_wgmma_commit();
                turn_end(true);
                fa_wgmma_wait<0>();
                fa_wgmma_hold(o);
                fa_mbar_arrive(bar_empty_v + 8 * ((g + ntiles - 1) % ST));
            }
        };
        fa_mbar_wait(bar_q + 8 * (k % NQ), (k / NQ) & 1);
        if constexpr (HALF) {
            if (ntiles > 0) {
                if (FA_FWD_WGMMA_PINGPONG && !RING && cw == NC - 1)
                    fa_named_arrive(TURN, 256);
                half_tiles(lead, full);
            }
        } else if (ntiles > 0) {
            if (FA_FWD_WGMMA_PINGPONG && !RING && cw == NC - 1)
                fa_named_arrive(TURN, 256);
            wait_k(0);
            turn_begin();
            fa_wgmma_fence();
            issue_s(0);
            fa_wgmma_commit();
            turn_end(false);
            fa_wgmma_wait<0>();
            fa_wgmma_hold(sc);
            fa_mbar_arrive(bar_empty_k + 8 * (g % ST));
            if (lead == 0 && full > 0)
                softmax(0, std::false_type{}, Now{});
            else
                softmax(0, std::true_type{}, Now{});
            using F = std::false_type;
            using M = std::true_type;
            using Lo = std::integral_constant<bool, BF16>; // the previous tile was masked
            // step(it, the previous tile masked, this one masked): masked [0, lead), unmasked
            // [lead, full), masked [full, ntiles)
            int it = 1;
            for (; it < lead; it++)
                step(it, Lo{}, M{});
            if (it < full && lead > 0) // it == lead
                step(it++, Lo{}, F{});
            // The last tile's O += P V is for bf16 with the remainder, which is 0 if that tile is
            // not masked: two wgmma paths chosen at run time would make ptxas serialise every
            // wgmma.
            auto no_remainder = [&]() {
#pragma unroll
                for (int k2 = 0; k2 < (BF16 ? BK / 16 : 1); k2++)
                    pl[k2][0] = pl[k2][1] = pl[k2][2] = pl[k2][3] = 0u;
            };
            if constexpr (OVERLAP_BF16) { // the same order, in a form that shows the compiler
                // that no remainder lives through the unmasked steps
                if (full > lead) {
                    for (; it < full; it++)
                        step(it, F{}, F{});
                    if (it < ntiles)
                        step(it++, F{}, M{});
                    else
                        no_remainder();
                }
                for (; it < ntiles; it++)
                    step(it, Lo{}, M{});
            } else {
                for (; it < full; it++)
                    step(it, F{}, F{});
                if (it < ntiles && it == full && full > lead)
                    step(it++, F{}, M{});
                for (; it < ntiles; it++)
                    step(it, Lo{}, M{});
                if (BF16 && ntiles - 1 >= lead && ntiles - 1 < full)
                    no_remainder();
            }
            wait_v(ntiles - 1);
            fa_wgmma_hold(o);
            fa_wgmma_hold_u(ph);
            fa_wgmma_hold_u(pl);
            turn_begin();
            fa_wgmma_fence();
            issue_pv(ntiles - 1, Lo{});
            fa_wgmma_commit();
            turn_end(true);
            fa_wgmma_wait<0>();
            fa_wgmma_hold(o);
            fa_mbar_arrive(bar_empty_v + 8 * ((g + ntiles - 1) % ST));
        }
        g += ntiles;

        float *L = (float *)p.lse.ptr + fa_at(p.lse, b, 0, h);
        float inv[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
            inv[r] = l[r] != 0.f ? dv / l[r] : 0.f;
        }
        if (p.has_lse && (lane & 3) == 0) {
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int gr = row_lo + r * 8;
                if (gr < p.seq_q && (!CEND || gr >= 0)) // (FP8: l sums P = exp2(s - m + 8))
                    L[gr * p.lse.stride_s] =
                        l[r] != 0.f ? (m[r] + log2f(l[r]) - (FP8 ? 8.f : 0.f)) * FA_LN2 : -INFINITY;
            }
        }
        if constexpr (FP8) { // two columns a thread, straight from the accumulators
            fa_fwdw_store_o<D>(p, o, inv, b, h, row_lo, t2);
        } else { // O / l through this warpgroup's rows of the Q tile (its own wgmma no longer read
            // them), then 16-byte stores
            T *Og = (T *)p.o.ptr + fa_at(p.o, b, 0, h);
            const int srow = 64 * cw + 16 * wq + (lane >> 2);
#pragma unroll
            for (int n = 0; n < D / 8; n++)
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const int row = srow + 8 * r;
                    const unsigned off = (unsigned)((n >> 3) * BQ * 128 + row * 128 +
                                                    (((n & 7) ^ (row & 7)) << 4) + t2 * 2);
                    *(unsigned *)(q_smem + off) =
                        fa_pack2<T>(o[4 * n + 2 * r] * inv[r], o[4 * n + 2 * r + 1] * inv[r]);
                }
            if (!(TMA_OUT && p.use_tma)) { // (else the loader's thread stores them)
                fa_named_barrier(1 + cw, 128);
#pragma unroll
                for (int i = 0; i < 64 * CH / 128; i++) {
                    const int cidx = wt + i * 128, row = cidx / CH, ch = cidx % CH, gr = r0 + row;
                    const int srw = 64 * cw + row;
                    if (gr < p.seq_q && (!CEND || gr >= 0) && ch * 8 < p.head_dim)
                        *(uint4 *)(Og + gr * p.o.stride_s + ch * 8) =
                            *(const uint4 *)(q_smem + (ch >> 3) * BQ * 128 + srw * 128 +
                                             (((ch & 7) ^ (srw & 7)) << 4));
                }
            }
        }
        // This warpgroup's rows of the Q buffer are read (or hold O for the loader's store): it
        // may refill (store) them. By a tensor copy, the async proxy: after the epilogue's generic
        // reads and writes. (The parameter read again, not kept in a register.)
        if (PERSIST || (TMA_OUT && p.use_tma)) {
            if (TMA_IN && p.use_tma)
                fa_fence_proxy_async();
            fa_mbar_arrive(bar_q_empty + 8 * (k % NQ));
        }
    }
    if (RING && cw == 0)
        fa_named_barrier(TURN, 256);
}
