// SPDX-License-Identifier: MIT
/* The body of one kernel set, included by cpu_kernels.c once per instruction set with:
 *   CK_NAME(x)      a name with the set's suffix
 *   CK_VW           floats per native vector (16 AVX-512, 8 AVX2, 4 otherwise)
 *   CK_NV           vectors per micro-kernel row (its width is CK_VW * CK_NV columns)
 *   CK_ROWS         rows per micro-kernel
 *   CK_VFMA(c,a,b)  c + a * b on vectors, a a float, fused where the set has FMA
 *   CK_VFMAV(c,a,b) c + a * b on vectors, fused where the set has FMA
 *   CK_FMAF(a,b,c)  a * b + c on floats, fused where the set has FMA
 *   CK_F16_LOAD(s)  (optional) CK_VW f16 at s as an f32 vector, by the hardware (F16C)
 *   CK_U8_LOAD(s)   (optional) CK_VW bytes at s zero-extended to 32-bit lanes, in one load
 *   CK_HSUM(v)      (optional) the sum of a vector's elements
 * No include guard on purpose. */

typedef float CK_NAME(vec) __attribute__((vector_size(CK_VW * 4)));
typedef float CK_NAME(vec_u) __attribute__((vector_size(CK_VW * 4), aligned(4)));

/* The micro-kernel: an r x (nv * CK_VW) block of C held in registers while it walks k, one
 * row of B (nv vectors) and r broadcasts of A per step. Inlined with constant r and nv, so the
 * accumulator arrays become registers: 8 x 2 zmm on AVX-512, 6 x 2 ymm on AVX2. */
static inline __attribute__((always_inline)) void
CK_NAME(gemm_block)(const int r, const int nv, int k, const float *restrict a, int64_t a_row,
                    int64_t a_col, const float *restrict b, int64_t ldb, float *restrict c,
                    int64_t ldc, fa_cpu_gemm_mode mode, const float *alpha)
{
    CK_NAME(vec) acc[CK_ROWS][CK_NV];
    for (int i = 0; i < r; i++)
        for (int v = 0; v < nv; v++)
            acc[i][v] = (CK_NAME(vec)){0};
    for (int p = 0; p < k; p++) {
        CK_NAME(vec) bv[CK_NV];
        for (int v = 0; v < nv; v++)
            bv[v] = *(const CK_NAME(vec_u) *)(b + p * ldb + v * CK_VW);
        const float *ap = a + p * a_col;
        for (int i = 0; i < r; i++) {
            float s = ap[i * a_row];
            for (int v = 0; v < nv; v++)
                acc[i][v] = CK_VFMA(acc[i][v], s, bv[v]);
        }
    }
    for (int i = 0; i < r; i++) {
        for (int v = 0; v < nv; v++) {
            CK_NAME(vec_u) *cp = (CK_NAME(vec_u) *)(c + i * ldc + v * CK_VW);
            if (mode == FA_CPU_GEMM_SET)
                *cp = acc[i][v];
            else if (mode == FA_CPU_GEMM_ADD)
                *cp = *cp + acc[i][v];
            else
                *cp = CK_VFMA(acc[i][v], alpha[i], *cp);
        }
    }
}

#define CK_BLOCK_CASE(rows, nv)                                                                    \
    case rows:                                                                                     \
        CK_NAME(gemm_block)(rows, nv, k, ap, a_row, a_col, bp, ldb, cp, ldc, mode, al);            \
        break;

/* Dispatches each block to an instance with constant rows (1..CK_ROWS) and width. */
#define CK_BLOCK_SWITCH(nv)                                                                        \
    switch (rows) {                                                                                \
        CK_BLOCK_CASE(1, nv)                                                                       \
        CK_BLOCK_CASE(2, nv)                                                                       \
        CK_BLOCK_CASE(3, nv)                                                                       \
        CK_BLOCK_CASE_4_TO_8(nv)                                                                   \
    }

