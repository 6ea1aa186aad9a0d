/*
 * cuckoo.c - the CPU engine of STATIC tables (see cuckoo.h).
 */
#include "cuckoo.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "alloc.h"
#include "dedup.h"
#include "iceberg.h"
#include "tablefile.h"

/* Keys a task of a build that runs on a pool places. */
#define BUILD_CHUNK 65536u
/* Keys a task of a find. */
#define FIND_CHUNK 16384u
/* Keys between the prefetch of a key's first bucket and its lookup: enough
 * cache misses in flight to cover the memory's latency. */
#define PREFETCH_AHEAD 16u

struct cuckoo {
    floe_spec spec; /* a STATIC table's (cuckoo_freeze, cuckoo_load); key_bits, value_bytes and seed else */
    floe_cuckoo_geometry g;
    uint64_t *words;
    size_t bytes;
    unsigned char *values; /* value_bytes a slot, by slot (NULL without values) */
    size_t values_bytes;
    uint64_t keys, generation;
};

/* Key's slot from its choices `from` on (its bucket b and row of that
 * choice given): the buckets in turn, until one holds it or has room;
 * FLOE_NO_ID if none holds it. */
static uint64_t find_from(const cuckoo *t, uint64_t key, uint32_t from, uint64_t b, uint64_t row)
{
    const floe_level *lv = &t->g.level;
    for (uint32_t c = from;;) {
        const uint64_t *w = t->words + b * lv->words;
        const int i = floe_bucket_find(w, lv, row);
        if (i >= 0)
            return b * lv->slots + (uint64_t)i;
        if (floe_bucket_first_empty(w, lv) < lv->slots || ++c == FLOE_CUCKOO_CHOICES)
            return FLOE_NO_ID; /* buckets fill in order: no later choice holds it */
        floe_cuckoo_split(&t->g, c, key, &b, &row);
    }
}

static bool too_wide(const cuckoo *t, uint64_t key)
{
    return t->g.key_bits < 64 && (key >> t->g.key_bits) != 0;
}

static uint64_t find_one(const cuckoo *t, uint64_t key)
{
    if (too_wide(t, key))
        return FLOE_NO_ID;
    uint64_t b, row;
    floe_cuckoo_split(&t->g, 0, key, &b, &row);
    return find_from(t, key, 0, b, row);
}

/* A snapshot of bucket b's words, read while other builders may write them. */
static void snapshot(const cuckoo *t, uint64_t b, uint64_t *snap)
{
    _Atomic uint64_t *w = (_Atomic uint64_t *)(t->words + b * t->g.level.words);
    for (uint32_t k = 0; k < t->g.level.words; k++)
        snap[k] = atomic_load_explicit(&w[k], memory_order_relaxed);
}

/* Of a full bucket b (its snapshot), the row whose key to move on
 * (cuckoo_layout.h, FLOE_CUCKOO_LOOKAHEAD): of up to that many rows from a
 * random one on, the first of a key at its choice 0 whose bucket of choice
 * 1 has room, else the random one. */
static uint32_t pick_victim(const cuckoo *t, uint64_t b, const uint64_t *snap, uint64_t *rng)
{
    const floe_level *lv = &t->g.level;
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    const uint32_t start = (uint32_t)(*rng % lv->slots);
    for (uint32_t j = 0; j < FLOE_CUCKOO_LOOKAHEAD; j++) {
        const uint32_t s = (start + j) % lv->slots;
        const uint64_t row = floe_row_get(snap, lv->row_bits, s);
        if (floe_cuckoo_choice(row) != 0)
            continue;
        uint64_t nb, nrow, other[FLOE_CUCKOO_SLOTS];
        floe_cuckoo_split(&t->g, 1, floe_cuckoo_join(&t->g, b, row), &nb, &nrow);
        snapshot(t, nb, other);
        if (floe_bucket_first_empty(other, lv) < lv->slots)
            return s;
    }
    return start;
}

