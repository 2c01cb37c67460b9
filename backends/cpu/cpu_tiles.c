// SPDX-License-Identifier: MIT
/* Tile loads and stores between tensors and f32 scratch, and the scratch allocator. */
#include "cpu_tiles.h"

#include <stdlib.h>
#include <string.h>

#include "cpu_backend.h"
#include "fa_half.h"
#include "fa_platform.h"

static void *element_ptr(const fa_cpu_tile *t, int64_t r)
{
    const int64_t s = t->s0 + r;
    int64_t i;
    if (t->pages)
        i = fa_cpu_index(t->view, t->pages[s / t->page_size * t->page_step], s % t->page_size,
                         t->h);
    else
        i = fa_cpu_index(t->view, t->b, s, t->h);
    return (char *)t->view->buffer + i * (int64_t)fa_dtype_size(t->dtype);
}

void fa_cpu_tile_rows(const fa_cpu_tile *t, int heads, const void **rows)
{
    if (t->rows == 0)
        return;
    const int64_t es = (int64_t)fa_dtype_size(t->dtype);
    const int64_t row_step = t->view->stride_s * es, head_step = t->view->stride_h * es;
    const char *row = element_ptr(t, 0);
    /* paged: the table is read once a page, the next row of a page is a row_step on */
    int64_t in_page = t->pages ? t->s0 % t->page_size : 0;
    for (int r = 0; r < t->rows; r++) {
        if (r > 0)
            row = t->pages && in_page == 0 ? (const char *)element_ptr(t, r) : row + row_step;
        for (int h = 0; h < heads; h++)
            rows[r * heads + h] = row + h * head_step;
        if (t->pages && ++in_page == t->page_size)
            in_page = 0;
    }
}

/* Rows ahead of the one being converted whose cache lines are requested: strided rows (a KV
 * head's rows between the other heads') defeat the hardware prefetcher. */
enum { PREFETCH_ROWS = 16 };

void fa_cpu_load_rows(const fa_cpu_kernels *k, const fa_cpu_tile *t, float scale, float *dst,
                      int64_t ld)
{
    const int64_t bytes = (int64_t)t->dim * (int64_t)fa_dtype_size(t->dtype);
    for (int r = 0; r < t->rows; r++) {
        if (r + PREFETCH_ROWS < t->rows) {
            const char *ahead = element_ptr(t, r + PREFETCH_ROWS);
            for (int64_t b = 0; b < bytes; b += 64)
                __builtin_prefetch(ahead + b);
        }
        k->load_row(t->dtype, element_ptr(t, r), t->dim, scale, dst + r * ld);
    }
}

void fa_cpu_load_cols(const fa_cpu_kernels *k, const fa_cpu_tile *t, float scale, float *dst,
                      int64_t ld, float *row)
{
    for (int r = 0; r < t->rows; r++) {
        k->load_row(t->dtype, element_ptr(t, r), t->dim, scale, row);
        for (int d = 0; d < t->dim; d++)
            dst[d * ld + r] = row[d];
    }
}

static void store_row(fa_dtype dtype, void *dst, const float *src, int n)
{
    if (dtype == FA_DTYPE_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else if (dtype == FA_DTYPE_F16) {
        uint16_t *d = dst;
        for (int i = 0; i < n; i++)
            d[i] = fa_f32_to_f16(src[i]);
    } else {
        uint16_t *d = dst;
        for (int i = 0; i < n; i++)
            d[i] = fa_f32_to_bf16(src[i]);
    }
}

void fa_cpu_store_rows(const fa_cpu_tile *t, const float *src, int64_t ld, float scale, float *row)
{
    for (int r = 0; r < t->rows; r++) {
        const float *s = src + r * ld;
        for (int d = 0; d < t->dim; d++)
            row[d] = s[d] * scale;
        store_row(t->dtype, element_ptr(t, r), row, t->dim);
    }
}

void fa_cpu_store_rows_div(const fa_cpu_tile *t, const float *src, int64_t ld, const float *div,
                           float *row)
{
    for (int r = 0; r < t->rows; r++) {
        const float *s = src + r * ld;
        float q = div[r];
        for (int d = 0; d < t->dim; d++)
            row[d] = q != 0.0f ? s[d] / q : 0.0f;
        store_row(t->dtype, element_ptr(t, r), row, t->dim);
    }
}

fa_status fa_cpu_scratch_alloc(fa_context *ctx, fa_cpu_scratch *s, int threads, size_t slice_floats,
                               size_t shared_floats, const char *what)
{
    s->slice_floats = (slice_floats + 15) / 16 * 16;
    size_t floats = s->slice_floats * (size_t)threads + (shared_floats + 15) / 16 * 16;
    s->bytes = floats * sizeof(float);
    s->base = fa_aligned_alloc(64, s->bytes ? s->bytes : 64);
    if (!s->base)
        return fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY,
                       "cpu: cannot allocate %zu bytes of %s scratch", s->bytes, what);
    memset(s->base, 0, s->bytes);
    fa_workspace_track(ctx, (int64_t)s->bytes);
    return FA_OK;
}

void fa_cpu_scratch_free(fa_context *ctx, fa_cpu_scratch *s)
{
    fa_aligned_free(s->base);
    fa_workspace_track(ctx, -(int64_t)s->bytes);
    s->base = NULL;
}

int fa_cpu_threads(const fa_context *ctx)
{
    const fa_cpu_state *state = ctx->backend_state;
    return state && state->threads > 0 ? state->threads : 1;
}
