/*
 * floe_internal.h - libfloe's insides shared by its files (conn.c: one
 * connection; shards.c: a partitioned one), and its entry points for its
 * own tests and fuzzers.  Not part of its API: libfloe.so exports no floe__
 * name (libfloe.map).
 */
#ifndef FLOE_CLIENT_FLOE_INTERNAL_H
#define FLOE_CLIENT_FLOE_INTERNAL_H

#include <openssl/ssl.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#include "floe.h"
#include "floe.pb-c.h"

#define FLOE_SHARD_NAME_MAX 280 /* "host:port" of one server of a partitioned connection */

typedef struct split split;

/* What a partitioned connection does in place of one connection's own
 * (shards.c sets it; conn.c calls through it, and knows nothing else of
 * shards). */
typedef struct floe_router {
    floe_call *(*send)(floe *c, Floe__V1__Request *req, floe_callback *cb, void *arg);
    int (*poll)(floe *c, int timeout_ms);
    void (*close)(floe *c);
    int (*create)(floe *c, const floe_table_def *def);
    int (*each)(floe *c, int (*op)(floe *sub, const char *table), const char *table); /* drop, snapshot */
    int (*stats)(floe *c, const char *table, floe_table_info *info);
    int (*tables)(floe *c, floe_table_info **tables, size_t *n);
    int (*scan)(floe *c, const char *table, floe_cursor *cursor, size_t limit, unsigned words, uint64_t *keys,
                void *values, unsigned value_bytes, uint64_t *ids, uint32_t *vectors, size_t *n, int *done);
} floe_router;

struct floe_call {
    uint64_t id;
    uint64_t deadline; /* now_ms() by which it must be answered; 0: none */
    bool done;
    int status;
    char *error;
    Floe__V1__Response *resp;
    uint64_t *ids; /* a claim's ids the server sent as a range, spelled out (floe_call_claim) */
    floe_callback *cb;
    void *arg;
    floe_call *next, *prev;
};

struct floe {
    int fd;
    SSL_CTX *tls_ctx; /* TLS: the context and the session on fd (NULL: plain TCP) */
    SSL *tls;
    bool tls_want_write; /* the last TLS call needs fd writable before it can go on */
    int timeout_ms;      /* deadline of calls sent from now on (0: none) */
    int err;
    char errstr[256];
    uint64_t next_id;
    unsigned char *out;
    size_t out_len, out_off, out_cap;
    unsigned char *in;
    size_t in_len, in_cap;
    floe_call *head, *tail; /* in flight */
    size_t inflight;
    uint64_t completions; /* calls completed, ever */
    floe_server_info info;
    /* An error response with no call's id (id 0): the server could not read
     * a frame, or refuses the connection (max-connections).  When the
     * connection ends right after it, it is the reason, not the EOF. */
    int bye_status;
    char bye_msg[256];
    uint64_t ids_generation; /* of the last blocking insert or find's answer */
    /* handle_frames is running (callbacks run inside it): a floe_poll from a
     * callback, or a send's "start writing at once", must not read into c->in */
    bool handling;
    /* A partitioned connection (shards.c): one connection a server, in the
     * list's order; it has no socket of its own (fd -1) and routes every call. */
    const floe_router *router;
    unsigned nshards;
    floe **shards;
    char (*shard_names)[FLOE_SHARD_NAME_MAX];
    int epfd;             /* floe_fd: an epoll set of the shards' sockets */
    unsigned route_words; /* TREE words per vector of the request being routed (0: keys) */
    unsigned char *route_buf; /* the shards' keys and values of a request being split (grown, reused) */
    size_t route_cap;
    /* One server of a partitioned connection: what its every request says of it. */
    Floe__V1__ShardCheck check;
    bool checked;
};

/* floe_connect over fd, a connected stream socket that c takes over (and
 * floe_close closes): the hello exchange with token, nothing resolved or
 * connected.  *out is set even on failure, as by floe_connect. */
int floe__connect_fd(int fd, const char *token, floe **out);

/* conn.c's call machinery, for shards.c. */
int floe__set_error(floe *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
floe_call *floe__new_call(floe *c, floe_callback *cb, void *arg);
void floe__complete(floe *c, floe_call *call, int status, const char *error, Floe__V1__Response *resp);
floe_call *floe__send_request(floe *c, Floe__V1__Request *req, floe_callback *cb, void *arg);
/* Waits for a call, records its error on c, and returns its status. */
int floe__finish(floe *c, floe_call *call);
/* A Stats request on one connection, answered: FLOE_OK with *call's resp->stats set, or the
 * error (a reply without stats: ERR_PROTOCOL); *call to floe_call_free either way. */
int floe__stats_call(floe *c, const char *table, floe_call **call);
/* The connection is gone: every call in flight fails with c's error. */
void floe__fail_all(floe *c);
uint64_t floe__now_ms(void); /* CLOCK_MONOTONIC */

/* transport.c: bytes over c->fd, plain or TLS.  read and write return
 * bytes moved (> 0) or one of these. */
enum { IO_AGAIN = 0, IO_EOF = -1, IO_FAILED = -2, IO_TLS_FAILED = -3 };
ssize_t floe__transport_read(floe *c);
ssize_t floe__transport_write(floe *c);
void floe__transport_close(floe *c);
/* Why the last TLS call failed, into buf. */
const char *floe__tls_reason(floe *c, char *buf, size_t len);
/* OpenSSL writes to its socket with write(2), which raises SIGPIPE once the
 * peer is gone, and a library must not kill its caller or change its
 * signal handlers: as libpq does, the calling thread blocks SIGPIPE around
 * each TLS call that may write and takes back a SIGPIPE the call raised. */
typedef struct {
    sigset_t old;
    bool was_pending;
} sigpipe_guard;
void floe__sigpipe_block(sigpipe_guard *g);
void floe__sigpipe_restore(sigpipe_guard *g);
int floe__create_shard(floe *c, const floe_table_def *def, unsigned shard, unsigned shards, uint64_t set);
void floe__info_from(floe_table_info *o, const Floe__V1__TableStats *s);

/* dial.c: a connection to one server (floe_connect_opts of a URI that names one). */
int floe__connect_one(const char *uri, const floe_options *opts, floe **out);

/* shards.c: a connection to a list of servers (floe_connect_opts of a URI that names several). */
int floe__shards_connect(const char *uri, const floe_options *opts, floe **out);

#endif
