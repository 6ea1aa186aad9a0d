/*
 * test_faults.c - fault injection in the engine (tables/alloc.h), as SQLite
 * tests its malloc failures: a run of backend start, create, inserts (a SET
 * or MAP that grows on the way, a TREE), find, erase, scan, save and load is
 * repeated with its 1st, 2nd, ... Nth allocation failing, until a run makes
 * no allocation that fails.  Every failure must come back as an error status
 * with a message; nothing may crash or leak (the tests run under ASan); and
 * after each run the tables must answer exactly: every key a successful
 * request stored is there, no key that was never sent is, and a scan sees
 * what finds see.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "backend.h"
#include "testutil.h"

enum { KEYS = 3000, WORDS = 4 };

/* What the run knows of each key: never sent, surely stored, or maybe (its request failed). */
enum { NEVER = 0, SURE = 1, MAYBE = 2, GONE = 3 };

typedef struct run {
    int kind;
    uint64_t keys[KEYS]; /* SET, MAP: the keys; TREE: vector i is vec[i] */
    uint32_t vec[KEYS][WORDS];
    uint8_t state[KEYS];
    int failures; /* steps that reported the injected failure */
} run;

static bool check_failure(run *r, floe_status st, const floe_errinfo *err, const char *step)
{
    if (st == FLOE_OK)
        return true;
    ck_assert_msg(floe_alloc_failed(), "%s failed with no injected failure: %s", step, err->msg);
    ck_assert_msg(st == FLOE_ERR_INTERNAL || st == FLOE_ERR_FULL, "%s: status %d for an allocation failure", step,
                  (int)st);
    ck_assert_msg(err->msg[0] != '\0', "%s: an error without a message", step);
    r->failures++;
    return false;
}

/* Keys i in [from, to) into the table: answers checked, the model updated. */
static void insert(run *r, floe_table *t, size_t from, size_t to)
{
    const size_t n = to - from;
    uint8_t *res = malloc(n);
    uint64_t vals[KEYS];
    floe_batch b = {.op = FLOE_OP_INSERT, .n = n, .results = res};
    if (r->kind == FLOE_KIND_TREE) {
        b.vectors = r->vec[from];
    } else {
        b.keys = r->keys + from;
        if (r->kind == FLOE_KIND_MAP) {
            for (size_t i = 0; i < n; i++)
                vals[i] = r->keys[from + i] ^ 0x5555;
            b.values = vals;
            b.values_len = n * 8;
        }
    }
    floe_status st = floe_table_run(t, &b);
    if (check_failure(r, st, &b.error, "insert")) {
        for (size_t i = 0; i < n; i++) {
            ck_assert_msg(res[i] == FLOE_INSERTED || res[i] == FLOE_PRESENT, "key %zu answered %d", from + i, res[i]);
            if (res[i] == FLOE_PRESENT) /* present before: a key this run sent earlier */
                ck_assert_msg(r->state[from + i] != NEVER, "key %zu PRESENT but never stored", from + i);
            r->state[from + i] = SURE;
        }
    } else {
        for (size_t i = from; i < to; i++)
            if (r->state[i] == NEVER)
                r->state[i] = MAYBE;
    }
    free(res);
}

/* Every key against the model; keys[KEYS..] never sent are absent.  A failed find is a failure. */
static void verify(run *r, floe_table *t, const char *when)
{
    static uint8_t res[2 * KEYS];
    static uint64_t keys[2 * KEYS];
    static uint32_t vec[2 * KEYS][WORDS];
    for (size_t i = 0; i < 2 * KEYS; i++) {
        if (r->kind == FLOE_KIND_TREE) {
            memcpy(vec[i], r->vec[i % KEYS], sizeof vec[i]);
            if (i >= KEYS)
                vec[i][3] ^= 0x80000000u; /* a vector no run sends */
        } else {
            keys[i] = i < KEYS ? r->keys[i] : r->keys[i - KEYS] ^ ((uint64_t)1 << 39);
        }
    }
    floe_batch b = {.op = FLOE_OP_FIND, .n = 2 * KEYS, .results = res};
    if (r->kind == FLOE_KIND_TREE)
        b.vectors = vec[0];
    else
        b.keys = keys;
    floe_status st = floe_table_run(t, &b);
    if (!check_failure(r, st, &b.error, when))
        return;
    for (size_t i = 0; i < 2 * KEYS; i++) {
        const int s = i < KEYS ? r->state[i] : NEVER;
        if (s == SURE)
            ck_assert_msg(res[i] == FLOE_PRESENT, "%s: stored key %zu is %d", when, i, res[i]);
        else if (s == NEVER || s == GONE)
            ck_assert_msg(res[i] == FLOE_ABSENT, "%s: key %zu (state %d) is present", when, i, s);
        else
            ck_assert(res[i] == FLOE_PRESENT || res[i] == FLOE_ABSENT);
        if (i < KEYS && s == MAYBE) /* settle it, so that the next steps know */
            r->state[i] = res[i] == FLOE_PRESENT ? SURE : NEVER;
    }
}

static void erase_some(run *r, floe_table *t)
{
    if (r->kind == FLOE_KIND_TREE)
        return; /* a TREE does not erase */
    enum { E = 200 };
    uint8_t res[E];
    floe_batch b = {.op = FLOE_OP_ERASE, .keys = r->keys, .n = E, .results = res};
    floe_status st = floe_table_run(t, &b);
    if (check_failure(r, st, &b.error, "erase")) {
        for (size_t i = 0; i < E; i++) {
            if (r->state[i] == SURE)
                ck_assert_msg(res[i] == FLOE_ERASED, "erase of stored key %zu: %d", i, res[i]);
            r->state[i] = GONE;
        }
    } else {
        for (size_t i = 0; i < E; i++)
            if (r->state[i] == SURE)
                r->state[i] = MAYBE; /* erased or not */
    }
}

