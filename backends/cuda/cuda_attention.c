/* Forward and backward on CUDA: picks a kernel for each call and launches it on the context's
 * stream. f16/bf16 with 16-byte aligned rows take the tensor-core kernels when their shared
 * memory fits the device: the forward up to head dim 256 (kernels for 32, 64, 96, 128 and 256;
 * on compute capability 9.0 wgmma kernels for 64 and 128 serve head dims 33-128, and the
 * atomic backward up to 128),
 * the backward up to 256 (v4 for 32, 64, 96, 128 and 256; v3 and the deterministic kernels for
 * 64 and 128); everything else (f32, unaligned views, the deterministic backward above 128) the
 * general CUDA-core kernels.
 * The backward runs Delta = rowsum(dO * O), then dK/dV per key block and dQ per query block, each
 * recomputing P from the LSE. The tensor-core backward,
 * unless the call asks for determinism, instead adds dQ with f32 atomics to a zeroed accumulator
 * from the dK/dV kernel and converts it at the end: fewer FLOPs, but the order of the additions
 * (and so the last bits of dQ) varies run to run. Every other path uses no atomics. That atomic
 * kernel is backward v4 (FlashAttention-2's tiling) where its shared memory fits the device, else
 * (or with FA_CUDA_BWD=v3) backward v3; at head dim 64 v4 takes 128-row query tiles where they
 * fit (FA_CUDA_BWD4_QTILE_D64=64 keeps 64). Head dims 129-256 run v4 at head dim 256 (atomic
 * dQ, so never for a deterministic call) where its shared memory fits (sm_80, sm_90), else, or
 * with FA_CUDA_BWD_D256=0, the general kernels. */
#include "cuda_backend.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>

#include "../../shaders/cuda/fa_cuda_abi.h"

#define DEFAULT_SMEM 49152

static fa_cuda_tensor tensor_of(const fa_view *v, size_t element_size)
{
    const fa_cuda_buffer *buf = v->buffer;
    return (fa_cuda_tensor){
        .ptr = buf ? buf->ptr + v->offset * element_size : 0,
        .stride_b = v->stride_b,
        .stride_s = v->stride_s,
        .stride_h = v->stride_h,
    };
}

static fa_cuda_params params_of(const fa_attention_call *call, bool backward)
{
    const size_t es = fa_dtype_size(call->dtype);
    fa_cuda_params p = {
        .q = tensor_of(&call->q, es),
        .k = tensor_of(&call->k, es),
        .v = tensor_of(&call->v, es),
        .o = tensor_of(&call->o, es),
        .batch = (int)call->batch,
        .seq_q = (int)call->seq_q,
        .seq_k = (int)call->seq_k,
        .heads_q = (int)call->heads_q,
        .heads_kv = (int)call->heads_kv,
        .head_dim = (int)call->head_dim,
        .group = (int)(call->heads_q / call->heads_kv),
        .causal = call->causal,
        .causal_offset = (int)(call->seq_k - call->seq_q),
        .has_lse = backward || call->has_lse,
        .scale = call->scale,
        .scale_log2 = call->scale * 1.4426950408889634f,
    };
    if (p.has_lse)
        p.lse = tensor_of(&call->lse, sizeof(float));
    if (backward) {
        p.d_o = tensor_of(&call->d_o, es);
        p.d_q = tensor_of(&call->d_q, es);
        p.d_k = tensor_of(&call->d_k, es);
        p.d_v = tensor_of(&call->d_v, es);
    }
    return p;
}

/* Rows start on 16 bytes: what cp.async of 16-byte chunks needs. */
static bool aligned16(const fa_cuda_tensor *t, size_t element_size)
{
    const long long per = (long long)(16 / element_size);
    return t->ptr % 16 == 0 && t->stride_b % per == 0 && t->stride_s % per == 0 &&
           t->stride_h % per == 0;
}

