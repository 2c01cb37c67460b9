// SPDX-License-Identifier: MIT
/* What the test kit's files share: a problem with its inputs converted once to double and to f32,
 * the row-level reference and baseline kernels, and the conformance case and result records.
 * Not part of the test kit's public surface (fa_testkit.h). */
#ifndef TK_INTERNAL_H
#define TK_INTERNAL_H

#include "fa_testkit.h"

#include <math.h>

/* A problem and its inputs, packed BSHD, as the dtype holds them: in double for the reference,
 * in float for the baseline (every f16/bf16/f32 value is exact in both). d_o may be NULL. */
typedef struct tk_data {
    fa_ref_problem p;
    int64_t B, Sq, Sk, Hq, Hkv, D, group; /* group = Hq / Hkv */
    double scale;                         /* resolved, double */
    float scale_f;                        /* resolved, float: what an f32 implementation uses */
    double *q, *k, *v, *d_o;
    float *qf, *kf, *vf, *d_of;
    /* The baseline's dot products: 8 interleaved partial sums (tk_dot32), or with serial_dots one
     * running sum. two_orders (large scores, where the f32 sums of the scores dominate the error
     * and one order's luck would decide the tolerance): the baseline is computed both ways and,
     * per element, the larger error counts. */
    bool serial_dots, two_orders;
    /* Per-sequence key counts (fa_attention_desc.seqlens_k), B of them; NULL: Sk for all. Not
     * owned: tk_data_free leaves it. */
    const int32_t *seqlens;
    /* The case's bias as the call gets it (conformance), or NULL; p.bias points at its data. Not
     * owned. */
    const struct tk_bias *bias;
} tk_data;

/* Converts the inputs; d_o may be NULL. Returns false when out of memory. */
bool tk_data_init(tk_data *t, const fa_ref_problem *p, const void *q, const void *k, const void *v,
                  const void *d_o);
void tk_data_free(tk_data *t);

/* The keys query i of batch entry b sees, [*first, *first + count), count returned: those of its
 * sequence (its first seqlens[b] keys) that the causal mask and the window leave it. */
static inline int64_t tk_key_range(const tk_data *t, int64_t b, int64_t i, int64_t *first)
{
    fa_ref_problem p = t->p;
    p.seq_k = t->seqlens ? t->seqlens[b] : t->Sk;
    const int64_t last = fa_ref_last_key(&p, i), j0 = fa_ref_first_key(&p, i);
    const int64_t end = last + 1 < p.seq_k ? last + 1 : p.seq_k;
    *first = j0;
    return end > j0 ? end - j0 : 0;
}
/* How many keys query i of batch entry b sees. */
static inline int64_t tk_visible_keys(const tk_data *t, int64_t b, int64_t i)
{
    int64_t first;
    return tk_key_range(t, b, i, &first);
}
/* Whether query i of batch entry b sees key j. */
static inline bool tk_sees(const tk_data *t, int64_t b, int64_t i, int64_t j)
{
    int64_t first;
    const int64_t n = tk_key_range(t, b, i, &first);
    return j >= first && j < first + n;
}
/* A scaled score as the attention takes it: with a softcap c, c tanh(s / c); *slope gets its
 * derivative d(result)/ds (1 without a softcap). */
static inline double tk_softcap64(const tk_data *t, double s, double *slope)
{
    if (t->p.softcap <= 0.0f) {
        *slope = 1.0;
        return s;
    }
    const double c = t->p.softcap, th = tanh(s / c);
    *slope = 1.0 - th * th;
    return c * th;
}
/* The ALiBi bias of query i of head (b, h) and key j: -slope |i + Sk - Sq - j|, Sk the
 * sequence's own key count; 0 without ALiBi. tk_alibi32 in f32, as an f32 implementation
 * forms it. */
