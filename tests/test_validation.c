// SPDX-License-Identifier: MIT
/* Every bad attention call gets its exact status and touches nothing. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "flashattn.h"

enum { B = 2, SQ = 5, SK = 7, HQ = 4, HKV = 2, D = 16 };

static fa_context *ctx;
static fa_buffer *bq, *bk, *bv, *bo, *blse, *bdo, *bdq, *bdk, *bdv;
static fa_tensor q, k, v, o, lse, d_o, d_q, d_k, d_v;

static fa_buffer *make(size_t bytes, float fill)
{
    size_t n = bytes / sizeof(float);
    float *host = malloc(bytes);
    for (size_t i = 0; i < n; i++)
        host[i] = fill + 0.001f * (float)(i % 97);
    fa_buffer *buf = NULL;
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = bytes, .data = host}, &buf),
                 FA_OK);
    free(host);
    return buf;
}

static void setup(void)
{
    cr_assert_eq(fa_context_create(&(fa_context_desc){.backend = FA_BACKEND_CPU}, &ctx), FA_OK);
    const size_t qn = (size_t)B * SQ * HQ * D * 4, kn = (size_t)B * SK * HKV * D * 4;
    bq = make(qn, 0.5f), bk = make(kn, -0.25f), bv = make(kn, 1.0f), bo = make(qn, 7.0f);
    blse = make((size_t)B * HQ * SQ * 4, 7.0f);
    bdo = make(qn, 0.125f), bdq = make(qn, 7.0f), bdk = make(kn, 7.0f), bdv = make(kn, 7.0f);
    q = fa_tensor_bshd(bq, FA_DTYPE_F32, B, SQ, HQ, D);
    k = fa_tensor_bshd(bk, FA_DTYPE_F32, B, SK, HKV, D);
    v = fa_tensor_bshd(bv, FA_DTYPE_F32, B, SK, HKV, D);
    o = fa_tensor_bshd(bo, FA_DTYPE_F32, B, SQ, HQ, D);
    lse = fa_tensor_lse(blse, B, HQ, SQ);
    d_o = fa_tensor_bshd(bdo, FA_DTYPE_F32, B, SQ, HQ, D);
    d_q = fa_tensor_bshd(bdq, FA_DTYPE_F32, B, SQ, HQ, D);
    d_k = fa_tensor_bshd(bdk, FA_DTYPE_F32, B, SK, HKV, D);
    d_v = fa_tensor_bshd(bdv, FA_DTYPE_F32, B, SK, HKV, D);
}

static void teardown(void)
{
    fa_context_destroy(ctx);
}

/* Asserts that no output buffer changed: every element still holds its fill value. */
static void assert_outputs_untouched(void)
{
    fa_buffer *outs[] = {bo, blse, bdq, bdk, bdv};
    for (size_t i = 0; i < 5; i++) {
        size_t n = fa_buffer_size(outs[i]) / 4;
        float *host = malloc(n * 4);
        cr_assert_eq(fa_buffer_read(outs[i], 0, host, n * 4), FA_OK);
        for (size_t j = 0; j < n; j++)
            cr_assert_eq(host[j], 7.0f + 0.001f * (float)(j % 97), "output %zu touched at %zu", i,
                         j);
        free(host);
    }
}

static fa_status forward(const fa_tensor *tq, const fa_tensor *tk, const fa_tensor *tv,
                         const fa_tensor *to, const fa_tensor *tl)
{
    return fa_attention_forward(ctx, &(fa_attention_desc){0}, tq, tk, tv, to, tl);
}

static fa_status backward(void)
{
    return fa_attention_backward(ctx, NULL, &q, &k, &v, &o, &d_o, &lse, &d_q, &d_k, &d_v);
}

#define EXPECT(expr, status)                                                                       \
    do {                                                                                           \
        fa_status st_ = (expr);                                                                    \
        cr_assert_eq(st_, status, "got %s (%s), expected %s", fa_status_name(st_),                 \
                     fa_context_last_error(ctx), fa_status_name(status));                          \
        cr_assert_str_not_empty(fa_context_last_error(ctx));                                       \
        assert_outputs_untouched();                                                                \
    } while (0)

TestSuite(validation, .init = setup, .fini = teardown);

Test(validation, a_valid_call_succeeds)
{
    cr_assert_eq(forward(&q, &k, &v, &o, &lse), FA_OK, "%s", fa_context_last_error(ctx));
    cr_assert_eq(forward(&q, &k, &v, &o, NULL), FA_OK, "the forward may skip the LSE");
    cr_assert_eq(backward(), FA_OK, "%s", fa_context_last_error(ctx));
}

Test(validation, null_pointers)
{
    cr_assert_eq(fa_attention_forward(NULL, NULL, &q, &k, &v, &o, &lse), FA_ERROR_NULL_POINTER);
    EXPECT(forward(NULL, &k, &v, &o, &lse), FA_ERROR_NULL_POINTER);
    EXPECT(forward(&q, NULL, &v, &o, &lse), FA_ERROR_NULL_POINTER);
    EXPECT(forward(&q, &k, NULL, &o, &lse), FA_ERROR_NULL_POINTER);
    EXPECT(forward(&q, &k, &v, NULL, &lse), FA_ERROR_NULL_POINTER);
    fa_tensor no_buffer = q;
    no_buffer.buffer = NULL;
    EXPECT(forward(&no_buffer, &k, &v, &o, &lse), FA_ERROR_NULL_POINTER);
    EXPECT(fa_attention_backward(ctx, NULL, &q, &k, &v, &o, &d_o, NULL, &d_q, &d_k, &d_v),
           FA_ERROR_NULL_POINTER);
    EXPECT(fa_attention_backward(ctx, NULL, &q, &k, &v, &o, NULL, &lse, &d_q, &d_k, &d_v),
           FA_ERROR_NULL_POINTER);
    EXPECT(fa_attention_backward(ctx, NULL, &q, &k, &v, &o, &d_o, &lse, &d_q, &d_k, NULL),
           FA_ERROR_NULL_POINTER);
}

Test(validation, head_dim_must_be_a_multiple_of_8_up_to_256)
{
    const int64_t bad[] = {0, 4, 7, 12, 100, 264, 300};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fa_tensor q2 = fa_tensor_bshd(bq, FA_DTYPE_F32, 1, 1, 1, bad[i]);
        fa_tensor k2 = fa_tensor_bshd(bk, FA_DTYPE_F32, 1, 1, 1, bad[i]);
        fa_tensor v2 = fa_tensor_bshd(bv, FA_DTYPE_F32, 1, 1, 1, bad[i]);
        fa_tensor o2 = fa_tensor_bshd(bo, FA_DTYPE_F32, 1, 1, 1, bad[i]);
        EXPECT(forward(&q2, &k2, &v2, &o2, NULL), FA_ERROR_UNSUPPORTED_HEAD_DIM);
    }
}

