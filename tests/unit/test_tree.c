/*
 * test_tree.c - the TREE engine against a reference set of whole vectors:
 * streams with heavy sharing (a random walk that changes one or two words a
 * step) and heavy duplication, for lengths 2, 3, 16, 17, 64 and 256; ids
 * stable and distinct, get_by_id and scan give back the exact vectors, save
 * and load keep everything; concurrent inserters see exactly one INSERTED
 * per distinct vector; a full node table answers FULL and never a false
 * PRESENT; a table that grows (tree_grow) whenever a batch has FULL vectors
 * keeps every vector under new ids, generation by generation, through save
 * and load; states given as a parent's id and changed words answer as their
 * whole vectors do and put the same nodes; bad specs and batches are refused and change nothing; a file
 * whose header asks for a table larger than the file is refused before any
 * of it is mapped; a file of the node layout before FLOE_NODE_LAYOUT loads,
 * answers, grows into today's layout and saves as today's.
 */
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "backend.h"
#include "data/layout2_tree.h"
#include "tablefile.h"
#include "testutil.h"
#include "tree.h"

/* ---- the reference: a set of vectors, each with the id the table gave it ---- */

typedef struct vset {
    uint32_t W;
    size_t cap, n;
    uint32_t *slot; /* index + 1 into vecs, 0 empty */
    uint32_t *vecs;
    uint64_t *ids;
} vset;

static uint64_t vhash(const uint32_t *v, uint32_t W)
{
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (uint32_t i = 0; i < W; i++)
        h = (h ^ v[i]) * 0xff51afd7ed558ccdull, h ^= h >> 29;
    return h;
}

static void vset_init(vset *s, uint32_t W, size_t max)
{
    s->W = W;
    s->cap = 4;
    while (s->cap < 2 * max)
        s->cap *= 2;
    s->n = 0;
    s->slot = calloc(s->cap, sizeof *s->slot);
    s->vecs = malloc(max * W * sizeof *s->vecs);
    s->ids = malloc(max * sizeof *s->ids);
}

static void vset_free(vset *s)
{
    free(s->slot);
    free(s->vecs);
    free(s->ids);
}

/* Index of v in s, or -1; with add, adds it when absent (returning -1). */
static long vset_find(vset *s, const uint32_t *v, int add, uint64_t id)
{
    size_t i = vhash(v, s->W) & (s->cap - 1);
    for (; s->slot[i]; i = (i + 1) & (s->cap - 1))
        if (memcmp(s->vecs + (size_t)(s->slot[i] - 1) * s->W, v, s->W * 4) == 0)
            return (long)s->slot[i] - 1;
    if (add) {
        memcpy(s->vecs + s->n * s->W, v, s->W * 4);
        s->ids[s->n] = id;
        s->slot[i] = (uint32_t)++s->n;
    }
    return -1;
}

/* ---- streams: a random walk with repeats ---------------------------------------------- */

typedef struct walk {
    uint32_t W;
    uint32_t v[FLOE_TREE_MAX_WORDS];
    uint64_t rng;
    uint32_t domain;
} walk;

static uint32_t walk_value(walk *w)
{
    /* Mostly small values (shared subtrees), sometimes any 32-bit word,
     * including the extremes. */
    uint64_t r = rng_next(&w->rng);
    switch (r & 15) {
    case 0:
        return 0xFFFFFFFFu;
    case 1:
        return (uint32_t)(r >> 32);
    default:
        return (uint32_t)((r >> 32) % w->domain);
    }
}

static void walk_init(walk *w, uint32_t W, uint64_t seed, uint32_t domain)
{
    w->W = W;
    w->rng = seed | 1;
    w->domain = domain;
    for (uint32_t i = 0; i < W; i++)
        w->v[i] = 0;
}

/* n vectors: walk steps changing 1-2 words, and ~30% repeats of recent ones. */
static void walk_stream(walk *w, uint32_t *out, size_t n)
{
    const uint32_t W = w->W;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && rng_below(&w->rng, 10) < 3) {
            size_t back = 1 + rng_below(&w->rng, i < 64 ? i : 64);
            memcpy(out + i * W, out + (i - back) * W, W * 4);
            continue;
        }
        int changes = 1 + (int)rng_below(&w->rng, 2);
        for (int c = 0; c < changes; c++)
            w->v[rng_below(&w->rng, W)] = walk_value(w);
        memcpy(out + i * W, w->v, W * 4);
    }
}

static tree *make_tree_grow(uint32_t W, uint64_t capacity, uint64_t memory, bool grow, floe_pool *pool)
{
    floe_spec s;
    floe_errinfo err;
    floe_spec_default(&s);
    strcpy(s.name, "t");
    s.kind = FLOE_KIND_TREE;
    s.key_bits = 0;
    s.words = W;
    s.capacity = capacity;
    s.memory = memory;
    s.grow = grow;
    s.seed = 77 + W;
    tree *t = NULL;
    floe_status st = tree_create(&s, pool, &t, &err);
    ck_assert_msg(st == FLOE_OK, "tree_create: %s", err.msg);
    return t;
}

static tree *make_tree(uint32_t W, uint64_t capacity, uint64_t memory, floe_pool *pool)
{
    return make_tree_grow(W, capacity, memory, false, pool);
}

/* Every stored vector comes back from its id, from find, and once from a scan. */
static void check_contents(tree *t, vset *ref)
{
    const uint32_t W = ref->W;
    floe_errinfo err;
    size_t n = ref->n;
    uint8_t *res = malloc(n + 1);
    uint64_t *ids = malloc((n + 1) * 8);
    uint32_t *got = malloc((n + 1) * W * 4);
    ck_assert_int_eq(tree_get(t, ref->ids, n, res, got, NULL, &err), FLOE_OK);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(res[i], FLOE_PRESENT);
        ck_assert_msg(memcmp(got + i * W, ref->vecs + i * W, W * 4) == 0, "get_by_id(%llu) differs",
                      (unsigned long long)ref->ids[i]);
    }
    ck_assert_int_eq(tree_find(t, ref->vecs, n, res, ids, NULL, &err), FLOE_OK);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(res[i], FLOE_PRESENT);
        ck_assert_uint_eq(ids[i], ref->ids[i]);
    }
    /* scan: each id exactly once, with its vector */
    vset seen;
    vset_init(&seen, W, n + 1);
    floe_scan_pos cur = {0, 0}, next;
    int done = 0, first = 1;
    size_t total = 0;
    while (!done) {
        size_t got_n;
        ck_assert_int_eq(tree_scan(t, first ? NULL : &cur, 333, ids, got, &got_n, &next, &done, &err), FLOE_OK);
        for (size_t k = 0; k < got_n; k++) {
            long at = vset_find(ref, got + k * W, 0, 0);
            ck_assert_msg(at >= 0, "scan returned a vector never inserted");
            ck_assert_uint_eq(ids[k], ref->ids[at]);
            ck_assert_msg(vset_find(&seen, got + k * W, 1, ids[k]) < 0, "scan returned a vector twice");
        }
        total += got_n;
        cur = next;
        first = 0;
    }
    ck_assert_uint_eq(total, n);
    vset_free(&seen);
    floe_table_stats st;
    tree_stats(t, &st);
    ck_assert_uint_eq(st.keys, n);
    ck_assert_int_eq(st.spec.kind, FLOE_KIND_TREE);
    ck_assert(st.nodes <= st.node_slots);
    free(res);
    free(ids);
    free(got);
}

/* t saved to a new file; path (a "/tmp/floe-tree-XXXXXX" template) gets its name. */
static void save_to_temp(tree *t, char *path)
{
    floe_errinfo err;
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_msg(tree_save(t, path, &err) == FLOE_OK, "save: %s", err.msg);
}

/* t saved to a file, destroyed, and loaded again from the file. */
static tree *saved_and_loaded(tree *t, floe_pool *pool)
{
    floe_errinfo err;
    char path[] = "/tmp/floe-tree-XXXXXX";
    save_to_temp(t, path);
    tree_destroy(t);
    ck_assert_msg(tree_load(path, 0, pool, &t, &err) == FLOE_OK, "load: %s", err.msg);
    unlink(path);
    return t;
}

