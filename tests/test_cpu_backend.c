// SPDX-License-Identifier: MIT
/* The CPU backend against the float64 reference, with the pass rule of the conformance runner
 * (max error within k times the same-precision baseline's, plus 1e-5), on shapes chosen to hit
 * partial tiles, GQA, causal alignment and every dtype. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fa_testkit.h"

typedef struct cpu_case {
    fa_dtype dtype;
    int64_t batch, seq_q, seq_k, heads_q, heads_kv, head_dim;
    bool causal;
} cpu_case;

static fa_context *ctx;

static fa_buffer *upload(const void *host, size_t bytes)
{
    fa_buffer *buf = NULL;
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = bytes, .data = host}, &buf), FA_OK,
                 "%s", fa_context_last_error(ctx));
    return buf;
}

static void *download(fa_buffer *buf)
{
    void *host = malloc(fa_buffer_size(buf));
    cr_assert_eq(fa_buffer_read(buf, 0, host, fa_buffer_size(buf)), FA_OK);
    return host;
}

/* max |out - ref| over n elements, and whether any output is non-finite where ref is finite */
static double max_error(const void *out, fa_dtype dtype, const double *ref, size_t n,
                        bool *non_finite)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double x = fa_testkit_load(out, dtype, i);
        if (!isfinite(x) && isfinite(ref[i]))
            *non_finite = true;
        worst = fmax(worst, fabs(x - ref[i]));
    }
    return worst;
}

