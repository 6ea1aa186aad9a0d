/*
 * batcher.c - per-table batching (see batcher.h).
 *
 * launch_locked() runs with the batcher's lock held and the backend idle: it
 * answers items that need no engine work (validation errors, DRAIN), then
 * takes the longest run of compatible items from the head of the queue and
 * submits them as one floe_batch.  batch_done() runs on the backend's
 * thread: it slices the batch's answers back into one response per item,
 * hands each to its connection, and launches the next batch.
 */
#define _GNU_SOURCE
#include "batcher.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "conn.h"
#include "log.h"
#include "metrics.h"
#include "partition.h"
#include "pool.h"
#include "registry.h"
#include "reply.h"
#include "server.h"
#include "snapshot.h"
#include "tablefile.h"

item *item_new(struct conn *c, uint64_t id, int op, Floe__V1__Request *req)
{
    item *it = floe_calloc(1, sizeof *it);
    if (!it)
        return NULL;
    it->c = c;
    it->id = id;
    it->op = op;
    it->req = req;
    it->t_parse = c ? c->t_frame : 0;
    return it;
}

void item_free(item *it)
{
    if (!it)
        return;
    if (it->req)
        floe__v1__request__free_unpacked(it->req, NULL);
    free(it->keys_copy);
    free(it->pre_error);
    free(it->path);
    floe_file_image_free(it->image);
    if (it->entry)
        entry_unref(it->entry);
    free(it);
}

void batcher_init(batcher *bt, struct server *srv, floe_table *table)
{
    memset(bt, 0, sizeof *bt);
    pthread_mutex_init(&bt->lock, NULL);
    bt->srv = srv;
    bt->table = table;
    bt->value_bytes = table->spec.kind == FLOE_KIND_MAP ? table->spec.value_bytes : 0;
    const unsigned depth = BATCHER_DEPTH_PER_PART * floe_backend_parts(table->backend);
    bt->depth = depth < BATCHER_DEPTH_MAX ? depth : BATCHER_DEPTH_MAX;
    for (int i = 0; i < BATCHER_DEPTH_MAX; i++)
        bt->slots[i].bt = bt;
    bt->words = table->spec.kind == FLOE_KIND_TREE ? table->spec.words : 0;
    atomic_init(&bt->last_save, (int_fast64_t)time(NULL));
}

void batcher_destroy(batcher *bt)
{
    for (int i = 0; i < BATCHER_DEPTH_MAX; i++) {
        free(bt->slots[i].keys_buf);
        free(bt->slots[i].values_buf);
    }
    pthread_mutex_destroy(&bt->lock);
}

/* Answers it and frees it (its request's reference on the connection goes
 * with the answer). */
static void answer(item *it, frame *f)
{
    metrics_tag(f, metrics_op_of_item(it->op), it->t_parse);
    conn_deliver(it->c, f);
    item_free(it);
}

void batcher_item_done(item *it, floe_status st, const char *msg)
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

static bool is_key_op(int op)
{
    return op == FLOE_OP_INSERT || op == FLOE_OP_FIND || op == FLOE_OP_ERASE || op == FLOE_OP_GET;
}

/* Bytes per key of op on this table: a vector for TREE INSERT and FIND,
 * else 8 (a key, or the id of a GET). */
static size_t key_bytes(const batcher *bt, int op)
{
    return bt->words && (op == FLOE_OP_INSERT || op == FLOE_OP_FIND) ? (size_t)bt->words * 4 : 8;
}

static const void *item_keys(const item *it)
{
    return it->vectors ? (const void *)it->vectors : (const void *)it->keys;
}

/* Requests are merged into one batch up to max-batch-keys keys and this many
 * bytes of keys and vectors out (a TREE's vectors are large; SET and MAP
 * batches stay far below it). */
#define MERGE_MAX_BYTES ((size_t)256 << 20)

static void batch_done(floe_batch *b);

static void out_release(batch_out *o)
{
    if (!o || atomic_fetch_sub(&o->refs, 1) != 1)
        return;
    free(o->results);
    free(o->ids);
    free(o->values_out);
    free(o->vectors_out);
    free(o);
}

