/* Attention launches: choosing tile sizes from the device's local memory and work-group limits,
 * building the matching program, and enqueueing the forward and backward kernels (in order,
 * asynchronously). The kernels and their tiling are described in shaders/opencl/. */
#include "opencl_backend.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG2E 1.4426950408889634f

/* One kernel configuration: work-items per group, query and key rows per tile, work-items along
 * the columns of each register tile (see fa_common.cl), and its local memory. */
typedef struct tiles {
    int nt, bm, bn, s_tx, o_tx, k_tx;
    size_t local_bytes;
} tiles;

/* Work-items along the columns of a rows x cols tile spread over nt work-items: the split whose
 * per-work-item block has the fewest loads per product (rows/ty + cols/tx), ties to more
 * work-items along the (contiguous) columns; 0 when none divides the tile. */
static int choose_tx(int rows, int cols, int nt)
{
    int best = 0, best_cost = INT_MAX;
    for (int tx = 1; tx <= nt; tx *= 2) {
        int ty = nt / tx;
        if (tx > cols || ty > rows || cols % tx || rows % ty)
            continue;
        int cost = rows / ty + cols / tx;
        if (cost <= best_cost) {
            best = tx;
            best_cost = cost;
        }
    }
    return best;
}

/* Fills t for (bm, bn, nt) when it fits the device: local memory, work-group size, and a
 * register budget per work-item (accumulators) that keeps GPU kernels out of spilling. */
static bool tiles_fit(int d, bool backward, int bm, int bn, int nt, size_t max_wg,
                      uint64_t local_limit, tiles *t)
{
    if ((size_t)nt > max_wg)
        return false;
    const size_t lds = (size_t)d + 4, ldp = (size_t)bn + 4;
    t->nt = nt;
    t->bm = bm;
    t->bn = bn;
    t->s_tx = choose_tx(bm, bn, nt);
    t->o_tx = choose_tx(bm, d, nt);
    t->k_tx = backward ? choose_tx(bn, d, nt) : 1;
    if (!t->s_tx || !t->o_tx || !t->k_tx)
        return false;
    if (!backward) {
        if (bm * d / nt > 64 || bm * bn / nt > 32)
            return false;
        t->local_bytes = 4 * ((size_t)(bm + bn) * lds + (size_t)bm * ldp + 3 * (size_t)bm);
    } else {
        if (2 * bn * d / nt > 64 || bm * d / nt > 64 || 2 * bm * bn / nt > 64)
            return false;
        t->local_bytes = 4 * (2 * (size_t)(bm + bn) * lds + 2 * (size_t)bm * ldp + 2 * (size_t)bm);
    }
    return t->local_bytes <= local_limit;
}

/* Reads FA_OPENCL_FWD_TILES / FA_OPENCL_BWD_TILES ("bm,bn,nt"), a tuning override. */
static bool tiles_override(bool backward, int *bm, int *bn, int *nt)
{
    const char *env = getenv(backward ? "FA_OPENCL_BWD_TILES" : "FA_OPENCL_FWD_TILES");
    return env && sscanf(env, "%d,%d,%d", bm, bn, nt) == 3 && *bm >= 8 && *bm <= 256 &&
           !(*bm & (*bm - 1)) && *bn >= 8 && *bn <= 256 && !(*bn & (*bn - 1)) && *nt >= 1 &&
           *nt <= 1024 && !(*nt & (*nt - 1));
}

/* The preferred configuration that fits, or false. Larger query tiles first (K/V reuse), then
 * larger key tiles, then 128 work-items. */
static bool tiles_select(const fa_cl_device *dev, int d, bool backward, size_t max_wg, tiles *t)
{
    static const int sizes[][2] = {{64, 64}, {64, 32}, {32, 64}, {32, 32}, {64, 16}, {32, 16},
                                   {16, 32}, {16, 16}, {16, 8},  {8, 16},  {8, 8}};
    static const int threads[] = {128, 256, 64, 32};
    /* Some drivers keep a little local memory for themselves. */
    const uint64_t limit = dev->local_mem_bytes > 256 ? dev->local_mem_bytes - 256 : 0;
    int bm, bn, nt;
    if (tiles_override(backward, &bm, &bn, &nt) &&
        tiles_fit(d, backward, bm, bn, nt, max_wg, limit, t))
        return true;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (size_t j = 0; j < sizeof threads / sizeof threads[0]; j++)
            if (tiles_fit(d, backward, sizes[i][0], sizes[i][1], threads[j], max_wg, limit, t))
                return true;
    return false;
}

