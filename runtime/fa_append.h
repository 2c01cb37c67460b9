// SPDX-License-Identifier: MIT
/* The KV-cache append of fa_attention_forward (fa_attention_desc.k_new, v_new;
 * runtime/append.c). */
#ifndef FA_APPEND_H
#define FA_APPEND_H

#include "fa_internal.h"

/* One append, worked out on the host: the byte ranges to copy from k_new into k and from v_new
 * into v, and the lengths after the append (batch values). */
typedef struct fa_append_plan {
    fa_copy_region *k, *v;
    size_t n_k, n_v;
    int32_t *lens;
} fa_append_plan;

/* Plans the append of a validated call with has_append, from the host copies of its seqlens_k
 * (lens, indexed as the view's stride_b says) and, paged, of its block table (table, indexed by
 * the view's strides), whose values the caller checked: every new position within the capacity
 * and every page it lands on in [0, num_pages). Points call->seqlens_k at the context's buffer
 * of lengths, which fa_append_commit fills. Writes nothing the caller can see. */
fa_status fa_append_prepare(fa_context *ctx, fa_attention_call *call, const int32_t *lens,
                            const int32_t *table, fa_append_plan *plan);
/* Writes the lengths after the append, then queues the copies of k_new and v_new. */
fa_status fa_append_commit(fa_context *ctx, const fa_attention_call *call,
                           const fa_append_plan *plan);
void fa_append_plan_free(fa_append_plan *plan);
/* Frees the context's buffer of lengths (fa_context_destroy, after its buffers). */
void fa_append_release(fa_context *ctx);

#endif
