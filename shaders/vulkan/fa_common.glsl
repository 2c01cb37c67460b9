// SPDX-License-Identifier: MIT
// Shared by every flashattn compute shader: the storage dtype layer and the common
// specialization constants.
//
// Storage dtype, chosen by one define per SPIR-V variant:
//   DTYPE_F32                  float buffers.
//   DTYPE_F16 / DTYPE_BF16 +   16-bit buffers (GL_EXT_shader_16bit_storage: loads, stores and
//     STORAGE16                conversions only, so no shaderFloat16 is needed).
//   DTYPE_F16 / DTYPE_BF16     32-bit words holding two elements, for devices without
//     (no STORAGE16)           storageBuffer16BitAccess; stores use atomicAnd/atomicOr on the
//                              word, so neighbouring invocations never clobber each other's half.
// All arithmetic is f32. bf16 converts by bit shifts (round to nearest even, NaN kept).
#extension GL_EXT_control_flow_attributes : enable
#extension GL_GOOGLE_include_directive : require
#include "fa_params.glsl"
#include "fa_spec_ids.h"

#if defined(DTYPE_F32)
#define STORE_T float
#elif defined(STORAGE16)
#extension GL_EXT_shader_16bit_storage : require
#if defined(DTYPE_F16)
#define STORE_T float16_t
#else
#define STORE_T uint16_t
#endif
#else
#define STORE_T uint
#endif

const float LOG2E = 1.4426950408889634;
const float LSE_LIMIT = 2097152.0; // FA_BACKWARD_LSE_LIMIT of flashattn.h
const float LN2 = 0.6931471805599453;

float neg_inf() { return uintBitsToFloat(0xff800000u); }

uint f32_to_bf16_bits(float v)
{
    uint u = floatBitsToUint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (u >> 16) | 0x40u;
    u += 0x7fffu + ((u >> 16) & 1u);
    return u >> 16;
}

float bits16_to_f32(uint bits)
{
#if defined(DTYPE_BF16)
    return uintBitsToFloat(bits << 16);
#else
    return unpackHalf2x16(bits).x;
#endif
}

uint f32_to_bits16(float v)
{
#if defined(DTYPE_BF16)
    return f32_to_bf16_bits(v);
#else
    return packHalf2x16(vec2(v, 0.0)) & 0xffffu;
#endif
}

// LD(buf, i): element i of a tensor buffer as f32. ST(buf, i, v): a statement storing f32 v.
#if defined(DTYPE_F32)
#define LD(buf, i) (buf[i])
#define ST(buf, i, v) buf[i] = (v)
#elif defined(STORAGE16) && defined(DTYPE_F16)
#define LD(buf, i) float(buf[i])
#define ST(buf, i, v) buf[i] = float16_t(v)
#elif defined(STORAGE16)
#define LD(buf, i) uintBitsToFloat(uint(buf[i]) << 16)
#define ST(buf, i, v) buf[i] = uint16_t(f32_to_bf16_bits(v))
#else
#define LD(buf, i) word_half(buf[(i) >> 1], (i))
#define ST(buf, i, v)                                                                          \
    {                                                                                          \
        uint i_ = (i);                                                                         \
        uint sh_ = (i_ & 1u) << 4;                                                             \
        atomicAnd(buf[i_ >> 1], ~(0xffffu << sh_));                                            \
        atomicOr(buf[i_ >> 1], f32_to_bits16(v) << sh_);                                       \
    }
float word_half(uint word, uint i)
{
    return bits16_to_f32((i & 1u) != 0u ? word >> 16 : word & 0xffffu);
}
#endif

#define TENSOR(binding_, name_)                                                                \
    layout(set = 0, binding = binding_, std430) buffer name_##_block { STORE_T name_[]; };

// Four elements at a time, i..i+3 with i % 4 == 0. TENSOR4(binding, name) declares, beside
// TENSOR's `name`, aliases of the same buffer: name##_v (RAW4: vec4 for f32, the two 32-bit words
// of four f16/bf16 elements otherwise, in either storage mode) and, for 16-bit dtypes, name##_w
// (single words). LD_RAW4(name, i, vec) returns the four elements in RAW4 form, as one 16- or
// 8-byte load when `vec` (the view's offset and strides are multiples of 4, so every group is
// aligned), else element by element; raw4_to_f32 converts them. ST4(name, i, x, vec) stores a
// vec4 the same way (whole words: no atomics needed, even without 16-bit storage).
#if defined(DTYPE_F32)
#define RAW4 vec4
#define TENSOR4(binding_, name_)                                                               \
    TENSOR(binding_, name_)                                                                    \
    layout(set = 0, binding = binding_, std430) buffer name_##_vblock { vec4 name_##_v[]; };
