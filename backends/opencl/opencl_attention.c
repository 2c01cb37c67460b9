// SPDX-License-Identifier: MIT
/* Attention launches: choosing tile sizes from the device's local memory and work-group limits,
 * building the matching program, and enqueueing the forward and backward kernels (in order,
 * asynchronously). The kernels and their tiling are described in shaders/opencl/. */
#include "fa_bwd_tiling.h"
#include "fa_cl_options.h"
#include "fa_fwd_tiling.h"
#include "fa_split.h"
#include "opencl_backend.h"
#include "opencl_decode_plan.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG2E 1.4426950408889634f

/* The forward tiling (runtime/fa_fwd_tiling.h) for head dim d and work-groups of at most max_wg.
 * Some drivers keep a little local memory for themselves. */
static bool tiles_select(const fa_context *ctx, const fa_cl_device *dev, int d, size_t max_wg,
                         fa_fwd_tiling *t)
{
    const uint64_t limit = dev->local_mem_bytes > 256 ? dev->local_mem_bytes - 256 : 0;
    return fa_fwd_tiling_select(d, false, limit, max_wg,
                                fa_knob_value(ctx, FA_KNOB_OPENCL_FWD_TILES), t);
}

/* GPUs need the register tiles fully unrolled; CPU implementations (PoCL) vectorize across
 * work-items instead and compile several times faster without the hint. */
static int unroll_loops(const fa_cl_device *dev)
{
    return dev->info.kind == FA_DEVICE_KIND_SOFTWARE ? 0 : 1;
}

static int dtype_code(fa_dtype dtype)
{
    return dtype == FA_DTYPE_F32   ? FA_CL_DTYPE_F32
           : dtype == FA_DTYPE_F16 ? FA_CL_DTYPE_F16
                                   : FA_CL_DTYPE_BF16;
}

/* The values of a program's -D options (shaders/opencl/fa_cl_options.h names them). */
typedef struct fa_cl_options {
#define FIELD_(name_, field_) int field_;
    FA_CL_COMMON_OPTIONS(FIELD_) FA_CL_FWD_OPTIONS(FIELD_) FA_CL_BWD_OPTIONS(FIELD_)
#undef FIELD_
} fa_cl_options;

/* Appends " -DNAME=value" to out (of size bytes, at least 1) where it fits. */
static void append_option(char *out, size_t size, const char *name, int value)
{
    const size_t used = strlen(out);
    snprintf(out + used, size - used, " -D%s=%d", name, value);
}

/* The options common to both programs, from the call and the device, into *o. */
static void common_options(const fa_cl_device *dev, const fa_attention_call *call, int nt, int bm,
                           int bn, fa_cl_options *o)
{
    o->dtype = dtype_code(call->dtype);
    o->d = (int)call->head_dim;
    o->nt = nt;
    o->bm = bm;
    o->bn = bn;
    o->causal = call->causal ? 1 : 0;
    o->gqa = (int)(call->heads_q / call->heads_kv);
    o->unroll_loops = unroll_loops(dev);
    o->window = call->window ? 1 : 0;
    o->softcap = call->softcap > 0.0f ? 1 : 0;
    o->alibi = call->has_alibi ? 1 : 0;
    o->bias = call->has_bias ? dtype_code(call->bias_dtype) : 0;
}

/* The kernel arguments of the variants: the raw score's multiplier (scale log2 e, or with a
 * softcap scale / softcap), softcap log2 e, and the window's bounds with causal folded in (-1:
 * none). */
static float score_mul(const fa_attention_call *call)
{
    return call->softcap > 0.0f ? call->scale / call->softcap : call->scale * LOG2E;
}

/* The build options: `prefix`, every option of the program's lists, then `extra` (the tuning
 * knob FA_OPENCL_BUILD_OPTIONS, or NULL). */
#define APPEND_(name_, field_) append_option(options, size, #name_, o.field_);
static void write_options(char *options, size_t size, const char *prefix, const fa_cl_options o,
                          bool backward, const char *extra)
{
    snprintf(options, size, "%s", prefix);
    FA_CL_COMMON_OPTIONS(APPEND_)
    if (backward) {
        FA_CL_BWD_OPTIONS(APPEND_)
    } else {
        FA_CL_FWD_OPTIONS(APPEND_)
    }
    if (extra) {
        const size_t used = strlen(options);
        snprintf(options + used, size - used, " %.255s", extra);
    }
}
#undef APPEND_

/* Picks a tiling for work-groups of at most max_wg into *tiles and writes the build options of
 * its program; false when none fits. Returns the tiling's work-items in *nt. */
