// SPDX-License-Identifier: MIT
/* Context parallelism in miniature: one attention's keys split over two contexts (the CPU and
 * whichever backend AUTO picks, which may be the CPU again), each attending its half; the
 * second half's O and LSE are brought to the first context and fa_attention_merge combines the
 * halves. The result is compared with the same attention done in one call. Exit status 0 when
 * they agree. */
#include <flashattn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { B = 1, SQ = 4, HQ = 8, HKV = 2, SK = 1000, D = 64, HALF = 400 };

#define CHECK(call)                                                                                \
    do {                                                                                           \
        fa_status st_ = (call);                                                                    \
        if (st_ != FA_OK) {                                                                        \
            fprintf(stderr, "%s: %s\n", #call, fa_status_name(st_));                               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* A buffer of n floats in ctx, filled from host (or zeros). */
static fa_buffer *buffer(fa_context *ctx, size_t n, const float *host)
{
    fa_buffer *b;
    CHECK(fa_buffer_create(ctx, &(fa_buffer_desc){.size = n * sizeof(float), .data = host}, &b));
    return b;
}

/* O and LSE of the queries against keys [k0, k1) of the host K and V, computed in ctx, read back
 * into o and lse. */
static void attend(fa_context *ctx, const float *q, const float *k, const float *v, int k0, int k1,
                   float *o, float *lse)
{
    const size_t nq = (size_t)B * SQ * HQ * D, row = (size_t)HKV * D, nk = (size_t)(k1 - k0);
    fa_buffer *bq = buffer(ctx, nq, q), *bk = buffer(ctx, nk * row, k + (size_t)k0 * row);
    fa_buffer *bv = buffer(ctx, nk * row, v + (size_t)k0 * row);
    fa_buffer *bo = buffer(ctx, nq, NULL), *bl = buffer(ctx, (size_t)B * HQ * SQ, NULL);
    const fa_tensor tq = fa_tensor_bshd(bq, FA_DTYPE_F32, B, SQ, HQ, D);
    const fa_tensor tk = fa_tensor_bshd(bk, FA_DTYPE_F32, B, k1 - k0, HKV, D);
    const fa_tensor tv = fa_tensor_bshd(bv, FA_DTYPE_F32, B, k1 - k0, HKV, D);
    const fa_tensor to = fa_tensor_bshd(bo, FA_DTYPE_F32, B, SQ, HQ, D);
    const fa_tensor tl = fa_tensor_lse(bl, B, HQ, SQ);
    CHECK(fa_attention_forward(ctx, NULL, &tq, &tk, &tv, &to, &tl));
    CHECK(fa_buffer_read(bo, 0, o, nq * sizeof(float)));
    CHECK(fa_buffer_read(bl, 0, lse, (size_t)B * HQ * SQ * sizeof(float)));
    fa_buffer_destroy(bq);
    fa_buffer_destroy(bk);
    fa_buffer_destroy(bv);
    fa_buffer_destroy(bo);
    fa_buffer_destroy(bl);
}

int main(void)
{
    const size_t nq = (size_t)B * SQ * HQ * D, nk = (size_t)B * SK * HKV * D;
    const size_t nl = (size_t)B * HQ * SQ;
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4);
    float *parts_o = malloc(2 * nq * 4), *parts_lse = malloc(2 * nl * 4);
    float *whole = malloc(nq * 4), *whole_lse = malloc(nl * 4), *merged = malloc(nq * 4);
    if (!q || !k || !v || !parts_o || !parts_lse || !whole || !whole_lse || !merged)
        return 1;
    srand(1);
    for (size_t i = 0; i < nq; i++)
        q[i] = (float)rand() / RAND_MAX - 0.5f;
    for (size_t i = 0; i < nk; i++) {
        k[i] = (float)rand() / RAND_MAX - 0.5f;
        v[i] = (float)rand() / RAND_MAX - 0.5f;
    }

    fa_context *first, *second;
    CHECK(fa_context_create(&(fa_context_desc){.backend = FA_BACKEND_CPU}, &first));
    CHECK(fa_context_create(&(fa_context_desc){0}, &second));
    fa_device_info a, b;
    CHECK(fa_context_device(first, &a));
    CHECK(fa_context_device(second, &b));
    printf("keys [0, %d) on %s (%s), [%d, %d) on %s (%s)\n", HALF, fa_backend_name(a.backend),
           a.name, HALF, SK, fa_backend_name(b.backend), b.name);

    attend(first, q, k, v, 0, HALF, parts_o, parts_lse);
    attend(second, q, k, v, HALF, SK, parts_o + nq, parts_lse + nl);
    attend(first, q, k, v, 0, SK, whole, whole_lse);

    /* Both halves in the first context, then merged there. */
    fa_buffer *po = buffer(first, 2 * nq, parts_o), *pl = buffer(first, 2 * nl, parts_lse);
    fa_buffer *bo = buffer(first, nq, NULL);
    fa_tensor o_parts[2], lse_parts[2];
    for (int i = 0; i < 2; i++) {
        o_parts[i] = fa_tensor_bshd(po, FA_DTYPE_F32, B, SQ, HQ, D);
        o_parts[i].offset = (uint64_t)i * nq * sizeof(float);
        lse_parts[i] = fa_tensor_lse(pl, B, HQ, SQ);
        lse_parts[i].offset = (uint64_t)i * nl * sizeof(float);
    }
    const fa_tensor o = fa_tensor_bshd(bo, FA_DTYPE_F32, B, SQ, HQ, D);
    CHECK(fa_attention_merge(first, 2, o_parts, lse_parts, &o, NULL));
    CHECK(fa_buffer_read(bo, 0, merged, nq * sizeof(float)));

    double worst = 0.0;
    for (size_t i = 0; i < nq; i++)
        worst = fmax(worst, fabs((double)merged[i] - whole[i]));
    printf("merged halves vs one call: max |difference| %.3g\n", worst);
    fa_context_destroy(first);
    fa_context_destroy(second);
    free(q);
    free(k);
    free(v);
    free(parts_o);
    free(parts_lse);
    free(whole);
    free(whole_lse);
    free(merged);
    return worst <= 1e-5 ? 0 : 1;
}