Test(validation, query_heads_must_be_a_multiple_of_kv_heads)
{
    fa_tensor k3 = fa_tensor_bshd(bk, FA_DTYPE_F32, B, 4, 3, D);
    fa_tensor v3 = fa_tensor_bshd(bv, FA_DTYPE_F32, B, 4, 3, D);
    EXPECT(forward(&q, &k3, &v3, &o, &lse), FA_ERROR_INVALID_GQA);
    fa_tensor k0 = fa_tensor_bshd(bk, FA_DTYPE_F32, B, SK, 0, D);
    fa_tensor v0 = fa_tensor_bshd(bv, FA_DTYPE_F32, B, SK, 0, D);
    EXPECT(forward(&q, &k0, &v0, &o, &lse), FA_ERROR_INVALID_GQA);
}

Test(validation, shape_mismatches)
{
    fa_tensor t;
    t = k, t.shape[0] = 1; /* batch */
    EXPECT(forward(&q, &t, &v, &o, &lse), FA_ERROR_SHAPE_MISMATCH);
    t = v, t.shape[1] = SK - 1; /* v's seq differs from k's */
    EXPECT(forward(&q, &k, &t, &o, &lse), FA_ERROR_SHAPE_MISMATCH);
    t = fa_tensor_bshd(bv, FA_DTYPE_F32, B, SK, HKV, 8); /* dim */
    EXPECT(forward(&q, &k, &t, &o, &lse), FA_ERROR_SHAPE_MISMATCH);
    t = fa_tensor_bshd(bo, FA_DTYPE_F32, B, SQ, HQ / 2, D); /* o heads */
    EXPECT(forward(&q, &k, &v, &t, &lse), FA_ERROR_SHAPE_MISMATCH);
    t = fa_tensor_lse(blse, B, HQ, SQ - 1);
    EXPECT(forward(&q, &k, &v, &o, &t), FA_ERROR_SHAPE_MISMATCH);
    t = lse, t.shape[3] = 2;
    EXPECT(forward(&q, &k, &v, &o, &t), FA_ERROR_SHAPE_MISMATCH);
    t = fa_tensor_bshd(bdk, FA_DTYPE_F32, B, SK - 1, HKV, D);
    EXPECT(fa_attention_backward(ctx, NULL, &q, &k, &v, &o, &d_o, &lse, &d_q, &t, &d_v),
           FA_ERROR_SHAPE_MISMATCH);
    t = fa_tensor_bshd(bdo, FA_DTYPE_F32, 1, SQ, HQ, D);
    EXPECT(fa_attention_backward(ctx, NULL, &q, &k, &v, &o, &t, &lse, &d_q, &d_k, &d_v),
           FA_ERROR_SHAPE_MISMATCH);
}

Test(validation, negative_sizes_are_invalid)
{
    fa_tensor t = q;
    t.shape[1] = -1;
    EXPECT(forward(&t, &k, &v, &o, &lse), FA_ERROR_INVALID_ARGUMENT);
}

Test(validation, dtype_mismatch_and_invalid_dtype)
{
    fa_tensor t = k;
    t.dtype = FA_DTYPE_F16;
    EXPECT(forward(&q, &t, &v, &o, &lse), FA_ERROR_DTYPE_MISMATCH);
    t = o, t.dtype = FA_DTYPE_BF16;
    EXPECT(forward(&q, &k, &v, &t, &lse), FA_ERROR_DTYPE_MISMATCH);
    t = q, t.dtype = FA_DTYPE_INVALID;
    EXPECT(forward(&t, &k, &v, &o, &lse), FA_ERROR_DTYPE_MISMATCH);
    t = q, t.dtype = (fa_dtype)9;
    EXPECT(forward(&t, &k, &v, &o, &lse), FA_ERROR_DTYPE_MISMATCH);
    t = lse, t.dtype = FA_DTYPE_F16;
    EXPECT(forward(&q, &k, &v, &o, &t), FA_ERROR_DTYPE_MISMATCH);
    t = d_q, t.dtype = FA_DTYPE_F16;
    EXPECT(fa_attention_backward(ctx, NULL, &q, &k, &v, &o, &d_o, &lse, &t, &d_k, &d_v),
           FA_ERROR_DTYPE_MISMATCH);
}

Test(validation, strides)
{
    fa_tensor t = q;
    t.stride[3] = 2;
    EXPECT(forward(&t, &k, &v, &o, &lse), FA_ERROR_INVALID_STRIDE);
    t = q, t.stride[1] = -D * HQ;
    EXPECT(forward(&t, &k, &v, &o, &lse), FA_ERROR_INVALID_STRIDE);
    t = o, t.stride[2] = 0; /* heads would write the same elements */
    EXPECT(forward(&q, &k, &v, &t, &lse), FA_ERROR_INVALID_STRIDE);
    /* all-zero strides mean packed BSHD: valid */
    t = q;
    memset(t.stride, 0, sizeof t.stride);
    cr_assert_eq(forward(&t, &k, &v, &o, &lse), FA_OK, "%s", fa_context_last_error(ctx));
}

Test(validation, tensor_reaching_past_its_buffer)
{
    fa_tensor t = q;
    t.offset = 4;
    EXPECT(forward(&t, &k, &v, &o, &lse), FA_ERROR_OUT_OF_BOUNDS);
    t = o, t.stride[0] *= 2; /* batch 1 lands past the end */
    EXPECT(forward(&q, &k, &v, &t, &lse), FA_ERROR_OUT_OF_BOUNDS);
    t = k, t.shape[1] = SK + 1, t.stride[0] = (SK + 1) * HKV * D;
    fa_tensor tv = v;
    tv.shape[1] = SK + 1, tv.stride[0] = (SK + 1) * HKV * D;
    EXPECT(forward(&q, &t, &tv, &o, &lse), FA_ERROR_OUT_OF_BOUNDS);
    t = q, t.offset = 2; /* not a multiple of the element size */
    EXPECT(forward(&t, &k, &v, &o, &lse), FA_ERROR_INVALID_ARGUMENT);
}

