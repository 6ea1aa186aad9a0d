/*
 * dedup.c - first occurrences inside a batch (see dedup.h).
 *
 * Partitioned hashing, so that no step needs atomics and every partition's
 * hash table stays in cache: (1) each chunk counts its keys per partition,
 * (2) prefix sums give every (chunk, partition) a place, (3) each chunk
 * scatters its indices there in order, so a partition lists its indices in
 * ascending order, (4) each partition is deduplicated with a private
 * open-addressing table; scanning in ascending order makes the first index
 * seen for a key its first occurrence.
 */
#include "dedup.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "floe_wire.h"

#define CHUNK       16384u /* keys per counting/scatter task */
#define PART_TARGET 8192u  /* keys per partition, so its table fits in L2 */
#define MAX_PARTS   4096u

static inline uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ull;
    x ^= x >> 33;
    return x;
}

typedef struct dedup_job {
    const uint64_t *keys;
    size_t n;
    uint32_t *rep;
    uint32_t *order; /* indices grouped by partition */
    size_t *counts;  /* [chunk][part]: counts, then start offsets */
    size_t *part_start;
    size_t *part_distinct;
    unsigned part_shift; /* partition = mix(key) >> part_shift */
    unsigned parts;
    size_t chunks;
    int failed;
} dedup_job;

static inline unsigned part_of(const dedup_job *d, uint64_t key)
{
    return d->parts == 1 ? 0u : (unsigned)(mix(key) >> d->part_shift);
}

static void count_chunk(void *arg, size_t c)
{
    dedup_job *d = arg;
    size_t *cnt = d->counts + c * d->parts;
    size_t end = (c + 1) * CHUNK < d->n ? (c + 1) * CHUNK : d->n;
    for (size_t i = c * CHUNK; i < end; i++)
        cnt[part_of(d, d->keys[i])]++;
}

static void scatter_chunk(void *arg, size_t c)
{
    dedup_job *d = arg;
    size_t *pos = d->counts + c * d->parts;
    size_t end = (c + 1) * CHUNK < d->n ? (c + 1) * CHUNK : d->n;
    for (size_t i = c * CHUNK; i < end; i++)
        d->order[pos[part_of(d, d->keys[i])]++] = (uint32_t)i;
}

static void dedup_part(void *arg, size_t p)
{
    dedup_job *d = arg;
    size_t lo = d->part_start[p], hi = d->part_start[p + 1], m = hi - lo;
    if (m == 0)
        return;
    size_t cap = 16;
    while (cap < 2 * m)
        cap <<= 1;
    uint32_t *slot = floe_calloc(cap, sizeof *slot); /* index + 1; 0 = empty */
    if (!slot) {
        d->failed = 1;
        return;
    }
    size_t distinct = 0;
    for (size_t k = lo; k < hi; k++) {
        uint32_t i = d->order[k];
        uint64_t key = d->keys[i];
        size_t h = (size_t)mix(key) & (cap - 1);
        for (;;) {
            uint32_t s = slot[h];
            if (s == 0) {
                slot[h] = i + 1;
                d->rep[i] = i;
                distinct++;
                break;
            }
            if (d->keys[s - 1] == key) {
                d->rep[i] = s - 1;
                break;
            }
            h = (h + 1) & (cap - 1);
        }
    }
    d->part_distinct[p] = distinct;
    free(slot);
}

floe_status floe_dedup(floe_pool *pool, const uint64_t *keys, size_t n, uint32_t *rep, size_t *distinct,
                       floe_errinfo *err)
{
    if (n >= ((size_t)1 << 32))
        return floe_errinfo_set(err, FLOE_ERR_TOO_LARGE, "a batch holds at most 2^32 - 1 keys");
    dedup_job d = {.keys = keys, .n = n, .rep = rep, .parts = 1};
    while (d.parts < MAX_PARTS && (size_t)d.parts * PART_TARGET < n)
        d.parts <<= 1;
    unsigned log2p = 0;
    while ((1u << log2p) < d.parts)
        log2p++;
    d.part_shift = 64 - log2p;
    d.chunks = (n + CHUNK - 1) / CHUNK;
    d.counts = floe_calloc(d.chunks * d.parts + 1, sizeof *d.counts);
    d.part_start = floe_calloc(d.parts + 1, sizeof *d.part_start);
    d.part_distinct = floe_calloc(d.parts, sizeof *d.part_distinct);
    d.order = floe_malloc((n ? n : 1) * sizeof *d.order);
    floe_status st = FLOE_OK;
    if (!d.counts || !d.part_start || !d.part_distinct || !d.order) {
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory deduplicating a batch of %zu keys", n);
        goto out;
    }
    floe_pool_run(pool, d.chunks, count_chunk, &d);
    /* Exclusive prefix sum in (partition, chunk) order: partition p's indices
     * come chunk by chunk, so they stay in ascending order. */
    size_t sum = 0;
    for (unsigned p = 0; p < d.parts; p++) {
        d.part_start[p] = sum;
        for (size_t c = 0; c < d.chunks; c++) {
            size_t v = d.counts[c * d.parts + p];
            d.counts[c * d.parts + p] = sum;
            sum += v;
        }
    }
    d.part_start[d.parts] = sum;
    floe_pool_run(pool, d.chunks, scatter_chunk, &d);
    floe_pool_run(pool, d.parts, dedup_part, &d);
    if (d.failed) {
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory deduplicating a batch of %zu keys", n);
        goto out;
    }
    size_t total = 0;
    for (unsigned p = 0; p < d.parts; p++)
        total += d.part_distinct[p];
    *distinct = total;
out:
    free(d.counts);
    free(d.part_start);
    free(d.part_distinct);
    free(d.order);
    return st;
}

