// SPDX-License-Identifier: MIT
/* The flashattn tool's exit codes: 0 success, 1 failure, 2 bad arguments. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fa_testkit.h"
#include "flashattn.h"

static int run_cli(const char *args)
{
    char command[1024];
    snprintf(command, sizeof command, "FA_BACKEND= '%s' %s >/dev/null 2>&1", FA_CLI_PATH, args);
    int status = system(command);
    cr_assert(WIFEXITED(status), "'%s' did not exit normally", command);
    return WEXITSTATUS(status);
}

Test(cli, help_version_and_devices_succeed)
{
    cr_assert_eq(run_cli("--version"), 0);
    cr_assert_eq(run_cli("--help"), 0);
    cr_assert_eq(run_cli("devices"), 0);
    cr_assert_eq(run_cli("devices --json"), 0);
}

/* `devices --log LEVEL` shows the library's messages while AUTO's context opens. */
Test(cli, devices_log_shows_the_auto_context)
{
    char command[1024];
    snprintf(command, sizeof command,
             "FA_BACKEND= '%s' devices --log info 2>&1 >/dev/null | grep -q 'context on'",
             FA_CLI_PATH);
    const int status = system(command);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "no 'context on' message");
    cr_assert_eq(run_cli("devices --log loud"), 2);
}

Test(cli, bad_arguments_exit_2)
{
    cr_assert_eq(run_cli(""), 2);
    cr_assert_eq(run_cli("frobnicate"), 2);
    cr_assert_eq(run_cli("run --seq -5"), 2);
    cr_assert_eq(run_cli("run --seq"), 2);
    cr_assert_eq(run_cli("run --dtype f8"), 2);
    cr_assert_eq(run_cli("run --backend metal"), 2);
    cr_assert_eq(run_cli("run --no-such-option"), 2);
    cr_assert_eq(run_cli("conformance --backend metal"), 2);
    cr_assert_eq(run_cli("bench --no-such-option"), 2);
}

Test(cli, library_failures_exit_1)
{
    cr_assert_eq(run_cli("run --backend cpu --head-dim 7 --seq 16"), 1);
    cr_assert_eq(run_cli("run --backend cpu --heads 6 --kv-heads 4 --seq 16"), 1);
    cr_assert_eq(run_cli("run --backend cpu --device 5 --seq 16"), 1);
    fa_backend_info info;
    fa_backend_query(FA_BACKEND_CUDA, &info);
    if (!info.available)
        cr_assert_eq(run_cli("run --backend cuda --seq 16"), 1);
}

/* A backend named on the command line that cannot run here fails the run instead of reporting
 * every case skipped; `--backend all` keeps listing it as skipped. */
Test(cli, conformance_of_an_unavailable_named_backend_fails)
{
    fa_backend_info info;
    fa_backend_query(FA_BACKEND_CUDA, &info);
    cr_assert_eq(run_cli("conformance --backend cuda --quick --limit 1"), info.available ? 0 : 1);
    cr_assert_eq(run_cli("conformance --backend cuda,cpu --quick --limit 1"),
                 info.available ? 0 : 1);
    cr_assert_eq(run_cli("conformance --backend cpu --quick --limit 1"), 0);
}

