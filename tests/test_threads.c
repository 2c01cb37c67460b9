// SPDX-License-Identifier: MIT
/* Separate contexts in separate threads: each gets the same answer as a lone run. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fa_testkit.h"

enum { B = 1, S = 200, H = 4, D = 64, THREADS = 4 };
#define N ((size_t)B * S * H * D)

typedef struct job {
    const uint16_t *q, *k, *v;
    uint16_t out[N];
    fa_status status;
} job;

static void *run_job(void *arg)
{
    job *j = arg;
    fa_context *ctx = NULL;
    j->status = fa_context_create(
        &(fa_context_desc){.backend = FA_BACKEND_CPU, .cpu = {.threads = 1}}, &ctx);
    if (j->status != FA_OK)
        return NULL;
    fa_buffer *b[4] = {0};
    const void *src[3] = {j->q, j->k, j->v};
    for (int i = 0; i < 4 && j->status == FA_OK; i++)
        j->status = fa_buffer_create(
            ctx, &(fa_buffer_desc){.size = N * 2, .data = i < 3 ? src[i] : NULL}, &b[i]);
    fa_tensor t[4];
    for (int i = 0; i < 4; i++)
        t[i] = fa_tensor_bshd(b[i], FA_DTYPE_BF16, B, S, H, D);
    if (j->status == FA_OK)
        j->status = fa_attention_forward(ctx, &(fa_attention_desc){.causal = true}, &t[0], &t[1],
                                         &t[2], &t[3], NULL);
    if (j->status == FA_OK)
        j->status = fa_buffer_read(b[3], 0, j->out, N * 2);
    fa_context_destroy(ctx);
    return NULL;
}

Test(threads, contexts_in_parallel_threads_agree_with_a_lone_run)
{
    static uint16_t q[N], k[N], v[N];
    fa_testkit_fill_random(q, FA_DTYPE_BF16, N, 1);
    fa_testkit_fill_random(k, FA_DTYPE_BF16, N, 2);
    fa_testkit_fill_random(v, FA_DTYPE_BF16, N, 3);
    static job lone, jobs[THREADS];
    lone = (job){.q = q, .k = k, .v = v};
    run_job(&lone);
    cr_assert_eq(lone.status, FA_OK);

    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (job){.q = q, .k = k, .v = v};
        cr_assert_eq(pthread_create(&threads[i], NULL, run_job, &jobs[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        cr_assert_eq(jobs[i].status, FA_OK, "thread %d: %s", i, fa_status_name(jobs[i].status));
        cr_assert_arr_eq(jobs[i].out, lone.out, sizeof lone.out, "thread %d differs", i);
    }
}
