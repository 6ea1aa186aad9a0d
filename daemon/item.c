/*
 * item.c - items (see item.h): one request's job from its handler to its
 * answer, and the answers of several tables at once.
 *
 * A handler (daemon/ops/) makes an item: its table's job, with the saver's
 * part (save_job: a snapshot's file, a dropped table's file) and what the
 * response needs (its session, id and the decoded request, whose key bytes
 * the job points into).  When its batch ends, item_done answers with its
 * row's reply builder, or with its slice of the batch's key answers, packed
 * later by the connection's io thread (request_pack).  list_tables,
 * snapshot and info fan out to every table and gather the answers into one
 * response; the snapshots the rules call for go the same way.
 */
#define _GNU_SOURCE
#include "item.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "backend_gpu.h"
#include "datadir.h"
#include "hostmem.h"
#include "log.h"
#include "tablefile.h"

/* Aggregates the STATS (LIST, gathers) or COPY (SNAPSHOT) items of several
 * tables into one response; the multi holds the session's hold. */
struct multi {
    pthread_mutex_t lock;
    int left;
    session *c;
    uint64_t id;
    const request_row *row; /* list_tables or snapshot (NULL: a gather's STATS) */
    int op;                 /* FLOE_OP_STATS or FLOE_OP_SAVE */
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

item *item_new(server *srv, session *c, uint64_t id, const request_row *row, int op, Floe__V1__Request *req)
{
    item *it = floe_calloc(1, sizeof *it);
    if (!it)
        return NULL;
    it->srv = srv;
    it->c = c;
    it->id = id;
    it->row = row;
    it->req = req;
    it->j.op = op;
    it->j.lane = c ? c->lane : 0; /* its connection's order holds in one lane */
    it->j.done = item_done;
    it->j.t_parse = c ? c->t_frame : 0;
    return it;
}

void item_free(item *it)

{
    if (!it)
        return;
    if (it->req)
        floe__v1__request__free_unpacked(it->req, NULL);
    hostmem_put(it->srv->mem, it->frame);
    free(it->keys_copy);
    free(it->values_copy);
    free(it->explore_copy);
    free(it->pre_error);
    free(it->path);
    floe_file_image_free(it->save.image);
    if (it->entry)
        entry_unref(it->entry);
    batch_out_release(it->out);
    free(it);
}

void item_refuse(item *it, floe_status st, const char *msg)
{
    it->j.pre_status = st;
    free(it->pre_error);
    it->pre_error = floe_strdup(msg);
    it->j.pre_error = it->pre_error;
}

/* Its request's hold on the session goes with the answer. */
void item_answer(item *it, frame *f)
{
    metrics_tag(f, it->row ? it->row->metric : METRICS_OP_UNKNOWN, it->j.t_parse);
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
        item_answer(it, st == FLOE_OK ? reply_ok(it->id) : reply_error(it->id, st, msg));
    }
}

/* ---- key answers -------------------------------------------------------------------------------- */

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
    if (floe_op_has(it->j.op, FLOE_OPF_VECTORS_OUT) && o->vectors_out) {
        r.vectors.data = (uint8_t *)(o->vectors_out + at * o->words);
        r.vectors.len = n * o->words * 4;
    }
    if (o->keys_out) { /* successor, predecessor */
        r.keys.data = (uint8_t *)(o->keys_out + at);
        r.keys.len = n * 8;
    }
    if (floe_op_has(it->j.op, FLOE_OPF_IDS_OUT)) /* the generation its ids are of */
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

/* An exploring table's insert answered: the states it stored new (answered
 * INSERTED) join the open set with their parents and labels, and then the
 * claim it names ends: a claim never ends before its successors are in, so
 * DONE is never answered early (tables/explore.h).  On the io thread that
 * packs the answer (several at once), in each connection's order, before
 * the answer goes: the table's lane only runs batches.  If they cannot (no
 * room for the open set where the table lives), the insert is answered
 * with the error: its worker must not count on a run that misses states. */
static floe_status explore_record(item *it, const batch_out *o, size_t at, floe_errinfo *err)
{
    table_entry *t = it->entry;
    const floe_spec *spec = &t->table->spec;
    const void *keys = it->j.vectors ? (const void *)it->j.vectors : (const void *)it->j.keys;
    floe_status st =
        it->explore_runs.counts
            ? floe_explore_add_runs(t->explore, keys, &it->explore_runs, it->explore_from_depth, it->explore_labels,
                                    o->results + at, it->j.n, NULL, it->explore_complete, err)
            : floe_explore_add(t->explore, keys, it->explore_from, it->explore_from_depth, it->explore_labels,
                               o->results + at, it->j.n, NULL, it->explore_complete, err);
    if (st != FLOE_OK) { /* the run misses states: say so loudly, here and to the worker */
        log_error("table %s: the states a batch found could not join the open set (%s): the run is incomplete",
                  spec->name, err->msg);
        char msg[FLOE_ERROR_MAX];
        snprintf(msg, sizeof msg, "%s", err->msg);
        floe_errinfo_set(err, st,
                         "the states this insert found could not join the open set (%s): the run is incomplete", msg);
    }
    return st;
}

