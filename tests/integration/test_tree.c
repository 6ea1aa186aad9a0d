/*
 * test_tree.c - TREE tables over the wire: vectors inserted with duplicates
 * inside and across requests, find, get_by_id, scan with ids, stats, the
 * requests a TREE refuses (each changing nothing), pipelining, a restart
 * through data-dir, and the CLI.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"


/* ---- a reference set of vectors ------------------------------------------------------------ */

typedef struct ref {
    unsigned W;
    size_t n, cap, slots;
    uint32_t *vecs; /* n * W: distinct vectors in first-insertion order */
    uint64_t *ids;  /* the id the server gave each */
    uint32_t *slot; /* open addressing: index + 1, 0 empty */
} ref;

static void ref_init(ref *r, unsigned W, size_t max)
{
    r->W = W;
    r->n = 0;
    r->cap = max;
    r->slots = 16;
    while (r->slots < 2 * max)
        r->slots *= 2;
    r->vecs = malloc(max * W * 4);
    r->ids = malloc(max * 8);
    r->slot = calloc(r->slots, sizeof *r->slot);
}

static void ref_free(ref *r)
{
    free(r->vecs);
    free(r->ids);
    free(r->slot);
}

static uint64_t vec_hash(const uint32_t *v, unsigned W)
{
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (unsigned i = 0; i < W; i++)
        h = (h ^ v[i]) * 0xff51afd7ed558ccdull, h ^= h >> 31;
    return h;
}

/* Index of v, or -1 (then, with add, v is added with id). */
static long ref_find(ref *r, const uint32_t *v, int add, uint64_t id)
{
    size_t i = vec_hash(v, r->W) & (r->slots - 1);
    for (; r->slot[i]; i = (i + 1) & (r->slots - 1))
        if (memcmp(r->vecs + (size_t)(r->slot[i] - 1) * r->W, v, r->W * 4) == 0)
            return (long)r->slot[i] - 1;
    if (add) {
        ck_assert_uint_lt(r->n, r->cap);
        memcpy(r->vecs + r->n * r->W, v, r->W * 4);
        r->ids[r->n] = id;
        r->slot[i] = (uint32_t)++r->n;
    }
    return -1;
}

static int ref_has_id(const ref *r, uint64_t id)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->ids[i] == id)
            return 1;
    return 0;
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* n vectors of a walk that changes 1-2 words a step (so vectors share
 * subtrees), with about a third repeats of recent ones. */
static void walk(uint32_t *out, size_t n, unsigned W, uint64_t *rng, uint32_t *state)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rng_next(rng);
        if (i > 0 && r % 3 == 0) {
            size_t back = 1 + (size_t)(r >> 8) % (i < 40 ? i : 40);
            memcpy(out + i * W, out + (i - back) * W, W * 4);
            continue;
        }
        for (int c = 0; c < 1 + (int)((r >> 4) & 1); c++) {
            uint64_t x = rng_next(rng);
            state[x % W] = (x >> 40) % 8 == 0 ? (uint32_t)(x >> 16) : (uint32_t)((x >> 32) % 50);
        }
        memcpy(out + i * W, state, W * 4);
    }
}

/* Inserts n vectors and checks every answer against the reference (which
 * learns the new ones): the first occurrence INSERTED, later ones PRESENT
 * with the first one's id. */
static void insert_checked(floe *c, const char *table, ref *r, const uint32_t *v, size_t n)
{
    const unsigned W = r->W;
    uint8_t *res = malloc(n + 1);
    uint64_t *ids = malloc(n * 8 + 8);
    floe_counts k;
    int st = floe_insert_vectors(c, table, v, n, W, res, ids, &k);
    ck_assert_msg(st == FLOE_OK, "insert_vectors: %s", floe_errstr(c));
    uint64_t inserted = 0;
    for (size_t i = 0; i < n; i++) {
        long at = ref_find(r, v + i * W, 0, 0);
        if (at < 0) {
            ck_assert_msg(res[i] == FLOE_INSERTED, "vector %zu: answer %u, expected INSERTED", i, res[i]);
            ck_assert_msg(!ref_has_id(r, ids[i]), "vector %zu: id %llu given twice", i, (unsigned long long)ids[i]);
            ref_find(r, v + i * W, 1, ids[i]);
            inserted++;
        } else {
            ck_assert_msg(res[i] == FLOE_PRESENT, "vector %zu: answer %u, expected PRESENT", i, res[i]);
            ck_assert_msg(ids[i] == r->ids[at], "vector %zu: id %llu, first given %llu", i, (unsigned long long)ids[i],
                          (unsigned long long)r->ids[at]);
        }
    }
    ck_assert_uint_eq(k.inserted, inserted);
    ck_assert_uint_eq(k.present, n - inserted);
    free(res);
    free(ids);
}

/* find, get_by_id and a paged scan agree with the reference; with no FULL
 * answer (had_full false) in a table that never grew, no orphan nodes. */
