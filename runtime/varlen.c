// SPDX-License-Identifier: MIT
/* A packed variable-length batch (fa_varlen.h): as one call where the backend takes it so
 * (varlen_takes: CUDA's tensor-core kernels), else one backend call per sequence, their kernels
 * queued one after another on the context's queue (so the call stays asynchronous, at the cost
 * of one launch or a few per sequence). */
#include "fa_varlen.h"

#include <stdlib.h>

/* The parts of the call that have work (see fa_varlen.h), into parts (room for B + 2): the
 * whole packed call where the backend takes it so, else each sequence; then the rest. */
static size_t split(fa_context *ctx, const fa_attention_call *call, const int32_t *cu_q,
                    const int32_t *cu_k, bool backward, fa_attention_call *parts)
{
    const fa_backend_iface *be = ctx->backend;
    const int64_t n = call->varlen_batch;
    const uint64_t sq_b = (uint64_t)call->cu_seqlens_q.stride_b;
    const uint64_t sk_b = (uint64_t)call->cu_seqlens_k.stride_b;
    parts[0] = *call;
    parts[0].cu_q_host = cu_q;
    parts[0].cu_k_host = cu_k;
    const bool whole = n > 0 && be->varlen_takes && be->varlen_takes(ctx, &parts[0], backward);
    size_t count = whole ? 1 : 0;
    for (int64_t b = 0; b < n && !whole; b++) {
        const int64_t q0 = cu_q[(uint64_t)b * sq_b], k0 = cu_k[(uint64_t)b * sk_b];
        const int64_t sq = cu_q[(uint64_t)(b + 1) * sq_b] - q0;
        const int64_t sk = cu_k[(uint64_t)(b + 1) * sk_b] - k0;
        /* the forward writes nothing without queries; the backward zeroes dK, dV without them */
        if (sq > 0 || (backward && sk > 0))
            parts[count++] = fa_call_sequence(call, b, q0, sq, k0, sk);
    }
    const int64_t q_end = cu_q[(uint64_t)n * sq_b], k_end = cu_k[(uint64_t)n * sk_b];
    if (q_end < call->seq_q) {
        parts[count] = fa_call_sequence(call, 0, q_end, call->seq_q - q_end, 0, 0);
        parts[count++].has_alibi = false;
    }
    if (backward && k_end < call->seq_k) {
        parts[count] = fa_call_sequence(call, 0, 0, 0, k_end, call->seq_k - k_end);
        parts[count++].has_alibi = false;
    }
    return count;
}

fa_status fa_varlen_run(fa_context *ctx, const fa_attention_call *call, const int32_t *cu_q,
                        const int32_t *cu_k, bool backward)
{
    const fa_backend_iface *be = ctx->backend;
    fa_attention_call *parts = malloc(((size_t)call->varlen_batch + 2) * sizeof *parts);
    if (!parts)
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY,
                       "cu_seqlens_q: no memory for %lld "
                       "sequences",
                       (long long)call->varlen_batch);
    const size_t count = split(ctx, call, cu_q, cu_k, backward, parts);
    fa_status st = FA_OK;
    for (size_t i = 0; i < count && st == FA_OK && be->check_call; i++)
        st = be->check_call(ctx, &parts[i], backward);
    for (size_t i = 0; i < count && st == FA_OK; i++) {
        st = fa_backend_enter(ctx);
        if (st == FA_OK)
            st = fa_backend_leave(ctx, backward ? be->backward(ctx, &parts[i])
                                                : be->forward(ctx, &parts[i]));
    }
    free(parts);
    return st;
}
