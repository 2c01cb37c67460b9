// SPDX-License-Identifier: MIT
/* One conformance case on one backend, through the public API only.
 *
 * Every tensor gets its own buffer: TK_OFFSET bytes of guard, the tensor (packed BSHD or BHSD),
 * TK_GUARD bytes of guard, all first filled with a NaN poison whose payload no arithmetic
 * produces (f32 0xFFC0DEAD, f16/bf16 0xFFED, a NaN in both 16-bit formats). After the calls the
 * whole of every buffer is read back: guards must still hold the poison, inputs must be
 * unchanged, every output element must have been written (no poison left) and be finite where
 * the reference is, and the values are compared with the float64 reference under the
 * baseline-relative tolerance. A backward case runs the backend's own forward first and feeds
 * its O and LSE to the backward, as a caller would. An append case's K and V start as the cache
 * after the append with the rows it writes poisoned, and must end as that cache bit for bit. */
#include "tk_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TK_OFFSET 256
#define TK_GUARD 256
#define TK_POISON32 0xFFC0DEADu
#define TK_POISON16 0xFFEDu
#define TK_POISON8 0xFFu /* e4m3: a NaN */

typedef struct tbuf {
    const char *name;
    bool output, lse, bhsd;
    fa_dtype dtype; /* F32 for the LSE */
    size_t esize;
    int64_t B, S, H, D;
    size_t count, bytes, total;
    fa_buffer *buf;
    unsigned char *image; /* what the buffer must hold (outputs: poison, until written) */
    unsigned char *got;   /* what it held when read back */
    fa_tensor tensor;
} tbuf;

enum { T_Q, T_K, T_V, T_O, T_LSE, T_DO, T_DQ, T_DK, T_DV, T_COUNT };

static void note(tk_result *r, const char *fmt, ...)
{
    size_t used = strlen(r->detail);
    if (used + 4 >= sizeof r->detail)
        return;
    if (used > 0) {
        memcpy(r->detail + used, "; ", 3);
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->detail + used, sizeof r->detail - used, fmt, ap);
    va_end(ap);
}

static void fail(tk_result *r, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->outcome = TK_FAIL;
    note(r, "%s", msg);
}

static void poison_fill(unsigned char *p, size_t n, size_t esize)
{
    uint32_t w32 = TK_POISON32;
    uint16_t w16 = TK_POISON16;
    uint8_t w8 = TK_POISON8;
    const void *w = esize == 4 ? (const void *)&w32 : esize == 2 ? (const void *)&w16 : &w8;
    for (size_t x = 0; x + esize <= n; x += esize)
        memcpy(p + x, w, esize);
}

static bool is_poison(const unsigned char *p, size_t esize)
{
    if (esize == 1)
        return *p == TK_POISON8;
    if (esize == 4) {
        uint32_t w;
        memcpy(&w, p, 4);
        return w == TK_POISON32;
    }
    uint16_t w;
    memcpy(&w, p, 2);
    return w == TK_POISON16;
}

/* Element index within the tensor's region for logical (b, s, h, d). */
static size_t elem_index(const tbuf *tb, int64_t b, int64_t s, int64_t h, int64_t d)
{
    if (tb->lse)
        return (size_t)((b * tb->H + h) * tb->S + s);
    if (tb->bhsd)
        return (size_t)(((b * tb->H + h) * tb->S + s) * tb->D + d);
    return (size_t)(((b * tb->S + s) * tb->H + h) * tb->D + d);
}

static double elem_value(const tbuf *tb, const unsigned char *buffer, size_t index)
{
    return fa_testkit_load(buffer + TK_OFFSET, tb->dtype, index);
}

static void tbuf_init(tbuf *tb, const char *name, bool output, fa_dtype dtype, bool bhsd, int64_t B,
                      int64_t S, int64_t H, int64_t D, bool lse)
{
    memset(tb, 0, sizeof *tb);
    tb->name = name;
    tb->output = output;
    tb->lse = lse;
    tb->bhsd = bhsd && !lse;
    tb->dtype = lse ? FA_DTYPE_F32 : dtype;
    tb->esize = fa_dtype_size(tb->dtype);
    tb->B = B;
    tb->S = S;
    tb->H = H;
    tb->D = lse ? 1 : D;
    tb->count = (size_t)(B * S * H * tb->D);
    tb->bytes = tb->count * tb->esize;
    tb->total = TK_OFFSET + tb->bytes + TK_GUARD;
}

/* Builds the image (poison, plus the data for an input given packed BSHD), creates the buffer
 * holding it and the tensor viewing it. */
