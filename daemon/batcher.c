/*
 * batcher.c - per-table batching (see batcher.h).
 *
 * launch_locked() runs with a lane's lock held while the backend has room
 * for the lane's batches: it ends jobs that need no engine work (validation
 * errors), then takes the longest run of compatible jobs from the head of
 * the lane's queue and submits them as one floe_batch in that lane.
 * batch_done() runs on the backend's thread: it ends each job of the batch
 * with its slice of the answers, and launches the lane's next batch.
 */
#define _GNU_SOURCE
#include "batcher.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "hostmem.h"
#include "log.h"
#include "partition.h"
#include "pool.h"

bool batcher_init(batcher *bt, floe_table *table, const batcher_limits *limits)
{
    memset(bt, 0, sizeof *bt);
    bt->table = table;
    bt->backend = table->backend;
    bt->limits = *limits;
    bt->value_bytes = floe_spec_has_values(&table->spec) ? table->spec.value_bytes : 0;
    const unsigned depth = BATCHER_DEPTH_PER_PART * floe_table_parts(table);
    bt->depth = depth < BATCHER_DEPTH_MAX ? depth : BATCHER_DEPTH_MAX;
    if (table->spec.kind == FLOE_KIND_ORDERED) /* its batches run one at a time: two out, the rest merge */
        bt->depth = 2;
    bt->words = table->spec.kind == FLOE_KIND_TREE ? table->spec.words : 0;
    bt->merge_any = table->spec.kind == FLOE_KIND_ORDERED;
    /* a TREE's batches run one at a time on the engine: one lane merges them best */
    bt->nlanes = bt->words ? 1 : floe_backend_lanes(table->backend);
    if (!(bt->lanes = floe_calloc(bt->nlanes, sizeof *bt->lanes)))
        return false;
    for (unsigned l = 0; l < bt->nlanes; l++) {
        batcher_lane *ln = &bt->lanes[l];
        pthread_mutex_init(&ln->lock, NULL);
        queue_init(&ln->q);
        ln->index = l;
        for (int i = 0; i < BATCHER_DEPTH_MAX; i++) {
            ln->slots[i].bt = bt;
            ln->slots[i].ln = ln;
        }
    }
    return true;
}

void batcher_destroy(batcher *bt)
{
    for (unsigned l = 0; l < bt->nlanes; l++) {
        batcher_lane *ln = &bt->lanes[l];
        for (int i = 0; i < BATCHER_DEPTH_MAX; i++) {
            floe_backend_host_free(bt->backend, ln->slots[i].keys_buf);
            floe_backend_host_free(bt->backend, ln->slots[i].values_buf);
        }
        pthread_mutex_destroy(&ln->lock);
    }
    free(bt->lanes);
}

/* Ends j without engine work. */
static void end_job(batcher *bt, job *j, floe_status st, const char *msg, bool dropped)
{
    job_end e = {.status = st, .error = msg, .dropped = dropped, .bt = bt};
    j->done(j, &e);
}

static batcher_lane *lane_of(batcher *bt, const job *j)
{
    return &bt->lanes[j->lane % bt->nlanes];
}

#define JOB_OF(l) QUEUE_ENTRY(l, job, link)

static job *next_job(const job *j)
{
    return j->link.next ? JOB_OF(j->link.next) : NULL;
}

/* Bytes per key of op on this table: a vector, or 8 (a key, or the id of a GET). */
static size_t key_bytes(const batcher *bt, const floe_opdef *def)
{
    return bt->words && (def->flags & FLOE_OPF_VECTORS) ? (size_t)bt->words * 4 : 8;
}

static const void *job_keys(const job *j)
{
    return j->vectors ? (const void *)j->vectors : (const void *)j->keys;
}

/* Jobs are merged into one batch up to max-batch-keys keys and this many
 * bytes of keys and vectors out (a TREE's vectors are large; SET and MAP
 * batches stay far below it). */
