// SPDX-License-Identifier: MIT
/* The Vulkan decoding path's plan (backends/vulkan/vk_decode_plan.c) on the property sets of
 * devices that are not here: which calls take it, that the tiling fits each device's shared
 * memory and subgroups, and the chunk count and workspace. */
#include <criterion/criterion.h>

#include "vk_decode_plan.h"

/* NVIDIA (the H200's Vulkan driver), AMD RDNA (wave32/64), Intel Arc (SIMD8-32), lavapipe. */
#define DEVICE(shared_, min_, max_, units_, buffer_)                                               \
    {                                                                                              \
        .shared_memory_bytes = (shared_), .max_invocations = 1024, .subgroup_min = (min_),         \
        .subgroup_max = (max_), .subgroup_required = true, .subgroup_arithmetic = true,            \
        .compute_units = (units_), .max_group_count_y = 65535, .max_buffer_bytes = (buffer_)       \
    }
static const fa_vk_decode_device nvidia = DEVICE(49152, 32, 32, 132, 4ull << 30);
static const fa_vk_decode_device amd = DEVICE(65536, 32, 64, 96, 4ull << 30);
static const fa_vk_decode_device intel = DEVICE(65536, 8, 32, 0, 4ull << 30);
static const fa_vk_decode_device lavapipe = DEVICE(32768, 8, 8, 0, 128ull << 20);

static fa_vk_decode_problem decode(int64_t b, int64_t sq, int64_t sk, int64_t hq, int64_t hkv,
                                   int64_t d, uint32_t bytes)
{
    return (fa_vk_decode_problem){b, sq, sk, hq, hkv, d, bytes, 0, false};
}

static void check_fits(const fa_vk_decode_device *dev, const fa_vk_decode_problem *pb,
                       const fa_vk_decode_plan *p)
{
    const uint32_t packed = (uint32_t)(pb->seq_q * (pb->heads_q / pb->heads_kv));
    cr_assert(p->rows == 4 || p->rows == 8, "rows %u", p->rows);
    cr_assert(p->rows == 4 || packed > 4, "8 rows for %u", packed);
    cr_assert_eq(p->row_groups, (packed + p->rows - 1) / p->rows);
    cr_assert(p->subgroup >= dev->subgroup_min && p->subgroup <= dev->subgroup_max);
    cr_assert_eq(FA_VK_DECODE_THREADS % p->subgroup, 0);
    cr_assert_leq(p->shared_bytes, dev->shared_memory_bytes);
    cr_assert_eq(p->shared_bytes,
                 fa_vk_decode_shared_bytes((uint32_t)pb->head_dim, p->rows, p->subgroup) +
                     (p->staged ? FA_VK_DECODE_STAGED_BYTES : 0));
    cr_assert(!p->staged || (pb->stageable && pb->head_dim <= FA_VK_DECODE_STAGED_MAX_DIM));
    cr_assert(p->split.splits >= 1 && p->split.splits <= FA_MAX_SPLITS);
    if (p->split.splits > 1) {
        const uint64_t rows =
            (uint64_t)p->split.splits * (uint64_t)(pb->batch * pb->heads_q * pb->seq_q);
        const uint64_t groups = (uint64_t)pb->batch * pb->heads_kv * p->row_groups;
        cr_assert_eq(p->part_o_offset, FA_VK_DECODE_DONE_SLOTS);
        cr_assert_eq(p->part_o_offset % 64, 0); /* the chunks' O 256-byte aligned */
        cr_assert_geq(p->part_lse_offset, p->part_o_offset + rows * (uint64_t)pb->head_dim);
        cr_assert_eq(p->workspace_bytes, 4 * (p->part_lse_offset + rows));
        cr_assert_eq(p->merge_in_split, groups <= FA_VK_DECODE_DONE_SLOTS);
    } else {
        cr_assert_eq(p->workspace_bytes, 0);
        cr_assert(!p->merge_in_split);
    }
}

Test(vk_decode_plan, every_device_takes_decoding_within_its_limits)
{
    const fa_vk_decode_device *devs[] = {&nvidia, &amd, &intel, &lavapipe};
    const int64_t dims[] = {8, 40, 64, 96, 128, 200, 256};
    const int64_t rows[][2] = {{1, 1}, {1, 4}, {1, 8}, {4, 4}, {2, 8}, {16, 1}, {1, 16}, {3, 4}};
    int taken = 0, tried = 0;
    for (size_t v = 0; v < 4; v++)
        for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
            for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
                for (uint32_t bytes = 2; bytes <= 4; bytes += 2) {
                    const fa_vk_decode_problem pb =
                        decode(2, rows[r][0], 5000, 8 * rows[r][1], 8, dims[d], bytes);
                    fa_vk_decode_plan p;
                    char why[160];
                    tried++;
                    if (fa_vk_decode_plan_select(devs[v], &pb, &p, why, sizeof why)) {
                        taken++;
                        check_fits(devs[v], &pb, &p);
                    } else {
                        cr_assert(false, "%s", why); /* every case fits every device */
                    }
                }
    /* the common cases must all take it on the GPUs: f16 up to head dim 128 */
    for (size_t v = 0; v < 3; v++)
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
            fa_vk_decode_problem pb = decode(1, rows[r][0], 32768, 32 * rows[r][1] / 4, 8, 128, 2);
            pb.heads_q = 8 * rows[r][1];
            fa_vk_decode_plan p;
            char why[160];
            cr_expect(fa_vk_decode_plan_select(devs[v], &pb, &p, why, sizeof why), "%s", why);
        }
    cr_expect_gt(taken, tried / 2, "%d of %d", taken, tried);
}

