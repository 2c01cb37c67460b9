// SPDX-License-Identifier: MIT
/* `flashattn run`: one attention problem, timed, with its memory beside a standard attention's,
 * and optionally checked against a float64 reference on sampled rows. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_args.h"
#include "cli_attn.h"
#include "cli_report.h"
#include "fa_testkit.h"

#define CHECK_ROWS 64
#define SLOW_CALL_S 2.0

static const char usage[] =
    "usage: flashattn run [options]\n"
    "\n"
    "Runs one attention call on random inputs and reports its time, TFLOP/s and memory.\n"
    "\n"
    "  --backend NAME   auto (default), cuda, vulkan, opencl or cpu\n"
    "  --device N       device index within --backend (default: its first GPU, else device 0;\n"
    "                   AUTO: set FA_DEVICE instead)\n"
    "  --batch N        batch size (default 1)\n"
    "  --heads N        query heads (default 8)\n"
    "  --kv-heads N     key/value heads (default: --heads; fewer is grouped-query attention)\n"
    "  --seq N          sequence length of queries and keys (default 1024)\n"
    "  --seq-q N        query length (default: --seq)\n"
    "  --seq-k N        key length (default: --seq)\n"
    "  --head-dim N     head dimension (default 128)\n"
    "  --dtype T        f32, f16, bf16 or e4m3 (FP8 forward: o in f16, no descale factors;\n"
    "                   default f16, f32 on the CPU backend)\n"
    "  --causal         causal mask, aligned bottom-right\n"
    "  --window L,R     sliding window (fa_attention_desc.window): query i sees keys\n"
    "                   i + Sk - Sq - L .. i + Sk - Sq + R, -1 for no bound (with --causal\n"
    "                   R is at most 0)\n"
    "  --softcap C      logit softcapping: scores s become C tanh(s / C) (0: off)\n"
    "  --alibi          ALiBi (fa_attention_desc.alibi_slopes): head h's scores get\n"
    "                   -m_h |i + Sk - Sq - j|, m_h = 2^(-8 (h + 1) / heads)\n"
    "  --bias           an additive bias (fa_attention_desc.bias) of random values, shape\n"
    "                   (1, Sq, heads, Sk): one per query, head and key for every batch entry\n"
    "  --bias-dtype T   the bias's dtype: f32 (the default), f16 or bf16\n"
    "  --bias-layout L  the bias's memory order: bshd ((1, Sq, heads, Sk), the default) or bhsd\n"
    "                   ((1, heads, Sq, Sk): a query-by-key matrix per head, PyTorch's order)\n"
    "  --varlen         a packed batch (fa_attention_desc.cu_seqlens_q, cu_seqlens_k) of --batch\n"
    "                   sequences of seeded lengths from S/2 to 3S/2 around --seq-q and --seq-k\n"
    "                   (the same for both when they are equal); not with --bias, --page-size\n"
    "                   or --append\n"
    "  --splits N       fa_attention_desc.num_splits: key chunks of the split-key forward\n"
    "                   (decoding; 0, the default: the backend chooses; 1: none)\n"
    "  --page-size N    K and V as a paged cache of N-key pages in a shuffled block table\n"
    "                   (fa_attention_desc.block_table; forward, --seq-k a multiple of N)\n"
    "  --append N       each call first appends N new rows per sequence to a cache holding\n"
    "                   --seq-k minus N keys (fa_attention_desc.k_new, v_new, seqlens_k), then\n"
    "                   attends to all --seq-k; with --check, K and V are checked too\n"
    "  --backward       time the backward pass (one forward supplies O and LSE first)\n"
    "  --check          compare 64 sampled rows of O and LSE with a float64 reference (with\n"
    "                   --backward also dQ on sampled query rows and dK, dV on sampled key\n"
    "                   rows, as the conformance matrix samples them);\n"
    "                   exit 1 when they do not pass\n"
    "  --repeat N       timed runs, median reported (default 3)\n"
    "  --warmup N       untimed runs first (default 1, and on a GPU more until 0.6 s have\n"
    "                   passed: an idle GPU's clock takes that long to rise)\n"
    "  --threads N      CPU backend threads (default: OpenMP's)\n"
    "  --seed N         random inputs' seed (default 1)\n"
    "  --json           one JSON object on stdout instead of text\n"
    "  --log LEVEL      the library's messages up to LEVEL (error, warn, info, debug) on stderr\n"
    "\n"
    "Every timed run ends with fa_context_synchronize. The first call is always timed on its\n"
    "own: it is the first warm-up run. When neither --repeat nor --warmup is given and that\n"
    "call takes more than 2 s, it is the measurement and nothing more is run (1 timed run,\n"
    "0 warm-up), so that large problems cost one call.\n"
    "TFLOP/s counts 4*B*H*Sq*Sk*D per forward, half of that when causal (with --window,\n"
    "4*B*H*D per query and key the window leaves), 2.5x for backward;\n"
    "GB/s (forward) counts K and V read once, 2*B*Sk*Hkv*D*element size: what bounds decoding.\n"
    "Memory: the library's workspace peak (device memory beyond inputs and outputs) beside\n"
    "the B*H*Sq*Sk*4 bytes a standard attention's score matrix takes; on the CPU backend also\n"
    "the process's peak resident growth over the first call, measured by the OS.\n";

/* --bias-layout's names, indexed by cli_attn_shape.bias_bhsd. */
static const char *const bias_layout_names[] = {"bshd", "bhsd"};

