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

#endif
