// SPDX-License-Identifier: MIT
/* The CPU backend's interface: one always-present device (this machine), buffers in 64-byte
 * aligned host memory, and synchronous forward and backward calls run with OpenMP. */
#include "cpu_backend.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "fa_platform.h"

#define FA_STR_(x) #x
#define FA_STR(x) FA_STR_(x)

static bool cpu_probe(int *device_count, char *reason, size_t reason_size)
{
    *device_count = 1;
    if (reason_size)
        reason[0] = '\0';
    return true;
}

static void cpu_device_info(int index, fa_device_info *out)
{
    memset(out, 0, sizeof *out);
    out->backend = FA_BACKEND_CPU;
    out->index = index;
    out->kind = FA_DEVICE_KIND_CPU;
    fa_cpu_names(out->name, sizeof out->name, out->vendor, sizeof out->vendor);
    if (!out->name[0])
        snprintf(out->name, sizeof out->name, "CPU");
    snprintf(out->driver, sizeof out->driver, "flashattn cpu (%s kernels)",
             fa_cpu_kernels_select()->name);
    snprintf(out->api_version, sizeof out->api_version, "OpenMP %s", FA_STR(_OPENMP));
    out->api_major = _OPENMP / 100; /* yyyymm of the OpenMP specification */
    out->api_minor = _OPENMP % 100;
    out->memory_bytes = fa_physical_memory();
    out->max_buffer_bytes = INT64_MAX;
    out->compute_units = (uint32_t)omp_get_num_procs();
    out->f16 = true; /* by conversion to f32 */
    out->bf16 = true;
    out->matrix_units = false;
}

static fa_status cpu_context_init(fa_context *ctx, int index)
{
    (void)index;
    fa_cpu_state *state = calloc(1, sizeof *state);
    if (!state)
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "cpu: cannot allocate context state");
    state->threads = ctx->cpu_threads > 0 ? ctx->cpu_threads : omp_get_max_threads();
    ctx->backend_state = state;
    fa_log(ctx, FA_LOG_INFO, "cpu: %d threads, %s kernels", state->threads,
           fa_cpu_kernels_select()->name);
    return FA_OK;
}

static void cpu_context_release(fa_context *ctx)
{
    free(ctx->backend_state);
    ctx->backend_state = NULL;
}

static fa_status cpu_buffer_alloc(fa_context *ctx, size_t size, void **handle)
{
    if (size > SIZE_MAX - 64)
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "cpu: buffer of %zu bytes", size);
    /* aligned_alloc needs a multiple of the alignment; size 0 still gets a real pointer */
    size_t rounded = size == 0 ? 64 : (size + 63) / 64 * 64;
    void *p = fa_aligned_alloc(64, rounded);
    if (!p)
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY,
                       "cpu: cannot allocate a buffer of %zu bytes", size);
    *handle = p;
    return FA_OK;
}

static void cpu_buffer_free(fa_context *ctx, void *handle)
{
    (void)ctx;
    fa_aligned_free(handle);
}

/* Host memory the caller owns is used as it is: the handle is its address. */
static fa_status cpu_buffer_wrap(fa_context *ctx, uint64_t native, size_t offset, size_t size,
                                 void **handle)
{
    (void)ctx;
    (void)size;
    *handle = (char *)(uintptr_t)native + offset;
    return FA_OK;
}

static void cpu_buffer_unwrap(fa_context *ctx, void *handle)
{
    (void)ctx;
    (void)handle; /* the memory is the caller's */
}

static fa_status cpu_buffer_write(fa_context *ctx, void *handle, size_t offset, const void *src,
                                  size_t size)
{
    (void)ctx;
    if (size)
        memcpy((char *)handle + offset, src, size);
    return FA_OK;
}

static fa_status cpu_buffer_read(fa_context *ctx, void *handle, size_t offset, void *dst,
                                 size_t size)
{
    (void)ctx;
    if (size)
        memcpy(dst, (const char *)handle + offset, size);
    return FA_OK;
}

static fa_status cpu_copy_regions(fa_context *ctx, void *src, void *dst,
                                  const fa_copy_region *regions, size_t n)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++)
        memcpy((char *)dst + regions[i].dst_offset, (const char *)src + regions[i].src_offset,
               regions[i].bytes);
    return FA_OK;
}

static fa_status cpu_synchronize(fa_context *ctx)
{
    (void)ctx;
    return FA_OK; /* every call completes before it returns */
}

const fa_backend_iface fa_cpu_backend_iface = {
    .id = FA_BACKEND_CPU,
    .name = "cpu",
    .seqlens_k = true,
    .paged_kv = true,
    .window = true,  /* every call, the decoding items included (cpu_mask.h) */
    .softcap = true, /* likewise */
    .alibi = true,   /* likewise */
    .bias = true,    /* likewise */
    .fp8 = true,     /* e4m3 inputs converted exactly to f32 as they are read */
    .probe = cpu_probe,
    .device_info = cpu_device_info,
    .context_init = cpu_context_init,
    .context_release = cpu_context_release,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_free = cpu_buffer_free,
    .buffer_wrap = cpu_buffer_wrap,
    .buffer_unwrap = cpu_buffer_unwrap,
    .unwrap_without_wait = true, /* every call has finished when it returns */
    .buffer_write = cpu_buffer_write,
    .buffer_read = cpu_buffer_read,
    .synchronize = cpu_synchronize,
    .forward = fa_cpu_forward,
    .backward = fa_cpu_backward,
    .copy_regions = cpu_copy_regions,
    .check_call = NULL, /* every valid call is supported */
};
