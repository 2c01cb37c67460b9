/* What the CUDA backend's files share: the per-context state, error mapping, and the kernel
 * table looked up from the embedded fatbin. */
#ifndef FA_CUDA_BACKEND_H
#define FA_CUDA_BACKEND_H

#include "fa_internal.h"

#include "cuda_loader.h"

/* Every kernel the host launches, by index into fa_cuda_state.kernels. */
#define FA_CUDA_KERNELS(X)                                                                         \
    X(FWD_MMA_F16_D64, "fa_fwd_mma_f16_d64")                                                       \
    X(FWD_MMA_F16_D128, "fa_fwd_mma_f16_d128")                                                     \
    X(FWD_MMA_BF16_D64, "fa_fwd_mma_bf16_d64")                                                     \
    X(FWD_MMA_BF16_D128, "fa_fwd_mma_bf16_d128")                                                   \
    X(FWD_MMA_F16_D32, "fa_fwd_mma_f16_d32")                                                       \
    X(FWD_MMA_F16_D96, "fa_fwd_mma_f16_d96")                                                       \
    X(FWD_MMA_F16_D256, "fa_fwd_mma_f16_d256")                                                     \
    X(FWD_MMA_BF16_D32, "fa_fwd_mma_bf16_d32")                                                     \
    X(FWD_MMA_BF16_D96, "fa_fwd_mma_bf16_d96")                                                     \
    X(FWD_MMA_BF16_D256, "fa_fwd_mma_bf16_d256")                                                   \
    X(FWD_MMA_Q128_F16_D256, "fa_fwd_mma_q128_f16_d256")                                           \
    X(FWD_MMA_Q128_BF16_D256, "fa_fwd_mma_q128_bf16_d256")                                         \
    X(FWD_GEN_F32_8, "fa_fwd_gen_f32_8")                                                           \
    X(FWD_GEN_F32_16, "fa_fwd_gen_f32_16")                                                         \
    X(FWD_GEN_F32_32, "fa_fwd_gen_f32_32")                                                         \
    X(FWD_GEN_F16_8, "fa_fwd_gen_f16_8")                                                           \
    X(FWD_GEN_F16_16, "fa_fwd_gen_f16_16")                                                         \
    X(FWD_GEN_F16_32, "fa_fwd_gen_f16_32")                                                         \
    X(FWD_GEN_BF16_8, "fa_fwd_gen_bf16_8")                                                         \
    X(FWD_GEN_BF16_16, "fa_fwd_gen_bf16_16")                                                       \
    X(FWD_GEN_BF16_32, "fa_fwd_gen_bf16_32")                                                       \
    X(BWD_DKDV_MMA_F16_D64, "fa_bwd_dkdv_mma_f16_d64")                                             \
    X(BWD_DKDV_MMA_F16_D128, "fa_bwd_dkdv_mma_f16_d128")                                           \
    X(BWD_DKDV_MMA_BF16_D64, "fa_bwd_dkdv_mma_bf16_d64")                                           \
    X(BWD_DKDV_MMA_BF16_D128, "fa_bwd_dkdv_mma_bf16_d128")                                         \
    X(BWD_DKDV_DQ_MMA_F16_D64, "fa_bwd_dkdv_dq_mma_f16_d64")                                       \
    X(BWD_DKDV_DQ_MMA_F16_D128, "fa_bwd_dkdv_dq_mma_f16_d128")                                     \
    X(BWD_DKDV_DQ_MMA_BF16_D64, "fa_bwd_dkdv_dq_mma_bf16_d64")                                     \
    X(BWD_DKDV_DQ_MMA_BF16_D128, "fa_bwd_dkdv_dq_mma_bf16_d128")                                   \
    X(BWD_V4_F16_D64, "fa_bwd_v4_f16_d64")                                                         \
    X(BWD_V4_F16_D128, "fa_bwd_v4_f16_d128")                                                       \
    X(BWD_V4_BF16_D64, "fa_bwd_v4_bf16_d64")                                                       \
    X(BWD_V4_BF16_D128, "fa_bwd_v4_bf16_d128")                                                     \
    X(BWD_V4_F16_D32, "fa_bwd_v4_f16_d32")                                                         \
    X(BWD_V4_F16_D96, "fa_bwd_v4_f16_d96")                                                         \
    X(BWD_V4_BF16_D32, "fa_bwd_v4_bf16_d32")                                                       \
    X(BWD_V4_BF16_D96, "fa_bwd_v4_bf16_d96")                                                       \
    X(BWD_V4_Q128_F16_D64, "fa_bwd_v4_q128_f16_d64")                                               \
    X(BWD_V4_Q128_BF16_D64, "fa_bwd_v4_q128_bf16_d64")                                             \
    X(BWD_V4_F16_D256, "fa_bwd_v4_f16_d256")                                                       \
    X(BWD_V4_BF16_D256, "fa_bwd_v4_bf16_d256")                                                     \
    X(BWD_V4_Q32_F16_D256, "fa_bwd_v4_q32_f16_d256")                                               \
    X(BWD_V4_Q32_BF16_D256, "fa_bwd_v4_q32_bf16_d256")                                             \
    X(BWD_DQ_CONVERT_F16, "fa_bwd_dq_convert_f16")                                                 \
    X(BWD_DQ_CONVERT_BF16, "fa_bwd_dq_convert_bf16")                                               \
    X(BWD_DQ_MMA_F16_D64, "fa_bwd_dq_mma_f16_d64")                                                 \
    X(BWD_DQ_MMA_F16_D128, "fa_bwd_dq_mma_f16_d128")                                               \
    X(BWD_DQ_MMA_BF16_D64, "fa_bwd_dq_mma_bf16_d64")                                               \
    X(BWD_DQ_MMA_BF16_D128, "fa_bwd_dq_mma_bf16_d128")                                             \
    X(BWD_DELTA_F32, "fa_bwd_delta_f32")                                                           \
    X(BWD_DELTA_F16, "fa_bwd_delta_f16")                                                           \
    X(BWD_DELTA_BF16, "fa_bwd_delta_bf16")                                                         \
    X(BWD_DQ_GEN_F32_8, "fa_bwd_dq_gen_f32_8")                                                     \
    X(BWD_DQ_GEN_F32_16, "fa_bwd_dq_gen_f32_16")                                                   \
    X(BWD_DQ_GEN_F32_32, "fa_bwd_dq_gen_f32_32")                                                   \
    X(BWD_DQ_GEN_F16_8, "fa_bwd_dq_gen_f16_8")                                                     \
    X(BWD_DQ_GEN_F16_16, "fa_bwd_dq_gen_f16_16")                                                   \
    X(BWD_DQ_GEN_F16_32, "fa_bwd_dq_gen_f16_32")                                                   \
    X(BWD_DQ_GEN_BF16_8, "fa_bwd_dq_gen_bf16_8")                                                   \
    X(BWD_DQ_GEN_BF16_16, "fa_bwd_dq_gen_bf16_16")                                                 \
    X(BWD_DQ_GEN_BF16_32, "fa_bwd_dq_gen_bf16_32")                                                 \
    X(BWD_DKDV_GEN_F32_8, "fa_bwd_dkdv_gen_f32_8")                                                 \
    X(BWD_DKDV_GEN_F32_16, "fa_bwd_dkdv_gen_f32_16")                                               \
    X(BWD_DKDV_GEN_F32_32, "fa_bwd_dkdv_gen_f32_32")                                               \
    X(BWD_DKDV_GEN_F16_8, "fa_bwd_dkdv_gen_f16_8")                                                 \
    X(BWD_DKDV_GEN_F16_16, "fa_bwd_dkdv_gen_f16_16")                                               \
    X(BWD_DKDV_GEN_F16_32, "fa_bwd_dkdv_gen_f16_32")                                               \
    X(BWD_DKDV_GEN_BF16_8, "fa_bwd_dkdv_gen_bf16_8")                                               \
    X(BWD_DKDV_GEN_BF16_16, "fa_bwd_dkdv_gen_bf16_16")                                             \
    X(BWD_DKDV_GEN_BF16_32, "fa_bwd_dkdv_gen_bf16_32")

