/*
 * test_ordered.c - ORDERED tables over the wire, against a reference
 * ordered map written plainly here (a sorted array): random batches of
 * inserts (some overwriting), finds and erases with heavy duplication, for
 * key widths 1, 8, 31, 40 and 64 with and without values, each followed by
 * ranges read in pages both ways (cursors, empty ranges), successors and
 * predecessors of random keys and of keys beyond the ends, min, max and an
 * ordered scan; concurrent clients inserting and erasing the same keys
 * (one INSERTED and one ERASED per key); pipelined calls; the requests an
 * ORDERED table or another kind refuses, each changing nothing; a restart
 * through data-dir; and the CLI.
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../ordered_ref.h"
#include "harness.h"


static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t mask_of(unsigned bits)
{
    return bits >= 64 ? UINT64_MAX : (1ull << bits) - 1;
}

static uint64_t val_at(const uint8_t *v, unsigned vb, size_t i)
{
    uint64_t x = 0;
    memcpy(&x, v + i * vb, vb);
    return x;
}

/* A key from `distinct` scattered ones (heavy duplication), sometimes any, sometimes an end. */
static uint64_t pick_key(uint64_t *rng, unsigned bits, uint64_t distinct)
{
    const uint64_t r = rng_next(rng), m = mask_of(bits);
    if (r % 64 == 0)
        return r % 128 == 0 ? 0 : m;
    if (r % 8 == 1)
        return rng_next(rng) & m;
    return ((rng_next(rng) % distinct) * 0x9E3779B97F4A7C15ull) & m;
}

static void create_ordered(floe *c, const char *name, unsigned bits, unsigned vb)
{
    floe_table_def def = {.name = name, .kind = FLOE_TABLE_ORDERED, .key_bits = bits, .value_bytes = vb};
    ck_assert_msg(floe_create(c, &def) == FLOE_OK, "create %s: %s", name, floe_errstr(c));
}

/* One request of op (0 insert, 1 insert with overwrite, 2 find, 3 erase), every answer checked. */
static void run_checked(floe *c, const char *t, ref *r, int op, const uint64_t *keys, const uint8_t *vin, size_t n,
                        unsigned vb)
{
    uint8_t *res = malloc(n + 1), *vout = malloc(n * 8 + 8);
    floe_counts k;
    int st = op == 0 || op == 1 ? (vb ? floe_insert_values(c, t, keys, vin, n, vb, op == 1, res, vout, &k)
                                      : floe_insert(c, t, keys, n, res, &k))
             : op == 2          ? floe_find(c, t, keys, n, res, vb ? vout : NULL, vb, &k)
                                : floe_erase(c, t, keys, n, res, &k);
    ck_assert_msg(st == FLOE_OK, "op %d: %s", op, floe_errstr(c));
    uint64_t tally[5] = {0};
    for (size_t i = 0; i < n; i++) {
        uint64_t wv;
        const uint8_t want = ref_apply(r, op, keys[i], vb && op <= 1 ? val_at(vin, vb, i) : 0, &wv);
        ck_assert_msg(res[i] == want, "op %d, key %zu (%llx): %u, expected %u", op, i, (unsigned long long)keys[i],
                      res[i], want);
        if (vb && op <= 2 && want != FLOE_ABSENT)
            ck_assert_msg(val_at(vout, vb, i) == wv, "op %d, key %zu: value %llx, expected %llx", op, i,
                          (unsigned long long)val_at(vout, vb, i), (unsigned long long)wv);
        tally[want]++;
    }
    ck_assert_uint_eq(k.inserted, tally[FLOE_INSERTED]);
    ck_assert_uint_eq(k.present, tally[FLOE_PRESENT]);
    ck_assert_uint_eq(k.absent, tally[FLOE_ABSENT]);
    ck_assert_uint_eq(k.erased, tally[FLOE_ERASED]);
    free(res);
    free(vout);
}

