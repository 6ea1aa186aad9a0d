/*
 * tree.c - the CPU engine for TREE tables (see tree.h, layout in
 * tree_layout.h).
 *
 * A batch runs in two passes.  First every vector is folded bottom-up into
 * its root pair, in parallel chunks: each node is found or put in the node
 * table (acquire loads, one CAS from EMPTY), its reference replaces the pair
 * (a state given by its parent folds only its changed words' paths).
 * Then the root keys of the vectors that got that far go to the root table,
 * an iceberg SET, as one batch: the iceberg engine gives first-occurrence
 * order inside the batch and exactly one INSERTED among concurrent batches,
 * and its slot ids are the vectors' ids.  "Was this vector new" is decided by
 * the root alone: its nodes may all exist already as parts of other vectors.
 */
#define _GNU_SOURCE
#include "tree.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>

#include "alloc.h"
#include "tablefile.h"

#define CHUNK          1024u               /* vectors per pool task */
#define SCAN_MAX_SLOTS ((uint64_t)1 << 20) /* root slots examined per scan call */
#define TREE_SECTIONS  (FLOE_LEVELS + 2)   /* root levels, (no) values, nodes */

typedef _Atomic uint64_t aword;

struct tree {
    floe_spec spec;
    floe_tree_geometry g;
    tree_sizing z;
    floe_pool *pool;
    aword *nodes;
    iceberg *roots;
    _Atomic uint64_t nodes_used, orphans;
    uint64_t generation; /* growths so far: ids of an earlier one name other vectors */
    /* Batches hold it to read, a growth to write: a growing table's batch
     * grows it between its own steps while other batches may run. */
    pthread_rwlock_t lock;
};

/* ---- sizing ------------------------------------------------------------------------- */

static uint64_t root_bytes_for(uint32_t key_bits, uint32_t addr_bits, uint32_t three)
{
    floe_geometry g;
    floe_geometry_init(&g, key_bits, addr_bits, three, 0);
    uint64_t b = 0;
    for (int l = 0; l < FLOE_LEVELS; l++)
        b += floe_level_words(&g.level[l]) * 8;
    return b;
}

void tree_geometry_for(const floe_spec *spec, const tree_sizing *z, floe_tree_geometry *g)
{
    floe_tree_geometry_init(g, spec->words, z->node_bits, z->node_three, z->node_tag_bits, spec->seed);
}

/* The root table for a node table of node_bits, three and tag_bits: its
 * spec and size. */
static void size_roots(const floe_spec *spec, uint32_t node_bits, uint32_t three, uint32_t tag_bits, tree_sizing *z)
{
    z->node_bits = node_bits;
    z->node_three = three;
    z->node_tag_bits = tag_bits;
    floe_tree_geometry g;
    tree_geometry_for(spec, z, &g);
    floe_spec *r = &z->root_spec;
    floe_spec_default(r);
    memcpy(r->name, spec->name, sizeof r->name);
    r->kind = FLOE_KIND_SET;
    r->key_bits = g.root_key_bits;
    /* No more roots than root keys. */
    uint64_t keys = g.root_key_bits >= 64 ? UINT64_MAX : (uint64_t)1 << g.root_key_bits;
    r->capacity = spec->capacity < keys ? spec->capacity : keys;
    r->seed = spec->seed ^ 0xA0761D6478BD642Full;
    if (r->seed == 0)
        r->seed = 1;
    strcpy(r->backend, "cpu");
    z->root_addr_bits = iceberg_addr_bits_for(r->key_bits, r->capacity);
    z->root_three = 0;
    z->node_bytes = g.node_slots * 8;
    z->root_bytes = root_bytes_for(r->key_bits, z->root_addr_bits, 0);
}

/* The node table one step larger than 2^bits (1.5 times that with *three),
 * in the newest node layout: 2^k -> 1.5 * 2^k -> 2^(k+1). */
static void node_step(uint32_t *bits, uint32_t *three)
{
    if (!*three && floe_node_size_ok(*bits, 1, FLOE_NODE_TAG_BITS)) {
        *three = 1;
    } else {
        *bits += 1;
        *three = 0;
    }
    if (*bits < FLOE_NODE_MIN_BITS) {
        *bits = FLOE_NODE_MIN_BITS;
        *three = 0;
    }
}

floe_status tree_size(const floe_spec *spec, tree_sizing *z, floe_errinfo *err)
{
    memset(z, 0, sizeof *z);
    if (spec->memory == 0) {
        /* TREE_DEFAULT_NODES_PER_VECTOR nodes per vector (N - 2 at most), and
         * room for the first TREE_UNSHARED_VECTORS to share nothing; a table
         * that grows starts at TREE_GROW_NODES_PER_VECTOR and no more. */
        const double want_per = spec->grow ? TREE_GROW_NODES_PER_VECTOR : TREE_DEFAULT_NODES_PER_VECTOR;
        const double most = tree_most_nodes_a_vector(spec);
        const double per = most < want_per ? most : want_per;
        uint64_t unshared = spec->grow                               ? 0
                            : spec->capacity < TREE_UNSHARED_VECTORS ? spec->capacity
                                                                     : TREE_UNSHARED_VECTORS;
        double want = ((double)spec->capacity * per + (double)unshared * most) / TREE_NODE_FILL;
        uint32_t bits = FLOE_NODE_MIN_BITS, three = 0;
        while (bits < FLOE_NODE_MAX_BITS && (double)floe_node_slots_for(bits, three) < want)
            node_step(&bits, &three);
        size_roots(spec, bits, three, FLOE_NODE_TAG_BITS, z);
        return FLOE_OK;
    }
    /* A budget: the largest node table that fits beside the root table. */
    for (uint32_t bits = FLOE_NODE_MAX_BITS; bits >= FLOE_NODE_MIN_BITS; bits--)
        for (int three = 1; three >= 0; three--) {
            if (!floe_node_size_ok(bits, (uint32_t)three, FLOE_NODE_TAG_BITS))
                continue;
            size_roots(spec, bits, (uint32_t)three, FLOE_NODE_TAG_BITS, z);
            if (z->node_bytes + z->root_bytes <= spec->memory)
                return FLOE_OK;
        }
    return floe_errinfo_set(err, FLOE_ERR_INVALID,
                            "memory %llu bytes is too small for a TREE of capacity %llu: its root table alone needs "
                            "%llu bytes plus %llu for the smallest node table",
                            (unsigned long long)spec->memory, (unsigned long long)spec->capacity,
                            (unsigned long long)z->root_bytes, (unsigned long long)z->node_bytes);
}

