/*
 * ops.h - the table of operations: one row per operation a table does,
 * read by every layer that asks what an operation is.
 *
 * A row says once what was written in each layer before: the operation's
 * name (in messages, logs and metrics), its shape (what a batch of it
 * carries), the kinds it is for, what it reads and answers, whether requests
 * of it merge into one batch, whether it writes, and how a table in parts
 * runs it.  The door (spec.c), the daemon's batcher and handlers, the
 * partition layer and the backends ask the row (floe_op_def, or the
 * predicates below); an operation's own work stays in its engine.
 *
 * Adding an operation: a row here (its number is its place), its rule in
 * floe_request_check where the row's columns do not say it all, its engine
 * entry in each backend's runner of the kinds it names, its wire message
 * (proto/floe.proto) and its handler (daemon/ops/).  docs/ARCHITECTURE.md
 * walks through it.
 *
 * C and CUDA include it alike.
 */
#ifndef FLOE_TABLES_OPS_H
#define FLOE_TABLES_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a batch of an operation carries (floe_batch, tables/backend.h). */
typedef enum floe_shape {
    FLOE_SHAPE_KEYS,  /* n keys (8 bytes; a TREE's vectors where VECTORS), an answer byte each */
    FLOE_SHAPE_IDS,   /* n 8-byte ids of a TREE's vectors, an answer byte each */
    FLOE_SHAPE_SCAN,  /* a cursor and a limit: up to limit stored keys */
    FLOE_SHAPE_RANGE, /* lo, hi, a cursor and a limit */
    FLOE_SHAPE_TABLE, /* the table as a whole */
} floe_shape;

/* How a table in parts (tables/partition.h) runs an operation. */
typedef enum floe_parts_rule {
    FLOE_PARTS_SPLIT, /* each key to its part, the answers joined in the batch's order */
    FLOE_PARTS_EVERY, /* every part, the results combined */
    FLOE_PARTS_WALK,  /* the parts one after another (a scan's cursor names the part) */
    FLOE_PARTS_NONE,  /* only for kinds that are never in parts */
} floe_parts_rule;

/* What a row's flags say. */
#define FLOE_OPF_MERGES      0x01u  /* requests merge into one batch (the batcher's), up to max-batch-keys */
#define FLOE_OPF_WRITES      0x02u  /* changes the table: counts toward snapshots' changes */
#define FLOE_OPF_VECTORS     0x04u  /* on a TREE, its keys are vectors of `words` words */
#define FLOE_OPF_VALUES_IN   0x08u  /* takes a value per key on a table with values */
#define FLOE_OPF_VALUES_OUT  0x10u  /* answers values with FLOE_BATCH_WANT_VALUES on a table with values */
#define FLOE_OPF_IDS_OUT     0x20u  /* answers slot ids with FLOE_BATCH_WANT_IDS (not on an ORDERED table) */
#define FLOE_OPF_KEYS_OUT    0x40u  /* answers a key per key (keys_out) */
#define FLOE_OPF_VECTORS_OUT 0x80u  /* answers a vector per id (vectors_out) */
#define FLOE_OPF_STORES      0x100u /* puts absent keys into the table (a shard refuses keys of another's) */
#define FLOE_OPF_UPDATES     0x400u /* changes PRESENT keys' values: they count as changes too */
#define FLOE_OPF_DELTAS      0x800u /* its values are deltas, added to a PRESENT key's (floe_value_mode) */
/* Set from the shape, not written in a row: n keys, vectors or ids, an answer each. */
#define FLOE_OPF_KEYED 0x200u

/* What a write of values does to a key that is there already (an absent
 * key stores the value): keep it (insert), replace it (insert with
 * overwrite), or add to it (a DELTAS row: value += delta, wrapping at
 * value_bytes).  The engines' one word for it: a batch's is
 * floe_value_mode_of (spec.h). */
typedef enum floe_value_mode { FLOE_VALUES_KEEP = 0, FLOE_VALUES_OVERWRITE = 1, FLOE_VALUES_ADD = 2 } floe_value_mode;

