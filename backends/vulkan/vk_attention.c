// SPDX-License-Identifier: MIT
/* Attention on Vulkan: tile sizes chosen from the device's shared memory and workgroup limits,
 * the limits a call must fit (checked before any work is issued), and the recording of the
 * forward pass and of the three backward passes (Delta, dK/dV, dQ) into one submission each. */
#include "fa_bwd_tiling.h"
#include "fa_fwd_tiling.h"
#include "vk_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PREP_ROWS = 128 }; /* attn_bwd_prep.comp: query rows per workgroup */

/* Invocations one workgroup may have along x (the only dimension the kernels use). */
static uint64_t max_invocations(const fa_vk_physical *ph)
{
    uint64_t max_wg = ph->info.max_workgroup_size;
    return ph->max_group_size_x < max_wg ? ph->max_group_size_x : max_wg;
}

/* ---- forward tiling (see shaders/vulkan/attn_fwd.comp) --------------------------------------- */

/* Bytes of shared memory the forward's unused tile form takes: with 16-bit tiles the shader
 * still declares the f32 Q and K/V tiles, one 16-byte element each. */
static uint64_t fwd_unused_bytes(bool tile16)
{
    return tile16 ? 32 : 0;
}

/* The forward tiling (runtime/fa_fwd_tiling.h) that fits the device's shared memory and
 * workgroup limits; f16 and bf16 inputs may keep their tiles in 16-bit form. */
static bool fwd_select(const fa_context *ctx, const fa_vk_physical *ph, uint32_t d, fa_dtype dtype,
                       fa_fwd_tiling *t)
{
    const bool tile16_ok = dtype != FA_DTYPE_F32;
    const uint64_t smem = ph->info.shared_memory_bytes, unused = fwd_unused_bytes(tile16_ok);
    return fa_fwd_tiling_select((int)d, tile16_ok, smem > unused ? smem - unused : 0,
                                max_invocations(ph), fa_knob_value(ctx, FA_KNOB_VULKAN_FWD_TILES),
                                t);
}

/* The forward's tuning variant (VARIANT and UNROLL in attn_fwd.comp): bits from
 * FA_VULKAN_FWD_VARIANT, default 3 (1: K converted one load at a time in S, 16-bit tiles only;
 * 2: K and V in separate shared tiles, loaded in pieces, only where one more K/V tile fits; both
 * took D = 128 from 28.7 to 30.4 TF/s on the H200), and a power of 2 up to 32 from
 * FA_VULKAN_FWD_UNROLL (steps per iteration of the step loops, which the driver then keeps as
 * loops; default 0, left to the driver). */
static void fwd_tuning(const fa_context *ctx, const fa_vk_physical *ph, uint32_t d,
                       const fa_fwd_tiling *t, fa_vk_spec *spec)
{
    const char *env = fa_knob_value(ctx, FA_KNOB_VULKAN_FWD_VARIANT);
    uint32_t v = env ? (uint32_t)strtoul(env, NULL, 10) & 3u : 3u;
    if (!t->tile16)
        v &= ~1u;
    const uint64_t tile = t->tile16 ? 2 * (uint64_t)t->bn * (d + 8) : 4 * (uint64_t)t->bn * (d + 4);
    if (t->local_bytes + tile + fwd_unused_bytes(t->tile16) > ph->info.shared_memory_bytes)
        v &= ~2u;
    env = fa_knob_value(ctx, FA_KNOB_VULKAN_FWD_UNROLL);
    uint32_t u = env ? (uint32_t)strtoul(env, NULL, 10) : 0;
    if (u > 32 || (u & (u - 1)))
        u = 0;
    spec->fwd_variant = v;
    spec->fwd_unroll = u;
}

/* ---- backward tiling (see shaders/vulkan/fa_backward.glsl) ---------------------------------- */

/* The backward tiling (runtime/fa_bwd_tiling.h) that fits the device, with a margin below its
 * shared memory for what a driver adds (alignment between shared variables); the passes keep 4
 * strides (16 bytes) in shared memory. Above head dim 64, 64 x 32 tiles on 256 invocations are
 * preferred: with 2-step loops (bwd_unroll) they measured 17.4 TF/s on the H200's NVIDIA driver
 * against 14.9 for the shared default (f16, D = 128, N = 16k). */
