// SPDX-License-Identifier: MIT
/* The attention entry points: validate, skip empty work, ask the backend. */
#include "fa_validate.h"

static fa_status dispatch(fa_context *ctx, const fa_attention_call *call, bool backward)
{
    const fa_backend_iface *be = ctx->backend;
    if (call->has_seqlens_k && !be->seqlens_k)
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED,
                       "seqlens_k: the %s backend does not take per-sequence lengths yet "
                       "(the CPU backend does)",
                       be->name);
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