floe_status tree_size_bits(const floe_spec *spec, const tree_sizing *sizes, tree_sizing *z, floe_errinfo *err)
{
    const uint32_t node_bits = sizes->node_bits, three = sizes->node_three, tag_bits = sizes->node_tag_bits;
    const uint32_t root_addr_bits = sizes->root_addr_bits, root_three = sizes->root_three;
    memset(z, 0, sizeof *z);
    if ((tag_bits != FLOE_NODE_TAG_BITS && tag_bits != FLOE_NODE_OLD_TAG_BITS) || three > 1 ||
        !floe_node_size_ok(node_bits, three, tag_bits))
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "a node table of %s2^%u slots with %u-bit tags is outside 2^%u .. 2^%u (1.5 times "
                                "a power of two from 2^%u, with 5-bit tags)",
                                three ? "1.5 * " : "", node_bits, tag_bits, tag_bits + FLOE_NODE_BUCKET_SHIFT,
                                FLOE_NODE_MAX_BITS, FLOE_NODE_TAG_BITS + FLOE_NODE_BUCKET_SHIFT + 1);
    size_roots(spec, node_bits, three, tag_bits, z);
    const uint32_t key_bits = z->root_spec.key_bits;
    if (root_addr_bits < floe_min_addr_bits(key_bits) || root_addr_bits > floe_max_addr_bits(key_bits))
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "a root table of 2^%u primary buckets is outside 2^%u .. 2^%u for %u-bit roots",
                                root_addr_bits, floe_min_addr_bits(key_bits), floe_max_addr_bits(key_bits), key_bits);
    if (root_three > 1 || (root_three && (root_addr_bits < 1 || tag_bits != FLOE_NODE_TAG_BITS)))
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "a root table of 1.5 x 2^%u primary buckets needs 2^1 or more, in node layout %u",
                                root_addr_bits, FLOE_NODE_LAYOUT);
    z->root_addr_bits = root_addr_bits;
    z->root_three = root_three;
    z->root_bytes = root_bytes_for(key_bits, root_addr_bits, root_three);
    return FLOE_OK;
}

double tree_nodes_ahead(const floe_spec *spec, uint64_t nodes, uint64_t vectors, double rate)
{
    if (vectors < spec->capacity / TREE_AHEAD_FROM || vectors >= spec->capacity)
        return 0.0;
    if (rate <= 0.0)
        rate = (double)nodes / (double)vectors;
    return ((double)nodes + rate * (double)(spec->capacity - vectors)) / TREE_NODE_FILL;
}

floe_status tree_size_grown(const floe_spec *spec, const tree_sizing *from, unsigned what, double want, tree_sizing *to,
                            floe_errinfo *err)
{
    uint32_t node_bits = from->node_bits, three = from->node_three;
    if (what & TREE_GROW_NODES) {
        /* a bounded guess, to the nearest step: a model's rate of new nodes changes as it runs (mostly
         * it falls, as its states share more), and a larger node table widens the roots */
        const uint64_t most = floe_node_slots_for(from->node_bits, from->node_three) << TREE_GROW_AHEAD_BITS;
        node_step(&node_bits, &three);
        for (;;) {
            uint32_t b = node_bits, t3 = three;
            node_step(&b, &t3);
            const double at = (double)floe_node_slots_for(node_bits, three), next = (double)floe_node_slots_for(b, t3);
            if (b > FLOE_NODE_MAX_BITS || next > (double)most || want * want <= at * next)
                break;
            node_bits = b;
            three = t3;
        }
    }
    const uint32_t tag_bits = what & TREE_GROW_NODES ? FLOE_NODE_TAG_BITS : from->node_tag_bits;
    /* roots: 2^a -> 1.5 x 2^a -> 2^(a+1), or doublings in a table of the old node layout */
    uint32_t root_bits = from->root_addr_bits, root_three = from->root_three;
    if ((what & TREE_GROW_ROOTS) && !root_three && root_bits >= 1 && tag_bits == FLOE_NODE_TAG_BITS) {
        root_three = 1;
    } else if (what & TREE_GROW_ROOTS) {
        root_bits++;
        root_three = 0;
    }
    if (!floe_node_size_ok(node_bits, three, tag_bits))
        return floe_errinfo_set(err, FLOE_ERR_TOO_LARGE, "table %s cannot grow past 2^%u nodes", spec->name,
                                FLOE_NODE_MAX_BITS);
    tree_sizing z;
    size_roots(spec, node_bits, three, tag_bits, &z); /* wider roots may need a larger least root table */
    const uint32_t key_bits = z.root_spec.key_bits;
    if (root_bits < floe_min_addr_bits(key_bits)) {
        root_bits = floe_min_addr_bits(key_bits);
        root_three = 0;
    }
    if (root_bits > floe_max_addr_bits(key_bits) || (root_three && root_bits == floe_max_addr_bits(key_bits)))
        return floe_errinfo_set(err, FLOE_ERR_TOO_LARGE, "table %s cannot grow past 2^%u root buckets", spec->name,
                                floe_max_addr_bits(key_bits));
    const tree_sizing sizes = {.node_bits = node_bits,
                               .node_three = three,
                               .node_tag_bits = tag_bits,
                               .root_addr_bits = root_bits,
                               .root_three = root_three};
    return tree_size_bits(spec, &sizes, to, err);
}

static double root_slots_of(const tree_sizing *z)
{
    floe_geometry rg;
    floe_geometry_init(&rg, z->root_spec.key_bits, z->root_addr_bits, z->root_three, z->root_spec.seed);
    return (double)rg.total_slots;
}

floe_status tree_size_for(const floe_spec *spec, const tree_sizing *from, unsigned what, double want, double nodes,
                          double roots, tree_sizing *to, floe_errinfo *err)
{
    floe_status st = tree_size_grown(spec, from, what, want, to, err);
    const double node_fill = spec->max_fill < TREE_NODE_FILL ? spec->max_fill : TREE_NODE_FILL;
    for (;;) {
        const double node_slots = (double)floe_node_slots_for(to->node_bits, to->node_three);
        const unsigned more = ((what & TREE_GROW_NODES) && nodes > node_fill * node_slots ? TREE_GROW_NODES : 0) |
                              (roots > spec->max_fill * root_slots_of(to) ? TREE_GROW_ROOTS : 0);
        tree_sizing next;
        floe_errinfo ignored;
        if (st != FLOE_OK || !more || tree_size_grown(spec, to, more, 0.0, &next, &ignored) != FLOE_OK)
            return st;
        *to = next;
    }
}

/* ---- nodes ---------------------------------------------------------------------------- */

/* Finds or (insert) puts one node; returns 1 and its reference, or 0 when it
 * is absent (find) or no probe had room (insert). */
static inline int node_ref(const tree *t, uint64_t node, int insert, uint32_t *ref, unsigned *created)
{
    const floe_tree_geometry *g = &t->g;
    uint64_t home, rem;
    floe_node_home(g, node, &home, &rem);
    for (uint32_t c = 0; c < g->choices; c++) {
        const uint64_t b = floe_node_bucket(g, home, c), v = floe_node_stored(g, rem, c);
        aword *slots = t->nodes + (b << FLOE_NODE_BUCKET_SHIFT);
        for (uint32_t i = 0; i < FLOE_NODE_BUCKET; i++) {
            uint64_t cur = atomic_load_explicit(&slots[i], memory_order_acquire);
            if (cur == FLOE_NODE_EMPTY) {
                if (!insert)
                    return 0; /* nodes fill buckets from the front: it would be here */
                if (atomic_compare_exchange_strong_explicit(&slots[i], &cur, v, memory_order_acq_rel,
                                                            memory_order_acquire)) {
                    *ref = (uint32_t)((b << FLOE_NODE_BUCKET_SHIFT) + i);
                    ++*created;
                    return 1;
                }
                /* Lost the slot: cur is the winner's node, maybe ours. */
            }
            if (cur == v) {
                *ref = (uint32_t)((b << FLOE_NODE_BUCKET_SHIFT) + i);
                return 1;
            }
        }
    }
    return 0;
}

#define FOLDED 0xFFu /* a fold's outcome besides the answers FLOE_FULL and FLOE_ABSENT */

/* Folds one vector into its root key: FOLDED, or FLOE_FULL / FLOE_ABSENT
 * when a node had no room / is not stored. */
