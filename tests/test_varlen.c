// SPDX-License-Identifier: MIT
/* Packed variable-length batches (fa_attention_desc.cu_seqlens_q, cu_seqlens_k): every sequence
 * of a packed call against the float64 reference (fa_ref64_forward_packed, each sequence alone)
 * by the testkit's pass rule (within k x the same-precision baseline's error), with each option
 * applied per sequence, on every backend found (the runtime runs each sequence as a call of
 * its own); rows and keys no sequence covers zeroed; bad prefix sums refused with their status
 * and nothing written. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fa_testkit.h"
#include "flashattn.h"
#include "test_support.h"

/* Sequences of (5, 7), (0, 2), (12, 0), (3, 21) query and key rows; two rows and two keys past
 * the last sequence. */
enum { NSEQ = 4, TQ = 22, TK = 32, HQ = 4, HKV = 2, D = 16 };
static const int32_t CU_Q[NSEQ + 1] = {0, 5, 5, 17, 20};
static const int32_t CU_K[NSEQ + 1] = {0, 7, 9, 9, 30};

typedef struct varlen_case {
    fa_backend backend;
    bool causal, alibi;
    fa_window window;
    float softcap;
} varlen_case;

static fa_context *open_backend(fa_backend backend)
{
    fa_backend_info info;
    fa_context *ctx = test_context(backend, &info);
    if (!ctx)
        cr_skip_test("%s unavailable: %s", info.name, info.reason);
    return ctx;
}

static double max_abs_diff(const double *ref, const float *got, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = isnan(got[i]) ? INFINITY : fabs(ref[i] - (double)got[i]);
        m = d > m ? d : m;
    }
    return m;
}

static double max_abs_diff_f(const float *ref, const double *exact, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs(exact[i] - (double)ref[i]);
        m = d > m ? d : m;
    }
    return m;
}

static bool all_zero(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (x[i] != 0.0f)
            return false;
    return true;
}

static fa_ref_problem sequence_problem(const varlen_case *c, const float *slopes, int s)
{
    return (fa_ref_problem){.dtype = FA_DTYPE_F32,
                            .batch = 1,
                            .seq_q = CU_Q[s + 1] - CU_Q[s],
                            .seq_k = CU_K[s + 1] - CU_K[s],
                            .heads_q = HQ,
                            .heads_kv = HKV,
                            .head_dim = D,
                            .causal = c->causal,
                            .window = c->window,
                            .softcap = c->softcap,
                            .alibi_slopes = c->alibi ? slopes + s * HQ : NULL};
}

static const varlen_case options[] = {
    {.causal = false},
    {.causal = true},
    {.window = {.enabled = true, .left = 3, .right = 1}},
    {.causal = true, .softcap = 2.0f, .alibi = true},
    {.window = {.enabled = true, .left = 4, .right = -1}, .alibi = true},
};
enum { NOPT = sizeof options / sizeof options[0], NBACKEND = 4 };

ParameterizedTestParameters(varlen, matches_reference_per_sequence)
{
    static const fa_backend backends[NBACKEND] = {FA_BACKEND_CPU, FA_BACKEND_CUDA,
                                                  FA_BACKEND_VULKAN, FA_BACKEND_OPENCL};
    static varlen_case cases[NBACKEND * NOPT];
    for (int b = 0; b < NBACKEND; b++)
        for (int i = 0; i < NOPT; i++) {
            cases[b * NOPT + i] = options[i];
            cases[b * NOPT + i].backend = backends[b];
        }
    return cr_make_param_array(varlen_case, cases, NBACKEND * NOPT);
}

