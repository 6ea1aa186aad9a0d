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

#include "pool.h"
#include "status.h"

/* Sets rep[i] to the smallest j with keys[j] == keys[i] (so rep[i] == i marks
 * a first occurrence) and *distinct to the number of distinct keys.
 * n must be below 2^32.  Runs on pool (NULL: inline). */
floe_status floe_dedup(floe_pool *pool, const uint64_t *keys, size_t n, uint32_t *rep, size_t *distinct,
                       floe_error *err);

#endif /* FLOE_TABLES_DEDUP_H */
