/*
 * conn.h - one client connection, owned by one io thread.
 *
 * States: open (reading frames) -> paused (max-inflight requests queued:
 * the socket is not read, TCP pushes back on the client) -> open ...;
 * closing (an error response is being flushed, then the socket closes) ->
 * closed (socket gone; the struct lives on while requests in flight hold
 * references, and their responses are dropped).
 */
#ifndef FLOE_DAEMON_CONN_H
#define FLOE_DAEMON_CONN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "reply.h"
#include "server.h"

struct conn {
    atomic_int refs;
    io_thread *io;
    server *srv;
    struct bufferevent *bev;
    bool open, authed, closing;
    bool tls;           /* accepted on the TLS port */
    bool paused;        /* max-inflight requests out: not reading */
    bool out_paused;    /* output-soft-limit bytes of responses unread: not reading */
    bool said_hello;    /* sent its first request (with a token: its hello) */
    atomic_bool gone;   /* closed: its requests still queued are dropped, not run (batcher.c) */
    uint64_t t_accept;  /* floe_now_ns when accepted (hello-timeout) */
    uint64_t t_closing; /* when it began closing (a last answer being written) */
    unsigned inflight;  /* requests handed to batchers, not yet answered */
    uint64_t serial;
    uint64_t t_frame;   /* when the frame being handled began to be parsed (the parse stage) */
    int req_op;         /* the frame being handled: its operation as metrics.h counts it */
    uint64_t last_read; /* floe_now_ns of the last bytes read: the stop waits for a quiet connection */
    char peer[64];
    conn *prev, *next;
};

/* Takes over an accepted socket on io's thread (tls: from the TLS port). */
void conn_accept(io_thread *io, int fd, bool tls);
/* io's thread: serves bev (connected, on io's base; freed with the
 * connection) as a connection counted in srv->nconns by the caller.  The
 * connection holds the reference returned; NULL if out of memory. */
struct bufferevent;
conn *conn_attach(io_thread *io, struct bufferevent *bev, const char *peer);
/* io thread: the tick's callback (hello-timeout, timeout). */
void io_tick(evutil_socket_t fd, short what, void *arg);
/* Any thread: queues response f for c (answering one in-flight request and
 * releasing that request's reference on c). */
void conn_deliver(conn *c, frame *f);
void conn_ref(conn *c);
void conn_unref(conn *c);
/* io thread: the wake event's callback (new sockets, deliveries, stop). */
void io_wake(evutil_socket_t fd, short what, void *arg);

#endif
