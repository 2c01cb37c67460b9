// SPDX-License-Identifier: MIT
/* The conformance cases, generated from one table of axes.
 *
 * --full takes the full product of the axes. --quick (the default) takes an all-pairs covering
 * array: every value of every axis, and every pair of values of any two axes, appears in at
 * least one case. It is built greedily and deterministically (AETG-style): each new case is the
 * best of a few candidates, each filling the axes in a different fixed order with the value
 * that covers the most pairs not yet covered. Batch and head counts follow from the sequence
 * lengths and head dim, so large cases stay affordable. One axis is the scores' magnitude (Q and K
 * scaled so that scores are ~1, 1e2 or 1e4); --full takes the product at 1 and adds the quick
 * array's larger ones. Fixed edge cases (huge scales among them), cases with scores of 1e6 or a
 * NaN or infinity planted in an input, decoding cases, appends to a KV cache, and sliding
 * windows and softcaps follow the table. */
#include "tk_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { AX_DTYPE, AX_DIM, AX_SEQ, AX_CAUSAL, AX_HEADS, AX_LAYOUT, AX_DIR, AX_LOGITS, AX_COUNT };

static const fa_dtype dtypes[] = {FA_DTYPE_F32, FA_DTYPE_F16, FA_DTYPE_BF16};
static const int dims_quick[] = {32, 40, 64, 96, 128, 256};
static const int dims_full[] = {8, 32, 40, 64, 72, 80, 96, 128, 160, 192, 224, 256};
static const int seqs[][2] = {{1, 1},       {1, 513},   {7, 7},     {17, 113},
                              {113, 203},   {127, 512}, {512, 127}, {1000, 1000},
                              {2048, 2048}, {1, 16384}}; /* the last two: --full only */
#define N_SEQ_QUICK 8
#define N_SEQ_FULL 10
/* Score magnitudes: Q and K scaled so that scores are ~logits x N(0, 1). */
static const float logit_scales[] = {1.0f, 1e2f, 1e4f};

typedef struct axes {
    int size[AX_COUNT];
    const int *dims;
} axes;

/* The full product holds logits 1 only; --full adds the quick array's cases with larger logits. */
static axes table_axes(bool full)
{
    axes a = {
        {3, full ? 12 : 6, full ? N_SEQ_FULL : N_SEQ_QUICK, 2, TK_HEADS_KINDS, 2, 2, full ? 1 : 3},
        full ? dims_full : dims_quick};
    return a;
}

/* B, Hq, Hkv for a case: two batches and more heads while Sq * Sk * D is small. */
static void pick_counts(int64_t sq, int64_t sk, int64_t d, tk_heads_kind kind, fa_ref_problem *p)
{
    int64_t area = sq * sk * d;
    static const int64_t small[TK_HEADS_KINDS][2] = {{3, 3}, {8, 2}, {4, 1}};
    static const int64_t medium[TK_HEADS_KINDS][2] = {{2, 2}, {8, 2}, {3, 1}};
    static const int64_t large[TK_HEADS_KINDS][2] = {{2, 2}, {8, 2}, {2, 1}};
    const int64_t(*h)[2] = area <= (1 << 20) ? small : area <= (1 << 24) ? medium : large;
    p->batch = area <= (1 << 16) ? 3 : area <= (1 << 24) ? 2 : 1;
    p->heads_q = h[kind][0];
    p->heads_kv = h[kind][1];
}

const char *tk_heads_name(tk_heads_kind kind)
{
    static const char *names[TK_HEADS_KINDS] = {"mha", "gqa4:1", "mqa"};
    return names[kind];
}

static tk_heads_kind heads_kind(int64_t hq, int64_t hkv)
{
    return hq == hkv ? TK_MHA : hkv == 1 ? TK_MQA : TK_GQA4;
}

static void name_case(tk_case *c, const char *extra)
{
    const fa_ref_problem *p = &c->p;
    char logits[32] = "", window[48] = "", softcap[32] = "";
    const char *alibi = c->alibi == 1 ? " alibi=h" : c->alibi == 2 ? " alibi=bh" : "";
    static const char *const bias_names[4] = {"", " bias=full", " bias=bcast", " bias=mask"};
    const char *bias = bias_names[c->bias & 3];
    if (c->logits > 1.0f)
        snprintf(logits, sizeof logits, " logits=1e%d", (int)lround(log10((double)c->logits)));
    if (p->window.enabled)
        snprintf(window, sizeof window, " window=%d,%d", (int)p->window.left, (int)p->window.right);
    if (p->softcap > 0.0f)
        snprintf(softcap, sizeof softcap, " softcap=%g", (double)p->softcap);
    snprintf(c->name, sizeof c->name, "%s %s d=%lld sq=%lld sk=%lld %s %s %s%s%s%s%s%s%s",
             c->backward ? "bwd" : "fwd", fa_dtype_name(p->dtype), (long long)p->head_dim,
             (long long)p->seq_q, (long long)p->seq_k, p->causal ? "causal" : "noncausal",
             tk_heads_name(c->heads), c->bhsd ? "bhsd" : "bshd", logits, window, softcap, alibi,
             bias, extra ? extra : "");
}

static tk_case case_from_values(const axes *a, const int *val)
{
    tk_case c;
    memset(&c, 0, sizeof c);
    c.p.dtype = dtypes[val[AX_DTYPE]];
    c.p.head_dim = a->dims[val[AX_DIM]];
    c.p.seq_q = seqs[val[AX_SEQ]][0];
    c.p.seq_k = seqs[val[AX_SEQ]][1];
    c.p.causal = val[AX_CAUSAL] != 0;
    c.heads = (tk_heads_kind)val[AX_HEADS];
    pick_counts(c.p.seq_q, c.p.seq_k, c.p.head_dim, c.heads, &c.p);
    c.bhsd = val[AX_LAYOUT] != 0;
    c.backward = val[AX_DIR] != 0;
    c.logits = logit_scales[val[AX_LOGITS]];
    name_case(&c, NULL);
    return c;
}

/* ---- all-pairs covering array ---- */

typedef struct pairs {
    const axes *a;
    int64_t used[AX_COUNT][16]; /* how often each value was chosen: ties go to the rarer */
    unsigned char *covered[AX_COUNT][AX_COUNT]; /* [x][y][vx * size[y] + vy], x < y */
    int64_t left;
} pairs;

static bool is_covered(const pairs *pc, int x, int vx, int y, int vy)
{
    if (x > y)
        return is_covered(pc, y, vy, x, vx);
    return pc->covered[x][y][vx * pc->a->size[y] + vy] != 0;
}

static int count_new(const pairs *pc, const int *val, const bool *set, int x, int vx)
{
    int n = 0;
    for (int y = 0; y < AX_COUNT; y++)
        if (y != x && set[y] && !is_covered(pc, x, vx, y, val[y]))
            n++;
    return n;
}