typedef bool (*plan_fn)(const fa_context *ctx, const fa_cl_device *dev,
                        const fa_attention_call *call, size_t max_wg, void *tiles, int *nt,
                        char *options, size_t size);

/* The program of `source` and its tiling for this call. A kernel whose driver limit (registers)
 * is below the chosen work-group size is rebuilt with fewer work-items. */
static fa_status prepare(fa_context *ctx, const fa_attention_call *call, fa_cl_source source,
                         plan_fn plan, void *tiles, fa_cl_program **prog)
{
    fa_cl_state *st = ctx->backend_state;
    const bool backward = source == FA_CL_SOURCE_BACKWARD;
    size_t max_wg = st->dev->max_workgroup;
    for (int attempt = 0; attempt < 4; attempt++) {
        int nt;
        char options[1024];
        if (!plan(ctx, st->dev, call, max_wg, tiles, &nt, options, sizeof options))
            return fa_fail(ctx, FA_ERROR_UNSUPPORTED_HEAD_DIM,
                           "head dim %lld: no %s tiling fits %llu bytes of local memory and "
                           "work groups of %zu",
                           (long long)call->head_dim, backward ? "backward" : "forward",
                           (unsigned long long)st->dev->local_mem_bytes, max_wg);
        fa_status status = fa_cl_program_get(ctx, source, options, prog);
        if (status != FA_OK)
            return status;
        size_t limit = max_wg;
        /* the backward's Delta kernel (kernels[0]) has its own work-group size */
        for (int i = backward ? 1 : 0; i < FA_CL_MAX_KERNELS && (*prog)->kernels[i]; i++)
            if ((*prog)->kernel_wg[i] < limit)
                limit = (*prog)->kernel_wg[i];
        if ((size_t)nt <= limit)
            return FA_OK;
        fa_log(ctx, FA_LOG_DEBUG, "opencl: %s kernels allow %zu work-items, not %d; retiling",
               backward ? "backward" : "forward", limit, nt);
        max_wg = limit;
    }
    return fa_fail(ctx, FA_ERROR_UNSUPPORTED, "no OpenCL work-group size the kernels accept");
}

static bool forward_plan(const fa_context *ctx, const fa_cl_device *dev,
                         const fa_attention_call *call, size_t max_wg, void *tiles, int *nt,
                         char *options, size_t size)
{
    fa_fwd_tiling *t = tiles;
    if (!tiles_select(ctx, dev, (int)call->head_dim, max_wg, t))
        return false;
    fa_cl_options o = {.s_tx = t->s_tx, .o_tx = t->o_tx};
    common_options(dev, call, t->nt, t->bm, t->bn, &o);
    write_options(options, size, "-cl-std=CL1.2", o, false,
                  fa_knob_value(ctx, FA_KNOB_OPENCL_BUILD_OPTIONS));
    *nt = t->nt;
    return true;
}

/* ---- backward tiling (shaders/opencl/fa_backward.cl) --------------------------------------- */

/* The backward tiling (runtime/fa_bwd_tiling.h): the kernels keep 4 strides (32 bytes) in local
 * memory, and some drivers keep a little local memory for themselves. */
static bool bwd_tiles_select(const fa_context *ctx, const fa_cl_device *dev, int d, size_t max_wg,
                             fa_bwd_tiling *t)
{
    const uint64_t limit = dev->local_mem_bytes > 256 ? dev->local_mem_bytes - 256 : 0;
    return fa_bwd_tiling_select(d, limit, 32, max_wg, fa_knob_value(ctx, FA_KNOB_OPENCL_BWD_TILES),
                                NULL, t);
}

/* Whether q, k, v and dO start and stride at multiples of 4 elements: the backward kernels then
 * read 4 at a time with one aligned load (buffers themselves are aligned far beyond that). */
static bool bwd_aligned4(const fa_attention_call *call)
{
    const fa_view *views[] = {&call->q, &call->k, &call->v, &call->d_o};
    for (int i = 0; i < 4; i++)
        if (views[i]->offset % 4 || views[i]->stride_b % 4 || views[i]->stride_s % 4 ||
            views[i]->stride_h % 4)
            return false;
    return true;
}

/* The register cap for NVIDIA's compiler (cl_nv_compiler_options), 0 for none: left alone it
 * gives the backward kernels up to 255 registers per work-item, 2 work-groups of 128 per SM; the
 * cap keeps 12 warps per SM (65536 registers). FA_OPENCL_BUILD_OPTIONS with its own
 * -cl-nv-maxrregcount replaces it. */
