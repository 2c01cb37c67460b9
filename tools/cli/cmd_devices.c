// SPDX-License-Identifier: MIT
/* `flashattn devices`: every backend, built or not, available or not and why; every device of
 * the available ones; and the backend AUTO picks. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "cli_args.h"
#include "cli_report.h"
#include "flashattn.h"

static const char usage[] =
    "usage: flashattn devices [--json] [--log LEVEL]\n"
    "\n"
    "Lists every backend (built into this library or not, available on this machine or not,\n"
    "with the reason), every device of the available ones, and which backend AUTO picks\n"
    "(the environment variables FA_BACKEND and FA_DEVICE override that choice).\n"
    "\n"
    "  --json        one JSON object on stdout instead of text\n"
    "  --log LEVEL   the library's messages while AUTO's context opens, up to LEVEL (error,\n"
    "                warn, info, debug), on stderr\n";

static const char *kind_name(fa_device_kind kind)
{
    switch (kind) {
    case FA_DEVICE_KIND_DISCRETE_GPU:
        return "discrete-gpu";
    case FA_DEVICE_KIND_INTEGRATED_GPU:
        return "integrated-gpu";
    case FA_DEVICE_KIND_CPU:
        return "cpu";
    case FA_DEVICE_KIND_SOFTWARE:
        return "software";
    default:
        return "other";
    }
}

/* What AUTO picks: a context is opened and asked, since that is the choice a caller gets. */
typedef struct auto_choice {
    fa_status status;
    fa_backend backend;
    fa_device_info device;
    char error[512];
} auto_choice;

static void probe_auto(auto_choice *out, int log_level)
{
    fa_context *ctx = NULL;
    fa_context_desc desc = {.backend = FA_BACKEND_AUTO};
    if (log_level >= 0) {
        desc.log = cli_log_to_stderr;
        desc.log_level = (fa_log_level)log_level;
    }
    out->status = fa_context_create(&desc, &ctx);
    out->error[0] = '\0';
    if (out->status != FA_OK) {
        snprintf(out->error, sizeof out->error, "%s", fa_last_create_error());
        return;
    }
    out->backend = fa_context_backend(ctx);
    out->status = fa_context_device(ctx, &out->device);
    if (out->status != FA_OK)
        snprintf(out->error, sizeof out->error, "%s", fa_context_last_error(ctx));
    fa_context_destroy(ctx);
}

static void print_device_text(const fa_device_info *d)
{
    char mem[32], maxbuf[32];
    printf("  [%s %d] %s\n", fa_backend_name(d->backend), d->index, d->name);
    printf("      vendor %s, kind %s, api %s, driver %s\n", d->vendor[0] ? d->vendor : "-",
           kind_name(d->kind), d->api_version[0] ? d->api_version : "-",
           d->driver[0] ? d->driver : "-");
    printf("      memory %s, max buffer %s, compute units %" PRIu32 "\n",
           cli_format_bytes(mem, sizeof mem, d->memory_bytes),
           cli_format_bytes(maxbuf, sizeof maxbuf, d->max_buffer_bytes), d->compute_units);
    printf("      shared memory %" PRIu32 " KiB, max workgroup %" PRIu32 ", subgroup sizes %" PRIu32
           "..%" PRIu32 " (0: not applicable)\n",
           d->shared_memory_bytes / 1024u, d->max_workgroup_size, d->subgroup_size_min,
           d->subgroup_size_max);
    printf("      f16 %s, bf16 %s, matrix units %s\n", d->f16 ? "yes" : "no",
           d->bf16 ? "yes" : "no", d->matrix_units ? "yes" : "no");
    if (d->kernels[0])
        printf("      kernels: %s\n", d->kernels);
}

static void print_device_json(const fa_device_info *d)
{
    printf("{\"backend\": ");
    cli_json_string(stdout, fa_backend_name(d->backend));
    printf(", \"index\": %d, \"name\": ", d->index);
    cli_json_string(stdout, d->name);
    printf(", \"vendor\": ");
    cli_json_string(stdout, d->vendor);
    printf(", \"kind\": ");
    cli_json_string(stdout, kind_name(d->kind));
    printf(", \"driver\": ");
    cli_json_string(stdout, d->driver);
    printf(", \"api_version\": ");
    cli_json_string(stdout, d->api_version);
    printf(", \"memory_bytes\": %" PRIu64 ", \"max_buffer_bytes\": %" PRIu64
           ", \"compute_units\": %" PRIu32 ", \"shared_memory_bytes\": %" PRIu32
           ", \"max_workgroup_size\": %" PRIu32 ", \"subgroup_size_min\": %" PRIu32
           ", \"subgroup_size_max\": %" PRIu32 ", \"f16\": %s, \"bf16\": %s, \"matrix_units\": %s",
           d->memory_bytes, d->max_buffer_bytes, d->compute_units, d->shared_memory_bytes,
           d->max_workgroup_size, d->subgroup_size_min, d->subgroup_size_max,
           d->f16 ? "true" : "false", d->bf16 ? "true" : "false",
           d->matrix_units ? "true" : "false");
    printf(", \"kernels\": ");
    cli_json_string(stdout, d->kernels);
    printf("}");
}

