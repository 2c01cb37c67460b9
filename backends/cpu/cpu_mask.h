// SPDX-License-Identifier: MIT
/* What the CPU backend does to raw scores q.k before the softmax, shared by the forward (its
 * query tiles and its decoding items alike) and the backward: scaling, or logit softcapping, the
 * ALiBi bias, the additive bias, and the mask of the causal diagonal and the sliding window
 * (fa_attention_call). A row's diagonal is the key i + seq_k - seq_q of its query i. */
#ifndef FA_CPU_MASK_H
#define FA_CPU_MASK_H

#include <math.h>

#include "cpu_kernels.h"
#include "cpu_tiles.h"
#include "fa_half.h"

#define FA_CPU_LOG2E 1.4426950408889634f

/* A row with diagonal d sees the keys [d - left, d + right]; a bound of -1 is none. */
typedef struct fa_cpu_mask {
    int64_t left, right;
} fa_cpu_mask;

static inline fa_cpu_mask fa_cpu_mask_of(const fa_attention_call *c)
{
    return (fa_cpu_mask){fa_call_left(c), fa_call_right(c)};
}

/* The first key of [k_begin, ...) that rows whose lowest diagonal is d_min may see. */
static inline int64_t fa_cpu_keys_begin(const fa_cpu_mask *m, int64_t d_min, int64_t k_begin)
{
    return m->left >= 0 && d_min - m->left > k_begin ? d_min - m->left : k_begin;
}

/* One past the last key of [..., k_end) that rows whose highest diagonal is d_max may see. */
static inline int64_t fa_cpu_keys_end(const fa_cpu_mask *m, int64_t d_max, int64_t k_end)
{
    return m->right >= 0 && d_max + m->right + 1 < k_end ? d_max + m->right + 1 : k_end;
}

/* Whether the keys [k0, k0 + nk) hold one that some row with a diagonal in [d_min, d_max] does
 * not see: the tile then needs fa_cpu_mask_row. */
static inline bool fa_cpu_mask_cuts(const fa_cpu_mask *m, int64_t d_min, int64_t d_max, int64_t k0,
                                    int nk)
{
    return (m->left >= 0 && d_max - m->left > k0) ||
           (m->right >= 0 && d_min + m->right < k0 + nk - 1);
}

/* Sets s[j * step] to -inf for the keys k0 + j (j < nk) that the row with diagonal d does not
 * see. */
static inline void fa_cpu_mask_row(const fa_cpu_mask *m, int64_t d, int64_t k0, int nk, float *s,
                                   int64_t step)
{
    const int64_t first = m->left >= 0 ? d - m->left - k0 : 0;      /* first visible j */
    const int64_t end = m->right >= 0 ? d + m->right + 1 - k0 : nk; /* one past the last */
    for (int64_t j = 0; j < nk && j < first; j++)
        s[j * step] = -INFINITY;
    for (int64_t j = end > 0 ? end : 0; j < nk; j++)
        s[j * step] = -INFINITY;
}

/* Raw scores (rows x cols, row stride ld) as the softmax takes them, in log2 units: scale
 * log2(e) q.k, or with a softcap c, c log2(e) tanh(scale q.k / c), and then, where deriv is not
 * NULL, its 1 - tanh^2 into deriv (same layout) for the backward. */
static inline void fa_cpu_scores(const fa_cpu_kernels *k, const fa_attention_call *c, float *s,
                                 int rows, int cols, int64_t ld, float *deriv)
{
    if (c->softcap > 0.0f)
        k->softcap(s, rows, cols, ld, c->scale / c->softcap, c->softcap * FA_CPU_LOG2E, deriv);
    else
        fa_cpu_scale_tile(s, rows, cols, ld, c->scale * FA_CPU_LOG2E);
}

/* The ALiBi slope of query head h of batch entry b in the scores' log2 units (slope log2(e));
 * 0 without ALiBi. */
static inline float fa_cpu_alibi_slope(const fa_attention_call *c, int64_t b, int64_t h)
{
    if (!c->has_alibi)
        return 0.0f;
    const float *slopes = c->alibi.buffer;
    return slopes[c->alibi.offset + b * c->alibi.stride_b + h * c->alibi.stride_h] * FA_CPU_LOG2E;
}

/* ALiBi on the scores of the row with diagonal d: s[j * step] -= slope |d - (k0 + j)| for the
 * keys k0 + j, j < nk (slope from fa_cpu_alibi_slope). Before the mask, whose -inf it keeps. */
static inline void fa_cpu_alibi_row(float slope, int64_t d, int64_t k0, int nk, float *s,
                                    int64_t step)
{
    for (int j = 0; j < nk; j++) {
        const int64_t dist = d - k0 - j;
        s[j * step] -= slope * (float)(dist < 0 ? -dist : dist);
    }
}

/* The additive bias on the scores of query i of head h of batch entry b: s[j * step] +=
 * log2(e) bias(b, i, h, k0 + j) for j < nk (fa_attention_call.bias, in its own dtype; -inf stays
 * -inf and hides the key). Before the mask. */
static inline void fa_cpu_bias_row(const fa_attention_call *c, int64_t b, int64_t i, int64_t h,
                                   int64_t k0, int nk, float *s, int64_t step)
{
    const fa_view *v = &c->bias;
    const uint64_t at =
        v->offset + (uint64_t)(b * v->stride_b + i * v->stride_s + h * v->stride_h + k0);
    if (c->bias_dtype == FA_DTYPE_F32) {
        const float *x = (const float *)v->buffer + at;
        for (int j = 0; j < nk; j++)
            s[j * step] += x[j] * FA_CPU_LOG2E;
        return;
    }
    const uint16_t *x = (const uint16_t *)v->buffer + at;
    const bool f16 = c->bias_dtype == FA_DTYPE_F16;
    for (int j = 0; j < nk; j++)
        s[j * step] += (f16 ? fa_f16_to_f32(x[j]) : fa_bf16_to_f32(x[j])) * FA_CPU_LOG2E;
}

/* ALiBi and the additive bias, where the call has them, on the scores of query i of head h of
 * batch entry b, whose diagonal is key i + off: s[j * step] for the keys k0 + j, j < nk. Before
 * the mask. */
static inline void fa_cpu_row_terms(const fa_attention_call *c, int64_t b, int64_t i, int64_t h,
                                    int64_t off, int64_t k0, int nk, float *s, int64_t step)
{
    if (c->has_alibi)
        fa_cpu_alibi_row(fa_cpu_alibi_slope(c, b, h), i + off, k0, nk, s, step);
    if (c->has_bias)
        fa_cpu_bias_row(c, b, i, h, k0, nk, s, step);
}

/* ds *= deriv over rows x cols (row stride ld): dS through the softcap. */
static inline void fa_cpu_softcap_grad(float *ds, const float *deriv, int rows, int cols,
                                       int64_t ld)
{
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++)
            ds[r * ld + j] *= deriv[r * ld + j];
}

#endif
