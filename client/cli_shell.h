/*
 * cli_shell.h - `floe` with no command: a session of commands on one
 * connection (cli_shell.c), for the CLI's main (cli.c) and the commands
 * that would read stdin (which carries the session's commands).
 */
#ifndef FLOE_CLIENT_CLI_SHELL_H
#define FLOE_CLIENT_CLI_SHELL_H

#include <stdbool.h>

#include "floe.h"

/* True while a session runs: stdin carries its commands, not keys. */
extern bool cli_stdin_is_commands;

/* Runs the session on *c (made again if it breaks): commands (NULL-ended)
 * for completion, run for each line's words; usage_code for a line that
 * does not split.  Returns the exit code. */
int cli_shell(floe **c, const char *server, const floe_options *conn, const char *const *commands,
              int (*run)(floe *c, int argc, char **argv), int usage_code);

#endif
