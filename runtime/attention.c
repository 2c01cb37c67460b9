// SPDX-License-Identifier: MIT
/* The attention entry points: validate, skip empty work, append to the KV cache where asked,
 * ask the backend. */
#include "fa_append.h"
#include "fa_validate.h"
#include "fa_varlen.h"

#include <stdio.h>
#include <stdlib.h>

/* The `count` int32 values of an index view from its offset, read back through the backend
 * (waiting for work that may write them) into a new host array; NULL: *st says why. */
static int32_t *read_index(fa_context *ctx, const fa_view *v, uint64_t count, const char *name,
                           fa_status *st)
{
    int32_t *host = malloc(count * sizeof *host);
    if (!host) {
        *st = fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "%s: no memory to check it", name);
        return NULL;
    }
    *st = fa_backend_enter(ctx);
    if (*st == FA_OK)
        *st = fa_backend_leave(ctx, ctx->backend->buffer_read(ctx, v->buffer, v->offset * 4, host,
                                                              count * sizeof *host));
    if (*st != FA_OK) {
        free(host);
        return NULL;
    }
    return host;
}

/* Every seqlens_k value in [0, seq_k] (with an append, seqlens_k + S_new in [0, seq_k]), and
 * every block_table entry that those keys cover (all of them without seqlens_k) in
 * [0, num_pages). Kernels clamp the lengths too, so a value changed later never reads past the
 * cache. The host copies are left in *lens and *table (NULL where the call has none; the caller
 * frees them), for the append to place its rows. */
static fa_status check_indices(fa_context *ctx, const fa_attention_call *call, int32_t **lens_out,
                               int32_t **table_out)
{
    fa_status st = FA_OK;
    int32_t *lens = NULL, *table = NULL;
    const fa_view *sl = &call->seqlens_k, *bt = &call->block_table;
    const uint64_t last_b = (uint64_t)(call->batch - 1);
    const int64_t added = call->has_append ? call->seq_new : 0;
    if (call->has_seqlens_k)
        lens = read_index(ctx, sl, last_b * (uint64_t)sl->stride_b + 1, "seqlens_k", &st);
    for (int64_t b = 0; lens && st == FA_OK && b < call->batch; b++) {
        const int32_t n = lens[(uint64_t)b * (uint64_t)sl->stride_b];
        char adds[64] = "";
        if (added)
            snprintf(adds, sizeof adds, " and k_new adds %lld rows", (long long)added);
        if (n < 0 || n + added > call->seq_k || n + added > INT32_MAX)
            st = fa_fail(ctx, FA_ERROR_OUT_OF_BOUNDS,
                         "seqlens_k[%lld] is %d%s; the cache holds %lld keys (k.shape[1]%s)",
                         (long long)b, (int)n, adds, (long long)call->seq_k,
                         call->has_block_table ? " x block_table.shape[1]" : "");
    }
    const int64_t pages = call->page_size > 0 ? call->seq_k / call->page_size : 0;
    if (st == FA_OK && call->has_block_table && pages > 0)
        table = read_index(ctx, bt,
                           last_b * (uint64_t)bt->stride_b +
                               (uint64_t)(pages - 1) * (uint64_t)bt->stride_s + 1,
                           "block_table", &st);
    for (int64_t b = 0; table && st == FA_OK && b < call->batch; b++) {
        const int64_t n = lens ? lens[(uint64_t)b * (uint64_t)sl->stride_b] + added : call->seq_k;
        const int64_t used = (n + call->page_size - 1) / call->page_size;
        for (int64_t p = 0; st == FA_OK && p < used; p++) {
            const int32_t x =
                table[(uint64_t)b * (uint64_t)bt->stride_b + (uint64_t)p * (uint64_t)bt->stride_s];
            if (x < 0 || x >= call->num_pages)
                st = fa_fail(ctx, FA_ERROR_OUT_OF_BOUNDS,
                             "block_table[%lld][%lld] is %d; k and v hold %lld pages", (long long)b,
                             (long long)p, (int)x, (long long)call->num_pages);
        }
    }
    if (st != FA_OK) {
        free(lens);
        free(table);
        lens = table = NULL;
    }
    *lens_out = lens;
    *table_out = table;
    return st;
}

