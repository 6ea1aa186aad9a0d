/*
 * explore.c - the open set of an exploring table (see explore.h).
 *
 * The states found are kept in the order found, in chunks of CHUNK (a
 * growing run never copies what it holds): each one's key, parent id and
 * label.  Depths are runs of consecutive states of one depth (a
 * breadth-first run appends a level after the one before, so there are
 * about as many runs as levels), so that a state's depth costs a binary
 * search and no bytes of its own.  Handing out is a cursor over that order
 * (the first state never handed out) and a queue of states handed back by
 * expired claims, served first.  Claims out are few (a worker's requests
 * in flight): an array searched by token.  Inside, a state is its place in
 * the order (0, 1, ...); its id outside adds the shard's bits (none on one
 * floed), and parents are kept as given, ids.
 */
#define _GNU_SOURCE
#include "explore.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "alloc.h"
#include "floe_wire.h"
#include "store.h"

#define CHUNK_BITS 16
#define CHUNK      ((uint64_t)1 << CHUNK_BITS)
#define MAGIC      "FLOEXPL1"

typedef struct chunk {
    unsigned char *keys;
    uint64_t *parents;
    unsigned char *labels;
} chunk;

typedef struct depth_run {
    uint64_t start; /* the first state of the run */
    uint32_t depth;
} depth_run;

/* An add in progress: its states end at `end`; done when copied in; then,
 * once every add before it is done too, they are published (count = end)
 * and the claim it ends (complete) ends. */
typedef struct pending {
    uint64_t end, complete;
    bool done;
} pending;

typedef struct claim {
    uint64_t token, deadline;
    uint32_t depth;
    size_t n;
    uint64_t *ids; /* its states; NULL: the n states from first on (a claim from the cursor) */
    uint64_t first;
} claim;

/* The ids of claim c into out. */
static void claim_ids(const claim *c, uint64_t *out)
{
    if (c->ids)
        memcpy(out, c->ids, c->n * sizeof *out);
    else
        for (size_t i = 0; i < c->n; i++)
            out[i] = c->first + i;
}

struct floe_explore {
    /* everything below, but the states in [count, reserved): those the adds in progress copy in
     * without it, into the places they reserved under it */
    pthread_mutex_t lock;
    _Atomic uint64_t published; /* count, for the checks that take no lock */
    uint64_t reserved;          /* ids handed to adds: count <= reserved */
    pending *pend;              /* the adds in progress, in the order of their ids: pend[pend_head..pend_n) */
    size_t pend_head, pend_n, pend_cap;
    uint64_t pend_first; /* the sequence number of pend[pend_head] */
    uint32_t key_bytes, label_bytes;
    bool strict;
    bool sharded;   /* a shard of a table over several floed: */
    unsigned shard; /* which one, */
    uint64_t base;  /* and its ids' top bits */
    uint64_t run;   /* the high half of this run's tokens (under the shard's bits) */
    uint32_t seq; /* claims made: the low half */
    uint64_t count;
    chunk *chunks;
    size_t nchunks, chunks_cap;
    depth_run *runs;
    size_t nruns, runs_cap;
    uint64_t *levels; /* states found at each depth */
    uint32_t nlevels, levels_cap;
    uint64_t cursor;
    uint64_t *back; /* handed back: back[back_head .. back_n) */
    size_t back_head, back_n, back_cap;
    claim *claims;
    size_t nclaims, claims_cap;
    uint64_t claimed;
    floe_store store; /* where the chunks are (floe_explore_move): read and written through it alone */
    bool broken;      /* an add's copy into the store failed: its states are unknown, nothing is handed out */
};

/* The lock of a const x (its figures are read under it as well). */
static void lock(const floe_explore *x)
{
    pthread_mutex_lock((pthread_mutex_t *)&x->lock);
}

static void unlock(const floe_explore *x)
{
    pthread_mutex_unlock((pthread_mutex_t *)&x->lock);
}

/* ---- growing arrays ------------------------------------------------------------------------- */

static bool reserve(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = floe_realloc(*p, c * size);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

/* ---- the chunks' memory: the host's, or the table's device's (store.h) -------------------------- */

static int store_get(const floe_store *s, void *to, const void *from, size_t bytes)
{
    if (!bytes)
        return 0;
    if (!s->ops) {
        memcpy(to, from, bytes);
        return 0;
    }
    return s->ops->get(s->ctx, &(floe_store_copy){to, from, bytes}, 1);
}

/* A chunk's arrays: in host memory three of the host's (labels zeroed), in
 * a store one piece of it. */
static bool chunk_alloc(const floe_explore *x, const floe_store *s, chunk *c)
{
    const size_t kb = CHUNK * x->key_bytes, pb = CHUNK * sizeof *c->parents, lb = CHUNK * x->label_bytes;
    if (s->ops) {
        unsigned char *p = s->ops->alloc(s->ctx, pb + kb + lb);
        if (!p)
            return false;
        *c = (chunk){p + pb, (uint64_t *)p, lb ? p + pb + kb : NULL};
        return true;
    }
    *c = (chunk){floe_malloc(kb), floe_malloc(pb), lb ? floe_calloc(CHUNK, x->label_bytes) : NULL};
    if (c->keys && c->parents && (!lb || c->labels))
        return true;
    free(c->keys);
    free(c->parents);
    free(c->labels);
    return false;
}

static void chunk_free(const floe_store *s, chunk *c)
{
    if (s->ops) /* freed with the store */
        return;
    free(c->keys);
    free(c->parents);
    free(c->labels);
}

static chunk *chunk_of(const floe_explore *x, uint64_t id)
{
    return &x->chunks[id >> CHUNK_BITS];
}

static size_t in_chunk(uint64_t id)
{
    return (size_t)(id & (CHUNK - 1));
}

/* The key, parent and label of state id into host memory (nonzero: the store failed). */
static int key_of(const floe_explore *x, uint64_t id, void *to)
{
    return store_get(&x->store, to, chunk_of(x, id)->keys + in_chunk(id) * x->key_bytes, x->key_bytes);
}

static int parent_of(const floe_explore *x, uint64_t id, uint64_t *to)
{
    return store_get(&x->store, to, chunk_of(x, id)->parents + in_chunk(id), sizeof *to);
}

static int label_of(const floe_explore *x, uint64_t id, void *to)
{
    return store_get(&x->store, to, chunk_of(x, id)->labels + in_chunk(id) * x->label_bytes, x->label_bytes);
}

/* The keys of the n states from id on into host memory, a chunk at a time. */
static int keys_from(const floe_explore *x, uint64_t id, size_t n, void *to)
{
    for (size_t i = 0; i < n;) {
        const size_t k = (size_t)(CHUNK - in_chunk(id + i)) < n - i ? (size_t)(CHUNK - in_chunk(id + i)) : n - i;
        if (store_get(&x->store, (unsigned char *)to + i * x->key_bytes,
                      chunk_of(x, id + i)->keys + in_chunk(id + i) * x->key_bytes, k * x->key_bytes))
            return -1;
        i += k;
    }
    return 0;
}

/* Whether id (not FLOE_EXPLORE_ROOT) is a state of this shard, and if so
 * its place in *at (not yet checked against the count). */
static bool here(const floe_explore *x, uint64_t id, uint64_t *at)
{
    if (x->sharded && id >> FLOE_ID_SHARD_SHIFT != x->shard)
        return false;
    *at = x->sharded ? id & FLOE_ID_LOCAL_MASK : id;
    return true;
}

/* Room for states [0, end). */
static bool room_for(floe_explore *x, uint64_t end)
{
    const size_t need = (size_t)((end + CHUNK - 1) >> CHUNK_BITS);
    if (!reserve((void **)&x->chunks, &x->chunks_cap, need, sizeof *x->chunks))
        return false;
    for (; x->nchunks < need; x->nchunks++)
        if (!chunk_alloc(x, &x->store, &x->chunks[x->nchunks]))
            return false;
    return true;
}

/* ---- depths ------------------------------------------------------------------------------------ */

/* The run that holds id: the last one starting at or before it. */
static size_t run_of(const floe_explore *x, uint64_t id)
{
    size_t lo = 0, hi = x->nruns;
    while (hi - lo > 1) {
        const size_t mid = lo + (hi - lo) / 2;
        if (x->runs[mid].start <= id)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static uint32_t depth_of(const floe_explore *x, uint64_t id)
{
    return x->runs[run_of(x, id)].depth;
}

/* ---- life -------------------------------------------------------------------------------------- */

static floe_status check_shape(uint32_t key_bytes, uint32_t label_bytes, floe_errinfo *err)
{
    if (key_bytes == 0 || key_bytes > FLOE_EXPLORE_KEY_MAX)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "an explored state is 1..%u bytes, not %u", FLOE_EXPLORE_KEY_MAX,
                                key_bytes);
    if (label_bytes > FLOE_EXPLORE_LABEL_MAX)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "an action label is 0..%u bytes, not %u", FLOE_EXPLORE_LABEL_MAX,
                                label_bytes);
    return FLOE_OK;
}

floe_status floe_explore_create(uint32_t key_bytes, uint32_t label_bytes, bool strict, uint64_t run, int shard,
                                floe_explore **out, floe_errinfo *err)
{
    floe_status st = check_shape(key_bytes, label_bytes, err);
    if (st != FLOE_OK)
        return st;
    if (shard >= (int)FLOE_SHARDS_MAX)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "shard %d: a table has at most %u", shard, FLOE_SHARDS_MAX);
    floe_explore *x = floe_calloc(1, sizeof *x);
    if (!x)
        return floe_errinfo_set(err, FLOE_ERR_FULL, "out of memory for an open set");
    pthread_mutex_init(&x->lock, NULL);
    x->store = FLOE_STORE_HOST;
    x->key_bytes = key_bytes;
    x->label_bytes = label_bytes;
    x->strict = strict;
    x->sharded = shard >= 0;
    x->shard = x->sharded ? (unsigned)shard : 0;
    x->base = (uint64_t)x->shard << FLOE_ID_SHARD_SHIFT;
    while (!run && getrandom(&run, sizeof run, 0) == sizeof run)
        ;
    x->run = run & (x->sharded ? 0xFFFFFFu : 0xFFFFFFFFu); /* a shard's tokens name it in their top bits, as ids */
    if (!x->run)
        x->run = 1;
    *out = x;
    return FLOE_OK;
}

