// SPDX-License-Identifier: MIT
/* Device buffers: a runtime record around each backend allocation, listed in its context so
 * that a context's destruction frees what the caller left. */
#include "fa_internal.h"
#include "flashattn/cpu.h"
#include "flashattn/cuda.h"
#include "flashattn/opencl.h"
#include "flashattn/vulkan.h"

#include <stdlib.h>

/* Adds a backend handle to the context's list of buffers. */
static void adopt(fa_context *ctx, fa_buffer *buf)
{
    buf->next = ctx->buffers;
    if (ctx->buffers)
        ctx->buffers->prev = buf;
    ctx->buffers = buf;
    ctx->memory.buffer_bytes += buf->size;
    if (ctx->memory.buffer_bytes > ctx->memory.buffer_peak_bytes)
        ctx->memory.buffer_peak_bytes = ctx->memory.buffer_bytes;
}

fa_status fa_buffer_create(fa_context *ctx, const fa_buffer_desc *desc, fa_buffer **out)
{
    if (!out)
        return ctx ? fa_fail(ctx, FA_ERROR_NULL_POINTER, "fa_buffer_create: out is NULL")
                   : FA_ERROR_NULL_POINTER;
    *out = NULL;
    if (!ctx)
        return FA_ERROR_NULL_POINTER;
    if (!desc)
        return fa_fail(ctx, FA_ERROR_NULL_POINTER, "fa_buffer_create: desc is NULL");
    if (!fa_reserved_zero(desc->reserved, sizeof desc->reserved / sizeof desc->reserved[0]))
        return fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT, FA_RESERVED_MESSAGE, "fa_buffer_desc",
                       fa_version_string());
    if (ctx->lost)
        return fa_fail(ctx, FA_ERROR_CONTEXT_LOST, "the context lost its device earlier");
    const uint64_t limit = ctx->device_info.max_buffer_bytes;
    if (limit && desc->size > limit)
        return fa_fail(ctx, FA_ERROR_TOO_LARGE,
                       "buffer of %zu bytes exceeds the device's largest buffer (%llu bytes)",
                       desc->size, (unsigned long long)limit);

    fa_buffer *buf = calloc(1, sizeof *buf);
    if (!buf)
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "cannot allocate a buffer record");
    fa_status st = fa_backend_enter(ctx);
    if (st == FA_OK)
        st = fa_backend_leave(ctx, ctx->backend->buffer_alloc(ctx, desc->size, &buf->handle));
    if (st != FA_OK) {
        free(buf);
        return st;
    }
    buf->ctx = ctx;
    buf->size = desc->size;
    if (desc->data && desc->size) {
        st = fa_backend_enter(ctx);
        if (st == FA_OK)
            st = fa_backend_leave(
                ctx, ctx->backend->buffer_write(ctx, buf->handle, 0, desc->data, desc->size));
        if (st != FA_OK) {
            ctx->backend->buffer_free(ctx, buf->handle);
            free(buf);
            return st;
        }
    }
    adopt(ctx, buf);
    *out = buf;
    return FA_OK;
}

/* A buffer over memory the caller owns, through the backend's buffer_wrap; `what` names the
 * public call in messages. */
static fa_status wrap(fa_context *ctx, fa_backend backend, const char *what, uint64_t native,
                      size_t offset, size_t bytes, fa_buffer **out)
{
    if (!ctx || !out)
        return ctx ? fa_fail(ctx, FA_ERROR_NULL_POINTER, "%s: out is NULL", what)
                   : FA_ERROR_NULL_POINTER;
    *out = NULL;
    if (ctx->lost)
        return fa_fail(ctx, FA_ERROR_CONTEXT_LOST, "the context lost its device earlier");
    if (ctx->backend->id != backend || !ctx->backend->buffer_wrap)
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED, "%s: the context runs on %s, not %s", what,
                       ctx->backend->name, fa_backend_name(backend));
    if (!native)
        return fa_fail(ctx, FA_ERROR_NULL_POINTER, "%s: the handle is 0", what);
    if (offset > UINT64_MAX - native)
        return fa_fail(ctx, FA_ERROR_SIZE_OVERFLOW, "%s: offset %zu overflows", what, offset);
    uint64_t base = 0;
    if (offset && ctx->backend->wrap_offset_in_views) {
        if (offset % 4 || bytes > SIZE_MAX - offset)
            return fa_fail(
                ctx, FA_ERROR_INVALID_ARGUMENT,
                "%s: offset %zu is not a multiple of 4 bytes, or with %zu bytes overflows", what,
                offset, bytes);
        base = offset;
        bytes += offset; /* the handle covers [0, offset + bytes) */
        offset = 0;
    }
    fa_buffer *buf = calloc(1, sizeof *buf);
    if (!buf)
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "cannot allocate a buffer record");
    fa_status st = fa_backend_enter(ctx);
    if (st == FA_OK)
        st = fa_backend_leave(ctx,
                              ctx->backend->buffer_wrap(ctx, native, offset, bytes, &buf->handle));
    if (st != FA_OK) {
        free(buf);
        return st;
    }
    buf->ctx = ctx;
    buf->size = bytes - base;
    buf->base = base;
    buf->wrapped = true;
    adopt(ctx, buf);
    *out = buf;
    return FA_OK;
}

