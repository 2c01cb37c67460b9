// SPDX-License-Identifier: MIT
/* Validation of attention calls: every check runs here, once, before a backend sees the call, and
 * each failure names the argument and the limit. The result is a resolved fa_attention_call. */
#include "fa_validate.h"

#include "fa_split.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct span {
    const fa_buffer *buffer;
    uint64_t begin, end; /* bytes; begin == end for an empty tensor */
    int64_t shape[4];
    int64_t stride[4]; /* bytes */
    int64_t element;   /* bytes */
} span;

typedef struct role {
    const char *name;
    const fa_tensor *tensor;
    bool output;
    bool lse;
    fa_view *view;
    span bytes;
    bool index;  /* an int32 index tensor (seqlens_k, block_table) */
    bool slopes; /* f32 whatever the call's dtype (alibi_slopes, the descales) */
    bool fp8;    /* may be e4m3 (q, k, v, k_new, v_new) */
    bool bias;   /* f32, f16 or bf16 whatever the call's dtype (bias) */
} role;

static bool mul_ok(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}
static bool add_ok(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

/* Default strides: packed BSHD, or packed (batch, heads, seq) for the LSE. */
static bool default_strides(const int64_t *shape, bool lse, int64_t *stride)
{
    int64_t sd = shape[3], hsd, shsd;
    if (lse) {
        stride[3] = 1;
        stride[1] = 1;
        if (!mul_ok(shape[1], 1, &stride[2]) || !mul_ok(shape[2], shape[1], &stride[0]))
            return false;
        return true;
    }
    stride[3] = 1;
    stride[2] = sd;
    if (!mul_ok(shape[2], sd, &hsd) || !mul_ok(shape[1], hsd, &shsd))
        return false;
    stride[1] = hsd;
    stride[0] = shsd;
    return true;
}

/* True when no two elements of the view share an address (sufficient test: ordered by stride,
 * each stride is at least the span of the dimensions below it). */
static bool strides_disjoint(const int64_t *shape, const int64_t *stride)
{
    int order[4] = {0, 1, 2, 3};
    for (int i = 1; i < 4; i++)
        for (int j = i; j > 0 && stride[order[j]] < stride[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    int64_t needed = 1;
    for (int i = 0; i < 4; i++) {
        int d = order[i];
        if (shape[d] <= 1)
            continue;
        if (stride[d] < needed)
            return false;
        if (!mul_ok(stride[d], shape[d], &needed))
            return true; /* larger than any address: nothing above can collide */
    }
    return true;
}

static fa_status resolve(fa_context *ctx, role *r)
{
    const fa_tensor *t = r->tensor;
    if (!t)
        return fa_fail(ctx, FA_ERROR_NULL_POINTER, "%s is NULL", r->name);
    if (!t->buffer)
        return fa_fail(ctx, FA_ERROR_NULL_POINTER, "%s.buffer is NULL", r->name);
    if (t->buffer->ctx != ctx)
        return fa_fail(ctx, FA_ERROR_FOREIGN_BUFFER, "%s.buffer belongs to another context",
                       r->name);
    const bool f32_only = r->lse || r->slopes; /* r->bias: any float dtype */
    const bool dtype_ok = f32_only   ? t->dtype == FA_DTYPE_F32
                          : r->index ? t->dtype == FA_DTYPE_I32
                                     : t->dtype == FA_DTYPE_F32 || t->dtype == FA_DTYPE_F16 ||
                                           t->dtype == FA_DTYPE_BF16 ||
                                           (r->fp8 && t->dtype == FA_DTYPE_E4M3);
    if (!dtype_ok)
        return fa_fail(ctx, FA_ERROR_DTYPE_MISMATCH, "%s.dtype is %s (%d); expected %s", r->name,
                       fa_dtype_name(t->dtype), (int)t->dtype,
                       f32_only   ? "f32"
                       : r->index ? "i32"
                       : r->fp8   ? "f32, f16, bf16 or e4m3"
                                  : "f32, f16 or bf16");
    for (int d = 0; d < 4; d++)
        if (t->shape[d] < 0)
            return fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT, "%s.shape[%d] is negative (%lld)",
                           r->name, d, (long long)t->shape[d]);
    if (r->lse && t->shape[3] != 1)
        return fa_fail(ctx, FA_ERROR_SHAPE_MISMATCH, "%s.shape[3] must be 1, not %lld", r->name,
                       (long long)t->shape[3]);

    int64_t stride[4];
    bool zero = !t->stride[0] && !t->stride[1] && !t->stride[2] && !t->stride[3];
    if (zero) {
        if (!default_strides(t->shape, r->lse, stride))
            return fa_fail(ctx, FA_ERROR_SIZE_OVERFLOW, "%s: packed strides overflow 64 bits",
                           r->name);
    } else {
        memcpy(stride, t->stride, sizeof stride);
        for (int d = 0; d < 4; d++)
            if (stride[d] < 0)
                return fa_fail(ctx, FA_ERROR_INVALID_STRIDE, "%s.stride[%d] is negative (%lld)",
                               r->name, d, (long long)stride[d]);
        if (!r->lse && stride[3] != 1)
            return fa_fail(ctx, FA_ERROR_INVALID_STRIDE,
                           "%s.stride[3] (head_dim) must be 1, not %lld", r->name,
                           (long long)stride[3]);
    }

    int64_t count = 1;
    for (int d = 0; d < 4; d++)
        if (!mul_ok(count, t->shape[d], &count))
            return fa_fail(ctx, FA_ERROR_SIZE_OVERFLOW,
                           "%s: element count of shape (%lld, %lld, %lld, %lld) overflows 64 bits",
                           r->name, (long long)t->shape[0], (long long)t->shape[1],
                           (long long)t->shape[2], (long long)t->shape[3]);

    const int64_t esize = (int64_t)fa_dtype_size(t->dtype);
    if (t->offset % (uint64_t)esize)
        return fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT,
                       "%s.offset %llu is not a multiple of the %s element size %lld", r->name,
                       (unsigned long long)t->offset, fa_dtype_name(t->dtype), (long long)esize);
    if (t->offset > (uint64_t)INT64_MAX)
        return fa_fail(ctx, FA_ERROR_SIZE_OVERFLOW, "%s.offset overflows", r->name);

    int64_t end_bytes = (int64_t)t->offset;
    if (count > 0) {
        int64_t last = 0, term;
        for (int d = 0; d < 4; d++)
            if (!mul_ok(t->shape[d] - 1, stride[d], &term) || !add_ok(last, term, &last))
                return fa_fail(ctx, FA_ERROR_SIZE_OVERFLOW,
                               "%s: the last element's index overflows 64 bits", r->name);
        if (!add_ok(last, 1, &last) || !mul_ok(last, esize, &term) ||
            !add_ok(end_bytes, term, &end_bytes))
            return fa_fail(ctx, FA_ERROR_SIZE_OVERFLOW, "%s: the byte extent overflows 64 bits",
                           r->name);
    }
    if ((uint64_t)end_bytes > t->buffer->size)
        return fa_fail(ctx, FA_ERROR_OUT_OF_BOUNDS,
                       "%s reaches byte %lld but its buffer holds %zu bytes", r->name,
                       (long long)end_bytes, t->buffer->size);
    if (r->output && count > 0 && !strides_disjoint(t->shape, stride))
        return fa_fail(ctx, FA_ERROR_INVALID_STRIDE,
                       "%s: strides make output elements overlap each other", r->name);

    r->bytes = (span){t->buffer, t->offset, (uint64_t)end_bytes, {0}, {0}, esize};
    for (int d = 0; d < 4; d++) {
        r->bytes.shape[d] = t->shape[d];
        r->bytes.stride[d] = stride[d] * esize; /* fits: the extent above did not overflow */
    }
    *r->view = (fa_view){
        .buffer = t->buffer->handle,
        .offset = (t->buffer->base + t->offset) / (uint64_t)esize,
        .stride_b = stride[0],
        .stride_s = stride[1],
        .stride_h = stride[2],
    };
    return FA_OK;
}

static bool same_shape(const fa_tensor *a, const fa_tensor *b)
{
    return memcmp(a->shape, b->shape, sizeof a->shape) == 0;
}

static fa_status check_same(fa_context *ctx, const role *a, const role *b)
{
    const int64_t *x = a->tensor->shape, *y = b->tensor->shape;
    if (!same_shape(a->tensor, b->tensor))
        return fa_fail(ctx, FA_ERROR_SHAPE_MISMATCH,
                       "%s has shape (%lld, %lld, %lld, %lld) but %s has (%lld, %lld, %lld, %lld)",
                       b->name, (long long)y[0], (long long)y[1], (long long)y[2], (long long)y[3],
                       a->name, (long long)x[0], (long long)x[1], (long long)x[2], (long long)x[3]);
    return FA_OK;
}

/* Bytes one (batch, seq) row of a view spans: its heads and head_dim. */
static int64_t row_bytes(const span *x)
{
    if (x->shape[2] == 0 || x->shape[3] == 0)
        return 0;
    return (x->shape[2] - 1) * x->stride[2] + (x->shape[3] - 1) * x->stride[3] + x->element;
}

/* Interleaved views, such as dQ, dK and dV packed as (batch, seq, 3, heads, dim) in one buffer:
 * with the same batch and seq shape and strides, rows laid out without overlap, and both views'
 * rows inside one period of the smallest outer stride, two views are disjoint exactly when their
 * first rows are. (Any other address difference is at least that period.) */
static bool interleaved_disjoint(const span *a, const span *b)
{
    for (int d = 0; d < 2; d++)
        if (a->shape[d] != b->shape[d] || (a->shape[d] > 1 && a->stride[d] != b->stride[d]))
            return false;
    const int64_t rows[2] = {a->shape[0] > 1 ? a->stride[0] : 0,
                             a->shape[1] > 1 ? a->stride[1] : 0};
    int64_t period =
        rows[0] && rows[1] ? (rows[0] < rows[1] ? rows[0] : rows[1]) : rows[0] + rows[1];
    if (period == 0)
        return false;
    if (rows[0] && rows[1]) { /* the two outer dims themselves must not overlap */
        int inner = rows[0] < rows[1] ? 0 : 1;
        if (rows[1 - inner] < rows[inner] * a->shape[inner])
            return false;
    }
    const int64_t a0 = (int64_t)a->begin, a1 = a0 + row_bytes(a);
    const int64_t b0 = (int64_t)b->begin, b1 = b0 + row_bytes(b);
    const int64_t lo = a0 < b0 ? a0 : b0, hi = a1 > b1 ? a1 : b1;
    return hi - lo <= period && (a1 <= b0 || b1 <= a0);
}

static bool overlap(const span *a, const span *b)
{
    if (a->buffer != b->buffer || a->begin >= b->end || b->begin >= a->end)
        return false;
    return !interleaved_disjoint(a, b);
}

/* A window's bounds are -1 (none) or key counts; switched off, only 0 and -1 (FlashAttention's
 * "no window") are accepted, so that bounds set without `enabled` are not silently ignored. */
static fa_status check_window(fa_context *ctx, const fa_window *w)
{
    const int32_t bound[2] = {w->left, w->right};
    static const char *const side[2] = {"left", "right"};
    for (int i = 0; i < 2; i++) {
        if (bound[i] < -1)
            return fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT,
                           "window.%s is %d; a bound is -1 (none) or a key count >= 0", side[i],
                           (int)bound[i]);
        if (!w->enabled && bound[i] != 0 && bound[i] != -1)
            return fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT,
                           "window.%s is %d but window.enabled is false: set enabled to apply "
                           "the window",
                           side[i], (int)bound[i]);
    }
    return FA_OK;
}

