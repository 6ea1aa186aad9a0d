/*
 * spec.h - what a table is: its spec (kind, key width, values, capacity,
 * growth), the operations and flags of a request on it, and the figures
 * every backend reports about it.
 *
 * A spec is validated once, by floe_spec_validate, before any backend sees
 * it; backends may then trust it.  A request is checked against the spec
 * once too, by floe_request_check (the door: what each kind accepts), before
 * any engine sees it: floed per request, floe_table_submit per batch for
 * in-process callers.  Engines assume valid input and only assert it.
 */
#ifndef FLOE_TABLES_SPEC_H
#define FLOE_TABLES_SPEC_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "layout.h"
#include "ops.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Numbers as in the protocol's TableKind. */
typedef enum floe_kind {
    FLOE_KIND_UNSPECIFIED = 0,
    FLOE_KIND_SET = 1,
    FLOE_KIND_MAP = 2,
    FLOE_KIND_TREE = 3,
    FLOE_KIND_ORDERED = 4,
    FLOE_KIND_STATIC = 5,
} floe_kind;


#define FLOE_BATCH_OVERWRITE   1u /* INSERT on a MAP: replace the value of PRESENT keys */
#define FLOE_BATCH_WANT_IDS    2u /* INSERT, FIND: fill ids; SCAN: a TREE's only (its scans always give ids) */
#define FLOE_BATCH_WANT_VALUES 4u /* INSERT, FIND, SUCC, PRED: fill values_out; SCAN, RANGE: fill scan_values */
/* The caller already ran floe_request_check on every request in this batch
 * (floed checks per request, so that a bad key fails only its own request):
 * floe_table_submit then skips the pass over the keys and checks only the
 * batch's buffers. */
#define FLOE_BATCH_CHECKED 8u
#define FLOE_BATCH_FLAGS   (FLOE_BATCH_OVERWRITE | FLOE_BATCH_WANT_IDS | FLOE_BATCH_WANT_VALUES | FLOE_BATCH_CHECKED)

/* What a batch of op with these flags does to a PRESENT key's value: the
 * row's deltas (add), or the insert's overwrite flag. */
static inline floe_value_mode floe_value_mode_of(int op, unsigned batch_flags)
{
    return floe_op_has(op, FLOE_OPF_DELTAS)            ? FLOE_VALUES_ADD
           : (batch_flags & FLOE_BATCH_OVERWRITE) != 0 ? FLOE_VALUES_OVERWRITE
                                                       : FLOE_VALUES_KEEP;
}

/* FLOE_NAME_MAX, FLOE_MAX_CAPACITY and the defaults of a spec are the protocol's: floe_wire.h. */
#define FLOE_BACKEND_NAME_MAX 16
/* Most partitions of one table (tables/partition.h). */
#define FLOE_PARTS_MAX 16
/* The most lanes (pipelines side by side) a table may have (tables/backend.h). */
#define FLOE_LANES_MAX 8