/* Places key (not stored yet) from its choice c on: into its bucket's first
 * empty row, or where the bucket is full (first_only: left there, false)
 * into the row pick_victim names, the key that held it carried on to its
 * next choice (the eviction of cuckoo hashing); false if the chain of moves
 * ran out, one key then left out of the table.  Each row goes in by a
 * compare-and-swap of its word, so that builders may place side by side;
 * buckets only fill, so a key that saw its bucket of choice c full goes on
 * rightly to c + 1. */
static bool place(cuckoo *t, uint64_t key, uint32_t c, bool first_only, uint64_t *rng)
{
    const floe_level *lv = &t->g.level;
    for (uint32_t moves = 0; moves < FLOE_CUCKOO_PLACE_MOVES; moves++) {
        uint64_t b, row, snap[FLOE_CUCKOO_SLOTS]; /* a bucket is at most 16 words (rows of 64 bits) */
        floe_cuckoo_split(&t->g, c, key, &b, &row);
        _Atomic uint64_t *w = (_Atomic uint64_t *)(t->words + b * lv->words);
        for (;;) {
            snapshot(t, b, snap);
            uint32_t i = floe_bucket_first_empty(snap, lv);
            const bool full = i == lv->slots;
            if (full && first_only)
                return false;
            if (full)
                i = pick_victim(t, b, snap, rng);
            const uint32_t wi = floe_row_word(lv->row_bits, i);
            const uint64_t old = floe_row_get(snap, lv->row_bits, i);
            if (!atomic_compare_exchange_weak_explicit(&w[wi], &snap[wi], floe_row_put(snap[wi], lv->row_bits, i, row),
                                                       memory_order_relaxed, memory_order_relaxed))
                continue; /* another builder changed the word: look again */
            if (!full)
                return true;
            key = floe_cuckoo_join(&t->g, b, old);
            c = (floe_cuckoo_choice(old) + 1) % FLOE_CUCKOO_CHOICES;
            break;
        }
    }
    return false;
}

typedef struct build_job {
    cuckoo *t;
    const uint64_t *keys;
    const unsigned char *values;
    const uint32_t *rep; /* first occurrences (floe_dedup): the keys placed, the values kept; NULL: on one thread */
    uint64_t *later;     /* a bit a key: left by the first pass for the second (a chunk's words its own) */
    size_t n;
    uint64_t seed, stored; /* stored: on one thread, the keys placed */
    int pass;
    _Atomic bool failed; /* a chain of moves ran out: a key left out */
} build_job;

/* A chunk of the build's pass (cuckoo_layout.h): the first places each
 * key's first occurrence at its choice 0 where there is room and marks the
 * others; the second places those from their choice 1 on, by moves.  On one
 * thread (no rep) a key's repeat is known by a find. */
static void build_chunk(void *arg, size_t task)
{
    build_job *j = arg;
    const size_t from = task * BUILD_CHUNK, to = from + BUILD_CHUNK < j->n ? from + BUILD_CHUNK : j->n;
    uint64_t rng = (j->seed ^ (task * 0x9E3779B97F4A7C15ull)) | 1;
    for (size_t i = from; i < to && !atomic_load_explicit(&j->failed, memory_order_relaxed); i++) {
        const uint64_t key = j->keys[i], bit = 1ull << (i % 64);
        if (j->pass == 0) {
            if (j->rep ? j->rep[i] != i : find_one(j->t, key) != FLOE_NO_ID)
                continue; /* a repeat */
            if (!place(j->t, key, 0, true, &rng))
                j->later[i / 64] |= bit;
            else if (!j->rep)
                j->stored++;
        } else if ((j->later[i / 64] & bit) && (j->rep || find_one(j->t, key) == FLOE_NO_ID)) {
            if (!place(j->t, key, 1, false, &rng))
                atomic_store(&j->failed, true);
            else if (!j->rep)
                j->stored++;
        }
    }
}

