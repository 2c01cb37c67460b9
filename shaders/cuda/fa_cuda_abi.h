// SPDX-License-Identifier: MIT
/* The one parameter block every CUDA kernel of flashattn takes by value, shared by the host code
 * (C11, backends/cuda) and the kernels (CUDA C++), so both sides agree on its layout. Pointers
 * already include each view's offset; strides are in elements; head_dim stride is 1. */
#ifndef FA_CUDA_ABI_H
#define FA_CUDA_ABI_H

/* The tensor maps' alignment, in C and in CUDA C++ */
#ifdef __cplusplus
#define FA_CUDA_ALIGN64 alignas(64)
#else
#define FA_CUDA_ALIGN64 _Alignas(64)
#endif

typedef struct fa_cuda_tensor {
    unsigned long long ptr; /* device address of element (0, 0, 0, 0) */
    long long stride_b, stride_s, stride_h;
} fa_cuda_tensor;

typedef struct fa_cuda_params {
    fa_cuda_tensor q, k, v, o, lse, d_o, d_q, d_k, d_v;
    unsigned long long delta;    /* f32 (batch, heads_q, seq_q) workspace: rowsum(dO * O) */
    unsigned long long dq_accum; /* f32 (batch, heads_q, seq_q, head_dim) workspace, or 0 */
    /* The split-key forward's workspace: each chunk's normalised O, f32 (splits, batch, heads_q,
     * seq_q, head_dim), and LSE, f32 natural log (splits, batch, heads_q, seq_q). */
    unsigned long long part_o, part_lse;
    /* Where splits > 1, the device address of FA_DEC_DONE_SLOTS ints, zero between calls: the
     * split kernel's blocks count their chunks done in them, and the last block of each group
     * merges the chunks (fa_dec_merge_tail); 0: fa_decode_merge runs after it. */
    unsigned long long split_done;
    int splits;     /* key chunks (1: the split kernel writes O and LSE itself) */
    int split_keys; /* keys per chunk */
    int batch, seq_q, seq_k, heads_q, heads_kv, head_dim;
    int group; /* heads_q / heads_kv */
    /* The mask, bottom-right aligned (off = seq_k - seq_q; fa_attention_call's window): where
     * causal, query i sees key j only if j <= i + causal_offset (off + window_right: off where
     * the call is causal); where has_left, only if j >= i + left_offset (off - window_left).
     * The host sets causal for any right bound. Every kernel takes the mask, the softcap and
     * ALiBi but the CUDA-core split-key forward (fa_decode.cuh), which knows only causal
     * (aligned on its own lengths): the planner (cuda_plan.c) routes no such call there. */
    int causal, causal_offset;
    int has_left, left_offset;
    int has_lse;
    float scale;      /* softmax scale */
    float scale_log2; /* scale * log2(e): scores go through exp2 */
    /* Logit softcapping (0: off): the scaled score s = scale q.k becomes softcap tanh(s /
     * softcap) before the softmax (fa_softcap_tanh in fa_mask.cuh). softcap_log2 = softcap
     * log2(e), the cap in the kernels' log2 units; softcap_k = 2 scale log2(e) / softcap, so that
     * tanh(s / softcap) = 1 - 2 / (1 + 2^(softcap_k q.k)) of a raw product q.k. */
    float softcap, softcap_log2, softcap_k;
    /* ALiBi (has_alibi; else alibi is zero): f32 slopes, slope(b, hq) at alibi.ptr[b *
     * alibi.stride_b + hq * alibi.stride_h] (stride_s unused). Query i's log2-unit score for key
     * j gains -slope log2(e) |i + off - j| after the softcap, off = seq_k - seq_q (the split-key
     * forward: its sequence's own length - seq_q); fa_alibi_slope in fa_mask.cuh. */
    fa_cuda_tensor alibi;
    int has_alibi;
    /* An additive bias (bias_dtype: FA_CUDA_BIAS_F32, _F16 or _BF16; 0, and bias zero, without
     * one): element (b, i, h, j) of query i, head hq and key j at bias.ptr[b * stride_b + i *
     * stride_s + hq * stride_h + j] (a stride 0 where broadcast), added times log2(e), the
     * kernels' units, after the softcap and ALiBi; -inf hides the key (fa_bias in fa_mask.cuh).
     * Read by the general kernels, the wgmma forward and the wgmma backward at head dim 64, and
     * the mma.sync kernels' twins (the catalogue's *_BIAS rows), which but dQ's take it as S's
     * initial value in raw units (bias / scale), so not with a softcap; the planner routes no
     * other call with one. */
    fa_cuda_tensor bias;
    int bias_dtype;
    /* Read by the split-key forward alone. Where has_seqlens_k, batch entry b has the int32
     * seqlens_k.ptr[b * stride_b] keys (clamped into [0, seq_k]) and its causal mask aligns on
     * that length. Where page_size > 0, a paged cache: K and V hold num_pages pages (their
     * stride_b strides pages, stride_s rows within a page), entry b's page p is the int32
     * block_table.ptr[b * stride_b + p * stride_s] (clamped into [0, num_pages)), and key n is
     * row n % page_size of page n / page_size. */
    fa_cuda_tensor seqlens_k, block_table;
    int has_seqlens_k;
    int page_size, num_pages; /* num_pages: at most INT_MAX, as many as int32 entries reach */
    /* Device address of an int the split-key forward sets to 1 where it meets a seqlens_k value
     * outside [0, seq_k] or a block_table entry outside [0, num_pages) (it clamps them and reads
     * on): the host reports it at the next synchronize (0: none kept). */
    unsigned long long index_error;
    /* A packed variable-length batch, read by the *_VARLEN kernels, Delta and the dQ conversion
     * alone: where varlen, block z is sequence z, holding rows cu_seqlens_q.ptr[z * stride_b] up
     * to the next entry of q, o and lse (d_o, d_q), and likewise of k and v (d_k, d_v) by
     * cu_seqlens_k (int32 prefix sums, clamped into [0, seq_q] and [0, seq_k], the packed
     * totals); fa_varlen_bind (fa_varlen.cuh) turns the parameters into those of the sequence
     * alone. */
    fa_cuda_tensor cu_seqlens_q, cu_seqlens_k;
    int varlen;
    /* FP8 (e4m3 q, k and v; the wgmma forward's E4M3 row alone): o's dtype (FA_CUDA_BIAS_F32,
     * _F16 or _BF16: the same values), and the descale factors of q, k and v, f32 at
     * descale[i].ptr[b * stride_b + hk * stride_h] for KV head hk (strides 0 where broadcast; ptr
     * 0: a factor of 1), so that S = scale dq dk Q K^T and O = dv softmax(S) V. */
    fa_cuda_tensor descale[3];
    int o_dtype;
    /* Where nonzero (the wgmma backward at head dims up to 128, a packed batch only with
     * FA_BWD_WGMMA_VARLEN_BULK; with FA_BWD_WGMMA_DQ_BULK), dq_accum is laid out in the kernel's
     * tiles (a packed batch's sequences apart: fa_varlen_bind): per (batch, head) the
     * query rows rounded up to 64, in blocks of 64 rows of dq_tiled (the kernel's head dim)
     * floats, each block [half of the dims][64 rows][dq_tiled / 2], 16-byte unit u of row r at
     * u ^ ((r & 3) << 1) (fa_backward_wgmma.cuh; read back by fa_bwd_dq_convert). */
    int dq_tiled;
    /* Two ints, zero between calls (the last block to finish puts them back): the causal wgmma
     * forward's next work item and its blocks done, where FA_FWD_WGMMA_CAUSAL_DYN deals causal
     * items to persistent blocks as they ask; else unused. */
    unsigned long long item_counter;
    /* Where use_tma (the wgmma forward at 16-bit dtypes and head dims 128 and 256, not packed,
     * in a build with FA_FWD_WGMMA_TMA unless FA_CUDA_FWD_COPY=cpasync): the driver's tensor
     * maps (CUtensorMap, 128 bytes, 64-byte aligned) of q, k, v and o as 4-D views (head dim,
     * row, head, batch entry) with boxes of 64 head dims x 64 rows and 128-byte swizzling, which
     * the loading warpgroup's one thread copies tiles through instead of its 128 threads' 16-byte
     * copies (and, FA_FWD_WGMMA_TMA_STORE, O out of its Q buffer; fa_forward_wgmma.cuh). In the
     * wgmma backward (FA_BWD_WGMMA_TMA): maps 0 and 3 are q and d_o, the producer's query tiles
     * (fa_backward_wgmma.cuh). Else unused. */
    int use_tma;
    FA_CUDA_ALIGN64 unsigned char tma_map[4][128];
} fa_cuda_params;

