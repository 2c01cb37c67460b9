// SPDX-License-Identifier: MIT
#version 450
// The decoding forward's merge: one workgroup per output row (query i, query head h, batch b)
// combines the chunks' normalised O and LSE (attn_decode.comp, in the workspace) exactly: with
// m the largest chunk LSE, O = sum_c w_c O_c / sum_c w_c and LSE = m + log(sum_c w_c), where
// w_c = exp(LSE_c - m). Chunks without a visible key (LSE = -inf) weigh 0; a row without any
// gets O = 0 and LSE = -inf.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_GOOGLE_include_directive : require
#include "fa_common.glsl"

layout(local_size_x = 128) in; // FA_VK_DECODE_THREADS
const uint NT = 128u;
const uint MAX_CHUNKS = 256u; // FA_MAX_SPLITS

layout(set = 0, binding = 0, std430) readonly buffer ws_block { float ws[]; };
layout(set = 0, binding = 0, std430) readonly buffer ws_vblock { vec4 ws_v[]; };
TENSOR4(1, o_buf)
layout(set = 0, binding = 2, std430) buffer lse_block { float lse_buf[]; };

layout(push_constant) uniform Params {
    uint o_off, o_sb, o_ss, o_sh;
    uint lse_off, lse_sb, lse_ss, lse_sh;
    uint seq_q, heads_q, chunks, ws_o_off, ws_lse_off, has_lse; // offsets in floats
} pc;

shared float w[MAX_CHUNKS];
shared float red[NT];

void main()
{
    const uint t = gl_LocalInvocationID.x;
    const uint i = gl_WorkGroupID.x, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
    const uint rows = gl_NumWorkGroups.z * pc.heads_q * pc.seq_q;
    const uint row = (b * pc.heads_q + h) * pc.seq_q + i;
    const float NEG_INF = neg_inf();

    float m = NEG_INF;
    for (uint c = t; c < pc.chunks; c += NT)
        m = max(m, ws[pc.ws_lse_off + c * rows + row]);
    m = subgroupMax(m);
    if (subgroupElect())
        red[gl_SubgroupID] = m;
    barrier();
    m = NEG_INF;
    for (uint k = 0u; k < gl_NumSubgroups; k++)
        m = max(m, red[k]);
    barrier(); // red is reused for the sums
    float sum = 0.0;
    for (uint c = t; c < pc.chunks; c += NT) {
        const float lse = ws[pc.ws_lse_off + c * rows + row];
        const float x = lse == NEG_INF ? 0.0 : exp(lse - m);
        w[c] = x;
        sum += x;
    }
    sum = subgroupAdd(sum);
    if (subgroupElect())
        red[gl_SubgroupID] = sum;
    barrier();
    sum = 0.0;
    for (uint k = 0u; k < gl_NumSubgroups; k++)
        sum += red[k];

    const uint DQ = D / 4u;
    const bool o4 = ((pc.o_off | pc.o_sb | pc.o_ss | pc.o_sh) & 3u) == 0u;
    const float inv = sum > 0.0 ? 1.0 / sum : 0.0;
    for (uint dq = t; dq < DQ; dq += NT) {
        vec4 acc = vec4(0.0);
        for (uint c = 0u; c < pc.chunks; c++)
            if (w[c] != 0.0)
                acc += w[c] * ws_v[pc.ws_o_off / 4u + (c * rows + row) * DQ + dq];
        ST4(o_buf, pc.o_off + b * pc.o_sb + h * pc.o_sh + i * pc.o_ss + 4u * dq, acc * inv, o4)
    }
    if (t == 0u && pc.has_lse != 0u)
        lse_buf[pc.lse_off + b * pc.lse_sb + h * pc.lse_sh + i * pc.lse_ss] =
            sum > 0.0 ? m + log(sum) : NEG_INF;
}
