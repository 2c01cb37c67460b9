// SPDX-License-Identifier: MIT
/* fa_attention_merge on every backend available here: one attention computed whole and as parts
 * over disjoint key ranges, the merged parts equal to the whole; bad arguments named, outputs
 * untouched. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fa_testkit.h"
#include "flashattn.h"

enum { B = 2, SQ = 5, HQ = 4, HKV = 2, SK = 300, D = 64 };

typedef struct fixture {
    fa_context *ctx;
    fa_buffer *q, *k, *v, *o, *lse, *parts_o, *parts_lse;
    fa_tensor tq, to, tlse;
} fixture;

static size_t q_floats(void)
{
    return (size_t)B * SQ * HQ * D;
}

static void setup(fixture *f, fa_backend backend)
{
    fa_backend_info info;
    cr_assert_eq(fa_backend_query(backend, &info), FA_OK);
    if (!info.available)
        cr_skip_test("%s unavailable: %s", info.name, info.reason);
    cr_assert_eq(fa_context_create(&(fa_context_desc){.backend = backend}, &f->ctx), FA_OK, "%s",
                 fa_last_create_error());
    const size_t kv = (size_t)B * SK * HKV * D, lse = (size_t)B * SQ * HQ;
    float *host = malloc(kv * sizeof(float));
    cr_assert_not_null(host);
    fa_buffer_desc d = {.size = q_floats() * sizeof(float), .data = host};
    fa_testkit_fill_random(host, FA_DTYPE_F32, q_floats(), 1);
    cr_assert_eq(fa_buffer_create(f->ctx, &d, &f->q), FA_OK);
    d.size = kv * sizeof(float);
    fa_testkit_fill_random(host, FA_DTYPE_F32, kv, 2);
    cr_assert_eq(fa_buffer_create(f->ctx, &d, &f->k), FA_OK);
    fa_testkit_fill_random(host, FA_DTYPE_F32, kv, 3);
    cr_assert_eq(fa_buffer_create(f->ctx, &d, &f->v), FA_OK);
    free(host);
    cr_assert_eq(fa_buffer_create(f->ctx, &(fa_buffer_desc){.size = q_floats() * 4}, &f->o), FA_OK);
    cr_assert_eq(fa_buffer_create(f->ctx, &(fa_buffer_desc){.size = lse * 4}, &f->lse), FA_OK);
    cr_assert_eq(
        fa_buffer_create(f->ctx, &(fa_buffer_desc){.size = 3 * q_floats() * 4}, &f->parts_o),
        FA_OK);
    cr_assert_eq(fa_buffer_create(f->ctx, &(fa_buffer_desc){.size = 3 * lse * 4}, &f->parts_lse),
                 FA_OK);
    f->tq = fa_tensor_bshd(f->q, FA_DTYPE_F32, B, SQ, HQ, D);
    f->to = fa_tensor_bshd(f->o, FA_DTYPE_F32, B, SQ, HQ, D);
    f->tlse = fa_tensor_lse(f->lse, B, HQ, SQ);
}

/* Part i's O and LSE views: slot i of the parts' buffers. */
static void part_views(const fixture *f, int i, fa_tensor *o, fa_tensor *lse)
{
    *o = fa_tensor_bshd(f->parts_o, FA_DTYPE_F32, B, SQ, HQ, D);
    o->offset = (uint64_t)i * q_floats() * sizeof(float);
    *lse = fa_tensor_lse(f->parts_lse, B, HQ, SQ);
    lse->offset = (uint64_t)i * B * SQ * HQ * sizeof(float);
}

/* The forward over keys [k0, k1) into part slot i. */
static void attend_part(const fixture *f, int i, int64_t k0, int64_t k1)
{
    fa_tensor k = fa_tensor_bshd(f->k, FA_DTYPE_F32, B, k1 - k0, HKV, D);
    fa_tensor v = fa_tensor_bshd(f->v, FA_DTYPE_F32, B, k1 - k0, HKV, D);
    k.stride[0] = v.stride[0] = (int64_t)SK * HKV * D; /* views into the whole cache */
    k.stride[1] = v.stride[1] = HKV * D;
    k.stride[2] = v.stride[2] = D;
    k.stride[3] = v.stride[3] = 1;
    k.offset = v.offset = (uint64_t)k0 * HKV * D * sizeof(float);
    fa_tensor o, lse;
    part_views(f, i, &o, &lse);
    cr_assert_eq(fa_attention_forward(f->ctx, NULL, &f->tq, &k, &v, &o, &lse), FA_OK, "%s",
                 fa_context_last_error(f->ctx));
}

static struct criterion_test_params every_backend(void)
{
    static fa_backend all[] = {FA_BACKEND_CUDA, FA_BACKEND_VULKAN, FA_BACKEND_OPENCL,
                               FA_BACKEND_CPU};
    return cr_make_param_array(fa_backend, all, sizeof all / sizeof all[0]);
}

ParameterizedTestParameters(merge, parts_over_key_ranges_equal_the_whole)
{
    return every_backend();
}