void floe_explore_destroy(floe_explore *x)
{
    if (!x)
        return;
    for (size_t i = 0; i < x->nchunks; i++)
        chunk_free(&x->store, &x->chunks[i]);
    if (x->store.ops)
        x->store.ops->close(x->store.ctx);
    for (size_t i = 0; i < x->nclaims; i++)
        free(x->claims[i].ids);
    free(x->chunks);
    free(x->runs);
    free(x->levels);
    free(x->back);
    free(x->claims);
    free(x->pend);
    pthread_mutex_destroy(&x->lock);
    free(x);
}

/* ---- finding ---------------------------------------------------------------------------------- */

static floe_status no_parent(const floe_explore *x, uint64_t p, size_t i, size_t n, uint64_t count, floe_errinfo *err)
{
    return floe_errinfo_set(err, FLOE_ERR_INVALID,
                            "parent %llu (state %zu of %zu) is no state found: %llu are (ids %llu..%llu)",
                            (unsigned long long)p, i + 1, n, (unsigned long long)count, (unsigned long long)x->base,
                            (unsigned long long)(x->base + (count ? count - 1 : 0)));
}

floe_status floe_explore_check_parents(const floe_explore *x, const uint64_t *parents, size_t n, floe_errinfo *err)
{
    const uint64_t count = atomic_load_explicit(&((floe_explore *)x)->published, memory_order_acquire);
    for (size_t i = 0; parents && i < n; i++) {
        uint64_t at;
        if (parents[i] != FLOE_EXPLORE_ROOT && here(x, parents[i], &at) && at >= count)
            return no_parent(x, parents[i], i, n, count, err);
    }
    return FLOE_OK;
}

/* The depth of id, with *hint the run that held the last one asked
 * (consecutive states of a batch have parents of one claim, one run). */
static uint32_t depth_near(const floe_explore *x, uint64_t id, size_t *hint)
{
    const size_t h = *hint;
    if (h < x->nruns && x->runs[h].start <= id && (h + 1 == x->nruns || id < x->runs[h + 1].start))
        return x->runs[h].depth;
    *hint = run_of(x, id);
    return x->runs[*hint].depth;
}

/* The depth of a state whose parent is p (its depth on another shard
 * parent_depth), with *hint as depth_near's. */
static uint32_t depth_from(const floe_explore *x, uint64_t p, uint32_t parent_depth, size_t *hint)
{
    uint64_t at;
    if (p == FLOE_EXPLORE_ROOT)
        return 0;
    return (here(x, p, &at) ? depth_near(x, at, hint) : parent_depth) + 1;
}

static claim *claim_of(floe_explore *x, uint64_t token);
static void drop_claim(floe_explore *x, claim *c);

/* Publishes the adds done at the front of the queue, in order: their
 * states become claimable and their claims end.  Lock held. */
static void publish_locked(floe_explore *x)
{
    while (x->pend_head < x->pend_n && x->pend[x->pend_head].done) {
        const pending *p = &x->pend[x->pend_head++];
        x->pend_first++;
        x->count = p->end;
        if (p->complete) { /* a claim that expired meanwhile has its states open again: nothing to end */
            claim *c = claim_of(x, p->complete);
            if (c)
                drop_claim(x, c);
        }
    }
    if (x->pend_head == x->pend_n)
        x->pend_head = x->pend_n = 0;
    atomic_store_explicit(&x->published, x->count, memory_order_release);
}

/* The depths of the new states (parents pp[0..m)), with the lock held: the
 * runs and levels of [id0, id0 + m) (room reserved), state by state; for a
 * batch whose parents are not all of one depth. */
static void depths_one_by_one(floe_explore *x, const uint64_t *pp, uint32_t parent_depth, size_t m, uint64_t id0)
{
    size_t hint = x->nruns ? x->nruns - 1 : 0;
    for (size_t j = 0; j < m; j++) {
        const uint32_t d = depth_from(x, pp[j], parent_depth, &hint);
        if (!x->nruns || x->runs[x->nruns - 1].depth != d)
            x->runs[x->nruns++] = (depth_run){id0 + j, d};
        x->levels[d]++;
    }
}

/* A batch's parents: one a state (each), runs of them, or none (every
 * state initial). */