typedef struct run_options {
    const char *backend_name, *dtype_name, *window_name, *softcap_name, *log_name;
    const char *bias_dtype_name, *bias_layout_name;
    fa_dtype bias_dtype;
    bool bias_bhsd;
    fa_window window;
    float softcap;
    int64_t device, batch, heads, kv_heads, seq, seq_q, seq_k, head_dim;
    int64_t repeat, warmup, threads, seed, splits, page_size, append;
    bool causal, backward, check, json, alibi, bias, varlen;
    bool device_seen, kv_heads_seen, seq_q_seen, seq_k_seen, repeat_seen, warmup_seen;
} run_options;

/* "L,R" as two int32 values (the library checks their range: -1 or more). */
static int parse_options(int argc, char **argv, run_options *o)
{
    *o = (run_options){
        .batch = 1, .heads = 8, .seq = 1024, .head_dim = 128, .repeat = 3, .warmup = 1, .seed = 1};
    const int64_t big = (int64_t)1 << 31;
    const cli_opt opts[] = {
        {"--backend", CLI_OPT_STRING, &o->backend_name, 0, 0, NULL},
        {"--device", CLI_OPT_INT, &o->device, 0, 1023, &o->device_seen},
        {"--batch", CLI_OPT_INT, &o->batch, 1, big, NULL},
        {"--heads", CLI_OPT_INT, &o->heads, 1, 1 << 20, NULL},
        {"--kv-heads", CLI_OPT_INT, &o->kv_heads, 1, 1 << 20, &o->kv_heads_seen},
        {"--seq", CLI_OPT_INT, &o->seq, 1, big, NULL},
        {"--seq-q", CLI_OPT_INT, &o->seq_q, 1, big, &o->seq_q_seen},
        {"--seq-k", CLI_OPT_INT, &o->seq_k, 1, big, &o->seq_k_seen},
        /* Any positive size gets through: the library names the head dims it supports. */
        {"--head-dim", CLI_OPT_INT, &o->head_dim, 1, 1 << 20, NULL},
        {"--dtype", CLI_OPT_STRING, &o->dtype_name, 0, 0, NULL},
        {"--causal", CLI_OPT_FLAG, &o->causal, 0, 0, NULL},
        {"--window", CLI_OPT_STRING, &o->window_name, 0, 0, NULL},
        {"--softcap", CLI_OPT_STRING, &o->softcap_name, 0, 0, NULL},
        {"--alibi", CLI_OPT_FLAG, &o->alibi, 0, 0, NULL},
        {"--bias", CLI_OPT_FLAG, &o->bias, 0, 0, NULL},
        {"--bias-dtype", CLI_OPT_STRING, &o->bias_dtype_name, 0, 0, NULL},
        {"--bias-layout", CLI_OPT_STRING, &o->bias_layout_name, 0, 0, NULL},
        {"--varlen", CLI_OPT_FLAG, &o->varlen, 0, 0, NULL},
        {"--splits", CLI_OPT_INT, &o->splits, 0, 256, NULL},
        {"--page-size", CLI_OPT_INT, &o->page_size, 1, INT32_MAX, NULL},
        {"--append", CLI_OPT_INT, &o->append, 1, INT32_MAX, NULL},
        {"--backward", CLI_OPT_FLAG, &o->backward, 0, 0, NULL},
        {"--check", CLI_OPT_FLAG, &o->check, 0, 0, NULL},
        {"--repeat", CLI_OPT_INT, &o->repeat, 1, 1000, &o->repeat_seen},
        {"--warmup", CLI_OPT_INT, &o->warmup, 0, 1000, &o->warmup_seen},
        {"--threads", CLI_OPT_INT, &o->threads, 0, 4096, NULL},
        {"--seed", CLI_OPT_INT, &o->seed, 0, INT64_MAX, NULL},
        {"--json", CLI_OPT_FLAG, &o->json, 0, 0, NULL},
        {"--log", CLI_OPT_STRING, &o->log_name, 0, 0, NULL},
    };
    int rc = cli_parse(argc, argv, opts, sizeof opts / sizeof opts[0], usage);
    if (rc != CLI_CONTINUE)
        return rc;
    if (!o->kv_heads_seen)
        o->kv_heads = o->heads;
    if (!o->seq_q_seen)
        o->seq_q = o->seq;
    if (!o->seq_k_seen)
        o->seq_k = o->seq;
    if (o->window_name && !cli_parse_window(o->window_name, &o->window))
        return cli_usage_error("run", usage,
                               "--window takes L,R: two integers (-1: no bound), "
                               "not '%s'",
                               o->window_name);
    if (o->varlen && (o->bias || o->page_size || o->append))
        return cli_usage_error("run", usage, "--varlen takes no --bias, --page-size or --append");
    o->bias_dtype = FA_DTYPE_F32;
    if (o->bias_dtype_name) {
        if (!o->bias)
            return cli_usage_error("run", usage, "--bias-dtype needs --bias");
        if ((rc = cli_parse_dtype("run", usage, o->bias_dtype_name, &o->bias_dtype)) !=
            CLI_CONTINUE)
            return rc;
        if (o->bias_dtype == FA_DTYPE_E4M3)
            return cli_usage_error("run", usage, "--bias-dtype takes f32, f16 or bf16, not e4m3");
    }
    if (o->bias_layout_name) {
        if (!o->bias)
            return cli_usage_error("run", usage, "--bias-layout needs --bias");
        o->bias_bhsd = !strcmp(o->bias_layout_name, bias_layout_names[1]);
        if (!o->bias_bhsd && strcmp(o->bias_layout_name, bias_layout_names[0]))
            return cli_usage_error("run", usage, "--bias-layout takes bshd or bhsd, not '%s'",
                                   o->bias_layout_name);
    }
    if (o->softcap_name && !cli_parse_softcap(o->softcap_name, &o->softcap))
        return cli_usage_error("run", usage, "--softcap takes a number, not '%s'", o->softcap_name);
    return CLI_CONTINUE;
}

