/*
 * ordered_gpu.h - the GPU engine for ORDERED tables: the chunked skiplist
 * of the GPU skiplist thesis (../shared/notes/gpu-skiplist.md), widened to
 * 64-bit keys and values, behind a plain C API (ordered_gpu.cu).  Same
 * answers as the CPU engine (tables/ordered.h), which it is tested against.
 *
 * Every level is a linked list of chunks of OC_LANES (32) entries that one
 * warp reads in one instruction: 30 sorted keys, a fence (the first key
 * the next chunk may hold, and the next chunk) and a header (the count, the
 * level, the previous chunk).  Chunks of 16 entries build with
 * -DOC_LANES=16u (docs/PERFORMANCE.md compares them).  A search goes right while its key is at or past the
 * fence, else down through the highest entry at or below it (a ballot);
 * searches take no locks.  A split raises the first key of each new chunk
 * to the level above, as the thesis does (every split raises one).
 *
 * Updates are batch-synchronous instead of the thesis's per-key chunk
 * locks: a batch is sorted on the device first (so the first occurrence of
 * a key is the one INSERTED or ERASED, for free), and each chunk it changes
 * is rewritten by one warp or one group of threads that no other touches,
 * so nothing is locked and a search never meets a half-made chunk.  An
 * insert merges each chunk's run of new keys into it; a chunk that
 * overflows becomes several chunks of OC_FILL keys (a merge path, in
 * parallel however long the run); their separators go up a level the same
 * way.  Inserting into an empty table is the bulk build.  An erase
 * compacts each chunk it touches; a chunk may empty and stays linked (a
 * neighbour search walks past it), and when live keys fill less than a
 * quarter of the chunks the table is built again from its keys (the memory
 * of erased chunks comes back between batches).  The chunk pool grows
 * between the steps of a batch (a new pool, the old one copied).
 *
 * Batch functions take device arrays and a stream, and wait for the batch
 * (they read counts back).  CUDA errors come back as FLOE_ERR_INTERNAL.
 */
#ifndef FLOE_GPU_ORDERED_GPU_H
#define FLOE_GPU_ORDERED_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "iceberg_gpu.h" /* gpu_stream */
#include "spec.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef OC_LANES
#define OC_LANES 32u /* entries per chunk, at most a warp's read (16 measured: docs/PERFORMANCE.md) */
#endif
#define OC_DATA (OC_LANES - 2u)      /* of them keys */
#define OC_FILL (OC_LANES * 3u / 4u) /* keys per chunk when a run is spread over new chunks */

typedef struct gpu_ordered gpu_ordered;

/* An empty table for spec (kind ORDERED; spec->seed set by the caller)
 * with a pool of at least `chunks` chunks (0: a small one; it grows;
 * gpu_ordered_chunks_for says how many hold a number of keys).  Batches'
 * scratch comes from the device's stream-ordered pool, which is set to
 * keep what they free. */
floe_status gpu_ordered_create(const floe_spec *spec, uint64_t chunks, gpu_ordered **out, floe_errinfo *err);
void gpu_ordered_destroy(gpu_ordered *t);
/* A limit on the pool's growth (floed's maxmemory-gpu): fits(ctx, bytes) is
 * asked before an insert grows the pool by bytes (new chunks beside the old
 * until they are copied); false refuses the insert, FLOE_ERR_NO_MEMORY,
 * before any of its keys is stored.  fits NULL: none (the default). */
void gpu_ordered_set_limit(gpu_ordered *t, bool (*fits)(void *ctx, uint64_t bytes), void *ctx);
/* The chunks of a table of `keys` random keys, every level, with room to spare. */
uint64_t gpu_ordered_chunks_for(uint64_t keys);
const floe_spec *gpu_ordered_spec(const gpu_ordered *t);

/* Find-or-put of n device keys (below 2^key_bits, as the door checks) in
 * order, with d_values (n * value_bytes, NULL for a table without values):
 * d_results INSERTED / PRESENT, d_values_out (may be NULL) the value stored
 * before the key's occurrence, or its own where INSERTED; overwrite
 * replaces a PRESENT key's value.  counts (host, may be NULL). */
floe_status gpu_ordered_insert(gpu_ordered *t, const uint64_t *d_keys, const void *d_values, size_t n, bool overwrite,
                               uint8_t *d_results, void *d_values_out, floe_answer_counts *counts, gpu_stream stream,
                               floe_errinfo *err);
