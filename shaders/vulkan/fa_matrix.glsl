// SPDX-License-Identifier: MIT
// Shared by the cooperative-matrix shaders (attn_*_cm.comp): the matrix types, the tiling
// constants the host's planner chose (backends/vulkan/vk_matrix_plan.c; IDs in fa_spec_ids.h)
// and the helpers that move tiles between global memory, shared memory and the matrices.
//
// Every matrix product runs on subgroup-scope cooperative matrices of the device's shape
// CM_M x CM_N x CM_K (f16 x f16 + f32 -> f32). The element-to-invocation mapping of a
// cooperative matrix is the driver's, so:
// - element-wise work (scaling, exp2, masks, dS = P (dP - Delta)) runs on the accumulators'
//   own elements; a per-row or per-column value (LSE, Delta) comes as a matrix of repeated rows
//   or columns loaded from shared memory (matrices of one type share their mapping), and an
//   element's row and column, where a mask needs them, from the index matrix cm_idx
//   (CM_IDX_LOAD), whose element (r, c) holds r * CM_N + c;
// - a result that feeds another product (P, dS) becomes an A matrix: in registers where the
//   host has probed that a lane holds the same elements of both (FA_CM_A_FROM_C, ACC_TO_A), else
//   through shared memory as f16 (KHR matrices have no conversion between uses);
// - a row reduction (the forward's row maxima and sums) needs to know which lanes share a row:
//   where the host has probed the accumulators' layout (vk_matrix_layout.c) and the module was
//   compiled for it (FA_CM_LAYOUT_*), lanes reduce their own elements and then across the lanes
//   of a row with shuffles; otherwise S goes through the subgroup's scratch in shared memory,
//   where each lane works on whole row segments (the row pass), and a per-row factor becomes an
//   RM x CM_N matrix of repeated rows multiplied element by element (attn_fwd_cm.comp).
// A subgroup owns RM = TM * CM_M rows of a workgroup's BM.
#extension GL_GOOGLE_include_directive : require
#include "fa_common.glsl"

// FA_CM_FIXED: the tiling as compile-time constants (with FA_FIXED_D, the catalogue's modules,
// which spirv-opt then unrolls; see backends/vulkan/matrix_shaders.cmake).
// FA_CM_PRODUCERS (forward, fixed tilings only): that many subgroups more in the workgroup, after
// the NSG that compute, which copy K and V into shared memory (attn_fwd_cm.comp).
#ifndef FA_CM_PRODUCERS
#define FA_CM_PRODUCERS 0
#endif
#ifdef FA_CM_FIXED
const uint CM_M = FA_CM_FIXED_M, CM_N = FA_CM_FIXED_N, CM_K = FA_CM_FIXED_K;
const uint SG = FA_CM_FIXED_SG, NSG = FA_CM_FIXED_NSG, TM = FA_CM_FIXED_TM, BN = FA_CM_FIXED_BN;
layout(local_size_x = FA_CM_FIXED_SG * (FA_CM_FIXED_NSG + FA_CM_PRODUCERS)) in;
#else
layout(constant_id = FA_SPEC_CM_M) const uint CM_M = 16;
layout(constant_id = FA_SPEC_CM_N) const uint CM_N = 16;
layout(constant_id = FA_SPEC_CM_K) const uint CM_K = 16;
layout(constant_id = FA_SPEC_CM_SG) const uint SG = 32;
layout(constant_id = FA_SPEC_CM_NSG) const uint NSG = 4;
layout(constant_id = FA_SPEC_CM_TM) const uint TM = 1;
layout(constant_id = FA_SPEC_CM_BN) const uint BN = 32;
layout(local_size_x = 128, local_size_x_id = FA_SPEC_CM_WG) in; // SG * NSG
#endif

#include "fa_cm_core.glsl"