/* A keyed request's answer: its exploring table's open set first, then the
 * answers, or the error that kept its new states out of the open set. */
static frame *keys_answer(item *it, const batch_out *o, size_t at)
{
    floe_errinfo err;
    const floe_status st = it->explore ? explore_record(it, o, at, &err) : FLOE_OK;
    return st == FLOE_OK ? key_reply(o, it, at) : reply_error(it->id, st, err.msg);
}

frame *request_pack(frame *f)
{
    item *it = f->pending;
    frame *packed = keys_answer(it, it->out, it->at);
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

/* Packing 64 Ki answers and freeing the request are spread over the io
 * threads instead of holding up this table's next batch. */
void item_answer_later(item *it, batch_out *o, size_t at)
{
    frame *f = floe_calloc(1, sizeof *f);
    if (!f) { /* pack it here, then */
        item_answer(it, keys_answer(it, o, at));
        return;
    }
    batch_out_hold(o);
    it->out = o;
    it->at = at;
    f->pending = it;
    f->req_op = it->row->metric;
    f->t_parse = it->j.t_parse;
    f->keys = it->j.n;
    f->status = FLOE_OK;
    it->c->ops->deliver(it->c, f);
}

/* ---- ends ---------------------------------------------------------------------------------- */

/* The saver wrote a snapshot, or removed a dropped table's file. */
void item_saved(save_job *sj, floe_status st, const char *error)
{
    item_end(QUEUE_ENTRY(sj, item, save), st, error);
}

/* A snapshot's image taken (or not: st): the saver writes it (or reports its failure) in turn. */
static void image_taken(item *it, floe_file_image *im, uint64_t changes, floe_status st, const char *error)
{
    it->save.image = im;
    it->save.changes = changes;
    it->save.status = st;
    if (st != FLOE_OK) {
        free(it->pre_error);
        it->pre_error = floe_strdup(error);
        it->save.error = it->pre_error;
    }
    saver_queue(it->srv->saver, &it->save);
}

/* A COPY ran. */
static void copy_done(item *it, floe_batch *b, uint64_t changes)
{
    image_taken(it, b->image, changes, b->status, b->error.msg);
    b->image = NULL;
}

/* A snapshot item on its way: a COPY in the table's order, or an exploring
 * table's open set, taken at once (registry.h: it holds every insert
 * answered before). */
static floe_status snapshot_submit(table_entry *e, item *it)
{
    if (!e->explore)
        return batcher_submit(&e->bt, &it->j);
    floe_errinfo err;
    floe_file_image *im = NULL;
    const uint64_t changes = atomic_load(&e->bt.changes);
    const floe_status st = entry_open_set_image(e, &im, &err);
    image_taken(it, im, changes, st, err.msg);
    return FLOE_OK;
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
        item_answer(it, NULL); /* releases its hold on the session */
        return;
    }
    if (j->op == JOB_DRAIN) {
        drain_done(it, e->status, e->error);
        return;
    }
    floe_batch *b = e->b;
    if (b && b->op == FLOE_OP_STATS && b->status == FLOE_OK && it->entry)
        entry_count_open_set(it->entry, &b->stats);
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
        item_answer(it, reply_error(it->id, b->status, b->error.msg));
    } else if (it->row && it->row->reply) {
        item_answer(it, it->row->reply(e, it));
    } else if (e->out) {
        item_answer_later(it, e->out, e->at);
    } else {
        item_answer(it, reply_ok(it->id));
    }
}

/* ---- one response for several tables ------------------------------------------------------- */

multi *multi_new(session *c, uint64_t id, const request_row *row, size_t n)
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
    m->row = row;
    m->op = row ? row->op : FLOE_OP_STATS;
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
    metrics_tag(f, m->row->metric, m->t_parse);
    m->c->ops->deliver(m->c, f);
    multi_free(m);
}

/* A COPY item for e's table, answered to c (NULL: a snapshot by the rules,
 * answered to nobody), or NULL if out of memory. */
static item *snapshot_item(server *srv, session *c, uint64_t id, const request_row *row, table_entry *e)
{
    item *it = item_new(srv, c, id, row, FLOE_OP_COPY, NULL);
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
    it->save.done = item_saved;
    return it;
}

