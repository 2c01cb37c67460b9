// SPDX-License-Identifier: MIT
/* Every CUDA kernel of flashattn, named once. Included by the kernels' translation units (which
 * instantiate each row: fa_kernels.cu, fa_kernels_sm90.cu) and by the host (which numbers the
 * rows, looks their names up in the fatbin and plans launches from their family and tiling:
 * backends/cuda/cuda_plan.c). Adding a head dim or a tiling of an existing family is one row.
 *
 * A row: X(ID, name, FAMILY, DTYPE, D, P1, P2)
 *   ID      the host's enum suffix (FA_CUDA_K_<ID>)
 *   name    the unmangled kernel symbol
 *   FAMILY  the kernel body and launch geometry (below)
 *   DTYPE   F32, F16 or BF16 (inputs and outputs; arithmetic is f32 with tensor-core products);
 *           E4M3 (FP8 inputs, o in f32, f16 or bf16: fa_cuda_params.o_dtype)
 *   D       the head dim it serves, smaller ones padded with zeros (the CUDA-core kernels: the
 *           largest they take, 64, 128 or 256, at D / 8 dims per thread)
 *   P1, P2  family parameters, 0 where unused
 *
 * Families (geometry in shaders/cuda/fa_cuda_abi.h):
 *   FWD_MMA       tensor-core forward (mma.sync), P1 query rows per block
 *   FWD_WGMMA     Hopper forward (wgmma, sm_90a only), P1 a key tile other than
 *                 fa_fwdw_bk's (bf16 at 64: 128 keys for long rows, cuda_plan.c); P2 = 1 the
 *                 tensor-memory loader at head dim 64 too (each such row after its twin)
 *   FWD_WGMMA_SOFTCAP  the same for a softcap alone, folded into the exponent (the host's
 *                 fa_cuda_problem.softcap_fold)
 *   FWD_MMA_VARLEN, FWD_WGMMA_VARLEN, BWD_V4_VARLEN, BWD_WGMMA_VARLEN  the same kernels over
 *                 a packed variable-length batch in one launch (fa_cuda_params.varlen), the
 *                 wgmma ones at head dims 64 and 128 (the backward's at 128 spills 36 bytes
 *                 since the bias's code is in: docs/PERF.md); of the mma.sync ones (at 255
 * registers already) only those that bind a block to its sequence without spilling: the forward's
 * f16 64 and 128 and bf16 64, v4's 64 with 64-row query tiles (bf16 128 spilled 36 bytes, v4's 128
 * and its 128-row tiles at 64 28 and 8). BWD_DELTA and BWD_DQ_CONVERT take both kinds of call.
 *   FWD_TF32      f32 forward on tensor cores, each product as three TF32 products
 *   FWD_GEN       CUDA-core forward, any dtype and alignment, head dims up to D
 *   BWD_DELTA     Delta = rowsum(dO * O)
 *   BWD_DKDV_GEN  CUDA-core dK, dV;  BWD_DQ_GEN  CUDA-core dQ
 *   BWD_V4        tensor-core dK, dV, dQ by f32 atomics (FlashAttention-2's tiling), P1 query
 *                 rows per tile, P2 keys per block
 *   BWD_DKDV_MMA  tensor-core dK, dV;  BWD_DQ_MMA  tensor-core dQ (the deterministic backward)
 *   BWD_DQ_CONVERT  dQ = scale * the f32 accumulator, in dQ's dtype and layout
 *   BWD_WGMMA     Hopper dK, dV, dQ by atomics (wgmma, sm_90a only; head dim 256 without a bias)
 *   FWD_SPLIT     split-key forward for decoding (CUDA cores), head dims up to D, D / 32
 *                 elements a lane
 *   FWD_SPLIT_MMA split-key forward for decoding on tensor cores (mma.sync; f16, bf16), head
 *                 dims up to D
 *   FWD_MERGE     merges the split-key forward's chunks into O and LSE
 *   FWD_MMA_BIAS, BWD_V4_BIAS, BWD_DKDV_MMA_BIAS, BWD_DQ_MMA_BIAS  the mma.sync kernels again, for
 *                 calls with an additive bias (fa_cuda_params.bias): the others, at 255 registers,
 *                 spilled with its code in them */
#ifndef FA_CUDA_CATALOGUE_H
#define FA_CUDA_CATALOGUE_H

#include "fa_cuda_abi.h"

