// SPDX-License-Identifier: MIT
/* The CUDA kernel planner (backends/cuda/cuda_plan.c) on the capability sets of sm_80, sm_86,
 * sm_89 and sm_90, none of which is needed here: every plan must only launch kernels that exist
 * for the architecture, fit its shared memory and cover the problem, and the documented choices
 * (which kernel serves which call) are checked one by one. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "cuda_plan.h"

typedef struct arch {
    const char *name;
    fa_cuda_caps caps;
} arch;

/* Opt-in shared memory per block: A100 163 KiB, RTX 30xx / 40xx 99 KiB, H100 / H200 227 KiB. */
static const fa_cuda_caps defaults = {.bwd4_q128_d64 = true, .bwd_d256 = true, .bwd_dq_bulk = true};
static fa_cuda_caps caps_of(int major, int minor, int smem, bool sm90a)
{
    fa_cuda_caps c = defaults;
    c.cc_major = major;
    c.cc_minor = minor;
    c.smem_optin = smem;
    c.wgmma_fwd = c.wgmma_bwd = sm90a;
    return c;
}
#define SM80 caps_of(8, 0, 166912, false)
#define SM86 caps_of(8, 6, 101376, false)
#define SM89 caps_of(8, 9, 101376, false)
#define SM90 caps_of(9, 0, 232448, true)

/* Each architecture the build has kernels for, and Hopper without the sm_90a ones. */
enum { EVERY_ARCH = 5 };
static void every_arch(arch out[EVERY_ARCH])
{
    const arch all[EVERY_ARCH] = {{"sm_80", SM80},
                                  {"sm_86", SM86},
                                  {"sm_89", SM89},
                                  {"sm_90", SM90},
                                  {"sm_90 without sm_90a", caps_of(9, 0, 232448, false)}};
    memcpy(out, all, sizeof all);
}

static fa_cuda_problem problem(fa_dtype dtype, int64_t head_dim, bool deterministic)
{
    return (fa_cuda_problem){.dtype = dtype,
                             .batch = 2,
                             .seq_q = 1000,
                             .seq_k = 1500,
                             .heads_q = 8,
                             .heads_kv = 2,
                             .head_dim = head_dim,
                             .deterministic = deterministic,
                             .aligned = true};
}

static fa_cuda_family family_of(const fa_cuda_launch *l)
{
    return fa_cuda_kernels[l->kernel].family;
}

/* CUDA-core kernels: any dtype (the split-key ones only on aligned rows, checked apart). */
static bool is_general(fa_cuda_family f)
{
    return f == FA_CUDA_FWD_GEN || f == FA_CUDA_BWD_DKDV_GEN || f == FA_CUDA_BWD_DQ_GEN ||
           f == FA_CUDA_BWD_DELTA || f == FA_CUDA_FWD_SPLIT || f == FA_CUDA_FWD_MERGE;
}

/* The split-key forward's kernels, CUDA-core or tensor-core. */
static bool is_split(fa_cuda_family f)
{
    return f == FA_CUDA_FWD_SPLIT || f == FA_CUDA_FWD_SPLIT_MMA;
}

/* The families that take a sliding window and a softcap (fa_cuda_abi.h's has_left, softcap):
 * all but the CUDA-core split-key forward. */
static bool takes_variants(fa_cuda_family f)
{
    return f != FA_CUDA_FWD_SPLIT;
}

/* The families that take ALiBi (fa_cuda_abi.h's has_alibi): all but the CUDA-core split-key
 * forward. */
static bool takes_alibi(fa_cuda_family f)
{
    return f != FA_CUDA_FWD_SPLIT;
}

/* The mma.sync kernels' twins that read a bias (and take it as S's initial value, so not with a
 * softcap). */
static bool is_bias_twin(fa_cuda_family f)
{
    return f == FA_CUDA_FWD_MMA_BIAS || f == FA_CUDA_BWD_V4_BIAS ||
           f == FA_CUDA_BWD_DKDV_MMA_BIAS || f == FA_CUDA_BWD_DQ_MMA_BIAS;
}

/* The mma.sync kernels, which have such twins. */
static bool is_mma_sync(fa_cuda_family f)
{
    return f == FA_CUDA_FWD_MMA || f == FA_CUDA_BWD_V4 || f == FA_CUDA_BWD_DKDV_MMA ||
           f == FA_CUDA_BWD_DQ_MMA || is_bias_twin(f);
}

/* Kernel a is kernel b, or b's twin with a bias (the same name with "_bias" after the family's
 * prefix, and the same row otherwise). */
static bool same_or_twin(fa_cuda_kernel a, fa_cuda_kernel b)
{
    const fa_cuda_kernel_info *x = &fa_cuda_kernels[a], *y = &fa_cuda_kernels[b];
    const char *cut = strstr(x->name, "_bias_");
    return a == b ||
           (is_bias_twin(x->family) && is_mma_sync(y->family) && !is_bias_twin(y->family) &&
            x->dtype == y->dtype && x->d == y->d && x->p1 == y->p1 && x->p2 == y->p2 && cut &&
            strncmp(x->name, y->name, (size_t)(cut - x->name)) == 0 &&
            strcmp(cut + 5, y->name + (cut - x->name)) == 0);
}

static bool is_sm90a(fa_cuda_kernel k)
{
    return k >= FA_CUDA_K_SM90_FIRST;
}

/* Rows (queries or keys) one block of a launch covers, and the length it walks: a plan covers
 * the problem when grid.x * rows >= that length. */
static void coverage(const fa_cuda_launch *l, const fa_cuda_problem *pb, int64_t *rows,
                     int64_t *length)
{
    const fa_cuda_kernel_info *k = &fa_cuda_kernels[l->kernel];
    *length = pb->seq_q;
    switch (k->family) {
    case FA_CUDA_FWD_MMA:
    case FA_CUDA_FWD_MMA_VARLEN:
    case FA_CUDA_FWD_MMA_BIAS:
        *rows = k->p1;
        break;
    case FA_CUDA_FWD_WGMMA:
    case FA_CUDA_FWD_WGMMA_VARLEN:
    case FA_CUDA_FWD_WGMMA_SOFTCAP:
        *rows = FA_FWD_WGMMA_BQ_D(k->d);
        break;
    case FA_CUDA_FWD_TF32:
        *rows = FA_FWD_TF32_BQ;
        break;
    case FA_CUDA_FWD_GEN:
    case FA_CUDA_BWD_DELTA:
    case FA_CUDA_BWD_DQ_GEN:
        *rows = FA_GEN_ROWS;
        break;
    case FA_CUDA_BWD_DKDV_GEN:
        *rows = FA_GEN_ROWS, *length = pb->seq_k;
        break;
    case FA_CUDA_BWD_V4:
    case FA_CUDA_BWD_V4_VARLEN:
    case FA_CUDA_BWD_V4_BIAS:
        *rows = k->p2, *length = pb->seq_k;
        break;
    case FA_CUDA_BWD_DKDV_MMA:
    case FA_CUDA_BWD_DKDV_MMA_BIAS:
        *rows = FA_BWD_ROWS, *length = pb->seq_k;
        break;
    case FA_CUDA_BWD_DQ_MMA:
    case FA_CUDA_BWD_DQ_MMA_BIAS:
        *rows = FA_BWD_ROWS;
        break;
    case FA_CUDA_BWD_DQ_CONVERT:
        *rows = FA_GEN_THREADS, *length = pb->seq_q * (pb->head_dim / 8);
        break;
    case FA_CUDA_BWD_WGMMA:
    case FA_CUDA_BWD_WGMMA_VARLEN:
        *rows = FA_BWD_WGMMA_KEYS(k->d), *length = pb->seq_k;
        break;
    case FA_CUDA_FWD_SPLIT: /* grid.x: key chunks (check_split) */
    case FA_CUDA_FWD_SPLIT_MMA:
    case FA_CUDA_FWD_MERGE:
        *rows = 0;
        break;
    }
}

/* A split-key forward plan: the chunks cover the keys with none empty, one block per KV head
 * and chunk of packed rows (the tensor-core kernel: all of them), the workspace exactly when
 * there are several, and then their merge: in the split kernel where its chunk counts reach
 * (FA_DEC_DONE_SLOTS groups), else a launch of its own. */
static void check_split(const char *where, const fa_cuda_problem *pb, const fa_cuda_plan *plan)
{
    const int64_t rows = pb->seq_q * (pb->heads_q / pb->heads_kv);
    cr_expect(pb->aligned && rows <= FA_DEC_MAX_ROWS, "%s", where);
    cr_expect(plan->splits >= 1 && plan->splits <= FA_DEC_MAX_SPLITS, "%s: %d", where,
              plan->splits);
    cr_expect(plan->split_keys > 0 && plan->split_keys % 64 == 0, "%s", where);
    const int64_t keys = pb->seq_k > 0 ? pb->seq_k : 1;
    cr_expect((int64_t)plan->splits * plan->split_keys >= keys &&
                  (int64_t)(plan->splits - 1) * plan->split_keys < keys,
              "%s: %d chunks of %d keys for %lld", where, plan->splits, plan->split_keys,
              (long long)pb->seq_k);
    const fa_cuda_launch *l = &plan->launches[0];
    cr_expect_eq(l->grid[0], (unsigned)plan->splits, "%s", where);
    if (family_of(l) == FA_CUDA_FWD_SPLIT_MMA) {
        cr_expect_eq(l->grid[1], (unsigned)pb->heads_kv, "%s", where);
        const unsigned warps = l->threads / 32;
        cr_expect(warps >= 1 && warps <= FA_DEC_MMA_MAX_WARPS && l->threads % 32 == 0, "%s", where);
        cr_expect_eq(l->smem, FA_DEC_MMA_SMEM(fa_cuda_kernels[l->kernel].d, warps), "%s", where);
    } else {
        cr_expect_eq(l->grid[1],
                     (unsigned)(pb->heads_kv * ((rows + FA_DEC_ROWS - 1) / FA_DEC_ROWS)), "%s",
                     where);
    }
    const size_t out_rows = (size_t)(pb->batch * pb->heads_q * pb->seq_q);
    if (plan->splits == 1) {
        cr_expect_eq(plan->count, 1, "%s", where);
        cr_expect_eq(plan->workspace_bytes, 0, "%s", where);
        cr_expect(!plan->merge_in_split, "%s", where);
        return;
    }
    const bool in_split = (uint64_t)l->grid[1] * l->grid[2] <= FA_DEC_DONE_SLOTS;
    cr_expect(!plan->merge_in_split || in_split, "%s", where);
    if (plan->merge_in_split) {
        cr_expect_eq(plan->count, 1, "%s", where);
    } else {
        cr_expect_eq(plan->count, 2, "%s", where);
        cr_expect_eq(family_of(&plan->launches[1]), FA_CUDA_FWD_MERGE, "%s", where);
        cr_expect((size_t)plan->launches[1].grid[0] * FA_DEC_WARPS >= out_rows, "%s", where);
    }
    const size_t part_rows = (size_t)plan->splits * out_rows;
    cr_expect(plan->part_lse_offset % 256 == 0 &&
                  plan->part_lse_offset >= part_rows * (size_t)pb->head_dim * sizeof(float),
              "%s", where);
    cr_expect_eq(plan->workspace_bytes, plan->part_lse_offset + part_rows * sizeof(float), "%s",
                 where);
}