Test(vk_decode_plan, the_rule_refuses_what_it_cannot_run)
{
    fa_vk_decode_plan p;
    char why[160];
    fa_vk_decode_problem pb = decode(1, 5, 4096, 32, 8, 128, 2); /* 20 rows per KV head */
    cr_expect_not(fa_vk_decode_plan_select(&nvidia, &pb, &p, why, sizeof why));
    cr_expect(strstr(why, "20 query rows"), "%s", why);
    pb = decode(1, 1, 4096, 32, 8, 264, 2);
    cr_expect_not(fa_vk_decode_plan_select(&nvidia, &pb, &p, why, sizeof why));
    fa_vk_decode_device no_arith = nvidia;
    no_arith.subgroup_arithmetic = false;
    pb = decode(1, 1, 4096, 32, 8, 128, 2);
    cr_expect_not(fa_vk_decode_plan_select(&no_arith, &pb, &p, why, sizeof why));
    cr_expect(strstr(why, "arithmetic"), "%s", why);
    fa_vk_decode_device wide = amd; /* subgroups of 128 only */
    wide.subgroup_min = wide.subgroup_max = 128;
    cr_expect_not(fa_vk_decode_plan_select(&wide, &pb, &p, why, sizeof why));
    fa_vk_decode_device loose = amd; /* 32 or 64, and no way to ask for one */
    loose.subgroup_required = false;
    cr_expect_not(fa_vk_decode_plan_select(&loose, &pb, &p, why, sizeof why));
    cr_expect(strstr(why, "require"), "%s", why);
    /* a workspace beyond one binding */
    fa_vk_decode_device small = nvidia;
    small.max_buffer_bytes = 1024;
    pb = decode(64, 1, 4096, 32, 8, 128, 2);
    pb.num_splits = 16;
    cr_expect_not(fa_vk_decode_plan_select(&small, &pb, &p, why, sizeof why));
    cr_expect(strstr(why, "workspace"), "%s", why);
}

Test(vk_decode_plan, chunks_follow_the_device_and_the_request)
{
    fa_vk_decode_plan p;
    char why[160];
    /* B=1, 8 KV heads, 32k keys on 132 units x 2: 33 chunks wanted, 1,024 keys each */
    fa_vk_decode_problem pb = decode(1, 1, 32768, 32, 8, 128, 2);
    cr_assert(fa_vk_decode_plan_select(&nvidia, &pb, &p, why, sizeof why), "%s", why);
    cr_expect_eq(p.split.splits, 32);
    cr_expect_eq(p.split.keys_per_split, 1024);
    cr_expect_eq(p.rows, 4);
    cr_expect_eq(p.row_groups, 1);
    cr_expect_eq(p.subgroup, 32);
    /* the subgroup size each device runs it at */
    cr_assert(fa_vk_decode_plan_select(&amd, &pb, &p, why, sizeof why), "%s", why);
    cr_expect_eq(p.subgroup, 32);
    cr_assert(fa_vk_decode_plan_select(&lavapipe, &pb, &p, why, sizeof why), "%s", why);
    cr_expect_eq(p.subgroup, 8);
    /* 16 packed rows (4 queries x GQA 4): two groups of 8, counted as items of the split */
    pb = decode(1, 4, 32768, 32, 8, 128, 2);
    cr_assert(fa_vk_decode_plan_select(&nvidia, &pb, &p, why, sizeof why), "%s", why);
    cr_expect_eq(p.rows, 8);
    cr_expect_eq(p.row_groups, 2);
    cr_expect_eq(p.split.splits,
                 fa_split_choose(16, 32768, 132, FA_VK_DECODE_GROUPS_PER_UNIT, 0).splits);
    pb = decode(1, 1, 32768, 32, 8, 128, 2);
    /* an unknown unit count: FA_VK_DECODE_DEFAULT_UNITS */
    cr_assert(fa_vk_decode_plan_select(&intel, &pb, &p, why, sizeof why), "%s", why);
    cr_expect_eq(p.split.splits, fa_split_choose(8, 32768, FA_VK_DECODE_DEFAULT_UNITS,
                                                 FA_VK_DECODE_GROUPS_PER_UNIT, 0)
                                     .splits);
    /* many sequences fill the device without chunks (1,024 workgroups against 264) */
    pb = decode(128, 1, 4096, 32, 8, 128, 2);
    cr_assert(fa_vk_decode_plan_select(&nvidia, &pb, &p, why, sizeof why), "%s", why);
    cr_expect_eq(p.split.splits, 1);
    cr_expect_eq(p.workspace_bytes, 0);
    /* a request is kept */
    pb.num_splits = 7;
    cr_assert(fa_vk_decode_plan_select(&nvidia, &pb, &p, why, sizeof why), "%s", why);
    cr_expect_eq(p.split.splits, 7);
    cr_expect_gt(p.workspace_bytes, 0);
    cr_expect(p.merge_in_split, "1,024 groups have counts");
    /* more groups than counts: the merge kernel */
    pb = decode(FA_VK_DECODE_DONE_SLOTS / 8 + 1, 1, 4096, 32, 8, 128, 2);
    pb.num_splits = 2;
    cr_assert(fa_vk_decode_plan_select(&nvidia, &pb, &p, why, sizeof why), "%s", why);
    cr_expect_eq(p.split.splits, 2);
    cr_expect(!p.merge_in_split);
    check_fits(&nvidia, &pb, &p);
}

