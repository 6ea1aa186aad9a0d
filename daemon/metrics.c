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
#include "log.h"

#define STATUSES METRICS_STATUSES
/* Latency buckets: log-spaced 1, 2.5, 5 steps from 10 us to 10 s (upper bounds, ns). */
static const uint64_t BOUNDS_NS[] = {10000,     25000,      50000,      100000,     250000,     500000,    1000000,
                                     2500000,   5000000,    10000000,   25000000,   50000000,   100000000, 250000000,
                                     500000000, 1000000000, 2500000000, 5000000000, 10000000000};
#define BUCKETS (sizeof BOUNDS_NS / sizeof BOUNDS_NS[0]) /* and one more: +Inf */
_Static_assert(BUCKETS == METRICS_BUCKETS, "METRICS_BUCKETS counts BOUNDS_NS");

static const char *const OP_NAMES[METRICS_OPS] = {"unknown",
#define OP_NAME_(name, wire, str, op, flags, handle, reply) str,
                                                  REQUEST_OPS(OP_NAME_)
#undef OP_NAME_
};

/* One io thread's counters (written by it alone, read by anyone). */
typedef struct shard {
    _Atomic uint64_t requests[METRICS_OPS], keys[METRICS_OPS];
    _Atomic uint64_t errors[METRICS_OPS][STATUSES];
    _Atomic uint64_t hist[METRICS_OPS][BUCKETS + 1];
    _Atomic uint64_t hist_ns[METRICS_OPS];
    _Atomic uint64_t bytes_in, bytes_out, conns, refused;
} __attribute__((aligned(64))) shard;

struct metrics {
    shard *shards;
    size_t nshards;
    uint64_t t_start; /* floe_now_ns */
    int64_t start_unix;
    char build[200];
    pthread_mutex_t lock; /* the fields below */
    bool snap_any, snap_ok;
    int64_t snap_time;
    char snap_why[256];
    char address[300]; /* of /metrics: "127.0.0.1:9450", or "" */
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
    switch (op_case) { /* the rows' own dispatcher: their wire case to their place */
#define OP_CASE_(name, wire, str, op, flags, handle, reply)                                                            \
    case FLOE__V1__REQUEST__OP_##wire:                                                                                 \
        return METRICS_OP_##name;
        REQUEST_OPS(OP_CASE_)
#undef OP_CASE_
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

/* ---- a view of everything --------------------------------------------------------------- */

uint64_t metrics_resident_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size, resident;
    int ok = f && fscanf(f, "%llu %llu", &size, &resident) == 2;
    if (f)
        fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return ok && page > 0 ? (uint64_t)resident * (uint64_t)page : 0;
}

void metrics_view_take(metrics *m, metrics_view *v)
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
    v->uptime_ns = floe_now_ns() - m->t_start;
    v->rss = metrics_resident_bytes();
    pthread_mutex_lock(&m->lock);
    v->snap_any = m->snap_any;
    v->snap_ok = m->snap_ok;
    v->snap_time = m->snap_time;
    memcpy(v->snap_why, m->snap_why, sizeof v->snap_why);
    pthread_mutex_unlock(&m->lock);
}

/* ---- info ------------------------------------------------------------------------------- */

static const char *status_name(int st)
{
    const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(&floe__v1__status__descriptor, st);
    return v ? v->name : "ERR_UNKNOWN";
}

