/*
 * test_add.c - add on MAP tables through floed (value += delta): clients
 * on concurrent connections adding to the same keys (the final values are
 * the sums, a key repeated in a request answers in order, one INSERTED a
 * key), the same over three floed (a partitioned connection), the CLI, and
 * the requests floed refuses, each changing nothing.  Under the suite's
 * parts run (FLOE_PARTITIONS) every table here is in parts.
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { CLIENTS = 4, DOMAIN = 3000, ROUNDS = 12, PER_REQUEST = 2000 };

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The key of domain index i (40 bits, spread over every shard and part). */
static uint64_t key_of(size_t i)
{
    return (i * 0x9E3779B97F4A7C15ull) >> 24;
}

typedef struct adder {
    const char *uri, *table;
    uint64_t seed;
    uint64_t sums[DOMAIN]; /* this client's deltas, by domain index */
    size_t inserted;
    char why[512]; /* empty: every answer as it should be */
} adder;

/* ROUNDS requests of PER_REQUEST adds over the domain (each key several
 * times a request): every answer INSERTED or PRESENT, and a key met again
 * in the same request answers its earlier answer plus its own delta. */
static void *adder_main(void *arg)
{
    adder *a = arg;
    floe *c = connect_uri(a->uri, a->why, sizeof a->why);
    if (!c)
        return NULL;
    uint64_t *keys = malloc(PER_REQUEST * 8), *deltas = malloc(PER_REQUEST * 8), *after = malloc(PER_REQUEST * 8);
    size_t *at = malloc(PER_REQUEST * sizeof *at);
    uint8_t *res = malloc(PER_REQUEST);
    int64_t *last = malloc(DOMAIN * sizeof *last); /* this request's last answer index of each key, -1 */
    for (int r = 0; r < ROUNDS && !a->why[0]; r++) {
        for (size_t i = 0; i < PER_REQUEST; i++) {
            at[i] = mix(&a->seed) % DOMAIN;
            keys[i] = key_of(at[i]);
            const uint64_t x = mix(&a->seed);
            deltas[i] = x & 1 ? x : x % 1000; /* the large ones wrap */
            a->sums[at[i]] += deltas[i];
        }
        int st = floe_add(c, a->table, keys, deltas, PER_REQUEST, 8, res, after, NULL);
        if (st != FLOE_OK) {
            snprintf(a->why, sizeof a->why, "add: %s", floe_errstr(c));
            break;
        }
        memset(last, 0xff, DOMAIN * sizeof *last);
        for (size_t i = 0; i < PER_REQUEST && !a->why[0]; i++) {
            if (res[i] != FLOE_INSERTED && res[i] != FLOE_PRESENT)
                snprintf(a->why, sizeof a->why, "key %zu answered %u", i, res[i]);
            else if (last[at[i]] >= 0 && after[i] != after[last[at[i]]] + deltas[i])
                snprintf(a->why, sizeof a->why, "key %zu of a request: %llu after %llu + %llu", i,
                         (unsigned long long)after[i], (unsigned long long)after[last[at[i]]],
                         (unsigned long long)deltas[i]);
            else if (last[at[i]] >= 0 && res[i] != FLOE_PRESENT)
                snprintf(a->why, sizeof a->why, "key %zu INSERTED twice in one request", i);
            a->inserted += res[i] == FLOE_INSERTED;
            last[at[i]] = (int64_t)i;
        }
    }
    free(keys);
    free(deltas);
    free(after);
    free(at);
    free(res);
    free(last);
    floe_close(c);
    return NULL;
}

/* CLIENTS adders at once on table of uri; then every key's value is the
 * sum of every client's deltas, and each key was INSERTED once in all. */
static void adders_against_sums(const char *uri, floe *c, const char *table)
{
    static adder a[CLIENTS];
    pthread_t th[CLIENTS];
    memset(a, 0, sizeof a);
    for (int i = 0; i < CLIENTS; i++) {
        a[i] = (adder){.uri = uri, .table = table, .seed = 77 + (uint64_t)i};
        ck_assert_int_eq(pthread_create(&th[i], NULL, adder_main, &a[i]), 0);
    }
    size_t inserted = 0;
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(!a[i].why[0], "client %d: %s", i, a[i].why);
        inserted += a[i].inserted;
    }
    uint64_t keys[DOMAIN], values[DOMAIN];
    uint8_t res[DOMAIN];
    size_t touched = 0;
    for (size_t k = 0; k < DOMAIN; k++)
        keys[k] = key_of(k);
    ck_assert_msg(floe_find(c, table, keys, DOMAIN, res, values, 8, NULL) == FLOE_OK, "%s", floe_errstr(c));
    for (size_t k = 0; k < DOMAIN; k++) {
        uint64_t sum = 0;
        for (int i = 0; i < CLIENTS; i++)
            sum += a[i].sums[k];
        const bool used = res[k] == FLOE_PRESENT;
        touched += used;
        ck_assert_msg(!used || values[k] == sum, "key %zu: %llu, the deltas sum to %llu", k,
                      (unsigned long long)values[k], (unsigned long long)sum);
    }
    ck_assert_uint_eq(inserted, touched);
    ck_assert_uint_gt(touched, DOMAIN * 9 / 10);
}