#define MERGE_MAX_BYTES ((size_t)256 << 20)
/* A job of at least this many keys is a batch of its own: the engine reads
 * its keys where they lie (its frame, in memory a GPU copies from straight:
 * hostmem.h), and merging it would only copy them.  Smaller jobs are merged,
 * so that small requests share a batch's fixed costs. */
#define MERGE_BELOW_KEYS 16384

static void batch_done(floe_batch *b);

void batch_out_hold(batch_out *o)
{
    atomic_fetch_add(&o->refs, 1);
}

void batch_out_release(batch_out *o)
{
    if (!o || atomic_fetch_sub(&o->refs, 1) != 1)
        return;
    hostmem_put(o->mem, o->results);
    hostmem_put(o->mem, o->ids);
    hostmem_put(o->mem, o->keys_out);
    hostmem_put(o->mem, o->values_out);
    hostmem_put(o->mem, o->vectors_out);
    free(o);
}

/* A batch's answer buffers for n keys (NULL if out of memory), in the
 * memory the backend copies straight into (hostmem.h). */
static batch_out *out_new(const batcher *bt, const floe_opdef *def, unsigned flags, size_t n)
{
    batch_out *o = floe_calloc(1, sizeof *o);
    if (!o)
        return NULL;
    atomic_init(&o->refs, 1);
    hostmem *mem = o->mem = bt->limits.mem;
    o->value_bytes = bt->value_bytes;
    o->words = bt->words;
    const size_t vb = bt->value_bytes;
    bool ok = (o->results = hostmem_get(mem, n + 1)) != NULL;
    if (flags & FLOE_BATCH_WANT_IDS)
        ok = ok && (o->ids = hostmem_get(mem, n * 8 + 8));
    if ((flags & FLOE_BATCH_WANT_VALUES) && vb)
        ok = ok && (o->values_out = hostmem_get(mem, n * vb + 8));
    if (def->flags & FLOE_OPF_VECTORS_OUT)
        ok = ok && (o->vectors_out = hostmem_get(mem, n * bt->words * 4 + 8));
    if (def->flags & FLOE_OPF_KEYS_OUT)
        ok = ok && (o->keys_out = hostmem_get(mem, n * 8 + 8));
    if (!ok) {
        batch_out_release(o);
        return NULL;
    }
    return o;
}

/* Grows *buf, the backend's host memory (pinned for a GPU: its copies to
 * the device go straight from it), to at least need bytes (contents not
 * kept; grown by half again, as getting it is slow). */
static bool reserve(const batcher *bt, void **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return true;
    floe_backend_host_free(bt->backend, *buf);
    *cap = 0;
    need += need / 2;
    if (!(*buf = floe_backend_host_alloc(bt->backend, need)))
        return false;
    *cap = need;
    return true;
}

/* After a batch: the answers go with the jobs that hold them; merge buffers stay. */
static void free_buffers(batch_slot *sl)
{
    batch_out_release(sl->out);
    free(sl->scan_keys);
    free(sl->scan_values);
    free(sl->scan_vectors);
    sl->out = NULL;
    sl->scan_keys = NULL;
    sl->scan_values = NULL;
    sl->scan_vectors = NULL;
}

/* One job's keys (and values) to position at of the slot's buffers. */
static void copy_job(batch_slot *sl, const job *j, size_t at, size_t kb, bool with_values)
{
    const size_t vb = sl->bt->value_bytes;
    if (j->n)
        memcpy((unsigned char *)sl->keys_buf + at * kb, job_keys(j), j->n * kb);
    if (with_values)
        memcpy(sl->values_buf + at * vb, j->values, j->n * vb);
}

typedef struct merge_task_args {
    batch_slot *sl;
    const job **jobs;
    size_t *at; /* where each job's keys go */
    size_t kb;
    bool with_values;
} merge_task_args;

static void merge_task(void *arg, size_t i)
{
    const merge_task_args *a = arg;
    copy_job(a->sl, a->jobs[i], a->at[i], a->kb, a->with_values);
}

/* Copies the jobs' keys (and values) one after another into the slot's
 * buffers.  Large merges are spread over the merge pool: they run under
 * the batcher's lock, and one thread copies a few GB/s. */
