/*
 * metrics.c - counters, the info operation and /metrics (see metrics.h).
 */
#define _GNU_SOURCE
#include "metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "backend_gpu.h"
#include "batcher.h"
#include "conn.h"
#include "log.h"
#include "registry.h"
#include "server.h"

#define STATUSES 16 /* above every floe_status */
/* Latency buckets: log-spaced 1, 2.5, 5 steps from 10 us to 10 s (upper bounds, ns). */
static const uint64_t BOUNDS_NS[] = {10000,     25000,      50000,      100000,     250000,     500000,    1000000,
                                     2500000,   5000000,    10000000,   25000000,   50000000,   100000000, 250000000,
                                     500000000, 1000000000, 2500000000, 5000000000, 10000000000};
#define BUCKETS (sizeof BOUNDS_NS / sizeof BOUNDS_NS[0]) /* and one more: +Inf */
/* Scrapes gathering table stats at once; more get 503 (each one queues a
 * STATS behind every table's batches). */
#define MAX_SCRAPES 8

static const char *const OP_NAMES[METRICS_OPS] = {"unknown",     "hello",     "ping",     "create_table", "drop_table",
                                                  "list_tables", "insert",    "find",     "erase",        "stats",
                                                  "scan",        "get_by_id", "snapshot", "info",         "range"};

/* One io thread's counters (written by it alone, read by anyone). */
typedef struct shard {
    _Atomic uint64_t requests[METRICS_OPS], keys[METRICS_OPS];
    _Atomic uint64_t errors[METRICS_OPS][STATUSES];
    _Atomic uint64_t hist[METRICS_OPS][BUCKETS + 1];
    _Atomic uint64_t hist_ns[METRICS_OPS];
    _Atomic uint64_t bytes_in, bytes_out, conns, refused;
} __attribute__((aligned(64))) shard;

typedef struct gather gather;

struct metrics {
    server *srv;
    shard *shards;
    size_t nshards;
    uint64_t t_start; /* floe_now_ns */
    int64_t start_unix;
    char build[200];
    pthread_mutex_t lock; /* the fields below */
    bool snap_any, snap_ok;
    int64_t snap_time;
    char snap_why[256];
    /* the HTTP server on its own thread */
    bool running, stopped;
    pthread_t thread;
    struct event_base *base;
    struct evhttp *http;
    struct event *wake;
    gather *done; /* scrapes whose tables have all answered */
    unsigned scrapes;
    char address[300]; /* "127.0.0.1:9450", or "" */
};

/* ---- counting ------------------------------------------------------------------------------ */

static inline void bump(_Atomic uint64_t *a, uint64_t v)
{
    atomic_fetch_add_explicit(a, v, memory_order_relaxed);
}

static inline uint64_t get(_Atomic uint64_t *a)
{
    return atomic_load_explicit(a, memory_order_relaxed);
}

static shard *shard_of(metrics *m, size_t i)
{
    return &m->shards[i < m->nshards ? i : m->nshards - 1];
}

const char *metrics_op_name(int op)
{
    return op >= 0 && op < METRICS_OPS ? OP_NAMES[op] : "unknown";
}

int metrics_op_of_request(Floe__V1__Request__OpCase op_case)
{
    switch (op_case) {
    case FLOE__V1__REQUEST__OP_HELLO:
        return METRICS_OP_HELLO;
    case FLOE__V1__REQUEST__OP_PING:
        return METRICS_OP_PING;
    case FLOE__V1__REQUEST__OP_CREATE_TABLE:
        return METRICS_OP_CREATE_TABLE;
    case FLOE__V1__REQUEST__OP_DROP_TABLE:
        return METRICS_OP_DROP_TABLE;
    case FLOE__V1__REQUEST__OP_LIST_TABLES:
        return METRICS_OP_LIST_TABLES;
    case FLOE__V1__REQUEST__OP_INSERT:
        return METRICS_OP_INSERT;
    case FLOE__V1__REQUEST__OP_FIND:
        return METRICS_OP_FIND;
    case FLOE__V1__REQUEST__OP_ERASE:
        return METRICS_OP_ERASE;
    case FLOE__V1__REQUEST__OP_STATS:
        return METRICS_OP_STATS;
    case FLOE__V1__REQUEST__OP_SCAN:
        return METRICS_OP_SCAN;
    case FLOE__V1__REQUEST__OP_GET_BY_ID:
        return METRICS_OP_GET_BY_ID;
    case FLOE__V1__REQUEST__OP_SNAPSHOT:
        return METRICS_OP_SNAPSHOT;
    case FLOE__V1__REQUEST__OP_INFO:
        return METRICS_OP_INFO;
    case FLOE__V1__REQUEST__OP_RANGE:
        return METRICS_OP_RANGE;
    default:
        return METRICS_OP_UNKNOWN;
    }
}

