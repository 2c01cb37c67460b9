// SPDX-License-Identifier: MIT
/* One attention problem on a device: see cli_attn.h. */
#include "cli_attn.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
#include "cli_report.h"
#include "fa_testkit.h"

#define MAX_SAMPLES 1000

/* a * b * c * d as size_t, false on overflow or a negative factor. */
static bool product4(int64_t a, int64_t b, int64_t c, int64_t d, size_t *out)
{
    if (a < 0 || b < 0 || c < 0 || d < 0)
        return false;
    size_t r = 1;
    const int64_t f[4] = {a, b, c, d};
    for (int i = 0; i < 4; i++) {
        if ((uint64_t)f[i] > SIZE_MAX || __builtin_mul_overflow(r, (size_t)f[i], &r))
            return false;
    }
    *out = r;
    return true;
}

static size_t max_size(size_t a, size_t b)
{
    return a > b ? a : b;
}

/* Creates a buffer of `bytes` holding `host` (bytes of it) and leaves the view in *t. */
static fa_status make_buffer(cli_attn *a, size_t bytes, const void *host, fa_buffer **buf)
{
    fa_status st = fa_buffer_create(a->ctx, &(fa_buffer_desc){.size = bytes}, buf);
    if (st != FA_OK)
        return st;
    return bytes ? fa_buffer_write(*buf, 0, host, bytes) : FA_OK;
}

/* The prefix sums of a packed batch (shape->varlen): seeded lengths in [S/2, 3S/2]. */
static fa_status varlen_lengths(cli_attn *a, const cli_attn_shape *shape)
{
    const int64_t n = shape->batch, seqs[2] = {shape->seq_q, shape->seq_k};
    uint64_t rng = a->seed ^ 0x9a11e4ull;
    for (int x = 0; x < 2; x++) {
        a->cu_host[x] = malloc((size_t)(n + 1) * sizeof *a->cu_host[x]);
        if (!a->cu_host[x]) {
            snprintf(a->detail, sizeof a->detail, "cannot allocate the prefix sums");
            return FA_ERROR_OUT_OF_HOST_MEMORY;
        }
    }
    int64_t total[2] = {0, 0};
    for (int64_t b = 0; b < n; b++) {
        a->cu_host[0][b] = (int32_t)total[0];
        a->cu_host[1][b] = (int32_t)total[1];
        const int64_t lq =
            seqs[0] / 2 + (int64_t)fa_testkit_rand_below(&rng, (uint64_t)seqs[0] + 1);
        const int64_t lk =
            seqs[0] == seqs[1]
                ? lq
                : seqs[1] / 2 + (int64_t)fa_testkit_rand_below(&rng, (uint64_t)seqs[1] + 1);
        total[0] += lq;
        total[1] += lk;
        if (total[0] > INT32_MAX || total[1] > INT32_MAX) {
            snprintf(a->detail, sizeof a->detail, "the packed rows pass 2^31 - 1");
            return FA_ERROR_SIZE_OVERFLOW;
        }
    }
    a->cu_host[0][n] = (int32_t)total[0];
    a->cu_host[1][n] = (int32_t)total[1];
    return FA_OK;
}

