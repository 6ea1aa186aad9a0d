/*
 * explore.h - the open set of an exploring table: the states a run has
 * found, in the order it found them, with each one's parent, label and
 * depth, handed out to workers in claims (docs/ARCHITECTURE.md).
 *
 * A model checker's workers insert the successors of the states they
 * expand; every state the table answers INSERTED joins its open set
 * (floe_explore_add) under an explore id: its place in the order found,
 * which no growth of the table changes.  A claim hands out up to N open
 * states, breadth-first, under a token and a lease; `complete` ends a
 * claim; a claim whose lease runs out returns its states to the open set
 * (expanding a state twice is harmless: inserts deduplicate).  Strict
 * breadth-first (the default) hands out no state of depth d + 1 while a
 * claim of depth d is out, so that every state's parent is one of the
 * shallowest and a trace (floe_explore_trace) is a shortest path from an
 * initial state.  When no state is open and no claim is out, claims answer
 * DONE.
 *
 * A table over several floed has an open set on each (a shard): its ids
 * name the shard in their top bits (FLOE_ID_SHARD_SHIFT), so that a parent
 * id means one state on every server; a parent on another shard is taken
 * on trust, at the depth its insert gives; and the workers, who see every
 * shard, end each level themselves (floe_explore_claim_upto; the protocol
 * is docs/PROTOCOL.md's).
 *
 * One structure per table, its bookkeeping in host memory and its states,
 * parents and labels where the table lives (floe_explore_move: a GPU
 * table's device), safe to call from several threads:
 * a lock inside guards it; floe_explore_add holds it only to take ids and
 * to publish, and copies a batch's states in without it (several adds at
 * once, from the table's several lanes); a claim from the order found
 * takes its range under it and copies the states out after (they are
 * published: they never change); floe_explore_check_parents takes no lock
 * at all.  key_bytes of a state
 * as the table stores it (8 for SET and MAP keys, words x 4 for TREE
 * vectors).
 */
#ifndef FLOE_TABLES_EXPLORE_H
#define FLOE_TABLES_EXPLORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FLOE_EXPLORE_ROOT      UINT64_MAX /* the parent of an initial state */
#define FLOE_EXPLORE_LABEL_MAX 4u         /* bytes of an action label */
#define FLOE_EXPLORE_KEY_MAX   1024u      /* bytes of a state (a TREE's 256 words) */

typedef struct floe_explore floe_explore;

/* What a claim found (floe_explore_claim). */
typedef enum floe_explore_state {
    FLOE_EXPLORE_GOT = 0,        /* states handed out */
    FLOE_EXPLORE_WAIT = 1,       /* states are open but deeper than a claim still out: ask again */
    FLOE_EXPLORE_DONE = 2,       /* no state is open and no claim is out: the run has ended */
    FLOE_EXPLORE_LEVEL_DONE = 3, /* claim_upto: no state of depth <= upto open, claimed or being added here */
} floe_explore_state;

typedef struct floe_explore_counts {
    uint64_t states;  /* found, each once */
    uint64_t open;    /* not yet handed out, or handed back by an expired claim */
    uint64_t claimed; /* in claims that are out */
    uint64_t claims;  /* claims out */
    uint32_t levels;  /* depths found: the deepest + 1 */
    bool done;        /* no state open, no claim out, and at least one state found */
    uint64_t bytes;   /* memory held: the chunks' where they are (device), the rest the host's */
    int device;       /* where its states, parents and labels are: a GPU, or -1 for host memory */
    bool broken;      /* states were lost (their copy into the GPU failed): nothing is handed out or saved */
} floe_explore_counts;

/* strict: breadth-first with a barrier between depths (the default of a
 * table); run: a number that tells this run's claim tokens from another's
 * (0: one is drawn); shard: which shard of a table over several floed this
 * open set is (0..FLOE_SHARDS_MAX - 1), -1 for a table on one floed. */
floe_status floe_explore_create(uint32_t key_bytes, uint32_t label_bytes, bool strict, uint64_t run, int shard,
                                floe_explore **out, floe_errinfo *err);