typedef struct floe_spec {
    char name[FLOE_NAME_MAX + 1]; /* [A-Za-z0-9_.-], 1..64 characters */
    floe_kind kind;
    uint32_t key_bits;                   /* SET, MAP, ORDERED: 1..64 */
    uint32_t words;                      /* TREE: 32-bit words per vector, 2..256 */
    uint32_t value_bytes;                /* MAP: 4 or 8; ORDERED, STATIC: 0, 4 or 8; SET, TREE: 0 */
    uint64_t capacity;                   /* keys the table holds without growing */
    bool grow;                           /* rebuild at twice the size instead of answering FULL */
    double max_fill;                     /* with grow: rebuild when occupied slots pass this fraction */
    uint64_t seed;                       /* permutation seed; 0 = pick one at random */
    char backend[FLOE_BACKEND_NAME_MAX]; /* "cpu", "gpu" or "auto" */
    uint64_t memory;                     /* TREE: bytes for node and root tables (0: sized from capacity) */
    /* A shard of a table partitioned over several floed (TableSpec.shard...):
     * shard of shards (2..FLOE_SHARDS_MAX) of the server list hashing to
     * shard_set; all 0 for a whole table. */
    uint32_t shard, shards;
    uint64_t shard_set;
    /* Parts over the backend's devices (tables/partition.h): 0 lets the
     * backend choose (floed: its partitions setting, else whole on one device
     * unless the table needs more than one holds), else 1..FLOE_PARTS_MAX.
     * Not in the table's file, which records the parts it was saved in. */
    uint32_t parts;
    /* An exploring table (TableSpec.explore; tables/explore.h): the states it
     * answers INSERTED join its open set, kept by floed beside it.  SET, MAP
     * and TREE, on one floed; label_bytes 0..FLOE_EXPLORE_LABEL_MAX; claims
     * level by level unless explore_any_order. */
    bool explore;
    uint32_t label_bytes;
    bool explore_any_order;
} floe_spec;

/* A spec with the defaults: SET, 64-bit keys, capacity 1 Mi, no growth.
 * (A TREE spec has key_bits 0: its keys are vectors of `words` words.) */
void floe_spec_default(floe_spec *s);

/* Checks every field; on failure says which one and why. */
floe_status floe_spec_validate(const floe_spec *s, floe_errinfo *err);

/* The door: whether a request of op with flags is one the table of spec
 * accepts, decided here once for floed and for in-process callers alike
 * (floe_table_submit); engines assume it and only assert.  keys and values
 * are the request's bytes as they arrive on the wire: keys_len bytes of keys
 * (SET, MAP: 8 per key; TREE INSERT and FIND: words x 4 per vector; GET: 8 per
 * id), values_len bytes of values (a MAP insert: value_bytes per key).  Any
 * alignment.  It checks that the operation is one the kind does (ERASE and
 * REBUILD not on a TREE, GET only on one, SUCC and PRED only on an ORDERED
 * table, REBUILD not on one: FLOE_ERR_UNSUPPORTED), the flags (overwrite and
 * want_values only on a table with values: a MAP, an ORDERED table of
 * value_bytes 4 or 8; in a scan, want_values the same and want_ids only on
 * a TREE), that keys_len is whole keys, vectors or ids, fewer than 2^32 of
 * them (FLOE_ERR_TOO_LARGE) and present, every key below 2^key_bits, and
 * values only with an insert into a table with values, exactly n x
 * value_bytes of them.  On success *n (if n is not NULL) is the number of
 * keys, vectors or ids; on failure err says what is wrong, in the words
 * floed answers with.  FLOE_OK for operations without keys other than SCAN,
 * REBUILD and RANGE (a RANGE's kind and flags only: its bounds are
 * floe_range_check's).  Flags an operation does not use (want_ids on an
 * erase, overwrite on a find) are
 * allowed and ignored; bits outside FLOE_BATCH_FLAGS are not. */
floe_status floe_request_check(const floe_spec *spec, floe_op op, unsigned flags, const void *keys, size_t keys_len,
                               const void *values, size_t values_len, size_t *n, floe_errinfo *err);
/* The door for a RANGE of an ORDERED table (any other kind:
 * FLOE_ERR_UNSUPPORTED): lo and hi below 2^key_bits, lo <= hi, and flags
 * (want_values only with values). */
floe_status floe_range_check(const floe_spec *spec, unsigned flags, uint64_t lo, uint64_t hi, floe_errinfo *err);

/* Which shard of a table over several floed spec is, -1 for a whole table. */
static inline int floe_spec_shard_index(const floe_spec *spec)
{
    return spec->shards ? (int)spec->shard : -1;
}

/* Whether a table of spec stores a value with each key (a MAP; an ORDERED
 * table of value_bytes 4 or 8). */
