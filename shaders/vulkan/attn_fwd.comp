#version 450
// Forward: O = softmax(scale Q K^T [causal]) V and LSE, one workgroup per (query tile of BM rows,
// query head, batch), NT invocations. BM, BN, NT and the register-tile splits S_TX, O_TX are
// specialization constants chosen by the host (fwd_select in backends/vulkan/vk_attention.c).
//
// Shared memory (f32, declared as vec4 so that drivers emit 16-byte loads): the query tile qs
// (BM x D) for the workgroup's life; one key/value tile kv (BN x D) that holds K, then V; P
// transposed, pt (BN x BM, key-major, so that an invocation's rows of one key are one vec4); red,
// S_TX partial values per query row (row maxima during a tile, partial row sums at the end); the
// rescale factor and the final maximum per row. Rows are padded by one vec4 against bank
// conflicts.
//
// Two register tiles, both with contiguous rows per invocation:
//   S (BM x BN): invocation (sy, sx) owns rows sy*S_TM.. and keys sx + S_TX*j. It keeps the
//     running max and its own partial row sum over its keys: only the tile's row maximum is
//     exchanged (through red), the sums are added once at the end.
//   O (BM x D): invocation (oy, ox) owns rows oy*O_TM.. and the vec4 column groups ox + O_TX*g
//     (g < O_TG, within D), so each key of P V costs ceil(O_TM/4) + O_TG vector loads.
// Per key tile (4 barriers): K -> kv; S = Q K^T, mask, scale (log2 domain), row-max partials ->
// red; V -> kv, new max, P = exp2(S - m) -> pt, alpha; O = alpha O + P V.
// Global loads go to registers one phase before their tile is stored to shared memory (K of the
// next tile during P V, V during S), four elements per load when the view is aligned; they stay
// in storage form (RAW4) until stored. Causal: key tiles past the tile's last visible key are
// never visited. No subgroup operation, so any subgroup size works.
#extension GL_GOOGLE_include_directive : require
#include "fa_common.glsl"

layout(local_size_x = 128, local_size_x_id = 5) in; // NT
layout(constant_id = 6) const uint BM = 64;   // query rows per workgroup
layout(constant_id = 7) const uint BN = 16;   // keys per K/V tile
layout(constant_id = 8) const uint S_TX = 4;  // invocations along the keys of S
layout(constant_id = 9) const uint O_TX = 16; // invocations along the column groups of O

TENSOR4(0, q_buf)
TENSOR4(1, k_buf)
TENSOR4(2, v_buf)
TENSOR4(3, o_buf)
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

const uint NT = gl_WorkGroupSize.x;
const uint D4 = D / 4;
const uint LDS = D4 + 1; // row pitch of qs and kv, in vec4
const uint S_TY = NT / S_TX, S_TM = BM / S_TY, S_TN = BN / S_TX;
const uint O_TY = NT / O_TX, O_TM = BM / O_TY, O_TG = (D4 + O_TX - 1) / O_TX;
const bool O_FULL = D4 % O_TX == 0; // every invocation's last column group lies inside D
const uint LDPT = BM + 4;           // row pitch of pt, in floats
const uint KE = (BN * D4 + NT - 1) / NT; // vec4 of a BN x D tile per invocation

shared vec4 qs[BM * LDS];
shared vec4 kv[BN * LDS];
shared vec4 pt[BN * LDPT / 4];
shared float red[S_TX * BM];
shared float a_s[BM];
shared float m_s[BM];

RAW4 kv_reg[KE]; // the next tile, in storage form

// Issues the loads of rows [0, valid) of a BN x D tile of K or V (row r at base + r * stride);
// rows past `valid` are zero.
void tile_fetch(bool is_v, uint base, uint stride, uint valid)
{
    const bool vec = ((base | stride) & 3u) == 0u;
    [[unroll]] for (uint k = 0; k < KE; k++) {
        const uint e = gl_LocalInvocationID.x + NT * k;
        const uint r = e / D4, i = base + r * stride + 4u * (e - r * D4);
        kv_reg[k] = RAW4(0);
        if (e < BN * D4 && r < valid)
            kv_reg[k] = is_v ? LD_RAW4(v_buf, i, vec) : LD_RAW4(k_buf, i, vec);
    }
}

