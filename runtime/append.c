// SPDX-License-Identifier: MIT
/* The KV-cache append: where each new row goes is worked out on the host, from the lengths and
 * the block table the runtime has read back anyway (attention.c), as byte ranges merged wherever
 * consecutive rows are consecutive in memory on both sides; the backend's copy_regions copies
 * them on the device, queued before the forward. The forward then reads the lengths after the
 * append from a small buffer the context keeps, so no kernel needs to know about appends. */
#include "fa_append.h"

#include <stdlib.h>

typedef struct region_list {
    fa_copy_region *at;
    size_t n, cap;
} region_list;

/* Adds a range, merged into the last one where it continues it in both buffers. */
static bool push(region_list *l, uint64_t src, uint64_t dst, uint64_t bytes)
{
    if (l->n) {
        fa_copy_region *last = &l->at[l->n - 1];
        if (last->src_offset + last->bytes == src && last->dst_offset + last->bytes == dst) {
            last->bytes += bytes;
            return true;
        }
    }
    if (l->n == l->cap) {
        const size_t cap = l->cap ? 2 * l->cap : 64;
        fa_copy_region *at = realloc(l->at, cap * sizeof *at);
        if (!at)
            return false;
        l->at = at;
        l->cap = cap;
    }
    l->at[l->n++] = (fa_copy_region){src, dst, bytes};
    return true;
}

/* The element offset in `cache` (k or v) of head h of key position pos of batch entry b:
 * through the block table when the cache is paged. */
static uint64_t cache_offset(const fa_attention_call *c, const fa_view *cache, const int32_t *table,
                             int64_t b, int64_t pos, int64_t h)
{
    int64_t block = b, row = pos;
    if (c->has_block_table) {
        const fa_view *bt = &c->block_table;
        block = table[b * bt->stride_b + pos / c->page_size * bt->stride_s];
        row = pos % c->page_size;
    }
    return cache->offset +
           (uint64_t)(block * cache->stride_b + row * cache->stride_s + h * cache->stride_h);
}

/* The ranges that copy every (b, i, h) row of `src` (k_new or v_new) to position lens[b] + i of
 * `cache`. The inner loop runs along the cache's smaller stride (heads in BSHD, keys in BHSD),
 * so that whole key rows, or a head's consecutive keys, become one range. */
static bool plan_copy(const fa_attention_call *c, const fa_view *src, const fa_view *cache,
                      const int32_t *lens, const int32_t *table, region_list *out)
{
    const uint64_t es = fa_dtype_size(c->dtype), row = (uint64_t)c->head_dim * es;
    const bool heads_inner = cache->stride_h <= cache->stride_s;
    const int64_t outer = heads_inner ? c->seq_new : c->heads_kv;
    const int64_t inner = heads_inner ? c->heads_kv : c->seq_new;
    for (int64_t b = 0; b < c->batch; b++) {
        const int64_t len = lens[b * c->seqlens_k.stride_b];
        for (int64_t x = 0; x < outer; x++)
            for (int64_t y = 0; y < inner; y++) {
                const int64_t i = heads_inner ? x : y, h = heads_inner ? y : x;
                const uint64_t from =
                    src->offset +
                    (uint64_t)(b * src->stride_b + i * src->stride_s + h * src->stride_h);
                if (!push(out, from * es, cache_offset(c, cache, table, b, len + i, h) * es, row))
                    return false;
            }
    }
    return true;
}

/* The context's buffer of lengths, at least `bytes` long. A smaller one is freed once the work
 * that may still read it has finished. */
static fa_status lens_buffer(fa_context *ctx, size_t bytes)
{
    const fa_backend_iface *be = ctx->backend;
    if (ctx->append_lens && ctx->append_lens_bytes >= bytes)
        return FA_OK;
    fa_status st = fa_backend_enter(ctx);
    if (st == FA_OK && ctx->append_lens) {
        st = fa_backend_leave(ctx, be->synchronize(ctx));
        if (st == FA_OK)
            fa_append_release(ctx);
    }
    const size_t size = bytes < 1024 ? 1024 : bytes;
    if (st == FA_OK)
        st = fa_backend_enter(ctx);
    if (st == FA_OK)
        st = fa_backend_leave(ctx, be->buffer_alloc(ctx, size, &ctx->append_lens));
    if (st != FA_OK) {
        ctx->append_lens = NULL;
        return st;
    }
    ctx->append_lens_bytes = size;
    fa_workspace_track(ctx, (int64_t)size);
    return FA_OK;
}

fa_status fa_append_prepare(fa_context *ctx, fa_attention_call *call, const int32_t *lens,
                            const int32_t *table, fa_append_plan *plan)
{
    region_list k = {0}, v = {0};
    plan->lens = malloc((size_t)call->batch * sizeof *plan->lens);
    if (!plan->lens || !plan_copy(call, &call->k_new, &call->k, lens, table, &k) ||
        !plan_copy(call, &call->v_new, &call->v, lens, table, &v)) {
        free(k.at);
        free(v.at);
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "k_new: no memory to plan the append");
    }
    plan->k = k.at;
    plan->n_k = k.n;
    plan->v = v.at;
    plan->n_v = v.n;
    for (int64_t b = 0; b < call->batch; b++)
        plan->lens[b] = (int32_t)(lens[b * call->seqlens_k.stride_b] + call->seq_new);
    fa_status st = lens_buffer(ctx, (size_t)call->batch * sizeof *plan->lens);
    if (st != FA_OK)
        return st;
    call->seqlens_k = (fa_view){.buffer = ctx->append_lens, .stride_b = 1};
    return FA_OK;
}

fa_status fa_append_commit(fa_context *ctx, const fa_attention_call *call,
                           const fa_append_plan *plan)
{
    const fa_backend_iface *be = ctx->backend;
    fa_status st = fa_backend_enter(ctx);
    if (st == FA_OK)
        st = fa_backend_leave(ctx, be->buffer_write(ctx, ctx->append_lens, 0, plan->lens,
                                                    (size_t)call->batch * sizeof *plan->lens));
    if (st == FA_OK)
        st = fa_backend_enter(ctx);
    if (st == FA_OK)
        st = fa_backend_leave(
            ctx, be->copy_regions(ctx, call->k_new.buffer, call->k.buffer, plan->k, plan->n_k));
    if (st == FA_OK)
        st = fa_backend_enter(ctx);
    if (st == FA_OK)
        st = fa_backend_leave(
            ctx, be->copy_regions(ctx, call->v_new.buffer, call->v.buffer, plan->v, plan->n_v));
    return st;
}

void fa_append_plan_free(fa_append_plan *plan)
{
    free(plan->k);
    free(plan->v);
    free(plan->lens);
    *plan = (fa_append_plan){0};
}

void fa_append_release(fa_context *ctx)
{
    if (!ctx->append_lens)
        return;
    ctx->backend->buffer_free(ctx, ctx->append_lens);
    fa_workspace_track(ctx, -(int64_t)ctx->append_lens_bytes);
    ctx->append_lens = NULL;
    ctx->append_lens_bytes = 0;
}
