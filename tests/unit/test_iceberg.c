/*
 * test_iceberg.c - the CPU engine against the reference model: random
 * batches with heavy duplication, for many key widths, table sizes, SET and
 * MAP, with and without growth, up to fill 0.95.  Every per-key answer, value
 * and id is checked, and at the end the table's contents equal the model's.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "iceberg.h"
#include "tablefile.h"
#include "testutil.h"

typedef struct workload {
    uint32_t key_bits;
    uint64_t capacity;
    uint32_t value_bytes; /* 0: SET */
    bool grow;
    double target_fill;
    int max_rounds;
    uint32_t three; /* 1: a table of 1.5 x 2^a primary buckets, a as iceberg_create picks */
} workload;

static floe_spec make_spec(uint32_t kb, uint64_t cap, uint32_t vb, bool grow, uint64_t seed)
{
    floe_spec s;
    floe_spec_default(&s);
    strcpy(s.name, "t");
    s.kind = vb ? FLOE_KIND_MAP : FLOE_KIND_SET;
    s.key_bits = kb;
    s.capacity = cap;
    s.value_bytes = vb;
    s.grow = grow;
    s.seed = seed;
    return s;
}

static uint64_t get_value(const uint8_t *p, uint32_t vb, size_t i)
{
    uint64_t v = 0;
    memcpy(&v, p + i * vb, vb);
    return v;
}

/* Checks that the table holds exactly the model's keys (and values). */
static void check_contents(iceberg *t, const model *m, uint32_t vb)
{
    floe_table_stats st;
    iceberg_stats(t, &st);
    ck_assert_uint_eq(st.keys, m->live);

    /* scan: every key exactly once, in pages */
    model seen;
    model_init(&seen, m->live);
    uint64_t keys[777];
    uint8_t vals[777 * 8];
    floe_scan_pos cur, next;
    int done = 0, first = 1;
    size_t total = 0;
    while (!done) {
        size_t n;
        floe_errinfo err;
        ck_assert_int_eq(iceberg_scan(t, first ? NULL : &cur, 777, keys, vb ? vals : NULL, &n, &next, &done, &err),
                         FLOE_OK);
        first = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t v;
            ck_assert_msg(model_get(m, keys[i], &v, NULL), "scan returned key %llu that is not stored",
                          (unsigned long long)keys[i]);
            ck_assert_msg(!model_get(&seen, keys[i], NULL, NULL), "scan returned key %llu twice",
                          (unsigned long long)keys[i]);
            model_put(&seen, keys[i], 0, 0);
            if (vb)
                ck_assert_uint_eq(get_value(vals, vb, i), v);
        }
        total += n;
        cur = next;
    }
    ck_assert_uint_eq(total, m->live);
    model_free(&seen);

    /* find every model key: PRESENT with its value, ids all distinct */
    size_t n = 0;
    uint64_t *all = malloc((m->live + 1) * sizeof *all);
    for (size_t i = 0; i < m->cap; i++)
        if (m->state[i] == 1)
            all[n++] = m->keys[i];
    uint8_t *res = malloc(n + 1);
    uint64_t *ids = malloc((n + 1) * sizeof *ids);
    uint8_t *vout = malloc((n + 1) * 8);
    ck_assert_int_eq(iceberg_find(t, all, n, res, ids, vb ? vout : NULL, NULL, NULL), FLOE_OK);
    model idset;
    model_init(&idset, n);
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(res[i] == FLOE_PRESENT, "stored key %llu not found", (unsigned long long)all[i]);
        ck_assert_uint_lt(ids[i], st.slots);
        ck_assert_msg(!model_get(&idset, ids[i], NULL, NULL), "two keys share id %llu", (unsigned long long)ids[i]);
        model_put(&idset, ids[i], 0, 0);
        if (vb) {
            uint64_t v;
            model_get(m, all[i], &v, NULL);
            ck_assert_uint_eq(get_value(vout, vb, i), v);
        }
    }
    model_free(&idset);
    free(all);
    free(res);
    free(ids);
    free(vout);
}

