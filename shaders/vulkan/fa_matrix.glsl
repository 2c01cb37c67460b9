// Shared by the cooperative-matrix shaders (attn_*_cm.comp): the matrix types, the tiling
// constants the host's planner chose (backends/vulkan/vk_matrix_plan.c; IDs in fa_matrix_ids.h)
// and the helpers that move tiles between global memory, shared memory and the matrices.
//
// Every matrix product runs on subgroup-scope cooperative matrices of the device's shape
// CM_M x CM_N x CM_K (f16 x f16 + f32 -> f32). The element-to-invocation mapping of a
// cooperative matrix is the driver's secret, so whatever needs rows (masks, row maxima, sums,
// per-row factors) goes through a subgroup's own scratch in shared memory: an accumulator is
// stored there, each lane works on whole row segments of it, and the f16 results are loaded back
// as A matrices. A per-row factor becomes an RM x CM_N matrix of repeated rows, loaded as an
// accumulator and multiplied element by element (matrices of one type share their mapping).
//
// A subgroup owns RM = TM * CM_M rows. In the row passes, LPR lanes share a row (SG > RM) or a
// lane owns RPL rows (SG < RM); a lane takes the column pairs (lane % LPR) + LPR * j of its row.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_GOOGLE_include_directive : require
#include "fa_common.glsl"
#include "fa_matrix_ids.h"

// FA_CM_FIXED: the tiling as compile-time constants (with FA_FIXED_D, the catalogue's modules,
// which spirv-opt then unrolls; see backends/vulkan/matrix_shaders.cmake).
#ifdef FA_CM_FIXED
const uint CM_M = FA_CM_FIXED_M, CM_N = FA_CM_FIXED_N, CM_K = FA_CM_FIXED_K;
const uint SG = FA_CM_FIXED_SG, NSG = FA_CM_FIXED_NSG, TM = FA_CM_FIXED_TM, BN = FA_CM_FIXED_BN;
layout(local_size_x = FA_CM_FIXED_SG * FA_CM_FIXED_NSG) in;
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

#define MAT_A coopmat<float16_t, gl_ScopeSubgroup, CM_M, CM_K, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeSubgroup, CM_K, CM_N, gl_MatrixUseB>
#define MAT_C coopmat<float, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator>
#define ROW_MAJOR gl_CooperativeMatrixLayoutRowMajor
#define COL_MAJOR gl_CooperativeMatrixLayoutColumnMajor

const uint NT = SG * NSG;
const uint RM = TM * CM_M;                 // rows per subgroup
const uint BM = NSG * RM;                  // rows per workgroup
const uint LPR = SG > RM ? SG / RM : 1u;   // lanes per row in the row passes
const uint RPL = RM > SG ? RM / SG : 1u;   // rows per lane
const uint PPL = BN / (2u * LPR);          // column pairs per lane and row
const uint D8 = D / 8u;
const uint LDT = D8 + 1u;                  // tile row pitch, uvec4 (D + 8 halfs)
const uint LDS = BN + 4u;                  // f32 scratch row pitch, floats
const uint LDP = (BN + 8u) / 2u;           // f16 scratch row pitch, uints (pairs)
const uint DK = D / CM_K, DN = D / CM_N;   // matrices along the head dim (as K, as N)
const uint BK = BN / CM_K, BNN = BN / CM_N; // matrices along a step's columns (as K, as N)

// Lengths of the matrix arrays: operands over the head dim, accumulators over it, a step's
// scores.
#define LEN_AD (TM * DK)
#define LEN_CD (TM * DN)
#define LEN_CS (TM * BNN)

// Row i (< RPL) of this lane in the row passes, within its subgroup's RM rows.
uint lane_row(uint lane, uint i) { return lane / LPR + (SG / LPR) * i; }