/* The window as backends take it (fa_attention_call.window): causal folded in, bounds that
 * reach past every key dropped (fa_call_bound_window). */
static void resolve_window(const fa_window *w, fa_attention_call *call)
{
    call->causal = call->causal || (w->enabled && w->right == 0);
    fa_call_bound_window(call, w->enabled ? w->left : -1, w->enabled ? w->right : -1);
}

fa_status fa_validate_attention(fa_context *ctx, const fa_attention_desc *desc, const fa_tensor *q,
                                const fa_tensor *k, const fa_tensor *v, const fa_tensor *o,
                                const fa_tensor *lse, const fa_backward_tensors *grad,
                                fa_attention_call *call)
{
    static const fa_attention_desc defaults = {0};
    if (!desc)
        desc = &defaults;
    if (ctx->lost)
        return fa_fail(ctx, FA_ERROR_CONTEXT_LOST, "the context lost its device earlier");
    if (!fa_reserved_zero(desc->reserved, sizeof desc->reserved / sizeof desc->reserved[0]))
        return fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT, FA_RESERVED_MESSAGE, "fa_attention_desc",
                       fa_version_string());
    memset(call, 0, sizeof *call);

    /* An append (k_new, v_new) writes into k and v: they are outputs then. */
    const bool append = desc->k_new || desc->v_new;
    role roles[18] = {
        {.name = "q", .tensor = q, .view = &call->q, .fp8 = !grad},
        {.name = "k", .tensor = k, .output = append, .view = &call->k, .fp8 = !grad},
        {.name = "v", .tensor = v, .output = append, .view = &call->v, .fp8 = !grad},
        {.name = "o", .tensor = o, .output = !grad, .view = &call->o},
        {.name = "lse", .tensor = lse, .output = !grad, .lse = true, .view = &call->lse},
    };
    int n = 5;
    if (grad) {
        roles[n++] = (role){.name = "d_o", .tensor = grad->d_o, .view = &call->d_o};
        roles[n++] = (role){.name = "d_q", .tensor = grad->d_q, .output = true, .view = &call->d_q};
        roles[n++] = (role){.name = "d_k", .tensor = grad->d_k, .output = true, .view = &call->d_k};
        roles[n++] = (role){.name = "d_v", .tensor = grad->d_v, .output = true, .view = &call->d_v};
    }
    /* The forward's int32 index tensors. */
    const struct {
        const char *name, *what;
        const fa_tensor *tensor;
        fa_view *view;
        bool *has;
    } indices[2] = {
        {"seqlens_k", "per-sequence lengths", desc->seqlens_k, &call->seqlens_k,
         &call->has_seqlens_k},
        {"block_table", "a paged KV cache", desc->block_table, &call->block_table,
         &call->has_block_table},
    };
    for (int i = 0; i < 2; i++) {
        if (!indices[i].tensor)
            continue;
        if (grad)
            return fa_fail(ctx, FA_ERROR_UNSUPPORTED, "%s: the backward does not take %s",
                           indices[i].name, indices[i].what);
        roles[n++] = (role){.name = indices[i].name,
                            .tensor = indices[i].tensor,
                            .view = indices[i].view,
                            .index = true};
        *indices[i].has = true;
    }
    int n_alibi = 0; /* the role of alibi_slopes, 0 without */
    if (desc->alibi_slopes) {
        n_alibi = n;
        roles[n++] = (role){.name = "alibi_slopes",
                            .tensor = desc->alibi_slopes,
                            .view = &call->alibi,
                            .slopes = true};
    }
    if (desc->bias)
        roles[n++] =
            (role){.name = "bias", .tensor = desc->bias, .view = &call->bias, .bias = true};
    int n_varlen = 0; /* the role of cu_seqlens_q (cu_seqlens_k follows), 0 without */
    if (desc->cu_seqlens_q || desc->cu_seqlens_k) {
        if (!desc->cu_seqlens_q || !desc->cu_seqlens_k)
            return fa_fail(ctx, FA_ERROR_NULL_POINTER,
                           "%s is NULL but %s is not: a packed batch takes both or neither",
                           desc->cu_seqlens_q ? "cu_seqlens_k" : "cu_seqlens_q",
                           desc->cu_seqlens_q ? "cu_seqlens_q" : "cu_seqlens_k");
        const char *other = desc->seqlens_k     ? "seqlens_k"
                            : desc->block_table ? "block_table"
                            : append            ? "k_new"
                            : desc->bias        ? "bias"
                                                : NULL;
        if (other)
            return fa_fail(ctx, FA_ERROR_UNSUPPORTED,
                           "cu_seqlens_q, cu_seqlens_k: a packed batch does not take %s", other);
        n_varlen = n;
        roles[n++] = (role){.name = "cu_seqlens_q",
                            .tensor = desc->cu_seqlens_q,
                            .view = &call->cu_seqlens_q,
                            .index = true};
        roles[n++] = (role){.name = "cu_seqlens_k",
                            .tensor = desc->cu_seqlens_k,
                            .view = &call->cu_seqlens_k,
                            .index = true};
    } else if (desc->max_seqlen_q || desc->max_seqlen_k) {
        return fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT,
                       "max_seqlen_q, max_seqlen_k are set without cu_seqlens_q, cu_seqlens_k");
    }
    if (desc->max_seqlen_q < 0 || desc->max_seqlen_k < 0)
        return fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT,
                       "max_seqlen_q %lld, max_seqlen_k %lld: a bound is >= 0 (0: none)",
                       (long long)desc->max_seqlen_q, (long long)desc->max_seqlen_k);
    int n_new = 0; /* the role of k_new (v_new follows), 0 without an append */
    if (append) {
        if (grad)
            return fa_fail(ctx, FA_ERROR_UNSUPPORTED,
                           "k_new, v_new: the backward does not append to a KV cache");
        if (!desc->k_new || !desc->v_new)
            return fa_fail(ctx, FA_ERROR_NULL_POINTER,
                           "%s is NULL but %s is not: an append takes both or neither",
                           desc->k_new ? "v_new" : "k_new", desc->k_new ? "k_new" : "v_new");
        if (!desc->seqlens_k)
            return fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT,
                           "k_new, v_new need seqlens_k: the new rows go at each sequence's "
                           "length");
        n_new = n;
        roles[n++] =
            (role){.name = "k_new", .tensor = desc->k_new, .view = &call->k_new, .fp8 = true};
        roles[n++] =
            (role){.name = "v_new", .tensor = desc->v_new, .view = &call->v_new, .fp8 = true};
    }
    /* FP8 inputs: o in a wider dtype, and descale factors. */
    if (grad && q && q->dtype == FA_DTYPE_E4M3)
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED_DTYPE,
                       "q.dtype is e4m3: the backward does not take FP8 inputs (forward only)");
    const fa_tensor *descales[3] = {desc->q_descale, desc->k_descale, desc->v_descale};
    static const char *const descale_names[3] = {"q_descale", "k_descale", "v_descale"};
    for (int i = 0; i < 3; i++) {
        if (!descales[i])
            continue;
        if (grad || (q && q->dtype != FA_DTYPE_E4M3))
            return fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT,
                           "%s is set but q.dtype is %s: descale factors go with e4m3 inputs "
                           "(forward only)",
                           descale_names[i], q ? fa_dtype_name(q->dtype) : "unknown");
        call->has_descale[i] = true;
        roles[n++] = (role){.name = descale_names[i],
                            .tensor = descales[i],
                            .view = &call->descale[i],
                            .slopes = true};
    }
    call->has_lse = lse != NULL;
    for (int i = 0; i < n; i++) {
        if (roles[i].lse && !lse && !grad)
            continue; /* the forward may skip the LSE */
        fa_status st = resolve(ctx, &roles[i]);
        if (st != FA_OK)
            return st;
    }

    const int64_t batch = q->shape[0], seq_q = q->shape[1], heads_q = q->shape[2];
    const int64_t head_dim = q->shape[3], heads_kv = k->shape[2];
    const fa_tensor *bt = desc->block_table;
    int64_t seq_k = k->shape[1];
    /* Paged: k and v are (num_pages, page_size, Hkv, D); the capacity is max_pages pages. */
    if (bt && !mul_ok(bt->shape[1], k->shape[1], &seq_k))
        return fa_fail(ctx, FA_ERROR_SIZE_OVERFLOW, "block_table: max_pages x page_size overflows");
    if (head_dim < 8 || head_dim > 256 || head_dim % 8)
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED_HEAD_DIM,
                       "head_dim is %lld; supported: multiples of 8 from 8 to 256",
                       (long long)head_dim);
    const bool fp8 = q->dtype == FA_DTYPE_E4M3;
    for (int i = 1; i < n; i++)
        if (!roles[i].lse && !roles[i].index && !roles[i].slopes && !roles[i].bias &&
            roles[i].tensor->dtype != q->dtype && !(fp8 && roles[i].view == &call->o))
            return fa_fail(ctx, FA_ERROR_DTYPE_MISMATCH, "%s.dtype is %s but q.dtype is %s",
                           roles[i].name, fa_dtype_name(roles[i].tensor->dtype),
                           fa_dtype_name(q->dtype));
    if (bt && (bt->shape[0] != batch || bt->shape[2] != 1 || bt->shape[3] != 1))
        return fa_fail(ctx, FA_ERROR_SHAPE_MISMATCH,
                       "block_table has shape (%lld, %lld, %lld, %lld); expected (%lld, max_pages, "
                       "1, 1)",
                       (long long)bt->shape[0], (long long)bt->shape[1], (long long)bt->shape[2],
                       (long long)bt->shape[3], (long long)batch);
    if (bt && batch > 0 && seq_k > 0 && k->shape[0] == 0)
        return fa_fail(ctx, FA_ERROR_SHAPE_MISMATCH,
                       "k and v hold no pages (k.shape[0] is 0) but block_table has %lld per "
                       "sequence",
                       (long long)bt->shape[1]);
    /* paged, k's batch dimension counts pages */
    if ((!bt && k->shape[0] != batch) || k->shape[3] != head_dim)
        return fa_fail(
            ctx, FA_ERROR_SHAPE_MISMATCH, "k has batch %lld and head_dim %lld; q has %lld and %lld",
            (long long)k->shape[0], (long long)k->shape[3], (long long)batch, (long long)head_dim);
    fa_status st;
    if ((st = check_same(ctx, &roles[1], &roles[2])) != FA_OK ||
        (st = check_same(ctx, &roles[0], &roles[3])) != FA_OK)
        return st;
    if (heads_q > 0 && (heads_kv == 0 || heads_q % heads_kv))
        return fa_fail(ctx, FA_ERROR_INVALID_GQA,
                       "q has %lld heads, k and v %lld: query heads must be a multiple",
                       (long long)heads_q, (long long)heads_kv);
    if (lse && (lse->shape[0] != batch || lse->shape[1] != seq_q || lse->shape[2] != heads_q))
        return fa_fail(ctx, FA_ERROR_SHAPE_MISMATCH,
                       "lse has shape (%lld, %lld, %lld, 1); expected (%lld, %lld, %lld, 1)",
                       (long long)lse->shape[0], (long long)lse->shape[1], (long long)lse->shape[2],
                       (long long)batch, (long long)seq_q, (long long)heads_q);
    const fa_tensor *sl = desc->seqlens_k;
    if (sl &&
        (sl->shape[0] != batch || sl->shape[1] != 1 || sl->shape[2] != 1 || sl->shape[3] != 1))
        return fa_fail(ctx, FA_ERROR_SHAPE_MISMATCH,
                       "seqlens_k has shape (%lld, %lld, %lld, %lld); expected (%lld, 1, 1, 1)",
                       (long long)sl->shape[0], (long long)sl->shape[1], (long long)sl->shape[2],
                       (long long)sl->shape[3], (long long)batch);
    /* Packed: q and k hold one batch entry; the sequences are the prefix sums' B. */
    const fa_tensor *cq = desc->cu_seqlens_q, *ck = desc->cu_seqlens_k;
    if (n_varlen && (batch != 1 || k->shape[0] != 1))
        return fa_fail(ctx, FA_ERROR_SHAPE_MISMATCH,
                       "q has batch %lld, k %lld; a packed batch (cu_seqlens_q) has 1, the "
                       "sequences packed along seq",
                       (long long)batch, (long long)k->shape[0]);
    for (int i = 0; i < 2 && n_varlen; i++) {
        const fa_tensor *c = i ? ck : cq;
        if (c->shape[0] < 1 || c->shape[0] != cq->shape[0] || c->shape[1] != 1 ||
            c->shape[2] != 1 || c->shape[3] != 1)
            return fa_fail(ctx, FA_ERROR_SHAPE_MISMATCH,
                           "%s has shape (%lld, %lld, %lld, %lld); expected (B + 1, 1, 1, 1), "
                           "the same B + 1 >= 1 for cu_seqlens_q and cu_seqlens_k",
                           i ? "cu_seqlens_k" : "cu_seqlens_q", (long long)c->shape[0],
                           (long long)c->shape[1], (long long)c->shape[2], (long long)c->shape[3]);
    }
    const int64_t sequences = n_varlen ? cq->shape[0] - 1 : batch;
    const fa_tensor *al = desc->alibi_slopes;
    if (al && ((al->shape[0] != 1 && al->shape[0] != sequences) || al->shape[1] != 1 ||
               al->shape[2] != heads_q || al->shape[3] != 1))
        return fa_fail(ctx, FA_ERROR_SHAPE_MISMATCH,
                       "alibi_slopes has shape (%lld, %lld, %lld, %lld); expected (1, 1, %lld, 1) "
                       "or (%lld, 1, %lld, 1): a slope per query head, or per batch entry and "
                       "query head",
                       (long long)al->shape[0], (long long)al->shape[1], (long long)al->shape[2],
                       (long long)al->shape[3], (long long)heads_q, (long long)sequences,
                       (long long)heads_q);
    for (int i = 0; i < 3; i++) {
        const fa_tensor *ds = descales[i];
        if (ds && ((ds->shape[0] != 1 && ds->shape[0] != sequences) || ds->shape[1] != 1 ||
                   (ds->shape[2] != 1 && ds->shape[2] != heads_kv) || ds->shape[3] != 1))
            return fa_fail(ctx, FA_ERROR_SHAPE_MISMATCH,
                           "%s has shape (%lld, %lld, %lld, %lld); expected (%lld or 1, 1, %lld "
                           "or 1, 1): a factor per batch entry and KV head, either broadcast",
                           descale_names[i], (long long)ds->shape[0], (long long)ds->shape[1],
                           (long long)ds->shape[2], (long long)ds->shape[3], (long long)sequences,
                           (long long)heads_kv);
    }
    const fa_tensor *bi = desc->bias;
    if (bi && ((bi->shape[0] != 1 && bi->shape[0] != batch) ||
               (bi->shape[1] != 1 && bi->shape[1] != seq_q) ||
               (bi->shape[2] != 1 && bi->shape[2] != heads_q) || bi->shape[3] != seq_k))
        return fa_fail(ctx, FA_ERROR_SHAPE_MISMATCH,
                       "bias has shape (%lld, %lld, %lld, %lld); expected (%lld or 1, %lld or 1, "
                       "%lld or 1, %lld): (batch, query, head, key), the key dimension in full",
                       (long long)bi->shape[0], (long long)bi->shape[1], (long long)bi->shape[2],
                       (long long)bi->shape[3], (long long)batch, (long long)seq_q,
                       (long long)heads_q, (long long)seq_k);
    const fa_tensor *kn = desc->k_new;
    if (n_new && (kn->shape[0] != batch || kn->shape[2] != heads_kv || kn->shape[3] != head_dim))
        return fa_fail(ctx, FA_ERROR_SHAPE_MISMATCH,
                       "k_new has shape (%lld, %lld, %lld, %lld); expected (%lld, S_new, %lld, "
                       "%lld), the batch of q and the heads and head_dim of k",
                       (long long)kn->shape[0], (long long)kn->shape[1], (long long)kn->shape[2],
                       (long long)kn->shape[3], (long long)batch, (long long)heads_kv,
                       (long long)head_dim);
    if (n_new && (st = check_same(ctx, &roles[n_new], &roles[n_new + 1])) != FA_OK)
        return st;
    if (grad && ((st = check_same(ctx, &roles[3], &roles[5])) != FA_OK ||
                 (st = check_same(ctx, &roles[0], &roles[6])) != FA_OK ||
                 (st = check_same(ctx, &roles[1], &roles[7])) != FA_OK ||
                 (st = check_same(ctx, &roles[2], &roles[8])) != FA_OK))
        return st;

    for (int i = 0; i < n; i++) {
        if (!roles[i].output || !roles[i].tensor)
            continue;
        for (int j = 0; j < n; j++)
            if (j != i && roles[j].tensor && overlap(&roles[i].bytes, &roles[j].bytes))
                return fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT,
                               "%s overlaps %s in the same buffer; outputs must not overlap",
                               roles[i].name, roles[j].name);
    }

    if (desc->num_splits < 0 || desc->num_splits > FA_MAX_SPLITS)
        return fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT, "num_splits %d is not in [0, %d]",
                       (int)desc->num_splits, FA_MAX_SPLITS);
    float scale = desc->scale != 0.0f ? desc->scale : 1.0f / sqrtf((float)head_dim);
    if (!isfinite(scale))
        return fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT, "scale %g is not finite", desc->scale);
    if ((st = check_window(ctx, &desc->window)) != FA_OK)
        return st;
    if (!isfinite(desc->softcap) || desc->softcap < 0.0f)
        return fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT,
                       "softcap %g is not a finite value >= 0 (0: off)", desc->softcap);

    call->dtype = q->dtype;
    call->o_dtype = o->dtype;
    for (int i = 0; i < 3; i++) { /* a dimension of 1 broadcasts */
        if (!descales[i])
            continue;
        call->descale[i].stride_b = descales[i]->shape[0] == 1 ? 0 : call->descale[i].stride_b;
        call->descale[i].stride_h = descales[i]->shape[2] == 1 ? 0 : call->descale[i].stride_h;
    }
    call->batch = batch;
    call->seq_q = seq_q;
    call->seq_k = seq_k;
    call->heads_q = heads_q;
    call->heads_kv = heads_kv;
    call->head_dim = head_dim;
    call->scale = scale;
    call->causal = desc->causal;
    call->deterministic = desc->deterministic;
    call->num_splits = desc->num_splits;
    resolve_window(&desc->window, call);
    call->softcap = desc->softcap > 0.0f ? desc->softcap : 0.0f;
    call->has_alibi = n_alibi > 0;
    call->has_bias = bi != NULL;
    if (bi) { /* a dimension of 1 broadcasts */
        call->bias_dtype = bi->dtype;
        call->bias.stride_b = bi->shape[0] == 1 ? 0 : call->bias.stride_b;
        call->bias.stride_s = bi->shape[1] == 1 ? 0 : call->bias.stride_s;
        call->bias.stride_h = bi->shape[2] == 1 ? 0 : call->bias.stride_h;
    }
    call->has_varlen = n_varlen > 0;
    call->varlen_batch = n_varlen ? sequences : 0;
    call->max_seqlen_q = desc->max_seqlen_q;
    call->max_seqlen_k = desc->max_seqlen_k;
    if (call->has_alibi && al->shape[0] == 1)
        call->alibi.stride_b = 0; /* one slope per head for every batch entry */
    if (bt) {
        call->page_size = k->shape[1];
        call->num_pages = k->shape[0];
    }
    /* S_new = 0, or rows of no bytes, writes nothing: the call is then a plain forward. */
    call->seq_new = n_new ? kn->shape[1] : 0;
    call->has_append = call->seq_new > 0 && batch > 0 && heads_kv > 0;
    return FA_OK;
}

