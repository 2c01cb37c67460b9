// SPDX-License-Identifier: MIT
/* The CUDA backend's interface: the driver opened at run time, devices listed once, each
 * context working in its device's primary context (so pointers of other CUDA users in the
 * process stay valid there) on a stream of its own, with the kernels loaded from the fatbin
 * embedded at build time. Launches are asynchronous; reads and synchronize wait. */
#include "cuda_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../shaders/cuda/fa_cuda_abi.h"
#include "fa_platform.h"

extern const unsigned char fa_cuda_fatbin[];
extern const size_t fa_cuda_fatbin_size;
extern const unsigned char fa_cuda_fatbin_sm90[];
extern const size_t fa_cuda_fatbin_sm90_size;

#define FA_CUDA_MAX_DEVICES 64

typedef struct cuda_device {
    CUdevice handle;
    fa_device_info info;
} cuda_device;

static const fa_cuda_driver *driver;
static int device_count;
static cuda_device devices[FA_CUDA_MAX_DEVICES];

static int attribute(CUdevice dev, int attr)
{
    int value = 0;
    if (driver->cuDeviceGetAttribute(&value, attr, dev) != CUDA_SUCCESS)
        return 0;
    return value;
}

static void describe(cuda_device *d, int index)
{
    fa_device_info *out = &d->info;
    memset(out, 0, sizeof *out);
    out->backend = FA_BACKEND_CUDA;
    out->index = index;
    if (driver->cuDeviceGetName(out->name, (int)sizeof out->name, d->handle) != CUDA_SUCCESS)
        snprintf(out->name, sizeof out->name, "CUDA device %d", index);
    snprintf(out->vendor, sizeof out->vendor, "NVIDIA");
    snprintf(out->driver, sizeof out->driver, "CUDA driver %d.%d", driver->version / 1000,
             driver->version % 1000 / 10);
    out->api_major = attribute(d->handle, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    out->api_minor = attribute(d->handle, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    snprintf(out->api_version, sizeof out->api_version, "%d.%d", out->api_major, out->api_minor);
    out->kind = attribute(d->handle, CU_DEVICE_ATTRIBUTE_INTEGRATED) ? FA_DEVICE_KIND_INTEGRATED_GPU
                                                                     : FA_DEVICE_KIND_DISCRETE_GPU;
    size_t total = 0;
    if (driver->cuDeviceTotalMem(&total, d->handle) == CUDA_SUCCESS)
        out->memory_bytes = total;
    out->max_buffer_bytes = out->memory_bytes;
    out->compute_units = (uint32_t)attribute(d->handle, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    int smem = attribute(d->handle, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    if (smem <= 0)
        smem = attribute(d->handle, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
    out->shared_memory_bytes = (uint32_t)smem;
    out->max_workgroup_size =
        (uint32_t)attribute(d->handle, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    int warp = attribute(d->handle, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
    out->subgroup_size_min = out->subgroup_size_max = (uint32_t)(warp > 0 ? warp : 32);
    out->f16 = out->api_major > 5 || (out->api_major == 5 && out->api_minor >= 3);
    out->bf16 = out->api_major >= 8;
    out->matrix_units = out->api_major >= 7;
}

static bool cuda_probe(int *count, char *reason, size_t reason_size)
{
    *count = 0;
    driver = fa_cuda_driver_load(reason, reason_size);
    if (!driver)
        return false;
    int n = 0;
    CUresult r = driver->cuDeviceGetCount(&n);
    if (r != CUDA_SUCCESS || n <= 0) {
        char text[128];
        snprintf(reason, reason_size, "no CUDA device%s%s", r != CUDA_SUCCESS ? ": " : "",
                 r != CUDA_SUCCESS ? fa_cuda_error_text(driver, r, text, sizeof text) : "");
        return false;
    }
    if (n > FA_CUDA_MAX_DEVICES)
        n = FA_CUDA_MAX_DEVICES;
    for (int i = 0; i < n; i++) {
        if (driver->cuDeviceGet(&devices[device_count].handle, i) != CUDA_SUCCESS)
            continue;
        describe(&devices[device_count], device_count);
        device_count++;
    }
    *count = device_count;
    if (device_count == 0)
        snprintf(reason, reason_size, "no CUDA device could be opened");
    return device_count > 0;
}

static void cuda_device_info(int index, fa_device_info *out)
{
    *out = devices[index].info;
}

fa_status fa_cuda_fail(fa_context *ctx, CUresult result, const char *what)
{
    fa_cuda_state *st = ctx->backend_state;
    char text[160];
    fa_cuda_error_text(st ? st->cu : driver, result, text, sizeof text);
    fa_status status = FA_ERROR_DEVICE;
    switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
        status = FA_ERROR_OUT_OF_DEVICE_MEMORY;
        break;
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
        status = FA_ERROR_DEVICE_LOST;
        break;
    default:
        break;
    }
    return fa_fail(ctx, status, "cuda: %s: %s", what, text); /* a loss: the runtime latches it */
}

fa_status fa_cuda_enter(fa_context *ctx)
{
    fa_cuda_state *st = ctx->backend_state;
    CUresult r = st->cu->cuCtxPushCurrent(st->context);
    return r == CUDA_SUCCESS ? FA_OK : fa_cuda_fail(ctx, r, "cuCtxPushCurrent");
}

void fa_cuda_leave(fa_context *ctx)
{
    fa_cuda_state *st = ctx->backend_state;
    CUcontext popped;
    st->cu->cuCtxPopCurrent(&popped);
}

/* cuModuleLoadData of an embedded image (the driver wants it aligned; the array is only
 * byte-aligned). */
static CUresult load_image(fa_cuda_state *st, CUmodule *module, const unsigned char *data,
                           size_t size)
{
    void *image = fa_aligned_alloc(64, (size + 63) / 64 * 64);
    if (!image)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(image, data, size);
    CUresult r = st->cu->cuModuleLoadData(module, image);
    fa_aligned_free(image);
    return r;
}

/* The sm_90a kernels on compute capability 9.0, for the forward and the backward unless
 * FA_CUDA_WGMMA says 0 (neither), fwd or bwd. They only speed things up: where they do not load,
 * the sm_80 kernels serve every call, with a warning. */
static void load_sm90_kernels(fa_context *ctx, fa_cuda_state *st)
{
    const char *env = fa_knob_value(ctx, FA_KNOB_CUDA_WGMMA);
    if (st->caps.cc_major != 9 || st->caps.cc_minor != 0 || (env && strcmp(env, "0") == 0))
        return;
    /* kernel development: FA_CUDA_SM90_IMAGE names a variant fatbin of fa_kernels_sm90.cu built
     * with other kernel-only knobs (e.g. FA_FWD_WGMMA_PINGPONG) */
    const char *file = fa_knob_value(ctx, FA_KNOB_CUDA_SM90_IMAGE);
    CUresult r =
        file ? st->cu->cuModuleLoad(&st->module_sm90, file)
             : load_image(st, &st->module_sm90, fa_cuda_fatbin_sm90, fa_cuda_fatbin_sm90_size);
    const char *name = file ? file : "the sm_90a image";
    for (int i = FA_CUDA_K_SM90_FIRST; r == CUDA_SUCCESS && i < FA_CUDA_K_COUNT; i++) {
        r = st->cu->cuModuleGetFunction(&st->kernels[i], st->module_sm90, fa_cuda_kernels[i].name);
        name = fa_cuda_kernels[i].name;
    }
    if (r == CUDA_SUCCESS) {
        st->caps.wgmma_fwd = !env || strcmp(env, "bwd") != 0;
        st->caps.wgmma_bwd = !env || strcmp(env, "fwd") != 0;
        return;
    }
    const char *text = NULL;
    st->cu->cuGetErrorName(r, &text);
    fa_log(ctx, FA_LOG_WARN, "cuda: the Hopper kernels did not load (%s: %s); using the sm_80 ones",
           name, text ? text : "unknown error");
    for (int i = FA_CUDA_K_SM90_FIRST; i < FA_CUDA_K_COUNT; i++)
        st->kernels[i] = NULL;
    if (st->module_sm90)
        st->cu->cuModuleUnload(st->module_sm90);
    st->module_sm90 = NULL;
}

static fa_status load_kernels(fa_context *ctx, fa_cuda_state *st)
{
    CUresult r = load_image(st, &st->module, fa_cuda_fatbin, fa_cuda_fatbin_size);
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "cuda: cannot copy the kernel image");
    if (r != CUDA_SUCCESS) {
        fa_status s = fa_cuda_fail(ctx, r, "cuModuleLoadData (the embedded kernels)");
        if (r == CUDA_ERROR_NO_BINARY_FOR_GPU)
            return fa_fail(ctx, FA_ERROR_KERNEL_BUILD,
                           "cuda: the embedded kernels hold no code for compute capability %d.%d "
                           "(CUDA_ERROR_NO_BINARY_FOR_GPU); rebuild with a newer CUDA toolkit",
                           st->caps.cc_major, st->caps.cc_minor);
        return s == FA_ERROR_DEVICE ? FA_ERROR_KERNEL_BUILD : s;
    }
    for (int i = 0; i < FA_CUDA_K_SM90_FIRST; i++) {
        r = st->cu->cuModuleGetFunction(&st->kernels[i], st->module, fa_cuda_kernels[i].name);
        if (r != CUDA_SUCCESS) {
            char what[128];
            snprintf(what, sizeof what, "cuModuleGetFunction(%s)", fa_cuda_kernels[i].name);
            fa_cuda_fail(ctx, r, what);
            return FA_ERROR_KERNEL_BUILD;
        }
    }
    load_sm90_kernels(ctx, st);
    return FA_OK;
}

static void release_state(fa_cuda_state *st)
{
    const fa_cuda_driver *cu = st->cu;
    if (st->context) {
        cu->cuCtxPushCurrent(st->context);
        if (st->stream)
            cu->cuStreamSynchronize(st->stream);
        if (st->workspace)
            cu->cuMemFree(st->workspace);
        if (st->index_error)
            cu->cuMemFree(st->index_error);
        if (st->split_done)
            cu->cuMemFree(st->split_done);
        if (st->item_counter)
            cu->cuMemFree(st->item_counter);
        if (st->module)
            cu->cuModuleUnload(st->module);
        if (st->module_sm90)
            cu->cuModuleUnload(st->module_sm90);
        if (st->stream && st->own_stream)
            cu->cuStreamDestroy(st->stream);
        CUcontext popped;
        cu->cuCtxPopCurrent(&popped);
        cu->cuDevicePrimaryCtxRelease(st->device);
    }
    free(st);
}

/* `count` ints of device memory zeroed on the context's stream: the int the split-key forward
 * marks index values out of range in (fa_cuda_params.index_error), its chunk counts
 * (split_done), the causal forward's item counter (item_counter). */
static fa_status alloc_zeroed_ints(fa_context *ctx, fa_cuda_state *st, CUdeviceptr *ptr,
                                   size_t count, const char *what)
{
    CUresult r = st->cu->cuMemAlloc(ptr, count * sizeof(int));
    if (r != CUDA_SUCCESS) {
        *ptr = 0;
        char msg[96];
        snprintf(msg, sizeof msg, "cuMemAlloc of %s", what);
        return fa_cuda_fail(ctx, r, msg);
    }
    r = st->cu->cuMemsetD32Async(*ptr, 0, count, st->stream);
    return r == CUDA_SUCCESS ? FA_OK : fa_cuda_fail(ctx, r, "cuMemsetD32Async");
}

static fa_status cuda_context_init(fa_context *ctx, int index)
{
    const fa_device_info *info = &devices[index].info;
    if (info->api_major < 8)
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED,
                       "cuda: %s has compute capability %s; the CUDA kernels need 8.0 (Ampere) or "
                       "newer: use the vulkan or opencl backend on this device",
                       info->name, info->api_version);
    fa_cuda_state *st = calloc(1, sizeof *st);
    if (!st)
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "cuda: cannot allocate context state");
    st->cu = driver;
    st->device = devices[index].handle;
    fa_cuda_caps *caps = &st->caps;
    caps->cc_major = info->api_major;
    caps->cc_minor = info->api_minor;
    caps->sm_count = (int)info->compute_units;
    caps->smem_optin = (int)info->shared_memory_bytes;
    const char *force = fa_knob_value(ctx, FA_KNOB_CUDA_KERNELS);
    caps->force_general = force && strcmp(force, "general") == 0;
    const char *qtile = fa_knob_value(ctx, FA_KNOB_CUDA_BWD4_QTILE_D64);
    caps->bwd4_q128_d64 = !qtile || atoi(qtile) != FA_BWD4_QTILE;
    const char *fwd_qtile = fa_knob_value(ctx, FA_KNOB_CUDA_FWD_QTILE_D256);
    const int fq = fwd_qtile ? atoi(fwd_qtile) : 0;
    caps->fwd_qtile_d256 = fq == FA_FWD_MMA_BQ_D256 || fq == FA_FWD_MMA_BQ_D256_WIDE ? fq : 0;
    const char *bwd_d256 = fa_knob_value(ctx, FA_KNOB_CUDA_BWD_D256);
    caps->bwd_d256 = !bwd_d256 || strcmp(bwd_d256, "0") != 0;
    const char *bwd_dq = fa_knob_value(ctx, FA_KNOB_CUDA_BWD_DQ);
    caps->bwd_dq_bulk = FA_BWD_WGMMA_DQ_BULK && (!bwd_dq || strcmp(bwd_dq, "atomic") != 0);
    const char *f32 = fa_knob_value(ctx, FA_KNOB_CUDA_F32);
    caps->f32_cores = f32 && strcmp(f32, "cores") == 0;
    const char *decode = fa_knob_value(ctx, FA_KNOB_CUDA_DECODE);
    caps->decode_cores = decode && strcmp(decode, "cores") == 0;
    const char *decode_warps = fa_knob_value(ctx, FA_KNOB_CUDA_DECODE_WARPS);
    caps->decode_warps = decode_warps ? atoi(decode_warps) : 0;
    const char *decode_merge = fa_knob_value(ctx, FA_KNOB_CUDA_DECODE_MERGE);
    caps->decode_merge_kernel = decode_merge && strcmp(decode_merge, "kernel") == 0;
    const char *fwd_copy = fa_knob_value(ctx, FA_KNOB_CUDA_FWD_COPY);
    const bool tma_all = fwd_copy ? strcmp(fwd_copy, "tma") == 0 : FA_FWD_WGMMA_TMA;
    /* =tma128: at head dims 128 and 256 alone, head dim 64 keeping its copying loader */
    caps->fwd_tma = tma_all || (fwd_copy && strcmp(fwd_copy, "tma128") == 0);
    caps->fwd_tma_d64 = tma_all; /* where it pays (cuda_plan.c) */
    const char *bwd_copy = fa_knob_value(ctx, FA_KNOB_CUDA_BWD_COPY);
    caps->bwd_tma = bwd_copy ? strcmp(bwd_copy, "tma") == 0 : FA_BWD_WGMMA_TMA;
    ctx->backend_state = st;

    fa_status status = FA_OK;
    CUresult r = driver->cuDevicePrimaryCtxRetain(&st->context, st->device);
    if (r != CUDA_SUCCESS) {
        status = fa_cuda_fail(ctx, r, "cuDevicePrimaryCtxRetain");
        st->context = NULL;
        goto fail;
    }
    if ((status = fa_cuda_enter(ctx)) != FA_OK) {
        driver->cuDevicePrimaryCtxRelease(st->device);
        st->context = NULL;
        goto fail;
    }
    if (ctx->cuda_stream) {
        st->stream = (CUstream)ctx->cuda_stream;
        r = CUDA_SUCCESS;
    } else {
        r = driver->cuStreamCreate(&st->stream, CU_STREAM_NON_BLOCKING);
        st->own_stream = r == CUDA_SUCCESS;
    }
    if (r != CUDA_SUCCESS) {
        status = fa_cuda_fail(ctx, r, "cuStreamCreate");
        st->stream = NULL;
    } else {
        status = load_kernels(ctx, st);
    }
    if (status == FA_OK)
        status = alloc_zeroed_ints(ctx, st, &st->index_error, 1, "the index error flag");
    if (status == FA_OK)
        status = alloc_zeroed_ints(ctx, st, &st->split_done, FA_DEC_DONE_SLOTS,
                                   "the split-key chunk counts");
    if (status == FA_OK)
        status = alloc_zeroed_ints(ctx, st, &st->item_counter, 2, "the forward's item counter");
    fa_cuda_leave(ctx);
    if (status != FA_OK)
        goto fail;
    fa_log(ctx, FA_LOG_INFO, "cuda: %s, compute capability %d.%d, %u SMs%s%s%s%s%s%s%s", info->name,
           caps->cc_major, caps->cc_minor, info->compute_units,
           caps->wgmma_fwd && caps->wgmma_bwd ? ", Hopper (wgmma) forward (FP8 too) and backward"
           : caps->wgmma_fwd                  ? ", Hopper (wgmma) forward (FP8 too)"
           : caps->wgmma_bwd                  ? ", Hopper (wgmma) backward"
                                              : "",
           caps->force_general ? ", general kernels only (FA_CUDA_KERNELS=general)" : "",
           caps->bwd4_q128_d64 ? "" : ", backward v4 with 64-row query tiles at head dim 64",
           caps->fwd_qtile_d256 == FA_FWD_MMA_BQ_D256_WIDE
               ? ", forward with 128-row query blocks at head dim 256"
           : caps->fwd_qtile_d256 ? ", forward with 64-row query blocks at head dim 256"
                                  : "",
           caps->bwd_d256 ? "" : ", general backward at head dims 129-256 (FA_CUDA_BWD_D256=0)",
           caps->decode_cores ? ", decoding on CUDA cores (FA_CUDA_DECODE=cores)" : "",
           caps->f32_cores ? ", the f32 forward on CUDA cores (FA_CUDA_F32=cores)" : "");
    return FA_OK;
fail:
    release_state(st);
    ctx->backend_state = NULL;
    return status;
}

static void cuda_context_release(fa_context *ctx)
{
    fa_cuda_state *st = ctx->backend_state;
    if (!st)
        return;
    if (st->workspace)
        fa_workspace_track(ctx, -(int64_t)st->workspace_bytes);
    release_state(st);
    ctx->backend_state = NULL;
}

static fa_status cuda_buffer_alloc(fa_context *ctx, size_t size, void **handle)
{
    fa_cuda_state *st = ctx->backend_state;
    fa_cuda_buffer *buf = calloc(1, sizeof *buf);
    if (!buf)
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "cuda: cannot allocate a buffer record");
    buf->size = size;
    fa_status status = fa_cuda_enter(ctx);
    if (status != FA_OK) {
        free(buf);
        return status;
    }
    /* size 0 still gets a real allocation, so every buffer has a distinct address */
    CUresult r = st->cu->cuMemAlloc(&buf->ptr, size ? size : 256);
    fa_cuda_leave(ctx);
    if (r != CUDA_SUCCESS) {
        free(buf);
        char what[96];
        snprintf(what, sizeof what, "cuMemAlloc of %zu bytes", size);
        return fa_cuda_fail(ctx, r, what);
    }
    *handle = buf;
    return FA_OK;
}

/* The caller's device memory: it must lie on this context's device, and `size` bytes from `ptr`
 * (native + offset) must stay inside its allocation. */
static fa_status cuda_buffer_wrap(fa_context *ctx, uint64_t native, size_t offset, size_t size,
                                  void **handle)
{
    fa_cuda_state *st = ctx->backend_state;
    const CUdeviceptr ptr = (CUdeviceptr)(native + offset);
    fa_status status = fa_cuda_enter(ctx);
    if (status != FA_OK)
        return status;
    int ordinal = -1;
    CUdeviceptr base = 0;
    size_t bytes = 0;
    CUresult r = st->cu->cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr);
    if (r == CUDA_SUCCESS)
        r = st->cu->cuMemGetAddressRange(&base, &bytes, ptr);
    fa_cuda_leave(ctx);
    if (r != CUDA_SUCCESS || ordinal != (int)st->device)
        return fa_fail(ctx, FA_ERROR_FOREIGN_BUFFER,
                       "fa_buffer_wrap_cuda: 0x%llx is not device memory of CUDA device %d (%s)",
                       (unsigned long long)ptr, (int)st->device,
                       r != CUDA_SUCCESS ? "the driver does not know it" : "another device");
    if (size > bytes - (size_t)(ptr - base))
        return fa_fail(ctx, FA_ERROR_OUT_OF_BOUNDS,
                       "fa_buffer_wrap_cuda: %zu bytes from 0x%llx run past its allocation "
                       "(%zu bytes from 0x%llx)",
                       size, (unsigned long long)ptr, bytes, (unsigned long long)base);
    fa_cuda_buffer *buf = calloc(1, sizeof *buf);
    if (!buf)
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "cuda: cannot allocate a buffer record");
    *buf = (fa_cuda_buffer){.ptr = ptr, .size = size, .wrapped = true};
    *handle = buf;
    return FA_OK;
}

