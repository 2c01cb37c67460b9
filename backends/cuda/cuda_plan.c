// SPDX-License-Identifier: MIT
/* The CUDA kernel choice (see cuda_plan.h). f16/bf16 with 16-byte aligned rows take the
 * tensor-core kernels where their shared memory fits the device: the forward up to head dim 256
 * (kernels for 32, 64, 96, 128 and 256; on compute capability 9.0 the wgmma kernels for 64 and
 * 128 serve head dims 33-128), the backward up to 256 (v4 for 32, 64, 96, 128 and 256, the
 * deterministic kernels for 64 and 128); the f32 forward the 3xTF32 tensor-core kernels (64, 128
 * and 256); everything else (the f32 backward, unaligned views, the deterministic backward above
 * 128) the general CUDA-core kernels.
 *
 * The backward runs Delta = rowsum(dO * O), then dK/dV per key block and dQ per query block,
 * each recomputing P from the LSE. Unless the call asks for determinism, the tensor-core
 * backward instead adds dQ with f32 atomics to a zeroed accumulator from the dK/dV kernel and
 * converts it at the end: fewer FLOPs, but the order of the additions (and so the last bits of
 * dQ) varies run to run. That atomic kernel is v4 (FlashAttention-2's tiling; the wgmma
 * kernel on compute capability 9.0), where its shared memory fits; at head dim 64 v4 takes
 * 128-row query tiles where they fit. Head dims 129-256 run atomic dQ kernels at head dim 256 (so
 * never for a deterministic call): the wgmma one on compute capability 9.0 (v4 there for a bias),
 * v4 elsewhere where its shared memory fits (sm_80), else the general kernels.
 */
#include "cuda_plan.h"

#include <stdio.h>

#include "../../runtime/fa_split.h"

_Static_assert(FA_DEC_MAX_SPLITS == FA_MAX_SPLITS, "the merge kernel holds every chunk's weight");

