// SPDX-License-Identifier: MIT
/* Failure lines and JSON scalars: see cli_report.h. */
#include "cli_report.h"

#include <math.h>

#include "cli.h"

int cli_fail_detail(fa_status status, const char *detail)
{
    if (!detail || detail[0] == '\0')
        detail = fa_status_string(status);
    fprintf(stderr, "flashattn: %s: %s\n", fa_status_name(status), detail);
    return CLI_EXIT_FAILURE;
}

int cli_fail(const fa_context *ctx, fa_status status)
{
    return cli_fail_detail(status, ctx ? fa_context_last_error(ctx) : fa_last_create_error());
}

const char *cli_format_bytes(char *buf, size_t size, uint64_t bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double x = (double)bytes;
    int u = 0;
    while (x >= 1024.0 && u < 6) {
        x /= 1024.0;
        u++;
    }
    snprintf(buf, size, u ? "%.1f %s" : "%.0f %s", x, units[u]);
    return buf;
}

void cli_json_string(FILE *f, const char *s)
{
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

void cli_json_number(FILE *f, double x)
{
    if (isfinite(x))
        fprintf(f, "%.9g", x);
    else
        fputs("null", f);
}