static void values_chunk(void *arg, size_t task)
{
    build_job *j = arg;
    const uint32_t vb = j->t->spec.value_bytes;
    const size_t from = task * BUILD_CHUNK, to = from + BUILD_CHUNK < j->n ? from + BUILD_CHUNK : j->n;
    for (size_t i = from; i < to; i++)
        if (j->rep[i] == i) /* its first occurrence's value: each slot written once */
            memcpy(j->t->values + find_one(j->t, j->keys[i]) * vb, j->values + i * vb, vb);
}

/* Each key's value into its slot, the first of a key given twice winning
 * (the last written): after every key is placed, since a placement moves
 * keys on. */
static void put_values(cuckoo *t, const uint64_t *keys, const void *values, size_t n)
{
    const uint32_t vb = t->spec.value_bytes;
    for (size_t i = n; i-- > 0;)
        memcpy(t->values + find_one(t, keys[i]) * vb, (const unsigned char *)values + i * vb, vb);
}

floe_status cuckoo_build(uint32_t key_bits, uint32_t value_bytes, uint64_t seed, double fill, const uint64_t *keys,
                         const void *values, size_t n, floe_pool *pool, cuckoo **out, floe_errinfo *err)
{
    *out = NULL;
    if (key_bits < 1 || key_bits > 64)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "key_bits must be 1..64, got %u", key_bits);
    if (value_bytes != 0 && value_bytes != 4 && value_bytes != 8)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "a static table's value_bytes is 0, 4 or 8, got %u",
                                value_bytes);
    if ((value_bytes == 0 && values) || (value_bytes != 0 && !values && n > 0))
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "values go with value_bytes 4 or 8, and only then");
    if (!(fill > 0.0 && fill <= FLOE_CUCKOO_FILL))
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "a static table's fill must be in (0, %.2f], got %g",
                                FLOE_CUCKOO_FILL, fill);
    for (size_t i = 0; key_bits < 64 && i < n; i++)
        if (keys[i] >> key_bits)
            return floe_errinfo_set(err, FLOE_ERR_INVALID, "key %zu (%llu) is wider than %u bits", i,
                                    (unsigned long long)keys[i], key_bits);
    /* the first size that holds n keys at `fill`, then larger ones while a build fails */
    uint32_t k = floe_cuckoo_first_step(key_bits, n, fill), hi_bits = 0, mult = 1;
    if (k >= FLOE_CUCKOO_SIZE_STEPS)
        return floe_errinfo_set(err, FLOE_ERR_FULL, "%zu keys of %u bits need a larger static table than there is", n,
                                key_bits);
    /* on a pool: the first occurrences, placed side by side */
    uint32_t *rep = NULL;
    size_t distinct = 0;
    if (pool && n > 0 && n < ((size_t)1 << 32)) {
        if (!(rep = floe_malloc(n * sizeof *rep)))
            return floe_errinfo_set(err, FLOE_ERR_NO_MEMORY, "cannot allocate %zu bytes to build a static table",
                                    n * sizeof *rep);
        floe_status st = floe_dedup(pool, keys, n, rep, &distinct, err);
        if (st != FLOE_OK) {
            free(rep);
            return st;
        }
    }
    static_assert(BUILD_CHUNK % 64 == 0, "a chunk's bits of later are whole words");
    build_job bj = {.keys = keys, .values = values, .rep = rep, .n = n, .seed = seed};
    const size_t tasks = (n + BUILD_CHUNK - 1) / BUILD_CHUNK;
    cuckoo *t = floe_calloc(1, sizeof *t);
    bj.later = floe_malloc((n / 64 + 1) * sizeof *bj.later);
    if (!t || !bj.later) {
        free(t);
        free(bj.later);
        free(rep);
        return floe_errinfo_set(err, FLOE_ERR_NO_MEMORY, "cannot allocate %zu bytes to build a static table",
                                (n / 64 + 1) * sizeof *bj.later);
    }
    bj.t = t;
    t->spec.key_bits = key_bits;
    t->spec.value_bytes = value_bytes;
    t->spec.seed = seed;
    for (uint32_t tried = 0; tried < FLOE_CUCKOO_SIZES_TRIED && k < FLOE_CUCKOO_SIZE_STEPS; k++) {
        if (!floe_cuckoo_size_step(key_bits, k, &hi_bits, &mult))
            continue;
        tried++;
        floe_cuckoo_geometry_init(&t->g, key_bits, hi_bits, mult, seed);
        t->bytes = t->g.buckets * t->g.level.words * 8;
        t->words = iceberg_map_zeroed(t->bytes);
        if (!t->words) {
            const bool budget = floe_alloc_over_budget();
            const size_t bytes = t->bytes;
            free(t);
            free(rep);
            free(bj.later);
            return floe_errinfo_set(err, budget ? FLOE_ERR_NO_MEMORY : FLOE_ERR_FULL,
                                    "cannot allocate %zu bytes for a static table of %zu keys%s", bytes, n,
                                    budget ? ": it would pass floed's maxmemory" : "");
        }
        memset(bj.later, 0, (n / 64 + 1) * sizeof *bj.later);
        atomic_store(&bj.failed, false);
        bj.stored = 0;
        for (bj.pass = 0; bj.pass < 2; bj.pass++) /* on the pool where the first occurrences are known */
            floe_pool_run(rep ? pool : NULL, tasks, build_chunk, &bj);
        if (!atomic_load(&bj.failed)) {
            t->keys = rep ? distinct : bj.stored;
            if (value_bytes) {
                t->values_bytes = floe_cuckoo_slots(&t->g) * value_bytes;
                if (!(t->values = floe_calloc(1, t->values_bytes))) {
                    const size_t bytes = t->values_bytes;
                    cuckoo_destroy(t);
                    free(rep);
                    free(bj.later);
                    return floe_errinfo_set(err, FLOE_ERR_NO_MEMORY,
                                            "cannot allocate %zu bytes for a static table's values", bytes);
                }
                if (rep)
                    floe_pool_run(pool, tasks, values_chunk, &bj);
                else
                    put_values(t, keys, values, n);
            }
            free(rep);
            free(bj.later);
            *out = t;
            return FLOE_OK;
        }
        munmap(t->words, t->bytes);
        t->words = NULL;
    }
    free(t);
    free(rep);
    free(bj.later);
    return floe_errinfo_set(err, FLOE_ERR_FULL, "no static table of up to %u sizes past the first holds these %zu keys",
                            FLOE_CUCKOO_SIZES_TRIED, n);
}

