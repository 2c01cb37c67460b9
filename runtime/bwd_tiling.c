// SPDX-License-Identifier: MIT
/* Choosing the backward tiling of the OpenCL and Vulkan kernels (see fa_bwd_tiling.h). */
#include "fa_bwd_tiling.h"

#include <stdio.h>
#include <stdlib.h>

/* Float4s per local row of n floats: odd, so that 8 consecutive rows start in different banks
 * (FA_PITCH4 in fa_backward.cl, the LD* pitches in fa_backward.glsl). */
static uint64_t pitch4(int n)
{
    return (uint64_t)((n / 4 + 1) | 1);
}

/* Work-items along the keys of the (rows x cols) S tile: the split with the fewest loads per
 * product (rows/ty + cols/tx), ties to more along the keys; 0 when none divides the tile. */
static int choose_sx(int rows, int cols, int nt)
{
    int best = 0, best_cost = 0;
    for (int tx = 1; tx <= nt; tx *= 2) {
        int ty = nt / tx;
        if (tx > cols || ty > rows || cols % tx || rows % ty)
            continue;
        int cost = rows / ty + cols / tx;
        if (!best || cost <= best_cost) {
            best = tx;
            best_cost = cost;
        }
    }
    return best;
}

/* Work-items along the head dim of a (rows x d) register tile whose work-items hold rows in
 * groups of 4 and float4 groups of columns: the split with the fewest local loads per useful FMA
 * (d padded to *dp where it does not divide), ties to more along d; 0 when none fits. */
static int choose_dx(int rows, int d, int nt, int *dp)
{
    int best = 0;
    double best_cost = 0;
    for (int tx = 1; tx <= nt; tx *= 2) {
        int ty = nt / tx, p = (d + 4 * tx - 1) / (4 * tx) * (4 * tx);
        if (rows / 4 < ty || (rows / 4) % ty)
            continue;
        int gr = rows / 4 / ty, gd = p / 4 / tx;
        double cost = (double)(gr + gd) / (gr * gd) * p / d;
        if (!best || cost <= best_cost) {
            best = tx;
            best_cost = cost;
            *dp = p;
        }
    }
    return best;
}

/* Fills t for (bm, bn, nt) when it fits: work-group size, registers per work-item (the dK and dV
 * or dQ accumulators and the S tile), local memory (P and dS, LSE and Delta, what the kernels
 * reserve, and the largest chunks, columns up to dc_max, that fit the rest). */
static bool fit(int d, int bm, int bn, int nt, int dc_max, uint64_t max_wg, uint64_t local_limit,
                uint64_t reserved, fa_bwd_tiling *t)
{
    int dpk = 0, dpq = 0;
    if ((uint64_t)nt > max_wg)
        return false;
    *t = (fa_bwd_tiling){.nt = nt,
                         .bm = bm,
                         .bn = bn,
                         .sx = choose_sx(bm, bn, nt),
                         .kx = choose_dx(bn, d, nt, &dpk),
                         .qx = choose_dx(bm, d, nt, &dpq)};
    if (!t->sx || !t->kx || !t->qx)
        return false;
    t->dp = dpk > dpq ? dpk : dpq;
    /* both passes share dp: each split must tile it */
    if (t->dp % (4 * t->kx) || t->dp % (4 * t->qx))
        return false;
    int acc = 2 * bn * t->dp / nt > bm * t->dp / nt ? 2 * bn * t->dp / nt : bm * t->dp / nt;
    if (acc > 64 || acc + bm * bn / nt > 80)
        return false;
    uint64_t p_dkdv = 2 * (uint64_t)bm * pitch4(bn), p_dq = (uint64_t)bn * pitch4(bm);
    uint64_t fixed = 16 * (p_dkdv > p_dq ? p_dkdv : p_dq) + 8 * (uint64_t)bm + reserved;
    if (fixed >= local_limit)
        return false;
    const uint64_t room = (local_limit - fixed) / 16, row = pitch4(t->dp);
    /* Column chunks dc = 4 * 2^k with dc / 4 dividing nt (a work-item then stages one column of
     * its rows): the fewest columns computed (zero past d) plus 16 per chunk, its round. */
    int best = 0;
    for (int dc = 4; dc <= dc_max && dc / 4 <= nt; dc *= 2) {
        int chunks = (d + dc - 1) / dc, cost = chunks * (dc + 16);
        if ((!best || cost < best) && (uint64_t)(bm + bn) * pitch4(dc) <= room) {
            best = cost;
            t->dc = dc;
        }
    }
    for (t->rk = bm; t->rk > 1 && 2 * (uint64_t)t->rk * row > room; t->rk /= 2)
        ;
    for (t->rq = bn; t->rq > 1 && (uint64_t)t->rq * row > room; t->rq /= 2)
        ;
    if (!t->dc || 2 * (uint64_t)t->rk * row > room || (uint64_t)t->rq * row > room)
        return false;
    uint64_t stage = (uint64_t)(bm + bn) * pitch4(t->dc);
    if (2 * (uint64_t)t->rk * row > stage)
        stage = 2 * (uint64_t)t->rk * row;
    if ((uint64_t)t->rq * row > stage)
        stage = (uint64_t)t->rq * row;
    t->local_bytes = fixed + 16 * stage;
    return true;
}

static bool pow2_in(int x, int lo, int hi)
{
    return x >= lo && x <= hi && !(x & (x - 1));
}

bool fa_bwd_tiling_select(int d, uint64_t local_limit, uint64_t reserved, uint64_t max_wg,
                          const char *override, const int *prefer, fa_bwd_tiling *t)
{
    /* Preferred: 64 x 32 tiles on 128 work-items (4 x 4 S entries and 64 accumulators per
     * work-item, within 48 KiB at D = 128), measured best for OpenCL on the H200. */
    static const int configs[][3] = {{64, 32, 128}, {64, 32, 64},  {64, 32, 256}, {32, 32, 128},
                                     {32, 32, 64},  {64, 16, 128}, {32, 16, 128}, {32, 16, 64},
                                     {16, 16, 64},  {16, 16, 32},  {16, 8, 32},   {8, 8, 64},
                                     {8, 8, 32},    {8, 8, 16}};
    int bm, bn, nt, dc = 64;
    if (override && sscanf(override, "%d,%d,%d,%d", &bm, &bn, &nt, &dc) >= 3 &&
        pow2_in(bm, 8, 256) && pow2_in(bn, 8, 256) && pow2_in(nt, 1, 1024) && dc >= 4 &&
        dc % 4 == 0 && fit(d, bm, bn, nt, dc, max_wg, local_limit, reserved, t))
        return true;
    bool found = false;
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        fa_bwd_tiling c;
        if (fit(d, configs[i][0], configs[i][1], configs[i][2], 64, max_wg, local_limit, reserved,
                &c) &&
            (!found || c.dp < t->dp)) {
            *t = c;
            found = true;
            if (c.dp == d)
                break;
        }
    }
    fa_bwd_tiling c;
    if (found && prefer &&
        fit(d, prefer[0], prefer[1], prefer[2], 64, max_wg, local_limit, reserved, &c) &&
        c.dp <= t->dp)
        *t = c;
    return found;
}
