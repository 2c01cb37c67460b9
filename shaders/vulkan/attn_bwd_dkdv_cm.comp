// SPDX-License-Identifier: MIT
#version 450
// Backward, pass 2 on cooperative matrices: dK and dV for one key tile of one KV head (see
// fa_backward_cm.glsl). Causal and a sliding window (WINDOW): query tiles that see none of the
// workgroup's keys are skipped.
#extension GL_GOOGLE_include_directive : require
#define FA_BIAS_BINDING 7
#include "fa_backward_cm.glsl"

TENSOR8(6, g1_buf) // dV

#ifndef FA_CM_A_FROM_C
shared uint pts[NSG * RM * LDP]; // P^T, f16 pairs (else A matrices in registers)
#endif
shared float lse_c[CM_M * BN];   // the query tile's LSE2 and Delta, CM_M repeated rows
shared float dl_c[CM_M * BN];

const uint LPT = (BN + NT - 1u) / NT; // the tile's LSE2 and Delta values per invocation

void main()
{
    const uint lane = gl_SubgroupInvocationID, sg = gl_SubgroupID;
    const uint tid = gl_LocalInvocationID.x;
    const uint heads_q = gl_NumWorkGroups.y * GQA;
    const uvec3 wg = fa_bias_order(gl_NumWorkGroups.z * heads_q);
    const uint n0 = wg.x * BM, hk = wg.y, b = wg.z;
    const uint keys = min(BM, pc.seq_k - n0);
    const uint r0 = sg * RM;
    const int diag = int(pc.seq_k) - int(pc.seq_q); // query i's diagonal is key i + diag
    const int left = fa_left(pc.win_left), right = fa_right(pc.win_right);
    const float NEG_INF = neg_inf();
    const uint k_base = pc.k_off + b * pc.k_sb + hk * pc.k_sh + n0 * pc.k_ss;
    const uint v_base = pc.v_off + b * pc.v_sb + hk * pc.v_sh + n0 * pc.v_ss;
    const uint p_off = sg * RM * LDP;

    CM_IDX_INIT(cm_idx) // made visible by STAGE_ROWS_A's barriers
    MAT_A ka[LEN_AD];
    MAT_A va[LEN_AD]; // one declarator per line: glslang 13 loses the use of the second
    STAGE_ROWS_A(ka, k_buf, k_base, pc.k_ss, keys, r0)
    STAGE_ROWS_A(va, v_buf, v_base, pc.v_ss, keys, r0)
    MAT_C dk[LEN_CD];
    MAT_C dv[LEN_CD];
    [[unroll]] for (uint i = 0; i < TM * DN; i++) {
        dk[i] = MAT_C(0.0);
        dv[i] = MAT_C(0.0);
    }

    // The queries that see these keys: from n0 - diag - right (causal: right = 0) to
    // n0 + keys - 1 - diag + left where those bounds are set. One flat loop over the query tiles
    // of the GQA heads; each step's Q, dO, LSE2 and Delta are fetched during the previous step's
    // products. Queries past the end get LSE2 = -inf: P = 0. Without a left bound the count
    // is the plain kernel's expression: one computed through a clamped end and a select measured
    // 8 % slower on NVIDIA's driver (docs/PERF.md), its dK/dV module being at 255 registers.
    uint m_begin = 0;
    if (right >= 0)
        m_begin = uint(clamp(int(n0) - diag - right, 0, int(pc.seq_q))) / BN * BN;
    uint tiles = (pc.seq_q - m_begin + BN - 1u) / BN;
    if (left >= 0) {
        const int m_end = clamp(int(n0 + keys) - diag + left, int(m_begin), int(pc.seq_q));
        tiles = (uint(m_end) - m_begin + BN - 1u) / BN;
    }
    uvec4 next_q[FPT];
    uvec4 next_g[FPT];
    float next_l[LPT], next_d[LPT];
#define FETCH_STEP(t_)                                                                         \
    {                                                                                          \
        const uint h_ = hk * GQA + (t_) / tiles, m_ = m_begin + (t_) % tiles * BN;             \
        const uint n_ = min(BN, pc.seq_q - m_), w_ = (b * heads_q + h_) * pc.seq_q + m_;       \
        TILE_FETCH(next_q, q_buf, pc.q_off + b * pc.q_sb + h_ * pc.q_sh + m_ * pc.q_ss,        \
                   pc.q_ss, n_)                                                                \
        TILE_FETCH(next_g, do_buf, pc.do_off + b * pc.do_sb + h_ * pc.do_sh + m_ * pc.do_ss,   \
                   pc.do_ss, n_)                                                               \
        [[unroll]] for (uint i_ = 0; i_ < LPT; i_++) {                                         \
            const uint c_ = tid + i_ * NT;                                                     \
            next_l[i_] = c_ < n_ ? ws[w_ + c_] : NEG_INF;                                      \
            next_d[i_] = c_ < n_ ? ws[pc.delta_off + w_ + c_] : 0.0;                           \
        }                                                                                      \
    }
    if (tiles > 0u)
        FETCH_STEP(0u)
    for (uint t = 0; t < GQA * tiles; t++) {
        const uint m0 = m_begin + t % tiles * BN;
        const float slope2 =
            ALIBI ? ws[2u * pc.delta_off + b * heads_q + hk * GQA + t / tiles] * LOG2E : 0.0;
        const uvec2 bias =
            fa_bias_at(gl_NumWorkGroups.z * heads_q, b, hk * GQA + t / tiles, m0, n0);
        const bool bias_blocks = fa_bias_blocks(bias);
        barrier(); // every subgroup is done with the previous tiles
        TILE_PUT(kt, next_q)
        TILE_PUT(vt, next_g)
        [[unroll]] for (uint i = 0; i < LPT; i++) {
            const uint c = tid + i * NT;
            if (c < BN)
                [[unroll]] for (uint r = 0; r < CM_M; r++) {
                    lse_c[r * BN + c] = next_l[i];
                    dl_c[r * BN + c] = next_d[i];
                }
        }
        barrier();
        if (t + 1u < GQA * tiles)
            FETCH_STEP(t + 1u)
        MAT_C s[LEN_CS];
        PRODUCT_T(s, ka, kt) // S^T = K Q^T
        MAT_C dp[LEN_CS];
        PRODUCT_T(dp, va, vt) // dP^T = V dO^T

        // A row is a key, a column a query: P^T = exp2(S'^T - LSE2) where visible (into s),
        // dS^T = P^T (dP^T - Delta) S'_S^T (into dp), S' and S'_S as in the dQ pass. The mask
        // where the step has queries before the right bound of the subgroup's last key or past
        // the left bound of its first.
        const bool edge =
            (right >= 0 && int(n0 + r0 + RM) - 1 - diag - right > int(m0)) ||
            (left >= 0 && int(m0 + BN) - 1 > int(n0 + r0) - diag + left);
        MAT_C ix = MAT_C(0.0);
        if (ALIBI || BIAS != 0u || edge)
            CM_IDX_LOAD(ix, cm_idx);
        [[unroll]] for (uint j = 0; j < BNN; j++) {
            MAT_C lm;
            MAT_C dm; // one declarator per line (glslang 13)
            coopMatLoad(lm, lse_c, j * CM_N, BN, ROW_MAJOR);
            coopMatLoad(dm, dl_c, j * CM_N, BN, ROW_MAJOR);
            [[unroll]] for (uint tt = 0; tt < TM; tt++) {
                // The bias of this block (keys as rows, queries as columns) as a matrix where it
                // lies inside the keys and queries.
                bool whole = false;
                MAT_C bm;
                if (BIAS != 0u) {
                    whole = bias_blocks && r0 + (tt + 1u) * CM_M <= keys &&
                            m0 + (j + 1u) * CM_N <= pc.seq_q;
                    if (whole)
                        FA_BIAS_BLOCK(bm, bias.x + j * CM_N * bias.y + r0 + tt * CM_M, bias.y,
                                      COL_MAJOR)
                }
                FOR_EACH_ELEMENT(e, lm) {
                    const uint i = tt * BNN + j;
                    float slope;
                    float x = fa_score(s[i][e], pc.score_mul, pc.cap_log2, slope);
                    // ALiBi and the mask need the query whose diagonal is this key (first) and
                    // the element's query c, tile-relative. The mask comes after the
                    // exponential, as in the plain kernel: with the variants off this is its code.
                    if (ALIBI) {
                        const uint v = uint(ix[e]);
                        const int first = int(n0 + r0 + tt * CM_M + v / CM_N) - diag - int(m0);
                        x += fa_alibi(slope2, first, int(j * CM_N + v % CM_N));
                    }
                    if (BIAS != 0u) { // the element's query c and key r, tile-relative
                        if (whole) {
                            x = fma(bm[e], LOG2E, x);
                        } else {
                            const uint v = uint(ix[e]), c = j * CM_N + v % CM_N;
                            const uint r = r0 + tt * CM_M + v / CM_N;
                            x += fa_bias(bias, c, r, m0 + c < pc.seq_q && r < keys);
                        }
                    }
                    float p = lm[e] == NEG_INF ? 0.0 : exp2(x - lm[e]);
                    if (edge) {
                        const uint v = uint(ix[e]);
                        const int first = int(n0 + r0 + tt * CM_M + v / CM_N) - diag - int(m0);
                        if (!fa_sees(first, int(j * CM_N + v % CM_N), left, right))
                            p = 0.0;
                    }
                    s[i][e] = p;
                    dp[i][e] = p * (dp[i][e] - dm[e]);
                    if (SOFTCAP)
                        dp[i][e] *= slope;
                }
            }
        }
#ifdef FA_CM_A_FROM_C
        PRODUCT_ACC_REG(dv, s, vt)  // dV += P^T dO
        PRODUCT_ACC_REG(dk, dp, kt) // dK += dS^T Q
#else
        TO_SCRATCH_F16(s, pts, p_off)
        TO_SCRATCH_F16(dp, dss, p_off)
        subgroup_sync();
        PRODUCT_ACC(dv, pts, p_off, vt) // dV += P^T dO
        PRODUCT_ACC(dk, dss, p_off, kt) // dK += dS^T Q
        subgroup_sync(); // P^T and dS^T are read before the next step rewrites them
#endif
    }

    UNSTAGE_ROWS(dk, pc.scale, g0_buf, pc.g0_off + b * pc.g0_sb + hk * pc.g0_sh + n0 * pc.g0_ss,
                 pc.g0_ss, keys, r0)
    UNSTAGE_ROWS(dv, 1.0, g1_buf, pc.g1_off + b * pc.g1_sb + hk * pc.g1_sh + n0 * pc.g1_ss,
                 pc.g1_ss, keys, r0)
}
