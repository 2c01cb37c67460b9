// SPDX-License-Identifier: MIT
// Which keys a query sees, shared by every kernel. Causal attention is aligned bottom-right:
// query i sees key j iff j <= i + causal_offset (causal_offset = seq_k - seq_q), so a block of
// query rows stops at the last key its last row sees, and a block of keys starts at the first
// query that sees its first key. Also the forwards' rescale slack of the online softmax.
#pragma once

#include "fa_common.cuh"

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

// The query tiles of TILE rows that a block of keys from j0 visits, for each query head of its
// group: `total` steps over nq tiles from fa_query_begin, head by head; non-causal blocks start
// at a tile rotated by their index, so that their dQ atomics spread over the rows.
template <int TILE> struct fa_query_tiles {
    int qbeg, nq, total, rot;
    __device__ __forceinline__ fa_query_tiles(const fa_cuda_params &p, int j0)
    {
        qbeg = fa_query_begin<TILE>(p, j0);
        nq = qbeg < p.seq_q ? (p.seq_q - qbeg + TILE - 1) / TILE : 0;
        total = nq * p.group;
        rot = p.causal || nq == 0 ? 0 : (int)(blockIdx.x % nq);
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
