/*
 * batcher.h - one per table: turns queued jobs into engine batches.
 *
 * The batcher knows the backend interface and nothing of requests or
 * connections: a job says what to run, and its done callback says how it
 * ended (once, from whichever thread finished it), as a floe_batch's does.
 * Requests are validated by the io thread (request.c, with the door of
 * tables/spec.h), then queued here as jobs in arrival order: the batches
 * say so (FLOE_BATCH_CHECKED), so the keys are not scanned again.  While
 * the backend holds fewer than `depth` of the table's batches, whatever is
 * queued is launched at once (no timer: at low load a request's latency is
 * one batch); while they run, the queue grows into the next one.  A batch
 * holds one operation kind (and one overwrite flag) and at most
 * max-batch-keys keys; a larger request, or one large enough to keep the
 * engine busy alone (MERGE_BELOW_KEYS; not for an ORDERED table, whose
 * batches pay their fixed costs once whatever their size), runs alone.  Keys of merged
 * requests are concatenated in arrival order, so the engine's
 * first-occurrence rule gives exactly the per-connection order.  A key is 8
 * bytes (SET, MAP, ORDERED keys; TREE ids for GET) or, for INSERT and FIND on a
 * TREE, a vector of `words` u32 words; max-batch-keys counts vectors.  An
 * ORDERED table's successor and predecessor are key operations too.  Jobs
 * that are not key operations (scan, range, stats, copy) run alone, in order; a
 * job that failed validation ends in its turn, so responses on one table
 * always leave in the order the requests arrived.
 *
 * Lanes: a table whose backend runs several lanes side by side
 * (floe_backend_lanes: the GPU backend's pipelines) has a batcher lane for
 * each, with its own lock, queue and batches: a job goes to lane j->lane
 * (modulo the lanes), so the io threads, each with its own lane, merge and
 * submit without meeting.  Everything above holds per lane; the jobs of one
 * connection share a lane (its io thread's), so its order holds.  The drain
 * closes every lane and ends when all have ended what they held.
 */
#ifndef FLOE_DAEMON_BATCHER_H
#define FLOE_DAEMON_BATCHER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "queue.h"

struct floe_pool;
typedef struct batcher batcher;

/* Besides the FLOE_OP_* kinds: the table is being dropped.  It closes the
 * batcher, and ends once everything queued before it has ended. */
enum { JOB_DRAIN = 100 };

/* A key batch's answers, shared by the jobs that ran in it: each job's
 * answers are a slice; the last holder frees them. */
typedef struct batch_out {
    atomic_int refs;
    struct hostmem *mem; /* its buffers' */
    uint32_t value_bytes, words;
    uint8_t *results;
    uint64_t *ids;
    uint64_t *keys_out; /* SUCC, PRED: the neighbours */
    unsigned char *values_out;
    uint32_t *vectors_out;
    uint64_t generation; /* the table's, that the ids are of (floe_batch.generation) */
} batch_out;

void batch_out_hold(batch_out *o);
void batch_out_release(batch_out *o);

typedef struct job job;

/* How a job ended.  Either without engine work (b NULL: an error, its
 * validation error in its turn, the drain, or dropped), or in batch b
 * (status b->status; a key operation's answers are [at, at + n) of out).
 * Read only during done. */
typedef struct job_end {
    floe_status status;
    const char *error;
    floe_batch *b;
    batch_out *out;
    size_t at;
    bool dropped; /* its client had gone (job.gone): not run, nobody to answer */
    batcher *bt;
    /* a COPY: keys inserted or erased (batcher.changes) that its image holds at least */
    uint64_t changes;
} job_end;

struct job {
    queue_link link;
    int op;         /* FLOE_OP_* or JOB_DRAIN */
    unsigned flags; /* FLOE_BATCH_* */
    unsigned lane;  /* the batcher lane it goes to (modulo the lanes): its connection's io thread's */
    const uint64_t *keys;    /* 8-byte keys, or the ids of a GET */
    const uint32_t *vectors; /* TREE INSERT, FIND: n vectors of words words */
    size_t n;                /* keys, ids or vectors */
    /* TREE INSERT of states by their parents (floe_batch's fields of the same names): a batch of its own */
    const uint64_t *parents;
    const uint8_t *change_counts, *changes;
    size_t changes_len;
    uint64_t parent_generation;
    const void *values;
    size_t values_len;
    floe_status pre_status; /* not OK: ends with this error in its turn */
    const char *pre_error;
    /* SCAN, RANGE (a RANGE's cursor: only its generation, checked by the engine) */
    floe_scan_pos cursor;
    int cursor_set;
    size_t limit;
    /* RANGE: [lo, hi], ascending or descending */
    uint64_t lo, hi;
    bool desc;
    /* Set (key operations, scans): once true nobody waits for the answer,
     * and a job still queued is dropped instead of run. */
    const atomic_bool *gone;
    /* Set with gone: while true, a job still queued is answered ERR_BUSY
     * instead of run (its client reads no answers: output-total-limit). */
    const atomic_bool *unread;
    /* stage timers (floe_now_ns): when its request began to be parsed, when it was queued */
    uint64_t t_parse, t_queued;
    /* Called once.  The drain's is called with no batcher lock held and
     * nothing of the batcher used after it: it may destroy the table. */
    void (*done)(job *j, const job_end *end);
};