static void check_case(cpu_case c)
{
    cr_assert_eq(fa_context_create(&(fa_context_desc){.backend = FA_BACKEND_CPU}, &ctx), FA_OK);
    const fa_ref_problem p = {.dtype = c.dtype,
                              .batch = c.batch,
                              .seq_q = c.seq_q,
                              .seq_k = c.seq_k,
                              .heads_q = c.heads_q,
                              .heads_kv = c.heads_kv,
                              .head_dim = c.head_dim,
                              .causal = c.causal};
    const size_t es = fa_dtype_size(c.dtype);
    const size_t nq = (size_t)(c.batch * c.seq_q * c.heads_q * c.head_dim);
    const size_t nk = (size_t)(c.batch * c.seq_k * c.heads_kv * c.head_dim);
    const size_t nl = (size_t)(c.batch * c.heads_q * c.seq_q);
    void *q = malloc(nq * es), *k = malloc(nk * es), *v = malloc(nk * es), *d_o = malloc(nq * es);
    fa_testkit_fill_random(q, c.dtype, nq, 11);
    fa_testkit_fill_random(k, c.dtype, nk, 12);
    fa_testkit_fill_random(v, c.dtype, nk, 13);
    fa_testkit_fill_random(d_o, c.dtype, nq, 14);

    fa_buffer *bq = upload(q, nq * es), *bk = upload(k, nk * es), *bv = upload(v, nk * es);
    fa_buffer *bdo = upload(d_o, nq * es);
    fa_buffer *bo = upload(NULL, nq * es), *bl = upload(NULL, nl * 4);
    fa_buffer *bdq = upload(NULL, nq * es), *bdk = upload(NULL, nk * es);
    fa_buffer *bdv = upload(NULL, nk * es);
    fa_tensor tq = fa_tensor_bshd(bq, c.dtype, c.batch, c.seq_q, c.heads_q, c.head_dim);
    fa_tensor tk = fa_tensor_bshd(bk, c.dtype, c.batch, c.seq_k, c.heads_kv, c.head_dim);
    fa_tensor tv = fa_tensor_bshd(bv, c.dtype, c.batch, c.seq_k, c.heads_kv, c.head_dim);
    fa_tensor to = fa_tensor_bshd(bo, c.dtype, c.batch, c.seq_q, c.heads_q, c.head_dim);
    fa_tensor tdo = fa_tensor_bshd(bdo, c.dtype, c.batch, c.seq_q, c.heads_q, c.head_dim);
    fa_tensor tdq = fa_tensor_bshd(bdq, c.dtype, c.batch, c.seq_q, c.heads_q, c.head_dim);
    fa_tensor tdk = fa_tensor_bshd(bdk, c.dtype, c.batch, c.seq_k, c.heads_kv, c.head_dim);
    fa_tensor tdv = fa_tensor_bshd(bdv, c.dtype, c.batch, c.seq_k, c.heads_kv, c.head_dim);
    fa_tensor tl = fa_tensor_lse(bl, c.batch, c.heads_q, c.seq_q);
    const fa_attention_desc desc = {.causal = c.causal};
    cr_assert_eq(fa_attention_forward(ctx, &desc, &tq, &tk, &tv, &to, &tl), FA_OK, "%s",
                 fa_context_last_error(ctx));
    cr_assert_eq(fa_attention_backward(ctx, &desc, &tq, &tk, &tv, &to, &tdo, &tl, &tdq, &tdk, &tdv),
                 FA_OK, "%s", fa_context_last_error(ctx));
    void *o = download(bo), *dq = download(bdq), *dk = download(bdk), *dv = download(bdv);
    float *lse = download(bl);

    double *ro = malloc(nq * 8), *rl = malloc(nl * 8), *rdq = malloc(nq * 8);
    double *rdk = malloc(nk * 8), *rdv = malloc(nk * 8);
    fa_ref64_forward(&p, q, k, v, ro, rl);
    fa_ref64_backward(&p, q, k, v, d_o, rdq, rdk, rdv);
    void *bo_ = malloc(nq * es), *bdq_ = malloc(nq * es), *bdk_ = malloc(nk * es);
    void *bdv_ = malloc(nk * es);
    fa_baseline_forward(&p, q, k, v, bo_, NULL);
    fa_baseline_backward(&p, q, k, v, d_o, bdq_, bdk_, bdv_);

    struct {
        const char *name;
        const void *out, *base;
        const double *ref;
        size_t n;
        double k;
    } outs[] = {
        {"O", o, bo_, ro, nq, FA_TESTKIT_K_FORWARD},
        {"dQ", dq, bdq_, rdq, nq, FA_TESTKIT_K_BACKWARD},
        {"dK", dk, bdk_, rdk, nk, FA_TESTKIT_K_BACKWARD},
        {"dV", dv, bdv_, rdv, nk, FA_TESTKIT_K_BACKWARD},
    };
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        bool bad = false, base_bad = false;
        double err = max_error(outs[i].out, c.dtype, outs[i].ref, outs[i].n, &bad);
        double tol =
            outs[i].k * max_error(outs[i].base, c.dtype, outs[i].ref, outs[i].n, &base_bad) +
            FA_TESTKIT_ABS_SLACK;
        cr_assert(!bad, "%s has NaN or Inf where the reference is finite", outs[i].name);
        cr_assert_leq(err, tol, "%s: max error %.3g over tolerance %.3g", outs[i].name, err, tol);
    }
    for (size_t i = 0; i < nl; i++) {
        if (isinf(rl[i])) {
            cr_assert(isinf(lse[i]) && lse[i] < 0, "LSE[%zu] = %g, expected -inf", i, lse[i]);
            continue;
        }
        cr_assert_leq(fabs(lse[i] - rl[i]), FA_TESTKIT_LSE_REL * fmax(1.0, fabs(rl[i])),
                      "LSE[%zu] = %.9g, reference %.9g", i, lse[i], rl[i]);
    }
    free(q), free(k), free(v), free(d_o), free(o), free(dq), free(dk), free(dv), free(lse);
    free(ro), free(rl), free(rdq), free(rdk), free(rdv);
    free(bo_), free(bdq_), free(bdk_), free(bdv_);
    fa_context_destroy(ctx);
}

