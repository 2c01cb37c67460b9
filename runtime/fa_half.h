// SPDX-License-Identifier: MIT
/* f16, bf16 and FP8 e4m3 <-> f32 conversions by bit manipulation, round to nearest even, NaN
 * kept NaN. Header-only so that kernels can inline them into vectorized loops. */
#ifndef FA_HALF_H
#define FA_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t fa_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float fa_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float fa_bf16_to_f32(uint16_t h)
{
    return fa_bits_f32((uint32_t)h << 16);
}

static inline uint16_t fa_f32_to_bf16(float f)
{
    uint32_t u = fa_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float fa_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1fu)
        return fa_bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        /* zero or subnormal: value = man * 2^-24, exact in f32 */
        float v = (float)man * 5.9604644775390625e-08f;
        return sign ? -v : v;
    }
    return fa_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t fa_f32_to_f16(float f)
{
    uint32_t u = fa_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);
    if (abs >= 0x477ff000u) /* rounds to >= 65520: overflow to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (abs < 0x38800000u) {
        /* result is subnormal or zero: scale so that the f16 ulp (2^-24) becomes an integer
         * step, and let the FPU round to nearest even. */
        float v = fa_bits_f32(abs) * 16777216.0f;
        uint32_t r = (uint32_t)__builtin_rintf(v);
        return (uint16_t)(sign | r);
    }
    uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
    return (uint16_t)(sign | ((rounded - (112u << 23)) >> 13));
}

/* FP8 e4m3 as OCP and CUDA's __nv_fp8_e4m3 define it (PyTorch's float8_e4m3fn): sign, 4
 * exponent bits biased by 7, 3 mantissa bits; no infinities, S.1111.111 is NaN, 448 the largest
 * value, subnormals m * 2^-9. Every value is exact in f32, f16 and bf16. */
static inline float fa_e4m3_to_f32(uint8_t x)
{
    const uint32_t sign = (uint32_t)(x & 0x80u) << 24, exp = (x >> 3) & 0xfu, man = x & 7u;
    if ((x & 0x7fu) == 0x7fu)
        return fa_bits_f32(sign | 0x7fc00000u);
    if (exp == 0) {
        const float v = (float)man * 0.001953125f; /* 2^-9 */
        return sign ? -v : v;
    }
    return fa_bits_f32(sign | ((exp + 120u) << 23) | (man << 20));
}

/* Rounds to nearest even and saturates: a magnitude past 448, infinity included, gives +-448
 * (PTX's cvt.rn.satfinite), as FP8 quantization wants; NaN gives NaN. */
static inline uint8_t fa_f32_to_e4m3(float f)
{
    const uint32_t u = fa_f32_bits(f);
    const uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    const uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u)
        return (uint8_t)(sign | 0x7fu);
    if (abs >= 0x43e00000u) /* 448 and above */
        return (uint8_t)(sign | 0x7eu);
    if (abs < 0x3c800000u) /* below 2^-6: subnormal or zero, in steps of 2^-9 (8 is 2^-6) */
        return (uint8_t)(sign | (uint32_t)__builtin_rintf(fa_bits_f32(abs) * 512.0f));
    const uint32_t rounded = abs + 0x7ffffu + ((abs >> 20) & 1u);
    return (uint8_t)(sign | ((rounded - (120u << 23)) >> 20));
}

#endif
