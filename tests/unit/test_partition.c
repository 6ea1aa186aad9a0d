/*
 * test_partition.c - tables in parts (tables/partition.h) over the CPU
 * engine, against one whole CPU table given the same batches: every
 * answer, value and count the same, ids that name their key, scans that
 * give every key once, stats that add up, files saved in parts that load
 * in the same or another number of parts, bad batches refused whole,
 * batches completing in submission order, in one lane and in two; where
 * tables go over several backends that say how much memory they have free
 * (placement: fake devices over the CPU engine); and batches that the
 * parts' devices split among themselves (tables/group.h: fake devices that
 * do on the CPU what the GPU backend's run_group.cu does).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "floe_wire.h"
#include "group.h"
#include "partition.h"
#include "tablefile.h"
#include "testutil.h"

static floe_backend *cpu(void)
{
    floe_backend *be;
    ck_assert_int_eq(floe_backend_cpu_create(2, &be, NULL), FLOE_OK);
    return be;
}

/* parts over ninner CPU backends */
static floe_backend *parted(unsigned parts, unsigned ninner)
{
    floe_backend *in[4], *be;
    for (unsigned i = 0; i < ninner; i++)
        in[i] = cpu();
    floe_errinfo err;
    ck_assert_msg(floe_backend_partition_create(in, ninner, parts, 2, &be, &err) == FLOE_OK, "%s", err.msg);
    ck_assert_str_eq(floe_backend_name(be), "cpu");
    ck_assert_uint_eq(floe_backend_parts(be), parts);
    return be;
}

static floe_spec spec_of(floe_kind kind, uint32_t key_bits, uint32_t vb, uint64_t capacity)
{
    floe_spec s;
    floe_spec_default(&s);
    strcpy(s.name, "parts");
    s.kind = kind;
    s.key_bits = kind == FLOE_KIND_TREE ? 0 : key_bits;
    s.words = kind == FLOE_KIND_TREE ? 4 : 0;
    s.value_bytes = vb;
    s.capacity = capacity;
    s.seed = 12345;
    strcpy(s.backend, "cpu");
    return s;
}