static int cover(pairs *pc, const int *val, bool mark)
{
    int n = 0;
    for (int x = 0; x < AX_COUNT; x++)
        for (int y = x + 1; y < AX_COUNT; y++) {
            unsigned char *c = &pc->covered[x][y][val[x] * pc->a->size[y] + val[y]];
            if (!*c) {
                n++;
                if (mark) {
                    *c = 1;
                    pc->left--;
                }
            }
        }
    return n;
}

/* One candidate: start from the first uncovered pair, then fill the other axes in `order`. */
static void candidate(const pairs *pc, const int *order, int *val)
{
    bool set[AX_COUNT] = {false};
    for (int x = 0; x < AX_COUNT && !set[x]; x++)
        for (int y = x + 1; y < AX_COUNT && !set[x]; y++)
            for (int v = 0; v < pc->a->size[x] * pc->a->size[y]; v++)
                if (!pc->covered[x][y][v]) {
                    val[x] = v / pc->a->size[y];
                    val[y] = v % pc->a->size[y];
                    set[x] = set[y] = true;
                    break;
                }
    for (int k = 0; k < AX_COUNT; k++) {
        int x = order[k];
        if (set[x])
            continue;
        int best = 0, best_n = -1;
        for (int v = 0; v < pc->a->size[x]; v++) {
            int n = count_new(pc, val, set, x, v);
            if (n > best_n || (n == best_n && pc->used[x][v] < pc->used[x][best])) {
                best_n = n;
                best = v;
            }
        }
        val[x] = best;
        set[x] = true;
    }
}

static int64_t covering_array(const axes *a, int (**out)[AX_COUNT])
{
    pairs pc = {.a = a};
    for (int x = 0; x < AX_COUNT; x++)
        for (int y = x + 1; y < AX_COUNT; y++) {
            pc.covered[x][y] = calloc((size_t)(a->size[x] * a->size[y]), 1);
            pc.left += a->size[x] * a->size[y];
        }
    int64_t cap = 256, n = 0;
    int(*rows)[AX_COUNT] = malloc((size_t)cap * sizeof *rows);
    uint64_t rng = 0x243f6a8885a308d3ull; /* fixed: the case list does not depend on --seed */
    while (pc.left > 0) {
        int best[AX_COUNT], best_n = -1;
        for (int cand = 0; cand < 24; cand++) {
            int order[AX_COUNT], val[AX_COUNT];
            for (int k = 0; k < AX_COUNT; k++)
                order[k] = k;
            for (int k = AX_COUNT - 1; k > 0 && cand > 0; k--) {
                int r = (int)fa_testkit_rand_below(&rng, (uint64_t)k + 1);
                int tmp = order[k];
                order[k] = order[r];
                order[r] = tmp;
            }
            candidate(&pc, order, val);
            int got = cover(&pc, val, false);
            if (got > best_n) {
                best_n = got;
                memcpy(best, val, sizeof best);
            }
        }
        cover(&pc, best, true);
        for (int x = 0; x < AX_COUNT; x++)
            pc.used[x][best[x]]++;
        if (n == cap) {
            cap *= 2;
            rows = realloc(rows, (size_t)cap * sizeof *rows);
        }
        memcpy(rows[n++], best, sizeof best);
    }
    for (int x = 0; x < AX_COUNT; x++)
        for (int y = x + 1; y < AX_COUNT; y++)
            free(pc.covered[x][y]);
    *out = rows;
    return n;
}

/* ---- edge cases ---- */

typedef struct edge_spec {
    fa_dtype dtype;
    int64_t batch, sq, sk, hq, hkv, d;
    float scale;
    bool causal, backward, bhsd;
    const char *extra;
    int32_t splits; /* fa_attention_desc.num_splits */
} edge_spec;

/* An edge case with large scores or a planted value. */
typedef struct planted_spec {
    edge_spec e;
    float logits; /* 0: 1 */
    tk_special special;
} planted_spec;

static const edge_spec edges[] = {
    /* no key at all: O = 0, LSE = -inf, dQ = 0 */
    {FA_DTYPE_F32, 2, 5, 0, 2, 2, 64, 0, false, false, false, " edge:sk=0", 0},
    {FA_DTYPE_F16, 2, 5, 0, 4, 1, 64, 0, true, true, true, " edge:sk=0", 0},
    /* nothing to do: success, outputs untouched (but a backward with Sq = 0 zeroes dK, dV) */
    {FA_DTYPE_F16, 0, 9, 9, 2, 2, 64, 0, false, false, false, " edge:b=0", 0},
    {FA_DTYPE_BF16, 0, 9, 9, 4, 1, 64, 0, true, true, true, " edge:b=0", 0},
    {FA_DTYPE_F32, 2, 0, 9, 2, 2, 64, 0, false, false, true, " edge:sq=0", 0},
    {FA_DTYPE_F16, 2, 0, 9, 4, 2, 32, 0, true, true, false, " edge:sq=0", 0},
    /* causal with Sq > Sk: the first Sq - Sk rows see no key */
    {FA_DTYPE_F16, 2, 40, 9, 2, 2, 64, 0, true, false, false, " edge:no-key-rows", 0},
    {FA_DTYPE_BF16, 2, 40, 9, 8, 2, 64, 0, true, true, true, " edge:no-key-rows", 0},
    {FA_DTYPE_F32, 1, 300, 1, 2, 1, 32, 0, true, true, false, " edge:no-key-rows", 0},
    /* a non-default scale */
    {FA_DTYPE_F32, 2, 33, 65, 2, 2, 64, 0.3f, false, false, false, " edge:scale=0.3", 0},
    {FA_DTYPE_BF16, 2, 33, 65, 4, 1, 128, 0.3f, true, true, true, " edge:scale=0.3", 0},
    {FA_DTYPE_F16, 1, 64, 64, 2, 2, 64, 1.5f, false, true, false, " edge:scale=1.5", 0},
    {FA_DTYPE_F32, 1, 31, 47, 3, 3, 32, -0.25f, true, false, true, " edge:scale=-0.25", 0},
    /* a huge finite scale: the forward is exact (one-hot rows); the backward's |LSE| is past
     * FA_BACKWARD_LSE_LIMIT, so every gradient is NaN (flashattn.h) */
    {FA_DTYPE_F32, 1, 4, 4, 1, 1, 8, 3e30f, false, false, false, " edge:scale=3e30", 0},
    {FA_DTYPE_F16, 2, 17, 33, 2, 2, 64, 3e30f, true, false, true, " edge:scale=3e30", 0},
    {FA_DTYPE_BF16, 1, 70, 70, 4, 2, 128, -3e30f, false, false, false, " edge:scale=-3e30", 0},
    {FA_DTYPE_F32, 1, 4, 4, 1, 1, 8, 3e30f, false, true, false, " edge:scale=3e30", 0},
    {FA_DTYPE_F16, 1, 40, 40, 2, 1, 64, 3e30f, false, true, false, " edge:scale=3e30", 0},
};