frame *metrics_info_reply(metrics *m, uint64_t id, const metrics_view *v)
{
    Floe__V1__InfoReply ir = FLOE__V1__INFO_REPLY__INIT;
    char version[64];
    snprintf(version, sizeof version, "floed %s", FLOE_VERSION);
    ir.version = version;
    ir.build = m->build;
    ir.uptime_seconds = v->uptime_ns / 1000000000u;
    ir.pid = (uint64_t)getpid();
    ir.backend = (char *)v->backend;
    ir.gpu = (char *)v->gpu_name;
    if (v->gpu) {
        ir.gpu_memory_total = v->gpu_total;
        ir.gpu_memory_free = v->gpu_free;
        ir.gpu_memory_used = v->gpu_total - v->gpu_free;
    }
    Floe__V1__GpuInfo gi[FLOE_PARTS_MAX], *gip[FLOE_PARTS_MAX];
    for (size_t i = 0; i < v->ngpus; i++) {
        floe__v1__gpu_info__init(&gi[i]);
        gi[i].device = v->gpus[i].device;
        gi[i].name = (char *)v->gpus[i].name;
        gi[i].healthy = v->gpus[i].healthy;
        gi[i].error = (char *)v->gpus[i].why;
        gi[i].memory_total = v->gpus[i].total;
        gi[i].memory_free = v->gpus[i].free;
        gip[i] = &gi[i];
    }
    ir.n_gpus = v->ngpus;
    ir.gpus = gip;
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
    ir.maxmemory = v->maxmemory;
    ir.maxmemory_gpu = v->maxmemory_gpu;
    ir.last_snapshot_time = v->snap_any ? v->snap_time : 0;
    ir.last_snapshot_status = v->snap_any ? (char *)v->snap_why : "";
    ir.data_dir = (char *)v->data_dir;
    ir.metrics_address = m->address;
    const metrics_tables *tb = &v->tables;
    Floe__V1__TableInfo *ti = floe_calloc(tb->n + 1, sizeof *ti);
    Floe__V1__TableInfo **tip = floe_calloc(tb->n + 1, sizeof *tip);
    frame *f = NULL;
    if (ti && tip) {
        for (size_t i = 0; i < tb->n; i++) {
            if (!tb->have[i])
                continue; /* dropped meanwhile */
            const floe_table_stats *s = &tb->stats[i];
            Floe__V1__TableInfo *t = &ti[ir.n_tables];
            floe__v1__table_info__init(t);
            t->name = (char *)s->spec.name;
            t->kind = (Floe__V1__TableKind)s->spec.kind;
            t->backend = (char *)s->backend;
            t->keys = s->keys;
            t->fill = s->fill;
            t->memory_bytes = s->memory_bytes;
            t->changes = tb->changes[i];
            t->last_snapshot_time = tb->last_snapshot[i];
            tip[ir.n_tables++] = t;
        }
        ir.tables = tip;
        Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
        r.id = id;
        r.body_case = FLOE__V1__RESPONSE__BODY_INFO;
        r.info = &ir;
        f = reply_pack(&r);
    }
    free(ti);
    free(tip);
    return f ? f : reply_error(id, FLOE_ERR_INTERNAL, "out of memory building the info reply");
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

/* The runs of the exploring tables (a model checker's, its open set on floed): one sample a
 * table and figure; each level's size is in `floe stats` (a run may have many levels). */
static void render_explore(struct evbuffer *b, const metrics_tables *tb)
{
    static const struct {
        const char *name, *help;
    } X[] = {
        {"floe_explore_states", "States an exploring table's run has found (each once)."},
        {"floe_explore_open_states", "States open: not handed out yet, or handed back by an expired claim."},
        {"floe_explore_claimed_states", "States in claims out."},
        {"floe_explore_claims", "Claims out."},
        {"floe_explore_levels", "Breadth-first depths found: the deepest + 1."},
        {"floe_explore_done", "1 once the run has ended: no state open, no claim out."},
        {"floe_explore_memory_bytes", "Memory of the open set (the states in the order found, parents, labels), where "
                                      "its table lives (GPU or host); counted in floe_table_memory_bytes too."},
    };
    bool any = false;
    for (size_t i = 0; i < tb->n; i++)
        any |= tb->have[i] && tb->explores[i];
    for (size_t k = 0; any && k < sizeof X / sizeof X[0]; k++) {
        family(b, X[k].name, "gauge", X[k].help);
        for (size_t i = 0; i < tb->n; i++) {
            if (!tb->have[i] || !tb->explores[i])
                continue;
            const floe_explore_counts *x = &tb->explore[i];
            const uint64_t v[] = {x->states, x->open, x->claimed, x->claims, x->levels, x->done, x->bytes};
            sample_l(b, X[k].name, "table", tb->stats[i].spec.name, (double)v[k]);
        }
    }
}

void metrics_render(metrics *m, struct evbuffer *b, const metrics_view *v)
{
    const metrics_tables *tb = &v->tables;

    family(b, "floe_build_info", "gauge", "floed's version, build and GPU; the value is 1.");
    evbuffer_add_printf(b, "floe_build_info{version=\"%s\",build=\"", FLOE_VERSION);
    add_label(b, m->build);
    evbuffer_add_printf(b, "\",gpu=\"");
    add_label(b, v->gpu_name);
    evbuffer_add_printf(b, "\",backend=\"%s\"} 1\n", v->backend);
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
    family(b, "floe_responses_unread_bytes", "gauge",
           "Responses of every connection not yet taken by its client (held to output-total-limit).");
    sample_u(b, "floe_responses_unread_bytes", v->unread_bytes);

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
    family(b, "floe_maxmemory_bytes", "gauge", "The maxmemory setting: writes are refused past it (0: no limit).");
    sample_u(b, "floe_maxmemory_bytes", v->maxmemory);
    family(b, "floe_maxmemory_gpu_bytes", "gauge",
           "The maxmemory-gpu setting: GPU writes are refused once a GPU has this much in use (0: no limit).");
    sample_u(b, "floe_maxmemory_gpu_bytes", v->maxmemory_gpu);
    if (v->gpu) {
        family(b, "floe_gpu_memory_total_bytes", "gauge", "Memory of the GPUs floed uses (summed).");
        sample_u(b, "floe_gpu_memory_total_bytes", v->gpu_total);
        family(b, "floe_gpu_memory_used_bytes", "gauge", "GPU memory in use (by every process).");
        sample_u(b, "floe_gpu_memory_used_bytes", v->gpu_total - v->gpu_free);
        family(b, "floe_gpu_memory_free_bytes", "gauge", "GPU memory free.");
        sample_u(b, "floe_gpu_memory_free_bytes", v->gpu_free);
        family(b, "floe_gpu_healthy", "gauge",
               "1 while the GPU works; 0 once a sticky CUDA error ruined it (its tables answer ERR_UNAVAILABLE "
               "until floed restarts).");
        for (size_t i = 0; i < v->ngpus; i++)
            evbuffer_add_printf(b, "floe_gpu_healthy{device=\"%d\"} %d\n", v->gpus[i].device, v->gpus[i].healthy);
    }
    family(b, "floe_last_snapshot_timestamp_seconds", "gauge", "Unix time of the last snapshot (0: none yet).");
    evbuffer_add_printf(b, "floe_last_snapshot_timestamp_seconds %lld\n", v->snap_any ? (long long)v->snap_time : 0);
    family(b, "floe_last_snapshot_success", "gauge",
           "1 if the last snapshot succeeded (or none was taken yet), else 0.");
    evbuffer_add_printf(b, "floe_last_snapshot_success %d\n", !v->snap_any || v->snap_ok);

    size_t ntables = 0;
    for (size_t i = 0; i < tb->n; i++)
        ntables += tb->have[i];
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
        for (size_t i = 0; i < tb->n; i++) {
            if (!tb->have[i])
                continue;
            const floe_table_stats *s = &tb->stats[i];
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
                sample_l(b, T[k].name, "table", s->spec.name, (double)tb->changes[i]);
                break;
            default:
                sample_l(b, T[k].name, "table", s->spec.name, (double)tb->last_snapshot[i]);
                break;
            }
        }
    }
    render_explore(b, tb);
}

/* ---- life ------------------------------------------------------------------------------------ */

metrics *metrics_new(size_t nshards)
{
    metrics *m = floe_calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->nshards = nshards;
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
    pthread_mutex_destroy(&m->lock);
    free(m->shards);
    free(m);
}

void metrics_set_address(metrics *m, const char *address)
{
    pthread_mutex_lock(&m->lock);
    snprintf(m->address, sizeof m->address, "%s", address);
    pthread_mutex_unlock(&m->lock);
}
