/*
 * request.c - requests into table work, batch ends into responses (see
 * request.h).
 *
 * An item is one request's job: the batcher's part (job, first), the
 * saver's part (save_job: a snapshot's file, a dropped table's file), and
 * what the response needs (its session, id and the decoded request, whose
 * key bytes the job points into).  Handlers run on the session's io
 * thread; item_done and what follows run on a backend thread, the saver's
 * or the io thread's, and deliver through the session.
 */
#define _GNU_SOURCE
#include "request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "backend_gpu.h"
#include "batcher.h"
#include "datadir.h"
#include "hostmem.h"
#include "log.h"
#include "registry.h"
#include "snapshot.h"
#include "tablefile.h"

typedef struct multi multi;

typedef struct item {
    job j;         /* the batcher's part */
    save_job save; /* COPY, and DRAIN with a data-dir: the saver's part */
    server *srv;
    session *c; /* NULL: floed's own (a snapshot by the rules, a gather) */
    uint64_t id;
    Floe__V1__Request *req; /* owned: the job's keys and values point into it (or into frame) */
    void *frame;            /* owned (hostmem.h): the frame of a key request read in place (envelope.h) */
    void *keys_copy;        /* when the request's key bytes were not aligned (8 bytes; 4 for vectors) */
    void *values_copy;      /* when its values were not aligned (to value_bytes) */
    char *pre_error;        /* owned: the job's pre_error, or a failed copy's error */
    char *path;             /* COPY, DRAIN with a data-dir: the table's file */
    table_entry *entry;     /* COPY: the table (a reference) */
    table_entry *drop;      /* DRAIN: the entry to reap (the registry's reference) */
    multi *multi;           /* LIST, SNAPSHOT, gathers: one response for several items */
    size_t multi_index;
    batch_out *out; /* a key operation's answers, [at, at + n), once its batch ran */
    size_t at;
    /* a RANGE: the request's bounds and direction, which its reply's cursor names; or a min or max
     * (METRICS_OP_MIN, METRICS_OP_MAX), a RANGE of one key answered as a successor's */
    uint64_t from, to;
    int bound;
} item;

/* Aggregates the STATS (LIST, gathers) or COPY (SNAPSHOT) items of several
 * tables into one response; the multi holds the session's hold. */
struct multi {
    pthread_mutex_t lock;
    int left;
    session *c;
    uint64_t id;
    int op;
    size_t n;
    floe_table_stats *stats;
    bool *have;
    floe_status status;
    char error[FLOE_ERROR_MAX];
    uint64_t t_parse; /* c's request began to be parsed (metrics) */
    /* Set (gathers): the last part calls done instead of answering c. */
    void (*done)(struct multi *m);
    void *arg;
};

static void item_done(job *j, const job_end *e);

/* ---- items ---------------------------------------------------------------------------------- */

/* The counted operation (metrics.h) of a job's op. */
static int op_metric(int job_op)
{
    switch (job_op) {
    case FLOE_OP_INSERT:
        return METRICS_OP_INSERT;
    case FLOE_OP_FIND:
        return METRICS_OP_FIND;
    case FLOE_OP_ERASE:
        return METRICS_OP_ERASE;
    case FLOE_OP_GET:
        return METRICS_OP_GET_BY_ID;
    case FLOE_OP_SUCC:
        return METRICS_OP_SUCCESSOR;
    case FLOE_OP_PRED:
        return METRICS_OP_PREDECESSOR;
    case FLOE_OP_SCAN:
        return METRICS_OP_SCAN;
    case FLOE_OP_RANGE:
        return METRICS_OP_RANGE;
    case FLOE_OP_STATS:
        return METRICS_OP_STATS;
    case FLOE_OP_SAVE:
    case FLOE_OP_COPY:
        return METRICS_OP_SNAPSHOT;
    case JOB_DRAIN:
        return METRICS_OP_DROP_TABLE;
    default:
        return METRICS_OP_UNKNOWN;
    }
}

static item *item_new(server *srv, session *c, uint64_t id, int op, Floe__V1__Request *req)
{
    item *it = floe_calloc(1, sizeof *it);
    if (!it)
        return NULL;
    it->srv = srv;
    it->c = c;
    it->id = id;
    it->req = req;
    it->j.op = op;
    it->j.lane = c ? c->lane : 0; /* its connection's order holds in one lane */
    it->j.done = item_done;
    it->j.t_parse = c ? c->t_frame : 0;
    return it;
}

static void item_free(item *it)
{
    if (!it)
        return;
    if (it->req)
        floe__v1__request__free_unpacked(it->req, NULL);
    hostmem_put(it->srv->mem, it->frame);
    free(it->keys_copy);
    free(it->values_copy);
    free(it->pre_error);
    free(it->path);
    floe_file_image_free(it->save.image);
    if (it->entry)
        entry_unref(it->entry);
    batch_out_release(it->out);
    free(it);
}

/* Marks it to end with st and msg in its turn, without engine work. */
static void item_refuse(item *it, floe_status st, const char *msg)
{
    it->j.pre_status = st;
    free(it->pre_error);
    it->pre_error = floe_strdup(msg);
    it->j.pre_error = it->pre_error;
}

/* Answers it with f and frees it (its request's hold on the session goes
 * with the answer; f NULL: no answer, the request was dropped). */
static void answer(item *it, frame *f)
{
    metrics_tag(f, it->bound ? it->bound : op_metric(it->j.op), it->j.t_parse);
    it->c->ops->deliver(it->c, f);
    item_free(it);
}

static void multi_part_done(multi *m, size_t index, floe_status st, const char *error, const floe_table_stats *stats);

/* Ends an item that carries no keys (OK or an error; a part of a
 * multi-table answer; nothing for an item of floed's own) and frees it. */
static void item_end(item *it, floe_status st, const char *msg)
{
    if (it->multi) {
        multi_part_done(it->multi, it->multi_index, st, msg, NULL);
        item_free(it);
    } else if (!it->c) {
        item_free(it); /* floed's own (a snapshot by the rules): logged by its owner */
    } else {
        answer(it, st == FLOE_OK ? reply_ok(it->id) : reply_error(it->id, st, msg));
    }
}

/* ---- answers -------------------------------------------------------------------------------- */

/* The response of one key-operation item: its slice [at, at + n) of o. */
static frame *key_reply(const batch_out *o, const item *it, size_t at)
{
    Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
    const size_t n = it->j.n, vb = o->value_bytes;
    r.id = it->id;
    r.results.data = o->results + at;
    r.results.len = n;
    if ((it->j.flags & FLOE_BATCH_WANT_IDS) && o->ids) {
        r.ids.data = (uint8_t *)(o->ids + at);
        r.ids.len = n * 8;
    }
    if ((it->j.flags & FLOE_BATCH_WANT_VALUES) && vb && o->values_out) {
        r.values.data = o->values_out + at * vb;
        r.values.len = n * vb;
    }
    if (it->j.op == FLOE_OP_GET && o->vectors_out) {
        r.vectors.data = (uint8_t *)(o->vectors_out + at * o->words);
        r.vectors.len = n * o->words * 4;
    }
    if (o->keys_out) { /* successor, predecessor */
        r.keys.data = (uint8_t *)(o->keys_out + at);
        r.keys.len = n * 8;
    }
    if (it->j.op == FLOE_OP_INSERT || it->j.op == FLOE_OP_FIND)
        r.generation = o->generation;
    floe_answer_counts c;
    floe_answer_counts_tally(&c, r.results.data, n);
    r.inserted = c.inserted;
    r.present = c.present;
    r.absent = c.absent;
    r.full = c.full;
    r.erased = c.erased;
    return reply_pack(&r);
}

