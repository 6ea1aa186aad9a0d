/*
 * iceberg.c - the CPU engine for SET and MAP tables (see iceberg.h).
 *
 * Per key, find-or-put follows the paper's Algorithm 1/2 over the three
 * levels of layout.h: snapshot the bucket (acquire loads, word by word), stop
 * if the key is there, otherwise CAS the first EMPTY slot of the bucket (on
 * level 1 and 2: of the less full of the two candidates) and retry from a
 * fresh snapshot if the CAS fails.  Every CAS compares a whole 64-bit word
 * against the snapshot, so success proves that the slot and every slot
 * before it in that word are as the snapshot saw them.
 *
 * MAP tables claim a slot with the BUSY row, write the value, then publish
 * the key's row with a release xor.  An insert that meets a BUSY slot in a
 * bucket it must search waits for it (it may be its own key), so a value is
 * never read before it is written.
 *
 * A batch: validate everything, find first occurrences (dedup.c), run the
 * first occurrences in parallel chunks, then give later occurrences the
 * answers that in-order application implies.  Growth stops the world with
 * the write side of t->lock; batches hold the read side.  Files and images
 * of a table are iceberg_file.c's; the struct both see, iceberg_store.h.
 */
#define _GNU_SOURCE
#include "iceberg.h"

#include <assert.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>

#include "alloc.h"
#include "dedup.h"
#include "iceberg_store.h"
#include "layout.h"

#define CHUNK          4096u               /* keys per pool task */
#define PREFETCH_AHEAD 16u                 /* keys between a bucket's prefetch and its use */
#define SCAN_MAX_SLOTS ((uint64_t)1 << 22) /* slots examined per scan call */
#define MAX_WORDS      32                  /* largest bucket: 32 slots x 64 bits */

/* ---- memory ---------------------------------------------------------------------- */

/* Zeroed memory for a table array, faulted in now: a table's memory is all
 * in use from its creation (stats report what it holds), and page faults
 * stay off the batch path. */
void *iceberg_map_zeroed(size_t bytes)
{
    if (bytes == 0 || floe_alloc_fails() || !floe_alloc_fits(bytes))
        return NULL;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    /* Random access over gigabytes: huge pages save most TLB misses. */
    madvise(p, bytes, MADV_HUGEPAGE);
    for (size_t off = 0; off < bytes; off += 4096)
        ((volatile char *)p)[off] = 0;
    return p;
}

static void store_free(store *s)
{
    for (int l = 0; l < FLOE_LEVELS; l++)
        if (s->words[l])
            munmap((void *)s->words[l], s->bytes[l]);
    if (s->values)
        munmap(s->values, s->values_bytes);
    memset(s, 0, sizeof *s);
}

/* Bytes of a geometry's rows (values aside: fewer slots never have more). */
static uint64_t rows_bytes(const floe_geometry *g)
{
    uint64_t words = 0;
    for (int l = 0; l < FLOE_LEVELS; l++)
        words += floe_level_words(&g->level[l]);
    return words * sizeof(uint64_t);
}

/* The bytes of a store of that size (store_alloc's arrays). */
static uint64_t store_bytes(const floe_spec *spec, uint32_t addr_bits, uint32_t three)
{
    floe_geometry g;
    floe_geometry_init(&g, spec->key_bits, addr_bits, three, spec->seed);
    return rows_bytes(&g) + (floe_spec_has_values(spec) ? g.total_slots * spec->value_bytes : 0);
}

static floe_status store_alloc(store *s, const floe_spec *spec, uint32_t addr_bits, uint32_t three, floe_errinfo *err)
{
    memset(s, 0, sizeof *s);
    floe_geometry_init(&s->g, spec->key_bits, addr_bits, three, spec->seed);
    s->value_bytes = floe_spec_has_values(spec) ? spec->value_bytes : 0;
    for (int l = 0; l < FLOE_LEVELS; l++) {
        s->bytes[l] = (size_t)floe_level_words(&s->g.level[l]) * sizeof(uint64_t);
        s->words[l] = iceberg_map_zeroed(s->bytes[l]);
        if (!s->words[l])
            goto oom;
    }
    if (s->value_bytes) {
        s->values_bytes = (size_t)s->g.total_slots * s->value_bytes;
        s->values = iceberg_map_zeroed(s->values_bytes);
        if (!s->values)
            goto oom;
    }
    return FLOE_OK;
oom : {
    size_t total = s->bytes[0] + s->bytes[1] + s->bytes[2] + s->values_bytes;
    const bool budget = floe_alloc_over_budget();
    store_free(s);
    if (budget)
        return floe_errinfo_set(err, FLOE_ERR_NO_MEMORY,
                                "%zu bytes for a table of %u primary address bits would pass floed's maxmemory", total,
                                addr_bits);
    return floe_errinfo_set(err, FLOE_ERR_FULL, "cannot allocate %zu bytes for a table of %u primary address bits",
                            total, addr_bits);
}
}

/* ---- values ---------------------------------------------------------------------- */

static inline uint64_t value_load(const store *s, uint64_t id)
{
    if (s->value_bytes == 4)
        return atomic_load_explicit((_Atomic uint32_t *)s->values + id, memory_order_relaxed);
    return atomic_load_explicit((_Atomic uint64_t *)s->values + id, memory_order_relaxed);
}

static inline void value_store(const store *s, uint64_t id, uint64_t v)
{
    if (s->value_bytes == 4)
        atomic_store_explicit((_Atomic uint32_t *)s->values + id, (uint32_t)v, memory_order_relaxed);
    else
        atomic_store_explicit((_Atomic uint64_t *)s->values + id, v, memory_order_relaxed);
}

static inline uint64_t value_exchange(const store *s, uint64_t id, uint64_t v)
{
    if (s->value_bytes == 4)
        return atomic_exchange_explicit((_Atomic uint32_t *)s->values + id, (uint32_t)v, memory_order_relaxed);
    return atomic_exchange_explicit((_Atomic uint64_t *)s->values + id, v, memory_order_relaxed);
}

/* The value before; it wraps at value_bytes. */
static inline uint64_t value_fetch_add(const store *s, uint64_t id, uint64_t v)
{
    if (s->value_bytes == 4)
        return atomic_fetch_add_explicit((_Atomic uint32_t *)s->values + id, (uint32_t)v, memory_order_relaxed);
    return atomic_fetch_add_explicit((_Atomic uint64_t *)s->values + id, v, memory_order_relaxed);
}

/* Packed little-endian values in requests, any alignment. */
static inline uint64_t value_in(const unsigned char *p, uint32_t vb, size_t i)
{
    uint64_t v = 0;
    memcpy(&v, p + i * vb, vb);
    return v;
}

static inline void value_out(unsigned char *p, uint32_t vb, size_t i, uint64_t v)
{
    memcpy(p + i * vb, &v, vb);
}

/* ---- one key ------------------------------------------------------------------------ */

static inline void snapshot(const aword *b, uint32_t nwords, uint64_t *out)
{
    for (uint32_t i = 0; i < nwords; i++)
        out[i] = atomic_load_explicit(&b[i], memory_order_acquire);
}

static inline uint32_t first_empty(const uint64_t *snap, const floe_level *lv)
{
    return floe_bucket_first_empty(snap, lv);
}

/* CAS slot i from EMPTY to v, expecting its word to be as in snap. */
static inline bool claim(aword *b, const uint64_t *snap, const floe_level *lv, uint32_t i, uint64_t v)
{
    uint32_t w = floe_row_word(lv->row_bits, i);
    uint64_t expect = snap[w];
    return atomic_compare_exchange_strong_explicit(&b[w], &expect, floe_row_put(snap[w], lv->row_bits, i, v),
                                                   memory_order_acq_rel, memory_order_relaxed);
}

