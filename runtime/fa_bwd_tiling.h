// SPDX-License-Identifier: MIT
/* The backward tiling that the OpenCL and Vulkan kernels share (shaders/opencl/fa_backward.cl and
 * shaders/vulkan/fa_backward.glsl implement the same design): query tiles of bm rows, key tiles
 * of bn keys, nt work-items; sx work-items along the keys of the S tile, kx and qx along the head
 * dim of the dK/dV and dQ tiles, the head dim padded to dp for those tiles, the column chunk dc of
 * the S and dP products and the row chunks rk, rq of the dK/dV and dQ products, all staged through
 * one local area; local_bytes is the larger pass's local memory. */
#ifndef FA_BWD_TILING_H
#define FA_BWD_TILING_H

#include <stdbool.h>
#include <stdint.h>

typedef struct fa_bwd_tiling {
    int nt, bm, bn, sx, kx, qx, dp, dc, rk, rq;
    uint64_t local_bytes;
} fa_bwd_tiling;

/* The tiling for head dim d within local_limit bytes of local memory (of which the kernels keep
 * `reserved` for themselves) and work-groups of at most max_wg: `override` ("bm,bn,nt" or
 * "bm,bn,nt,dc", a tuning knob, NULL for none) when it fits, else the
 * first of the preferred list whose register tiles divide d, else the one that pads d least;
 * `prefer` ({bm, bn, nt}, or NULL), a backend's own measured best, replaces that choice when it
 * fits and pads d no more. */
bool fa_bwd_tiling_select(int d, uint64_t local_limit, uint64_t reserved, uint64_t max_wg,
                          const char *override, const int *prefer, fa_bwd_tiling *t);

#endif