/* A packed batch's prefix sums: each from 0, never decreasing, ending inside the packed
 * tensors (cu_seqlens_q[B] <= seq_q, cu_seqlens_k[B] <= seq_k), and no sequence longer than
 * max_seqlen_q / max_seqlen_k where those are set. The host copies are left in cu[0] (q) and
 * cu[1] (k), which the caller frees (NULL after a failure); the call runs from them
 * (fa_varlen_run), so a value changed on the device later changes nothing. */
static fa_status check_varlen(fa_context *ctx, const fa_attention_call *call, int32_t *cu_out[2])
{
    const fa_view *views[2] = {&call->cu_seqlens_q, &call->cu_seqlens_k};
    const char *names[2] = {"cu_seqlens_q", "cu_seqlens_k"};
    const int64_t totals[2] = {call->seq_q, call->seq_k};
    const int64_t bounds[2] = {call->max_seqlen_q, call->max_seqlen_k};
    const int64_t n = call->varlen_batch + 1;
    fa_status st = FA_OK;
    for (int i = 0; i < 2 && st == FA_OK; i++) {
        const fa_view *v = views[i];
        int32_t *cu = cu_out[i] =
            read_index(ctx, v, (uint64_t)(n - 1) * (uint64_t)v->stride_b + 1, names[i], &st);
        if (!cu)
            break;
        const int32_t first = cu[0];
        if (first != 0)
            st = fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT, "%s[0] is %d; the prefix sums start at 0",
                         names[i], (int)first);
        for (int64_t b = 1; b < n && st == FA_OK; b++) {
            const int64_t lo = cu[(uint64_t)(b - 1) * (uint64_t)v->stride_b];
            const int64_t hi = cu[(uint64_t)b * (uint64_t)v->stride_b];
            if (hi < lo)
                st = fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT,
                             "%s[%lld] is %lld, below %s[%lld] = %lld; the prefix sums never "
                             "decrease",
                             names[i], (long long)b, (long long)hi, names[i], (long long)(b - 1),
                             (long long)lo);
            else if (hi > totals[i])
                st =
                    fa_fail(ctx, FA_ERROR_OUT_OF_BOUNDS,
                            "%s[%lld] is %lld; the packed %s holds %lld rows", names[i],
                            (long long)b, (long long)hi, i ? "k and v" : "q", (long long)totals[i]);
            else if (bounds[i] > 0 && hi - lo > bounds[i])
                st = fa_fail(ctx, FA_ERROR_OUT_OF_BOUNDS,
                             "sequence %lld has %lld rows in %s; %s is %lld", (long long)(b - 1),
                             (long long)(hi - lo), names[i], i ? "max_seqlen_k" : "max_seqlen_q",
                             (long long)bounds[i]);
        }
    }
    if (st != FA_OK) {
        free(cu_out[0]);
        free(cu_out[1]);
        cu_out[0] = cu_out[1] = NULL;
    }
    return st;
}

/* Nothing to attend to: no batch, no heads, or (forward only) no queries. A backward with
 * queries absent but keys present still runs, since dK and dV must be overwritten with zeros. */
static bool empty(const fa_attention_call *call, bool backward)
{
    if (call->batch == 0 || call->heads_q == 0)
        return true;
    return backward ? call->seq_q == 0 && call->seq_k == 0 : call->seq_q == 0;
}

/* Checks what only the backend or the index values can tell, then appends (when the call has
 * rows to append) and attends (when it is not empty); nothing is written before every check
 * has passed. */
