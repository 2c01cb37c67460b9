// SPDX-License-Identifier: MIT
/* Forward attention on the CPU: FlashAttention's tiled online softmax.
 *
 * OpenMP threads share out (batch, query head, 128-query tile) work items, longest first when
 * causal. A thread keeps its query tile transposed (Q^T, D x 128) and an f32 accumulator O
 * (128 x D) in its scratch, then streams the head's 64-key K and V tiles: S^T = K Q^T (keys x
 * queries), scaled by scale * log2(e) after the product, or softcapped, plus ALiBi and the bias
 * (cpu_mask.h), masked where the causal diagonal or the sliding window cuts the tile, an online
 * softmax step per query column (running max and sum, P = exp2(S - max)), and O = alpha O + P V.
 * Keys no row of the tile sees (past the diagonal, outside the window) are never loaded. At the end
 * O / sum is rounded to the dtype and LSE = (max + log2 sum) ln 2. Extra memory: one slice per
 * thread (Q^T, O, K, V, S^T: 224 KiB at head_dim 128). Working on S^T (keys x queries) lets the
 * softmax vectorize across queries and lets K and V be used as loaded, untransposed; P V reads P^T
 * in place.
 *
 * Decoding (all queries of a KV head's query heads fit one tile): a work item is (batch, KV
 * head) with those rows packed together, so each K and V row is read once for the group. Up to
 * FA_CPU_DECODE_ROWS rows skip the scratch tiles: the kernel set's decode_block reads K and V
 * rows where they lie (through the block table, if any) and converts them in registers, since
 * then nothing but those reads bounds the call. Where the items are fewer than the threads, or
 * fa_attention_desc.num_splits asks, the keys are cut into chunks (runtime/split.c) whose
 * normalised O and LSE go to a shared scratch and are merged exactly by their LSEs at the end. */
#include <math.h>
#include <omp.h>

#include "cpu_backend.h"
#include "cpu_mask.h"
#include "cpu_tiles.h"
#include "fa_split.h"

#define FA_LN2 0.6931471805599453f

enum { BQ = FA_CPU_TILE_Q, BK = FA_CPU_TILE_K };

/* One thread's scratch for one query tile. */
typedef struct forward_scratch {
    float *q_t;                 /* D x BQ: Q^T; decoding, BQ x Dp: Q row-major */
    float *k;                   /* BK x D */
    float *v;                   /* BK x Dp, padded columns zero */
    float *s;                   /* BK x BQ: S^T, then P^T */
    float *o;                   /* BQ x Dp accumulator */
    float *m, *l, *alpha, *row; /* BQ, BQ, BQ, Dp */
    const void **rows;          /* decoding: a block's K and V row pointers */
} forward_scratch;

/* Decoding's row pointers: K rows of a block and the next block's first FA_CPU_DECODE_AHEAD,
 * then V rows of a block. */
enum {
    DECODE_K_ROWS = BK * FA_CPU_DECODE_HEADS + FA_CPU_DECODE_AHEAD,
    DECODE_ROW_PTRS = DECODE_K_ROWS + BK * FA_CPU_DECODE_HEADS,
    DECODE_BLOCK_BYTES = 512 << 10 /* a decoding block's K and V: within a 1 MiB L2 */
};

/* Lays out one thread's scratch in `slice` and returns it; with slice NULL only its size in
 * floats (*floats), which fa_cpu_scratch_alloc then reserves per thread. */
static forward_scratch forward_scratch_carve(float *slice, int64_t dim, size_t *floats)
{
    const int64_t dp = fa_cpu_round_up(dim, FA_CPU_PAD);
    fa_cpu_carver c = {slice, 0};
    forward_scratch w;
    w.q_t = fa_cpu_carve(&c, dp * BQ);
    w.k = fa_cpu_carve(&c, BK * dim);
    w.v = fa_cpu_carve(&c, BK * dp);
    w.s = fa_cpu_carve(&c, BK * BQ);
    w.o = fa_cpu_carve(&c, BQ * dp);
    w.m = fa_cpu_carve(&c, BQ);
    w.l = fa_cpu_carve(&c, BQ);
    w.alpha = fa_cpu_carve(&c, BQ);
    w.row = fa_cpu_carve(&c, dp);
    /* pointers in float-sized units: the slice holds nothing else there */
    w.rows = (const void **)fa_cpu_carve(&c, DECODE_ROW_PTRS *
                                                 (int64_t)(sizeof(void *) / sizeof(float)));
    if (floats)
        *floats = c.used;
    return w;
}

