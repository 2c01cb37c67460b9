// SPDX-License-Identifier: MIT
/* `flashattn bench`: FlashAttention's own benchmark grid (16k tokens per batch, hidden 2048,
 * seqlen 512..16k, head dim 64 and 128, causal off and on, forward and backward), and on the
 * CPU backend each row's fraction of this machine's measured FMA peak. */
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
#include "cpu_peak.h"
#include "fa_testkit.h"

#define TOKENS 16384
#define HIDDEN 2048
#define SLOW_CALL_S 2.0
#define MAX_TOTAL_S 1.0
/* A later row's (on a GPU cli_gpu_warmup_s where longer: building its programs may have idled the
 * GPU); the H200 ran N = 2048 rows 4x slower after a one-call warm-up */
#define WARMUP_S 0.3
/* The first row's: a process starts on a GPU at its idle clock (the H200's: 345 MHz) */
#define FIRST_WARMUP_S 1.0
#define SAMPLE_S 0.002 /* shorter calls are timed in groups: a host round trip costs ~20-50 us */
#define PEAK_SECONDS 1.5

static const char usage[] =
    "usage: flashattn bench [options]\n"
    "\n"
    "FlashAttention's benchmark grid: batch = 16384 / seqlen, heads = 2048 / head dim,\n"
    "seqlen 512, 1k, 2k, 4k, 8k, 16k, head dim 64 and 128, causal off and on, forward and\n"
    "backward. Progress on stderr, the table on stdout. On the CPU backend the machine's\n"
    "single-precision FMA peak is measured first and each row shows its fraction of it. One\n"
    "more row times an f32 forward (B=1 H=16 N=4096 D=128), the f32 reference point of\n"
    "docs/PERF.md.\n"
    "\n"
    "  --backend NAME   auto (default), cuda, vulkan, opencl or cpu\n"
    "  --device N       device index within --backend (default: its first GPU, else device 0)\n"
    "  --quick          seqlen 512 and 2k only (head dim 64 and 128): for a small CPU\n"
    "  --seqlen N       only the grid's rows with this seqlen\n"
    "  --head-dim N     only the grid's rows with this head dim (64 or 128)\n"
    "  --batch N        only the grid's rows with this batch size\n"
    "  --causal yes|no  only the causal or only the non-causal rows\n"
    "  --deterministic  time the backward with fa_attention_desc.deterministic set\n"
    "  --dtype T        f32, f16, bf16 or e4m3 (FP8: forward rows only, o in f16);\n"
    "                   default f16, f32 on the CPU backend\n"
    "  --repeat N       at most N timed runs per row (default 10; they stop after 1 s)\n"
    "  --threads N      CPU backend threads (default: OpenMP's)\n"
    "  --json FILE      also write the results as JSON\n"
    "  --csv FILE       also write the results as CSV\n"
    "  --log LEVEL      the library's messages up to LEVEL (error, warn, info, debug) on stderr\n"
    "  --decode         the decoding grid instead: one query token, batch 1, 16 and 64, cache\n"
    "                   length 4k, 32k and 128k, 32 query heads on 8 KV heads and 8 on 8, head\n"
    "                   dim 64 and 128, forward only, in GB/s of K and V read (rows whose K\n"
    "                   and V would take over half the device's memory, or K alone more than\n"
    "                   its largest buffer, are skipped); on the\n"
    "                   CPU backend the memory read rate is measured first, and each row shows\n"
    "                   its fraction of it\n"
    "  --splits N       fa_attention_desc.num_splits for every row (0: the backend chooses)\n"
    "  --alibi          every row with ALiBi (one geometric slope per query head, as run)\n"
    "  --window L,R     every row with a sliding window (as run; TFLOP/s then count the\n"
    "                   query-key pairs it leaves)\n"
    "  --softcap C      every row with logit softcapping C\n"
    "  --varlen         every row of the training grid and the f32 row as a packed batch of\n"
    "                   its batch size in sequences of seeded lengths from N/2 to 3N/2 (as run;\n"
    "                   TFLOP/s counted per sequence); not with --decode\n"
    "  --page-size N    with --decode: K and V as a paged cache of N-key pages\n"
    "                   (fa_attention_desc.block_table, a shuffled table)\n"
    "\n"
    "Each row: warm-up calls for at least 0.3 s (the first row: 1 s), then timed calls (each\n"
    "ending with fa_context_synchronize; calls under 2 ms in groups queued back to back, one\n"
    "synchronisation a group) until 1 s or N runs; the median is reported. When the first two\n"
    "calls each take over 2 s, the second is the only measurement. TFLOP/s counts\n"
    "4*B*H*N*N*D per forward, half when causal, 2.5x for backward (FlashAttention's\n"
    "convention).\n";

