// The Hopper (sm_90a) kernels, compiled into their own fatbin that the host loads beside the
// main one on compute capability 9.0 only (wgmma exists there alone). Names:
//   fa_fwd_wgmma_<f16|bf16>_d<64|128>   forward on warpgroup MMA (fa_forward_wgmma.cuh)
//   fa_bwd_wgmma_<f16|bf16>_d<64|128>   dK, dV, and dQ into the f32 accumulator with atomics,
//                                        on warpgroup MMA (fa_backward_wgmma.cuh)
#include "fa_backward_wgmma.cuh"
#include "fa_forward_wgmma.cuh"

#define FA_FWD_WGMMA(name, T, D)                                                                   \
    extern "C" __global__ void __launch_bounds__(FA_FWD_WGMMA_THREADS, 1)                          \
        name(const __grid_constant__ fa_cuda_params p)                                             \
    {                                                                                              \
        fa_fwd_wgmma<T, D, FA_FWD_WGMMA_BK(D)>(p);                                                 \
    }
FA_FWD_WGMMA(fa_fwd_wgmma_f16_d64, __half, 64)
FA_FWD_WGMMA(fa_fwd_wgmma_f16_d128, __half, 128)
FA_FWD_WGMMA(fa_fwd_wgmma_bf16_d64, __nv_bfloat16, 64)
FA_FWD_WGMMA(fa_fwd_wgmma_bf16_d128, __nv_bfloat16, 128)

#define FA_BWD_WGMMA(name, T, D)                                                                   \
    extern "C" __global__ void __launch_bounds__(FA_BWD_WGMMA_THREADS, 1)                          \
        name(const __grid_constant__ fa_cuda_params p)                                             \
    {                                                                                              \
        fa_bwd_wgmma<T, D>(p);                                                                     \
    }
FA_BWD_WGMMA(fa_bwd_wgmma_f16_d64, __half, 64)
FA_BWD_WGMMA(fa_bwd_wgmma_f16_d128, __half, 128)
FA_BWD_WGMMA(fa_bwd_wgmma_bf16_d64, __nv_bfloat16, 64)
FA_BWD_WGMMA(fa_bwd_wgmma_bf16_d128, __nv_bfloat16, 128)