floe_status cuckoo_freeze(iceberg *ice, floe_pool *pool, cuckoo **out, floe_errinfo *err)
{
    const floe_spec *spec = iceberg_spec(ice);
    const uint32_t vb = floe_spec_has_values(spec) ? spec->value_bytes : 0;
    floe_table_stats st;
    iceberg_stats(ice, &st);
    const size_t want = st.keys ? st.keys : 1;
    uint64_t *keys = floe_malloc(want * sizeof *keys);
    unsigned char *values = vb ? floe_malloc(want * vb) : NULL;
    if (!keys || (vb && !values)) {
        free(keys);
        free(values);
        return floe_errinfo_set(err, FLOE_ERR_NO_MEMORY, "cannot allocate %zu bytes to freeze table %s",
                                want * (8 + vb), spec->name);
    }
    size_t n = 0;
    floe_scan_pos at = {0, iceberg_generation(ice)};
    int done = 0;
    floe_status s = FLOE_OK;
    while (s == FLOE_OK && !done && n < want) {
        size_t got = 0;
        s = iceberg_scan(ice, &at, want - n, keys + n, vb ? values + n * vb : NULL, &got, &at, &done, err);
        n += got;
    }
    if (s == FLOE_OK)
        s = cuckoo_build(spec->key_bits, vb, spec->seed, FLOE_CUCKOO_FILL, keys, values, n, pool, out, err);
    free(keys);
    free(values);
    if (s != FLOE_OK)
        return s;
    (*out)->spec = *spec;
    (*out)->generation = iceberg_generation(ice) + 1;
    return FLOE_OK;
}