static void run_length(uint32_t W, size_t total, floe_pool *pool)
{
    walk w;
    walk_init(&w, W, 1000 + W, W > 64 ? 4 : 16);
    uint32_t *stream = malloc(total * W * 4);
    walk_stream(&w, stream, total);
    /* Nodes for every step of the walk: random data shares little. */
    tree *t = make_tree(W, total, (uint64_t)total * W * 16 + (1u << 20), pool);
    vset ref;
    vset_init(&ref, W, total);
    uint8_t *res = malloc(total);
    uint64_t *ids = malloc(total * 8);
    floe_errinfo err;
    /* Batches of varying size, so duplicates fall inside and across batches. */
    size_t at = 0;
    uint64_t r = W;
    while (at < total) {
        size_t b = 1 + rng_below(&r, 3000);
        if (b > total - at)
            b = total - at;
        floe_answer_counts c;
        ck_assert_int_eq(tree_insert(t, stream + at * W, b, res, ids, &c, &err), FLOE_OK);
        for (size_t i = 0; i < b; i++) {
            const uint32_t *v = stream + (at + i) * W;
            long k = vset_find(&ref, v, 0, 0);
            if (k < 0) {
                ck_assert_msg(res[i] == FLOE_INSERTED, "W=%u vector %zu: want INSERTED, got %d", W, at + i, res[i]);
                vset_find(&ref, v, 1, ids[i]);
            } else {
                ck_assert_msg(res[i] == FLOE_PRESENT, "W=%u vector %zu: want PRESENT, got %d", W, at + i, res[i]);
                ck_assert_uint_eq(ids[i], ref.ids[k]);
            }
        }
        ck_assert_uint_eq(c.inserted + c.present, b);
        at += b;
    }
    /* Distinct ids for distinct vectors. */
    model m;
    model_init(&m, ref.n);
    for (size_t i = 0; i < ref.n; i++) {
        ck_assert_msg(!model_get(&m, ref.ids[i], NULL, NULL), "two vectors share id %llu",
                      (unsigned long long)ref.ids[i]);
        model_put(&m, ref.ids[i], 0, 0);
    }
    model_free(&m);
    check_contents(t, &ref);

    /* Vectors never inserted: ABSENT (a fresh walk far from the first). */
    walk w2;
    walk_init(&w2, W, 5000 + W, 1u << 30);
    size_t probes = 2000;
    uint32_t *other = malloc(probes * W * 4);
    walk_stream(&w2, other, probes);
    floe_status fst = tree_find(t, other, probes, res, ids, NULL, &err);
    ck_assert_msg(fst == FLOE_OK, "W=%u find: %s", W, err.msg);
    for (size_t i = 0; i < probes; i++) {
        bool in = vset_find(&ref, other + i * W, 0, 0) >= 0;
        ck_assert_int_eq(res[i], in ? FLOE_PRESENT : FLOE_ABSENT);
    }
    /* Ids naming no vector: ABSENT. */
    uint64_t bad_ids[2] = {UINT64_MAX, 1ull << 50};
    uint32_t *vec2 = malloc(2 * W * 4);
    ck_assert_int_eq(tree_get(t, bad_ids, 2, res, vec2, NULL, &err), FLOE_OK);
    ck_assert_int_eq(res[0], FLOE_ABSENT);
    ck_assert_int_eq(res[1], FLOE_ABSENT);

    /* Save and load: same contents, same ids, and it goes on working. */
    floe_table_stats before, after;
    tree_stats(t, &before);
    t = saved_and_loaded(t, pool);
    tree_stats(t, &after);
    ck_assert_uint_eq(after.keys, before.keys);
    ck_assert_uint_eq(after.nodes, before.nodes);
    check_contents(t, &ref);
    ck_assert_int_eq(tree_insert(t, other, probes, res, ids, NULL, &err), FLOE_OK);
    for (size_t i = 0; i < probes; i++) {
        long k = vset_find(&ref, other + i * W, 0, 0);
        if (k < 0) {
            ck_assert_int_eq(res[i], FLOE_INSERTED);
            vset_find(&ref, other + i * W, 1, ids[i]);
        } else {
            ck_assert_int_eq(res[i], FLOE_PRESENT);
            ck_assert_uint_eq(ids[i], ref.ids[k]);
        }
    }
    check_contents(t, &ref);
    tree_destroy(t);
    vset_free(&ref);
    free(other);
    free(vec2);
    free(stream);
    free(res);
    free(ids);
}

START_TEST(lengths_against_reference)
{
    static const uint32_t lengths[] = {2, 3, 16, 17, 64, 256};
    floe_pool *pool;
    floe_errinfo err;
    ck_assert_int_eq(floe_pool_create(3, &pool, &err), FLOE_OK);
    for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++)
        run_length(lengths[i], lengths[i] >= 64 ? 12000 : 40000, pool);
    floe_pool_destroy(pool);
}
END_TEST

START_TEST(shape_of_every_length)
{
    /* Every length folds and unfolds: one vector of distinct words each. */
    floe_errinfo err;
    for (uint32_t W = FLOE_TREE_MIN_WORDS; W <= FLOE_TREE_MAX_WORDS; W++) {
        tree *t = make_tree(W, 64, 0, NULL);
        uint32_t v[FLOE_TREE_MAX_WORDS], back[FLOE_TREE_MAX_WORDS];
        for (uint32_t i = 0; i < W; i++)
            v[i] = 0x01000193u * (i + 1) ^ W;
        uint8_t res;
        uint64_t id;
        ck_assert_int_eq(tree_insert(t, v, 1, &res, &id, NULL, &err), FLOE_OK);
        ck_assert_int_eq(res, FLOE_INSERTED);
        ck_assert_int_eq(tree_get(t, &id, 1, &res, back, NULL, &err), FLOE_OK);
        ck_assert_int_eq(res, FLOE_PRESENT);
        ck_assert_msg(memcmp(v, back, W * 4) == 0, "W=%u: unfold differs", W);
        floe_table_stats st;
        tree_stats(t, &st);
        ck_assert_uint_eq(st.nodes, W - 2); /* N - 2 nodes plus the root */
        tree_destroy(t);
    }
}
END_TEST

/* ---- concurrency ------------------------------------------------------------------------ */

enum { CT_THREADS = 4, CT_VECTORS = 60000, CT_W = 16 };

typedef struct ct_worker {
    tree *t;
    const uint32_t *vecs; /* CT_VECTORS distinct vectors */
    int id;
    _Atomic uint32_t *wins;
    uint64_t *ids; /* per vector, as seen by this worker */
} ct_worker;

static void *ct_main(void *arg)
{
    ct_worker *w = arg;
    uint64_t r = 99 + (uint64_t)w->id;
    uint32_t *order = malloc(CT_VECTORS * sizeof *order);
    for (uint32_t i = 0; i < CT_VECTORS; i++)
        order[i] = i;
    for (uint32_t i = CT_VECTORS - 1; i > 0; i--) {
        uint32_t j = (uint32_t)rng_below(&r, i + 1), x = order[i];
        order[i] = order[j], order[j] = x;
    }
    enum { B = 777 };
    uint32_t *batch = malloc(B * CT_W * 4);
    uint8_t res[B];
    uint64_t ids[B];
    floe_errinfo err;
    for (size_t at = 0; at < CT_VECTORS; at += B) {
        size_t b = CT_VECTORS - at < B ? CT_VECTORS - at : B;
        for (size_t k = 0; k < b; k++)
            memcpy(batch + k * CT_W, w->vecs + (size_t)order[at + k] * CT_W, CT_W * 4);
        if (tree_insert(w->t, batch, b, res, ids, NULL, &err) != FLOE_OK)
            break;
        for (size_t k = 0; k < b; k++) {
            if (res[k] == FLOE_INSERTED)
                atomic_fetch_add(&w->wins[order[at + k]], 1);
            w->ids[order[at + k]] = res[k] == FLOE_FULL ? FLOE_NO_ID : ids[k];
        }
    }
    free(batch);
    free(order);
    return NULL;
}

/* Threads insert the same distinct vectors in their own orders: each is
 * INSERTED exactly once.  In a table that grows (from a size far too small)
 * the growths happen between the threads' batches, so ids are compared in
 * the last generation only. */
static void concurrent_run(bool grow)
{
    /* Distinct vectors with much sharing: a walk over a small domain,
     * deduplicated. */
    walk w;
    walk_init(&w, CT_W, 4242, 8);
    size_t want = CT_VECTORS;
    uint32_t *raw = malloc(want * 2 * CT_W * 4);
    uint32_t *vecs = malloc(want * CT_W * 4);
    vset s;
    vset_init(&s, CT_W, want * 2);
    size_t n = 0;
    while (n < want) {
        walk_stream(&w, raw, want * 2);
        for (size_t i = 0; i < want * 2 && n < want; i++)
            if (vset_find(&s, raw + i * CT_W, 1, 0) < 0)
                memcpy(vecs + n++ * CT_W, raw + i * CT_W, CT_W * 4);
    }
    floe_pool *pool;
    floe_errinfo err;
    ck_assert_int_eq(floe_pool_create(2, &pool, &err), FLOE_OK);
    tree *t = make_tree_grow(CT_W, grow ? 64 : CT_VECTORS, 0, grow, pool);
    _Atomic uint32_t *wins = calloc(CT_VECTORS, sizeof *wins);
    pthread_t th[CT_THREADS];
    ct_worker wk[CT_THREADS];
    for (int i = 0; i < CT_THREADS; i++) {
        wk[i] = (ct_worker){t, vecs, i, wins, malloc(CT_VECTORS * 8)};
        pthread_create(&th[i], NULL, ct_main, &wk[i]);
    }
    for (int i = 0; i < CT_THREADS; i++)
        pthread_join(th[i], NULL);
    for (size_t i = 0; i < CT_VECTORS; i++) {
        ck_assert_msg(wins[i] == 1, "vector %zu INSERTED %u times", i, wins[i]);
        for (int k = 1; k < CT_THREADS && !grow; k++)
            ck_assert_uint_eq(wk[k].ids[i], wk[0].ids[i]);
    }
    floe_table_stats st;
    tree_stats(t, &st);
    ck_assert_uint_eq(st.keys, CT_VECTORS);
    if (grow) { /* grown several times; the ids of the last generation */
        ck_assert_uint_ge(st.generation, 3);
        uint8_t *fr = malloc(CT_VECTORS);
        ck_assert_int_eq(tree_find(t, vecs, CT_VECTORS, fr, wk[0].ids, NULL, &err), FLOE_OK);
        for (size_t i = 0; i < CT_VECTORS; i++)
            ck_assert_int_eq(fr[i], FLOE_PRESENT);
        free(fr);
    }
    /* Every vector back from its id. */
    uint32_t back[CT_W];
    uint8_t res;
    for (size_t i = 0; i < CT_VECTORS; i += 97) {
        ck_assert_int_eq(tree_get(t, &wk[0].ids[i], 1, &res, back, NULL, &err), FLOE_OK);
        ck_assert(memcmp(back, vecs + i * CT_W, sizeof back) == 0);
    }
    for (int i = 0; i < CT_THREADS; i++)
        free(wk[i].ids);
    tree_destroy(t);
    floe_pool_destroy(pool);
    free((void *)wins);
    free(raw);
    free(vecs);
    vset_free(&s);
}