static char *temp_path(void)
{
    static char path[64];
    strcpy(path, "/tmp/floe-parts-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    return path;
}

/* Every key (and value) of t, by scanning in steps of `limit`. */
static size_t scan_all(floe_table *t, size_t limit, uint64_t *keys, uint64_t *vals, uint32_t *vecs, size_t cap)
{
    const uint32_t vb = t->spec.kind == FLOE_KIND_MAP ? t->spec.value_bytes : 0;
    uint64_t *k = malloc(limit * 8);
    unsigned char *v = malloc(limit * 8 + 1);
    uint32_t *w = malloc(limit * 16 + 1);
    floe_batch sc = {.op = FLOE_OP_SCAN, .limit = limit, .scan_keys = k};
    if (vb) {
        sc.flags = FLOE_BATCH_WANT_VALUES;
        sc.scan_values = v;
    }
    if (t->spec.kind == FLOE_KIND_TREE)
        sc.scan_vectors = w;
    size_t got = 0;
    for (int rounds = 0;; rounds++) {
        ck_assert_msg(floe_table_run(t, &sc) == FLOE_OK, "scan: %s", sc.error.msg);
        ck_assert_uint_le(sc.scan_n, limit);
        for (size_t i = 0; i < sc.scan_n; i++) {
            ck_assert_uint_lt(got, cap);
            keys[got] = k[i];
            if (vals) {
                uint64_t x = 0;
                memcpy(&x, v + i * vb, vb);
                vals[got] = x;
            }
            if (vecs)
                memcpy(vecs + got * 4, w + i * 4, 16);
            got++;
        }
        if (sc.scan_done)
            break;
        ck_assert_int_lt(rounds, 1000000);
        sc.cursor = sc.next;
        sc.cursor_set = 1;
    }
    free(k);
    free(v);
    free(w);
    return got;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The same keys and values in a and b (SET, MAP). */
static void same_contents(floe_table *a, floe_table *b, size_t cap)
{
    uint64_t *ka = malloc(cap * 8), *kb = malloc(cap * 8), *va = malloc(cap * 8), *vb = malloc(cap * 8);
    size_t na = scan_all(a, 97, ka, va, NULL, cap), nb = scan_all(b, 1000, kb, vb, NULL, cap);
    ck_assert_uint_eq(na, nb);
    /* pair keys with values, sort, compare */
    uint64_t *pa = malloc(na * 16 + 16), *pb = malloc(nb * 16 + 16);
    for (size_t i = 0; i < na; i++) {
        pa[i] = ka[i] * 1000003u + va[i];
        pb[i] = kb[i] * 1000003u + vb[i];
    }
    qsort(pa, na, 8, cmp_u64);
    qsort(pb, nb, 8, cmp_u64);
    ck_assert_int_eq(memcmp(pa, pb, na * 8), 0);
    qsort(ka, na, 8, cmp_u64);
    for (size_t i = 1; i < na; i++)
        ck_assert_msg(ka[i - 1] != ka[i], "a scan gave key %llu twice", (unsigned long long)ka[i]);
    free(ka), free(kb), free(va), free(vb), free(pa), free(pb);
}

/* Random INSERT / FIND / ERASE batches on a small key range (twins inside
 * and across batches) against a whole table; ids checked against a model. */
static void against_whole(floe_kind kind, uint32_t key_bits, uint32_t vb, unsigned parts, unsigned ninner,
                          uint64_t seed)
{
    enum { ROUNDS = 60, MAXN = 150000 };
    floe_backend *pb = parted(parts, ninner), *wb = cpu();
    floe_spec s = spec_of(kind, key_bits, vb, 400000);
    floe_table *p, *w;
    ck_assert_int_eq(floe_table_create(pb, &s, &p, NULL), FLOE_OK);
    ck_assert_int_eq(floe_table_create(wb, &s, &w, NULL), FLOE_OK);
    ck_assert_uint_eq(p->spec.capacity, s.capacity); /* the whole table's spec */
    static uint64_t keys[MAXN], ids[MAXN], wids[MAXN], vals[MAXN], vout[MAXN], wvout[MAXN];
    static uint8_t res[MAXN], wres[MAXN];
    model m; /* key -> id */
    model_init(&m, 1 << 19);
    const uint64_t range = key_bits < 14 ? (1ull << key_bits) : 200000;
    for (int r = 0; r < ROUNDS; r++) {
        /* mostly small batches; every 15th one split in chunks across threads */
        const size_t n = r % 15 == 7 ? MAXN - rng_below(&seed, 1000) : 1 + rng_below(&seed, 3000);
        for (size_t i = 0; i < n; i++) {
            keys[i] = rng_below(&seed, range);
            if (key_bits == 64)
                keys[i] = keys[i] * 0x9E3779B97F4A7C15ull; /* spread over 64 bits */
            vals[i] = rng_next(&seed) & (vb == 4 ? 0xFFFFFFFFull : ~0ull);
        }
        if (vb == 4) /* packed 4-byte values */
            for (size_t i = 0; i < n; i++)
                ((uint32_t *)vals)[i] = (uint32_t)vals[i];
        const int what = (int)rng_below(&seed, 10);
        floe_batch b = {.keys = keys, .n = n, .results = res, .ids = ids, .values_out = vb ? vout : NULL};
        b.op = what < 5 ? FLOE_OP_INSERT : what < 8 ? FLOE_OP_FIND : FLOE_OP_ERASE;
        /* half of the large batches answers alone: the split's and the join's streaming paths */
        const bool answers_only = n >= 65536 && r % 2;
        if (b.op != FLOE_OP_ERASE && !answers_only)
            b.flags = FLOE_BATCH_WANT_IDS | (vb ? FLOE_BATCH_WANT_VALUES : 0);
        if (vb && b.op == FLOE_OP_INSERT) {
            b.values = vals;
            b.values_len = n * vb;
            if (rng_below(&seed, 3) == 0)
                b.flags |= FLOE_BATCH_OVERWRITE;
        }
        floe_batch c = b;
        c.results = wres;
        c.ids = wids;
        c.values_out = vb ? wvout : NULL;
        ck_assert_msg(floe_table_run(p, &b) == FLOE_OK, "parts: %s", b.error.msg);
        ck_assert_msg(floe_table_run(w, &c) == FLOE_OK, "whole: %s", c.error.msg);
        ck_assert_int_eq(memcmp(res, wres, n), 0);
        ck_assert_int_eq(memcmp(&b.counts, &c.counts, sizeof b.counts), 0);
        if (vb && b.op != FLOE_OP_ERASE)
            for (size_t i = 0; i < n; i++)
                if (res[i] == FLOE_PRESENT || (res[i] == FLOE_INSERTED && b.op == FLOE_OP_FIND))
                    ck_assert_int_eq(memcmp((char *)vout + i * vb, (char *)wvout + i * vb, vb), 0);
        if (b.op == FLOE_OP_ERASE) {
            for (size_t i = 0; i < n; i++)
                if (res[i] == FLOE_ERASED)
                    model_del(&m, keys[i]);
            continue;
        }
        if (answers_only && b.op != FLOE_OP_ERASE) { /* the ids of its keys, for the model */
            floe_batch f = {.op = FLOE_OP_FIND, .keys = keys, .n = n, .results = res, .ids = ids,
                            .flags = FLOE_BATCH_WANT_IDS};
            ck_assert_msg(floe_table_run(p, &f) == FLOE_OK, "parts: %s", f.error.msg);
        }
        for (size_t i = 0; i < n; i++) { /* an id names its key and only it (no rebuilds here) */
            if (res[i] != FLOE_INSERTED && res[i] != FLOE_PRESENT)
                continue;
            ck_assert_uint_eq(ids[i] % parts, floe_part_of(floe_part_hash_key(keys[i]), parts));
            uint64_t v, id;
            if (model_get(&m, keys[i], &v, &id))
                ck_assert_uint_eq(id, ids[i]);
            else
                model_put(&m, keys[i], 0, ids[i]);
        }
    }
    floe_batch sp = {.op = FLOE_OP_STATS}, sw = {.op = FLOE_OP_STATS};
    ck_assert_int_eq(floe_table_run(p, &sp), FLOE_OK);
    ck_assert_int_eq(floe_table_run(w, &sw), FLOE_OK);
    ck_assert_uint_eq(sp.stats.keys, sw.stats.keys);
    ck_assert_uint_eq(sp.stats.keys, m.live);
    ck_assert_uint_eq(sp.stats.parts, parts > 1 ? parts : 0);
    uint64_t sum = 0, slots = 0;
    for (unsigned i = 0; i < sp.stats.parts; i++) {
        sum += sp.stats.part[i].keys;
        slots += sp.stats.part[i].slots;
        ck_assert_int_eq(sp.stats.part[i].device, -1);
    }
    if (parts > 1) {
        ck_assert_uint_eq(sum, sp.stats.keys);
        ck_assert_uint_eq(slots, sp.stats.slots);
    }
    ck_assert_uint_eq(sp.stats.spec.capacity, s.capacity);
    same_contents(p, w, 1 << 19);
    model_free(&m);
    floe_table_destroy(p);
    floe_table_destroy(w);
    floe_backend_destroy(pb);
    floe_backend_destroy(wb);
}

START_TEST(set_in_parts)
{
    against_whole(FLOE_KIND_SET, 20, 0, 3, 1, 1);
    against_whole(FLOE_KIND_SET, 64, 0, 2, 2, 2);
    against_whole(FLOE_KIND_SET, 6, 0, 5, 2, 3); /* 64 keys: parts with few or none */
}
END_TEST

START_TEST(map_in_parts)
{
    against_whole(FLOE_KIND_MAP, 64, 8, 4, 2, 4);
    against_whole(FLOE_KIND_MAP, 12, 4, 3, 1, 5);
    against_whole(FLOE_KIND_MAP, 30, 4, 1, 1, 6); /* one part: straight through */
}
END_TEST

START_TEST(tree_in_parts)
{
    enum { N = 4000, P = 3 };
    floe_backend *pb = parted(P, 2), *wb = cpu();
    floe_spec s = spec_of(FLOE_KIND_TREE, 0, 0, 20000);
    floe_table *p, *w;
    ck_assert_int_eq(floe_table_create(pb, &s, &p, NULL), FLOE_OK);
    ck_assert_int_eq(floe_table_create(wb, &s, &w, NULL), FLOE_OK);
    static uint32_t vec[N * 4], back[N * 4];
    static uint64_t ids[N], wids[N], bogus[4];
    static uint8_t res[N], wres[N];
    uint64_t seed = 7;
    for (size_t i = 0; i < N; i++)
        for (int k = 0; k < 4; k++)
            vec[i * 4 + k] = (uint32_t)rng_below(&seed, 6); /* many twins, shared nodes */
    floe_batch b = {
        .op = FLOE_OP_INSERT, .flags = FLOE_BATCH_WANT_IDS, .vectors = vec, .n = N, .results = res, .ids = ids};
    floe_batch c = b;
    c.results = wres;
    c.ids = wids;
    ck_assert_int_eq(floe_table_run(p, &b), FLOE_OK);
    ck_assert_int_eq(floe_table_run(w, &c), FLOE_OK);
    ck_assert_int_eq(memcmp(res, wres, N), 0);
    ck_assert_uint_eq(b.counts.inserted, c.counts.inserted);
    floe_batch g = {.op = FLOE_OP_GET, .keys = ids, .n = N, .results = res, .vectors_out = back};
    ck_assert_int_eq(floe_table_run(p, &g), FLOE_OK);
    ck_assert_uint_eq(g.counts.present, N);
    ck_assert_int_eq(memcmp(back, vec, sizeof vec), 0);
    bogus[0] = 1u << 30, bogus[1] = FLOE_NO_ID, bogus[2] = FLOE_NO_ID - 1, bogus[3] = ids[0] + P * 100000;
    floe_batch gb = {.op = FLOE_OP_GET, .keys = bogus, .n = 4, .results = res, .vectors_out = back};
    ck_assert_int_eq(floe_table_run(p, &gb), FLOE_OK);
    ck_assert_uint_eq(gb.counts.absent, 4);
    floe_batch f = {
        .op = FLOE_OP_FIND, .flags = FLOE_BATCH_WANT_IDS, .vectors = vec, .n = N, .results = res, .ids = wids};
    ck_assert_int_eq(floe_table_run(p, &f), FLOE_OK);
    ck_assert_uint_eq(f.counts.present, N);
    ck_assert_int_eq(memcmp(ids, wids, sizeof ids), 0);
    floe_batch er = {.op = FLOE_OP_ERASE, .keys = ids, .n = 1, .results = res};
    ck_assert_int_eq(floe_table_run(p, &er), FLOE_ERR_UNSUPPORTED);

    /* a scan gives every vector once, with ids that get it back */
    static uint64_t sk[N];
    static uint32_t sv[N * 4];
    size_t got = scan_all(p, 50, sk, NULL, sv, N);
    ck_assert_uint_eq(got, c.counts.inserted);
    floe_batch g2 = {.op = FLOE_OP_GET, .keys = sk, .n = got, .results = res, .vectors_out = back};
    ck_assert_int_eq(floe_table_run(p, &g2), FLOE_OK);
    ck_assert_uint_eq(g2.counts.present, got);
    ck_assert_int_eq(memcmp(back, sv, got * 16), 0);

    /* saved in 3 parts: the same ids in 3 parts, the same vectors in 2 */
    char *path = temp_path();
    floe_batch save = {.op = FLOE_OP_SAVE, .path = path};
    ck_assert_msg(floe_table_run(p, &save) == FLOE_OK, "%s", save.error.msg);
    floe_table *l3, *l2;
    floe_backend *b3 = parted(P, 1), *b2 = parted(2, 1);
    floe_errinfo err;
    ck_assert_msg(floe_table_load(b3, path, &l3, &err) == FLOE_OK, "%s", err.msg);
    ck_assert_msg(floe_table_load(b2, path, &l2, &err) == FLOE_OK, "%s", err.msg);
    g.results = res;
    ck_assert_int_eq(floe_table_run(l3, &g), FLOE_OK);
    ck_assert_uint_eq(g.counts.present, N);
    ck_assert_int_eq(memcmp(back, vec, sizeof vec), 0);
    floe_batch f2 = {.op = FLOE_OP_FIND, .vectors = vec, .n = N, .results = res};
    ck_assert_int_eq(floe_table_run(l2, &f2), FLOE_OK);
    ck_assert_uint_eq(f2.counts.present, N);
    floe_batch st = {.op = FLOE_OP_STATS};
    ck_assert_int_eq(floe_table_run(l2, &st), FLOE_OK);
    ck_assert_uint_eq(st.stats.keys, c.counts.inserted);
    unlink(path);
    floe_table_destroy(l3);
    floe_table_destroy(l2);
    floe_backend_destroy(b3);
    floe_backend_destroy(b2);
    floe_table_destroy(p);
    floe_table_destroy(w);
    floe_backend_destroy(pb);
    floe_backend_destroy(wb);
}
END_TEST

/* States by their parents into a growing TREE in 3 parts, against whole
 * vectors into a whole table: the same answers, parents of another
 * generation or that name no vector refused with nothing changed. */
START_TEST(tree_states_in_parts)
{
    enum { W = 4, SEED = 300, ROUNDS = 40, MAXN = 400, CAP = 60000 };
    floe_backend *pb = parted(3, 2), *wb = cpu();
    floe_spec s = spec_of(FLOE_KIND_TREE, 0, 0, 600);
    s.grow = 1;
    floe_table *p, *w;
    ck_assert_int_eq(floe_table_create(pb, &s, &p, NULL), FLOE_OK);
    ck_assert_int_eq(floe_table_create(wb, &s, &w, NULL), FLOE_OK);
    static uint32_t ref[CAP * W], vec[MAXN * W];
    static uint64_t ref_id[CAP], ids[CAP], parents[MAXN];
    static uint8_t res[CAP], wres[CAP], counts[MAXN], changes[MAXN * 3 * FLOE_CHANGE_BYTES];
    size_t nref = 0;
    uint64_t seed = 11;
    for (size_t i = 0; i < SEED * W; i++)
        vec[i] = (uint32_t)rng_below(&seed, 1000);
    floe_batch b = {
        .op = FLOE_OP_INSERT, .flags = FLOE_BATCH_WANT_IDS, .vectors = vec, .n = SEED, .results = res, .ids = ids};
    ck_assert_int_eq(floe_table_run(p, &b), FLOE_OK);
    floe_batch c = {.op = FLOE_OP_INSERT, .vectors = vec, .n = SEED, .results = wres};
    ck_assert_int_eq(floe_table_run(w, &c), FLOE_OK);
    for (size_t i = 0; i < SEED; i++)
        if (res[i] == FLOE_INSERTED) {
            memcpy(ref + nref * W, vec + i * W, W * 4);
            ref_id[nref++] = ids[i];
        }
    uint64_t generation = b.generation, grew = 0;
    for (int round = 0; round < ROUNDS; round++) {
        const size_t n = 1 + rng_below(&seed, MAXN);
        size_t ch = 0;
        for (size_t i = 0; i < n; i++) {
            const size_t k = rng_below(&seed, nref);
            parents[i] = ref_id[k];
            memcpy(vec + i * W, ref + k * W, W * 4);
            counts[i] = (uint8_t)rng_below(&seed, 4); /* 0: the parent itself */
            for (unsigned x = 0; x < counts[i]; x++) {
                const uint32_t word = (uint32_t)rng_below(&seed, W), value = (uint32_t)rng_below(&seed, 1000);
                floe_change_put(changes + ch++ * FLOE_CHANGE_BYTES, word, value);
                vec[i * W + word] = value;
            }
        }
        floe_batch d = {.op = FLOE_OP_INSERT,
                        .flags = FLOE_BATCH_WANT_IDS,
                        .n = n,
                        .results = res,
                        .ids = ids,
                        .parents = parents,
                        .change_counts = counts,
                        .changes = changes,
                        .changes_len = ch * FLOE_CHANGE_BYTES,
                        .parent_generation = generation};
        ck_assert_msg(floe_table_run(p, &d) == FLOE_OK, "round %d: %s", round, d.error.msg);
        ck_assert_ptr_null(d.vectors); /* the caller's batch as it was */
        floe_batch e = {.op = FLOE_OP_INSERT, .vectors = vec, .n = n, .results = wres};
        ck_assert_int_eq(floe_table_run(w, &e), FLOE_OK);
        ck_assert_int_eq(memcmp(res, wres, n), 0);
        ck_assert_uint_eq(d.counts.inserted, e.counts.inserted);
        for (size_t i = 0; i < n; i++)
            if (res[i] == FLOE_INSERTED) {
                ck_assert_uint_lt(nref, CAP);
                memcpy(ref + nref * W, vec + i * W, W * 4);
                ref_id[nref++] = ids[i];
            }
        if (d.generation != generation) { /* a part grew: every id again, of the new generation */
            grew++;
            floe_batch f = {.op = FLOE_OP_FIND,
                            .flags = FLOE_BATCH_WANT_IDS,
                            .vectors = ref,
                            .n = nref,
                            .results = res,
                            .ids = ref_id};
            ck_assert_int_eq(floe_table_run(p, &f), FLOE_OK);
            ck_assert_uint_eq(f.counts.present, nref);
            ck_assert_uint_eq(f.generation, d.generation);
            generation = d.generation;
        }
    }
    ck_assert_uint_gt(grew, 0);
    floe_batch st = {.op = FLOE_OP_STATS}, wst = {.op = FLOE_OP_STATS};
    ck_assert_int_eq(floe_table_run(p, &st), FLOE_OK);
    ck_assert_int_eq(floe_table_run(w, &wst), FLOE_OK);
    ck_assert_uint_eq(st.stats.keys, nref);
    ck_assert_uint_eq(wst.stats.keys, nref);
    ck_assert_uint_eq(st.stats.generation, generation);

    /* refused, nothing changed: another generation; a parent that names no vector (the second state) */
    counts[0] = counts[1] = 1;
    floe_change_put(changes, 0, 777777);
    floe_change_put(changes + FLOE_CHANGE_BYTES, 1, 888888);
    parents[0] = ref_id[0];
    parents[1] = ref_id[1];
    floe_batch old = {.op = FLOE_OP_INSERT,
                      .n = 2,
                      .results = res,
                      .parents = parents,
                      .change_counts = counts,
                      .changes = changes,
                      .changes_len = 2 * FLOE_CHANGE_BYTES,
                      .parent_generation = generation + 1};
    ck_assert_int_eq(floe_table_run(p, &old), FLOE_ERR_INVALID);
    ck_assert_msg(strstr(old.error.msg, "generation") != NULL, "%s", old.error.msg);
    parents[1] = 3000000 * 3 + 1; /* part 1, past its slots */
    floe_batch none = old;
    none.parent_generation = generation;
    ck_assert_int_eq(floe_table_run(p, &none), FLOE_ERR_INVALID);
    ck_assert_msg(strstr(none.error.msg, "names no vector") && strstr(none.error.msg, "state 1"), "%s", none.error.msg);
    ck_assert_int_eq(floe_table_run(p, &st), FLOE_OK);
    ck_assert_uint_eq(st.stats.keys, nref);
    floe_table_destroy(p);
    floe_table_destroy(w);
    floe_backend_destroy(pb);
    floe_backend_destroy(wb);
}
END_TEST

static void fill_map(floe_table *t, size_t n, uint64_t seed)
{
    uint64_t *k = malloc(n * 8), *v = malloc(n * 8);
    uint8_t *r = malloc(n);
    for (size_t i = 0; i < n; i++) {
        k[i] = rng_next(&seed) >> 20;
        v[i] = k[i] ^ 0xABCDEF;
    }
    floe_batch b = {.op = FLOE_OP_INSERT, .keys = k, .n = n, .values = v, .values_len = n * 8, .results = r};
    ck_assert_int_eq(floe_table_run(t, &b), FLOE_OK);
    ck_assert_uint_eq(b.counts.full, 0);
    free(k), free(v), free(r);
}

START_TEST(files_in_parts)
{
    enum { N = 30000 };
    floe_backend *b3 = parted(3, 2), *b2 = parted(2, 1), *b1 = parted(1, 1), *raw = cpu();
    floe_spec s = spec_of(FLOE_KIND_MAP, 44, 8, 50000);
    floe_table *t, *whole, *l;
    floe_errinfo err;
    ck_assert_int_eq(floe_table_create(b3, &s, &t, NULL), FLOE_OK);
    ck_assert_int_eq(floe_table_create(raw, &s, &whole, NULL), FLOE_OK);
    fill_map(t, N, 99);
    fill_map(whole, N, 99);
    char path[64], wpath[64];
    strcpy(path, temp_path());
    strcpy(wpath, temp_path());
    floe_batch save = {.op = FLOE_OP_SAVE, .path = path};
    ck_assert_msg(floe_table_run(t, &save) == FLOE_OK, "%s", save.error.msg);
    floe_batch wsave = {.op = FLOE_OP_SAVE, .path = wpath};
    ck_assert_int_eq(floe_table_run(whole, &wsave), FLOE_OK);

    /* the file is three whole files' worth of parts, each marked */
    floe_file_header h;
    ck_assert_int_eq(floe_file_header_at(path, 0, &h, NULL), FLOE_OK);
    ck_assert_uint_eq(h.parts, 3);
    ck_assert_uint_eq(h.part, 0);
    ck_assert_uint_eq(h.whole_capacity, s.capacity);
    uint64_t off = floe_file_bytes(&h);
    ck_assert_int_eq(floe_file_header_at(path, off, &h, NULL), FLOE_OK);
    ck_assert_uint_eq(h.part, 1);

    /* the whole engine refuses it, saying why */
    ck_assert_int_eq(floe_table_load(raw, path, &l, &err), FLOE_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "partitioned in 3 parts") != NULL, "%s", err.msg);

    /* the same number of parts: ids kept */
    static uint64_t keys[100], ids[100], ids2[100];
    static uint8_t res[100];
    uint64_t seed = 99;
    for (int i = 0; i < 100; i++)
        keys[i] = rng_next(&seed) >> 20;
    floe_batch f = {
        .op = FLOE_OP_FIND, .flags = FLOE_BATCH_WANT_IDS, .keys = keys, .n = 100, .results = res, .ids = ids};
    ck_assert_int_eq(floe_table_run(t, &f), FLOE_OK);
    ck_assert_msg(floe_table_load(b3, path, &l, &err) == FLOE_OK, "%s", err.msg);
    ck_assert_uint_eq(l->spec.capacity, s.capacity);
    f.ids = ids2;
    ck_assert_int_eq(floe_table_run(l, &f), FLOE_OK);
    ck_assert_uint_eq(f.counts.present, 100);
    ck_assert_int_eq(memcmp(ids, ids2, sizeof ids), 0);
    same_contents(l, whole, 2 * N);
    floe_table_destroy(l);

    /* other numbers of parts, and a whole file into parts: the same keys and values */
    floe_backend *into[] = {b2, b1, b3};
    const char *from[] = {path, path, wpath};
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(floe_table_load(into[i], from[i], &l, &err) == FLOE_OK, "%s", err.msg);
        same_contents(l, whole, 2 * N);
        floe_table_destroy(l);
    }

    /* COPY: an image of chained parts, written as one file that loads */
    floe_batch cp = {.op = FLOE_OP_COPY};
    ck_assert_int_eq(floe_table_run(t, &cp), FLOE_OK);
    ck_assert_ptr_nonnull(cp.image->next_part);
    ck_assert_int_eq(floe_file_image_save(path, cp.image, NULL), FLOE_OK);
    floe_file_image_free(cp.image);
    ck_assert_msg(floe_table_load(b2, path, &l, &err) == FLOE_OK, "%s", err.msg);
    same_contents(l, whole, 2 * N);
    floe_table_destroy(l);

    /* a damaged part is refused */
    FILE *fp = fopen(path, "r+b");
    fseek(fp, (long)off + 700, SEEK_SET);
    fputc(0x5A ^ fgetc(fp), fp);
    fseek(fp, (long)off + 700, SEEK_SET);
    fputc(0x11, fp);
    fclose(fp);
    ck_assert_int_eq(floe_table_load(b3, path, &l, &err), FLOE_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "damaged") != NULL, "%s", err.msg);

    unlink(path);
    unlink(wpath);
    floe_table_destroy(t);
    floe_table_destroy(whole);
    floe_backend_destroy(b3);
    floe_backend_destroy(b2);
    floe_backend_destroy(b1);
    floe_backend_destroy(raw);
}
END_TEST