static bool tbuf_create(fa_context *ctx, tbuf *tb, const void *packed, tk_result *r)
{
    tb->image = malloc(tb->total);
    tb->got = malloc(tb->total);
    if (!tb->image || !tb->got) {
        fail(r, "out of host memory for %s", tb->name);
        return false;
    }
    poison_fill(tb->image, tb->total, tb->esize);
    if (packed) {
        for (int64_t b = 0; b < tb->B; b++)
            for (int64_t s = 0; s < tb->S; s++)
                for (int64_t h = 0; h < tb->H; h++) {
                    size_t from = (size_t)(((b * tb->S + s) * tb->H + h) * tb->D) * tb->esize;
                    memcpy(tb->image + TK_OFFSET + elem_index(tb, b, s, h, 0) * tb->esize,
                           (const unsigned char *)packed + from, (size_t)tb->D * tb->esize);
                }
    }
    fa_status st =
        fa_buffer_create(ctx, &(fa_buffer_desc){.size = tb->total, .data = tb->image}, &tb->buf);
    if (st != FA_OK) {
        fail(r, "fa_buffer_create(%s, %zu bytes): %s: %s", tb->name, tb->total, fa_status_name(st),
             fa_context_last_error(ctx));
        tb->buf = NULL;
        return false;
    }
    if (fa_buffer_size(tb->buf) != tb->total) {
        fail(r, "fa_buffer_size(%s) = %zu, expected %zu", tb->name, fa_buffer_size(tb->buf),
             tb->total);
        return false;
    }
    int64_t expect[4];
    if (tb->lse) {
        tb->tensor = fa_tensor_lse(tb->buf, tb->B, tb->H, tb->S);
        int64_t e[4] = {tb->H * tb->S, 1, tb->S, 1};
        memcpy(expect, e, sizeof e);
    } else if (tb->bhsd) {
        tb->tensor = fa_tensor_bhsd(tb->buf, tb->dtype, tb->B, tb->S, tb->H, tb->D);
        int64_t e[4] = {tb->H * tb->S * tb->D, tb->D, tb->S * tb->D, 1};
        memcpy(expect, e, sizeof e);
    } else {
        tb->tensor = fa_tensor_bshd(tb->buf, tb->dtype, tb->B, tb->S, tb->H, tb->D);
        int64_t e[4] = {tb->S * tb->H * tb->D, tb->H * tb->D, tb->D, 1};
        memcpy(expect, e, sizeof e);
    }
    /* all-zero strides mean the packed default layout, which is what we asked for */
    const int64_t *got = tb->tensor.stride;
    bool zero = got[0] == 0 && got[1] == 0 && got[2] == 0 && got[3] == 0;
    bool strides_ok = zero ? !tb->bhsd : memcmp(got, expect, sizeof expect) == 0;
    int64_t shape[4] = {tb->B, tb->S, tb->H, tb->D};
    if (!strides_ok || memcmp(tb->tensor.shape, shape, sizeof shape) != 0 ||
        tb->tensor.buffer != tb->buf || tb->tensor.dtype != tb->dtype) {
        fail(r,
             "the tensor helper for %s gave shape (%lld,%lld,%lld,%lld) strides "
             "(%lld,%lld,%lld,%lld)",
             tb->name, (long long)tb->tensor.shape[0], (long long)tb->tensor.shape[1],
             (long long)tb->tensor.shape[2], (long long)tb->tensor.shape[3], (long long)got[0],
             (long long)got[1], (long long)got[2], (long long)got[3]);
        return false;
    }
    tb->tensor.offset = TK_OFFSET;
    return true;
}

static bool tbuf_read(fa_context *ctx, tbuf *tb, tk_result *r)
{
    fa_status st = fa_buffer_read(tb->buf, 0, tb->got, tb->total);
    if (st != FA_OK) {
        fail(r, "fa_buffer_read(%s): %s: %s", tb->name, fa_status_name(st),
             fa_context_last_error(ctx));
        return false;
    }
    return true;
}

/* Guards must hold the poison; an input (or an output of a no-op) must equal its image. */
static void check_unchanged(tbuf *tb, bool whole, tk_result *r)
{
    if (memcmp(tb->got, tb->image, TK_OFFSET) != 0)
        fail(r, "guard before %s overwritten", tb->name);
    size_t end = TK_OFFSET + tb->bytes;
    if (memcmp(tb->got + end, tb->image + end, TK_GUARD) != 0)
        fail(r, "guard after %s overwritten", tb->name);
    if (whole && memcmp(tb->got + TK_OFFSET, tb->image + TK_OFFSET, tb->bytes) != 0) {
        size_t x = 0;
        while (tb->got[TK_OFFSET + x] == tb->image[TK_OFFSET + x])
            x++;
        fail(r, "%s %s changed (first at element %zu)", tb->output ? "output" : "input", tb->name,
             x / tb->esize);
    }
}

/* Every element written (no poison), finite unless it is the -inf LSE of a row seeing no key or
 * (`compared`: every element is compared with the reference, which may itself be NaN or
 * infinite) the comparison judges it. */
static void check_written(const tk_data *t, tbuf *tb, bool compared, tk_result *r)
{
    size_t unwritten = 0, non_finite = 0, first_unwritten = 0;
    const unsigned char *data = tb->got + TK_OFFSET;
    for (size_t x = 0; x < tb->count; x++) {
        const unsigned char *p = data + x * tb->esize;
        if (is_poison(p, tb->esize)) {
            if (unwritten++ == 0)
                first_unwritten = x;
            continue;
        }
        double v = fa_testkit_load(data, tb->dtype, x);
        if (isfinite(v) || compared)
            continue;
        /* packed (B, H, Sq): the batch entry and the query of element x */
        if (tb->lse && isinf(v) && v < 0 &&
            tk_visible_keys(t, (int64_t)(x / (size_t)(t->Sq * t->Hq)),
                            (int64_t)(x % (size_t)t->Sq)) == 0)
            continue;
        non_finite++;
    }
    if (unwritten)
        fail(r, "%zu of %zu elements of %s never written (first at element %zu)", unwritten,
             tb->count, tb->name, first_unwritten);
    if (non_finite)
        fail(r, "%zu non-finite elements in %s", non_finite, tb->name);
}