/* Every property a plan must have, whatever it chose. */
static void check_plan(const char *where, const fa_cuda_caps *caps, const fa_cuda_problem *pb,
                       const fa_cuda_plan *plan, bool backward)
{
    cr_assert(plan->count >= 1 && plan->count <= FA_CUDA_MAX_LAUNCHES, "%s: %u launches", where,
              plan->count);
    for (unsigned i = 0; i < plan->count; i++) {
        const fa_cuda_launch *l = &plan->launches[i];
        cr_assert(l->kernel < FA_CUDA_K_COUNT, "%s", where);
        const fa_cuda_kernel_info *k = &fa_cuda_kernels[l->kernel];
        cr_expect_eq(k->dtype, pb->dtype, "%s: %s has another dtype", where, k->name);
        cr_expect(l->smem <= (unsigned)caps->smem_optin, "%s: %s needs %u bytes", where, k->name,
                  l->smem);
        cr_expect(l->threads >= 32 && l->threads <= 1024 && l->threads % 32 == 0, "%s: %s", where,
                  k->name);
        if (is_sm90a(l->kernel))
            cr_expect(backward ? caps->wgmma_bwd : caps->wgmma_fwd, "%s: %s without sm_90a", where,
                      k->name);
        if (k->family == FA_CUDA_FWD_TF32) {
            cr_expect(pb->aligned && pb->dtype == FA_DTYPE_F32 && !caps->force_general &&
                          !caps->f32_cores && !pb->bias && !backward,
                      "%s: %s for an unaligned, forced-general, biased or f16/bf16 call", where,
                      k->name);
        } else if (!is_general(k->family)) {
            cr_expect(pb->aligned && pb->dtype != FA_DTYPE_F32 && !caps->force_general,
                      "%s: tensor-core %s for an f32, unaligned or forced-general call", where,
                      k->name);
        }
        if (pb->window || pb->softcap)
            cr_expect(takes_variants(k->family), "%s: %s takes no window or softcap", where,
                      k->name);
        if (pb->alibi)
            cr_expect(takes_alibi(k->family), "%s: %s takes no ALiBi", where, k->name);
        if (pb->bias)
            cr_expect(!is_split(k->family) && k->family != FA_CUDA_FWD_MERGE &&
                          !(k->family == FA_CUDA_BWD_WGMMA && k->d >= 128),
                      "%s: %s takes no bias", where, k->name);
        if (pb->bias && pb->softcap)
            cr_expect(!is_mma_sync(k->family), "%s: %s takes no bias with a softcap", where,
                      k->name);
        if (is_mma_sync(k->family))
            cr_expect_eq(is_bias_twin(k->family), pb->bias, "%s: %s", where, k->name);
        cr_expect(k->d >= (uint32_t)pb->head_dim, "%s: %s serves head dim %u < %lld", where,
                  k->name, k->d, (long long)pb->head_dim);
        if (is_split(k->family) || k->family == FA_CUDA_FWD_MERGE)
            continue; /* check_split */
        if (k->family == FA_CUDA_FWD_WGMMA || k->family == FA_CUDA_FWD_WGMMA_SOFTCAP ||
            k->family == FA_CUDA_FWD_WGMMA_VARLEN)
            cr_expect_eq(l->threads, FA_FWD_WGMMA_THREADS_D(k->d), "%s: %s", where, k->name);
        if ((k->family == FA_CUDA_FWD_WGMMA || k->family == FA_CUDA_FWD_WGMMA_SOFTCAP) &&
            FA_FWD_WGMMA_PERSISTENT_CALL(k->d, pb->causal)) {
            /* persistent: every (query tile, head, batch entry), at most a block per SM */
            const int64_t items = (pb->seq_q + FA_FWD_WGMMA_BQ_D(k->d) - 1) /
                                  FA_FWD_WGMMA_BQ_D(k->d) * pb->heads_q * pb->batch;
            const int64_t sms = caps->sm_count > 0 ? caps->sm_count : 1;
            cr_expect(l->grid[0] == (unsigned)(items < sms ? items : sms) && l->grid[1] == 1 &&
                          l->grid[2] == 1,
                      "%s: %s grid %u x %u x %u for %lld items", where, k->name, l->grid[0],
                      l->grid[1], l->grid[2], (long long)items);
            continue;
        }
        cr_expect_eq(l->grid[2], (unsigned)pb->batch, "%s: %s", where, k->name);
        cr_expect(l->grid[1] == (unsigned)pb->heads_q || l->grid[1] == (unsigned)pb->heads_kv,
                  "%s: %s", where, k->name);
        int64_t rows, length;
        coverage(l, pb, &rows, &length);
        cr_expect(length == 0 ? l->grid[0] == 0
                              : (int64_t)l->grid[0] * rows >= length &&
                                    (int64_t)(l->grid[0] - 1) * rows < length,
                  "%s: %s grid %u x %lld rows for %lld", where, k->name, l->grid[0],
                  (long long)rows, (long long)length);
        cr_expect(l->what && l->what[0], "%s", where);
    }
    if (!backward && is_split(family_of(&plan->launches[0]))) {
        check_split(where, pb, plan);
        return;
    }
    cr_expect_eq(plan->splits, 0, "%s", where);
    if (!backward) {
        cr_expect_eq(plan->count, 1, "%s", where);
        cr_expect_eq(plan->workspace_bytes, 0, "%s", where);
        return;
    }
    const size_t rows = (size_t)pb->batch * (size_t)pb->heads_q * (size_t)pb->seq_q;
    cr_expect_eq(family_of(&plan->launches[0]), FA_CUDA_BWD_DELTA, "%s: Delta first", where);
    cr_expect(plan->workspace_bytes >= rows * sizeof(float), "%s", where);
    const fa_cuda_family last = family_of(&plan->launches[plan->count - 1]);
    if (plan->atomic_dq) {
        cr_expect(!pb->deterministic, "%s: atomics in a deterministic backward", where);
        cr_expect_eq(last, FA_CUDA_BWD_DQ_CONVERT, "%s", where);
        cr_expect_eq(plan->count, 3, "%s", where);
        cr_expect(plan->accum_offset % 256 == 0 && plan->accum_offset >= rows * sizeof(float), "%s",
                  where);
        /* the tiled accumulator: the wgmma kernel's bulk dQ adds (head dims up to 128, a packed
         * batch where FA_BWD_WGMMA_VARLEN_BULK), rows rounded up to its 64-row tiles (a packed
         * batch's sequences a tile apart), its head dim wide */
        const fa_cuda_launch *k = &plan->launches[1];
        const bool tiled =
            (family_of(k) == FA_CUDA_BWD_WGMMA && fa_cuda_kernels[k->kernel].d <= 128) ||
            (FA_BWD_WGMMA_VARLEN_BULK && family_of(k) == FA_CUDA_BWD_WGMMA_VARLEN);
        cr_expect_eq(plan->dq_tiled, tiled ? fa_cuda_kernels[k->kernel].d : 0, "%s", where);
        const size_t b = (size_t)pb->batch, hq = (size_t)pb->heads_q;
        const size_t tiled_rows = pb->varlen
                                      ? hq * ((b * (size_t)pb->seq_q + 63) / 64 * 64 + 64 * b)
                                      : b * hq * (size_t)((pb->seq_q + 63) / 64 * 64);
        cr_expect_eq(plan->accum_elems,
                     tiled ? tiled_rows * plan->dq_tiled : rows * (size_t)pb->head_dim, "%s",
                     where);
        cr_expect_eq(plan->workspace_bytes, plan->accum_offset + plan->accum_elems * sizeof(float),
                     "%s", where);
    } else {
        cr_expect_eq(plan->dq_tiled, 0, "%s", where);
        cr_expect_eq(plan->count, 3, "%s", where);
        cr_expect(last == FA_CUDA_BWD_DQ_MMA || last == FA_CUDA_BWD_DQ_MMA_BIAS ||
                      last == FA_CUDA_BWD_DQ_GEN,
                  "%s", where);
        cr_expect_eq(plan->workspace_bytes, rows * sizeof(float), "%s", where);
    }
}

Test(cuda_plan, every_architecture_dtype_and_head_dim_gets_a_valid_plan)
{
    arch archs[EVERY_ARCH];
    every_arch(archs);
    const fa_dtype dtypes[] = {FA_DTYPE_F32, FA_DTYPE_F16, FA_DTYPE_BF16};
    /* the head dims the runtime admits: multiples of 8 from 8 to 256 */
    const int64_t dims[] = {8,   16,  24,  32,  40,  48,  64,  72,  80,  96,
                            104, 112, 128, 136, 160, 192, 200, 224, 248, 256};
    const int64_t seqs[][2] = {{1, 1},     {7, 300},  {513, 1000}, {4096, 4096}, {1000, 64},
                               {1, 70000}, {4, 4096}, {1, 0},      {2, 100000}};
    int plans = 0;
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++)
        for (size_t t = 0; t < 3; t++)
            for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
                for (size_t s = 0; s < sizeof seqs / sizeof seqs[0]; s++)
                    for (int flags = 0; flags < 128; flags++) {
                        fa_cuda_problem pb = problem(dtypes[t], dims[d], flags & 1);
                        pb.aligned = !(flags & 2);
                        pb.window = flags & 4;
                        pb.softcap = flags & 8;
                        pb.alibi = flags & 16;
                        pb.bias = flags & 32;
                        pb.softcap_fold = pb.softcap && !pb.alibi && !pb.bias;
                        pb.causal = flags & 64;
                        pb.seq_q = seqs[s][0];
                        pb.seq_k = seqs[s][1];
                        char where[160];
                        snprintf(where, sizeof where,
                                 "%s dtype %d D=%lld Sq=%lld Sk=%lld det=%d "
                                 "aligned=%d window=%d softcap=%d alibi=%d bias=%d",
                                 archs[a].name, (int)dtypes[t], (long long)dims[d],
                                 (long long)pb.seq_q, (long long)pb.seq_k, flags & 1, pb.aligned,
                                 pb.window, pb.softcap, pb.alibi, pb.bias);
                        fa_cuda_plan plan;
                        fa_cuda_plan_forward(&archs[a].caps, &pb, &plan);
                        check_plan(where, &archs[a].caps, &pb, &plan, false);
                        fa_cuda_plan_backward(&archs[a].caps, &pb, &plan);
                        check_plan(where, &archs[a].caps, &pb, &plan, true);
                        plans += 2;
                    }
    cr_expect_gt(plans, 10000);
}

static fa_cuda_kernel fwd_kernel(fa_cuda_caps caps, fa_dtype dtype, int64_t d)
{
    fa_cuda_problem pb = problem(dtype, d, false);
    fa_cuda_plan plan;
    fa_cuda_plan_forward(&caps, &pb, &plan);
    return plan.launches[0].kernel;
}

static bool same_plan(const fa_cuda_plan *a, const fa_cuda_plan *b);