static void create_map(floe *c, const char *name, unsigned vb, unsigned key_bits)
{
    floe_table_def def = {
        .name = name, .kind = FLOE_TABLE_MAP, .value_bytes = vb, .key_bits = key_bits, .capacity = 1024, .grow = 1};
    ck_assert_msg(floe_create(c, &def) == FLOE_OK, "create %s: %s", name, floe_errstr(c));
}

START_TEST(adds_from_concurrent_connections)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    floe *c = connect_ok(&d);
    create_map(c, "counts", 8, 0); /* grows from 1 Ki keys while the adds come */
    adders_against_sums(d.uri, c, "counts");
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(adds_over_three_floed)
{
    daemon_proc d[3];
    for (int i = 0; i < 3; i++)
        daemon_start(&d[i], NULL);
    char uri[512];
    snprintf(uri, sizeof uri, "%s%s,%s,%s", harness_tls() ? "floes://" : "floe://", strstr(d[0].uri, "://") + 3,
             strstr(d[1].uri, "://") + 3, strstr(d[2].uri, "://") + 3);
    char why[512] = "";
    floe *c = connect_uri(uri, why, sizeof why);
    ck_assert_msg(c != NULL, "%s", why);
    create_map(c, "counts", 8, 0);
    adders_against_sums(uri, c, "counts");
    floe_close(c);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(daemon_stop(&d[i], SIGTERM), 0);
}
END_TEST

/* The CLI: pairs, KEY=DELTA, stdin, wrapping at 4 bytes; and refusals. */
START_TEST(adds_from_the_cli)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    expect_cli(&d, NULL, 0, "created m", ARGS("create", "m", "--kind", "map", "--value-bytes", "4"));
    expect_cli(&d, NULL, 0, "1 INSERTED 5\n2 INSERTED 7\n1 PRESENT 8\n1 PRESENT 7\n",
               ARGS("add", "m", "1", "5", "2", "7", "1", "3", "1", "0xffffffff"));
    expect_cli(&d, "9 1\n9=2\n", 0, "9 INSERTED 1\n9 PRESENT 3\n", ARGS("add", "m"));
    expect_cli(&d, NULL, 0, "1 PRESENT 7\n9 PRESENT 3\n", ARGS("find", "m", "1", "9"));
    expect_cli(&d, NULL, 0, "created s", ARGS("create", "s"));
    expect_cli2(&d, NULL, 1, "", "add is for MAP tables; table s is a SET", ARGS("add", "s", "1", "2"));
    expect_cli2(&d, NULL, 2, "", "does not fit the 4-byte values", ARGS("add", "m", "1", "0x100000000"));
    expect_cli2(&d, NULL, 2, "", "key 1 has no delta", ARGS("add", "m", "1"));
    expect_cli(&d, NULL, 0, "1 PRESENT 7\n", ARGS("find", "m", "1")); /* nothing changed */
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* What floed refuses: each answers its error and leaves 7 -> 70 alone. */
START_TEST(bad_adds_change_nothing)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    floe *c = connect_ok(&d);
    create_map(c, "m", 8, 20);
    floe_table_def set = {.name = "s", .kind = FLOE_TABLE_SET};
    ck_assert_int_eq(floe_create(c, &set), FLOE_OK);
    uint64_t keys[2] = {7, (uint64_t)1 << 30}, deltas[2] = {70, 1}, after[2];
    uint8_t res[2];
    ck_assert_int_eq(floe_add(c, "m", keys, deltas, 1, 8, res, after, NULL), FLOE_OK);
    ck_assert_uint_eq(after[0], 70);
    const struct {
        const char *table;
        size_t n;
        size_t deltas_len;
        int want;
        const char *says;
    } cases[] = {
        {"s", 1, 8, FLOE_ERR_UNSUPPORTED, "add is for MAP tables; table s is a SET"},
        {"m", 1, 0, FLOE_ERR_INVALID, "1 keys need 8 bytes of values"},
        {"m", 1, 4, FLOE_ERR_INVALID, "1 keys need 8 bytes of values"},
        {"m", 2, 16, FLOE_ERR_INVALID, "below 2^20"},
        {"nosuch", 1, 8, FLOE_ERR_NO_TABLE, "no table nosuch"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        floe_call *call = floe_send_add(c, cases[k].table, keys, cases[k].n, deltas, cases[k].deltas_len, NULL, NULL);
        ck_assert_ptr_nonnull(call);
        ck_assert_int_eq(floe_wait(c, call), cases[k].want);
        ck_assert_msg(strstr(floe_call_error(call), cases[k].says), "case %zu: %s", k, floe_call_error(call));
        floe_call_free(call);
    }
    uint64_t v;
    ck_assert_int_eq(floe_find(c, "m", keys, 1, res, &v, 8, NULL), FLOE_OK);
    ck_assert_uint_eq(res[0], FLOE_PRESENT);
    ck_assert_uint_eq(v, 70);
    floe_table_info info;
    ck_assert_int_eq(floe_stats(c, "m", &info), FLOE_OK);
    ck_assert_uint_eq(info.keys, 1);
    ck_assert_int_eq(floe_stats(c, "s", &info), FLOE_OK);
    ck_assert_uint_eq(info.keys, 0);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

Suite *add_suite(void)
{
    Suite *s = suite_create("add");
    TCase *tc = tcase_create("add");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, adds_from_concurrent_connections);
    tcase_add_test(tc, adds_over_three_floed);
    tcase_add_test(tc, adds_from_the_cli);
    tcase_add_test(tc, bad_adds_change_nothing);
    suite_add_tcase(s, tc);
    return s;
}