/* GPUs need the register tiles fully unrolled; CPU implementations (PoCL) vectorize across
 * work-items instead and compile several times faster without the hint. */
static int unroll_loops(const fa_cl_device *dev)
{
    return dev->info.kind == FA_DEVICE_KIND_SOFTWARE ? 0 : 1;
}

static int dtype_code(fa_dtype dtype)
{
    return dtype == FA_DTYPE_F32 ? 1 : dtype == FA_DTYPE_F16 ? 2 : 3;
}

/* The program and tiles for this call. A kernel whose driver limit (registers) is below the
 * chosen work-group size is rebuilt with fewer work-items. */
static fa_status prepare(fa_context *ctx, const fa_attention_call *call, bool backward, tiles *t,
                         fa_cl_program **prog)
{
    fa_cl_state *st = ctx->backend_state;
    size_t max_wg = st->dev->max_workgroup;
    for (int attempt = 0; attempt < 4; attempt++) {
        if (!tiles_select(st->dev, (int)call->head_dim, backward, max_wg, t))
            return fa_fail(ctx, FA_ERROR_UNSUPPORTED_HEAD_DIM,
                           "head dim %lld: no %s tiling fits %llu bytes of local memory and "
                           "work groups of %zu",
                           (long long)call->head_dim, backward ? "backward" : "forward",
                           (unsigned long long)st->dev->local_mem_bytes, max_wg);
        char options[512];
        snprintf(options, sizeof options,
                 "-cl-std=CL1.2 -DFA_BACKWARD=%d -DFA_DTYPE=%d -DFA_D=%d -DFA_NT=%d -DFA_BM=%d "
                 "-DFA_BN=%d -DFA_S_TX=%d -DFA_O_TX=%d -DFA_K_TX=%d -DFA_CAUSAL=%d -DFA_GQA=%d "
                 "-DFA_UNROLL_LOOPS=%d",
                 backward, dtype_code(call->dtype), (int)call->head_dim, t->nt, t->bm, t->bn,
                 t->s_tx, t->o_tx, t->k_tx, call->causal ? 1 : 0,
                 (int)(call->heads_q / call->heads_kv), unroll_loops(st->dev));
        fa_status status = fa_cl_program_get(
            ctx, backward ? FA_CL_SOURCE_BACKWARD : FA_CL_SOURCE_FORWARD, options, prog);
        if (status != FA_OK)
            return status;
        size_t limit = max_wg;
        for (int i = backward ? 1 : 0; i < FA_CL_MAX_KERNELS && (*prog)->kernels[i]; i++)
            if ((*prog)->kernel_wg[i] < limit)
                limit = (*prog)->kernel_wg[i];
        if ((size_t)t->nt <= limit)
            return FA_OK;
        fa_log(ctx, FA_LOG_DEBUG, "opencl: kernel allows %zu work-items, not %d; retiling", limit,
               t->nt);
        max_wg = limit;
    }
    return fa_fail(ctx, FA_ERROR_UNSUPPORTED, "no OpenCL work-group size the kernels accept");
}