int metrics_op_of_item(int item_op)
{
    switch (item_op) {
    case FLOE_OP_INSERT:
        return METRICS_OP_INSERT;
    case FLOE_OP_FIND:
        return METRICS_OP_FIND;
    case FLOE_OP_ERASE:
        return METRICS_OP_ERASE;
    case FLOE_OP_GET:
        return METRICS_OP_GET_BY_ID;
    case FLOE_OP_SCAN:
        return METRICS_OP_SCAN;
    case FLOE_OP_STATS:
        return METRICS_OP_STATS;
    case FLOE_OP_SAVE:
    case FLOE_OP_COPY:
        return METRICS_OP_SNAPSHOT;
    case ITEM_DRAIN:
        return METRICS_OP_DROP_TABLE;
    default:
        return METRICS_OP_UNKNOWN;
    }
}

void metrics_request(metrics *m, size_t shard_index, int op, size_t frame_bytes)
{
    if (!m)
        return;
    shard *s = shard_of(m, shard_index);
    if (frame_bytes)
        bump(&s->bytes_in, frame_bytes);
    if (op >= 0 && op < METRICS_OPS)
        bump(&s->requests[op], 1);
}

void metrics_connection(metrics *m, size_t shard_index, bool refused)
{
    if (!m)
        return;
    shard *s = shard_of(m, shard_index);
    bump(refused ? &s->refused : &s->conns, 1);
}

void metrics_answered(metrics *m, size_t shard_index, int op, floe_status st, uint64_t keys, uint64_t t_parse,
                      size_t written)
{
    if (!m)
        return;
    shard *s = shard_of(m, shard_index);
    if (op < 0 || op >= METRICS_OPS)
        op = METRICS_OP_UNKNOWN;
    if (st != FLOE_OK)
        bump(&s->errors[op][(unsigned)st < STATUSES ? (unsigned)st : STATUSES - 1], 1);
    if (keys)
        bump(&s->keys[op], keys);
    if (!written)
        return;
    bump(&s->bytes_out, written);
    if (!t_parse)
        return;
    const uint64_t ns = floe_now_ns() - t_parse;
    size_t b = 0;
    while (b < BUCKETS && ns > BOUNDS_NS[b])
        b++;
    bump(&s->hist[op][b], 1);
    bump(&s->hist_ns[op], ns);
}

void metrics_answer_of(const frame *f, metrics_answer *a)
{
    if (f->item) { /* a key operation's answer, packed by the io thread: always OK */
        a->op = metrics_op_of_item(f->item->op);
        a->status = FLOE_OK;
        a->keys = f->item->n;
        a->t_parse = f->item->t_parse;
    } else {
        a->op = f->req_op;
        a->status = f->status;
        a->keys = 0;
        a->t_parse = f->t_parse;
    }
}

void metrics_snapshot_done(metrics *m, int64_t unix_time, bool ok, const char *why)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    m->snap_any = true;
    m->snap_ok = ok;
    m->snap_time = unix_time;
    snprintf(m->snap_why, sizeof m->snap_why, "%s", ok ? "ok" : why && why[0] ? why : "failed");
    pthread_mutex_unlock(&m->lock);
}

/* ---- a view of everything but the tables ------------------------------------------------- */

typedef struct view {
    uint64_t conns_now, conns, refused, bytes_in, bytes_out;
    uint64_t requests[METRICS_OPS], keys[METRICS_OPS];
    uint64_t errors[METRICS_OPS][STATUSES];
    uint64_t hist[METRICS_OPS][BUCKETS + 1], hist_ns[METRICS_OPS];
    uint64_t uptime_ns, rss;
    bool gpu;
    uint64_t gpu_total, gpu_free;
    bool snap_any, snap_ok;
    int64_t snap_time;
    char snap_why[256];
} view;

static uint64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size, resident;
    int ok = f && fscanf(f, "%llu %llu", &size, &resident) == 2;
    if (f)
        fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return ok && page > 0 ? (uint64_t)resident * (uint64_t)page : 0;
}

