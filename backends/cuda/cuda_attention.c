// SPDX-License-Identifier: MIT
/* Forward and backward on CUDA: the planner (cuda_plan.c) picks the kernels of a call and this
 * file launches them on the context's stream with the parameter block, after sizing the
 * backward's workspace. */
#include "cuda_backend.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>

#include "../../shaders/cuda/fa_cuda_abi.h"

#define DEFAULT_SMEM 49152

_Static_assert(FA_CUDA_BIAS_F32 == FA_DTYPE_F32 && FA_CUDA_BIAS_F16 == FA_DTYPE_F16 &&
                   FA_CUDA_BIAS_BF16 == FA_DTYPE_BF16,
               "fa_cuda_params.bias_dtype holds fa_dtype's values");

static fa_cuda_tensor tensor_of(const fa_view *v, size_t element_size)
{
    const fa_cuda_buffer *buf = v->buffer;
    return (fa_cuda_tensor){
        .ptr = buf ? buf->ptr + v->offset * element_size : 0,
        .stride_b = v->stride_b,
        .stride_s = v->stride_s,
        .stride_h = v->stride_h,
    };
}

/* n capped at INT_MAX, for the kernel's int page size and page count: a larger page size comes
 * only with no key to read (seq_k, a multiple of it, is below 2^31: fa_cuda_check_call), and no
 * int32 table entry reaches page INT_MAX. */
static int int_at_most_max(int64_t n)
{
    return n < INT_MAX ? (int)n : INT_MAX;
}

static fa_cuda_params params_of(const fa_attention_call *call, bool backward)
{
    const size_t es = fa_dtype_size(call->dtype);
    const size_t o_es = fa_dtype_size(call->o_dtype); /* es but for FP8 */
    /* the mask's bounds around the diagonal (fa_cuda_abi.h): causal is a right bound of 0 */
    const int64_t off = call->seq_k - call->seq_q;
    const int64_t left = fa_call_left(call), right = fa_call_right(call);
    const float log2e = 1.4426950408889634f;
    fa_cuda_params p = {
        .q = tensor_of(&call->q, es),
        .k = tensor_of(&call->k, es),
        .v = tensor_of(&call->v, es),
        .o = tensor_of(&call->o, o_es),
        .o_dtype = (int)call->o_dtype,
        .batch = (int)call->batch,
        .seq_q = (int)call->seq_q,
        .seq_k = (int)call->seq_k,
        .heads_q = (int)call->heads_q,
        .heads_kv = (int)call->heads_kv,
        .head_dim = (int)call->head_dim,
        .group = (int)(call->heads_q / call->heads_kv),
        .causal = right >= 0,
        .causal_offset = (int)(off + (right >= 0 ? right : 0)),
        .has_left = left >= 0,
        .left_offset = (int)(off - (left >= 0 ? left : 0)),
        .has_lse = backward || call->has_lse,
        .scale = call->scale,
        .scale_log2 = call->scale * log2e,
    };
    if (call->softcap > 0.0f) {
        p.softcap = call->softcap;
        p.softcap_log2 = call->softcap * log2e;
        p.softcap_k = 2.0f * call->scale * log2e / call->softcap;
    }
    if (call->has_alibi) {
        p.alibi = tensor_of(&call->alibi, sizeof(float));
        p.has_alibi = 1;
    }
    if (call->has_bias) {
        p.bias = tensor_of(&call->bias, fa_dtype_size(call->bias_dtype));
        p.bias_dtype = (int)call->bias_dtype;
    }
    if (p.has_lse)
        p.lse = tensor_of(&call->lse, sizeof(float));
    for (int i = 0; i < 3; i++)
        if (call->has_descale[i])
            p.descale[i] = tensor_of(&call->descale[i], sizeof(float));
    if (call->has_seqlens_k) {
        p.seqlens_k = tensor_of(&call->seqlens_k, sizeof(int32_t));
        p.has_seqlens_k = 1;
    }
    if (call->has_block_table) {
        p.block_table = tensor_of(&call->block_table, sizeof(int32_t));
        p.page_size = int_at_most_max(call->page_size);
        p.num_pages = int_at_most_max(call->num_pages);
    }
    if (call->has_varlen) {
        p.cu_seqlens_q = tensor_of(&call->cu_seqlens_q, sizeof(int32_t));
        p.cu_seqlens_k = tensor_of(&call->cu_seqlens_k, sizeof(int32_t));
        p.varlen = 1;
    }
    if (backward) {
        p.d_o = tensor_of(&call->d_o, es);
        p.d_q = tensor_of(&call->d_q, es);
        p.d_k = tensor_of(&call->d_k, es);
        p.d_v = tensor_of(&call->d_v, es);
    }
    return p;
}

