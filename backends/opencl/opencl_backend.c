// SPDX-License-Identifier: MIT
/* The OpenCL backend's interface table: contexts (one in-order queue on one device), buffers
 * (cl_mem), synchronization, and the mapping of CL error codes to statuses. */
#include "opencl_backend.h"

#include "fa_cache.h"

#include <stdlib.h>

fa_status fa_cl_fail(fa_context *ctx, const char *call, cl_int err)
{
    fa_status st = FA_ERROR_DEVICE;
    if (err == CL_OUT_OF_RESOURCES || err == CL_MEM_OBJECT_ALLOCATION_FAILURE)
        st = FA_ERROR_OUT_OF_DEVICE_MEMORY;
    else if (err == CL_OUT_OF_HOST_MEMORY)
        st = FA_ERROR_OUT_OF_HOST_MEMORY;
    return fa_fail(ctx, st, "%s: %s (%d)", call, fa_cl_error_name(err), (int)err);
}

static fa_cl_state *state(fa_context *ctx)
{
    return ctx->backend_state;
}

static void log_device(fa_context *ctx, const fa_cl_device *d)
{
    char platform[128] = "", clc[64] = "";
    cl_device_local_mem_type local_type = CL_LOCAL;
    fa_cl.clGetPlatformInfo(d->platform, CL_PLATFORM_NAME, sizeof platform, platform, NULL);
    fa_cl.clGetDeviceInfo(d->id, CL_DEVICE_OPENCL_C_VERSION, sizeof clc, clc, NULL);
    fa_cl.clGetDeviceInfo(d->id, CL_DEVICE_LOCAL_MEM_TYPE, sizeof local_type, &local_type, NULL);
    platform[sizeof platform - 1] = clc[sizeof clc - 1] = '\0';
    fa_log(ctx, FA_LOG_DEBUG,
           "opencl: platform '%s', %s, local memory %llu bytes (%s), work groups up to %zu, "
           "fp16 %s, fp64 %s",
           platform, clc, (unsigned long long)d->local_mem_bytes,
           local_type == CL_LOCAL ? "dedicated" : "global", d->max_workgroup,
           d->info.f16 ? "yes" : "no", d->fp64 ? "yes" : "no");
}

static fa_status context_init(fa_context *ctx, int index)
{
    const fa_cl_device *d = fa_cl_device_get(index);
    if (!d)
        return fa_fail(ctx, FA_ERROR_INVALID_DEVICE, "no OpenCL device %d", index);
    fa_cl_state *st = calloc(1, sizeof *st);
    if (!st)
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "cannot allocate the OpenCL state");
    st->dev = d;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)d->platform, 0};
    cl_int err = CL_SUCCESS;
    st->context = fa_cl.clCreateContext(props, 1, &d->id, NULL, NULL, &err);
    if (err != CL_SUCCESS) {
        free(st);
        return fa_cl_fail(ctx, "clCreateContext", err);
    }
    st->queue = fa_cl.clCreateCommandQueue(st->context, d->id, 0, &err);
    if (err != CL_SUCCESS) {
        fa_cl.clReleaseContext(st->context);
        free(st);
        return fa_cl_fail(ctx, "clCreateCommandQueue", err);
    }
    ctx->backend_state = st;
    fa_cache_trim(ctx); /* a cap lowered since the last run holds from the start */
    log_device(ctx, d);
    return FA_OK;
}

static void context_release(fa_context *ctx)
{
    fa_cl_state *st = state(ctx);
    if (!st)
        return;
    fa_cl.clFinish(st->queue);
    fa_cl_programs_release(st);
    if (st->delta) {
        fa_cl.clReleaseMemObject(st->delta);
        fa_workspace_track(ctx, -(int64_t)st->delta_bytes);
    }
    fa_cl.clReleaseCommandQueue(st->queue);
    fa_cl.clReleaseContext(st->context);
    free(st);
    ctx->backend_state = NULL;
}

