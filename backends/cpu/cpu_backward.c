// SPDX-License-Identifier: MIT
/* Backward attention on the CPU, FlashAttention-2 style: scores are recomputed from Q, K and the
 * forward's LSE, every gradient element is written by exactly one thread (no atomics, results
 * independent of the thread count), and extra memory is one slice per thread plus Delta.
 *
 *  1. Delta[b][h][i] = sum_d dO * O (f32).
 *  2. dK, dV: work items are (batch, KV head, key tile of FA_CPU_TILE_K = 64). A thread holds
 *     K^T and V^T for its keys and the dK, dV accumulators, and walks every query head of the
 *     GQA group and every query tile that can see the keys: S = Q K^T scale log2 e (scaled
 *     after the product, or softcapped, plus ALiBi and the bias, as in the forward: cpu_mask.h),
 *     P = exp2(S - LSE log2 e), dV += P^T dO, dP = dO V^T, dS = P (dP - Delta) (times the softcap's
 * 1 - tanh^2), dK += dS^T Q; finally dK *= scale.
 *  3. dQ: work items are (batch, query head, query tile of FA_CPU_TILE_Q = 128). A thread
 *     holds Q^T and dO^T and walks the key tiles its rows see: S^T = K Q^T, P^T,
 *     dP^T = V dO^T, dS^T, dQ += dS K; finally dQ *= scale.
 * dQ is the pass that recomputes S and dP a second time: 7 tile GEMMs per (query, key) tile
 * pair where the forward has 2, the price of needing neither atomics nor O(Sq x D) partials.
 * Every GEMM reads its A operand by broadcasts, so P and dS are used transposed in place and
 * only the tiles held for a whole work item (K^T, V^T or Q^T, dO^T) are ever transposed.
 * Rows with LSE = -inf (no visible key) get a +inf bias, so their P and gradients are 0. */
#include <math.h>
#include <omp.h>

#include "cpu_backend.h"
#include "cpu_mask.h"
#include "cpu_tiles.h"

#define FA_LOG2E 1.4426950408889634f

enum { BQ = FA_CPU_TILE_Q, BK = FA_CPU_TILE_K, BMAX = BQ > BK ? BQ : BK };

typedef struct backward_scratch {
    float *a_t, *b_t;    /* D x B*: K^T, V^T (dK/dV pass) or Q^T, dO^T (dQ pass) */
    float *x, *y;        /* B* x Dp rows: Q, dO (dK/dV pass) or K, V (dQ pass) */
    float *s, *dp;       /* BQ x BK scores / probabilities, dP / dS */
    float *acc1, *acc2;  /* dK, dV (BK x Dp) or dQ (BQ x Dp) */
    float *lse2, *delta; /* per query: LSE log2 e (+inf if none), Delta */
    float *zeros, *row;  /* BMAX zeros, Dp staging */
    float *dcap;         /* BQ x BK: the softcap's 1 - tanh^2 of each score, laid out as s */
} backward_scratch;

/* Lays out one thread's scratch in `slice` and returns it; with slice NULL only its size in
 * floats (*floats), which fa_cpu_scratch_alloc then reserves per thread. */
static backward_scratch backward_scratch_carve(float *slice, int64_t dim, size_t *floats)
{
    const int64_t dp = fa_cpu_round_up(dim, FA_CPU_PAD);
    fa_cpu_carver c = {slice, 0};
    backward_scratch w;
    w.a_t = fa_cpu_carve(&c, dim * BMAX);
    w.b_t = fa_cpu_carve(&c, dim * BMAX);
    w.x = fa_cpu_carve(&c, BMAX * dp);
    w.y = fa_cpu_carve(&c, BMAX * dp);
    w.s = fa_cpu_carve(&c, BQ * BK);
    w.dp = fa_cpu_carve(&c, BQ * BK);
    w.acc1 = fa_cpu_carve(&c, BMAX * dp);
    w.acc2 = fa_cpu_carve(&c, BMAX * dp);
    w.lse2 = fa_cpu_carve(&c, BMAX);
    w.delta = fa_cpu_carve(&c, BMAX);
    w.zeros = fa_cpu_carve(&c, BMAX);
    w.row = fa_cpu_carve(&c, dp);
    w.dcap = fa_cpu_carve(&c, BQ * BK);
    if (floats)
        *floats = c.used;
    return w;
}