static bool bwd_select(const fa_context *ctx, const fa_vk_physical *ph, int d, fa_bwd_tiling *t)
{
    static const int wide[3] = {64, 32, 256};
    const uint64_t smem = ph->info.shared_memory_bytes;
    return fa_bwd_tiling_select(d, smem > 256 ? smem - 256 : 0, 16, max_invocations(ph),
                                fa_knob_value(ctx, FA_KNOB_VULKAN_BWD_TILES), d > 64 ? wide : NULL,
                                t);
}

/* The cooperative-matrix plan of `kernel` for this call: f16 inputs in 16-bit storage on a
 * context whose matrix path is on (vk_device.c), and a tiling that fits (vk_matrix_plan.c;
 * FA_VULKAN_MATRIX_FWD_TILES / _BWD_TILES = "tm,subgroups,bn" override it, for tuning). False:
 * the scalar shaders serve the call. */
static bool matrix_plan(const fa_context *ctx, fa_vk_matrix_kernel kernel,
                        const fa_attention_call *call, fa_vk_matrix_plan *plan)
{
    const fa_vk_state *st = ctx->backend_state;
    if (!st->matrix || !st->storage16 || call->dtype != FA_DTYPE_F16)
        return false;
    char why[160];
    const char *tiles =
        fa_knob_value(ctx, kernel == FA_VK_MATRIX_FWD ? FA_KNOB_VULKAN_MATRIX_FWD_TILES
                                                      : FA_KNOB_VULKAN_MATRIX_BWD_TILES);
    return fa_vk_matrix_plan_select(kernel, &st->matrix_caps, (uint32_t)call->head_dim, tiles, plan,
                                    why, sizeof why);
}

/* The backward's two matrix plans, or false where either pass has none (both passes then run
 * the scalar shaders, which share one tiling). */
static bool matrix_plans_bwd(const fa_context *ctx, const fa_attention_call *call,
                             fa_vk_matrix_plan *dkdv, fa_vk_matrix_plan *dq)
{
    return matrix_plan(ctx, FA_VK_MATRIX_DKDV, call, dkdv) &&
           matrix_plan(ctx, FA_VK_MATRIX_DQ, call, dq);
}

void fa_vk_matrix_spec(const fa_vk_matrix_plan *p, fa_vk_spec *spec)
{
    spec->cm_m = p->shape.m;
    spec->cm_n = p->shape.n;
    spec->cm_k = p->shape.k;
    spec->cm_sg = p->subgroup;
    spec->cm_nsg = p->subgroups;
    spec->cm_tm = p->tm;
    spec->cm_bn = p->bn;
    spec->cm_layout = p->layout;
}

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return (a + b - 1) / b;
}

/* The largest element index a view reaches, or UINT64_MAX on overflow. */
static uint64_t last_index(const fa_view *v, int64_t batch, int64_t seq, int64_t heads, int64_t dim)
{
    if (!batch || !seq || !heads || !dim)
        return v->offset;
    return v->offset + (uint64_t)(batch - 1) * (uint64_t)v->stride_b +
           (uint64_t)(seq - 1) * (uint64_t)v->stride_s +
           (uint64_t)(heads - 1) * (uint64_t)v->stride_h + (uint64_t)(dim - 1);
}

/* The floats of workspace a call needs: the backward's LSE2 and Delta (B Hq Sq each), then
 * ALiBi's slopes packed (B, Hq), then the bias's view (4 words) (record_variant_data); the
 * forward, the last two alone. */
static uint64_t workspace_floats(const fa_attention_call *call, bool backward)
{
    const uint64_t bh = (uint64_t)call->batch * (uint64_t)call->heads_q;
    return (backward ? 2 * bh * (uint64_t)call->seq_q : 0) + (call->has_alibi ? bh : 0) +
           (call->has_bias ? 4 : 0);
}

/* Records what the shaders read of ALiBi and the bias from the workspace (their push
 * constants have no room for these views), from float `at` on: the call's slopes, packed
 * (batch, query head) whatever their strides (a slope per head repeated for each batch entry),
 * then the bias's offset and batch, query and head strides as 32-bit words; and a barrier before
 * the dispatches that read them. */
