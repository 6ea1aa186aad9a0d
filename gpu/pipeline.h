/*
 * pipeline.h - what the GPU backend's files share (CUDA C++, gpu/ only;
 * the backend's interface is backend_gpu.h): a table, its lanes and their
 * staging, and the entries of each file.
 *
 * The backend by role: backend_gpu.cu (the backend interface and each
 * lane's worker, which takes batches off its queue and hands each to the
 * runner of its table's kind), run_keys.cu (SET and MAP: batches cut into
 * pieces through the lane's stages; growth; what runs alone),
 * run_tree.cu (TREE), run_ordered.cu (ORDERED), run_static.cu (a STATIC
 * table's freeze, and its batches once frozen), staging.cu (the one
 * staging type every runner's pieces go through), devices.cu (which device
 * is current, whether each still works, the pinned host memory the
 * backend registered).
 */
#ifndef FLOE_GPU_PIPELINE_H
#define FLOE_GPU_PIPELINE_H

#include <assert.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "backend_gpu.h"
#include "cuckoo_gpu.h"
#include "dedup.h"
#include "group.h"
#include "iceberg.h"
#include "iceberg_gpu.h"
#include "ordered.h"
#include "ordered_gpu.h"
#include "pool.h"
#include "tablefile.h"
#include "tree_gpu.h"

#define STAGES    3
#define PIECE_MAX (1u << 20) /* keys per piece */
/* One piece in TIME_EVERY has its copies and kernels timed (three more
 * events to record and three elapsed times to read: driver calls on the
 * table's worker, whose time per piece bounds E1); its times count for
 * TIME_EVERY pieces in the stage timers. */
#define TIME_EVERY 8

struct gpu_backend {
    floe_backend base;
    floe_pool *pool;
    int device; /* every CUDA call for a table of this backend runs with it current */
};

/* Keys [off, off + n) of batch b; last: b's last keys. */
struct segment {
    floe_batch *b;
    size_t off, n;
    bool last;
};

/* A piece: one launch of copies and kernels.  It carries the rest of the
 * current batch, or up to PIECE_MAX keys of it, and then whole batches
 * that were queued behind it and do the same (join_queued): E1's 64 Ki-key
 * requests would otherwise pay a launch's driver calls each.  Applying
 * them in one piece, in order, is applying them one after another. */
#define PIECE_SEGS GPU_SEGMENTS_MAX
struct piece {
    segment seg[PIECE_SEGS];
    unsigned nseg;
    size_t n; /* keys in all its segments */
};

/* Where a segment's keys come from and its answers go: the stage's buffers,
 * or the batch's own where they are pinned (floe_backend_host_alloc), which
 * the copy engines reach with no staging copy. */
struct seg_io {
    const uint64_t *in_keys;
    const void *in_vals; /* a MAP insert's values (NULL: none) */
    uint8_t *out_res;
    uint64_t *out_ids;
    void *out_vout;
    size_t at, m; /* the segment's keys on the device: [at, at + m) of the stage's buffers */
};

/* ---- staging: one type for every runner ---------------------------------------------------------- */

/* Where a staging buffer lives: pinned host memory (which the copy engines
 * reach with no staging copy of their own), device memory, or both. */
enum { ON_HOST = 1, ON_DEVICE = 2, ON_BOTH = 3 };

/* staging.cu: *h (pinned, old_bytes) and *d given back, and *bytes of each
 * side `where` asks for allocated in their place, *bytes then what each
 * holds (a kept pinned block may be larger); on failure both NULL. */
floe_status stage_buf_alloc(void **h, void **d, size_t old_bytes, size_t *bytes, unsigned where, floe_errinfo *err);
/* *h (pinned, bytes of it) and *d given back: a pinned block is kept for
 * the next staging that fits it (stage_pool_drain frees them), a device
 * one freed. */
void stage_buf_release(void **h, void **d, size_t bytes);
/* Frees the pinned blocks kept (a backend that goes). */
void stage_pool_drain(void);

/* One staging buffer: room for cap elements of T on the host, the device or
 * both, grown (never shrunk) as pieces need and kept between them; a growth
 * does not keep what it held.  Zeroed is empty. */