/* fa_cuda_params.bias_dtype: fa_dtype's values (the host asserts them). */
#define FA_CUDA_BIAS_F32 1
#define FA_CUDA_BIAS_F16 2
#define FA_CUDA_BIAS_BF16 3

/* Tiles of the tensor-core forward (shaders/cuda/fa_forward_mma.cuh), one kernel per head dim
 * 32, 64, 96, 128 and 256 (smaller head dims padded up to the next). The host sizes its dynamic
 * shared memory from them: (BQ + 4 BK) * d * 2 bytes (Q, and K and V double-buffered). Head dims
 * up to 128 take BQ = 128 query rows per block, 4 warps of 32 rows (the kernels' MT = 2); 256
 * warps of 16 rows (MT = 1), so that O fits in 128 registers a thread, and 32-key tiles:
 * 64 rows (4 warps, 96 KiB: every target, two blocks an SM on sm_90) or, where one block of
 * those would be alone on an SM (sm_80: 163 KiB), 128 rows (8 warps, 128 KiB). Both sides take
 * overrides from the CMake cache variable FA_CUDA_DEFINES, e.g. "FA_FWD_MMA_BK_D128=32" or
 * "FA_FWD_MMA_BK_D64=64" (earlier tilings; BK = 128 at head dim 64 measured 268 -> 288 TF/s on
 * the H200, f16, N = 16k, docs/PERF.md). Head dim 96 takes D128's key tile; 32 its own, 64
 * (156 registers: three blocks an SM), where D64's 128 takes 251 registers (two). */
