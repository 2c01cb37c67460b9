// SPDX-License-Identifier: MIT
/* The Vulkan decoding path's chunks merged by the decoding dispatch's last workgroups: call after
 * call on one context (each merging workgroup must leave its count at 0 for the next call), the
 * same O every time, as the merge dispatch (FA_VULKAN_DECODE_MERGE=kernel) and one chunk give it;
 * FA_VULKAN_PROFILE=1's reports name the kernels that ran; K and V one element off their 16-byte
 * units take the pipeline without ALIGNED and give that O too. Skipped where Vulkan is unavailable
 * (CI: lavapipe). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "flashattn.h"

enum { B = 2, SK = 700, HQ = 8, HKV = 2, D = 64, CALLS = 3 };
enum { O_FLOATS = B * HQ * D, KV_FLOATS = B * SK * HKV * D };

static char profile[16384]; /* the profiler's reports and decoding builds since the last clear */

static void keep_profile(void *user_data, fa_log_level level, const char *message)
{
    (void)user_data;
    (void)level;
    if ((strstr(message, "vulkan profile") || strstr(message, "built attn_decode")) &&
        strlen(profile) + strlen(message) + 2 < sizeof profile)
        strcat(strcat(profile, message), "\n");
}

static void fill(float *x, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
    }
}

/* CALLS decoding calls (one query token) with `splits` chunks on one new Vulkan context, O
 * poisoned before each; every O fully written and equal to the first, which goes to o_out. K and
 * V start `skew` elements into their buffers. */
static void decode_calls(int32_t splits, int skew, float *o_out)
{
    static float q[O_FLOATS], k[KV_FLOATS + 1], v[KV_FLOATS + 1], o[O_FLOATS], poison[O_FLOATS];
    fill(q, O_FLOATS, 1);
    fill(k + skew, KV_FLOATS, 2);
    fill(v + skew, KV_FLOATS, 3);
    for (size_t i = 0; i < O_FLOATS; i++)
        poison[i] = NAN;
    fa_context *ctx = NULL;
    cr_assert_eq(fa_context_create(&(fa_context_desc){.backend = FA_BACKEND_VULKAN,
                                                      .log = keep_profile,
                                                      .log_level = FA_LOG_DEBUG},
                                   &ctx),
                 FA_OK);
    fa_buffer *qb = NULL, *kb = NULL, *vb = NULL, *ob = NULL;
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof q, .data = q}, &qb), FA_OK);
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof k, .data = k}, &kb), FA_OK);
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof v, .data = v}, &vb), FA_OK);
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof o}, &ob), FA_OK);
    const fa_tensor tq = fa_tensor_bshd(qb, FA_DTYPE_F32, B, 1, HQ, D);
    fa_tensor tk = fa_tensor_bshd(kb, FA_DTYPE_F32, B, SK, HKV, D);
    fa_tensor tv = fa_tensor_bshd(vb, FA_DTYPE_F32, B, SK, HKV, D);
    tk.offset = tv.offset = (int64_t)sizeof(float) * skew;
    const fa_tensor to = fa_tensor_bshd(ob, FA_DTYPE_F32, B, 1, HQ, D);
    for (int call = 0; call < CALLS; call++) {
        cr_assert_eq(fa_buffer_write(ob, 0, poison, sizeof poison), FA_OK);
        cr_assert_eq(fa_attention_forward(ctx, &(fa_attention_desc){.num_splits = splits}, &tq, &tk,
                                          &tv, &to, NULL),
                     FA_OK);
        cr_assert_eq(fa_context_synchronize(ctx), FA_OK);
        cr_assert_eq(fa_buffer_read(ob, 0, o, sizeof o), FA_OK);
        for (size_t i = 0; i < O_FLOATS; i++) {
            cr_assert(isfinite(o[i]), "%d chunks, call %d: O[%zu] not written (%g)", splits, call,
                      i, o[i]);
            if (call == 0)
                o_out[i] = o[i];
            else
                cr_assert_eq(o[i], o_out[i], "%d chunks, call %d: O[%zu] %.9g, first call %.9g",
                             splits, call, i, o[i], o_out[i]);
        }
    }
    fa_context_destroy(ctx);
}