static inline bool floe_spec_has_values(const floe_spec *spec)
{
    return spec->kind != FLOE_KIND_TREE && spec->value_bytes != 0;
}

/* The same for a caller that has found every key (of a SET or MAP) below
 * 2^key_bits already (floe_keys_fit, over its threads): every check but
 * that pass over the keys. */
floe_status floe_request_check_fitted(const floe_spec *spec, floe_op op, unsigned flags, const void *keys,
                                      size_t keys_len, const void *values, size_t values_len, size_t *n,
                                      floe_errinfo *err);

/* The door for an INSERT of TREE states given by their parents (the
 * protocol's Insert.parents, change_counts, changes; proto/floe_wire.h):
 * parents_len bytes of 8-byte ids, a count byte per state, and exactly as
 * many FLOE_CHANGE_BYTES-byte changes as the counts say, each naming a word
 * below `words`; fewer than 2^32 states; flags as for a TREE insert.  On
 * success *n (if not NULL) is the number of states.  Whether the parents
 * name vectors, and of the table's generation, is the engine's to say. */
floe_status floe_states_check(const floe_spec *spec, unsigned flags, size_t parents_len, const uint8_t *counts,
                              size_t counts_len, const uint8_t *changes, size_t changes_len, size_t *n,
                              floe_errinfo *err);

const char *floe_kind_name(floe_kind k);

/* Per-batch tallies of the per-key answers. */
typedef struct floe_answer_counts {
    uint64_t inserted, present, absent, full, erased;
} floe_answer_counts;

/* Whether every key is below 2^key_bits: the door's pass over a large batch,
 * split across threads (floe_request_check_fitted), and engines' debug
 * assertions. */
bool floe_keys_fit(uint32_t key_bits, const uint64_t *keys, size_t n);

/* assert() for what costs a pass over a batch (every key below 2^key_bits):
 * only in builds with FLOE_DEBUG (make's san and tsan builds), since the
 * release build keeps its asserts (no NDEBUG) and the door has checked. */
#ifdef FLOE_DEBUG
#define FLOE_DEBUG_ASSERT(x) assert(x)
#else
#define FLOE_DEBUG_ASSERT(x) ((void)0)
#endif

/* Sets c from n per-key answers (c may be NULL). */
void floe_answer_counts_tally(floe_answer_counts *c, const uint8_t *results, size_t n);
/* The counts from how many answers were each of 0..4 (FLOE_ABSENT .. FLOE_ERASED). */
void floe_answer_counts_of(floe_answer_counts *c, const uint64_t by_answer[5]);

/* Where a scan resumes: a slot position, valid for one generation. */
typedef struct floe_scan_pos {
    uint64_t position;
    uint64_t generation;
} floe_scan_pos;

typedef struct floe_level_stats {
    uint64_t slots;    /* slots in the level */
    uint64_t used;     /* non-empty slots: keys and tombstones */
    uint32_t row_bits; /* 16, 32 or 64 */
    uint32_t buckets_log2;
    double fill; /* used / slots */
} floe_level_stats;

/* Where a table's key batches spend their time, cumulative since the table
 * was created or loaded.  The daemon fills the first group, the GPU backend
 * the second; io_cpu is server-wide.  A stage's nanos is time spent on the
 * thread (or, for h2d, kernel and d2h, the GPU stream) doing that stage,
 * except queue and backend, which are waits: a request's time in the
 * table's queue, a batch's time from submission to completion. */
