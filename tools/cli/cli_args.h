// SPDX-License-Identifier: MIT
/* A small option parser shared by the commands: each command lists its options in a table, and
 * one call parses argv against it. "--name value" and "--name=value" are both accepted. An
 * unknown option or a bad value prints a sentence and the usage on stderr (exit 2); --help
 * prints the usage on stdout (exit 0). */
#ifndef FA_CLI_ARGS_H
#define FA_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flashattn.h"

typedef enum cli_opt_type {
    CLI_OPT_FLAG,   /* value: bool *, set to true */
    CLI_OPT_INT,    /* value: int64_t *, within [min, max] */
    CLI_OPT_STRING, /* value: const char **, pointing into argv */
} cli_opt_type;

typedef struct cli_opt {
    const char *name; /* with its dashes: "--seq" */
    cli_opt_type type;
    void *value;
    int64_t min, max; /* CLI_OPT_INT only, inclusive */
    bool *seen;       /* optional: set to true when the option is given */
} cli_opt;

/** cli_parse's answer when the command should go on. */
#define CLI_CONTINUE (-1)

/** Parses argv[1..argc) against `opts`. Returns CLI_CONTINUE, or the exit code to return now
 * (0 after --help, 2 after a bad argument). `usage` is the command's usage text. */
int cli_parse(int argc, char **argv, const cli_opt *opts, size_t n_opts, const char *usage);

/** Prints "flashattn <command>: <problem>" and the usage to stderr; returns 2. */
int cli_usage_error(const char *command, const char *usage, const char *fmt, ...)
#if defined(__MINGW32__)
    __attribute__((format(gnu_printf, 3, 4))) /* MinGW's "printf" means msvcrt's */
#elif defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/** Parses a backend name (auto, cuda, vulkan, opencl, cpu); CLI_CONTINUE or 2 as cli_parse. */
int cli_parse_backend(const char *command, const char *usage, const char *name, fa_backend *out);
/** Parses a dtype name (f32, f16, bf16); CLI_CONTINUE or 2 as cli_parse. */
int cli_parse_dtype(const char *command, const char *usage, const char *name, fa_dtype *out);
/** Parses a log level name (error, warn, info, debug) into *out, or leaves *out at -1 where name
 * is NULL; CLI_CONTINUE or 2 as cli_parse. */
int cli_parse_log(const char *command, const char *usage, const char *name, int *out);
/** A fa_log_fn that prints "flashattn <level>: <message>" on stderr. */
void cli_log_to_stderr(void *user_data, fa_log_level level, const char *message);

#endif