static int fold(const tree *t, const uint32_t *vec, int insert, uint64_t *root_key, unsigned *created)
{
    uint32_t items[FLOE_TREE_MAX_WORDS];
    uint32_t m = t->g.words;
    memcpy(items, vec, m * sizeof *items);
    while (m > 2) {
        const uint32_t half = m / 2;
        for (uint32_t j = 0; j < half; j++)
            if (!node_ref(t, floe_node_pack(items[2 * j], items[2 * j + 1]), insert, &items[j], created))
                return insert ? FLOE_FULL : FLOE_ABSENT;
        if (m & 1)
            items[half] = items[m - 1];
        m = floe_tree_up(m);
    }
    *root_key = floe_tree_root_key(&t->g, items[0], items[1]);
    return FOLDED;
}

#define DAMAGED 0xFEu /* a fold met a reference to no node: the table is damaged */

/* Positions 0..FLOE_TREE_MAX_WORDS-1 of one level, as a bit set. */
typedef struct level_set {
    uint64_t w[(FLOE_TREE_MAX_WORDS + 63) / 64];
} level_set;

/* Whether position i was in s (it is now). */
static int level_seen(level_set *s, uint32_t i)
{
    const uint64_t bit = 1ull << (i & 63);
    const int was = (s->w[i >> 6] & bit) != 0;
    s->w[i >> 6] |= bit;
    return was;
}

/* Folds the vector of the parent whose root key is `key`, with nc words
 * changed, into its root key, reading and putting only the nodes on the
 * changed words' paths: the item of word w at level k is at position
 * w >> k, and an odd level's last item is carried up unchanged.  FOLDED,
 * FLOE_FULL (a node had no room) or DAMAGED. */
static int fold_delta(const tree *t, uint64_t key, const uint8_t *ch, uint32_t nc, uint64_t *root_key,
                      unsigned *created)
{
    const floe_tree_geometry *g = &t->g;
    uint32_t m[10], L = 0; /* items per level; level L holds the root pair */
    for (m[0] = g->words; m[L] > 2; L++)
        m[L + 1] = floe_tree_up(m[L]);
    uint32_t item[10][FLOE_TREE_MAX_WORDS];
    floe_tree_root_split(g, key, &item[L][0], &item[L][1]);
    /* down the changed words' paths: each expanded item gives both children */
    for (uint32_t k = L; k > 0; k--) {
        level_set done = {{0}};
        const uint32_t lo = m[k - 1];
        for (uint32_t c = 0; c < nc; c++) {
            const uint32_t i = floe_change_word(ch + c * FLOE_CHANGE_BYTES) >> k;
            if (level_seen(&done, i))
                continue;
            if ((lo & 1) && i == lo / 2) {
                item[k - 1][lo - 1] = item[k][i];
                continue;
            }
            const uint64_t ref = item[k][i];
            if (ref >= g->node_slots)
                return DAMAGED;
            const uint64_t v = atomic_load_explicit(&t->nodes[ref], memory_order_acquire);
            if (!floe_node_valid(g, v))
                return DAMAGED;
            const uint64_t node = floe_node_decode(g, ref, v);
            item[k - 1][2 * i] = (uint32_t)node;
            item[k - 1][2 * i + 1] = (uint32_t)(node >> 32);
        }
    }
    for (uint32_t c = 0; c < nc; c++) { /* in order: a word changed twice takes the last value */
        const uint8_t *p = ch + c * FLOE_CHANGE_BYTES;
        item[0][floe_change_word(p)] = floe_change_value(p);
    }
    /* and up again, putting the new nodes */
    for (uint32_t k = 0; k < L; k++) {
        level_set done = {{0}};
        for (uint32_t c = 0; c < nc; c++) {
            const uint32_t i = floe_change_word(ch + c * FLOE_CHANGE_BYTES) >> (k + 1);
            if (level_seen(&done, i))
                continue;
            if ((m[k] & 1) && i == m[k] / 2)
                item[k + 1][i] = item[k][m[k] - 1];
            else if (!node_ref(t, floe_node_pack(item[k][2 * i], item[k][2 * i + 1]), 1, &item[k + 1][i], created))
                return FLOE_FULL;
        }
    }
    *root_key = floe_tree_root_key(g, item[L][0], item[L][1]);
    return FOLDED;
}

typedef struct fold_job {
    tree *t;
    const uint32_t *vectors; /* whole vectors, or (NULL) parents and changes */
    const uint64_t *parents;
    uint64_t *parent_keys; /* their root keys (check_parents) */
    const uint64_t *first; /* state i's changes: [first[i], first[i + 1]) of changes, FLOE_CHANGE_BYTES each */
    const uint8_t *counts, *changes;
    size_t n;
    int insert;
    uint64_t *root_keys;
    uint8_t *state;   /* FOLDED or the answer */
    uint8_t *created; /* nodes each vector wrote (<= 254) */
    _Atomic uint64_t new_nodes, orphans;
} fold_job;

static void fold_chunk(void *arg, size_t task)
{
    fold_job *j = arg;
    const size_t W = j->t->g.words;
    size_t lo = task * CHUNK, hi = lo + CHUNK < j->n ? lo + CHUNK : j->n;
    uint64_t made = 0, lost = 0;
    for (size_t i = lo; i < hi; i++) {
        unsigned created = 0;
        j->state[i] =
            (uint8_t)(j->vectors ? fold(j->t, j->vectors + i * W, j->insert, &j->root_keys[i], &created)
                                 : fold_delta(j->t, j->parent_keys[i], j->changes + j->first[i] * FLOE_CHANGE_BYTES,
                                              (uint32_t)(j->first[i + 1] - j->first[i]), &j->root_keys[i], &created));
        if (j->created)
            j->created[i] = (uint8_t)created;
        made += created;
        if (j->state[i] != FOLDED)
            lost += created;
    }
    atomic_fetch_add(&j->new_nodes, made);
    atomic_fetch_add(&j->orphans, lost);
}

/* The shared body of insert, find and insert_delta: j says what to fold
 * (its vectors, or its parents and changes), n states.  full_in (may be
 * NULL) gets which tables had no room for a FULL state: TREE_GROW_NODES,
 * TREE_GROW_ROOTS.  The caller holds t's lock (or t is its own). */
