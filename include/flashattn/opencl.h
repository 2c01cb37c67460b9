// SPDX-License-Identifier: MIT
/* flashattn on an application's own OpenCL objects: a context that issues its work on the
 * application's command queue, and buffers over the application's cl_mem objects, so that
 * attention runs on data the application already holds, with no host copy. Handles pass as
 * 64-bit values (a cl_context is `(uint64_t)(uintptr_t)context`), so this header needs no
 * OpenCL headers.
 *
 * Ordering: the library enqueues its work on the given queue, which must be in order; work the
 * application enqueued there before a call runs before it, and work it enqueues after runs after
 * it. fa_context_synchronize is clFinish on that queue. The library's own buffers, programs and
 * workspace live in the application's cl_context. */
#ifndef FLASHATTN_OPENCL_H
#define FLASHATTN_OPENCL_H

#include "../flashattn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The application's OpenCL objects. The library retains both for the fa_context's life
 * (clRetainContext, clRetainCommandQueue) and releases them in fa_context_destroy. */
typedef struct fa_opencl_objects {
    uint64_t context;     /* cl_context */
    uint64_t queue;       /* cl_command_queue of `context`, in order, on one of its devices */
    uint64_t reserved[4]; /* zero (ABI, flashattn.h) */
} fa_opencl_objects;

/** Opens an OpenCL context on the application's queue. `desc` as for fa_context_create (NULL:
 * defaults), with its backend AUTO or OPENCL and its device ignored: the device is the queue's,
 * which must be one that the OpenCL backend lists (fa_device_query). ERROR_UNSUPPORTED for an
 * out-of-order queue; ERROR_INVALID_ARGUMENT when the queue does not belong to the context;
 * ERROR_INVALID_DEVICE when its device is not listed; ERROR_BACKEND_UNAVAILABLE without an
 * OpenCL loader. */
FA_API fa_status fa_context_create_opencl(const fa_context_desc *desc, const fa_opencl_objects *app,
                                          fa_context **out);

/** A buffer over `bytes` of the application's cl_mem `mem` from byte `offset`, which must belong
 * to the context's cl_context (an OpenCL context created by fa_context_create_opencl, or by
 * fa_context_create, whose cl_context is the library's own). The library retains `mem` (or, for
 * a nonzero offset, makes a sub-buffer, whose origin must be a multiple of the device's
 * CL_DEVICE_MEM_BASE_ADDR_ALIGN bits / 8: ERROR_INVALID_ARGUMENT otherwise; a zero offset with
 * the tensors' own byte offsets always works) and releases it in fa_buffer_destroy.
 * ERROR_UNSUPPORTED on other backends; ERROR_FOREIGN_BUFFER when `mem` belongs to another
 * cl_context; ERROR_OUT_OF_BOUNDS when the range runs past its end. */
FA_API fa_status fa_buffer_wrap_opencl(fa_context *ctx, uint64_t mem, size_t offset, size_t bytes,
                                       fa_buffer **out);

#ifdef __cplusplus
}
#endif

#endif
