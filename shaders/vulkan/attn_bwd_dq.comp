#version 450
// Backward, pass 3: dQ for one tile of G query rows, one workgroup per (Q tile, head, batch).
// Row group g owns query i0 + g: its NS-column slices of Q, dO and dQ stay in registers. Per K/V
// tile of TILE keys (causal: none past the diagonal):
//   1. K and V (TILE x D, f32) go to shared memory;
//   2. partial q.k and dO.v of each invocation's slice go to `ps` and `pd`;
//   3. invocation t of a group reduces keys t, t+T, ...: dS = P (dP - Delta) with P recomputed
//      from the LSE (0 where masked or where the row saw no key);
//   4. dQ += dS K from the shared K tile.
// dQ is scaled once at the end. Shared memory: 2*TILE*D + 2*G*(TILE*T+1) floats. Deterministic.
#extension GL_GOOGLE_include_directive : require
#include "fa_common.glsl"

layout(local_size_x = 128) in;

TENSOR(0, q_buf)
TENSOR(1, k_buf)
TENSOR(2, v_buf)
TENSOR(3, do_buf)
layout(set = 0, binding = 4, std430) readonly buffer ws_block { float ws[]; };
TENSOR(5, dq_buf)

layout(push_constant) uniform Params {
    uint q_off, q_sb, q_ss, q_sh;
    uint k_off, k_sb, k_ss, k_sh;
    uint v_off, v_sb, v_ss, v_sh;
    uint do_off, do_sb, do_ss, do_sh;
    uint dq_off, dq_sb, dq_ss, dq_sh;
    uint unused_off, unused_sb, unused_ss, unused_sh; // the dV slot of the dK/dV pass
    uint seq_q, seq_k, gqa, delta_off;
    float scale;
    float scale_log2;
} pc;

const uint RP = TILE * T + 1;

shared float ks[TILE * D];
shared float vs[TILE * D];
shared float ps[G * RP];
shared float pd[G * RP]; // dS lands in t = 0

void main()
{
    const uint tid = gl_LocalInvocationID.x;
    const uint t = tid % T, g = tid / T;
    const uint h = gl_WorkGroupID.y, b = gl_WorkGroupID.z, i0 = gl_WorkGroupID.x * G;
    const uint i = i0 + g;
    const uint hk = h / pc.gqa;
    const uint heads_q = gl_NumWorkGroups.y;
    const int off = int(pc.seq_k) - int(pc.seq_q);
    const float NEG_INF = neg_inf();

    float qr[NS], dor[NS], dq[NS];
    const uint q_row = pc.q_off + b * pc.q_sb + h * pc.q_sh + i * pc.q_ss;
    const uint do_row = pc.do_off + b * pc.do_sb + h * pc.do_sh + i * pc.do_ss;
    [[unroll]] for (uint n = 0; n < NS; n++) {
        qr[n] = i < pc.seq_q ? LD(q_buf, q_row + t + T * n) : 0.0;
        dor[n] = i < pc.seq_q ? LD(do_buf, do_row + t + T * n) : 0.0;
        dq[n] = 0.0;
    }
    const uint w = (b * heads_q + h) * pc.seq_q + i;
    const float lse = i < pc.seq_q ? ws[w] : NEG_INF;
    const float delta = i < pc.seq_q ? ws[pc.delta_off + w] : 0.0;

    const uint k_base = pc.k_off + b * pc.k_sb + hk * pc.k_sh;
    const uint v_base = pc.v_off + b * pc.v_sb + hk * pc.v_sh;
    uint n_tiles = (pc.seq_k + TILE - 1) / TILE;
    if (CAUSAL) {
        const int last = int(min(i0 + G, pc.seq_q)) - 1 + off;
        n_tiles = last < 0 ? 0u : min(n_tiles, uint(last) / TILE + 1u);
    }

    for (uint kt = 0; kt < n_tiles; kt++) {
        const uint j0 = kt * TILE;
        for (uint e = tid; e < TILE * D; e += WG) {
            const uint c = e / D, d = e % D, j = j0 + c;
            ks[e] = j < pc.seq_k ? LD(k_buf, k_base + j * pc.k_ss + d) : 0.0;
            vs[e] = j < pc.seq_k ? LD(v_buf, v_base + j * pc.v_ss + d) : 0.0;
        }
        barrier();

        for (uint c = 0; c < TILE; c++) {
            float as = 0.0, ad = 0.0;
            [[unroll]] for (uint n = 0; n < NS; n++) {
                as += qr[n] * ks[c * D + t + T * n];
                ad += dor[n] * vs[c * D + t + T * n];
            }
            ps[g * RP + c * T + t] = as;
            pd[g * RP + c * T + t] = ad;
        }
        barrier();

        for (uint c = t; c < TILE; c += T) {
            float s = 0.0, dp = 0.0;
            for (uint u = 0; u < T; u++) {
                s += ps[g * RP + c * T + u];
                dp += pd[g * RP + c * T + u];
            }
            const uint j = j0 + c;
            const bool visible = i < pc.seq_q && j < pc.seq_k && lse != NEG_INF &&
                                 (!CAUSAL || int(j) <= int(i) + off);
            const float p = visible ? exp2(s * pc.scale_log2 - lse) : 0.0;
            pd[g * RP + c * T] = p * (dp - delta);
        }
        barrier();

        for (uint c = 0; c < TILE; c++) {
            const float ds = pd[g * RP + c * T];
            [[unroll]] for (uint n = 0; n < NS; n++)
                dq[n] += ds * ks[c * D + t + T * n];
        }
        barrier();
    }

    if (i < pc.seq_q) {
        const uint dq_row = pc.dq_off + b * pc.dq_sb + h * pc.dq_sh + i * pc.dq_ss;
        [[unroll]] for (uint n = 0; n < NS; n++)
            ST(dq_buf, dq_row + t + T * n, dq[n] * pc.scale);
    }
}
