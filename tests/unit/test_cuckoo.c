/*
 * test_cuckoo.c - STATIC tables' CPU engine (tables/cuckoo.c) against a
 * reference: a sorted array of the distinct keys, searched by bisection.
 * Every key built in is PRESENT, every other key ABSENT, at fill up to
 * FLOE_CUCKOO_FILL, for several key widths and sizes of several shapes; the
 * layout's order (a key at choice c only where its buckets of the choices
 * before are full) holds in every bucket; repeats are stored once; bad
 * input is refused and builds nothing.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cuckoo.h"
#include "testutil.h"

static int cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The distinct keys of keys[0..n), sorted: how many. */
static size_t sorted_distinct(const uint64_t *keys, size_t n, uint64_t *out)
{
    memcpy(out, keys, n * sizeof *out);
    qsort(out, n, sizeof *out, cmp_u64);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || out[m - 1] != out[i])
            out[m++] = out[i];
    return m;
}

static bool in_ref(const uint64_t *ref, size_t m, uint64_t k)
{
    return bsearch(&k, ref, m, sizeof *ref, cmp_u64) != NULL;
}

/* Every stored row: its key is found, and every bucket of its choices
 * before its own is full (buckets fill in order). */
static void check_order(const cuckoo *t)
{
    const floe_cuckoo_geometry *g = cuckoo_geometry(t);
    const floe_level *lv = &g->level;
    const uint64_t *words = cuckoo_words(t);
    uint64_t rows = 0;
    for (uint64_t b = 0; b < g->buckets; b++)
        for (uint32_t i = 0; i < lv->slots; i++) {
            const uint64_t row = floe_row_get(words + b * lv->words, lv->row_bits, i);
            if (row == FLOE_ROW_EMPTY)
                continue;
            rows++;
            const uint64_t key = floe_cuckoo_join(g, b, row);
            for (uint32_t c = 0; c < floe_cuckoo_choice(row); c++) {
                uint64_t b2, r2;
                floe_cuckoo_split(g, c, key, &b2, &r2);
                ck_assert_uint_eq(floe_bucket_first_empty(words + b2 * lv->words, lv), lv->slots);
            }
            uint64_t b3, r3;
            floe_cuckoo_split(g, floe_cuckoo_choice(row), key, &b3, &r3);
            ck_assert_uint_eq(b3, b);
            ck_assert_uint_eq(r3, row);
        }
    ck_assert_uint_eq(rows, cuckoo_keys(t));
}

/* The value a test gives key k (its first occurrence's), in value_bytes. */
static uint64_t value_of(uint64_t k, uint32_t value_bytes)
{
    const uint64_t v = (k ^ 0x5DEECE66Dull) * 0x9E3779B97F4A7C15ull;
    return value_bytes == 8 ? v : v & 0xFFFFFFFFull;
}

/* The key in slot id of t, by the layout alone. */
static uint64_t key_at(const cuckoo *t, uint64_t id)
{
    const floe_cuckoo_geometry *g = cuckoo_geometry(t);
    const uint64_t b = id / g->level.slots;
    const uint64_t row =
        floe_row_get(cuckoo_words(t) + b * g->level.words, g->level.row_bits, (uint32_t)(id % g->level.slots));
    ck_assert_uint_ne(row, FLOE_ROW_EMPTY);
    return floe_cuckoo_join(g, b, row);
}

/* A table of n random key_bits-bit keys (some repeated, with another value
 * than their first: the first is kept) and value_bytes values at `fill`,
 * checked against the reference with its keys and as many others: the
 * answers, the values, the ids (each the slot that holds the key), and a
 * scan of the whole table in pieces. */
