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

#include <event2/util.h>

#include "reply.h"
#include "server.h"

typedef struct conn conn;

struct conn {
    session s; /* first: what request.c sees (reply.h): authed, gone, serial, t_frame */
    atomic_int refs;
    io_thread *io;
    server *srv;
    struct bufferevent *bev;
    bool open, closing;
    bool tls;           /* accepted on the TLS port */
    struct resp *resp;  /* accepted on the RESP port: its translator (resp.h), NULL on the others */
    bool paused;        /* max-inflight requests out: not reading */
    /* not reading for responses unread (OUT_SOFT: output-soft-limit of
     * them; OUT_TOTAL: some, while all clients' are past output-total-limit) */
    enum { OUT_READING, OUT_SOFT, OUT_TOTAL } out_paused;
    bool said_hello;    /* sent its first request (with a token: its hello) */
    uint64_t t_accept;  /* floe_now_ns when accepted (hello-timeout) */
    uint64_t t_closing; /* when it began closing (a last answer being written) */
    unsigned inflight;  /* requests handed to batchers, not yet answered */
    int req_op;         /* the frame being handled: its operation as metrics.h counts it */
    uint64_t last_read; /* floe_now_ns of the last bytes read: the stop waits for a quiet connection */
    uint64_t t_partial; /* when the frame not yet whole began to come in, while reading (0: none; frame-timeout) */
    /* A large frame being read straight from the socket into its buffer (conn.c, read_direct) */
    unsigned char *rx_mem, *rx_frame;
    uint32_t rx_len, rx_have;
    char peer[64];
    conn *prev, *next;
};

/* An io thread's event base, wake event, tick and inbox; floed.c starts a
 * thread on each, tests/fuzz runs the base on its own thread.  0 or -1. */
int io_thread_init(server *srv, io_thread *io);
/* Once nothing runs its base: answers still undelivered are dropped. */
void io_thread_free(io_thread *io);
/* io thread: the wake event's callback (new sockets, deliveries, stop). */
void io_wake(evutil_socket_t fd, short what, void *arg);

/* Takes over an accepted socket on io's thread (tls: over TLS; resp_port:
 * from the RESP port). */
void conn_accept(io_thread *io, int fd, bool tls, bool resp_port);
/* io's thread: serves bev (connected, on io's base; freed with the
 * connection) as a connection counted in srv->nconns by the caller.  The
 * connection holds the reference returned; NULL if out of memory. */
struct bufferevent;
conn *conn_attach(io_thread *io, struct bufferevent *bev, const char *peer);
void conn_ref(conn *c);
void conn_unref(conn *c);

#endif