/* Turns our BUSY slot i into row v: only its claimant changes a BUSY slot,
 * so an xor of the difference touches nothing else in the word. */
static inline void publish(aword *b, const floe_level *lv, uint32_t i, uint64_t v)
{
    uint32_t bit = i * lv->row_bits;
    uint64_t diff = (floe_row_busy(lv->row_bits) ^ v) << (bit & 63);
    atomic_fetch_xor_explicit(&b[bit >> 6], diff, memory_order_release);
}

static inline void backoff(unsigned *spins)
{
    if (++*spins > 64)
        sched_yield();
}

typedef struct put_result {
    uint8_t result;
    uint8_t level; /* where a new key went */
    uint64_t id;
    uint64_t value; /* MAP: stored before (PRESENT, and an add's INSERTED: 0) or now (INSERTED) */
} put_result;

static inline put_result present(const store *s, uint64_t id, uint64_t value, int mode)
{
    put_result r = {FLOE_PRESENT, 0, id, 0};
    if (s->value_bytes)
        r.value = mode == FLOE_VALUES_OVERWRITE ? value_exchange(s, id, value)
                  : mode == FLOE_VALUES_ADD     ? value_fetch_add(s, id, value)
                                                : value_load(s, id);
    return r;
}

static inline put_result inserted(const store *s, aword *b, const floe_level *lv, uint32_t l, uint32_t slot,
                                  uint64_t id, uint64_t row, uint64_t value, int mode)
{
    if (s->value_bytes) {
        value_store(s, id, value);
        publish(b, lv, slot, row);
    }
    return (put_result){FLOE_INSERTED, (uint8_t)l, id, mode == FLOE_VALUES_ADD ? 0 : value};
}

/* Find-or-put of key, whose primary bucket and remainder are b0 and rem0;
 * mode (dedup.h) says what becomes of a PRESENT key's value. */
static put_result put_one(const store *s, uint64_t key, uint64_t b0, uint64_t rem0, uint64_t value, int mode)
{
    const floe_geometry *g = &s->g;
    const bool map = s->value_bytes != 0;
    uint64_t snap[2][MAX_WORDS];
    unsigned spins = 0;

    /* Level 0: one candidate bucket. */
    {
        const floe_level *lv = &g->level[0];
        const uint64_t b = b0;
        uint64_t row = floe_row_encode(0, rem0, 0);
        aword *bp = bucket_ptr(s, 0, b);
        for (;;) {
            snapshot(bp, lv->words, snap[0]);
            int hit = floe_bucket_find(snap[0], lv, row);
            if (hit >= 0)
                return present(s, floe_slot_id(g, 0, b, (uint32_t)hit), value, mode);
            if (map && floe_bucket_has_busy(snap[0], lv)) {
                backoff(&spins);
                continue;
            }
            uint32_t f = first_empty(snap[0], lv);
            if (f == lv->slots)
                break;
            if (claim(bp, snap[0], lv, f, map ? floe_row_busy(lv->row_bits) : row))
                return inserted(s, bp, lv, 0, f, floe_slot_id(g, 0, b, f), row, value, mode);
        }
    }
    /* Levels 1 and 2: two candidates each; the first takes the key while it
     * holds fewer than first_fill keys, then the less full (FLOE_FIRST_FILL). */
    for (uint32_t l = 1; l < FLOE_LEVELS; l++) {
        const floe_level *lv = &g->level[l];
        uint64_t b[2], row[2];
        aword *bp[2];
        for (uint32_t c = 0; c < 2; c++) {
            uint64_t rem;
            floe_split(g, l, c, key, &b[c], &rem);
            row[c] = floe_row_encode(l, rem, c);
            bp[c] = bucket_ptr(s, l, b[c]);
        }
        for (;;) {
            bool busy = false;
            uint32_t f[2] = {lv->slots, lv->slots};
            for (uint32_t c = 0; c < 2; c++) {
                if (c == 1 && !floe_second_may_hold(g, f[0]))
                    break; /* not in the second, and the first takes it */
                snapshot(bp[c], lv->words, snap[c]);
                int hit = floe_bucket_find(snap[c], lv, row[c]);
                if (hit >= 0)
                    return present(s, floe_slot_id(g, l, b[c], (uint32_t)hit), value, mode);
                busy |= map && floe_bucket_has_busy(snap[c], lv);
                f[c] = first_empty(snap[c], lv);
            }
            if (busy) {
                backoff(&spins);
                continue;
            }
            uint32_t c = floe_pick_choice(g, f[0], f[1]);
            if (f[c] == lv->slots)
                break; /* both full: next level */
            if (claim(bp[c], snap[c], lv, f[c], map ? floe_row_busy(lv->row_bits) : row[c]))
                return inserted(s, bp[c], lv, l, f[c], floe_slot_id(g, l, b[c], f[c]), row[c], value, mode);
        }
    }
    return (put_result){FLOE_FULL, 0, FLOE_NO_ID, 0};
}

/* Where a key lives: level, bucket pointer, slot and the snapshot word that
 * holds it.  Returns false if the key is absent. */
typedef struct location {
    uint32_t level, slot;
    aword *bucket;
    uint64_t word;
    uint64_t id;
} location;

static bool locate(const store *s, uint64_t key, uint64_t b0, uint64_t rem0, location *loc)
{
    const floe_geometry *g = &s->g;
    uint64_t snap[MAX_WORDS];
    for (uint32_t l = 0; l < FLOE_LEVELS; l++) {
        const floe_level *lv = &g->level[l];
        bool open = false; /* a candidate had room, so the key never went deeper */
        for (uint32_t c = 0; c < lv->choices; c++) {
            uint64_t b = b0, rem = rem0;
            if (l > 0)
                floe_split(g, l, c, key, &b, &rem);
            aword *bp = bucket_ptr(s, l, b);
            snapshot(bp, lv->words, snap);
            int hit = floe_bucket_find(snap, lv, floe_row_encode(l, rem, c));
            if (hit >= 0) {
                loc->level = l;
                loc->slot = (uint32_t)hit;
                loc->bucket = bp;
                loc->word = snap[floe_row_word(lv->row_bits, (uint32_t)hit)];
                loc->id = floe_slot_id(g, l, b, (uint32_t)hit);
                return true;
            }
            const uint32_t n = first_empty(snap, lv);
            open |= n < lv->slots;
            if (l > 0 && c == 0 && !floe_second_may_hold(g, n))
                break; /* FLOE_FIRST_FILL: not in the second candidate */
        }
        if (open)
            return false;
    }
    return false;
}

static bool erase_one(const store *s, uint64_t key, uint64_t b0, uint64_t rem0, uint32_t *level)
{
    location loc;
    while (locate(s, key, b0, rem0, &loc)) {
        const floe_level *lv = &s->g.level[loc.level];
        uint32_t w = floe_row_word(lv->row_bits, loc.slot);
        uint64_t expect = loc.word;
        uint64_t tomb = floe_row_put(loc.word, lv->row_bits, loc.slot, floe_row_tombstone(lv->row_bits));
        if (atomic_compare_exchange_strong_explicit(&loc.bucket[w], &expect, tomb, memory_order_acq_rel,
                                                    memory_order_relaxed)) {
            *level = loc.level;
            return true;
        }
        /* Another slot of the word changed, or someone erased the key first:
         * look again. */
    }
    return false;
}

