// SPDX-License-Identifier: MIT
/* `run --append N`: a decoding step that writes its rows into the cache (fa_attention_desc.k_new,
 * v_new) and attends in one call; see cli_attn.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_attn.h"
#include "fa_testkit.h"

/* The seeds of the first contents of K and V (cli_attn_create), and of k_new and v_new. */
enum { SEED_K = 1, SEED_NEW = 5 };

fa_status cli_attn_append_init(cli_attn *a)
{
    const cli_attn_shape *s = &a->shape;
    if (a->with_grads || s->append > s->seq_k) {
        if (a->with_grads)
            snprintf(a->detail, sizeof a->detail, "an append takes forward calls, not --backward");
        else
            snprintf(a->detail, sizeof a->detail, "--append %lld is more than the %lld keys",
                     (long long)s->append, (long long)s->seq_k);
        return FA_ERROR_INVALID_ARGUMENT;
    }
    const size_t elem = fa_dtype_size(s->dtype);
    const size_t n = (size_t)(s->batch * s->append * s->heads_kv * s->head_dim);
    void *host = malloc(n * elem + 4);
    int32_t *lens = malloc((size_t)s->batch * sizeof *lens);
    fa_status st = host && lens ? FA_OK : FA_ERROR_OUT_OF_HOST_MEMORY;
    fa_buffer **bufs[2] = {&a->k_new, &a->v_new};
    for (int x = 0; x < 2 && st == FA_OK; x++) {
        fa_testkit_fill_random(host, s->dtype, n, a->seed + SEED_NEW + (uint64_t)x);
        st = fa_buffer_create(a->ctx, &(fa_buffer_desc){.size = n * elem + 4, .data = host},
                              bufs[x]);
    }
    for (int64_t b = 0; lens && b < s->batch; b++)
        lens[b] = (int32_t)(s->seq_k - s->append);
    if (st == FA_OK)
        st = fa_buffer_create(
            a->ctx, &(fa_buffer_desc){.size = (size_t)s->batch * sizeof *lens, .data = lens},
            &a->lens);
    if (st == FA_OK) {
        a->tk_new =
            fa_tensor_bshd(a->k_new, s->dtype, s->batch, s->append, s->heads_kv, s->head_dim);
        a->tv_new =
            fa_tensor_bshd(a->v_new, s->dtype, s->batch, s->append, s->heads_kv, s->head_dim);
        a->tlens = fa_tensor_bshd(a->lens, FA_DTYPE_I32, s->batch, 1, 1, 1);
        a->desc.k_new = &a->tk_new;
        a->desc.v_new = &a->tv_new;
        a->desc.seqlens_k = &a->tlens;
    } else if (st == FA_ERROR_OUT_OF_HOST_MEMORY) {
        snprintf(a->detail, sizeof a->detail, "cannot allocate the appended rows");
    }
    free(host);
    free(lens);
    return st;
}

bool cli_attn_appended(const cli_attn *a, int which, void *logical)
{
    const cli_attn_shape *s = &a->shape;
    const size_t elem = fa_dtype_size(s->dtype);
    const size_t row = (size_t)(s->heads_kv * s->head_dim) * elem;
    const size_t n_new = (size_t)(s->batch * s->append * s->heads_kv * s->head_dim);
    void *first = malloc(a->kv_elems * elem + 4), *rows = malloc(n_new * elem + 4);
    if (first && rows) {
        fa_testkit_fill_random(first, s->dtype, a->kv_elems, a->seed + SEED_K + (uint64_t)which);
        cli_attn_unpage(a, first, logical);
        fa_testkit_fill_random(rows, s->dtype, n_new, a->seed + SEED_NEW + (uint64_t)which);
        for (int64_t b = 0; b < s->batch; b++)
            memcpy((unsigned char *)logical + (size_t)(b * s->seq_k + s->seq_k - s->append) * row,
                   (const unsigned char *)rows + (size_t)(b * s->append) * row,
                   (size_t)s->append * row);
    }
    const bool ok = first && rows;
    free(first);
    free(rows);
    return ok;
}
