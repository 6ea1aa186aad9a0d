/*
 * iceberg_gpu.h - the GPU engine for SET and MAP tables, a plain C API over
 * CUDA kernels (iceberg_gpu.cu).  Same layout as the CPU engine
 * (tables/layout.h), same answers: find-or-put with the first occurrence of a
 * key in a batch INSERTED, find, and erase with the first occurrence ERASED.
 *
 * Batch functions take device-resident arrays and a CUDA stream and only
 * enqueue work; the batch pipeline (backend_gpu.cu) stages host batches
 * around them.  The _host variants copy in, run and copy out, and wait: for
 * tests.  Functions that say "waits" synchronise the table's work.
 *
 * Every function returns a floe_status; CUDA errors come back as
 * FLOE_ERR_INTERNAL with the CUDA message in err.
 */
#ifndef FLOE_GPU_ICEBERG_GPU_H
#define FLOE_GPU_ICEBERG_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "spec.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpu_iceberg gpu_iceberg;
typedef struct CUstream_st *gpu_stream;

/* Whether a usable CUDA device is present (and its name in name, if not NULL). */
int gpu_available(int device, char *name, size_t len);

/* An empty SET or MAP table of 2^addr_bits primary buckets in device memory,
 * 1.5 times that with three (spec->seed must be set: the caller picks it). */
floe_status gpu_iceberg_create(const floe_spec *spec, uint32_t addr_bits, uint32_t three, gpu_iceberg **out,
                               floe_errinfo *err);
void gpu_iceberg_destroy(gpu_iceberg *t);
const floe_spec *gpu_iceberg_spec(const gpu_iceberg *t);
uint32_t gpu_iceberg_addr_bits(const gpu_iceberg *t);
uint32_t gpu_iceberg_three(const gpu_iceberg *t);
/* Its geometry's first_fill (layout.h): 0 for a table of layout version 1. */
uint32_t gpu_iceberg_first_fill(const gpu_iceberg *t);

#define GPU_NO_DEDUP 1u /* SET put: skip the first-occurrence fix-up (any occurrence may be INSERTED) */
/* Answer code in results: the batch did not run because the table is halted. */
#define GPU_SKIPPED 0x40

/* SET find-or-put of n device-resident keys; d_results (n bytes) and d_ids
 * (n, may be NULL) in device memory. */
floe_status gpu_iceberg_put(gpu_iceberg *t, const uint64_t *d_keys, size_t n, uint8_t *d_results, uint64_t *d_ids,
                            unsigned flags, gpu_stream stream, floe_errinfo *err);
/* MAP find-or-put of n keys with their values (d_values: n x value_bytes,
 * packed), in order: a key's first occurrence is the one that may be
 * INSERTED, the later ones see its effect (dedup.h's answers, worked out on
 * the device: dedup_gpu.cuh).  mode (floe_value_mode, tables/dedup.h): a
 * PRESENT key's value kept, replaced, or added to (an add: values are
 * deltas).  d_values_out (may be NULL): the value stored before (PRESENT)
 * or now (INSERTED); an add's, the value after each occurrence's delta. */
floe_status gpu_iceberg_put_map(gpu_iceberg *t, const uint64_t *d_keys, const void *d_values, size_t n, int mode,
                                uint8_t *d_results, uint64_t *d_ids, void *d_values_out, gpu_stream stream,
                                floe_errinfo *err);
/* PRESENT / ABSENT; d_values_out (MAP, may be NULL) gets stored values, 0 if absent. */
floe_status gpu_iceberg_find(gpu_iceberg *t, const uint64_t *d_keys, size_t n, uint8_t *d_results, uint64_t *d_ids,
                             void *d_values_out, gpu_stream stream, floe_errinfo *err);
/* ERASED / ABSENT (the first occurrence of a key in the batch is the one
 * ERASED); the slot becomes a tombstone. */
floe_status gpu_iceberg_erase(gpu_iceberg *t, const uint64_t *d_keys, size_t n, uint8_t *d_results, gpu_stream stream,
                              floe_errinfo *err);

