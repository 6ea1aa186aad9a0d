/*
 * test_static.c - STATIC tables through floed: filled by inserts from
 * several connections at once, frozen by the CLI, answered exactly after it
 * (keys, values, misses), writes refused with ERR_FROZEN by libfloe and the
 * CLI and changing nothing, `floe freeze --from` a SET, both phases kept
 * across a restart through data-dir, and the refusals (a freeze of another
 * kind, of no table).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

enum { CLIENTS = 3, KEYS = 30000, BATCH = 2500 };

/* Key i of the set, and keys that are not in it. */
static uint64_t key_in(uint64_t i)
{
    return 3 * i + 1;
}

static uint64_t key_out(uint64_t i)
{
    return 3 * i + 2;
}

static uint64_t value_of(uint64_t key)
{
    return key * 0x9E3779B97F4A7C15ull;
}

typedef struct filler {
    const daemon_proc *d;
    int which, failed;
    char why[256];
} filler;

/* Every client inserts every key (in its own order of batches), with its
 * value: each key INSERTED once in all. */
static void *fill(void *arg)
{
    filler *f = arg;
    char why[256];
    floe *c = connect_uri(f->d->uri, why, sizeof why);
    if (!c) {
        f->failed = 1;
        snprintf(f->why, sizeof f->why, "%s", why);
        return NULL;
    }
    uint64_t keys[BATCH], vals[BATCH];
    for (int b = 0; b < KEYS / BATCH && !f->failed; b++) {
        const int at = ((b + f->which * 3) % (KEYS / BATCH)) * BATCH;
        for (int i = 0; i < BATCH; i++) {
            keys[i] = key_in((uint64_t)(at + i));
            vals[i] = value_of(keys[i]);
        }
        if (floe_insert_values(c, "st", keys, vals, BATCH, 8, 0, NULL, NULL, NULL) != FLOE_OK) {
            f->failed = 1;
            snprintf(f->why, sizeof f->why, "insert: %s", floe_errstr(c));
        }
    }
    floe_close(c);
    return NULL;
}

/* Finds of every key and as many others: the keys' values, the others absent. */
static void check_exact(floe *c, const char *table, unsigned vb)
{
    uint64_t *q = malloc(2 * KEYS * 8), *got = malloc(2 * KEYS * 8);
    uint8_t *res = malloc(2 * KEYS);
    ck_assert(q && got && res);
    for (uint64_t i = 0; i < KEYS; i++) {
        q[2 * i] = key_in(i);
        q[2 * i + 1] = key_out(i);
    }
    floe_counts n;
    ck_assert_msg(floe_find(c, table, q, 2 * KEYS, res, vb ? got : NULL, vb, &n) == FLOE_OK, "%s", floe_errstr(c));
    ck_assert_uint_eq(n.present, KEYS);
    ck_assert_uint_eq(n.absent, KEYS);
    for (uint64_t i = 0; i < 2 * KEYS; i++) {
        ck_assert_uint_eq(res[i], i % 2 ? FLOE_ABSENT : FLOE_PRESENT);
        if (vb)
            ck_assert_uint_eq(got[i], i % 2 ? 0 : value_of(q[i]));
    }
    free(q);
    free(got);
    free(res);
}

