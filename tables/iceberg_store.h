/*
 * iceberg_store.h - the CPU engine's SET and MAP table as its two files
 * see it (iceberg.c: batches and growth; iceberg_file.c: files, images and
 * the check of a loaded table): its arrays and counters.  Private to them;
 * everyone else has iceberg.h.
 */
#ifndef FLOE_TABLES_ICEBERG_STORE_H
#define FLOE_TABLES_ICEBERG_STORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "layout.h"
#include "pool.h"
#include "spec.h"

typedef _Atomic uint64_t aword;

/* One generation's storage: rebuilt as a whole, swapped under the write lock. */
typedef struct store {
    floe_geometry g;
    aword *words[FLOE_LEVELS];
    size_t bytes[FLOE_LEVELS];
    void *values; /* _Atomic uint32_t or _Atomic uint64_t per slot (MAP) */
    size_t values_bytes;
    uint32_t value_bytes;
} store;

struct iceberg {
    floe_spec spec;
    floe_pool *pool;
    pthread_rwlock_t lock;
    store s;
    uint32_t addr_bits, three;          /* 2^addr_bits primary buckets, 1.5 times that with three */
    _Atomic uint64_t used[FLOE_LEVELS]; /* non-empty slots per level */
    _Atomic uint64_t tombstones;
    _Atomic uint64_t generation;
    /* the last insert's distinct keys and new ones: the share of an insert's keys likely new, which
     * decides whether it grows the table first */
    _Atomic uint64_t last_distinct, last_new;
    /* the last insert's new keys and nanoseconds, and the last arrays made ahead: their slots and
     * nanoseconds (how early the next ones must start) */
    _Atomic uint64_t last_new_ns, made_slots, made_ns;
    /* the next size's arrays, made on a thread of their own during the batch before a growth */
    struct {
        pthread_mutex_t lock;
        pthread_t thread;
        bool started, ok; /* a thread to join; it made s */
        uint32_t addr_bits, three;
        store s;
    } next;
};

static inline aword *bucket_ptr(const store *s, uint32_t l, uint64_t b)
{
    return s->words[l] + b * s->g.level[l].words;
}

#endif /* FLOE_TABLES_ICEBERG_STORE_H */
