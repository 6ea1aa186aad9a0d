/*
 * reply.h - building response frames: a 4-byte big-endian length and a
 * packed floe.v1.Response, ready to write to a socket.
 */
#ifndef FLOE_DAEMON_REPLY_H
#define FLOE_DAEMON_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include "floe.pb-c.h"
#include "spec.h"
#include "status.h"

struct conn;

typedef struct frame {
    struct frame *next;
    struct conn *to; /* for deliveries */
    /* Set on an answer still to be packed by the io thread (batcher_pack):
     * the request and its batch's shared answers; len is 0 until packed. */
    struct item *item;
    struct batch_out *out;
    size_t at; /* the request's first key in the batch */
    /* For metrics.h: the request's operation (METRICS_OP_*), when it began
     * to be parsed (0: unknown), and the response's status. */
    int req_op;
    floe_status status;
    uint64_t t_parse;
    size_t len;
    unsigned char data[];
} frame;

/* Packs r into a frame (r->id and r->status as set by the caller). */
frame *reply_pack(const Floe__V1__Response *r);
frame *reply_error(uint64_t id, floe_status st, const char *msg);
frame *reply_ok(uint64_t id);
/* What a TableStats message points into: it must outlive the packing. */
typedef struct reply_stats_room {
    Floe__V1__TableSpec spec;
    Floe__V1__LevelStats lv[FLOE_LEVELS], *lvp[FLOE_LEVELS];
    Floe__V1__StageTime st[FLOE_STAGES], *stp[FLOE_STAGES];
    Floe__V1__PartStats pt[FLOE_PARTS_MAX], *ptp[FLOE_PARTS_MAX];
} reply_stats_room;

/* Fills a TableStats message from s (whose strings it points to) in room;
 * with one_table, the stage times and parts too (stats of one table). */
void reply_fill_stats(Floe__V1__TableStats *out, reply_stats_room *room, int one_table, const floe_table_stats *s);

#endif
