// SPDX-License-Identifier: MIT
/* The same-precision baseline: what an ordinary, non-flash implementation computes when every
 * matrix it materialises is stored in the dtype and every product accumulates in f32:
 *   S = Q K^T (f32 accumulation, rounded), P = softmax(scale * S) in f32 then rounded,
 *   O = P V (f32 accumulation, rounded), LSE = max + log(sum) in f32;
 *   dP = dO V^T (rounded), D = rowsum(P * dP) in f32 (the softmax backward), dS = P * (dP - D)
 *   in f32 then rounded, dV = P^T dO, dK = scale * dS^T Q, dQ = scale * dS K (f32, rounded).
 * Its error against the float64 reference is what the dtype itself costs, and the conformance
 * tolerance is a multiple of it. Works row by row like the reference (see reference64.c). */
#include "tk_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void axpy32(float *y, float a, const float *x, int64_t n)
{
    for (int64_t d = 0; d < n; d++)
        y[d] += a * x[d];
}

int64_t tk_base_row_forward(const tk_data *t, int64_t b, int64_t h, int64_t i, float *p_row,
                            float *o_row, float *lse, tk_base_stats *st)
{
    const fa_dtype dt = t->p.dtype;
    const int64_t D = t->D, n = tk_visible_keys(t, i), hk = h / t->group;
    const float *q = t->qf + tk_q_index(t, b, i, h);
    for (int64_t d = 0; d < D; d++)
        o_row[d] = 0.0f;
    if (n == 0) {
        *lse = -INFINITY;
        st->max = -INFINITY;
        st->sum = 0.0f;
        return 0;
    }
    float m = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
        float s = t->scale_f * tk_round_f(dt, tk_dot32(q, t->kf + tk_k_index(t, b, j, hk), D));
        p_row[j] = s;
        if (s > m)
            m = s;
    }
    float sum = 0.0f;
    for (int64_t j = 0; j < n; j++) {
        p_row[j] = expf(p_row[j] - m);
        sum += p_row[j];
    }
    for (int64_t j = 0; j < n; j++) {
        p_row[j] = tk_round_f(dt, p_row[j] / sum);
        axpy32(o_row, p_row[j], t->vf + tk_k_index(t, b, j, hk), D);
    }
    for (int64_t d = 0; d < D; d++)
        o_row[d] = tk_round_f(dt, o_row[d]);
    *lse = m + logf(sum);
    st->max = m;
    st->sum = sum;
    return n;
}

void tk_base_row_backward(const tk_data *t, int64_t b, int64_t h, int64_t i, int64_t n,
                          const float *p_row, float *scratch, float *dq_row, float *dk_acc,
                          float *dv_acc, tk_base_stats *st)
{
    const fa_dtype dt = t->p.dtype;
    const int64_t D = t->D, hk = h / t->group;
    const float *q = t->qf + tk_q_index(t, b, i, h);
    const float *d_o = t->d_of + tk_q_index(t, b, i, h);
    float *dp = scratch;
    float delta = 0.0f;
    for (int64_t j = 0; j < n; j++) {
        dp[j] = tk_round_f(dt, tk_dot32(d_o, t->vf + tk_k_index(t, b, j, hk), D));
        delta += p_row[j] * dp[j];
    }
    st->delta = delta;
    for (int64_t d = 0; d < D; d++)
        dq_row[d] = 0.0f;
    for (int64_t j = 0; j < n; j++) {
        int64_t kj = tk_k_index(t, b, j, hk);
        float ds = tk_round_f(dt, p_row[j] * (dp[j] - delta));
        axpy32(dq_row, ds, t->kf + kj, D);
        if (dk_acc) {
            axpy32(dk_acc + kj, ds, q, D);
            axpy32(dv_acc + kj, p_row[j], d_o, D);
        }
    }
    for (int64_t d = 0; d < D; d++)
        dq_row[d] = tk_round_f(dt, t->scale_f * dq_row[d]);
}

void tk_base_key_backward(const tk_data *t, int64_t b, int64_t hk, int64_t j,
                          const tk_base_stats *st, float *dk_acc, float *dv_acc)
{
    const fa_dtype dt = t->p.dtype;
    const int64_t D = t->D;
    const float *k = t->kf + tk_k_index(t, b, j, hk), *v = t->vf + tk_k_index(t, b, j, hk);
    for (int64_t d = 0; d < D; d++)
        dk_acc[d] = dv_acc[d] = 0.0f;
    for (int64_t g = 0; g < t->group; g++) {
        int64_t h = hk * t->group + g;
        for (int64_t i = 0; i < t->Sq; i++) {
            if (j >= tk_visible_keys(t, i))
                continue;
            const tk_base_stats *s = &st[g * t->Sq + i];
            const float *q = t->qf + tk_q_index(t, b, i, h);
            const float *d_o = t->d_of + tk_q_index(t, b, i, h);
            float x = t->scale_f * tk_round_f(dt, tk_dot32(q, k, D));
            float p = tk_round_f(dt, expf(x - s->max) / s->sum);
            float dp = tk_round_f(dt, tk_dot32(d_o, v, D));
            float ds = tk_round_f(dt, p * (dp - s->delta));
            axpy32(dv_acc, p, d_o, D);
            axpy32(dk_acc, ds, q, D);
        }
    }
}

