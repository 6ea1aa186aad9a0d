/*
 * test_workload.c - floe-bench's key streams (bench/workload.c) against the
 * reference model: requests of several streams, interleaved, are applied to
 * a model that answers as the server must (find-or-put, find); every answer
 * must be the one the stream predicted, and the INSERTED count must equal
 * the fresh keys the streams made plus the distinct hot keys inserted, which
 * is what floe-bench's end-of-run check relies on.
 */
#include <stdlib.h>
#include <string.h>

#include "../../bench/workload.h"
#include "floe.h"
#include "testutil.h"

/* TREE vectors go into the model by a 64-bit hash (no collision is expected
 * among the few hundred thousand vectors here). */
static uint64_t vector_hash(const uint32_t *v, unsigned words)
{
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (unsigned i = 0; i < words; i++) {
        h ^= v[i];
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
    }
    return h;
}

static void simulate(const wl_spec *spec, unsigned requests, size_t n)
{
    ck_assert_ptr_null(wl_spec_check(spec));
    const unsigned streams = (unsigned)spec->streams;
    wl_stream *s = calloc(streams, sizeof *s);
    uint64_t *keys = malloc(n * sizeof *keys);
    uint32_t *vecs = malloc(n * (spec->words ? spec->words : 1) * sizeof *vecs);
    unsigned char *values = malloc(n * 8);
    uint8_t *expect = malloc(n);
    ck_assert(s && keys && vecs && values && expect);
    for (unsigned i = 0; i < streams; i++)
        ck_assert_int_eq(wl_stream_init(&s[i], spec, i), 0);
    model m;
    model_init(&m, 1024);
    uint64_t inserted = 0, op_rng = 7;
    const bool tree = spec->kind == FLOE_TABLE_TREE;
    const uint64_t mask = spec->key_bits == 64 ? UINT64_MAX : (UINT64_C(1) << spec->key_bits) - 1;
    for (unsigned r = 0; r < requests; r++) {
        wl_stream *st = &s[rng_below(&op_rng, streams)];
        int op = spec->misses && rng_below(&op_rng, 3) == 0 ? WL_FIND : WL_INSERT;
        if (op == WL_FIND && spec->kind == FLOE_TABLE_ORDERED && rng_below(&op_rng, 2))
            op = WL_SUCC;
        if (tree)
            wl_next_vectors(st, op, n, vecs, expect);
        else
            wl_next_keys(st, op, n, keys, values, expect);
        for (size_t i = 0; i < n; i++) {
            uint64_t k = tree ? vector_hash(vecs + i * spec->words, spec->words) : keys[i];
            if (!tree)
                ck_assert_msg((k & ~mask) == 0, "key %llx is wider than %u bits", (unsigned long long)k,
                              spec->key_bits);
            if (spec->value_bytes && op == WL_INSERT) {
                uint64_t want = k * 0x9E3779B97F4A7C15ull, got = 0;
                memcpy(&got, values + i * spec->value_bytes, spec->value_bytes);
                if (spec->value_bytes < 8)
                    want &= (UINT64_C(1) << (8 * spec->value_bytes)) - 1;
                ck_assert_uint_eq(got, want);
            }
            uint8_t answer;
            if (op == WL_INSERT) {
                answer = model_get(&m, k, NULL, NULL) ? FLOE_PRESENT : FLOE_INSERTED;
                if (answer == FLOE_INSERTED) {
                    model_put(&m, k, 0, 0);
                    inserted++;
                }
            } else if (op == WL_SUCC) { /* a stored key is its own successor; of another, any answer may be right */
                ck_assert_msg(expect[i] == WL_EXPECT_PRESENT || expect[i] == WL_EXPECT_ANY,
                              "successor of key %zu: expected %s", i, wl_expect_name(expect[i]));
                answer = model_get(&m, k, NULL, NULL) ? FLOE_PRESENT : FLOE_ABSENT;
                if (expect[i] == WL_EXPECT_ANY)
                    continue;
            } else {
                answer = model_get(&m, k, NULL, NULL) ? FLOE_PRESENT : FLOE_ABSENT;
            }
            ck_assert_msg(wl_answer_ok(expect[i], answer), "request %u key %zu: answered %d, expected %s", r, i, answer,
                          wl_expect_name(expect[i]));
        }
    }
    uint64_t distinct = 0;
    uint8_t *hot = calloc(wl_hot_bytes(spec) + 1, 1);
    ck_assert_ptr_nonnull(hot);
    for (unsigned i = 0; i < streams; i++) {
        distinct += s[i].fresh;
        if (wl_hot_bytes(spec))
            wl_hot_union(hot, &s[i]);
    }
    distinct += wl_hot_count(hot, spec);
    ck_assert_uint_eq(inserted, distinct);
    ck_assert_uint_eq(m.live, distinct);
    for (unsigned i = 0; i < streams; i++)
        wl_stream_free(&s[i]);
    model_free(&m);
    free(hot);
    free(s);
    free(keys);
    free(vecs);
    free(values);
    free(expect);
}

