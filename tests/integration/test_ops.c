/*
 * test_ops.c - every operation end to end through libfloe, against a model.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include "harness.h"

static void create_set(floe *c, const char *name, unsigned key_bits, uint64_t capacity, int grow)
{
    floe_table_def d = {.name = name, .kind = FLOE_TABLE_SET, .key_bits = key_bits, .capacity = capacity, .grow = grow};
    ck_assert_msg(floe_create(c, &d) == FLOE_OK, "create %s: %s", name, floe_errstr(c));
}

START_TEST(every_operation)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    floe *c = connect_ok(&d);
    ck_assert_int_eq(floe_ping(c), FLOE_OK);
    ck_assert_str_eq(floe_info(c)->backend, expected_backend());
    ck_assert_uint_eq(floe_info(c)->version, 1);
    ck_assert(strncmp(floe_info(c)->server, "floed ", 6) == 0);

    create_set(c, "s", 40, 10000, 0);
    floe_table_def md = {.name = "m", .kind = FLOE_TABLE_MAP, .key_bits = 32, .value_bytes = 8, .capacity = 1000};
    ck_assert_int_eq(floe_create(c, &md), FLOE_OK);
    ck_assert_int_eq(floe_create(c, &md), FLOE_ERR_EXISTS);

    /* insert: first occurrence wins inside a request */
    uint64_t keys[5] = {7, 8, 7, 1ull << 39, 0};
    uint8_t res[5];
    floe_counts k;
    ck_assert_int_eq(floe_insert(c, "s", keys, 5, res, &k), FLOE_OK);
    const uint8_t want[5] = {FLOE_INSERTED, FLOE_INSERTED, FLOE_PRESENT, FLOE_INSERTED, FLOE_INSERTED};
    ck_assert_mem_eq(res, want, 5);
    ck_assert_uint_eq(k.inserted, 4);
    ck_assert_uint_eq(k.present, 1);
    uint64_t q[3] = {7, 9, 0};
    ck_assert_int_eq(floe_find(c, "s", q, 3, res, NULL, 0, &k), FLOE_OK);
    ck_assert_uint_eq(res[0], FLOE_PRESENT);
    ck_assert_uint_eq(res[1], FLOE_ABSENT);
    ck_assert_uint_eq(res[2], FLOE_PRESENT);
    ck_assert_int_eq(floe_erase(c, "s", q, 2, res, &k), FLOE_OK);
    ck_assert_uint_eq(res[0], FLOE_ERASED);
    ck_assert_uint_eq(res[1], FLOE_ABSENT);
    ck_assert_uint_eq(k.erased, 1);

    /* MAP: values, upsert, find with values */
    uint64_t mk[3] = {1, 2, 1};
    uint64_t mv[3] = {10, 20, 30}, old[3];
    ck_assert_int_eq(floe_insert_values(c, "m", mk, mv, 3, 8, 0, res, old, &k), FLOE_OK);
    ck_assert_uint_eq(res[0], FLOE_INSERTED);
    ck_assert_uint_eq(res[2], FLOE_PRESENT);
    ck_assert_uint_eq(old[2], 10);
    uint64_t up[1] = {1}, upv[1] = {99};
    ck_assert_int_eq(floe_insert_values(c, "m", up, upv, 1, 8, 1, res, old, &k), FLOE_OK);
    ck_assert_uint_eq(res[0], FLOE_PRESENT);
    ck_assert_uint_eq(old[0], 10);
    uint64_t got[3];
    uint64_t mq[3] = {1, 2, 3};
    ck_assert_int_eq(floe_find(c, "m", mq, 3, res, got, 8, &k), FLOE_OK);
    ck_assert_uint_eq(got[0], 99);
    ck_assert_uint_eq(got[1], 20);
    ck_assert_uint_eq(res[2], FLOE_ABSENT);

    /* stats and list */
    floe_table_info info;
    ck_assert_int_eq(floe_stats(c, "s", &info), FLOE_OK);
    ck_assert_str_eq(info.name, "s");
    ck_assert_uint_eq(info.keys, 3);
    ck_assert_uint_eq(info.tombstones, 1);
    ck_assert_uint_eq(info.key_bits, 40);
    ck_assert_uint_gt(info.memory_bytes, 0);
    ck_assert_uint_eq(info.n_parts, harness_parts());
    if (harness_parts()) { /* each part a whole table with its share of the capacity: its rows are its own */
        uint64_t pkeys = 0, slots = 0;
        bool one_device = true; /* the table's device, or -1 for parts on several */
        for (unsigned p = 0; p < info.n_parts; p++) {
            pkeys += info.parts[p].keys;
            slots += info.parts[p].slots;
            one_device = one_device && info.parts[p].device == info.parts[0].device;
        }
        ck_assert_int_eq(info.device, one_device ? info.parts[0].device : -1);
        ck_assert_uint_eq(pkeys, info.keys);
        ck_assert_uint_eq(slots, info.slots);
    } else {
        ck_assert_uint_eq(info.level[0].row_bits, 32);
    }
    floe_table_info *all;
    size_t n;
    ck_assert_int_eq(floe_tables(c, &all, &n), FLOE_OK);
    ck_assert_uint_eq(n, 2);
    free(all);

    /* scan in small pages returns every key once */
    floe_cursor cur = {{0}, 0};
    uint64_t page[2], seen = 0;
    int done = 0, pages = 0;
    while (!done) {
        ck_assert_int_eq(floe_scan(c, "s", &cur, 2, page, NULL, 0, &n, &done), FLOE_OK);
        for (size_t i = 0; i < n; i++)
            seen += page[i] == 8 || page[i] == (1ull << 39) || page[i] == 0;
        pages++;
    }
    ck_assert_uint_eq(seen, 3);
    uint64_t vals[2];
    cur.started = 0;
    ck_assert_int_eq(floe_scan(c, "m", &cur, 2, page, vals, 8, &n, &done), FLOE_OK);

    /* get_by_id is for TREE tables (test_tree.c) */
    uint32_t vec[2];
    ck_assert_int_eq(floe_get_by_id(c, "s", q, 1, 2, res, vec), FLOE_ERR_UNSUPPORTED);
    ck_assert_int_eq(floe_drop(c, "m"), FLOE_OK);
    ck_assert_int_eq(floe_drop(c, "m"), FLOE_ERR_NO_TABLE);
    ck_assert_int_eq(floe_find(c, "m", mq, 1, res, NULL, 0, NULL), FLOE_ERR_NO_TABLE);
    ck_assert_int_eq(floe_snapshot(c, NULL), FLOE_ERR_UNSUPPORTED); /* no data-dir */
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* Requests pipelined without waiting: insert then find of the same keys on
 * one connection must see the insert (per-connection order). */