/* Rows start on 16 bytes: what cp.async of 16-byte chunks needs. */
static bool aligned16(const fa_cuda_tensor *t, size_t element_size)
{
    const long long per = (long long)(16 / element_size);
    return t->ptr % 16 == 0 && t->stride_b % per == 0 && t->stride_s % per == 0 &&
           t->stride_h % per == 0;
}

static bool views_aligned(const fa_cuda_params *p, bool backward, size_t es, size_t o_es)
{
    bool ok = aligned16(&p->q, es) && aligned16(&p->k, es) && aligned16(&p->v, es) &&
              aligned16(&p->o, o_es);
    if (backward)
        ok = ok && aligned16(&p->d_o, es) && aligned16(&p->d_q, es) && aligned16(&p->d_k, es) &&
             aligned16(&p->d_v, es);
    return ok;
}

/* One of the call's views (keys: k or v, else q, o or d_o) as the driver's 4-D tensor map (head
 * dim, row, head, batch entry) in 64 x 64 boxes, swizzled as the wgmma kernels' tiles are
 * (128-byte rows, 16-byte units XOR the row mod 8): false where the driver refuses the view (a
 * stride not a multiple of 16 bytes, say). */
static bool tma_map(const fa_cuda_state *st, const fa_attention_call *call, unsigned char map[128],
                    const fa_cuda_tensor *t, bool keys)
{
    enum { TMA_F16 = 6, TMA_BF16 = 9, TMA_SWIZZLE_128B = 3, TMA_L2_256B = 3 };
    const unsigned long long es = 2;
    const unsigned long long dims[4] = {(unsigned long long)call->head_dim,
                                        (unsigned long long)(keys ? call->seq_k : call->seq_q),
                                        (unsigned long long)(keys ? call->heads_kv : call->heads_q),
                                        (unsigned long long)call->batch};
    const unsigned long long strides[3] = {(unsigned long long)t->stride_s * es,
                                           (unsigned long long)t->stride_h * es,
                                           (unsigned long long)t->stride_b * es};
    const unsigned box[4] = {64, 64, 1, 1}, one[4] = {1, 1, 1, 1};
    if (t->stride_s <= 0 || t->stride_h <= 0 || t->stride_b <= 0)
        return false;
    return st->cu->cuTensorMapEncodeTiled(map, call->dtype == FA_DTYPE_BF16 ? TMA_BF16 : TMA_F16, 4,
                                          (void *)(uintptr_t)t->ptr, dims, strides, box, one, 0,
                                          TMA_SWIZZLE_128B, TMA_L2_256B, 0) == CUDA_SUCCESS;
}

/* The wgmma forward's tiles (and O) by tensor-memory copies (p->use_tma; caps.fwd_tma) where the
 * plan is that kernel at a 16-bit dtype on one sequence's rows (at head dim 64 the rows built with
 * that loader, which the plan takes where caps.fwd_tma_d64) and the driver takes the views; else
 * the loader's own copies. */