/* The problem of `a` as the float64 reference takes it. */
static fa_ref_problem ref_problem(const cli_attn *a)
{
    const cli_attn_shape *s = &a->shape;
    return (fa_ref_problem){.dtype = s->dtype,
                            .o_dtype = cli_attn_o_dtype(s),
                            .batch = s->batch,
                            .seq_q = s->seq_q,
                            .seq_k = s->seq_k,
                            .heads_q = s->heads_q,
                            .heads_kv = s->heads_kv,
                            .head_dim = s->head_dim,
                            .scale = a->desc.scale,
                            .causal = s->causal,
                            .window = s->window,
                            .softcap = s->softcap,
                            .alibi_slopes = a->slopes_host,
                            .bias = a->bias_host,
                            .bias_dtype = s->bias_dtype,
                            /* one bias for every batch entry; query and head strides as laid out */
                            .bias_stride = {0, a->tbias.stride[1], a->tbias.stride[2]}};
}

/* Reads a buffer of `bytes` back into a new host array (NULL when out of memory or the read
 * fails; *st says which). */
static void *read_back(fa_buffer *buf, size_t bytes, fa_status *st)
{
    if (*st != FA_OK)
        return NULL;
    void *host = malloc(bytes ? bytes : 1);
    if (!host)
        *st = FA_ERROR_OUT_OF_HOST_MEMORY;
    else if ((*st = fa_buffer_read(buf, 0, host, bytes)) != FA_OK) {
        free(host);
        host = NULL;
    }
    return host;
}

/* Sequence b of a packed batch (--varlen) as the reference takes it: one batch entry of its own
 * lengths, and the element offsets of its first query and key rows. */
static fa_ref_problem sequence_problem(const cli_attn *a, int64_t b, size_t *q0, size_t *k0)
{
    fa_ref_problem p = ref_problem(a);
    const int32_t *cq = a->cu_host[0], *ck = a->cu_host[1];
    p.batch = 1;
    p.seq_q = cq[b + 1] - cq[b];
    p.seq_k = ck[b + 1] - ck[b];
    *q0 = (size_t)(cq[b] * p.heads_q * p.head_dim);
    *k0 = (size_t)(ck[b] * p.heads_kv * p.head_dim);
    return p;
}

/* The worse of two checks of the same kind, counts summed (a packed batch's sequences). */
static void merge_rows(fa_row_check *into, const fa_row_check *c)
{
    into->rows_checked += c->rows_checked;
    into->max_err_o = fmax(into->max_err_o, c->max_err_o);
    into->max_err_lse = fmax(into->max_err_lse, c->max_err_lse);
    into->baseline_err_o = fmax(into->baseline_err_o, c->baseline_err_o);
    into->non_finite = into->non_finite || c->non_finite;
    into->pass = into->pass && c->pass;
}

static void merge_grads(fa_grad_check *into, const fa_grad_check *c)
{
    into->rows_checked += c->rows_checked;
    into->key_rows_checked += c->key_rows_checked;
    into->err_dq = fmax(into->err_dq, c->err_dq);
    into->tol_dq = fmax(into->tol_dq, c->tol_dq);
    into->err_dk = fmax(into->err_dk, c->err_dk);
    into->tol_dk = fmax(into->tol_dk, c->tol_dk);
    into->err_dv = fmax(into->err_dv, c->err_dv);
    into->tol_dv = fmax(into->tol_dv, c->tol_dv);
    into->non_finite = into->non_finite || c->non_finite;
    into->pass = into->pass && c->pass;
}

