// The wgmma backward (fa_backward_wgmma.cuh) for sm_90a: f16 and bf16 at head dims 64 and 128.
// Launch: grid (ceil(seq_k / FA_BWD_WGMMA_KEYS(d)), heads_kv, batch), FA_BWD_WGMMA_THREADS
// threads, FA_BWD_WGMMA_SMEM(d) bytes of dynamic shared memory (fa_cuda_abi.h).
#include "fa_backward_wgmma.cuh"

#define FA_BWD_WGMMA_KERNEL(name, T, D)                                                            \
    extern "C" __global__ void __launch_bounds__(FA_BWD_WGMMA_THREADS, 1)                          \
        name(const __grid_constant__ fa_cuda_params p)                                             \
    {                                                                                              \
        fa_bwd_wgmma<T, D>(p);                                                                     \
    }

FA_BWD_WGMMA_KERNEL(fa_bwd_wgmma_f16_d64, __half, 64)
FA_BWD_WGMMA_KERNEL(fa_bwd_wgmma_f16_d128, __half, 128)
FA_BWD_WGMMA_KERNEL(fa_bwd_wgmma_bf16_d64, __nv_bfloat16, 64)
FA_BWD_WGMMA_KERNEL(fa_bwd_wgmma_bf16_d128, __nv_bfloat16, 128)