typedef struct parent_src {
    const uint64_t *each;
    const floe_parent_runs *runs;
} parent_src;

/* parents_of_keys writes a run's parent RUN_SPREAD times whatever its count
 * (the count then says how far to go on): no branch a run, whose outcome
 * is as good as random.  A run longer than that is written out. */
#define RUN_SPREAD 4

/* Each of the n states' parent, into pp (n + RUN_SPREAD places). */
static void parents_of_keys(parent_src ps, size_t n, uint64_t *pp)
{
    if (ps.each) {
        memcpy(pp, ps.each, n * sizeof *pp);
    } else if (ps.runs) { /* the counts add up to n (floe_explore_add_runs) */
        size_t k = 0;
        for (size_t r = 0; r < ps.runs->n; r++) {
            const uint64_t p = ps.runs->first + r;
            const unsigned c = ps.runs->counts[r];
            if (c <= RUN_SPREAD)
                for (unsigned t = 0; t < RUN_SPREAD; t++)
                    pp[k + t] = p;
            else
                for (unsigned t = 0; t < c; t++)
                    pp[k + t] = p;
            k += c;
        }
    } else {
        for (size_t i = 0; i < n; i++)
            pp[i] = FLOE_EXPLORE_ROOT;
    }
}

/* The states answered INSERTED (results NULL: all): their places in the
 * batch into places, their parents moved to the front of pp; how many.
 * Without a branch a state: the answers are as good as random (a place not
 * taken is written again). */
static size_t pick_inserted(const uint8_t *results, size_t n, uint32_t *places, uint64_t *pp)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        places[m] = (uint32_t)i;
        pp[m] = pp[i];
        m += !results || results[i] == FLOE_INSERTED;
    }
    return m;
}

/* States [j, j + k) of an add, all in chunk c from place `at` on: their
 * keys, parents, labels (and ids); nonzero if the store failed.  In host
 * memory straight into the chunk; in a store gathered into scratch (k
 * states' keys, then their labels) first, and the three arrays put at
 * once.  Key and label sizes of 8 and 1 (a SET's states, a floe-mc label)
 * are constants here, so that nothing is a call. */
static int copy_states(const floe_explore *x, chunk *c, size_t at, size_t k, const uint32_t *places, const uint64_t *pp,
                       const unsigned char *keys, const unsigned char *labels, uint64_t *ids, uint64_t id,
                       unsigned char *scratch)
{
    const uint32_t kb = x->key_bytes, lb = x->label_bytes;
    const bool host = !x->store.ops;
    unsigned char *kd = host ? c->keys + at * kb : scratch;
    if (kb == 8)
        for (size_t t = 0; t < k; t++)
            memcpy(kd + t * 8, keys + (size_t)places[t] * 8, 8);
    else
        for (size_t t = 0; t < k; t++)
            memcpy(kd + t * kb, keys + (size_t)places[t] * kb, kb);
    if (host)
        memcpy(c->parents + at, pp, k * sizeof *pp);
    if (lb) {
        unsigned char *ld = host ? c->labels + at * lb : scratch + k * kb;
        if (!labels)
            memset(ld, 0, k * lb);
        else if (lb == 1)
            for (size_t t = 0; t < k; t++)
                ld[t] = labels[places[t]];
        else
            for (size_t t = 0; t < k; t++)
                memcpy(ld + t * lb, labels + (size_t)places[t] * lb, lb);
    }
    for (size_t t = 0; ids && t < k; t++)
        ids[places[t]] = x->base + id + t;
    if (host)
        return 0;
    const floe_store_copy all[3] = {{c->keys + at * kb, scratch, k * kb},
                                    {c->parents + at, pp, k * sizeof *pp},
                                    {lb ? c->labels + at * lb : NULL, scratch + k * kb, k * lb}};
    return x->store.ops->put(x->store.ctx, all, lb ? 3 : 2);
}

static floe_status store_failed(const floe_explore *x, size_t m, floe_errinfo *err)
{
    if (!x->store.ops)
        return floe_errinfo_set(err, FLOE_ERR_FULL, "out of memory for %zu states of the open set", m);
    return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "the open set's memory on GPU %d failed (%zu states)",
                            x->store.device, m);
}

/* What everything answers once an add's states were lost (x->broken, lock held). */
static floe_status broken_error(const floe_explore *x, floe_errinfo *err)
{
    return floe_errinfo_set(err, FLOE_ERR_INTERNAL,
                            "the open set lost states when copying into its memory on GPU %d failed: the run "
                            "cannot go on (resume it from its last snapshot)",
                            x->store.device);
}