#define LD_RAW4(name_, i_, vec_)                                                               \
    ((vec_) ? name_##_v[(i_) >> 2]                                                             \
            : vec4(name_[i_], name_[(i_) + 1u], name_[(i_) + 2u], name_[(i_) + 3u]))
vec4 raw4_to_f32(vec4 x) { return x; }
vec4 f32_to_raw4(vec4 x) { return x; }
#else
#define RAW4 uvec2
#define TENSOR4(binding_, name_)                                                               \
    TENSOR(binding_, name_)                                                                    \
    layout(set = 0, binding = binding_, std430) buffer name_##_vblock { uvec2 name_##_v[]; };  \
    layout(set = 0, binding = binding_, std430) buffer name_##_wblock { uint name_##_w[]; };
#define BITS16(name_, i_) ((name_##_w[(i_) >> 1] >> (((i_) & 1u) << 4)) & 0xffffu)
#define LD_RAW4(name_, i_, vec_)                                                               \
    ((vec_) ? name_##_v[(i_) >> 2]                                                             \
            : uvec2(BITS16(name_, i_) | (BITS16(name_, (i_) + 1u) << 16),                      \
                    BITS16(name_, (i_) + 2u) | (BITS16(name_, (i_) + 3u) << 16)))
vec4 raw4_to_f32(uvec2 w)
{
#if defined(DTYPE_BF16)
    return uintBitsToFloat(uvec4(w.x << 16, w.x & 0xffff0000u, w.y << 16, w.y & 0xffff0000u));
#else
    return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
#endif
}
uvec2 f32_to_raw4(vec4 x)
{
#if defined(DTYPE_BF16)
    return uvec2(f32_to_bf16_bits(x.x) | (f32_to_bf16_bits(x.y) << 16),
                 f32_to_bf16_bits(x.z) | (f32_to_bf16_bits(x.w) << 16));
#else
    return uvec2(packHalf2x16(x.xy), packHalf2x16(x.zw));
#endif
}
#endif

// Eight 16-bit elements at a time (16-bit dtypes only): TENSOR8 declares, beside TENSOR4's
// names, name##_q (uvec4: elements i..i+7 of group i / 8). LD_RAW8(name, i, vec8, vec) returns
// the eight elements' bits (i % 8 == 0), as one 16-byte load when `vec8` (offset and strides are
// multiples of 8), else as two LD_RAW4.
#if !defined(DTYPE_F32)
#define TENSOR8(binding_, name_)                                                               \
    TENSOR4(binding_, name_)                                                                   \
    layout(set = 0, binding = binding_, std430) buffer name_##_qblock { uvec4 name_##_q[]; };
#define LD_RAW8(name_, i_, vec8_, vec_)                                                        \
    ((vec8_) ? name_##_q[(i_) >> 3]                                                            \
             : uvec4(LD_RAW4(name_, i_, vec_), LD_RAW4(name_, (i_) + 4u, vec_)))
#endif
#define ST4(name_, i_, x_, vec_)                                                               \
    {                                                                                          \
        const uint j_ = (i_);                                                                  \
        const vec4 y_ = (x_);                                                                  \
        if (vec_) {                                                                            \
            name_##_v[j_ >> 2] = f32_to_raw4(y_);                                              \
        } else {                                                                               \
            ST(name_, j_, y_.x);                                                               \
            ST(name_, j_ + 1u, y_.y);                                                          \
            ST(name_, j_ + 2u, y_.z);                                                          \
            ST(name_, j_ + 3u, y_.w);                                                          \
        }                                                                                      \
    }