static fa_status record_variant_data(fa_context *ctx, const fa_attention_call *call, uint64_t at)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    const uint64_t B = (uint64_t)call->batch, Hq = (uint64_t)call->heads_q;
    if (call->has_bias) {
        const fa_view *bv = &call->bias;
        const uint32_t words[4] = {(uint32_t)bv->offset, (uint32_t)bv->stride_b,
                                   (uint32_t)bv->stride_s, (uint32_t)bv->stride_h};
        st->vk.vkCmdUpdateBuffer(st->cmd, st->workspace.buffer,
                                 4 * (at + (call->has_alibi ? B * Hq : 0)), sizeof words, words);
    }
    if (!call->has_alibi) {
        fa_vk_barrier(st);
        return FA_OK;
    }
    const fa_view *al = &call->alibi;
    const bool runs = al->stride_h == 1; /* a batch entry's slopes lie together: one copy */
    const uint64_t n = runs ? B : B * Hq;
    VkBufferCopy *copies = malloc(n * sizeof *copies);
    if (!copies)
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "vulkan: cannot list %llu ALiBi copies",
                       (unsigned long long)n);
    for (uint64_t b = 0; b < B; b++)
        for (uint64_t h = 0; h < (runs ? 1 : Hq); h++)
            copies[b * (runs ? 1 : Hq) + h] = (VkBufferCopy){
                4 * (al->offset + b * (uint64_t)al->stride_b + h * (uint64_t)al->stride_h),
                4 * (at + b * Hq + h), runs ? 4 * Hq : 4};
    st->vk.vkCmdCopyBuffer(st->cmd, fa_vk_handle(al), st->workspace.buffer, (uint32_t)n, copies);
    free(copies);
    fa_vk_barrier(st);
    return FA_OK;
}

