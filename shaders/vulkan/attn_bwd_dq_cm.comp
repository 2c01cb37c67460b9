// SPDX-License-Identifier: MIT
#version 450
// Backward, pass 3 on cooperative matrices: dQ for one query tile (see fa_backward_cm.glsl).
// Where the module was compiled for the accumulators' row form (FA_CM_LAYOUT_*), each lane keeps
// its rows' LSE2 and Delta in registers; otherwise they come as matrices of repeated columns
// from shared memory.
#extension GL_GOOGLE_include_directive : require
#define FA_BIAS_BINDING 6
#include "fa_backward_cm.glsl"

#ifndef FA_CM_LAYOUT_E
shared float lse_r[NSG * RM * CM_N]; // LSE2 and Delta of each subgroup's rows, repeated columns
shared float dl_r[NSG * RM * CM_N];
#endif

// In the step's element loops: the bias of block (t_, j_) as a matrix (bm) where it lies inside
// the rows and keys (whole).
#define BIAS_BLOCK_OF(t_, j_)                                                                  \
    bool whole = false;                                                                        \
    MAT_C bm;                                                                                  \
    if (BIAS != 0u) {                                                                          \
        whole = bias_blocks && r0 + ((t_) + 1u) * CM_M <= rows && ((j_) + 1u) * CM_N <= keys;  \
        if (whole)                                                                             \
            FA_BIAS_BLOCK(bm, bias.x + (r0 + (t_) * CM_M) * bias.y + n0 + (j_) * CM_N, bias.y, \
                          ROW_MAJOR)                                                           \
    }

