// SPDX-License-Identifier: MIT
/* `flashattn conformance`: every backend against the float64 reference on generated cases.
 * The runner lives in the test kit (fa_conformance_run); this file is its command line. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_args.h"
#include "fa_testkit.h"

static const char usage[] =
    "usage: flashattn conformance [--backend NAME[,NAME..]|all] [--device N] [--quick|--full]\n"
    "                             [--report FILE.md] [--junit FILE.xml] [--json FILE]\n"
    "                             [--seed N] [--verbose] [--filter TEXT] [--limit N]\n"
    "                             [--deterministic] [--shard I/N] [--log LEVEL]\n"
    "Runs every backend (or the NAMEs: cuda, vulkan, opencl, cpu) on cases generated from one\n"
    "table (--quick: all pairs of axis values; --full: the full product) plus edge cases,\n"
    "against a float64 reference. Prints one table per backend and, last,\n"
    "'N passed, N failed, N skipped'. Exit status 0 when nothing failed, 1 otherwise; a\n"
    "backend named by --backend that is unavailable here fails the run (--backend all, or\n"
    "none, lists unavailable backends as skipped).\n"
    "  --device N     device N of each backend (default: its first GPU, else device 0)\n"
    "  --filter TEXT  only cases whose name contains TEXT (or one of A|B|...)\n"
    "  --limit N      only the first N cases\n"
    "  --deterministic  every call with fa_attention_desc.deterministic set\n"
    "  --shard I/N    only shard I (0 <= I < N) of N: the cases are dealt out in groups that\n"
    "                 build the same GPU programs, so that N processes share one matrix\n"
    "                 (bench/conformance_shards.sh)\n"
    "  --log LEVEL    the library's messages up to LEVEL (error, warn, info, debug) on stderr\n";

int fa_cmd_conformance(int argc, char **argv)
{
    const char *backend_name = NULL, *shard = NULL, *log_name = NULL;
    bool quick = false, full = false, device_seen = false;
    int64_t device = 0, seed = 1, limit = 0;
    fa_conformance_options opt = {.backend = -1};
    const cli_opt opts[] = {
        {"--backend", CLI_OPT_STRING, &backend_name, 0, 0, NULL},
        {"--device", CLI_OPT_INT, &device, 0, 65535, &device_seen},
        {"--quick", CLI_OPT_FLAG, &quick, 0, 0, NULL},
        {"--full", CLI_OPT_FLAG, &full, 0, 0, NULL},
        {"--verbose", CLI_OPT_FLAG, &opt.verbose, 0, 0, NULL},
        {"--report", CLI_OPT_STRING, &opt.report_path, 0, 0, NULL},
        {"--junit", CLI_OPT_STRING, &opt.junit_path, 0, 0, NULL},
        {"--json", CLI_OPT_STRING, &opt.json_path, 0, 0, NULL},
        {"--filter", CLI_OPT_STRING, &opt.filter, 0, 0, NULL},
        {"--seed", CLI_OPT_INT, &seed, 1, INT64_MAX, NULL},
        {"--limit", CLI_OPT_INT, &limit, 0, INT64_MAX, NULL},
        {"--deterministic", CLI_OPT_FLAG, &opt.deterministic, 0, 0, NULL},
        {"--shard", CLI_OPT_STRING, &shard, 0, 0, NULL},
        {"--log", CLI_OPT_STRING, &log_name, 0, 0, NULL},
    };
    int rc = cli_parse(argc, argv, opts, sizeof opts / sizeof opts[0], usage);
    if (rc != CLI_CONTINUE)
        return rc;
    if (quick && full)
        return cli_usage_error("conformance", usage, "--quick and --full exclude each other");
    if (backend_name && strcmp(backend_name, "all") != 0) {
        char name[32];
        for (const char *at = backend_name; *at;) { /* a comma-separated list */
            size_t len = strcspn(at, ",");
            snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1),
                     at);
            fa_backend backend;
            if ((rc = cli_parse_backend("conformance", usage, name, &backend)) != CLI_CONTINUE)
                return rc;
            if (backend == FA_BACKEND_AUTO)
                return cli_usage_error("conformance", usage, "name a backend, or all");
            opt.backend = (int)backend;
            opt.backend_mask |= 1u << backend;
            at += len + (at[len] == ',');
        }
    }
    if (shard) {
        int index = -1, count = 0;
        char tail = 0;
        if (sscanf(shard, "%d/%d%c", &index, &count, &tail) != 2 || count < 1 || index < 0 ||
            index >= count)
            return cli_usage_error("conformance", usage, "--shard takes I/N with 0 <= I < N");
        opt.shard_index = index;
        opt.shard_count = count;
    }
    int log_level;
    if ((rc = cli_parse_log("conformance", usage, log_name, &log_level)) != CLI_CONTINUE)
        return rc;
    if (log_level >= 0) {
        opt.log = cli_log_to_stderr;
        opt.log_level = (fa_log_level)log_level;
    }
    opt.full = full;
    opt.device_given = device_seen;
    opt.device = (int)device;
    opt.seed = (uint64_t)seed;
    opt.limit = limit;
    return fa_conformance_run(&opt, NULL);
}
