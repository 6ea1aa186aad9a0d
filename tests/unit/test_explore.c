/*
 * test_explore.c - the open set of an exploring table (tables/explore.c)
 * driven as a model checker's workers drive it, against a plain
 * breadth-first search of the same graph: the states found, each level's
 * size, every state's depth and every trace (each step a real transition,
 * the first state initial, as long as the shortest path); leases that run
 * out, DONE only at the end, a run saved with claims out and resumed, and
 * bad input refused with nothing changed.  The same runs with the open set
 * in a store (tables/store.h) that only put and get can reach, as a GPU's.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "explore.h"
#include "floe_wire.h"
#include "testutil.h"

/* The graph: states 0..N-1, three successors each, the action's number as
 * its label; initial states 0 and 1. */
#define N      5000u
#define FANOUT 3

static uint32_t succ(uint32_t s, int a)
{
    switch (a) {
    case 0:
        return (s * 7u + 3u) % N;
    case 1:
        return (s ^ 0x155u) % N;
    default:
        return s / 2u;
    }
}

/* The reference: breadth-first distances from the initial states (-1 unreached). */
static int dist[N];

static uint32_t reference_bfs(uint32_t *levels, uint32_t *nlevels)
{
    static uint32_t queue[N];
    size_t head = 0, tail = 0;
    for (uint32_t s = 0; s < N; s++)
        dist[s] = -1;
    for (uint32_t s = 0; s < 2; s++) {
        dist[s] = 0;
        queue[tail++] = s;
    }
    while (head < tail) {
        const uint32_t s = queue[head++];
        for (int a = 0; a < FANOUT; a++) {
            const uint32_t t = succ(s, a);
            if (dist[t] < 0) {
                dist[t] = dist[s] + 1;
                queue[tail++] = t;
            }
        }
    }
    memset(levels, 0, N * sizeof *levels);
    *nlevels = 0;
    for (uint32_t s = 0; s < N; s++)
        if (dist[s] >= 0) {
            levels[dist[s]]++;
            if ((uint32_t)dist[s] + 1 > *nlevels)
                *nlevels = (uint32_t)dist[s] + 1;
        }
    return (uint32_t)tail;
}

/* ---- a store as a device's: memory the open set can reach only through put and get ----------- */

/* Its pieces are at addresses no process maps (not canonical: any load or
 * store through one faults), each backed by a buffer of the test's; alloc
 * fails past limit bytes. */
#define FAKE_BASE   ((uintptr_t)0x8000000000000000ull)
#define FAKE_PIECES 64

typedef struct fake_store {
    pthread_mutex_t lock;
    struct {
        uintptr_t at;
        unsigned char *mem;
        size_t len;
    } piece[FAKE_PIECES];
    size_t n, used, limit;
    uintptr_t next;
    atomic_ulong puts, gets;
    atomic_bool closed;
    atomic_bool fail_puts; /* puts fail (a device's copy that failed) */
} fake_store;

/* The test's memory behind [p, p + len) of the store, which must lie in one piece. */
static unsigned char *fake_mem(fake_store *s, const void *p, size_t len)
{
    const uintptr_t a = (uintptr_t)p;
    unsigned char *m = NULL;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->n && !m; i++)
        if (a >= s->piece[i].at && a + len <= s->piece[i].at + s->piece[i].len)
            m = s->piece[i].mem + (a - s->piece[i].at);
    pthread_mutex_unlock(&s->lock);
    ck_assert_msg(m != NULL, "an address outside the store's pieces");
    return m;
}

static void *fake_alloc(void *ctx, size_t bytes)
{
    fake_store *s = ctx;
    void *r = NULL;
    pthread_mutex_lock(&s->lock);
    if (s->n < FAKE_PIECES && s->used + bytes <= s->limit) {
        unsigned char *mem = malloc(bytes);
        ck_assert_ptr_nonnull(mem);
        memset(mem, 0xA5, bytes); /* what was never put is not zero */
        s->piece[s->n].at = s->next;
        s->piece[s->n].mem = mem;
        s->piece[s->n++].len = bytes;
        r = (void *)s->next;
        s->next += (bytes + 4095) / 4096 * 4096 + 4096;
        s->used += bytes;
    }
    pthread_mutex_unlock(&s->lock);
    return r;
}

static int fake_put(void *ctx, const floe_store_copy *c, size_t n)
{
    fake_store *s = ctx;
    if (atomic_load(&s->fail_puts))
        return -1;
    for (size_t i = 0; i < n; i++)
        memcpy(fake_mem(s, c[i].to, c[i].bytes), c[i].from, c[i].bytes);
    atomic_fetch_add(&s->puts, 1);
    return 0;
}

static int fake_get(void *ctx, const floe_store_copy *c, size_t n)
{
    fake_store *s = ctx;
    for (size_t i = 0; i < n; i++)
        memcpy(c[i].to, fake_mem(s, c[i].from, c[i].bytes), c[i].bytes);
    atomic_fetch_add(&s->gets, 1);
    return 0;
}

static void fake_close(void *ctx)
{
    fake_store *s = ctx;
    for (size_t i = 0; i < s->n; i++)
        free(s->piece[i].mem);
    s->n = 0;
    atomic_store(&s->closed, true);
}

static const floe_store_ops fake_ops = {fake_alloc, fake_put, fake_get, fake_close};

/* A store of at most limit bytes, as GPU 3's (the caller frees s once x is destroyed). */
static floe_store fake_store_new(fake_store *s, size_t limit)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    s->next = FAKE_BASE;
    s->limit = limit;
    return (floe_store){&fake_ops, s, 3};
}

/* x moved into a new fake store *s (NULL: left in host memory), as floed does for a GPU table. */
static void move_to_fake(floe_explore *x, fake_store *s)
{
    if (!s)
        return;
    floe_store st = fake_store_new(s, (size_t)1 << 30);
    floe_errinfo err;
    ck_assert_int_eq(floe_explore_move(x, &st, &err), FLOE_OK);
    floe_explore_counts c;
    floe_explore_stats(x, &c);
    ck_assert_int_eq(c.device, 3);
}

/* The store of this test's runs (loop tests: _i odd), or NULL for host memory. */
static fake_store *run_store;

/* The table: which states are stored (the set), and the explore id of each. */
typedef struct run {
    floe_explore *x;
    bool stored[N];
    uint64_t id_of[N];
    uint64_t now;
} run;

/* A batch of successors inserted: the first occurrence of each new state is
 * INSERTED and joins the open set with its parent and label. */
static void insert_batch(run *r, const uint64_t *keys, const uint64_t *parents, const uint8_t *labels, size_t n)
{
    uint64_t *ids = calloc(n + 1, 8);
    uint8_t *res = calloc(n + 1, 1);
    ck_assert(ids && res);
    for (size_t i = 0; i < n; i++) { /* the table's answers, as an engine gives them */
        res[i] = r->stored[keys[i]] ? FLOE_PRESENT : FLOE_INSERTED;
        r->stored[keys[i]] = true;
    }
    floe_errinfo err;
    ck_assert_int_eq(floe_explore_add(r->x, keys, parents, 0, labels, res, n, ids, 0, &err), FLOE_OK);
    for (size_t i = 0; i < n; i++)
        if (res[i] == FLOE_INSERTED)
            r->id_of[keys[i]] = ids[i];
    free(ids), free(res);
}

