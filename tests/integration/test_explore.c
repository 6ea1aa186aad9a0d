/*
 * test_explore.c - an exploring table through floed: three workers (each
 * its own connection) claim states, expand them, insert the successors with
 * their parent's id and label, ending each claim with the last insert,
 * until floed answers DONE; against a plain breadth-first search of the
 * same graph written here: the states found, and every trace (from an
 * initial state, each step the transition its label names, as long as the
 * shortest path).  And what floed refuses, with nothing changed.
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "floe_wire.h"
#include "harness.h"

#define N      3000u
#define FANOUT 3

static uint64_t succ(uint64_t s, int a)
{
    return a == 0 ? (s * 7u + 3u) % N : a == 1 ? (s ^ 0x155u) % N : s / 2u;
}

static int dist[N];

static uint64_t reference_bfs(void)
{
    static uint64_t queue[N];
    size_t head = 0, tail = 0;
    for (uint64_t s = 0; s < N; s++)
        dist[s] = -1;
    for (uint64_t s = 0; s < 2; s++)
        dist[s] = 0, queue[tail++] = s;
    while (head < tail) {
        const uint64_t s = queue[head++];
        for (int a = 0; a < FANOUT; a++) {
            const uint64_t t = succ(s, a);
            if (dist[t] < 0)
                dist[t] = dist[s] + 1, queue[tail++] = t;
        }
    }
    return tail;
}

typedef struct worker {
    const daemon_proc *d;
    uint64_t *id_of; /* shared: each state's explore id, from the claims (written by the claimer) */
    pthread_mutex_t *lock;
    int waits, done;
    int claims; /* > 0: stop after this many claims */
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    floe *c = connect_ok(w->d);
    uint64_t ids[16], keys[16], sk[16 * FANOUT], from[16 * FANOUT];
    uint8_t labels[16 * FANOUT], res[16 * FANOUT];
    for (int round = 0, got = 0; round < 100000 && !w->done && (!w->claims || got < w->claims); round++) {
        floe_claim cl;
        ck_assert_int_eq(floe_claim_states(c, "run", 16, 0, ids, keys, sizeof keys, &cl), FLOE_OK);
        if (cl.state == FLOE_CLAIM_DONE) {
            w->done = 1;
            break;
        }
        if (cl.state == FLOE_CLAIM_WAIT) {
            w->waits++;
            continue;
        }
        got++;
        size_t m = 0;
        pthread_mutex_lock(w->lock);
        for (size_t i = 0; i < cl.n; i++) {
            ck_assert_int_eq(dist[keys[i]], (int)cl.depth);
            w->id_of[keys[i]] = ids[i];
        }
        pthread_mutex_unlock(w->lock);
        for (size_t i = 0; i < cl.n; i++)
            for (int a = 0; a < FANOUT; a++)
                sk[m] = succ(keys[i], a), from[m] = ids[i], labels[m] = (uint8_t)a, m++;
        /* in two inserts, the claim ended by the second */
        const size_t half = m / 2;
        ck_assert_int_eq(floe_insert_explore(c, "run", sk, half * 8, half, from, 0, labels, half, 0, res, NULL),
                         FLOE_OK);
        bool range = true; /* a claim from the cursor: its ids consecutive */
        for (size_t i = 1; i < cl.n; i++)
            range = range && ids[i] == ids[0] + i;
        if (range && m > half) { /* the second with its parents run-length coded */
            uint8_t counts[16];
            size_t np = 0;
            for (size_t i = half; i < m; i++) {
                if (i == half || from[i] != from[i - 1])
                    counts[np++] = 0;
                counts[np - 1]++;
            }
            floe_call *call = floe_send_insert_successors(c, "run", sk + half, (m - half) * 8, m - half, from[half],
                                                          counts, np, 0, labels + half, m - half, cl.token, NULL, NULL);
            ck_assert_int_eq(floe_wait(c, call), FLOE_OK);
            floe_call_free(call);
        } else {
            ck_assert_int_eq(floe_insert_explore(c, "run", sk + half, (m - half) * 8, m - half, from + half, 0,
                                                 labels + half, m - half, cl.token, res, NULL),
                             FLOE_OK);
        }
    }
    floe_close(c);
    return NULL;
}

