// SPDX-License-Identifier: MIT
// The backward's additive bias (BIAS), for the scalar passes (fa_backward.glsl) and the
// cooperative-matrix ones (fa_backward_cm.glsl), both of which declare the workspace ws and the
// push constants pc first: the bias as 32-bit words (fa_bias_value) at binding BWD_BIAS_BINDING,
// which the pass defines, element (b, i, h, j) at offset + b sb + i ss + h sh + j, its view
// written into the workspace after the slopes (bh_count of them where ALIBI).
layout(set = 0, binding = BWD_BIAS_BINDING, std430) readonly buffer bias_block {
    uint bias_words[];
};
// Element (b, m0, h, n0) of the bias and its query stride.
uvec2 bwd_bias_at(uint bh_count, uint b, uint h, uint m0, uint n0)
{
    if (BIAS == 0u)
        return uvec2(0u);
    const uint at = 2u * pc.delta_off + (ALIBI ? bh_count : 0u);
    const uint ss = floatBitsToUint(ws[at + 2u]);
    return uvec2(floatBitsToUint(ws[at]) + b * floatBitsToUint(ws[at + 1u]) +
                     h * floatBitsToUint(ws[at + 3u]) + m0 * ss + n0,
                 ss);
}
// The bias of query row r and key c from bwd_bias_at's element (only read inside the tile),
// times log2(e).
float bwd_bias(uvec2 at, uint r, uint c, bool inside)
{
    const uint e = at.x + r * at.y + c;
    return BIAS != 0u && inside ? fa_bias_value(bias_words[fa_bias_word(e)], e) * LOG2E : 0.0;
}