static void take_view(metrics *m, view *v)
{
    memset(v, 0, sizeof *v);
    for (size_t i = 0; i < m->nshards; i++) {
        shard *s = &m->shards[i];
        for (int op = 0; op < METRICS_OPS; op++) {
            v->requests[op] += get(&s->requests[op]);
            v->keys[op] += get(&s->keys[op]);
            for (int st = 0; st < STATUSES; st++)
                v->errors[op][st] += get(&s->errors[op][st]);
            for (size_t b = 0; b <= BUCKETS; b++)
                v->hist[op][b] += get(&s->hist[op][b]);
            v->hist_ns[op] += get(&s->hist_ns[op]);
        }
        v->bytes_in += get(&s->bytes_in);
        v->bytes_out += get(&s->bytes_out);
        v->conns += get(&s->conns);
        v->refused += get(&s->refused);
    }
    const int open = atomic_load(&m->srv->nconns);
    v->conns_now = open > 0 ? (uint64_t)open : 0;
    v->uptime_ns = floe_now_ns() - m->t_start;
    v->rss = rss_bytes();
    v->gpu = m->srv->gpu != NULL;
    for (int i = 0; v->gpu && i < m->srv->ngpus; i++) { /* summed over the devices floed uses */
        uint64_t f, t;
        v->gpu = floe_gpu_meminfo(m->srv->gpu_ids[i], &f, &t) == 0;
        v->gpu_free += f;
        v->gpu_total += t;
    }
    pthread_mutex_lock(&m->lock);
    v->snap_any = m->snap_any;
    v->snap_ok = m->snap_ok;
    v->snap_time = m->snap_time;
    memcpy(v->snap_why, m->snap_why, sizeof v->snap_why);
    pthread_mutex_unlock(&m->lock);
}

/* ---- gathering every table's stats ------------------------------------------------------ */

struct gather {
    metrics *m;
    view v;
    uint64_t *changes; /* per table (the multi's index), from its batcher */
    int64_t *last_snapshot;
    struct evhttp_request *req; /* a scrape */
    multi *mu;                  /* once every table answered */
    gather *next;
};

static void gather_free(gather *g)
{
    if (!g)
        return;
    free(g->changes);
    free(g->last_snapshot);
    free(g);
}

/* Sends a STATS item to every table's batcher, with g behind one multi whose
 * last part calls done (on whichever thread answers last, maybe this one).
 * Once it returns 0, g and the multi belong to done; -1: nothing was sent. */
static int gather_tables(metrics *m, struct conn *c, uint64_t id, gather *g, void (*done)(multi *))
{
    size_t n;
    table_entry **all = registry_list(&m->srv->reg, &n);
    multi *mu = all ? multi_new(c, id, FLOE_OP_STATS, n) : NULL;
    g->changes = floe_calloc(n + 1, sizeof *g->changes);
    g->last_snapshot = floe_calloc(n + 1, sizeof *g->last_snapshot);
    if (!mu || !g->changes || !g->last_snapshot) {
        if (mu)
            multi_free(mu);
        for (size_t i = 0; all && i < n; i++)
            entry_unref(all[i]);
        free(all);
        return -1;
    }
    mu->done = done;
    mu->arg = g;
    for (size_t i = 0; i < n; i++) { /* before any part can finish the multi */
        const batcher *bt = &all[i]->bt;
        g->changes[i] = atomic_load(&bt->changes) - atomic_load(&bt->saved_changes);
        g->last_snapshot[i] = atomic_load(&bt->saved_at);
    }
    for (size_t i = 0; i < n; i++) {
        item *it = item_new(c, id, FLOE_OP_STATS, NULL);
        if (it) {
            it->multi = mu;
            it->multi_index = i;
        }
        if (!it || batcher_submit(&all[i]->bt, it) != FLOE_OK) {
            item_free(it);
            multi_part_done(mu, i, FLOE_ERR_NO_TABLE, "dropped meanwhile", NULL);
        }
    }
    if (n == 0)
        multi_part_done(mu, 0, FLOE_OK, NULL, NULL);
    for (size_t i = 0; i < n; i++)
        entry_unref(all[i]);
    free(all);
    return 0;
}

/* ---- info ------------------------------------------------------------------------------- */

static const char *status_name(int st)
{
    const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(&floe__v1__status__descriptor, st);
    return v ? v->name : "ERR_UNKNOWN";
}