START_TEST(test_set_uniform_inserts)
{
    wl_spec sp = {.kind = FLOE_TABLE_SET, .key_bits = 64, .dup_ratio = 0.5, .seed = 3, .streams = 4};
    simulate(&sp, 400, 500);
}
END_TEST

START_TEST(test_set_sequential_with_finds)
{
    wl_spec sp = {.kind = FLOE_TABLE_SET,
                  .key_bits = 40,
                  .distribution = WL_SEQUENTIAL,
                  .dup_ratio = 0.3,
                  .misses = true,
                  .seed = 5,
                  .streams = 3};
    simulate(&sp, 400, 300);
}
END_TEST

START_TEST(test_set_hotset_with_finds)
{
    wl_spec sp = {.kind = FLOE_TABLE_SET,
                  .key_bits = 20,
                  .distribution = WL_HOTSET,
                  .dup_ratio = 0.5,
                  .hot_fraction = 0.5,
                  .hot_keys = 37,
                  .misses = true,
                  .seed = 11,
                  .streams = 5};
    simulate(&sp, 500, 200);
}
END_TEST

/* A key space smaller than the run: streams run out of fresh keys and then
 * repeat, and every key of the space ends up inserted exactly once. */
START_TEST(test_set_exhausted_key_space)
{
    wl_spec sp = {.kind = FLOE_TABLE_SET, .key_bits = 6, .dup_ratio = 0.2, .seed = 1, .streams = 3};
    simulate(&sp, 60, 10);
    wl_spec sq = sp;
    sq.distribution = WL_SEQUENTIAL;
    simulate(&sq, 60, 10);
    wl_spec tiny = {.kind = FLOE_TABLE_SET, .key_bits = 2, .misses = true, .streams = 3};
    ck_assert_ptr_nonnull(wl_spec_check(&tiny)); /* 2 insert keys for 3 streams */
    tiny.streams = 2;
    ck_assert_ptr_null(wl_spec_check(&tiny));
}
END_TEST

START_TEST(test_map_values)
{
    wl_spec sp = {.kind = FLOE_TABLE_MAP, .key_bits = 64, .value_bytes = 4, .dup_ratio = 0.5, .streams = 2};
    simulate(&sp, 100, 100);
    sp.value_bytes = 8;
    simulate(&sp, 100, 100);
}
END_TEST

/* ORDERED: values as a MAP's (or none), successors among the finds. */
START_TEST(test_ordered_successors)
{
    wl_spec sp = {
        .kind = FLOE_TABLE_ORDERED, .key_bits = 40, .value_bytes = 8, .dup_ratio = 0.5, .misses = true, .streams = 3};
    simulate(&sp, 300, 200);
    sp.value_bytes = 0;
    sp.distribution = WL_HOTSET, sp.hot_fraction = 0.3, sp.hot_keys = 50;
    simulate(&sp, 300, 200);
}
END_TEST

