/* The forward tiling that the OpenCL and Vulkan kernels share (shaders/opencl/fa_forward.cl and
 * shaders/vulkan/attn_fwd.comp implement the same design): a query tile of bm rows, key/value
 * tiles of bn keys, nt work-items, and two register tiles with contiguous rows per work-item:
 * S (bm x bn) with s_tx work-items along the keys, O (bm x d) with o_tx work-items along its
 * float4 column groups. Local memory, in floats: Q and one K/V tile (rows of d + 4), P
 * transposed (bn rows of bm + 4), s_tx partial values per query row, and two values per row. */
#ifndef FA_FWD_TILING_H
#define FA_FWD_TILING_H

#include <stdbool.h>
#include <stdint.h>

typedef struct fa_fwd_tiling {
    int nt, bm, bn, s_tx, o_tx;
    uint64_t local_bytes;
} fa_fwd_tiling;

/* The tiling for head dim d on a device with local_limit bytes of local memory per work-group
 * and work-groups of at most max_wg: the one in the environment variable `override_env`
 * ("bm,bn,nt", a tuning override) when it fits, else the first that fits of the preferred
 * list. False when none fits. */
bool fa_fwd_tiling_select(int d, uint64_t local_limit, uint64_t max_wg, const char *override_env,
                          fa_fwd_tiling *t);

#endif