static void use_tma_if_asked(fa_context *ctx, const fa_attention_call *call,
                             const fa_cuda_plan *plan, fa_cuda_params *p)
{
    const fa_cuda_state *st = ctx->backend_state;
    if (!st->caps.fwd_tma || plan->count != 1)
        return;
    const fa_cuda_kernel_info *k = &fa_cuda_kernels[plan->launches[0].kernel];
    if ((k->family != FA_CUDA_FWD_WGMMA && k->family != FA_CUDA_FWD_WGMMA_SOFTCAP) ||
        (k->dtype != FA_DTYPE_F16 && k->dtype != FA_DTYPE_BF16) || (k->d < 128 && k->p2 != 1))
        return;
    p->use_tma = tma_map(st, call, p->tma_map[0], &p->q, false) &&
                 tma_map(st, call, p->tma_map[1], &p->k, true) &&
                 tma_map(st, call, p->tma_map[2], &p->v, true) &&
                 tma_map(st, call, p->tma_map[3], &p->o, false);
    fa_log(ctx, FA_LOG_DEBUG, "cuda: %s",
           p->use_tma ? "the forward's tiles by tensor maps"
                      : "tensor maps refused for these views; the loader copies");
}

/* The wgmma backward's Q and dO tiles by tensor-memory copies (p->use_tma; caps.bwd_tma; maps 0
 * and 3, the kernels' boxes as the forward's) where its kernel is in the plan at a 16-bit dtype
 * and the driver takes the views; the plan's other kernels do not read them. */
static void use_bwd_tma_if_asked(fa_context *ctx, const fa_attention_call *call,
                                 const fa_cuda_plan *plan, fa_cuda_params *p)
{
    const fa_cuda_state *st = ctx->backend_state;
    bool wgmma = false;
    for (unsigned i = 0; i < plan->count; i++)
        wgmma |= fa_cuda_kernels[plan->launches[i].kernel].family == FA_CUDA_BWD_WGMMA;
    if (!st->caps.bwd_tma || !wgmma ||
        (call->dtype != FA_DTYPE_F16 && call->dtype != FA_DTYPE_BF16))
        return;
    p->use_tma = tma_map(st, call, p->tma_map[0], &p->q, false) &&
                 tma_map(st, call, p->tma_map[3], &p->d_o, false);
    fa_log(ctx, FA_LOG_DEBUG, "cuda: %s",
           p->use_tma ? "the backward's Q and dO by tensor maps"
                      : "tensor maps refused for these views; the producer copies");
}

/* Runs one launch of a plan (none where the grid is empty). */
static fa_status launch(fa_context *ctx, const fa_cuda_launch *l, fa_cuda_params *p)
{
    fa_cuda_state *st = ctx->backend_state;
    CUfunction f = st->kernels[l->kernel];
    if (l->grid[0] == 0 || l->grid[1] == 0 || l->grid[2] == 0)
        return FA_OK;
    CUresult r;
    if (l->smem > DEFAULT_SMEM) {
        r = st->cu->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       (int)l->smem);
        if (r != CUDA_SUCCESS)
            return fa_cuda_fail(ctx, r, "cuFuncSetAttribute(max dynamic shared memory)");
    }
    void *args[] = {p};
    r = st->cu->cuLaunchKernel(f, l->grid[0], l->grid[1], l->grid[2], l->threads, 1, 1, l->smem,
                               st->stream, args, NULL);
    if (r != CUDA_SUCCESS)
        return fa_cuda_fail(ctx, r, l->what);
    fa_log(ctx, FA_LOG_DEBUG, "cuda: %s grid (%u, %u, %u) x %u threads, %u bytes of shared memory",
           fa_cuda_kernels[l->kernel].name, l->grid[0], l->grid[1], l->grid[2], l->threads,
           l->smem);
    return FA_OK;
}