frame *request_pack(frame *f)
{
    item *it = f->pending;
    frame *packed = key_reply(it->out, it, it->at);
    if (!packed) /* say so, if even that can be built */
        packed = reply_error(it->id, FLOE_ERR_INTERNAL, "out of memory building the answer");
    if (packed) {
        packed->to = f->to;
        packed->req_op = f->req_op;
        packed->t_parse = f->t_parse;
        packed->keys = f->keys;
    }
    item_free(it);
    free(f);
    return packed;
}

/* Queues its answer, a slice of o, to be packed by its connection's io
 * thread: packing 64 Ki answers and freeing the request are spread over the
 * io threads instead of holding up this table's next batch. */
static void answer_later(item *it, batch_out *o, size_t at)
{
    frame *f = floe_calloc(1, sizeof *f);
    if (!f) {
        answer(it, key_reply(o, it, at)); /* pack it here, then */
        return;
    }
    batch_out_hold(o);
    it->out = o;
    it->at = at;
    f->pending = it;
    f->req_op = op_metric(it->j.op);
    f->t_parse = it->j.t_parse;
    f->keys = it->j.n;
    f->status = FLOE_OK;
    it->c->ops->deliver(it->c, f);
}

/* A range's cursor: the key the next reply starts from, the table's
 * generation, and a tag of the table (its seed) and the range (bounds,
 * direction), so that a cursor of another table or range is refused. */
#define RANGE_CURSOR_BYTES 24

static uint64_t range_tag(uint64_t seed, uint64_t from, uint64_t to, bool desc)
{
    uint64_t x = seed ^ (desc ? 0xD1B54A32D192ED03ull : 0);
    uint64_t h = floe_splitmix64(&x);
    x = h ^ from;
    h = floe_splitmix64(&x);
    x = h ^ to;
    return floe_splitmix64(&x);
}

/* The answer of a scan, or of a range (an ORDERED table's keys, with a range's cursor). */
static frame *scan_reply(const batcher *bt, const floe_batch *b, const item *it)
{
    Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
    Floe__V1__ScanReply sr = FLOE__V1__SCAN_REPLY__INIT;
    uint8_t cursor[RANGE_CURSOR_BYTES];
    memcpy(cursor, &b->next.position, 8);
    memcpy(cursor + 8, &b->next.generation, 8);
    if (b->op == FLOE_OP_RANGE) {
        const uint64_t tag = range_tag(bt->table->spec.seed, it->from, it->to, b->desc);
        memcpy(cursor + 16, &tag, 8);
    }
    r.id = it->id;
    if (bt->words) { /* a TREE: the vectors are the keys; ids on request */
        sr.keys.data = (uint8_t *)b->scan_vectors;
        sr.keys.len = b->scan_n * bt->words * 4;
        if (it->j.flags & FLOE_BATCH_WANT_IDS) {
            sr.ids.data = (uint8_t *)b->scan_keys;
            sr.ids.len = b->scan_n * 8;
        }
    } else {
        sr.keys.data = (uint8_t *)b->scan_keys;
        sr.keys.len = b->scan_n * 8;
    }
    if (b->scan_values) {
        sr.values.data = b->scan_values;
        sr.values.len = b->scan_n * bt->value_bytes;
    }
    sr.cursor.data = cursor;
    sr.cursor.len = b->op == FLOE_OP_RANGE ? RANGE_CURSOR_BYTES : 16;
    sr.done = b->scan_done != 0;
    r.body_case = FLOE__V1__RESPONSE__BODY_SCAN;
    r.scan = &sr;
    return reply_pack(&r);
}

/* A min or max: its range's one key, answered as a successor's. */
static frame *bound_reply(const batcher *bt, const floe_batch *b, const item *it)
{
    Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
    uint8_t result = b->scan_n ? FLOE_PRESENT : FLOE_ABSENT;
    uint64_t key = b->scan_n ? b->scan_keys[0] : 0;
    uint8_t value[8] = {0};
    if (b->scan_n && b->scan_values)
        memcpy(value, b->scan_values, bt->value_bytes);
    r.id = it->id;
    r.results.data = &result;
    r.results.len = 1;
    r.keys.data = (uint8_t *)&key;
    r.keys.len = 8;
    if (b->scan_values) {
        r.values.data = value;
        r.values.len = bt->value_bytes;
    }
    r.present = b->scan_n;
    r.absent = !b->scan_n;
    return reply_pack(&r);
}

static frame *stats_reply(batcher *bt, floe_batch *b, const item *it)
{
    /* the engine's stages come with its stats; the daemon's and the io threads' are added here */
    floe_stage_time stage[FLOE_STAGES];
    batcher_stages(bt, stage);
    for (int s = 0; s < FLOE_STAGES; s++)
        if (stage[s].count)
            b->stats.stage[s] = stage[s];
    b->stats.stage[FLOE_STAGE_IO_CPU] = server_io_cpu(it->srv);
    Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
    Floe__V1__TableStats ts;
    reply_stats_room room;
    reply_fill_stats(&ts, &room, 1, &b->stats);
    r.id = it->id;
    r.body_case = FLOE__V1__RESPONSE__BODY_STATS;
    r.stats = &ts;
    return reply_pack(&r);
}

/* The saver wrote a snapshot, or removed a dropped table's file. */
static void saved(save_job *sj, floe_status st, const char *error)
{
    item_end(QUEUE_ENTRY(sj, item, save), st, error);
}

/* A COPY ran: the saver writes its image (or reports its failure) in turn. */
static void copy_done(item *it, floe_batch *b, uint64_t changes)
{
    it->save.image = b->image;
    b->image = NULL;
    it->save.changes = changes;
    it->save.status = b->status;
    if (b->status != FLOE_OK) {
        free(it->pre_error);
        it->pre_error = floe_strdup(b->error.msg);
        it->save.error = it->pre_error;
    }
    saver_queue(it->srv->saver, &it->save);
}

/* A dropped table's queue is empty: its file goes (after the snapshots
 * queued before it) and the table is reaped on the main thread. */
static void drain_done(item *it, floe_status st, const char *msg)
{
    server *srv = it->srv;
    table_entry *e = it->drop;
    if (it->path)
        saver_queue(srv->saver, &it->save); /* answered once removed */
    else
        item_end(it, st, msg);
    registry_reap(&srv->reg, e);
}

