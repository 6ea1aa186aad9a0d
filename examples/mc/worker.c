/*
 * worker.c - a floe-mc worker (worker.h).  Successors go to the server in
 * large find-or-put requests with several in flight while the worker goes
 * on expanding: libfloe's batcher for states that pack into 64-bit keys
 * (SET), vector requests of the same shape for a TREE.  A TREE worker's
 * states carry their id (and its generation), and their successors go as
 * that id and the few words that differ (floe_send_insert_states), unless
 * --whole or the parent's id is of a generation older than the newest an
 * answer named (the table grew since: its ids were renamed); a request
 * whose parents the table renamed while it was in flight is sent again
 * whole.
 */
#include "worker.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "floe.h"

#define EXPAND_CHUNK 1024 /* states expanded between looks at the server's answers */
#define DELTA_MAX    8    /* a successor that differs from its parent in more words goes whole */

/* ---- the worker's queue: states in order, 8 bytes (packed) or words x 4 each ---- */

typedef struct queue {
    unsigned char *buf;
    size_t esz, head, tail, cap; /* in elements */
} queue;

static int q_push(queue *q, const void *e)
{
    if (q->tail == q->cap) {
        if (q->head > q->cap / 2) { /* reuse the expanded half */
            memmove(q->buf, q->buf + q->head * q->esz, (q->tail - q->head) * q->esz);
            q->tail -= q->head;
            q->head = 0;
        } else {
            size_t cap = q->cap ? q->cap * 2 : 65536;
            unsigned char *b = realloc(q->buf, cap * q->esz);
            if (!b)
                return -1;
            q->buf = b;
            q->cap = cap;
        }
    }
    memcpy(q->buf + q->tail++ * q->esz, e, q->esz);
    return 0;
}

/* ---- the worker's state --------------------------------------------------------------------- */

typedef struct worker {
    const mc_run *r;
    const mc_model *m;
    mc_progress *p;
    floe *c;
    int packed;
    queue q;
    floe_batcher *batcher; /* SET */
    uint32_t *vbuf;        /* TREE: the request of whole vectors being filled */
    size_t vn;
    /* TREE: the request of states by parent being filled: parents (all of generation dgen), change
     * counts and changes, and the states whole (for the queue, and to send whole if refused) */
    uint64_t *dpar, dgen;
    uint8_t *dcnt, *dch;
    uint32_t *dvec;
    size_t dn, dch_len;
    uint64_t gen; /* TREE: the newest generation of the table an answer named */
    int whole;    /* TREE: every state whole (--whole, or a table that takes no states by parent) */
    unsigned vinflight;
    int status; /* the first error */
    char error[256];
} worker;

static void fail(worker *w, int status, const char *fmt, const char *detail)
{
    if (w->status)
        return;
    w->status = status;
    snprintf(w->error, sizeof w->error, fmt, detail);
}

/* A state that breaks the model's invariant: counted, and the first kept
 * to report. */
static void violated(worker *w, const uint32_t *s)
{
    mc_progress *p = w->p;
    if (atomic_fetch_add(&p->violations, 1) == 0)
        memcpy(p->violation, s, w->m->words * 4u);
}

/* A state with no successor: counted, and the first kept to report. */
static void deadlocked(worker *w, const uint32_t *s)
{
    mc_progress *p = w->p;
    if (atomic_fetch_add(&p->deadlocks, 1) == 0)
        memcpy(p->deadlock, s, w->m->words * 4u);
}

/* An answer per state: INSERTED ones are ours.  With parents (tags), the
 * queue keeps each state's parent beside it. */
static void take_answers(worker *w, const void *states, size_t esz, const uint64_t *parents, const uint8_t *results,
                         size_t n)
{
    uint64_t mine = 0;
    for (size_t i = 0; i < n; i++) {
        if (results[i] == FLOE_INSERTED) {
            const uint64_t pair[2] = {((const uint64_t *)states)[parents ? i : 0], parents ? parents[i] : 0};
            if (q_push(&w->q, parents ? (const void *)pair : (const unsigned char *)states + i * esz) != 0) {
                fail(w, FLOE_ERR_IO, "%s", "out of memory for the queue");
                return;
            }
            mine++;
        } else if (results[i] == FLOE_FULL) {
            fail(w, FLOE_ERR_FULL, "table %s is full: give floe-mc a larger --capacity", w->r->table);
            return;
        }
    }
    atomic_fetch_add(&w->p->states, mine);
}

