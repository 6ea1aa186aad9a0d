/*
 * claims.c - a floe-mc worker of a run whose open set is on the server
 * (--server-queue; worker.h): it claims open states of an exploring table,
 * expands them, and inserts their successors with each one's parent id and
 * its place among the parent's successors as its label, ending the claim
 * with the last insert.  Nothing of the run lives in the worker: a worker
 * that dies loses nothing (its claims return to the open set when their
 * lease ends), any worker may join or leave, and the server says when the
 * run has ended (DONE).
 *
 * Several claims are in flight (futures, oldest first); the successors of
 * a claim go out in requests of at most `batch` states with several in
 * flight (callbacks), so that the worker expands while the server answers.
 *
 * Over several floed (a partitioned connection) each server hands out its
 * own states and no server knows when a level ends, so the worker ends
 * them (docs/PROTOCOL.md, "Exploring over several floed"): it claims
 * states of depth <= its level from every server; a claim ends with an
 * insert of its own once every insert of its successors is answered (the
 * servers add states independently); and when no server has any to give,
 * two sweeps over all of them that find none open, out or coming, with
 * the same count of states at depth <= level, prove the level over: the
 * worker goes one deeper, or, with no state deeper, the run has ended.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "floe_wire.h"
#include "worker.h"

/* While the server answers WAIT (a level ends in other workers' claims) one claim at a time asks
 * again, after a pause that starts short and doubles up to WAIT_MAX_US: a level of a deep, narrow
 * model (hanoi) ends in a round trip or two, and a long one should not be polled hard. */
#define WAIT_MIN_US 50
#define WAIT_MAX_US 2000

typedef struct sq sq;

/* A claim being expanded and inserted: its end (over several floed) waits for its inserts. */
typedef struct held {
    sq *w;
    uint64_t token;
    uint32_t depth;
    unsigned out;  /* its inserts in flight */
    bool expanded; /* all its successors sent */
} held;

struct sq {
    const mc_run *r;
    const mc_model *m;
    mc_progress *p;
    floe *c;
    size_t kb;           /* bytes of a state as the table keeps it: 8, or words x 4 */
    unsigned char *keys; /* the insert being filled: states, */
    uint64_t *from;      /* their parents' explore ids */
    uint8_t *labels;     /* and which successor of its parent each one is */
    size_t n;
    /* a claim of consecutive ids (from the cursor): the parents as the first one's id and each
     * one's number of successors instead of from (floe_send_insert_successors) */
    bool range;
    uint64_t first;
    uint8_t *counts;
    size_t ncounts, counts_cap;
    unsigned inserts_out; /* insert requests in flight */
    floe_call **claims;   /* claims in flight, oldest first (a ring of r->inflight), */
    unsigned *claim_shard; /* and the server each went to */
    unsigned claim_head, claims_out;
    bool done; /* the server answered DONE (over several floed: the last level is proved over) */
    held *cur; /* the claim being expanded */
    /* over several floed: the servers, and the claims whose inserts are all answered, to end */
    unsigned shards;
    held **ready;
    size_t nready, ready_cap;
    int status;
    char error[256];
};

static void sq_fail(sq *w, int status, const char *what, const char *detail)
{
    if (w->status)
        return;
    w->status = status;
    snprintf(w->error, sizeof w->error, "%s: %s", what, detail && detail[0] ? detail : floe_strerror(status));
}

/* A claim's inserts are answered and it is expanded: it ends (one floed: with its last insert,
 * so there is nothing more to do; over several, with an insert of its own, sent outside the
 * callbacks). */
static void settle(sq *w, held *h)
{
    if (h->out || !h->expanded)
        return;
    if (w->shards == 1) {
        free(h);
        return;
    }
    if (w->nready == w->ready_cap) {
        const size_t cap = w->ready_cap ? w->ready_cap * 2 : 16;
        held **p = realloc(w->ready, cap * sizeof *p);
        if (!p) {
            sq_fail(w, FLOE_ERR_IO, "out of memory", "for the claims to end");
            free(h);
            return;
        }
        w->ready = p;
        w->ready_cap = cap;
    }
    w->ready[w->nready++] = h;
}