START_TEST(pipelined_order)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    floe *c = connect_ok(&d);
    create_set(c, "p", 64, 100000, 0);
    enum { R = 100, K = 500 };
    static uint64_t keys[R][K];
    floe_call *ins[R], *fnd[R];
    for (int r = 0; r < R; r++) {
        for (int i = 0; i < K; i++)
            keys[r][i] = (uint64_t)r * 1000003 + (uint64_t)i * 7919 + 1;
        ins[r] = floe_send_insert(c, "p", keys[r], K, NULL, 0, 0, NULL, NULL);
        fnd[r] = floe_send_find(c, "p", keys[r], K, 0, NULL, NULL);
    }
    ck_assert_uint_ge(floe_inflight(c), 64); /* many in flight before any answer is read */
    for (int r = 0; r < R; r++) {
        ck_assert_int_eq(floe_wait(c, ins[r]), FLOE_OK);
        ck_assert_int_eq(floe_wait(c, fnd[r]), FLOE_OK);
        size_t n;
        const uint8_t *a = floe_call_results(ins[r], &n);
        ck_assert_uint_eq(n, K);
        for (int i = 0; i < K; i++)
            ck_assert_uint_eq(a[i], FLOE_INSERTED);
        const uint8_t *b = floe_call_results(fnd[r], &n);
        for (int i = 0; i < K; i++)
            ck_assert_msg(b[i] == FLOE_PRESENT, "pipelined find %d/%d did not see its insert", r, i);
        floe_call_free(ins[r]);
        floe_call_free(fnd[r]);
    }
    /* erase then insert, pipelined: INSERTED again */
    floe_call *e = floe_send_erase(c, "p", keys[0], K, NULL, NULL);
    floe_call *i2 = floe_send_insert(c, "p", keys[0], K, NULL, 0, FLOE_WANT_IDS, NULL, NULL);
    ck_assert_int_eq(floe_wait(c, e), FLOE_OK);
    ck_assert_int_eq(floe_wait(c, i2), FLOE_OK);
    floe_counts k;
    floe_call_counts(e, &k);
    ck_assert_uint_eq(k.erased, K);
    floe_call_counts(i2, &k);
    ck_assert_uint_eq(k.inserted, K);
    size_t idb;
    floe_call_ids(i2, &idb);
    ck_assert_uint_eq(idb, K * 8);
    floe_call_free(e);
    floe_call_free(i2);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