/* Reads q, k, v, d_o, dq, dk and dv back and checks the gradients on sampled rows. */
static fa_status check_grads(cli_attn *a, uint64_t seed, fa_grad_check *out, char *detail,
                             size_t detail_size)
{
    size_t elem = fa_dtype_size(a->shape.dtype);
    size_t q_bytes = a->q_elems * elem, kv_bytes = a->kv_elems * elem;
    fa_status st = FA_OK;
    void *q = read_back(a->q, q_bytes, &st), *k = read_back(a->k, kv_bytes, &st);
    void *v = read_back(a->v, kv_bytes, &st), *d_o = read_back(a->d_o, q_bytes, &st);
    void *dq = read_back(a->d_q, q_bytes, &st), *dk = read_back(a->d_k, kv_bytes, &st);
    void *dv = read_back(a->d_v, kv_bytes, &st);
    const fa_ref_problem p = ref_problem(a);
    if (st == FA_OK && !a->shape.varlen &&
        !fa_testkit_check_backward_rows(&p, q, k, v, d_o, dq, dk, dv, seed, out))
        st = FA_ERROR_OUT_OF_HOST_MEMORY;
    if (st == FA_OK && a->shape.varlen) { /* sequence by sequence, each on its own */
        *out = (fa_grad_check){.pass = true};
        for (int64_t b = 0; st == FA_OK && b < a->shape.batch; b++) {
            size_t q0, k0;
            const fa_ref_problem one = sequence_problem(a, b, &q0, &k0);
            fa_grad_check c;
            const size_t qo = q0 * elem, ko = k0 * elem;
            const char *qb = q, *kb = k, *vb = v, *dob = d_o, *dqb = dq, *dkb = dk, *dvb = dv;
            if (one.seq_q == 0 && one.seq_k == 0)
                continue;
            if (!fa_testkit_check_backward_rows(&one, qb + qo, kb + ko, vb + ko, dob + qo, dqb + qo,
                                                dkb + ko, dvb + ko, seed + (uint64_t)b, &c))
                st = FA_ERROR_OUT_OF_HOST_MEMORY;
            else
                merge_grads(out, &c);
        }
    }
    if (st == FA_ERROR_OUT_OF_HOST_MEMORY)
        snprintf(detail, detail_size, "cannot allocate host memory to check the gradients");
    free(q);
    free(k);
    free(v);
    free(d_o);
    free(dq);
    free(dk);
    free(dv);
    return st;
}

/* With --append: whether k and v (logical order) are the cache after the append. */
static bool append_matches(const cli_attn *a, const void *k, const void *v, fa_status *st)
{
    const size_t bytes = a->kv_elems * fa_dtype_size(a->shape.dtype);
    void *want = malloc(bytes ? bytes : 1);
    bool same = want != NULL;
    for (int x = 0; same && x < 2; x++) {
        if (!cli_attn_appended(a, x, want))
            *st = FA_ERROR_OUT_OF_HOST_MEMORY;
        same = *st == FA_OK && memcmp(want, x ? v : k, bytes) == 0;
    }
    if (!want)
        *st = FA_ERROR_OUT_OF_HOST_MEMORY;
    free(want);
    return same;
}

/* Reads q, k, v, o and lse back and checks CHECK_ROWS sampled rows (with --append, also the
 * cache into *append_ok). */
