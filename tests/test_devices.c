// SPDX-License-Identifier: MIT
/* Backend and device listing, and the choice of backend for a context. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "flashattn.h"

static bool any_gpu_backend_available(void)
{
    const fa_backend gpus[] = {FA_BACKEND_CUDA, FA_BACKEND_VULKAN, FA_BACKEND_OPENCL};
    for (size_t i = 0; i < 3; i++) {
        fa_backend_info info;
        cr_assert_eq(fa_backend_query(gpus[i], &info), FA_OK);
        if (info.available)
            return true;
    }
    return false;
}

Test(devices, every_backend_reports_built_available_and_reason)
{
    for (int b = FA_BACKEND_CUDA; b < FA_BACKEND_COUNT; b++) {
        fa_backend_info info;
        cr_assert_eq(fa_backend_query((fa_backend)b, &info), FA_OK);
        cr_assert_eq(info.backend, (fa_backend)b);
        cr_assert_str_eq(info.name, fa_backend_name((fa_backend)b));
        if (info.available) {
            cr_assert(info.built);
            cr_assert_gt(info.device_count, 0);
            cr_assert_str_empty(info.reason);
        } else {
            cr_assert_eq(info.device_count, 0);
            cr_assert_str_not_empty(info.reason, "%s is unavailable without a reason", info.name);
        }
    }
}

Test(devices, query_rejects_auto_unknown_and_null)
{
    fa_backend_info info;
    cr_assert_eq(fa_backend_query(FA_BACKEND_AUTO, &info), FA_ERROR_INVALID_BACKEND);
    cr_assert_eq(fa_backend_query((fa_backend)42, &info), FA_ERROR_INVALID_BACKEND);
    cr_assert_eq(fa_backend_query(FA_BACKEND_CPU, NULL), FA_ERROR_NULL_POINTER);
}

Test(devices, cpu_backend_is_always_available_with_one_device)
{
    fa_backend_info info;
    cr_assert_eq(fa_backend_query(FA_BACKEND_CPU, &info), FA_OK);
    cr_assert(info.built && info.available);
    cr_assert_eq(info.device_count, 1);
    fa_device_info dev;
    cr_assert_eq(fa_device_query(FA_BACKEND_CPU, 0, &dev), FA_OK);
    cr_assert_eq(dev.backend, FA_BACKEND_CPU);
    cr_assert_eq(dev.index, 0);
    cr_assert_eq(dev.kind, FA_DEVICE_KIND_CPU);
    cr_assert_str_not_empty(dev.name);
    cr_assert_gt(dev.memory_bytes, 0);
    cr_assert_gt(dev.compute_units, 0);
    cr_assert_eq(fa_device_query(FA_BACKEND_CPU, 1, &dev), FA_ERROR_INVALID_DEVICE);
    cr_assert_eq(fa_device_query(FA_BACKEND_CPU, -1, &dev), FA_ERROR_INVALID_DEVICE);
}

Test(devices, unavailable_backend_devices_are_refused_by_status)
{
    for (int b = FA_BACKEND_CUDA; b < FA_BACKEND_COUNT; b++) {
        fa_backend_info info;
        fa_backend_query((fa_backend)b, &info);
        fa_device_info dev;
        fa_status st = fa_device_query((fa_backend)b, 0, &dev);
        if (!info.built)
            cr_assert_eq(st, FA_ERROR_BACKEND_NOT_BUILT);
        else if (!info.available)
            cr_assert_eq(st, FA_ERROR_BACKEND_UNAVAILABLE);
        else
            cr_assert_eq(st, FA_OK);
    }
}

/* Each Vulkan device says which kernels serve it: bf16 and f32 always run on the scalar shaders,
 * and lavapipe, without cooperative matrix, runs everything on them. */