static bool views_aligned(const fa_cuda_params *p, bool backward, size_t es)
{
    bool ok = aligned16(&p->q, es) && aligned16(&p->k, es) && aligned16(&p->v, es) &&
              aligned16(&p->o, es);
    if (backward)
        ok = ok && aligned16(&p->d_o, es) && aligned16(&p->d_q, es) && aligned16(&p->d_k, es) &&
             aligned16(&p->d_v, es);
    return ok;
}

static int dtype_index(fa_dtype dtype)
{
    return dtype == FA_DTYPE_F32 ? 0 : dtype == FA_DTYPE_F16 ? 1 : 2;
}

/* dims per thread of the general kernels: 8, 16 or 32 (head dim up to 64, 128, 256) */
static int dpt_index(int64_t head_dim)
{
    return head_dim <= 64 ? 0 : head_dim <= 128 ? 1 : 2;
}

/* which tensor-core kernel serves a head dim: 32, 64, 96, 128 or 256 (0-4), the head dim padded
 * up to it with zeros (the forward has all five, backward v4 the first four) */
static int mma_dim_index(int64_t head_dim)
{
    return head_dim <= 32 ? 0 : head_dim <= 64 ? 1 : head_dim <= 96 ? 2 : head_dim <= 128 ? 3 : 4;
}

static unsigned blocks(int64_t n, int64_t per)
{
    return (unsigned)((n + per - 1) / per);
}

static fa_status launch(fa_context *ctx, fa_cuda_kernel kernel, unsigned gx, unsigned gy,
                        unsigned gz, unsigned threads, unsigned smem, fa_cuda_params *p,
                        const char *what)
{
    fa_cuda_state *st = ctx->backend_state;
    CUfunction f = st->kernels[kernel];
    if (gx == 0 || gy == 0 || gz == 0)
        return FA_OK;
    CUresult r;
    if (smem > DEFAULT_SMEM) {
        r = st->cu->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       (int)smem);
        if (r != CUDA_SUCCESS)
            return fa_cuda_fail(ctx, r, "cuFuncSetAttribute(max dynamic shared memory)");
    }
    void *args[] = {p};
    r = st->cu->cuLaunchKernel(f, gx, gy, gz, threads, 1, 1, smem, st->stream, args, NULL);
    if (r != CUDA_SUCCESS)
        return fa_cuda_fail(ctx, r, what);
    return FA_OK;
}

fa_status fa_cuda_check_call(fa_context *ctx, const fa_attention_call *call, bool backward)
{
    (void)backward;
    if (call->batch > 65535 || call->heads_q > 65535)
        return fa_fail(ctx, FA_ERROR_TOO_LARGE,
                       "cuda: batch %lld and heads %lld must each be at most 65535",
                       (long long)call->batch, (long long)call->heads_q);
    if (call->seq_q > INT_MAX - 256 || call->seq_k > INT_MAX - 256)
        return fa_fail(ctx, FA_ERROR_TOO_LARGE,
                       "cuda: seq_q %lld and seq_k %lld must each be below 2^31 - 256",
                       (long long)call->seq_q, (long long)call->seq_k);
    return FA_OK;
}

