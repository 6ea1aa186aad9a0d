/*
 * iceberg.h - the CPU engine for SET and MAP tables: a compact iceberg hash
 * table (layout in layout.h) driven batch by batch on a thread pool with C11
 * atomics, lock-free on the hot path.
 *
 * Every batch call is thread-safe: any number of threads may insert, find,
 * erase and scan one table at once (a read-write lock is taken once per
 * batch so that a rebuild can stop the world).  Among concurrent inserts of
 * one key exactly one sees FLOE_INSERTED.  Inside one batch keys apply in
 * order: the first occurrence of a key is the one INSERTED (or ERASED).
 *
 * Per-key arrays: keys are uint64_t; values (MAP) are packed little-endian,
 * value_bytes per key, and need no alignment; results are one byte per key
 * (FLOE_ABSENT, FLOE_PRESENT, FLOE_INSERTED, FLOE_FULL, FLOE_ERASED); ids are
 * the keys' stable slot ids (FLOE_NO_ID where a key has none).
 *
 * Batches come through the door (floe_request_check in spec.h; in-process,
 * floe_table_submit): keys below 2^key_bits, fewer than 2^32, values only
 * on a MAP and n * value_bytes of them, results present.  The engine
 * asserts that instead of checking it again (the pass over the keys only
 * in FLOE_DEBUG builds); a caller that uses it directly must do the same.
 */
#ifndef FLOE_TABLES_ICEBERG_H
#define FLOE_TABLES_ICEBERG_H

#include <stddef.h>
#include <stdint.h>

#include "pool.h"
#include "spec.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct iceberg iceberg;
struct floe_file_image;  /* tablefile.h */
struct floe_file_header; /* tablefile.h */

/* Primary address bits for a table of 2^a primary buckets that must hold
 * capacity keys at fill 0.9 (a TREE's root table). */
uint32_t iceberg_addr_bits_for(uint32_t key_bits, uint64_t capacity);
/* The table of 2^a or 1.5 x 2^a primary buckets (*three 0 or 1) that holds
 * capacity keys at fill 0.9 in the fewest bytes: its a.  A new SET or MAP
 * gets this size on every engine, so that it takes at most about 1.33 times
 * the memory it needs, not 2 (and a table larger than one device fits in
 * two parts of 1.5 x 2^a), except where the smaller step's rows would be
 * wider (one address bit less).  Growth doubles from there. */
uint32_t iceberg_size_for(uint32_t key_bits, uint64_t capacity, uint32_t *three);
/* OK where 2^addr_bits primary buckets (1.5 times that with three = 1) are
 * a size for key_bits, else ERR_INVALID saying why: every engine's rule. */
floe_status iceberg_size_check(uint32_t key_bits, uint32_t addr_bits, uint32_t three, floe_errinfo *err);
/* The bytes a new SET or MAP of spec takes (its levels and values, as
 * iceberg_size_for sizes it; the same on the GPU). */
uint64_t iceberg_bytes_for(const floe_spec *spec);
/* The bytes of spec's levels and values at 2^addr_bits primary buckets
 * (1.5 times that with three = 1), on every engine. */
uint64_t iceberg_bytes_at(const floe_spec *spec, uint32_t addr_bits, uint32_t three);
/* The next size up in steps of a half and a third: 2^a -> 1.5 x 2^a ->
 * 2^(a+1) primary buckets, so that a table grown at fill 0.9 is 0.6 full or
 * more (arrays within 1.67 times what its keys fill; doubling leaves 2.2).
 * The GPU engine grows so (its moves cost a batch its share, whatever the
 * step); the CPU engine doubles (docs/PERFORMANCE.md, "G1 in steps of a
 * half"). */
void iceberg_step_up(uint32_t *addr_bits, uint32_t *three);

/* Creates an empty table sized for spec->capacity; pool runs its batches
 * (NULL: inline in the caller).  The spec must pass floe_spec_validate. */
floe_status iceberg_create(const floe_spec *spec, floe_pool *pool, iceberg **out, floe_errinfo *err);
/* The same with an explicit primary level of 2^addr_bits buckets, 1.5
 * times that with three (benchmarks, a TREE's root table). */
floe_status iceberg_create_sized(const floe_spec *spec, uint32_t addr_bits, uint32_t three, floe_pool *pool,
                                 iceberg **out, floe_errinfo *err);
void iceberg_destroy(iceberg *t);
const floe_spec *iceberg_spec(const iceberg *t);

/* Find-or-put.  values/values_len: MAP only, n * value_bytes bytes; mode
 * (MAP only): what a PRESENT key's value becomes (ops.h).  Outputs may be
 * NULL except results.  values_out (MAP): for PRESENT the value stored
 * before this occurrence, for INSERTED the value now stored, 0 for FULL;
 * with FLOE_VALUES_ADD (values are deltas, every occurrence of a key adds
 * its own, in order) the value after this occurrence's delta. */
