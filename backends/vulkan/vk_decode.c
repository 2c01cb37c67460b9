// SPDX-License-Identifier: MIT
/* The decoding forward on Vulkan: calls with at most 16 query rows per KV head run
 * shaders/vulkan/attn_decode.comp over chunks of the keys (vk_decode_plan.c chooses); several
 * chunks are merged by the last workgroup of each group in that dispatch, or, where the groups
 * outnumber the workspace's counts, by attn_merge.comp after it, in the same submission. In f16
 * on the matrix path, where the catalogue has a module for the device's shape, probed layout and
 * the head dim, the products run on cooperative matrices (matrix_module: 7-20 % faster at head
 * dim 128 on an H100, about 2x at 64); else at head dims up to 128, where shared memory allows,
 * the module that stages K (the plan's `staged`). Developer knobs: FA_VULKAN_DECODE=0 leaves
 * every call to the other kernels, =scalar keeps the scalar modules, =plain the unstaged one;
 * FA_VULKAN_DECODE_MERGE=kernel always merges with attn_merge.comp. */
#include "vk_internal.h"
#include "vk_matrix_catalogue.h"

#include <string.h>

/* Whether FA_VULKAN_DECODE is set to `value`. */
static bool decode_knob_is(fa_context *ctx, const char *value)
{
    const char *knob = fa_knob_value(ctx, FA_KNOB_VULKAN_DECODE);
    return knob && !strcmp(knob, value);
}

bool fa_vk_decode_plan_for(fa_context *ctx, const fa_attention_call *call, fa_vk_decode_plan *plan)
{
    /* FA_VULKAN_DECODE=0: off. */
    if (decode_knob_is(ctx, "0"))
        return false;
    /* attn_decode.comp has none of the variants (its push constants are full): the scalar
     * forward serves */
    if (call->window || call->softcap > 0.0f || call->has_alibi || call->has_bias)
        return false;
    const fa_vk_state *st = fa_vk_state_of(ctx);
    const fa_vk_physical *ph = st->phys;
    const fa_vk_decode_device dev = {
        .shared_memory_bytes = ph->info.shared_memory_bytes,
        .max_invocations = ph->max_group_size_x < ph->info.max_workgroup_size
                               ? ph->max_group_size_x
                               : ph->info.max_workgroup_size,
        .subgroup_min = ph->info.subgroup_size_min,
        .subgroup_max = ph->info.subgroup_size_max,
        /* size control is enabled with the matrix path (vk_device.c) */
        .subgroup_required = st->matrix && ph->size_control,
        .subgroup_arithmetic = ph->subgroup_arithmetic,
        .compute_units = ph->info.compute_units,
        .max_group_count_y = ph->max_group_count[1],
        .max_buffer_bytes = ph->info.max_buffer_bytes,
    };
    const fa_vk_decode_problem pb = {
        .batch = call->batch,
        .seq_q = call->seq_q,
        .seq_k = call->seq_k,
        .heads_q = call->heads_q,
        .heads_kv = call->heads_kv,
        .head_dim = call->head_dim,
        .element_bytes = call->dtype == FA_DTYPE_F32 ? 4u : 2u,
        .num_splits = call->num_splits,
        /* FA_VULKAN_DECODE=plain or sg32: the unstaged modules */
        .stageable = !decode_knob_is(ctx, "plain") && !decode_knob_is(ctx, "sg32") &&
                     fa_vk_kernel_built(FA_VK_DECODE_STAGED, fa_vk_storage_of(st, call->dtype)),
    };
    char why[160];
    if (fa_vk_decode_plan_select(&dev, &pb, plan, why, sizeof why)) {
        const char *merge = fa_knob_value(ctx, FA_KNOB_VULKAN_DECODE_MERGE);
        if (merge && !strcmp(merge, "kernel"))
            plan->merge_in_split = false;
        return true;
    }
    if (pb.seq_q * (pb.heads_q / pb.heads_kv) <= FA_VK_DECODE_MAX_ROWS)
        fa_log(ctx, FA_LOG_DEBUG, "vulkan: decoding path not taken: %s", why);
    return false;
}