/* A SET insert (find-or-put) or find of 1 <= n <= GPU_SMALL_KEYS keys as
 * one kernel of one block: h_keys, h_results and h_ids (may be NULL) in
 * pinned host memory, which the kernel reads and writes itself (no copies).
 * The same answers and ids as gpu_iceberg_put and gpu_iceberg_find. */
#define GPU_SMALL_KEYS 1024
floe_status gpu_iceberg_small(gpu_iceberg *t, int insert, const uint64_t *h_keys, size_t n, uint8_t *h_results,
                              uint64_t *h_ids, gpu_stream stream, floe_errinfo *err);

/* A piece of up to GPU_SEGMENTS_MAX consecutive segments (the backend's
 * pieces carry that many batches): segment i is keys and answers
 * [end[i - 1], end[i]) on the device (end[-1] = 0).  keys[i] is where its
 * keys come from and res, ids and vout where its answers go: pinned host
 * memory (floe_backend_host_alloc or the staging buffers), which the
 * kernels below read and write over the bus, so that a piece needs one
 * launch each way instead of a copy per segment. */
#define GPU_SEGMENTS_MAX 16
typedef struct gpu_segments {
    unsigned n; /* 1 .. GPU_SEGMENTS_MAX */
    uint32_t end[GPU_SEGMENTS_MAX];
    const uint64_t *keys[GPU_SEGMENTS_MAX];
    uint8_t *res[GPU_SEGMENTS_MAX];
    uint64_t *ids[GPU_SEGMENTS_MAX]; /* NULL: no ids */
    void *vout[GPU_SEGMENTS_MAX];    /* NULL: no values */
} gpu_segments;

/* Enqueues the copy of every segment's keys into d_keys. */
floe_status gpu_keys_in(uint64_t *d_keys, const gpu_segments *segs, gpu_stream stream, floe_errinfo *err);

/* The out kernel's sums, zero between launches (cudaMemset once when allocated). */
typedef struct gpu_tally {
    unsigned long long acc[GPU_SEGMENTS_MAX][5];
    unsigned ticket[GPU_SEGMENTS_MAX];
} gpu_tally;

/* Enqueues, after what is already on stream, the copy of every segment's
 * answers (d_results, and d_ids and d_values of vb bytes where the segment
 * wants them) to where segs says, and its counts: counts[i][k] (pinned host
 * memory) is how many results of segment i are k (FLOE_ABSENT ..
 * FLOE_ERASED).  One launch for the whole piece. */
floe_status gpu_answers_out(const uint8_t *d_results, const uint64_t *d_ids, const void *d_values, uint32_t vb,
                            const gpu_segments *segs, gpu_tally *d_tally, uint64_t (*counts)[5], gpu_stream stream,
                            floe_errinfo *err);

/* Tests only: a put runs its batch in pieces of at most `keys` keys (0:
 * the default, 2^24), so that a test with small batches meets twins in
 * different pieces. */
void gpu_iceberg_piece_keys(gpu_iceberg *t, size_t keys);

/* Tests only: the first-occurrence fix-up's batch tags run out after
 * `left` more batches (they wrap once in 2^18 otherwise), so that a test
 * sees the wrap, where the scratch is cleared. */
void gpu_iceberg_tags_left(gpu_iceberg *t, unsigned left);

/* Grow tables halt when a key comes back FULL: every later batch answers
 * GPU_SKIPPED for all its keys and changes nothing, so that the pipeline
 * can grow the table and re-run them in order.  Clearing is asynchronous.
 * Each lane of the backend (a pipeline of its own, tables/backend.h) halts
 * alone: the launches from gpu_iceberg_lane(t, lane) on read and set that
 * lane's flag, and clear_halt clears it.  The caller serialises launches
 * (the backend's table lock), so this is the lane of whoever launches. */
#define GPU_LANES_MAX 8
void gpu_iceberg_lane(gpu_iceberg *t, unsigned lane);
floe_status gpu_iceberg_clear_halt(gpu_iceberg *t, gpu_stream stream, floe_errinfo *err);