static fa_status check_call(fa_context *ctx, const fa_attention_call *call, bool backward)
{
    const fa_vk_state *st = fa_vk_state_of(ctx);
    const fa_vk_physical *ph = st->phys;
    fa_vk_decode_plan decode;
    if (call->has_block_table &&
        (call->window || call->softcap > 0.0f || call->has_alibi || call->has_bias))
        return fa_fail(
            ctx, FA_ERROR_UNSUPPORTED,
            "vulkan: a paged KV cache with a sliding window, a softcap, ALiBi or a bias: "
            "the paged cache is read on the decoding path only, which has none of them");
    if (call->has_block_table && !fa_vk_decode_plan_for(ctx, call, &decode))
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED,
                       "vulkan: a paged KV cache only on the decoding path (at most %d query rows "
                       "per KV head, README)",
                       FA_VK_DECODE_MAX_ROWS);
    if (call->has_block_table && call->seq_k > call->page_size && call->block_table.stride_s != 1)
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED,
                       "vulkan: block_table's entries must be contiguous along max_pages");
    fa_fwd_tiling ft;
    fa_bwd_tiling bt = {0};
    if (!fwd_select(ctx, ph, (uint32_t)call->head_dim, call->dtype, &ft) ||
        (backward && !bwd_select(ctx, ph, (int)call->head_dim, &bt)))
        return fa_fail(ctx, FA_ERROR_UNSUPPORTED_HEAD_DIM,
                       "vulkan: head_dim %lld needs more than the %u bytes of shared memory "
                       "%s offers per workgroup",
                       (long long)call->head_dim, ph->info.shared_memory_bytes, ph->info.name);
    if (call->seq_q > INT32_MAX || call->seq_k > INT32_MAX)
        return fa_fail(ctx, FA_ERROR_TOO_LARGE,
                       "vulkan: sequence lengths above 2^31 - 1 are not supported");
    /* the window's bounds and ALiBi's distances reach i + seq_k - seq_q + right < seq_k + seq_q
     * in 32-bit ints */
    if ((call->window || call->has_alibi) && call->seq_q + call->seq_k > INT32_MAX)
        return fa_fail(ctx, FA_ERROR_TOO_LARGE,
                       "vulkan: a sliding window or ALiBi over seq_q + seq_k above 2^31 - 1");
    uint64_t rows_q = backward ? (uint64_t)bt.bm : (uint64_t)ft.bm, rows_k = (uint64_t)bt.bn;
    fa_vk_matrix_plan mp, mq;
    if (!backward && matrix_plan(ctx, FA_VK_MATRIX_FWD, call, &mp))
        rows_q = mp.rows;
    if (backward && matrix_plans_bwd(ctx, call, &mp, &mq)) {
        rows_k = mp.rows;
        rows_q = mq.rows;
    }
    const uint64_t gx = ceil_div((uint64_t)call->seq_q, rows_q);
    const uint64_t gk = backward ? ceil_div((uint64_t)call->seq_k, rows_k) : 0;
    if (gx > ph->max_group_count[0] || gk > ph->max_group_count[0] ||
        (uint64_t)call->heads_q > ph->max_group_count[1] ||
        (uint64_t)call->batch > ph->max_group_count[2])
        return fa_fail(ctx, FA_ERROR_TOO_LARGE,
                       "vulkan: grid (%llu, %lld, %lld) exceeds maxComputeWorkGroupCount "
                       "(%u, %u, %u)",
                       (unsigned long long)(gx > gk ? gx : gk), (long long)call->heads_q,
                       (long long)call->batch, ph->max_group_count[0], ph->max_group_count[1],
                       ph->max_group_count[2]);
    /* llvmpipe stops a shader after 65,535 loop iterations, leaving long rows short of their
     * keys (measured on lavapipe, f32 at head dim 256: forward wrong from 8k keys, backward
     * from 8k; f16 at 128: forward from 24k): refused with a margin rather than answered
     * wrongly. */
    const uint64_t longest =
        (uint64_t)(backward && call->seq_q > call->seq_k ? call->seq_q : call->seq_k);
    const uint64_t loop_cap = backward ? (uint64_t)1 << 20 : (uint64_t)3 << 19;
    if (ph->loop_limit && longest * (uint64_t)call->head_dim > loop_cap)
        return fa_fail(
            ctx, FA_ERROR_TOO_LARGE,
            "vulkan: %s stops every shader after 65,535 loop iterations, which a %s "
            "over %llu %s at head dim %lld could reach (at most %llu); use the CPU "
            "backend for it",
            ph->info.name, backward ? "backward" : "forward", (unsigned long long)longest,
            backward && call->seq_q > call->seq_k ? "queries" : "keys", (long long)call->head_dim,
            (unsigned long long)(loop_cap / (uint64_t)call->head_dim));
    /* Shaders index with 32-bit unsigned math: every index must stay below 2^32 (it does for
     * any buffer within maxStorageBufferRange; this guards the invariant, never wraps). */
    const int64_t B = call->batch, Sq = call->seq_q, Sk = call->seq_k, D = call->head_dim;
    const int64_t Hq = call->heads_q, Hkv = call->heads_kv;
    uint64_t worst = last_index(&call->q, B, Sq, Hq, D);
    const int64_t kv_b = call->has_block_table ? call->num_pages : B;
    const int64_t kv_s = call->has_block_table ? call->page_size : Sk;
    const uint64_t more[] = {
        last_index(&call->k, kv_b, kv_s, Hkv, D),
        last_index(&call->v, kv_b, kv_s, Hkv, D),
        last_index(&call->o, B, Sq, Hq, D),
        call->has_lse ? last_index(&call->lse, B, Sq, Hq, 1) : 0,
        backward ? last_index(&call->d_o, B, Sq, Hq, D) : 0,
        backward ? last_index(&call->d_q, B, Sq, Hq, D) : 0,
        backward ? last_index(&call->d_k, B, Sk, Hkv, D) : 0,
        backward ? last_index(&call->d_v, B, Sk, Hkv, D) : 0,
        workspace_floats(call, backward),
        call->has_bias ? last_index(&call->bias, B, Sq, Hq, call->seq_k) : 0,
    };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
        worst = more[i] > worst ? more[i] : worst;
    if (worst > UINT32_MAX)
        return fa_fail(ctx, FA_ERROR_TOO_LARGE,
                       "vulkan: a tensor reaches element %llu; shaders index below 2^32",
                       (unsigned long long)worst);
    if (4 * workspace_floats(call, backward) > ph->info.max_buffer_bytes)
        return fa_fail(ctx, FA_ERROR_TOO_LARGE,
                       "vulkan: the workspace (the backward's LSE and Delta, ALiBi's slopes; %llu "
                       "bytes) exceeds maxStorageBufferRange (%llu bytes)",
                       (unsigned long long)(4 * workspace_floats(call, backward)),
                       (unsigned long long)ph->info.max_buffer_bytes);
    return FA_OK;
}