/* The query rows of one work item: row r is query qi[r] of query head qh[r]. A query tile of
 * one head (qi = q0 + r), or every query of every query head of one KV head packed together
 * (GQA packing: the heads then share each K and V tile loaded), or, decoding, those of several
 * KV heads one after the other. */
typedef struct row_map {
    int n;
    int64_t qi[BQ], qh[BQ];
} row_map;

/* Where a work item's results go: O and the LSE, or (a chunk of split keys) its normalised O,
 * f32 (rows x D, row stride D), and LSE at part_o / part_lse + the rows' output index. */
typedef struct forward_out {
    float *part_o, *part_lse; /* NULL: write O and LSE */
} forward_out;

/* The output row index of (b, query i, query head h) in a chunk's partial results. */
static int64_t out_row(const fa_attention_call *c, int64_t b, int64_t i, int64_t h)
{
    return (b * c->heads_q + h) * c->seq_q + i;
}

/* The tile of keys k0 .. k0 + n - 1 of batch b, KV head hk, in K; through the block table where
 * the call has one (the runtime checked the pages these keys cover). */
static fa_cpu_tile key_tile(const fa_attention_call *c, int64_t b, int64_t hk, int64_t k0, int n)
{
    fa_cpu_tile kt = fa_cpu_tile_at(&c->k, c->dtype, b, k0, hk, n, (int)c->head_dim);
    if (c->has_block_table) {
        kt.pages = (const int32_t *)c->block_table.buffer + c->block_table.offset +
                   b * c->block_table.stride_b;
        kt.page_step = c->block_table.stride_s;
        kt.page_size = c->page_size;
    }
    return kt;
}

/* Whether rows_per_kv rows of a KV head take the fused decoding kernel: a few, and no sliding
 * window, softcap, ALiBi or bias, which it does not apply (those calls take the GEMM path). */
static bool fused_decode(const fa_attention_call *c, int64_t rows_per_kv)
{
    return rows_per_kv <= FA_CPU_DECODE_ROWS && !c->window && !(c->softcap > 0.0f) &&
           !c->has_alibi && !c->has_bias;
}

/* A few rows per KV head (decoding): keys [k_begin, k_end) of KV heads hk .. hk + heads - 1
 * through the fused kernel, K and V read where they lie; Q row-major in q_t (row stride dp,
 * padding zero), rows of one KV head after another. */