template <class T> struct stage_buf {
    T *h, *d;
    size_t cap; /* elements */
    floe_status reserve(size_t n, unsigned where, floe_errinfo *err)
    {
        if (n <= cap)
            return FLOE_OK;
        size_t bytes = n * sizeof(T);
        const size_t old = cap * sizeof(T);
        cap = 0;
        floe_status st = stage_buf_alloc((void **)&h, (void **)&d, old, &bytes, where, err);
        if (st == FLOE_OK)
            cap = bytes / sizeof(T);
        return st;
    }
    void release()
    {
        stage_buf_release((void **)&h, (void **)&d, cap * sizeof(T));
        cap = 0;
    }
};

/* A piece's buffers, whatever its table's kind: every runner stages
 * through one (a SET or MAP lane's stages one each, a TREE, ORDERED or
 * frozen STATIC table, whose batches run alone, one for the table). */
struct staging {
    stage_buf<uint64_t> keys;           /* keys in (SET, MAP, ORDERED, STATIC) */
    stage_buf<uint32_t> vec;            /* TREE: vectors in, or out of a GET */
    stage_buf<uint64_t> ids;            /* ids out; a TREE's ids in (a GET's, parents); ORDERED: the keys found */
    stage_buf<uint8_t> res;             /* answers */
    stage_buf<unsigned char> vin, vout; /* values in and out; TREE: the states' changes in (vin) */
    stage_buf<uint32_t> first;          /* TREE: each state's first change */
};
void staging_free(staging *s);

struct stage {
    cudaStream_t copy;
    /* h0 -> in: keys in; k0 -> done: kernels, which end with the answers written out (a small
     * piece's, k0 -> k: its kernel) (timing events) */
    cudaEvent_t h0_ev, in_ev, k0_ev, k_ev, done_ev;
    bool timed;        /* every event above was recorded (one piece in TIME_EVERY) */
    uint64_t stage_ns; /* the worker's time setting the piece up and enqueueing it */
    size_t cap;        /* keys */
    staging buf;       /* cap keys of each buffer, pinned and on the device (values: cap x vb bytes) */
    seg_io io[PIECE_SEGS];
    bool small;              /* one kernel on pinned staging, no copies (launch_small) */
    gpu_tally *d_tally;      /* pieces but small ones: their answers counted on the device ... */
    uint64_t (*h_counts)[5]; /* ... and written here with them (pinned, 5 per segment) */
    size_t m;                /* keys sent to the device */
    piece p;
    uint64_t gen; /* the table's generation when its kernels were enqueued */
    floe_status st;
    floe_errinfo err;
};

static_assert(FLOE_ABSENT < 5 && FLOE_PRESENT < 5 && FLOE_INSERTED < 5 && FLOE_FULL < 5 && FLOE_ERASED < 5,
              "gpu_tally counts answers 0..4");

/* A SET table's buffers for the batches of a table in parts that its
 * devices split among themselves (run_group.cu; tables/group.h), grown as
 * batches need and kept.  A batch's chunk and answers take one of
 * GROUP_SETS sets in turn, so that the next batches' chunks are copied in
 * and sorted (on ss) and the last run's answers go back (on as) while the
 * table runs this one; a run takes up to GROUP_MERGE batches, its part's
 * answers to all of them in its first set's d_res.
 * The other parts' workers read a set's sk, cnt and res between the
 * meetings. */
