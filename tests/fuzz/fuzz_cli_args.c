// SPDX-License-Identifier: MIT
/* libFuzzer harness over the CLI's option parser (tools/cli/cli_args.c): an input is up to 16
 * NUL-separated arguments, parsed against a table with every kind of option the commands use,
 * then as a backend and a dtype name. Whatever the bytes, the parser must answer CLI_CONTINUE, 0
 * or 2, and every value it stores must respect the table. Built and run by tools/fuzz.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *null_out;
    if (!null_out) { /* the usage and error texts go nowhere */
        null_out = fopen("/dev/null", "w");
        if (!null_out || !freopen("/dev/null", "w", stderr) || !freopen("/dev/null", "w", stdout))
            abort();
    }
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    char *argv[17] = {"flashattn"};
    int argc = 1;
    for (char *at = text; argc < 17 && at < text + size; at += strlen(at) + 1)
        argv[argc++] = at;
    bool flag = false, seen = false;
    int64_t number = 7, bounded = 3;
    const char *name = NULL;
    const cli_opt opts[] = {
        {"--flag", CLI_OPT_FLAG, &flag, 0, 0, NULL},
        {"--seq", CLI_OPT_INT, &number, 0, INT64_MAX, &seen},
        {"--bounded", CLI_OPT_INT, &bounded, -5, 5, NULL},
        {"--name", CLI_OPT_STRING, &name, 0, 0, NULL},
    };
    const int rc = cli_parse(argc, argv, opts, sizeof opts / sizeof opts[0], "usage: fuzz\n");
    if (rc != CLI_CONTINUE && rc != 0 && rc != 2)
        abort();
    if (number < 0 || bounded < -5 || bounded > 5)
        abort();
    if (name && (name < text || name > text + size))
        abort();
    fa_backend backend;
    fa_dtype dtype;
    if (argc > 1) {
        const int rb = cli_parse_backend("fuzz", "usage: fuzz\n", argv[1], &backend);
        const int rd = cli_parse_dtype("fuzz", "usage: fuzz\n", argv[1], &dtype);
        if ((rb != CLI_CONTINUE && rb != 2) || (rd != CLI_CONTINUE && rd != 2))
            abort();
    }
    free(text);
    return 0;
}