static const char *default_backend(server *srv)
{
    floe_backend *be = srv->cpu;
    floe_errinfo ignored;
    char want[sizeof srv->cfg.backend];
    server_backend_for(srv, server_default_backend(srv, want), &be, &ignored); /* SIGHUP may change it */
    return floe_backend_name(be);
}

static frame *info_reply(const gather *g, const multi *mu)
{
    metrics *m = g->m;
    server *srv = m->srv;
    const view *v = &g->v;
    Floe__V1__InfoReply ir = FLOE__V1__INFO_REPLY__INIT;
    char version[64];
    snprintf(version, sizeof version, "floed %s", FLOE_VERSION);
    ir.version = version;
    ir.build = m->build;
    ir.uptime_seconds = v->uptime_ns / 1000000000u;
    ir.pid = (uint64_t)getpid();
    ir.backend = (char *)default_backend(srv);
    ir.gpu = srv->gpu_name;
    if (v->gpu) {
        ir.gpu_memory_total = v->gpu_total;
        ir.gpu_memory_free = v->gpu_free;
        ir.gpu_memory_used = v->gpu_total - v->gpu_free;
    }
    ir.connections = v->conns_now;
    ir.connections_total = v->conns;
    ir.connections_refused = v->refused;
    Floe__V1__OpCounters ops[METRICS_OPS], *opp[METRICS_OPS];
    uint64_t by_status[STATUSES] = {0};
    for (int op = 0; op < METRICS_OPS; op++) {
        floe__v1__op_counters__init(&ops[op]);
        ops[op].op = (char *)OP_NAMES[op];
        ops[op].requests = v->requests[op];
        ops[op].keys = v->keys[op];
        for (int st = 0; st < STATUSES; st++) {
            ops[op].errors += v->errors[op][st];
            by_status[st] += v->errors[op][st];
        }
        opp[op] = &ops[op];
    }
    ir.n_ops = METRICS_OPS;
    ir.ops = opp;
    Floe__V1__StatusCount sc[STATUSES], *scp[STATUSES];
    for (int st = 1; st < STATUSES; st++) {
        if (!by_status[st])
            continue;
        floe__v1__status_count__init(&sc[ir.n_errors]);
        sc[ir.n_errors].status = (char *)status_name(st);
        sc[ir.n_errors].count = by_status[st];
        scp[ir.n_errors] = &sc[ir.n_errors];
        ir.n_errors++;
    }
    ir.errors = scp;
    ir.bytes_in = v->bytes_in;
    ir.bytes_out = v->bytes_out;
    ir.rss_bytes = v->rss;
    ir.last_snapshot_time = v->snap_any ? v->snap_time : 0;
    ir.last_snapshot_status = v->snap_any ? (char *)v->snap_why : "";
    ir.data_dir = srv->cfg.data_dir;
    ir.metrics_address = m->address;
    Floe__V1__TableInfo *ti = floe_calloc(mu->n + 1, sizeof *ti);
    Floe__V1__TableInfo **tip = floe_calloc(mu->n + 1, sizeof *tip);
    frame *f = NULL;
    if (ti && tip) {
        for (size_t i = 0; i < mu->n; i++) {
            if (!mu->have[i])
                continue; /* dropped meanwhile */
            const floe_table_stats *s = &mu->stats[i];
            Floe__V1__TableInfo *t = &ti[ir.n_tables];
            floe__v1__table_info__init(t);
            t->name = (char *)s->spec.name;
            t->kind = (Floe__V1__TableKind)s->spec.kind;
            t->backend = (char *)s->backend;
            t->keys = s->keys;
            t->fill = s->fill;
            t->memory_bytes = s->memory_bytes;
            t->changes = g->changes[i];
            t->last_snapshot_time = g->last_snapshot[i];
            tip[ir.n_tables++] = t;
        }
        ir.tables = tip;
        Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
        r.id = mu->id;
        r.body_case = FLOE__V1__RESPONSE__BODY_INFO;
        r.info = &ir;
        f = reply_pack(&r);
    }
    free(ti);
    free(tip);
    return f ? f : reply_error(mu->id, FLOE_ERR_INTERNAL, "out of memory building the info reply");
}

static void info_done(multi *mu)
{
    gather *g = mu->arg;
    frame *f = info_reply(g, mu);
    metrics_tag(f, METRICS_OP_INFO, mu->t_parse);
    conn_deliver(mu->c, f); /* releases the request's hold on the connection */
    gather_free(g);
    multi_free(mu);
}

