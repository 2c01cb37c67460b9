// SPDX-License-Identifier: MIT
/* Packed variable-length batches on the CPU: each sequence runs as a call of its own over its
 * rows of the packed tensors (fa_call_sequence), through the same forward and backward as any
 * call. The rows no sequence covers are written as a sequence with no keys (O = 0, LSE = -inf,
 * dQ = 0) and keys no sequence covers as one with no queries (dK = dV = 0). */
#include "cpu_backend.h"

static int64_t prefix(const fa_view *v, int64_t b)
{
    const int32_t *cu = v->buffer;
    return cu[v->offset + (uint64_t)b * (uint64_t)v->stride_b];
}

static fa_status run(fa_context *ctx, const fa_attention_call *s, bool backward)
{
    if (backward)
        return s->seq_q == 0 && s->seq_k == 0 ? FA_OK : fa_cpu_backward(ctx, s);
    return s->seq_q == 0 ? FA_OK : fa_cpu_forward(ctx, s);
}

fa_status fa_cpu_varlen(fa_context *ctx, const fa_attention_call *call, bool backward)
{
    fa_status st = FA_OK;
    const int64_t n = call->varlen_batch;
    for (int64_t b = 0; b < n && st == FA_OK; b++) {
        const int64_t q0 = prefix(&call->cu_seqlens_q, b), k0 = prefix(&call->cu_seqlens_k, b);
        const int64_t sq = prefix(&call->cu_seqlens_q, b + 1) - q0;
        const int64_t sk = prefix(&call->cu_seqlens_k, b + 1) - k0;
        const fa_attention_call s = fa_call_sequence(call, b, q0, sq, k0, sk);
        st = run(ctx, &s, backward);
    }
    const int64_t q_end = prefix(&call->cu_seqlens_q, n), k_end = prefix(&call->cu_seqlens_k, n);
    fa_attention_call rest = fa_call_sequence(call, 0, q_end, call->seq_q - q_end, 0, 0);
    rest.has_alibi = false;
    if (st == FA_OK)
        st = run(ctx, &rest, backward);
    rest = fa_call_sequence(call, 0, 0, 0, k_end, call->seq_k - k_end);
    rest.has_alibi = false;
    if (st == FA_OK && backward)
        st = run(ctx, &rest, backward);
    return st;
}