#if CK_ROWS == 8
#define CK_BLOCK_CASE_4_TO_8(nv)                                                                   \
    CK_BLOCK_CASE(4, nv)                                                                           \
    CK_BLOCK_CASE(5, nv) CK_BLOCK_CASE(6, nv) CK_BLOCK_CASE(7, nv) CK_BLOCK_CASE(8, nv)
#elif CK_ROWS == 6
#define CK_BLOCK_CASE_4_TO_8(nv) CK_BLOCK_CASE(4, nv) CK_BLOCK_CASE(5, nv) CK_BLOCK_CASE(6, nv)
#elif CK_ROWS == 3
#define CK_BLOCK_CASE_4_TO_8(nv)
#else
#error "CK_ROWS must be 3, 6 or 8"
#endif

/* Column panels of B outermost, so that one panel (k x CK_VW * CK_NV floats) stays in L1 while
 * every row block of A streams past it. */
static void CK_NAME(gemm)(int m, int n, int k, const float *a, int64_t a_row, int64_t a_col,
                          const float *b, int64_t ldb, float *c, int64_t ldc, fa_cpu_gemm_mode mode,
                          const float *alpha)
{
    const int width = CK_VW * CK_NV;
    for (int n0 = 0; n0 < n; n0 += width) {
        /* n is a multiple of FA_CPU_PAD (16), so a short last panel is whole vectors */
        int nv = n - n0 >= width ? CK_NV : (n - n0) / CK_VW;
        for (int m0 = 0; m0 < m; m0 += CK_ROWS) {
            int rows = m - m0 < CK_ROWS ? m - m0 : CK_ROWS;
            const float *ap = a + m0 * a_row;
            const float *bp = b + n0;
            float *cp = c + (int64_t)m0 * ldc + n0;
            const float *al = alpha ? alpha + m0 : NULL;
            if (nv == CK_NV) {
                CK_BLOCK_SWITCH(CK_NV)
            } else {
                CK_BLOCK_SWITCH(1)
            }
        }
    }
}

#undef CK_BLOCK_CASE_4_TO_8
#undef CK_BLOCK_SWITCH
#undef CK_BLOCK_CASE

/* exp2 that vectorizes: 2^x = 2^n * 2^f with n = round(x), |f| <= 1/2, and 2^f by its degree-7
 * Taylor polynomial (truncation error 4e-9 relative, below half an ulp). Inputs are clamped to
 * [-127, 127]; n = -127 builds the scale 0.0, so x <= -127 (and -inf) gives exactly 0; NaN stays
 * NaN. */
static inline float CK_NAME(exp2)(float x)
{
    x = x < -127.0f ? -127.0f : x;
    x = x > 127.0f ? 127.0f : x;
    float n = (x + 12582912.0f) - 12582912.0f; /* round to nearest integer (1.5 * 2^23) */
    float f = x - n;
    float p = 1.5252733804059841e-05f;
    p = CK_FMAF(p, f, 1.5403530393381609e-04f);
    p = CK_FMAF(p, f, 1.3333558146428443e-03f);
    p = CK_FMAF(p, f, 9.6181291076284772e-03f);
    p = CK_FMAF(p, f, 5.5504108664821580e-02f);
    p = CK_FMAF(p, f, 2.4022650695910071e-01f);
    p = CK_FMAF(p, f, 6.9314718055994531e-01f);
    p = CK_FMAF(p, f, 1.0f);
    /* a NaN x gives a NaN p: the scale is then any number, but its conversion must be defined */
    int32_t e = (int32_t)(n == n ? n : 0.0f) + 127;
    return p * fa_bits_f32((uint32_t)e << 23);
}

/* f16 -> f32 without branches (so it vectorizes), equal to fa_f16_to_f32 for all 65536 inputs:
 * rebias the exponent, widen inf/NaN, and take subnormals as integer * 2^-24. */