void metrics_handle_info(struct conn *c, uint64_t id)
{
    metrics *m = c->srv->metrics;
    conn_ref(c); /* held until the answer is delivered, like any request in flight */
    c->inflight++;
    gather *g = floe_calloc(1, sizeof *g);
    if (g) {
        g->m = m;
        take_view(m, &g->v);
        if (gather_tables(m, c, id, g, info_done) == 0)
            return;
        gather_free(g);
    }
    frame *f = reply_error(id, FLOE_ERR_INTERNAL, "out of memory gathering info");
    metrics_tag(f, METRICS_OP_INFO, c->t_frame);
    conn_deliver(c, f);
}

/* ---- Prometheus text --------------------------------------------------------------------- */

/* A label value: backslash, double quote and newline escaped. */
static void add_label(struct evbuffer *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            evbuffer_add(b, "\\\\", 2);
        else if (*s == '"')
            evbuffer_add(b, "\\\"", 2);
        else if (*s == '\n')
            evbuffer_add(b, "\\n", 2);
        else
            evbuffer_add(b, s, 1);
    }
}

static void family(struct evbuffer *b, const char *name, const char *type, const char *help)
{
    evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample_u(struct evbuffer *b, const char *name, uint64_t value)
{
    evbuffer_add_printf(b, "%s %llu\n", name, (unsigned long long)value);
}

/* name{label="value"} v, value escaped */
static void sample_l(struct evbuffer *b, const char *name, const char *label, const char *lv, double value)
{
    evbuffer_add_printf(b, "%s{%s=\"", name, label);
    add_label(b, lv);
    evbuffer_add_printf(b, "\"} %.17g\n", value);
}

static void render(struct evbuffer *b, const gather *g, const multi *mu)
{
    metrics *m = g->m;
    server *srv = m->srv;
    const view *v = &g->v;

    family(b, "floe_build_info", "gauge", "floed's version, build and GPU; the value is 1.");
    evbuffer_add_printf(b, "floe_build_info{version=\"%s\",build=\"", FLOE_VERSION);
    add_label(b, m->build);
    evbuffer_add_printf(b, "\",gpu=\"");
    add_label(b, srv->gpu_name);
    evbuffer_add_printf(b, "\",backend=\"%s\"} 1\n", default_backend(srv));
    family(b, "floe_start_time_seconds", "gauge", "Unix time floed started.");
    evbuffer_add_printf(b, "floe_start_time_seconds %lld\n", (long long)m->start_unix);
    family(b, "floe_uptime_seconds", "gauge", "Seconds since floed started.");
    evbuffer_add_printf(b, "floe_uptime_seconds %.3f\n", (double)v->uptime_ns / 1e9);

    family(b, "floe_connections_open", "gauge", "Client connections open now.");
    sample_u(b, "floe_connections_open", v->conns_now);
    family(b, "floe_connections_total", "counter", "Client connections accepted.");
    sample_u(b, "floe_connections_total", v->conns);
    family(b, "floe_connections_refused_total", "counter", "Connections refused at max-connections.");
    sample_u(b, "floe_connections_refused_total", v->refused);

    family(b, "floe_requests_total", "counter", "Requests by operation (unknown: frames that do not parse).");
    for (int op = 0; op < METRICS_OPS; op++)
        evbuffer_add_printf(b, "floe_requests_total{op=\"%s\"} %llu\n", OP_NAMES[op],
                            (unsigned long long)v->requests[op]);
    family(b, "floe_keys_total", "counter", "Keys (TREE: vectors; get_by_id: ids) answered, by operation.");
    static const int KEY_OPS[] = {METRICS_OP_INSERT, METRICS_OP_FIND, METRICS_OP_ERASE, METRICS_OP_GET_BY_ID};
    for (size_t k = 0; k < sizeof KEY_OPS / sizeof KEY_OPS[0]; k++)
        evbuffer_add_printf(b, "floe_keys_total{op=\"%s\"} %llu\n", OP_NAMES[KEY_OPS[k]],
                            (unsigned long long)v->keys[KEY_OPS[k]]);
    family(b, "floe_errors_total", "counter", "Error responses by operation and status.");
    for (int op = 0; op < METRICS_OPS; op++)
        for (int st = 1; st < STATUSES; st++)
            if (v->errors[op][st])
                evbuffer_add_printf(b, "floe_errors_total{op=\"%s\",status=\"%s\"} %llu\n", OP_NAMES[op],
                                    status_name(st), (unsigned long long)v->errors[op][st]);

    family(b, "floe_request_duration_seconds", "histogram",
           "From the start of parsing a request to its response written to the connection, by operation.");
    for (int op = 0; op < METRICS_OPS; op++) {
        uint64_t cum = 0;
        for (size_t k = 0; k <= BUCKETS; k++)
            cum += v->hist[op][k];
        if (!cum)
            continue; /* an operation not seen yet */
        cum = 0;
        for (size_t k = 0; k < BUCKETS; k++) {
            cum += v->hist[op][k];
            evbuffer_add_printf(b, "floe_request_duration_seconds_bucket{op=\"%s\",le=\"%g\"} %llu\n", OP_NAMES[op],
                                (double)BOUNDS_NS[k] / 1e9, (unsigned long long)cum);
        }
        cum += v->hist[op][BUCKETS];
        evbuffer_add_printf(b, "floe_request_duration_seconds_bucket{op=\"%s\",le=\"+Inf\"} %llu\n", OP_NAMES[op],
                            (unsigned long long)cum);
        evbuffer_add_printf(b, "floe_request_duration_seconds_sum{op=\"%s\"} %.9f\n", OP_NAMES[op],
                            (double)v->hist_ns[op] / 1e9);
        evbuffer_add_printf(b, "floe_request_duration_seconds_count{op=\"%s\"} %llu\n", OP_NAMES[op],
                            (unsigned long long)cum);
    }

    family(b, "floe_bytes_received_total", "counter", "Bytes of request frames read.");
    sample_u(b, "floe_bytes_received_total", v->bytes_in);
    family(b, "floe_bytes_sent_total", "counter", "Bytes of response frames written.");
    sample_u(b, "floe_bytes_sent_total", v->bytes_out);
    family(b, "floe_process_resident_memory_bytes", "gauge", "Resident memory of floed.");
    sample_u(b, "floe_process_resident_memory_bytes", v->rss);
    if (v->gpu) {
        family(b, "floe_gpu_memory_total_bytes", "gauge", "Memory of the GPUs floed uses (summed).");
        sample_u(b, "floe_gpu_memory_total_bytes", v->gpu_total);
        family(b, "floe_gpu_memory_used_bytes", "gauge", "GPU memory in use (by every process).");
        sample_u(b, "floe_gpu_memory_used_bytes", v->gpu_total - v->gpu_free);
        family(b, "floe_gpu_memory_free_bytes", "gauge", "GPU memory free.");
        sample_u(b, "floe_gpu_memory_free_bytes", v->gpu_free);
    }
    family(b, "floe_last_snapshot_timestamp_seconds", "gauge", "Unix time of the last snapshot (0: none yet).");
    evbuffer_add_printf(b, "floe_last_snapshot_timestamp_seconds %lld\n", v->snap_any ? (long long)v->snap_time : 0);
    family(b, "floe_last_snapshot_success", "gauge",
           "1 if the last snapshot succeeded (or none was taken yet), else 0.");
    evbuffer_add_printf(b, "floe_last_snapshot_success %d\n", !v->snap_any || v->snap_ok);

    size_t ntables = 0;
    for (size_t i = 0; i < mu->n; i++)
        ntables += mu->have[i];
    family(b, "floe_tables", "gauge", "Tables served.");
    sample_u(b, "floe_tables", ntables);
    static const struct {
        const char *name, *type, *help;
    } T[] = {
        {"floe_table_info", "gauge", "A table's kind and backend; the value is 1."},
        {"floe_table_keys", "gauge", "Live keys (TREE: vectors) of a table."},
        {"floe_table_fill", "gauge", "Fill of a table: (keys + tombstones) / slots."},
        {"floe_table_memory_bytes", "gauge", "Memory of a table (host or GPU, as its backend)."},
        {"floe_table_changes_since_snapshot", "gauge", "Keys inserted or erased since the table's last snapshot."},
        {"floe_table_last_snapshot_timestamp_seconds", "gauge", "Unix time of the table's last snapshot (0: none)."},
    };
    for (size_t k = 0; k < sizeof T / sizeof T[0]; k++) {
        family(b, T[k].name, T[k].type, T[k].help);
        for (size_t i = 0; i < mu->n; i++) {
            if (!mu->have[i])
                continue;
            const floe_table_stats *s = &mu->stats[i];
            switch (k) {
            case 0:
                evbuffer_add_printf(b, "floe_table_info{table=\"");
                add_label(b, s->spec.name);
                evbuffer_add_printf(b, "\",kind=\"%s\",backend=\"", floe_kind_name(s->spec.kind));
                add_label(b, s->backend);
                evbuffer_add_printf(b, "\"} 1\n");
                break;
            case 1:
                sample_l(b, T[k].name, "table", s->spec.name, (double)s->keys);
                break;
            case 2:
                sample_l(b, T[k].name, "table", s->spec.name, s->fill);
                break;
            case 3:
                sample_l(b, T[k].name, "table", s->spec.name, (double)s->memory_bytes);
                break;
            case 4:
                sample_l(b, T[k].name, "table", s->spec.name, (double)g->changes[i]);
                break;
            default:
                sample_l(b, T[k].name, "table", s->spec.name, (double)g->last_snapshot[i]);
                break;
            }
        }
    }
}

/* ---- the HTTP server ---------------------------------------------------------------------- */

/* Any thread: every table answered a scrape; the metrics thread replies. */
static void scrape_done(multi *mu)
{
    gather *g = mu->arg;
    metrics *m = g->m;
    g->mu = mu;
    pthread_mutex_lock(&m->lock);
    if (m->stopped) { /* the HTTP server is gone, and the request with it */
        pthread_mutex_unlock(&m->lock);
        gather_free(g);
        multi_free(mu);
        return;
    }
    g->next = m->done;
    m->done = g;
    event_active(m->wake, EV_READ, 0); /* under the lock: metrics_stop frees wake only after stopped is set */
    pthread_mutex_unlock(&m->lock);
}

/* Metrics thread: reply to the scrapes whose tables have answered. */
static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    metrics *m = arg;
    pthread_mutex_lock(&m->lock);
    gather *list = m->done;
    m->done = NULL;
    pthread_mutex_unlock(&m->lock);
    while (list) {
        gather *g = list;
        list = g->next;
        struct evbuffer *b = evbuffer_new();
        if (b) {
            render(b, g, g->mu);
            evhttp_add_header(evhttp_request_get_output_headers(g->req), "Content-Type",
                              "text/plain; version=0.0.4; charset=utf-8");
            /* libevent 2.1 would send a body after HEAD too */
            const bool head = evhttp_request_get_command(g->req) == EVHTTP_REQ_HEAD;
            evhttp_send_reply(g->req, HTTP_OK, "OK", head ? NULL : b);
            evbuffer_free(b);
        } else {
            evhttp_send_error(g->req, HTTP_INTERNAL, "out of memory");
        }
        m->scrapes--;
        multi_free(g->mu);
        gather_free(g);
    }
}

