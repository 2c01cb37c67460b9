// SPDX-License-Identifier: MIT
/* Forward attention on the CPU: FlashAttention's tiled online softmax.
 *
 * OpenMP threads share out (batch, query head, 128-query tile) work items, longest first when
 * causal. A thread keeps its query tile transposed and pre-scaled by scale * log2(e)
 * (Q^T, D x 128) and an f32 accumulator O (128 x D) in its scratch, then streams the head's
 * 64-key K and V tiles: S^T = K Q^T (keys x queries, log2 units), masked on the diagonal when
 * causal, an online softmax step per query column (running max and sum, P = exp2(S - max)), and O =
 * alpha O + P V. Keys past the diagonal are never loaded. At the end O / sum is rounded to the
 * dtype and LSE = (max + log2 sum) ln 2. Extra memory: one slice per thread (Q^T, O, K, V, S^T: 224
 * KiB at head_dim 128). Working on S^T (keys x queries) lets the softmax vectorize across queries
 * and lets K and V be used as loaded, untransposed; P V reads P^T in place. */
#include <math.h>
#include <omp.h>

#include "cpu_backend.h"
#include "cpu_tiles.h"

#define FA_LOG2E 1.4426950408889634f
#define FA_LN2 0.6931471805599453f

enum { BQ = FA_CPU_TILE_Q, BK = FA_CPU_TILE_K };

/* One thread's scratch for one query tile. */
typedef struct forward_scratch {
    float *q_t;                 /* D x BQ: Q^T, scaled */
    float *k;                   /* BK x D */
    float *v;                   /* BK x Dp, padded columns zero */
    float *s;                   /* BK x BQ: S^T, then P^T */
    float *o;                   /* BQ x Dp accumulator */
    float *m, *l, *alpha, *row; /* BQ, BQ, BQ, Dp */
} forward_scratch;

/* Lays out one thread's scratch in `slice` and returns it; with slice NULL only its size in
 * floats (*floats), which fa_cpu_scratch_alloc then reserves per thread. */
static forward_scratch forward_scratch_carve(float *slice, int64_t dim, size_t *floats)
{
    const int64_t dp = fa_cpu_round_up(dim, FA_CPU_PAD);
    fa_cpu_carver c = {slice, 0};
    forward_scratch w;
    w.q_t = fa_cpu_carve(&c, dim * BQ);
    w.k = fa_cpu_carve(&c, BK * dim);
    w.v = fa_cpu_carve(&c, BK * dp);
    w.s = fa_cpu_carve(&c, BK * BQ);
    w.o = fa_cpu_carve(&c, BQ * dp);
    w.m = fa_cpu_carve(&c, BQ);
    w.l = fa_cpu_carve(&c, BQ);
    w.alpha = fa_cpu_carve(&c, BQ);
    w.row = fa_cpu_carve(&c, dp);
    if (floats)
        *floats = c.used;
    return w;
}

/* Sets S^T[j][i] = -inf where key k0 + j is after query q0 + i's diagonal (off = Sk - Sq). */
static void mask_causal_cols(float *s_t, int nk, int nq, int64_t k0, int64_t q0, int64_t off)
{
    for (int j = 0; j < nk; j++) {
        int64_t first_visible = k0 + j - q0 - off; /* queries i >= this see key j */
        int end = first_visible < 0 ? 0 : first_visible > nq ? nq : (int)first_visible;
        for (int i = 0; i < end; i++)
            s_t[j * BQ + i] = -INFINITY;
    }
}

