/*
 * test_ordered.c - the ORDERED engine (tables/ordered.h) against a reference
 * ordered map written plainly here (a sorted array, binary search, memmove):
 * random batches of inserts (with values, some overwriting), finds and
 * erases with heavy duplication inside batches, for key widths 1, 8, 31,
 * 40 and 64 and value widths 0, 4 and 8, every answer and value compared;
 * after each round the whole table read back in ascending and descending
 * pages of random sizes, ranges of random bounds (empty ones, lo > hi),
 * successors and predecessors of random keys and of keys beyond the ends,
 * min and max.  Enough keys for a tree of several levels, then erasures
 * down to nothing and back (leaves freed, the root collapsing).  A split
 * that finds no memory answers FULL and changes nothing else.  Large
 * inserts on the pool (a task a child of the root) answer as the serial
 * one, with memory failing too.  Save and
 * load keep every key and value (damaged files refused).  Bad specs are
 * refused.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../ordered_ref.h"
#include "alloc.h"
#include "ordered.h"
#include "tablefile.h"
#include "testutil.h"

/* ---- helpers ---- */

static floe_spec ordered_spec_for(uint32_t key_bits, uint32_t vb)
{
    floe_spec s;
    floe_spec_default(&s);
    strcpy(s.name, "o");
    s.kind = FLOE_KIND_ORDERED;
    s.key_bits = key_bits;
    s.value_bytes = vb;
    return s;
}

static uint64_t key_mask(uint32_t bits)
{
    return bits == 64 ? UINT64_MAX : (1ull << bits) - 1;
}

static uint64_t val_get(const uint8_t *v, uint32_t vb, size_t i)
{
    uint64_t x = 0;
    memcpy(&x, v + i * vb, vb);
    return x;
}

static void val_set(uint8_t *v, uint32_t vb, size_t i, uint64_t x)
{
    memcpy(v + i * vb, &x, vb);
}

/* A key from a pool of `distinct` keys spread over the width (heavy
 * duplication), sometimes any key of the width, sometimes an end. */
static uint64_t pick_key(uint64_t *rng, uint32_t bits, uint64_t distinct)
{
    const uint64_t r = rng_next(rng), m = key_mask(bits);
    if (r % 64 == 0)
        return r % 128 == 0 ? 0 : m;
    if (r % 8 == 1)
        return rng_next(rng) & m;
    const uint64_t j = rng_below(rng, distinct);
    return (j * 0x9E3779B97F4A7C15ull) & m; /* a fixed scatter of j */
}

/* The whole table read back in pages, both ways, against the reference. */
static void check_scan(ordered *t, const ref *r, uint32_t vb, uint64_t *rng)
{
    const size_t cap = r->n + 1;
    uint64_t *keys = malloc(cap * 8);
    uint8_t *vals = malloc(cap * 8 + 8);
    for (int desc = 0; desc < 2; desc++) {
        uint64_t lo = 0, hi = UINT64_MAX, next;
        size_t total = 0;
        bool done = false;
        while (!done) {
            const size_t limit = 1 + rng_below(rng, 300), room = cap - total < limit ? cap - total : limit;
            size_t n;
            ordered_range(t, lo, hi, desc, room, keys + total, vb ? vals + total * vb : NULL, &n, &next, &done);
            ck_assert_uint_le(n, room);
            total += n;
            ck_assert_uint_le(total, r->n);
            if (desc)
                hi = next;
            else
                lo = next;
        }
        ck_assert_uint_eq(total, r->n);
        for (size_t i = 0; i < total; i++) {
            const size_t at = desc ? r->n - 1 - i : i;
            ck_assert_msg(keys[i] == r->key[at], "%s scan: key %zu is %llx, expected %llx",
                          desc ? "descending" : "ascending", i, (unsigned long long)keys[i],
                          (unsigned long long)r->key[at]);
            if (vb)
                ck_assert_uint_eq(val_get(vals, vb, i), r->val[at]);
        }
    }
    free(keys);
    free(vals);
}