/* A batch's answer buffers for n keys (NULL if out of memory). */
static batch_out *out_new(const batcher *bt, int op, unsigned flags, size_t n)
{
    batch_out *o = floe_calloc(1, sizeof *o);
    if (!o)
        return NULL;
    atomic_init(&o->refs, 1);
    o->value_bytes = bt->value_bytes;
    o->words = bt->words;
    const size_t vb = bt->value_bytes;
    bool ok = (o->results = floe_malloc(n + 1)) != NULL;
    if (flags & FLOE_BATCH_WANT_IDS)
        ok = ok && (o->ids = floe_malloc(n * 8 + 8));
    if ((flags & FLOE_BATCH_WANT_VALUES) && vb)
        ok = ok && (o->values_out = floe_malloc(n * vb + 8));
    if (op == FLOE_OP_GET)
        ok = ok && (o->vectors_out = floe_malloc(n * bt->words * 4 + 8));
    if (!ok) {
        out_release(o);
        return NULL;
    }
    return o;
}

/* Grows *buf to at least need bytes (contents not kept). */
static bool reserve(void **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return true;
    free(*buf);
    *cap = 0;
    if (!(*buf = floe_malloc(need)))
        return false;
    *cap = need;
    return true;
}

/* After a batch: the answers go with the responses; merge buffers stay. */
static void free_buffers(batch_slot *sl)
{
    out_release(sl->out);
    free(sl->scan_keys);
    free(sl->scan_values);
    free(sl->scan_vectors);
    sl->out = NULL;
    sl->scan_keys = NULL;
    sl->scan_values = NULL;
    sl->scan_vectors = NULL;
}

/* One item's keys (and values) to position at of the slot's buffers. */
static void copy_item(batch_slot *sl, const item *it, size_t at, size_t kb, bool with_values)
{
    const size_t vb = sl->bt->value_bytes;
    if (it->n)
        memcpy((unsigned char *)sl->keys_buf + at * kb, item_keys(it), it->n * kb);
    if (with_values)
        memcpy(sl->values_buf + at * vb, it->values, it->n * vb);
}

typedef struct {
    batch_slot *sl;
    const item **items;
    size_t *at; /* where each item's keys go */
    size_t kb;
    bool with_values;
} merge_job;

static void merge_task(void *arg, size_t i)
{
    const merge_job *j = arg;
    copy_item(j->sl, j->items[i], j->at[i], j->kb, j->with_values);
}

/* Copies the items' keys (and values) one after another into the slot's
 * buffers.  Large merges are spread over the server's merge pool: they run
 * under the batcher's lock, and one thread copies a few GB/s. */
static void merge_items(batcher *bt, batch_slot *sl, item *first, size_t kb, bool with_values)
{
    enum { SMALL = 1 << 20, MAX_ITEMS = 256 };
    const item *items[MAX_ITEMS];
    size_t at[MAX_ITEMS], n = 0, total = 0;
    const item *it = first;
    for (; it && n < MAX_ITEMS; it = it->next) {
        items[n] = it;
        at[n++] = total;
        total += it->n;
    }
    if (!it && n > 1 && total * kb >= SMALL) { /* all of them listed, and worth the threads */
        merge_job j = {sl, items, at, kb, with_values};
        floe_pool_run(bt->srv->merge_pool, n, merge_task, &j);
        return;
    }
    size_t off = 0;
    for (it = first; it; it = it->next) {
        copy_item(sl, it, off, kb, with_values);
        off += it->n;
    }
}

/* A request whose client has gone: nobody will read its answer, and the
 * client cannot tell whether it ran (as for any request in flight when a
 * connection breaks), so it is dropped instead of run.  A client that sends
 * and disconnects, again and again, then costs no engine time. */
static bool abandoned(const item *it)
{
    return it->c && !it->multi && (is_key_op(it->op) || it->op == FLOE_OP_SCAN) && atomic_load(&it->c->gone);
}

static void drop_abandoned(batcher *bt)
{
    item *prev = NULL;
    for (item *it = bt->head, *next; it; it = next) {
        next = it->next;
        if (!abandoned(it)) {
            prev = it;
            continue;
        }
        if (prev)
            prev->next = next;
        else
            bt->head = next;
        if (bt->tail == it)
            bt->tail = prev;
        answer(it, NULL); /* releases its hold on the connection */
    }
}

/* Returns the table entry to reap if a DRAIN was answered: the caller hands
 * it to server_reap after unlocking, because reaping frees this batcher. */
