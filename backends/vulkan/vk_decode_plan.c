// SPDX-License-Identifier: MIT
/* The Vulkan decoding path's plan (vk_decode_plan.h). */
#include "vk_decode_plan.h"

#include <stdio.h>

/* Rows padded to a multiple of 4 and of the score phase's row parts, as the shader pads them
 * (RWP). */
static uint32_t padded_rows(uint32_t rows, uint32_t bn)
{
    const uint32_t parts = FA_VK_DECODE_THREADS / bn, align = parts > 4u ? parts : 4u;
    return (rows + align - 1u) / align * align;
}

uint32_t fa_vk_decode_shared_bytes(uint32_t d, uint32_t element_bytes, uint32_t rows, uint32_t bn,
                                   uint32_t subgroup_min)
{
    const uint32_t units = d * element_bytes / 16u, rwp = padded_rows(rows, bn);
    const uint32_t tiles = 2u * bn * (units + 1u) * 16u; /* K and V, rows padded by 16 bytes */
    const uint32_t q = rwp * (d / 4u) * 16u;             /* Q rows as f32 */
    const uint32_t p = rwp * bn * 4u;                    /* P */
    const uint32_t red = FA_VK_DECODE_THREADS / subgroup_min * rwp * 4u; /* per-subgroup rows */
    return tiles + q + p + red + rwp * 4u;                               /* + final maxima */
}

/* Whether O (padded rows x head dim, f32), which the K/V tiles hold at the end of a chunk, fits
 * in them. */
static bool scratch_fits(uint32_t d, uint32_t element_bytes, uint32_t rows, uint32_t bn)
{
    const uint32_t units = d * element_bytes / 16u;
    return (uint64_t)padded_rows(rows, bn) * (d / 4u) <= 2ull * bn * (units + 1u);
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
    if (dev->subgroup_min < 4 || dev->subgroup_max > 64 ||
        FA_VK_DECODE_THREADS % dev->subgroup_max || dev->max_invocations < FA_VK_DECODE_THREADS)
        return WHY("subgroups of %u-%u invocations, workgroups up to %u", dev->subgroup_min,
                   dev->subgroup_max, dev->max_invocations);
    const uint32_t d = (uint32_t)pb->head_dim, rows = (uint32_t)packed;
    static const uint32_t tiles[3] = {64, 32, 16};
    for (int i = 0; i < 3 && !plan->bn; i++) {
        const uint32_t bn = tiles[i];
        if (pb->tile && bn != pb->tile)
            continue;
        const uint32_t bytes =
            fa_vk_decode_shared_bytes(d, pb->element_bytes, rows, bn, dev->subgroup_min);
        if (bn >= dev->subgroup_max && bytes <= dev->shared_memory_bytes &&
            scratch_fits(d, pb->element_bytes, rows, bn)) {
            plan->bn = bn;
            plan->shared_bytes = bytes;
        }
    }
    if (!plan->bn)
        return WHY("%u rows at head dim %u need more than %u bytes of shared memory", rows, d,
                   dev->shared_memory_bytes);
    plan->rows = rows;
    plan->subgroups = FA_VK_DECODE_THREADS / dev->subgroup_min;
    if ((uint64_t)pb->heads_kv > dev->max_group_count_y)
        return WHY("%lld KV heads exceed maxComputeWorkGroupCount[1]", (long long)pb->heads_kv);
    plan->split =
        fa_split_choose(pb->batch * pb->heads_kv, pb->seq_k,
                        dev->compute_units ? dev->compute_units : FA_VK_DECODE_DEFAULT_UNITS,
                        FA_VK_DECODE_GROUPS_PER_UNIT, pb->num_splits);
    if (plan->split.splits > 1) {
        const uint64_t out_rows = (uint64_t)pb->batch * (uint64_t)pb->heads_q * (uint64_t)pb->seq_q;
        const uint64_t part_rows = (uint64_t)plan->split.splits * out_rows;
        plan->part_lse_offset = (part_rows * d + 63) / 64 * 64;
        const uint64_t floats = plan->part_lse_offset + part_rows;
        plan->workspace_bytes = 4 * floats;
        if (floats > UINT32_MAX || plan->workspace_bytes > dev->max_buffer_bytes)
            return WHY("the chunks' workspace (%llu bytes) exceeds one binding",
                       (unsigned long long)plan->workspace_bytes);
    }
    return true;
}