#define FA_FWD_MMA_BQ 128
#ifndef FA_FWD_MMA_BK_D32
#define FA_FWD_MMA_BK_D32 64
#endif
#ifndef FA_FWD_MMA_BK_D64
#define FA_FWD_MMA_BK_D64 128
#endif
#ifndef FA_FWD_MMA_BK_D128
#define FA_FWD_MMA_BK_D128 64
#endif
#ifndef FA_FWD_MMA_BK_D256
#define FA_FWD_MMA_BK_D256 32
#endif
#define FA_FWD_MMA_BQ_D256 64
#define FA_FWD_MMA_BQ_D256_WIDE 128
#define FA_FWD_MMA_BK(d)                                                                           \
    ((d) > 128  ? FA_FWD_MMA_BK_D256                                                               \
     : (d) > 64 ? FA_FWD_MMA_BK_D128                                                               \
     : (d) > 32 ? FA_FWD_MMA_BK_D64                                                                \
                : FA_FWD_MMA_BK_D32)
#define FA_FWD_MMA_BQ_D(d) ((d) > 128 ? FA_FWD_MMA_BQ_D256 : FA_FWD_MMA_BQ) /* the default */
#define FA_FWD_MMA_MT(d) ((d) > 128 ? 1 : 2) /* 16-row m-tiles per warp */
#define FA_FWD_MMA_THREADS(d, bq) ((bq) / (16 * FA_FWD_MMA_MT(d)) * 32)
#define FA_FWD_MMA_SMEM(d, bq) (((bq) + 4 * FA_FWD_MMA_BK(d)) * (d)*2)

/* The split-key forward for decoding (shaders/cuda/fa_decode.cuh): blocks of FA_DEC_WARPS warps,
 * each for one key chunk and FA_DEC_ROWS packed query rows (query heads of one KV head x
 * queries); the merge takes one warp per output row and at most FA_DEC_MAX_SPLITS chunks
 * (runtime/fa_split.h's FA_MAX_SPLITS). The planner takes it where a KV head has at most
 * FA_DEC_MAX_ROWS packed rows; it is the one kernel that takes per-sequence key counts and a
 * paged cache (fa_cuda_params.seqlens_k, block_table). */
#define FA_DEC_WARPS 4
#define FA_DEC_THREADS (32 * FA_DEC_WARPS)
#define FA_DEC_ROWS 4
#define FA_DEC_MAX_ROWS 16
#define FA_DEC_MAX_SPLITS 256
/* fa_cuda_params.split_done's ints: split-key grids of at most this many (KV head x row chunk,
 * batch) groups merge in the split kernel, larger ones launch fa_decode_merge. */
#define FA_DEC_DONE_SLOTS 4096

/* The tensor-core split-key forward (shaders/cuda/fa_decode_mma.cuh; f16, bf16; head dims padded
 * to 64, 128 or 256): one block per (key chunk, KV head, batch entry) holds all of the KV head's
 * packed rows (at most FA_DEC_MAX_ROWS = 16, the rows of one mma tile); each of its warps (up to
 * FA_DEC_MMA_MAX_WARPS: the planner's choice) walks steps of FA_DEC_MMA_KEYS keys
 * through a ring of FA_DEC_MMA_STAGES K and V tiles of its own. Shared memory: Q (16 rows), the
 * rings, and each warp's row maxima and sums. */
#define FA_DEC_MMA_KEYS 16
#ifndef FA_DEC_MMA_STAGES
#define FA_DEC_MMA_STAGES 3
#endif
#define FA_DEC_MMA_MAX_WARPS 8
#define FA_DEC_MMA_SMEM(d, warps)                                                                  \
    (16 * (d)*2 + (warps)*FA_DEC_MMA_STAGES * 2 * FA_DEC_MMA_KEYS * (d)*2 +                        \
     2 * FA_DEC_MMA_MAX_WARPS * 16 * 4)

/* The f32 forward on tensor cores (3xTF32, shaders/cuda/fa_forward_tf32.cuh), one kernel per head
 * dim 64, 128 and 256: 64 query rows per block (4 warps of 16), K and V in tiles of BK keys, two
 * buffers deep (below), every shared row padded by 16 bytes: (BQ + 4 BK) (d + 4) 4 bytes, 52 KiB at
 * head dim 64 (three blocks an SM: registers), 99 KiB at 128 (two), 130 KiB at 256 (one; 98 KiB and
 * two on sm_90). Overridable through FA_CUDA_DEFINES as the others. */
#define FA_FWD_TF32_BQ 64
#define FA_FWD_TF32_THREADS 128
#ifndef FA_FWD_TF32_BK_D64
#define FA_FWD_TF32_BK_D64 32
#endif
#ifndef FA_FWD_TF32_BK_D128
#define FA_FWD_TF32_BK_D128 32
#endif
#ifndef FA_FWD_TF32_BK_D256
#define FA_FWD_TF32_BK_D256 16
#endif
#define FA_FWD_TF32_BK(d)                                                                          \
    ((d) > 128 ? FA_FWD_TF32_BK_D256 : (d) > 64 ? FA_FWD_TF32_BK_D128 : FA_FWD_TF32_BK_D64)
