/*
 * tree_gpu.h - the GPU engine for TREE tables, a plain C API over CUDA
 * kernels (tree_gpu.cu).  Same layout as the CPU engine (tables/tree_layout.h,
 * sized by tables/tree.c's tree_size), same answers: find-or-put with the
 * first occurrence of a vector in a batch INSERTED, find, get_by_id.
 *
 * A batch is deduplicated on the device before it touches the node table:
 * each distinct vector is folded once (by its first occurrence), its root
 * goes to the root table (a gpu_iceberg SET), and the other occurrences
 * copy its answer.  Batch functions take device arrays and a stream; insert
 * and find read one count back from the device (they wait for the fold).
 * The _host variants copy in, run, copy out and wait: for tests and tools.
 * CUDA errors come back as FLOE_ERR_INTERNAL with the CUDA message.
 */
#ifndef FLOE_GPU_TREE_GPU_H
#define FLOE_GPU_TREE_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "iceberg_gpu.h"
#include "spec.h"
#include "status.h"
#include "tree.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpu_tree gpu_tree;

/* An empty TREE table in device memory (spec->seed must be set), laid out
 * as z (NULL: tree_size's layout of spec; a grown or loaded table's:
 * tree_sizes of its host copy). */
floe_status gpu_tree_create(const floe_spec *spec, const tree_sizing *z, gpu_tree **out, floe_errinfo *err);
void gpu_tree_destroy(gpu_tree *t);
const floe_spec *gpu_tree_spec(const gpu_tree *t);

/* Find-or-put of n device-resident vectors (n * words words): d_results
 * (n bytes) INSERTED / PRESENT / FULL, d_ids (may be NULL).  A table whose
 * spec grows grows itself (gpu_tree_grow) before the batch while it would
 * pass max_fill.  A node table that has no room for a vector in the
 * batch's fold grows there, before the root put, taking the vectors
 * folded so far along, and the ones that found no room fold again into
 * it.  A root table that has no room grows after the batch, and its FULL
 * vectors are put again, in order.  The ids are of the last generation.
 * It answers FULL only past the largest size, and waits for the batch. */
floe_status gpu_tree_insert(gpu_tree *t, const uint32_t *d_vectors, size_t n, uint8_t *d_results, uint64_t *d_ids,
                            gpu_stream stream, floe_errinfo *err);
/* PRESENT / ABSENT. */
floe_status gpu_tree_find(gpu_tree *t, const uint32_t *d_vectors, size_t n, uint8_t *d_results, uint64_t *d_ids,
                          gpu_stream stream, floe_errinfo *err);
/* The vectors of n ids (d_ids NULL: ids first, first + 1, ...): PRESENT and
 * the vector, or ABSENT and zeros.  Enqueues only. */
floe_status gpu_tree_get(gpu_tree *t, const uint64_t *d_ids, uint64_t first, size_t n, uint8_t *d_results,
                         uint32_t *d_vectors, gpu_stream stream, floe_errinfo *err);

/* The same with host arrays (copy in, run, copy out, wait). */
floe_status gpu_tree_insert_host(gpu_tree *t, const uint32_t *vectors, size_t n, uint8_t *results, uint64_t *ids,
                                 floe_errinfo *err);
floe_status gpu_tree_find_host(gpu_tree *t, const uint32_t *vectors, size_t n, uint8_t *results, uint64_t *ids,
                               floe_errinfo *err);
floe_status gpu_tree_get_host(gpu_tree *t, const uint64_t *ids, size_t n, uint8_t *results, uint32_t *vectors,
                              floe_errinfo *err);

const tree_sizing *gpu_tree_sizes(const gpu_tree *t);
/* Which of t's tables to grow before `coming` more vectors (what:
 * TREE_GROW_NODES, TREE_GROW_ROOTS): the nodes if they would pass max_fill
 * or TREE_NODE_GROW_FILL (tree.h), the lower (max_fill while a growth is
 * sized for the capacity), at the last batch's rate of new nodes (the count
 * the batches keep), the
 * roots if they are past it now (the batches keep a bound; counted on the
 * device when the bound passes: waits then). */