ParameterizedTest(varlen_case *c, varlen, matches_reference_per_sequence)
{
    fa_context *ctx = open_backend(c->backend);
    const size_t nq = (size_t)TQ * HQ * D, nk = (size_t)TK * HKV * D;
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *d_o = malloc(nq * 4);
    float slopes[NSEQ * HQ];
    fa_testkit_fill_random(q, FA_DTYPE_F32, nq, 11);
    fa_testkit_fill_random(k, FA_DTYPE_F32, nk, 12);
    fa_testkit_fill_random(v, FA_DTYPE_F32, nk, 13);
    fa_testkit_fill_random(d_o, FA_DTYPE_F32, nq, 14);
    for (int i = 0; i < NSEQ * HQ; i++)
        slopes[i] = 0.05f * (float)(1 + i % 7);
    fa_buffer *bq = test_buffer(ctx, q, nq * 4), *bk = test_buffer(ctx, k, nk * 4),
              *bv = test_buffer(ctx, v, nk * 4);
    fa_buffer *bdo = test_buffer(ctx, d_o, nq * 4), *bo = test_buffer(ctx, NULL, nq * 4);
    fa_buffer *blse = test_buffer(ctx, NULL, (size_t)TQ * HQ * 4),
              *bdq = test_buffer(ctx, NULL, nq * 4);
    fa_buffer *bdk = test_buffer(ctx, NULL, nk * 4), *bdv = test_buffer(ctx, NULL, nk * 4);
    fa_buffer *bcq = test_buffer(ctx, CU_Q, sizeof CU_Q),
              *bck = test_buffer(ctx, CU_K, sizeof CU_K);
    fa_buffer *bsl = test_buffer(ctx, slopes, sizeof slopes);
    /* garbage in the outputs, so that rows left unwritten show */
    float *junk = malloc(nq * 4);
    for (size_t i = 0; i < nq; i++)
        junk[i] = 7.0f;
    fa_buffer_write(bo, 0, junk, nq * 4);
    fa_buffer_write(bdq, 0, junk, nq * 4);
    fa_buffer_write(bdk, 0, junk, nk * 4);
    fa_buffer_write(bdv, 0, junk, nk * 4);
    fa_buffer_write(blse, 0, junk, (size_t)TQ * HQ * 4);

    const fa_tensor tq = fa_tensor_bshd(bq, FA_DTYPE_F32, 1, TQ, HQ, D);
    const fa_tensor tk = fa_tensor_bshd(bk, FA_DTYPE_F32, 1, TK, HKV, D);
    const fa_tensor tv = fa_tensor_bshd(bv, FA_DTYPE_F32, 1, TK, HKV, D);
    const fa_tensor to = fa_tensor_bshd(bo, FA_DTYPE_F32, 1, TQ, HQ, D);
    const fa_tensor tdo = fa_tensor_bshd(bdo, FA_DTYPE_F32, 1, TQ, HQ, D);
    const fa_tensor tdq = fa_tensor_bshd(bdq, FA_DTYPE_F32, 1, TQ, HQ, D);
    const fa_tensor tdk = fa_tensor_bshd(bdk, FA_DTYPE_F32, 1, TK, HKV, D);
    const fa_tensor tdv = fa_tensor_bshd(bdv, FA_DTYPE_F32, 1, TK, HKV, D);
    const fa_tensor tlse = fa_tensor_lse(blse, 1, HQ, TQ);
    const fa_tensor tcq = {.buffer = bcq, .dtype = FA_DTYPE_I32, .shape = {NSEQ + 1, 1, 1, 1}};
    const fa_tensor tck = {.buffer = bck, .dtype = FA_DTYPE_I32, .shape = {NSEQ + 1, 1, 1, 1}};
    const fa_tensor tsl = {.buffer = bsl, .dtype = FA_DTYPE_F32, .shape = {NSEQ, 1, HQ, 1}};
    const fa_attention_desc desc = {.causal = c->causal,
                                    .window = c->window,
                                    .softcap = c->softcap,
                                    .alibi_slopes = c->alibi ? &tsl : NULL,
                                    .cu_seqlens_q = &tcq,
                                    .cu_seqlens_k = &tck,
                                    .max_seqlen_q = 12,
                                    .max_seqlen_k = 21};
    cr_assert_eq(fa_attention_forward(ctx, &desc, &tq, &tk, &tv, &to, &tlse), FA_OK, "%s",
                 fa_context_last_error(ctx));
    cr_assert_eq(
        fa_attention_backward(ctx, &desc, &tq, &tk, &tv, &to, &tdo, &tlse, &tdq, &tdk, &tdv), FA_OK,
        "%s", fa_context_last_error(ctx));
    float *o = malloc(nq * 4), *lse = malloc((size_t)TQ * HQ * 4), *dq = malloc(nq * 4);
    float *dk = malloc(nk * 4), *dv = malloc(nk * 4);
    fa_buffer_read(bo, 0, o, nq * 4);
    fa_buffer_read(blse, 0, lse, (size_t)TQ * HQ * 4);
    fa_buffer_read(bdq, 0, dq, nq * 4);
    fa_buffer_read(bdk, 0, dk, nk * 4);
    fa_buffer_read(bdv, 0, dv, nk * 4);

    /* the float64 reference of the whole packed batch, sequence by sequence */
    fa_ref_problem all = sequence_problem(c, slopes, 0);
    all.alibi_slopes = c->alibi ? slopes : NULL;
    all.alibi_batch_stride = HQ;
    double *ref_o = malloc(nq * 8), *ref_lse = malloc((size_t)TQ * HQ * 8);
    double *ref_dq = malloc(nq * 8), *ref_dk = malloc(nk * 8), *ref_dv = malloc(nk * 8);
    fa_ref64_forward_packed(&all, NSEQ, CU_Q, CU_K, TQ, q, k, v, ref_o, ref_lse);
    fa_ref64_backward_packed(&all, NSEQ, CU_Q, CU_K, TQ, TK, q, k, v, d_o, ref_dq, ref_dk, ref_dv);
    for (int s = 0; s < NSEQ; s++) {
        const fa_ref_problem p = sequence_problem(c, slopes, s);
        const size_t rq = (size_t)CU_Q[s] * HQ * D, rk = (size_t)CU_K[s] * HKV * D;
        const size_t mq = (size_t)p.seq_q * HQ * D, mk = (size_t)p.seq_k * HKV * D;
        const double *ro = ref_o + rq, *rdq = ref_dq + rq, *rdk = ref_dk + rk, *rdv = ref_dv + rk;
        float *bo_ = calloc(mq + 1, 4), *bdq_ = calloc(mq + 1, 4), *bdk_ = calloc(mk + 1, 4),
              *bdv_ = calloc(mk + 1, 4);
        fa_baseline_forward(&p, q + rq, k + rk, v + rk, bo_, NULL);
        fa_baseline_backward(&p, q + rq, k + rk, v + rk, d_o + rq, bdq_, bdk_, bdv_);
        const struct {
            const char *name;
            const double *ref;
            const float *got, *base;
            size_t n;
            double k;
        } outs[] = {{"o", ro, o + rq, bo_, mq, FA_TESTKIT_K_FORWARD},
                    {"dq", rdq, dq + rq, bdq_, mq, FA_TESTKIT_K_BACKWARD},
                    {"dk", rdk, dk + rk, bdk_, mk, FA_TESTKIT_K_BACKWARD},
                    {"dv", rdv, dv + rk, bdv_, mk, FA_TESTKIT_K_BACKWARD}};
        for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
            const double err = max_abs_diff(outs[i].ref, outs[i].got, outs[i].n);
            const double tol = outs[i].k * max_abs_diff_f(outs[i].base, outs[i].ref, outs[i].n) +
                               FA_TESTKIT_ABS_SLACK;
            cr_expect(err <= tol, "sequence %d: %s error %g, tolerance %g", s, outs[i].name, err,
                      tol);
        }
        for (int h = 0; h < HQ; h++)
            for (int64_t i = 0; i < p.seq_q; i++) {
                const double r = ref_lse[h * TQ + CU_Q[s] + i];
                const float g = lse[h * TQ + CU_Q[s] + i];
                if (isinf(r))
                    cr_expect(isinf(g) && g < 0, "sequence %d: lse of row %lld head %d is %g", s,
                              (long long)i, h, g);
                else
                    cr_expect(fabs(r - g) <= FA_TESTKIT_LSE_REL * fmax(1.0, fabs(r)),
                              "sequence %d: lse of row %lld head %d is %g, not %g", s, (long long)i,
                              h, g, r);
            }
        free(bo_), free(bdq_), free(bdk_), free(bdv_);
    }
    /* the rows and keys past the last sequence */
    const size_t tail_q = (size_t)CU_Q[NSEQ] * HQ * D, tail_k = (size_t)CU_K[NSEQ] * HKV * D;
    cr_expect(all_zero(o + tail_q, nq - tail_q), "o past the last sequence is not 0");
    cr_expect(all_zero(dq + tail_q, nq - tail_q), "dq past the last sequence is not 0");
    cr_expect(all_zero(dk + tail_k, nk - tail_k), "dk past the last sequence is not 0");
    cr_expect(all_zero(dv + tail_k, nk - tail_k), "dv past the last sequence is not 0");
    for (int h = 0; h < HQ; h++)
        for (int i = CU_Q[NSEQ]; i < TQ; i++)
            cr_expect(isinf(lse[h * TQ + i]) && lse[h * TQ + i] < 0,
                      "lse of row %d past the last sequence is %g", i, lse[h * TQ + i]);
    free(q), free(k), free(v), free(d_o), free(junk);
    free(o), free(lse), free(dq), free(dk), free(dv);
    free(ref_o), free(ref_lse), free(ref_dq), free(ref_dk), free(ref_dv);
    fa_context_destroy(ctx);
}

