// SPDX-License-Identifier: MIT
/* The application's own OpenCL objects (include/flashattn/opencl.h): a context that issues its
 * work on the application's in-order queue, and buffers over its cl_mem objects. Everything
 * taken is retained, so that the release paths of opencl_backend.c (clReleaseCommandQueue,
 * clReleaseContext, clReleaseMemObject) serve both kinds alike. */
#include "opencl_backend.h"

#include "fa_cache.h"
#include "flashattn/opencl.h"

#include <stdlib.h>

fa_status fa_cl_context_adopt(fa_context *ctx, const void *app_objects, int *index)
{
    const fa_opencl_objects *app = app_objects;
    const cl_context context = (cl_context)(uintptr_t)app->context;
    const cl_command_queue queue = (cl_command_queue)(uintptr_t)app->queue;
    cl_context queue_context = NULL;
    cl_device_id device = NULL;
    cl_command_queue_properties props = 0;
    cl_int err = fa_cl.clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof queue_context,
                                             &queue_context, NULL);
    if (err == CL_SUCCESS)
        err = fa_cl.clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof device, &device, NULL);
    if (err == CL_SUCCESS)
        err = fa_cl.clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
    if (err != CL_SUCCESS)
        return fa_cl_fail(ctx, "clGetCommandQueueInfo", err);
    if (queue_context != context)
        return fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT,
                       "opencl: the queue belongs to another cl_context than the one given");
    if (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED,
                       "opencl: the queue runs out of order; the library orders its work by the "
                       "queue's order, so it needs an in-order queue");
    const fa_cl_device *dev = NULL;
    int i = 0;
    for (; (dev = fa_cl_device_get(i)) != NULL; i++)
        if (dev->id == device)
            break;
    if (!dev)
        return fa_fail(ctx, FA_ERROR_INVALID_DEVICE,
                       "opencl: the queue's device is not one the OpenCL backend lists");
    fa_cl_state *st = calloc(1, sizeof *st);
    if (!st)
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "cannot allocate the OpenCL state");
    err = fa_cl.clRetainContext(context);
    if (err == CL_SUCCESS && (err = fa_cl.clRetainCommandQueue(queue)) != CL_SUCCESS)
        fa_cl.clReleaseContext(context);
    if (err != CL_SUCCESS) {
        free(st);
        return fa_cl_fail(ctx, "clRetainCommandQueue", err);
    }
    *st = (fa_cl_state){.dev = dev, .context = context, .queue = queue};
    ctx->backend_state = st;
    fa_cache_trim(ctx);
    *index = i;
    return FA_OK;
}

fa_status fa_cl_buffer_wrap(fa_context *ctx, uint64_t native, size_t offset, size_t size,
                            void **handle)
{
    const fa_cl_state *st = ctx->backend_state;
    const cl_mem mem = (cl_mem)(uintptr_t)native;
    cl_context owner = NULL;
    size_t bytes = 0;
    cl_int err = fa_cl.clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof owner, &owner, NULL);
    if (err == CL_SUCCESS)
        err = fa_cl.clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof bytes, &bytes, NULL);
    if (err != CL_SUCCESS)
        return fa_fail(ctx, FA_ERROR_FOREIGN_BUFFER,
                       "fa_buffer_wrap_opencl: not a memory object (clGetMemObjectInfo: %s)",
                       fa_cl_error_name(err));
    if (owner != st->context)
        return fa_fail(ctx, FA_ERROR_FOREIGN_BUFFER,
                       "fa_buffer_wrap_opencl: the cl_mem belongs to another cl_context");
    if (offset > bytes || size > bytes - offset)
        return fa_fail(ctx, FA_ERROR_OUT_OF_BOUNDS,
                       "fa_buffer_wrap_opencl: bytes [%zu, %zu + %zu) lie outside a cl_mem of "
                       "%zu bytes",
                       offset, offset, size, bytes);
    if (offset == 0) {
        err = fa_cl.clRetainMemObject(mem);
        if (err != CL_SUCCESS)
            return fa_cl_fail(ctx, "clRetainMemObject", err);
        *handle = mem;
        return FA_OK;
    }
    /* OpenCL refuses empty sub-buffers; an empty fa_buffer still needs a handle. */
    const cl_buffer_region region = {offset, size ? size : 1};
    if (!size && offset == bytes)
        return fa_fail(ctx, FA_ERROR_OUT_OF_BOUNDS,
                       "fa_buffer_wrap_opencl: an empty range at the end of the cl_mem");
    cl_mem sub = fa_cl.clCreateSubBuffer(mem, 0, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
    if (err == CL_MISALIGNED_SUB_BUFFER_OFFSET)
        return fa_fail(ctx, FA_ERROR_INVALID_ARGUMENT,
                       "fa_buffer_wrap_opencl: offset %zu is not a multiple of the device's "
                       "CL_DEVICE_MEM_BASE_ADDR_ALIGN; wrap from offset 0 and give the tensors "
                       "the byte offset instead",
                       offset);
    if (err != CL_SUCCESS)
        return fa_cl_fail(ctx, "clCreateSubBuffer", err);
    *handle = sub;
    return FA_OK;
}