static void run_workload(const workload *w, floe_pool *pool, uint64_t seed)
{
    const uint32_t vb = w->value_bytes;
    floe_spec spec = make_spec(w->key_bits, w->capacity, vb, w->grow, seed | 1);
    iceberg *t;
    floe_errinfo err;
    const uint32_t a = iceberg_addr_bits_for(w->key_bits, w->capacity);
    if (w->three)
        ck_assert_msg(iceberg_create_sized(&spec, a ? a : 1, 1, pool, &t, &err) == FLOE_OK, "%s", err.msg);
    else
        ck_assert_int_eq(iceberg_create(&spec, pool, &t, &err), FLOE_OK);
    floe_table_stats st;
    iceberg_stats(t, &st);

    /* The key universe: all keys for narrow widths, else random keys about
     * 1.3x the slots so that the table can fill and keys repeat. */
    uint64_t mask = floe_mask_bits(w->key_bits);
    uint64_t ucount = w->key_bits <= 16 ? mask + 1 : (uint64_t)(st.slots * 1.3) + 8;
    if (w->grow)
        ucount = w->capacity * 40 + 64;
    uint64_t *universe = malloc(ucount * sizeof *universe);
    uint64_t r = seed * 0x9E3779B97F4A7C15ull + 1;
    for (uint64_t i = 0; i < ucount; i++)
        universe[i] = w->key_bits <= 16 ? i : (rng_next(&r) & mask);

    model m, idm;
    model_init(&m, ucount);
    model_init(&idm, ucount);
    uint64_t idgen = 0;
    const size_t maxb = 5000;
    uint64_t *keys = malloc(maxb * sizeof *keys);
    uint8_t *vin = malloc(maxb * 8), *vout = malloc(maxb * 8), *res = malloc(maxb);
    uint64_t *ids = malloc(maxb * sizeof *ids);
    bool saw_full = false;

    for (int round = 0; round < w->max_rounds; round++) {
        iceberg_stats(t, &st);
        if (st.fill >= w->target_fill && !w->grow)
            break;
        if (st.generation != idgen) { /* a rebuild moved every key */
            model_free(&idm);
            model_init(&idm, ucount);
            idgen = st.generation;
        }
        size_t n = 1 + (size_t)rng_below(&r, round % 7 == 0 ? maxb : 300);
        for (size_t i = 0; i < n; i++) {
            /* a third of the keys repeat one already in this batch */
            keys[i] = (i > 0 && rng_below(&r, 3) == 0) ? keys[rng_below(&r, i)] : universe[rng_below(&r, ucount)];
            uint64_t v = rng_next(&r);
            memcpy(vin + i * vb, &v, vb);
        }
        unsigned op = (unsigned)rng_below(&r, 10); /* 0-6 insert, 7-8 find, 9 erase */
        floe_answer_counts c;
        if (op <= 6) {
            bool ow = vb && rng_below(&r, 2);
            ck_assert_int_eq(iceberg_insert(t, keys, n, vb ? vin : NULL, n * vb,
                                            ow ? FLOE_VALUES_OVERWRITE : FLOE_VALUES_KEEP, res, ids, vb ? vout : NULL,
                                            &c, &err),
                             FLOE_OK);
            iceberg_stats(t, &st);
            bool same_gen = st.generation == idgen;
            for (size_t i = 0; i < n; i++) {
                uint64_t old, want_id, nv = get_value(vin, vb, i);
                if (model_get(&m, keys[i], &old, NULL)) {
                    ck_assert_msg(res[i] == FLOE_PRESENT, "round %d: key %llu stored but answer %u", round,
                                  (unsigned long long)keys[i], res[i]);
                    if (vb)
                        ck_assert_uint_eq(get_value(vout, vb, i), old);
                    if (ow)
                        model_put(&m, keys[i], nv, 0);
                } else if (res[i] == FLOE_FULL) {
                    ck_assert(!w->grow);
                    saw_full = true;
                    ck_assert_uint_eq(ids[i], FLOE_NO_ID);
                    continue;
                } else {
                    ck_assert_msg(res[i] == FLOE_INSERTED, "round %d: new key %llu answered %u", round,
                                  (unsigned long long)keys[i], res[i]);
                    if (vb)
                        ck_assert_uint_eq(get_value(vout, vb, i), nv);
                    model_put(&m, keys[i], nv, 0);
                }
                /* a key's id is stable while the generation stays */
                if (same_gen && model_get(&idm, keys[i], &want_id, NULL))
                    ck_assert_uint_eq(ids[i], want_id);
                else if (same_gen)
                    model_put(&idm, keys[i], ids[i], 0);
            }
        } else if (op <= 8) {
            ck_assert_int_eq(iceberg_find(t, keys, n, res, ids, vb ? vout : NULL, &c, &err), FLOE_OK);
            for (size_t i = 0; i < n; i++) {
                uint64_t v;
                bool have = model_get(&m, keys[i], &v, NULL);
                ck_assert_msg(res[i] == (have ? FLOE_PRESENT : FLOE_ABSENT), "find of %llu: answer %u, model %d",
                              (unsigned long long)keys[i], res[i], have);
                if (vb)
                    ck_assert_uint_eq(get_value(vout, vb, i), have ? v : 0);
                if (!have)
                    ck_assert_uint_eq(ids[i], FLOE_NO_ID);
            }
        } else {
            ck_assert_int_eq(iceberg_erase(t, keys, n, res, &c, &err), FLOE_OK);
            for (size_t i = 0; i < n; i++) {
                bool had = model_del(&m, keys[i]);
                ck_assert_uint_eq(res[i], had ? FLOE_ERASED : FLOE_ABSENT);
                if (had)
                    model_del(&idm, keys[i]);
            }
        }
        /* the counts agree with the answers */
        uint64_t sum[5] = {0};
        for (size_t i = 0; i < n; i++)
            sum[res[i]]++;
        ck_assert_uint_eq(c.inserted, sum[FLOE_INSERTED]);
        ck_assert_uint_eq(c.present, sum[FLOE_PRESENT]);
        ck_assert_uint_eq(c.absent, sum[FLOE_ABSENT]);
        ck_assert_uint_eq(c.full, sum[FLOE_FULL]);
        ck_assert_uint_eq(c.erased, sum[FLOE_ERASED]);
    }
    iceberg_stats(t, &st);
    if (!w->grow && w->key_bits > 16)
        ck_assert_msg(st.fill >= w->target_fill, "workload stopped at fill %.3f", st.fill);
    if (w->grow)
        ck_assert_msg(st.generation > 0, "a growing table that took %llu keys never grew", (unsigned long long)st.keys);
    (void)saw_full;
    check_contents(t, &m, vb);
    iceberg_destroy(t);
    model_free(&m);
    model_free(&idm);
    free(universe);
    free(keys);
    free(vin);
    free(vout);
    free(res);
    free(ids);
}