START_TEST(concurrent_inserts)
{
    concurrent_run(false);
    concurrent_run(true);
}
END_TEST

/* ---- FULL ------------------------------------------------------------------------------------ */

START_TEST(full_is_exact)
{
    /* A node table far too small for random 16-word vectors: FULL comes, and
     * a vector that got FULL is not reported PRESENT later. */
    const uint32_t W = 16;
    floe_errinfo err;
    floe_spec s;
    floe_spec_default(&s);
    strcpy(s.name, "small");
    s.kind = FLOE_KIND_TREE;
    s.key_bits = 0;
    s.words = W;
    s.capacity = 4096;
    tree_sizing z;
    ck_assert_int_eq(tree_size(&s, &z, &err), FLOE_OK);
    s.memory = z.root_bytes + 8192 * 8; /* 8 Ki node slots */
    tree *t = NULL;
    ck_assert_msg(tree_create(&s, NULL, &t, &err) == FLOE_OK, "%s", err.msg);
    size_t n = 4000;
    uint32_t *v = malloc(n * W * 4);
    uint64_t r = 5;
    for (size_t i = 0; i < n * W; i++)
        v[i] = (uint32_t)rng_next(&r);
    uint8_t *res = malloc(n), *res2 = malloc(n);
    uint64_t *ids = malloc(n * 8), *ids2 = malloc(n * 8);
    ck_assert_int_eq(tree_insert(t, v, n, res, ids, NULL, &err), FLOE_OK);
    size_t full = 0, ins = 0;
    for (size_t i = 0; i < n; i++) {
        full += res[i] == FLOE_FULL;
        ins += res[i] == FLOE_INSERTED;
        ck_assert(res[i] == FLOE_FULL || res[i] == FLOE_INSERTED);
    }
    ck_assert_msg(full > 0 && ins > 0, "want both FULL and INSERTED (%zu / %zu)", full, ins);
    ck_assert_int_eq(tree_find(t, v, n, res2, ids2, NULL, &err), FLOE_OK);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(res2[i], res[i] == FLOE_FULL ? FLOE_ABSENT : FLOE_PRESENT);
        if (res[i] == FLOE_INSERTED)
            ck_assert_uint_eq(ids2[i], ids[i]);
    }
    floe_table_stats st;
    tree_stats(t, &st);
    ck_assert_uint_eq(st.keys, ins);
    ck_assert(st.orphan_nodes > 0);
    ck_assert(st.node_fill > 0.8);
    tree_destroy(t);
    free(v);
    free(res);
    free(res2);
    free(ids);
    free(ids2);
}
END_TEST

/* ---- growth ------------------------------------------------------------------------------------- */

/* A changed word, as the tests make them; insert_delta puts them in the
 * protocol's form (proto/floe_wire.h) for tree_insert_delta. */
typedef struct test_change {
    uint32_t word, value;
} test_change;

static floe_status insert_delta(tree *t, uint64_t generation, const uint64_t *parents, const uint32_t *nch,
                                const test_change *ch, size_t n, uint8_t *res, uint64_t *ids, floe_errinfo *err)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += nch[i];
    uint8_t *counts = malloc(n + 1), *bytes = malloc(total * FLOE_CHANGE_BYTES + 1);
    for (size_t i = 0; i < n; i++)
        counts[i] = (uint8_t)nch[i];
    for (size_t c = 0; c < total; c++)
        floe_change_put(bytes + c * FLOE_CHANGE_BYTES, ch[c].word, ch[c].value);
    floe_status st = tree_insert_delta(t, generation, parents, counts, bytes, n, res, ids, NULL, err);
    free(counts);
    free(bytes);
    return st;
}

/* Refreshes every reference id from the table (after a growth ids change):
 * every vector still PRESENT, ids distinct. */
static void refresh_ids(tree *t, vset *ref)
{
    floe_errinfo err;
    uint8_t *res = malloc(ref->n + 1);
    ck_assert_int_eq(tree_find(t, ref->vecs, ref->n, res, ref->ids, NULL, &err), FLOE_OK);
    model m;
    model_init(&m, ref->n);
    for (size_t i = 0; i < ref->n; i++) {
        ck_assert_msg(res[i] == FLOE_PRESENT, "vector %zu lost by a growth", i);
        ck_assert_msg(!model_get(&m, ref->ids[i], NULL, NULL), "two vectors share id %llu after a growth",
                      (unsigned long long)ref->ids[i]);
        model_put(&m, ref->ids[i], 0, 0);
    }
    model_free(&m);
    free(res);
}

/* A table sized for a few hundred vectors takes tens of thousands: whenever
 * a batch has FULL vectors it grows and they are inserted again, as a
 * growing backend does; every answer matches the reference set, and after
 * each growth every vector is there under a new id, the generation has
 * moved, and a scan cursor of the old generation is refused. */
static void grow_length(uint32_t W, size_t total, floe_pool *pool)
{
    walk w;
    walk_init(&w, W, 3000 + W, W > 16 ? 64 : 1u << 16);
    uint32_t *stream = malloc(total * W * 4);
    walk_stream(&w, stream, total);
    tree *t = make_tree(W, 300, 0, pool);
    vset ref;
    vset_init(&ref, W, total);
    uint8_t *res = malloc(total);
    uint64_t *ids = malloc(total * 8);
    uint32_t *retry = malloc(total * W * 4);
    size_t *where = malloc(total * sizeof *where);
    floe_errinfo err;
    uint64_t r = W * 7, grown = 0;
    for (size_t at = 0; at < total;) {
        size_t b = 1 + rng_below(&r, 2000);
        if (b > total - at)
            b = total - at;
        const uint32_t *batch = stream + at * W;
        ck_assert_int_eq(tree_insert(t, batch, b, res, ids, NULL, &err), FLOE_OK);
        for (;;) { /* grow and insert the FULL ones again, in order, until none is left */
            size_t nf = 0;
            for (size_t i = 0; i < b; i++)
                if (res[i] == FLOE_FULL) {
                    memcpy(retry + nf * W, batch + i * W, W * 4);
                    where[nf++] = i;
                }
            if (nf == 0)
                break;
            floe_table_stats before, after;
            tree_stats(t, &before);
            floe_scan_pos old_cursor = {0, tree_generation(t)}, next;
            const unsigned what = (unsigned)(grown % 3) + 1; /* the nodes, the roots, both */
            ck_assert_msg(tree_grow(t, what, &err) == FLOE_OK, "grow: %s", err.msg);
            grown++;
            tree_stats(t, &after);
            ck_assert_uint_eq(after.generation, before.generation + 1);
            ck_assert_uint_eq(after.keys, before.keys);
            /* a node table grows a step: 2^k -> 1.5 * 2^k (from 2^8 slots on) -> 2^(k+1) */
            const uint64_t ns = before.node_slots, pow2 = (ns & (ns - 1)) == 0;
            const uint64_t step = pow2 ? (ns >= 256 ? ns / 2 * 3 : 2 * ns) : ns / 3 * 4;
            ck_assert_uint_eq(after.node_slots, (what & TREE_GROW_NODES) ? step : ns);
            ck_assert((what & TREE_GROW_ROOTS) ? after.slots > before.slots : after.slots >= before.slots);
            if (what & TREE_GROW_NODES)
                ck_assert_uint_eq(after.orphan_nodes, 0); /* every node put again is a vector's */
            size_t got_n;
            int done;
            ck_assert_int_eq(tree_scan(t, &old_cursor, 10, ids, retry + nf * W, &got_n, &next, &done, &err),
                             FLOE_ERR_INVALID);
            ck_assert_msg(strstr(err.msg, "generation") != NULL, "%s", err.msg);
            uint8_t *rres = malloc(nf);
            uint64_t *rids = malloc(nf * 8);
            ck_assert_int_eq(tree_insert(t, retry, nf, rres, rids, NULL, &err), FLOE_OK);
            for (size_t k = 0; k < nf; k++) {
                res[where[k]] = rres[k];
                ids[where[k]] = rids[k];
            }
            free(rres);
            free(rids);
            refresh_ids(t, &ref); /* the ids of vectors of earlier batches changed */
            /* and those of this batch's first part too: look the whole batch up again */
            uint8_t *fres = malloc(b);
            ck_assert_int_eq(tree_find(t, batch, b, fres, ids, NULL, &err), FLOE_OK);
            for (size_t i = 0; i < b; i++)
                ck_assert(res[i] == FLOE_FULL || fres[i] == FLOE_PRESENT);
            free(fres);
        }
        for (size_t i = 0; i < b; i++) {
            const uint32_t *v = batch + i * W;
            long k = vset_find(&ref, v, 0, 0);
            if (k < 0) {
                ck_assert_msg(res[i] == FLOE_INSERTED, "W=%u vector %zu: want INSERTED, got %d", W, at + i, res[i]);
                vset_find(&ref, v, 1, ids[i]);
            } else {
                ck_assert_msg(res[i] == FLOE_PRESENT, "W=%u vector %zu: want PRESENT, got %d", W, at + i, res[i]);
                ck_assert_uint_eq(ids[i], ref.ids[k]);
            }
        }
        at += b;
    }
    ck_assert_msg(grown >= 3, "W=%u: only %llu growths", W, (unsigned long long)grown);
    ck_assert_uint_eq(tree_generation(t), grown);
    check_contents(t, &ref);

    /* save and load keep the generation, the ids and the vectors */
    t = saved_and_loaded(t, pool);
    ck_assert_uint_eq(tree_generation(t), grown);
    check_contents(t, &ref);
    tree_destroy(t);
    vset_free(&ref);
    free(stream);
    free(res);
    free(ids);
    free(retry);
    free(where);
}

