// SPDX-License-Identifier: MIT
/* The `flashattn` command-line tool: one entry point per command. Each takes the command's own
 * argv (argv[0] is the command name) and returns the process exit code. */
#ifndef FA_CLI_H
#define FA_CLI_H

enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_FAILURE = 1, /* an API call failed, or a check did not pass */
    CLI_EXIT_USAGE = 2,   /* bad arguments: usage went to stderr */
};

int fa_cmd_devices(int argc, char **argv);
int fa_cmd_run(int argc, char **argv);
int fa_cmd_bench(int argc, char **argv);
int fa_cmd_conformance(int argc, char **argv); /* cmd_conformance.c */

#endif