static const uint32_t WIDTHS[] = {1, 7, 16, 31, 40, 64};

START_TEST(exact_set_to_095)
{
    floe_pool *pool;
    ck_assert_int_eq(floe_pool_create(3, &pool, NULL), FLOE_OK);
    workload w = {WIDTHS[_i], 3000, 0, false, 0.95, 4000, 0};
    run_workload(&w, pool, 100 + (uint64_t)_i);
    w.capacity = 100;
    run_workload(&w, NULL, 200 + (uint64_t)_i);
    w.capacity = 40000;
    w.max_rounds = 40000;
    run_workload(&w, pool, 250 + (uint64_t)_i);
    floe_pool_destroy(pool);
}
END_TEST

START_TEST(exact_map_to_095)
{
    floe_pool *pool;
    ck_assert_int_eq(floe_pool_create(2, &pool, NULL), FLOE_OK);
    workload w = {WIDTHS[_i], 20000, 8, false, 0.95, 20000, 0};
    run_workload(&w, pool, 300 + (uint64_t)_i);
    w.value_bytes = 4;
    w.capacity = 500;
    run_workload(&w, pool, 400 + (uint64_t)_i);
    floe_pool_destroy(pool);
}
END_TEST

START_TEST(exact_with_growth)
{
    floe_pool *pool;
    ck_assert_int_eq(floe_pool_create(2, &pool, NULL), FLOE_OK);
    uint32_t kb = WIDTHS[_i];
    if (kb >= 16) { /* narrower keys never need to grow past their universe */
        workload w = {kb, 64, 0, true, 1.0, 600, 0};
        run_workload(&w, pool, 500 + (uint64_t)_i);
        workload wm = {kb, 64, 4, true, 1.0, 600, 0};
        run_workload(&wm, pool, 600 + (uint64_t)_i);
    }
    floe_pool_destroy(pool);
}
END_TEST

/* Tables of 1.5 x 2^a primary buckets (a TREE's root tables grow so), SET
 * and MAP, filled to 0.95 against the model. */
START_TEST(exact_in_three_tables)
{
    workload w = {WIDTHS[_i], 3000, 0, false, 0.95, 4000, 1};
    run_workload(&w, NULL, 700 + (uint64_t)_i);
    workload wm = {WIDTHS[_i], 500, 8, false, 0.95, 4000, 1};
    run_workload(&wm, NULL, 800 + (uint64_t)_i);
}
END_TEST

/* Rebuilds between sizes of both kinds keep every key, and a file keeps
 * the kind: 2^a -> 1.5 x 2^a -> 2^(a+1) -> (save, load) 1.5 x 2^(a+1). */