START_TEST(bad_batches_change_nothing)
{
    floe_backend *be = parted(4, 2);
    floe_spec s = spec_of(FLOE_KIND_SET, 16, 0, 1000);
    floe_table *t;
    ck_assert_int_eq(floe_table_create(be, &s, &t, NULL), FLOE_OK);
    uint64_t keys[5] = {1, 2, 3, 1u << 16, 4};
    uint8_t res[5];
    floe_batch b = {.op = FLOE_OP_INSERT, .keys = keys, .n = 5, .results = res};
    ck_assert_int_eq(floe_table_run(t, &b), FLOE_ERR_INVALID);
    ck_assert_msg(strstr(b.error.msg, "key_bits") != NULL, "%s", b.error.msg);
    floe_batch f = {.op = FLOE_OP_FIND, .keys = keys, .n = 3, .results = res};
    ck_assert_int_eq(floe_table_run(t, &f), FLOE_OK);
    ck_assert_uint_eq(f.counts.absent, 3);
    /* the split checks the widths in place of the door (checks_widths): a large batch with one key too
     * wide, inserting or erasing, is refused whole with the door's own words, and nothing changes */
    ck_assert(t->checks_widths);
    enum { BIG = 40000 };
    static uint64_t big[BIG];
    static uint8_t bres[BIG];
    for (size_t i = 0; i < BIG; i++)
        big[i] = i % 65536;
    big[39000] = 1u << 20;
    floe_errinfo door;
    ck_assert_int_eq(floe_batch_check(&t->spec, &(floe_batch){.op = FLOE_OP_INSERT, .keys = big, .n = BIG,
                                                             .results = bres},
                                      NULL, &door),
                     FLOE_ERR_INVALID);
    for (int op = 0; op < 2; op++) {
        floe_batch w = {.op = op ? FLOE_OP_ERASE : FLOE_OP_INSERT, .keys = big, .n = BIG, .results = bres};
        ck_assert_int_eq(floe_table_run(t, &w), FLOE_ERR_INVALID);
        ck_assert_str_eq(w.error.msg, door.msg);
        ck_assert_uint_eq(w.counts.inserted + w.counts.erased, 0);
    }
    floe_batch bf = {.op = FLOE_OP_FIND, .keys = big, .n = 30000, .results = bres};
    ck_assert_int_eq(floe_table_run(t, &bf), FLOE_OK);
    ck_assert_uint_eq(bf.counts.absent, 30000);
    uint64_t v = 5;
    floe_batch sv = {.op = FLOE_OP_INSERT, .keys = keys, .n = 1, .values = &v, .values_len = 8, .results = res};
    ck_assert_int_eq(floe_table_run(t, &sv), FLOE_ERR_INVALID);
    floe_batch g = {.op = FLOE_OP_GET, .keys = keys, .n = 1, .results = res};
    ck_assert_int_eq(floe_table_run(t, &g), FLOE_ERR_UNSUPPORTED);
    uint64_t sk[4];
    floe_batch sc = {.op = FLOE_OP_SCAN,
                     .limit = 4,
                     .scan_keys = sk,
                     .cursor_set = 1,
                     .cursor = {.position = UINT64_MAX - 2, .generation = 0}};
    ck_assert_int_eq(floe_table_run(t, &sc), FLOE_ERR_INVALID);
    floe_batch empty = {.op = FLOE_OP_FIND, .n = 0};
    ck_assert_int_eq(floe_table_run(t, &empty), FLOE_OK);
    floe_batch st = {.op = FLOE_OP_STATS};
    ck_assert_int_eq(floe_table_run(t, &st), FLOE_OK);
    ck_assert_uint_eq(st.stats.keys, 0);
    floe_batch rb = {.op = FLOE_OP_REBUILD, .addr_bits = 0};
    ck_assert_int_eq(floe_table_run(t, &rb), FLOE_OK);
    floe_batch save = {.op = FLOE_OP_SAVE};
    ck_assert_int_eq(floe_table_run(t, &save), FLOE_ERR_INVALID);
    floe_table_destroy(t);
    floe_backend_destroy(be);

    floe_backend *in = cpu(), *out;
    floe_errinfo err;
    ck_assert_int_eq(floe_backend_partition_create(&in, 1, FLOE_PARTS_MAX + 1, 2, &out, &err), FLOE_ERR_INVALID);
}
END_TEST