static fa_status check_rows(cli_attn *a, uint64_t seed, fa_row_check *out, bool *append_ok,
                            char *detail, size_t detail_size)
{
    size_t elem = fa_dtype_size(a->shape.dtype),
           o_elem = fa_dtype_size(cli_attn_o_dtype(&a->shape));
    size_t q_bytes = a->q_elems * elem, kv_bytes = a->kv_elems * elem;
    fa_status st = FA_OK;
    void *q = read_back(a->q, q_bytes, &st), *k = read_back(a->k, kv_bytes, &st);
    void *v = read_back(a->v, kv_bytes, &st), *o = read_back(a->o, a->q_elems * o_elem, &st);
    float *lse = read_back(a->lse, a->lse_elems * sizeof(float), &st);
    void *logical = st == FA_OK && a->shape.page_size > 0 ? malloc(kv_bytes ? kv_bytes : 1) : NULL;
    if (st == FA_OK && a->shape.page_size > 0 && !logical)
        st = FA_ERROR_OUT_OF_HOST_MEMORY;
    if (logical) { /* the reference takes K and V in sequence order */
        cli_attn_unpage(a, k, logical);
        memcpy(k, logical, kv_bytes);
        cli_attn_unpage(a, v, logical);
        memcpy(v, logical, kv_bytes);
        free(logical);
    }
    if (st == FA_OK && a->shape.append > 0)
        *append_ok = append_matches(a, k, v, &st);
    if (st == FA_OK && !a->shape.varlen) {
        const fa_ref_problem p = ref_problem(a);
        fa_testkit_check_forward_rows(&p, q, k, v, o, lse, CHECK_ROWS, seed, out);
    } else if (st == FA_OK) { /* sequence by sequence, its LSE gathered from (Hq, total_q) */
        *out = (fa_row_check){.pass = true};
        const int64_t total_q = a->cu_host[0][a->shape.batch], hq = a->shape.heads_q;
        const int64_t rows = CHECK_ROWS / a->shape.batch > 4 ? CHECK_ROWS / a->shape.batch : 4;
        for (int64_t b = 0; st == FA_OK && b < a->shape.batch; b++) {
            size_t q0, k0;
            const fa_ref_problem one = sequence_problem(a, b, &q0, &k0);
            if (one.seq_q == 0)
                continue;
            float *own = malloc((size_t)(hq * one.seq_q) * sizeof *own);
            if (!own) {
                st = FA_ERROR_OUT_OF_HOST_MEMORY;
                snprintf(detail, detail_size, "cannot allocate host memory for the check");
                break;
            }
            for (int64_t h = 0; h < hq; h++)
                for (int64_t i = 0; i < one.seq_q; i++)
                    own[h * one.seq_q + i] = lse[h * total_q + a->cu_host[0][b] + i];
            const char *qb = q, *kb = k, *vb = v, *ob = o;
            fa_row_check c;
            fa_testkit_check_forward_rows(&one, qb + q0 * elem, kb + k0 * elem, vb + k0 * elem,
                                          ob + q0 * o_elem, own, rows, seed + (uint64_t)b, &c);
            merge_rows(out, &c);
            free(own);
        }
    } else if (st == FA_ERROR_OUT_OF_HOST_MEMORY) {
        snprintf(detail, detail_size, "cannot allocate host memory to read the result back");
    }
    free(q);
    free(k);
    free(v);
    free(o);
    free(lse);
    return st;
}

static void print_bytes(uint64_t bytes)
{
    char text[32];
    fputs(cli_format_bytes(text, sizeof text, bytes), stdout);
}

typedef struct run_result {
    fa_backend backend;
    fa_device_info device;
    cli_attn_shape shape;
    double forward_first_s; /* with --backward: the one forward call */
    cli_rss_probe forward_rss;
    cli_timing timing;
    double flop;
    double kv_bytes;          /* K and V read by one forward */
    int64_t total_q, total_k; /* --varlen: the packed rows */
    fa_memory_stats memory;
    bool checked;
    fa_row_check check;
    bool append_ok;     /* with --append and --check: k and v hold the cache after the append */
    bool grads_checked; /* with --backward */
    fa_grad_check grads;
    double load; /* 1-minute load average before the run; < 0 unknown */
} run_result;