typedef struct bench_row {
    int64_t seqlen, head_dim, batch, heads;
    int64_t seq_k, heads_kv; /* the decoding grid's */
    double gbps;             /* of K and V read (forward) */
    bool causal, backward;
    fa_dtype dtype;
    double ms, tflops, peak_fraction; /* peak_fraction < 0: not measured */
    int runs;
    fa_status status;
} bench_row;

typedef struct bench_options {
    const char *backend_name, *dtype_name, *json_path, *csv_path;
    const char *causal_name, *log_name;
    int64_t device, repeat, threads, seqlen, head_dim, batch; /* the filters: 0 = all */
    int64_t splits, page_size;
    bool quick, device_seen, deterministic, decode, alibi, varlen;
    const char *window_name, *softcap_name;
    fa_window window; /* --window, on every row */
    float softcap;    /* --softcap, on every row */
} bench_options;

/* The variants every row runs with, where any. */
static void print_variants(const bench_options *o)
{
    if (o->window.enabled)
        printf("every row: window %d,%d\n", (int)o->window.left, (int)o->window.right);
    if (o->softcap != 0.0f)
        printf("every row: softcap %g\n", (double)o->softcap);
    if (o->alibi)
        printf("every row: ALiBi\n");
}

static void print_header(bool with_peak)
{
    printf("%7s %4s %5s %5s %6s %4s %11s %9s%s\n", "seqlen", "D", "batch", "heads", "causal", "dir",
           "ms", "TFLOP/s", with_peak ? "   % peak" : "");
}

static void print_row(const bench_row *r)
{
    printf("%7" PRId64 " %4" PRId64 " %5" PRId64 " %5" PRId64 " %6s %4s ", r->seqlen, r->head_dim,
           r->batch, r->heads, r->causal ? "yes" : "no", r->backward ? "bwd" : "fwd");
    if (r->status != FA_OK) {
        printf("%11s %9s  %s\n", "-", "-", fa_status_name(r->status));
        return;
    }
    printf("%11.3f %9.4f", r->ms, r->tflops);
    if (r->peak_fraction >= 0)
        printf(" %8.1f%%", 100.0 * r->peak_fraction);
    printf("\n");
}

/* Times the forward (and backward) of one grid point into rows[0] (and rows[1]). Failures are
 * printed and recorded in the rows; the grid goes on. */