/* Large scores (logits: the case's scores are ~logits x N(0, 1)), and one NaN or infinity
 * planted in an input (batch 0, head 0): the rows whose scores it reaches
 * get what IEEE arithmetic gives (a NaN score: NaN O and LSE), every other row stays exact.
 * Under a causal mask a value in V (forward) or in any input (backward) can also reach, through
 * a 0 x NaN or 0 x inf product, rows of the same tile that do not see it (flashattn.h): those are
 * planted without a mask, where the reference's answer does not depend on the tiles. */
static const planted_spec planted[] = {
    /* scores of ~1e6 (f32 only: f16 and bf16 inputs have no such range at this scale) */
    {{FA_DTYPE_F32, 1, 300, 300, 2, 2, 64, 0, false, true, false, " edge:large-logits", 0},
     1e6f,
     {0}},
    {{FA_DTYPE_F32, 1, 200, 333, 4, 2, 128, 0, true, true, true, " edge:large-logits", 0},
     1e6f,
     {0}},
    {{FA_DTYPE_F32, 2, 129, 129, 2, 1, 64, 0, true, false, false, " edge:large-logits", 0},
     1e6f,
     {0}},
    {{FA_DTYPE_F32, 2, 70, 70, 2, 2, 64, 0, true, false, false, " special:k=nan", 0},
     0,
     {'k', NAN, 37, 5}},
    {{FA_DTYPE_F16, 2, 70, 70, 2, 2, 64, 0, true, false, true, " special:q=+inf", 0},
     0,
     {'q', INFINITY, 3, 9}},
    {{FA_DTYPE_BF16, 2, 70, 70, 4, 2, 64, 0, true, false, false, " special:k=-inf", 0},
     0,
     {'k', -INFINITY, 50, 0}},
    {{FA_DTYPE_F32, 2, 200, 150, 2, 2, 128, 0, true, false, false, " special:q=nan", 0},
     0,
     {'q', NAN, 120, 127}},
    {{FA_DTYPE_F16, 2, 70, 70, 2, 2, 64, 0, false, false, false, " special:v=nan", 0},
     0,
     {'v', NAN, 10, 7}},
    {{FA_DTYPE_F32, 2, 70, 70, 2, 2, 64, 0, false, false, true, " special:v=+inf", 0},
     0,
     {'v', INFINITY, 69, 0}},
    {{FA_DTYPE_BF16, 2, 70, 70, 2, 2, 64, 0, false, false, false, " special:q=-inf", 0},
     0,
     {'q', -INFINITY, 0, 3}},
    {{FA_DTYPE_F32, 2, 70, 70, 2, 2, 64, 0, false, true, false, " special:do=nan", 0},
     0,
     {'o', NAN, 20, 3}},
    {{FA_DTYPE_F16, 2, 70, 70, 4, 2, 64, 0, false, true, true, " special:v=nan", 0},
     0,
     {'v', NAN, 33, 63}},
    {{FA_DTYPE_BF16, 2, 70, 70, 2, 2, 64, 0, false, true, false, " special:q=nan", 0},
     0,
     {'q', NAN, 65, 10}},
    {{FA_DTYPE_F16, 2, 70, 70, 2, 2, 64, 0, false, true, false, " special:do=+inf", 0},
     0,
     {'o', INFINITY, 5, 1}},
    {{FA_DTYPE_F32, 2, 70, 70, 2, 2, 128, 0, false, true, false, " special:k=nan", 0},
     0,
     {'k', NAN, 1, 100}},
    {{FA_DTYPE_F32, 2, 70, 70, 2, 2, 64, 0, false, true, true, " special:v=-inf", 0},
     0,
     {'v', -INFINITY, 40, 2}},
    {{FA_DTYPE_F16, 1, 9, 300, 8, 2, 128, 0, false, false, false, " special:k=nan decode", 0},
     0,
     {'k', NAN, 299, 17}},
    {{FA_DTYPE_F16, 1, 1, 3000, 8, 2, 128, 0, false, false, false, " special:v=nan splitkv=5", 5},
     0,
     {'v', NAN, 1234, 64}},
};

static tk_case case_from_edge(const edge_spec *s)
{
    tk_case c;
    memset(&c, 0, sizeof c);
    c.p = (fa_ref_problem){.dtype = s->dtype,
                           .batch = s->batch,
                           .seq_q = s->sq,
                           .seq_k = s->sk,
                           .heads_q = s->hq,
                           .heads_kv = s->hkv,
                           .head_dim = s->d,
                           .scale = s->scale,
                           .causal = s->causal};
    c.heads = heads_kind(s->hq, s->hkv);
    c.backward = s->backward;
    c.bhsd = s->bhsd;
    /* a backward with keys but no queries still overwrites dK and dV with zeros */
    c.noop = s->batch == 0 || (s->sq == 0 && (!s->backward || s->sk == 0));
    c.num_splits = s->splits;
    c.edge = true;
    name_case(&c, s->extra);
    return c;
}

/* ---- packed variable-length batches (fa_attention_desc.cu_seqlens_q, cu_seqlens_k) ---- */

/* Cases called as packed batches (tk_case.varlen): the causal mask, the window and ALiBi per
 * sequence (Sq above and below Sk, so a mask over the packed rows would differ), GQA and MQA, a
 * softcap, a decoding step; forward and backward. Sequences of different lengths, empty ones and
 * rows past the last sequence: tests/test_varlen.c. */
typedef struct varlen_spec {
    edge_spec e;
    fa_window window;
    float softcap;
    float logits; /* 0: 1 */
    int alibi;    /* tk_case.alibi */
} varlen_spec;

static const varlen_spec varlen_cases[] = {
    {{FA_DTYPE_F32, 3, 37, 53, 2, 2, 64, 0, true, false, false, " varlen", 0},
     {false, 0, 0},
     0,
     0,
     0},
    {{FA_DTYPE_F16, 3, 53, 37, 8, 2, 64, 0, true, true, false, " varlen", 0},
     {false, 0, 0},
     0,
     0,
     0},
    {{FA_DTYPE_BF16, 2, 64, 100, 4, 1, 32, 0, false, false, false, " varlen", 0},
     {true, 16, 8},
     0,
     0,
     2},
    {{FA_DTYPE_F32, 2, 40, 40, 2, 2, 64, 0, false, true, false, " varlen", 0},
     {true, 8, 0},
     30.0f,
     1e2f,
     1},
    {{FA_DTYPE_F16, 4, 1, 300, 8, 2, 128, 0, true, false, false, " varlen decode", 0},
     {false, 0, 0},
     0,
     0,
     0},
};