/* Ranges of random bounds, neighbours of random keys and of the ends, min and max. */
static void check_queries(ordered *t, const ref *r, uint32_t bits, uint32_t vb, uint64_t *rng)
{
    const uint64_t m = key_mask(bits);
    enum { Q = 64, LIMIT = 40 };
    uint64_t keys[LIMIT], q[Q], found[Q];
    uint8_t vals[LIMIT * 8], res[Q], qv[Q * 8];
    for (int i = 0; i < 20; i++) {
        uint64_t lo = rng_next(rng) & m, hi = rng_below(rng, 4) == 0 ? lo : rng_next(rng) & m;
        if (r->n && rng_below(rng, 2)) /* bounds on stored keys */
            lo = r->key[rng_below(rng, r->n)], hi = r->key[rng_below(rng, r->n)];
        const bool desc = rng_below(rng, 2);
        size_t n, want = 0;
        uint64_t next;
        bool done;
        ordered_range(t, lo, hi, desc, LIMIT, keys, vb ? vals : NULL, &n, &next, &done);
        if (lo > hi) { /* an empty range, nothing to continue */
            ck_assert_uint_eq(n, 0);
            ck_assert(done);
            continue;
        }
        const size_t first = ref_pos(r, lo);
        size_t last = ref_pos(r, hi);
        if (last < r->n && r->key[last] == hi)
            last++;
        const size_t in = last - first;
        want = in < LIMIT ? in : LIMIT;
        ck_assert_uint_eq(n, want);
        ck_assert(done == (in <= LIMIT));
        for (size_t k = 0; k < n; k++) {
            const size_t at = desc ? last - 1 - k : first + k;
            ck_assert_uint_eq(keys[k], r->key[at]);
            if (vb)
                ck_assert_uint_eq(val_get(vals, vb, k), r->val[at]);
        }
        if (!done)
            ck_assert_uint_eq(next, r->key[desc ? last - 1 - LIMIT : first + LIMIT]);
    }
    for (int i = 0; i < Q; i++)
        q[i] = i == 0 ? 0 : i == 1 ? m : (r->n && i % 3 == 0) ? r->key[rng_below(rng, r->n)] : rng_next(rng) & m;
    for (int pred = 0; pred < 2; pred++) {
        ck_assert_int_eq(ordered_neighbours(t, pred, q, Q, res, found, vb ? qv : NULL, NULL), FLOE_OK);
        for (int i = 0; i < Q; i++) {
            size_t at = ref_pos(r, q[i]); /* successor: first >= q */
            bool some = at < r->n;
            if (pred) { /* last <= q */
                if (at < r->n && r->key[at] == q[i])
                    some = true;
                else
                    some = at > 0, at--;
            }
            ck_assert_msg(res[i] == (some ? FLOE_PRESENT : FLOE_ABSENT), "%s of %llx: %u",
                          pred ? "predecessor" : "successor", (unsigned long long)q[i], res[i]);
            if (some) {
                ck_assert_uint_eq(found[i], r->key[at]);
                if (vb)
                    ck_assert_uint_eq(val_get(qv, vb, i), r->val[at]);
            }
        }
    }
    uint64_t k = 0;
    uint8_t v[8];
    ck_assert(ordered_min_max(t, false, &k, v) == (r->n > 0));
    if (r->n)
        ck_assert_uint_eq(k, r->key[0]);
    ck_assert(ordered_min_max(t, true, &k, v) == (r->n > 0));
    if (r->n) {
        ck_assert_uint_eq(k, r->key[r->n - 1]);
        if (vb)
            ck_assert_uint_eq(val_get(v, vb, 0), r->val[r->n - 1]);
    }
    floe_table_stats st;
    ordered_stats(t, &st);
    ck_assert_uint_eq(st.keys, r->n);
    ck_assert(st.memory_bytes > 0);
}