/* K and V buffers: one at head dim 256 on sm_90 and newer (sm90), so that two blocks of 98 KiB
 * fit an SM, each covering the other's copies; two elsewhere (there a bound of two blocks made
 * sm_80's ptxas spill, and one block holds the SM). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define FA_FWD_TF32_SM90 1
#else
#define FA_FWD_TF32_SM90 0
#endif
#define FA_FWD_TF32_KV_BUFS(d, sm90) ((d) > 128 && (sm90) ? 1 : 2)
#define FA_FWD_TF32_BLOCKS(d) /* an SM holds */                                                    \
    ((d) > 128 ? (FA_FWD_TF32_SM90 ? 2 : 1) : (d) > 64 ? 2 : 3)
#define FA_FWD_TF32_SMEM(d, sm90)                                                                  \
    ((FA_FWD_TF32_BQ + 2 * FA_FWD_TF32_KV_BUFS(d, sm90) * FA_FWD_TF32_BK(d)) * ((d) + 4) * 4)

/* The general (CUDA-core) kernels of shaders/cuda/fa_general.cuh: threads per block, query rows
 * per block, keys per shared tile. */
#define FA_GEN_THREADS 256
#define FA_GEN_ROWS 32
#define FA_GEN_TILE 16

/* Tiles of the deterministic tensor-core backward (shaders/cuda/fa_backward_mma.cuh), which the
 * host sizes shared memory from; backward v4 uses the same block of threads. */
#define FA_BWD_ROWS 128 /* keys per dK/dV block, queries per dQ block */
#define FA_BWD_TILE 64  /* keys per dQ iteration */
/* query rows per dK/dV iteration: 32 at head dim 128 keeps dK, dV, S^T, dP^T in 255 registers */
#define FA_BWD_QTILE(d) ((d) > 64 ? 32 : 64)
#define FA_BWD_THREADS 256
/* Their shared memory in bytes: dK/dV (K, V; Q, dO, two buffers each; LSE, Delta) and dQ (Q, dO;
 * K, V two buffers each). */
#define FA_BWD_DKDV_MMA_SMEM(d)                                                                    \
    (2 * FA_BWD_ROWS * (d)*2 + 4 * FA_BWD_QTILE(d) * (d)*2 + 2 * FA_BWD_QTILE(d) * 4)
#define FA_BWD_DQ_MMA_SMEM(d) (2 * FA_BWD_ROWS * (d)*2 + 4 * FA_BWD_TILE * (d)*2)

/* Tiles of backward v4 (shaders/cuda/fa_backward_v4.cuh) and its shared memory in bytes for
 * query tiles of `bm` rows: K, V; Q, dO two buffers each; P, dS; LSE, Delta two buffers each.
 * At head dim 64 the host runs 128-row query tiles where they fit (162 KiB: sm_80 and sm_90;
 * 64-row tiles elsewhere, or with FA_CUDA_BWD4_QTILE_D64=64): twice the dK/dV work per S/dP
 * tile, 202 -> 222 TF/s on the H200 (f16, N = 16k). */
#define FA_BWD4_KEYS 128 /* keys per block */
/* query rows per tile (head dims 32, 96, 128; 64 where 128 rows do not fit) */
#define FA_BWD4_QTILE 64
#define FA_BWD4_QTILE_WIDE 128 /* query rows per tile at head dim 64 */
#define FA_BWD4_SMEM_KQ(d, bn, bm)                                                                 \
    (2 * (bn) * (d)*2 + 4 * (bm) * (d)*2 + 2 * (bm) * (bn)*2 + 4 * (bm)*4)
#define FA_BWD4_SMEM_Q(d, bm) FA_BWD4_SMEM_KQ(d, FA_BWD4_KEYS, bm)
#define FA_BWD4_SMEM(d) FA_BWD4_SMEM_Q(d, FA_BWD4_QTILE)

/* Backward v4 at head dim 256 (head dims 129-256 padded with zeros; FA_CUDA_BWD_D256=0 turns it
 * off), 193 TF/s on the H200 (f16, N = 16k): 64 keys per block, so that dK and dV (64 x 256
 * each) stay in 128 f32 registers a thread, and 64-row query tiles (209 KiB: sm_90) or, where
 * those do not fit, 32-row ones (137 KiB: sm_80); elsewhere (sm_86/89: 99 KiB) the general
 * kernels. */
#define FA_BWD4_KEYS_D256 64
#define FA_BWD4_QTILE_D256 64
#define FA_BWD4_QTILE_D256_NARROW 32
#define FA_BWD4_SMEM_D256(bm) FA_BWD4_SMEM_KQ(256, FA_BWD4_KEYS_D256, bm)

