// SPDX-License-Identifier: MIT
#version 450
// Forward on cooperative matrices (f16): O = softmax(scale Q K^T [mask]) V and LSE. A
// workgroup takes one or more query tiles of BM rows of one (query head, batch), NSG subgroups of
// RM query rows each (fa_matrix.glsl). Each subgroup keeps its Q rows as A matrices and its O
// rows as accumulators for a tile's life.
//
// Per key tile (2 barriers): K and V, fetched into registers during the previous tile's
// products, -> shared; the next tile's loads start (or, in the modules compiled with
// FA_CM_COPY_IN_STEP, the catalogue's `copy` tilings: K and V fetched and stored within the
// step, so that no registers are held across the products; or, with FA_CM_PRODUCERS, by
// subgroups of their own, no barrier: below); per subgroup: S = Q K^T; the row
// work (mask, scale into the log2 domain, row maxima, P = exp2(S - m), the rescale factor
// alpha); O *= alpha; P -> f16 scratch; O += P V. The row sums stay partial per lane until the
// end. Causal and a sliding window (WINDOW): key tiles that no row of the query tile sees are
// never visited;
// SOFTCAP: each score becomes softcap tanh(s / softcap) (fa_score); ALIBI: the head's bias is
// added (the slope from the workspace, one per workgroup); BIAS: the additive bias's element is
// added to each score (fa_bias_value; its view from the workspace).
//
// The row work runs in one of two forms (fa_matrix.glsl):
// - FA_CM_LAYOUT_* set (a catalogue module compiled for the layout the host probed): on the
//   accumulators' own elements, row maxima by shuffles across the lanes of a row;
// - otherwise through the subgroup's f32 scratch: S stored, a row pass over row segments, the
//   factors alpha and 1 / l as repeated-row matrices.
// Shared memory: the K and V tiles (BN x D f16 each; they also stage Q and O), P (RM x BN f16
// per subgroup, unless it turns into A matrices in registers: FA_CM_A_FROM_C), and for the
// scratch form S (RM x BN f32) and the row factors (RM x CM_N f32) per subgroup, or for the
// layout form the index matrix.
#extension GL_GOOGLE_include_directive : require
#include "fa_matrix.glsl"

#ifndef FA_CM_LAYOUT_E
// The generic row pass (no known accumulator layout): S goes through the subgroup's f32 scratch
// in shared memory; LPR lanes share a row (SG > RM) or a lane owns RPL rows (SG < RM), and a
// lane takes the column pairs (lane % LPR) + LPR * j of its row.
const uint LPR = SG > RM ? SG / RM : 1u;   // lanes per row in the row passes
const uint RPL = RM > SG ? RM / SG : 1u;   // rows per lane
const uint PPL = BN / (2u * LPR);          // column pairs per lane and row
const uint LDS = BN + 4u;                  // f32 scratch row pitch, floats

// Row i (< RPL) of this lane in the row passes, within its subgroup's RM rows.
uint lane_row(uint lane, uint i) { return lane / LPR + (SG / LPR) * i; }

// Sum and maximum over the LPR lanes of a row.
float row_max(float x)
{
    for (uint o = 1u; o < LPR; o <<= 1)
        x = max(x, subgroupShuffleXor(x, o));
    return x;
}
float row_sum(float x)
{
    for (uint o = 1u; o < LPR; o <<= 1)
        x += subgroupShuffleXor(x, o);
    return x;
}

// acc_[t * count_ + j] (t < TM, j < count_) *= the factor of its row, which the lanes left in
// rv_ as an RM x CM_N block of repeated rows at rv_off_.
#define SCALE_ROWS(acc_, count_, rv_, rv_off_)                                                 \
    {                                                                                          \
        [[unroll]] for (uint t_ = 0; t_ < TM; t_++) {                                          \
            MAT_C f_;                                                                          \
            coopMatLoad(f_, rv_, (rv_off_) + t_ * CM_M * CM_N, CM_N, ROW_MAJOR);               \
            [[unroll]] for (uint j_ = 0; j_ < (count_); j_++)                                  \
                [[unroll]] for (uint e_ = 0; e_ < f_.length(); e_++)                           \
                    acc_[t_ * (count_) + j_][e_] *= f_[e_];                                    \
        }                                                                                      \
    }