fa_status fa_cuda_forward(fa_context *ctx, const fa_attention_call *call)
{
    fa_cuda_state *st = ctx->backend_state;
    fa_cuda_params p = params_of(call, false);
    const size_t es = fa_dtype_size(call->dtype);
    const int dt = dtype_index(call->dtype);
    /* the tensor-core kernel's head dim: the head dim rounded up to 32, 64, 96, 128 or 256 */
    const int di = mma_dim_index(call->head_dim);
    static const unsigned dims[5] = {32, 64, 96, 128, 256};
    const unsigned d = dims[di];
    /* head dim 256: 128-row blocks (8 warps) where a 64-row block would be alone on an SM
     * (two do not fit the opt-in limit, as on sm_80) and a 128-row one fits, unless
     * FA_CUDA_FWD_QTILE_D256 says which (128 only where it fits) */
    const int wide_smem = FA_FWD_MMA_SMEM(256, FA_FWD_MMA_BQ_D256_WIDE);
    const bool wide_auto = 2 * FA_FWD_MMA_SMEM(256, FA_FWD_MMA_BQ_D256) > st->smem_optin;
    const bool wide =
        d == 256 && wide_smem <= st->smem_optin &&
        (st->fwd_qtile_d256 ? st->fwd_qtile_d256 == FA_FWD_MMA_BQ_D256_WIDE : wide_auto);
    const unsigned bq = wide ? FA_FWD_MMA_BQ_D256_WIDE : FA_FWD_MMA_BQ_D(d);
    const unsigned smem = FA_FWD_MMA_SMEM(d, bq); /* Q, K and V x2 */
    const bool fast = !st->force_general && call->dtype != FA_DTYPE_F32 && call->head_dim <= 256 &&
                      (int)smem <= st->smem_optin && views_aligned(&p, false, es);
    fa_status status = fa_cuda_enter(ctx);
    if (status != FA_OK)
        return status;
    /* compute capability 9.0: the wgmma forward at head dims 33-128, 65-96 padded to 128 (more
     * TF/s than the mma.sync kernel for 96 even with a quarter of its products on zeros) */
    const unsigned wg_d = d > 64 ? 128 : 64;
    const unsigned wg_smem = wg_d == 128 ? FA_FWD_WGMMA_SMEM(128) : FA_FWD_WGMMA_SMEM(64);
    const bool hopper =
        fast && st->wgmma_fwd && d >= 64 && d <= 128 && (int)wg_smem <= st->smem_optin;
    if (hopper) {
        static const fa_cuda_kernel wgmma[2][2] = {
            {FA_CUDA_K_FWD_WGMMA_F16_D64, FA_CUDA_K_FWD_WGMMA_F16_D128},
            {FA_CUDA_K_FWD_WGMMA_BF16_D64, FA_CUDA_K_FWD_WGMMA_BF16_D128},
        };
        status = launch(ctx, wgmma[dt - 1][wg_d == 128], blocks(call->seq_q, FA_FWD_WGMMA_BQ),
                        (unsigned)call->heads_q, (unsigned)call->batch, FA_FWD_WGMMA_THREADS,
                        wg_smem, &p, "launching the Hopper (wgmma) forward");
    } else if (fast) {
        static const fa_cuda_kernel mma[2][5] = {
            {FA_CUDA_K_FWD_MMA_F16_D32, FA_CUDA_K_FWD_MMA_F16_D64, FA_CUDA_K_FWD_MMA_F16_D96,
             FA_CUDA_K_FWD_MMA_F16_D128, FA_CUDA_K_FWD_MMA_F16_D256},
            {FA_CUDA_K_FWD_MMA_BF16_D32, FA_CUDA_K_FWD_MMA_BF16_D64, FA_CUDA_K_FWD_MMA_BF16_D96,
             FA_CUDA_K_FWD_MMA_BF16_D128, FA_CUDA_K_FWD_MMA_BF16_D256},
        };
        static const fa_cuda_kernel mma_wide[2] = {FA_CUDA_K_FWD_MMA_Q128_F16_D256,
                                                   FA_CUDA_K_FWD_MMA_Q128_BF16_D256};
        status = launch(ctx, wide ? mma_wide[dt - 1] : mma[dt - 1][di], blocks(call->seq_q, bq),
                        (unsigned)call->heads_q, (unsigned)call->batch, FA_FWD_MMA_THREADS(d, bq),
                        smem, &p, "launching the tensor-core forward");
    } else {
        static const fa_cuda_kernel gen[3][3] = {
            {FA_CUDA_K_FWD_GEN_F32_8, FA_CUDA_K_FWD_GEN_F32_16, FA_CUDA_K_FWD_GEN_F32_32},
            {FA_CUDA_K_FWD_GEN_F16_8, FA_CUDA_K_FWD_GEN_F16_16, FA_CUDA_K_FWD_GEN_F16_32},
            {FA_CUDA_K_FWD_GEN_BF16_8, FA_CUDA_K_FWD_GEN_BF16_16, FA_CUDA_K_FWD_GEN_BF16_32},
        };
        const unsigned smem = (unsigned)(2 * FA_GEN_TILE * call->head_dim * sizeof(float));
        status = launch(ctx, gen[dt][dpt_index(call->head_dim)], blocks(call->seq_q, FA_GEN_ROWS),
                        (unsigned)call->heads_q, (unsigned)call->batch, FA_GEN_THREADS, smem, &p,
                        "launching the general forward");
    }
    fa_cuda_leave(ctx);
    return status;
}