static void item_done(job *j, const job_end *e)
{
    item *it = (item *)j;
    if (e->dropped) {
        answer(it, NULL); /* releases its hold on the session */
        return;
    }
    if (j->op == JOB_DRAIN) {
        drain_done(it, e->status, e->error);
        return;
    }
    floe_batch *b = e->b;
    if (!b) {
        if (j->op == FLOE_OP_COPY && it->save.by_rules) /* it never reached the saver */
            atomic_store(&it->entry->snapshot_pending, false);
        item_end(it, e->status, e->error);
    } else if (j->op == FLOE_OP_COPY) {
        copy_done(it, b, e->changes);
    } else if (it->multi) {
        multi_part_done(it->multi, it->multi_index, b->status, b->error.msg, b->op == FLOE_OP_STATS ? &b->stats : NULL);
        item_free(it);
    } else if (b->status != FLOE_OK) {
        answer(it, reply_error(it->id, b->status, b->error.msg));
    } else if (j->op == FLOE_OP_SCAN) {
        answer(it, scan_reply(e->bt, b, it));
    } else if (j->op == FLOE_OP_RANGE) {
        answer(it, it->bound ? bound_reply(e->bt, b, it) : scan_reply(e->bt, b, it));
    } else if (j->op == FLOE_OP_STATS) {
        answer(it, stats_reply(e->bt, b, it));
    } else if (e->out) {
        answer_later(it, e->out, e->at);
    } else {
        answer(it, reply_ok(it->id));
    }
}

/* ---- one response for several tables ------------------------------------------------------- */

static multi *multi_new(session *c, uint64_t id, int op, size_t n)
{
    multi *m = floe_calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->stats = floe_calloc(n + 1, sizeof *m->stats);
    m->have = floe_calloc(n + 1, sizeof *m->have);
    if (!m->stats || !m->have) {
        free(m->stats);
        free(m->have);
        free(m);
        return NULL;
    }
    pthread_mutex_init(&m->lock, NULL);
    m->left = n ? (int)n : 1;
    m->c = c;
    m->id = id;
    m->op = op;
    m->n = n;
    m->t_parse = c ? c->t_frame : 0;
    return m;
}

static void multi_free(multi *m)
{
    pthread_mutex_destroy(&m->lock);
    free(m->stats);
    free(m->have);
    free(m);
}

/* LIST: the tables that answered (one dropped meanwhile is left out). */
static frame *list_reply(const multi *m)
{
    Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
    Floe__V1__TableList tl = FLOE__V1__TABLE_LIST__INIT;
    size_t k = 0;
    frame *f;
    Floe__V1__TableStats *ts = floe_calloc(m->n + 1, sizeof *ts);
    Floe__V1__TableStats **tsp = floe_calloc(m->n + 1, sizeof *tsp);
    reply_stats_room *rooms = floe_calloc(m->n + 1, sizeof *rooms);
    if (ts && tsp && rooms) {
        for (size_t i = 0; i < m->n; i++) {
            if (!m->have[i])
                continue;
            reply_fill_stats(&ts[k], &rooms[k], 0, &m->stats[i]);
            tsp[k] = &ts[k];
            k++;
        }
        tl.n_tables = k;
        tl.tables = tsp;
        r.id = m->id;
        r.body_case = FLOE__V1__RESPONSE__BODY_TABLES;
        r.tables = &tl;
        f = reply_pack(&r);
    } else {
        f = reply_error(m->id, FLOE_ERR_INTERNAL, "out of memory listing tables");
    }
    free(ts);
    free(tsp);
    free(rooms);
    return f;
}

/* Records one part's outcome; the last part sends the response. */
static void multi_part_done(multi *m, size_t index, floe_status st, const char *error, const floe_table_stats *stats)
{
    pthread_mutex_lock(&m->lock);
    if (stats && index < m->n) {
        m->stats[index] = *stats;
        m->have[index] = true;
    }
    if (st != FLOE_OK && m->op == FLOE_OP_SAVE && m->status == FLOE_OK) {
        m->status = st;
        snprintf(m->error, sizeof m->error, "%s", error ? error : "");
    }
    bool last = --m->left == 0;
    pthread_mutex_unlock(&m->lock);
    if (!last)
        return;
    if (m->done) {
        m->done(m);
        return;
    }
    frame *f = m->op != FLOE_OP_SAVE  ? list_reply(m)
               : m->status == FLOE_OK ? reply_ok(m->id)
                                      : reply_error(m->id, m->status, m->error);
    metrics_tag(f, m->op == FLOE_OP_SAVE ? METRICS_OP_SNAPSHOT : METRICS_OP_LIST_TABLES, m->t_parse);
    m->c->ops->deliver(m->c, f);
    multi_free(m);
}

/* A COPY item for e's table, answered to c (NULL: a snapshot by the rules,
 * answered to nobody), or NULL if out of memory. */
static item *snapshot_item(server *srv, session *c, uint64_t id, table_entry *e)
{
    item *it = item_new(srv, c, id, FLOE_OP_COPY, NULL);
    if (!it)
        return NULL;
    it->path = datadir_table_path(srv->cfg.data_dir, e->name);
    if (!it->path) {
        item_free(it);
        return NULL;
    }
    entry_ref(e);
    it->entry = e;
    it->save.path = it->path;
    it->save.entry = e;
    it->save.done = saved;
    return it;
}

/* Sends an item of op to each table of all (n; only: the one of that
 * name, "" for all) as parts of m; a part that cannot go ends at once. */
static void fan_out(server *srv, multi *m, table_entry **all, size_t n, const char *only)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (only[0] && strcmp(all[i]->name, only) != 0)
            continue;
        /* a snapshot is a COPY in the table's order, written by the saver */
        item *it =
            m->op == FLOE_OP_SAVE ? snapshot_item(srv, m->c, m->id, all[i]) : item_new(srv, m->c, m->id, m->op, NULL);
        if (it) {
            it->multi = m;
            it->multi_index = k;
        }
        const floe_status st = it ? batcher_submit(&all[i]->bt, &it->j) : FLOE_ERR_INTERNAL;
        if (st != FLOE_OK) {
            item_free(it);
            multi_part_done(m, k, st, st == FLOE_ERR_INTERNAL ? "out of memory" : "dropped meanwhile", NULL);
        }
        k++;
    }
    if (k == 0)
        multi_part_done(m, 0, FLOE_OK, NULL, NULL);
}

/* ---- gathering every table's figures ------------------------------------------------------- */

typedef struct gathered {
    metrics_view v;
    multi *m;
    uint64_t *changes;
    int64_t *last_snapshot;
    void (*done)(metrics_view *v, void *arg);
    void *arg;
} gathered;

void request_view_free(metrics_view *v)
{
    if (!v)
        return;
    gathered *g = (gathered *)(void *)((char *)v - offsetof(gathered, v));
    if (g->m)
        multi_free(g->m);
    free(g->changes);
    free(g->last_snapshot);
    free(g);
}

static void gather_done(multi *m)
{
    gathered *g = m->arg;
    g->v.tables = (metrics_tables){m->n, m->stats, m->have, g->changes, g->last_snapshot};
    g->done(&g->v, g->arg);
}

