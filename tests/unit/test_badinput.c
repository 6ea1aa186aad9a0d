/*
 * test_badinput.c - bad input gets a clear error and changes nothing:
 * invalid specs, keys wider than key_bits, values of the wrong size, values on
 * a SET, bad cursors and rebuild sizes.
 */
#include <stdlib.h>
#include <string.h>

#include "iceberg.h"
#include "testutil.h"

static floe_spec good_spec(floe_kind kind)
{
    floe_spec s;
    floe_spec_default(&s);
    strcpy(s.name, "bad-input_1.0");
    s.kind = kind;
    s.key_bits = 20;
    s.capacity = 1000;
    s.value_bytes = kind == FLOE_KIND_MAP ? 8 : 0;
    s.seed = 3;
    return s;
}

static void expect_spec_error(const floe_spec *s, floe_status want, const char *words)
{
    iceberg *t = NULL;
    floe_errinfo err;
    floe_status st = iceberg_create(s, NULL, &t, &err);
    ck_assert_int_eq(st, want);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(err.msg, words) != NULL, "message '%s' does not mention '%s'", err.msg, words);
}

START_TEST(bad_specs_refused)
{
    floe_spec s = good_spec(FLOE_KIND_SET);
    s.key_bits = 0;
    expect_spec_error(&s, FLOE_ERR_INVALID, "key_bits");
    s.key_bits = 65;
    expect_spec_error(&s, FLOE_ERR_INVALID, "key_bits");
    s = good_spec(FLOE_KIND_SET);
    s.capacity = 0;
    expect_spec_error(&s, FLOE_ERR_INVALID, "capacity");
    s.capacity = ((uint64_t)1 << 40) + 1;
    expect_spec_error(&s, FLOE_ERR_TOO_LARGE, "capacity");
    s = good_spec(FLOE_KIND_SET);
    s.value_bytes = 8;
    expect_spec_error(&s, FLOE_ERR_INVALID, "SET");
    s = good_spec(FLOE_KIND_MAP);
    s.value_bytes = 3;
    expect_spec_error(&s, FLOE_ERR_INVALID, "value_bytes");
    s.value_bytes = 0;
    expect_spec_error(&s, FLOE_ERR_INVALID, "value_bytes");
    s = good_spec(FLOE_KIND_SET);
    s.name[0] = '\0';
    expect_spec_error(&s, FLOE_ERR_INVALID, "name");
    strcpy(s.name, "has space");
    expect_spec_error(&s, FLOE_ERR_INVALID, "name");
    s = good_spec(FLOE_KIND_SET);
    s.kind = FLOE_KIND_UNSPECIFIED;
    expect_spec_error(&s, FLOE_ERR_INVALID, "kind");
    s.kind = FLOE_KIND_ORDERED;
    expect_spec_error(&s, FLOE_ERR_UNSUPPORTED, "ORDERED");
    s.kind = FLOE_KIND_TREE; /* a TREE is tree.c's: the iceberg engine refuses it */
    s.key_bits = 0;
    s.words = 4;
    expect_spec_error(&s, FLOE_ERR_INVALID, "TREE");
    s = good_spec(FLOE_KIND_SET);
    s.max_fill = 1.5;
    expect_spec_error(&s, FLOE_ERR_INVALID, "max_fill");
    s = good_spec(FLOE_KIND_SET);
    strcpy(s.backend, "tpu");
    expect_spec_error(&s, FLOE_ERR_INVALID, "backend");
    s = good_spec(FLOE_KIND_SET);
    iceberg *t = NULL;
    ck_assert_int_eq(iceberg_create_sized(&s, 21, NULL, &t, NULL), FLOE_ERR_INVALID); /* > key_bits */
    ck_assert_ptr_null(t);
}
END_TEST

/* A fingerprint of the table's state: stats plus the answers for probe keys. */
typedef struct fingerprint {
    floe_table_stats st;
    uint8_t res[64];
    uint64_t vals[64];
} fingerprint;

static void take(iceberg *t, fingerprint *f)
{
    uint64_t probe[64];
    memset(f, 0, sizeof *f);
    for (int i = 0; i < 64; i++)
        probe[i] = (uint64_t)i * 1000;
    iceberg_stats(t, &f->st);
    bool map = t && iceberg_spec(t)->kind == FLOE_KIND_MAP;
    ck_assert_int_eq(iceberg_find(t, probe, 64, f->res, NULL, map ? f->vals : NULL, NULL, NULL), FLOE_OK);
}

static void same(const fingerprint *a, const fingerprint *b)
{
    ck_assert_uint_eq(a->st.keys, b->st.keys);
    ck_assert_uint_eq(a->st.tombstones, b->st.tombstones);
    ck_assert_uint_eq(a->st.generation, b->st.generation);
    for (int l = 0; l < FLOE_LEVELS; l++)
        ck_assert_uint_eq(a->st.level[l].used, b->st.level[l].used);
    ck_assert_mem_eq(a->res, b->res, sizeof a->res);
    ck_assert_mem_eq(a->vals, b->vals, sizeof a->vals);
}

