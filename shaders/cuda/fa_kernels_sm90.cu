// SPDX-License-Identifier: MIT
// The Hopper (sm_90a) kernels of FA_CUDA_CATALOGUE_SM90 (fa_cuda_catalogue.h), compiled into
// their own fatbin that the host loads beside the main one on compute capability 9.0 only
// (wgmma exists there alone).
#include "fa_backward_wgmma256.cuh"
#include "fa_cuda_catalogue.h"
#include "fa_forward_wgmma.cuh"
#include "fa_varlen.cuh"

#define FA_T_F16 __half
#define FA_T_BF16 __nv_bfloat16
#define FA_T_E4M3 fa_e4m3

// P1: a key tile other than fa_fwdw_bk's (0: that one); P2: the tensor-memory loader with three
// computing warpgroups too (head dim 64).
#define FA_FWDW_TMA(D, P2) ((P2) || FA_FWD_WGMMA_NC(D) == 2)
#define FA_INSTANTIATE_FWD_WGMMA(name, T, D, P1, P2)                                               \
    extern "C" __global__ void __launch_bounds__(FA_FWD_WGMMA_THREADS_D(D), 1)                     \
        name(const __grid_constant__ fa_cuda_params p)                                             \
    {                                                                                              \
        fa_fwd_wgmma<T, D, (P1) ? (P1) : fa_fwdw_bk<T, D, true>, FA_FWD_WGMMA_PERSISTENT(D),       \
                     false, FA_FWDW_TMA(D, P2)>(p);                                                \
    }
// The same body for a softcap alone, folded into the exponent (the host checks the call).
#define FA_INSTANTIATE_FWD_WGMMA_SOFTCAP(name, T, D, P1, P2)                                       \
    extern "C" __global__ void __launch_bounds__(FA_FWD_WGMMA_THREADS_D(D), 1)                     \
        name(const __grid_constant__ fa_cuda_params p)                                             \
    {                                                                                              \
        fa_fwd_wgmma<T, D, fa_fwdw_bk<T, D, false>, FA_FWD_WGMMA_PERSISTENT(D), true,              \
                     FA_FWDW_TMA(D, 0)>(p);                                                        \
    }
// The same body over a packed batch, each block bound to its sequence (fa_varlen.cuh), without
// the tensor maps (the host makes none for packed batches; taking their address in this copy of
// the parameters would put it in local memory).
#define FA_INSTANTIATE_FWD_WGMMA_VARLEN(name, T, D, P1, P2)                                        \
    extern "C" __global__ void __launch_bounds__(FA_FWD_WGMMA_THREADS_D(D), 1)                     \
        name(const __grid_constant__ fa_cuda_params p)                                             \
    {                                                                                              \
        fa_cuda_params s = p; /* registers: 288 TF/s at N=512 D=128, fa_varlen_enter 268 */        \
        if (fa_varlen_bind<T>(s, FA_VARLEN_QUERY_TILES, FA_FWD_WGMMA_BQ_D(D)))                     \
            fa_fwd_wgmma<T, D, fa_fwdw_bk<T, D, false>, false, false, false>(s);                   \
    }
#define FA_INSTANTIATE_BWD_WGMMA(name, T, D, P1, P2)                                               \
    extern "C" __global__ void __launch_bounds__(FA_BWD_WGMMA_THREADS, 1)                          \
        name(const __grid_constant__ fa_cuda_params p)                                             \
    {                                                                                              \
        fa_bwd_wgmma_at<T, D>(p);                                                                  \
    }
// The backward's bound parameters in shared memory (in registers they spilled 96 bytes at 128).
#define FA_INSTANTIATE_BWD_WGMMA_VARLEN(name, T, D, P1, P2)                                        \
    extern "C" __global__ void __launch_bounds__(FA_BWD_WGMMA_THREADS, 1)                          \
        name(const __grid_constant__ fa_cuda_params p)                                             \
    {                                                                                              \
        if (const fa_cuda_params *s =                                                              \
                fa_varlen_enter<T>(p, FA_VARLEN_KEY_TILES, FA_BWD_WGMMA_KEYS(D)))                  \
            fa_bwd_wgmma<T, D, true>(*s);                                                          \
    }

#define FA_INSTANTIATE_(id, name, family, dtype, d, p1, p2)                                        \
    FA_INSTANTIATE_##family(name, FA_T_##dtype, d, p1, p2)
FA_CUDA_CATALOGUE_SM90(FA_INSTANTIATE_)