int request_gather(server *srv, void (*done)(metrics_view *v, void *arg), void *arg)
{
    gathered *g = floe_calloc(1, sizeof *g);
    size_t n = 0;
    table_entry **all = g ? registry_list(&srv->reg, &n) : NULL;
    if (g && all) {
        g->m = multi_new(NULL, 0, FLOE_OP_STATS, n);
        g->changes = floe_calloc(n + 1, sizeof *g->changes);
        g->last_snapshot = floe_calloc(n + 1, sizeof *g->last_snapshot);
    }
    const bool ok = all && g->m && g->changes && g->last_snapshot;
    if (ok) {
        metrics_view *v = &g->v;
        metrics_view_take(srv->metrics, v);
        const int open = atomic_load(&srv->nconns);
        v->conns_now = open > 0 ? (uint64_t)open : 0;
        v->unread_bytes = atomic_load(&srv->out_bytes);
        v->gpu = srv->reg.gpu != NULL;
        for (int i = 0; v->gpu && i < srv->ngpus; i++) { /* each device, and the sums of those that work */
            metrics_gpu *d = &v->gpus[v->ngpus++];
            d->device = srv->gpu_ids[i];
            floe_gpu_device(d->device, d->name, sizeof d->name);
            d->healthy = floe_gpu_healthy(d->device, d->why, sizeof d->why) == 1;
            if (d->healthy && floe_gpu_meminfo(d->device, &d->free, &d->total) == 0) {
                v->gpu_free += d->free;
                v->gpu_total += d->total;
            }
        }
        v->gpu_name = srv->reg.gpu_name;
        v->backend = server_default_backend_name(srv);
        v->data_dir = srv->cfg.data_dir;
        g->done = done;
        g->arg = arg;
        g->m->done = gather_done;
        g->m->arg = g;
        for (size_t i = 0; i < n; i++) { /* before any part can finish the multi */
            g->changes[i] = atomic_load(&all[i]->bt.changes) - atomic_load(&all[i]->saved_changes);
            g->last_snapshot[i] = atomic_load(&all[i]->saved_at);
        }
        fan_out(srv, g->m, all, n, "");
    } else {
        request_view_free(g ? &g->v : NULL);
    }
    for (size_t i = 0; i < n; i++)
        entry_unref(all[i]);
    free(all);
    return ok ? 0 : -1;
}

/* ---- snapshots by the rules ----------------------------------------------------------------- */

void request_snapshot_tick(server *srv)
{
    const uint64_t every = LIVE(srv, save_every), after = LIVE(srv, save_after_changes);
    if (!srv->cfg.data_dir[0] || (!every && !after) || atomic_load(&srv->shutting_down))
        return;
    const int64_t now = (int64_t)time(NULL);
    size_t n;
    table_entry **all = registry_list(&srv->reg, &n);
    for (size_t i = 0; all && i < n; i++) {
        table_entry *e = all[i];
        const uint64_t changes = atomic_load(&e->bt.changes) - atomic_load(&e->saved_changes);
        /* a table never saved (created, maybe empty) counts as changed for save-every: its
         * creation is what a kill -9 would lose */
        const bool never_saved = atomic_load(&e->saved_at) == 0;
        const bool due = ((changes > 0 || never_saved) && every && now - atomic_load(&e->last_save) >= (int64_t)every) ||
                         (after && changes > 0 && changes >= after);
        if (!due || now < atomic_load(&e->retry_after) || atomic_exchange(&e->snapshot_pending, true))
            continue;
        item *it = snapshot_item(srv, NULL, 0, e);
        if (it)
            it->save.by_rules = true;
        if (!it || batcher_submit(&e->bt, &it->j) != FLOE_OK) { /* out of memory, or dropped meanwhile */
            item_free(it);
            atomic_store(&e->snapshot_pending, false);
        }
    }
    for (size_t i = 0; all && i < n; i++)
        entry_unref(all[i]);
    free(all);
}

/* ---- handlers (io thread) ------------------------------------------------------------------- */

static void send_now(session *c, frame *f)
{
    c->ops->send(c, f);
}

#define send_error(c, id, st, ...) send_now(c, reply_errorf(id, st, __VA_ARGS__))

static void handle_hello(server *srv, session *c, Floe__V1__Request *req)
{
    const Floe__V1__Hello *h = req->hello;
    if (server_token_required(srv)) {
        if (!h->token || !h->token[0]) { /* not a wrong token: none at all */
            const char *why = "this server requires a token; the hello gave none (the clients take --token, "
                              "$FLOE_TOKEN or ?token= in the URI)";
            c->ops->send_and_close(c, reply_error(req->id, FLOE_ERR_UNAUTHENTICATED, why), "hello without a token");
            return;
        }
        if (!server_token_matches(srv, h->token)) {
            c->ops->send_and_close(c, reply_error(req->id, FLOE_ERR_UNAUTHENTICATED, "wrong token"), "wrong token");
            return;
        }
        c->authed = true;
    }
    if (h->version > FLOE_PROTOCOL_VERSION) {
        log_debug("connection %llu speaks protocol %u; answering with %u", (unsigned long long)c->serial, h->version,
                  FLOE_PROTOCOL_VERSION);
    }
    Floe__V1__HelloReply hr = FLOE__V1__HELLO_REPLY__INIT;
    hr.version = FLOE_PROTOCOL_VERSION;
    hr.server = "floed " FLOE_VERSION;
    hr.max_frame = LIVE(srv, max_frame);
    hr.max_batch_keys = LIVE(srv, max_batch_keys);
    hr.max_inflight = (uint32_t)LIVE(srv, max_inflight);
    hr.backend = (char *)server_default_backend_name(srv);
    hr.authenticated = c->authed;
    Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
    r.id = req->id;
    r.body_case = FLOE__V1__RESPONSE__BODY_HELLO;
    r.hello = &hr;
    send_now(c, reply_pack(&r));
}

static floe_status spec_from_proto(const Floe__V1__TableSpec *p, const char *default_backend, floe_spec *s,
                                   floe_errinfo *err)
{
    floe_spec_default(s);
    if (!p)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "create_table needs a spec");
    if (!p->name || strlen(p->name) > FLOE_NAME_MAX)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "table name must be 1 to %d characters", FLOE_NAME_MAX);
    strcpy(s->name, p->name);
    s->kind = (floe_kind)p->kind;
    /* key_bits 0 means 64 for SET and MAP; a TREE has none (its keys are vectors) */
    s->key_bits = p->key_bits ? p->key_bits : s->kind == FLOE_KIND_TREE ? 0 : 64;
    s->words = p->words;
    s->memory = p->memory;
    s->value_bytes = p->value_bytes;
    s->capacity = p->capacity ? p->capacity : s->capacity;
    if (p->grow && p->no_grow)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "grow and no_grow contradict each other: give one");
    /* SET and MAP grow when asked; a TREE unless told not to (a model
     * checker does not know its state count); an ORDERED table always
     * (its nodes are made as keys come) */
    if (s->kind == FLOE_KIND_ORDERED && p->no_grow)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "an ORDERED table always grows (its nodes are made as keys come): no_grow is for SET, "
                                "MAP and TREE tables");
    s->grow = p->grow || ((s->kind == FLOE_KIND_TREE || s->kind == FLOE_KIND_ORDERED) && !p->no_grow);
    s->max_fill = p->max_fill != 0.0 ? p->max_fill : FLOE_DEFAULT_MAX_FILL;
    s->seed = p->seed;
    s->shard = p->shard;
    s->shards = p->shards;
    s->shard_set = p->shard_set;
    s->parts = p->parts;
    const char *be = p->backend && p->backend[0] ? p->backend : default_backend;
    if (strlen(be) >= sizeof s->backend)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "backend must be cpu, gpu or auto");
    strcpy(s->backend, be);
    return floe_spec_validate(s, err);
}