static int bwd_register_cap(const fa_cl_device *dev, int nt, const char *extra)
{
    if (!dev->nv_compiler_options || (extra && strstr(extra, "maxrregcount")))
        return 0;
    int cap = 65536 / (nt * ((384 + nt - 1) / nt)) / 8 * 8;
    return cap > 255 ? 255 : cap;
}

static bool backward_plan(const fa_context *ctx, const fa_cl_device *dev,
                          const fa_attention_call *call, size_t max_wg, void *tiles, int *nt,
                          char *options, size_t size)
{
    fa_bwd_tiling *t = tiles;
    if (!bwd_tiles_select(ctx, dev, (int)call->head_dim, max_wg, t))
        return false;
    char prefix[64] = "-cl-std=CL1.2";
    const char *extra = fa_knob_value(ctx, FA_KNOB_OPENCL_BUILD_OPTIONS); /* for tuning */
    const int cap = bwd_register_cap(dev, t->nt, extra);
    if (cap)
        snprintf(prefix, sizeof prefix, "-cl-std=CL1.2 -cl-nv-maxrregcount=%d", cap);
    fa_cl_options o = {.sx = t->sx,
                       .kx = t->kx,
                       .qx = t->qx,
                       .dp = t->dp,
                       .dc = t->dc,
                       .rk = t->rk,
                       .rq = t->rq,
                       .align4 = bwd_aligned4(call) ? 1 : 0};
    common_options(dev, call, t->nt, t->bm, t->bn, &o);
    write_options(options, size, prefix, o, true, extra);
    *nt = t->nt;
    return true;
}

static bool decode_applies(const fa_context *ctx, const fa_cl_device *dev,
                           const fa_attention_call *call);

fa_status fa_cl_check_call(fa_context *ctx, const fa_attention_call *call, bool backward)
{
    fa_cl_state *st = ctx->backend_state;
    fa_fwd_tiling t;
    fa_bwd_tiling bt;
    if (!tiles_select(ctx, st->dev, (int)call->head_dim, st->dev->max_workgroup, &t) ||
        (backward &&
         !bwd_tiles_select(ctx, st->dev, (int)call->head_dim, st->dev->max_workgroup, &bt)))
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED_HEAD_DIM,
                       "head dim %lld: no OpenCL tiling fits %llu bytes of local memory",
                       (long long)call->head_dim, (unsigned long long)st->dev->local_mem_bytes);
    /* Positions within a sequence are 32-bit in the kernels (offsets are 64-bit). */
    const int64_t max_seq = INT_MAX / 2;
    if (call->has_block_table &&
        (call->window || call->softcap > 0.0f || call->has_alibi || call->has_bias))
        return fa_fail(
            ctx, FA_ERROR_UNSUPPORTED,
            "opencl: a paged KV cache with a sliding window, a softcap, ALiBi or a bias: "
            "the paged cache is read on the decoding path only, which has none of them");
    if (call->has_block_table && (backward || !decode_applies(ctx, st->dev, call)))
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED,
                       "opencl: a paged KV cache only on the decoding path (at most %d query rows "
                       "per KV head, README)",
                       FA_CL_DEC_MAX_ROWS);
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

/* ---- decoding (shaders/opencl/fa_decode.cl) ------------------------------------------------ */

typedef struct dec_tiles {
    int bn;
    bool w32; /* the experiment FA_OPENCL_DECODE=w32 (fa_decode.cl's FA_DEC_W32) */
} dec_tiles;

/* FA_OPENCL_DECODE: 0 sends decoding calls to the ordinary forward (a way around a driver that
 * fails on them); 16, 32 or 64 caps the decoding kernel's key tile (tuning); w32 takes the
 * experimental kernel of 32 work-items (the key tile 32); anything else, or nothing, leaves the
 * kernels on with the largest tile that fits. The cap, or 0 for off. */
static int decode_key_cap(const fa_context *ctx, bool *w32)
{
    const char *knob = fa_knob_value(ctx, FA_KNOB_OPENCL_DECODE);
    *w32 = knob && !strcmp(knob, "w32");
    if (!knob || *w32)
        return *w32 ? FA_CL_DEC_W32 : 64;
    if (!strcmp(knob, "0"))
        return 0;
    const long n = strtol(knob, NULL, 10);
    return n == 16 || n == 32 ? (int)n : 64;
}

/* Calls with at most FA_CL_DEC_MAX_ROWS query rows per KV head take the decoding kernels
 * (decode_key_cap permitting), with the key tile of fa_cl_decode_key_tile. */