/* ---- per-sequence key counts (fa_attention_desc.seqlens_k) ---- */

/* Batch entries of lengths Sk, 0, 1 and one between, in turn (tk_case_seqlens): decoding steps
 * of 1, 4 and 16 queries, with and without the causal mask, split keys, and a prefill whose
 * queries outnumber some sequences' keys. */
static const edge_spec seqlens_cases[] = {
    {FA_DTYPE_F16, 4, 1, 4097, 8, 2, 128, 0, false, false, false, " decode seqlens", 0},
    {FA_DTYPE_F32, 5, 4, 1000, 4, 1, 64, 0, true, false, false, " decode seqlens", 0},
    {FA_DTYPE_BF16, 4, 16, 300, 8, 8, 64, 0, true, false, true, " decode seqlens", 0},
    {FA_DTYPE_F16, 4, 1, 2000, 8, 2, 64, 0, false, false, false, " decode seqlens splitkv=4", 4},
    {FA_DTYPE_F32, 4, 37, 203, 4, 2, 32, 0, true, false, false, " seqlens", 0},
};

void tk_case_seqlens(const tk_case *c, int32_t *out)
{
    const int64_t sk = c->p.seq_k - c->append; /* what the cache may hold before an append */
    uint64_t s = c->seed ^ 0x5eed1e45ull;
    for (int64_t b = 0; b < c->p.batch; b++) {
        const int64_t pick = b % 4;
        const int64_t between =
            sk > 2 ? 2 + (int64_t)(fa_testkit_splitmix64(&s) % (uint64_t)(sk - 2)) : sk;
        const int64_t n = pick == 0 ? sk : pick == 1 ? 0 : pick == 2 ? 1 : between;
        out[b] = (int32_t)((n < sk ? n : sk) + c->append);
    }
}

/* ---- a paged K/V cache (fa_attention_desc.block_table) ---- */

/* Pages of 1, 7 (not a power of 2), 16, 32, 64 and 256 keys, the pages of each sequence spread
 * over the cache in a seeded order with spare pages between (conformance_exec.c), with and
 * without per-sequence lengths (the table entries past a sequence's length are then invalid,
 * and must not be read). */
typedef struct paged_spec {
    edge_spec e;
    int32_t page_size;
    bool seqlens;
} paged_spec;

static const paged_spec paged_cases[] = {
    {{FA_DTYPE_F16, 4, 1, 4096, 8, 2, 128, 0, false, false, false, " decode paged=16 seqlens", 0},
     16,
     true},
    {{FA_DTYPE_F16, 2, 1, 4096, 8, 2, 128, 0, false, false, false, " decode paged=256", 0},
     256,
     false},
    {{FA_DTYPE_BF16, 3, 4, 1001, 8, 2, 64, 0, true, false, true, " decode paged=7 seqlens", 0},
     7,
     true},
    {{FA_DTYPE_F32, 2, 1, 300, 4, 1, 64, 0, false, false, false, " decode paged=1", 0}, 1, false},
    {{FA_DTYPE_F16, 2, 16, 2048, 8, 8, 64, 0, true, false, false, " decode paged=64 splitkv=4", 4},
     64,
     false},
    {{FA_DTYPE_F32, 4, 37, 512, 4, 2, 32, 0, true, false, false, " paged=32 seqlens", 0}, 32, true},
};

/* ---- appending to the cache (fa_attention_desc.k_new, v_new) ---- */

/* A decoding step (1 new row per sequence) and a chunk of 4 or 37 (whose queries are the new
 * rows), into a contiguous cache in either layout and a paged one, over sequences that held
 * Sk - S_new, 0, 1 and a length between before it (tk_case_seqlens). */
typedef struct append_spec {
    edge_spec e;
    int32_t append, page_size;
} append_spec;

static const append_spec append_cases[] = {
    {{FA_DTYPE_F16, 4, 1, 1024, 8, 2, 128, 0, false, false, false, " decode append=1", 0}, 1, 0},
    {{FA_DTYPE_BF16, 4, 4, 300, 8, 2, 64, 0, true, false, true, " decode append=4", 0}, 4, 0},
    {{FA_DTYPE_F32, 4, 1, 512, 4, 1, 64, 0, false, false, false, " decode paged=16 append=1", 0},
     1,
     16},
    {{FA_DTYPE_F16, 5, 4, 700, 8, 2, 128, 0, true, false, false, " decode paged=7 append=4", 0},
     4,
     7},
    {{FA_DTYPE_F32, 2, 37, 203, 4, 2, 32, 0, true, false, true, " append=37", 0}, 37, 0},
};

/* ---- decoding cases ---- */

/* Few query rows per KV head and many keys: the split-key forward where a backend has one
 * (CUDA), else its ordinary forward. "splitkv=N" asks for N chunks (fa_attention_desc.num_splits;
 * fewer where there are fewer 64-key quanta), "decode" lets the backend choose. Caches over 16k
 * keys are --full only, as in the table (the quick matrix stays short, and on lavapipe, CI's
 * Vulkan device, the backend refuses them anyway: llvmpipe's loop limit, vk_attention.c). */
static const edge_spec decodes[] = {
    {FA_DTYPE_F16, 2, 1, 4097, 8, 2, 128, 0, false, false, false, " decode", 0},
    {FA_DTYPE_BF16, 1, 1, 32768, 8, 2, 128, 0, true, false, false, " decode", 0},
    {FA_DTYPE_F32, 2, 1, 1000, 4, 1, 64, 0, false, false, false, " decode", 0},
    {FA_DTYPE_F16, 3, 4, 2000, 8, 2, 64, 0, true, false, false, " decode",
     0}, /* 16 rows per KV head */
    {FA_DTYPE_F16, 1, 16, 5000, 8, 2, 128, 0, true, false, false, " decode",
     0}, /* 64: the ordinary forward */
    {FA_DTYPE_F16, 2, 1, 1, 8, 2, 128, 0, false, false, false, " decode", 0},
    {FA_DTYPE_F16, 2, 1, 4097, 8, 8, 200, 0, false, false, false, " decode", 0},
    {FA_DTYPE_BF16, 1, 2, 3000, 4, 4, 40, 0, true, false, false, " decode", 0},
    {FA_DTYPE_F16, 2, 1, 4097, 8, 2, 128, 0, false, false, false, " splitkv=1", 1},
    {FA_DTYPE_F16, 2, 1, 4097, 8, 2, 128, 0, true, false, false, " splitkv=3", 3},
    {FA_DTYPE_BF16, 1, 1, 100, 8, 2, 64, 0, false, false, false, " splitkv=256", 256},
    {FA_DTYPE_F32, 2, 4, 700, 8, 2, 128, 0, true, false, false, " splitkv=7", 7},
    {FA_DTYPE_F16, 1, 1, 65536, 4, 1, 128, 0, false, false, false, " splitkv=256", 256},
    {FA_DTYPE_F16, 2, 3, 300, 8, 2, 256, 0, true, false, false, " splitkv=5", 5},
    {FA_DTYPE_F16, 2, 4, 2, 4, 1, 64, 0, true, false, false, " splitkv=2 edge:no-key-rows", 2},
    {FA_DTYPE_BF16, 1, 1, 16000, 16, 16, 96, 0, false, false, false, " splitkv=64", 64},
    /* f16 at a head dim where lavapipe's 32 KiB of shared memory holds the Vulkan decoding
     * module on matrices (CI's vulkan_matrix_lavapipe_decode) */
    {FA_DTYPE_F16, 2, 2, 1500, 8, 2, 32, 0, true, false, false, " splitkv=3", 3},
};