/* The wgmma backward for sm_90a (shaders/cuda/fa_backward_wgmma.cuh), head dims 64 and 128 (smaller
 * ones padded with zeros; 256 below): grid (ceil(seq_k / FA_BWD_WGMMA_KEYS(d)), heads_kv, batch) of
 * FA_BWD_WGMMA_THREADS threads (a producer warpgroup and two consumers), FA_BWD_WGMMA_SMEM(d)
 * bytes of dynamic shared memory: K, V; FA_BWD_WGMMA_STAGES stages of Q and dO; two dS^T tiles;
 * LSE and Delta per stage; the mbarriers; 1 KiB to align the base (d = 128, 3 stages: 195 KiB).
 * dq_accum must be zeroed and delta computed as for v4. The producer gives registers up to the
 * consumers (setmaxnreg): 128 x 40 + 256 x 232 = 384 x 168, the block's whole allotment. */
#define FA_BWD_WGMMA_KEYS(d) ((d) == 256 ? 64 : 128)
#define FA_BWD_WGMMA_QTILE 64
/* n query rows rounded up to whole query tiles: a head's rows in the tiled dQ accumulator
 * (fa_cuda_params.dq_tiled) */
#define FA_BWD_DQ_TILED_ROWS(n)                                                                    \
    (((n) + FA_BWD_WGMMA_QTILE - 1) / FA_BWD_WGMMA_QTILE * FA_BWD_WGMMA_QTILE)
#define FA_BWD_WGMMA_THREADS 384
#ifndef FA_BWD_WGMMA_STAGES
#define FA_BWD_WGMMA_STAGES 3
#endif
#ifndef FA_BWD_WGMMA_PRODUCER_REGS
#define FA_BWD_WGMMA_PRODUCER_REGS 40
#endif
#ifndef FA_BWD_WGMMA_CONSUMER_REGS
#define FA_BWD_WGMMA_CONSUMER_REGS 232
#endif
/* Variants of the wgmma backward, all on by default: together, measured on the H200, head dim 64
 * 332 -> 362 TF/s (f16, N = 16k; +9-12 % on every row timed), head dim 128 +0-2 % (where
 * EARLY_S and, with both others on, LD_EARLY are off: they would spill), and --full's backward
 * cases passed with them; alone, each was within -4..+3 % (docs/PERF.md). Each can be set to 0
 * for kernel development; none changes the grid, the threads or the shared memory:
 * FA_BWD_WGMMA_PINGPONG: the two consumers take turns to issue their S^T/dP^T and dV/dK
 * batches (named barriers 4 and 5), so that one's exp2 and dS work overlaps the other's products.
 * FA_BWD_WGMMA_DQ_V4: dQ added with 16-byte red.global.add.v4.f32 (4 consecutive floats a
 * thread after a shuffle of lane pairs) instead of 8-byte v2.
 * FA_BWD_WGMMA_EARLY_S: at head dim 64 (128 would spill), the next tile's S^T and dP^T issued
 * within the current tile's products (after its dQ adds with DQ_FIRST, below).
 * FA_BWD_WGMMA_LD_EARLY: each tile's LSE and Delta read from shared memory before the wgmma
 * waits that precede their use rather than after them. */
#ifndef FA_BWD_WGMMA_PINGPONG
#define FA_BWD_WGMMA_PINGPONG 1
#endif
#ifndef FA_BWD_WGMMA_DQ_V4
#define FA_BWD_WGMMA_DQ_V4 1
#endif
#ifndef FA_BWD_WGMMA_EARLY_S
#define FA_BWD_WGMMA_EARLY_S 1
#endif
#ifndef FA_BWD_WGMMA_LD_EARLY
#define FA_BWD_WGMMA_LD_EARLY 1
#endif
/* FA_BWD_WGMMA_DQ_BULK (on since the thirty-eighth session, docs/PERF.md): the consumers put dQ
 * into 64 x d floats of shared memory and each warp adds its 16 rows with one bulk reduction
 * (cp.reduce.async.bulk) into an accumulator laid out in the kernel's tiles
 * (fa_cuda_params.dq_tiled), instead of red.global.add from registers; in the packed-batch
 * kernels only with FA_BWD_WGMMA_VARLEN_BULK (below). FA_CUDA_BWD_DQ=atomic keeps
 * red.global.add; 0 compiles the bulk path out. */
#ifndef FA_BWD_WGMMA_DQ_BULK
#define FA_BWD_WGMMA_DQ_BULK 1
#endif
/* FA_BWD_WGMMA_DQ_FIRST (on since the thirty-eighth session: +5-12 % at head dim 128 and
 * +11-13 % at 64 on an H100, docs/PERF.md): each tile's dQ product issued before dV/dK (after
 * the two consumers' barrier), so that the dQ adds run while the tensor cores do dV/dK, instead
 * of dQ queued behind them and the adds after; at 64 the next tile's S^T and dP^T follow the
 * adds. 0: dV/dK first (the kernel before). */
#ifndef FA_BWD_WGMMA_DQ_FIRST
#define FA_BWD_WGMMA_DQ_FIRST 1
#endif
/* FA_BWD_WGMMA_TMA (off: written in the forty-fourth session, not yet run on a GPU): the wgmma
 * backward's producer copies each query tile's Q and dO by its first thread's tensor-memory
 * copies (two 4-D maps, fa_cuda_params.tma_map[0] and [3]) where fa_cuda_params.use_tma (the
 * host's default where built; FA_CUDA_BWD_COPY), not by its 128 threads' 16-byte copies; not in
 * the packed-batch kernels. */