Test(cuda_plan, forward_choices)
{
    /* Hopper: wgmma at head dims 33-256 (96 padded to 128, 129-255 to 256), mma.sync at 32 */
    cr_expect_eq(fwd_kernel(SM90, FA_DTYPE_F16, 128), FA_CUDA_K_FWD_WGMMA_F16_D128);
    cr_expect_eq(fwd_kernel(SM90, FA_DTYPE_BF16, 96), FA_CUDA_K_FWD_WGMMA_BF16_D128);
    cr_expect_eq(fwd_kernel(SM90, FA_DTYPE_F16, 40), FA_CUDA_K_FWD_WGMMA_F16_D64);
    cr_expect_eq(fwd_kernel(SM90, FA_DTYPE_F16, 32), FA_CUDA_K_FWD_MMA_F16_D32);
    cr_expect_eq(fwd_kernel(SM90, FA_DTYPE_F16, 256), FA_CUDA_K_FWD_WGMMA_F16_D256);
    cr_expect_eq(fwd_kernel(SM90, FA_DTYPE_BF16, 136), FA_CUDA_K_FWD_WGMMA_BF16_D256);
    /* head dims up to 128: persistent (a block per SM; causal too with FA_FWD_WGMMA_CAUSAL_DYN);
     * 256: a block per item */
    fa_cuda_caps h200 = SM90;
    h200.sm_count = 132;
    fa_cuda_problem many = problem(FA_DTYPE_F16, 128, false); /* 8 tiles x 8 heads x 2 */
    fa_cuda_plan plan_many;
    fa_cuda_plan_forward(&h200, &many, &plan_many);
    cr_expect(plan_many.launches[0].grid[0] == 128 && plan_many.launches[0].grid[1] == 1);
    many.batch = 3;
    fa_cuda_plan_forward(&h200, &many, &plan_many);
    cr_expect(plan_many.launches[0].grid[0] == 132 && plan_many.launches[0].grid[2] == 1);
    many.causal = true;
    fa_cuda_plan_forward(&h200, &many, &plan_many);
    if (FA_FWD_WGMMA_CAUSAL_DYN)
        cr_expect(plan_many.launches[0].grid[0] == 132 && plan_many.launches[0].grid[2] == 1);
    else
        cr_expect(plan_many.launches[0].grid[0] == 8 && plan_many.launches[0].grid[1] == 8 &&
                  plan_many.launches[0].grid[2] == 3);
    many.causal = false;
    many.head_dim = 256;
    fa_cuda_plan_forward(&h200, &many, &plan_many);
    cr_expect(plan_many.launches[0].grid[0] == 8 && plan_many.launches[0].grid[2] == 3);
    /* bf16 at head dim 64: the 128-key kernel where the middle query row sees
     * FA_FWD_WGMMA_K128_KEYS keys or more, else 64; f16 has one kernel. (left, right: a
     * window's bounds, -1 none; both -1: no window) */
    struct {
        fa_dtype dtype;
        int64_t seq_q, seq_k;
        bool causal;
        int32_t left, right;
        bool k128, tma; /* tma: the tensor-memory twin where asked (no window; causal: 1024
                         * keys, as for 128) */
    } rows[] = {{FA_DTYPE_BF16, 1024, 1024, false, -1, -1, true, true},
                {FA_DTYPE_BF16, 512, 512, false, -1, -1, false, true},
                {FA_DTYPE_BF16, 2048, 2048, true, -1, -1, true, true},
                {FA_DTYPE_BF16, 1024, 1024, true, -1, -1, false, false},
                {FA_DTYPE_BF16, 64, 2048, true, -1, -1, true, true},
                {FA_DTYPE_BF16, 700, 1100, true, -1, -1, false, false},
                {FA_DTYPE_BF16, 4096, 4096, true, 100, -1, false, false},
                {FA_DTYPE_BF16, 4096, 4096, true, 1023, -1, true, false},
                {FA_DTYPE_BF16, 4096, 4096, false, 512, 511, true, false},
                {FA_DTYPE_BF16, 4096, 4096, false, 500, 500, false, false},
                {FA_DTYPE_BF16, 4096, 4096, false, -1, 100, true, false},
                {FA_DTYPE_BF16, 300, 4096, false, 50, -1, false, false},
                {FA_DTYPE_F16, 4096, 4096, false, -1, -1, false, true},
                {FA_DTYPE_F16, 512, 512, true, -1, -1, false, false},
                {FA_DTYPE_F16, 4096, 4096, true, 512, -1, false, false}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        fa_cuda_problem pb = problem(rows[i].dtype, 64, false);
        pb.seq_q = rows[i].seq_q, pb.seq_k = rows[i].seq_k, pb.causal = rows[i].causal;
        pb.window = rows[i].left >= 0 || rows[i].right >= 0;
        pb.window_left = rows[i].left, pb.window_right = rows[i].right;
        fa_cuda_plan plan;
        fa_cuda_plan_forward(&h200, &pb, &plan);
        const fa_cuda_kernel_info *k = &fa_cuda_kernels[plan.launches[0].kernel];
        cr_expect(k->family == FA_CUDA_FWD_WGMMA && k->d == 64 && k->dtype == rows[i].dtype &&
                      k->p1 == (rows[i].k128 ? 128u : 0u) && k->p2 == 0,
                  "row %zu: %s", i, k->name);
        /* with the tensor-memory loader at head dim 64: its twin (same key tile) on calls
         * without a mask and on causal ones without a window whose middle row sees
         * FA_FWDW_TMA_D64_KEYS keys */
        fa_cuda_caps tma = h200;
        tma.fwd_tma = tma.fwd_tma_d64 = true;
        fa_cuda_plan tma_plan;
        fa_cuda_plan_forward(&tma, &pb, &tma_plan);
        const fa_cuda_kernel_info *t = &fa_cuda_kernels[tma_plan.launches[0].kernel];
        cr_expect(t->family == k->family && t->dtype == k->dtype && t->d == 64 && t->p1 == k->p1 &&
                      t->p2 == (rows[i].tma ? 1u : 0u),
                  "row %zu with tensor maps: %s", i, t->name);
        cr_expect(tma_plan.count == 1 && tma_plan.launches[0].threads == plan.launches[0].threads &&
                      tma_plan.launches[0].smem == plan.launches[0].smem &&
                      tma_plan.launches[0].grid[0] == plan.launches[0].grid[0],
                  "row %zu: the twin's launch", i);
        /* never for a folded softcap or a packed batch, whose kernels have no twin */
        pb.softcap = pb.softcap_fold = true;
        fa_cuda_plan_forward(&tma, &pb, &tma_plan);
        cr_expect(fa_cuda_kernels[tma_plan.launches[0].kernel].family == FA_CUDA_FWD_WGMMA_SOFTCAP,
                  "row %zu softcap", i);
        pb.softcap = pb.softcap_fold = false;
        pb.varlen = true;
        fa_cuda_plan_forward(&tma, &pb, &tma_plan);
        cr_expect(tma_plan.count == 0 ||
                      fa_cuda_kernels[tma_plan.launches[0].kernel].family != FA_CUDA_FWD_WGMMA,
                  "row %zu packed", i);
    }
    /* at head dims 128 and 256 the plan does not change with the head-dim-64 switch */
    for (int64_t d = 128; d <= 256; d *= 2) {
        fa_cuda_caps tma = h200;
        tma.fwd_tma = tma.fwd_tma_d64 = true;
        fa_cuda_problem pb = problem(FA_DTYPE_F16, d, false);
        fa_cuda_plan a, b;
        fa_cuda_plan_forward(&h200, &pb, &a);
        fa_cuda_plan_forward(&tma, &pb, &b);
        cr_expect(same_plan(&a, &b), "head dim %lld", (long long)d);
    }
    /* without the sm_90a image: mma.sync */
    fa_cuda_caps no_wgmma = SM90;
    no_wgmma.wgmma_fwd = false;
    cr_expect_eq(fwd_kernel(no_wgmma, FA_DTYPE_F16, 128), FA_CUDA_K_FWD_MMA_F16_D128);
    cr_expect_eq(fwd_kernel(no_wgmma, FA_DTYPE_F16, 96), FA_CUDA_K_FWD_MMA_F16_D96);
    /* head dim 256: 128-row blocks where a 64-row one would be alone on an SM (sm_80), 64-row
     * ones where two fit (sm_90 without wgmma) or the 128-row one does not (sm_86); the knob
     * overrides */
    cr_expect_eq(fwd_kernel(SM80, FA_DTYPE_F16, 256), FA_CUDA_K_FWD_MMA_Q128_F16_D256);
    cr_expect_eq(fwd_kernel(SM86, FA_DTYPE_BF16, 200), FA_CUDA_K_FWD_MMA_BF16_D256);
    cr_expect_eq(fwd_kernel(no_wgmma, FA_DTYPE_F16, 256), FA_CUDA_K_FWD_MMA_F16_D256);
    fa_cuda_caps wide = no_wgmma;
    wide.fwd_qtile_d256 = FA_FWD_MMA_BQ_D256_WIDE;
    cr_expect_eq(fwd_kernel(wide, FA_DTYPE_F16, 256), FA_CUDA_K_FWD_MMA_Q128_F16_D256);
    fa_cuda_caps narrow = SM80;
    narrow.fwd_qtile_d256 = FA_FWD_MMA_BQ_D256;
    cr_expect_eq(fwd_kernel(narrow, FA_DTYPE_F16, 256), FA_CUDA_K_FWD_MMA_F16_D256);
    /* f32: 3xTF32 on tensor cores at head dims up to 256 (64, 128, 256; 256 not where its 130 KiB
     * do not fit, sm_86/89), unless FA_CUDA_F32=cores, the view is unaligned or the call has a
     * bias */
    fa_cuda_caps t90 = SM90, t80 = SM80, t86 = SM86, t89 = SM89;
    cr_expect_eq(fwd_kernel(t90, FA_DTYPE_F32, 128), FA_CUDA_K_FWD_TF32_F32_D128);
    cr_expect_eq(fwd_kernel(t80, FA_DTYPE_F32, 72), FA_CUDA_K_FWD_TF32_F32_D128);
    cr_expect_eq(fwd_kernel(t86, FA_DTYPE_F32, 8), FA_CUDA_K_FWD_TF32_F32_D64);
    cr_expect_eq(fwd_kernel(t89, FA_DTYPE_F32, 128), FA_CUDA_K_FWD_TF32_F32_D128);
    cr_expect_eq(fwd_kernel(t80, FA_DTYPE_F32, 136), FA_CUDA_K_FWD_TF32_F32_D256);
    cr_expect_eq(fwd_kernel(t86, FA_DTYPE_F32, 256), FA_CUDA_K_FWD_GEN_F32_32);
    cr_expect_eq(fwd_kernel(t90, FA_DTYPE_F32, 256), FA_CUDA_K_FWD_TF32_F32_D256);
    /* head dim 256: one K/V buffer on sm_90 (two blocks of 98 KiB an SM), two on sm_80 */
    fa_cuda_problem f32_d256 = problem(FA_DTYPE_F32, 256, false);
    fa_cuda_plan plan_d256;
    fa_cuda_plan_forward(&t90, &f32_d256, &plan_d256);
    cr_expect_eq(plan_d256.launches[0].smem, (64 + 2 * 16) * 260 * 4);
    fa_cuda_plan_forward(&t80, &f32_d256, &plan_d256);
    cr_expect_eq(plan_d256.launches[0].smem, (64 + 4 * 16) * 260 * 4);
    cr_expect_eq(fwd_kernel(t90, FA_DTYPE_F16, 128), FA_CUDA_K_FWD_WGMMA_F16_D128);
    fa_cuda_caps cores = SM90;
    cores.f32_cores = true;
    cr_expect_eq(fwd_kernel(cores, FA_DTYPE_F32, 128), FA_CUDA_K_FWD_GEN_F32_16);
    cr_expect_eq(fwd_kernel(cores, FA_DTYPE_F32, 256), FA_CUDA_K_FWD_GEN_F32_32);
    cr_expect_eq(fwd_kernel(cores, FA_DTYPE_F16, 128), FA_CUDA_K_FWD_WGMMA_F16_D128);
    fa_cuda_problem pb = problem(FA_DTYPE_F32, 64, false);
    fa_cuda_plan plan;
    pb.bias = true;
    fa_cuda_plan_forward(&t80, &pb, &plan);
    cr_expect_eq(plan.launches[0].kernel, FA_CUDA_K_FWD_GEN_F32_8);
    pb.bias = false;
    pb.aligned = false;
    fa_cuda_plan_forward(&t80, &pb, &plan);
    cr_expect_eq(plan.launches[0].kernel, FA_CUDA_K_FWD_GEN_F32_8);
    /* unaligned views and FA_CUDA_KERNELS=general: the CUDA-core kernels */
    pb = problem(FA_DTYPE_F16, 128, false);
    pb.aligned = false;
    fa_cuda_caps sm90 = SM90;
    fa_cuda_plan_forward(&sm90, &pb, &plan);
    cr_expect_eq(plan.launches[0].kernel, FA_CUDA_K_FWD_GEN_F16_16);
    fa_cuda_caps general = SM90;
    general.force_general = true;
    cr_expect_eq(fwd_kernel(general, FA_DTYPE_BF16, 256), FA_CUDA_K_FWD_GEN_BF16_32);
    cr_expect_eq(fwd_kernel(general, FA_DTYPE_F32, 128), FA_CUDA_K_FWD_GEN_F32_16);
}