static void build_and_check(uint32_t key_bits, uint32_t value_bytes, size_t n, double fill, uint64_t seed,
                            floe_pool *pool, floe_pool *build_pool)
{
    uint64_t *keys = malloc(n * sizeof *keys), *ref = malloc(n * sizeof *ref), *probe = malloc(2 * n * sizeof *probe);
    uint64_t *ids = malloc(2 * n * sizeof *ids), *values = malloc(n * 8), *vout = malloc(2 * n * 8);
    uint8_t *res = malloc(2 * n);
    ck_assert(keys && ref && probe && res && ids && values && vout);
    uint64_t s = seed;
    const uint64_t mask = key_bits == 64 ? ~0ull : (1ull << key_bits) - 1;
    for (size_t i = 0; i < n; i++) {
        const bool repeat = i % 17 == 5 && i;
        keys[i] = repeat ? keys[i / 2] : rng_next(&s) & mask; /* a few repeats */
        const uint64_t v = repeat ? ~value_of(keys[i], 8) : value_of(keys[i], 8);
        memcpy((unsigned char *)values + i * value_bytes, &v, value_bytes);
    }
    const size_t m = sorted_distinct(keys, n, ref);
    cuckoo *t = NULL;
    floe_errinfo err;
    ck_assert_msg(cuckoo_build(key_bits, value_bytes, seed, fill, keys, value_bytes ? values : NULL, n, build_pool, &t,
                               &err) == FLOE_OK,
                  "%u bits, %zu keys at %.2f: %s", key_bits, n, fill, err.msg);
    ck_assert_uint_eq(cuckoo_keys(t), m);
    const double got = (double)m / (double)floe_cuckoo_slots(cuckoo_geometry(t));
    ck_assert_msg(got <= fill + 1e-9, "fill %.3f past %.3f", got, fill);
    const double asked = (double)n / (double)floe_cuckoo_slots(cuckoo_geometry(t)); /* sized for n, repeats too */
    ck_assert_msg(n < 1000 || asked > fill / 1.032, "%.3f: a size a 1/32 step smaller would do", asked);
    for (size_t i = 0; i < n; i++) {
        probe[2 * i] = keys[i];
        probe[2 * i + 1] = rng_next(&s) & mask;
    }
    floe_answer_counts counts = {0};
    cuckoo_find(t, probe, 2 * n, res, ids, value_bytes ? vout : NULL, &counts, pool);
    uint64_t present = 0;
    for (size_t i = 0; i < 2 * n; i++) {
        const bool want = in_ref(ref, m, probe[i]);
        ck_assert_msg(res[i] == (want ? FLOE_PRESENT : FLOE_ABSENT), "key %llu: answer %u, in the set: %d",
                      (unsigned long long)probe[i], res[i], want);
        present += want;
        if (!want) {
            ck_assert_uint_eq(ids[i], FLOE_NO_ID);
        } else {
            ck_assert_uint_lt(ids[i], floe_cuckoo_slots(cuckoo_geometry(t)));
            ck_assert_uint_eq(key_at(t, ids[i]), probe[i]);
        }
        uint64_t v = 0;
        memcpy(&v, (unsigned char *)vout + i * value_bytes, value_bytes);
        if (value_bytes)
            ck_assert_uint_eq(v, want ? value_of(probe[i], value_bytes) : 0);
    }
    ck_assert_uint_eq(counts.present, present);
    ck_assert_uint_eq(counts.absent, 2 * n - present);
    /* a scan in pieces of 1000: every key once, in slot order, with its value */
    floe_scan_pos at = {0, cuckoo_generation(t)};
    int done = 0;
    size_t seen = 0;
    uint64_t *page = malloc(1000 * 8), *pvals = malloc(1000 * 8);
    ck_assert(page && pvals);
    while (!done) {
        size_t got_n;
        ck_assert_int_eq(cuckoo_scan(t, &at, 1000, page, value_bytes ? pvals : NULL, &got_n, &at, &done, &err),
                         FLOE_OK);
        for (size_t i = 0; i < got_n; i++) {
            ck_assert(in_ref(ref, m, page[i]));
            uint64_t v = 0;
            memcpy(&v, (unsigned char *)pvals + i * value_bytes, value_bytes);
            if (value_bytes)
                ck_assert_uint_eq(v, value_of(page[i], value_bytes));
        }
        seen += got_n;
    }
    ck_assert_uint_eq(seen, m);
    const floe_scan_pos stale = {0, cuckoo_generation(t) + 1};
    size_t got_n;
    ck_assert_int_eq(cuckoo_scan(t, &stale, 10, page, NULL, &got_n, &at, &done, &err), FLOE_ERR_INVALID);
    check_order(t);
    cuckoo_destroy(t);
    free(page);
    free(pvals);
    free(keys);
    free(ref);
    free(probe);
    free(res);
    free(ids);
    free(values);
    free(vout);
}

START_TEST(every_key_found_every_other_absent)
{
    floe_pool *pool = NULL;
    floe_errinfo err;
    ck_assert_int_eq(floe_pool_create(2, &pool, &err), FLOE_OK);
    build_and_check(40, 0, 200000, FLOE_CUCKOO_FILL, 11, pool, NULL);
    build_and_check(64, 8, 100000, 0.9, 12, pool, NULL);
    build_and_check(20, 4, 300000, FLOE_CUCKOO_FILL, 13, NULL, NULL); /* a quarter of the key space: most probes hit */
    build_and_check(33, 0, 1000, 0.5, 14, NULL, NULL);
    build_and_check(40, 8, 1, FLOE_CUCKOO_FILL, 15, NULL, NULL);
    /* built side by side on the pool: the same answers, values the first occurrences' */
    build_and_check(40, 8, 300000, FLOE_CUCKOO_FILL, 16, pool, pool);
    build_and_check(20, 4, 300000, FLOE_CUCKOO_FILL, 17, NULL, pool);
    build_and_check(64, 0, 150000, 0.9, 18, pool, pool);
    floe_pool_destroy(pool);
}
END_TEST