/* A full table of capacity keys fits in parts too (each part has room for the hash's imbalance). */
START_TEST(capacity_fits_in_parts)
{
    floe_backend *be = parted(4, 1);
    floe_spec s = spec_of(FLOE_KIND_SET, 64, 0, 100000);
    s.grow = false;
    floe_table *t;
    ck_assert_int_eq(floe_table_create(be, &s, &t, NULL), FLOE_OK);
    static uint64_t keys[100000];
    static uint8_t res[100000];
    uint64_t seed = 3;
    for (size_t i = 0; i < 100000; i++)
        keys[i] = rng_next(&seed);
    floe_batch b = {.op = FLOE_OP_INSERT, .keys = keys, .n = 100000, .results = res};
    ck_assert_int_eq(floe_table_run(t, &b), FLOE_OK);
    ck_assert_uint_eq(b.counts.full, 0);
    floe_table_destroy(t);
    floe_backend_destroy(be);
}
END_TEST

enum { ORDER_B = 400 };
static floe_batch order_bs[ORDER_B];
static atomic_int order_next, order_done;
static int order_seen[ORDER_B];

/* order_done counts a batch once its place is written (order_next alone
 * would let the test read a place before it is) */
static void note_done(floe_batch *b)
{
    order_seen[atomic_fetch_add(&order_next, 1)] = (int)(b - order_bs);
    atomic_fetch_add(&order_done, 1);
}

enum { BIG_B = 24, BIG_N = 40000 };
static floe_batch big_bs[BIG_B];

static void note_done_big(floe_batch *b)
{
    order_seen[atomic_fetch_add(&order_next, 1)] = (int)(b - big_bs);
    atomic_fetch_add(&order_done, 1);
}