static inline void prefetch_bucket(const store *s, uint32_t l, uint64_t b, int write)
{
    const char *p = (const char *)bucket_ptr(s, l, b);
    size_t bytes = s->g.level[l].words * sizeof(uint64_t);
    for (size_t off = 0; off < bytes; off += 64) {
        if (write)
            __builtin_prefetch(p + off, 1);
        else
            __builtin_prefetch(p + off, 0);
    }
}

/* If the primary bucket b0 (already in cache) is full, the key's search goes
 * on to level 1: fetch both candidates early too.  (The second is read only
 * where the first holds FLOE_FIRST_FILL keys or more, but which that is is
 * not known yet, and a miss that needs it unfetched stalls: fetching only
 * the first cost misses 13% on the development VM.) */
static inline void prefetch_deeper(const store *s, uint64_t key, uint64_t b0, int write)
{
    const floe_level *lv = &s->g.level[0];
    uint64_t last = atomic_load_explicit(&bucket_ptr(s, 0, b0)[lv->words - 1], memory_order_relaxed);
    if ((last >> (64 - lv->row_bits)) == FLOE_ROW_EMPTY)
        return;
    for (uint32_t c = 0; c < 2; c++) {
        uint64_t b, rem;
        floe_split(&s->g, 1, c, key, &b, &rem);
        prefetch_bucket(s, 1, b, write);
    }
}

/* ---- batches --------------------------------------------------------------------------- */

enum { OP_INSERT, OP_FIND, OP_ERASE };

typedef struct tally {
    uint64_t c[5];              /* per result code */
    uint64_t used[FLOE_LEVELS]; /* slots newly claimed */
    uint64_t tombstones;
} tally;

typedef struct batch {
    const store *s;
    int op;
    int mode; /* floe_value_mode: a PRESENT key's value */
    const uint64_t *keys;
    size_t n;                  /* keys, or entries of subset */
    const uint32_t *subset;    /* NULL: all of 0..n-1 */
    const uint32_t *rep;       /* first occurrences; NULL: every key is one */
    const uint32_t *value_src; /* index whose value a first occurrence stores */
    const unsigned char *values;
    uint8_t *results;
    uint64_t *ids;
    unsigned char *values_out;
    tally *tallies; /* one per task */
} batch;

/* Keys are software-pipelined: the primary bucket of the key PREFETCH_AHEAD
 * places ahead is computed and prefetched, and halfway there its fullness
 * decides whether to prefetch level 1 as well, so that several cache misses
 * are in flight per thread instead of one. */
static void run_chunk(void *arg, size_t task)
{
    batch *bt = arg;
    const store *s = bt->s;
    const uint32_t vb = s->value_bytes;
    const int write = bt->op != OP_FIND;
    tally *ty = &bt->tallies[task];
    size_t lo = task * CHUNK, hi = lo + CHUNK < bt->n ? lo + CHUNK : bt->n;
    uint64_t ring_b[PREFETCH_AHEAD], ring_rem[PREFETCH_AHEAD];
    memset(ty, 0, sizeof *ty);
#define KEY_AT(k) bt->keys[bt->subset ? bt->subset[k] : (k)]
    for (size_t k = lo; k < hi && k < lo + PREFETCH_AHEAD; k++) {
        floe_split(&s->g, 0, 0, KEY_AT(k), &ring_b[k % PREFETCH_AHEAD], &ring_rem[k % PREFETCH_AHEAD]);
        prefetch_bucket(s, 0, ring_b[k % PREFETCH_AHEAD], write);
    }
    for (size_t k = lo; k < hi; k++) {
        const size_t slot = k % PREFETCH_AHEAD;
        const uint64_t b0 = ring_b[slot], rem0 = ring_rem[slot];
        if (k + PREFETCH_AHEAD < hi) {
            floe_split(&s->g, 0, 0, KEY_AT(k + PREFETCH_AHEAD), &ring_b[slot], &ring_rem[slot]);
            prefetch_bucket(s, 0, ring_b[slot], write);
        }
        if (k + PREFETCH_AHEAD / 2 < hi) {
            const size_t half = (k + PREFETCH_AHEAD / 2) % PREFETCH_AHEAD;
            prefetch_deeper(s, KEY_AT(k + PREFETCH_AHEAD / 2), ring_b[half], write);
        }
        size_t i = bt->subset ? bt->subset[k] : k;
        if (bt->rep && bt->rep[i] != i)
            continue; /* a later occurrence: answered after the batch */
        uint64_t key = bt->keys[i];
        switch (bt->op) {
        case OP_INSERT: {
            uint64_t v = vb ? value_in(bt->values, vb, bt->value_src ? bt->value_src[i] : i) : 0;
            put_result r = put_one(s, key, b0, rem0, v, bt->mode);
            bt->results[i] = r.result;
            if (bt->ids)
                bt->ids[i] = r.id;
            if (bt->values_out)
                value_out(bt->values_out, vb, i, r.value);
            if (r.result == FLOE_INSERTED)
                ty->used[r.level]++;
            ty->c[r.result]++;
            break;
        }
        case OP_FIND: {
            location loc;
            bool hit = locate(s, key, b0, rem0, &loc);
            bt->results[i] = hit ? FLOE_PRESENT : FLOE_ABSENT;
            if (bt->ids)
                bt->ids[i] = hit ? loc.id : FLOE_NO_ID;
            if (bt->values_out)
                value_out(bt->values_out, vb, i, hit ? value_load(s, loc.id) : 0);
            ty->c[bt->results[i]]++;
            break;
        }
        case OP_ERASE: {
            uint32_t level;
            bool gone = erase_one(s, key, b0, rem0, &level);
            bt->results[i] = gone ? FLOE_ERASED : FLOE_ABSENT;
            ty->tombstones += gone;
            ty->c[bt->results[i]]++;
            break;
        }
        }
    }
#undef KEY_AT
}

static size_t batch_tasks(size_t n)
{
    return (n + CHUNK - 1) / CHUNK;
}

/* Runs bt over the pool and adds its effects to the table's counters.
 * bt->tallies has room for batch_tasks(bt->n) entries. */
static tally run_batch(iceberg *t, batch *bt)
{
    size_t tasks = batch_tasks(bt->n);
    tally sum;
    memset(&sum, 0, sizeof sum);
    floe_pool_run(tasks > 1 ? t->pool : NULL, tasks, run_chunk, bt);
    for (size_t k = 0; k < tasks; k++) {
        for (int r = 0; r < 5; r++)
            sum.c[r] += bt->tallies[k].c[r];
        for (int l = 0; l < FLOE_LEVELS; l++)
            sum.used[l] += bt->tallies[k].used[l];
        sum.tombstones += bt->tallies[k].tombstones;
    }
    for (int l = 0; l < FLOE_LEVELS; l++)
        if (sum.used[l])
            atomic_fetch_add_explicit(&t->used[l], sum.used[l], memory_order_relaxed);
    if (sum.tombstones)
        atomic_fetch_add_explicit(&t->tombstones, sum.tombstones, memory_order_relaxed);
    return sum;
}

/* run_batch on the current storage, under the read lock; *gen (if not NULL)
 * gets the generation the batch ran on. */
static tally run_locked(iceberg *t, batch *bt, uint64_t *gen)
{
    pthread_rwlock_rdlock(&t->lock);
    bt->s = &t->s;
    if (gen)
        *gen = atomic_load(&t->generation);
    tally ty = run_batch(t, bt);
    pthread_rwlock_unlock(&t->lock);
    return ty;
}

/* ---- what the door checked ------------------------------------------------------------ */

/* A batch of keys as floe_request_check lets it through (the caller ran it:
 * floe_table_submit, or floed per request): asserted, not checked again;
 * the pass over the keys only in FLOE_DEBUG builds. */