/* One batch of op (0 insert, 1 insert with overwrite, 2 find, 3 erase), checked key by key. */
static void run_batch(ordered *t, ref *r, int op, const uint64_t *keys, const uint8_t *vin, size_t n, uint32_t vb)
{
    uint8_t *res = malloc(n + 1), *vout = malloc(n * 8 + 8);
    floe_answer_counts c;
    memset(vout, 0xAB, n * 8 + 8);
    floe_status st = op <= 1   ? ordered_insert(t, keys, vb ? vin : NULL, n, op == 1, res, vb ? vout : NULL, &c, NULL)
                     : op == 2 ? ordered_find(t, keys, n, res, vb ? vout : NULL, &c, NULL)
                               : ordered_erase(t, keys, n, res, &c, NULL);
    ck_assert_int_eq(st, FLOE_OK);
    uint64_t tally[5] = {0};
    for (size_t i = 0; i < n; i++) {
        uint64_t wv;
        const uint8_t want = ref_apply(r, op, keys[i], vb && op <= 1 ? val_get(vin, vb, i) : 0, &wv);
        ck_assert_msg(res[i] == want, "op %d key %zu (%llx): %u, expected %u", op, i, (unsigned long long)keys[i],
                      res[i], want);
        if (vb && op <= 2)
            ck_assert_msg(val_get(vout, vb, i) == wv, "op %d key %zu: value %llx, expected %llx", op, i,
                          (unsigned long long)val_get(vout, vb, i), (unsigned long long)wv);
        tally[want]++;
    }
    ck_assert_uint_eq(c.inserted, tally[FLOE_INSERTED]);
    ck_assert_uint_eq(c.present, tally[FLOE_PRESENT]);
    ck_assert_uint_eq(c.absent, tally[FLOE_ABSENT]);
    ck_assert_uint_eq(c.erased, tally[FLOE_ERASED]);
    free(res);
    free(vout);
}

static const uint32_t WIDTHS[] = {1, 8, 31, 40, 64};

/* _i: key width by 3 value widths. */
START_TEST(ordered_against_reference)
{
    const uint32_t bits = WIDTHS[_i / 3], vb = (uint32_t[]){0, 4, 8}[_i % 3];
    floe_pool *pool = NULL;
    floe_errinfo err;
    ck_assert_int_eq(floe_pool_create(4, &pool, &err), FLOE_OK);
    floe_spec spec = ordered_spec_for(bits, vb);
    ordered *t;
    ck_assert_int_eq(ordered_create(&spec, pool, &t, &err), FLOE_OK);
    ref r = {0};
    uint64_t rng = 0x5EED0000ull + _i;
    const uint64_t distinct = bits <= 8 ? 300 : 60000;
    enum { B = 12000 };
    uint64_t *keys = malloc(B * 8);
    uint8_t *vals = malloc(B * 8);
    for (int round = 0; round < 24; round++) {
        /* rounds 0-11 fill, 12-17 erase most, 18 erases everything, 19-23 fill again */
        const int phase = round < 12 ? 0 : round < 18 ? 1 : round == 18 ? 2 : 0;
        const size_t n = 1 + rng_below(&rng, B);
        while (phase == 2 && r.n > 0) { /* every stored key, with random repeats, in shuffled batches */
            size_t m = 0;
            for (size_t i = 0; i < r.n && m + 2 <= B; i++)
                keys[m++] = r.key[rng_below(&rng, r.n)], keys[m++] = r.key[i];
            for (size_t i = m; i > 1; i--) {
                size_t j = rng_below(&rng, i);
                uint64_t x = keys[i - 1];
                keys[i - 1] = keys[j], keys[j] = x;
            }
            run_batch(t, &r, 3, keys, NULL, m, vb);
        }
        if (phase != 2) {
            for (size_t i = 0; i < n; i++) {
                keys[i] = pick_key(&rng, bits, distinct);
                if (vb)
                    val_set(vals, vb, i, rng_next(&rng));
            }
            const uint64_t pick = rng_below(&rng, 10);
            const int op = phase == 1 ? (pick < 7 ? 3 : 2) : (pick < 5 ? 0 : pick < 7 ? 1 : pick < 9 ? 2 : 3);
            run_batch(t, &r, op, keys, vals, n, vb);
        }
        check_queries(t, &r, bits, vb, &rng);
        if (round % 4 == 3 || round == 18)
            check_scan(t, &r, vb, &rng);
        floe_table_stats st;
        ordered_stats(t, &st);
        if (round == 11 && bits >= 31) /* more leaves than a root holds: inner nodes of two levels or more */
            ck_assert_uint_gt(st.slots / ORD_LEAF_KEYS, ORD_FANOUT);
        if (round == 18) { /* all erased: one empty leaf left, every other node freed */
            ck_assert_uint_eq(st.keys, 0);
            ck_assert_uint_eq(st.slots, ORD_LEAF_KEYS);
        }
    }
    check_scan(t, &r, vb, &rng);
    free(keys);
    free(vals);
    ref_free(&r);
    ordered_destroy(t);
    floe_pool_destroy(pool);
}
END_TEST