#ifndef FA_BWD_WGMMA_TMA
#define FA_BWD_WGMMA_TMA 0
#endif
/* FA_BWD_WGMMA_VARLEN_BULK (on since the thirty-ninth session: +10-13 % on packed batches at
 * head dim 128, +4 % at 64 on an H100, docs/PERF.md): the packed-batch kernels add dQ by bulk
 * reductions too, each sequence's accumulator in tiles from row 64 z + its first row rounded up
 * to 64 (fa_varlen_bind), through half the staging (their bound parameters' static shared memory
 * leaves no room for all of it): a warp adds its 16 rows as two reductions of 8, one after the
 * other. 0: red.global.add in the packed-batch kernels. */
#ifndef FA_BWD_WGMMA_VARLEN_BULK
#define FA_BWD_WGMMA_VARLEN_BULK 1
#endif
/* The wgmma backward's shared memory at head dims 64 and 128 without the dQ staging; the staging
 * (rows of d floats, and 128 bytes to align it); the kernels' sizes, the packed-batch ones with
 * half of it where they stage at all. */
#define FA_BWD_WGMMA_SMEM_BASE(d)                                                                  \
    (2 * 128 * (d)*2 + FA_BWD_WGMMA_STAGES * (2 * 64 * (d)*2 + 2 * 64 * 4) + 2 * 128 * 64 * 2 +    \
     8 * (2 * FA_BWD_WGMMA_STAGES + 1) + 1024)
#define FA_BWD_WGMMA_DQ_STAGING(d, rows) ((rows) * (d)*4 + 128)
#define FA_BWD_WGMMA_SMEM_VARLEN(d)                                                                \
    (FA_BWD_WGMMA_SMEM_BASE(d) +                                                                   \
     (FA_BWD_WGMMA_DQ_BULK && FA_BWD_WGMMA_VARLEN_BULK ? FA_BWD_WGMMA_DQ_STAGING(d, 32) : 0))
#define FA_BWD_WGMMA_SMEM(d)                                                                       \
    ((d) == 256 ? FA_BWD_WGMMA256_SMEM                                                             \
                : FA_BWD_WGMMA_SMEM_BASE(d) +                                                      \
                      (FA_BWD_WGMMA_DQ_BULK ? FA_BWD_WGMMA_DQ_STAGING(d, 64) : 0))
/* At head dim 256 (shaders/cuda/fa_backward_wgmma256.cuh): blocks of 64 keys whose two consumers
 * split the head dim; K, V; 2 stages of Q and dO; two buffers of P^T and dS^T (64 x 64 each);
 * LSE and Delta per stage; the mbarriers; 1 KiB to align: 226 KiB of sm_90's 227. */
#define FA_BWD_WGMMA256_STAGES 2
#define FA_BWD_WGMMA256_SMEM                                                                       \
    (2 * 64 * 256 * 2 + FA_BWD_WGMMA256_STAGES * (2 * 64 * 256 * 2 + 2 * 64 * 4) +                 \
     4 * 64 * 64 * 2 + 8 * (2 * FA_BWD_WGMMA256_STAGES + 1) + 1024)

/* The Hopper forward (shaders/cuda/fa_forward_wgmma.cuh, sm_90a only): a loading warpgroup and
 * FA_FWD_WGMMA_NC(d) computing ones of 64 query rows each (wgmma); K/V tiles of BK keys in a
 * ring of STAGES buffers; the loader keeps LOAD_REGS registers a thread and gives the rest to
 * the computing warpgroups (MATH_REGS; 128 LOAD + 128 NC MATH within the block's 64 Ki).
 * Shared memory: Q, the ring, 4 + 4 STAGES mbarriers, and 1 KiB to align the base.
 * FA_FWD_WGMMA_WG3_D64 (on since the fortieth session: +10-25 % at head dim 64 on an H100,
 * docs/PERF.md): three computing warpgroups at head dim 64 (192-row blocks, 512 threads), so that
 * two are in their softmax while the third's products run; their loader keeps 24 registers and
 * they 160. */
#ifndef FA_FWD_WGMMA_WG3_D64
#define FA_FWD_WGMMA_WG3_D64 1
#endif
#define FA_FWD_WGMMA_NC(d) ((d) <= 64 && FA_FWD_WGMMA_WG3_D64 ? 3 : 2)
#define FA_FWD_WGMMA_BQ_D(d) (64 * FA_FWD_WGMMA_NC(d))
#define FA_FWD_WGMMA_THREADS_D(d) (128 * (FA_FWD_WGMMA_NC(d) + 1))
#ifndef FA_FWD_WGMMA_STAGES
#define FA_FWD_WGMMA_STAGES 3
#endif
#ifndef FA_FWD_WGMMA_PINGPONG
#define FA_FWD_WGMMA_PINGPONG 1
#endif
/* FA_FWD_WGMMA_RING_ITEMS (on since the forty-second session: +5-9 % at head dim 64 and N 512-2k,
 * +1-3 % at 128, an H100, docs/PERF.md): the pingpong ring runs on across a block's items instead
 * of starting again at each, so that the first computing warpgroup's next item starts while the
 * last one's product and epilogue finish (short rows: a few key tiles an item) */