fa_status cli_attn_create(cli_attn *a, fa_context *ctx, const cli_attn_shape *shape,
                          bool with_grads, uint64_t seed)
{
    memset(a, 0, sizeof *a);
    a->ctx = ctx;
    a->seed = seed;
    a->shape = *shape;
    a->with_grads = with_grads;
    a->desc = (fa_attention_desc){
        .scale = shape->head_dim > 0 ? 1.0f / sqrtf((float)shape->head_dim) : 0.0f,
        .causal = shape->causal,
        .deterministic = shape->deterministic,
        .num_splits = shape->num_splits,
        .window = shape->window,
        .softcap = shape->softcap,
    };

    cli_attn_shape packed = *shape; /* a packed batch: one entry of all the rows */
    if (shape->varlen) {
        fa_status vst = varlen_lengths(a, shape);
        if (vst != FA_OK)
            return vst;
        packed.batch = 1;
        packed.seq_q = a->cu_host[0][shape->batch];
        packed.seq_k = a->cu_host[1][shape->batch];
    }
    const cli_attn_shape *s = &packed;
    size_t elem = fa_dtype_size(s->dtype);
    if (s->page_size > 0 && (with_grads || s->seq_k % s->page_size)) {
        snprintf(a->detail, sizeof a->detail,
                 "a paged cache takes forward calls whose key count (%lld) is a multiple of the "
                 "page size (%lld)",
                 (long long)s->seq_k, (long long)s->page_size);
        return FA_ERROR_INVALID_ARGUMENT;
    }
    size_t q_bytes = 0, kv_bytes = 0, lse_bytes = 0, o_bytes = 0;
    if (!product4(s->batch, s->seq_q, s->heads_q, s->head_dim, &a->q_elems) ||
        !product4(s->batch, s->seq_k, s->heads_kv, s->head_dim, &a->kv_elems) ||
        !product4(s->batch, s->heads_q, s->seq_q, 1, &a->lse_elems) ||
        __builtin_mul_overflow(a->q_elems, elem, &q_bytes) ||
        __builtin_mul_overflow(a->kv_elems, elem, &kv_bytes) ||
        __builtin_mul_overflow(a->q_elems, fa_dtype_size(cli_attn_o_dtype(s)), &o_bytes) ||
        __builtin_mul_overflow(a->lse_elems, sizeof(float), &lse_bytes)) {
        snprintf(a->detail, sizeof a->detail, "the tensor sizes overflow this machine's size_t");
        return FA_ERROR_SIZE_OVERFLOW;
    }

    /* One host array at a time: fill it, copy it to its buffer, reuse it for the next. */
    size_t scratch_bytes =
        max_size(max_size(max_size(q_bytes, o_bytes), kv_bytes), max_size(lse_bytes, 1));

    /* A problem far beyond the device is refused here rather than left to an allocator that
     * overcommits and a fill that then gets the process killed. */
    fa_device_info dev;
    fa_status st = fa_context_device(ctx, &dev);
    if (st != FA_OK)
        return st;
    double need = (double)q_bytes + (double)o_bytes + 2.0 * (double)kv_bytes + (double)lse_bytes;
    if (with_grads)
        need *= 2.0;
    if (dev.kind == FA_DEVICE_KIND_CPU)
        need += (double)scratch_bytes;
    if (dev.memory_bytes > 0 && need > (double)dev.memory_bytes) {
        snprintf(a->detail, sizeof a->detail,
                 "the problem needs %.3g GiB of buffers; the device has %.3g GiB",
                 need / 1073741824.0, (double)dev.memory_bytes / 1073741824.0);
        return dev.kind == FA_DEVICE_KIND_CPU ? FA_ERROR_OUT_OF_HOST_MEMORY
                                              : FA_ERROR_OUT_OF_DEVICE_MEMORY;
    }

    void *scratch = malloc(scratch_bytes);
    if (!scratch) {
        snprintf(a->detail, sizeof a->detail, "cannot allocate %zu bytes of host memory",
                 scratch_bytes);
        return FA_ERROR_OUT_OF_HOST_MEMORY;
    }
    fa_testkit_fill_random(scratch, s->dtype, a->q_elems, seed);
    st = make_buffer(a, q_bytes, scratch, &a->q);
    if (st == FA_OK) {
        fa_testkit_fill_random(scratch, s->dtype, a->kv_elems, seed + 1);
        st = make_buffer(a, kv_bytes, scratch, &a->k);
    }
    if (st == FA_OK) {
        fa_testkit_fill_random(scratch, s->dtype, a->kv_elems, seed + 2);
        st = make_buffer(a, kv_bytes, scratch, &a->v);
    }
    if (st == FA_OK && with_grads) {
        fa_testkit_fill_random(scratch, s->dtype, a->q_elems, seed + 3);
        st = make_buffer(a, q_bytes, scratch, &a->d_o);
    }
    memset(scratch, 0, scratch_bytes);
    if (st == FA_OK)
        st = make_buffer(a, o_bytes, scratch, &a->o);
    if (st == FA_OK)
        st = make_buffer(a, lse_bytes, scratch, &a->lse);
    if (st == FA_OK && with_grads) {
        st = make_buffer(a, q_bytes, scratch, &a->d_q);
        if (st == FA_OK)
            st = make_buffer(a, kv_bytes, scratch, &a->d_k);
        if (st == FA_OK)
            st = make_buffer(a, kv_bytes, scratch, &a->d_v);
    }
    free(scratch);
    if (st != FA_OK)
        return st;

    if (s->page_size > 0) { /* the same buffers, seen as pages; the table shuffles them */
        a->max_pages = s->seq_k / s->page_size;
        const int64_t pages = s->batch * a->max_pages;
        a->table_host = malloc((size_t)(pages > 0 ? pages : 1) * sizeof *a->table_host);
        if (!a->table_host) {
            snprintf(a->detail, sizeof a->detail, "cannot allocate the block table");
            return FA_ERROR_OUT_OF_HOST_MEMORY;
        }
        uint64_t rng = seed ^ 0x7ab1eull;
        for (int64_t i = 0; i < pages; i++)
            a->table_host[i] = (int32_t)i;
        for (int64_t i = pages - 1; i > 0; i--) {
            const int64_t j = (int64_t)(fa_testkit_splitmix64(&rng) % (uint64_t)(i + 1));
            const int32_t x = a->table_host[i];
            a->table_host[i] = a->table_host[j];
            a->table_host[j] = x;
        }
        st = make_buffer(a, (size_t)pages * sizeof(int32_t), a->table_host, &a->table);
        if (st != FA_OK)
            return st;
        a->ttable = fa_tensor_bshd(a->table, FA_DTYPE_I32, s->batch, a->max_pages, 1, 1);
        a->desc.block_table = &a->ttable;
    }
    if (s->alibi) {
        a->slopes_host = malloc((size_t)(s->heads_q > 0 ? s->heads_q : 1) * sizeof(float));
        if (!a->slopes_host) {
            snprintf(a->detail, sizeof a->detail, "cannot allocate the ALiBi slopes");
            return FA_ERROR_OUT_OF_HOST_MEMORY;
        }
        for (int64_t h = 0; h < s->heads_q; h++)
            a->slopes_host[h] = exp2f(-8.0f * (float)(h + 1) / (float)s->heads_q);
        st = make_buffer(a, (size_t)s->heads_q * sizeof(float), a->slopes_host, &a->slopes);
        if (st != FA_OK)
            return st;
        a->talibi = fa_tensor_bshd(a->slopes, FA_DTYPE_F32, 1, 1, s->heads_q, 1);
        a->desc.alibi_slopes = &a->talibi;
    }
    if (s->bias) {
        size_t n = 0;
        const size_t elem = fa_dtype_size(s->bias_dtype);
        if (!product4(1, s->seq_q, s->heads_q, s->seq_k, &n) || n > SIZE_MAX / elem) {
            snprintf(a->detail, sizeof a->detail,
                     "the bias's size overflows this machine's size_t");
            return FA_ERROR_SIZE_OVERFLOW;
        }
        a->bias_host = malloc(n ? n * elem : 1);
        if (!a->bias_host) {
            snprintf(a->detail, sizeof a->detail, "cannot allocate the bias");
            return FA_ERROR_OUT_OF_HOST_MEMORY;
        }
        fa_testkit_fill_random(a->bias_host, s->bias_dtype, n, seed + 5);
        st = make_buffer(a, n * elem, a->bias_host, &a->bias);
        if (st != FA_OK)
            return st;
        a->tbias = (s->bias_bhsd ? fa_tensor_bhsd : fa_tensor_bshd)(a->bias, s->bias_dtype, 1,
                                                                    s->seq_q, s->heads_q, s->seq_k);
        a->desc.bias = &a->tbias;
    }
    const int64_t kv_b = s->page_size > 0 ? s->batch * a->max_pages : s->batch;
    const int64_t kv_s = s->page_size > 0 ? s->page_size : s->seq_k;
    a->tq = fa_tensor_bshd(a->q, s->dtype, s->batch, s->seq_q, s->heads_q, s->head_dim);
    a->tk = fa_tensor_bshd(a->k, s->dtype, kv_b, kv_s, s->heads_kv, s->head_dim);
    a->tv = fa_tensor_bshd(a->v, s->dtype, kv_b, kv_s, s->heads_kv, s->head_dim);
    a->to = fa_tensor_bshd(a->o, cli_attn_o_dtype(s), s->batch, s->seq_q, s->heads_q, s->head_dim);
    a->tlse = fa_tensor_lse(a->lse, s->batch, s->heads_q, s->seq_q);
    if (with_grads) {
        a->tdo = fa_tensor_bshd(a->d_o, s->dtype, s->batch, s->seq_q, s->heads_q, s->head_dim);
        a->tdq = fa_tensor_bshd(a->d_q, s->dtype, s->batch, s->seq_q, s->heads_q, s->head_dim);
        a->tdk = fa_tensor_bshd(a->d_k, s->dtype, s->batch, s->seq_k, s->heads_kv, s->head_dim);
        a->tdv = fa_tensor_bshd(a->d_v, s->dtype, s->batch, s->seq_k, s->heads_kv, s->head_dim);
    }
    for (int x = 0; shape->varlen && x < 2; x++) {
        st = make_buffer(a, (size_t)(shape->batch + 1) * sizeof(int32_t), a->cu_host[x], &a->cu[x]);
        if (st != FA_OK)
            return st;
        a->tcu[x] = fa_tensor_bshd(a->cu[x], FA_DTYPE_I32, shape->batch + 1, 1, 1, 1);
    }
    if (shape->varlen) {
        a->desc.cu_seqlens_q = &a->tcu[0];
        a->desc.cu_seqlens_k = &a->tcu[1];
    }
    return s->append > 0 ? cli_attn_append_init(a) : FA_OK;
}

