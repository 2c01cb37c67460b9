// SPDX-License-Identifier: MIT
/* Contexts: choosing a backend and device, opening it, and tearing it down. */
#include "fa_append.h"
#include "fa_cache.h"
#include "fa_platform.h"
#include "flashattn/opencl.h"
#include "flashattn/vulkan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool is_gpu(fa_device_kind kind)
{
    return kind == FA_DEVICE_KIND_DISCRETE_GPU || kind == FA_DEVICE_KIND_INTEGRATED_GPU;
}

/* The first device of `backend` whose kind is `kind`, or -1. */
static int find_device(fa_backend backend, fa_device_kind kind, int min_api_major)
{
    fa_backend_info info;
    if (fa_backend_query(backend, &info) != FA_OK || !info.available)
        return -1;
    for (int i = 0; i < info.device_count; i++) {
        fa_device_info dev;
        if (fa_device_query(backend, i, &dev) == FA_OK && dev.kind == kind &&
            dev.api_major >= min_api_major)
            return i;
    }
    return -1;
}

/* AUTO: CUDA on compute capability >= 8.0, else a Vulkan GPU (discrete before integrated),
 * else an OpenCL GPU, else the CPU. Software devices are never chosen here. */
static void choose_auto(fa_backend *backend, int *device)
{
    static const struct {
        fa_backend backend;
        fa_device_kind kind;
        int min_api_major;
    } order[] = {
        {FA_BACKEND_CUDA, FA_DEVICE_KIND_DISCRETE_GPU, 8},
        {FA_BACKEND_CUDA, FA_DEVICE_KIND_INTEGRATED_GPU, 8},
        {FA_BACKEND_VULKAN, FA_DEVICE_KIND_DISCRETE_GPU, 0},
        {FA_BACKEND_VULKAN, FA_DEVICE_KIND_INTEGRATED_GPU, 0},
        {FA_BACKEND_OPENCL, FA_DEVICE_KIND_DISCRETE_GPU, 0},
        {FA_BACKEND_OPENCL, FA_DEVICE_KIND_INTEGRATED_GPU, 0},
    };
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        int found = find_device(order[i].backend, order[i].kind, order[i].min_api_major);
        if (found >= 0 && is_gpu(order[i].kind)) {
            *backend = order[i].backend;
            *device = found;
            return;
        }
    }
    *backend = FA_BACKEND_CPU;
    *device = 0;
}

/* FA_BACKEND and FA_DEVICE, read only when the caller asked for AUTO. */
static fa_status parse_environment(const char *name, const char *index, fa_backend *backend,
                                   int *device)
{
    if (name && name[0] && strcmp(name, "auto") != 0) {
        if (fa_backend_from_name(name, backend) != FA_OK)
            return fa_fail(NULL, FA_ERROR_INVALID_BACKEND,
                           "FA_BACKEND=%s is not one of cuda, vulkan, opencl, cpu, auto", name);
        *device = 0;
    }
    if (index && index[0]) {
        char *end = NULL;
        errno = 0;
        long v = strtol(index, &end, 10);
        if (errno || *end || v < 0 || v > 65535)
            return fa_fail(NULL, FA_ERROR_INVALID_DEVICE,
                           "FA_DEVICE=%s is not a device index (0, 1, ...)", index);
        *device = (int)v;
    }
    return FA_OK;
}

static fa_status apply_environment(fa_backend *backend, int *device)
{
    char *name = NULL, *index = NULL;
    fa_status st = !fa_env_get("FA_BACKEND", &name) || !fa_env_get("FA_DEVICE", &index)
                       ? fa_fail(NULL, FA_ERROR_OUT_OF_HOST_MEMORY,
                                 "cannot copy FA_BACKEND and FA_DEVICE from the environment")
                       : parse_environment(name, index, backend, device);
    free(name);
    free(index);
    return st;
}

/* The fields of desc that every context takes, checked. */
static fa_status check_desc(const fa_context_desc *desc)
{
    if (!fa_reserved_zero(desc->reserved, sizeof desc->reserved / sizeof desc->reserved[0]))
        return fa_fail(NULL, FA_ERROR_INVALID_ARGUMENT, FA_RESERVED_MESSAGE, "fa_context_desc",
                       fa_version_string());
    if ((unsigned)desc->backend >= FA_BACKEND_COUNT)
        return fa_fail(NULL, FA_ERROR_INVALID_BACKEND, "backend %d is not an fa_backend value",
                       (int)desc->backend);
    if (desc->device < 0)
        return fa_fail(NULL, FA_ERROR_INVALID_DEVICE, "device index %d is negative", desc->device);
    if (desc->cache_dir && strlen(desc->cache_dir) >= sizeof((fa_context *)0)->cache_dir)
        return fa_fail(NULL, FA_ERROR_INVALID_ARGUMENT,
                       "cache_dir is %zu bytes long; at most %zu are supported",
                       strlen(desc->cache_dir), sizeof((fa_context *)0)->cache_dir - 1);
    return FA_OK;
}

