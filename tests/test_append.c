// SPDX-License-Identifier: MIT
/* The KV-cache append (fa_attention_desc.k_new, v_new) on every backend available here: the new
 * rows land at each sequence's length, in a contiguous cache of either layout or through a block
 * table, every other byte of k and v stays as it was, seqlens_k is left alone, and the attention
 * is the one over the cache after the append. Bad input: test_validation.c. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>

#include "fa_testkit.h"
#include "flashattn.h"
#include "test_support.h"

/* A cache of CAP keys per sequence; paged: MAXP pages of PS keys each, over NP pages. */
enum { B = 3, CAP = 12, HQ = 4, HKV = 2, D = 16, PS = 3, MAXP = CAP / PS, NP = B * MAXP + 2 };

typedef enum cache_kind { BSHD, BHSD, PAGED } cache_kind;

typedef struct append_case {
    cache_kind kind;
    int64_t s_new, s_q;
    bool strided_new; /* k_new and v_new as views whose head rows are not adjacent */
} append_case;

static fa_context *open_backend(fa_backend backend)
{
    fa_backend_info info;
    fa_context *ctx = test_context(backend, &info);
    if (!ctx)
        cr_skip_test("%s unavailable: %s", info.name, info.reason);
    return ctx;
}

static void *read_all(fa_buffer *buf)
{
    void *host = malloc(fa_buffer_size(buf));
    cr_assert_eq(fa_buffer_read(buf, 0, host, fa_buffer_size(buf)), FA_OK);
    return host;
}

/* The element of the cache that holds head h of key pos of sequence b. */
static size_t cache_at(cache_kind kind, const int32_t *table, int64_t b, int64_t pos, int64_t h)
{
    if (kind == PAGED)
        return (size_t)(((table[b * MAXP + pos / PS] * PS + pos % PS) * HKV + h) * D);
    if (kind == BHSD)
        return (size_t)(((b * HKV + h) * CAP + pos) * D);
    return (size_t)(((b * CAP + pos) * HKV + h) * D);
}

static fa_tensor cache_tensor(cache_kind kind, fa_buffer *buf)
{
    if (kind == PAGED)
        return fa_tensor_bshd(buf, FA_DTYPE_F32, NP, PS, HKV, D);
    if (kind == BHSD)
        return fa_tensor_bhsd(buf, FA_DTYPE_F32, B, CAP, HKV, D);
    return fa_tensor_bshd(buf, FA_DTYPE_F32, B, CAP, HKV, D);
}

/* k_new or v_new: packed, or each head row D elements into a 2D-element slot. */
static fa_tensor new_tensor(const append_case *c, fa_buffer *buf)
{
    fa_tensor t = fa_tensor_bshd(buf, FA_DTYPE_F32, B, c->s_new, HKV, D);
    if (c->strided_new) {
        const int64_t stride[4] = {c->s_new * HKV * 2 * D, HKV * 2 * D, 2 * D, 1};
        memcpy(t.stride, stride, sizeof stride);
    }
    return t;
}