static void on_complete(floe *c, floe_call *call, void *arg)
{
    (void)c;
    sq *w = arg;
    if (floe_call_status(call) != FLOE_OK)
        sq_fail(w, floe_call_status(call), "a claim's end failed", floe_call_error(call));
}

/* The claims whose inserts are all answered, ended. */
static void end_ready(sq *w)
{
    for (size_t i = 0; i < w->nready; i++) {
        held *h = w->ready[i];
        if (!w->status)
            floe_send_insert_explore(w->c, w->r->table, NULL, 0, 0, NULL, h->depth, NULL, 0, h->token, on_complete, w);
        free(h);
    }
    w->nready = 0;
}

static void on_insert(floe *c, floe_call *call, void *arg)
{
    (void)c;
    held *h = arg;
    sq *w = h->w;
    w->inserts_out--;
    h->out--;
    settle(w, h);
    size_t n = 0;
    const uint8_t *res = floe_call_results(call, &n);
    const int st = floe_call_status(call);
    if (st != FLOE_OK) {
        sq_fail(w, st, "an insert of successors failed", floe_call_error(call));
        return;
    }
    uint64_t mine = 0;
    for (size_t i = 0; i < n; i++) {
        mine += res[i] == FLOE_INSERTED;
        if (res[i] == FLOE_FULL) {
            sq_fail(w, FLOE_ERR_FULL, "the table is full", "give floe-mc a larger --capacity");
            return;
        }
    }
    atomic_fetch_add(&w->p->states, mine);
}

static uint64_t now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static void sleep_us(uint64_t us)
{
    struct timespec t = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000L};
    nanosleep(&t, NULL);
}

/* A claim's answer waited for, the wait counted. */
static void wait_claim(sq *w, floe *c, floe_call *call)
{
    const uint64_t t0 = now_us();
    floe_wait(c, call);
    atomic_fetch_add(&w->p->waited_claim_us, now_us() - t0);
}

/* A pause while the server (every server) says WAIT, counted. */
static void pause_level(sq *w, uint64_t us)
{
    sleep_us(us);
    atomic_fetch_add(&w->p->waited_level_us, us);
}

/* Sends the insert being filled; `last`: the claim's last (on one floed it ends the claim). */
static void send_insert(sq *w, bool last)
{
    if (w->inserts_out >= w->r->inflight && !w->status) {
        const uint64_t t0 = now_us();
        while (w->inserts_out >= w->r->inflight && !w->status)
            if (floe_poll(w->c, -1) < 0)
                sq_fail(w, floe_error(w->c), "connection lost", floe_errstr(w->c));
        atomic_fetch_add(&w->p->waited_insert_us, now_us() - t0);
    }
    held *h = w->cur;
    if (w->status || (last && w->shards > 1 && !w->n)) /* nothing to send: the claim ends when the rest answer */
        return;
    const uint64_t complete = last && w->shards == 1 ? h->token : 0;
    w->inserts_out++;
    h->out++;
    atomic_fetch_add(&w->p->sent, w->n);
    atomic_fetch_add(&w->p->sent_bytes, w->n * w->kb);
    if (w->range && w->n)
        floe_send_insert_successors(w->c, w->r->table, w->keys, w->n * w->kb, w->n, w->first, w->counts, w->ncounts,
                                    h->depth, w->labels, w->n, complete, on_insert, h);
    else
        floe_send_insert_explore(w->c, w->r->table, w->keys, w->n * w->kb, w->n, w->n ? w->from : NULL, h->depth,
                                 w->labels, w->n, complete, on_insert, h);
    w->n = 0;
    w->ncounts = 0;
}

/* k more successors of parent in the request's run-length parents (parents with none there count 0). */
static void count_successors(sq *w, uint64_t parent, unsigned k)
{
    if (!w->range || !k)
        return;
    if (!w->ncounts) {
        w->first = parent;
        w->counts[w->ncounts++] = 0;
    }
    while (w->first + w->ncounts - 1 < parent)
        w->counts[w->ncounts++] = 0;
    w->counts[w->ncounts - 1] += (uint8_t)k;
}

