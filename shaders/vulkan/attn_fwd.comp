// SPDX-License-Identifier: MIT
#version 450
// Forward: O = softmax(scale Q K^T [causal]) V and LSE, one workgroup per (query tile of BM rows,
// query head, batch), NT invocations. BM, BN, NT, the register-tile splits S_TX, O_TX and the
// tile form T16 are specialization constants chosen by the host (fwd_select in
// backends/vulkan/vk_attention.c).
//
// Shared memory: the query tile (BM x D) for the workgroup's life; one key/value tile (BN x D)
// that holds K, then V; P transposed, pt (BN x BM floats, key-major, so that an invocation's rows
// of one key are one vec4); red, S_TX partial values per query row (row maxima during a tile,
// partial row sums at the end); the rescale factor and the final maximum per row. The Q and K/V
// tiles are f32 (qs, kv: vec4, so that drivers emit 16-byte loads) or, with T16 (f16 and bf16
// inputs), the input's own 16-bit bits (qh, kvh: uvec4 = 8 elements), converted to f32 as they
// are read: half the memory, so that twice the scores fit per invocation, and 8 elements per
// 16-byte load. Rows are padded by 16 bytes against bank conflicts.
//
// Two register tiles, both with contiguous rows per invocation:
//   S (BM x BN): invocation (sy, sx) owns rows sy*S_TM.. and keys sx + S_TX*j. It keeps the
//     running max and its own partial row sum over its keys: only the tile's row maximum is
//     exchanged (through red), the sums are added once at the end. Each step of the product
//     loads S_TM + S_TN vectors (4 floats, or 8 16-bit elements) for S_TM * S_TN * 4 (or 8) FMAs.
//   O (BM x D): invocation (oy, ox) owns rows oy*O_TM.. and the column groups ox + O_TX*g
//     (g < O_TG, within D) of CW vec4 each (4 columns, or 8 with T16: one load of V), so each key
//     of P V costs ceil(O_TM/4) + O_TG vector loads.
// Per key tile (4 barriers): K -> kv; S = Q K^T, mask, scale (log2 domain), row-max partials ->
// red; V -> kv, new max, P = exp2(S - m) -> pt, alpha; O = alpha O + P V.
// Global loads go to registers one phase before their tile is stored to shared memory (K of the
// next tile during P V, V during S), four elements per load when the view is aligned; they stay
// in storage form (RAW4) until stored. Causal and a sliding window (WINDOW): key tiles that no row
// of the tile sees are never visited; SOFTCAP: each score goes through softcap tanh(s / softcap)
// (fa_score); ALIBI: the head's bias is added to each score (fa_alibi); BIAS: the additive bias
// too. No subgroup operation, so any subgroup size works.
//
// Tuning variants (specialization constants 20 and 21, FA_VULKAN_FWD_VARIANT and
// FA_VULKAN_FWD_UNROLL; 0 and 0 are the design above), each meant to cut live registers:
//   VARIANT bit 1 (T16): each step of S converts the S_TM Q operands once and each K operand
//     right before its FMAs, so one raw K load and its 8 floats are live instead of all raw
//     operands plus their converted halves.
//   VARIANT bit 2 (SPLIT): K and V get a shared tile each (one more BN x D tile; the host sets
//     it only where that fits), and the next tile is loaded in pieces during the product that
//     does not read its buffer (V during S, the next K during P V): a chunk of the loop holds
//     one piece (one 16-byte load per invocation) instead of a whole tile in registers, and
//     the tile needs no separate store phase (3 barriers per key tile).
//   UNROLL n > 0: the step loops of S (over d) and of P V (over keys) are [[dont_unroll]]
//     with n steps per iteration, so the driver cannot buy load latency with registers.
#extension GL_GOOGLE_include_directive : require
#include "fa_common.glsl"

layout(local_size_x = 128, local_size_x_id = FA_SPEC_FWD_THREADS) in; // NT
layout(constant_id = FA_SPEC_FWD_BM) const uint BM = 64;   // query rows per workgroup
layout(constant_id = FA_SPEC_FWD_BN) const uint BN = 16;   // keys per K/V tile
layout(constant_id = FA_SPEC_FWD_S_TX) const uint S_TX = 4;  // invocations along the keys of S
layout(constant_id = FA_SPEC_FWD_O_TX) const uint O_TX = 16; // invocations along the column groups of O
layout(constant_id = FA_SPEC_FWD_VARIANT) const uint VARIANT = 0; // tuning bits, see above
layout(constant_id = FA_SPEC_FWD_UNROLL) const uint UNROLL = 0;  // steps per iteration of the step loops; 0: free

