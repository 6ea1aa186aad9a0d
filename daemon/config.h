/*
 * config.h - floed's settings: one table (config.c) names every setting,
 * its type, default and one line of help.  A setting comes from, in rising
 * precedence: its default, the config file (`key value` lines, `#`
 * comments, sizes with K/M/G/T units), and the command line (`--key value`).
 * config/floed.conf lists every setting with its default.
 */
#ifndef FLOE_DAEMON_CONFIG_H
#define FLOE_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "floe_wire.h"
#include "spec.h"

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
    char token[FLOE_TOKEN_MAX + 1];
    char token_file[1024];
    uint64_t protected_mode;                       /* 0 or 1 */
    uint64_t timeout;                              /* seconds a connection may sit idle (0: for ever) */
    uint64_t hello_timeout;                        /* seconds to the first request (0: for ever) */
    uint64_t frame_timeout;                        /* seconds from a frame's first byte to its last (0: for ever) */
    uint64_t output_soft_limit, output_hard_limit; /* bytes of responses a client has not read */
    uint64_t output_total_limit;                   /* ... all clients together */
    uint64_t max_table_bytes;                      /* a new table's arrays (0: no limit of its own) */
    uint64_t maxmemory;                            /* resident bytes past which writes are refused (0: none) */
    uint64_t maxmemory_gpu; /* device bytes in use on a GPU past which GPU writes are refused (0: none) */
    char log_level[16];
    char data_dir[1024];
    char port_file[1024];
    char backend[16];
    char gpus[256];         /* "all" or device ids: config_gpus */
    char gpu_fault_exit[8]; /* yes, no or auto: config_gpu_fault_exit */
    uint64_t partitions;    /* 0: one per GPU (GPU tables), 1 (CPU tables) */
    uint64_t pipelines;     /* lanes of every table (tables/backend.h) */
    char metrics_bind[256];
    uint64_t metrics_port;
    uint64_t save_every;
    uint64_t save_after_changes;
    char resp_port[8]; /* the Redis protocol's port (resp.h): "" off, else 0..65535 (0: any free port) */
    char resp_port_file[1024];
    char tls_port[8]; /* "" off, else 0..65535 (0: any free port, see tls-port-file) */
    char tls_port_file[1024];
    uint64_t tls_only; /* 0 or 1: no plain port */
    char tls_cert_file[1024], tls_key_file[1024], tls_ca_cert_file[1024];
    char tls_auth_clients[16]; /* no, yes or optional */
    char tls_protocols[64];    /* "TLSv1.3", "TLSv1.2,TLSv1.3" */
    char config_file[1024];    /* the file settings came from ("" if none): SIGHUP reads it again */
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
/* Copies the settings that can change while floed runs from src into dst. */
void config_apply_live(floed_config *dst, const floed_config *src);
/* tls-protocols' versions as 12 (TLS 1.2) or 13 (TLS 1.3): the lowest and
 * highest named (either may be NULL); 0, or -1 if the list names another. */
int config_tls_protocols(const char *list, int *min, int *max);
/* The device ids of gpus ("0,1,3"): their number, 0 for "all" (ids left
 * alone), or -1 with a message for anything else (a bad id, a repeat). */
int config_gpus(const char *gpus, int ids[FLOE_PARTS_MAX], char *err, size_t errlen);
/* Whether a failed GPU stops floed (gpu-fault-exit): yes, no, or auto: yes
 * when systemd started it (INVOCATION_ID or NOTIFY_SOCKET in the environment). */
bool config_gpu_fault_exit(const floed_config *c);
/* The io threads to start: io-threads, or for 0 one per two CPUs of this host, 4 to 16. */
unsigned config_io_threads(const floed_config *c);
/* Setting `name`'s index (0 .. config_count() - 1), or -1. */
int config_index(const char *name);
/* Whether setting i can change while floed runs (SIGHUP, CONFIG SET). */
bool config_is_live(size_t i);
/* Setting i of c as the config file writes it (sizes in bytes, yes/no). */
void config_value(const floed_config *c, size_t i, char *out, size_t len);
/* Writes the config file at path again with c's settings: each line of a
 * setting whose value differs is replaced (its comment kept), every other
 * line kept as it is, and settings that differ from their defaults but
 * that no line names are added at the end, but for the token (a secret
 * goes only where a line already had one, and never the token of a
 * token-file).  Atomic (a temporary beside it, renamed over it, the
 * file's mode kept).  0, or -1 with a message. */
int config_rewrite(const floed_config *c, const char *path, char *err, size_t errlen);
/* Prints every setting: name, default and help (for --help). */
void config_print_help(FILE *f);
/* Number of settings and the name of setting i (for tests). */
size_t config_count(void);
const char *config_name(size_t i);

#endif