void cuckoo_destroy(cuckoo *t)
{
    if (!t)
        return;
    if (t->words)
        munmap(t->words, t->bytes);
    free(t->values);
    free(t);
}

typedef struct find_job {
    const cuckoo *t;
    const uint64_t *keys;
    uint8_t *results;
    uint64_t *ids;
    unsigned char *values_out;
    size_t n;
} find_job;

static void prefetch_bucket(const cuckoo *t, uint64_t b)
{
    const char *p = (const char *)(t->words + b * t->g.level.words);
    for (uint32_t off = 0; off < t->g.level.words * 8; off += 64)
        __builtin_prefetch(p + off, 0);
}

/* Key i's answer from its slot (FLOE_NO_ID: absent), with its id and value where asked. */
static void answer(const find_job *j, size_t i, uint64_t slot)
{
    const uint32_t vb = j->t->spec.value_bytes;
    j->results[i] = slot == FLOE_NO_ID ? FLOE_ABSENT : FLOE_PRESENT;
    if (j->ids)
        j->ids[i] = slot;
    if (j->values_out) {
        if (slot == FLOE_NO_ID)
            memset(j->values_out + i * vb, 0, vb);
        else
            memcpy(j->values_out + i * vb, j->t->values + slot * vb, vb);
    }
}

/* A chunk of a find, software-pipelined: both buckets of the key
 * PREFETCH_AHEAD places ahead are computed and prefetched (whole buckets:
 * 64 to 256 bytes each) while this one is read.  At fill 0.95 and more most
 * first buckets are full, so a miss reads both and many hits live in their
 * second: prefetching both doubled the misses' rate past the caches and
 * raised the hits' by a quarter (docs/PERFORMANCE.md, S1).  (Prefetching
 * the second only where the first is full, checked halfway, halved the
 * hits' rate at fill 0.81: the check waits for the first.) */
static void find_chunk(void *arg, size_t task)
{
    const find_job *j = arg;
    const cuckoo *t = j->t;
    const size_t from = task * FIND_CHUNK, to = from + FIND_CHUNK < j->n ? from + FIND_CHUNK : j->n;
    uint64_t ring_b[PREFETCH_AHEAD], ring_row[PREFETCH_AHEAD];
    for (size_t k = from; k < to + PREFETCH_AHEAD; k++) {
        if (k >= from + PREFETCH_AHEAD) { /* behind: the lookup, whose ring slot key k takes next */
            const size_t i = k - PREFETCH_AHEAD;
            answer(j, i,
                   too_wide(t, j->keys[i])
                       ? FLOE_NO_ID
                       : find_from(t, j->keys[i], 0, ring_b[i % PREFETCH_AHEAD], ring_row[i % PREFETCH_AHEAD]));
        }
        if (k < to) { /* ahead: split and prefetch */
            const uint64_t key = too_wide(t, j->keys[k]) ? 0 : j->keys[k];
            uint64_t b1, row1;
            floe_cuckoo_split(&t->g, 0, key, &ring_b[k % PREFETCH_AHEAD], &ring_row[k % PREFETCH_AHEAD]);
            floe_cuckoo_split(&t->g, 1, key, &b1, &row1);
            prefetch_bucket(t, ring_b[k % PREFETCH_AHEAD]);
            prefetch_bucket(t, b1);
        }
    }
}

void cuckoo_find(const cuckoo *t, const uint64_t *keys, size_t n, uint8_t *results, uint64_t *ids, void *values_out,
                 floe_answer_counts *counts, floe_pool *pool)
{
    find_job j = {t, keys, results, ids, t->values ? values_out : NULL, n};
    floe_pool_run(pool, (n + FIND_CHUNK - 1) / FIND_CHUNK, find_chunk, &j);
    if (counts)
        floe_answer_counts_tally(counts, results, n);
}