#if defined(DTYPE_F32)
TENSOR4(0, q_buf)
TENSOR4(1, k_buf)
TENSOR4(2, v_buf)
const bool T16 = false;
#else
TENSOR8(0, q_buf)
TENSOR8(1, k_buf)
TENSOR8(2, v_buf)
layout(constant_id = FA_SPEC_FWD_TILE16) const bool T16 = false; // Q and K/V tiles in 16-bit form
#endif
TENSOR4(3, o_buf)
layout(set = 0, binding = 4, std430) buffer lse_block { float lse_buf[]; };
FA_SEQLENS_BINDING
// ALIBI and BIAS: the workspace, holding the slopes, packed (batch, query head), and after them
// the bias's offset and strides (batch, query, head; as uint bits), written before the dispatch
layout(set = 0, binding = 6, std430) readonly buffer variant_block { float variant_buf[]; };
#define FA_BIAS_BINDING 7
#define FA_BIAS_VIEW(i_) variant_buf[i_]
#include "fa_bias.glsl"

FA_FWD_PARAMS_WITH(FA_VARIANT_MEMBERS)

const uint NT = gl_WorkGroupSize.x;
const uint D4 = D / 4, D8 = D / 8;
const uint LDS = D4 + 1; // row pitch of qs and kv, in vec4
const uint LDH = D8 + 1; // row pitch of qh and kvh, in uvec4
const uint S_TY = NT / S_TX, S_TM = BM / S_TY, S_TN = BN / S_TX;
const uint CW = T16 ? 2u : 1u, DG = D4 / CW; // vec4 per column group of O; groups in D
const uint O_TY = NT / O_TX, O_TM = BM / O_TY, O_TG = (DG + O_TX - 1) / O_TX;
const bool O_FULL = DG % O_TX == 0; // every invocation's last column group lies inside D
const uint LDPT = BM + 4;           // row pitch of pt, in floats
const uint KE = (BN * D4 + NT - 1) / NT; // vec4 of a BN x D tile per invocation (f32 tiles)
const uint KH = (BN * D8 + NT - 1) / NT; // uvec4 of a BN x D tile per invocation (T16)
const bool SPLIT = (VARIANT & 2u) != 0u;
const uint KP = T16 ? KH : KE;                 // loads of a tile per invocation
const uint DS = T16 ? D8 : D4;                 // steps of S's product
const uint NCH_S = SPLIT ? (KP < DS ? KP : DS) : 1u; // chunks of S's steps (one piece or more each)
const uint NCH_O = SPLIT ? (KP < BN ? KP : BN) : 1u; // chunks of P V's keys
const uint NCH_MIN = NCH_S < NCH_O ? NCH_S : NCH_O;
const uint PR = SPLIT ? (KP + NCH_MIN - 1u) / NCH_MIN : KP; // pieces held in registers at once
const uint VOFF = SPLIT ? BN * LDS : 0u;  // V's tile in kv (f32 tiles)
const uint VOFFH = SPLIT ? BN * LDH : 0u; // V's tile in kvh (T16)

// The unused form of the Q and K/V tiles takes one element each; with SPLIT, K then V.
shared vec4 qs[T16 ? 1u : BM * LDS];
shared vec4 kv[T16 ? 1u : (SPLIT ? 2u : 1u) * BN * LDS];
#if !defined(DTYPE_F32)
shared uvec4 qh[T16 ? BM * LDH : 1u];
shared uvec4 kvh[T16 ? (SPLIT ? 2u : 1u) * BN * LDH : 1u];
#endif
shared vec4 pt[BN * LDPT / 4];
shared float red[S_TX * BM];
shared float a_s[BM];
shared float m_s[BM];

RAW4 kv_reg[T16 ? 1u : PR]; // the next tile (or, with SPLIT, piece), in storage form (f32 tiles)
#if !defined(DTYPE_F32)
uvec4 kvh_reg[T16 ? PR : 1u]; // the next tile's (or piece's) bits (T16)