/* One bad value in a prefix sum, the status it gets, and o left as it was. */
typedef struct bad_prefix {
    int32_t cu_q[3], cu_k[3];
    int64_t max_q, max_k;
    fa_status expected;
} bad_prefix;

static const bad_prefix bad[] = {
    {{1, 2, 4}, {0, 3, 6}, 0, 0, FA_ERROR_INVALID_ARGUMENT},  /* not from 0 */
    {{0, 3, 2}, {0, 3, 6}, 0, 0, FA_ERROR_INVALID_ARGUMENT},  /* decreasing */
    {{0, 2, 4}, {0, 3, 7}, 0, 0, FA_ERROR_OUT_OF_BOUNDS},     /* past total_k = 6 */
    {{0, 2, 5}, {0, 3, 6}, 0, 0, FA_ERROR_OUT_OF_BOUNDS},     /* past total_q = 4 */
    {{0, 2, 4}, {0, 1, 6}, 0, 3, FA_ERROR_OUT_OF_BOUNDS},     /* a sequence of 5 > max_seqlen_k */
    {{0, 2, 4}, {0, 3, 6}, -1, 0, FA_ERROR_INVALID_ARGUMENT}, /* a negative bound */
};

ParameterizedTestParameters(varlen, bad_prefix_sums_refused_with_nothing_written)
{
    return cr_make_param_array(bad_prefix, bad, sizeof bad / sizeof bad[0]);
}