floe_status cuckoo_scan_rows(const floe_spec *spec, const floe_cuckoo_geometry *g, uint64_t generation,
                             cuckoo_rows_fn rows, void *arg, uint64_t window, const floe_scan_pos *from, size_t limit,
                             uint64_t *keys, void *values, size_t *n, floe_scan_pos *next, int *done, floe_errinfo *err)
{
    const floe_level *lv = &g->level;
    const uint64_t slots = floe_cuckoo_slots(g);
    const uint32_t vb = floe_spec_has_values(spec) && values ? spec->value_bytes : 0;
    uint64_t pos = from ? from->position : 0;
    if (from && from->generation != generation)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "scan cursor is from generation %llu but the table is at generation %llu (frozen "
                                "since): start the scan again",
                                (unsigned long long)from->generation, (unsigned long long)generation);
    if (pos > slots)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "scan cursor position %llu is past the table's %llu slots",
                                (unsigned long long)pos, (unsigned long long)slots);
    size_t got = 0;
    while (pos < slots && got < limit) {
        const uint64_t first = pos / lv->slots, nb = g->buckets - first < window ? g->buckets - first : window;
        const uint64_t *w;
        const unsigned char *v;
        floe_status st = rows(arg, first, nb, vb != 0, &w, &v, err);
        if (st != FLOE_OK)
            return st;
        for (const uint64_t end = (first + nb) * lv->slots; pos < end && got < limit; pos++) {
            const uint64_t b = pos / lv->slots - first, i = pos % lv->slots;
            const uint64_t row = floe_row_get(w + b * lv->words, lv->row_bits, (uint32_t)i);
            if (row == FLOE_ROW_EMPTY)
                continue;
            keys[got] = floe_cuckoo_join(g, first + b, row);
            if (vb)
                memcpy((unsigned char *)values + got * vb, v + (b * lv->slots + i) * vb, vb);
            got++;
        }
    }
    *n = got;
    next->position = pos;
    next->generation = generation;
    *done = pos >= slots;
    return FLOE_OK;
}

/* A host table's rows, where they are. */
static floe_status rows_in_place(void *arg, uint64_t first, uint64_t n, bool values, const uint64_t **words,
                                 const unsigned char **vals, floe_errinfo *err)
{
    const cuckoo *t = arg;
    (void)n;
    (void)values;
    (void)err;
    *words = t->words + first * t->g.level.words;
    *vals = t->values ? t->values + first * t->g.level.slots * t->spec.value_bytes : NULL;
    return FLOE_OK;
}

floe_status cuckoo_scan(const cuckoo *t, const floe_scan_pos *from, size_t limit, uint64_t *keys, void *values,
                        size_t *n, floe_scan_pos *next, int *done, floe_errinfo *err)
{
    return cuckoo_scan_rows(&t->spec, &t->g, t->generation, rows_in_place, (void *)t, t->g.buckets, from, limit, keys,
                            t->values ? values : NULL, n, next, done, err);
}

void cuckoo_stats_of(const floe_spec *spec, const floe_cuckoo_geometry *g, uint64_t keys, uint64_t generation,
                     uint64_t bytes, floe_table_stats *s)
{
    memset(s, 0, sizeof *s);
    s->spec = *spec;
    s->keys = keys;
    s->slots = floe_cuckoo_slots(g);
    s->fill = s->slots ? (double)keys / (double)s->slots : 0.0;
    s->memory_bytes = bytes;
    s->bytes_per_key = keys ? (double)bytes / (double)keys : 0.0;
    s->generation = generation;
    s->device = -1;
    s->frozen = true;
    s->level[0].slots = s->slots;
    s->level[0].used = keys;
    s->level[0].row_bits = g->level.row_bits;
    s->level[0].buckets_log2 = g->hi_bits + floe_cuckoo_mult_bits(g->mult);
    s->level[0].fill = s->fill;
}

void cuckoo_stats(const cuckoo *t, floe_table_stats *s)
{
    cuckoo_stats_of(&t->spec, &t->g, t->keys, t->generation, cuckoo_bytes(t), s);
    snprintf(s->backend, sizeof s->backend, "cpu");
}

/* ---- the table file ---------------------------------------------------------------------------- */