fa_status fa_cl_check_call(fa_context *ctx, const fa_attention_call *call, bool backward)
{
    fa_cl_state *st = ctx->backend_state;
    tiles t;
    if (!tiles_select(st->dev, (int)call->head_dim, false, st->dev->max_workgroup, &t) ||
        (backward && !tiles_select(st->dev, (int)call->head_dim, true, st->dev->max_workgroup, &t)))
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED_HEAD_DIM,
                       "head dim %lld: no OpenCL tiling fits %llu bytes of local memory",
                       (long long)call->head_dim, (unsigned long long)st->dev->local_mem_bytes);
    /* Positions within a sequence are 32-bit in the kernels (offsets are 64-bit). */
    const int64_t max_seq = INT_MAX / 2;
    if (call->seq_q > max_seq || call->seq_k > max_seq || call->heads_q > INT_MAX)
        return fa_fail(ctx, FA_ERROR_TOO_LARGE,
                       "sequence lengths %lld/%lld exceed the OpenCL kernels' limit %lld",
                       (long long)call->seq_q, (long long)call->seq_k, (long long)max_seq);
    if (backward) {
        uint64_t delta =
            (uint64_t)call->batch * (uint64_t)call->heads_q * (uint64_t)call->seq_q * sizeof(float);
        if (delta > st->dev->info.max_buffer_bytes)
            return fa_fail(ctx, FA_ERROR_TOO_LARGE,
                           "the backward's workspace (%llu bytes) exceeds the device's largest "
                           "buffer (%llu bytes)",
                           (unsigned long long)delta,
                           (unsigned long long)st->dev->info.max_buffer_bytes);
    }
    return FA_OK;
}

/* ---- launching ------------------------------------------------------------------------------- */

typedef struct args {
    cl_kernel kernel;
    cl_uint index;
    cl_int err;
} args;

static void arg(args *a, size_t size, const void *value)
{
    if (a->err == CL_SUCCESS)
        a->err = fa_cl.clSetKernelArg(a->kernel, a->index, size, value);
    a->index++;
}

static void arg_mem(args *a, void *mem)
{
    cl_mem m = mem;
    arg(a, sizeof m, &m);
}

static void arg_int(args *a, int64_t v)
{
    cl_int x = (cl_int)v;
    arg(a, sizeof x, &x);
}

static void arg_float(args *a, float v)
{
    arg(a, sizeof v, &v);
}

/* A tensor as (buffer, offset, batch, seq and head strides), all in elements. */
static void arg_view(args *a, const fa_view *v)
{
    cl_long x[4] = {(cl_long)v->offset, v->stride_b, v->stride_s, v->stride_h};
    arg_mem(a, v->buffer);
    for (int i = 0; i < 4; i++)
        arg(a, sizeof x[i], &x[i]);
}

static fa_status launch(fa_context *ctx, const args *a, const char *name, const size_t global[3],
                        const size_t *local)
{
    fa_cl_state *st = ctx->backend_state;
    if (a->err != CL_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "clSetKernelArg(%s, %u)", name, a->index - 1);
        return fa_cl_fail(ctx, what, a->err);
    }
    cl_int err =
        fa_cl.clEnqueueNDRangeKernel(st->queue, a->kernel, 3, NULL, global, local, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "clEnqueueNDRangeKernel(%s)", name);
        return fa_cl_fail(ctx, what, err);
    }
    return FA_OK;
}

static size_t tiles_of(int64_t n, int tile)
{
    return (size_t)((n + tile - 1) / tile);
}

fa_status fa_cl_forward(fa_context *ctx, const fa_attention_call *call)
{
    tiles t;
    fa_cl_program *prog;
    fa_status status = prepare(ctx, call, false, &t, &prog);
    if (status != FA_OK)
        return status;
    args a = {prog->kernels[0], 0, CL_SUCCESS};
    arg_view(&a, &call->q);
    arg_view(&a, &call->k);
    arg_view(&a, &call->v);
    arg_view(&a, &call->o);
    if (call->has_lse) {
        arg_view(&a, &call->lse);
    } else {
        const fa_view none = {0};
        arg_view(&a, &none);
    }
    arg_int(&a, call->has_lse ? 1 : 0);
    arg_int(&a, call->seq_q);
    arg_int(&a, call->seq_k);
    arg_float(&a, call->scale * LOG2E);
    const size_t global[3] = {tiles_of(call->seq_q, t.bm) * (size_t)t.nt, (size_t)call->heads_q,
                              (size_t)call->batch};
    const size_t local[3] = {(size_t)t.nt, 1, 1};
    return launch(ctx, &a, "fa_forward", global, local);
}

