// SPDX-License-Identifier: MIT
/* Every host allocation of the runtime and the CPU backend failing in turn: the call that meets it
 * returns FA_ERROR_OUT_OF_HOST_MEMORY, the context stays usable or is cleanly absent, and nothing
 * leaks (the ASan preset's leak checker runs over this suite). The library's objects are linked
 * into this program with the allocator wrapped (-Wl,--wrap=...; tests/CMakeLists.txt), so that
 * the N-th allocation after arm(N) returns NULL. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "flashattn.h"

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__real_aligned_alloc(size_t alignment, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
void *__wrap_aligned_alloc(size_t alignment, size_t size);

static long fail_at, allocations; /* fail_at 0: not counting; -1: counting, never failing */
static bool failed;

static bool fail_now(void)
{
    if (fail_at == 0 || ++allocations != fail_at)
        return false;
    failed = true;
    return true;
}

void *__wrap_malloc(size_t size)
{
    return fail_now() ? NULL : __real_malloc(size);
}
void *__wrap_calloc(size_t n, size_t size)
{
    return fail_now() ? NULL : __real_calloc(n, size);
}
void *__wrap_realloc(void *p, size_t size)
{
    return fail_now() ? NULL : __real_realloc(p, size);
}
void *__wrap_aligned_alloc(size_t alignment, size_t size)
{
    return fail_now() ? NULL : __real_aligned_alloc(alignment, size);
}

static void arm(long n)
{
    fail_at = n;
    allocations = 0;
    failed = false;
}

/* One step's status: FA_OK, or OUT_OF_HOST_MEMORY exactly when the step met the failure. */
static bool step(fa_status st, const char *what, long n)
{
    const bool met = failed;
    failed = false;
    if (met)
        cr_expect_eq(st, FA_ERROR_OUT_OF_HOST_MEMORY, "allocation %ld failed in %s: %s", n, what,
                     fa_status_name(st));
    else
        cr_expect_eq(st, FA_OK, "%s gave %s with no allocation failing (allocation %ld armed)",
                     what, fa_status_name(st), n);
    return st == FA_OK;
}

enum { B = 1, S = 33, H = 2, D = 16 };

/* Context, buffers, forward, backward, read-back: stops at the first failure, then destroys. */
static long run_sequence(long n)
{
    static float host[B * S * H * D];
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        host[i] = (float)(i % 13) / 13.0f - 0.5f;
    const size_t bytes = sizeof host, lse_bytes = B * H * S * sizeof(float);
    arm(n);
    fa_context *ctx = NULL;
    fa_buffer *b[9] = {NULL};
    bool ok = step(fa_context_create(
                       &(fa_context_desc){.backend = FA_BACKEND_CPU, .cpu = {.threads = 2}}, &ctx),
                   "fa_context_create", n);
    for (int i = 0; ok && i < 9; i++)
        ok = step(fa_buffer_create(ctx,
                                   &(fa_buffer_desc){.size = i == 4 ? lse_bytes : bytes,
                                                     .data = i < 3 || i == 5 ? host : NULL},
                                   &b[i]),
                  "fa_buffer_create", n);
    fa_tensor t[9];
    for (int i = 0; ok && i < 9; i++)
        t[i] =
            i == 4 ? fa_tensor_lse(b[i], B, H, S) : fa_tensor_bshd(b[i], FA_DTYPE_F32, B, S, H, D);
    const fa_attention_desc desc = {.causal = true};
    if (ok)
        ok = step(fa_attention_forward(ctx, &desc, &t[0], &t[1], &t[2], &t[3], &t[4]),
                  "fa_attention_forward", n);
    if (ok)
        ok = step(fa_attention_backward(ctx, &desc, &t[0], &t[1], &t[2], &t[3], &t[5], &t[4], &t[6],
                                        &t[7], &t[8]),
                  "fa_attention_backward", n);
    if (ok)
        step(fa_buffer_read(b[6], 0, host, bytes), "fa_buffer_read", n);
    fa_buffer_destroy(b[0]);
    fa_context_destroy(ctx); /* frees the other buffers */
    const long made = allocations;
    arm(0);
    return made;
}

Test(alloc_failure, each_allocation_failing_gives_out_of_host_memory)
{
    /* every backend probed first, unarmed: the probes' allocations are not the CPU path's */
    for (int be = FA_BACKEND_CUDA; be <= FA_BACKEND_CPU; be++) {
        fa_backend_info info;
        fa_backend_query((fa_backend)be, &info);
    }
    const long total = run_sequence(-1); /* counts, fails nothing */
    cr_assert_gt(total, 5, "the sequence made %ld allocations", total);
    cr_log_info("the sequence makes %ld host allocations", total);
    for (long n = 1; n <= total; n++)
        run_sequence(n);
    /* nothing fails past the last allocation */
    run_sequence(total + 1);
}