static void check_contents(floe *c, const char *table, const ref *r, bool had_full)
{
    const unsigned W = r->W;
    const size_t n = r->n;
    uint8_t *res = malloc(n + 4);
    uint64_t *ids = malloc((n + 4) * 8);
    uint32_t *got = malloc((n + 4) * W * 4);
    floe_counts k;
    /* find: every stored vector with its id */
    ck_assert_int_eq(floe_find_vectors(c, table, r->vecs, n, W, res, ids, &k), FLOE_OK);
    ck_assert_uint_eq(k.present, n);
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_eq(res[i], FLOE_PRESENT);
        ck_assert_uint_eq(ids[i], r->ids[i]);
    }
    /* get_by_id: the exact vectors back, and ABSENT (zeros) for ids that name none */
    memcpy(ids, r->ids, n * 8);
    uint64_t bogus[4] = {UINT64_MAX, (uint64_t)1 << 50, 0, 1};
    size_t nb = 0;
    for (int b = 0; b < 4; b++)
        if (!ref_has_id(r, bogus[b]))
            ids[n + nb++] = bogus[b];
    memset(got, 0xAB, (n + nb) * W * 4);
    ck_assert_int_eq(floe_get_by_id(c, table, ids, n + nb, W, res, got), FLOE_OK);
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_eq(res[i], FLOE_PRESENT);
        ck_assert_msg(memcmp(got + i * W, r->vecs + i * W, W * 4) == 0, "get_by_id(%llu) gave another vector",
                      (unsigned long long)r->ids[i]);
    }
    for (size_t i = n; i < n + nb; i++) {
        ck_assert_msg(res[i] == FLOE_ABSENT, "bogus id %llu answered %u", (unsigned long long)ids[i], res[i]);
        for (unsigned w = 0; w < W; w++)
            ck_assert_uint_eq(got[i * W + w], 0);
    }
    /* scan in pages: every vector exactly once, with its id */
    uint8_t *seen = calloc(n + 1, 1);
    floe_cursor cur = {{0}, 0};
    int done = 0;
    size_t total = 0;
    enum { PAGE = 97 };
    uint64_t pids[PAGE];
    uint32_t *pv = malloc(PAGE * W * 4);
    while (!done) {
        size_t m;
        ck_assert_int_eq(floe_scan_vectors(c, table, &cur, PAGE, W, pids, pv, &m, &done), FLOE_OK);
        ck_assert_uint_le(m, PAGE);
        for (size_t i = 0; i < m; i++) {
            long at = ref_find((ref *)r, pv + i * W, 0, 0);
            ck_assert_msg(at >= 0, "scan returned a vector never inserted");
            ck_assert_uint_eq(pids[i], r->ids[at]);
            ck_assert_msg(!seen[at], "scan returned vector %ld twice", at);
            seen[at] = 1;
        }
        total += m;
    }
    ck_assert_uint_eq(total, n);
    /* stats */
    floe_table_info info;
    ck_assert_int_eq(floe_stats(c, table, &info), FLOE_OK);
    ck_assert_int_eq(info.kind, FLOE_TABLE_TREE);
    ck_assert_str_eq(info.backend, expected_backend());
    ck_assert_uint_eq(info.words, W);
    ck_assert_uint_eq(info.key_bits, 0);
    ck_assert_uint_eq(info.keys, n);
    if (W == FLOE_TREE_MIN_WORDS) { /* a vector of two words is its root pair alone */
        ck_assert_uint_eq(info.nodes, 0);
    } else {
        ck_assert_uint_gt(info.nodes, 0);
        if (had_full) { /* the node table may be the one that filled */
            ck_assert_uint_ge(info.node_slots, info.nodes);
            ck_assert(info.node_fill > 0.0 && info.node_fill <= 1.0);
        } else {
            ck_assert_uint_gt(info.node_slots, info.nodes);
            ck_assert(info.node_fill > 0.0 && info.node_fill < 1.0);
        }
    }
    ck_assert(info.compression > 0.0);
    ck_assert_uint_gt(info.memory_bytes, 0);
    ck_assert(info.bytes_per_key > 0.0);
    if (info.generation == 0 && !had_full) /* a growth may retry vectors whose nodes were counted as orphans */
        ck_assert_uint_eq(info.orphan_nodes, 0);
    free(seen);
    free(pv);
    free(res);
    free(ids);
    free(got);
}

/* A TREE of a fixed size: these tests hold ids across requests, which a
 * growth would rename (tree_grows checks a growing one). */
static void create_tree(floe *c, const char *name, unsigned W, uint64_t capacity)
{
    floe_table_def d = {.name = name, .kind = FLOE_TABLE_TREE, .words = W, .capacity = capacity, .no_grow = 1};
    ck_assert_msg(floe_create(c, &d) == FLOE_OK, "create TREE %s: %s", name, floe_errstr(c));
}

/* The figures a refused request must leave as they were. */
static void snapshot_figures(floe *c, const char *table, floe_table_info *out)
{
    ck_assert_int_eq(floe_stats(c, table, out), FLOE_OK);
}

static void assert_unchanged(floe *c, const char *table, const floe_table_info *before, const char *what)
{
    floe_table_info now;
    ck_assert_int_eq(floe_stats(c, table, &now), FLOE_OK);
    ck_assert_msg(now.keys == before->keys && now.nodes == before->nodes && now.level[0].used == before->level[0].used,
                  "%s changed table %s (vectors %llu -> %llu, nodes %llu -> %llu)", what, table,
                  (unsigned long long)before->keys, (unsigned long long)now.keys, (unsigned long long)before->nodes,
                  (unsigned long long)now.nodes);
}

