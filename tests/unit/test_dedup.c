/*
 * test_dedup.c - first occurrences inside a batch, and the thread pool.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "dedup.h"
#include "pool.h"
#include "testutil.h"

static void check_dedup(floe_pool *pool, size_t n, uint64_t universe, uint64_t seed)
{
    uint64_t *keys = calloc(n + 1, sizeof *keys);
    uint32_t *rep = malloc((n + 1) * sizeof *rep);
    ck_assert(keys && rep);
    uint64_t r = seed;
    for (size_t i = 0; i < n; i++)
        keys[i] = universe ? rng_below(&r, universe) * 0x9E3779B97F4A7C15ull : rng_next(&r);
    size_t distinct = 0;
    floe_errinfo err;
    ck_assert_int_eq(floe_dedup(pool, keys, n, rep, &distinct, &err), FLOE_OK);
    model m;
    model_init(&m, n);
    size_t want = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t first;
        if (model_get(&m, keys[i], &first, NULL)) {
            ck_assert_uint_eq(rep[i], first);
        } else {
            ck_assert_uint_eq(rep[i], i);
            model_put(&m, keys[i], i, 0);
            want++;
        }
    }
    ck_assert_uint_eq(distinct, want);
    model_free(&m);
    free(keys);
    free(rep);
}

START_TEST(dedup_matches_model)
{
    floe_pool *pool;
    ck_assert_int_eq(floe_pool_create(3, &pool, NULL), FLOE_OK);
    check_dedup(pool, 0, 10, 1);
    check_dedup(pool, 1, 10, 2);
    check_dedup(pool, 1000, 10, 3);      /* almost all duplicates */
    check_dedup(pool, 100000, 50000, 4); /* many partitions, heavy duplication */
    check_dedup(pool, 200000, 0, 5);     /* all distinct */
    check_dedup(NULL, 50000, 20000, 6);  /* inline */
    floe_pool_destroy(pool);
}
END_TEST

static void add_task(void *arg, size_t t)
{
    atomic_size_t *sum = arg;
    atomic_fetch_add(sum, t + 1);
}

START_TEST(pool_runs_every_task_once)
{
    floe_pool *pool;
    ck_assert_int_eq(floe_pool_create(4, &pool, NULL), FLOE_OK);
    ck_assert_uint_eq(floe_pool_width(pool), 4);
    for (size_t tasks = 0; tasks < 300; tasks += 37) {
        atomic_size_t sum;
        atomic_init(&sum, 0);
        floe_pool_run(pool, tasks, add_task, &sum);
        ck_assert_uint_eq(atomic_load(&sum), tasks * (tasks + 1) / 2);
    }
    floe_pool_destroy(pool);
    ck_assert_uint_eq(floe_pool_width(NULL), 1);
}
END_TEST

Suite *dedup_suite(void)
{
    Suite *s = suite_create("dedup");
    TCase *tc = tcase_create("dedup");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, dedup_matches_model);
    tcase_add_test(tc, pool_runs_every_task_once);
    suite_add_tcase(s, tc);
    return s;
}