/* PRESENT (d_values_out: the value) or ABSENT (0).  Enqueues only. */
floe_status gpu_ordered_find(gpu_ordered *t, const uint64_t *d_keys, size_t n, uint8_t *d_results, void *d_values_out,
                             gpu_stream stream, floe_errinfo *err);
/* ERASED (the first occurrence of a stored key) or ABSENT. */
floe_status gpu_ordered_erase(gpu_ordered *t, const uint64_t *d_keys, size_t n, uint8_t *d_results,
                              floe_answer_counts *counts, gpu_stream stream, floe_errinfo *err);
/* The smallest stored key >= each key (pred: the largest <= it): PRESENT
 * and d_found[i] (its value in d_values_out, may be NULL), or ABSENT and 0.
 * Enqueues only. */
floe_status gpu_ordered_neighbours(gpu_ordered *t, bool pred, const uint64_t *d_keys, size_t n, uint8_t *d_results,
                                   uint64_t *d_found, void *d_values_out, gpu_stream stream, floe_errinfo *err);
/* n ranges at once: range i holds up to `limit` stored keys >= d_lo[i] and
 * <= d_hi[i], ascending, at d_keys_out + i * limit (values likewise, may be
 * NULL), d_counts[i] of them.  Each range is walked by one warp: for many
 * short ranges (O1's).  Enqueues only. */
floe_status gpu_ordered_ranges(gpu_ordered *t, const uint64_t *d_lo, const uint64_t *d_hi, size_t n, uint32_t limit,
                               uint64_t *d_keys_out, void *d_values_out, uint32_t *d_counts, gpu_stream stream,
                               floe_errinfo *err);
/* One range, as ordered_range of tables/ordered.h: up to limit keys of
 * [lo, hi], ascending from lo or descending from hi, into device arrays;
 * *n of them, *done when the range holds no more, else *next is where the
 * next call starts (its lo, or hi descending).  Waits. */
floe_status gpu_ordered_range(gpu_ordered *t, uint64_t lo, uint64_t hi, bool desc, size_t limit, uint64_t *d_keys_out,
                              void *d_values_out, size_t *n, uint64_t *next, bool *done, gpu_stream stream,
                              floe_errinfo *err);

/* Stored keys, chunks in use and the pool's bytes. */
uint64_t gpu_ordered_keys(const gpu_ordered *t);
void gpu_ordered_stats(const gpu_ordered *t, floe_table_stats *s);
/* Levels (1: the bottom alone). */
uint32_t gpu_ordered_height(const gpu_ordered *t);
/* Every chunk in use as the layout says (ordered_gpu.cu): its count, keys
 * ascending and below its fence, its level and next chunk; FLOE_ERR_INTERNAL naming the first that is not.  For
 * tests.  Waits. */
floe_status gpu_ordered_check(gpu_ordered *t, floe_errinfo *err);

/* Every key and value in order into host arrays of gpu_ordered_keys(t)
 * entries (values: value_bytes each; may be NULL).  Waits. */
floe_status gpu_ordered_download(gpu_ordered *t, uint64_t *keys, void *values, floe_errinfo *err);
/* An empty t built from n host keys, strictly ascending and below
 * 2^key_bits, with their values (NULL: zeros): a load.  Waits. */
floe_status gpu_ordered_upload(gpu_ordered *t, const uint64_t *keys, const void *values, size_t n, floe_errinfo *err);

/* The batch functions with host arrays (copy in, run, copy out, wait): for tests and tools. */
floe_status gpu_ordered_insert_host(gpu_ordered *t, const uint64_t *keys, const void *values, size_t n, bool overwrite,
                                    uint8_t *results, void *values_out, floe_answer_counts *counts, floe_errinfo *err);
floe_status gpu_ordered_find_host(gpu_ordered *t, const uint64_t *keys, size_t n, uint8_t *results, void *values_out,
                                  floe_errinfo *err);
floe_status gpu_ordered_erase_host(gpu_ordered *t, const uint64_t *keys, size_t n, uint8_t *results,
                                   floe_answer_counts *counts, floe_errinfo *err);
floe_status gpu_ordered_neighbours_host(gpu_ordered *t, bool pred, const uint64_t *keys, size_t n, uint8_t *results,
                                        uint64_t *found, void *values_out, floe_errinfo *err);
floe_status gpu_ordered_range_host(gpu_ordered *t, uint64_t lo, uint64_t hi, bool desc, size_t limit,
                                   uint64_t *keys_out, void *values_out, size_t *n, uint64_t *next, bool *done,
                                   floe_errinfo *err);

#ifdef __cplusplus
}
#endif

#endif /* FLOE_GPU_ORDERED_GPU_H */
