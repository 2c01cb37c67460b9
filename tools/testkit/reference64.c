// SPDX-License-Identifier: MIT
/* The float64 reference: attention computed in double from the inputs as their dtype holds them.
 *
 * It works one query row at a time: the row's scores against every visible key (those the causal
 * mask and the sliding window leave it; tk_key_range) are materialised (Sk doubles), softcapped
 * where the problem says so, the ALiBi bias added where it has slopes, normalised by a two-pass
 * softmax (max, then sum of exponentials), and used at once for O and, in the backward, for dQ and
 * the row's contribution to dK and dV (through the softcap's derivative). This is the score matrix
 * of each (b, h) one row after another: the same arithmetic as materialising it, in O(Sk) memory. A
 * row that sees no key has O = 0, LSE = -inf and zero gradients. */
#include "tk_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void axpy64(double *y, double a, const double *x, int64_t n)
{
    for (int64_t d = 0; d < n; d++)
        y[d] += a * x[d];
}

/* The score of query row (b, h, i) and key j as the softmax takes it (scaled, then softcapped,
 * then the ALiBi bias added), and into *slope its derivative by the scaled score (the bias is a
 * constant). */
static double ref_score(const tk_data *t, int64_t b, int64_t h, int64_t i, int64_t j, double *slope)
{
    const double *q = t->q + tk_q_index(t, b, i, h);
    const double *k = t->k + tk_k_index(t, b, j, h / t->group);
    return tk_softcap64(t, t->scale * tk_dot64(q, k, t->D), slope) + tk_alibi64(t, b, h, i, j) +
           tk_bias64(t, b, h, i, j);
}

int64_t tk_ref_row_forward(const tk_data *t, int64_t b, int64_t h, int64_t i, double *p_row,
                           double *o_row, double *lse)
{
    int64_t j0;
    const int64_t D = t->D, n = tk_key_range(t, b, i, &j0), hk = h / t->group;
    memset(o_row, 0, (size_t)D * sizeof *o_row);
    if (n == 0) {
        *lse = -INFINITY;
        return 0;
    }
    double m = -INFINITY, slope;
    for (int64_t j = j0; j < j0 + n; j++) {
        double s = ref_score(t, b, h, i, j, &slope);
        p_row[j] = s;
        if (s > m)
            m = s;
    }
    if (tk_all_hidden64(p_row, j0, j0 + n)) { /* the bias hides every key */
        *lse = -INFINITY;
        return 0;
    }
    double sum = 0.0;
    for (int64_t j = j0; j < j0 + n; j++) {
        p_row[j] = exp(p_row[j] - m);
        sum += p_row[j];
    }
    for (int64_t j = j0; j < j0 + n; j++) {
        p_row[j] /= sum;
        axpy64(o_row, p_row[j], t->v + tk_k_index(t, b, j, hk), D);
    }
    *lse = m + log(sum);
    return n;
}

double tk_backward_lse(double lse)
{
    return lse == -INFINITY || fabs(lse) < FA_BACKWARD_LSE_LIMIT ? lse : NAN;
}

void tk_ref_row_backward(const tk_data *t, int64_t b, int64_t h, int64_t i, int64_t n,
                         const double *p_row, const double *o_row, double lse, double *dq_row,
                         double *dk, double *dv)
{
    const double unresolved = isnan(tk_backward_lse(lse)) ? NAN : 1.0; /* NaN P: the limit */
    const int64_t D = t->D, hk = h / t->group;
    const double *q = t->q + tk_q_index(t, b, i, h);
    const double *d_o = t->d_o + tk_q_index(t, b, i, h);
    memset(dq_row, 0, (size_t)D * sizeof *dq_row);
    double delta = tk_dot64(d_o, o_row, D); /* = sum_j P_ij dP_ij */
    int64_t j0;
    tk_key_range(t, b, i, &j0);
    for (int64_t j = j0; j < j0 + n; j++) {
        int64_t kj = tk_k_index(t, b, j, hk);
        double dp = tk_dot64(d_o, t->v + kj, D), slope = 1.0;
        if (t->p.softcap > 0.0f)
            ref_score(t, b, h, i, j, &slope);
        double p = p_row[j] * unresolved, ds = p * (dp - delta) * slope;
        axpy64(dq_row, ds, t->k + kj, D);
        if (dk) {
            axpy64(dk + kj, ds, q, D);
            axpy64(dv + kj, p, d_o, D);
        }
    }
    for (int64_t d = 0; d < D; d++)
        dq_row[d] *= t->scale;
}

