/*
 * test_concurrency.c - several threads on one table at once: overlapping
 * inserts store every key once and answer INSERTED exactly once across all
 * threads; MAP values are never seen before they are written; concurrent
 * erases of one key answer ERASED exactly once.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "iceberg.h"
#include "testutil.h"

enum { THREADS = 4, KEYS = 150000, BATCH = 997 };

typedef struct worker {
    iceberg *t;
    const uint64_t *keys; /* KEYS distinct keys, shared by all threads */
    int id;
    int op;                  /* 0 insert, 1 erase */
    _Atomic uint32_t *wins;  /* per key: INSERTED (or ERASED) answers */
    _Atomic int *bad_values; /* PRESENT with a value other than the key's */
    uint32_t vb;             /* value bytes; 0 for a SET */
} worker;

static uint64_t value_of(uint64_t key, uint32_t vb)
{
    uint64_t v = key * 0x9E3779B97F4A7C15ull + 1;
    return vb == 4 ? (v & 0xFFFFFFFFull) : v;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    uint64_t r = 1234 + (uint64_t)w->id;
    /* each thread visits the keys in its own order and batch boundaries */
    uint32_t *order = malloc(KEYS * sizeof *order);
    for (uint32_t i = 0; i < KEYS; i++)
        order[i] = i;
    for (uint32_t i = KEYS - 1; i > 0; i--) {
        uint32_t j = (uint32_t)rng_below(&r, i + 1), x = order[i];
        order[i] = order[j];
        order[j] = x;
    }
    uint64_t keys[BATCH];
    uint8_t vals[BATCH * 8], out[BATCH * 8];
    const uint32_t vb = w->vb;
    uint8_t res[BATCH];
    for (size_t at = 0; at < KEYS;) {
        size_t n = 1 + (size_t)rng_below(&r, BATCH);
        if (n > KEYS - at)
            n = KEYS - at;
        for (size_t i = 0; i < n; i++) {
            keys[i] = w->keys[order[at + i]];
            uint64_t v = value_of(keys[i], vb);
            memcpy(vals + i * vb, &v, vb);
        }
        floe_status st;
        if (w->op == 0)
            st = iceberg_insert(w->t, keys, n, vb ? vals : NULL, n * vb, 0, res, NULL, vb ? out : NULL, NULL, NULL);
        else
            st = iceberg_erase(w->t, keys, n, res, NULL, NULL);
        ck_assert_int_eq(st, FLOE_OK);
        for (size_t i = 0; i < n; i++) {
            uint32_t k = order[at + i];
            if (res[i] == FLOE_INSERTED || res[i] == FLOE_ERASED)
                atomic_fetch_add(&w->wins[k], 1);
            else if (res[i] == FLOE_FULL)
                atomic_fetch_add(w->bad_values, 1000000);
            uint64_t got = 0;
            memcpy(&got, out + i * vb, vb);
            if (vb && res[i] == FLOE_PRESENT && got != value_of(keys[i], vb))
                atomic_fetch_add(w->bad_values, 1);
        }
        at += n;
    }
    free(order);
    return NULL;
}

static void run_threads(iceberg *t, const uint64_t *keys, int op, uint32_t vb, _Atomic uint32_t *wins, _Atomic int *bad)
{
    pthread_t th[THREADS];
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){t, keys, i, op, wins, bad, vb};
        ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
}