START_TEST(tree_over_the_wire)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    floe *c = connect_ok(&d);
    /* 2 words: vectors as wide as a key, which floed must still take as vectors */
    const unsigned widths[3] = {FLOE_TREE_MIN_WORDS, 3, 17};
    for (int t = 0; t < 3; t++) {
        const unsigned W = widths[t];
        char name[16];
        snprintf(name, sizeof name, "tree%u", W);
        create_tree(c, name, W, 20000);
        ck_assert_int_eq(floe_create(c, &(floe_table_def){.name = name, .kind = FLOE_TABLE_TREE, .words = W}),
                         FLOE_ERR_EXISTS);
        enum { N = 3000 };
        uint32_t *v = malloc((size_t)N * W * 4);
        uint32_t state[32] = {0};
        uint64_t rng = 0x1234567 + W;
        walk(v, N, W, &rng, state);
        ref r;
        ref_init(&r, W, 2 * N);
        /* duplicates inside a request, then across requests (the second half
         * repeats part of the first) */
        insert_checked(c, name, &r, v, N / 2);
        const size_t distinct_first = r.n;
        ck_assert_uint_lt(distinct_first, N / 2); /* the walk repeats itself */
        memcpy(v + (size_t)(N / 2) * W, v + (size_t)(N / 4) * W, (size_t)(N / 8) * W * 4);
        insert_checked(c, name, &r, v + (size_t)(N / 2) * W, N - N / 2);
        /* a vector of all-ones and one of zeros: extremes are ordinary words */
        uint32_t ext[2 * 17];
        for (unsigned w = 0; w < W; w++)
            ext[w] = 0xFFFFFFFFu, ext[W + w] = 0;
        insert_checked(c, name, &r, ext, 2);
        check_contents(c, name, &r, false);
        /* find of vectors never inserted: ABSENT, no id */
        uint32_t miss[2 * 17];
        for (unsigned w = 0; w < 2 * W; w++)
            miss[w] = 1000000 + w;
        uint8_t res[2];
        uint64_t ids[2];
        floe_counts k;
        ck_assert_int_eq(floe_find_vectors(c, name, miss, 2, W, res, ids, &k), FLOE_OK);
        ck_assert_uint_eq(res[0], FLOE_ABSENT);
        ck_assert_uint_eq(res[1], FLOE_ABSENT);
        ck_assert_uint_eq(ids[0], UINT64_MAX);
        ck_assert_uint_eq(k.absent, 2);
        /* results, ids and counts may all be NULL */
        ck_assert_int_eq(floe_find_vectors(c, name, miss, 2, W, NULL, NULL, NULL), FLOE_OK);
        ck_assert_int_eq(floe_insert_vectors(c, name, r.vecs, 1, W, NULL, NULL, NULL), FLOE_OK);
        /* a wrong words on the client side is caught, not misread */
        uint32_t got[64];
        ck_assert_int_eq(floe_get_by_id(c, name, r.ids, 1, W + 1, res, got), FLOE_ERR_INVALID);
        ck_assert_ptr_nonnull(strstr(floe_errstr(c), "words"));
        ck_assert_int_eq(floe_get_by_id(c, name, r.ids, 1, W, res, got), FLOE_OK);
        ck_assert_mem_eq(got, r.vecs, W * 4);
        ref_free(&r);
        free(v);
    }
    /* list_tables shows them all with their words */
    floe_table_info *all;
    size_t n;
    ck_assert_int_eq(floe_tables(c, &all, &n), FLOE_OK);
    ck_assert_uint_eq(n, 3);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(all[i].kind, FLOE_TABLE_TREE);
        ck_assert(all[i].words == FLOE_TREE_MIN_WORDS || all[i].words == 3 || all[i].words == 17);
    }
    free(all);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* Many small requests pipelined (and merged by floed's batcher): one INSERTED
 * per distinct vector over all of them, finds and gets see the inserts sent
 * before them, and an invalid request in between is answered in its turn. */
START_TEST(tree_pipelined)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    floe *c = connect_ok(&d);
    enum { W = 16, R = 120, K = 40 };
    create_tree(c, "p", W, 50000);
    static uint32_t v[R][K * W];
    uint64_t rng = 99;
    uint32_t state[W] = {0};
    for (int r = 0; r < R; r++)
        walk(v[r], K, W, &rng, state);
    for (int r = 1; r < R; r += 3) /* whole requests repeated later */
        memcpy(v[r], v[r - 1], sizeof v[r]);
    floe_call *ins[R], *fnd[R], *bad;
    for (int r = 0; r < R; r++) {
        ins[r] = floe_send_insert_vectors(c, "p", v[r], K, W, FLOE_WANT_IDS, NULL, NULL);
        fnd[r] = floe_send_find_vectors(c, "p", v[r], K, W, FLOE_WANT_IDS, NULL, NULL);
        ck_assert_ptr_nonnull(ins[r]);
        ck_assert_ptr_nonnull(fnd[r]);
    }
    bad = floe_send_insert_vectors(c, "p", v[0], 1, W - 1, 0, NULL, NULL); /* 60 bytes: not a multiple of 64 */
    ck_assert_uint_ge(floe_inflight(c), 64);
    ref rf;
    ref_init(&rf, W, (size_t)R * K);
    uint64_t inserted = 0;
    for (int r = 0; r < R; r++) {
        ck_assert_int_eq(floe_wait(c, ins[r]), FLOE_OK);
        ck_assert_int_eq(floe_wait(c, fnd[r]), FLOE_OK);
        size_t nres, nids, nfr, nfi;
        const uint8_t *a = floe_call_results(ins[r], &nres);
        const unsigned char *ib = floe_call_ids(ins[r], &nids);
        const uint8_t *fa = floe_call_results(fnd[r], &nfr);
        const unsigned char *fb = floe_call_ids(fnd[r], &nfi);
        ck_assert_uint_eq(nres, K);
        ck_assert_uint_eq(nids, K * 8);
        ck_assert_uint_eq(nfr, K);
        ck_assert_uint_eq(nfi, K * 8);
        for (int i = 0; i < K; i++) {
            uint64_t id, fid;
            memcpy(&id, ib + 8 * i, 8);
            memcpy(&fid, fb + 8 * i, 8);
            long at = ref_find(&rf, v[r] + i * W, 0, 0);
            if (at < 0) {
                ck_assert_msg(a[i] == FLOE_INSERTED, "request %d vector %d: %u, expected INSERTED", r, i, a[i]);
                ref_find(&rf, v[r] + i * W, 1, id);
                inserted++;
            } else {
                ck_assert_msg(a[i] == FLOE_PRESENT, "request %d vector %d: %u, expected PRESENT", r, i, a[i]);
                ck_assert_uint_eq(id, rf.ids[at]);
            }
            ck_assert_msg(fa[i] == FLOE_PRESENT, "pipelined find %d/%d did not see its insert", r, i);
            ck_assert_uint_eq(fid, id);
        }
        floe_call_free(ins[r]);
        floe_call_free(fnd[r]);
    }
    ck_assert_int_eq(floe_wait(c, bad), FLOE_ERR_INVALID);
    floe_call_free(bad);
    /* pipelined get_by_id, with a bogus id in each */
    floe_call *g[8];
    uint64_t gids[8][3];
    for (int i = 0; i < 8; i++) {
        gids[i][0] = rf.ids[i];
        gids[i][1] = UINT64_MAX;
        gids[i][2] = rf.ids[rf.n - 1 - i];
        g[i] = floe_send_get_by_id(c, "p", gids[i], 3, NULL, NULL);
    }
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(floe_wait(c, g[i]), FLOE_OK);
        size_t nr, vb;
        const uint8_t *a = floe_call_results(g[i], &nr);
        const unsigned char *vv = floe_call_vectors(g[i], &vb);
        ck_assert_uint_eq(nr, 3);
        ck_assert_uint_eq(vb, 3 * W * 4);
        ck_assert_uint_eq(a[0], FLOE_PRESENT);
        ck_assert_uint_eq(a[1], FLOE_ABSENT);
        ck_assert_uint_eq(a[2], FLOE_PRESENT);
        ck_assert_mem_eq(vv, rf.vecs + (size_t)i * W, W * 4);
        ck_assert_mem_eq(vv + 2 * W * 4, rf.vecs + (rf.n - 1 - i) * W, W * 4);
        floe_counts k;
        floe_call_counts(g[i], &k);
        ck_assert_uint_eq(k.present, 2);
        ck_assert_uint_eq(k.absent, 1);
        floe_call_free(g[i]);
    }
    floe_table_info info;
    ck_assert_int_eq(floe_stats(c, "p", &info), FLOE_OK);
    ck_assert_uint_eq(info.keys, inserted);
    ref_free(&rf);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* ---- refused requests ------------------------------------------------------------------------- */

