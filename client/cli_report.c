/*
 * cli_report.c - the CLI's commands about the server and its tables: ping,
 * info, tables, create, drop, stats, snapshot, and how it prints them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* ---- subcommands --------------------------------------------------------------------------------- */

int cmd_ping(floe *c, const opts *o, int argc, char **argv)
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

static void print_server_stats(FILE *f, const floe_server_stats *s)
{
    char a[64], b[64], c[64];
    uint64_t u = s->uptime_seconds;
    fprintf(
        f, "build: %s\nuptime: %" PRIu64 " s (%" PRIu64 "d %" PRIu64 "h %" PRIu64 "m %" PRIu64 "s)\npid: %" PRIu64 "\n",
        s->build, u, u / 86400, u / 3600 % 24, u / 60 % 60, u % 60, s->pid);
    fprintf(f, "gpu: %s\n", s->gpu[0] ? s->gpu : "none");
    if (s->gpu_memory_total)
        fprintf(f, "gpu-memory: %s used, %s free, %s total\n", human_bytes(s->gpu_memory_used, a, sizeof a),
                human_bytes(s->gpu_memory_free, b, sizeof b), human_bytes(s->gpu_memory_total, c, sizeof c));
    for (size_t i = 0; i < s->n_gpus; i++) {
        const floe_gpu_summary *g = &s->gpus[i];
        if (g->healthy)
            fprintf(f, "gpu %d: %s, ok, %s free of %s\n", g->device, g->name, human_bytes(g->memory_free, a, sizeof a),
                    human_bytes(g->memory_total, b, sizeof b));
        else
            fprintf(f, "gpu %d: %s, FAILED: %s (its tables answer ERR_UNAVAILABLE until floed restarts)\n", g->device,
                    g->name, g->error);
    }
    fprintf(f, "connections: %" PRIu64 " open, %" PRIu64 " accepted, %" PRIu64 " refused\n", s->connections,
            s->connections_total, s->connections_refused);
    fprintf(f, "traffic: %" PRIu64 " bytes in, %" PRIu64 " bytes out\n", s->bytes_in, s->bytes_out);
    fprintf(f, "rss: %s\n", human_bytes(s->rss_bytes, a, sizeof a));
    if (s->maxmemory)
        fprintf(f, "maxmemory: %s (%.1f%% used; writes are refused past it)\n", human_bytes(s->maxmemory, a, sizeof a),
                100.0 * (double)s->rss_bytes / (double)s->maxmemory);
    else
        fprintf(f, "maxmemory: none\n");
    if (s->maxmemory_gpu) {
        uint64_t most = 0; /* the fullest GPU's memory in use */
        for (size_t i = 0; i < s->n_gpus; i++)
            if (s->gpus[i].memory_total - s->gpus[i].memory_free > most)
                most = s->gpus[i].memory_total - s->gpus[i].memory_free;
        fprintf(f, "maxmemory-gpu: %s (%.1f%% in use on the fullest GPU; writes to GPU tables are refused past it)\n",
                human_bytes(s->maxmemory_gpu, a, sizeof a), 100.0 * (double)most / (double)s->maxmemory_gpu);
    }
    fprintf(f, "data-dir: %s\n", s->data_dir[0] ? s->data_dir : "(none: tables live in memory only)");
    if (s->metrics_address[0])
        fprintf(f, "metrics: http://%s/metrics\n", s->metrics_address);
    else
        fprintf(f, "metrics: off\n");
    fprintf(f, "last-snapshot: %s", when(s->last_snapshot_time, a, sizeof a));
    if (s->last_snapshot_status[0])
        fprintf(f, ": %s", s->last_snapshot_status);
    fputc('\n', f);
    fprintf(f, "requests:\n  %-12s %14s %16s %10s\n", "op", "requests", "keys", "errors");
    for (size_t i = 0; i < s->n_ops; i++)
        fprintf(f, "  %-12s %14" PRIu64 " %16" PRIu64 " %10" PRIu64 "\n", s->ops[i].op, s->ops[i].requests,
                s->ops[i].keys, s->ops[i].errors);
    fprintf(f, "errors:%s\n", s->n_errors ? "" : " none");
    for (size_t i = 0; i < s->n_errors; i++)
        fprintf(f, "  %-22s %10" PRIu64 "\n", s->errors[i].status, s->errors[i].count);
    fprintf(f, "tables:%s\n", s->n_tables ? "" : " none");
    for (size_t i = 0; i < s->n_tables; i++) {
        const floe_table_summary *t = &s->tables[i];
        fprintf(f, "  %-24s %-4s keys=%-12" PRIu64 " fill=%.4f memory=%s changes=%" PRIu64 " backend=%s snapshot=%s\n",
                t->name, kind_name(t->kind), t->keys, t->fill, human_bytes(t->memory_bytes, a, sizeof a), t->changes,
                t->backend, when(t->last_snapshot_time, b, sizeof b));
    }
}