static void on_keys(void *arg, int status, const uint64_t *keys, const uint64_t *tags, const uint8_t *results, size_t n)
{
    (void)tags;
    worker *w = arg;
    if (status != FLOE_OK) {
        fail(w, status, "a find-or-put request failed: %s",
             floe_errstr(w->c)[0] ? floe_errstr(w->c) : floe_strerror(status));
        return;
    }
    take_answers(w, keys, 8, w->q.esz == 16 ? tags : NULL, results, n);
}

/* A TREE request in flight: its states whole (by_parent: it went as parents of generation gen
 * and changes). */
typedef struct vreq {
    worker *w;
    uint32_t *vectors;
    size_t n;
    int by_parent;
    uint64_t gen;
} vreq;

static void on_vectors(floe *c, floe_call *call, void *arg);

/* Sends rq's states whole, wanting their ids. */
static void send_whole(worker *w, vreq *rq)
{
    rq->by_parent = 0;
    w->vinflight++;
    atomic_fetch_add(&w->p->sent, rq->n);
    atomic_fetch_add(&w->p->sent_bytes, rq->n * w->m->words * 4);
    floe_send_insert_vectors(w->c, w->r->table, rq->vectors, rq->n, w->m->words, FLOE_WANT_IDS, on_vectors, rq);
}

/* INSERTED states are ours: queued with their ids, of the generation the answer names. */
static void take_tree_answers(worker *w, const vreq *rq, const uint8_t *res, const unsigned char *ids,
                              uint64_t generation)
{
    const size_t W = w->m->words;
    unsigned char e[MC_MAX_WORDS * 4 + 16];
    uint64_t mine = 0;
    for (size_t i = 0; i < rq->n; i++) {
        if (res[i] == FLOE_FULL) {
            fail(w, FLOE_ERR_FULL, "table %s is full: give floe-mc a larger --capacity", w->r->table);
            return;
        }
        if (res[i] != FLOE_INSERTED)
            continue;
        memcpy(e, rq->vectors + i * W, W * 4);
        memcpy(e + W * 4, ids + i * 8, 8);
        memcpy(e + W * 4 + 8, &generation, 8);
        if (q_push(&w->q, e) != 0) {
            fail(w, FLOE_ERR_IO, "%s", "out of memory for the queue");
            return;
        }
        mine++;
    }
    atomic_fetch_add(&w->p->states, mine);
}

static void on_vectors(floe *c, floe_call *call, void *arg)
{
    (void)c;
    vreq *rq = arg;
    worker *w = rq->w;
    w->vinflight--;
    size_t n = 0, idb = 0;
    const uint8_t *res = floe_call_results(call, &n);
    const unsigned char *ids = floe_call_ids(call, &idb);
    int st = floe_call_status(call);
    if (st == FLOE_ERR_UNSUPPORTED && rq->by_parent && !w->status)
        w->whole = 1; /* a server that takes no states by parent (an older floed): whole from now on */
    if ((st == FLOE_ERR_INVALID || st == FLOE_ERR_UNSUPPORTED) && rq->by_parent && !w->status) {
        if (st == FLOE_ERR_INVALID) { /* the table grew, and its parents have new ids */
            if (w->gen <= rq->gen)
                w->gen = rq->gen + 1;
            atomic_fetch_add(&w->p->again, rq->n);
        }
        send_whole(w, rq);
        return;
    }
    if (st == FLOE_OK && floe_call_generation(call) > w->gen)
        w->gen = floe_call_generation(call);
    if (st != FLOE_OK)
        fail(w, st, "a find-or-put request failed: %s", floe_call_error(call));
    else if (n != rq->n || idb != n * 8)
        fail(w, FLOE_ERR_PROTOCOL, "%s", "a request came back with the wrong number of answers");
    else
        take_tree_answers(w, rq, res, ids, floe_call_generation(call));
    if (st == FLOE_OK && rq->by_parent)
        atomic_fetch_add(&w->p->by_parent, rq->n);
    free(rq->vectors);
    free(rq);
}

/* A request slot: waits while inflight requests are out; a vreq taking the states of *buf
 * (replaced by a fresh buffer), or NULL when out of memory. */
static vreq *take_request(worker *w, uint32_t **buf, size_t n)
{
    while (w->vinflight >= w->r->inflight && !w->status)
        if (floe_poll(w->c, -1) < 0)
            fail(w, floe_error(w->c), "connection lost: %s", floe_errstr(w->c));
    vreq *rq = malloc(sizeof *rq);
    uint32_t *next = malloc(w->r->batch * w->m->words * 4);
    if (!rq || !next) {
        free(rq);
        free(next);
        fail(w, FLOE_ERR_IO, "%s", "out of memory for a request");
        return NULL;
    }
    *rq = (vreq){w, *buf, n, 0, 0};
    *buf = next;
    return rq;
}