static void on_request(struct evhttp_request *req, void *arg)
{
    metrics *m = arg;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    if (!path || strcmp(path, "/metrics") != 0) {
        evhttp_send_error(req, HTTP_NOTFOUND, "Not Found"); /* floed serves /metrics only */
        return;
    }
    if (m->scrapes >= MAX_SCRAPES) {
        evhttp_send_error(req, HTTP_SERVUNAVAIL, "too many scrapes at once");
        return;
    }
    gather *g = floe_calloc(1, sizeof *g);
    if (g) {
        g->m = m;
        g->req = req;
        take_view(m, &g->v);
        m->scrapes++;
        if (gather_tables(m, NULL, 0, g, scrape_done) == 0)
            return; /* answered by on_wake */
        m->scrapes--;
        gather_free(g);
    }
    evhttp_send_error(req, HTTP_INTERNAL, "out of memory");
}

static void *metrics_main(void *arg)
{
    metrics *m = arg;
    pthread_setname_np(pthread_self(), "floed-metrics");
    event_base_loop(m->base, EVLOOP_NO_EXIT_ON_EMPTY);
    return NULL;
}

/* A listening socket on host (an address, or a name that resolves) and
 * port; -1 with why.  Resolved here rather than by evhttp, whose failures
 * go to libevent's own log without a reason. */