static void overlapping(uint32_t key_bits, uint32_t vb, bool grow, floe_pool *pool)
{
    floe_spec spec;
    floe_spec_default(&spec);
    strcpy(spec.name, "c");
    spec.kind = vb ? FLOE_KIND_MAP : FLOE_KIND_SET;
    spec.value_bytes = vb;
    spec.key_bits = key_bits;
    spec.capacity = grow ? 1000 : KEYS + KEYS / 4;
    spec.grow = grow;
    spec.seed = 5;
    iceberg *t;
    ck_assert_int_eq(iceberg_create(&spec, pool, &t, NULL), FLOE_OK);
    uint64_t *keys = malloc(KEYS * sizeof *keys);
    model m;
    model_init(&m, KEYS);
    uint64_t r = 8;
    for (size_t i = 0; i < KEYS;) { /* distinct keys */
        uint64_t k = rng_next(&r) & floe_mask_bits(key_bits);
        if (!model_get(&m, k, NULL, NULL)) {
            model_put(&m, k, 0, 0);
            keys[i++] = k;
        }
    }
    _Atomic uint32_t *wins = calloc(KEYS, sizeof *wins);
    _Atomic int bad = 0;
    run_threads(t, keys, 0, vb, wins, &bad);
    ck_assert_int_eq(atomic_load(&bad), 0);
    for (size_t i = 0; i < KEYS; i++)
        ck_assert_msg(atomic_load(&wins[i]) == 1, "key %zu INSERTED %u times", i, atomic_load(&wins[i]));
    floe_table_stats st;
    iceberg_stats(t, &st);
    ck_assert_uint_eq(st.keys, KEYS);
    if (grow)
        ck_assert_uint_gt(st.generation, 0);
    uint8_t *res = malloc(KEYS);
    ck_assert_int_eq(iceberg_find(t, keys, KEYS, res, NULL, NULL, NULL, NULL), FLOE_OK);
    for (size_t i = 0; i < KEYS; i++)
        ck_assert_uint_eq(res[i], FLOE_PRESENT);

    /* now all threads erase all keys: each key ERASED exactly once */
    memset(wins, 0, KEYS * sizeof *wins);
    run_threads(t, keys, 1, 0, wins, &bad);
    for (size_t i = 0; i < KEYS; i++)
        ck_assert_msg(atomic_load(&wins[i]) == 1, "key %zu ERASED %u times", i, atomic_load(&wins[i]));
    iceberg_stats(t, &st);
    ck_assert_uint_eq(st.keys, 0);
    free(res);
    free(wins);
    free(keys);
    model_free(&m);
    iceberg_destroy(t);
}

START_TEST(concurrent_set_inserts)
{
    floe_pool *pool;
    ck_assert_int_eq(floe_pool_create(2, &pool, NULL), FLOE_OK);
    overlapping(40, 0, false, NULL);
    overlapping(64, 0, false, pool);
    floe_pool_destroy(pool);
}
END_TEST

START_TEST(concurrent_map_inserts)
{
    overlapping(40, 8, false, NULL);
}
END_TEST

START_TEST(concurrent_inserts_while_growing)
{
    floe_pool *pool;
    ck_assert_int_eq(floe_pool_create(2, &pool, NULL), FLOE_OK);
    overlapping(40, 0, true, pool);
    overlapping(32, 4, true, NULL);
    floe_pool_destroy(pool);
}
END_TEST

/* floe_pool_copy: every size around the split points, odd offsets, a NULL
 * pool and pools of several widths, against a byte-by-byte expectation; the
 * bytes around the destination stay untouched. */
START_TEST(pool_copy_matches_memcpy)
{
    const size_t max = (size_t)9 << 20;
    unsigned char *src = malloc(max + 64), *dst = malloc(max + 128);
    ck_assert(src && dst);
    for (size_t i = 0; i < max + 64; i++)
        src[i] = (unsigned char)(i * 131 + (i >> 11));
    const size_t sizes[] = {0, 1, 63, 4096, (512u << 10) - 1, 512u << 10, (1u << 20) + 3, (3u << 20) + 65, max};
    for (unsigned threads = 0; threads <= 3; threads++) {
        floe_pool *pool = NULL;
        if (threads)
            ck_assert_int_eq(floe_pool_create(threads * 3, &pool, NULL), FLOE_OK);
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            const size_t n = sizes[k], off = k % 7;
            memset(dst, 0xEE, max + 128);
            floe_pool_copy(pool, dst + 64, src + off, n);
            for (size_t i = 0; i < 64; i++)
                ck_assert_uint_eq(dst[i], 0xEE);
            ck_assert(memcmp(dst + 64, src + off, n) == 0);
            ck_assert_uint_eq(dst[64 + n], 0xEE);
        }
        floe_pool_destroy(pool);
    }
    free(src);
    free(dst);
}
END_TEST

Suite *concurrency_suite(void)
{
    Suite *s = suite_create("concurrency");
    TCase *tc = tcase_create("concurrency");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, concurrent_set_inserts);
    tcase_add_test(tc, concurrent_map_inserts);
    tcase_add_test(tc, concurrent_inserts_while_growing);
    tcase_add_test(tc, pool_copy_matches_memcpy);
    suite_add_tcase(s, tc);
    return s;
}
