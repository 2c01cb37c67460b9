// SPDX-License-Identifier: MIT
/* The attention entry points: validate, skip empty work, ask the backend. */
#include "fa_validate.h"

#include <stdlib.h>

/* Every seqlens_k value in [0, seq_k], read back through the backend (waiting for work that may
 * write them). Kernels clamp them too, so a value changed later never reads past the cache. */
static fa_status check_seqlens(fa_context *ctx, const fa_attention_call *call)
{
    const fa_view *v = &call->seqlens_k;
    const uint64_t count = (uint64_t)(call->batch - 1) * (uint64_t)v->stride_b + 1;
    int32_t *lens = malloc(count * sizeof *lens);
    if (!lens)
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "seqlens_k: no memory to check it");
    fa_status st = fa_backend_enter(ctx);
    if (st == FA_OK)
        st = fa_backend_leave(ctx, ctx->backend->buffer_read(ctx, v->buffer, v->offset * 4, lens,
                                                             count * sizeof *lens));
    for (int64_t b = 0; st == FA_OK && b < call->batch; b++) {
        const int32_t n = lens[(uint64_t)b * (uint64_t)v->stride_b];
        if (n < 0 || n > call->seq_k)
            st = fa_fail(ctx, FA_ERROR_OUT_OF_BOUNDS,
                         "seqlens_k[%lld] is %d; the cache holds %lld keys (k.shape[1])",
                         (long long)b, (int)n, (long long)call->seq_k);
    }
    free(lens);
    return st;
}

static fa_status dispatch(fa_context *ctx, const fa_attention_call *call, bool backward)
{
    const fa_backend_iface *be = ctx->backend;
    if (call->has_seqlens_k) {
        if (!be->seqlens_k)
            return fa_fail(ctx, FA_ERROR_UNSUPPORTED,
                           "seqlens_k: the %s backend does not take per-sequence lengths yet",
                           be->name);
        fa_status st = check_seqlens(ctx, call);
        if (st != FA_OK)
            return st;
    }
    if (be->check_call) {
        fa_status st = be->check_call(ctx, call, backward);
        if (st != FA_OK)
            return st;
    }
    fa_status st = fa_backend_enter(ctx);
    if (st != FA_OK)
        return st;
    return fa_backend_leave(ctx, backward ? be->backward(ctx, call) : be->forward(ctx, call));
}

/* Nothing to write: no batch, no heads, or (forward only) no queries. A backward with queries
 * absent but keys present still runs, since dK and dV must be overwritten with zeros. */
static bool empty(const fa_attention_call *call, bool backward)
{
    if (call->batch == 0 || call->heads_q == 0)
        return true;
    return backward ? call->seq_q == 0 && call->seq_k == 0 : call->seq_q == 0;
}

fa_status fa_attention_forward(fa_context *ctx, const fa_attention_desc *desc, const fa_tensor *q,
                               const fa_tensor *k, const fa_tensor *v, const fa_tensor *o,
                               const fa_tensor *lse)
{
    if (!ctx)
        return FA_ERROR_NULL_POINTER;
    fa_attention_call call;
    fa_status st = fa_validate_attention(ctx, desc, q, k, v, o, lse, NULL, &call);
    if (st != FA_OK || empty(&call, false))
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
