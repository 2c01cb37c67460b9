// SPDX-License-Identifier: MIT
/* What a backend's outputs are compared with: reference and baseline values on a set of rows.
 *
 * Small problems (B * Hq * Sq * Sk * D <= TK_FULL_WORK_LIMIT) get every row: O, LSE and dQ of
 * every query row and dK, dV of every key row, from one streaming pass per row.
 *
 * Larger problems get samples, each value still exact:
 *   - forward: O and LSE of sampled query rows (first, last, first-visible and tile-edge rows
 *     of the first and last heads, the rest uniform over all heads), O(rows * Sk * D);
 *   - backward: dQ of sampled query rows, each from its own full row of P, O(rows * Sk * D);
 *     dK and dV of sampled key rows of one (batch, kv head) group, chosen at random. A key row's
 *     gradient sums over every query row of every query head in the group, which needs each of
 *     those rows' LSE and Delta = dO . O: the reference forward of the whole group is computed
 *     first (O(group * Sq * Sk * D)), then each sampled key row in O(group * Sq * D).
 * The baseline is evaluated on the same rows, so the tolerance matches what is compared. */
#include "tk_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TK_SAMPLE_ROWS_FWD 96
#define TK_SAMPLE_ROWS_BWD 48
#define TK_SAMPLE_KEYS 40

void tk_expect_free(tk_expect *e)
{
    free(e->rows);
    free(e->krows);
    free(e->o);
    free(e->lse);
    free(e->dq);
    free(e->dk);
    free(e->dv);
    free(e->bo);
    free(e->blse);
    free(e->bdq);
    free(e->bdk);
    free(e->bdv);
    memset(e, 0, sizeof *e);
}

static void *alloc_n(int64_t n, size_t size)
{
    return malloc((size_t)(n > 0 ? n : 1) * size);
}

/* Rows at tile edges (multiples of 64 and their neighbours), the first and last rows and the
 * first row that sees a key, in the first and last (batch, head); then uniform rows. */
static void sample_rows(const tk_data *t, int64_t want, uint64_t *rng, tk_expect *e)
{
    int64_t total = t->B * t->Hq * t->Sq;
    int64_t first_visible = t->p.causal && t->Sq > t->Sk ? t->Sq - t->Sk : 0;
    int64_t at[] = {0, t->Sq - 1, first_visible, first_visible + 1, 63, 64, 127, 128, t->Sq / 2};
    int64_t bases[2] = {0, total - t->Sq};
    e->n_rows = 0;
    for (int w = 0; w < 2; w++)
        for (size_t k = 0; k < sizeof at / sizeof at[0] && e->n_rows < want; k++)
            if (at[k] >= 0 && at[k] < t->Sq)
                e->rows[e->n_rows++] = bases[w] + at[k];
    while (e->n_rows < want)
        e->rows[e->n_rows++] = (int64_t)fa_testkit_rand_below(rng, (uint64_t)total);
}

/* Reference and baseline of rows e->rows[r0 .. r1), adding into the dK/dV sums of their KV heads
 * when dk (and the rest) are not NULL. Returns false when out of memory. */
static bool expect_rows(const tk_data *t, tk_expect *e, int64_t r0, int64_t r1, double *dk,
                        double *dv, float *dk_acc, float *dv_acc)
{
    const int64_t D = t->D;
    double *p_row = alloc_n(t->Sk, sizeof *p_row);
    float *pf = alloc_n(t->Sk, sizeof *pf);
    float *of = alloc_n(D, sizeof *of), *dqf = alloc_n(D, sizeof *dqf), lsef;
    bool ok = p_row && pf && of && dqf;
    for (int64_t r = r0; ok && r < r1; r++) {
        int64_t b, h, i;
        tk_row_split(t, e->rows[r], &b, &h, &i);
        int64_t n = tk_ref_row_forward(t, b, h, i, p_row, e->o + r * D, &e->lse[r]);
        tk_base_row_forward(t, b, h, i, pf, of, &lsef);
        e->blse[r] = lsef;
        for (int64_t d = 0; d < D; d++)
            e->bo[r * D + d] = of[d];
        if (!e->backward)
            continue;
        tk_ref_row_backward(t, b, h, i, n, p_row, e->o + r * D, e->lse[r], e->dq + r * D, dk, dv);
        tk_base_stats st;
        tk_base_stats_of(t, b, h, i, e->o + r * D, e->lse[r], &st);
        tk_base_row_backward(t, b, h, i, n, &st, dqf, dk_acc, dv_acc);
        for (int64_t d = 0; d < D; d++)
            e->bdq[r * D + d] = dqf[d];
    }
    free(p_row);
    free(pf);
    free(of);
    free(dqf);
    return ok;
}

/* Every row, one streaming pass for the reference and one for the baseline. The (batch, KV head)
 * groups run in parallel: each owns its query rows and the dK/dV rows they add to, and sums them
 * in the same order as a serial pass, so the result does not depend on the thread count. */