static void decode_keys(const fa_cpu_kernels *kern, const fa_attention_call *c, forward_scratch *w,
                        int64_t b, int64_t hk, int heads, const row_map *rm, int64_t k_begin,
                        int64_t k_end, int64_t off)
{
    const int64_t dp = fa_cpu_round_up(c->head_dim, FA_CPU_PAD);
    const void **k_rows = w->rows, **v_rows = w->rows + DECODE_K_ROWS;
    /* Keys per block: a block's K and V rows, read from memory in pass 1 of the kernel, are
     * read again from cache in pass 3, so together they stay within DECODE_BLOCK_BYTES. */
    const int64_t key_bytes = 2 * heads * c->head_dim * (int64_t)fa_dtype_size(c->dtype);
    int block = BK;
    while (block > 8 && block * key_bytes > DECODE_BLOCK_BYTES)
        block /= 2;
    int visible[BQ];
    fa_cpu_decode_step st = {.dtype = c->dtype,
                             .dim = (int)c->head_dim,
                             .heads = heads,
                             .nq = rm->n / heads,
                             .k = k_rows,
                             .v = v_rows,
                             .q = w->q_t,
                             .ldq = dp,
                             .scale = c->scale * FA_CPU_LOG2E,
                             .m = w->m,
                             .l = w->l,
                             .o = w->o,
                             .ldo = dp,
                             .s = w->s,
                             .lds = fa_cpu_round_up(rm->n, FA_CPU_PAD)};
    for (int64_t k0 = k_begin; k0 < k_end; k0 += block) {
        st.nk = (int)(k_end - k0 < block ? k_end - k0 : block);
        const int64_t after = k_end - k0 - st.nk, want = (FA_CPU_DECODE_AHEAD + heads - 1) / heads;
        const int ahead = (int)(after < want ? after : want);
        st.ahead = ahead * heads;
        fa_cpu_tile kt = key_tile(c, b, hk, k0, st.nk + ahead); /* key j, head h at j heads + h */
        fa_cpu_tile_rows(&kt, heads, k_rows);
        kt.view = &c->v;
        kt.rows = st.nk;
        fa_cpu_tile_rows(&kt, heads, v_rows);
        st.visible = NULL;
        if (c->causal && k0 + st.nk - 1 > rm->qi[0] + off) { /* rows' diagonals in the block */
            for (int r = 0; r < rm->n; r++) {
                const int64_t seen = rm->qi[r] + off + 1 - k0;
                visible[r] = seen < 0 ? 0 : seen > st.nk ? st.nk : (int)seen;
            }
            st.visible = visible;
        }
        kern->decode_block(&st);
    }
}

/* More rows: keys [k_begin, k_end) a 64-key tile at a time, K and V converted into scratch,
 * S^T = K Q^T and O = alpha O + P V by the GEMM; Q^T in q_t. */
static void gemm_keys(const fa_cpu_kernels *kern, const fa_attention_call *c, forward_scratch *w,
                      int64_t b, int64_t hk, const row_map *rm, int64_t k_begin, int64_t k_end,
                      int64_t off, const fa_cpu_mask *mask, int64_t first, int64_t last)
{
    const int dim = (int)c->head_dim;
    const int64_t dp = fa_cpu_round_up(dim, FA_CPU_PAD);
    const int nq = rm->n;
    const int n_pad = (int)fa_cpu_round_up(nq, FA_CPU_PAD);
    for (int d = 0; d < dim; d++) /* the padding columns of Q^T: zeros, not a previous item's */
        for (int r = nq; r < n_pad; r++)
            w->q_t[d * BQ + r] = 0.0f;
    for (int64_t k0 = k_begin; k0 < k_end; k0 += BK) {
        const int nk = (int)(k_end - k0 < BK ? k_end - k0 : BK);
        fa_cpu_tile kt = key_tile(c, b, hk, k0, nk);
        fa_cpu_tile vt = kt;
        vt.view = &c->v;
        fa_cpu_load_rows(kern, &kt, 1.0f, w->k, dim);
        fa_cpu_load_rows(kern, &vt, 1.0f, w->v, dp);

        kern->gemm(nk, n_pad, dim, w->k, dim, 1, w->q_t, BQ, w->s, BQ, FA_CPU_GEMM_SET, NULL);
        fa_cpu_scores(kern, c, w->s, nk, nq, BQ, NULL);
        for (int r = 0; (c->has_alibi || c->has_bias) && r < nq; r++)
            fa_cpu_row_terms(c, b, rm->qi[r], rm->qh[r], off, k0, nk, w->s + r, BQ);
        if (fa_cpu_mask_cuts(mask, first + off, last + off, k0, nk))
            for (int r = 0; r < nq; r++)
                fa_cpu_mask_row(mask, rm->qi[r] + off, k0, nk, w->s + r, BQ);
        kern->softmax_cols(w->s, nk, nq, BQ, w->m, w->l, w->alpha);
        /* O = alpha O + P V, reading P = (P^T)^T in place */
        kern->gemm(nq, (int)dp, nk, w->s, 1, BQ, w->v, dp, w->o, dp, FA_CPU_GEMM_RESCALE_ADD,
                   w->alpha);
    }
}

