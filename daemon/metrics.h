/*
 * metrics.h - floed's server-wide counters, the `info` operation and the
 * Prometheus text on the metrics port (metrics-port, metrics-bind).
 *
 * Counting: every counter lives in a shard of relaxed atomics, one shard per
 * io thread (and one more for any other thread), so that the io threads
 * never share a cache line on the hot path; readers add the shards up.
 *   requests  counted when a frame is parsed (its operation, or "unknown"
 *             for a frame that does not parse or has no operation);
 *   answers   counted by the io thread when it writes the response into the
 *             connection's buffer: its status (errors by operation and
 *             status), keys answered (key operations), bytes out and the
 *             latency from the start of parsing to that write.
 * A response travels with its operation, status and parse time in its frame
 * (reply.h), whichever thread built it.
 *
 * Table figures (keys, fill, memory) come from each table's STATS, fanned
 * out to the batchers and gathered with a multi (batcher.h), for info as for
 * list_tables; a scrape of /metrics gathers them the same way and is
 * answered on the metrics thread once the last table has answered.
 */
#ifndef FLOE_DAEMON_METRICS_H
#define FLOE_DAEMON_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "floe.pb-c.h"
#include "reply.h"
#include "status.h"

struct server;
struct conn;
struct table_entry;

/* Operations as counted (requests, keys, errors, latency). */
enum {
    METRICS_OP_UNKNOWN = 0, /* a frame that does not parse, or no operation */
    METRICS_OP_HELLO,
    METRICS_OP_PING,
    METRICS_OP_CREATE_TABLE,
    METRICS_OP_DROP_TABLE,
    METRICS_OP_LIST_TABLES,
    METRICS_OP_INSERT,
    METRICS_OP_FIND,
    METRICS_OP_ERASE,
    METRICS_OP_STATS,
    METRICS_OP_SCAN,
    METRICS_OP_GET_BY_ID,
    METRICS_OP_SNAPSHOT,
    METRICS_OP_INFO,
    METRICS_OP_RANGE,
    METRICS_OPS
};

typedef struct metrics metrics;

/* The counters of srv (one shard per io thread, cfg.io_threads of them,
 * plus one); NULL if out of memory.  Starts the uptime clock. */
metrics *metrics_new(struct server *srv);
/* After metrics_stop, and once no backend can call back (the backends are
 * destroyed): a scrape still gathering frees itself through m. */
void metrics_free(metrics *m);

/* Starts the HTTP server of /metrics on its own thread when metrics-port is
 * set (logs the address).  0, or -1 (logged) if it cannot listen. */
int metrics_start(metrics *m);
/* Stops the HTTP server (scrapes still gathering are dropped). */
void metrics_stop(metrics *m);

/* ---- counting (shard: the io thread's index in srv->io) ---- */

const char *metrics_op_name(int op);
/* The counted operation of a Request's op_case, or of a batcher item's op
 * (FLOE_OP_* or ITEM_DRAIN). */
int metrics_op_of_request(Floe__V1__Request__OpCase op_case);
int metrics_op_of_item(int item_op);

/* A request of op (-1: only its frame_bytes, counted before it parses). */
void metrics_request(metrics *m, size_t shard, int op, size_t frame_bytes);
void metrics_connection(metrics *m, size_t shard, bool refused);
/* A response: its operation, status, keys answered (key operations) and
 * parse time (0: unknown); written is the bytes handed to the socket (0
 * when the connection was gone: no latency or bytes then). */
void metrics_answered(metrics *m, size_t shard, int op, floe_status st, uint64_t keys, uint64_t t_parse,
                      size_t written);

/* What a queued response frame says about its request, read before the io
 * thread packs it (which frees its item). */
typedef struct metrics_answer {
    int op;
    floe_status status;
    uint64_t keys, t_parse;
} metrics_answer;
void metrics_answer_of(const frame *f, metrics_answer *a);

/* Marks f as the response to a request of op that began to be parsed at
 * t_parse (f may be NULL). */
static inline void metrics_tag(frame *f, int op, uint64_t t_parse)
{
    if (f) {
        f->req_op = op;
        f->t_parse = t_parse;
    }
}

/* ---- snapshots (called by the persistence code) ---- */

/* A snapshot (of any table) was written, or failed, at unix_time; why says
 * why it failed (ignored when ok).  The latest call is what info and
 * /metrics report as the last snapshot.  Any thread. */
void metrics_snapshot_done(metrics *m, int64_t unix_time, bool ok, const char *why);

/* Per-table persistence figures (changes since the last snapshot, its time)
 * are read from each table's batcher (batcher.h) when info or a scrape asks. */

/* ---- the info operation ---- */

/* io thread: answers Request.info on c (gathers every table's STATS first). */
void metrics_handle_info(struct conn *c, uint64_t id);

#endif
