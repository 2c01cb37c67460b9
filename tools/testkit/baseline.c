// SPDX-License-Identifier: MIT
/* The same-precision baseline: what the dtype itself costs, against which the conformance
 * tolerance is set (a multiple of the baseline's error against the float64 reference).
 *
 * Forward: an ordinary, non-flash implementation that stores every matrix it materialises in the
 * dtype and accumulates every product in f32: S = scale Q K^T (f32 accumulation, rounded), with a
 * softcap c then S = c tanh(S / c) (f32, rounded), with ALiBi and a bias
 * S = S - slope |i + Sk - Sq - j| + bias (formed in f32, the sum rounded), P = softmax(S) in f32
 * then rounded, O = P V (f32 accumulation, rounded), LSE = max + log(sum) in f32. FP8 (e4m3
 * inputs), what an FP8 attention pays instead: S and O in o's dtype, and the unnormalised
 * exp(S - max) rounded to e4m3 as an FP8 P V product takes it (fa_testkit.h).
 *
 * Backward: FlashAttention's backward done plainly, from what its interface hands it: the O of
 * an exact forward rounded to the dtype and its LSE rounded to f32. Per row, in f32: S = scale Q
 * K^T (softcapped, ALiBi and bias added), P = exp(S - LSE), Delta = rowsum(dO * O),
 * dP = dO V^T, dS = P (dP - Delta) (times the softcap's 1 - tanh^2); P and dS rounded to the
 * dtype where they enter a product (dV = P^T dO, dK = scale dS^T Q, dQ = scale dS K; f32
 * accumulation, rounded). So the tolerance includes what the interface itself costs: P recomputed
 * from an LSE rounded to f32 (a relative error of about |LSE| 2^-24, which an implementation that
 * keeps its softmax in memory does not pay) and Delta from the rounded O. Works row by row like the
 * reference (see reference64.c). */
#include "tk_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float base_dot(const tk_data *t, const float *a, const float *b, int64_t n)
{
    return t->serial_dots ? tk_dot32_serial(a, b, n) : tk_dot32(a, b, n);
}

static void axpy32(float *y, float a, const float *x, int64_t n)
{
    for (int64_t d = 0; d < n; d++)
        y[d] += a * x[d];
}

/* A scaled score through the softcap, c tanh(s / c), in f32; *slope gets 1 - tanh^2 (1 without
 * a softcap). */
static float base_softcap(const tk_data *t, float s, float *slope)
{
    if (t->p.softcap <= 0.0f) {
        *slope = 1.0f;
        return s;
    }
    const float th = tanhf(s / t->p.softcap);
    *slope = 1.0f - th * th;
    return t->p.softcap * th;
}

int64_t tk_base_row_forward(const tk_data *t, int64_t b, int64_t h, int64_t i, float *p_row,
                            float *o_row, float *lse)
{
    /* FP8: S and O in o's dtype, the unnormalised P in e4m3 (fa_baseline_forward) */
    const bool fp8 = t->p.dtype == FA_DTYPE_E4M3;
    const fa_dtype dt = fa_ref_o_dtype(&t->p);
    int64_t j0;
    const int64_t D = t->D, n = tk_key_range(t, b, i, &j0), hk = h / t->group;
    const float *q = t->qf + tk_q_index(t, b, i, h);
    for (int64_t d = 0; d < D; d++)
        o_row[d] = 0.0f;
    if (n == 0) {
        *lse = -INFINITY;
        return 0;
    }
    float m = -INFINITY, slope;
    for (int64_t j = j0; j < j0 + n; j++) {
        float s = tk_round_f(dt, t->scale_f * base_dot(t, q, t->kf + tk_k_index(t, b, j, hk), D));
        if (t->p.softcap > 0.0f) /* as a plain implementation does: a new tensor, rounded */
            s = tk_round_f(dt, base_softcap(t, s, &slope));
        if (t->p.alibi_slopes || t->p.bias) /* likewise: S + bias as a new tensor */
            s = tk_round_f(dt, s + tk_alibi32(t, b, h, i, j) + (float)tk_bias64(t, b, h, i, j));
        p_row[j] = s;
        if (s > m)
            m = s;
    }
    if (tk_all_hidden32(p_row, j0, j0 + n)) { /* the bias hides every key */
        *lse = -INFINITY;
        return 0;
    }
    float sum = 0.0f;
    for (int64_t j = j0; j < j0 + n; j++) {
        p_row[j] = expf(p_row[j] - m);
        sum += p_row[j];
    }
    for (int64_t j = j0; j < j0 + n; j++) {
        p_row[j] = fp8 ? tk_round_f(FA_DTYPE_E4M3, p_row[j]) : tk_round_f(dt, p_row[j] / sum);
        axpy32(o_row, p_row[j], t->vf + tk_k_index(t, b, j, hk), D);
    }
    for (int64_t d = 0; d < D; d++)
        o_row[d] = tk_round_f(dt, fp8 ? o_row[d] / sum : o_row[d]);
    *lse = m + logf(sum);
    return n;
}

