/*
 * cuckoo.h - the CPU engine of STATIC tables (cuckoo_layout.h; the GPU's is
 * gpu/cuckoo_gpu.h, which uses this one's files and scans): a compact
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

#include <stdbool.h>
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
struct iceberg;         /* iceberg.h */
struct floe_file_image; /* tablefile.h */

/* A table of the n keys (a key given twice is stored once, with its first
 * value; each below 2^key_bits, else ERR_INVALID naming it) and, with
 * value_bytes 4 or 8, their values (n x value_bytes bytes, packed
 * little-endian; NULL and 0 for keys alone), sized to be at most `fill`
 * full (0 < fill <= FLOE_CUCKOO_FILL), with permutations from seed.
 * ERR_FULL if no size up to 8 times that places every key; ERR_NO_MEMORY
 * where the arrays would pass the host memory budget (alloc.h).  Nothing
 * is left allocated on failure.  On pool (NULL: one key after another on
 * this thread): the keys' first occurrences placed side by side, each
 * placement a compare-and-swap of a word (fewer than 2^32 keys; more are
 * placed on this thread). */
floe_status cuckoo_build(uint32_t key_bits, uint32_t value_bytes, uint64_t seed, double fill, const uint64_t *keys,
                         const void *values, size_t n, floe_pool *pool, cuckoo **out, floe_errinfo *err);
/* A STATIC table's freeze: the table of every key (and value) of ice, a
 * STATIC table's filling (its spec's kind STATIC, seed and values), at
 * FLOE_CUCKOO_FILL; ice is left as it was, whatever the outcome.  Its
 * generation is ice's plus one: ids and scan cursors of the filling table
 * name nothing in it. */
floe_status cuckoo_freeze(struct iceberg *ice, floe_pool *pool, cuckoo **out, floe_errinfo *err);
void cuckoo_destroy(cuckoo *t);

/* PRESENT or ABSENT for each key (a key wider than the table's is ABSENT),
 * on pool (NULL: inline); ids (may be NULL) get each key's slot
 * (FLOE_NO_ID where ABSENT: a slot's id never changes, since the table
 * does not), values_out (may be NULL; a table with values) its value, 0
 * where ABSENT; counts (may be NULL) tallied. */
void cuckoo_find(const cuckoo *t, const uint64_t *keys, size_t n, uint8_t *results, uint64_t *ids, void *values_out,
                 floe_answer_counts *counts, floe_pool *pool);
/* Up to limit keys (and values, to values if not NULL) in slot order from
 * the cursor on (NULL: the start), as iceberg_scan: a cursor of another
 * generation, or past the table, is ERR_INVALID. */
floe_status cuckoo_scan(const cuckoo *t, const floe_scan_pos *from, size_t limit, uint64_t *keys, void *values,
                        size_t *n, floe_scan_pos *next, int *done, floe_errinfo *err);
/* The scan above over rows from elsewhere (the GPU engine's, copied from
 * the device a window at a time): rows(arg, first, n, values, &words,
 * &vals, err) gives the words of buckets [first, first + n), n at most
 * `window`, and with `values` their slots' values. */
typedef floe_status (*cuckoo_rows_fn)(void *arg, uint64_t first, uint64_t n, bool values, const uint64_t **words,
                                      const unsigned char **vals, floe_errinfo *err);
floe_status cuckoo_scan_rows(const floe_spec *spec, const floe_cuckoo_geometry *g, uint64_t generation,
                             cuckoo_rows_fn rows, void *arg, uint64_t window, const floe_scan_pos *from, size_t limit,
                             uint64_t *keys, void *values, size_t *n, floe_scan_pos *next, int *done,
                             floe_errinfo *err);
/* The table's figures: a STATIC table's spec, one level (its buckets), frozen. */
void cuckoo_stats(const cuckoo *t, floe_table_stats *s);
/* The same of a table of that geometry, keys and generation whose arrays
 * hold `bytes` (the GPU engine's; no backend named, device -1). */
void cuckoo_stats_of(const floe_spec *spec, const floe_cuckoo_geometry *g, uint64_t keys, uint64_t generation,
                     uint64_t bytes, floe_table_stats *s);

/* The table file (tablefile.h) of a frozen STATIC table: the header says
 * frozen, the bucket count's shape (addr_bits: hi_bits, cuckoo_mult); the
 * sections are the buckets' words and the values. */
floe_status cuckoo_save(const cuckoo *t, const char *path, floe_errinfo *err);
floe_status cuckoo_copy_image(const cuckoo *t, struct floe_file_image **out, floe_errinfo *err);
/* Loads a frozen STATIC table (the part at offset of path): its geometry
 * from the header, every row checked to be a key of its bucket's choice
 * and the count the header says. */
floe_status cuckoo_load(const char *path, uint64_t offset, cuckoo **out, floe_errinfo *err);

/* A table of a STATIC spec and mult x 2^hi_bits buckets with every row
 * empty, said to hold `keys` keys at `generation`: for a table's arrays
 * copied in whole (the GPU engine's save), through cuckoo_arrays.
 * ERR_NO_MEMORY past the host memory budget. */
floe_status cuckoo_empty(const floe_spec *spec, uint32_t hi_bits, uint32_t mult, uint64_t keys, uint64_t generation,
                         cuckoo **out, floe_errinfo *err);
/* Its arrays: the buckets' words, and the values by slot (NULL, 0 without). */
void cuckoo_arrays(cuckoo *t, uint64_t **words, size_t *words_bytes, void **values, size_t *values_bytes);

/* ERR_FROZEN for an operation a frozen table does not run (a write), on
 * either engine. */
floe_status cuckoo_refuse(const floe_spec *spec, floe_op op, floe_errinfo *err);

const floe_spec *cuckoo_spec(const cuckoo *t);
uint64_t cuckoo_keys(const cuckoo *t);
uint64_t cuckoo_generation(const cuckoo *t);
/* Bytes of its arrays: the buckets and the values. */
uint64_t cuckoo_bytes(const cuckoo *t);
const floe_cuckoo_geometry *cuckoo_geometry(const cuckoo *t);
/* The buckets' words (floe_level_words of the geometry's level). */
const uint64_t *cuckoo_words(const cuckoo *t);

#ifdef __cplusplus
}
#endif

#endif /* FLOE_TABLES_CUCKOO_H */
