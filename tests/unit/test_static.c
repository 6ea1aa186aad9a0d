/*
 * test_static.c - STATIC tables through the backend interface, whole and in
 * parts, against the reference model (testutil.h): filled by inserts with
 * repeats, answers and values the model's before and after the freeze; ids
 * each naming its key; writes after the freeze refused and changing
 * nothing; a freeze again changes nothing; a freeze the memory budget
 * refuses leaves the table filling; files of both phases saved and loaded;
 * the door's refusals (freeze of another kind, erase, values on a table
 * without them).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "backend.h"
#include "partition.h"
#include "tablefile.h"
#include "testutil.h"

static floe_backend *backend(unsigned parts)
{
    floe_backend *be, *in;
    floe_errinfo err;
    ck_assert_int_eq(floe_backend_cpu_create(2, &in, NULL), FLOE_OK);
    if (parts == 1)
        return in;
    ck_assert_msg(floe_backend_partition_create(&in, 1, parts, 2, &be, &err) == FLOE_OK, "%s", err.msg);
    return be;
}

static floe_spec static_spec(uint32_t key_bits, uint32_t vb)
{
    floe_spec s;
    floe_spec_default(&s);
    strcpy(s.name, "frozen");
    s.kind = FLOE_KIND_STATIC;
    s.key_bits = key_bits;
    s.value_bytes = vb;
    s.capacity = 1024; /* grows while it fills */
    s.grow = true;
    s.seed = 777;
    strcpy(s.backend, "cpu");
    return s;
}

static floe_status run_op(floe_table *t, floe_op op)
{
    floe_batch b = {.op = op};
    return floe_table_run(t, &b);
}

static floe_table_stats stats_of(floe_table *t)
{
    floe_batch b = {.op = FLOE_OP_STATS};
    ck_assert_int_eq(floe_table_run(t, &b), FLOE_OK);
    return b.stats;
}

static floe_status insert(floe_table *t, const uint64_t *keys, const void *values, size_t n, uint32_t vb, uint8_t *res,
                          floe_errinfo *err)
{
    floe_batch b = {.op = FLOE_OP_INSERT,
                    .keys = keys,
                    .n = n,
                    .values = values,
                    .values_len = values ? n * vb : 0,
                    .results = res};
    floe_status st = floe_table_run(t, &b);
    *err = b.error;
    return st;
}

/* Finds of probe[0..n) against the model m: answers, values and ids (each
 * id distinct among the hits, and the same for a key asked twice). */
static void check_finds(floe_table *t, const model *m, const uint64_t *probe, size_t n, uint32_t vb)
{
    uint8_t *res = malloc(n);
    uint64_t *ids = malloc(n * 8), *vals = calloc(n, 8);
    ck_assert(res && ids && vals);
    floe_batch b = {.op = FLOE_OP_FIND,
                    .flags = FLOE_BATCH_WANT_IDS | (vb ? FLOE_BATCH_WANT_VALUES : 0),
                    .keys = probe,
                    .n = n,
                    .results = res,
                    .ids = ids,
                    .values_out = vb ? vals : NULL};
    ck_assert_msg(floe_table_run(t, &b) == FLOE_OK, "%s", b.error.msg);
    model seen;
    model_init(&seen, n);
    for (size_t i = 0; i < n; i++) {
        uint64_t want_v, v = 0, other;
        const bool in = model_get(m, probe[i], &want_v, NULL);
        ck_assert_msg(res[i] == (in ? FLOE_PRESENT : FLOE_ABSENT), "key %llu: %u", (unsigned long long)probe[i],
                      res[i]);
        memcpy(&v, (unsigned char *)vals + i * vb, vb);
        if (vb)
            ck_assert_uint_eq(v, in ? want_v : 0);
        if (!in) {
            ck_assert_uint_eq(ids[i], FLOE_NO_ID);
            continue;
        }
        if (model_get(&seen, ids[i], &other, NULL))
            ck_assert_uint_eq(other, probe[i]); /* an id names one key */
        else
            model_put(&seen, ids[i], probe[i], 0);
    }
    model_free(&seen);
    free(res);
    free(ids);
    free(vals);
}

/* n random keys (a tenth repeated, with another value: the first stays)
 * inserted in batches, checked before and after the freeze, and writes
 * after it refused. */
