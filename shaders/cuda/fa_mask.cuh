// SPDX-License-Identifier: MIT
// Which keys a query sees, shared by every kernel. The mask is aligned bottom-right
// (fa_cuda_abi.h): query i sees key j iff j <= i + causal_offset (where causal: causal attention or
// a window's right bound) and j >= i + left_offset (where has_left: a window's left bound). So a
// block of query rows runs from the first key its first row sees to the last key its last row sees,
// and a block of keys from the first query that sees its first key to the last query that sees its
// last key. Also the softcap's tanh, ALiBi's term, the additive bias and the forwards' rescale
// slack of the online softmax.
#pragma once

#include "fa_common.cuh"

#include <type_traits>

// How far (log2 units) a row's running max m may lag the true max before O and l are rescaled.
// 0: rescale whenever some row of the warp gets a new max (the textbook online softmax; a tile
// where no row's max grows skips the rescale, bit for bit the same result as alpha = 1).
// 8 (default): keep the stale m until a score exceeds it by more than 8, so P = exp2(s - m) is
// at most 2^8 (plus rounding) instead of 1. This is the same exact softmax: O / l and
// LSE = m + log2(l) do not depend on which m is used, and l and O, up to 2^8 times larger, stay
// far inside the f32 range (l <= 2^8 seq_k). P rounded to f16 / bf16 keeps its relative
// precision (2^-11 / 2^-8) since 2^8 is far below the f16 maximum (65504), and fewer small P
// fall into the f16 subnormals. After the first tiles a row's max rarely grows by 8 (a factor
// 256), so O is almost never rescaled.
#ifndef FA_FWD_RESCALE_SLACK
#define FA_FWD_RESCALE_SLACK 8.f
#endif

// Keys [0, end) that any query of rows [row0, row0 + rows) may see.
__device__ __forceinline__ int fa_key_end(const fa_cuda_params &p, int row0, int rows)
{
    int end = p.seq_k;
    if (p.causal) {
        const long long last = (long long)min(row0 + rows, p.seq_q) - 1 + p.causal_offset + 1;
        end = (int)max(0LL, min((long long)end, last));
    }
    return end;
}

// The first key that any query of rows [row0, ...) may see (0 without a left bound; at most
// seq_k). Tiled kernels round it down to their key tile.
__device__ __forceinline__ int fa_key_begin(const fa_cuda_params &p, int row0)
{
    return p.has_left ? (int)max(0LL, min((long long)p.seq_k, (long long)row0 + p.left_offset)) : 0;
}

// One past the last query that sees key j (seq_q without a left bound; at least 0).
__device__ __forceinline__ int fa_query_end(const fa_cuda_params &p, int j)
{
    return p.has_left ? (int)max(0LL, min((long long)p.seq_q, (long long)j - p.left_offset + 1))
                      : p.seq_q;
}

// tanh(s / softcap) of the scaled score s = scale x of a raw product x = q.k, given
// k = p.softcap_k (or, for a score x already in log2 units, k = 2 / softcap), as
// 1 - 2 / (1 + 2^(k x)): ex2.approx (2^-22 relative) and rcp.approx keep its absolute error near
// 2^-21, where tanh.approx.f32's 2^-11 relative error, times the cap, would show against the
// float64 reference; it saturates cleanly to -1 or 1 as 2^(k x) reaches 0 or inf (no NaN).
// fa_softcap_tanh is 1 - 2 r of this r = 1 / (1 + 2^(k x)), which falls as the capped score
// grows (the wgmma forward keeps r where a step needs no mask: fa_forward_wgmma.cuh).
__device__ __forceinline__ float fa_softcap_recip(float x, float k)
{
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(1.f + fa_exp2(x * k)));
    return r;
}
__device__ __forceinline__ float fa_softcap_tanh(float x, float k)
{
    return fmaf(-2.f, fa_softcap_recip(x, k), 1.f);
}