/* floe_explore_add and floe_explore_add_runs. */
static floe_status add_states(floe_explore *x, const void *keys, parent_src ps, uint32_t parent_depth,
                              const void *labels, const uint8_t *results, size_t n, uint64_t *ids, uint64_t complete,
                              floe_errinfo *err)
{
    /* without the lock: the places of the new states, their parents, and the range of those */
    if (n > UINT32_MAX)
        return floe_errinfo_set(err, FLOE_ERR_TOO_LARGE, "a batch of %zu states: at most 2^32 - 1", n);
    uint32_t *places = floe_malloc(n * sizeof *places + 1);
    uint64_t *pp = floe_malloc((n + RUN_SPREAD) * sizeof *pp);
    if (!places || !pp) {
        free(places);
        free(pp);
        return floe_errinfo_set(err, FLOE_ERR_FULL, "out of memory for a batch of %zu states", n);
    }
    parents_of_keys(ps, n, pp);
    const size_t m = pick_inserted(results, n, places, pp);
    uint64_t lo = UINT64_MAX, hi = 0; /* the places of the parents here */
    bool roots = false, foreign = false;
    for (size_t j = 0; j < m; j++) {
        const uint64_t p = pp[j];
        uint64_t at;
        roots |= p == FLOE_EXPLORE_ROOT;
        if (p == FLOE_EXPLORE_ROOT)
            continue;
        if (!here(x, p, &at)) {
            foreign = true;
            continue;
        }
        lo = at < lo ? at : lo;
        hi = at > hi ? at : hi;
    }
    /* with the lock: the checks, the ids, their depths, room for them, and a place in the queue */
    floe_status st = FLOE_OK;
    lock(x);
    const uint64_t id0 = x->reserved;
    if (x->broken) {
        st = broken_error(x, err);
    } else if (lo != UINT64_MAX && hi >= x->count) { /* name the first */
        size_t j = 0;
        uint64_t at;
        while (pp[j] == FLOE_EXPLORE_ROOT || !here(x, pp[j], &at) || at < x->count)
            j++;
        st = no_parent(x, pp[j], places[j], n, x->count, err);
    } else {
        /* one depth (the successors of one claim, in a breadth-first run): the parents in one run
         * here, or all on other shards, or all initial */
        size_t at = x->nruns ? x->nruns - 1 : 0;
        uint32_t d = 0, deepest = 0;
        const int kinds = roots + (lo != UINT64_MAX) + foreign;
        bool one = kinds == 0 || (kinds == 1 && lo == UINT64_MAX);
        if (one && foreign)
            d = parent_depth + 1;
        if (kinds == 1 && lo != UINT64_MAX) {
            d = depth_near(x, lo, &at) + 1;
            one = at + 1 == x->nruns || hi < x->runs[at + 1].start;
        }
        size_t new_runs = 1;
        if (one) {
            deepest = d;
        } else { /* state by state */
            size_t hint = at;
            uint32_t last = x->nruns ? x->runs[x->nruns - 1].depth : UINT32_MAX;
            for (size_t j = 0; j < m; j++) {
                const uint32_t dj = depth_from(x, pp[j], parent_depth, &hint);
                deepest = dj > deepest ? dj : deepest;
                new_runs += dj != last;
                last = dj;
            }
        }
        if (x->pend_head && x->pend_n == x->pend_cap) { /* the queue's free front first */
            memmove(x->pend, x->pend + x->pend_head, (x->pend_n - x->pend_head) * sizeof *x->pend);
            x->pend_n -= x->pend_head;
            x->pend_head = 0;
        }
        size_t levels_cap = x->levels_cap;
        const bool room = room_for(x, id0 + m) &&
                          reserve((void **)&x->levels, &levels_cap, (size_t)deepest + 1, sizeof *x->levels) &&
                          reserve((void **)&x->runs, &x->runs_cap, x->nruns + new_runs, sizeof *x->runs) &&
                          reserve((void **)&x->pend, &x->pend_cap, x->pend_n + 1, sizeof *x->pend);
        x->levels_cap = (uint32_t)levels_cap;
        if (!room) {
            st = x->store.ops
                     ? floe_errinfo_set(err, FLOE_ERR_FULL,
                                        "no room on GPU %d for %zu more states of the open set (its "
                                        "memory, or maxmemory-gpu)",
                                        x->store.device, m)
                     : floe_errinfo_set(err, FLOE_ERR_FULL, "out of memory for %zu more states of the open set", m);
        } else {
            if (m && deepest >= x->nlevels) {
                memset(x->levels + x->nlevels, 0, (deepest + 1 - x->nlevels) * sizeof *x->levels);
                x->nlevels = deepest + 1;
            }
            if (one && m) {
                if (!x->nruns || x->runs[x->nruns - 1].depth != d)
                    x->runs[x->nruns++] = (depth_run){id0, d};
                x->levels[d] += m;
            } else if (m) {
                depths_one_by_one(x, pp, parent_depth, m, id0);
            }
            x->pend[x->pend_n++] = (pending){id0 + m, complete, false};
            x->reserved = id0 + m;
        }
    }
    const uint64_t seq = x->pend_first + (x->pend_n - 1 - x->pend_head);
    /* the chunks the states go to (the list may move under another add's room_for) */
    const size_t c0 = (size_t)(id0 >> CHUNK_BITS), nc = m ? (size_t)((id0 + m - 1) >> CHUNK_BITS) - c0 + 1 : 0;
    chunk *to = st == FLOE_OK ? floe_malloc(nc * sizeof *to + 1) : NULL;
    if (to && nc)
        memcpy(to, x->chunks + c0, nc * sizeof *to);
    unlock(x);
    if (st != FLOE_OK || !to) {
        free(places);
        free(pp);
        if (st == FLOE_OK) { /* its place in the queue is taken: it completes empty, and says why */
            lock(x);
            x->pend[x->pend_head + (size_t)(seq - x->pend_first)].done = true;
            publish_locked(x);
            unlock(x);
            st = floe_errinfo_set(err, FLOE_ERR_FULL, "out of memory for the chunks of %zu states", m);
        }
        return st;
    }
    /* without the lock: the states, into places nobody reads before they are published, a chunk at
     * a time */
    unsigned char *scratch =
        x->store.ops ? floe_malloc((m < CHUNK ? m : CHUNK) * (x->key_bytes + x->label_bytes) + 1) : NULL;
    int rc = x->store.ops && !scratch ? -1 : 0;
    for (size_t j = 0; j < m && rc == 0;) {
        const uint64_t id = id0 + j;
        const size_t at = in_chunk(id), k = (size_t)(CHUNK - at) < m - j ? (size_t)(CHUNK - at) : m - j;
        rc = copy_states(x, &to[(id >> CHUNK_BITS) - c0], at, k, places + j, pp + j, keys, labels, ids, id, scratch);
        j += k;
    }
    free(scratch);
    free(to);
    free(places);
    free(pp);
    lock(x);
    /* (the ids are taken and later adds' states may be published: states a store failed to take
     * are unknown, so from here on nothing is handed out, traced or saved) */
    x->broken |= rc != 0;
    x->pend[x->pend_head + (size_t)(seq - x->pend_first)].done = true;
    publish_locked(x);
    unlock(x);
    return rc == 0 ? FLOE_OK : store_failed(x, m, err);
}

floe_status floe_explore_add(floe_explore *x, const void *keys, const uint64_t *parents, uint32_t parent_depth,
                             const void *labels, const uint8_t *results, size_t n, uint64_t *ids, uint64_t complete,
                             floe_errinfo *err)
{
    return add_states(x, keys, (parent_src){parents, NULL}, parent_depth, labels, results, n, ids, complete, err);
}

floe_status floe_explore_add_runs(floe_explore *x, const void *keys, const floe_parent_runs *runs,
                                  uint32_t parent_depth, const void *labels, const uint8_t *results, size_t n,
                                  uint64_t *ids, uint64_t complete, floe_errinfo *err)
{
    uint64_t sum = 0;
    for (size_t r = 0; r < runs->n; r++)
        sum += runs->counts[r];
    if (sum != n)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "the parents' runs count %llu states; the batch has %zu",
                                (unsigned long long)sum, n);
    return add_states(x, keys, (parent_src){NULL, runs}, parent_depth, labels, results, n, ids, complete, err);
}

/* ---- claims ----------------------------------------------------------------------------------- */

static claim *claim_of(floe_explore *x, uint64_t token)
{
    for (size_t i = 0; token && i < x->nclaims; i++)
        if (x->claims[i].token == token)
            return &x->claims[i];
    return NULL;
}

static void drop_claim(floe_explore *x, claim *c)
{
    x->claimed -= c->n;
    free(c->ids);
    *c = x->claims[--x->nclaims];
}

static size_t expire_locked(floe_explore *x, uint64_t now_ms)
{
    size_t expired = 0;
    for (size_t i = 0; i < x->nclaims;) {
        claim *c = &x->claims[i];
        if (c->deadline > now_ms) {
            i++;
            continue;
        }
        /* the queue's free front first, then more room */
        if (x->back_head && x->back_n + c->n > x->back_cap) {
            memmove(x->back, x->back + x->back_head, (x->back_n - x->back_head) * sizeof *x->back);
            x->back_n -= x->back_head;
            x->back_head = 0;
        }
        if (!reserve((void **)&x->back, &x->back_cap, x->back_n + c->n, sizeof *x->back)) {
            i++; /* out of memory: it stays out, and expires at a later call */
            continue;
        }
        claim_ids(c, x->back + x->back_n);
        x->back_n += c->n;
        drop_claim(x, c);
        expired++;
    }
    return expired;
}

size_t floe_explore_expire(floe_explore *x, uint64_t now_ms)
{
    lock(x);
    size_t r = expire_locked(x, now_ms);
    unlock(x);
    return r;
}

/* Whether a claim of depth below `below` is out. */
static bool shallower_out(const floe_explore *x, uint32_t below)
{
    for (size_t i = 0; i < x->nclaims; i++)
        if (x->claims[i].depth < below)
            return true;
    return false;
}