static void merge_jobs(const batcher *bt, batch_slot *sl, job *first, size_t kb, bool with_values)
{
    enum { SMALL = 1 << 20, MAX_JOBS = 256 };
    const job *jobs[MAX_JOBS];
    size_t at[MAX_JOBS], n = 0, total = 0;
    const job *j = first;
    for (; j && n < MAX_JOBS; j = next_job(j)) {
        jobs[n] = j;
        at[n++] = total;
        total += j->n;
    }
    if (!j && n > 1 && total * kb >= SMALL) { /* all of them listed, and worth the threads */
        merge_task_args a = {sl, jobs, at, kb, with_values};
        floe_pool_run(bt->limits.merge_pool, n, merge_task, &a);
        return;
    }
    size_t off = 0;
    for (j = first; j; j = next_job(j)) {
        copy_job(sl, j, off, kb, with_values);
        off += j->n;
    }
}

/* A job whose client has gone: nobody will read its answer, and the client
 * cannot tell whether it ran (as for any request in flight when a
 * connection breaks), so it is dropped instead of run.  A client that sends
 * and disconnects, again and again, then costs no engine time.  A job whose
 * client reads no answers while all clients' unread answers are past
 * output-total-limit is answered ERR_BUSY instead of run: its answer could
 * not be kept, and the clients that read theirs are not held up by it. */
static void drop_abandoned(batcher *bt, batcher_lane *ln)
{
    queue_link *prev = NULL;
    for (queue_link *l = ln->q.head, *next; l; l = next) {
        next = l->next;
        job *j = JOB_OF(l);
        const bool gone = j->gone && atomic_load(j->gone), unread = j->unread && atomic_load(j->unread);
        if (!gone && !unread) {
            prev = l;
            continue;
        }
        queue_unlink(&ln->q, prev, l);
        if (gone)
            end_job(bt, j, FLOE_OK, NULL, true);
        else
            end_job(bt, j, FLOE_ERR_BUSY,
                    "not run: the server's unread answers are past output-total-limit and this connection has "
                    "answers unread; read them, then retry",
                    false);
    }
}

/* The drain is due once every lane, closed, has ended what it held: the
 * last lane to get there returns it, and its caller ends it after
 * unlocking (end_drain), and then uses nothing of the batcher: its end may
 * free it. */
static job *lane_drained_locked(batcher *bt, batcher_lane *ln)
{
    job *drain = atomic_load(&bt->drain);
    if (!drain || ln->drained || ln->closed == FLOE_OK || ln->inflight > 0 || !queue_empty(&ln->q))
        return NULL;
    ln->drained = true;
    return atomic_fetch_sub(&bt->drain_left, 1) == 1 ? drain : NULL;
}

/* The changes of every lane but ln. */
static uint64_t changes_others(const batcher *bt, const batcher_lane *ln)
{
    uint64_t n = 0;
    for (unsigned l = 0; l < bt->nlanes; l++)
        if (&bt->lanes[l] != ln)
            n += atomic_load(&bt->lanes[l].changes);
    return n;
}

