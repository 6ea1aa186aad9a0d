/*
 * tree.h - the CPU engine for TREE tables: tree-compressed vectors of
 * `words` 32-bit words (layout in tree_layout.h), batch by batch on the
 * thread pool, lock-free: nodes are claimed with one 64-bit CAS, roots go
 * through the iceberg engine (a SET keyed by the root pair).
 *
 * Every call is thread-safe.  Among concurrent inserts of one vector exactly
 * one sees FLOE_INSERTED; inside one batch the first occurrence of a vector
 * is the one INSERTED.  Vectors are packed: vector i is words[i * W ..
 * i * W + W).  A vector's id is its root slot id, stable until the table
 * grows (which increments the generation).  FULL: the node table or the
 * root table had no room; nodes written on the way stay (counted as
 * orphans).  A table whose spec grows never answers FULL below the largest
 * size: its node table and its root table each grow (to twice the size)
 * between the steps of a batch, when past max_fill or when a vector came
 * back FULL, which is then put again.
 *
 * Batches come through the door (floe_request_check in spec.h; in-process,
 * floe_table_submit): vectors and results present, fewer than 2^32 of
 * them.  The engine asserts that instead of checking it again.
 */
#ifndef FLOE_TABLES_TREE_H
#define FLOE_TABLES_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "iceberg.h"
#include "pool.h"
#include "spec.h"
#include "status.h"
#include "tree_layout.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tree tree;
struct floe_file_image; /* tablefile.h */

/* How a TREE is laid out: the node table's size (2^node_bits slots, 1.5
 * times that with node_three) and layout (node_tag_bits: 4 in a table of
 * node layout 2 or older, tree_layout.h), and the root table's own SET spec
 * and size (2^root_addr_bits primary buckets, 1.5 times that with
 * root_three).  A new table's is a function of its spec (capacity, words,
 * memory, grow, seed: tree_size); growth makes either table larger, and a
 * file records its sizes (tree_size_bits). */
typedef struct tree_sizing {
    uint32_t node_bits, node_three, node_tag_bits;
    floe_spec root_spec;
    uint32_t root_addr_bits, root_three;
    uint64_t node_bytes, root_bytes;
} tree_sizing;

/* Node slots per vector when no memory budget is given (words > 3) ... */
#define TREE_DEFAULT_NODES_PER_VECTOR 2u
/* ... and for a table that grows, which starts small (a node slot for 8
 * vectors: models that share most subtrees need fewer still) and grows as
 * the model's sharing shows. */
#define TREE_GROW_NODES_PER_VECTOR 0.125
/* ... plus N - 2 nodes for each of the first vectors (they share nothing). */
#define TREE_UNSHARED_VECTORS 1024u
/* Node table fill the default sizing aims at. */
#define TREE_NODE_FILL 0.8
/* A node table grows before a batch that would take it past this fill (at
 * the last batch's rate of new nodes; max_fill where that is lower): past
 * it a node may find no room in its 31 probes (T1's tables met it at 0.83
 * to 0.87), and a batch that meets a full node table folds again after a
 * growth that carries its folded roots along (the GPU engine's look-ahead).
 * Not while a growth is sized for the capacity (tree_nodes_ahead): one
 * sooner would guess the capacity's nodes from an earlier, higher rate. */
#define TREE_NODE_GROW_FILL 0.85
/* A model's first states share little, and say little of its rate of new
 * nodes: a growth guesses from that rate only once the table holds a
 * TREE_AHEAD_FROM-th of its capacity (tree_nodes_ahead) ... */
#define TREE_AHEAD_FROM 16u
/* ... and by at most so many doublings of the node table at once. */
#define TREE_GROW_AHEAD_BITS 3u

floe_status tree_size(const floe_spec *spec, tree_sizing *z, floe_errinfo *err);
/* The layout of spec with the sizes and node layout of `sizes` (its
 * node_bits, node_three, node_tag_bits, root_addr_bits and root_three; a
 * grown or saved table's): ERR_INVALID where they are no layout. */
