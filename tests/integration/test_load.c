/*
 * test_load.c - concurrency and back-pressure: many clients inserting
 * overlapping keys (each key INSERTED exactly once overall), and a server
 * that stops reading a connection with too many requests in flight.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <signal.h>
#include <stdio.h>

#include "harness.h"

enum { CLIENTS = 8, KEYS = 40000, PER_REQ = 997 };

typedef struct client_arg {
    const daemon_proc *d;
    int id;
    _Atomic uint32_t *wins;
    atomic_int errors;
} client_arg;

static void *client_main(void *p)
{
    client_arg *a = p;
    floe *c;
    if (harness_connect(a->d, NULL, &c) != FLOE_OK) {
        atomic_fetch_add(&a->errors, 1);
        floe_close(c);
        return NULL;
    }
    /* each client walks all keys from its own offset, 8 requests in flight */
    uint64_t *keys = malloc(KEYS * sizeof *keys);
    for (int i = 0; i < KEYS; i++)
        keys[i] = (uint64_t)((i + a->id * (KEYS / CLIENTS)) % KEYS) * 0x9E3779B97F4A7C15ull;
    floe_call *calls[8] = {0};
    int at[8];
    int off = 0, slot = 0, outstanding = 0;
    for (; off < KEYS || outstanding > 0; slot = (slot + 1) % 8) {
        if (calls[slot]) {
            if (floe_wait(c, calls[slot]) != FLOE_OK) {
                atomic_fetch_add(&a->errors, 1);
            } else {
                size_t n;
                const uint8_t *r = floe_call_results(calls[slot], &n);
                for (size_t i = 0; i < n; i++) {
                    int k = (at[slot] + (int)i + a->id * (KEYS / CLIENTS)) % KEYS;
                    if (r[i] == FLOE_INSERTED)
                        atomic_fetch_add(&a->wins[k], 1);
                    else if (r[i] != FLOE_PRESENT)
                        atomic_fetch_add(&a->errors, 1);
                }
            }
            floe_call_free(calls[slot]);
            calls[slot] = NULL;
            outstanding--;
        }
        if (off < KEYS) {
            int n = KEYS - off < PER_REQ ? KEYS - off : PER_REQ;
            calls[slot] = floe_send_insert(c, "shared", keys + off, (size_t)n, NULL, 0, 0, NULL, NULL);
            at[slot] = off;
            off += n;
            outstanding++;
        }
    }
    free(keys);
    floe_close(c);
    return NULL;
}

START_TEST(overlapping_clients_insert_each_key_once)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    floe *c = connect_ok(&d);
    floe_table_def def = {.name = "shared", .kind = FLOE_TABLE_SET, .capacity = 1000, .grow = 1};
    ck_assert_int_eq(floe_create(c, &def), FLOE_OK);
    _Atomic uint32_t *wins = calloc(KEYS, sizeof *wins);
    pthread_t th[CLIENTS];
    client_arg args[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        args[i].d = &d;
        args[i].id = i;
        args[i].wins = wins;
        atomic_init(&args[i].errors, 0);
        ck_assert_int_eq(pthread_create(&th[i], NULL, client_main, &args[i]), 0);
    }
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(atomic_load(&args[i].errors), 0);
    }
    for (int k = 0; k < KEYS; k++)
        ck_assert_msg(atomic_load(&wins[k]) == 1, "key %d INSERTED %u times", k, atomic_load(&wins[k]));
    floe_table_info info;
    ck_assert_int_eq(floe_stats(c, "shared", &info), FLOE_OK);
    ck_assert_uint_eq(info.keys, KEYS);
    ck_assert_uint_gt(info.generation, 0); /* it grew from capacity 1000 */
    free(wins);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(back_pressure_not_errors)
{
    /* max-inflight 2: the server stops reading; nothing fails */
    const char *flags[] = {"--max-inflight", "2", NULL};
    daemon_proc d;
    daemon_start(&d, flags);
    floe *c = connect_ok(&d);
    ck_assert_uint_eq(floe_info(c)->max_inflight, 2);
    floe_table_def def = {.name = "bp", .kind = FLOE_TABLE_SET, .capacity = 300000};
    ck_assert_int_eq(floe_create(c, &def), FLOE_OK);
    enum { R = 200, K = 1000 };
    static uint64_t keys[R * K];
    floe_call *calls[R];
    for (int i = 0; i < R * K; i++)
        keys[i] = (uint64_t)i;
    for (int r = 0; r < R; r++)
        calls[r] = floe_send_insert(c, "bp", keys + r * K, K, NULL, 0, 0, NULL, NULL);
    uint64_t inserted = 0;
    for (int r = 0; r < R; r++) {
        ck_assert_int_eq(floe_wait(c, calls[r]), FLOE_OK);
        floe_counts k;
        floe_call_counts(calls[r], &k);
        inserted += k.inserted;
        floe_call_free(calls[r]);
    }
    ck_assert_uint_eq(inserted, R * K);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

Suite *load_suite(void)
{
    Suite *s = suite_create("load");
    TCase *tc = tcase_create("load");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, overlapping_clients_insert_each_key_once);
    tcase_add_test(tc, back_pressure_not_errors);
    suite_add_tcase(s, tc);
    return s;
}
