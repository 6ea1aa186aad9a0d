/*
 * cuckoo.c - the CPU engine of STATIC tables (see cuckoo.h).
 */
#include "cuckoo.h"

#include <string.h>
#include <sys/mman.h>

#include "alloc.h"
#include "iceberg.h"

/* Moves one placement may make before its size is given up: chains stay
 * short until a table nears the fill its bucket size allows. */
#define PLACE_MOVES 4096u
/* Sizes tried in all: each a quarter step (1.25, 1.2, 1.17, 1.14 times) past the one before. */
#define SIZES_TRIED 12u
/* Keys a task of a find. */
#define FIND_CHUNK 16384u
/* Keys between the prefetch of a key's first bucket and its lookup: enough
 * cache misses in flight to cover the memory's latency. */
#define PREFETCH_AHEAD 16u

struct cuckoo {
    floe_cuckoo_geometry g;
    uint64_t *words;
    size_t bytes;
    uint64_t keys;
};

/* Key's answer from its choices `from` on (its bucket b and row of that
 * choice given): the buckets in turn, until one holds it or has room. */
static uint8_t find_from(const cuckoo *t, uint64_t key, uint32_t from, uint64_t b, uint64_t row)
{
    const floe_level *lv = &t->g.level;
    for (uint32_t c = from;;) {
        const uint64_t *w = t->words + b * lv->words;
        if (floe_bucket_find(w, lv, row) >= 0)
            return FLOE_PRESENT;
        if (floe_bucket_first_empty(w, lv) < lv->slots || ++c == FLOE_CUCKOO_CHOICES)
            return FLOE_ABSENT; /* buckets fill in order: no later choice holds it */
        floe_cuckoo_split(&t->g, c, key, &b, &row);
    }
}

static bool too_wide(const cuckoo *t, uint64_t key)
{
    return t->g.key_bits < 64 && (key >> t->g.key_bits) != 0;
}

static uint8_t find_one(const cuckoo *t, uint64_t key)
{
    if (too_wide(t, key))
        return FLOE_ABSENT;
    uint64_t b, row;
    floe_cuckoo_split(&t->g, 0, key, &b, &row);
    return find_from(t, key, 0, b, row);
}

static void set_row(uint64_t *w, const floe_level *lv, uint32_t i, uint64_t row)
{
    const uint32_t k = floe_row_word(lv->row_bits, i);
    w[k] = floe_row_put(w[k], lv->row_bits, i, row);
}

/* Places key (not stored yet), moving keys on where buckets are full: false
 * if the chain of moves ran out, with one key then left out of the table. */
static bool place(cuckoo *t, uint64_t key, uint64_t *rng)
{
    const floe_level *lv = &t->g.level;
    uint32_t c = 0;
    for (uint32_t moves = 0; moves < PLACE_MOVES; moves++) {
        uint64_t b, row;
        floe_cuckoo_split(&t->g, c, key, &b, &row);
        uint64_t *w = t->words + b * lv->words;
        const uint32_t i = floe_bucket_first_empty(w, lv);
        if (i < lv->slots) {
            set_row(w, lv, i, row);
            return true;
        }
        /* full: the key takes a slot at random, and the key it held goes on to its next choice */
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        const uint32_t j = (uint32_t)(*rng % lv->slots);
        const uint64_t old = floe_row_get(w, lv->row_bits, j);
        set_row(w, lv, j, row);
        key = floe_cuckoo_join(&t->g, b, old);
        c = (floe_cuckoo_choice(old) + 1) % FLOE_CUCKOO_CHOICES;
    }
    return false;
}

/* Size step k: 2^h buckets, 1.25, 1.5, 1.75 times that (5, 3, 7 times a
 * smaller power of two), 2^(h+1), ... for h = k / 4; false where a step has
 * no such size (h too small) or key_bits keys do not fit it. */
static bool size_step(uint32_t key_bits, uint32_t k, uint32_t *hi_bits, uint32_t *mult)
{
    static const uint32_t mults[4] = {1, 5, 3, 7}, less[4] = {0, 2, 1, 2};
    const uint32_t h = k / 4, i = k % 4;
    if (h < less[i])
        return false;
    *mult = mults[i];
    *hi_bits = h - less[i];
    return floe_cuckoo_size_ok(key_bits, *hi_bits, *mult);
}