/* The same with host arrays: copies in, runs, copies out, waits. */
floe_status gpu_iceberg_put_host(gpu_iceberg *t, const uint64_t *keys, size_t n, uint8_t *results, uint64_t *ids,
                                 floe_errinfo *err);
floe_status gpu_iceberg_erase_host(gpu_iceberg *t, const uint64_t *keys, size_t n, uint8_t *results, floe_errinfo *err);
floe_status gpu_iceberg_find_host(gpu_iceberg *t, const uint64_t *keys, size_t n, uint8_t *results, uint64_t *ids,
                                  floe_errinfo *err);

/* Non-empty slots per level and tombstones, counted on the device (waits);
 * with a growth under way, the old arrays' keys counted with the new
 * arrays' levels of the same number.  used_bytes (NULL: not wanted): the
 * bytes those slots take (rows and values) in the arrays that hold them. */
floe_status gpu_iceberg_count(gpu_iceberg *t, uint64_t used[3], uint64_t *tombstones, uint64_t *used_bytes,
                              floe_errinfo *err);
/* Occupied slots per level (waits). */
floe_status gpu_iceberg_used(gpu_iceberg *t, uint64_t used[3], floe_errinfo *err);
/* Bytes of device memory the table's arrays hold (old and new during a growth). */
uint64_t gpu_iceberg_memory(const gpu_iceberg *t);
uint64_t gpu_iceberg_slots(const gpu_iceberg *t);

/* Rebuilds on the device into 2^addr_bits primary buckets, 1.5 times that
 * with three (the next power of two up, or larger, if that cannot hold
 * every key), dropping tombstones, at once (a growth under way ended
 * first); *addr_bits and *three get the size used.
 * A step of a doubling, a half or a third moves the primary level a
 * group of buckets at a time, in order (floe_geometry_moves_by_group), and
 * puts the other levels' keys again.  On failure the table is unchanged.
 * Waits. */
floe_status gpu_iceberg_rebuild(gpu_iceberg *t, uint32_t *addr_bits, uint32_t *three, floe_errinfo *err);

/* gpu_iceberg_rebuild with its work on `stream` alone, beside what other
 * streams run (a TREE's fold, which reads only its node table): the caller
 * sees that nothing else writes t until it returns (the old arrays are
 * read, then freed, which waits for the kernels that read them).  NULL:
 * gpu_iceberg_rebuild.  Waits for the stream. */
floe_status gpu_iceberg_rebuild_on(gpu_iceberg *t, uint32_t *addr_bits, uint32_t *three, gpu_stream stream,
                                   floe_errinfo *err);

/* Grows into 2^addr_bits primary buckets (1.5 times that with three)
 * without stopping the batches: the new arrays' address ranges are made
 * (waits), and from then on every batch owes the next GPU_MOVE_PER_KEY
 * slots of the old arrays a key of the batch (GPU_MOVE_MIN at least),
 * moved after it (gpu_iceberg_move_owed) or before the next, a group of
 * keys at a time in order, every key living in exactly one of the two
 * arrays; a batch meanwhile runs on both, each its own keys.  A growing
 * table's primary level and values are mapped a chunk at a time (vmem.h):
 * the new arrays' as their groups come, the old arrays' given back as
 * their keys leave, so the two stay within twice the bytes the keys fill;
 * batch, the keys of the batch the growth makes room for (0: not known),
 * asks for whole arrays instead where batches of its size end this growth
 * at once and the next one too (a table under 32 of them: a stop maps
 * every chunk, then unmaps them at the next); a growth into or from whole
 * arrays ends at its first batch, whatever its size.
 * The primary level moves a group of buckets at a time where the growth
 * is one step (a doubling, a half, a third: each group's keys stream into
 * its new buckets), the overflow levels key by key.  A batch that wants
 * ids (the new arrays' slots), or one of more than the old slots / 32
 * keys (the old arrays have no room for it: a table that small moves in a
 * stop of a few milliseconds), ends the growth first, as does the batch
 * that moves the last (waits; the old arrays are given back once the
 * batch's kernels are enqueued: gpu_iceberg_move_owed).  Where the device has
 * no memory for a share's chunks when it comes (taken by others since the
 * growth began), the share waits for a later batch, and the batches go on
 * in the room the arrays have (FULL answers where none is left); a batch
 * that must end the growth first (ids, or more keys than the old arrays'
 * room) answers ERR_FULL then, nothing of it stored.
 * A scan, a download, ids to keys, a rebuild or another growth ends a
 * growth under way first (gpu_iceberg_settle).  ERR_FULL if the arrays
 * cannot be allocated: the table as it was.  To a size of no more slots
 * it rebuilds at once (gpu_iceberg_rebuild). */