static fa_byte_view byte_view(const role *r)
{
    fa_byte_view v = {
        (fa_buffer *)r->bytes.buffer, r->bytes.begin, r->bytes.end, {0}, r->tensor->dtype};
    memcpy(v.stride, r->bytes.stride, sizeof v.stride);
    return v;
}

void fa_merge_call_free(fa_merge_call *call)
{
    free(call->o_parts);
    free(call->lse_parts);
    call->o_parts = call->lse_parts = NULL;
}

fa_status fa_validate_merge(fa_context *ctx, int n, const fa_tensor *o_parts,
                            const fa_tensor *lse_parts, const fa_tensor *o, const fa_tensor *lse,
                            fa_merge_call *call)
{
    memset(call, 0, sizeof *call);
    if (ctx->lost)
        return fa_fail(ctx, FA_ERROR_CONTEXT_LOST, "the context lost its device earlier");
    if (n < 1 || n > FA_MAX_SPLITS)
        return fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT, "n is %d; from 1 to %d parts are merged", n,
                       FA_MAX_SPLITS);
    if (!o_parts || !lse_parts)
        return fa_fail(ctx, FA_ERROR_NULL_POINTER, "%s is NULL", o_parts ? "lse_parts" : "o_parts");
    const int count = 2 * n + 2;
    role *roles = calloc((size_t)count, sizeof *roles);
    fa_view *views = calloc((size_t)count, sizeof *views);
    char(*labels)[24] = calloc((size_t)count, sizeof *labels);
    call->o_parts = calloc((size_t)n, sizeof *call->o_parts);
    call->lse_parts = calloc((size_t)n, sizeof *call->lse_parts);
    fa_status st = FA_OK;
    if (!roles || !views || !labels || !call->o_parts || !call->lse_parts) {
        st = fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "cannot allocate the merge's %d views",
                     count);
        goto done;
    }
    /* roles: o, lse, then o_parts[i] and lse_parts[i] */
    roles[0] = (role){.name = "o", .tensor = o, .output = true, .view = &views[0]};
    roles[1] = (role){.name = "lse", .tensor = lse, .output = true, .lse = true, .view = &views[1]};
    for (int i = 0; i < n; i++) {
        snprintf(labels[2 + 2 * i], sizeof labels[0], "o_parts[%d]", i);
        snprintf(labels[3 + 2 * i], sizeof labels[0], "lse_parts[%d]", i);
        roles[2 + 2 * i] =
            (role){.name = labels[2 + 2 * i], .tensor = &o_parts[i], .view = &views[2 + 2 * i]};
        roles[3 + 2 * i] = (role){.name = labels[3 + 2 * i],
                                  .tensor = &lse_parts[i],
                                  .lse = true,
                                  .view = &views[3 + 2 * i]};
    }
    for (int i = 0; i < count && st == FA_OK; i++)
        if (i != 1 || lse)
            st = resolve(ctx, &roles[i]);
    for (int i = 2; i < count && st == FA_OK; i += 2) {
        if (o_parts[(i - 2) / 2].dtype != o->dtype)
            st = fa_fail(ctx, FA_ERROR_DTYPE_MISMATCH, "o_parts[%d].dtype is %s but o.dtype is %s",
                         (i - 2) / 2, fa_dtype_name(o_parts[(i - 2) / 2].dtype),
                         fa_dtype_name(o->dtype));
        else
            st = check_same(ctx, &roles[0], &roles[i]);
    }
    for (int i = 1; i < count && st == FA_OK; i += 2) { /* lse, then each lse_parts[i] */
        const fa_tensor *l = roles[i].tensor;
        if (l && (l->shape[0] != o->shape[0] || l->shape[1] != o->shape[1] ||
                  l->shape[2] != o->shape[2]))
            st = fa_fail(ctx, FA_ERROR_SHAPE_MISMATCH,
                         "%s has shape (%lld, %lld, %lld, 1); o has (%lld, %lld, %lld, D)",
                         roles[i].name, (long long)l->shape[0], (long long)l->shape[1],
                         (long long)l->shape[2], (long long)o->shape[0], (long long)o->shape[1],
                         (long long)o->shape[2]);
    }
    for (int i = 0; i < 2 && st == FA_OK; i++)
        for (int j = 0; j < count && st == FA_OK; j++)
            if (j != i && roles[i].tensor && roles[j].tensor &&
                overlap(&roles[i].bytes, &roles[j].bytes))
                st = fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT,
                             "%s overlaps %s in the same buffer; outputs must not overlap",
                             roles[i].name, roles[j].name);
    if (st == FA_OK) {
        call->n = n;
        memcpy(call->shape, o->shape, sizeof call->shape);
        call->o = byte_view(&roles[0]);
        if (lse)
            call->lse = byte_view(&roles[1]);
        for (int i = 0; i < n; i++) {
            call->o_parts[i] = byte_view(&roles[2 + 2 * i]);
            call->lse_parts[i] = byte_view(&roles[3 + 2 * i]);
        }
    }
done:
    free(roles);
    free(views);
    free(labels);
    if (st != FA_OK)
        fa_merge_call_free(call);
    return st;
}