/* Batches of every kind of work, submitted without waiting, complete in order;
 * a FIND sees the INSERT submitted before it. */
START_TEST(batches_complete_in_order)
{
    floe_backend *be = parted(3, 2);
    floe_spec s = spec_of(FLOE_KIND_SET, 32, 0, 100000);
    floe_table *t;
    ck_assert_int_eq(floe_table_create(be, &s, &t, NULL), FLOE_OK);
    static uint64_t keys[ORDER_B][64];
    static uint8_t res[ORDER_B][64];
    static uint64_t sk[ORDER_B][16];
    atomic_store(&order_next, 0);
    atomic_store(&order_done, 0);
    for (int i = 0; i < ORDER_B; i++) {
        floe_batch *b = &order_bs[i];
        memset(b, 0, sizeof *b);
        const int kind = i % 4;
        for (int k = 0; k < 64; k++)
            keys[i][k] = (uint64_t)(i / 4) * 64 + (uint64_t)k;
        b->op = kind == 0 ? FLOE_OP_INSERT : kind == 1 ? FLOE_OP_FIND : kind == 2 ? FLOE_OP_SCAN : FLOE_OP_STATS;
        b->keys = keys[i];
        b->n = kind < 2 ? 64 : 0;
        b->results = res[i];
        b->scan_keys = sk[i];
        b->limit = 16;
        b->done = note_done;
    }
    for (int i = 0; i < ORDER_B; i++)
        floe_table_submit(t, &order_bs[i]);
    while (atomic_load(&order_done) < ORDER_B)
        usleep(1000);
    for (int i = 0; i < ORDER_B; i++) {
        ck_assert_int_eq(order_seen[i], i);
        ck_assert_int_eq(order_bs[i].status, FLOE_OK);
        if (order_bs[i].op == FLOE_OP_FIND)
            ck_assert_uint_eq(order_bs[i].counts.present, 64); /* inserted by the batch before */
        if (order_bs[i].op == FLOE_OP_STATS)
            ck_assert_uint_eq(order_bs[i].stats.keys, (uint64_t)(i / 4 + 1) * 64);
    }
    floe_table_destroy(t);
    floe_backend_destroy(be);
}
END_TEST

/* Batches of two lanes (two splitters) on a table in parts: each lane's
 * run in its order (a FIND sees the INSERT before it in its lane). */
START_TEST(lanes_in_parts)
{
    floe_backend *be = parted(3, 2);
    ck_assert_int_eq(floe_backend_set_lanes(be, 2, NULL), FLOE_OK);
    floe_spec s = spec_of(FLOE_KIND_SET, 32, 0, 100000);
    floe_table *t;
    ck_assert_int_eq(floe_table_create(be, &s, &t, NULL), FLOE_OK);
    static uint64_t keys[ORDER_B][64];
    static uint8_t res[ORDER_B][64];
    atomic_store(&order_next, 0);
    atomic_store(&order_done, 0);
    for (int i = 0; i < ORDER_B; i++) {
        floe_batch *b = &order_bs[i];
        memset(b, 0, sizeof *b);
        for (int k = 0; k < 64; k++)
            keys[i][k] = (uint64_t)(i / 2) * 64 + (uint64_t)k;
        b->op = i % 2 ? FLOE_OP_FIND : FLOE_OP_INSERT; /* an insert, then its find, in the lane of the pair */
        b->keys = keys[i];
        b->n = 64;
        b->results = res[i];
        b->lane = (unsigned)(i / 2 % 2);
        b->done = note_done;
    }
    for (int i = 0; i < ORDER_B; i++)
        floe_table_submit(t, &order_bs[i]);
    while (atomic_load(&order_done) < ORDER_B)
        usleep(1000);
    for (int i = 0; i < ORDER_B; i++) {
        ck_assert_int_eq(order_bs[i].status, FLOE_OK);
        ck_assert_uint_eq(i % 2 ? order_bs[i].counts.present : order_bs[i].counts.inserted, 64);
    }
    floe_table_destroy(t);
    floe_backend_destroy(be);
}
END_TEST

/* Batches whose keys land in one part, or mostly in one (a client that
 * chose them so): the parts' regions overflow and the batch is counted and
 * placed again; every answer, id and value as a whole table's. */
START_TEST(skewed_batches_in_parts)
{
    enum { N = 30000 };
    const unsigned parts = 3;
    floe_backend *pb = parted(parts, 2), *wb = cpu();
    floe_spec s = spec_of(FLOE_KIND_MAP, 64, 8, 200000);
    floe_table *p, *w;
    ck_assert_int_eq(floe_table_create(pb, &s, &p, NULL), FLOE_OK);
    ck_assert_int_eq(floe_table_create(wb, &s, &w, NULL), FLOE_OK);
    static uint64_t keys[N], vals[N], ids[N], vout[N], wids[N], wvout[N];
    static uint8_t res[N], wres[N];
    uint64_t seed = 77;
    for (int round = 0; round < 4; round++) {
        /* round 0: all in part 1; 1: 90% in part 0; 2: all in part 2, half of them again; 3: random */
        for (size_t i = 0; i < N;) {
            const uint64_t k = rng_next(&seed);
            const unsigned want = round == 0 ? 1 : round == 1 ? (i % 10 ? 0 : parts) : round == 2 ? 2 : parts;
            if (want < parts && floe_part_of(floe_part_hash_key(k), parts) != want)
                continue;
            keys[i] = round == 2 && i % 2 ? keys[i - 1] : k;
            vals[i++] = rng_next(&seed);
        }
        for (int op = 0; op < 2; op++) {
            floe_batch b = {.op = op ? FLOE_OP_FIND : FLOE_OP_INSERT,
                            .flags = FLOE_BATCH_WANT_IDS | FLOE_BATCH_WANT_VALUES,
                            .keys = keys,
                            .n = N,
                            .results = res,
                            .ids = ids,
                            .values_out = vout};
            if (!op) {
                b.values = vals;
                b.values_len = N * 8;
            }
            floe_batch c = b;
            c.results = wres;
            c.ids = wids;
            c.values_out = wvout;
            ck_assert_msg(floe_table_run(p, &b) == FLOE_OK, "parts: %s", b.error.msg);
            ck_assert_msg(floe_table_run(w, &c) == FLOE_OK, "whole: %s", c.error.msg);
            ck_assert_int_eq(memcmp(res, wres, N), 0);
            ck_assert_int_eq(memcmp(&b.counts, &c.counts, sizeof b.counts), 0);
            for (size_t i = 0; i < N; i++) {
                ck_assert_uint_eq(vout[i], wvout[i]);
                ck_assert_uint_eq(ids[i] % parts, floe_part_of(floe_part_hash_key(keys[i]), parts));
            }
        }
    }
    same_contents(p, w, 200000);
    floe_table_destroy(p);
    floe_table_destroy(w);
    floe_backend_destroy(pb);
    floe_backend_destroy(wb);
}
END_TEST

/* Large batches in flight at once (split by several threads, their parts'
 * answers joined off the parts' threads), from two submitting threads:
 * each thread's FIND sees its INSERT, every batch completes in submission
 * order, and a destroy right after the last submit waits for them all. */
static uint64_t big_keys[BIG_B / 2][BIG_N];
static uint8_t big_res[BIG_B][BIG_N];
static floe_table *big_t;

static void *submit_half(void *arg)
{
    const int half = (int)(intptr_t)arg;
    for (int i = half; i < BIG_B; i += 2)
        floe_table_submit(big_t, &big_bs[i]);
    return NULL;
}

START_TEST(large_batches_in_flight)
{
    floe_backend *be = parted(4, 2);
    floe_spec s = spec_of(FLOE_KIND_SET, 64, 0, BIG_B / 2 * BIG_N);
    ck_assert_int_eq(floe_table_create(be, &s, &big_t, NULL), FLOE_OK);
    atomic_store(&order_next, 0);
    atomic_store(&order_done, 0);
    uint64_t seed = 5;
    for (int i = 0; i < BIG_B; i++) {
        floe_batch *b = &big_bs[i];
        memset(b, 0, sizeof *b);
        if (i % 4 < 2) /* batches 4j and 4j+2 insert new keys; 4j+1 and 4j+3 find them, each in its thread */
            for (int k = 0; k < BIG_N; k++)
                big_keys[i / 4 * 2 + i % 2][k] = rng_next(&seed);
        b->op = i % 4 < 2 ? FLOE_OP_INSERT : FLOE_OP_FIND;
        b->keys = big_keys[i / 4 * 2 + i % 2];
        b->n = BIG_N;
        b->results = big_res[i];
        b->done = note_done_big;
    }
    pthread_t th[2];
    for (int h = 0; h < 2; h++)
        ck_assert_int_eq(pthread_create(&th[h], NULL, submit_half, (void *)(intptr_t)h), 0);
    for (int h = 0; h < 2; h++)
        pthread_join(th[h], NULL);
    floe_table_destroy(big_t); /* waits for every batch */
    ck_assert_int_eq(atomic_load(&order_done), BIG_B);
    for (int i = 0; i < BIG_B; i++) {
        ck_assert_int_eq(big_bs[i].status, FLOE_OK);
        ck_assert_uint_eq(big_bs[i].op == FLOE_OP_INSERT ? big_bs[i].counts.inserted : big_bs[i].counts.present,
                          BIG_N);
        for (int k = 0; k < BIG_N; k++)
            ck_assert_uint_eq(big_res[i][k], big_bs[i].op == FLOE_OP_INSERT ? FLOE_INSERTED : FLOE_PRESENT);
    }
    for (int i = 1; i < BIG_B; i++) /* each thread's batches in the order it submitted them */
        for (int j = 0; j < i; j++)
            if (order_seen[j] % 2 == order_seen[i] % 2)
                ck_assert_int_lt(order_seen[j], order_seen[i]);
    floe_backend_destroy(be);
}
END_TEST