/* ---- sliding windows and logit softcapping (fa_attention_desc.window, softcap) ---- */

/* Windows that cut key tiles on both sides, windows smaller than any tile (down to the diagonal
 * alone), left-only (with causal: Mistral's), right-only, both, with GQA and MQA, Sq below and
 * above Sk (rows that see no key), bounds reaching past every key, decoding steps and split keys,
 * per-sequence lengths; softcaps of 30 and 50 at scores of 1e2 and 1e4 (where tanh saturates),
 * and the two together (Gemma 2's local layers); forward and backward. The cases share a few
 * dtype, head dim and mask combinations, so that the GPU backends build few programs for them. */
typedef struct variant_spec {
    edge_spec e;
    fa_window window;
    float softcap;
    float logits; /* 0: 1 */
    bool seqlens;
    int alibi; /* tk_case.alibi */
    int bias;  /* tk_case.bias */
} variant_spec;

static const variant_spec variants[] = {
    {{FA_DTYPE_F32, 2, 300, 300, 2, 2, 64, 0, false, false, false, NULL, 0},
     {true, 32, 32},
     0,
     0,
     false,
     0,
     0},
    {{FA_DTYPE_F16, 1, 1000, 1000, 8, 2, 128, 0, true, false, false, NULL, 0},
     {true, 256, -1},
     0,
     0,
     false,
     0,
     0},
    {{FA_DTYPE_F16, 2, 200, 200, 8, 2, 128, 0, false, false, true, NULL, 0},
     {true, 5, 0},
     0,
     0,
     false,
     0,
     0},
    {{FA_DTYPE_BF16, 2, 113, 203, 4, 1, 32, 0, false, false, false, NULL, 0},
     {true, -1, 7},
     0,
     0,
     false,
     0,
     0},
    {{FA_DTYPE_F32, 2, 203, 113, 2, 2, 64, 0, false, false, false, " edge:no-key-rows", 0},
     {true, 10, 3},
     0,
     0,
     false,
     0,
     0},
    {{FA_DTYPE_F32, 2, 64, 64, 2, 2, 64, 0, false, false, false, NULL, 0},
     {true, -1, -1},
     0,
     0,
     false,
     0,
     0},
    {{FA_DTYPE_F32, 1, 77, 77, 2, 2, 64, 0, true, false, false, NULL, 0},
     {true, 1000, 5},
     0,
     0,
     false,
     0,
     0},
    {{FA_DTYPE_F16, 2, 1, 2000, 8, 2, 128, 0, true, false, false, " decode", 0},
     {true, 100, -1},
     0,
     0,
     false,
     0,
     0},
    {{FA_DTYPE_F16, 2, 4, 3000, 8, 2, 128, 0, true, false, false, " decode splitkv=4", 4},
     {true, 512, 0},
     0,
     0,
     false,
     0,
     0},
    {{FA_DTYPE_F16, 4, 37, 203, 8, 2, 128, 0, true, false, false, " seqlens", 0},
     {true, 20, 0},
     0,
     0,
     true,
     0,
     0},
    {{FA_DTYPE_F32, 2, 300, 300, 2, 2, 64, 0, false, true, false, NULL, 0},
     {true, 32, 32},
     0,
     0,
     false,
     0,
     0},
    {{FA_DTYPE_F16, 1, 513, 513, 8, 2, 128, 0, true, true, false, NULL, 0},
     {true, 100, -1},
     0,
     0,
     false,
     0,
     0},
    {{FA_DTYPE_BF16, 2, 113, 203, 4, 1, 32, 0, false, true, true, NULL, 0},
     {true, -1, 7},
     0,
     0,
     false,
     0,
     0},
    {{FA_DTYPE_F32, 2, 203, 113, 2, 2, 64, 0, false, true, false, " edge:no-key-rows", 0},
     {true, 10, 3},
     0,
     0,
     false,
     0,
     0},
    {{FA_DTYPE_F16, 2, 150, 150, 8, 2, 128, 0, false, true, false, NULL, 0},
     {true, 0, 0},
     0,
     0,
     false,
     0,
     0},
    {{FA_DTYPE_F32, 2, 300, 300, 2, 2, 64, 0, false, false, false, NULL, 0},
     {false, 0, 0},
     30.0f,
     1e2f,
     false,
     0,
     0},
    {{FA_DTYPE_F16, 1, 1000, 1000, 8, 2, 128, 0, true, false, false, NULL, 0},
     {false, 0, 0},
     50.0f,
     1e2f,
     false,
     0,
     0},
    {{FA_DTYPE_BF16, 2, 129, 257, 4, 1, 64, 0, false, false, true, NULL, 0},
     {false, 0, 0},
     30.0f,
     1e4f,
     false,
     0,
     0},
    {{FA_DTYPE_F16, 2, 1, 3000, 8, 2, 128, 0, true, false, false, " decode", 0},
     {false, 0, 0},
     50.0f,
     1e2f,
     false,
     0,
     0},
    {{FA_DTYPE_F32, 2, 200, 200, 2, 2, 64, 0, false, true, false, NULL, 0},
     {false, 0, 0},
     50.0f,
     1e2f,
     false,
     0,
     0},
    {{FA_DTYPE_F16, 1, 300, 300, 8, 2, 128, 0, true, true, true, NULL, 0},
     {false, 0, 0},
     30.0f,
     1e2f,
     false,
     0,
     0},
    {{FA_DTYPE_BF16, 2, 129, 257, 4, 1, 64, 0, false, true, false, NULL, 0},
     {false, 0, 0},
     50.0f,
     1e4f,
     false,
     0,
     0},
    {{FA_DTYPE_F32, 2, 100, 100, 2, 2, 64, 0, false, true, false, NULL, 0},
     {false, 0, 0},
     30.0f,
     0,
     false,
     0,
     0},
    {{FA_DTYPE_F16, 2, 500, 500, 8, 2, 128, 0, true, false, false, NULL, 0},
     {true, 128, 0},
     50.0f,
     1e2f,
     false,
     0,
     0},
    {{FA_DTYPE_F16, 2, 300, 300, 8, 2, 128, 0, true, true, false, NULL, 0},
     {true, 64, 0},
     30.0f,
     1e2f,
     false,
     0,
     0},
    /* ALiBi: a slope per head and per (batch, head), Sq above and below Sk, GQA and MQA, a
     * decoding step and split keys (which paths without ALiBi hand over), per-sequence lengths
     * (the distance from each sequence's own diagonal), with a window and a softcap; forward and
     * backward. */
    {{FA_DTYPE_F32, 2, 300, 300, 2, 2, 64, 0, false, false, false, NULL, 0},
     {false, 0, 0},
     0,
     0,
     false,
     1,
     0},
    {{FA_DTYPE_F16, 2, 500, 500, 8, 2, 128, 0, true, false, false, NULL, 0},
     {false, 0, 0},
     0,
     0,
     false,
     2,
     0},
    {{FA_DTYPE_BF16, 2, 113, 203, 4, 1, 32, 0, false, false, true, NULL, 0},
     {false, 0, 0},
     0,
     0,
     false,
     2,
     0},
    {{FA_DTYPE_F16, 2, 1, 2000, 8, 2, 128, 0, true, false, false, " decode splitkv=4", 4},
     {false, 0, 0},
     0,
     0,
     false,
     1,
     0},
    {{FA_DTYPE_F16, 4, 37, 203, 8, 2, 128, 0, true, false, false, " seqlens", 0},
     {false, 0, 0},
     0,
     0,
     true,
     2,
     0},
    {{FA_DTYPE_F32, 2, 300, 300, 2, 2, 64, 0, false, true, false, NULL, 0},
     {false, 0, 0},
     0,
     0,
     false,
     1,
     0},
    {{FA_DTYPE_BF16, 2, 203, 113, 4, 1, 64, 0, true, true, true, " edge:no-key-rows", 0},
     {false, 0, 0},
     0,
     0,
     false,
     2,
     0},
    {{FA_DTYPE_F16, 2, 400, 400, 8, 2, 128, 0, true, false, false, NULL, 0},
     {true, 128, 0},
     50.0f,
     1e2f,
     false,
     2,
     0},
    {{FA_DTYPE_F16, 2, 300, 300, 8, 2, 128, 0, true, true, false, NULL, 0},
     {true, 64, 0},
     30.0f,
     1e2f,
     false,
     1,
     0},
    /* The three together in f16 at head dims 32 and 64, where the matrix paths keep their rows'
     * state in registers (on lavapipe only there): a window cutting key tiles on both sides
     * with Sq below Sk, a causal one with Sq above Sk (rows without keys); forward and
     * backward (the first two share their forward's program: CI's lavapipe test runs them). */
    {{FA_DTYPE_F16, 2, 113, 203, 8, 2, 32, 0, false, false, false, NULL, 0},
     {true, 24, 8},
     30.0f,
     1e2f,
     false,
     2,
     0},
    {{FA_DTYPE_F16, 2, 150, 300, 8, 2, 32, 0, false, true, true, NULL, 0},
     {true, 40, 16},
     50.0f,
     1e2f,
     false,
     2,
     0},
    {{FA_DTYPE_F16, 2, 203, 113, 8, 2, 64, 0, true, false, false, " edge:no-key-rows", 0},
     {true, 20, 0},
     30.0f,
     1e2f,
     false,
     1,
     0},
    {{FA_DTYPE_F16, 2, 203, 113, 8, 2, 64, 0, true, true, false, " edge:no-key-rows", 0},
     {true, 20, 0},
     30.0f,
     1e2f,
     false,
     1,
     0},
    /* An additive bias: in the call's dtype (B, Sq, Hq, Sk) packed (bias=full), f32 broadcast
     * over batch and heads by zero strides (bias=bcast), in the call's dtype of shape
     * (1, Sq, 1, Sk) holding -inf for about a third of its entries and for every key of query 0
     * (bias=mask: hidden keys, a row without keys); with ALiBi, a window, a softcap, per-sequence
     * lengths and a decoding step; forward and backward. */
    {{FA_DTYPE_F32, 2, 200, 200, 2, 2, 64, 0, false, false, false, NULL, 0},
     {false, 0, 0},
     0,
     0,
     false,
     0,
     1},
    {{FA_DTYPE_F16, 2, 300, 300, 8, 2, 128, 0, true, false, false, NULL, 0},
     {false, 0, 0},
     0,
     0,
     false,
     0,
     2},
    {{FA_DTYPE_BF16, 2, 113, 203, 4, 1, 32, 0, false, false, true, NULL, 0},
     {false, 0, 0},
     0,
     0,
     false,
     0,
     3},
    {{FA_DTYPE_F16, 2, 1, 2000, 8, 2, 128, 0, true, false, false, " decode", 0},
     {false, 0, 0},
     0,
     0,
     false,
     0,
     1},
    {{FA_DTYPE_F16, 4, 37, 203, 8, 2, 128, 0, true, false, false, " seqlens", 0},
     {false, 0, 0},
     0,
     0,
     true,
     2,
     2},
    {{FA_DTYPE_F32, 2, 200, 200, 2, 2, 64, 0, false, true, false, NULL, 0},
     {false, 0, 0},
     0,
     0,
     false,
     0,
     1},
    {{FA_DTYPE_F16, 2, 257, 257, 8, 2, 64, 0, true, true, true, NULL, 0},
     {false, 0, 0},
     0,
     0,
     false,
     0,
     3},
    {{FA_DTYPE_F16, 2, 300, 300, 8, 2, 128, 0, true, true, false, NULL, 0},
     {true, 64, 0},
     30.0f,
     1e2f,
     false,
     1,
     2},
    /* f16 biases whose key count is a multiple of 8, so that the Vulkan matrix shaders read
     * whole blocks of them (fa_bias.glsl), the edges per element: packed, and a mask with a row
     * without keys, causal; forward and backward. */
    {{FA_DTYPE_F16, 2, 192, 256, 8, 2, 64, 0, false, false, false, NULL, 0},
     {false, 0, 0},
     0,
     0,
     false,
     0,
     1},
    {{FA_DTYPE_F16, 2, 192, 256, 8, 2, 64, 0, true, true, false, NULL, 0},
     {false, 0, 0},
     0,
     0,
     false,
     0,
     3},
};