/* Grows the backward's scratch to `bytes` (waiting for work that may still use the old one).
 * With `may_fail`, running out of memory returns FA_ERROR_OUT_OF_DEVICE_MEMORY without recording
 * an error, for a caller that has a smaller plan. */
static fa_status ensure_workspace(fa_context *ctx, size_t bytes, bool may_fail)
{
    fa_cuda_state *st = ctx->backend_state;
    if (bytes <= st->workspace_bytes)
        return FA_OK;
    if (st->workspace) {
        CUresult r = st->cu->cuStreamSynchronize(st->stream);
        if (r != CUDA_SUCCESS)
            return fa_cuda_fail(ctx, r, "cuStreamSynchronize");
        st->cu->cuMemFree(st->workspace);
        fa_workspace_track(ctx, -(int64_t)st->workspace_bytes);
        st->workspace = 0;
        st->workspace_bytes = 0;
    }
    CUresult r = st->cu->cuMemAlloc(&st->workspace, bytes);
    if (r != CUDA_SUCCESS) {
        st->workspace = 0;
        if (may_fail && r == CUDA_ERROR_OUT_OF_MEMORY)
            return FA_ERROR_OUT_OF_DEVICE_MEMORY;
        char what[96];
        snprintf(what, sizeof what, "cuMemAlloc of %zu bytes of backward workspace", bytes);
        return fa_cuda_fail(ctx, r, what);
    }
    st->workspace_bytes = bytes;
    fa_workspace_track(ctx, (int64_t)bytes);
    return FA_OK;
}

