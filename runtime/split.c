// SPDX-License-Identifier: MIT
/* The split-key forward's chunk count (fa_split.h). */
#include "fa_split.h"

static int64_t div_up(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

fa_split fa_split_choose(int64_t items, int64_t seq_k, uint32_t units, uint32_t blocks_per_unit,
                         int32_t requested)
{
    int64_t want;
    if (requested > 0) {
        want = requested;
    } else {
        const int64_t target =
            (int64_t)(units ? units : 1) * (blocks_per_unit ? blocks_per_unit : 1);
        want = items > 0 ? div_up(target, items) : 1;
        const int64_t by_keys = seq_k / FA_SPLIT_MIN_KEYS;
        if (want > by_keys)
            want = by_keys;
        /* Under four waves, long chunks leave the last wave's blocks alone on the device. */
        if (items < 4 * target && want < div_up(seq_k, FA_SPLIT_MAX_KEYS))
            want = div_up(seq_k, FA_SPLIT_MAX_KEYS);
    }
    if (want > FA_MAX_SPLITS)
        want = FA_MAX_SPLITS;
    if (want < 1 || seq_k <= 0)
        want = 1;
    /* Equal chunks of whole quanta; fewer chunks where the last ones would be empty. */
    const int64_t quanta = div_up(seq_k > 0 ? seq_k : 1, FA_SPLIT_KEY_QUANTUM);
    if (want > quanta)
        want = quanta;
    const int64_t per = div_up(quanta, want) * FA_SPLIT_KEY_QUANTUM;
    return (fa_split){(int32_t)div_up(seq_k > 0 ? seq_k : 1, per), per};
}