/* FP8: e4m3 q, k and v, o in a wider dtype, descale factors broadcast three ways or absent,
 * through the plain, GQA-packed, decoding, split-key, paged, append and variant paths. Backends
 * without an FP8 forward skip them (ERROR_UNSUPPORTED_DTYPE). */
typedef struct fp8_spec {
    edge_spec e;
    fa_dtype o_dtype;
    int descale; /* tk_case.descale */
    int32_t page_size, append;
    bool seqlens;
    fa_window window;
    float softcap;
    int alibi;
} fp8_spec;

static const fp8_spec fp8_cases[] = {
    {.e = {FA_DTYPE_E4M3, 2, 130, 130, 4, 4, 64, 0, false, false, false, " fp8 o=f16 descale=bh",
           0},
     .o_dtype = FA_DTYPE_F16,
     .descale = 3},
    {.e = {FA_DTYPE_E4M3, 2, 97, 203, 8, 2, 128, 0, true, false, true, " fp8 o=bf16 descale=h", 0},
     .o_dtype = FA_DTYPE_BF16,
     .descale = 2},
    {.e = {FA_DTYPE_E4M3, 1, 64, 300, 2, 1, 32, 0, false, false, false, " fp8 o=f32", 0},
     .o_dtype = FA_DTYPE_F32},
    {.e = {FA_DTYPE_E4M3, 3, 1, 2000, 8, 2, 128, 0, true, false, false,
           " fp8 decode o=f16 descale=bh", 0},
     .o_dtype = FA_DTYPE_F16,
     .descale = 3},
    {.e = {FA_DTYPE_E4M3, 1, 4, 1500, 8, 2, 64, 0, true, false, false,
           " fp8 decode splitkv=6 o=f32 descale=t", 6},
     .o_dtype = FA_DTYPE_F32,
     .descale = 1},
    {.e = {FA_DTYPE_E4M3, 3, 1, 1024, 8, 2, 128, 0, false, false, false,
           " fp8 decode paged=16 seqlens o=bf16 descale=bh", 0},
     .o_dtype = FA_DTYPE_BF16,
     .descale = 3,
     .page_size = 16,
     .seqlens = true},
    {.e = {FA_DTYPE_E4M3, 3, 2, 512, 4, 1, 64, 0, true, false, false,
           " fp8 decode append=2 o=f16 descale=h", 0},
     .o_dtype = FA_DTYPE_F16,
     .descale = 2,
     .append = 2,
     .seqlens = true},
    {.e = {FA_DTYPE_E4M3, 2, 200, 200, 4, 2, 64, 0, true, false, false, " fp8 o=f16 descale=bh", 0},
     .o_dtype = FA_DTYPE_F16,
     .descale = 3,
     .window = {true, 48, 0},
     .softcap = 20.0f,
     .alibi = 2},
};