START_TEST(growth_keeps_every_vector)
{
    floe_pool *pool = NULL;
    floe_errinfo err;
    ck_assert_int_eq(floe_pool_create(2, &pool, &err), FLOE_OK);
    grow_length(3, 30000, pool);
    grow_length(16, 30000, pool);
    grow_length(64, 8000, NULL);
    floe_pool_destroy(pool);
}
END_TEST

/* A table that grows by itself (spec.grow), created for 64 vectors, takes
 * batches of whole vectors and of states by parent, every state twice in
 * its batch: no FULL answer, every answer as the reference set's, ids exact
 * in every generation (the reference's looked up again when it moved),
 * parents of an old generation refused with nothing changed, both of its
 * tables grown, and all of it through save and load. */
static void self_grow_length(uint32_t W, size_t total, floe_pool *pool)
{
    enum { HALF = 1000 };
    tree *t = make_tree_grow(W, 64, 0, true, pool);
    floe_table_stats first, st;
    tree_stats(t, &first);
    vset ref;
    vset_init(&ref, W, total + 4 * HALF + 1);
    walk w;
    walk_init(&w, W, 5000 + W, W > 16 ? 64 : 1u << 12);
    uint32_t *vecs = malloc(2 * HALF * W * 4), *one = malloc(W * 4);
    uint64_t *parents = malloc(2 * HALF * 8), *ids = malloc(2 * HALF * 8);
    uint32_t *nch = malloc(2 * HALF * 4);
    test_change *ch = malloc(2 * HALF * 2 * sizeof *ch), *ch2 = malloc(2 * HALF * 2 * sizeof *ch2);
    uint8_t *res = malloc(2 * HALF);
    floe_errinfo err;
    uint64_t r = 31 + W, grew = 0, delta_batches = 0, stale_parent = FLOE_NO_ID;
    for (size_t done = 0; done < total;) {
        size_t half = 1 + rng_below(&r, HALF);
        if (half > total - done)
            half = total - done;
        const bool delta = ref.n > 0 && rng_below(&r, 2) == 0;
        size_t nc = 0;
        for (size_t i = 0; i < half; i++) { /* state i, and again at half + (a shuffled place) */
            uint32_t *v = vecs + i * W;
            if (!delta) {
                walk_stream(&w, v, 1);
                continue;
            }
            const size_t p = rng_below(&r, ref.n);
            memcpy(v, ref.vecs + p * W, W * 4);
            parents[i] = ref.ids[p];
            nch[i] = 1 + (uint32_t)rng_below(&r, 2);
            for (uint32_t c = 0; c < nch[i]; c++) {
                ch[nc] = (test_change){(uint32_t)rng_below(&r, W), (uint32_t)rng_below(&r, 1u << 12)};
                v[ch[nc].word] = ch[nc].value;
                nc++;
            }
        }
        /* the second occurrences, in another order (Fisher-Yates over the indices) */
        size_t *order = malloc(half * sizeof *order), *at = malloc((half + 1) * sizeof *at);
        for (size_t i = 0; i < half; i++)
            order[i] = i;
        for (size_t i = half; i > 1; i--) {
            size_t j = rng_below(&r, i), x = order[i - 1];
            order[i - 1] = order[j], order[j] = x;
        }
        at[0] = 0;
        for (size_t i = 0; i < half; i++)
            at[i + 1] = at[i] + (delta ? nch[i] : 0);
        size_t nc2 = nc;
        memcpy(ch2, ch, nc * sizeof *ch);
        for (size_t k = 0; k < half; k++) {
            const size_t i = order[k];
            memcpy(vecs + (half + k) * W, vecs + i * W, W * 4);
            if (delta) {
                parents[half + k] = parents[i];
                nch[half + k] = nch[i];
                memcpy(ch2 + nc2, ch + at[i], nch[i] * sizeof *ch);
                nc2 += nch[i];
            }
        }
        free(order);
        free(at);
        const size_t n = 2 * half;
        const uint64_t gen = tree_generation(t);
        if (delta) {
            ck_assert_msg(insert_delta(t, gen, parents, nch, ch2, n, res, ids, &err) == FLOE_OK, "delta: %s", err.msg);
            delta_batches++;
        } else {
            ck_assert_msg(tree_insert(t, vecs, n, res, ids, NULL, &err) == FLOE_OK, "insert: %s", err.msg);
        }
        if (tree_generation(t) != gen) { /* it grew: every id is of the new generation */
            grew++;
            refresh_ids(t, &ref);
            if (stale_parent == FLOE_NO_ID && ref.n > 0)
                stale_parent = ref.ids[0];
        }
        for (size_t i = 0; i < n; i++) {
            const uint32_t *v = vecs + i * W;
            ck_assert_msg(res[i] != FLOE_FULL, "W=%u: FULL from a table that grows", W);
            long k = vset_find(&ref, v, 0, 0);
            if (k < 0) {
                ck_assert_msg(res[i] == FLOE_INSERTED, "W=%u state %zu: want INSERTED, got %d", W, i, res[i]);
                vset_find(&ref, v, 1, ids[i]);
            } else {
                ck_assert_msg(res[i] == FLOE_PRESENT, "W=%u state %zu: want PRESENT, got %d", W, i, res[i]);
                ck_assert_uint_eq(ids[i], ref.ids[k]);
            }
        }
        done += half;
    }
    ck_assert_msg(grew >= 3, "W=%u: only %llu growths", W, (unsigned long long)grew);
    ck_assert_uint_gt(delta_batches, 0);
    tree_stats(t, &st);
    ck_assert_uint_gt(st.node_slots, first.node_slots);
    ck_assert_uint_gt(st.slots, first.slots);
    ck_assert_uint_ge(st.generation, grew); /* a batch may grow both tables, one after the other */

    /* parents of an old generation: refused, nothing changed */
    parents[0] = stale_parent;
    nch[0] = 1;
    ch[0] = (test_change){0, 0x5EEDu};
    ck_assert_int_eq(insert_delta(t, st.generation - 1, parents, nch, ch, 1, res, ids, &err), FLOE_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "generation") != NULL, "%s", err.msg);
    floe_table_stats after;
    tree_stats(t, &after);
    ck_assert_uint_eq(after.keys, st.keys);
    ck_assert_uint_eq(after.nodes, st.nodes);
    check_contents(t, &ref);

    /* save and load keep the grown sizes, and the table goes on growing */
    t = saved_and_loaded(t, pool);
    tree_stats(t, &after);
    ck_assert_uint_eq(after.node_slots, st.node_slots);
    ck_assert_uint_eq(after.slots, st.slots);
    ck_assert_uint_eq(after.generation, st.generation);
    check_contents(t, &ref);
    for (size_t i = 0; i < 4 * HALF; i++) {
        walk_stream(&w, one, 1);
        const long k = vset_find(&ref, one, 0, 0);
        ck_assert_int_eq(tree_insert(t, one, 1, res, ids, NULL, &err), FLOE_OK);
        ck_assert_int_eq(res[0], k < 0 ? FLOE_INSERTED : FLOE_PRESENT);
        if (k < 0)
            vset_find(&ref, one, 1, ids[0]);
        if (tree_generation(t) != after.generation) {
            refresh_ids(t, &ref);
            after.generation = tree_generation(t);
        }
    }
    check_contents(t, &ref);
    tree_destroy(t);
    vset_free(&ref);
    free(vecs);
    free(one);
    free(parents);
    free(ids);
    free(nch);
    free(ch);
    free(ch2);
    free(res);
}

START_TEST(growing_table_never_answers_full)
{
    floe_pool *pool = NULL;
    floe_errinfo err;
    ck_assert_int_eq(floe_pool_create(2, &pool, &err), FLOE_OK);
    self_grow_length(3, 40000, pool);
    self_grow_length(16, 40000, NULL);
    self_grow_length(64, 10000, pool);
    floe_pool_destroy(pool);
}
END_TEST

/* A batch far larger than its growing table (20000 vectors into one made
 * for 64) is answered whole, never FULL, every vector INSERTED once and
 * found after, and the table grows for the vectors that came back FULL in
 * one growth each round, not a step of 1.5 or 4/3 a growth: fewer
 * growths than the steps either table took. */