// Loads rows [0, BN) of a BN x D tile (row r at base + r * stride in `buf`, rows past `valid`
// zero) into `dst` (uvec4 pitch LDT), all NT invocations together, 8 elements a load.
#define TILE_LOAD(dst_, dst_off_, buf_, base_, stride_, valid_)                                 \
    {                                                                                          \
        const uint b_ = (base_), st_ = (stride_), n_ = (valid_);                               \
        const bool v4_ = ((b_ | st_) & 3u) == 0u, v8_ = ((b_ | st_) & 7u) == 0u;               \
        for (uint e_ = gl_LocalInvocationID.x; e_ < BN * D8; e_ += NT) {                       \
            const uint r_ = e_ / D8, c_ = e_ - r_ * D8;                                        \
            uvec4 x_ = uvec4(0);                                                               \
            if (r_ < n_)                                                                       \
                x_ = LD_RAW8(buf_, b_ + r_ * st_ + 8u * c_, v8_, v4_);                         \
            dst_[(dst_off_) + r_ * LDT + c_] = x_;                                             \
        }                                                                                      \
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

// Writes the RM x D accumulators acc_[t * DN + j] times `scale_` to rows [0, valid_) of a
// tensor (row r at base_ + r * ss_ in out_), through the subgroup's f32 scratch sc_ (RM x LDS at
// sc_off_), BN columns at a time.
#define STORE_ROWS(acc_, scale_, sc_, sc_off_, out_, base_, ss_, valid_)                       \
    {                                                                                          \
        const uint lane_ = gl_SubgroupInvocationID;                                            \
        [[unroll]] for (uint c0_ = 0; c0_ < DN; c0_ += BNN) {                                  \
            [[unroll]] for (uint t_ = 0; t_ < TM; t_++)                                        \
                [[unroll]] for (uint j_ = 0; j_ < BNN; j_++)                                   \
                    if (c0_ + j_ < DN)                                                         \
                        coopMatStore(acc_[t_ * DN + c0_ + j_], sc_,                            \
                                     (sc_off_) + t_ * CM_M * LDS + j_ * CM_N, LDS, ROW_MAJOR); \
            subgroup_sync();                                                                   \
            [[unroll]] for (uint i_ = 0; i_ < RPL; i_++) {                                     \
                const uint r_ = lane_row(lane_, i_);                                           \
                if (r_ < (valid_))                                                             \
                    [[unroll]] for (uint p_ = 0; p_ < PPL; p_++) {                             \
                        const uint c_ = 2u * (lane_ % LPR + LPR * p_);                         \
                        const uint g_ = c0_ * CM_N + c_;                                       \
                        if (g_ < D) {                                                          \
                            const uint x_ = (sc_off_) + r_ * LDS + c_;                         \
                            ST(out_, (base_) + r_ * (ss_) + g_, sc_[x_] * (scale_));           \
                            ST(out_, (base_) + r_ * (ss_) + g_ + 1u, sc_[x_ + 1u] * (scale_)); \
                        }                                                                      \
                    }                                                                          \
            }                                                                                  \
            subgroup_sync();                                                                   \
        }                                                                                      \
    }

// Makes a subgroup's shared-memory writes visible to its other lanes.
void subgroup_sync()
{
    subgroupMemoryBarrierShared();
    subgroupBarrier();
}

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

// Loads the subgroup's RM rows (from its first row r0_ in the workgroup's BM) of a tensor into
// A matrices mats_[t * DK + d], staging rows [0, BM) (row r at base_ + r * ss_, rows past valid_
// zero) through the shader's two BN x D tiles kt and vt, 2 BN rows at a time (BN is a multiple
// of CM_M, so no block of rows straddles them). Starts and ends with the tiles free.
#define STAGE_ROWS_A(mats_, buf_, base_, ss_, valid_, r0_)                                     \
    [[unroll]] for (uint c0_ = 0; c0_ < BM; c0_ += 2u * BN) {                                  \
        barrier();                                                                             \
        const uint v_ = (valid_);                                                              \
        TILE_LOAD(kt, 0u, buf_, (base_) + c0_ * (ss_), ss_, v_ > c0_ ? v_ - c0_ : 0u)          \
        TILE_LOAD(vt, 0u, buf_, (base_) + (c0_ + BN) * (ss_), ss_,                             \
                  v_ > c0_ + BN ? v_ - c0_ - BN : 0u)                                          \
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

// acc_[t * BNN + j] = A B^T over the head dim, where A is mats_ (t < TM blocks of the
// subgroup's rows) and B's rows are the BN rows of tile_ (column-major B); then stored to the
// subgroup's f32 scratch sc_ at sc_off_ (RM x BN, pitch LDS).
#define PRODUCT_ROWS_T(mats_, tile_, sc_, sc_off_)                                             \
    {                                                                                          \
        MAT_C acc_[LEN_CS];                                                                  \
        [[unroll]] for (uint i_ = 0; i_ < TM * BNN; i_++)                                      \
            acc_[i_] = MAT_C(0.0);                                                             \
        [[unroll]] for (uint d_ = 0; d_ < DK; d_++)                                            \
            [[unroll]] for (uint j_ = 0; j_ < BNN; j_++) {                                     \
                MAT_B b_;                                                                      \
                coopMatLoad(b_, tile_, j_ * CM_N * LDT + d_ * (CM_K / 8u), LDT, COL_MAJOR);    \
                [[unroll]] for (uint t_ = 0; t_ < TM; t_++)                                    \
                    acc_[t_ * BNN + j_] = coopMatMulAdd(mats_[t_ * DK + d_], b_,               \
                                                        acc_[t_ * BNN + j_]);                  \
            }                                                                                  \
        [[unroll]] for (uint t_ = 0; t_ < TM; t_++)                                            \
            [[unroll]] for (uint j_ = 0; j_ < BNN; j_++)                                       \
                coopMatStore(acc_[t_ * BNN + j_], sc_, (sc_off_) + t_ * CM_M * LDS + j_ * CM_N, \
                             LDS, ROW_MAJOR);                                                  \
    }

// acc_[t * DN + d] += A B, where A is the subgroup's RM x BN f16 scratch ps_ at ps_off_ (pitch
// LDP) and B the BN x D tile tile_ (row-major).
#define PRODUCT_ACC(acc_, ps_, ps_off_, tile_)                                                 \
    [[unroll]] for (uint k_ = 0; k_ < BK; k_++) {                                              \
        MAT_A a_[TM];                                                                          \
        [[unroll]] for (uint t_ = 0; t_ < TM; t_++)                                            \
            coopMatLoad(a_[t_], ps_, (ps_off_) + t_ * CM_M * LDP + k_ * (CM_K / 2u), LDP,      \
                        ROW_MAJOR);                                                            \
        [[unroll]] for (uint d_ = 0; d_ < DN; d_++) {                                          \
            MAT_B b_;                                                                          \
            coopMatLoad(b_, tile_, k_ * CM_K * LDT + d_ * (CM_N / 8u), LDT, ROW_MAJOR);        \
            [[unroll]] for (uint t_ = 0; t_ < TM; t_++)                                        \
                acc_[t_ * DN + d_] = coopMatMulAdd(a_[t_], b_, acc_[t_ * DN + d_]);            \
        }                                                                                      \
    }