/* The answers of an insert (8-byte values) that may have run out of
 * memory: each key FULL (and not in the reference) or as the reference
 * says, which then takes it.  Returns the FULL answers. */
static size_t full_or_as_ref(ref *r, const uint64_t *keys, const uint8_t *vals, const uint8_t *res, size_t n)
{
    size_t full = 0;
    for (size_t i = 0; i < n; i++) {
        size_t at;
        const bool had = ref_has(r, keys[i], &at);
        if (res[i] == FLOE_FULL) {
            ck_assert(!had);
            full++;
        } else {
            ck_assert_uint_eq(res[i], had ? FLOE_PRESENT : FLOE_INSERTED);
            if (!had)
                ref_put(r, at, keys[i], val_get(vals, 8, i));
        }
    }
    return full;
}

/* A split with no memory for its new nodes answers FULL for the key that
 * needed it; the table is as before, and the next keys go in as usual. */
START_TEST(ordered_full_when_memory_runs_out)
{
    floe_spec spec = ordered_spec_for(40, 8);
    ordered *t;
    floe_errinfo err;
    ck_assert_int_eq(ordered_create(&spec, NULL, &t, &err), FLOE_OK);
    ref r = {0};
    uint64_t rng = 77;
    enum { N = 5000 };
    uint64_t keys[N];
    uint8_t vals[N * 8];
    for (size_t i = 0; i < N; i++) {
        keys[i] = rng_next(&rng) & key_mask(40);
        val_set(vals, 8, i, i);
    }
    run_batch(t, &r, 0, keys, vals, N, 8); /* a tree of two levels */
    size_t full = 0;
    for (int attempt = 0; attempt < 40; attempt++) {
        uint64_t k[64];
        uint8_t v[64 * 8], res[64];
        for (int i = 0; i < 64; i++) {
            k[i] = rng_next(&rng) & key_mask(40);
            val_set(v, 8, (size_t)i, rng_next(&rng));
        }
        floe_alloc_fail_nth(1 + rng_below(&rng, 2)); /* the next split's first or second node */
        ck_assert_int_eq(ordered_insert(t, k, v, 64, false, res, NULL, NULL, &err), FLOE_OK);
        floe_alloc_fail_nth(0);
        full += full_or_as_ref(&r, k, v, res, 64);
    }
    ck_assert_uint_gt(full, 0);
    check_scan(t, &r, 8, &rng);
    check_queries(t, &r, 40, 8, &rng);
    ref_free(&r);
    ordered_destroy(t);
}
END_TEST

/* Large inserts run on the pool, a task for each child of the root (and a
 * serial pass for the keys whose insert would split a child): batches of
 * thousands of keys with heavy duplication, some overwriting, into a tree
 * of three levels, every answer and value against the reference;
 * then with allocations failing now and then, in the tasks or in the
 * insert's own scratch, each key answered FULL or as the reference says. */
