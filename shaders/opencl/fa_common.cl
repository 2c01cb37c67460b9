/* flashattn OpenCL C 1.2: what every kernel shares. Built with -D options from
 * backends/opencl/opencl_attention.c:
 *   FA_DTYPE 1 f32, 2 f16, 3 bf16 (storage type of q, k, v, o and the gradients);
 *   FA_D head dim (a multiple of 8); FA_NT work-items per work-group; FA_BM query rows and
 *   FA_BN keys per tile; FA_CAUSAL 0/1; FA_GQA query heads per key/value head;
 *   the register-tile options of each kernel are described in fa_forward.cl / fa_backward.cl.
 * Tiles live in __local memory as f32, converted once when loaded; every sum is f32.
 * f16 goes through vload_half/vstore_half (no cl_khr_fp16), bf16 through bit conversion. */

/* Full unrolling of the register-tile loops: what GPU compilers need to keep the tiles in
 * registers. CPU implementations (PoCL) compile much faster without the hint. */
#if FA_UNROLL_LOOPS
#define FA_UNROLL _Pragma("unroll")
#else
#define FA_UNROLL
#endif

#define FA_LOG2E 1.4426950408889634f
#define FA_LN2 0.6931471805599453f

#if FA_DTYPE == 1
typedef float fa_st;
#elif FA_DTYPE == 2 || FA_DTYPE == 3
typedef ushort fa_st;
#else
#error "FA_DTYPE must be 1 (f32), 2 (f16) or 3 (bf16)"
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
#if FA_DTYPE == 1
    return vload4(0, p + i);
#elif FA_DTYPE == 2
    return vload_half4(0, (__global const half *)(p + i));
#else
    return as_float4(convert_uint4(vload4(0, p + i)) << 16);
#endif
}

inline void fa_store(__global fa_st *p, long i, float v)
{
#if FA_DTYPE == 1
    p[i] = v;
#elif FA_DTYPE == 2
    vstore_half_rte(v, 0, (__global half *)(p + i));
#else
    p[i] = fa_f32_to_bf16(v);
#endif
}