// Specialization constants (set per pipeline by the host; defaults are only placeholders; IDs in
// fa_spec_ids.h). The common ones here; the backward's in fa_backward.glsl, the forward's in
// attn_fwd.comp, the matrix shaders' in fa_matrix.glsl.
#ifdef FA_FIXED_D // a compile-time head dim (the matrix catalogue, matrix_shaders.cmake)
const uint D = FA_FIXED_D;
#else
layout(constant_id = FA_SPEC_HEAD_DIM) const uint D = 64;     // head dim, a multiple of 8 up to 256
#endif
layout(constant_id = FA_SPEC_CAUSAL) const bool CAUSAL = false;
layout(constant_id = FA_SPEC_GQA) const uint GQA = 1;   // query heads per key/value head
// The variants (the matrix shaders take all but BIAS): a sliding window, logit softcapping, ALiBi.
layout(constant_id = FA_SPEC_WINDOW) const bool WINDOW = false;
layout(constant_id = FA_SPEC_SOFTCAP) const bool SOFTCAP = false;
layout(constant_id = FA_SPEC_ALIBI) const bool ALIBI = false;
// the additive bias's dtype: 0 none, 1 f32, 2 f16, 3 bf16 (fa_dtype's values)
layout(constant_id = FA_SPEC_BIAS) const uint BIAS = 0;

// The mask: the query whose diagonal is key qd (query i's is i + seq_k - seq_q) sees the keys
// qd - left .. qd + right, a bound of -1 being none; fa_left and fa_right take the pushed window
// bounds (FA_VARIANT_MEMBERS) and give constants where WINDOW is off.
int fa_left(int win_left) { return WINDOW ? win_left : -1; }
int fa_right(int win_right) { return CAUSAL ? 0 : WINDOW ? win_right : -1; }
bool fa_sees(int j, int qd, int left, int right)
{
    return (left < 0 || j >= qd - left) && (right < 0 || j <= qd + right);
}
// The keys [fa_keys_begin, fa_keys_end) within [0, seq_k) that queries whose diagonals lie in
// [qd_min, qd_max] may see (empty where begin >= end).
uint fa_keys_begin(int qd_min, int left) { return left < 0 ? 0u : uint(max(qd_min - left, 0)); }
uint fa_keys_end(int qd_max, int right, uint seq_k)
{
    return right < 0 ? seq_k : uint(clamp(qd_max + right + 1, 0, int(seq_k)));
}

// ALiBi: the bias -slope2 |qd - j| of key j for the query whose diagonal is key qd (slope2 the
// head's slope times log2(e)); 0 where ALIBI is off.
float fa_alibi(float slope2, int j, int qd) { return ALIBI ? -slope2 * float(abs(qd - j)) : 0.0; }

// BIAS: the value of element e of the bias from the 32-bit word that holds it (word e for f32,
// e / 2 for f16 and bf16, element e then in its low half where e is even): read as words, the bias
// needs neither 16-bit storage nor the call's dtype.
uint fa_bias_word(uint e) { return BIAS == 1u ? e : e >> 1u; }
float fa_bias_value(uint word, uint e)
{
    if (BIAS == 1u)
        return uintBitsToFloat(word);
    const uint bits = (e & 1u) != 0u ? word >> 16u : word & 0xffffu;
    return BIAS == 2u ? unpackHalf2x16(bits).x : uintBitsToFloat(bits << 16u);
}

// A raw score q.k in log2 units: q.k mul (mul: scale log2(e)), or with SOFTCAP
// cap_log2 tanh(x), x = q.k scale / softcap (mul: 2 log2(e) scale / softcap, so that q.k mul is
// the power's exponent below with no multiply of its own); slope is the softcap's 1 - tanh^2 (the
// backward's dS takes it), 1 without. tanh(x) = 1 - 2 r with r = 1 / (1 + 2^(2 log2(e) x)): no
// branch and no sign to restore, r saturates to 0 or 1 (the power reaching infinity or 0), NaN
// stays NaN; the absolute error is near 1e-7 (times the cap), relative accuracy near 0 not needed.
// One exit: spirv-opt (run before the driver specializes) wraps each inlined early return in a
// construct of its own, around every score of an unrolled loop.
float fa_score(float raw, float mul, float cap_log2, out float slope)
{
    float x = raw * mul;
    slope = 1.0;
    if (SOFTCAP) {
        const float r = 1.0 / (1.0 + exp2(x));
        slope = 4.0 * r * (1.0 - r);
        x = fma(-2.0 * cap_log2, r, cap_log2);
    }
    return x;
}