static void file_view(const cuckoo *t, floe_file_header *h, const void **sections)
{
    memset(h, 0, sizeof *h);
    h->spec = t->spec;
    h->layout_version = FLOE_LAYOUT_VERSION;
    h->addr_bits = t->g.hi_bits;
    h->frozen = 1;
    h->cuckoo_mult = t->g.mult;
    h->generation = t->generation;
    h->keys = t->keys;
    h->used[0] = t->keys;
    h->nsections = 2;
    h->section_bytes[0] = t->bytes;
    h->section_bytes[1] = t->values_bytes;
    sections[0] = t->words;
    sections[1] = t->values;
}

floe_status cuckoo_save(const cuckoo *t, const char *path, floe_errinfo *err)
{
    floe_file_header h;
    const void *sections[FLOE_FILE_MAX_SECTIONS];
    file_view(t, &h, sections);
    return floe_file_save(path, &h, sections, err);
}

floe_status cuckoo_copy_image(const cuckoo *t, floe_file_image **out, floe_errinfo *err)
{
    floe_file_header h;
    const void *sections[FLOE_FILE_MAX_SECTIONS];
    file_view(t, &h, sections);
    if (!(*out = floe_file_image_copy(&h, sections)))
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory copying table %s for a snapshot", t->spec.name);
    return FLOE_OK;
}

/* Every row a key of its bucket's choice (found where a lookup looks), and
 * as many as the header says. */
static floe_status verify_loaded(const cuckoo *t, const floe_file_header *h, const char *path, floe_errinfo *err)
{
    const floe_level *lv = &t->g.level;
    uint64_t rows = 0;
    for (uint64_t b = 0; b < t->g.buckets; b++)
        for (uint32_t i = 0; i < lv->slots; i++) {
            const uint64_t row = floe_row_get(t->words + b * lv->words, lv->row_bits, i);
            if (row == FLOE_ROW_EMPTY)
                continue;
            const uint64_t key = floe_cuckoo_join(&t->g, b, row);
            if (too_wide(t, key) || find_one(t, key) != b * lv->slots + i)
                return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is damaged: bucket %llu row %u holds no key there",
                                        path, (unsigned long long)b, i);
            rows++;
        }
    if (rows != h->keys)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is damaged: %llu keys, the header says %llu", path,
                                (unsigned long long)rows, (unsigned long long)h->keys);
    return FLOE_OK;
}

floe_status cuckoo_load(const char *path, uint64_t offset, cuckoo **out, floe_errinfo *err)
{
    floe_file_header h;
    floe_file_reader *r;
    floe_errinfo spec_err;
    *out = NULL;
    floe_status st = floe_file_open(path, offset, &h, &r, err);
    if (st != FLOE_OK)
        return st;
    cuckoo *t = NULL;
    if (h.spec.kind != FLOE_KIND_STATIC || !h.frozen) {
        st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%s holds a %s table, not a frozen STATIC one", path,
                              floe_kind_name(h.spec.kind));
        goto out;
    }
    if (floe_spec_validate(&h.spec, &spec_err) != FLOE_OK || h.spec.seed == 0 || h.cuckoo_mult < 1 ||
        h.cuckoo_mult > FLOE_CUCKOO_MULT_MAX || !floe_cuckoo_size_ok(h.spec.key_bits, h.addr_bits, h.cuckoo_mult)) {
        st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is damaged: %s", path,
                              h.spec.seed == 0 ? "seed 0" : "its spec or size is not a static table's");
        goto out;
    }
    if (!(t = floe_calloc(1, sizeof *t))) {
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
        goto out;
    }
    t->spec = h.spec;
    floe_cuckoo_geometry_init(&t->g, h.spec.key_bits, h.addr_bits, h.cuckoo_mult, h.spec.seed);
    t->bytes = t->g.buckets * t->g.level.words * 8;
    t->values_bytes = floe_cuckoo_slots(&t->g) * (floe_spec_has_values(&h.spec) ? h.spec.value_bytes : 0);
    if (h.nsections != 2 || h.section_bytes[0] != t->bytes || h.section_bytes[1] != t->values_bytes) {
        st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is damaged: section sizes do not match the table's geometry",
                              path);
        goto out;
    }
    t->words = iceberg_map_zeroed(t->bytes);
    t->values = t->values_bytes ? floe_malloc(t->values_bytes) : NULL;
    if (!t->words || (t->values_bytes && !t->values)) {
        st = floe_errinfo_set(err, FLOE_ERR_NO_MEMORY, "cannot allocate %zu bytes to load %s",
                              t->bytes + t->values_bytes, path);
        goto out;
    }
    void *sections[2] = {t->words, t->values};
    if ((st = floe_file_read(r, sections, err)) != FLOE_OK)
        goto out;
    if ((st = verify_loaded(t, &h, path, err)) != FLOE_OK)
        goto out;
    t->keys = h.keys;
    t->generation = h.generation;
    *out = t;
    t = NULL;