void tk_ref_key_backward(const tk_data *t, int64_t b, int64_t hk, int64_t j, const double *lse,
                         const double *delta, double *dk_row, double *dv_row)
{
    const int64_t D = t->D;
    const double *v = t->v + tk_k_index(t, b, j, hk);
    memset(dk_row, 0, (size_t)D * sizeof *dk_row);
    memset(dv_row, 0, (size_t)D * sizeof *dv_row);
    for (int64_t g = 0; g < t->group; g++) {
        int64_t h = hk * t->group + g;
        for (int64_t i = 0; i < t->Sq; i++) {
            if (!tk_sees(t, b, i, j) || lse[g * t->Sq + i] == -INFINITY) /* no key, or hidden */
                continue;
            const double *q = t->q + tk_q_index(t, b, i, h);
            const double *d_o = t->d_o + tk_q_index(t, b, i, h);
            double slope;
            double p = exp(ref_score(t, b, h, i, j, &slope) - tk_backward_lse(lse[g * t->Sq + i]));
            double ds = p * (tk_dot64(d_o, v, D) - delta[g * t->Sq + i]) * slope;
            axpy64(dv_row, p, d_o, D);
            axpy64(dk_row, ds, q, D);
        }
    }
    for (int64_t d = 0; d < D; d++)
        dk_row[d] *= t->scale;
}

void tk_ref_block_stats(const tk_data *t, int64_t b, int64_t h, int64_t i0, int64_t n, double *s,
                        double *o, double *lse, double *delta)
{
    const int64_t D = t->D, Sk = t->Sk, hk = h / t->group;
    int64_t j0[TK_BLOCK], j1[TK_BLOCK], jmin = Sk, jmax = 0; /* row r sees [j0, j1) */
    for (int64_t r = 0; r < n; r++) {
        const int64_t count = tk_key_range(t, b, i0 + r, &j0[r]);
        j1[r] = j0[r] + count;
        if (j1[r] > j0[r]) {
            jmin = j0[r] < jmin ? j0[r] : jmin;
            jmax = j1[r] > jmax ? j1[r] : jmax;
        }
    }
    /* each key row is loaded once for the whole block */
    double slope;
    for (int64_t j = jmin; j < jmax; j++) {
        const double *k = t->k + tk_k_index(t, b, j, hk);
        for (int64_t r = 0; r < n; r++)
            if (j >= j0[r] && j < j1[r])
                s[r * Sk + j] =
                    tk_softcap64(t, t->scale * tk_dot64(t->q + tk_q_index(t, b, i0 + r, h), k, D),
                                 &slope) +
                    tk_alibi64(t, b, h, i0 + r, j) + tk_bias64(t, b, h, i0 + r, j);
    }
    for (int64_t r = 0; r < n; r++) {
        double *row = s + r * Sk, m = -INFINITY, sum = 0.0;
        if (tk_all_hidden64(row, j0[r], j1[r])) /* the bias hides every key */
            j1[r] = j0[r];
        for (int64_t j = j0[r]; j < j1[r]; j++)
            m = row[j] > m ? row[j] : m;
        for (int64_t j = j0[r]; j < j1[r]; j++) {
            row[j] = exp(row[j] - m);
            sum += row[j];
        }
        for (int64_t j = j0[r]; j < j1[r]; j++)
            row[j] /= sum;
        lse[r] = j1[r] > j0[r] ? m + log(sum) : -INFINITY;
    }
    memset(o, 0, (size_t)(n * D) * sizeof *o);
    for (int64_t j = jmin; j < jmax; j++) {
        const double *v = t->v + tk_k_index(t, b, j, hk);
        for (int64_t r = 0; r < n; r++)
            if (j >= j0[r] && j < j1[r])
                axpy64(o + r * D, s[r * Sk + j], v, D);
    }
    for (int64_t r = 0; r < n; r++)
        delta[r] = tk_dot64(t->d_o + tk_q_index(t, b, i0 + r, h), o + r * D, D);
}

/* ---- whole-problem entry points ---- */

void fa_ref64_forward(const fa_ref_problem *p, const void *q, const void *k, const void *v,
                      double *o, double *lse)
{
    tk_data t;
    if (!tk_data_init(&t, p, q, k, v, NULL))
        return;
    double *p_row = malloc((size_t)(t.Sk > 0 ? t.Sk : 1) * sizeof *p_row);
    double lse_row;
    for (int64_t b = 0; p_row && b < t.B; b++)
        for (int64_t h = 0; h < t.Hq; h++)
            for (int64_t i = 0; i < t.Sq; i++) {
                tk_ref_row_forward(&t, b, h, i, p_row, o + tk_q_index(&t, b, i, h), &lse_row);
                if (lse)
                    lse[(b * t.Hq + h) * t.Sq + i] = lse_row;
            }
    free(p_row);
    tk_data_free(&t);
}