/* [lo, hi] read in pages of random sizes, one way, against the reference. */
static void check_range(floe *c, const char *t, const ref *r, uint64_t lo, uint64_t hi, bool desc, unsigned vb,
                        uint64_t *rng)
{
    const size_t first = ref_pos(r, lo);
    size_t last = ref_pos(r, hi);
    if (last < r->n && r->key[last] == hi)
        last++;
    const size_t in = last > first ? last - first : 0;
    uint64_t *keys = malloc((in + 1) * 8 + 4096 * 8);
    uint8_t *vals = malloc((in + 1) * 8 + 4096 * 8);
    floe_range_cursor cur;
    memset(&cur, 0, sizeof cur);
    size_t total = 0, pages = 0;
    int done = 0;
    while (!done) {
        const size_t limit = 1 + rng_next(rng) % (pages % 3 == 0 ? 7 : 3000);
        size_t n;
        int st = floe_range(c, t, lo, hi, desc ? FLOE_RANGE_DESC : 0, &cur, limit, keys + total,
                            vb ? vals + total * vb : NULL, vb, &n, &done);
        ck_assert_msg(st == FLOE_OK, "range [%llx, %llx]: %s", (unsigned long long)lo, (unsigned long long)hi,
                      floe_errstr(c));
        ck_assert_uint_le(n, limit);
        ck_assert_msg(done || n == limit, "a page of %zu keys of %zu asked, not the last", n, limit);
        total += n;
        ck_assert_uint_le(total, in);
        pages++;
    }
    ck_assert_uint_eq(total, in);
    for (size_t i = 0; i < total; i++) {
        const size_t at = desc ? last - 1 - i : first + i;
        ck_assert_msg(keys[i] == r->key[at], "range [%llx, %llx] %s: key %zu is %llx, expected %llx",
                      (unsigned long long)lo, (unsigned long long)hi, desc ? "desc" : "asc", i,
                      (unsigned long long)keys[i], (unsigned long long)r->key[at]);
        if (vb)
            ck_assert_uint_eq(val_at(vals, vb, i), r->val[at]);
    }
    free(keys);
    free(vals);
}

/* Ranges, neighbours of random keys and of the ends, min, max, and the whole table by scan. */
static void check_queries(floe *c, const char *t, const ref *r, unsigned bits, unsigned vb, uint64_t *rng, bool scan)
{
    const uint64_t m = mask_of(bits);
    for (int i = 0; i < 6; i++) {
        uint64_t lo = rng_next(rng) & m, hi = rng_next(rng) & m;
        if (r->n && i % 2) /* bounds on stored keys */
            lo = r->key[rng_next(rng) % r->n], hi = r->key[rng_next(rng) % r->n];
        if (lo > hi) {
            const uint64_t x = lo;
            lo = hi, hi = x;
        }
        if (i == 4)
            lo = 0, hi = m; /* everything */
        check_range(c, t, r, lo, hi, i % 3 == 1, vb, rng);
    }
    enum { Q = 200 };
    uint64_t q[Q], found[Q];
    uint8_t res[Q], qv[Q * 8];
    for (int i = 0; i < Q; i++)
        q[i] = i == 0 ? 0 : i == 1 ? m : (r->n && i % 3 == 0) ? r->key[rng_next(rng) % r->n] : rng_next(rng) & m;
    for (int pred = 0; pred < 2; pred++) {
        int st = (pred ? floe_predecessor : floe_successor)(c, t, q, Q, res, found, vb ? qv : NULL, vb);
        ck_assert_msg(st == FLOE_OK, "%s: %s", pred ? "predecessor" : "successor", floe_errstr(c));
        for (int i = 0; i < Q; i++) {
            size_t at = ref_pos(r, q[i]);
            bool some = at < r->n;
            if (pred && !(at < r->n && r->key[at] == q[i]))
                some = at > 0, at--;
            ck_assert_msg(res[i] == (some ? FLOE_PRESENT : FLOE_ABSENT), "%s of %llx: %u",
                          pred ? "predecessor" : "successor", (unsigned long long)q[i], res[i]);
            ck_assert_uint_eq(found[i], some ? r->key[at] : 0);
            if (some && vb)
                ck_assert_uint_eq(val_at(qv, vb, i), r->val[at]);
        }
    }
    for (int max = 0; max < 2; max++) {
        int found_one;
        uint64_t key;
        uint8_t v[8] = {0};
        ck_assert_int_eq((max ? floe_max : floe_min)(c, t, &found_one, &key, vb ? v : NULL, vb), FLOE_OK);
        ck_assert_int_eq(found_one, r->n > 0);
        if (r->n) {
            const size_t at = max ? r->n - 1 : 0;
            ck_assert_uint_eq(key, r->key[at]);
            if (vb)
                ck_assert_uint_eq(val_at(v, vb, 0), r->val[at]);
        }
    }
    if (!scan)
        return;
    /* a scan walks the keys in order */
    uint64_t *keys = malloc((r->n + 1) * 8 + 1000 * 8);
    floe_cursor cur = {{0}, 0};
    size_t total = 0;
    int done = 0;
    while (!done) {
        size_t n;
        ck_assert_int_eq(floe_scan(c, t, &cur, 1000, keys + total, NULL, 0, &n, &done), FLOE_OK);
        total += n;
        ck_assert_uint_le(total, r->n);
    }
    ck_assert_uint_eq(total, r->n);
    ck_assert_mem_eq(keys, r->key, total * 8);
    free(keys);
    floe_table_info info;
    ck_assert_int_eq(floe_stats(c, t, &info), FLOE_OK);
    ck_assert_uint_eq(info.keys, r->n);
    ck_assert_int_eq(info.kind, FLOE_TABLE_ORDERED);
    ck_assert_uint_eq(info.value_bytes, vb);
}