/* The Delta workspace (B * Hq * Sq floats), kept between calls and grown when too small. */
static fa_status delta_buffer(fa_context *ctx, size_t bytes, cl_mem *out)
{
    fa_cl_state *st = ctx->backend_state;
    if (bytes > st->delta_bytes) {
        if (st->delta) {
            cl_int err = fa_cl.clFinish(st->queue); /* earlier calls may still read it */
            if (err != CL_SUCCESS)
                return fa_cl_fail(ctx, "clFinish", err);
            fa_cl.clReleaseMemObject(st->delta);
            fa_workspace_track(ctx, -(int64_t)st->delta_bytes);
            st->delta = NULL;
            st->delta_bytes = 0;
        }
        cl_int err = CL_SUCCESS;
        st->delta = fa_cl.clCreateBuffer(st->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
        if (err != CL_SUCCESS) {
            st->delta = NULL;
            return fa_cl_fail(ctx, "clCreateBuffer(workspace)", err);
        }
        st->delta_bytes = bytes;
        fa_workspace_track(ctx, (int64_t)bytes);
    }
    *out = st->delta;
    return FA_OK;
}

/* The arguments fa_backward_dkdv and fa_backward_dq share (FA_BWD_ARGS). */
static void backward_args(args *a, const fa_attention_call *call, cl_mem delta, const fa_view *out,
                          const fa_view *out2)
{
    arg_view(a, &call->q);
    arg_view(a, &call->k);
    arg_view(a, &call->v);
    arg_view(a, &call->d_o);
    arg_view(a, &call->lse);
    arg_mem(a, delta);
    arg_view(a, out);
    arg_view(a, out2);
    arg_int(a, call->seq_q);
    arg_int(a, call->seq_k);
    arg_int(a, call->heads_q);
    arg_float(a, call->scale * LOG2E);
    arg_float(a, call->scale);
}

fa_status fa_cl_backward(fa_context *ctx, const fa_attention_call *call)
{
    tiles t;
    fa_cl_program *prog;
    fa_status status = prepare(ctx, call, true, &t, &prog);
    if (status != FA_OK)
        return status;
    const size_t local[3] = {(size_t)t.nt, 1, 1};
    cl_mem delta = NULL;

    if (call->seq_q > 0) {
        size_t bytes = (size_t)call->batch * (size_t)call->heads_q * (size_t)call->seq_q * 4;
        status = delta_buffer(ctx, bytes, &delta);
        if (status != FA_OK)
            return status;
        args a = {prog->kernels[0], 0, CL_SUCCESS};
        arg_view(&a, &call->o);
        arg_view(&a, &call->d_o);
        arg_mem(&a, delta);
        arg_int(&a, call->seq_q);
        arg_int(&a, call->heads_q);
        const size_t group = prog->kernel_wg[0] >= 64 ? 64 : 0;
        const size_t dl_local[3] = {group, 1, 1};
        const size_t dl_global[3] = {group ? tiles_of(call->seq_q, 64) * 64 : (size_t)call->seq_q,
                                     (size_t)call->heads_q, (size_t)call->batch};
        status = launch(ctx, &a, "fa_backward_delta", dl_global, group ? dl_local : NULL);
        if (status != FA_OK)
            return status;
    }
    if (call->seq_k > 0) { /* with seq_q = 0 this writes dK = dV = 0 */
        args a = {prog->kernels[1], 0, CL_SUCCESS};
        backward_args(&a, call, delta, &call->d_k, &call->d_v);
        const size_t global[3] = {tiles_of(call->seq_k, t.bn) * (size_t)t.nt,
                                  (size_t)call->heads_kv, (size_t)call->batch};
        status = launch(ctx, &a, "fa_backward_dkdv", global, local);
        if (status != FA_OK)
            return status;
    }
    if (call->seq_q > 0) { /* with seq_k = 0 this writes dQ = 0 */
        args a = {prog->kernels[2], 0, CL_SUCCESS};
        backward_args(&a, call, delta, &call->d_q, &call->d_q);
        const size_t global[3] = {tiles_of(call->seq_q, t.bm) * (size_t)t.nt, (size_t)call->heads_q,
                                  (size_t)call->batch};
        status = launch(ctx, &a, "fa_backward_dq", global, local);
    }
    return status;
}
