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
    Floe__V1__Request *req; /* owned: keys and values point into it */
    const uint64_t *keys;
    size_t n;
    const void *values;
    size_t values_len;
    uint64_t *keys_copy;    /* when the request's key bytes were not 8-byte aligned */
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
    /* the batch in flight */
    floe_batch b;
    item *running;
    uint64_t *keys_buf;
    unsigned char *values_buf, *results, *values_out;
    uint64_t *ids, *scan_keys;
    void *scan_values;
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