#ifndef FA_FWD_WGMMA_RING_ITEMS
#define FA_FWD_WGMMA_RING_ITEMS 1
#endif
/* FA_FWD_WGMMA_OVERLAP (on since the forty-second session, in the kernels with three computing
 * warpgroups on 64-key tiles: +1-4 %, an H100, docs/PERF.md): a computing warpgroup's softmax of
 * tile it runs while its own O += P V of tile it - 1 is still in flight (S and the product
 * committed apart, wgmma.wait_group 1), O's rescale and P's fragments after (FlashAttention-3's
 * intra-warpgroup overlap) */
#ifndef FA_FWD_WGMMA_OVERLAP
#define FA_FWD_WGMMA_OVERLAP 1
#endif
/* FA_FWD_WGMMA_BIAS_PAIRS (on since the forty-ninth session: the f32 bias row 1.26x faster on an
 * H100, docs/PERF.md): the wgmma forward reads a bias on tiles without a mask two neighbouring
 * keys a load, where the bias's base and strides allow it. */
#ifndef FA_FWD_WGMMA_BIAS_PAIRS
#define FA_FWD_WGMMA_BIAS_PAIRS 1
#endif
/* FA_FWD_WGMMA_DESC_ADD (on since the forty-third session: +4.7 % at f16 D=128 N=512 causal,
 * +0.5-1.5 % elsewhere, an H100, docs/PERF.md): the forward's wgmma descriptors as a tile's first
 * one plus the operand's offset (fa_wgmma_desc_add), one uniform add a product where building each
 * from its address took four or five (f16 and FP8: bf16's kernels spill with it) */
#ifndef FA_FWD_WGMMA_DESC_ADD
#define FA_FWD_WGMMA_DESC_ADD 1
#endif
/* FA_FWD_WGMMA_CAUSAL_END (on since the forty-third session, in the kernels with three computing
 * warpgroups: +4 % at f16 D=64 N=512 causal, +9 % at N=1000, an H100, docs/PERF.md): a causal
 * call's 192-row query tiles aligned to the rows' end, so that where seq_q is not a multiple of
 * the tile the partial tile is the first, which sees the fewest keys, not the last, which sees
 * them all (N=512: 15 tile steps of 128 keys in place of 17). Rows before 0 are neither loaded nor
 * written. Not with a bias, whose rows are clamped at the end only */
#ifndef FA_FWD_WGMMA_CAUSAL_END
#define FA_FWD_WGMMA_CAUSAL_END 1
#endif
/* FA_FWD_WGMMA_TMA (on since the forty-fourth session: with FA_FWD_WGMMA_TMA_STORE +5-10 % at
 * head dim 128 and +15-17 % at 256 on an H200, conformance's forward --full passing with both,
 * docs/PERF.md): the wgmma forward's loader built with a second form, at head dims 128 and 256,
 * taken where fa_cuda_params.use_tma (the host's default where built; FA_CUDA_FWD_COPY): its first
 * thread copies each Q, K and V tile by the tensor-memory accelerator (cp.async.bulk.tensor, one
 * instruction per 64 x 64 box) where the 128 threads' 16-byte copies took about 11 instructions a
 * copy. With three computing warpgroups (head dim 64), whose loader keeps 24 registers, only in
 * kernels of their own (FWD_WGMMA rows with P2 = 1): compiled into the others they spilled 12-32
 * bytes and lost 5-13 % at N=512 causal on an H100, and the host takes them only where they
 * gained (cuda_plan.c) */
#ifndef FA_FWD_WGMMA_TMA
#define FA_FWD_WGMMA_TMA 1
#endif
/* FA_FWD_WGMMA_TMA_STORE (with FA_FWD_WGMMA_TMA; on since the forty-fourth session: +1-4 % at
 * head dim 128 over the tensor-memory loads alone, an H200): the computing warpgroups leave O in
 * their Q buffer's rows and the tensor-memory loader's thread stores it (one cp.async.bulk.tensor
 * a 64 x 64 box) before that buffer takes the next Q, where each of their threads read its part
 * back and stored it 16 bytes at a time. */
#ifndef FA_FWD_WGMMA_TMA_STORE
#define FA_FWD_WGMMA_TMA_STORE 1
#endif
/* FA_FWD_WGMMA_LOADER_HINT (ns; 0, the default: off): the tensor-memory loader's waits for free
 * stages and for O in its Q buffer with that suspend-time hint (fa_mbar_wait<HINT_NS>). Its polling
 * was 2.2 M of 46.6 M instructions at D=128 N=512 (5 % of one scheduler's issue slots); 2000 ns
 * timed within noise on an H100 but for N=512 causal (+1-4 %; forty-sixth session) */
