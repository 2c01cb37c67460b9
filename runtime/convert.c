// SPDX-License-Identifier: MIT
/* fa_convert: host conversions between f32, f16, bf16 and e4m3 (flashattn.h), through fa_half.h,
 * the same rounding the backends use. */
#include "fa_half.h"
#include "fa_internal.h"

#include <stdint.h>
#include <string.h>

static bool is_float_dtype(fa_dtype d)
{
    return d == FA_DTYPE_F32 || d == FA_DTYPE_F16 || d == FA_DTYPE_BF16 || d == FA_DTYPE_E4M3;
}

static float load_f32(fa_dtype from, const void *src, size_t i)
{
    if (from == FA_DTYPE_F32) {
        float f;
        memcpy(&f, (const char *)src + 4 * i, sizeof f);
        return f;
    }
    if (from == FA_DTYPE_E4M3)
        return fa_e4m3_to_f32(((const uint8_t *)src)[i]);
    uint16_t h;
    memcpy(&h, (const char *)src + 2 * i, sizeof h);
    return from == FA_DTYPE_F16 ? fa_f16_to_f32(h) : fa_bf16_to_f32(h);
}

static void store_f32(fa_dtype to, void *dst, size_t i, float f)
{
    if (to == FA_DTYPE_F32) {
        memcpy((char *)dst + 4 * i, &f, sizeof f);
        return;
    }
    if (to == FA_DTYPE_E4M3) {
        ((uint8_t *)dst)[i] = fa_f32_to_e4m3(f);
        return;
    }
    const uint16_t h = to == FA_DTYPE_F16 ? fa_f32_to_f16(f) : fa_f32_to_bf16(f);
    memcpy((char *)dst + 2 * i, &h, sizeof h);
}

fa_status fa_convert(fa_dtype to, void *dst, fa_dtype from, const void *src, size_t count)
{
    if (!is_float_dtype(to) || !is_float_dtype(from))
        return FA_ERROR_UNSUPPORTED_DTYPE;
    if (count == 0)
        return FA_OK;
    if (!dst || !src)
        return FA_ERROR_NULL_POINTER;
    const size_t to_size = fa_dtype_size(to), from_size = fa_dtype_size(from);
    if (count > SIZE_MAX / 4)
        return FA_ERROR_SIZE_OVERFLOW;
    /* In place only element for element (the same pointer and element size); any other overlap
     * would read elements already overwritten. */
    const uintptr_t d0 = (uintptr_t)dst, s0 = (uintptr_t)src;
    const bool overlap = d0 < s0 + count * from_size && s0 < d0 + count * to_size;
    if (overlap && !(d0 == s0 && to_size == from_size))
        return FA_ERROR_INVALID_ARGUMENT;
    if (to == from) {
        if (dst != src)
            memcpy(dst, src, count * to_size);
        return FA_OK;
    }
    for (size_t i = 0; i < count; i++)
        store_f32(to, dst, i, load_f32(from, src, i));
    return FA_OK;
}
