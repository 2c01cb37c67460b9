// SPDX-License-Identifier: MIT
/* An application with its own OpenCL context, queue and buffers runs attention on them with no
 * host copy: it writes Q, K and V with its own commands (K and V in one cl_mem, V at an offset),
 * hands its queue and buffers to flashattn, and reads O back with its own command on the same
 * in-order queue. Checked against a float64 computation. Exit status 0 when within 1e-4, 77 when
 * the machine has no OpenCL device (skipped), 1 otherwise. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <flashattn/opencl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { B = 1, S = 96, H = 2, D = 32 };

/* O for one (query i, head h), in float64, non-causal. */
static double reference(const float *q, const float *k, const float *v, int i, int h, int d,
                        double scale)
{
    double m = -INFINITY, l = 0.0, acc = 0.0;
    double s[S];
    for (int j = 0; j < S; j++) {
        double dot = 0.0;
        for (int e = 0; e < D; e++)
            dot += (double)q[(i * H + h) * D + e] * k[(j * H + h) * D + e];
        s[j] = dot * scale;
        m = s[j] > m ? s[j] : m;
    }
    for (int j = 0; j < S; j++) {
        const double p = exp(s[j] - m);
        l += p;
        acc += p * v[(j * H + h) * D + d];
    }
    return acc / l;
}

int main(void)
{
    cl_platform_id platforms[8];
    cl_uint n_platforms = 0;
    cl_device_id device = NULL;
    if (clGetPlatformIDs(8, platforms, &n_platforms) != CL_SUCCESS || n_platforms == 0) {
        printf("no OpenCL platform: skipped\n");
        return 77;
    }
    for (cl_uint p = 0; p < n_platforms && !device; p++) /* a GPU first, else any device */
        if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_GPU, 1, &device, NULL) != CL_SUCCESS)
            device = NULL;
    for (cl_uint p = 0; p < n_platforms && !device; p++)
        if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 1, &device, NULL) != CL_SUCCESS)
            device = NULL;
    if (!device) {
        printf("no OpenCL device: skipped\n");
        return 77;
    }
    cl_int err = CL_SUCCESS;
    cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_command_queue queue =
        err == CL_SUCCESS ? clCreateCommandQueue(context, device, 0, &err) : NULL;
    if (err != CL_SUCCESS) {
        fprintf(stderr, "the application's context or queue: %d\n", (int)err);
        return 1;
    }

    /* V starts at the device's sub-buffer alignment past K's end, in the same cl_mem. */
    cl_uint align_bits = 0;
    clGetDeviceInfo(device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL);
    const size_t n = (size_t)B * S * H * D, bytes = n * sizeof(float);
    const size_t align = align_bits >= 8 ? align_bits / 8 : 1;
    const size_t v_offset = (bytes + align - 1) / align * align;
    float *q = malloc(bytes), *k = malloc(bytes), *v = malloc(bytes), *o = malloc(bytes);
    for (size_t i = 0; i < n; i++) {
        q[i] = sinf((float)i * 0.37f);
        k[i] = cosf((float)i * 0.11f);
        v[i] = sinf((float)i * 0.05f + 1.0f);
    }
    cl_mem mq = clCreateBuffer(context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    cl_mem mkv = clCreateBuffer(context, CL_MEM_READ_WRITE, v_offset + bytes, NULL, &err);
    cl_mem mo = clCreateBuffer(context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    cl_mem mlse = clCreateBuffer(context, CL_MEM_READ_WRITE, (size_t)B * H * S * 4, NULL, &err);
    /* the application's own writes, not blocking: the queue orders them before the attention */
    clEnqueueWriteBuffer(queue, mq, CL_FALSE, 0, bytes, q, 0, NULL, NULL);
    clEnqueueWriteBuffer(queue, mkv, CL_FALSE, 0, bytes, k, 0, NULL, NULL);
    clEnqueueWriteBuffer(queue, mkv, CL_FALSE, v_offset, bytes, v, 0, NULL, NULL);

    fa_context *ctx = NULL;
    const fa_opencl_objects app = {.context = (uint64_t)(uintptr_t)context,
                                   .queue = (uint64_t)(uintptr_t)queue};
    fa_status st = fa_context_create_opencl(NULL, &app, &ctx);
    if (st != FA_OK) {
        fprintf(stderr, "fa_context_create_opencl: %s: %s\n", fa_status_name(st),
                fa_last_create_error());
        return 1;
    }
    fa_buffer *bq, *bk, *bv, *bo, *blse;
    if ((st = fa_buffer_wrap_opencl(ctx, (uint64_t)(uintptr_t)mq, 0, bytes, &bq)) ||
        (st = fa_buffer_wrap_opencl(ctx, (uint64_t)(uintptr_t)mkv, 0, bytes, &bk)) ||
        (st = fa_buffer_wrap_opencl(ctx, (uint64_t)(uintptr_t)mkv, v_offset, bytes, &bv)) ||
        (st = fa_buffer_wrap_opencl(ctx, (uint64_t)(uintptr_t)mo, 0, bytes, &bo)) ||
        (st = fa_buffer_wrap_opencl(ctx, (uint64_t)(uintptr_t)mlse, 0, (size_t)B * H * S * 4,
                                    &blse))) {
        fprintf(stderr, "fa_buffer_wrap_opencl: %s: %s\n", fa_status_name(st),
                fa_context_last_error(ctx));
        return 1;
    }
    const fa_tensor tq = fa_tensor_bshd(bq, FA_DTYPE_F32, B, S, H, D);
    const fa_tensor tk = fa_tensor_bshd(bk, FA_DTYPE_F32, B, S, H, D);
    const fa_tensor tv = fa_tensor_bshd(bv, FA_DTYPE_F32, B, S, H, D);
    const fa_tensor to = fa_tensor_bshd(bo, FA_DTYPE_F32, B, S, H, D);
    const fa_tensor tl = fa_tensor_lse(blse, B, H, S);
    st = fa_attention_forward(ctx, &(fa_attention_desc){0}, &tq, &tk, &tv, &to, &tl);
    if (st != FA_OK) {
        fprintf(stderr, "fa_attention_forward: %s: %s\n", fa_status_name(st),
                fa_context_last_error(ctx));
        return 1;
    }
    /* the application's own read, behind the attention in the same queue */
    err = clEnqueueReadBuffer(queue, mo, CL_TRUE, 0, bytes, o, 0, NULL, NULL);

    double worst = 0.0;
    for (int i = 0; i < S; i++)
        for (int h = 0; h < H; h++)
            for (int d = 0; d < D; d++) {
                const double want = reference(q, k, v, i, h, d, 1.0 / sqrt((double)D));
                const double e = fabs(o[(i * H + h) * D + d] - want);
                worst = e > worst ? e : worst;
            }
    char name[256] = "";
    clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof name, name, NULL);
    printf("opencl interop on %s: worst |O - float64| = %.3g\n", name, worst);

    fa_context_destroy(ctx); /* forgets the wrapped buffers and releases what it retained */
    clReleaseMemObject(mq);
    clReleaseMemObject(mkv);
    clReleaseMemObject(mo);
    clReleaseMemObject(mlse);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
    free(q), free(k), free(v), free(o);
    return err == CL_SUCCESS && worst < 1e-4 ? 0 : 1;
}