static void start(run *r, bool strict, uint64_t run_id)
{
    memset(r, 0, sizeof *r);
    floe_errinfo err;
    ck_assert_int_eq(floe_explore_create(8, 1, strict, run_id, -1, &r->x, &err), FLOE_OK);
    const uint64_t init[2] = {0, 1}, roots[2] = {FLOE_EXPLORE_ROOT, FLOE_EXPLORE_ROOT};
    const uint8_t lab[2] = {0, 0};
    insert_batch(r, init, roots, lab, 2);
    move_to_fake(r->x, run_store); /* with states in it already */
}

/* The test's store: one when in_store. */
static void use_store(bool in_store)
{
    static fake_store s;
    run_store = in_store ? &s : NULL;
}

/* One worker's step: claim up to max, expand, insert the successors; the
 * claim is completed now or left out (returned in *token) for the caller.
 * Returns the claim's state. */
static floe_explore_state step(run *r, size_t max, bool complete, uint64_t *token_out, uint64_t seed)
{
    uint64_t ids[64], keys[64], token;
    size_t n;
    uint32_t depth;
    floe_explore_state state;
    floe_errinfo err;
    ck_assert(max <= 64);
    ck_assert_int_eq(floe_explore_claim(r->x, max, r->now, 1000, ids, keys, &n, &depth, &token, &state, &err), FLOE_OK);
    if (state != FLOE_EXPLORE_GOT) {
        ck_assert_uint_eq(n, 0);
        ck_assert_uint_eq(token, 0);
        return state;
    }
    ck_assert_uint_gt(n, 0);
    uint64_t sk[64 * FANOUT], sp[64 * FANOUT];
    uint8_t sl[64 * FANOUT];
    size_t m = 0;
    uint64_t rng = seed;
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(dist[keys[i]], (int)depth); /* the claim's depth is the state's */
        for (int a = 0; a < FANOUT; a++) {
            sk[m] = succ((uint32_t)keys[i], a), sp[m] = ids[i], sl[m] = (uint8_t)a;
            m++;
        }
    }
    for (size_t i = m; i > 1; i--) { /* the order successors arrive in is the workers' business */
        const size_t j = (size_t)rng_below(&rng, i);
        uint64_t t = sk[i - 1];
        sk[i - 1] = sk[j], sk[j] = t;
        t = sp[i - 1], sp[i - 1] = sp[j], sp[j] = t;
        const uint8_t u = sl[i - 1];
        sl[i - 1] = sl[j], sl[j] = u;
    }
    insert_batch(r, sk, sp, sl, m);
    if (complete)
        ck_assert_int_eq(floe_explore_complete(r->x, token, &err), FLOE_OK);
    if (token_out)
        *token_out = token;
    return state;
}

/* Everything a finished run must say, against the reference. */
static void check_finished(run *r, uint32_t want_states, const uint32_t *levels, uint32_t nlevels)
{
    floe_explore_counts c;
    floe_explore_stats(r->x, &c);
    ck_assert_uint_eq(c.states, want_states);
    ck_assert(c.done);
    ck_assert_uint_eq(c.open, 0);
    ck_assert_uint_eq(c.claims, 0);
    ck_assert_uint_eq(c.levels, nlevels);
    for (uint32_t d = 0; d < nlevels; d++)
        ck_assert_uint_eq(floe_explore_level(r->x, d), levels[d]);
    uint64_t ids[N], keys[N];
    uint8_t labels[N];
    floe_errinfo err;
    for (uint32_t s = 0; s < N; s++) {
        ck_assert_int_eq(r->stored[s], dist[s] >= 0);
        if (dist[s] < 0)
            continue;
        size_t n;
        ck_assert_int_eq(floe_explore_trace(r->x, r->id_of[s], N, ids, keys, labels, &n, NULL, &err), FLOE_OK);
        ck_assert_uint_eq(n, (size_t)dist[s] + 1); /* a shortest path */
        ck_assert(keys[0] == 0 || keys[0] == 1);   /* from an initial state */
        ck_assert_uint_eq(keys[n - 1], s);
        ck_assert_uint_eq(ids[n - 1], r->id_of[s]);
        for (size_t i = 1; i < n; i++) /* each step the transition its label names */
            ck_assert_uint_eq(succ((uint32_t)keys[i - 1], labels[i]), keys[i]);
    }
}

START_TEST(workers_find_what_bfs_finds)
{
    use_store(_i);
    uint32_t levels[N], nlevels;
    const uint32_t want = reference_bfs(levels, &nlevels);
    ck_assert_uint_gt(nlevels, 5);
    run *r = malloc(sizeof *r);
    ck_assert_ptr_nonnull(r);
    start(r, true, 7);
    /* three workers with claims of 1, 5 and 17 states, one claim of each out at a time,
     * completing in turn: WAIT at the end of each level until its last claim is in */
    uint64_t out[3] = {0, 0, 0};
    const size_t size[3] = {1, 5, 17};
    int waits = 0, rounds = 0;
    floe_errinfo err;
    for (;;) {
        bool done = false;
        for (int w = 0; w < 3; w++) {
            if (out[w]) {
                ck_assert_int_eq(floe_explore_complete(r->x, out[w], &err), FLOE_OK);
                out[w] = 0;
            }
            const floe_explore_state s = step(r, size[w], false, &out[w], (uint64_t)rounds * 3 + (uint64_t)w + 1);
            waits += s == FLOE_EXPLORE_WAIT;
            done = done || s == FLOE_EXPLORE_DONE;
            if (s != FLOE_EXPLORE_GOT)
                out[w] = 0;
        }
        rounds++;
        ck_assert_int_lt(rounds, 100000);
        if (done)
            break;
    }
    ck_assert_int_gt(waits, 0);
    for (int w = 0; w < 3; w++) /* DONE came only once nothing was out */
        ck_assert_uint_eq(out[w], 0);
    check_finished(r, want, levels, nlevels);
    floe_explore_destroy(r->x);
    free(r);
}
END_TEST

