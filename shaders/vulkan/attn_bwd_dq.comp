// SPDX-License-Identifier: MIT
#version 450
// Backward, pass 3: dQ for one query tile of BM rows, one workgroup per (query tile, query head,
// batch), looping over the key tiles of BN that its rows see (causal, window). Per
// key tile: S, P, dP and dS -> ds ([key][query], query rows contiguous, dS over P); then rounds
// of RQ keys of K through the stage for dQ += dS K. dQ is scaled once at the end. The tiling and
// the shared memory are described in fa_backward.glsl.
#extension GL_GOOGLE_include_directive : require
#define FA_BIAS_BINDING 6
#include "fa_backward.glsl"

shared vec4 ds[BN * LDQ]; // P, then dS over it

vec4 acc[4u * Q_TM * Q_TN];

void main()
{
    const uint lid = gl_LocalInvocationID.x;
    const uvec3 wg = fa_bias_order(gl_NumWorkGroups.z * gl_NumWorkGroups.y);
    const uint m0 = wg.x * BM, h = wg.y, b = wg.z;
    const uint hk = h / GQA;
    const uint rows = min(BM, pc.seq_q - m0);
    const int diag = int(pc.seq_k) - int(pc.seq_q); // query i sees key j iff j <= i + diag
    const uint qb = pc.q_off + b * pc.q_sb + h * pc.q_sh + m0 * pc.q_ss;
    const uint gb = pc.do_off + b * pc.do_sb + h * pc.do_sh + m0 * pc.do_ss;
    const uvec2 s = bwd_grid(lid, SX, SY), o = bwd_grid(lid, QX, QY);
    bwd_strides();

    bwd_row_stats((b * gl_NumWorkGroups.y + h) * pc.seq_q + m0, rows);

    // the keys the tile's rows see (all of them without a mask)
    const int left = fa_left(pc.win_left), right = fa_right(pc.win_right);
    const uint n_begin = fa_keys_begin(int(m0) + diag, left);
    const uint n_end = fa_keys_end(int(m0 + rows) - 1 + diag, right, pc.seq_k);
    const float slope2 = bwd_alibi_slope(b * gl_NumWorkGroups.y + h);
    [[unroll]] for (uint i = 0; i < 4u * Q_TM * Q_TN; i++)
        acc[i] = vec4(0.0);

    for (uint n0 = n_begin; n0 < n_end; n0 += BN) {
        const uint keys = min(BN, pc.seq_k - n0);
        const uint kb = pc.k_off + b * pc.k_sb + hk * pc.k_sh + n0 * pc.k_ss;
        const uint vb = pc.v_off + b * pc.v_sb + hk * pc.v_sh + n0 * pc.v_ss;
        const int lim = int(m0) + diag - int(n0);
        const uvec2 bias_at = fa_bias_at(gl_NumWorkGroups.z * gl_NumWorkGroups.y, b, h, m0, n0);
        bwd_dot(SRC_Q, qb, rows, SRC_K, kb, keys, s);
        [[unroll]] for (uint i = 0; i < S_TM; i++) {
            const uint r = s.y + SY * i;
            const float l2 = lse_s[r];
            [[unroll]] for (uint j = 0; j < S_TN; j++) {
                const uint c = s.x + SX * j;
                const float x = bwd_score(i * S_TN + j) + fa_alibi(slope2, int(c) - int(r), lim) +
                                fa_bias(bias_at, r, c, r < rows && c < keys);
                ds[c * LDQ + r / 4u][r % 4u] =
                    bwd_visible(r, c, rows, keys, lim, l2) ? exp2(x - l2) : 0.0;
            }
        }
        bwd_dot(SRC_DO, gb, rows, SRC_V, vb, keys, s);
        [[unroll]] for (uint i = 0; i < S_TM; i++) {
            const uint r = s.y + SY * i;
            const float dl = dl_s[r];
            [[unroll]] for (uint j = 0; j < S_TN; j++) {
                const uint c = s.x + SX * j;
                ds[c * LDQ + r / 4u][r % 4u] *= (xs[i * S_TN + j] - dl) * bwd_slope(i * S_TN + j);
            }
        }

        for (uint c0 = 0; c0 < keys; c0 += RQ) {
            barrier(); // dS written; the stage's readers done
            bwd_stage(0u, LDD, SRC_K, kb, c0, keys - c0, RQ, 0u, DP / 4u);
            barrier();
            [[dont_unroll]] for (uint c1 = 0; c1 < RQ; c1 += UNROLL) {
                [[unroll]] for (uint u = 0; u < UNROLL; u++) {
                    const uint c = c1 + u;
                    vec4 wv[Q_TM], kv[Q_TN];
                    [[unroll]] for (uint i = 0; i < Q_TM; i++)
                        wv[i] = ds[(c0 + c) * LDQ + o.y + QY * i];
                    [[unroll]] for (uint j = 0; j < Q_TN; j++)
                        kv[j] = stage[c * LDD + o.x + QX * j];
                    BWD_RANK1(acc, wv, kv, Q_TM, Q_TN)
                }
            }
        }
    }

    const uint xb = pc.g0_off + b * pc.g0_sb + h * pc.g0_sh;
    const bool x_vec = ((xb | pc.g0_ss) & 3u) == 0u;
    [[unroll]] for (uint i = 0; i < 4u * Q_TM; i++) {
        const uint r = 4u * (o.y + QY * (i / 4u)) + i % 4u;
        if (r < rows) {
            const uint row = xb + (m0 + r) * pc.g0_ss;
            [[unroll]] for (uint j = 0; j < Q_TN; j++) {
                const uint d = 4u * (o.x + QX * j);
                if (d < D)
                    ST4(g0_buf, row + d, acc[i * Q_TN + j] * pc.scale, x_vec)
            }
        }
    }
}