/* A claim from the cursor, to copy out once the lock is let go: its states
 * are published, so they never change, and the chunks' memory never moves
 * (only the list of them does, under the lock: the few it needs are copied
 * here).  Claims are many and large (floe-mc's: 20 Ki states), and adds and
 * other claims would wait on the copy. */
typedef struct claim_copy {
    uint64_t first;       /* the claim's first state */
    size_t n;             /* 0: nothing to copy */
    unsigned char **keys; /* the key arrays of chunks first >> CHUNK_BITS on */
} claim_copy;

/* The copy of c (lock not held): ids and keys as claim_locked would have
 * written them; ERR_INTERNAL if the store failed. */
static floe_status claim_copy_out(const floe_explore *x, const claim_copy *c, uint64_t *ids, void *keys,
                                  floe_errinfo *err)
{
    for (size_t i = 0; i < c->n; i++)
        ids[i] = x->base + c->first + i;
    const size_t c0 = (size_t)(c->first >> CHUNK_BITS);
    int rc = 0;
    for (size_t i = 0; keys && i < c->n && rc == 0;) { /* chunk by chunk */
        const uint64_t id = c->first + i;
        const size_t k = (size_t)(CHUNK - in_chunk(id)) < c->n - i ? (size_t)(CHUNK - in_chunk(id)) : c->n - i;
        rc = store_get(&x->store, (unsigned char *)keys + i * x->key_bytes,
                       c->keys[(id >> CHUNK_BITS) - c0] + in_chunk(id) * x->key_bytes, k * x->key_bytes);
        i += k;
    }
    free(c->keys);
    return rc == 0 ? FLOE_OK : store_failed(x, c->n, err);
}

/* upto: UINT32_MAX for a claim of floe_explore_claim (the barrier here when strict), else
 * claim_upto's bound (no barrier: the workers keep it).  A claim from the cursor leaves its ids
 * and keys to *later (claim_copy_out), when it can. */
static floe_status claim_locked(floe_explore *x, size_t max, uint32_t upto, uint64_t now_ms, uint64_t lease_ms,
                                uint64_t *ids, void *keys, size_t *n, uint32_t *depth, uint64_t *token,
                                floe_explore_state *state, claim_copy *later, floe_errinfo *err)
{
    *later = (claim_copy){0, 0, NULL};
    *n = 0;
    *token = 0;
    *depth = 0;
    *state = FLOE_EXPLORE_WAIT;
    if (x->broken)
        return broken_error(x, err);
    expire_locked(x, now_ms);
    const bool bounded = upto != UINT32_MAX, from_cursor = x->cursor < x->count;
    /* the states handed back first; bounded, whichever of them and the cursor's is shallower
     * (states handed back may be deeper than the cursor's when the workers keep the levels) */
    const bool from_back = x->back_head < x->back_n &&
                           !(bounded && from_cursor && depth_of(x, x->back[x->back_head]) > depth_of(x, x->cursor));
    const bool open = from_back || from_cursor;
    const uint32_t d = open ? depth_of(x, from_back ? x->back[x->back_head] : x->cursor) : 0;
    if (bounded && (!open || d > upto)) {
        /* nothing of depth <= upto to hand out: the level is done here once none is out or coming */
        const bool busy = shallower_out(x, upto + 1) || x->reserved != x->count;
        *state = busy ? FLOE_EXPLORE_WAIT : FLOE_EXPLORE_LEVEL_DONE;
        return FLOE_OK;
    }
    if (!open) {
        /* nothing open: done once a state was found and every claim has ended */
        *state = x->count && !x->nclaims && x->reserved == x->count ? FLOE_EXPLORE_DONE : FLOE_EXPLORE_WAIT;
        return FLOE_OK;
    }
    if (max == 0 || (!bounded && x->strict && shallower_out(x, d))) {
        *state = FLOE_EXPLORE_WAIT;
        return FLOE_OK;
    }
    if (!reserve((void **)&x->claims, &x->claims_cap, x->nclaims + 1, sizeof *x->claims))
        return floe_errinfo_set(err, FLOE_ERR_FULL, "out of memory for a claim");
    /* the states of depth d at the front of the queue (one by one), or from the cursor (as far as
     * its run of depth d goes: one search) */
    size_t m = 0;
    uint64_t *mine = NULL;
    if (from_back) {
        while (m < max && x->back_head + m < x->back_n && depth_of(x, x->back[x->back_head + m]) == d)
            m++;
        if (!(mine = floe_malloc(m * sizeof *mine)))
            return floe_errinfo_set(err, FLOE_ERR_FULL, "out of memory for a claim of %zu states", m);
        for (size_t i = 0; i < m; i++) {
            mine[i] = x->back[x->back_head + i];
            ids[i] = x->base + mine[i];
        }
        for (size_t i = 0, k; keys && i < m; i += k) { /* consecutive states (a cursor's claim's) at once */
            for (k = 1; i + k < m && mine[i + k] == mine[i] + k; k++)
                ;
            if (keys_from(x, mine[i], k, (unsigned char *)keys + i * x->key_bytes)) {
                free(mine);
                return store_failed(x, m, err);
            }
        }
    } else {
        size_t hint = x->nruns - 1;
        depth_near(x, x->cursor, &hint);
        const uint64_t end =
            hint + 1 < x->nruns && x->runs[hint + 1].start < x->count ? x->runs[hint + 1].start : x->count;
        m = (size_t)(end - x->cursor < max ? end - x->cursor : max);
        const size_t c0 = (size_t)(x->cursor >> CHUNK_BITS),
                     nc = m ? (size_t)((x->cursor + m - 1) >> CHUNK_BITS) - c0 + 1 : 0;
        unsigned char **chunk_keys = floe_malloc(nc * sizeof *chunk_keys + 1);
        if (!chunk_keys)
            return floe_errinfo_set(err, FLOE_ERR_FULL, "out of memory for a claim of %zu states", m);
        for (size_t i = 0; i < nc; i++)
            chunk_keys[i] = x->chunks[c0 + i].keys;
        *later = (claim_copy){x->cursor, m, chunk_keys};
    }
    if (from_back) {
        x->back_head += m;
        if (x->back_head == x->back_n)
            x->back_head = x->back_n = 0;
    } else {
        x->cursor += m;
    }
    if (++x->seq == 0)
        x->seq = 1;
    claim *c = &x->claims[x->nclaims++];
    *c = (claim){x->base | x->run << 32 | x->seq, now_ms + lease_ms, d, m, mine, from_back ? 0 : x->cursor - m};
    x->claimed += m;
    *n = m;
    *depth = d;
    *token = c->token;
    *state = FLOE_EXPLORE_GOT;
    return FLOE_OK;
}

floe_status floe_explore_claim(floe_explore *x, size_t max, uint64_t now_ms, uint64_t lease_ms, uint64_t *ids,
                               void *keys, size_t *n, uint32_t *depth, uint64_t *token, floe_explore_state *state,
                               floe_errinfo *err)
{
    claim_copy later;
    lock(x);
    floe_status r = claim_locked(x, max, UINT32_MAX, now_ms, lease_ms, ids, keys, n, depth, token, state, &later, err);
    unlock(x);
    const floe_status c = claim_copy_out(x, &later, ids, keys, err);
    return r != FLOE_OK ? r : c;
}