/* Sizes of several shapes (mult x 2^h buckets, mult 32..63) filled to
 * FLOE_CUCKOO_FILL of their slots exactly: the build places every key in
 * that size. */
START_TEST(fills_to_the_most)
{
    static const uint32_t mults[4] = {32, 45, 63, 33}, his[4] = {7, 6, 6, 7};
    floe_pool *pool = NULL; /* odd shapes built side by side on it */
    ck_assert_int_eq(floe_pool_create(2, &pool, NULL), FLOE_OK);
    for (int s = 0; s < 4; s++) {
        const uint64_t slots = ((uint64_t)mults[s] << his[s]) * FLOE_CUCKOO_SLOTS;
        const size_t n = (size_t)(FLOE_CUCKOO_FILL * (double)slots);
        uint64_t *keys = malloc(n * sizeof *keys);
        ck_assert_ptr_nonnull(keys);
        for (size_t i = 0; i < n; i++)
            keys[i] = i * 0x9E3779B97F4A7C15ull >> 24; /* distinct 40-bit keys */
        cuckoo *t = NULL;
        floe_errinfo err;
        ck_assert_msg(cuckoo_build(40, 0, 99 + (uint64_t)s, FLOE_CUCKOO_FILL, keys, NULL, n, s % 2 ? pool : NULL, &t,
                                   &err) == FLOE_OK,
                      "%s", err.msg);
        ck_assert_uint_eq(cuckoo_geometry(t)->mult, mults[s]);
        ck_assert_uint_eq(cuckoo_geometry(t)->hi_bits, his[s]);
        ck_assert_uint_eq(floe_cuckoo_slots(cuckoo_geometry(t)), slots);
        uint8_t *res = malloc(n);
        ck_assert_ptr_nonnull(res);
        cuckoo_find(t, keys, n, res, NULL, NULL, NULL, NULL);
        for (size_t i = 0; i < n; i++)
            ck_assert_int_eq(res[i], FLOE_PRESENT);
        check_order(t);
        cuckoo_destroy(t);
        free(res);
        free(keys);
    }
    floe_pool_destroy(pool);
}
END_TEST

/* A table's size (floe_cuckoo_first_step) against every size step that
 * holds its keys: the fewest bytes of those up to twice the smallest's
 * buckets, the first of several as few; the layout's example of a row
 * width saved past a power of two. */
START_TEST(sized_for_fewest_bytes)
{
    uint32_t hi, mult;
    ck_assert(floe_cuckoo_size_step(40, floe_cuckoo_first_step(40, 1020054732, FLOE_CUCKOO_FILL), &hi, &mult));
    ck_assert_uint_eq((uint64_t)mult << hi, 1ull << 26); /* 16-bit rows, 0.95 full; not 63 x 2^20 of 32-bit rows */
    static const uint32_t widths[] = {8, 17, 24, 31, 40, 47, 52, 64};
    for (size_t w = 0; w < sizeof widths / sizeof *widths; w++)
        for (double x = 1; x < 1e11; x *= 1.37) {
            const uint32_t kb = widths[w];
            const uint64_t n = (uint64_t)x;
            if (kb < 40 && n > (1ull << kb))
                break;
            const uint32_t k = floe_cuckoo_first_step(kb, n, FLOE_CUCKOO_FILL);
            ck_assert(floe_cuckoo_size_step(kb, k, &hi, &mult));
            const uint64_t bytes = floe_cuckoo_size_bytes(kb, hi, mult);
            uint64_t smallest = 0;
            for (uint32_t j = 0; j < FLOE_CUCKOO_SIZE_STEPS; j++) {
                uint32_t h, m;
                if (!floe_cuckoo_size_step(kb, j, &h, &m) ||
                    (double)(((uint64_t)m << h) * FLOE_CUCKOO_SLOTS) * FLOE_CUCKOO_FILL < (double)n)
                    continue;
                if (!smallest)
                    smallest = (uint64_t)m << h;
                if (((uint64_t)m << h) > 2 * smallest)
                    break;
                const uint64_t b = floe_cuckoo_size_bytes(kb, h, m);
                ck_assert_msg(b >= bytes && (j >= k || b > bytes),
                              "%u-bit keys, %llu of them: step %u (%llu bytes) "
                              "and the chosen %u (%llu)",
                              kb, (unsigned long long)n, j, (unsigned long long)b, k, (unsigned long long)bytes);
            }
            ck_assert_msg(smallest && ((uint64_t)mult << hi) <= 2 * smallest, "%u-bit keys, %llu of them", kb,
                          (unsigned long long)n);
        }
}
END_TEST