static fa_status buffer_alloc(fa_context *ctx, size_t size, void **handle)
{
    cl_int err = CL_SUCCESS;
    /* OpenCL refuses empty buffers; an empty fa_buffer still needs a handle. */
    cl_mem mem =
        fa_cl.clCreateBuffer(state(ctx)->context, CL_MEM_READ_WRITE, size ? size : 1, NULL, &err);
    if (err != CL_SUCCESS)
        return fa_cl_fail(ctx, "clCreateBuffer", err);
    *handle = mem;
    return FA_OK;
}

static void buffer_free(fa_context *ctx, void *handle)
{
    (void)ctx;
    if (handle)
        fa_cl.clReleaseMemObject((cl_mem)handle);
}

/* Blocking: the caller's host memory may be reused as soon as the call returns. */
static fa_status buffer_write(fa_context *ctx, void *handle, size_t offset, const void *src,
                              size_t size)
{
    if (!size)
        return FA_OK;
    cl_int err = fa_cl.clEnqueueWriteBuffer(state(ctx)->queue, (cl_mem)handle, CL_TRUE, offset,
                                            size, src, 0, NULL, NULL);
    return err == CL_SUCCESS ? FA_OK : fa_cl_fail(ctx, "clEnqueueWriteBuffer", err);
}

/* Blocking, and behind every launch in the in-order queue, so it also synchronizes. */
static fa_status buffer_read(fa_context *ctx, void *handle, size_t offset, void *dst, size_t size)
{
    if (!size)
        return FA_OK;
    cl_int err = fa_cl.clEnqueueReadBuffer(state(ctx)->queue, (cl_mem)handle, CL_TRUE, offset, size,
                                           dst, 0, NULL, NULL);
    return err == CL_SUCCESS ? FA_OK : fa_cl_fail(ctx, "clEnqueueReadBuffer", err);
}

/* Queued behind every launch in the in-order queue, and before the ones that follow. */
static fa_status copy_regions(fa_context *ctx, void *src, void *dst, const fa_copy_region *regions,
                              size_t n)
{
    for (size_t i = 0; i < n; i++) {
        cl_int err = fa_cl.clEnqueueCopyBuffer(state(ctx)->queue, (cl_mem)src, (cl_mem)dst,
                                               regions[i].src_offset, regions[i].dst_offset,
                                               regions[i].bytes, 0, NULL, NULL);
        if (err != CL_SUCCESS)
            return fa_cl_fail(ctx, "clEnqueueCopyBuffer", err);
    }
    return FA_OK;
}

static fa_status synchronize(fa_context *ctx)
{
    cl_int err = fa_cl.clFinish(state(ctx)->queue);
    return err == CL_SUCCESS ? FA_OK : fa_cl_fail(ctx, "clFinish", err);
}

const fa_backend_iface fa_opencl_backend_iface = {
    .id = FA_BACKEND_OPENCL,
    .name = "opencl",
    .seqlens_k = true,
    .paged_kv = true, /* on the decoding path (fa_cl_check_call) */
    .window = true,   /* on the ordinary kernels: the decoding path leaves them */
    .softcap = true,  /* likewise */
    .alibi = true,    /* likewise */
    .bias = true,     /* likewise */
    .probe = fa_cl_probe,
    .device_info = fa_cl_device_info,
    .context_init = context_init,
    .context_adopt = fa_cl_context_adopt,
    .context_release = context_release,
    .buffer_alloc = buffer_alloc,
    .buffer_wrap = fa_cl_buffer_wrap,
    .buffer_free = buffer_free,
    .buffer_write = buffer_write,
    .buffer_read = buffer_read,
    .synchronize = synchronize,
    .forward = fa_cl_forward,
    .backward = fa_cl_backward,
    .copy_regions = copy_regions,
    .check_call = fa_cl_check_call,
};
