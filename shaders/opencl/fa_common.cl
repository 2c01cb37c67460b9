// SPDX-License-Identifier: MIT
/* flashattn OpenCL C 1.2: what every kernel shares. Built after fa_cl_options.h, with the -D
 * options it lists, from backends/opencl/opencl_attention.c.
 * Tiles live in __local memory as f32, converted once when loaded; every sum is f32.
 * f16 goes through vload_half/vstore_half (no cl_khr_fp16), bf16 through bit conversion. */
FA_CL_COMMON_OPTIONS(FA_CL_REQUIRE)

/* Full unrolling of the register-tile loops: what GPU compilers need to keep the tiles in
 * registers. CPU implementations (PoCL) compile much faster without the hint. */
#if FA_UNROLL_LOOPS
#define FA_UNROLL _Pragma("unroll")
#else
#define FA_UNROLL
#endif

#define FA_LOG2E 1.4426950408889634f
#define FA_LSE_LIMIT 2097152.0f /* FA_BACKWARD_LSE_LIMIT of flashattn.h */
#define FA_LN2 0.6931471805599453f

/* The mask: the query whose diagonal is key qd (query i's is i + seq_k - seq_q) sees the keys
 * qd - left .. qd + right, a bound of -1 being none. FA_LEFT and FA_RIGHT take the window's
 * bounds (kernel arguments, causal folded in) and are constants where FA_WINDOW is 0. */
#define FA_LEFT(win_left_) (FA_WINDOW ? (win_left_) : -1)
#define FA_RIGHT(win_right_) (FA_CAUSAL ? 0 : FA_WINDOW ? (win_right_) : -1)
inline bool fa_sees(int j, int qd, int left, int right)
{
    return (left < 0 || j >= qd - left) && (right < 0 || j <= qd + right);
}
/* The keys [fa_keys_begin, fa_keys_end) within [0, seq_k) that queries whose diagonals lie in
 * [qd_min, qd_max] may see (empty where begin >= end). */
inline int fa_keys_begin(int qd_min, int left)
{
    return left < 0 ? 0 : max(qd_min - left, 0);
}
inline int fa_keys_end(int qd_max, int right, int seq_k)
{
    return right < 0 ? seq_k : clamp(qd_max + right + 1, 0, seq_k);
}

/* tanh within a few ulp for any input: an odd Taylor polynomial below |x| = 1/4, else
 * (1 - e) / (1 + e) with e = 2^(-2 log2(e) |x|); NaN stays NaN. */
inline float fa_tanh(float x)
{
    const float a = fabs(x), a2 = a * a;
    float p = -0.00886323552990220f; /* -1382/155925 */
    p = fma(p, a2, 0.0218694885361552f);
    p = fma(p, a2, -0.0539682539682540f);
    p = fma(p, a2, 0.133333333333333f);
    p = fma(p, a2, -0.333333333333333f);
    const float e = exp2(-2.8853900817779268f * a);
    const float t = a < 0.25f ? fma(p * a2, a, a) : (1.0f - e) / (1.0f + e);
    return x < 0.0f ? -t : t;
}

/* A raw score q.k in log2 units: q.k mul (mul: scale log2(e)), or with FA_SOFTCAP
 * cap_log2 tanh(q.k mul) (mul: scale / softcap); *slope gets the softcap's 1 - tanh^2 (what
 * the backward's dS takes), 1 without. */
inline float fa_score(float raw, float mul, float cap_log2, float *slope)
{
#if FA_SOFTCAP
    const float t = fa_tanh(raw * mul);
    *slope = 1.0f - t * t;
    return cap_log2 * t;
#else
    (void)cap_log2;
    *slope = 1.0f;
    return raw * mul;
#endif
}

/* ALiBi (FA_ALIBI): the slope of one (batch, head) from its tensor (element `at`) in log2 units,
 * and the bias -slope |qd - j| of key j for the query whose diagonal is key qd; 0 without. */
inline float fa_alibi_slope(__global const float *al, long at)
{
    return FA_ALIBI ? al[at] * FA_LOG2E : 0.0f;
}
inline float fa_alibi(float slope2, int j, int qd)
{
    return FA_ALIBI ? -slope2 * (float)abs(qd - j) : 0.0f;
}

/* The additive bias (FA_BIAS: the dtype code of its elements, 0 none): element `at` of the bias
 * as f32 times log2(e); 0 without. f16 goes through vload_half, bf16 through its bits. */
#if FA_BIAS == FA_CL_DTYPE_F16
typedef half fa_bias_t;
#elif FA_BIAS == FA_CL_DTYPE_BF16
typedef ushort fa_bias_t;
#else
typedef float fa_bias_t;
#endif
inline float fa_bias(__global const fa_bias_t *bias, long at)
{
#if FA_BIAS == FA_CL_DTYPE_F32
    return bias[at] * FA_LOG2E;
#elif FA_BIAS == FA_CL_DTYPE_F16
    return vload_half(0, bias + at) * FA_LOG2E;
#elif FA_BIAS == FA_CL_DTYPE_BF16
    return as_float((uint)bias[at] << 16) * FA_LOG2E;
#else
    (void)bias, (void)at;
    return 0.0f;
#endif
}

#if FA_DTYPE == FA_CL_DTYPE_F32
typedef float fa_st;
#elif FA_DTYPE == FA_CL_DTYPE_F16 || FA_DTYPE == FA_CL_DTYPE_BF16
typedef ushort fa_st;
#else
#error "FA_DTYPE must be one of FA_CL_DTYPE_*"
#endif

/* Padded row lengths of local tiles, in floats: rows stay 16-byte aligned for vload4 and
 * successive rows start in different banks. */
#define FA_LDS (FA_D + 4)

inline ushort fa_f32_to_bf16(float f)
{
    uint u = as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (ushort)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);         /* round to nearest even */
    return (ushort)(u >> 16);
}

inline float4 fa_load4(__global const fa_st *p, long i)
{
#if FA_DTYPE == FA_CL_DTYPE_F32
    return vload4(0, p + i);
#elif FA_DTYPE == FA_CL_DTYPE_F16
    return vload_half4(0, (__global const half *)(p + i));
#else
    return as_float4(convert_uint4(vload4(0, p + i)) << 16);
#endif
}

inline void fa_store(__global fa_st *p, long i, float v)
{
#if FA_DTYPE == FA_CL_DTYPE_F32
    p[i] = v;
#elif FA_DTYPE == FA_CL_DTYPE_F16
    vstore_half_rte(v, 0, (__global half *)(p + i));
#else
    p[i] = fa_f32_to_bf16(v);
#endif
}

/* Four elements in their storage format (raw bits for f16/bf16), as loads leave them in
 * registers, and their conversion to f32. */
#if FA_DTYPE == FA_CL_DTYPE_F32
typedef float4 fa_raw4;
#else
typedef ushort4 fa_raw4;
#endif

inline float4 raw_to_f32(fa_raw4 u)
{
#if FA_DTYPE == FA_CL_DTYPE_F32
    return u;
#elif FA_DTYPE == FA_CL_DTYPE_F16
    return vload_half4(0, (const half *)&u);
#else
    return as_float4(convert_uint4(u) << 16);
#endif
}

/* Elements i..i+3 (i a multiple of 4): one vector load when the view allows it. */
inline fa_raw4 raw_load4(__global const fa_st *p, long i, bool aligned)
{
    if (aligned)
        return ((__global const fa_raw4 *)p)[i >> 2];
    return (fa_raw4)(p[i], p[i + 1], p[i + 2], p[i + 3]);
}
