/*
 * metrics.h - floed's server-wide counters, and what `info` and the
 * Prometheus text of the metrics port (metrics_port.h) make of them.
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
 * A response travels with its operation, status, keys and parse time in its frame
 * (reply.h), whichever thread built it.
 *
 * Table figures (keys, fill, memory) come from each table's STATS, fanned
 * out to the batchers and gathered by request.c (request_gather), for info
 * as for list_tables; a scrape of /metrics gathers them the same way and is
 * answered on the metrics thread once the last table has answered.
 */
#ifndef FLOE_DAEMON_METRICS_H
#define FLOE_DAEMON_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "explore.h"
#include "floe.pb-c.h"
#include "reply.h"
#include "rows.h"
#include "spec.h"
#include "status.h"

struct evbuffer;

/* Operations as counted (requests, keys, errors, latency): the requests'
 * rows (daemon/rows.h), after 0 for a frame that does not parse. */
enum {
    METRICS_OP_UNKNOWN = 0,
#define METRICS_OP_ENUM_(name, wire, str, op, flags, handle, reply) METRICS_OP_##name,
    REQUEST_OPS(METRICS_OP_ENUM_)
#undef METRICS_OP_ENUM_
        METRICS_OPS
};

typedef struct metrics metrics;

/* The counters for nshards threads (io threads and one more for the
 * others); NULL if out of memory.  Starts the uptime clock. */
metrics *metrics_new(size_t nshards);
void metrics_free(metrics *m);
/* Where /metrics is served ("127.0.0.1:9450"; "" for none), for info. */
void metrics_set_address(metrics *m, const char *address);

/* ---- counting (shard: the io thread's index in srv->io) ---- */

const char *metrics_op_name(int op);
/* The counted operation of a Request's op_case. */
int metrics_op_of_request(Floe__V1__Request__OpCase op_case);

/* A request of op (-1: only its frame_bytes, counted before it parses). */
void metrics_request(metrics *m, size_t shard, int op, size_t frame_bytes);
void metrics_connection(metrics *m, size_t shard, bool refused);
/* A response: its operation, status, keys answered (key operations) and
 * parse time (0: unknown); written is the bytes handed to the socket (0
 * when the connection was gone: no latency or bytes then). */
void metrics_answered(metrics *m, size_t shard, int op, floe_status st, uint64_t keys, uint64_t t_parse,
                      size_t written);

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

/* ---- what info and /metrics report ---- */

#define METRICS_STATUSES 16 /* above every floe_status */
/* floed's resident memory in bytes (/proc/self/statm; 0 if it cannot be read). */
uint64_t metrics_resident_bytes(void);
#define METRICS_BUCKETS  19 /* latency buckets, and one more: +Inf */

/* Every table's figures at one moment (request_gather). */
typedef struct metrics_tables {
    size_t n;
    const floe_table_stats *stats;
    const bool *have;             /* false: dropped meanwhile */
    const uint64_t *changes;      /* since its last snapshot */
    const int64_t *last_snapshot; /* unix seconds (0: none) */
    const floe_explore_counts *explore; /* an exploring table's run (explore[i].states etc.), */
    const bool *explores;               /* for those that explore */
} metrics_tables;

/* One of floed's GPUs, as info and /metrics report it. */
typedef struct metrics_gpu {
    int device;
    int healthy; /* floe_gpu_healthy */
    char name[96];
    char why[256];
    uint64_t total, free;
} metrics_gpu;

typedef struct metrics_view {
    /* the counters, added up (metrics_view_take) */
    uint64_t conns, refused, bytes_in, bytes_out;
    uint64_t requests[METRICS_OPS], keys[METRICS_OPS];
    uint64_t errors[METRICS_OPS][METRICS_STATUSES];
    uint64_t hist[METRICS_OPS][METRICS_BUCKETS + 1], hist_ns[METRICS_OPS];
    uint64_t uptime_ns, rss, maxmemory, maxmemory_gpu;
    bool snap_any, snap_ok;
    int64_t snap_time;
    char snap_why[256];
    /* floed now (the caller's) */
    uint64_t conns_now;
    uint64_t unread_bytes; /* every connection's responses not yet written (output-total-limit) */
    bool gpu;
    uint64_t gpu_total, gpu_free; /* summed over the working devices */
    size_t ngpus;
    metrics_gpu gpus[FLOE_PARTS_MAX];
    const char *gpu_name, *backend, *data_dir;
    metrics_tables tables;
} metrics_view;

/* Fills v's counters (the caller fills the rest). */
void metrics_view_take(metrics *m, metrics_view *v);
/* The response to Request.info, or an error frame if out of memory. */
frame *metrics_info_reply(metrics *m, uint64_t id, const metrics_view *v);
/* The Prometheus text of v into b. */
void metrics_render(metrics *m, struct evbuffer *b, const metrics_view *v);

#endif