static void add_successor(sq *w, const void *state, uint64_t parent, unsigned j)
{
    if (w->kb == 8) /* a SET's states: a move, not a call */
        memcpy(w->keys + w->n * 8, state, 8);
    else
        memcpy(w->keys + w->n * w->kb, state, w->kb);
    count_successors(w, parent, 1);
    w->from[w->n] = parent;
    w->labels[w->n] = (uint8_t)j;
    if (++w->n == w->r->batch)
        send_insert(w, false);
}

/* add_few writes SPREAD successors whatever their number k and counts k:
 * no loop whose end is as good as random (a puzzle's board has 2, 3 or 4). */
#define SPREAD 4

/* The k <= SPREAD successors of parent (8-byte states; room for SPREAD in the request) at once. */
static void add_few(sq *w, const uint64_t *succ, unsigned k, uint64_t parent)
{
    memcpy(w->keys + w->n * 8, succ, SPREAD * 8);
    for (unsigned j = 0; j < SPREAD; j++) {
        w->from[w->n + j] = parent;
        w->labels[w->n + j] = (uint8_t)j;
    }
    count_successors(w, parent, k);
    w->n += k;
    if (w->n == w->r->batch)
        send_insert(w, false);
}

/* The first state of its kind this run met, or a shallower one: kept (with its id) for --trace. */
static void note(_Atomic uint64_t *count, uint32_t *kept, uint64_t *kept_id, uint32_t *kept_depth, const uint32_t *s,
                 unsigned words, uint64_t id, uint32_t depth)
{
    if (atomic_fetch_add(count, 1) == 0 || depth < *kept_depth) {
        memcpy(kept, s, words * 4u);
        *kept_id = id;
        *kept_depth = depth;
    }
}

/* A claim's states expanded, their successors sent, the claim ended. */
static void expand_claim(sq *w, const floe_claim *cl, const uint64_t *ids, const unsigned char *keys)
{
    const mc_model *m = w->m;
    mc_progress *p = w->p;
    const bool packed = w->r->packed;
    const bool leaf = w->r->max_depth && cl->depth >= w->r->max_depth; /* found, not expanded */
    uint32_t s[MC_MAX_WORDS], succ[MC_MAX_SUCC * MC_MAX_WORDS];
    uint64_t psucc[MC_MAX_SUCC] = {0}, edges = 0; /* add_few copies SPREAD of them */
    held *h = malloc(sizeof *h);
    if (!h) {
        sq_fail(w, FLOE_ERR_IO, "out of memory", "for a claim");
        return;
    }
    *h = (held){w, cl->token, cl->depth, 0, false};
    w->cur = h;
    w->range = cl->n > 0;
    for (size_t i = 1; i < cl->n && w->range; i++)
        w->range = ids[i] == ids[0] + i;
    if (cl->n > w->counts_cap) {
        uint8_t *c = realloc(w->counts, cl->n);
        if (!c) {
            sq_fail(w, FLOE_ERR_IO, "out of memory", "for a claim's counts");
            goto out;
        }
        w->counts = c;
        w->counts_cap = cl->n;
    }
    /* a packed state is unpacked only for what reads its words: the invariant, next() where the
     * model has no packed next, a deadlock's report (unpacking every state cost workers a sixth of
     * their time in puzzle runs) */
    const bool words_always = !packed || !m->next_packed || m->invariant;
    for (size_t i = 0; i < cl->n && !w->status; i++) {
        uint64_t key = 0;
        if (packed) {
            memcpy(&key, keys + i * 8, 8);
            if (words_always)
                mc_unpack(m, key, s);
        } else {
            memcpy(s, keys + i * w->kb, w->kb);
        }
        if (m->invariant && !m->invariant(m, s))
            note(&p->violations, p->violation, &p->violation_id, &p->violation_depth, s, m->words, ids[i], cl->depth);
        if (leaf)
            continue;
        unsigned k;
        if (packed && m->next_packed) {
            k = m->next_packed(m, key, psucc);
        } else {
            k = m->next(m, s, succ);
            for (unsigned j = 0; packed && j < k; j++)
                psucc[j] = mc_pack(m, succ + j * m->words);
        }
        if (m->overflow && atomic_load(m->overflow)) {
            sq_fail(w, FLOE_ERR_INVALID, "the model library broke floe_mc_model.h",
                    atomic_load(m->overflow) & MC_PLUGIN_TOO_MANY ? "a state with more than 64 successors"
                                                                  : "a successor with a word at or past 2^bits");
            goto out;
        }
        edges += k;
        if (k == 0) {
            if (!words_always)
                mc_unpack(m, key, s);
            note(&p->deadlocks, p->deadlock, &p->deadlock_id, &p->deadlock_depth, s, m->words, ids[i], cl->depth);
        }
        if (packed && k <= SPREAD && w->n + SPREAD <= w->r->batch) {
            add_few(w, psucc, k, ids[i]);
            continue;
        }
        for (unsigned j = 0; j < k && !w->status; j++)
            add_successor(w, packed ? (const void *)&psucc[j] : (const void *)(succ + j * m->words), ids[i], j);
    }
    atomic_fetch_add(&p->transitions, edges);
    atomic_fetch_add(&p->expanded, cl->n);
    send_insert(w, true); /* the rest (one floed: and the claim's end; no states at all is fine) */
out:
    h->expanded = true;
    settle(w, h);
}