START_TEST(a_large_batch_grows_in_few_growths)
{
    enum { W = 16, N = 20000 };
    floe_pool *pool;
    floe_errinfo err;
    ck_assert_int_eq(floe_pool_create(2, &pool, &err), FLOE_OK);
    tree *t = make_tree_grow(W, 64, 0, true, pool);
    uint32_t *v = malloc((size_t)N * W * 4), *raw = malloc((size_t)2 * N * W * 4);
    walk w;
    walk_init(&w, W, 991, 16);
    vset ref;
    vset_init(&ref, W, 2 * N);
    size_t n = 0;
    while (n < N) { /* distinct vectors */
        walk_stream(&w, raw, 2 * N);
        for (size_t i = 0; i < 2 * (size_t)N && n < N; i++)
            if (vset_find(&ref, raw + i * W, 1, 0) < 0)
                memcpy(v + n++ * W, raw + i * W, W * 4);
    }
    const tree_sizing z0 = *tree_sizes(t);
    floe_table_stats st;
    tree_stats(t, &st);
    const uint64_t gen0 = st.generation;
    uint8_t *res = malloc(N);
    ck_assert_int_eq(tree_insert(t, v, N, res, NULL, NULL, &err), FLOE_OK);
    for (size_t i = 0; i < N; i++)
        ck_assert_msg(res[i] == FLOE_INSERTED, "vector %zu: %d", i, res[i]);
    const tree_sizing *z1 = tree_sizes(t);
    const int node_steps = 2 * ((int)z1->node_bits - (int)z0.node_bits) + (int)z1->node_three - (int)z0.node_three;
    const int root_steps =
        2 * ((int)z1->root_addr_bits - (int)z0.root_addr_bits) + (int)z1->root_three - (int)z0.root_three;
    const int steps = node_steps > root_steps ? node_steps : root_steps;
    tree_stats(t, &st);
    const uint64_t growths = st.generation - gen0;
    ck_assert_msg(steps >= 4 && growths < (uint64_t)steps, "%llu growths for %d node and %d root steps",
                  (unsigned long long)growths, node_steps, root_steps);
    ck_assert_int_eq(tree_find(t, v, N, res, NULL, NULL, &err), FLOE_OK);
    for (size_t i = 0; i < N; i++)
        ck_assert_int_eq(res[i], FLOE_PRESENT);
    vset_free(&ref);
    free(res);
    free(v);
    free(raw);
    tree_destroy(t);
    floe_pool_destroy(pool);
}
END_TEST

/* The sizing tests' table: 16 words, capacity 2^20, growing, laid out as
 * 2^17 node slots and 2^12 primary root buckets. */
static void sizing_table(floe_spec *spec, tree_sizing *z)
{
    floe_errinfo err;
    floe_spec_default(spec);
    spec->kind = FLOE_KIND_TREE;
    spec->words = 16;
    spec->capacity = 1u << 20;
    spec->grow = 1;
    spec->seed = 5;
    strcpy(spec->name, "t");
    const tree_sizing sizes = {.node_bits = 17, .node_tag_bits = FLOE_NODE_TAG_BITS, .root_addr_bits = 12};
    ck_assert_int_eq(tree_size_bits(spec, &sizes, z, &err), FLOE_OK);
}

/* A node-table growth of a table that holds fewer vectors than its capacity
 * goes as far as the capacity needs at the rate given (at most
 * 2^TREE_GROW_AHEAD_BITS times); past its capacity, or without a rate, it
 * doubles. */
START_TEST(growth_sizes_for_the_capacity)
{
    floe_spec spec;
    floe_errinfo err;
    tree_sizing z, g;
    sizing_table(&spec, &z);
    /* 100 000 vectors made 120 000 nodes, the last ones 1.5 a vector: (120 000 + 1.5 x 948 576) / 0.8 slots */
    const double want = tree_nodes_ahead(&spec, 120000, 100000, 1.5);
    ck_assert_double_eq_tol(want, (120000.0 + 1.5 * ((1u << 20) - 100000)) / TREE_NODE_FILL, 1e-6);
    ck_assert_int_eq(tree_size_grown(&spec, &z, TREE_GROW_NODES, want, &g, &err), FLOE_OK);
    ck_assert_uint_eq(g.node_bits, 18 + 2); /* 2^21 > want > 2^20: the cap of 3 doublings stops at 2^20 */
    ck_assert_uint_eq(g.node_bits, z.node_bits + TREE_GROW_AHEAD_BITS);
    ck_assert_uint_eq(g.node_three, 0);
    /* without a rate: the average so far */
    ck_assert_double_eq_tol(tree_nodes_ahead(&spec, 120000, 100000, 0.0), 1.2 * (1u << 20) / TREE_NODE_FILL, 1e-6);
    ck_assert_int_eq(tree_size_grown(&spec, &z, TREE_GROW_NODES, 200000.0, &g, &err), FLOE_OK);
    ck_assert_uint_eq(g.node_bits, 17); /* 1.5 x 2^17 = 196 608 slots are nearer 200 000 than 2^18: one step */
    ck_assert_uint_eq(g.node_three, 1);
    ck_assert_int_eq(tree_size_grown(&spec, &z, TREE_GROW_NODES, 400000.0, &g, &err), FLOE_OK);
    ck_assert_uint_eq(g.node_bits, 18); /* 1.5 x 2^18 = 393 216: three steps */
    ck_assert_uint_eq(g.node_three, 1);
    ck_assert_int_eq(tree_size_grown(&spec, &z, TREE_GROW_NODES, 460000.0, &g, &err), FLOE_OK);
    ck_assert_uint_eq(g.node_bits, 19); /* nearer 2^19 = 524 288 than 393 216 (460 000^2 > their product) */
    ck_assert_uint_eq(g.node_three, 0);
    /* below a sixteenth of the capacity (the first vectors share little), at or past it, and with no
     * guess: doublings */
    ck_assert_double_eq(tree_nodes_ahead(&spec, 14 * 1000, 1000, 14.0), 0.0);
    ck_assert(tree_nodes_ahead(&spec, 14 * 65536, 65536, 14.0) > 0.0);
    ck_assert_double_eq(tree_nodes_ahead(&spec, 1u << 21, 1u << 20, 2.0), 0.0);
    ck_assert_int_eq(tree_size_grown(&spec, &z, TREE_GROW_NODES, 0.0, &g, &err), FLOE_OK);
    ck_assert_uint_eq(g.node_bits, 17); /* one step: 1.5 x 2^17 */
    ck_assert_uint_eq(g.node_three, 1);
    ck_assert_uint_eq(g.node_bytes, 8 * 3 * (1u << 16));
    ck_assert_int_eq(tree_size_grown(&spec, &g, TREE_GROW_NODES, 0.0, &g, &err), FLOE_OK);
    ck_assert_uint_eq(g.node_bits, 18); /* and the next: 2^18 */
    ck_assert_uint_eq(g.node_three, 0);
    /* the roots alone: the nodes stay */
    ck_assert_int_eq(tree_size_grown(&spec, &z, TREE_GROW_ROOTS, want, &g, &err), FLOE_OK);
    ck_assert_uint_eq(g.node_bits, 17);
    ck_assert_uint_eq(g.node_three, 0);
    ck_assert_uint_eq(g.root_addr_bits, 12); /* 2^12 -> 1.5 x 2^12 -> 2^13 primary buckets */
    ck_assert_uint_eq(g.root_three, 1);
    ck_assert_int_eq(tree_size_grown(&spec, &g, TREE_GROW_ROOTS, 0.0, &g, &err), FLOE_OK);
    ck_assert_uint_eq(g.root_addr_bits, 13);
    ck_assert_uint_eq(g.root_three, 0);
}
END_TEST

/* A growth sized for a batch (tree_size_for): tree_size_grown's step, then
 * as many more as the nodes and roots to come need, each table the
 * smallest step that holds them (nodes to TREE_NODE_FILL, roots to
 * max_fill), and at the largest size it stops. */
START_TEST(growth_sized_for_a_batch)
{
    floe_spec spec;
    floe_errinfo err;
    tree_sizing z, g;
    sizing_table(&spec, &z);
    static const struct {
        unsigned what;
        double nodes, roots;
        uint32_t node_bits, node_three, root_bits, root_three;
    } cases[] = {
        {TREE_GROW_NODES, 0.0, 0.0, 17, 1, 12, 0}, /* nothing to come: one step */
        /* 10^6 nodes at 0.8: 1.5 x 2^20 = 1 572 864 slots hold them, 2^20 do not (six steps more) */
        {TREE_GROW_NODES, 1e6, 0.0, 20, 1, 12, 0},
        /* roots past max_fill of 2^12 primary buckets (147 968 slots in all levels) and of 1.5 x 2^12
         * (221 952): 2^13 (295 936), though only the nodes grow */
        {TREE_GROW_NODES, 0.0, 250000.0, 17, 1, 13, 0},
        {TREE_GROW_ROOTS, 1e6, 0.0, 17, 0, 12, 1}, /* the roots alone: the nodes stay, whatever they need */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_int_eq(tree_size_for(&spec, &z, cases[i].what, 0.0, cases[i].nodes, cases[i].roots, &g, &err),
                         FLOE_OK);
        ck_assert_msg(g.node_bits == cases[i].node_bits && g.node_three == cases[i].node_three &&
                          g.root_addr_bits == cases[i].root_bits && g.root_three == cases[i].root_three,
                      "case %zu: nodes 2^%u (three %u), roots 2^%u (three %u)", i, g.node_bits, g.node_three,
                      g.root_addr_bits, g.root_three);
    }
    /* more than any table holds: the largest node table, and no error */
    ck_assert_int_eq(tree_size_for(&spec, &z, TREE_GROW_NODES, 0.0, 1e12, 0.0, &g, &err), FLOE_OK);
    ck_assert_uint_eq(g.node_bits, FLOE_NODE_MAX_BITS);
    ck_assert_uint_eq(g.node_three, 0);
    /* at the largest already: ERR_TOO_LARGE, as tree_size_grown */
    ck_assert_int_eq(tree_size_for(&spec, &g, TREE_GROW_NODES, 0.0, 0.0, 0.0, &z, &err), FLOE_ERR_TOO_LARGE);
}
END_TEST

/* ---- states as a parent and changed words ---------------------------------------------------- */