START_TEST(rebuild_through_three_sizes)
{
    floe_spec spec = make_spec(40, 20000, 4, false, 91);
    iceberg *t;
    floe_errinfo err;
    ck_assert_int_eq(iceberg_create_sized(&spec, 9, 0, NULL, &t, &err), FLOE_OK); /* every level has an address bit */
    enum { N = 16000 };
    static uint64_t keys[N];
    static uint32_t vals[N];
    static uint8_t res[N];
    uint64_t r = 17;
    model m;
    model_init(&m, N);
    for (int i = 0; i < N; i++) {
        keys[i] = rng_next(&r) & floe_mask_bits(40);
        vals[i] = (uint32_t)i;
    }
    ck_assert_int_eq(iceberg_insert(t, keys, N, vals, sizeof vals, 0, res, NULL, NULL, NULL, &err), FLOE_OK);
    for (int i = 0; i < N; i++)
        if (res[i] == FLOE_INSERTED)
            model_put(&m, keys[i], vals[i], 0);
    ck_assert_uint_gt(m.live, N / 2);
    floe_table_stats st;
    iceberg_stats(t, &st);
    const uint64_t slots = st.slots;
    const uint32_t steps[][2] = {{9, 1}, {10, 0}, {10, 1}};
    for (int k = 0; k < 3; k++) {
        ck_assert_msg(iceberg_rebuild(t, steps[k][0], steps[k][1], &err) == FLOE_OK, "%s", err.msg);
        iceberg_stats(t, &st);
        ck_assert_uint_eq(st.slots * 2, slots * (k == 0 ? 3 : k == 1 ? 4 : 6));
        check_contents(t, &m, 4);
    }
    /* the FULL ones of the first batch go in now */
    ck_assert_int_eq(iceberg_insert(t, keys, N, vals, sizeof vals, 0, res, NULL, NULL, NULL, &err), FLOE_OK);
    for (int i = 0; i < N; i++)
        if (res[i] == FLOE_INSERTED)
            model_put(&m, keys[i], vals[i], 0);
    check_contents(t, &m, 4);
    char path[] = "/tmp/floe-three-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_msg(iceberg_save(t, path, &err) == FLOE_OK, "%s", err.msg);
    floe_file_header h;
    ck_assert_int_eq(floe_file_header_of(path, NULL, &h, &err), FLOE_OK);
    ck_assert_uint_eq(h.three, 1);
    ck_assert_uint_eq(h.layout_version, FLOE_LAYOUT_THREE);
    iceberg_destroy(t);
    ck_assert_msg(iceberg_load(path, 0, NULL, &t, &err) == FLOE_OK, "%s", err.msg);
    unlink(path);
    iceberg_stats(t, &st);
    ck_assert_uint_eq(st.slots * 2, slots * 6);
    check_contents(t, &m, 4);
    /* sizes that are none: 1.5 x 2^0, a code of 2 */
    ck_assert_int_eq(iceberg_rebuild(t, 0, 2, &err), FLOE_OK); /* 0: the current size, whatever the code */
    floe_spec s1 = make_spec(1, 2, 0, false, 3);
    iceberg *u = NULL;
    ck_assert_int_eq(iceberg_create_sized(&s1, 0, 1, NULL, &u, &err), FLOE_ERR_INVALID);
    ck_assert_int_eq(iceberg_create_sized(&spec, 9, 2, NULL, &u, &err), FLOE_ERR_INVALID);
    ck_assert_int_eq(iceberg_rebuild(t, 10, 2, &err), FLOE_ERR_INVALID);
    ck_assert_ptr_null(u);
    check_contents(t, &m, 4);
    iceberg_destroy(t);
    model_free(&m);
}
END_TEST

START_TEST(first_occurrence_wins)
{
    /* A batch of one key many times: the first is INSERTED, the rest PRESENT;
     * with upsert the last value stays and each occurrence sees the one before. */
    floe_spec spec = make_spec(40, 1000, 8, false, 9);
    iceberg *t;
    ck_assert_int_eq(iceberg_create(&spec, NULL, &t, NULL), FLOE_OK);
    uint64_t keys[6] = {5, 9, 5, 5, 9, 7};
    uint64_t vals[6] = {10, 20, 30, 40, 50, 60};
    uint64_t out[6], ids[6];
    uint8_t res[6];
    ck_assert_int_eq(iceberg_insert(t, keys, 6, vals, sizeof vals, FLOE_VALUES_OVERWRITE, res, ids, out, NULL, NULL),
                     FLOE_OK);
    const uint8_t want[6] = {FLOE_INSERTED, FLOE_INSERTED, FLOE_PRESENT, FLOE_PRESENT, FLOE_PRESENT, FLOE_INSERTED};
    const uint64_t want_out[6] = {10, 20, 10, 30, 20, 60};
    for (int i = 0; i < 6; i++) {
        ck_assert_uint_eq(res[i], want[i]);
        ck_assert_uint_eq(out[i], want_out[i]);
    }
    ck_assert_uint_eq(ids[0], ids[2]);
    ck_assert_uint_eq(ids[0], ids[3]);
    ck_assert_uint_eq(ids[1], ids[4]);
    ck_assert_uint_ne(ids[0], ids[1]);
    uint64_t got[3];
    uint64_t q[3] = {5, 9, 7};
    ck_assert_int_eq(iceberg_find(t, q, 3, res, NULL, got, NULL, NULL), FLOE_OK);
    ck_assert_uint_eq(got[0], 40);
    ck_assert_uint_eq(got[1], 50);
    ck_assert_uint_eq(got[2], 60);
    /* without overwrite, the first value stays and everyone sees it */
    uint64_t k2[3] = {11, 11, 11}, v2[3] = {1, 2, 3};
    ck_assert_int_eq(iceberg_insert(t, k2, 3, v2, sizeof v2, 0, res, NULL, out, NULL, NULL), FLOE_OK);
    ck_assert_uint_eq(res[0], FLOE_INSERTED);
    ck_assert_uint_eq(out[0], 1);
    ck_assert_uint_eq(out[1], 1);
    ck_assert_uint_eq(out[2], 1);
    /* erase: the first occurrence erases, the rest find nothing */
    uint64_t k3[3] = {5, 5, 12};
    ck_assert_int_eq(iceberg_erase(t, k3, 3, res, NULL, NULL), FLOE_OK);
    ck_assert_uint_eq(res[0], FLOE_ERASED);
    ck_assert_uint_eq(res[1], FLOE_ABSENT);
    ck_assert_uint_eq(res[2], FLOE_ABSENT);
    iceberg_destroy(t);
}
END_TEST

