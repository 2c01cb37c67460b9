#version 450
// Backward, pass 3 on cooperative matrices: dQ for one query tile (see fa_backward_cm.glsl).
#extension GL_GOOGLE_include_directive : require
#include "fa_backward_cm.glsl"

void main()
{
    const uint lane = gl_SubgroupInvocationID, sg = gl_SubgroupID;
    const uint q0 = gl_WorkGroupID.x * BM, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
    const uint hk = h / GQA, heads_q = gl_NumWorkGroups.y;
    const uint rows = min(BM, pc.seq_q - q0);
    const uint r0 = sg * RM;
    const int diag = int(pc.seq_k) - int(pc.seq_q); // query i sees key j iff j <= i + diag
    const float NEG_INF = neg_inf();
    const uint k_base = pc.k_off + b * pc.k_sb + hk * pc.k_sh;
    const uint v_base = pc.v_off + b * pc.v_sb + hk * pc.v_sh;
    const uint q_base = pc.q_off + b * pc.q_sb + h * pc.q_sh + q0 * pc.q_ss;
    const uint g_base = pc.do_off + b * pc.do_sb + h * pc.do_sh + q0 * pc.do_ss;
    const uint s_off = sg * RM * LDS, p_off = sg * RM * LDP;

    MAT_A qa[LEN_AD];
    MAT_A ga[LEN_AD]; // one declarator per line: glslang 13 loses the use of the second
    STAGE_ROWS_A(qa, q_buf, q_base, pc.q_ss, rows, r0)
    STAGE_ROWS_A(ga, do_buf, g_base, pc.do_ss, rows, r0)

    // The LSE (log2 units) and Delta of this lane's rows.
    const uint w0 = (b * heads_q + h) * pc.seq_q + q0 + r0;
    float l2[RPL], dl[RPL];
    [[unroll]] for (uint i = 0; i < RPL; i++) {
        const uint r = lane_row(lane, i);
        l2[i] = r0 + r < rows ? ws[w0 + r] : NEG_INF;
        dl[i] = r0 + r < rows ? ws[pc.delta_off + w0 + r] : 0.0;
    }

    uint n_end = pc.seq_k;
    if (CAUSAL)
        n_end = uint(clamp(int(q0 + rows) + diag, 0, int(pc.seq_k)));
    MAT_C dq[LEN_CD];
    [[unroll]] for (uint i = 0; i < TM * DN; i++)
        dq[i] = MAT_C(0.0);

    for (uint n0 = 0; n0 < n_end; n0 += BN) {
        const uint keys = min(BN, pc.seq_k - n0);
        barrier(); // every subgroup is done with the previous K and V
        TILE_LOAD(kt, 0u, k_buf, k_base + n0 * pc.k_ss, pc.k_ss, keys)
        TILE_LOAD(vt, 0u, v_buf, v_base + n0 * pc.v_ss, pc.v_ss, keys)
        barrier();
        PRODUCT_ROWS_T(qa, kt, ss, s_off)  // S = Q K^T
        PRODUCT_ROWS_T(ga, vt, dps, s_off) // dP = dO V^T
        subgroup_sync();

        // The row pass: P = exp2(S scale log2e - LSE2) where visible, dS = P (dP - Delta).
        [[unroll]] for (uint i = 0; i < RPL; i++) {
            const uint r = lane_row(lane, i);
            const int lim = int(q0 + r0 + r) + diag - int(n0); // last visible key, tile-relative
            [[unroll]] for (uint p = 0; p < PPL; p++) {
                const uint c = 2u * (lane % LPR + LPR * p), x = s_off + r * LDS + c;
                vec2 pr = exp2(vec2(ss[x], ss[x + 1u]) * pc.scale_log2 - l2[i]);
                const bool row_ok = l2[i] != NEG_INF;
                if (!row_ok || c >= keys || (CAUSAL && int(c) > lim))
                    pr.x = 0.0;
                if (!row_ok || c + 1u >= keys || (CAUSAL && int(c) + 1 > lim))
                    pr.y = 0.0;
                const vec2 d = pr * (vec2(dps[x], dps[x + 1u]) - dl[i]);
                dss[p_off + r * LDP + lane % LPR + LPR * p] = packHalf2x16(d);
            }
        }
        subgroup_sync();
        PRODUCT_ACC(dq, dss, p_off, kt) // dQ += dS K
    }

    const uint o_base = pc.g0_off + b * pc.g0_sb + h * pc.g0_sh + (q0 + r0) * pc.g0_ss;
    STORE_ROWS(dq, pc.scale, ss, s_off, g0_buf, o_base, pc.g0_ss, rows > r0 ? rows - r0 : 0u)
}
