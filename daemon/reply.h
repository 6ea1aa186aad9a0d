/*
 * reply.h - building response frames: a 4-byte big-endian length and a
 * packed floe.v1.Response, ready to write to a socket; and the session, the
 * one interface through which answers reach a client.
 */
#ifndef FLOE_DAEMON_REPLY_H
#define FLOE_DAEMON_REPLY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "floe.pb-c.h"
#include "queue.h"
#include "spec.h"
#include "status.h"

struct session;

typedef struct frame {
    queue_link link;       /* in its io thread's inbox */
    struct session *to;    /* for deliveries */
    /* Set on an answer still to be packed by the io thread (request_pack):
     * what it is is request.c's business; len is 0 until packed. */
    void *pending;
    /* For metrics.h: the request's operation (METRICS_OP_*), when it began
     * to be parsed (0: unknown), the response's status and the keys it
     * answers (key operations). */
    int req_op;
    floe_status status;
    uint64_t t_parse;
    uint64_t keys;
    uint64_t id; /* the request's (reply_pack) */
    size_t len;
    unsigned char data[];
} frame;

/* What the request code knows of a client: where its answers go (conn.c is
 * the one implementation; tests/fuzz drives it).  A request in flight holds
 * its session (hold) until its answer is delivered. */
typedef struct session session;
typedef struct session_ops {
    /* io thread, while it handles one of s's requests: write f now (NULL:
     * it could not be built, which closes s). */
    void (*send)(session *s, frame *f);
    /* io thread: write f, then close s (a request that ends the connection). */
    void (*send_and_close)(session *s, frame *f, const char *why);
    /* io thread: a request of s goes in flight. */
    void (*hold)(session *s);
    /* any thread: the answer to a request in flight (NULL: none, the
     * request was dropped), releasing its hold. */
    void (*deliver)(session *s, frame *f);
} session_ops;

struct session {
    const session_ops *ops;
    atomic_bool gone;   /* closed: its requests still queued are dropped, not run */
    /* its answers unread while all clients' are past output-total-limit:
     * its requests still queued are answered ERR_BUSY, not run */
    atomic_bool unread;
    bool authed;        /* said hello with the server's token */
    unsigned lane;      /* the batcher lane its requests take (batcher.h): its io thread's */
    uint64_t serial;    /* for the log */
    uint64_t t_frame;   /* when the request being handled began to be parsed (the parse stage) */
};

/* Packs r into a frame (r->id and r->status as set by the caller). */
frame *reply_pack(const Floe__V1__Response *r);
frame *reply_error(uint64_t id, floe_status st, const char *msg);
/* The same, its message formatted as printf's. */
frame *reply_errorf(uint64_t id, floe_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
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