START_TEST(tombstones_and_rebuild)
{
    floe_spec spec = make_spec(40, 5000, 0, false, 21);
    iceberg *t;
    ck_assert_int_eq(iceberg_create(&spec, NULL, &t, NULL), FLOE_OK);
    enum { N = 4000 };
    static uint64_t keys[N], ids[N], ids2[N];
    static uint8_t res[N];
    uint64_t r = 77;
    for (int i = 0; i < N; i++)
        keys[i] = rng_next(&r) & floe_mask_bits(40);
    ck_assert_int_eq(iceberg_insert(t, keys, N, NULL, 0, 0, res, ids, NULL, NULL, NULL), FLOE_OK);
    /* erase the first half */
    ck_assert_int_eq(iceberg_erase(t, keys, N / 2, res, NULL, NULL), FLOE_OK);
    for (int i = 0; i < N / 2; i++)
        ck_assert_uint_eq(res[i], FLOE_ERASED);
    floe_table_stats st;
    iceberg_stats(t, &st);
    ck_assert_uint_eq(st.keys, N / 2);
    ck_assert_uint_eq(st.tombstones, N / 2);
    ck_assert_uint_eq(st.generation, 0);
    ck_assert_int_eq(iceberg_find(t, keys, N, res, NULL, NULL, NULL, NULL), FLOE_OK);
    for (int i = 0; i < N; i++)
        ck_assert_uint_eq(res[i], i < N / 2 ? FLOE_ABSENT : FLOE_PRESENT);
    /* re-inserting erased keys: new slots, tombstones are not reused */
    ck_assert_int_eq(iceberg_insert(t, keys, N / 2, NULL, 0, 0, res, ids2, NULL, NULL, NULL), FLOE_OK);
    for (int i = 0; i < N / 2; i++) {
        ck_assert_uint_eq(res[i], FLOE_INSERTED);
        ck_assert_uint_ne(ids2[i], ids[i]);
    }
    iceberg_stats(t, &st);
    ck_assert_uint_eq(st.keys, N);
    ck_assert_uint_eq(st.tombstones, N / 2);
    /* the bytes of the slots in use: keys and tombstones, each level's at its rows' width */
    uint64_t in_use = 0, in_use_bytes = 0;
    for (int l = 0; l < FLOE_LEVELS; l++) {
        in_use += st.level[l].used;
        in_use_bytes += st.level[l].used * (st.level[l].row_bits / 8);
    }
    ck_assert_uint_eq(in_use, N + N / 2);
    ck_assert_uint_eq(st.used_bytes, in_use_bytes);
    ck_assert_uint_ge(st.used_bytes, (N + N / 2) * 2);
    /* a rebuild drops the tombstones, keeps every key, bumps the generation */
    floe_scan_pos stale = {0, st.generation};
    ck_assert_int_eq(iceberg_rebuild(t, 0, 0, NULL), FLOE_OK);
    iceberg_stats(t, &st);
    ck_assert_uint_eq(st.keys, N);
    ck_assert_uint_eq(st.tombstones, 0);
    ck_assert_uint_eq(st.generation, 1);
    ck_assert_int_eq(iceberg_find(t, keys, N, res, NULL, NULL, NULL, NULL), FLOE_OK);
    for (int i = 0; i < N; i++)
        ck_assert_uint_eq(res[i], FLOE_PRESENT);
    /* a scan cursor from before the rebuild is refused */
    uint64_t out[8];
    size_t n;
    floe_scan_pos next;
    int done;
    floe_errinfo err;
    ck_assert_int_eq(iceberg_scan(t, &stale, 8, out, NULL, &n, &next, &done, &err), FLOE_ERR_INVALID);
    ck_assert(strstr(err.msg, "rebuilt") != NULL);
    /* growing by hand: the size asked for (from 1.5 x 2^a, which 5000 keys get, to 2^(a+1)) */
    floe_geometry g;
    floe_geometry_init(&g, 40, st.level[0].buckets_log2 + 1, 0, 0);
    ck_assert_int_eq(iceberg_rebuild(t, st.level[0].buckets_log2 + 1, 0, NULL), FLOE_OK);
    iceberg_stats(t, &st);
    ck_assert_uint_eq(st.slots, g.total_slots);
    ck_assert_uint_eq(st.keys, N);
    iceberg_destroy(t);
}
END_TEST