Test(validation, sizes_that_overflow_64_bits)
{
    fa_tensor t = q;
    t.shape[0] = INT64_MAX / 2, t.shape[1] = 4;
    EXPECT(forward(&t, &k, &v, &o, &lse), FA_ERROR_SIZE_OVERFLOW);
    t = q, t.stride[0] = INT64_MAX / 2; /* the last element's index overflows */
    EXPECT(forward(&t, &k, &v, &o, &lse), FA_ERROR_SIZE_OVERFLOW);
    t = q, t.offset = UINT64_MAX - 3;
    EXPECT(forward(&t, &k, &v, &o, &lse), FA_ERROR_SIZE_OVERFLOW);
}

Test(validation, buffer_of_another_context)
{
    fa_context *other = NULL;
    cr_assert_eq(fa_context_create(&(fa_context_desc){.backend = FA_BACKEND_CPU}, &other), FA_OK);
    fa_buffer *foreign = NULL;
    cr_assert_eq(fa_buffer_create(other, &(fa_buffer_desc){.size = fa_buffer_size(bk)}, &foreign),
                 FA_OK);
    fa_tensor t = k;
    t.buffer = foreign;
    EXPECT(forward(&q, &t, &v, &o, &lse), FA_ERROR_FOREIGN_BUFFER);
    fa_context_destroy(other);
}

Test(validation, outputs_must_not_overlap_inputs)
{
    fa_tensor t = fa_tensor_bshd(bq, FA_DTYPE_F32, B, SQ, HQ, D);
    fa_status st = forward(&q, &k, &v, &t, &lse);
    cr_assert_eq(st, FA_ERROR_INVALID_ARGUMENT, "%s", fa_status_name(st));
    t = fa_tensor_bshd(bdq, FA_DTYPE_F32, B, SK, HKV, D); /* d_k on top of d_q */
    EXPECT(fa_attention_backward(ctx, NULL, &q, &k, &v, &o, &d_o, &lse, &d_q, &t, &d_v),
           FA_ERROR_INVALID_ARGUMENT);
}

Test(validation, scale_must_be_finite)
{
    EXPECT(fa_attention_forward(ctx, &(fa_attention_desc){.scale = NAN}, &q, &k, &v, &o, &lse),
           FA_ERROR_INVALID_ARGUMENT);
    EXPECT(fa_attention_forward(ctx, &(fa_attention_desc){.scale = INFINITY}, &q, &k, &v, &o, &lse),
           FA_ERROR_INVALID_ARGUMENT);
}

Test(validation, num_splits_from_0_to_256)
{
    EXPECT(fa_attention_forward(ctx, &(fa_attention_desc){.num_splits = -1}, &q, &k, &v, &o, &lse),
           FA_ERROR_INVALID_ARGUMENT);
    EXPECT(fa_attention_forward(ctx, &(fa_attention_desc){.num_splits = 257}, &q, &k, &v, &o, &lse),
           FA_ERROR_INVALID_ARGUMENT);
    cr_assert_eq(
        fa_attention_forward(ctx, &(fa_attention_desc){.num_splits = 256}, &q, &k, &v, &o, &lse),
        FA_OK, "%s", fa_context_last_error(ctx));
}

/* A window's bounds are -1 or key counts, and are set only with the window on. */
Test(validation, window_bounds)
{
    const fa_window bad[] = {
        {true, -2, 0},  {true, 3, -7}, {true, INT32_MIN, INT32_MIN},
        {false, 16, 0}, /* set up but not switched on */
        {false, -1, 4},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const fa_attention_desc desc = {.window = bad[i]};
        EXPECT(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_INVALID_ARGUMENT);
        cr_assert(strstr(fa_context_last_error(ctx), "window."), "%s", fa_context_last_error(ctx));
        EXPECT(fa_attention_backward(ctx, &desc, &q, &k, &v, &o, &d_o, &lse, &d_q, &d_k, &d_v),
               FA_ERROR_INVALID_ARGUMENT);
    }
    const fa_window good[] = {
        {false, 0, 0}, {false, -1, -1}, {true, -1, -1},       {true, 0, 0},
        {true, 3, -1}, {true, -1, 2},   {true, INT32_MAX, 0}, {true, 1, INT32_MAX},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        const fa_attention_desc desc = {.window = good[i], .causal = i % 2 != 0};
        cr_assert_eq(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_OK, "%zu: %s", i,
                     fa_context_last_error(ctx));
        cr_assert_eq(
            fa_attention_backward(ctx, &desc, &q, &k, &v, &o, &d_o, &lse, &d_q, &d_k, &d_v), FA_OK,
            "%zu: %s", i, fa_context_last_error(ctx));
    }
}

/* softcap: 0 (off) or a finite positive value. */
Test(validation, softcap_finite_and_not_negative)
{
    const float bad[] = {-1.0f, -1e-30f, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const fa_attention_desc desc = {.softcap = bad[i]};
        EXPECT(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_INVALID_ARGUMENT);
        cr_assert(strstr(fa_context_last_error(ctx), "softcap"), "%s", fa_context_last_error(ctx));
        EXPECT(fa_attention_backward(ctx, &desc, &q, &k, &v, &o, &d_o, &lse, &d_q, &d_k, &d_v),
               FA_ERROR_INVALID_ARGUMENT);
    }
    const fa_attention_desc on = {.softcap = 30.0f};
    cr_assert_eq(fa_attention_forward(ctx, &on, &q, &k, &v, &o, &lse), FA_OK, "%s",
                 fa_context_last_error(ctx));
    cr_assert_eq(fa_attention_backward(ctx, &on, &q, &k, &v, &o, &d_o, &lse, &d_q, &d_k, &d_v),
                 FA_OK, "%s", fa_context_last_error(ctx));
}

/* ALiBi slopes: f32, (1, 1, HQ, 1) or (B, 1, HQ, 1), inside their buffer, forward and backward;
 * a bad one is refused with its status before anything is written. */