/* The layout alone, every size factor: a key's bucket is inside the table,
 * its row's remainder fits its bits, and the bucket and row give the key
 * back, for both choices. */
START_TEST(split_and_join_agree)
{
    uint64_t r = 321;
    for (uint32_t mult = 1; mult <= FLOE_CUCKOO_MULT_MAX; mult++)
        for (uint32_t kb = 30; kb <= 64; kb += 34)
            for (uint32_t hi = 0; hi <= 9; hi += 9) {
                if (!floe_cuckoo_size_ok(kb, hi, mult))
                    continue;
                floe_cuckoo_geometry g;
                floe_cuckoo_geometry_init(&g, kb, hi, mult, 99 + mult);
                for (int i = 0; i < 2000; i++) {
                    const uint64_t key = rng_next(&r) & floe_mask_bits(kb);
                    for (uint32_t c = 0; c < FLOE_CUCKOO_CHOICES; c++) {
                        uint64_t b, row;
                        floe_cuckoo_split(&g, c, key, &b, &row);
                        ck_assert_uint_lt(b, g.buckets);
                        ck_assert_uint_eq(floe_cuckoo_choice(row), c);
                        ck_assert_uint_le((row - 1) >> FLOE_CUCKOO_CHOICE_BITS, floe_mask_bits(g.level.rem_bits));
                        ck_assert_uint_eq(floe_cuckoo_join(&g, b, row), key);
                    }
                }
            }
}
END_TEST

static bool refuse_all(uint64_t bytes)
{
    (void)bytes;
    return false;
}

START_TEST(bad_input_builds_nothing)
{
    const uint64_t keys[3] = {1, 2, 1ull << 40};
    cuckoo *t = (cuckoo *)&t;
    floe_errinfo err;
    const uint64_t values[3] = {7, 8, 9};
    ck_assert_int_eq(cuckoo_build(40, 0, 1, 0.9, keys, NULL, 3, NULL, &t, &err), FLOE_ERR_INVALID);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(err.msg, "key 2") && strstr(err.msg, "wider than 40 bits"), "%s", err.msg);
    ck_assert_int_eq(cuckoo_build(40, 0, 1, FLOE_CUCKOO_FILL + 0.01, keys, NULL, 2, NULL, &t, &err), FLOE_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "fill"), "%s", err.msg);
    ck_assert_int_eq(cuckoo_build(0, 0, 1, 0.9, keys, NULL, 2, NULL, &t, &err), FLOE_ERR_INVALID);
    ck_assert_int_eq(cuckoo_build(40, 2, 1, 0.9, keys, values, 2, NULL, &t, &err), FLOE_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "value_bytes"), "%s", err.msg);
    ck_assert_int_eq(cuckoo_build(40, 8, 1, 0.9, keys, NULL, 2, NULL, &t, &err), FLOE_ERR_INVALID);
    ck_assert_int_eq(cuckoo_build(40, 0, 1, 0.9, keys, values, 2, NULL, &t, &err), FLOE_ERR_INVALID);
    ck_assert_ptr_null(t);
    floe_alloc_set_budget(refuse_all);
    ck_assert_int_eq(cuckoo_build(40, 0, 1, 0.9, keys, NULL, 2, NULL, &t, &err), FLOE_ERR_NO_MEMORY);
    floe_alloc_set_budget(NULL);
    ck_assert_msg(strstr(err.msg, "maxmemory"), "%s", err.msg);
    ck_assert_ptr_null(t);
}
END_TEST

Suite *cuckoo_suite(void)
{
    Suite *s = suite_create("cuckoo");
    TCase *tc = tcase_create("cuckoo");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, every_key_found_every_other_absent);
    tcase_add_test(tc, fills_to_the_most);
    tcase_add_test(tc, bad_input_builds_nothing);
    tcase_add_test(tc, split_and_join_agree);
    tcase_add_test(tc, sized_for_fewest_bytes);
    suite_add_tcase(s, tc);
    return s;
}