static void print_text(const run_options *o, const run_result *r)
{
    const cli_attn_shape *s = &r->shape;
    bool cpu = r->backend == FA_BACKEND_CPU;
    printf("backend   %s, device %d: %s\n", fa_backend_name(r->backend), r->device.index,
           r->device.name);
    char variant[160] = "";
    if (s->window.enabled)
        snprintf(variant, sizeof variant, " window=%d,%d", (int)s->window.left,
                 (int)s->window.right);
    if (s->softcap != 0.0f)
        snprintf(variant + strlen(variant), sizeof variant - strlen(variant), " softcap=%g",
                 (double)s->softcap);
    if (s->alibi)
        snprintf(variant + strlen(variant), sizeof variant - strlen(variant), " alibi");
    if (s->bias)
        snprintf(variant + strlen(variant), sizeof variant - strlen(variant), " bias (%s, %s)",
                 fa_dtype_name(s->bias_dtype), bias_layout_names[s->bias_bhsd]);
    if (s->varlen)
        snprintf(variant + strlen(variant), sizeof variant - strlen(variant),
                 " varlen (%" PRId64 " query, %" PRId64 " key rows)", r->total_q, r->total_k);
    printf("problem   B=%" PRId64 " Hq=%" PRId64 " Hkv=%" PRId64 " Sq=%" PRId64 " Sk=%" PRId64
           " D=%" PRId64 " %s%s%s, %s\n",
           s->batch, s->heads_q, s->heads_kv, s->seq_q, s->seq_k, s->head_dim,
           fa_dtype_name(s->dtype), s->causal ? " causal" : "", variant,
           o->backward ? "backward" : "forward");
    if (o->backward)
        printf("forward   one call %.3f ms (supplies O and LSE)\n", 1e3 * r->forward_first_s);
    const cli_timing *t = &r->timing;
    printf("time      %.3f ms  median of %d timed run%s after %d warm-up%s\n", 1e3 * t->median_s,
           t->timed_runs, t->timed_runs == 1 ? "" : "s", t->warmup_runs,
           t->reduced ? " (first call > 2 s: one run only)" : "");
    printf("          first call %.3f ms, fastest %.3f ms\n", 1e3 * t->first_s, 1e3 * t->min_s);
    printf("rate      %.4f TFLOP/s  (%.4g TFLOP per call)\n",
           t->median_s > 0 ? r->flop / t->median_s * 1e-12 : 0.0, r->flop * 1e-12);
    if (!o->backward)
        printf("          %.1f GB/s of K and V read\n",
               t->median_s > 0 ? r->kv_bytes / t->median_s * 1e-9 : 0.0);
    printf("memory    workspace peak ");
    print_bytes(r->memory.workspace_peak_bytes);
    printf(" beyond inputs/outputs (");
    print_bytes(r->memory.buffer_peak_bytes);
    printf(" of buffers)\n          a standard attention's score matrix: ");
    print_bytes(cli_attn_score_bytes(s));
    printf("\n");
    if (cpu) {
        const cli_rss_probe *p = o->backward ? &r->forward_rss : &t->first_rss;
        if (p->valid) {
            printf("          peak resident growth over the first forward call: ");
            print_bytes(p->growth);
            printf("%s\n", p->exact ? "" : " (upper bound: the peak could not be reset)");
        }
        if (o->backward && t->first_rss.valid) {
            printf("          peak resident growth over the first backward call: ");
            print_bytes(t->first_rss.growth);
            printf("%s\n", t->first_rss.exact ? "" : " (upper bound)");
        }
    }
    if (cpu && r->device.compute_units > 0 && r->load > 1.25 * r->device.compute_units)
        printf("note      load average %.1f on %u cores: other processes shared the CPU,\n"
               "          so the times are longer than this machine's own\n",
               r->load, (unsigned)r->device.compute_units);
    if (s->append > 0)
        printf("append    %" PRId64 " rows per sequence written at key %" PRId64
               " by each call%s\n",
               s->append, s->seq_k - s->append,
               !r->checked    ? ""
               : r->append_ok ? "; k and v as expected"
                              : "; k and v DIFFER from the expected cache");
    if (r->checked) {
        const fa_row_check *c = &r->check;
        printf("check     %" PRId64 " rows vs float64: O max abs err %.3g (same-dtype baseline "
               "%.3g), LSE max rel err %.3g%s: %s\n",
               c->rows_checked, c->max_err_o, c->baseline_err_o, c->max_err_lse,
               c->non_finite ? ", NON-FINITE values" : "", c->pass ? "PASS" : "FAIL");
    }
    if (r->grads_checked) {
        const fa_grad_check *g = &r->grads;
        printf("          gradients on %" PRId64 " query and %" PRId64 " key rows: dQ max abs err "
               "%.3g (allowed %.3g), dK %.3g (%.3g), dV %.3g (%.3g)%s: %s\n",
               g->rows_checked, g->key_rows_checked, g->err_dq, g->tol_dq, g->err_dk, g->tol_dk,
               g->err_dv, g->tol_dv, g->non_finite ? ", NON-FINITE values" : "",
               g->pass ? "PASS" : "FAIL");
    }
}