static void cuda_buffer_free(fa_context *ctx, void *handle)
{
    fa_cuda_state *st = ctx->backend_state;
    fa_cuda_buffer *buf = handle;
    if (!buf)
        return;
    if (!buf->wrapped && fa_cuda_enter(ctx) == FA_OK) {
        st->cu->cuMemFree(buf->ptr);
        fa_cuda_leave(ctx);
    }
    free(buf);
}

static fa_status cuda_buffer_write(fa_context *ctx, void *handle, size_t offset, const void *src,
                                   size_t size)
{
    fa_cuda_state *st = ctx->backend_state;
    fa_cuda_buffer *buf = handle;
    fa_status status = fa_cuda_enter(ctx);
    if (status != FA_OK)
        return status;
    /* ordered after the launches on the stream; waits, since `src` is the caller's */
    CUresult r = st->cu->cuMemcpyHtoDAsync(buf->ptr + offset, src, size, st->stream);
    if (r == CUDA_SUCCESS)
        r = st->cu->cuStreamSynchronize(st->stream);
    fa_cuda_leave(ctx);
    return r == CUDA_SUCCESS ? FA_OK : fa_cuda_fail(ctx, r, "writing a buffer");
}

static fa_status cuda_buffer_read(fa_context *ctx, void *handle, size_t offset, void *dst,
                                  size_t size)
{
    fa_cuda_state *st = ctx->backend_state;
    fa_cuda_buffer *buf = handle;
    fa_status status = fa_cuda_enter(ctx);
    if (status != FA_OK)
        return status;
    CUresult r = st->cu->cuMemcpyDtoHAsync(dst, buf->ptr + offset, size, st->stream);
    if (r == CUDA_SUCCESS)
        r = st->cu->cuStreamSynchronize(st->stream);
    fa_cuda_leave(ctx);
    return r == CUDA_SUCCESS ? FA_OK : fa_cuda_fail(ctx, r, "reading a buffer");
}

