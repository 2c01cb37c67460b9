#version 450
// The layout probe (backends/vulkan/vk_matrix_layout.c): one subgroup loads a CM_M x CM_N f32
// accumulator whose element (r, c) is r * CM_N + c and writes, per lane, what it holds:
// out[0] = the elements per lane, out[1 + lane * MAX_E + e] = element e's r * CM_N + c.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_GOOGLE_include_directive : require
#include "fa_spec_ids.h"

layout(constant_id = FA_SPEC_CM_M) const uint CM_M = 16;
layout(constant_id = FA_SPEC_CM_N) const uint CM_N = 16;
layout(local_size_x = 32, local_size_x_id = FA_SPEC_CM_WG) in; // one subgroup
const uint MAX_E = 64;

layout(set = 0, binding = 0, std430) buffer out_block { uint probe[]; };

shared float table[CM_M * CM_N];

void main()
{
    const uint lane = gl_SubgroupInvocationID;
    for (uint i = gl_LocalInvocationID.x; i < CM_M * CM_N; i += gl_WorkGroupSize.x)
        table[i] = float(i);
    barrier();
    coopmat<float, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator> m;
    coopMatLoad(m, table, 0u, CM_N, gl_CooperativeMatrixLayoutRowMajor);
    if (gl_LocalInvocationID.x == 0u)
        probe[0] = m.length();
    for (uint e = 0; e < m.length() && e < MAX_E; e++)
        probe[1u + lane * MAX_E + e] = uint(m[e]);
}