START_TEST(test_tree_walk)
{
    wl_spec sp = {.kind = FLOE_TABLE_TREE, .words = 16, .dup_ratio = 0.5, .misses = true, .seed = 2, .streams = 4};
    simulate(&sp, 300, 500);
    wl_spec hot = {.kind = FLOE_TABLE_TREE,
                   .words = 2,
                   .distribution = WL_HOTSET,
                   .hot_fraction = 0.3,
                   .hot_keys = 10,
                   .dup_ratio = 0.2,
                   .misses = true,
                   .streams = 3};
    simulate(&hot, 300, 100);
}
END_TEST

/* wl_first_wrong against the plain rule, answer by answer: every pair of
 * expectation and answer (answers out of range included: always wrong), and long runs
 * with one wrong answer planted at each place. */
START_TEST(test_first_wrong)
{
    const uint8_t accepts[5][8] = {
        [WL_EXPECT_INSERTED] = {[FLOE_INSERTED] = 1},
        [WL_EXPECT_PRESENT] = {[FLOE_PRESENT] = 1},
        [WL_EXPECT_ABSENT] = {[FLOE_ABSENT] = 1},
        [WL_EXPECT_STORED] = {[FLOE_INSERTED] = 1, [FLOE_PRESENT] = 1},
        [WL_EXPECT_ANY] = {1, 1, 1, 1, 1},
    };
    for (uint8_t e = 0; e < 5; e++)
        for (unsigned a = 0; a < 256; a++) {
            const uint8_t ans = (uint8_t)a;
            const bool ok = a <= FLOE_ERASED && accepts[e][a]; /* no answer past the five is right */
            ck_assert_msg(wl_answer_ok(e, ans) == ok, "expect %u answer %u", e, a);
            ck_assert_uint_eq(wl_first_wrong(&e, &ans, 1), ok ? 1 : 0);
        }
    enum { N = 3000 };
    static uint8_t expect[N], answers[N];
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        expect[i] = (uint8_t)(x % 5);
        answers[i] = expect[i] == WL_EXPECT_INSERTED || expect[i] == WL_EXPECT_STORED ? FLOE_INSERTED
                     : expect[i] == WL_EXPECT_PRESENT                                 ? FLOE_PRESENT
                                                                                      : FLOE_ABSENT;
    }
    ck_assert_uint_eq(wl_first_wrong(expect, answers, N), N);
    for (size_t at = 0; at < N; at += 97) {
        if (expect[at] == WL_EXPECT_ANY)
            continue;
        const uint8_t keep = answers[at];
        answers[at] = expect[at] == WL_EXPECT_ABSENT ? FLOE_PRESENT : FLOE_ABSENT;
        ck_assert_uint_eq(wl_first_wrong(expect, answers, N), at);
        answers[at] = keep;
    }
    /* exact expectations only (E1's): right, then each wrong answer at each place found */
    for (size_t i = 0; i < N; i++) {
        expect[i] = (uint8_t)(expect[i] % 3); /* INSERTED, PRESENT, ABSENT */
        answers[i] = expect[i] == WL_EXPECT_INSERTED ? FLOE_INSERTED
                     : expect[i] == WL_EXPECT_PRESENT ? FLOE_PRESENT
                                                      : FLOE_ABSENT;
    }
    ck_assert_uint_eq(wl_first_wrong(expect, answers, N), N);
    for (size_t at = 0; at < N; at += 89)
        for (unsigned a = 0; a < 256; a++) {
            const uint8_t keep = answers[at];
            answers[at] = (uint8_t)a;
            ck_assert_uint_eq(wl_first_wrong(expect, answers, N), wl_answer_ok(expect[at], (uint8_t)a) ? N : at);
            answers[at] = keep;
        }
}
END_TEST

Suite *workload_suite(void)
{
    Suite *s = suite_create("workload");
    TCase *tc = tcase_create("workload");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_set_uniform_inserts);
    tcase_add_test(tc, test_set_sequential_with_finds);
    tcase_add_test(tc, test_set_hotset_with_finds);
    tcase_add_test(tc, test_set_exhausted_key_space);
    tcase_add_test(tc, test_map_values);
    tcase_add_test(tc, test_ordered_successors);
    tcase_add_test(tc, test_tree_walk);
    tcase_add_test(tc, test_first_wrong);
    suite_add_tcase(s, tc);
    return s;
}