/* On the context's stream, in order with the launches; returns without waiting. */
static fa_status cuda_copy_regions(fa_context *ctx, void *src, void *dst,
                                   const fa_copy_region *regions, size_t n)
{
    fa_cuda_state *st = ctx->backend_state;
    const fa_cuda_buffer *from = src, *to = dst;
    fa_status status = fa_cuda_enter(ctx);
    if (status != FA_OK)
        return status;
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++)
        r = st->cu->cuMemcpyDtoDAsync(to->ptr + regions[i].dst_offset,
                                      from->ptr + regions[i].src_offset, regions[i].bytes,
                                      st->stream);
    fa_cuda_leave(ctx);
    return r == CUDA_SUCCESS ? FA_OK : fa_cuda_fail(ctx, r, "cuMemcpyDtoDAsync");
}

/* Waits for the stream; then, where a call since the last one read seqlens_k or a block table,
 * reads the index error flag back and, when a kernel set it, clears it and reports it. */
static fa_status cuda_synchronize(fa_context *ctx)
{
    fa_cuda_state *st = ctx->backend_state;
    fa_status status = fa_cuda_enter(ctx);
    if (status != FA_OK)
        return status;
    CUresult r = st->cu->cuStreamSynchronize(st->stream);
    int flag = 0;
    if (r == CUDA_SUCCESS && st->index_pending) {
        r = st->cu->cuMemcpyDtoHAsync(&flag, st->index_error, sizeof flag, st->stream);
        if (r == CUDA_SUCCESS)
            r = st->cu->cuStreamSynchronize(st->stream);
        if (r == CUDA_SUCCESS && flag)
            r = st->cu->cuMemsetD32Async(st->index_error, 0, 1, st->stream);
        if (r == CUDA_SUCCESS && flag)
            r = st->cu->cuStreamSynchronize(st->stream);
        st->index_pending = r != CUDA_SUCCESS;
    }
    fa_cuda_leave(ctx);
    if (r != CUDA_SUCCESS)
        return fa_cuda_fail(ctx, r, "cuStreamSynchronize");
    if (flag)
        return fa_fail(ctx, FA_ERROR_OUT_OF_BOUNDS,
                       "cuda: a call since the last synchronisation had a seqlens_k value outside "
                       "[0, seq_k] or a block_table entry outside [0, num_pages) (the kernels "
                       "clamped it and read no memory outside K and V; that call's outputs are "
                       "undefined)");
    return FA_OK;
}