/* The kinds a row is for: bits 1 << FLOE_KIND_* (tables/spec.h's numbers). */
#define FLOE_KINDS_SET     (1u << 1)
#define FLOE_KINDS_MAP     (1u << 2)
#define FLOE_KINDS_TREE    (1u << 3)
#define FLOE_KINDS_ORDERED (1u << 4)
#define FLOE_KINDS_STATIC  (1u << 5) /* writes until its freeze: the engine refuses them after (ERR_FROZEN) */
#define FLOE_KINDS_HASHED  (FLOE_KINDS_SET | FLOE_KINDS_MAP)
#define FLOE_KINDS_ALL     (FLOE_KINDS_HASHED | FLOE_KINDS_TREE | FLOE_KINDS_ORDERED | FLOE_KINDS_STATIC)

/* The rows: X(NAME, "name", shape, flags, parts rule, kinds, what it does).
 * An operation's number is its place (from 1); a row is added at the end. */
#define FLOE_OPS(X)                                                                                                    \
    X(INSERT, "insert", KEYS,                                                                                          \
      FLOE_OPF_MERGES | FLOE_OPF_WRITES | FLOE_OPF_STORES | FLOE_OPF_VECTORS | FLOE_OPF_VALUES_IN |                    \
          FLOE_OPF_VALUES_OUT | FLOE_OPF_IDS_OUT,                                                                      \
      SPLIT, FLOE_KINDS_ALL, "find-or-put: INSERTED / PRESENT / FULL")                                                 \
    X(FIND, "find", KEYS, FLOE_OPF_MERGES | FLOE_OPF_VECTORS | FLOE_OPF_VALUES_OUT | FLOE_OPF_IDS_OUT, SPLIT,          \
      FLOE_KINDS_ALL, "PRESENT / ABSENT")                                                                              \
    X(ERASE, "erase", KEYS, FLOE_OPF_MERGES | FLOE_OPF_WRITES, SPLIT, FLOE_KINDS_HASHED | FLOE_KINDS_ORDERED,          \
      "ERASED / ABSENT")                                                                                               \
    X(SCAN, "scan", SCAN, FLOE_OPF_VALUES_OUT, WALK, FLOE_KINDS_ALL, "up to limit keys from cursor")                   \
    X(STATS, "stats", TABLE, 0, EVERY, FLOE_KINDS_ALL, "the table's figures")                                          \
    X(REBUILD, "rebuild", TABLE, 0, EVERY, FLOE_KINDS_HASHED,                                                          \
      "rebuild at 2^addr_bits primary buckets (0: same size), drop tombstones")                                        \
    X(SAVE, "save", TABLE, 0, EVERY, FLOE_KINDS_ALL, "write the table to path")                                        \
    X(GET, "get_by_id", IDS, FLOE_OPF_MERGES | FLOE_OPF_VECTORS_OUT, SPLIT, FLOE_KINDS_TREE,                           \
      "the vectors of ids: PRESENT / ABSENT")                                                                          \
    X(COPY, "copy", TABLE, 0, EVERY, FLOE_KINDS_ALL,                                                                   \
      "the table's file contents into a host image (a snapshot's pause)")                                              \
    X(RANGE, "range", RANGE, FLOE_OPF_VALUES_OUT, NONE, FLOE_KINDS_ORDERED,                                            \
      "up to limit keys in [lo, hi], ascending (or descending)")                                                       \
    X(SUCC, "successor", KEYS, FLOE_OPF_MERGES | FLOE_OPF_VALUES_OUT | FLOE_OPF_KEYS_OUT, NONE, FLOE_KINDS_ORDERED,    \
      "the smallest stored key >= each key: PRESENT / ABSENT (none)")                                                  \
    X(PRED, "predecessor", KEYS, FLOE_OPF_MERGES | FLOE_OPF_VALUES_OUT | FLOE_OPF_KEYS_OUT, NONE, FLOE_KINDS_ORDERED,  \
      "the largest stored key <= each key: PRESENT / ABSENT (none)")                                                   \
    X(ADD, "add", KEYS,                                                                                                \
      FLOE_OPF_MERGES | FLOE_OPF_WRITES | FLOE_OPF_UPDATES | FLOE_OPF_DELTAS | FLOE_OPF_STORES | FLOE_OPF_VALUES_IN |  \
          FLOE_OPF_VALUES_OUT,                                                                                         \
      SPLIT, FLOE_KINDS_MAP,                                                                                           \
      "value += delta, wrapping at value_bytes (an absent key stored with delta): INSERTED / PRESENT / FULL, "         \
      "the value after")                                                                                               \
    X(FREEZE, "freeze", TABLE, FLOE_OPF_WRITES, EVERY, FLOE_KINDS_STATIC,                                              \
      "build the static table from the keys stored; finds only from then on (again: nothing changes)")