/* A claim's answer taken (and freed): its states expanded if it brought any;
 * its FLOE_CLAIM_* state (found, next: a bounded claim's figures; may be
 * NULL), or -1 after a failure. */
static int take_claim(sq *w, floe_call *call, uint64_t *found, uint64_t *next)
{
    floe_claim cl;
    const uint64_t *ids;
    const void *keys;
    int state = -1;
    const int st = floe_call_claim(call, &cl, &ids, &keys);
    if (st != FLOE_OK) {
        sq_fail(w, st, "a claim failed", floe_call_error(call));
    } else if (cl.state == FLOE_CLAIM_GOT && cl.key_bytes != cl.n * w->kb) {
        sq_fail(w, FLOE_ERR_PROTOCOL, "a claim's answer", "states of the wrong size for this model");
    } else {
        state = cl.state;
        if (found)
            *found = cl.found, *next = cl.next;
        if (state == FLOE_CLAIM_WAIT)
            atomic_fetch_add(&w->p->waits, 1);
        if (state == FLOE_CLAIM_GOT) {
            atomic_fetch_add(&w->p->claims, 1);
            expand_claim(w, &cl, ids, keys);
        }
    }
    floe_call_free(call);
    return state;
}

/* The next pause while the server (or every server) says WAIT. */
static uint64_t longer(uint64_t pause)
{
    return pause ? (pause * 2 < WAIT_MAX_US ? pause * 2 : WAIT_MAX_US) : WAIT_MIN_US;
}

/* One floed: claims until it answers DONE. */
static void run_one(sq *w, size_t claim)
{
    const mc_run *r = w->r;
    uint64_t wait_until = 0, pause = 0; /* pause: 0 while claims get states */
    while (!w->status && (!w->done || w->claims_out)) {
        const uint64_t t = now_us();
        if (!w->done && !w->claims_out && t < wait_until)
            pause_level(w, wait_until - t);
        /* keep claims in flight: all of them while states come, one while the server says WAIT */
        while (!w->done && w->claims_out < (pause ? 1u : r->inflight) && now_us() >= wait_until) {
            floe_call *call = floe_send_claim(w->c, r->table, claim, r->lease_ms, NULL, NULL);
            if (!call) {
                sq_fail(w, FLOE_ERR_IO, "out of memory", "for a claim");
                break;
            }
            w->claims[(w->claim_head + w->claims_out++) % r->inflight] = call;
        }
        if (w->status)
            break;
        floe_call *call = w->claims[w->claim_head];
        w->claim_head = (w->claim_head + 1) % r->inflight;
        w->claims_out--;
        wait_claim(w, w->c, call);
        const int state = take_claim(w, call, NULL, NULL);
        if (state == FLOE_CLAIM_DONE)
            w->done = true;
        else if (state == FLOE_CLAIM_WAIT)
            wait_until = now_us() + (pause = longer(pause));
        else if (state == FLOE_CLAIM_GOT)
            pause = 0;
    }
}

