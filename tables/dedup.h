/*
 * dedup.h - first occurrences inside a batch.
 *
 * Inside one request, keys apply in order: the first occurrence of a key is
 * the one that may be INSERTED or ERASED, the later ones see its effect.  The
 * engines run a batch in parallel, so they first map every key to its first
 * occurrence and send only first occurrences to the table.
 */
#ifndef FLOE_TABLES_DEDUP_H
#define FLOE_TABLES_DEDUP_H

#include <stddef.h>
#include <stdint.h>

#include "ops.h"
#include "pool.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets rep[i] to the smallest j with keys[j] == keys[i] (so rep[i] == i marks
 * a first occurrence) and *distinct to the number of distinct keys.
 * n must be below 2^32.  Runs on pool (NULL: inline). */
floe_status floe_dedup(floe_pool *pool, const uint64_t *keys, size_t n, uint32_t *rep, size_t *distinct,
                       floe_errinfo *err);

/* For an upsert: src[r] = the last occurrence of first occurrence r's key
 * (whose value the table must end up holding); src[i] = i elsewhere. */
void floe_dedup_value_src(const uint32_t *rep, size_t n, uint32_t *src);

/* For an add: totals gets at each first occurrence r the sum of the deltas
 * of every occurrence of r's key (wrapping at vb bytes), packed like deltas;
 * the table adds that once. */
void floe_dedup_totals(const uint32_t *rep, size_t n, uint32_t vb, const void *deltas, void *totals);

/* After the first occurrences ran (results, ids, values_out filled at every
 * i with rep[i] == i), gives every later occurrence the answer in-order
 * application implies: PRESENT (FULL if its first occurrence was FULL), the
 * same id, and the value stored before it (mode FLOE_VALUES_ADD: every
 * occurrence, the first too, gets the value after its own delta; the first
 * occurrence's values_out holds the value before the batch).  vb: value
 * bytes (0: SET); values: the request's values (needed with overwrite; an
 * add's deltas); src: the array floe_dedup_value_src filled (with
 * overwrite), or any n entries (add), used as scratch. */
void floe_dedup_settle(const uint32_t *rep, size_t n, size_t distinct, uint32_t vb, floe_value_mode mode,
                       const void *values, uint32_t *src, uint8_t *results, uint64_t *ids, void *values_out);

#ifdef __cplusplus
}
#endif

#endif /* FLOE_TABLES_DEDUP_H */