floe_status tree_size_bits(const floe_spec *spec, const tree_sizing *sizes, tree_sizing *z, floe_errinfo *err);
/* The geometry of spec's vectors in tables laid out as z. */
void tree_geometry_for(const floe_spec *spec, const tree_sizing *z, floe_tree_geometry *g);
/* The node slots a growing table wants for its capacity: while it holds
 * fewer vectors than the spec's capacity (and at least 1 / TREE_AHEAD_FROM
 * of it), the `nodes` it holds for `vectors` and `rate` more for each
 * vector to come (the nodes a new vector made lately; 0: the average so
 * far), at TREE_NODE_FILL; else 0. */
double tree_nodes_ahead(const floe_spec *spec, uint64_t nodes, uint64_t vectors, double rate);
/* The layout `from` grown: the node table one step larger (times 1.5 or
 * 4/3: 2^k, 1.5 * 2^k, 2^(k+1), ..., in the newest node layout) and/or the
 * root table one step larger (the same steps; doublings in a table of an
 * older node layout) (what: TREE_GROW_NODES, TREE_GROW_ROOTS, below), a
 * larger root table where wider roots need one; ERR_TOO_LARGE past the
 * largest.  A node table grows further, up to 2^TREE_GROW_AHEAD_BITS times,
 * to the step nearest `want` slots (in ratio; tree_nodes_ahead; 0: none): a
 * table sized by its capacity then grows its nodes once or twice, not once
 * a step, where its model shares less than the start size assumed. */
floe_status tree_size_grown(const floe_spec *spec, const tree_sizing *from, unsigned what, double want, tree_sizing *to,
                            floe_errinfo *err);
/* tree_size_grown's growth, then as many steps more as `nodes` nodes and
 * `roots` roots need (the ones stored and a batch's to come): the node
 * table (where `what` grows it) until they fill it to TREE_NODE_FILL at
 * most (a node may find no room short of max_fill), the root table until
 * they fill it to max_fill at most (whatever `what` says: a new node table
 * puts every root again).  Past the largest size it stops there (the
 * batch then meets FULL where it must).  One growth makes a batch's room,
 * not one growth a step: each puts the whole tree again. */
floe_status tree_size_for(const floe_spec *spec, const tree_sizing *from, unsigned what, double want, double nodes,
                          double roots, tree_sizing *to, floe_errinfo *err);

/* The most nodes a vector adds to the node table: words - 2 (its tree's
 * inner nodes but the root, which goes to the root table). */
static inline double tree_most_nodes_a_vector(const floe_spec *spec)
{
    return spec->words > 2 ? (double)(spec->words - 2) : 0.0;
}
/* The growths (TREE_GROW_NODES, TREE_GROW_ROOTS) a batch of n vectors
 * could need at most, in tables of node_slots and root_slots holding
 * `nodes` and `roots`: each vector adds a root and words - 2 nodes at most,
 * and a node may find no room past TREE_NODE_FILL, short of max_fill.  The
 * rule by which both engines refuse, under a memory limit, a batch whose
 * growth the limit would not allow, before anything of it is stored. */
unsigned tree_growths_possible(const floe_spec *spec, uint64_t nodes, uint64_t node_slots, uint64_t roots,
                               uint64_t root_slots, size_t n);

/* The spec must pass floe_spec_validate with kind TREE (seed 0: pick one). */
floe_status tree_create(const floe_spec *spec, floe_pool *pool, tree **out, floe_errinfo *err);
/* The same laid out as z (tree_size_bits of the same spec and seed). */
floe_status tree_create_sized(const floe_spec *spec, const tree_sizing *z, floe_pool *pool, tree **out,
                              floe_errinfo *err);
void tree_destroy(tree *t);
const tree_sizing *tree_sizes(const tree *t);
const floe_spec *tree_spec(const tree *t);
const floe_tree_geometry *tree_geometry(const tree *t);

/* Find-or-put of n vectors: INSERTED / PRESENT / FULL; ids may be NULL. */
floe_status tree_insert(tree *t, const uint32_t *vectors, size_t n, uint8_t *results, uint64_t *ids,
                        floe_answer_counts *counts, floe_errinfo *err);
/* Find-or-put of n states, each given as the id of a stored vector (its
 * parent, an id of `generation`) and the words that differ from it, as the
 * protocol sends them (proto/floe_wire.h): state i has counts[i] of them,
 * the next FLOE_CHANGE_BYTES-byte entries of `changes` (a word named twice
 * takes its last value).  Only the nodes on the changed words' paths are
 * read and put (changes x log2(words) of them, against words - 2 for a
 * whole vector); the answers are as tree_insert's for the whole vectors.
 * Parents of another generation than the table's, or a parent that names
 * no vector, fail the batch (ERR_INVALID), which then changes nothing. */