Test(cli, a_small_checked_run_succeeds)
{
    cr_assert_eq(run_cli("run --backend cpu --seq 96 --heads 2 --head-dim 32 --check"), 0);
    cr_assert_eq(run_cli("run --backend cpu --seq 64 --heads 4 --kv-heads 1 --head-dim 64 "
                         "--causal --backward --dtype bf16 --check --json"),
                 0);
    /* a paged cache: checked against the reference in sequence order */
    cr_assert_eq(run_cli("run --backend cpu --seq-q 2 --seq-k 96 --heads 4 --kv-heads 2 "
                         "--head-dim 32 --causal --page-size 8 --splits 3 --check"),
                 0);
    /* a key count that is not a multiple of the page size, a paged backward, a page size of 0 */
    cr_assert_eq(run_cli("run --backend cpu --seq-q 1 --seq-k 90 --page-size 8"), 1);
    cr_assert_eq(run_cli("run --backend cpu --seq 64 --page-size 8 --backward"), 1);
    cr_assert_eq(run_cli("run --backend cpu --seq 64 --page-size 0"), 2);
    /* an append to a paged cache: the cache and the attention over it checked; refused in a
     * backward, past the cache and empty */
    cr_assert_eq(run_cli("run --backend cpu --batch 2 --seq-q 3 --seq-k 96 --heads 4 "
                         "--kv-heads 2 --head-dim 32 --causal --page-size 8 --append 3 --check"),
                 0);
    cr_assert_eq(run_cli("run --backend cpu --seq 64 --append 2 --backward"), 1);
    cr_assert_eq(run_cli("run --backend cpu --seq-q 1 --seq-k 8 --append 9"), 1);
    cr_assert_eq(run_cli("run --backend cpu --seq 64 --append 0"), 2);
    /* a sliding window with a softcap, forward and backward, checked; malformed and refused */
    cr_assert_eq(run_cli("run --backend cpu --seq-q 90 --seq-k 150 --heads 4 --kv-heads 2 "
                         "--head-dim 32 --window 20,5 --softcap 30 --check"),
                 0);
    cr_assert_eq(run_cli("run --backend cpu --seq 100 --heads 2 --head-dim 32 --causal "
                         "--window 16,-1 --softcap 50 --backward --check --json"),
                 0);
    cr_assert_eq(run_cli("run --backend cpu --seq 64 --window 16"), 2);
    cr_assert_eq(run_cli("run --backend cpu --seq 64 --window 1,2,3"), 2);
    cr_assert_eq(run_cli("run --backend cpu --seq 64 --softcap thirty"), 2);
    cr_assert_eq(run_cli("run --backend cpu --seq 64 --window -2,0"), 1);
    cr_assert_eq(run_cli("run --backend cpu --seq 64 --softcap -30"), 1);
    /* ALiBi, alone and with a window and a softcap, forward and backward, checked */
    cr_assert_eq(run_cli("run --backend cpu --seq-q 70 --seq-k 130 --heads 4 --kv-heads 2 "
                         "--head-dim 32 --alibi --check"),
                 0);
    cr_assert_eq(run_cli("run --backend cpu --seq 90 --heads 4 --head-dim 32 --causal --alibi "
                         "--window 30,-1 --softcap 30 --backward --check --json"),
                 0);
    /* an additive bias, alone and with ALiBi and a window, forward and backward, checked */
    cr_assert_eq(run_cli("run --backend cpu --seq-q 50 --seq-k 120 --heads 4 --kv-heads 2 "
                         "--head-dim 32 --bias --check"),
                 0);
    cr_assert_eq(run_cli("run --backend cpu --seq 80 --heads 2 --head-dim 32 --causal --bias "
                         "--alibi --window 20,-1 --backward --check"),
                 0);
    /* the bias in 16-bit dtypes, checked against the reference of the same values */
    cr_assert_eq(run_cli("run --backend cpu --seq-q 50 --seq-k 120 --heads 4 --kv-heads 2 "
                         "--head-dim 32 --bias --bias-dtype f16 --check"),
                 0);
    cr_assert_eq(run_cli("run --backend cpu --seq 70 --heads 2 --head-dim 32 --causal --bias "
                         "--bias-dtype bf16 --backward --check --json"),
                 0);
    /* the bias as a query-by-key matrix per head (PyTorch's order), forward and backward */
    cr_assert_eq(run_cli("run --backend cpu --seq-q 70 --seq-k 150 --heads 4 --kv-heads 2 "
                         "--head-dim 32 --bias --bias-layout bhsd --bias-dtype f16 --backward "
                         "--check"),
                 0);
    cr_assert_eq(run_cli("run --backend cpu --seq 64 --bias --bias-layout bsdh"), 2);
    cr_assert_eq(run_cli("run --backend cpu --seq 64 --bias-layout bhsd"), 2);
    cr_assert_eq(run_cli("run --backend cpu --seq 64 --bias-dtype f16"), 2);
    cr_assert_eq(run_cli("run --backend cpu --seq 64 --bias --bias-dtype e4m3"), 2);
    cr_assert_eq(run_cli("run --backend cpu --seq 64 --bias --bias-dtype f64"), 2);
}

