/*
 * batcher.h - one per table: turns queued requests into engine batches.
 *
 * Requests are validated by the io thread, then queued here in arrival
 * order.  While the backend holds fewer than `depth` of the table's
 * batches, whatever is queued is launched at once (no timer: at low load a
 * request's latency is one batch); while they run, the queue grows into the
 * next one.  A batch holds one operation kind (and one
 * overwrite flag) and at most max-batch-keys keys; a larger request runs
 * alone.  Keys of merged requests are concatenated in arrival order, so the
 * engine's first-occurrence rule gives exactly the per-connection order.
 * A key is 8 bytes (SET, MAP keys; TREE ids for GET) or, for INSERT and FIND
 * on a TREE, a vector of `words` u32 words; max-batch-keys counts vectors.
 * Items that are not key operations (scan, stats, save) run alone, in order;
 * an item that failed validation is answered in its turn, so responses on one
 * table always leave in the order the requests arrived.
 */
#ifndef FLOE_DAEMON_BATCHER_H
#define FLOE_DAEMON_BATCHER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "floe.pb-c.h"
#include "reply.h"

struct conn;
struct server;
struct table_entry;
struct multi;

enum { ITEM_DRAIN = 100 }; /* besides the FLOE_OP_* kinds: the table is being dropped */

typedef struct item {
    struct item *next;
    int op;         /* FLOE_OP_* or ITEM_DRAIN */
    unsigned flags; /* FLOE_BATCH_* */
    struct conn *c;
    uint64_t id;
    Floe__V1__Request *req;  /* owned: keys and values point into it */
    const uint64_t *keys;    /* 8-byte keys, or the ids of a GET */
    const uint32_t *vectors; /* TREE INSERT, FIND: n vectors of words words */
    size_t n;                /* keys, ids or vectors */
    const void *values;
    size_t values_len;
    void *keys_copy;        /* when the request's key bytes were not aligned (8 bytes; 4 for vectors) */
    floe_status pre_status; /* not OK: answer with this error in turn */
    char *pre_error;
    /* SCAN */
    floe_scan_pos cursor;
    int cursor_set;
    size_t limit;
    /* COPY (a snapshot), DRAIN with a data-dir: the table's file */
    char *path;
    struct floe_file_image *image; /* COPY: the copy, for the saver */
    struct table_entry *entry;     /* COPY: the table (a reference) */
    uint64_t changes;              /* COPY: the table's change count the copy holds */
    /* LIST, SNAPSHOT of all tables: one response for several items */
    struct multi *multi;
    size_t multi_index;
    struct table_entry *drop; /* DRAIN: the entry to reap */
    /* stage timers (floe_now_ns): when its frame began to be parsed, when it was queued */
    uint64_t t_parse, t_queued;
} item;

/* A key batch's answers, shared by the responses of its requests: the io
 * threads pack each response from its slice (batcher_pack), and the last
 * one frees it. */
typedef struct batch_out {
    atomic_int refs;
    uint32_t value_bytes, words;
    uint8_t *results;
    uint64_t *ids;
    unsigned char *values_out;
    uint32_t *vectors_out;
} batch_out;

/* Batches a table may have with its backend at once: while one runs, the
 * next is merged and handed over, so the engine never waits for the
 * batcher (the backend runs a table's batches in submission order).  Two
 * per part of a table in parts (tables/partition.h): a batch there waits
 * for its split, every part and its merge, and parts run side by side. */
#define BATCHER_DEPTH_PER_PART 2
#define BATCHER_DEPTH_MAX      8

/* One batch with the backend and its buffers. */
typedef struct batch_slot {
    struct batcher *bt;
    floe_batch b;
    item *running;  /* its items, in order */
    void *keys_buf; /* merged keys and values, kept from batch to batch */
    unsigned char *values_buf;
    size_t keys_cap, values_cap;
    batch_out *out; /* the answers of a key batch */
    uint64_t *scan_keys;
    void *scan_values;
    uint32_t *scan_vectors;
    uint64_t t_submit; /* when it went to the backend */
} batch_slot;

typedef struct batcher {
    pthread_mutex_t lock;
    item *head, *tail;
    unsigned inflight; /* batches with the backend: slots[next - inflight .. next - 1] */
    unsigned next;     /* the slot the next batch takes */
    bool closed;       /* dropped or shutting down: no new items */
    struct server *srv;
    floe_table *table;
    uint32_t value_bytes;
    uint32_t words; /* TREE: u32 words per vector; 0 for SET, MAP */
    unsigned depth; /* BATCHER_DEPTH_PER_PART x the table's parts, at most BATCHER_DEPTH_MAX */
    batch_slot slots[BATCHER_DEPTH_MAX];
    /* parse, queue, merge, backend, reply (tables/spec.h), under lock */
    floe_stage_time stage[FLOE_STAGES];
    /* snapshots (snapshot.c): keys inserted or erased since the table was
     * created or loaded, and that count as of its last snapshot */
    atomic_uint_fast64_t changes, saved_changes;
    atomic_int_fast64_t last_save;   /* unix seconds: last snapshot, or creation/load (for the rules) */
    atomic_int_fast64_t saved_at;    /* unix seconds of the last snapshot written (0: none) */
    atomic_int_fast64_t retry_after; /* unix seconds: no snapshot by the rules before */
    atomic_bool snapshot_pending;    /* one by the rules is on its way */
} batcher;

void batcher_init(batcher *bt, struct server *srv, floe_table *table);
void batcher_destroy(batcher *bt);
/* Queues it (taking ownership) and launches if idle.  Returns FLOE_OK, or
 * an error if the table is dropped or floed is stopping: the caller still
 * owns it then. */
floe_status batcher_submit(batcher *bt, item *it);
/* Refuses new items and answers queued ones with ERR_SHUTTING_DOWN; a batch
 * already with the backend finishes normally. */
void batcher_shutdown(batcher *bt);
bool batcher_idle(batcher *bt);

/* io thread: turns f (an answer queued with its item and batch_out, not yet
 * packed) into the response frame, and frees f, the item and, with the last
 * response, the batch's answers.  NULL if out of memory. */
frame *batcher_pack(frame *f);

item *item_new(struct conn *c, uint64_t id, int op, Floe__V1__Request *req);
void item_free(item *it);
/* Answers an item that carries no keys (OK or an error; a part of a
 * multi-table answer; nothing for an item of floed's own) and frees it. */
void batcher_item_done(item *it, floe_status st, const char *msg);

/* Aggregates the STATS (LIST) or SAVE (SNAPSHOT) items of several tables
 * into one response. */
typedef struct multi {
    pthread_mutex_t lock;
    int left;
    struct conn *c;
    uint64_t id;
    int op;
    size_t n;
    floe_table_stats *stats;
    bool *have;
    floe_status status;
    char error[FLOE_ERROR_MAX];
    uint64_t t_parse; /* c's request began to be parsed (metrics) */
    /* Set (STATS only): the last part calls done instead of answering c
     * (info, /metrics), and done frees m with multi_free. */
    void (*done)(struct multi *m);
    void *arg;
} multi;

multi *multi_new(struct conn *c, uint64_t id, int op, size_t n);
/* Records one part's outcome; the last part sends the response. */
void multi_part_done(multi *m, size_t index, floe_status st, const char *error, const floe_table_stats *stats);
void multi_free(multi *m);

#endif
