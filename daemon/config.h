/*
 * config.h - floed's settings: one table (config.c) names every setting,
 * its type, default and one line of help.  A setting comes from, in rising
 * precedence: its default, the config file (`key value` lines, `#`
 * comments, sizes with K/M/G/T units), and the command line (`--key value`).
 * config/floed.conf lists every setting with its default.
 */
#ifndef FLOE_DAEMON_CONFIG_H
#define FLOE_DAEMON_CONFIG_H

#include <stddef.h>
#include <stdint.h>

typedef struct floed_config {
    char bind[256];
    uint64_t port;
    uint64_t io_threads;
    uint64_t engine_threads;
    uint64_t max_connections;
    uint64_t max_frame;
    uint64_t max_inflight;
    uint64_t max_tables;
    uint64_t max_batch_keys;
    char token[256];
    char token_file[1024];
    char log_level[16];
    char data_dir[1024];
    char port_file[1024];
    char backend[16];
    char metrics_bind[256];
    uint64_t metrics_port;
    uint64_t save_every;
    uint64_t save_after_changes;
    char config_file[1024]; /* the file settings came from ("" if none): SIGHUP reads it again */
} floed_config;

void config_defaults(floed_config *c);
/* Applies a file of `key value` lines.  Returns 0, or -1 with a message. */
int config_load_file(floed_config *c, const char *path, char *err, size_t errlen);
/* Sets one setting by name (without dashes) from text. */
int config_set(floed_config *c, const char *key, const char *value, char *err, size_t errlen);
/* Checks cross-field rules and reads token_file; 0 or -1 with a message. */
int config_finish(floed_config *c, char *err, size_t errlen);
/* The settings of a command line: defaults, then the file of -c/--config,
 * then every --setting VALUE / --setting=VALUE flag (getopt_long), then
 * config_finish.  0, or -1 with a message, or CONFIG_HELP / CONFIG_VERSION
 * when -h/--help or -V/--version was given (the caller prints them). */
enum { CONFIG_HELP = 1, CONFIG_VERSION = 2 };
int config_from_args(floed_config *c, int argc, char **argv, char *err, size_t errlen);
/* Calls fn for every setting whose value differs between a and b, with
 * whether it can change while floed runs (SIGHUP) or needs a restart. */
void config_changes(const floed_config *a, const floed_config *b, void (*fn)(const char *name, int live, void *arg),
                    void *arg);
/* Prints every setting: name, default and help (for --help). */
void config_print_help(FILE *f);
/* Number of settings and the name of setting i (for tests). */
size_t config_count(void);
const char *config_name(size_t i);

#endif