ParameterizedTest(bad_prefix *c, varlen, bad_prefix_sums_refused_with_nothing_written)
{
    fa_context *ctx = open_backend(FA_BACKEND_CPU);
    enum { SQ = 4, SK = 6 };
    float data[SK * HQ * D] = {0}, marks[SQ * HQ * D];
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        marks[i] = 3.0f;
    fa_buffer *b = test_buffer(ctx, data, sizeof data), *bo = test_buffer(ctx, marks, sizeof marks);
    fa_buffer *bcq = test_buffer(ctx, c->cu_q, sizeof c->cu_q),
              *bck = test_buffer(ctx, c->cu_k, sizeof c->cu_k);
    const fa_tensor q = fa_tensor_bshd(b, FA_DTYPE_F32, 1, SQ, HQ, D);
    const fa_tensor kv = fa_tensor_bshd(b, FA_DTYPE_F32, 1, SK, HKV, D);
    const fa_tensor o = fa_tensor_bshd(bo, FA_DTYPE_F32, 1, SQ, HQ, D);
    const fa_tensor cq = {.buffer = bcq, .dtype = FA_DTYPE_I32, .shape = {3, 1, 1, 1}};
    const fa_tensor ck = {.buffer = bck, .dtype = FA_DTYPE_I32, .shape = {3, 1, 1, 1}};
    const fa_attention_desc desc = {.cu_seqlens_q = &cq,
                                    .cu_seqlens_k = &ck,
                                    .max_seqlen_q = c->max_q,
                                    .max_seqlen_k = c->max_k};
    cr_assert_eq(fa_attention_forward(ctx, &desc, &q, &kv, &kv, &o, NULL), c->expected, "%s",
                 fa_context_last_error(ctx));
    float after[SQ * HQ * D];
    fa_buffer_read(bo, 0, after, sizeof after);
    cr_expect(memcmp(after, marks, sizeof marks) == 0, "o was written");
    fa_context_destroy(ctx);
}

