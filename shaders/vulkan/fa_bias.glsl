// SPDX-License-Identifier: MIT
// The additive bias (BIAS) of the forwards and the backward passes, scalar and matrix: the bias as
// 32-bit words (fa_bias_value) at binding FA_BIAS_BINDING, element (b, i, h, j) at
// offset + b sb + i ss + h sh + j. Its view (offset, batch, query and head strides as uint bits)
// lies in a float buffer after ALiBi's slopes (bh_count of them where ALIBI; vk_attention.c): the
// including shader defines FA_BIAS_BINDING and FA_BIAS_VIEW(i), word i of that part of the buffer.
layout(set = 0, binding = FA_BIAS_BINDING, std430) readonly buffer bias_block {
    uint bias_words[];
};
// Element (b, m0, h, n0) of the bias and its query stride (one exit, as fa_score).
uvec2 fa_bias_at(uint bh_count, uint b, uint h, uint m0, uint n0)
{
    uvec2 at_ss = uvec2(0u);
    if (BIAS != 0u) {
        const uint at = ALIBI ? bh_count : 0u;
        const uint ss = floatBitsToUint(FA_BIAS_VIEW(at + 2u));
        at_ss = uvec2(floatBitsToUint(FA_BIAS_VIEW(at)) + b * floatBitsToUint(FA_BIAS_VIEW(at + 1u)) +
                          h * floatBitsToUint(FA_BIAS_VIEW(at + 3u)) + m0 * ss + n0,
                      ss);
    }
    return at_ss;
}
// The bias of query row r and key c from fa_bias_at's element (read only where inside), times
// log2(e).
float fa_bias(uvec2 at, uint r, uint c, bool inside)
{
    const uint e = at.x + r * at.y + c;
    return BIAS != 0u && inside ? fa_bias_value(bias_words[fa_bias_word(e)], e) * LOG2E : 0.0;
}