/* Every state's trace: from an initial state, each step its label's transition, shortest. */
static void check_traces(floe *c, const uint64_t *id_of)
{
    for (uint64_t s = 0; s < N; s++) {
        if (dist[s] < 0)
            continue;
        uint64_t *tid;
        void *tk, *tl;
        size_t n;
        ck_assert_int_eq(floe_trace(c, "run", id_of[s], &tid, &tk, &tl, &n), FLOE_OK);
        const uint64_t *k = tk;
        const uint8_t *l = tl;
        ck_assert_uint_eq(n, (size_t)dist[s] + 1);
        ck_assert(k[0] < 2 && k[n - 1] == s && tid[n - 1] == id_of[s]);
        for (size_t i = 1; i < n; i++)
            ck_assert_uint_eq(succ(k[i - 1], l[i]), k[i]);
        free(tid), free(tk), free(tl);
    }
}

START_TEST(workers_find_what_bfs_finds)
{
    const uint64_t want = reference_bfs();
    daemon_proc d;
    daemon_start(&d, NULL);
    floe *c = connect_ok(&d);
    floe_table_def def = {
        .name = "run", .kind = FLOE_TABLE_SET, .key_bits = 16, .capacity = 1 << 14, .explore = 1, .label_bytes = 1};
    ck_assert_int_eq(floe_create(c, &def), FLOE_OK);
    /* the server says it keeps exploring tables (a client refuses one that does not), and only that */
    ck_assert(floe_server_has(c, FLOE_FEATURE_EXPLORE));
    ck_assert(!floe_server_has(c, "expl") && !floe_server_has(c, "nosuch") && !floe_server_has(c, "explore "));
    /* before any state: WAIT (the run has not begun), not DONE */
    uint64_t ids[4], keys[4];
    floe_claim cl;
    ck_assert_int_eq(floe_claim_states(c, "run", 4, 0, ids, keys, sizeof keys, &cl), FLOE_OK);
    ck_assert_int_eq(cl.state, FLOE_CLAIM_WAIT);
    const uint64_t init[2] = {0, 1};
    uint8_t res[2];
    ck_assert_int_eq(floe_insert_explore(c, "run", init, 16, 2, NULL, 0, NULL, 0, 0, res, NULL), FLOE_OK);
    ck_assert(res[0] == FLOE_INSERTED && res[1] == FLOE_INSERTED);
    uint64_t *id_of = calloc(N, sizeof *id_of);
    ck_assert_ptr_nonnull(id_of);
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    worker w[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        w[i] = (worker){&d, id_of, &lock, 0, 0, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        ck_assert(w[i].done);
    }
    floe_table_info info;
    ck_assert_int_eq(floe_stats(c, "run", &info), FLOE_OK);
    ck_assert_uint_eq(info.keys, want);
    ck_assert(info.explore.on && info.explore.done);
    ck_assert_uint_eq(info.explore.states, want);
    ck_assert_uint_eq(info.explore.open + info.explore.claimed + info.explore.claims, 0);
    int deepest = 0;
    for (uint64_t s = 0; s < N; s++)
        deepest = dist[s] > deepest ? dist[s] : deepest;
    ck_assert_uint_eq(info.explore.levels, (uint32_t)deepest + 1);
    check_traces(c, id_of);
    free(id_of);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(refusals_change_nothing)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    floe *c = connect_ok(&d);
    floe_table_def plain = {.name = "plain", .kind = FLOE_TABLE_SET, .key_bits = 16};
    ck_assert_int_eq(floe_create(c, &plain), FLOE_OK);
    floe_table_def bad = {.name = "o", .kind = FLOE_TABLE_ORDERED, .key_bits = 16, .explore = 1};
    ck_assert_int_eq(floe_create(c, &bad), FLOE_ERR_INVALID);
    floe_table_def wide = {.name = "w", .kind = FLOE_TABLE_SET, .explore = 1, .label_bytes = 5};
    ck_assert_int_eq(floe_create(c, &wide), FLOE_ERR_INVALID);
    floe_table_def ex = {.name = "ex", .kind = FLOE_TABLE_SET, .key_bits = 16, .explore = 1};
    ck_assert_int_eq(floe_create(c, &ex), FLOE_OK);
    uint64_t ids[4], keys[4], k[2] = {5, 6}, from[2] = {FLOE_EXPLORE_INITIAL, 7};
    uint8_t res[2];
    floe_claim cl;
    /* a plain table takes no claim and no parents */
    ck_assert_int_eq(floe_claim_states(c, "plain", 4, 0, ids, keys, sizeof keys, &cl), FLOE_ERR_INVALID);
    ck_assert_int_eq(floe_insert_explore(c, "plain", k, 16, 2, from, 0, NULL, 0, 0, res, NULL), FLOE_ERR_INVALID);
    /* a parent that is no state (7 of 0 found), a claim that is not out, a length that is wrong */
    ck_assert_int_eq(floe_insert_explore(c, "ex", k, 16, 2, from, 0, NULL, 0, 0, res, NULL), FLOE_ERR_INVALID);
    ck_assert_int_eq(floe_insert_explore(c, "ex", k, 16, 2, NULL, 0, NULL, 0, 0x1234, res, NULL), FLOE_ERR_INVALID);
    ck_assert_int_eq(floe_insert_explore(c, "ex", k, 16, 2, from, 0, NULL, 0, 0, res, NULL), FLOE_ERR_INVALID);
    floe_table_info info;
    ck_assert_int_eq(floe_stats(c, "ex", &info), FLOE_OK);
    ck_assert_uint_eq(info.keys, 0); /* nothing went in */
    uint64_t *tid;
    void *tk, *tl;
    size_t n;
    ck_assert_int_eq(floe_trace(c, "ex", 0, &tid, &tk, &tl, &n), FLOE_ERR_INVALID);
    ck_assert_int_eq(floe_claim_renew(c, "ex", 99, 0), FLOE_ERR_INVALID);
    /* parents run-length coded: counts that do not add up to the keys, or with from besides */
    const uint8_t counts[2] = {1, 2};
    floe_call *call = floe_send_insert_successors(c, "ex", k, 16, 2, 0, counts, 2, 0, NULL, 0, 0, NULL, NULL);
    ck_assert_int_eq(floe_wait(c, call), FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(floe_call_error(call), "add up to 3 keys"));
    floe_call_free(call);
    /* run-length parents that are no states (4 and 5, none found; a run of none first): the first
     * named */
    const uint8_t runs[3] = {0, 1, 1};
    call = floe_send_insert_successors(c, "ex", k, 16, 2, 3, runs, 3, 0, NULL, 0, 0, NULL, NULL);
    ck_assert_int_eq(floe_wait(c, call), FLOE_ERR_INVALID);
    ck_assert_msg(strstr(floe_call_error(call), "parent 4 (state 1 of 2) is no state found"), "%s",
                  floe_call_error(call));
    floe_call_free(call);
    ck_assert_int_eq(floe_stats(c, "ex", &info), FLOE_OK);
    ck_assert_uint_eq(info.keys, 0);
    /* one state, no successor: its claim ends with an insert of no keys, and then the run is DONE */
    const uint64_t root = 9;
    ck_assert_int_eq(floe_insert_explore(c, "ex", &root, 8, 1, NULL, 0, NULL, 0, 0, res, NULL), FLOE_OK);
    ck_assert_int_eq(floe_claim_states(c, "ex", 4, 0, ids, keys, sizeof keys, &cl), FLOE_OK);
    ck_assert(cl.state == FLOE_CLAIM_GOT && cl.n == 1 && keys[0] == 9 && ids[0] == 0 && cl.depth == 0);
    ck_assert_int_eq(floe_claim_renew(c, "ex", cl.token, 5000), FLOE_OK);
    floe_claim again;
    ck_assert_int_eq(floe_claim_states(c, "ex", 4, 0, ids, keys, sizeof keys, &again), FLOE_OK);
    ck_assert_int_eq(again.state, FLOE_CLAIM_WAIT); /* nothing open, a claim out */
    ck_assert_int_eq(floe_insert_explore(c, "ex", NULL, 0, 0, NULL, 0, NULL, 0, cl.token, res, NULL), FLOE_OK);
    ck_assert_int_eq(floe_claim_states(c, "ex", 4, 0, ids, keys, sizeof keys, &again), FLOE_OK);
    ck_assert_int_eq(again.state, FLOE_CLAIM_DONE);
    ck_assert_int_eq(floe_trace(c, "ex", 0, &tid, &tk, &tl, &n), FLOE_OK);
    ck_assert(n == 1 && tid[0] == 0 && ((uint64_t *)tk)[0] == 9 && tl == NULL);
    free(tid), free(tk);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* Three workers run for a while, one claim is left out, a snapshot is
 * taken, the run goes on, and floed is killed (-9): what it found after
 * the snapshot is lost.  A floed started again on its data dir has the
 * table and its open set as the snapshot left them, the claim out open
 * again, and workers that carry on find exactly what the search finds. */
START_TEST(a_run_survives_kill_9)
{
    const uint64_t want = reference_bfs();
    char data[] = "/tmp/floe-explore-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(data));
    const char *flags[] = {"--data-dir", data, "--save-every", "0", NULL};
    daemon_proc d;
    daemon_start(&d, flags);
    floe *c = connect_ok(&d);
    floe_table_def def = {.name = "run", .kind = FLOE_TABLE_SET, .key_bits = 16, .capacity = 64, .grow = 1,
                          .explore = 1, .label_bytes = 1};
    ck_assert_int_eq(floe_create(c, &def), FLOE_OK);
    const uint64_t init[2] = {0, 1};
    uint8_t res[2];
    ck_assert_int_eq(floe_insert_explore(c, "run", init, 16, 2, NULL, 0, NULL, 0, 0, res, NULL), FLOE_OK);
    uint64_t *id_of = calloc(N, sizeof *id_of);
    ck_assert_ptr_nonnull(id_of);
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    worker w[3];
    pthread_t th[3];
    floe_table_info saved;
    uint64_t saved_token = 0;
    for (int phase = 0; phase < 3; phase++) {
        /* 0: a while, then a claim left out and the snapshot; 1: a while more, then kill -9; 2: to the end */
        for (int i = 0; i < 3; i++) {
            w[i] = (worker){&d, id_of, &lock, 0, 0, phase < 2 ? 12 : 0};
            ck_assert_int_eq(pthread_create(&th[i], NULL, work, &w[i]), 0);
        }
        for (int i = 0; i < 3; i++)
            ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        floe_table_info info;
        if (phase == 0) {
            uint64_t ids[8], keys[8];
            floe_claim out;
            ck_assert_int_eq(floe_claim_states(c, "run", 8, 0, ids, keys, sizeof keys, &out), FLOE_OK);
            ck_assert_int_eq(out.state, FLOE_CLAIM_GOT);
            saved_token = out.token;
            ck_assert_int_eq(floe_snapshot(c, "run"), FLOE_OK);
            ck_assert_int_eq(floe_stats(c, "run", &info), FLOE_OK);
            ck_assert(info.keys > 2 && info.keys < want && info.explore.states == info.keys && info.explore.claims == 1);
            saved = info;
        } else if (phase == 1) {
            ck_assert_int_eq(floe_stats(c, "run", &info), FLOE_OK);
            ck_assert(info.keys > saved.keys); /* found since, and lost */
            floe_close(c);
            ck_assert_int_eq(daemon_stop(&d, SIGKILL), 128 + SIGKILL);
            daemon_start(&d, flags);
            c = connect_ok(&d);
            ck_assert_int_eq(floe_stats(c, "run", &info), FLOE_OK);
            ck_assert_uint_eq(info.keys, saved.keys);
            ck_assert(info.explore.on && !info.explore.done);
            ck_assert_uint_eq(info.explore.states, saved.explore.states);
            ck_assert_uint_eq(info.explore.open, saved.explore.open + saved.explore.claimed);
            ck_assert_uint_eq(info.explore.claims + info.explore.claimed, 0);
            /* a token of the run before is not one of this run's */
            ck_assert_int_eq(floe_claim_renew(c, "run", saved_token, 0), FLOE_ERR_INVALID);
        }
    }
    floe_table_info info;
    ck_assert_int_eq(floe_stats(c, "run", &info), FLOE_OK);
    ck_assert_uint_eq(info.keys, want);
    ck_assert(info.explore.done && info.explore.states == want);
    check_traces(c, id_of);
    free(id_of);
    floe_close(c);
    /* saved at the stop with its open set, and loaded again as it was */
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
    daemon_start(&d, flags);
    c = connect_ok(&d);
    ck_assert_int_eq(floe_stats(c, "run", &info), FLOE_OK);
    ck_assert(info.keys == want && info.explore.done && info.explore.states == want);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
    rm_rf(data);
}
END_TEST

/* A raw Claim (the protocol, not libfloe): ids as 8 bytes each unless the
 * client asks for ranges; with ids_range, consecutive ids come as
 * first_id and count, and ids that are not consecutive (states of expired
 * claims) as bytes still.  libfloe reads both ways alike. */
static Floe__V1__Response *raw_claim(int fd, uint64_t id, uint32_t max, uint32_t lease_ms, bool range)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Claim q = FLOE__V1__CLAIM__INIT;
    q.table = "ex";
    q.max = max;
    q.lease_ms = lease_ms;
    q.ids_range = range;
    req.op_case = FLOE__V1__REQUEST__OP_CLAIM;
    req.claim = &q;
    Floe__V1__Response *r = raw_call(fd, &req, id);
    ck_assert_int_eq(r->status, FLOE_OK);
    ck_assert_int_eq(r->body_case, FLOE__V1__RESPONSE__BODY_CLAIM);
    return r;
}

START_TEST(claim_ids_as_bytes_or_range)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    floe *c = connect_ok(&d);
    floe_table_def ex = {.name = "ex", .kind = FLOE_TABLE_SET, .key_bits = 16, .explore = 1};
    ck_assert_int_eq(floe_create(c, &ex), FLOE_OK);
    const uint64_t roots[6] = {10, 11, 12, 13, 14, 15};
    uint8_t res[6];
    ck_assert_int_eq(floe_insert_explore(c, "ex", roots, 48, 6, NULL, 0, NULL, 0, 0, res, NULL), FLOE_OK);
    const int fd = raw_connect(d.port);
    /* without ids_range: 8 bytes an id, as an older client reads them */
    Floe__V1__Response *r = raw_claim(fd, 1, 1, 60000, false);
    ck_assert(r->claim->ids.len == 8 && r->claim->count == 0 && r->claim->keys.len == 8);
    ck_assert_uint_eq(((uint64_t *)(void *)r->claim->ids.data)[0], 0);
    floe__v1__response__free_unpacked(r, NULL);
    /* with it: ids 1 and 2 as a range, the keys as ever */
    r = raw_claim(fd, 2, 2, 1000, true); /* a lease that ends after the next two claims, even under TSan */
    ck_assert(r->claim->ids.len == 0 && r->claim->count == 2 && r->claim->first_id == 1);
    ck_assert(r->claim->keys.len == 16 && ((uint64_t *)(void *)r->claim->keys.data)[1] == 12);
    floe__v1__response__free_unpacked(r, NULL);
    r = raw_claim(fd, 3, 1, 60000, true); /* id 3, kept out */
    ck_assert(r->claim->count == 1 && r->claim->first_id == 3);
    floe__v1__response__free_unpacked(r, NULL);
    r = raw_claim(fd, 4, 1, 1000, true); /* id 4, to expire with 1 and 2 */
    ck_assert(r->claim->count == 1 && r->claim->first_id == 4);
    floe__v1__response__free_unpacked(r, NULL);
    usleep(1500000);
    /* the expired claims' states 1, 2 and 4 come back first: not a range, so as bytes */
    r = raw_claim(fd, 5, 8, 60000, true);
    ck_assert(r->claim->count == 0 && r->claim->ids.len == 24);
    const uint64_t *got = (const uint64_t *)(void *)r->claim->ids.data;
    ck_assert(got[0] == 1 && got[1] == 2 && got[2] == 4);
    floe__v1__response__free_unpacked(r, NULL);
    close(fd);
    /* libfloe asks for ranges and hands out ids either way: the last open state, 5 */
    uint64_t ids[4], keys[4];
    floe_claim cl;
    ck_assert_int_eq(floe_claim_states(c, "ex", 4, 0, ids, keys, sizeof keys, &cl), FLOE_OK);
    ck_assert(cl.state == FLOE_CLAIM_GOT && cl.n == 1 && ids[0] == 5 && keys[0] == 15);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

Suite *explore_suite(void)
{
    Suite *s = suite_create("explore");
    TCase *tc = tcase_create("explore");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, workers_find_what_bfs_finds);
    tcase_add_test(tc, refusals_change_nothing);
    tcase_add_test(tc, claim_ids_as_bytes_or_range);
    tcase_add_test(tc, a_run_survives_kill_9);
    suite_add_tcase(s, tc);
    return s;
}