/* A part that cannot go ends at once. */
void multi_fan_out(server *srv, multi *m, table_entry **all, size_t n, const char *only)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (only[0] && strcmp(all[i]->name, only) != 0)
            continue;
        /* a snapshot is written by the saver */
        item *it = m->op == FLOE_OP_SAVE ? snapshot_item(srv, m->c, m->id, m->row, all[i])
                                         : item_new(srv, m->c, m->id, m->row, m->op, NULL);
        if (it) {
            it->multi = m;
            it->multi_index = k;
            if (!it->entry && all[i]->explore) { /* its figures count the open set (item_done) */
                entry_ref(all[i]);
                it->entry = all[i];
            }
        }
        const floe_status st = !it                     ? FLOE_ERR_INTERNAL
                               : m->op == FLOE_OP_SAVE ? snapshot_submit(all[i], it)
                                                       : batcher_submit(&all[i]->bt, &it->j);
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
    floe_explore_counts *explore;
    bool *explores;
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
    free(g->explore);
    free(g->explores);
    free(g);
}

static void gather_done(multi *m)
{
    gathered *g = m->arg;
    g->v.tables = (metrics_tables){m->n, m->stats, m->have, g->changes, g->last_snapshot, g->explore, g->explores};
    g->done(&g->v, g->arg);
}

int request_gather(server *srv, void (*done)(metrics_view *v, void *arg), void *arg)
{
    gathered *g = floe_calloc(1, sizeof *g);
    size_t n = 0;
    table_entry **all = g ? registry_list(&srv->reg, &n) : NULL;
    if (g && all) {
        g->m = multi_new(NULL, 0, NULL, n);
        g->changes = floe_calloc(n + 1, sizeof *g->changes);
        g->last_snapshot = floe_calloc(n + 1, sizeof *g->last_snapshot);
        g->explore = floe_calloc(n + 1, sizeof *g->explore);
        g->explores = floe_calloc(n + 1, sizeof *g->explores);
    }
    const bool ok = all && g->m && g->changes && g->last_snapshot && g->explore && g->explores;
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
        v->maxmemory = atomic_load(&srv->live.maxmemory);
        v->maxmemory_gpu = atomic_load(&srv->live.maxmemory_gpu);
        g->done = done;
        g->arg = arg;
        g->m->done = gather_done;
        g->m->arg = g;
        for (size_t i = 0; i < n; i++) { /* before any part can finish the multi */
            g->changes[i] = atomic_load(&all[i]->bt.changes) - atomic_load(&all[i]->saved_changes);
            g->last_snapshot[i] = atomic_load(&all[i]->saved_at);
            if ((g->explores[i] = all[i]->explore != NULL))
                floe_explore_stats(all[i]->explore, &g->explore[i]);
        }
        multi_fan_out(srv, g->m, all, n, "");
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
        const bool due =
            ((changes > 0 || never_saved) && every && now - atomic_load(&e->last_save) >= (int64_t)every) ||
            (after && changes > 0 && changes >= after);
        if (!due || now < atomic_load(&e->retry_after) || atomic_exchange(&e->snapshot_pending, true))
            continue;
        item *it = snapshot_item(srv, NULL, 0, NULL, e);
        if (it)
            it->save.by_rules = true;
        if (!it || snapshot_submit(e, it) != FLOE_OK) { /* out of memory, or dropped meanwhile */
            item_free(it);
            atomic_store(&e->snapshot_pending, false);
        }
    }
    for (size_t i = 0; all && i < n; i++)
        entry_unref(all[i]);
    free(all);
}

/* ---- handing items to their tables (io thread) ------------------------------------------------- */

void item_submit(session *c, table_entry *e, item *it)
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
    item_answer(it, reply_error(it->id, st, msg));
}

table_entry *request_table(server *srv, session *c, uint64_t id, const char *name, Floe__V1__Request *req)
{
    name = name ? name : "";
    table_entry *e = registry_get(&srv->reg, name);
    if (!e) {
        c->ops->send(c, reply_errorf(id, FLOE_ERR_NO_TABLE, "no table %s", name));
        if (req)
            floe__v1__request__free_unpacked(req, NULL);
    }
    return e;
}

item *request_item(server *srv, session *c, Floe__V1__Request *req, const request_row *row, table_entry *e)
{
    floe_errinfo err;
    /* the door for a row of the table as a whole (its kinds): the batch goes on marked checked */
    if (row->op && floe_op_def(row->op)->shape == FLOE_SHAPE_TABLE &&
        floe_request_check(&e->table->spec, (floe_op)row->op, 0, NULL, 0, NULL, 0, NULL, &err) != FLOE_OK) {
        c->ops->send(c, reply_error(req->id, err.code, err.msg));
        floe__v1__request__free_unpacked(req, NULL);
        entry_unref(e);
        return NULL;
    }
    item *it = item_new(srv, c, req->id, row, row->op, req);
    if (!it) {
        c->ops->send(c, reply_errorf(req->id, FLOE_ERR_INTERNAL, "out of memory"));
        floe__v1__request__free_unpacked(req, NULL);
        entry_unref(e);
    }
    return it;
}