static floe_status run_states(tree *t, fold_job j, size_t n, int insert, uint8_t *results, uint64_t *ids,
                              floe_answer_counts *counts, unsigned *full_in, floe_errinfo *err)
{
    floe_status st = FLOE_OK;
    /* as the door (floe_request_check, floe_batch_check) lets a batch through */
    assert(n < ((size_t)1 << 32));
    assert(n == 0 || ((j.vectors || j.parents) && results));
    /* One allocation: root keys, compacted root keys, their ids, state,
     * created counts, their results, and the compaction map. */
    size_t bytes = n * (8 + 8 + 8 + 1 + 1 + 1) + n * sizeof(uint32_t) + 64;
    unsigned char *mem = floe_malloc(bytes ? bytes : 1);
    if (!mem)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory for a batch of %zu vectors", n);
    uint64_t *root_keys = (uint64_t *)mem;
    uint64_t *sub_keys = root_keys + n;
    uint64_t *sub_ids = sub_keys + n;
    uint32_t *sub_of = (uint32_t *)(sub_ids + n);
    uint8_t *state = (uint8_t *)(sub_of + n);
    uint8_t *created = state + n;
    uint8_t *sub_results = created + n;

    j.t = t;
    j.n = n;
    j.insert = insert;
    j.root_keys = root_keys;
    j.state = state;
    j.created = created;
    atomic_init(&j.new_nodes, 0);
    atomic_init(&j.orphans, 0);
    floe_pool_run(t->pool, (n + CHUNK - 1) / CHUNK, fold_chunk, &j);
    atomic_fetch_add(&t->nodes_used, atomic_load(&j.new_nodes));
    for (size_t i = 0; i < n; i++)
        if (state[i] == DAMAGED) {
            free(mem);
            return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "table %s is damaged: a parent leads to a missing node",
                                    t->spec.name);
        }

    size_t m = 0;
    unsigned full = 0;
    for (size_t i = 0; i < n; i++) {
        if (state[i] == FLOE_FULL)
            full |= TREE_GROW_NODES;
        if (state[i] == FOLDED) {
            sub_keys[m] = root_keys[i];
            sub_of[m++] = (uint32_t)i;
        } else {
            results[i] = state[i];
            if (ids)
                ids[i] = FLOE_NO_ID;
        }
    }
    uint64_t orphans = atomic_load(&j.orphans);
    if (m > 0) {
        st = insert ? iceberg_insert(t->roots, sub_keys, m, NULL, 0, 0, sub_results, sub_ids, NULL, NULL, err)
                    : iceberg_find(t->roots, sub_keys, m, sub_results, sub_ids, NULL, NULL, err);
        if (st != FLOE_OK) {
            free(mem);
            return st;
        }
        for (size_t k = 0; k < m; k++) {
            size_t i = sub_of[k];
            results[i] = sub_results[k];
            if (ids)
                ids[i] = sub_ids[k];
            if (sub_results[k] == FLOE_FULL) {
                orphans += created[i];
                full |= TREE_GROW_ROOTS;
            }
        }
    }
    if (full_in)
        *full_in = full;
    atomic_fetch_add(&t->orphans, orphans);
    free(mem);
    floe_answer_counts_tally(counts, results, n);
    return FLOE_OK;
}

/* The vector of root key `key` into out: false if a node is missing (damaged). */
static bool unfold_key(const tree *t, uint64_t key, uint32_t *out)
{
    uint32_t left, right;
    floe_tree_root_split(&t->g, key, &left, &right);
    return floe_tree_unfold(&t->g, (const uint64_t *)t->nodes, left, right, out);
}

/* The vector of one id: 1 (out filled), 0 (no vector there), -1 (damaged). */
static int get_one(tree *t, uint64_t id, uint32_t *out)
{
    uint64_t key;
    if (!iceberg_key_at(t->roots, id, &key))
        return 0;
    return unfold_key(t, key, out) ? 1 : -1;
}

/* ---- batches, and growth between their steps ------------------------------------------------ */

static floe_status grow_locked(tree *t, unsigned what, size_t coming, floe_errinfo *err);
static floe_status size_growth(tree *t, unsigned what, size_t coming, tree_sizing *z, floe_errinfo *err);

/* Which of t's tables are past max_fill (the caller holds the lock). */
static unsigned over_fill(tree *t)
{
    unsigned what = 0;
    if ((double)atomic_load(&t->nodes_used) > t->spec.max_fill * (double)t->g.node_slots)
        what |= TREE_GROW_NODES;
    if ((double)iceberg_used_slots(t->roots) > t->spec.max_fill * (double)iceberg_total_slots(t->roots))
        what |= TREE_GROW_ROOTS;
    return what;
}

/* Parents of a delta batch must be ids of t's generation that name vectors
 * (the caller holds the lock, so none of that changes before the fold). */
floe_status tree_parents_generation(const char *table, uint64_t given, uint64_t current, floe_errinfo *err)
{
    if (given == current)
        return FLOE_OK;
    return floe_errinfo_set(err, FLOE_ERR_INVALID,
                            "parent ids are of generation %llu, but table %s is at generation %llu (it grew, and ids "
                            "changed): send these states whole",
                            (unsigned long long)given, table, (unsigned long long)current);
}

floe_status tree_parent_missing(const char *table, size_t state, uint64_t parent, floe_errinfo *err)
{
    return floe_errinfo_set(err, FLOE_ERR_INVALID, "state %zu: parent id %llu names no vector of table %s", state,
                            (unsigned long long)parent, table);
}

void tree_apply_changes(uint32_t *vectors, uint32_t words, const uint8_t *counts, const uint8_t *changes, size_t n)
{
    for (size_t i = 0, c = 0; i < n; i++)
        for (unsigned k = 0; k < counts[i]; k++, c++) { /* in order: the last value of a word counts */
            const uint8_t *p = changes + c * FLOE_CHANGE_BYTES;
            vectors[i * words + floe_change_word(p)] = floe_change_value(p);
        }
}

/* check_parents' lookup, a pool task a chunk of parents. */
typedef struct parent_lookup {
    const iceberg *roots;
    const uint64_t *parents;
    uint64_t *keys;
    size_t n;
    _Atomic uint64_t missing; /* the first parent that names no vector (the lowest wins), n if none */
} parent_lookup;

static void parent_keys_chunk(void *arg, size_t task)
{
    parent_lookup *pl = arg;
    const size_t lo = task * CHUNK, hi = lo + CHUNK < pl->n ? lo + CHUNK : pl->n;
    for (size_t i = lo; i < hi; i++)
        if (!iceberg_key_at(pl->roots, pl->parents[i], &pl->keys[i])) {
            uint64_t was = atomic_load(&pl->missing);
            while (i < was && !atomic_compare_exchange_weak(&pl->missing, &was, i))
                ;
            return;
        }
}

/* Parents of `generation` that each name a vector (lock held), their root
 * keys into j->parent_keys: one lookup a parent, spread over the pool. */
static floe_status check_parents(tree *t, uint64_t generation, fold_job *j, size_t n, floe_errinfo *err)
{
    floe_status st = tree_parents_generation(t->spec.name, generation, t->generation, err);
    if (st != FLOE_OK)
        return st;
    parent_lookup pl = {.roots = t->roots, .parents = j->parents, .keys = j->parent_keys, .n = n};
    atomic_init(&pl.missing, n);
    floe_pool_run(t->pool, (n + CHUNK - 1) / CHUNK, parent_keys_chunk, &pl);
    const size_t missing = (size_t)atomic_load(&pl.missing);
    if (missing < n)
        return tree_parent_missing(t->spec.name, missing, j->parents[missing], err);
    return FLOE_OK;
}

/* The whole vectors of a delta batch's states (parents checked, lock held):
 * a growth renames the parents, and a grown table looks the states up again. */
static floe_status unfold_states(tree *t, const fold_job *j, size_t n, uint32_t **out, floe_errinfo *err)
{
    const size_t W = t->g.words;
    uint32_t *v = floe_malloc((n ? n : 1) * W * sizeof *v);
    if (!v)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory for a batch of %zu states", n);
    for (size_t i = 0; i < n; i++) {
        if (!unfold_key(t, j->parent_keys[i], v + i * W)) {
            free(v);
            return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "table %s is damaged: id %llu leads to a missing node",
                                    t->spec.name, (unsigned long long)j->parents[i]);
        }
    }
    tree_apply_changes(v, (uint32_t)W, j->counts, j->changes, n);
    *out = v;
    return FLOE_OK;
}

