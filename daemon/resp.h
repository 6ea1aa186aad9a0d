/*
 * resp.h - the Redis protocol port (resp-port): a connection's translator
 * between RESP2/RESP3 commands and floe.v1 frames.
 *
 * A RESP connection is a conn (conn.c) like any other: the same io thread,
 * limits, token and TLS.  Its bytes are read here as Redis commands; each
 * one that needs a table becomes a floe.v1 Request frame, which conn.c
 * serves exactly as one read from a protobuf client (so RESP commands merge
 * into the same batches), and each Response frame comes back here to be
 * written as the command's RESP reply, in the order the commands came.
 * Commands of one kind on one table that follow each other in the input
 * (a pipeline of SADDs) go as one request.  The commands are the rows of
 * resp.c's RESP_COMMANDS.  docs/RESP.md says what each does.
 */
#ifndef FLOE_DAEMON_RESP_H
#define FLOE_DAEMON_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reply.h"
#include "server.h"

struct evbuffer;
typedef struct resp resp;

/* The translator of one connection, whose session is s. NULL if out of memory. */
resp *resp_new(server *srv, session *s);
void resp_free(resp *r);

/* What resp_take found. */
typedef enum resp_step {
    RESP_MORE,    /* nothing more to do until more bytes come */
    RESP_FRAME,   /* a request frame to serve: *mem (hostmem, the caller's to give back), *bytes, *len */
    RESP_BLOCKED, /* waiting for an answer (what a table is) before going on: resp_answer says when */
    RESP_CLOSE,   /* QUIT, or input that is not RESP: write what is queued, then close */
} resp_step;

/* Reads commands from in[0, len) (as many as make one frame), consuming
 * *used bytes of it; replies that need no table (PING, errors) are queued
 * in order and whatever is ready is written to out. */
resp_step resp_take(resp *r, const unsigned char *in, size_t len, size_t *used, unsigned char **mem,
                    unsigned char **bytes, uint32_t *len_out, struct evbuffer *out);

/* f, the Response frame of one of r's requests (its 4-byte length first),
 * or an error floed sent on its own: its replies, and those queued behind
 * it that are now ready, are written to out.  True when it ended a wait
 * (RESP_BLOCKED): the caller reads on. */
bool resp_answer(resp *r, const frame *f, struct evbuffer *out);

/* Queues the error reply "-ERR msg" behind those queued (the caller then
 * closes the connection) and writes what is ready to out. */
void resp_refuse(resp *r, const char *msg, struct evbuffer *out);

/* Requests of r sent and not yet answered (their replies held back). */
size_t resp_waiting(const resp *r);

#endif