/* Which section of `floe info SECTION` each line's key is in (as redis-cli's INFO sections). */
static const struct {
    const char *key, *section;
} INFO_KEYS[] = {
    {"server", "server"},
    {"protocol", "server"},
    {"backend", "server"},
    {"max-frame", "server"},
    {"max-batch-keys", "server"},
    {"max-inflight", "server"},
    {"build", "server"},
    {"uptime", "server"},
    {"pid", "server"},
    {"metrics", "server"},
    {"info", "server"},
    {"gpu", "gpu"},
    {"connections", "clients"},
    {"rss", "memory"},
    {"maxmemory", "memory"},
    {"data-dir", "persistence"},
    {"last-snapshot", "persistence"},
    {"traffic", "stats"},
    {"requests", "stats"},
    {"errors", "stats"},
    {"tables", "tables"},
};

static const char *const INFO_SECTIONS[] = {"server", "clients", "memory", "persistence",
                                            "stats",  "gpu",     "tables", NULL};

/* The lines of text (`key: value`, and the indented lines after one) whose key is in section. */
static void print_section(const char *text, const char *section)
{
    bool in = false;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        const size_t n = end ? (size_t)(end - line) + 1 : strlen(line);
        if (line[0] != ' ') { /* a key's line: its section decides, for the indented lines too */
            const size_t klen = strcspn(line, ":\n");
            in = false;
            for (size_t k = 0; k < sizeof INFO_KEYS / sizeof INFO_KEYS[0]; k++)
                if (strlen(INFO_KEYS[k].key) == klen && strncmp(INFO_KEYS[k].key, line, klen) == 0)
                    in = strcmp(INFO_KEYS[k].section, section) == 0;
        }
        if (in)
            fwrite(line, 1, n, stdout);
        line += n;
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
    jw_u64(w, "maxmemory", s->maxmemory);
    jw_u64(w, "maxmemory_gpu", s->maxmemory_gpu);
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
        /* a section: the lines of its keys (and the indented lines under them) */
        char *text = NULL;
        size_t len = 0;
        FILE *f = o->section ? open_memstream(&text, &len) : stdout;
        if (!f) {
            floe_server_stats_free(s);
            return fail(c, FLOE_ERR_IO);
        }
        fprintf(f,
                "server: %s\nprotocol: %u\nbackend: %s\nmax-frame: %" PRIu64 " bytes\nmax-batch-keys: %" PRIu64
                "\nmax-inflight: %u\n",
                i->server, i->version, i->backend, i->max_frame, i->max_batch_keys, i->max_inflight);
        if (s)
            print_server_stats(f, s);
        else
            fprintf(f, "info: not available (%s): the figures above are the hello reply's\n", why);
        if (o->section) {
            fclose(f);
            print_section(text, o->section);
            free(text);
        }
    }
    floe_server_stats_free(s);
    return 0;
}

/* Each server's info: one, or every server of a list in turn (a
 * partitioned connection has no info of its own). */