int64_t tk_cases_generate(bool full, uint64_t seed, tk_case **out)
{
    axes a = table_axes(full);
    int64_t n_table;
    int(*rows)[AX_COUNT] = NULL;
    if (full) {
        n_table = 1;
        for (int x = 0; x < AX_COUNT; x++)
            n_table *= a.size[x];
    } else {
        n_table = covering_array(&a, &rows);
    }
    const int64_t n_edges = (int64_t)(sizeof edges / sizeof edges[0]);
    const int64_t n_decodes = (int64_t)(sizeof decodes / sizeof decodes[0]);
    const int64_t n_seqlens = (int64_t)(sizeof seqlens_cases / sizeof seqlens_cases[0]);
    const int64_t n_paged = (int64_t)(sizeof paged_cases / sizeof paged_cases[0]);
    const int64_t n_planted = (int64_t)(sizeof planted / sizeof planted[0]);
    const int64_t n_append = (int64_t)(sizeof append_cases / sizeof append_cases[0]);
    const int64_t n_variants = (int64_t)(sizeof variants / sizeof variants[0]);
    const int64_t n_varlen = (int64_t)(sizeof varlen_cases / sizeof varlen_cases[0]);
    const int64_t n_fp8 = (int64_t)(sizeof fp8_cases / sizeof fp8_cases[0]);
    /* --full: the quick array's cases with logits above 1 follow the product */
    int(*extra)[AX_COUNT] = NULL;
    const axes quick = table_axes(false);
    const int64_t n_extra = full ? covering_array(&quick, &extra) : 0;
    tk_case *cases =
        malloc((size_t)(n_table + n_extra + n_edges + n_planted + n_decodes + n_seqlens + n_paged +
                        n_append + n_variants + n_varlen + n_fp8) *
               sizeof *cases);
    if (!cases) {
        free(rows);
        free(extra);
        *out = NULL;
        return 0;
    }
    for (int64_t c = 0; c < n_table; c++) {
        int val[AX_COUNT];
        if (full) {
            int64_t rest = c;
            for (int x = AX_COUNT - 1; x >= 0; x--) {
                val[x] = (int)(rest % a.size[x]);
                rest /= a.size[x];
            }
        } else {
            memcpy(val, rows[c], sizeof val);
        }
        cases[c] = case_from_values(&a, val);
    }
    int64_t n = n_table;
    for (int64_t c = 0; c < n_extra; c++)
        if (extra[c][AX_LOGITS] != 0)
            cases[n++] = case_from_values(&quick, extra[c]);
    for (int64_t e = 0; e < n_edges; e++)
        cases[n++] = case_from_edge(&edges[e]);
    for (int64_t e = 0; e < n_planted; e++) {
        cases[n] = case_from_edge(&planted[e].e);
        cases[n].logits = planted[e].logits;
        cases[n].special = planted[e].special;
        name_case(&cases[n], planted[e].e.extra);
        n++;
    }
    for (int64_t e = 0; e < n_decodes; e++)
        if (full || decodes[e].sk <= 16384)
            cases[n++] = case_from_edge(&decodes[e]);
    for (int64_t e = 0; e < n_seqlens; e++) {
        cases[n] = case_from_edge(&seqlens_cases[e]);
        cases[n++].seqlens = true;
    }
    for (int64_t e = 0; e < n_paged; e++) {
        cases[n] = case_from_edge(&paged_cases[e].e);
        cases[n].seqlens = paged_cases[e].seqlens;
        cases[n++].page_size = paged_cases[e].page_size;
    }
    for (int64_t e = 0; e < n_append; e++) {
        cases[n] = case_from_edge(&append_cases[e].e);
        cases[n].seqlens = true;
        cases[n].append = append_cases[e].append;
        cases[n++].page_size = append_cases[e].page_size;
    }
    for (int64_t e = 0; e < n_variants; e++) {
        cases[n] = case_from_edge(&variants[e].e);
        cases[n].p.window = variants[e].window;
        cases[n].p.softcap = variants[e].softcap;
        cases[n].logits = variants[e].logits;
        cases[n].seqlens = variants[e].seqlens;
        cases[n].alibi = variants[e].alibi;
        cases[n].bias = variants[e].bias;
        name_case(&cases[n], variants[e].e.extra);
        n++;
    }
    for (int64_t e = 0; e < n_varlen; e++) {
        cases[n] = case_from_edge(&varlen_cases[e].e);
        cases[n].p.window = varlen_cases[e].window;
        cases[n].p.softcap = varlen_cases[e].softcap;
        cases[n].logits = varlen_cases[e].logits;
        cases[n].alibi = varlen_cases[e].alibi;
        cases[n].varlen = true;
        name_case(&cases[n], varlen_cases[e].e.extra);
        n++;
    }
    for (int64_t e = 0; e < n_fp8; e++) {
        const fp8_spec *f = &fp8_cases[e];
        cases[n] = case_from_edge(&f->e);
        cases[n].p.o_dtype = f->o_dtype;
        cases[n].descale = f->descale;
        cases[n].page_size = f->page_size;
        cases[n].append = f->append;
        cases[n].seqlens = f->seqlens;
        cases[n].p.window = f->window;
        cases[n].p.softcap = f->softcap;
        cases[n].alibi = f->alibi;
        name_case(&cases[n], f->e.extra);
        n++;
    }
    for (int64_t c = 0; c < n; c++) {
        uint64_t s = seed * 0x9e3779b97f4a7c15ull + (uint64_t)c;
        cases[c].seed = fa_testkit_splitmix64(&s);
    }
    free(rows);
    free(extra);
    *out = cases;
    return n;
}