#ifndef FA_FWD_WGMMA_LOADER_HINT
#define FA_FWD_WGMMA_LOADER_HINT 0
#endif
#ifndef FA_FWD_WGMMA_BK_D64
#define FA_FWD_WGMMA_BK_D64 128
#endif
#ifndef FA_FWD_WGMMA_BK_D128
#define FA_FWD_WGMMA_BK_D128 128
#endif
#ifndef FA_FWD_WGMMA_BK_D256
#define FA_FWD_WGMMA_BK_D256 64
#endif
#define FA_FWD_WGMMA_BK(d)                                                                         \
    ((d) > 128 ? FA_FWD_WGMMA_BK_D256 : (d) > 64 ? FA_FWD_WGMMA_BK_D128 : FA_FWD_WGMMA_BK_D64)
/* Persistent (head dims up to 128, neither causal nor over packed batches): a grid of at most
 * one block per multiprocessor, each block taking work items (query tile, head, batch entry)
 * blockIdx.x, + gridDim.x, ..., with two Q buffers so that the next item's Q and first key tiles
 * land while this one finishes; other calls get a block per item. Stages: three at head dim 64; two
 * at 128 (two Q buffers of 32 KiB and two stages of K and V of 32 KiB each: 192 KiB) and at 256
 * (one Q buffer of 64 KiB, K and V of 32 KiB: 197 of 227 KiB). */
#define FA_FWD_WGMMA_PERSISTENT(d) ((d) <= 128)
/* FA_FWD_WGMMA_CAUSAL_DYN (on since the fortieth session: +5-14 % on causal rows of N 512-2k, an
 * H100, docs/PERF.md): causal calls on the persistent grid too, each block's loader taking the
 * next item from fa_cuda_params.item_counter when it is ready for one, instead of a block per
 * item (static deals of causal items lost 6-22 %). Items heaviest first within sections of
 * (batch, head) pairs whose K and V fit FA_FWD_WGMMA_DYN_L2 bytes: heaviest first over all of
 * them lost 3-22 % at head dim 128 (K and V of 132 heads at once). */
#ifndef FA_FWD_WGMMA_CAUSAL_DYN
#define FA_FWD_WGMMA_CAUSAL_DYN 1
#endif
#ifndef FA_FWD_WGMMA_DYN_L2
#define FA_FWD_WGMMA_DYN_L2 (16 << 20)
#endif
/* bf16 at head dim 64: the 128-key kernel where a query row sees this many keys or more on
 * average (the host's choice, cuda_plan.c) */
#ifndef FA_FWD_WGMMA_K128_KEYS
#define FA_FWD_WGMMA_K128_KEYS 1024
#endif
/* whether a call (causal or not) at head dim d gets the persistent grid */
#define FA_FWD_WGMMA_PERSISTENT_CALL(d, causal)                                                    \
    (FA_FWD_WGMMA_PERSISTENT(d) && (!(causal) || FA_FWD_WGMMA_CAUSAL_DYN))
#define FA_FWD_WGMMA_STAGES_D(d) ((d) > 64 ? 2 : FA_FWD_WGMMA_STAGES)
#ifndef FA_FWD_WGMMA_LOAD_REGS
#define FA_FWD_WGMMA_LOAD_REGS 40
#endif
#ifndef FA_FWD_WGMMA_MATH_REGS
#define FA_FWD_WGMMA_MATH_REGS 232
#endif
#define FA_FWD_WGMMA_LOAD_REGS_D(d) (FA_FWD_WGMMA_NC(d) == 3 ? 24 : FA_FWD_WGMMA_LOAD_REGS)
#define FA_FWD_WGMMA_MATH_REGS_D(d) (FA_FWD_WGMMA_NC(d) == 3 ? 160 : FA_FWD_WGMMA_MATH_REGS)
#define FA_FWD_WGMMA_SMEM(d)                                                                       \
    ((FA_FWD_WGMMA_PERSISTENT(d) ? 2 : 1) * FA_FWD_WGMMA_BQ_D(d) * (d)*2 +                         \
     2 * FA_FWD_WGMMA_STAGES_D(d) * FA_FWD_WGMMA_BK(d) * (d)*2 +                                   \
     8 * (4 + 4 * FA_FWD_WGMMA_STAGES_D(d)) + 1024)
/* The same kernel on e4m3 inputs (head dim 128 alone: 128-byte rows): 1-byte elements, a ring of
 * FA_FWD_WGMMA_STAGES_E4M3 stages, and two more V tiles where V lands before the loader transposes
 * it into the ring (8-bit wgmma operands are K-major only, and O += P V needs V's keys along the
 * rows): 129 KiB with two stages. */
#ifndef FA_FWD_WGMMA_STAGES_E4M3
#define FA_FWD_WGMMA_STAGES_E4M3 2
#endif
#define FA_FWD_WGMMA_SMEM_E4M3(d)                                                                  \
    (2 * FA_FWD_WGMMA_BQ_D(d) * (d) + 2 * FA_FWD_WGMMA_STAGES_E4M3 * FA_FWD_WGMMA_BK(d) * (d) +    \
     2 * FA_FWD_WGMMA_BK(d) * (d) + 8 * (4 + 4 * FA_FWD_WGMMA_STAGES_E4M3) + 1024)

#endif