vec4 lo4(uvec4 w) { return raw4_to_f32(w.xy); } // elements 0..3 of 8 as f32
vec4 hi4(uvec4 w) { return raw4_to_f32(w.zw); } // elements 4..7
#endif

// The register tiles and this invocation's place in them (see above), set in main.
float s[S_TM * S_TN];
vec4 acc[O_TM * O_TG * CW];
uint sx, sr, ox, orow;

// Issues the loads of pieces [p0, p1) (the invocation's k-th load of a tile, k < KP) of rows
// [0, valid) of a BN x D tile of K or V (row r at base + r * stride) into the registers from
// index 0; rows past `valid` are zero.
void pieces_fetch(bool is_v, uint base, uint stride, uint valid, uint p0, uint p1)
{
    const bool vec = ((base | stride) & 3u) == 0u;
#if !defined(DTYPE_F32)
    if (T16) {
        const bool vec8 = ((base | stride) & 7u) == 0u;
        [[unroll]] for (uint u = 0; u < PR; u++) {
            if (p0 + u >= p1)
                break;
            const uint e = gl_LocalInvocationID.x + NT * (p0 + u);
            const uint r = e / D8, i = base + r * stride + 8u * (e - r * D8);
            kvh_reg[u] = uvec4(0);
            if (e < BN * D8 && r < valid)
                kvh_reg[u] = is_v ? LD_RAW8(v_buf, i, vec8, vec) : LD_RAW8(k_buf, i, vec8, vec);
        }
        return;
    }
#endif
    [[unroll]] for (uint u = 0; u < PR; u++) {
        if (p0 + u >= p1)
            break;
        const uint e = gl_LocalInvocationID.x + NT * (p0 + u);
        const uint r = e / D4, i = base + r * stride + 4u * (e - r * D4);
        kv_reg[u] = RAW4(0);
        if (e < BN * D4 && r < valid)
            kv_reg[u] = is_v ? LD_RAW4(v_buf, i, vec) : LD_RAW4(k_buf, i, vec);
    }
}

// Stores the pieces [p0, p1) held in registers to the tile at `off` (0, or with SPLIT the V
// tile's offset) in kv or kvh.
void pieces_store(uint off, uint p0, uint p1)
{
#if !defined(DTYPE_F32)
    if (T16) {
        [[unroll]] for (uint u = 0; u < PR; u++) {
            if (p0 + u >= p1)
                break;
            const uint e = gl_LocalInvocationID.x + NT * (p0 + u);
            const uint r = e / D8;
            if (e < BN * D8)
                kvh[off + r * LDH + e - r * D8] = kvh_reg[u];
        }
        return;
    }
#endif
    [[unroll]] for (uint u = 0; u < PR; u++) {
        if (p0 + u >= p1)
            break;
        const uint e = gl_LocalInvocationID.x + NT * (p0 + u);
        const uint r = e / D4;
        if (e < BN * D4)
            kv[off + r * LDS + e - r * D4] = raw4_to_f32(kv_reg[u]);
    }
}

// The whole tile (without SPLIT, where the registers hold all KP pieces).
void tile_fetch(bool is_v, uint base, uint stride, uint valid)
{
    pieces_fetch(is_v, base, stride, valid, 0u, KP);
}

void tile_store() { pieces_store(0u, 0u, KP); }