const uint NT = SG * NSG; // the computing invocations, which also stage Q and O
// An invocation's index among the NT that stage rows, or past every tile for a producer's.
#if FA_CM_PRODUCERS > 0
#define STAGER_ID (gl_LocalInvocationID.x < NT ? gl_LocalInvocationID.x : 0x40000000u)
#else
#define STAGER_ID gl_LocalInvocationID.x
#endif
const uint RM = TM * CM_M;                 // rows per subgroup
const uint BM = NSG * RM;                  // rows per workgroup
const uint D8 = D / 8u;
const uint LDT = D8 + 1u;                  // tile row pitch, uvec4 (D + 8 halfs)
const uint LDP = (BN + 8u) / 2u;           // f16 scratch row pitch, uints (pairs)
const uint DK = D / CM_K, DN = D / CM_N;   // matrices along the head dim (as K, as N)
const uint BK = BN / CM_K, BNN = BN / CM_N; // matrices along a step's columns (as K, as N)
const uint FPT = (BN * D8 + NT - 1u) / NT;  // 8-element groups of one tile per invocation

#ifdef FA_CM_A_FROM_C
// acc_[t * DN + d] += A B, where A is the RM x BN result cs_[t * BNN + k] (turned into A
// matrices in registers) and B the BN x D tile tile_ (row-major).
#define PRODUCT_ACC_REG(acc_, cs_, tile_)                                                      \
    [[unroll]] for (uint k_ = 0; k_ < BNN; k_++) {                                             \
        MAT_A a_[TM];                                                                          \
        [[unroll]] for (uint t_ = 0; t_ < TM; t_++)                                            \
            ACC_TO_A(a_[t_], cs_[t_ * BNN + k_])                                               \
        MULADD_TILE_ROWS(acc_, a_, tile_, k_)                                                  \
    }
#endif

// FOR_EACH_ELEMENT(e_, m_): a loop over a lane's elements of accumulator m_, unrolled in SPIR-V
// where the module knows their count (the probed layout's, or the A matrices' where those hold the
// accumulator's elements), else to the driver's length(). A loop the driver leaves rolled indexes
// the matrices dynamically, which puts them in local memory: on the H200, dK/dV's rolled loop
// held the backward with ALiBi or a softcap at 0.36-0.40x of its plain speed (docs/PERF.md).
#if defined(FA_CM_LAYOUT_E)
#define FOR_EACH_ELEMENT(e_, m_) [[unroll]] for (uint e_ = 0; e_ < CE; e_++)
#elif defined(FA_CM_A_FROM_C)
#define FOR_EACH_ELEMENT(e_, m_) [[unroll]] for (uint e_ = 0; e_ < FA_CM_A_ELEMENTS; e_++)
#else
#define FOR_EACH_ELEMENT(e_, m_) for (uint e_ = 0; e_ < m_.length(); e_++)
#endif

// Lengths of the matrix arrays: operands over the head dim, accumulators over it, a step's
// scores.
#define LEN_AD (TM * DK)
#define LEN_CD (TM * DN)
#define LEN_CS (TM * BNN)

// Starts loading rows [0, BN) of a BN x D tile (row r at base_ + r * stride_ in buf_, rows past
// valid_ zero), 8 elements a load, all NT invocations together, into the invocation's registers
// regs_[FPT], so that the loads fly while the current tile is multiplied; TILE_PUT stores them
// into a shared tile (pitch LDT).
#define TILE_FETCH(regs_, buf_, base_, stride_, valid_)                                        \
    TILE_FETCH_BY(regs_, FPT, STAGER_ID, NT, buf_, base_, stride_, valid_)
#define TILE_PUT(dst_, regs_) TILE_PUT_BY(dst_, regs_, FPT, STAGER_ID, NT)
// The same for count_ registers an invocation, id_ being the invocation's index among threads_.
#define TILE_FETCH_BY(regs_, count_, id_, threads_, buf_, base_, stride_, valid_)              \
    {                                                                                          \
        const uint b_ = (base_), st_ = (stride_), n_ = (valid_);                               \
        const bool v4_ = ((b_ | st_) & 3u) == 0u, v8_ = ((b_ | st_) & 7u) == 0u;               \
        [[unroll]] for (uint i_ = 0; i_ < (count_); i_++) {                                    \
            const uint e_ = (id_) + i_ * (threads_), r_ = e_ / D8, c_ = e_ - r_ * D8;          \
            regs_[i_] = uvec4(0);                                                              \
            if (e_ < BN * D8 && r_ < n_)                                                       \
                regs_[i_] = LD_RAW8(buf_, b_ + r_ * st_ + 8u * c_, v8_, v4_);                  \
        }                                                                                      \
    }