START_TEST(ordered_parallel_insert)
{
    floe_pool *pool = NULL;
    floe_errinfo err;
    ck_assert_int_eq(floe_pool_create(4, &pool, &err), FLOE_OK);
    floe_spec spec = ordered_spec_for(40, 8);
    ordered *t;
    ck_assert_int_eq(ordered_create(&spec, pool, &t, &err), FLOE_OK);
    ref r = {0};
    uint64_t rng = 0xBA7C4ull;
    enum { B = 24000 };
    uint64_t *keys = malloc(B * 8);
    uint8_t *vals = malloc(B * 8), *res = malloc(B);
    for (int round = 0; round < 10; round++) {
        const size_t n = B / 2 + rng_below(&rng, B / 2);
        for (size_t i = 0; i < n; i++) {
            keys[i] = pick_key(&rng, 40, 40000);
            val_set(vals, 8, i, rng_next(&rng));
        }
        run_batch(t, &r, round % 3 == 2 ? 1 : 0, keys, vals, n, 8);
    }
    floe_table_stats st;
    ordered_stats(t, &st);
    ck_assert_uint_gt(st.slots / ORD_LEAF_KEYS, ORD_FANOUT * 4); /* leaves under several children of the root */
    check_scan(t, &r, 8, &rng);
    check_queries(t, &r, 40, 8, &rng);
    size_t full = 0;
    for (int attempt = 0; attempt < 6; attempt++) {
        const size_t n = 5000;
        for (size_t i = 0; i < n; i++) {
            keys[i] = rng_next(&rng) & key_mask(40);
            val_set(vals, 8, i, rng_next(&rng));
        }
        floe_alloc_fail_nth(1 + rng_below(&rng, 40));
        ck_assert_int_eq(ordered_insert(t, keys, vals, n, false, res, NULL, NULL, &err), FLOE_OK);
        floe_alloc_fail_nth(0);
        full += full_or_as_ref(&r, keys, vals, res, n);
    }
    check_scan(t, &r, 8, &rng);
    check_queries(t, &r, 40, 8, &rng);
    free(keys);
    free(vals);
    free(res);
    ref_free(&r);
    ordered_destroy(t);
    floe_pool_destroy(pool);
}
END_TEST

/* A table saved and loaded (built bottom-up from its sorted keys) holds the
 * same keys and values, answers the same and keeps working; an empty one
 * too.  Files of another kind, of wrong section sizes, with keys out of
 * order or too wide (checksums right) are refused. */