/* The backend built and available here, its description in *info. */
static fa_status check_backend(fa_backend backend, fa_backend_info *info)
{
    fa_backend_query(backend, info);
    if (!info->built)
        return fa_fail(NULL, FA_ERROR_BACKEND_NOT_BUILT, "%s backend: not built into this library",
                       info->name);
    if (!info->available)
        return fa_fail(NULL, FA_ERROR_BACKEND_UNAVAILABLE, "%s backend unavailable: %s", info->name,
                       info->reason);
    return FA_OK;
}

/* A context on `backend`: on its device `device` (context_init), or on the application's own
 * objects `app` (context_adopt, which finds the device). */
static fa_status open_context(const fa_context_desc *desc, fa_backend backend, int device,
                              const void *app, fa_context **out)
{
    fa_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return fa_fail(NULL, FA_ERROR_OUT_OF_HOST_MEMORY, "cannot allocate a context");
    fa_cache_configure(ctx, desc->cache_dir, desc->cache_max_bytes);
    ctx->backend = fa_registry_get(backend);
    ctx->log = desc->log;
    ctx->log_user_data = desc->log_user_data;
    ctx->log_level = desc->log_level;
    ctx->cpu_threads = desc->cpu.threads > 0 ? desc->cpu.threads : 0;
    ctx->cuda_stream = backend == FA_BACKEND_CUDA ? desc->cuda.stream : NULL;
    if (!fa_tuning_read(&ctx->tuning)) {
        free(ctx);
        return fa_fail(NULL, FA_ERROR_OUT_OF_HOST_MEMORY, "cannot copy the environment's knobs");
    }
    const char *inject = fa_knob_value(ctx, FA_KNOB_TEST_DEVICE_LOSS);
    ctx->inject_loss_at = inject ? strtol(inject, NULL, 10) : 0;

    fa_status st;
    if (app) {
        st = ctx->backend->context_adopt(ctx, app, &device);
    } else {
        fa_device_query(backend, device, &ctx->device_info);
        st = ctx->backend->context_init(ctx, device);
    }
    if (st != FA_OK) {
        fa_fail(NULL, st, "%s", ctx->last_error);
        fa_tuning_free(&ctx->tuning);
        free(ctx);
        return st;
    }
    ctx->device = device;
    if (app)
        fa_device_query(backend, device, &ctx->device_info);
    fa_log(ctx, FA_LOG_INFO, "context on %s device %d%s: %s", ctx->backend->name, device,
           app ? " (the application's objects)" : "", ctx->device_info.name);
    if (desc->cuda.stream && backend != FA_BACKEND_CUDA)
        fa_log(ctx, FA_LOG_WARN, "cuda.stream ignored: the context runs on %s", ctx->backend->name);
    *out = ctx;
    return FA_OK;
}

fa_status fa_context_create(const fa_context_desc *desc, fa_context **out)
{
    static const fa_context_desc defaults = {0};
    if (!out)
        return fa_fail(NULL, FA_ERROR_NULL_POINTER, "fa_context_create: out is NULL");
    *out = NULL;
    if (!desc)
        desc = &defaults;
    fa_status st = check_desc(desc);
    if (st != FA_OK)
        return st;

    fa_backend backend = desc->backend;
    int device = desc->device;
    if (backend == FA_BACKEND_AUTO) {
        fa_backend forced = FA_BACKEND_AUTO;
        int forced_device = -1;
        st = apply_environment(&forced, &forced_device);
        if (st != FA_OK)
            return st;
        if (forced == FA_BACKEND_AUTO)
            choose_auto(&backend, &device);
        else
            backend = forced;
        if (forced_device >= 0)
            device = forced_device;
    }

    fa_backend_info info;
    if ((st = check_backend(backend, &info)) != FA_OK)
        return st;
    if (device >= info.device_count)
        return fa_fail(NULL, FA_ERROR_INVALID_DEVICE,
                       "%s backend has %d device(s); index %d does not exist", info.name,
                       info.device_count, device);
    return open_context(desc, backend, device, NULL, out);
}

/* A context on the application's own objects `app` (a backend's interop struct, whose
 * `reserved` tail of `reserved_count` words is checked) for `backend`; `what` names the call. */
