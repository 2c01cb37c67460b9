// SPDX-License-Identifier: MIT
#version 450
// The layout probe (backends/vulkan/vk_matrix_layout.c): one subgroup loads a CM_M x CM_N f32
// accumulator whose element (r, c) is r * CM_N + c, and a CM_M x CM_K f16 A matrix whose element
// (r, c) is r * CM_K + c, and writes, per lane, what it holds of each:
// out[0], out[1] = the accumulator's and the A matrix's elements per lane (0: A not probed),
// out[2 + lane * MAX_E + e] = accumulator element e's r * CM_N + c,
// out[2 + (SG + lane) * MAX_E + e] = A element e's r * CM_K + c.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_GOOGLE_include_directive : require
#include "fa_spec_ids.h"

layout(constant_id = FA_SPEC_CM_M) const uint CM_M = 16;
layout(constant_id = FA_SPEC_CM_N) const uint CM_N = 16;
layout(constant_id = FA_SPEC_CM_K) const uint CM_K = 16;
layout(local_size_x = 32, local_size_x_id = FA_SPEC_CM_WG) in; // one subgroup
const uint MAX_E = 64;
const uint A_EXACT = 2048; // f16 holds the integers below it exactly

layout(set = 0, binding = 0, std430) buffer out_block { uint probe[]; };

shared float table[CM_M * CM_N];
shared float16_t table_a[CM_M * CM_K];

void main()
{
    const uint lane = gl_SubgroupInvocationID, sg = gl_SubgroupSize;
    for (uint i = gl_LocalInvocationID.x; i < CM_M * CM_N; i += gl_WorkGroupSize.x)
        table[i] = float(i);
    for (uint i = gl_LocalInvocationID.x; i < CM_M * CM_K; i += gl_WorkGroupSize.x)
        table_a[i] = float16_t(min(i, A_EXACT));
    barrier();
    coopmat<float, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator> m;
    coopMatLoad(m, table, 0u, CM_N, gl_CooperativeMatrixLayoutRowMajor);
    coopmat<float16_t, gl_ScopeSubgroup, CM_M, CM_K, gl_MatrixUseA> a;
    coopMatLoad(a, table_a, 0u, CM_K, gl_CooperativeMatrixLayoutRowMajor);
    if (gl_LocalInvocationID.x == 0u) {
        probe[0] = m.length();
        probe[1] = CM_M * CM_K <= A_EXACT ? a.length() : 0u;
    }
    for (uint e = 0; e < m.length() && e < MAX_E; e++)
        probe[2u + lane * MAX_E + e] = uint(m[e]);
    for (uint e = 0; e < a.length() && e < MAX_E; e++)
        probe[2u + (sg + lane) * MAX_E + e] = uint(float(a[e]));
}