static fa_status dispatch(fa_context *ctx, fa_attention_call *call, bool backward)
{
    const fa_backend_iface *be = ctx->backend;
    if (call->has_seqlens_k && !be->seqlens_k)
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED,
                       "seqlens_k: the %s backend does not take per-sequence lengths yet",
                       be->name);
    if (call->has_block_table && !be->paged_kv)
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED,
                       "block_table: the %s backend does not take a paged KV cache yet", be->name);
    if (call->window && !be->window)
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED,
                       "window: the %s backend does not take a sliding window yet", be->name);
    if (call->softcap != 0.0f && !be->softcap)
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED,
                       "softcap: the %s backend does not take logit softcapping yet", be->name);
    if (call->has_alibi && !be->alibi)
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED,
                       "alibi_slopes: the %s backend does not take ALiBi yet", be->name);
    if (call->has_bias && !be->bias)
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED,
                       "bias: the %s backend does not take an additive bias yet", be->name);
    if (call->dtype == FA_DTYPE_E4M3 && !be->fp8)
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED_DTYPE,
                       "q.dtype is e4m3: the %s backend has no FP8 forward yet", be->name);
    if (call->has_append && !be->copy_regions)
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED,
                       "k_new: the %s backend cannot append to a KV cache", be->name);
    fa_status st = FA_OK;
    int32_t *lens = NULL, *table = NULL, *cu[2] = {NULL, NULL};
    fa_append_plan plan = {0};
    const bool attend = !empty(call, backward);
    if ((call->has_seqlens_k || call->has_block_table) &&
        (call->has_append || !be->index_check_on_device))
        st = check_indices(ctx, call, &lens, &table);
    if (st == FA_OK && call->has_varlen)
        st = check_varlen(ctx, call, cu);
    if (st == FA_OK && call->has_append)
        st = fa_append_prepare(ctx, call, lens, table, &plan);
    if (st == FA_OK && attend && call->has_varlen) /* checks each sequence's call, then runs */
        st = fa_varlen_run(ctx, call, cu[0], cu[1], backward);
    else if (st == FA_OK && attend && be->check_call)
        st = be->check_call(ctx, call, backward);
    if (st == FA_OK && call->has_append)
        st = fa_append_commit(ctx, call, &plan);
    if (st == FA_OK && attend && !call->has_varlen) {
        st = fa_backend_enter(ctx);
        if (st == FA_OK)
            st = fa_backend_leave(ctx, backward ? be->backward(ctx, call) : be->forward(ctx, call));
    }
    free(lens);
    free(table);
    free(cu[0]);
    free(cu[1]);
    fa_append_plan_free(&plan);
    return st;
}

fa_status fa_attention_forward(fa_context *ctx, const fa_attention_desc *desc, const fa_tensor *q,
                               const fa_tensor *k, const fa_tensor *v, const fa_tensor *o,
                               const fa_tensor *lse)
{
    if (!ctx)
        return FA_ERROR_NULL_POINTER;
    fa_attention_call call;
    fa_status st = fa_validate_attention(ctx, desc, q, k, v, o, lse, NULL, &call);
    if (st != FA_OK || (empty(&call, false) && !call.has_append))
        return st;
    return dispatch(ctx, &call, false);
}

fa_status fa_attention_backward(fa_context *ctx, const fa_attention_desc *desc, const fa_tensor *q,
                                const fa_tensor *k, const fa_tensor *v, const fa_tensor *o,
                                const fa_tensor *d_o, const fa_tensor *lse, const fa_tensor *d_q,
                                const fa_tensor *d_k, const fa_tensor *d_v)
{
    if (!ctx)
        return FA_ERROR_NULL_POINTER;
    const fa_backward_tensors grad = {d_o, d_q, d_k, d_v};
    fa_attention_call call;
    fa_status st = fa_validate_attention(ctx, desc, q, k, v, o, lse, &grad, &call);
    if (st != FA_OK || empty(&call, true))
        return st;
    return dispatch(ctx, &call, true);
}