static inline int64_t tk_alibi_distance(const tk_data *t, int64_t b, int64_t i, int64_t j)
{
    const int64_t d = i + (t->seqlens ? t->seqlens[b] : t->Sk) - t->Sq - j;
    return d < 0 ? -d : d;
}
static inline double tk_alibi64(const tk_data *t, int64_t b, int64_t h, int64_t i, int64_t j)
{
    if (!t->p.alibi_slopes)
        return 0.0;
    const double slope = t->p.alibi_slopes[b * t->p.alibi_batch_stride + h];
    return -slope * (double)tk_alibi_distance(t, b, i, j);
}
static inline float tk_alibi32(const tk_data *t, int64_t b, int64_t h, int64_t i, int64_t j)
{
    if (!t->p.alibi_slopes)
        return 0.0f;
    const float slope = t->p.alibi_slopes[b * t->p.alibi_batch_stride + h];
    return -slope * (float)tk_alibi_distance(t, b, i, j);
}
/* The additive bias of query i of head (b, h) and key j (fa_ref_problem.bias); 0 without. */
static inline double tk_bias64(const tk_data *t, int64_t b, int64_t h, int64_t i, int64_t j)
{
    if (!t->p.bias)
        return 0.0;
    const int64_t *st = t->p.bias_stride;
    return fa_testkit_load(t->p.bias, t->p.bias_dtype,
                           (size_t)(b * st[0] + i * st[1] + h * st[2] + j));
}
/* Whether every score of row[j0 .. j1) is -inf (a bias hides all its keys): the row then has no
 * key, O = 0 and LSE = -inf. */
static inline bool tk_all_hidden64(const double *row, int64_t j0, int64_t j1)
{
    for (int64_t j = j0; j < j1; j++)
        if (row[j] != -INFINITY)
            return false;
    return true;
}
static inline bool tk_all_hidden32(const float *row, int64_t j0, int64_t j1)
{
    for (int64_t j = j0; j < j1; j++)
        if (row[j] != -INFINITY)
            return false;
    return true;
}
static inline int64_t tk_q_index(const tk_data *t, int64_t b, int64_t i, int64_t h)
{
    return ((b * t->Sq + i) * t->Hq + h) * t->D;
}
static inline int64_t tk_k_index(const tk_data *t, int64_t b, int64_t j, int64_t hk)
{
    return ((b * t->Sk + j) * t->Hkv + hk) * t->D;
}
/* Row ids: query row (b, h, i) is (b * Hq + h) * Sq + i, the index of its LSE in (B, H, Sq);
 * key row (b, hk, j) is (b * Hkv + hk) * Sk + j. */
static inline void tk_row_split(const tk_data *t, int64_t row, int64_t *b, int64_t *h, int64_t *i)
{
    *i = row % t->Sq;
    *h = (row / t->Sq) % t->Hq;
    *b = row / (t->Sq * t->Hq);
}
static inline void tk_krow_split(const tk_data *t, int64_t row, int64_t *b, int64_t *hk, int64_t *j)
{
    *j = row % t->Sk;
    *hk = (row / t->Sk) % t->Hkv;
    *b = row / (t->Sk * t->Hkv);
}

double tk_dot64(const double *a, const double *b, int64_t n);
float tk_dot32(const float *a, const float *b, int64_t n);
float tk_dot32_serial(const float *a, const float *b, int64_t n);
float tk_round_f(fa_dtype dtype, float x);

/* ---- float64 reference, row by row (reference64.c) ---- */

/* Forward of query row (b, h, i): p_row (Sk doubles) gets the normalised probabilities of the
 * visible keys, o_row (D) the output, *lse the log-sum-exp. Returns the number of visible keys. */
int64_t tk_ref_row_forward(const tk_data *t, int64_t b, int64_t h, int64_t i, double *p_row,
                           double *o_row, double *lse);
/* The LSE the backward works from: NaN where |lse| reaches FA_BACKWARD_LSE_LIMIT (flashattn.h:
 * the backends then give the row NaN gradients), else lse. */
double tk_backward_lse(double lse);
/* Backward of the same row from its p_row, o_row and lse: dq_row (D). When dk, dv (whole packed
 * (B, Sk, Hkv, D) arrays) are not NULL the row's contributions are added to them; dk is
 * accumulated without the scale, which the caller applies once at the end. */
