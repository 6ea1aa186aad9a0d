/*
 * item.h - an item: one request's job from its handler (daemon/ops/) to its
 * answer, with what the answer needs; the rows (daemon/rows.h) an item
 * answers by; the answers of several tables at once (list_tables,
 * snapshot, info and gathers, snapshots by the rules).  item.c.
 */
#ifndef FLOE_DAEMON_ITEM_H
#define FLOE_DAEMON_ITEM_H

#include "batcher.h"
#include "metrics.h"
#include "registry.h"
#include "reply.h"
#include "server.h"
#include "snapshot.h"

/* A row's flags. */
#define REQ_ANY_TIME 1u /* served while floed shuts down (hello, ping) */
#define REQ_DATA_DIR 2u /* needs a data-dir (snapshot) */
#define REQ_TAKES    4u /* its handler takes the request over (it lives as long as its job) */

typedef struct item item;
typedef struct multi multi;
typedef struct key_request key_request;
typedef struct request_row request_row;

/* One row of rows.h. */
struct request_row {
    int metric; /* METRICS_OP_*: its place */
    const char *name;
    floe_op op; /* its table work, 0 for none */
    unsigned flags;
    /* takes req over if REQ_TAKES, else the dispatcher frees it after */
    void (*handle)(server *srv, session *c, Floe__V1__Request *req, const request_row *row);
    frame *(*reply)(const job_end *e, const item *it);
};

/* A key request, from either decoding: its bytes live in req or in frame
 * (whichever is set; the item takes it over). */
struct key_request {
    uint64_t id;
    const char *table; /* NUL-terminated */
    const uint8_t *keys, *values;
    size_t keys_len, values_len;
    /* TREE states by their parents (Insert.parents, change_counts, changes, generation) */
    const uint8_t *parents, *change_counts, *changes;
    size_t parents_len, change_counts_len, changes_len;
    uint64_t parent_generation;
    /* an exploring table's insert (Insert.from, labels, complete; from_first and from_counts) */
    const uint8_t *from, *labels, *from_counts;
    size_t from_len, labels_len, from_counts_len;
    uint64_t complete, from_first;
    uint32_t from_depth;
    unsigned flags;     /* FLOE_BATCH_* as asked */
    uint64_t shard_set; /* Request.shard (all 0: absent) */
    uint32_t shard, shards;
    Floe__V1__Request *req;
    void *frame;
};

struct item {
    job j;         /* the batcher's part */
    save_job save; /* COPY, and DRAIN with a data-dir: the saver's part */
    server *srv;
    session *c; /* NULL: floed's own (a snapshot by the rules, a gather) */
    uint64_t id;
    const request_row *row; /* what it answers (NULL: floed's own) */
    Floe__V1__Request *req; /* owned: the job's keys and values point into it (or into frame) */
    void *frame;            /* owned (hostmem.h): the frame of a key request read in place (envelope.h) */
    void *keys_copy;        /* when the request's key bytes were not aligned (8 bytes; 4 for vectors) */
    void *values_copy;      /* when its values were not aligned (to value_bytes) */
    char *pre_error;        /* owned: the job's pre_error, or a failed copy's error */
    char *path;             /* COPY, DRAIN with a data-dir: the table's file */
    table_entry *entry;     /* COPY, an exploring table's insert: the table (a reference) */
    table_entry *drop;      /* DRAIN: the entry to reap (the registry's reference) */
    multi *multi;           /* LIST, SNAPSHOT, gathers: one response for several items */
    size_t multi_index;
    batch_out *out; /* a key operation's answers, [at, at + n), once its batch ran */
    size_t at;
    /* a RANGE: the request's bounds, which its reply's cursor names */
    uint64_t from, to;
    /* an exploring table's insert (entry set): each key's parent in the open set (NULL: all
     * initial, or explore_runs), or the parents as runs (from_first and from_counts, read in the
     * request: explore_runs.counts not NULL), labels (NULL: zeros), the claim it ends (0: none),
     * the depth of its parents on other shards (Insert.from_depth); explore_copy holds the
     * parents when the request's were not aligned, or spelled out */
    bool explore;
    const uint64_t *explore_from;
    floe_parent_runs explore_runs;
    const uint8_t *explore_labels;
    uint64_t explore_complete;
    uint32_t explore_from_depth;
    void *explore_copy;
};

/* ---- items ---- */
/* A new item answering row (NULL: floed's own) with table work op. */
item *item_new(server *srv, session *c, uint64_t id, const request_row *row, int op, Floe__V1__Request *req);
void item_free(item *it);
/* Marks it to end with st and msg in its turn, without engine work. */
void item_refuse(item *it, floe_status st, const char *msg);
/* Answers it with f and frees it (f NULL: no answer, the request was dropped). */
void item_answer(item *it, frame *f);
/* The saver wrote its snapshot, or removed its dropped table's file. */
void item_saved(save_job *sj, floe_status st, const char *error);
/* Hands it to e's batcher, the session held until it is answered; on
 * refusal answers with the reason. */
void item_submit(session *c, table_entry *e, item *it);
/* The table named by a request, or NULL after answering ERR_NO_TABLE (and
 * freeing req, if given). */
table_entry *request_table(server *srv, session *c, uint64_t id, const char *name, Floe__V1__Request *req);
/* The new item of a request on table e, or NULL after answering
 * ERR_INTERNAL (freeing req and dropping e's reference). */
item *request_item(server *srv, session *c, Floe__V1__Request *req, const request_row *row, table_entry *e);

/* ---- one response for several tables ---- */
multi *multi_new(session *c, uint64_t id, const request_row *row, size_t n);
/* Sends an item of m's row to each table of all (n; only: the one of that
 * name, "" for all) as parts of m. */
void multi_fan_out(server *srv, multi *m, table_entry **all, size_t n, const char *only);

/* Queues its answer, the slice of o from at, to be packed by its
 * connection's io thread (request_pack). */
void item_answer_later(item *it, batch_out *o, size_t at);

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