static void assert_keys(const iceberg *t, const uint64_t *keys, size_t n, const uint8_t *results)
{
    assert(n < ((size_t)1 << 32));
    assert(n == 0 || (keys && results));
    FLOE_DEBUG_ASSERT(floe_keys_fit(t->spec.key_bits, keys, n));
    (void)t, (void)keys, (void)n, (void)results;
}

/* ---- growth ---------------------------------------------------------------------------- */

typedef struct rebuild_job {
    const store *from;
    const store *to;
    uint32_t level;
    uint64_t buckets_per_task;
    tally *tallies;
    _Atomic int failed;  /* a key found no room */
    _Atomic int damaged; /* a key was in two slots */
} rebuild_job;

/* Keys a rebuild task reads before it puts them, their new buckets
 * prefetched meanwhile: the puts land at random in the new arrays. */
#define REBUILD_GROUP 64u

typedef struct rebuild_group {
    uint64_t key[REBUILD_GROUP], value[REBUILD_GROUP], bucket[REBUILD_GROUP], rem[REBUILD_GROUP];
    unsigned n;
} rebuild_group;

/* Puts the group's keys into the new store; false (the job marked) where
 * one found no room or was there already. */
static bool rebuild_put_group(rebuild_job *rj, rebuild_group *g, tally *ty)
{
    for (unsigned j = 0; j < g->n; j++) {
        put_result r = put_one(rj->to, g->key[j], g->bucket[j], g->rem[j], g->value[j], false);
        if (r.result != FLOE_INSERTED) {
            atomic_store(r.result == FLOE_PRESENT ? &rj->damaged : &rj->failed, 1);
            return false;
        }
        ty->used[r.level]++;
    }
    g->n = 0;
    return true;
}

static void rebuild_chunk(void *arg, size_t task)
{
    rebuild_job *rj = arg;
    const store *from = rj->from;
    const floe_level *lv = &from->g.level[rj->level];
    uint64_t nb = floe_level_buckets(lv);
    uint64_t lo = task * rj->buckets_per_task;
    uint64_t hi = lo + rj->buckets_per_task < nb ? lo + rj->buckets_per_task : nb;
    tally *ty = &rj->tallies[task];
    memset(ty, 0, sizeof *ty);
    uint64_t snap[MAX_WORDS];
    rebuild_group g;
    g.n = 0;
    for (uint64_t b = lo; b < hi; b++) {
        snapshot(bucket_ptr(from, rj->level, b), lv->words, snap);
        for (uint32_t i = 0; i < lv->slots; i++) {
            uint64_t row = floe_row_get(snap, lv->row_bits, i);
            if (!floe_row_is_key(row, lv->row_bits))
                continue;
            const unsigned j = g.n++;
            g.key[j] =
                floe_join(&from->g, rj->level, floe_row_choice(rj->level, row), b, floe_row_remainder(rj->level, row));
            g.value[j] = from->value_bytes ? value_load(from, floe_slot_id(&from->g, rj->level, b, i)) : 0;
            floe_split(&rj->to->g, 0, 0, g.key[j], &g.bucket[j], &g.rem[j]);
            prefetch_bucket(rj->to, 0, g.bucket[j], 1);
            if (rj->to->value_bytes) { /* the bucket's values lie together: one of them takes this key's */
                const floe_level *nl = &rj->to->g.level[0];
                const char *v0 =
                    (const char *)rj->to->values + floe_slot_id(&rj->to->g, 0, g.bucket[j], 0) * rj->to->value_bytes;
                for (uint32_t off = 0; off < nl->slots * rj->to->value_bytes; off += 64)
                    __builtin_prefetch(v0 + off, 1);
            }
            if (g.n == REBUILD_GROUP && !rebuild_put_group(rj, &g, ty))
                return;
        }
    }
    rebuild_put_group(rj, &g, ty);
}

/* A rebuild from `from` into `to` that moves the primary level group by
 * group (floe_geometry_splits: a doubling, an old bucket into two;
 * floe_geometry_spreads: by a half, two into three, or by a third, three
 * into four).  A primary bucket is the permuted key's bits above the
 * remainder (and, with three, the remainder's value mod 3), and the
 * permutation does not depend on the size, so each group's keys belong to
 * its new buckets alone, where they are the first keys: they move in order,
 * with no search and no random access.  Keys past a new bucket's slots (a
 * spread's, rarely) are put as any key is, deeper. */
typedef struct split_job {
    const store *from, *to;
    int shape; /* floe_geometry_moves_by_group */
    uint64_t groups_per_task;
    tally *tallies;
    _Atomic int failed; /* a key past its new bucket found no room deeper */
} split_job;

static void split_chunk(void *arg, size_t task)
{
    split_job *sj = arg;
    const store *from = sj->from, *to = sj->to;
    const floe_level *a = &from->g.level[0], *b = &to->g.level[0];
    const uint64_t groups = floe_level_buckets(a) / floe_spread_olds(sj->shape);
    const uint64_t lo = task * sj->groups_per_task,
                   hi = lo + sj->groups_per_task < groups ? lo + sj->groups_per_task : groups;
    tally *ty = &sj->tallies[task];
    memset(ty, 0, sizeof *ty);
    for (uint64_t gi = lo; gi < hi; gi++) {
        uint64_t old[FLOE_SPREAD_OLD_MAX], nw[FLOE_SPREAD_NEW_MAX], snap[MAX_WORDS],
            out[FLOE_SPREAD_NEW_MAX][MAX_WORDS];
        unsigned nold, nnew, nover = 0;
        uint32_t n[FLOE_SPREAD_NEW_MAX] = {0};
        uint64_t over_key[FLOE_SPREAD_OLD_MAX * FLOE_L0_SLOTS], over_value[FLOE_SPREAD_OLD_MAX * FLOE_L0_SLOTS];
        floe_spread_group(&from->g, sj->shape, gi, old, &nold, nw, &nnew);
        memset(out, 0, sizeof out);
        for (unsigned k = 0; k < nold; k++) {
            snapshot(bucket_ptr(from, 0, old[k]), a->words, snap);
            for (uint32_t i = 0; i < a->slots; i++) {
                const uint64_t row = floe_row_get(snap, a->row_bits, i);
                if (!floe_row_is_key(row, a->row_bits))
                    continue; /* empty, or a tombstone that the growth drops */
                const uint64_t rem = floe_row_remainder(0, row);
                uint64_t nrem;
                const unsigned d = floe_spread_dest(&from->g, &to->g, sj->shape, k, old[k], rem, &nrem);
                const uint64_t value = to->value_bytes ? value_load(from, floe_slot_id(&from->g, 0, old[k], i)) : 0;
                if (n[d] == b->slots) { /* put deeper once the group's buckets are written */
                    over_key[nover] = floe_join(&from->g, 0, 0, old[k], rem);
                    over_value[nover++] = value;
                    continue;
                }
                const uint32_t j = n[d]++, w = floe_row_word(b->row_bits, j);
                out[d][w] = floe_row_put(out[d][w], b->row_bits, j, floe_row_encode(0, nrem, 0));
                if (to->value_bytes)
                    value_store(to, floe_slot_id(&to->g, 0, nw[d], j), value);
            }
        }
        for (unsigned d = 0; d < nnew; d++) {
            aword *dst = bucket_ptr(to, 0, nw[d]);
            for (uint32_t w = 0; w < b->words; w++)
                atomic_store_explicit(&dst[w], out[d][w], memory_order_relaxed);
            ty->used[0] += n[d];
        }
        for (unsigned k = 0; k < nover; k++) {
            uint64_t bk, rk;
            floe_split(&to->g, 0, 0, over_key[k], &bk, &rk);
            const put_result r = put_one(to, over_key[k], bk, rk, over_value[k], false);
            if (r.result != FLOE_INSERTED) {
                atomic_store(&sj->failed, 1);
                return;
            }
            ty->used[r.level]++;
        }
    }
}

