/*
 * handlers.h - what the request handlers share: the request rows, the item
 * (one request's job from its handler to its answer), the key request
 * (what a key operation's message says, however it was decoded), and the
 * helpers every family of handlers uses.
 *
 * request.c holds the core (items, answers, the answers of several tables,
 * the dispatcher that runs a request's row); the handlers live by family
 * in daemon/ops/: keys.c (insert, find, erase, get_by_id, scan: every key
 * request's one path), ordered.c (range, min, max, successor, predecessor),
 * tables.c (create, drop, list, snapshot, stats) and service.c (hello,
 * ping, info).  Handlers run on the session's io thread; replies are built
 * where the batch ended and delivered through the session.
 */
#ifndef FLOE_DAEMON_OPS_HANDLERS_H
#define FLOE_DAEMON_OPS_HANDLERS_H

#include "batcher.h"
#include "registry.h"
#include "request.h"
#include "rows.h"
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
    void (*fields)(const Floe__V1__Request *req, key_request *kr);
    frame *(*reply)(const job_end *e, const item *it);
};

/* The row of a request's oneof case (NULL: none). */
const request_row *request_row_of(Floe__V1__Request__OpCase wire);

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
    table_entry *entry;     /* COPY: the table (a reference) */
    table_entry *drop;      /* DRAIN: the entry to reap (the registry's reference) */
    multi *multi;           /* LIST, SNAPSHOT, gathers: one response for several items */
    size_t multi_index;
    batch_out *out; /* a key operation's answers, [at, at + n), once its batch ran */
    size_t at;
    /* a RANGE: the request's bounds, which its reply's cursor names */
    uint64_t from, to;
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
    unsigned flags;     /* FLOE_BATCH_* as asked */
    uint64_t shard_set; /* Request.shard (all 0: absent) */
    uint32_t shard, shards;
    Floe__V1__Request *req;
    void *frame;
};

/* ---- items (request.c) ---- */
/* A new item answering row (NULL: floed's own) with table work op. */
item *item_new(server *srv, session *c, uint64_t id, const request_row *row, int op, Floe__V1__Request *req);
void item_free(item *it);
/* Marks it to end with st and msg in its turn, without engine work. */
void item_refuse(item *it, floe_status st, const char *msg);
/* Answers it with f and frees it (f NULL: no answer, the request was dropped). */
void answer(item *it, frame *f);
/* The saver wrote its snapshot, or removed its dropped table's file. */
void item_saved(save_job *sj, floe_status st, const char *error);
/* Hands it to e's batcher, the session held until it is answered; on
 * refusal answers with the reason. */
void submit(session *c, table_entry *e, item *it);
/* The table named by a request, or NULL after answering ERR_NO_TABLE (and
 * freeing req, if given). */
table_entry *request_table(server *srv, session *c, uint64_t id, const char *name, Floe__V1__Request *req);
/* The new item of a request on table e, or NULL after answering
 * ERR_INTERNAL (freeing req and dropping e's reference). */
item *request_item(server *srv, session *c, Floe__V1__Request *req, const request_row *row, table_entry *e);

/* ---- one response for several tables (request.c) ---- */
multi *multi_new(session *c, uint64_t id, const request_row *row, size_t n);
/* Sends an item of m's row to each table of all (n; only: the one of that
 * name, "" for all) as parts of m. */
void fan_out(server *srv, multi *m, table_entry **all, size_t n, const char *only);

/* ---- keys.c ---- */
/* A request on the table of spec from a client that says (set, shard,
 * shards) of it: OK, or ERR_INVALID and why. */
floe_status shard_check(const floe_spec *spec, uint64_t set, uint32_t shard, uint32_t shards, char *msg, size_t len);
floe_status request_shard_check(const floe_spec *spec, const Floe__V1__Request *req, char *msg, size_t len);
/* Queues its answer, the slice of o from at, to be packed by its
 * connection's io thread (request_pack). */
void request_answer_later(item *it, batch_out *o, size_t at);
/* The answer of a scan or a range: tag, if not NULL, ends a range's cursor. */
frame *scan_frame(const batcher *bt, const floe_batch *b, const item *it, const uint64_t *tag);

static inline void send_now(session *c, frame *f)
{
    c->ops->send(c, f);
}
#define send_error(c, id, st, ...) send_now(c, reply_errorf(id, st, __VA_ARGS__))

/* ---- the handlers and the rows' other columns, by family ---- */
#define REQUEST_DECLARE_(name, wire, str, op, flags, handle, fields, reply)                                            \
    void handle(server *srv, session *c, Floe__V1__Request *req, const request_row *row);
REQUEST_OPS(REQUEST_DECLARE_)
#undef REQUEST_DECLARE_
void insert_fields(const Floe__V1__Request *req, key_request *kr);
void find_fields(const Floe__V1__Request *req, key_request *kr);
void erase_fields(const Floe__V1__Request *req, key_request *kr);
void get_fields(const Floe__V1__Request *req, key_request *kr);
void successor_fields(const Floe__V1__Request *req, key_request *kr);
void predecessor_fields(const Floe__V1__Request *req, key_request *kr);
frame *stats_reply(const job_end *e, const item *it);
frame *scan_reply(const job_end *e, const item *it);
frame *range_reply(const job_end *e, const item *it);

#endif
