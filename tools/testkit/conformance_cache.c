// SPDX-License-Identifier: MIT
/* The K/V cache of a conformance case as the device holds it: paged (the pages of each sequence
 * shuffled over the cache, spare pages between), and the inputs of an append (the lengths before
 * it, and the rows k_new and v_new carry). */
#include "tk_internal.h"

#include <stdlib.h>
#include <string.h>

bool tk_paged_init(tk_paged *pg, const tk_case *c, const tk_inputs *in, const int32_t *lens)
{
    const fa_ref_problem *p = &c->p;
    const int64_t ps = c->page_size, B = p->batch;
    const size_t row = (size_t)(p->heads_kv * p->head_dim) * fa_dtype_size(p->dtype);
    pg->max_pages = p->seq_k / ps;
    pg->num_pages = B * pg->max_pages + 2;
    const size_t n = (size_t)pg->num_pages;
    pg->table = malloc((size_t)(B * pg->max_pages + 1) * sizeof *pg->table);
    pg->k = malloc(n * (size_t)ps * row);
    pg->v = malloc(n * (size_t)ps * row);
    int32_t *perm = malloc(n * sizeof *perm);
    if (!pg->table || !pg->k || !pg->v || !perm) {
        free(perm);
        return false;
    }
    uint64_t s = c->seed ^ 0x9a6edca5eull;
    for (size_t i = 0; i < n; i++)
        perm[i] = (int32_t)i;
    for (size_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
        const size_t j = (size_t)(fa_testkit_splitmix64(&s) % (uint64_t)(i + 1));
        const int32_t x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    memset(pg->k, 0x5a, n * (size_t)ps * row); /* spare rows: finite values that would show */
    memset(pg->v, 0x5a, n * (size_t)ps * row);
    for (int64_t b = 0; b < B; b++) {
        const int64_t len = lens ? lens[b] : p->seq_k;
        for (int64_t pi = 0; pi < pg->max_pages; pi++) {
            const int32_t page = perm[b * pg->max_pages + pi];
            pg->table[b * pg->max_pages + pi] = pi * ps < len ? page : -1;
            const size_t from = (size_t)(b * p->seq_k + pi * ps) * row;
            memcpy(pg->k + (size_t)page * (size_t)ps * row, (const unsigned char *)in->k + from,
                   (size_t)ps * row);
            memcpy(pg->v + (size_t)page * (size_t)ps * row, (const unsigned char *)in->v + from,
                   (size_t)ps * row);
        }
    }
    free(perm);
    return true;
}

void tk_paged_free(tk_paged *pg)
{
    free(pg->table);
    free(pg->k);
    free(pg->v);
}

void tk_cache_slot(const tk_case *c, const tk_paged *pg, int64_t b, int64_t pos, int64_t *block,
                   int64_t *row)
{
    *block = b;
    *row = pos;
    if (pg->table) {
        *block = pg->table[b * pg->max_pages + pos / c->page_size];
        *row = pos % c->page_size;
    }
}

bool tk_append_init(tk_append *ap, const tk_case *c, const tk_inputs *in, const int32_t *lens_after)
{
    const fa_ref_problem *p = &c->p;
    const size_t row = (size_t)(p->heads_kv * p->head_dim) * fa_dtype_size(p->dtype);
    const size_t rows = (size_t)(p->batch * c->append);
    memset(ap, 0, sizeof *ap);
    ap->lens = malloc((size_t)p->batch * sizeof *ap->lens + 4);
    ap->k_new = malloc(rows * row + 4);
    ap->v_new = malloc(rows * row + 4);
    if (!ap->lens || !ap->k_new || !ap->v_new)
        return false;
    for (int64_t b = 0; b < p->batch; b++) {
        ap->lens[b] = lens_after[b] - c->append;
        const size_t from = (size_t)(b * p->seq_k + ap->lens[b]) * row;
        const size_t to = (size_t)(b * c->append) * row;
        memcpy((unsigned char *)ap->k_new + to, (const unsigned char *)in->k + from,
               (size_t)c->append * row);
        memcpy((unsigned char *)ap->v_new + to, (const unsigned char *)in->v + from,
               (size_t)c->append * row);
    }
    return true;
}

void tk_append_free(tk_append *ap)
{
    free(ap->lens);
    free(ap->k_new);
    free(ap->v_new);
    memset(ap, 0, sizeof *ap);
}