floe_status gpu_tree_over_fill(gpu_tree *t, size_t coming, double max_fill, unsigned *what, floe_errinfo *err);
/* A limit on growth (floed's maxmemory-gpu): fits(ctx, bytes) is asked
 * before a growth allocates (its new arrays and the copy's scratch); false
 * fails the growth with FLOE_ERR_NO_MEMORY, t unchanged.  An insert whose
 * fold then has no room answers FLOE_ERR_NO_MEMORY with none of its vectors
 * stored; one whose roots had no room answers FULL for those.  fits NULL:
 * none (the default). */
void gpu_tree_set_limit(gpu_tree *t, bool (*fits)(void *ctx, uint64_t bytes), void *ctx);
/* Whether an insert of n vectors into a growing t is refused whole under
 * the limit (gpu_tree_set_limit): a growth it could need at most (the CPU
 * engine's rule, tree_growths_possible) would allocate past it.  Then
 * FLOE_ERR_NO_MEMORY in err, nothing stored; false with no limit.  A growth
 * the batch needs all the same is asked again as it allocates. */
bool gpu_tree_refuses(gpu_tree *t, size_t n, floe_errinfo *err);
/* Grows t (what: TREE_GROW_NODES, TREE_GROW_ROOTS) on the device, in one
 * growth: each table a step larger, and as many steps more as `coming`
 * vectors need at the last batch's rates of new nodes and roots (0: one
 * step; the nodes may go further, to the look ahead's guess:
 * tree_size_grown).  A new node table means new tables that every node
 * reached from a root is put into again, once, bottom-up, with its halves'
 * new references (a map from old to new references for each class of
 * node: 4 bytes an old slot a class, one class a level for most lengths),
 * then every root; they then replace t's.  A new root table alone moves
 * the roots.  Ids change and the generation increments.  Needs the old and
 * the new arrays at once; on failure t is unchanged (ERR_TOO_LARGE past
 * the largest size, ERR_NO_MEMORY past the limit).  Waits. */
floe_status gpu_tree_grow(gpu_tree *t, unsigned what, size_t coming, floe_errinfo *err);
/* Find-or-put of n states by parent, on the device: state i is the vector
 * of root slot d_parents[i] (an id of the table's generation) with the
 * changes [d_first[i], d_first[i + 1]) of d_changes (FLOE_CHANGE_BYTES
 * each, proto/floe_wire.h) applied.  Only the nodes on the changed words'
 * paths are read and put (tables/tree.c's tree_insert_delta); a state of
 * many changes unfolds and folds whole.  The root keys then go into the
 * root table, first occurrences INSERTED, answers and ids as
 * gpu_tree_insert's.  A parent that names no vector fails the batch
 * (ERR_INVALID) before anything changes.  When the node table must grow
 * first, or has no room for a path, the states go whole (their parents
 * unfolded and changed, then gpu_tree_insert).  d_ids may be d_parents
 * (every parent is read before an id is written).  Waits. */
floe_status gpu_tree_insert_delta(gpu_tree *t, const uint64_t *d_parents, const uint32_t *d_first,
                                  const uint8_t *d_changes, size_t n, uint8_t *d_results, uint64_t *d_ids,
                                  gpu_stream stream, floe_errinfo *err);
/* n states' changes (tree_apply_changes's, proto/floe_wire.h) applied on
 * the device to their parents' vectors (n * words words): state i's are
 * [d_first[i], d_first[i + 1]) of d_changes.  Enqueues only. */
floe_status gpu_tree_apply_changes(uint32_t *d_vectors, uint32_t words, const uint32_t *d_first,
                                   const uint8_t *d_changes, size_t n, gpu_stream stream, floe_errinfo *err);
/* Growths since the table was made (a loaded table's count from its file). */
uint64_t gpu_tree_generation(const gpu_tree *t);
/* Root slots (ids are below this). */
uint64_t gpu_tree_root_slots(const gpu_tree *t);
/* The table's figures, counted on the device (waits). */
floe_status gpu_tree_stats(gpu_tree *t, floe_table_stats *st, floe_errinfo *err);

/* The arrays to and from a host tree of the same spec (tree_create'd with
 * it), for saving and loading through the CPU engine's file code (waits). */
floe_status gpu_tree_download(gpu_tree *t, tree *host, floe_errinfo *err);
floe_status gpu_tree_upload(gpu_tree *t, tree *host, floe_errinfo *err);

#ifdef __cplusplus
}
#endif

#endif /* FLOE_GPU_TREE_GPU_H */
