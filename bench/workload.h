/*
 * workload.h - the keys and vectors floe-bench sends, made so that the run
 * knows every answer it should get.
 *
 * Each connection owns a stream.  A stream's fresh keys are distinct by
 * construction and disjoint from every other stream's, so the distinct keys
 * of a run are exactly the fresh keys sent (plus the hot keys, below), and
 * each key's answer is known in advance:
 *
 *   SET, MAP   key space [0, 2^key_bits) seen as ordinals.  Ordinals
 *              [0, hot_keys) are the hot set (distribution hotset only);
 *              stream g's i-th fresh key is ordinal hot_keys + i * streams + g.
 *              When the mix has finds or erases, the upper half of the space
 *              is kept for misses: keys that no stream ever inserts.  The key
 *              of an ordinal is the ordinal itself (sequential) or a
 *              bijection of key_bits bits seeded by --seed (uniform, hotset),
 *              so keys look random yet never collide.
 *   TREE       vectors of `words` words from a random walk: word 0 is the
 *              stream's index, word 1 a step counter (so every step is a new
 *              vector), and each step also sets, with probability 1/2, one of
 *              words 2.. to a value below 4: one or two words change per step
 *              and most subtrees are shared, as in T1 (docs/PERFORMANCE.md).  Hot
 *              vectors start with 0xFFFFFFFF, misses with 0xFFFFFFFE.
 *
 * A duplicate (probability dup_ratio per key) repeats a fresh key that the
 * same stream has already put in an insert (TREE: one of its last ring_cap
 * fresh vectors); the server applies one connection's requests in order, so
 * its answer is PRESENT even while the first occurrence is still in flight.
 * In a find, a duplicate is a hit and a fresh key a miss.  A hot request
 * (probability hot_fraction per request, distribution hotset) draws every
 * key from the hot set, shared by all streams: some stream's insert of a hot
 * key is INSERTED, the others PRESENT, so the run counts the distinct hot
 * keys inserted (the union of the streams' hot_seen bitmaps).
 *
 * Nothing here allocates after wl_stream_init.
 */
#ifndef FLOE_BENCH_WORKLOAD_H
#define FLOE_BENCH_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops.h"

/* The operations of a mix, in --ratio's order (I:F:E:S:R:A): X(WL_ name,
 * its name in floe-bench's output, its row of tables/ops.h (the kinds it is
 * for, whether it takes values), the operation whose keys, values and
 * answers it draws).  WL_SUCC and WL_RANGE (ORDERED tables) draw their keys
 * as a find does: a successor of a key this stream inserted is that key
 * (PRESENT), of any other key anything; a range starts at its one key.
 * WL_ADD (MAP tables) draws keys and deltas as an insert does, and answers
 * as one (INSERTED for a key not yet there, PRESENT for a repeat). */
#define WL_OPS_LIST(X)                                                                                                 \
    X(INSERT, "insert", FLOE_OP_INSERT, INSERT)                                                                        \
    X(FIND, "find", FLOE_OP_FIND, FIND)                                                                                \
    X(ERASE, "erase", FLOE_OP_ERASE, ERASE)                                                                            \
    X(SUCC, "succ", FLOE_OP_SUCC, SUCC)                                                                                \
    X(RANGE, "range", FLOE_OP_RANGE, RANGE)                                                                            \
    X(ADD, "add", FLOE_OP_ADD, INSERT)

enum {
#define WL_ENUM_(op, name, row, draws) WL_##op,
    WL_OPS_LIST(WL_ENUM_)
#undef WL_ENUM_
        WL_OPS
};

typedef struct wl_opdef {
    const char *name;
    int row;   /* FLOE_OP_* */
    int draws; /* WL_* */
} wl_opdef;