Test(devices, vulkan_devices_say_which_kernels_serve_them)
{
    fa_backend_info info;
    cr_assert_eq(fa_backend_query(FA_BACKEND_VULKAN, &info), FA_OK);
    if (!info.available)
        cr_skip_test("vulkan unavailable: %s", info.reason);
    for (int i = 0; i < info.device_count; i++) {
        fa_device_info dev;
        cr_assert_eq(fa_device_query(FA_BACKEND_VULKAN, i, &dev), FA_OK);
        cr_assert(strstr(dev.kernels, "scalar") != NULL, "%s: kernels \"%s\"", dev.name,
                  dev.kernels);
        if (strstr(dev.name, "llvmpipe"))
            cr_assert_str_eq(dev.kernels, "scalar (no VK_KHR_cooperative_matrix)");
    }
}

Test(context, auto_picks_a_gpu_or_else_the_cpu)
{
    unsetenv("FA_BACKEND");
    unsetenv("FA_DEVICE");
    fa_context *ctx = NULL;
    cr_assert_eq(fa_context_create(NULL, &ctx), FA_OK, "%s", fa_last_create_error());
    if (!any_gpu_backend_available())
        cr_assert_eq(fa_context_backend(ctx), FA_BACKEND_CPU);
    else
        cr_assert_neq(fa_context_backend(ctx), FA_BACKEND_AUTO);
    fa_device_info dev;
    cr_assert_eq(fa_context_device(ctx, &dev), FA_OK);
    cr_assert_eq(dev.backend, fa_context_backend(ctx));
    cr_assert_neq(dev.kind, FA_DEVICE_KIND_SOFTWARE, "AUTO must not choose a software device");
    fa_context_destroy(ctx);
}

Test(context, environment_overrides_auto)
{
    setenv("FA_BACKEND", "cpu", 1);
    fa_context *ctx = NULL;
    cr_assert_eq(fa_context_create(&(fa_context_desc){0}, &ctx), FA_OK);
    cr_assert_eq(fa_context_backend(ctx), FA_BACKEND_CPU);
    fa_context_destroy(ctx);

    setenv("FA_BACKEND", "metal", 1);
    cr_assert_eq(fa_context_create(NULL, &ctx), FA_ERROR_INVALID_BACKEND);
    cr_assert_null(ctx);
    cr_assert(strstr(fa_last_create_error(), "FA_BACKEND=metal") != NULL);

    setenv("FA_BACKEND", "cpu", 1);
    setenv("FA_DEVICE", "3", 1);
    cr_assert_eq(fa_context_create(NULL, &ctx), FA_ERROR_INVALID_DEVICE);
    setenv("FA_DEVICE", "x1", 1);
    cr_assert_eq(fa_context_create(NULL, &ctx), FA_ERROR_INVALID_DEVICE);
}

Test(context, environment_is_ignored_when_the_backend_is_explicit)
{
    setenv("FA_BACKEND", "metal", 1);
    setenv("FA_DEVICE", "9", 1);
    fa_context *ctx = NULL;
    cr_assert_eq(fa_context_create(&(fa_context_desc){.backend = FA_BACKEND_CPU}, &ctx), FA_OK);
    fa_context_destroy(ctx);
}

Test(context, bad_backend_or_device_is_a_named_status)
{
    fa_context *ctx = (fa_context *)0x1;
    cr_assert_eq(fa_context_create(&(fa_context_desc){.backend = (fa_backend)99}, &ctx),
                 FA_ERROR_INVALID_BACKEND);
    cr_assert_null(ctx);
    cr_assert_eq(
        fa_context_create(&(fa_context_desc){.backend = FA_BACKEND_CPU, .device = 1}, &ctx),
        FA_ERROR_INVALID_DEVICE);
    cr_assert_str_not_empty(fa_last_create_error());
    cr_assert_eq(
        fa_context_create(&(fa_context_desc){.backend = FA_BACKEND_CPU, .device = -2}, &ctx),
        FA_ERROR_INVALID_DEVICE);
    cr_assert_eq(fa_context_create(NULL, NULL), FA_ERROR_NULL_POINTER);
}

Test(context, unavailable_backend_says_why)
{
    for (int b = FA_BACKEND_CUDA; b <= FA_BACKEND_OPENCL; b++) {
        fa_backend_info info;
        fa_backend_query((fa_backend)b, &info);
        if (info.available)
            continue;
        fa_context *ctx = NULL;
        fa_status st = fa_context_create(&(fa_context_desc){.backend = (fa_backend)b}, &ctx);
        cr_assert_eq(st, info.built ? FA_ERROR_BACKEND_UNAVAILABLE : FA_ERROR_BACKEND_NOT_BUILT);
        cr_assert_null(ctx);
        cr_assert(strstr(fa_last_create_error(), info.reason) != NULL, "message: %s",
                  fa_last_create_error());
    }
}