START_TEST(tree_refusals)
{
    const char *flags[] = {"--max-frame", "1M", NULL};
    daemon_proc d;
    daemon_start(&d, flags);
    floe *c = connect_ok(&d);
    enum { W = 3 };
    create_tree(c, "t", W, 10000);
    floe_table_def sd = {.name = "s", .kind = FLOE_TABLE_SET, .key_bits = 32};
    ck_assert_int_eq(floe_create(c, &sd), FLOE_OK);
    uint32_t vec[4 * W] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3};
    ck_assert_int_eq(floe_insert_vectors(c, "t", vec, 4, W, NULL, NULL, NULL), FLOE_OK);
    floe_table_info before;
    snapshot_figures(c, "t", &before);
    ck_assert_uint_eq(before.keys, 3);

    /* specs a TREE refuses */
    floe_table_def bad = {.name = "b", .kind = FLOE_TABLE_TREE, .words = 1};
    ck_assert_int_eq(floe_create(c, &bad), FLOE_ERR_INVALID);
    bad.words = 257;
    ck_assert_int_eq(floe_create(c, &bad), FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(floe_errstr(c), "words"));
    bad.words = 0;
    ck_assert_int_eq(floe_create(c, &bad), FLOE_ERR_INVALID);
    bad.words = 4, bad.key_bits = 40;
    ck_assert_int_eq(floe_create(c, &bad), FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(floe_errstr(c), "key_bits"));
    bad.key_bits = 0, bad.value_bytes = 8;
    ck_assert_int_eq(floe_create(c, &bad), FLOE_ERR_INVALID);
    floe_table_def bs = {.name = "b", .kind = FLOE_TABLE_SET, .memory = 1 << 20};
    ck_assert_int_eq(floe_create(c, &bs), FLOE_ERR_INVALID);
    bs.memory = 0, bs.words = 4;
    ck_assert_int_eq(floe_create(c, &bs), FLOE_ERR_INVALID);
    bs.words = 0, bs.grow = bs.no_grow = 1;
    ck_assert_int_eq(floe_create(c, &bs), FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(floe_errstr(c), "no_grow"));
    bad = (floe_table_def){.name = "b", .kind = FLOE_TABLE_TREE, .words = 4, .grow = 1, .no_grow = 1};
    ck_assert_int_eq(floe_create(c, &bad), FLOE_ERR_INVALID);
    floe_table_info *all;
    size_t n;
    ck_assert_int_eq(floe_tables(c, &all, &n), FLOE_OK);
    ck_assert_uint_eq(n, 2); /* none of them was created */
    free(all);

    /* through libfloe */
    uint64_t key = 5;
    uint8_t res[4];
    ck_assert_int_eq(floe_insert(c, "t", &key, 1, res, NULL), FLOE_ERR_INVALID); /* 8 bytes: not a vector */
    ck_assert_ptr_nonnull(strstr(floe_errstr(c), "words = 3"));
    ck_assert_int_eq(floe_insert_vectors(c, "t", vec, 1, W + 1, res, NULL, NULL), FLOE_ERR_INVALID);
    ck_assert_int_eq(floe_find_vectors(c, "t", vec, 1, W - 1, res, NULL, NULL), FLOE_ERR_INVALID);
    ck_assert_int_eq(floe_insert_vectors(c, "t", vec, 1, 0, res, NULL, NULL), FLOE_ERR_INVALID);
    ck_assert_int_eq(floe_erase(c, "t", &key, 1, res, NULL), FLOE_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(floe_errstr(c), "erase"));
    ck_assert_int_eq(floe_get_by_id(c, "s", &key, 1, W, res, vec), FLOE_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(floe_errstr(c), "get_by_id is for TREE tables"));
    ck_assert_int_eq(floe_get_by_id(c, "nosuch", &key, 1, W, res, vec), FLOE_ERR_NO_TABLE);
    ck_assert_int_eq(floe_insert_vectors(c, "nosuch", vec, 1, W, res, NULL, NULL), FLOE_ERR_NO_TABLE);
    uint64_t skeys[2] = {1, 2}, svals[2];
    uint64_t sids[2];
    uint32_t svec[2 * W];
    size_t got;
    int done;
    floe_cursor cur = {{0}, 0};
    ck_assert_int_eq(floe_scan_vectors(c, "s", &cur, 10, W, sids, svec, &got, &done), FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(floe_errstr(c), "ids in a scan are for TREE tables"));
    cur.started = 0;
    ck_assert_int_eq(floe_scan(c, "t", &cur, 10, skeys, svals, 8, &got, &done), FLOE_ERR_INVALID);
    cur.started = 0;
    ck_assert_int_eq(floe_scan_vectors(c, "t", &cur, 10, W + 2, sids, svec, &got, &done), FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(floe_errstr(c), "3 words"));
    assert_unchanged(c, "t", &before, "libfloe refusals");

    /* raw frames: values, overwrite, want_values, ids not a multiple of 8, too large a get */
    int fd = raw_connect(d.port);
    uint32_t one[W] = {42, 43, 44}; /* a new vector: refused requests must not store it */
    uint64_t val = 7;
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Insert in = FLOE__V1__INSERT__INIT;
    in.table = "t";
    in.keys.data = (uint8_t *)one;
    in.keys.len = sizeof one;
    in.values.data = (uint8_t *)&val;
    in.values.len = 8;
    req.op_case = FLOE__V1__REQUEST__OP_INSERT;
    req.insert = &in;
    expect_status(raw_call(fd, &req, 1), FLOE_ERR_INVALID, "values", "insert with values on a TREE");
    in.values.len = 0;
    in.values.data = NULL;
    in.overwrite = 1;
    expect_status(raw_call(fd, &req, 2), FLOE_ERR_INVALID, "overwrite", "insert with overwrite on a TREE");
    in.overwrite = 0;
    in.keys.len = sizeof one - 1;
    expect_status(raw_call(fd, &req, 3), FLOE_ERR_INVALID, "words = 3", "11 bytes into a TREE of 3 words");
    Floe__V1__Find f = FLOE__V1__FIND__INIT;
    f.table = "t";
    f.keys.data = (uint8_t *)one;
    f.keys.len = sizeof one;
    f.want_values = 1;
    req.op_case = FLOE__V1__REQUEST__OP_FIND;
    req.find = &f;
    expect_status(raw_call(fd, &req, 4), FLOE_ERR_INVALID, "values", "find with want_values on a TREE");
    Floe__V1__Erase er = FLOE__V1__ERASE__INIT;
    er.table = "t";
    er.keys.data = (uint8_t *)one;
    er.keys.len = sizeof one;
    req.op_case = FLOE__V1__REQUEST__OP_ERASE;
    req.erase = &er;
    expect_status(raw_call(fd, &req, 5), FLOE_ERR_UNSUPPORTED, "erase", "erase on a TREE");
    Floe__V1__GetById g = FLOE__V1__GET_BY_ID__INIT;
    g.table = "t";
    uint64_t gid[2] = {0, 0};
    g.ids.data = (uint8_t *)gid;
    g.ids.len = 12;
    req.op_case = FLOE__V1__REQUEST__OP_GET_BY_ID;
    req.get_by_id = &g;
    expect_status(raw_call(fd, &req, 6), FLOE_ERR_INVALID, "8 bytes", "ids of 12 bytes");
    /* max-frame is 1 MiB: 100000 ids of 3 words would answer 1.2 MB of vectors */
    uint64_t *many = calloc(100000, 8);
    g.ids.data = (uint8_t *)many;
    g.ids.len = 100000 * 8;
    expect_status(raw_call(fd, &req, 7), FLOE_ERR_TOO_LARGE, "max-frame", "a get_by_id answer above max-frame");
    free(many);
    Floe__V1__Scan sc = FLOE__V1__SCAN__INIT;
    sc.table = "t";
    sc.want_values = 1;
    req.op_case = FLOE__V1__REQUEST__OP_SCAN;
    req.scan = &sc;
    expect_status(raw_call(fd, &req, 8), FLOE_ERR_INVALID, "values", "scan of a TREE with values");
    sc.table = "s";
    sc.want_values = 0;
    sc.want_ids = 1;
    expect_status(raw_call(fd, &req, 9), FLOE_ERR_INVALID, "ids in a scan are for TREE tables", "scan ids of a SET");
    /* a TREE scan without want_ids: vectors only */
    sc.table = "t";
    sc.want_ids = 0;
    Floe__V1__Response *r = raw_call(fd, &req, 10);
    ck_assert_int_eq(r->status, FLOE_OK);
    ck_assert_ptr_nonnull(r->scan);
    ck_assert_uint_eq(r->scan->keys.len, 3 * W * 4);
    ck_assert_uint_eq(r->scan->ids.len, 0);
    floe__v1__response__free_unpacked(r, NULL);
    /* the create spec through raw frames: key_bits 0 means none for a TREE */
    Floe__V1__CreateTable ct = FLOE__V1__CREATE_TABLE__INIT;
    Floe__V1__TableSpec spec = FLOE__V1__TABLE_SPEC__INIT;
    spec.name = "raw";
    spec.kind = FLOE__V1__TABLE_KIND__TREE;
    spec.words = 5;
    spec.capacity = 1000;
    spec.memory = 1 << 20;
    ct.spec = &spec;
    req.op_case = FLOE__V1__REQUEST__OP_CREATE_TABLE;
    req.create_table = &ct;
    expect_status(raw_call(fd, &req, 11), FLOE_OK, NULL, "create a TREE with memory");
    close(fd);
    assert_unchanged(c, "t", &before, "raw refusals");
    uint64_t gids[1];
    ck_assert_int_eq(floe_find_vectors(c, "t", one, 1, W, res, gids, NULL), FLOE_OK);
    ck_assert_uint_eq(res[0], FLOE_ABSENT);
    floe_table_info ri;
    ck_assert_int_eq(floe_stats(c, "raw", &ri), FLOE_OK);
    ck_assert_uint_eq(ri.words, 5);
    ck_assert_uint_eq(ri.memory, 1 << 20);
    ck_assert_uint_eq(ri.key_bits, 0);
    ck_assert_uint_le(ri.memory_bytes, 1 << 20);
    /* the server goes on */
    ck_assert_int_eq(floe_ping(c), FLOE_OK);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* ---- persistence and the CLI ------------------------------------------------------------------ */