// Step d of S += Q K^T: 8 elements of the head dim (T16, d < D8) or 4 (f32 tiles, d < D4).
void s_step(uint d)
{
#if !defined(DTYPE_F32)
    if (T16 && (VARIANT & 1u) != 0u) {
        // Q converted once (S_TM x 8 floats), then one K operand at a time: its raw bits and 8
        // floats are all of K that is live.
        vec4 af[S_TM * 2u];
        [[unroll]] for (uint i = 0; i < S_TM; i++) {
            const uvec4 w = qh[(sr + i) * LDH + d];
            af[2u * i] = lo4(w);
            af[2u * i + 1u] = hi4(w);
        }
        [[unroll]] for (uint j = 0; j < S_TN; j++) {
            const uvec4 w = kvh[(sx + S_TX * j) * LDH + d];
            const vec4 b0 = lo4(w), b1 = hi4(w);
            [[unroll]] for (uint i = 0; i < S_TM; i++) {
                float t = s[i * S_TN + j];
                t = fma(af[2u * i].x, b0.x, t);
                t = fma(af[2u * i].y, b0.y, t);
                t = fma(af[2u * i].z, b0.z, t);
                t = fma(af[2u * i].w, b0.w, t);
                t = fma(af[2u * i + 1u].x, b1.x, t);
                t = fma(af[2u * i + 1u].y, b1.y, t);
                t = fma(af[2u * i + 1u].z, b1.z, t);
                s[i * S_TN + j] = fma(af[2u * i + 1u].w, b1.w, t);
            }
        }
        return;
    }
    // 16-bit tiles: each operand is converted once per step and used S_TN (Q) or S_TM (K)
    // times.
    if (T16) {
        uvec4 a[S_TM], bk[S_TN];
        [[unroll]] for (uint i = 0; i < S_TM; i++)
            a[i] = qh[(sr + i) * LDH + d];
        [[unroll]] for (uint j = 0; j < S_TN; j++)
            bk[j] = kvh[(sx + S_TX * j) * LDH + d];
        [[unroll]] for (uint half_ = 0; half_ < 2u; half_++) {
            vec4 af[S_TM], bf[S_TN];
            [[unroll]] for (uint i = 0; i < S_TM; i++)
                af[i] = half_ == 0u ? lo4(a[i]) : hi4(a[i]);
            [[unroll]] for (uint j = 0; j < S_TN; j++)
                bf[j] = half_ == 0u ? lo4(bk[j]) : hi4(bk[j]);
            [[unroll]] for (uint i = 0; i < S_TM; i++)
                [[unroll]] for (uint j = 0; j < S_TN; j++) {
                    float t = s[i * S_TN + j];
                    t = fma(af[i].x, bf[j].x, t);
                    t = fma(af[i].y, bf[j].y, t);
                    t = fma(af[i].z, bf[j].z, t);
                    s[i * S_TN + j] = fma(af[i].w, bf[j].w, t);
                }
        }
        return;
    }
#endif
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

// Key c of O += P V (V's tile at VOFF / VOFFH).
void pv_step(uint c)
{
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
#if !defined(DTYPE_F32)
    if (T16) {
        [[unroll]] for (uint g = 0; g < O_TG; g++) {
            const uvec4 w = O_FULL || ox + O_TX * g < DG ? kvh[VOFFH + c * LDH + ox + O_TX * g]
                                                         : uvec4(0);
            const vec4 v0 = lo4(w), v1 = hi4(w);
            [[unroll]] for (uint i = 0; i < O_TM; i++) {
                acc[(i * O_TG + g) * 2u] = fma(vec4(p[i]), v0, acc[(i * O_TG + g) * 2u]);
                acc[(i * O_TG + g) * 2u + 1u] =
                    fma(vec4(p[i]), v1, acc[(i * O_TG + g) * 2u + 1u]);
            }
        }
        return;
    }
#endif
    [[unroll]] for (uint g = 0; g < O_TG; g++)
        vv[g] = O_FULL || ox + O_TX * g < D4 ? kv[VOFF + c * LDS + ox + O_TX * g] : vec4(0.0);
    [[unroll]] for (uint i = 0; i < O_TM; i++)
        [[unroll]] for (uint g = 0; g < O_TG; g++)
            acc[i * O_TG + g] = fma(vec4(p[i]), vv[g], acc[i * O_TG + g]);
}

// Steps [d0, d1) of S; with UNROLL, UNROLL steps per iteration of a loop the driver keeps (the
// test of the last iteration folds away when UNROLL divides the count).
void s_steps(uint d0, uint d1)
{
    if (UNROLL == 0u) {
        for (uint d = d0; d < d1; d++)
            s_step(d);
    } else {
        [[dont_unroll]] for (uint d = d0; d < d1; d += UNROLL) {
            [[unroll]] for (uint u = 0; u < UNROLL; u++)
                if ((d1 - d0) % UNROLL == 0u || d + u < d1)
                    s_step(d + u);
        }
    }
}

// Keys [c0, c1) of P V, looped as s_steps.
void pv_steps(uint c0, uint c1)
{
    if (UNROLL == 0u) {
        for (uint c = c0; c < c1; c++)
            pv_step(c);
    } else {
        [[dont_unroll]] for (uint c = c0; c < c1; c += UNROLL) {
            [[unroll]] for (uint u = 0; u < UNROLL; u++)
                if ((c1 - c0) % UNROLL == 0u || c + u < c1)
                    pv_step(c + u);
        }
    }
}

void main()
{
    const uint lid = gl_LocalInvocationID.x;
    const uvec3 wg = fa_bias_order(gl_NumWorkGroups.z * gl_NumWorkGroups.y);
    const uint q0 = wg.x * BM, h = wg.y, b = wg.z;
    const uint hk = h / GQA;
    const uint seq_k = FA_SEQ_K_OF(b);
    const uint rows = min(BM, pc.seq_q - q0);
    const int diag = int(seq_k) - int(pc.seq_q); // query i sees key j iff j <= i + diag
    const float NEG_INF = neg_inf();

    const uint k_base = pc.k_off + b * pc.k_sb + hk * pc.k_sh;
    const uint v_base = pc.v_off + b * pc.v_sb + hk * pc.v_sh;
    const uint q_base = pc.q_off + b * pc.q_sb + h * pc.q_sh + q0 * pc.q_ss;
#if !defined(DTYPE_F32)
    if (T16) {
        const bool vec = ((q_base | pc.q_ss) & 3u) == 0u, vec8 = ((q_base | pc.q_ss) & 7u) == 0u;
        for (uint e = lid; e < BM * D8; e += NT) {
            const uint r = e / D8, c = e - r * D8;
            uvec4 x = uvec4(0);
            if (r < rows)
                x = LD_RAW8(q_buf, q_base + r * pc.q_ss + 8u * c, vec8, vec);
            qh[r * LDH + c] = x;
        }
    } else
#endif
    {
        const uint base = q_base;
        const bool vec = ((base | pc.q_ss) & 3u) == 0u;
        for (uint e = lid; e < BM * D4; e += NT) {
            const uint r = e / D4, c = e - r * D4;
            vec4 x = vec4(0.0);
            if (r < rows)
                x = raw4_to_f32(LD_RAW4(q_buf, base + r * pc.q_ss + 4u * c, vec));
            qs[r * LDS + c] = x;
        }
    }

    // the keys the tile's rows see: from the first row's window start to the last row's end
    const int left = fa_left(pc.win_left), right = fa_right(pc.win_right);
    const uint n_begin = fa_keys_begin(int(q0) + diag, left);
    const uint n_end = fa_keys_end(int(q0 + rows) - 1 + diag, right, seq_k);
    const float slope2 = ALIBI ? variant_buf[b * gl_NumWorkGroups.y + h] * LOG2E : 0.0;
    const uvec2 bias_at = fa_bias_at(gl_NumWorkGroups.z * gl_NumWorkGroups.y, b, h, q0, 0u);

    sx = lid % S_TX;
    sr = (lid / S_TX) * S_TM;
    ox = lid % O_TX;
    orow = (lid / O_TX) * O_TM;
    float m_run[S_TM], l_part[S_TM];
    [[unroll]] for (uint i = 0; i < S_TM; i++) {
        m_run[i] = NEG_INF;
        l_part[i] = 0.0;
    }
    [[unroll]] for (uint i = 0; i < O_TM * O_TG * CW; i++)
        acc[i] = vec4(0.0);

    if (n_begin < n_end && SPLIT) {
        // The first K straight into its tile, PR pieces at a time (the loop's first barrier
        // makes it visible).
        for (uint p = 0; p < KP; p += PR) {
            pieces_fetch(false, k_base + n_begin * pc.k_ss, pc.k_ss, min(BN, seq_k - n_begin), p,
                         min(p + PR, KP));
            pieces_store(0u, p, min(p + PR, KP));
        }
    } else if (n_begin < n_end) {
        tile_fetch(false, k_base + n_begin * pc.k_ss, pc.k_ss, min(BN, seq_k - n_begin));
    }
    for (uint n0 = n_begin; n0 < n_end; n0 += BN) {
        const uint keys = min(BN, seq_k - n0);
        barrier(); // the previous tile's P V is done with kv and pt (SPLIT: and K is in place)
        if (!SPLIT) {
            tile_store();
            barrier();
            tile_fetch(true, v_base + n0 * pc.v_ss, pc.v_ss, keys);
        }

        [[unroll]] for (uint i = 0; i < S_TM * S_TN; i++)
            s[i] = 0.0;
        if (SPLIT) {
            // V into its own tile, a piece per chunk of the product.
            [[unroll]] for (uint ch = 0; ch < NCH_S; ch++) {
                pieces_fetch(true, v_base + n0 * pc.v_ss, pc.v_ss, keys, ch * KP / NCH_S,
                             (ch + 1u) * KP / NCH_S);
                s_steps(ch * DS / NCH_S, (ch + 1u) * DS / NCH_S);
                pieces_store(T16 ? VOFFH : VOFF, ch * KP / NCH_S, (ch + 1u) * KP / NCH_S);
            }
        } else {
            s_steps(0u, DS);
        }
        [[unroll]] for (uint i = 0; i < S_TM; i++) {
            float mx = NEG_INF;
            [[unroll]] for (uint j = 0; j < S_TN; j++) {
                const uint c = sx + S_TX * j;
                bool visible = c < keys;
                if (CAUSAL || WINDOW)
                    visible = visible && fa_sees(int(n0 + c), int(q0 + sr + i) + diag, left, right);
                float slope;
                float x = fa_score(s[i * S_TN + j], pc.score_mul, pc.cap_log2, slope) +
                          fa_alibi(slope2, int(n0 + c), int(q0 + sr + i) + diag);
                x += fa_bias(bias_at, sr + i, n0 + c, c < keys && sr + i < rows);
                s[i * S_TN + j] = visible ? x : NEG_INF;
                mx = max(mx, s[i * S_TN + j]);
            }
            red[sx * BM + sr + i] = mx;
        }
        barrier(); // row maxima posted; every S is done with K (SPLIT: and V is in place)

        const bool more = n0 + BN < n_end;
        const uint next_keys = more ? min(BN, seq_k - n0 - BN) : 0u;
        if (!SPLIT) {
            tile_store();
            if (more)
                tile_fetch(false, k_base + (n0 + BN) * pc.k_ss, pc.k_ss, next_keys);
        }
        [[unroll]] for (uint i = 0; i < S_TM; i++) {
            float m_new = m_run[i];
            for (uint x = 0; x < S_TX; x++)
                m_new = max(m_new, red[x * BM + sr + i]);
            // m_new = -inf: no finite score so far, so nothing is rescaled and P = exp2(s): 0 for
            // a masked score, NaN for a NaN one (max skipped it).
            const bool none = m_new == NEG_INF;
            const float alpha = none ? 1.0 : exp2(m_run[i] - m_new);
            const float m_use = none ? 0.0 : m_new;
            float sum = 0.0;
            [[unroll]] for (uint j = 0; j < S_TN; j++) {
                const float p = exp2(s[i * S_TN + j] - m_use);
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
            [[unroll]] for (uint g = 0; g < O_TG * CW; g++)
                acc[i * O_TG * CW + g] *= alpha;
        }
        if (SPLIT) {
            // The next K into its tile (free since the barrier after S), a piece per chunk.
            [[unroll]] for (uint ch = 0; ch < NCH_O; ch++) {
                if (more)
                    pieces_fetch(false, k_base + (n0 + BN) * pc.k_ss, pc.k_ss, next_keys,
                                 ch * KP / NCH_O, (ch + 1u) * KP / NCH_O);
                pv_steps(ch * BN / NCH_O, (ch + 1u) * BN / NCH_O);
                if (more)
                    pieces_store(0u, ch * KP / NCH_O, (ch + 1u) * KP / NCH_O);
            }
        } else {
            pv_steps(0u, BN);
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
        const float inv = l != 0.0 ? 1.0 / l : 0.0;
        const uint row = o_base + (q0 + r) * pc.o_ss;
        [[unroll]] for (uint g = 0; g < O_TG; g++)
            if (O_FULL || ox + O_TX * g < DG)
                [[unroll]] for (uint w = 0; w < CW; w++)
                    ST4(o_buf, row + 4u * ((ox + O_TX * g) * CW + w),
                        acc[(i * O_TG + g) * CW + w] * inv, o_vec)
        if (pc.has_lse != 0u && ox == 0u)
            lse_buf[pc.lse_off + b * pc.lse_sb + h * pc.lse_sh + (q0 + r) * pc.lse_ss] =
                l != 0.0 ? (m_s[r] + log2(l)) * LN2 : NEG_INF;
    }
}