void tk_case_fill_inputs(const tk_case *c, const tk_inputs *in)
{
    const fa_ref_problem *p = &c->p;
    const size_t nq = (size_t)(p->batch * p->seq_q * p->heads_q * p->head_dim);
    const size_t nk = (size_t)(p->batch * p->seq_k * p->heads_kv * p->head_dim);
    fa_testkit_fill_random(in->q, p->dtype, nq, c->seed + 1);
    fa_testkit_fill_random(in->k, p->dtype, nk, c->seed + 2);
    fa_testkit_fill_random(in->v, p->dtype, nk, c->seed + 3);
    if (in->d_o)
        fa_testkit_fill_random(in->d_o, p->dtype, nq, c->seed + 4);
    if (c->logits > 1.0f) {
        const double f = sqrt((double)c->logits);
        for (size_t x = 0; x < nq; x++)
            fa_testkit_store(in->q, p->dtype, x, f * fa_testkit_load(in->q, p->dtype, x));
        for (size_t x = 0; x < nk; x++)
            fa_testkit_store(in->k, p->dtype, x, f * fa_testkit_load(in->k, p->dtype, x));
    }
    const tk_special *sp = &c->special;
    void *target = sp->tensor == 'q'   ? in->q
                   : sp->tensor == 'k' ? in->k
                   : sp->tensor == 'v' ? in->v
                   : sp->tensor == 'o' ? in->d_o
                                       : NULL;
    const int64_t heads = sp->tensor == 'q' || sp->tensor == 'o' ? p->heads_q : p->heads_kv;
    if (target) /* batch 0, head 0 */
        fa_testkit_store(target, p->dtype, (size_t)(sp->s * heads * p->head_dim + sp->d),
                         sp->value);
}

void tk_case_alibi_slopes(const tk_case *c, float *out)
{
    const int64_t hq = c->p.heads_q, n = c->alibi == 2 ? c->p.batch * hq : hq;
    uint64_t state = c->seed + 6;
    for (int64_t x = 0; x < n; x++) {
        const double u = (double)(fa_testkit_splitmix64(&state) >> 11) * 0x1.0p-53;
        out[x] = (float)(exp2(-8.0 * (double)(x % hq + 1) / (double)hq) * (0.5 + u));
    }
}

void tk_case_descales(const tk_case *c, float *out[3])
{
    const int64_t B = c->p.batch, H = c->p.heads_kv;
    uint64_t state = c->seed + 7;
    for (int x = 0; x < 3; x++)
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++) {
                /* the factor of (b, h), or of (0, h) or (0, 0) where the case broadcasts */
                const bool fresh = c->descale == 3 || (b == 0 && (c->descale == 2 || h == 0));
                const double u = (double)(fa_testkit_splitmix64(&state) >> 11) * 0x1.0p-53;
                out[x][b * H + h] = fresh             ? (float)(0.25 + 1.75 * u)
                                    : c->descale == 2 ? out[x][h]
                                                      : out[x][0];
            }
}

bool tk_case_bias(const tk_case *c, tk_bias *out)
{
    const fa_ref_problem *p = &c->p;
    memset(out, 0, sizeof *out);
    const int64_t B = p->batch, Sq = p->seq_q, Hq = p->heads_q, Sk = p->seq_k;
    const bool mask = c->bias == 3, bcast = c->bias == 2;
    out->dtype = bcast ? FA_DTYPE_F32 : fa_ref_o_dtype(p); /* FP8: a bias is never e4m3 */
    const int64_t shape[4] = {mask ? 1 : B, Sq, mask ? 1 : Hq, Sk};
    memcpy(out->shape, shape, sizeof shape);
    /* packed over the dimensions it holds; bias=bcast holds one (query, key) plane */
    out->stride[3] = 1;
    out->stride[2] = bcast ? 0 : Sk;
    out->stride[1] = bcast ? Sk : shape[2] * Sk;
    out->stride[0] = bcast ? 0 : Sq * shape[2] * Sk;
    out->count = bcast ? Sq * Sk : shape[0] * Sq * shape[2] * Sk;
    /* 4 bytes more than the elements, zero: the device buffer is made from this image with 4
     * spare bytes (conformance_exec.c) */
    const size_t bytes = (size_t)(out->count > 0 ? out->count : 1) * fa_dtype_size(out->dtype);
    out->data = calloc(1, bytes + 4);
    if (!out->data)
        return false;
    fa_testkit_fill_random(out->data, out->dtype, (size_t)out->count, c->seed + 7);
    uint64_t state = c->seed + 8;
    for (int64_t x = 0; x < out->count; x++) {
        double v = 2.0 * fa_testkit_load(out->data, out->dtype, (size_t)x);
        if (mask && (x < Sk || fa_testkit_rand_below(&state, 3) == 0))
            v = -INFINITY; /* query 0 sees no key; a third of the others are hidden */
        fa_testkit_store(out->data, out->dtype, (size_t)x, v);
    }
    return true;
}

int64_t fa_conformance_case_count(bool full)
{
    tk_case *cases;
    int64_t n = tk_cases_generate(full, 1, &cases);
    free(cases);
    return n;
}