floe_status iceberg_insert(iceberg *t, const uint64_t *keys, size_t n, const void *values, size_t values_len,
                           floe_value_mode mode, uint8_t *results, uint64_t *ids, void *values_out,
                           floe_answer_counts *counts, floe_errinfo *err);
/* PRESENT / ABSENT; values_out (MAP only) gets the stored values, 0 if absent. */
floe_status iceberg_find(iceberg *t, const uint64_t *keys, size_t n, uint8_t *results, uint64_t *ids, void *values_out,
                         floe_answer_counts *counts, floe_errinfo *err);
/* ERASED / ABSENT; the slot becomes a tombstone until the next rebuild. */
floe_status iceberg_erase(iceberg *t, const uint64_t *keys, size_t n, uint8_t *results, floe_answer_counts *counts,
                          floe_errinfo *err);

/* Up to limit keys (and values, MAP) from the cursor on (NULL: the start).
 * *done is set when the scan has passed the last slot.  A cursor from an
 * earlier generation is refused: a rebuild moved every key.  A call examines
 * a bounded number of slots, so it may return fewer than limit keys (even 0)
 * with *done unset. */
floe_status iceberg_scan(iceberg *t, const floe_scan_pos *from, size_t limit, uint64_t *keys, void *values, size_t *n,
                         floe_scan_pos *next, int *done, floe_errinfo *err);

void iceberg_stats(iceberg *t, floe_table_stats *s);

/* The key in slot id: 1 and *key if the slot holds one, else 0 (an empty
 * or erased slot, or an id past the table).  It takes no lock: safe beside
 * batches, but the caller keeps t from being rebuilt while it runs (a
 * TREE's root table, the one user, is rebuilt only under the TREE's lock,
 * which every caller holds; a lock a call cost a batch by parent a quarter
 * of its time, its threads queueing on the lock's word). */
int iceberg_key_at(const iceberg *t, uint64_t id, uint64_t *key);
/* Slots of every level: ids are below this. */
uint64_t iceberg_total_slots(const iceberg *t);
/* Rebuilds so far: ids of an earlier generation name other keys. */
uint64_t iceberg_generation(iceberg *t);
/* Slots in use (keys and tombstones), every level. */
uint64_t iceberg_used_slots(iceberg *t);

/* Zeroed table memory (mmap, huge pages advised), faulted in now so that page
 * faults stay off the batch path; release with munmap.  NULL for 0 bytes or
 * when out of memory. */
void *iceberg_map_zeroed(size_t bytes);

/* Rebuilds into 2^addr_bits primary buckets, 1.5 times that with three
 * (addr_bits 0: the current size), dropping tombstones; ids change and the
 * generation increments.  Where the size cannot hold every key, the next
 * power of two up that can. */
floe_status iceberg_rebuild(iceberg *t, uint32_t addr_bits, uint32_t three, floe_errinfo *err);

floe_status iceberg_save(iceberg *t, const char *path, floe_errinfo *err);
/* A copy of t's file contents in a new image (for a snapshot written later). */
floe_status iceberg_copy_image(iceberg *t, struct floe_file_image **out, floe_errinfo *err);
/* An image that takes t over: its sections are t's arrays, and freeing the
 * image destroys t (for a host copy made only to be written). */
floe_status iceberg_image_of(iceberg *t, struct floe_file_image **out, floe_errinfo *err);
floe_status iceberg_load(const char *path, uint64_t offset, floe_pool *pool, iceberg **out, floe_errinfo *err);
/* After a file's sections were read into t: every row well formed, and the
 * rows, tombstones and keys as the header h counts them (ERR_INVALID naming
 * path if not).  A TREE's loader checks its root table with it. */
floe_status iceberg_verify_loaded(iceberg *t, const struct floe_file_header *h, const char *path, floe_errinfo *err);

/* The table's raw arrays (layout.h's words per level, then the values) and
 * its counters: for another engine that holds the same layout, so that the
 * GPU backend saves and loads through this engine's file code. */
typedef struct iceberg_image {
    uint32_t addr_bits, three;
    uint32_t first_fill; /* the geometry's (layout.h): 0 in a table of layout version 1 */
    void *sections[FLOE_LEVELS + 1];
    size_t bytes[FLOE_LEVELS + 1];
    uint64_t used[FLOE_LEVELS], tombstones, generation;
} iceberg_image;

/* Not thread-safe against batches: for a table no batch is running on. */
void iceberg_get_image(iceberg *t, iceberg_image *im);
void iceberg_set_counters(iceberg *t, const uint64_t used[FLOE_LEVELS], uint64_t tombstones, uint64_t generation);
/* Gives t, before any key is in it, the put rule of the table whose arrays
 * it is about to receive: that table's geometry's first_fill (layout.h). */
void iceberg_set_first_fill(iceberg *t, uint32_t first_fill);

#ifdef __cplusplus
}
#endif

#endif /* FLOE_TABLES_ICEBERG_H */