floe_status floe_explore_claim_upto(floe_explore *x, size_t max, uint32_t upto, uint64_t now_ms, uint64_t lease_ms,
                                    uint64_t *ids, void *keys, size_t *n, uint32_t *depth, uint64_t *token,
                                    floe_explore_state *state, uint64_t *found, uint64_t *next, floe_errinfo *err)
{
    if (upto == UINT32_MAX)
        upto--;
    claim_copy later;
    lock(x);
    floe_status r = claim_locked(x, max, upto, now_ms, lease_ms, ids, keys, n, depth, token, state, &later, err);
    *found = 0;
    for (uint32_t d = 0; d <= upto && d < x->nlevels; d++)
        *found += x->levels[d];
    *next = upto + 1 < x->nlevels ? x->levels[upto + 1] : 0;
    unlock(x);
    const floe_status c = claim_copy_out(x, &later, ids, keys, err);
    return r != FLOE_OK ? r : c;
}

static floe_status no_claim(uint64_t token, floe_errinfo *err)
{
    return floe_errinfo_set(err, FLOE_ERR_INVALID,
                            "no claim 0x%llx is out on this table: it was completed, its lease ran out and its "
                            "states went back to the open set, or it is another table's or run's",
                            (unsigned long long)token);
}

static bool holds_locked(const floe_explore *x, uint64_t token)
{
    for (size_t i = 0; token && i < x->nclaims; i++)
        if (x->claims[i].token == token)
            return true;
    return false;
}

bool floe_explore_holds(const floe_explore *x, uint64_t token)
{
    lock(x);
    bool r = holds_locked(x, token);
    unlock(x);
    return r;
}

static floe_status complete_locked(floe_explore *x, uint64_t token, floe_errinfo *err)
{
    claim *c = claim_of(x, token);
    if (!c)
        return no_claim(token, err);
    drop_claim(x, c);
    return FLOE_OK;
}

floe_status floe_explore_complete(floe_explore *x, uint64_t token, floe_errinfo *err)
{
    lock(x);
    floe_status r = complete_locked(x, token, err);
    unlock(x);
    return r;
}

static floe_status renew_locked(floe_explore *x, uint64_t token, uint64_t now_ms, uint64_t lease_ms, floe_errinfo *err)
{
    claim *c = claim_of(x, token);
    if (!c)
        return no_claim(token, err);
    c->deadline = now_ms + lease_ms;
    return FLOE_OK;
}

floe_status floe_explore_renew(floe_explore *x, uint64_t token, uint64_t now_ms, uint64_t lease_ms, floe_errinfo *err)
{
    lock(x);
    floe_status r = renew_locked(x, token, now_ms, lease_ms, err);
    unlock(x);
    return r;
}

/* ---- traces and figures --------------------------------------------------------------------- */

/* The place of state id here, or ERR_INVALID. */
static floe_status place_of(const floe_explore *x, uint64_t id, uint64_t *at, floe_errinfo *err)
{
    if (id != FLOE_EXPLORE_ROOT && !here(x, id, at))
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "state %llu is on shard %u of the table; this is shard %u",
                                (unsigned long long)id, (unsigned)(id >> FLOE_ID_SHARD_SHIFT), x->shard);
    if (id == FLOE_EXPLORE_ROOT || *at >= x->count)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "state %llu was not found: %llu are (ids %llu..%llu)",
                                (unsigned long long)id, (unsigned long long)x->count, (unsigned long long)x->base,
                                (unsigned long long)(x->base + (x->count ? x->count - 1 : 0)));
    return FLOE_OK;
}

static floe_status depth_locked(const floe_explore *x, uint64_t id, uint32_t *depth, floe_errinfo *err)
{
    uint64_t at;
    floe_status st = place_of(x, id, &at, err);
    if (st == FLOE_OK)
        *depth = depth_of(x, at);
    return st;
}

floe_status floe_explore_depth(const floe_explore *x, uint64_t id, uint32_t *depth, floe_errinfo *err)
{
    lock(x);
    floe_status r = depth_locked(x, id, depth, err);
    unlock(x);
    return r;
}

static floe_status trace_locked(const floe_explore *x, uint64_t id, size_t cap, uint64_t *ids, void *keys, void *labels,
                                size_t *n, uint64_t *from, floe_errinfo *err)
{
    uint64_t at;
    floe_status st = x->broken ? broken_error(x, err) : place_of(x, id, &at, err);
    if (st != FLOE_OK)
        return st;
    /* each parent is one shallower: the chain here is at most depth + 1 states, the last one's
     * place known; filled from the end, and moved to the front if it stops at another shard */
    const size_t most = (size_t)depth_of(x, at) + 1;
    *n = most;
    if (most > cap)
        return floe_errinfo_set(err, FLOE_ERR_TOO_LARGE, "the trace to state %llu has %zu states, more than %zu",
                                (unsigned long long)id, most, cap);
    size_t i = most;
    uint64_t p;
    for (;;) {
        i--;
        int rc = parent_of(x, at, &p);
        ids[i] = x->base + at;
        if (keys)
            rc |= key_of(x, at, (unsigned char *)keys + i * x->key_bytes);
        if (labels && x->label_bytes) {
            unsigned char *dst = (unsigned char *)labels + i * x->label_bytes;
            if (p == FLOE_EXPLORE_ROOT)
                memset(dst, 0, x->label_bytes);
            else
                rc |= label_of(x, at, dst);
        }
        if (rc)
            return store_failed(x, most, err);
        if (p == FLOE_EXPLORE_ROOT || !here(x, p, &at) || i == 0)
            break;
    }
    *n = most - i;
    if (i) {
        memmove(ids, ids + i, *n * sizeof *ids);
        if (keys)
            memmove(keys, (unsigned char *)keys + i * x->key_bytes, *n * x->key_bytes);
        if (labels && x->label_bytes)
            memmove(labels, (unsigned char *)labels + i * x->label_bytes, *n * x->label_bytes);
    }
    if (from)
        *from = p;
    return FLOE_OK;
}

floe_status floe_explore_trace(const floe_explore *x, uint64_t id, size_t cap, uint64_t *ids, void *keys, void *labels,
                               size_t *n, uint64_t *from, floe_errinfo *err)
{
    lock(x);
    floe_status r = trace_locked(x, id, cap, ids, keys, labels, n, from, err);
    unlock(x);
    return r;
}

static void stats_locked(const floe_explore *x, floe_explore_counts *st)
{
    memset(st, 0, sizeof *st);
    st->states = x->count;
    st->open = (x->count - x->cursor) + (x->back_n - x->back_head);
    st->claimed = x->claimed;
    st->claims = x->nclaims;
    st->levels = x->nlevels;
    st->done = x->count && !st->open && !x->nclaims && x->reserved == x->count;
    st->device = x->store.device;
    st->broken = x->broken;
    st->bytes = sizeof *x + x->nchunks * (CHUNK * (x->key_bytes + sizeof(uint64_t) + x->label_bytes)) +
                x->chunks_cap * sizeof *x->chunks + x->runs_cap * sizeof *x->runs +
                (uint64_t)x->levels_cap * sizeof *x->levels + x->back_cap * sizeof *x->back +
                x->claims_cap * sizeof *x->claims + x->claimed * sizeof(uint64_t) + x->pend_cap * sizeof *x->pend;
}

void floe_explore_stats(const floe_explore *x, floe_explore_counts *st)
{
    lock(x);
    stats_locked(x, st);
    unlock(x);
}