/* Compiled for sm_80, sm_86, sm_89, sm_90 (SASS) and newer (PTX): fa_kernels.cu. */
#define FA_CUDA_CATALOGUE(X)                                                                       \
    X(FWD_MMA_F16_D32, fa_fwd_mma_f16_d32, FWD_MMA, F16, 32, FA_FWD_MMA_BQ, 0)                     \
    X(FWD_MMA_F16_D64, fa_fwd_mma_f16_d64, FWD_MMA, F16, 64, FA_FWD_MMA_BQ, 0)                     \
    X(FWD_MMA_F16_D96, fa_fwd_mma_f16_d96, FWD_MMA, F16, 96, FA_FWD_MMA_BQ, 0)                     \
    X(FWD_MMA_F16_D128, fa_fwd_mma_f16_d128, FWD_MMA, F16, 128, FA_FWD_MMA_BQ, 0)                  \
    X(FWD_MMA_F16_D256, fa_fwd_mma_f16_d256, FWD_MMA, F16, 256, FA_FWD_MMA_BQ_D256, 0)             \
    X(FWD_MMA_Q128_F16_D256, fa_fwd_mma_q128_f16_d256, FWD_MMA, F16, 256, FA_FWD_MMA_BQ_D256_WIDE, \
      0)                                                                                           \
    X(FWD_MMA_BF16_D32, fa_fwd_mma_bf16_d32, FWD_MMA, BF16, 32, FA_FWD_MMA_BQ, 0)                  \
    X(FWD_MMA_BF16_D64, fa_fwd_mma_bf16_d64, FWD_MMA, BF16, 64, FA_FWD_MMA_BQ, 0)                  \
    X(FWD_MMA_BF16_D96, fa_fwd_mma_bf16_d96, FWD_MMA, BF16, 96, FA_FWD_MMA_BQ, 0)                  \
    X(FWD_MMA_BF16_D128, fa_fwd_mma_bf16_d128, FWD_MMA, BF16, 128, FA_FWD_MMA_BQ, 0)               \
    X(FWD_MMA_BF16_D256, fa_fwd_mma_bf16_d256, FWD_MMA, BF16, 256, FA_FWD_MMA_BQ_D256, 0)          \
    X(FWD_MMA_Q128_BF16_D256, fa_fwd_mma_q128_bf16_d256, FWD_MMA, BF16, 256,                       \
      FA_FWD_MMA_BQ_D256_WIDE, 0)                                                                  \
    X(FWD_MMA_VARLEN_F16_D64, fa_fwd_mma_varlen_f16_d64, FWD_MMA_VARLEN, F16, 64, FA_FWD_MMA_BQ,   \
      0)                                                                                           \
    X(FWD_MMA_VARLEN_F16_D128, fa_fwd_mma_varlen_f16_d128, FWD_MMA_VARLEN, F16, 128,               \
      FA_FWD_MMA_BQ, 0)                                                                            \
    X(FWD_MMA_VARLEN_BF16_D64, fa_fwd_mma_varlen_bf16_d64, FWD_MMA_VARLEN, BF16, 64,               \
      FA_FWD_MMA_BQ, 0)                                                                            \
    X(FWD_TF32_F32_D64, fa_fwd_tf32_f32_d64, FWD_TF32, F32, 64, 0, 0)                              \
    X(FWD_TF32_F32_D128, fa_fwd_tf32_f32_d128, FWD_TF32, F32, 128, 0, 0)                           \
    X(FWD_TF32_F32_D256, fa_fwd_tf32_f32_d256, FWD_TF32, F32, 256, 0, 0)                           \
    X(FWD_GEN_F32_8, fa_fwd_gen_f32_8, FWD_GEN, F32, 64, 0, 0)                                     \
    X(FWD_GEN_F32_16, fa_fwd_gen_f32_16, FWD_GEN, F32, 128, 0, 0)                                  \
    X(FWD_GEN_F32_32, fa_fwd_gen_f32_32, FWD_GEN, F32, 256, 0, 0)                                  \
    X(FWD_GEN_F16_8, fa_fwd_gen_f16_8, FWD_GEN, F16, 64, 0, 0)                                     \
    X(FWD_GEN_F16_16, fa_fwd_gen_f16_16, FWD_GEN, F16, 128, 0, 0)                                  \
    X(FWD_GEN_F16_32, fa_fwd_gen_f16_32, FWD_GEN, F16, 256, 0, 0)                                  \
    X(FWD_GEN_BF16_8, fa_fwd_gen_bf16_8, FWD_GEN, BF16, 64, 0, 0)                                  \
    X(FWD_GEN_BF16_16, fa_fwd_gen_bf16_16, FWD_GEN, BF16, 128, 0, 0)                               \
    X(FWD_GEN_BF16_32, fa_fwd_gen_bf16_32, FWD_GEN, BF16, 256, 0, 0)                               \
    X(BWD_DELTA_F32, fa_bwd_delta_f32, BWD_DELTA, F32, 256, 0, 0)                                  \
    X(BWD_DELTA_F16, fa_bwd_delta_f16, BWD_DELTA, F16, 256, 0, 0)                                  \
    X(BWD_DELTA_BF16, fa_bwd_delta_bf16, BWD_DELTA, BF16, 256, 0, 0)                               \
    X(BWD_DQ_GEN_F32_8, fa_bwd_dq_gen_f32_8, BWD_DQ_GEN, F32, 64, 0, 0)                            \
    X(BWD_DQ_GEN_F32_16, fa_bwd_dq_gen_f32_16, BWD_DQ_GEN, F32, 128, 0, 0)                         \
    X(BWD_DQ_GEN_F32_32, fa_bwd_dq_gen_f32_32, BWD_DQ_GEN, F32, 256, 0, 0)                         \
    X(BWD_DQ_GEN_F16_8, fa_bwd_dq_gen_f16_8, BWD_DQ_GEN, F16, 64, 0, 0)                            \
    X(BWD_DQ_GEN_F16_16, fa_bwd_dq_gen_f16_16, BWD_DQ_GEN, F16, 128, 0, 0)                         \
    X(BWD_DQ_GEN_F16_32, fa_bwd_dq_gen_f16_32, BWD_DQ_GEN, F16, 256, 0, 0)                         \
    X(BWD_DQ_GEN_BF16_8, fa_bwd_dq_gen_bf16_8, BWD_DQ_GEN, BF16, 64, 0, 0)                         \
    X(BWD_DQ_GEN_BF16_16, fa_bwd_dq_gen_bf16_16, BWD_DQ_GEN, BF16, 128, 0, 0)                      \
    X(BWD_DQ_GEN_BF16_32, fa_bwd_dq_gen_bf16_32, BWD_DQ_GEN, BF16, 256, 0, 0)                      \
    X(BWD_DKDV_GEN_F32_8, fa_bwd_dkdv_gen_f32_8, BWD_DKDV_GEN, F32, 64, 0, 0)                      \
    X(BWD_DKDV_GEN_F32_16, fa_bwd_dkdv_gen_f32_16, BWD_DKDV_GEN, F32, 128, 0, 0)                   \
    X(BWD_DKDV_GEN_F32_32, fa_bwd_dkdv_gen_f32_32, BWD_DKDV_GEN, F32, 256, 0, 0)                   \
    X(BWD_DKDV_GEN_F16_8, fa_bwd_dkdv_gen_f16_8, BWD_DKDV_GEN, F16, 64, 0, 0)                      \
    X(BWD_DKDV_GEN_F16_16, fa_bwd_dkdv_gen_f16_16, BWD_DKDV_GEN, F16, 128, 0, 0)                   \
    X(BWD_DKDV_GEN_F16_32, fa_bwd_dkdv_gen_f16_32, BWD_DKDV_GEN, F16, 256, 0, 0)                   \
    X(BWD_DKDV_GEN_BF16_8, fa_bwd_dkdv_gen_bf16_8, BWD_DKDV_GEN, BF16, 64, 0, 0)                   \
    X(BWD_DKDV_GEN_BF16_16, fa_bwd_dkdv_gen_bf16_16, BWD_DKDV_GEN, BF16, 128, 0, 0)                \
    X(BWD_DKDV_GEN_BF16_32, fa_bwd_dkdv_gen_bf16_32, BWD_DKDV_GEN, BF16, 256, 0, 0)                \
    X(BWD_V4_F16_D32, fa_bwd_v4_f16_d32, BWD_V4, F16, 32, FA_BWD4_QTILE, FA_BWD4_KEYS)             \
    X(BWD_V4_F16_D64, fa_bwd_v4_f16_d64, BWD_V4, F16, 64, FA_BWD4_QTILE, FA_BWD4_KEYS)             \
    X(BWD_V4_Q128_F16_D64, fa_bwd_v4_q128_f16_d64, BWD_V4, F16, 64, FA_BWD4_QTILE_WIDE,            \
      FA_BWD4_KEYS)                                                                                \
    X(BWD_V4_F16_D96, fa_bwd_v4_f16_d96, BWD_V4, F16, 96, FA_BWD4_QTILE, FA_BWD4_KEYS)             \
    X(BWD_V4_F16_D128, fa_bwd_v4_f16_d128, BWD_V4, F16, 128, FA_BWD4_QTILE, FA_BWD4_KEYS)          \
    X(BWD_V4_F16_D256, fa_bwd_v4_f16_d256, BWD_V4, F16, 256, FA_BWD4_QTILE_D256,                   \
      FA_BWD4_KEYS_D256)                                                                           \
    X(BWD_V4_Q32_F16_D256, fa_bwd_v4_q32_f16_d256, BWD_V4, F16, 256, FA_BWD4_QTILE_D256_NARROW,    \
      FA_BWD4_KEYS_D256)                                                                           \
    X(BWD_V4_BF16_D32, fa_bwd_v4_bf16_d32, BWD_V4, BF16, 32, FA_BWD4_QTILE, FA_BWD4_KEYS)          \
    X(BWD_V4_BF16_D64, fa_bwd_v4_bf16_d64, BWD_V4, BF16, 64, FA_BWD4_QTILE, FA_BWD4_KEYS)          \
    X(BWD_V4_Q128_BF16_D64, fa_bwd_v4_q128_bf16_d64, BWD_V4, BF16, 64, FA_BWD4_QTILE_WIDE,         \
      FA_BWD4_KEYS)                                                                                \
    X(BWD_V4_BF16_D96, fa_bwd_v4_bf16_d96, BWD_V4, BF16, 96, FA_BWD4_QTILE, FA_BWD4_KEYS)          \
    X(BWD_V4_BF16_D128, fa_bwd_v4_bf16_d128, BWD_V4, BF16, 128, FA_BWD4_QTILE, FA_BWD4_KEYS)       \
    X(BWD_V4_BF16_D256, fa_bwd_v4_bf16_d256, BWD_V4, BF16, 256, FA_BWD4_QTILE_D256,                \
      FA_BWD4_KEYS_D256)                                                                           \
    X(BWD_V4_Q32_BF16_D256, fa_bwd_v4_q32_bf16_d256, BWD_V4, BF16, 256, FA_BWD4_QTILE_D256_NARROW, \
      FA_BWD4_KEYS_D256)                                                                           \
    X(BWD_V4_VARLEN_F16_D64, fa_bwd_v4_varlen_f16_d64, BWD_V4_VARLEN, F16, 64, FA_BWD4_QTILE,      \
      FA_BWD4_KEYS)                                                                                \
    X(BWD_V4_VARLEN_BF16_D64, fa_bwd_v4_varlen_bf16_d64, BWD_V4_VARLEN, BF16, 64, FA_BWD4_QTILE,   \
      FA_BWD4_KEYS)                                                                                \
    X(BWD_DKDV_MMA_F16_D64, fa_bwd_dkdv_mma_f16_d64, BWD_DKDV_MMA, F16, 64, 0, 0)                  \
    X(BWD_DKDV_MMA_F16_D128, fa_bwd_dkdv_mma_f16_d128, BWD_DKDV_MMA, F16, 128, 0, 0)               \
    X(BWD_DKDV_MMA_BF16_D64, fa_bwd_dkdv_mma_bf16_d64, BWD_DKDV_MMA, BF16, 64, 0, 0)               \
    X(BWD_DKDV_MMA_BF16_D128, fa_bwd_dkdv_mma_bf16_d128, BWD_DKDV_MMA, BF16, 128, 0, 0)            \
    X(BWD_DQ_MMA_F16_D64, fa_bwd_dq_mma_f16_d64, BWD_DQ_MMA, F16, 64, 0, 0)                        \
    X(BWD_DQ_MMA_F16_D128, fa_bwd_dq_mma_f16_d128, BWD_DQ_MMA, F16, 128, 0, 0)                     \
    X(BWD_DQ_MMA_BF16_D64, fa_bwd_dq_mma_bf16_d64, BWD_DQ_MMA, BF16, 64, 0, 0)                     \
    X(BWD_DQ_MMA_BF16_D128, fa_bwd_dq_mma_bf16_d128, BWD_DQ_MMA, BF16, 128, 0, 0)                  \
    X(BWD_DQ_CONVERT_F16, fa_bwd_dq_convert_f16, BWD_DQ_CONVERT, F16, 256, 0, 0)                   \
    X(BWD_DQ_CONVERT_BF16, fa_bwd_dq_convert_bf16, BWD_DQ_CONVERT, BF16, 256, 0, 0)                \
    X(FWD_SPLIT_F32_D64, fa_fwd_split_f32_d64, FWD_SPLIT, F32, 64, 0, 0)                           \
    X(FWD_SPLIT_F32_D128, fa_fwd_split_f32_d128, FWD_SPLIT, F32, 128, 0, 0)                        \
    X(FWD_SPLIT_F32_D256, fa_fwd_split_f32_d256, FWD_SPLIT, F32, 256, 0, 0)                        \
    X(FWD_SPLIT_F16_D64, fa_fwd_split_f16_d64, FWD_SPLIT, F16, 64, 0, 0)                           \
    X(FWD_SPLIT_F16_D128, fa_fwd_split_f16_d128, FWD_SPLIT, F16, 128, 0, 0)                        \
    X(FWD_SPLIT_F16_D256, fa_fwd_split_f16_d256, FWD_SPLIT, F16, 256, 0, 0)                        \
    X(FWD_SPLIT_BF16_D64, fa_fwd_split_bf16_d64, FWD_SPLIT, BF16, 64, 0, 0)                        \
    X(FWD_SPLIT_BF16_D128, fa_fwd_split_bf16_d128, FWD_SPLIT, BF16, 128, 0, 0)                     \
    X(FWD_SPLIT_BF16_D256, fa_fwd_split_bf16_d256, FWD_SPLIT, BF16, 256, 0, 0)                     \
    X(FWD_SPLIT_MMA_F16_D64, fa_fwd_split_mma_f16_d64, FWD_SPLIT_MMA, F16, 64, 0, 0)               \
    X(FWD_SPLIT_MMA_F16_D128, fa_fwd_split_mma_f16_d128, FWD_SPLIT_MMA, F16, 128, 0, 0)            \
    X(FWD_SPLIT_MMA_F16_D256, fa_fwd_split_mma_f16_d256, FWD_SPLIT_MMA, F16, 256, 0, 0)            \
    X(FWD_SPLIT_MMA_BF16_D64, fa_fwd_split_mma_bf16_d64, FWD_SPLIT_MMA, BF16, 64, 0, 0)            \
    X(FWD_SPLIT_MMA_BF16_D128, fa_fwd_split_mma_bf16_d128, FWD_SPLIT_MMA, BF16, 128, 0, 0)         \
    X(FWD_SPLIT_MMA_BF16_D256, fa_fwd_split_mma_bf16_d256, FWD_SPLIT_MMA, BF16, 256, 0, 0)         \
    X(FWD_MERGE_F32, fa_fwd_merge_f32, FWD_MERGE, F32, 256, 0, 0)                                  \
    X(FWD_MERGE_F16, fa_fwd_merge_f16, FWD_MERGE, F16, 256, 0, 0)                                  \
    X(FWD_MERGE_BF16, fa_fwd_merge_bf16, FWD_MERGE, BF16, 256, 0, 0)                               \
    X(FWD_MMA_BIAS_F16_D32, fa_fwd_mma_bias_f16_d32, FWD_MMA_BIAS, F16, 32, FA_FWD_MMA_BQ, 0)      \
    X(FWD_MMA_BIAS_F16_D64, fa_fwd_mma_bias_f16_d64, FWD_MMA_BIAS, F16, 64, FA_FWD_MMA_BQ, 0)      \
    X(FWD_MMA_BIAS_F16_D96, fa_fwd_mma_bias_f16_d96, FWD_MMA_BIAS, F16, 96, FA_FWD_MMA_BQ, 0)      \
    X(FWD_MMA_BIAS_F16_D128, fa_fwd_mma_bias_f16_d128, FWD_MMA_BIAS, F16, 128, FA_FWD_MMA_BQ, 0)   \
    X(FWD_MMA_BIAS_F16_D256, fa_fwd_mma_bias_f16_d256, FWD_MMA_BIAS, F16, 256, FA_FWD_MMA_BQ_D256, \
      0)                                                                                           \
    X(FWD_MMA_BIAS_Q128_F16_D256, fa_fwd_mma_bias_q128_f16_d256, FWD_MMA_BIAS, F16, 256,           \
      FA_FWD_MMA_BQ_D256_WIDE, 0)                                                                  \
    X(FWD_MMA_BIAS_BF16_D32, fa_fwd_mma_bias_bf16_d32, FWD_MMA_BIAS, BF16, 32, FA_FWD_MMA_BQ, 0)   \
    X(FWD_MMA_BIAS_BF16_D64, fa_fwd_mma_bias_bf16_d64, FWD_MMA_BIAS, BF16, 64, FA_FWD_MMA_BQ, 0)   \
    X(FWD_MMA_BIAS_BF16_D96, fa_fwd_mma_bias_bf16_d96, FWD_MMA_BIAS, BF16, 96, FA_FWD_MMA_BQ, 0)   \
    X(FWD_MMA_BIAS_BF16_D128, fa_fwd_mma_bias_bf16_d128, FWD_MMA_BIAS, BF16, 128, FA_FWD_MMA_BQ,   \
      0)                                                                                           \
    X(FWD_MMA_BIAS_BF16_D256, fa_fwd_mma_bias_bf16_d256, FWD_MMA_BIAS, BF16, 256,                  \
      FA_FWD_MMA_BQ_D256, 0)                                                                       \
    X(FWD_MMA_BIAS_Q128_BF16_D256, fa_fwd_mma_bias_q128_bf16_d256, FWD_MMA_BIAS, BF16, 256,        \
      FA_FWD_MMA_BQ_D256_WIDE, 0)                                                                  \
    X(BWD_V4_BIAS_F16_D32, fa_bwd_v4_bias_f16_d32, BWD_V4_BIAS, F16, 32, FA_BWD4_QTILE,            \
      FA_BWD4_KEYS)                                                                                \
    X(BWD_V4_BIAS_F16_D64, fa_bwd_v4_bias_f16_d64, BWD_V4_BIAS, F16, 64, FA_BWD4_QTILE,            \
      FA_BWD4_KEYS)                                                                                \
    X(BWD_V4_BIAS_Q128_F16_D64, fa_bwd_v4_bias_q128_f16_d64, BWD_V4_BIAS, F16, 64,                 \
      FA_BWD4_QTILE_WIDE, FA_BWD4_KEYS)                                                            \
    X(BWD_V4_BIAS_F16_D96, fa_bwd_v4_bias_f16_d96, BWD_V4_BIAS, F16, 96, FA_BWD4_QTILE,            \
      FA_BWD4_KEYS)                                                                                \
    X(BWD_V4_BIAS_F16_D128, fa_bwd_v4_bias_f16_d128, BWD_V4_BIAS, F16, 128, FA_BWD4_QTILE,         \
      FA_BWD4_KEYS)                                                                                \
    X(BWD_V4_BIAS_F16_D256, fa_bwd_v4_bias_f16_d256, BWD_V4_BIAS, F16, 256, FA_BWD4_QTILE_D256,    \
      FA_BWD4_KEYS_D256)                                                                           \
    X(BWD_V4_BIAS_Q32_F16_D256, fa_bwd_v4_bias_q32_f16_d256, BWD_V4_BIAS, F16, 256,                \
      FA_BWD4_QTILE_D256_NARROW, FA_BWD4_KEYS_D256)                                                \
    X(BWD_V4_BIAS_BF16_D32, fa_bwd_v4_bias_bf16_d32, BWD_V4_BIAS, BF16, 32, FA_BWD4_QTILE,         \
      FA_BWD4_KEYS)                                                                                \
    X(BWD_V4_BIAS_BF16_D64, fa_bwd_v4_bias_bf16_d64, BWD_V4_BIAS, BF16, 64, FA_BWD4_QTILE,         \
      FA_BWD4_KEYS)                                                                                \
    X(BWD_V4_BIAS_Q128_BF16_D64, fa_bwd_v4_bias_q128_bf16_d64, BWD_V4_BIAS, BF16, 64,              \
      FA_BWD4_QTILE_WIDE, FA_BWD4_KEYS)                                                            \
    X(BWD_V4_BIAS_BF16_D96, fa_bwd_v4_bias_bf16_d96, BWD_V4_BIAS, BF16, 96, FA_BWD4_QTILE,         \
      FA_BWD4_KEYS)                                                                                \
    X(BWD_V4_BIAS_BF16_D128, fa_bwd_v4_bias_bf16_d128, BWD_V4_BIAS, BF16, 128, FA_BWD4_QTILE,      \
      FA_BWD4_KEYS)                                                                                \
    X(BWD_V4_BIAS_BF16_D256, fa_bwd_v4_bias_bf16_d256, BWD_V4_BIAS, BF16, 256, FA_BWD4_QTILE_D256, \
      FA_BWD4_KEYS_D256)                                                                           \
    X(BWD_V4_BIAS_Q32_BF16_D256, fa_bwd_v4_bias_q32_bf16_d256, BWD_V4_BIAS, BF16, 256,             \
      FA_BWD4_QTILE_D256_NARROW, FA_BWD4_KEYS_D256)                                                \
    X(BWD_DKDV_MMA_BIAS_F16_D64, fa_bwd_dkdv_mma_bias_f16_d64, BWD_DKDV_MMA_BIAS, F16, 64, 0, 0)   \
    X(BWD_DKDV_MMA_BIAS_F16_D128, fa_bwd_dkdv_mma_bias_f16_d128, BWD_DKDV_MMA_BIAS, F16, 128, 0,   \
      0)                                                                                           \
    X(BWD_DKDV_MMA_BIAS_BF16_D64, fa_bwd_dkdv_mma_bias_bf16_d64, BWD_DKDV_MMA_BIAS, BF16, 64, 0,   \
      0)                                                                                           \
    X(BWD_DKDV_MMA_BIAS_BF16_D128, fa_bwd_dkdv_mma_bias_bf16_d128, BWD_DKDV_MMA_BIAS, BF16, 128,   \
      0, 0)                                                                                        \
    X(BWD_DQ_MMA_BIAS_F16_D64, fa_bwd_dq_mma_bias_f16_d64, BWD_DQ_MMA_BIAS, F16, 64, 0, 0)         \
    X(BWD_DQ_MMA_BIAS_F16_D128, fa_bwd_dq_mma_bias_f16_d128, BWD_DQ_MMA_BIAS, F16, 128, 0, 0)      \
    X(BWD_DQ_MMA_BIAS_BF16_D64, fa_bwd_dq_mma_bias_bf16_d64, BWD_DQ_MMA_BIAS, BF16, 64, 0, 0)      \
    X(BWD_DQ_MMA_BIAS_BF16_D128, fa_bwd_dq_mma_bias_bf16_d128, BWD_DQ_MMA_BIAS, BF16, 128, 0, 0)