// PRODUCT_T, then the RM x BN result stored to the subgroup's f32 scratch sc_ at sc_off_
// (pitch LDS).
#define PRODUCT_ROWS_T(mats_, tile_, sc_, sc_off_)                                             \
    {                                                                                          \
        MAT_C acc_[LEN_CS];                                                                    \
        PRODUCT_T(acc_, mats_, tile_)                                                          \
        [[unroll]] for (uint t_ = 0; t_ < TM; t_++)                                            \
            [[unroll]] for (uint j_ = 0; j_ < BNN; j_++)                                       \
                coopMatStore(acc_[t_ * BNN + j_], sc_, (sc_off_) + t_ * CM_M * LDS + j_ * CM_N, \
                             LDS, ROW_MAJOR);                                                  \
    }
#endif

TENSOR8(0, q_buf)
TENSOR8(1, k_buf)
TENSOR8(2, v_buf)
TENSOR8(3, o_buf)
layout(set = 0, binding = 4, std430) buffer lse_block { float lse_buf[]; };
FA_SEQLENS_BINDING
// ALIBI: the slopes, packed (batch, query head), in the workspace (vk_attention.c)
layout(set = 0, binding = 6, std430) readonly buffer variant_block { float variant_buf[]; };
#define FA_BIAS_BINDING 7
#define FA_BIAS_VIEW(i_) variant_buf[i_]
#include "fa_bias.glsl"

FA_FWD_PARAMS_WITH(FA_VARIANT_MEMBERS)

shared uvec4 kt[BN * LDT];
shared uvec4 vt[BN * LDT];
#if !defined(FA_CM_LAYOUT_E) || !defined(FA_CM_A_FROM_C)
shared uint ps[NSG * RM * LDP]; // P, f16 pairs
#endif
#ifdef FA_CM_LAYOUT_E
shared float cm_idx[CM_M * CM_N];
#else
shared float sc[NSG * RM * LDS];  // S
shared float rv[NSG * RM * CM_N]; // row factors
#endif

#if FA_CM_PRODUCERS > 0 && (!defined(FA_CM_LAYOUT_E) || !defined(FA_CM_A_FROM_C))
#error "FA_CM_PRODUCERS needs the probed layout and A permutation"
#endif
#if FA_CM_PRODUCERS > 0
// The producers' form: FA_CM_PRODUCERS subgroups after the NSG computing ones copy each key
// step's K and V into the tiles; the two sides meet through counters in shared memory instead
// of barriers, so that the computing subgroups never wait on a copy's latency nor on each other
// within a step. For key step g (counted over the workgroup's life): the producers store K(g)
// once every computing subgroup has counted K_FREE for step g - 1 (its S is done), count
// K_READY, then V(g) likewise after V_FREE (O += P V done); the computing subgroups wait for
// K_READY before S and V_READY before O += P V. The producers fetch K(g) while the computing
// subgroups still multiply by K(g - 1), and V(g) while they work on S(g - 1)'s rows. This
// relies on subgroups of a workgroup making progress independently (NVIDIA's, AMD's and Intel's
// GPUs): the planner gives such a module to no CPU device (vk_matrix_plan.c).
const uint K_READY = 0u, K_FREE = 1u, V_READY = 2u, V_FREE = 3u;
shared uint step_counts[4];
const uint PT = SG * FA_CM_PRODUCERS;  // producing invocations
const uint FPP = (BN * D8 + PT - 1u) / PT; // a tile's 8-element groups per producing invocation

// Waits until counter c reaches n (acquire: the tile's stores before the count are visible).
void wait_count(uint c, uint n)
{
    while (int(atomicLoad(step_counts[c], gl_ScopeWorkgroup, gl_StorageSemanticsShared,
                          gl_SemanticsAcquire) - n) < 0) {
    }
}
// Counts the subgroup's step done on counter c, after all its lanes' shared-memory accesses.
void count_step(uint c)
{
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    if (subgroupElect())
        atomicAdd(step_counts[c], 1u, gl_ScopeWorkgroup, gl_StorageSemanticsShared,
                  gl_SemanticsRelease);
}
#endif