unsigned tree_growths_possible(const floe_spec *spec, uint64_t nodes, uint64_t node_slots, uint64_t roots,
                               uint64_t root_slots, size_t n)
{
    const double per = tree_most_nodes_a_vector(spec);
    const double node_fill = spec->max_fill < TREE_NODE_FILL ? spec->max_fill : TREE_NODE_FILL;
    unsigned what = 0;
    if ((double)nodes + per * (double)n > node_fill * (double)node_slots)
        what |= TREE_GROW_NODES;
    if ((double)roots + (double)n > spec->max_fill * (double)root_slots)
        what |= TREE_GROW_ROOTS;
    return what;
}

/* maxmemory (floe_alloc_set_budget): a growing table's insert of n vectors
 * that could need its next growth (tree_growths_possible), where the budget
 * would not allow that growth's arrays, is refused whole before anything is
 * stored, as iceberg.c refuses a SET's or MAP's: a growth that failed in
 * the middle of a batch left some of its vectors in. */
static bool growth_out_of_budget(tree *t, size_t n, floe_errinfo *err)
{
    if (!t->spec.grow)
        return false;
    pthread_rwlock_rdlock(&t->lock);
    const unsigned what = tree_growths_possible(&t->spec, atomic_load(&t->nodes_used), t->g.node_slots,
                                                iceberg_used_slots(t->roots), iceberg_total_slots(t->roots), n);
    tree_sizing z;
    floe_errinfo ignored;
    /* as grow_locked would size it before the batch; a table that cannot grow further answers FULL instead */
    const bool grows = what && size_growth(t, what, 0, &z, &ignored) == FLOE_OK;
    pthread_rwlock_unlock(&t->lock);
    return grows && floe_alloc_growth_refused(t->spec.name, n, "vectors",
                                              (what & TREE_GROW_NODES ? z.node_bytes : 0) + z.root_bytes, err);
}

/* Find-or-put of n states (j: whole vectors, or parents of `generation`
 * with their changes).  A table that grows is grown before the batch when
 * a table of it is past max_fill, and after it when states came back FULL,
 * once for all of them (tree_size_for), which are then put again (in
 * order, so first occurrences stay first) until none is left; the ids of a
 * batch that saw its table grow are looked up again.  A delta batch is
 * taken whole (unfolded from its parents) before any growth renames them.
 * Under maxmemory, a batch that could need a growth the budget does not
 * allow is refused before it runs. */
static floe_status insert_states(tree *t, fold_job j, uint64_t generation, size_t n, uint8_t *results, uint64_t *ids,
                                 floe_answer_counts *counts, floe_errinfo *err)
{
    const size_t W = t->spec.words; /* the spec's: a growth writes t->g under the lock, which this does not hold */
    const bool grow = t->spec.grow;
    uint32_t *whole = NULL, *retry = NULL, *where = NULL;
    uint8_t *rres = NULL;
    floe_status st = FLOE_OK;
    floe_errinfo ignored;

    pthread_rwlock_rdlock(&t->lock);
    unsigned over = grow ? over_fill(t) : 0;
    if (over && j.parents) {
        st = check_parents(t, generation, &j, n, err);
        if (st == FLOE_OK)
            st = unfold_states(t, &j, n, &whole, err);
        j = (fold_job){.vectors = whole};
    }
    pthread_rwlock_unlock(&t->lock);
    if (st != FLOE_OK)
        goto out;
    if (over) {
        pthread_rwlock_wrlock(&t->lock);
        over = over_fill(t); /* another batch may have grown it */
        if (over)
            grow_locked(t, over, 0, &ignored); /* on failure the table stays as it is: FULL answers decide */
        pthread_rwlock_unlock(&t->lock);
    }
    if (growth_out_of_budget(t, n, err)) {
        st = FLOE_ERR_NO_MEMORY;
        goto out;
    }

    pthread_rwlock_rdlock(&t->lock);
    unsigned full_in = 0;
    if (j.parents)
        st = check_parents(t, generation, &j, n, err);
    if (st == FLOE_OK)
        st = run_states(t, j, n, 1, results, ids, NULL, &full_in, err);
    uint64_t gen = t->generation;
    if (st == FLOE_OK && full_in && grow && j.parents) {
        st = unfold_states(t, &j, n, &whole, err);
        j = (fold_job){.vectors = whole};
    }
    pthread_rwlock_unlock(&t->lock);

    bool renamed = false; /* the table grew after the batch's first ids */
    if (st == FLOE_OK && full_in && grow) {
        retry = floe_malloc(n * W * sizeof *retry);
        where = floe_malloc(n * sizeof *where);
        rres = floe_malloc(n);
        if (!retry || !where || !rres)
            st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory for a batch of %zu vectors", n);
    }
    while (st == FLOE_OK && full_in && grow) {
        size_t nr = 0;
        for (size_t i = 0; i < n; i++)
            if (results[i] == FLOE_FULL) {
                memcpy(retry + nr * W, j.vectors + i * W, W * sizeof *retry);
                where[nr++] = (uint32_t)i;
            }
        pthread_rwlock_wrlock(&t->lock);
        floe_errinfo gerr;
        /* grown once for the nr to put again, not a step at a time */
        floe_status gst = t->generation == gen ? grow_locked(t, full_in, nr, &gerr) : FLOE_OK;
        pthread_rwlock_unlock(&t->lock);
        if (gst == FLOE_ERR_TOO_LARGE)
            break; /* as large as a TREE gets: FULL stands */
        if (gst != FLOE_OK) {
            /* out of memory: the request fails (some of its vectors may be stored), instead of FULL
             * answers that a growing table promises never to give */
            st = floe_errinfo_set(err, gst == FLOE_ERR_NO_MEMORY ? gst : FLOE_ERR_FULL,
                                  "table %s is full and could not grow: %s", t->spec.name, gerr.msg);
            break;
        }
        renamed = true;
        pthread_rwlock_rdlock(&t->lock);
        st = run_states(t, (fold_job){.vectors = retry}, nr, 1, rres, NULL, NULL, &full_in, err);
        gen = t->generation;
        pthread_rwlock_unlock(&t->lock);
        for (size_t k = 0; st == FLOE_OK && k < nr; k++)
            results[where[k]] = rres[k];
    }
    if (st == FLOE_OK && renamed && ids) {
        uint8_t *found = rres; /* free now */
        pthread_rwlock_rdlock(&t->lock);
        st = run_states(t, j, n, 0, found, ids, NULL, NULL, err);
        pthread_rwlock_unlock(&t->lock);
    }
    if (st == FLOE_OK)
        floe_answer_counts_tally(counts, results, n);
out:
    free(whole);
    free(retry);
    free(where);
    free(rres);
    return st;
}

floe_status tree_insert(tree *t, const uint32_t *vectors, size_t n, uint8_t *results, uint64_t *ids,
                        floe_answer_counts *counts, floe_errinfo *err)
{
    return insert_states(t, (fold_job){.vectors = vectors}, 0, n, results, ids, counts, err);
}

floe_status tree_find(tree *t, const uint32_t *vectors, size_t n, uint8_t *results, uint64_t *ids,
                      floe_answer_counts *counts, floe_errinfo *err)
{
    pthread_rwlock_rdlock(&t->lock);
    floe_status st = run_states(t, (fold_job){.vectors = vectors}, n, 0, results, ids, counts, NULL, err);
    pthread_rwlock_unlock(&t->lock);
    return st;
}