static void bench_point(fa_context *ctx, const cli_attn_shape *shape, bool with_backward,
                        const bench_options *o, double peak_gflops, bench_row *rows)
{
    cli_attn a;
    fa_status st = cli_attn_create(&a, ctx, shape, with_backward, 1);
    if (st != FA_OK)
        cli_attn_fail(&a, st); /* once; both rows record it */
    static bool warm;          /* a process's first row warms up for longer */
    const cli_time_plan plan = {.warmup = 1,
                                .warmup_s =
                                    warm ? fmax(WARMUP_S, cli_gpu_warmup_s(ctx)) : FIRST_WARMUP_S,
                                .repeat = (int)o->repeat,
                                .auto_reduce = true,
                                .slow_s = SLOW_CALL_S,
                                .max_total_s = MAX_TOTAL_S,
                                .sample_s = SAMPLE_S};
    warm = true;
    for (int dir = 0; dir < (with_backward ? 2 : 1); dir++) {
        bench_row *r = &rows[dir];
        *r = (bench_row){.seqlen = shape->seq_q,
                         .head_dim = shape->head_dim,
                         .batch = shape->batch,
                         .heads = shape->heads_q,
                         .seq_k = shape->seq_k,
                         .heads_kv = shape->heads_kv,
                         .causal = shape->causal,
                         .backward = dir == 1,
                         .dtype = shape->dtype,
                         .peak_fraction = -1.0};
        cli_timing t;
        if (st == FA_OK) {
            st = cli_attn_time(&a, r->backward, &plan, &t);
            if (st != FA_OK)
                cli_attn_fail(&a, st);
        }
        r->status = st;
        if (st != FA_OK)
            continue;
        double flop = cli_attn_call_flops(&a, r->backward);
        r->ms = 1e3 * t.median_s;
        r->tflops = t.median_s > 0 ? flop / t.median_s * 1e-12 : 0.0;
        r->gbps =
            t.median_s > 0 && !r->backward ? cli_attn_call_kv_bytes(&a) / t.median_s * 1e-9 : 0.0;
        r->runs = t.timed_runs;
        if (peak_gflops > 0)
            r->peak_fraction = r->tflops * 1e3 / peak_gflops;
    }
    cli_attn_destroy(&a);
}

static void write_csv(FILE *f, const bench_row *rows, size_t n)
{
    fprintf(f, "seqlen,seq_k,head_dim,batch,heads,kv_heads,causal,direction,dtype,ms,tflops,"
               "kv_gbps,peak_fraction,runs,status\n");
    for (size_t i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        fprintf(f,
                "%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%d,%s,%s,",
                r->seqlen, r->seq_k, r->head_dim, r->batch, r->heads, r->heads_kv,
                r->causal ? 1 : 0, r->backward ? "bwd" : "fwd", fa_dtype_name(r->dtype));
        if (r->status == FA_OK)
            fprintf(f, "%.6g,%.6g,%.6g,", r->ms, r->tflops, r->gbps);
        else
            fprintf(f, ",,,");
        if (r->peak_fraction >= 0)
            fprintf(f, "%.4f", r->peak_fraction);
        fprintf(f, ",%d,%s\n", r->runs, fa_status_name(r->status));
    }
}

static void write_json(FILE *f, fa_backend backend, const fa_device_info *dev, const cpu_peak *peak,
                       double load, const bench_row *rows, size_t n)
{
    fprintf(f, "{\"backend\": ");
    cli_json_string(f, fa_backend_name(backend));
    fprintf(f, ", \"device\": ");
    cli_json_string(f, dev->name);
    fprintf(f, ", \"version\": ");
    cli_json_string(f, fa_version_string());
    if (peak) {
        fprintf(f, ", \"cpu_peak_gflops\": ");
        cli_json_number(f, peak->gflops);
        fprintf(f, ", \"cpu_peak_threads\": %d, \"cpu_peak_isa\": ", peak->threads);
        cli_json_string(f, peak->isa);
    }
    fprintf(f, ", \"load_average\": ");
    cli_json_number(f, load);
    fprintf(f, ", \"rows\": [");
    for (size_t i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        fprintf(f,
                "%s\n  {\"seqlen\": %" PRId64 ", \"seq_k\": %" PRId64 ", \"head_dim\": %" PRId64
                ", \"batch\": %" PRId64 ", \"heads\": %" PRId64 ", \"kv_heads\": %" PRId64
                ", \"causal\": %s, \"direction\": \"%s\", \"dtype\": ",
                i ? "," : "", r->seqlen, r->seq_k, r->head_dim, r->batch, r->heads, r->heads_kv,
                r->causal ? "true" : "false", r->backward ? "bwd" : "fwd");
        cli_json_string(f, fa_dtype_name(r->dtype));
        fprintf(f, ", \"status\": ");
        cli_json_string(f, fa_status_name(r->status));
        if (r->status == FA_OK) {
            fprintf(f, ", \"ms\": ");
            cli_json_number(f, r->ms);
            fprintf(f, ", \"tflops\": ");
            cli_json_number(f, r->tflops);
            fprintf(f, ", \"runs\": %d", r->runs);
            if (!r->backward) {
                fprintf(f, ", \"kv_gbps\": ");
                cli_json_number(f, r->gbps);
            }
        }
        if (r->peak_fraction >= 0) {
            fprintf(f, ", \"peak_fraction\": ");
            cli_json_number(f, r->peak_fraction);
        }
        fprintf(f, "}");
    }
    fprintf(f, "\n]}\n");
}