/* Returns the drain job if it is due (lane_drained_locked). */
static job *launch_locked(batcher *bt, batcher_lane *ln)
{
    const uint64_t max_keys = atomic_load_explicit(bt->limits.max_batch_keys, memory_order_relaxed);
    if (ln->inflight < bt->depth)
        drop_abandoned(bt, ln);
    while (ln->inflight < bt->depth && !queue_empty(&ln->q)) {
        job *first = JOB_OF(ln->q.head);
        if (first->pre_status != FLOE_OK) {
            if (ln->inflight > 0)
                break; /* ends in its turn: after the batches before it */
            queue_pop(&ln->q);
            end_job(bt, first, first->pre_status, first->pre_error, false);
            continue;
        }
        const floe_opdef *def = floe_op_def(first->op);
        if (!(def->flags & FLOE_OPF_KEYED) && ln->inflight >= BATCHER_DEPTH_OTHER)
            break; /* a scan's answer may be large: few at once */
        /* The run of compatible jobs at the head. */
        size_t n = first->n, count = 1;
        unsigned flags = first->flags;
        job *last = first;
        const size_t kb = key_bytes(bt, def);
        /* an ORDERED table's batch pays its fixed costs once whatever its size (a sort, a merge a
         * level, each level's counts read back on the GPU): requests of any size are merged */
        const size_t below = bt->merge_any ? SIZE_MAX : MERGE_BELOW_KEYS;
        if ((def->flags & FLOE_OPF_MERGES) && first->n < below && !first->parents) {
            const size_t per_key = kb + (def->flags & FLOE_OPF_VECTORS_OUT ? (size_t)bt->words * 4 : 0);
            for (job *j = next_job(first); j; j = next_job(j)) {
                if (j->op != first->op || j->pre_status != FLOE_OK || j->n >= below || j->parents ||
                    (j->flags & FLOE_BATCH_OVERWRITE) != (first->flags & FLOE_BATCH_OVERWRITE) || n + j->n > max_keys ||
                    (n + j->n) * per_key > MERGE_MAX_BYTES)
                    break;
                n += j->n;
                flags |= j->flags;
                last = j;
                count++;
            }
        }
        queue_take_until(&ln->q, &last->link);
        batch_slot *sl = &ln->slots[ln->next];
        sl->running = first;
        const uint64_t t_launch = floe_now_ns();
        for (job *j = first; j; j = next_job(j))
            if (j->t_queued)
                floe_stage_add(&ln->stage[FLOE_STAGE_QUEUE], j->n, t_launch - j->t_queued);

        floe_batch *b = &sl->b;
        memset(b, 0, sizeof *b);
        b->op = (floe_op)first->op;
        b->flags = flags | FLOE_BATCH_CHECKED; /* each job was checked at the door */
        b->lane = ln->index;
        b->done = batch_done;
        b->user = sl;
        const size_t vb = bt->value_bytes;
        bool ok = true;
        if (def->flags & FLOE_OPF_KEYED) {
            b->n = n;
            const void *keys;
            if (count == 1) {
                keys = job_keys(first);
                b->values = first->values;
                b->values_len = first->values_len;
                b->parents = first->parents;
                b->change_counts = first->change_counts;
                b->changes = first->changes;
                b->changes_len = first->changes_len;
                b->parent_generation = first->parent_generation;
            } else {
                const bool with_values = (def->flags & FLOE_OPF_VALUES_IN) && vb;
                ok = reserve(bt, &sl->keys_buf, &sl->keys_cap, n * kb + 8) &&
                     (!with_values || reserve(bt, (void **)&sl->values_buf, &sl->values_cap, n * vb + 8));
                if (ok)
                    merge_jobs(bt, sl, first, kb, with_values);
                keys = sl->keys_buf;
                b->values = with_values ? sl->values_buf : NULL;
                b->values_len = with_values ? n * vb : 0;
                floe_stage_add(&ln->stage[FLOE_STAGE_MERGE], n, floe_now_ns() - t_launch);
            }
            if (bt->words && (def->flags & FLOE_OPF_VECTORS)) /* not by kb: a TREE of 2 words has 8-byte vectors */
                b->vectors = keys;
            else
                b->keys = keys;
            sl->out = out_new(bt, def, flags, n);
            ok = ok && sl->out;
            if (sl->out) {
                b->results = sl->out->results;
                b->ids = sl->out->ids;
                b->values_out = sl->out->values_out;
                b->vectors_out = sl->out->vectors_out;
                b->keys_out = sl->out->keys_out;
            }
        } else if (def->shape != FLOE_SHAPE_TABLE) { /* a scan or a range */
            b->cursor = first->cursor;
            b->cursor_set = first->cursor_set;
            b->limit = first->limit;
            b->lo = first->lo;
            b->hi = first->hi;
            b->desc = first->desc;
            /* want_ids of a TREE scan is the reply's business */
            b->flags = (flags & FLOE_BATCH_WANT_VALUES) | FLOE_BATCH_CHECKED;
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
            for (job *j = first, *next; j; j = next) {
                next = next_job(j);
                end_job(bt, j, FLOE_ERR_INTERNAL, "out of memory for this batch", false);
            }
            sl->running = NULL;
            free_buffers(sl);
            continue;
        }
        ln->next = (ln->next + 1) % bt->depth;
        ln->inflight++;
        sl->t_submit = floe_now_ns();
        if (first->op == FLOE_OP_COPY)
            sl->changes_others = changes_others(bt, ln);
        floe_table_submit(bt->table, b);
    }
    return lane_drained_locked(bt, ln);
}

