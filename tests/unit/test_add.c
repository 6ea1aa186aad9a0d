/*
 * test_add.c - add on MAP tables (value += delta) through the backend
 * interface, against the reference model: heavy duplication inside every
 * batch, 4- and 8-byte values wrapping, a table that grows under it, whole
 * and in 3 parts; and the requests the door refuses, each changing nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "partition.h"
#include "testutil.h"

static floe_backend *backend_of(unsigned parts)
{
    floe_backend *be;
    ck_assert_int_eq(floe_backend_cpu_create(2, &be, NULL), FLOE_OK);
    if (parts <= 1)
        return be;
    floe_backend *in[1] = {be}, *pb;
    floe_errinfo err;
    ck_assert_msg(floe_backend_partition_create(in, 1, parts, 2, &pb, &err) == FLOE_OK, "%s", err.msg);
    return pb;
}

static floe_table *map_table(floe_backend *be, uint32_t vb, uint64_t capacity, bool grow)
{
    floe_spec s;
    floe_spec_default(&s);
    strcpy(s.name, "adds");
    s.kind = FLOE_KIND_MAP;
    s.key_bits = 40;
    s.value_bytes = vb;
    s.capacity = capacity;
    s.grow = grow;
    strcpy(s.backend, "cpu");
    floe_table *t;
    floe_errinfo err;
    ck_assert_msg(floe_table_create(be, &s, &t, &err) == FLOE_OK, "%s", err.msg);
    return t;
}

static uint64_t wrap(uint64_t v, uint32_t vb)
{
    return vb == 8 ? v : v & 0xffffffffu;
}

/* Batches of keys from a small domain (each key many times in a batch),
 * deltas near the top of the value range too, so that sums wrap: every
 * answer is the model's value after that occurrence's delta, INSERTED the
 * first time a key is met, and finds agree with the model at the end. */
static void against_model(uint32_t vb, unsigned parts)
{
    floe_backend *be = backend_of(parts);
    floe_table *t = map_table(be, vb, 1024, true); /* grows past 1 Ki keys */
    enum { BATCHES = 24, N = 6000, DOMAIN = 4000 };
    uint64_t *keys = malloc(N * 8), *vout = malloc(N * 8), *deltas = malloc(N * 8);
    uint8_t *res = malloc(N);
    unsigned char *din = malloc(N * 8);
    model m;
    model_init(&m, DOMAIN);
    uint64_t seed = 0x5eed0000u + vb * 7 + parts;
    for (int bi = 0; bi < BATCHES; bi++) {
        for (size_t i = 0; i < N; i++) {
            keys[i] = (rng_below(&seed, DOMAIN) * 0x9E3779B97F4A7C15ull) & (((uint64_t)1 << 40) - 1);
            const uint64_t r = rng_next(&seed);
            deltas[i] = wrap(r & 1 ? r : r % 1000, vb); /* large ones wrap */
            memcpy(din + i * vb, &deltas[i], vb);
        }
        floe_batch b = {.op = FLOE_OP_ADD,
                        .flags = FLOE_BATCH_WANT_VALUES,
                        .keys = keys,
                        .n = N,
                        .values = din,
                        .values_len = (size_t)N * vb,
                        .results = res,
                        .values_out = vout};
        ck_assert_msg(floe_table_run(t, &b) == FLOE_OK, "%s", b.error.msg);
        uint64_t inserted = 0;
        for (size_t i = 0; i < N; i++) {
            uint64_t before = 0, id;
            const bool had = model_get(&m, keys[i], &before, &id);
            const uint64_t after = wrap(before + deltas[i], vb);
            model_put(&m, keys[i], after, 0);
            inserted += !had;
            ck_assert_msg(res[i] == (had ? FLOE_PRESENT : FLOE_INSERTED), "batch %d key %zu: answer %u", bi, i, res[i]);
            uint64_t got = 0;
            memcpy(&got, (unsigned char *)vout + i * vb, vb);
            ck_assert_msg(got == after, "batch %d key %zu: value %llu, model %llu", bi, i, (unsigned long long)got,
                          (unsigned long long)after);
        }
        ck_assert_uint_eq(b.counts.inserted, inserted);
        ck_assert_uint_eq(b.counts.present, N - inserted);
    }
    /* every key's final value, by find */
    size_t n = 0;
    for (size_t i = 0; i < m.cap; i++)
        if (m.state[i] == 1)
            keys[n++] = m.keys[i];
    floe_batch f = {
        .op = FLOE_OP_FIND, .flags = FLOE_BATCH_WANT_VALUES, .keys = keys, .n = n, .results = res, .values_out = vout};
    ck_assert_int_eq(floe_table_run(t, &f), FLOE_OK);
    for (size_t i = 0; i < n; i++) {
        uint64_t want = 0, id, got = 0;
        ck_assert(model_get(&m, keys[i], &want, &id));
        memcpy(&got, (unsigned char *)vout + i * vb, vb);
        ck_assert_uint_eq(res[i], FLOE_PRESENT);
        ck_assert_uint_eq(got, want);
    }
    floe_batch st = {.op = FLOE_OP_STATS};
    ck_assert_int_eq(floe_table_run(t, &st), FLOE_OK);
    ck_assert_uint_eq(st.stats.keys, n);
    ck_assert_uint_gt(st.stats.generation, 0); /* it grew on the way */
    model_free(&m);
    free(keys);
    free(vout);
    free(deltas);
    free(res);
    free(din);
    floe_table_destroy(t);
    floe_backend_destroy(be);
}

