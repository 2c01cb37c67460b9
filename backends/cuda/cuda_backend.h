// SPDX-License-Identifier: MIT
/* What the CUDA backend's files share: the per-context state, error mapping, and the kernels
 * looked up from the embedded fatbins (the catalogue and the planner: cuda_plan.h). */
#ifndef FA_CUDA_BACKEND_H
#define FA_CUDA_BACKEND_H

#include "fa_internal.h"

#include "cuda_loader.h"
#include "cuda_plan.h"

/* A buffer: device memory of the primary context. */
typedef struct fa_cuda_buffer {
    CUdeviceptr ptr;
    size_t size;
    bool wrapped; /* the caller's memory (fa_buffer_wrap_cuda): never freed here */
} fa_cuda_buffer;

typedef struct fa_cuda_state {
    const fa_cuda_driver *cu;
    CUdevice device;
    CUcontext context; /* the device's primary context, retained */
    CUstream stream;
    bool own_stream; /* false when the caller gave its stream in fa_context_desc */
    CUmodule module;
    CUmodule module_sm90; /* the sm_90a kernels, where loaded */
    CUfunction kernels[FA_CUDA_K_COUNT];
    /* the device and the tuning knobs, as the planner takes them; wgmma_fwd / wgmma_bwd: the
     * sm_90a kernels are loaded (compute capability 9.0) and serve the forward / backward
     * (FA_CUDA_WGMMA=0: neither, =fwd or =bwd: only that one) */
    fa_cuda_caps caps;
    CUdeviceptr workspace; /* f32 scratch of the backward (Delta, dQ sums), grown on demand */
    size_t workspace_bytes;
    /* fa_cuda_params.index_error's int; index_pending: a call since the last synchronize read
     * seqlens_k or a block table, so that synchronize reads the int back */
    CUdeviceptr index_error;
    bool index_pending;
    CUdeviceptr split_done;   /* fa_cuda_params.split_done's FA_DEC_DONE_SLOTS ints, zeroed once */
    CUdeviceptr item_counter; /* fa_cuda_params.item_counter's two ints, zeroed once */
} fa_cuda_state;

/* Makes the context's primary context current on this thread (push) / restores (pop). */
fa_status fa_cuda_enter(fa_context *ctx);
void fa_cuda_leave(fa_context *ctx);
/* Maps a failed CUresult to a status and records "<what>: CUDA_ERROR_X (text)". */
fa_status fa_cuda_fail(fa_context *ctx, CUresult result, const char *what);

fa_status fa_cuda_forward(fa_context *ctx, const fa_attention_call *call);
fa_status fa_cuda_backward(fa_context *ctx, const fa_attention_call *call);
fa_status fa_cuda_check_call(fa_context *ctx, const fa_attention_call *call, bool backward);
bool fa_cuda_varlen_takes(fa_context *ctx, const fa_attention_call *call, bool backward);

#endif
