/*
 * cli_shell.c - `floe` with no command: a session of commands on one
 * connection, as redis-cli has it.  At a terminal: a prompt with line
 * editing, history (~/.floe_history) and completion of the commands and of
 * the server's table names (libedit).  From a pipe or a file: one command
 * a line, no prompt, and the exit code of the last command that failed.
 * A line is split into words as a shell would (quotes, backslashes), and
 * runs as `floe WORDS` would; keys come on the line (stdin is the
 * session's).
 */
#define _GNU_SOURCE
#include <editline/readline.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_shell.h"

bool cli_stdin_is_commands;

#define WORDS_MAX 4096

/* line split into words in place (quotes removed): argc, or -1 with *why
 * for an unclosed quote or too many words. */
static int split_words(char *line, char **argv, int max, const char **why)
{
    int argc = 0;
    char *in = line, *out = line;
    for (;;) {
        while (*in == ' ' || *in == '\t' || *in == '\r' || *in == '\n')
            in++;
        if (!*in)
            return argc;
        if (argc == max) {
            *why = "too many words on the line";
            return -1;
        }
        argv[argc++] = out;
        char quote = 0;
        for (; *in && (quote || (*in != ' ' && *in != '\t' && *in != '\r' && *in != '\n')); in++) {
            if (quote && *in == quote)
                quote = 0;
            else if (!quote && (*in == '"' || *in == '\''))
                quote = *in;
            else if (*in == '\\' && quote != '\'' && in[1])
                *out++ = *++in;
            else
                *out++ = *in;
        }
        if (quote) {
            *why = "a quote is not closed";
            return -1;
        }
        const bool end = !*in;
        *out++ = '\0';
        if (end)
            return argc;
        in++;
    }
}

/* ---- completion ---------------------------------------------------------------------------------- */

static floe *complete_conn;
static const char *const *complete_cmds;

static char *next_command(const char *text, int state)
{
    static size_t i, len;
    if (!state)
        i = 0, len = strlen(text);
    while (complete_cmds[i]) {
        const char *name = complete_cmds[i++];
        if (strncmp(name, text, len) == 0)
            return strdup(name);
    }
    return NULL;
}

static char *next_table(const char *text, int state)
{
    static floe_table_info *tables;
    static size_t n, i, len;
    if (!state) {
        free(tables);
        tables = NULL;
        n = i = 0;
        len = strlen(text);
        if (floe_tables(complete_conn, &tables, &n) != FLOE_OK)
            n = 0;
    }
    while (i < n) {
        const char *name = tables[i++].name;
        if (strncmp(name, text, len) == 0)
            return strdup(name);
    }
    return NULL;
}

/* The first word is a command; after it, table names. */
static char **complete(const char *text, int start, int end)
{
    (void)end;
    rl_attempted_completion_over = 1; /* no file names */
    int at = 0;
    while (at < start && (rl_line_buffer[at] == ' ' || rl_line_buffer[at] == '\t'))
        at++;
    return rl_completion_matches(text, at == start ? next_command : next_table);
}

/* ---- the session ------------------------------------------------------------------------------- */

static char *history_path(void)
{
    const char *home = getenv("HOME");
    char *p = NULL;
    if (home && home[0] && asprintf(&p, "%s/.floe_history", home) < 0)
        p = NULL;
    return p;
}

int cli_shell(floe **c, const char *server, const floe_options *conn, const char *const *commands,
              int (*run)(floe *c, int argc, char **argv), int usage_code)
{
    const bool tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    cli_stdin_is_commands = true;
    char *hist = NULL, prompt[300];
    if (tty) {
        complete_conn = *c;
        complete_cmds = commands;
        rl_readline_name = "floe";
        rl_attempted_completion_function = complete;
        using_history();
        stifle_history(1000);
        if ((hist = history_path()))
            read_history(hist);
        snprintf(prompt, sizeof prompt, "floe %s> ", server);
        printf("floe %s, connected to %s (%s): commands as floe's (help), quit or Ctrl-D to leave\n", FLOE_VERSION,
               server, floe_info(*c)->server);
    }
    int rc = 0;
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    for (;;) {
        char *text;
        if (tty) {
            if (!(text = readline(prompt)))
                break;
        } else {
            if (getline(&line, &cap, stdin) < 0)
                break;
            text = line;
        }
        lineno++;
        if (tty && text[strspn(text, " \t")])
            add_history(text);
        char *argv[WORDS_MAX + 1];
        const char *why = NULL;
        const int argc = split_words(text, argv, WORDS_MAX, &why);
        int st = 0;
        if (argc < 0) {
            fprintf(stderr, "floe: line %ld: %s\n", lineno, why);
            st = usage_code;
        } else if (argc == 0 || argv[0][0] == '#') {
            st = -1; /* nothing to do */
        } else if (strcmp(argv[0], "quit") == 0 || strcmp(argv[0], "exit") == 0) {
            if (tty)
                free(text);
            break;
        } else {
            argv[argc] = NULL;
            if (floe_error(*c) == FLOE_ERR_IO) { /* the connection broke: a new one for this command */
                floe *fresh;
                if (floe_connect_opts(server, conn, &fresh) == FLOE_OK) {
                    floe_close(*c);
                    *c = complete_conn = fresh;
                    fprintf(stderr, "floe: connected to %s again\n", server);
                } else {
                    fprintf(stderr, "floe: %s: %s\n", server, floe_errstr(fresh));
                    floe_close(fresh);
                }
            }
            st = run(*c, argc, argv);
        }
        if (st > 0)
            rc = st;
        if (tty)
            free(text);
        fflush(stdout);
    }
    free(line);
    if (tty) {
        if (hist)
            write_history(hist);
        free(hist);
        putchar('\n');
        rc = 0; /* a person read each command's answer */
    }
    cli_stdin_is_commands = false;
    return rc;
}