static fa_cuda_plan decode_plan(fa_cuda_caps caps, int64_t batch, int64_t seq_q, int64_t seq_k,
                                int32_t num_splits)
{
    fa_cuda_problem pb = {.dtype = FA_DTYPE_F16,
                          .batch = batch,
                          .seq_q = seq_q,
                          .seq_k = seq_k,
                          .heads_q = 32,
                          .heads_kv = 8,
                          .head_dim = 128,
                          .num_splits = num_splits,
                          .aligned = true};
    fa_cuda_plan plan;
    fa_cuda_plan_forward(&caps, &pb, &plan);
    check_split("decode", &pb, &plan);
    return plan;
}

Test(cuda_plan, decoding_splits_the_keys_to_fill_the_device)
{
    fa_cuda_caps h200 = SM90;
    h200.sm_count = 132;
    /* one sequence, 8 KV heads: as many chunks as give each of 132 SMs at most one block of the
     * tensor-core kernel (4 warps, 101 KiB), 256 keys or more each */
    fa_cuda_plan plan = decode_plan(h200, 1, 1, 32768, 0);
    cr_expect_eq(plan.launches[0].kernel, FA_CUDA_K_FWD_SPLIT_MMA_F16_D128);
    cr_expect_eq(plan.launches[0].threads, 128);
    cr_expect_eq(plan.launches[0].smem, FA_DEC_MMA_SMEM(128, 4));
    cr_expect_eq(plan.splits, 16);
    cr_expect_eq(plan.split_keys, 2048);
    /* the chunks merged in the split kernel; FA_CUDA_DECODE_MERGE=kernel: by a launch of their own,
     * as where the groups outnumber the chunk counts */
    cr_expect(plan.merge_in_split);
    cr_expect_eq(plan.count, 1);
    fa_cuda_caps merge_kernel = h200;
    merge_kernel.decode_merge_kernel = true;
    plan = decode_plan(merge_kernel, 1, 1, 32768, 0);
    cr_expect(!plan.merge_in_split);
    cr_expect_eq(plan.launches[1].kernel, FA_CUDA_K_FWD_MERGE_F16);
    plan = decode_plan(h200, FA_DEC_DONE_SLOTS / 8 + 1, 1, 32768, 2);
    cr_expect(!plan.merge_in_split);
    cr_expect_eq(plan.launches[1].kernel, FA_CUDA_K_FWD_MERGE_F16);
    cr_expect(decode_plan(h200, FA_DEC_DONE_SLOTS / 8, 1, 32768, 2).merge_in_split);
    /* FA_CUDA_DECODE_WARPS=8 */
    fa_cuda_caps wide = h200;
    wide.decode_warps = 8;
    cr_expect_eq(decode_plan(wide, 1, 1, 32768, 0).launches[0].threads, 256);
    /* more sequences, fewer chunks; enough work items: none */
    cr_expect_eq(decode_plan(h200, 16, 1, 32768, 0).splits, 8); /* chunks of 4096 keys at most */
    cr_expect_eq(decode_plan(h200, 64, 1, 4096, 0).splits, 1);
    cr_expect_eq(decode_plan(h200, 256, 1, 4096, 0).splits, 1);
    /* short caches: no chunk under 256 keys */
    cr_expect_eq(decode_plan(h200, 1, 1, 1000, 0).splits, 3);
    cr_expect_eq(decode_plan(h200, 1, 1, 100, 0).splits, 1);
    /* four queries of four heads: 16 packed rows, one block per KV head */
    plan = decode_plan(h200, 1, 4, 32768, 0);
    cr_expect_eq(plan.launches[0].grid[1], 8);
    cr_expect_eq(plan.splits, 16);
    /* FA_CUDA_DECODE=cores: the CUDA-core kernel, four blocks of 4 rows per KV head */
    fa_cuda_caps cores = h200;
    cores.decode_cores = true;
    plan = decode_plan(cores, 1, 4, 32768, 0);
    cr_expect_eq(plan.launches[0].kernel, FA_CUDA_K_FWD_SPLIT_F16_D128);
    cr_expect_eq(plan.launches[0].grid[1], 32);
    /* sm_86's 99 KiB: 3 warps at head dim 128, one at 256 */
    fa_cuda_caps ada = SM86;
    ada.sm_count = 84;
    plan = decode_plan(ada, 1, 1, 32768, 0);
    cr_expect_eq(plan.launches[0].kernel, FA_CUDA_K_FWD_SPLIT_MMA_F16_D128);
    cr_expect_eq(plan.launches[0].threads, 96);
    /* asked for: as many as there are 64-key quanta, at most 256 */
    cr_expect_eq(decode_plan(h200, 1, 1, 32768, 1).splits, 1);
    cr_expect_eq(decode_plan(h200, 1, 1, 32768, 7).splits, 7);
    cr_expect_eq(decode_plan(h200, 1, 1, 100, 7).splits, 2);
    cr_expect_eq(decode_plan(h200, 1, 1, 1 << 20, 256).splits, 256);
    /* 8 queries of 4 heads (32 rows), an unaligned view, FA_CUDA_KERNELS=general: not this path */
    fa_cuda_problem pb = problem(FA_DTYPE_F16, 128, false);
    pb.seq_q = 8;
    fa_cuda_plan_forward(&h200, &pb, &plan);
    cr_expect_eq(plan.launches[0].kernel, FA_CUDA_K_FWD_WGMMA_F16_D128);
    pb.seq_q = 1;
    pb.aligned = false;
    fa_cuda_plan_forward(&h200, &pb, &plan);
    cr_expect_eq(plan.launches[0].kernel, FA_CUDA_K_FWD_GEN_F16_16);
    h200.force_general = true;
    pb.aligned = true;
    fa_cuda_plan_forward(&h200, &pb, &plan);
    cr_expect_eq(plan.launches[0].kernel, FA_CUDA_K_FWD_GEN_F16_16);
    /* f32 and head dims above 128 take it too */
    h200.force_general = false;
    pb = problem(FA_DTYPE_F32, 200, false);
    pb.seq_q = 1;
    fa_cuda_plan_forward(&h200, &pb, &plan);
    cr_expect_eq(plan.launches[0].kernel, FA_CUDA_K_FWD_SPLIT_F32_D256);
}

/* Plans a and b launch the same kernels (but where twins allows a's kernel to be b's twin with a
 * bias) on the same grids with the same chunks and workspace. */
static bool same_plan_(const fa_cuda_plan *a, const fa_cuda_plan *b, bool twins)
{
    if (a->count != b->count || a->splits != b->splits || a->split_keys != b->split_keys ||
        a->workspace_bytes != b->workspace_bytes || a->part_lse_offset != b->part_lse_offset)
        return false;
    for (unsigned i = 0; i < a->count; i++) {
        const fa_cuda_launch *x = &a->launches[i], *y = &b->launches[i];
        if (!(twins ? same_or_twin(x->kernel, y->kernel) : x->kernel == y->kernel) ||
            x->threads != y->threads || x->smem != y->smem ||
            memcmp(x->grid, y->grid, sizeof x->grid) != 0)
            return false;
    }
    return true;
}

static bool same_plan(const fa_cuda_plan *a, const fa_cuda_plan *b)
{
    return same_plan_(a, b, false);
}

static bool same_plan_twins(const fa_cuda_plan *a, const fa_cuda_plan *b)
{
    return same_plan_(a, b, true);
}

/* Per-sequence lengths and a paged cache go to the split-key forward alone: wherever it takes the
 * call without them it takes it with them, with the same plan (the chunks cover the capacity);
 * elsewhere the plan has no launch and fa_cuda_split_takes says why (the host's UNSUPPORTED). */
Test(cuda_plan, seqlens_and_paged_take_the_decoding_path_or_nothing)
{
    const arch archs[] = {{"sm_80", SM80},
                          {"sm_86", SM86},
                          {"sm_90", SM90},
                          {"general", caps_of(9, 0, 232448, true)}};
    const fa_dtype dtypes[] = {FA_DTYPE_F32, FA_DTYPE_F16, FA_DTYPE_BF16};
    const int64_t dims[] = {8, 32, 64, 72, 128, 136, 256};
    /* queries x query heads per KV head: 1, 4, 16 (the most it takes), 32, 4 x 37 */
    const int64_t shapes[][3] = {{1, 8, 8}, {1, 8, 2}, {4, 8, 2}, {8, 8, 2}, {37, 4, 1}};
    const int64_t keys[] = {0, 1, 300, 4096, 70000};
    int taken = 0, refused = 0;
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++)
        for (size_t t = 0; t < 3; t++)
            for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
                for (size_t h = 0; h < sizeof shapes / sizeof shapes[0]; h++)
                    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
                        for (int flags = 1; flags < 8; flags++) {
                            fa_cuda_caps caps = archs[a].caps;
                            caps.sm_count = 132;
                            caps.force_general = a == 3;
                            fa_cuda_problem pb = problem(dtypes[t], dims[d], false);
                            pb.seq_q = shapes[h][0];
                            pb.heads_q = shapes[h][1];
                            pb.heads_kv = shapes[h][2];
                            pb.seq_k = keys[k];
                            pb.aligned = !(flags & 4);
                            char where[160];
                            snprintf(where, sizeof where,
                                     "%s dtype %d D=%lld Sq=%lld Hq=%lld Hkv=%lld Sk=%lld flags %d",
                                     archs[a].name, (int)dtypes[t], (long long)dims[d],
                                     (long long)pb.seq_q, (long long)pb.heads_q,
                                     (long long)pb.heads_kv, (long long)pb.seq_k, flags);
                            fa_cuda_plan plain, plan;
                            fa_cuda_plan_forward(&caps, &pb, &plain);
                            pb.seqlens_k = flags & 1;
                            pb.paged = flags & 2;
                            if (!pb.seqlens_k && !pb.paged)
                                continue;
                            fa_cuda_plan_forward(&caps, &pb, &plan);
                            char why[192] = "";
                            const bool takes = fa_cuda_split_takes(&caps, &pb, why, sizeof why);
                            cr_expect_eq(takes, is_split(family_of(&plain.launches[0])), "%s",
                                         where);
                            if (takes) {
                                check_plan(where, &caps, &pb, &plan, false);
                                cr_expect(same_plan(&plan, &plain), "%s", where);
                                taken++;
                            } else {
                                cr_expect_eq(plan.count, 0, "%s", where);
                                cr_expect(why[0] != '\0', "%s", where);
                                refused++;
                            }
                        }
    cr_expect_gt(taken, 1000);
    cr_expect_gt(refused, 1000);
}

