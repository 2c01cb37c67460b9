// SPDX-License-Identifier: MIT
#version 450
// Decoding forward (flash-decoding): few query rows against a long cache. A workgroup takes one
// KV head of one batch entry with all its packed query rows (the query heads that share the KV
// head x the query positions, at most 16: GQA packing, so each K and V row is read once for all
// of them) over one chunk of the keys (gl_WorkGroupID.x; the host chose the chunks:
// backends/vulkan/vk_decode_plan.c). With one chunk it writes O and the LSE; with several, each
// writes its normalised O (f32) and LSE to the workspace and attn_merge.comp combines them.
//
// Per tile of BN keys (3 barriers): K and V -> shared (other workgroups on the compute unit hide
// the loads' latency); scores: invocation t takes key t % BN and the rows
// p, p + NRP, ... (p = t / BN) against Q in shared memory (f32); row maxima by subgroupMax, then
// across the subgroups of a row part through shared memory; P -> shared; O += P V: invocation t
// takes the 16 bytes of head dim at unit t % DU of the rows rp, rp + ORP, ... and the keys ks,
// ks + NKS, ... of the tile; the key subsets' sums are added up at the end. Every invocation keeps the
// running maxima of its own rows (the same values, computed from the same shared partials).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_GOOGLE_include_directive : require
#include "fa_common.glsl"

layout(local_size_x = 128) in; // FA_VK_DECODE_THREADS
layout(constant_id = FA_SPEC_DEC_RW) const uint RW = 4;       // packed query rows (<= 16)
layout(constant_id = FA_SPEC_DEC_BN) const uint BN = 64;      // keys per tile: 16, 32 or 64
layout(constant_id = FA_SPEC_DEC_NSG) const uint NSG_MAX = 32; // NT / the smallest subgroup

const uint NT = 128u;
// LD_UNIT: the G elements at i_ (i_ % G == 0) as 16 bytes, in one load when v8_ (every offset
// and stride of the view a multiple of 8), else in pieces; LD_UNIT_ALIGNED: one load, for
// views whose offsets and strides are multiples of G.
#ifdef DTYPE_F32
const uint G = 4u; // elements per 16-byte unit
#define TENSOR_U TENSOR4
#define LD_UNIT(name_, i_, v8_, v4_) floatBitsToUint(LD_RAW4(name_, i_, v4_))
#define LD_UNIT_ALIGNED(name_, i_) floatBitsToUint(name_##_v[(i_) >> 2])
vec4 unit_quad(uvec4 x, uint k) { return uintBitsToFloat(x); }
#else
const uint G = 8u;
#define TENSOR_U TENSOR8
#define LD_UNIT(name_, i_, v8_, v4_) LD_RAW8(name_, i_, v8_, v4_)
#define LD_UNIT_ALIGNED(name_, i_) name_##_q[(i_) >> 3]
vec4 unit_quad(uvec4 x, uint k) { return raw4_to_f32(k == 0u ? x.xy : x.zw); }
#endif
const uint QPU = G / 4u;                 // vec4 per unit
const uint DU = D / G, DQ = D / 4u;      // units, vec4 per row
const uint LDU = DU + 1u;                // tile row pitch in units
const uint NRP = NT / BN;                // row parts of the score phase
const uint RWA = NRP > 4u ? NRP : 4u;
const uint RWP = (RW + RWA - 1u) / RWA * RWA; // rows padded (padding rows compute unused values)
const uint RPP = RWP / NRP;              // rows per invocation there
const uint ORP = RWP > 8u ? 2u : 1u;     // row parts of the P V phase
const uint ORW = RWP / ORP;              // rows per invocation there
const uint NKS = (NT / DU) / ORP;        // key subsets of the P V phase
const uint FPT = (BN * DU + NT - 1u) / NT; // units of one tile per invocation

TENSOR_U(0, q_buf)
TENSOR_U(1, k_buf)
TENSOR_U(2, v_buf)
TENSOR4(3, o_buf)
layout(set = 0, binding = 4, std430) buffer lse_block { float lse_buf[]; };
FA_SEQLENS_BINDING
layout(set = 0, binding = 6, std430) buffer ws_block { float ws[]; };
layout(set = 0, binding = 6, std430) buffer ws_vblock { vec4 ws_v[]; };
layout(set = 0, binding = 7, std430) readonly buffer bt_block { int bt_buf[]; };

// split_keys: keys per chunk. A paged cache where page_size > 0: K and V hold num_pages pages
// (k_sb, v_sb: the page strides; k_ss, v_ss: the row strides within a page), entry b's page p at
// bt_buf[bt_off + b * bt_sb + p] (the host checked the entries its keys cover; a kernel clamps
// them anyway, so that no value reads outside K and V). 128 bytes in all.
FA_FWD_PARAMS_WITH(uint split_keys; uint bt_off; uint bt_sb; uint page_size; uint num_pages;)