static inline float CK_NAME(f16_to_f32)(uint16_t h)
{
    uint32_t magnitude = h & 0x7fffu;
    uint32_t bits = (magnitude << 13) + (112u << 23);
    if (magnitude >= 0x7c00u)
        bits |= 0x7f800000u;
    float v = fa_bits_f32(bits);
    if (magnitude < 0x400u)
        v = (float)(int32_t)magnitude * 5.9604644775390625e-08f;
    return fa_bits_f32(fa_f32_bits(v) | ((uint32_t)(h & 0x8000u) << 16));
}

typedef uint8_t CK_NAME(u8v) __attribute__((vector_size(CK_VW), aligned(1)));
typedef uint32_t CK_NAME(u32v) __attribute__((vector_size(CK_VW * 4)));
typedef int32_t CK_NAME(i32v) __attribute__((vector_size(CK_VW * 4)));

/* CK_VW FP8 e4m3 values at p as f32, exactly, lane-parallel and without denormal arithmetic:
 * the 7 bits below the sign go under f32's exponent and mantissa, rebiased by 120 (7 to 127);
 * e4m3's subnormals (exponent 0) take 121, giving (1 + m/8) 2^-6, from which 2^-6 is then
 * subtracted exactly; 0x7f, which comes out as 480, gets an all-ones exponent (NaN) by an or
 * (fa_e4m3_to_f32 is the scalar definition). */
static inline __attribute__((always_inline)) CK_NAME(vec) CK_NAME(e4m3_vec)(const uint8_t *p)
{
#ifdef CK_U8_LOAD
    const CK_NAME(u32v) x = (CK_NAME(u32v))CK_U8_LOAD(p);
#else
    const CK_NAME(u32v) x = __builtin_convertvector(*(const CK_NAME(u8v) *)p, CK_NAME(u32v));
#endif
    const CK_NAME(u32v) em = x & 0x7fu;
    const CK_NAME(u32v) sub = (CK_NAME(u32v))((CK_NAME(i32v))em < 8); /* -1 where subnormal */
    const CK_NAME(u32v) bits = (em << 20) + (120u << 23) + (sub & (1u << 23));
    const CK_NAME(vec) f = (CK_NAME(vec))bits - (CK_NAME(vec))(sub & 0x3c800000u);
    const CK_NAME(u32v) nan = (CK_NAME(u32v))((CK_NAME(i32v))em == 0x7f) & 0x7f800000u;
    return (CK_NAME(vec))(((CK_NAME(u32v))f | nan) | ((x & 0x80u) << 24));
}

static void CK_NAME(load_row)(fa_dtype dtype, const void *src, int64_t n, float scale,
                              float *restrict dst)
{
    if (dtype == FA_DTYPE_F32) {
        const float *s = src;
        for (int64_t i = 0; i < n; i++)
            dst[i] = s[i] * scale;
    } else if (dtype == FA_DTYPE_F16) {
        const uint16_t *s = src;
        int64_t i = 0;
#ifdef CK_F16_LOAD
        for (; i + CK_VW <= n; i += CK_VW)
            *(CK_NAME(vec_u) *)(dst + i) = (CK_NAME(vec))CK_F16_LOAD(s + i) * scale;
#endif
        for (; i < n; i++)
            dst[i] = CK_NAME(f16_to_f32)(s[i]) * scale;
    } else if (dtype == FA_DTYPE_E4M3) {
        const uint8_t *s = src;
        int64_t i = 0;
        for (; i + CK_VW <= n; i += CK_VW)
            *(CK_NAME(vec_u) *)(dst + i) = CK_NAME(e4m3_vec)(s + i) * scale;
        for (; i < n; i++)
            dst[i] = fa_e4m3_to_f32(s[i]) * scale;
    } else {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++)
            dst[i] = fa_bits_f32((uint32_t)s[i] << 16) * scale;
    }
}