static int vflush(worker *w)
{
    if (w->vn == 0 || w->status)
        return w->status;
    vreq *rq = take_request(w, &w->vbuf, w->vn);
    w->vn = 0;
    if (rq)
        send_whole(w, rq);
    return w->status;
}

static int dflush(worker *w)
{
    if (w->dn == 0 || w->status)
        return w->status;
    vreq *rq = take_request(w, &w->dvec, w->dn);
    if (rq && w->dgen < w->gen) { /* an answer since says the table grew: its parents were renamed */
        send_whole(w, rq);
        rq = NULL;
    }
    if (rq) {
        rq->by_parent = 1;
        rq->gen = w->dgen;
        w->vinflight++;
        atomic_fetch_add(&w->p->sent, w->dn);
        atomic_fetch_add(&w->p->sent_bytes, w->dn * 9 + w->dch_len);
        floe_send_insert_states(w->c, w->r->table, w->dgen, w->dpar, w->dcnt, w->dch, w->dn, FLOE_WANT_IDS, on_vectors,
                                rq);
    }
    w->dn = w->dch_len = 0;
    return w->status;
}

/* TREE: a successor s of the state `parent` (its id and generation), by
 * its parent when it differs in few words, else whole. */
static void submit_tree(worker *w, const uint32_t *s, const uint32_t *parent, uint64_t pid, uint64_t pgen)
{
    const unsigned W = w->m->words;
    unsigned k = 0;
    for (unsigned i = 0; parent && i < W && k <= DELTA_MAX; i++)
        k += s[i] != parent[i];
    if (!parent || w->whole || pid == FLOE_NO_ID || k > DELTA_MAX || pgen < w->gen) {
        memcpy(w->vbuf + w->vn * W, s, W * 4);
        if (++w->vn == w->r->batch)
            vflush(w);
        return;
    }
    if (w->dn > 0 && pgen != w->dgen) /* one request's parents are of one generation */
        dflush(w);
    w->dgen = pgen;
    w->dpar[w->dn] = pid;
    w->dcnt[w->dn] = (uint8_t)k;
    for (unsigned i = 0; i < W; i++)
        if (s[i] != parent[i]) {
            floe_change_put(w->dch + w->dch_len, i, s[i]);
            w->dch_len += FLOE_CHANGE_BYTES;
        }
    memcpy(w->dvec + w->dn * W, s, W * 4);
    if (++w->dn == w->r->batch)
        dflush(w);
}

/* Sends one state to the server (batched). */
#define NO_PARENT UINT64_MAX

static int submit(worker *w, const uint32_t *s)
{
    if (w->packed) {
        int st = floe_batcher_add(w->batcher, mc_pack(w->m, s), NO_PARENT);
        if (st != FLOE_OK)
            fail(w, st, "a find-or-put request failed: %s",
                 floe_errstr(w->c)[0] ? floe_errstr(w->c) : floe_strerror(st));
        else
            atomic_fetch_add(&w->p->sent, 1), atomic_fetch_add(&w->p->sent_bytes, 8);
        return w->status;
    }
    submit_tree(w, s, NULL, FLOE_NO_ID, 0);
    return w->status;
}

static int flush(worker *w)
{
    if (w->packed) {
        int st = floe_batcher_flush(w->batcher);
        if (st != FLOE_OK)
            fail(w, st, "a find-or-put request failed: %s",
                 floe_errstr(w->c)[0] ? floe_errstr(w->c) : floe_strerror(st));
        return w->status;
    }
    vflush(w);
    return dflush(w);
}

/* ---- the start, split across workers --------------------------------------------------------- */

static uint64_t hash_words(const uint32_t *s, unsigned words)
{
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (unsigned i = 0; i < words; i++) {
        h ^= s[i];
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 29;
    }
    return h;
}

/* The states of mc_prefix: visited in order, and a set of them (open
 * addressing, index + 1, 0 empty; rehashed at half full). */
typedef struct prefix_set {
    unsigned W;
    uint32_t *v;
    size_t n, cap, *set, slots;
} prefix_set;