void floe_explore_destroy(floe_explore *x);

/* Whether each parent is a state found (or FLOE_EXPLORE_ROOT, or a state
 * of another shard); if not, ERR_INVALID naming the first that is not.
 * Checked before the batch that carries them runs, so that a bad one
 * changes nothing. */
floe_status floe_explore_check_parents(const floe_explore *x, const uint64_t *parents, size_t n, floe_errinfo *err);

/* Appends the states a batch stored new: of its n states (keys, key_bytes
 * each), those whose answer in results is FLOE_INSERTED (results NULL:
 * all), with their parents (checked) and labels (label_bytes each; NULL:
 * zero), one deeper than their parents (those on another shard are of
 * depth parent_depth); ids (may be NULL) gets each one's explore id at its place; then
 * ends the claim `complete` (0: none; one that is not out: nothing to
 * end).  Several threads may add at once: each takes its ids in a short
 * hold of the lock and copies its states in without it; states are
 * published (claimable, counted, saved) and claims ended in the order of
 * their ids, so that a claim never ends before the states its expansion
 * found are there.  ERR_INVALID for a parent that is no state found,
 * ERR_FULL if memory runs out: nothing appended, no claim ended;
 * ERR_INTERNAL if copying into its store (a GPU's) failed: those states
 * are lost, and the open set is broken from then on (claims, traces,
 * adds and snapshots refused: the run resumes from its last snapshot). */
floe_status floe_explore_add(floe_explore *x, const void *keys, const uint64_t *parents, uint32_t parent_depth,
                             const void *labels, const uint8_t *results, size_t n, uint64_t *ids, uint64_t complete,
                             floe_errinfo *err);

/* Parents as Insert.from_first and from_counts give them: counts[r]
 * states in a row have parent first + r (r < n). */
typedef struct floe_parent_runs {
    uint64_t first;
    const uint8_t *counts;
    size_t n;
} floe_parent_runs;

/* floe_explore_add with the parents as runs (their counts add up to n; the
 * parents checked), so that they are never spelled out 8 bytes a state. */
floe_status floe_explore_add_runs(floe_explore *x, const void *keys, const floe_parent_runs *runs,
                                  uint32_t parent_depth, const void *labels, const uint8_t *results, size_t n,
                                  uint64_t *ids, uint64_t complete, floe_errinfo *err);

/* Hands out up to max open states, shallowest and earliest first (the
 * states of expired claims before the rest), all of one depth: ids, keys
 * (key_bytes each) and *depth, under *token with a lease to now_ms +
 * lease_ms.  *state says which of GOT, WAIT or DONE; with WAIT and DONE
 * *n is 0 and *token 0.  Claims whose lease has run out return to the open
 * set first. */
floe_status floe_explore_claim(floe_explore *x, size_t max, uint64_t now_ms, uint64_t lease_ms, uint64_t *ids,
                               void *keys, size_t *n, uint32_t *depth, uint64_t *token, floe_explore_state *state,
                               floe_errinfo *err);
/* A claim whose workers end the levels themselves (a table over several
 * floed, whose next level may grow from any shard's claims): up to max
 * open states of depth <= upto, shallowest first, with no barrier here;
 * when it hands out none, *state is WAIT while a state of depth <= upto is
 * in a claim out or in an add not yet published, else LEVEL_DONE; and
 * always *found counts the states of depth <= upto found here, *next those
 * of depth upto + 1. */
floe_status floe_explore_claim_upto(floe_explore *x, size_t max, uint32_t upto, uint64_t now_ms, uint64_t lease_ms,
                                    uint64_t *ids, void *keys, size_t *n, uint32_t *depth, uint64_t *token,
                                    floe_explore_state *state, uint64_t *found, uint64_t *next, floe_errinfo *err);
/* Whether a claim of this run with that token is out. */
bool floe_explore_holds(const floe_explore *x, uint64_t token);
/* Ends the claim token (its states expanded); ERR_INVALID if no claim of
 * this run has that token (ended, expired, or another table's). */
