/*
 * cuckoo.h - the CPU engine of STATIC tables (cuckoo_layout.h): a compact
 * bucketed cuckoo table built once from a set of keys, then only queried.
 *
 * It answers finds of a frozen set (the states of a finished run, a
 * deny-list) from fewer bucket reads than a growing table's, at fill up to
 * FLOE_CUCKOO_FILL: a miss stops at the first candidate bucket with room.
 * The build places keys one at a time, moving a key on to its next choice
 * when its bucket is full (the eviction of cuckoo hashing), and gives a size
 * up for the next one where a chain of moves grows too long.
 */
#ifndef FLOE_TABLES_CUCKOO_H
#define FLOE_TABLES_CUCKOO_H

#include <stddef.h>
#include <stdint.h>

#include "cuckoo_layout.h"
#include "pool.h"
#include "spec.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cuckoo cuckoo;

/* A table of the n keys (a key given twice is stored once; each below
 * 2^key_bits, else ERR_INVALID naming it), sized to be at most `fill` full
 * (0 < fill <= FLOE_CUCKOO_FILL), with permutations from seed.  ERR_FULL if
 * no size up to 8 times that places every key; ERR_NO_MEMORY where the
 * arrays would pass the host memory budget (alloc.h). */
floe_status cuckoo_build(uint32_t key_bits, uint64_t seed, double fill, const uint64_t *keys, size_t n, cuckoo **out,
                         floe_errinfo *err);
void cuckoo_destroy(cuckoo *t);

/* PRESENT or ABSENT for each key (a key wider than the table's is ABSENT),
 * on pool (NULL: inline); counts (may be NULL) tallied. */
void cuckoo_find(const cuckoo *t, const uint64_t *keys, size_t n, uint8_t *results, floe_answer_counts *counts,
                 floe_pool *pool);

uint64_t cuckoo_keys(const cuckoo *t);
uint64_t cuckoo_bytes(const cuckoo *t);
const floe_cuckoo_geometry *cuckoo_geometry(const cuckoo *t);
/* The buckets' words (floe_level_words of the geometry's level). */
const uint64_t *cuckoo_words(const cuckoo *t);

#ifdef __cplusplus
}
#endif

#endif /* FLOE_TABLES_CUCKOO_H */