floe_status tree_insert_delta(tree *t, uint64_t generation, const uint64_t *parents, const uint8_t *counts,
                              const uint8_t *changes, size_t n, uint8_t *results, uint64_t *ids,
                              floe_answer_counts *counts_out, floe_errinfo *err);
/* The rule of parents by generation, for every engine: OK when the ids
 * given are of the table's current generation, else ERR_INVALID saying so. */
floe_status tree_parents_generation(const char *table, uint64_t given, uint64_t current, floe_errinfo *err);
/* ... and its answer for state i whose parent names no vector. */
floe_status tree_parent_missing(const char *table, size_t state, uint64_t parent, floe_errinfo *err);
/* n states' changes (as tree_insert_delta takes them) applied to their
 * parents' vectors (n * words words), in order. */
void tree_apply_changes(uint32_t *vectors, uint32_t words, const uint8_t *counts, const uint8_t *changes, size_t n);
/* PRESENT / ABSENT; changes nothing. */
floe_status tree_find(tree *t, const uint32_t *vectors, size_t n, uint8_t *results, uint64_t *ids,
                      floe_answer_counts *counts, floe_errinfo *err);
/* The vectors of n ids: PRESENT and the vector (n * words words), or ABSENT
 * and zeros where the id names no stored vector. */
floe_status tree_get(tree *t, const uint64_t *ids, size_t n, uint8_t *results, uint32_t *vectors,
                     floe_answer_counts *counts, floe_errinfo *err);
/* Up to limit stored vectors from the cursor on: their ids and (vectors not
 * NULL) the vectors.  As iceberg_scan: a bounded number of slots per call. */
floe_status tree_scan(tree *t, const floe_scan_pos *from, size_t limit, uint64_t *ids, uint32_t *vectors, size_t *n,
                      floe_scan_pos *next, int *done, floe_errinfo *err);
void tree_stats(tree *t, floe_table_stats *s);
/* What tree_grow makes larger (as tree_size_grown). */
#define TREE_GROW_NODES 1u /* the node table: every vector is put again into new tables */
#define TREE_GROW_ROOTS 2u /* the root table: the roots move, the nodes stay */
/* Grows what `what` names (a growing table's batches do it themselves).
 * Ids change and the generation increments; a new node table leaves the
 * orphan nodes behind.  On failure t is unchanged: ERR_TOO_LARGE past the
 * largest size, another status when out of memory.  Waits for the batches
 * running. */
floe_status tree_grow(tree *t, unsigned what, floe_errinfo *err);
uint64_t tree_generation(const tree *t);
/* For a host copy of a table grown elsewhere (the GPU engine's). */
void tree_set_generation(tree *t, uint64_t generation);

floe_status tree_save(tree *t, const char *path, floe_errinfo *err);
/* A copy of t's file contents (batches must not run meanwhile: the caller
 * runs it in the table's batch order). */
floe_status tree_copy_image(tree *t, struct floe_file_image **out, floe_errinfo *err);
/* An image that takes t over; freeing it destroys t (see iceberg_image_of). */
floe_status tree_image_of(tree *t, struct floe_file_image **out, floe_errinfo *err);
floe_status tree_load(const char *path, uint64_t offset, floe_pool *pool, tree **out, floe_errinfo *err);

/* The raw node array and the root table: for the GPU backend, which keeps
 * the same layout on the device and saves and loads through this file code.
 * Not thread-safe against batches. */
uint64_t *tree_nodes(tree *t);
iceberg *tree_roots(tree *t);
void tree_counters(tree *t, uint64_t *nodes, uint64_t *orphans);
void tree_set_counters(tree *t, uint64_t nodes, uint64_t orphans);

/* Figures every TREE engine reports alike, from its raw counts. */
void tree_fill_stats(floe_table_stats *s, const floe_tree_geometry *g, uint64_t nodes, uint64_t orphans,
                     uint64_t node_bytes);

#ifdef __cplusplus
}
#endif

#endif /* FLOE_TABLES_TREE_H */