/* The longest sequence of a packed batch (call->cu_*_host set): its query and key rows. */
static void longest_sequence(const fa_attention_call *call, int64_t *seq_q, int64_t *seq_k)
{
    const uint64_t sq = (uint64_t)call->cu_seqlens_q.stride_b;
    const uint64_t sk = (uint64_t)call->cu_seqlens_k.stride_b;
    *seq_q = *seq_k = 0;
    for (uint64_t b = 0; b < (uint64_t)call->varlen_batch; b++) {
        const int64_t nq = call->cu_q_host[(b + 1) * sq] - call->cu_q_host[b * sq];
        const int64_t nk = call->cu_k_host[(b + 1) * sk] - call->cu_k_host[b * sk];
        *seq_q = nq > *seq_q ? nq : *seq_q;
        *seq_k = nk > *seq_k ? nk : *seq_k;
    }
}

/* The call as the planner sees it; a packed batch (cu_*_host set) as its sequences, each as
 * long as the longest. */
static fa_cuda_problem problem_of(const fa_attention_call *call, const fa_cuda_params *p,
                                  bool backward)
{
    int64_t batch = call->batch, seq_q = call->seq_q, seq_k = call->seq_k;
    const bool varlen = call->has_varlen && call->cu_q_host;
    if (varlen) {
        batch = call->varlen_batch;
        longest_sequence(call, &seq_q, &seq_k);
    }
    return (fa_cuda_problem){
        .dtype = call->dtype,
        .batch = batch,
        .seq_q = seq_q,
        .seq_k = seq_k,
        .heads_q = call->heads_q,
        .heads_kv = call->heads_kv,
        .head_dim = call->head_dim,
        .deterministic = call->deterministic,
        .num_splits = call->num_splits,
        .aligned =
            views_aligned(p, backward, fa_dtype_size(call->dtype), fa_dtype_size(call->o_dtype)),
        .seqlens_k = call->has_seqlens_k,
        .paged = call->has_block_table,
        .window = call->window,
        .window_left = (int32_t)fa_call_left(call),
        .window_right = (int32_t)fa_call_right(call),
        .softcap = call->softcap > 0.0f,
        .softcap_fold = call->softcap > 0.0f && !call->has_alibi && !call->has_bias &&
                        p->softcap_log2 < 1024.0f,
        .alibi = call->has_alibi,
        .varlen = varlen,
        .bias = call->has_bias,
        .causal = p->causal != 0,
    };
}

/* Runs plan's launches in order. */
static fa_status run_plan(fa_context *ctx, const fa_cuda_plan *plan, fa_cuda_params *p)
{
    fa_status status = FA_OK;
    for (unsigned i = 0; i < plan->count && status == FA_OK; i++)
        status = launch(ctx, &plan->launches[i], p);
    return status;
}

/* The forward call as the planner sees it. */
static fa_cuda_problem forward_problem(const fa_attention_call *call)
{
    const fa_cuda_params p = params_of(call, false);
    return problem_of(call, &p, false);
}

/* Per-sequence lengths and a paged cache reach the split-key forward alone (the decoding
 * path): UNSUPPORTED, saying why, for a call it cannot take. */
static fa_status check_index_tensors(fa_context *ctx, const fa_attention_call *call)
{
    const fa_cuda_state *st = ctx->backend_state;
    const fa_cuda_problem pb = forward_problem(call);
    char why[192];
    if (fa_cuda_split_takes(&st->caps, &pb, why, sizeof why))
        return FA_OK;
    const char *what = !call->has_block_table ? "seqlens_k (per-sequence lengths)"
                       : call->has_seqlens_k  ? "seqlens_k and block_table (a paged KV cache)"
                                              : "block_table (a paged KV cache)";
    return fa_fail(ctx, FA_ERROR_UNSUPPORTED,
                   "cuda: %s only on the decoding path (the split-key forward), which this call "
                   "cannot take: %s",
                   what, why);
}

/* FP8 reaches the wgmma forward's E4M3 kernel alone: UNSUPPORTED_DTYPE, saying why, for a call
 * it cannot take (a packed batch is checked sequence by sequence). */