void fa_ref64_backward(const fa_ref_problem *p, const void *q, const void *k, const void *v,
                       const void *d_o, double *dq, double *dk, double *dv)
{
    tk_data t;
    if (!tk_data_init(&t, p, q, k, v, d_o))
        return;
    size_t nk = (size_t)(t.B * t.Sk * t.Hkv * t.D);
    memset(dk, 0, nk * sizeof *dk);
    memset(dv, 0, nk * sizeof *dv);
    double *p_row = malloc((size_t)(t.Sk > 0 ? t.Sk : 1) * sizeof *p_row);
    double *o_row = malloc((size_t)t.D * sizeof *o_row);
    double lse_row;
    for (int64_t b = 0; p_row && o_row && b < t.B; b++)
        for (int64_t h = 0; h < t.Hq; h++)
            for (int64_t i = 0; i < t.Sq; i++) {
                int64_t n = tk_ref_row_forward(&t, b, h, i, p_row, o_row, &lse_row);
                tk_ref_row_backward(&t, b, h, i, n, p_row, o_row, lse_row,
                                    dq + tk_q_index(&t, b, i, h), dk, dv);
            }
    for (size_t x = 0; x < nk; x++)
        dk[x] *= t.scale;
    free(p_row);
    free(o_row);
    tk_data_free(&t);
}

/* ---- packed variable-length batches ---- */

/* Sequence b of a packed batch as a problem of its own (fa_ref64_forward_packed). */
static fa_ref_problem packed_sequence(const fa_ref_problem *p, const int32_t *cu_q,
                                      const int32_t *cu_k, int64_t b)
{
    fa_ref_problem one = *p;
    one.batch = 1;
    one.seq_q = cu_q[b + 1] - cu_q[b];
    one.seq_k = cu_k[b + 1] - cu_k[b];
    one.alibi_slopes = p->alibi_slopes ? p->alibi_slopes + b * p->alibi_batch_stride : NULL;
    one.alibi_batch_stride = 0;
    for (int x = 0; x < 3; x++)
        one.descale[x] = p->descale[x] ? p->descale[x] + b * p->heads_kv : NULL;
    return one;
}

void fa_ref64_forward_packed(const fa_ref_problem *p, int64_t n, const int32_t *cu_q,
                             const int32_t *cu_k, int64_t total_q, const void *q, const void *k,
                             const void *v, double *o, double *lse)
{
    const size_t es = fa_dtype_size(p->dtype), hq = (size_t)p->heads_q, d = (size_t)p->head_dim;
    const size_t hkv = (size_t)p->heads_kv;
    memset(o, 0, (size_t)total_q * hq * d * sizeof *o);
    for (size_t x = 0; lse && x < (size_t)total_q * hq; x++)
        lse[x] = -INFINITY;
    for (int64_t b = 0; b < n; b++) {
        const fa_ref_problem one = packed_sequence(p, cu_q, cu_k, b);
        const size_t q0 = (size_t)cu_q[b] * hq * d, k0 = (size_t)cu_k[b] * hkv * d;
        double *own = malloc((size_t)(one.seq_q > 0 ? one.seq_q : 1) * hq * sizeof *own);
        if (!own)
            return;
        fa_ref64_forward(&one, (const char *)q + q0 * es, (const char *)k + k0 * es,
                         (const char *)v + k0 * es, o + q0, own);
        for (size_t h = 0; lse && h < hq; h++)
            for (int64_t i = 0; i < one.seq_q; i++)
                lse[h * (size_t)total_q + (size_t)(cu_q[b] + i)] = own[h * (size_t)one.seq_q + i];
        free(own);
    }
}

void fa_ref64_backward_packed(const fa_ref_problem *p, int64_t n, const int32_t *cu_q,
                              const int32_t *cu_k, int64_t total_q, int64_t total_k, const void *q,
                              const void *k, const void *v, const void *d_o, double *dq, double *dk,
                              double *dv)
{
    const size_t es = fa_dtype_size(p->dtype), hq = (size_t)p->heads_q, d = (size_t)p->head_dim;
    const size_t hkv = (size_t)p->heads_kv;
    memset(dq, 0, (size_t)total_q * hq * d * sizeof *dq);
    memset(dk, 0, (size_t)total_k * hkv * d * sizeof *dk);
    memset(dv, 0, (size_t)total_k * hkv * d * sizeof *dv);
    for (int64_t b = 0; b < n; b++) {
        const fa_ref_problem one = packed_sequence(p, cu_q, cu_k, b);
        const size_t q0 = (size_t)cu_q[b] * hq * d, k0 = (size_t)cu_k[b] * hkv * d;
        fa_ref64_backward(&one, (const char *)q + q0 * es, (const char *)k + k0 * es,
                          (const char *)v + k0 * es, (const char *)d_o + q0 * es, dq + q0, dk + k0,
                          dv + k0);
    }
}