/* The staged module where the plan says so; else the generic one, or with FA_VULKAN_DECODE=sg32,
 * where the plan runs at subgroups of 32, the one compiled for that size and unrolled (slower on
 * the H200: docs/PERF.md). */
static fa_vk_kernel plan_kernel(fa_context *ctx, const fa_vk_decode_plan *plan,
                                fa_vk_storage storage)
{
    if (plan->staged)
        return FA_VK_DECODE_STAGED;
    const bool sg32 = decode_knob_is(ctx, "sg32");
    return plan->subgroup == 32 && sg32 && fa_vk_kernel_built(FA_VK_DECODE_SG32, storage)
               ? FA_VK_DECODE_SG32
               : FA_VK_DECODE;
}

/* The catalogue's decoding module on cooperative matrices for this call, into spec's matrix
 * fields: f16 in 16-bit storage on the matrix path, the plan's subgroup size and at most the
 * shape's rows a workgroup, at a shape the device lists whose probed layout the module was
 * compiled for, where its shared memory fits; false where there is none (or FA_VULKAN_DECODE
 * names a scalar module). */
static bool matrix_module(fa_context *ctx, const fa_attention_call *call,
                          const fa_vk_decode_plan *plan, fa_vk_spec *spec)
{
    const fa_vk_state *st = fa_vk_state_of(ctx);
    const bool scalar = decode_knob_is(ctx, "scalar") || decode_knob_is(ctx, "plain") ||
                        decode_knob_is(ctx, "sg32");
    if (!st->matrix || scalar || fa_vk_storage_of(st, call->dtype) != FA_VK_F16_S16 ||
        call->dtype != FA_DTYPE_F16)
        return false;
    const fa_vk_matrix_caps *caps = &st->matrix_caps;
    for (uint32_t i = 0; i < fa_vk_catalogue_count; i++) {
        const fa_vk_matrix_tiling *t = &fa_vk_catalogue_tilings[i];
        if (t->kernel != FA_VK_MATRIX_DECODE || t->d != (uint32_t)call->head_dim ||
            t->subgroup != plan->subgroup || plan->rows > t->shape.m ||
            fa_vk_decode_matrix_shared_bytes(t->d, plan->rows, t->subgroup, t->shape.m) >
                st->phys->info.shared_memory_bytes)
            continue;
        for (uint32_t s = 0; s < caps->shape_count && s < FA_VK_MATRIX_MAX_SHAPES; s++) {
            if (memcmp(&caps->shapes[s], &t->shape, sizeof t->shape) ||
                memcmp(&caps->layouts[s], &t->layout, sizeof t->layout))
                continue;
            const fa_vk_matrix_plan p = {.shape = t->shape,
                                         .subgroup = t->subgroup,
                                         .subgroups = t->subgroups,
                                         .tm = t->tm,
                                         .bn = t->bn,
                                         .layout = t->layout};
            fa_vk_matrix_spec(&p, spec);
            return true;
        }
    }
    return false;
}

/* attn_decode.comp's ALIGNED: Q and K in whole 16-byte units, V and O in quads. */
static uint32_t views_aligned(const fa_vk_fwd_push *p, fa_dtype dtype)
{
    const uint32_t unit = dtype == FA_DTYPE_F32 ? 4u : 8u;
    const bool aligned = fa_vk_pv_aligned(p->q, unit) && fa_vk_pv_aligned(p->k, unit) &&
                         fa_vk_pv_aligned(p->v, 4) && fa_vk_pv_aligned(p->o, 4);
    return aligned ? 1u : 0u;
}