/* The drain ends last: everything queued before it has ended (and the
 * snapshots among them are with the saver, so the file goes after them). */
static void end_drain(batcher *bt, job *drain)
{
    if (drain)
        end_job(bt, drain, FLOE_OK, NULL, false);
}

/* Closes every lane for the drain j; the last to have ended what it held
 * ends j.  Lane 0 decides: whichever of a drain and the shutdown closes it
 * first wins (the shutdown closes the lanes in order).  This call holds a
 * share of drain_left of its own while it walks the lanes: a lane's thread
 * that ended the drain meanwhile could let the table's end free bt under
 * it. */
static floe_status submit_drain(batcher *bt, job *j)
{
    batcher_lane *first = &bt->lanes[0];
    pthread_mutex_lock(&first->lock);
    const floe_status why = first->closed;
    if (why == FLOE_OK) {
        first->closed = FLOE_ERR_NO_TABLE;
        atomic_store(&bt->drain_left, bt->nlanes + 1);
        atomic_store(&bt->drain, j);
    }
    pthread_mutex_unlock(&first->lock);
    if (why != FLOE_OK)
        return why;
    for (unsigned l = 1; l < bt->nlanes; l++) {
        batcher_lane *ln = &bt->lanes[l];
        pthread_mutex_lock(&ln->lock);
        if (ln->closed == FLOE_OK)
            ln->closed = FLOE_ERR_NO_TABLE;
        pthread_mutex_unlock(&ln->lock);
    }
    for (unsigned l = 0; l < bt->nlanes; l++) { /* lanes that held nothing, or have ended it meanwhile */
        batcher_lane *ln = &bt->lanes[l];
        pthread_mutex_lock(&ln->lock);
        job *drain = lane_drained_locked(bt, ln); /* never the last share: this call holds one */
        pthread_mutex_unlock(&ln->lock);
        assert(!drain);
        (void)drain;
    }
    if (atomic_fetch_sub(&bt->drain_left, 1) == 1) /* bt is not touched after this unless the drain is ours */
        end_drain(bt, j);
    return FLOE_OK;
}

floe_status batcher_submit(batcher *bt, job *j)
{
    if (j->op == JOB_DRAIN)
        return submit_drain(bt, j);
    batcher_lane *ln = lane_of(bt, j);
    pthread_mutex_lock(&ln->lock);
    if (ln->closed != FLOE_OK) {
        const floe_status why = ln->closed;
        pthread_mutex_unlock(&ln->lock);
        return why;
    }
    if (j->t_parse && floe_op_keyed(j->op)) {
        j->t_queued = floe_now_ns();
        floe_stage_add(&ln->stage[FLOE_STAGE_PARSE], j->n, j->t_queued - j->t_parse);
    }
    queue_push(&ln->q, &j->link);
    job *drain = launch_locked(bt, ln);
    pthread_mutex_unlock(&ln->lock);
    end_drain(bt, drain);
    return FLOE_OK;
}

void batcher_shutdown(batcher *bt)
{
    for (unsigned l = 0; l < bt->nlanes; l++) {
        batcher_lane *ln = &bt->lanes[l];
        pthread_mutex_lock(&ln->lock);
        if (ln->closed == FLOE_OK)
            ln->closed = FLOE_ERR_SHUTTING_DOWN;
        queue_link *list = queue_take(&ln->q);
        job *drain = lane_drained_locked(bt, ln); /* a drain's: this lane's queue is empty now */
        pthread_mutex_unlock(&ln->lock);
        while (list) {
            job *j = JOB_OF(list);
            list = list->next;
            end_job(bt, j, FLOE_ERR_SHUTTING_DOWN, "floed is shutting down", false);
        }
        if (drain) { /* every lane has ended what it held */
            end_drain(bt, drain);
            return;
        }
    }
}