static void delta_row(const fa_cpu_kernels *kern, const fa_attention_call *c, backward_scratch *w,
                      float *delta, int64_t b, int64_t h, int64_t i)
{
    const int dim = (int)c->head_dim;
    fa_cpu_tile ot = fa_cpu_tile_at(&c->o, c->dtype, b, i, h, 1, dim);
    fa_cpu_tile dot = fa_cpu_tile_at(&c->d_o, c->dtype, b, i, h, 1, dim);
    fa_cpu_load_rows(kern, &ot, 1.0f, w->x, 0);
    fa_cpu_load_rows(kern, &dot, 1.0f, w->y, 0);
    float sum = 0.0f;
    for (int d = 0; d < dim; d++)
        sum += w->x[d] * w->y[d];
    delta[(b * c->heads_q + h) * c->seq_q + i] = sum;
}

/* Per-query LSE in log2 units (+inf where no key is visible) and Delta of one query tile. */
static void load_row_stats(const fa_attention_call *c, const float *delta, backward_scratch *w,
                           int64_t b, int64_t h, int64_t q0, int nq)
{
    const float *lse = c->lse.buffer;
    for (int i = 0; i < nq; i++) {
        float v = lse[fa_cpu_index(&c->lse, b, q0 + i, h)];
        /* NaN from the limit on (flashattn.h: the f32 LSE no longer resolves P there) */
        w->lse2[i] = v == -INFINITY                     ? INFINITY
                     : fabsf(v) < FA_BACKWARD_LSE_LIMIT ? v * FA_LOG2E
                                                        : NAN;
        w->delta[i] = delta[(b * c->heads_q + h) * c->seq_q + q0 + i];
    }
}

static void dkdv_tile(const fa_cpu_kernels *kern, const fa_attention_call *c, backward_scratch *w,
                      const float *delta, int64_t b, int64_t hk, int64_t k0)
{
    const int dim = (int)c->head_dim;
    const int64_t dp = fa_cpu_round_up(dim, FA_CPU_PAD);
    const int nk = (int)(c->seq_k - k0 < BK ? c->seq_k - k0 : BK);
    const int n_pad = (int)fa_cpu_round_up(nk, FA_CPU_PAD);
    const int64_t group = c->heads_q / c->heads_kv;
    const int64_t off = c->seq_k - c->seq_q;

    fa_cpu_tile kt = fa_cpu_tile_at(&c->k, c->dtype, b, k0, hk, nk, dim);
    fa_cpu_tile vt = fa_cpu_tile_at(&c->v, c->dtype, b, k0, hk, nk, dim);
    fa_cpu_load_cols(kern, &kt, 1.0f, w->a_t, BK, w->row);
    fa_cpu_load_cols(kern, &vt, 1.0f, w->b_t, BK, w->row);
    for (int64_t i = 0; i < nk * dp; i++) {
        w->acc1[i] = 0.0f;
        w->acc2[i] = 0.0f;
    }

    /* the queries that see a key of the tile: i >= k0 - off - right and i <= k0 + nk - 1 - off +
     * left, where those bounds are set (causal: right = 0) */
    const fa_cpu_mask mask = fa_cpu_mask_of(c);
    const int64_t q_first = mask.right >= 0 ? k0 - off - mask.right : 0;
    const int64_t q_begin = q_first > 0 ? q_first / BQ * BQ : 0;
    int64_t q_end = mask.left >= 0 ? k0 + nk - off + mask.left : c->seq_q;
    q_end = q_end < c->seq_q ? q_end : c->seq_q;
    for (int64_t h = hk * group; h < (hk + 1) * group; h++) {
        for (int64_t q0 = q_begin; q0 < q_end; q0 += BQ) {
            const int nq = (int)(q_end - q0 < BQ ? q_end - q0 : BQ);
            fa_cpu_tile qt = fa_cpu_tile_at(&c->q, c->dtype, b, q0, h, nq, dim);
            fa_cpu_tile dot = fa_cpu_tile_at(&c->d_o, c->dtype, b, q0, h, nq, dim);
            fa_cpu_load_rows(kern, &qt, 1.0f, w->x, dp);
            fa_cpu_load_rows(kern, &dot, 1.0f, w->y, dp);
            load_row_stats(c, delta, w, b, h, q0, nq);

            /* S = Q K^T (queries x keys), masked outside each query's keys, then P */
            kern->gemm(nq, n_pad, dim, w->x, dp, 1, w->a_t, BK, w->s, BK, FA_CPU_GEMM_SET, NULL);
            fa_cpu_scores(kern, c, w->s, nq, nk, BK, w->dcap);
            for (int i = 0; (c->has_alibi || c->has_bias) && i < nq; i++)
                fa_cpu_row_terms(c, b, q0 + i, h, off, k0, nk, w->s + i * BK, 1);
            if (fa_cpu_mask_cuts(&mask, q0 + off, q0 + nq - 1 + off, k0, nk))
                for (int i = 0; i < nq; i++)
                    fa_cpu_mask_row(&mask, q0 + i + off, k0, nk, w->s + i * BK, 1);
            kern->exp2_sub(w->s, nq, nk, BK, w->lse2, w->zeros);
            /* dV += P^T dO */
            kern->gemm(nk, (int)dp, nq, w->s, 1, BK, w->y, dp, w->acc2, dp, FA_CPU_GEMM_ADD, NULL);
            /* dP = dO V^T, dS = P (dP - Delta), dK += dS^T Q */
            kern->gemm(nq, n_pad, dim, w->y, dp, 1, w->b_t, BK, w->dp, BK, FA_CPU_GEMM_SET, NULL);
            kern->grad_scores(w->s, w->dp, nq, nk, BK, w->delta, w->zeros);
            if (c->softcap > 0.0f)
                fa_cpu_softcap_grad(w->dp, w->dcap, nq, nk, BK);
            kern->gemm(nk, (int)dp, nq, w->dp, 1, BK, w->x, dp, w->acc1, dp, FA_CPU_GEMM_ADD, NULL);
        }
    }
    fa_cpu_tile dkt = fa_cpu_tile_at(&c->d_k, c->dtype, b, k0, hk, nk, dim);
    fa_cpu_tile dvt = fa_cpu_tile_at(&c->d_v, c->dtype, b, k0, hk, nk, dim);
    fa_cpu_store_rows(&dkt, w->acc1, dp, c->scale, w->row);
    fa_cpu_store_rows(&dvt, w->acc2, dp, 1.0f, w->row);
}