static bool decode_plan(const fa_context *ctx, const fa_cl_device *dev,
                        const fa_attention_call *call, size_t max_wg, void *tiles, int *nt,
                        char *options, size_t size)
{
    dec_tiles *t = tiles;
    const int64_t rows = call->seq_q * (call->heads_q / call->heads_kv);
    bool w32;
    const int cap = decode_key_cap(ctx, &w32);
    /* fa_decode.cl has no window, softcap, ALiBi or bias: the forward serves those calls */
    if (!cap || rows > FA_CL_DEC_MAX_ROWS || max_wg < FA_CL_DEC_NT || call->window ||
        call->softcap > 0.0f || call->has_alibi || call->has_bias)
        return false;
    /* several work-groups must share a compute unit to keep enough reads in flight (docs/PERF.md,
     * fifty-first session): opencl_decode_plan.c */
    t->w32 = w32;
    t->bn =
        fa_cl_decode_key_tile((int)call->head_dim, (int)rows, call->dtype == FA_DTYPE_F32 ? 4 : 2,
                              dev->local_mem_bytes, cap, w32);
    if (!t->bn)
        return false;
    fa_cl_options o = {0};
    common_options(dev, call, FA_CL_DEC_NT, (int)rows, t->bn, &o);
    o.dec_w32 = w32 ? 1 : 0;
    write_options(options, size, "-cl-std=CL1.2", o, false,
                  fa_knob_value(ctx, FA_KNOB_OPENCL_BUILD_OPTIONS));
    *nt = w32 ? FA_CL_DEC_W32 : FA_CL_DEC_NT; /* the merge kernel takes FA_CL_DEC_NT */
    return true;
}

static bool decode_applies(const fa_context *ctx, const fa_cl_device *dev,
                           const fa_attention_call *call)
{
    dec_tiles t;
    int nt;
    char options[1024];
    return decode_plan(ctx, dev, call, dev->max_workgroup, &t, &nt, options, sizeof options);
}

static fa_status workspace_buffer(fa_context *ctx, size_t bytes, cl_mem *out);

static void arg_long(args *a, int64_t v)
{
    cl_long x = (cl_long)v;
    arg(a, sizeof x, &x);
}

/* The decoding forward: fa_decode over the key chunks fa_split_choose picks, then, with
 * several, fa_decode_merge. */
static fa_status decode_forward(fa_context *ctx, const fa_attention_call *call, fa_cl_program *prog,
                                bool w32)
{
    fa_cl_state *st = ctx->backend_state;
    const fa_split sp = fa_split_choose(
        call->batch * call->heads_kv, call->seq_k, st->dev->info.compute_units,
        w32 ? FA_CL_DEC_W32_GROUPS_PER_UNIT : FA_CL_DEC_GROUPS_PER_UNIT, call->num_splits);
    const uint64_t rows = (uint64_t)call->batch * (uint64_t)call->heads_q * (uint64_t)call->seq_q;
    const uint64_t part_rows = (uint64_t)sp.splits * rows;
    const uint64_t lse_off = (part_rows * (uint64_t)call->head_dim + 63) / 64 * 64;
    cl_mem ws = NULL;
    if (sp.splits > 1) {
        fa_status status = workspace_buffer(ctx, (size_t)(4 * (lse_off + part_rows)), &ws);
        if (status != FA_OK)
            return status;
    }
    const fa_view none = {0};
    args a = {prog->kernels[0], 0, CL_SUCCESS};
    arg_view(&a, &call->q);
    arg_view(&a, &call->k);
    arg_view(&a, &call->v);
    arg_view(&a, &call->o);
    arg_view(&a, call->has_lse ? &call->lse : &none);
    arg_int(&a, call->has_lse ? 1 : 0);
    arg_view(&a, call->has_seqlens_k ? &call->seqlens_k : &none);
    arg_int(&a, call->has_seqlens_k ? 1 : 0);
    arg_view(&a, call->has_block_table ? &call->block_table : &none);
    arg_long(&a, call->has_block_table ? call->page_size : 0);
    arg_long(&a, call->num_pages);
    arg_int(&a, call->seq_q);
    arg_int(&a, call->seq_k);
    arg_float(&a, call->scale * LOG2E);
    arg_int(&a, sp.keys_per_split);
    arg_mem(&a, ws);
    arg_long(&a, (int64_t)lse_off);
    const size_t nt = w32 ? FA_CL_DEC_W32 : FA_CL_DEC_NT;
    const size_t global[3] = {(size_t)sp.splits * nt, (size_t)call->heads_kv, (size_t)call->batch};
    const size_t local[3] = {nt, 1, 1}, merge_local[3] = {FA_CL_DEC_NT, 1, 1};
    fa_status status = launch(ctx, &a, "fa_decode", global, local);
    if (status != FA_OK || sp.splits == 1)
        return status;
    args m = {prog->kernels[1], 0, CL_SUCCESS};
    arg_mem(&m, ws);
    arg_long(&m, (int64_t)lse_off);
    arg_int(&m, sp.splits);
    arg_view(&m, &call->o);
    arg_view(&m, call->has_lse ? &call->lse : &none);
    arg_int(&m, call->has_lse ? 1 : 0);
    arg_int(&m, call->seq_q);
    const size_t merge_global[3] = {(size_t)call->seq_q * FA_CL_DEC_NT, (size_t)call->heads_q,
                                    (size_t)call->batch};
    return launch(ctx, &m, "fa_decode_merge", merge_global, merge_local);
}

