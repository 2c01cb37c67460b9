// SPDX-License-Identifier: MIT
/* Buffers: creation, host copies, bounds, ownership and memory accounting. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "flashattn.h"
#include "flashattn/cpu.h"
#include "flashattn/cuda.h"

static fa_context *ctx;
static void setup(void)
{
    cr_assert_eq(fa_context_create(&(fa_context_desc){.backend = FA_BACKEND_CPU}, &ctx), FA_OK);
}
static void teardown(void)
{
    fa_context_destroy(ctx);
}
TestSuite(buffer, .init = setup, .fini = teardown);

Test(buffer, write_then_read_round_trips)
{
    unsigned char src[1000], dst[1000];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (unsigned char)(i * 31 + 7);
    fa_buffer *buf = NULL;
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof src}, &buf), FA_OK);
    cr_assert_eq(fa_buffer_size(buf), sizeof src);
    cr_assert_eq(fa_buffer_write(buf, 0, src, sizeof src), FA_OK);
    memset(dst, 0, sizeof dst);
    cr_assert_eq(fa_buffer_read(buf, 0, dst, sizeof dst), FA_OK);
    cr_assert_arr_eq(dst, src, sizeof src);
    cr_assert_eq(fa_buffer_write(buf, 10, src, 20), FA_OK);
    cr_assert_eq(fa_buffer_read(buf, 10, dst, 20), FA_OK);
    cr_assert_arr_eq(dst, src, 20);
    fa_buffer_destroy(buf);
}

Test(buffer, initial_data_is_copied)
{
    const int values[4] = {1, -2, 3, -4};
    int back[4] = {0};
    fa_buffer *buf = NULL;
    cr_assert_eq(
        fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof values, .data = values}, &buf),
        FA_OK);
    cr_assert_eq(fa_buffer_read(buf, 0, back, sizeof back), FA_OK);
    cr_assert_arr_eq(back, values, sizeof values);
}

Test(buffer, out_of_bounds_copies_are_refused)
{
    char host[64] = {0};
    fa_buffer *buf = NULL;
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = 32}, &buf), FA_OK);
    cr_assert_eq(fa_buffer_write(buf, 0, host, 33), FA_ERROR_OUT_OF_BOUNDS);
    cr_assert_eq(fa_buffer_write(buf, 31, host, 2), FA_ERROR_OUT_OF_BOUNDS);
    cr_assert_eq(fa_buffer_read(buf, 40, host, 0), FA_ERROR_OUT_OF_BOUNDS);
    cr_assert_eq(fa_buffer_read(buf, 8, host, SIZE_MAX), FA_ERROR_OUT_OF_BOUNDS);
    cr_assert_str_not_empty(fa_context_last_error(ctx));
    cr_assert_eq(fa_buffer_read(buf, 32, host, 0), FA_OK);
}

Test(buffer, null_arguments)
{
    char host[8];
    fa_buffer *buf = NULL;
    cr_assert_eq(fa_buffer_create(NULL, &(fa_buffer_desc){.size = 8}, &buf), FA_ERROR_NULL_POINTER);
    cr_assert_eq(fa_buffer_create(ctx, NULL, &buf), FA_ERROR_NULL_POINTER);
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = 8}, NULL), FA_ERROR_NULL_POINTER);
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = 8}, &buf), FA_OK);
    cr_assert_eq(fa_buffer_write(NULL, 0, host, 8), FA_ERROR_NULL_POINTER);
    cr_assert_eq(fa_buffer_write(buf, 0, NULL, 8), FA_ERROR_NULL_POINTER);
    cr_assert_eq(fa_buffer_read(buf, 0, NULL, 8), FA_ERROR_NULL_POINTER);
    fa_buffer_destroy(NULL);
    cr_assert_eq(fa_buffer_size(NULL), 0);
}

Test(buffer, zero_sized_buffers_work)
{
    fa_buffer *buf = NULL;
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){0}, &buf), FA_OK);
    cr_assert_not_null(buf);
    cr_assert_eq(fa_buffer_size(buf), 0);
    fa_buffer_destroy(buf);
}

Test(buffer, memory_stats_follow_buffers)
{
    fa_memory_stats m;
    cr_assert_eq(fa_context_memory(ctx, &m), FA_OK);
    cr_assert_eq(m.buffer_bytes, 0);
    fa_buffer *a = NULL, *b = NULL;
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = 1000}, &a), FA_OK);
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = 24}, &b), FA_OK);
    cr_assert_eq(fa_context_memory(ctx, &m), FA_OK);
    cr_assert_eq(m.buffer_bytes, 1024);
    fa_buffer_destroy(a);
    cr_assert_eq(fa_context_memory(ctx, &m), FA_OK);
    cr_assert_eq(m.buffer_bytes, 24);
    cr_assert_eq(m.buffer_peak_bytes, 1024);
    /* b is left alive on purpose: the context frees it (checked by the asan preset). */
}