/* Rows that see no key: O = 0 and LSE = -inf exactly, dQ = 0. */
static void check_no_key_rows(const tk_data *t, const tbuf *o, const tbuf *lse, const tbuf *dq,
                              tk_result *r)
{
    int64_t bad_o = 0, bad_lse = 0, bad_dq = 0;
    for (int64_t i = 0; i < t->Sq; i++)
        for (int64_t b = 0; b < t->B; b++) {
            if (tk_visible_keys(t, b, i) > 0)
                continue;
            for (int64_t h = 0; h < t->Hq; h++) {
                double l = elem_value(lse, lse->got, elem_index(lse, b, i, h, 0));
                bad_lse += !(isinf(l) && l < 0);
                for (int64_t d = 0; d < t->D; d++) {
                    bad_o += elem_value(o, o->got, elem_index(o, b, i, h, d)) != 0.0;
                    if (dq)
                        bad_dq += elem_value(dq, dq->got, elem_index(dq, b, i, h, d)) != 0.0;
                }
            }
        }
    if (bad_o)
        fail(r, "%lld O elements of rows seeing no key are not 0", (long long)bad_o);
    if (bad_lse)
        fail(r, "%lld LSE values of rows seeing no key are not -inf", (long long)bad_lse);
    if (bad_dq)
        fail(r, "%lld dQ elements of rows seeing no key are not 0", (long long)bad_dq);
}

/* Gathers the backend's values on the expected query rows (krows: key rows) as doubles. */
static double *gather(const tk_data *t, const tbuf *tb, const int64_t *rows, int64_t n, bool keys)
{
    int64_t D = tb->D;
    double *out = malloc((size_t)(n * D > 0 ? n * D : 1) * sizeof *out);
    if (!out)
        return NULL;
    for (int64_t r = 0; r < n; r++) {
        int64_t b, h, s;
        if (keys)
            tk_krow_split(t, rows[r], &b, &h, &s);
        else
            tk_row_split(t, rows[r], &b, &h, &s);
        for (int64_t d = 0; d < D; d++)
            out[r * D + d] = elem_value(tb, tb->got, elem_index(tb, b, s, h, d));
    }
    return out;
}

/* The compared rows of one output: which (b, s, h) each gathered row is, for messages. */
typedef struct rowset {
    const tk_data *t;
    const int64_t *rows;
    bool keys;
} rowset;

/* err and tolerance of one output; returns err / tol. A failure names the worst element. */
static double compare(const char *name, const double *got, const double *ref, const double *base,
                      int64_t n, double k, rowset rs, double *err_out, double *tol_out,
                      tk_result *r)
{
    bool nf = false;
    double err = tk_max_abs_err(got, ref, n, &nf);
    double base_err = tk_max_abs_err_finite(base, ref, n);
    double tol = k * base_err + FA_TESTKIT_ABS_SLACK;
    *err_out = err;
    *tol_out = tol;
    if (!(err <= tol)) {
        int64_t worst = 0, b, h, s, D = rs.t->D;
        for (int64_t x = 0; x < n; x++)
            if (isfinite(err) ? fabs(got[x] - ref[x]) == err
                              : tk_non_finite_mismatch(got[x], ref[x])) {
                worst = x;
                if (!isfinite(err))
                    break; /* the first mismatch of a NaN or an infinity */
            }
        if (rs.keys)
            tk_krow_split(rs.t, rs.rows[worst / D], &b, &h, &s);
        else
            tk_row_split(rs.t, rs.rows[worst / D], &b, &h, &s);
        fail(r,
             "%s max error %.3g > tolerance %.3g (%.0fx baseline %.3g + 1e-5)%s, at b=%lld "
             "s=%lld h=%lld d=%lld: %.6g, expected %.6g",
             name, err, tol, k, base_err, nf ? " (non-finite where the reference is not)" : "",
             (long long)b, (long long)s, (long long)h, (long long)(worst % D), got[worst],
             ref[worst]);
    }
    return err / tol;
}