START_TEST(leases_run_out_and_claims_end_once)
{
    use_store(_i);
    uint32_t levels[N], nlevels;
    const uint32_t want = reference_bfs(levels, &nlevels);
    run *r = malloc(sizeof *r);
    ck_assert_ptr_nonnull(r);
    start(r, true, 8);
    uint64_t ids[4], keys[4], token, token2;
    size_t n;
    uint32_t depth;
    floe_explore_state state;
    floe_errinfo err;
    /* a worker claims the two initial states and dies */
    ck_assert_int_eq(floe_explore_claim(r->x, 4, r->now, 1000, ids, keys, &n, &depth, &token, &state, &err), FLOE_OK);
    ck_assert_int_eq(state, FLOE_EXPLORE_GOT);
    ck_assert_uint_eq(n, 2);
    /* nothing else is open: WAIT, not DONE, while the claim is out */
    ck_assert_int_eq(floe_explore_claim(r->x, 4, r->now, 1000, ids, keys, &n, &depth, &token2, &state, &err), FLOE_OK);
    ck_assert_int_eq(state, FLOE_EXPLORE_WAIT);
    /* renewed, it outlives its first lease */
    r->now = 900;
    ck_assert_int_eq(floe_explore_renew(r->x, token, r->now, 1000, &err), FLOE_OK);
    r->now = 1500;
    ck_assert_int_eq(floe_explore_claim(r->x, 4, r->now, 1000, ids, keys, &n, &depth, &token2, &state, &err), FLOE_OK);
    ck_assert_int_eq(state, FLOE_EXPLORE_WAIT);
    /* past it, the states go back to the open set and another worker gets them */
    r->now = 2000;
    ck_assert_int_eq(floe_explore_claim(r->x, 4, r->now, 1000, ids, keys, &n, &depth, &token2, &state, &err), FLOE_OK);
    ck_assert_int_eq(state, FLOE_EXPLORE_GOT);
    ck_assert_uint_eq(n, 2);
    ck_assert(keys[0] + keys[1] == 1 && depth == 0);
    ck_assert_uint_ne(token2, token);
    /* the dead worker's token is no claim any more; completing the live one twice fails the second time */
    ck_assert_int_eq(floe_explore_complete(r->x, token, &err), FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.msg, "lease ran out"));
    ck_assert_int_eq(floe_explore_renew(r->x, token, r->now, 1000, &err), FLOE_ERR_INVALID);
    /* expand them (as step does) and finish the run */
    for (size_t i = 0; i < n; i++) {
        uint64_t sk[FANOUT], sp[FANOUT];
        uint8_t sl[FANOUT];
        for (int a = 0; a < FANOUT; a++)
            sk[a] = succ((uint32_t)keys[i], a), sp[a] = ids[i], sl[a] = (uint8_t)a;
        insert_batch(r, sk, sp, sl, FANOUT);
    }
    ck_assert_int_eq(floe_explore_complete(r->x, token2, &err), FLOE_OK);
    ck_assert_int_eq(floe_explore_complete(r->x, token2, &err), FLOE_ERR_INVALID);
    /* a claim of another table's run is none of this one's */
    floe_explore *other;
    ck_assert_int_eq(floe_explore_create(8, 1, true, 9, -1, &other, &err), FLOE_OK);
    ck_assert_int_eq(floe_explore_complete(other, token2, &err), FLOE_ERR_INVALID);
    floe_explore_destroy(other);
    /* workers that each leave every fourth claim to expire */
    for (int i = 0;; i++) {
        r->now += 10;
        uint64_t t;
        const floe_explore_state s = step(r, 8, i % 4 != 0, &t, (uint64_t)i + 1);
        if (s == FLOE_EXPLORE_DONE)
            break;
        if (s == FLOE_EXPLORE_WAIT)
            r->now += 1000; /* the abandoned claims' leases run out */
        ck_assert_int_lt(i, 100000);
    }
    check_finished(r, want, levels, nlevels);
    floe_explore_destroy(r->x);
    free(r);
}
END_TEST

/* A byte buffer to save into and load from. */
typedef struct buffer {
    unsigned char *p;
    size_t len, cap, at;
    size_t fail_after; /* write: fail once this many bytes are in (0: never) */
} buffer;

static int buf_write(void *ctx, const void *p, size_t len)
{
    buffer *b = ctx;
    if (b->fail_after && b->len + len > b->fail_after)
        return -1;
    if (b->len + len > b->cap) {
        b->cap = (b->len + len) * 2;
        b->p = realloc(b->p, b->cap);
        ck_assert_ptr_nonnull(b->p);
    }
    memcpy(b->p + b->len, p, len);
    b->len += len;
    return 0;
}

static int buf_read(void *ctx, void *p, size_t len)
{
    buffer *b = ctx;
    if (b->len - b->at < len)
        return -1;
    memcpy(p, b->p + b->at, len);
    b->at += len;
    return 0;
}

START_TEST(a_run_saved_with_claims_out_resumes_exactly)
{
    use_store(_i);
    uint32_t levels[N], nlevels;
    const uint32_t want = reference_bfs(levels, &nlevels);
    run *r = malloc(sizeof *r);
    ck_assert_ptr_nonnull(r);
    start(r, true, 10);
    for (int i = 0; i < 60; i++) /* part of the run */
        step(r, 6, true, NULL, (uint64_t)i + 1);
    uint64_t t1, t2;
    ck_assert_int_eq(step(r, 6, false, &t1, 99), FLOE_EXPLORE_GOT); /* two claims out, expanded, not completed */
    ck_assert_int_eq(step(r, 3, false, &t2, 98), FLOE_EXPLORE_GOT);
    floe_explore_counts before;
    floe_explore_stats(r->x, &before);
    ck_assert_uint_eq(before.claims, 2);
    buffer b = {0};
    floe_errinfo err;
    ck_assert_int_eq(floe_explore_save(r->x, buf_write, &b, &err), FLOE_OK);
    /* the image cut anywhere, or with a byte changed in its header or parents, is refused */
    for (size_t cut = 0; cut < b.len; cut += 1 + cut / 3) {
        buffer part = {b.p, cut, cut, 0, 0};
        floe_explore *y = NULL;
        ck_assert_int_eq(floe_explore_load(buf_read, &part, 11, -1, &y, &err), FLOE_ERR_INVALID);
        ck_assert_ptr_null(y);
    }
    unsigned char *bad = malloc(b.len);
    ck_assert_ptr_nonnull(bad);
    const size_t spots[] = {0, 12, 24, 30}; /* the magic, the label's bytes, the count (low and high) */
    for (size_t k = 0; k < sizeof spots / sizeof spots[0]; k++) {
        memcpy(bad, b.p, b.len);
        bad[spots[k]] ^= 0x40;
        buffer flipped = {bad, b.len, b.len, 0, 0};
        floe_explore *y = NULL;
        ck_assert_int_eq(floe_explore_load(buf_read, &flipped, 11, -1, &y, &err), FLOE_ERR_INVALID);
        ck_assert_ptr_null(y);
    }
    free(bad);
    /* a write that fails says so */
    buffer failing = {0};
    failing.fail_after = b.len / 2;
    ck_assert_int_eq(floe_explore_save(r->x, buf_write, &failing, &err), FLOE_ERR_INTERNAL);
    free(failing.p);
    /* loaded: the claims out are open again, and the run ends exactly */
    floe_explore_destroy(r->x);
    b.at = 0;
    ck_assert_int_eq(floe_explore_load(buf_read, &b, 11, -1, &r->x, &err), FLOE_OK);
    move_to_fake(r->x, run_store); /* (a new store: the old one closed with its open set) */
    floe_explore_counts after;
    floe_explore_stats(r->x, &after);
    ck_assert_uint_eq(after.states, before.states);
    ck_assert_uint_eq(after.open, before.open + before.claimed);
    ck_assert_uint_eq(after.claims, 0);
    ck_assert_int_eq(floe_explore_complete(r->x, t1, &err), FLOE_ERR_INVALID); /* an earlier run's token */
    for (int i = 0;; i++) {
        const floe_explore_state s = step(r, 7, true, NULL, (uint64_t)i + 1000);
        if (s == FLOE_EXPLORE_DONE)
            break;
        ck_assert_int_eq(s, FLOE_EXPLORE_GOT); /* one worker completing each claim never waits */
    }
    check_finished(r, want, levels, nlevels);
    free(b.p);
    floe_explore_destroy(r->x);
    free(r);
}
END_TEST