/* Table a takes states as their parent's id and the changed words
 * (tree_insert_delta), mixed with whole-vector batches; table b (the same
 * spec) takes every state as a whole vector.  The answers agree state by
 * state, a's ids give back the exact vectors, both tables hold the same
 * nodes, and a parent that names no vector fails its batch, which changes
 * nothing. */
static void delta_length(uint32_t W, floe_pool *pool)
{
    const size_t total = 20000, seed_n = 64;
    tree *a = make_tree(W, total + seed_n, 0, pool), *b = make_tree(W, total + seed_n, 0, pool);
    vset ref; /* a's vectors and ids */
    vset_init(&ref, W, total + seed_n);
    walk w;
    walk_init(&w, W, 7000 + W, 8);
    uint32_t *vecs = malloc((total + seed_n) * W * 4);
    uint8_t *ra = malloc(total + seed_n), *rb = malloc(total + seed_n);
    uint64_t *ida = malloc((total + seed_n) * 8), *idb = malloc((total + seed_n) * 8);
    uint64_t *parents = malloc(total * 8);
    uint32_t *nch = malloc(total * 4);
    test_change *ch = malloc(total * 4 * sizeof *ch);
    floe_errinfo err;
    walk_stream(&w, vecs, seed_n);
    ck_assert_int_eq(tree_insert(a, vecs, seed_n, ra, ida, NULL, &err), FLOE_OK);
    ck_assert_int_eq(tree_insert(b, vecs, seed_n, rb, idb, NULL, &err), FLOE_OK);
    for (size_t i = 0; i < seed_n; i++)
        if (ra[i] == FLOE_INSERTED)
            vset_find(&ref, vecs + i * W, 1, ida[i]);
    uint64_t r = 99 + W;
    for (size_t done = 0; done < total;) {
        size_t n = 1 + rng_below(&r, 1500), nc_total = 0;
        if (n > total - done)
            n = total - done;
        const bool whole = rng_below(&r, 5) == 0; /* some batches of whole vectors on a too */
        for (size_t i = 0; i < n; i++) {
            const size_t p = rng_below(&r, ref.n);
            uint32_t *v = vecs + i * W;
            memcpy(v, ref.vecs + p * W, W * 4);
            parents[i] = ref.ids[p];
            nch[i] = (uint32_t)rng_below(&r, 4); /* 0: the parent itself */
            for (uint32_t c = 0; c < nch[i]; c++) {
                /* the same word twice now and then: the last value counts */
                const uint32_t word =
                    c > 0 && rng_below(&r, 4) == 0 ? ch[nc_total - 1].word : (uint32_t)rng_below(&r, W);
                const uint32_t value = rng_below(&r, 8) == 0 ? (uint32_t)rng_next(&r) : (uint32_t)rng_below(&r, 8);
                ch[nc_total++] = (test_change){word, value};
                v[word] = value;
            }
        }
        if (whole)
            ck_assert_int_eq(tree_insert(a, vecs, n, ra, ida, NULL, &err), FLOE_OK);
        else
            ck_assert_msg(insert_delta(a, tree_generation(a), parents, nch, ch, n, ra, ida, &err) == FLOE_OK,
                          "delta: %s", err.msg);
        ck_assert_int_eq(tree_insert(b, vecs, n, rb, idb, NULL, &err), FLOE_OK);
        for (size_t i = 0; i < n; i++) {
            const uint32_t *v = vecs + i * W;
            ck_assert_msg(ra[i] == rb[i], "W=%u state %zu: %d by its parent, %d whole", W, done + i, ra[i], rb[i]);
            long k = vset_find(&ref, v, 0, 0);
            if (k < 0) {
                ck_assert_int_eq(ra[i], FLOE_INSERTED);
                vset_find(&ref, v, 1, ida[i]);
            } else {
                ck_assert_int_eq(ra[i], FLOE_PRESENT);
                ck_assert_uint_eq(ida[i], ref.ids[k]);
            }
        }
        done += n;
    }
    check_contents(a, &ref);
    floe_table_stats sa, sb;
    tree_stats(a, &sa);
    tree_stats(b, &sb);
    ck_assert_uint_eq(sa.keys, sb.keys);
    ck_assert_uint_eq(sa.nodes, sb.nodes); /* the paths put exactly the nodes whole vectors need */
    ck_assert_uint_eq(sa.orphan_nodes, 0);

    /* a parent that names no vector: the batch fails and changes nothing */
    parents[0] = ref.ids[0];
    nch[0] = 1;
    ch[0] = (test_change){0, 0xABCDEF01u};
    parents[1] = 1ull << 50; /* past every slot */
    nch[1] = 1;
    ch[1] = (test_change){W - 1, 0x12345678u};
    ck_assert_int_eq(insert_delta(a, tree_generation(a), parents, nch, ch, 2, ra, ida, &err), FLOE_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "names no vector") != NULL, "%s", err.msg);
    floe_table_stats after;
    tree_stats(a, &after);
    ck_assert_uint_eq(after.keys, sa.keys);
    ck_assert_uint_eq(after.nodes, sa.nodes);
    /* the same in a batch the pool looks up in several tasks: the first
     * such state is named, whichever task met it first */
    const size_t nb = 3000;
    for (size_t i = 0; i < nb; i++) {
        parents[i] = ref.ids[i % ref.n];
        nch[i] = 1;
        ch[i] = (test_change){(uint32_t)(i % W), (uint32_t)i | 0x80000000u};
    }
    parents[2900] = 1ull << 50;
    parents[1500] = (1ull << 50) + 1;
    ck_assert_int_eq(insert_delta(a, tree_generation(a), parents, nch, ch, nb, ra, ida, &err), FLOE_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "state 1500: parent id 1125899906842625 names no vector") != NULL, "%s", err.msg);
    tree_stats(a, &after);
    ck_assert_uint_eq(after.keys, sa.keys);
    ck_assert_uint_eq(after.nodes, sa.nodes);
    memcpy(vecs, ref.vecs, W * 4);
    vecs[0] = 0xABCDEF01u;
    ck_assert_int_eq(tree_find(a, vecs, 1, ra, ida, NULL, &err), FLOE_OK);
    ck_assert_int_eq(ra[0], vset_find(&ref, vecs, 0, 0) >= 0 ? FLOE_PRESENT : FLOE_ABSENT);
    check_contents(a, &ref);

    tree_destroy(a);
    tree_destroy(b);
    vset_free(&ref);
    free(vecs);
    free(ra);
    free(rb);
    free(ida);
    free(idb);
    free(parents);
    free(nch);
    free(ch);
}

START_TEST(states_by_parent_match_whole_vectors)
{
    floe_pool *pool = NULL;
    floe_errinfo err;
    ck_assert_int_eq(floe_pool_create(2, &pool, &err), FLOE_OK);
    static const uint32_t lengths[] = {2, 3, 5, 16, 17, 64, 255, 256};
    for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++)
        delta_length(lengths[i], i % 2 ? NULL : pool);
    floe_pool_destroy(pool);
}
END_TEST

/* ---- bad input -------------------------------------------------------------------------------- */