// ALiBi in the kernels' log2 units: -slope(b, hq) log2(e), 0 without ALiBi (the slopes are read
// only where has_alibi). Load it once per (b, hq) and add it with fa_alibi.
__device__ __forceinline__ float fa_alibi_slope(const fa_cuda_params &p, int b, int hq)
{
    const float *slopes = (const float *)p.alibi.ptr;
    return p.has_alibi ? -FA_LOG2E * slopes[b * p.alibi.stride_b + hq * p.alibi.stride_h] : 0.f;
}

// The log2-unit score s with ALiBi's term for the distance d = i + off - j of query i from key j
// (off = seq_k - seq_q: fa_cuda_abi.h), given slope = fa_alibi_slope. d as a float (exact below
// 2^24), so that a tiled kernel converts one distance per row and subtracts each key's column.
__device__ __forceinline__ float fa_alibi(float s, float slope, float d)
{
    return fmaf(slope, fabsf(d), s);
}

// The additive bias in the kernels' log2 units: log2(e) bias(b, i, hq, j) (fa_cuda_abi.h) of the
// row at = fa_bias_row(p, b, i, hq) and key j, in the bias's own dtype; -inf stays -inf and hides
// the key. Read only where p.bias_dtype. A row past seq_q or a key past seq_k reads the last one
// (in bounds, so a tile's edge needs no branch); the kernels mask such keys and drop such rows.
__device__ __forceinline__ long long fa_bias_row(const fa_cuda_params &p, int b, int i, int hq)
{
    return fa_at(p.bias, b, min(i, p.seq_q - 1), hq);
}

__device__ __forceinline__ float fa_bias(const fa_cuda_params &p, long long at, int j)
{
    at += min(j, p.seq_k - 1);
    if (p.bias_dtype == FA_CUDA_BIAS_F32)
        return FA_LOG2E * __ldg((const float *)p.bias.ptr + at);
    const unsigned short x = __ldg((const unsigned short *)p.bias.ptr + at);
    return FA_LOG2E * (p.bias_dtype == FA_CUDA_BIAS_F16 ? __half2float(__ushort_as_half(x))
                                                        : __uint_as_float((unsigned)x << 16));
}

// Work item f of nx x ny x nz (query tiles, heads, batch entries; x fastest) as (x, y, z). Where
// every batch entry reads the same bias (its batch stride 0), the batch entry is the fastest index
// instead: blocks running together then read each bias tile once from memory and from L2 after,
// instead of once per batch entry. Selects, not branches: the kernels' registers are scarce.
__device__ __forceinline__ void fa_bias_order(const fa_cuda_params &p, unsigned f, int nx, int ny,
                                              int nz, int &x, int &y, int &z)
{
    const bool by_b = p.bias_dtype && nz > 1 && p.bias.stride_b == 0;
    const unsigned n0 = by_b ? nz : nx, n1 = by_b ? nx : ny;
    const int a0 = (int)(f % n0), r = (int)(f / n0), a1 = r % (int)n1, a2 = r / (int)n1;
    x = by_b ? a1 : a0;
    y = by_b ? a2 : a1;
    z = by_b ? a0 : a2;
}

// threadIdx.x, read so that nothing derived from it is hoisted out of a kernel's loop (as
// fa_bwd4_tid): the bias's row addresses, hoisted, stayed in registers or spilled for every call.
__device__ __forceinline__ int fa_tid_opaque()
{
    int t;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
    return t;
}

// Asks L2 for the 128 bytes of the bias's row `at` (fa_bias_row) from key j on (clamped to the
// last key, so never outside the tensor): a tiled kernel asks for its next tile's bias while it
// reads this one's, so that those reads wait on L2 rather than on memory.
__device__ __forceinline__ void fa_bias_prefetch(const fa_cuda_params &p, long long at, int j)
{
    at += min(j, p.seq_k - 1);
    const char *x = (const char *)p.bias.ptr + at * (p.bias_dtype == FA_CUDA_BIAS_F32 ? 4 : 2);
    asm volatile("prefetch.global.L2 [%0];" ::"l"(x));
}