/* --shard I/N: the shards of the quick matrix are disjoint and together are the whole of it. */
Test(cli, conformance_shards_partition_the_matrix)
{
    const int64_t total = fa_conformance_case_count(false);
    int64_t sum = 0;
    for (int i = 0; i < 3; i++) {
        FILE *sink = fopen("/dev/null", "w");
        cr_assert_not_null(sink);
        fa_conformance_options opt = {.backend = FA_BACKEND_CPU,
                                      .shard_count = 3,
                                      .shard_index = i,
                                      .out = sink,
                                      .progress = sink};
        fa_conformance_totals totals = {0};
        cr_assert_eq(fa_conformance_run(&opt, &totals), 0, "shard %d/3 failed", i);
        cr_assert_eq(totals.failed + totals.skipped, 0);
        cr_assert_gt(totals.passed, 0, "shard %d/3 is empty", i);
        sum += totals.passed;
        fclose(sink);
    }
    cr_assert_eq(sum, total, "the shards hold %lld cases, the matrix %lld", (long long)sum,
                 (long long)total);
    cr_assert_eq(run_cli("conformance --backend cpu --shard 3/3"), 2);
    cr_assert_eq(run_cli("conformance --backend cpu --shard 1"), 2);
}

/* The JUnit report carries the counts (errors too) and each suite's properties. */
Test(cli, conformance_junit_has_counts_and_properties)
{
    char path[] = "/tmp/fa_junit_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    char args[256];
    snprintf(args, sizeof args, "conformance --backend cpu --quick --limit 2 --junit %s", path);
    cr_assert_eq(run_cli(args), 0);
    FILE *f = fopen(path, "r");
    cr_assert(f);
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    remove(path);
    cr_expect(strstr(text, "<testsuite name=\"conformance.cpu\" tests=\"2\" failures=\"0\" "
                           "errors=\"0\" skipped=\"0\""),
              "%s", text);
    cr_expect(strstr(text, "<property name=\"library\" value=\""), "%s", text);
    cr_expect(strstr(text, "<property name=\"device\" value=\""), "%s", text);
    cr_expect(strstr(text, "<testcase classname=\"conformance.cpu\""), "%s", text);
}

/* run --backward --check compares the gradients too: gradients that are all zero on random
 * inputs must fail it (a_small_checked_run_succeeds has the library's own pass it). */
Test(cli, the_gradient_check_fails_wrong_gradients)
{
    const fa_ref_problem p = {.dtype = FA_DTYPE_F32,
                              .batch = 1,
                              .seq_q = 37,
                              .seq_k = 45,
                              .heads_q = 2,
                              .heads_kv = 1,
                              .head_dim = 16,
                              .scale = 0.25f,
                              .causal = true};
    const size_t nq = 37 * 2 * 16, nk = 45 * 1 * 16;
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *d_o = malloc(nq * 4);
    float *dq = calloc(nq, 4), *dk = calloc(nk, 4), *dv = calloc(nk, 4);
    cr_assert(q && k && v && d_o && dq && dk && dv);
    fa_testkit_fill_random(q, FA_DTYPE_F32, nq, 1);
    fa_testkit_fill_random(k, FA_DTYPE_F32, nk, 2);
    fa_testkit_fill_random(v, FA_DTYPE_F32, nk, 3);
    fa_testkit_fill_random(d_o, FA_DTYPE_F32, nq, 4);
    fa_grad_check g;
    cr_assert(fa_testkit_check_backward_rows(&p, q, k, v, d_o, dq, dk, dv, 5, &g));
    cr_expect(!g.pass && g.rows_checked > 0 && g.key_rows_checked > 0);
    cr_expect(g.err_dq > g.tol_dq && g.err_dk > g.tol_dk && g.err_dv > g.tol_dv);
    free(q);
    free(k);
    free(v);
    free(d_o);
    free(dq);
    free(dk);
    free(dv);
}
