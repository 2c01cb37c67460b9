// SPDX-License-Identifier: MIT
/* Compiles cpu_kernels_impl.h once per instruction set and picks one at run time. On x86-64
 * with GCC or Clang: AVX-512 (8 x 32 micro-kernel), AVX2 + FMA + F16C (6 x 16), and a baseline
 * (3 x 16 on SSE2). Elsewhere only the baseline, written so the compiler vectorizes it. */
#include "cpu_kernels.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "fa_half.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define FA_CPU_X86_SETS 1
#include <cpuid.h>
#include <immintrin.h>
#endif

/* ---- baseline: the build's own target ---------------------------------------------------- */
#define CK_NAME(x) fa_cpu_##x##_generic
#define CK_NAME_STRING "generic"
#define CK_VW 4
#define CK_NV 4
#define CK_ROWS 3
#define CK_VFMA(c, a, b) ((c) + (a) * (b))
#define CK_VFMAV(c, a, b) ((c) + (a) * (b))
#define CK_FMAF(a, b, c) ((a) * (b) + (c))
#include "cpu_kernels_impl.h"
#undef CK_NAME
#undef CK_NAME_STRING
#undef CK_VW
#undef CK_NV
#undef CK_ROWS
#undef CK_VFMA
#undef CK_VFMAV
#undef CK_FMAF

#if FA_CPU_X86_SETS
/* ---- AVX2 + FMA ---------------------------------------------------------------------------- */
#if defined(__clang__) /* Clang ignores GCC's target pragma */
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
#define CK_NAME(x) fa_cpu_##x##_avx2
#define CK_F16_LOAD(s) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s)))
#define CK_U8_LOAD(s) _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(s)))
#define CK_HSUM(v) fa_cpu_avx2_lane_sum(v)
#define CK_NAME_STRING "avx2"
#define CK_VW 8
#define CK_NV 2
#define CK_ROWS 6
#define CK_VFMA(c, a, b) _mm256_fmadd_ps(_mm256_set1_ps(a), (b), (c))
#define CK_VFMAV(c, a, b) _mm256_fmadd_ps((a), (b), (c))
#define CK_FMAF(a, b, c) __builtin_fmaf((a), (b), (c))
#define CK_SUM4(a, b, c, d, dst) fa_cpu_avx2_sum4((a), (b), (c), (d), (dst))
static inline float fa_cpu_avx2_lane_sum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
/* dst[0..3] = the sums of a, b, c and d's elements. */
static inline void fa_cpu_avx2_sum4(__m256 a, __m256 b, __m256 c, __m256 d, float *dst)
{
    const __m256 ab = _mm256_hadd_ps(a, b), cd = _mm256_hadd_ps(c, d);
    const __m256 x = _mm256_hadd_ps(ab, cd); /* per 128-bit half: a, b, c, d partial sums */
    _mm_storeu_ps(dst, _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1)));
}
#include "cpu_kernels_impl.h"
#undef CK_NAME
#undef CK_NAME_STRING
#undef CK_VW
#undef CK_NV
#undef CK_ROWS
#undef CK_VFMA
#undef CK_VFMAV
#undef CK_FMAF
#undef CK_F16_LOAD
#undef CK_U8_LOAD
#undef CK_HSUM
#undef CK_SUM4
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

/* ---- AVX-512F -------------------------------------------------------------------------------- */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,fma,prefer-vector-width=512")
#endif
#define CK_NAME(x) fa_cpu_##x##_avx512
#define CK_F16_LOAD(s) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s)))
#define CK_U8_LOAD(s) _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(s)))
#define CK_HSUM(v) _mm512_reduce_add_ps(v)
#define CK_SUM4(a, b, c, d, dst) fa_cpu_avx512_sum4((a), (b), (c), (d), (dst))
#define CK_NAME_STRING "avx512"
#define CK_VW 16
#define CK_NV 2
#define CK_ROWS 8
#define CK_VFMA(c, a, b) _mm512_fmadd_ps(_mm512_set1_ps(a), (b), (c))
#define CK_VFMAV(c, a, b) _mm512_fmadd_ps((a), (b), (c))
#define CK_FMAF(a, b, c) __builtin_fmaf((a), (b), (c))
/* dst[0..3] = the sums of a, b, c and d's elements: pairs of rows interleaved and added within
 * each 128-bit lane, then the four lanes added. */
static inline void fa_cpu_avx512_sum4(__m512 a, __m512 b, __m512 c, __m512 d, float *dst)
{
    const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
    const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
    const __m512 x =
        _mm512_add_ps(_mm512_shuffle_ps(ab, cd, 0x44), _mm512_shuffle_ps(ab, cd, 0xee));
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1));
    const __m256 y = _mm256_add_ps(_mm512_castps512_ps256(x), hi);
    _mm_storeu_ps(dst, _mm_add_ps(_mm256_castps256_ps128(y), _mm256_extractf128_ps(y, 1)));
}
#include "cpu_kernels_impl.h"
#undef CK_NAME
#undef CK_NAME_STRING
#undef CK_VW
#undef CK_NV
#undef CK_ROWS
#undef CK_VFMA
#undef CK_VFMAV
#undef CK_FMAF
#undef CK_F16_LOAD
#undef CK_U8_LOAD
#undef CK_HSUM
#undef CK_SUM4
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif

#if FA_CPU_X86_SETS
/* F16C from CPUID (Clang's __builtin_cpu_supports does not know it). */
static bool has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

int fa_cpu_kernels_available(const fa_cpu_kernels **sets, int max)
{
    int n = 0;
#if FA_CPU_X86_SETS
    __builtin_cpu_init();
    if (n < max && __builtin_cpu_supports("avx512f"))
        sets[n++] = &fa_cpu_kernels_avx512;
    if (n < max && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c())
        sets[n++] = &fa_cpu_kernels_avx2;
#endif
    if (n < max)
        sets[n++] = &fa_cpu_kernels_generic;
    return n;
}

const fa_cpu_kernels *fa_cpu_kernels_select(void)
{
    const fa_cpu_kernels *best;
    fa_cpu_kernels_available(&best, 1);
    return best;
}