START_TEST(tree_survives_restart)
{
    char dir[] = "/tmp/floe-tree-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const char *flags[] = {"--data-dir", dir, NULL};
    daemon_proc d;
    daemon_start(&d, flags);
    floe *c = connect_ok(&d);
    enum { W = 17, N = 500 };
    create_tree(c, "keep", W, 5000);
    uint32_t *v = malloc((size_t)N * W * 4);
    uint32_t state[W] = {0};
    uint64_t rng = 4242;
    walk(v, N, W, &rng, state);
    ref r;
    ref_init(&r, W, N + 1);
    insert_checked(c, "keep", &r, v, N);
    ck_assert_int_eq(floe_snapshot(c, "keep"), FLOE_OK);
    floe_table_info before;
    ck_assert_int_eq(floe_stats(c, "keep", &before), FLOE_OK);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);

    daemon_start(&d, flags);
    c = connect_ok(&d);
    check_contents(c, "keep", &r, false); /* the same vectors under the same ids */
    floe_table_info after;
    ck_assert_int_eq(floe_stats(c, "keep", &after), FLOE_OK);
    ck_assert_uint_eq(after.nodes, before.nodes);
    ck_assert_uint_eq(after.node_slots, before.node_slots);
    ck_assert_uint_eq(after.words, W);
    /* and it goes on taking vectors */
    uint32_t fresh[W];
    for (unsigned w = 0; w < W; w++)
        fresh[w] = 777777 + w;
    insert_checked(c, "keep", &r, fresh, 1);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGINT), 0);
    ref_free(&r);
    free(v);
    char path[256];
    snprintf(path, sizeof path, "%s/keep.floe", dir);
    unlink(path);
    rmdir(dir);
}
END_TEST