static void compare_all(const tk_data *t, const tk_expect *e, tbuf *tb, tk_result *r)
{
    int64_t D = t->D, nr = e->n_rows * D, nk = e->n_krows * D;
    double *o = gather(t, &tb[T_O], e->rows, e->n_rows, false);
    double *lse = gather(t, &tb[T_LSE], e->rows, e->n_rows, false);
    double *dq = e->backward ? gather(t, &tb[T_DQ], e->rows, e->n_rows, false) : NULL;
    double *dk = e->backward ? gather(t, &tb[T_DK], e->krows, e->n_krows, true) : NULL;
    double *dv = e->backward ? gather(t, &tb[T_DV], e->krows, e->n_krows, true) : NULL;
    if (!o || !lse || (e->backward && (!dq || !dk || !dv))) {
        fail(r, "out of host memory");
    } else {
        r->sampled = !e->full;
        const rowset q_rows = {t, e->rows, false}, k_rows = {t, e->krows, true};
        r->ratio =
            compare("O", o, e->o, e->bo, nr, FA_TESTKIT_K_FORWARD, q_rows, &r->err_o, &r->tol_o, r);
        bool nf = false;
        r->err_lse = tk_max_lse_err(lse, e->lse, e->n_rows, &nf);
        if (!(r->err_lse <= FA_TESTKIT_LSE_REL))
            fail(r, "LSE max relative error %.3g > %.0e%s", r->err_lse, FA_TESTKIT_LSE_REL,
                 nf ? " (non-finite)" : "");
        r->ratio = fmax(r->ratio, r->err_lse / FA_TESTKIT_LSE_REL);
        if (e->backward) {
            const double k = FA_TESTKIT_K_BACKWARD;
            r->ratio = fmax(r->ratio, compare("dQ", dq, e->dq, e->bdq, nr, k, q_rows, &r->err_dq,
                                              &r->tol_dq, r));
            r->ratio = fmax(r->ratio, compare("dK", dk, e->dk, e->bdk, nk, k, k_rows, &r->err_dk,
                                              &r->tol_dk, r));
            r->ratio = fmax(r->ratio, compare("dV", dv, e->dv, e->bdv, nk, k, k_rows, &r->err_dv,
                                              &r->tol_dv, r));
        }
    }
    free(o);
    free(lse);
    free(dq);
    free(dk);
    free(dv);
}

/* OK continues; an unsupported status is a skip with the reason; anything else fails. */
static bool call_ok(fa_context *ctx, const char *what, fa_status st, tk_result *r)
{
    if (st == FA_OK)
        return true;
    if (st <= FA_ERROR_UNSUPPORTED && st > FA_ERROR_UNSUPPORTED - 10) {
        r->outcome = TK_SKIP;
        snprintf(r->detail, sizeof r->detail, "%s: %s: %s", what, fa_status_name(st),
                 fa_context_last_error(ctx));
        return false;
    }
    fail(r, "%s: %s: %s", what, fa_status_name(st), fa_context_last_error(ctx));
    r->error = true;
    return false;
}

/* The rows an append case writes into K or V (tb) hold the poison on the device before the call,
 * so that a row the append misses shows, as NaN scores and in append_check; mask marks their
 * elements. tb's image stays the cache after the append. */
static bool append_stage(tbuf *tb, const tk_case *c, const tk_paged *pg, const int32_t *lens,
                         unsigned char *mask, tk_result *r)
{
    unsigned char *before = malloc(tb->total);
    if (!before) {
        fail(r, "out of host memory");
        return false;
    }
    memcpy(before, tb->image, tb->total);
    for (int64_t b = 0; b < c->p.batch; b++)
        for (int64_t i = 0; i < c->append; i++)
            for (int64_t h = 0; h < tb->H; h++) {
                int64_t block, row;
                tk_cache_slot(c, pg, b, lens[b] + i, &block, &row);
                const size_t x = elem_index(tb, block, row, h, 0);
                poison_fill(before + TK_OFFSET + x * tb->esize, (size_t)tb->D * tb->esize,
                            tb->esize);
                memset(mask + x, 1, (size_t)tb->D);
            }
    fa_status st = fa_buffer_write(tb->buf, 0, before, tb->total);
    free(before);
    if (st != FA_OK)
        fail(r, "fa_buffer_write(%s): %s", tb->name, fa_status_name(st));
    return st == FA_OK;
}

/* After an append K or V must be the cache after it, bit for bit: the appended rows those of
 * k_new or v_new, every other row (spare pages included) as it was. */
static void append_check(tbuf *tb, const unsigned char *mask, tk_result *r)
{
    check_unchanged(tb, false, r);
    for (size_t x = 0; x < tb->count; x++) {
        const size_t at = TK_OFFSET + x * tb->esize, rest = x / (size_t)tb->D;
        if (memcmp(tb->got + at, tb->image + at, tb->esize) == 0)
            continue;
        const size_t S = (size_t)tb->S, H = (size_t)tb->H;
        const size_t s = tb->bhsd ? rest % S : rest / H % S, h = tb->bhsd ? rest / S % H : rest % H;
        fail(r, "%s[%zu][%zu][%zu][%zu] (%s) is %.6g, expected %.6g", tb->name, rest / S / H, s, h,
             x % (size_t)tb->D, mask[x] ? "an appended row" : "a row the append must leave",
             elem_value(tb, tb->got, x), elem_value(tb, tb->image, x));
        return;
    }
}

/* A packed variable-length call (c->varlen) over the case's BSHD buffers: B sequences of Sq
 * query rows and Sk keys are the same memory as the padded (B, S, H, D) tensors, seen as
 * (1, B S, H, D) with prefix sums 0, S, 2 S, ...; only the LSE differs, (Hq, B Sq) packed, so it
 * gets a buffer of its own, copied into the case's (B, Hq, Sq) one after the forward
 * (varlen_lse_back) for the checks. */
