#version 450
// Backward, pass 2 on cooperative matrices: dK and dV for one key tile of one KV head (see
// fa_backward_cm.glsl). Causal: query tiles before the first query that sees one of the
// workgroup's keys are skipped.
#extension GL_GOOGLE_include_directive : require
#include "fa_backward_cm.glsl"

TENSOR(6, g1_buf) // dV

shared uint pts[NSG * RM * LDP]; // P^T, f16 pairs
shared float lse_t[BN];          // the query tile's LSE (log2 units) and Delta
shared float dl_t[BN];

void main()
{
    const uint lane = gl_SubgroupInvocationID, sg = gl_SubgroupID;
    const uint n0 = gl_WorkGroupID.x * BM, hk = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
    const uint heads_q = gl_NumWorkGroups.y * GQA;
    const uint keys = min(BM, pc.seq_k - n0);
    const uint r0 = sg * RM;
    const int diag = int(pc.seq_k) - int(pc.seq_q); // query i sees key j iff j <= i + diag
    const float NEG_INF = neg_inf();
    const uint k_base = pc.k_off + b * pc.k_sb + hk * pc.k_sh + n0 * pc.k_ss;
    const uint v_base = pc.v_off + b * pc.v_sb + hk * pc.v_sh + n0 * pc.v_ss;
    const uint s_off = sg * RM * LDS, p_off = sg * RM * LDP;

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

    // Causal: query rows before n0 - diag see none of these keys. One flat loop over the query
    // tiles of the GQA heads.
    uint m_begin = 0;
    if (CAUSAL)
        m_begin = uint(clamp(int(n0) - diag, 0, int(pc.seq_q))) / BN * BN;
    const uint tiles = (pc.seq_q - m_begin + BN - 1u) / BN;
    for (uint t = 0; t < GQA * tiles; t++) {
        const uint h = hk * GQA + t / tiles;
        const uint m0 = m_begin + t % tiles * BN;
        const uint qrows = min(BN, pc.seq_q - m0);
        const uint w0 = (b * heads_q + h) * pc.seq_q + m0;
        barrier(); // every subgroup is done with the previous tiles
        TILE_LOAD(kt, 0u, q_buf, pc.q_off + b * pc.q_sb + h * pc.q_sh + m0 * pc.q_ss, pc.q_ss,
                  qrows)
        TILE_LOAD(vt, 0u, do_buf, pc.do_off + b * pc.do_sb + h * pc.do_sh + m0 * pc.do_ss,
                  pc.do_ss, qrows)
        for (uint c = gl_LocalInvocationID.x; c < BN; c += NT) {
            lse_t[c] = c < qrows ? ws[w0 + c] : NEG_INF;
            dl_t[c] = c < qrows ? ws[pc.delta_off + w0 + c] : 0.0;
        }
        barrier();
        PRODUCT_ROWS_T(ka, kt, ss, s_off)  // S^T = K Q^T
        PRODUCT_ROWS_T(va, vt, dps, s_off) // dP^T = V dO^T
        subgroup_sync();

        // The row pass (a row is a key, a column a query): P^T, dS^T = P^T (dP^T - Delta).
        [[unroll]] for (uint i = 0; i < RPL; i++) {
            const uint r = lane_row(lane, i);
            // The first visible query of this key, tile-relative.
            const int first = int(n0 + r0 + r) - diag - int(m0);
            [[unroll]] for (uint p = 0; p < PPL; p++) {
                const uint c = 2u * (lane % LPR + LPR * p), x = s_off + r * LDS + c;
                const vec2 l2 = vec2(lse_t[c], lse_t[c + 1u]);
                vec2 pr = exp2(vec2(ss[x], ss[x + 1u]) * pc.scale_log2 - l2);
                if (l2.x == NEG_INF || (CAUSAL && int(c) < first))
                    pr.x = 0.0;
                if (l2.y == NEG_INF || (CAUSAL && int(c) + 1 < first))
                    pr.y = 0.0;
                const vec2 d = pr * (vec2(dps[x], dps[x + 1u]) - vec2(dl_t[c], dl_t[c + 1u]));
                pts[p_off + r * LDP + lane % LPR + LPR * p] = packHalf2x16(pr);
                dss[p_off + r * LDP + lane % LPR + LPR * p] = packHalf2x16(d);
            }
        }
        subgroup_sync();
        PRODUCT_ACC(dv, pts, p_off, vt) // dV += P^T dO
        PRODUCT_ACC(dk, dss, p_off, kt) // dK += dS^T Q
    }

    const uint valid = keys > r0 ? keys - r0 : 0u;
    STORE_ROWS(dk, pc.scale, ss, s_off, g0_buf,
               pc.g0_off + b * pc.g0_sb + hk * pc.g0_sh + (n0 + r0) * pc.g0_ss, pc.g0_ss, valid)
    STORE_ROWS(dv, 1.0, ss, s_off, g1_buf,
               pc.g1_off + b * pc.g1_sb + hk * pc.g1_sh + (n0 + r0) * pc.g1_ss, pc.g1_ss, valid)
}