/* Rebuilds t into 2^addr_bits primary buckets (1.5 times that with three),
 * into *ready if not NULL (that size's arrays, allocated before the lock was
 * taken: it is taken over); caller holds the write lock. */
static floe_status rebuild_locked(iceberg *t, uint32_t addr_bits, uint32_t three, store *ready, floe_errinfo *err)
{
    uint32_t max = floe_max_addr_bits(t->spec.key_bits);
    for (;; addr_bits++, three = 0) { /* where the size cannot hold every key: the next power of two */
        if (addr_bits > max) {
            if (ready)
                store_free(ready);
            return floe_errinfo_set(err, FLOE_ERR_FULL, "table cannot grow past 2^%u primary buckets", max);
        }
        store ns;
        floe_status st = FLOE_OK;
        if (ready) {
            ns = *ready;
            ready = NULL;
        } else {
            st = store_alloc(&ns, &t->spec, addr_bits, three, err);
        }
        if (st != FLOE_OK)
            return st;
        uint64_t used[FLOE_LEVELS] = {0, 0, 0};
        bool failed = false, damaged = false;
        uint32_t first = 0; /* the first level moved key by key */
        const int shape = floe_geometry_moves_by_group(&t->s.g, &ns.g);
        if (shape) {
            split_job sj = {.from = &t->s, .to = &ns, .shape = shape, .groups_per_task = 4096 / (unsigned)shape};
            const uint64_t groups = floe_level_buckets(&t->s.g.level[0]) / floe_spread_olds(shape);
            const size_t tasks = (size_t)((groups + sj.groups_per_task - 1) / sj.groups_per_task);
            if (!(sj.tallies = floe_calloc(tasks, sizeof *sj.tallies))) {
                store_free(&ns);
                return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory rebuilding");
            }
            atomic_init(&sj.failed, 0);
            floe_pool_run(t->pool, tasks, split_chunk, &sj);
            for (size_t k = 0; k < tasks; k++)
                for (int m = 0; m < FLOE_LEVELS; m++)
                    used[m] += sj.tallies[k].used[m];
            free(sj.tallies);
            failed = atomic_load(&sj.failed) != 0;
            first = 1;
        }
        for (uint32_t l = first; l < FLOE_LEVELS && !failed && !damaged; l++) {
            uint64_t nb = floe_level_buckets(&t->s.g.level[l]);
            rebuild_job rj = {.from = &t->s, .to = &ns, .level = l, .buckets_per_task = 1024};
            size_t tasks = (size_t)((nb + rj.buckets_per_task - 1) / rj.buckets_per_task);
            rj.tallies = floe_calloc(tasks, sizeof *rj.tallies);
            if (!rj.tallies) {
                store_free(&ns);
                return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory rebuilding");
            }
            atomic_init(&rj.failed, 0);
            atomic_init(&rj.damaged, 0);
            floe_pool_run(t->pool, tasks, rebuild_chunk, &rj);
            failed = atomic_load(&rj.failed) != 0;
            damaged = atomic_load(&rj.damaged) != 0;
            for (size_t k = 0; k < tasks; k++)
                for (int m = 0; m < FLOE_LEVELS; m++)
                    used[m] += rj.tallies[k].used[m];
            free(rj.tallies);
        }
        if (damaged) { /* no size would hold it: refuse rather than grow without end */
            store_free(&ns);
            return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "table %s is damaged: a key is stored twice", t->spec.name);
        }
        if (failed) { /* the new size could not hold every key: try larger */
            store_free(&ns);
            continue;
        }
        store_free(&t->s);
        t->s = ns;
        t->addr_bits = addr_bits;
        t->three = three;
        for (int l = 0; l < FLOE_LEVELS; l++)
            atomic_store(&t->used[l], used[l]);
        atomic_store(&t->tombstones, 0);
        atomic_fetch_add(&t->generation, 1);
        return FLOE_OK;
    }
}

static uint64_t used_slots(iceberg *t)
{
    uint64_t u = 0;
    for (int l = 0; l < FLOE_LEVELS; l++)
        u += atomic_load_explicit(&t->used[l], memory_order_relaxed);
    return u;
}

/* The size a growth takes t to: 2^(a+1) primary buckets, from 2^a (a
 * split) or from 1.5 x 2^a (three into four: floe_geometry_spreads).
 * Steps by a half and a third (2^a -> 1.5 x 2^a -> 2^(a+1), spreads both)
 * would keep the arrays within 1.5 times what the keys fill instead of 2,
 * at twice the growths: docs/PERFORMANCE.md, "G1 in steps of a half". */
static void next_size(const iceberg *t, uint32_t *addr_bits, uint32_t *three)
{
    *addr_bits = t->addr_bits + 1;
    *three = 0;
}

/* Whether a growth rebuilds at the same size: tombstones hold most of the
 * occupied space, which a rebuild reclaims.  Otherwise it takes the next
 * size (next_size). */
static bool grow_in_place(iceberg *t)
{
    uint64_t keys = used_slots(t) - atomic_load(&t->tombstones);
    return (double)keys < t->spec.max_fill * 0.5 * (double)t->s.g.total_slots;
}

/* How many of an insert's `distinct` keys are likely new: the share of the
 * last insert's (all of them before the first). */
static uint64_t likely_new(const iceberg *t, size_t distinct)
{
    const uint64_t d = atomic_load_explicit(&t->last_distinct, memory_order_relaxed);
    const uint64_t k = atomic_load_explicit(&t->last_new, memory_order_relaxed);
    return d ? (uint64_t)((double)distinct * (double)k / (double)d) : distinct;
}

/* A growth's new arrays, their making timed (keys_while_made). */
static bool make_next(iceberg *t, store *s, uint32_t addr_bits, uint32_t three)
{
    const uint64_t t0 = floe_now_ns();
    if (store_alloc(s, &t->spec, addr_bits, three, NULL) != FLOE_OK)
        return false;
    atomic_store_explicit(&t->made_slots, s->g.total_slots, memory_order_relaxed);
    atomic_store_explicit(&t->made_ns, floe_now_ns() - t0, memory_order_relaxed);
    return true;
}

static void *prepare_main(void *arg)
{
    iceberg *t = arg;
    t->next.ok = make_next(t, &t->next.s, t->next.addr_bits, t->next.three);
    return NULL;
}

/* New keys the table will likely take while the arrays of `slots` slots
 * are made: the last arrays' time scaled to these, at the last insert's
 * rate (the table's first arrays guide its first growth). */
static uint64_t keys_while_made(const iceberg *t, uint64_t slots)
{
    const uint64_t ms = atomic_load_explicit(&t->made_slots, memory_order_relaxed);
    const uint64_t mns = atomic_load_explicit(&t->made_ns, memory_order_relaxed);
    const uint64_t k = atomic_load_explicit(&t->last_new, memory_order_relaxed);
    const uint64_t kns = atomic_load_explicit(&t->last_new_ns, memory_order_relaxed);
    if (!ms || !kns)
        return 0;
    return (uint64_t)((double)mns * ((double)slots / (double)ms) * ((double)k / (double)kns));
}

/* Starts making the arrays of a size the next batch will likely grow the
 * table to: faulting in the arrays of a large table takes about as long as
 * a batch, which then no batch waits for. */