const fa_backend_iface fa_cuda_backend_iface = {
    .id = FA_BACKEND_CUDA,
    .name = "cuda",
    /* both on the decoding path alone (the split-key forward); fa_cuda_check_call refuses the
     * other calls with them */
    .seqlens_k = true,
    .unwrap_without_wait = true, /* a wrapped buffer's record holds only the address */
    .paged_kv = true,
    .index_check_on_device = true, /* fa_decode*.cuh mark; cuda_synchronize reports */
    .window = true,  /* every kernel but the split-key forward's (cuda_plan.c routes them) */
    .softcap = true, /* likewise */
    .alibi = true,   /* likewise */
    /* the general and wgmma kernels and the mma.sync kernels' *_bias twins, but not the split-key
     * forwards (so not with seqlens_k or block_table: fa_cuda_check_call refuses those), the wgmma
     * backward at head dim 128 or, with a softcap, the twins (cuda_plan.c routes those calls) */
    .bias = true,
    /* on sm_90a alone (the wgmma forward's E4M3 kernel): fa_cuda_check_call refuses the rest */
    .fp8 = true,
    .probe = cuda_probe,
    .device_info = cuda_device_info,
    .context_init = cuda_context_init,
    .context_release = cuda_context_release,
    .buffer_alloc = cuda_buffer_alloc,
    .buffer_free = cuda_buffer_free,
    .buffer_wrap = cuda_buffer_wrap,
    .buffer_write = cuda_buffer_write,
    .buffer_read = cuda_buffer_read,
    .synchronize = cuda_synchronize,
    .forward = fa_cuda_forward,
    .backward = fa_cuda_backward,
    .copy_regions = cuda_copy_regions,
    .check_call = fa_cuda_check_call,
    .varlen_takes = fa_cuda_varlen_takes, /* on the tensor-core kernels */
};