floe_status floe_explore_complete(floe_explore *x, uint64_t token, floe_errinfo *err);
/* The claim's lease to now_ms + lease_ms; ERR_INVALID as complete. */
floe_status floe_explore_renew(floe_explore *x, uint64_t token, uint64_t now_ms, uint64_t lease_ms, floe_errinfo *err);
/* Returns the states of claims whose lease ended by now_ms to the open
 * set; how many claims. */
size_t floe_explore_expire(floe_explore *x, uint64_t now_ms);

/* The depth of a state found (ERR_INVALID if id names none here). */
floe_status floe_explore_depth(const floe_explore *x, uint64_t id, uint32_t *depth, floe_errinfo *err);
/* The chain from an initial state to id, initial state first: *n states,
 * their ids, keys and labels (the label of the step into each; an initial
 * state's is zero), at most cap of them (ERR_TOO_LARGE if the chain is
 * longer: *n says how long); keys and labels may be NULL.  On a shard the
 * chain stops at a parent on another shard: *from (may be NULL) is the
 * parent of the first state, FLOE_EXPLORE_ROOT where that is initial. */
floe_status floe_explore_trace(const floe_explore *x, uint64_t id, size_t cap, uint64_t *ids, void *keys, void *labels,
                               size_t *n, uint64_t *from, floe_errinfo *err);

void floe_explore_stats(const floe_explore *x, floe_explore_counts *st);
/* The keys (key_bytes each) of states [from, from + n), in the order found
 * (from counts from 0 on every shard: a place, not an id). */
floe_status floe_explore_keys(const floe_explore *x, uint64_t from, size_t n, void *keys, floe_errinfo *err);
/* States found at depth d. */
uint64_t floe_explore_level(const floe_explore *x, uint32_t d);

/* The open set as bytes (a table file's section), through write(ctx, p,
 * len) (nonzero: failed, and so does this, with ERR_INTERNAL).  Claims out are
 * written as open: a loaded table hands their states out again. */
floe_status floe_explore_save(const floe_explore *x, int (*write)(void *ctx, const void *p, size_t len), void *ctx,
                              floe_errinfo *err);
/* The same bytes in two steps (none of an open set that is broken: floe_explore_counts), so that a snapshot takes its
 * moment under the table's lock and writes on another thread while the run goes on: a cut copies what changes (the
 * order's cursor, depths, states handed back, claims out) and notes where the states are; the states it names never
 * change again, so writing it needs no lock, only x alive (never destroyed
 * while a cut of it is written).  NULL if out of memory. */
typedef struct floe_explore_cut floe_explore_cut;
floe_explore_cut *floe_explore_cut_take(const floe_explore *x);
uint64_t floe_explore_cut_bytes(const floe_explore_cut *c); /* what write writes */
int floe_explore_cut_write(const floe_explore_cut *c, int (*write)(void *ctx, const void *p, size_t len), void *ctx);
void floe_explore_cut_free(floe_explore_cut *c);
/* The open set's states, parents and labels (all but its bookkeeping) moved
 * into store (store.h: the memory of the table it belongs to, a device's),
 * where they stay and grow from then on; x takes the store and closes it
 * with itself, or at once if this fails.  Before any add (a table not yet
 * served, new or loaded: BUSY while an add is in progress); FULL if the
 * store has no room, nothing moved.  A store of host memory: nothing to
 * do. */
floe_status floe_explore_move(floe_explore *x, const floe_store *store, floe_errinfo *err);

/* An open set from what floe_explore_save wrote, through read(ctx, p,
 * len) (nonzero: short or failed); ERR_INVALID if it does not hold
 * together.  run, shard: as floe_explore_create (a new run's tokens). */
floe_status floe_explore_load(int (*read)(void *ctx, void *p, size_t len), void *ctx, uint64_t run, int shard,
                              floe_explore **out, floe_errinfo *err);

#ifdef __cplusplus
}
#endif

#endif