static void run_case(fa_backend backend, const append_case *c)
{
    fa_context *ctx = open_backend(backend);
    const int32_t lens[B] = {0, 5, (int32_t)(CAP - c->s_new)};
    int32_t after[B], table[B * MAXP];
    for (int b = 0; b < B; b++)
        after[b] = lens[b] + (int32_t)c->s_new;
    /* pages in reverse, the last two spare; entries past a sequence's new length are -1 */
    for (int i = 0; i < B * MAXP; i++)
        table[i] = i % MAXP * PS < after[i / MAXP] ? NP - 3 - i : -1;
    const size_t n_cache = (size_t)(c->kind == PAGED ? NP * PS : B * CAP) * HKV * D;
    const size_t n_new = (size_t)(B * c->s_new * HKV * D) * (c->strided_new ? 2 : 1);
    const size_t n_q = (size_t)(B * c->s_q * HQ * D);
    float *k0 = malloc(n_cache * 4), *v0 = malloc(n_cache * 4);
    float *kn = malloc(n_new * 4 + 4), *vn = malloc(n_new * 4 + 4), *q = malloc(n_q * 4 + 4);
    fa_testkit_fill_random(k0, FA_DTYPE_F32, n_cache, 1);
    fa_testkit_fill_random(v0, FA_DTYPE_F32, n_cache, 2);
    fa_testkit_fill_random(kn, FA_DTYPE_F32, n_new, 3);
    fa_testkit_fill_random(vn, FA_DTYPE_F32, n_new, 4);
    fa_testkit_fill_random(q, FA_DTYPE_F32, n_q, 5);

    fa_buffer *bk = test_buffer(ctx, k0, n_cache * 4), *bv = test_buffer(ctx, v0, n_cache * 4);
    fa_buffer *bkn = test_buffer(ctx, kn, n_new * 4 + 4),
              *bvn = test_buffer(ctx, vn, n_new * 4 + 4);
    fa_buffer *bq = test_buffer(ctx, q, n_q * 4 + 4), *bo = test_buffer(ctx, NULL, n_q * 4 + 4);
    fa_buffer *bl = test_buffer(ctx, NULL, (size_t)(B * c->s_q) * HQ * 4 + 4);
    fa_buffer *blens = test_buffer(ctx, lens, sizeof lens),
              *bafter = test_buffer(ctx, after, sizeof after);
    fa_buffer *btable = test_buffer(ctx, table, sizeof table);
    const fa_tensor tk = cache_tensor(c->kind, bk), tv = cache_tensor(c->kind, bv);
    const fa_tensor tkn = new_tensor(c, bkn), tvn = new_tensor(c, bvn);
    const fa_tensor tq = fa_tensor_bshd(bq, FA_DTYPE_F32, B, c->s_q, HQ, D);
    const fa_tensor to = fa_tensor_bshd(bo, FA_DTYPE_F32, B, c->s_q, HQ, D);
    const fa_tensor tl = fa_tensor_lse(bl, B, HQ, c->s_q);
    const fa_tensor tlens = fa_tensor_bshd(blens, FA_DTYPE_I32, B, 1, 1, 1);
    const fa_tensor tafter = fa_tensor_bshd(bafter, FA_DTYPE_I32, B, 1, 1, 1);
    const fa_tensor ttable = fa_tensor_bshd(btable, FA_DTYPE_I32, B, MAXP, 1, 1);
    fa_attention_desc desc = {.causal = true,
                              .seqlens_k = &tlens,
                              .block_table = c->kind == PAGED ? &ttable : NULL,
                              .k_new = &tkn,
                              .v_new = &tvn};
    fa_status st = fa_attention_forward(ctx, &desc, &tq, &tk, &tv, &to, &tl);
    if (st <= FA_ERROR_UNSUPPORTED && st > FA_ERROR_UNSUPPORTED - 10)
        cr_skip_test("%s: %s", fa_status_name(st), fa_context_last_error(ctx));
    cr_assert_eq(st, FA_OK, "%s: %s", fa_status_name(st), fa_context_last_error(ctx));

    /* the cache: the new rows at each length, every other element as it was */
    float *k1 = read_all(bk), *v1 = read_all(bv);
    const int64_t slot = c->strided_new ? 2 * D : D;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < c->s_new; i++)
            for (int64_t h = 0; h < HKV; h++) {
                const size_t to_at = cache_at(c->kind, table, b, lens[b] + i, h);
                const size_t from = (size_t)(((b * c->s_new + i) * HKV + h) * slot);
                memcpy(k0 + to_at, kn + from, D * 4);
                memcpy(v0 + to_at, vn + from, D * 4);
            }
    cr_assert_arr_eq(k1, k0, n_cache * 4, "k is not the cache after the append");
    cr_assert_arr_eq(v1, v0, n_cache * 4, "v is not the cache after the append");
    int32_t lens_now[B];
    cr_assert_eq(fa_buffer_read(blens, 0, lens_now, sizeof lens_now), FA_OK);
    cr_assert_arr_eq(lens_now, lens, sizeof lens, "seqlens_k changed");

    /* the same attention without the append, over the lengths after it: the same bits */
    float *o1 = read_all(bo), *l1 = read_all(bl);
    desc.seqlens_k = &tafter;
    desc.k_new = desc.v_new = NULL;
    st = fa_attention_forward(ctx, &desc, &tq, &tk, &tv, &to, &tl);
    cr_assert_eq(st, FA_OK, "%s: %s", fa_status_name(st), fa_context_last_error(ctx));
    float *o2 = read_all(bo), *l2 = read_all(bl);
    cr_assert_arr_eq(o1, o2, n_q * 4, "O differs from the attention over the appended cache");
    cr_assert_arr_eq(l1, l2, (size_t)(B * c->s_q * HQ) * 4, "LSE differs");
    free(k0), free(v0), free(kn), free(vn), free(q), free(k1), free(v1);
    free(o1), free(l1), free(o2), free(l2);
    fa_context_destroy(ctx);
}

static struct criterion_test_params every_backend(void)
{
    static fa_backend all[] = {FA_BACKEND_CUDA, FA_BACKEND_VULKAN, FA_BACKEND_OPENCL,
                               FA_BACKEND_CPU};
    return cr_make_param_array(fa_backend, all, sizeof all / sizeof all[0]);
}

ParameterizedTestParameters(append, one_decode_step_into_a_bshd_cache)
{
    return every_backend();
}
ParameterizedTest(fa_backend *backend, append, one_decode_step_into_a_bshd_cache)
{
    run_case(*backend, &(append_case){BSHD, 1, 1, false});
}

ParameterizedTestParameters(append, strided_rows_into_a_bhsd_cache)
{
    return every_backend();
}
ParameterizedTest(fa_backend *backend, append, strided_rows_into_a_bhsd_cache)
{
    run_case(*backend, &(append_case){BHSD, 4, 4, true});
}

ParameterizedTestParameters(append, rows_across_pages_through_a_block_table)
{
    return every_backend();
}
ParameterizedTest(fa_backend *backend, append, rows_across_pages_through_a_block_table)
{
    run_case(*backend, &(append_case){PAGED, 4, 2, false});
}

ParameterizedTestParameters(append, no_new_rows_write_nothing)
{
    return every_backend();
}
ParameterizedTest(fa_backend *backend, append, no_new_rows_write_nothing)
{
    run_case(*backend, &(append_case){BSHD, 0, 1, false});
}

/* No query: nothing to attend to, and the rows are written all the same. */
ParameterizedTestParameters(append, rows_are_written_without_queries)
{
    return every_backend();
}
ParameterizedTest(fa_backend *backend, append, rows_are_written_without_queries)
{
    run_case(*backend, &(append_case){PAGED, 2, 0, true});
}