fa_status fa_cuda_backward(fa_context *ctx, const fa_attention_call *call)
{
    fa_cuda_state *st = ctx->backend_state;
    fa_cuda_params p = params_of(call, true);
    const int dt = dtype_index(call->dtype), dpt = dpt_index(call->head_dim);
    const size_t es = fa_dtype_size(call->dtype);
    const unsigned d = call->head_dim > 64 ? 128 : 64;
    const unsigned dkdv_smem =
        2 * FA_BWD_ROWS * d * 2 + 4 * FA_BWD_QTILE(d) * d * 2 + 2 * FA_BWD_QTILE(d) * 4;
    const unsigned dq_smem = 2 * FA_BWD_ROWS * d * 2 + 4 * FA_BWD_TILE * d * 2;
    const unsigned dkdv_dq_smem = dkdv_smem + FA_BWD_ROWS * FA_BWD_QTILE(d) * 2; /* + dS^T */
    /* backward v4 has kernels for head dims 32, 64, 96 and 128 (v3 and the deterministic
     * kernels 64 and 128 only) */
    const int di4 = mma_dim_index(call->head_dim); /* 0-3 wherever fast is true */
    static const unsigned dims4[4] = {32, 64, 96, 128};
    const unsigned d4 = dims4[di4 < 3 ? di4 : 3];
    unsigned v4_smem = FA_BWD4_SMEM(d4);
    const bool mma_ok =
        !st->force_general && call->dtype != FA_DTYPE_F32 && views_aligned(&p, true, es);
    const bool fast = mma_ok && call->head_dim <= 128 && (int)dkdv_smem <= st->smem_optin &&
                      (int)dq_smem <= st->smem_optin;
    /* dQ by atomics from the dK/dV kernel (v4, else v3); else (deterministic, or neither fits,
     * as at head dim 128 on sm_86/89) the separate dQ kernel */
    const bool v4 = fast && !st->force_bwd_v3 && (int)v4_smem <= st->smem_optin;
    /* v4's 128-row query tiles at head dim 64, unless FA_CUDA_BWD4_QTILE_D64=64, where they fit
     * (sm_80, sm_90) */
    const unsigned v4_q128_smem = FA_BWD4_SMEM_Q(64, FA_BWD4_QTILE_WIDE);
    const bool v4_q128 = v4 && d4 == 64 && st->bwd4_q128_d64 && (int)v4_q128_smem <= st->smem_optin;
    if (v4_q128)
        v4_smem = v4_q128_smem;
    /* head dims 129-256 (padded to 256), unless FA_CUDA_BWD_D256=0, and never deterministic
     * (dQ by atomics): v4 with 64 keys per block and 64-row query tiles where they fit (sm_90),
     * else 32-row ones (sm_80), else (sm_86/89) the general kernels */
    const unsigned d256_smem_wide = FA_BWD4_SMEM_D256(FA_BWD4_QTILE_D256);
    const unsigned d256_smem_narrow = FA_BWD4_SMEM_D256(FA_BWD4_QTILE_D256_NARROW);
    const bool d256_wide = (int)d256_smem_wide <= st->smem_optin;
    const bool v4_d256 = mma_ok && st->bwd_d256 && call->head_dim > 128 && call->head_dim <= 256 &&
                         !call->deterministic && (int)d256_smem_narrow <= st->smem_optin;
    bool atomic_dq =
        v4_d256 || (fast && !call->deterministic && (v4 || (int)dkdv_dq_smem <= st->smem_optin));
    /* compute capability 9.0: the wgmma kernel in v4's place at every head dim up to 128, padded
     * to 64 or 128 (more TF/s than v4's own kernels for 32 and 96) */
    const unsigned wg_d = d4 > 64 ? 128 : 64;
    const unsigned wg_smem = wg_d == 128 ? FA_BWD_WGMMA_SMEM(128) : FA_BWD_WGMMA_SMEM(64);
    const bool hopper =
        v4 && !call->deterministic && st->wgmma_bwd && (int)wg_smem <= st->smem_optin;
    fa_status status = fa_cuda_enter(ctx);
    if (status != FA_OK)
        return status;
    /* workspace: Delta (rows floats), then with atomic_dq the (B, Hq, Sq, head_dim) f32 dQ sums */
    const size_t rows = (size_t)call->batch * (size_t)call->heads_q * (size_t)call->seq_q;
    const size_t accum_at = (rows * sizeof(float) + 255) / 256 * 256;
    const size_t accum_elems = rows * (size_t)call->head_dim;
    if (rows > 0 && atomic_dq) {
        status = ensure_workspace(ctx, accum_at + accum_elems * sizeof(float), true);
        if (status == FA_ERROR_OUT_OF_DEVICE_MEMORY) {
            fa_log(ctx, FA_LOG_WARN,
                   "cuda: no device memory for the %zu-byte dQ accumulator; running the "
                   "deterministic backward instead",
                   accum_elems * sizeof(float));
            atomic_dq = false;
            status = FA_OK;
        }
    }
    if (rows > 0 && !atomic_dq && status == FA_OK)
        status = ensure_workspace(ctx, rows * sizeof(float), false);
    p.delta = st->workspace;
    p.dq_accum = atomic_dq ? st->workspace + accum_at : 0;

    static const fa_cuda_kernel delta[3] = {FA_CUDA_K_BWD_DELTA_F32, FA_CUDA_K_BWD_DELTA_F16,
                                            FA_CUDA_K_BWD_DELTA_BF16};
    static const fa_cuda_kernel dkdv[3][3] = {
        {FA_CUDA_K_BWD_DKDV_GEN_F32_8, FA_CUDA_K_BWD_DKDV_GEN_F32_16,
         FA_CUDA_K_BWD_DKDV_GEN_F32_32},
        {FA_CUDA_K_BWD_DKDV_GEN_F16_8, FA_CUDA_K_BWD_DKDV_GEN_F16_16,
         FA_CUDA_K_BWD_DKDV_GEN_F16_32},
        {FA_CUDA_K_BWD_DKDV_GEN_BF16_8, FA_CUDA_K_BWD_DKDV_GEN_BF16_16,
         FA_CUDA_K_BWD_DKDV_GEN_BF16_32},
    };
    static const fa_cuda_kernel dq[3][3] = {
        {FA_CUDA_K_BWD_DQ_GEN_F32_8, FA_CUDA_K_BWD_DQ_GEN_F32_16, FA_CUDA_K_BWD_DQ_GEN_F32_32},
        {FA_CUDA_K_BWD_DQ_GEN_F16_8, FA_CUDA_K_BWD_DQ_GEN_F16_16, FA_CUDA_K_BWD_DQ_GEN_F16_32},
        {FA_CUDA_K_BWD_DQ_GEN_BF16_8, FA_CUDA_K_BWD_DQ_GEN_BF16_16, FA_CUDA_K_BWD_DQ_GEN_BF16_32},
    };
    const unsigned tile_smem = (unsigned)(2 * FA_GEN_TILE * call->head_dim * sizeof(float));
    const unsigned hq = (unsigned)call->heads_q, hkv = (unsigned)call->heads_kv;
    const unsigned b = (unsigned)call->batch;
    static const fa_cuda_kernel dkdv_mma[2][2] = {
        {FA_CUDA_K_BWD_DKDV_MMA_F16_D64, FA_CUDA_K_BWD_DKDV_MMA_F16_D128},
        {FA_CUDA_K_BWD_DKDV_MMA_BF16_D64, FA_CUDA_K_BWD_DKDV_MMA_BF16_D128},
    };
    static const fa_cuda_kernel dq_mma[2][2] = {
        {FA_CUDA_K_BWD_DQ_MMA_F16_D64, FA_CUDA_K_BWD_DQ_MMA_F16_D128},
        {FA_CUDA_K_BWD_DQ_MMA_BF16_D64, FA_CUDA_K_BWD_DQ_MMA_BF16_D128},
    };
    static const fa_cuda_kernel dkdv_dq_mma[2][2] = {
        {FA_CUDA_K_BWD_DKDV_DQ_MMA_F16_D64, FA_CUDA_K_BWD_DKDV_DQ_MMA_F16_D128},
        {FA_CUDA_K_BWD_DKDV_DQ_MMA_BF16_D64, FA_CUDA_K_BWD_DKDV_DQ_MMA_BF16_D128},
    };
    static const fa_cuda_kernel bwd_v4[2][4] = {
        {FA_CUDA_K_BWD_V4_F16_D32, FA_CUDA_K_BWD_V4_F16_D64, FA_CUDA_K_BWD_V4_F16_D96,
         FA_CUDA_K_BWD_V4_F16_D128},
        {FA_CUDA_K_BWD_V4_BF16_D32, FA_CUDA_K_BWD_V4_BF16_D64, FA_CUDA_K_BWD_V4_BF16_D96,
         FA_CUDA_K_BWD_V4_BF16_D128},
    };
    static const fa_cuda_kernel bwd_v4_q128[2] = {FA_CUDA_K_BWD_V4_Q128_F16_D64,
                                                  FA_CUDA_K_BWD_V4_Q128_BF16_D64};
    static const fa_cuda_kernel bwd_v4_d256[2][2] = {
        {FA_CUDA_K_BWD_V4_Q32_F16_D256, FA_CUDA_K_BWD_V4_F16_D256},
        {FA_CUDA_K_BWD_V4_Q32_BF16_D256, FA_CUDA_K_BWD_V4_BF16_D256},
    };
    static const fa_cuda_kernel dq_convert[2] = {FA_CUDA_K_BWD_DQ_CONVERT_F16,
                                                 FA_CUDA_K_BWD_DQ_CONVERT_BF16};
    if (status == FA_OK && atomic_dq && rows > 0) {
        CUresult r = st->cu->cuMemsetD32Async(p.dq_accum, 0, accum_elems, st->stream);
        if (r != CUDA_SUCCESS)
            status = fa_cuda_fail(ctx, r, "cuMemsetD32Async (zeroing the dQ accumulator)");
    }
    if (status == FA_OK)
        status = launch(ctx, delta[dt], blocks(call->seq_q, FA_GEN_ROWS), hq, b, FA_GEN_THREADS, 0,
                        &p, "launching the backward's Delta");
    if (atomic_dq) {
        const int wide = d == 128;
        const fa_cuda_kernel k4 = v4_q128 ? bwd_v4_q128[dt - 1] : bwd_v4[dt - 1][d4 / 32 - 1];
        static const fa_cuda_kernel bwd_wgmma[2][2] = {
            {FA_CUDA_K_BWD_WGMMA_F16_D64, FA_CUDA_K_BWD_WGMMA_F16_D128},
            {FA_CUDA_K_BWD_WGMMA_BF16_D64, FA_CUDA_K_BWD_WGMMA_BF16_D128},
        };
        if (status == FA_OK && hopper)
            status = launch(
                ctx, bwd_wgmma[dt - 1][wg_d == 128], blocks(call->seq_k, FA_BWD_WGMMA_KEYS(wg_d)),
                hkv, b, FA_BWD_WGMMA_THREADS, wg_smem, &p, "launching the Hopper (wgmma) dK/dV/dQ");
        else if (status == FA_OK && v4_d256)
            status =
                launch(ctx, bwd_v4_d256[dt - 1][d256_wide], blocks(call->seq_k, FA_BWD4_KEYS_D256),
                       hkv, b, FA_BWD_THREADS, d256_wide ? d256_smem_wide : d256_smem_narrow, &p,
                       "launching the tensor-core dK/dV/dQ (v4, head dim 256)");
        else if (status == FA_OK && v4)
            status = launch(ctx, k4, blocks(call->seq_k, FA_BWD4_KEYS), hkv, b, FA_BWD_THREADS,
                            v4_smem, &p, "launching the tensor-core dK/dV/dQ (v4)");
        else if (status == FA_OK)
            status =
                launch(ctx, dkdv_dq_mma[dt - 1][wide], blocks(call->seq_k, FA_BWD_ROWS), hkv, b,
                       FA_BWD_THREADS, dkdv_dq_smem, &p, "launching the tensor-core dK/dV/dQ");
        if (status == FA_OK)
            status = launch(ctx, dq_convert[dt - 1],
                            blocks(call->seq_q * (call->head_dim / 8), FA_GEN_THREADS), hq, b,
                            FA_GEN_THREADS, 0, &p, "launching the dQ conversion");
        fa_cuda_leave(ctx);
        return status;
    }
    if (fast) {
        const int wide = d == 128;
        if (status == FA_OK)
            status = launch(ctx, dkdv_mma[dt - 1][wide], blocks(call->seq_k, FA_BWD_ROWS), hkv, b,
                            FA_BWD_THREADS, dkdv_smem, &p, "launching the tensor-core dK/dV");
        if (status == FA_OK)
            status = launch(ctx, dq_mma[dt - 1][wide], blocks(call->seq_q, FA_BWD_ROWS), hq, b,
                            FA_BWD_THREADS, dq_smem, &p, "launching the tensor-core dQ");
        fa_cuda_leave(ctx);
        return status;
    }
    if (status == FA_OK)
        status = launch(ctx, dkdv[dt][dpt], blocks(call->seq_k, FA_GEN_ROWS), hkv, b,
                        FA_GEN_THREADS, tile_smem + 2 * FA_GEN_TILE * sizeof(float), &p,
                        "launching the backward's dK/dV");
    if (status == FA_OK)
        status = launch(ctx, dq[dt][dpt], blocks(call->seq_q, FA_GEN_ROWS), hq, b, FA_GEN_THREADS,
                        tile_smem, &p, "launching the backward's dQ");
    fa_cuda_leave(ctx);
    return status;
}