static void dq_tile(const fa_cpu_kernels *kern, const fa_attention_call *c, backward_scratch *w,
                    const float *delta, int64_t b, int64_t h, int64_t q0)
{
    const int dim = (int)c->head_dim;
    const int64_t dp = fa_cpu_round_up(dim, FA_CPU_PAD);
    const int nq = (int)(c->seq_q - q0 < BQ ? c->seq_q - q0 : BQ);
    const int n_pad = (int)fa_cpu_round_up(nq, FA_CPU_PAD);
    const int64_t hk = h / (c->heads_q / c->heads_kv);
    const int64_t off = c->seq_k - c->seq_q;

    fa_cpu_tile qt = fa_cpu_tile_at(&c->q, c->dtype, b, q0, h, nq, dim);
    fa_cpu_tile dot = fa_cpu_tile_at(&c->d_o, c->dtype, b, q0, h, nq, dim);
    fa_cpu_load_cols(kern, &qt, 1.0f, w->a_t, BQ, w->row);
    fa_cpu_load_cols(kern, &dot, 1.0f, w->b_t, BQ, w->row);
    load_row_stats(c, delta, w, b, h, q0, nq);
    for (int64_t i = 0; i < nq * dp; i++)
        w->acc1[i] = 0.0f;

    const fa_cpu_mask mask = fa_cpu_mask_of(c);
    const int64_t k_begin = fa_cpu_keys_begin(&mask, q0 + off, 0);
    const int64_t k_end = fa_cpu_keys_end(&mask, q0 + nq - 1 + off, c->seq_k);
    for (int64_t k0 = k_begin; k0 < k_end; k0 += BK) {
        const int nk = (int)(k_end - k0 < BK ? k_end - k0 : BK);
        fa_cpu_tile kt = fa_cpu_tile_at(&c->k, c->dtype, b, k0, hk, nk, dim);
        fa_cpu_tile vt = fa_cpu_tile_at(&c->v, c->dtype, b, k0, hk, nk, dim);
        fa_cpu_load_rows(kern, &kt, 1.0f, w->x, dp);
        fa_cpu_load_rows(kern, &vt, 1.0f, w->y, dp);

        /* S^T = K Q^T (keys x queries), masked outside each query's keys, then P^T */
        kern->gemm(nk, n_pad, dim, w->x, dp, 1, w->a_t, BQ, w->s, BQ, FA_CPU_GEMM_SET, NULL);
        fa_cpu_scores(kern, c, w->s, nk, nq, BQ, w->dcap);
        for (int i = 0; (c->has_alibi || c->has_bias) && i < nq; i++)
            fa_cpu_row_terms(c, b, q0 + i, h, off, k0, nk, w->s + i, BQ);
        if (fa_cpu_mask_cuts(&mask, q0 + off, q0 + nq - 1 + off, k0, nk))
            for (int i = 0; i < nq; i++)
                fa_cpu_mask_row(&mask, q0 + i + off, k0, nk, w->s + i, BQ);
        kern->exp2_sub(w->s, nk, nq, BQ, w->zeros, w->lse2);
        /* dP^T = V dO^T, dS^T = P^T (dP^T - Delta), dQ += dS K */
        kern->gemm(nk, n_pad, dim, w->y, dp, 1, w->b_t, BQ, w->dp, BQ, FA_CPU_GEMM_SET, NULL);
        kern->grad_scores(w->s, w->dp, nk, nq, BQ, w->zeros, w->delta);
        if (c->softcap > 0.0f)
            fa_cpu_softcap_grad(w->dp, w->dcap, nk, nq, BQ);
        kern->gemm(nq, (int)dp, nk, w->dp, 1, BQ, w->x, dp, w->acc1, dp, FA_CPU_GEMM_ADD, NULL);
    }
    fa_cpu_tile dqt = fa_cpu_tile_at(&c->d_q, c->dtype, b, q0, h, nq, dim);
    fa_cpu_store_rows(&dqt, w->acc1, dp, c->scale, w->row);
}