fa_vk_fwd_push fa_vk_fwd_push_of(const fa_attention_call *call)
{
    const int64_t B = call->batch, Sq = call->seq_q, Sk = call->seq_k;
    const int64_t Hq = call->heads_q, Hkv = call->heads_kv;
    /* K and V's batch and seq dims: pages and rows within a page where the cache is paged */
    const int64_t kv_b = call->has_block_table ? call->num_pages : B;
    const int64_t kv_s = call->has_block_table ? call->page_size : Sk;
    return (fa_vk_fwd_push){
        fa_vk_pv(&call->q, B, Sq, Hq),
        fa_vk_pv(&call->k, kv_b, kv_s, Hkv),
        fa_vk_pv(&call->v, kv_b, kv_s, Hkv),
        fa_vk_pv(&call->o, B, Sq, Hq),
        call->has_lse ? fa_vk_pv(&call->lse, B, Sq, Hq) : (fa_vk_push_view){0, 0, 0, 0},
        (uint32_t)Sq,
        (uint32_t)Sk,
        call->has_lse,
        call->scale * FA_VK_LOG2E,
        (uint32_t)call->seqlens_k.offset,
        (uint32_t)call->seqlens_k.stride_b,
        call->has_seqlens_k,
    };
}

fa_vk_variant_push fa_vk_variant_push_of(const fa_attention_call *call)
{
    const bool cap = call->softcap > 0.0f;
    return (fa_vk_variant_push){
        cap ? call->scale / call->softcap * (2.0f * FA_VK_LOG2E) : call->scale * FA_VK_LOG2E,
        cap ? call->softcap * FA_VK_LOG2E : 0.0f,
        (int32_t)fa_call_left(call),
        (int32_t)fa_call_right(call),
    };
}