enum {
    FLOE_STAGE_PARSE,     /* io thread: frame pullup, protobuf unpack, key checks, queueing (per request) */
    FLOE_STAGE_QUEUE,     /* a request's wait in the table's queue until its batch is launched */
    FLOE_STAGE_MERGE,     /* gathering several requests' keys into one batch (per batch) */
    FLOE_STAGE_BACKEND,   /* a batch from submission to completion, the engine's whole time (per batch) */
    FLOE_STAGE_SPLIT,     /* a table in parts: cutting a batch into the parts' batches (per batch) */
    FLOE_STAGE_STAGE_IN,  /* GPU: copying a piece's keys into pinned staging memory (per piece) */
    FLOE_STAGE_H2D,       /* GPU: host-to-device copy (per piece) */
    FLOE_STAGE_KERNEL,    /* GPU: the table's kernels (per piece) */
    FLOE_STAGE_D2H,       /* GPU: device-to-host copy of the answers (per piece) */
    FLOE_STAGE_STAGE_OUT, /* GPU: answers handed to the piece's batches, with their counts (per piece) */
    FLOE_STAGE_JOIN,      /* a table in parts: the parts' answers back into the batch's order (per batch) */
    FLOE_STAGE_REPLY,     /* building the response frames of a batch and handing them to io threads */
    FLOE_STAGE_IO_CPU,    /* CPU time of all io threads since floed started (server-wide) */
    FLOE_STAGES
};

typedef struct floe_stage_time {
    uint64_t count; /* requests, batches or pieces (see the stage) */
    uint64_t keys;
    uint64_t nanos;
} floe_stage_time;

/* "parse", "queue", ... (NULL past FLOE_STAGES). */
const char *floe_stage_name(int stage);

/* Adds one occurrence of n keys that took nanos. */
static inline void floe_stage_add(floe_stage_time *s, uint64_t n, uint64_t nanos)
{
    s->count++;
    s->keys += n;
    s->nanos += nanos;
}

/* Adds every occurrence of from to to (timers kept apart, reported together). */
static inline void floe_stage_sum(floe_stage_time *to, const floe_stage_time *from)
{
    to->count += from->count;
    to->keys += from->keys;
    to->nanos += from->nanos;
}

/* CLOCK_MONOTONIC in nanoseconds: for stage timers. */
uint64_t floe_now_ns(void);

/* One part of a partitioned table (tables/partition.h). */
typedef struct floe_part_stats {
    uint64_t keys, slots, memory_bytes, generation;
    int32_t device; /* as in floe_table_stats */
} floe_part_stats;

typedef struct floe_table_stats {
    floe_spec spec;
    uint64_t keys;       /* live keys */
    uint64_t tombstones; /* erased slots awaiting a rebuild */
    uint64_t slots;      /* all slots, every level */
    double fill;         /* (keys + tombstones) / slots */
    uint64_t memory_bytes;
    uint64_t used_bytes;  /* the bytes of the slots in use (rows and values; TREE: nodes and root rows) in the
                           * arrays that hold them (a growing GPU SET's or MAP's old arrays too); 0: not counted */
    double bytes_per_key; /* memory_bytes / keys (0 when empty) */
    uint64_t generation;  /* rebuilds so far (a STATIC table: and 1 for its freeze) */
    bool frozen;          /* a STATIC table that was frozen: it answers finds and refuses writes */
    char backend[FLOE_BACKEND_NAME_MAX];
    int32_t device;                      /* the CUDA device of a GPU table; -1 on the CPU or for several devices */
    floe_level_stats level[FLOE_LEVELS]; /* primary, secondary, stash (TREE: of the root table) */
    /* TREE only */
    uint64_t nodes;        /* node slots in use */
    uint64_t node_slots;   /* node table size */
    double node_fill;      /* nodes / node_slots */
    uint64_t orphan_nodes; /* nodes written for vectors that came back FULL (later vectors may share them) */
    double compression;    /* stored bytes (nodes x 8 + roots x root row bytes) / (vectors x words x 4) */
    floe_stage_time stage[FLOE_STAGES];
    /* A partitioned table: the figures above are the sums over its parts
     * (generation too: it moves when any part rebuilds); 0 for a whole table. */
    uint32_t parts;
    floe_part_stats part[FLOE_PARTS_MAX];
} floe_table_stats;

#ifdef __cplusplus
}
#endif

#endif /* FLOE_TABLES_SPEC_H */