static void expect_close(const float *a, const float *b, float tol, const char *what)
{
    for (size_t i = 0; i < O_FLOATS; i++)
        cr_assert(fabsf(a[i] - b[i]) <= tol, "%s: O[%zu] %.9g against %.9g", what, i, a[i], b[i]);
}

Test(vk_decode, the_merge_in_the_dispatch_repeats_and_matches_the_merge_dispatch)
{
    fa_backend_info info;
    cr_assert_eq(fa_backend_query(FA_BACKEND_VULKAN, &info), FA_OK);
    if (!info.available)
        cr_skip_test("vulkan unavailable: %s", info.reason);
    static float here[O_FLOATS], kernel[O_FLOATS], one[O_FLOATS];
    setenv("FA_VULKAN_PROFILE", "1", 1);
    unsetenv("FA_VULKAN_DECODE_MERGE");
    profile[0] = 0;
    decode_calls(5, 0, here);
    cr_expect(strstr(profile, " attn_decode "), "no decoding dispatch profiled:\n%s", profile);
    cr_expect(!strstr(profile, " attn_merge "), "a merge dispatch ran:\n%s", profile);
    cr_expect(strstr(profile, "aligned=1"), "not the aligned pipeline:\n%s", profile);

    setenv("FA_VULKAN_DECODE_MERGE", "kernel", 1);
    profile[0] = 0;
    decode_calls(5, 0, kernel);
    cr_expect(strstr(profile, " attn_merge "), "no merge dispatch profiled:\n%s", profile);
    unsetenv("FA_VULKAN_DECODE_MERGE");
    unsetenv("FA_VULKAN_PROFILE");
    decode_calls(1, 0, one);

    expect_close(here, kernel, 1e-6f, "merged in the dispatch against the merge dispatch");
    expect_close(here, one, 1e-5f, "5 chunks against 1");

    static float skewed[O_FLOATS];
    profile[0] = 0;
    decode_calls(5, 1, skewed);
    cr_expect(strstr(profile, "aligned=0"), "K and V one element off, yet:\n%s", profile);
    expect_close(here, skewed, 1e-6f, "K and V one element off against aligned");
}

/* The developer knobs around the submission and the pipeline cache change no result: pipelines
 * built without a VkPipelineCache (FA_VULKAN_PIPELINE_CACHE=0) or built twice (=rebuild), and the
 * fence polled before the sleeping wait (FA_VULKAN_WAIT_SPIN_US; a CPU device such as lavapipe
 * does not poll by default), give the default's O bit for bit. */
Test(vk_decode, the_cache_and_wait_knobs_give_the_same_o)
{
    fa_backend_info info;
    cr_assert_eq(fa_backend_query(FA_BACKEND_VULKAN, &info), FA_OK);
    if (!info.available)
        cr_skip_test("vulkan unavailable: %s", info.reason);
    static float base[O_FLOATS], other[O_FLOATS];
    decode_calls(3, 0, base);
    const char *knobs[][2] = {{"FA_VULKAN_PIPELINE_CACHE", "0"},
                              {"FA_VULKAN_PIPELINE_CACHE", "rebuild"},
                              {"FA_VULKAN_WAIT_SPIN_US", "200"}};
    for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++) {
        setenv(knobs[i][0], knobs[i][1], 1);
        decode_calls(3, 0, other);
        unsetenv(knobs[i][0]);
        for (size_t j = 0; j < O_FLOATS; j++)
            cr_assert_eq(other[j], base[j], "%s=%s: O[%zu] %.9g against %.9g", knobs[i][0],
                         knobs[i][1], j, other[j], base[j]);
    }
}