Test(validation, alibi_slopes)
{
    float host[2 * B * HQ];
    for (int i = 0; i < 2 * B * HQ; i++)
        host[i] = 0.125f * (float)(i + 1);
    fa_buffer *bs = NULL;
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof host, .data = host}, &bs),
                 FA_OK);
    const struct {
        fa_tensor t;
        fa_status st;
        const char *says;
    } bad[] = {
        {fa_tensor_bshd(bs, FA_DTYPE_F16, 1, 1, HQ, 1), FA_ERROR_DTYPE_MISMATCH, "f32"},
        {fa_tensor_bshd(bs, FA_DTYPE_I32, B, 1, HQ, 1), FA_ERROR_DTYPE_MISMATCH, "f32"},
        {fa_tensor_bshd(bs, FA_DTYPE_F32, 1, 1, HKV, 1), FA_ERROR_SHAPE_MISMATCH, "(1, 1, 4, 1)"},
        {fa_tensor_bshd(bs, FA_DTYPE_F32, B + 1, 1, HQ, 1), FA_ERROR_SHAPE_MISMATCH, "alibi"},
        {fa_tensor_bshd(bs, FA_DTYPE_F32, 1, HQ, 1, 1), FA_ERROR_SHAPE_MISMATCH, "alibi"},
        {fa_tensor_bshd(bs, FA_DTYPE_F32, 1, 1, HQ, 2), FA_ERROR_SHAPE_MISMATCH, "alibi"},
        {fa_tensor_bshd(bs, FA_DTYPE_F32, 1, 1, 4 * HQ * B, 1), FA_ERROR_OUT_OF_BOUNDS, "alibi"},
        {fa_tensor_bshd(NULL, FA_DTYPE_F32, 1, 1, HQ, 1), FA_ERROR_NULL_POINTER, "alibi"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const fa_attention_desc desc = {.alibi_slopes = &bad[i].t};
        EXPECT(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), bad[i].st);
        cr_assert(strstr(fa_context_last_error(ctx), bad[i].says), "%zu: %s", i,
                  fa_context_last_error(ctx));
        EXPECT(fa_attention_backward(ctx, &desc, &q, &k, &v, &o, &d_o, &lse, &d_q, &d_k, &d_v),
               bad[i].st);
    }
    /* the slopes are an input: an output on top of them is refused */
    fa_tensor over = fa_tensor_bshd(bo, FA_DTYPE_F32, 1, 1, HQ, 1);
    const fa_attention_desc desc = {.alibi_slopes = &over};
    EXPECT(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_INVALID_ARGUMENT);
    fa_tensor strided = fa_tensor_bshd(bs, FA_DTYPE_F32, B, 1, HQ, 1);
    strided.offset = 4;
    strided.stride[0] = 1, strided.stride[1] = 1, strided.stride[2] = B, strided.stride[3] = 1;
    const fa_tensor good[] = {fa_tensor_bshd(bs, FA_DTYPE_F32, 1, 1, HQ, 1),
                              fa_tensor_bshd(bs, FA_DTYPE_F32, B, 1, HQ, 1), strided};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        const fa_attention_desc desc = {.alibi_slopes = &good[i], .causal = true};
        cr_assert_eq(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_OK, "%zu: %s", i,
                     fa_context_last_error(ctx));
        cr_assert_eq(
            fa_attention_backward(ctx, &desc, &q, &k, &v, &o, &d_o, &lse, &d_q, &d_k, &d_v), FA_OK,
            "%zu: %s", i, fa_context_last_error(ctx));
    }
}

/* An additive bias: f32, f16 or bf16 whatever the call's dtype, (B or 1, SQ or 1, HQ or 1, SK),
 * inside its buffer, forward and backward; a bad one is refused before anything is written. */
Test(validation, bias)
{
    float host[B * SQ * HQ * SK];
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        host[i] = 0.01f * (float)(i % 13);
    fa_buffer *bb = NULL;
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof host, .data = host}, &bb),
                 FA_OK);
    const struct {
        fa_tensor t;
        fa_status st;
        const char *says;
    } bad[] = {
        {fa_tensor_bshd(bb, FA_DTYPE_I32, B, SQ, HQ, SK), FA_ERROR_DTYPE_MISMATCH, "bias.dtype"},
        {fa_tensor_bshd(bb, FA_DTYPE_F32, B, SQ, HQ, SK - 1), FA_ERROR_SHAPE_MISMATCH, "bias"},
        {fa_tensor_bshd(bb, FA_DTYPE_F32, B, SQ, HQ, 1), FA_ERROR_SHAPE_MISMATCH, "key"},
        {fa_tensor_bshd(bb, FA_DTYPE_F32, 2 * B, 1, 1, SK), FA_ERROR_SHAPE_MISMATCH, "bias"},
        {fa_tensor_bshd(bb, FA_DTYPE_F32, 1, SQ + 1, 1, SK), FA_ERROR_SHAPE_MISMATCH, "bias"},
        {fa_tensor_bshd(bb, FA_DTYPE_F32, 1, 1, HKV, SK), FA_ERROR_SHAPE_MISMATCH, "bias"},
        {fa_tensor_bshd(bb, FA_DTYPE_F32, B + 1, SQ, HQ, SK), FA_ERROR_OUT_OF_BOUNDS, "bias"},
        {fa_tensor_bshd(NULL, FA_DTYPE_F32, 1, 1, 1, SK), FA_ERROR_NULL_POINTER, "bias"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const fa_attention_desc desc = {.bias = &bad[i].t};
        EXPECT(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), bad[i].st);
        cr_assert(strstr(fa_context_last_error(ctx), bad[i].says), "%zu: %s", i,
                  fa_context_last_error(ctx));
        EXPECT(fa_attention_backward(ctx, &desc, &q, &k, &v, &o, &d_o, &lse, &d_q, &d_k, &d_v),
               bad[i].st);
    }
    /* the bias is an input: an output on top of it is refused */
    fa_tensor over = fa_tensor_bshd(bdq, FA_DTYPE_F32, 1, 1, 1, SK);
    const fa_attention_desc on_dq = {.bias = &over};
    EXPECT(fa_attention_backward(ctx, &on_dq, &q, &k, &v, &o, &d_o, &lse, &d_q, &d_k, &d_v),
           FA_ERROR_INVALID_ARGUMENT);
    fa_tensor zero_strides = fa_tensor_bshd(bb, FA_DTYPE_F32, B, SQ, HQ, SK);
    zero_strides.stride[0] = 0, zero_strides.stride[1] = SK, zero_strides.stride[2] = 0;
    zero_strides.stride[3] = 1;
    const fa_tensor good[] = {fa_tensor_bshd(bb, FA_DTYPE_F32, B, SQ, HQ, SK),
                              fa_tensor_bshd(bb, FA_DTYPE_F16, 1, SQ, 1, SK),
                              fa_tensor_bshd(bb, FA_DTYPE_BF16, B, 1, HQ, SK), zero_strides};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        const fa_attention_desc desc = {.bias = &good[i], .causal = i % 2 != 0};
        cr_assert_eq(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_OK, "%zu: %s", i,
                     fa_context_last_error(ctx));
        cr_assert_eq(
            fa_attention_backward(ctx, &desc, &q, &k, &v, &o, &d_o, &lse, &d_q, &d_k, &d_v), FA_OK,
            "%zu: %s", i, fa_context_last_error(ctx));
    }
}