void main()
{
    const uint lane = gl_SubgroupInvocationID, sg = gl_SubgroupID;
    const uvec3 wg = fa_bias_order(gl_NumWorkGroups.z * gl_NumWorkGroups.y);
    const uint q0 = wg.x * BM, h = wg.y, b = wg.z;
    const uint hk = h / GQA, heads_q = gl_NumWorkGroups.y;
    const uint rows = min(BM, pc.seq_q - q0);
    const uint r0 = sg * RM;
    const int diag = int(pc.seq_k) - int(pc.seq_q); // query i's diagonal is key i + diag
    const int left = fa_left(pc.win_left), right = fa_right(pc.win_right);
    const float slope2 = ALIBI ? ws[2u * pc.delta_off + b * heads_q + h] * LOG2E : 0.0;
    const uvec2 bias = fa_bias_at(gl_NumWorkGroups.z * heads_q, b, h, q0, 0u);
    const bool bias_blocks = fa_bias_blocks(bias);
    const float NEG_INF = neg_inf();
    const uint k_base = pc.k_off + b * pc.k_sb + hk * pc.k_sh;
    const uint v_base = pc.v_off + b * pc.v_sb + hk * pc.v_sh;
    const uint q_base = pc.q_off + b * pc.q_sb + h * pc.q_sh + q0 * pc.q_ss;
    const uint g_base = pc.do_off + b * pc.do_sb + h * pc.do_sh + q0 * pc.do_ss;
    const uint p_off = sg * RM * LDP, f_off = sg * RM * CM_N;

    // Made visible by STAGE_ROWS_A's barriers. Rows past the end get LSE2 = -inf: P = 0.
    CM_IDX_INIT(cm_idx)
    const uint w0 = (b * heads_q + h) * pc.seq_q + q0 + r0;
#ifndef FA_CM_LAYOUT_E
    for (uint i = lane; i < RM * CM_N; i += SG) {
        const uint r = i / CM_N;
        lse_r[f_off + i] = r0 + r < rows ? ws[w0 + r] : NEG_INF;
        dl_r[f_off + i] = r0 + r < rows ? ws[pc.delta_off + w0 + r] : 0.0;
    }
#endif
    MAT_A qa[LEN_AD];
    MAT_A ga[LEN_AD]; // one declarator per line: glslang 13 loses the use of the second
    STAGE_ROWS_A(qa, q_buf, q_base, pc.q_ss, rows, r0)
    STAGE_ROWS_A(ga, do_buf, g_base, pc.do_ss, rows, r0)
#ifdef FA_CM_LAYOUT_E
    // The accumulators' row form is known: each lane keeps the LSE2 and Delta of its row slots.
    float lse_s[TM * NSLOT], dl_s[TM * NSLOT];
    {
        MAT_C ix;
        CM_IDX_LOAD(ix, cm_idx);
        [[unroll]] for (uint t = 0; t < TM; t++)
            [[unroll]] for (uint k = 0; k < NSLOT; k++) {
                const uint r = t * CM_M + uint(ix[k << SLOT_SHIFT]) / CM_N; // the slot's row
                lse_s[t * NSLOT + k] = r0 + r < rows ? ws[w0 + r] : NEG_INF;
                dl_s[t * NSLOT + k] = r0 + r < rows ? ws[pc.delta_off + w0 + r] : 0.0;
            }
    }
#endif

    // The keys the tile's rows see (causal, WINDOW).
    const uvec2 n_range = cm_keys_of_rows(q0, rows, diag, pc.seq_k, left, right);
    const uint n_end = n_range.y;
    MAT_C dq[LEN_CD];
    [[unroll]] for (uint i = 0; i < TM * DN; i++)
        dq[i] = MAT_C(0.0);

    uvec4 next_k[FPT];
    uvec4 next_v[FPT];
    if (n_range.x < n_end) {
        const uint n = n_range.x, valid = min(BN, pc.seq_k - n);
        TILE_FETCH(next_k, k_buf, k_base + n * pc.k_ss, pc.k_ss, valid)
        TILE_FETCH(next_v, v_buf, v_base + n * pc.v_ss, pc.v_ss, valid)
    }
    for (uint n0 = n_range.x; n0 < n_end; n0 += BN) {
        const uint keys = min(BN, pc.seq_k - n0);
        barrier(); // every subgroup is done with the previous K and V
        TILE_PUT(kt, next_k)
        TILE_PUT(vt, next_v)
        barrier();
        const uint n1 = n0 + BN;
        if (n1 < n_end) {
            TILE_FETCH(next_k, k_buf, k_base + n1 * pc.k_ss, pc.k_ss, min(BN, pc.seq_k - n1))
            TILE_FETCH(next_v, v_buf, v_base + n1 * pc.v_ss, pc.v_ss, min(BN, pc.seq_k - n1))
        }
        MAT_C s[LEN_CS];
        PRODUCT_T(s, qa, kt) // S = Q K^T
        MAT_C dp[LEN_CS];
        PRODUCT_T(dp, ga, vt) // dP = dO V^T

        // P = exp2(S' - LSE2) where visible, dS = P (dP - Delta) S'_S, in place in s, where S' is
        // S scale log2e (fa_score: with SOFTCAP softcapped, S'_S its 1 - tanh^2, else 1) plus
        // ALiBi's and the additive bias.
        const bool edge = cm_step_masked(keys, n0, int(q0 + r0) + diag, RM, left, right);
        MAT_C ix = MAT_C(0.0);
        if (ALIBI || BIAS != 0u || edge)
            CM_IDX_LOAD(ix, cm_idx);
        [[unroll]] for (uint t = 0; t < TM; t++) {
#ifdef FA_CM_LAYOUT_E
#define LM_(e_) lse_s[t * NSLOT + slot_of(e_)]
#define DM_(e_) dl_s[t * NSLOT + slot_of(e_)]
            [[unroll]] for (uint j = 0; j < BNN; j++) {
                BIAS_BLOCK_OF(t, j)
                [[unroll]] for (uint e = 0; e < CE; e++) {
#else
            MAT_C lm;
            MAT_C dm; // one declarator per line (glslang 13)
            coopMatLoad(lm, lse_r, f_off + t * CM_M * CM_N, CM_N, ROW_MAJOR);
            coopMatLoad(dm, dl_r, f_off + t * CM_M * CM_N, CM_N, ROW_MAJOR);
#define LM_(e_) lm[e_]
#define DM_(e_) dm[e_]
            [[unroll]] for (uint j = 0; j < BNN; j++) {
                BIAS_BLOCK_OF(t, j)
                FOR_EACH_ELEMENT(e, lm) {
#endif
                    const uint i = t * BNN + j;
                    float slope;
                    float x = fa_score(s[i][e], pc.score_mul, pc.cap_log2, slope);
                    // ALiBi and the mask need the element's key c and its row's diagonal lim,
                    // tile-relative. The mask comes after the exponential, as in the plain
                    // kernel: with the variants off this is its code.
                    if (ALIBI) {
                        const uint v = uint(ix[e]), c = j * CM_N + v % CM_N;
                        const int lim = int(q0 + r0 + t * CM_M + v / CM_N) + diag - int(n0);
                        x += fa_alibi(slope2, int(c), lim);
                    }
                    if (BIAS != 0u) {
                        if (whole) {
                            x = fma(bm[e], LOG2E, x);
                        } else {
                            const uint v = uint(ix[e]), c = j * CM_N + v % CM_N;
                            const uint r = r0 + t * CM_M + v / CM_N;
                            x += fa_bias(bias, r, n0 + c, r < rows && c < keys);
                        }
                    }
                    float p = LM_(e) == NEG_INF ? 0.0 : exp2(x - LM_(e));
                    if (edge) {
                        const uint v = uint(ix[e]), c = j * CM_N + v % CM_N;
                        const int lim = int(q0 + r0 + t * CM_M + v / CM_N) + diag - int(n0);
                        if (c >= keys || !fa_sees(int(c), lim, left, right))
                            p = 0.0;
                    }
                    s[i][e] = p * (dp[i][e] - DM_(e));
                    if (SOFTCAP)
                        s[i][e] *= slope;
                }
            }
#undef LM_
#undef DM_
        }
#ifdef FA_CM_A_FROM_C
        PRODUCT_ACC_REG(dq, s, kt) // dQ += dS K
#else
        TO_SCRATCH_F16(s, dss, p_off)
        subgroup_sync();
        PRODUCT_ACC(dq, dss, p_off, kt) // dQ += dS K
        subgroup_sync(); // dS is read before the next tile rewrites it
#endif
    }

    const uint o_base = pc.g0_off + b * pc.g0_sb + h * pc.g0_sh + q0 * pc.g0_ss;
    UNSTAGE_ROWS(dq, pc.scale, g0_buf, o_base, pc.g0_ss, rows, r0)
}
