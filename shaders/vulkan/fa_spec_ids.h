// SPDX-License-Identifier: MIT
/* Specialization-constant IDs of every Vulkan compute shader, included by the GLSL and by the host
 * (backends/vulkan/vk_pipeline.c), so that each ID is written once. The host passes a value for
 * every ID (0 keeps a shader's default); each shader declares only its own. */
#ifndef FA_SPEC_IDS_H
#define FA_SPEC_IDS_H

/* Every kernel (fa_common.glsl). */
#define FA_SPEC_HEAD_DIM 0 /* head dim, a multiple of 8 up to 256 */
#define FA_SPEC_CAUSAL 4   /* bool */
#define FA_SPEC_GQA 22     /* query heads per key/value head */

/* The scalar backward's dK/dV and dQ passes (fa_backward.glsl). */
#define FA_SPEC_BWD_THREADS 1 /* invocations per workgroup (local_size_x_id) */
#define FA_SPEC_BWD_BM 2      /* query rows per tile */
#define FA_SPEC_BWD_BN 3      /* keys per tile */
#define FA_SPEC_BWD_SX 10     /* invocations along the keys of S */
#define FA_SPEC_BWD_KX 11     /* invocations along the head dim of dK/dV */
#define FA_SPEC_BWD_QX 12     /* invocations along the head dim of dQ */
#define FA_SPEC_BWD_DP 13     /* head dim padded to the dK/dV and dQ tiles */
#define FA_SPEC_BWD_DC 14     /* column chunk of S and dP */
#define FA_SPEC_BWD_RK 15     /* row chunk of the dK/dV product */
#define FA_SPEC_BWD_RQ 16     /* row chunk of the dQ product */
#define FA_SPEC_BWD_ALIGN4 18 /* bool: every offset and stride a multiple of 4 */
#define FA_SPEC_BWD_UNROLL 19 /* steps per iteration of the reduction loops */

/* The scalar forward (attn_fwd.comp). */
#define FA_SPEC_FWD_THREADS 5  /* invocations per workgroup (local_size_x_id) */
#define FA_SPEC_FWD_BM 6       /* query rows per workgroup */
#define FA_SPEC_FWD_BN 7       /* keys per K/V tile */
#define FA_SPEC_FWD_S_TX 8     /* invocations along the keys of S */
#define FA_SPEC_FWD_O_TX 9     /* invocations along the column groups of O */
#define FA_SPEC_FWD_TILE16 17  /* bool: Q and K/V tiles in 16-bit form */
#define FA_SPEC_FWD_VARIANT 20 /* tuning bits */
#define FA_SPEC_FWD_UNROLL 21  /* steps per iteration of the step loops; 0: free */

/* The cooperative-matrix shaders (attn_*_cm.comp, fa_matrix.glsl). */
#define FA_SPEC_CM_M 23   /* rows of the A and accumulator matrices */
#define FA_SPEC_CM_N 24   /* columns of the B and accumulator matrices */
#define FA_SPEC_CM_K 25   /* columns of A, rows of B */
#define FA_SPEC_CM_SG 26  /* invocations per subgroup (required at pipeline creation) */
#define FA_SPEC_CM_NSG 27 /* subgroups per workgroup */
#define FA_SPEC_CM_TM 28  /* row blocks of CM_M rows per subgroup */
#define FA_SPEC_CM_BN 29  /* columns of one tile step: keys (forward, dQ) or queries (dK/dV) */
#define FA_SPEC_CM_WG 30  /* invocations per workgroup, CM_SG * CM_NSG (local_size_x_id) */

/* The decoding forward (attn_decode.comp). */
#define FA_SPEC_DEC_RW 31    /* packed query rows per workgroup */
#define FA_SPEC_DEC_SG 32    /* invocations per subgroup (required at pipeline creation) */
#define FA_SPEC_DEC_MERGE 37 /* bool: each group's last workgroup merges the chunks */
/* bool: Q and K in whole 16-byte units and V and O in quads (offsets and strides), so the
 * element-wise loads and stores are left out of the pipeline */
#define FA_SPEC_DEC_ALIGNED 38

/* The variants (fa_common.glsl): a sliding window, logit softcapping (bools; their values are
 * push constants, FA_VARIANT_MEMBERS in fa_params.glsl), ALiBi (a bool; the slopes are copied
 * into the workspace, packed (batch, query head), before the dispatch), an additive bias (its
 * dtype, fa_dtype's value, 0 for none; its buffer is bound and read as 32-bit words, its view's
 * offset and strides are written into the workspace after the slopes). The scalar forward and
 * backward take all four, the cooperative-matrix ones all but the bias. */
#define FA_SPEC_WINDOW 33
#define FA_SPEC_SOFTCAP 34
#define FA_SPEC_ALIBI 35
#define FA_SPEC_BIAS 36

#define FA_SPEC_COUNT 39

#endif
