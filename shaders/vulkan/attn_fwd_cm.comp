#version 450
// Forward on cooperative matrices (f16): O = softmax(scale Q K^T [causal]) V and LSE, one
// workgroup per (query tile of BM rows, query head, batch), NSG subgroups of RM query rows each
// (fa_matrix.glsl). Each subgroup keeps its Q rows as A matrices and its O rows as accumulators
// for the workgroup's life.
//
// Shared memory: the K and V tiles (BN x D f16 each, which also stage Q at the start), and per
// subgroup S (RM x BN f32), P (RM x BN f16) and the row factors (RM x CM_N f32).
// Per key tile (2 barriers): K, V -> shared; per subgroup: S = Q K^T -> scratch; the row pass
// masks and scales S (log2 domain), takes the row maxima across the row's lanes, P = exp2(S - m)
// -> f16 scratch, and the rescale factor alpha -> row factors; O *= alpha; O += P V.
// The row sums stay partial per lane until the end. Causal: key tiles past the workgroup's last
// visible key are never visited.
#extension GL_GOOGLE_include_directive : require
#include "fa_matrix.glsl"

TENSOR8(0, q_buf)
TENSOR8(1, k_buf)
TENSOR8(2, v_buf)
TENSOR(3, o_buf)
layout(set = 0, binding = 4, std430) buffer lse_block { float lse_buf[]; };

FA_FWD_PARAMS

shared uvec4 kt[BN * LDT];
shared uvec4 vt[BN * LDT];
shared float sc[NSG * RM * LDS];   // S
shared uint ps[NSG * RM * LDP];    // P, f16 pairs
shared float rv[NSG * RM * CM_N];  // row factors

void main()
{
    const uint lane = gl_SubgroupInvocationID, sg = gl_SubgroupID;
    const uint q0 = gl_WorkGroupID.x * BM, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
    const uint hk = h / GQA;
    const uint rows = min(BM, pc.seq_q - q0);
    const uint r0 = sg * RM; // the subgroup's first row in the tile
    const int diag = int(pc.seq_k) - int(pc.seq_q); // query i sees key j iff j <= i + diag
    const float NEG_INF = neg_inf();
    const uint k_base = pc.k_off + b * pc.k_sb + hk * pc.k_sh;
    const uint v_base = pc.v_off + b * pc.v_sb + hk * pc.v_sh;
    const uint q_base = pc.q_off + b * pc.q_sb + h * pc.q_sh + q0 * pc.q_ss;
    const uint s_off = sg * RM * LDS, p_off = sg * RM * LDP, f_off = sg * RM * CM_N;

    MAT_A qa[LEN_AD];
    STAGE_ROWS_A(qa, q_buf, q_base, pc.q_ss, rows, r0)

    uint n_end = pc.seq_k;
    if (CAUSAL)
        n_end = uint(clamp(int(q0 + rows) + diag, 0, int(pc.seq_k)));

    MAT_C o[LEN_CD];
    [[unroll]] for (uint i = 0; i < TM * DN; i++)
        o[i] = MAT_C(0.0);
    float m_run[RPL], l_part[RPL];
    [[unroll]] for (uint i = 0; i < RPL; i++) {
        m_run[i] = NEG_INF;
        l_part[i] = 0.0;
    }

    for (uint n0 = 0; n0 < n_end; n0 += BN) {
        const uint keys = min(BN, pc.seq_k - n0);
        barrier(); // every subgroup is done with the previous K and V
        TILE_LOAD(kt, 0u, k_buf, k_base + n0 * pc.k_ss, pc.k_ss, keys)
        TILE_LOAD(vt, 0u, v_buf, v_base + n0 * pc.v_ss, pc.v_ss, keys)
        barrier();

        PRODUCT_ROWS_T(qa, kt, sc, s_off) // S = Q K^T
        subgroup_sync();

        // The row pass: mask, scale, maxima, P and alpha.
        [[unroll]] for (uint i = 0; i < RPL; i++) {
            const uint r = lane_row(lane, i);
            const int lim = int(q0 + r0 + r) + diag - int(n0); // last visible key, tile-relative
            vec2 x[PPL];
            float mx = NEG_INF;
            [[unroll]] for (uint p = 0; p < PPL; p++) {
                const uint c = 2u * (lane % LPR + LPR * p);
                x[p] = vec2(sc[s_off + r * LDS + c], sc[s_off + r * LDS + c + 1u]);
                x[p] *= pc.scale_log2;
                if (c >= keys || (CAUSAL && int(c) > lim))
                    x[p].x = NEG_INF;
                if (c + 1u >= keys || (CAUSAL && int(c) + 1 > lim))
                    x[p].y = NEG_INF;
                mx = max(mx, max(x[p].x, x[p].y));
            }
            const float m_new = max(m_run[i], row_max(mx));
            // m_new = -inf: no key visible so far, so P = 0 and nothing is rescaled.
            const bool none = m_new == NEG_INF;
            const float alpha = none ? 1.0 : exp2(m_run[i] - m_new);
            float sum = 0.0;
            [[unroll]] for (uint p = 0; p < PPL; p++) {
                const vec2 e = none ? vec2(0.0) : exp2(x[p] - m_new);
                sum += e.x + e.y;
                ps[p_off + r * LDP + lane % LPR + LPR * p] = packHalf2x16(e);
            }
            l_part[i] = l_part[i] * alpha + sum;
            m_run[i] = m_new;
            for (uint c = lane % LPR; c < CM_N; c += LPR)
                rv[f_off + r * CM_N + c] = alpha;
        }
        subgroup_sync();

        SCALE_ROWS(o, DN, rv, f_off)
        PRODUCT_ACC(o, ps, p_off, vt) // O += P V
        subgroup_sync(); // P and the row factors are read before the next tile rewrites them
    }

    // 1 / l per row (0 for a row that saw no key: O = 0, LSE = -inf, never NaN), and the LSE.
    [[unroll]] for (uint i = 0; i < RPL; i++) {
        const uint r = lane_row(lane, i);
        const float l = row_sum(l_part[i]);
        for (uint c = lane % LPR; c < CM_N; c += LPR)
            rv[f_off + r * CM_N + c] = l > 0.0 ? 1.0 / l : 0.0;
        if (pc.has_lse != 0u && lane % LPR == 0u && r0 + r < rows)
            lse_buf[pc.lse_off + b * pc.lse_sb + h * pc.lse_sh + (q0 + r0 + r) * pc.lse_ss] =
                l > 0.0 ? (m_run[i] + log2(l)) * LN2 : NEG_INF;
    }
    subgroup_sync();
    SCALE_ROWS(o, DN, rv, f_off)
    const uint o_base = pc.o_off + b * pc.o_sb + h * pc.o_sh + (q0 + r0) * pc.o_ss;
    STORE_ROWS(o, 1.0, sc, s_off, o_buf, o_base, pc.o_ss, rows > r0 ? rows - r0 : 0u)
}