static uint64_t level_locked(const floe_explore *x, uint32_t d)
{
    return d < x->nlevels ? x->levels[d] : 0;
}

uint64_t floe_explore_level(const floe_explore *x, uint32_t d)
{
    lock(x);
    uint64_t r = level_locked(x, d);
    unlock(x);
    return r;
}

floe_status floe_explore_keys(const floe_explore *x, uint64_t from, size_t n, void *keys, floe_errinfo *err)
{
    floe_status st = FLOE_OK;
    lock(x);
    if (from > x->count || n > x->count - from)
        st = floe_errinfo_set(err, FLOE_ERR_INVALID, "states %llu..%llu: %llu were found", (unsigned long long)from,
                              (unsigned long long)(from + n), (unsigned long long)x->count);
    if (st == FLOE_OK && keys_from(x, from, n, keys))
        st = store_failed(x, n, err);
    unlock(x);
    return st;
}

/* ---- save and load ---------------------------------------------------------------------------- */

typedef struct image_header {
    char magic[8];
    uint32_t key_bytes, label_bytes, strict, nlevels;
    uint64_t count, nruns, cursor, open_back; /* open_back: handed back, claims out included */
} image_header;

typedef int write_fn(void *ctx, const void *p, size_t len);
typedef int read_fn(void *ctx, void *p, size_t len);

/* write and read, with nothing to move (and perhaps no array) a success */
static int put(write_fn *write, void *ctx, const void *p, size_t len)
{
    return len ? write(ctx, p, len) : 0;
}

static int get(read_fn *read, void *ctx, void *p, size_t len)
{
    return len ? read(ctx, p, len) : 0;
}

/* What a save writes, taken at one moment: the header, copies of the
 * arrays that change, and the chunks' addresses (the states below the
 * count never change again, so they are written from where they are). */
struct floe_explore_cut {
    image_header h;
    depth_run *runs;
    uint64_t *levels;
    uint64_t *open_back; /* handed back, then the claims' states */
    chunk *chunks;
    size_t nchunks;
    floe_store store; /* the chunks' (x's: it outlives the cut) */
};

void floe_explore_cut_free(floe_explore_cut *c)
{
    if (!c)
        return;
    free(c->runs);
    free(c->levels);
    free(c->open_back);
    free(c->chunks);
    free(c);
}

/* A copy of n items of size bytes (a 1-byte allocation when n is 0). */
static void *copy_of(const void *p, size_t n, size_t size)
{
    void *q = floe_malloc(n * size + 1);
    if (q && n)
        memcpy(q, p, n * size);
    return q;
}

static floe_explore_cut *cut_take_locked(const floe_explore *x)
{
    if (x->broken) /* (no snapshot of states that are unknown) */
        return NULL;
    floe_explore_cut *c = floe_calloc(1, sizeof *c);
    if (!c)
        return NULL;
    memcpy(c->h.magic, MAGIC, sizeof c->h.magic);
    c->h.key_bytes = x->key_bytes;
    c->h.label_bytes = x->label_bytes;
    c->h.strict = x->strict;
    c->h.count = x->count;
    c->h.cursor = x->cursor;
    const size_t back = x->back_n - x->back_head;
    c->h.open_back = back + x->claimed;
    c->nchunks = (size_t)((x->count + CHUNK - 1) >> CHUNK_BITS);
    /* the runs and levels of the states published (adds in progress have runs and counts past them) */
    size_t nruns = x->nruns;
    while (nruns && x->runs[nruns - 1].start >= x->count)
        nruns--;
    c->h.nruns = nruns;
    c->runs = copy_of(x->runs, nruns, sizeof *x->runs);
    c->levels = floe_calloc(x->nlevels + 1, sizeof *c->levels);
    uint32_t nlevels = 0;
    for (size_t i = 0; c->levels && i < nruns; i++) {
        const uint64_t end = i + 1 < nruns ? x->runs[i + 1].start : x->count;
        c->levels[x->runs[i].depth] += end - x->runs[i].start;
        nlevels = x->runs[i].depth + 1 > nlevels ? x->runs[i].depth + 1 : nlevels;
    }
    c->h.nlevels = nlevels;
    c->chunks = copy_of(x->chunks, c->nchunks, sizeof *x->chunks);
    c->store = x->store;
    c->open_back = copy_of(x->back ? x->back + x->back_head : NULL, back, sizeof *x->back);
    if (!c->runs || !c->levels || !c->chunks || !c->open_back) {
        floe_explore_cut_free(c);
        return NULL;
    }
    if (x->claimed) { /* claims out go back to the open set */
        uint64_t *all = floe_realloc(c->open_back, (back + x->claimed) * sizeof *all);
        if (!all) {
            floe_explore_cut_free(c);
            return NULL;
        }
        c->open_back = all;
        for (size_t i = 0, at = back; i < x->nclaims; at += x->claims[i++].n)
            claim_ids(&x->claims[i], all + at);
    }
    return c;
}

floe_explore_cut *floe_explore_cut_take(const floe_explore *x)
{
    lock(x);
    floe_explore_cut *r = cut_take_locked(x);
    unlock(x);
    return r;
}

uint64_t floe_explore_cut_bytes(const floe_explore_cut *c)
{
    return sizeof c->h + c->h.nruns * sizeof *c->runs + (uint64_t)c->h.nlevels * sizeof *c->levels +
           c->h.open_back * sizeof *c->open_back + c->h.count * (c->h.key_bytes + sizeof(uint64_t) + c->h.label_bytes);
}

/* An array of a chunk (of c's store) through write, by way of buf where the store is not the host's. */
static int put_chunk(const floe_explore_cut *c, int (*write)(void *ctx, const void *p, size_t len), void *ctx,
                     const void *p, size_t len, unsigned char *buf)
{
    if (!c->store.ops)
        return put(write, ctx, p, len);
    return store_get(&c->store, buf, p, len) != 0 ? -1 : put(write, ctx, buf, len);
}

int floe_explore_cut_write(const floe_explore_cut *c, int (*write)(void *ctx, const void *p, size_t len), void *ctx)
{
    bool ok = put(write, ctx, &c->h, sizeof c->h) == 0 &&
              put(write, ctx, c->runs, (size_t)c->h.nruns * sizeof *c->runs) == 0 &&
              put(write, ctx, c->levels, (size_t)c->h.nlevels * sizeof *c->levels) == 0 &&
              put(write, ctx, c->open_back, (size_t)c->h.open_back * sizeof *c->open_back) == 0;
    /* a store's chunks through a host buffer of one array of a chunk */
    const size_t widest = c->h.key_bytes > sizeof(uint64_t) ? c->h.key_bytes : sizeof(uint64_t);
    unsigned char *buf = c->store.ops && c->h.count ? floe_malloc(CHUNK * widest) : NULL;
    ok = ok && (buf || !c->store.ops || !c->h.count);
    for (uint64_t at = 0; ok && at < c->h.count; at += CHUNK) {
        const size_t m = (size_t)(c->h.count - at < CHUNK ? c->h.count - at : CHUNK);
        const chunk *k = &c->chunks[at >> CHUNK_BITS];
        ok = put_chunk(c, write, ctx, k->keys, m * c->h.key_bytes, buf) == 0 &&
             put_chunk(c, write, ctx, k->parents, m * sizeof *k->parents, buf) == 0 &&
             (!c->h.label_bytes || put_chunk(c, write, ctx, k->labels, m * c->h.label_bytes, buf) == 0);
    }
    free(buf);
    return ok ? 0 : -1;
}