typedef struct tk_packed {
    fa_buffer *cu[2], *lse;
    fa_tensor cu_tensor[2], lse_tensor, views[T_COUNT];
} tk_packed;

static bool packed_init(fa_context *ctx, tk_packed *pk, const tk_case *c, const tbuf *tb,
                        int n_bufs, tk_result *r)
{
    const fa_ref_problem *p = &c->p;
    const int64_t B = p->batch, lens[2] = {p->seq_q, p->seq_k};
    int32_t *cu = malloc((size_t)(B + 1) * sizeof *cu);
    if (!cu) {
        fail(r, "out of host memory");
        return false;
    }
    bool ok = true;
    for (int x = 0; ok && x < 2; x++) {
        for (int64_t b = 0; b <= B; b++)
            cu[b] = (int32_t)(b * lens[x]);
        fa_status st = fa_buffer_create(
            ctx, &(fa_buffer_desc){.size = (size_t)(B + 1) * sizeof *cu, .data = cu}, &pk->cu[x]);
        ok = call_ok(ctx, x ? "fa_buffer_create(cu_seqlens_k)" : "fa_buffer_create(cu_seqlens_q)",
                     st, r);
        pk->cu_tensor[x] = fa_tensor_bshd(pk->cu[x], FA_DTYPE_I32, B + 1, 1, 1, 1);
    }
    free(cu);
    const size_t lse_bytes = (size_t)(B * p->seq_q * p->heads_q) * sizeof(float);
    if (ok)
        ok = call_ok(ctx, "fa_buffer_create(lse, packed)",
                     fa_buffer_create(ctx, &(fa_buffer_desc){.size = lse_bytes + 4}, &pk->lse), r);
    pk->lse_tensor = fa_tensor_lse(pk->lse, 1, p->heads_q, B * p->seq_q);
    for (int x = 0; x < n_bufs; x++) {
        pk->views[x] = tb[x].tensor;
        pk->views[x].shape[0] = 1;
        pk->views[x].shape[1] = tb[x].B * tb[x].S;
    }
    return ok;
}

/* The packed LSE, (Hq, B Sq), into the case's LSE buffer in its (B, Hq, Sq) order. */
static bool varlen_lse_back(fa_context *ctx, const tk_packed *pk, tbuf *lse, tk_result *r)
{
    const size_t n = lse->count;
    float *packed = malloc(n * sizeof *packed + 4), *image = malloc(n * sizeof *image + 4);
    bool ok = packed && image;
    if (!ok)
        fail(r, "out of host memory");
    if (ok)
        ok = call_ok(ctx, "fa_buffer_read(lse, packed)",
                     fa_buffer_read(pk->lse, 0, packed, n * sizeof *packed), r);
    for (int64_t b = 0; ok && b < lse->B; b++)
        for (int64_t h = 0; h < lse->H; h++)
            for (int64_t s = 0; s < lse->S; s++)
                image[elem_index(lse, b, s, h, 0)] = packed[h * lse->B * lse->S + b * lse->S + s];
    if (ok)
        ok = call_ok(ctx, "fa_buffer_write(lse)",
                     fa_buffer_write(lse->buf, TK_OFFSET, image, n * sizeof *image), r);
    free(packed);
    free(image);
    return ok;
}

static void packed_free(tk_packed *pk)
{
    fa_buffer_destroy(pk->cu[0]);
    fa_buffer_destroy(pk->cu[1]);
    fa_buffer_destroy(pk->lse);
}

