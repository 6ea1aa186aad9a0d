/*
 * handlers.h - the request handlers and what they share: the key request
 * (what a key operation's message says, however it was decoded), the
 * helpers of keys.c that other families use, and the rows' columns.
 *
 * request.c is the dispatcher that runs a request's row; item.h the core
 * (items, answers, the answers of several tables); the handlers live by family
 * in daemon/ops/: keys.c (insert, find, erase, get_by_id, scan: every key
 * request's one path), ordered.c (range, min, max, successor, predecessor),
 * tables.c (create, drop, list, snapshot, stats), service.c (hello,
 * ping, info, shutdown) and config.c (config).  Handlers run on the session's io thread; replies are built
 * where the batch ended and delivered through the session.
 */
#ifndef FLOE_DAEMON_OPS_HANDLERS_H
#define FLOE_DAEMON_OPS_HANDLERS_H

#include "item.h"
#include "rows.h"

/* ---- keys.c ---- */
/* A request on the table of spec from a client that says (set, shard,
 * shards) of it: OK, or ERR_INVALID and why. */
floe_status shard_check(const floe_spec *spec, uint64_t set, uint32_t shard, uint32_t shards, char *msg, size_t len);
floe_status request_shard_check(const floe_spec *spec, const Floe__V1__Request *req, char *msg, size_t len);
/* A key request of row: takes kr's bytes over. */
void serve_keys(server *srv, session *c, const request_row *row, key_request *kr);
/* The answer of a scan or a range: tag, if not NULL, ends a range's cursor. */
frame *scan_frame(const batcher *bt, const floe_batch *b, const item *it, const uint64_t *tag);

/* Answers at once, on the io thread. */
static inline void send_now(session *c, frame *f)
{
    c->ops->send(c, f);
}
#define send_error(c, id, st, ...) send_now(c, reply_errorf(id, st, __VA_ARGS__))

/* ---- the handlers and the rows' other columns, by family ---- */
#define REQUEST_DECLARE_(name, wire, str, op, flags, handle, reply)                                                    \
    void handle(server *srv, session *c, Floe__V1__Request *req, const request_row *row);
REQUEST_OPS(REQUEST_DECLARE_)
#undef REQUEST_DECLARE_
frame *stats_reply(const job_end *e, const item *it);
frame *scan_reply(const job_end *e, const item *it);
frame *range_reply(const job_end *e, const item *it);

/* ---- config.c ---- */
/* Main thread: runs the config requests the io threads queued (handle_config). */
void config_requests_run(server *srv);

#endif