static inline const wl_opdef *wl_op_def(int op)
{
    static const wl_opdef rows[WL_OPS] = {
#define WL_ROW_(op, name, row, draws) {name, row, WL_##draws},
        WL_OPS_LIST(WL_ROW_)
#undef WL_ROW_
    };
    return &rows[op >= 0 && op < WL_OPS ? op : 0];
}
enum { WL_UNIFORM, WL_SEQUENTIAL, WL_HOTSET };

/* The answer a key must get, where the run can know it. */
enum {
    WL_EXPECT_INSERTED, /* a fresh key in an insert */
    WL_EXPECT_PRESENT,  /* a key this stream inserted before */
    WL_EXPECT_ABSENT,   /* a key that no stream inserts */
    WL_EXPECT_STORED,   /* a hot key in an insert: INSERTED or PRESENT */
    WL_EXPECT_ANY,      /* nothing known (a hot key in a find, erases) */
};

typedef struct wl_spec {
    int kind;             /* FLOE_TABLE_SET, FLOE_TABLE_MAP, FLOE_TABLE_TREE or FLOE_TABLE_ORDERED */
    unsigned key_bits;    /* SET, MAP, ORDERED: 1..64 */
    unsigned words;       /* TREE: 2..256 */
    unsigned value_bytes; /* MAP: 4 or 8; ORDERED: 0, 4 or 8 (inserts carry values when not 0) */
    int distribution;     /* WL_UNIFORM, WL_SEQUENTIAL or WL_HOTSET */
    double dup_ratio;     /* 0..1 */
    double hot_fraction;  /* 0..1, WL_HOTSET */
    uint64_t hot_keys;    /* WL_HOTSET: size of the hot set */
    bool misses;          /* finds, erases, successors or ranges in the mix: keep keys that are never inserted */
    uint64_t seed;
    uint64_t streams; /* connections of the run */
} wl_spec;

typedef struct wl_stream {
    const wl_spec *spec;
    uint64_t index; /* 0..streams-1 */
    uint64_t rng;
    uint64_t fresh;       /* fresh keys (vectors) put into inserts so far */
    uint64_t fresh_limit; /* how many this stream can make; past it, inserts repeat */
    uint64_t miss_next;   /* sequential misses */
    uint8_t *hot_seen;    /* a bit per hot key this stream has inserted */
    uint32_t *walk;       /* TREE: the walk's vector */
    uint32_t *ring;       /* TREE: the last ring_cap fresh vectors */
    uint64_t ring_cap;
    /* derived from spec */
    uint64_t mask, seed_off, lo_size, miss_size;
    unsigned shift;
} wl_stream;

/* NULL if spec leaves every stream room, else why not (a static string). */
const char *wl_spec_check(const wl_spec *spec);
/* 0, or -1 when out of memory (s is then freed). */
int wl_stream_init(wl_stream *s, const wl_spec *spec, uint64_t index);
void wl_stream_free(wl_stream *s);

/* One request of n keys for op (WL_INSERT .. WL_RANGE): keys, the expected
 * answers, and for an insert into a table with values the values (n *
 * value_bytes bytes; may be NULL otherwise). */
void wl_next_keys(wl_stream *s, int op, size_t n, uint64_t *keys, void *values, uint8_t *expect);
/* The same for a TREE: n vectors of spec->words words. */
void wl_next_vectors(wl_stream *s, int op, size_t n, uint32_t *vectors, uint8_t *expect);

bool wl_answer_ok(uint8_t expect, uint8_t answer);
/* Index of the first of n answers that its expectation rejects, or n. */
size_t wl_first_wrong(const uint8_t *expect, const uint8_t *answers, size_t n);
const char *wl_expect_name(uint8_t expect);

/* Bytes of a hot_seen bitmap. */
size_t wl_hot_bytes(const wl_spec *spec);
/* ORs s's hot keys into acc (wl_hot_bytes bytes). */
void wl_hot_union(uint8_t *acc, const wl_stream *s);
uint64_t wl_hot_count(const uint8_t *acc, const wl_spec *spec);

#endif