void cli_attn_unpage(const cli_attn *a, const void *paged, void *logical)
{
    const cli_attn_shape *s = &a->shape;
    const size_t row = (size_t)(s->heads_kv * s->head_dim) * fa_dtype_size(s->dtype);
    if (s->page_size <= 0) {
        memcpy(logical, paged, a->kv_elems * fa_dtype_size(s->dtype));
        return;
    }
    const size_t page = (size_t)s->page_size * row;
    for (int64_t b = 0; b < s->batch; b++)
        for (int64_t p = 0; p < a->max_pages; p++)
            memcpy((unsigned char *)logical + (size_t)(b * a->max_pages + p) * page,
                   (const unsigned char *)paged +
                       (size_t)a->table_host[b * a->max_pages + p] * page,
                   page);
}

void cli_attn_destroy(cli_attn *a)
{
    fa_buffer *bufs[] = {a->q,   a->k,     a->v,     a->o,     a->lse,  a->d_o,    a->d_q, a->d_k,
                         a->d_v, a->table, a->k_new, a->v_new, a->lens, a->slopes, a->bias};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        fa_buffer_destroy(bufs[i]);
    a->q = a->k = a->v = a->o = a->lse = a->d_o = a->d_q = a->d_k = a->d_v = a->table = NULL;
    a->k_new = a->v_new = a->lens = a->slopes = a->bias = NULL;
    for (int x = 0; x < 2; x++) {
        fa_buffer_destroy(a->cu[x]);
        a->cu[x] = NULL;
        free(a->cu_host[x]);
        a->cu_host[x] = NULL;
    }
    free(a->table_host);
    a->table_host = NULL;
    free(a->slopes_host);
    a->slopes_host = NULL;
    free(a->bias_host);
    a->bias_host = NULL;
}