/* Per-sequence key counts: an (B, 1, 1, 1) i32 tensor of values in [0, SK], forward only. */
Test(validation, seqlens_k)
{
    const int32_t good[2 * B] = {SK, 0, 0, 0}, bad[B] = {3, SK + 1}, negative[B] = {-1, 2};
    fa_buffer *bl = NULL, *bb = NULL, *bn = NULL;
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof good, .data = good}, &bl),
                 FA_OK);
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof bad, .data = bad}, &bb),
                 FA_OK);
    cr_assert_eq(
        fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof negative, .data = negative}, &bn),
        FA_OK);
    fa_tensor lens = fa_tensor_bshd(bl, FA_DTYPE_I32, B, 1, 1, 1);
    fa_attention_desc desc = {.seqlens_k = &lens};
    fa_tensor wrong = fa_tensor_bshd(bl, FA_DTYPE_F32, B, 1, 1, 1);
    desc.seqlens_k = &wrong;
    EXPECT(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_DTYPE_MISMATCH);
    wrong = fa_tensor_bshd(bl, FA_DTYPE_I32, 1, 1, 1, 1);
    EXPECT(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_SHAPE_MISMATCH);
    wrong = fa_tensor_bshd(bl, FA_DTYPE_I32, B, 2, 1, 1);
    EXPECT(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_SHAPE_MISMATCH);
    wrong = fa_tensor_bshd(bl, FA_DTYPE_I32, B, 1, 1, 1);
    wrong.offset = 12;
    EXPECT(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_OUT_OF_BOUNDS);
    wrong = fa_tensor_bshd(bb, FA_DTYPE_I32, B, 1, 1, 1);
    EXPECT(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_OUT_OF_BOUNDS);
    cr_assert(strstr(fa_context_last_error(ctx), "seqlens_k[1] is 8") != NULL, "%s",
              fa_context_last_error(ctx));
    wrong = fa_tensor_bshd(bn, FA_DTYPE_I32, B, 1, 1, 1);
    EXPECT(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_OUT_OF_BOUNDS);
    /* q's dtype for a tensor of lengths, and lengths as attention data: refused */
    fa_tensor as_q = fa_tensor_bshd(bq, FA_DTYPE_I32, B, SQ, HQ, D);
    EXPECT(fa_attention_forward(ctx, NULL, &as_q, &k, &v, &o, &lse), FA_ERROR_DTYPE_MISMATCH);
    desc.seqlens_k = &lens;
    EXPECT(fa_attention_backward(ctx, &desc, &q, &k, &v, &o, &d_o, &lse, &d_q, &d_k, &d_v),
           FA_ERROR_UNSUPPORTED);
    cr_assert_eq(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_OK, "%s",
                 fa_context_last_error(ctx));
    /* batch entry 1 has no key: O = 0, LSE = -inf */
    float row[D], l;
    cr_assert_eq(fa_buffer_read(bo, (size_t)(1 * SQ * HQ) * D * 4, row, sizeof row), FA_OK);
    cr_assert_eq(fa_buffer_read(blse, (size_t)(1 * HQ * SQ) * 4, &l, sizeof l), FA_OK);
    for (int d = 0; d < D; d++)
        cr_assert_eq(row[d], 0.0f);
    cr_assert(isinf(l) && l < 0);
    fa_buffer_destroy(bl);
    fa_buffer_destroy(bb);
    fa_buffer_destroy(bn);
}

/* k and v seen as 2 pages of SK keys: entry b's one page is block_table[b][0]. */
Test(validation, block_table)
{
    const int32_t swapped[2 * B] = {1, 0, 0, 0}, past[B] = {2, 0}, negative[B] = {0, -1};
    const int32_t lens_v[B] = {SK, 0}; /* with negative: entry 1's -1 unread */
    fa_buffer *bs = NULL, *bp = NULL, *bn = NULL, *bl = NULL;
    cr_assert_eq(
        fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof swapped, .data = swapped}, &bs),
        FA_OK);
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof past, .data = past}, &bp),
                 FA_OK);
    cr_assert_eq(
        fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof negative, .data = negative}, &bn),
        FA_OK);
    cr_assert_eq(
        fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof lens_v, .data = lens_v}, &bl),
        FA_OK);
    fa_tensor table = fa_tensor_bshd(bs, FA_DTYPE_F32, B, 1, 1, 1);
    fa_attention_desc desc = {.block_table = &table};
    EXPECT(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_DTYPE_MISMATCH);
    table = fa_tensor_bshd(bs, FA_DTYPE_I32, 1, 1, 1, 1);
    EXPECT(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_SHAPE_MISMATCH);
    table = fa_tensor_bshd(bs, FA_DTYPE_I32, B, 1, 2, 1);
    EXPECT(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_SHAPE_MISMATCH);
    table = fa_tensor_bshd(bp, FA_DTYPE_I32, B, 1, 1, 1);
    EXPECT(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_OUT_OF_BOUNDS);
    cr_assert(strstr(fa_context_last_error(ctx), "block_table[0][0] is 2") != NULL, "%s",
              fa_context_last_error(ctx));
    table = fa_tensor_bshd(bn, FA_DTYPE_I32, B, 1, 1, 1);
    EXPECT(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_OUT_OF_BOUNDS);
    table = fa_tensor_bshd(bs, FA_DTYPE_I32, B, 1, 1, 1);
    EXPECT(fa_attention_backward(ctx, &desc, &q, &k, &v, &o, &d_o, &lse, &d_q, &d_k, &d_v),
           FA_ERROR_UNSUPPORTED);
    /* an entry past its sequence's length is never read, so never checked */
    table = fa_tensor_bshd(bn, FA_DTYPE_I32, B, 1, 1, 1);
    fa_tensor lens = fa_tensor_bshd(bl, FA_DTYPE_I32, B, 1, 1, 1);
    desc.seqlens_k = &lens;
    cr_assert_eq(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_OK, "%s",
                 fa_context_last_error(ctx));
    desc.seqlens_k = NULL;
    table = fa_tensor_bshd(bs, FA_DTYPE_I32, B, 1, 1, 1);
    /* pages swapped: entry 0 attends to batch entry 1's keys, and entry 1 to entry 0's */
    float swapped_o[B * SQ * HQ * D], plain_o[B * SQ * HQ * D];
    cr_assert_eq(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_OK, "%s",
                 fa_context_last_error(ctx));
    cr_assert_eq(fa_buffer_read(bo, 0, swapped_o, sizeof swapped_o), FA_OK);
    fa_tensor k1 = k, v1 = v; /* entry 0's keys for both: all of batch entry 1's view */
    k1.offset = v1.offset = (uint64_t)SK * HKV * D * sizeof(float); /* bytes */
    k1.stride[0] = v1.stride[0] = 0;
    k1.stride[1] = v1.stride[1] = HKV * D;
    k1.stride[2] = v1.stride[2] = D;
    k1.stride[3] = v1.stride[3] = 1;
    cr_assert_eq(fa_attention_forward(ctx, NULL, &q, &k1, &v1, &o, &lse), FA_OK, "%s",
                 fa_context_last_error(ctx));
    cr_assert_eq(fa_buffer_read(bo, 0, plain_o, sizeof plain_o), FA_OK);
    for (int i = 0; i < SQ * HQ * D; i++)
        cr_assert_eq(swapped_o[i], plain_o[i], "element %d of batch entry 0", i);
    fa_buffer_destroy(bs);
    fa_buffer_destroy(bp);
    fa_buffer_destroy(bn);
    fa_buffer_destroy(bl);
}

