// SPDX-License-Identifier: MIT
/* Moving tiles between the caller's tensors (any dtype, any strides) and f32 scratch, and the
 * per-call scratch itself. Element (b, s, h, d) of a view is at
 * ((T *)buffer)[offset + b * stride_b + s * stride_s + h * stride_h + d]. */
#ifndef FA_CPU_TILES_H
#define FA_CPU_TILES_H

#include "cpu_kernels.h"
#include "fa_internal.h"

/* Index of element (b, s, h, 0) of a view, in elements. */
static inline int64_t fa_cpu_index(const fa_view *v, int64_t b, int64_t s, int64_t h)
{
    return (int64_t)v->offset + b * v->stride_b + s * v->stride_s + h * v->stride_h;
}

static inline int64_t fa_cpu_round_up(int64_t n, int64_t to)
{
    return (n + to - 1) / to * to;
}

/* Where one tile of a view starts: batch b, head h, sequence positions s0 .. s0 + rows - 1. With
 * `pages` (a paged K/V cache: fa_attention_call.block_table's row of batch b), position s is row
 * s % page_size of page pages[(s / page_size) * page_step] instead, b unused. */
typedef struct fa_cpu_tile {
    const fa_view *view;
    fa_dtype dtype;
    int64_t b, s0, h;
    int rows, dim;
    const int32_t *pages;
    int64_t page_step, page_size;
} fa_cpu_tile;

/* The tile of rows s0 .. s0 + rows - 1 of (batch b, head h), not paged. */
static inline fa_cpu_tile fa_cpu_tile_at(const fa_view *view, fa_dtype dtype, int64_t b, int64_t s0,
                                         int64_t h, int rows, int dim)
{
    return (fa_cpu_tile){view, dtype, b, s0, h, rows, dim, NULL, 0, 0};
}

/* rows[r * heads + h] = where row r of head t->h + h starts, for each of the tile's rows and
 * `heads` heads from t->h (a paged tile's table entry looked up once a page). */
void fa_cpu_tile_rows(const fa_cpu_tile *t, int heads, const void **rows);
/* dst[r * ld + d] = scale * tile[r][d]. Columns dim .. ld - 1 are left as they are. */
void fa_cpu_load_rows(const fa_cpu_kernels *k, const fa_cpu_tile *t, float scale, float *dst,
                      int64_t ld);
/* dst[d * ld + r] = scale * tile[r][d] (transposed), using `row` (dim floats) as staging. */
void fa_cpu_load_cols(const fa_cpu_kernels *k, const fa_cpu_tile *t, float scale, float *dst,
                      int64_t ld, float *row);
/* tile[r][d] = dtype(scale * src[r * ld + d]), rounded to nearest even; `row` is staging. */
void fa_cpu_store_rows(const fa_cpu_tile *t, const float *src, int64_t ld, float scale, float *row);
/* tile[r][d] = dtype(src[r * ld + d] / div[r]), or 0 where div[r] is 0. */
void fa_cpu_store_rows_div(const fa_cpu_tile *t, const float *src, int64_t ld, const float *div,
                           float *row);

/* Scratch of `threads` equal 64-byte-aligned slices, reported to the context's workspace. */
typedef struct fa_cpu_scratch {
    float *base;
    size_t slice_floats; /* per thread, a multiple of 16 */
    size_t bytes;
} fa_cpu_scratch;

/* Allocates (zero-filled) or fails with ERROR_OUT_OF_HOST_MEMORY through fa_fail. */
fa_status fa_cpu_scratch_alloc(fa_context *ctx, fa_cpu_scratch *s, int threads, size_t slice_floats,
                               size_t shared_floats, const char *what);
void fa_cpu_scratch_free(fa_context *ctx, fa_cpu_scratch *s);
/* The slice of thread `thread`; the shared part (if any) follows the last slice. */
static inline float *fa_cpu_scratch_slice(const fa_cpu_scratch *s, int thread)
{
    return s->base + (size_t)thread * s->slice_floats;
}

/* Lays out consecutive 64-byte-aligned arrays in a slice (base 64-byte aligned), counting in
 * `used` the floats carved so far. With base NULL it only counts (and returns NULL), so that one
 * function both sizes a scratch and lays it out. */
typedef struct fa_cpu_carver {
    float *base;
    size_t used;
} fa_cpu_carver;

static inline float *fa_cpu_carve(fa_cpu_carver *c, int64_t floats)
{
    float *p = c->base ? c->base + c->used : NULL;
    c->used += (size_t)fa_cpu_round_up(floats, 16);
    return p;
}

/* Number of OpenMP threads the context's calls use. */
int fa_cpu_threads(const fa_context *ctx);

/* Scales the first `cols` entries of each of `rows` rows (stride ld) by c. The kernels score raw Q
 * K^T and scale the scores afterwards, forward and backward alike, so that the backward's P sees
 * bit for bit the scores its forward's LSE came from (scaling an operand first rounds each
 * element and, at large scores, costs more than the dtype). */
static inline void fa_cpu_scale_tile(float *s, int rows, int cols, int64_t ld, float c)
{
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++)
            s[r * ld + j] *= c;
}

#endif