void floe_dedup_value_src(const uint32_t *rep, size_t n, uint32_t *src)
{
    for (size_t i = 0; i < n; i++)
        src[i] = (uint32_t)i;
    for (size_t i = 0; i < n; i++)
        src[rep[i]] = (uint32_t)i;
}

/* Packed little-endian values, any alignment. */
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

void floe_dedup_totals(const uint32_t *rep, size_t n, uint32_t vb, const void *deltas, void *totals)
{
    for (size_t i = 0; i < n; i++)
        if (rep[i] == i)
            value_out(totals, vb, i, value_in(deltas, vb, i));
    for (size_t i = 0; i < n; i++)
        if (rep[i] != i) /* wraps as the stored value does: only vb bytes go out */
            value_out(totals, vb, rep[i], value_in(totals, vb, rep[i]) + value_in(deltas, vb, i));
}

/* An add's answers: each occurrence, in order, the value after its delta. */
static void settle_add(const uint32_t *rep, size_t n, uint32_t vb, const void *deltas, uint32_t *last, uint8_t *results,
                       uint64_t *ids, unsigned char *vo)
{
    for (size_t i = 0; i < n; i++) {
        const uint32_t r = rep[i];
        const bool full = results[r] == FLOE_FULL;
        if (r != i) {
            results[i] = full ? FLOE_FULL : FLOE_PRESENT;
            if (ids)
                ids[i] = ids[r];
        }
        if (vo) /* the first occurrence's holds the value before the batch */
            value_out(vo, vb, i, full ? 0 : value_in(vo, vb, r == i ? i : last[r]) + value_in(deltas, vb, i));
        last[r] = (uint32_t)i;
    }
}

void floe_dedup_settle(const uint32_t *rep, size_t n, size_t distinct, uint32_t vb, floe_value_mode mode,
                       const void *values, uint32_t *src, uint8_t *results, uint64_t *ids, void *values_out)
{
    unsigned char *vo = values_out;
    const bool overwrite = mode == FLOE_VALUES_OVERWRITE;
    if (mode == FLOE_VALUES_ADD) {
        settle_add(rep, n, vb, values, src, results, ids, vo);
        return;
    }
    if (distinct == n)
        return;
    for (size_t i = 0; i < n; i++) {
        uint32_t r = rep[i];
        if (r == i)
            continue;
        results[i] = results[r] == FLOE_FULL ? FLOE_FULL : FLOE_PRESENT;
        if (ids)
            ids[i] = ids[r];
        if (vo && !overwrite) /* the value the first occurrence left */
            value_out(vo, vb, i, results[r] == FLOE_FULL ? 0 : value_in(vo, vb, r));
    }
    if (vo && overwrite) {
        /* The first occurrence stored the last occurrence's value; every
         * occurrence answers as if applied alone, in order: a later one sees
         * the value of the one before it (src[] now tracks that one). */
        for (size_t i = 0; i < n; i++)
            if (rep[i] == i)
                src[i] = (uint32_t)i;
        for (size_t i = 0; i < n; i++) {
            uint32_t r = rep[i];
            if (r == i)
                continue;
            value_out(vo, vb, i, results[r] == FLOE_FULL ? 0 : value_in(values, vb, src[r]));
            src[r] = (uint32_t)i;
        }
        for (size_t i = 0; i < n; i++)
            if (rep[i] == i && results[i] == FLOE_INSERTED)
                value_out(vo, vb, i, value_in(values, vb, i));
    }
}