static void CK_NAME(softmax_cols)(float *s, int rows, int cols, int64_t ld, float *restrict m,
                                  float *restrict l, float *restrict alpha)
{
    for (int c = 0; c < cols; c++)
        alpha[c] = m[c];
    for (int r = 0; r < rows; r++) {
        const float *sr = s + r * ld;
        for (int c = 0; c < cols; c++)
            alpha[c] = sr[c] > alpha[c] ? sr[c] : alpha[c];
    }
    for (int c = 0; c < cols; c++) {
        float m_new = alpha[c];
        float m_use = m_new == -INFINITY ? 0.0f : m_new; /* no key seen yet: keep p = 0 */
        float a = CK_NAME(exp2)(m[c] - m_use);
        m[c] = m_new;
        alpha[c] = a;
        l[c] *= a;
    }
    for (int r = 0; r < rows; r++) {
        float *sr = s + r * ld;
        for (int c = 0; c < cols; c++) {
            float m_use = m[c] == -INFINITY ? 0.0f : m[c];
            float p = CK_NAME(exp2)(sr[c] - m_use);
            sr[c] = p;
            l[c] += p;
        }
    }
}

static void CK_NAME(exp2_sub)(float *s, int rows, int cols, int64_t ld,
                              const float *restrict row_bias, const float *restrict col_bias)
{
    for (int r = 0; r < rows; r++) {
        float *sr = s + r * ld;
        float rb = row_bias[r];
        for (int c = 0; c < cols; c++)
            sr[c] = CK_NAME(exp2)((sr[c] - rb) - col_bias[c]);
    }
}

static void CK_NAME(grad_scores)(const float *p, float *dp, int rows, int cols, int64_t ld,
                                 const float *restrict row_bias, const float *restrict col_bias)
{
    for (int r = 0; r < rows; r++) {
        const float *pr = p + r * ld;
        float *dr = dp + r * ld;
        float rb = row_bias[r];
        for (int c = 0; c < cols; c++)
            dr[c] = pr[c] * ((dr[c] - rb) - col_bias[c]);
    }
}

#include "cpu_decode_impl.h"

/* tanh that vectorizes, within about 3 ulp: an odd Taylor polynomial below |x| = 1/4 (truncation
 * 1e-8 relative), else (1 - e) / (1 + e) with e = 2^(-2 log2(e) |x|) in (0, 0.61], where 1 - e
 * cancels at most 1.4 bits. Saturates to +-1 (exp2 clamps at -127); NaN stays NaN. */
static inline float CK_NAME(tanh)(float x)
{
    const float a = x < 0.0f ? -x : x, a2 = a * a;
    float p = -0.00886323552990220f; /* -1382/155925 */
    p = CK_FMAF(p, a2, 0.0218694885361552f);
    p = CK_FMAF(p, a2, -0.0539682539682540f);
    p = CK_FMAF(p, a2, 0.133333333333333f);
    p = CK_FMAF(p, a2, -0.333333333333333f);
    const float small = CK_FMAF(p * a2, a, a);
    const float e = CK_NAME(exp2)(-2.8853900817779268f * a);
    const float t = a < 0.25f ? small : (1.0f - e) / (1.0f + e);
    return x < 0.0f ? -t : t;
}

static void CK_NAME(softcap)(float *s, int rows, int cols, int64_t ld, float in, float out,
                             float *restrict deriv)
{
    for (int r = 0; r < rows; r++) {
        float *sr = s + r * ld;
        for (int c = 0; c < cols; c++) {
            const float t = CK_NAME(tanh)(sr[c] * in);
            sr[c] = out * t;
            if (deriv)
                deriv[r * ld + c] = 1.0f - t * t;
        }
    }
}

static const fa_cpu_kernels CK_NAME(kernels) = {
    .name = CK_NAME_STRING,
    .gemm = CK_NAME(gemm),
    .load_row = CK_NAME(load_row),
    .decode_block = CK_NAME(decode_block),
    .softmax_cols = CK_NAME(softmax_cols),
    .exp2_sub = CK_NAME(exp2_sub),
    .grad_scores = CK_NAME(grad_scores),
    .softcap = CK_NAME(softcap),
};