Test(cuda_plan, seqlens_and_paged_choices)
{
    fa_cuda_caps h200 = SM90;
    h200.sm_count = 132;
    /* one query of 32 heads on 8 KV heads, 4 sequences of a 4096-key cache: the split-key
     * forward as without them */
    fa_cuda_problem pb = {.dtype = FA_DTYPE_F16,
                          .batch = 4,
                          .seq_q = 1,
                          .seq_k = 4096,
                          .heads_q = 32,
                          .heads_kv = 8,
                          .head_dim = 128,
                          .aligned = true,
                          .seqlens_k = true};
    fa_cuda_plan plan;
    fa_cuda_plan_forward(&h200, &pb, &plan);
    check_split("seqlens", &pb, &plan);
    cr_expect_eq(plan.launches[0].kernel, FA_CUDA_K_FWD_SPLIT_MMA_F16_D128);
    cr_expect(plan.merge_in_split);
    cr_expect_eq(plan.splits, 4); /* 32 work items: 4 chunks of 1024 keys (128 blocks) */
    pb.paged = true;
    fa_cuda_plan_forward(&h200, &pb, &plan);
    check_split("seqlens, paged", &pb, &plan);
    cr_expect_eq(plan.splits, 4);
    /* asked for one chunk (also the host's plan when the workspace does not fit): still this
     * path, with no merge */
    pb.num_splits = 1;
    fa_cuda_plan_forward(&h200, &pb, &plan);
    check_split("paged, one chunk", &pb, &plan);
    cr_expect_eq(plan.count, 1);
    cr_expect_eq(plan.launches[0].kernel, FA_CUDA_K_FWD_SPLIT_MMA_F16_D128);
    /* f32, head dim 200 */
    pb = (fa_cuda_problem){.dtype = FA_DTYPE_F32,
                           .batch = 2,
                           .seq_q = 1,
                           .seq_k = 300,
                           .heads_q = 4,
                           .heads_kv = 1,
                           .head_dim = 200,
                           .aligned = true,
                           .paged = true};
    fa_cuda_plan_forward(&h200, &pb, &plan);
    cr_expect_eq(plan.launches[0].kernel, FA_CUDA_K_FWD_SPLIT_F32_D256);
    /* 16 packed rows (4 queries x 4 heads) take it; 37 queries x 2 heads do not, nor do
     * unaligned views or FA_CUDA_KERNELS=general: no launch, and the reason */
    pb.seq_q = 4;
    cr_expect(fa_cuda_split_takes(&h200, &pb, NULL, 0));
    char why[192];
    pb.seq_q = 37;
    pb.heads_q = 2;
    cr_expect_not(fa_cuda_split_takes(&h200, &pb, why, sizeof why));
    cr_expect(strstr(why, "74 query rows per KV head") && strstr(why, "at most 16"), "%s", why);
    fa_cuda_plan_forward(&h200, &pb, &plan);
    cr_expect_eq(plan.count, 0);
    pb.seq_q = 1;
    pb.aligned = false;
    cr_expect_not(fa_cuda_split_takes(&h200, &pb, why, sizeof why));
    cr_expect(strstr(why, "16-byte"), "%s", why);
    fa_cuda_plan_forward(&h200, &pb, &plan);
    cr_expect_eq(plan.count, 0);
    pb.aligned = true;
    h200.force_general = true;
    cr_expect_not(fa_cuda_split_takes(&h200, &pb, why, sizeof why));
    cr_expect(strstr(why, "FA_CUDA_KERNELS=general"), "%s", why);
    /* a short buffer gets a cut, terminated sentence */
    char tiny[8];
    cr_expect_not(fa_cuda_split_takes(&h200, &pb, tiny, sizeof tiny));
    cr_expect_eq(strlen(tiny), sizeof tiny - 1);
}

/* The kernels of a backward plan after Delta, as a list to compare. */
static void bwd_kernels(fa_cuda_caps caps, fa_dtype dtype, int64_t d, bool deterministic,
                        fa_cuda_kernel *first, fa_cuda_kernel *second)
{
    fa_cuda_problem pb = problem(dtype, d, deterministic);
    fa_cuda_plan plan;
    fa_cuda_plan_backward(&caps, &pb, &plan);
    cr_assert_eq(plan.count, 3);
    *first = plan.launches[1].kernel;
    *second = plan.launches[2].kernel;
}

Test(cuda_plan, backward_choices)
{
    fa_cuda_kernel a, b;
    /* Hopper: wgmma with atomic dQ up to 128; deterministic: the separate dK/dV and dQ kernels */
    bwd_kernels(SM90, FA_DTYPE_F16, 128, false, &a, &b);
    cr_expect_eq(a, FA_CUDA_K_BWD_WGMMA_F16_D128);
    cr_expect_eq(b, FA_CUDA_K_BWD_DQ_CONVERT_F16);
    bwd_kernels(SM90, FA_DTYPE_BF16, 32, false, &a, &b);
    cr_expect_eq(a, FA_CUDA_K_BWD_WGMMA_BF16_D64);
    bwd_kernels(SM90, FA_DTYPE_F16, 128, true, &a, &b);
    cr_expect_eq(a, FA_CUDA_K_BWD_DKDV_MMA_F16_D128);
    cr_expect_eq(b, FA_CUDA_K_BWD_DQ_MMA_F16_D128);
    /* head dims 129-256: wgmma (sm_90a), else v4 with 64-row query tiles (sm_90), 32-row ones
     * (sm_80), the general kernels where neither fits (sm_86/89) or the call is deterministic */
    bwd_kernels(SM90, FA_DTYPE_F16, 256, false, &a, &b);
    cr_expect_eq(a, FA_CUDA_K_BWD_WGMMA_F16_D256);
    cr_expect_eq(b, FA_CUDA_K_BWD_DQ_CONVERT_F16);
    bwd_kernels(SM90, FA_DTYPE_BF16, 136, false, &a, &b);
    cr_expect_eq(a, FA_CUDA_K_BWD_WGMMA_BF16_D256);
    fa_cuda_caps v4_only = SM90;
    v4_only.wgmma_bwd = false;
    bwd_kernels(v4_only, FA_DTYPE_F16, 256, false, &a, &b);
    cr_expect_eq(a, FA_CUDA_K_BWD_V4_F16_D256);
    bwd_kernels(SM80, FA_DTYPE_BF16, 160, false, &a, &b);
    cr_expect_eq(a, FA_CUDA_K_BWD_V4_Q32_BF16_D256);
    bwd_kernels(SM89, FA_DTYPE_F16, 256, false, &a, &b);
    cr_expect_eq(a, FA_CUDA_K_BWD_DKDV_GEN_F16_32);
    cr_expect_eq(b, FA_CUDA_K_BWD_DQ_GEN_F16_32);
    bwd_kernels(SM90, FA_DTYPE_F16, 256, true, &a, &b);
    cr_expect_eq(a, FA_CUDA_K_BWD_DKDV_GEN_F16_32);
    /* sm_80: v4, with 128-row query tiles at head dim 64 (FA_CUDA_BWD4_QTILE_D64=64: 64) */
    bwd_kernels(SM80, FA_DTYPE_F16, 64, false, &a, &b);
    cr_expect_eq(a, FA_CUDA_K_BWD_V4_Q128_F16_D64);
    fa_cuda_caps q64 = SM80;
    q64.bwd4_q128_d64 = false;
    bwd_kernels(q64, FA_DTYPE_F16, 64, false, &a, &b);
    cr_expect_eq(a, FA_CUDA_K_BWD_V4_F16_D64);
    bwd_kernels(SM80, FA_DTYPE_F16, 128, false, &a, &b);
    cr_expect_eq(a, FA_CUDA_K_BWD_V4_F16_D128);
    bwd_kernels(SM80, FA_DTYPE_BF16, 96, false, &a, &b);
    cr_expect_eq(a, FA_CUDA_K_BWD_V4_BF16_D96);
    /* sm_86/89 (99 KiB): v4 at head dim 64 with 64-row tiles; at 128 neither v4 nor the
     * separate dQ kernel fits, so the general kernels serve it */
    bwd_kernels(SM86, FA_DTYPE_F16, 64, false, &a, &b);
    cr_expect_eq(a, FA_CUDA_K_BWD_V4_F16_D64);
    bwd_kernels(SM86, FA_DTYPE_F16, 64, true, &a, &b);
    cr_expect_eq(a, FA_CUDA_K_BWD_DKDV_MMA_F16_D64);
    bwd_kernels(SM89, FA_DTYPE_BF16, 128, false, &a, &b);
    cr_expect_eq(a, FA_CUDA_K_BWD_DKDV_GEN_BF16_16);
    cr_expect_eq(b, FA_CUDA_K_BWD_DQ_GEN_BF16_16);
    /* f32: the general kernels */
    bwd_kernels(SM90, FA_DTYPE_F32, 64, false, &a, &b);
    cr_expect_eq(a, FA_CUDA_K_BWD_DKDV_GEN_F32_8);
}

/* The kernel a call with a sliding window and/or a softcap gets: the forward's, or the
 * backward's first after Delta (second: the one after it). */
static fa_cuda_kernel variant_kernel(fa_cuda_caps caps, fa_dtype dtype, int64_t d, bool backward,
                                     bool deterministic, bool window, bool softcap,
                                     fa_cuda_kernel *second)
{
    fa_cuda_problem pb = problem(dtype, d, deterministic);
    pb.window = window;
    pb.softcap = softcap;
    fa_cuda_plan plan;
    if (backward)
        fa_cuda_plan_backward(&caps, &pb, &plan);
    else
        fa_cuda_plan_forward(&caps, &pb, &plan);
    check_plan("variant", &caps, &pb, &plan, backward);
    if (second)
        *second = plan.launches[backward ? 2 : 0].kernel;
    return plan.launches[backward ? 1 : 0].kernel;
}

/* A sliding window or a softcap: the plan of the same call without them (every kernel but the
 * split-key forward takes both), with or without the sm_90a (wgmma) kernels. */
Test(cuda_plan, window_and_softcap_choices)
{
    const fa_cuda_caps archs[] = {SM80, SM86, SM89, SM90};
    const fa_dtype dtypes[] = {FA_DTYPE_F32, FA_DTYPE_F16, FA_DTYPE_BF16};
    const int64_t dims[] = {8, 32, 40, 64, 96, 128, 200, 256};
    int plans = 0;
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++)
        for (size_t t = 0; t < 3; t++)
            for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
                for (int flags = 0; flags < 8; flags++)
                    for (int v = 1; v < 4; v++) {
                        fa_cuda_caps caps = archs[a];
                        caps.wgmma_fwd = caps.wgmma_bwd = !(flags & 4) && archs[a].wgmma_fwd;
                        fa_cuda_problem pb = problem(dtypes[t], dims[d], flags & 1);
                        pb.aligned = !(flags & 2);
                        fa_cuda_plan plain, plan;
                        char where[128];
                        snprintf(where, sizeof where, "arch %zu dtype %d D=%lld flags %d v %d", a,
                                 (int)dtypes[t], (long long)dims[d], flags, v);
                        fa_cuda_plan_forward(&caps, &pb, &plain);
                        pb.window = v & 1;
                        pb.softcap = v & 2;
                        fa_cuda_plan_forward(&caps, &pb, &plan);
                        check_plan(where, &caps, &pb, &plan, false);
                        /* but a window as narrow as this one's (bounds 0: one key a row)
                         * moves bf16 at head dim 64 to 64-key tiles */
                        if (pb.window &&
                            plain.launches[0].kernel == FA_CUDA_K_FWD_WGMMA_K128_BF16_D64)
                            plain.launches[0].kernel = FA_CUDA_K_FWD_WGMMA_BF16_D64;
                        cr_expect(same_plan(&plan, &plain), "forward %s", where);
                        pb.window = pb.softcap = false;
                        fa_cuda_plan_backward(&caps, &pb, &plain);
                        pb.window = v & 1;
                        pb.softcap = v & 2;
                        fa_cuda_plan_backward(&caps, &pb, &plan);
                        check_plan(where, &caps, &pb, &plan, true);
                        cr_expect(same_plan(&plan, &plain) &&
                                      plan.accum_offset == plain.accum_offset &&
                                      plan.atomic_dq == plain.atomic_dq,
                                  "backward %s", where);
                        plans += 2;
                    }
    cr_expect_gt(plans, 1000);
    fa_cuda_kernel second;
    /* Hopper: the wgmma forward and backward (atomic dQ), the deterministic mma.sync kernels;
     * without the sm_90a image the mma.sync forward and v4 */
    cr_expect_eq(variant_kernel(SM90, FA_DTYPE_F16, 128, false, false, true, false, NULL),
                 FA_CUDA_K_FWD_WGMMA_F16_D128);
    cr_expect_eq(variant_kernel(SM90, FA_DTYPE_BF16, 64, false, false, false, true, NULL),
                 FA_CUDA_K_FWD_WGMMA_K128_BF16_D64);
    cr_expect_eq(variant_kernel(SM90, FA_DTYPE_BF16, 64, false, false, true, true, NULL),
                 FA_CUDA_K_FWD_WGMMA_BF16_D64);
    cr_expect_eq(variant_kernel(SM90, FA_DTYPE_F16, 128, true, false, true, true, &second),
                 FA_CUDA_K_BWD_WGMMA_F16_D128);
    cr_expect_eq(second, FA_CUDA_K_BWD_DQ_CONVERT_F16);
    fa_cuda_caps no_wgmma = SM90;
    no_wgmma.wgmma_fwd = no_wgmma.wgmma_bwd = false;
    cr_expect_eq(variant_kernel(no_wgmma, FA_DTYPE_F16, 128, false, false, true, true, NULL),
                 FA_CUDA_K_FWD_MMA_F16_D128);
    cr_expect_eq(variant_kernel(no_wgmma, FA_DTYPE_F16, 128, true, false, true, true, NULL),
                 FA_CUDA_K_BWD_V4_F16_D128);
    cr_expect_eq(variant_kernel(SM90, FA_DTYPE_BF16, 64, true, true, true, false, &second),
                 FA_CUDA_K_BWD_DKDV_MMA_BF16_D64);
    cr_expect_eq(second, FA_CUDA_K_BWD_DQ_MMA_BF16_D64);
    cr_expect_eq(variant_kernel(SM90, FA_DTYPE_F16, 256, true, false, true, false, NULL),
                 FA_CUDA_K_BWD_WGMMA_F16_D256);
    cr_expect_eq(variant_kernel(no_wgmma, FA_DTYPE_F16, 256, true, false, true, false, NULL),
                 FA_CUDA_K_BWD_V4_F16_D256);
    /* sm_80: head dim 256's 128-row forward; sm_86: the general backward at 128 */
    cr_expect_eq(variant_kernel(SM80, FA_DTYPE_F16, 256, false, false, false, true, NULL),
                 FA_CUDA_K_FWD_MMA_Q128_F16_D256);
    cr_expect_eq(variant_kernel(SM86, FA_DTYPE_F16, 128, true, false, true, false, &second),
                 FA_CUDA_K_BWD_DKDV_GEN_F16_16);
    cr_expect_eq(second, FA_CUDA_K_BWD_DQ_GEN_F16_16);
    /* f32: the 3xTF32 forward (window and softcap in it), the general backward */
    cr_expect_eq(variant_kernel(SM90, FA_DTYPE_F32, 128, false, false, true, true, NULL),
                 FA_CUDA_K_FWD_TF32_F32_D128);
    cr_expect_eq(variant_kernel(SM90, FA_DTYPE_F32, 64, true, false, true, true, NULL),
                 FA_CUDA_K_BWD_DKDV_GEN_F32_8);
}