/* Over several floed: this worker's inserts answered and its claims ended. */
static void quiet(sq *w)
{
    for (;;) {
        end_ready(w);
        if (w->status || (floe_inflight(w->c) == 0 && !w->nready))
            return;
        if (floe_poll(w->c, -1) < 0)
            sq_fail(w, floe_error(w->c), "connection lost", floe_errstr(w->c));
    }
}

/* A claim up to `level` from every server at once: GOT if any brought
 * states (expanded), else WAIT if any is busy, else LEVEL_DONE with each
 * server's figures in found and next; -1 after a failure. */
static int sweep(sq *w, size_t claim, uint32_t level, floe_call **calls, uint64_t *found, uint64_t *next)
{
    for (unsigned s = 0; s < w->shards; s++)
        calls[s] = floe_send_claim_upto(floe_shard(w->c, s), w->r->table, claim, w->r->lease_ms, level, NULL, NULL);
    int verdict = FLOE_CLAIM_LEVEL_DONE;
    for (unsigned s = 0; s < w->shards; s++) {
        if (!calls[s]) {
            sq_fail(w, FLOE_ERR_IO, "out of memory", "for a claim");
            continue;
        }
        wait_claim(w, floe_shard(w->c, s), calls[s]);
        const int st = take_claim(w, calls[s], &found[s], &next[s]);
        if (st < 0 || verdict < 0)
            verdict = -1;
        else if (st == FLOE_CLAIM_GOT || verdict == FLOE_CLAIM_GOT)
            verdict = FLOE_CLAIM_GOT;
        else if (st != FLOE_CLAIM_LEVEL_DONE)
            verdict = FLOE_CLAIM_WAIT;
    }
    return w->status ? -1 : verdict;
}

/* Over several floed: claims of depth <= level from the servers that have
 * some, and when none has, the level proved over (or not yet) by sweeps. */
static void run_sharded(sq *w, size_t claim)
{
    const mc_run *r = w->r;
    const unsigned ns = w->shards;
    bool *dry = calloc(ns, sizeof *dry); /* answered none at this level since the last sweep */
    uint64_t *found = calloc(2 * (size_t)ns, sizeof *found), *next = calloc(ns, sizeof *next);
    floe_call **calls = calloc(ns, sizeof *calls);
    if (!dry || !found || !next || !calls)
        sq_fail(w, FLOE_ERR_IO, "out of memory", "for the servers' claims");
    uint32_t level = 0;
    unsigned turn = 0;
    uint64_t pause = 0;
    while (!w->status && !w->done) {
        end_ready(w);
        while (w->claims_out < r->inflight) { /* the servers in turn, those that have states */
            unsigned k = 0;
            while (k < ns && dry[(turn + k) % ns])
                k++;
            if (k == ns)
                break;
            const unsigned s = (turn + k) % ns, at = (w->claim_head + w->claims_out) % r->inflight;
            turn = s + 1;
            if (!(w->claims[at] =
                      floe_send_claim_upto(floe_shard(w->c, s), r->table, claim, r->lease_ms, level, NULL, NULL))) {
                sq_fail(w, FLOE_ERR_IO, "out of memory", "for a claim");
                break;
            }
            w->claim_shard[at] = s;
            w->claims_out++;
        }
        if (w->status)
            break;
        if (w->claims_out) {
            const unsigned s = w->claim_shard[w->claim_head];
            floe_call *call = w->claims[w->claim_head];
            w->claim_head = (w->claim_head + 1) % r->inflight;
            w->claims_out--;
            wait_claim(w, floe_shard(w->c, s), call);
            if (take_claim(w, call, NULL, NULL) != FLOE_CLAIM_GOT)
                dry[s] = true;
            continue;
        }
        /* no server has a state of depth <= level to give: this worker's claims ended, then two
         * sweeps that find none open, out or coming anywhere, with the same counts, prove the level
         * over (none of depth <= level can appear after the moment between them) */
        quiet(w);
        const int first = w->status ? -1 : sweep(w, claim, level, calls, found, next);
        const int second = first == FLOE_CLAIM_LEVEL_DONE ? sweep(w, claim, level, calls, found + ns, next) : first;
        if (second < 0)
            break;
        memset(dry, 0, ns * sizeof *dry);
        if (second == FLOE_CLAIM_LEVEL_DONE && memcmp(found, found + ns, ns * sizeof *found) == 0) {
            uint64_t deeper = 0;
            for (unsigned s = 0; s < ns; s++)
                deeper += next[s];
            if (deeper)
                level++;
            else
                w->done = true;
            pause = 0;
        } else if (first == FLOE_CLAIM_GOT || second == FLOE_CLAIM_GOT) {
            pause = 0;
        } else { /* other workers' claims are out, or their states still coming */
            pause_level(w, pause = longer(pause));
        }
    }
    quiet(w);
    free(dry);
    free(found);
    free(next);
    free(calls);
}