#define GROUP_MERGE 4
#define GROUP_SETS  (2 * GROUP_MERGE)
#define GROUP_META 32 /* d_meta: keys of each part (FLOE_PARTS_MAX), their bits or'ed, two tallies */
struct group_chunk {
    stage_buf<uint64_t> ck, sk;          /* the chunk's keys as they came, and by part */
    stage_buf<uint8_t> pb, pbs;          /* the part of each, and sorted */
    stage_buf<uint32_t> iota, perm;      /* 0, 1, 2, ...; and the chunk's place of each key by part */
    stage_buf<unsigned char> temp;       /* cub's */
    size_t temp_bytes;                   /* what cub asked for, at ck.cap keys */
    stage_buf<uint8_t> res;              /* the part's answers to its keys of every chunk */
    stage_buf<unsigned long long> meta;  /* GROUP_META words, on the device and pinned */
    size_t cnt[FLOE_PARTS_MAX];          /* the chunk's keys of each part */
    const floe_batch *b;                 /* the batch whose chunk it holds, sorted or on its way (ss) */
    cudaEvent_t sorted;                  /* recorded on ss after its chunk's sort */
    floe_status st;                      /* of enqueueing it */
    floe_errinfo err;
};
struct group_stage {
    cudaStream_t ss, as; /* chunks sorted, answers back: beside the table's stream */
    group_chunk ch[GROUP_SETS];
    unsigned next;                     /* the set the next chunk takes */
    stage_buf<uint64_t> in;            /* this part's keys from every chunk, in chunk order */
    stage_buf<uint8_t> sres, cres;     /* the chunk's answers by part, and in the chunk's order */
    group_chunk *pending[GROUP_MERGE]; /* sets whose batches' answers are on their way back (as), in */
    unsigned npending;                 /* their order: completed by group_finish */
};

/* A pipeline of a table: a lane of tables/backend.h, fed by its own
 * submitters (floed's io threads), with its own worker thread, queue,
 * stages and copy streams.  The lanes of a table share its device table and
 * its kernel stream: each piece's kernels are enqueued under the table's
 * klock, so they run one piece after another, whatever its lane, as with
 * one lane (and a find still runs alone on its table).  Each lane halts on
 * FULL alone (gpu_iceberg_lane) and grows and retries as with one lane, the
 * growth itself alone (exclusive_begin) and under klock. */
struct gpu_table;
struct lane {
    gpu_table *t;
    unsigned index;
    pthread_t thread;
    pthread_cond_t cv; /* signalled under t->lock */
    queue q;           /* submitted batches, under t->lock */
    stage stg[STAGES];
    /* Stages in flight: stg[head], stg[head+1], ...  count, cur, nredo and redo_at are
     * written by its worker under t->glock (other lanes' growth reads them: busy) */
    unsigned head, count;

    /* its worker only */
    floe_batch *cur; /* the batch being cut into pieces */
    size_t cur_off;
    piece redo[2 * STAGES];
    unsigned nredo, redo_at;
    bool waiting;                       /* in exclusive_begin (under t->glock) */
    uint64_t inflight_keys;             /* keys of insert pieces in flight (other lanes read it: relaxed atomics) */
    uint64_t launched;                  /* pieces launched (which are timed: TIME_EVERY) */
    uint64_t ids_gen;                   /* generation the retiring batch's first piece ran on */
    floe_stage_time stage[FLOE_STAGES]; /* stage_in .. stage_out, reported by STATS (under klock) */
};

struct gpu_table {
    floe_table base;
    gpu_backend *be;
    gpu_iceberg *ice; /* SET, MAP */
    gpu_tree *tree;   /* TREE */
    gpu_ordered *ord; /* ORDERED */
    gpu_cuckoo *frozen; /* a STATIC table from its freeze on (ice until then; set under klock and glock) */
    staging one;        /* TREE, ORDERED, frozen STATIC: their batches run alone, through this */
    group_stage gs;
    uint32_t vb;
    cudaStream_t ks; /* kernels, in the order enqueued */
    /* The device table: held to enqueue kernels on ks, to grow, to run what
     * runs alone (scan, stats, save, a TREE's batches), and for the fields
     * below.  used and tombstones (SET, MAP; after every retired piece: an
     * upper bound) are also read without it, for the fill check. */
    pthread_mutex_t klock;
    uint64_t used, tombstones, generation; /* a TREE's engine keeps its own generation */

    /* growth among lanes (exclusive_begin): the lane that grows, if any, and its wake-ups */
    pthread_mutex_t glock;
    pthread_cond_t gcv;
    lane *holder;

    pthread_mutex_t lock; /* the lanes' queues */
    bool stopping;
    unsigned nlanes;
    lane lanes[FLOE_LANES_MAX];
};

static_assert(FLOE_LANES_MAX <= GPU_LANES_MAX, "every lane has a halt flag (gpu_iceberg_lane)");