static FILE *open_output(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "flashattn: cannot write '%s': %s\n", path, strerror(errno));
    return f;
}

static int run_grid(fa_context *ctx, const bench_options *o, fa_dtype dtype, FILE *json_file,
                    FILE *csv_file)
{
    static const int64_t all_seqlens[] = {512, 1024, 2048, 4096, 8192, 16384};
    static const int64_t quick_seqlens[] = {512, 2048};
    static const int64_t head_dims[] = {64, 128};
    const int64_t *seqlens = o->quick ? quick_seqlens : all_seqlens;
    size_t n_seqlens = o->quick ? 2 : 6;

    fa_backend backend = fa_context_backend(ctx);
    fa_device_info dev;
    fa_status st = fa_context_device(ctx, &dev);
    if (st != FA_OK)
        return cli_fail(ctx, st);

    cpu_peak peak = {0};
    bool cpu = backend == FA_BACKEND_CPU;
    double load = cli_load_average(); /* before our own threads add to it */
    if (cpu) {
        fprintf(stderr, "measuring the CPU's FMA peak...\n");
        cpu_peak_measure(PEAK_SECONDS, &peak);
    }
    printf("flashattn %s bench: %s, device %d: %s, %s\n", fa_version_string(),
           fa_backend_name(backend), dev.index, dev.name, fa_dtype_name(dtype));
    print_variants(o);
    if (cpu)
        printf("CPU f32 FMA peak: %.1f GFLOP/s (%d threads, %s)\n", peak.gflops, peak.threads,
               peak.isa);
    if (cpu && load > (double)peak.threads * 1.25)
        printf("note: load average %.1f on %d threads: other processes share the CPU, so the\n"
               "      times and the peak are low and the fractions uncertain\n",
               load, peak.threads);
    printf("\n");

    size_t n_rows = 2 * 2 * n_seqlens * 2 + 1;
    bench_row *rows = calloc(n_rows, sizeof *rows);
    if (!rows)
        return cli_fail_detail(FA_ERROR_OUT_OF_HOST_MEMORY, "cannot allocate the results");
    size_t n = 0, points = 2 * 2 * n_seqlens, point = 0;
    print_header(cpu);
    const bool backward = dtype != FA_DTYPE_E4M3; /* the API takes e4m3 in the forward alone */
    for (int causal = 0; causal < 2; causal++) {
        for (size_t d = 0; d < 2; d++) {
            for (size_t s = 0; s < n_seqlens; s++) {
                const int64_t seqlen = seqlens[s], head_dim = head_dims[d];
                if ((o->seqlen && seqlen != o->seqlen) ||
                    (o->head_dim && head_dim != o->head_dim) ||
                    (o->batch && TOKENS / seqlen != o->batch) ||
                    (o->causal_name && (causal != 0) != (strcmp(o->causal_name, "yes") == 0)))
                    continue;
                const cli_attn_shape shape = {.dtype = dtype,
                                              .batch = TOKENS / seqlen,
                                              .seq_q = seqlen,
                                              .seq_k = seqlen,
                                              .heads_q = HIDDEN / head_dim,
                                              .heads_kv = HIDDEN / head_dim,
                                              .head_dim = head_dim,
                                              .causal = causal != 0,
                                              .deterministic = o->deterministic,
                                              .num_splits = (int32_t)o->splits,
                                              .alibi = o->alibi,
                                              .window = o->window,
                                              .softcap = o->softcap,
                                              .varlen = o->varlen};
                fprintf(stderr, "[%zu/%zu] seqlen %" PRId64 ", head dim %" PRId64 "%s\n", ++point,
                        points, seqlen, head_dim, causal ? ", causal" : "");
                bench_point(ctx, &shape, backward, o, peak.gflops, &rows[n]);
                print_row(&rows[n]);
                if (backward)
                    print_row(&rows[n + 1]);
                fflush(stdout);
                n += backward ? 2 : 1;
            }
        }
    }

    /* The f32 reference point that docs/PERF.md records on every backend. */
    fprintf(stderr, "f32 row: forward B=1 H=16 N=4096 D=128\n");
    const cli_attn_shape f32_row = {.dtype = FA_DTYPE_F32,
                                    .batch = 1,
                                    .seq_q = 4096,
                                    .seq_k = 4096,
                                    .heads_q = 16,
                                    .heads_kv = 16,
                                    .head_dim = 128,
                                    .alibi = o->alibi,
                                    .window = o->window,
                                    .softcap = o->softcap,
                                    .varlen = o->varlen};
    bench_point(ctx, &f32_row, false, o, peak.gflops, &rows[n]);
    printf("\nf32 forward, B=1 H=16 N=4096 D=128:\n");
    print_header(cpu);
    print_row(&rows[n]);
    if (cpu && rows[n].status == FA_OK)
        printf("%.1f%% of the measured FMA peak\n", 100.0 * rows[n].peak_fraction);
    n++;

    int failures = 0;
    for (size_t i = 0; i < n; i++)
        failures += rows[i].status != FA_OK;
    if (csv_file)
        write_csv(csv_file, rows, n);
    if (json_file)
        write_json(json_file, backend, &dev, cpu ? &peak : NULL, load, rows, n);
    free(rows);
    return failures ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}