static bool compute_full(const tk_data *t, tk_expect *e)
{
    const int64_t D = t->D, nk = t->B * t->Sk * t->Hkv * D;
    double *dk = NULL, *dv = NULL;
    float *dk_acc = NULL, *dv_acc = NULL;
    bool ok = true;
    if (e->backward) {
        dk = calloc((size_t)(nk > 0 ? nk : 1), sizeof *dk);
        dv = calloc((size_t)(nk > 0 ? nk : 1), sizeof *dv);
        dk_acc = calloc((size_t)(nk > 0 ? nk : 1), sizeof *dk_acc);
        dv_acc = calloc((size_t)(nk > 0 ? nk : 1), sizeof *dv_acc);
        ok = dk && dv && dk_acc && dv_acc;
    }
    const int64_t groups = t->B * t->Hkv, rows_per_group = t->group * t->Sq;
    int failed = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(| : failed) if (ok)
    for (int64_t g = 0; g < groups; g++)
        failed |= !expect_rows(t, e, g * rows_per_group, (g + 1) * rows_per_group, dk, dv, dk_acc,
                               dv_acc);
    ok = ok && !failed;
    for (int64_t r = 0; ok && e->backward && r < e->n_krows; r++) {
        int64_t b, hk, j;
        tk_krow_split(t, e->krows[r], &b, &hk, &j);
        int64_t at = tk_k_index(t, b, j, hk);
        for (int64_t d = 0; d < D; d++) {
            e->dk[r * D + d] = t->scale * dk[at + d];
            e->dv[r * D + d] = dv[at + d];
            e->bdk[r * D + d] = tk_round_f(t->p.dtype, t->scale_f * dk_acc[at + d]);
            e->bdv[r * D + d] = tk_round_f(t->p.dtype, dv_acc[at + d]);
        }
    }
    free(dk);
    free(dv);
    free(dk_acc);
    free(dv_acc);
    return ok;
}

/* Sampled rows, and sampled key rows of one group. Each loop runs in parallel over items that
 * write disjoint outputs, with scratch per thread. */
static bool compute_sampled(const tk_data *t, int64_t b, int64_t hk, tk_expect *e)
{
    const int64_t D = t->D, G = t->group, Sq = t->Sq;
    int failed = 0;
#pragma omp parallel for schedule(dynamic, 4) reduction(| : failed)
    for (int64_t r = 0; r < e->n_rows; r++)
        failed |= !expect_rows(t, e, r, r + 1, NULL, NULL, NULL, NULL);
    if (failed || !e->backward || e->n_krows == 0)
        return !failed;

    /* LSE and Delta of every query row of the group's heads, which every key row needs */
    double *lse_g = alloc_n(G * Sq, sizeof *lse_g), *delta_g = alloc_n(G * Sq, sizeof *delta_g);
    tk_base_stats *st_g = alloc_n(G * Sq, sizeof *st_g);
    failed = !(lse_g && delta_g && st_g);
    const int64_t blocks = (Sq + TK_BLOCK - 1) / TK_BLOCK;
#pragma omp parallel reduction(| : failed) if (!failed)
    {
        double *s_blk = alloc_n(TK_BLOCK * t->Sk, sizeof *s_blk);
        double *o_blk = alloc_n(TK_BLOCK * D, sizeof *o_blk);
        failed |= !(s_blk && o_blk);
#pragma omp for schedule(dynamic, 1)
        for (int64_t x = 0; x < G * blocks; x++) {
            if (failed)
                continue;
            const int64_t g = x / blocks, i = x % blocks * TK_BLOCK;
            const int64_t n = Sq - i < TK_BLOCK ? Sq - i : TK_BLOCK;
            tk_ref_block_stats(t, b, hk * G + g, i, n, s_blk, o_blk, lse_g + g * Sq + i,
                               delta_g + g * Sq + i);
            for (int64_t r = 0; r < n; r++)
                tk_base_stats_of(t, b, hk * G + g, i + r, o_blk + r * D, lse_g[g * Sq + i + r],
                                 st_g + g * Sq + i + r);
        }
        free(s_blk);
        free(o_blk);
    }
#pragma omp parallel reduction(| : failed) if (!failed)
    {
        float *dkf = alloc_n(D, sizeof *dkf), *dvf = alloc_n(D, sizeof *dvf);
        failed |= !(dkf && dvf);
#pragma omp for schedule(dynamic, 1)
        for (int64_t r = 0; r < e->n_krows; r++) {
            if (failed)
                continue;
            int64_t j = e->krows[r] % t->Sk;
            tk_ref_key_backward(t, b, hk, j, lse_g, delta_g, e->dk + r * D, e->dv + r * D);
            tk_base_key_backward(t, b, hk, j, st_g, dkf, dvf);
            for (int64_t d = 0; d < D; d++) {
                e->bdk[r * D + d] = tk_round_f(t->p.dtype, t->scale_f * dkf[d]);
                e->bdv[r * D + d] = tk_round_f(t->p.dtype, dvf[d]);
            }
        }
        free(dkf);
        free(dvf);
    }
    free(lse_g);
    free(delta_g);
    free(st_g);
    return !failed;
}