out:
    cuckoo_destroy(t);
    floe_file_close(r);
    return st;
}

const floe_spec *cuckoo_spec(const cuckoo *t)
{
    return &t->spec;
}

uint64_t cuckoo_generation(const cuckoo *t)
{
    return t->generation;
}

uint64_t cuckoo_keys(const cuckoo *t)
{
    return t->keys;
}

uint64_t cuckoo_bytes(const cuckoo *t)
{
    return t->bytes + t->values_bytes;
}

const floe_cuckoo_geometry *cuckoo_geometry(const cuckoo *t)
{
    return &t->g;
}

const uint64_t *cuckoo_words(const cuckoo *t)
{
    return t->words;
}

floe_status cuckoo_empty(const floe_spec *spec, uint32_t hi_bits, uint32_t mult, uint64_t keys, uint64_t generation,
                         cuckoo **out, floe_errinfo *err)
{
    *out = NULL;
    if (spec->kind != FLOE_KIND_STATIC || mult < 1 || mult > FLOE_CUCKOO_MULT_MAX ||
        !floe_cuckoo_size_ok(spec->key_bits, hi_bits, mult))
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "table %s: not a static table's spec or size", spec->name);
    cuckoo *t = floe_calloc(1, sizeof *t);
    if (!t)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    t->spec = *spec;
    floe_cuckoo_geometry_init(&t->g, spec->key_bits, hi_bits, mult, spec->seed);
    t->bytes = t->g.buckets * t->g.level.words * 8;
    t->values_bytes = floe_cuckoo_slots(&t->g) * (floe_spec_has_values(spec) ? spec->value_bytes : 0);
    t->words = iceberg_map_zeroed(t->bytes);
    t->values = t->values_bytes ? floe_calloc(1, t->values_bytes) : NULL;
    if (!t->words || (t->values_bytes && !t->values)) {
        const size_t bytes = t->bytes + t->values_bytes;
        const bool budget = floe_alloc_over_budget();
        cuckoo_destroy(t);
        return floe_errinfo_set(err, budget ? FLOE_ERR_NO_MEMORY : FLOE_ERR_INTERNAL,
                                "cannot allocate %zu bytes of host memory for a copy of table %s%s", bytes, spec->name,
                                budget ? ": it would pass floed's maxmemory" : "");
    }
    t->keys = keys;
    t->generation = generation;
    *out = t;
    return FLOE_OK;
}

void cuckoo_arrays(cuckoo *t, uint64_t **words, size_t *words_bytes, void **values, size_t *values_bytes)
{
    *words = t->words;
    *words_bytes = t->bytes;
    *values = t->values;
    *values_bytes = t->values_bytes;
}

floe_status cuckoo_refuse(const floe_spec *spec, floe_op op, floe_errinfo *err)
{
    return floe_errinfo_set(err, FLOE_ERR_FROZEN,
                            "table %s is frozen: a STATIC table answers finds only after its freeze (%s refused, "
                            "nothing written)",
                            spec->name, floe_op_name(op));
}