/* The decoding grid (--decode): one query token against a cache, forward only, in GB/s. */
static int run_decode_grid(fa_context *ctx, const bench_options *o, fa_dtype dtype, FILE *json_file,
                           FILE *csv_file)
{
    static const int64_t batches[] = {1, 16, 64}, caches[] = {4096, 32768, 131072};
    static const int64_t heads[][2] = {{32, 8}, {8, 8}}, dims[] = {64, 128};
    enum { N_ROWS = 3 * 3 * 2 * 2 };
    fa_backend backend = fa_context_backend(ctx);
    fa_device_info dev;
    fa_status st = fa_context_device(ctx, &dev);
    if (st != FA_OK)
        return cli_fail(ctx, st);
    printf("flashattn %s bench --decode: %s, device %d: %s, %s\n", fa_version_string(),
           fa_backend_name(backend), dev.index, dev.name, fa_dtype_name(dtype));
    print_variants(o);
    const bool cpu = backend == FA_BACKEND_CPU;
    double read_gbps = 0.0;
    if (cpu) {
        fprintf(stderr, "measuring the memory read rate...\n");
        read_gbps = cpu_read_bandwidth();
        printf("memory read rate (measured): %.1f GB/s\n", read_gbps);
    }
    printf("\n%5s %7s %4s %8s %11s %9s %9s%s\n", "batch", "cache", "D", "heads", "ms", "GB/s",
           "TFLOP/s", cpu ? "  % of read rate" : "");
    bench_row rows[N_ROWS];
    size_t n = 0;
    int failures = 0;
    for (size_t d = 0; d < 2; d++)
        for (size_t h = 0; h < 2; h++)
            for (size_t b = 0; b < 3; b++)
                for (size_t c = 0; c < 3; c++) {
                    const cli_attn_shape shape = {.dtype = dtype,
                                                  .batch = batches[b],
                                                  .seq_q = 1,
                                                  .seq_k = caches[c],
                                                  .heads_q = heads[h][0],
                                                  .heads_kv = heads[h][1],
                                                  .head_dim = dims[d],
                                                  .num_splits = (int32_t)o->splits,
                                                  .page_size = o->page_size,
                                                  .alibi = o->alibi,
                                                  .window = o->window,
                                                  .softcap = o->softcap};
                    if ((o->head_dim && dims[d] != o->head_dim) ||
                        (o->seqlen && caches[c] != o->seqlen) ||
                        (o->batch && batches[b] != o->batch))
                        continue;
                    printf("%5" PRId64 " %7" PRId64 " %4" PRId64 " %4" PRId64 ":%-3" PRId64 " ",
                           shape.batch, shape.seq_k, shape.head_dim, shape.heads_q, shape.heads_kv);
                    if (dev.memory_bytes && cli_attn_kv_bytes(&shape) > 0.5 * dev.memory_bytes) {
                        printf("%11s  skipped: K and V take %.1f GB\n", "-",
                               cli_attn_kv_bytes(&shape) * 1e-9);
                        continue;
                    }
                    if (dev.max_buffer_bytes &&
                        0.5 * cli_attn_kv_bytes(&shape) > (double)dev.max_buffer_bytes) {
                        printf("%11s  skipped: K takes %.1f GB, over the device's largest "
                               "buffer\n",
                               "-", 0.5 * cli_attn_kv_bytes(&shape) * 1e-9);
                        continue;
                    }
                    fflush(stdout);
                    bench_point(ctx, &shape, false, o, 0, &rows[n]);
                    const bench_row *r = &rows[n++];
                    if (r->status != FA_OK) {
                        failures++;
                        printf("%11s  %s\n", "-", fa_status_name(r->status));
                    } else {
                        printf("%11.4f %9.1f %9.4f", r->ms, r->gbps, r->tflops);
                        if (read_gbps > 0)
                            printf("  %14.1f%%", 100.0 * r->gbps / read_gbps);
                        printf("\n");
                    }
                    fflush(stdout);
                }
    if (csv_file)
        write_csv(csv_file, rows, n);
    if (json_file)
        write_json(json_file, backend, &dev, NULL, cli_load_average(), rows, n);
    return failures ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}

