// SPDX-License-Identifier: MIT
// The dK/dV and dQ passes of the backward (attn_bwd_dkdv.comp, attn_bwd_dq.comp include this;
// Delta and the LSE in log2 units come from attn_bwd_prep.comp through the workspace). The same
// design as shaders/opencl/fa_backward.cl; the host chooses the tiling (runtime/bwd_tiling.c, via
// bwd_select in backends/vulkan/vk_attention.c). Deterministic, no atomics:
//   dK/dV: one workgroup per (key tile of BN, KV head, batch), looping over the query tiles of
//     BM of every query head of the GQA group; dV += P^T dO, dK += dS^T Q on (BN x DP) register
//     tiles;
//   dQ: one workgroup per (query tile of BM, query head, batch), looping over key tiles of BN;
//     dQ += dS K on a (BM x DP) register tile.
// Per (query tile, key tile) both compute S = Q K^T, then dP = dO V^T, on a (BM x BN) register
// tile (SX invocations along keys), P = exp2(S scale log2e - LSE2) and dS = P (dP - Delta) (with
// SOFTCAP, S softcapped and dS times 1 - tanh^2; with ALIBI, the bias added to S, which leaves dS
// as it is). Rows that saw no key (LSE = -inf) get P = 0;
// causal and a sliding window (WINDOW) skip the tiles no row or key of the other tile sees.
//
// Shared memory (f32, vec4 arrays so that drivers emit 16-byte loads, rows padded to an odd
// number of vec4 against bank conflicts): P and dS, LSE and Delta per query row, and one staging
// area refilled from global memory in rounds (two barriers each): S and dP read their operands in
// column chunks of DC, the dV/dK product Q and dO in chunks of RK rows, the dQ product K in chunks
// of RQ rows. The register tiles of the products over query rows (dK/dV) or keys (dQ) give each
// invocation rows in groups of 4 (one vec4 of P or dS, stored with that index contiguous) and
// vec4 groups of the head dim, KX / QX invocations along it; DP is the head dim padded to that
// tile (zero columns, never stored). Global loads are 4 elements wide when every offset and
// stride of q, k, v and dO is a multiple of 4 (ALIGN4, set by the host). No subgroup operation,
// so any subgroup size works.
//
// For NVIDIA's compiler (the same one behind its OpenCL, where shaders/opencl/fa_backward.cl
// learnt this): the row strides of the staged loads are read from shared memory after a barrier
// (ss_s), so that the compiler cannot hoist every row offset of every staged load out of the tile
// loops and hold them all in registers; the reduction loops (the steps of the S and dP products
// and of the dV/dK and dQ products) are not unrolled beyond UNROLL steps, since each step is
// already 32 to 64 independent FMAs and deeper unrolling buys load latency with registers.
#extension GL_GOOGLE_include_directive : require
#include "fa_common.glsl"

layout(local_size_x = 128, local_size_x_id = FA_SPEC_BWD_THREADS) in; // NT
layout(constant_id = FA_SPEC_BWD_BM) const uint BM = 64;  // query rows per tile
layout(constant_id = FA_SPEC_BWD_BN) const uint BN = 32;  // keys per tile
layout(constant_id = FA_SPEC_BWD_SX) const uint SX = 8;  // invocations along the keys of S
layout(constant_id = FA_SPEC_BWD_KX) const uint KX = 16; // invocations along the head dim of dK/dV
layout(constant_id = FA_SPEC_BWD_QX) const uint QX = 16; // invocations along the head dim of dQ
layout(constant_id = FA_SPEC_BWD_DP) const uint DP = 64; // head dim padded to the dK/dV and dQ tiles
layout(constant_id = FA_SPEC_BWD_DC) const uint DC = 16; // column chunk of S and dP
layout(constant_id = FA_SPEC_BWD_RK) const uint RK = 16; // row chunk of the dK/dV product
layout(constant_id = FA_SPEC_BWD_RQ) const uint RQ = 16; // row chunk of the dQ product
// 17 is the forward's. ALIGN4: 4-element global loads (see above). UNROLL: steps per iteration
// of the reduction loops, a power of 2 dividing DC / 4, RK and RQ (a tuning knob).
layout(constant_id = FA_SPEC_BWD_ALIGN4) const bool ALIGN4 = false;
layout(constant_id = FA_SPEC_BWD_UNROLL) const uint UNROLL = 1;

TENSOR4(0, q_buf)
TENSOR4(1, k_buf)
TENSOR4(2, v_buf)
TENSOR4(3, do_buf)
layout(set = 0, binding = 4, std430) readonly buffer ws_block { float ws[]; }; // LSE2, Delta
TENSOR4(5, g0_buf) // dK, or dQ

FA_BWD_PARAMS

