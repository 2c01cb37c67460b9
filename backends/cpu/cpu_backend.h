// SPDX-License-Identifier: MIT
/* The CPU backend: its interface table (referenced by runtime/registry.c) and the entry points
 * its files share. */
#ifndef FA_CPU_BACKEND_H
#define FA_CPU_BACKEND_H

#include "fa_internal.h"

extern const fa_backend_iface fa_cpu_backend_iface;

/* Per-context state: the number of OpenMP threads every call uses. */
typedef struct fa_cpu_state {
    int threads;
} fa_cpu_state;

/* Both run to completion before returning (the CPU backend is synchronous). */
fa_status fa_cpu_forward(fa_context *ctx, const fa_attention_call *call);
fa_status fa_cpu_backward(fa_context *ctx, const fa_attention_call *call);

#endif