static struct table_entry *launch_locked(batcher *bt)
{
    const uint64_t max_keys = LIVE(bt->srv, max_batch_keys);
    struct table_entry *reap = NULL;
    if (bt->inflight < bt->depth)
        drop_abandoned(bt);
    while (bt->inflight < bt->depth && bt->head) {
        item *first = bt->head;
        if (first->pre_status != FLOE_OK || first->op == ITEM_DRAIN) {
            if (bt->inflight > 0)
                break; /* answered in its turn: after the batches before it */
            bt->head = first->next;
            if (!bt->head)
                bt->tail = NULL;
            if (first->op == ITEM_DRAIN) {
                /* Everything queued before the drop has been answered (and
                 * its snapshots handed to the saver: the file goes after them). */
                reap = first->drop;
                if (first->path)
                    saver_remove(bt->srv->saver, first);
                else
                    answer(first, reply_ok(first->id));
            } else {
                batcher_item_done(first, first->pre_status, first->pre_error);
            }
            continue;
        }
        /* The run of compatible items at the head. */
        size_t n = first->n, count = 1;
        unsigned flags = first->flags;
        item *last = first;
        const size_t kb = key_bytes(bt, first->op);
        if (is_key_op(first->op)) {
            const size_t per_key = kb + (first->op == FLOE_OP_GET ? (size_t)bt->words * 4 : 0);
            for (item *it = first->next; it; it = it->next) {
                if (it->op != first->op || it->pre_status != FLOE_OK ||
                    (it->flags & FLOE_BATCH_OVERWRITE) != (first->flags & FLOE_BATCH_OVERWRITE) ||
                    n + it->n > max_keys || (n + it->n) * per_key > MERGE_MAX_BYTES)
                    break;
                n += it->n;
                flags |= it->flags;
                last = it;
                count++;
            }
        }
        bt->head = last->next;
        if (!bt->head)
            bt->tail = NULL;
        last->next = NULL;
        batch_slot *sl = &bt->slots[bt->next];
        sl->running = first;
        const uint64_t t_launch = floe_now_ns();
        for (item *it = first; it; it = it->next)
            if (it->t_queued)
                floe_stage_add(&bt->stage[FLOE_STAGE_QUEUE], it->n, t_launch - it->t_queued);

        floe_batch *b = &sl->b;
        memset(b, 0, sizeof *b);
        b->op = (floe_op)first->op;
        b->flags = flags;
        b->done = batch_done;
        b->user = sl;
        const size_t vb = bt->value_bytes;
        bool ok = true;
        if (is_key_op(first->op)) {
            b->n = n;
            const void *keys;
            if (count == 1) {
                keys = item_keys(first);
                b->values = first->values;
                b->values_len = first->values_len;
            } else {
                const bool with_values = first->op == FLOE_OP_INSERT && vb;
                ok = reserve(&sl->keys_buf, &sl->keys_cap, n * kb + 8) &&
                     (!with_values || reserve((void **)&sl->values_buf, &sl->values_cap, n * vb + 8));
                if (ok)
                    merge_items(bt, sl, first, kb, with_values);
                keys = sl->keys_buf;
                b->values = with_values ? sl->values_buf : NULL;
                b->values_len = with_values ? n * vb : 0;
                floe_stage_add(&bt->stage[FLOE_STAGE_MERGE], n, floe_now_ns() - t_launch);
            }
            if (kb == 8)
                b->keys = keys;
            else
                b->vectors = keys;
            sl->out = out_new(bt, first->op, flags, n);
            ok = ok && sl->out;
            if (sl->out) {
                b->results = sl->out->results;
                b->ids = sl->out->ids;
                b->values_out = sl->out->values_out;
                b->vectors_out = sl->out->vectors_out;
            }
        } else if (first->op == FLOE_OP_SCAN) {
            b->cursor = first->cursor;
            b->cursor_set = first->cursor_set;
            b->limit = first->limit;
            b->flags = flags & FLOE_BATCH_WANT_VALUES; /* want_ids of a TREE scan is the reply's business */
            b->scan_keys = sl->scan_keys = floe_malloc(first->limit * 8 + 8);
            if (flags & FLOE_BATCH_WANT_VALUES)
                b->scan_values = sl->scan_values = floe_malloc(first->limit * (vb ? vb : 1) + 8);
            if (bt->words) /* a TREE: ids in scan_keys, the vectors here */
                b->scan_vectors = sl->scan_vectors = floe_malloc(first->limit * bt->words * 4 + 8);
            ok = sl->scan_keys && (!(flags & FLOE_BATCH_WANT_VALUES) || sl->scan_values) &&
                 (!bt->words || sl->scan_vectors);
        }
        if (!ok) {
            log_error("table %s: out of memory for a batch of %zu keys", bt->table->spec.name, n);
            for (item *it = first, *next; it; it = next) {
                next = it->next;
                batcher_item_done(it, FLOE_ERR_INTERNAL, "out of memory for this batch");
            }
            sl->running = NULL;
            free_buffers(sl);
            continue;
        }
        bt->next = (bt->next + 1) % bt->depth;
        bt->inflight++;
        sl->t_submit = floe_now_ns();
        floe_table_submit(bt->table, b);
    }
    return reap;
}

