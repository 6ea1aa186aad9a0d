/*
 * batcher.h - one per table: turns queued requests into engine batches.
 *
 * Requests are validated by the io thread, then queued here in arrival
 * order.  When the backend is idle the queue is launched at once (no timer:
 * at low load a request's latency is one batch); while a batch runs, the
 * queue grows into the next one.  A batch holds one operation kind (and one
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
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "floe.pb-c.h"

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
    floe_cursor cursor;
    int cursor_set;
    size_t limit;
    /* SAVE */
    char *path;
    /* LIST, SNAPSHOT of all tables: one response for several items */
    struct multi *multi;
    size_t multi_index;
    struct table_entry *drop; /* DRAIN: the entry to reap */
} item;

typedef struct batcher {
    pthread_mutex_t lock;
    item *head, *tail;
    bool busy;   /* a batch is with the backend */
    bool closed; /* dropped or shutting down: no new items */
    struct server *srv;
    floe_table *table;
    uint32_t value_bytes;
    uint32_t words; /* TREE: u32 words per vector; 0 for SET, MAP */
    /* the batch in flight */
    floe_batch b;
    item *running;
    void *keys_buf;
    unsigned char *values_buf, *results, *values_out;
    uint64_t *ids, *scan_keys;
    void *scan_values;
    uint32_t *vectors_out, *scan_vectors;
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

item *item_new(struct conn *c, uint64_t id, int op, Floe__V1__Request *req);
void item_free(item *it);

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
} multi;

multi *multi_new(struct conn *c, uint64_t id, int op, size_t n);
/* Records one part's outcome; the last part sends the response. */
void multi_part_done(multi *m, size_t index, floe_status st, const char *error, const floe_table_stats *stats);

#endif
