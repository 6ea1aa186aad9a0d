/*
 * test_capacity.c - the large test (tag "big", release build only): the K1
 * table of K1 (docs/PERFORMANCE.md), 2^30 primary slots of 40-bit keys, filled with unique
 * random keys in batches.  FULL must not appear below fill 0.95 of all
 * slots, and at fill 0.9 memory must be at most 2.6 bytes per key.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "iceberg.h"
#include "testutil.h"

START_TEST(k1_table_fills_to_095)
{
    floe_pool *pool;
    ck_assert_int_eq(floe_pool_create(0, &pool, NULL), FLOE_OK);
    floe_spec s;
    floe_spec_default(&s);
    strcpy(s.name, "k1");
    s.key_bits = 40;
    s.capacity = (uint64_t)1 << 30;
    s.seed = 2024;
    iceberg *t;
    floe_errinfo err;
    ck_assert_msg(iceberg_create_sized(&s, 25, 0, pool, &t, &err) == FLOE_OK, "%s", err.msg);
    floe_table_stats st;
    iceberg_stats(t, &st);
    /* unique random keys: a bijection on 40 bits applied to a counter */
    floe_perm keygen;
    floe_perm_init(&keygen, 40, 99, 0);
    const size_t B = (size_t)1 << 22;
    uint64_t *keys = malloc(B * sizeof *keys);
    uint8_t *res = malloc(B);
    uint64_t next = 0, target90 = (uint64_t)(0.90 * (double)st.slots), target95 = (uint64_t)(0.95 * (double)st.slots);
    double bpk90 = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (next < target95) {
        uint64_t stop = next < target90 ? target90 : target95;
        size_t n = stop - next < B ? (size_t)(stop - next) : B;
        for (size_t i = 0; i < n; i++)
            keys[i] = floe_permute(&keygen, next + i);
        floe_answer_counts c;
        ck_assert_int_eq(iceberg_insert(t, keys, n, NULL, 0, 0, res, NULL, NULL, &c, &err), FLOE_OK);
        ck_assert_msg(c.full == 0, "FULL at %llu keys, fill %.4f", (unsigned long long)next,
                      (double)next / (double)st.slots);
        ck_assert_uint_eq(c.inserted, n);
        next += n;
        if (next == target90) {
            iceberg_stats(t, &st);
            bpk90 = st.bytes_per_key;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    iceberg_stats(t, &st);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("k1 capacity: %llu keys in %llu slots (fill %.4f), no FULL; %.3f bytes/key at fill 0.90, %.3f at %.2f; "
           "levels filled %.4f / %.4f / %.4f; %.1f M inserts/s\n",
           (unsigned long long)st.keys, (unsigned long long)st.slots, st.fill, bpk90, st.bytes_per_key, st.fill,
           st.level[0].fill, st.level[1].fill, st.level[2].fill, (double)next / secs / 1e6);
    ck_assert_msg(bpk90 <= 2.6, "%.3f bytes per key at fill 0.9", bpk90);
    /* spot-check finds: hits and misses */
    for (size_t i = 0; i < B; i++)
        keys[i] = floe_permute(&keygen, (i & 1) ? next + i : i * 97);
    ck_assert_int_eq(iceberg_find(t, keys, B, res, NULL, NULL, NULL, NULL), FLOE_OK);
    for (size_t i = 0; i < B; i++)
        ck_assert_uint_eq(res[i], (i & 1) ? FLOE_ABSENT : FLOE_PRESENT);
    free(keys);
    free(res);
    iceberg_destroy(t);
    floe_pool_destroy(pool);
}
END_TEST

Suite *capacity_suite(void)
{
    Suite *s = suite_create("capacity");
    TCase *tc = tcase_create("k1");
    tcase_set_tags(tc, "big");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, k1_table_fills_to_095);
    suite_add_tcase(s, tc);
    return s;
}