/* A store without room for the open set takes none of it: FULL, the open
 * set where it was and whole, the store closed; and an open set moves once. */
START_TEST(a_store_that_is_full_moves_nothing)
{
    enum { STATES = 70000 }; /* two chunks */
    floe_errinfo err;
    floe_explore *x;
    ck_assert_int_eq(floe_explore_create(8, 1, true, 1, -1, &x, &err), FLOE_OK);
    uint64_t *keys = malloc(STATES * 8), *from = malloc(STATES * 8), *ids = malloc(STATES * 8),
             *got = malloc(STATES * 8);
    ck_assert(keys && from && ids && got);
    for (size_t i = 0; i < STATES; i++)
        keys[i] = i * 0x9E3779B97F4A7C15ull, from[i] = FLOE_EXPLORE_ROOT;
    ck_assert_int_eq(floe_explore_add(x, keys, from, 0, NULL, NULL, STATES, ids, 0, &err), FLOE_OK);
    fake_store s;
    floe_store st = fake_store_new(&s, (size_t)1 << 20); /* a chunk takes 1.1 MiB */
    ck_assert_int_eq(floe_explore_move(x, &st, &err), FLOE_ERR_FULL);
    ck_assert(atomic_load(&s.closed) && s.n == 0);
    floe_explore_counts c;
    floe_explore_stats(x, &c);
    ck_assert(c.device == -1 && c.states == STATES && c.open == STATES);
    size_t n;
    uint32_t depth;
    uint64_t token;
    floe_explore_state state;
    ck_assert_int_eq(floe_explore_claim(x, STATES, 0, 1000, ids, got, &n, &depth, &token, &state, &err), FLOE_OK);
    ck_assert(state == FLOE_EXPLORE_GOT && n == STATES && memcmp(got, keys, STATES * 8) == 0);
    fake_store s2;
    move_to_fake(x, &s2); /* with a claim out: its states stay claimed, and come back from the store */
    fake_store s3;
    st = fake_store_new(&s3, (size_t)1 << 30);
    ck_assert_int_eq(floe_explore_move(x, &st, &err), FLOE_ERR_INVALID);
    ck_assert(atomic_load(&s3.closed));
    ck_assert_int_eq(floe_explore_keys(x, 0, STATES, got, &err), FLOE_OK);
    ck_assert(memcmp(got, keys, STATES * 8) == 0);
    floe_explore_destroy(x);
    ck_assert(atomic_load(&s2.closed));
    free(keys);
    free(from);
    free(ids);
    free(got);
}
END_TEST

/* An add whose copy into the store fails loses its states: the add says
 * so, and from then on nothing is handed out, traced, added or saved. */
START_TEST(a_store_that_fails_hands_out_nothing)
{
    floe_errinfo err;
    floe_explore *x;
    ck_assert_int_eq(floe_explore_create(8, 1, true, 1, -1, &x, &err), FLOE_OK);
    fake_store s;
    move_to_fake(x, &s);
    uint64_t keys[4] = {10, 11, 12, 13}, from[4], ids[4], got[4], token;
    for (int i = 0; i < 4; i++)
        from[i] = FLOE_EXPLORE_ROOT;
    ck_assert_int_eq(floe_explore_add(x, keys, from, 0, NULL, NULL, 2, ids, 0, &err), FLOE_OK);
    atomic_store(&s.fail_puts, true);
    ck_assert_int_eq(floe_explore_add(x, keys + 2, from, 0, NULL, NULL, 2, ids + 2, 0, &err), FLOE_ERR_INTERNAL);
    ck_assert_msg(strstr(err.msg, "GPU 3"), "%s", err.msg);
    atomic_store(&s.fail_puts, false);
    floe_explore_counts c;
    floe_explore_stats(x, &c);
    ck_assert(c.broken && c.states == 4);
    size_t n;
    uint32_t depth;
    floe_explore_state state;
    ck_assert_int_eq(floe_explore_claim(x, 4, 0, 1000, ids, got, &n, &depth, &token, &state, &err), FLOE_ERR_INTERNAL);
    ck_assert(n == 0 && token == 0 && strstr(err.msg, "cannot go on"));
    ck_assert_int_eq(floe_explore_trace(x, 0, 4, ids, got, NULL, &n, NULL, &err), FLOE_ERR_INTERNAL);
    ck_assert_int_eq(floe_explore_add(x, keys, from, 0, NULL, NULL, 1, ids, 0, &err), FLOE_ERR_INTERNAL);
    buffer b = {0};
    ck_assert_int_ne(floe_explore_save(x, buf_write, &b, &err), FLOE_OK);
    ck_assert_uint_eq(b.len, 0);
    free(b.p);
    floe_explore_destroy(x);
}
END_TEST

/* Workers on threads of their own, as floed's lanes add: each claims,
 * expands, answers its successors against a shared set (as the engine
 * would) and adds them with its claim to end, all at once with the
 * others; a saver takes cuts meanwhile, each of which must load (it holds
 * together).  The run ends DONE with the reference's states, levels,
 * depths and traces. */
typedef struct shared_run {
    run *r;
    atomic_bool stored[N];
    atomic_int done;
    pthread_mutex_t lock; /* r->id_of */
} shared_run;

static void *add_worker(void *arg)
{
    shared_run *sr = arg;
    floe_explore *x = sr->r->x;
    uint64_t ids[16], keys[16], sk[16 * FANOUT], sp[16 * FANOUT], sid[16 * FANOUT], token;
    uint8_t sl[16 * FANOUT], res[16 * FANOUT];
    floe_errinfo err;
    for (int round = 0; round < 1000000 && !atomic_load(&sr->done); round++) {
        size_t n;
        uint32_t depth;
        floe_explore_state state;
        if (floe_explore_claim(x, 16, 0, 1000000, ids, keys, &n, &depth, &token, &state, &err) != FLOE_OK)
            return "claim failed";
        if (state == FLOE_EXPLORE_DONE)
            atomic_store(&sr->done, 1);
        if (state != FLOE_EXPLORE_GOT)
            continue;
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            if (dist[keys[i]] != (int)depth)
                return "a claim's depth is not its states'";
            for (int a = 0; a < FANOUT; a++, m++) {
                sk[m] = succ((uint32_t)keys[i], a), sp[m] = ids[i], sl[m] = (uint8_t)a;
                res[m] = atomic_exchange(&sr->stored[sk[m]], true) ? FLOE_PRESENT : FLOE_INSERTED;
            }
        }
        if (floe_explore_add(x, sk, sp, 0, sl, res, m, sid, token, &err) != FLOE_OK)
            return "add failed";
        pthread_mutex_lock(&sr->lock);
        for (size_t i = 0; i < m; i++)
            if (res[i] == FLOE_INSERTED)
                sr->r->id_of[sk[i]] = sid[i];
        pthread_mutex_unlock(&sr->lock);
    }
    return NULL;
}

