/*
 * request.h - the one place where a decoded request becomes table work and
 * a batch's end becomes responses.
 *
 * A request's way through floed, five files from socket to engine and
 * back: conn.c reads and decodes the frame; request_handle answers it at
 * once (hello, ping, create_table, a validation error of its own) or makes
 * it a job for its table's batcher (batcher.c), which merges jobs into
 * engine batches (tables/backend.h: the CPU engine, or gpu/ behind
 * tables/partition.c); when a batch ends, each job's done (here) builds the
 * response and delivers it to its session.  A key operation's response is
 * packed later, by its connection's io thread (request_pack), so that the
 * table's thread goes on to the next batch.  list_tables, snapshot and info
 * fan out to every table and gather the answers into one response.
 */
#ifndef FLOE_DAEMON_REQUEST_H
#define FLOE_DAEMON_REQUEST_H

#include "envelope.h"
#include "floe.pb-c.h"
#include "metrics.h"
#include "reply.h"
#include "server.h"

/* io thread: serves req (taken over) of session s. */
void request_handle(server *srv, session *s, Floe__V1__Request *req);
/* io thread: serves the key request env, read in place in the buffer mem
 * (taken over: freed with the request). */
void request_handle_keys(server *srv, session *s, const envelope *env, void *mem);
/* io thread: packs a delivered answer whose f->pending is set (a key
 * operation's) into its response frame (an error if out of memory); frees
 * f.  NULL if not even the error could be built. */
frame *request_pack(frame *f);

/* Main loop, once a second: snapshots the tables the rules
 * (save-every, save-after-changes) say are due. */
void request_snapshot_tick(server *srv);

/* Gathers every table's STATS (through each batcher, behind its queued
 * work) with floed's counters into a view, and calls done with it from
 * whichever thread answers last (maybe this one); done owns the view
 * (request_view_free).  0, or -1 if out of memory (done is not called). */
int request_gather(server *srv, void (*done)(metrics_view *v, void *arg), void *arg);
void request_view_free(metrics_view *v);

#endif
