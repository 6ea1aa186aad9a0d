/*
 * test_backend.c - the backend interface over the CPU engine: every
 * operation through floe_table_run, and many asynchronous batches on one
 * table completing in submission order.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "tablefile.h"
#include "testutil.h"

static floe_spec map_spec(void)
{
    floe_spec s;
    floe_spec_default(&s);
    strcpy(s.name, "be");
    s.kind = FLOE_KIND_MAP;
    s.key_bits = 32;
    s.value_bytes = 4;
    s.capacity = 10000;
    s.backend[0] = '\0';
    strcpy(s.backend, "cpu");
    return s;
}

START_TEST(every_operation)
{
    floe_backend *be;
    ck_assert_int_eq(floe_backend_cpu_create(2, &be, NULL), FLOE_OK);
    ck_assert_str_eq(floe_backend_name(be), "cpu");
    floe_spec s = map_spec();
    floe_table *t;
    ck_assert_int_eq(floe_table_create(be, &s, &t, NULL), FLOE_OK);
    ck_assert_uint_ne(t->spec.seed, 0);

    uint64_t keys[3] = {7, 8, 7}, ids[3];
    uint32_t vals[3] = {70, 80, 71}, vout[3];
    uint8_t res[3];
    floe_batch b = {.op = FLOE_OP_INSERT,
                    .flags = FLOE_BATCH_WANT_IDS | FLOE_BATCH_WANT_VALUES,
                    .keys = keys,
                    .n = 3,
                    .values = vals,
                    .values_len = sizeof vals,
                    .results = res,
                    .ids = ids,
                    .values_out = vout};
    ck_assert_int_eq(floe_table_run(t, &b), FLOE_OK);
    ck_assert_uint_eq(b.counts.inserted, 2);
    ck_assert_uint_eq(b.counts.present, 1);
    ck_assert_uint_eq(res[2], FLOE_PRESENT);
    ck_assert_uint_eq(vout[2], 70);

    floe_batch f = {
        .op = FLOE_OP_FIND, .flags = FLOE_BATCH_WANT_VALUES, .keys = keys, .n = 2, .results = res, .values_out = vout};
    ck_assert_int_eq(floe_table_run(t, &f), FLOE_OK);
    ck_assert_uint_eq(vout[0], 70);
    ck_assert_uint_eq(vout[1], 80);

    floe_batch st = {.op = FLOE_OP_STATS};
    ck_assert_int_eq(floe_table_run(t, &st), FLOE_OK);
    ck_assert_uint_eq(st.stats.keys, 2);
    ck_assert_str_eq(st.stats.backend, "cpu");

    uint64_t sk[16];
    uint32_t sv[16];
    floe_batch sc = {
        .op = FLOE_OP_SCAN, .flags = FLOE_BATCH_WANT_VALUES, .limit = 16, .scan_keys = sk, .scan_values = sv};
    size_t got = 0;
    do {
        ck_assert_int_eq(floe_table_run(t, &sc), FLOE_OK);
        got += sc.scan_n;
        sc.cursor = sc.next;
        sc.cursor_set = 1;
    } while (!sc.scan_done);
    ck_assert_uint_eq(got, 2);

    char path[] = "/tmp/floe-be-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    floe_batch sv_b = {.op = FLOE_OP_SAVE, .path = path};
    ck_assert_int_eq(floe_table_run(t, &sv_b), FLOE_OK);
    floe_batch rb = {.op = FLOE_OP_REBUILD};
    ck_assert_int_eq(floe_table_run(t, &rb), FLOE_OK);

    floe_batch er = {.op = FLOE_OP_ERASE, .keys = keys, .n = 1, .results = res};
    ck_assert_int_eq(floe_table_run(t, &er), FLOE_OK);
    ck_assert_uint_eq(er.counts.erased, 1);

    /* an invalid batch fails with its message and changes nothing: the door
     * (floe_request_check) says so directly, and floe_table_run through it */
    uint64_t wide = (uint64_t)1 << 32;
    const char *why = "table be: key 4294967296 at index 0 does not fit in key_bits = 32 (must be below 2^32)";
    floe_errinfo err;
    size_t n = 1;
    ck_assert_int_eq(floe_request_check(&t->spec, FLOE_OP_INSERT, 0, &wide, 8, vals, 4, &n, &err), FLOE_ERR_INVALID);
    ck_assert_str_eq(err.msg, why);
    ck_assert_uint_eq(n, 0);
    floe_batch before = {.op = FLOE_OP_STATS};
    ck_assert_int_eq(floe_table_run(t, &before), FLOE_OK);
    floe_batch bad = {.op = FLOE_OP_INSERT, .keys = &wide, .n = 1, .values = vals, .values_len = 4, .results = res};
    ck_assert_int_eq(floe_table_run(t, &bad), FLOE_ERR_INVALID);
    ck_assert(strstr(bad.error.msg, "key_bits") != NULL);
    ck_assert_str_eq(bad.error.msg, why);
    ck_assert_uint_eq(bad.counts.inserted, 0);
    floe_batch after = {.op = FLOE_OP_STATS};
    ck_assert_int_eq(floe_table_run(t, &after), FLOE_OK);
    ck_assert_uint_eq(after.stats.keys, before.stats.keys);
    ck_assert_uint_eq(after.stats.keys, 1); /* 8: key 7 was erased */
    ck_assert_uint_eq(after.stats.level[0].used + after.stats.level[1].used + after.stats.level[2].used,
                      before.stats.level[0].used + before.stats.level[1].used + before.stats.level[2].used);

    floe_table *u;
    ck_assert_int_eq(floe_table_load(be, path, &u, NULL), FLOE_OK);
    floe_batch st2 = {.op = FLOE_OP_STATS};
    ck_assert_int_eq(floe_table_run(u, &st2), FLOE_OK);
    ck_assert_uint_eq(st2.stats.keys, 2);
    unlink(path);
    floe_table_destroy(u);
    floe_table_destroy(t);
    floe_backend_destroy(be);
}
END_TEST

