// SPDX-License-Identifier: MIT
// A packed variable-length batch in one launch (fa_cuda_params.varlen): each block binds the
// parameters to its own sequence, so that the forward's body runs as for a call of batch 1.
#ifndef FA_VARLEN_CUH
#define FA_VARLEN_CUH

#include "fa_cuda_abi.h"

// Sequence blockIdx.z's bounds from the prefix sums, clamped into the packed totals (the
// runtime checked them; a value changed on the device since then reads nothing outside).
__device__ __forceinline__ void fa_varlen_range(const fa_cuda_tensor &cu, int total, int &lo,
                                                int &n)
{
    const int *s = (const int *)cu.ptr;
    const long long b = blockIdx.z;
    lo = min(max(s[b * cu.stride_b], 0), total);
    n = min(max(s[(b + 1) * cu.stride_b], lo), total) - lo;
}

// Points p at sequence blockIdx.z: its rows of q, o, lse, k and v, its lengths, and the mask's
// offsets realigned on them (bottom-right on the sequence: the host set them against the packed
// totals). ALiBi keeps indexing its slopes by blockIdx.z, one row per sequence where they have
// one. False where the block's query tile (qt, ordered as the forward kernels order it) holds no
// row of its sequence: the block then has nothing to do.
template <typename T>
__device__ __forceinline__ bool fa_varlen_bind(fa_cuda_params &p, int rows_per_block)
{
    int q0, sq, k0, sk;
    fa_varlen_range(p.cu_seqlens_q, p.seq_q, q0, sq);
    fa_varlen_range(p.cu_seqlens_k, p.seq_k, k0, sk);
    const int qt = p.causal ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
    if ((long long)qt * rows_per_block >= sq)
        return false;
    const int shift = (sk - sq) - (p.seq_k - p.seq_q);
    p.causal_offset += shift;
    p.left_offset += shift;
    p.seq_q = sq;
    p.seq_k = sk;
    p.batch = 1;
    p.q.ptr += (unsigned long long)q0 * p.q.stride_s * sizeof(T);
    p.o.ptr += (unsigned long long)q0 * p.o.stride_s * sizeof(T);
    p.lse.ptr += (unsigned long long)q0 * p.lse.stride_s * sizeof(float);
    p.k.ptr += (unsigned long long)k0 * p.k.stride_s * sizeof(T);
    p.v.ptr += (unsigned long long)k0 * p.v.stride_s * sizeof(T);
    p.q.stride_b = p.o.stride_b = p.lse.stride_b = p.k.stride_b = p.v.stride_b = 0;
    return true;
}

#endif