START_TEST(growth_on_full_never_reports_full)
{
    /* max_fill 1.0: growth comes only from FULL keys, which are retried. */
    floe_spec spec = make_spec(40, 10, 0, true, 31);
    spec.max_fill = 1.0;
    iceberg *t;
    ck_assert_int_eq(iceberg_create(&spec, NULL, &t, NULL), FLOE_OK);
    enum { N = 20000 };
    static uint64_t keys[N], ids[N];
    static uint8_t res[N];
    uint64_t r = 99;
    for (int i = 0; i < N; i++)
        keys[i] = rng_next(&r) & floe_mask_bits(40);
    floe_answer_counts c;
    ck_assert_int_eq(iceberg_insert(t, keys, N, NULL, 0, 0, res, ids, NULL, &c, NULL), FLOE_OK);
    ck_assert_uint_eq(c.full, 0);
    floe_table_stats st;
    iceberg_stats(t, &st);
    ck_assert_uint_gt(st.generation, 0);
    ck_assert_uint_eq(st.keys, c.inserted);
    /* the ids returned are those of the final table */
    uint64_t ids2[N];
    ck_assert_int_eq(iceberg_find(t, keys, N, res, ids2, NULL, NULL, NULL), FLOE_OK);
    for (int i = 0; i < N; i++) {
        ck_assert_uint_eq(res[i], FLOE_PRESENT);
        ck_assert_uint_eq(ids2[i], ids[i]);
    }
    iceberg_destroy(t);
}
END_TEST

/* A growing table grows before a batch whose new keys would take it past
 * max_fill (issue 41, 11: it grew only once keys came back FULL, stalling
 * the batch that met it with the copy of the whole table and a retry):
 * after every insert of fresh keys its fill is at most max_fill, and every
 * key is there with its value, SET and MAP, batches of two sizes. */
START_TEST(growth_comes_before_the_batch)
{
    static const uint32_t vbs[2] = {0, 8};
    static const size_t batch[2] = {3000, 20000};
    for (int k = 0; k < 4; k++) {
        const uint32_t vb = vbs[k % 2];
        floe_spec spec = make_spec(40, 10000, vb, true, 77 + (uint64_t)k);
        iceberg *t;
        ck_assert_int_eq(iceberg_create(&spec, NULL, &t, NULL), FLOE_OK);
        const size_t n = batch[k / 2], rounds = 200000 / n;
        uint64_t *keys = malloc(n * 8), *vals = malloc(n * 8), r = 5 + (uint64_t)k;
        uint8_t *res = malloc(n);
        ck_assert(keys && vals && res);
        floe_table_stats st;
        for (size_t round = 0; round < rounds; round++) {
            for (size_t i = 0; i < n; i++) {
                keys[i] = (round * n + i) * 0x9E3779B97F4A7C15ull >> 24; /* fresh 40-bit keys */
                vals[i] = rng_next(&r);
            }
            floe_answer_counts c;
            ck_assert_int_eq(
                iceberg_insert(t, keys, n, vb ? vals : NULL, n * vb, FLOE_VALUES_KEEP, res, NULL, NULL, &c, NULL),
                FLOE_OK);
            ck_assert_uint_eq(c.inserted, n);
            iceberg_stats(t, &st);
            ck_assert_msg(st.fill <= spec.max_fill + 1e-9, "round %zu: fill %.4f past %.2f (%llu keys, %llu slots)",
                          round, st.fill, spec.max_fill, (unsigned long long)st.keys, (unsigned long long)st.slots);
        }
        ck_assert_uint_eq(st.keys, rounds * n);
        ck_assert_uint_gt(st.generation, 3);
        uint64_t *got = malloc(n * 8);
        ck_assert_ptr_nonnull(got);
        ck_assert_int_eq(iceberg_find(t, keys, n, res, NULL, vb ? got : NULL, NULL, NULL), FLOE_OK);
        for (size_t i = 0; i < n; i++) {
            ck_assert_uint_eq(res[i], FLOE_PRESENT);
            if (vb)
                ck_assert_uint_eq(got[i], vals[i]);
        }
        free(got);
        free(keys);
        free(vals);
        free(res);
        iceberg_destroy(t);
    }
}
END_TEST

/* maxmemory and arrays made ahead: where the next size's arrays are made
 * already (in the memory the budget counts), a growth needs no more, so an
 * insert that may grow is not refused for them.  The budget below lets each
 * array be mapped but refuses a whole growth's worth at once, as floed's
 * would a few MiB from its limit.  Two in five of each batch's keys are
 * repeats: an insert that may grow (were all its keys new) but likely will
 * not comes once the next arrays are made, or grows the table first (the
 * code before counted them twice: refused at round 21). */
static uint64_t whole_growth;

static bool arrays_fit(uint64_t bytes)
{
    return bytes < whole_growth;
}

/* The bytes of the arrays of t's next size, by the rule (2^(a+1) primary
 * buckets from 2^a or 1.5 x 2^a), from its stats. */
static uint64_t next_growth_bytes(const floe_spec *spec, const floe_table_stats *st)
{
    const uint64_t buckets = st->level[0].slots / FLOE_L0_SLOTS;
    uint32_t a = 0;
    while (((uint64_t)1 << (a + 1)) <= buckets)
        a++; /* floor(log2): 2^a buckets, or 1.5 x 2^a */
    floe_geometry g;
    floe_geometry_init(&g, spec->key_bits, a + 1, 0, spec->seed);
    uint64_t bytes = 0;
    for (int l = 0; l < FLOE_LEVELS; l++)
        bytes += floe_level_words(&g.level[l]) * 8;
    return bytes + (spec->value_bytes ? g.total_slots * spec->value_bytes : 0);
}