/* ALiBi, alone or with a window and a softcap: the plan of the same call without it (every kernel
 * but the CUDA-core split-key forward takes it), with or without the sm_90a (wgmma) kernels. */
Test(cuda_plan, alibi_choices)
{
    const fa_cuda_caps archs[] = {SM80, SM86, SM89, SM90};
    const fa_dtype dtypes[] = {FA_DTYPE_F32, FA_DTYPE_F16, FA_DTYPE_BF16};
    const int64_t dims[] = {8, 32, 40, 64, 96, 128, 200, 256};
    int plans = 0;
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++)
        for (size_t t = 0; t < 3; t++)
            for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
                for (int flags = 0; flags < 32; flags++) {
                    fa_cuda_caps caps = archs[a];
                    caps.wgmma_fwd = caps.wgmma_bwd = !(flags & 16) && archs[a].wgmma_fwd;
                    const fa_cuda_caps expected = caps;
                    fa_cuda_problem pb = problem(dtypes[t], dims[d], flags & 1);
                    pb.aligned = !(flags & 2);
                    pb.window = flags & 4;
                    pb.softcap = flags & 8;
                    fa_cuda_plan plain, plan;
                    char where[128];
                    snprintf(where, sizeof where, "arch %zu dtype %d D=%lld flags %d", a,
                             (int)dtypes[t], (long long)dims[d], flags);
                    fa_cuda_plan_forward(&expected, &pb, &plain);
                    pb.alibi = true;
                    fa_cuda_plan_forward(&caps, &pb, &plan);
                    check_plan(where, &caps, &pb, &plan, false);
                    cr_expect(same_plan(&plan, &plain), "forward %s", where);
                    pb.alibi = false;
                    fa_cuda_plan_backward(&expected, &pb, &plain);
                    pb.alibi = true;
                    fa_cuda_plan_backward(&caps, &pb, &plan);
                    check_plan(where, &caps, &pb, &plan, true);
                    cr_expect(same_plan(&plan, &plain) && plan.accum_offset == plain.accum_offset &&
                                  plan.atomic_dq == plain.atomic_dq,
                              "backward %s", where);
                    plans += 2;
                }
    cr_expect_gt(plans, 1000);
    fa_cuda_plan plan;
    fa_cuda_problem pb = problem(FA_DTYPE_F16, 128, false);
    pb.alibi = true;
    const fa_cuda_caps sm90 = SM90;
    fa_cuda_plan_forward(&sm90, &pb, &plan);
    cr_expect_eq(plan.launches[0].kernel, FA_CUDA_K_FWD_WGMMA_F16_D128);
    fa_cuda_plan_backward(&sm90, &pb, &plan);
    cr_expect_eq(plan.launches[1].kernel, FA_CUDA_K_BWD_WGMMA_F16_D128);
    pb.deterministic = true;
    fa_cuda_plan_backward(&sm90, &pb, &plan);
    cr_expect_eq(plan.launches[1].kernel, FA_CUDA_K_BWD_DKDV_MMA_F16_D128);
    cr_expect_eq(plan.launches[2].kernel, FA_CUDA_K_BWD_DQ_MMA_F16_D128);
    const fa_cuda_caps sm80 = SM80;
    pb = problem(FA_DTYPE_BF16, 64, false);
    pb.alibi = true;
    fa_cuda_plan_forward(&sm80, &pb, &plan);
    cr_expect_eq(plan.launches[0].kernel, FA_CUDA_K_FWD_MMA_BF16_D64);
    fa_cuda_plan_backward(&sm80, &pb, &plan);
    cr_expect_eq(plan.launches[1].kernel, FA_CUDA_K_BWD_V4_Q128_BF16_D64);
}

/* Decoding shapes with a window, a softcap or ALiBi (each alone and together): f16/bf16 take the
 * tensor-core split-key forward (with or without seqlens_k and a paged cache), with the plan of
 * the same call without them; the CUDA-core one (f32, FA_CUDA_DECODE=cores) takes none of them,
 * so there the ordinary forward serves them, and with seqlens_k or a paged cache the plan has no
 * launch and fa_cuda_split_takes names the three (the host's UNSUPPORTED). */
Test(cuda_plan, variants_decoding)
{
    fa_cuda_caps h200 = SM90;
    h200.sm_count = 132;
    for (int cores = 0; cores < 3; cores++)
        for (int v = 1; v < 8; v++)
            for (int index = 0; index < 3; index++) {
                fa_cuda_caps caps = h200;
                caps.decode_cores = cores == 1;
                fa_cuda_problem pb = {.dtype = cores == 2 ? FA_DTYPE_F32 : FA_DTYPE_F16,
                                      .batch = 4,
                                      .seq_q = 1,
                                      .seq_k = 4096,
                                      .heads_q = 32,
                                      .heads_kv = 8,
                                      .head_dim = 128,
                                      .aligned = true,
                                      .seqlens_k = index == 1,
                                      .paged = index == 2,
                                      .window = v & 1,
                                      .softcap = v & 2,
                                      .alibi = v & 4};
                char why[192] = "";
                const bool takes = fa_cuda_split_takes(&caps, &pb, why, sizeof why);
                fa_cuda_plan plan, plain;
                fa_cuda_plan_forward(&caps, &pb, &plan);
                if (cores == 0) {
                    cr_expect(takes);
                    check_plan("decoding, variants", &caps, &pb, &plan, false);
                    cr_expect_eq(family_of(&plan.launches[0]), FA_CUDA_FWD_SPLIT_MMA);
                    pb.window = pb.softcap = pb.alibi = false;
                    fa_cuda_plan_forward(&caps, &pb, &plain);
                    cr_expect(same_plan(&plan, &plain));
                    continue;
                }
                cr_expect_not(takes);
                cr_expect(strstr(why, "sliding window") && strstr(why, "softcap") &&
                              strstr(why, "ALiBi"),
                          "%s", why);
                if (index == 0) {
                    check_plan("decoding shape, variants", &caps, &pb, &plan, false);
                    cr_expect_not(is_split(family_of(&plan.launches[0])));
                } else {
                    cr_expect_eq(plan.count, 0);
                }
            }
}

/* A packed batch (varlen): one launch of a *_VARLEN kernel, a grid row per sequence covering
 * the longest, the same tiling as the ordinary forward of that length; never the decoding path;
 * nothing (the runtime then runs it sequence by sequence) where no such kernel exists. */
Test(cuda_plan, varlen_choices)
{
    const fa_cuda_caps archs[] = {SM80, SM86, SM89, SM90};
    const fa_dtype dtypes[] = {FA_DTYPE_F32, FA_DTYPE_F16, FA_DTYPE_BF16};
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++)
        for (size_t t = 0; t < 3; t++)
            for (int64_t d = 8; d <= 256; d += 8)
                for (int64_t sq = 1; sq <= 1000; sq += 999) {
                    fa_cuda_problem pb = problem(dtypes[t], d, false);
                    pb.seq_q = sq;
                    pb.batch = 7;
                    fa_cuda_plan plain, packed;
                    pb.seq_q = 1000; /* the ordinary forward's kernel for this length */
                    fa_cuda_plan_forward(&archs[a], &pb, &plain);
                    pb.seq_q = sq;
                    pb.varlen = true;
                    fa_cuda_plan_forward(&archs[a], &pb, &packed);
                    if (packed.count == 0) {
                        cr_expect(
                            dtypes[t] == FA_DTYPE_F32 || d <= 32 || d > 128 ||
                                (archs[a].cc_major < 9 &&
                                 ((d > 64 && d <= 96) || (dtypes[t] == FA_DTYPE_BF16 && d > 96))),
                            "cc %d.%d dtype %d d %lld: no packed plan", archs[a].cc_major,
                            archs[a].cc_minor, (int)dtypes[t], (long long)d);
                        continue;
                    }
                    cr_assert_eq(packed.count, 1);
                    const fa_cuda_launch *l = &packed.launches[0];
                    const fa_cuda_kernel_info *k = &fa_cuda_kernels[l->kernel];
                    const fa_cuda_kernel_info *o = &fa_cuda_kernels[plain.launches[0].kernel];
                    cr_expect(k->family == FA_CUDA_FWD_MMA_VARLEN ||
                              k->family == FA_CUDA_FWD_WGMMA_VARLEN);
                    cr_expect_eq(k->family == FA_CUDA_FWD_WGMMA_VARLEN,
                                 o->family == FA_CUDA_FWD_WGMMA);
                    cr_expect_eq(k->dtype, dtypes[t]);
                    cr_expect_eq(k->d, o->d);
                    cr_expect_eq(packed.splits, 0);
                    cr_expect_eq(l->grid[1], 8u);
                    cr_expect_eq(l->grid[2], 7u);
                    int64_t rows, length;
                    coverage(l, &pb, &rows, &length);
                    cr_expect_geq((int64_t)l->grid[0] * rows, sq);
                }
}

/* The backward of a packed batch: Delta, a *_VARLEN atomic kernel, the dQ conversion, each
 * with a grid row per sequence covering the longest; nothing where the call is deterministic or
 * the head dim takes no such kernel. */