static evutil_socket_t listen_on(const char *host, unsigned port, char *why, size_t len)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res = NULL;
    char service[16];
    snprintf(service, sizeof service, "%u", port);
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0) {
        snprintf(why, len, "%s", gai_strerror(rc));
        return -1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 64) != 0) {
        snprintf(why, len, "%s", strerror(errno));
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

/* "127.0.0.1:9450" or "[::1]:9450" of a bound socket. */
static void address_of(evutil_socket_t fd, char *out, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char ip[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET6) {
            const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof ip);
            port = ntohs(s6->sin6_port);
            snprintf(out, len, "[%s]:%u", ip, port);
            return;
        }
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof ip);
        port = ntohs(s4->sin_port);
    }
    snprintf(out, len, "%s:%u", ip, port);
}

/* Out of descriptors the listening socket stays readable: without a pause
 * the metrics thread would spin on it (conn.c's listeners do the same). */
static void on_accept_resume(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    evconnlistener_enable(arg);
}

/* (arg is evhttp's, not ours: the listener itself carries what is needed) */
static void on_accept_error(struct evconnlistener *l, void *arg)
{
    (void)arg;
    LOG_LIMITED(LOG_WARN, "metrics: accept: %s; not accepting for 0.1 s", strerror(EVUTIL_SOCKET_ERROR()));
    evconnlistener_disable(l);
    const struct timeval pause = {0, 100000};
    event_base_once(evconnlistener_get_base(l), -1, EV_TIMEOUT, on_accept_resume, l, &pause);
}