floe_status batcher_submit(batcher *bt, item *it)
{
    pthread_mutex_lock(&bt->lock);
    if (bt->closed) {
        pthread_mutex_unlock(&bt->lock);
        return atomic_load(&bt->srv->shutting_down) ? FLOE_ERR_SHUTTING_DOWN : FLOE_ERR_NO_TABLE;
    }
    if (it->op == ITEM_DRAIN)
        bt->closed = true;
    if (it->t_parse && is_key_op(it->op)) {
        it->t_queued = floe_now_ns();
        floe_stage_add(&bt->stage[FLOE_STAGE_PARSE], it->n, it->t_queued - it->t_parse);
    }
    it->next = NULL;
    if (bt->tail)
        bt->tail->next = it;
    else
        bt->head = it;
    bt->tail = it;
    struct server *srv = bt->srv;
    struct table_entry *reap = launch_locked(bt);
    pthread_mutex_unlock(&bt->lock);
    if (reap)
        server_reap(srv, reap);
    return FLOE_OK;
}

void batcher_shutdown(batcher *bt)
{
    pthread_mutex_lock(&bt->lock);
    bt->closed = true;
    item *list = bt->head;
    bt->head = bt->tail = NULL;
    pthread_mutex_unlock(&bt->lock);
    while (list) {
        item *it = list;
        list = it->next;
        if (it->op == ITEM_DRAIN) {
            server_reap(bt->srv, it->drop);
            if (it->path) { /* the table is gone from the registry: its file must go too */
                saver_remove(bt->srv->saver, it);
                continue;
            }
        }
        batcher_item_done(it, FLOE_ERR_SHUTTING_DOWN, "floed is shutting down");
    }
}

bool batcher_idle(batcher *bt)
{
    pthread_mutex_lock(&bt->lock);
    bool idle = bt->inflight == 0 && !bt->head;
    pthread_mutex_unlock(&bt->lock);
    return idle;
}

/* The response of one key-operation item: its slice [at, at + n) of o. */
static frame *key_reply(const batch_out *o, const item *it, size_t at)
{
    Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
    const size_t n = it->n, vb = o->value_bytes;
    r.id = it->id;
    r.results.data = o->results + at;
    r.results.len = n;
    if ((it->flags & FLOE_BATCH_WANT_IDS) && o->ids) {
        r.ids.data = (uint8_t *)(o->ids + at);
        r.ids.len = n * 8;
    }
    if ((it->flags & FLOE_BATCH_WANT_VALUES) && vb && o->values_out) {
        r.values.data = o->values_out + at * vb;
        r.values.len = n * vb;
    }
    if (it->op == FLOE_OP_GET && o->vectors_out) {
        r.vectors.data = (uint8_t *)(o->vectors_out + at * o->words);
        r.vectors.len = n * o->words * 4;
    }
    floe_answer_counts c;
    floe_answer_counts_tally(&c, r.results.data, n);
    r.inserted = c.inserted;
    r.present = c.present;
    r.absent = c.absent;
    r.full = c.full;
    r.erased = c.erased;
    return reply_pack(&r);
}

frame *batcher_pack(frame *f)
{
    frame *packed = key_reply(f->out, f->item, f->at);
    if (packed)
        packed->to = f->to;
    item_free(f->item);
    out_release(f->out);
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
    atomic_fetch_add(&o->refs, 1);
    f->item = it;
    f->out = o;
    f->at = at;
    conn_deliver(it->c, f);
}