int cmd_info(floe *c, const opts *given, int argc, char **argv)
{
    opts mine = *given, *o = &mine;
    if (argc) {
        size_t k = 0;
        while (INFO_SECTIONS[k] && strcasecmp(INFO_SECTIONS[k], argv[0]) != 0)
            k++;
        if (!INFO_SECTIONS[k])
            return usage_error("info: no section '%s': server, clients, memory, persistence, stats, gpu or tables",
                               argv[0]);
        if (o->json)
            return usage_error("info: --json prints every section; leave out '%s'", argv[0]);
        mine.section = INFO_SECTIONS[k];
    }
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

/* An exploring table's open set (stats of one table). */
static void print_explore(const floe_table_info *t)
{
    if (t->explore.on)
        printf("explore: %" PRIu64 " states found in %u levels, %" PRIu64 " open, %" PRIu64 " in %" PRIu64
               " claims out%s\n",
               t->explore.states, t->explore.levels, t->explore.open, t->explore.claimed, t->explore.claims,
               t->explore.done ? "; done" : "");
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
    print_explore(t);
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
    if (t->kind == FLOE_TABLE_MAP || t->kind == FLOE_TABLE_ORDERED || t->kind == FLOE_TABLE_STATIC)
        printf("value_bytes: %u\n", t->value_bytes);
    if (t->kind == FLOE_TABLE_STATIC)
        printf("frozen: %s\n", t->frozen ? "yes" : "no (filling: floe freeze builds it)");
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
    print_explore(t);
}

/* An exploring table's run level by level (floe_explore_levels), for `floe stats`. */
typedef struct run_levels {
    uint64_t *sizes;
    size_t n;
    uint64_t bytes;
} run_levels;

/* The run's figures below the explore line: its open set's memory and each level's size. */
static void print_levels(const floe_table_info *t, const run_levels *lv)
{
    printf("explore_bytes: %" PRIu64 " (%s memory: %.2f bytes a state)\nlevel_sizes:", lv->bytes,
           t->explore.memory[0] ? t->explore.memory : "host",
           t->explore.states ? (double)lv->bytes / (double)t->explore.states : 0.0);
    for (size_t d = 0; d < lv->n; d++)
        printf(" %" PRIu64, lv->sizes[d]);
    printf("\n");
}

/* A table as a JSON object: the figures of `floe stats`, under the same
 * names (TREE: its own; levels are the root table's); run: an exploring
 * table's levels, or NULL. */
static void json_table(jw *w, const floe_table_info *t, bool stages, const run_levels *run)
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
        if (t->kind == FLOE_TABLE_MAP || t->kind == FLOE_TABLE_ORDERED || t->kind == FLOE_TABLE_STATIC)
            jw_u64(w, "value_bytes", t->value_bytes);
        if (t->kind == FLOE_TABLE_STATIC)
            jw_bool(w, "frozen", t->frozen);
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
    if (t->explore.on) {
        jw_open(w, "explore", '{');
        jw_u64(w, "states", t->explore.states);
        jw_u64(w, "open", t->explore.open);
        jw_u64(w, "claimed", t->explore.claimed);
        jw_u64(w, "claims", t->explore.claims);
        jw_u64(w, "levels", t->explore.levels);
        jw_bool(w, "done", t->explore.done);
        jw_str(w, "memory", t->explore.memory[0] ? t->explore.memory : "host");
        if (run) {
            jw_u64(w, "bytes", run->bytes);
            jw_open(w, "level_sizes", '[');
            for (size_t d = 0; d < run->n; d++)
                jw_u64(w, NULL, run->sizes[d]);
            jw_close(w, ']');
        }
        jw_close(w, '}');
    }
    jw_close(w, '}');
}

int cmd_tables(floe *c, const opts *o, int argc, char **argv)
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
            json_table(&w, &t[i], false, NULL);
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

int cmd_create(floe *c, const opts *o, int argc, char **argv)
{
    floe_table_def d = o->def;
    d.name = argv[0];
    int st = floe_create(c, &d);
    if (st)
        return fail(c, st);
    printf("created %s\n", d.name);
    return 0;
}

int cmd_drop(floe *c, const opts *o, int argc, char **argv)
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

