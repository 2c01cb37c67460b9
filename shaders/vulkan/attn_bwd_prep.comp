// SPDX-License-Identifier: MIT
#version 450
// Backward, pass 1: Delta_i = sum_d dO[i,d] * O[i,d], and the LSE copied in log2 units, both into
// the workspace packed as (batch, heads_q, seq_q) f32, so the two later passes read them with one
// index. One invocation per query row; a workgroup covers 128 rows of one (head, batch).
#extension GL_GOOGLE_include_directive : require
#include "fa_common.glsl"

layout(local_size_x = 128) in;

TENSOR(0, o_buf)
TENSOR(1, do_buf)
layout(set = 0, binding = 2, std430) readonly buffer lse_block { float lse_buf[]; };
layout(set = 0, binding = 3, std430) writeonly buffer ws_block { float ws[]; };

layout(push_constant) uniform Params {
    uint o_off, o_sb, o_ss, o_sh;
    uint do_off, do_sb, do_ss, do_sh;
    uint lse_off, lse_sb, lse_ss, lse_sh;
    uint seq_q, heads_q, delta_off; // ws: lse2 at 0, delta at delta_off
} pc;

void main()
{
    const uint i = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
    if (i >= pc.seq_q)
        return;
    const uint ob = pc.o_off + b * pc.o_sb + h * pc.o_sh + i * pc.o_ss;
    const uint db = pc.do_off + b * pc.do_sb + h * pc.do_sh + i * pc.do_ss;
    float acc = 0.0;
    for (uint d = 0; d < D; d++)
        acc += LD(o_buf, ob + d) * LD(do_buf, db + d);
    const float lse = lse_buf[pc.lse_off + b * pc.lse_sb + h * pc.lse_sh + i * pc.lse_ss];
    const uint w = (b * pc.heads_q + h) * pc.seq_q + i;
    // log2 units; NaN from LSE_LIMIT on (flashattn.h: the f32 LSE no longer resolves P there)
    ws[w] = lse == neg_inf()        ? lse
            : abs(lse) < LSE_LIMIT ? lse * LOG2E
                                   : uintBitsToFloat(0x7fffffffu);
    ws[pc.delta_off + w] = acc;
}