int metrics_start(metrics *m)
{
    const floed_config *cfg = &m->srv->cfg;
    if (!cfg->metrics_port)
        return 0;
    m->base = event_base_new();
    m->http = m->base ? evhttp_new(m->base) : NULL;
    m->wake = m->base ? event_new(m->base, -1, 0, on_wake, m) : NULL;
    if (!m->http || !m->wake) {
        log_error("cannot set up the metrics HTTP server");
        return -1;
    }
    evhttp_set_allowed_methods(m->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
    evhttp_set_timeout(m->http, 30);
    evhttp_set_max_headers_size(m->http, 16384);
    evhttp_set_max_body_size(m->http, 4096);
    evhttp_set_gencb(m->http, on_request, m);
    char why[256];
    evutil_socket_t fd = listen_on(cfg->metrics_bind, (unsigned)cfg->metrics_port, why, sizeof why);
    struct evhttp_bound_socket *bs = fd >= 0 ? evhttp_accept_socket_with_handle(m->http, fd) : NULL;
    if (!bs) {
        if (fd >= 0) {
            snprintf(why, sizeof why, "libevent refused the socket");
            evutil_closesocket(fd);
        }
        log_error("cannot listen for metrics on %s port %llu: %s", cfg->metrics_bind,
                  (unsigned long long)cfg->metrics_port, why);
        return -1;
    }
    evconnlistener_set_error_cb(evhttp_bound_socket_get_listener(bs), on_accept_error);
    address_of(fd, m->address, sizeof m->address);
    if (pthread_create(&m->thread, NULL, metrics_main, m) != 0) {
        log_error("cannot start the metrics thread");
        m->address[0] = '\0';
        return -1;
    }
    m->running = true;
    log_info("metrics on http://%s/metrics", m->address);
    return 0;
}

void metrics_stop(metrics *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    m->stopped = true;
    gather *list = m->done;
    m->done = NULL;
    pthread_mutex_unlock(&m->lock);
    if (m->running) {
        event_base_loopbreak(m->base);
        pthread_join(m->thread, NULL);
        m->running = false;
    }
    while (list) { /* gathered, not replied: their requests go with the server */
        gather *g = list;
        list = g->next;
        multi_free(g->mu);
        gather_free(g);
    }
    if (m->http)
        evhttp_free(m->http);
    if (m->wake)
        event_free(m->wake);
    if (m->base)
        event_base_free(m->base);
    m->http = NULL;
    m->wake = NULL;
    m->base = NULL;
}

/* ---- life ------------------------------------------------------------------------------------ */

metrics *metrics_new(server *srv)
{
    metrics *m = floe_calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->srv = srv;
    m->nshards = (size_t)srv->cfg.io_threads + 1;
    m->shards = floe_aligned_alloc(64, m->nshards * sizeof *m->shards);
    if (!m->shards) {
        free(m);
        return NULL;
    }
    memset(m->shards, 0, m->nshards * sizeof *m->shards);
    pthread_mutex_init(&m->lock, NULL);
    m->t_start = floe_now_ns();
    m->start_unix = (int64_t)time(NULL);
    snprintf(m->build, sizeof m->build, "%s, built %s %s, %s",
#ifdef __clang__
             __VERSION__,
#else
             "gcc " __VERSION__,
#endif
             __DATE__, __TIME__, floe_gpu_built() ? "GPU build" : "GPU=0");
    return m;
}

void metrics_free(metrics *m)
{
    if (!m)
        return;
    metrics_stop(m);
    pthread_mutex_destroy(&m->lock);
    free(m->shards);
    free(m);
}
