// SPDX-License-Identifier: MIT
// Every flashattn CUDA kernel of FA_CUDA_CATALOGUE (fa_cuda_catalogue.h: names, families,
// tilings), instantiated in one unit into one fatbin (SASS for sm_80, sm_86, sm_89, sm_90, PTX
// for newer). The host looks kernels up by their unmangled names.
#include "fa_backward_mma.cuh"
#include "fa_backward_v4.cuh"
#include "fa_cuda_catalogue.h"
#include "fa_decode.cuh"
#include "fa_decode_mma.cuh"
#include "fa_forward_mma.cuh"
#include "fa_forward_tf32.cuh"
#include "fa_general.cuh"
#include "fa_varlen.cuh"

#define FA_T_F32 float
#define FA_T_F16 __half
#define FA_T_BF16 __nv_bfloat16

// One instantiation per family: (name, element type, head dim, P1, P2) of the catalogue row.
// MT (16-row m-tiles per warp) from fa_cuda_abi.h: 32 rows per warp (MT = 2) up to head dim 128,
// measured faster than 16 (MT = 1) on every row of the H200 grid; 16 at 256 (registers).
#define FA_INSTANTIATE_FWD_MMA(name, T, D, BQ, P2)                                                 \
    extern "C" __global__ void __launch_bounds__(FA_FWD_MMA_THREADS(D, BQ), 1)                     \
        name(fa_cuda_params p)                                                                     \
    {                                                                                              \
        fa_fwd_mma<T, D, FA_FWD_MMA_MT(D), BQ, false>(p);                                          \
    }
// The mma.sync kernels again for calls with an additive bias (its code would cost the others
// registers: they sit at 255, and it spilled them).
#define FA_INSTANTIATE_FWD_MMA_BIAS(name, T, D, BQ, P2)                                            \
    extern "C" __global__ void __launch_bounds__(FA_FWD_MMA_THREADS(D, BQ), 1)                     \
        name(fa_cuda_params p)                                                                     \
    {                                                                                              \
        fa_fwd_mma<T, D, FA_FWD_MMA_MT(D), BQ, true>(p);                                           \
    }
// The same body over a packed batch, each block bound to its sequence (fa_varlen.cuh).
#define FA_INSTANTIATE_FWD_MMA_VARLEN(name, T, D, BQ, P2)                                          \
    extern "C" __global__ void __launch_bounds__(FA_FWD_MMA_THREADS(D, BQ), 1)                     \
        name(fa_cuda_params p)                                                                     \
    {                                                                                              \
        if (fa_varlen_bind<T>(p, FA_VARLEN_QUERY_TILES, BQ))                                       \
            fa_fwd_mma<T, D, FA_FWD_MMA_MT(D), BQ, false>(p);                                      \
    }
#define FA_INSTANTIATE_FWD_TF32(name, T, D, P1, P2)                                                \
    extern "C" __global__ void __launch_bounds__(FA_FWD_TF32_THREADS, FA_FWD_TF32_BLOCKS(D))       \
        name(fa_cuda_params p)                                                                     \
    {                                                                                              \
        fa_fwd_tf32<D>(p);                                                                         \
    }
// The CUDA-core kernels take D / 8 dims per thread.
#define FA_INSTANTIATE_GEN_(name, fn, T, D)                                                        \
    extern "C" __global__ void __launch_bounds__(FA_GEN_THREADS) name(fa_cuda_params p)            \
    {                                                                                              \
        fn<T, (D) / 8>(p);                                                                         \
    }
#define FA_INSTANTIATE_FWD_GEN(name, T, D, P1, P2) FA_INSTANTIATE_GEN_(name, fa_gen_forward, T, D)
#define FA_INSTANTIATE_BWD_DQ_GEN(name, T, D, P1, P2) FA_INSTANTIATE_GEN_(name, fa_gen_bwd_dq, T, D)
#define FA_INSTANTIATE_BWD_DKDV_GEN(name, T, D, P1, P2)                                            \
    FA_INSTANTIATE_GEN_(name, fa_gen_bwd_dkdv, T, D)
