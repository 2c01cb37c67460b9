// SPDX-License-Identifier: MIT
/* flashattn on the application's own OpenCL objects (flashattn/opencl.h): what the context and
 * the buffers refuse, and that the application's objects outlive the library's use of them.
 * The attention itself on such objects runs in examples/opencl_interop.c. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <criterion/criterion.h>
#include <flashattn/opencl.h>

#include <stdint.h>

static cl_device_id device;
static cl_context context;
static cl_command_queue queue;

/* The first OpenCL device (PoCL here), its context and an in-order queue; skips without one. */
static void setup(void)
{
    cl_platform_id platform;
    cl_uint n = 0;
    if (clGetPlatformIDs(1, &platform, &n) != CL_SUCCESS || n == 0 ||
        clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL) != CL_SUCCESS)
        cr_skip_test("no OpenCL device");
    cl_int err = CL_SUCCESS;
    context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cr_assert_eq(err, CL_SUCCESS);
    queue = clCreateCommandQueue(context, device, 0, &err);
    cr_assert_eq(err, CL_SUCCESS);
}

static void teardown(void)
{
    if (queue)
        clReleaseCommandQueue(queue);
    if (context)
        clReleaseContext(context);
}

static uint64_t handle(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

static fa_context *open_on_app(void)
{
    fa_context *ctx = NULL;
    const fa_opencl_objects app = {.context = handle(context), .queue = handle(queue)};
    cr_assert_eq(fa_context_create_opencl(NULL, &app, &ctx), FA_OK, "%s", fa_last_create_error());
    cr_assert_eq(fa_context_backend(ctx), FA_BACKEND_OPENCL);
    return ctx;
}

TestSuite(opencl_interop, .init = setup, .fini = teardown);

Test(opencl_interop, refuses_what_it_cannot_order_or_find)
{
    fa_context *ctx = NULL;
    fa_opencl_objects app = {.context = handle(context), .queue = 0};
    cr_expect_eq(fa_context_create_opencl(NULL, &app, &ctx), FA_ERROR_NULL_POINTER);
    cr_expect_eq(fa_context_create_opencl(NULL, NULL, &ctx), FA_ERROR_NULL_POINTER);
    app.queue = handle(queue);
    cr_expect_eq(
        fa_context_create_opencl(&(fa_context_desc){.backend = FA_BACKEND_CPU}, &app, &ctx),
        FA_ERROR_INVALID_BACKEND);
    app.reserved[1] = 1;
    cr_expect_eq(fa_context_create_opencl(NULL, &app, &ctx), FA_ERROR_INVALID_ARGUMENT);
    app.reserved[1] = 0;
    /* a queue of another context than the one named */
    cl_int err = CL_SUCCESS;
    cl_context other = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cr_assert_eq(err, CL_SUCCESS);
    app.context = handle(other);
    cr_expect_eq(fa_context_create_opencl(NULL, &app, &ctx), FA_ERROR_INVALID_ARGUMENT);
    cr_expect(strstr(fa_last_create_error(), "another cl_context"), "%s", fa_last_create_error());
    /* an out-of-order queue */
    cl_command_queue loose =
        clCreateCommandQueue(context, device, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &err);
    if (err == CL_SUCCESS) {
        app = (fa_opencl_objects){.context = handle(context), .queue = handle(loose)};
        cr_expect_eq(fa_context_create_opencl(NULL, &app, &ctx), FA_ERROR_UNSUPPORTED);
        cr_expect(strstr(fa_last_create_error(), "in-order"), "%s", fa_last_create_error());
        clReleaseCommandQueue(loose);
    }
    cr_expect_null(ctx);
    clReleaseContext(other);
}

Test(opencl_interop, wraps_only_its_own_memory_within_bounds)
{
    fa_context *ctx = open_on_app();
    cl_int err = CL_SUCCESS;
    cl_mem mem = clCreateBuffer(context, CL_MEM_READ_WRITE, 4096, NULL, &err);
    cr_assert_eq(err, CL_SUCCESS);
    cl_context other = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_mem foreign = clCreateBuffer(other, CL_MEM_READ_WRITE, 4096, NULL, &err);
    cr_assert_eq(err, CL_SUCCESS);
    fa_buffer *buf = NULL;
    cr_expect_eq(fa_buffer_wrap_opencl(ctx, handle(foreign), 0, 64, &buf), FA_ERROR_FOREIGN_BUFFER);
    cr_expect_eq(fa_buffer_wrap_opencl(ctx, handle(mem), 0, 4097, &buf), FA_ERROR_OUT_OF_BOUNDS);
    cr_expect_eq(fa_buffer_wrap_opencl(ctx, handle(mem), 4000, 200, &buf), FA_ERROR_OUT_OF_BOUNDS);
    cr_expect_eq(fa_buffer_wrap_opencl(ctx, 0, 0, 64, &buf), FA_ERROR_NULL_POINTER);
    /* an offset off the device's alignment (a byte past 0 is off every alignment but 1) */
    cl_uint align_bits = 0;
    clGetDeviceInfo(device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL);
    if (align_bits > 8)
        cr_expect_eq(fa_buffer_wrap_opencl(ctx, handle(mem), 1, 64, &buf),
                     FA_ERROR_INVALID_ARGUMENT);
    cr_expect_null(buf);
    /* wrapped, written and read through flashattn, seen by the application's own read */
    cr_assert_eq(fa_buffer_wrap_opencl(ctx, handle(mem), 0, 4096, &buf), FA_OK);
    const float x[4] = {1, 2, 3, 4};
    float y[4] = {0};
    cr_assert_eq(fa_buffer_write(buf, 16, x, sizeof x), FA_OK);
    cr_assert_eq(clEnqueueReadBuffer(queue, mem, CL_TRUE, 16, sizeof y, y, 0, NULL, NULL),
                 CL_SUCCESS);
    cr_expect_arr_eq(x, y, sizeof x);
    fa_context_destroy(ctx);
    /* the application's objects are still its own: usable after the context is gone */
    cr_expect_eq(clEnqueueWriteBuffer(queue, mem, CL_TRUE, 0, sizeof x, x, 0, NULL, NULL),
                 CL_SUCCESS);
    cr_expect_eq(clFinish(queue), CL_SUCCESS);
    clReleaseMemObject(mem);
    clReleaseMemObject(foreign);
    clReleaseContext(other);
}

Test(opencl_interop, other_backends_refuse_opencl_memory)
{
    fa_context *cpu = NULL;
    cr_assert_eq(fa_context_create(&(fa_context_desc){.backend = FA_BACKEND_CPU}, &cpu), FA_OK);
    cl_int err = CL_SUCCESS;
    cl_mem mem = clCreateBuffer(context, CL_MEM_READ_WRITE, 64, NULL, &err);
    fa_buffer *buf = NULL;
    cr_expect_eq(fa_buffer_wrap_opencl(cpu, handle(mem), 0, 64, &buf), FA_ERROR_UNSUPPORTED);
    fa_context_destroy(cpu);
    clReleaseMemObject(mem);
}