START_TEST(static_tables_through_floed)
{
    char dir[] = "/tmp/floe-static-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const char *flags[] = {"--data-dir", dir, NULL};
    daemon_proc d;
    daemon_start(&d, flags);
    expect_cli(&d, NULL, 0, "created st", ARGS("create", "st", "--kind", "static", "--value-bytes", "8"));
    pthread_t th[CLIENTS];
    filler f[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        f[i] = (filler){.d = &d, .which = i};
        ck_assert_int_eq(pthread_create(&th[i], NULL, fill, &f[i]), 0);
    }
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(!f[i].failed, "client %d: %s", i, f[i].why);
    }
    floe *c = connect_ok(&d);
    floe_table_info info;
    ck_assert_int_eq(floe_stats(c, "st", &info), FLOE_OK);
    ck_assert_int_eq(info.kind, FLOE_TABLE_STATIC);
    ck_assert_int_eq(info.frozen, 0);
    ck_assert_uint_eq(info.keys, KEYS);
    check_exact(c, "st", 8); /* filling: answers already */

    expect_cli(&d, NULL, 0, "frozen st: 30000 keys", ARGS("freeze", "st"));
    ck_assert_int_eq(floe_stats(c, "st", &info), FLOE_OK);
    ck_assert_int_eq(info.frozen, 1);
    ck_assert_uint_eq(info.keys, KEYS);
    ck_assert_msg(info.fill > 0.75, "fill %.3f", info.fill);
    check_exact(c, "st", 8);
    /* writes refused, nothing changed */
    uint64_t k = key_out(7), v = 1;
    uint8_t r = 99;
    ck_assert_int_eq(floe_insert_values(c, "st", &k, &v, 1, 8, 0, &r, NULL, NULL), FLOE_ERR_FROZEN);
    ck_assert_msg(strstr(floe_errstr(c), "frozen"), "%s", floe_errstr(c));
    expect_cli2(&d, NULL, 1, NULL, "ERR_FROZEN", ARGS("insert", "st", "5=6"));
    expect_cli(&d, NULL, 0, "2 ABSENT", ARGS("find", "st", "2"));
    expect_cli(&d, NULL, 0, "frozen st: 30000 keys", ARGS("freeze", "st")); /* again: nothing changes */
    check_exact(c, "st", 8);

    /* --from a SET; refusals */
    expect_cli(&d, NULL, 0, "created src", ARGS("create", "src", "--key-bits", "40"));
    char *in = malloc(KEYS * 24 + 1), *p = in;
    ck_assert_ptr_nonnull(in);
    for (uint64_t i = 0; i < KEYS; i++)
        p += sprintf(p, "%llu\n", (unsigned long long)key_in(i));
    expect_cli(&d, in, 0, NULL, ARGS("load", "src", "-"));
    free(in);
    expect_cli(&d, NULL, 0, "frozen copy: 30000 keys", ARGS("freeze", "copy", "--from", "src"));
    check_exact(c, "copy", 0);
    expect_cli2(&d, NULL, 1, NULL, "freeze is for STATIC tables", ARGS("freeze", "src"));
    expect_cli2(&d, NULL, 1, NULL, "ERR_NO_TABLE", ARGS("freeze", "nosuch"));
    expect_cli2(&d, NULL, 1, NULL, "exists", ARGS("freeze", "copy", "--from", "src"));
    expect_cli(&d, NULL, 0, "created later", ARGS("create", "later", "--kind", "static"));
    expect_cli(&d, NULL, 0, "1 INSERTED", ARGS("insert", "later", "1"));
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0); /* saves at shutdown */

    /* after a restart: the frozen tables frozen and exact, the filling one filling */
    daemon_start(&d, flags);
    c = connect_ok(&d);
    ck_assert_int_eq(floe_stats(c, "st", &info), FLOE_OK);
    ck_assert_int_eq(info.frozen, 1);
    check_exact(c, "st", 8);
    check_exact(c, "copy", 0);
    ck_assert_int_eq(floe_stats(c, "later", &info), FLOE_OK);
    ck_assert_int_eq(info.frozen, 0);
    expect_cli(&d, NULL, 0, "2 INSERTED", ARGS("insert", "later", "2"));
    expect_cli(&d, NULL, 0, "frozen later: 2 keys", ARGS("freeze", "later"));
    expect_cli(&d, NULL, 0, "1 PRESENT\n2 PRESENT\n3 ABSENT", ARGS("find", "later", "1", "2", "3"));
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

Suite *static_suite(void)
{
    Suite *s = suite_create("static");
    TCase *tc = tcase_create("static");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, static_tables_through_floed);
    suite_add_tcase(s, tc);
    return s;
}