shared uvec4 kv[2u * BN * LDU]; // K then V; at the end, O (f32)
shared vec4 qs[RWP * DQ];
shared float ps[RWP * BN];
shared float red[NSG_MAX * RWP]; // per-subgroup row maxima, then row sums
shared float m_fin[RWP];

// The largest of the row's per-subgroup partials (the subgroups of its score-phase row part).
float row_partials_max(uint r, uint per_part)
{
    float m = neg_inf();
    const uint s0 = (r % NRP) * per_part;
    for (uint k = 0u; k < per_part; k++)
        m = max(m, red[(s0 + k) * RWP + r]);
    return m;
}

float row_partials_sum(uint r, uint per_part)
{
    float l = 0.0;
    const uint s0 = (r % NRP) * per_part;
    for (uint k = 0u; k < per_part; k++)
        l += red[(s0 + k) * RWP + r];
    return l;
}

void main()
{
    const float NEG_INF = neg_inf();
    // Positions from the subgroups, so that each subgroup lies inside one row part.
    const uint t = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
    const uint per_part = BN / gl_SubgroupSize; // subgroups per score-phase row part
    const uint chunk = gl_WorkGroupID.x, hk = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
    const uint packed = GQA * pc.seq_q;
    const uint seq_k = FA_SEQ_K_OF(b);
    const int diag = int(seq_k) - int(pc.seq_q); // query i sees key j iff j <= i + diag
    const uint n_begin = min(chunk * pc.split_keys, seq_k);
    uint n_stop = min(seq_k, n_begin + pc.split_keys);
    if (CAUSAL) { // no key past the last visible one of the workgroup's last query
        uint i_max = 0u;
        for (uint r = 0u; r < min(RW, packed); r++)
            i_max = max(i_max, r % pc.seq_q);
        n_stop = uint(clamp(int(i_max) + diag + 1, int(n_begin), int(n_stop)));
    }

    const bool q8 = ((pc.q_off | pc.q_sb | pc.q_ss | pc.q_sh) & 7u) == 0u;
    const bool q4 = ((pc.q_off | pc.q_sb | pc.q_ss | pc.q_sh) & 3u) == 0u;
    const bool k8 = ((pc.k_off | pc.k_sb | pc.k_ss | pc.k_sh) & 7u) == 0u;
    const bool k4 = ((pc.k_off | pc.k_sb | pc.k_ss | pc.k_sh) & 3u) == 0u;
    const bool v8 = ((pc.v_off | pc.v_sb | pc.v_ss | pc.v_sh) & 7u) == 0u;
    const bool v4 = ((pc.v_off | pc.v_sb | pc.v_ss | pc.v_sh) & 3u) == 0u;
    const bool paged = pc.page_size != 0u;
    const uint k_base = pc.k_off + (paged ? 0u : b * pc.k_sb) + hk * pc.k_sh;
    const uint v_base = pc.v_off + (paged ? 0u : b * pc.v_sb) + hk * pc.v_sh;

    // Q rows -> shared (f32); row r is query r % Sq of query head hk * GQA + r / Sq.
    for (uint e = t; e < RWP * DU; e += NT) {
        const uint r = e / DU, u = e - r * DU;
        uvec4 x = uvec4(0);
        if (r < RW && r < packed) {
            const uint i = r % pc.seq_q, h = hk * GQA + r / pc.seq_q;
            x = LD_UNIT(q_buf, pc.q_off + b * pc.q_sb + h * pc.q_sh + i * pc.q_ss + u * G, q8, q4);
        }
        [[unroll]] for (uint k = 0u; k < QPU; k++)
            qs[r * DQ + u * QPU + k] = unit_quad(x, k);
    }

    const bool kv_units = ((pc.k_off | pc.k_sb | pc.k_ss | pc.k_sh | pc.v_off | pc.v_sb |
                            pc.v_ss | pc.v_sh) & (G - 1u)) == 0u;
// Where key n_ of this sequence lies in K (KEY_ROW_K) and V (KEY_ROW_V), from the bases.
#define KEY_PAGE(n_)                                                                           \
    min(uint(max(bt_buf[pc.bt_off + b * pc.bt_sb + (n_) / pc.page_size], 0)), pc.num_pages - 1u)
#define KEY_ROW_K(n_)                                                                          \
    (paged ? KEY_PAGE(n_) * pc.k_sb + (n_) % pc.page_size * pc.k_ss : (n_) * pc.k_ss)
#define KEY_ROW_V(n_)                                                                          \
    (paged ? KEY_PAGE(n_) * pc.v_sb + (n_) % pc.page_size * pc.v_ss : (n_) * pc.v_ss)
// The tile of keys [n0_, n0_ + BN) into kv, zero past n_stop. Every load of the tile is issued
// before the first store; where the views allow, each is one 16-byte load with no branch around
// it (rows past n_stop read the last row and are zeroed). The loads are not carried across a
// barrier: on NVIDIA's driver, register prefetches held over barriers made each step wait for
// them one by one (docs/PERF.md).
#define LOAD_TILE(n0_)                                                                         \
    {                                                                                          \
        uvec4 k_[FPT];                                                                         \
        uvec4 v_[FPT];                                                                         \
        [[unroll]] for (uint f_ = 0u; f_ < FPT; f_++) {                                        \
            const uint e_ = t + f_ * NT, j_ = e_ / DU, u_ = e_ - j_ * DU;                      \
            const bool ok_ = e_ < BN * DU && (n0_) + j_ < n_stop;                              \
            if (kv_units) {                                                                    \
                const uint n_ = min((n0_) + j_, n_stop - 1u);                                  \
                k_[f_] = LD_UNIT_ALIGNED(k_buf, k_base + KEY_ROW_K(n_) + u_ * G);              \
                v_[f_] = LD_UNIT_ALIGNED(v_buf, v_base + KEY_ROW_V(n_) + u_ * G);              \
            } else {                                                                           \
                k_[f_] = uvec4(0);                                                             \
                v_[f_] = uvec4(0);                                                             \
                if (ok_) {                                                                     \
                    const uint m_ = (n0_) + j_;                                                \
                    k_[f_] = LD_UNIT(k_buf, k_base + KEY_ROW_K(m_) + u_ * G, k8, k4);          \
                    v_[f_] = LD_UNIT(v_buf, v_base + KEY_ROW_V(m_) + u_ * G, v8, v4);          \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        [[unroll]] for (uint f_ = 0u; f_ < FPT; f_++) {                                        \
            const uint e_ = t + f_ * NT, j_ = e_ / DU, u_ = e_ - j_ * DU;                      \
            const bool ok_ = (n0_) + j_ < n_stop;                                              \
            if (e_ < BN * DU) {                                                                \
                kv[j_ * LDU + u_] = ok_ ? k_[f_] : uvec4(0);                                   \
                kv[(BN + j_) * LDU + u_] = ok_ ? v_[f_] : uvec4(0);                            \
            }                                                                                  \
        }                                                                                      \
    }

    // Score phase: key j, rows p + i NRP. P V phase: unit cg, rows rp + i ORP, keys ks + NKS x.
    const uint j = t % BN, p = t / BN;
    const uint cg = t % DU, rest = t / DU, rp = rest % ORP, ks = rest / ORP;
    const bool pv_lane = ks < NKS;
    int lim[RPP]; // each score row's last visible key
    float m_s[RPP], l_part[RPP];
    [[unroll]] for (uint i = 0u; i < RPP; i++) {
        lim[i] = int((p + i * NRP) % pc.seq_q) + diag;
        m_s[i] = NEG_INF;
        l_part[i] = 0.0;
    }
    float m_o[ORW];
    vec4 o[ORW * QPU];
    [[unroll]] for (uint i = 0u; i < ORW; i++) {
        m_o[i] = NEG_INF;
        [[unroll]] for (uint k = 0u; k < QPU; k++)
            o[i * QPU + k] = vec4(0.0);
    }

    for (uint n0 = n_begin; n0 < n_stop; n0 += BN) {
        barrier(); // the previous tile's K, V and P are no longer read
        LOAD_TILE(n0)
        barrier();

        float s[RPP];
        [[unroll]] for (uint i = 0u; i < RPP; i++)
            s[i] = 0.0;
        for (uint u = 0u; u < DU; u++) {
            const uvec4 x = kv[j * LDU + u];
            [[unroll]] for (uint k = 0u; k < QPU; k++) {
                const vec4 kf = unit_quad(x, k);
                [[unroll]] for (uint i = 0u; i < RPP; i++) { // one rounding per term
                    const vec4 q = qs[(p + i * NRP) * DQ + u * QPU + k];
                    s[i] = fma(kf.w, q.w, fma(kf.z, q.z, fma(kf.y, q.y, fma(kf.x, q.x, s[i]))));
                }
            }
        }
        const uint n = n0 + j;
        [[unroll]] for (uint i = 0u; i < RPP; i++) {
            const bool visible = n < n_stop && (!CAUSAL || int(n) <= lim[i]);
            s[i] = visible ? s[i] * pc.scale_log2 : NEG_INF;
            const float mx = subgroupMax(s[i]);
            if (subgroupElect())
                red[gl_SubgroupID * RWP + p + i * NRP] = mx;
        }
        barrier();
        // m = -inf: nothing visible so far, so nothing is rescaled and P = exp2(s).
        [[unroll]] for (uint i = 0u; i < RPP; i++) {
            const float m_new = max(m_s[i], row_partials_max(p + i * NRP, per_part));
            const bool none = m_new == NEG_INF;
            const float pr = exp2(s[i] - (none ? 0.0 : m_new));
            l_part[i] = l_part[i] * (none ? 1.0 : exp2(m_s[i] - m_new)) + pr;
            m_s[i] = m_new;
            ps[(p + i * NRP) * BN + j] = pr;
        }
        barrier();
        if (pv_lane) {
            [[unroll]] for (uint i = 0u; i < ORW; i++) {
                const float m_new = max(m_o[i], row_partials_max(rp + i * ORP, per_part));
                const float alpha = m_new == NEG_INF ? 1.0 : exp2(m_o[i] - m_new);
                m_o[i] = m_new;
                [[unroll]] for (uint k = 0u; k < QPU; k++)
                    o[i * QPU + k] *= alpha;
            }
            for (uint jj = ks; jj < BN; jj += NKS) {
                const uvec4 x = kv[(BN + jj) * LDU + cg];
                [[unroll]] for (uint k = 0u; k < QPU; k++) {
                    const vec4 vf = unit_quad(x, k);
                    [[unroll]] for (uint i = 0u; i < ORW; i++)
                        o[i * QPU + k] += ps[(rp + i * ORP) * BN + jj] * vf;
                }
            }
        }
    }

    // The row sums, the final maxima and O (the key subsets' sums added up); then each (row, 4
    // dims) normalised and written.
    barrier();
    [[unroll]] for (uint i = 0u; i < RPP; i++) {
        const float l = subgroupAdd(l_part[i]);
        if (subgroupElect())
            red[gl_SubgroupID * RWP + p + i * NRP] = l;
        if (j == 0u)
            m_fin[p + i * NRP] = m_s[i];
    }
    for (uint x = 0u; x < NKS; x++) { // one key subset after the other into the tiles' memory
        if (pv_lane && ks == x)
            [[unroll]] for (uint i = 0u; i < ORW; i++)
                [[unroll]] for (uint k = 0u; k < QPU; k++) {
                    const uint a = (rp + i * ORP) * DQ + cg * QPU + k;
                    const vec4 prev = x == 0u ? vec4(0.0) : uintBitsToFloat(kv[a]);
                    kv[a] = floatBitsToUint(prev + o[i * QPU + k]);
                }
        barrier();
    }

    const bool split = gl_NumWorkGroups.x > 1u;
    const uint heads_q = gl_NumWorkGroups.y * GQA;
    const uint out_rows = gl_NumWorkGroups.z * heads_q * pc.seq_q;
    // The chunks' LSEs after their O, at a multiple of 64 floats (vk_decode_plan.c).
    const uint ws_lse_off = (gl_NumWorkGroups.x * out_rows * D + 63u) / 64u * 64u;
    const bool o4 = ((pc.o_off | pc.o_sb | pc.o_ss | pc.o_sh) & 3u) == 0u;
    for (uint e = t; e < RWP * DQ; e += NT) {
        const uint r = e / DQ, dq = e - r * DQ;
        if (r >= RW || r >= packed)
            continue;
        const vec4 acc = uintBitsToFloat(kv[r * DQ + dq]);
        const float l = row_partials_sum(r, per_part), m = m_fin[r];
        const vec4 out_v = l != 0.0 ? acc / l : vec4(0.0); // no visible key: O = 0, LSE = -inf
        const float lse = l != 0.0 ? (m + log2(l)) * LN2 : NEG_INF;
        const uint i = r % pc.seq_q, h = hk * GQA + r / pc.seq_q;
        if (split) {
            const uint row = chunk * out_rows + (b * heads_q + h) * pc.seq_q + i;
            ws_v[row * DQ + dq] = out_v;
            if (dq == 0u)
                ws[ws_lse_off + row] = lse;
        } else {
            ST4(o_buf, pc.o_off + b * pc.o_sb + h * pc.o_sh + i * pc.o_ss + 4u * dq, out_v, o4)
            if (dq == 0u && pc.has_lse != 0u)
                lse_buf[pc.lse_off + b * pc.lse_sb + h * pc.lse_sh + i * pc.lse_ss] = lse;
        }
    }
}