static void lifecycle(unsigned parts, uint32_t key_bits, uint32_t vb, size_t n)
{
    floe_backend *be = backend(parts);
    floe_spec spec = static_spec(key_bits, vb);
    floe_table *t;
    floe_errinfo err;
    ck_assert_msg(floe_table_create(be, &spec, &t, &err) == FLOE_OK, "%s", err.msg);
    const uint64_t mask = key_bits == 64 ? ~0ull : (1ull << key_bits) - 1;
    uint64_t *keys = malloc(n * 8), *vals = malloc(n * 8), *probe = malloc(2 * n * 8), s = key_bits * 1000 + vb;
    uint8_t *res = malloc(n);
    ck_assert(keys && vals && probe && res);
    model m;
    model_init(&m, n);
    for (size_t i = 0; i < n; i++) {
        keys[i] = i % 10 == 3 ? keys[i / 3] : rng_next(&s) & mask;
        const uint64_t v = rng_next(&s) & (vb == 4 ? 0xFFFFFFFFull : ~0ull);
        memcpy((unsigned char *)vals + i * vb, &v, vb);
        uint64_t old;
        if (!model_get(&m, keys[i], &old, NULL))
            model_put(&m, keys[i], vb ? v : 0, 0);
    }
    for (size_t at = 0; at < n; at += 7000) {
        const size_t k = n - at < 7000 ? n - at : 7000;
        ck_assert_msg(insert(t, keys + at, vb ? (unsigned char *)vals + at * vb : NULL, k, vb, res, &err) == FLOE_OK,
                      "%s", err.msg);
    }
    for (size_t i = 0; i < n; i++) {
        probe[2 * i] = keys[i];
        probe[2 * i + 1] = rng_next(&s) & mask;
    }
    ck_assert(!stats_of(t).frozen);
    check_finds(t, &m, probe, 2 * n, vb); /* filling: the iceberg table's answers */
    ck_assert_int_eq(run_op(t, FLOE_OP_FREEZE), FLOE_OK);
    floe_table_stats st = stats_of(t);
    ck_assert(st.frozen);
    ck_assert_uint_eq(st.keys, m.live);
    /* the size of fewest bytes (cuckoo_layout.h): at most twice the fullest size's buckets, so at least half full */
    ck_assert_msg(n < 10000 || st.fill > 0.5, "fill %.3f", st.fill);
    check_finds(t, &m, probe, 2 * n, vb);
    /* writes refused, nothing changed; a freeze again changes nothing */
    const uint64_t fresh[2] = {probe[1], probe[3]}, fresh_vals[2] = {1, 2};
    ck_assert_int_eq(insert(t, fresh, vb ? fresh_vals : NULL, 2, vb, res, &err), FLOE_ERR_FROZEN);
    ck_assert_msg(strstr(err.msg, "frozen") && strstr(err.msg, "nothing written"), "%s", err.msg);
    ck_assert_int_eq(run_op(t, FLOE_OP_FREEZE), FLOE_OK);
    check_finds(t, &m, probe, 2 * n, vb);
    ck_assert_uint_eq(stats_of(t).keys, m.live);
    model_free(&m);
    free(keys);
    free(vals);
    free(probe);
    free(res);
    floe_table_destroy(t);
    floe_backend_destroy(be);
}

START_TEST(filled_then_frozen)
{
    lifecycle(1, 40, 0, 60000);
    lifecycle(1, 64, 8, 30000);
    lifecycle(1, 17, 4, 50000); /* most of the key space */
    lifecycle(3, 40, 8, 40000);
    lifecycle(2, 1, 0, 10); /* keys 0 and 1 */
}
END_TEST

static bool refuse_all(uint64_t bytes)
{
    (void)bytes;
    return false;
}

/* A save of each phase loads back with the same answers; a damaged file
 * is refused; a freeze the memory budget refuses leaves the table filling. */
