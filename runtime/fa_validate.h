// SPDX-License-Identifier: MIT
/* Validation of attention calls (runtime/validate.c). */
#ifndef FA_VALIDATE_H
#define FA_VALIDATE_H

#include "fa_internal.h"

typedef struct fa_backward_tensors {
    const fa_tensor *d_o, *d_q, *d_k, *d_v;
} fa_backward_tensors;

/* Checks every pointer, dtype, shape, stride, bound and overlap of one call and fills `call`.
 * `grad` is NULL for the forward. Returns the first failure, recorded in ctx. */
fa_status fa_validate_attention(fa_context *ctx, const fa_attention_desc *desc, const fa_tensor *q,
                                const fa_tensor *k, const fa_tensor *v, const fa_tensor *o,
                                const fa_tensor *lse, const fa_backward_tensors *grad,
                                fa_attention_call *call);

/* A validated tensor as bytes of its buffer (the host-side merge works on these). */
typedef struct fa_byte_view {
    fa_buffer *buffer;
    uint64_t begin, end; /* bytes; begin == end for an empty tensor */
    int64_t stride[4];   /* bytes */
    fa_dtype dtype;
} fa_byte_view;

/* One validated fa_attention_merge: n parts of shape (B, Sq, H, D); lse.buffer NULL when the
 * caller wants no LSE. The arrays hold n views each (freed with fa_merge_call_free). */
typedef struct fa_merge_call {
    int n;
    int64_t shape[4];
    fa_byte_view o, lse;
    fa_byte_view *o_parts, *lse_parts;
} fa_merge_call;

fa_status fa_validate_merge(fa_context *ctx, int n, const fa_tensor *o_parts,
                            const fa_tensor *lse_parts, const fa_tensor *o, const fa_tensor *lse,
                            fa_merge_call *call);
void fa_merge_call_free(fa_merge_call *call);

#endif