static fa_status forward(fa_context *ctx, const fa_attention_call *call)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    fa_vk_decode_plan decode;
    if (fa_vk_decode_plan_for(ctx, call, &decode))
        return fa_vk_decode_forward(ctx, call, &decode);
    fa_vk_spec spec = {.head_dim = (uint32_t)call->head_dim,
                       .causal = call->causal,
                       .gqa = (uint32_t)(call->heads_q / call->heads_kv),
                       .window = call->window,
                       .softcap = call->softcap > 0.0f,
                       .alibi = call->has_alibi,
                       .bias = call->has_bias ? (uint32_t)call->bias_dtype : 0};
    fa_vk_kernel kernel = FA_VK_FWD;
    uint64_t rows;
    fa_vk_matrix_plan plan;
    if (matrix_plan(ctx, FA_VK_MATRIX_FWD, call, &plan)) {
        kernel = FA_VK_FWD_CM;
        fa_vk_matrix_spec(&plan, &spec);
        rows = plan.rows;
    } else {
        fa_fwd_tiling t;
        fwd_select(ctx, st->phys, (uint32_t)call->head_dim, call->dtype, &t); /* check_call */
        spec.fwd_threads = (uint32_t)t.nt;
        spec.fwd_bm = (uint32_t)t.bm;
        spec.fwd_bn = (uint32_t)t.bn;
        spec.fwd_s_tx = (uint32_t)t.s_tx;
        spec.fwd_o_tx = (uint32_t)t.o_tx;
        spec.fwd_tile16 = t.tile16;
        fwd_tuning(ctx, st->phys, (uint32_t)call->head_dim, &t, &spec);
        rows = (uint64_t)t.bm;
    }
    VkPipeline pipeline;
    fa_status s =
        fa_vk_pipeline_get(ctx, kernel, fa_vk_storage_of(st, call->dtype), &spec, &pipeline);
    const bool variant_data = call->has_alibi || call->has_bias;
    if (s == FA_OK && variant_data)
        s = fa_vk_workspace(ctx, 4 * workspace_floats(call, false));
    if (s == FA_OK)
        s = fa_vk_begin(ctx);
    if (s == FA_OK && variant_data)
        s = record_variant_data(ctx, call, 0);
    if (s != FA_OK)
        return fa_vk_finish(ctx, s, false);
    const int64_t B = call->batch, Sq = call->seq_q, Sk = call->seq_k;
    const struct {
        fa_vk_fwd_push common;
        fa_vk_variant_push variant;
    } push = {fa_vk_fwd_push_of(call), fa_vk_variant_push_of(call)};
    _Static_assert(sizeof push <= 128, "the forward's push constants fit 128 bytes");
    const VkBuffer buffers[8] = {
        fa_vk_handle(&call->q),
        fa_vk_handle(&call->k),
        fa_vk_handle(&call->v),
        fa_vk_handle(&call->o),
        call->has_lse ? fa_vk_handle(&call->lse) : fa_vk_handle(&call->o),
        call->has_seqlens_k ? fa_vk_handle(&call->seqlens_k) : fa_vk_handle(&call->q),
        variant_data ? st->workspace.buffer : fa_vk_handle(&call->q),
        call->has_bias ? fa_vk_handle(&call->bias) : fa_vk_handle(&call->q)};
    uint64_t groups_x = ceil_div((uint64_t)Sq, rows);
    if (kernel == FA_VK_FWD_CM) {
        /* FA_VULKAN_MATRIX_FWD_PER=n (tuning): query tiles per workgroup instead of the rule. */
        const char *env = fa_knob_value(ctx, FA_KNOB_VULKAN_MATRIX_FWD_PER);
        const int forced = env ? atoi(env) : 0;
        groups_x =
            ceil_div(groups_x, forced > 0 ? (uint64_t)forced
                                          : fa_vk_matrix_fwd_tiles_per_group(
                                                (uint32_t)groups_x, (uint32_t)Sk, call->causal));
    }
    s = fa_vk_dispatch(ctx, kernel, pipeline, buffers, &push, sizeof push, (uint32_t)groups_x,
                       (uint32_t)call->heads_q, (uint32_t)B);
    return fa_vk_finish(ctx, s, false);
}

/* Steps per iteration of the backward's reduction loops (UNROLL in fa_backward.glsl): 2 (faster
 * than 1 on the H200 with every tiling measured), or a power of 2 from FA_VULKAN_BWD_UNROLL (a
 * tuning knob, like FA_BWD_UNROLL for OpenCL), at most what divides every loop of the tiling. */
static uint32_t bwd_unroll(const fa_context *ctx, const fa_bwd_tiling *t)
{
    const char *env = fa_knob_value(ctx, FA_KNOB_VULKAN_BWD_UNROLL);
    uint32_t u = env ? (uint32_t)strtoul(env, NULL, 10) : 2;
    if (u < 1 || (u & (u - 1)))
        u = 1;
    while (u > 1 && ((uint32_t)t->dc / 4 % u || (uint32_t)t->rk % u || (uint32_t)t->rq % u))
        u /= 2;
    return u;
}

/* Whether every offset and stride of q, k, v and dO, as pushed, is a multiple of 4 elements: the
 * backward passes then read 4 at a time with one aligned load (ALIGN4 in fa_backward.glsl). */
static bool bwd_aligned4(const fa_vk_push_view *const views[4])
{
    for (int i = 0; i < 4; i++)
        if (!fa_vk_pv_aligned(*views[i], 4))
            return false;
    return true;
}

/* Push constants of the dK/dV and dQ passes (the last view is dK, or dQ with dV unused). */
typedef struct grad_push {
    fa_vk_push_view q, k, v, d_o, g0, g1;
    uint32_t seq_q, seq_k, delta_off;
    float scale;
    fa_vk_variant_push variant;
} grad_push;
_Static_assert(sizeof(grad_push) == 128, "the backward's push constants fill 128 bytes");