static void handle_create(server *srv, session *c, Floe__V1__Request *req)
{
    floe_spec spec;
    floe_errinfo err;
    floe_backend *be = NULL;
    char want[sizeof srv->cfg.backend];
    floe_status st = spec_from_proto(req->create_table->spec, server_default_backend(srv, want), &spec, &err);
    if (st == FLOE_OK)
        st = registry_backend_for(&srv->reg, spec.backend, &be, &err);
    if (st != FLOE_OK) {
        send_now(c, reply_error(req->id, st, err.msg));
        return;
    }
    table_entry *probe = registry_get(&srv->reg, spec.name);
    if (probe) { /* cheap early answer; registry_install decides for real */
        entry_unref(probe);
        send_error(c, req->id, FLOE_ERR_EXISTS, "table %s exists", spec.name);
        return;
    }
    const uint64_t max_bytes = LIVE(srv, max_table_bytes), need = floe_table_bytes_for(&spec);
    if (max_bytes && need > max_bytes) {
        send_error(c, req->id, FLOE_ERR_FULL,
                   "table %s: its arrays for a capacity of %llu take %.2f GiB, past max-table-bytes (%.2f GiB): ask a "
                   "smaller capacity (with grow it grows as keys come)",
                   spec.name, (unsigned long long)spec.capacity, need / 1073741824.0, max_bytes / 1073741824.0);
        return;
    }
    floe_table *t;
    snprintf(spec.backend, sizeof spec.backend, "%s", floe_backend_name(be)); /* what it runs on, for stats */
    st = floe_table_create(be, &spec, &t, &err);
    if (st == FLOE_OK)
        st = registry_install(&srv->reg, t, LIVE(srv, max_tables), &err);
    if (st != FLOE_OK) {
        send_now(c, reply_error(req->id, st, err.msg));
        return;
    }
    if (spec.kind == FLOE_KIND_TREE)
        log_info("created table %s: TREE, words %u, capacity %llu, memory %llu%s%s, backend %s", spec.name, spec.words,
                 (unsigned long long)spec.capacity, (unsigned long long)spec.memory,
                 spec.memory ? " bytes" : " (sized from capacity)", spec.grow ? ", grows" : ", fixed size",
                 floe_backend_name(be));
    else
        log_info("created table %s: %s, key_bits %u, value_bytes %u, capacity %llu%s, backend %s", spec.name,
                 floe_kind_name(spec.kind), spec.key_bits, spec.value_bytes, (unsigned long long)spec.capacity,
                 spec.grow ? ", grows" : "", floe_backend_name(be));
    send_now(c, reply_ok(req->id));
}

/* Hands it to e's batcher, the session held until it is answered; on
 * refusal answers with the reason. */
static void submit(session *c, table_entry *e, item *it)
{
    c->ops->hold(c);
    floe_status st = batcher_submit(&e->bt, &it->j);
    if (st == FLOE_OK)
        return;
    char msg[FLOE_ERROR_MAX];
    if (st == FLOE_ERR_SHUTTING_DOWN)
        snprintf(msg, sizeof msg, "floed is shutting down");
    else
        snprintf(msg, sizeof msg, "no table %s", e->name);
    if (it->j.op == JOB_DRAIN)
        registry_reap(&it->srv->reg, it->drop);
    answer(it, reply_error(it->id, st, msg));
}

static void handle_drop(server *srv, session *c, Floe__V1__Request *req)
{
    const char *name = req->drop_table->table ? req->drop_table->table : "";
    table_entry *e = registry_remove(&srv->reg, name);
    if (!e) {
        send_error(c, req->id, FLOE_ERR_NO_TABLE, "no table %s", name);
        return;
    }
    log_info("dropping table %s", name);
    item *it = item_new(srv, c, req->id, JOB_DRAIN, NULL);
    if (!it) {
        send_error(c, req->id, FLOE_ERR_INTERNAL, "out of memory");
        registry_reap(&srv->reg, e);
        return;
    }
    it->drop = e; /* the registry's reference travels with the drain */
    if (srv->cfg.data_dir[0]) {
        if (!(it->path = datadir_table_path(srv->cfg.data_dir, name))) {
            item_free(it);
            send_error(c, req->id, FLOE_ERR_INTERNAL, "out of memory");
            registry_reap(&srv->reg, e);
            return;
        }
        it->save.path = it->path; /* no entry: the saver removes the file */
        it->save.done = saved;
    }
    submit(c, e, it);
}

static void handle_list(server *srv, session *c, Floe__V1__Request *req, int op)
{
    size_t n;
    table_entry **all = registry_list(&srv->reg, &n);
    const char *only = op == FLOE_OP_SAVE && req->snapshot->table ? req->snapshot->table : "";
    size_t want = 0;
    for (size_t i = 0; i < n; i++)
        want += !only[0] || strcmp(all[i]->name, only) == 0;
    multi *m = NULL;
    if (!all) {
        send_error(c, req->id, FLOE_ERR_INTERNAL, "out of memory listing the tables");
    } else if (only[0] && want == 0) {
        send_error(c, req->id, FLOE_ERR_NO_TABLE, "no table %s", only);
    } else if (!(m = multi_new(c, req->id, op, want))) {
        send_error(c, req->id, FLOE_ERR_INTERNAL, "out of memory");
    } else {
        c->ops->hold(c); /* the multi's, until its response */
        fan_out(srv, m, all, n, only);
    }
    for (size_t i = 0; i < n; i++)
        entry_unref(all[i]);
    free(all);
}

/* A key request, from either decoding: its bytes live in req or in frame
 * (whichever is set; the item takes it over). */
typedef struct key_request {
    uint64_t id;
    int op;            /* FLOE_OP_INSERT, FIND, ERASE, GET, SUCC, PRED */
    const char *table; /* NUL-terminated */
    const uint8_t *keys, *values;
    size_t keys_len, values_len;
    /* TREE states by their parents (Insert.parents, change_counts, changes, generation) */
    const uint8_t *parents, *change_counts, *changes;
    size_t parents_len, change_counts_len, changes_len;
    uint64_t parent_generation;
    unsigned flags;     /* FLOE_BATCH_* as asked */
    uint64_t shard_set; /* Request.shard (all 0: absent) */
    uint32_t shard, shards;
    Floe__V1__Request *req;
    void *frame;
} key_request;

/* A key operation on the table of spec from a client that says (shard_set,
 * shard, shards) of it: OK, or ERR_INVALID and why.  A client with another
 * server list, or one that takes a shard for a whole table (or a whole
 * table for a shard), would put keys where no other client looks. */
static floe_status shard_check(const floe_spec *spec, uint64_t set, uint32_t shard, uint32_t shards, char *msg,
                               size_t len)
{
    if (spec->shards == 0 && shards == 0)
        return FLOE_OK;
    if (spec->shards == 0)
        snprintf(msg, len,
                 "table %s is a whole table on this server, but this client holds it partitioned over %u servers: "
                 "connect to this server alone",
                 spec->name, shards);
    else if (shards == 0)
        snprintf(msg, len,
                 "table %s is shard %u/%u of a table partitioned over several floed: connect with the list of its "
                 "servers (floe://h1:p1,h2:p2,...)",
                 spec->name, spec->shard + 1, spec->shards);
    else if (set != spec->shard_set || shard != spec->shard || shards != spec->shards)
        snprintf(msg, len,
                 "table %s is shard %u/%u of server list %016llx, this client says shard %u/%u of list %016llx: "
                 "clients must list the same servers in the same order",
                 spec->name, spec->shard + 1, spec->shards, (unsigned long long)spec->shard_set, shard + 1, shards,
                 (unsigned long long)set);
    else
        return FLOE_OK;
    return FLOE_ERR_INVALID;
}

