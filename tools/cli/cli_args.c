// SPDX-License-Identifier: MIT
/* The shared option parser: see cli_args.h. */
#include "cli_args.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_usage_error(const char *command, const char *usage, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "flashattn %s: ", command);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n\n%s", usage);
    return CLI_EXIT_USAGE;
}

static const cli_opt *find_option(const cli_opt *opts, size_t n_opts, const char *name,
                                  size_t name_len)
{
    for (size_t i = 0; i < n_opts; i++) {
        if (strlen(opts[i].name) == name_len && strncmp(opts[i].name, name, name_len) == 0)
            return &opts[i];
    }
    return NULL;
}

/* Whole-string decimal integer, no trailing junk, no overflow. */
static bool parse_int64(const char *text, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0')
        return false;
    *out = (int64_t)v;
    return true;
}

int cli_parse(int argc, char **argv, const cli_opt *opts, size_t n_opts, const char *usage)
{
    const char *command = argc > 0 ? argv[0] : "?";
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            fputs(usage, stdout);
            return CLI_EXIT_OK;
        }
        if (strncmp(arg, "--", 2) != 0)
            return cli_usage_error(command, usage, "unexpected argument '%s'", arg);

        const char *eq = strchr(arg, '=');
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        const cli_opt *opt = find_option(opts, n_opts, arg, name_len);
        if (!opt)
            return cli_usage_error(command, usage, "unknown option '%.*s'", (int)name_len, arg);

        const char *value = NULL;
        if (opt->type == CLI_OPT_FLAG) {
            if (eq)
                return cli_usage_error(command, usage, "%s takes no value", opt->name);
            *(bool *)opt->value = true;
        } else {
            if (eq) {
                value = eq + 1;
            } else if (i + 1 < argc) {
                value = argv[++i];
            } else {
                return cli_usage_error(command, usage, "%s needs a value", opt->name);
            }
            if (opt->type == CLI_OPT_STRING) {
                if (value[0] == '\0')
                    return cli_usage_error(command, usage, "%s needs a non-empty value", opt->name);
                *(const char **)opt->value = value;
            } else {
                int64_t v = 0;
                if (!parse_int64(value, &v) || v < opt->min || v > opt->max)
                    return cli_usage_error(command, usage,
                                           "%s expects an integer from %" PRId64 " to %" PRId64
                                           ", got '%s'",
                                           opt->name, opt->min, opt->max, value);
                *(int64_t *)opt->value = v;
            }
        }
        if (opt->seen)
            *opt->seen = true;
    }
    return CLI_CONTINUE;
}

int cli_parse_backend(const char *command, const char *usage, const char *name, fa_backend *out)
{
    if (fa_backend_from_name(name, out) != FA_OK)
        return cli_usage_error(command, usage,
                               "unknown backend '%s' (auto, cuda, vulkan, opencl, cpu)", name);
    return CLI_CONTINUE;
}

int cli_parse_dtype(const char *command, const char *usage, const char *name, fa_dtype *out)
{
    static const fa_dtype dtypes[] = {FA_DTYPE_F32, FA_DTYPE_F16, FA_DTYPE_BF16, FA_DTYPE_E4M3};
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        if (strcmp(name, fa_dtype_name(dtypes[i])) == 0) {
            *out = dtypes[i];
            return CLI_CONTINUE;
        }
    }
    return cli_usage_error(command, usage, "unknown dtype '%s' (f32, f16, bf16, e4m3)", name);
}

static const char *const log_levels[] = {"error", "warn", "info", "debug"}; /* fa_log_level */

int cli_parse_log(const char *command, const char *usage, const char *name, int *out)
{
    *out = -1;
    for (int i = 0; name && i < 4; i++)
        if (!strcmp(name, log_levels[i]))
            *out = i;
    if (name && *out < 0)
        return cli_usage_error(command, usage, "--log takes error, warn, info or debug, not '%s'",
                               name);
    return CLI_CONTINUE;
}

void cli_log_to_stderr(void *user_data, fa_log_level level, const char *message)
{
    (void)user_data;
    fprintf(stderr, "flashattn %s: %s\n", log_levels[level], message);
}