/* Compiled for sm_90a alone (wgmma, setmaxnreg), into a second fatbin the host loads on compute
 * capability 9.0: fa_kernels_sm90.cu. */
#define FA_CUDA_CATALOGUE_SM90(X)                                                                  \
    X(FWD_WGMMA_F16_D64, fa_fwd_wgmma_f16_d64, FWD_WGMMA, F16, 64, 0, 0)                           \
    X(FWD_WGMMA_F16_D128, fa_fwd_wgmma_f16_d128, FWD_WGMMA, F16, 128, 0, 0)                        \
    X(FWD_WGMMA_BF16_D64, fa_fwd_wgmma_bf16_d64, FWD_WGMMA, BF16, 64, 0, 0)                        \
    X(FWD_WGMMA_K128_BF16_D64, fa_fwd_wgmma_k128_bf16_d64, FWD_WGMMA, BF16, 64, 128, 0)            \
    X(FWD_WGMMA_BF16_D128, fa_fwd_wgmma_bf16_d128, FWD_WGMMA, BF16, 128, 0, 0)                     \
    X(FWD_WGMMA_F16_D256, fa_fwd_wgmma_f16_d256, FWD_WGMMA, F16, 256, 0, 0)                        \
    X(FWD_WGMMA_BF16_D256, fa_fwd_wgmma_bf16_d256, FWD_WGMMA, BF16, 256, 0, 0)                     \
    X(FWD_WGMMA_E4M3_D128, fa_fwd_wgmma_e4m3_d128, FWD_WGMMA, E4M3, 128, 0, 0)                     \
    X(FWD_WGMMA_TMA_F16_D64, fa_fwd_wgmma_tma_f16_d64, FWD_WGMMA, F16, 64, 0, 1)                   \
    X(FWD_WGMMA_TMA_BF16_D64, fa_fwd_wgmma_tma_bf16_d64, FWD_WGMMA, BF16, 64, 0, 1)                \
    X(FWD_WGMMA_TMA_K128_BF16_D64, fa_fwd_wgmma_tma_k128_bf16_d64, FWD_WGMMA, BF16, 64, 128, 1)    \
    X(FWD_WGMMA_SOFTCAP_F16_D64, fa_fwd_wgmma_softcap_f16_d64, FWD_WGMMA_SOFTCAP, F16, 64, 0, 0)   \
    X(FWD_WGMMA_SOFTCAP_F16_D128, fa_fwd_wgmma_softcap_f16_d128, FWD_WGMMA_SOFTCAP, F16, 128, 0,   \
      0)                                                                                           \
    X(FWD_WGMMA_SOFTCAP_BF16_D64, fa_fwd_wgmma_softcap_bf16_d64, FWD_WGMMA_SOFTCAP, BF16, 64, 0,   \
      0)                                                                                           \
    X(FWD_WGMMA_SOFTCAP_BF16_D128, fa_fwd_wgmma_softcap_bf16_d128, FWD_WGMMA_SOFTCAP, BF16, 128,   \
      0, 0)                                                                                        \
    X(FWD_WGMMA_SOFTCAP_F16_D256, fa_fwd_wgmma_softcap_f16_d256, FWD_WGMMA_SOFTCAP, F16, 256, 0,   \
      0)                                                                                           \
    X(FWD_WGMMA_SOFTCAP_BF16_D256, fa_fwd_wgmma_softcap_bf16_d256, FWD_WGMMA_SOFTCAP, BF16, 256,   \
      0, 0)                                                                                        \
    X(FWD_WGMMA_SOFTCAP_E4M3_D128, fa_fwd_wgmma_softcap_e4m3_d128, FWD_WGMMA_SOFTCAP, E4M3, 128,   \
      0, 0)                                                                                        \
    X(FWD_WGMMA_VARLEN_F16_D64, fa_fwd_wgmma_varlen_f16_d64, FWD_WGMMA_VARLEN, F16, 64, 0, 0)      \
    X(FWD_WGMMA_VARLEN_F16_D128, fa_fwd_wgmma_varlen_f16_d128, FWD_WGMMA_VARLEN, F16, 128, 0, 0)   \
    X(FWD_WGMMA_VARLEN_BF16_D64, fa_fwd_wgmma_varlen_bf16_d64, FWD_WGMMA_VARLEN, BF16, 64, 0, 0)   \
    X(FWD_WGMMA_VARLEN_BF16_D128, fa_fwd_wgmma_varlen_bf16_d128, FWD_WGMMA_VARLEN, BF16, 128, 0,   \
      0)                                                                                           \
    X(BWD_WGMMA_F16_D64, fa_bwd_wgmma_f16_d64, BWD_WGMMA, F16, 64, 0, 0)                           \
    X(BWD_WGMMA_F16_D128, fa_bwd_wgmma_f16_d128, BWD_WGMMA, F16, 128, 0, 0)                        \
    X(BWD_WGMMA_BF16_D64, fa_bwd_wgmma_bf16_d64, BWD_WGMMA, BF16, 64, 0, 0)                        \
    X(BWD_WGMMA_BF16_D128, fa_bwd_wgmma_bf16_d128, BWD_WGMMA, BF16, 128, 0, 0)                     \
    X(BWD_WGMMA_F16_D256, fa_bwd_wgmma_f16_d256, BWD_WGMMA, F16, 256, 0, 0)                        \
    X(BWD_WGMMA_BF16_D256, fa_bwd_wgmma_bf16_d256, BWD_WGMMA, BF16, 256, 0, 0)                     \
    X(BWD_WGMMA_VARLEN_F16_D64, fa_bwd_wgmma_varlen_f16_d64, BWD_WGMMA_VARLEN, F16, 64, 0, 0)      \
    X(BWD_WGMMA_VARLEN_BF16_D64, fa_bwd_wgmma_varlen_bf16_d64, BWD_WGMMA_VARLEN, BF16, 64, 0, 0)   \
    X(BWD_WGMMA_VARLEN_F16_D128, fa_bwd_wgmma_varlen_f16_d128, BWD_WGMMA_VARLEN, F16, 128, 0, 0)   \
    X(BWD_WGMMA_VARLEN_BF16_D128, fa_bwd_wgmma_varlen_bf16_d128, BWD_WGMMA_VARLEN, BF16, 128, 0, 0)

#endif