static fa_status record_backward(fa_context *ctx, const fa_attention_call *call,
                                 const fa_bwd_tiling *t)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    const int64_t B = call->batch, Sq = call->seq_q, Sk = call->seq_k;
    const int64_t Hq = call->heads_q, Hkv = call->heads_kv;
    const uint32_t delta_off = (uint32_t)(B * Hq * Sq);
    const VkBuffer ws = st->workspace.buffer;
    const VkBuffer bias_buffer =
        call->has_bias ? fa_vk_handle(&call->bias) : fa_vk_handle(&call->q);
    const fa_vk_storage storage = fa_vk_storage_of(st, call->dtype);
    grad_push push = {
        fa_vk_pv(&call->q, B, Sq, Hq),
        fa_vk_pv(&call->k, B, Sk, Hkv),
        fa_vk_pv(&call->v, B, Sk, Hkv),
        fa_vk_pv(&call->d_o, B, Sq, Hq),
        fa_vk_pv(&call->d_k, B, Sk, Hkv),
        fa_vk_pv(&call->d_v, B, Sk, Hkv),
        (uint32_t)Sq,
        (uint32_t)Sk,
        delta_off,
        call->scale,
        fa_vk_variant_push_of(call),
    };
    const fa_vk_push_view *const loads[4] = {&push.q, &push.k, &push.v, &push.d_o};
    VkPipeline prep, dkdv, dq;
    const fa_vk_spec prep_spec = {.head_dim = (uint32_t)call->head_dim};
    fa_vk_spec spec = {.head_dim = (uint32_t)call->head_dim,
                       .causal = call->causal,
                       .gqa = (uint32_t)(Hq / Hkv),
                       .window = call->window,
                       .softcap = call->softcap > 0.0f,
                       .alibi = call->has_alibi,
                       .bias = call->has_bias ? (uint32_t)call->bias_dtype : 0,
                       .bwd_threads = (uint32_t)t->nt,
                       .bwd_bm = (uint32_t)t->bm,
                       .bwd_bn = (uint32_t)t->bn,
                       .bwd_sx = (uint32_t)t->sx,
                       .bwd_kx = (uint32_t)t->kx,
                       .bwd_qx = (uint32_t)t->qx,
                       .bwd_dp = (uint32_t)t->dp,
                       .bwd_dc = (uint32_t)t->dc,
                       .bwd_rk = (uint32_t)t->rk,
                       .bwd_rq = (uint32_t)t->rq,
                       .bwd_align4 = bwd_aligned4(loads),
                       .bwd_unroll = bwd_unroll(ctx, t)};
    /* The dK/dV and dQ passes on the matrix units where both have a plan. */
    fa_vk_kernel k_dkdv = FA_VK_BWD_DKDV, k_dq = FA_VK_BWD_DQ;
    fa_vk_spec spec_dq = spec;
    uint64_t rows_k = (uint64_t)t->bn, rows_q = (uint64_t)t->bm;
    fa_vk_matrix_plan plan_dkdv, plan_dq;
    if (matrix_plans_bwd(ctx, call, &plan_dkdv, &plan_dq)) {
        k_dkdv = FA_VK_BWD_DKDV_CM;
        k_dq = FA_VK_BWD_DQ_CM;
        spec = spec_dq = (fa_vk_spec){.head_dim = (uint32_t)call->head_dim,
                                      .causal = call->causal,
                                      .gqa = (uint32_t)(Hq / Hkv),
                                      .window = call->window,
                                      .softcap = call->softcap > 0.0f,
                                      .alibi = call->has_alibi,
                                      .bias = spec.bias};
        fa_vk_matrix_spec(&plan_dkdv, &spec);
        fa_vk_matrix_spec(&plan_dq, &spec_dq);
        rows_k = plan_dkdv.rows;
        rows_q = plan_dq.rows;
    }
    fa_status s = fa_vk_pipeline_get(ctx, FA_VK_BWD_PREP, storage, &prep_spec, &prep);
    if (s == FA_OK)
        s = fa_vk_pipeline_get(ctx, k_dkdv, storage, &spec, &dkdv);
    if (s == FA_OK)
        s = fa_vk_pipeline_get(ctx, k_dq, storage, &spec_dq, &dq);
    if (s == FA_OK)
        s = fa_vk_begin(ctx);
    if (s == FA_OK && (call->has_alibi || call->has_bias)) /* after LSE2 and Delta */
        s = record_variant_data(ctx, call, 2 * (uint64_t)delta_off);
    if (s != FA_OK)
        return s;

    if (Sq > 0) {
        struct {
            fa_vk_push_view o, d_o, lse;
            uint32_t seq_q, heads_q, delta_off;
        } prep_push = {fa_vk_pv(&call->o, B, Sq, Hq),
                       fa_vk_pv(&call->d_o, B, Sq, Hq),
                       fa_vk_pv(&call->lse, B, Sq, Hq),
                       (uint32_t)Sq,
                       (uint32_t)Hq,
                       delta_off};
        const VkBuffer buffers[4] = {fa_vk_handle(&call->o), fa_vk_handle(&call->d_o),
                                     fa_vk_handle(&call->lse), ws};
        s = fa_vk_dispatch(ctx, FA_VK_BWD_PREP, prep, buffers, &prep_push, sizeof prep_push,
                           (uint32_t)ceil_div((uint64_t)Sq, PREP_ROWS), (uint32_t)Hq, (uint32_t)B);
        if (s != FA_OK)
            return s;
        fa_vk_barrier(st);
    }
    if (Sk > 0) { /* with Sq = 0 this writes dK = dV = 0 */
        const VkBuffer buffers[8] = {fa_vk_handle(&call->q),
                                     fa_vk_handle(&call->k),
                                     fa_vk_handle(&call->v),
                                     fa_vk_handle(&call->d_o),
                                     ws,
                                     fa_vk_handle(&call->d_k),
                                     fa_vk_handle(&call->d_v),
                                     bias_buffer};
        s = fa_vk_dispatch(ctx, k_dkdv, dkdv, buffers, &push, sizeof push,
                           (uint32_t)ceil_div((uint64_t)Sk, rows_k), (uint32_t)Hkv, (uint32_t)B);
        if (s != FA_OK)
            return s;
    }
    if (Sq > 0) { /* with Sk = 0 this writes dQ = 0 */
        push.g0 = fa_vk_pv(&call->d_q, B, Sq, Hq);
        const VkBuffer buffers[7] = {fa_vk_handle(&call->q),
                                     fa_vk_handle(&call->k),
                                     fa_vk_handle(&call->v),
                                     fa_vk_handle(&call->d_o),
                                     ws,
                                     fa_vk_handle(&call->d_q),
                                     bias_buffer};
        s = fa_vk_dispatch(ctx, k_dq, dq, buffers, &push, sizeof push,
                           (uint32_t)ceil_div((uint64_t)Sq, rows_q), (uint32_t)Hq, (uint32_t)B);
    }
    return s;
}