/* One call, queued: no synchronisation. */
static fa_status enqueue(cli_attn *a, bool backward)
{
    a->detail[0] = '\0';
    fa_status st;
    if (backward) {
        if (!a->with_grads) {
            snprintf(a->detail, sizeof a->detail, "the problem was created without gradients");
            return FA_ERROR_INVALID_ARGUMENT;
        }
        st = fa_attention_backward(a->ctx, &a->desc, &a->tq, &a->tk, &a->tv, &a->to, &a->tdo,
                                   &a->tlse, &a->tdq, &a->tdk, &a->tdv);
    } else {
        st = fa_attention_forward(a->ctx, &a->desc, &a->tq, &a->tk, &a->tv, &a->to, &a->tlse);
    }
    return st;
}

/* `calls` calls queued back to back, then one synchronisation. */
static fa_status call_group(cli_attn *a, bool backward, int calls)
{
    for (int i = 0; i < calls; i++) {
        fa_status st = enqueue(a, backward);
        if (st != FA_OK)
            return st;
    }
    return fa_context_synchronize(a->ctx);
}

fa_status cli_attn_call(cli_attn *a, bool backward)
{
    return call_group(a, backward, 1);
}

int cli_attn_fail(const cli_attn *a, fa_status status)
{
    if (a->detail[0])
        return cli_fail_detail(status, a->detail);
    return cli_fail(a->ctx, status);
}