static void count_cb(floe *c, floe_call *call, void *arg)
{
    (void)c;
    int *done = arg;
    if (floe_call_status(call) == FLOE_OK)
        (*done)++;
}

typedef struct batch_seen {
    uint64_t answered, inserted, present, bad_tag;
} batch_seen;

static void on_batch(void *arg, int status, const uint64_t *keys, const uint64_t *tags, const uint8_t *results,
                     size_t n)
{
    batch_seen *s = arg;
    ck_assert_int_eq(status, FLOE_OK);
    for (size_t i = 0; i < n; i++) {
        s->answered++;
        s->inserted += results[i] == FLOE_INSERTED;
        s->present += results[i] == FLOE_PRESENT;
        s->bad_tag += tags[i] != keys[i] * 3;
    }
}

/* A callback that sends the next request on the same connection, until
 * its count runs out: while the answers that arrived together are being
 * handled. */
typedef struct chain {
    floe *c;
    int left, done, failed;
} chain;

static void chain_cb(floe *c, floe_call *call, void *arg)
{
    chain *ch = arg;
    ch->done++;
    ch->failed += floe_call_status(call) != FLOE_OK;
    if (ch->left > 0) {
        ch->left--;
        uint64_t key = ((uint64_t)1 << 50) + (uint64_t)ch->left; /* none of the batcher's keys below */
        floe_send_insert(c, "b", &key, 1, NULL, 0, 0, chain_cb, ch);
    }
}