/* What a batcher is given instead of reading floed's settings. */
typedef struct batcher_limits {
    const atomic_uint_fast64_t *max_batch_keys; /* live: SIGHUP may change it */
    struct floe_pool *merge_pool;               /* large merges (NULL: inline) */
    struct hostmem *mem;                        /* the answers' buffers (hostmem.h) */
} batcher_limits;

/* Batches a table may have with its backend at once: while one runs, the
 * next is merged and handed over, so the engine never waits for the
 * batcher (the backend runs a table's batches in submission order); per
 * part of a table in parts (tables/partition.h): a batch there waits
 * for its split, every part and its merge, and parts run side by side.
 * Sixteen: a GPU table's pipeline overlaps the copies and kernels of three
 * pieces, and a piece carries up to 16 batches that do the same
 * (gpu/backend_gpu.cu): requests large enough to be batches of their own
 * (E1's 64 Ki keys) keep it full only when a few pieces' worth wait there. */
#define BATCHER_DEPTH_PER_PART 16
#define BATCHER_DEPTH_MAX      32
/* A job that is not a key operation (scan, stats, copy) goes to the backend
 * only while fewer batches than this are out: a scan answers up to max-frame
 * bytes, and the memory of answers on their way stays that of a few. */
#define BATCHER_DEPTH_OTHER 4

typedef struct batcher_lane batcher_lane;

/* One batch with the backend and its buffers. */
typedef struct batch_slot {
    batcher *bt;
    batcher_lane *ln;
    floe_batch b;
    job *running;   /* its jobs, in order, chained through link */
    void *keys_buf; /* merged keys and values (the backend's host memory), kept from batch to batch */
    unsigned char *values_buf;
    size_t keys_cap, values_cap;
    batch_out *out; /* the answers of a key batch */
    uint64_t *scan_keys;
    void *scan_values;
    uint32_t *scan_vectors;
    uint64_t t_submit; /* when it went to the backend */
    uint64_t changes_others; /* a COPY: the other lanes' changes when it went to the backend */
} batch_slot;

struct batcher_lane {
    pthread_mutex_t lock;
    queue q;           /* of job.link */
    unsigned index;
    unsigned inflight; /* batches with the backend: slots[next - inflight .. next - 1] */
    unsigned next;     /* the slot the next batch takes */
    floe_status closed; /* OK, or why no new jobs: ERR_NO_TABLE (dropped), ERR_SHUTTING_DOWN */
    bool drained;       /* closed by the drain, and has ended everything it held */
    batch_slot slots[BATCHER_DEPTH_MAX];
    /* parse, queue, merge, backend, reply (tables/spec.h), under lock */
    floe_stage_time stage[FLOE_STAGES];
    atomic_uint_fast64_t changes; /* its share of batcher.changes */
};

struct batcher {
    floe_table *table;
    floe_backend *backend; /* the table's: it outlives the table, and frees the merge buffers */
    batcher_limits limits;
    uint32_t value_bytes; /* of a table with values (MAP, ORDERED); else 0 */
    uint32_t words;       /* TREE: u32 words per vector; 0 for SET, MAP, ORDERED */
    bool merge_any;       /* ORDERED: requests of any size are merged (MERGE_BELOW_KEYS is not its rule) */
    unsigned depth; /* per lane: BATCHER_DEPTH_PER_PART x the table's parts, at most BATCHER_DEPTH_MAX */
    unsigned nlanes;
    batcher_lane *lanes;
    _Atomic(job *) drain;   /* the drain, once submitted: ends when drain_left reaches 0 */
    atomic_uint drain_left; /* lanes not yet drained, + 1 while submit_drain walks them */
    /* keys inserted or erased by its batches (the snapshot rules read it) */
    atomic_uint_fast64_t changes;
};

/* false: out of memory (nothing to destroy). */
bool batcher_init(batcher *bt, floe_table *table, const batcher_limits *limits);
void batcher_destroy(batcher *bt);
/* Queues j in its lane and launches if the backend has room.  FLOE_OK, or
 * why the batcher takes no jobs (dropped, shutting down): the caller still
 * owns j then. */
floe_status batcher_submit(batcher *bt, job *j);
/* Takes no new jobs; queued ones end with ERR_SHUTTING_DOWN; a batch
 * already with the backend finishes (and a drain ends after them). */
void batcher_shutdown(batcher *bt);
bool batcher_idle(batcher *bt);
/* The stage timers so far, every lane's together. */
void batcher_stages(batcher *bt, floe_stage_time out[FLOE_STAGES]);

#endif