/* Per element, the baseline value of the two with the larger error (see tk_data.two_orders). */
static void keep_worse(double *base, const double *other, const double *ref, int64_t n)
{
    for (int64_t x = 0; x < n; x++)
        if (isfinite(other[x]) && !(fabs(base[x] - ref[x]) >= fabs(other[x] - ref[x])))
            base[x] = other[x];
}

static bool expect_one_order(const tk_data *t, bool backward, bool force_sample, uint64_t seed,
                             tk_expect *e);

bool tk_expect_compute(const tk_data *t, bool backward, bool force_sample, uint64_t seed,
                       tk_expect *e)
{
    if (!expect_one_order(t, backward, force_sample, seed, e))
        return false;
    if (!t->two_orders)
        return true;
    tk_data serial = *t;
    serial.serial_dots = !t->serial_dots;
    tk_expect e2;
    if (!expect_one_order(&serial, backward, force_sample, seed, &e2)) {
        tk_expect_free(e);
        return false;
    }
    const int64_t nq = e->n_rows * t->D, nk = e->n_krows * t->D;
    keep_worse(e->bo, e2.bo, e->o, nq);
    keep_worse(e->blse, e2.blse, e->lse, e->n_rows);
    if (backward) {
        keep_worse(e->bdq, e2.bdq, e->dq, nq);
        keep_worse(e->bdk, e2.bdk, e->dk, nk);
        keep_worse(e->bdv, e2.bdv, e->dv, nk);
    }
    tk_expect_free(&e2);
    return true;
}

static bool expect_one_order(const tk_data *t, bool backward, bool force_sample, uint64_t seed,
                             tk_expect *e)
{
    memset(e, 0, sizeof *e);
    e->backward = backward;
    const int64_t D = t->D, total_rows = t->B * t->Hq * t->Sq, total_krows = t->B * t->Hkv * t->Sk;
    double work = (double)t->B * (double)t->Hq * (double)t->Sq * (double)t->Sk * (double)D;
    e->full = !force_sample && work <= (double)TK_FULL_WORK_LIMIT;
    uint64_t rng = seed ^ 0xa0761d6478bd642full;
    int64_t want_rows = total_rows, want_krows = backward ? total_krows : 0;
    int64_t gb = 0, ghk = 0;
    if (!e->full) {
        int64_t cap = backward ? TK_SAMPLE_ROWS_BWD : TK_SAMPLE_ROWS_FWD;
        want_rows = total_rows < cap ? total_rows : cap;
        if (backward) {
            gb = (int64_t)fa_testkit_rand_below(&rng, (uint64_t)t->B);
            ghk = (int64_t)fa_testkit_rand_below(&rng, (uint64_t)t->Hkv);
            want_krows = t->Sk < TK_SAMPLE_KEYS ? t->Sk : TK_SAMPLE_KEYS;
        }
    }
    e->rows = alloc_n(want_rows, sizeof *e->rows);
    e->krows = alloc_n(want_krows, sizeof *e->krows);
    e->o = alloc_n(want_rows * D, sizeof *e->o);
    e->bo = alloc_n(want_rows * D, sizeof *e->bo);
    e->lse = alloc_n(want_rows, sizeof *e->lse);
    e->blse = alloc_n(want_rows, sizeof *e->blse);
    e->dq = alloc_n(want_rows * D, sizeof *e->dq);
    e->bdq = alloc_n(want_rows * D, sizeof *e->bdq);
    e->dk = alloc_n(want_krows * D, sizeof *e->dk);
    e->dv = alloc_n(want_krows * D, sizeof *e->dv);
    e->bdk = alloc_n(want_krows * D, sizeof *e->bdk);
    e->bdv = alloc_n(want_krows * D, sizeof *e->bdv);
    if (!e->rows || !e->krows || !e->o || !e->bo || !e->lse || !e->blse || !e->dq || !e->bdq ||
        !e->dk || !e->dv || !e->bdk || !e->bdv) {
        tk_expect_free(e);
        return false;
    }
    bool ok;
    if (e->full) {
        e->n_rows = want_rows;
        for (int64_t r = 0; r < want_rows; r++)
            e->rows[r] = r;
        e->n_krows = want_krows;
        for (int64_t r = 0; r < want_krows; r++)
            e->krows[r] = r;
        ok = compute_full(t, e);
    } else {
        sample_rows(t, want_rows, &rng, e);
        int64_t base = (gb * t->Hkv + ghk) * t->Sk;
        e->n_krows = 0;
        if (want_krows == t->Sk) {
            for (int64_t j = 0; j < t->Sk; j++)
                e->krows[e->n_krows++] = base + j;
        } else if (want_krows > 0) {
            int64_t at[] = {0, t->Sk - 1, 63, 64, 127, 128, t->Sk / 2};
            for (size_t k = 0; k < sizeof at / sizeof at[0]; k++)
                if (at[k] < t->Sk)
                    e->krows[e->n_krows++] = base + at[k];
            while (e->n_krows < want_krows)
                e->krows[e->n_krows++] =
                    base + (int64_t)fa_testkit_rand_below(&rng, (uint64_t)t->Sk);
        }
        ok = compute_sampled(t, gb, ghk, e);
    }
    if (!ok)
        tk_expect_free(e);
    return ok;
}