/* ---- placement --------------------------------------------------------------------------------- */

/* A device as the partition layer sees one: the CPU engine underneath,
 * `free` bytes free (or failed), and no room for a table of more than
 * `room` keys (0: any). */
typedef struct fake_dev {
    floe_backend base;
    floe_backend_ops ops;
    floe_backend *cpu;
    uint64_t free, room;
    floe_status health;
    unsigned made; /* tables made on it */
} fake_dev;

static floe_status fake_create(floe_backend *be, const floe_spec *spec, floe_table **out, floe_errinfo *err)
{
    fake_dev *f = (fake_dev *)be;
    if (f->health != FLOE_OK)
        return floe_errinfo_set(err, f->health, "this device has failed");
    if (f->room && spec->capacity > f->room)
        return floe_errinfo_set(err, FLOE_ERR_FULL, "no room for %llu keys", (unsigned long long)spec->capacity);
    floe_status st = floe_table_create(f->cpu, spec, out, err); /* the table is the CPU engine's */
    f->made += st == FLOE_OK;
    return st;
}

static floe_status fake_load(floe_backend *be, const char *path, const struct floe_file_part *part, floe_table **out,
                             floe_errinfo *err)
{
    fake_dev *f = (fake_dev *)be;
    f->made++;
    return f->cpu->ops->load_table(f->cpu, path, part, out, err);
}

/* A fake device's free memory is f->free GiB: room for the small tables here,
 * in the proportions the placement tests set. */
static floe_status fake_memory(floe_backend *be, uint64_t *free_bytes, uint64_t *total_bytes)
{
    fake_dev *f = (fake_dev *)be;
    *free_bytes = f->free << 30;
    *total_bytes = 100ull << 30;
    return f->health;
}

static void fake_destroy(floe_backend *be)
{
    fake_dev *f = (fake_dev *)be;
    floe_backend_destroy(f->cpu);
    free(f);
}

/* n fake devices with free[i] bytes free, under a backend of `parts` parts (0: placed by table). */
static floe_backend *fake_devices(unsigned n, const uint64_t *free_bytes, unsigned parts, fake_dev **devs)
{
    floe_backend *in[4], *be;
    for (unsigned i = 0; i < n; i++) {
        fake_dev *f = calloc(1, sizeof *f);
        ck_assert_ptr_nonnull(f);
        f->cpu = cpu();
        f->ops = *f->cpu->ops;
        f->ops.create_table = fake_create;
        f->ops.load_table = fake_load;
        f->ops.memory = fake_memory;
        f->ops.destroy = fake_destroy;
        f->base.ops = &f->ops;
        f->free = free_bytes[i];
        devs[i] = f;
        in[i] = &f->base;
    }
    floe_errinfo err;
    ck_assert_msg(floe_backend_partition_create(in, n, parts, 2, &be, &err) == FLOE_OK, "%s", err.msg);
    ck_assert_uint_eq(floe_backend_parts(be), parts);
    ck_assert_uint_eq(floe_backend_devices(be), n);
    return be;
}

static floe_table *make(floe_backend *be, const char *name, uint64_t capacity, unsigned parts)
{
    floe_spec s = spec_of(FLOE_KIND_SET, 40, 0, capacity);
    strcpy(s.name, name);
    s.parts = parts;
    floe_table *t = NULL;
    floe_errinfo err;
    ck_assert_msg(floe_table_create(be, &s, &t, &err) == FLOE_OK, "%s: %s", name, err.msg);
    return t;
}

/* Whole on the device with the most free memory; a failed one last; ties
 * to the one with the fewest parts; in parts when asked, most free first;
 * in parts over all when it fits on none whole (and every key there); a
 * backend of a fixed number of parts makes every table so. */
START_TEST(placement_by_free_memory)
{
    fake_dev *d[3];
    floe_backend *be = fake_devices(3, (const uint64_t[]){10, 30, 20}, 0, d);
    floe_table *a = make(be, "a", 1000, 0);
    ck_assert_uint_eq(floe_table_parts(a), 1);
    ck_assert_uint_eq(d[1]->made, 1); /* the most free */
    d[1]->free = 5;
    floe_table *b = make(be, "b", 1000, 0);
    ck_assert_uint_eq(d[2]->made, 1);
    floe_table *c = make(be, "c", 1000, 2); /* asked: 2 parts, most free first (20, 10) */
    ck_assert_uint_eq(floe_table_parts(c), 2);
    ck_assert_uint_eq(d[2]->made, 2);
    ck_assert_uint_eq(d[0]->made, 1);
    d[2]->free = 50;
    d[2]->health = FLOE_ERR_UNAVAILABLE; /* failed: last, whatever it says it has */
    floe_table *e = make(be, "e", 1000, 0);
    ck_assert_uint_eq(d[0]->made, 2);
    d[2]->health = FLOE_OK;
    for (int i = 0; i < 3; i++) {
        d[i]->free = 7;    /* all alike: the fewest parts placed wins (d[1]: 1, d[0] and d[2]: 2) */
        d[i]->room = 1100; /* and a table of 2500 keys fits on none whole */
    }
    floe_table *f = make(be, "f", 1000, 0);
    ck_assert_uint_eq(d[1]->made, 2);
    floe_table *g = make(be, "g", 2500, 0);
    ck_assert_uint_eq(floe_table_parts(g), 3);
    ck_assert_uint_eq(d[0]->made + d[1]->made + d[2]->made, 6 + 3); /* the whole try made nothing */
    static uint64_t keys[2500];
    static uint8_t res[2500];
    for (size_t i = 0; i < 2500; i++)
        keys[i] = i * 977 + 5;
    floe_batch ins = {.op = FLOE_OP_INSERT, .keys = keys, .n = 2500, .results = res};
    ck_assert_int_eq(floe_table_run(g, &ins), FLOE_OK);
    ck_assert_uint_eq(ins.counts.inserted, 2500);
    floe_batch fb = {.op = FLOE_OP_FIND, .keys = keys, .n = 2500, .results = res};
    ck_assert_int_eq(floe_table_run(g, &fb), FLOE_OK);
    ck_assert_uint_eq(fb.counts.present, 2500);
    floe_table *too_big = NULL;
    floe_spec huge = spec_of(FLOE_KIND_SET, 40, 0, 10000); /* not even in parts: FULL, nothing made */
    ck_assert_int_eq(floe_table_create(be, &huge, &too_big, NULL), FLOE_ERR_FULL);
    ck_assert_uint_eq(d[0]->made + d[1]->made + d[2]->made, 9);
    floe_table *all[] = {a, b, c, e, f, g};
    for (int i = 0; i < 6; i++)
        floe_table_destroy(all[i]);
    floe_backend_destroy(be);

    be = fake_devices(2, (const uint64_t[]){1, 2}, 2, d); /* every table in 2 parts */
    floe_table *h = make(be, "h", 1000, 0);
    ck_assert_uint_eq(floe_table_parts(h), 2);
    ck_assert_uint_eq(d[0]->made + d[1]->made, 2);
    floe_table_destroy(h);
    floe_backend_destroy(be);
}
END_TEST

/* ---- creates the memory cannot hold ---------------------------------------------------------------- */

/* A create whose arrays take more than the host (CPU) or the device (its
 * backend's memory) has free is refused with ERR_FULL before anything is
 * allocated (issue 41, C). */
