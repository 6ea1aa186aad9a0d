/*
 * ordered.h - the CPU engine for ORDERED tables: keys of key_bits bits
 * (1..64) with optional values of value_bytes (0, 4 or 8), kept in key
 * order by a B+tree (leaves of ORD_LEAF_KEYS sorted keys, linked both ways;
 * inner nodes of up to ORD_FANOUT children).  It is the reference the GPU
 * engine is tested against (issue 18) and the embedded default.
 *
 * Semantics are the SET/MAP ones: insert is find-or-put (INSERTED, or
 * PRESENT with the stored value; with overwrite the new value replaces
 * it), and inside a batch keys are applied in order, so the first
 * occurrence of a key is the one INSERTED and the first erase of a key the
 * one ERASED.  A leaf that an erase empties is freed at once (an emptied
 * inner node too, and a root of one child gives way to it); leaves left
 * under half full stay so.  A key that needed a new node when memory ran
 * out answers FULL and is not stored.
 *
 * Writers (insert, erase) take the table exclusively, readers (find,
 * range, neighbours, min/max, stats) share it; find and neighbour batches
 * are split over the pool, and so are large inserts: a task for each child
 * of the root, each key's occurrences in one task in batch order (the keys
 * whose insert would split a child of the root go last, serially).  Keys
 * come through the door: below 2^key_bits (asserted).
 */
#ifndef FLOE_TABLES_ORDERED_H
#define FLOE_TABLES_ORDERED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pool.h"
#include "spec.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ORD_LEAF_KEYS 64u /* keys a leaf holds: 512 bytes, 8 cache lines */
#define ORD_FANOUT    64u /* children an inner node holds */

typedef struct ordered ordered;
struct floe_file_image; /* tablefile.h */

/* An empty table for spec (kind ORDERED, key_bits 1..64, value_bytes 0, 4
 * or 8; a seed of 0 is replaced by a random one: it names the table in
 * range cursors); pool may be NULL (batches then run on the caller's
 * thread). */
floe_status ordered_create(const floe_spec *spec, floe_pool *pool, ordered **out, floe_errinfo *err);
void ordered_destroy(ordered *t);

/* Find-or-put of n keys, in order.  values: value_bytes per key, packed
 * (NULL for a table without values); values_out (may be NULL): the value
 * stored before (PRESENT) or now (INSERTED).  results: INSERTED, PRESENT
 * or FULL. */
floe_status ordered_insert(ordered *t, const uint64_t *keys, const void *values, size_t n, bool overwrite,
                           uint8_t *results, void *values_out, floe_answer_counts *counts, floe_errinfo *err);
/* PRESENT (values_out: the value) or ABSENT (values_out: 0). */
floe_status ordered_find(ordered *t, const uint64_t *keys, size_t n, uint8_t *results, void *values_out,
                         floe_answer_counts *counts, floe_errinfo *err);
/* ERASED (the first occurrence of a stored key) or ABSENT. */
floe_status ordered_erase(ordered *t, const uint64_t *keys, size_t n, uint8_t *results, floe_answer_counts *counts,
                          floe_errinfo *err);

/* For each key the smallest stored key >= it (pred false: successor) or
 * the largest <= it (pred true: predecessor): PRESENT and found[i] (and
 * its value in values_out), or ABSENT and found[i] 0 when there is none. */
floe_status ordered_neighbours(ordered *t, bool pred, const uint64_t *keys, size_t n, uint8_t *results, uint64_t *found,
                               void *values_out, floe_errinfo *err);

/* Up to limit stored keys in [lo, hi], ascending from lo (desc false) or
 * descending from hi, into keys_out (and values_out, may be NULL); *n of
 * them.  *done when the range holds no more; else the next call continues
 * with lo = *next (ascending) or hi = *next (descending).  lo > hi is the
 * caller's to refuse (an empty range here). */
void ordered_range(ordered *t, uint64_t lo, uint64_t hi, bool desc, size_t limit, uint64_t *keys_out, void *values_out,
                   size_t *n, uint64_t *next, bool *done);

/* Up to limit keys in order from from->position (from NULL: the smallest)
 * on: ordered_range over the whole key space, as a SCAN of the backend
 * interface asks (tables/backend.h).  A cursor's position is the key the
 * next call starts from; its generation is 0 (an ORDERED table never
 * renumbers: its positions are keys).  A position wider than key_bits, or
 * a generation other than 0, is refused. */
floe_status ordered_scan(ordered *t, const floe_scan_pos *from, size_t limit, uint64_t *keys, void *values, size_t *n,
                         floe_scan_pos *next, int *done, floe_errinfo *err);

/* The smallest (max false) or largest stored key and its value: false when
 * the table is empty. */
bool ordered_min_max(ordered *t, bool max, uint64_t *key, void *value);

/* The table's file contents (tablefile.h): the header, then its keys in
 * order (8 bytes each) and their values (value_bytes each) as two
 * sections.  copy_image makes a private image (a snapshot's pause), save
 * writes one (temporary file, fsync, rename). */
floe_status ordered_copy_image(ordered *t, struct floe_file_image **out, floe_errinfo *err);
floe_status ordered_save(ordered *t, const char *path, floe_errinfo *err);
/* The image of a table of spec whose n keys, ascending, and values
 * (value_bytes each) are in malloc'ed arrays, which the image takes over
 * (also on failure): how the GPU engine saves. */
floe_status ordered_image_of(const floe_spec *spec, uint64_t *keys, void *values, uint64_t n,
                             struct floe_file_image **out, floe_errinfo *err);
/* t's keys in order and their values into new malloc'ed arrays (*n of
 * them): how the GPU engine loads through this engine's file code. */
floe_status ordered_export(ordered *t, uint64_t **keys, void **values, uint64_t *n, floe_errinfo *err);
/* The table of the file (or of its part at byte offset), built bottom-up
 * from its sorted keys with leaves 7/8 full.  A file whose keys are not
 * strictly ascending or not below 2^key_bits is refused as damaged. */
floe_status ordered_load(const char *path, uint64_t offset, floe_pool *pool, ordered **out, floe_errinfo *err);

/* keys, slots (leaf capacity), fill, memory, bytes per key. */
void ordered_stats(ordered *t, floe_table_stats *s);
const floe_spec *ordered_spec(const ordered *t);

#ifdef __cplusplus
}
#endif

#endif /* FLOE_TABLES_ORDERED_H */
