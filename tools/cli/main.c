// SPDX-License-Identifier: MIT
/* `flashattn`: the command-line face of the library. Dispatches to one command per file. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "flashattn.h"

static const char usage[] =
    "usage: flashattn <command> [options]\n"
    "\n"
    "commands:\n"
    "  devices       list backends (and why one is unavailable), devices, AUTO's choice\n"
    "  run           time one attention call, show its memory, optionally check it\n"
    "  bench         FlashAttention's benchmark grid (seqlen 512..16k, head dim 64/128)\n"
    "  conformance   every backend against a float64 reference\n"
    "\n"
    "  --help        this text; 'flashattn <command> --help' for a command's options\n"
    "  --version     the library's version\n"
    "\n"
    "Exit codes: 0 success, 1 failure (the library's status and message on stderr),\n"
    "2 bad arguments (usage on stderr).\n";

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
} command;

static const command commands[] = {
    {"devices", fa_cmd_devices},
    {"run", fa_cmd_run},
    {"bench", fa_cmd_bench},
    {"conformance", fa_cmd_conformance},
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        fputs(usage, stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(name, "--version") == 0) {
        printf("flashattn %s\n", fa_version_string());
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(name, commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    }
    fprintf(stderr, "flashattn: unknown command '%s'\n\n%s", name, usage);
    return CLI_EXIT_USAGE;
}