START_TEST(tree_cli)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    expect_cli(&d, NULL, 0, "created v", ARGS("create", "v", "--kind", "tree", "--words", "3", "--capacity", "10K"));
    expect_cli(
        &d, NULL, 0, "created w",
        ARGS("create", "w", "--kind", "TREE", "--words", "4", "--capacity", "10000", "--memory", "1M", "--no-grow"));
    expect_cli(&d, NULL, 2, NULL, ARGS("create", "x", "--kind", "tree", "--words", "4", "--grow", "--no-grow"));
    expect_cli(&d, NULL, 2, NULL, ARGS("create", "x", "--kind", "tree"));                     /* no --words */
    expect_cli(&d, NULL, 2, NULL, ARGS("create", "x", "--kind", "tree", "--words", "1"));     /* 2..256: a usage error */
    expect_cli(&d, NULL, 2, NULL, ARGS("create", "x", "--kind", "tree", "--words", "300"));   /* (issue 41, 8) */
    expect_cli(&d, NULL, 2, NULL, ARGS("create", "x", "--kind", "tree", "--memory", "lots")); /* not a size */
    char *out;
    ck_assert_int_eq(run_cli(&d, NULL, &out, ARGS("insert", "v", "1,2,3", "4,5,6", "1,2,3")), 0);
    unsigned long long id1, id2, id1b;
    ck_assert_msg(sscanf(out, "1,2,3 INSERTED %llu\n4,5,6 INSERTED %llu\n1,2,3 PRESENT %llu", &id1, &id2, &id1b) == 3,
                  "insert output:\n%s", out);
    ck_assert_uint_eq(id1, id1b);
    ck_assert_uint_ne(id1, id2);
    free(out);
    expect_cli(&d, "7, 8, 9\n# comment\n\n0x10,0,0xffffffff\n", 0, "7,8,9 INSERTED", ARGS("insert", "v"));
    expect_cli(&d, NULL, 0, "16,0,4294967295 PRESENT", ARGS("find", "v", "16,0,4294967295"));
    expect_cli(&d, NULL, 0, "9,9,9 ABSENT\n", ARGS("find", "v", "9,9,9"));
    char want[64];
    snprintf(want, sizeof want, "%llu 4,5,6\n", id2);
    char ida[24], idb[24];
    snprintf(ida, sizeof ida, "%llu", id1);
    snprintf(idb, sizeof idb, "%llu", id2);
    expect_cli(&d, NULL, 0, want, ARGS("get", "v", ida, idb, "18446744073709551615"));
    expect_cli(&d, NULL, 0, "18446744073709551615 ABSENT", ARGS("get", "v", idb, "18446744073709551615"));
    expect_cli(&d, NULL, 0, want, ARGS("dump", "v"));
    ck_assert_int_eq(run_cli(&d, NULL, &out, ARGS("dump", "v")), 0);
    int lines = 0;
    for (char *p = out; *p; p++)
        lines += *p == '\n';
    ck_assert_int_eq(lines, 4);
    free(out);
    expect_cli(&d, NULL, 0, "kind: TREE\nwords: 3", ARGS("stats", "v"));
    expect_cli(&d, NULL, 0, "vectors: 4\nnodes: ", ARGS("stats", "v"));
    expect_cli(&d, NULL, 0, "compression: ", ARGS("stats", "v"));
    expect_cli(&d, NULL, 0, "bytes_per_vector: ", ARGS("stats", "v"));
    expect_cli(&d, NULL, 0, "memory asked: 1048576 bytes", ARGS("stats", "w"));
    expect_cli(&d, NULL, 0, "grow: yes", ARGS("stats", "v")); /* a TREE grows by default */
    expect_cli(&d, NULL, 0, "grow: no", ARGS("stats", "w"));
    expect_cli(&d, NULL, 0, "words=3", ARGS("tables"));
    /* load: one vector per line, pipelined, then the same file again */
    char path[256];
    snprintf(path, sizeof path, "%s/vectors.txt", d.dir);
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 3000; i++)
        fprintf(f, "%d,%d,%d,%d\n", i % 7, i / 7, i % 11, i);
    fclose(f);
    expect_cli(&d, NULL, 0, "loaded 3000 vectors into w", ARGS("load", "w", path, "--batch", "500"));
    expect_cli(&d, NULL, 0, "inserted 0, present 3000", ARGS("load", "w", path));
    expect_cli(&d, NULL, 0, "vectors: 3000", ARGS("stats", "w"));
    /* binary: words little-endian u32 per vector */
    char bpath[256];
    snprintf(bpath, sizeof bpath, "%s/vectors.bin", d.dir);
    f = fopen(bpath, "wb");
    for (uint32_t i = 0; i < 100; i++) {
        uint32_t vv[4] = {i, i, i, 123456};
        fwrite(vv, 4, 4, f);
    }
    fclose(f);
    expect_cli(&d, NULL, 0, "inserted 100", ARGS("load", "w", bpath, "--binary"));
    expect_cli(&d, NULL, 0, "5,5,5,123456 PRESENT", ARGS("find", "w", "5,5,5,123456"));
    /* errors */
    snprintf(path, sizeof path, "%s/bad.txt", d.dir);
    f = fopen(path, "w");
    fprintf(f, "1,2,3,4\n1,2,3\n");
    fclose(f);
    expect_cli(&d, NULL, 2, NULL, ARGS("load", "w", path));
    expect_cli(&d, NULL, 2, NULL, ARGS("insert", "v", "1,2"));            /* 2 words of 3 */
    expect_cli(&d, NULL, 2, NULL, ARGS("insert", "v", "1,2,3,4"));        /* 4 words of 3 */
    expect_cli(&d, NULL, 2, NULL, ARGS("insert", "v", "1,2,banana"));     /* not a word */
    expect_cli(&d, NULL, 2, NULL, ARGS("insert", "v", "1,2,4294967296")); /* above 2^32 - 1 */
    expect_cli(&d, NULL, 1, NULL, ARGS("erase", "v", "1"));               /* a TREE does not erase */
    expect_cli(&d, NULL, 0, "created s", ARGS("create", "s"));
    expect_cli(&d, NULL, 1, NULL, ARGS("get", "s", "1")); /* get_by_id is for TREE tables */
    expect_cli(&d, NULL, 2, NULL, ARGS("dump", "v", "--values"));
    expect_cli(&d, NULL, 0, "usage: floe get", ARGS("get", "--help"));
    expect_cli(&d, NULL, 0, "tree", ARGS("create", "--help"));
    expect_cli(&d, NULL, 0, "vectors: 4", ARGS("stats", "v")); /* nothing above changed it */
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* A TREE created for 64 vectors, with grow (_i 0) or by default (_i 1),
 * takes 40,000 through floed: no FULL, every answer as the reference's,
 * each batch's ids those of the generation it left (the reference's looked
 * up again when it moved), and after several growths every vector, id and
 * scan as the reference says.  With no_grow (_i 2) the same vectors fill
 * one for 5,000: FULL answers, nothing renamed, and what was INSERTED is
 * all it holds.  (Not 64: on the GPU a batch's vectors fold at once, and
 * a node table that small fills before any of them reaches its root.) */