floe_status tree_insert_delta(tree *t, uint64_t generation, const uint64_t *parents, const uint8_t *counts,
                              const uint8_t *changes, size_t n, uint8_t *results, uint64_t *ids,
                              floe_answer_counts *counts_out, floe_errinfo *err)
{
    /* first (n + 1), then the parents' root keys (n) */
    uint64_t *first = floe_malloc((2 * n + 1) * sizeof *first);
    if (!first)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory for a batch of %zu states", n);
    first[0] = 0;
    for (size_t i = 0; i < n; i++) {
        first[i + 1] = first[i] + counts[i];
        for (uint64_t c = first[i]; c < first[i + 1]; c++)
            assert(floe_change_word(changes + c * FLOE_CHANGE_BYTES) < t->spec.words); /* the door's */
    }
    uint64_t *keys = first + n + 1;
    fold_job j = {.parents = parents, .parent_keys = keys, .first = first, .counts = counts, .changes = changes};
    floe_status st = insert_states(t, j, generation, n, results, ids, counts_out, err);
    free(first);
    return st;
}

floe_status tree_get(tree *t, const uint64_t *ids, size_t n, uint8_t *results, uint32_t *vectors,
                     floe_answer_counts *counts, floe_errinfo *err)
{
    assert(n == 0 || (ids && results && vectors)); /* the door's (floe_batch_check) */
    const size_t W = t->spec.words;                /* before the lock: the spec's, which a growth leaves */
    pthread_rwlock_rdlock(&t->lock);
    for (size_t i = 0; i < n; i++) {
        int r = get_one(t, ids[i], vectors + i * W);
        if (r < 0) {
            pthread_rwlock_unlock(&t->lock);
            return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "table %s is damaged: id %llu leads to a missing node",
                                    t->spec.name, (unsigned long long)ids[i]);
        }
        results[i] = r ? FLOE_PRESENT : FLOE_ABSENT;
        if (!r)
            memset(vectors + i * W, 0, W * sizeof *vectors);
    }
    pthread_rwlock_unlock(&t->lock);
    floe_answer_counts_tally(counts, results, n);
    return FLOE_OK;
}

/* tree_scan with the lock held (a growth copies its table that way). */
static floe_status scan_locked(tree *t, const floe_scan_pos *from, size_t limit, uint64_t *ids, uint32_t *vectors,
                               size_t *n, floe_scan_pos *next, int *done, floe_errinfo *err)
{
    const uint64_t total = iceberg_total_slots(t->roots);
    uint64_t pos = from ? from->position : 0;
    assert(limit == 0 || ids); /* the door's (floe_batch_check) */
    if (from && from->generation != t->generation)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "scan cursor is from generation %llu, the table is at %llu: start the scan again",
                                (unsigned long long)from->generation, (unsigned long long)t->generation);
    if (pos > total)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "scan cursor position %llu is past the table's %llu root slots",
                                (unsigned long long)pos, (unsigned long long)total);
    const size_t W = t->g.words;
    uint32_t scratch[FLOE_TREE_MAX_WORDS];
    size_t got = 0;
    for (uint64_t budget = SCAN_MAX_SLOTS; pos < total && got < limit && budget > 0; pos++, budget--) {
        int r = get_one(t, pos, vectors ? vectors + got * W : scratch);
        if (r < 0)
            return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "table %s is damaged: id %llu leads to a missing node",
                                    t->spec.name, (unsigned long long)pos);
        if (r)
            ids[got++] = pos;
    }
    *n = got;
    next->position = pos;
    next->generation = t->generation;
    *done = pos >= total;
    return FLOE_OK;
}

floe_status tree_scan(tree *t, const floe_scan_pos *from, size_t limit, uint64_t *ids, uint32_t *vectors, size_t *n,
                      floe_scan_pos *next, int *done, floe_errinfo *err)
{
    pthread_rwlock_rdlock(&t->lock);
    floe_status st = scan_locked(t, from, limit, ids, vectors, n, next, done, err);
    pthread_rwlock_unlock(&t->lock);
    return st;
}

/* ---- life cycle -------------------------------------------------------------------------- */

/* An empty table of spec laid out as z (NULL: tree_size's layout of spec). */
static floe_status create_sized(const floe_spec *spec, const tree_sizing *z, floe_pool *pool, tree **out,
                                floe_errinfo *err)
{
    floe_status st = floe_spec_validate(spec, err);
    if (st != FLOE_OK)
        return st;
    if (spec->kind != FLOE_KIND_TREE)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "not a TREE spec");
    tree *t = floe_calloc(1, sizeof *t);
    if (!t)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    t->spec = *spec;
    while (t->spec.seed == 0)
        if (getrandom(&t->spec.seed, sizeof t->spec.seed, 0) != sizeof t->spec.seed)
            t->spec.seed = 0xBB67AE8584CAA73Bull;
    t->pool = pool;
    if (z) {
        /* the root spec from t's seed, then z's root size again */
        size_roots(&t->spec, z->node_bits, z->node_three, z->node_tag_bits, &t->z);
        t->z.root_addr_bits = z->root_addr_bits;
        t->z.root_three = z->root_three;
        t->z.root_bytes = z->root_bytes;
    } else if ((st = tree_size(&t->spec, &t->z, err)) != FLOE_OK) {
        free(t);
        return st;
    }
    tree_geometry_for(&t->spec, &t->z, &t->g);
    t->nodes = iceberg_map_zeroed(t->z.node_bytes);
    if (!t->nodes) {
        unsigned long long bytes = t->z.node_bytes;
        const bool budget = floe_alloc_over_budget();
        free(t);
        if (budget)
            return floe_errinfo_set(err, FLOE_ERR_NO_MEMORY,
                                    "%llu bytes for the node table would pass floed's maxmemory", bytes);
        /* as for SET and MAP: no room for the table is ERR_FULL */
        return floe_errinfo_set(err, FLOE_ERR_FULL, "cannot allocate %llu bytes for the node table", bytes);
    }
    st = iceberg_create_sized(&t->z.root_spec, t->z.root_addr_bits, t->z.root_three, pool, &t->roots, err);
    if (st != FLOE_OK) {
        munmap((void *)t->nodes, t->z.node_bytes);
        free(t);
        return st;
    }
    pthread_rwlock_init(&t->lock, NULL);
    *out = t;
    return FLOE_OK;
}

floe_status tree_create(const floe_spec *spec, floe_pool *pool, tree **out, floe_errinfo *err)
{
    return create_sized(spec, NULL, pool, out, err);
}

floe_status tree_create_sized(const floe_spec *spec, const tree_sizing *z, floe_pool *pool, tree **out,
                              floe_errinfo *err)
{
    return create_sized(spec, z, pool, out, err);
}

void tree_destroy(tree *t)
{
    if (!t)
        return;
    iceberg_destroy(t->roots);
    munmap((void *)t->nodes, t->z.node_bytes);
    pthread_rwlock_destroy(&t->lock);
    free(t);
}

const tree_sizing *tree_sizes(const tree *t)
{
    return &t->z;
}

/* Vectors a step of the rebuild copies: their ids, vectors and answers stay a few MB. */
#define GROW_STEP 65536u

/* Copies every vector of t into n (empty, larger), in root-slot order;
 * FULL with *full_in saying which of n's tables had no room. */