/* FP8 descale factor i (0: q, 1: k, 2: v) of batch entry b, KV head hk; 1 where absent. */
static float descale_of(const fa_attention_call *c, int i, int64_t b, int64_t hk)
{
    if (!c->has_descale[i])
        return 1.0f;
    return ((const float *)c->descale[i].buffer)[fa_cpu_index(&c->descale[i], b, 0, hk)];
}

/* Attends rows rm of batch b, those of KV heads hk .. hk + heads - 1 (heads > 1 only with a few
 * rows per head), whose sequence has seq_k keys, to keys [k_begin, k_end). */
static void forward_rows(const fa_cpu_kernels *kern, const fa_attention_call *c, forward_scratch *w,
                         int64_t b, int64_t hk, int heads, int64_t seq_k, const row_map *rm,
                         int64_t k_begin, int64_t k_end, forward_out out)
{
    const int dim = (int)c->head_dim;
    const int64_t dp = fa_cpu_round_up(dim, FA_CPU_PAD);
    const int nq = rm->n;
    const int64_t off = seq_k - c->seq_q;

    /* A few rows per KV head (decoding): Q row-major in q_t's space and the fused kernel; else
     * Q^T and GEMMs on tiles loaded into scratch. */
    const bool few = fused_decode(c, nq / heads);
    const int64_t group = c->heads_q / c->heads_kv;
    for (int r = 0; r < nq; r++) {
        fa_cpu_tile qt = fa_cpu_tile_at(&c->q, c->dtype, b, rm->qi[r], rm->qh[r], 1, dim);
        /* FP8: Q times both descales, so the scores come out descaled */
        const int64_t kv = rm->qh[r] / group;
        const float qk = descale_of(c, 0, b, kv) * descale_of(c, 1, b, kv);
        if (few) {
            fa_cpu_load_rows(kern, &qt, qk, w->q_t + r * dp, dp);
            for (int64_t d = dim; d < dp; d++)
                w->q_t[r * dp + d] = 0.0f;
        } else {
            fa_cpu_load_cols(kern, &qt, qk, w->q_t + r, BQ, w->row);
        }
        w->m[r] = -INFINITY;
        w->l[r] = 0.0f;
    }
    for (int64_t i = 0; i < nq * dp; i++)
        w->o[i] = 0.0f;

    /* keys the rows can see: those their causal mask and window leave them */
    const fa_cpu_mask mask = fa_cpu_mask_of(c);
    int64_t first = rm->qi[0], last = rm->qi[0];
    for (int r = 1; r < nq; r++) {
        first = rm->qi[r] < first ? rm->qi[r] : first;
        last = rm->qi[r] > last ? rm->qi[r] : last;
    }
    k_begin = fa_cpu_keys_begin(&mask, first + off, k_begin);
    k_end = fa_cpu_keys_end(&mask, last + off, k_end);

    if (few)
        decode_keys(kern, c, w, b, hk, heads, rm, k_begin, k_end, off);
    else
        gemm_keys(kern, c, w, b, hk, rm, k_begin, k_end, off, &mask, first, last);

    for (int r = 0; r < nq; r++) {
        const float lse = w->l[r] != 0.0f ? (w->m[r] + log2f(w->l[r])) * FA_LN2 : -INFINITY;
        const float dv = descale_of(c, 2, b, rm->qh[r] / group);
        if (out.part_o) { /* the parts carry dv: the merge's weights sum to 1 */
            const int64_t row = out_row(c, b, rm->qi[r], rm->qh[r]);
            const float inv = w->l[r] != 0.0f ? dv / w->l[r] : 0.0f;
            for (int d = 0; d < dim; d++)
                out.part_o[row * dim + d] = w->o[r * dp + d] * inv;
            out.part_lse[row] = lse;
            continue;
        }
        fa_cpu_tile ot = fa_cpu_tile_at(&c->o, c->o_dtype, b, rm->qi[r], rm->qh[r], 1, dim);
        const float div = w->l[r] / dv; /* l itself where dv is 1, 0 where no key was seen */
        fa_cpu_store_rows_div(&ot, w->o + r * dp, dp, &div, w->row);
        if (c->has_lse)
            ((float *)c->lse.buffer)[fa_cpu_index(&c->lse, b, rm->qi[r], rm->qh[r])] = lse;
    }
}

