/*
 * group.h - a batch of a table in parts that the parts' devices split among
 * themselves (tables/partition.h): where their backends meet.
 *
 * A table in parts splits a batch on the host by default: every key is
 * read, copied to its part's buffer, and its answer joined back, which
 * bounds it by the host's memory (docs/PERFORMANCE.md, "Several GPUs").
 * Where the parts' backend can do it (floe_backend_ops.group_fits: GPUs
 * that reach each other's memory, the batch in memory they copy straight
 * from), part p gets chunk p of the batch instead, [start[p], start[p+1])
 * of its keys and answers, and the devices do the rest: each sorts its
 * chunk's keys by part, each part takes its keys from every chunk in chunk
 * order (so that a part still sees its keys in the batch's order), runs
 * them, and gives each chunk its answers back.  Every key crosses the
 * host's memory once each way.
 *
 * The parts' workers meet twice a batch (floe_group_meet): when every chunk
 * is sorted, and when every part has answered.  Each meets every time,
 * whatever happened, so that none waits forever; the first failure is the
 * group's, and every part's sub-batch completes with it.  At the first
 * meeting they may also agree to run the batches queued behind this one
 * with it (floe_group_meet_least): each offers how many it could take, and
 * all take the least, so that the meetings of those batches are never
 * held.
 */
#ifndef FLOE_TABLES_GROUP_H
#define FLOE_TABLES_GROUP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "spec.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct floe_group {
    unsigned parts;
    size_t start[FLOE_PARTS_MAX + 1]; /* chunk p: the batch's keys [start[p], start[p + 1]) */
    struct floe_table *part[FLOE_PARTS_MAX];
    void *slot[FLOE_PARTS_MAX]; /* each part's backend's buffers for the batch, for the others to read */
    bool too_wide;              /* a key wider than the table's: nothing ran (the door's message is the caller's) */
    /* the meeting: under lock */
    pthread_mutex_t lock;
    pthread_cond_t cv;
    unsigned arrived;
    unsigned long round;
    unsigned least; /* the least of the offers (floe_group_meet_least) */
    floe_status st; /* the first failure */
    floe_errinfo err;
} floe_group;

/* Chunks of n keys, as even as they go, over parts (2..FLOE_PARTS_MAX). */
void floe_group_init(floe_group *g, struct floe_table *const *parts, unsigned nparts, size_t n);
void floe_group_destroy(floe_group *g);

/* Waits until every part has come here, reporting st (and err) of its own
 * (FLOE_OK: none); returns the group's status so far, its first failure in
 * *err. */
floe_status floe_group_meet(floe_group *g, floe_status st, const floe_errinfo *err_in, floe_errinfo *err);

/* floe_group_meet that also agrees on a number: each part offers *k, and
 * each leaves with the least of the offers in *k. */
floe_status floe_group_meet_least(floe_group *g, unsigned *k, floe_status st, const floe_errinfo *err_in,
                                  floe_errinfo *err);

#ifdef __cplusplus
}
#endif

#endif /* FLOE_TABLES_GROUP_H */
