// SPDX-License-Identifier: MIT
/* The -D build options of the OpenCL kernels, each named once: the host builds its option
 * strings from these lists (backends/opencl/opencl_attention.c), and the kernels, whose source
 * begins with this header, fail to build when one of their program's options is missing.
 * Valid C and OpenCL C. X(NAME, field): the option and the field of fa_cl_options that holds
 * its value. */
#ifndef FA_CL_OPTIONS_H
#define FA_CL_OPTIONS_H

/* FA_DTYPE: the storage type of q, k, v, o and the gradients. */
#define FA_CL_DTYPE_F32 1
#define FA_CL_DTYPE_F16 2
#define FA_CL_DTYPE_BF16 3

/* Every program: dtype, head dim (a multiple of 8), work-items per work-group, query rows and
 * keys per tile, causal 0/1, query heads per key/value head, full unrolling of the register-tile
 * loops 0/1, and the variants 0/1 (the forward's and the backward's: a sliding window, whose
 * bounds are kernel arguments, logit softcapping, and ALiBi, whose slopes are a kernel argument;
 * the decoding kernels have none of them), and the additive bias: 0 none, else the FA_CL_DTYPE_*
 * code of its elements (a kernel argument, whatever the call's dtype). */
#define FA_CL_COMMON_OPTIONS(X)                                                                    \
    X(FA_DTYPE, dtype)                                                                             \
    X(FA_D, d)                                                                                     \
    X(FA_NT, nt)                                                                                   \
    X(FA_BM, bm)                                                                                   \
    X(FA_BN, bn)                                                                                   \
    X(FA_CAUSAL, causal)                                                                           \
    X(FA_GQA, gqa)                                                                                 \
    X(FA_UNROLL_LOOPS, unroll_loops)                                                               \
    X(FA_WINDOW, window)                                                                           \
    X(FA_SOFTCAP, softcap)                                                                         \
    X(FA_ALIBI, alibi)                                                                             \
    X(FA_BIAS, bias)

/* The forward's register tiles (fa_forward.cl): work-items along the keys of S and along the
 * column groups of O; and the decoding kernels' form (fa_decode.cl, which takes these options
 * too, the tiles 0): 1 for the experiment of 32 work-items (FA_OPENCL_DECODE=w32). */
#define FA_CL_FWD_OPTIONS(X)                                                                       \
    X(FA_S_TX, s_tx)                                                                               \
    X(FA_O_TX, o_tx)                                                                               \
    X(FA_DEC_W32, dec_w32)

/* The backward's tiling (fa_backward.cl, runtime/fa_bwd_tiling.h) and FA_ALIGN4: q, k, v and dO
 * start and stride at multiples of 4 elements. */
#define FA_CL_BWD_OPTIONS(X)                                                                       \
    X(FA_SX, sx)                                                                                   \
    X(FA_KX, kx)                                                                                   \
    X(FA_QX, qx)                                                                                   \
    X(FA_DP, dp)                                                                                   \
    X(FA_DC, dc)                                                                                   \
    X(FA_RK, rk)                                                                                   \
    X(FA_RQ, rq)                                                                                   \
    X(FA_ALIGN4, align4)

/* In a kernel: an enumerator per option, which does not compile where the option is unset. */
#define FA_CL_REQUIRE(name_, field_) enum { name_##_is_set = name_ };

#endif