/* O and LSE of every row from the chunks' partial results, exactly: weights exp(LSE_s - max). */
static void merge_chunks(const fa_attention_call *c, int splits, const float *part_o,
                         const float *part_lse, float *acc, float *row)
{
    const int64_t rows = c->batch * c->heads_q * c->seq_q;
    const int dim = (int)c->head_dim;
#pragma omp for schedule(static)
    for (int64_t t = 0; t < rows; t++) {
        const int64_t i = t % c->seq_q, h = t / c->seq_q % c->heads_q;
        const int64_t b = t / c->seq_q / c->heads_q;
        float mx = -INFINITY;
        for (int sp = 0; sp < splits; sp++)
            mx = fmaxf(mx, part_lse[sp * rows + t]);
        float sum = 0.0f;
        for (int d = 0; d < dim; d++)
            acc[d] = 0.0f;
        const float m_use = mx == -INFINITY ? 0.0f : mx; /* -inf parts weigh 0, NaN ones NaN */
        for (int sp = 0; sp < splits; sp++) {
            const float wgt = expf(part_lse[sp * rows + t] - m_use);
            sum += wgt;
            for (int d = 0; d < dim; d++)
                acc[d] += wgt * part_o[(sp * rows + t) * dim + d];
        }
        fa_cpu_tile ot = fa_cpu_tile_at(&c->o, c->o_dtype, b, i, h, 1, dim);
        fa_cpu_store_rows_div(&ot, acc, dim, &sum, row);
        if (c->has_lse)
            ((float *)c->lse.buffer)[fa_cpu_index(&c->lse, b, i, h)] =
                sum != 0.0f ? mx + logf(sum) : -INFINITY;
    }
}

/* Batch entry b's key count: seqlens_k[b] where the call has them (the runtime checked them:
 * attention.c), else seq_k. */
static int64_t keys_of(const fa_attention_call *c, int64_t b)
{
    if (!c->has_seqlens_k)
        return c->seq_k;
    const int32_t *v = c->seqlens_k.buffer;
    return v[c->seqlens_k.offset + (uint64_t)b * (uint64_t)c->seqlens_k.stride_b];
}

/* How a call's query rows are cut into work items: per batch entry, groups of `kv_heads` KV
 * heads with all their query rows (kv_heads > 0: several only when decoding, at most
 * FA_CPU_DECODE_ROWS rows per KV head), or else (kv_heads 0) query tiles of one query head. */
typedef struct forward_items {
    int64_t group;    /* query heads per KV head */
    int64_t kv_heads; /* per item; 0: query tiles */
    int64_t q_tiles;  /* per query head, with kv_heads 0 */
    int64_t count;
} forward_items;

static forward_items forward_items_of(const fa_attention_call *c)
{
    forward_items it = {.group = c->heads_q / c->heads_kv, .q_tiles = 1};
    const int64_t per_kv = c->seq_q * it.group;
    if (fused_decode(c, per_kv)) /* decoding: one item reads several heads' K and V */
        it.kv_heads = c->heads_kv < FA_CPU_DECODE_HEADS ? c->heads_kv : FA_CPU_DECODE_HEADS;
    else if (it.group > 1 && per_kv <= BQ) /* GQA packing */
        it.kv_heads = 1;
    else
        it.q_tiles = (c->seq_q + BQ - 1) / BQ;
    it.count = it.kv_heads ? c->batch * ((c->heads_kv + it.kv_heads - 1) / it.kv_heads)
                           : c->batch * c->heads_q * it.q_tiles;
    return it;
}