static floe_status copy_vectors(tree *t, tree *n, unsigned *full_in, floe_errinfo *err)
{
    const size_t W = t->g.words;
    uint64_t *ids = floe_malloc(GROW_STEP * sizeof *ids);
    uint32_t *vecs = floe_malloc((size_t)GROW_STEP * W * sizeof *vecs);
    uint8_t *res = floe_malloc(GROW_STEP);
    floe_status st = ids && vecs && res ? FLOE_OK : floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    floe_scan_pos pos = {0, t->generation}, next;
    *full_in = 0;
    for (int done = 0; st == FLOE_OK && !done; pos = next) {
        size_t got;
        st = scan_locked(t, &pos, GROW_STEP, ids, vecs, &got, &next, &done, err);
        floe_answer_counts c = {0};
        if (st == FLOE_OK && got)
            st = run_states(n, (fold_job){.vectors = vecs}, got, 1, res, NULL, &c, full_in, err);
        if (st == FLOE_OK && c.inserted != got)
            st = floe_errinfo_set(err, FLOE_ERR_FULL, "table %s: its vectors do not fit in the grown tables",
                                  t->spec.name);
    }
    free(ids);
    free(vecs);
    free(res);
    return st;
}

/* The sizes a growth of `what` takes t to (tree_size_for): a step, the
 * nodes to the look ahead's guess, and room for `coming` more vectors at
 * the nodes a vector so far, each a new root.  The caller holds the lock. */
static floe_status size_growth(tree *t, unsigned what, size_t coming, tree_sizing *z, floe_errinfo *err)
{
    const uint64_t nodes = atomic_load(&t->nodes_used), roots = iceberg_used_slots(t->roots);
    const double per = roots ? (double)nodes / (double)roots : 0.0;
    return tree_size_for(&t->spec, &t->z, what, tree_nodes_ahead(&t->spec, nodes, roots, 0.0),
                         (double)nodes + per * (double)coming, (double)(roots + coming), z, err);
}

/* A root table a step larger, or more for `coming` vectors: the nodes stay,
 * the roots move (new ids). */
static floe_status grow_roots(tree *t, size_t coming, floe_errinfo *err)
{
    tree_sizing z;
    floe_status st = size_growth(t, TREE_GROW_ROOTS, coming, &z, err);
    if (st == FLOE_OK)
        st = iceberg_rebuild(t->roots, z.root_addr_bits, z.root_three, err);
    if (st != FLOE_OK)
        return st;
    iceberg_image im;
    iceberg_get_image(t->roots, &im); /* the rebuild may have had to go larger still */
    t->z.root_addr_bits = im.addr_bits;
    t->z.root_three = im.three;
    t->z.root_bytes = root_bytes_for(t->z.root_spec.key_bits, im.addr_bits, im.three);
    return FLOE_OK;
}

/* A node table a step larger or more (and the root table too with roots,
 * or where `coming` vectors need it; size_growth): every vector is put
 * again, in root-slot order, into new tables that replace t's.  Where the
 * new ones cannot hold them all, larger ones are tried. */
static floe_status grow_nodes(tree *t, bool roots, size_t coming, floe_errinfo *err)
{
    tree_sizing z;
    floe_status st = size_growth(t, TREE_GROW_NODES | (roots ? TREE_GROW_ROOTS : 0), coming, &z, err);
    while (st == FLOE_OK) {
        tree *n;
        st = create_sized(&t->spec, &z, t->pool, &n, err);
        if (st != FLOE_OK)
            return st;
        unsigned full_in;
        st = copy_vectors(t, n, &full_in, err);
        if (st == FLOE_ERR_FULL) {
            tree_destroy(n);
            st = tree_size_grown(&t->spec, &z, full_in, 0.0, &z, err);
            continue;
        }
        if (st != FLOE_OK) {
            tree_destroy(n);
            return st;
        }
        /* n's arrays become t's, and t's old ones go with n */
        tree old = {.z = t->z, .nodes = t->nodes, .roots = t->roots};
        t->g = n->g;
        t->z = n->z;
        t->nodes = n->nodes;
        t->roots = n->roots;
        atomic_store(&t->nodes_used, atomic_load(&n->nodes_used));
        atomic_store(&t->orphans, atomic_load(&n->orphans));
        n->z = old.z;
        n->nodes = old.nodes;
        n->roots = old.roots;
        tree_destroy(n);
        return FLOE_OK;
    }
    return st;
}

/* Grows what `what` names, with room for `coming` vectors more (0: a
 * step); the caller holds the write lock. */
static floe_status grow_locked(tree *t, unsigned what, size_t coming, floe_errinfo *err)
{
    floe_status st = (what & TREE_GROW_NODES)   ? grow_nodes(t, (what & TREE_GROW_ROOTS) != 0, coming, err)
                     : (what & TREE_GROW_ROOTS) ? grow_roots(t, coming, err)
                                                : FLOE_OK;
    if (st == FLOE_OK && what)
        t->generation++;
    return st;
}

floe_status tree_grow(tree *t, unsigned what, floe_errinfo *err)
{
    pthread_rwlock_wrlock(&t->lock);
    floe_status st = grow_locked(t, what, 0, err);
    pthread_rwlock_unlock(&t->lock);
    return st;
}

uint64_t tree_generation(const tree *t)
{
    return t->generation;
}

void tree_set_generation(tree *t, uint64_t generation)
{
    t->generation = generation;
}

const floe_spec *tree_spec(const tree *t)
{
    return &t->spec;
}

const floe_tree_geometry *tree_geometry(const tree *t)
{
    return &t->g;
}

uint64_t *tree_nodes(tree *t)
{
    return (uint64_t *)t->nodes;
}

iceberg *tree_roots(tree *t)
{
    return t->roots;
}

void tree_counters(tree *t, uint64_t *nodes, uint64_t *orphans)
{
    *nodes = atomic_load(&t->nodes_used);
    *orphans = atomic_load(&t->orphans);
}

void tree_set_counters(tree *t, uint64_t nodes, uint64_t orphans)
{
    atomic_store(&t->nodes_used, nodes);
    atomic_store(&t->orphans, orphans);
}

/* ---- stats ---------------------------------------------------------------------------------- */

void tree_fill_stats(floe_table_stats *s, const floe_tree_geometry *g, uint64_t nodes, uint64_t orphans,
                     uint64_t node_bytes)
{
    const uint64_t vectors = s->keys;
    uint64_t root_used_bytes = 0;
    for (int l = 0; l < FLOE_LEVELS; l++)
        root_used_bytes += s->level[l].used * s->level[l].row_bits / 8;
    s->nodes = nodes;
    s->node_slots = g->node_slots;
    s->node_fill = (double)nodes / (double)g->node_slots;
    s->orphan_nodes = orphans;
    s->memory_bytes += node_bytes;
    s->used_bytes = nodes * 8 + root_used_bytes;
    s->bytes_per_key = vectors ? (double)s->memory_bytes / (double)vectors : 0.0;
    s->compression = vectors ? (double)(nodes * 8 + root_used_bytes) / ((double)vectors * g->words * 4.0) : 0.0;
}

void tree_stats(tree *t, floe_table_stats *s)
{
    pthread_rwlock_rdlock(&t->lock);
    iceberg_stats(t->roots, s);
    s->spec = t->spec;
    s->generation = t->generation;
    tree_fill_stats(s, &t->g, atomic_load(&t->nodes_used), atomic_load(&t->orphans), t->z.node_bytes);
    pthread_rwlock_unlock(&t->lock);
}

/* ---- files ------------------------------------------------------------------------------------ */