/* Adds t unless it is there: 1 added, 0 there, -1 out of memory. */
static int prefix_add(prefix_set *p, const uint32_t *t)
{
    const unsigned W = p->W;
    size_t h = hash_words(t, W) & (p->slots - 1);
    while (p->set[h] && memcmp(p->v + (p->set[h] - 1) * W, t, W * 4) != 0)
        h = (h + 1) & (p->slots - 1);
    if (p->set[h])
        return 0;
    if (p->n == p->cap) {
        uint32_t *nv = realloc(p->v, p->cap * 2 * W * 4);
        if (!nv)
            return -1;
        p->v = nv;
        p->cap *= 2;
    }
    memcpy(p->v + p->n * W, t, W * 4);
    p->set[h] = ++p->n;
    if (p->n * 2 > p->slots) {
        size_t ns = p->slots * 2, *nset = calloc(ns, sizeof *nset);
        if (!nset)
            return -1;
        for (size_t x = 0; x < p->n; x++) {
            size_t y = hash_words(p->v + x * W, W) & (ns - 1);
            while (nset[y])
                y = (y + 1) & (ns - 1);
            nset[y] = x + 1;
        }
        free(p->set);
        p->set = nset;
        p->slots = ns;
    }
    return 1;
}

size_t mc_prefix(const mc_model *m, size_t target, uint32_t **states)
{
    const unsigned W = m->words;
    prefix_set p = {W, malloc(4096 * (size_t)W * 4), 0, 4096, calloc((size_t)1 << 14, sizeof(size_t)), (size_t)1 << 14};
    uint32_t t[MC_MAX_WORDS], succ[MC_MAX_SUCC * MC_MAX_WORDS];
    bool ok = p.v && p.set;
    for (unsigned i = 0; ok && i < m->initials; i++) { /* the initial states, each once */
        m->initial(m, i, t);
        ok = prefix_add(&p, t) >= 0;
    }
    size_t level_start = 0, level_end = p.n; /* the frontier: [level_start, level_end) */
    while (ok && level_end - level_start < target && level_start < level_end) {
        for (size_t i = level_start; ok && i < level_end; i++) {
            memcpy(t, p.v + i * W, W * 4); /* p.v may move under prefix_add */
            const unsigned k = m->next(m, t, succ);
            for (unsigned j = 0; ok && j < k; j++)
                ok = prefix_add(&p, succ + j * W) >= 0;
        }
        level_start = level_end;
        level_end = p.n;
    }
    free(p.set);
    if (!ok) {
        free(p.v);
        *states = NULL;
        return 0;
    }
    *states = p.v;
    return p.n;
}

/* ---- the search ------------------------------------------------------------------------------ */

/* Packed states and a packed next function: no unpacking, keys straight
 * to the batcher.  Each queued state carries its parent (the batcher's tag
 * of the request that found it), and the successor equal to the parent is
 * not sent: it is in the table already (its expansion is how the state was
 * found), so the answer would be PRESENT.  It still counts as a transition.
 * For the sliding-tile puzzle that is one key in 2.8. */
static uint64_t expand_packed(worker *w)
{
    const mc_model *m = w->m;
    uint64_t succ[MC_MAX_SUCC], edges = 0, sent = 0;
    for (int i = 0; i < EXPAND_CHUNK && w->q.head < w->q.tail && !w->status; i++) {
        const uint64_t *e = (const uint64_t *)(const void *)(w->q.buf + w->q.head++ * 16);
        const uint64_t s = e[0], parent = e[1];
        unsigned k = m->next_packed(m, s, succ);
        edges += k;
        if (k == 0) {
            uint32_t words[MC_MAX_WORDS];
            mc_unpack(m, s, words);
            deadlocked(w, words);
        }
        for (unsigned j = 0; j < k; j++) {
            if (succ[j] == parent)
                continue;
            int st = floe_batcher_add(w->batcher, succ[j], s);
            sent++;
            if (st != FLOE_OK) {
                fail(w, st, "a find-or-put request failed: %s",
                     floe_errstr(w->c)[0] ? floe_errstr(w->c) : floe_strerror(st));
                break;
            }
        }
    }
    /* counted once a chunk, not with two locked adds a key */
    atomic_fetch_add(&w->p->sent, sent);
    atomic_fetch_add(&w->p->sent_bytes, sent * 8);
    return edges;
}