/* Work item `item`'s batch entry *b, first KV head *hk, KV head count *heads and rows. */
static void item_rows(const fa_attention_call *c, const forward_items *it, int64_t item, int64_t *b,
                      int64_t *hk, int *heads, row_map *rm)
{
    if (it->kv_heads) {
        const int64_t groups = (c->heads_kv + it->kv_heads - 1) / it->kv_heads;
        const int64_t per_kv = c->seq_q * it->group;
        *b = item / groups;
        *hk = item % groups * it->kv_heads;
        *heads = (int)(c->heads_kv - *hk < it->kv_heads ? c->heads_kv - *hk : it->kv_heads);
        rm->n = (int)(*heads * per_kv);
        for (int r = 0; r < rm->n; r++) {
            const int64_t t = r % per_kv;
            rm->qi[r] = t / it->group;
            rm->qh[r] = (*hk + r / per_kv) * it->group + t % it->group;
        }
        return;
    }
    /* last query tiles first: under a causal mask they are the longest */
    const int64_t qt = it->q_tiles - 1 - item % it->q_tiles, bh = item / it->q_tiles;
    const int64_t h = bh % c->heads_q, q0 = qt * BQ;
    *b = bh / c->heads_q;
    *hk = h / it->group;
    *heads = 1;
    rm->n = (int)(c->seq_q - q0 < BQ ? c->seq_q - q0 : BQ);
    for (int r = 0; r < rm->n; r++) {
        rm->qi[r] = q0 + r;
        rm->qh[r] = h;
    }
}

fa_status fa_cpu_forward(fa_context *ctx, const fa_attention_call *call)
{
    const fa_cpu_kernels *kern = fa_cpu_kernels_select();
    const int threads = fa_cpu_threads(ctx);
    const forward_items it = forward_items_of(call);
    /* Too few items for the threads (or chunks asked for): the keys in chunks, merged after. */
    const fa_split sp =
        it.q_tiles == 1 && (it.count < threads || call->num_splits > 1)
            ? fa_split_choose(it.count, call->seq_k, (uint32_t)threads, 1, call->num_splits)
            : (fa_split){1, call->seq_k};
    const int64_t out_rows = call->batch * call->heads_q * call->seq_q;
    const size_t part_floats =
        sp.splits > 1 ? (size_t)sp.splits * (size_t)out_rows * (size_t)(call->head_dim + 1) : 0;
    size_t slice_floats;
    forward_scratch_carve(NULL, call->head_dim, &slice_floats);
    fa_cpu_scratch scratch;
    fa_status st =
        fa_cpu_scratch_alloc(ctx, &scratch, threads, slice_floats, part_floats, "forward");
    if (st != FA_OK)
        return st;
    float *part_o = part_floats ? fa_cpu_scratch_slice(&scratch, threads) : NULL;
    float *part_lse =
        part_o ? part_o + (size_t)sp.splits * (size_t)out_rows * call->head_dim : NULL;

#pragma omp parallel num_threads(threads)
    {
        forward_scratch w = forward_scratch_carve(
            fa_cpu_scratch_slice(&scratch, omp_get_thread_num()), call->head_dim, NULL);
        row_map rm;
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < it.count * sp.splits; t++) {
            const int64_t chunk = t % sp.splits;
            int64_t b, hk;
            int heads;
            item_rows(call, &it, t / sp.splits, &b, &hk, &heads, &rm);
            const int64_t seq_k = keys_of(call, b), k0 = chunk * sp.keys_per_split;
            const int64_t k1 = k0 + sp.keys_per_split < seq_k ? k0 + sp.keys_per_split : seq_k;
            const forward_out out = {sp.splits > 1 ? part_o + chunk * out_rows * call->head_dim
                                                   : NULL,
                                     sp.splits > 1 ? part_lse + chunk * out_rows : NULL};
            forward_rows(kern, call, &w, b, hk, heads, seq_k, &rm, k0, k1, out);
        }
        if (sp.splits > 1) /* the implicit barrier of the loop above precedes the merge */
            merge_chunks(call, sp.splits, part_o, part_lse, w.o, w.row);
    }
    fa_cpu_scratch_free(ctx, &scratch);
    return FA_OK;
}
