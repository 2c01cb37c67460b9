/* Specialization-constant IDs of the cooperative-matrix shaders (attn_*_cm.comp), included by the
 * GLSL and by the host (backends/vulkan/vk_pipeline.c), so that each ID is written once. IDs 0
 * (head dim), 4 (causal) and 22 (GQA ratio) are shared with the scalar shaders (fa_common.glsl). */
#ifndef FA_MATRIX_IDS_H
#define FA_MATRIX_IDS_H

#define FA_SPEC_CM_M 23   /* rows of the A and accumulator matrices */
#define FA_SPEC_CM_N 24   /* columns of the B and accumulator matrices */
#define FA_SPEC_CM_K 25   /* columns of A, rows of B */
#define FA_SPEC_CM_SG 26  /* invocations per subgroup (required at pipeline creation) */
#define FA_SPEC_CM_NSG 27 /* subgroups per workgroup */
#define FA_SPEC_CM_TM 28  /* row blocks of CM_M rows per subgroup */
#define FA_SPEC_CM_BN 29  /* columns of one tile step: keys (forward, dQ) or queries (dK/dV) */
#define FA_SPEC_CM_WG 30  /* invocations per workgroup, CM_SG * CM_NSG (local_size_x_id) */

#endif