void tk_ref_row_backward(const tk_data *t, int64_t b, int64_t h, int64_t i, int64_t n,
                         const double *p_row, const double *o_row, double lse, double *dq_row,
                         double *dk, double *dv);
/* LSE and Delta = dO . O of query rows i0 .. i0 + n - 1 (n <= TK_BLOCK) of head (b, h), each key
 * row loaded once per block. Scratch: s (n * Sk), o (n * D). */
#define TK_BLOCK 16
void tk_ref_block_stats(const tk_data *t, int64_t b, int64_t h, int64_t i0, int64_t n, double *s,
                        double *o, double *lse, double *delta);
/* Exact dK and dV of key row (b, hk, j) from every query row of the heads sharing hk; lse and
 * delta (= dO . O) are given per query row of the group as [g * Sq + i]. */
void tk_ref_key_backward(const tk_data *t, int64_t b, int64_t hk, int64_t j, const double *lse,
                         const double *delta, double *dk_row, double *dv_row);

/* ---- same-precision baseline, row by row (baseline.c) ---- */

/* What the baseline's backward starts from for one query row: the exact forward's LSE rounded to
 * f32 and Delta = rowsum(dO * O) with the exact O rounded to the dtype. */
typedef struct tk_base_stats {
    float lse, delta;
} tk_base_stats;

int64_t tk_base_row_forward(const tk_data *t, int64_t b, int64_t h, int64_t i, float *p_row,
                            float *o_row, float *lse);
/* The stats of query row (b, h, i) from its reference O (D doubles) and LSE. */
void tk_base_stats_of(const tk_data *t, int64_t b, int64_t h, int64_t i, const double *o_row,
                      double lse, tk_base_stats *st);
/* dQ of the row and, when dk_acc is not NULL, its contributions to the f32 dK (unscaled) and dV
 * accumulators (whole packed arrays), over its n visible keys. */
void tk_base_row_backward(const tk_data *t, int64_t b, int64_t h, int64_t i, int64_t n,
                          const tk_base_stats *st, float *dq_row, float *dk_acc, float *dv_acc);
/* dK (unscaled) and dV of key row (b, hk, j) from every query row of the group; st per query row
 * of the group as [g * Sq + i]. */
void tk_base_key_backward(const tk_data *t, int64_t b, int64_t hk, int64_t j,
                          const tk_base_stats *st, float *dk_acc, float *dv_acc);

/* ---- what a backend's outputs are checked against (expect.c) ---- */

/* Reference and baseline values on a set of query rows (O, LSE, and dQ for the backward) and
 * key rows (dK, dV). `full` when the sets are every row; else rows are sampled. */
typedef struct tk_expect {
    bool full, backward;
    int64_t n_rows, n_krows;
    int64_t *rows, *krows;
    double *o, *lse, *dq, *dk, *dv;      /* float64 reference */
    double *bo, *blse, *bdq, *bdk, *bdv; /* baseline, dtype-rounded values */
} tk_expect;

/* Problems with B * Hq * Sq * Sk * D above this get sampled rows instead of every row. */
#define TK_FULL_WORK_LIMIT ((int64_t)1 << 28)

bool tk_expect_compute(const tk_data *t, bool backward, bool force_sample, uint64_t seed,
                       tk_expect *e);
void tk_expect_free(tk_expect *e);

/* Max abs error of `out` against `ref` (n values) over the elements where ref is finite. Where
 * ref is not finite, out must be the same (NaN for NaN, the same infinity); *non_finite is set,
 * and the error is +inf, where out is non-finite and does not match ref. */
double tk_max_abs_err(const double *out, const double *ref, int64_t n, bool *non_finite);
/* Whether out and ref disagree where either is not finite (NaN for NaN, the same infinity). */
bool tk_non_finite_mismatch(double out, double ref);
/* Max abs error of a baseline over the elements where both it and ref are finite. */
double tk_max_abs_err_finite(const double *base, const double *ref, int64_t n);
/* Max of |out - ref| / max(1, |ref|); a -inf or NaN ref must be matched exactly (else +inf
 * error). */