const uint NT = gl_WorkGroupSize.x;
const uint SY = NT / SX, S_TM = BM / SY, S_TN = BN / SX;
const uint KY = NT / KX, K_TM = BN / 4u / KY, K_TN = DP / 4u / KX;
const uint QY = NT / QX, Q_TM = BM / 4u / QY, Q_TN = DP / 4u / QX;
// Row pitches in vec4, odd (the host sizes shared memory with the same formula).
const uint LDC = ((DC / 4u) + 1u) | 1u; // column chunks of S and dP
const uint LDD = ((DP / 4u) + 1u) | 1u; // full rows of the dV/dK and dQ products
const uint LDK = ((BN / 4u) + 1u) | 1u; // P and dS of dK/dV: [query][key]
const uint LDQ = ((BM / 4u) + 1u) | 1u; // dS of dQ: [key][query]
const uint STAGE_DOT = (BM + BN) * LDC, STAGE_K = 2u * RK * LDD, STAGE_Q = RQ * LDD;
const uint STAGE_KQ = STAGE_K > STAGE_Q ? STAGE_K : STAGE_Q;
const uint STAGE = STAGE_DOT > STAGE_KQ ? STAGE_DOT : STAGE_KQ;

shared vec4 stage[STAGE];
shared float lse_s[BM]; // log2 units
shared float dl_s[BM];
shared uint ss_s[4]; // row strides of q, k, v, dO (indexed by SRC_*), see bwd_strides

float xs[S_TM * S_TN]; // the S, then dP, register tile

// Which tensor a staged load reads.
const uint SRC_Q = 0u, SRC_K = 1u, SRC_V = 2u, SRC_DO = 3u;

vec4 bwd_load4(uint src, uint i)
{
    if (src == SRC_Q)
        return raw4_to_f32(LD_RAW4(q_buf, i, ALIGN4));
    if (src == SRC_K)
        return raw4_to_f32(LD_RAW4(k_buf, i, ALIGN4));
    if (src == SRC_V)
        return raw4_to_f32(LD_RAW4(v_buf, i, ALIGN4));
    return raw4_to_f32(LD_RAW4(do_buf, i, ALIGN4));
}

// Keeps the row strides in shared memory, read back after the barriers of the tile loops: there
// they are loop-variant to the compiler (see the top of this file).
void bwd_strides()
{
    if (gl_LocalInvocationID.x == 0u) {
        ss_s[SRC_Q] = pc.q_ss;
        ss_s[SRC_K] = pc.k_ss;
        ss_s[SRC_V] = pc.v_ss;
        ss_s[SRC_DO] = pc.do_ss;
    }
    barrier();
}

// Invocation lid as (x, y) on a tx-by-ty grid. Where the grid allows, 32 consecutive invocations
// cover 8 x 4 neighbours, so that their shared loads touch 8 rows or columns and broadcast 4.
uvec2 bwd_grid(uint lid, uint tx, uint ty)
{
    if (tx % 8u == 0u && ty % 4u == 0u) {
        const uint w = lid / 32u, l = lid % 32u;
        return uvec2(l % 8u + 8u * (w % (tx / 8u)), l / 8u + 4u * (w / (tx / 8u)));
    }
    return uvec2(lid % tx, lid / tx);
}

// Copies rows x 4 cols4 elements from column c0 of rows r0.. of `src` at base (row r at
// base + (r0 + r) * its row stride) into stage from vec4 dst (pitch vec4 per row) as f32, zero
// past `valid` rows and past the head dim. Where cols4 divides NT, an invocation keeps one
// column on every NT / cols4-th row. Called after a barrier (the stride is read from ss_s).
void bwd_stage(uint dst, uint pitch, uint src, uint base, uint r0, uint valid, uint rows, uint c0,
               uint cols4)
{
    const uint lid = gl_LocalInvocationID.x;
    const uint stride = ss_s[src];
    if (NT % cols4 == 0u) {
        const uint step = NT / cols4, r = lid / cols4, c = lid % cols4;
        const uint p = base + (r0 + r) * stride + c0 + 4u * c;
        const bool inside = c0 + 4u * c < D;
        [[unroll]] for (uint k = 0; k < (rows + step - 1u) / step; k++) {
            vec4 x = vec4(0.0);
            if (inside && r + step * k < valid)
                x = bwd_load4(src, p + step * k * stride);
            if (rows % step == 0u || r + step * k < rows)
                stage[dst + (r + step * k) * pitch + c] = x;
        }
        return;
    }
    for (uint e = lid; e < rows * cols4; e += NT) {
        const uint r = e / cols4, c = e - r * cols4;
        vec4 x = vec4(0.0);
        if (r < valid && c0 + 4u * c < D)
            x = bwd_load4(src, base + (r0 + r) * stride + c0 + 4u * c);
        stage[dst + r * pitch + c] = x;
    }
}

