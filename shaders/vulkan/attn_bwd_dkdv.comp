// SPDX-License-Identifier: MIT
#version 450
// Backward, pass 2: dK and dV for one key tile of BN keys of one KV head, one workgroup per
// (key tile, KV head, batch), looping over the query tiles of BM rows of the query heads that
// share the KV head (causal or windowed: only those that see a key of this tile). Per query
// tile: S, P -> ps, dP, dS -> ds ([query][key], keys contiguous); then rounds of RK query rows of
// Q and dO through the stage for dV += P^T dO and dK += dS^T Q. dK is scaled once at the end.
// The tiling and the shared memory are described in fa_backward.glsl.
#extension GL_GOOGLE_include_directive : require
#define FA_BIAS_BINDING 7
#include "fa_backward.glsl"

TENSOR4(6, g1_buf) // dV

shared vec4 ps[BM * LDK];
shared vec4 ds[BM * LDK];

vec4 dk[4u * K_TM * K_TN];
vec4 dv[4u * K_TM * K_TN];

void main()
{
    const uint lid = gl_LocalInvocationID.x;
    const uint heads_q = gl_NumWorkGroups.y * GQA;
    const uvec3 wg = fa_bias_order(gl_NumWorkGroups.z * heads_q);
    const uint n0 = wg.x * BN, hk = wg.y, b = wg.z;
    const uint keys = min(BN, pc.seq_k - n0);
    const int diag = int(pc.seq_k) - int(pc.seq_q); // query i sees key j iff j <= i + diag
    const uint kb = pc.k_off + b * pc.k_sb + hk * pc.k_sh + n0 * pc.k_ss;
    const uint vb = pc.v_off + b * pc.v_sb + hk * pc.v_sh + n0 * pc.v_ss;
    const uvec2 s = bwd_grid(lid, SX, SY), o = bwd_grid(lid, KX, KY);
    bwd_strides();

    [[unroll]] for (uint i = 0; i < 4u * K_TM * K_TN; i++) {
        dk[i] = vec4(0.0);
        dv[i] = vec4(0.0);
    }

    // The query rows that see these keys: from n0 - diag - right (causal: right = 0) to
    // n0 + keys - 1 - diag + left where those bounds are set. One flat loop over the query tiles
    // of the gqa heads.
    const int left = fa_left(pc.win_left), right = fa_right(pc.win_right);
    uint m_begin = 0;
    if (right >= 0)
        m_begin = uint(clamp(int(n0) - diag - right, 0, int(pc.seq_q))) / BM * BM;
    uint m_end = pc.seq_q;
    if (left >= 0)
        m_end = uint(clamp(int(n0 + keys) - diag + left, 0, int(pc.seq_q)));
    const uint tiles = m_end > m_begin ? (m_end - m_begin + BM - 1u) / BM : 0u;
    for (uint t = 0; t < GQA * tiles; t++) {
        const uint h = hk * GQA + t / tiles;
        const uint m0 = m_begin + t % tiles * BM;
        const uint rows = min(BM, pc.seq_q - m0);
        const uint qb = pc.q_off + b * pc.q_sb + h * pc.q_sh + m0 * pc.q_ss;
        const uint gb = pc.do_off + b * pc.do_sb + h * pc.do_sh + m0 * pc.do_ss;
        const int lim = int(m0) + diag - int(n0);
        const float slope2 = bwd_alibi_slope(b * heads_q + h);
        const uvec2 bias_at = fa_bias_at(gl_NumWorkGroups.z * heads_q, b, h, m0, n0);
        // the previous tile read these before the barriers of its dV/dK rounds
        bwd_row_stats((b * heads_q + h) * pc.seq_q + m0, rows);

        bwd_dot(SRC_Q, qb, rows, SRC_K, kb, keys, s);
        [[unroll]] for (uint i = 0; i < S_TM; i++) {
            const uint r = s.y + SY * i;
            const float l2 = lse_s[r];
            [[unroll]] for (uint j = 0; j < S_TN; j++) {
                const uint c = s.x + SX * j;
                const float x = bwd_score(i * S_TN + j) + fa_alibi(slope2, int(c) - int(r), lim) +
                                fa_bias(bias_at, r, c, r < rows && c < keys);
                const float p = bwd_visible(r, c, rows, keys, lim, l2) ? exp2(x - l2) : 0.0;
                ps[r * LDK + c / 4u][c % 4u] = p;
            }
        }
        bwd_dot(SRC_DO, gb, rows, SRC_V, vb, keys, s);
        [[unroll]] for (uint i = 0; i < S_TM; i++) {
            const uint r = s.y + SY * i;
            const float dl = dl_s[r];
            [[unroll]] for (uint j = 0; j < S_TN; j++) {
                const uint c = s.x + SX * j;
                const uint e = i * S_TN + j;
                ds[r * LDK + c / 4u][c % 4u] =
                    ps[r * LDK + c / 4u][c % 4u] * (xs[e] - dl) * bwd_slope(e);
            }
        }

        for (uint r0 = 0; r0 < rows; r0 += RK) {
            barrier(); // P, dS written; the stage's readers done
            bwd_stage(0u, LDD, SRC_Q, qb, r0, rows - r0, RK, 0u, DP / 4u);
            bwd_stage(RK * LDD, LDD, SRC_DO, gb, r0, rows - r0, RK, 0u, DP / 4u);
            barrier();
            [[dont_unroll]] for (uint r1 = 0; r1 < RK; r1 += UNROLL) {
                [[unroll]] for (uint u = 0; u < UNROLL; u++) {
                    const uint r = r1 + u;
                    vec4 pv[K_TM], sv[K_TM], qv[K_TN], gv[K_TN];
                    [[unroll]] for (uint i = 0; i < K_TM; i++) {
                        pv[i] = ps[(r0 + r) * LDK + o.y + KY * i];
                        sv[i] = ds[(r0 + r) * LDK + o.y + KY * i];
                    }
                    [[unroll]] for (uint j = 0; j < K_TN; j++) {
                        qv[j] = stage[r * LDD + o.x + KX * j];
                        gv[j] = stage[(RK + r) * LDD + o.x + KX * j];
                    }
                    BWD_RANK1(dv, pv, gv, K_TM, K_TN)
                    BWD_RANK1(dk, sv, qv, K_TM, K_TN)
                }
            }
        }
    }

    const uint xb = pc.g0_off + b * pc.g0_sb + hk * pc.g0_sh;
    const uint yb = pc.g1_off + b * pc.g1_sb + hk * pc.g1_sh;
    const bool x_vec = ((xb | pc.g0_ss) & 3u) == 0u, y_vec = ((yb | pc.g1_ss) & 3u) == 0u;
    [[unroll]] for (uint i = 0; i < 4u * K_TM; i++) {
        const uint c = 4u * (o.y + KY * (i / 4u)) + i % 4u;
        if (c < keys) {
            const uint kr = xb + (n0 + c) * pc.g0_ss, vr = yb + (n0 + c) * pc.g1_ss;
            [[unroll]] for (uint j = 0; j < K_TN; j++) {
                const uint d = 4u * (o.x + KX * j);
                if (d < D) {
                    ST4(g0_buf, kr + d, dk[i * K_TN + j] * pc.scale, x_vec)
                    ST4(g1_buf, vr + d, dv[i * K_TN + j], y_vec)
                }
            }
        }
    }
}