/* What a batch (tables/backend.h) or a request does. */
typedef enum floe_op {
    FLOE_OP_NONE_ = 0,
#define FLOE_OP_ENUM_(op, name, shape, flags, parts, kinds, doc) FLOE_OP_##op,
    FLOE_OPS(FLOE_OP_ENUM_)
#undef FLOE_OP_ENUM_
        FLOE_OP_COUNT
} floe_op;

typedef struct floe_opdef {
    const char *name; /* as messages and metrics spell it */
    floe_shape shape;
    unsigned flags; /* FLOE_OPF_* */
    floe_parts_rule parts;
    unsigned kinds; /* FLOE_KINDS_* */
    const char *doc;
} floe_opdef;

/* The row of op; an unknown number gets a row of no kinds, named "unknown". */
static inline const floe_opdef *floe_op_def(int op)
{
    static const floe_opdef rows[FLOE_OP_COUNT] = {{"unknown", FLOE_SHAPE_TABLE, 0, FLOE_PARTS_NONE, 0, ""},
#define FLOE_OP_ROW_(op, name, shape, flags, parts, kinds, doc)                                                        \
    {name,                                                                                                             \
     FLOE_SHAPE_##shape,                                                                                               \
     (flags) | (FLOE_SHAPE_##shape == FLOE_SHAPE_KEYS || FLOE_SHAPE_##shape == FLOE_SHAPE_IDS ? FLOE_OPF_KEYED : 0u),  \
     FLOE_PARTS_##parts,                                                                                               \
     kinds,                                                                                                            \
     doc},
                                                   FLOE_OPS(FLOE_OP_ROW_)
#undef FLOE_OP_ROW_
    };
    return &rows[op > 0 && op < FLOE_OP_COUNT ? op : 0];
}

static inline const char *floe_op_name(int op)
{
    return floe_op_def(op)->name;
}

/* The operation of that name (a row's, as the protocol's Request names its
 * field: "insert", "get_by_id"), 0 if none. */
static inline int floe_op_named(const char *name)
{
    for (int op = 1; name && op < FLOE_OP_COUNT; op++)
        if (strcmp(floe_op_def(op)->name, name) == 0)
            return op;
    return 0;
}

static inline bool floe_op_has(int op, unsigned flag)
{
    return (floe_op_def(op)->flags & flag) != 0;
}

/* Whether a batch of op carries n keys, vectors or ids with an answer each
 * (results[n]), as against a scan, a range or the table as a whole. */
static inline bool floe_op_keyed(int op)
{
    return floe_op_has(op, FLOE_OPF_KEYED);
}

/* Whether op on a table of `kind` (FLOE_KIND_*) is one the row allows. */
static inline bool floe_op_for_kind(int op, int kind)
{
    return kind > 0 && kind < 32 && (floe_op_def(op)->kinds & (1u << kind)) != 0;
}

/* Whether op's keys are vectors on a table of `words` words (a TREE; 0: not
 * a TREE). */
static inline bool floe_op_takes_vectors(int op, unsigned words)
{
    return words != 0 && floe_op_has(op, FLOE_OPF_VECTORS);
}

#ifdef __cplusplus
}
#endif

#endif