START_TEST(tree_grows)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    floe *c = connect_ok(&d);
    const unsigned W = 16;
    const bool fixed = _i == 2;
    floe_table_def def = {.name = "g",
                          .kind = FLOE_TABLE_TREE,
                          .words = W,
                          .capacity = fixed ? 5000 : 64,
                          .grow = _i == 0,
                          .no_grow = fixed};
    ck_assert_msg(floe_create(c, &def) == FLOE_OK, "create: %s", floe_errstr(c));
    floe_table_info made;
    ck_assert_int_eq(floe_stats(c, "g", &made), FLOE_OK);
    ck_assert_int_eq(made.grow, !fixed);
    uint64_t full = 0;
    enum { N = 40000, B = 4000 };
    uint32_t *v = malloc((size_t)N * W * 4);
    uint32_t state[32] = {0};
    uint64_t rng = 0xC0FFEE;
    walk(v, N, W, &rng, state);
    ref r;
    ref_init(&r, W, N);
    uint8_t *res = malloc(B);
    uint64_t *ids = malloc(B * 8), generation = 0;
    uint8_t *fres = malloc(N);
    for (size_t at = 0; at < N;) {
        size_t n = 1 + rng_next(&rng) % B;
        if (n > N - at)
            n = N - at;
        const uint32_t *bv = v + at * W;
        ck_assert_msg(floe_insert_vectors(c, "g", bv, n, W, res, ids, NULL) == FLOE_OK, "insert: %s", floe_errstr(c));
        floe_table_info info;
        ck_assert_int_eq(floe_stats(c, "g", &info), FLOE_OK);
        if (info.generation != generation) { /* it grew: the reference's ids of the new generation */
            ck_assert_uint_gt(info.generation, generation);
            generation = info.generation;
            if (r.n > 0)
                ck_assert_int_eq(floe_find_vectors(c, "g", r.vecs, r.n, W, fres, r.ids, NULL), FLOE_OK);
        }
        for (size_t i = 0; i < n; i++) {
            ck_assert_msg(fixed || res[i] != FLOE_FULL, "vector %zu: FULL from a table that grows", at + i);
            long k = ref_find(&r, bv + i * W, 0, 0);
            if (k < 0 && res[i] == FLOE_FULL) {
                full++; /* not stored: a later occurrence may find room */
            } else if (k < 0) {
                ck_assert_msg(res[i] == FLOE_INSERTED, "vector %zu: %u, expected INSERTED", at + i, res[i]);
                ref_find(&r, bv + i * W, 1, ids[i]);
            } else {
                ck_assert_msg(res[i] == FLOE_PRESENT, "vector %zu: %u, expected PRESENT", at + i, res[i]);
                ck_assert_uint_eq(ids[i], r.ids[k]);
            }
        }
        at += n;
    }
    if (fixed) {
        ck_assert_uint_eq(generation, 0);
        ck_assert_uint_gt(full, 0);
        ck_assert_uint_gt(r.n, 0);
    } else {
        ck_assert_uint_ge(generation, 3);
    }
    check_contents(c, "g", &r, full > 0);
    ref_free(&r);
    free(v);
    free(res);
    free(ids);
    free(fres);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* States by their parents (floe_insert_states) on a TREE that grows: each
 * answered as its whole vector (a second table takes the same states
 * whole), ids of the generation the answer names, parents of an old
 * generation or naming no vector refused with nothing changed; bad shapes
 * over raw frames refused; a SET refuses states. */