/* The (query, key) pairs a window leaves one batch entry and head, counted row by row. */
static double window_pairs(const cli_attn_shape *s)
{
    double pairs = 0.0;
    const int64_t right = s->causal                                            ? 0
                          : s->window.right >= 0 && s->window.right < s->seq_q ? s->window.right
                                                                               : -1;
    for (int64_t i = 0; i < s->seq_q; i++) {
        const int64_t diag = i + s->seq_k - s->seq_q;
        int64_t first = s->window.left >= 0 ? diag - s->window.left : 0;
        int64_t last = right >= 0 ? diag + right : s->seq_k - 1;
        first = first < 0 ? 0 : first;
        last = last > s->seq_k - 1 ? s->seq_k - 1 : last;
        pairs += last >= first ? (double)(last - first + 1) : 0.0;
    }
    return pairs;
}

double cli_attn_flops(const cli_attn_shape *s, bool backward)
{
    double f = 4.0 * (double)s->batch * (double)s->heads_q * (double)s->head_dim;
    if (s->window.enabled)
        f *= window_pairs(s);
    else
        f *= (double)s->seq_q * (double)s->seq_k * (s->causal ? 0.5 : 1.0);
    return backward ? 2.5 * f : f;
}

double cli_attn_call_flops(const cli_attn *a, bool backward)
{
    if (!a->shape.varlen)
        return cli_attn_flops(&a->shape, backward);
    double f = 0.0;
    cli_attn_shape one = a->shape;
    one.batch = 1;
    for (int64_t b = 0; b < a->shape.batch; b++) {
        one.seq_q = a->cu_host[0][b + 1] - a->cu_host[0][b];
        one.seq_k = a->cu_host[1][b + 1] - a->cu_host[1][b];
        f += cli_attn_flops(&one, backward);
    }
    return f;
}

double cli_attn_call_kv_bytes(const cli_attn *a)
{
    cli_attn_shape s = a->shape;
    if (s.varlen) {
        s.batch = 1;
        s.seq_k = a->cu_host[1][a->shape.batch];
    }
    return cli_attn_kv_bytes(&s);
}

double cli_attn_kv_bytes(const cli_attn_shape *s)
{
    return 2.0 * (double)s->batch * (double)s->seq_k * (double)s->heads_kv * (double)s->head_dim *
           (double)fa_dtype_size(s->dtype);
}

uint64_t cli_attn_score_bytes(const cli_attn_shape *s)
{
    double b = 4.0 * (double)s->batch * (double)s->heads_q * (double)s->seq_q * (double)s->seq_k;
    return b >= 1.8e19 ? UINT64_MAX : (uint64_t)b;
}

double cli_gpu_warmup_s(fa_context *ctx)
{
    fa_device_info dev;
    if (fa_context_device(ctx, &dev) != FA_OK || dev.kind == FA_DEVICE_KIND_CPU ||
        dev.kind == FA_DEVICE_KIND_SOFTWARE)
        return 0.0;
    return 0.6;
}