static void print_json(const run_options *o, const run_result *r)
{
    const cli_attn_shape *s = &r->shape;
    const cli_timing *t = &r->timing;
    printf("{\"backend\": ");
    cli_json_string(stdout, fa_backend_name(r->backend));
    printf(", \"device_index\": %d, \"device\": ", r->device.index);
    cli_json_string(stdout, r->device.name);
    printf(", \"dtype\": ");
    cli_json_string(stdout, fa_dtype_name(s->dtype));
    printf(", \"batch\": %" PRId64 ", \"heads\": %" PRId64 ", \"kv_heads\": %" PRId64
           ", \"seq_q\": %" PRId64 ", \"seq_k\": %" PRId64 ", \"head_dim\": %" PRId64
           ", \"causal\": %s, \"direction\": \"%s\"",
           s->batch, s->heads_q, s->heads_kv, s->seq_q, s->seq_k, s->head_dim,
           s->causal ? "true" : "false", o->backward ? "backward" : "forward");
    if (s->window.enabled)
        printf(", \"window\": [%d, %d]", (int)s->window.left, (int)s->window.right);
    printf(", \"softcap\": ");
    cli_json_number(stdout, s->softcap);
    printf(", \"alibi\": %s", s->alibi ? "true" : "false");
    printf(", \"bias\": %s", s->bias ? "true" : "false");
    if (s->bias)
        printf(", \"bias_dtype\": \"%s\", \"bias_layout\": \"%s\"", fa_dtype_name(s->bias_dtype),
               bias_layout_names[s->bias_bhsd]);
    printf(", \"varlen\": %s", s->varlen ? "true" : "false");
    if (s->varlen)
        printf(", \"total_q\": %" PRId64 ", \"total_k\": %" PRId64, r->total_q, r->total_k);
    printf(", \"time_ms\": ");
    cli_json_number(stdout, 1e3 * t->median_s);
    printf(", \"min_ms\": ");
    cli_json_number(stdout, 1e3 * t->min_s);
    printf(", \"first_ms\": ");
    cli_json_number(stdout, 1e3 * t->first_s);
    printf(", \"timed_runs\": %d, \"warmup_runs\": %d, \"reduced\": %s", t->timed_runs,
           t->warmup_runs, t->reduced ? "true" : "false");
    if (o->backward) {
        printf(", \"forward_ms\": ");
        cli_json_number(stdout, 1e3 * r->forward_first_s);
    }
    printf(", \"flop\": ");
    cli_json_number(stdout, r->flop);
    printf(", \"tflops\": ");
    cli_json_number(stdout, t->median_s > 0 ? r->flop / t->median_s * 1e-12 : 0.0);
    if (!o->backward) {
        printf(", \"kv_gbps\": ");
        cli_json_number(stdout, t->median_s > 0 ? r->kv_bytes / t->median_s * 1e-9 : 0.0);
    }
    printf(", \"workspace_peak_bytes\": %" PRIu64 ", \"buffer_peak_bytes\": %" PRIu64
           ", \"score_matrix_bytes\": %" PRIu64,
           r->memory.workspace_peak_bytes, r->memory.buffer_peak_bytes, cli_attn_score_bytes(s));
    printf(", \"load_average\": ");
    cli_json_number(stdout, r->load);
    if (r->backend == FA_BACKEND_CPU) {
        const cli_rss_probe *p = o->backward ? &r->forward_rss : &t->first_rss;
        if (p->valid)
            printf(", \"rss_growth_forward_bytes\": %" PRIu64 ", \"rss_exact\": %s", p->growth,
                   p->exact ? "true" : "false");
        if (o->backward && t->first_rss.valid)
            printf(", \"rss_growth_backward_bytes\": %" PRIu64, t->first_rss.growth);
    }
    if (r->checked) {
        const fa_row_check *c = &r->check;
        printf(", \"check\": {\"rows\": %" PRId64 ", \"max_err_o\": ", c->rows_checked);
        cli_json_number(stdout, c->max_err_o);
        printf(", \"baseline_err_o\": ");
        cli_json_number(stdout, c->baseline_err_o);
        printf(", \"max_err_lse\": ");
        cli_json_number(stdout, c->max_err_lse);
        printf(", \"non_finite\": %s, \"pass\": %s}", c->non_finite ? "true" : "false",
               c->pass ? "true" : "false");
        if (s->append > 0)
            printf(", \"append\": %" PRId64 ", \"append_ok\": %s", s->append,
                   r->append_ok ? "true" : "false");
    }
    if (r->grads_checked) {
        const fa_grad_check *g = &r->grads;
        printf(", \"grad_check\": {\"rows\": %" PRId64 ", \"key_rows\": %" PRId64, g->rows_checked,
               g->key_rows_checked);
        const double v[6] = {g->err_dq, g->tol_dq, g->err_dk, g->tol_dk, g->err_dv, g->tol_dv};
        static const char *const names[6] = {"err_dq", "tol_dq", "err_dk",
                                             "tol_dk", "err_dv", "tol_dv"};
        for (int i = 0; i < 6; i++) {
            printf(", \"%s\": ", names[i]);
            cli_json_number(stdout, v[i]);
        }
        printf(", \"non_finite\": %s, \"pass\": %s}", g->non_finite ? "true" : "false",
               g->pass ? "true" : "false");
    }
    printf("}\n");
}