static const unsigned WIDTHS[] = {1, 8, 31, 40, 64};

/* _i: key width by values (none, 8 bytes). */
START_TEST(ordered_over_the_wire)
{
    const unsigned bits = WIDTHS[_i / 2], vb = _i % 2 ? 8 : 0;
    daemon_proc d;
    daemon_start(&d, NULL);
    floe *c = connect_ok(&d);
    create_ordered(c, "o", bits, vb);
    ref r = {0};
    uint64_t rng = 0x0DE4ED00ull + (uint64_t)_i;
    const uint64_t distinct = bits <= 8 ? 200 : 20000;
    enum { B = 6000, ROUNDS = 14 };
    uint64_t *keys = malloc(B * 8);
    uint8_t *vals = malloc(B * 8);
    for (int round = 0; round < ROUNDS; round++) {
        /* rounds 0-7 fill, 8-11 erase most, 12 erases everything, 13 fills again */
        const size_t n = 1 + rng_next(&rng) % B;
        if (round == 12) {
            while (r.n > 0) { /* every key, some twice, in one request */
                size_t m = 0;
                for (size_t i = 0; i < r.n && m + 2 <= B; i++)
                    keys[m++] = r.key[i], keys[m++] = r.key[rng_next(&rng) % r.n];
                run_checked(c, "o", &r, 3, keys, NULL, m, vb);
            }
        } else {
            for (size_t i = 0; i < n; i++) {
                keys[i] = pick_key(&rng, bits, distinct);
                const uint64_t v = rng_next(&rng);
                memcpy(vals + i * 8, &v, 8);
            }
            const uint64_t pick = rng_next(&rng) % 10;
            const int op = round >= 8 ? (pick < 7 ? 3 : 2) : (pick < 5 ? 0 : pick < 7 ? 1 : pick < 9 ? 2 : 3);
            if (vb) /* values packed at vb bytes */
                for (size_t i = 0; i < n; i++)
                    memmove(vals + i * vb, vals + i * 8, vb);
            run_checked(c, "o", &r, op, keys, vals, n, vb);
        }
        check_queries(c, "o", &r, bits, vb, &rng, round % 4 == 3 || round >= 12);
    }
    free(keys);
    free(vals);
    ref_free(&r);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* ---- concurrency: one INSERTED and one ERASED per key among clients ---- */

enum { CLIENTS = 4, SHARED = 20000 };

typedef struct worker {
    const daemon_proc *d;
    int op; /* 0 insert, 3 erase */
    unsigned index;
    uint64_t done; /* INSERTED or ERASED answers */
    int status;
} worker;

static uint64_t shared_key(size_t i)
{
    return (i * 0x9E3779B97F4A7C15ull) >> 24; /* 40 bits, distinct */
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    floe *c;
    w->status = harness_connect(w->d, NULL, &c);
    if (w->status != FLOE_OK)
        return NULL;
    uint64_t rng = 77 + w->index, *keys = malloc(2000 * 8);
    uint8_t *res = malloc(2000);
    for (size_t at = 0; at < SHARED && w->status == FLOE_OK; at += 1000) {
        size_t n = 0; /* this part of the keys, each twice, in a client's own order */
        for (size_t i = 0; i < 1000; i++)
            keys[n++] = shared_key(at + (i * (2 * w->index + 1) + 13 * w->index) % 1000);
        for (size_t i = 0; i < 1000; i++)
            keys[n++] = shared_key(at + rng_next(&rng) % 1000);
        floe_counts k;
        w->status = w->op == 0 ? floe_insert(c, "shared", keys, n, res, &k) : floe_erase(c, "shared", keys, n, res, &k);
        w->done += w->op == 0 ? k.inserted : k.erased;
    }
    free(keys);
    free(res);
    floe_close(c);
    return NULL;
}

static void run_workers(const daemon_proc *d, int op)
{
    worker w[CLIENTS];
    pthread_t th[CLIENTS];
    for (unsigned i = 0; i < CLIENTS; i++) {
        w[i] = (worker){d, op, i, 0, FLOE_OK};
        ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    uint64_t total = 0;
    for (unsigned i = 0; i < CLIENTS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(w[i].status == FLOE_OK, "client %u: %s", i, floe_strerror(w[i].status));
        total += w[i].done;
    }
    ck_assert_uint_eq(total, SHARED); /* every key once, whoever got it */
}

START_TEST(ordered_concurrent)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    floe *c = connect_ok(&d);
    create_ordered(c, "shared", 40, 0);
    run_workers(&d, 0);
    ref r = {0};
    for (size_t i = 0; i < SHARED; i++) {
        size_t at;
        ck_assert(!ref_has(&r, shared_key(i), &at));
        ref_put(&r, at, shared_key(i), 0);
    }
    uint64_t rng = 5;
    check_queries(c, "shared", &r, 40, 0, &rng, true);
    run_workers(&d, 3);
    r.n = 0;
    check_queries(c, "shared", &r, 40, 0, &rng, true);
    ref_free(&r);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* Successors, predecessors and range pages in flight together, answered in order. */
START_TEST(ordered_pipelined)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    floe *c = connect_ok(&d);
    create_ordered(c, "p", 32, 4);
    enum { N = 1000 };
    uint64_t keys[N];
    uint32_t vals[N];
    for (int i = 0; i < N; i++)
        keys[i] = 10 * (uint64_t)i + 5, vals[i] = (uint32_t)i * 3;
    ck_assert_int_eq(floe_insert_values(c, "p", keys, vals, N, 4, 0, NULL, NULL, NULL), FLOE_OK);
    enum { CALLS = 24 };
    floe_call *calls[CALLS];
    uint64_t q[CALLS][2];
    for (int i = 0; i < CALLS; i++) {
        q[i][0] = 37 * (uint64_t)i, q[i][1] = 100000;
        if (i % 3 == 2)
            calls[i] = floe_send_range(c, "p", q[i][0], q[i][0] + 100, FLOE_WANT_VALUES | (i % 2 ? FLOE_RANGE_DESC : 0),
                                       NULL, 4, NULL, NULL);
        else
            calls[i] =
                (i % 3 ? floe_send_predecessor : floe_send_successor)(c, "p", q[i], 2, FLOE_WANT_VALUES, NULL, NULL);
        ck_assert_ptr_nonnull(calls[i]);
    }
    ck_assert_int_eq(floe_wait_all(c), FLOE_OK);
    for (int i = 0; i < CALLS; i++) {
        ck_assert_int_eq(floe_call_status(calls[i]), FLOE_OK);
        size_t kb, vbytes;
        const unsigned char *k = floe_call_keys(calls[i], &kb), *v = floe_call_values(calls[i], &vbytes);
        uint64_t got[4];
        uint32_t gv[4];
        ck_assert_uint_le(kb, sizeof got);
        memcpy(got, k, kb);
        memcpy(gv, v, vbytes);
        const uint64_t x = q[i][0];
        if (i % 3 == 2) { /* keys 10j + 5 in [x, x + 100], 4 of them from either end */
            floe_range_cursor next;
            int done;
            ck_assert_int_eq(floe_call_range_next(calls[i], &next, &done), FLOE_OK);
            ck_assert_uint_eq(kb, 4 * 8);
            ck_assert(!done);
            const uint64_t j0 = i % 2 ? (x + 100 - 5) / 10 : (x + 4) / 10; /* the first key's j */
            for (int t = 0; t < 4; t++) {
                const uint64_t j = i % 2 ? j0 - (uint64_t)t : j0 + (uint64_t)t;
                ck_assert_uint_eq(got[t], 10 * j + 5);
                ck_assert_uint_eq(gv[t], 3 * j);
            }
        } else {
            size_t rn;
            const uint8_t *res = floe_call_results(calls[i], &rn);
            ck_assert_uint_eq(rn, 2);
            ck_assert_uint_eq(kb, 16);
            if (i % 3 == 0) { /* successor: x rounded up to 10j + 5; none above the last key */
                const uint64_t j = (x + 4) / 10;
                ck_assert_uint_eq(res[0], FLOE_PRESENT);
                ck_assert_uint_eq(got[0], 10 * j + 5);
                ck_assert_uint_eq(gv[0], 3 * j);
                ck_assert_uint_eq(res[1], FLOE_ABSENT);
            } else { /* predecessor: none below 5; the last key for 100000 */
                ck_assert_uint_eq(res[0], x < 5 ? FLOE_ABSENT : FLOE_PRESENT);
                if (x >= 5)
                    ck_assert_uint_eq(got[0], 10 * ((x - 5) / 10) + 5);
                ck_assert_uint_eq(res[1], FLOE_PRESENT);
                ck_assert_uint_eq(got[1], 10 * (N - 1) + 5);
                ck_assert_uint_eq(gv[1], 3 * (N - 1));
            }
        }
        floe_call_free(calls[i]);
    }
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* ---- refused requests, each changing nothing ---- */

/* The keys of table t, in order (at most 64). */
static size_t contents(floe *c, const char *t, uint64_t *keys)
{
    floe_cursor cur = {{0}, 0};
    size_t n;
    int done;
    ck_assert_int_eq(floe_scan(c, t, &cur, 64, keys, NULL, 0, &n, &done), FLOE_OK);
    ck_assert(done);
    return n;
}

START_TEST(ordered_refusals)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    floe *c = connect_ok(&d);
    create_ordered(c, "o", 20, 8);
    create_ordered(c, "o2", 20, 8);
    floe_table_def sd = {.name = "s", .kind = FLOE_TABLE_SET, .key_bits = 20};
    ck_assert_int_eq(floe_create(c, &sd), FLOE_OK);
    uint64_t keys[3] = {100, 200, 300}, vals[3] = {1, 2, 3}, before[64], after[64];
    ck_assert_int_eq(floe_insert_values(c, "o", keys, vals, 3, 8, 0, NULL, NULL, NULL), FLOE_OK);
    ck_assert_int_eq(floe_insert_values(c, "o2", keys, vals, 3, 8, 0, NULL, NULL, NULL), FLOE_OK);
    ck_assert_int_eq(floe_insert(c, "s", keys, 3, NULL, NULL), FLOE_OK);
    const size_t nb = contents(c, "o", before);

    /* specs */
    floe_table_def bad = {.name = "b", .kind = FLOE_TABLE_ORDERED, .value_bytes = 3};
    ck_assert_int_eq(floe_create(c, &bad), FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(floe_errstr(c), "value_bytes is 0 (keys only), 4 or 8"));
    bad = (floe_table_def){.name = "b", .kind = FLOE_TABLE_ORDERED, .no_grow = 1};
    ck_assert_int_eq(floe_create(c, &bad), FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(floe_errstr(c), "always grows"));
    bad = (floe_table_def){.name = "b", .kind = FLOE_TABLE_ORDERED, .words = 4};
    ck_assert_int_eq(floe_create(c, &bad), FLOE_ERR_INVALID);

    int fd = raw_connect(d.port);
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Range rg = FLOE__V1__RANGE__INIT;
    req.op_case = FLOE__V1__REQUEST__OP_RANGE;
    req.range = &rg;
    /* a range over a SET, or of no table */
    rg.table = "s", rg.from = 0, rg.to = 1000;
    expect_status(raw_call(fd, &req, 1), FLOE_ERR_UNSUPPORTED, "range is for ORDERED tables; table s is a SET",
                  "range of a SET");
    rg.table = "nope";
    expect_status(raw_call(fd, &req, 2), FLOE_ERR_NO_TABLE, "no table nope", "range of no table");
    /* bounds */
    rg.table = "o", rg.from = 500, rg.to = 400;
    expect_status(raw_call(fd, &req, 3), FLOE_ERR_INVALID, "lower bound 500 is above its upper bound 400", "lo > hi");
    rg.from = 0, rg.to = 1u << 20;
    expect_status(raw_call(fd, &req, 4), FLOE_ERR_INVALID, "does not fit in key_bits = 20", "hi too wide");
    /* cursors: of another table, of other bounds or direction, not a cursor */
    floe_range_cursor cur;
    memset(&cur, 0, sizeof cur);
    size_t n;
    int done;
    uint64_t got[4];
    ck_assert_int_eq(floe_range(c, "o", 0, 1000, 0, &cur, 1, got, NULL, 8, &n, &done), FLOE_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(got[0], 100);
    ck_assert(!done);
    floe_range_cursor other = cur;
    ck_assert_int_eq(floe_range(c, "o2", 0, 1000, 0, &other, 1, got, NULL, 8, &n, &done), FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(floe_errstr(c), "not one of this range"));
    other = cur;
    ck_assert_int_eq(floe_range(c, "o", 0, 999, 0, &other, 1, got, NULL, 8, &n, &done), FLOE_ERR_INVALID);
    other = cur;
    ck_assert_int_eq(floe_range(c, "o", 0, 1000, FLOE_RANGE_DESC, &other, 1, got, NULL, 8, &n, &done),
                     FLOE_ERR_INVALID);
    rg.table = "o", rg.from = 0, rg.to = 1000;
    rg.cursor.data = (uint8_t *)"0123456789abcdef";
    rg.cursor.len = 16;
    expect_status(raw_call(fd, &req, 5), FLOE_ERR_INVALID, "a range cursor is empty", "a scan's cursor");
    rg.cursor.len = 0;
    rg.want_values = 1, rg.table = "s";
    expect_status(raw_call(fd, &req, 6), FLOE_ERR_UNSUPPORTED, NULL, "values of a SET's range");
    /* the cursor still continues its own range */
    ck_assert_int_eq(floe_range(c, "o", 0, 1000, 0, &cur, 5, got, NULL, 8, &n, &done), FLOE_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(got[0], 200);
    ck_assert_uint_eq(got[1], 300);
    ck_assert(done);
    /* a cursor of a table dropped and made again */
    memset(&cur, 0, sizeof cur);
    ck_assert_int_eq(floe_range(c, "o2", 0, 1000, 0, &cur, 1, got, NULL, 8, &n, &done), FLOE_OK);
    ck_assert_int_eq(floe_drop(c, "o2"), FLOE_OK);
    create_ordered(c, "o2", 20, 8);
    ck_assert_int_eq(floe_insert_values(c, "o2", keys, vals, 3, 8, 0, NULL, NULL, NULL), FLOE_OK);
    ck_assert_int_eq(floe_range(c, "o2", 0, 1000, 0, &cur, 1, got, NULL, 8, &n, &done), FLOE_ERR_INVALID);

    /* neighbours and bounds of another kind; keys too wide */
    uint8_t res[3];
    uint64_t found[3];
    ck_assert_int_eq(floe_successor(c, "s", keys, 3, res, found, NULL, 0), FLOE_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(floe_errstr(c), "successor is for ORDERED tables"));
    ck_assert_int_eq(floe_predecessor(c, "s", keys, 3, res, found, NULL, 0), FLOE_ERR_UNSUPPORTED);
    int some;
    uint64_t k;
    ck_assert_int_eq(floe_min(c, "s", &some, &k, NULL, 0), FLOE_ERR_UNSUPPORTED);
    ck_assert_int_eq(floe_max(c, "nope", &some, &k, NULL, 0), FLOE_ERR_NO_TABLE);
    uint64_t wide[2] = {5, 1u << 20};
    ck_assert_int_eq(floe_successor(c, "o", wide, 2, res, found, NULL, 0), FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(floe_errstr(c), "key 1048576 at index 1 does not fit in key_bits = 20"));
    ck_assert_int_eq(floe_insert_values(c, "o", wide, vals, 2, 8, 0, NULL, NULL, NULL), FLOE_ERR_INVALID);
    /* what an ORDERED table does not do */
    ck_assert_int_eq(floe_get_by_id(c, "o", keys, 1, 3, NULL, NULL), FLOE_ERR_UNSUPPORTED);
    floe_call *call = floe_send_find(c, "o", keys, 3, FLOE_WANT_IDS, NULL, NULL);
    ck_assert_int_eq(floe_wait(c, call), FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(floe_call_error(call), "its keys have no slot ids"));
    floe_call_free(call);
    ck_assert_int_eq(floe_insert_values(c, "o", keys, vals, 3, 4, 0, NULL, NULL, NULL), FLOE_ERR_INVALID);
    create_ordered(c, "k", 20, 0);
    ck_assert_int_eq(floe_insert_values(c, "k", keys, vals, 3, 8, 0, NULL, NULL, NULL), FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(floe_errstr(c), "ORDERED table of value_bytes 0: it stores keys only"));

    ck_assert_uint_eq(contents(c, "o", after), nb);
    ck_assert_mem_eq(after, before, nb * 8);
    close(fd);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(ordered_survives_restart)
{
    char dir[] = "/tmp/floe-ordered-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const char *flags[] = {"--data-dir", dir, NULL};
    daemon_proc d;
    daemon_start(&d, flags);
    floe *c = connect_ok(&d);
    create_ordered(c, "keep", 64, 4);
    ref r = {0};
    uint64_t rng = 99, keys[5000];
    uint32_t vals[5000];
    for (int i = 0; i < 5000; i++)
        keys[i] = rng_next(&rng), vals[i] = (uint32_t)rng_next(&rng);
    run_checked(c, "keep", &r, 0, keys, (const uint8_t *)vals, 5000, 4);
    run_checked(c, "keep", &r, 3, keys + 1000, NULL, 500, 4);
    ck_assert_int_eq(floe_snapshot(c, "keep"), FLOE_OK);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);

    daemon_start(&d, flags);
    c = connect_ok(&d);
    check_queries(c, "keep", &r, 64, 4, &rng, true);
    run_checked(c, "keep", &r, 0, keys + 900, (const uint8_t *)(vals + 900), 300, 4); /* and it goes on */
    check_queries(c, "keep", &r, 64, 4, &rng, true);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGINT), 0);
    ref_free(&r);
    char path[256];
    snprintf(path, sizeof path, "%s/keep.floe", dir);
    unlink(path);
    rmdir(dir);
}
END_TEST

START_TEST(ordered_cli)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    expect_cli(&d, NULL, 0, "created o",
               ARGS("create", "o", "--kind", "ordered", "--key-bits", "40", "--value-bytes", "8"));
    expect_cli(&d, NULL, 0, "created k", ARGS("create", "k", "--kind", "ORDERED"));
    expect_cli(&d, NULL, 2, NULL, ARGS("create", "x", "--kind", "sorted"));
    expect_cli(&d, NULL, 2, NULL, ARGS("create", "x", "--kind", "ordered", "--value-bytes", "2")); /* a usage error */
    expect_cli(&d, NULL, 0, "9 INSERTED 90\n", ARGS("insert", "o", "5=50", "3=30", "9=90", "7=70"));
    expect_cli(&d, "12 120\n1=10\n", 0, "1 INSERTED 10", ARGS("insert", "o"));
    expect_cli(&d, NULL, 0, "1 10\n3 30\n5 50\n7 70\n9 90\n12 120\n", ARGS("dump", "o", "--values"));
    expect_cli(&d, NULL, 0, "3\n5\n7\n9\n", ARGS("range", "o", "2", "10"));
    expect_cli(&d, NULL, 0, "12 120\n9 90\n", ARGS("range", "o", "0", "100", "--desc", "--values", "--limit", "2"));
    expect_cli(&d, NULL, 0, "", ARGS("range", "o", "13", "0xff")); /* an empty range */
    expect_cli(&d, NULL, 0, "0 1 10\n4 5 50\n12 12 120\n13 none\n",
               ARGS("succ", "o", "0", "4", "12", "13", "--values"));
    expect_cli(&d, "0\n4\n1099511627775\n", 0, "0 none\n4 3\n1099511627775 12\n", ARGS("pred", "o"));
    expect_cli(&d, NULL, 0, "1\n", ARGS("min", "o"));
    expect_cli(&d, NULL, 0, "12 120\n", ARGS("max", "o", "--values"));
    expect_cli(&d, NULL, 1, "", ARGS("min", "k")); /* empty: a message on stderr */
    expect_cli(&d, NULL, 0, "kind: ORDERED\nkey_bits: 40\nvalue_bytes: 8\n", ARGS("stats", "o"));
    expect_cli(&d, NULL, 0, "keys: 6\n", ARGS("stats", "o"));
    /* usage errors and refusals */
    expect_cli(&d, NULL, 2, NULL, ARGS("range", "o", "10", "2"));
    expect_cli(&d, NULL, 2, NULL, ARGS("range", "o", "0", "1099511627776"));
    expect_cli(&d, NULL, 2, NULL, ARGS("range", "o", "0", "10", "--limit", "0"));
    expect_cli(&d, NULL, 2, NULL, ARGS("range", "k", "0", "10", "--values"));
    expect_cli(&d, NULL, 2, NULL, ARGS("succ", "o", "--desc", "1"));
    expect_cli(&d, NULL, 2, NULL, ARGS("succ", "o", "1099511627776")); /* wider than the table: a usage error */
    expect_cli(&d, NULL, 0, "created s", ARGS("create", "s"));
    /* each command named in its own words, and a TREE's bounds not checked against a key width it lacks */
    expect_cli2(&d, NULL, 1, NULL, "ERR_UNSUPPORTED: range is for ORDERED tables; table s is a SET",
                ARGS("range", "s", "0", "10"));
    expect_cli2(&d, NULL, 1, NULL, "ERR_UNSUPPORTED: pred is for ORDERED tables; table s is a SET",
                ARGS("pred", "s", "1"));
    expect_cli2(&d, NULL, 1, NULL, "ERR_UNSUPPORTED: min is for ORDERED tables; table s is a SET", ARGS("min", "s"));
    expect_cli2(&d, NULL, 1, NULL, "ERR_UNSUPPORTED: max is for ORDERED tables; table s is a SET", ARGS("max", "s"));
    expect_cli(&d, NULL, 0, "created t", ARGS("create", "t", "--kind", "tree", "--words", "4"));
    expect_cli2(&d, NULL, 1, NULL, "ERR_UNSUPPORTED: range is for ORDERED tables; table t is a TREE",
                ARGS("range", "t", "1", "5"));
    expect_cli2(&d, NULL, 1, NULL, "ERR_UNSUPPORTED: succ is for ORDERED tables; table t is a TREE",
                ARGS("succ", "t", "1"));
    expect_cli(&d, NULL, 0, "3 ERASED\n4 ABSENT\n", ARGS("erase", "o", "3", "4"));
    expect_cli(&d, NULL, 0, "1\n5\n", ARGS("range", "o", "0", "6"));
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

Suite *ordered_suite(void)
{
    Suite *s = suite_create("ordered");
    TCase *tc = tcase_create("ordered");
    tcase_set_timeout(tc, 180);
    tcase_add_loop_test(tc, ordered_over_the_wire, 0, 2 * (int)(sizeof WIDTHS / sizeof *WIDTHS));
    tcase_add_test(tc, ordered_concurrent);
    tcase_add_test(tc, ordered_pipelined);
    tcase_add_test(tc, ordered_refusals);
    tcase_add_test(tc, ordered_survives_restart);
    tcase_add_test(tc, ordered_cli);
    suite_add_tcase(s, tc);
    return s;
}