static void *cut_taker(void *arg)
{
    shared_run *sr = arg;
    while (!atomic_load(&sr->done)) {
        buffer b = {0};
        floe_errinfo err;
        if (floe_explore_save(sr->r->x, buf_write, &b, &err) != FLOE_OK)
            return "save failed";
        b.at = 0;
        floe_explore *y;
        const floe_status st = floe_explore_load(buf_read, &b, 0, -1, &y, &err);
        free(b.p);
        if (st != FLOE_OK)
            return "a cut taken while adds ran does not hold together";
        floe_explore_destroy(y);
    }
    return NULL;
}

START_TEST(threads_add_at_once)
{
    use_store(_i);
    uint32_t levels[N], nlevels;
    const uint32_t want = reference_bfs(levels, &nlevels);
    shared_run *sr = calloc(1, sizeof *sr);
    ck_assert_ptr_nonnull(sr);
    sr->r = calloc(1, sizeof *sr->r);
    ck_assert_ptr_nonnull(sr->r);
    start(sr->r, true, 11);
    atomic_store(&sr->stored[0], true);
    atomic_store(&sr->stored[1], true);
    pthread_mutex_init(&sr->lock, NULL);
    pthread_t th[5];
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, i < 4 ? add_worker : cut_taker, sr), 0);
    for (int i = 0; i < 5; i++) {
        void *why;
        ck_assert_int_eq(pthread_join(th[i], &why), 0);
        ck_assert_msg(why == NULL, "%s", (const char *)why);
    }
    for (uint32_t s = 0; s < N; s++)
        sr->r->stored[s] = atomic_load(&sr->stored[s]);
    check_finished(sr->r, want, levels, nlevels);
    pthread_mutex_destroy(&sr->lock);
    floe_explore_destroy(sr->r->x);
    free(sr->r);
    free(sr);
}
END_TEST

/* ---- a table over three floed: an open set a shard, the levels ended by the workers ---------- */

#define SHARDS 3

typedef struct sharded {
    floe_explore *x[SHARDS];
    bool stored[N];
    uint64_t id_of[N];
} sharded;

/* Successors of parents of depth pdepth, each to its shard's open set (as a partitioned client splits them). */
static void shard_insert(sharded *r, const uint64_t *keys, const uint64_t *parents, const uint8_t *labels, size_t n,
                         uint32_t pdepth)
{
    for (unsigned s = 0; s < SHARDS; s++) {
        uint64_t k[64 * FANOUT], p[64 * FANOUT], ids[64 * FANOUT];
        uint8_t l[64 * FANOUT], res[64 * FANOUT];
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            if (floe_shard_of_key(keys[i], SHARDS) != s)
                continue;
            k[m] = keys[i], p[m] = parents[i], l[m] = labels[i];
            res[m] = r->stored[keys[i]] ? FLOE_PRESENT : FLOE_INSERTED;
            r->stored[keys[i]] = true;
            m++;
        }
        floe_errinfo err;
        ck_assert_int_eq(floe_explore_add(r->x[s], k, p, pdepth, l, res, m, ids, 0, &err), FLOE_OK);
        for (size_t i = 0; i < m; i++)
            if (res[i] == FLOE_INSERTED) {
                ck_assert_uint_eq(ids[i] >> FLOE_ID_SHARD_SHIFT, s); /* an id names its shard */
                r->id_of[k[i]] = ids[i];
            }
    }
}

/* A worker of the sharded run: its level, the claim it holds (ended a round later), and the
 * servers that gave it nothing at its level. */
typedef struct sworker {
    uint32_t level;
    unsigned held_shard;
    uint64_t held;
    bool dry[SHARDS];
    bool done;
} sworker;

/* A bounded claim from shard s, expanded; the state it answered (found/next when none came). */
static floe_explore_state shard_claim(sharded *r, sworker *w, unsigned s, size_t max, uint64_t *found, uint64_t *next)
{
    uint64_t ids[64], keys[64], token, f, nx;
    size_t n;
    uint32_t depth;
    floe_explore_state state;
    floe_errinfo err;
    ck_assert_int_eq(
        floe_explore_claim_upto(r->x[s], max, w->level, 0, 1000, ids, keys, &n, &depth, &token, &state, &f, &nx, &err),
        FLOE_OK);
    if (found)
        *found = f, *next = nx;
    if (state != FLOE_EXPLORE_GOT)
        return state;
    ck_assert_uint_le(depth, w->level);
    ck_assert_uint_eq(token >> FLOE_ID_SHARD_SHIFT, s); /* a token names its shard too */
    uint64_t sk[64 * FANOUT], sp[64 * FANOUT];
    uint8_t sl[64 * FANOUT];
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(dist[keys[i]], (int)depth);
        for (int a = 0; a < FANOUT; a++)
            sk[m] = succ((uint32_t)keys[i], a), sp[m] = ids[i], sl[m] = (uint8_t)a, m++;
    }
    shard_insert(r, sk, sp, sl, m, depth);
    if (w->held) /* one claim held at a time: the one before ends now, its successors long in */
        ck_assert_int_eq(floe_explore_complete(r->x[w->held_shard], w->held, &err), FLOE_OK);
    w->held = token, w->held_shard = s;
    return state;
}

/* One step of a worker: a claim from the next shard that has states at its level, or (none has,
 * and it holds no claim) two sweeps over all shards to prove its level over. */
static void sworker_step(sharded *r, sworker *w, unsigned round, size_t max)
{
    floe_errinfo err;
    for (unsigned k = 0; k < SHARDS; k++) {
        const unsigned s = (round + k) % SHARDS;
        if (w->dry[s])
            continue;
        if (shard_claim(r, w, s, max, NULL, NULL) != FLOE_EXPLORE_GOT)
            w->dry[s] = true;
        return;
    }
    if (w->held) { /* its own claim ends first */
        ck_assert_int_eq(floe_explore_complete(r->x[w->held_shard], w->held, &err), FLOE_OK);
        w->held = 0;
        return;
    }
    uint64_t found[2][SHARDS], next[SHARDS];
    bool over = true;
    for (int sweep = 0; sweep < 2; sweep++)
        for (unsigned s = 0; s < SHARDS; s++)
            over = shard_claim(r, w, s, max, &found[sweep][s], &next[s]) == FLOE_EXPLORE_LEVEL_DONE && over;
    memset(w->dry, 0, sizeof w->dry);
    if (!over || memcmp(found[0], found[1], sizeof found[0]) != 0)
        return;
    uint64_t deeper = 0;
    for (unsigned s = 0; s < SHARDS; s++)
        deeper += next[s];
    if (deeper)
        w->level++;
    else
        w->done = true;
}

