// SPDX-License-Identifier: MIT
/* fa_attention_merge: partial results over disjoint key ranges combined into the exact O and LSE,
 * on the host. Each tensor's byte range is read with fa_buffer_read (which waits for pending
 * work), O's and the LSE's ranges are read too, so that bytes between their elements (an
 * interleaved view) are written back as they were. */
#include "fa_half.h"
#include "fa_validate.h"

#include <math.h>
#include <stdlib.h>

static float load(const unsigned char *p, fa_dtype dtype)
{
    if (dtype == FA_DTYPE_F32)
        return *(const float *)p;
    const uint16_t h = *(const uint16_t *)p;
    return dtype == FA_DTYPE_F16 ? fa_f16_to_f32(h) : fa_bf16_to_f32(h);
}

static void store(unsigned char *p, fa_dtype dtype, float x)
{
    if (dtype == FA_DTYPE_F32)
        *(float *)p = x;
    else
        *(uint16_t *)p = dtype == FA_DTYPE_F16 ? fa_f32_to_f16(x) : fa_f32_to_bf16(x);
}

/* The bytes of view v, read into a new host array (NULL: *st says why). */
static unsigned char *read_view(fa_context *ctx, const fa_byte_view *v, fa_status *st)
{
    const size_t n = (size_t)(v->end - v->begin);
    unsigned char *host = malloc(n ? n : 1);
    if (!host) {
        *st = fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "merge: cannot allocate %zu bytes", n);
        return NULL;
    }
    *st = n ? fa_buffer_read(v->buffer, v->begin, host, n) : FA_OK;
    if (*st != FA_OK) {
        free(host);
        return NULL;
    }
    return host;
}

static const unsigned char *at(const unsigned char *host, const fa_byte_view *v, int64_t b,
                               int64_t s, int64_t h, int64_t d)
{
    return host + b * v->stride[0] + s * v->stride[1] + h * v->stride[2] + d * v->stride[3];
}

fa_status fa_attention_merge(fa_context *ctx, int n, const fa_tensor *o_parts,
                             const fa_tensor *lse_parts, const fa_tensor *o, const fa_tensor *lse)
{
    if (!ctx)
        return FA_ERROR_NULL_POINTER;
    fa_merge_call c;
    fa_status st = fa_validate_merge(ctx, n, o_parts, lse_parts, o, lse, &c);
    if (st != FA_OK)
        return st;
    const int64_t B = c.shape[0], S = c.shape[1], H = c.shape[2], D = c.shape[3];
    unsigned char **parts = calloc((size_t)(2 * n + 2), sizeof *parts);
    float *w = malloc((size_t)n * sizeof *w);
    if (!parts || !w)
        st = fa_fail(ctx, FA_ERROR_OUT_OF_HOST_MEMORY, "merge: cannot allocate its tables");
    for (int i = 0; i < n && st == FA_OK; i++) {
        parts[2 * i] = read_view(ctx, &c.o_parts[i], &st);
        if (st == FA_OK)
            parts[2 * i + 1] = read_view(ctx, &c.lse_parts[i], &st);
    }
    unsigned char *out = NULL, *out_lse = NULL;
    if (st == FA_OK)
        out = read_view(ctx, &c.o, &st);
    if (st == FA_OK && c.lse.buffer)
        out_lse = read_view(ctx, &c.lse, &st);
    for (int64_t b = 0; st == FA_OK && b < B; b++)
        for (int64_t s = 0; s < S; s++)
            for (int64_t h = 0; h < H; h++) {
                float mx = -INFINITY;
                for (int i = 0; i < n; i++) {
                    w[i] = load(at(parts[2 * i + 1], &c.lse_parts[i], b, s, h, 0), FA_DTYPE_F32);
                    mx = fmaxf(mx, w[i]);
                }
                float sum = 0.0f;
                for (int i = 0; i < n; i++) {
                    /* -inf parts weigh 0, NaN ones NaN (fmaxf skipped them) */
                    w[i] = expf(w[i] - (mx == -INFINITY ? 0.0f : mx));
                    sum += w[i];
                }
                for (int64_t d = 0; d < D; d++) {
                    float acc = 0.0f;
                    for (int i = 0; i < n; i++)
                        if (w[i] != 0.0f)
                            acc +=
                                w[i] * load(at(parts[2 * i], &c.o_parts[i], b, s, h, d), c.o.dtype);
                    store((unsigned char *)at(out, &c.o, b, s, h, d), c.o.dtype,
                          sum != 0.0f ? acc / sum : 0.0f);
                }
                if (out_lse)
                    store((unsigned char *)at(out_lse, &c.lse, b, s, h, 0), FA_DTYPE_F32,
                          sum != 0.0f ? mx + logf(sum) : -INFINITY);
            }
    if (st == FA_OK && c.o.end > c.o.begin)
        st = fa_buffer_write(c.o.buffer, c.o.begin, out, (size_t)(c.o.end - c.o.begin));
    if (st == FA_OK && out_lse && c.lse.end > c.lse.begin)
        st = fa_buffer_write(c.lse.buffer, c.lse.begin, out_lse, (size_t)(c.lse.end - c.lse.begin));
    for (int i = 0; parts && i < 2 * n + 2; i++)
        free(parts[i]);
    free(parts);
    free(w);
    free(out);
    free(out_lse);
    fa_merge_call_free(&c);
    return st;
}