/* Everything after the context exists; the caller destroys the context. */
static int run_problem(fa_context *ctx, const run_options *o, fa_dtype dtype, run_result *r)
{
    r->backend = fa_context_backend(ctx);
    fa_status st = fa_context_device(ctx, &r->device);
    if (st != FA_OK)
        return cli_fail(ctx, st);
    r->shape = (cli_attn_shape){.dtype = dtype,
                                .batch = o->batch,
                                .seq_q = o->seq_q,
                                .seq_k = o->seq_k,
                                .heads_q = o->heads,
                                .heads_kv = o->kv_heads,
                                .head_dim = o->head_dim,
                                .causal = o->causal,
                                .num_splits = (int32_t)o->splits,
                                .page_size = o->page_size,
                                .append = o->append,
                                .window = o->window,
                                .softcap = o->softcap,
                                .alibi = o->alibi,
                                .bias = o->bias,
                                .bias_dtype = o->bias_dtype,
                                .bias_bhsd = o->bias_bhsd,
                                .varlen = o->varlen};

    r->load = cli_load_average();
    cli_attn a;
    st = cli_attn_create(&a, ctx, &r->shape, o->backward, (uint64_t)o->seed);
    if (st != FA_OK) {
        int rc = cli_attn_fail(&a, st);
        cli_attn_destroy(&a);
        return rc;
    }
    const cli_time_plan plan = {.warmup = (int)o->warmup,
                                .repeat = (int)o->repeat,
                                .auto_reduce = !o->repeat_seen && !o->warmup_seen,
                                .slow_s = SLOW_CALL_S,
                                .warmup_s = o->warmup_seen ? 0.0 : cli_gpu_warmup_s(ctx)};
    if (o->backward) {
        cli_rss_begin(&r->forward_rss);
        double t0 = cli_now();
        st = cli_attn_call(&a, false);
        r->forward_first_s = cli_now() - t0;
        cli_rss_end(&r->forward_rss);
    }
    if (st == FA_OK)
        st = cli_attn_time(&a, o->backward, &plan, &r->timing);
    if (st == FA_OK)
        st = fa_context_memory(ctx, &r->memory);
    if (st != FA_OK) {
        int rc = cli_attn_fail(&a, st);
        cli_attn_destroy(&a);
        return rc;
    }
    r->flop = cli_attn_call_flops(&a, o->backward);
    r->kv_bytes = cli_attn_call_kv_bytes(&a);
    if (o->varlen) {
        r->total_q = a.cu_host[0][o->batch];
        r->total_k = a.cu_host[1][o->batch];
    }

    if (o->check) {
        char detail[256] = "";
        st = check_rows(&a, (uint64_t)o->seed + 100, &r->check, &r->append_ok, detail,
                        sizeof detail);
        if (st != FA_OK) {
            int rc = detail[0] ? cli_fail_detail(st, detail) : cli_fail(ctx, st);
            cli_attn_destroy(&a);
            return rc;
        }
        r->checked = true;
        if (o->backward) {
            st = check_grads(&a, (uint64_t)o->seed + 200, &r->grads, detail, sizeof detail);
            if (st != FA_OK) {
                int rc = detail[0] ? cli_fail_detail(st, detail) : cli_fail(ctx, st);
                cli_attn_destroy(&a);
                return rc;
            }
            r->grads_checked = true;
        }
    }
    cli_attn_destroy(&a);

    if (o->json)
        print_json(o, r);
    else
        print_text(o, r);
    if (r->checked && !r->check.pass) {
        fprintf(stderr,
                "flashattn: check failed: O max abs err %.3g (allowed 2 x baseline %.3g + 1e-5), "
                "LSE max rel err %.3g (allowed 1e-3)%s\n",
                r->check.max_err_o, r->check.baseline_err_o, r->check.max_err_lse,
                r->check.non_finite ? ", non-finite values" : "");
        return CLI_EXIT_FAILURE;
    }
    if (r->checked && r->shape.append > 0 && !r->append_ok) {
        fprintf(stderr, "flashattn: check failed: k and v are not the cache after the append\n");
        return CLI_EXIT_FAILURE;
    }
    if (r->grads_checked && !r->grads.pass) {
        fprintf(stderr,
                "flashattn: check failed: dQ max abs err %.3g (allowed %.3g), dK %.3g (%.3g), "
                "dV %.3g (%.3g)%s\n",
                r->grads.err_dq, r->grads.tol_dq, r->grads.err_dk, r->grads.tol_dk, r->grads.err_dv,
                r->grads.tol_dv, r->grads.non_finite ? ", non-finite values" : "");
        return CLI_EXIT_FAILURE;
    }
    return CLI_EXIT_OK;
}

int fa_cmd_run(int argc, char **argv)
{
    run_options o;
    int rc = parse_options(argc, argv, &o);
    if (rc != CLI_CONTINUE)
        return rc;
    fa_backend backend = FA_BACKEND_AUTO;
    if (o.backend_name &&
        (rc = cli_parse_backend("run", usage, o.backend_name, &backend)) != CLI_CONTINUE)
        return rc;
    fa_dtype dtype = FA_DTYPE_INVALID;
    if (o.dtype_name && (rc = cli_parse_dtype("run", usage, o.dtype_name, &dtype)) != CLI_CONTINUE)
        return rc;
    int log_level;
    if ((rc = cli_parse_log("run", usage, o.log_name, &log_level)) != CLI_CONTINUE)
        return rc;
    if (o.device_seen && backend == FA_BACKEND_AUTO)
        return cli_usage_error("run", usage,
                               "--device needs --backend (AUTO takes FA_DEVICE from the "
                               "environment)");

    fa_context *ctx = NULL;
    fa_status st = cli_context_create(backend, o.device, o.device_seen, o.threads, log_level, &ctx);
    if (st != FA_OK)
        return cli_fail(NULL, st);
    if (dtype == FA_DTYPE_INVALID)
        dtype = fa_context_backend(ctx) == FA_BACKEND_CPU ? FA_DTYPE_F32 : FA_DTYPE_F16;

    run_result result;
    memset(&result, 0, sizeof result);
    rc = run_problem(ctx, &o, dtype, &result);
    fa_context_destroy(ctx);
    return rc;
}