#define TILE_PUT_BY(dst_, regs_, count_, id_, threads_)                                        \
    [[unroll]] for (uint i_ = 0; i_ < (count_); i_++) {                                        \
        const uint e_ = (id_) + i_ * (threads_), r_ = e_ / D8;                                 \
        if (e_ < BN * D8)                                                                      \
            dst_[r_ * LDT + e_ - r_ * D8] = regs_[i_];                                         \
    }

// Stores eight f16 elements (bits x_) at element i_ of a tensor: one 16-byte store when vec8_
// (offset and strides multiples of 8), two 8-byte ones when vec_ (multiples of 4), else one
// element at a time.
#define ST_RAW8(name_, i_, x_, vec8_, vec_)                                                    \
    {                                                                                          \
        const uint j_ = (i_);                                                                  \
        const uvec4 y_ = (x_);                                                                 \
        if (vec8_) {                                                                           \
            name_##_q[j_ >> 3] = y_;                                                           \
        } else if (vec_) {                                                                     \
            name_##_v[j_ >> 2] = y_.xy;                                                        \
            name_##_v[(j_ >> 2) + 1u] = y_.zw;                                                 \
        } else {                                                                               \
            [[unroll]] for (uint w_ = 0; w_ < 4u; w_++) {                                      \
                const vec2 h_ = unpackHalf2x16(y_[w_]);                                        \
                ST(name_, j_ + 2u * w_, h_.x);                                                 \
                ST(name_, j_ + 2u * w_ + 1u, h_.y);                                            \
            }                                                                                  \
        }                                                                                      \
    }

// The keys [x, y) that the query rows [q0, q0 + rows) see, a query's diagonal being its index
// plus diag (seq_k - seq_q): every key but where causal or a window (fa_left, fa_right: -1 for
// none) bounds them; empty where x >= y.
uvec2 cm_keys_of_rows(uint q0, uint rows, int diag, uint seq_k, int left, int right)
{
    return uvec2(fa_keys_begin(int(q0) + diag, left),
                 fa_keys_end(int(q0 + rows) - 1 + diag, right, seq_k));
}

// Whether the step of BN keys from key n0 (the first `keys` of them real) needs the mask for n
// query rows whose first has diagonal qd0: it ends past the keys, or crosses the right bound of
// the first row or the left bound of the last (without causal and window, only the end counts).
bool cm_step_masked(uint keys, uint n0, int qd0, uint n, int left, int right)
{
    return keys < BN || (right >= 0 && int(n0 + BN) - 1 > qd0 + right) ||
           (left >= 0 && int(n0) < qd0 + int(n) - 1 - left);
}

// Loads the subgroup's RM rows (from its first row r0_ in the workgroup's BM) of a tensor into
// A matrices mats_[t * DK + d], staging rows [0, BM) (row r at base_ + r * ss_, rows past valid_
// zero) through the shader's two BN x D tiles kt and vt, 2 BN rows at a time (BN is a multiple
// of CM_M, so no block of rows straddles them). Starts and ends with the tiles free.
#define STAGE_ROWS_A(mats_, buf_, base_, ss_, valid_, r0_)                                     \
    {                                                                                          \
        uvec4 slo_[FPT];                                                                       \
        uvec4 shi_[FPT];                                                                       \
        STAGE_FETCH(slo_, shi_, buf_, base_, ss_, valid_, 0u)                                  \
        STAGE_ROWS_A_FROM(mats_, slo_, shi_, buf_, base_, ss_, valid_, r0_)                    \
    }

// Fetches rows [c0_, c0_ + 2 BN) of STAGE_ROWS_A's rows into registers lo_ and hi_ (FPT each).
#define STAGE_FETCH(lo_, hi_, buf_, base_, ss_, valid_, c0_)                                   \
    {                                                                                          \
        const uint v_ = (valid_), c_ = (c0_);                                                  \
        TILE_FETCH(lo_, buf_, (base_) + c_ * (ss_), ss_, v_ > c_ ? v_ - c_ : 0u)               \
        TILE_FETCH(hi_, buf_, (base_) + (c_ + BN) * (ss_), ss_,                                \
                   v_ > c_ + BN ? v_ - c_ - BN : 0u)                                           \
    }