ParameterizedTest(fa_backend *backend, merge, parts_over_key_ranges_equal_the_whole)
{
    fixture f;
    setup(&f, *backend);
    /* the whole, then three parts: 130 keys, none, 170 keys */
    attend_part(&f, 0, 0, SK);
    const size_t nq = q_floats(), nl = (size_t)B * SQ * HQ;
    float *whole = malloc(nq * 4), *whole_lse = malloc(nl * 4), *got = malloc(nq * 4);
    float *got_lse = malloc(nl * 4);
    cr_assert(whole && whole_lse && got && got_lse);
    cr_assert_eq(fa_buffer_read(f.parts_o, 0, whole, nq * 4), FA_OK);
    cr_assert_eq(fa_buffer_read(f.parts_lse, 0, whole_lse, nl * 4), FA_OK);
    attend_part(&f, 0, 0, 130);
    attend_part(&f, 1, 130, 130);
    attend_part(&f, 2, 130, SK);
    fa_tensor po[3], pl[3];
    for (int i = 0; i < 3; i++)
        part_views(&f, i, &po[i], &pl[i]);
    for (int n = 1; n <= 3; n += 2) { /* one part is itself; three make the whole */
        cr_assert_eq(fa_attention_merge(f.ctx, n, po, pl, &f.to, &f.tlse), FA_OK, "%s",
                     fa_context_last_error(f.ctx));
        cr_assert_eq(fa_buffer_read(f.o, 0, got, nq * 4), FA_OK);
        cr_assert_eq(fa_buffer_read(f.lse, 0, got_lse, nl * 4), FA_OK);
        float part0[1];
        cr_assert_eq(fa_buffer_read(f.parts_o, 0, part0, 4), FA_OK);
        if (n == 1) {
            cr_expect_eq(got[0], part0[0], "one part merges into itself");
            continue;
        }
        for (size_t i = 0; i < nq; i++)
            cr_assert(fabsf(got[i] - whole[i]) <= 1e-5f + 1e-4f * fabsf(whole[i]),
                      "O[%zu] %g, whole %g", i, got[i], whole[i]);
        for (size_t i = 0; i < nl; i++)
            cr_assert(fabsf(got_lse[i] - whole_lse[i]) <= 1e-4f * fabsf(whole_lse[i]) + 1e-5f,
                      "LSE[%zu] %g, whole %g", i, got_lse[i], whole_lse[i]);
    }
    free(whole);
    free(whole_lse);
    free(got);
    free(got_lse);
    fa_context_destroy(f.ctx);
}

Test(merge, bad_arguments_are_named_and_leave_the_outputs)
{
    fixture f;
    setup(&f, FA_BACKEND_CPU);
    fa_tensor po[2], pl[2];
    for (int i = 0; i < 2; i++)
        part_views(&f, i, &po[i], &pl[i]);
    const float poison = 7.0f;
    float *fill = malloc(q_floats() * 4);
    cr_assert_not_null(fill);
    for (size_t i = 0; i < q_floats(); i++)
        fill[i] = poison;
    cr_assert_eq(fa_buffer_write(f.o, 0, fill, q_floats() * 4), FA_OK);
    cr_expect_eq(fa_attention_merge(NULL, 2, po, pl, &f.to, NULL), FA_ERROR_NULL_POINTER);
    cr_expect_eq(fa_attention_merge(f.ctx, 0, po, pl, &f.to, NULL), FA_ERROR_INVALID_ARGUMENT);
    cr_expect_eq(fa_attention_merge(f.ctx, 257, po, pl, &f.to, NULL), FA_ERROR_INVALID_ARGUMENT);
    cr_expect_eq(fa_attention_merge(f.ctx, 2, NULL, pl, &f.to, NULL), FA_ERROR_NULL_POINTER);
    fa_tensor wrong = po[1];
    wrong.shape[FA_DIM_HEADS] = 2;
    fa_tensor mixed[2] = {po[0], wrong};
    cr_expect_eq(fa_attention_merge(f.ctx, 2, mixed, pl, &f.to, NULL), FA_ERROR_SHAPE_MISMATCH);
    mixed[1] = po[1];
    mixed[1].dtype = FA_DTYPE_F16;
    cr_expect_eq(fa_attention_merge(f.ctx, 2, mixed, pl, &f.to, NULL), FA_ERROR_DTYPE_MISMATCH);
    cr_expect_eq(fa_attention_merge(f.ctx, 2, po, pl, &po[1], NULL), FA_ERROR_INVALID_ARGUMENT,
                 "the output overlaps a part");
    cr_expect_str_not_empty(fa_context_last_error(f.ctx));
    cr_assert_eq(fa_buffer_read(f.o, 0, fill, q_floats() * 4), FA_OK);
    for (size_t i = 0; i < q_floats(); i++)
        cr_assert_eq(fill[i], poison, "O touched at %zu", i);
    free(fill);
    fa_context_destroy(f.ctx);
}
