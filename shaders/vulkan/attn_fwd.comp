#version 450
// Forward: O = softmax(scale Q K^T [causal]) V and LSE, one workgroup per (Q tile, head, batch).
//
// Tiling: the Q tile is BR = G * RPT rows; row group g owns rows g*RPT .. g*RPT+RPT-1 and keeps,
// per invocation, its NS-column slice of those Q rows (pre-scaled by scale*log2 e) and of the O
// accumulator in registers, with the running max m and sum l (log2 domain, f32).
// Per K/V tile of TILE keys:
//   1. the workgroup copies K and V (TILE x D each, f32) into shared memory;
//   2. each invocation writes partial dot products of its slice (RPT x TILE) to `part`;
//   3. invocation t of a group sums the T partials of keys t, t+T, ... and masks them;
//   4. every invocation of the group reads the TILE scores of its rows, updates m and l, rescales
//      its O slice and accumulates P V from the shared V tile.
// Shared memory: 2*TILE*D + BR*(TILE*T+1) floats. Causal tiles past the diagonal are skipped.
#extension GL_GOOGLE_include_directive : require
#include "fa_common.glsl"

layout(local_size_x = 128) in;

TENSOR(0, q_buf)
TENSOR(1, k_buf)
TENSOR(2, v_buf)
TENSOR(3, o_buf)
layout(set = 0, binding = 4, std430) buffer lse_block { float lse_buf[]; };

// Offsets and strides in elements; every index of a valid call is below 2^32 because a bound
// buffer never exceeds maxStorageBufferRange (the host rejects anything larger).
layout(push_constant) uniform Params {
    uint q_off, q_sb, q_ss, q_sh;
    uint k_off, k_sb, k_ss, k_sh;
    uint v_off, v_sb, v_ss, v_sh;
    uint o_off, o_sb, o_ss, o_sh;
    uint lse_off, lse_sb, lse_ss, lse_sh;
    uint seq_q, seq_k, gqa, has_lse;
    float scale_log2; // scale * log2(e)
} pc;

const uint BR = G * RPT;
const uint RP = TILE * T + 1; // row pitch of `part`, padded against bank conflicts

shared float ks[TILE * D];
shared float vs[TILE * D];
shared float part[BR * RP]; // part[row*RP + c*T + t]; the sum lands in t = 0

void main()
{
    const uint tid = gl_LocalInvocationID.x;
    const uint t = tid % T, g = tid / T;
    const uint b = gl_WorkGroupID.z, h = gl_WorkGroupID.y, i0 = gl_WorkGroupID.x * BR;
    const uint hk = h / pc.gqa;
    const int off = int(pc.seq_k) - int(pc.seq_q);
    const float NEG_INF = neg_inf();

    const uint q_base = pc.q_off + b * pc.q_sb + h * pc.q_sh;
    const uint k_base = pc.k_off + b * pc.k_sb + hk * pc.k_sh;
    const uint v_base = pc.v_off + b * pc.v_sb + hk * pc.v_sh;

    float q[RPT * NS], o[RPT * NS], m[RPT], l[RPT];
    [[unroll]] for (uint r = 0; r < RPT; r++) {
        const uint i = i0 + g * RPT + r;
        [[unroll]] for (uint n = 0; n < NS; n++) {
            q[r * NS + n] =
                i < pc.seq_q ? LD(q_buf, q_base + i * pc.q_ss + t + T * n) * pc.scale_log2 : 0.0;
            o[r * NS + n] = 0.0;
        }
        m[r] = NEG_INF;
        l[r] = 0.0;
    }

    // Key tiles to visit; with causal masking, none past the last row's diagonal.
    uint n_tiles = (pc.seq_k + TILE - 1) / TILE;
    if (CAUSAL) {
        const int last = int(min(i0 + BR, pc.seq_q)) - 1 + off;
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
            float acc[RPT];
            [[unroll]] for (uint r = 0; r < RPT; r++)
                acc[r] = 0.0;
            [[unroll]] for (uint n = 0; n < NS; n++) {
                const float kv = ks[c * D + t + T * n];
                [[unroll]] for (uint r = 0; r < RPT; r++)
                    acc[r] += q[r * NS + n] * kv;
            }
            [[unroll]] for (uint r = 0; r < RPT; r++)
                part[(g * RPT + r) * RP + c * T + t] = acc[r];
        }
        barrier();

        [[unroll]] for (uint r = 0; r < RPT; r++) {
            const uint row = g * RPT + r;
            const int i = int(i0 + row);
            for (uint c = t; c < TILE; c += T) {
                float s = 0.0;
                for (uint u = 0; u < T; u++)
                    s += part[row * RP + c * T + u];
                const uint j = j0 + c;
                const bool visible = j < pc.seq_k && (!CAUSAL || int(j) <= i + off);
                part[row * RP + c * T] = visible ? s : NEG_INF;
            }
        }
        barrier();

        float m_new[RPT];
        [[unroll]] for (uint r = 0; r < RPT; r++) {
            const uint row = g * RPT + r;
            float mt = m[r];
            for (uint c = 0; c < TILE; c++)
                mt = max(mt, part[row * RP + c * T]);
            m_new[r] = mt;
            // A row with no visible key so far keeps m = -inf, l = 0 and O = 0 (never NaN).
            const float alpha = (m[r] == NEG_INF) ? 0.0 : exp2(m[r] - mt);
            if (mt != NEG_INF) {
                l[r] *= alpha;
                [[unroll]] for (uint n = 0; n < NS; n++)
                    o[r * NS + n] *= alpha;
            }
            m[r] = mt;
        }
        for (uint c = 0; c < TILE; c++) {
            float p[RPT];
            [[unroll]] for (uint r = 0; r < RPT; r++) {
                const float s = part[(g * RPT + r) * RP + c * T];
                p[r] = s == NEG_INF ? 0.0 : exp2(s - m_new[r]);
                l[r] += p[r];
            }
            [[unroll]] for (uint n = 0; n < NS; n++) {
                const float vv = vs[c * D + t + T * n];
                [[unroll]] for (uint r = 0; r < RPT; r++)
                    o[r * NS + n] += p[r] * vv;
            }
        }
        barrier();
    }

    const uint o_base = pc.o_off + b * pc.o_sb + h * pc.o_sh;
    [[unroll]] for (uint r = 0; r < RPT; r++) {
        const uint i = i0 + g * RPT + r;
        if (i >= pc.seq_q)
            continue;
        const float inv = l[r] > 0.0 ? 1.0 / l[r] : 0.0;
        [[unroll]] for (uint n = 0; n < NS; n++)
            ST(o_buf, o_base + i * pc.o_ss + t + T * n, o[r * NS + n] * inv);
        if (pc.has_lse != 0u && t == 0u)
            lse_buf[pc.lse_off + b * pc.lse_sb + h * pc.lse_sh + i * pc.lse_ss] =
                l[r] > 0.0 ? (m[r] + log2(l[r])) * LN2 : NEG_INF;
    }
}
