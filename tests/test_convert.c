// SPDX-License-Identifier: MIT
/* fa_convert: every f16 and bf16 value round trips through f32, f32 rounds to the nearest
 * representable value (ties to even), overflow and NaN follow IEEE, and bad arguments get their
 * statuses. */
#include <criterion/criterion.h>
#include <flashattn.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static float to_f32(fa_dtype from, uint16_t h)
{
    float f;
    cr_assert_eq(fa_convert(FA_DTYPE_F32, &f, from, &h, 1), FA_OK);
    return f;
}

static uint16_t from_f32(fa_dtype to, float f)
{
    uint16_t h;
    cr_assert_eq(fa_convert(to, &h, FA_DTYPE_F32, &f, 1), FA_OK);
    return h;
}

static bool is_nan_bits(fa_dtype d, uint16_t h)
{
    return d == FA_DTYPE_F16 ? (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu)
                             : (h & 0x7f80u) == 0x7f80u && (h & 0x7fu);
}

Test(convert, every_16_bit_value_round_trips_through_f32)
{
    const fa_dtype dtypes[2] = {FA_DTYPE_F16, FA_DTYPE_BF16};
    for (int d = 0; d < 2; d++)
        for (uint32_t h = 0; h < 65536; h++) {
            const float f = to_f32(dtypes[d], (uint16_t)h);
            const uint16_t back = from_f32(dtypes[d], f);
            if (is_nan_bits(dtypes[d], (uint16_t)h))
                cr_assert(isnan(f) && is_nan_bits(dtypes[d], back), "%s 0x%04x",
                          fa_dtype_name(dtypes[d]), h);
            else
                cr_assert_eq(back, h, "%s 0x%04x -> %a -> 0x%04x", fa_dtype_name(dtypes[d]), h,
                             (double)f, back);
        }
    cr_assert_eq(to_f32(FA_DTYPE_F16, 0x0001), 0x1p-24f); /* the smallest subnormal */
    cr_assert_eq(to_f32(FA_DTYPE_F16, 0x7bff), 65504.0f);
    cr_assert_eq(to_f32(FA_DTYPE_BF16, 0x3f80), 1.0f);
}

/* Whether h is the nearest value of its dtype to x, ties going to the even mantissa: neither
 * neighbour (h - 1, h + 1 in the same sign) is nearer, and at a tie h is even. */
static void check_nearest(fa_dtype d, float x, uint16_t h)
{
    const double v = to_f32(d, h), e = fabs((double)x - v);
    for (int step = -1; step <= 1; step += 2) {
        const uint16_t n = (uint16_t)(h + step);
        if ((n & 0x7fffu) == 0x7fffu || ((n ^ h) & 0x8000u))
            continue;
        const double w = to_f32(d, n), en = fabs((double)x - w);
        if (isinf(w) || isnan(w))
            continue;
        cr_assert(e <= en, "%s: %a -> 0x%04x, but 0x%04x is nearer", fa_dtype_name(d), (double)x, h,
                  n);
        if (e == en)
            cr_assert_eq(h & 1u, 0u, "%s: tie at %a went to the odd 0x%04x", fa_dtype_name(d),
                         (double)x, h);
    }
}

Test(convert, f32_rounds_to_the_nearest_ties_to_even)
{
    srand(7);
    for (int i = 0; i < 200000; i++) {
        const uint32_t bits = ((uint32_t)rand() << 16) ^ (uint32_t)rand();
        float x;
        memcpy(&x, &bits, sizeof x);
        if (!isfinite(x))
            continue;
        const uint16_t b = from_f32(FA_DTYPE_BF16, x);
        if (!isinf(to_f32(FA_DTYPE_BF16, b)))
            check_nearest(FA_DTYPE_BF16, x, b);
        /* the same mantissa at an exponent across f16's range, subnormals included */
        const int exponent = (int)((bits >> 23) & 0xffu), target = 100 + rand() % 44;
        const float small = ldexpf(x, target - exponent);
        if (!isfinite(small) || fabsf(small) >= 65504.0f)
            continue;
        check_nearest(FA_DTYPE_F16, small, from_f32(FA_DTYPE_F16, small));
    }
    /* ties: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10 (even: 1) */
    cr_assert_eq(from_f32(FA_DTYPE_F16, 1.0f + 0x1p-11f), 0x3c00);
    cr_assert_eq(from_f32(FA_DTYPE_F16, 1.0f + 3 * 0x1p-11f), 0x3c02);
    cr_assert_eq(from_f32(FA_DTYPE_BF16, 1.0f + 0x1p-8f), 0x3f80);
}