void tk_base_block_stats(const tk_data *t, int64_t b, int64_t h, int64_t i0, int64_t n, float *s,
                         tk_base_stats *st)
{
    const fa_dtype dt = t->p.dtype;
    const int64_t D = t->D, Sk = t->Sk, hk = h / t->group;
    int64_t nvis[TK_BLOCK], jmax = 0;
    for (int64_t r = 0; r < n; r++) {
        nvis[r] = tk_visible_keys(t, i0 + r);
        jmax = nvis[r] > jmax ? nvis[r] : jmax;
    }
    for (int64_t j = 0; j < jmax; j++) {
        const float *k = t->kf + tk_k_index(t, b, j, hk);
        for (int64_t r = 0; r < n; r++)
            if (j < nvis[r])
                s[r * Sk + j] = t->scale_f *
                                tk_round_f(dt, tk_dot32(t->qf + tk_q_index(t, b, i0 + r, h), k, D));
    }
    for (int64_t r = 0; r < n; r++) {
        float *row = s + r * Sk, m = -INFINITY, sum = 0.0f;
        for (int64_t j = 0; j < nvis[r]; j++)
            m = row[j] > m ? row[j] : m;
        for (int64_t j = 0; j < nvis[r]; j++) {
            row[j] = expf(row[j] - m);
            sum += row[j];
        }
        for (int64_t j = 0; j < nvis[r]; j++)
            row[j] = tk_round_f(dt, row[j] / sum);
        st[r].max = m;
        st[r].sum = nvis[r] > 0 ? sum : 0.0f;
        st[r].delta = 0.0f;
    }
    /* D_i = rowsum(P * dP), summed in j order as tk_base_row_backward does */
    for (int64_t j = 0; j < jmax; j++) {
        const float *v = t->vf + tk_k_index(t, b, j, hk);
        for (int64_t r = 0; r < n; r++)
            if (j < nvis[r]) {
                float dp = tk_round_f(dt, tk_dot32(t->d_of + tk_q_index(t, b, i0 + r, h), v, D));
                st[r].delta += s[r * Sk + j] * dp;
            }
    }
}

/* ---- whole-problem entry points ---- */

void fa_baseline_forward(const fa_ref_problem *p, const void *q, const void *k, const void *v,
                         void *o, float *lse)
{
    tk_data t;
    if (!tk_data_init(&t, p, q, k, v, NULL))
        return;
    float *p_row = malloc((size_t)(t.Sk > 0 ? t.Sk : 1) * sizeof *p_row);
    float *o_row = malloc((size_t)t.D * sizeof *o_row);
    float lse_row;
    tk_base_stats st;
    for (int64_t b = 0; p_row && o_row && b < t.B; b++)
        for (int64_t h = 0; h < t.Hq; h++)
            for (int64_t i = 0; i < t.Sq; i++) {
                tk_base_row_forward(&t, b, h, i, p_row, o_row, &lse_row, &st);
                int64_t at = tk_q_index(&t, b, i, h);
                for (int64_t d = 0; d < t.D; d++)
                    fa_testkit_store(o, p->dtype, (size_t)(at + d), o_row[d]);
                if (lse)
                    lse[(b * t.Hq + h) * t.Sq + i] = lse_row;
            }
    free(p_row);
    free(o_row);
    tk_data_free(&t);
}

void fa_baseline_backward(const fa_ref_problem *p, const void *q, const void *k, const void *v,
                          const void *d_o, void *dq, void *dk, void *dv)
{
    tk_data t;
    if (!tk_data_init(&t, p, q, k, v, d_o))
        return;
    size_t nk = (size_t)(t.B * t.Sk * t.Hkv * t.D), sk = (size_t)(t.Sk > 0 ? t.Sk : 1);
    float *dk_acc = calloc(nk ? nk : 1, sizeof *dk_acc);
    float *dv_acc = calloc(nk ? nk : 1, sizeof *dv_acc);
    float *p_row = malloc(sk * sizeof *p_row), *scratch = malloc(2 * sk * sizeof *scratch);
    float *o_row = malloc((size_t)t.D * sizeof *o_row), *dq_row = malloc((size_t)t.D * 4);
    float lse_row;
    tk_base_stats st;
    bool ok = dk_acc && dv_acc && p_row && scratch && o_row && dq_row;
    for (int64_t b = 0; ok && b < t.B; b++)
        for (int64_t h = 0; h < t.Hq; h++)
            for (int64_t i = 0; i < t.Sq; i++) {
                int64_t n = tk_base_row_forward(&t, b, h, i, p_row, o_row, &lse_row, &st);
                tk_base_row_backward(&t, b, h, i, n, p_row, scratch, dq_row, dk_acc, dv_acc, &st);
                int64_t at = tk_q_index(&t, b, i, h);
                for (int64_t d = 0; d < t.D; d++)
                    fa_testkit_store(dq, p->dtype, (size_t)(at + d), dq_row[d]);
            }
    for (size_t x = 0; ok && x < nk; x++) {
        fa_testkit_store(dk, p->dtype, x, tk_round_f(p->dtype, t.scale_f * dk_acc[x]));
        fa_testkit_store(dv, p->dtype, x, tk_round_f(p->dtype, dv_acc[x]));
    }
    free(dk_acc);
    free(dv_acc);
    free(p_row);
    free(scratch);
    free(o_row);
    free(dq_row);
    tk_data_free(&t);
}