double tk_max_lse_err(const double *out, const double *ref, int64_t n, bool *non_finite);

/* ---- conformance cases (conformance_cases.c) ---- */

typedef enum tk_heads_kind { TK_MHA = 0, TK_GQA4, TK_MQA, TK_HEADS_KINDS } tk_heads_kind;

/* A value planted in one input element (the special-value cases): tensor 'q', 'k', 'v' or 'o'
 * (dO; 0: none) at batch 0, head 0, position s, element d. */
typedef struct tk_special {
    char tensor;
    double value; /* NaN, +inf or -inf */
    int64_t s, d;
} tk_special;

typedef struct tk_case {
    char name[128];
    fa_ref_problem p;
    tk_heads_kind heads;
    bool backward;
    bool bhsd;
    bool noop; /* B = 0, or Sq = 0 (and Sk = 0 for a backward): success, nothing written */
    bool edge; /* a fixed edge case, not from the table */
    bool deterministic;
    int32_t num_splits; /* fa_attention_desc.num_splits (the split-key forward's cases) */
    float logits;       /* > 1: Q and K scaled by sqrt(logits), so scores are ~logits x N(0, 1) */
    bool seqlens;       /* per-sequence key counts (tk_case_seqlens) */
    int32_t page_size;  /* > 0: K and V as a paged cache of pages this long (Sk a multiple) */
    int32_t append;     /* > 0: this many rows per sequence appended through k_new and v_new
                           before the attention (needs seqlens; conformance_exec.c) */
    int alibi;          /* ALiBi slopes (tk_case_alibi_slopes): 0 none, 1 one per query head,
                           shape (1, 1, Hq, 1); 2 per batch entry and head, (B, 1, Hq, 1) */
    int bias;           /* an additive bias (tk_case_bias): 0 none, 1 full, 2 broadcast by zero
                           strides, 3 a -inf mask broadcast by shape */
    int descale;        /* FP8 descale factors (tk_case_descales): 0 none, 1 per tensor, shape
                           (1, 1, 1, 1); 2 per KV head, (1, 1, Hkv, 1); 3 per batch entry and
                           KV head, (B, 1, Hkv, 1) */
    bool varlen;        /* called as a packed batch (cu_seqlens_q, cu_seqlens_k) of B sequences of
                           Sq and Sk rows, whose expected values are the padded problem's
                           (conformance_exec.c; BSHD only) */
    tk_special special;
    uint64_t seed;
} tk_case;

/* Generates the cases: the table's (all-pairs covering array for quick, full product for full)
 * followed by the fixed edge cases. Returns the count, *out malloc'ed. */
int64_t tk_cases_generate(bool full, uint64_t seed, tk_case **out);
const char *tk_heads_name(tk_heads_kind kind); /* "mha", "gqa4:1", "mqa" */

/* ---- results and reports (conformance_report.c) ---- */

typedef enum tk_outcome { TK_PASS = 0, TK_FAIL, TK_SKIP } tk_outcome;

typedef struct tk_result {
    tk_outcome outcome;
    bool error;   /* a failure because a call returned an error status (JUnit <error>), not a
                   * wrong result */
    double ratio; /* worst error / tolerance over the checked outputs; 0 when nothing compared */
    double err_o, tol_o, err_lse, err_dq, tol_dq, err_dk, tol_dk, err_dv, tol_dv;
    bool sampled;
    double seconds;
    char detail[512]; /* failure or skip reason */
} tk_result;

typedef struct tk_backend_run {
    fa_backend backend;
    const char *name;
    bool available;
    char reason[320];   /* why skipped, if not available */
    char device[256];   /* device description */
    tk_result *results; /* one per case */
    int64_t passed, failed, skipped;
} tk_backend_run;

typedef struct tk_run {
    const fa_conformance_options *opt;
    tk_case *cases;
    int64_t n_cases;
    tk_backend_run *backends;
    int n_backends;
    double seconds;
} tk_run;

