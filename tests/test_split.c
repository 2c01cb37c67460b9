// SPDX-License-Identifier: MIT
/* The split-key forward's chunk count (runtime/split.c): pure, so every rule is checked here. */
#include <criterion/criterion.h>

#include "fa_split.h"

static void check_cover(fa_split s, int64_t seq_k)
{
    const int64_t keys = seq_k > 0 ? seq_k : 1;
    cr_assert(s.splits >= 1 && s.splits <= FA_MAX_SPLITS, "%d chunks", s.splits);
    cr_assert(s.keys_per_split > 0 && s.keys_per_split % FA_SPLIT_KEY_QUANTUM == 0);
    /* every key in a chunk, no chunk empty */
    cr_assert(s.splits * s.keys_per_split >= keys, "%d x %lld < %lld", s.splits,
              (long long)s.keys_per_split, (long long)keys);
    cr_assert((s.splits - 1) * s.keys_per_split < keys, "an empty chunk: %d x %lld for %lld",
              s.splits, (long long)s.keys_per_split, (long long)keys);
}

Test(split, chunks_fill_the_device_and_keep_their_keys)
{
    /* 8 work items on 132 units x 8: 132 wanted, 128 allowed by 256-key chunks of 32k */
    fa_split s = fa_split_choose(8, 32768, 132, 8, 0);
    cr_expect_eq(s.splits, 128);
    cr_expect_eq(s.keys_per_split, 256);
    /* enough work items already */
    cr_expect_eq(fa_split_choose(8192, 32768, 132, 8, 0).splits, 1);
    /* under four waves: no chunk over FA_SPLIT_MAX_KEYS keys */
    cr_expect_eq(fa_split_choose(128, 32768, 132, 2, 0).splits, 32768 / FA_SPLIT_MAX_KEYS);
    cr_expect_eq(fa_split_choose(2048, 32768, 132, 2, 0).splits, 1);
    /* a short cache: no chunk under FA_SPLIT_MIN_KEYS keys */
    cr_expect_eq(fa_split_choose(1, 300, 132, 8, 0).splits, 1);
    cr_expect_eq(fa_split_choose(1, 512, 132, 8, 0).splits, 2);
    /* a huge cache on a huge device: at most FA_MAX_SPLITS */
    cr_expect_eq(fa_split_choose(1, 1 << 24, 1000, 8, 0).splits, FA_MAX_SPLITS);
}

Test(split, a_request_is_kept_where_there_are_keys)
{
    cr_expect_eq(fa_split_choose(8, 32768, 132, 8, 1).splits, 1);
    cr_expect_eq(fa_split_choose(8, 32768, 132, 8, 3).splits, 3);
    /* 100 keys are two 64-key quanta: two chunks at most */
    cr_expect_eq(fa_split_choose(8, 100, 132, 8, 50).splits, 2);
    cr_expect_eq(fa_split_choose(1, 1 << 20, 1, 1, FA_MAX_SPLITS).splits, FA_MAX_SPLITS);
    /* above the limit: clamped (the runtime rejects such requests before) */
    cr_expect_eq(fa_split_choose(1, 1 << 20, 1, 1, FA_MAX_SPLITS + 5).splits, FA_MAX_SPLITS);
}

Test(split, every_shape_is_covered_without_empty_chunks)
{
    const int64_t keys[] = {0, 1, 63, 64, 65, 255, 256, 1000, 4096, 4097, 32768, 100000, 1 << 22};
    const int64_t items[] = {0, 1, 7, 64, 1000, 100000};
    const int32_t asked[] = {0, 1, 2, 3, 17, 64, 255, 256};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        for (size_t i = 0; i < sizeof items / sizeof items[0]; i++)
            for (size_t a = 0; a < sizeof asked / sizeof asked[0]; a++)
                for (uint32_t units = 0; units <= 200; units += 100)
                    check_cover(fa_split_choose(items[i], keys[k], units, 8, asked[a]), keys[k]);
}