static fa_status create_on_app(const char *what, const fa_context_desc *desc, fa_backend backend,
                               const void *app, bool app_given, const uint64_t *reserved,
                               size_t reserved_count, fa_context **out)
{
    static const fa_context_desc defaults = {0};
    if (!out)
        return fa_fail(NULL, FA_ERROR_NULL_POINTER, "%s: out is NULL", what);
    *out = NULL;
    if (!desc)
        desc = &defaults;
    if (!app || !app_given)
        return fa_fail(NULL, FA_ERROR_NULL_POINTER, "%s: the application's objects are needed",
                       what);
    fa_status st = check_desc(desc);
    if (st != FA_OK)
        return st;
    if (!fa_reserved_zero(reserved, reserved_count))
        return fa_fail(NULL, FA_ERROR_INVALID_ARGUMENT, FA_RESERVED_MESSAGE, what,
                       fa_version_string());
    if (desc->backend != FA_BACKEND_AUTO && desc->backend != backend)
        return fa_fail(NULL, FA_ERROR_INVALID_BACKEND, "%s: desc names the %s backend", what,
                       fa_backend_name(desc->backend));
    fa_backend_info info;
    if ((st = check_backend(backend, &info)) != FA_OK)
        return st;
    if (!fa_registry_get(backend)->context_adopt)
        return fa_fail(NULL, FA_ERROR_UNSUPPORTED, "%s: no interop in this build", what);
    return open_context(desc, backend, 0, app, out);
}

fa_status fa_context_create_opencl(const fa_context_desc *desc, const fa_opencl_objects *app,
                                   fa_context **out)
{
    return create_on_app("fa_context_create_opencl", desc, FA_BACKEND_OPENCL, app,
                         app && app->context && app->queue, app ? app->reserved : NULL,
                         app ? sizeof app->reserved / sizeof app->reserved[0] : 0, out);
}

fa_status fa_context_create_vulkan(const fa_context_desc *desc, const fa_vulkan_objects *app,
                                   fa_context **out)
{
    return create_on_app("fa_context_create_vulkan", desc, FA_BACKEND_VULKAN, app,
                         app && app->instance && app->physical_device && app->device,
                         app ? app->reserved : NULL,
                         app ? sizeof app->reserved / sizeof app->reserved[0] : 0, out);
}

fa_status fa_backend_enter(fa_context *ctx)
{
    if (ctx->inject_loss_at > 0 && ++ctx->backend_calls == ctx->inject_loss_at) {
        /* A lost device runs nothing more; this one is alive, so its queued work is finished
         * first, or freeing buffers without waiting (as after a real loss) would race it. */
        ctx->backend->synchronize(ctx);
        return fa_backend_leave(ctx, fa_fail(ctx, FA_ERROR_DEVICE_LOST,
                                             "%s: device loss injected (FA_TEST_DEVICE_LOSS=%ld)",
                                             ctx->backend->name, ctx->inject_loss_at));
    }
    return FA_OK;
}

fa_status fa_backend_leave(fa_context *ctx, fa_status status)
{
    if (status == FA_ERROR_DEVICE_LOST)
        ctx->lost = true;
    return status;
}

void fa_context_destroy(fa_context *ctx)
{
    if (!ctx)
        return;
    if (!ctx->lost && fa_backend_enter(ctx) == FA_OK)
        fa_backend_leave(ctx, ctx->backend->synchronize(ctx));
    while (ctx->buffers)
        fa_buffer_destroy(ctx->buffers);
    fa_append_release(ctx);
    ctx->backend->context_release(ctx);
    fa_tuning_free(&ctx->tuning);
    free(ctx);
}

fa_backend fa_context_backend(const fa_context *ctx)
{
    return ctx ? ctx->backend->id : FA_BACKEND_AUTO;
}

fa_status fa_context_device(const fa_context *ctx, fa_device_info *out)
{
    if (!ctx || !out)
        return FA_ERROR_NULL_POINTER;
    *out = ctx->device_info;
    return FA_OK;
}

fa_status fa_context_synchronize(fa_context *ctx)
{
    if (!ctx)
        return FA_ERROR_NULL_POINTER;
    if (ctx->lost)
        return fa_fail(ctx, FA_ERROR_CONTEXT_LOST, "the context lost its device earlier");
    fa_status st = fa_backend_enter(ctx);
    return st != FA_OK ? st : fa_backend_leave(ctx, ctx->backend->synchronize(ctx));
}

fa_status fa_context_memory(const fa_context *ctx, fa_memory_stats *out)
{
    if (!ctx || !out)
        return FA_ERROR_NULL_POINTER;
    *out = ctx->memory;
    return FA_OK;
}