static inline uint64_t relaxed(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static inline void relaxed_set(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
}

/* Keys of every lane's insert pieces in flight. */
static inline uint64_t inflight_all(const gpu_table *t)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < t->nlanes; i++)
        n += relaxed(&t->lanes[i].inflight_keys);
    return n;
}

/* Makes device current for the scope's life and restores the caller's
 * context after (devices.cu). */
struct device_scope {
    CUcontext saved = NULL;
    bool restore = false;
    cudaError_t e;
    explicit device_scope(int device);
    ~device_scope();
    device_scope(const device_scope &) = delete;
    device_scope &operator=(const device_scope &) = delete;
};

/* A runner's CUDA call: on failure, returns FLOE_ERR_INTERNAL with the call
 * and CUDA's message in *err. */
#define RUN_CUDA(call)                                                                                                 \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess)                                                                                         \
            return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "%s: %s", #call, cuda_msg(e_));                            \
    } while (0)

/* backend_gpu.cu: the worker */
void grow_if_due(lane *L, size_t n);
void launch_next(lane *L);
void stage_times(const gpu_table *t, floe_stage_time out[FLOE_STAGES]);

/* run_keys.cu: SET and MAP tables */
void complete(gpu_table *t, floe_batch *b);
const char *cuda_msg(cudaError_t e);
void drain(lane *L);
void exclusive_begin(lane *L);
void exclusive_end(lane *L);
double fill_limit(const gpu_table *t);
uint32_t grow_target(const gpu_table *t, uint64_t n, uint32_t *three);
void launch(lane *L, const piece &p);
floe_status rebuild(gpu_table *t, uint32_t addr_bits, uint32_t three, size_t batch, floe_errinfo *err);
/* One round of a retry: the nf keys at places idx of a batch run again, their
 * answers written into res at those places. */
typedef floe_status (*retry_round)(void *ctx, const uint32_t *idx, size_t nf, uint8_t *res, floe_errinfo *err);
/* The keys of a grow table's insert that answered FULL, or were skipped behind
 * one, among res[0..m): retried by `round` after a growth (none first if
 * `grown`: the table grew since they ran) until none is left or the table
 * cannot grow (then they answer FULL).  Lane L alone (exclusive_begin), klock
 * held; idx has room for m. */
floe_status retry_after_growth(lane *L, uint8_t *res, uint32_t *idx, size_t m, bool grown, retry_round round, void *ctx,
                               floe_errinfo *err);
floe_status recount(gpu_table *t, floe_errinfo *err);
void retire(lane *L);
void run_alone(lane *L, floe_batch *b);
void stage_free_buffers(stage *s);
floe_status write_image(floe_file_image *im, const char *path, floe_errinfo *err);

/* run_tree.cu */
void run_tree(lane *L, floe_batch *b);

/* run_group.cu: batches of a table in parts split on its devices */
void group_finish(lane *L);
bool group_fits(floe_table *const *parts, unsigned nparts, const floe_batch *b);
void group_stage_free(group_stage *s);
void run_group(lane *L, floe_batch *b);

/* side_store.cu: the memory of a table's side arrays (tables/store.h) */
floe_status gpu_side_store(floe_table *t, floe_store *out, floe_errinfo *err);

/* run_ordered.cu */
floe_status ord_stage_reserve(staging *s, size_t n, floe_errinfo *err);
void run_ordered(lane *L, floe_batch *b);

/* run_static.cu */
bool frozen_now(gpu_table *t);
floe_status static_freeze(gpu_table *t, floe_errinfo *err);
void run_static(lane *L, floe_batch *b);

/* devices.cu */
bool device_failed(int device);
bool device_budget_fits(int device, uint64_t bytes); /* floe_gpu_set_budget's limit */
floe_status device_status(int device, const char *table, floe_status st, floe_errinfo *err);
void fault_if_due(int device, cudaStream_t stream);
void mark_failed(int device, cudaError_t e, const char *how);
bool peer_reach(int from, int to);
floe_status peer_open(int from, int to, floe_errinfo *err);
bool pinned(const void *p, size_t bytes);
bool pinned_add(const void *p, size_t bytes);
void pinned_remove(const void *p);
bool sticky(cudaError_t e);
floe_status unavailable(int device, floe_errinfo *err);

#endif