START_TEST(creates_the_memory_cannot_hold_are_refused)
{
    floe_backend *be = cpu();
    floe_spec s = spec_of(FLOE_KIND_SET, 64, 0, (uint64_t)1 << 40); /* about 9 TiB of arrays */
    strcpy(s.name, "huge");
    ck_assert_uint_gt(floe_table_bytes_for(&s), (uint64_t)1 << 42);
    floe_table *t = NULL;
    floe_errinfo err;
    ck_assert_int_eq(floe_table_create(be, &s, &t, &err), FLOE_ERR_FULL);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(err.msg, "table huge: its arrays for a capacity of 1099511627776 take") &&
                      strstr(err.msg, "this host has free"),
                  "%s", err.msg);
    s.capacity = 1000; /* a small one still fits */
    ck_assert_int_eq(floe_table_create(be, &s, &t, &err), FLOE_OK);
    floe_table_destroy(t);
    floe_backend_destroy(be);
    /* a device of 1 GiB free: a table of about 2.5 GiB is refused, its backend never asked */
    fake_dev *d[1];
    be = fake_devices(1, (const uint64_t[]){1}, 0, d);
    s = spec_of(FLOE_KIND_SET, 40, 0, (uint64_t)1 << 30);
    strcpy(s.name, "big");
    ck_assert_int_eq(floe_table_create(be, &s, &t, &err), FLOE_ERR_FULL);
    ck_assert_msg(strstr(err.msg, "the device has free"), "%s", err.msg);
    ck_assert_uint_eq(d[0]->made, 0);
    floe_backend_destroy(be);
}
END_TEST

/* ---- batches split on the devices (tables/group.h) --------------------------------------------------------- */

/* A device that splits keyed batches of 64 keys or more with its peers, as
 * the GPU backend does, over a CPU table each: a worker thread a table
 * runs its batches in order; a chunk's keys are sorted by part (stably),
 * each part runs its keys of every chunk in chunk order, and each chunk
 * takes its answers back.  `broken` fails its part of every such batch. */
typedef struct grp_dev {
    floe_backend base;
    floe_backend_ops ops;
    floe_backend *cpu;
    atomic_bool broken;
} grp_dev;

typedef struct grp_table {
    floe_table base;
    floe_table *inner;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    queue q;
    bool stop;
} grp_table;

typedef struct grp_chunk { /* what the others read between the meetings */
    uint64_t *keys;        /* the chunk's keys by part */
    uint32_t *place;       /* the chunk's place of each */
    size_t cnt[FLOE_PARTS_MAX], at[FLOE_PARTS_MAX];
    uint8_t *res; /* this part's answers to its keys of every chunk */
} grp_chunk;

static void grp_run(grp_table *t, floe_batch *b)
{
    floe_group *g = b->group;
    const unsigned P = g->parts;
    unsigned me = 0;
    while (g->part[me] != &t->base)
        me++;
    const size_t n = b->n;
    grp_chunk c = {.keys = malloc(n * 8), .place = malloc(n * 4)};
    ck_assert(c.keys && c.place);
    floe_errinfo err;
    floe_status st = FLOE_OK;
    if (atomic_load(&((grp_dev *)t->base.backend)->broken))
        st = floe_errinfo_set(&err, FLOE_ERR_INTERNAL, "device %u is broken", me);
    uint64_t bits = 0;
    for (size_t i = 0; i < n; i++) {
        c.cnt[floe_part_of(floe_part_hash_key(b->keys[i]), P)]++;
        bits |= b->keys[i];
    }
    size_t fill[FLOE_PARTS_MAX];
    for (unsigned q = 0; q < P; q++)
        fill[q] = c.at[q] = q ? c.at[q - 1] + c.cnt[q - 1] : 0;
    for (size_t i = 0; i < n; i++) {
        const size_t j = fill[floe_part_of(floe_part_hash_key(b->keys[i]), P)]++;
        c.keys[j] = b->keys[i];
        c.place[j] = (uint32_t)i;
    }
    const uint32_t kb = t->base.spec.key_bits;
    if (st == FLOE_OK && kb < 64 && (bits >> kb)) {
        pthread_mutex_lock(&g->lock);
        g->too_wide = true;
        pthread_mutex_unlock(&g->lock);
        st = floe_errinfo_set(&err, FLOE_ERR_INVALID, "too wide");
    }
    g->slot[me] = &c;
    st = floe_group_meet(g, st, &err, &err);
    if (st == FLOE_OK) { /* this part's keys of every chunk, in chunk order */
        size_t m = 0;
        for (unsigned d = 0; d < P; d++)
            m += ((grp_chunk *)g->slot[d])->cnt[me];
        uint64_t *mine = malloc(m * 8 + 8);
        c.res = malloc(m + 1);
        ck_assert(mine && c.res);
        m = 0;
        for (unsigned d = 0; d < P; d++) {
            const grp_chunk *o = g->slot[d];
            memcpy(mine + m, o->keys + o->at[me], o->cnt[me] * 8);
            m += o->cnt[me];
        }
        floe_batch r = {.op = b->op, .keys = mine, .n = m, .results = c.res};
        st = floe_table_run(t->inner, &r);
        err = r.error;
        free(mine);
    }
    st = floe_group_meet(g, st, &err, &err);
    if (st == FLOE_OK) /* the chunk's answers from every part */
        for (unsigned q = 0; q < P; q++) {
            size_t from = 0;
            for (unsigned d = 0; d < me; d++)
                from += ((grp_chunk *)g->slot[d])->cnt[q];
            const grp_chunk *o = g->slot[q];
            for (size_t j = 0; j < c.cnt[q]; j++) {
                const uint8_t a = o->res[from + j];
                b->results[c.place[c.at[q] + j]] = a;
                b->counts.inserted += a == FLOE_INSERTED;
                b->counts.present += a == FLOE_PRESENT;
                b->counts.absent += a == FLOE_ABSENT;
                b->counts.erased += a == FLOE_ERASED;
            }
        }
    floe_group_meet(g, FLOE_OK, NULL, &err); /* the others are done reading c */
    free(c.keys);
    free(c.place);
    free(c.res);
    if (st != FLOE_OK) {
        b->status = st;
        b->error = err;
    }
    b->done(b);
}

static void *grp_worker(void *arg)
{
    grp_table *t = arg;
    pthread_mutex_lock(&t->lock);
    for (;;) {
        if (queue_empty(&t->q)) {
            if (t->stop)
                break;
            pthread_cond_wait(&t->cv, &t->lock);
            continue;
        }
        floe_batch *b = FLOE_BATCH_OF(queue_pop(&t->q));
        pthread_mutex_unlock(&t->lock);
        memset(&b->counts, 0, sizeof b->counts);
        if (b->group) {
            grp_run(t, b);
        } else { /* in its place in the order, on the CPU table */
            void (*done)(floe_batch *) = b->done;
            void *user = b->user;
            b->done = NULL;
            floe_table_run(t->inner, b);
            b->done = done;
            b->user = user;
            done(b);
        }
        pthread_mutex_lock(&t->lock);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

static floe_status grp_create(floe_backend *be, const floe_spec *spec, floe_table **out, floe_errinfo *err)
{
    grp_dev *d = (grp_dev *)be;
    grp_table *t = calloc(1, sizeof *t);
    ck_assert_ptr_nonnull(t);
    floe_status st = floe_table_create(d->cpu, spec, &t->inner, err);
    if (st != FLOE_OK) {
        free(t);
        return st;
    }
    t->base.backend = be;
    t->base.spec = t->inner->spec;
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->cv, NULL);
    queue_init(&t->q);
    ck_assert_int_eq(pthread_create(&t->thread, NULL, grp_worker, t), 0);
    *out = &t->base;
    return FLOE_OK;
}

static void grp_submit(floe_table *base, floe_batch *b)
{
    grp_table *t = (grp_table *)base;
    pthread_mutex_lock(&t->lock);
    queue_push(&t->q, &b->link);
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->lock);
}

static void grp_destroy_table(floe_table *base)
{
    grp_table *t = (grp_table *)base;
    pthread_mutex_lock(&t->lock);
    t->stop = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->lock);
    pthread_join(t->thread, NULL);
    floe_table_destroy(t->inner);
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->cv);
    free(t);
}

static bool grp_fits(floe_table *const *parts, unsigned nparts, const floe_batch *b)
{
    (void)parts;
    return nparts > 1 && b->n >= 64 && !(b->flags & FLOE_BATCH_WANT_IDS) &&
           (b->op == FLOE_OP_INSERT || b->op == FLOE_OP_FIND || b->op == FLOE_OP_ERASE);
}

static void grp_destroy(floe_backend *be)
{
    grp_dev *d = (grp_dev *)be;
    floe_backend_destroy(d->cpu);
    free(d);
}