fa_status cli_attn_time(cli_attn *a, bool backward, const cli_time_plan *plan, cli_timing *out)
{
    memset(out, 0, sizeof *out);
    double samples[MAX_SAMPLES];
    int n = 0;

    cli_rss_begin(&out->first_rss);
    double t0 = cli_now();
    fa_status st = cli_attn_call(a, backward);
    double first = cli_now() - t0;
    cli_rss_end(&out->first_rss);
    if (st != FA_OK)
        return st;
    out->first_s = first;

    int warmup = plan->warmup, repeat = plan->repeat > 0 ? plan->repeat : 1;
    if (repeat > MAX_SAMPLES)
        repeat = MAX_SAMPLES;
    /* A slow first call may be one-time costs (a GPU backend's program builds): a second one
     * tells. Only when that is slow too is it the measurement. */
    double second = 0.0;
    if (plan->auto_reduce && first > plan->slow_s) {
        t0 = cli_now();
        st = cli_attn_call(a, backward);
        second = cli_now() - t0;
        if (st != FA_OK)
            return st;
    }
    if (second > plan->slow_s) {
        out->reduced = true;
        samples[n++] = second;
    } else {
        if (warmup > 0) {
            out->warmup_runs = second > 0 ? 2 : 1;
        } else {
            samples[n++] = second > 0 ? second : first;
        }
        /* The first calls may have spent their time building programs, GPU idle. */
        double warm_s = 0.0;
        int warm_calls = 0;
        while (out->warmup_runs < warmup || warm_s < plan->warmup_s) {
            t0 = cli_now();
            st = cli_attn_call(a, backward);
            if (st != FA_OK)
                return st;
            warm_s += cli_now() - t0;
            warm_calls++;
            out->warmup_runs++;
        }
        double total = n ? samples[0] : 0.0;
        const double per_call = warm_calls ? warm_s / warm_calls : 0.0;
        int calls = 1;
        if (plan->sample_s > 0 && per_call > 0 && per_call < plan->sample_s)
            calls = (int)(plan->sample_s / per_call) + 1;
        out->calls_per_sample = calls;
        while (n < repeat && !(plan->max_total_s > 0 && n > 0 && total >= plan->max_total_s)) {
            t0 = cli_now();
            st = call_group(a, backward, calls);
            double t = cli_now() - t0;
            if (st != FA_OK)
                return st;
            samples[n++] = t / calls;
            total += t;
        }
    }
    out->timed_runs = n;
    out->min_s = samples[0];
    for (int i = 1; i < n; i++)
        out->min_s = samples[i] < out->min_s ? samples[i] : out->min_s;
    out->median_s = cli_median(samples, (size_t)n);
    return FA_OK;
}

/* "L,R": two integers (-1: no bound), as --window takes them. */
bool cli_parse_window(const char *text, fa_window *out)
{
    char *end;
    errno = 0;
    const long left = strtol(text, &end, 10);
    if (end == text || *end != ',' || errno)
        return false;
    const char *second = end + 1;
    const long right = strtol(second, &end, 10);
    if (end == second || *end || errno || left < INT32_MIN || left > INT32_MAX ||
        right < INT32_MIN || right > INT32_MAX)
        return false;
    *out = (fa_window){.enabled = true, .left = (int32_t)left, .right = (int32_t)right};
    return true;
}

/* A number, as a float (the library checks its value: finite and not negative). */
bool cli_parse_softcap(const char *text, float *out)
{
    char *end;
    const double x = strtod(text, &end);
    if (end == text || *end)
        return false;
    *out = (float)x;
    return true;
}

fa_status cli_context_create(fa_backend backend, int64_t device, bool device_seen, int64_t threads,
                             int log_level, fa_context **ctx)
{
    if (!device_seen && backend != FA_BACKEND_AUTO)
        device = fa_testkit_default_device(backend);
    return fa_context_create(&(fa_context_desc){.backend = backend,
                                                .device = (int)device,
                                                .cpu = {.threads = (int)threads},
                                                .log = log_level < 0 ? NULL : cli_log_to_stderr,
                                                .log_level = (fa_log_level)log_level},
                             ctx);
}
