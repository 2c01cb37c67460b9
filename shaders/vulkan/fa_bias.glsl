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
// The workgroup's ID as the shader uses it: gl_WorkGroupID, but where every batch entry or every
// head reads the same bias (a zero stride), the workgroups that read the same bias tiles get
// neighbouring IDs (the shared index fastest, then x, then the rest). Neighbouring IDs run at the
// same time, so each bias tile comes from memory once and from L2 for the others, instead of once
// per batch entry or head. Any permutation of the IDs is a valid schedule.
uvec3 fa_bias_order(uint bh_count)
{
    uvec3 id = gl_WorkGroupID;
    if (BIAS != 0u) {
        const uint at = ALIBI ? bh_count : 0u;
        const uvec3 n = gl_NumWorkGroups;
        const bool by_b = n.z > 1u && floatBitsToUint(FA_BIAS_VIEW(at + 1u)) == 0u;
        const bool by_h = n.y > 1u && floatBitsToUint(FA_BIAS_VIEW(at + 3u)) == 0u;
        if (by_b || by_h) {
            uint f = id.x + n.x * (id.y + n.y * id.z);
            if (by_b) {
                id.z = f % n.z;
                f /= n.z;
            }
            if (by_h) {
                id.y = f % n.y;
                f /= n.y;
            }
            id.x = f % n.x;
            f /= n.x;
            if (!by_h) {
                id.y = f % n.y;
                f /= n.y;
            }
            if (!by_b)
                id.z = f;
        }
    }
    return id;
}
// The bias of query row r and key c from fa_bias_at's element (read only where inside), times
// log2(e).
float fa_bias(uvec2 at, uint r, uint c, bool inside)
{
    const uint e = at.x + r * at.y + c;
    return BIAS != 0u && inside ? fa_bias_value(bias_words[fa_bias_word(e)], e) * LOG2E : 0.0;
}

#ifdef MAT_C
// The matrix shaders' whole blocks: where an f32 or f16 bias's view has its offset and query
// stride in multiples of 16 bytes (coopMatLoad's alignment) and a nonzero query stride, a block of
// the accumulator's shape whose rows and keys are all inside comes in one coopMatLoad (the key
// stride is 1) instead of a read per element; bf16, unaligned views and the tiles' edges read per
// element. fa_bias_blocks(at) takes fa_bias_at's result.
bool fa_bias_blocks(uvec2 at)
{
    const uint unit = BIAS == 1u ? 4u : 8u; // elements in 16 bytes
    return (BIAS == 1u || BIAS == 2u) && at.y != 0u && ((at.x | at.y) & (unit - 1u)) == 0u;
}
// m_ (MAT_C) = the block whose first element is e_ (an element index), stride_ elements between
// its rows (ROW_MAJOR) or columns (COL_MAJOR), in the bias's units (the caller multiplies each
// element by log2(e): spirv-opt v2023.5 crashes folding on a sum of two matrices);
// only where fa_bias_blocks.
#define FA_BIAS_BLOCK(m_, e_, stride_, layout_)                                                \
    {                                                                                          \
        if (BIAS == 1u) {                                                                      \
            coopMatLoad(m_, bias_words, (e_), (stride_), layout_);                             \
        } else {                                                                               \
            MAT_H h_;                                                                          \
            FA_BIAS_BLOCK_F16(h_, e_, stride_, layout_)                                        \
            m_ = MAT_C(h_);                                                                    \
        }                                                                                      \
    }
// The same block of an f16 bias (BIAS == 2) into an f16 matrix h_ (MAT_H), unconverted.
#define FA_BIAS_BLOCK_F16(h_, e_, stride_, layout_)                                            \
    coopMatLoad(h_, bias_words, (e_) >> 1u, (stride_) >> 1u, layout_);
#endif