static fa_status check_fp8(fa_context *ctx, const fa_attention_call *call)
{
    const fa_cuda_state *st = ctx->backend_state;
    const fa_cuda_problem pb = forward_problem(call);
    char why[192];
    if (fa_cuda_fp8_takes(&st->caps, &pb, why, sizeof why))
        return FA_OK;
    return fa_fail(ctx, FA_ERROR_UNSUPPORTED_DTYPE, "cuda: q.dtype is e4m3: %s", why);
}

fa_status fa_cuda_check_call(fa_context *ctx, const fa_attention_call *call, bool backward)
{
    if (call->batch > 65535 || call->heads_q > 65535)
        return fa_fail(ctx, FA_ERROR_TOO_LARGE,
                       "cuda: batch %lld and heads %lld must each be at most 65535",
                       (long long)call->batch, (long long)call->heads_q);
    if (call->seq_q > INT_MAX - 256 || call->seq_k > INT_MAX - 256)
        return fa_fail(ctx, FA_ERROR_TOO_LARGE,
                       "cuda: seq_q %lld and seq_k %lld must each be below 2^31 - 256",
                       (long long)call->seq_q, (long long)call->seq_k);
    if (!backward && call->dtype == FA_DTYPE_E4M3)
        return check_fp8(ctx, call);
    if (!backward && (call->has_seqlens_k || call->has_block_table))
        return check_index_tensors(ctx, call);
    return FA_OK;
}

/* A packed batch in one launch (or one per backward pass) where *_VARLEN kernels take it (the
 * planner plans nothing for the others), its sequences one per block row of the grid. */
bool fa_cuda_varlen_takes(fa_context *ctx, const fa_attention_call *call, bool backward)
{
    const fa_cuda_state *st = ctx->backend_state;
    if (call->varlen_batch > 65535)
        return false;
    const fa_cuda_params p = params_of(call, backward);
    const fa_cuda_problem pb = problem_of(call, &p, backward);
    fa_cuda_plan plan;
    if (backward)
        fa_cuda_plan_backward(&st->caps, &pb, &plan);
    else
        fa_cuda_plan_forward(&st->caps, &pb, &plan);
    return plan.count > 0;
}

/* Grows the scratch (the backward's, the split-key forward's) to `bytes` (waiting for work that may
 * still use the old one). With `may_fail`, running out of memory returns
 * FA_ERROR_OUT_OF_DEVICE_MEMORY without recording an error, for a caller that has a smaller plan.
 */
static fa_status ensure_workspace(fa_context *ctx, size_t bytes, bool may_fail)
{
    fa_cuda_state *st = ctx->backend_state;
    if (bytes <= st->workspace_bytes)
        return FA_OK;
    if (st->workspace) {
        CUresult r = st->cu->cuStreamSynchronize(st->stream);
        if (r != CUDA_SUCCESS)
            return fa_cuda_fail(ctx, r, "cuStreamSynchronize");
        st->cu->cuMemFree(st->workspace);
        fa_workspace_track(ctx, -(int64_t)st->workspace_bytes);
        st->workspace = 0;
        st->workspace_bytes = 0;
    }
    CUresult r = st->cu->cuMemAlloc(&st->workspace, bytes);
    if (r != CUDA_SUCCESS) {
        st->workspace = 0;
        if (may_fail && r == CUDA_ERROR_OUT_OF_MEMORY)
            return FA_ERROR_OUT_OF_DEVICE_MEMORY;
        char what[96];
        snprintf(what, sizeof what, "cuMemAlloc of %zu bytes of workspace", bytes);
        return fa_cuda_fail(ctx, r, what);
    }
    st->workspace_bytes = bytes;
    fa_workspace_track(ctx, (int64_t)bytes);
    return FA_OK;
}

/* The workspace of a plan that has a fallback: FA_OK with *short_of_memory set (after a warning
 * naming what runs instead) when there is no device memory for it, so that the caller re-plans. */