static void prepare_start(iceberg *t, uint32_t addr_bits, uint32_t three)
{
    pthread_mutex_lock(&t->next.lock);
    if (!t->next.started && !t->next.ok && addr_bits <= floe_max_addr_bits(t->spec.key_bits)) {
        t->next.addr_bits = addr_bits;
        t->next.three = three;
        t->next.ok = false;
        t->next.started = pthread_create(&t->next.thread, NULL, prepare_main, t) == 0;
    }
    pthread_mutex_unlock(&t->next.lock);
}

/* Waits for a preparation under way (next.lock held): afterwards next.ok
 * says whether arrays are made. */
static void prepare_wait(iceberg *t)
{
    if (t->next.started) {
        pthread_join(t->next.thread, NULL);
        t->next.started = false;
    }
}

/* The arrays prepare_start made, if of that size (true, into *out); any
 * others are freed. */
static bool prepare_take(iceberg *t, uint32_t addr_bits, uint32_t three, store *out)
{
    bool have = false;
    pthread_mutex_lock(&t->next.lock);
    prepare_wait(t);
    if (t->next.ok && t->next.addr_bits == addr_bits && t->next.three == three) {
        *out = t->next.s;
        have = true;
    } else if (t->next.ok) {
        store_free(&t->next.s);
    }
    t->next.ok = false;
    pthread_mutex_unlock(&t->next.lock);
    return have;
}

/* The bytes of the arrays made ahead (waiting for them if they are being
 * made), 0 if none. */
static uint64_t prepared_bytes(iceberg *t)
{
    pthread_mutex_lock(&t->next.lock);
    prepare_wait(t);
    const store *n = &t->next.s;
    const uint64_t bytes = t->next.ok ? n->bytes[0] + n->bytes[1] + n->bytes[2] + n->values_bytes : 0;
    pthread_mutex_unlock(&t->next.lock);
    return bytes;
}

/* With grow on: rebuild before a batch whose likely new keys (`expect`)
 * would take occupied slots past max_fill, rather than after it has filled
 * the table and some of its keys came back FULL: the new arrays are then
 * allocated and faulted in before the write lock is taken, while batches
 * still run, and the table grows before its overflow levels fill.  The
 * batches wait while the keys move (the write lock; a doubling splits the
 * primary level's buckets in order: floe_geometry_splits).  Where the batch after
 * this one likely will, or the keys likely to come while the arrays are
 * made (keys_while_made, three times over: the host may be busier) would, they are made
 * meanwhile (prepare_start): early enough that no batch waits for them,
 * and late enough that a table that stops short of its growth seldom holds
 * them unused. */
static void grow_if_due(iceberg *t, uint64_t expect)
{
    if (!t->spec.grow)
        return;
    pthread_rwlock_rdlock(&t->lock);
    const double room = t->spec.max_fill * (double)t->s.g.total_slots;
    const bool over = (double)(used_slots(t) + expect) > room;
    const bool same = grow_in_place(t);
    uint32_t addr_bits = t->addr_bits, three = t->three;
    if (!same)
        next_size(t, &addr_bits, &three);
    floe_geometry next;
    floe_geometry_init(&next, t->spec.key_bits, addr_bits, three, t->spec.seed);
    const uint64_t lead = keys_while_made(t, next.total_slots) * 3;
    const bool soon = !over && (double)(used_slots(t) + (2 * expect > lead ? 2 * expect : lead)) > room;
    const uint64_t gen = atomic_load(&t->generation);
    pthread_rwlock_unlock(&t->lock);
    if (soon)
        prepare_start(t, addr_bits, three);
    if (!over)
        return;
    store ready;
    const bool have = prepare_take(t, addr_bits, three, &ready) ||
                      (addr_bits <= floe_max_addr_bits(t->spec.key_bits) && make_next(t, &ready, addr_bits, three));
    pthread_rwlock_wrlock(&t->lock);
    if (atomic_load(&t->generation) == gen &&
        (double)(used_slots(t) + expect) > t->spec.max_fill * (double)t->s.g.total_slots)
        rebuild_locked(t, addr_bits, three, have ? &ready : NULL, NULL); /* on failure: as it is */
    else if (have)
        store_free(&ready); /* another batch grew it meanwhile */
    pthread_rwlock_unlock(&t->lock);
}

/* maxmemory (floe_alloc_set_budget): a growing table's insert of `distinct` keys that could
 * need its next growth, where the budget would not allow that growth, is refused whole before
 * anything is stored, rather than failing halfway through with some of its keys in.  Arrays
 * made ahead for it are held already (the budget counts them): the growth needs no more. */
static bool growth_out_of_budget(iceberg *t, size_t distinct, floe_errinfo *err)
{
    if (!t->spec.grow)
        return false;
    pthread_rwlock_rdlock(&t->lock);
    const bool may_grow = (double)(used_slots(t) + distinct) > t->spec.max_fill * (double)t->s.g.total_slots;
    uint32_t addr_bits, three;
    next_size(t, &addr_bits, &three);
    const uint64_t next = store_bytes(&t->spec, addr_bits, three);
    pthread_rwlock_unlock(&t->lock);
    if (!may_grow || floe_alloc_fits(next) || prepared_bytes(t) >= next) /* the wait: only near the limit */
        return false;
    return floe_alloc_growth_refused(t->spec.name, distinct, "keys", next, err);
}

/* ---- public API ------------------------------------------------------------------------ */

uint32_t iceberg_addr_bits_for(uint32_t key_bits, uint64_t capacity)
{
    uint32_t a = floe_min_addr_bits(key_bits), max = floe_max_addr_bits(key_bits);
    floe_geometry g;
    for (; a < max; a++) {
        floe_geometry_init(&g, key_bits, a, 0, 0);
        if ((double)g.total_slots * FLOE_DEFAULT_MAX_FILL >= (double)capacity)
            break;
    }
    return a;
}

uint32_t iceberg_size_for(uint32_t key_bits, uint64_t capacity, uint32_t *three)
{
    const uint32_t a = iceberg_addr_bits_for(key_bits, capacity);
    *three = 0;
    if (a > floe_min_addr_bits(key_bits) && a - 1 >= 1) { /* 1.5 x 2^(a-1), between 2^(a-1) and 2^a */
        floe_geometry g, whole;
        floe_geometry_init(&g, key_bits, a - 1, 1, 0);
        floe_geometry_init(&whole, key_bits, a, 0, 0);
        /* it must hold the capacity, and take no more bytes: a bit less of address can widen its rows */
        if ((double)g.total_slots * FLOE_DEFAULT_MAX_FILL >= (double)capacity && rows_bytes(&g) <= rows_bytes(&whole)) {
            *three = 1;
            return a - 1;
        }
    }
    return a;
}

uint64_t iceberg_bytes_at(const floe_spec *spec, uint32_t addr_bits, uint32_t three)
{
    return store_bytes(spec, addr_bits, three);
}

void iceberg_step_up(uint32_t *addr_bits, uint32_t *three)
{
    if (*three) {
        *addr_bits += 1;
        *three = 0;
    } else {
        *three = 1;
    }
}

uint64_t iceberg_bytes_for(const floe_spec *spec)
{
    uint32_t three;
    const uint32_t a = iceberg_size_for(spec->key_bits, spec->capacity, &three);
    return store_bytes(spec, a, three);
}

floe_status iceberg_size_check(uint32_t key_bits, uint32_t addr_bits, uint32_t three, floe_errinfo *err)
{
    if (addr_bits < floe_min_addr_bits(key_bits) || addr_bits > floe_max_addr_bits(key_bits))
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "primary address bits must be %u..%u for key_bits = %u",
                                floe_min_addr_bits(key_bits), floe_max_addr_bits(key_bits), key_bits);
    if (three > 1 || (three && addr_bits < 1))
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "1.5 x 2^%u primary buckets is not a table size", addr_bits);
    return FLOE_OK;
}