/* shard_check of a request protobuf-c unpacked. */
static floe_status request_shard_check(const floe_spec *spec, const Floe__V1__Request *req, char *msg, size_t len)
{
    const Floe__V1__ShardCheck *c = req->shard;
    return c ? shard_check(spec, c->shard_set, c->shard, c->shards, msg, len) : shard_check(spec, 0, 0, 0, msg, len);
}

static void key_request_free(server *srv, key_request *kr)
{
    if (kr->req)
        floe__v1__request__free_unpacked(kr->req, NULL);
    hostmem_put(srv->mem, kr->frame);
}

/* The rules of a key operation on the table of spec (tables/spec.c's door,
 * and max-frame for what a get_by_id answers): OK with *n, or the error
 * and msg.  keys and values are aligned as the engines read them. */
static floe_status check_key_request(server *srv, const floe_spec *spec, const key_request *kr, const void *keys,
                                     const void *values, size_t *n, char *msg, size_t len)
{
    floe_errinfo err;
    floe_status st;
    if (kr->parents_len || kr->change_counts_len || kr->changes_len) {
        st = kr->op != FLOE_OP_INSERT || kr->keys_len || kr->values_len
                 ? floe_errinfo_set(&err, FLOE_ERR_INVALID,
                                    "parents, change_counts and changes go with an insert, instead of keys")
                 : floe_states_check(spec, kr->flags, kr->parents_len, kr->change_counts, kr->change_counts_len,
                                     kr->changes, kr->changes_len, n, &err);
    } else {
        st = floe_request_check(spec, (floe_op)kr->op, kr->flags, keys, kr->keys_len, values, kr->values_len, n, &err);
    }
    if (st != FLOE_OK) {
        snprintf(msg, len, "%s", err.msg);
        return st;
    }
    const uint64_t max_frame = LIVE(srv, max_frame), vb = (uint64_t)spec->words * 4;
    if (kr->op == FLOE_OP_GET && *n * vb > max_frame) {
        snprintf(msg, len,
                 "get_by_id of %zu ids would answer %llu bytes of vectors (words = %u), above max-frame (%llu bytes): "
                 "ask for at most %llu ids per request",
                 *n, (unsigned long long)(*n * vb), spec->words, (unsigned long long)max_frame,
                 (unsigned long long)(max_frame / vb));
        return FLOE_ERR_TOO_LARGE;
    }
    return FLOE_OK;
}

/* p itself if it is aligned to align bytes (a power of two), else a copy
 * in *copy; NULL if out of memory. */
static const void *aligned(const void *p, size_t len, size_t align, void **copy)
{
    if (((uintptr_t)p & (align - 1)) == 0 || !len)
        return p;
    if ((*copy = floe_malloc(len)))
        memcpy(*copy, p, len);
    return *copy;
}

/* INSERT, FIND, ERASE, GET, SUCC, PRED: takes kr's bytes over. */
static void handle_key_op(server *srv, session *c, key_request *kr)
{
    table_entry *e = registry_get(&srv->reg, kr->table);
    if (!e) {
        send_error(c, kr->id, FLOE_ERR_NO_TABLE, "no table %s", kr->table);
        key_request_free(srv, kr);
        return;
    }
    const floe_spec *spec = &e->table->spec;
    const bool valued = floe_spec_has_values(spec), tree = spec->kind == FLOE_KIND_TREE;
    item *it = item_new(srv, c, kr->id, kr->op, kr->req);
    if (!it) {
        send_error(c, kr->id, FLOE_ERR_INTERNAL, "out of memory");
        key_request_free(srv, kr);
        entry_unref(e);
        return;
    }
    it->frame = kr->frame;
    unsigned flags = kr->flags;
    if (valued && kr->op == FLOE_OP_INSERT)
        flags |= FLOE_BATCH_WANT_VALUES; /* an insert returns each key's stored value */
    it->j.flags = flags;
    it->j.gone = &c->gone;
    it->j.unread = &c->unread;
    /* TREE INSERT and FIND take vectors (4-byte aligned); the rest 8-byte keys or ids; MAP values
     * are read as value_bytes words */
    const bool states = kr->parents_len > 0; /* TREE states by their parents: the parents are 8-byte ids */
    const bool vectors = tree && (kr->op == FLOE_OP_INSERT || kr->op == FLOE_OP_FIND) && !states;
    const bool with_values = valued && kr->op == FLOE_OP_INSERT;
    const void *data = states ? aligned(kr->parents, kr->parents_len, 8, &it->keys_copy)
                              : aligned(kr->keys, kr->keys_len, vectors ? 4 : 8, &it->keys_copy);
    const void *values = with_values ? aligned(kr->values, kr->values_len, spec->value_bytes, &it->values_copy) : NULL;
    char msg[FLOE_ERROR_MAX];
    size_t n = 0;
    floe_status st = shard_check(spec, kr->shard_set, kr->shard, kr->shards, msg, sizeof msg);
    if (st != FLOE_OK)
        ;
    else if ((data || !(states ? kr->parents_len : kr->keys_len)) && (values || !with_values || !kr->values_len))
        st = check_key_request(srv, spec, kr, data, values, &n, msg, sizeof msg);
    else
        st = FLOE_ERR_INTERNAL, snprintf(msg, sizeof msg, "out of memory");
    if (st != FLOE_OK) {
        item_refuse(it, st, msg);
    } else {
        it->j.n = n;
        if (states) {
            it->j.parents = data;
            it->j.change_counts = kr->change_counts;
            it->j.changes = kr->changes;
            it->j.changes_len = kr->changes_len;
            it->j.parent_generation = kr->parent_generation;
        } else if (vectors) {
            it->j.vectors = data;
        } else {
            it->j.keys = data;
        }
        if (with_values) {
            it->j.values = values;
            it->j.values_len = kr->values_len;
        }
    }
    submit(c, e, it);
    entry_unref(e);
}

void request_handle_keys(server *srv, session *c, const envelope *env, void *mem)
{
    key_request kr = {.id = env->id, .frame = mem};
    char table[FLOE_NAME_MAX + 1];
    if (env->table_len > FLOE_NAME_MAX) { /* no table has such a name */
        send_error(c, env->id, FLOE_ERR_NO_TABLE, "no table %.*s", (int)env->table_len, env->table);
        hostmem_put(srv->mem, mem);
        return;
    }
    memcpy(table, env->table, env->table_len);
    table[env->table_len] = '\0';
    kr.table = table;
    kr.keys = env->keys;
    kr.keys_len = env->keys_len;
    kr.values = env->values;
    kr.values_len = env->values_len;
    kr.shard_set = env->shard_set;
    kr.shard = env->shard;
    kr.shards = env->shards;
    switch (env->op) {
    case FLOE__V1__REQUEST__OP_INSERT:
        kr.op = FLOE_OP_INSERT;
        kr.flags = (env->overwrite ? FLOE_BATCH_OVERWRITE : 0) | (env->want_ids ? FLOE_BATCH_WANT_IDS : 0);
        break;
    case FLOE__V1__REQUEST__OP_FIND:
        kr.op = FLOE_OP_FIND;
        kr.flags = (env->want_ids ? FLOE_BATCH_WANT_IDS : 0) | (env->want_values ? FLOE_BATCH_WANT_VALUES : 0);
        kr.values = NULL, kr.values_len = 0;
        break;
    case FLOE__V1__REQUEST__OP_ERASE:
        kr.op = FLOE_OP_ERASE;
        kr.values = NULL, kr.values_len = 0;
        break;
    default:
        kr.op = FLOE_OP_GET;
        kr.values = NULL, kr.values_len = 0;
        break;
    }
    if (atomic_load(&srv->shutting_down)) {
        send_error(c, env->id, FLOE_ERR_SHUTTING_DOWN, "floed is shutting down");
        hostmem_put(srv->mem, mem);
        return;
    }
    handle_key_op(srv, c, &kr);
}