Test(buffer, huge_allocation_fails_with_out_of_memory)
{
    fa_buffer *buf = (fa_buffer *)0x1;
    fa_status st = fa_buffer_create(ctx, &(fa_buffer_desc){.size = SIZE_MAX / 2}, &buf);
    cr_assert(st == FA_ERROR_OUT_OF_HOST_MEMORY || st == FA_ERROR_OUT_OF_DEVICE_MEMORY ||
                  st == FA_ERROR_TOO_LARGE,
              "got %s", fa_status_name(st));
    cr_assert_null(buf);
    cr_assert_str_not_empty(fa_context_last_error(ctx));
}

Test(buffer, wrapping_device_memory_is_cuda_only)
{
    fa_buffer *buf = (fa_buffer *)0x1;
    cr_assert_eq(fa_buffer_wrap_cuda(ctx, 0x10000, 64, &buf), FA_ERROR_UNSUPPORTED);
    cr_assert_null(buf);
    cr_assert(strstr(fa_context_last_error(ctx), "cpu") != NULL, "%s", fa_context_last_error(ctx));
    cr_assert_eq(fa_buffer_wrap_cuda(NULL, 0x10000, 64, &buf), FA_ERROR_NULL_POINTER);
    cr_assert_eq(fa_buffer_wrap_cuda(ctx, 0x10000, 64, NULL), FA_ERROR_NULL_POINTER);
}

Test(buffer, wrapped_host_memory_is_used_in_place_and_never_freed)
{
    enum { B = 1, S = 37, H = 2, D = 16, N = B * S * H * D };
    float *host = malloc(5 * N * sizeof(float)); /* q, k, v, o through the wrap, o2 created */
    cr_assert_not_null(host);
    for (int i = 0; i < 3 * N; i++)
        host[i] = (float)((i * 7919) % 1000) / 250.0f - 2.0f; /* fresh, never zero-filled */
    for (int i = 3 * N; i < 5 * N; i++)
        host[i] = 12345.0f; /* poison */
    fa_buffer *wrapped = NULL, *created = NULL;
    cr_assert_eq(fa_buffer_wrap_host(ctx, host, 4 * N * sizeof(float), &wrapped), FA_OK);
    cr_assert_eq(fa_buffer_size(wrapped), 4 * N * sizeof(float));
    cr_assert_eq(fa_buffer_create(
                     ctx, &(fa_buffer_desc){.size = 4 * N * sizeof(float), .data = host}, &created),
                 FA_OK);
    fa_tensor t[2][4];
    fa_buffer *bufs[2] = {wrapped, created};
    for (int w = 0; w < 2; w++)
        for (int i = 0; i < 4; i++) {
            t[w][i] = fa_tensor_bshd(bufs[w], FA_DTYPE_F32, B, S, H, D);
            t[w][i].offset = (uint64_t)i * N * sizeof(float);
        }
    const fa_attention_desc desc = {.causal = true};
    for (int w = 0; w < 2; w++)
        cr_assert_eq(fa_attention_forward(ctx, &desc, &t[w][0], &t[w][1], &t[w][2], &t[w][3], NULL),
                     FA_OK, "%s", fa_context_last_error(ctx));
    /* the wrapped call wrote the caller's memory; the created buffer's O is read back into o2 */
    cr_assert_eq(fa_buffer_read(created, 3 * N * sizeof(float), host + 4 * N, N * sizeof(float)),
                 FA_OK);
    for (int i = 0; i < N; i++) {
        cr_assert(host[3 * N + i] != 12345.0f, "O[%d] not written", i);
        cr_assert_eq(host[3 * N + i], host[4 * N + i], "O[%d] differs from a created buffer's", i);
    }
    /* writes through the buffer land in the caller's memory */
    const float marker = -7.5f;
    cr_assert_eq(fa_buffer_write(wrapped, 0, &marker, sizeof marker), FA_OK);
    cr_assert_eq(host[0], marker);
    fa_buffer_destroy(wrapped);
    fa_buffer_destroy(created);
    host[1] = 1.0f; /* still the caller's (ASan reports a use after free otherwise) */
    free(host);
}

Test(buffer, wrapping_host_memory_checks_its_arguments)
{
    _Alignas(16) unsigned char bytes[64];
    fa_buffer *buf = (fa_buffer *)0x1;
    cr_assert_eq(fa_buffer_wrap_host(ctx, bytes + 2, 32, &buf), FA_ERROR_INVALID_ARGUMENT);
    cr_assert_null(buf);
    cr_assert(strstr(fa_context_last_error(ctx), "aligned") != NULL);
    cr_assert_eq(fa_buffer_wrap_host(ctx, NULL, 32, &buf), FA_ERROR_NULL_POINTER);
    cr_assert_eq(fa_buffer_wrap_host(ctx, bytes, 32, NULL), FA_ERROR_NULL_POINTER);
    cr_assert_eq(fa_buffer_wrap_host(NULL, bytes, 32, &buf), FA_ERROR_NULL_POINTER);
}
