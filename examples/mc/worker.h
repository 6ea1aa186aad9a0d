/*
 * worker.h - one floe-mc worker: a breadth-first search over its own queue,
 * deduplicated through a floed table.  A state answered INSERTED is this
 * worker's to count and expand; PRESENT means some worker (maybe this one)
 * had it first.  Workers share nothing but the table, so a worker is done
 * when its queue is empty and its requests are answered.
 */
#ifndef FLOE_MC_WORKER_H
#define FLOE_MC_WORKER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "floe.h"
#include "model.h"

typedef struct mc_run {
    const mc_model *model;
    const char *server;
    const floe_options *conn; /* token, timeouts, TLS */
    const char *table;
    unsigned index, workers; /* this worker is index of workers */
    size_t batch;            /* keys (vectors) per request */
    unsigned inflight;       /* requests in flight */
    int packed;              /* states as 64-bit keys (SET), else vectors (TREE) */
    int whole;               /* TREE: every state sent whole, not as its parent's id and changed words */
    int start_fd;            /* >= 0: wait for EOF on it before the first request (a common start) */
    /* --server-queue (mc_claims_run): the open set on the server */
    size_t claim;       /* states a claim asks for (0: batch / 3) */
    unsigned lease_ms;  /* a claim's lease (0: the server's, 60 s) */
    uint32_t max_depth; /* states this deep are found but not expanded (0: no limit) */
} mc_run;

/* What a worker has done so far; written by the worker, read by whoever
 * reports progress (it may live in memory shared across processes). */
typedef struct mc_progress {
    _Atomic uint64_t states, transitions;
    _Atomic uint64_t sent, sent_bytes; /* states sent in find-or-put requests, and their bytes (keys, or parents
                                        * and changes) */
    _Atomic uint64_t by_parent;        /* TREE: states answered that went by their parent */
    _Atomic uint64_t again;            /* TREE: states sent again whole, their parents renamed in flight */
    _Atomic uint64_t violations;       /* states expanded that break the model's invariant */
    uint32_t violation[MC_MAX_WORDS];  /* the first of them */
    _Atomic uint64_t deadlocks;        /* states expanded that have no successor */
    uint32_t deadlock[MC_MAX_WORDS];   /* the first of them */
    /* --server-queue: explore ids and depths of those first states (a shallower one replaces it), */
    uint64_t violation_id, deadlock_id;
    uint32_t violation_depth, deadlock_depth;
    _Atomic uint64_t claims, waits, expanded; /* claims served, answered WAIT, and states expanded */
    /* --server-queue: microseconds spent waiting for a claim's answer, for an insert's (all of
     * --inflight out), and pausing while the server said WAIT (the end of a level) */
    _Atomic uint64_t waited_claim_us, waited_insert_us, waited_level_us;
    atomic_int done;                   /* 1 when finished (status set) */
    int status;      /* 0 or a FLOE_ERR_* code */
    char error[256]; /* why, when status is not 0 */
} mc_progress;

/* Runs worker r->index of r->workers to the end; returns 0, or -1 with
 * p->status and p->error set. */
int mc_worker_run(const mc_run *r, mc_progress *p);

/* Runs a worker of a run whose open set is on the server (claims.c):
 * claims, expands and inserts with parents until the server says DONE;
 * p->states counts the states its inserts found.  0, or -1 with p->status
 * and p->error set. */
int mc_claims_run(const mc_run *r, mc_progress *p);

/* Whether the server behind c keeps exploring tables as this floe-mc
 * speaks to them (its hello says FLOE_FEATURE_EXPLORE: an older floed
 * would drop the fields it does not know, and with them the run's
 * parents); if not, why in why. */
bool mc_server_explores(const floe *c, char *why, size_t len);

/* The first states of the search, the same in every worker: a plain
 * breadth-first search from the initial state until its frontier holds at
 * least `target` states (or the space is exhausted).  Sets *states to the
 * visited states (words each, in visiting order) and returns their number,
 * or 0 when out of memory.  Worker i takes those whose position is i mod W. */
size_t mc_prefix(const mc_model *m, size_t target, uint32_t **states);

#endif