static void expand_queue(worker *w)
{
    const mc_model *m = w->m;
    uint32_t s[MC_MAX_WORDS], succ[MC_MAX_SUCC * MC_MAX_WORDS];
    for (;;) {
        while (w->q.head < w->q.tail && !w->status && w->q.esz == 16)
            atomic_fetch_add(&w->p->transitions, expand_packed(w));
        while (w->q.head < w->q.tail && !w->status) {
            uint64_t edges = 0;
            for (int i = 0; i < EXPAND_CHUNK && w->q.head < w->q.tail && !w->status; i++) {
                /* by index: answers arriving inside submit() may move the queue */
                const unsigned char *e = w->q.buf + w->q.head++ * w->q.esz;
                uint64_t id = FLOE_NO_ID, generation = 0;
                if (w->packed) {
                    mc_unpack(m, *(const uint64_t *)(const void *)e, s);
                } else { /* the vector, its id and the id's generation */
                    memcpy(s, e, m->words * 4);
                    memcpy(&id, e + m->words * 4, 8);
                    memcpy(&generation, e + m->words * 4 + 8, 8);
                }
                if (m->invariant && !m->invariant(m, s))
                    violated(w, s);
                unsigned k = m->next(m, s, succ);
                edges += k;
                if (k == 0)
                    deadlocked(w, s);
                if (m->overflow && atomic_load(m->overflow))
                    fail(w, FLOE_ERR_INVALID, "%s",
                         atomic_load(m->overflow) & MC_PLUGIN_TOO_MANY
                             ? "the model library gave a state more than 64 successors (floe_mc_model.h)"
                             : "the model library gave a successor with a word at or past 2^bits (floe_mc_model.h)");
                for (unsigned j = 0; j < k && !w->status; j++) {
                    if (w->packed)
                        submit(w, succ + j * m->words);
                    else
                        submit_tree(w, succ + j * m->words, s, id, generation);
                }
            }
            atomic_fetch_add(&w->p->transitions, edges);
        }
        if (w->status || flush(w) != 0)
            return;
        if (w->q.head < w->q.tail)
            continue; /* answers that came in while the flush sent brought states */
        if (floe_inflight(w->c) == 0)
            return; /* nothing left to expand, nothing more can come */
        if (floe_poll(w->c, -1) < 0) {
            fail(w, floe_error(w->c), "connection lost: %s", floe_errstr(w->c));
            return;
        }
    }
}

int mc_worker_run(const mc_run *r, mc_progress *p)
{
    worker w = {.r = r, .m = r->model, .p = p, .packed = r->packed, .whole = r->whole};
    /* states and their parents where a packed state leaves a value no state
     * takes (NO_PARENT: all ones, above every key of key_bits < 64) */
    const int parents = w.packed && r->model->next_packed && mc_key_bits(r->model) < 64;
    w.q.esz = parents ? 16 : w.packed ? 8 : r->model->words * 4 + 16; /* TREE: the vector, its id, generation */
    uint32_t *prefix = NULL;
    if (floe_connect_opts(r->server, r->conn, &w.c) != FLOE_OK) {
        fail(&w, FLOE_ERR_IO, "cannot connect: %s", floe_errstr(w.c));
        goto out;
    }
    if (floe_shards(w.c) > 1)
        w.whole = 1; /* a partitioned table: a state's server is its own vector's, not its parent's */
    if (w.packed) {
        w.batcher = floe_batcher_new(w.c, r->table, FLOE_BATCH_INSERT, r->batch, r->inflight, on_keys, &w);
        if (!w.batcher)
            fail(&w, FLOE_ERR_IO, "%s", "out of memory for the batcher");
    } else if (!(w.vbuf = malloc(r->batch * r->model->words * 4)) ||
               !(w.dvec = malloc(r->batch * r->model->words * 4)) || !(w.dpar = malloc(r->batch * 8)) ||
               !(w.dcnt = malloc(r->batch)) || !(w.dch = malloc(r->batch * DELTA_MAX * FLOE_CHANGE_BYTES))) {
        fail(&w, FLOE_ERR_IO, "%s", "out of memory for a request");
    }
    /* every worker computes the same start and takes its share of it */
    size_t n = w.status ? 0 : mc_prefix(r->model, 64 * (size_t)r->workers, &prefix);
    if (!w.status && n == 0)
        fail(&w, FLOE_ERR_IO, "%s", "out of memory for the first states");
    if (r->start_fd >= 0) { /* local workers start together, so that they share the first levels */
        char byte;
        while (read(r->start_fd, &byte, 1) > 0 || errno == EINTR)
            ;
        close(r->start_fd);
    }
    for (size_t i = r->index; i < n && !w.status; i += r->workers)
        submit(&w, prefix + i * r->model->words);
    if (!w.status)
        expand_queue(&w);
    if (!w.status && w.packed && floe_batcher_finish(w.batcher) != FLOE_OK)
        fail(&w, floe_error(w.c), "a find-or-put request failed: %s", floe_errstr(w.c));
out:
    free(prefix);
    if (w.batcher)
        floe_batcher_free(w.batcher);
    free(w.vbuf);
    free(w.dvec);
    free(w.dpar);
    free(w.dcnt);
    free(w.dch);
    free(w.q.buf);
    floe_close(w.c);
    p->status = w.status;
    snprintf(p->error, sizeof p->error, "%s", w.error);
    atomic_store(&p->done, 1);
    return w.status ? -1 : 0;
}
