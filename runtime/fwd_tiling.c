// SPDX-License-Identifier: MIT
/* Choosing the forward tiling of the OpenCL and Vulkan kernels (see fa_fwd_tiling.h). */
#include "fa_fwd_tiling.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

/* The split of the two register tiles: S with the fewest vector loads per product, ties to
 * fewer work-items along the keys (fewer partial row maxima to combine); O with rows in runs of
 * 1, 2, 4 or 8 and columns in groups of gw (4 floats, or 8 16-bit elements: one vector load; the
 * last group may be partial), the fewest loads per key, plus with 16-bit tiles the conversions
 * of V (gw per group: more rows per work-item convert less), ties to fewer work-items along d.
 * False when nothing divides. */
static bool split(int d, fa_fwd_tiling *t)
{
    const int bm = t->bm, bn = t->bn, nt = t->nt, gw = t->tile16 ? 8 : 4;
    int best = INT_MAX;
    t->s_tx = t->o_tx = 0;
    for (int tx = 1; tx <= bn; tx *= 2) {
        int ty = nt / tx;
        if (ty < 1 || ty > bm || bm % ty || bn % tx || nt % tx)
            continue;
        if (bm / ty + bn / tx < best) {
            best = bm / ty + bn / tx;
            t->s_tx = tx;
        }
    }
    best = INT_MAX;
    for (int tx = 1; tx <= d / gw; tx *= 2) {
        int ty = nt / tx, tm = ty ? bm / ty : 0, groups = (d / gw + tx - 1) / tx;
        if (ty < 1 || ty > bm || bm % ty || nt % tx || tm > 8 || tm * gw * groups > 64)
            continue;
        const int cost = (tm + 3) / 4 + groups + (t->tile16 ? gw * groups : 0);
        if (cost < best) {
            best = cost;
            t->o_tx = tx;
        }
    }
    return t->s_tx && t->o_tx;
}

/* Fills t for (bm, bn, nt) when it fits: work-group size, local memory, and a register budget
 * per work-item (at most 64 O and 32 S accumulators) that keeps GPU compilers from spilling. */
static bool fit(int d, bool tile16, int bm, int bn, int nt, uint64_t local_limit, uint64_t max_wg,
                fa_fwd_tiling *t)
{
    *t = (fa_fwd_tiling){.nt = nt, .bm = bm, .bn = bn, .tile16 = tile16};
    if ((uint64_t)nt > max_wg || d % (tile16 ? 8 : 4) || bm * d / nt > 64 || bm * bn / nt > 32 ||
        !split(d, t))
        return false;
    const uint64_t tiles = tile16 ? 2 * (uint64_t)(bm + bn) * (uint64_t)(d + 8)
                                  : 4 * (uint64_t)(bm + bn) * (uint64_t)(d + 4);
    t->local_bytes = tiles + 4 * ((uint64_t)bn * (uint64_t)(bm + 4) +
                                  (uint64_t)t->s_tx * (uint64_t)bm + 2 * (uint64_t)bm);
    return t->local_bytes <= local_limit;
}

static bool pow2_in(int x, int lo, int hi)
{
    return x >= lo && x <= hi && !(x & (x - 1));
}

bool fa_fwd_tiling_select(int d, bool tile16_ok, uint64_t local_limit, uint64_t max_wg,
                          const char *override, fa_fwd_tiling *t)
{
    /* Larger query tiles first (K/V reuse), then larger key tiles; 64 x 16 before 32 x 32 was
     * measured faster at D = 128 on the H200 (OpenCL and Vulkan, f32 tiles); then 128
     * work-items. 16-bit tiles, where allowed, before f32 ones: the same tile in half the memory,
     * so the larger sizes fit (64 x 32 at D = 128 in 48 KiB, with 4 x 4 score blocks). */
    static const int sizes[][2] = {{64, 64}, {64, 32}, {32, 64}, {64, 16}, {32, 32}, {32, 16},
                                   {16, 32}, {16, 16}, {16, 8},  {8, 16},  {8, 8}};
    static const int threads[] = {128, 256, 64, 32};
    int bm, bn, nt, bits = tile16_ok ? 16 : 32;
    const int fields = override ? sscanf(override, "%d,%d,%d,%d", &bm, &bn, &nt, &bits) : 0;
    if (!tile16_ok)
        bits = 32; /* the OpenCL kernels read "bm,bn,nt" only */
    if ((fields == 3 || fields == 4) && pow2_in(bm, 8, 256) && pow2_in(bn, 8, 256) &&
        pow2_in(nt, 1, 1024) && (bits == 32 || (bits == 16 && tile16_ok)) &&
        fit(d, bits == 16, bm, bn, nt, local_limit, max_wg, t))
        return true;
    for (int pass = tile16_ok ? 0 : 1; pass < 2; pass++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            for (size_t j = 0; j < sizeof threads / sizeof threads[0]; j++)
                if (fit(d, pass == 0, sizes[i][0], sizes[i][1], threads[j], local_limit, max_wg, t))
                    return true;
    return false;
}
