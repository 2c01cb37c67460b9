// SPDX-License-Identifier: MIT
/* The forward tiling that the OpenCL and Vulkan kernels share (shaders/opencl/fa_forward.cl and
 * shaders/vulkan/attn_fwd.comp implement the same design): a query tile of bm rows, key/value
 * tiles of bn keys, nt work-items, and two register tiles with contiguous rows per work-item:
 * S (bm x bn) with s_tx work-items along the keys, O (bm x d) with o_tx work-items along its
 * column groups (4 columns, or 8 with 16-bit tiles). Local memory: Q and one K/V tile (rows of
 * d + 4 floats, or with 16-bit tiles d + 8 16-bit elements), then in floats P transposed (bn rows
 * of bm + 4), s_tx partial values per query row, and two values per row. */
#ifndef FA_FWD_TILING_H
#define FA_FWD_TILING_H

#include <stdbool.h>
#include <stdint.h>

/* tile16: the Q and K/V tiles hold the input's 16-bit elements (converted to f32 as they are
 * read) instead of f32; half the local memory, so larger score blocks fit (Vulkan only). */
typedef struct fa_fwd_tiling {
    int nt, bm, bn, s_tx, o_tx;
    bool tile16;
    uint64_t local_bytes;
} fa_fwd_tiling;

/* The tiling for head dim d on a device with local_limit bytes of local memory per work-group
 * and work-groups of at most max_wg: `override` ("bm,bn,nt", or "bm,bn,nt,bits" with bits 16 or
 * 32 for the tiles' element size; a tuning knob, NULL for none) when it fits, else the first that
 * fits of the preferred list. tile16_ok: the kernel and the input dtype allow 16-bit tiles, which
 * are then preferred (with "bm,bn,nt" too); else every tile is f32. False when none fits. */
bool fa_fwd_tiling_select(int d, bool tile16_ok, uint64_t local_limit, uint64_t max_wg,
                          const char *override, fa_fwd_tiling *t);

#endif