START_TEST(adds_match_the_model)
{
    against_model(8, 1);
    against_model(4, 1);
}
END_TEST

START_TEST(adds_in_parts_match_the_model)
{
    against_model(8, 3);
    against_model(4, 3);
}
END_TEST

/* One stored key (7 -> 70), then requests the door refuses: each answers
 * its error and the key is still 7 -> 70, the table one key. */
START_TEST(bad_adds_change_nothing)
{
    floe_backend *be = backend_of(1);
    floe_table *t = map_table(be, 4, 1000, false);
    uint64_t keys[2] = {7, (uint64_t)1 << 41}, vout[2];
    uint32_t deltas[2] = {70, 1};
    uint8_t res[2];
    floe_batch b = {.op = FLOE_OP_ADD, .keys = keys, .n = 1, .values = deltas, .values_len = 4, .results = res};
    ck_assert_int_eq(floe_table_run(t, &b), FLOE_OK);

    floe_spec s;
    floe_spec_default(&s);
    strcpy(s.name, "set");
    strcpy(s.backend, "cpu");
    floe_table *set;
    ck_assert_int_eq(floe_table_create(be, &s, &set, NULL), FLOE_OK);
    const struct {
        floe_table *t;
        size_t n, values_len;
        const void *values;
        floe_status want;
        const char *says;
    } cases[] = {
        {set, 1, 0, NULL, FLOE_ERR_UNSUPPORTED, "add is for MAP tables; table set is a SET"},
        {t, 1, 0, NULL, FLOE_ERR_INVALID, "1 keys need 4 bytes of values"},
        {t, 1, 8, deltas, FLOE_ERR_INVALID, "1 keys need 4 bytes of values"},
        {t, 2, 8, deltas, FLOE_ERR_INVALID, "below 2^40"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        floe_batch bad = {.op = FLOE_OP_ADD,
                          .keys = keys,
                          .n = cases[k].n,
                          .values = cases[k].values,
                          .values_len = cases[k].values_len,
                          .results = res};
        ck_assert_int_eq(floe_table_run(cases[k].t, &bad), cases[k].want);
        ck_assert_msg(strstr(bad.error.msg, cases[k].says) != NULL, "case %zu: %s", k, bad.error.msg);
    }
    floe_batch f = {
        .op = FLOE_OP_FIND, .flags = FLOE_BATCH_WANT_VALUES, .keys = keys, .n = 1, .results = res, .values_out = vout};
    ck_assert_int_eq(floe_table_run(t, &f), FLOE_OK);
    ck_assert_uint_eq(res[0], FLOE_PRESENT);
    uint32_t v0;
    memcpy(&v0, vout, 4);
    ck_assert_uint_eq(v0, 70);
    floe_batch st = {.op = FLOE_OP_STATS};
    ck_assert_int_eq(floe_table_run(t, &st), FLOE_OK);
    ck_assert_uint_eq(st.stats.keys, 1);
    ck_assert_int_eq(floe_table_run(set, &st), FLOE_OK);
    ck_assert_uint_eq(st.stats.keys, 0);
    floe_table_destroy(set);
    floe_table_destroy(t);
    floe_backend_destroy(be);
}
END_TEST

Suite *add_suite(void)
{
    Suite *s = suite_create("add");
    TCase *tc = tcase_create("add");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, adds_match_the_model);
    tcase_add_test(tc, adds_in_parts_match_the_model);
    tcase_add_test(tc, bad_adds_change_nothing);
    suite_add_tcase(s, tc);
    return s;
}