START_TEST(bad_batches_change_nothing)
{
    floe_spec s = good_spec(FLOE_KIND_MAP);
    iceberg *t;
    ck_assert_int_eq(iceberg_create(&s, NULL, &t, NULL), FLOE_OK);
    uint64_t keys[4] = {0, 1000, 2000, 3000}, vals[4] = {1, 2, 3, 4}, out[4];
    uint8_t res[4];
    ck_assert_int_eq(iceberg_insert(t, keys, 2, vals, 16, 0, res, NULL, NULL, NULL, NULL), FLOE_OK);
    fingerprint before, after;
    take(t, &before);
    floe_errinfo err;

    /* a key >= 2^key_bits, after valid ones: none of the batch applies */
    uint64_t wide[3] = {2000, 3000, (uint64_t)1 << 20};
    ck_assert_int_eq(iceberg_insert(t, wide, 3, vals, 24, 0, res, NULL, NULL, NULL, &err), FLOE_ERR_INVALID);
    ck_assert(strstr(err.msg, "key_bits") != NULL && strstr(err.msg, "index 2") != NULL);
    ck_assert_int_eq(iceberg_find(t, wide, 3, res, NULL, NULL, NULL, &err), FLOE_ERR_INVALID);
    ck_assert_int_eq(iceberg_erase(t, wide, 3, res, NULL, &err), FLOE_ERR_INVALID);
    uint64_t huge = ~0ull;
    ck_assert_int_eq(iceberg_erase(t, &huge, 1, res, NULL, &err), FLOE_ERR_INVALID);
    /* values of the wrong size */
    ck_assert_int_eq(iceberg_insert(t, keys + 2, 2, vals, 15, 0, res, NULL, NULL, NULL, &err), FLOE_ERR_INVALID);
    ck_assert(strstr(err.msg, "bytes of values") != NULL);
    ck_assert_int_eq(iceberg_insert(t, keys + 2, 2, vals, 32, 0, res, NULL, NULL, NULL, &err), FLOE_ERR_INVALID);
    ck_assert_int_eq(iceberg_insert(t, keys + 2, 2, NULL, 0, 0, res, NULL, NULL, NULL, &err), FLOE_ERR_INVALID);
    /* no results buffer */
    ck_assert_int_eq(iceberg_insert(t, keys + 2, 2, vals, 16, 0, NULL, NULL, NULL, NULL, &err), FLOE_ERR_INVALID);
    /* bad cursor and rebuild size */
    floe_scan_pos far = {~0ull, 0}, next;
    size_t n;
    int done;
    ck_assert_int_eq(iceberg_scan(t, &far, 4, out, NULL, &n, &next, &done, &err), FLOE_ERR_INVALID);
    ck_assert_int_eq(iceberg_rebuild(t, 40, &err), FLOE_ERR_INVALID);
    take(t, &after);
    same(&before, &after);
    iceberg_destroy(t);

    /* values on a SET, and overwrite on a SET */
    s = good_spec(FLOE_KIND_SET);
    ck_assert_int_eq(iceberg_create(&s, NULL, &t, NULL), FLOE_OK);
    ck_assert_int_eq(iceberg_insert(t, keys, 1, NULL, 0, 0, res, NULL, NULL, NULL, NULL), FLOE_OK);
    take(t, &before);
    ck_assert_int_eq(iceberg_insert(t, keys + 1, 2, vals, 16, 0, res, NULL, NULL, NULL, &err), FLOE_ERR_INVALID);
    ck_assert(strstr(err.msg, "SET") != NULL);
    ck_assert_int_eq(iceberg_insert(t, keys + 1, 2, NULL, 0, ICEBERG_OVERWRITE, res, NULL, NULL, NULL, &err),
                     FLOE_ERR_INVALID);
    ck_assert_int_eq(iceberg_find(t, keys, 2, res, NULL, out, NULL, &err), FLOE_ERR_INVALID);
    ck_assert_int_eq(iceberg_scan(t, NULL, 4, out, out, &n, &next, &done, &err), FLOE_ERR_INVALID);
    take(t, &after);
    same(&before, &after);
    iceberg_destroy(t);
}
END_TEST

START_TEST(empty_batches)
{
    floe_spec s = good_spec(FLOE_KIND_SET);
    iceberg *t;
    ck_assert_int_eq(iceberg_create(&s, NULL, &t, NULL), FLOE_OK);
    floe_answer_counts c;
    ck_assert_int_eq(iceberg_insert(t, NULL, 0, NULL, 0, 0, NULL, NULL, NULL, &c, NULL), FLOE_OK);
    ck_assert_uint_eq(c.inserted + c.present + c.full, 0);
    ck_assert_int_eq(iceberg_find(t, NULL, 0, NULL, NULL, NULL, &c, NULL), FLOE_OK);
    ck_assert_int_eq(iceberg_erase(t, NULL, 0, NULL, &c, NULL), FLOE_OK);
    iceberg_destroy(t);
}
END_TEST

Suite *badinput_suite(void)
{
    Suite *s = suite_create("badinput");
    TCase *tc = tcase_create("badinput");
    tcase_add_test(tc, bad_specs_refused);
    tcase_add_test(tc, bad_batches_change_nothing);
    tcase_add_test(tc, empty_batches);
    suite_add_tcase(s, tc);
    return s;
}