#define GPU_MOVE_PER_KEY 8u
#define GPU_MOVE_MIN     ((uint64_t)1 << 16)
floe_status gpu_iceberg_grow(gpu_iceberg *t, uint32_t addr_bits, uint32_t three, size_t batch, floe_errinfo *err);
/* The share of a growth's moves that the batches so far owe, enqueued on
 * stream after their kernels: the pipeline calls it once a batch's answers
 * are on their way, so that the moves run while the host stages the next
 * batch rather than before its kernels; first, the old arrays of a growth
 * that those batches ended are given back, so that the driver's unmaps
 * overlap their kernels.  Leaves the last share, which ends the growth, to
 * the next batch (its ids must be the final arrays'). */
floe_status gpu_iceberg_move_owed(gpu_iceberg *t, gpu_stream stream, floe_errinfo *err);
/* Whether a growth is under way. */
int gpu_iceberg_growing(const gpu_iceberg *t);
/* Ends a growth under way: every key left in the old arrays moved (waits). */
floe_status gpu_iceberg_settle(gpu_iceberg *t, floe_errinfo *err);

/* Slots a scan call examines at most. */
#define GPU_SCAN_WINDOW ((uint64_t)1 << 22)
/* Up to limit live keys (values: MAP, may be NULL) in slot order from slot
 * position pos into host arrays; *next is where to resume, *done set when
 * the scan passed the last slot.  Waits. */
floe_status gpu_iceberg_scan(gpu_iceberg *t, uint64_t pos, size_t limit, uint64_t *keys, void *values, size_t *n,
                             uint64_t *next, int *done, floe_errinfo *err);

/* Every key the table holds, appended to d_keys in no particular order:
 * the first cap of them are written, and *d_count (on the device) is added
 * the number of keys, so that a count past cap says the list was short.
 * Enqueues only. */
floe_status gpu_iceberg_keys_all(gpu_iceberg *t, uint64_t *d_keys, size_t cap, unsigned long long *d_count,
                                 gpu_stream stream, floe_errinfo *err);

/* The key held by each of n slot ids (d_ids NULL: ids first, first + 1,
 * ...): d_keys[i], and d_found[i] = 1, or 0 where the slot holds no key.
 * Enqueues only. */
floe_status gpu_iceberg_keys_at(gpu_iceberg *t, const uint64_t *d_ids, uint64_t first, size_t n, uint64_t *d_keys,
                                uint8_t *d_found, gpu_stream stream, floe_errinfo *err);

/* The table's arrays (levels 0..2, then values), as tables/iceberg.h's
 * iceberg_image lays them out, to and from host memory (waits).  An upload
 * gives t the put rule of the arrays' table: its first_fill. */
floe_status gpu_iceberg_download(gpu_iceberg *t, void *const sections[FLOE_LEVELS + 1], floe_errinfo *err);
floe_status gpu_iceberg_upload(gpu_iceberg *t, const void *const sections[FLOE_LEVELS + 1], uint32_t first_fill,
                               floe_errinfo *err);

#ifdef __cplusplus
}
#endif

#endif /* FLOE_GPU_ICEBERG_GPU_H */