START_TEST(shards_find_what_bfs_finds)
{
    uint32_t levels[N], nlevels;
    const uint32_t want = reference_bfs(levels, &nlevels);
    sharded *r = calloc(1, sizeof *r);
    ck_assert_ptr_nonnull(r);
    floe_errinfo err;
    for (int s = 0; s < SHARDS; s++)
        ck_assert_int_eq(floe_explore_create(8, 1, true, 5, s, &r->x[s], &err), FLOE_OK);
    const uint64_t init[2] = {0, 1}, roots[2] = {FLOE_EXPLORE_ROOT, FLOE_EXPLORE_ROOT};
    const uint8_t lab[2] = {0, 0};
    shard_insert(r, init, roots, lab, 2, 0);
    /* three workers with claims of 1, 4 and 13 states, each holding its last claim a round */
    sworker w[3];
    memset(w, 0, sizeof w);
    const size_t size[3] = {1, 4, 13};
    unsigned round = 0;
    while (!(w[0].done && w[1].done && w[2].done)) {
        for (int i = 0; i < 3; i++)
            if (!w[i].done)
                sworker_step(r, &w[i], round + (unsigned)i, size[i]);
        ck_assert_uint_lt(++round, 1000000);
    }
    /* every state once, at its breadth-first depth, each level's size summed over the shards */
    uint64_t states = 0, per_level[N] = {0};
    for (int s = 0; s < SHARDS; s++) {
        floe_explore_counts c;
        floe_explore_stats(r->x[s], &c);
        ck_assert(c.done);
        states += c.states;
        for (uint32_t d = 0; d < c.levels; d++)
            per_level[d] += floe_explore_level(r->x[s], d);
    }
    ck_assert_uint_eq(states, want);
    for (uint32_t d = 0; d < nlevels; d++)
        ck_assert_uint_eq(per_level[d], levels[d]);
    /* traces followed from shard to shard are shortest paths */
    uint64_t ids[N], keys[N];
    uint8_t labels[N];
    for (uint32_t s = 0; s < N; s++) {
        ck_assert_int_eq(r->stored[s], dist[s] >= 0);
        if (dist[s] < 0)
            continue;
        size_t len = 0;
        uint64_t at = r->id_of[s];
        while (at != FLOE_EXPLORE_ROOT) { /* the chain read backwards, a shard's part at a time */
            uint64_t pi[N], pk[N], from;
            uint8_t pl[N];
            size_t n;
            floe_explore *x = r->x[at >> FLOE_ID_SHARD_SHIFT];
            ck_assert_int_eq(floe_explore_trace(x, at, N, pi, pk, pl, &n, &from, &err), FLOE_OK);
            ck_assert_uint_le(len + n, (size_t)dist[s] + 1);
            memmove(ids + n, ids, len * 8), memmove(keys + n, keys, len * 8), memmove(labels + n, labels, len);
            memcpy(ids, pi, n * 8), memcpy(keys, pk, n * 8), memcpy(labels, pl, n);
            len += n;
            at = from;
        }
        ck_assert_uint_eq(len, (size_t)dist[s] + 1);
        ck_assert(keys[0] == 0 || keys[0] == 1);
        ck_assert_uint_eq(keys[len - 1], s);
        for (size_t i = 1; i < len; i++)
            ck_assert_uint_eq(succ((uint32_t)keys[i - 1], labels[i]), keys[i]);
    }
    /* a parent of this shard that is no state is refused; one of another is taken on trust */
    const uint64_t mine = ((uint64_t)1 << FLOE_ID_SHARD_SHIFT) + N, theirs = ((uint64_t)2 << FLOE_ID_SHARD_SHIFT) + 3;
    ck_assert_int_eq(floe_explore_check_parents(r->x[1], &mine, 1, &err), FLOE_ERR_INVALID);
    ck_assert_int_eq(floe_explore_check_parents(r->x[1], &theirs, 1, &err), FLOE_OK);
    uint32_t depth;
    ck_assert_int_eq(floe_explore_depth(r->x[1], theirs, &depth, &err), FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.msg, "shard 2"));
    for (int s = 0; s < SHARDS; s++)
        floe_explore_destroy(r->x[s]);
    free(r);
}
END_TEST

START_TEST(bad_input_changes_nothing)
{
    floe_explore *x;
    floe_errinfo err;
    ck_assert_int_eq(floe_explore_create(0, 0, true, 1, -1, &x, &err), FLOE_ERR_INVALID);
    ck_assert_int_eq(floe_explore_create(8, 5, true, 1, -1, &x, &err), FLOE_ERR_INVALID);
    ck_assert_int_eq(floe_explore_create(8, 2, false, 1, -1, &x, &err), FLOE_OK);
    uint64_t ids[8], keys[8], token;
    size_t n;
    uint32_t depth;
    floe_explore_state state;
    /* before any state: WAIT (the run has not begun), not DONE */
    ck_assert_int_eq(floe_explore_claim(x, 8, 0, 10, ids, keys, &n, &depth, &token, &state, &err), FLOE_OK);
    ck_assert_int_eq(state, FLOE_EXPLORE_WAIT);
    const uint64_t k[3] = {10, 20, 30}, roots[3] = {FLOE_EXPLORE_ROOT, FLOE_EXPLORE_ROOT, FLOE_EXPLORE_ROOT};
    ck_assert_int_eq(floe_explore_add(x, k, roots, 0, NULL, NULL, 3, ids, 0, &err), FLOE_OK);
    /* a parent that is no state: refused, nothing added */
    const uint64_t kids[2] = {40, 50}, parents[2] = {1, 3};
    ck_assert_int_eq(floe_explore_add(x, kids, parents, 0, NULL, NULL, 2, ids, 0, &err), FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.msg, "parent 3 (state 2 of 2)"));
    floe_explore_counts c;
    floe_explore_stats(x, &c);
    ck_assert_uint_eq(c.states, 3);
    ck_assert_uint_eq(c.levels, 1);
    /* traces and depths of states that are not there */
    size_t len;
    ck_assert_int_eq(floe_explore_trace(x, 3, 8, ids, keys, NULL, &len, NULL, &err), FLOE_ERR_INVALID);
    ck_assert_int_eq(floe_explore_depth(x, UINT64_MAX, &depth, &err), FLOE_ERR_INVALID);
    /* a trace longer than the room: its length, and TOO_LARGE */
    const uint64_t k2 = 60, p2 = 2;
    ck_assert_int_eq(floe_explore_add(x, &k2, &p2, 0, NULL, NULL, 1, ids, 0, &err), FLOE_OK);
    ck_assert_int_eq(floe_explore_trace(x, ids[0], 1, ids, keys, NULL, &len, NULL, &err), FLOE_ERR_TOO_LARGE);
    ck_assert_uint_eq(len, 2);
    /* not strict: a claim hands out one depth at a time, shallowest first, without waiting */
    ck_assert_int_eq(floe_explore_claim(x, 8, 0, 10, ids, keys, &n, &depth, &token, &state, &err), FLOE_OK);
    ck_assert(state == FLOE_EXPLORE_GOT && n == 3 && depth == 0);
    uint64_t token2;
    ck_assert_int_eq(floe_explore_claim(x, 8, 0, 10, ids, keys, &n, &depth, &token2, &state, &err), FLOE_OK);
    ck_assert(state == FLOE_EXPLORE_GOT && n == 1 && depth == 1 && keys[0] == 60);
    ck_assert_int_eq(floe_explore_complete(x, 0, &err), FLOE_ERR_INVALID);
    floe_explore_destroy(x);
}
END_TEST

