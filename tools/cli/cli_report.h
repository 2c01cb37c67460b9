// SPDX-License-Identifier: MIT
/* What the commands print beyond their tables: failures in one format, and JSON strings. */
#ifndef FA_CLI_REPORT_H
#define FA_CLI_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "flashattn.h"

/** Prints "flashattn: <STATUS_NAME>: <detail>" to stderr, the detail being the sentence the
 * context holds (or, with ctx NULL, the last fa_context_create failure), else the status's own
 * sentence. Returns 1, the exit code of a failure. */
int cli_fail(const fa_context *ctx, fa_status status);
/** The same with a detail the tool wrote itself (host allocation, size arithmetic). */
int cli_fail_detail(fa_status status, const char *detail);

/** Writes a byte count for people ("512 B", "1.5 MiB", "8.0 EiB") into buf; returns buf. */
const char *cli_format_bytes(char *buf, size_t size, uint64_t bytes);

/** Writes `s` as a JSON string literal, quotes included. NULL writes null. */
void cli_json_string(FILE *f, const char *s);
/** Writes a finite double as a JSON number, NaN and infinities as null. */
void cli_json_number(FILE *f, double x);

#endif