/* COPY holds the table as it was when the copy ran: keys inserted after it
 * are not in the file written from the image, every key before it is. */
static void copy_then_change(floe_spec s)
{
    floe_backend *be;
    ck_assert_int_eq(floe_backend_cpu_create(2, &be, NULL), FLOE_OK);
    floe_table *t;
    ck_assert_int_eq(floe_table_create(be, &s, &t, NULL), FLOE_OK);
    enum { N = 5000 };
    static uint64_t keys[2 * N];
    static uint32_t vec[2 * N * 4];
    static uint8_t res[2 * N];
    for (size_t i = 0; i < 2 * N; i++) {
        keys[i] = i * 2654435761u % (1u << 30) + 1;
        for (int w = 0; w < 4; w++)
            vec[i * 4 + w] = (uint32_t)(i * 7 + (size_t)w);
    }
    const bool tree = s.kind == FLOE_KIND_TREE;
    floe_batch in = {.op = FLOE_OP_INSERT, .keys = keys, .vectors = tree ? vec : NULL, .n = N, .results = res};
    if (tree)
        in.keys = NULL;
    ck_assert_int_eq(floe_table_run(t, &in), FLOE_OK);
    floe_batch cp = {.op = FLOE_OP_COPY};
    ck_assert_int_eq(floe_table_run(t, &cp), FLOE_OK);
    ck_assert_ptr_nonnull(cp.image);
    floe_batch in2 = in;
    in2.keys = tree ? NULL : keys + N;
    in2.vectors = tree ? vec + N * 4 : NULL;
    ck_assert_int_eq(floe_table_run(t, &in2), FLOE_OK);
    ck_assert_uint_eq(in2.counts.inserted, N);
    char path[] = "/tmp/floe-copy-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(floe_file_image_save(path, cp.image, NULL), FLOE_OK);
    floe_file_image_free(cp.image);
    floe_table *u;
    ck_assert_int_eq(floe_table_load(be, path, &u, NULL), FLOE_OK);
    floe_batch f = {
        .op = FLOE_OP_FIND, .keys = tree ? NULL : keys, .vectors = tree ? vec : NULL, .n = 2 * N, .results = res};
    ck_assert_int_eq(floe_table_run(u, &f), FLOE_OK);
    for (size_t i = 0; i < 2 * N; i++)
        ck_assert_uint_eq(res[i], i < N ? FLOE_PRESENT : FLOE_ABSENT);
    unlink(path);
    floe_table_destroy(u);
    floe_table_destroy(t);
    floe_backend_destroy(be);
}

START_TEST(copy_is_a_point_in_time)
{
    floe_spec s = map_spec();
    s.kind = FLOE_KIND_SET;
    s.value_bytes = 0;
    copy_then_change(s);
    floe_spec tr;
    floe_spec_default(&tr);
    strcpy(tr.name, "tr");
    tr.kind = FLOE_KIND_TREE;
    tr.key_bits = 0;
    tr.words = 4;
    tr.capacity = 20000;
    strcpy(tr.backend, "cpu");
    copy_then_change(tr);
}
END_TEST

typedef struct order_check {
    atomic_int next;
    atomic_int errors;
} order_check;

static void in_order(floe_batch *b)
{
    order_check *oc = b->user;
    int me = (int)(intptr_t)b->keys[0];
    if (atomic_fetch_add(&oc->next, 1) != me || b->status != FLOE_OK)
        atomic_fetch_add(&oc->errors, 1);
}

START_TEST(batches_complete_in_order)
{
    enum { N = 300 };
    floe_backend *be;
    ck_assert_int_eq(floe_backend_cpu_create(2, &be, NULL), FLOE_OK);
    floe_spec s = map_spec();
    s.kind = FLOE_KIND_SET;
    s.value_bytes = 0;
    floe_table *t;
    ck_assert_int_eq(floe_table_create(be, &s, &t, NULL), FLOE_OK);
    static uint64_t keys[N][50];
    static uint8_t res[N][50];
    static floe_batch b[N];
    order_check oc;
    atomic_init(&oc.next, 0);
    atomic_init(&oc.errors, 0);
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < 50; k++)
            keys[i][k] = k == 0 ? (uint64_t)i : (uint64_t)(i * 50 + k);
        b[i] = (floe_batch){.op = i % 3 == 2 ? FLOE_OP_FIND : FLOE_OP_INSERT,
                            .keys = keys[i],
                            .n = 50,
                            .results = res[i],
                            .done = in_order,
                            .user = &oc};
        floe_table_submit(t, &b[i]);
    }
    floe_table_destroy(t); /* waits for every submitted batch */
    ck_assert_int_eq(atomic_load(&oc.next), N);
    ck_assert_int_eq(atomic_load(&oc.errors), 0);
    floe_backend_destroy(be);
}
END_TEST

Suite *backend_suite(void)
{
    Suite *s = suite_create("backend");
    TCase *tc = tcase_create("backend");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, every_operation);
    tcase_add_test(tc, batches_complete_in_order);
    tcase_add_test(tc, copy_is_a_point_in_time);
    suite_add_tcase(s, tc);
    return s;
}
