/*
 * cli.c - floe, the command-line client: one subcommand per protocol
 * operation, keys as arguments or one per line on stdin, bulk loading with
 * a progress bar, --json for the commands that report figures.  Output goes
 * to stdout, errors to stderr; the exit code is 0 on success, 1 when the
 * server or the connection reports an error, 2 for a usage error.
 *
 * Options: getopt_long twice, first for the global options before the
 * command (stopping at it), then for the command's own options, which may
 * come before, between or after its arguments (`--` ends them, for a table
 * whose name starts with '-').  The command line is parsed before connecting.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "cli_parse.h"
#include "floe.h"
#include "floe_getopt.h"

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
} opts;

enum { G_JSON = 1, G_CREATE = 2, G_LOAD = 4, G_DUMP = 8, G_RANGE = 16 };

typedef struct cmd {
    const char *name, *summary, *args, *help;
    unsigned groups;        /* the option groups it takes */
    int min_args, max_args; /* positional arguments; max -1: any number */
    int (*run)(floe *c, const opts *o, int argc, char **argv);
} cmd;

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("floe: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\n", stderr);
    va_end(ap);
    return EXIT_USAGE;
}

static int fail(floe *c, int st)
{
    const char *msg = floe_errstr(c);
    fprintf(stderr, "floe: %s%s%s\n", floe_strerror(st), msg && msg[0] ? ": " : "", msg ? msg : "");
    return 1;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *kind_name(int kind)
{
    return kind == FLOE_TABLE_SET       ? "SET"
           : kind == FLOE_TABLE_MAP     ? "MAP"
           : kind == FLOE_TABLE_TREE    ? "TREE"
           : kind == FLOE_TABLE_ORDERED ? "ORDERED"
                                        : "?";
}

/* Whether a table stores a value with each key (a MAP, an ORDERED table of value_bytes 4 or 8). */
static bool has_values(const floe_table_info *t)
{
    return t->kind == FLOE_TABLE_MAP || (t->kind == FLOE_TABLE_ORDERED && t->value_bytes);
}

/* ---- JSON output: one object per command, on one line ------------------------------------------ */

typedef struct jw {
    int depth;
    bool first[16]; /* nothing written yet inside the object or array at this depth */
    bool keyed;     /* a key was written: its value follows without a comma */
} jw;

/* s as a JSON string: escapes, and U+FFFD for bytes that are not UTF-8
 * (the server's messages are not checked), so the output always parses. */
static void json_string(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    putchar('"');
    while (*p) {
        unsigned char ch = *p;
        if (ch == '"' || ch == '\\') {
            printf("\\%c", ch);
            p++;
        } else if (ch < 0x20) {
            printf("\\u%04x", ch);
            p++;
        } else if (ch < 0x80) {
            putchar(ch);
            p++;
        } else {
            size_t len = ch >= 0xc2 && ch <= 0xdf ? 2 : ch >= 0xe0 && ch <= 0xef ? 3 : ch >= 0xf0 && ch <= 0xf4 ? 4 : 0;
            bool ok = len > 0;
            for (size_t i = 1; ok && i < len; i++)
                ok = (p[i] & 0xc0) == 0x80;
            /* no overlong forms, surrogates or code points above U+10FFFF */
            if (ok && ((ch == 0xe0 && p[1] < 0xa0) || (ch == 0xed && p[1] > 0x9f) || (ch == 0xf0 && p[1] < 0x90) ||
                       (ch == 0xf4 && p[1] > 0x8f)))
                ok = false;
            if (ok) {
                fwrite(p, 1, len, stdout);
                p += len;
            } else {
                fputs("\\ufffd", stdout);
                p++;
            }
        }
    }
    putchar('"');
}

static void jw_value(jw *w)
{
    if (w->keyed) {
        w->keyed = false;
        return;
    }
    if (w->depth > 0 && !w->first[w->depth])
        putchar(',');
    w->first[w->depth] = false;
}

static void jw_key(jw *w, const char *key)
{
    if (key) {
        jw_value(w);
        json_string(key);
        putchar(':');
        w->keyed = true;
    }
}

static void jw_open(jw *w, const char *key, char bracket)
{
    jw_key(w, key);
    jw_value(w);
    putchar(bracket);
    w->first[++w->depth] = true;
}

static void jw_close(jw *w, char bracket)
{
    putchar(bracket);
    if (--w->depth == 0)
        putchar('\n');
}

static void jw_str(jw *w, const char *key, const char *v)
{
    jw_key(w, key);
    jw_value(w);
    json_string(v);
}

static void jw_u64(jw *w, const char *key, uint64_t v)
{
    jw_key(w, key);
    jw_value(w);
    printf("%" PRIu64, v);
}

static void jw_i64(jw *w, const char *key, int64_t v)
{
    jw_key(w, key);
    jw_value(w);
    printf("%" PRId64, v);
}

static void jw_real(jw *w, const char *key, double v)
{
    jw_key(w, key);
    jw_value(w);
    if (isfinite(v))
        printf("%.10g", v);
    else
        fputs("null", stdout); /* JSON has no NaN or infinity */
}

static void jw_bool(jw *w, const char *key, bool v)
{
    jw_key(w, key);
    jw_value(w);
    fputs(v ? "true" : "false", stdout);
}

static void jw_null(jw *w, const char *key)
{
    jw_key(w, key);
    jw_value(w);
    fputs("null", stdout);
}

/* ---- TREE vectors: words u32 words written 1,2,3,... ---------------------------------------- */

typedef struct veclist {
    uint32_t *v; /* n * words */
    size_t n, cap;
    unsigned words;
    const char *table;
} veclist;

static int add_vector(void *ctx, const char *text, const char *where)
{
    veclist *vl = ctx;
    if (vl->n == vl->cap) {
        size_t cap = vl->cap ? 2 * vl->cap : 256;
        uint32_t *grown = realloc(vl->v, cap * vl->words * sizeof *grown);
        if (!grown)
            return usage_error("out of memory");
        vl->v = grown;
        vl->cap = cap;
    }
    char msg[CLI_MSG_MAX];
    if (cli_parse_vector(text, vl->words, vl->table, vl->v + vl->n * vl->words, where, msg, sizeof msg) != 0)
        return usage_error("%s", msg);
    vl->n++;
    return 0;
}

static void print_vector(const uint32_t *v, unsigned words)
{
    for (unsigned i = 0; i < words; i++)
        printf(i ? ",%" PRIu32 : "%" PRIu32, v[i]);
}

/* ---- keys from arguments or stdin -------------------------------------------------------------- */

typedef struct keylist {
    uint64_t *keys, *values; /* values: KEY=VALUE lines only */
    size_t n, cap;
} keylist;

static int add_key(keylist *kl, const char *text, bool with_value, const char *where)
{
    uint64_t key, value = 0;
    char msg[CLI_MSG_MAX];
    if (cli_parse_key(text, with_value, &key, &value, where, msg, sizeof msg) != 0)
        return usage_error("%s", msg);
    if (kl->n == kl->cap) { /* values only with them: stdin may bring millions of keys */
        size_t cap = kl->cap ? 2 * kl->cap : 1024;
        uint64_t *keys = realloc(kl->keys, cap * sizeof *keys);
        if (keys)
            kl->keys = keys;
        uint64_t *values = with_value ? realloc(kl->values, cap * sizeof *values) : NULL;
        if (values)
            kl->values = values;
        if (!keys || (with_value && !values))
            return usage_error("out of memory");
        kl->cap = cap;
    }
    kl->keys[kl->n] = key;
    if (with_value)
        kl->values[kl->n] = value;
    kl->n++;
    return 0;
}

static void free_keys(keylist *kl)
{
    free(kl->keys);
    free(kl->values);
}

typedef int add_fn(void *ctx, const char *text, const char *where);

/* Items (keys, vectors) from argv, or (when none) one per line on stdin. */
static int read_items(int argc, char **argv, add_fn *add, void *ctx)
{
    if (argc > 0) {
        for (int i = 0; i < argc; i++)
            if (add(ctx, argv[i], "argument"))
                return EXIT_USAGE;
        return 0;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    while ((len = getline(&line, &cap, stdin)) >= 0) {
        lineno++;
        char *p = cli_trim_line(line);
        if (!*p)
            continue;
        char where[32];
        snprintf(where, sizeof where, "stdin line %ld", lineno);
        if (add(ctx, p, where)) {
            free(line);
            return EXIT_USAGE;
        }
    }
    free(line);
    return 0;
}

typedef struct key_ctx {
    keylist *kl;
    bool with_value;
} key_ctx;

static int add_key_item(void *ctx, const char *text, const char *where)
{
    key_ctx *k = ctx;
    return add_key(k->kl, text, k->with_value, where);
}

/* Keys from argv, or (when none) one per line on stdin. */
static int read_keys(int argc, char **argv, bool with_value, keylist *kl)
{
    memset(kl, 0, sizeof *kl);
    key_ctx k = {kl, with_value};
    if (read_items(argc, argv, add_key_item, &k)) {
        free_keys(kl);
        return EXIT_USAGE;
    }
    return 0;
}

/* Vectors of a TREE from argv, or (when none) one per line on stdin. */
static int read_vectors(int argc, char **argv, const floe_table_info *t, veclist *vl)
{
    memset(vl, 0, sizeof *vl);
    vl->words = t->words;
    vl->table = t->name;
    if (read_items(argc, argv, add_vector, vl)) {
        free(vl->v);
        vl->v = NULL;
        return EXIT_USAGE;
    }
    return 0;
}

/* ---- subcommands --------------------------------------------------------------------------------- */

static int cmd_ping(floe *c, const opts *o, int argc, char **argv)
{
    double t0 = now();
    int st = floe_ping(c);
    if (st)
        return fail(c, st);
    printf("PONG %.3f ms\n", (now() - t0) * 1e3);
    return 0;
}

/* 1536 -> "1.5 KiB" */
static const char *human_bytes(uint64_t b, char *buf, size_t len)
{
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 5)
        v /= 1024, u++;
    if (u == 0)
        snprintf(buf, len, "%" PRIu64 " bytes", b);
    else
        snprintf(buf, len, "%.1f %s", v, units[u]);
    return buf;
}

/* A unix time as local date and time, with how long ago; "never" for 0. */
static const char *when(int64_t t, char *buf, size_t len)
{
    if (t <= 0) {
        snprintf(buf, len, "never");
        return buf;
    }
    time_t tt = (time_t)t;
    struct tm tm;
    char date[64] = "?";
    if (localtime_r(&tt, &tm))
        strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S %z", &tm);
    long long ago = (long long)(time(NULL) - tt);
    snprintf(buf, len, "%s (%lld s ago)", date, ago);
    return buf;
}

static void print_server_stats(const floe_server_stats *s)
{
    char a[64], b[64], c[64];
    uint64_t u = s->uptime_seconds;
    printf("build: %s\nuptime: %" PRIu64 " s (%" PRIu64 "d %" PRIu64 "h %" PRIu64 "m %" PRIu64 "s)\npid: %" PRIu64 "\n",
           s->build, u, u / 86400, u / 3600 % 24, u / 60 % 60, u % 60, s->pid);
    printf("gpu: %s\n", s->gpu[0] ? s->gpu : "none");
    if (s->gpu_memory_total)
        printf("gpu-memory: %s used, %s free, %s total\n", human_bytes(s->gpu_memory_used, a, sizeof a),
               human_bytes(s->gpu_memory_free, b, sizeof b), human_bytes(s->gpu_memory_total, c, sizeof c));
    for (size_t i = 0; i < s->n_gpus; i++) {
        const floe_gpu_summary *g = &s->gpus[i];
        if (g->healthy)
            printf("gpu %d: %s, ok, %s free of %s\n", g->device, g->name, human_bytes(g->memory_free, a, sizeof a),
                   human_bytes(g->memory_total, b, sizeof b));
        else
            printf("gpu %d: %s, FAILED: %s (its tables answer ERR_UNAVAILABLE until floed restarts)\n", g->device,
                   g->name, g->error);
    }
    printf("connections: %" PRIu64 " open, %" PRIu64 " accepted, %" PRIu64 " refused\n", s->connections,
           s->connections_total, s->connections_refused);
    printf("traffic: %" PRIu64 " bytes in, %" PRIu64 " bytes out\n", s->bytes_in, s->bytes_out);
    printf("rss: %s\n", human_bytes(s->rss_bytes, a, sizeof a));
    printf("data-dir: %s\n", s->data_dir[0] ? s->data_dir : "(none: tables live in memory only)");
    if (s->metrics_address[0])
        printf("metrics: http://%s/metrics\n", s->metrics_address);
    else
        printf("metrics: off\n");
    printf("last-snapshot: %s", when(s->last_snapshot_time, a, sizeof a));
    if (s->last_snapshot_status[0])
        printf(": %s", s->last_snapshot_status);
    putchar('\n');
    printf("requests:\n  %-12s %14s %16s %10s\n", "op", "requests", "keys", "errors");
    for (size_t i = 0; i < s->n_ops; i++)
        printf("  %-12s %14" PRIu64 " %16" PRIu64 " %10" PRIu64 "\n", s->ops[i].op, s->ops[i].requests, s->ops[i].keys,
               s->ops[i].errors);
    printf("errors:%s\n", s->n_errors ? "" : " none");
    for (size_t i = 0; i < s->n_errors; i++)
        printf("  %-22s %10" PRIu64 "\n", s->errors[i].status, s->errors[i].count);
    printf("tables:%s\n", s->n_tables ? "" : " none");
    for (size_t i = 0; i < s->n_tables; i++) {
        const floe_table_summary *t = &s->tables[i];
        printf("  %-24s %-4s keys=%-12" PRIu64 " fill=%.4f memory=%s changes=%" PRIu64 " backend=%s snapshot=%s\n",
               t->name, kind_name(t->kind), t->keys, t->fill, human_bytes(t->memory_bytes, a, sizeof a), t->changes,
               t->backend, when(t->last_snapshot_time, b, sizeof b));
    }
}

static void json_server_stats(jw *w, const floe_server_stats *s)
{
    jw_open(w, "info", '{');
    jw_str(w, "version", s->version);
    jw_str(w, "build", s->build);
    jw_u64(w, "uptime_seconds", s->uptime_seconds);
    jw_u64(w, "pid", s->pid);
    jw_str(w, "backend", s->backend);
    jw_str(w, "gpu", s->gpu);
    jw_open(w, "gpu_memory", '{');
    jw_u64(w, "total", s->gpu_memory_total);
    jw_u64(w, "used", s->gpu_memory_used);
    jw_u64(w, "free", s->gpu_memory_free);
    jw_close(w, '}');
    jw_open(w, "gpus", '[');
    for (size_t i = 0; i < s->n_gpus; i++) {
        const floe_gpu_summary *g = &s->gpus[i];
        jw_open(w, NULL, '{');
        jw_i64(w, "device", g->device);
        jw_str(w, "name", g->name);
        jw_bool(w, "healthy", g->healthy);
        jw_str(w, "error", g->error);
        jw_u64(w, "memory_total", g->memory_total);
        jw_u64(w, "memory_free", g->memory_free);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_open(w, "connections", '{');
    jw_u64(w, "open", s->connections);
    jw_u64(w, "total", s->connections_total);
    jw_u64(w, "refused", s->connections_refused);
    jw_close(w, '}');
    jw_open(w, "ops", '{');
    for (size_t i = 0; i < s->n_ops; i++) {
        jw_open(w, s->ops[i].op, '{');
        jw_u64(w, "requests", s->ops[i].requests);
        jw_u64(w, "keys", s->ops[i].keys);
        jw_u64(w, "errors", s->ops[i].errors);
        jw_close(w, '}');
    }
    jw_close(w, '}');
    jw_open(w, "errors", '{');
    for (size_t i = 0; i < s->n_errors; i++)
        jw_u64(w, s->errors[i].status, s->errors[i].count);
    jw_close(w, '}');
    jw_u64(w, "bytes_in", s->bytes_in);
    jw_u64(w, "bytes_out", s->bytes_out);
    jw_u64(w, "rss_bytes", s->rss_bytes);
    jw_str(w, "data_dir", s->data_dir);
    jw_str(w, "metrics_address", s->metrics_address);
    jw_open(w, "last_snapshot", '{');
    jw_i64(w, "time", s->last_snapshot_time);
    jw_str(w, "status", s->last_snapshot_status);
    jw_close(w, '}');
    jw_open(w, "tables", '[');
    for (size_t i = 0; i < s->n_tables; i++) {
        const floe_table_summary *t = &s->tables[i];
        jw_open(w, NULL, '{');
        jw_str(w, "name", t->name);
        jw_str(w, "kind", kind_name(t->kind));
        jw_str(w, "backend", t->backend);
        jw_u64(w, "keys", t->keys);
        jw_real(w, "fill", t->fill);
        jw_u64(w, "memory_bytes", t->memory_bytes);
        jw_u64(w, "changes", t->changes);
        jw_i64(w, "last_snapshot_time", t->last_snapshot_time);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_close(w, '}');
}

/* One server's: the hello reply (version, backend, limits), then its
 * counters (the info operation); a floed without info: the hello reply,
 * and a note; with --json, as an object written to w. */
static int info_one(floe *c, const opts *o, jw *w)
{
    const floe_server_info *i = floe_info(c);
    floe_server_stats *s = NULL;
    int st = floe_server_stats_get(c, &s);
    if (st != FLOE_OK && st != FLOE_ERR_UNSUPPORTED)
        return fail(c, st);
    const char *why = st ? floe_errstr(c) : NULL;
    if (o->json) {
        jw_open(w, NULL, '{');
        jw_str(w, "server", i->server);
        jw_u64(w, "protocol", i->version);
        jw_str(w, "backend", i->backend);
        jw_u64(w, "max_frame", i->max_frame);
        jw_u64(w, "max_batch_keys", i->max_batch_keys);
        jw_u64(w, "max_inflight", i->max_inflight);
        jw_str(w, "client", "floe " FLOE_VERSION);
        if (s) {
            json_server_stats(w, s);
        } else {
            jw_null(w, "info");
            jw_str(w, "info_unavailable", why);
        }
        jw_close(w, '}');
    } else {
        printf("server: %s\nprotocol: %u\nbackend: %s\nmax-frame: %" PRIu64 " bytes\nmax-batch-keys: %" PRIu64
               "\nmax-inflight: %u\n",
               i->server, i->version, i->backend, i->max_frame, i->max_batch_keys, i->max_inflight);
        if (s)
            print_server_stats(s);
        else
            printf("info: not available (%s): the figures above are the hello reply's\n", why);
    }
    floe_server_stats_free(s);
    return 0;
}

/* Each server's info: one, or every server of a list in turn (a
 * partitioned connection has no info of its own). */
static int cmd_info(floe *c, const opts *o, int argc, char **argv)
{
    const unsigned n = floe_shards(c);
    jw w = {0};
    if (n == 1)
        return info_one(c, o, &w);
    if (o->json) {
        jw_open(&w, NULL, '{');
        jw_open(&w, "servers", '[');
    }
    int rc = 0;
    for (unsigned k = 0; k < n && rc == 0; k++) {
        if (!o->json)
            printf("%s# server %u of %u\n", k ? "\n" : "", k + 1, n);
        rc = info_one(floe_shard(c, k), o, &w);
    }
    if (o->json && rc == 0) {
        jw_close(&w, ']');
        jw_close(&w, '}');
    }
    return rc;
}

/* A table in parts: one line each (stats of one table). */
static void print_parts(const floe_table_info *t)
{
    if (t->n_parts)
        printf("parts: %u\n", t->n_parts);
    for (unsigned p = 0; p < t->n_parts; p++) {
        const floe_part_info *q = &t->parts[p];
        char dev[24];
        if (q->device < 0)
            snprintf(dev, sizeof dev, "cpu");
        else
            snprintf(dev, sizeof dev, "gpu %d", q->device);
        printf("part %u: %s keys=%" PRIu64 " slots=%" PRIu64 " memory=%" PRIu64 " generation=%" PRIu64 "\n", p, dev,
               q->keys, q->slots, q->memory_bytes, q->generation);
    }
}

/* A table's line of `floe tables`: name=value words in columns that line up
 * whatever the kind (TREE: words, vectors, node_fill, bytes/vector). */
static void print_row(const floe_table_info *t)
{
    const bool tree = t->kind == FLOE_TABLE_TREE;
    char size[32], count[40], fill[32], per[40];
    if (tree)
        snprintf(size, sizeof size, "words=%u", t->words);
    else
        snprintf(size, sizeof size, "key_bits=%u", t->key_bits);
    snprintf(count, sizeof count, "%s=%" PRIu64, tree ? "vectors" : "keys", t->keys);
    snprintf(fill, sizeof fill, "%s=%.4f", tree ? "node_fill" : "fill", tree ? t->node_fill : t->fill);
    snprintf(per, sizeof per, "%s=%.3f", tree ? "bytes/vector" : "bytes/key", t->bytes_per_key);
    printf("%-24s %-7s %-11s %-20s %-16s %-22s backend=%s\n", t->name, kind_name(t->kind), size, count, fill, per,
           t->backend);
}

static void print_tree_info(const floe_table_info *t, bool long_form)
{
    if (!long_form) {
        print_row(t);
        return;
    }
    printf("name: %s\nkind: TREE\nwords: %u\ncapacity: %" PRIu64 "\n", t->name, t->words, t->capacity);
    if (t->memory)
        printf("memory asked: %" PRIu64 " bytes\n", t->memory);
    printf("grow: %s\n", t->grow ? "yes" : "no");
    if (t->grow)
        printf("max_fill: %.3f\n", t->max_fill);
    printf("generation: %" PRIu64 "\n", t->generation);
    printf("backend: %s\nvectors: %" PRIu64 "\nnodes: %" PRIu64 "\nnode_slots: %" PRIu64 "\nnode_fill: %.4f\n",
           t->backend, t->keys, t->nodes, t->node_slots, t->node_fill);
    printf("orphan_nodes: %" PRIu64 "\nmemory: %" PRIu64 " bytes\nbytes_per_vector: %.3f\ncompression: %.4f\n",
           t->orphan_nodes, t->memory_bytes, t->bytes_per_key, t->compression);
    static const char *const lv[] = {"primary", "secondary", "stash"};
    for (int l = 0; l < 3; l++)
        printf("root level %s: slots=%" PRIu64 " used=%" PRIu64 " fill=%.4f row_bits=%u\n", lv[l], t->level[l].slots,
               t->level[l].used, t->level[l].fill, t->level[l].row_bits);
    print_parts(t);
}

static void print_info(const floe_table_info *t, bool long_form)
{
    if (t->kind == FLOE_TABLE_TREE) {
        print_tree_info(t, long_form);
        return;
    }
    if (!long_form) {
        print_row(t);
        return;
    }
    printf("name: %s\nkind: %s\nkey_bits: %u\n", t->name, kind_name(t->kind), t->key_bits);
    if (t->kind == FLOE_TABLE_MAP || t->kind == FLOE_TABLE_ORDERED)
        printf("value_bytes: %u\n", t->value_bytes);
    if (t->kind == FLOE_TABLE_ORDERED) { /* a B+tree: slots are its leaves' room for keys */
        printf("backend: %s\nkeys: %" PRIu64 "\nslots: %" PRIu64 "\nfill: %.4f\n", t->backend, t->keys, t->slots,
               t->fill);
        printf("memory: %" PRIu64 " bytes\nbytes_per_key: %.3f\n", t->memory_bytes, t->bytes_per_key);
        return;
    }
    printf("capacity: %" PRIu64 "\ngrow: %s\n", t->capacity, t->grow ? "yes" : "no");
    if (t->grow)
        printf("max_fill: %.3f\n", t->max_fill);
    printf("backend: %s\nkeys: %" PRIu64 "\ntombstones: %" PRIu64 "\nslots: %" PRIu64 "\nfill: %.4f\n", t->backend,
           t->keys, t->tombstones, t->slots, t->fill);
    printf("memory: %" PRIu64 " bytes\nbytes_per_key: %.3f\ngeneration: %" PRIu64 "\n", t->memory_bytes,
           t->bytes_per_key, t->generation);
    static const char *const lv[] = {"primary", "secondary", "stash"};
    for (int l = 0; l < 3; l++)
        printf("level %s: slots=%" PRIu64 " used=%" PRIu64 " fill=%.4f row_bits=%u\n", lv[l], t->level[l].slots,
               t->level[l].used, t->level[l].fill, t->level[l].row_bits);
    print_parts(t);
}

/* A table as a JSON object: the figures of `floe stats`, under the same
 * names (TREE: its own; levels are the root table's). */
static void json_table(jw *w, const floe_table_info *t, bool stages)
{
    static const char *const lv[] = {"primary", "secondary", "stash"};
    const bool tree = t->kind == FLOE_TABLE_TREE;
    jw_open(w, NULL, '{');
    jw_str(w, "name", t->name);
    jw_str(w, "kind", kind_name(t->kind));
    jw_str(w, "backend", t->backend);
    jw_u64(w, "capacity", t->capacity);
    jw_u64(w, "keys", t->keys); /* TREE: vectors */
    if (t->shards) {
        jw_u64(w, "shard", t->shard);
        jw_u64(w, "shards", t->shards);
    }
    if (tree) {
        jw_u64(w, "words", t->words);
        jw_u64(w, "memory_asked", t->memory);
        jw_u64(w, "vectors", t->keys);
        jw_u64(w, "nodes", t->nodes);
        jw_u64(w, "node_slots", t->node_slots);
        jw_real(w, "node_fill", t->node_fill);
        jw_u64(w, "orphan_nodes", t->orphan_nodes);
        jw_real(w, "compression", t->compression);
        jw_real(w, "bytes_per_vector", t->bytes_per_key);
    } else {
        jw_u64(w, "key_bits", t->key_bits);
        if (t->kind == FLOE_TABLE_MAP || t->kind == FLOE_TABLE_ORDERED)
            jw_u64(w, "value_bytes", t->value_bytes);
        jw_u64(w, "tombstones", t->tombstones);
        jw_u64(w, "slots", t->slots);
        jw_real(w, "fill", t->fill);
        jw_real(w, "bytes_per_key", t->bytes_per_key);
    }
    jw_bool(w, "grow", t->grow);
    jw_real(w, "max_fill", t->max_fill);
    jw_u64(w, "generation", t->generation);
    jw_u64(w, "memory_bytes", t->memory_bytes);
    jw_open(w, "levels", '{');
    for (int l = 0; l < 3; l++) {
        jw_open(w, lv[l], '{');
        jw_u64(w, "slots", t->level[l].slots);
        jw_u64(w, "used", t->level[l].used);
        jw_real(w, "fill", t->level[l].fill);
        jw_u64(w, "row_bits", t->level[l].row_bits);
        jw_close(w, '}');
    }
    jw_close(w, '}');
    if (stages && t->n_parts) {
        jw_open(w, "parts", '[');
        for (unsigned p = 0; p < t->n_parts; p++) {
            const floe_part_info *q = &t->parts[p];
            jw_open(w, NULL, '{');
            jw_i64(w, "device", q->device);
            jw_u64(w, "keys", q->keys);
            jw_u64(w, "slots", q->slots);
            jw_u64(w, "memory_bytes", q->memory_bytes);
            jw_u64(w, "generation", q->generation);
            jw_close(w, '}');
        }
        jw_close(w, ']');
    }
    if (stages) {
        jw_open(w, "stages", '{');
        for (unsigned i = 0; i < t->n_stages; i++) {
            const floe_stage_info *s = &t->stages[i];
            jw_open(w, s->name, '{');
            jw_u64(w, "count", s->count);
            jw_u64(w, "keys", s->keys);
            jw_real(w, "seconds", (double)s->nanos / 1e9);
            jw_close(w, '}');
        }
        jw_close(w, '}');
    }
    jw_close(w, '}');
}

static int cmd_tables(floe *c, const opts *o, int argc, char **argv)
{
    floe_table_info *t;
    size_t n;
    int st = floe_tables(c, &t, &n);
    if (st)
        return fail(c, st);
    if (o->json) {
        jw w = {0};
        jw_open(&w, NULL, '{');
        jw_open(&w, "tables", '[');
        for (size_t i = 0; i < n; i++)
            json_table(&w, &t[i], false);
        jw_close(&w, ']');
        jw_close(&w, '}');
    } else {
        for (size_t i = 0; i < n; i++)
            print_info(&t[i], false);
        if (n == 0)
            fprintf(stderr, "(no tables)\n");
    }
    free(t);
    return 0;
}

static int cmd_create(floe *c, const opts *o, int argc, char **argv)
{
    floe_table_def d = o->def;
    d.name = argv[0];
    int st = floe_create(c, &d);
    if (st)
        return fail(c, st);
    printf("created %s\n", d.name);
    return 0;
}

static int cmd_drop(floe *c, const opts *o, int argc, char **argv)
{
    int st = floe_drop(c, argv[0]);
    if (st)
        return fail(c, st);
    printf("dropped %s\n", argv[0]);
    return 0;
}

/* A table partitioned over several floed: which shard this server holds,
 * or (a partitioned connection, whose figures are the sums) one line a server. */
static void print_shards(floe *c, const floe_table_info *t)
{
    if (t->shards)
        printf("shard: %u/%u (server list %016" PRIx64 ")\n", t->shard + 1, t->shards, t->shard_set);
    for (unsigned i = 0; floe_shards(c) > 1 && i < floe_shards(c); i++) {
        floe_table_info one;
        if (floe_stats(floe_shard(c, i), t->name, &one) != FLOE_OK)
            printf("shard %u (%s): %s\n", i + 1, floe_shard_name(c, i), floe_errstr(floe_shard(c, i)));
        else
            printf("shard %u (%s): keys=%" PRIu64 " slots=%" PRIu64 " memory=%" PRIu64 " fill=%.4f\n", i + 1,
                   floe_shard_name(c, i), one.keys, one.slots, one.memory_bytes, one.fill);
    }
}

static int cmd_stats(floe *c, const opts *o, int argc, char **argv)
{
    floe_table_info t;
    int st = floe_stats(c, argv[0], &t);
    if (st)
        return fail(c, st);
    if (o->json) {
        jw w = {0};
        json_table(&w, &t, true);
        return 0;
    }
    print_info(&t, true);
    print_shards(c, &t);
    /* where the table's batches spent their time (docs/PROTOCOL.md, StageTime) */
    for (unsigned i = 0; i < t.n_stages; i++) {
        const floe_stage_info *s = &t.stages[i];
        printf("stage %s: count=%" PRIu64 " keys=%" PRIu64 " seconds=%.6f", s->name, s->count, s->keys,
               (double)s->nanos / 1e9);
        if (s->keys)
            printf(" ns_per_key=%.2f", (double)s->nanos / (double)s->keys);
        printf("\n");
    }
    return 0;
}

static int cmd_snapshot(floe *c, const opts *o, int argc, char **argv)
{
    int st = floe_snapshot(c, argc ? argv[0] : NULL);
    if (st)
        return fail(c, st);
    printf("saved %s\n", argc ? argv[0] : "every table");
    return 0;
}

/* The kind and value width of a table, for commands that need them. */
static int table_shape(floe *c, const char *table, floe_table_info *t)
{
    int st = floe_stats(c, table, t);
    return st ? fail(c, st) : 0;
}

/* range, succ, pred, min and max on a table of another kind: the server's
 * status, in the command's own words (a min is a range of one key on the
 * wire; a TREE has no key width to check bounds against). */
static int ordered_only(const floe_table_info *t, const char *command)
{
    if (t->kind == FLOE_TABLE_ORDERED)
        return 0;
    fprintf(stderr, "floe: %s: %s is for ORDERED tables; table %s is a %s\n", floe_strerror(FLOE_ERR_UNSUPPORTED),
            command, t->name, kind_name(t->kind));
    return 1;
}

static void print_summary(const floe_counts *k)
{
    fflush(stdout); /* the answers first, then the tally */
    fprintf(stderr,
            "inserted %" PRIu64 ", present %" PRIu64 ", absent %" PRIu64 ", full %" PRIu64 ", erased %" PRIu64 "\n",
            k->inserted, k->present, k->absent, k->full, k->erased);
}

/* ---- insert, find, erase: keys (TREE: vectors) sent in parts ----------------------------------- */

/* Items of item_bytes each that fit in half of the server's max-frame
 * (32 MiB at most): the rest of the frame is room for the other fields. */
static size_t frame_items(floe *c, size_t item_bytes)
{
    uint64_t budget = floe_info(c)->max_frame / 2;
    if (!budget || budget > ((uint64_t)32 << 20))
        budget = (uint64_t)32 << 20;
    uint64_t n = budget / (item_bytes ? item_bytes : 1);
    return n ? (size_t)n : 1;
}

/* Items per request of insert, find, erase and get: as `load` sends them. */
static size_t part_size(floe *c, size_t item_bytes)
{
    size_t n = frame_items(c, item_bytes);
    return n < 65536 ? n : 65536;
}

typedef floe_call *send_part_fn(floe *c, void *ctx, size_t at, size_t n);
/* Prints the answers of items at..at+n; NULL, or why the reply is malformed. */
typedef const char *print_part_fn(void *ctx, floe_call *call, size_t at, size_t n);

/* Sends total items in requests of at most chunk, WINDOW of them in flight,
 * and prints the answers in order as they come back (the server answers
 * requests on one table in the order sent).  The first error stops the
 * sending; answers of the requests already out are still printed.  At
 * least one request goes out, so that an empty list still meets the
 * server's checks.  Returns the exit code. */
static int send_in_parts(floe *c, size_t total, size_t chunk, send_part_fn *send, print_part_fn *print, void *ctx,
                         const char *noun)
{
    struct part {
        floe_call *call;
        size_t at, n;
    } ring[WINDOW];
    size_t head = 0, count = 0, at = 0, answered = 0;
    bool sent_any = false;
    int err = FLOE_OK;
    char msg[512] = "";
    floe_counts sum = {0};
    while (count > 0 || (err == FLOE_OK && (at < total || !sent_any))) {
        if (err == FLOE_OK && (at < total || !sent_any) && count < WINDOW) {
            size_t n = total - at < chunk ? total - at : chunk;
            floe_call *call = send(c, ctx, at, n);
            sent_any = true;
            if (!call) {
                err = FLOE_ERR_IO;
                snprintf(msg, sizeof msg, "out of memory");
                continue;
            }
            ring[(head + count) % WINDOW] = (struct part){call, at, n};
            count++;
            at += n;
            continue;
        }
        struct part p = ring[head];
        head = (head + 1) % WINDOW;
        count--;
        int st = floe_wait(c, p.call);
        const char *why = st == FLOE_OK ? print(ctx, p.call, p.at, p.n) : floe_call_error(p.call);
        if (st == FLOE_OK && why)
            st = FLOE_ERR_PROTOCOL;
        if (st == FLOE_OK) {
            floe_counts k;
            floe_call_counts(p.call, &k);
            sum.inserted += k.inserted, sum.present += k.present, sum.absent += k.absent;
            sum.full += k.full, sum.erased += k.erased;
            answered += p.n;
        } else if (err == FLOE_OK) {
            err = st;
            if (total > p.n)
                snprintf(msg, sizeof msg, "%s (%s %zu..%zu of %zu; later ones not sent)", why, noun, p.at + 1,
                         p.at + p.n, total);
            else
                snprintf(msg, sizeof msg, "%s", why);
        }
        floe_call_free(p.call);
    }
    if (err == FLOE_OK || answered > 0)
        print_summary(&sum);
    if (err != FLOE_OK) {
        fprintf(stderr, "floe: %s%s%s\n", floe_strerror(err), msg[0] ? ": " : "", msg);
        return 1;
    }
    return 0;
}

typedef struct key_job {
    const char *table;
    const keylist *kl;
    int op; /* 0 insert, 1 find, 2 erase */
    bool map;
    unsigned vb;         /* MAP: value bytes */
    unsigned char *vals; /* a part's values, packed */
} key_job;

static floe_call *send_keys(floe *c, void *ctx, size_t at, size_t n)
{
    key_job *j = ctx;
    const uint64_t *keys = j->kl->keys + at;
    if (j->op == 0 && j->map) {
        for (size_t i = 0; i < n; i++)
            memcpy(j->vals + i * j->vb, &j->kl->values[at + i], j->vb);
        return floe_send_insert(c, j->table, keys, n, j->vals, n * j->vb, FLOE_OVERWRITE, NULL, NULL);
    }
    if (j->op == 0)
        return floe_send_insert(c, j->table, keys, n, NULL, 0, 0, NULL, NULL);
    if (j->op == 1)
        return floe_send_find(c, j->table, keys, n, j->map ? FLOE_WANT_VALUES : 0, NULL, NULL);
    return floe_send_erase(c, j->table, keys, n, NULL, NULL);
}

/* KEY ANSWER [VALUE] per key (MAP insert: the value before, or the new one
 * where INSERTED; MAP find: the stored value). */
static const char *print_keys(void *ctx, floe_call *call, size_t at, size_t n)
{
    key_job *j = ctx;
    size_t got, vgot;
    const uint8_t *res = floe_call_results(call, &got);
    const unsigned char *vals = floe_call_values(call, &vgot);
    const bool with_values = j->map && j->op != 2;
    if (got != n || (with_values && vgot != n * j->vb))
        return "the server's answer does not match the keys sent";
    for (size_t i = 0; i < n; i++) {
        printf("%" PRIu64 " %s", j->kl->keys[at + i], floe_answer_name(res[i]));
        if (with_values && res[i] != FLOE_ABSENT && res[i] != FLOE_FULL) {
            uint64_t v = 0;
            memcpy(&v, vals + i * j->vb, j->vb);
            printf(" %" PRIu64, v);
        }
        putchar('\n');
    }
    return NULL;
}

typedef struct vec_job {
    const floe_table_info *t;
    const veclist *vl;
    int op; /* 0 insert, 1 find */
} vec_job;

static floe_call *send_vecs(floe *c, void *ctx, size_t at, size_t n)
{
    vec_job *j = ctx;
    const uint32_t *v = j->vl->v ? j->vl->v + at * j->t->words : NULL;
    return j->op == 0 ? floe_send_insert_vectors(c, j->t->name, v, n, j->t->words, FLOE_WANT_IDS, NULL, NULL)
                      : floe_send_find_vectors(c, j->t->name, v, n, j->t->words, FLOE_WANT_IDS, NULL, NULL);
}

/* VECTOR ANSWER [ID] per vector. */
static const char *print_vecs(void *ctx, floe_call *call, size_t at, size_t n)
{
    vec_job *j = ctx;
    const unsigned words = j->t->words;
    size_t got, idb;
    const uint8_t *res = floe_call_results(call, &got);
    const unsigned char *ids = floe_call_ids(call, &idb);
    if (got != n || idb != n * 8)
        return "the server's answer does not match the vectors sent";
    for (size_t i = 0; i < n; i++) {
        print_vector(j->vl->v + (at + i) * words, words);
        printf(" %s", floe_answer_name(res[i]));
        if (res[i] == FLOE_INSERTED || res[i] == FLOE_PRESENT) {
            uint64_t id;
            memcpy(&id, ids + i * 8, 8);
            printf(" %" PRIu64, id);
        }
        putchar('\n');
    }
    return NULL;
}


/* Whether every key is below 2^key_bits of table t; if not, says which
 * (an argument the table cannot take is a usage error, as a malformed one). */
static int keys_fit(const keylist *kl, const floe_table_info *t)
{
    for (size_t i = 0; t->key_bits < 64 && i < kl->n; i++)
        if (kl->keys[i] >> t->key_bits) {
            fprintf(stderr,
                    "floe: ERR_INVALID: key %" PRIu64 " (key %zu of %zu) is not below 2^%u, the key width of table "
                    "%s; nothing was sent\n",
                    kl->keys[i], i + 1, kl->n, t->key_bits, t->name);
            return 1;
        }
    return 0;
}

static int key_command(floe *c, int argc, char **argv, int op)
{
    const char *table = argv[0];
    floe_table_info t;
    if (table_shape(c, table, &t))
        return 1;
    if (t.kind == FLOE_TABLE_TREE) {
        if (op == 2) {
            fprintf(stderr, "floe: ERR_UNSUPPORTED: table %s is a TREE: TREE tables do not erase\n", table);
            return 1;
        }
        veclist vl;
        if (read_vectors(argc - 1, argv + 1, &t, &vl))
            return EXIT_USAGE;
        vec_job j = {&t, &vl, op};
        int rc = send_in_parts(c, vl.n, part_size(c, (size_t)t.words * 4), send_vecs, print_vecs, &j, "vectors");
        free(vl.v);
        return rc;
    }
    const bool map = has_values(&t);
    keylist kl;
    if (read_keys(argc - 1, argv + 1, map && op == 0, &kl))
        return EXIT_USAGE;
    /* Every key is read and checked before the first request: a bad one
     * anywhere changes nothing, even when the keys go in several requests. */
    if (keys_fit(&kl, &t)) {
        free_keys(&kl);
        return EXIT_USAGE;
    }
    const unsigned vb = map ? t.value_bytes : 0;
    for (size_t i = 0; op == 0 && map && i < kl.n; i++) {
        if (!cli_value_fits(kl.values[i], vb)) {
            fprintf(stderr,
                    "floe: ERR_INVALID: value %" PRIu64
                    " (key %zu of %zu) does not fit the %u-byte values of table %s; "
                    "nothing was sent\n",
                    kl.values[i], i + 1, kl.n, vb, table);
            free_keys(&kl);
            return EXIT_USAGE;
        }
    }
    const size_t chunk = part_size(c, 8 + (op == 0 ? vb : 0));
    key_job j = {table, &kl, op, map, vb, NULL};
    if (op == 0 && map && !(j.vals = malloc(chunk * vb + 8))) {
        free_keys(&kl);
        return usage_error("out of memory");
    }
    int rc = send_in_parts(c, kl.n, chunk, send_keys, print_keys, &j, "keys");
    free(j.vals);
    free_keys(&kl);
    return rc;
}

static int cmd_insert(floe *c, const opts *o, int argc, char **argv)
{
    return key_command(c, argc, argv, 0);
}

static int cmd_find(floe *c, const opts *o, int argc, char **argv)
{
    return key_command(c, argc, argv, 1);
}

static int cmd_erase(floe *c, const opts *o, int argc, char **argv)
{
    return key_command(c, argc, argv, 2);
}

/* get_by_id: ID VECTOR (or ID ABSENT) per id. */
static int cmd_get(floe *c, const opts *o, int argc, char **argv)
{
    const char *table = argv[0];
    floe_table_info t;
    if (table_shape(c, table, &t))
        return 1;
    keylist kl;
    if (read_keys(argc - 1, argv + 1, false, &kl))
        return EXIT_USAGE;
    /* Not a TREE: ask anyway with a dummy width, and the server says why not. */
    const unsigned words = t.kind == FLOE_TABLE_TREE ? t.words : 1;
    /* the answer must fit in a frame too: words * 4 bytes per id */
    size_t chunk = part_size(c, (size_t)words * 4 > 8 ? (size_t)words * 4 : 8);
    if (chunk > kl.n)
        chunk = kl.n;
    uint8_t *res = malloc(chunk + 1);
    uint32_t *vecs = malloc(chunk * words * 4 + 4);
    if (!res || !vecs) {
        free(res);
        free(vecs);
        free_keys(&kl);
        return usage_error("out of memory");
    }
    floe_counts k = {0};
    int st = FLOE_OK;
    for (size_t at = 0; at < kl.n && st == FLOE_OK; at += chunk) {
        size_t n = kl.n - at < chunk ? kl.n - at : chunk;
        st = floe_get_by_id(c, table, kl.keys + at, n, words, res, vecs);
        for (size_t i = 0; st == FLOE_OK && i < n; i++) {
            printf("%" PRIu64 " ", kl.keys[at + i]);
            if (res[i] == FLOE_PRESENT)
                print_vector(vecs + i * words, words), k.present++;
            else
                fputs("ABSENT", stdout), k.absent++;
            putchar('\n');
        }
    }
    if (st == FLOE_OK && kl.n == 0) /* no ids: still let the server judge the table */
        st = floe_get_by_id(c, table, NULL, 0, words, NULL, NULL);
    if (st == FLOE_OK)
        print_summary(&k);
    free(res);
    free(vecs);
    free_keys(&kl);
    return st ? fail(c, st) : 0;
}

/* ---- load ---------------------------------------------------------------------------------------- */

typedef struct loader {
    floe_counts total;
    int status;
    char error[256];
    unsigned inflight;
} loader;

static void on_loaded(floe *c, floe_call *call, void *arg)
{
    (void)c;
    loader *ld = arg;
    floe_counts k;
    ld->inflight--;
    int st = floe_call_status(call);
    if (st != FLOE_OK && ld->status == FLOE_OK) {
        ld->status = st;
        snprintf(ld->error, sizeof ld->error, "%s", floe_call_error(call));
    }
    floe_call_counts(call, &k);
    ld->total.inserted += k.inserted;
    ld->total.present += k.present;
    ld->total.full += k.full;
}

/* The progress line: done of total bytes read (total 0: a stream of unknown
 * length; below 0: a stream that stopped short, no percentage). */
static void progress(double done, double total, uint64_t keys, double secs, bool final, const char *noun)
{
    if (!isatty(STDERR_FILENO) && !final)
        return;
    int width = 30, fill = total > 0 ? (int)(width * done / total) : total == 0 ? width : 0;
    if (fill > width)
        fill = width;
    char pct[16] = "    -";
    if (total >= 0)
        snprintf(pct, sizeof pct, "%5.1f%%", total > 0 ? 100.0 * done / total : 100.0);
    fprintf(stderr, "\r[%.*s%*s] %s %" PRIu64 " %s %.1f M %s/s%s", fill, "##############################", width - fill,
            "", pct, keys, noun, secs > 0 ? keys / secs / 1e6 : 0.0, noun, final ? "\n" : "");
}

static int cmd_load(floe *c, const opts *o, int argc, char **argv)
{
    const bool binary = o->binary;
    size_t batch = o->batch;
    const char *table = argv[0], *path = argv[1];
    floe_table_info t;
    if (table_shape(c, table, &t))
        return 1;
    bool map = has_values(&t), tree = t.kind == FLOE_TABLE_TREE;
    if (map && binary)
        return usage_error("load --binary is for tables of keys only (8-byte keys); load a %s with values from text "
                           "'KEY VALUE' lines",
                           kind_name(t.kind));
    const unsigned words = tree ? t.words : 0;
    const char *noun = tree ? "vectors" : "keys";
    const size_t frame_cap = frame_items(c, tree ? (size_t)words * 4 : 8 + (map ? t.value_bytes : 0));
    if (batch > frame_cap)
        batch = frame_cap;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, binary ? "rb" : "r");
    if (!f) {
        fprintf(stderr, "floe: cannot open %s: %s\n", path, strerror(errno));
        return 1;
    }
    const char *fname = f == stdin ? "stdin" : path; /* in messages */
    struct stat sb;
    const bool have_stat = fstat(fileno(f), &sb) == 0;
    if (have_stat && S_ISDIR(sb.st_mode)) {
        fclose(f);
        return usage_error("load: %s is a directory, not a file of %s", path, noun);
    }
    double total = have_stat && S_ISREG(sb.st_mode) ? (double)sb.st_size : 0;
    const size_t item = tree ? (size_t)words * 4 : 8; /* bytes of one key or vector in a --binary file */
    uint64_t *keys = malloc(batch * 8);
    unsigned char *vals = malloc(batch * 8);
    uint32_t *vecs = tree ? malloc(batch * words * 4) : NULL;
    if (!keys || !vals || (tree && !vecs)) {
        if (f != stdin)
            fclose(f);
        free(keys);
        free(vals);
        free(vecs);
        return usage_error("out of memory for batches of %zu %s", batch, noun);
    }
    loader ld = {.status = FLOE_OK};
    uint64_t sent = 0;
    double t0 = now(), last = 0;
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    int rc = 0;
    char stopped[CLI_MSG_MAX + 400] = ""; /* why the file was not read to its end */
    /* Each batch read is sent, also the keys before a bad line or a partial key: the load stops
     * there, with what went before it inserted (the docs' promise). */
    for (bool eof = false; !eof && ld.status == FLOE_OK;) {
        size_t n = 0;
        if (binary) {
            void *to = tree ? (void *)vecs : (void *)keys;
            const size_t got = fread(to, 1, batch * item, f);
            n = got / item;
            eof = got < batch * item;
            if (eof && ferror(f)) {
                snprintf(stopped, sizeof stopped, "reading %s: %s", fname, strerror(errno));
                rc = 1;
            } else if (got % item) {
                snprintf(stopped, sizeof stopped,
                         "%s ends with a partial %s: %zu bytes after the last whole one (of %zu bytes)", fname,
                         tree ? "vector" : "key", got % item, item);
                rc = EXIT_USAGE;
            }
        } else {
            while (n < batch) {
                ssize_t len = getline(&line, &cap, f);
                if (len < 0) {
                    eof = true;
                    if (ferror(f)) {
                        snprintf(stopped, sizeof stopped, "reading %s: %s", fname, strerror(errno));
                        rc = 1;
                    }
                    break;
                }
                lineno++;
                if (tree) {
                    char *p = cli_trim_line(line);
                    if (!*p)
                        continue;
                    char where[300], msg[CLI_MSG_MAX];
                    snprintf(where, sizeof where, "%s line %ld", fname, lineno);
                    if (cli_parse_vector(p, words, table, vecs + n * words, where, msg, sizeof msg)) {
                        snprintf(stopped, sizeof stopped, "%s", msg);
                        rc = EXIT_USAGE;
                        eof = true;
                        break;
                    }
                    n++;
                    continue;
                }
                uint64_t v = 0;
                const int got = cli_parse_load_line(line, map, &keys[n], &v);
                if (got == 0)
                    continue;
                if (got < 0)
                    snprintf(stopped, sizeof stopped, "%s line %ld: expected %s and nothing else", fname, lineno,
                             map ? "KEY VALUE (decimal or 0x-hex)" : "a key (decimal or 0x-hex)");
                else if (t.key_bits < 64 && keys[n] >> t.key_bits)
                    snprintf(stopped, sizeof stopped,
                             "%s line %ld: key %" PRIu64 " is not below 2^%u, the key width of %s", fname, lineno,
                             keys[n], t.key_bits, table);
                else if (map && !cli_value_fits(v, t.value_bytes))
                    snprintf(stopped, sizeof stopped,
                             "%s line %ld: value %" PRIu64 " does not fit the %u-byte values of %s", fname, lineno, v,
                             t.value_bytes, table);
                if (stopped[0]) {
                    rc = EXIT_USAGE;
                    eof = true;
                    break;
                }
                if (map)
                    memcpy(vals + n * t.value_bytes, &v, t.value_bytes);
                n++;
            }
        }
        if (binary && !tree)
            for (size_t i = 0; t.key_bits < 64 && i < n; i++)
                if (keys[i] >> t.key_bits) {
                    snprintf(stopped, sizeof stopped,
                             "%s: key %" PRIu64 " (key %" PRIu64 " of the file) is not below 2^%u, the key width of %s",
                             fname, keys[i], sent + i + 1, t.key_bits, table);
                    rc = EXIT_USAGE;
                    eof = true;
                    n = i;
                    break;
                }
        if (n) {
            while (ld.inflight >= WINDOW)
                if (floe_poll(c, -1) < 0)
                    break;
            ld.inflight++;
            if (tree)
                floe_send_insert_vectors(c, table, vecs, n, words, 0, on_loaded, &ld);
            else
                floe_send_insert(c, table, keys, n, map ? vals : NULL, map ? n * t.value_bytes : 0, 0, on_loaded, &ld);
            sent += n;
        }
        double el = now() - t0;
        if (el - last > 0.2) {
            progress(total > 0 ? (double)ftell(f) : 0, total, sent, el, false, noun);
            last = el;
        }
    }
    if (floe_wait_all(c) != FLOE_OK && ld.status == FLOE_OK) {
        ld.status = floe_error(c);
        snprintf(ld.error, sizeof ld.error, "%s", floe_errstr(c));
    }
    double secs = now() - t0;
    /* the bar ends where the reading did: 100% only for a file read whole and answered */
    const bool whole = rc == 0 && ld.status == FLOE_OK;
    progress(whole ? total : total > 0 ? (double)ftell(f) : 0, whole || total > 0 ? total : -1, sent, secs, true,
             noun);
    if (f != stdin)
        fclose(f);
    free(line);
    free(keys);
    free(vals);
    free(vecs);
    if (stopped[0])
        fprintf(stderr, "floe: %s\n", stopped);
    if (ld.status != FLOE_OK)
        fprintf(stderr, "floe: %s: %s\n", floe_strerror(ld.status), ld.error);
    if (!whole) { /* what went in before it stopped */
        fprintf(stderr,
                "floe: load stopped after %" PRIu64 " %s sent to %s: inserted %" PRIu64 ", present %" PRIu64
                ", full %" PRIu64 " (%s answered)\n",
                sent, noun, table, ld.total.inserted, ld.total.present, ld.total.full,
                ld.total.inserted + ld.total.present + ld.total.full == sent ? "every one" : "not every one");
        return ld.status != FLOE_OK ? 1 : rc;
    }
    printf("loaded %" PRIu64 " %s into %s in %.2f s (%.2f M %s/s): inserted %" PRIu64 ", present %" PRIu64
           ", full %" PRIu64 "\n",
           sent, noun, table, secs, secs > 0 ? sent / secs / 1e6 : 0.0, noun, ld.total.inserted, ld.total.present,
           ld.total.full);
    return ld.total.full ? 1 : 0;
}

/* Every vector of a TREE: ID VECTOR per line. */
static int dump_tree(floe *c, const floe_table_info *t)
{
    const unsigned words = t->words;
    size_t page = ((size_t)32 << 20) / ((size_t)words * 4 + 8); /* the server's own bound per reply */
    if (page > 65536)
        page = 65536;
    uint64_t *ids = malloc(page * 8);
    uint32_t *vecs = malloc(page * words * 4);
    if (!ids || !vecs) {
        free(ids);
        free(vecs);
        return usage_error("out of memory");
    }
    floe_cursor cur = {{0}, 0};
    int done = 0, st = FLOE_OK;
    while (!done) {
        size_t n;
        st = floe_scan_vectors(c, t->name, &cur, page, words, ids, vecs, &n, &done);
        if (st)
            break;
        for (size_t i = 0; i < n; i++) {
            printf("%" PRIu64 " ", ids[i]);
            print_vector(vecs + i * words, words);
            putchar('\n');
        }
    }
    free(ids);
    free(vecs);
    return st ? fail(c, st) : 0;
}

static int cmd_dump(floe *c, const opts *o, int argc, char **argv)
{
    const bool values = o->values;
    const char *table = argv[0];
    floe_table_info t;
    if (table_shape(c, table, &t))
        return 1;
    if (values && !has_values(&t))
        return usage_error("dump --values is for MAP tables and ORDERED tables with values; %s is a %s%s", table,
                           kind_name(t.kind), t.kind == FLOE_TABLE_ORDERED ? " of keys only" : "");
    if (t.kind == FLOE_TABLE_TREE)
        return dump_tree(c, &t);
    enum { PAGE = 65536 };
    uint64_t *keys = malloc(PAGE * 8);
    unsigned char *vals = malloc(PAGE * 8);
    floe_cursor cur = {{0}, 0};
    int done = 0, st = FLOE_OK;
    while (!done) {
        size_t n;
        st = floe_scan(c, table, &cur, PAGE, keys, values ? vals : NULL, t.value_bytes, &n, &done);
        if (st)
            break;
        for (size_t i = 0; i < n; i++) {
            if (values) {
                uint64_t v = 0;
                memcpy(&v, vals + i * t.value_bytes, t.value_bytes);
                printf("%" PRIu64 " %" PRIu64 "\n", keys[i], v);
            } else {
                printf("%" PRIu64 "\n", keys[i]);
            }
        }
    }
    free(keys);
    free(vals);
    return st ? fail(c, st) : 0;
}

/* ---- ORDERED tables: range, succ, pred, min, max --------------------------------------------- */

/* A key of the table given as an argument: 0, or the exit code. */
static int bound_arg(const char *text, const floe_table_info *t, const char *what, uint64_t *out)
{
    if (!cli_parse_u64(text, out))
        return usage_error("range: %s must be a key (decimal or 0x-hex), not '%s'", what, text);
    if (t->key_bits < 64 && *out >> t->key_bits)
        return usage_error("range: %s %" PRIu64 " is not below 2^%u, the key width of table %s", what, *out,
                           t->key_bits, t->name);
    return 0;
}

static void print_key_value(uint64_t key, const unsigned char *vals, size_t i, unsigned vb)
{
    printf("%" PRIu64, key);
    if (vals) {
        uint64_t v = 0;
        memcpy(&v, vals + i * vb, vb);
        printf(" %" PRIu64, v);
    }
    putchar('\n');
}

static int cmd_range(floe *c, const opts *o, int argc, char **argv)
{
    const char *table = argv[0];
    floe_table_info t;
    if (table_shape(c, table, &t) || ordered_only(&t, "range"))
        return 1;
    if (o->values && !has_values(&t))
        return usage_error("range --values is for ORDERED tables with values; %s has none", table);
    uint64_t lo, hi;
    int rc = bound_arg(argv[1], &t, "LO", &lo);
    if (!rc)
        rc = bound_arg(argv[2], &t, "HI", &hi);
    if (rc)
        return rc;
    if (lo > hi)
        return usage_error("range: LO %" PRIu64 " is above HI %" PRIu64 " (--desc walks [LO, HI] from HI down)", lo,
                           hi);
    const size_t page_max = frame_items(c, 8 + t.value_bytes);
    const size_t page = page_max < 65536 ? page_max : 65536;
    uint64_t *keys = malloc(page * 8);
    unsigned char *vals = malloc(page * 8 + 8);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return usage_error("out of memory");
    }
    floe_range_cursor cur;
    memset(&cur, 0, sizeof cur);
    uint64_t left = o->limit ? o->limit : UINT64_MAX;
    int done = 0, st = FLOE_OK;
    while (!done && left > 0) {
        size_t n, want = left < page ? (size_t)left : page;
        st = floe_range(c, table, lo, hi, o->desc ? FLOE_RANGE_DESC : 0, &cur, want, keys, o->values ? vals : NULL,
                        t.value_bytes, &n, &done);
        if (st)
            break;
        for (size_t i = 0; i < n; i++)
            print_key_value(keys[i], o->values ? vals : NULL, i, t.value_bytes);
        left -= n;
    }
    free(keys);
    free(vals);
    return st ? fail(c, st) : 0;
}

typedef struct nb_job {
    const char *table;
    const keylist *kl;
    bool pred, values;
    unsigned vb;
} nb_job;

static floe_call *send_neighbours(floe *c, void *ctx, size_t at, size_t n)
{
    nb_job *j = ctx;
    const unsigned flags = j->values ? FLOE_WANT_VALUES : 0;
    return j->pred ? floe_send_predecessor(c, j->table, j->kl->keys + at, n, flags, NULL, NULL)
                   : floe_send_successor(c, j->table, j->kl->keys + at, n, flags, NULL, NULL);
}

/* KEY NEIGHBOUR [VALUE], or KEY none. */
static const char *print_neighbours(void *ctx, floe_call *call, size_t at, size_t n)
{
    nb_job *j = ctx;
    size_t got, kb, vgot;
    const uint8_t *res = floe_call_results(call, &got);
    const unsigned char *found = floe_call_keys(call, &kb), *vals = floe_call_values(call, &vgot);
    if (got != n || kb != n * 8 || (j->values && vgot != n * j->vb))
        return "the server's answer does not match the keys sent";
    for (size_t i = 0; i < n; i++) {
        printf("%" PRIu64 " ", j->kl->keys[at + i]);
        if (res[i] != FLOE_PRESENT) {
            printf("none\n");
            continue;
        }
        uint64_t k;
        memcpy(&k, found + i * 8, 8);
        print_key_value(k, j->values ? vals : NULL, i, j->vb);
    }
    return NULL;
}

static int neighbours_command(floe *c, const opts *o, int argc, char **argv, bool pred)
{
    const char *table = argv[0];
    floe_table_info t;
    if (table_shape(c, table, &t) || ordered_only(&t, pred ? "pred" : "succ"))
        return 1;
    if (o->values && !has_values(&t))
        return usage_error("%s --values is for ORDERED tables with values; %s has none", pred ? "pred" : "succ", table);
    keylist kl;
    if (read_keys(argc - 1, argv + 1, false, &kl))
        return EXIT_USAGE;
    if (keys_fit(&kl, &t)) {
        free_keys(&kl);
        return EXIT_USAGE;
    }
    nb_job j = {table, &kl, pred, o->values, t.value_bytes};
    int rc = send_in_parts(c, kl.n, part_size(c, 16 + t.value_bytes), send_neighbours, print_neighbours, &j, "keys");
    free_keys(&kl);
    return rc;
}

static int cmd_succ(floe *c, const opts *o, int argc, char **argv)
{
    return neighbours_command(c, o, argc, argv, false);
}

static int cmd_pred(floe *c, const opts *o, int argc, char **argv)
{
    return neighbours_command(c, o, argc, argv, true);
}

static int bound_command(floe *c, const opts *o, const char *table, bool max)
{
    floe_table_info t;
    if (table_shape(c, table, &t) || ordered_only(&t, max ? "max" : "min"))
        return 1;
    if (o->values && !has_values(&t))
        return usage_error("%s --values is for ORDERED tables with values; %s has none", max ? "max" : "min", table);
    int found;
    uint64_t key;
    unsigned char v[8];
    int st = (max ? floe_max : floe_min)(c, table, &found, &key, o->values ? v : NULL, t.value_bytes);
    if (st)
        return fail(c, st);
    if (!found) {
        fprintf(stderr, "floe: table %s is empty\n", table);
        return 1;
    }
    print_key_value(key, o->values ? v : NULL, 0, t.value_bytes);
    return 0;
}

static int cmd_min(floe *c, const opts *o, int argc, char **argv)
{
    return bound_command(c, o, argv[0], false);
}

static int cmd_max(floe *c, const opts *o, int argc, char **argv)
{
    return bound_command(c, o, argv[0], true);
}

static const cmd CMDS[] = {
    {"ping", "check that the server answers, and how fast", "", "check that the server answers, and how fast", 0, 0, 0,
     cmd_ping},
    {"info", "the server: version, limits, uptime, counters by operation, tables", "[--json]",
     "the server: version, backend and limits (its hello reply), then build, uptime, GPU, connections, requests, "
     "keys and errors by operation, errors by status, bytes in and out, memory, the last snapshot and each table's "
     "keys, fill, memory and changes since its snapshot (a floed without the info operation: the hello reply only, "
     "and a note saying so)",
     G_JSON, 0, 0, cmd_info},
    {"tables", "list the tables with their sizes", "[--json]", "list the tables with their sizes", G_JSON, 0, 0,
     cmd_tables},
    {"create", "create a table (SET, MAP, TREE or ORDERED)",
     "NAME [--kind set|map|tree|ordered] [--key-bits N] [--value-bytes 0|4|8] [--words N] [--capacity N] "
     "[--memory SIZE] [--grow | --no-grow] [--max-fill F] [--parts N] [--backend cpu|gpu|auto]",
     "create a table (defaults: SET, 64-bit keys, capacity 1 Mi; MAP values 8 bytes). A SET or MAP grows with "
     "--grow (else FULL answers when it is full); a TREE grows unless --no-grow (then ids stay stable for its life). "
     "TREE: vectors of --words N 32-bit words (2..256), --memory bytes for its node and root tables (default: from "
     "--capacity; with growth, where it starts). ORDERED: keys kept in order for range, succ, pred, min, max and an "
     "ordered dump, with --value-bytes 4 or 8 values (default 0: keys only); it always grows. "
     "--parts N: the table in N parts over the server's GPUs, each part a whole table of its share of the keys "
     "(default: the server's choice: whole on the GPU with the most free memory, in parts over all of them when it "
     "fits on none; docs/OPERATIONS.md, \"Several GPUs\"). "
     "Sizes take K, M, G, T (powers of 1024)",
     G_CREATE, 1, 1, cmd_create},
    {"drop", "drop a table and everything in it", "NAME", "drop a table and everything in it", 0, 1, 1, cmd_drop},
    {"stats", "a table's figures", "NAME [--json]",
     "a table's figures: keys, fill per level, memory, bytes per key, where its batches spent their time (TREE: "
     "vectors, nodes, node fill, bytes per vector, compression, orphan nodes)",
     G_JSON, 1, 1, cmd_stats},
    {"insert", "find-or-put keys, from the arguments or stdin", "NAME [KEY... | KEY=VALUE... | VECTOR...]",
     "find-or-put keys (MAP: KEY=VALUE, upsert; TREE: vectors 1,2,3,... of exactly `words` words, answered "
     "VECTOR ANSWER ID); no keys: read them from stdin, one per line. Every key is checked before the first is "
     "sent; many keys go in requests of up to 64 Ki keys (fewer if the server's max-frame asks), answered in order",
     0, 1, -1, cmd_insert},
    {"find", "look keys up", "NAME [KEY... | VECTOR...]",
     "look keys up (MAP: with their values; TREE: vectors 1,2,3,..., with their ids); no keys: stdin", 0, 1, -1,
     cmd_find},
    {"erase", "erase keys", "NAME [KEY...]", "erase keys (not on a TREE); no keys: stdin", 0, 1, -1, cmd_erase},
    {"get", "TREE: the vectors of ids", "NAME [ID...]",
     "TREE: the vector of each id, ID 1,2,3,... per line (ID ABSENT for an id that names none); no ids: stdin", 0, 1,
     -1, cmd_get},
    {"load", "bulk insert from a file, with a progress bar", "NAME FILE [--binary] [--batch N]",
     "bulk insert from FILE (- for stdin): text, one key per line (MAP: KEY VALUE; TREE: a vector 1,2,3,...), or "
     "--binary raw little-endian u64 keys (TREE: `words` u32 words per vector); --batch keys per request (default "
     "64K, fewer if the server's max-frame asks), 4 in flight; shows progress and a summary; exits 1 if any key "
     "came back FULL; a bad line, a key wider than the table or a partial --binary key stops it there (exit 2), "
     "what came before it inserted and counted",
     G_LOAD, 2, 2, cmd_load},
    {"dump", "print every key", "NAME [--values]",
     "print every key (--values, of a MAP or an ORDERED table with values: KEY VALUE; TREE: ID VECTOR) one per "
     "line; an ORDERED table's in ascending order",
     G_DUMP, 1, 1, cmd_dump},
    {"range", "ORDERED: the keys in [LO, HI], in order", "NAME LO HI [--limit N] [--desc] [--values]",
     "ORDERED: the stored keys in [LO, HI] one per line, ascending (--desc: descending from HI), at most --limit N "
     "of them (default: all), with --values KEY VALUE; LO above HI is a usage error",
     G_DUMP | G_RANGE, 3, 3, cmd_range},
    {"succ", "ORDERED: the smallest stored key >= each key", "NAME [KEY...] [--values]",
     "ORDERED: for each key the smallest stored key >= it, KEY SUCCESSOR [VALUE] per line (KEY none where there is "
     "none); no keys: stdin",
     G_DUMP, 1, -1, cmd_succ},
    {"pred", "ORDERED: the largest stored key <= each key", "NAME [KEY...] [--values]",
     "ORDERED: for each key the largest stored key <= it, KEY PREDECESSOR [VALUE] per line (KEY none where there "
     "is none); no keys: stdin",
     G_DUMP, 1, -1, cmd_pred},
    {"min", "ORDERED: the smallest stored key", "NAME [--values]",
     "ORDERED: the smallest stored key (with --values, KEY VALUE); exit 1 with a message if the table is empty", G_DUMP,
     1, 1, cmd_min},
    {"max", "ORDERED: the largest stored key", "NAME [--values]",
     "ORDERED: the largest stored key (with --values, KEY VALUE); exit 1 with a message if the table is empty", G_DUMP,
     1, 1, cmd_max},
    {"snapshot", "save a table (or all) into the server's data-dir", "[NAME]",
     "save a table (or all) into the server's data-dir", 0, 0, 1, cmd_snapshot},
};
#define NCMDS (sizeof CMDS / sizeof CMDS[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: floe [-H HOST:PORT] [CONNECTION OPTIONS] COMMAND [ARGS] [COMMAND OPTIONS]\n"
               "       floe COMMAND --help | floe --help | floe --version\n\n"
               "The command-line client of floed. Keys are decimal or 0x-hex numbers below 2^key_bits of the\n"
               "table; a TREE table's keys are vectors of `words` 32-bit words, written 1,2,3,...\n\n"
               "Options:\n"
               "  -H, --host SERVER   the server: HOST:PORT, HOST (port 7450), floe://HOST:PORT[?token=T],\n"
               "                      floes://HOST:PORT (TLS) or [IPv6]:PORT (--server is the same; default\n"
               "                      $FLOE_SERVER, else " DEFAULT_SERVER "); a list floe://H1:P1,H2:P2,...\n"
               "                      is a table partitioned over those servers (docs/OPERATIONS.md)\n"
               "  -h, --help          this text\n"
               "  -V, --version       the version of floe and of the protocol it speaks\n"
               "Connection options (each also from its environment variable; flags win):\n");
    floe_getopt_help(f, 6, 22,
                     "give up on the whole command after SECONDS, connecting included unless --connect-timeout "
                     "is given (default 0: wait)");
    fprintf(f, "Options take their value as `--opt VALUE` or `--opt=VALUE`. A command's options may come before,\n"
               "between or after its arguments, and so may -H and the connection options; `--` ends the options\n"
               "(a table whose name starts with '-').\n\nCommands:\n");
    for (size_t i = 0; i < NCMDS; i++)
        fprintf(f, "  %-9s %s\n", CMDS[i].name, CMDS[i].summary);
    fprintf(f, "\n`floe COMMAND --help` shows a command's arguments and options. Exit code: 0 ok, 1 an error from\n"
               "the server or the connection (the message is on stderr), 2 a usage error.\n");
}