static floe_backend *grp_devices(unsigned n, grp_dev **devs)
{
    floe_backend *in[FLOE_PARTS_MAX], *be;
    for (unsigned i = 0; i < n; i++) {
        grp_dev *d = calloc(1, sizeof *d);
        ck_assert_ptr_nonnull(d);
        d->cpu = cpu();
        d->ops = *d->cpu->ops;
        d->ops.create_table = grp_create;
        d->ops.submit = grp_submit;
        d->ops.destroy_table = grp_destroy_table;
        d->ops.destroy = grp_destroy;
        d->ops.group_fits = grp_fits;
        d->base.ops = &d->ops;
        devs[i] = d;
        in[i] = &d->base;
    }
    floe_errinfo err;
    ck_assert_msg(floe_backend_partition_create(in, n, n, 2, &be, &err) == FLOE_OK, "%s", err.msg);
    return be;
}

#define GRP_B 12
static atomic_int grp_done;
static void grp_note(floe_batch *b)
{
    (void)b;
    atomic_fetch_add(&grp_done, 1);
}

/* A table in 3 parts whose devices split the batches: the answers and
 * counts of one whole CPU table given the same batches (inserts with keys
 * repeated within and across batches, finds, erases, all in flight at
 * once), no answer joined on the host, a small batch split on the host
 * instead; a key too wide refuses the batch with the door's words and
 * changes nothing; a device that fails fails the batch. */
START_TEST(batches_split_on_the_devices)
{
    grp_dev *d[3];
    floe_backend *be = grp_devices(3, d), *whole_be = cpu();
    floe_spec s = spec_of(FLOE_KIND_SET, 40, 0, 200000);
    strcpy(s.name, "g");
    floe_table *t, *whole;
    floe_errinfo err;
    ck_assert_int_eq(floe_table_create(be, &s, &t, &err), FLOE_OK);
    ck_assert_int_eq(floe_table_create(whole_be, &s, &whole, &err), FLOE_OK);
    ck_assert_uint_eq(floe_table_parts(t), 3);

    enum { N = 3000 };
    static uint64_t keys[GRP_B][N];
    static uint8_t res[GRP_B][N], want[N];
    static floe_batch bs[GRP_B];
    uint64_t rng = 7;
    for (int k = 0; k < GRP_B; k++) {
        for (int i = 0; i < N; i++)
            keys[k][i] = rng_below(&rng, 20000); /* repeats within and across batches */
        bs[k] = (floe_batch){.op = k % 4 == 3            ? FLOE_OP_FIND
                                   : k % 4 == 2 && k > 4 ? FLOE_OP_ERASE
                                                         : FLOE_OP_INSERT,
                             .keys = keys[k],
                             .n = N,
                             .results = res[k],
                             .done = grp_note};
    }
    atomic_store(&grp_done, 0);
    for (int k = 0; k < GRP_B; k++)
        floe_table_submit(t, &bs[k]);
    while (atomic_load(&grp_done) < GRP_B)
        usleep(1000);
    for (int k = 0; k < GRP_B; k++) {
        ck_assert_msg(bs[k].status == FLOE_OK, "batch %d: %s", k, bs[k].error.msg);
        floe_batch w = {.op = bs[k].op, .keys = keys[k], .n = N, .results = want};
        ck_assert_int_eq(floe_table_run(whole, &w), FLOE_OK);
        ck_assert_msg(memcmp(res[k], want, N) == 0, "batch %d: answers differ from one whole table's", k);
        ck_assert_uint_eq(bs[k].counts.inserted, w.counts.inserted);
        ck_assert_uint_eq(bs[k].counts.present, w.counts.present);
        ck_assert_uint_eq(bs[k].counts.absent, w.counts.absent);
        ck_assert_uint_eq(bs[k].counts.erased, w.counts.erased);
    }
    floe_batch st = {.op = FLOE_OP_STATS}, wst = {.op = FLOE_OP_STATS};
    ck_assert_int_eq(floe_table_run(t, &st), FLOE_OK);
    ck_assert_int_eq(floe_table_run(whole, &wst), FLOE_OK);
    ck_assert_uint_eq(st.stats.keys, wst.stats.keys);
    ck_assert_uint_eq(st.stats.stage[FLOE_STAGE_JOIN].count, 0); /* nothing joined on the host */

    uint64_t few[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}; /* below the devices' size: split on the host */
    uint8_t fr[10];
    floe_batch small = {.op = FLOE_OP_INSERT, .keys = few, .n = 10, .results = fr};
    ck_assert_int_eq(floe_table_run(t, &small), FLOE_OK);
    ck_assert_int_eq(floe_table_run(t, &st), FLOE_OK);
    ck_assert_uint_eq(st.stats.stage[FLOE_STAGE_JOIN].count, 1);
    const uint64_t held = st.stats.keys;

    keys[0][2500] = 1ull << 45; /* too wide for 40 bits: the door's words, whole, and nothing changes */
    memset(res[0], 0xEE, N);
    floe_batch bad = {.op = FLOE_OP_INSERT, .keys = keys[0], .n = N, .results = res[0]};
    floe_batch wbad = bad;
    ck_assert_int_eq(floe_table_run(t, &bad), FLOE_ERR_INVALID);
    ck_assert_int_eq(floe_table_run(whole, &wbad), FLOE_ERR_INVALID);
    ck_assert_str_eq(bad.error.msg, wbad.error.msg);
    ck_assert_int_eq(floe_table_run(t, &st), FLOE_OK);
    ck_assert_uint_eq(st.stats.keys, held);

    keys[0][2500] = 5;
    atomic_store(&d[1]->broken, true);
    floe_batch broken = {.op = FLOE_OP_INSERT, .keys = keys[0], .n = N, .results = res[0]};
    ck_assert_int_eq(floe_table_run(t, &broken), FLOE_ERR_INTERNAL);
    ck_assert_str_eq(broken.error.msg, "device 1 is broken");
    atomic_store(&d[1]->broken, false);
    ck_assert_int_eq(floe_table_run(t, &broken), FLOE_OK);

    floe_table_destroy(t);
    floe_table_destroy(whole);
    floe_backend_destroy(be);
    floe_backend_destroy(whole_be);
}
END_TEST

/* floe_group_meet_least: every part leaves with the least offer, and with
 * the first failure, whatever order they arrive in; a later plain meeting
 * of the same group keeps both. */
typedef struct least_arg {
    floe_group *g;
    unsigned offer, got, got_later;
    floe_status st, got_st;
} least_arg;

static void *least_main(void *arg)
{
    least_arg *a = arg;
    usleep((useconds_t)(a->offer % 3) * 2000); /* arrivals in another order than the threads' */
    floe_errinfo err_in, err;
    if (a->st != FLOE_OK)
        floe_errinfo_set(&err_in, a->st, "part offering %u failed", a->offer);
    a->got = a->offer;
    a->got_st = floe_group_meet_least(a->g, &a->got, a->st, &err_in, &err);
    floe_group_meet(a->g, FLOE_OK, NULL, &err);
    a->got_later = a->g->least;
    return NULL;
}

START_TEST(parts_agree_on_the_least_offer)
{
    for (int round = 0; round < 2; round++) {
        floe_group g;
        floe_table *parts[4] = {NULL, NULL, NULL, NULL};
        floe_group_init(&g, parts, 4, 1000);
        least_arg a[4];
        pthread_t th[4];
        const unsigned offers[4] = {4, 2, 3, 4};
        for (int i = 0; i < 4; i++) {
            a[i] = (least_arg){.g = &g, .offer = offers[i], .st = round == 1 && i == 2 ? FLOE_ERR_INTERNAL : FLOE_OK};
            ck_assert_int_eq(pthread_create(&th[i], NULL, least_main, &a[i]), 0);
        }
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            ck_assert_uint_eq(a[i].got, 2);
            ck_assert_uint_eq(a[i].got_later, 2);
            ck_assert_int_eq(a[i].got_st, round == 1 ? FLOE_ERR_INTERNAL : FLOE_OK);
        }
        floe_group_destroy(&g);
    }
}
END_TEST

Suite *partition_suite(void)
{
    Suite *s = suite_create("partition");
    TCase *tc = tcase_create("partition");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, set_in_parts);
    tcase_add_test(tc, map_in_parts);
    tcase_add_test(tc, tree_in_parts);
    tcase_add_test(tc, tree_states_in_parts);
    tcase_add_test(tc, files_in_parts);
    tcase_add_test(tc, bad_batches_change_nothing);
    tcase_add_test(tc, capacity_fits_in_parts);
    tcase_add_test(tc, batches_complete_in_order);
    tcase_add_test(tc, lanes_in_parts);
    tcase_add_test(tc, skewed_batches_in_parts);
    tcase_add_test(tc, large_batches_in_flight);
    tcase_add_test(tc, placement_by_free_memory);
    tcase_add_test(tc, creates_the_memory_cannot_hold_are_refused);
    tcase_add_test(tc, batches_split_on_the_devices);
    tcase_add_test(tc, parts_agree_on_the_least_offer);
    suite_add_tcase(s, tc);
    return s;
}