/* The bytes of a buffer as they are now. */
static float *snapshot(fa_buffer *buf)
{
    float *host = malloc(fa_buffer_size(buf));
    cr_assert_eq(fa_buffer_read(buf, 0, host, fa_buffer_size(buf)), FA_OK);
    return host;
}

static void assert_same(fa_buffer *buf, const float *before, const char *name)
{
    float *now = snapshot(buf);
    cr_assert_arr_eq(now, before, fa_buffer_size(buf), "%s changed", name);
    free(now);
}

/* The KV-cache append's bad input (k_new, v_new, SN rows per sequence): each refused with its
 * status before anything is written, k and v included. */
Test(validation, kv_append)
{
    enum { SN = 2 };
    const int32_t fits[B] = {SK - SN, 0}, past[B] = {SK - SN + 1, 0}, pages[B] = {1, -1};
    fa_buffer *bn = make((size_t)B * SN * HKV * D * 4, 3.0f), *bl = NULL, *bp = NULL, *bt = NULL;
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof fits, .data = fits}, &bl),
                 FA_OK);
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof past, .data = past}, &bp),
                 FA_OK);
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof pages, .data = pages}, &bt),
                 FA_OK);
    float *k_before = snapshot(bk), *v_before = snapshot(bv);
#define EXPECT_KV(expr, status)                                                                    \
    do {                                                                                           \
        EXPECT(expr, status);                                                                      \
        assert_same(bk, k_before, "k");                                                            \
        assert_same(bv, v_before, "v");                                                            \
    } while (0)
    fa_tensor kn = fa_tensor_bshd(bn, FA_DTYPE_F32, B, SN, HKV, D), vn = kn;
    fa_tensor lens = fa_tensor_bshd(bl, FA_DTYPE_I32, B, 1, 1, 1), wrong;
    fa_attention_desc desc = {.seqlens_k = &lens, .k_new = &kn};
    EXPECT_KV(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_NULL_POINTER);
    desc.k_new = NULL, desc.v_new = &vn;
    EXPECT_KV(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_NULL_POINTER);
    desc = (fa_attention_desc){.k_new = &kn, .v_new = &vn};
    EXPECT_KV(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_INVALID_ARGUMENT);
    EXPECT_KV(fa_attention_backward(ctx, &desc, &q, &k, &v, &o, &d_o, &lse, &d_q, &d_k, &d_v),
              FA_ERROR_UNSUPPORTED);
    cr_assert(strstr(fa_context_last_error(ctx), "k_new") != NULL);
    desc.seqlens_k = &lens;
    desc.k_new = &wrong;
    wrong = fa_tensor_bshd(bn, FA_DTYPE_F32, 1, SN, HKV, D); /* q's batch */
    EXPECT_KV(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_SHAPE_MISMATCH);
    wrong = fa_tensor_bshd(bn, FA_DTYPE_F32, B, SN, 1, HKV * D); /* k's heads and head dim */
    EXPECT_KV(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_SHAPE_MISMATCH);
    wrong = fa_tensor_bshd(bn, FA_DTYPE_F32, B, 1, HKV, D); /* v_new's shape */
    EXPECT_KV(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_SHAPE_MISMATCH);
    wrong = fa_tensor_bshd(bn, FA_DTYPE_F16, B, SN, HKV, D);
    EXPECT_KV(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_DTYPE_MISMATCH);
    /* k and v are written: neither may overlap the other, an input or an index tensor */
    wrong = fa_tensor_bshd(bk, FA_DTYPE_F32, B, SN, HKV, D);
    EXPECT_KV(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_INVALID_ARGUMENT);
    desc.k_new = &kn;
    EXPECT_KV(fa_attention_forward(ctx, &desc, &q, &k, &k, &o, &lse), FA_ERROR_INVALID_ARGUMENT);
    wrong = fa_tensor_bshd(bq, FA_DTYPE_F32, B, SK, HKV, D);
    EXPECT_KV(fa_attention_forward(ctx, &desc, &q, &wrong, &v, &o, &lse),
              FA_ERROR_INVALID_ARGUMENT);
    wrong = fa_tensor_bshd(bv, FA_DTYPE_I32, B, 1, 1, 1);
    desc.seqlens_k = &wrong;
    EXPECT_KV(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_INVALID_ARGUMENT);
    /* a new row past the capacity */
    wrong = fa_tensor_bshd(bp, FA_DTYPE_I32, B, 1, 1, 1);
    EXPECT_KV(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_OUT_OF_BOUNDS);
    cr_assert(strstr(fa_context_last_error(ctx), "seqlens_k[0] is 6 and k_new adds 2 rows") != NULL,
              "%s", fa_context_last_error(ctx));
    /* paged (k, v: 2 pages of SK keys): entry 1 holds no key, but its first page is written */
    fa_tensor table = fa_tensor_bshd(bt, FA_DTYPE_I32, B, 1, 1, 1);
    desc.seqlens_k = &lens;
    desc.block_table = &table;
    EXPECT_KV(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_ERROR_OUT_OF_BOUNDS);
    cr_assert(strstr(fa_context_last_error(ctx), "block_table[1][0] is -1") != NULL, "%s",
              fa_context_last_error(ctx));
    desc.k_new = desc.v_new = NULL;
    cr_assert_eq(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_OK,
                 "without the append entry 1 reads no page: %s", fa_context_last_error(ctx));
