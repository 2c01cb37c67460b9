// SPDX-License-Identifier: MIT
// The cooperative-matrix shaders' common core (fa_matrix.glsl for the forward and backward,
// attn_decode.comp's FA_DEC_MATRIX): the matrix types, the probed accumulator layout's row
// reductions and register conversion, the index matrix. The including shader declares CM_M,
// CM_N, CM_K (the device's shape), SG (the subgroup size) and NT (invocations) first.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require

#define MAT_A coopmat<float16_t, gl_ScopeSubgroup, CM_M, CM_K, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeSubgroup, CM_K, CM_N, gl_MatrixUseB>
#define MAT_C coopmat<float, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator>
#define MAT_H coopmat<float16_t, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator>
#define ROW_MAJOR gl_CooperativeMatrixLayoutRowMajor
#define COL_MAJOR gl_CooperativeMatrixLayoutColumnMajor

#ifdef FA_CM_LAYOUT_E
// The accumulators' layout as the host probed it (vk_matrix_layout.c) and this module was
// compiled for: a lane holds CE elements of a CM_M x CM_N accumulator; element e is in the
// lane's row slot (e >> SLOT_SHIFT) % NSLOT (one row per slot); the lanes holding the same rows
// differ only in the bits of LANE_XOR, and together hold all of those rows.
const uint CE = FA_CM_LAYOUT_E, SLOT_SHIFT = FA_CM_LAYOUT_SHIFT;
const uint NSLOT = 1u << FA_CM_LAYOUT_BITS, LANE_XOR = FA_CM_LAYOUT_XOR;
uint slot_of(uint e) { return (e >> SLOT_SHIFT) & (NSLOT - 1u); }
float group_max(float x)
{
    [[unroll]] for (uint o = 1u; o < SG; o <<= 1)
        if ((LANE_XOR & o) != 0u)
            x = max(x, subgroupShuffleXor(x, o));
    return x;
}
float group_sum(float x)
{
    [[unroll]] for (uint o = 1u; o < SG; o <<= 1)
        if ((LANE_XOR & o) != 0u)
            x += subgroupShuffleXor(x, o);
    return x;
}
#endif

#ifdef FA_CM_A_FROM_C
// The accumulator c_ (CM_M x CM_N) as the A matrix a_ (CM_M x CM_K, CM_K = CM_N) of the next
// product, in registers: a lane holds the same FA_CM_A_ELEMENTS elements of both, A's element
// e being the accumulator's element (FA_CM_A_FROM_C >> 4 e) & 15 (probed by the host:
// vk_matrix_layout.c; the constant indices let spirv-opt keep both in registers).
#define ACC_TO_A(a_, c_)                                                                       \
    [[unroll]] for (uint e_ = 0; e_ < FA_CM_A_ELEMENTS; e_++)                                  \
        a_[e_] = float16_t(c_[(uint(FA_CM_A_FROM_C) >> (4u * e_)) & 15u]);
#endif

// The index matrix: element (r, c) of cm_idx_ holds r * CM_N + c (CM_IDX_INIT fills the shared
// table, all invocations, before a barrier), so that an invocation learns the row and column of
// each element it holds of any matrix of type MAT_C.
#define CM_IDX_INIT(tab_)                                                                      \
    for (uint i_ = gl_LocalInvocationID.x; i_ < CM_M * CM_N; i_ += NT)                         \
        tab_[i_] = float(i_);
#define CM_IDX_LOAD(m_, tab_) coopMatLoad(m_, tab_, 0u, CM_N, ROW_MAJOR)

// Makes a subgroup's shared-memory writes visible to its other lanes.
void subgroup_sync()
{
    subgroupMemoryBarrierShared();
    subgroupBarrier();
}