static fa_status backward(fa_context *ctx, const fa_attention_call *call)
{
    fa_vk_state *st = fa_vk_state_of(ctx);
    fa_bwd_tiling t;
    bwd_select(ctx, st->phys, (int)call->head_dim, &t); /* check_call made sure one fits */
    fa_status s = fa_vk_workspace(ctx, 4 * workspace_floats(call, true));
    if (s != FA_OK)
        return s;
    return fa_vk_finish(ctx, record_backward(ctx, call, &t), false);
}

const fa_backend_iface fa_vulkan_backend_iface = {
    .id = FA_BACKEND_VULKAN,
    .name = "vulkan",
    .seqlens_k = true,
    .paged_kv = true, /* on the decoding path (check_call) */
    .window = true,   /* on the scalar and matrix shaders: the decoding path leaves them */
    .softcap = true,  /* likewise */
    .alibi = true,    /* likewise */
    .bias = true,     /* likewise */
    .probe = fa_vk_probe,
    .device_info = fa_vk_device_info,
    .context_init = fa_vk_context_init,
    .context_adopt = fa_vk_context_adopt,
    .context_release = fa_vk_context_release,
    .buffer_alloc = fa_vk_buffer_alloc,
    .buffer_wrap = fa_vk_buffer_wrap,
    .buffer_free = fa_vk_buffer_free,
    .buffer_write = fa_vk_buffer_write,
    .buffer_read = fa_vk_buffer_read,
    .synchronize = fa_vk_synchronize,
    .forward = forward,
    .backward = backward,
    .copy_regions = fa_vk_copy_regions,
    .wrap_offset_in_views = true,
    .check_call = check_call,
};