#undef EXPECT_KV
    /* a valid append writes entry 0's keys 5 and 6 and entry 1's keys 0 and 1 */
    desc = (fa_attention_desc){.seqlens_k = &lens, .k_new = &kn, .v_new = &vn};
    cr_assert_eq(fa_attention_forward(ctx, &desc, &q, &k, &v, &o, &lse), FA_OK, "%s",
                 fa_context_last_error(ctx));
    float *k_after = snapshot(bk), *k_new = snapshot(bn);
    const size_t row = (size_t)HKV * D;
    for (size_t key = 0; key < (size_t)B * SK; key++) {
        const size_t b = key / SK, s = key % SK, at = (size_t)fits[b];
        const float *want =
            s >= at && s < at + SN ? k_new + (b * SN + s - at) * row : k_before + key * row;
        cr_assert_arr_eq(k_after + key * row, want, row * 4, "key %zu of entry %zu", s, b);
    }
    wrong = fa_tensor_bshd(bq, FA_DTYPE_F32, B, SK, HKV, D);
    cr_assert_eq(fa_attention_forward(ctx, NULL, &q, &wrong, &v, &o, &lse), FA_OK,
                 "read only, k may share q's memory: %s", fa_context_last_error(ctx));
    free(k_before), free(v_before), free(k_after), free(k_new);
    fa_buffer_destroy(bn), fa_buffer_destroy(bl), fa_buffer_destroy(bp), fa_buffer_destroy(bt);
}

Test(validation, empty_batch_or_queries_is_a_no_op)
{
    fa_tensor q0 = q, o0 = o, l0 = lse;
    q0.shape[0] = o0.shape[0] = l0.shape[0] = 0;
    fa_tensor k0 = k, v0 = v;
    k0.shape[0] = v0.shape[0] = 0;
    cr_assert_eq(forward(&q0, &k0, &v0, &o0, &l0), FA_OK, "%s", fa_context_last_error(ctx));
    q0 = q, o0 = o, l0 = lse;
    q0.shape[1] = o0.shape[1] = l0.shape[1] = 0;
    cr_assert_eq(forward(&q0, &k, &v, &o0, &l0), FA_OK, "%s", fa_context_last_error(ctx));
    assert_outputs_untouched();
}

Test(validation, empty_keys_give_zero_output_and_minus_infinity_lse)
{
    fa_tensor k0 = k, v0 = v;
    k0.shape[1] = v0.shape[1] = 0;
    cr_assert_eq(forward(&q, &k0, &v0, &o, &lse), FA_OK, "%s", fa_context_last_error(ctx));
    float out[B * SQ * HQ * D], l[B * HQ * SQ];
    cr_assert_eq(fa_buffer_read(bo, 0, out, sizeof out), FA_OK);
    cr_assert_eq(fa_buffer_read(blse, 0, l, sizeof l), FA_OK);
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
        cr_assert_eq(out[i], 0.0f);
    for (size_t i = 0; i < sizeof l / sizeof l[0]; i++)
        cr_assert(isinf(l[i]) && l[i] < 0);
}

Test(validation, backward_with_no_queries_zeroes_key_gradients)
{
    fa_tensor q0 = q, o0 = o, l0 = lse, do0 = d_o, dq0 = d_q;
    q0.shape[1] = o0.shape[1] = l0.shape[1] = do0.shape[1] = dq0.shape[1] = 0;
    cr_assert_eq(fa_attention_backward(ctx, NULL, &q0, &k, &v, &o0, &do0, &l0, &dq0, &d_k, &d_v),
                 FA_OK, "%s", fa_context_last_error(ctx));
    float g[B * SK * HKV * D];
    cr_assert_eq(fa_buffer_read(bdk, 0, g, sizeof g), FA_OK);
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++)
        cr_assert_eq(g[i], 0.0f);
    cr_assert_eq(fa_buffer_read(bdv, 0, g, sizeof g), FA_OK);
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++)
        cr_assert_eq(g[i], 0.0f);
}

/* dQ, dK and dV packed as (batch, seq, 3, heads, dim) in one buffer, as qkv-packed training
 * code keeps them: accepted, and equal to the gradients written to separate buffers. */
Test(validation, interleaved_gradients_in_one_buffer)
{
    enum { S = 6, H = 2 };
    const size_t n = (size_t)B * S * H * D;
    fa_buffer *packed_in = NULL, *packed = NULL, *sep[3];
    float *host = malloc(n * 3 * 4);
    for (size_t i = 0; i < n * 3; i++)
        host[i] = 0.01f * (float)((i * 37) % 101) - 0.5f;
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = n * 12, .data = host}, &packed_in),
                 FA_OK);
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = n * 12}, &packed), FA_OK);
    fa_tensor in[3], grad[3], sep_grad[3];
    for (int i = 0; i < 3; i++) {
        in[i] = (fa_tensor){.buffer = packed_in,
                            .offset = (uint64_t)i * H * D * 4,
                            .dtype = FA_DTYPE_F32,
                            .shape = {B, S, H, D},
                            .stride = {S * 3 * H * D, 3 * H * D, D, 1}};
        grad[i] = in[i];
        grad[i].buffer = packed;
        cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = n * 4}, &sep[i]), FA_OK);
        sep_grad[i] = fa_tensor_bshd(sep[i], FA_DTYPE_F32, B, S, H, D);
    }
    fa_tensor o2 = fa_tensor_bshd(bo, FA_DTYPE_F32, B, S, H, D);
    fa_tensor do2 = fa_tensor_bshd(bdo, FA_DTYPE_F32, B, S, H, D);
    fa_tensor l2 = fa_tensor_lse(blse, B, H, S);
    cr_assert_eq(forward(&in[0], &in[1], &in[2], &o2, &l2), FA_OK, "%s",
                 fa_context_last_error(ctx));
    cr_assert_eq(fa_attention_backward(ctx, NULL, &in[0], &in[1], &in[2], &o2, &do2, &l2, &grad[0],
                                       &grad[1], &grad[2]),
                 FA_OK, "%s", fa_context_last_error(ctx));
    cr_assert_eq(fa_attention_backward(ctx, NULL, &in[0], &in[1], &in[2], &o2, &do2, &l2,
                                       &sep_grad[0], &sep_grad[1], &sep_grad[2]),
                 FA_OK);
    float *all = malloc(n * 12), *one = malloc(n * 4);
    cr_assert_eq(fa_buffer_read(packed, 0, all, n * 12), FA_OK);
    for (int g = 0; g < 3; g++) {
        cr_assert_eq(fa_buffer_read(sep[g], 0, one, n * 4), FA_OK);
        for (size_t row = 0; row < (size_t)B * S; row++)
            cr_assert_arr_eq(all + row * 3 * H * D + (size_t)g * H * D, one + row * H * D,
                             (size_t)H * D * 4, "gradient %d row %zu differs", g, row);
    }

    /* shifted by half a head, dK would share elements with dQ: refused */
    grad[1].offset = (uint64_t)H * D * 4 - 8 * 4;
    cr_assert_eq(fa_attention_backward(ctx, NULL, &in[0], &in[1], &in[2], &o2, &do2, &l2, &grad[0],
                                       &grad[1], &grad[2]),
                 FA_ERROR_INVALID_ARGUMENT);
    free(host), free(all), free(one);
}