void tile_store()
{
    [[unroll]] for (uint k = 0; k < KE; k++) {
        const uint e = gl_LocalInvocationID.x + NT * k;
        const uint r = e / D4;
        if (e < BN * D4)
            kv[r * LDS + e - r * D4] = raw4_to_f32(kv_reg[k]);
    }
}

void main()
{
    const uint lid = gl_LocalInvocationID.x;
    const uint q0 = gl_WorkGroupID.x * BM, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
    const uint hk = h / pc.gqa;
    const uint rows = min(BM, pc.seq_q - q0);
    const int diag = int(pc.seq_k) - int(pc.seq_q); // query i sees key j iff j <= i + diag
    const float NEG_INF = neg_inf();

    const uint k_base = pc.k_off + b * pc.k_sb + hk * pc.k_sh;
    const uint v_base = pc.v_off + b * pc.v_sb + hk * pc.v_sh;
    {
        const uint base = pc.q_off + b * pc.q_sb + h * pc.q_sh + q0 * pc.q_ss;
        const bool vec = ((base | pc.q_ss) & 3u) == 0u;
        for (uint e = lid; e < BM * D4; e += NT) {
            const uint r = e / D4, c = e - r * D4;
            vec4 x = vec4(0.0);
            if (r < rows)
                x = raw4_to_f32(LD_RAW4(q_buf, base + r * pc.q_ss + 4u * c, vec));
            qs[r * LDS + c] = x;
        }
    }

    uint n_end = pc.seq_k;
    if (CAUSAL)
        n_end = uint(clamp(int(q0 + rows) + diag, 0, int(pc.seq_k)));

    const uint sx = lid % S_TX, sr = (lid / S_TX) * S_TM;
    const uint ox = lid % O_TX, orow = (lid / O_TX) * O_TM;
    float m_run[S_TM], l_part[S_TM], s[S_TM * S_TN];
    vec4 acc[O_TM * O_TG];
    [[unroll]] for (uint i = 0; i < S_TM; i++) {
        m_run[i] = NEG_INF;
        l_part[i] = 0.0;
    }
    [[unroll]] for (uint i = 0; i < O_TM * O_TG; i++)
        acc[i] = vec4(0.0);

    if (n_end > 0u)
        tile_fetch(false, k_base, pc.k_ss, min(BN, pc.seq_k));
    for (uint n0 = 0; n0 < n_end; n0 += BN) {
        const uint keys = min(BN, pc.seq_k - n0);
        barrier(); // the previous tile's P V is done with kv and pt
        tile_store();
        barrier();
        tile_fetch(true, v_base + n0 * pc.v_ss, pc.v_ss, keys);

        [[unroll]] for (uint i = 0; i < S_TM * S_TN; i++)
            s[i] = 0.0;
        for (uint d = 0; d < D4; d++) {
            vec4 a[S_TM], bk[S_TN];
            [[unroll]] for (uint i = 0; i < S_TM; i++)
                a[i] = qs[(sr + i) * LDS + d];
            [[unroll]] for (uint j = 0; j < S_TN; j++)
                bk[j] = kv[(sx + S_TX * j) * LDS + d];
            [[unroll]] for (uint i = 0; i < S_TM; i++)
                [[unroll]] for (uint j = 0; j < S_TN; j++) {
                    float t = s[i * S_TN + j];
                    t = fma(a[i].x, bk[j].x, t);
                    t = fma(a[i].y, bk[j].y, t);
                    t = fma(a[i].z, bk[j].z, t);
                    s[i * S_TN + j] = fma(a[i].w, bk[j].w, t);
                }
        }
        [[unroll]] for (uint i = 0; i < S_TM; i++) {
            float mx = NEG_INF;
            [[unroll]] for (uint j = 0; j < S_TN; j++) {
                const uint c = sx + S_TX * j;
                bool visible = c < keys;
                if (CAUSAL)
                    visible = visible && int(n0 + c) <= int(q0 + sr + i) + diag;
                s[i * S_TN + j] = visible ? s[i * S_TN + j] * pc.scale_log2 : NEG_INF;
                mx = max(mx, s[i * S_TN + j]);
            }
            red[sx * BM + sr + i] = mx;
        }
        barrier(); // row maxima posted; every S is done with K

        tile_store();
        if (n0 + BN < n_end)
            tile_fetch(false, k_base + (n0 + BN) * pc.k_ss, pc.k_ss, min(BN, pc.seq_k - n0 - BN));
        [[unroll]] for (uint i = 0; i < S_TM; i++) {
            float m_new = m_run[i];
            for (uint x = 0; x < S_TX; x++)
                m_new = max(m_new, red[x * BM + sr + i]);
            // m_new = -inf: no key visible so far, so P = 0 and nothing is rescaled.
            const bool none = m_new == NEG_INF;
            const float alpha = none ? 1.0 : exp2(m_run[i] - m_new);
            float sum = 0.0;
            [[unroll]] for (uint j = 0; j < S_TN; j++) {
                const float p = none ? 0.0 : exp2(s[i * S_TN + j] - m_new);
                s[i * S_TN + j] = p;
                sum += p;
            }
            l_part[i] = l_part[i] * alpha + sum;
            m_run[i] = m_new;
            if (sx == 0u)
                a_s[sr + i] = alpha;
        }
        [[unroll]] for (uint j = 0; j < S_TN; j++) {
            const uint f = (sx + S_TX * j) * LDPT + sr; // pt's float index of row sr
            if (S_TM % 4u == 0u) {
                [[unroll]] for (uint i = 0; i < S_TM; i += 4u)
                    pt[(f + i) / 4u] = vec4(s[i * S_TN + j], s[(i + 1u) * S_TN + j],
                                            s[(i + 2u) * S_TN + j], s[(i + 3u) * S_TN + j]);
            } else {
                [[unroll]] for (uint i = 0; i < S_TM; i++)
                    pt[(f + i) / 4u][(f + i) % 4u] = s[i * S_TN + j];
            }
        }
        barrier(); // P, alpha and V in place

        [[unroll]] for (uint i = 0; i < O_TM; i++) {
            const float alpha = a_s[orow + i];
            [[unroll]] for (uint g = 0; g < O_TG; g++)
                acc[i * O_TG + g] *= alpha;
        }
        for (uint c = 0; c < BN; c++) {
            float p[O_TM];
            vec4 vv[O_TG];
            const uint f = c * LDPT + orow;
            if (O_TM % 4u == 0u) {
                [[unroll]] for (uint i = 0; i < O_TM; i += 4u) {
                    const vec4 p4 = pt[(f + i) / 4u];
                    p[i] = p4.x;
                    p[i + 1u] = p4.y;
                    p[i + 2u] = p4.z;
                    p[i + 3u] = p4.w;
                }
            } else {
                [[unroll]] for (uint i = 0; i < O_TM; i++)
                    p[i] = pt[(f + i) / 4u][(f + i) % 4u];
            }
            [[unroll]] for (uint g = 0; g < O_TG; g++)
                vv[g] = O_FULL || ox + O_TX * g < D4 ? kv[c * LDS + ox + O_TX * g] : vec4(0.0);
            [[unroll]] for (uint i = 0; i < O_TM; i++)
                [[unroll]] for (uint g = 0; g < O_TG; g++)
                    acc[i * O_TG + g] = fma(vec4(p[i]), vv[g], acc[i * O_TG + g]);
        }
    }

    // The row sums: each S invocation holds the part over its keys.
    barrier();
    [[unroll]] for (uint i = 0; i < S_TM; i++) {
        red[sx * BM + sr + i] = l_part[i];
        if (sx == 0u)
            m_s[sr + i] = m_run[i];
    }
    barrier();

    // A row with no visible key has l = 0: O = 0 and LSE = -inf, never NaN.
    const uint o_base = pc.o_off + b * pc.o_sb + h * pc.o_sh;
    const bool o_vec = ((o_base | pc.o_ss) & 3u) == 0u;
    [[unroll]] for (uint i = 0; i < O_TM; i++) {
        const uint r = orow + i;
        if (r >= rows)
            continue;
        float l = 0.0;
        for (uint x = 0; x < S_TX; x++)
            l += red[x * BM + r];
        const float inv = l > 0.0 ? 1.0 / l : 0.0;
        const uint row = o_base + (q0 + r) * pc.o_ss;
        [[unroll]] for (uint g = 0; g < O_TG; g++)
            if (O_FULL || ox + O_TX * g < D4)
                ST4(o_buf, row + 4u * (ox + O_TX * g), acc[i * O_TG + g] * inv, o_vec)
        if (pc.has_lse != 0u && ox == 0u)
            lse_buf[pc.lse_off + b * pc.lse_sb + h * pc.lse_sh + (q0 + r) * pc.lse_ss] =
                l > 0.0 ? (m_s[r] + log2(l)) * LN2 : NEG_INF;
    }
}