int fa_cmd_bench(int argc, char **argv)
{
    bench_options o = {.repeat = 10};
    const cli_opt opts[] = {
        {"--backend", CLI_OPT_STRING, &o.backend_name, 0, 0, NULL},
        {"--device", CLI_OPT_INT, &o.device, 0, 1023, &o.device_seen},
        {"--quick", CLI_OPT_FLAG, &o.quick, 0, 0, NULL},
        {"--dtype", CLI_OPT_STRING, &o.dtype_name, 0, 0, NULL},
        {"--repeat", CLI_OPT_INT, &o.repeat, 1, 1000, NULL},
        {"--threads", CLI_OPT_INT, &o.threads, 0, 4096, NULL},
        {"--json", CLI_OPT_STRING, &o.json_path, 0, 0, NULL},
        {"--csv", CLI_OPT_STRING, &o.csv_path, 0, 0, NULL},
        {"--seqlen", CLI_OPT_INT, &o.seqlen, 1, INT64_MAX, NULL},
        {"--head-dim", CLI_OPT_INT, &o.head_dim, 1, INT64_MAX, NULL},
        {"--batch", CLI_OPT_INT, &o.batch, 1, INT64_MAX, NULL},
        {"--causal", CLI_OPT_STRING, &o.causal_name, 0, 0, NULL},
        {"--deterministic", CLI_OPT_FLAG, &o.deterministic, 0, 0, NULL},
        {"--log", CLI_OPT_STRING, &o.log_name, 0, 0, NULL},
        {"--decode", CLI_OPT_FLAG, &o.decode, 0, 0, NULL},
        {"--splits", CLI_OPT_INT, &o.splits, 0, 256, NULL},
        {"--alibi", CLI_OPT_FLAG, &o.alibi, 0, 0, NULL},
        {"--window", CLI_OPT_STRING, &o.window_name, 0, 0, NULL},
        {"--softcap", CLI_OPT_STRING, &o.softcap_name, 0, 0, NULL},
        {"--varlen", CLI_OPT_FLAG, &o.varlen, 0, 0, NULL},
        {"--page-size", CLI_OPT_INT, &o.page_size, 1, INT32_MAX, NULL},
    };
    int rc = cli_parse(argc, argv, opts, sizeof opts / sizeof opts[0], usage);
    if (rc != CLI_CONTINUE)
        return rc;
    fa_backend backend = FA_BACKEND_AUTO;
    if (o.backend_name &&
        (rc = cli_parse_backend("bench", usage, o.backend_name, &backend)) != CLI_CONTINUE)
        return rc;
    if (o.window_name && !cli_parse_window(o.window_name, &o.window))
        return cli_usage_error("bench", usage,
                               "--window takes L,R: two integers (-1: no bound), not '%s'",
                               o.window_name);
    if (o.softcap_name && !cli_parse_softcap(o.softcap_name, &o.softcap))
        return cli_usage_error("bench", usage, "--softcap takes a number, not '%s'",
                               o.softcap_name);
    if (o.varlen && o.decode)
        return cli_usage_error("bench", usage, "--varlen takes the training grid, not --decode");
    if (o.causal_name && strcmp(o.causal_name, "yes") && strcmp(o.causal_name, "no"))
        return cli_usage_error("bench", usage, "--causal takes yes or no, not '%s'", o.causal_name);
    int log_level;
    if ((rc = cli_parse_log("bench", usage, o.log_name, &log_level)) != CLI_CONTINUE)
        return rc;
    fa_dtype dtype = FA_DTYPE_INVALID;
    if (o.dtype_name &&
        (rc = cli_parse_dtype("bench", usage, o.dtype_name, &dtype)) != CLI_CONTINUE)
        return rc;
    if (o.device_seen && backend == FA_BACKEND_AUTO)
        return cli_usage_error("bench", usage,
                               "--device needs --backend (AUTO takes FA_DEVICE from the "
                               "environment)");

    FILE *json_file = NULL, *csv_file = NULL;
    if (o.json_path && !(json_file = open_output(o.json_path)))
        return CLI_EXIT_FAILURE;
    if (o.csv_path && !(csv_file = open_output(o.csv_path))) {
        fclose(json_file);
        return CLI_EXIT_FAILURE;
    }

    fa_context *ctx = NULL;
    fa_status st = cli_context_create(backend, o.device, o.device_seen, o.threads, log_level, &ctx);
    if (st != FA_OK) {
        rc = cli_fail(NULL, st);
    } else {
        if (dtype == FA_DTYPE_INVALID)
            dtype = fa_context_backend(ctx) == FA_BACKEND_CPU ? FA_DTYPE_F32 : FA_DTYPE_F16;
        rc = o.decode ? run_decode_grid(ctx, &o, dtype, json_file, csv_file)
                      : run_grid(ctx, &o, dtype, json_file, csv_file);
        fa_context_destroy(ctx);
    }
    if (json_file && fclose(json_file) != 0)
        rc = CLI_EXIT_FAILURE;
    if (csv_file && fclose(csv_file) != 0)
        rc = CLI_EXIT_FAILURE;
    return rc;
}