Test(convert, overflow_nan_and_f16_bf16_directly)
{
    cr_assert_eq(from_f32(FA_DTYPE_F16, 65519.0f), 0x7bff);
    cr_assert_eq(from_f32(FA_DTYPE_F16, 65520.0f), 0x7c00); /* rounds past the largest */
    cr_assert_eq(from_f32(FA_DTYPE_F16, -1e30f), 0xfc00);
    cr_assert(is_nan_bits(FA_DTYPE_F16, from_f32(FA_DTYPE_F16, NAN)));
    cr_assert(is_nan_bits(FA_DTYPE_BF16, from_f32(FA_DTYPE_BF16, NAN)));
    cr_assert_eq(from_f32(FA_DTYPE_BF16, INFINITY), 0x7f80);
    /* f16 -> bf16 in one call rounds once: 1 + 2^-10 (f16 0x3c01) is a bf16 tie, to even 1 */
    const uint16_t f16[3] = {0x3c01, 0x3c03, 0xc000};
    uint16_t bf16[3];
    cr_assert_eq(fa_convert(FA_DTYPE_BF16, bf16, FA_DTYPE_F16, f16, 3), FA_OK);
    cr_assert_eq(bf16[0], 0x3f80);
    cr_assert_eq(bf16[1], 0x3f80); /* 1 + 3 2^-10 is below the halfway 1 + 2^-8 */
    cr_assert_eq(bf16[2], 0xc000);
}

Test(convert, arguments)
{
    float f[4] = {1, 2, 3, 4};
    uint16_t h[8];
    int32_t i[4] = {0};
    cr_assert_eq(fa_convert(FA_DTYPE_I32, i, FA_DTYPE_F32, f, 4), FA_ERROR_UNSUPPORTED_DTYPE);
    cr_assert_eq(fa_convert(FA_DTYPE_F16, h, FA_DTYPE_INVALID, f, 4), FA_ERROR_UNSUPPORTED_DTYPE);
    cr_assert_eq(fa_convert(FA_DTYPE_F16, NULL, FA_DTYPE_F32, f, 4), FA_ERROR_NULL_POINTER);
    cr_assert_eq(fa_convert(FA_DTYPE_F16, h, FA_DTYPE_F32, NULL, 4), FA_ERROR_NULL_POINTER);
    cr_assert_eq(fa_convert(FA_DTYPE_F16, NULL, FA_DTYPE_F32, NULL, 0), FA_OK);
    /* f32 -> f16 into its own second half overlaps what is still to be read */
    cr_assert_eq(fa_convert(FA_DTYPE_F16, (char *)f + 2, FA_DTYPE_F32, f, 4),
                 FA_ERROR_INVALID_ARGUMENT);
    cr_assert_eq(f[0], 1.0f, "nothing written on failure");
    /* element for element in place */
    cr_assert_eq(fa_convert(FA_DTYPE_F16, h, FA_DTYPE_F32, f, 4), FA_OK);
    cr_assert_eq(fa_convert(FA_DTYPE_BF16, h, FA_DTYPE_F16, h, 4), FA_OK);
    cr_assert_eq(h[3], 0x4080); /* 4 in bf16 */
    cr_assert_eq(fa_convert(FA_DTYPE_F32, f, FA_DTYPE_F32, f, 4), FA_OK);
}
