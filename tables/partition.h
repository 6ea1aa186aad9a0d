/*
 * partition.h - one table over several: a backend (tables/backend.h) whose
 * tables are `parts` complete tables of other backends (one GPU each, or
 * several parts on one device or on the CPU), each key owned by one part.
 *
 * A key's part is floe_part_of(floe_part_hash_key(key), parts); a TREE
 * vector's, floe_part_of(floe_part_hash_vector(v, words), parts).  The hash
 * is fixed (the same in every build and version) and independent of the
 * tables' own seeded permutations, so that every part uses all its buckets.
 *
 * A batch is split on the host by owner, in the batch's order, so that each
 * part sees its keys in the order the caller gave them: the first
 * occurrence of a key is still the one INSERTED, and concurrent inserts of
 * one key still meet in one table.  Where the parts' backend can (GPUs that
 * reach each other's memory, a large SET batch in memory they copy straight
 * from: floe_backend_ops.group_fits), the devices split it among
 * themselves instead (group.h), with the same rules.  Answers are merged back into the
 * caller's order, and batches complete in submission order, as the
 * interface requires.  A batch the parts cannot all take (a bad key, an
 * operation the kind does not have) is refused whole before any part sees
 * it.
 *
 * Ids (TREE vectors, ids of SET/MAP keys) name their part: id = local id x
 * parts + part.  A scan walks the parts in turn; its cursor's position is
 * local position x parts + part (local position 0: the part's start).
 * STATS sums the parts and lists them (floe_table_stats.part).  SAVE and
 * COPY write one file of the parts one after another (tablefile.h); a file
 * saved with the same number of parts loads part by part (ids kept), any
 * other file (a whole table, or a different number of parts) is loaded part
 * by part on the inner backends and its keys re-inserted (ids renumbered).
 *
 * Placement: a table has the parts its spec asks (floe_spec.parts), else
 * the backend's `parts`, else it is whole on the inner backend with the
 * most free memory (floe_backend_memory; then the fewest parts placed),
 * and in parts over every inner backend only when it fits on none whole.
 * Parts are placed in that order too.  An ORDERED table is always one part:
 * its order is one structure's.  With one part every call goes straight to
 * the inner table.
 */
#ifndef FLOE_TABLES_PARTITION_H
#define FLOE_TABLES_PARTITION_H

#include <stdint.h>

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The fixed hash that picks a key's part (a murmur3-style finaliser with its own constants). */
FLOE_HD static inline uint64_t floe_part_hash_key(uint64_t key)
{
    uint64_t h = key ^ 0x243F6A8885A308D3ull;
    h ^= h >> 31;
    h *= 0x7FB5D329728EA185ull;
    h ^= h >> 27;
    h *= 0x81DADEF4BC2DD44Dull;
    h ^= h >> 33;
    return h;
}

/* The same over a vector's words, in order. */
static inline uint64_t floe_part_hash_vector(const uint32_t *v, uint32_t words)
{
    uint64_t h = words;
    for (uint32_t i = 0; i < words; i++)
        h = floe_part_hash_key(h ^ ((uint64_t)v[i] << 17 | i));
    return h;
}

/* The part of a hash: its high bits scaled to 0..parts-1. */
FLOE_HD static inline unsigned floe_part_of(uint64_t hash, unsigned parts)
{
    return floe_hash_pick(hash, parts);
}

/* A backend of tables in `parts` parts (1..FLOE_PARTS_MAX), or of tables
 * placed one by one (parts 0: see "Placement" below), over the inner
 * backends; it takes them over (destroying it destroys them, also when
 * creation fails).  Its name is inner[0]'s.  `threads` split batches and
 * join their answers, several batches at once (0: one per CPU; 2 at least). */
floe_status floe_backend_partition_create(floe_backend *const *inner, unsigned ninner, unsigned parts, unsigned threads,
                                          floe_backend **out, floe_errinfo *err);

/* The parts of every table a partitioned backend creates: 0 where each is
 * placed on its own (1 for any other backend). */
unsigned floe_backend_parts(const floe_backend *be);
/* The inner backends (devices) of a partitioned backend (1 for any other). */
unsigned floe_backend_devices(const floe_backend *be);
/* The parts of table t (1 for a table of any other backend). */
unsigned floe_table_parts(const floe_table *t);

#ifdef __cplusplus
}
#endif

#endif /* FLOE_TABLES_PARTITION_H */