// xs = A B^T over the head dim: A the tile's BM query-side rows (a_rows valid), B its BN
// key-side rows, both staged in column chunks.
void bwd_dot(uint a_src, uint a_base, uint a_rows, uint b_src, uint b_base, uint b_rows, uvec2 s)
{
    [[unroll]] for (uint i = 0; i < S_TM * S_TN; i++)
        xs[i] = 0.0;
    [[dont_unroll]] for (uint c0 = 0; c0 < D; c0 += DC) {
        barrier(); // the stage's previous readers are done
        bwd_stage(0u, LDC, a_src, a_base, 0u, a_rows, BM, c0, DC / 4u);
        bwd_stage(BM * LDC, LDC, b_src, b_base, 0u, b_rows, BN, c0, DC / 4u);
        barrier();
        [[dont_unroll]] for (uint c1 = 0; c1 < DC / 4u; c1 += UNROLL) {
            [[unroll]] for (uint u = 0; u < UNROLL; u++) {
                const uint c = c1 + u;
                vec4 av[S_TM], bv[S_TN];
                [[unroll]] for (uint i = 0; i < S_TM; i++)
                    av[i] = stage[(s.y + SY * i) * LDC + c];
                [[unroll]] for (uint j = 0; j < S_TN; j++)
                    bv[j] = stage[(BM + s.x + SX * j) * LDC + c];
                [[unroll]] for (uint i = 0; i < S_TM; i++)
                    [[unroll]] for (uint j = 0; j < S_TN; j++) {
                        float t = xs[i * S_TN + j];
                        t = fma(av[i].x, bv[j].x, t);
                        t = fma(av[i].y, bv[j].y, t);
                        t = fma(av[i].z, bv[j].z, t);
                        xs[i * S_TN + j] = fma(av[i].w, bv[j].w, t);
                    }
            }
        }
    }
}

// LSE2 and Delta of query rows m0.. of head h (workspace row w0), zero past `rows`.
void bwd_row_stats(uint w0, uint rows)
{
    for (uint r = gl_LocalInvocationID.x; r < BM; r += NT) {
        lse_s[r] = r < rows ? ws[w0 + r] : neg_inf();
        dl_s[r] = r < rows ? ws[pc.delta_off + w0 + r] : 0.0;
    }
}

// Whether query row r of the tile (LSE2 l2) sees key c: inside the tile, a row with keys, and
// within its mask, with lim = m0 + diag - n0 (the diagonal of row 0 in the tile's key index):
// c - r against lim as key against diagonal.
bool bwd_visible(uint r, uint c, uint rows, uint keys, int lim, float l2)
{
    return r < rows && c < keys && l2 != neg_inf() &&
           fa_sees(int(c) - int(r), lim, fa_left(pc.win_left), fa_right(pc.win_right));
}

// The S register tile's scores in log2 units (fa_score) and, with SOFTCAP, their 1 - tanh^2 for
// dS (sd, the same layout).
float sd[SOFTCAP ? S_TM * S_TN : 1u];
float bwd_score(uint e)
{
    float slope;
    const float x = fa_score(xs[e], pc.score_mul, pc.cap_log2, slope);
    if (SOFTCAP)
        sd[e] = slope;
    return x;
}
float bwd_slope(uint e) { return SOFTCAP ? sd[e] : 1.0; }

// ALIBI: the slope of (batch, query head) row bh of the packed slopes, which the host copies into
// the workspace after LSE2 and Delta, times log2(e); 0 without.
float bwd_alibi_slope(uint bh) { return ALIBI ? ws[2u * pc.delta_off + bh] * LOG2E : 0.0; }

// BIAS (the pass defines FA_BIAS_BINDING): its view after LSE2, Delta and the slopes.
#define FA_BIAS_VIEW(i_) ws[2u * pc.delta_off + (i_)]
#include "fa_bias.glsl"

// ACC[(4 i + e) TN + j] += W[i].e * Y[j]: one step of a product whose invocation rows come in
// groups of 4 (W) and whose columns are vec4 groups of the head dim (Y).
#define BWD_RANK1(ACC, W, Y, TM_, TN_)                                                         \
    [[unroll]] for (uint i_ = 0; i_ < TM_; i_++)                                               \
        [[unroll]] for (uint j_ = 0; j_ < TN_; j_++) {                                         \
            ACC[(4u * i_) * TN_ + j_] = fma(vec4(W[i_].x), Y[j_], ACC[(4u * i_) * TN_ + j_]);  \
            ACC[(4u * i_ + 1u) * TN_ + j_] =                                                   \
                fma(vec4(W[i_].y), Y[j_], ACC[(4u * i_ + 1u) * TN_ + j_]);                     \
            ACC[(4u * i_ + 2u) * TN_ + j_] =                                                   \
                fma(vec4(W[i_].z), Y[j_], ACC[(4u * i_ + 2u) * TN_ + j_]);                     \
            ACC[(4u * i_ + 3u) * TN_ + j_] =                                                   \
                fma(vec4(W[i_].w), Y[j_], ACC[(4u * i_ + 3u) * TN_ + j_]);                     \
        }