enum {
    O_JSON = 256,
    O_KIND,
    O_KEY_BITS,
    O_VALUE_BYTES,
    O_WORDS,
    O_CAPACITY,
    O_MEMORY,
    O_GROW,
    O_NO_GROW,
    O_MAX_FILL,
    O_PARTS,
    O_BACKEND,
    O_BINARY,
    O_BATCH,
    O_VALUES,
    O_LIMIT,
    O_DESC,
};

/* Besides these, both take libfloe's connection options (floe_getopt.h). */
static const struct option GLOBAL_OPTS[] = {
    {"host", required_argument, NULL, 'H'},
    {"server", required_argument, NULL, 'H'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static const struct option CMD_OPTS[] = {
    {"host", required_argument, NULL, 'H'},
    {"server", required_argument, NULL, 'H'},
    {"help", no_argument, NULL, 'h'},
    {"json", no_argument, NULL, O_JSON},
    {"kind", required_argument, NULL, O_KIND},
    {"key-bits", required_argument, NULL, O_KEY_BITS},
    {"value-bytes", required_argument, NULL, O_VALUE_BYTES},
    {"words", required_argument, NULL, O_WORDS},
    {"capacity", required_argument, NULL, O_CAPACITY},
    {"memory", required_argument, NULL, O_MEMORY},
    {"grow", no_argument, NULL, O_GROW},
    {"no-grow", no_argument, NULL, O_NO_GROW},
    {"max-fill", required_argument, NULL, O_MAX_FILL},
    {"parts", required_argument, NULL, O_PARTS},
    {"backend", required_argument, NULL, O_BACKEND},
    {"binary", no_argument, NULL, O_BINARY},
    {"batch", required_argument, NULL, O_BATCH},
    {"values", no_argument, NULL, O_VALUES},
    {"limit", required_argument, NULL, O_LIMIT},
    {"desc", no_argument, NULL, O_DESC},
    {NULL, 0, NULL, 0},
};

static unsigned group_of(int code)
{
    switch (code) {
    case O_JSON:
        return G_JSON;
    case O_BINARY:
    case O_BATCH:
        return G_LOAD;
    case O_VALUES:
        return G_DUMP;
    case O_LIMIT:
    case O_DESC:
        return G_RANGE;
    default:
        return code >= O_KIND && code <= O_BACKEND ? G_CREATE : 0;
    }
}

/* The failing option for getopt's '?' and ':' (with opterr 0). */
static const char *bad_option(char **argv, char *buf, size_t len)
{
    if (optopt && optopt < 256)
        snprintf(buf, len, "-%c", optopt);
    else
        snprintf(buf, len, "%s", argv[optind - 1]);
    return buf;
}

/* text in lines of at most 100 columns, broken at blanks (before a '['
 * where there is one: usage lines keep [--opt VALUE] whole), the lines
 * after the first indented. */
static void print_wrapped(const char *text, int indent)
{
    const char *p = text;
    while (*p) {
        int len = (int)strlen(p);
        if (len > 100 - indent) {
            len = 100 - indent;
            int at = len;
            while (at > 0 && !(p[at] == ' ' && p[at + 1] == '['))
                at--;
            if (at > 0)
                len = at;
            while (len > 0 && p[len] != ' ')
                len--;
            if (len == 0)
                len = (int)strcspn(p, " ");
        }
        printf("%*s%.*s\n", p == text ? 0 : indent, "", len, p);
        p += len;
        while (*p == ' ')
            p++;
    }
}

static void command_help(const cmd *cm)
{
    char line[512];
    snprintf(line, sizeof line, "usage: floe %s%s%s", cm->name, cm->args[0] ? " " : "", cm->args);
    print_wrapped(line, 12 + (int)strlen(cm->name));
    print_wrapped(cm->help, 0);
}

/* A command's options into *o; positional arguments end up from
 * argv[optind] on.  Returns -1 to go on, else the exit code. */
static int parse_command(const cmd *cm, int argc, char **argv, const struct option *cmd_opts, opts *o,
                         const char **server, floe_options *conn)
{
    o->def = (floe_table_def){.kind = FLOE_TABLE_SET, .key_bits = 64};
    o->batch = 65536;
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            command_help(cm); /* --help wins over anything wrong around it */
            return 0;
        }
    }
    char buf[160];
    int ch, li = -1;
    optind = 0; /* a fresh scan (glibc): argv[0] is the command */
    opterr = 0;
    while ((li = -1, ch = getopt_long(argc, argv, ":hH:", cmd_opts, &li)) != -1) {
        const char *a = optarg;
        uint64_t x;
        if (ch == '?')
            return usage_error("%s: unknown option '%s' (floe %s --help)", cm->name, bad_option(argv, buf, sizeof buf),
                               cm->name);
        if (ch == ':')
            return usage_error("%s: %s needs a value", cm->name, bad_option(argv, buf, sizeof buf));
        if (group_of(ch) && !(group_of(ch) & cm->groups))
            return usage_error("%s: --%s is not an option of %s (floe %s --help)", cm->name,
                               li >= 0 ? cmd_opts[li].name : "?", cm->name, cm->name);
        if (ch >= FLOE_GETOPT_CODE) {
            if (floe_getopt_set(conn, ch, a, buf, sizeof buf) != FLOE_OK)
                return usage_error("%s: --%s", cm->name, buf);
            continue;
        }
        switch (ch) {
        case 'H':
            *server = a;
            break;
        case O_JSON:
            o->json = true;
            break;
        case O_KIND:
            if (strcasecmp(a, "set") == 0)
                o->def.kind = FLOE_TABLE_SET;
            else if (strcasecmp(a, "map") == 0)
                o->def.kind = FLOE_TABLE_MAP;
            else if (strcasecmp(a, "tree") == 0)
                o->def.kind = FLOE_TABLE_TREE;
            else if (strcasecmp(a, "ordered") == 0)
                o->def.kind = FLOE_TABLE_ORDERED;
            else
                return usage_error("create: --kind is set, map, tree or ordered, not '%s'", a);
            break;
        case O_KEY_BITS:
            if (!cli_parse_u64(a, &x) || x < 1 || x > 64) /* 0 would read as "not given": 64 */
                return usage_error("create: --key-bits is 1..64, not '%s'", a);
            o->def.key_bits = (unsigned)x;
            o->key_bits_given = true;
            break;
        case O_VALUE_BYTES:
            if (!cli_parse_u64(a, &x) || (x != 0 && x != 4 && x != 8))
                return usage_error("create: --value-bytes is 4 or 8 (ORDERED: 0, 4 or 8), not '%s'", a);
            o->def.value_bytes = (unsigned)x; /* which of them the kind takes: the server says */
            o->value_bytes_given = true;
            break;
        case O_WORDS:
            if (!cli_parse_u64(a, &x) || x < FLOE_TREE_MIN_WORDS || x > FLOE_TREE_MAX_WORDS)
                return usage_error("create: --words is %u..%u, not '%s'", FLOE_TREE_MIN_WORDS, FLOE_TREE_MAX_WORDS, a);
            o->def.words = (unsigned)x;
            break;
        case O_CAPACITY:
            if (!cli_parse_u64(a, &x) && !floe_parse_size(a, &x))
                return usage_error("create: --capacity is a count of keys (100000, 0x1000, 16M), not '%s'", a);
            if (x == 0) /* it would read as "not given" */
                return usage_error("create: --capacity is at least 1 key (leave it out for the default)");
            o->def.capacity = x;
            break;
        case O_MEMORY:
            if (!floe_parse_size(a, &x))
                return usage_error("create: --memory is a size in bytes (512M, 4GiB), not '%s'", a);
            o->def.memory = x;
            break;
        case O_PARTS:
            if (!cli_parse_u64(a, &x) || x < 1 || x > 16)
                return usage_error("create: --parts is 1..16, not '%s'", a);
            o->def.parts = (unsigned)x;
            break;
        case O_GROW:
            o->def.grow = 1;
            break;
        case O_NO_GROW:
            o->def.no_grow = 1;
            break;
        case O_MAX_FILL: {
            char *end;
            errno = 0;
            double v = strtod(a, &end);
            if (!a[0] || *end || errno || !isfinite(v))
                return usage_error("create: --max-fill needs a number, not '%s'", a);
            if (!(v > 0.0 && v <= 1.0)) /* 0 would read as "not given" */
                return usage_error("create: --max-fill is in (0, 1], not '%s'", a);
            o->def.max_fill = v;
            break;
        }
        case O_BACKEND:
            o->def.backend = a;
            break;
        case O_BINARY:
            o->binary = true;
            break;
        case O_BATCH:
            if ((!cli_parse_u64(a, &x) && !floe_parse_size(a, &x)) || x < 1 || x > ((uint64_t)1 << 24))
                return usage_error("load: --batch is 1..16M keys per request, not '%s'", a);
            o->batch = (size_t)x;
            break;
        case O_VALUES:
            o->values = true;
            break;
        case O_LIMIT:
            if (!cli_parse_u64(a, &x) || x == 0)
                return usage_error("range: --limit is a count of keys, at least 1, not '%s'", a);
            o->limit = x;
            break;
        case O_DESC:
            o->desc = true;
            break;
        default:
            return usage_error("%s: unexpected option (floe %s --help)", cm->name, cm->name);
        }
    }
    int npos = argc - optind;
    if (npos < cm->min_args || (cm->max_args >= 0 && npos > cm->max_args)) {
        if (npos > cm->max_args && cm->max_args >= 0)
            return usage_error("%s: unexpected argument '%s'; usage: floe %s %s", cm->name, argv[optind + cm->max_args],
                               cm->name, cm->args);
        return usage_error("%s: missing arguments; usage: floe %s %s", cm->name, cm->name, cm->args);
    }
    if (o->def.grow && o->def.no_grow)
        return usage_error("create: --grow and --no-grow contradict each other: give one");
    if (o->def.kind == FLOE_TABLE_MAP && !o->value_bytes_given)
        o->def.value_bytes = 8;
    if (o->def.kind == FLOE_TABLE_TREE) {
        if (!o->def.words)
            return usage_error("create: a TREE needs --words N (32-bit words per vector, 2..256)");
        if (!o->key_bits_given)
            o->def.key_bits = 0; /* a TREE has no key_bits; given, the server says why not */
    }
    return -1;
}