START_TEST(arrays_made_ahead_count_once)
{
    floe_spec spec = make_spec(40, 200000, 0, true, 91); /* a batch a tenth of it: a growth a batch at most */
    iceberg *t;
    ck_assert_int_eq(iceberg_create(&spec, NULL, &t, NULL), FLOE_OK);
    enum { N = 20000, ROUNDS = 100 };
    uint64_t *keys = malloc(N * 8);
    uint8_t *res = malloc(N);
    ck_assert(keys && res);
    floe_table_stats st;
    uint64_t fresh = 0;
    for (int round = 0; round < ROUNDS; round++) {
        for (size_t i = 0; i < N; i++) /* three new keys, then two repeats of earlier ones */
            keys[i] = (i % 5 < 3 ? fresh++ : (uint64_t)(i * 7919) % fresh) * 0x9E3779B97F4A7C15ull >> 24;
        iceberg_stats(t, &st);
        whole_growth = next_growth_bytes(&spec, &st);
        floe_alloc_set_budget(arrays_fit);
        floe_errinfo err = {0};
        const floe_status s = iceberg_insert(t, keys, N, NULL, 0, FLOE_VALUES_KEEP, res, NULL, NULL, NULL, &err);
        floe_alloc_set_budget(NULL);
        ck_assert_msg(s == FLOE_OK, "round %d: %s (next size %llu bytes, now %llu, %llu slots, %llu keys)", round,
                      err.msg, (unsigned long long)whole_growth, (unsigned long long)st.memory_bytes,
                      (unsigned long long)st.slots, (unsigned long long)st.keys);
    }
    iceberg_stats(t, &st);
    ck_assert_uint_ge(st.generation, 3);
    ck_assert_uint_eq(st.keys, fresh);
    free(keys);
    free(res);
    iceberg_destroy(t);
}
END_TEST

START_TEST(no_growth_reports_full)
{
    /* 7-bit keys in... a tiny table cannot be FULL (one key per remainder), so
     * use 40-bit keys and a small table: FULL appears, and FULL keys are absent. */
    floe_spec spec = make_spec(40, 50, 0, false, 41);
    iceberg *t;
    ck_assert_int_eq(iceberg_create(&spec, NULL, &t, NULL), FLOE_OK);
    floe_table_stats st;
    iceberg_stats(t, &st);
    size_t n = st.slots * 2;
    uint64_t *keys = malloc(n * sizeof *keys);
    uint8_t *res = malloc(n), *res2 = malloc(n);
    uint64_t r = 3;
    for (size_t i = 0; i < n; i++)
        keys[i] = rng_next(&r) & floe_mask_bits(40);
    floe_answer_counts c;
    ck_assert_int_eq(iceberg_insert(t, keys, n, NULL, 0, 0, res, NULL, NULL, &c, NULL), FLOE_OK);
    ck_assert_uint_gt(c.full, 0);
    ck_assert_uint_le(c.inserted, st.slots);
    ck_assert_int_eq(iceberg_find(t, keys, n, res2, NULL, NULL, NULL, NULL), FLOE_OK);
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(res2[i], res[i] == FLOE_FULL ? FLOE_ABSENT : FLOE_PRESENT);
    iceberg_stats(t, &st);
    ck_assert_uint_eq(st.generation, 0);
    ck_assert_uint_eq(st.keys, c.inserted);
    free(keys);
    free(res);
    free(res2);
    iceberg_destroy(t);
}
END_TEST

/* floe_answer_counts_tally (eight answers a word) against a plain count, at
 * lengths around its word size, with every answer value, and with bytes that
 * are no answer (counted as none: a byte differing in its high bits too). */
/* The size a new table gets: it holds its capacity at fill 0.9, in the
 * fewer bytes of the two steps that could (2^a, or 1.5 x 2^(a-1) below it). */
static uint64_t geometry_bytes(const floe_geometry *g)
{
    uint64_t w = 0;
    for (int l = 0; l < FLOE_LEVELS; l++)
        w += floe_level_words(&g->level[l]);
    return w * 8;
}