/* A key request unpacked by protobuf-c: takes req over. */
static void handle_unpacked_keys(server *srv, session *c, Floe__V1__Request *req, int op, const char *table,
                                 const ProtobufCBinaryData *keys, const ProtobufCBinaryData *values, unsigned flags)
{
    key_request kr = {.id = req->id,
                      .op = op,
                      .table = table ? table : "",
                      .keys = keys->data,
                      .keys_len = keys->len,
                      .values = values ? values->data : NULL,
                      .values_len = values ? values->len : 0,
                      .flags = flags,
                      .req = req};
    if (req->shard) {
        kr.shard_set = req->shard->shard_set;
        kr.shard = req->shard->shard;
        kr.shards = req->shard->shards;
    }
    if (op == FLOE_OP_INSERT) { /* TREE states by their parents: the unusual shape, unpacked */
        const Floe__V1__Insert *in = req->insert;
        kr.parents = in->parents.data;
        kr.parents_len = in->parents.len;
        kr.change_counts = in->change_counts.data;
        kr.change_counts_len = in->change_counts.len;
        kr.changes = in->changes.data;
        kr.changes_len = in->changes.len;
        kr.parent_generation = in->generation;
    }
    handle_key_op(srv, c, &kr);
}

/* Takes req over. */
static void handle_scan(server *srv, session *c, Floe__V1__Request *req)
{
    const Floe__V1__Scan *s = req->scan;
    table_entry *e = registry_get(&srv->reg, s->table ? s->table : "");
    if (!e) {
        send_error(c, req->id, FLOE_ERR_NO_TABLE, "no table %s", s->table ? s->table : "");
        floe__v1__request__free_unpacked(req, NULL);
        return;
    }
    item *it = item_new(srv, c, req->id, FLOE_OP_SCAN, req);
    if (!it) {
        send_error(c, req->id, FLOE_ERR_INTERNAL, "out of memory");
        floe__v1__request__free_unpacked(req, NULL);
        entry_unref(e);
        return;
    }
    job *j = &it->j;
    j->gone = &c->gone;
    j->unread = &c->unread;
    j->limit = s->limit ? s->limit : FLOE_SCAN_DEFAULT_LIMIT;
    if (j->limit > FLOE_SCAN_MAX_LIMIT)
        j->limit = FLOE_SCAN_MAX_LIMIT;
    const floe_spec *spec = &e->table->spec;
    if (spec->kind == FLOE_KIND_TREE) {
        /* A reply carries limit vectors and ids: keep it a sensible frame. */
        const size_t cap = FLOE_TREE_SCAN_MAX_BYTES / ((size_t)spec->words * 4 + 8);
        if (j->limit > cap)
            j->limit = cap ? cap : 1;
    }
    if (s->want_values)
        j->flags |= FLOE_BATCH_WANT_VALUES;
    if (s->want_ids)
        j->flags |= FLOE_BATCH_WANT_IDS;
    floe_errinfo err;
    floe_status st = request_shard_check(spec, req, err.msg, sizeof err.msg);
    if (st == FLOE_OK)
        st = floe_request_check(spec, FLOE_OP_SCAN, j->flags, NULL, 0, NULL, 0, NULL, &err);
    if (st != FLOE_OK) {
        item_refuse(it, st, err.msg);
    } else if (s->cursor.len == 16) {
        memcpy(&j->cursor.position, s->cursor.data, 8);
        memcpy(&j->cursor.generation, s->cursor.data + 8, 8);
        j->cursor_set = 1;
    } else if (s->cursor.len != 0) {
        item_refuse(it, FLOE_ERR_INVALID,
                    "a scan cursor is empty (start) or the 16 bytes of a previous ScanReply.cursor");
    }
    submit(c, e, it);
    entry_unref(e);
}

/* A range (bound 0), or a min or max (bound METRICS_OP_MIN, METRICS_OP_MAX:
 * a range of one key over every key): takes req over. */
static void handle_range(server *srv, session *c, Floe__V1__Request *req, int bound)
{
    const Floe__V1__Range *rg = req->range;
    const char *name = bound == METRICS_OP_MIN   ? req->min->table
                       : bound == METRICS_OP_MAX ? req->max->table
                                                 : rg->table;
    name = name ? name : "";
    table_entry *e = registry_get(&srv->reg, name);
    if (!e) {
        send_error(c, req->id, FLOE_ERR_NO_TABLE, "no table %s", name);
        floe__v1__request__free_unpacked(req, NULL);
        return;
    }
    item *it = item_new(srv, c, req->id, FLOE_OP_RANGE, req);
    if (!it) {
        send_error(c, req->id, FLOE_ERR_INTERNAL, "out of memory");
        floe__v1__request__free_unpacked(req, NULL);
        entry_unref(e);
        return;
    }
    const floe_spec *spec = &e->table->spec;
    job *j = &it->j;
    j->gone = &c->gone;
    j->unread = &c->unread;
    it->bound = bound;
    bool want_values;
    if (bound) {
        want_values = bound == METRICS_OP_MIN ? req->min->want_values : req->max->want_values;
        it->from = 0;
        it->to = floe_mask_bits(spec->key_bits ? spec->key_bits : 64);
        j->desc = bound == METRICS_OP_MAX;
        j->limit = 1;
    } else {
        want_values = rg->want_values;
        it->from = rg->from;
        it->to = rg->to;
        j->desc = rg->desc;
        j->limit = rg->limit ? rg->limit : FLOE_SCAN_DEFAULT_LIMIT;
        if (j->limit > FLOE_SCAN_MAX_LIMIT)
            j->limit = FLOE_SCAN_MAX_LIMIT;
    }
    j->lo = it->from;
    j->hi = it->to;
    j->flags = want_values ? FLOE_BATCH_WANT_VALUES : 0;
    floe_errinfo err;
    floe_status st = request_shard_check(spec, req, err.msg, sizeof err.msg);
    if (st == FLOE_OK)
        st = floe_range_check(spec, j->flags, j->lo, j->hi, &err);
    if (st != FLOE_OK) {
        item_refuse(it, st, err.msg);
    } else if (!bound && rg->cursor.len != 0) {
        uint64_t next, generation, tag;
        if (rg->cursor.len != RANGE_CURSOR_BYTES) {
            item_refuse(it, FLOE_ERR_INVALID,
                        "a range cursor is empty (the start) or the 24 bytes of a previous ScanReply.cursor of the "
                        "same range");
        } else {
            memcpy(&next, rg->cursor.data, 8);
            memcpy(&generation, rg->cursor.data + 8, 8);
            memcpy(&tag, rg->cursor.data + 16, 8);
            if (tag != range_tag(spec->seed, it->from, it->to, j->desc) || next < j->lo || next > j->hi) {
                item_refuse(it, FLOE_ERR_INVALID,
                            "the range cursor is not one of this range: it comes from another table (or one "
                            "dropped and made again), other bounds or the other direction; start the range again");
            } else {
                if (j->desc)
                    j->hi = next;
                else
                    j->lo = next;
                j->cursor.generation = generation;
                j->cursor_set = 1;
            }
        }
    }
    submit(c, e, it);
    entry_unref(e);
}