const fa_cuda_kernel_info fa_cuda_kernels[FA_CUDA_K_COUNT] = {
#define FA_CUDA_DTYPE_F32 FA_DTYPE_F32
#define FA_CUDA_DTYPE_F16 FA_DTYPE_F16
#define FA_CUDA_DTYPE_BF16 FA_DTYPE_BF16
#define FA_CUDA_DTYPE_E4M3 FA_DTYPE_E4M3
#define FA_CUDA_KERNEL_INFO_(id, name, family, dtype, d, p1, p2)                                   \
    [FA_CUDA_K_##id] = {#name, FA_CUDA_##family, FA_CUDA_DTYPE_##dtype, d, p1, p2},
    FA_CUDA_CATALOGUE(FA_CUDA_KERNEL_INFO_) FA_CUDA_CATALOGUE_SM90(FA_CUDA_KERNEL_INFO_)
#undef FA_CUDA_KERNEL_INFO_
};

/* The catalogue row of this family, dtype, head dim and (where nonzero) P1; the first row of
 * the family when none matches (the planner asks only for rows that exist; the unit tests check
 * every plan's kernels against its call). */
static fa_cuda_kernel find(fa_cuda_family family, fa_dtype dtype, uint32_t d, uint32_t p1)
{
    int first = -1;
    for (int i = 0; i < FA_CUDA_K_COUNT; i++) {
        const fa_cuda_kernel_info *k = &fa_cuda_kernels[i];
        if (k->family != family)
            continue;
        if (first < 0)
            first = i;
        if (k->dtype == dtype && k->d == d && (!p1 || k->p1 == p1))
            return (fa_cuda_kernel)i;
    }
    return (fa_cuda_kernel)(first < 0 ? 0 : first);
}

/* Whether the catalogue has a row of this family, dtype, head dim and (where nonzero) P1. */
static bool row_exists(fa_cuda_family family, fa_dtype dtype, uint32_t d, uint32_t p1)
{
    const fa_cuda_kernel_info *k = &fa_cuda_kernels[find(family, dtype, d, p1)];
    return k->family == family && k->dtype == dtype && k->d == d && (!p1 || k->p1 == p1);
}

/* A mma.sync family, or for a call with a bias its twin that reads one (the catalogue's *_BIAS
 * families: the bias's code cost the others registers). */
static fa_cuda_family with_bias(fa_cuda_family f, bool bias)
{
    if (!bias)
        return f;
    switch (f) {
    case FA_CUDA_FWD_MMA:
        return FA_CUDA_FWD_MMA_BIAS;
    case FA_CUDA_BWD_V4:
        return FA_CUDA_BWD_V4_BIAS;
    case FA_CUDA_BWD_DKDV_MMA:
        return FA_CUDA_BWD_DKDV_MMA_BIAS;
    case FA_CUDA_BWD_DQ_MMA:
        return FA_CUDA_BWD_DQ_MMA_BIAS;
    default:
        return f;
    }
}

/* The tensor-core kernels' head dim: the head dim rounded up to 32, 64, 96, 128 or 256. */
static uint32_t mma_dim(int64_t head_dim)
{
    return head_dim <= 32    ? 32
           : head_dim <= 64  ? 64
           : head_dim <= 96  ? 96
           : head_dim <= 128 ? 128
                             : 256;
}

/* The general kernels' head dim: 64, 128 or 256 (8, 16 or 32 dims per thread). */
static uint32_t gen_dim(int64_t head_dim)
{
    return head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : 256;
}

static unsigned blocks(int64_t n, int64_t per)
{
    return (unsigned)((n + per - 1) / per);
}

static void add(fa_cuda_plan *plan, fa_cuda_kernel kernel, unsigned gx, int64_t gy, int64_t gz,
                unsigned threads, unsigned smem, const char *what)
{
    if (plan->count < FA_CUDA_MAX_LAUNCHES)
        plan->launches[plan->count++] =
            (fa_cuda_launch){kernel, {gx, (unsigned)gy, (unsigned)gz}, threads, smem, what};
}

/* The split-key forward's head dim: 64, 128 or 256 (2, 4 or 8 elements a lane). */
static uint32_t split_dim(int64_t head_dim)
{
    return head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : 256;
}

/* The tensor-core split-key forward's warps per block for the call: 4 (or FA_CUDA_DECODE_WARPS),
 * fewer where the shared memory does not hold them; 0 where that kernel does not serve it (f32,
 * FA_CUDA_DECODE=cores, not even one warp fits), so that the CUDA-core one does. */
static unsigned split_mma_warps(const fa_cuda_caps *caps, const fa_cuda_problem *pb)
{
    if (pb->dtype == FA_DTYPE_F32 || caps->decode_cores)
        return 0;
    unsigned w = caps->decode_warps > 0 && caps->decode_warps <= FA_DEC_MMA_MAX_WARPS
                     ? (unsigned)caps->decode_warps
                     : 4;
    while (w > 0 && FA_DEC_MMA_SMEM(split_dim(pb->head_dim), w) > (uint32_t)caps->smem_optin)
        w--;
    return w;
}

bool fa_cuda_split_takes(const fa_cuda_caps *caps, const fa_cuda_problem *pb, char *why,
                         size_t why_size)
{
    const int64_t rows = pb->seq_q * (pb->heads_q / pb->heads_kv);
    const int64_t chunks = (rows + FA_DEC_ROWS - 1) / FA_DEC_ROWS;
    if (!why)
        why_size = 0; /* snprintf then only counts */
    if (caps->force_general)
        snprintf(why, why_size, "FA_CUDA_KERNELS=general turns it off");
    else if (pb->bias)
        snprintf(why, why_size, "it takes no additive bias (the ordinary forwards do)");
    else if ((pb->window || pb->softcap || pb->alibi) && split_mma_warps(caps, pb) == 0)
        snprintf(why, why_size,
                 "its CUDA-core kernel (f32, FA_CUDA_DECODE=cores) takes no sliding window, no "
                 "softcap and no ALiBi");
    else if (!pb->aligned)
        snprintf(why, why_size,
                 "it needs q, k, v and o with rows (and pages) on 16-byte boundaries");
    else if (rows > FA_DEC_MAX_ROWS)
        snprintf(why, why_size,
                 "the call has %lld query rows per KV head (queries x query heads per KV head); "
                 "it takes at most %d",
                 (long long)rows, FA_DEC_MAX_ROWS);
    else if (pb->heads_kv * chunks > 65535)
        snprintf(why, why_size,
                 "%lld KV heads x %lld blocks of %d query rows exceed its grid's 65535 blocks",
                 (long long)pb->heads_kv, (long long)chunks, FA_DEC_ROWS);
    else
        return true;
    return false;
}

/* Decoding (at most FA_DEC_MAX_ROWS query rows per KV head, 16-byte aligned rows): the
 * split-key forward, and the merge where the keys are cut into several chunks. f16 and bf16 take
 * the tensor-core kernel (one block per KV head's rows and chunk, the chunks aiming at one block
 * an SM), f32 (or FA_CUDA_DECODE=cores) the CUDA-core one (blocks of 4 packed rows, the chunks
 * aiming at two an SM: about 224 registers a thread at head dim 128), in either case chunks of
 * at most 4096 keys under four waves (fa_split.h); each measured best on the H200 (docs/PERF.md).
 * With seqlens_k the chunks cover the capacity seq_k (a chunk past a sequence's length writes O =
 * 0, LSE = -inf for the merge). */
static bool plan_split(const fa_cuda_caps *caps, const fa_cuda_problem *pb, fa_cuda_plan *plan)
{
    if (!fa_cuda_split_takes(caps, pb, NULL, 0))
        return false;
    const uint32_t units = (uint32_t)(caps->sm_count > 0 ? caps->sm_count : 1);
    const uint32_t d = split_dim(pb->head_dim);
    const unsigned warps = split_mma_warps(caps, pb);
    if (warps > 0) {
        /* One block holds all of a KV head's rows, and one such block an SM keeps enough loads
         * in flight (on the H200, B=1 Sk=32k: 16 chunks, one block an SM, 2,835 GB/s; 32 chunks,
         * two, 2,683): the chunks aim at one block an SM, rounded down so that no SM gets a
         * second (17 chunks: 136 blocks on 132 SMs, 2,455) where the work items fit. */
        const unsigned smem = FA_DEC_MMA_SMEM(d, warps);
        const int64_t items = pb->batch * pb->heads_kv;
        const uint32_t whole = items > 0 && items <= units ? units / items * items : units;
        const fa_split sp = fa_split_choose(items, pb->seq_k, whole, 1, pb->num_splits);
        plan->splits = sp.splits;
        plan->split_keys = (int)sp.keys_per_split;
        add(plan, find(FA_CUDA_FWD_SPLIT_MMA, pb->dtype, d, 0), (unsigned)sp.splits, pb->heads_kv,
            pb->batch, 32 * warps, smem, "launching the split-key forward (tensor cores)");
    } else {
        const int64_t rows = pb->seq_q * (pb->heads_q / pb->heads_kv);
        const int64_t chunks = (rows + FA_DEC_ROWS - 1) / FA_DEC_ROWS;
        const fa_split sp =
            fa_split_choose(pb->batch * pb->heads_kv * chunks, pb->seq_k, units, 2, pb->num_splits);
        plan->splits = sp.splits;
        plan->split_keys = (int)sp.keys_per_split;
        add(plan, find(FA_CUDA_FWD_SPLIT, pb->dtype, d, 0), (unsigned)sp.splits,
            pb->heads_kv * chunks, pb->batch, FA_DEC_THREADS, 0, "launching the split-key forward");
    }
    if (plan->splits > 1) {
        const size_t out_rows = (size_t)(pb->batch * pb->heads_q * pb->seq_q);
        const size_t part_rows = (size_t)plan->splits * out_rows;
        plan->part_lse_offset =
            (part_rows * (size_t)pb->head_dim * sizeof(float) + 255) / 256 * 256;
        plan->workspace_bytes = plan->part_lse_offset + part_rows * sizeof(float);
        /* The split kernel's last block of each group merges it (a launch saved: the merge
         * kernel took 7-12 us of a 20-140 us call on the H200), where its chunk counts reach. */
        const fa_cuda_launch *split = &plan->launches[plan->count - 1];
        plan->merge_in_split = !caps->decode_merge_kernel &&
                               (uint64_t)split->grid[1] * split->grid[2] <= FA_DEC_DONE_SLOTS;
        if (!plan->merge_in_split)
            add(plan, find(FA_CUDA_FWD_MERGE, pb->dtype, 256, 0),
                blocks((int64_t)out_rows, FA_DEC_WARPS), 1, 1, FA_DEC_THREADS, 0,
                "launching the split-key merge");
    }
    return true;
}

bool fa_cuda_fp8_takes(const fa_cuda_caps *caps, const fa_cuda_problem *pb, char *why,
                       size_t why_size)
{
    if (!why)
        why_size = 0;
    if (!caps->wgmma_fwd)
        snprintf(why, why_size,
                 "its FP8 forward runs on the sm_90a (wgmma) kernels, which this device (compute "
                 "capability %d.%d) has not loaded",
                 caps->cc_major, caps->cc_minor);
    else if (caps->force_general)
        snprintf(why, why_size, "FA_CUDA_KERNELS=general turns its FP8 forward off");
    else if (pb->head_dim > 128 || pb->head_dim % 16 != 0)
        snprintf(why, why_size,
                 "its FP8 forward takes head dims that are multiples of 16 up to 128, not %lld",
                 (long long)pb->head_dim);
    else if (!pb->aligned)
        snprintf(why, why_size,
                 "its FP8 forward needs q, k, v and o with rows on 16-byte boundaries");
    else if (pb->seqlens_k || pb->paged)
        snprintf(why, why_size,
                 "its FP8 forward takes no seqlens_k and no paged cache (the decoding path is "
                 "f32/f16/bf16)");
    else if (FA_FWD_WGMMA_SMEM_E4M3(128) > caps->smem_optin)
        snprintf(why, why_size, "its FP8 forward needs %d bytes of shared memory a block",
                 FA_FWD_WGMMA_SMEM_E4M3(128));
    else
        return true;
    return false;
}

/* The wgmma forward's launch: a block a (query tile, head, batch entry), or where persistent
 * (FA_FWD_WGMMA_PERSISTENT_CALL: head dims up to 128, not packed, not causal unless
 * FA_FWD_WGMMA_CAUSAL_DYN) at most a block an SM taking the items in turn. */
static void add_wgmma_forward(fa_cuda_plan *plan, const fa_cuda_caps *caps,
                              const fa_cuda_problem *pb, fa_cuda_kernel kernel, uint32_t d,
                              unsigned smem, const char *what)
{
    unsigned gx = blocks(pb->seq_q, FA_FWD_WGMMA_BQ_D(d));
    int64_t gy = pb->heads_q, gz = pb->batch;
    if (!pb->varlen && FA_FWD_WGMMA_PERSISTENT_CALL(d, pb->causal)) {
        const int64_t items = (int64_t)gx * gy * gz;
        const int64_t sms = caps->sm_count > 0 ? caps->sm_count : 1;
        gx = (unsigned)(items < sms ? items : sms), gy = gz = 1;
    }
    add(plan, kernel, gx, gy, gz, FA_FWD_WGMMA_THREADS_D(d), smem, what);
}

/* The keys the middle query row sees (causal: half of seq_q fewer than seq_k; a window: at most
 * its width): how long a query tile's work is. */
static int64_t middle_row_keys(const fa_cuda_problem *pb)
{
    const int64_t left = pb->window ? pb->window_left : -1;
    const int64_t right = pb->causal ? 0 : pb->window ? pb->window_right : -1;
    const int64_t diag = pb->seq_q / 2 + pb->seq_k - pb->seq_q; /* the middle row's diagonal */
    const int64_t lo = left >= 0 && diag - left > 0 ? diag - left : 0;
    const int64_t hi = right >= 0 && diag + right < pb->seq_k - 1 ? diag + right : pb->seq_k - 1;
    return hi - lo + 1;
}

/* bf16 at head dim 64: the 128-key kernel (with three computing warpgroups its masked tiles run
 * in halves) where the middle query row sees FA_FWD_WGMMA_K128_KEYS keys or more, else 64-key
 * tiles. On an H100, 128 keys gained 5 % at N=1k, 11-19 % at 2k-16k, 2 % at 2k causal, and lost
 * 6 % at N=512, 18 % at 512 causal (docs/PERF.md). */
static bool wgmma_long_rows(const fa_cuda_problem *pb, uint32_t d)
{
    return pb->dtype == FA_DTYPE_BF16 && d == 64 && middle_row_keys(pb) >= FA_FWD_WGMMA_K128_KEYS;
}

/* Head dim 64 by the tensor-memory loader (its FWD_WGMMA rows with P2 = 1) on calls without a
 * mask, and on causal ones without a window where the middle query row sees
 * FA_FWDW_TMA_D64_KEYS keys or more. On an H100 (forty-eighth session, TF/s against the copying
 * loader) it gained 7 % at N=512, 6-9 % at 16k, 1-3.5 % at 2k and 16k causal; it lost 16 % at
 * N=512 causal (bf16 8 %), 13 % with a window of 512 keys at N=4k and 5.5 % with one of 2048 at
 * 16k: items that short, each with its O stored before the next Q may land, and windowed
 * calls keep the copying loader. */
static bool wgmma_tma_d64_pays(const fa_cuda_problem *pb)
{
    return !pb->window && (!pb->causal || middle_row_keys(pb) >= FA_FWDW_TMA_D64_KEYS);
}

/* Kernel k's twin with the tensor-memory loader (same family, dtype, head dim and P1; P2 = 1),
 * else k. */
static fa_cuda_kernel tma_twin(fa_cuda_kernel k)
{
    const fa_cuda_kernel_info *a = &fa_cuda_kernels[k];
    for (int i = 0; i < FA_CUDA_K_COUNT; i++) {
        const fa_cuda_kernel_info *b = &fa_cuda_kernels[i];
        if (b->family == a->family && b->dtype == a->dtype && b->d == a->d && b->p1 == a->p1 &&
            b->p2 == 1)
            return (fa_cuda_kernel)i;
    }
    return k;
}

/* FP8 (e4m3): the wgmma forward's E4M3 row; nothing for a packed batch (the runtime runs it
 * sequence by sequence) or a call fa_cuda_fp8_takes refuses. */
static void plan_fp8(const fa_cuda_caps *caps, const fa_cuda_problem *pb, fa_cuda_plan *plan)
{
    if (pb->varlen || !fa_cuda_fp8_takes(caps, pb, NULL, 0))
        return;
    const fa_cuda_family family = pb->softcap_fold ? FA_CUDA_FWD_WGMMA_SOFTCAP : FA_CUDA_FWD_WGMMA;
    add_wgmma_forward(plan, caps, pb, find(family, FA_DTYPE_E4M3, 128, 0), 128,
                      FA_FWD_WGMMA_SMEM_E4M3(128), "launching the Hopper (wgmma) FP8 forward");
}

void fa_cuda_plan_forward(const fa_cuda_caps *caps, const fa_cuda_problem *pb, fa_cuda_plan *plan)
{
    *plan = (fa_cuda_plan){0};
    if (pb->dtype == FA_DTYPE_E4M3) {
        plan_fp8(caps, pb, plan);
        return;
    }
    if (!pb->varlen && (plan_split(caps, pb, plan) || pb->seqlens_k || pb->paged))
        return;
    const uint32_t d = mma_dim(pb->head_dim);
    /* head dim 256: 128-row blocks (8 warps) where a 64-row block would be alone on an SM (two
     * do not fit the opt-in limit, as on sm_80) and a 128-row one fits, unless
     * FA_CUDA_FWD_QTILE_D256 says which (128 only where it fits) */
    const int wide_smem = FA_FWD_MMA_SMEM(256, FA_FWD_MMA_BQ_D256_WIDE);
    const bool wide_auto = 2 * FA_FWD_MMA_SMEM(256, FA_FWD_MMA_BQ_D256) > caps->smem_optin;
    const bool wide =
        d == 256 && wide_smem <= caps->smem_optin &&
        (caps->fwd_qtile_d256 ? caps->fwd_qtile_d256 == FA_FWD_MMA_BQ_D256_WIDE : wide_auto);
    const unsigned bq = wide ? FA_FWD_MMA_BQ_D256_WIDE : FA_FWD_MMA_BQ_D(d);
    const unsigned smem = FA_FWD_MMA_SMEM(d, bq); /* Q, K and V x2 */
    const bool fast = !caps->force_general && pb->dtype != FA_DTYPE_F32 && pb->head_dim <= 256 &&
                      (int)smem <= caps->smem_optin && pb->aligned;
    /* compute capability 9.0: the wgmma forward at head dims 33-256, 65-96 padded to 128 (more
     * TF/s than the mma.sync kernel for 96 even with a quarter of its products on zeros), 129-256
     * to 256 */
    const uint32_t wg_d = d > 128 ? 256 : d > 64 ? 128 : 64;
    const unsigned wg_smem = FA_FWD_WGMMA_SMEM(wg_d);
    const fa_cuda_family wg_family = pb->varlen         ? FA_CUDA_FWD_WGMMA_VARLEN
                                     : pb->softcap_fold ? FA_CUDA_FWD_WGMMA_SOFTCAP
                                                        : FA_CUDA_FWD_WGMMA;
    /* a softcap with a bias: not the mma.sync kernel, which takes the bias as the initial value
     * of S's accumulators, before the cap (fa_forward_mma.cuh) */
    const bool sync_ok = !(pb->softcap && pb->bias);
    /* f32 on tensor cores (3xTF32) unless FA_CUDA_F32=cores: 16-byte aligned rows, no bias (the
     * CUDA-core kernel takes it), where the shared memory fits (head dim 256 not on sm_86/89) */
    const uint32_t tf32_d = gen_dim(pb->head_dim);
    const unsigned tf32_smem = FA_FWD_TF32_SMEM(tf32_d, caps->cc_major >= 9);
    const bool tf32 = !caps->force_general && !caps->f32_cores && pb->dtype == FA_DTYPE_F32 &&
                      pb->aligned && pb->head_dim <= 256 && !pb->bias &&
                      (int)tf32_smem <= caps->smem_optin;
    /* a packed batch (never with a bias: the runtime refuses it): the same kernels' *_VARLEN
     * rows where the catalogue has one, else nothing */
    if (fast && caps->wgmma_fwd && d >= 64 && row_exists(wg_family, pb->dtype, wg_d, 0) &&
        (int)wg_smem <= caps->smem_optin) {
        const uint32_t bk = wg_family == FA_CUDA_FWD_WGMMA && wgmma_long_rows(pb, wg_d) ? 128 : 0;
        fa_cuda_kernel kernel = find(wg_family, pb->dtype, wg_d, bk);
        if (wg_family == FA_CUDA_FWD_WGMMA && wg_d == 64 && caps->fwd_tma_d64 &&
            wgmma_tma_d64_pays(pb))
            kernel = tma_twin(kernel);
        add_wgmma_forward(plan, caps, pb, kernel, wg_d, wg_smem,
                          "launching the Hopper (wgmma) forward");
    } else if (pb->varlen && !(fast && row_exists(FA_CUDA_FWD_MMA_VARLEN, pb->dtype, d, bq)))
        return;
    else if (tf32)
        add(plan, find(FA_CUDA_FWD_TF32, FA_DTYPE_F32, tf32_d, 0),
            blocks(pb->seq_q, FA_FWD_TF32_BQ), pb->heads_q, pb->batch, FA_FWD_TF32_THREADS,
            tf32_smem, "launching the f32 tensor-core (3xTF32) forward");
    else if (fast && sync_ok)
        add(plan,
            find(pb->varlen ? FA_CUDA_FWD_MMA_VARLEN : with_bias(FA_CUDA_FWD_MMA, pb->bias),
                 pb->dtype, d, bq),
            blocks(pb->seq_q, bq), pb->heads_q, pb->batch, FA_FWD_MMA_THREADS(d, bq), smem,
            "launching the tensor-core forward");
    else
        add(plan, find(FA_CUDA_FWD_GEN, pb->dtype, gen_dim(pb->head_dim), 0),
            blocks(pb->seq_q, FA_GEN_ROWS), pb->heads_q, pb->batch, FA_GEN_THREADS,
            (unsigned)(2 * FA_GEN_TILE * pb->head_dim * sizeof(float)),
            "launching the general forward");
}

void fa_cuda_plan_backward(const fa_cuda_caps *caps, const fa_cuda_problem *pb, fa_cuda_plan *plan)
{
    *plan = (fa_cuda_plan){0};
    const int optin = caps->smem_optin;
    const fa_dtype dt = pb->dtype;
    /* the deterministic kernels: head dims 64 and 128 */
    const uint32_t d = pb->head_dim > 64 ? 128 : 64;
    const unsigned dkdv_smem = FA_BWD_DKDV_MMA_SMEM(d), dq_smem = FA_BWD_DQ_MMA_SMEM(d);
    /* v4: head dims 32, 64, 96 and 128 (256 below) */
    const uint32_t d4 = mma_dim(pb->head_dim) < 128 ? mma_dim(pb->head_dim) : 128;
    unsigned v4_smem = FA_BWD4_SMEM(d4);
    const bool mma_ok = !caps->force_general && dt != FA_DTYPE_F32 && pb->aligned;
    /* a softcap with a bias: not the mma.sync kernels (v4, the deterministic ones), which take the
     * bias as S's initial value, before the cap; the wgmma kernel (head dim 64) does */
    const bool sync_ok = !(pb->softcap && pb->bias);
    const bool fast =
        mma_ok && pb->head_dim <= 128 && (int)dkdv_smem <= optin && (int)dq_smem <= optin;
    /* dQ by atomics from the dK/dV kernel (v4); else (deterministic, or v4 does not fit) the
     * separate dK/dV and dQ kernels, where those fit (at head dim 128 on sm_86/89 nothing does:
     * the general kernels) */
    const bool v4 = fast && (int)v4_smem <= optin;
    /* v4's 128-row query tiles at head dim 64, unless FA_CUDA_BWD4_QTILE_D64=64, where they fit
     * (sm_80, sm_90) */
    const unsigned v4_q128_smem = FA_BWD4_SMEM_Q(64, FA_BWD4_QTILE_WIDE);
    const bool v4_q128 = v4 && d4 == 64 && caps->bwd4_q128_d64 && (int)v4_q128_smem <= optin;
    if (v4_q128)
        v4_smem = v4_q128_smem;
    /* head dims 129-256 (padded to 256), unless FA_CUDA_BWD_D256=0, and never deterministic:
     * v4 with 64 keys per block and 64-row query tiles where they fit (sm_90), else 32-row ones
     * (sm_80), else (sm_86/89) the general kernels */
    const unsigned d256_smem_wide = FA_BWD4_SMEM_D256(FA_BWD4_QTILE_D256);
    const unsigned d256_smem_narrow = FA_BWD4_SMEM_D256(FA_BWD4_QTILE_D256_NARROW);
    const bool d256_wide = (int)d256_smem_wide <= optin;
    const bool v4_d256 = mma_ok && caps->bwd_d256 && pb->head_dim > 128 && pb->head_dim <= 256 &&
                         !pb->deterministic && (int)d256_smem_narrow <= optin;
    const bool atomic_dq_sync = (v4_d256 || (v4 && !pb->deterministic)) && sync_ok;
    /* compute capability 9.0: the wgmma kernel in v4's place at every head dim up to 128, padded
     * to 64 or 128 (more TF/s than v4's own kernels for 32 and 96), but for a bias above 64
     * (fa_backward_wgmma.cuh reads one at head dim 64 only: at 128 its loads spill) */
    const uint32_t wg_d = d4 > 64 ? 128 : 64;
    const unsigned wg_smem = wg_d == 128 ? FA_BWD_WGMMA_SMEM(128) : FA_BWD_WGMMA_SMEM(64);
    const bool hopper = v4 && !pb->deterministic && caps->wgmma_bwd && (int)wg_smem <= optin &&
                        !(pb->bias && wg_d == 128);
    /* and at head dims 129-256 the wgmma kernel in v4's place, but for a bias (it reads none) */
    const bool hopper256 =
        v4_d256 && caps->wgmma_bwd && !pb->bias && (int)FA_BWD_WGMMA_SMEM(256) <= optin;
    const bool atomic_dq = atomic_dq_sync || hopper || hopper256;
    const uint32_t v4_qtile = v4_q128 ? FA_BWD4_QTILE_WIDE : FA_BWD4_QTILE;
    /* a packed batch (no bias): the atomic kernels' *_VARLEN rows where the catalogue has one,
     * else nothing (the runtime's loop) */
    if (pb->varlen &&
        !(hopper ? row_exists(FA_CUDA_BWD_WGMMA_VARLEN, dt, wg_d, 0)
                 : atomic_dq && !v4_d256 && row_exists(FA_CUDA_BWD_V4_VARLEN, dt, d4, v4_qtile)))
        return;

    /* workspace: Delta (rows floats), then with atomic_dq the (B, Hq, Sq, head_dim) f32 dQ sums */
    const size_t rows = (size_t)pb->batch * (size_t)pb->heads_q * (size_t)pb->seq_q;
    plan->atomic_dq = atomic_dq;
    /* the wgmma kernel adds dQ by bulk reductions into a tiled accumulator (fa_cuda_abi.h) */
    plan->dq_tiled =
        hopper && caps->bwd_dq_bulk && (!pb->varlen || FA_BWD_WGMMA_VARLEN_BULK) ? wg_d : 0;
    if (rows > 0) {
        plan->workspace_bytes = rows * sizeof(float);
        if (atomic_dq) {
            plan->accum_offset = (rows * sizeof(float) + 255) / 256 * 256;
            /* tiled: each head's rows in whole query tiles, the kernel's head dim wide; a packed
             * batch's sequences (pb: each as long as the longest) a tile apart (fa_varlen.cuh) */
            const size_t b = (size_t)pb->batch, hq = (size_t)pb->heads_q, n = (size_t)pb->seq_q;
            const size_t tiled_rows =
                pb->varlen ? hq * (FA_BWD_DQ_TILED_ROWS(b * n) + FA_BWD_WGMMA_QTILE * b)
                           : b * hq * FA_BWD_DQ_TILED_ROWS(n);
            plan->accum_elems =
                plan->dq_tiled ? tiled_rows * plan->dq_tiled : rows * (size_t)pb->head_dim;
            plan->workspace_bytes = plan->accum_offset + plan->accum_elems * sizeof(float);
        }
    }

    const int64_t hq = pb->heads_q, hkv = pb->heads_kv, b = pb->batch;
    add(plan, find(FA_CUDA_BWD_DELTA, dt, 256, 0), blocks(pb->seq_q, FA_GEN_ROWS), hq, b,
        FA_GEN_THREADS, 0, "launching the backward's Delta");
    if (atomic_dq) {
        if (hopper)
            add(plan, find(pb->varlen ? FA_CUDA_BWD_WGMMA_VARLEN : FA_CUDA_BWD_WGMMA, dt, wg_d, 0),
                blocks(pb->seq_k, FA_BWD_WGMMA_KEYS(wg_d)), hkv, b, FA_BWD_WGMMA_THREADS,
                pb->varlen ? (unsigned)FA_BWD_WGMMA_SMEM_VARLEN(wg_d) : wg_smem,
                "launching the Hopper (wgmma) dK/dV/dQ");
        else if (hopper256)
            add(plan, find(FA_CUDA_BWD_WGMMA, dt, 256, 0),
                blocks(pb->seq_k, FA_BWD_WGMMA_KEYS(256)), hkv, b, FA_BWD_WGMMA_THREADS,
                FA_BWD_WGMMA_SMEM(256), "launching the Hopper (wgmma) dK/dV/dQ (head dim 256)");
        else if (v4_d256)
            add(plan,
                find(with_bias(FA_CUDA_BWD_V4, pb->bias), dt, 256,
                     d256_wide ? FA_BWD4_QTILE_D256 : FA_BWD4_QTILE_D256_NARROW),
                blocks(pb->seq_k, FA_BWD4_KEYS_D256), hkv, b, FA_BWD_THREADS,
                d256_wide ? d256_smem_wide : d256_smem_narrow,
                "launching the tensor-core dK/dV/dQ (v4, head dim 256)");
        else
            add(plan,
                find(pb->varlen ? FA_CUDA_BWD_V4_VARLEN : with_bias(FA_CUDA_BWD_V4, pb->bias), dt,
                     d4, v4_qtile),
                blocks(pb->seq_k, FA_BWD4_KEYS), hkv, b, FA_BWD_THREADS, v4_smem,
                "launching the tensor-core dK/dV/dQ (v4)");
        add(plan, find(FA_CUDA_BWD_DQ_CONVERT, dt, 256, 0),
            blocks(pb->seq_q * (pb->head_dim / 8), FA_GEN_THREADS), hq, b, FA_GEN_THREADS, 0,
            "launching the dQ conversion");
    } else if (fast && sync_ok) {
        add(plan, find(with_bias(FA_CUDA_BWD_DKDV_MMA, pb->bias), dt, d, 0),
            blocks(pb->seq_k, FA_BWD_ROWS), hkv, b, FA_BWD_THREADS, dkdv_smem,
            "launching the tensor-core dK/dV");
        add(plan, find(with_bias(FA_CUDA_BWD_DQ_MMA, pb->bias), dt, d, 0),
            blocks(pb->seq_q, FA_BWD_ROWS), hq, b, FA_BWD_THREADS, dq_smem,
            "launching the tensor-core dQ");
    } else {
        const unsigned tile_smem = (unsigned)(2 * FA_GEN_TILE * pb->head_dim * sizeof(float));
        const uint32_t gd = gen_dim(pb->head_dim);
        add(plan, find(FA_CUDA_BWD_DKDV_GEN, dt, gd, 0), blocks(pb->seq_k, FA_GEN_ROWS), hkv, b,
            FA_GEN_THREADS, tile_smem + 2 * FA_GEN_TILE * sizeof(float),
            "launching the backward's dK/dV");
        add(plan, find(FA_CUDA_BWD_DQ_GEN, dt, gd, 0), blocks(pb->seq_q, FA_GEN_ROWS), hq, b,
            FA_GEN_THREADS, tile_smem, "launching the backward's dQ");
    }
}