static frame *scan_reply(const batcher *bt, const floe_batch *b, const item *it)
{
    Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
    Floe__V1__ScanReply sr = FLOE__V1__SCAN_REPLY__INIT;
    uint8_t cursor[16];
    memcpy(cursor, &b->next.position, 8);
    memcpy(cursor + 8, &b->next.generation, 8);
    r.id = it->id;
    if (bt->words) { /* a TREE: the vectors are the keys; ids on request */
        sr.keys.data = (uint8_t *)b->scan_vectors;
        sr.keys.len = b->scan_n * bt->words * 4;
        if (it->flags & FLOE_BATCH_WANT_IDS) {
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
    sr.cursor.len = sizeof cursor;
    sr.done = b->scan_done != 0;
    r.body_case = FLOE__V1__RESPONSE__BODY_SCAN;
    r.scan = &sr;
    return reply_pack(&r);
}

static frame *stats_reply(batcher *bt, floe_batch *b, const item *it)
{
    /* the engine's stages come with its stats; the daemon's and the io threads' are added here */
    pthread_mutex_lock(&bt->lock);
    for (int s = 0; s < FLOE_STAGES; s++)
        if (bt->stage[s].count)
            b->stats.stage[s] = bt->stage[s];
    pthread_mutex_unlock(&bt->lock);
    b->stats.stage[FLOE_STAGE_IO_CPU] = server_io_cpu(bt->srv);
    Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
    Floe__V1__TableStats ts;
    reply_stats_room room;
    reply_fill_stats(&ts, &room, 1, &b->stats);
    r.id = it->id;
    r.body_case = FLOE__V1__RESPONSE__BODY_STATS;
    r.stats = &ts;
    return reply_pack(&r);
}

static void batch_done(floe_batch *b)
{
    batch_slot *sl = b->user;
    batcher *bt = sl->bt;
    item *list = sl->running;
    sl->running = NULL;
    const uint64_t t_done = floe_now_ns();
    if (is_key_op(b->op)) {
        pthread_mutex_lock(&bt->lock);
        floe_stage_add(&bt->stage[FLOE_STAGE_BACKEND], b->n, t_done - sl->t_submit);
        pthread_mutex_unlock(&bt->lock);
        if (b->status == FLOE_OK)
            atomic_fetch_add(&bt->changes, b->counts.inserted + b->counts.erased);
    }
    /* floed's own failures are errors; a client's mistake (a bad scan cursor, a table too full to
     * grow) is the client's answer, and a debug line at most: a client could flood the log */
    if (b->status != FLOE_OK && b->op != FLOE_OP_COPY)
        log_msg(b->status == FLOE_ERR_INTERNAL ? LOG_ERROR : LOG_DEBUG, "table %s: %s batch failed: %s",
                bt->table->spec.name,
                b->op == FLOE_OP_INSERT ? "insert"
                : b->op == FLOE_OP_FIND ? "find"
                : b->op == FLOE_OP_GET  ? "get_by_id"
                                        : "engine",
                b->error.msg);
    size_t at = 0;
    while (list) {
        item *it = list;
        list = it->next;
        const size_t step = is_key_op(b->op) ? it->n : 0; /* it is freed once answered */
        if (it->op == FLOE_OP_COPY) {
            it->image = b->image;
            b->image = NULL;
            it->changes = atomic_load(&bt->changes);
            saver_write(bt->srv->saver, it, b->status, b->error.msg);
        } else if (it->multi) {
            multi_part_done(it->multi, it->multi_index, b->status, b->error.msg,
                            b->op == FLOE_OP_STATS ? &b->stats : NULL);
            item_free(it);
        } else if (b->status != FLOE_OK) {
            answer(it, reply_error(it->id, b->status, b->error.msg));
        } else if (is_key_op(it->op)) {
            answer_later(it, sl->out, at);
        } else if (it->op == FLOE_OP_SCAN) {
            answer(it, scan_reply(bt, b, it));
        } else if (it->op == FLOE_OP_STATS) {
            answer(it, stats_reply(bt, b, it));
        } else {
            answer(it, reply_ok(it->id));
        }
        at += step;
    }
    free_buffers(sl);
    struct server *srv = bt->srv;
    pthread_mutex_lock(&bt->lock);
    if (is_key_op(b->op))
        floe_stage_add(&bt->stage[FLOE_STAGE_REPLY], b->n, floe_now_ns() - t_done);
    bt->inflight--; /* sl (and b) may be reused from here on */
    struct table_entry *reap = launch_locked(bt);
    pthread_mutex_unlock(&bt->lock);
    if (reap)
        server_reap(srv, reap);
}

/* ---- one response for several tables ------------------------------------------------------- */

multi *multi_new(struct conn *c, uint64_t id, int op, size_t n)
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

void multi_part_done(multi *m, size_t index, floe_status st, const char *error, const floe_table_stats *stats)
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
    frame *f;
    if (m->op == FLOE_OP_SAVE) {
        f = m->status == FLOE_OK ? reply_ok(m->id) : reply_error(m->id, m->status, m->error);
    } else {
        /* LIST: the tables that answered (one dropped meanwhile is left out). */
        Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
        Floe__V1__TableList tl = FLOE__V1__TABLE_LIST__INIT;
        size_t k = 0;
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
    }
    metrics_tag(f, m->op == FLOE_OP_SAVE ? METRICS_OP_SNAPSHOT : METRICS_OP_LIST_TABLES, m->t_parse);
    conn_deliver(m->c, f);
    multi_free(m);
}

void multi_free(multi *m)
{
    pthread_mutex_destroy(&m->lock);
    free(m->stats);
    free(m->have);
    free(m);
}
