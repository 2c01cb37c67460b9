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