// STAGE_ROWS_A with the first 2 BN rows already fetched into lo_ and hi_ (STAGE_FETCH at 0),
// which it then reuses for the rest.
#define STAGE_ROWS_A_FROM(mats_, lo_, hi_, buf_, base_, ss_, valid_, r0_)                      \
    [[unroll]] for (uint c0_ = 0; c0_ < BM; c0_ += 2u * BN) {                                  \
        barrier();                                                                             \
        if (c0_ > 0u)                                                                          \
            STAGE_FETCH(lo_, hi_, buf_, base_, ss_, valid_, c0_)                               \
        TILE_PUT(kt, lo_)                                                                      \
        TILE_PUT(vt, hi_)                                                                      \
        barrier();                                                                             \
        [[unroll]] for (uint t_ = 0; t_ < TM; t_++) {                                          \
            const uint r_ = (r0_) + t_ * CM_M;                                                 \
            if (r_ >= c0_ && r_ < c0_ + 2u * BN) {                                             \
                [[unroll]] for (uint d_ = 0; d_ < DK; d_++) {                                  \
                    const uint o_ = ((r_ - c0_) % BN) * LDT + d_ * (CM_K / 8u);                \
                    if (r_ < c0_ + BN)                                                         \
                        coopMatLoad(mats_[t_ * DK + d_], kt, o_, LDT, ROW_MAJOR);              \
                    else                                                                       \
                        coopMatLoad(mats_[t_ * DK + d_], vt, o_, LDT, ROW_MAJOR);              \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    barrier();

// Writes the subgroup's RM x D accumulators acc_[t * DN + d] times scale_, as f16, to rows
// [0, valid_) of the workgroup's BM rows of a tensor (row r at base_ + r * ss_), staging
// through the tiles kt and vt 2 BN rows at a time, so that global memory sees whole rows
// (r0_: the subgroup's first row). Starts and ends with the tiles free.
#define UNSTAGE_ROWS(acc_, scale_, out_, base_, ss_, valid_, r0_)                              \
    {                                                                                          \
        const uint b_ = (base_), st_ = (ss_), n_ = (valid_);                                   \
        const bool v4_ = ((b_ | st_) & 3u) == 0u, v8_ = ((b_ | st_) & 7u) == 0u;               \
        [[unroll]] for (uint c0_ = 0; c0_ < BM; c0_ += 2u * BN) {                              \
            barrier();                                                                         \
            [[unroll]] for (uint t_ = 0; t_ < TM; t_++) {                                      \
                const uint r_ = (r0_) + t_ * CM_M;                                             \
                if (r_ >= c0_ && r_ < c0_ + 2u * BN) {                                         \
                    [[unroll]] for (uint d_ = 0; d_ < DN; d_++) {                              \
                        const uint o_ = ((r_ - c0_) % BN) * LDT + d_ * (CM_N / 8u);            \
                        const MAT_H h_ = MAT_H(acc_[t_ * DN + d_] * (scale_));                 \
                        if (r_ < c0_ + BN)                                                     \
                            coopMatStore(h_, kt, o_, LDT, ROW_MAJOR);                          \
                        else                                                                   \
                            coopMatStore(h_, vt, o_, LDT, ROW_MAJOR);                          \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
            barrier();                                                                         \
            for (uint e_ = STAGER_ID; e_ < 2u * BN * D8; e_ += NT) {                           \
                const uint r_ = e_ / D8, c_ = e_ - r_ * D8;                                    \
                if (c0_ + r_ < n_) {                                                           \
                    const uvec4 x_ = r_ < BN ? kt[r_ * LDT + c_] : vt[(r_ - BN) * LDT + c_];   \
                    ST_RAW8(out_, b_ + (c0_ + r_) * st_ + 8u * c_, x_, v8_, v4_)               \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        barrier();                                                                             \
    }

// Timing only (bench/vk_forward_floors.sh): with FA_CM_FLOOR_NO_KV the tiles never change, so
// the B operands move by fa_floor_shift (0 or 1 uvec4, alternating by step, inside the tile: the
// last column of a row is padding) lest the driver hoist the products out of the key loop; with
// FA_CM_FLOOR_B_ONCE every B operand is read from one place, so that the driver may keep them in
// registers.
#if defined(FA_CM_FLOOR_B_ONCE)
#define B_AT(o_) fa_floor_shift
#elif defined(FA_CM_FLOOR_NO_KV)
#define B_AT(o_) ((o_) + fa_floor_shift)
#else
#define B_AT(o_) (o_)
#endif

// acc_[t * BNN + j] = A B^T over the head dim, where A is mats_ (t < TM blocks of the
// subgroup's rows) and B's rows are the BN rows of tile_ (column-major B).
#define PRODUCT_T(acc_, mats_, tile_)                                                          \
    {                                                                                          \
        [[unroll]] for (uint i_ = 0; i_ < TM * BNN; i_++)                                      \
            acc_[i_] = MAT_C(0.0);                                                             \
        [[unroll]] for (uint d_ = 0; d_ < DK; d_++)                                            \
            [[unroll]] for (uint j_ = 0; j_ < BNN; j_++) {                                     \
                MAT_B b_;                                                                      \
                coopMatLoad(b_, tile_, B_AT(j_ * CM_N * LDT + d_ * (CM_K / 8u)), LDT,              \
                            COL_MAJOR);                                                            \
                [[unroll]] for (uint t_ = 0; t_ < TM; t_++)                                    \
                    acc_[t_ * BNN + j_] = coopMatMulAdd(mats_[t_ * DK + d_], b_,               \
                                                        acc_[t_ * BNN + j_]);                  \
            }                                                                                  \
    }

// The RM x BN accumulators acc_[t * BNN + j] as f16 into the subgroup's f16 scratch ps_ at
// ps_off_ (pitch LDP pairs), from where PRODUCT_ACC reads them as A matrices.
#define TO_SCRATCH_F16(acc_, ps_, ps_off_)                                                     \
    [[unroll]] for (uint t_ = 0; t_ < TM; t_++)                                                \
        [[unroll]] for (uint j_ = 0; j_ < BNN; j_++)                                           \
            coopMatStore(MAT_H(acc_[t_ * BNN + j_]), ps_,                                      \
                         (ps_off_) + t_ * CM_M * LDP + j_ * (CM_N / 2u), LDP, ROW_MAJOR);

// acc_[t * DN + d] += A B, where A is the subgroup's RM x BN f16 scratch ps_ at ps_off_ (pitch
// LDP) and B the BN x D tile tile_ (row-major).
#define PRODUCT_ACC(acc_, ps_, ps_off_, tile_)                                                 \
    [[unroll]] for (uint k_ = 0; k_ < BK; k_++) {                                              \
        MAT_A a_[TM];                                                                          \
        [[unroll]] for (uint t_ = 0; t_ < TM; t_++)                                            \
            coopMatLoad(a_[t_], ps_, (ps_off_) + t_ * CM_M * LDP + k_ * (CM_K / 2u), LDP,      \
                        ROW_MAJOR);                                                            \
        MULADD_TILE_ROWS(acc_, a_, tile_, k_)                                                  \
    }

// acc_[t * DN + d] += a_[t] B for t < TM, where B is rows [k_ CM_K, (k_ + 1) CM_K) of the BN x D
// tile tile_ (row-major).
#define MULADD_TILE_ROWS(acc_, a_, tile_, k_)                                                  \
    [[unroll]] for (uint d_ = 0; d_ < DN; d_++) {                                              \
        MAT_B b_;                                                                              \
        coopMatLoad(b_, tile_, B_AT(k_ * CM_K * LDT + d_ * (CM_N / 8u)), LDT, ROW_MAJOR);          \
        [[unroll]] for (uint t_ = 0; t_ < TM; t_++)                                            \
            acc_[t_ * DN + d_] = coopMatMulAdd(a_[t_], b_, acc_[t_ * DN + d_]);                \
    }
