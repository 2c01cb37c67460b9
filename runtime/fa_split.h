// SPDX-License-Identifier: MIT
/* The split-key forward (flash-decoding): when a call has too few (batch, KV head, query-row
 * chunk) work items to fill the device, the keys are cut into chunks attended in parallel, each
 * writing a partial O and LSE, which a second kernel merges exactly. How many chunks is this
 * pure function of the problem and the device, shared by every backend that has the path and
 * unit-tested without a GPU (tests/test_split.c). */
#ifndef FA_SPLIT_H
#define FA_SPLIT_H

#include <stdint.h>

/* The most chunks a call may ask for (fa_attention_desc.num_splits) or get. */
#define FA_MAX_SPLITS 256
/* Chunks are whole multiples of this many keys. */
#define FA_SPLIT_KEY_QUANTUM 64
/* Without a request, each chunk keeps at least this many keys: below that, the merge and each
 * block's fixed cost (staging its query rows, combining its warps) outweigh the parallelism. */
#define FA_SPLIT_MIN_KEYS 256
/* Where the work items make fewer than four waves, no chunk keeps more than this many keys. */
#define FA_SPLIT_MAX_KEYS 4096

typedef struct fa_split {
    int32_t splits;         /* >= 1 */
    int64_t keys_per_split; /* a multiple of FA_SPLIT_KEY_QUANTUM; splits * it >= seq_k */
} fa_split;

/* The chunks for `items` work items (blocks before splitting) over seq_k keys on a device of
 * `units` compute units that keeps about `blocks_per_unit` such blocks busy each; `requested`
 * (fa_attention_desc.num_splits: 0 = choose, else 1..FA_MAX_SPLITS) overrides the choice. The
 * choice: enough chunks that items * splits reaches units * blocks_per_unit, no chunk under
 * FA_SPLIT_MIN_KEYS keys, and under four such waves of items none over FA_SPLIT_MAX_KEYS; at
 * most FA_MAX_SPLITS; then rounded so that no chunk is empty. */
fa_split fa_split_choose(int64_t items, int64_t seq_k, uint32_t units, uint32_t blocks_per_unit,
                         int32_t requested);

#endif