void main()
{
    const uint lane = gl_SubgroupInvocationID, sg = gl_SubgroupID;
    const uvec3 wg = fa_bias_order(gl_NumWorkGroups.z * gl_NumWorkGroups.y);
    const uint h = wg.y, b = wg.z;
    const uint hk = h / GQA;
    const uint seq_k = FA_SEQ_K_OF(b);
    const uint r0 = sg * RM; // the subgroup's first row in the tile
    const int diag = int(seq_k) - int(pc.seq_q); // query i's diagonal is key i + diag
    const float NEG_INF = neg_inf();
    const uint k_base = pc.k_off + b * pc.k_sb + hk * pc.k_sh;
    const uint v_base = pc.v_off + b * pc.v_sb + hk * pc.v_sh;
    const uint q_head = pc.q_off + b * pc.q_sb + h * pc.q_sh;
    const uint p_off = sg * RM * LDP;
    const uint q_tiles = (pc.seq_q + BM - 1u) / BM;
    const int left = fa_left(pc.win_left), right = fa_right(pc.win_right);
    const float slope2 = ALIBI ? variant_buf[b * gl_NumWorkGroups.y + h] * LOG2E : 0.0;
    const uvec2 bias_at = fa_bias_at(gl_NumWorkGroups.z * gl_NumWorkGroups.y, b, h, 0u, 0u);
    const bool bias_blocks = fa_bias_blocks(bias_at);
// The bias of the tile's row r_ and key c_ (both tile-relative), read only inside the tile's rows
// and keys.
#define BIAS_AT(r_, c_) fa_bias(bias_at, q0 + (r_), n0 + (c_), (r_) < rows && (c_) < keys)

    // The workgroup takes the query tiles wg.x + i gl_NumWorkGroups.x of its head
    // (the host launches fewer workgroups than tiles where there are many: vk_attention.c). The
    // first K and V tiles are fetched while Q is staged; for the next query tile, its first Q
    // rows during the current tile's last key step, its first K and V tiles during the current
    // tile's output (short sequences have few steps to hide these loads behind).
    uint qt = wg.x;
    uvec4 next_k[FPT];
    uvec4 next_v[FPT];
#if FA_CM_PRODUCERS > 0
    const bool producer = sg >= NSG;
    uint step = 0u; // key steps over the workgroup's life (the counters' unit)
    if (gl_LocalInvocationID.x < 4u)
        step_counts[gl_LocalInvocationID.x] = 0u; // made visible by STAGE_ROWS_A's barriers
#endif
#if defined(FA_CM_COPY_IN_STEP) || FA_CM_PRODUCERS > 0
#define FETCH_FIRST_KV(q0_, rows_) // each step fetches its own
#else
// The first K and V tiles that query rows [q0_, q0_ + rows_) see into next_k and next_v.
#define FETCH_FIRST_KV(q0_, rows_)                                                             \
    {                                                                                          \
        const uvec2 kr_ = cm_keys_of_rows(q0_, rows_, diag, seq_k, left, right);               \
        if (kr_.x < kr_.y) {                                                                   \
            const uint n_ = min(BN, seq_k - kr_.x);                                            \
            TILE_FETCH(next_k, k_buf, k_base + kr_.x * pc.k_ss, pc.k_ss, n_)                   \
            TILE_FETCH(next_v, v_buf, v_base + kr_.x * pc.v_ss, pc.v_ss, n_)                   \
        }                                                                                      \
    }
#endif
    FETCH_FIRST_KV(qt * BM, min(BM, pc.seq_q - qt * BM))
#ifdef FA_CM_LAYOUT_E
    CM_IDX_INIT(cm_idx) // made visible by STAGE_ROWS_A's barriers
#endif
    MAT_A qa[LEN_AD];
    STAGE_ROWS_A(qa, q_buf, q_head + qt * BM * pc.q_ss, pc.q_ss, min(BM, pc.seq_q - qt * BM), r0)

    for (;;) {
        const uint q0 = qt * BM;
        const uint rows = min(BM, pc.seq_q - q0);
        const uint qt_next = qt + gl_NumWorkGroups.x;
        const bool more = qt_next < q_tiles;
        const uvec2 n_range = cm_keys_of_rows(q0, rows, diag, seq_k, left, right);
        const uint n_end = n_range.y;
        bool q_fetched = false;

        MAT_C o[LEN_CD];
        [[unroll]] for (uint i = 0; i < TM * DN; i++)
            o[i] = MAT_C(0.0);
#ifdef FA_CM_LAYOUT_E
        float m_run[TM * NSLOT], l_part[TM * NSLOT]; // per (row block, slot)
        [[unroll]] for (uint i = 0; i < TM * NSLOT; i++) {
#else
        const uint s_off = sg * RM * LDS, f_off = sg * RM * CM_N;
        float m_run[RPL], l_part[RPL];
        [[unroll]] for (uint i = 0; i < RPL; i++) {
#endif
            m_run[i] = NEG_INF;
            l_part[i] = 0.0;
        }

        for (uint n0 = n_range.x; n0 < n_end; n0 += BN) {
            const uint keys = min(BN, seq_k - n0);
#ifdef FA_CM_FLOOR_NO_KV
            const uint fa_floor_shift = (n0 / BN) & 1u;
#endif
#if FA_CM_PRODUCERS > 0
            step++;
            if (producer) {
                const uint id = gl_LocalInvocationID.x - NT;
                uvec4 pr[FPP];
                TILE_FETCH_BY(pr, FPP, id, PT, k_buf, k_base + n0 * pc.k_ss, pc.k_ss, keys)
                wait_count(K_FREE, NSG * (step - 1u));
                TILE_PUT_BY(kt, pr, FPP, id, PT)
                count_step(K_READY);
                TILE_FETCH_BY(pr, FPP, id, PT, v_buf, v_base + n0 * pc.v_ss, pc.v_ss, keys)
                wait_count(V_FREE, NSG * (step - 1u));
                TILE_PUT_BY(vt, pr, FPP, id, PT)
                count_step(V_READY);
                continue;
            }
            wait_count(K_READY, FA_CM_PRODUCERS * step);
#elif defined(FA_CM_COPY_IN_STEP)
            // K and V copied into the tiles within the step (no registers held across the
            // products for the next step's loads; other workgroups on the unit hide the copy).
            barrier(); // every subgroup is done with the previous K and V
            {
                uvec4 kr[FPT];
                uvec4 vr[FPT];
                TILE_FETCH(kr, k_buf, k_base + n0 * pc.k_ss, pc.k_ss, keys)
                TILE_FETCH(vr, v_buf, v_base + n0 * pc.v_ss, pc.v_ss, keys)
                TILE_PUT(kt, kr)
                TILE_PUT(vt, vr)
            }
            barrier();
#else
#ifndef FA_CM_FLOOR_NO_KV
            barrier(); // every subgroup is done with the previous K and V
            TILE_PUT(kt, next_k)
            TILE_PUT(vt, next_v)
            barrier();
#endif
            const uint n1 = n0 + BN;
            if (n1 < n_end) {
#ifndef FA_CM_FLOOR_NO_KV
                TILE_FETCH(next_k, k_buf, k_base + n1 * pc.k_ss, pc.k_ss, min(BN, seq_k - n1))
                TILE_FETCH(next_v, v_buf, v_base + n1 * pc.v_ss, pc.v_ss, min(BN, seq_k - n1))
#else
                // Timing only (bench/vk_forward_floors.sh, with FA_CM_PRODUCTS_ONLY): no K and V
                // traffic and no barriers; the products read whatever the tiles hold (B_AT).
#endif
            } else if (more) {
                STAGE_FETCH(next_k, next_v, q_buf, q_head + qt_next * BM * pc.q_ss, pc.q_ss,
                            min(BM, pc.seq_q - qt_next * BM), 0u)
                q_fetched = true;
            }
#endif

#ifdef FA_CM_LAYOUT_E
#ifdef FA_CM_BIAS_EARLY
            // (The catalogue's `bias-early` modules.) The step's whole bias blocks asked for
            // before S's products, so that their latency hides behind them.
            MAT_C bias_m[LEN_CS];
            const bool bias_early = BIAS != 0u && bias_blocks && r0 + RM <= rows && keys == BN;
#ifdef FA_CM_BIAS_H16
            // (Timing, bench/vk_bias_h16.sh.) An f16 bias's blocks held as f16 matrices until
            // the add, half the registers of f32 ones.
            MAT_H bias_h[LEN_CS];
            if (bias_early && BIAS == 2u) {
                [[unroll]] for (uint t = 0; t < TM; t++)
                    [[unroll]] for (uint j = 0; j < BNN; j++)
                        FA_BIAS_BLOCK_F16(bias_h[t * BNN + j],
                                          bias_at.x + (q0 + r0 + t * CM_M) * bias_at.y + n0 +
                                              j * CM_N,
                                          bias_at.y, ROW_MAJOR)
            } else
#endif
            if (bias_early) {
                [[unroll]] for (uint t = 0; t < TM; t++)
                    [[unroll]] for (uint j = 0; j < BNN; j++)
                        FA_BIAS_BLOCK(bias_m[t * BNN + j],
                                      bias_at.x + (q0 + r0 + t * CM_M) * bias_at.y + n0 + j * CM_N,
                                      bias_at.y, ROW_MAJOR)
            }
#endif
            MAT_C s[LEN_CS];
            PRODUCT_T(s, qa, kt) // S = Q K^T
#if FA_CM_PRODUCERS > 0
            count_step(K_FREE);
#endif
#ifdef FA_CM_PRODUCTS_ONLY
            // Timing only (bench/vk_forward_floors.sh): the products, loads and barriers without
            // the row work, P = S; l stays live so that the driver keeps every product.
            l_part[0] += s[0][0];
#else
            if (SOFTCAP) {
                float unused;
                [[unroll]] for (uint i = 0; i < TM * BNN; i++)
                    [[unroll]] for (uint e = 0; e < CE; e++)
                        s[i][e] = fa_score(s[i][e], pc.score_mul, pc.cap_log2, unused);
            } else {
                [[unroll]] for (uint i = 0; i < TM * BNN; i++)
                    s[i] = s[i] * pc.scale_log2;
            }
            // ALiBi's distances, the bias, and masks only where the tile has keys past the end or
            // crosses a row's bounds.
            const bool edge = cm_step_masked(keys, n0, int(q0 + r0) + diag, RM, left, right);
            if (ALIBI || BIAS != 0u || edge) {
                MAT_C ix;
                CM_IDX_LOAD(ix, cm_idx);
                if (ALIBI) {
                    // The bias -slope2 |row's diagonal - key| as the block's distance (uniform)
                    // plus each element's row - column, in floats (exact integers): two
                    // operations a score where integer indices took six.
                    float rc[CE];
                    [[unroll]] for (uint e = 0; e < CE; e++) {
                        const float r = floor((ix[e] + 0.5) * (1.0 / float(CM_N)));
                        rc[e] = r * float(CM_N + 1u) - ix[e];
                    }
                    [[unroll]] for (uint t = 0; t < TM; t++)
                        [[unroll]] for (uint j = 0; j < BNN; j++) {
                            const float d = float(int(q0 + r0 + t * CM_M) + diag -
                                                  int(n0 + j * CM_N));
                            [[unroll]] for (uint e = 0; e < CE; e++)
                                s[t * BNN + j][e] -= slope2 * abs(d + rc[e]);
                        }
                }
                if (BIAS != 0u) {
                    [[unroll]] for (uint t = 0; t < TM; t++)
                        [[unroll]] for (uint j = 0; j < BNN; j++) {
                            const uint i = t * BNN + j;
                            if (bias_blocks && r0 + (t + 1u) * CM_M <= rows &&
                                (j + 1u) * CM_N <= keys) {
                                MAT_C bm;
#if defined(FA_CM_BIAS_EARLY) && defined(FA_CM_BIAS_H16)
                                if (bias_early && BIAS == 2u)
                                    bm = MAT_C(bias_h[i]);
                                else
#endif
#ifdef FA_CM_BIAS_EARLY
                                if (bias_early)
                                    bm = bias_m[i];
                                else
#endif
                                FA_BIAS_BLOCK(bm,
                                              bias_at.x + (q0 + r0 + t * CM_M) * bias_at.y + n0 +
                                                  j * CM_N,
                                              bias_at.y, ROW_MAJOR)
                                [[unroll]] for (uint e = 0; e < CE; e++)
                                    s[i][e] = fma(bm[e], LOG2E, s[i][e]);
                            } else {
                                [[unroll]] for (uint e = 0; e < CE; e++) {
                                    const uint v = uint(ix[e]);
                                    s[i][e] += BIAS_AT(r0 + t * CM_M + v / CM_N,
                                                       j * CM_N + v % CM_N);
                                }
                            }
                        }
                }
                if (edge) {
                    [[unroll]] for (uint t = 0; t < TM; t++)
                        [[unroll]] for (uint j = 0; j < BNN; j++)
                            [[unroll]] for (uint e = 0; e < CE; e++) {
                                const uint v = uint(ix[e]), c = j * CM_N + v % CM_N;
                                // the row's diagonal, tile-relative
                                const int lim =
                                    int(q0 + r0 + t * CM_M + v / CM_N) + diag - int(n0);
                                if (c >= keys || !fa_sees(int(c), lim, left, right))
                                    s[t * BNN + j][e] = NEG_INF;
                            }
                }
            }
            float alpha[TM * NSLOT];
            [[unroll]] for (uint t = 0; t < TM; t++) {
                float mx[NSLOT];
                [[unroll]] for (uint k = 0; k < NSLOT; k++)
                    mx[k] = NEG_INF;
                [[unroll]] for (uint j = 0; j < BNN; j++)
                    [[unroll]] for (uint e = 0; e < CE; e++)
                        mx[slot_of(e)] = max(mx[slot_of(e)], s[t * BNN + j][e]);
                [[unroll]] for (uint k = 0; k < NSLOT; k++) {
                    const uint i = t * NSLOT + k;
                    const float m_new = max(m_run[i], group_max(mx[k]));
                    // m_new = -inf: no key visible so far, so P = 0 and nothing is rescaled.
                    alpha[i] = m_new == NEG_INF ? 1.0 : exp2(m_run[i] - m_new);
                    l_part[i] *= alpha[i];
                    m_run[i] = m_new;
                }
                [[unroll]] for (uint j = 0; j < BNN; j++)
                    [[unroll]] for (uint e = 0; e < CE; e++) {
                        const uint i = t * NSLOT + slot_of(e);
                        const float p =
                            exp2(s[t * BNN + j][e] - (m_run[i] == NEG_INF ? 0.0 : m_run[i]));
                        l_part[i] += p;
                        s[t * BNN + j][e] = p;
                    }
                // Always: skipping it where no maximum grew (subgroupAny) measured 13 % slower.
                [[unroll]] for (uint d = 0; d < DN; d++)
                    [[unroll]] for (uint e = 0; e < CE; e++)
                        o[t * DN + d][e] *= alpha[t * NSLOT + slot_of(e)];
            }
#endif
#if FA_CM_PRODUCERS > 0
            wait_count(V_READY, FA_CM_PRODUCERS * step);
            PRODUCT_ACC_REG(o, s, vt) // O += P V
            count_step(V_FREE);
#elif defined(FA_CM_A_FROM_C)
            PRODUCT_ACC_REG(o, s, vt) // O += P V
#else
            TO_SCRATCH_F16(s, ps, p_off)
            subgroup_sync();
            PRODUCT_ACC(o, ps, p_off, vt) // O += P V
            subgroup_sync(); // P is read before the next tile rewrites it
#endif
#else
            PRODUCT_ROWS_T(qa, kt, sc, s_off) // S = Q K^T
            subgroup_sync();

            // The row pass: mask, scale, maxima, P and alpha.
            [[unroll]] for (uint i = 0; i < RPL; i++) {
                const uint r = lane_row(lane, i);
                // The row's diagonal, tile-relative.
                const int lim = int(q0 + r0 + r) + diag - int(n0);
                vec2 x[PPL];
                float mx = NEG_INF;
                [[unroll]] for (uint p = 0; p < PPL; p++) {
                    const uint c = 2u * (lane % LPR + LPR * p);
                    x[p] = vec2(sc[s_off + r * LDS + c], sc[s_off + r * LDS + c + 1u]);
                    float unused;
                    if (SOFTCAP)
                        x[p] = vec2(fa_score(x[p].x, pc.score_mul, pc.cap_log2, unused),
                                    fa_score(x[p].y, pc.score_mul, pc.cap_log2, unused));
                    else
                        x[p] *= pc.scale_log2;
                    if (ALIBI)
                        x[p] += vec2(fa_alibi(slope2, int(c), lim),
                                     fa_alibi(slope2, int(c) + 1, lim));
                    if (BIAS != 0u)
                        x[p] += vec2(BIAS_AT(r0 + r, c), BIAS_AT(r0 + r, c + 1u));
                    if (c >= keys || !fa_sees(int(c), lim, left, right))
                        x[p].x = NEG_INF;
                    if (c + 1u >= keys || !fa_sees(int(c) + 1, lim, left, right))
                        x[p].y = NEG_INF;
                    mx = max(mx, max(x[p].x, x[p].y));
                }
                const float m_new = max(m_run[i], row_max(mx));
                // m_new = -inf: no finite score so far, so nothing is rescaled and P = exp2(s): 0
                // for a masked score, NaN for a NaN one (max skipped it).
                const bool none = m_new == NEG_INF;
                const float alpha = none ? 1.0 : exp2(m_run[i] - m_new);
                const float m_use = none ? 0.0 : m_new;
                float sum = 0.0;
                [[unroll]] for (uint p = 0; p < PPL; p++) {
                    const vec2 e = exp2(x[p] - m_use);
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
#endif
        }

        if (more) { // the next tile's Q, then its first K and V tiles
            const uint q1 = qt_next * BM, rows1 = min(BM, pc.seq_q - q1);
            if (!q_fetched)
                STAGE_FETCH(next_k, next_v, q_buf, q_head + q1 * pc.q_ss, pc.q_ss, rows1, 0u)
            STAGE_ROWS_A_FROM(qa, next_k, next_v, q_buf, q_head + q1 * pc.q_ss, pc.q_ss, rows1, r0)
            FETCH_FIRST_KV(q1, rows1)
        }

        // 1 / l per row (0 for a row that saw no key: O = 0, LSE = -inf, never NaN), and the LSE.
        const uint lse_base = pc.lse_off + b * pc.lse_sb + h * pc.lse_sh;
#ifdef FA_CM_LAYOUT_E
        MAT_C ix;
        CM_IDX_LOAD(ix, cm_idx);
        [[unroll]] for (uint t = 0; t < TM; t++) {
            float inv[NSLOT];
            [[unroll]] for (uint k = 0; k < NSLOT; k++) {
                const uint i = t * NSLOT + k;
                const float l = group_sum(l_part[i]);
                inv[k] = l != 0.0 ? 1.0 / l : 0.0;
                // The slot's row: that of its first element; one lane of the row writes the LSE.
                const uint r = r0 + t * CM_M + uint(ix[k << SLOT_SHIFT]) / CM_N;
                if (pc.has_lse != 0u && (lane & LANE_XOR) == 0u && r < rows)
                    lse_buf[lse_base + (q0 + r) * pc.lse_ss] =
                        l != 0.0 ? (m_run[i] + log2(l)) * LN2 : NEG_INF;
            }
            [[unroll]] for (uint d = 0; d < DN; d++)
                [[unroll]] for (uint e = 0; e < CE; e++)
                    o[t * DN + d][e] *= inv[slot_of(e)];
        }
#else
        [[unroll]] for (uint i = 0; i < RPL; i++) {
            const uint r = lane_row(lane, i);
            const float l = row_sum(l_part[i]);
            for (uint c = lane % LPR; c < CM_N; c += LPR)
                rv[f_off + r * CM_N + c] = l != 0.0 ? 1.0 / l : 0.0;
            if (pc.has_lse != 0u && lane % LPR == 0u && r0 + r < rows)
                lse_buf[lse_base + (q0 + r0 + r) * pc.lse_ss] =
                    l != 0.0 ? (m_run[i] + log2(l)) * LN2 : NEG_INF;
        }
        subgroup_sync();
        SCALE_ROWS(o, DN, rv, f_off)
#endif
        const uint o_base = pc.o_off + b * pc.o_sb + h * pc.o_sh + q0 * pc.o_ss;
        UNSTAGE_ROWS(o, 1.0, o_buf, o_base, pc.o_ss, rows, r0)
        if (!more)
            break;
        qt = qt_next;
    }
}