Test(cuda_plan, varlen_backward_choices)
{
    const fa_cuda_caps archs[] = {SM80, SM86, SM89, SM90};
    const fa_dtype dtypes[] = {FA_DTYPE_F32, FA_DTYPE_F16, FA_DTYPE_BF16};
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++)
        for (size_t t = 0; t < 3; t++)
            for (int64_t d = 8; d <= 256; d += 8)
                for (int det = 0; det < 2; det++) {
                    fa_cuda_problem pb = problem(dtypes[t], d, det);
                    pb.batch = 7;
                    pb.varlen = true;
                    fa_cuda_plan plan;
                    fa_cuda_plan_backward(&archs[a], &pb, &plan);
                    if (det || dtypes[t] == FA_DTYPE_F32 || d > 128)
                        cr_expect_eq(plan.count, 0u, "d %lld", (long long)d);
                    if (plan.count == 0)
                        continue;
                    cr_assert_eq(plan.count, 3u);
                    cr_expect(plan.atomic_dq);
                    cr_expect_eq(family_of(&plan.launches[0]), FA_CUDA_BWD_DELTA);
                    const fa_cuda_family f = family_of(&plan.launches[1]);
                    cr_expect(f == FA_CUDA_BWD_V4_VARLEN || f == FA_CUDA_BWD_WGMMA_VARLEN);
                    cr_expect_eq(f == FA_CUDA_BWD_WGMMA_VARLEN, archs[a].cc_major == 9);
                    cr_expect_eq(family_of(&plan.launches[2]), FA_CUDA_BWD_DQ_CONVERT);
                    /* FA_BWD_WGMMA_VARLEN_BULK: the tiled accumulator, the sequences (each as
                     * long as the longest here) a 64-row tile apart */
                    const int kd = fa_cuda_kernels[plan.launches[1].kernel].d;
                    const bool tiled = FA_BWD_WGMMA_VARLEN_BULK && archs[a].bwd_dq_bulk &&
                                       f == FA_CUDA_BWD_WGMMA_VARLEN;
                    cr_expect_eq(plan.dq_tiled, tiled ? kd : 0, "d %lld", (long long)d);
                    const size_t hq = (size_t)pb.heads_q,
                                 all = (size_t)(7 * pb.seq_q + 63) / 64 * 64 + 64 * 7;
                    if (tiled)
                        cr_expect_eq(plan.accum_elems, hq * all * (size_t)kd, "d %lld",
                                     (long long)d);
                    for (unsigned i = 0; i < plan.count; i++) {
                        const fa_cuda_launch *l = &plan.launches[i];
                        int64_t rows, length;
                        coverage(l, &pb, &rows, &length);
                        cr_expect_geq((int64_t)l->grid[0] * rows, length);
                        cr_expect_eq(l->grid[2], 7u);
                    }
                }
    fa_cuda_problem pb = problem(FA_DTYPE_F16, 128, false);
    pb.varlen = true;
    fa_cuda_plan plan;
    fa_cuda_plan_backward(&archs[3], &pb, &plan); /* sm_90: wgmma */
    cr_expect_eq(plan.count, 3u);
    fa_cuda_plan_backward(&archs[0], &pb, &plan); /* sm_80: nor v4 at 128 */
    cr_expect_eq(plan.count, 0u);
    pb.head_dim = 64;
    fa_cuda_plan_backward(&archs[3], &pb, &plan); /* sm_90: wgmma at 64 */
    cr_expect_eq(plan.count, 3u);
    fa_cuda_plan_backward(&archs[1], &pb, &plan); /* sm_86: v4, 64-row query tiles */
    cr_expect_eq(plan.count, 3u);
}

/* An additive bias never takes the split-key forward (neither of its kernels reads one): a
 * decoding shape takes the kernel an ordinary call of its dtype and head dim takes, every other
 * forward the plan of the same call without the bias; with seqlens_k or a paged cache the plan
 * has no launch and fa_cuda_split_takes names the bias (the host's UNSUPPORTED). The backward
 * is the plan without the bias, but for the wgmma kernel at head dim 128, which reads no bias:
 * there, the plan without the sm_90a kernels (v4). With a softcap too, the mma.sync kernels
 * give way to the general ones. */
Test(cuda_plan, bias_never_takes_the_split_kernels)
{
    arch archs[EVERY_ARCH];
    every_arch(archs);
    const fa_dtype dtypes[] = {FA_DTYPE_F32, FA_DTYPE_F16, FA_DTYPE_BF16};
    const int64_t dims[] = {8, 32, 64, 96, 128, 200, 256};
    /* queries, query heads, KV heads, keys: decoding shapes (the split-key forward's without a
     * bias), then ordinary ones */
    const int64_t shapes[][4] = {
        {1, 32, 8, 32768}, {4, 4, 1, 4096}, {1, 8, 8, 300}, {1000, 8, 2, 1500}, {64, 32, 8, 4096}};
    int decoding = 0, refused = 0, hopper_bias_v4 = 0;
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++)
        for (size_t t = 0; t < 3; t++)
            for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
                for (size_t h = 0; h < sizeof shapes / sizeof shapes[0]; h++)
                    for (int flags = 0; flags < 32; flags++) {
                        fa_cuda_caps caps = archs[a].caps;
                        caps.sm_count = 132;
                        caps.decode_cores = flags & 16;
                        fa_cuda_problem pb = problem(dtypes[t], dims[d], flags & 1);
                        pb.seq_q = shapes[h][0];
                        pb.heads_q = shapes[h][1];
                        pb.heads_kv = shapes[h][2];
                        pb.seq_k = shapes[h][3];
                        pb.aligned = !(flags & 2);
                        pb.window = pb.softcap = flags & 4;
                        pb.alibi = flags & 8;
                        char where[160];
                        snprintf(where, sizeof where, "%s dtype %d D=%lld shape %zu flags %d",
                                 archs[a].name, (int)dtypes[t], (long long)dims[d], h, flags);
                        fa_cuda_plan plain, plan, ordinary;
                        fa_cuda_plan_forward(&caps, &pb, &plain);
                        fa_cuda_problem wide = pb;
                        wide.seq_q = 64; /* 64 x Hq / Hkv rows: never the split-key forward */
                        fa_cuda_plan_forward(&caps, &wide, &ordinary);
                        pb.bias = true;
                        fa_cuda_plan_forward(&caps, &pb, &plan);
                        check_plan(where, &caps, &pb, &plan, false);
                        cr_expect_eq(plan.count, 1, "%s", where);
                        /* with a softcap the mma.sync kernels, in f32 the 3xTF32 one, leave
                         * a bias to the CUDA-core kernel */
                        const fa_cuda_family of = family_of(&ordinary.launches[0]);
                        const bool general =
                            (pb.softcap && is_mma_sync(of)) || of == FA_CUDA_FWD_TF32;
                        if (general)
                            cr_expect_eq(family_of(&plan.launches[0]), FA_CUDA_FWD_GEN, "%s",
                                         where);
                        else
                            cr_expect(
                                same_or_twin(plan.launches[0].kernel, ordinary.launches[0].kernel),
                                "%s", where);
                        if (is_split(family_of(&plain.launches[0])))
                            decoding++;
                        else if (!general)
                            cr_expect(same_plan_twins(&plan, &plain), "forward %s", where);
                        pb.bias = false;
                        fa_cuda_plan_backward(&caps, &pb, &plain);
                        const fa_cuda_kernel_info *k = &fa_cuda_kernels[plain.launches[1].kernel];
                        if (k->family == FA_CUDA_BWD_WGMMA && k->d >= 128) {
                            fa_cuda_caps no_sm90a = caps;
                            no_sm90a.wgmma_bwd = false;
                            fa_cuda_plan_backward(&no_sm90a, &pb, &plain);
                            cr_expect_eq(family_of(&plain.launches[1]), FA_CUDA_BWD_V4, "%s",
                                         where);
                            hopper_bias_v4++;
                        }
                        pb.bias = true;
                        fa_cuda_plan_backward(&caps, &pb, &plan);
                        check_plan(where, &caps, &pb, &plan, true);
                        if (pb.softcap && is_mma_sync(family_of(&plain.launches[1]))) {
                            cr_expect_eq(family_of(&plan.launches[1]), FA_CUDA_BWD_DKDV_GEN, "%s",
                                         where);
                            cr_expect_not(plan.atomic_dq, "%s", where);
                        } else {
                            cr_expect(same_plan_twins(&plan, &plain) &&
                                          plan.accum_offset == plain.accum_offset &&
                                          plan.atomic_dq == plain.atomic_dq,
                                      "backward %s", where);
                        }
                        for (int index = 1; index < 4; index++) {
                            pb.seqlens_k = index & 1;
                            pb.paged = index & 2;
                            char why[192] = "";
                            cr_expect_not(fa_cuda_split_takes(&caps, &pb, why, sizeof why), "%s",
                                          where);
                            cr_expect(strstr(why, "bias"), "%s: %s", where, why);
                            fa_cuda_plan_forward(&caps, &pb, &plan);
                            cr_expect_eq(plan.count, 0, "%s", where);
                            refused++;
                        }
                    }
    cr_expect_gt(decoding, 100);
    cr_expect_gt(refused, 1000);
    cr_expect_gt(hopper_bias_v4, 10);
    /* the wgmma backward serves a bias at head dims up to 64 */
    fa_cuda_problem pb = problem(FA_DTYPE_BF16, 64, false);
    pb.bias = true;
    const fa_cuda_caps sm90 = SM90;
    fa_cuda_plan plan;
    fa_cuda_plan_backward(&sm90, &pb, &plan);
    cr_expect_eq(plan.launches[1].kernel, FA_CUDA_K_BWD_WGMMA_BF16_D64);
    pb.head_dim = 128;
    fa_cuda_plan_backward(&sm90, &pb, &plan);
    cr_expect_eq(plan.launches[1].kernel, FA_CUDA_K_BWD_V4_BIAS_BF16_D128);
    fa_cuda_plan_forward(&sm90, &pb, &plan);
    cr_expect_eq(plan.launches[0].kernel, FA_CUDA_K_FWD_WGMMA_BF16_D128);
    /* with a softcap: the wgmma kernels where they take the bias, else the general ones */
    pb.softcap = true;
    fa_cuda_plan_forward(&sm90, &pb, &plan);
    cr_expect_eq(plan.launches[0].kernel, FA_CUDA_K_FWD_WGMMA_BF16_D128);
    fa_cuda_plan_backward(&sm90, &pb, &plan);
    cr_expect_eq(plan.launches[1].kernel, FA_CUDA_K_BWD_DKDV_GEN_BF16_16);
    pb.head_dim = 64;
    fa_cuda_plan_backward(&sm90, &pb, &plan);
    cr_expect_eq(plan.launches[1].kernel, FA_CUDA_K_BWD_WGMMA_BF16_D64);
    const fa_cuda_caps sm80 = SM80;
    fa_cuda_plan_forward(&sm80, &pb, &plan);
    cr_expect_eq(plan.launches[0].kernel, FA_CUDA_K_FWD_GEN_BF16_8);
}

Test(cuda_plan, empty_problems_need_no_workspace)
{
    fa_cuda_caps sm90 = SM90;
    fa_cuda_problem pb = problem(FA_DTYPE_F16, 128, false);
    pb.seq_q = 0;
    fa_cuda_plan plan;
    fa_cuda_plan_backward(&sm90, &pb, &plan);
    cr_expect_eq(plan.workspace_bytes, 0);
    cr_expect_eq(plan.launches[0].grid[0], 0); /* the executor skips empty grids */
}

Test(cuda_plan, catalogue_rows_are_consistent)
{
    for (int i = 0; i < FA_CUDA_K_COUNT; i++) {
        const fa_cuda_kernel_info *k = &fa_cuda_kernels[i];
        cr_expect(k->name && strncmp(k->name, "fa_", 3) == 0, "row %d", i);
        cr_expect(k->d >= 32 && k->d <= 256, "%s", k->name);
        for (int j = 0; j < i; j++)
            cr_expect(strcmp(k->name, fa_cuda_kernels[j].name) != 0, "%s twice", k->name);
        const bool wgmma = k->family == FA_CUDA_FWD_WGMMA || k->family == FA_CUDA_BWD_WGMMA ||
                           k->family == FA_CUDA_FWD_WGMMA_VARLEN ||
                           k->family == FA_CUDA_FWD_WGMMA_SOFTCAP ||
                           k->family == FA_CUDA_BWD_WGMMA_VARLEN;
        cr_expect_eq(wgmma, i >= FA_CUDA_K_SM90_FIRST, "%s", k->name);
    }
}