floe_status cuckoo_build(uint32_t key_bits, uint64_t seed, double fill, const uint64_t *keys, size_t n, cuckoo **out,
                         floe_errinfo *err)
{
    *out = NULL;
    if (key_bits < 1 || key_bits > 64)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "key_bits must be 1..64, got %u", key_bits);
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
        if (k / 4 > key_bits + 1)
            return floe_errinfo_set(err, FLOE_ERR_FULL, "%zu keys of %u bits need a larger static table than there is",
                                    n, key_bits);
        if (size_step(key_bits, k, &hi_bits, &mult) &&
            (double)(((uint64_t)mult << hi_bits) * FLOE_CUCKOO_SLOTS) * fill >= (double)n)
            break;
    }
    cuckoo *t = floe_calloc(1, sizeof *t);
    if (!t)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    for (uint32_t tried = 0; tried < SIZES_TRIED && k / 4 <= key_bits + 1; k++) {
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
            return floe_errinfo_set(err, budget ? FLOE_ERR_NO_MEMORY : FLOE_ERR_FULL,
                                    "cannot allocate %zu bytes for a static table of %zu keys%s", bytes, n,
                                    budget ? ": it would pass floed's maxmemory" : "");
        }
        uint64_t rng = seed | 1, stored = 0;
        bool placed = true;
        for (size_t i = 0; i < n && placed; i++)
            if (find_one(t, keys[i]) == FLOE_ABSENT) {
                placed = place(t, keys[i], &rng);
                stored++;
            }
        if (placed) {
            t->keys = stored;
            *out = t;
            return FLOE_OK;
        }
        munmap(t->words, t->bytes);
        t->words = NULL;
    }
    free(t);
    return floe_errinfo_set(err, FLOE_ERR_FULL, "no static table of up to %u sizes past the first holds these %zu keys",
                            SIZES_TRIED, n);
}

void cuckoo_destroy(cuckoo *t)
{
    if (!t)
        return;
    if (t->words)
        munmap(t->words, t->bytes);
    free(t);
}

typedef struct find_job {
    const cuckoo *t;
    const uint64_t *keys;
    uint8_t *results;
    size_t n;
} find_job;

static void prefetch_bucket(const cuckoo *t, uint64_t b)
{
    const char *p = (const char *)(t->words + b * t->g.level.words);
    for (uint32_t off = 0; off < t->g.level.words * 8; off += 64)
        __builtin_prefetch(p + off, 0);
}

/* A chunk of a find, software-pipelined: the first bucket of the key
 * PREFETCH_AHEAD places ahead is computed and prefetched (a whole bucket:
 * 64 to 256 bytes) while this one is read.  (Prefetching the second bucket
 * too where the first is full, checked halfway, halved the hits' rate on
 * the development machine and left the misses' as it was.) */
static void find_chunk(void *arg, size_t task)
{
    const find_job *j = arg;
    const cuckoo *t = j->t;
    const size_t from = task * FIND_CHUNK, to = from + FIND_CHUNK < j->n ? from + FIND_CHUNK : j->n;
    uint64_t ring_b[PREFETCH_AHEAD], ring_row[PREFETCH_AHEAD];
    for (size_t k = from; k < to + PREFETCH_AHEAD; k++) {
        if (k >= from + PREFETCH_AHEAD) { /* behind: the lookup, whose ring slot key k takes next */
            const size_t i = k - PREFETCH_AHEAD;
            j->results[i] = too_wide(t, j->keys[i]) ? FLOE_ABSENT
                                                    : find_from(t, j->keys[i], 0, ring_b[i % PREFETCH_AHEAD],
                                                                ring_row[i % PREFETCH_AHEAD]);
        }
        if (k < to) { /* ahead: split and prefetch */
            const uint64_t key = too_wide(t, j->keys[k]) ? 0 : j->keys[k];
            floe_cuckoo_split(&t->g, 0, key, &ring_b[k % PREFETCH_AHEAD], &ring_row[k % PREFETCH_AHEAD]);
            prefetch_bucket(t, ring_b[k % PREFETCH_AHEAD]);
        }
    }
}

void cuckoo_find(const cuckoo *t, const uint64_t *keys, size_t n, uint8_t *results, floe_answer_counts *counts,
                 floe_pool *pool)
{
    find_job j = {t, keys, results, n};
    floe_pool_run(pool, (n + FIND_CHUNK - 1) / FIND_CHUNK, find_chunk, &j);
    if (counts)
        floe_answer_counts_tally(counts, results, n);
}

uint64_t cuckoo_keys(const cuckoo *t)
{
    return t->keys;
}

uint64_t cuckoo_bytes(const cuckoo *t)
{
    return t->bytes;
}

const floe_cuckoo_geometry *cuckoo_geometry(const cuckoo *t)
{
    return &t->g;
}

const uint64_t *cuckoo_words(const cuckoo *t)
{
    return t->words;
}
