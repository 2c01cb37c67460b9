// Every flashattn CUDA kernel, compiled in one unit into one fatbin (SASS for sm_80, sm_86,
// sm_89, sm_90, PTX for newer). The host looks kernels up by these unmangled names:
//   fa_fwd_mma_<dtype>_d<32|64|96|128|256> tensor-core forward (fa_fwd_mma_q128_<dtype>_d256:
//                                        128-row query blocks at head dim 256)
//   fa_fwd_gen_<dtype>_<dpt>            general forward (dpt = head_dim / 8 rounded up to 8/16/32)
//   fa_bwd_delta_<dtype>                Delta = rowsum(dO * O)
//   fa_bwd_dq_gen_<dtype>_<dpt>         general dQ
//   fa_bwd_dkdv_gen_<dtype>_<dpt>       general dK, dV
//   fa_bwd_v4_<dtype>_d<32|64|96|128>   tensor-core dK, dV, and dQ into an f32 accumulator with
//                                        atomics (the default backward where its smem fits)
//   fa_bwd_v4_q128_<dtype>_d64          the same with 128-row query tiles (head dim 64's default
//                                        where they fit)
//   fa_bwd_v4_<dtype>_d256              the same at head dim 256, 64 keys per block, 64-row query
//                                        tiles (fa_bwd_v4_q32_<dtype>_d256: 32 rows)
//   fa_bwd_dkdv_dq_mma_<dtype>_d<64|128> the same, backward v3 (less smem; FA_CUDA_BWD=v3)
//   fa_bwd_dq_convert_<dtype>           dQ = scale * that accumulator, in dQ's dtype and layout
//   fa_bwd_dkdv_mma_<dtype>_d<64|128>   tensor-core dK, dV (deterministic backward)
//   fa_bwd_dq_mma_<dtype>_d<64|128>     tensor-core dQ (deterministic backward)
#include "fa_backward_mma.cuh"
#include "fa_backward_v4.cuh"
#include "fa_forward_mma.cuh"
#include "fa_general.cuh"

// MT (16-row m-tiles per warp) from fa_cuda_abi.h: 32 rows per warp (MT = 2) up to head dim 128,
// measured faster than 16 (MT = 1) on every row of the H200 grid; 16 at 256 (registers).
#define FA_FWD_MMA(name, T, D, BQ)                                                                 \
    extern "C" __global__ void __launch_bounds__(FA_FWD_MMA_THREADS(D, BQ), 1)                     \
        name(fa_cuda_params p)                                                                     \
    {                                                                                              \
        fa_fwd_mma<T, D, FA_FWD_MMA_MT(D), BQ>(p);                                                 \
    }
FA_FWD_MMA(fa_fwd_mma_f16_d64, __half, 64, FA_FWD_MMA_BQ)
FA_FWD_MMA(fa_fwd_mma_f16_d128, __half, 128, FA_FWD_MMA_BQ)
FA_FWD_MMA(fa_fwd_mma_bf16_d64, __nv_bfloat16, 64, FA_FWD_MMA_BQ)
FA_FWD_MMA(fa_fwd_mma_bf16_d128, __nv_bfloat16, 128, FA_FWD_MMA_BQ)
FA_FWD_MMA(fa_fwd_mma_f16_d32, __half, 32, FA_FWD_MMA_BQ)
FA_FWD_MMA(fa_fwd_mma_f16_d96, __half, 96, FA_FWD_MMA_BQ)
FA_FWD_MMA(fa_fwd_mma_f16_d256, __half, 256, FA_FWD_MMA_BQ_D256)
FA_FWD_MMA(fa_fwd_mma_q128_f16_d256, __half, 256, FA_FWD_MMA_BQ_D256_WIDE)
FA_FWD_MMA(fa_fwd_mma_bf16_d32, __nv_bfloat16, 32, FA_FWD_MMA_BQ)
FA_FWD_MMA(fa_fwd_mma_bf16_d96, __nv_bfloat16, 96, FA_FWD_MMA_BQ)
FA_FWD_MMA(fa_fwd_mma_bf16_d256, __nv_bfloat16, 256, FA_FWD_MMA_BQ_D256)
FA_FWD_MMA(fa_fwd_mma_q128_bf16_d256, __nv_bfloat16, 256, FA_FWD_MMA_BQ_D256_WIDE)

#define FA_GEN(kind, fn, tname, T, DPT)                                                            \
    extern "C" __global__ void __launch_bounds__(FA_GEN_THREADS)                                   \
        fa_##kind##_##tname##_##DPT(fa_cuda_params p)                                              \
    {                                                                                              \
        fn<T, DPT>(p);                                                                             \
    }
#define FA_GEN_ALL(kind, fn)                                                                       \
    FA_GEN(kind, fn, f32, float, 8)                                                                \
    FA_GEN(kind, fn, f32, float, 16)                                                               \
    FA_GEN(kind, fn, f32, float, 32)                                                               \
    FA_GEN(kind, fn, f16, __half, 8)                                                               \
    FA_GEN(kind, fn, f16, __half, 16)                                                              \
    FA_GEN(kind, fn, f16, __half, 32)                                                              \
    FA_GEN(kind, fn, bf16, __nv_bfloat16, 8)                                                       \
    FA_GEN(kind, fn, bf16, __nv_bfloat16, 16)                                                      \
    FA_GEN(kind, fn, bf16, __nv_bfloat16, 32)
FA_GEN_ALL(fwd_gen, fa_gen_forward)
FA_GEN_ALL(bwd_dq_gen, fa_gen_bwd_dq)
FA_GEN_ALL(bwd_dkdv_gen, fa_gen_bwd_dkdv)