Test(varlen, bad_arguments_named)
{
    fa_context *ctx = open_backend(FA_BACKEND_CPU);
    const int32_t cu[3] = {0, 2, 4};
    float data[2 * 4 * HQ * D] = {0};
    fa_buffer *b = test_buffer(ctx, data, sizeof data), *bo = test_buffer(ctx, NULL, sizeof data);
    fa_buffer *bcu = test_buffer(ctx, cu, sizeof cu);
    const fa_tensor q = fa_tensor_bshd(b, FA_DTYPE_F32, 1, 4, HQ, D);
    const fa_tensor q2 = fa_tensor_bshd(b, FA_DTYPE_F32, 2, 2, HQ, D);
    const fa_tensor kv = fa_tensor_bshd(b, FA_DTYPE_F32, 1, 4, HKV, D);
    const fa_tensor o = fa_tensor_bshd(bo, FA_DTYPE_F32, 1, 4, HQ, D);
    const fa_tensor o2 = fa_tensor_bshd(bo, FA_DTYPE_F32, 2, 2, HQ, D);
    const fa_tensor c = {.buffer = bcu, .dtype = FA_DTYPE_I32, .shape = {3, 1, 1, 1}};
    const fa_tensor c2 = {.buffer = bcu, .dtype = FA_DTYPE_I32, .shape = {2, 1, 1, 1}};
    const fa_tensor cf = {.buffer = bcu, .dtype = FA_DTYPE_F32, .shape = {3, 1, 1, 1}};
    const fa_tensor bias = {.buffer = b, .dtype = FA_DTYPE_F32, .shape = {1, 1, 1, 4}};
    struct {
        fa_attention_desc desc;
        bool batch2;
        fa_status expected;
    } rows[] = {
        {{.cu_seqlens_q = &c}, false, FA_ERROR_NULL_POINTER},
        {{.cu_seqlens_k = &c}, false, FA_ERROR_NULL_POINTER},
        {{.cu_seqlens_q = &c, .cu_seqlens_k = &c2}, false, FA_ERROR_SHAPE_MISMATCH},
        {{.cu_seqlens_q = &c, .cu_seqlens_k = &cf}, false, FA_ERROR_DTYPE_MISMATCH},
        {{.cu_seqlens_q = &c, .cu_seqlens_k = &c}, true, FA_ERROR_SHAPE_MISMATCH},
        {{.cu_seqlens_q = &c, .cu_seqlens_k = &c, .bias = &bias}, false, FA_ERROR_UNSUPPORTED},
        {{.cu_seqlens_q = &c, .cu_seqlens_k = &c, .seqlens_k = &c2}, false, FA_ERROR_UNSUPPORTED},
        {{.max_seqlen_q = 4}, false, FA_ERROR_INVALID_ARGUMENT},
        {{.cu_seqlens_q = &c, .cu_seqlens_k = &c, .max_seqlen_q = 2}, false, FA_OK},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const fa_status st = fa_attention_forward(ctx, &rows[i].desc, rows[i].batch2 ? &q2 : &q,
                                                  &kv, &kv, rows[i].batch2 ? &o2 : &o, NULL);
        cr_expect_eq(st, rows[i].expected, "row %zu: %s (%s), expected %s", i, fa_status_name(st),
                     fa_context_last_error(ctx), fa_status_name(rows[i].expected));
    }
    fa_context_destroy(ctx);
}