bool batcher_idle(batcher *bt)
{
    bool idle = true;
    for (unsigned l = 0; l < bt->nlanes && idle; l++) {
        batcher_lane *ln = &bt->lanes[l];
        pthread_mutex_lock(&ln->lock);
        idle = ln->inflight == 0 && queue_empty(&ln->q);
        pthread_mutex_unlock(&ln->lock);
    }
    return idle;
}

void batcher_stages(batcher *bt, floe_stage_time out[FLOE_STAGES])
{
    memset(out, 0, FLOE_STAGES * sizeof *out);
    for (unsigned l = 0; l < bt->nlanes; l++) {
        batcher_lane *ln = &bt->lanes[l];
        pthread_mutex_lock(&ln->lock);
        for (int k = 0; k < FLOE_STAGES; k++)
            floe_stage_sum(&out[k], &ln->stage[k]);
        pthread_mutex_unlock(&ln->lock);
    }
}

static void batch_done(floe_batch *b)
{
    batch_slot *sl = b->user;
    batcher *bt = sl->bt;
    batcher_lane *ln = sl->ln;
    job *list = sl->running;
    sl->running = NULL;
    const uint64_t t_done = floe_now_ns();
    const floe_opdef *def = floe_op_def(b->op);
    const bool keyed = (def->flags & FLOE_OPF_KEYED) != 0;
    if (keyed) {
        pthread_mutex_lock(&ln->lock);
        floe_stage_add(&ln->stage[FLOE_STAGE_BACKEND], b->n, t_done - sl->t_submit);
        pthread_mutex_unlock(&ln->lock);
        if (b->status == FLOE_OK && (def->flags & FLOE_OPF_WRITES)) {
            /* a write of the table as a whole (a freeze) is one change */
            const uint64_t changed =
                !floe_op_keyed(b->op)
                    ? 1
                    : b->counts.inserted + b->counts.erased + (def->flags & FLOE_OPF_UPDATES ? b->counts.present : 0);
            atomic_fetch_add(&ln->changes, changed);
            atomic_fetch_add(&bt->changes, changed);
        }
        if (sl->out)
            sl->out->generation = b->generation;
    }
    /* floed's own failures are errors; a client's mistake (a bad scan cursor, a table too full to
     * grow) is the client's answer, and a debug line at most: a client could flood the log */
    if (b->status != FLOE_OK && b->op != FLOE_OP_COPY)
        log_msg(b->status == FLOE_ERR_INTERNAL ? LOG_ERROR : LOG_DEBUG, "table %s: %s batch failed: %s",
                bt->table->spec.name, def->name, b->error.msg);
    /* a COPY holds its lane's changes so far, and at least the others' when it was submitted (the
     * backend's COPY sees every batch completed before it) */
    job_end e = {.status = b->status, .error = b->error.msg, .b = b, .out = sl->out, .bt = bt};
    if (b->op == FLOE_OP_COPY)
        e.changes = atomic_load(&ln->changes) + sl->changes_others;
    while (list) {
        job *j = list;
        list = next_job(j);
        const size_t step = keyed ? j->n : 0; /* j may be freed by its done */
        j->done(j, &e);
        e.at += step;
    }
    free_buffers(sl);
    pthread_mutex_lock(&ln->lock);
    if (keyed)
        floe_stage_add(&ln->stage[FLOE_STAGE_REPLY], b->n, floe_now_ns() - t_done);
    ln->inflight--; /* sl (and b) may be reused from here on */
    job *drain = launch_locked(bt, ln);
    pthread_mutex_unlock(&ln->lock);
    end_drain(bt, drain);
}
