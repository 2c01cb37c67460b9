// SPDX-License-Identifier: MIT
// The dK/dV and dQ passes of the backward on cooperative matrices (attn_bwd_dkdv_cm.comp and
// attn_bwd_dq_cm.comp include this; Delta and the LSE in log2 units come from attn_bwd_prep.comp
// through the workspace, as for the scalar passes, whose push constants and bindings these
// share). Deterministic, no atomics:
//   dK/dV: one workgroup per (key tile of BM keys, KV head, batch), NSG subgroups of RM keys each,
//     looping over the query tiles of BN of every query head of the GQA group. Per query tile:
//     S^T = K Q^T and dP^T = V dO^T; on their elements P^T = exp2(S^T scale log2e - LSE2) and
//     dS^T = P^T (dP^T - Delta), with the query tile's LSE2 and Delta as matrices of repeated
//     rows; both become A matrices (in registers with FA_CM_A_FROM_C, else through f16
//     scratch); then dV += P^T dO and dK += dS^T Q. K and V stay in registers as A matrices.
//   dQ: one workgroup per (query tile of BM, query head, batch), NSG subgroups of RM queries,
//     looping over key tiles of BN: S = Q K^T, dP = dO V^T; P and dS = P (dP - Delta) on their
//     elements (LSE2 and Delta of the subgroup's rows in registers per row slot where the row
//     form is known, else as matrices of repeated columns); dS becomes an A matrix as above;
//     dQ += dS K. Q and dO stay in registers as A matrices.
// The variants as in the scalar passes (fa_backward.glsl): SOFTCAP softcaps S and multiplies dS by
// 1 - tanh^2, ALIBI adds the bias (the slopes after LSE2 and Delta in the workspace), BIAS the
// additive bias's elements (fa_bias.glsl), and causal and WINDOW skip the tiles no row or key
// of the other tile sees.
// No row reductions: every step works on the accumulators' own elements (fa_matrix.glsl), with
// the index matrix where a mask crosses the tile or the end of the keys does, or for ALiBi and the
// bias. The columns' tensors (Q and dO, or K and V) are BN x D f16 tiles in shared memory. dK and
// dQ are scaled once at the end.
#extension GL_GOOGLE_include_directive : require
#include "fa_matrix.glsl"

TENSOR8(0, q_buf)
TENSOR8(1, k_buf)
TENSOR8(2, v_buf)
TENSOR8(3, do_buf)
layout(set = 0, binding = 4, std430) readonly buffer ws_block { float ws[]; }; // LSE2, Delta, slopes
TENSOR8(5, g0_buf) // dK, or dQ

FA_BWD_PARAMS
// BIAS (the pass defines FA_BIAS_BINDING): its view after LSE2, Delta and the slopes.
#define FA_BIAS_VIEW(i_) ws[2u * pc.delta_off + (i_)]
#include "fa_bias.glsl"

shared uvec4 kt[BN * LDT]; // Q (dK/dV) or K (dQ); also stages the register operands
shared uvec4 vt[BN * LDT]; // dO (dK/dV) or V (dQ)
#ifndef FA_CM_A_FROM_C
shared uint dss[NSG * RM * LDP]; // dS or dS^T, f16 pairs (else A matrices in registers)
#endif
shared float cm_idx[CM_M * CM_N];