/* Parents as runs (Insert.from_first and from_counts) add what the same
 * parents spelled out add: the same ids, depths and traces, with answers
 * that skip states; runs that do not count the batch are refused and
 * change nothing. */
START_TEST(parent_runs_add_as_spelled_out)
{
    floe_errinfo err;
    floe_explore *a, *b;
    ck_assert_int_eq(floe_explore_create(8, 1, true, 1, -1, &a, &err), FLOE_OK);
    ck_assert_int_eq(floe_explore_create(8, 1, true, 1, -1, &b, &err), FLOE_OK);
    const uint64_t roots[3] = {10, 20, 30}, none[3] = {FLOE_EXPLORE_ROOT, FLOE_EXPLORE_ROOT, FLOE_EXPLORE_ROOT};
    uint64_t ia[8], ib[8];
    ck_assert_int_eq(floe_explore_add(a, roots, none, 0, NULL, NULL, 3, ia, 0, &err), FLOE_OK);
    ck_assert_int_eq(floe_explore_add(b, roots, none, 0, NULL, NULL, 3, ib, 0, &err), FLOE_OK);
    /* depth 1: parents 0, 0, 2, 2, 2 (a run of none between), two of them not new */
    const uint64_t k1[5] = {41, 42, 43, 44, 45}, p1[5] = {0, 0, 2, 2, 2};
    const uint8_t c1[3] = {2, 0, 3}, r1[5] = {FLOE_INSERTED, FLOE_PRESENT, FLOE_INSERTED, FLOE_INSERTED, FLOE_PRESENT};
    const unsigned char l1[5] = {1, 2, 3, 4, 5};
    const floe_parent_runs runs1 = {0, c1, 3};
    ck_assert_int_eq(floe_explore_add(a, k1, p1, 0, l1, r1, 5, ia, 0, &err), FLOE_OK);
    ck_assert_int_eq(floe_explore_add_runs(b, k1, &runs1, 0, l1, r1, 5, ib, 0, &err), FLOE_OK);
    /* parents of two depths in one batch (0 and the new 3): state by state */
    const uint64_t k2[4] = {51, 52, 53, 54}, p2[4] = {2, 3, 3, 4};
    const uint8_t c2[3] = {1, 2, 1}, r2[4] = {FLOE_INSERTED, FLOE_INSERTED, FLOE_PRESENT, FLOE_INSERTED};
    const floe_parent_runs runs2 = {2, c2, 3};
    ck_assert_int_eq(floe_explore_add(a, k2, p2, 0, NULL, r2, 4, ia, 0, &err), FLOE_OK);
    ck_assert_int_eq(floe_explore_add_runs(b, k2, &runs2, 0, NULL, r2, 4, ib, 0, &err), FLOE_OK);
    /* runs that count 3 states of a batch of 4: refused, nothing added */
    const uint8_t c3[2] = {1, 2};
    const floe_parent_runs runs3 = {0, c3, 2};
    ck_assert_int_eq(floe_explore_add_runs(b, k2, &runs3, 0, NULL, NULL, 4, ib, 0, &err), FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.msg, "count 3 states; the batch has 4"));
    floe_explore_counts ca, cb;
    floe_explore_stats(a, &ca);
    floe_explore_stats(b, &cb);
    ck_assert_uint_eq(ca.states, 9); /* 3 + 3 + 3 */
    ck_assert(cb.states == ca.states && cb.levels == ca.levels && cb.levels == 3);
    for (uint64_t id = 0; id < ca.states; id++) { /* every state's way back, keys and labels alike */
        uint64_t ta[8], tb[8], ka[8], kb[8];
        unsigned char la[8], lb[8];
        size_t na, nb;
        uint32_t da, db;
        ck_assert_int_eq(floe_explore_trace(a, id, 8, ta, ka, la, &na, NULL, &err), FLOE_OK);
        ck_assert_int_eq(floe_explore_trace(b, id, 8, tb, kb, lb, &nb, NULL, &err), FLOE_OK);
        ck_assert_uint_eq(na, nb);
        ck_assert(memcmp(ta, tb, na * 8) == 0 && memcmp(ka, kb, na * 8) == 0 && memcmp(la, lb, na) == 0);
        ck_assert_int_eq(floe_explore_depth(a, id, &da, &err), FLOE_OK);
        ck_assert_int_eq(floe_explore_depth(b, id, &db, &err), FLOE_OK);
        ck_assert_uint_eq(da, db);
    }
    floe_explore_destroy(a);
    floe_explore_destroy(b);
}
END_TEST

/* Large batches the way floe-mc sends them, with runs longer than the
 * adds spread at once, states of 8 and 12 bytes, labels of 1 and 2, and
 * new states that cross the open set's chunks: added as runs and spelled
 * out alike (ids, keys in order, traces). */