/* Marks in chosen[] every kernel that plan launches. */
static void mark_chosen(const fa_cuda_plan *plan, bool *chosen)
{
    for (unsigned i = 0; i < plan->count; i++)
        chosen[plan->launches[i].kernel] = true;
}

/* Each kernel of the catalogue serves some call on some architecture with the default knobs: a
 * kernel no plan chooses is dead weight in the fatbin and the build (retire it, or say here
 * which knob keeps it). */
Test(cuda_plan, every_catalogue_kernel_is_chosen_somewhere)
{
    /* (sm_90 without the sm_90a image: v4's 64-row tiles at head dim 256, as FA_CUDA_WGMMA=fwd) */
    const fa_cuda_caps archs[] = {SM80, SM86, SM89, SM90, caps_of(9, 0, 232448, false)};
    const fa_dtype dtypes[] = {FA_DTYPE_F32, FA_DTYPE_F16, FA_DTYPE_BF16};
    bool chosen[FA_CUDA_K_COUNT] = {false};
    /* FP8 has a forward alone */
    fa_cuda_plan fp8;
    fa_cuda_problem fp8_pb = problem(FA_DTYPE_E4M3, 128, false);
    const fa_cuda_caps sm90 = SM90;
    fa_cuda_plan_forward(&sm90, &fp8_pb, &fp8);
    mark_chosen(&fp8, chosen);
    fp8_pb.softcap = fp8_pb.softcap_fold = true;
    fa_cuda_plan_forward(&sm90, &fp8_pb, &fp8);
    mark_chosen(&fp8, chosen);
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++)
        for (size_t t = 0; t < 3; t++)
            for (int64_t d = 8; d <= 256; d += 8)
                for (int flags = 0; flags < 8; flags++) {
                    fa_cuda_problem pb = problem(dtypes[t], d, flags & 1);
                    pb.aligned = !(flags & 2);
                    pb.bias = flags & 4; /* the mma.sync kernels' twins */
                    fa_cuda_plan plan;
                    /* head dim 64 by tensor maps (FA_FWD_WGMMA_TMA's default) */
                    fa_cuda_caps tma = archs[a];
                    tma.fwd_tma = tma.fwd_tma_d64 = true;
                    fa_cuda_plan_forward(&archs[a], &pb, &plan);
                    mark_chosen(&plan, chosen);
                    fa_cuda_plan_forward(&tma, &pb, &plan);
                    mark_chosen(&plan, chosen);
                    pb.seq_q = pb.seq_k = 512; /* bf16 at 64: 64-key tiles for short rows */
                    fa_cuda_plan_forward(&archs[a], &pb, &plan);
                    mark_chosen(&plan, chosen);
                    fa_cuda_plan_forward(&tma, &pb, &plan);
                    mark_chosen(&plan, chosen);
                    pb.seq_q = 1000, pb.seq_k = 1500;
                    pb.softcap = pb.softcap_fold = true; /* the folded softcap's kernels */
                    fa_cuda_plan_forward(&archs[a], &pb, &plan);
                    mark_chosen(&plan, chosen);
                    pb.softcap = pb.softcap_fold = false;
                    fa_cuda_plan_backward(&archs[a], &pb, &plan);
                    mark_chosen(&plan, chosen);
                    pb.varlen = true; /* a packed batch */
                    fa_cuda_plan_forward(&archs[a], &pb, &plan);
                    mark_chosen(&plan, chosen);
                    fa_cuda_plan_backward(&archs[a], &pb, &plan);
                    mark_chosen(&plan, chosen);
                    pb.varlen = false;
                    pb.seq_q = 1; /* decoding, in 4 chunks */
                    pb.num_splits = 4;
                    fa_cuda_plan_forward(&archs[a], &pb, &plan);
                    mark_chosen(&plan, chosen);
                    /* ... over more groups than the split kernel counts chunks for: the merge
                     * kernel */
                    const int64_t batch = pb.batch;
                    pb.batch = FA_DEC_DONE_SLOTS + 1;
                    fa_cuda_plan_forward(&archs[a], &pb, &plan);
                    mark_chosen(&plan, chosen);
                    pb.batch = batch;
                    /* FA_CUDA_F32=cores keeps the CUDA-core f32 forward */
                    fa_cuda_caps cores_f32 = archs[a];
                    cores_f32.f32_cores = true;
                    pb.seq_q = 1000;
                    pb.num_splits = 0;
                    fa_cuda_plan_forward(&cores_f32, &pb, &plan);
                    mark_chosen(&plan, chosen);
                    pb.seq_q = 1;
                    pb.num_splits = 4;
                    /* FA_CUDA_DECODE=cores keeps the CUDA-core split kernels of f16 and bf16 */
                    fa_cuda_caps cores = archs[a];
                    cores.decode_cores = true;
                    fa_cuda_plan_forward(&cores, &pb, &plan);
                    mark_chosen(&plan, chosen);
                }
    for (int k = 0; k < FA_CUDA_K_COUNT; k++)
        cr_expect(chosen[k], "%s is never chosen", fa_cuda_kernels[k].name);
}

/* FP8 (e4m3) forwards take the wgmma forward's E4M3 row alone: on sm_90a, at head dims that are
 * multiples of 16 up to 128, with aligned rows and neither seqlens_k nor a paged cache; every
 * other such call gets no launch, and fa_cuda_fp8_takes says why. */
Test(cuda_plan, fp8_takes_the_wgmma_e4m3_kernel_or_nothing)
{
    arch archs[EVERY_ARCH];
    every_arch(archs);
    int served = 0;
    for (size_t a = 0; a < EVERY_ARCH; a++)
        for (int64_t d = 8; d <= 256; d += 8)
            for (int flags = 0; flags < 64; flags++) {
                fa_cuda_problem pb = problem(FA_DTYPE_E4M3, d, false);
                pb.aligned = !(flags & 1);
                pb.causal = flags & 2;
                pb.seqlens_k = flags & 4;
                pb.paged = flags & 8;
                pb.varlen = flags & 16;
                pb.seq_q = flags & 32 ? 1 : 1000; /* a decoding shape takes it too */
                char where[128], why[192] = "";
                snprintf(where, sizeof where, "%s D=%lld flags %d", archs[a].name, (long long)d,
                         flags);
                const bool takes = fa_cuda_fp8_takes(&archs[a].caps, &pb, why, sizeof why);
                const bool expect = archs[a].caps.wgmma_fwd && d % 16 == 0 && d <= 128 &&
                                    pb.aligned && !pb.seqlens_k && !pb.paged;
                cr_expect_eq(takes, expect, "%s: %s", where, why);
                cr_expect(takes || strlen(why) > 20, "%s: no reason given", where);
                fa_cuda_plan plan;
                fa_cuda_plan_forward(&archs[a].caps, &pb, &plan);
                if (!takes || pb.varlen) {
                    cr_expect_eq(plan.count, 0, "%s: %u launches", where, plan.count);
                    continue;
                }
                check_plan(where, &archs[a].caps, &pb, &plan, false);
                cr_assert_eq(plan.count, 1, "%s", where);
                const fa_cuda_launch *l = &plan.launches[0];
                cr_expect_eq(l->kernel, FA_CUDA_K_FWD_WGMMA_E4M3_D128, "%s", where);
                cr_expect_eq(l->smem, FA_FWD_WGMMA_SMEM_E4M3(128), "%s", where);
                cr_expect_eq(plan.splits, 0, "%s: no split-key path for FP8", where);
                /* a persistent grid of at most a block an SM (causal: with
                 * FA_FWD_WGMMA_CAUSAL_DYN), else a block a query tile */
                const unsigned tiles =
                    (unsigned)((pb.seq_q + FA_FWD_WGMMA_BQ_D(128) - 1) / FA_FWD_WGMMA_BQ_D(128));
                const unsigned items = tiles * (unsigned)(pb.heads_q * pb.batch);
                const unsigned sms =
                    archs[a].caps.sm_count > 0 ? (unsigned)archs[a].caps.sm_count : 1;
                if (!FA_FWD_WGMMA_PERSISTENT_CALL(128, pb.causal))
                    cr_expect(l->grid[0] == tiles && l->grid[1] == pb.heads_q &&
                                  l->grid[2] == pb.batch,
                              "%s", where);
                else
                    cr_expect(l->grid[1] == 1 && l->grid[2] == 1 &&
                                  l->grid[0] == (items < sms ? items : sms),
                              "%s: grid %u", where, l->grid[0]);
                served++;
            }
    cr_expect_eq(served, 8 * 2 * 2, "head dims 16..128 x causal x decoding shape on sm_90a");
}

/* On sm_90a a softcap the host can fold (fa_cuda_problem.softcap_fold) takes the wgmma forward's
 * FWD_WGMMA_SOFTCAP kernel of the same dtype and head dim, FP8 included, and every other call the
 * plain one (a packed batch keeps its *_VARLEN kernel): the fold's code stays out of the plain
 * kernels. */
Test(cuda_plan, a_folded_softcap_takes_its_own_wgmma_kernel)
{
    const fa_cuda_caps sm90 = SM90;
    const fa_dtype dtypes[] = {FA_DTYPE_F16, FA_DTYPE_BF16, FA_DTYPE_E4M3};
    int folded = 0;
    for (size_t t = 0; t < 3; t++)
        for (int64_t d = 64; d <= 256; d += 64)
            for (int flags = 0; flags < 8; flags++) {
                if (dtypes[t] == FA_DTYPE_E4M3 && d != 128)
                    continue;
                fa_cuda_problem pb = problem(dtypes[t], d, false);
                pb.softcap = true;
                pb.softcap_fold = flags & 1;
                pb.causal = flags & 2;
                pb.varlen = flags & 4;
                fa_cuda_plan fold, plain;
                fa_cuda_plan_forward(&sm90, &pb, &fold);
                pb.softcap_fold = false;
                fa_cuda_plan_forward(&sm90, &pb, &plain);
                if (plain.count == 0) { /* packed FP8 or head dim 256: the runtime's loop */
                    cr_expect_eq(fold.count, 0u);
                    continue;
                }
                cr_assert_eq(fold.count, 1u, "dtype %d d %lld flags %d", (int)dtypes[t],
                             (long long)d, flags);
                cr_assert_eq(plain.count, 1u);
                const fa_cuda_kernel_info *f = &fa_cuda_kernels[fold.launches[0].kernel];
                const fa_cuda_kernel_info *p = &fa_cuda_kernels[plain.launches[0].kernel];
                const bool takes = (flags & 1) && !pb.varlen;
                cr_expect_eq(f->family == FA_CUDA_FWD_WGMMA_SOFTCAP, takes, "%s", f->name);
                cr_expect_eq(p->family, pb.varlen ? FA_CUDA_FWD_WGMMA_VARLEN : FA_CUDA_FWD_WGMMA,
                             "%s", p->name);
                cr_expect_eq(f->dtype, p->dtype);
                cr_expect_eq(f->d, p->d);
                /* the same launch geometry */
                cr_expect_eq(fold.launches[0].grid[0], plain.launches[0].grid[0]);
                cr_expect_eq(fold.launches[0].smem, plain.launches[0].smem);
                folded += takes;
            }
    /* f16 and bf16 at head dims 64, 128, 192 (padded to 256) and 256, and FP8; causal or not */
    cr_expect_eq(folded, (2 * 4 + 1) * 2, "%d folded", folded);
}
