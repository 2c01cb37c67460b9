// SPDX-License-Identifier: MIT
/* The OpenCL backend: what its files share. Device listing (opencl_device.c), programs and
 * their caches (opencl_program.c), contexts and buffers (opencl_backend.c), attention launches
 * (opencl_attention.c). */
#ifndef FA_OPENCL_BACKEND_H
#define FA_OPENCL_BACKEND_H

#include "fa_internal.h"
#include "opencl_loader.h"

extern const fa_backend_iface fa_opencl_backend_iface;

/* One device as found at probe time, with the limits kernels are sized from. */
typedef struct fa_cl_device {
    cl_platform_id platform;
    cl_device_id id;
    fa_device_info info;
    uint64_t local_mem_bytes;
    size_t max_workgroup;
    bool fp64;
    bool nv_compiler_options; /* cl_nv_compiler_options: -cl-nv-maxrregcount is accepted */
} fa_cl_device;

bool fa_cl_probe(int *device_count, char *reason, size_t reason_size);
void fa_cl_device_info(int index, fa_device_info *out);
const fa_cl_device *fa_cl_device_get(int index);

/* A built program and its kernels, cached per context by its build options. */
enum { FA_CL_MAX_KERNELS = 4 };
typedef struct fa_cl_program {
    char *options;
    cl_program program;
    cl_kernel kernels[FA_CL_MAX_KERNELS];
    size_t kernel_wg[FA_CL_MAX_KERNELS]; /* CL_KERNEL_WORK_GROUP_SIZE of each */
    struct fa_cl_program *next;
} fa_cl_program;

/* Per-context state (ctx->backend_state). `delta` is the backward's workspace, kept and grown. */
typedef struct fa_cl_state {
    const fa_cl_device *dev;
    cl_context context;
    cl_command_queue queue;
    fa_cl_program *programs;
    cl_mem delta;
    size_t delta_bytes;
} fa_cl_state;

/* opencl_interop.c: a context on the application's cl_context and in-order queue
 * (fa_opencl_objects; iface context_adopt), and buffers over its cl_mem objects (iface
 * buffer_wrap). */
fa_status fa_cl_context_adopt(fa_context *ctx, const void *app, int *index);
fa_status fa_cl_buffer_wrap(fa_context *ctx, uint64_t native, size_t offset, size_t size,
                            void **handle);

/* Maps a failed CL call to a status: out of device memory for CL_OUT_OF_RESOURCES and
 * CL_MEM_OBJECT_ALLOCATION_FAILURE, out of host memory for CL_OUT_OF_HOST_MEMORY, else a device
 * error; the message names the call and the code ("clFinish: CL_INVALID_VALUE (-30)"). */
fa_status fa_cl_fail(fa_context *ctx, const char *call, cl_int err);

/* Which source a program is built from; each has its kernels in a fixed order. */
typedef enum fa_cl_source {
    FA_CL_SOURCE_FORWARD,
    FA_CL_SOURCE_BACKWARD,
    FA_CL_SOURCE_DECODE
} fa_cl_source;

/* The program for `source` built with `options` (-D defines), from the context's cache, the
 * disk cache or the embedded source, in that order. A failed build returns
 * FA_ERROR_KERNEL_BUILD with the build log in the context's message. */
fa_status fa_cl_program_get(fa_context *ctx, fa_cl_source source, const char *options,
                            fa_cl_program **out);
void fa_cl_programs_release(fa_cl_state *st);

fa_status fa_cl_forward(fa_context *ctx, const fa_attention_call *call);
fa_status fa_cl_backward(fa_context *ctx, const fa_attention_call *call);
fa_status fa_cl_check_call(fa_context *ctx, const fa_attention_call *call, bool backward);

#endif