START_TEST(tree_states_by_parent)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    floe *c = connect_ok(&d);
    enum { W = 16, SEED = 64, ROUNDS = 12, B = 3000 };
    floe_table_def def = {.name = "p", .kind = FLOE_TABLE_TREE, .words = W, .capacity = 64, .grow = 1};
    ck_assert_msg(floe_create(c, &def) == FLOE_OK, "create: %s", floe_errstr(c));
    def.name = "w";
    ck_assert_msg(floe_create(c, &def) == FLOE_OK, "create: %s", floe_errstr(c));
    ref r;
    ref_init(&r, W, SEED + ROUNDS * B);
    uint32_t *v = malloc((size_t)B * W * 4), state[32] = {0};
    uint64_t rng = 0xBADC0DE, *parents = malloc(B * 8), *ids = malloc(B * 8), *wids = malloc(B * 8);
    uint8_t *counts = malloc(B), *changes = malloc(B * 3 * FLOE_CHANGE_BYTES), *res = malloc(B), *wres = malloc(B);
    walk(v, SEED, W, &rng, state);
    insert_checked(c, "p", &r, v, SEED);
    ck_assert_int_eq(floe_insert_vectors(c, "w", v, SEED, W, NULL, NULL, NULL), FLOE_OK);
    /* in parts too: the table's generation is the sum of its parts' */
    uint64_t generation = floe_ids_generation(c), grew = 0, sent = 0;
    for (int round = 0; round < ROUNDS; round++) {
        size_t nc = 0;
        for (size_t i = 0; i < B; i++) { /* a stored state, and one to three words changed */
            const size_t p = rng_next(&rng) % r.n;
            memcpy(v + i * W, r.vecs + p * W, W * 4);
            parents[i] = r.ids[p];
            counts[i] = (uint8_t)(1 + rng_next(&rng) % 3);
            for (unsigned k = 0; k < counts[i]; k++, nc++) {
                const uint32_t word = (uint32_t)(rng_next(&rng) % W), value = (uint32_t)(rng_next(&rng) % 6);
                floe_change_put(changes + nc * FLOE_CHANGE_BYTES, word, value);
                v[i * W + word] = value;
            }
        }
        floe_counts k;
        ck_assert_msg(floe_insert_states(c, "p", generation, parents, counts, changes, B, res, ids, &k) == FLOE_OK,
                      "insert_states: %s", floe_errstr(c));
        sent += B;
        ck_assert_int_eq(floe_insert_vectors(c, "w", v, B, W, wres, wids, NULL), FLOE_OK);
        floe_table_info info;
        ck_assert_int_eq(floe_stats(c, "p", &info), FLOE_OK);
        if (info.generation != generation) { /* it grew: the reference's ids of the new generation */
            ck_assert_uint_gt(info.generation, generation);
            uint8_t *fres = malloc(r.n + 1);
            ck_assert_int_eq(floe_find_vectors(c, "p", r.vecs, r.n, W, fres, r.ids, NULL), FLOE_OK);
            free(fres);
            /* a parent id of the old generation: refused, nothing changed */
            floe_table_info before;
            snapshot_figures(c, "p", &before);
            ck_assert_int_eq(floe_insert_states(c, "p", generation, parents, counts, changes, 1, res, ids, NULL),
                             FLOE_ERR_INVALID);
            ck_assert_msg(strstr(floe_errstr(c), "generation") != NULL, "%s", floe_errstr(c));
            assert_unchanged(c, "p", &before, "parents of an old generation");
            generation = info.generation;
            grew++;
        }
        for (size_t i = 0; i < B; i++) {
            ck_assert_msg(res[i] == wres[i], "state %zu: %u by parent, %u whole", i, res[i], wres[i]);
            long at = ref_find(&r, v + i * W, 0, 0);
            if (at < 0) {
                ck_assert_int_eq(res[i], FLOE_INSERTED);
                ref_find(&r, v + i * W, 1, ids[i]);
            } else {
                ck_assert_int_eq(res[i], FLOE_PRESENT);
                ck_assert_uint_eq(ids[i], r.ids[at]);
            }
        }
    }
    ck_assert_uint_gt(grew, 0);
    check_contents(c, "p", &r, false);

    /* a parent that names no vector: refused, nothing changed */
    floe_table_info before;
    snapshot_figures(c, "p", &before);
    parents[0] = r.ids[0];
    parents[1] = (uint64_t)1 << 50;
    counts[0] = counts[1] = 1;
    floe_change_put(changes, 0, 0xABCDu);
    floe_change_put(changes + FLOE_CHANGE_BYTES, 1, 0xABCDu);
    ck_assert_int_eq(floe_insert_states(c, "p", generation, parents, counts, changes, 2, res, ids, NULL),
                     FLOE_ERR_INVALID);
    ck_assert_msg(strstr(floe_errstr(c), "names no vector") != NULL, "%s", floe_errstr(c));
    assert_unchanged(c, "p", &before, "a parent that names no vector");
    /* a word past the vector */
    floe_change_put(changes + FLOE_CHANGE_BYTES, W, 1);
    parents[1] = r.ids[1];
    ck_assert_int_eq(floe_insert_states(c, "p", generation, parents, counts, changes, 2, res, ids, NULL),
                     FLOE_ERR_INVALID);
    ck_assert_msg(strstr(floe_errstr(c), "names word 16") != NULL, "%s", floe_errstr(c));
    assert_unchanged(c, "p", &before, "a change past the vector");
    /* a SET takes no states */
    floe_table_def sd = {.name = "s", .kind = FLOE_TABLE_SET, .key_bits = 32};
    ck_assert_int_eq(floe_create(c, &sd), FLOE_OK);
    ck_assert_int_eq(floe_insert_states(c, "s", 0, parents, counts, changes, 1, res, NULL, NULL), FLOE_ERR_UNSUPPORTED);

    /* shapes only a raw frame can send: counts or changes of the wrong length, keys beside parents */
    int fd = raw_connect(d.port);
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Insert in = FLOE__V1__INSERT__INIT;
    req.op_case = FLOE__V1__REQUEST__OP_INSERT;
    req.insert = &in;
    in.table = (char *)"p";
    in.parents.data = (uint8_t *)parents;
    in.parents.len = 16;
    in.change_counts.data = counts;
    in.change_counts.len = 1;
    in.changes.data = changes;
    in.changes.len = 2 * FLOE_CHANGE_BYTES;
    in.generation = generation;
    expect_status(raw_call(fd, &req, 1), FLOE_ERR_INVALID, "change counts", "two parents, one count");
    in.change_counts.len = 2;
    in.changes.len = FLOE_CHANGE_BYTES + 3;
    expect_status(raw_call(fd, &req, 2), FLOE_ERR_INVALID, "bytes of changes", "changes cut short");
    in.changes.len = 2 * FLOE_CHANGE_BYTES;
    floe_change_put(changes + FLOE_CHANGE_BYTES, 1, 7);
    in.keys.data = (uint8_t *)v;
    in.keys.len = W * 4;
    expect_status(raw_call(fd, &req, 3), FLOE_ERR_INVALID, "instead of keys", "keys beside parents");
    in.keys.len = 0;
    in.parents.len = 12;
    expect_status(raw_call(fd, &req, 4), FLOE_ERR_INVALID, "multiple of 8", "parents of 12 bytes");
    close(fd);
    assert_unchanged(c, "p", &before, "bad shapes");
    printf("tree states by parent: %llu states, %llu growths, every answer as the whole vector's\n",
           (unsigned long long)sent, (unsigned long long)grew);
    ref_free(&r);
    free(v);
    free(parents);
    free(ids);
    free(wids);
    free(counts);
    free(changes);
    free(res);
    free(wres);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

Suite *tree_suite(void)
{
    Suite *s = suite_create("tree");
    TCase *tc = tcase_create("tree");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, tree_over_the_wire);
    tcase_add_test(tc, tree_pipelined);
    tcase_add_loop_test(tc, tree_grows, 0, 3);
    tcase_add_test(tc, tree_states_by_parent);
    tcase_add_test(tc, tree_refusals);
    tcase_add_test(tc, tree_survives_restart);
    tcase_add_test(tc, tree_cli);
    suite_add_tcase(s, tc);
    return s;
}
