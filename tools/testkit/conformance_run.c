// SPDX-License-Identifier: MIT
/* The conformance runner: every selected backend on every generated case. The inputs and the
 * float64 reference of a case are computed once and shared by every backend. */
#include "tk_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int fa_testkit_default_device(fa_backend backend)
{
    fa_backend_info info;
    if (fa_backend_query(backend, &info) != FA_OK)
        return 0;
    for (int i = 0; i < info.device_count; i++) {
        fa_device_info dev;
        if (fa_device_query(backend, i, &dev) == FA_OK &&
            (dev.kind == FA_DEVICE_KIND_DISCRETE_GPU || dev.kind == FA_DEVICE_KIND_INTEGRATED_GPU))
            return i;
    }
    return 0;
}

/* The device a backend is tested on: the one asked for, else its default. */
static int pick_device(const fa_conformance_options *opt, fa_backend backend)
{
    return opt->device_given ? opt->device : fa_testkit_default_device(backend);
}

/* Whether `name` contains one of the '|'-separated parts of `filter`. */
static bool name_matches(const char *name, const char *filter)
{
    for (const char *part = filter;; part++) {
        const char *end = strchr(part, '|');
        size_t len = end ? (size_t)(end - part) : strlen(part);
        for (const char *at = name; *at; at++)
            if (strncmp(at, part, len) == 0)
                return true;
        if (!end)
            return len == 0;
        part = end;
    }
}

/* Cases that need the same GPU programs (all but the sequence lengths, batch and layout agree)
 * form a group; --shard deals out whole groups, numbered by first appearance, so that shards
 * never build the same program variants twice. Writes each case's group into group[]. */
static bool same_programs(const tk_case *a, const tk_case *b)
{
    return a->p.dtype == b->p.dtype && a->p.head_dim == b->p.head_dim &&
           a->p.causal == b->p.causal && a->heads == b->heads && a->backward == b->backward;
}

static bool program_groups(const tk_case *cases, int64_t n, int64_t *group)
{
    int64_t *first = malloc((size_t)(n > 0 ? n : 1) * sizeof *first); /* first case of each */
    int64_t n_groups = 0;
    if (!first)
        return false;
    for (int64_t c = 0; c < n; c++) {
        int64_t g = 0;
        while (g < n_groups && !same_programs(&cases[first[g]], &cases[c]))
            g++;
        if (g == n_groups)
            first[n_groups++] = c;
        group[c] = g;
    }
    free(first);
    return true;
}

static bool backend_open(const fa_conformance_options *opt, tk_backend_run *br, fa_context **ctx,
                         tk_result *ctx_failure)
{
    fa_backend_info info;
    fa_status st = fa_backend_query(br->backend, &info);
    *ctx = NULL;
    if (st != FA_OK) {
        snprintf(br->reason, sizeof br->reason, "fa_backend_query: %s", fa_status_name(st));
        return false;
    }
    if (!info.available) {
        snprintf(br->reason, sizeof br->reason, "%s",
                 info.reason[0] ? info.reason
                 : info.built   ? "unavailable"
                                : "not built");
        return false;
    }
    br->available = true;
    /* the backend named explicitly: FA_BACKEND / FA_DEVICE do not apply */
    const int device = pick_device(opt, br->backend);
    st = fa_context_create(
        &(fa_context_desc){
            .backend = br->backend, .device = device, .log = opt->log, .log_level = opt->log_level},
        ctx);
    if (st != FA_OK) {
        *ctx = NULL;
        ctx_failure->outcome = TK_FAIL;
        ctx_failure->error = true;
        snprintf(ctx_failure->detail, sizeof ctx_failure->detail, "fa_context_create: %s: %s",
                 fa_status_name(st), fa_last_create_error());
        snprintf(br->device, sizeof br->device, "(no context)");
        return true;
    }
    if (fa_context_backend(*ctx) != br->backend) {
        ctx_failure->outcome = TK_FAIL;
        ctx_failure->error = true;
        snprintf(ctx_failure->detail, sizeof ctx_failure->detail,
                 "fa_context_create gave a %s context for %s",
                 fa_backend_name(fa_context_backend(*ctx)), br->name);
        fa_context_destroy(*ctx);
        *ctx = NULL;
        return true;
    }
    fa_device_info dev;
    if (fa_context_device(*ctx, &dev) == FA_OK)
        snprintf(br->device, sizeof br->device, "%.120s (%.60s%s%.60s)", dev.name, dev.vendor,
                 dev.driver[0] ? ", " : "", dev.driver);
    return true;
}

