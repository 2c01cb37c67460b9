// SPDX-License-Identifier: MIT
// A packed variable-length batch in one launch (fa_cuda_params.varlen): each block binds the
// parameters to its own sequence, so that a kernel's body runs as for a call of batch 1.
#ifndef FA_VARLEN_CUH
#define FA_VARLEN_CUH

#include "fa_cuda_abi.h"

// What a kernel's blockIdx.x walks, for fa_varlen_bind to tell a block past its sequence's end.
enum fa_varlen_grid {
    FA_VARLEN_QUERY_TILES, // query tiles, last first where causal (the forward kernels, dQ)
    FA_VARLEN_QUERY_ROWS,  // query rows in order (Delta)
    FA_VARLEN_KEY_TILES,   // key tiles (dK, dV)
    FA_VARLEN_ANY,         // the kernel checks its own bounds (the dQ conversion)
};

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

// Points p at sequence blockIdx.z: its rows of q, o, lse, d_o, d_q and of k, v, d_k, d_v, its
// lengths, the mask's offsets realigned on them (bottom-right on the sequence: the host set
// them against the packed totals), and the backward's workspaces, where the kernels index row i
// of head h as (z heads_q + h) seq_q + i: sequence z's part starts at heads_q x its first row,
// so the parts tile the workspace without overlap (in a tiled dQ accumulator, whole tiles apart).
// ALiBi keeps indexing its slopes by blockIdx.z, one row per sequence where they have one. False
// where the block (per_block rows or keys of `grid`) lies past its sequence's end: it then has
// nothing to do.
template <typename T>
__device__ __forceinline__ bool fa_varlen_bind(fa_cuda_params &p, fa_varlen_grid grid,
                                               int per_block)
{
    int q0, sq, k0, sk;
    fa_varlen_range(p.cu_seqlens_q, p.seq_q, q0, sq);
    fa_varlen_range(p.cu_seqlens_k, p.seq_k, k0, sk);
    const long long x = grid == FA_VARLEN_QUERY_TILES && p.causal
                            ? (long long)(gridDim.x - 1 - blockIdx.x)
                            : (long long)blockIdx.x;
    if (grid != FA_VARLEN_ANY && x * per_block >= (grid == FA_VARLEN_KEY_TILES ? sk : sq))
        return false;
    const int shift = (sk - sq) - (p.seq_k - p.seq_q);
    p.causal_offset += shift;
    p.left_offset += shift;
    p.seq_q = sq;
    p.seq_k = sk;
    p.batch = 1;
    const unsigned long long rq = q0, rk = k0;
    p.q.ptr += rq * p.q.stride_s * sizeof(T);
    p.o.ptr += rq * p.o.stride_s * sizeof(T);
    p.lse.ptr += rq * p.lse.stride_s * sizeof(float);
    p.d_o.ptr += rq * p.d_o.stride_s * sizeof(T);
    p.d_q.ptr += rq * p.d_q.stride_s * sizeof(T);
    p.k.ptr += rk * p.k.stride_s * sizeof(T);
    p.v.ptr += rk * p.v.stride_s * sizeof(T);
    p.d_k.ptr += rk * p.d_k.stride_s * sizeof(T);
    p.d_v.ptr += rk * p.d_v.stride_s * sizeof(T);
    p.q.stride_b = p.o.stride_b = p.lse.stride_b = p.d_o.stride_b = p.d_q.stride_b = 0;
    p.k.stride_b = p.v.stride_b = p.d_k.stride_b = p.d_v.stride_b = 0;
    const long long z = blockIdx.z, ws = (long long)p.heads_q * (q0 - z * sq);
    p.delta += ws * (long long)sizeof(float);
    if (FA_BWD_WGMMA_VARLEN_BULK && p.dq_accum && p.dq_tiled) {
        // the tiled accumulator (fa_cuda_abi.h): the kernels index (z heads_q + h) rows + i with
        // rows = sq rounded up to 64; sequence z's part starts at heads_q (64 z + q0 rounded up
        // to 64), which leaves each part whole tiles apart from the next
        const long long rows = FA_BWD_DQ_TILED_ROWS(sq),
                        first = FA_BWD_DQ_TILED_ROWS((long long)q0) + FA_BWD_WGMMA_QTILE * z;
        p.dq_accum += p.heads_q * (first - z * rows) * p.dq_tiled * (long long)sizeof(float);
    } else if (p.dq_accum) {
        p.dq_accum += ws * p.head_dim * (long long)sizeof(float);
    }
    return true;
}

// A *_VARLEN kernel's entry: thread 0 binds p to the block's sequence into shared memory, where
// the body then reads it as it reads the parameter bank (bound in registers instead, the changed
// fields stayed live for the block's life and spilled in the largest kernels); NULL where the
// block has nothing to do. Every thread of the block calls it.
template <typename T>
__device__ __forceinline__ const fa_cuda_params *fa_varlen_enter(const fa_cuda_params &p,
                                                                 fa_varlen_grid grid, int per_block)
{
    __shared__ fa_cuda_params bound;
    __shared__ int ok;
    if (threadIdx.x == 0) {
        fa_cuda_params s = p;
        ok = fa_varlen_bind<T>(s, grid, per_block);
        bound = s;
    }
    __syncthreads();
    return ok ? &bound : nullptr;
}

#endif