floe_status iceberg_create_sized(const floe_spec *spec, uint32_t addr_bits, uint32_t three, floe_pool *pool,
                                 iceberg **out, floe_errinfo *err)
{
    floe_status st = floe_spec_validate(spec, err);
    if (st != FLOE_OK)
        return st;
    if (spec->kind != FLOE_KIND_SET && spec->kind != FLOE_KIND_MAP && spec->kind != FLOE_KIND_STATIC)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "the iceberg engine holds SET and MAP tables (and STATIC ones while they fill), not %s",
                                floe_kind_name(spec->kind));
    if ((st = iceberg_size_check(spec->key_bits, addr_bits, three, err)) != FLOE_OK)
        return st;
    iceberg *t = floe_calloc(1, sizeof *t);
    if (!t)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    t->spec = *spec;
    while (t->spec.seed == 0)
        if (getrandom(&t->spec.seed, sizeof t->spec.seed, 0) != sizeof t->spec.seed)
            t->spec.seed = 0x6A09E667F3BCC909ull; /* no entropy: a fixed seed still works */
    t->pool = pool;
    t->addr_bits = addr_bits;
    t->three = three;
    pthread_mutex_init(&t->next.lock, NULL);
    const uint64_t t0 = floe_now_ns();
    st = store_alloc(&t->s, &t->spec, addr_bits, three, err);
    atomic_store_explicit(&t->made_slots, t->s.g.total_slots, memory_order_relaxed); /* the first growth's guide */
    atomic_store_explicit(&t->made_ns, floe_now_ns() - t0, memory_order_relaxed);
    if (st != FLOE_OK) {
        pthread_mutex_destroy(&t->next.lock);
        free(t);
        return st;
    }
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    /* A waiting rebuild must not starve behind a stream of batches. */
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&t->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    *out = t;
    return FLOE_OK;
}

floe_status iceberg_create(const floe_spec *spec, floe_pool *pool, iceberg **out, floe_errinfo *err)
{
    floe_status st = floe_spec_validate(spec, err);
    if (st != FLOE_OK)
        return st;
    uint32_t three;
    const uint32_t a = iceberg_size_for(spec->key_bits, spec->capacity, &three);
    return iceberg_create_sized(spec, a, three, pool, out, err);
}

void iceberg_destroy(iceberg *t)
{
    if (!t)
        return;
    store unused;
    prepare_take(t, UINT32_MAX, 0, &unused); /* joins a preparation, frees what it made */
    pthread_mutex_destroy(&t->next.lock);
    store_free(&t->s);
    pthread_rwlock_destroy(&t->lock);
    free(t);
}

const floe_spec *iceberg_spec(const iceberg *t)
{
    return &t->spec;
}

floe_status iceberg_insert(iceberg *t, const uint64_t *keys, size_t n, const void *values, size_t values_len,
                           floe_value_mode mode, uint8_t *results, uint64_t *ids, void *values_out,
                           floe_answer_counts *counts, floe_errinfo *err)
{
    const uint32_t vb = floe_spec_has_values(&t->spec) ? t->spec.value_bytes : 0;
    const bool overwrite = mode == FLOE_VALUES_OVERWRITE, add = mode == FLOE_VALUES_ADD;
    const uint64_t t_start = floe_now_ns();
    floe_status st = FLOE_OK;
    assert_keys(t, keys, n, results);
    assert(vb ? values_len == n * vb && (n == 0 || values) : !values_len && !values_out && !overwrite && !add);
    if (n == 0) {
        floe_answer_counts_tally(counts, results, 0);
        return FLOE_OK;
    }

    uint32_t *rep = floe_malloc(n * sizeof *rep);
    uint32_t *src = vb && (overwrite || add) ? floe_malloc(n * sizeof *src) : NULL;
    unsigned char *totals = vb && add ? floe_malloc(n * vb) : NULL; /* each key's deltas, added once */
    uint32_t *retry = floe_malloc(n * sizeof *retry);
    uint8_t *scratch = floe_malloc(n);
    tally *tallies = floe_calloc(batch_tasks(n), sizeof *tallies);
    size_t distinct;
    if (!rep || (vb && (overwrite || add) && !src) || (vb && add && !totals) || !retry || !scratch || !tallies) {
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory for a batch of %zu keys", n);
        goto out;
    }
    st = floe_dedup(t->pool, keys, n, rep, &distinct, err);
    if (st != FLOE_OK)
        goto out;
    if (src && overwrite) /* an upsert stores the last occurrence's value */
        floe_dedup_value_src(rep, n, src);
    if (totals)
        floe_dedup_totals(rep, n, vb, values, totals);

    grow_if_due(t, likely_new(t, distinct));
    if (growth_out_of_budget(t, distinct, err)) {
        st = FLOE_ERR_NO_MEMORY;
        goto out;
    }
    batch bt = {.op = OP_INSERT,
                .mode = mode,
                .keys = keys,
                .n = n,
                .rep = rep,
                .value_src = overwrite ? src : NULL,
                .values = totals ? totals : values,
                .results = results,
                .ids = ids,
                .values_out = values_out,
                .tallies = tallies};
    uint64_t gen;
    tally ty = run_locked(t, &bt, &gen);

    /* FULL keys with grow on: rebuild at twice the size and retry them. */
    bool rebuilt = false;
    while (ty.c[FLOE_FULL] > 0 && t->spec.grow) {
        size_t nr = 0;
        for (size_t i = 0; i < n; i++)
            if (rep[i] == i && results[i] == FLOE_FULL)
                retry[nr++] = (uint32_t)i;
        pthread_rwlock_wrlock(&t->lock);
        floe_status gst = FLOE_OK;
        floe_errinfo gerr;
        uint32_t addr_bits, three;
        next_size(t, &addr_bits, &three);
        const bool at_max = addr_bits > floe_max_addr_bits(t->spec.key_bits);
        if (atomic_load(&t->generation) == gen) /* nobody else grew it meanwhile */
            gst = rebuild_locked(t, addr_bits, three, NULL, &gerr);
        pthread_rwlock_unlock(&t->lock);
        if (gst != FLOE_OK && at_max)
            break; /* as large as its key width allows: FULL stands */
        if (gst != FLOE_OK) {
            /* out of memory: the request fails (some of its keys may be stored), instead of FULL answers
             * that a growing table promises never to give */
            st = floe_errinfo_set(err, gst == FLOE_ERR_NO_MEMORY ? gst : FLOE_ERR_FULL,
                                  "table %s is full and could not grow: %s", t->spec.name, gerr.msg);
            goto out;
        }
        rebuilt = true;
        batch rb = bt;
        rb.subset = retry;
        rb.n = nr;
        ty = run_locked(t, &rb, &gen);
    }
    if (rebuilt && ids) { /* ids from before the rebuild are stale: look them up again */
        batch fb = {
            .op = OP_FIND, .keys = keys, .n = n, .rep = rep, .results = scratch, .ids = ids, .tallies = tallies};
        run_locked(t, &fb, NULL);
    }

    floe_dedup_settle(rep, n, distinct, vb, mode, values, src, results, ids, values_out);
    floe_answer_counts c;
    floe_answer_counts_tally(&c, results, n);
    if (counts)
        *counts = c;
    atomic_store_explicit(&t->last_distinct, distinct, memory_order_relaxed);
    atomic_store_explicit(&t->last_new, c.inserted, memory_order_relaxed);
    atomic_store_explicit(&t->last_new_ns, floe_now_ns() - t_start, memory_order_relaxed);
out:
    free(rep);
    free(src);
    free(totals);
    free(retry);
    free(scratch);
    free(tallies);
    return st;
}