static fa_status record(fa_context *ctx, const fa_attention_call *call,
                        const fa_vk_decode_plan *plan)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    const int64_t B = call->batch, Sq = call->seq_q;
    const int64_t Hq = call->heads_q, Hkv = call->heads_kv;
    const bool split = plan->split.splits > 1;
    const fa_vk_storage storage = fa_vk_storage_of(st, call->dtype);
    struct {
        fa_vk_fwd_push common;
        uint32_t split_keys, bt_off, bt_sb, page_size, num_pages;
    } push = {
        fa_vk_fwd_push_of(call),
        (uint32_t)plan->split.keys_per_split,
        (uint32_t)call->block_table.offset,
        (uint32_t)call->block_table.stride_b,
        (uint32_t)call->page_size, /* 0: not paged */
        (uint32_t)call->num_pages,
    };
    _Static_assert(sizeof push == 128, "the decoding forward's push constants fill 128 bytes");
    fa_vk_spec spec = {.head_dim = (uint32_t)call->head_dim,
                       .causal = call->causal,
                       .gqa = (uint32_t)(Hq / Hkv),
                       .dec_rw = plan->rows,
                       .dec_sg = plan->subgroup,
                       .dec_merge = plan->merge_in_split,
                       .dec_aligned = views_aligned(&push.common, call->dtype)};
    const fa_vk_spec merge_spec = {.head_dim = (uint32_t)call->head_dim};
    const fa_vk_kernel kernel =
        matrix_module(ctx, call, plan, &spec) ? FA_VK_DECODE_CM : plan_kernel(ctx, plan, storage);
    VkPipeline decode, merge = VK_NULL_HANDLE;
    fa_status s = fa_vk_pipeline_get(ctx, kernel, storage, &spec, &decode);
    if (s == FA_OK && split && !plan->merge_in_split)
        s = fa_vk_pipeline_get(ctx, FA_VK_MERGE, storage, &merge_spec, &merge);
    if (s == FA_OK)
        s = fa_vk_begin(ctx);
    if (s != FA_OK)
        return s;
    if (split && st->decode_counts_unset) { /* a new workspace: its counts start at 0 */
        st->vk.vkCmdFillBuffer(st->cmd, st->decode_workspace.buffer, 0, 4 * FA_VK_DECODE_DONE_SLOTS,
                               0);
        fa_vk_barrier(st);
    }
    const VkBuffer out = fa_vk_handle(&call->o);
    const VkBuffer lse_buf = call->has_lse ? fa_vk_handle(&call->lse) : out;
    const VkBuffer ws = split ? st->decode_workspace.buffer : out;
    const VkBuffer buffers[8] = {
        fa_vk_handle(&call->q),
        fa_vk_handle(&call->k),
        fa_vk_handle(&call->v),
        out,
        lse_buf,
        call->has_seqlens_k ? fa_vk_handle(&call->seqlens_k) : fa_vk_handle(&call->q),
        ws,
        call->has_block_table ? fa_vk_handle(&call->block_table) : fa_vk_handle(&call->q),
    };
    s = fa_vk_dispatch(ctx, kernel, decode, buffers, &push, sizeof push,
                       (uint32_t)plan->split.splits, (uint32_t)Hkv * plan->row_groups, (uint32_t)B);
    if (s != FA_OK || !split || plan->merge_in_split)
        return s;
    fa_vk_barrier(st);
    struct {
        fa_vk_push_view o, lse;
        uint32_t seq_q, heads_q, chunks, ws_o_off, ws_lse_off, has_lse;
    } merge_push = {push.common.o,
                    push.common.lse,
                    (uint32_t)Sq,
                    (uint32_t)Hq,
                    (uint32_t)plan->split.splits,
                    (uint32_t)plan->part_o_offset,
                    (uint32_t)plan->part_lse_offset,
                    call->has_lse};
    const VkBuffer merge_buffers[3] = {ws, out, lse_buf};
    return fa_vk_dispatch(ctx, FA_VK_MERGE, merge, merge_buffers, &merge_push, sizeof merge_push,
                          (uint32_t)Sq, (uint32_t)Hq, (uint32_t)B);
}

fa_status fa_vk_decode_forward(fa_context *ctx, const fa_attention_call *call,
                               const fa_vk_decode_plan *plan)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    fa_status s = FA_OK;
    if (plan->workspace_bytes) {
        bool fresh = false;
        s = fa_vk_decode_workspace(ctx, plan->workspace_bytes, &fresh);
        st->decode_counts_unset |= fresh;
    }
    if (s == FA_OK)
        s = fa_vk_finish(ctx, record(ctx, call, plan), false);
    if (s == FA_OK && plan->workspace_bytes)
        st->decode_counts_unset = false;
    return s;
}