/* The staged module (K through 32 KiB more of shared memory) where the build has it for the
 * call, at head dims up to 128, and the memory fits: NVIDIA's 48 KiB, AMD's and Intel's 64 KiB,
 * not lavapipe's 32 KiB; never at 256 (it spilled there), nor where the build has no module. */
Test(vk_decode_plan, the_staged_module_where_its_memory_fits)
{
    const fa_vk_decode_device *gpus[] = {&nvidia, &amd, &intel};
    const int64_t dims[] = {64, 128, 200, 256};
    for (size_t v = 0; v < 3; v++)
        for (size_t d = 0; d < 4; d++)
            for (int stageable = 0; stageable < 2; stageable++) {
                fa_vk_decode_problem pb = decode(4, 1, 32768, 32, 8, dims[d], 2);
                pb.stageable = stageable;
                fa_vk_decode_plan p;
                char why[160];
                cr_assert(fa_vk_decode_plan_select(gpus[v], &pb, &p, why, sizeof why), "%s", why);
                check_fits(gpus[v], &pb, &p);
                cr_assert_eq(p.staged, stageable && dims[d] <= 128, "device %zu D=%lld", v,
                             (long long)dims[d]);
            }
    fa_vk_decode_problem pb = decode(1, 1, 32768, 32, 8, 128, 2);
    pb.stageable = true;
    fa_vk_decode_plan p;
    char why[160];
    cr_assert(fa_vk_decode_plan_select(&lavapipe, &pb, &p, why, sizeof why), "%s", why);
    cr_assert_not(p.staged);
    cr_assert_leq(p.shared_bytes, lavapipe.shared_memory_bytes);
    /* 16 query rows a KV head (8 a workgroup): still within NVIDIA's 48 KiB at 128 */
    pb = decode(1, 2, 32768, 64, 8, 128, 2);
    pb.stageable = true;
    cr_assert(fa_vk_decode_plan_select(&nvidia, &pb, &p, why, sizeof why), "%s", why);
    cr_assert(p.staged && p.rows == 8 && p.shared_bytes <= nvidia.shared_memory_bytes);
}

Test(vk_decode_plan, the_matrix_module_where_its_memory_fits)
{
    /* NVIDIA's 48 KiB (16x16x16, subgroups of 32): every head dim up to 128 at 8 rows a
     * workgroup; lavapipe's 32 KiB (8x8x8, subgroups of 8, 16 subgroups' tiles): up to 48 */
    for (uint32_t d = 16; d <= 128; d += 16)
        cr_assert_leq(fa_vk_decode_matrix_shared_bytes(d, 8, 32, 16), 48u * 1024u, "d=%u", d);
    cr_assert_leq(fa_vk_decode_matrix_shared_bytes(48, 8, 8, 8), 32u * 1024u);
    cr_assert_gt(fa_vk_decode_matrix_shared_bytes(56, 8, 8, 8), 32u * 1024u);
    /* the tiles (K and V, m keys of d + 8 halfs per subgroup), the index matrix, O, m and l */
    cr_assert_eq(fa_vk_decode_matrix_shared_bytes(128, 4, 32, 16),
                 4 * 2 * 16 * 136 * 2 + 4 * 16 * 16 + 4 * 128 * 4 + 2 * 4 * 4 * 4);
}