/* The file header and sections of t, pointing into its arrays. */
static void file_view(tree *t, floe_file_header *h, const void **sections)
{
    iceberg_image im;
    iceberg_get_image(t->roots, &im);
    memset(h, 0, sizeof *h);
    h->spec = t->spec;
    h->layout_version = floe_tree_layout_version(t->g.tag_bits, im.first_fill, im.three);
    h->addr_bits = im.addr_bits;
    h->three = im.three;
    for (int l = 0; l < FLOE_LEVELS; l++) {
        h->used[l] = im.used[l];
        h->keys += im.used[l];
    }
    h->nodes = atomic_load(&t->nodes_used);
    h->orphans = atomic_load(&t->orphans);
    h->generation = t->generation;
    h->nsections = TREE_SECTIONS;
    for (int l = 0; l <= FLOE_LEVELS; l++) {
        h->section_bytes[l] = im.bytes[l];
        sections[l] = im.sections[l];
    }
    h->section_bytes[FLOE_LEVELS + 1] = t->z.node_bytes;
    sections[FLOE_LEVELS + 1] = (const void *)t->nodes;
}

floe_status tree_save(tree *t, const char *path, floe_errinfo *err)
{
    floe_file_header h;
    const void *sections[FLOE_FILE_MAX_SECTIONS];
    pthread_rwlock_rdlock(&t->lock);
    file_view(t, &h, sections);
    floe_status st = floe_file_save(path, &h, sections, err);
    pthread_rwlock_unlock(&t->lock);
    return st;
}

floe_status tree_copy_image(tree *t, floe_file_image **out, floe_errinfo *err)
{
    floe_file_header h;
    const void *sections[FLOE_FILE_MAX_SECTIONS];
    pthread_rwlock_rdlock(&t->lock);
    file_view(t, &h, sections);
    *out = floe_file_image_copy(&h, sections);
    pthread_rwlock_unlock(&t->lock);
    if (!*out)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory copying table %s for a snapshot", t->spec.name);
    return FLOE_OK;
}

static void release_table(floe_file_image *im)
{
    tree_destroy(im->owner);
}

floe_status tree_image_of(tree *t, floe_file_image **out, floe_errinfo *err)
{
    floe_file_image *im = floe_calloc(1, sizeof *im);
    if (!im)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    file_view(t, &im->h, im->sections);
    im->owner = t;
    im->release = release_table;
    *out = im;
    return FLOE_OK;
}

/* Every node slot holds EMPTY or a valid probe tag, and the count matches. */
static floe_status verify_nodes(tree *t, uint64_t want, const char *path, floe_errinfo *err)
{
    uint64_t used = 0;
    const uint64_t *nodes = (const uint64_t *)t->nodes;
    for (uint64_t i = 0; i < t->g.node_slots; i++) {
        if (nodes[i] == FLOE_NODE_EMPTY)
            continue;
        if (!floe_node_valid(&t->g, nodes[i]))
            return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is damaged: node slot %llu holds no valid node", path,
                                    (unsigned long long)i);
        used++;
    }
    if (used != want)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is damaged: %llu nodes stored, header says %llu", path,
                                (unsigned long long)used, (unsigned long long)want);
    return FLOE_OK;
}

floe_status tree_load(const char *path, uint64_t offset, floe_pool *pool, tree **out, floe_errinfo *err)
{
    floe_file_header h;
    floe_file_reader *r;
    tree *t = NULL;
    floe_status st = floe_file_open(path, offset, &h, &r, err);
    if (st != FLOE_OK)
        return st;
    floe_errinfo spec_err;
    if (h.spec.kind != FLOE_KIND_TREE) {
        st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%s holds a %s table, not a TREE", path,
                              floe_kind_name(h.spec.kind));
        goto out;
    }
    if (floe_spec_validate(&h.spec, &spec_err) != FLOE_OK || h.spec.seed == 0) {
        st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%s holds an invalid table spec: %s", path,
                              h.spec.seed == 0 ? "seed 0" : spec_err.msg);
        goto out;
    }
    /* The layout: the node table's size is its section's, the root table's
     * the header's; at least the spec's own (more where the table grew).
     * All of it agrees before memory is mapped (and faulted in): a damaged
     * header would ask for any size. */
    tree_sizing z, least;
    uint64_t in_file = 0;
    for (uint32_t i = 0; i < h.nsections; i++)
        in_file += h.section_bytes[i];
    const uint64_t node_bytes = h.nsections == TREE_SECTIONS ? h.section_bytes[FLOE_LEVELS + 1] : 0;
    uint32_t node_bits = 0;
    while (node_bits < 63 && ((uint64_t)8 << node_bits) < node_bytes)
        node_bits++;
    const uint32_t three = node_bits > 1 && ((uint64_t)8 << node_bits) != node_bytes; /* 1.5 * 2^(node_bits - 1)? */
    node_bits -= three;
    /* at least the spec's own node slots, as tree_size would give in the file's node layout */
    const tree_sizing sizes = {.node_bits = node_bits,
                               .node_three = three,
                               .node_tag_bits = floe_node_tag_bits_of(h.layout_version),
                               .root_addr_bits = h.addr_bits,
                               .root_three = h.three};
    if (h.nsections != TREE_SECTIONS || tree_size(&h.spec, &least, &spec_err) != FLOE_OK ||
        tree_size_bits(&h.spec, &sizes, &z, &spec_err) != FLOE_OK ||
        z.node_bytes != node_bytes || z.node_bytes + z.root_bytes != in_file ||
        (z.node_tag_bits == least.node_tag_bits && z.node_bytes < least.node_bytes) ||
        z.root_addr_bits < least.root_addr_bits) {
        st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is damaged: section sizes do not match the table's geometry",
                              path);
        goto out;
    }
    st = create_sized(&h.spec, &z, pool, &t, err);
    if (st != FLOE_OK)
        goto out;
    iceberg_set_first_fill(t->roots, floe_layout_first_fill(h.layout_version));
    iceberg_image im;
    iceberg_get_image(t->roots, &im);
    bool sizes_ok = h.nsections == TREE_SECTIONS && h.addr_bits == im.addr_bits && h.three == im.three &&
                    h.section_bytes[FLOE_LEVELS + 1] == t->z.node_bytes;
    for (int l = 0; l <= FLOE_LEVELS; l++)
        sizes_ok = sizes_ok && h.section_bytes[l] == im.bytes[l];
    if (!sizes_ok) {
        st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is damaged: section sizes do not match the table's geometry",
                              path);
        goto out;
    }
    void *sections[TREE_SECTIONS];
    for (int l = 0; l <= FLOE_LEVELS; l++)
        sections[l] = im.sections[l];
    sections[FLOE_LEVELS + 1] = (void *)t->nodes;
    st = floe_file_read(r, sections, err);
    if (st == FLOE_OK)
        st = verify_nodes(t, h.nodes, path, err);
    if (st == FLOE_OK) /* the root table's rows and counts, as a SET's (a growth relies on them) */
        st = iceberg_verify_loaded(t->roots, &h, path, err);
    if (st == FLOE_OK && h.tombstones) /* a growth takes every occupied root slot for a vector */
        st = floe_errinfo_set(err, FLOE_ERR_INVALID,
                              "%s is damaged: its root table holds %llu erased rows, and a TREE never erases", path,
                              (unsigned long long)h.tombstones);
    if (st != FLOE_OK)
        goto out;
    iceberg_set_counters(t->roots, h.used, 0, 0);
    tree_set_counters(t, h.nodes, h.orphans);
    t->generation = h.generation;
    *out = t;
    t = NULL;
out:
    tree_destroy(t);
    floe_file_close(r);
    return st;
}