static void forward_tile(const fa_cpu_kernels *kern, const fa_attention_call *c, forward_scratch *w,
                         int64_t b, int64_t h, int64_t q0)
{
    const int dim = (int)c->head_dim;
    const int64_t dp = fa_cpu_round_up(dim, FA_CPU_PAD);
    const int nq = (int)(c->seq_q - q0 < BQ ? c->seq_q - q0 : BQ);
    const int64_t hk = h / (c->heads_q / c->heads_kv);
    const int64_t off = c->seq_k - c->seq_q;

    fa_cpu_tile qt = {&c->q, c->dtype, b, q0, h, nq, dim};
    fa_cpu_load_cols(kern, &qt, c->scale * FA_LOG2E, w->q_t, BQ, w->row);
    for (int i = 0; i < nq; i++) {
        w->m[i] = -INFINITY;
        w->l[i] = 0.0f;
    }
    for (int64_t i = 0; i < nq * dp; i++)
        w->o[i] = 0.0f;

    /* keys this tile's last query can see: j < q0 + nq + off when causal */
    int64_t k_end = c->seq_k;
    if (c->causal && q0 + nq + off < k_end)
        k_end = q0 + nq + off < 0 ? 0 : q0 + nq + off;
    const int n_pad = (int)fa_cpu_round_up(nq, FA_CPU_PAD);

    for (int64_t k0 = 0; k0 < k_end; k0 += BK) {
        const int nk = (int)(k_end - k0 < BK ? k_end - k0 : BK);
        fa_cpu_tile kt = {&c->k, c->dtype, b, k0, hk, nk, dim};
        fa_cpu_tile vt = {&c->v, c->dtype, b, k0, hk, nk, dim};
        fa_cpu_load_rows(kern, &kt, 1.0f, w->k, dim);
        fa_cpu_load_rows(kern, &vt, 1.0f, w->v, dp);

        kern->gemm(nk, n_pad, dim, w->k, dim, 1, w->q_t, BQ, w->s, BQ, FA_CPU_GEMM_SET, NULL);
        if (c->causal && k0 + nk - 1 > q0 + off)
            mask_causal_cols(w->s, nk, nq, k0, q0, off);
        kern->softmax_cols(w->s, nk, nq, BQ, w->m, w->l, w->alpha);
        /* O = alpha O + P V, reading P = (P^T)^T in place */
        kern->gemm(nq, (int)dp, nk, w->s, 1, BQ, w->v, dp, w->o, dp, FA_CPU_GEMM_RESCALE_ADD,
                   w->alpha);
    }

    fa_cpu_tile ot = {&c->o, c->dtype, b, q0, h, nq, dim};
    fa_cpu_store_rows_div(&ot, w->o, dp, w->l, w->row);
    if (c->has_lse) {
        float *lse = c->lse.buffer;
        for (int i = 0; i < nq; i++) {
            float v = w->l[i] > 0.0f ? (w->m[i] + log2f(w->l[i])) * FA_LN2 : -INFINITY;
            lse[fa_cpu_index(&c->lse, b, q0 + i, h)] = v;
        }
    }
}

fa_status fa_cpu_forward(fa_context *ctx, const fa_attention_call *call)
{
    const fa_cpu_kernels *kern = fa_cpu_kernels_select();
    const int threads = fa_cpu_threads(ctx);
    size_t slice_floats;
    forward_scratch_carve(NULL, call->head_dim, &slice_floats);
    fa_cpu_scratch scratch;
    fa_status st = fa_cpu_scratch_alloc(ctx, &scratch, threads, slice_floats, 0, "forward");
    if (st != FA_OK)
        return st;

    const int64_t q_tiles = (call->seq_q + BQ - 1) / BQ;
    const int64_t items = call->batch * call->heads_q * q_tiles;
#pragma omp parallel num_threads(threads)
    {
        forward_scratch w = forward_scratch_carve(
            fa_cpu_scratch_slice(&scratch, omp_get_thread_num()), call->head_dim, NULL);
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < items; t++) {
            /* last query tiles first: under a causal mask they are the longest */
            int64_t qt = q_tiles - 1 - t % q_tiles;
            int64_t bh = t / q_tiles;
            forward_tile(kern, call, &w, bh / call->heads_q, bh % call->heads_q, qt * BQ);
        }
    }
    fa_cpu_scratch_free(ctx, &scratch);
    return FA_OK;
}
