// SPDX-License-Identifier: MIT
/* Packed variable-length batches (fa_attention_desc.cu_seqlens_q/k; runtime/varlen.c). */
#ifndef FA_VARLEN_H
#define FA_VARLEN_H

#include "fa_internal.h"

/* Runs a validated call with has_varlen through the backend: in one call where the backend's
 * varlen_takes says so, else sequence by sequence, each as a call of its own over its rows of
 * the packed tensors (fa_call_sequence); then the query rows no sequence covers as a sequence
 * without keys (O = 0, LSE = -inf, dQ = 0) and, in the backward, the keys no sequence covers as
 * one without queries (dK = dV = 0). cu_q and cu_k are host copies of the prefix sums (element
 * b at b * the view's stride_b), already checked. Every part passes the backend's check_call
 * before the first is issued, so a refusal writes nothing. */
fa_status fa_varlen_run(fa_context *ctx, const fa_attention_call *call, const int32_t *cu_q,
                        const int32_t *cu_k, bool backward);

#endif