START_TEST(bad_specs_and_batches)
{
    floe_spec s;
    floe_errinfo err;
    tree *t = NULL;
    floe_spec_default(&s);
    strcpy(s.name, "b");
    s.kind = FLOE_KIND_TREE;
    s.key_bits = 0;
    s.words = 1;
    ck_assert_int_eq(floe_spec_validate(&s, &err), FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.msg, "words"));
    s.words = 257;
    ck_assert_int_eq(floe_spec_validate(&s, &err), FLOE_ERR_INVALID);
    s.words = 8;
    s.key_bits = 40;
    ck_assert_int_eq(floe_spec_validate(&s, &err), FLOE_ERR_INVALID);
    s.key_bits = 0;
    s.grow = true; /* a TREE grows too */
    ck_assert_int_eq(floe_spec_validate(&s, &err), FLOE_OK);
    s.grow = false;
    s.value_bytes = 8;
    ck_assert_int_eq(floe_spec_validate(&s, &err), FLOE_ERR_INVALID);
    s.value_bytes = 0;
    s.memory = 1000;
    ck_assert_int_eq(tree_create(&s, NULL, &t, &err), FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.msg, "too small"));
    s.memory = 0;
    ck_assert_int_eq(floe_spec_validate(&s, &err), FLOE_OK);
    floe_spec set;
    floe_spec_default(&set);
    strcpy(set.name, "s");
    set.memory = 1 << 20;
    ck_assert_int_eq(floe_spec_validate(&set, &err), FLOE_ERR_INVALID);
    set.memory = 0;
    set.words = 4;
    ck_assert_int_eq(floe_spec_validate(&set, &err), FLOE_ERR_INVALID);

    /* Through the backend: erase, rebuild and MAP flags on a TREE, get_by_id
     * on a SET; none changes anything. */
    floe_backend *be;
    ck_assert_int_eq(floe_backend_cpu_create(1, &be, &err), FLOE_OK);
    floe_table *tt, *st;
    ck_assert_int_eq(floe_table_create(be, &s, &tt, &err), FLOE_OK);
    ck_assert_int_eq(floe_table_create(be, &set, &st, &err), FLOE_ERR_INVALID);
    set.words = 0;
    ck_assert_int_eq(floe_table_create(be, &set, &st, &err), FLOE_OK);
    uint32_t vec[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint8_t res[2];
    uint64_t ids[2];
    floe_batch b;
    /* each refusal: the door's own answer (floe_request_check), then the same through the backend */
    ck_assert_int_eq(floe_request_check(&tt->spec, FLOE_OP_ERASE, 0, vec, 32, NULL, 0, NULL, &err),
                     FLOE_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.msg, "TREE tables do not erase"));
    memset(&b, 0, sizeof b);
    b.op = FLOE_OP_ERASE;
    b.vectors = vec;
    b.n = 1;
    b.results = res;
    ck_assert_int_eq(floe_table_run(tt, &b), FLOE_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(b.error.msg, "TREE tables do not erase"));
    ck_assert_int_eq(floe_request_check(&tt->spec, FLOE_OP_INSERT, FLOE_BATCH_OVERWRITE, vec, 32, NULL, 0, NULL, &err),
                     FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.msg, "values and overwrite are for MAP tables"));
    memset(&b, 0, sizeof b);
    b.op = FLOE_OP_INSERT;
    b.flags = FLOE_BATCH_OVERWRITE;
    b.vectors = vec;
    b.n = 1;
    b.results = res;
    ck_assert_int_eq(floe_table_run(tt, &b), FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(b.error.msg, "values and overwrite are for MAP tables"));
    ck_assert_int_eq(floe_request_check(&tt->spec, FLOE_OP_REBUILD, 0, NULL, 0, NULL, 0, NULL, &err),
                     FLOE_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.msg, "TREE tables do not rebuild"));
    memset(&b, 0, sizeof b);
    b.op = FLOE_OP_REBUILD;
    ck_assert_int_eq(floe_table_run(tt, &b), FLOE_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(b.error.msg, "TREE tables do not rebuild"));
    ids[0] = 0;
    ck_assert_int_eq(floe_request_check(&st->spec, FLOE_OP_GET, 0, ids, 8, NULL, 0, NULL, &err), FLOE_ERR_UNSUPPORTED);
    ck_assert_str_eq(err.msg, "get_by_id is for TREE tables; table s is a SET");
    memset(&b, 0, sizeof b);
    b.op = FLOE_OP_GET;
    b.keys = ids;
    b.n = 1;
    b.results = res;
    b.vectors_out = vec;
    ck_assert_int_eq(floe_table_run(st, &b), FLOE_ERR_UNSUPPORTED);
    ck_assert_str_eq(b.error.msg, "get_by_id is for TREE tables; table s is a SET");
    ck_assert_uint_eq(vec[0], 1); /* nothing written */
    memset(&b, 0, sizeof b);
    b.op = FLOE_OP_STATS;
    ck_assert_int_eq(floe_table_run(st, &b), FLOE_OK);
    ck_assert_uint_eq(b.stats.keys, 0);
    memset(&b, 0, sizeof b);
    b.op = FLOE_OP_STATS;
    ck_assert_int_eq(floe_table_run(tt, &b), FLOE_OK);
    ck_assert_uint_eq(b.stats.keys, 0);
    ck_assert_uint_eq(b.stats.nodes, 0);
    /* A good insert through the backend works. */
    memset(&b, 0, sizeof b);
    b.op = FLOE_OP_INSERT;
    b.flags = FLOE_BATCH_WANT_IDS;
    b.vectors = vec;
    b.n = 1;
    b.results = res;
    b.ids = ids;
    ck_assert_int_eq(floe_table_run(tt, &b), FLOE_OK);
    ck_assert_int_eq(res[0], FLOE_INSERTED);
    ck_assert_uint_eq(b.counts.inserted, 1);

    /* States by their parents: bad ones refused at the door (floe_states_check), in the engine
     * (a parent that names no vector, another generation), and none changes anything; a good one
     * answers as its whole vector. */
    uint8_t counts[2] = {1, 1}, changes[3 * FLOE_CHANGE_BYTES];
    uint64_t parents[2] = {ids[0], ids[0]};
    floe_change_put(changes, 0, 9);
    floe_change_put(changes + FLOE_CHANGE_BYTES, s.words, 9); /* past the vector */
    const struct {
        floe_table *t;
        uint64_t parent1, generation;
        size_t changes_len;
        unsigned flags;
        floe_status want;
        const char *says;
    } cases[] = {
        {tt, ids[0], 0, 2 * FLOE_CHANGE_BYTES, 0, FLOE_ERR_INVALID, "names word 8"},
        {tt, ids[0], 0, FLOE_CHANGE_BYTES, 0, FLOE_ERR_INVALID, "bytes of changes"},
        {tt, ids[0], 0, 2 * FLOE_CHANGE_BYTES, FLOE_BATCH_OVERWRITE, FLOE_ERR_INVALID, "for MAP tables"},
        {st, ids[0], 0, FLOE_CHANGE_BYTES, 0, FLOE_ERR_UNSUPPORTED, "for TREE tables"},
        {tt, (uint64_t)1 << 40, 0, FLOE_CHANGE_BYTES, 0, FLOE_ERR_INVALID, "names no vector"},
        {tt, ids[0], 1, FLOE_CHANGE_BYTES, 0, FLOE_ERR_INVALID, "generation"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        if (k == 1) /* the second state's change named word 0 from here on */
            floe_change_put(changes + FLOE_CHANGE_BYTES, 1, 9);
        parents[1] = cases[k].parent1;
        memset(&b, 0, sizeof b);
        b.op = FLOE_OP_INSERT;
        b.flags = cases[k].flags | FLOE_BATCH_WANT_IDS;
        b.parents = parents;
        b.change_counts = counts;
        b.changes = changes;
        b.changes_len = cases[k].changes_len + (k >= 3 ? FLOE_CHANGE_BYTES : 0);
        b.parent_generation = cases[k].generation;
        b.n = 2;
        b.results = res;
        b.ids = ids + 0;
        uint64_t keep = ids[0];
        ck_assert_int_eq(floe_table_run(cases[k].t, &b), cases[k].want);
        ck_assert_msg(strstr(b.error.msg, cases[k].says) != NULL, "case %zu: %s", k, b.error.msg);
        ids[0] = keep;
        floe_batch sb = {.op = FLOE_OP_STATS};
        ck_assert_int_eq(floe_table_run(tt, &sb), FLOE_OK);
        ck_assert_uint_eq(sb.stats.keys, 1);
    }
    parents[1] = ids[0];
    memset(&b, 0, sizeof b);
    b.op = FLOE_OP_INSERT;
    b.flags = FLOE_BATCH_WANT_IDS;
    b.parents = parents;
    b.change_counts = counts;
    b.changes = changes;
    b.changes_len = 2 * FLOE_CHANGE_BYTES;
    b.n = 2;
    b.results = res;
    uint64_t sids[2];
    b.ids = sids;
    ck_assert_int_eq(floe_table_run(tt, &b), FLOE_OK);
    ck_assert_int_eq(res[0], FLOE_INSERTED); /* {9, 2, 3, 4, 5, 6, 7, 8} */
    ck_assert_int_eq(res[1], FLOE_INSERTED); /* {1, 9, 3, ...} */
    ck_assert_uint_eq(b.generation, 0);
    uint32_t back[16];
    memset(&b, 0, sizeof b);
    b.op = FLOE_OP_GET;
    b.keys = sids;
    b.n = 2;
    b.results = res;
    b.vectors_out = back;
    ck_assert_int_eq(floe_table_run(tt, &b), FLOE_OK);
    ck_assert(back[0] == 9 && back[1] == 2 && back[8] == 1 && back[9] == 9 && back[15] == 8);
    floe_table_destroy(tt);
    floe_table_destroy(st);
    floe_backend_destroy(be);
}
END_TEST

/* Sets the u64 at off of the table file at path to v and writes the
 * checksum again: the file is damaged, yet its checksum holds. */
static void rewrite_header(const char *path, off_t off, uint64_t v)
{
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    off_t size = lseek(fd, 0, SEEK_END);
    unsigned char *file = malloc((size_t)size);
    ck_assert_int_eq(pread(fd, file, (size_t)size, 0), size);
    memcpy(file + off, &v, 8);
    ck_assert_int_eq(EVP_Digest(file, (size_t)size - 32, file + size - 32, NULL, EVP_sha256(), NULL), 1);
    ck_assert_int_eq(pwrite(fd, file, (size_t)size, 0), size);
    close(fd);
    free(file);
}

START_TEST(oversized_header_refused)
{
    floe_errinfo err;
    tree *t = make_tree(4, 64, 0, NULL);
    char path[] = "/tmp/floe-tree-XXXXXX";
    save_to_temp(t, path);
    tree_destroy(t);
    /* the header's spec: memory (offset 264), then capacity (offset 96); a
     * TiB would be mapped and faulted in before the sizes were compared */
    const off_t fields[2] = {264, 96};
    for (int i = 0; i < 2; i++) {
        rewrite_header(path, fields[i], (uint64_t)1 << 40);
        t = NULL;
        ck_assert_int_eq(tree_load(path, 0, NULL, &t, &err), FLOE_ERR_INVALID);
        ck_assert_ptr_null(t);
        ck_assert_msg(strstr(err.msg, "section sizes") != NULL, "load: %s", err.msg);
        rewrite_header(path, fields[i], i == 0 ? 0 : 64);
    }
    ck_assert_msg(tree_load(path, 0, NULL, &t, &err) == FLOE_OK, "load: %s", err.msg);
    tree_destroy(t);
    unlink(path);
}
END_TEST

/* A TREE never erases: a file whose root table holds an erased row (even
 * with counts that agree and a good checksum) is refused, not loaded for a
 * growth to count the row as a vector's. */