static void progress_line(const tk_run *run, int64_t c, double ref_seconds, FILE *f)
{
    fprintf(f, "[%4lld/%lld] %-58s ref %.2fs", (long long)c + 1, (long long)run->n_cases,
            run->cases[c].name, ref_seconds);
    for (int b = 0; b < run->n_backends; b++) {
        const tk_backend_run *br = &run->backends[b];
        if (!br->available)
            continue;
        const tk_result *r = &br->results[c];
        static const char *word[] = {"pass", "FAIL", "skip"};
        fprintf(f, " %s:%s", br->name, word[r->outcome]);
        if (r->outcome == TK_PASS)
            fprintf(f, " %.2f %.2fs", r->ratio, r->seconds);
    }
    fputc('\n', f);
    fflush(f);
}

int fa_conformance_run(const fa_conformance_options *opt_in, fa_conformance_totals *totals)
{
    fa_conformance_options opt = {0};
    if (opt_in)
        opt = *opt_in;
    if (!opt.seed)
        opt.seed = 1;
    if (!opt.out)
        opt.out = stdout;
    if (!opt.progress)
        opt.progress = stderr;
    tk_run run = {.opt = &opt};
    double start = tk_now();

    tk_case *all;
    int64_t n_all = tk_cases_generate(opt.full, opt.seed, &all);
    run.cases = malloc((size_t)(n_all > 0 ? n_all : 1) * sizeof *run.cases);
    int64_t *group =
        opt.shard_count > 1 ? malloc((size_t)(n_all > 0 ? n_all : 1) * sizeof *group) : NULL;
    if (group && !program_groups(all, n_all, group)) {
        free(group);
        group = NULL;
    }
    if (opt.shard_count > 1 && !group) {
        free(run.cases);
        run.cases = NULL; /* reported as out of host memory below */
    }
    for (int64_t c = 0; run.cases && c < n_all; c++) {
        if (opt.filter && !name_matches(all[c].name, opt.filter))
            continue;
        if (group && group[c] % opt.shard_count != opt.shard_index)
            continue;
        if (opt.limit > 0 && run.n_cases >= opt.limit)
            break;
        run.cases[run.n_cases] = all[c];
        run.cases[run.n_cases++].deterministic = opt.deterministic;
    }
    free(all);
    free(group);

    fa_backend list[FA_BACKEND_COUNT];
    int n_list = 0;
    if (opt.backend_mask) {
        for (int b = FA_BACKEND_CUDA; b < FA_BACKEND_COUNT; b++)
            if (opt.backend_mask & (1u << b))
                list[n_list++] = (fa_backend)b;
    } else if (opt.backend <= FA_BACKEND_AUTO || opt.backend >= FA_BACKEND_COUNT)
        for (int b = FA_BACKEND_CUDA; b < FA_BACKEND_COUNT; b++)
            list[n_list++] = (fa_backend)b;
    else
        list[n_list++] = (fa_backend)opt.backend;
    run.backends = calloc((size_t)n_list, sizeof *run.backends);
    fa_context *ctx[FA_BACKEND_COUNT] = {NULL};
    tk_result ctx_failure[FA_BACKEND_COUNT];
    memset(ctx_failure, 0, sizeof ctx_failure);
    if (!run.cases || !run.backends) {
        fprintf(opt.progress, "conformance: out of host memory\n");
        free(run.cases);
        free(run.backends);
        return 1;
    }
    run.n_backends = n_list;
    bool any_context = false;
    for (int b = 0; b < n_list; b++) {
        tk_backend_run *br = &run.backends[b];
        br->backend = list[b];
        br->name = fa_backend_name(list[b]);
        br->results = calloc((size_t)(run.n_cases > 0 ? run.n_cases : 1), sizeof *br->results);
        backend_open(&opt, br, &ctx[b], &ctx_failure[b]);
        any_context |= ctx[b] != NULL;
        if (!br->available)
            fprintf(opt.progress, "%s: skipped: %s\n", br->name, br->reason);
        else if (!ctx[b])
            fprintf(opt.progress, "%s: %s\n", br->name, ctx_failure[b].detail);
        else
            fprintf(opt.progress, "%s: %s\n", br->name, br->device);
    }
    fprintf(opt.progress, "%lld cases (%s, seed %llu", (long long)run.n_cases,
            opt.full ? "full" : "quick", (unsigned long long)opt.seed);
    if (opt.shard_count > 1)
        fprintf(opt.progress, ", shard %d/%d", opt.shard_index, opt.shard_count);
    fprintf(opt.progress, ")\n");

    for (int64_t c = 0; c < run.n_cases; c++) {
        const tk_case *tc = &run.cases[c];
        const fa_ref_problem *p = &tc->p;
        for (int b = 0; b < n_list; b++) {
            tk_result *r = &run.backends[b].results[c];
            if (!run.backends[b].available) {
                r->outcome = TK_SKIP;
                snprintf(r->detail, sizeof r->detail, "backend %s", run.backends[b].reason);
            } else if (!ctx[b]) {
                *r = ctx_failure[b];
            }
        }
        double ref_seconds = 0;
        if (any_context) {
            size_t es = fa_dtype_size(p->dtype);
            size_t nq = (size_t)(p->batch * p->seq_q * p->heads_q * p->head_dim);
            size_t nk = (size_t)(p->batch * p->seq_k * p->heads_kv * p->head_dim);
            tk_inputs in = {malloc(nq * es + 4), malloc(nk * es + 4), malloc(nk * es + 4),
                            tc->backward ? malloc(nq * es + 4) : NULL};
            tk_data t;
            tk_expect e;
            bool have_data = false, have_expect = false;
            int32_t *lens = tc->seqlens ? malloc((size_t)p->batch * sizeof *lens + 4) : NULL;
            float *slopes =
                tc->alibi ? malloc((size_t)(p->batch * p->heads_q) * sizeof *slopes + 4) : NULL;
            tk_bias bias = {0};
            /* FP8 descale factors, B x Hkv for each of q, k, v, in the problem the reference
             * and the baseline take */
            const size_t n_descale = (size_t)(p->batch * p->heads_kv);
            float *descales = tc->descale ? malloc(3 * n_descale * sizeof *descales + 4) : NULL;
            fa_ref_problem problem = *p;
            bool ok = in.q && in.k && in.v && (!tc->backward || in.d_o) && (!tc->seqlens || lens) &&
                      (!tc->alibi || slopes) && (!tc->bias || tk_case_bias(tc, &bias)) &&
                      (!tc->descale || descales);
            if (ok && descales) {
                float *each[3] = {descales, descales + n_descale, descales + 2 * n_descale};
                tk_case_descales(tc, each);
                for (int x = 0; x < 3; x++)
                    problem.descale[x] = each[x];
            }
            if (ok) {
                tk_case_fill_inputs(tc, &in);
                ok = have_data = tk_data_init(&t, &problem, in.q, in.k, in.v, in.d_o);
                t.two_orders = tc->logits > 1.0f;
                if (lens) {
                    tk_case_seqlens(tc, lens);
                    t.seqlens = lens;
                }
                if (ok && slopes) {
                    tk_case_alibi_slopes(tc, slopes);
                    t.p.alibi_slopes = slopes;
                    t.p.alibi_batch_stride = tc->alibi == 2 ? p->heads_q : 0;
                }
                if (ok && bias.data) {
                    t.bias = &bias;
                    t.p.bias = bias.data;
                    t.p.bias_dtype = bias.dtype;
                    for (int d = 0; d < 3; d++) /* a dimension of 1 broadcasts too */
                        t.p.bias_stride[d] = bias.shape[d] == 1 ? 0 : bias.stride[d];
                }
            }
            double ref_start = tk_now();
            if (ok && !tc->noop)
                ok = have_expect = tk_expect_compute(&t, tc->backward, false, tc->seed + 5, &e);
            ref_seconds = tk_now() - ref_start;
            for (int b = 0; b < n_list; b++) {
                if (!ctx[b])
                    continue;
                tk_result *r = &run.backends[b].results[c];
                if (ok) {
                    tk_case_execute(ctx[b], tc, &in, &t, have_expect ? &e : NULL, r);
                } else {
                    r->outcome = TK_FAIL;
                    snprintf(r->detail, sizeof r->detail, "out of host memory for the reference");
                }
            }
            if (have_expect)
                tk_expect_free(&e);
            if (have_data)
                tk_data_free(&t);
            free(in.q);
            free(in.k);
            free(in.v);
            free(in.d_o);
            free(lens);
            free(slopes);
            free(descales);
            free(bias.data);
        }
        progress_line(&run, c, ref_seconds, opt.progress);
    }
    for (int b = 0; b < n_list; b++) {
        if (ctx[b])
            fa_context_destroy(ctx[b]);
        tk_backend_run *br = &run.backends[b];
        for (int64_t c = 0; c < run.n_cases; c++) {
            tk_outcome o = br->results[c].outcome;
            br->passed += o == TK_PASS;
            br->failed += o == TK_FAIL;
            br->skipped += o == TK_SKIP;
        }
    }
    run.seconds = tk_now() - start;

    fa_conformance_totals sum = {0};
    for (int b = 0; b < n_list; b++) {
        sum.passed += run.backends[b].passed;
        sum.failed += run.backends[b].failed;
        sum.skipped += run.backends[b].skipped;
    }
    tk_print_tables(&run, opt.out);
    bool files_ok = true;
    if (opt.report_path && !tk_write_markdown(&run, opt.report_path)) {
        fprintf(opt.progress, "conformance: cannot write %s: %s\n", opt.report_path,
                strerror(errno));
        files_ok = false;
    }
    if (opt.junit_path && !tk_write_junit(&run, opt.junit_path)) {
        fprintf(opt.progress, "conformance: cannot write %s: %s\n", opt.junit_path,
                strerror(errno));
        files_ok = false;
    }
    if (opt.json_path && !tk_write_json(&run, opt.json_path)) {
        fprintf(opt.progress, "conformance: cannot write %s: %s\n", opt.json_path, strerror(errno));
        files_ok = false;
    }
    fprintf(opt.out, "%lld passed, %lld failed, %lld skipped\n", (long long)sum.passed,
            (long long)sum.failed, (long long)sum.skipped);
    /* A backend the caller named (not "all") that could not run is a failure, not a skip: a
     * run that tested nothing must not pass. */
    const bool named =
        opt.backend_mask || (opt.backend > FA_BACKEND_AUTO && opt.backend < FA_BACKEND_COUNT);
    bool named_missing = false;
    for (int b = 0; named && b < n_list; b++)
        if (!run.backends[b].available) {
            fprintf(opt.out, "conformance: %s was named but is unavailable: %s\n",
                    run.backends[b].name, run.backends[b].reason);
            named_missing = true;
        }
    fflush(opt.out);
    if (totals)
        *totals = sum;
    for (int b = 0; b < n_list; b++)
        free(run.backends[b].results);
    free(run.backends);
    free(run.cases);
    return sum.failed == 0 && files_ok && !named_missing ? 0 : 1;
}