/* FP8: e4m3 q, k, v (forward only) with o in f32, f16 or bf16 and descale factors of shape
 * (B or 1, 1, HKV or 1, 1); everything else is refused before anything is written. */
Test(validation, fp8)
{
    const fa_tensor q8 = fa_tensor_bshd(bq, FA_DTYPE_E4M3, B, SQ, HQ, D);
    const fa_tensor k8 = fa_tensor_bshd(bk, FA_DTYPE_E4M3, B, SK, HKV, D);
    const fa_tensor v8 = fa_tensor_bshd(bv, FA_DTYPE_E4M3, B, SK, HKV, D);
    const fa_tensor o8 = fa_tensor_bshd(bo, FA_DTYPE_E4M3, B, SQ, HQ, D);
    const fa_tensor o16 = fa_tensor_bshd(bo, FA_DTYPE_F16, B, SQ, HQ, D);
    EXPECT(forward(&q8, &k, &v8, &o16, &lse), FA_ERROR_DTYPE_MISMATCH);
    cr_assert(strstr(fa_context_last_error(ctx), "k.dtype is f32 but q.dtype is e4m3"));
    EXPECT(forward(&q8, &k8, &v8, &o8, &lse), FA_ERROR_DTYPE_MISMATCH);
    cr_assert(strstr(fa_context_last_error(ctx), "o.dtype is e4m3"));
    EXPECT(forward(&q, &k8, &v8, &o, &lse), FA_ERROR_DTYPE_MISMATCH);
    EXPECT(forward(&q8, &k8, &v8, &o16, &o8), FA_ERROR_DTYPE_MISMATCH); /* an e4m3 LSE */
    EXPECT(fa_attention_backward(ctx, NULL, &q8, &k8, &v8, &o16, &o16, &lse, &d_q, &d_k, &d_v),
           FA_ERROR_UNSUPPORTED_DTYPE);
    cr_assert(strstr(fa_context_last_error(ctx), "forward only"));

    float host[B * HKV + 1];
    for (int i = 0; i < B * HKV + 1; i++)
        host[i] = 0.5f + 0.25f * (float)i;
    fa_buffer *bs = NULL;
    cr_assert_eq(fa_buffer_create(ctx, &(fa_buffer_desc){.size = sizeof host, .data = host}, &bs),
                 FA_OK);
    const fa_tensor per_tensor = fa_tensor_bshd(bs, FA_DTYPE_F32, 1, 1, 1, 1);
    /* descale factors go with e4m3 inputs only, forward and backward alike */
    const fa_attention_desc not_fp8 = {.k_descale = &per_tensor};
    EXPECT(fa_attention_forward(ctx, &not_fp8, &q, &k, &v, &o, &lse), FA_ERROR_INVALID_ARGUMENT);
    cr_assert(strstr(fa_context_last_error(ctx), "k_descale"));
    EXPECT(fa_attention_backward(ctx, &not_fp8, &q, &k, &v, &o, &d_o, &lse, &d_q, &d_k, &d_v),
           FA_ERROR_INVALID_ARGUMENT);
    const struct {
        fa_tensor t;
        fa_status st;
        const char *says;
    } bad[] = {
        {fa_tensor_bshd(bs, FA_DTYPE_F16, 1, 1, 1, 1), FA_ERROR_DTYPE_MISMATCH, "f32"},
        {fa_tensor_bshd(bs, FA_DTYPE_F32, 1, 1, HQ, 1), FA_ERROR_SHAPE_MISMATCH, "descale"},
        {fa_tensor_bshd(bs, FA_DTYPE_F32, B + 1, 1, 1, 1), FA_ERROR_SHAPE_MISMATCH, "descale"},
        {fa_tensor_bshd(bs, FA_DTYPE_F32, 1, 2, 1, 1), FA_ERROR_SHAPE_MISMATCH, "descale"},
        {fa_tensor_bshd(bs, FA_DTYPE_F32, 1, 1, 1, 2), FA_ERROR_SHAPE_MISMATCH, "descale"},
        {fa_tensor_bshd(bs, FA_DTYPE_F32, 1, 1, 2 * B * HKV, 1), FA_ERROR_OUT_OF_BOUNDS, "descale"},
        {fa_tensor_bshd(NULL, FA_DTYPE_F32, 1, 1, 1, 1), FA_ERROR_NULL_POINTER, "descale"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        for (int which = 0; which < 3; which++) {
            const fa_attention_desc desc = {.q_descale = which == 0 ? &bad[i].t : NULL,
                                            .k_descale = which == 1 ? &bad[i].t : NULL,
                                            .v_descale = which == 2 ? &bad[i].t : NULL};
            EXPECT(fa_attention_forward(ctx, &desc, &q8, &k8, &v8, &o16, &lse), bad[i].st);
            cr_assert(strstr(fa_context_last_error(ctx), bad[i].says), "%zu/%d: %s", i, which,
                      fa_context_last_error(ctx));
        }
    /* a descale tensor is an input: the output on top of it is refused */
    const fa_tensor over = fa_tensor_bshd(bo, FA_DTYPE_F32, 1, 1, 1, 1);
    const fa_attention_desc on_o = {.v_descale = &over};
    EXPECT(fa_attention_forward(ctx, &on_o, &q8, &k8, &v8, &o16, &lse), FA_ERROR_INVALID_ARGUMENT);

    const fa_tensor good[] = {per_tensor, fa_tensor_bshd(bs, FA_DTYPE_F32, 1, 1, HKV, 1),
                              fa_tensor_bshd(bs, FA_DTYPE_F32, B, 1, HKV, 1)};
    const fa_dtype o_dtypes[3] = {FA_DTYPE_F32, FA_DTYPE_F16, FA_DTYPE_BF16};
    for (size_t i = 0; i < 3; i++) {
        const fa_attention_desc desc = {
            .q_descale = &good[i], .k_descale = &good[(i + 1) % 3], .v_descale = &good[i]};
        const fa_tensor oi = fa_tensor_bshd(bo, o_dtypes[i], B, SQ, HQ, D);
        cr_assert_eq(fa_attention_forward(ctx, &desc, &q8, &k8, &v8, &oi, &lse), FA_OK, "%zu: %s",
                     i, fa_context_last_error(ctx));
    }
    cr_assert_eq(forward(&q8, &k8, &v8, &o16, NULL), FA_OK, "no descale: factors of 1");
}
