// SPDX-License-Identifier: MIT
/* A device loss latches the context on every backend: with FA_TEST_DEVICE_LOSS=N the N-th call
 * into the backend reports FA_ERROR_DEVICE_LOST, and every later call must fail with
 * FA_ERROR_CONTEXT_LOST; destroying the context afterwards still frees everything (the ASan
 * preset runs this suite too). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>

#include "flashattn.h"

enum { B = 1, S = 40, H = 2, D = 16, STEPS = 9 };

/* One sequence of API calls, the statuses in st; it calls into the backend CALLS times (buffer
 * creation with data: allocate and write). */
enum { CALLS = 12 };
static void run_sequence(fa_context *ctx, fa_status st[STEPS])
{
    static float host[B * S * H * D];
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        host[i] = (float)((i * 7919) % 97) / 97.0f - 0.5f;
    const size_t bytes = sizeof host, lse_bytes = B * H * S * sizeof(float);
    fa_buffer *q = NULL, *k = NULL, *v = NULL, *o = NULL, *lse = NULL;
    st[0] = fa_buffer_create(ctx, &(fa_buffer_desc){.size = bytes, .data = host},
                             &q); /* alloc + write */
    st[1] = fa_buffer_create(ctx, &(fa_buffer_desc){.size = bytes, .data = host}, &k);
    st[2] = fa_buffer_create(ctx, &(fa_buffer_desc){.size = bytes, .data = host}, &v);
    st[3] = fa_buffer_create(ctx, &(fa_buffer_desc){.size = bytes}, &o);
    st[4] = fa_buffer_create(ctx, &(fa_buffer_desc){.size = lse_bytes}, &lse);
    const fa_tensor tq = fa_tensor_bshd(q, FA_DTYPE_F32, B, S, H, D);
    const fa_tensor tk = fa_tensor_bshd(k, FA_DTYPE_F32, B, S, H, D);
    const fa_tensor tv = fa_tensor_bshd(v, FA_DTYPE_F32, B, S, H, D);
    const fa_tensor to = fa_tensor_bshd(o, FA_DTYPE_F32, B, S, H, D);
    const fa_tensor tl = fa_tensor_lse(lse, B, H, S);
    st[5] = fa_attention_forward(ctx, &(fa_attention_desc){0}, &tq, &tk, &tv, &to, &tl);
    st[6] = fa_context_synchronize(ctx);
    /* reads and writes need a buffer: the first one created, if any (else the steps are not
     * run and count as what they would have to be, CONTEXT_LOST) */
    fa_buffer *any = q ? q : k ? k : v ? v : o ? o : lse;
    st[7] = any ? fa_buffer_read(any, 0, host, 64) : FA_ERROR_CONTEXT_LOST;
    st[8] = any ? fa_buffer_write(any, 0, host, 64) : FA_ERROR_CONTEXT_LOST;
    /* buffers are left to fa_context_destroy */
}

static struct criterion_test_params every_backend(void)
{
    static fa_backend all[] = {FA_BACKEND_CUDA, FA_BACKEND_VULKAN, FA_BACKEND_OPENCL,
                               FA_BACKEND_CPU};
    return cr_make_param_array(fa_backend, all, sizeof all / sizeof all[0]);
}

ParameterizedTestParameters(device_loss, every_later_call_fails_with_context_lost)
{
    return every_backend();
}

ParameterizedTest(fa_backend *backend, device_loss, every_later_call_fails_with_context_lost)
{
    fa_backend_info info;
    cr_assert_eq(fa_backend_query(*backend, &info), FA_OK);
    if (!info.available)
        cr_skip_test("%s unavailable: %s", info.name, info.reason);
    /* no loss (0), then the loss at each of the sequence's backend calls in turn */
    for (int at = 0; at <= CALLS; at++) {
        char value[16];
        snprintf(value, sizeof value, "%d", at);
        setenv("FA_TEST_DEVICE_LOSS", value, 1);
        fa_context *ctx = NULL;
        cr_assert_eq(fa_context_create(&(fa_context_desc){.backend = *backend}, &ctx), FA_OK);
        fa_status st[STEPS];
        run_sequence(ctx, st);
        int first = -1;
        for (int i = 0; i < STEPS; i++) {
            if (first < 0 && st[i] != FA_OK) {
                first = i;
                cr_expect_eq(st[i], FA_ERROR_DEVICE_LOST, "%s, loss at call %d: step %d gave %s",
                             info.name, at, i, fa_status_name(st[i]));
            } else if (first >= 0) {
                cr_expect_eq(st[i], FA_ERROR_CONTEXT_LOST,
                             "%s, loss at call %d: step %d after the loss gave %s", info.name, at,
                             i, fa_status_name(st[i]));
            }
        }
        if (at > 0)
            cr_expect_geq(first, 0, "%s: the loss at call %d never surfaced", info.name, at);
        else
            cr_expect_eq(first, -1, "%s: no loss injected, yet step %d failed", info.name, first);
        fa_buffer *late = NULL;
        cr_expect_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = 64}, &late),
                     first >= 0 ? FA_ERROR_CONTEXT_LOST : FA_OK);
        fa_context_destroy(ctx); /* frees the buffers, lost or not */
    }
    unsetenv("FA_TEST_DEVICE_LOSS");
}
