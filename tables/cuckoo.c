/*
 * cuckoo.c - the CPU engine of STATIC tables (see cuckoo.h).
 */
#include "cuckoo.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "alloc.h"
#include "dedup.h"
#include "iceberg.h"
#include "tablefile.h"

/* Moves one placement may make before its size is given up: chains stay
 * short until a table nears the fill its bucket size allows. */
#define PLACE_MOVES 4096u
/* Sizes tried in all, each a 1/32 step past the one before: up to about 1.6 times the first. */
#define SIZES_TRIED 16u
/* Size steps there are (size_step): 63 of one factor, then 32 a power of two up to 2^64. */
#define SIZE_STEPS (63u + 32u * 64u)
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

/* Places key (not stored yet): into its bucket's first empty row, or where
 * the bucket is full into a row at random, the key that held it carried on
 * to its next choice (the eviction of cuckoo hashing); false if the chain
 * of moves ran out, one key then left out of the table.  Each row goes in
 * by a compare-and-swap of its word, so that builders may place side by
 * side; buckets only fill, so a key that saw its bucket of choice c full
 * goes on rightly to c + 1. */
static bool place(cuckoo *t, uint64_t key, uint64_t *rng)
{
    const floe_level *lv = &t->g.level;
    uint32_t c = 0;
    for (uint32_t moves = 0; moves < PLACE_MOVES; moves++) {
        uint64_t b, row, snap[FLOE_CUCKOO_SLOTS]; /* a bucket is at most 16 words (rows of 64 bits) */
        floe_cuckoo_split(&t->g, c, key, &b, &row);
        _Atomic uint64_t *w = (_Atomic uint64_t *)(t->words + b * lv->words);
        for (;;) {
            for (uint32_t k = 0; k < lv->words; k++)
                snap[k] = atomic_load_explicit(&w[k], memory_order_relaxed);
            uint32_t i = floe_bucket_first_empty(snap, lv);
            const bool full = i == lv->slots;
            if (full) {
                *rng ^= *rng << 13;
                *rng ^= *rng >> 7;
                *rng ^= *rng << 17;
                i = (uint32_t)(*rng % lv->slots);
            }
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
    const uint32_t *rep; /* first occurrences (floe_dedup): the keys placed, the values kept */
    size_t n;
    uint64_t seed;
    _Atomic bool failed; /* a chain of moves ran out: a key left out */
} build_job;

static void build_chunk(void *arg, size_t task)
{
    build_job *j = arg;
    const size_t from = task * BUILD_CHUNK, to = from + BUILD_CHUNK < j->n ? from + BUILD_CHUNK : j->n;
    uint64_t rng = (j->seed ^ (task * 0x9E3779B97F4A7C15ull)) | 1;
    for (size_t i = from; i < to && !atomic_load_explicit(&j->failed, memory_order_relaxed); i++)
        if (j->rep[i] == i && !place(j->t, j->keys[i], &rng))
            atomic_store(&j->failed, true);
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

/* Size step k: k + 1 buckets while fewer than 64 (mult k + 1), then mult
 * 32..63 times 2^hi_bits: each a 1/32 step or less past the one before;
 * false where key_bits keys do not fit it. */
static bool size_step(uint32_t key_bits, uint32_t k, uint32_t *hi_bits, uint32_t *mult)
{
    if (k < 63) {
        *mult = k + 1;
        *hi_bits = 0;
    } else {
        *mult = 32 + (k - 63) % 32;
        *hi_bits = 1 + (k - 63) / 32;
    }
    return floe_cuckoo_size_ok(key_bits, *hi_bits, *mult);
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
    uint32_t k = 0, hi_bits = 0, mult = 1;
    for (;; k++) {
        if (k >= SIZE_STEPS)
            return floe_errinfo_set(err, FLOE_ERR_FULL, "%zu keys of %u bits need a larger static table than there is",
                                    n, key_bits);
        if (size_step(key_bits, k, &hi_bits, &mult) &&
            (double)(((uint64_t)mult << hi_bits) * FLOE_CUCKOO_SLOTS) * fill >= (double)n)
            break;
    }
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
    build_job bj = {.keys = keys, .values = values, .rep = rep, .n = n, .seed = seed};
    const size_t tasks = (n + BUILD_CHUNK - 1) / BUILD_CHUNK;
    cuckoo *t = floe_calloc(1, sizeof *t);
    if (!t) {
        free(rep);
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    }
    bj.t = t;
    t->spec.key_bits = key_bits;
    t->spec.value_bytes = value_bytes;
    t->spec.seed = seed;
    for (uint32_t tried = 0; tried < SIZES_TRIED && k < SIZE_STEPS; k++) {
        if (!size_step(key_bits, k, &hi_bits, &mult))
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
            return floe_errinfo_set(err, budget ? FLOE_ERR_NO_MEMORY : FLOE_ERR_FULL,
                                    "cannot allocate %zu bytes for a static table of %zu keys%s", bytes, n,
                                    budget ? ": it would pass floed's maxmemory" : "");
        }
        uint64_t rng = seed | 1, stored = 0;
        bool placed = true;
        if (rep) {
            atomic_store(&bj.failed, false);
            floe_pool_run(pool, tasks, build_chunk, &bj);
            placed = !atomic_load(&bj.failed);
            stored = distinct;
        } else {
            for (size_t i = 0; i < n && placed; i++)
                if (find_one(t, keys[i]) == FLOE_NO_ID) {
                    placed = place(t, keys[i], &rng);
                    stored++;
                }
        }
        if (placed) {
            t->keys = stored;
            if (value_bytes) {
                t->values_bytes = floe_cuckoo_slots(&t->g) * value_bytes;
                if (!(t->values = floe_calloc(1, t->values_bytes))) {
                    const size_t bytes = t->values_bytes;
                    cuckoo_destroy(t);
                    free(rep);
                    return floe_errinfo_set(err, FLOE_ERR_NO_MEMORY,
                                            "cannot allocate %zu bytes for a static table's values", bytes);
                }
                if (rep)
                    floe_pool_run(pool, tasks, values_chunk, &bj);
                else
                    put_values(t, keys, values, n);
            }
            free(rep);
            *out = t;
            return FLOE_OK;
        }
        munmap(t->words, t->bytes);
        t->words = NULL;
    }
    free(t);
    free(rep);
    return floe_errinfo_set(err, FLOE_ERR_FULL, "no static table of up to %u sizes past the first holds these %zu keys",
                            SIZES_TRIED, n);
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

floe_status cuckoo_scan(const cuckoo *t, const floe_scan_pos *from, size_t limit, uint64_t *keys, void *values,
                        size_t *n, floe_scan_pos *next, int *done, floe_errinfo *err)
{
    const floe_level *lv = &t->g.level;
    const uint64_t slots = floe_cuckoo_slots(&t->g);
    const uint32_t vb = t->spec.value_bytes;
    uint64_t pos = from ? from->position : 0;
    if (from && from->generation != t->generation)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "scan cursor is from generation %llu but the table is at generation %llu (frozen "
                                "since): start the scan again",
                                (unsigned long long)from->generation, (unsigned long long)t->generation);
    if (pos > slots)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "scan cursor position %llu is past the table's %llu slots",
                                (unsigned long long)pos, (unsigned long long)slots);
    size_t got = 0;
    for (; pos < slots && got < limit; pos++) {
        const uint64_t b = pos / lv->slots;
        const uint64_t row = floe_row_get(t->words + b * lv->words, lv->row_bits, (uint32_t)(pos % lv->slots));
        if (row == FLOE_ROW_EMPTY)
            continue;
        keys[got] = floe_cuckoo_join(&t->g, b, row);
        if (values && vb)
            memcpy((unsigned char *)values + got * vb, t->values + pos * vb, vb);
        got++;
    }
    *n = got;
    next->position = pos;
    next->generation = t->generation;
    *done = pos >= slots;
    return FLOE_OK;
}

void cuckoo_stats(const cuckoo *t, floe_table_stats *s)
{
    memset(s, 0, sizeof *s);
    s->spec = t->spec;
    s->keys = t->keys;
    s->slots = floe_cuckoo_slots(&t->g);
    s->fill = s->slots ? (double)t->keys / (double)s->slots : 0.0;
    s->memory_bytes = cuckoo_bytes(t);
    s->bytes_per_key = t->keys ? (double)s->memory_bytes / (double)t->keys : 0.0;
    s->generation = t->generation;
    snprintf(s->backend, sizeof s->backend, "cpu");
    s->device = -1;
    s->frozen = true;
    s->level[0].slots = s->slots;
    s->level[0].used = t->keys;
    s->level[0].row_bits = t->g.level.row_bits;
    s->level[0].buckets_log2 = t->g.hi_bits + floe_cuckoo_mult_bits(t->g.mult);
    s->level[0].fill = s->fill;
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