START_TEST(callbacks_and_batcher)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    floe *c = connect_ok(&d);
    create_set(c, "b", 64, 1000000, 1);
    int done = 0;
    uint64_t key = 42;
    for (int i = 0; i < 80; i++)
        ck_assert_ptr_nonnull(floe_send_insert(c, "b", &key, 1, NULL, 0, 0, count_cb, &done));
    ck_assert_int_eq(floe_wait_all(c), FLOE_OK);
    ck_assert_int_eq(done, 80);
    /* 64 chains of requests, each sent from the callback of the one before: many answers in
     * one read, each of whose callbacks sends (and, before the fix, read the socket again under
     * the frames being handled) */
    chain ch = {c, 20000, 0, 0};
    for (int i = 0; i < 64; i++) {
        uint64_t k = ((uint64_t)1 << 51) + (uint64_t)i;
        ck_assert_ptr_nonnull(floe_send_insert(c, "b", &k, 1, NULL, 0, 0, chain_cb, &ch));
    }
    ck_assert_int_eq(floe_wait_all(c), FLOE_OK);
    ck_assert_int_eq(ch.done, 64 + 20000);
    ck_assert_int_eq(ch.failed, 0);

    /* the batcher: 200k single keys, half of them twice */
    batch_seen s = {0};
    floe_batcher *b = floe_batcher_new(c, "b", FLOE_BATCH_INSERT, 10000, 4, on_batch, &s);
    ck_assert_ptr_nonnull(b);
    for (uint64_t i = 0; i < 200000; i++) {
        uint64_t k = (i % 2) ? i / 4 + 1000 : i + 1000000; /* odd i: each key twice */
        ck_assert_int_eq(floe_batcher_add(b, k, k * 3), FLOE_OK);
    }
    ck_assert_int_eq(floe_batcher_finish(b), FLOE_OK);
    floe_batcher_free(b);
    ck_assert_uint_eq(s.answered, 200000);
    ck_assert_uint_eq(s.bad_tag, 0);
    /* 100000 distinct keys, and 50000 keys twice each */
    ck_assert_uint_eq(s.inserted, 150000);
    ck_assert_uint_eq(s.present, 50000);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* Large frames (read straight from the socket into their buffers, past
 * libevent's 4 KiB reads) and a small one between them, sent back to back
 * in pieces of odd sizes with pauses, so that floed meets each frame cut
 * anywhere: every answer as a reference set says, in order. */
START_TEST(large_frames_in_pieces)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    floe *c = connect_ok(&d);
    create_set(c, "f", 40, 1000000, 1);
    enum { NA = 100000, NB = 10, NC = 70000 };
    uint64_t *a = malloc(NA * 8), b[NB], *cc = malloc(NC * 8);
    for (size_t i = 0; i < NA; i++)
        a[i] = i; /* 0 .. 99999 */
    b[0] = 5;
    for (size_t i = 1; i < NB; i++)
        b[i] = NA + i; /* 100001 .. 100009 */
    for (size_t i = 0; i < NC; i++)
        cc[i] = 50000 + i; /* 50000 .. 119999 */
    unsigned char *buf = malloc((NA + NB + NC) * 8 + 1024);
    size_t len = raw_insert_frame(buf, 1, "f", a, NA);
    len += raw_insert_frame(buf + len, 2, "f", b, NB);
    len += raw_insert_frame(buf + len, 3, "f", cc, NC);
    const size_t cuts[] = {1, 3, 300, 4095, 7, 65536, 2, 100000, 4096, 13};
    int fd = raw_connect(d.port);
    for (size_t at = 0, k = 0; at < len; k++) {
        size_t m = cuts[k % (sizeof cuts / sizeof *cuts)];
        if (m > len - at)
            m = len - at;
        raw_send(fd, buf + at, m);
        at += m;
        if (k % 3 == 0)
            usleep(2000); /* let floed read what came so far */
    }
    /* the answers, from a reference set of the keys sent before each */
    const uint64_t *sent[3] = {a, b, cc};
    const size_t ns[3] = {NA, NB, NC};
    bool *seen = calloc(200000, 1);
    for (int r = 0; r < 3; r++) {
        Floe__V1__Response *resp = raw_read_response(fd, 10000);
        ck_assert_ptr_nonnull(resp);
        ck_assert_uint_eq(resp->id, (uint64_t)r + 1);
        ck_assert_int_eq(resp->status, FLOE_OK);
        ck_assert_uint_eq(resp->results.len, ns[r]);
        for (size_t i = 0; i < ns[r]; i++) {
            const uint64_t k = sent[r][i];
            ck_assert_msg(resp->results.data[i] == (seen[k] ? FLOE_PRESENT : FLOE_INSERTED),
                          "request %d key %zu (%llu): answer %u", r + 1, i, (unsigned long long)k,
                          resp->results.data[i]);
            seen[k] = true;
        }
        floe__v1__response__free_unpacked(resp, NULL);
    }
    floe_table_info info;
    ck_assert_int_eq(floe_stats(c, "f", &info), FLOE_OK);
    ck_assert_uint_eq(info.keys, 120000); /* 0 .. 119999: B's keys are among them */
    close(fd);
    free(seen);
    free(buf);
    free(a);
    free(cc);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

Suite *ops_suite(void)
{
    Suite *s = suite_create("ops");
    TCase *tc = tcase_create("ops");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, every_operation);
    tcase_add_test(tc, pipelined_order);
    tcase_add_test(tc, callbacks_and_batcher);
    tcase_add_test(tc, large_frames_in_pieces);
    suite_add_tcase(s, tc);
    return s;
}