void tk_base_stats_of(const tk_data *t, int64_t b, int64_t h, int64_t i, const double *o_row,
                      double lse, tk_base_stats *st)
{
    const float *d_o = t->d_of + tk_q_index(t, b, i, h);
    float delta = 0.0f;
    for (int64_t d = 0; d < t->D; d++)
        delta += d_o[d] * tk_round_f(t->p.dtype, (float)o_row[d]);
    st->lse = (float)tk_backward_lse(lse);
    st->delta = delta;
}

/* P and dS of query row (b, h, i) and key j, as the baseline's backward forms them. */
static void base_pair(const tk_data *t, int64_t b, int64_t h, int64_t i, int64_t j,
                      const tk_base_stats *st, float *p, float *ds)
{
    const int64_t hk = h / t->group, kj = tk_k_index(t, b, j, hk), qi = tk_q_index(t, b, i, h);
    float slope;
    const float s =
        base_softcap(t, t->scale_f * base_dot(t, t->qf + qi, t->kf + kj, t->D), &slope) +
        tk_alibi32(t, b, h, i, j) + (float)tk_bias64(t, b, h, i, j);
    const float p32 = st->lse == -INFINITY ? 0.0f : expf(s - st->lse); /* every key hidden */
    const float dp = base_dot(t, t->d_of + qi, t->vf + kj, t->D);
    *p = tk_round_f(t->p.dtype, p32);
    *ds = tk_round_f(t->p.dtype, p32 * (dp - st->delta) * slope);
}

void tk_base_row_backward(const tk_data *t, int64_t b, int64_t h, int64_t i, int64_t n,
                          const tk_base_stats *st, float *dq_row, float *dk_acc, float *dv_acc)
{
    const int64_t D = t->D, hk = h / t->group;
    const float *q = t->qf + tk_q_index(t, b, i, h);
    const float *d_o = t->d_of + tk_q_index(t, b, i, h);
    for (int64_t d = 0; d < D; d++)
        dq_row[d] = 0.0f;
    int64_t j0;
    tk_key_range(t, b, i, &j0);
    for (int64_t j = j0; j < j0 + n; j++) {
        const int64_t kj = tk_k_index(t, b, j, hk);
        float p, ds;
        base_pair(t, b, h, i, j, st, &p, &ds);
        axpy32(dq_row, ds, t->kf + kj, D);
        if (dk_acc) {
            axpy32(dk_acc + kj, ds, q, D);
            axpy32(dv_acc + kj, p, d_o, D);
        }
    }
    for (int64_t d = 0; d < D; d++)
        dq_row[d] = tk_round_f(t->p.dtype, t->scale_f * dq_row[d]);
}

void tk_base_key_backward(const tk_data *t, int64_t b, int64_t hk, int64_t j,
                          const tk_base_stats *st, float *dk_acc, float *dv_acc)
{
    for (int64_t d = 0; d < t->D; d++)
        dk_acc[d] = dv_acc[d] = 0.0f;
    for (int64_t g = 0; g < t->group; g++) {
        const int64_t h = hk * t->group + g;
        for (int64_t i = 0; i < t->Sq; i++) {
            if (!tk_sees(t, b, i, j))
                continue;
            float p, ds;
            base_pair(t, b, h, i, j, &st[g * t->Sq + i], &p, &ds);
            axpy32(dv_acc, p, t->d_of + tk_q_index(t, b, i, h), t->D);
            axpy32(dk_acc, ds, t->qf + tk_q_index(t, b, i, h), t->D);
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
    for (int64_t b = 0; p_row && o_row && b < t.B; b++)
        for (int64_t h = 0; h < t.Hq; h++)
            for (int64_t i = 0; i < t.Sq; i++) {
                tk_base_row_forward(&t, b, h, i, p_row, o_row, &lse_row);
                int64_t at = tk_q_index(&t, b, i, h);
                for (int64_t d = 0; d < t.D; d++)
                    fa_testkit_store(o, fa_ref_o_dtype(p), (size_t)(at + d), o_row[d]);
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
    double *p_row = malloc(sk * sizeof *p_row), *o_row = malloc((size_t)t.D * sizeof *o_row);
    float *dq_row = malloc((size_t)t.D * sizeof *dq_row);
    double lse_row;
    tk_base_stats st;
    bool ok = dk_acc && dv_acc && p_row && o_row && dq_row;
    for (int64_t b = 0; ok && b < t.B; b++)
        for (int64_t h = 0; h < t.Hq; h++)
            for (int64_t i = 0; i < t.Sq; i++) {
                int64_t n = tk_ref_row_forward(&t, b, h, i, p_row, o_row, &lse_row);
                tk_base_stats_of(&t, b, h, i, o_row, lse_row, &st);
                tk_base_row_backward(&t, b, h, i, n, &st, dq_row, dk_acc, dv_acc);
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
    free(o_row);
    free(dq_row);
    tk_data_free(&t);
}
