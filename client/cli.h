/*
 * cli.h - what the floe CLI's files share: its options and command table,
 * the JSON writer (cli_json.c), keys and vectors from arguments or stdin
 * (cli_input.c), the reports of the server and its tables (cli_report.c),
 * the commands that send keys, load and dump (cli_keys.c).  cli.c holds
 * main, the command table and the option parsing.
 */
#ifndef FLOE_CLIENT_CLI_H
#define FLOE_CLIENT_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli_parse.h"
#include "cli_shell.h"
#include "floe.h"

#define EXIT_USAGE     2
#define DEFAULT_SERVER "127.0.0.1:7450"
#define WINDOW         4 /* requests in flight while a command sends keys in parts (and load) */

/* The options of every command; each command takes some of them (cmd.groups). */
typedef struct opts {
    bool json;
    floe_table_def def; /* create */
    bool key_bits_given, value_bytes_given;
    bool binary; /* load */
    size_t batch;
    bool values;    /* dump, range, succ, pred, min, max */
    uint64_t limit; /* range: keys at most (0: all) */
    bool desc;      /* range */
    bool nosave;    /* shutdown */
    const char *from;    /* freeze: the table to fill it from */
    const char *section; /* info: one section (NULL: all) */
} opts;

enum { G_JSON = 1, G_CREATE = 2, G_LOAD = 4, G_DUMP = 8, G_RANGE = 16, G_SHUTDOWN = 32, G_FREEZE = 64 };

typedef struct cmd {
    const char *name, *summary, *args, *help;
    unsigned groups;        /* the option groups it takes */
    int min_args, max_args; /* positional arguments; max -1: any number */
    int (*run)(floe *c, const opts *o, int argc, char **argv);
} cmd;

typedef struct jw {
    int depth;
    bool first[16]; /* nothing written yet inside the object or array at this depth */
    bool keyed;     /* a key was written: its value follows without a comma */
} jw;

typedef struct veclist {
    uint32_t *v; /* n * words */
    size_t n, cap;
    unsigned words;
    const char *table;
} veclist;
typedef struct keylist {
    uint64_t *keys, *values; /* values: KEY=VALUE lines only */
    size_t n, cap;
} keylist;
typedef struct key_ctx {
    keylist *kl;
    bool with_value;
} key_ctx;
typedef int add_fn(void *ctx, const char *text, const char *where);

/* cli.c */
int fail(floe *c, int st);
bool has_values(const floe_table_info *t);
const char *kind_name(int kind);
double now(void);
int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* cli_input.c */
void free_keys(keylist *kl);
void print_vector(const uint32_t *v, unsigned words);
int read_keys(int argc, char **argv, bool with_value, keylist *kl);
int read_vectors(int argc, char **argv, const floe_table_info *t, veclist *vl);

/* cli_json.c */
void jw_bool(jw *w, const char *key, bool v);
void jw_close(jw *w, char bracket);
void jw_i64(jw *w, const char *key, int64_t v);
void jw_null(jw *w, const char *key);
void jw_open(jw *w, const char *key, char bracket);
void jw_real(jw *w, const char *key, double v);
void jw_str(jw *w, const char *key, const char *v);
void jw_u64(jw *w, const char *key, uint64_t v);

/* cli_report.c */
int ordered_only(const floe_table_info *t, const char *command);
void print_summary(const floe_counts *k);
int table_shape(floe *c, const char *table, floe_table_info *t);

/* the commands */
int cmd_add(floe *c, const opts *o, int argc, char **argv);
int cmd_config(floe *c, const opts *o, int argc, char **argv);
int cmd_create(floe *c, const opts *o, int argc, char **argv);
int cmd_drop(floe *c, const opts *o, int argc, char **argv);
int cmd_dump(floe *c, const opts *o, int argc, char **argv);
int cmd_erase(floe *c, const opts *o, int argc, char **argv);
int cmd_find(floe *c, const opts *o, int argc, char **argv);
int cmd_get(floe *c, const opts *o, int argc, char **argv);
int cmd_info(floe *c, const opts *o, int argc, char **argv);
int cmd_insert(floe *c, const opts *o, int argc, char **argv);
int cmd_load(floe *c, const opts *o, int argc, char **argv);
int cmd_max(floe *c, const opts *o, int argc, char **argv);
int cmd_min(floe *c, const opts *o, int argc, char **argv);
int cmd_ping(floe *c, const opts *o, int argc, char **argv);
int cmd_pred(floe *c, const opts *o, int argc, char **argv);
int cmd_range(floe *c, const opts *o, int argc, char **argv);
int cmd_snapshot(floe *c, const opts *o, int argc, char **argv);
int cmd_freeze(floe *c, const opts *o, int argc, char **argv);
int cmd_shutdown(floe *c, const opts *o, int argc, char **argv);
int cmd_stats(floe *c, const opts *o, int argc, char **argv);
int cmd_succ(floe *c, const opts *o, int argc, char **argv);
int cmd_tables(floe *c, const opts *o, int argc, char **argv);

#endif