/* A scan sees exactly the stored keys (it runs after verify, with no MAYBE left but failed erases). */
static void scan_all(run *r, floe_table *t)
{
    uint64_t sk[512];
    uint32_t sv[512 * WORDS];
    uint64_t vals[512];
    size_t seen = 0, sure = 0;
    for (size_t i = 0; i < KEYS; i++)
        sure += r->state[i] == SURE;
    floe_batch b = {.op = FLOE_OP_SCAN, .limit = 512, .scan_keys = sk};
    if (r->kind == FLOE_KIND_TREE)
        b.scan_vectors = sv;
    if (r->kind == FLOE_KIND_MAP) {
        b.flags = FLOE_BATCH_WANT_VALUES;
        b.scan_values = vals;
    }
    do {
        floe_status st = floe_table_run(t, &b);
        if (!check_failure(r, st, &b.error, "scan"))
            return;
        seen += b.scan_n;
        b.cursor = b.next;
        b.cursor_set = 1;
    } while (!b.scan_done);
    size_t maybe = 0;
    for (size_t i = 0; i < KEYS; i++)
        maybe += r->state[i] == MAYBE;
    ck_assert_msg(seen >= sure && seen <= sure + maybe, "scan saw %zu keys; %zu stored, %zu maybe", seen, sure, maybe);
}

static floe_spec spec_of(int kind)
{
    floe_spec s;
    floe_spec_default(&s);
    snprintf(s.name, sizeof s.name, "faults");
    strcpy(s.backend, "cpu");
    s.kind = kind;
    if (kind == FLOE_KIND_TREE) {
        s.key_bits = 0;
        s.words = WORDS;
        s.capacity = 2 * KEYS;
    } else {
        s.key_bits = 40;
        s.value_bytes = kind == FLOE_KIND_MAP ? 8 : 0;
        s.capacity = 1024; /* grows twice on the way to 3000 keys */
        s.grow = 1;
    }
    return s;
}

/* One run with the nth allocation failing (0: none); returns whether an allocation failed. */
static bool one_run(int kind, uint64_t nth, const char *path)
{
    static run r;
    memset(&r, 0, sizeof r);
    r.kind = kind;
    uint64_t seed = 99;
    for (size_t i = 0; i < KEYS; i++) {
        r.keys[i] = rng_next(&seed) & (((uint64_t)1 << 39) - 1);
        for (int w = 0; w < WORDS; w++)
            r.vec[i][w] = (uint32_t)(i % 17) + (w == 3 ? (uint32_t)i * 7 : 0);
    }
    unlink(path);
    floe_alloc_fail_nth(nth);
    floe_errinfo err;
    floe_errinfo_clear(&err);
    floe_backend *be = NULL;
    floe_table *t = NULL, *loaded = NULL;
    floe_status st = floe_backend_cpu_create(2, &be, &err);
    if (check_failure(&r, st, &err, "backend")) {
        floe_spec s = spec_of(kind);
        st = floe_table_create(be, &s, &t, &err);
        if (check_failure(&r, st, &err, "create")) {
            insert(&r, t, 0, KEYS / 2);
            insert(&r, t, KEYS / 4, KEYS); /* half of it again: PRESENT answers */
            verify(&r, t, "find after inserts");
            erase_some(&r, t);
            scan_all(&r, t);
            floe_batch save = {.op = FLOE_OP_SAVE, .path = path};
            if (check_failure(&r, floe_table_run(t, &save), &save.error, "save")) {
                st = floe_table_load(be, path, &loaded, &err);
                check_failure(&r, st, &err, "load");
            } else {
                ck_assert_msg(access(path, F_OK) != 0, "a failed save left %s", path);
            }
        }
    }
    const bool failed = floe_alloc_failed();
    floe_alloc_fail_nth(0);
    /* whatever failed on the way, what is there answers exactly */
    if (t) {
        verify(&r, t, "find at the end");
        scan_all(&r, t);
    }
    if (loaded)
        verify(&r, loaded, "find in the loaded table");
    floe_table_destroy(loaded);
    floe_table_destroy(t);
    floe_backend_destroy(be);
    unlink(path);
    return failed;
}

static void walk(int kind, const char *name)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/floe-faults-%d.floe", (int)getpid());
    ck_assert(!one_run(kind, 0, path)); /* the run itself passes */
    uint64_t n = 1;
    while (one_run(kind, n, path))
        n++;
    printf("faults %s: a run of %llu allocations, each failed once in turn: every failure an error status, the "
           "table exact after each\n",
           name, (unsigned long long)n - 1);
    ck_assert_uint_gt(n, 10);
}

START_TEST(walk_set)
{
    walk(FLOE_KIND_SET, "SET");
}
END_TEST

START_TEST(walk_map)
{
    walk(FLOE_KIND_MAP, "MAP");
}
END_TEST

START_TEST(walk_tree)
{
    walk(FLOE_KIND_TREE, "TREE");
}
END_TEST

Suite *faults_suite(void)
{
    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("faults");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, walk_set);
    tcase_add_test(tc, walk_map);
    tcase_add_test(tc, walk_tree);
    suite_add_tcase(s, tc);
    return s;
}