void tk_case_execute(fa_context *ctx, const tk_case *c, const tk_inputs *in, const tk_data *t,
                     const tk_expect *e, tk_result *r)
{
    memset(r, 0, sizeof *r);
    double start = tk_now();
    const fa_ref_problem *p = &c->p;
    const bool bwd = c->backward;
    tbuf tb[T_COUNT];
    memset(tb, 0, sizeof tb);
    tbuf_init(&tb[T_Q], "q", false, p->dtype, c->bhsd, p->batch, p->seq_q, p->heads_q, p->head_dim,
              false);
    tk_paged pg = {0};
    if (c->page_size > 0 && !tk_paged_init(&pg, c, in, t->seqlens)) {
        tk_paged_free(&pg);
        fail(r, "out of host memory");
        return;
    }
    tk_append ap = {0};
    if (c->append > 0 && !tk_append_init(&ap, c, in, t->seqlens)) {
        tk_append_free(&ap);
        tk_paged_free(&pg);
        fail(r, "out of host memory");
        return;
    }
    const int64_t kv_b = pg.table ? pg.num_pages : p->batch;
    const int64_t kv_s = pg.table ? c->page_size : p->seq_k;
    tbuf_init(&tb[T_K], "k", false, p->dtype, c->bhsd, kv_b, kv_s, p->heads_kv, p->head_dim, false);
    tbuf_init(&tb[T_V], "v", false, p->dtype, c->bhsd, kv_b, kv_s, p->heads_kv, p->head_dim, false);
    tbuf_init(&tb[T_O], "o", true, fa_ref_o_dtype(p), c->bhsd, p->batch, p->seq_q, p->heads_q,
              p->head_dim, false);
    tbuf_init(&tb[T_LSE], "lse", true, p->dtype, c->bhsd, p->batch, p->seq_q, p->heads_q, 1, true);
    if (bwd) {
        tbuf_init(&tb[T_DO], "do", false, p->dtype, c->bhsd, p->batch, p->seq_q, p->heads_q,
                  p->head_dim, false);
        tbuf_init(&tb[T_DQ], "dq", true, p->dtype, c->bhsd, p->batch, p->seq_q, p->heads_q,
                  p->head_dim, false);
        tbuf_init(&tb[T_DK], "dk", true, p->dtype, c->bhsd, p->batch, p->seq_k, p->heads_kv,
                  p->head_dim, false);
        tbuf_init(&tb[T_DV], "dv", true, p->dtype, c->bhsd, p->batch, p->seq_k, p->heads_kv,
                  p->head_dim, false);
    }
    const void *data[T_COUNT] = {[T_Q] = in->q,
                                 [T_K] = pg.table ? (const void *)pg.k : in->k,
                                 [T_V] = pg.table ? (const void *)pg.v : in->v,
                                 [T_DO] = in->d_o};
    const int n_bufs = bwd ? T_COUNT : T_DO;
    bool ok = true;
    for (int x = 0; ok && x < n_bufs; x++)
        ok = tbuf_create(ctx, &tb[x], data[x], r);
    /* An append: k_new and v_new in the case's layout, and the rows they go to staged. */
    tbuf nb[2];
    memset(nb, 0, sizeof nb);
    unsigned char *mask[2] = {NULL, NULL};
    for (int x = 0; ok && c->append > 0 && x < 2; x++) {
        tbuf_init(&nb[x], x ? "v_new" : "k_new", false, p->dtype, c->bhsd, p->batch, c->append,
                  p->heads_kv, p->head_dim, false);
        mask[x] = calloc(tb[T_K + x].count, 1);
        if (!mask[x])
            fail(r, "out of host memory");
        ok = mask[x] && tbuf_create(ctx, &nb[x], x ? ap.v_new : ap.k_new, r) &&
             append_stage(&tb[T_K + x], c, &pg, ap.lens, mask[x], r);
    }
    /* Per-sequence key counts: B int32 values (tk_case_seqlens; before an append), left as they
     * were written. */
    const int32_t *lens_host = c->append > 0 ? ap.lens : t->seqlens;
    fa_buffer *lens = NULL;
    fa_tensor lens_tensor = {0};
    if (ok && t->seqlens) {
        const size_t bytes = (size_t)p->batch * sizeof(int32_t);
        fa_status st = fa_buffer_create(
            ctx, &(fa_buffer_desc){.size = bytes ? bytes : 4, .data = lens_host}, &lens);
        ok = call_ok(ctx, "fa_buffer_create(seqlens_k)", st, r);
        lens_tensor = fa_tensor_bshd(lens, FA_DTYPE_I32, p->batch, 1, 1, 1);
    }
    fa_buffer *table = NULL;
    fa_tensor table_tensor = {0};
    const size_t table_bytes = (size_t)(p->batch * pg.max_pages) * sizeof(int32_t);
    if (ok && pg.table) {
        fa_status st = fa_buffer_create(
            ctx, &(fa_buffer_desc){.size = table_bytes ? table_bytes : 4, .data = pg.table},
            &table);
        ok = call_ok(ctx, "fa_buffer_create(block_table)", st, r);
        table_tensor = fa_tensor_bshd(table, FA_DTYPE_I32, p->batch, pg.max_pages, 1, 1);
    }
    /* ALiBi slopes, f32: (1, 1, Hq, 1) packed, or (B, 1, Hq, 1), held head-major (Hq, B) in
     * the BHSD cases so that the strides are not the packed ones. */
    const float *slopes_host = t->p.alibi_slopes;
    const int64_t slopes_b = c->alibi == 2 ? p->batch : 1, n_slopes = slopes_b * p->heads_q;
    float *slopes_image = slopes_host ? malloc((size_t)n_slopes * sizeof *slopes_image + 4) : NULL;
    fa_buffer *slopes = NULL;
    fa_tensor slopes_tensor = {0};
    if (ok && slopes_host && !slopes_image) {
        fail(r, "out of host memory");
        ok = false;
    }
    if (ok && slopes_host) {
        const bool transposed = c->bhsd && slopes_b > 1;
        for (int64_t b = 0; b < slopes_b; b++)
            for (int64_t h = 0; h < p->heads_q; h++)
                slopes_image[transposed ? h * slopes_b + b : b * p->heads_q + h] =
                    slopes_host[b * p->heads_q + h];
        fa_status st = fa_buffer_create(
            ctx,
            &(fa_buffer_desc){.size = (size_t)n_slopes * sizeof(float) + 4, .data = slopes_image},
            &slopes);
        ok = call_ok(ctx, "fa_buffer_create(alibi_slopes)", st, r);
        slopes_tensor = fa_tensor_bshd(slopes, FA_DTYPE_F32, slopes_b, 1, p->heads_q, 1);
        if (transposed) {
            slopes_tensor.stride[0] = 1;
            slopes_tensor.stride[1] = 1;
            slopes_tensor.stride[2] = slopes_b;
            slopes_tensor.stride[3] = 1;
        }
    }
    /* The additive bias: its elements as tk_case_bias made them, with its shape and strides. */
    fa_buffer *bias = NULL;
    fa_tensor bias_tensor = {0};
    const size_t bias_bytes = t->bias ? (size_t)t->bias->count * fa_dtype_size(t->bias->dtype) : 0;
    if (ok && t->bias) {
        fa_status st = fa_buffer_create(
            ctx, &(fa_buffer_desc){.size = bias_bytes + 4, .data = t->bias->data}, &bias);
        ok = call_ok(ctx, "fa_buffer_create(bias)", st, r);
        bias_tensor = (fa_tensor){.buffer = bias, .dtype = t->bias->dtype};
        memcpy(bias_tensor.shape, t->bias->shape, sizeof bias_tensor.shape);
        memcpy(bias_tensor.stride, t->bias->stride, sizeof bias_tensor.stride);
    }
    /* FP8 descale factors, f32: (1, 1, 1, 1), (1, 1, Hkv, 1) or (B, 1, Hkv, 1) as the case
     * broadcasts them, from the reference's B x Hkv arrays; (B, 1, Hkv, 1) held head-major in the
     * BHSD cases, as the slopes are. */
    const int64_t ds_b = c->descale == 3 ? p->batch : 1, ds_h = c->descale >= 2 ? p->heads_kv : 1;
    fa_buffer *descale[3] = {NULL, NULL, NULL};
    fa_tensor descale_tensor[3] = {{0}};
    float descale_image[3][64];
    for (int x = 0; ok && c->descale && x < 3; x++) {
        const bool transposed = c->bhsd && ds_b > 1;
        if (ds_b * ds_h > 64) {
            fail(r, "descale: more than 64 factors");
            ok = false;
            break;
        }
        for (int64_t b = 0; b < ds_b; b++)
            for (int64_t h = 0; h < ds_h; h++)
                descale_image[x][transposed ? h * ds_b + b : b * ds_h + h] =
                    t->p.descale[x][b * p->heads_kv + h];
        static const char *const names[3] = {"fa_buffer_create(q_descale)",
                                             "fa_buffer_create(k_descale)",
                                             "fa_buffer_create(v_descale)"};
        fa_status st =
            fa_buffer_create(ctx,
                             &(fa_buffer_desc){.size = (size_t)(ds_b * ds_h) * sizeof(float),
                                               .data = descale_image[x]},
                             &descale[x]);
        ok = call_ok(ctx, names[x], st, r);
        descale_tensor[x] = fa_tensor_bshd(descale[x], FA_DTYPE_F32, ds_b, 1, ds_h, 1);
        if (transposed) {
            const int64_t st4[4] = {1, 1, ds_b, 1};
            memcpy(descale_tensor[x].stride, st4, sizeof st4);
        }
    }
    tk_packed pk = {0};
    if (ok && c->varlen)
        ok = packed_init(ctx, &pk, c, tb, n_bufs, r);
    const fa_tensor *view[T_COUNT];
    for (int x = 0; x < T_COUNT; x++)
        view[x] = c->varlen ? &pk.views[x] : &tb[x].tensor;
    const fa_tensor *lse_view = c->varlen ? &pk.lse_tensor : &tb[T_LSE].tensor;
    const fa_attention_desc desc = {.scale = p->scale,
                                    .causal = p->causal,
                                    .window = p->window,
                                    .softcap = p->softcap,
                                    .deterministic = c->deterministic,
                                    .num_splits = c->num_splits,
                                    .seqlens_k = t->seqlens ? &lens_tensor : NULL,
                                    .block_table = pg.table ? &table_tensor : NULL,
                                    .k_new = c->append > 0 ? &nb[0].tensor : NULL,
                                    .v_new = c->append > 0 ? &nb[1].tensor : NULL,
                                    .alibi_slopes = slopes ? &slopes_tensor : NULL,
                                    .bias = bias ? &bias_tensor : NULL,
                                    .cu_seqlens_q = c->varlen ? &pk.cu_tensor[0] : NULL,
                                    .cu_seqlens_k = c->varlen ? &pk.cu_tensor[1] : NULL,
                                    .q_descale = descale[0] ? &descale_tensor[0] : NULL,
                                    .k_descale = descale[1] ? &descale_tensor[1] : NULL,
                                    .v_descale = descale[2] ? &descale_tensor[2] : NULL};
    unsigned char *o_after_fwd = NULL, *lse_after_fwd = NULL;

    if (ok)
        ok = call_ok(
            ctx, "fa_attention_forward",
            fa_attention_forward(ctx, &desc, view[T_Q], view[T_K], view[T_V], view[T_O], lse_view),
            r);
    if (ok)
        ok = call_ok(ctx, "fa_context_synchronize", fa_context_synchronize(ctx), r);
    if (ok && c->varlen)
        ok = varlen_lse_back(ctx, &pk, &tb[T_LSE], r);
    if (ok && bwd) {
        /* O and LSE as the forward left them are the backward's inputs */
        ok = tbuf_read(ctx, &tb[T_O], r) && tbuf_read(ctx, &tb[T_LSE], r);
        o_after_fwd = ok ? malloc(tb[T_O].total) : NULL;
        lse_after_fwd = ok ? malloc(tb[T_LSE].total) : NULL;
        if (o_after_fwd && lse_after_fwd) {
            memcpy(o_after_fwd, tb[T_O].got, tb[T_O].total);
            memcpy(lse_after_fwd, tb[T_LSE].got, tb[T_LSE].total);
        } else if (ok) {
            fail(r, "out of host memory");
            ok = false;
        }
        if (ok)
            ok = call_ok(ctx, "fa_attention_backward",
                         fa_attention_backward(ctx, &desc, view[T_Q], view[T_K], view[T_V],
                                               view[T_O], view[T_DO], lse_view, view[T_DQ],
                                               view[T_DK], view[T_DV]),
                         r);
        if (ok)
            ok = call_ok(ctx, "fa_context_synchronize", fa_context_synchronize(ctx), r);
    }
    for (int x = 0; ok && x < n_bufs; x++)
        ok = tbuf_read(ctx, &tb[x], r);
    for (int x = 0; ok && c->append > 0 && x < 2; x++)
        ok = tbuf_read(ctx, &nb[x], r);

    if (ok) {
        for (int x = 0; x < 2 && c->append > 0; x++) {
            check_unchanged(&nb[x], true, r);
            append_check(&tb[T_K + x], mask[x], r);
        }
        for (int x = 0; x < n_bufs; x++) {
            if (c->append > 0 && (x == T_K || x == T_V))
                continue;
            if (!tb[x].output || c->noop) {
                check_unchanged(&tb[x], true, r);
            } else {
                check_unchanged(&tb[x], false, r);
                check_written(t, &tb[x], e && e->full, r);
            }
        }
        if (bwd && !c->noop) {
            if (memcmp(tb[T_O].got, o_after_fwd, tb[T_O].total) != 0)
                fail(r, "the backward changed o");
            if (memcmp(tb[T_LSE].got, lse_after_fwd, tb[T_LSE].total) != 0)
                fail(r, "the backward changed lse");
        }
        if (!c->noop) {
            check_no_key_rows(t, &tb[T_O], &tb[T_LSE], bwd ? &tb[T_DQ] : NULL, r);
            if (e)
                compare_all(t, e, tb, r);
        }
    }
    for (int x = 0; x < T_COUNT + 2; x++) {
        tbuf *one = x < T_COUNT ? &tb[x] : &nb[x - T_COUNT];
        fa_buffer_destroy(one->buf);
        free(one->image);
        free(one->got);
    }
    free(mask[0]);
    free(mask[1]);
    if (lens && r->outcome != TK_SKIP) {
        int32_t after[64];
        const size_t bytes = (size_t)(p->batch < 64 ? p->batch : 64) * sizeof(int32_t);
        if (fa_buffer_read(lens, 0, after, bytes) != FA_OK || memcmp(after, lens_host, bytes))
            fail(r, "seqlens_k changed");
    }
    fa_buffer_destroy(lens);
    if (table && r->outcome != TK_SKIP) {
        int32_t *after = malloc(table_bytes ? table_bytes : 4);
        if (!after || fa_buffer_read(table, 0, after, table_bytes) != FA_OK ||
            memcmp(after, pg.table, table_bytes))
            fail(r, "block_table changed");
        free(after);
    }
    fa_buffer_destroy(table);
    packed_free(&pk);
    if (slopes && r->outcome != TK_SKIP) {
        float *after = malloc((size_t)n_slopes * sizeof *after);
        if (!after || fa_buffer_read(slopes, 0, after, (size_t)n_slopes * sizeof *after) != FA_OK ||
            memcmp(after, slopes_image, (size_t)n_slopes * sizeof *after))
            fail(r, "alibi_slopes changed");
        free(after);
    }
    fa_buffer_destroy(slopes);
    free(slopes_image);
    if (bias && r->outcome != TK_SKIP) {
        unsigned char *after = malloc(bias_bytes + 1);
        if (!after || fa_buffer_read(bias, 0, after, bias_bytes) != FA_OK ||
            memcmp(after, t->bias->data, bias_bytes))
            fail(r, "bias changed");
        free(after);
    }
    fa_buffer_destroy(bias);
    for (int x = 0; x < 3; x++) {
        float after[64];
        const size_t bytes = (size_t)(ds_b * ds_h) * sizeof(float);
        if (descale[x] && r->outcome != TK_SKIP &&
            (fa_buffer_read(descale[x], 0, after, bytes) != FA_OK ||
             memcmp(after, descale_image[x], bytes)))
            fail(r, "a descale tensor changed");
        fa_buffer_destroy(descale[x]);
    }
    tk_paged_free(&pg);
    tk_append_free(&ap);
    free(o_after_fwd);
    free(lse_after_fwd);
    r->seconds = tk_now() - start;
}