START_TEST(parent_runs_long_and_across_chunks)
{
    enum { PARENTS = 40000, PROBES = 2000 };
    static const uint32_t shapes[2][2] = {{8, 1}, {12, 2}};
    uint64_t seed = 0x5eed0000u + (uint64_t)(_i & 1);
    const uint32_t kb = shapes[_i & 1][0], lb = shapes[_i & 1][1];
    floe_errinfo err;
    floe_explore *a, *b;
    ck_assert_int_eq(floe_explore_create(kb, lb, true, 1, -1, &a, &err), FLOE_OK);
    ck_assert_int_eq(floe_explore_create(kb, lb, true, 1, -1, &b, &err), FLOE_OK);
    unsigned char *keys = malloc((size_t)PARENTS * 10 * kb), *labels = malloc((size_t)PARENTS * 10 * lb);
    uint64_t *from = malloc((size_t)PARENTS * 10 * 8), *ia = malloc((size_t)PARENTS * 10 * 8),
             *ib = malloc((size_t)PARENTS * 10 * 8);
    uint8_t *counts = malloc(PARENTS), *results = malloc((size_t)PARENTS * 10);
    ck_assert(keys && labels && from && ia && ib && counts && results);
    for (size_t i = 0; i < (size_t)PARENTS * 10 * kb; i++)
        keys[i] = (unsigned char)rng_next(&seed);
    for (size_t i = 0; i < (size_t)PARENTS * 10 * lb; i++)
        labels[i] = (unsigned char)rng_next(&seed);
    for (size_t i = 0; i < PARENTS; i++)
        from[i] = FLOE_EXPLORE_ROOT;
    ck_assert_int_eq(floe_explore_add(a, keys, from, 0, labels, NULL, PARENTS, ia, 0, &err), FLOE_OK);
    ck_assert_int_eq(floe_explore_add(b, keys, from, 0, labels, NULL, PARENTS, ib, 0, &err), FLOE_OK);
    fake_store store; /* _i 2, 3: b's states in a store from here on, a's in host memory */
    move_to_fake(b, _i & 2 ? &store : NULL);
    size_t n = 0;
    for (size_t r = 0; r < PARENTS; r++) { /* 0..9 successors a parent: runs of none and longer than 4 */
        counts[r] = (uint8_t)rng_below(&seed, 10);
        for (unsigned c = 0; c < counts[r]; c++, n++) {
            from[n] = r;
            results[n] = rng_below(&seed, 5) < 3 ? FLOE_INSERTED : FLOE_PRESENT;
        }
    }
    const floe_parent_runs runs = {0, counts, PARENTS};
    ck_assert_int_eq(floe_explore_add(a, keys, from, 0, labels, results, n, ia, 0, &err), FLOE_OK);
    ck_assert_int_eq(floe_explore_add_runs(b, keys, &runs, 0, labels, results, n, ib, 0, &err), FLOE_OK);
    floe_explore_counts ca, cb;
    floe_explore_stats(a, &ca);
    floe_explore_stats(b, &cb);
    ck_assert_uint_gt(ca.states, 2 * (1u << 16)); /* past two chunks' ends */
    ck_assert(cb.states == ca.states && cb.levels == 2 && ca.levels == 2);
    for (size_t i = 0; i < n; i++)
        ck_assert(results[i] != FLOE_INSERTED || ia[i] == ib[i]);
    unsigned char *ka = malloc(ca.states * kb), *kb2 = malloc(ca.states * kb);
    ck_assert(ka && kb2);
    ck_assert_int_eq(floe_explore_keys(a, 0, ca.states, ka, &err), FLOE_OK);
    ck_assert_int_eq(floe_explore_keys(b, 0, cb.states, kb2, &err), FLOE_OK);
    ck_assert(memcmp(ka, kb2, ca.states * kb) == 0);
    for (unsigned p = 0; p < PROBES; p++) { /* ways back, keys and labels alike, and each as sent */
        const uint64_t id = PARENTS + rng_below(&seed, ca.states - PARENTS);
        uint64_t ta[2], tb[2];
        unsigned char la[2 * 2], lb2[2 * 2], k1[2 * 12], k2[2 * 12];
        size_t na, nb;
        ck_assert_int_eq(floe_explore_trace(a, id, 2, ta, k1, la, &na, NULL, &err), FLOE_OK);
        ck_assert_int_eq(floe_explore_trace(b, id, 2, tb, k2, lb2, &nb, NULL, &err), FLOE_OK);
        ck_assert(na == 2 && nb == 2 && ta[0] == tb[0] && ta[1] == tb[1]);
        ck_assert(memcmp(k1, k2, 2 * kb) == 0 && memcmp(la, lb2, 2 * lb) == 0);
    }
    for (size_t i = 0; i < n; i += 97) /* a state's key and label are those of its place in the batch */
        if (results[i] == FLOE_INSERTED) {
            uint64_t t[2];
            unsigned char l[2 * 2], k[2 * 12];
            size_t nt;
            ck_assert_int_eq(floe_explore_trace(b, ib[i], 2, t, k, l, &nt, NULL, &err), FLOE_OK);
            ck_assert(nt == 2 && t[0] == from[i] && memcmp(k + kb, keys + i * kb, kb) == 0 &&
                      memcmp(l + lb, labels + i * lb, lb) == 0);
        }
    /* claims across the chunks' ends hand out the same states, and the two save the same bytes */
    for (size_t got = 0; got < ca.states;) {
        uint64_t ta, tb;
        size_t na, nb;
        uint32_t da, db;
        floe_explore_state sa, sb;
        const size_t most = 50000;
        ck_assert_int_eq(floe_explore_claim(a, most, 0, 1000, ia, ka, &na, &da, &ta, &sa, &err), FLOE_OK);
        ck_assert_int_eq(floe_explore_claim(b, most, 0, 1000, ib, kb2, &nb, &db, &tb, &sb, &err), FLOE_OK);
        ck_assert(sa == FLOE_EXPLORE_GOT && sb == sa && na == nb && na > 0 && da == db);
        ck_assert(memcmp(ia, ib, na * 8) == 0 && memcmp(ka, kb2, na * kb) == 0);
        got += na;
        if (da == 0) /* the first level's claims end; the second's stay out, and are saved as open */
            ck_assert(floe_explore_complete(a, ta, &err) == FLOE_OK && floe_explore_complete(b, tb, &err) == FLOE_OK);
    }
    buffer sa = {0}, sb = {0};
    ck_assert_int_eq(floe_explore_save(a, buf_write, &sa, &err), FLOE_OK);
    ck_assert_int_eq(floe_explore_save(b, buf_write, &sb, &err), FLOE_OK);
    ck_assert(sa.len == sb.len && memcmp(sa.p, sb.p, sa.len) == 0);
    free(sa.p);
    free(sb.p);
    if (_i & 2)
        ck_assert(atomic_load(&store.puts) > 0 && atomic_load(&store.gets) > 0);
    free(ka);
    free(kb2);
    free(keys);
    free(labels);
    free(from);
    free(ia);
    free(ib);
    free(counts);
    free(results);
    floe_explore_destroy(a);
    floe_explore_destroy(b);
}
END_TEST

Suite *explore_suite(void)
{
    Suite *s = suite_create("explore");
    TCase *tc = tcase_create("explore");
    tcase_add_loop_test(tc, workers_find_what_bfs_finds, 0, 2); /* _i 1: in a store */
    tcase_add_test(tc, shards_find_what_bfs_finds);
    tcase_add_loop_test(tc, leases_run_out_and_claims_end_once, 0, 2);
    tcase_add_loop_test(tc, a_run_saved_with_claims_out_resumes_exactly, 0, 2);
    tcase_add_test(tc, bad_input_changes_nothing);
    tcase_add_test(tc, parent_runs_add_as_spelled_out);
    tcase_add_loop_test(tc, parent_runs_long_and_across_chunks, 0, 4); /* _i 2, 3: one in a store */
    tcase_add_test(tc, a_store_that_is_full_moves_nothing);
    tcase_add_test(tc, a_store_that_fails_hands_out_nothing);
    tcase_add_loop_test(tc, threads_add_at_once, 0, 2);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}