fa_status fa_cl_forward(fa_context *ctx, const fa_attention_call *call)
{
    fa_cl_state *st = ctx->backend_state;
    if (decode_applies(ctx, st->dev, call)) {
        dec_tiles dt;
        fa_cl_program *dprog;
        fa_status status = prepare(ctx, call, FA_CL_SOURCE_DECODE, decode_plan, &dt, &dprog);
        if (status == FA_OK)
            return decode_forward(ctx, call, dprog, dt.w32);
        /* only a driver's work-group limit below the kernels' size falls back */
        if (call->has_block_table ||
            (status != FA_ERROR_UNSUPPORTED && status != FA_ERROR_UNSUPPORTED_HEAD_DIM))
            return status;
        fa_log(ctx, FA_LOG_WARN, "opencl: decoding kernels unavailable (%s); the forward serves",
               fa_context_last_error(ctx));
    }
    fa_fwd_tiling t;
    fa_cl_program *prog;
    fa_status status = prepare(ctx, call, FA_CL_SOURCE_FORWARD, forward_plan, &t, &prog);
    if (status != FA_OK)
        return status;
    args a = {prog->kernels[0], 0, CL_SUCCESS};
    arg_view(&a, &call->q);
    arg_view(&a, &call->k);
    arg_view(&a, &call->v);
    arg_view(&a, &call->o);
    const fa_view none = {0};
    arg_view(&a, call->has_lse ? &call->lse : &none);
    arg_int(&a, call->has_lse ? 1 : 0);
    arg_view(&a, call->has_seqlens_k ? &call->seqlens_k : &none);
    arg_int(&a, call->has_seqlens_k ? 1 : 0);
    arg_int(&a, call->seq_q);
    arg_int(&a, call->seq_k);
    arg_float(&a, score_mul(call));
    arg_float(&a, call->softcap * LOG2E);
    arg_int(&a, fa_call_left(call));
    arg_int(&a, fa_call_right(call));
    arg_view(&a, call->has_alibi ? &call->alibi : &none);
    arg_view(&a, call->has_bias ? &call->bias : &none);
    const size_t global[3] = {tiles_of(call->seq_q, t.bm) * (size_t)t.nt, (size_t)call->heads_q,
                              (size_t)call->batch};
    const size_t local[3] = {(size_t)t.nt, 1, 1};
    return launch(ctx, &a, "fa_forward", global, local);
}

/* The workspace (the backward's Delta, B * Hq * Sq floats; the decoding chunks' O and LSE), kept
 * between calls and grown when too small. */
static fa_status workspace_buffer(fa_context *ctx, size_t bytes, cl_mem *out)
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
    arg_float(a, score_mul(call));
    arg_float(a, call->scale);
    arg_float(a, call->softcap * LOG2E);
    arg_int(a, fa_call_left(call));
    arg_int(a, fa_call_right(call));
    const fa_view none = {0};
    arg_view(a, call->has_alibi ? &call->alibi : &none);
    arg_view(a, call->has_bias ? &call->bias : &none);
}

fa_status fa_cl_backward(fa_context *ctx, const fa_attention_call *call)
{
    fa_bwd_tiling t;
    fa_cl_program *prog;
    fa_status status = prepare(ctx, call, FA_CL_SOURCE_BACKWARD, backward_plan, &t, &prog);
    if (status != FA_OK)
        return status;
    const size_t local[3] = {(size_t)t.nt, 1, 1};
    cl_mem delta = NULL;

    if (call->seq_q > 0) {
        size_t bytes = (size_t)call->batch * (size_t)call->heads_q * (size_t)call->seq_q * 4;
        status = workspace_buffer(ctx, bytes, &delta);
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