START_TEST(size_for_capacity_is_the_smallest_step)
{
    const uint32_t widths[] = {24, 40, 64};
    unsigned threes = 0;
    for (int w = 0; w < 3; w++)
        for (uint64_t cap = 1000; cap < (1ull << 36); cap = cap * 9 / 8 + 1) {
            uint32_t three;
            const uint32_t a = iceberg_size_for(widths[w], cap, &three);
            ck_assert_int_eq(iceberg_size_check(widths[w], a, three, NULL), FLOE_OK);
            floe_geometry g;
            floe_geometry_init(&g, widths[w], a, three, 0);
            if (a == floe_max_addr_bits(widths[w]))
                continue; /* the largest size for the width: whatever it holds */
            ck_assert_msg((double)g.total_slots * FLOE_DEFAULT_MAX_FILL >= (double)cap, "%u bits, %llu keys: too small",
                          widths[w], (unsigned long long)cap);
            const uint32_t two = iceberg_addr_bits_for(widths[w], cap); /* the power of two that holds it */
            floe_geometry pow2, step;
            floe_geometry_init(&pow2, widths[w], two, 0, 0);
            ck_assert_uint_le(geometry_bytes(&g), geometry_bytes(&pow2));
            if (two > floe_min_addr_bits(widths[w])) {
                floe_geometry_init(&step, widths[w], two - 1, 1, 0);
                const bool fits = (double)step.total_slots * FLOE_DEFAULT_MAX_FILL >= (double)cap;
                if (fits && geometry_bytes(&step) <= geometry_bytes(&pow2))
                    ck_assert_msg(three == 1 && a == two - 1, "%u bits, %llu keys: 1.5 x 2^%u holds it in fewer bytes",
                                  widths[w], (unsigned long long)cap, two - 1);
            }
            threes += three;
        }
    ck_assert_uint_gt(threes, 0);
}
END_TEST

/* The steps a GPU table grows by (iceberg_step_up): 2^a -> 1.5 x 2^a ->
 * 2^(a+1), each a size every engine allows, the primary level 1.5 and 4/3
 * times larger in turn; and iceberg_bytes_at is the levels' bytes and the
 * values' at that size. */
START_TEST(step_up_goes_by_a_half_then_a_third)
{
    floe_spec spec;
    floe_spec_default(&spec);
    spec.kind = FLOE_KIND_MAP;
    spec.key_bits = 40;
    spec.value_bytes = 8;
    uint32_t a = 11, three = 0;
    floe_geometry g;
    floe_geometry_init(&g, spec.key_bits, a, three, 0);
    for (int i = 0; i < 8; i++) {
        const uint64_t primary = floe_level_slots(&g.level[0]);
        iceberg_step_up(&a, &three);
        ck_assert_uint_eq(three, i % 2 == 0 ? 1u : 0u);
        ck_assert_int_eq(iceberg_size_check(spec.key_bits, a, three, NULL), FLOE_OK);
        floe_geometry_init(&g, spec.key_bits, a, three, 0);
        const uint64_t now = floe_level_slots(&g.level[0]);
        ck_assert_uint_eq(three ? now * 2 : now * 3, three ? primary * 3 : primary * 4); /* 3/2, then 4/3 */
        ck_assert_uint_eq(iceberg_bytes_at(&spec, a, three), geometry_bytes(&g) + g.total_slots * 8);
    }
    ck_assert_uint_eq(a, 15);
    ck_assert_uint_eq(three, 0);
}
END_TEST

START_TEST(counts_tally_matches_plain_count)
{
    const size_t lens[] = {0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 1000, 1u << 20};
    uint64_t seed = 42;
    uint8_t *r = malloc(1u << 20);
    ck_assert_ptr_nonnull(r);
    for (int any_byte = 0; any_byte < 2; any_byte++) {
        for (size_t t = 0; t < sizeof lens / sizeof lens[0]; t++) {
            const size_t n = lens[t];
            uint64_t want[5] = {0};
            for (size_t i = 0; i < n; i++) {
                r[i] = (uint8_t)rng_below(&seed, any_byte ? 256 : 5);
                if (r[i] < 5)
                    want[r[i]]++;
            }
            floe_answer_counts c;
            floe_answer_counts_tally(&c, r, n);
            ck_assert_uint_eq(c.absent, want[FLOE_ABSENT]);
            ck_assert_uint_eq(c.present, want[FLOE_PRESENT]);
            ck_assert_uint_eq(c.inserted, want[FLOE_INSERTED]);
            ck_assert_uint_eq(c.full, want[FLOE_FULL]);
            ck_assert_uint_eq(c.erased, want[FLOE_ERASED]);
        }
    }
    free(r);
}
END_TEST

Suite *iceberg_suite(void)
{
    Suite *s = suite_create("iceberg");
    TCase *tc = tcase_create("exact");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, exact_set_to_095, 0, 6);
    tcase_add_loop_test(tc, exact_map_to_095, 0, 6);
    tcase_add_loop_test(tc, exact_with_growth, 0, 6);
    tcase_add_loop_test(tc, exact_in_three_tables, 0, 6);
    tcase_add_test(tc, rebuild_through_three_sizes);
    tcase_add_test(tc, first_occurrence_wins);
    tcase_add_test(tc, tombstones_and_rebuild);
    tcase_add_test(tc, growth_on_full_never_reports_full);
    tcase_add_test(tc, growth_comes_before_the_batch);
    tcase_add_test(tc, arrays_made_ahead_count_once);
    tcase_add_test(tc, no_growth_reports_full);
    tcase_add_test(tc, counts_tally_matches_plain_count);
    tcase_add_test(tc, size_for_capacity_is_the_smallest_step);
    tcase_add_test(tc, step_up_goes_by_a_half_then_a_third);
    suite_add_tcase(s, tc);
    return s;
}