fa_status fa_buffer_wrap_cuda(fa_context *ctx, uint64_t device_pointer, size_t bytes,
                              fa_buffer **out)
{
    return wrap(ctx, FA_BACKEND_CUDA, "fa_buffer_wrap_cuda", device_pointer, 0, bytes, out);
}

fa_status fa_buffer_wrap_host(fa_context *ctx, void *host_pointer, size_t bytes, fa_buffer **out)
{
    if (out)
        *out = NULL;
    if (ctx && ((uintptr_t)host_pointer & 3u) != 0)
        return fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT,
                       "fa_buffer_wrap_host: %p is not 4-byte aligned", host_pointer);
    return wrap(ctx, FA_BACKEND_CPU, "fa_buffer_wrap_host", (uint64_t)(uintptr_t)host_pointer, 0,
                bytes, out);
}

fa_status fa_buffer_wrap_vulkan(fa_context *ctx, uint64_t buffer, size_t offset, size_t bytes,
                                fa_buffer **out)
{
    return wrap(ctx, FA_BACKEND_VULKAN, "fa_buffer_wrap_vulkan", buffer, offset, bytes, out);
}

fa_status fa_buffer_wrap_opencl(fa_context *ctx, uint64_t mem, size_t offset, size_t bytes,
                                fa_buffer **out)
{
    return wrap(ctx, FA_BACKEND_OPENCL, "fa_buffer_wrap_opencl", mem, offset, bytes, out);
}

void fa_buffer_destroy(fa_buffer *buf)
{
    if (!buf)
        return;
    fa_context *ctx = buf->ctx;
    const bool wait = !(buf->wrapped && ctx->backend->unwrap_without_wait);
    if (wait && !ctx->lost && fa_backend_enter(ctx) == FA_OK)
        fa_backend_leave(ctx, ctx->backend->synchronize(ctx));
    if (buf->wrapped && ctx->backend->buffer_unwrap)
        ctx->backend->buffer_unwrap(ctx, buf->handle);
    else
        ctx->backend->buffer_free(ctx, buf->handle);
    if (buf->prev)
        buf->prev->next = buf->next;
    else
        ctx->buffers = buf->next;
    if (buf->next)
        buf->next->prev = buf->prev;
    ctx->memory.buffer_bytes -= buf->size;
    free(buf);
}

size_t fa_buffer_size(const fa_buffer *buf)
{
    return buf ? buf->size : 0;
}

static fa_status check_range(const fa_buffer *buf, size_t offset, const void *host, size_t size,
                             const char *what)
{
    if (!buf)
        return FA_ERROR_NULL_POINTER;
    if (!host && size)
        return fa_fail(buf->ctx, FA_ERROR_NULL_POINTER, "%s: host pointer is NULL", what);
    if (buf->ctx->lost)
        return fa_fail(buf->ctx, FA_ERROR_CONTEXT_LOST, "the context lost its device earlier");
    if (offset > buf->size || size > buf->size - offset)
        return fa_fail(buf->ctx, FA_ERROR_OUT_OF_BOUNDS,
                       "%s: bytes [%zu, %zu + %zu) lie outside a buffer of %zu bytes", what, offset,
                       offset, size, buf->size);
    return FA_OK;
}

fa_status fa_buffer_write(fa_buffer *buf, size_t offset, const void *src, size_t size)
{
    fa_status st = check_range(buf, offset, src, size, "fa_buffer_write");
    if (st == FA_OK && size)
        st = fa_backend_enter(buf->ctx);
    if (st != FA_OK || size == 0)
        return st;
    return fa_backend_leave(buf->ctx, buf->ctx->backend->buffer_write(
                                          buf->ctx, buf->handle, buf->base + offset, src, size));
}

fa_status fa_buffer_read(fa_buffer *buf, size_t offset, void *dst, size_t size)
{
    fa_status st = check_range(buf, offset, dst, size, "fa_buffer_read");
    if (st == FA_OK && size)
        st = fa_backend_enter(buf->ctx);
    if (st != FA_OK || size == 0)
        return st;
    return fa_backend_leave(buf->ctx, buf->ctx->backend->buffer_read(
                                          buf->ctx, buf->handle, buf->base + offset, dst, size));
}