static int log_calls;
static void count_log(void *user, fa_log_level level, const char *message)
{
    (void)level;
    (void)message;
    *(int *)user += 1;
}

Test(context, log_callback_receives_messages_at_its_level)
{
    fa_context *ctx = NULL;
    cr_assert_eq(fa_context_create(&(fa_context_desc){.backend = FA_BACKEND_CPU,
                                                      .log = count_log,
                                                      .log_user_data = &log_calls,
                                                      .log_level = FA_LOG_DEBUG},
                                   &ctx),
                 FA_OK);
    cr_assert_gt(log_calls, 0, "context creation logs at INFO");
    fa_context_destroy(ctx);
}

/* A forward of a few random rows on ctx; its status. */
static fa_status small_forward(fa_context *ctx)
{
    enum { N = 1 * 8 * 1 * 16 };
    float host[N];
    for (int i = 0; i < N; i++)
        host[i] = (float)((i * 37) % 17) / 17.0f - 0.5f;
    fa_buffer *q = NULL, *o = NULL;
    fa_status st = fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof host, .data = host}, &q);
    if (st == FA_OK)
        st = fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof host}, &o);
    if (st == FA_OK) {
        const fa_tensor t = fa_tensor_bshd(q, FA_DTYPE_F32, 1, 8, 1, 16);
        const fa_tensor to = fa_tensor_bshd(o, FA_DTYPE_F32, 1, 8, 1, 16);
        st = fa_attention_forward(ctx, NULL, &t, &t, &t, &to, NULL);
        if (st == FA_OK)
            st = fa_context_synchronize(ctx);
    }
    fa_buffer_destroy(q);
    fa_buffer_destroy(o);
    return st;
}

/* The developer knobs are read when a context is created: one created before a knob is set
 * never sees it, one created after does. FA_TEST_DEVICE_LOSS on the CPU; on OpenCL (PoCL in CI)
 * FA_OPENCL_BUILD_OPTIONS, which the backend used to read at every program build. */
Test(context, knobs_are_read_when_the_context_is_created)
{
    unsetenv("FA_TEST_DEVICE_LOSS");
    fa_context *before = NULL, *after = NULL;
    const fa_context_desc cpu = {.backend = FA_BACKEND_CPU};
    cr_assert_eq(fa_context_create(&cpu, &before), FA_OK);
    setenv("FA_TEST_DEVICE_LOSS", "1", 1);
    cr_assert_eq(fa_context_create(&cpu, &after), FA_OK);
    unsetenv("FA_TEST_DEVICE_LOSS");
    cr_assert_eq(small_forward(before), FA_OK);
    cr_assert_eq(small_forward(after), FA_ERROR_DEVICE_LOST);
    fa_context_destroy(before);
    fa_context_destroy(after);

    fa_backend_info cl;
    cr_assert_eq(fa_backend_query(FA_BACKEND_OPENCL, &cl), FA_OK);
    if (!cl.available)
        return;
    const fa_context_desc ocl = {.backend = FA_BACKEND_OPENCL, .cache_dir = ""};
    unsetenv("FA_OPENCL_BUILD_OPTIONS");
    cr_assert_eq(fa_context_create(&ocl, &before), FA_OK);
    setenv("FA_OPENCL_BUILD_OPTIONS", "-D FA_KNOB_TEST=1 -cl-no-such-option", 1);
    cr_assert_eq(fa_context_create(&ocl, &after), FA_OK);
    unsetenv("FA_OPENCL_BUILD_OPTIONS");
    cr_assert_eq(small_forward(before), FA_OK, "%s", fa_context_last_error(before));
    cr_assert_neq(small_forward(after), FA_OK, "the knob set before creation was not seen");
    fa_context_destroy(before);
    fa_context_destroy(after);
}