floe_status iceberg_find(iceberg *t, const uint64_t *keys, size_t n, uint8_t *results, uint64_t *ids, void *values_out,
                         floe_answer_counts *counts, floe_errinfo *err)
{
    assert_keys(t, keys, n, results);
    assert(!values_out || floe_spec_has_values(&t->spec));
    tally *tallies = floe_calloc(batch_tasks(n) + 1, sizeof *tallies);
    if (!tallies)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory for a batch of %zu keys", n);
    /* Finds change nothing, so duplicates need no ordering. */
    batch bt = {.op = OP_FIND,
                .keys = keys,
                .n = n,
                .results = results,
                .ids = ids,
                .values_out = values_out,
                .tallies = tallies};
    run_locked(t, &bt, NULL);
    free(tallies);
    floe_answer_counts_tally(counts, results, n);
    return FLOE_OK;
}

floe_status iceberg_erase(iceberg *t, const uint64_t *keys, size_t n, uint8_t *results, floe_answer_counts *counts,
                          floe_errinfo *err)
{
    floe_status st = FLOE_OK;
    assert_keys(t, keys, n, results);
    if (n == 0) {
        floe_answer_counts_tally(counts, results, 0);
        return FLOE_OK;
    }
    uint32_t *rep = floe_malloc(n * sizeof *rep);
    tally *tallies = floe_calloc(batch_tasks(n), sizeof *tallies);
    size_t distinct;
    if (!rep || !tallies) {
        free(rep);
        free(tallies);
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory for a batch of %zu keys", n);
    }
    st = floe_dedup(t->pool, keys, n, rep, &distinct, err);
    if (st == FLOE_OK) {
        batch bt = {.op = OP_ERASE, .keys = keys, .n = n, .rep = rep, .results = results, .tallies = tallies};
        run_locked(t, &bt, NULL);
        for (size_t i = 0; i < n && distinct < n; i++)
            if (rep[i] != i)
                results[i] = FLOE_ABSENT; /* the first occurrence erased it, or it was absent */
        floe_answer_counts_tally(counts, results, n);
    }
    free(rep);
    free(tallies);
    return st;
}

floe_status iceberg_scan(iceberg *t, const floe_scan_pos *from, size_t limit, uint64_t *keys, void *values, size_t *n,
                         floe_scan_pos *next, int *done, floe_errinfo *err)
{
    const uint32_t vb = floe_spec_has_values(&t->spec) ? t->spec.value_bytes : 0;
    assert(!values || vb);      /* values in a scan: a MAP's (floe_request_check) */
    assert(limit == 0 || keys); /* the buffer (floe_batch_check) */
    pthread_rwlock_rdlock(&t->lock);
    const store *s = &t->s;
    uint64_t gen = atomic_load(&t->generation);
    uint64_t pos = from ? from->position : 0;
    if (from && from->generation != gen) {
        pthread_rwlock_unlock(&t->lock);
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "scan cursor is from generation %llu but the table was rebuilt (generation %llu): "
                                "start the scan again",
                                (unsigned long long)from->generation, (unsigned long long)gen);
    }
    if (pos > s->g.total_slots) {
        pthread_rwlock_unlock(&t->lock);
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "scan cursor position %llu is past the table's %llu slots",
                                (unsigned long long)pos, (unsigned long long)s->g.total_slots);
    }
    size_t got = 0;
    uint64_t budget = SCAN_MAX_SLOTS;
    while (pos < s->g.total_slots && got < limit && budget > 0) {
        uint32_t l, slot;
        uint64_t b;
        floe_slot_split(&s->g, pos, &l, &b, &slot);
        const floe_level *lv = &s->g.level[l];
        uint64_t word =
            atomic_load_explicit(&bucket_ptr(s, l, b)[floe_row_word(lv->row_bits, slot)], memory_order_acquire);
        uint64_t row = (word >> ((slot * lv->row_bits) & 63)) & floe_row_mask(lv->row_bits);
        if (floe_row_is_key(row, lv->row_bits)) {
            keys[got] = floe_join(&s->g, l, floe_row_choice(l, row), b, floe_row_remainder(l, row));
            if (values)
                value_out(values, vb, got, value_load(s, pos));
            got++;
        }
        pos++;
        budget--;
    }
    *n = got;
    next->position = pos;
    next->generation = gen;
    *done = pos >= s->g.total_slots;
    pthread_rwlock_unlock(&t->lock);
    return FLOE_OK;
}

int iceberg_key_at(const iceberg *t, uint64_t id, uint64_t *key)
{
    const store *s = &t->s;
    uint32_t l, slot;
    uint64_t b;
    int found = 0;
    if (floe_slot_split(&s->g, id, &l, &b, &slot)) {
        const floe_level *lv = &s->g.level[l];
        uint64_t word =
            atomic_load_explicit(&bucket_ptr(s, l, b)[floe_row_word(lv->row_bits, slot)], memory_order_acquire);
        uint64_t row = (word >> ((slot * lv->row_bits) & 63)) & floe_row_mask(lv->row_bits);
        if (floe_row_is_key(row, lv->row_bits)) {
            *key = floe_join(&s->g, l, floe_row_choice(l, row), b, floe_row_remainder(l, row));
            found = 1;
        }
    }
    return found;
}

uint64_t iceberg_generation(iceberg *t)
{
    return atomic_load(&t->generation);
}

uint64_t iceberg_used_slots(iceberg *t)
{
    return used_slots(t);
}

uint64_t iceberg_total_slots(const iceberg *t)
{
    return t->s.g.total_slots;
}

void iceberg_stats(iceberg *t, floe_table_stats *st)
{
    memset(st, 0, sizeof *st);
    pthread_rwlock_rdlock(&t->lock);
    const store *s = &t->s;
    st->spec = t->spec;
    st->tombstones = atomic_load(&t->tombstones);
    uint64_t used = used_slots(t);
    st->keys = used - st->tombstones;
    st->slots = s->g.total_slots;
    st->fill = (double)used / (double)st->slots;
    st->memory_bytes = s->bytes[0] + s->bytes[1] + s->bytes[2] + s->values_bytes;
    st->bytes_per_key = st->keys ? (double)st->memory_bytes / (double)st->keys : 0.0;
    st->generation = atomic_load(&t->generation);
    strcpy(st->backend, "cpu");
    for (int l = 0; l < FLOE_LEVELS; l++) {
        floe_level_stats *ls = &st->level[l];
        ls->slots = floe_level_slots(&s->g.level[l]);
        ls->used = atomic_load(&t->used[l]);
        st->used_bytes += ls->used * (s->g.level[l].row_bits / 8 + s->value_bytes);
        ls->row_bits = s->g.level[l].row_bits;
        ls->buckets_log2 = s->g.level[l].addr_bits;
        ls->fill = (double)ls->used / (double)ls->slots;
    }
    pthread_rwlock_unlock(&t->lock);
}

floe_status iceberg_rebuild(iceberg *t, uint32_t addr_bits, uint32_t three, floe_errinfo *err)
{
    pthread_rwlock_wrlock(&t->lock);
    if (addr_bits == 0) {
        addr_bits = t->addr_bits;
        three = t->three;
    }
    floe_status st = iceberg_size_check(t->spec.key_bits, addr_bits, three, err);
    if (st == FLOE_OK)
        st = rebuild_locked(t, addr_bits, three, NULL, err);
    pthread_rwlock_unlock(&t->lock);
    return st;
}