// Delta and the dQ conversion are cheap: one kernel for both, bound to its sequence where the
// call is a packed batch (fa_varlen.cuh).
#define FA_INSTANTIATE_ONE_VARLEN_(name, fn, T, grid, per_block)                                   \
    extern "C" __global__ void __launch_bounds__(FA_GEN_THREADS) name(fa_cuda_params p)            \
    {                                                                                              \
        if (!p.varlen || fa_varlen_bind<T>(p, grid, per_block))                                    \
            fn<T>(p);                                                                              \
    }
#define FA_INSTANTIATE_BWD_DELTA(name, T, D, P1, P2)                                               \
    FA_INSTANTIATE_ONE_VARLEN_(name, fa_gen_delta, T, FA_VARLEN_QUERY_ROWS, FA_GEN_ROWS)
#define FA_INSTANTIATE_BWD_DQ_CONVERT(name, T, D, P1, P2)                                          \
    FA_INSTANTIATE_ONE_VARLEN_(name, fa_bwd_dq_convert, T, FA_VARLEN_ANY, 0)
#define FA_INSTANTIATE_MMA_(name, fn, ...)                                                         \
    extern "C" __global__ void __launch_bounds__(FA_BWD_THREADS, 1) name(fa_cuda_params p)         \
    {                                                                                              \
        fn<__VA_ARGS__>(p);                                                                        \
    }
#define FA_INSTANTIATE_BWD_V4(name, T, D, QTILE, KEYS)                                             \
    FA_INSTANTIATE_MMA_(name, fa_bwd_v4, T, D, QTILE, KEYS, false)
#define FA_INSTANTIATE_BWD_V4_VARLEN(name, T, D, QTILE, KEYS)                                      \
    extern "C" __global__ void __launch_bounds__(FA_BWD_THREADS, 1) name(fa_cuda_params p)         \
    {                                                                                              \
        if (fa_varlen_bind<T>(p, FA_VARLEN_KEY_TILES, KEYS))                                       \
            fa_bwd_v4<T, D, QTILE, KEYS, false>(p);                                                \
    }
#define FA_INSTANTIATE_BWD_DKDV_MMA(name, T, D, P1, P2)                                            \
    FA_INSTANTIATE_MMA_(name, fa_bwd_dkdv_mma, T, D, false)
#define FA_INSTANTIATE_BWD_DQ_MMA(name, T, D, P1, P2)                                              \
    FA_INSTANTIATE_MMA_(name, fa_bwd_dq_mma, T, D, false)
#define FA_INSTANTIATE_BWD_V4_BIAS(name, T, D, QTILE, KEYS)                                        \
    FA_INSTANTIATE_MMA_(name, fa_bwd_v4, T, D, QTILE, KEYS, true)
#define FA_INSTANTIATE_BWD_DKDV_MMA_BIAS(name, T, D, P1, P2)                                       \
    FA_INSTANTIATE_MMA_(name, fa_bwd_dkdv_mma, T, D, true)
#define FA_INSTANTIATE_BWD_DQ_MMA_BIAS(name, T, D, P1, P2)                                         \
    FA_INSTANTIATE_MMA_(name, fa_bwd_dq_mma, T, D, true)

#define FA_INSTANTIATE_FWD_SPLIT(name, T, D, P1, P2)                                               \
    extern "C" __global__ void __launch_bounds__(FA_DEC_THREADS) name(fa_cuda_params p)            \
    {                                                                                              \
        fa_decode_split<T, (D) / 32>(p);                                                           \
    }
#define FA_INSTANTIATE_FWD_SPLIT_MMA(name, T, D, P1, P2)                                           \
    extern "C" __global__ void __launch_bounds__(32 * FA_DEC_MMA_MAX_WARPS) name(fa_cuda_params p) \
    {                                                                                              \
        fa_decode_mma<T, D>(p);                                                                    \
    }
#define FA_INSTANTIATE_FWD_MERGE(name, T, D, P1, P2)                                               \
    extern "C" __global__ void __launch_bounds__(FA_DEC_THREADS) name(fa_cuda_params p)            \
    {                                                                                              \
        fa_decode_merge<T>(p);                                                                     \
    }

#define FA_INSTANTIATE_(id, name, family, dtype, d, p1, p2)                                        \
    FA_INSTANTIATE_##family(name, FA_T_##dtype, d, p1, p2)
FA_CUDA_CATALOGUE(FA_INSTANTIATE_)