ParameterizedTestParameters(cpu_backend, matches_float64_reference)
{
    static cpu_case cases[] = {
        {FA_DTYPE_F32, 1, 1, 1, 1, 1, 8, false},     {FA_DTYPE_F32, 2, 65, 130, 4, 4, 64, false},
        {FA_DTYPE_F32, 1, 130, 65, 4, 1, 40, true}, /* Sq > Sk: rows with no key */
        {FA_DTYPE_F16, 2, 33, 97, 8, 2, 128, true},  {FA_DTYPE_BF16, 1, 100, 100, 2, 2, 256, true},
        {FA_DTYPE_F16, 1, 17, 300, 3, 1, 96, false}, {FA_DTYPE_BF16, 3, 7, 7, 4, 2, 16, false},
    };
    return cr_make_param_array(cpu_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(cpu_case *c, cpu_backend, matches_float64_reference)
{
    check_case(*c);
}

Test(cpu_backend, row_check_agrees_on_a_large_causal_problem)
{
    cr_assert_eq(fa_context_create(&(fa_context_desc){.backend = FA_BACKEND_CPU}, &ctx), FA_OK);
    const fa_ref_problem p = {.dtype = FA_DTYPE_F16,
                              .batch = 1,
                              .seq_q = 3000,
                              .seq_k = 3000,
                              .heads_q = 2,
                              .heads_kv = 1,
                              .head_dim = 64,
                              .causal = true};
    const size_t nq = 3000 * 2 * 64, nk = 3000 * 64;
    uint16_t *q = malloc(nq * 2), *k = malloc(nk * 2), *v = malloc(nk * 2), *o = malloc(nq * 2);
    float *lse = malloc(2 * 3000 * 4);
    fa_testkit_fill_random(q, FA_DTYPE_F16, nq, 21);
    fa_testkit_fill_random(k, FA_DTYPE_F16, nk, 22);
    fa_testkit_fill_random(v, FA_DTYPE_F16, nk, 23);
    fa_buffer *bq = upload(q, nq * 2), *bk = upload(k, nk * 2), *bv = upload(v, nk * 2);
    fa_buffer *bo = upload(NULL, nq * 2), *bl = upload(NULL, 2 * 3000 * 4);
    fa_tensor tq = fa_tensor_bshd(bq, FA_DTYPE_F16, 1, 3000, 2, 64);
    fa_tensor tk = fa_tensor_bshd(bk, FA_DTYPE_F16, 1, 3000, 1, 64);
    fa_tensor tv = fa_tensor_bshd(bv, FA_DTYPE_F16, 1, 3000, 1, 64);
    fa_tensor to = fa_tensor_bshd(bo, FA_DTYPE_F16, 1, 3000, 2, 64);
    fa_tensor tl = fa_tensor_lse(bl, 1, 2, 3000);
    cr_assert_eq(
        fa_attention_forward(ctx, &(fa_attention_desc){.causal = true}, &tq, &tk, &tv, &to, &tl),
        FA_OK);
    cr_assert_eq(fa_buffer_read(bo, 0, o, nq * 2), FA_OK);
    cr_assert_eq(fa_buffer_read(bl, 0, lse, 2 * 3000 * 4), FA_OK);
    fa_row_check check;
    fa_testkit_check_forward_rows(&p, q, k, v, o, lse, 200, 5, &check);
    cr_assert_eq(check.rows_checked, 200);
    cr_assert(check.pass, "O error %.3g (baseline %.3g), LSE error %.3g", check.max_err_o,
              check.baseline_err_o, check.max_err_lse);

    /* and the check must notice a wrong answer: corrupt every row, then check again */
    for (size_t i = 0; i < nq; i += 64)
        o[i] ^= 0x0400; /* flip an exponent bit of one element per row */
    fa_testkit_check_forward_rows(&p, q, k, v, o, lse, 200, 5, &check);
    cr_assert(!check.pass, "a corrupted output passed the row check");
    free(q), free(k), free(v), free(o), free(lse);
    fa_context_destroy(ctx);
}