int cmd_stats(floe *c, const opts *o, int argc, char **argv)
{
    floe_table_info t;
    int st = floe_stats(c, argv[0], &t);
    if (st)
        return fail(c, st);
    run_levels lv = {NULL, 0, 0};
    if (t.explore.on && (st = floe_explore_levels(c, argv[0], &lv.sizes, &lv.n, &lv.bytes)) != FLOE_OK)
        return fail(c, st);
    if (o->json) {
        jw w = {0};
        json_table(&w, &t, true, t.explore.on ? &lv : NULL);
        free(lv.sizes);
        return 0;
    }
    print_info(&t, true);
    if (t.explore.on)
        print_levels(&t, &lv);
    free(lv.sizes);
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

int cmd_snapshot(floe *c, const opts *o, int argc, char **argv)
{
    int st = floe_snapshot(c, argc ? argv[0] : NULL);
    if (st)
        return fail(c, st);
    printf("saved %s\n", argc ? argv[0] : "every table");
    return 0;
}

/* Keys a page of freeze --from: a scan's and an insert's. */
#define FROM_PAGE 65536

/* freeze NAME --from TABLE: NAME created as a STATIC table of TABLE's
 * shape and filled with its keys and values, a page at a time. */
static int fill_from(floe *c, const char *name, const char *from)
{
    floe_table_info src;
    int st = floe_stats(c, from, &src);
    if (st)
        return fail(c, st);
    if (src.kind != FLOE_TABLE_SET && src.kind != FLOE_TABLE_MAP && src.kind != FLOE_TABLE_STATIC) {
        fprintf(stderr,
                "floe: freeze --from: table %s is a %s; a STATIC table is filled from a SET, MAP or STATIC "
                "table\n",
                from, kind_name(src.kind));
        return 1;
    }
    const unsigned vb = has_values(&src) ? src.value_bytes : 0;
    floe_table_def d = {.name = name,
                        .kind = FLOE_TABLE_STATIC,
                        .key_bits = src.key_bits,
                        .value_bytes = vb,
                        .capacity = src.keys ? src.keys : 1,
                        .grow = 1};
    if ((st = floe_create(c, &d)))
        return fail(c, st);
    uint64_t *keys = malloc(FROM_PAGE * sizeof *keys);
    unsigned char *values = vb ? malloc((size_t)FROM_PAGE * vb) : NULL;
    uint8_t *res = malloc(FROM_PAGE);
    if (!keys || !res || (vb && !values)) {
        free(keys), free(values), free(res);
        fprintf(stderr, "floe: out of memory\n");
        return 1;
    }
    floe_cursor cur = {0};
    int done = 0;
    uint64_t copied = 0;
    while (!done && st == FLOE_OK) {
        size_t n = 0;
        st = floe_scan(c, from, &cur, FROM_PAGE, keys, values, vb, &n, &done);
        if (st == FLOE_OK && n)
            st = vb ? floe_insert_values(c, name, keys, values, n, vb, 0, res, NULL, NULL)
                    : floe_insert(c, name, keys, n, res, NULL);
        copied += n;
    }
    free(keys), free(values), free(res);
    if (st)
        return fail(c, st);
    fprintf(stderr, "floe: %s filled with %" PRIu64 " keys of %s\n", name, copied, from);
    return 0;
}

int cmd_freeze(floe *c, const opts *o, int argc, char **argv)
{
    (void)argc;
    int rc = o->from ? fill_from(c, argv[0], o->from) : 0;
    if (rc)
        return rc;
    int st = floe_freeze(c, argv[0]);
    floe_table_info t;
    if (st == FLOE_OK)
        st = floe_stats(c, argv[0], &t);
    if (st)
        return fail(c, st);
    printf("frozen %s: %" PRIu64 " keys, fill %.4f, %.3f bytes a key\n", argv[0], t.keys, t.fill, t.bytes_per_key);
    return 0;
}

int cmd_shutdown(floe *c, const opts *o, int argc, char **argv)
{
    (void)argc, (void)argv;
    int st = floe_shutdown(c, o->nosave);
    if (st)
        return fail(c, st);
    printf("%s is shutting down%s\n", floe_info(c)->server[0] ? floe_info(c)->server : "the server",
           o->nosave ? " without saving" : "");
    return 0;
}

/* config get [PATTERN]: each server's settings, NAME VALUE a line (as its config file writes them). */
static int config_get(floe *c, const opts *o, const char *pattern)
{
    const unsigned shards = floe_shards(c);
    jw w = {0};
    if (o->json) {
        jw_open(&w, NULL, '{');
        jw_open(&w, "servers", '[');
    }
    size_t matched = 0;
    for (unsigned i = 0; i < shards; i++) {
        floe *s = floe_shard(c, i);
        floe_setting *set;
        size_t n;
        char file[1024];
        int st = floe_config_get(s, pattern, &set, &n, file, sizeof file);
        if (st)
            return fail(s, st);
        matched += n;
        if (o->json) {
            jw_open(&w, NULL, '{');
            jw_str(&w, "server", floe_shard_name(c, i) ? floe_shard_name(c, i) : floe_info(c)->server);
            jw_str(&w, "file", file);
            jw_open(&w, "settings", '[');
            for (size_t k = 0; k < n; k++) {
                jw_open(&w, NULL, '{');
                jw_str(&w, "name", set[k].name);
                jw_str(&w, "value", set[k].value);
                jw_bool(&w, "live", set[k].live);
                jw_close(&w, '}');
            }
            jw_close(&w, ']');
            jw_close(&w, '}');
        } else {
            if (shards > 1)
                printf("# server %u of %u (%s)\n", i + 1, shards, floe_shard_name(c, i));
            for (size_t k = 0; k < n; k++)
                printf("%s %s\n", set[k].name, set[k].value);
        }
        free(set);
    }
    if (o->json) {
        jw_close(&w, ']');
        jw_close(&w, '}');
    }
    if (matched == 0 && pattern) {
        fprintf(stderr, "floe: no setting matches '%s' (floe config get lists them all)\n", pattern);
        return 1;
    }
    return 0;
}

int cmd_config(floe *c, const opts *o, int argc, char **argv)
{
    const char *what = argv[0];
    if (!strcmp(what, "get")) {
        if (argc > 2)
            return usage_error("config get takes one pattern at most, got %d words", argc - 1);
        return config_get(c, o, argc == 2 ? argv[1] : NULL);
    }
    if (!strcmp(what, "set")) {
        if (argc != 3)
            return usage_error("config set takes a setting and its value: config set NAME VALUE");
        int st = floe_config_set(c, argv[1], argv[2]);
        if (st)
            return fail(c, st);
        printf("%s set to %s\n", argv[1], argv[2]);
        return 0;
    }
    if (!strcmp(what, "rewrite")) {
        if (argc != 1)
            return usage_error("config rewrite takes nothing more");
        int st = floe_config_rewrite(c);
        if (st)
            return fail(c, st);
        printf("the config file holds the settings in force\n");
        return 0;
    }
    return usage_error("config: get, set or rewrite, got '%s'", what);
}

/* The kind and value width of a table, for commands that need them. */
int table_shape(floe *c, const char *table, floe_table_info *t)
{
    int st = floe_stats(c, table, t);
    return st ? fail(c, st) : 0;
}

/* range, succ, pred, min and max on a table of another kind: the server's
 * status, in the command's own words (a min is a range of one key on the
 * wire; a TREE has no key width to check bounds against). */
int ordered_only(const floe_table_info *t, const char *command)
{
    if (t->kind == FLOE_TABLE_ORDERED)
        return 0;
    fprintf(stderr, "floe: %s: %s is for ORDERED tables; table %s is a %s\n", floe_strerror(FLOE_ERR_UNSUPPORTED),
            command, t->name, kind_name(t->kind));
    return 1;
}

void print_summary(const floe_counts *k)
{
    fflush(stdout); /* the answers first, then the tally */
    fprintf(stderr,
            "inserted %" PRIu64 ", present %" PRIu64 ", absent %" PRIu64 ", full %" PRIu64 ", erased %" PRIu64 "\n",
            k->inserted, k->present, k->absent, k->full, k->erased);
}
