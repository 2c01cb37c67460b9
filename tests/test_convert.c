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

static float e4m3_f32(uint8_t x)
{
    float f;
    cr_assert_eq(fa_convert(FA_DTYPE_F32, &f, FA_DTYPE_E4M3, &x, 1), FA_OK);
    return f;
}

static uint8_t f32_e4m3(float f)
{
    uint8_t x;
    cr_assert_eq(fa_convert(FA_DTYPE_E4M3, &x, FA_DTYPE_F32, &f, 1), FA_OK);
    return x;
}

/* The e4m3 value of bits x from its definition: (1 + m/8) 2^(e-7), subnormals m 2^-9. */
static double e4m3_defined(uint8_t x)
{
    const int e = (x >> 3) & 15, m = x & 7;
    const double v = e ? ldexp(1.0 + m / 8.0, e - 7) : ldexp(m, -9);
    return x & 0x80 ? -v : v;
}

Test(convert, e4m3_every_value_and_its_round_trips)
{
    for (uint32_t x = 0; x < 256; x++) {
        const float f = e4m3_f32((uint8_t)x);
        if ((x & 0x7f) == 0x7f) {
            cr_assert(isnan(f), "0x%02x is NaN", x);
            cr_assert_eq(f32_e4m3(f) & 0x7f, 0x7f);
            continue;
        }
        cr_assert_eq((double)f, e4m3_defined((uint8_t)x), "0x%02x -> %a", x, (double)f);
        cr_assert_eq(f32_e4m3(f), x, "0x%02x round trip through f32", x);
        /* through f16 and bf16, which hold every e4m3 value exactly */
        const fa_dtype wide[2] = {FA_DTYPE_F16, FA_DTYPE_BF16};
        for (int w = 0; w < 2; w++) {
            uint16_t h;
            uint8_t back;
            const uint8_t in = (uint8_t)x;
            cr_assert_eq(fa_convert(wide[w], &h, FA_DTYPE_E4M3, &in, 1), FA_OK);
            cr_assert_eq(to_f32(wide[w], h), f);
            cr_assert_eq(fa_convert(FA_DTYPE_E4M3, &back, wide[w], &h, 1), FA_OK);
            cr_assert_eq(back, x, "0x%02x round trip through %s", x, fa_dtype_name(wide[w]));
        }
    }
    cr_assert_eq(e4m3_f32(0x7e), 448.0f);
    cr_assert_eq(e4m3_f32(0x38), 1.0f);
    cr_assert_eq(e4m3_f32(0x01), 0x1p-9f);
    cr_assert_eq(e4m3_f32(0x08), 0x1p-6f);
}

Test(convert, e4m3_rounds_to_the_nearest_ties_to_even_and_saturates)
{
    srand(11);
    for (int i = 0; i < 200000; i++) {
        /* magnitudes from 2^-12 to 2^9, both signs */
        const float x = (rand() & 1 ? -1.0f : 1.0f) *
                        ldexpf(1.0f + (float)rand() / RAND_MAX, -12 + rand() % 21);
        const uint8_t got = f32_e4m3(x);
        if (fabsf(x) >= 448.0f) {
            cr_assert_eq(got, x < 0 ? 0xfe : 0x7e, "%a saturates", (double)x);
            continue;
        }
        /* no finite value is nearer; at a tie with another value, the mantissa is even */
        const double got_err = fabs((double)x - e4m3_defined(got));
        for (int y = 0; y < 256; y++) {
            if ((y & 0x7f) == 0x7f || e4m3_defined((uint8_t)y) == e4m3_defined(got))
                continue;
            const double err = fabs((double)x - e4m3_defined((uint8_t)y));
            cr_assert(got_err <= err, "%a -> 0x%02x, but 0x%02x is nearer", (double)x, got, y);
            if (got_err == err)
                cr_assert_eq(got & 1u, 0u, "%a: tie went to the odd 0x%02x", (double)x, got);
        }
    }
    cr_assert_eq(f32_e4m3(1.0f + 0x1p-4f), 0x38); /* halfway between 1 and 1.125: even, 1 */
    cr_assert_eq(f32_e4m3(1.0f + 3 * 0x1p-4f), 0x3a);
    cr_assert_eq(f32_e4m3(0x1p-10f), 0x00);     /* halfway to the smallest subnormal: even, 0 */
    cr_assert_eq(f32_e4m3(3 * 0x1p-10f), 0x02); /* halfway between 2^-9 and 2^-8: even */
    cr_assert_eq(f32_e4m3(464.0f), 0x7e);       /* past 448: saturated, not NaN */
    cr_assert_eq(f32_e4m3(-INFINITY), 0xfe);
    cr_assert_eq(f32_e4m3(-0.0f), 0x80);
}