static fa_status workspace_or_fallback(fa_context *ctx, size_t bytes, const char *what,
                                       const char *instead, bool *short_of_memory)
{
    fa_status status = ensure_workspace(ctx, bytes, true);
    *short_of_memory = status == FA_ERROR_OUT_OF_DEVICE_MEMORY;
    if (!*short_of_memory)
        return status;
    fa_log(ctx, FA_LOG_WARN, "cuda: no device memory for the %zu-byte %s; running %s instead",
           bytes, what, instead);
    return FA_OK;
}

fa_status fa_cuda_forward(fa_context *ctx, const fa_attention_call *call)
{
    fa_cuda_state *st = ctx->backend_state;
    fa_cuda_params p = params_of(call, false);
    fa_cuda_problem pb = problem_of(call, &p, false);
    fa_cuda_plan plan;
    fa_cuda_plan_forward(&st->caps, &pb, &plan);
    if (plan.count == 0) /* fa_cuda_check_call refuses these first */
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED, "cuda: no kernel takes this call");
    fa_status status = fa_cuda_enter(ctx);
    if (status != FA_OK)
        return status;
    bool short_of_memory = false;
    if (plan.splits > 1)
        status = workspace_or_fallback(ctx, plan.workspace_bytes, "split-key workspace",
                                       "one chunk", &short_of_memory);
    if (short_of_memory) {
        pb.num_splits = 1;
        fa_cuda_plan_forward(&st->caps, &pb, &plan);
    }
    p.splits = plan.splits;
    p.split_keys = plan.split_keys;
    p.index_error = st->index_error;
    p.item_counter = st->item_counter;
    st->index_pending |= call->has_seqlens_k || call->has_block_table;
    if (plan.splits > 1) {
        p.part_o = st->workspace;
        p.part_lse = st->workspace + plan.part_lse_offset;
        p.split_done = plan.merge_in_split ? st->split_done : 0;
    }
    if (status == FA_OK && !call->has_varlen)
        use_tma_if_asked(ctx, call, &plan, &p);
    if (status == FA_OK)
        status = run_plan(ctx, &plan, &p);
    fa_cuda_leave(ctx);
    return status;
}

fa_status fa_cuda_backward(fa_context *ctx, const fa_attention_call *call)
{
    fa_cuda_state *st = ctx->backend_state;
    fa_cuda_params p = params_of(call, true);
    fa_cuda_problem pb = problem_of(call, &p, true);
    fa_cuda_plan plan;
    fa_cuda_plan_backward(&st->caps, &pb, &plan);
    fa_status status = fa_cuda_enter(ctx);
    if (status != FA_OK)
        return status;
    bool short_of_memory = false;
    /* a packed batch has no deterministic kernel to fall back on (fa_cuda_varlen_takes) */
    if (plan.atomic_dq && !pb.varlen)
        status = workspace_or_fallback(ctx, plan.workspace_bytes, "dQ accumulator",
                                       "the deterministic backward", &short_of_memory);
    if (short_of_memory) {
        pb.deterministic = true;
        fa_cuda_plan_backward(&st->caps, &pb, &plan);
    }
    if (status == FA_OK && (!plan.atomic_dq || pb.varlen))
        status = ensure_workspace(ctx, plan.workspace_bytes, false);
    p.delta = st->workspace;
    p.dq_accum = plan.atomic_dq ? st->workspace + plan.accum_offset : 0;
    p.dq_tiled = (int)plan.dq_tiled;
    if (status == FA_OK && !call->has_varlen)
        use_bwd_tma_if_asked(ctx, call, &plan, &p);
    if (status == FA_OK && plan.atomic_dq && plan.accum_elems) {
        CUresult r = st->cu->cuMemsetD32Async(p.dq_accum, 0, plan.accum_elems, st->stream);
        if (r != CUDA_SUCCESS)
            status = fa_cuda_fail(ctx, r, "cuMemsetD32Async (zeroing the dQ accumulator)");
    }
    if (status == FA_OK)
        status = run_plan(ctx, &plan, &p);
    fa_cuda_leave(ctx);
    return status;
}