#define FA_DELTA(tname, T)                                                                         \
    extern "C" __global__ void __launch_bounds__(FA_GEN_THREADS)                                   \
        fa_bwd_delta_##tname(fa_cuda_params p)                                                     \
    {                                                                                              \
        fa_gen_delta<T>(p);                                                                        \
    }
FA_DELTA(f32, float)
FA_DELTA(f16, __half)
FA_DELTA(bf16, __nv_bfloat16)

#define FA_BWD_MMA(name, fn, ...)                                                                  \
    extern "C" __global__ void __launch_bounds__(FA_BWD_THREADS, 1) name(fa_cuda_params p)         \
    {                                                                                              \
        fn<__VA_ARGS__>(p);                                                                        \
    }
FA_BWD_MMA(fa_bwd_dkdv_dq_mma_f16_d64, fa_bwd_dkdv_mma, __half, 64, true)
FA_BWD_MMA(fa_bwd_dkdv_dq_mma_f16_d128, fa_bwd_dkdv_mma, __half, 128, true)
FA_BWD_MMA(fa_bwd_dkdv_dq_mma_bf16_d64, fa_bwd_dkdv_mma, __nv_bfloat16, 64, true)
FA_BWD_MMA(fa_bwd_dkdv_dq_mma_bf16_d128, fa_bwd_dkdv_mma, __nv_bfloat16, 128, true)
FA_BWD_MMA(fa_bwd_v4_f16_d64, fa_bwd_v4, __half, 64, FA_BWD4_QTILE, FA_BWD4_KEYS)
FA_BWD_MMA(fa_bwd_v4_f16_d128, fa_bwd_v4, __half, 128, FA_BWD4_QTILE, FA_BWD4_KEYS)
FA_BWD_MMA(fa_bwd_v4_bf16_d64, fa_bwd_v4, __nv_bfloat16, 64, FA_BWD4_QTILE, FA_BWD4_KEYS)
FA_BWD_MMA(fa_bwd_v4_bf16_d128, fa_bwd_v4, __nv_bfloat16, 128, FA_BWD4_QTILE, FA_BWD4_KEYS)
FA_BWD_MMA(fa_bwd_v4_f16_d32, fa_bwd_v4, __half, 32, FA_BWD4_QTILE, FA_BWD4_KEYS)
FA_BWD_MMA(fa_bwd_v4_f16_d96, fa_bwd_v4, __half, 96, FA_BWD4_QTILE, FA_BWD4_KEYS)
FA_BWD_MMA(fa_bwd_v4_bf16_d32, fa_bwd_v4, __nv_bfloat16, 32, FA_BWD4_QTILE, FA_BWD4_KEYS)
FA_BWD_MMA(fa_bwd_v4_bf16_d96, fa_bwd_v4, __nv_bfloat16, 96, FA_BWD4_QTILE, FA_BWD4_KEYS)
FA_BWD_MMA(fa_bwd_v4_q128_f16_d64, fa_bwd_v4, __half, 64, FA_BWD4_QTILE_WIDE, FA_BWD4_KEYS)
FA_BWD_MMA(fa_bwd_v4_q128_bf16_d64, fa_bwd_v4, __nv_bfloat16, 64, FA_BWD4_QTILE_WIDE, FA_BWD4_KEYS)
FA_BWD_MMA(fa_bwd_v4_f16_d256, fa_bwd_v4, __half, 256, FA_BWD4_QTILE_D256, FA_BWD4_KEYS_D256)
FA_BWD_MMA(fa_bwd_v4_bf16_d256, fa_bwd_v4, __nv_bfloat16, 256, FA_BWD4_QTILE_D256,
           FA_BWD4_KEYS_D256)
FA_BWD_MMA(fa_bwd_v4_q32_f16_d256, fa_bwd_v4, __half, 256, FA_BWD4_QTILE_D256_NARROW,
           FA_BWD4_KEYS_D256)
FA_BWD_MMA(fa_bwd_v4_q32_bf16_d256, fa_bwd_v4, __nv_bfloat16, 256, FA_BWD4_QTILE_D256_NARROW,
           FA_BWD4_KEYS_D256)
FA_BWD_MMA(fa_bwd_dkdv_mma_f16_d64, fa_bwd_dkdv_mma, __half, 64, false)
FA_BWD_MMA(fa_bwd_dkdv_mma_f16_d128, fa_bwd_dkdv_mma, __half, 128, false)
FA_BWD_MMA(fa_bwd_dkdv_mma_bf16_d64, fa_bwd_dkdv_mma, __nv_bfloat16, 64, false)
FA_BWD_MMA(fa_bwd_dkdv_mma_bf16_d128, fa_bwd_dkdv_mma, __nv_bfloat16, 128, false)
FA_BWD_MMA(fa_bwd_dq_mma_f16_d64, fa_bwd_dq_mma, __half, 64)
FA_BWD_MMA(fa_bwd_dq_mma_f16_d128, fa_bwd_dq_mma, __half, 128)
FA_BWD_MMA(fa_bwd_dq_mma_bf16_d64, fa_bwd_dq_mma, __nv_bfloat16, 64)
FA_BWD_MMA(fa_bwd_dq_mma_bf16_d128, fa_bwd_dq_mma, __nv_bfloat16, 128)

#define FA_DQ_CONVERT(tname, T)                                                                    \
    extern "C" __global__ void __launch_bounds__(FA_GEN_THREADS)                                   \
        fa_bwd_dq_convert_##tname(fa_cuda_params p)                                                \
    {                                                                                              \
        fa_bwd_dq_convert<T>(p);                                                                   \
    }
FA_DQ_CONVERT(f16, __half)
FA_DQ_CONVERT(bf16, __nv_bfloat16)