/* --timeout bounds the whole command (curl's --max-time), connecting
 * included unless --connect-timeout is given: past it the process says so
 * and exits, whatever it was waiting for. */
static char timeout_msg[128];

static void on_timeout(int sig)
{
    (void)sig;
    ssize_t w = write(STDERR_FILENO, timeout_msg, strlen(timeout_msg));
    (void)w;
    _exit(1);
}

static void arm_timeout(int timeout_ms)
{
    if (timeout_ms <= 0)
        return;
    snprintf(timeout_msg, sizeof timeout_msg, "floe: %s: the command did not finish within --timeout %.3g s\n",
             floe_strerror(FLOE_ERR_TIMEOUT), timeout_ms / 1000.0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_timeout;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 0}, {timeout_ms / 1000, (timeout_ms % 1000) * 1000}};
    setitimer(ITIMER_REAL, &it, NULL);
}

int main(int argc, char **argv)
{
    const char *server = getenv("FLOE_SERVER");
    if (server && !server[0])
        server = NULL;
    char buf[400];
    floe_options conn;
    memset(&conn, 0, sizeof conn);
    if (floe_options_from_env(&conn, buf, sizeof buf) != FLOE_OK)
        return usage_error("%s", buf);
    struct option *global_opts = floe_getopt_table(GLOBAL_OPTS), *cmd_opts = floe_getopt_table(CMD_OPTS);
    if (!global_opts || !cmd_opts) {
        fprintf(stderr, "floe: out of memory\n");
        return 1;
    }
    int ch, rc = -1;
    opterr = 0;
    /* '+': stop at the command; its options are its own */
    while (rc < 0 && (ch = getopt_long(argc, argv, "+:H:hV", global_opts, NULL)) != -1) {
        switch (ch) {
        case 'H':
            server = optarg;
            break;
        case 'h':
            usage(stdout);
            rc = 0;
            break;
        case 'V':
            printf("floe %s (protocol %d)\n", FLOE_VERSION, FLOE_PROTOCOL_VERSION);
            rc = 0;
            break;
        case ':':
            rc = usage_error("%s needs a value", bad_option(argv, buf, sizeof buf));
            break;
        default:
            if (ch >= FLOE_GETOPT_CODE) {
                if (floe_getopt_set(&conn, ch, optarg, buf, sizeof buf) != FLOE_OK)
                    rc = usage_error("--%s", buf);
                break;
            }
            usage(stderr);
            rc = usage_error("unknown option '%s'", bad_option(argv, buf, sizeof buf));
        }
    }
    const cmd *cm = NULL;
    if (rc < 0 && optind >= argc) {
        usage(stderr);
        rc = EXIT_USAGE;
    }
    for (size_t k = 0; rc < 0 && k < NCMDS; k++)
        if (strcmp(argv[optind], CMDS[k].name) == 0)
            cm = &CMDS[k];
    if (rc < 0 && !cm)
        rc = usage_error("unknown command '%s' (floe --help lists them)", argv[optind]);
    opts o = {0};
    int sub_argc = argc - optind;
    char **sub_argv = argv + optind;
    if (rc < 0)
        rc = parse_command(cm, sub_argc, sub_argv, cmd_opts, &o, &server, &conn);
    free(global_opts);
    free(cmd_opts);
    if (rc >= 0)
        return rc;
    const int first = optind;
    const bool connect_own = conn.connect_timeout_ms != 0; /* --connect-timeout given: its own deadline */
    if (!connect_own)
        arm_timeout(conn.timeout_ms);
    floe *c;
    int st = floe_connect_opts(server ? server : DEFAULT_SERVER, &conn, &c);
    if (st != FLOE_OK) {
        fprintf(stderr, "floe: %s: %s\n", floe_strerror(st), floe_errstr(c));
        floe_close(c);
        /* ERR_INVALID before any byte is sent: the address or the options themselves (a
         * scheme, a port past 65535, a key without its certificate) */
        return st == FLOE_ERR_INVALID ? EXIT_USAGE : 1;
    }
    if (connect_own)
        arm_timeout(conn.timeout_ms);
    rc = cm->run(c, &o, sub_argc - first, sub_argv + first);
    floe_close(c);
    return rc;
}