START_TEST(erased_root_refused)
{
    floe_errinfo err;
    tree *t = make_tree(4, 64, 0, NULL);
    const uint32_t v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint8_t res[2];
    ck_assert_int_eq(tree_insert(t, v, 2, res, NULL, NULL, &err), FLOE_OK);
    char path[] = "/tmp/floe-tree-XXXXXX";
    save_to_temp(t, path);
    tree *back = NULL;
    ck_assert_msg(tree_load(path, 0, NULL, &back, &err) == FLOE_OK, "load: %s", err.msg);
    tree_destroy(back);
    /* one root erased behind the tree's back, as only a made-up file could hold it */
    uint64_t root;
    size_t n;
    floe_scan_pos next;
    int done;
    ck_assert_int_eq(iceberg_scan(tree_roots(t), NULL, 1, &root, NULL, &n, &next, &done, &err), FLOE_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(iceberg_erase(tree_roots(t), &root, 1, res, NULL, &err), FLOE_OK);
    ck_assert_uint_eq(res[0], FLOE_ERASED);
    ck_assert_msg(tree_save(t, path, &err) == FLOE_OK, "save: %s", err.msg);
    back = NULL;
    ck_assert_int_eq(tree_load(path, 0, NULL, &back, &err), FLOE_ERR_INVALID); /* the header counts no erased row */
    ck_assert_ptr_null(back);
    rewrite_header(path, 156, 1); /* keys */
    rewrite_header(path, 164, 1); /* tombstones: now the counts agree with the rows */
    ck_assert_int_eq(tree_load(path, 0, NULL, &back, &err), FLOE_ERR_INVALID);
    ck_assert_ptr_null(back);
    ck_assert_msg(strstr(err.msg, "never erases") != NULL, "load: %s", err.msg);
    tree_destroy(t);
    unlink(path);
}
END_TEST

static uint32_t file_layout(const char *path)
{
    floe_file_header h;
    floe_errinfo err;
    ck_assert_msg(floe_file_header_of(path, NULL, &h, &err) == FLOE_OK, "%s", err.msg);
    return h.layout_version;
}

/* tests/unit/data/layout2-tree.floe (layout2_tree.h says how it was made),
 * saved with 15-choice nodes in a power-of-two node table: every vector
 * is found under its id, a growth of the roots keeps the node layout, and
 * the first growth of the nodes puts every node again in today's (31
 * choices, node tables of 1.5 x 2^k too), which a save then records. */
START_TEST(layout2_tree_files_still_load)
{
    floe_errinfo err;
    ck_assert_uint_eq(file_layout(LAYOUT2_FILE), 2);
    tree *t;
    ck_assert_msg(tree_load(LAYOUT2_FILE, 0, NULL, &t, &err) == FLOE_OK, "load: %s", err.msg);
    ck_assert_uint_eq(tree_geometry(t)->tag_bits, FLOE_NODE_OLD_TAG_BITS);
    ck_assert_uint_eq(tree_generation(t), 3);
    enum { MORE = 6000 };
    const uint32_t W = LAYOUT2_WORDS, total = LAYOUT2_VECTORS + MORE;
    uint32_t *vecs = malloc((size_t)total * W * 4);
    for (uint32_t i = 0; i < total; i++)
        for (uint32_t w = 0; w < W; w++)
            vecs[(size_t)i * W + w] = layout2_word(i, w);
    vset ref;
    vset_init(&ref, W, total);
    for (uint32_t i = 0; i < LAYOUT2_VECTORS; i++)
        vset_find(&ref, vecs + (size_t)i * W, 1, 0);
    refresh_ids(t, &ref); /* every vector of the file PRESENT, under distinct ids */
    check_contents(t, &ref);
    /* more vectors: the table grows, and its nodes take today's layout */
    uint8_t *res = malloc(MORE);
    ck_assert_msg(tree_insert(t, vecs + (size_t)LAYOUT2_VECTORS * W, MORE, res, NULL, NULL, &err) == FLOE_OK, "%s",
                  err.msg);
    for (uint32_t i = 0; i < MORE; i++) {
        const long at = vset_find(&ref, vecs + ((size_t)LAYOUT2_VECTORS + i) * W, 1, 0);
        ck_assert_int_eq(res[i], at >= 0 ? FLOE_PRESENT : FLOE_INSERTED);
    }
    ck_assert_uint_gt(tree_generation(t), 3); /* the roots grew; the nodes (6 values a word: 36 + 36^2 at most) fit */
    ck_assert_uint_eq(tree_geometry(t)->tag_bits, FLOE_NODE_OLD_TAG_BITS);
    ck_assert_uint_eq(tree_geometry(t)->node_slots, 2048);
    char path[] = "/tmp/floe-tree-XXXXXX";
    save_to_temp(t, path); /* roots that doubled, as layout 2 has them: still a file of layout 2 */
    ck_assert_uint_eq(file_layout(path), 2);
    unlink(path);
    ck_assert_msg(tree_grow(t, TREE_GROW_NODES, &err) == FLOE_OK, "grow: %s", err.msg);
    ck_assert_uint_eq(tree_geometry(t)->tag_bits, FLOE_NODE_TAG_BITS);
    ck_assert_uint_eq(tree_geometry(t)->node_slots, 3072);
    refresh_ids(t, &ref);
    check_contents(t, &ref);
    strcpy(path, "/tmp/floe-tree-XXXXXX");
    save_to_temp(t, path);
    ck_assert_uint_eq(file_layout(path), FLOE_LAYOUT_VERSION);
    tree_destroy(t);
    ck_assert_msg(tree_load(path, 0, NULL, &t, &err) == FLOE_OK, "load: %s", err.msg);
    unlink(path);
    ck_assert_uint_eq(tree_geometry(t)->tag_bits, FLOE_NODE_TAG_BITS);
    check_contents(t, &ref);
    tree_destroy(t);
    vset_free(&ref);
    free(vecs);
    free(res);
}
END_TEST

/* maxmemory: a growing TREE's insert that could need a growth the budget
 * does not allow is refused whole (ERR_NO_MEMORY, none of its vectors
 * stored), and every vector of the inserts answered before it is there. */
static uint64_t growth_limit;

static bool growth_fits(uint64_t bytes)
{
    return bytes <= growth_limit;
}

START_TEST(maxmemory_refuses_a_growth_whole)
{
    enum { W = 8, B = 4096, ROUNDS = 400 };
    tree *t = make_tree_grow(W, 1000, 0, true, NULL);
    growth_limit = 16u << 20; /* a few growths, then none */
    floe_alloc_set_budget(growth_fits);
    uint32_t *v = malloc((size_t)ROUNDS * B * W * sizeof *v);
    uint8_t *res = malloc(B);
    ck_assert(v && res);
    uint64_t seed = 0x6A09E667F3BCC908ull;
    for (size_t i = 0; i < (size_t)ROUNDS * B * W; i++)
        v[i] = (uint32_t)rng_next(&seed); /* distinct vectors, sharing little: many nodes */
    floe_errinfo err;
    floe_status st = FLOE_OK;
    size_t stored = 0;
    while (st == FLOE_OK && stored < ROUNDS) {
        st = tree_insert(t, v + stored * B * W, B, res, NULL, NULL, &err);
        if (st == FLOE_OK) {
            for (size_t i = 0; i < B; i++)
                ck_assert_int_eq(res[i], FLOE_INSERTED);
            stored++;
        }
    }
    floe_alloc_set_budget(NULL);
    ck_assert_msg(st == FLOE_ERR_NO_MEMORY, "%d after %zu inserts: %s", (int)st, stored, err.msg);
    ck_assert_msg(strstr(err.msg, "maxmemory") && strstr(err.msg, "nothing was stored"), "%s", err.msg);
    ck_assert_msg(tree_generation(t) > 0, "it grew before the limit");
    ck_assert_int_eq(tree_find(t, v + stored * B * W, B, res, NULL, NULL, &err), FLOE_OK); /* the refused insert */
    for (size_t i = 0; i < B; i++)
        ck_assert_msg(res[i] == FLOE_ABSENT, "vector %zu of the refused insert is stored", i);
    for (size_t r = 0; r < stored; r++) { /* every vector of the inserts answered OK */
        ck_assert_int_eq(tree_find(t, v + r * B * W, B, res, NULL, NULL, &err), FLOE_OK);
        for (size_t i = 0; i < B; i++)
            ck_assert_int_eq(res[i], FLOE_PRESENT);
    }
    floe_table_stats after;
    tree_stats(t, &after);
    ck_assert_uint_eq(after.keys, (uint64_t)stored * B);
    tree_destroy(t);
    free(v);
    free(res);
}
END_TEST

Suite *tree_suite(void)
{
    Suite *s = suite_create("tree");
    TCase *tc = tcase_create("tree");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, shape_of_every_length);
    tcase_add_test(tc, lengths_against_reference);
    tcase_add_test(tc, concurrent_inserts);
    tcase_add_test(tc, full_is_exact);
    tcase_add_test(tc, growth_keeps_every_vector);
    tcase_add_test(tc, growing_table_never_answers_full);
    tcase_add_test(tc, growth_sizes_for_the_capacity);
    tcase_add_test(tc, growth_sized_for_a_batch);
    tcase_add_test(tc, a_large_batch_grows_in_few_growths);
    tcase_add_test(tc, states_by_parent_match_whole_vectors);
    tcase_add_test(tc, bad_specs_and_batches);
    tcase_add_test(tc, oversized_header_refused);
    tcase_add_test(tc, erased_root_refused);
    tcase_add_test(tc, layout2_tree_files_still_load);
    tcase_add_test(tc, maxmemory_refuses_a_growth_whole);
    suite_add_tcase(s, tc);
    return s;
}