int fa_cmd_devices(int argc, char **argv)
{
    bool json = false;
    const char *log_name = NULL;
    const cli_opt opts[] = {{.name = "--json", .type = CLI_OPT_FLAG, .value = &json},
                            {.name = "--log", .type = CLI_OPT_STRING, .value = &log_name}};
    int rc = cli_parse(argc, argv, opts, sizeof opts / sizeof opts[0], usage);
    if (rc != CLI_CONTINUE)
        return rc;
    int log_level;
    if ((rc = cli_parse_log("devices", usage, log_name, &log_level)) != CLI_CONTINUE)
        return rc;

    enum { N_BACKENDS = FA_BACKEND_COUNT - 1 };
    fa_backend_info infos[N_BACKENDS];
    for (int i = 0; i < N_BACKENDS; i++) {
        fa_status st = fa_backend_query((fa_backend)(i + 1), &infos[i]);
        if (st != FA_OK)
            return cli_fail_detail(st, "fa_backend_query failed");
    }
    auto_choice choice;
    probe_auto(&choice, log_level);

    if (json)
        printf("{\"version\": \"%s\", \"backends\": [", fa_version_string());
    else
        printf("flashattn %s\n\nbackends:\n", fa_version_string());
    for (int i = 0; i < N_BACKENDS; i++) {
        const fa_backend_info *b = &infos[i];
        if (json) {
            printf("%s\n  {\"name\": ", i ? "," : "");
            cli_json_string(stdout, b->name);
            printf(", \"built\": %s, \"available\": %s, \"device_count\": %d, \"reason\": ",
                   b->built ? "true" : "false", b->available ? "true" : "false", b->device_count);
            cli_json_string(stdout, b->reason);
            printf("}");
        } else {
            printf("  %-7s %-9s %-13s %d device%s%s%s\n", b->name, b->built ? "built" : "not built",
                   b->available ? "available" : "unavailable", b->device_count,
                   b->device_count == 1 ? "" : "s", b->reason[0] ? "  -- " : "", b->reason);
        }
    }

    int failures = 0;
    bool first = true;
    if (json)
        printf("],\n \"devices\": [");
    else
        printf("\ndevices:\n");
    for (int i = 0; i < N_BACKENDS; i++) {
        const fa_backend_info *b = &infos[i];
        if (!b->available)
            continue;
        for (int d = 0; d < b->device_count; d++) {
            fa_device_info dev;
            fa_status st = fa_device_query(b->backend, d, &dev);
            if (st != FA_OK) {
                fprintf(stderr, "flashattn: %s: fa_device_query(%s, %d) failed\n",
                        fa_status_name(st), b->name, d);
                failures++;
                continue;
            }
            if (json) {
                printf("%s\n  ", first ? "" : ",");
                print_device_json(&dev);
            } else {
                print_device_text(&dev);
            }
            first = false;
        }
    }
    if (!json && first)
        printf("  (none)\n");

    const char *env_backend = getenv("FA_BACKEND"), *env_device = getenv("FA_DEVICE");
    if (json) {
        printf("],\n \"auto\": {\"status\": ");
        cli_json_string(stdout, fa_status_name(choice.status));
        if (choice.status == FA_OK) {
            printf(", \"backend\": ");
            cli_json_string(stdout, fa_backend_name(choice.backend));
            printf(", \"device_index\": %d, \"device\": ", choice.device.index);
            cli_json_string(stdout, choice.device.name);
        } else {
            printf(", \"error\": ");
            cli_json_string(stdout, choice.error);
        }
        printf(", \"FA_BACKEND\": ");
        cli_json_string(stdout, env_backend);
        printf(", \"FA_DEVICE\": ");
        cli_json_string(stdout, env_device);
        printf("}}\n");
    } else {
        printf("\nauto: ");
        if (choice.status == FA_OK)
            printf("%s device %d (%s)", fa_backend_name(choice.backend), choice.device.index,
                   choice.device.name);
        else
            printf("fails: %s: %s", fa_status_name(choice.status),
                   choice.error[0] ? choice.error : fa_status_string(choice.status));
        if (env_backend || env_device)
            printf("  [FA_BACKEND=%s FA_DEVICE=%s]", env_backend ? env_backend : "",
                   env_device ? env_device : "");
        printf("\n");
    }
    return failures ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}
