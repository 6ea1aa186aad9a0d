/*
 * request.h - where a decoded request goes: its row's handler.
 *
 * A request's way through floed: conn.c reads and decodes the frame;
 * request_handle finds its row (daemon/rows.h) and runs its handler
 * (daemon/ops/), which answers it at once (hello, ping, create_table, a
 * validation error of its own) or makes an item (item.h), a job for its
 * table's batcher (batcher.c), which merges jobs into engine batches
 * (tables/backend.h: the CPU engine, or gpu/ behind tables/partition.c);
 * when a batch ends, the item's done builds the response and delivers it
 * to its session.  A key operation's response is packed later, by its
 * connection's io thread (request_pack, item.h), so that the table's
 * thread goes on to the next batch.  docs/ARCHITECTURE.md draws the path.
 */
#ifndef FLOE_DAEMON_REQUEST_H
#define FLOE_DAEMON_REQUEST_H

#include "envelope.h"
#include "floe.pb-c.h"
#include "item.h"
#include "server.h"

/* The row of a request's oneof case (NULL: none). */
const request_row *request_row_of(Floe__V1__Request__OpCase wire);
/* io thread: serves req (taken over) of session s. */
void request_handle(server *srv, session *s, Floe__V1__Request *req);
/* Whether a request of this case read in place (envelope.h) is served by
 * request_handle_keys: its row's handler is handle_keys. */
bool request_in_place(Floe__V1__Request__OpCase wire);
/* io thread: serves the key request env, read in place in the buffer mem
 * (taken over: freed with the request). */
void request_handle_keys(server *srv, session *s, const envelope *env, void *mem);

#endif