START_TEST(ordered_save_and_load)
{
    char path[] = "/tmp/floe-ordered-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    floe_errinfo err;
    uint64_t rng = 4242;
    for (int round = 0; round < 3; round++) {
        const uint32_t vb = (uint32_t[]){8, 4, 0}[round];
        floe_spec spec = ordered_spec_for(48, vb);
        ordered *t, *u;
        ck_assert_int_eq(ordered_create(&spec, NULL, &t, &err), FLOE_OK);
        ref r = {0};
        const size_t n = round == 2 ? 0 : 70000; /* 70,000: two levels of inner nodes at 56 keys a leaf */
        uint64_t *keys = malloc(n * 8 + 8);
        uint8_t *vals = malloc(n * 8 + 8);
        for (size_t i = 0; i < n; i++) {
            keys[i] = rng_next(&rng) & key_mask(48);
            if (vb)
                val_set(vals, vb, i, rng_next(&rng));
        }
        run_batch(t, &r, 0, keys, vals, n, vb);
        ck_assert_int_eq(ordered_save(t, path, &err), FLOE_OK);
        floe_file_header saved;
        floe_file_reader *fr;
        ck_assert_int_eq(floe_file_open(path, 0, &saved, &fr, &err), FLOE_OK);
        floe_file_close(fr);
        ck_assert_uint_eq(saved.layout_version, FLOE_LAYOUT_OLDEST); /* the oldest floed reads it too */
        ck_assert_int_eq(ordered_load(path, 0, NULL, &u, &err), FLOE_OK);
        ck_assert_str_eq(ordered_spec(u)->name, "o");
        check_scan(u, &r, vb, &rng);
        check_queries(u, &r, 48, vb, &rng);
        for (size_t i = 0; i < n; i++) /* and it takes changes as any table */
            keys[i] = rng_below(&rng, 2) ? r.key[rng_below(&rng, r.n)] : rng_next(&rng) & key_mask(48);
        run_batch(u, &r, 0, keys, vals, n / 2, vb);
        run_batch(u, &r, 3, keys + n / 2, NULL, n - n / 2, vb);
        check_scan(u, &r, vb, &rng);
        check_queries(u, &r, 48, vb, &rng);
        ordered_destroy(t);
        ordered_destroy(u);
        free(keys);
        free(vals);
        ref_free(&r);
    }
    /* damaged files, each with a right checksum */
    floe_file_header h;
    memset(&h, 0, sizeof h);
    h.spec = ordered_spec_for(16, 0);
    h.layout_version = FLOE_LAYOUT_VERSION;
    h.parts = 1;
    h.nsections = 2;
    uint64_t k[3] = {5, 9, 7};
    const void *sec[FLOE_FILE_MAX_SECTIONS] = {k, k};
    const struct {
        uint64_t keys, bytes0;
        floe_kind kind;
        const char *why;
    } bad[] = {
        {3, 24, FLOE_KIND_ORDERED, "not above the one before it"},
        {2, 24, FLOE_KIND_ORDERED, "section sizes"},
        {2, 16, FLOE_KIND_SET, "not an ORDERED"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        h.keys = bad[i].keys;
        h.section_bytes[0] = bad[i].bytes0;
        h.spec.kind = bad[i].kind;
        ck_assert_int_eq(floe_file_save(path, &h, sec, &err), FLOE_OK);
        ordered *u = (ordered *)1;
        ck_assert_int_eq(ordered_load(path, 0, NULL, &u, &err), FLOE_ERR_INVALID);
        ck_assert_ptr_null(u);
        ck_assert_msg(strstr(err.msg, bad[i].why), "file %zu: %s", i, err.msg);
    }
    k[0] = 1, k[1] = 1ull << 16, h.keys = 2, h.section_bytes[0] = 16, h.spec.kind = FLOE_KIND_ORDERED;
    ck_assert_int_eq(floe_file_save(path, &h, sec, &err), FLOE_OK);
    ordered *u;
    ck_assert_int_eq(ordered_load(path, 0, NULL, &u, &err), FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.msg, "wider than key_bits"));
    /* a file that says layout version 2 (as releases of 2026-11-27 saved ORDERED tables) loads */
    k[1] = 9;
    ck_assert_int_eq(floe_file_save(path, &h, sec, &err), FLOE_OK);
    ck_assert_msg(ordered_load(path, 0, NULL, &u, &err) == FLOE_OK, "%s", err.msg);
    floe_table_stats st;
    ordered_stats(u, &st);
    ck_assert_uint_eq(st.keys, 2);
    ordered_destroy(u);
    unlink(path);
}
END_TEST

START_TEST(ordered_bad_specs)
{
    ordered *t = (ordered *)1;
    floe_errinfo err;
    floe_spec s = ordered_spec_for(40, 8);
    s.kind = FLOE_KIND_SET;
    ck_assert_int_eq(ordered_create(&s, NULL, &t, &err), FLOE_ERR_INVALID);
    ck_assert_ptr_null(t);
    s = ordered_spec_for(0, 0);
    ck_assert_int_eq(ordered_create(&s, NULL, &t, &err), FLOE_ERR_INVALID);
    s = ordered_spec_for(65, 0);
    ck_assert_int_eq(ordered_create(&s, NULL, &t, &err), FLOE_ERR_INVALID);
    s = ordered_spec_for(64, 3);
    ck_assert_int_eq(ordered_create(&s, NULL, &t, &err), FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.msg, "value_bytes"));
}
END_TEST

Suite *ordered_suite(void)
{
    Suite *s = suite_create("ordered");
    TCase *tc = tcase_create("ordered");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, ordered_against_reference, 0, 3 * (int)(sizeof WIDTHS / sizeof *WIDTHS));
    tcase_add_test(tc, ordered_full_when_memory_runs_out);
    tcase_add_test(tc, ordered_parallel_insert);
    tcase_add_test(tc, ordered_save_and_load);
    tcase_add_test(tc, ordered_bad_specs);
    suite_add_tcase(s, tc);
    return s;
}