START_TEST(saved_loaded_and_refused_freeze)
{
    for (unsigned parts = 1; parts <= 2; parts++) {
        floe_backend *be = backend(parts);
        floe_spec spec = static_spec(40, 8);
        floe_table *t, *back;
        floe_errinfo err;
        ck_assert_int_eq(floe_table_create(be, &spec, &t, &err), FLOE_OK);
        enum { N = 20000 };
        uint64_t *keys = malloc(N * 8), *vals = malloc(N * 8), *probe = malloc(2 * N * 8), s = 5 + parts;
        uint8_t *res = malloc(N);
        ck_assert(keys && vals && probe && res);
        model m;
        model_init(&m, N);
        for (size_t i = 0; i < N; i++) {
            keys[i] = rng_next(&s) & ((1ull << 40) - 1);
            vals[i] = rng_next(&s);
            model_put(&m, keys[i], vals[i], 0);
            probe[2 * i] = keys[i];
            probe[2 * i + 1] = rng_next(&s) & ((1ull << 40) - 1);
        }
        ck_assert_int_eq(insert(t, keys, vals, N, 8, res, &err), FLOE_OK);
        char path[64];
        snprintf(path, sizeof path, "/tmp/floe-static-%d.floe", (int)getpid());
        for (int phase = 0; phase < 2; phase++) {
            floe_batch sv = {.op = FLOE_OP_SAVE, .path = path};
            ck_assert_msg(floe_table_run(t, &sv) == FLOE_OK, "%s", sv.error.msg);
            ck_assert_msg(floe_table_load(be, path, &back, &err) == FLOE_OK, "%s", err.msg);
            ck_assert_int_eq(stats_of(back).frozen, phase == 1);
            check_finds(back, &m, probe, 2 * N, 8);
            floe_table_destroy(back);
            if (phase == 0) { /* the budget refuses the freeze's arrays: still filling, still writable */
                floe_alloc_set_budget(refuse_all);
                floe_batch fz = {.op = FLOE_OP_FREEZE};
                ck_assert_int_eq(floe_table_run(t, &fz), FLOE_ERR_NO_MEMORY);
                floe_alloc_set_budget(NULL);
                ck_assert(!stats_of(t).frozen);
                ck_assert_int_eq(insert(t, keys, vals, 10, 8, res, &err), FLOE_OK);
                ck_assert_int_eq(res[0], FLOE_PRESENT);
                ck_assert_int_eq(run_op(t, FLOE_OP_FREEZE), FLOE_OK);
            }
        }
        /* a byte of the frozen table's buckets changed: refused (the checksum) */
        FILE *f = fopen(path, "r+b");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(fseek(f, FLOE_FILE_HEADER_BYTES + 100, SEEK_SET), 0);
        const int c = fgetc(f);
        ck_assert_int_eq(fseek(f, FLOE_FILE_HEADER_BYTES + 100, SEEK_SET), 0);
        fputc(c ^ 0x40, f);
        fclose(f);
        ck_assert_int_ne(floe_table_load(be, path, &back, &err), FLOE_OK);
        unlink(path);
        model_free(&m);
        free(keys);
        free(vals);
        free(probe);
        free(res);
        floe_table_destroy(t);
        floe_backend_destroy(be);
    }
}
END_TEST

START_TEST(the_door)
{
    floe_spec st = static_spec(40, 0), set = st;
    set.kind = FLOE_KIND_SET;
    floe_errinfo err;
    const uint64_t key = 5, value = 6;
    ck_assert_int_eq(floe_request_check(&set, FLOE_OP_FREEZE, 0, NULL, 0, NULL, 0, NULL, &err), FLOE_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "freeze is for STATIC tables"), "%s", err.msg);
    ck_assert_int_eq(floe_request_check(&st, FLOE_OP_ERASE, 0, &key, 8, NULL, 0, NULL, &err), FLOE_ERR_UNSUPPORTED);
    ck_assert_int_eq(floe_request_check(&st, FLOE_OP_INSERT, 0, &key, 8, &value, 8, NULL, &err), FLOE_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "STATIC table of value_bytes 0"), "%s", err.msg);
    ck_assert_int_eq(floe_request_check(&st, FLOE_OP_FREEZE, 0, NULL, 0, NULL, 0, NULL, &err), FLOE_OK);
    st.value_bytes = 2;
    ck_assert_int_eq(floe_spec_validate(&st, &err), FLOE_ERR_INVALID);
    st.value_bytes = 0;
    st.explore = true;
    ck_assert_int_eq(floe_spec_validate(&st, &err), FLOE_ERR_INVALID);
}
END_TEST

Suite *static_suite(void)
{
    Suite *s = suite_create("static");
    TCase *tc = tcase_create("static");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, filled_then_frozen);
    tcase_add_test(tc, saved_loaded_and_refused_freeze);
    tcase_add_test(tc, the_door);
    suite_add_tcase(s, tc);
    return s;
}
