// SPDX-License-Identifier: MIT
// Helpers shared by every flashattn CUDA kernel: dtype conversion, strided addressing, exp2, and
// the PTX wrappers (cp.async, ldmatrix, mma.sync) of the tensor-core paths.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "fa_cuda_abi.h"

#define FA_LN2 0.69314718055994530942f
#define FA_LOG2E 1.44269504088896340736f
#define FA_LSE_LIMIT 2097152.0f // FA_BACKWARD_LSE_LIMIT of flashattn.h

template <typename T> __device__ __forceinline__ float fa_to_float(T x);
template <> __device__ __forceinline__ float fa_to_float<float>(float x)
{
    return x;
}
template <> __device__ __forceinline__ float fa_to_float<__half>(__half x)
{
    return __half2float(x);
}
template <> __device__ __forceinline__ float fa_to_float<__nv_bfloat16>(__nv_bfloat16 x)
{
    return __bfloat162float(x);
}

template <typename T> __device__ __forceinline__ T fa_from_float(float x);
template <> __device__ __forceinline__ float fa_from_float<float>(float x)
{
    return x;
}
template <> __device__ __forceinline__ __half fa_from_float<__half>(float x)
{
    return __float2half_rn(x);
}
template <> __device__ __forceinline__ __nv_bfloat16 fa_from_float<__nv_bfloat16>(float x)
{
    return __float2bfloat16_rn(x);
}

// Element offset of (b, s, h, 0) in a strided view.
__device__ __forceinline__ long long fa_at(const fa_cuda_tensor &t, int b, long long s, int h)
{
    return (long long)b * t.stride_b + s * t.stride_s + (long long)h * t.stride_h;
}

// The backward's LSE in log2 units; NaN from FA_LSE_LIMIT on (flashattn.h: the f32 LSE no
// longer resolves P there), -inf (a row that sees no key) kept.
__device__ __forceinline__ float fa_lse_log2(float lse)
{
    return fabsf(lse) < FA_LSE_LIMIT || lse == -INFINITY ? lse * FA_LOG2E
                                                         : __int_as_float(0x7fffffff);
}

// 2^x on the special-function unit; exp2(-inf) = 0, which masking relies on.
__device__ __forceinline__ float fa_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// ---- PTX wrappers (sm_80+) ---------------------------------------------------------------------

__device__ __forceinline__ unsigned fa_smem_addr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

// 16-byte global -> shared copy that bypasses L1; zero-fills when !valid (nothing is read then).
__device__ __forceinline__ void fa_cp_async16(unsigned dst, const void *src, bool valid)
{
    int bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(bytes));
}
__device__ __forceinline__ void fa_cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> __device__ __forceinline__ void fa_cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Two floats rounded into one 32-bit register, `lo` in the low half (the lower column).
template <typename T> __device__ __forceinline__ unsigned fa_pack2(float lo, float hi);
template <> __device__ __forceinline__ unsigned fa_pack2<__half>(float lo, float hi)
{
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<unsigned *>(&v);
}
template <> __device__ __forceinline__ unsigned fa_pack2<__nv_bfloat16>(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned *>(&v);
}