/* Takes req over. */
static void handle_stats(server *srv, session *c, Floe__V1__Request *req)
{
    const char *name = req->stats->table ? req->stats->table : "";
    table_entry *e = registry_get(&srv->reg, name);
    if (!e) {
        send_error(c, req->id, FLOE_ERR_NO_TABLE, "no table %s", name);
        floe__v1__request__free_unpacked(req, NULL);
        return;
    }
    item *it = item_new(srv, c, req->id, FLOE_OP_STATS, req);
    if (!it)
        send_error(c, req->id, FLOE_ERR_INTERNAL, "out of memory"), floe__v1__request__free_unpacked(req, NULL);
    else
        submit(c, e, it);
    entry_unref(e);
}

typedef struct info_request {
    server *srv;
    session *c;
    uint64_t id, t_parse;
} info_request;

static void info_done(metrics_view *v, void *arg)
{
    info_request *ir = arg;
    frame *f = metrics_info_reply(ir->srv->metrics, ir->id, v);
    metrics_tag(f, METRICS_OP_INFO, ir->t_parse);
    ir->c->ops->deliver(ir->c, f); /* releases the request's hold on the session */
    request_view_free(v);
    free(ir);
}

static void handle_info(server *srv, session *c, uint64_t id)
{
    c->ops->hold(c); /* until the answer is delivered, like any request in flight */
    info_request *ir = floe_calloc(1, sizeof *ir);
    if (ir) {
        *ir = (info_request){srv, c, id, c->t_frame};
        if (request_gather(srv, info_done, ir) == 0)
            return;
        free(ir);
    }
    frame *f = reply_error(id, FLOE_ERR_INTERNAL, "out of memory gathering info");
    metrics_tag(f, METRICS_OP_INFO, c->t_frame);
    c->ops->deliver(c, f);
}

void request_handle(server *srv, session *c, Floe__V1__Request *req)
{
    const uint64_t id = req->id;
    if (atomic_load(&srv->shutting_down) && req->op_case != FLOE__V1__REQUEST__OP_HELLO &&
        req->op_case != FLOE__V1__REQUEST__OP_PING) {
        send_error(c, id, FLOE_ERR_SHUTTING_DOWN, "floed is shutting down");
        floe__v1__request__free_unpacked(req, NULL);
        return;
    }
    switch (req->op_case) {
    case FLOE__V1__REQUEST__OP_HELLO:
        handle_hello(srv, c, req);
        break;
    case FLOE__V1__REQUEST__OP_PING: { /* a health check: a failed GPU makes floed unwell */
        char why[FLOE_ERROR_MAX];
        const int failed = server_failed_gpu(srv, why, sizeof why);
        if (failed >= 0)
            send_error(c, id, FLOE_ERR_UNAVAILABLE,
                       "GPU %d has failed (%s): its tables answer ERR_UNAVAILABLE until floed restarts", failed, why);
        else
            send_now(c, reply_ok(id));
        break;
    }
    case FLOE__V1__REQUEST__OP_CREATE_TABLE:
        handle_create(srv, c, req);
        break;
    case FLOE__V1__REQUEST__OP_DROP_TABLE:
        handle_drop(srv, c, req);
        break;
    case FLOE__V1__REQUEST__OP_LIST_TABLES:
        handle_list(srv, c, req, FLOE_OP_STATS);
        break;
    case FLOE__V1__REQUEST__OP_SNAPSHOT:
        if (!srv->cfg.data_dir[0])
            send_error(c, id, FLOE_ERR_UNSUPPORTED, "snapshots need a data-dir: start floed with --data-dir DIR");
        else
            handle_list(srv, c, req, FLOE_OP_SAVE);
        break;
    case FLOE__V1__REQUEST__OP_INSERT: {
        const Floe__V1__Insert *in = req->insert;
        unsigned flags = (in->overwrite ? FLOE_BATCH_OVERWRITE : 0) | (in->want_ids ? FLOE_BATCH_WANT_IDS : 0);
        handle_unpacked_keys(srv, c, req, FLOE_OP_INSERT, in->table, &in->keys, &in->values, flags);
        return; /* req owned by the item */
    }
    case FLOE__V1__REQUEST__OP_FIND: {
        const Floe__V1__Find *f = req->find;
        unsigned flags = (f->want_ids ? FLOE_BATCH_WANT_IDS : 0) | (f->want_values ? FLOE_BATCH_WANT_VALUES : 0);
        handle_unpacked_keys(srv, c, req, FLOE_OP_FIND, f->table, &f->keys, NULL, flags);
        return;
    }
    case FLOE__V1__REQUEST__OP_ERASE:
        handle_unpacked_keys(srv, c, req, FLOE_OP_ERASE, req->erase->table, &req->erase->keys, NULL, 0);
        return;
    case FLOE__V1__REQUEST__OP_STATS:
        handle_stats(srv, c, req);
        return;
    case FLOE__V1__REQUEST__OP_SCAN:
        handle_scan(srv, c, req);
        return;
    case FLOE__V1__REQUEST__OP_GET_BY_ID:
        handle_unpacked_keys(srv, c, req, FLOE_OP_GET, req->get_by_id->table, &req->get_by_id->ids, NULL, 0);
        return;
    case FLOE__V1__REQUEST__OP_RANGE:
        handle_range(srv, c, req, 0);
        return;
    case FLOE__V1__REQUEST__OP_MIN:
        handle_range(srv, c, req, METRICS_OP_MIN);
        return;
    case FLOE__V1__REQUEST__OP_MAX:
        handle_range(srv, c, req, METRICS_OP_MAX);
        return;
    case FLOE__V1__REQUEST__OP_SUCCESSOR: {
        const Floe__V1__Successor *q = req->successor;
        handle_unpacked_keys(srv, c, req, FLOE_OP_SUCC, q->table, &q->keys, NULL,
                             q->want_values ? FLOE_BATCH_WANT_VALUES : 0);
        return;
    }
    case FLOE__V1__REQUEST__OP_PREDECESSOR: {
        const Floe__V1__Predecessor *q = req->predecessor;
        handle_unpacked_keys(srv, c, req, FLOE_OP_PRED, q->table, &q->keys, NULL,
                             q->want_values ? FLOE_BATCH_WANT_VALUES : 0);
        return;
    }
    case FLOE__V1__REQUEST__OP_INFO:
        handle_info(srv, c, id);
        break;
    default:
        send_error(c, id, FLOE_ERR_INVALID, "unknown or missing operation in request %llu", (unsigned long long)id);
        break;
    }
    floe__v1__request__free_unpacked(req, NULL);
}