/* The Hopper kernels, from the sm_90a fatbin: looked up only on compute capability 9.0 (NULL
 * elsewhere, or with FA_CUDA_WGMMA=0). */
#define FA_CUDA_KERNELS_SM90(X)                                                                    \
    X(FWD_WGMMA_F16_D64, "fa_fwd_wgmma_f16_d64")                                                   \
    X(FWD_WGMMA_F16_D128, "fa_fwd_wgmma_f16_d128")                                                 \
    X(FWD_WGMMA_BF16_D64, "fa_fwd_wgmma_bf16_d64")                                                 \
    X(FWD_WGMMA_BF16_D128, "fa_fwd_wgmma_bf16_d128")                                               \
    X(BWD_WGMMA_F16_D64, "fa_bwd_wgmma_f16_d64")                                                   \
    X(BWD_WGMMA_F16_D128, "fa_bwd_wgmma_f16_d128")                                                 \
    X(BWD_WGMMA_BF16_D64, "fa_bwd_wgmma_bf16_d64")                                                 \
    X(BWD_WGMMA_BF16_D128, "fa_bwd_wgmma_bf16_d128")

typedef enum fa_cuda_kernel {
#define FA_CUDA_KERNEL_ENUM_(id, name) FA_CUDA_K_##id,
    FA_CUDA_KERNELS(FA_CUDA_KERNEL_ENUM_) FA_CUDA_KERNELS_SM90(FA_CUDA_KERNEL_ENUM_)
#undef FA_CUDA_KERNEL_ENUM_
        FA_CUDA_K_COUNT
} fa_cuda_kernel;
#define FA_CUDA_K_SM90_FIRST FA_CUDA_K_FWD_WGMMA_F16_D64

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
    /* the sm_90a kernels are loaded (compute capability 9.0) and serve the forward / backward
     * (FA_CUDA_WGMMA=0: neither, =fwd or =bwd: only that one) */
    bool wgmma_fwd, wgmma_bwd;
    int cc_major, cc_minor;
    int smem_optin;     /* bytes of shared memory a block may opt in to */
    bool force_general; /* FA_CUDA_KERNELS=general: tensor-core paths off (testing) */
    bool force_bwd_v3;  /* FA_CUDA_BWD=v3: the atomic backward's v3 kernel instead of v4 */
    bool bwd4_q128_d64; /* v4's 128-row query tiles at head dim 64 (off: FA_CUDA_BWD4_QTILE_D64=64)
                         */
    int fwd_qtile_d256; /* FA_CUDA_FWD_QTILE_D256=64|128: the forward's query rows per block at
                           head dim 256 (0: chosen by shared memory) */
    bool bwd_d256; /* backward v4 at head dims 129-256 (FA_CUDA_BWD_D256=0: the general kernels) */
    CUdeviceptr workspace; /* f32 scratch of the backward (Delta, dQ sums), grown on demand */
    size_t workspace_bytes;
} fa_cuda_state;

/* Makes the context's primary context current on this thread (push) / restores (pop). */
fa_status fa_cuda_enter(fa_context *ctx);
void fa_cuda_leave(fa_context *ctx);
/* Maps a failed CUresult to a status and records "<what>: CUDA_ERROR_X (text)". */
fa_status fa_cuda_fail(fa_context *ctx, CUresult result, const char *what);

fa_status fa_cuda_forward(fa_context *ctx, const fa_attention_call *call);
fa_status fa_cuda_backward(fa_context *ctx, const fa_attention_call *call);
fa_status fa_cuda_check_call(fa_context *ctx, const fa_attention_call *call, bool backward);

#endif