void tk_print_tables(const tk_run *run, FILE *f);
bool tk_write_markdown(const tk_run *run, const char *path);
bool tk_write_junit(const tk_run *run, const char *path);
bool tk_write_json(const tk_run *run, const char *path);

/* ---- one case on one backend (conformance_exec.c) ---- */

/* A case's host inputs, packed BSHD in the case's dtype; d_o only for the backward. */
typedef struct tk_inputs {
    void *q, *k, *v, *d_o;
} tk_inputs;

/* Case c's inputs from its seed: random, then scaled and planted as the case says
 * (conformance_cases.c). */
void tk_case_fill_inputs(const tk_case *c, const tk_inputs *in);
/* Case c's per-sequence key counts (c->seqlens), B of them into out: the capacity, 0, 1 and a
 * seeded length between, in turn. With an append (c->append), the counts after it: the cache
 * then held Sk - append, 0, 1 or a length between before it. */
void tk_case_seqlens(const tk_case *c, int32_t *out);

/* Case c's ALiBi slopes (c->alibi): Hq of them, or B x Hq (b major), into out: the usual
 * geometric slopes 2^(-8 (h + 1) / Hq), each times a seeded factor in [0.5, 1.5). */
void tk_case_alibi_slopes(const tk_case *c, float *out);

/* Case c's FP8 descale factors (c->descale), B x Hkv for each of q, k and v into out[0..2]
 * (index b * Hkv + hk), equal where the case broadcasts them: seeded, in [0.25, 2). */
void tk_case_descales(const tk_case *c, float *out[3]);

/* A case's additive bias as the call gets it: `count` elements of `dtype` (malloc'ed), shape
 * (batch, query, head, key) and element strides, 0 where broadcast by a zero stride. */
typedef struct tk_bias {
    void *data;
    fa_dtype dtype;
    int64_t count;
    int64_t shape[4], stride[4];
} tk_bias;
/* Case c's bias (c->bias): 1, (B, Sq, Hq, Sk) in the case's dtype; 2, f32 (B, Sq, Hq, Sk) whose
 * batch and head strides are 0; 3, (1, Sq, 1, Sk) in the case's dtype with -inf for every key of
 * query 0 and a third of the rest. Values 2 x the random fill. False when out of memory. */
bool tk_case_bias(const tk_case *c, tk_bias *out);

/* ---- the K/V cache of a case (conformance_cache.c) ---- */

/* A paged cache for case c (c->page_size > 0): the block table (B x max_pages) gives each
 * sequence's pages in a seeded order over num_pages = B max_pages + 2 pages, so that spare pages
 * lie between them; entries past a sequence's length (lens) are -1, which nothing may read. */
typedef struct tk_paged {
    int64_t max_pages, num_pages;
    int32_t *table;
    unsigned char *k, *v; /* packed (num_pages, page_size, Hkv, D) */
} tk_paged;

bool tk_paged_init(tk_paged *pg, const tk_case *c, const tk_inputs *in, const int32_t *lens);
void tk_paged_free(tk_paged *pg);
/* Where key pos of sequence b is in K and V as the device holds them: the batch entry (paged:
 * the page) and the row within it. pg is zeroed when the cache is not paged. */
void tk_cache_slot(const tk_case *c, const tk_paged *pg, int64_t b, int64_t pos, int64_t *block,
                   int64_t *row);

/* What an append case (c->append rows per sequence) passes besides the cache: the lengths
 * before the append, and k_new, v_new packed BSHD (B, append, Hkv, D) in the case's dtype, the
 * rows [lens[b], lens[b] + append) of in->k and in->v, which are the cache after the append. */
typedef struct tk_append {
    int32_t *lens;
    void *k_new, *v_new;
} tk_append;

bool tk_append_init(tk_append *ap, const tk_case *c, const tk_inputs *in,
                    const int32_t *lens_after);
void tk_append_free(tk_append *ap);

/* Runs case c on ctx and checks it against e (NULL for a no-op case), filling r. */
void tk_case_execute(fa_context *ctx, const tk_case *c, const tk_inputs *in, const tk_data *t,
                     const tk_expect *e, tk_result *r);

double tk_now(void);

#endif