floe_status floe_explore_save(const floe_explore *x, int (*write)(void *ctx, const void *p, size_t len), void *ctx,
                              floe_errinfo *err)
{
    floe_explore_cut *c = floe_explore_cut_take(x);
    if (!c)
        return floe_errinfo_set(err, FLOE_ERR_FULL, "out of memory for a copy of the open set's bookkeeping");
    const int rc = floe_explore_cut_write(c, write, ctx);
    floe_explore_cut_free(c);
    return rc == 0 ? FLOE_OK : floe_errinfo_set(err, FLOE_ERR_INTERNAL, "writing the open set failed");
}

/* Whether what was read holds together: runs ascending from 0 within the
 * states, levels summing to the states, parents shallower by one, every
 * state handed back one that was handed out. */
static bool holds_together(const floe_explore *x)
{
    uint64_t sum = 0;
    for (uint32_t d = 0; d < x->nlevels; d++)
        sum += x->levels[d];
    if (sum != x->count || x->cursor > x->count || (x->count && (!x->nruns || x->runs[0].start != 0)))
        return false;
    for (size_t i = 0; i < x->nruns; i++)
        if (x->runs[i].start >= x->count || x->runs[i].depth >= x->nlevels ||
            (i && (x->runs[i].start <= x->runs[i - 1].start || x->runs[i].depth == x->runs[i - 1].depth)))
            return false;
    for (uint64_t id = 0; id < x->count; id++) { /* (a loaded open set is in host memory) */
        const uint64_t p = chunk_of(x, id)->parents[in_chunk(id)];
        const uint32_t d = depth_of(x, id);
        uint64_t at;
        if (p == FLOE_EXPLORE_ROOT ? d != 0 : here(x, p, &at) && (at >= x->count || depth_of(x, at) + 1 != d))
            return false; /* (a parent on another shard is taken on trust, as when it came) */
    }
    for (size_t i = 0; i < x->back_n; i++)
        if (x->back[i] >= x->cursor)
            return false;
    return true;
}

floe_status floe_explore_load(int (*read)(void *ctx, void *p, size_t len), void *ctx, uint64_t run, int shard,
                              floe_explore **out, floe_errinfo *err)
{
    image_header h;
    memset(&h, 0, sizeof h);
    if (get(read, ctx, &h, sizeof h) != 0 || memcmp(h.magic, MAGIC, sizeof h.magic) != 0)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "not an open set (or cut short)");
    floe_explore *x;
    floe_status st = floe_explore_create(h.key_bytes, h.label_bytes, h.strict != 0, run, shard, &x, err);
    if (st != FLOE_OK)
        return st;
    size_t levels_cap = 0;
    const bool sane = h.nruns <= h.count && h.open_back <= h.count && h.nlevels <= h.count &&
                      (h.nlevels != 0) == (h.count != 0) && h.count < ((uint64_t)1 << 48);
    bool ok = sane && reserve((void **)&x->runs, &x->runs_cap, (size_t)h.nruns, sizeof *x->runs) &&
              reserve((void **)&x->levels, &levels_cap, h.nlevels, sizeof *x->levels) &&
              reserve((void **)&x->back, &x->back_cap, (size_t)h.open_back, sizeof *x->back);
    if (!ok) {
        floe_explore_destroy(x);
        return sane ? floe_errinfo_set(err, FLOE_ERR_FULL, "out of memory for an open set of %llu states",
                                       (unsigned long long)h.count)
                    : floe_errinfo_set(err, FLOE_ERR_INVALID, "the open set's sizes do not hold together");
    }
    x->levels_cap = (uint32_t)levels_cap;
    x->nruns = (size_t)h.nruns;
    x->nlevels = h.nlevels;
    x->back_n = (size_t)h.open_back;
    ok = get(read, ctx, x->runs, x->nruns * sizeof *x->runs) == 0 &&
         get(read, ctx, x->levels, (size_t)x->nlevels * sizeof *x->levels) == 0 &&
         get(read, ctx, x->back, x->back_n * sizeof *x->back) == 0;
    /* a chunk's room is taken as its bytes come: a count that lies runs into the end of what
     * there is to read, not out of memory */
    bool oom = false;
    while (ok && x->count < h.count) {
        const size_t m = (size_t)(h.count - x->count < CHUNK ? h.count - x->count : CHUNK);
        if (!room_for(x, x->count + m)) {
            ok = false, oom = true;
            break;
        }
        chunk *c = chunk_of(x, x->count);
        ok = get(read, ctx, c->keys, m * x->key_bytes) == 0 &&
             get(read, ctx, c->parents, m * sizeof *c->parents) == 0 &&
             (!x->label_bytes || get(read, ctx, c->labels, m * x->label_bytes) == 0);
        x->count += ok ? m : 0;
    }
    x->cursor = h.cursor;
    x->reserved = x->count;
    atomic_store(&x->published, x->count);
    if (oom) {
        floe_explore_destroy(x);
        return floe_errinfo_set(err, FLOE_ERR_FULL, "out of memory for an open set of %llu states",
                                (unsigned long long)h.count);
    }
    if (!ok || !holds_together(x)) {
        floe_explore_destroy(x);
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "the open set is cut short or does not hold together");
    }
    *out = x;
    return FLOE_OK;
}

floe_status floe_explore_move(floe_explore *x, const floe_store *store, floe_errinfo *err)
{
    if (!store->ops)
        return FLOE_OK;
    floe_status st = FLOE_OK;
    lock(x);
    chunk *moved = x->store.ops ? NULL : floe_malloc(x->nchunks * sizeof *moved + 1);
    if (x->store.ops)
        st = floe_errinfo_set(err, FLOE_ERR_INVALID, "the open set is in a table's memory already");
    else if (x->reserved != x->count)
        st = floe_errinfo_set(err, FLOE_ERR_BUSY, "states are being added to the open set");
    else if (!moved)
        st = floe_errinfo_set(err, FLOE_ERR_FULL, "out of memory for the open set's chunks");
    for (size_t i = 0; st == FLOE_OK && i < x->nchunks; i++) {
        const chunk *h = &x->chunks[i];
        chunk *d = &moved[i];
        if (!chunk_alloc(x, store, d))
            st = floe_errinfo_set(err, FLOE_ERR_FULL, "no room for the open set's %zu states on GPU %d",
                                  (size_t)x->count, store->device);
        else if (store->ops->put(store->ctx,
                                 (const floe_store_copy[]){{d->keys, h->keys, CHUNK * x->key_bytes},
                                                           {d->parents, h->parents, CHUNK * sizeof *h->parents},
                                                           {d->labels, h->labels, CHUNK * x->label_bytes}},
                                 x->label_bytes ? 3 : 2))
            st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "copying the open set to GPU %d failed", store->device);
    }
    if (st == FLOE_OK) {
        for (size_t i = 0; i < x->nchunks; i++) {
            chunk_free(&x->store, &x->chunks[i]);
            x->chunks[i] = moved[i];
        }
        x->store = *store;
    } else {
        store->ops->close(store->ctx);
    }
    free(moved);
    unlock(x);
    return st;
}
