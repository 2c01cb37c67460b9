#version 450
// Backward, pass 2: dK and dV for one tile of G keys of one KV head, one workgroup per
// (key tile, KV head, batch). Row group g owns key j0 + g: its NS-column slices of K, V, dK and
// dV stay in registers for the whole pass. The workgroup walks every query head of the GQA group
// and every Q tile of TILE rows that can see the key tile (causal: from the diagonal on):
//   1. Q, dO (TILE x D, f32), LSE and Delta of the tile go to shared memory;
//   2. partial dot products q.k and dO.v of each invocation's slice go to `ps` and `pd`;
//   3. invocation t of a group reduces queries t, t+T, ...: P = exp(s scale - LSE) (0 where
//      masked or where the row saw no key), dS = P (dP - Delta);
//   4. dV += P dO and dK += dS Q over the tile's queries, from shared memory.
// dK is scaled once at the end. Shared memory: 2*TILE*D + 2*TILE + 2*G*(TILE*T+1) floats.
// Every sum runs in a fixed order, so the result is deterministic; no atomics.
#extension GL_GOOGLE_include_directive : require
#include "fa_common.glsl"

layout(local_size_x = 128) in;

TENSOR(0, q_buf)
TENSOR(1, k_buf)
TENSOR(2, v_buf)
TENSOR(3, do_buf)
layout(set = 0, binding = 4, std430) readonly buffer ws_block { float ws[]; };
TENSOR(5, dk_buf)
TENSOR(6, dv_buf)

layout(push_constant) uniform Params {
    uint q_off, q_sb, q_ss, q_sh;
    uint k_off, k_sb, k_ss, k_sh;
    uint v_off, v_sb, v_ss, v_sh;
    uint do_off, do_sb, do_ss, do_sh;
    uint dk_off, dk_sb, dk_ss, dk_sh;
    uint dv_off, dv_sb, dv_ss, dv_sh;
    uint seq_q, seq_k, gqa, delta_off;
    float scale;
    float scale_log2;
} pc;

const uint RP = TILE * T + 1; // pitch per key of ps/pd

shared float qs[TILE * D];
shared float dos[TILE * D];
shared float lses[TILE];
shared float dels[TILE];
shared float ps[G * RP]; // ps[g*RP + i*T + t]; P lands in t = 0
shared float pd[G * RP]; // likewise dP, then dS

void main()
{
    const uint tid = gl_LocalInvocationID.x;
    const uint t = tid % T, g = tid / T;
    const uint hk = gl_WorkGroupID.y, b = gl_WorkGroupID.z, j0 = gl_WorkGroupID.x * G;
    const uint j = j0 + g;
    const uint heads_q = gl_NumWorkGroups.y * pc.gqa;
    const int off = int(pc.seq_k) - int(pc.seq_q);
    const float NEG_INF = neg_inf();

    float kr[NS], vr[NS], dk[NS], dv[NS];
    const uint k_row = pc.k_off + b * pc.k_sb + hk * pc.k_sh + j * pc.k_ss;
    const uint v_row = pc.v_off + b * pc.v_sb + hk * pc.v_sh + j * pc.v_ss;
    [[unroll]] for (uint n = 0; n < NS; n++) {
        kr[n] = j < pc.seq_k ? LD(k_buf, k_row + t + T * n) : 0.0;
        vr[n] = j < pc.seq_k ? LD(v_buf, v_row + t + T * n) : 0.0;
        dk[n] = 0.0;
        dv[n] = 0.0;
    }

    // First query that sees any key of the tile: i >= j0 - off when causal.
    uint first = 0;
    if (CAUSAL) {
        const int f = int(j0) - off;
        first = f <= 0 ? 0u : (uint(f) / TILE) * TILE;
    }

    for (uint hh = 0; hh < pc.gqa; hh++) {
        const uint h = hk * pc.gqa + hh;
        const uint q_base = pc.q_off + b * pc.q_sb + h * pc.q_sh;
        const uint do_base = pc.do_off + b * pc.do_sb + h * pc.do_sh;
        const uint w_base = (b * heads_q + h) * pc.seq_q;
        for (uint i0 = first; i0 < pc.seq_q; i0 += TILE) {
            for (uint e = tid; e < TILE * D; e += WG) {
                const uint r = e / D, d = e % D, i = i0 + r;
                qs[e] = i < pc.seq_q ? LD(q_buf, q_base + i * pc.q_ss + d) : 0.0;
                dos[e] = i < pc.seq_q ? LD(do_buf, do_base + i * pc.do_ss + d) : 0.0;
            }
            if (tid < TILE) {
                const uint i = i0 + tid;
                lses[tid] = i < pc.seq_q ? ws[w_base + i] : NEG_INF;
                dels[tid] = i < pc.seq_q ? ws[pc.delta_off + w_base + i] : 0.0;
            }
            barrier();

            for (uint r = 0; r < TILE; r++) {
                float as = 0.0, ad = 0.0;
                [[unroll]] for (uint n = 0; n < NS; n++) {
                    as += qs[r * D + t + T * n] * kr[n];
                    ad += dos[r * D + t + T * n] * vr[n];
                }
                ps[g * RP + r * T + t] = as;
                pd[g * RP + r * T + t] = ad;
            }
            barrier();

            for (uint r = t; r < TILE; r += T) {
                float s = 0.0, dp = 0.0;
                for (uint u = 0; u < T; u++) {
                    s += ps[g * RP + r * T + u];
                    dp += pd[g * RP + r * T + u];
                }
                const int i = int(i0 + r);
                const float lse = lses[r];
                const bool visible = i < int(pc.seq_q) && j < pc.seq_k && lse != NEG_INF &&
                                     (!CAUSAL || int(j) <= i + off);
                const float p = visible ? exp2(s * pc.scale_log2 - lse) : 0.0;
                ps[g * RP + r * T] = p;
                pd[g * RP + r * T] = p * (dp - dels[r]);
            }
            barrier();

            for (uint r = 0; r < TILE; r++) {
                const float p = ps[g * RP + r * T], ds = pd[g * RP + r * T];
                [[unroll]] for (uint n = 0; n < NS; n++) {
                    dv[n] += p * dos[r * D + t + T * n];
                    dk[n] += ds * qs[r * D + t + T * n];
                }
            }
            barrier();
        }
    }

    if (j < pc.seq_k) {
        const uint dk_row = pc.dk_off + b * pc.dk_sb + hk * pc.dk_sh + j * pc.dk_ss;
        const uint dv_row = pc.dv_off + b * pc.dv_sb + hk * pc.dv_sh + j * pc.dv_ss;
        [[unroll]] for (uint n = 0; n < NS; n++) {
            ST(dk_buf, dk_row + t + T * n, dk[n] * pc.scale);
            ST(dv_buf, dv_row + t + T * n, dv[n]);
        }
    }
}