// For the tensor-core kernels, whose registers are scarce: fa_bias_tiles(p, f) calls f with
// DT = FA_CUDA_BIAS_F32 or _F16 (f16 and bf16) as a compile-time constant, one copy of f's loop
// per element size, and fa_bias_at<DT>(p, row, j, k) is k bias(row, j), element j of a row
// pointer from fa_bias_ptr (one load at an immediate offset when j is a constant of an unrolled
// loop; the caller keeps j within the keys).
__device__ __forceinline__ const void *fa_bias_ptr(const fa_cuda_params &p, int b, int i, int hq,
                                                   int j)
{
    const long long at = fa_bias_row(p, b, i, hq) + j;
    return (const char *)p.bias.ptr + at * (p.bias_dtype == FA_CUDA_BIAS_F32 ? 4 : 2);
}

template <int DT>
__device__ __forceinline__ float fa_bias_at(const fa_cuda_params &p, const void *row, int j,
                                            float k)
{
    if constexpr (DT == FA_CUDA_BIAS_F32)
        return k * __ldg((const float *)row + j);
    const unsigned short x = __ldg((const unsigned short *)row + j);
    return k * (p.bias_dtype == FA_CUDA_BIAS_F16 ? __half2float(__ushort_as_half(x))
                                                 : __uint_as_float((unsigned)x << 16));
}

// Keys j and j + 1 of a row pointer from fa_bias_ptr (or of the same form) in one load, as the
// bias's values (not yet times log2 e): the row's address and j even, which the caller checks
// from the view's base and strides. f32: p.bias_dtype == FA_CUDA_BIAS_F32, as the caller holds it
// (read again from the parameters, it cost a load and a compare at every use).
__device__ __forceinline__ float2 fa_bias_pair(const fa_cuda_params &p, bool f32, const void *row,
                                               int j)
{
    if (f32)
        return __ldg((const float2 *)((const float *)row + j));
    const unsigned u = __ldg((const unsigned *)((const unsigned short *)row + j));
    return p.bias_dtype == FA_CUDA_BIAS_F16
               ? __half22float2(*(const __half2 *)&u)
               : make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
}

template <typename F> __device__ __forceinline__ void fa_bias_tiles(const fa_cuda_params &p, F &&f)
{
    if (p.bias_dtype == FA_CUDA_BIAS_F32)
        f(std::integral_constant<int, FA_CUDA_BIAS_F32>{});
    else
        f(std::integral_constant<int, FA_CUDA_BIAS_F16>{});
}

// The first query that sees key j (0 when not causal).
__device__ __forceinline__ long long fa_first_query(const fa_cuda_params &p, int j)
{
    return p.causal ? max(0LL, (long long)j - p.causal_offset) : 0;
}

// The first query row, rounded down to a multiple of TILE, that sees key j0.
template <int TILE> __device__ __forceinline__ int fa_query_begin(const fa_cuda_params &p, int j0)
{
    int qbeg = 0;
    if (p.causal)
        qbeg = (int)(max(0LL, (long long)j0 - p.causal_offset) / TILE) * TILE;
    return qbeg;
}

// The query tiles of TILE rows that a block of `keys` keys from j0 visits, for each query head of
// its group: `total` steps over nq tiles from fa_query_begin to the last query that sees the
// block's last key, head by head; non-causal blocks start at a tile rotated by their index bx
// (of the key blocks), so that their dQ atomics spread over the rows.
template <int TILE> struct fa_query_tiles {
    int qbeg, nq, total, rot;
    __device__ __forceinline__ fa_query_tiles(const fa_cuda_params &p, int j0, int keys,
                                              unsigned bx = blockIdx.x)
    {
        qbeg = fa_query_begin<TILE>(p, j0);
        const int qend = fa_query_end(p, min(j0 + keys, p.seq_k) - 1);
        nq = qbeg < qend ? (qend - qbeg + TILE - 1) / TILE : 0;
        total = nq * p.group;
        rot = p.causal || nq == 0 ? 0 : (int)(bx % nq);
    }
    // Step it's query head hq (of KV head hk's group) and first row i0.
    __device__ __forceinline__ void tile(const fa_cuda_params &p, int hk, int it, int &hq,
                                         int &i0) const
    {
        const int gi = it / nq;
        int qt = it - gi * nq + rot;
        qt -= qt >= nq ? nq : 0;
        hq = hk * p.group + gi;
        i0 = qbeg + qt * TILE;
    }
};
