// SPDX-License-Identifier: MIT
/* Checking a forward result on sampled query rows, for problems too large for the full
 * reference: each sampled row costs O(Sk * D) for the reference and the same for the baseline;
 * and a backward result on sampled query and key rows (the conformance matrix's sampling). */
#include "tk_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void fa_testkit_check_forward_rows(const fa_ref_problem *p, const void *q, const void *k,
                                   const void *v, const void *o, const float *lse, int64_t n_rows,
                                   uint64_t seed, fa_row_check *out)
{
    memset(out, 0, sizeof *out);
    tk_data t;
    int64_t total = p->batch * p->heads_q * p->seq_q;
    if (total <= 0 || n_rows <= 0) {
        out->pass = true;
        return;
    }
    if (!tk_data_init(&t, p, q, k, v, NULL))
        return; /* pass stays false */
    double *p_row = malloc((size_t)(t.Sk > 0 ? t.Sk : 1) * sizeof *p_row);
    float *pf = malloc((size_t)(t.Sk > 0 ? t.Sk : 1) * sizeof *pf);
    double *ref = malloc((size_t)t.D * sizeof *ref), *got = malloc((size_t)t.D * sizeof *got);
    double *base = malloc((size_t)t.D * sizeof *base);
    float *of = malloc((size_t)t.D * sizeof *of);
    if (!p_row || !pf || !ref || !got || !base || !of)
        goto done;
    uint64_t rng = seed ^ 0x8bb84b93962eacc9ull;
    for (int64_t r = 0; r < n_rows; r++) {
        /* the first rows are the corners: (0,0,0) and the very last row */
        int64_t row = r == 0   ? 0
                      : r == 1 ? total - 1
                               : (int64_t)fa_testkit_rand_below(&rng, (uint64_t)total);
        int64_t b, h, i;
        tk_row_split(&t, row, &b, &h, &i);
        double ref_lse, got_lse;
        float base_lse;
        tk_ref_row_forward(&t, b, h, i, p_row, ref, &ref_lse);
        tk_base_row_forward(&t, b, h, i, pf, of, &base_lse);
        int64_t at = tk_q_index(&t, b, i, h);
        for (int64_t d = 0; d < t.D; d++) {
            got[d] = fa_testkit_load(o, fa_ref_o_dtype(p), (size_t)(at + d));
            base[d] = of[d];
        }
        double e = tk_max_abs_err(got, ref, t.D, &out->non_finite);
        double be = tk_max_abs_err_finite(base, ref, t.D);
        if (!(e <= out->max_err_o))
            out->max_err_o = e;
        if (be > out->baseline_err_o)
            out->baseline_err_o = be;
        if (lse) {
            got_lse = lse[row];
            double le = tk_max_lse_err(&got_lse, &ref_lse, 1, &out->non_finite);
            if (!(le <= out->max_err_lse))
                out->max_err_lse = le;
        }
        out->rows_checked++;
    }
    out->pass =
        !out->non_finite &&
        out->max_err_o <= FA_TESTKIT_K_FORWARD * out->baseline_err_o + FA_TESTKIT_ABS_SLACK &&
        out->max_err_lse <= FA_TESTKIT_LSE_REL;
done:
    free(p_row);
    free(pf);
    free(ref);
    free(got);
    free(base);
    free(of);
    tk_data_free(&t);
}

/* Max abs error, against ref, of the dq (or, with keys, dk or dv) rows e->rows (e->krows) of a
 * packed BSHD result `got`. */
static double rows_err(const tk_data *t, const tk_expect *e, bool keys, const void *got,
                       const double *ref, bool *non_finite)
{
    const int64_t n = keys ? e->n_krows : e->n_rows, D = t->D;
    double err = 0, x[256];
    for (int64_t r = 0; r < n; r++) {
        int64_t b, h, i, at;
        if (keys) {
            tk_krow_split(t, e->krows[r], &b, &h, &i);
            at = tk_k_index(t, b, i, h);
        } else {
            tk_row_split(t, e->rows[r], &b, &h, &i);
            at = tk_q_index(t, b, i, h);
        }
        for (int64_t d = 0; d < D; d++)
            x[d] = fa_testkit_load(got, t->p.dtype, (size_t)(at + d));
        double row = tk_max_abs_err(x, ref + r * D, D, non_finite);
        if (!(row <= err))
            err = row;
    }
    return err;
}

bool fa_testkit_check_backward_rows(const fa_ref_problem *p, const void *q, const void *k,
                                    const void *v, const void *d_o, const void *dq, const void *dk,
                                    const void *dv, uint64_t seed, fa_grad_check *out)
{
    memset(out, 0, sizeof *out);
    tk_data t;
    if (p->head_dim > 256 || !tk_data_init(&t, p, q, k, v, d_o))
        return false;
    tk_expect e;
    if (!tk_expect_compute(&t, true, true, seed, &e)) {
        tk_data_free(&t);
        return false;
    }
    const int64_t D = t.D;
    const double k3 = FA_TESTKIT_K_BACKWARD, slack = FA_TESTKIT_ABS_SLACK;
    out->rows_checked = e.n_rows;
    out->key_rows_checked = e.n_krows;
    out->err_dq = rows_err(&t, &e, false, dq, e.dq, &out->non_finite);
    out->err_dk = rows_err(&t, &e, true, dk, e.dk, &out->non_finite);
    out->err_dv = rows_err(&t, &e, true, dv, e.dv, &out->non_finite);
    out->tol_dq = k3 * tk_max_abs_err_finite(e.bdq, e.dq, e.n_rows * D) + slack;
    out->tol_dk = k3 * tk_max_abs_err_finite(e.bdk, e.dk, e.n_krows * D) + slack;
    out->tol_dv = k3 * tk_max_abs_err_finite(e.bdv, e.dv, e.n_krows * D) + slack;
    out->pass = !out->non_finite && out->err_dq <= out->tol_dq && out->err_dk <= out->tol_dk &&
                out->err_dv <= out->tol_dv;
    tk_expect_free(&e);
    tk_data_free(&t);
    return true;
}
