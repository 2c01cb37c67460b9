// SPDX-License-Identifier: MIT
/* The Vulkan decoding path's plan (vk_decode_plan.h). */
#include "vk_decode_plan.h"

#include <stdio.h>

uint32_t fa_vk_decode_shared_bytes(uint32_t d, uint32_t rows, uint32_t subgroup)
{
    const uint32_t q = rows * d * 4u;                    /* Q, then O, as f32 */
    const uint32_t p = FA_VK_DECODE_THREADS * rows * 4u; /* P per lane */
    const uint32_t offsets = FA_VK_DECODE_THREADS * 4u;  /* paged V rows per lane */
    const uint32_t stats = 2u * (FA_VK_DECODE_THREADS / subgroup) * rows * 4u; /* m, l */
    return q + p + offsets + stats;
}

uint32_t fa_vk_decode_matrix_shared_bytes(uint32_t d, uint32_t rows, uint32_t subgroup, uint32_t m)
{
    const uint32_t subgroups = FA_VK_DECODE_THREADS / subgroup;
    const uint32_t tiles = subgroups * 2u * m * (d + 8u) * 2u; /* K and V, m keys a subgroup */
    const uint32_t index = 4u * m * m;                         /* the index matrix */
    const uint32_t o = rows * d * 4u;                          /* the workgroup's O, f32 */
    const uint32_t stats = 2u * subgroups * rows * 4u;         /* m, l */
    return tiles + index + o + stats;
}

/* The subgroup size the pipeline runs at: the device's only one; else, where a pipeline may
 * require one, 32 (the rows of a V tile a subgroup loads) or the nearest the device has; else 0. */
static uint32_t subgroup_size(const fa_vk_decode_device *dev)
{
    if (dev->subgroup_min == dev->subgroup_max)
        return dev->subgroup_min;
    if (!dev->subgroup_required)
        return 0;
    return dev->subgroup_min > 32   ? dev->subgroup_min
           : dev->subgroup_max < 32 ? dev->subgroup_max
                                    : 32;
}

#define WHY(...) (snprintf(why, why_size, __VA_ARGS__), false)

bool fa_vk_decode_plan_select(const fa_vk_decode_device *dev, const fa_vk_decode_problem *pb,
                              fa_vk_decode_plan *plan, char *why, size_t why_size)
{
    *plan = (fa_vk_decode_plan){0};
    const int64_t gqa = pb->heads_q / pb->heads_kv, packed = pb->seq_q * gqa;
    if (packed > FA_VK_DECODE_MAX_ROWS)
        return WHY("%lld query rows per KV head (decoding takes up to %d)", (long long)packed,
                   FA_VK_DECODE_MAX_ROWS);
    if (pb->head_dim % 8 || pb->head_dim > 256 ||
        (pb->element_bytes != 2 && pb->element_bytes != 4))
        return WHY("head dim %lld, %u-byte elements", (long long)pb->head_dim, pb->element_bytes);
    if (!dev->subgroup_arithmetic)
        return WHY("no subgroup arithmetic in compute shaders");
    const uint32_t sg = subgroup_size(dev);
    if (!sg)
        return WHY("subgroups of %u-%u invocations and no way to require one", dev->subgroup_min,
                   dev->subgroup_max);
    if (sg < 4 || sg > 64 || FA_VK_DECODE_THREADS % sg ||
        dev->max_invocations < FA_VK_DECODE_THREADS)
        return WHY("subgroups of %u invocations, workgroups up to %u", sg, dev->max_invocations);
    const uint32_t d = (uint32_t)pb->head_dim;
    plan->rows = packed <= 4 ? 4u : FA_VK_DECODE_GROUP_ROWS;
    plan->row_groups = (uint32_t)((packed + plan->rows - 1) / plan->rows);
    plan->subgroup = sg;
    plan->shared_bytes = fa_vk_decode_shared_bytes(d, plan->rows, sg);
    if (plan->shared_bytes > dev->shared_memory_bytes)
        return WHY("%u rows at head dim %u need more than %u bytes of shared memory", plan->rows, d,
                   dev->shared_memory_bytes);
    plan->staged = pb->stageable && d <= FA_VK_DECODE_STAGED_MAX_DIM &&
                   plan->shared_bytes + FA_VK_DECODE_STAGED_BYTES <= dev->shared_memory_bytes;
    if (plan->staged)
        plan->shared_bytes += FA_VK_DECODE_STAGED_BYTES;
    if ((uint64_t)pb->heads_kv * plan->row_groups > dev->max_group_count_y)
        return WHY("%lld KV heads exceed maxComputeWorkGroupCount[1]", (long long)pb->heads_kv);
    plan->split =
        fa_split_choose(pb->batch * pb->heads_kv * plan->row_groups, pb->seq_k,
                        dev->compute_units ? dev->compute_units : FA_VK_DECODE_DEFAULT_UNITS,
                        FA_VK_DECODE_GROUPS_PER_UNIT, pb->num_splits);
    if (plan->split.splits > 1) {
        const uint64_t groups = (uint64_t)pb->batch * pb->heads_kv * plan->row_groups;
        plan->merge_in_split = groups <= FA_VK_DECODE_DONE_SLOTS;
        const uint64_t out_rows = (uint64_t)pb->batch * (uint64_t)pb->heads_q * (uint64_t)pb->seq_q;
        const uint64_t part_rows = (uint64_t)plan->split.splits * out_rows;
        plan->part_o_offset = FA_VK_DECODE_DONE_SLOTS;
        plan->part_lse_offset = plan->part_o_offset + (part_rows * d + 63) / 64 * 64;
        const uint64_t floats = plan->part_lse_offset + part_rows;
        plan->workspace_bytes = 4 * floats;
        if (floats > UINT32_MAX || plan->workspace_bytes > dev->max_buffer_bytes)
            return WHY("the chunks' workspace (%llu bytes) exceeds one binding",
                       (unsigned long long)plan->workspace_bytes);
    }
    return true;
}