bool mc_server_explores(const floe *c, char *why, size_t len)
{
    if (floe_server_has(c, FLOE_FEATURE_EXPLORE))
        return true;
    snprintf(why, len,
             "%s is older than this floe-mc's --server-queue (its hello does not say \"" FLOE_FEATURE_EXPLORE
             "\"): it would drop the run's parents; upgrade floed",
             floe_info(c)->server[0] ? floe_info(c)->server : "the server");
    return false;
}

int mc_claims_run(const mc_run *r, mc_progress *p)
{
    sq w = {.r = r, .m = r->model, .p = p};
    w.kb = r->packed ? 8 : (size_t)r->model->words * 4;
    /* a claim's successors fill requests of `batch` states: claim about a third of that */
    const size_t claim = r->claim ? r->claim : (r->batch / 3 ? r->batch / 3 : 1);
    w.keys = malloc(r->batch * w.kb);
    w.from = malloc(r->batch * 8);
    w.labels = malloc(r->batch);
    w.claims = calloc(r->inflight, sizeof *w.claims);
    w.claim_shard = calloc(r->inflight, sizeof *w.claim_shard);
    if (!w.keys || !w.from || !w.labels || !w.claims || !w.claim_shard)
        sq_fail(&w, FLOE_ERR_IO, "out of memory", "for a request");
    else if (floe_connect_opts(r->server, r->conn, &w.c) != FLOE_OK)
        sq_fail(&w, FLOE_ERR_IO, "cannot connect", floe_errstr(w.c));
    char why[200];
    if (!w.status && !mc_server_explores(w.c, why, sizeof why))
        sq_fail(&w, FLOE_ERR_UNSUPPORTED, "the server", why);
    w.shards = w.c ? floe_shards(w.c) : 1;
    if (w.shards > 1)
        run_sharded(&w, claim);
    else
        run_one(&w, claim);
    if (!w.status && floe_wait_all(w.c) != FLOE_OK && !w.status)
        sq_fail(&w, floe_error(w.c), "a request failed", floe_errstr(w.c));
    for (unsigned i = 0; i < w.claims_out; i++) /* after a failure */
        floe_call_free(w.claims[(w.claim_head + i) % r->inflight]);
    floe_close(w.c);
    for (size_t i = 0; i < w.nready; i++)
        free(w.ready[i]);
    free(w.ready);
    free(w.keys);
    free(w.from);
    free(w.labels);
    free(w.counts);
    free(w.claims);
    free(w.claim_shard);
    p->status = w.status;
    snprintf(p->error, sizeof p->error, "%s", w.error);
    atomic_store(&p->done, 1);
    return w.status ? -1 : 0;
}