fa_status fa_cpu_backward(fa_context *ctx, const fa_attention_call *call)
{
    const fa_cpu_kernels *kern = fa_cpu_kernels_select();
    const int threads = fa_cpu_threads(ctx);
    const int64_t rows = call->batch * call->heads_q * call->seq_q;
    size_t slice_floats;
    backward_scratch_carve(NULL, call->head_dim, &slice_floats);
    fa_cpu_scratch scratch;
    fa_status st =
        fa_cpu_scratch_alloc(ctx, &scratch, threads, slice_floats, (size_t)rows, "backward");
    if (st != FA_OK)
        return st;
    float *delta = fa_cpu_scratch_slice(&scratch, threads);

    const int64_t q_tiles = (call->seq_q + BQ - 1) / BQ;
    const int64_t k_tiles = (call->seq_k + BK - 1) / BK;
    const int64_t dq_items = call->batch * call->heads_q * q_tiles;
    const int64_t dkdv_items = call->batch * call->heads_kv * k_tiles;
#pragma omp parallel num_threads(threads)
    {
        backward_scratch w = backward_scratch_carve(
            fa_cpu_scratch_slice(&scratch, omp_get_thread_num()), call->head_dim, NULL);
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            int64_t bh = r / call->seq_q;
            delta_row(kern, call, &w, delta, bh / call->heads_q, bh % call->heads_q,
                      r % call->seq_q);
        }
        /* (implicit barrier: Delta is complete) */
#pragma omp for schedule(dynamic, 1) nowait
        for (int64_t t = 0; t < dkdv_items; t++) {
            /* first key tiles first: under a causal mask they are the longest */
            int64_t bh = t / k_tiles;
            dkdv_tile(kern, call, &w, delta, bh / call->heads_kv, bh % call->heads_kv,
                      (t % k_tiles) * BK);
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < dq_items; t++) {
            int64_t qt = q_tiles - 1 - t % q_tiles;
            int64_t bh = t / q_tiles;
            dq_tile(kern, call, &w, delta, bh / call->heads_q, bh % call->heads_q, qt * BQ);
        }
    }
    fa_cpu_scratch_free(ctx, &scratch);
    return FA_OK;
}
