/*
 * backend_gpu.cu - the GPU backend (see backend_gpu.h): tables in device
 * memory, batches through a pipeline of pinned staging buffers.
 *
 * Each table has one or more lanes (floe_backend_lanes): pipelines side by
 * side over the one device table, each fed by its own submitters, with its
 * own worker thread and STAGES stages (struct lane).  What follows is one
 * lane's; the lanes meet only at the table's klock, under which each piece's
 * kernels are enqueued on the one kernel stream, and a growth, a scan or a
 * TREE batch runs.  A batch is cut into
 * pieces of at most PIECE_MAX keys (applying consecutive pieces in order is
 * applying the batch in order, so the semantics hold), and batches queued
 * behind one that do the same join its last piece (up to PIECE_SEGS of
 * them: one launch for many requests).  Each piece takes a stage: its keys
 * go to the device on the stage's copy stream (straight from the batches
 * where they are pinned, else through the stage's pinned buffer), the
 * table's kernels run on the table's kernel stream (which waits for the
 * copy with an event, and so runs the pieces one after another in
 * submission order), and the last of them writes every batch's answers
 * where they go, with their counts (gpu_answers_out: the worker never reads
 * a piece's answers).  A piece of several segments comes in by one kernel
 * too (gpu_keys_in), so a piece costs a handful of driver calls, whatever
 * its batches: those calls were the worker's time per piece.  With three
 * stages, copy-in of piece k+1 overlaps the kernels of piece k.  The worker
 * retires stages in order, so a lane's batches complete in submission order.
 * Nothing synchronises the device on this path: the worker waits on events
 * only.
 *
 * MAP inserts are deduplicated on the host (tables/dedup.c) so that the
 * device sees distinct keys, and later occurrences are answered with the
 * CPU engine's own settle function.  SET inserts and erases resolve
 * first occurrences on the device (iceberg_gpu.cu).
 *
 * Growth: before an insert batch the worker checks an upper bound on the
 * fill (every lane's keys in flight counted) and, past max_fill, drains its
 * lane and rebuilds on the device.  A key that still comes back FULL halts
 * its lane on the device (every later piece of the lane in flight answers
 * GPU_SKIPPED and changes nothing); the worker then drains, rebuilds at
 * twice the size (unless another lane grew the table meanwhile), retries
 * the FULL keys, and runs the skipped pieces again, in their order.  A
 * rebuild waits until no other lane has a batch under way
 * (exclusive_begin), so a batch's ids are of one generation, or looked up
 * again after its own lane's growth.
 *
 * SCAN, STATS, REBUILD and SAVE drain the lane and, under klock, wait for
 * every kernel enqueued, then run on the worker.
 *
 * floe_table_submit has checked every batch (the door, tables/backend.h):
 * the worker completes a refused one in its turn, after draining what came
 * before it, and otherwise only asserts what the door guarantees.
 *
 * TREE tables (tree_gpu.cu) have one lane and run one batch at a time on it, in
 * pieces through one pinned staging area: their engine reads a count back
 * from the device in the middle of every batch anyway.  A TREE that grows
 * grows inside its engine (gpu_tree_insert), which keeps its generation.
 * A CUDA error fails the batch it hit with FLOE_ERR_INTERNAL and the CUDA
 * message; the daemon logs it.  One that ruins the device's context (a
 * sticky error: "devices" below) answers FLOE_ERR_UNAVAILABLE, and so does
 * every later batch, create or load on that device, without touching it.
 */
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
#include "dedup.h"
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
    uint8_t *out_res;
    uint64_t *out_ids;
    void *out_vout;
    size_t at, m; /* the segment's keys on the device: [at, at + m) of the stage's buffers */
};

struct stage {
    cudaStream_t copy;
    /* h0 -> in: keys in; k0 -> k: kernels; o0 -> done: answers back (a MAP insert's); a direct
     * piece's kernels end with its answers written out: k0 -> done (timing events) */
    cudaEvent_t h0_ev, in_ev, k0_ev, k_ev, o0_ev, done_ev;
    bool timed;        /* every event above was recorded (one piece in TIME_EVERY) */
    uint64_t stage_ns; /* the worker's time setting the piece up and enqueueing it */
    size_t cap;        /* keys */
    /* pinned host */
    uint64_t *h_keys, *h_ids;
    uint8_t *h_res;
    void *h_vin, *h_vout;
    /* device */
    uint64_t *d_keys, *d_ids;
    uint8_t *d_res;
    void *d_vin, *d_vout;
    seg_io io[PIECE_SEGS];
    bool direct;             /* one answer per key from the device (all but MAP inserts) */
    bool small;              /* one kernel on pinned staging, no copies (launch_small) */
    gpu_tally *d_tally;      /* direct pieces: their answers counted on the device ... */
    uint64_t (*h_counts)[5]; /* ... and written here with them (pinned, 5 per segment) */
    /* MAP inserts: first occurrences (host) */
    uint32_t *rep, *src, *uniq;
    size_t distinct, m; /* keys sent to the device */
    piece p;
    uint64_t gen; /* the table's generation when its kernels were enqueued */
    floe_status st;
    floe_errinfo err;
};

static_assert(FLOE_ABSENT < 5 && FLOE_PRESENT < 5 && FLOE_INSERTED < 5 && FLOE_FULL < 5 && FLOE_ERASED < 5,
              "gpu_tally counts answers 0..4");

/* A TREE table's staging: pinned host and device buffers for one piece. */
struct tree_stage {
    size_t cap; /* vectors */
    uint32_t *h_vec, *d_vec;
    uint64_t *h_ids, *d_ids;
    uint8_t *h_res, *d_res;
    /* states by parent: each state's first change (cap + 1), and the changes (ch_cap bytes) */
    uint32_t *h_first, *d_first;
    uint8_t *h_ch, *d_ch;
    size_t ch_cap;
};

/* An ORDERED table's device buffers for a piece of a batch (keys, values,
 * answers, neighbours), grown as pieces need. */
struct ord_stage {
    uint64_t *d_keys, *d_found;
    uint8_t *d_res;
    unsigned char *d_vals, *d_vout;
    size_t cap;
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
    pthread_cond_t cv;         /* signalled under t->lock */
    queue q;                   /* submitted batches, under t->lock */
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
    tree_stage ts;
    ord_stage os;
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

static uint64_t relaxed(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static void relaxed_set(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
}

/* Keys of every lane's insert pieces in flight. */
static uint64_t inflight_all(const gpu_table *t)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < t->nlanes; i++)
        n += relaxed(&t->lanes[i].inflight_keys);
    return n;
}

/* ---- stages ------------------------------------------------------------------------------------- */

static const char *cuda_msg(cudaError_t e)
{
    return cudaGetErrorString(e);
}

static void stage_free_buffers(stage *s)
{
    cudaFreeHost(s->h_keys);
    cudaFreeHost(s->h_ids);
    cudaFreeHost(s->h_res);
    cudaFreeHost(s->h_vin);
    cudaFreeHost(s->h_vout);
    cudaFree(s->d_keys);
    cudaFree(s->d_ids);
    cudaFree(s->d_res);
    cudaFree(s->d_vin);
    cudaFree(s->d_vout);
    free(s->rep);
    free(s->src);
    free(s->uniq);
    s->h_keys = s->h_ids = s->d_keys = s->d_ids = NULL;
    s->h_res = s->d_res = NULL;
    s->h_vin = s->h_vout = s->d_vin = s->d_vout = NULL;
    s->rep = s->src = s->uniq = NULL;
    s->cap = 0;
}

/* Buffers for n keys (grown to a power of two, at most PIECE_MAX). */
static floe_status stage_reserve(stage *s, size_t n, uint32_t vb, floe_errinfo *err)
{
    if (n <= s->cap)
        return FLOE_OK;
    size_t cap = 4096;
    while (cap < n)
        cap <<= 1;
    stage_free_buffers(s);
    cudaError_t e = cudaHostAlloc(&s->h_keys, cap * 8, cudaHostAllocDefault);
    if (e == cudaSuccess)
        e = cudaHostAlloc(&s->h_ids, cap * 8, cudaHostAllocDefault);
    if (e == cudaSuccess)
        e = cudaHostAlloc(&s->h_res, cap, cudaHostAllocDefault);
    if (e == cudaSuccess)
        e = cudaMalloc(&s->d_keys, cap * 8);
    if (e == cudaSuccess)
        e = cudaMalloc(&s->d_ids, cap * 8);
    if (e == cudaSuccess)
        e = cudaMalloc(&s->d_res, cap);
    if (vb) {
        if (e == cudaSuccess)
            e = cudaHostAlloc(&s->h_vin, cap * vb, cudaHostAllocDefault);
        if (e == cudaSuccess)
            e = cudaHostAlloc(&s->h_vout, cap * vb, cudaHostAllocDefault);
        if (e == cudaSuccess)
            e = cudaMalloc(&s->d_vin, cap * vb);
        if (e == cudaSuccess)
            e = cudaMalloc(&s->d_vout, cap * vb);
        s->rep = (uint32_t *)malloc(cap * sizeof(uint32_t));
        s->src = (uint32_t *)malloc(cap * sizeof(uint32_t));
        s->uniq = (uint32_t *)malloc(cap * sizeof(uint32_t));
        if (e == cudaSuccess && (!s->rep || !s->src || !s->uniq))
            e = cudaErrorMemoryAllocation;
    }
    if (e != cudaSuccess) {
        stage_free_buffers(s);
        cudaGetLastError();
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "cannot allocate staging buffers for %zu keys: %s", cap,
                                cuda_msg(e));
    }
    s->cap = cap;
    return FLOE_OK;
}

/* The pinned host memory handed out by floe_backend_host_alloc, by every
 * GPU backend of the process (it is portable: any device's copies may use
 * it): looked up here instead of asking the driver, which costs a few
 * microseconds a call, four calls a piece. */
struct pinned_range {
    uintptr_t start, end;
};
static pthread_mutex_t pinned_lock = PTHREAD_MUTEX_INITIALIZER;
static pinned_range *pinned_ranges; /* sorted by start, disjoint */
static size_t pinned_n, pinned_cap;

static bool pinned_add(const void *p, size_t bytes)
{
    pthread_mutex_lock(&pinned_lock);
    bool ok = pinned_n < pinned_cap;
    if (!ok) {
        size_t cap = pinned_cap ? 2 * pinned_cap : 64;
        pinned_range *grown = (pinned_range *)realloc(pinned_ranges, cap * sizeof *grown);
        if ((ok = grown != NULL)) {
            pinned_ranges = grown;
            pinned_cap = cap;
        }
    }
    if (ok) {
        const uintptr_t start = (uintptr_t)p;
        size_t at = pinned_n;
        while (at > 0 && pinned_ranges[at - 1].start > start)
            at--;
        memmove(pinned_ranges + at + 1, pinned_ranges + at, (pinned_n - at) * sizeof *pinned_ranges);
        pinned_ranges[at].start = start;
        pinned_ranges[at].end = start + bytes;
        pinned_n++;
    }
    pthread_mutex_unlock(&pinned_lock);
    return ok;
}

static void pinned_remove(const void *p)
{
    pthread_mutex_lock(&pinned_lock);
    for (size_t i = 0; i < pinned_n; i++)
        if (pinned_ranges[i].start == (uintptr_t)p) {
            memmove(pinned_ranges + i, pinned_ranges + i + 1, (pinned_n - i - 1) * sizeof *pinned_ranges);
            pinned_n--;
            break;
        }
    pthread_mutex_unlock(&pinned_lock);
}

/* Whether [p, p + bytes) lies in pinned memory of floe_backend_host_alloc. */
static bool pinned(const void *p, size_t bytes)
{
    if (!p)
        return false;
    const uintptr_t a = (uintptr_t)p;
    pthread_mutex_lock(&pinned_lock);
    size_t lo = 0, hi = pinned_n; /* the last range that starts at or before a */
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        if (pinned_ranges[mid].start <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    const bool in = lo > 0 && a + bytes <= pinned_ranges[lo - 1].end;
    pthread_mutex_unlock(&pinned_lock);
    return in;
}

/* ---- devices: whose is current, and whether each still works --------------------------------------
 * cudaSetDevice is per thread.  A lane's thread makes its table's device
 * current once, then runs its callers' done() functions, which may call
 * into another backend (floed's batcher allocates the next batch's pinned
 * buffers there, on the first part's device); and floed's io threads call
 * host_alloc and meminfo for any device.  So the functions of this file
 * that other threads call keep the caller's device (device_scope), and a
 * lane makes its own current again after every done() (complete).  A lane
 * of a part on device 1 that went on with device 0 current allocated its
 * next scratch on device 0 and faulted there (an illegal address). */

typedef CUresult (*ctx_get_fn)(CUcontext *);
typedef CUresult (*ctx_set_fn)(CUcontext);
static ctx_get_fn ctx_get;
static ctx_set_fn ctx_set;
static pthread_once_t ctx_once = PTHREAD_ONCE_INIT;

static void ctx_init(void)
{
    void *g = NULL, *s = NULL;
    cudaDriverEntryPointQueryResult q1, q2;
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &g, 4000, cudaEnableDefault, &q1) == cudaSuccess &&
        cudaGetDriverEntryPointByVersion("cuCtxSetCurrent", &s, 4000, cudaEnableDefault, &q2) == cudaSuccess &&
        q1 == cudaDriverEntryPointSuccess && q2 == cudaDriverEntryPointSuccess) {
        ctx_get = (ctx_get_fn)g;
        ctx_set = (ctx_set_fn)s;
    }
    cudaGetLastError();
}

/* Makes `device` current for the scope's life, then gives the thread back
 * the context it had (none, if it had none: cudaSetDevice to a remembered
 * device would create one on a device floed was not asked to use). */
struct device_scope {
    CUcontext saved = NULL;
    bool restore = false;
    cudaError_t e;
    explicit device_scope(int device)
    {
        pthread_once(&ctx_once, ctx_init);
        restore = ctx_get && ctx_get(&saved) == CUDA_SUCCESS;
        e = cudaSetDevice(device);
    }
    ~device_scope()
    {
        if (restore)
            ctx_set(saved);
    }
    device_scope(const device_scope &) = delete;
    device_scope &operator=(const device_scope &) = delete;
};

#define GPU_DEVICES 64 /* devices whose health is kept; a device id past it is never marked failed */

/* A device whose context a sticky error has ruined: every later CUDA call
 * on it fails, for the rest of the process. */
struct device_health {
    int failed;               /* __atomic; set once, after why */
    unsigned fault_in;        /* __atomic; tests: the batch that faults on purpose, counted down (0: none) */
    char why[FLOE_ERROR_MAX]; /* CUDA's message and the table that met it first */
};
static device_health health[GPU_DEVICES];
static pthread_mutex_t health_lock = PTHREAD_MUTEX_INITIALIZER;

/* Errors after which the context cannot be used again (CUDA's "sticky"
 * errors: the process must end to use the device again). */
static bool sticky(cudaError_t e)
{
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorContained:
    case cudaErrorDevicesUnavailable:
    case cudaErrorContextIsDestroyed:
    case cudaErrorExternalDevice:
        return true;
    default:
        return false;
    }
}

static bool device_failed(int device)
{
    return device >= 0 && device < GPU_DEVICES && __atomic_load_n(&health[device].failed, __ATOMIC_ACQUIRE);
}

/* The status of a request that needs a failed device. */
static floe_status unavailable(int device, floe_errinfo *err)
{
    return floe_errinfo_set(err, FLOE_ERR_UNAVAILABLE,
                            "GPU %d has failed (%s): its tables cannot be used until the server restarts", device,
                            health[device].why);
}

/* Records that device failed with e (found as `how` says), the first time. */
static void mark_failed(int device, cudaError_t e, const char *how)
{
    pthread_mutex_lock(&health_lock);
    if (!health[device].failed) {
        snprintf(health[device].why, sizeof health[device].why, "%s, %s", cudaGetErrorString(e), how);
        __atomic_store_n(&health[device].failed, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&health_lock);
}

/* After a CUDA failure on `device` (current): whether its context is gone,
 * recorded (with the table that met it) the first time. */
static bool device_check(int device, const char *table)
{
    if (device < 0 || device >= GPU_DEVICES)
        return false;
    if (device_failed(device))
        return true;
    const cudaError_t e = cudaDeviceSynchronize(); /* a failure's path: waiting costs nothing that matters */
    if (!sticky(e)) {
        cudaGetLastError();
        return false;
    }
    char how[FLOE_NAME_MAX + 32];
    snprintf(how, sizeof how, "first met by table %s", table && *table ? table : "(none)");
    mark_failed(device, e, how);
    return true;
}

/* A failed operation's status: FLOE_ERR_UNAVAILABLE if its device's context
 * is gone (whatever the call that met it said: a cudaMalloc then reads as
 * out of memory), else st as it was. */
static floe_status device_status(int device, const char *table, floe_status st, floe_errinfo *err)
{
    if ((st == FLOE_ERR_INTERNAL || st == FLOE_ERR_FULL) && device_check(device, table))
        return unavailable(device, err);
    return st;
}

/* Tests: a store through an address no allocation covers, as a bug would make. */
__global__ void k_fault(unsigned *p)
{
    *p = 1;
}

/* Whether the batch now begun on `device` is the one armed to fault (floe_gpu_fault_arm). */
static bool fault_due(int device)
{
    if (device < 0 || device >= GPU_DEVICES)
        return false;
    unsigned n = __atomic_load_n(&health[device].fault_in, __ATOMIC_RELAXED);
    while (n > 0 && !__atomic_compare_exchange_n(&health[device].fault_in, &n, n - 1, false, __ATOMIC_RELAXED,
                                                 __ATOMIC_RELAXED)) {
    }
    return n == 1;
}

/* ---- table state ------------------------------------------------------------------------------------ */

static uint64_t table_slots(const gpu_table *t)
{
    return gpu_iceberg_slots(t->ice);
}

/* A grow table rebuilds before its keys would pass this many. */
static double fill_limit(const gpu_table *t)
{
    return t->base.spec.max_fill * (double)table_slots(t);
}

/* Exact counters from the device (after a load or rebuild; klock held). */
static floe_status recount(gpu_table *t, floe_errinfo *err)
{
    uint64_t used[3], tomb;
    floe_status st = gpu_iceberg_count(t->ice, used, &tomb, err);
    if (st == FLOE_OK) {
        relaxed_set(&t->used, used[0] + used[1] + used[2]);
        relaxed_set(&t->tombstones, tomb);
    }
    return st;
}

/* Waits for every kernel enqueued on the table (klock held: no lane enqueues more meanwhile). */
static floe_status quiesce(gpu_table *t, floe_errinfo *err)
{
    cudaError_t e = cudaStreamSynchronize(t->ks);
    if (e != cudaSuccess)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "waiting for the table's kernels: %s", cudaGetErrorString(e));
    return FLOE_OK;
}

/* Rebuild at 2^addr_bits primary buckets (0: the current size); klock held. */
static floe_status rebuild(gpu_table *t, uint32_t addr_bits, floe_errinfo *err)
{
    uint32_t three = 0; /* a SET or MAP doubles */
    if (addr_bits == 0) {
        addr_bits = gpu_iceberg_addr_bits(t->ice);
        three = gpu_iceberg_three(t->ice);
    }
    floe_status st = iceberg_size_check(t->base.spec.key_bits, addr_bits, three, err);
    if (st == FLOE_OK)
        st = quiesce(t, err); /* other lanes' pieces */
    if (st == FLOE_OK)
        st = gpu_iceberg_rebuild(t->ice, &addr_bits, &three, err);
    if (st != FLOE_OK)
        return st;
    t->generation++;
    return recount(t, err);
}

/* The size to grow to: twice the slots, unless tombstones hold most of the
 * occupied space (then the same size reclaims it): the CPU engine's rule. */
static uint32_t grow_target(const gpu_table *t)
{
    uint64_t keys = t->used - t->tombstones;
    uint32_t a = gpu_iceberg_addr_bits(t->ice);
    if ((double)keys < t->base.spec.max_fill * 0.5 * (double)table_slots(t))
        return a;
    return a + 1;
}

/* ---- the pipeline ------------------------------------------------------------------------------------ */

/* Hands b to its caller (on a lane's thread).  A failure that ruined the
 * device's context answers FLOE_ERR_UNAVAILABLE, whatever the call that met
 * it said.  done() may make another device current (see "devices" above):
 * the lane's own is made current again. */
static void complete(gpu_table *t, floe_batch *b)
{
    const int device = t->be->device;
    if (b->status == FLOE_OK)
        floe_errinfo_clear(&b->error);
    else
        b->status = device_status(device, t->base.spec.name, b->status, &b->error);
    if (b->done)
        b->done(b);
    cudaSetDevice(device);
}

static void fail_batch(floe_batch *b, floe_status st, const floe_errinfo *err)
{
    if (b->status == FLOE_OK) {
        b->status = st;
        b->error = *err;
    }
}

/* A small SET insert or find (E2's requests): one kernel reads the keys
 * and writes the answers (and ids) in pinned host memory, then one event:
 * no copy on the device and one launch instead of a dozen.  A batch alone
 * in its piece is read and answered where it lies if that is pinned (a
 * merged batch is); otherwise the keys go through the stage's pinned
 * buffers, a copy each way on the host. */
static void launch_small(lane *L, stage *s)
{
    gpu_table *t = L->t;
    const piece &p = s->p;
    floe_batch *b = p.seg[0].b;
    const bool want_ids = (b->flags & FLOE_BATCH_WANT_IDS) != 0;
    size_t m = 0;
    for (unsigned i = 0; i < p.nseg; i++) {
        const segment &g = p.seg[i];
        const uint64_t *keys = g.b->keys + g.off;
        uint8_t *res = g.b->results + g.off;
        uint64_t *ids = want_ids ? g.b->ids + g.off : NULL;
        const bool alone = p.nseg == 1; /* else the kernel's arrays are the stage's, one after another */
        seg_io &io = s->io[i];
        io = {s->h_keys + m, s->h_res + m, want_ids ? s->h_ids + m : NULL, NULL, m, g.n};
        if (alone && pinned(keys, g.n * 8))
            io.in_keys = keys;
        else
            memcpy(s->h_keys + m, keys, g.n * 8);
        if (alone && pinned(res, g.n))
            io.out_res = res;
        if (alone && ids && pinned(ids, g.n * 8))
            io.out_ids = ids;
        m += g.n;
    }
    s->m = m;
    if (b->op == FLOE_OP_INSERT)
        relaxed_set(&L->inflight_keys, L->inflight_keys + m);
    const bool timing = L->launched++ % TIME_EVERY == 0;
    pthread_mutex_lock(&t->klock);
    s->gen = t->generation;
    gpu_iceberg_lane(t->ice, L->index);
    cudaError_t e = timing ? cudaEventRecord(s->k0_ev, t->ks) : cudaSuccess;
    if (e != cudaSuccess)
        s->st = floe_errinfo_set(&s->err, FLOE_ERR_INTERNAL, "staging a batch: %s", cuda_msg(e));
    else
        s->st = gpu_iceberg_small(t->ice, b->op == FLOE_OP_INSERT, s->io[0].in_keys, m, s->io[0].out_res,
                                  s->io[0].out_ids, (gpu_stream)t->ks, &s->err);
    if (s->st == FLOE_OK) {
        e = timing ? cudaEventRecord(s->k_ev, t->ks) : cudaSuccess;
        if (e == cudaSuccess)
            e = cudaEventRecord(s->done_ev, t->ks);
        if (e != cudaSuccess)
            s->st = floe_errinfo_set(&s->err, FLOE_ERR_INTERNAL, "running a batch: %s", cuda_msg(e));
        else
            s->timed = timing;
    }
    pthread_mutex_unlock(&t->klock);
}

/* Where each segment's keys come from and its answers go: the device reads and writes them there. */
static void segments_of(const stage *s, gpu_segments *segs)
{
    segs->n = s->p.nseg;
    for (unsigned i = 0; i < s->p.nseg; i++) {
        const seg_io &io = s->io[i];
        segs->end[i] = (uint32_t)(io.at + io.m);
        segs->keys[i] = io.in_keys;
        segs->res[i] = io.out_res;
        segs->ids[i] = io.out_ids;
        segs->vout[i] = io.out_vout;
    }
}

/* The kernels of stage s's piece (its keys on their way in on the stage's
 * copy stream), on the table's kernel stream; klock held. */
static void enqueue_kernels(lane *L, stage *s, bool timing)
{
    gpu_table *t = L->t;
    const piece &p = s->p;
    floe_batch *b = p.seg[0].b;
    const bool want_ids = (b->flags & FLOE_BATCH_WANT_IDS) != 0;
    const bool want_values =
        t->vb && (b->flags & FLOE_BATCH_WANT_VALUES) != 0 && floe_op_has(b->op, FLOE_OPF_VALUES_OUT);
    const bool overwrite = (b->flags & FLOE_BATCH_OVERWRITE) != 0;
    const bool direct = s->direct;
    const uint32_t vb = t->vb;
    const size_t m = s->m;
    gpu_stream ks = (gpu_stream)t->ks;
    s->gen = t->generation;
    gpu_iceberg_lane(t->ice, L->index);
    cudaError_t e = cudaStreamWaitEvent(t->ks, s->in_ev, 0);
    if (e == cudaSuccess && timing) /* the kernels start when the copy is in and the previous piece's are done */
        e = cudaEventRecord(s->k0_ev, t->ks);
    if (e != cudaSuccess) {
        s->st = floe_errinfo_set(&s->err, FLOE_ERR_INTERNAL, "staging a batch: %s", cuda_msg(e));
        return;
    }
    floe_status st;
    gpu_segments segs;
    segments_of(s, &segs);
    uint64_t *d_ids = want_ids ? s->d_ids : NULL;
    void *d_vout = want_values ? s->d_vout : NULL;
    switch (b->op) {
    case FLOE_OP_INSERT:
        st = vb ? gpu_iceberg_put_map(t->ice, s->d_keys, s->d_vin, m, overwrite, s->d_res, d_ids, d_vout, ks, &s->err)
                : gpu_iceberg_put(t->ice, s->d_keys, m, s->d_res, d_ids, 0, ks, &s->err);
        break;
    case FLOE_OP_FIND:
        st = gpu_iceberg_find(t->ice, s->d_keys, m, s->d_res, d_ids, d_vout, ks, &s->err);
        break;
    default:
        st = gpu_iceberg_erase(t->ice, s->d_keys, m, s->d_res, ks, &s->err);
        break;
    }
    if (st == FLOE_OK && direct) /* answers and counts written where they go, by one kernel */
        st = gpu_answers_out(s->d_res, d_ids, d_vout, vb, &segs, s->d_tally, s->h_counts, ks, &s->err);
    if (st != FLOE_OK) {
        s->st = st;
        return;
    }
    if (direct) {
        e = cudaEventRecord(s->done_ev, t->ks);
    } else { /* a MAP insert's answers, per distinct key, come back into staging */
        const seg_io &io = s->io[0];
        e = cudaEventRecord(s->k_ev, t->ks);
        if (e == cudaSuccess)
            e = cudaStreamWaitEvent(s->copy, s->k_ev, 0);
        if (e == cudaSuccess && timing)
            e = cudaEventRecord(s->o0_ev, s->copy);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(io.out_res, s->d_res, io.m, cudaMemcpyDeviceToHost, s->copy);
        if (e == cudaSuccess && d_ids)
            e = cudaMemcpyAsync(io.out_ids, s->d_ids, io.m * 8, cudaMemcpyDeviceToHost, s->copy);
        if (e == cudaSuccess && d_vout)
            e = cudaMemcpyAsync(io.out_vout, s->d_vout, io.m * vb, cudaMemcpyDeviceToHost, s->copy);
        if (e == cudaSuccess)
            e = cudaEventRecord(s->done_ev, s->copy);
    }
    if (e != cudaSuccess)
        s->st = floe_errinfo_set(&s->err, FLOE_ERR_INTERNAL, "running a batch: %s", cuda_msg(e));
    else
        s->timed = timing;
}

/* Stages a piece and enqueues its copies and kernels.  Its segments share
 * the op and flags (join_queued). */
static void enqueue_piece(lane *L, stage *s, const piece &p)
{
    gpu_table *t = L->t;
    floe_batch *b = p.seg[0].b;
    const bool want_ids = (b->flags & FLOE_BATCH_WANT_IDS) != 0;
    /* want_values means nothing to an erase (the door lets it through without values_out) */
    const bool want_values =
        t->vb && (b->flags & FLOE_BATCH_WANT_VALUES) != 0 && floe_op_has(b->op, FLOE_OPF_VALUES_OUT);
    const bool overwrite = (b->flags & FLOE_BATCH_OVERWRITE) != 0;
    const uint32_t vb = t->vb;
    s->p = p;
    s->st = FLOE_OK;
    s->timed = false;

    floe_status st = stage_reserve(s, p.n, vb, &s->err);
    /* a MAP insert's device answers are per distinct key: staged, then scattered (retire); it is
     * a piece of one segment */
    const bool direct = !(b->op == FLOE_OP_INSERT && vb);
    s->direct = direct;
    s->small = st == FLOE_OK && !vb && (b->op == FLOE_OP_INSERT || b->op == FLOE_OP_FIND) && p.n <= GPU_SMALL_KEYS;
    if (s->small) {
        launch_small(L, s);
        return;
    }
    size_t m = 0; /* keys sent to the device */
    if (st == FLOE_OK && !direct) {
        const segment &g = p.seg[0];
        const uint64_t *keys = b->keys + g.off;
        /* first occurrences only; each stores its own value, or the last one with overwrite */
        st = floe_dedup(t->be->pool, keys, g.n, s->rep, &s->distinct, &s->err);
        if (st == FLOE_OK) {
            const unsigned char *vin = (const unsigned char *)b->values + g.off * vb;
            if (overwrite)
                floe_dedup_value_src(s->rep, g.n, s->src);
            for (size_t i = 0; i < g.n; i++) {
                if (s->rep[i] != i)
                    continue;
                s->uniq[m] = (uint32_t)i;
                s->h_keys[m] = keys[i];
                memcpy((unsigned char *)s->h_vin + m * vb, vin + (size_t)(overwrite ? s->src[i] : i) * vb, vb);
                m++;
            }
        }
        s->io[0] = {s->h_keys, s->h_res, want_ids ? s->h_ids : NULL, want_values ? s->h_vout : NULL, 0, m};
    }
    for (unsigned i = 0; st == FLOE_OK && direct && i < p.nseg; i++) {
        const segment &g = p.seg[i];
        const uint64_t *keys = g.b->keys + g.off;
        seg_io &io = s->io[i];
        io.at = m;
        io.m = g.n;
        io.in_keys = pinned(keys, g.n * 8) ? keys : s->h_keys + m;
        if (io.in_keys != keys)
            floe_pool_copy(t->be->pool, s->h_keys + m, keys, g.n * 8);
        io.out_res = pinned(g.b->results + g.off, g.n) ? g.b->results + g.off : s->h_res + m;
        io.out_ids = !want_ids ? NULL : pinned(g.b->ids + g.off, g.n * 8) ? g.b->ids + g.off : s->h_ids + m;
        unsigned char *vout = want_values ? (unsigned char *)g.b->values_out + g.off * vb : NULL;
        io.out_vout = !want_values ? NULL : pinned(vout, g.n * vb) ? (void *)vout : (unsigned char *)s->h_vout + m * vb;
        m += g.n;
    }
    s->m = m;
    if (b->op == FLOE_OP_INSERT)
        relaxed_set(&L->inflight_keys, L->inflight_keys + m);
    if (st != FLOE_OK) {
        s->st = st;
        return;
    }

    gpu_segments segs;
    segments_of(s, &segs);
    const bool timing = L->launched++ % TIME_EVERY == 0;
    cudaError_t e = timing ? cudaEventRecord(s->h0_ev, s->copy) : cudaSuccess;
    /* several segments: one launch for all; one segment: the copy engine */
    if (e == cudaSuccess && direct && p.nseg > 1)
        st = gpu_keys_in(s->d_keys, &segs, (gpu_stream)s->copy, &s->err);
    else if (e == cudaSuccess)
        e = cudaMemcpyAsync(s->d_keys, s->io[0].in_keys, s->io[0].m * 8, cudaMemcpyHostToDevice, s->copy);
    if (st == FLOE_OK && e == cudaSuccess && !direct)
        e = cudaMemcpyAsync(s->d_vin, s->h_vin, m * vb, cudaMemcpyHostToDevice, s->copy);
    if (st == FLOE_OK && e == cudaSuccess)
        e = cudaEventRecord(s->in_ev, s->copy);
    if (st != FLOE_OK || e != cudaSuccess) {
        s->st = st != FLOE_OK ? st : floe_errinfo_set(&s->err, FLOE_ERR_INTERNAL, "staging a batch: %s", cuda_msg(e));
        return;
    }
    pthread_mutex_lock(&t->klock);
    enqueue_kernels(L, s, timing);
    pthread_mutex_unlock(&t->klock);
}

/* Launches a piece on the stage taken for it (launch_next): the worker's time for it is stage_in. */
static void launch(lane *L, const piece &p)
{
    const uint64_t t0 = floe_now_ns();
    stage *s = &L->stg[(L->head + L->count - 1) % STAGES];
    enqueue_piece(L, s, p);
    s->stage_ns = floe_now_ns() - t0;
}

/* Adds a finished stage's times to its lane's stage timers (klock held). */
static void stage_account(lane *L, const stage *s)
{
    const uint64_t n = s->m;
    floe_stage_add(&L->stage[FLOE_STAGE_STAGE_IN], s->p.n, s->stage_ns);
    if (!s->timed)
        return;
    /* a small piece: its kernel only; a direct one: its kernels end with the answers written out */
    const cudaEvent_t from[3] = {s->h0_ev, s->k0_ev, s->o0_ev};
    const cudaEvent_t to[3] = {s->in_ev, s->direct && !s->small ? s->done_ev : s->k_ev, s->done_ev};
    const int which[3] = {FLOE_STAGE_H2D, FLOE_STAGE_KERNEL, FLOE_STAGE_D2H};
    for (int i = s->small ? 1 : 0; i < (s->small ? 2 : s->direct ? 2 : 3); i++) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, from[i], to[i]) == cudaSuccess) {
            floe_stage_time *st = &L->stage[which[i]]; /* for TIME_EVERY pieces of this one's size */
            floe_stage_add(st, n * TIME_EVERY, (uint64_t)((double)ms * 1e6) * TIME_EVERY);
            st->count += TIME_EVERY - 1;
        } else {
            cudaGetLastError();
        }
    }
}

/* Waits for a stage's work.  A launch that failed halfway may have left
 * copies or kernels queued: wait for the streams, so the stage's buffers
 * are free before it is used again. */
static floe_status stage_wait(gpu_table *t, stage *s)
{
    if (s->st != FLOE_OK) {
        cudaStreamSynchronize(t->ks);
        cudaStreamSynchronize(s->copy);
        return s->st;
    }
    cudaError_t e = cudaEventSynchronize(s->done_ev);
    if (e != cudaSuccess)
        s->st = floe_errinfo_set(&s->err, FLOE_ERR_INTERNAL, "batch on the GPU: %s", cuda_msg(e));
    return s->st;
}

/* Runs m keys (already in s->h_keys, values in s->h_vin) through one
 * operation of lane L synchronously on the table's stream: for retries
 * after growth and ids looked up again (klock held). */
static floe_status run_now(lane *L, stage *s, floe_op op, size_t m, bool ids, bool overwrite, bool values,
                           floe_errinfo *err)
{
    gpu_table *t = L->t;
    gpu_stream ks = (gpu_stream)t->ks;
    gpu_iceberg_lane(t->ice, L->index); /* its own halt flag (clear): another's would skip the keys */
    const uint32_t vb = t->vb;
    cudaError_t e = cudaMemcpyAsync(s->d_keys, s->h_keys, m * 8, cudaMemcpyHostToDevice, t->ks);
    if (e == cudaSuccess && op == FLOE_OP_INSERT && vb)
        e = cudaMemcpyAsync(s->d_vin, s->h_vin, m * vb, cudaMemcpyHostToDevice, t->ks);
    if (e != cudaSuccess)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "staging a retry: %s", cuda_msg(e));
    floe_status st;
    if (op == FLOE_OP_INSERT)
        st = vb ? gpu_iceberg_put_map(t->ice, s->d_keys, s->d_vin, m, overwrite, s->d_res, ids ? s->d_ids : NULL,
                                      values ? s->d_vout : NULL, ks, err)
                : gpu_iceberg_put(t->ice, s->d_keys, m, s->d_res, ids ? s->d_ids : NULL, 0, ks, err);
    else
        st = gpu_iceberg_find(t->ice, s->d_keys, m, s->d_res, ids ? s->d_ids : NULL, NULL, ks, err);
    if (st != FLOE_OK)
        return st;
    e = cudaMemcpyAsync(s->h_res, s->d_res, m, cudaMemcpyDeviceToHost, t->ks);
    if (e == cudaSuccess && ids)
        e = cudaMemcpyAsync(s->h_ids, s->d_ids, m * 8, cudaMemcpyDeviceToHost, t->ks);
    if (e == cudaSuccess && values)
        e = cudaMemcpyAsync(s->h_vout, s->d_vout, m * vb, cudaMemcpyDeviceToHost, t->ks);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(t->ks);
    if (e != cudaSuccess)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "retry on the GPU: %s", cuda_msg(e));
    return FLOE_OK;
}

/* ---- growth among lanes ----------------------------------------------------------------------------
 * A rebuild gives every key a new id, so it runs while no other lane has a
 * batch under way: from taking a batch (take_batch) to retiring its last
 * piece, and while it has skipped pieces to run again, a lane is busy and
 * holds growth off.  The lane that grows (the holder) waits until every
 * other is idle or itself waiting to grow (its pieces taken back, it will
 * look its batch's ids up again when its turn comes), and a lane waits to
 * take a batch while another grows.  So the ids of a batch are of one
 * generation, or looked up again by its own lane with nothing of it in
 * flight, as with one lane. */
static bool busy(const lane *L)
{
    return !L->waiting && (L->count > 0 || L->cur || L->redo_at < L->nredo);
}

/* A change to what busy() reads (glock held): wakes a lane waiting to grow. */
static void lane_changed(gpu_table *t)
{
    if (t->holder)
        pthread_cond_broadcast(&t->gcv);
}

/* Makes lane L (nothing of it in flight) the one that grows, alone. */
static void exclusive_begin(lane *L)
{
    gpu_table *t = L->t;
    pthread_mutex_lock(&t->glock);
    L->waiting = true;
    pthread_cond_broadcast(&t->gcv);
    for (;;) {
        if (!t->holder)
            t->holder = L;
        bool others = false;
        for (unsigned i = 0; t->holder == L && i < t->nlanes; i++)
            others = others || (&t->lanes[i] != L && busy(&t->lanes[i]));
        if (t->holder == L && !others)
            break;
        pthread_cond_wait(&t->gcv, &t->glock);
    }
    L->waiting = false;
    pthread_mutex_unlock(&t->glock);
}

static void exclusive_end(lane *L)
{
    gpu_table *t = L->t;
    pthread_mutex_lock(&t->glock);
    t->holder = NULL;
    pthread_cond_broadcast(&t->gcv);
    pthread_mutex_unlock(&t->glock);
}

/* Stage s (retired, its results in h_res) had FULL keys on a grow table:
 * every piece of its lane in flight behind it was skipped.  Drain them into
 * the redo list, grow, and retry the FULL keys until none is left or the
 * table cannot grow.  If another lane grew the table since s ran, the keys
 * are first retried as it is. */
static floe_status grow_and_retry(lane *L, stage *s, floe_errinfo *err)
{
    gpu_table *t = L->t;
    piece later[2 * STAGES];
    unsigned nl = 0;
    for (unsigned k = 0; k < L->count; k++) { /* skipped (or failed): run them again after the retry */
        stage *q = &L->stg[(L->head + k) % STAGES];
        stage_wait(t, q);
        later[nl++] = q->p;
    }
    for (unsigned i = L->redo_at; i < L->nredo && nl < 2 * STAGES; i++)
        later[nl++] = L->redo[i]; /* the list only shrinks: at most STAGES - 1 pieces */
    pthread_mutex_lock(&t->glock);
    memcpy(L->redo, later, nl * sizeof *later);
    L->nredo = nl;
    L->redo_at = 0;
    L->head = (L->head + L->count) % STAGES;
    L->count = 0;
    lane_changed(t);
    pthread_mutex_unlock(&t->glock);
    relaxed_set(&L->inflight_keys, 0);

    floe_batch *b = s->p.seg[0].b; /* the segments share op and flags */
    const bool want_values = t->vb && (b->flags & FLOE_BATCH_WANT_VALUES) != 0;
    const bool overwrite = (b->flags & FLOE_BATCH_OVERWRITE) != 0;
    const uint32_t vb = t->vb;
    uint64_t *keys = (uint64_t *)malloc(s->m * 8);
    uint32_t *idx = (uint32_t *)malloc(s->m * sizeof *idx);
    uint8_t *res = (uint8_t *)malloc(s->m);
    unsigned char *vin = vb ? (unsigned char *)malloc(s->m * vb) : NULL;
    unsigned char *vout = vb ? (unsigned char *)malloc(s->m * vb) : NULL;
    floe_status st = FLOE_OK;
    if (!keys || !idx || !res || (vb && (!vin || !vout))) {
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory retrying FULL keys");
        goto out;
    }
    /* the stage's keys and answers, kept while its buffers serve the retries (values: a MAP
     * insert's, a piece of one segment) */
    for (unsigned i = 0; i < s->p.nseg; i++) {
        memcpy(keys + s->io[i].at, s->io[i].in_keys, s->io[i].m * 8);
        memcpy(res + s->io[i].at, s->io[i].out_res, s->io[i].m);
    }
    if (vb) {
        memcpy(vin, s->h_vin, s->m * vb);
        if (want_values)
            memcpy(vout, s->io[0].out_vout, s->m * vb);
    }
    exclusive_begin(L);
    pthread_mutex_lock(&t->klock);
    gpu_iceberg_lane(t->ice, L->index);
    st = gpu_iceberg_clear_halt(t->ice, (gpu_stream)t->ks, err);
    for (bool grown = t->generation != s->gen;; grown = false) {
        size_t nf = 0;
        for (size_t j = 0; j < s->m; j++)
            if (res[j] == FLOE_FULL)
                idx[nf++] = (uint32_t)j;
        if (nf == 0 || st != FLOE_OK)
            break;
        floe_errinfo ignored;
        if (!grown && rebuild(t, gpu_iceberg_addr_bits(t->ice) + 1, &ignored) != FLOE_OK)
            break; /* cannot grow: FULL stands */
        for (size_t k = 0; k < nf; k++) {
            s->h_keys[k] = keys[idx[k]];
            if (vb)
                memcpy((unsigned char *)s->h_vin + k * vb, vin + (size_t)idx[k] * vb, vb);
        }
        /* the FULL keys keep their order, so first occurrences stay first */
        st = run_now(L, s, FLOE_OP_INSERT, nf, false, overwrite, want_values, err);
        if (st != FLOE_OK)
            break;
        for (size_t k = 0; k < nf; k++) {
            res[idx[k]] = s->h_res[k];
            if (want_values)
                memcpy(vout + (size_t)idx[k] * vb, (unsigned char *)s->h_vout + k * vb, vb);
        }
        st = gpu_iceberg_clear_halt(t->ice, (gpu_stream)t->ks, err);
    }
    if (st == FLOE_OK)
        st = gpu_iceberg_clear_halt(t->ice, (gpu_stream)t->ks, err);
    pthread_mutex_unlock(&t->klock);
    exclusive_end(L);
    /* ids are looked up again for the whole batch once it is retired (refind_ids) */
    if (st == FLOE_OK) {
        for (unsigned i = 0; i < s->p.nseg; i++)
            memcpy(s->io[i].out_res, res + s->io[i].at, s->io[i].m);
        if (want_values)
            memcpy(s->io[0].out_vout, vout, s->m * vb);
    }
out:
    free(keys);
    free(idx);
    free(res);
    free(vin);
    free(vout);
    return st;
}

/* The table was rebuilt while b ran, so ids of keys [0, upto) may be stale:
 * look them all up again (through stage s of lane L, free now), as the CPU
 * engine does after growth.  klock held. */
static void refind_ids(lane *L, stage *s, floe_batch *b, size_t upto)
{
    gpu_table *t = L->t;
    floe_errinfo err;
    for (size_t at = 0; at < upto;) {
        size_t m = upto - at < PIECE_MAX ? upto - at : PIECE_MAX;
        floe_status st = stage_reserve(s, m, t->vb, &err);
        if (st == FLOE_OK) {
            memcpy(s->h_keys, b->keys + at, m * 8);
            st = run_now(L, s, FLOE_OP_FIND, m, true, false, false, &err);
        }
        if (st != FLOE_OK) {
            fail_batch(b, st, &err);
            return;
        }
        for (size_t j = 0; j < m; j++)
            b->ids[at + j] = s->h_res[j] == FLOE_PRESENT ? s->h_ids[j] : FLOE_NO_ID;
        at += m;
    }
}

#define OUT_CHUNK ((size_t)1 << 18) /* keys a task copies out of staging */

struct out_job {
    const seg_io *io;
    uint8_t *res;
    uint64_t *ids;
    unsigned char *vout;
    uint32_t vb;
    size_t n;
};

static void out_task(void *arg, size_t task)
{
    out_job *j = (out_job *)arg;
    const size_t at = task * OUT_CHUNK, m = j->n - at < OUT_CHUNK ? j->n - at : OUT_CHUNK;
    const seg_io *io = j->io; /* answers the device wrote straight into the batch need no copy */
    if (io->out_res != j->res)
        memcpy(j->res + at, io->out_res + at, m);
    if (j->ids && io->out_ids != j->ids)
        memcpy(j->ids + at, io->out_ids + at, m * 8);
    if (j->vout && io->out_vout != j->vout)
        memcpy(j->vout + at * j->vb, (const unsigned char *)io->out_vout + at * j->vb, m * j->vb);
}

/* Copies a segment's answers (one per key, no dedup) out of pinned staging,
 * spread over the backend's pool, unless the device wrote them straight
 * into the batch. */
static void answers_out(gpu_table *t, const seg_io *io, uint8_t *res, uint64_t *ids, unsigned char *vout, size_t n)
{
    if (io->out_res == res && (!ids || io->out_ids == ids) && (!vout || io->out_vout == vout))
        return;
    out_job j = {io, res, ids, vout, t->vb, n};
    const size_t tasks = (n + OUT_CHUNK - 1) / OUT_CHUNK;
    if (tasks < 2)
        out_task(&j, 0);
    else
        floe_pool_run(t->be->pool, tasks, out_task, &j);
}

/* Whether some key of the stage's piece came back FULL. */
static bool stage_full(const stage *s)
{
    if (!s->direct || s->small) /* answers counted on the host: in one array (io[0]'s and on) */
        return memchr(s->io[0].out_res, FLOE_FULL, s->m) != NULL;
    for (unsigned i = 0; i < s->p.nseg; i++)
        if (s->h_counts[i][FLOE_FULL])
            return true;
    return false;
}

/* Hands segment i's answers to its batch: copied out of staging (a MAP
 * insert's scattered and settled), counted (also into *piece_counts). */
static void segment_out(gpu_table *t, const stage *s, unsigned i, bool retried, floe_answer_counts *piece_counts)
{
    const segment &g = s->p.seg[i];
    floe_batch *b = g.b;
    const bool want_ids = (b->flags & FLOE_BATCH_WANT_IDS) != 0;
    const bool want_values =
        t->vb && (b->flags & FLOE_BATCH_WANT_VALUES) != 0 && floe_op_has(b->op, FLOE_OPF_VALUES_OUT);
    const uint32_t vb = t->vb;
    uint8_t *res = b->results + g.off;
    uint64_t *ids = want_ids ? b->ids + g.off : NULL;
    unsigned char *vout = want_values ? (unsigned char *)b->values_out + g.off * vb : NULL;
    floe_answer_counts c;
    if (!s->direct) { /* scatter the first occurrences' answers, then settle the rest */
        for (size_t j = 0; j < s->m; j++) {
            size_t k = s->uniq[j];
            res[k] = s->h_res[j];
            if (ids)
                ids[k] = s->h_ids[j];
            if (vout)
                memcpy(vout + k * vb, (unsigned char *)s->h_vout + j * vb, vb);
        }
        floe_dedup_settle(s->rep, g.n, s->distinct, vb, (b->flags & FLOE_BATCH_OVERWRITE) != 0,
                          (const unsigned char *)b->values + g.off * vb, s->src, res, ids, vout);
        floe_answer_counts_tally(&c, res, g.n);
    } else {
        answers_out(t, &s->io[i], res, ids, vout, g.n);
        if (retried || s->small) /* FULL keys retried after growth: the answers differ from the device's counts */
            floe_answer_counts_tally(&c, res, g.n);
        else
            floe_answer_counts_of(&c, s->h_counts[i]); /* as the device counted them */
    }
    b->counts.inserted += c.inserted;
    b->counts.present += c.present;
    b->counts.absent += c.absent;
    b->counts.full += c.full;
    b->counts.erased += c.erased;
    piece_counts->inserted += c.inserted;
    piece_counts->erased += c.erased;
}

/* Hands the oldest stage of lane L's answers to its batches (waits for them). */
static void retire(lane *L)
{
    gpu_table *t = L->t;
    stage *s = &L->stg[L->head];
    floe_status st = stage_wait(t, s);
    pthread_mutex_lock(&t->glock);
    L->head = (L->head + 1) % STAGES;
    L->count--;
    lane_changed(t);
    pthread_mutex_unlock(&t->glock);
    const uint64_t t0 = floe_now_ns();
    const floe_op op = s->p.seg[0].b->op;
    if (op == FLOE_OP_INSERT)
        relaxed_set(&L->inflight_keys, L->inflight_keys - (s->m < L->inflight_keys ? s->m : L->inflight_keys));
    if (st == FLOE_OK && s->m > 0 && s->io[0].out_res[0] == GPU_SKIPPED) /* grow_and_retry collects skipped pieces */
        st = floe_errinfo_set(&s->err, FLOE_ERR_INTERNAL, "a batch was skipped on a halted table");
    const uint64_t generation = s->gen; /* the one every segment ran on */
    bool retried = false;
    if (st == FLOE_OK && op == FLOE_OP_INSERT && t->base.spec.grow && stage_full(s)) {
        st = grow_and_retry(L, s, &s->err);
        retried = true;
    }
    floe_answer_counts c = {};
    for (unsigned i = 0; i < s->p.nseg; i++) {
        if (st != FLOE_OK)
            fail_batch(s->p.seg[i].b, st, &s->err);
        else
            segment_out(t, s, i, retried, &c);
    }
    pthread_mutex_lock(&t->klock);
    if (s->st == FLOE_OK)
        stage_account(L, s);
    relaxed_set(&t->used, t->used + c.inserted);
    relaxed_set(&t->tombstones, t->tombstones + c.erased);
    /* Ids: stage s's buffers are free now (every segment's answers are out) to look ids up again. */
    for (unsigned i = 0; i < s->p.nseg; i++) {
        const segment &g = s->p.seg[i];
        floe_batch *b = g.b;
        uint64_t ids_gen = g.off == 0 ? generation : L->ids_gen; /* the generation b's ids start from */
        if (b->status == FLOE_OK && (b->flags & FLOE_BATCH_WANT_IDS) && t->generation != generation) {
            /* The table grew for this piece: the ids of the batch so far (its retried keys' too) are
             * looked up again now, while no later batch of this lane has run on the grown table
             * (grow_and_retry took their pieces back: a later erase must not hide a key this batch
             * inserted; another lane's is a request of another connection, which may come first). */
            refind_ids(L, s, b, g.off + g.n);
            ids_gen = t->generation;
        }
        if (g.last && b->status == FLOE_OK && (b->flags & FLOE_BATCH_WANT_IDS) && ids_gen != t->generation)
            refind_ids(L, s, b, g.off + g.n); /* the table grew while the batch ran */
        if (!g.last)
            L->ids_gen = ids_gen;
        if (g.last)
            b->generation = t->generation; /* its ids were looked up again if the table grew */
    }
    floe_stage_add(&L->stage[FLOE_STAGE_STAGE_OUT], s->p.n, floe_now_ns() - t0);
    pthread_mutex_unlock(&t->klock);
    for (unsigned i = 0; i < s->p.nseg; i++)
        if (s->p.seg[i].last)
            complete(t, s->p.seg[i].b);
}

static void launch_next(lane *L);

/* Runs everything lane L launched or began to completion: stages in
 * flight, pieces to redo, the rest of the current batch. */
static void drain(lane *L)
{
    while (L->count > 0 || L->redo_at < L->nredo || L->cur) {
        if ((L->redo_at < L->nredo || L->cur) && L->count < STAGES)
            launch_next(L);
        else
            retire(L);
    }
}

/* ---- operations that run alone ------------------------------------------------------------------------ */

static void fill_stats(gpu_table *t, floe_table_stats *st)
{
    uint64_t used[3] = {0, 0, 0}, tomb = 0;
    floe_errinfo err;
    memset(st, 0, sizeof *st);
    if (gpu_iceberg_count(t->ice, used, &tomb, &err) != FLOE_OK) {
        used[0] = t->used; /* the device cannot count: report what the host knows */
        tomb = t->tombstones;
    }
    floe_geometry g;
    floe_geometry_init(&g, t->base.spec.key_bits, gpu_iceberg_addr_bits(t->ice), gpu_iceberg_three(t->ice),
                       t->base.spec.seed);
    st->spec = t->base.spec;
    st->tombstones = tomb;
    uint64_t u = used[0] + used[1] + used[2];
    st->keys = u - tomb;
    st->slots = g.total_slots;
    st->fill = (double)u / (double)st->slots;
    st->memory_bytes = gpu_iceberg_memory(t->ice);
    st->bytes_per_key = st->keys ? (double)st->memory_bytes / (double)st->keys : 0.0;
    st->generation = t->generation;
    strcpy(st->backend, "gpu");
    for (int l = 0; l < FLOE_LEVELS; l++) {
        floe_level_stats *ls = &st->level[l];
        ls->slots = floe_level_slots(&g.level[l]);
        ls->used = used[l];
        ls->row_bits = g.level[l].row_bits;
        ls->buckets_log2 = g.level[l].addr_bits;
        ls->fill = (double)ls->used / (double)ls->slots;
    }
}

/* The table's file image, through the CPU engine's file code: the arrays are
 * the same, downloaded into a host table that the image then owns. */
static floe_status copy_image(gpu_table *t, floe_file_image **out, floe_errinfo *err)
{
    iceberg *host;
    floe_status st =
        iceberg_create_sized(&t->base.spec, gpu_iceberg_addr_bits(t->ice), gpu_iceberg_three(t->ice), NULL, &host, err);
    if (st != FLOE_OK)
        return st;
    iceberg_set_first_fill(host, gpu_iceberg_first_fill(t->ice));
    iceberg_image im;
    iceberg_get_image(host, &im);
    uint64_t used[3], tomb;
    st = gpu_iceberg_download(t->ice, im.sections, err);
    if (st == FLOE_OK)
        st = gpu_iceberg_count(t->ice, used, &tomb, err);
    if (st == FLOE_OK) {
        iceberg_set_counters(host, used, tomb, t->generation);
        st = iceberg_image_of(host, out, err);
    }
    if (st != FLOE_OK)
        iceberg_destroy(host);
    return st;
}

/* SAVE is a COPY written at once. */
static floe_status write_image(floe_file_image *im, const char *path, floe_errinfo *err)
{
    floe_status st = floe_file_image_save(path, im, err);
    floe_file_image_free(im);
    return st;
}

static floe_status save(gpu_table *t, const char *path, floe_errinfo *err)
{
    if (!path)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "save needs a path");
    floe_file_image *im = NULL;
    floe_status st = copy_image(t, &im, err);
    return st == FLOE_OK ? write_image(im, path, err) : st;
}

/* ---- TREE tables ---------------------------------------------------------------------------------------- */

#define TREE_PIECE_MAX (1u << 20) /* vectors per piece */
#define TREE_SCAN_STEP (1u << 16) /* root slots per scan step */

static void tree_stage_free(tree_stage *s)
{
    cudaFreeHost(s->h_vec);
    cudaFreeHost(s->h_ids);
    cudaFreeHost(s->h_res);
    cudaFree(s->d_vec);
    cudaFree(s->d_ids);
    cudaFree(s->d_res);
    cudaFreeHost(s->h_first);
    cudaFree(s->d_first);
    cudaFreeHost(s->h_ch);
    cudaFree(s->d_ch);
    memset(s, 0, sizeof *s);
}

static floe_status tree_stage_reserve(tree_stage *s, size_t n, uint32_t W, floe_errinfo *err)
{
    if (n <= s->cap)
        return FLOE_OK;
    tree_stage_free(s);
    cudaError_t e = cudaMallocHost(&s->h_vec, n * W * 4);
    if (e == cudaSuccess)
        e = cudaMallocHost(&s->h_ids, n * 8);
    if (e == cudaSuccess)
        e = cudaMallocHost(&s->h_res, n);
    if (e == cudaSuccess)
        e = cudaMalloc(&s->d_vec, n * W * 4);
    if (e == cudaSuccess)
        e = cudaMalloc(&s->d_ids, n * 8);
    if (e == cudaSuccess)
        e = cudaMalloc(&s->d_res, n);
    if (e == cudaSuccess)
        e = cudaMallocHost(&s->h_first, (n + 1) * 4);
    if (e == cudaSuccess)
        e = cudaMalloc(&s->d_first, (n + 1) * 4);
    if (e != cudaSuccess) {
        tree_stage_free(s);
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "staging for %zu vectors: %s", n, cuda_msg(e));
    }
    s->cap = n;
    return FLOE_OK;
}

/* Room for `bytes` of states' changes in the staging (after tree_stage_reserve). */
static floe_status tree_stage_reserve_changes(tree_stage *s, size_t bytes, floe_errinfo *err)
{
    if (bytes <= s->ch_cap)
        return FLOE_OK;
    cudaFreeHost(s->h_ch);
    cudaFree(s->d_ch);
    s->h_ch = s->d_ch = NULL;
    s->ch_cap = 0;
    cudaError_t e = cudaMallocHost(&s->h_ch, bytes);
    if (e == cudaSuccess)
        e = cudaMalloc(&s->d_ch, bytes);
    if (e != cudaSuccess)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "staging for %zu bytes of changes: %s", bytes, cuda_msg(e));
    s->ch_cap = bytes;
    return FLOE_OK;
}

#define TREE_CUDA(call)                                                                                                \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess)                                                                                         \
            return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "%s: %s", #call, cuda_msg(e_));                            \
    } while (0)

/* INSERT or FIND of m vectors (answers and, ids not NULL, ids), or GET of
 * the m ids `in` (vectors_out gets the vectors), through the table's staging. */
static floe_status tree_run(lane *L, floe_op op, const void *in, size_t m, uint8_t *results, uint64_t *ids,
                            uint32_t *vectors_out, floe_errinfo *err)
{
    gpu_table *t = L->t;
    const uint32_t W = t->base.spec.words;
    tree_stage *s = &t->ts;
    const bool want_ids = op != FLOE_OP_GET && ids;
    floe_status st = tree_stage_reserve(s, m, W, err);
    if (st != FLOE_OK)
        return st;
    if (op == FLOE_OP_GET) {
        memcpy(s->h_ids, in, m * 8);
        TREE_CUDA(cudaMemcpyAsync(s->d_ids, s->h_ids, m * 8, cudaMemcpyHostToDevice, t->ks));
        st = gpu_tree_get(t->tree, s->d_ids, 0, m, s->d_res, s->d_vec, t->ks, err);
        if (st != FLOE_OK)
            return st;
        TREE_CUDA(cudaMemcpyAsync(s->h_vec, s->d_vec, m * W * 4, cudaMemcpyDeviceToHost, t->ks));
    } else {
        const uint64_t t0 = floe_now_ns();
        memcpy(s->h_vec, in, m * W * 4);
        floe_stage_add(&L->stage[FLOE_STAGE_STAGE_IN], m, floe_now_ns() - t0);
        TREE_CUDA(cudaMemcpyAsync(s->d_vec, s->h_vec, m * W * 4, cudaMemcpyHostToDevice, t->ks));
        st = op == FLOE_OP_INSERT
                 ? gpu_tree_insert(t->tree, s->d_vec, m, s->d_res, want_ids ? s->d_ids : NULL, t->ks, err)
                 : gpu_tree_find(t->tree, s->d_vec, m, s->d_res, want_ids ? s->d_ids : NULL, t->ks, err);
        if (st != FLOE_OK)
            return st;
        if (want_ids)
            TREE_CUDA(cudaMemcpyAsync(s->h_ids, s->d_ids, m * 8, cudaMemcpyDeviceToHost, t->ks));
    }
    TREE_CUDA(cudaMemcpyAsync(s->h_res, s->d_res, m, cudaMemcpyDeviceToHost, t->ks));
    const uint64_t t1 = floe_now_ns();
    TREE_CUDA(cudaStreamSynchronize(t->ks));
    const uint64_t t2 = floe_now_ns();
    /* one stream, synchronised once: copies and kernels are timed together, under kernel */
    floe_stage_add(&L->stage[FLOE_STAGE_KERNEL], m, t2 - t1);
    memcpy(results, s->h_res, m);
    if (want_ids)
        memcpy(ids, s->h_ids, m * 8);
    if (op == FLOE_OP_GET)
        memcpy(vectors_out, s->h_vec, m * W * 4);
    floe_stage_add(&L->stage[FLOE_STAGE_STAGE_OUT], m, floe_now_ns() - t2);
    return FLOE_OK;
}

/* INSERT, FIND or GET of batch b's vectors (ids) [off, off + m). */
static floe_status tree_piece(lane *L, floe_batch *b, size_t off, size_t m, floe_errinfo *err)
{
    gpu_table *t = L->t;
    const uint32_t W = t->base.spec.words;
    if (b->op == FLOE_OP_GET)
        return tree_run(L, b->op, b->keys + off, m, b->results + off, NULL, b->vectors_out + off * W, err);
    return tree_run(L, b->op, b->vectors + off * W, m, b->results + off,
                    (b->flags & FLOE_BATCH_WANT_IDS) ? b->ids + off : NULL, NULL, err);
}

/* INSERT, FIND or GET of batch b, piece by piece.  A growing table grows
 * inside a piece (gpu_tree_insert): if it grew after the first piece, the
 * ids of the pieces before are looked up again, in the last generation. */
static floe_status tree_batch(lane *L, floe_batch *b, floe_errinfo *err)
{
    gpu_table *t = L->t;
    const uint32_t W = t->base.spec.words;
    uint64_t generation = 0;
    floe_status st = FLOE_OK;
    for (size_t off = 0; off < b->n && st == FLOE_OK; off += TREE_PIECE_MAX) {
        st = tree_piece(L, b, off, b->n - off < TREE_PIECE_MAX ? b->n - off : TREE_PIECE_MAX, err);
        if (off == 0)
            generation = gpu_tree_generation(t->tree);
    }
    const bool ids = b->op == FLOE_OP_INSERT && (b->flags & FLOE_BATCH_WANT_IDS);
    if (st != FLOE_OK || !ids || gpu_tree_generation(t->tree) == generation)
        return st;
    uint8_t *found = (uint8_t *)malloc(TREE_PIECE_MAX);
    if (!found)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory looking ids up again");
    for (size_t off = 0; off < b->n && st == FLOE_OK; off += TREE_PIECE_MAX) {
        const size_t m = b->n - off < TREE_PIECE_MAX ? b->n - off : TREE_PIECE_MAX;
        st = tree_run(L, FLOE_OP_FIND, b->vectors + off * W, m, found, b->ids + off, NULL, err);
    }
    free(found);
    return st;
}

/* An INSERT of states by their parents: one piece on the device
 * (tree_states_piece); a larger batch's parents' vectors come back from the
 * device (get_by_id), take their changes on the host, and go in whole
 * (tree_batch).  Parents of another generation, or that name no vector,
 * fail the batch before anything changes. */
/* A batch of states by parent that fits in one piece, on the device: the
 * parents and changes go up, the engine folds the changed words' paths
 * from the parents' nodes (gpu_tree_insert_delta), and only answers (and
 * ids) come back.  The engine's growth inside the insert looks the piece's
 * ids up again itself. */
static floe_status tree_states_piece(lane *L, floe_batch *b, floe_errinfo *err)
{
    gpu_table *t = L->t;
    const uint32_t W = t->base.spec.words;
    const size_t n = b->n;
    tree_stage *s = &t->ts;
    const bool want_ids = (b->flags & FLOE_BATCH_WANT_IDS) != 0;
    floe_status st = tree_stage_reserve(s, n, W, err);
    if (st == FLOE_OK)
        st = tree_stage_reserve_changes(s, b->changes_len ? b->changes_len : 1, err);
    if (st != FLOE_OK)
        return st;
    const uint64_t t0 = floe_now_ns();
    memcpy(s->h_ids, b->parents, n * 8);
    s->h_first[0] = 0;
    for (size_t i = 0; i < n; i++)
        s->h_first[i + 1] = s->h_first[i] + b->change_counts[i];
    memcpy(s->h_ch, b->changes, b->changes_len);
    floe_stage_add(&L->stage[FLOE_STAGE_STAGE_IN], n, floe_now_ns() - t0);
    TREE_CUDA(cudaMemcpyAsync(s->d_ids, s->h_ids, n * 8, cudaMemcpyHostToDevice, t->ks));
    TREE_CUDA(cudaMemcpyAsync(s->d_first, s->h_first, (n + 1) * 4, cudaMemcpyHostToDevice, t->ks));
    TREE_CUDA(cudaMemcpyAsync(s->d_ch, s->h_ch, b->changes_len, cudaMemcpyHostToDevice, t->ks));
    const uint64_t t1 = floe_now_ns();
    /* s->d_ids holds the parents, then the answers' ids */
    st = gpu_tree_insert_delta(t->tree, s->d_ids, s->d_first, s->d_ch, n, s->d_res, want_ids ? s->d_ids : NULL, t->ks,
                               err);
    if (st != FLOE_OK)
        return st;
    TREE_CUDA(cudaMemcpyAsync(s->h_res, s->d_res, n, cudaMemcpyDeviceToHost, t->ks));
    if (want_ids)
        TREE_CUDA(cudaMemcpyAsync(s->h_ids, s->d_ids, n * 8, cudaMemcpyDeviceToHost, t->ks));
    TREE_CUDA(cudaStreamSynchronize(t->ks));
    const uint64_t t2 = floe_now_ns();
    floe_stage_add(&L->stage[FLOE_STAGE_KERNEL], n, t2 - t1);
    memcpy(b->results, s->h_res, n);
    if (want_ids)
        memcpy(b->ids, s->h_ids, n * 8);
    floe_stage_add(&L->stage[FLOE_STAGE_STAGE_OUT], n, floe_now_ns() - t2);
    return FLOE_OK;
}

static floe_status tree_states(lane *L, floe_batch *b, floe_errinfo *err)
{
    gpu_table *t = L->t;
    const uint32_t W = t->base.spec.words;
    floe_status st =
        tree_parents_generation(t->base.spec.name, b->parent_generation, gpu_tree_generation(t->tree), err);
    if (st != FLOE_OK)
        return st;
    if (b->n <= TREE_PIECE_MAX)
        return tree_states_piece(L, b, err);
    /* larger: whole vectors on the host, so that the pieces' ids can be looked up again */
    uint32_t *vectors = (uint32_t *)malloc((b->n ? b->n : 1) * (size_t)W * 4);
    if (!vectors)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory for a batch of %zu states", b->n);
    for (size_t off = 0; off < b->n && st == FLOE_OK; off += TREE_PIECE_MAX) {
        const size_t m = b->n - off < TREE_PIECE_MAX ? b->n - off : TREE_PIECE_MAX;
        st = tree_run(L, FLOE_OP_GET, b->parents + off, m, b->results + off, NULL, vectors + off * W, err);
        for (size_t i = off; st == FLOE_OK && i < off + m; i++)
            if (b->results[i] != FLOE_PRESENT)
                st = tree_parent_missing(t->base.spec.name, i, b->parents[i], err);
    }
    if (st == FLOE_OK) {
        tree_apply_changes(vectors, W, b->change_counts, b->changes, b->n);
        b->vectors = vectors;
        st = tree_batch(L, b, err);
        b->vectors = NULL;
    }
    free(vectors);
    return st;
}

/* Up to limit vectors from the cursor: root slots in steps, stored ones kept. */
static floe_status tree_scan(gpu_table *t, floe_batch *b, floe_errinfo *err)
{
    const uint32_t W = t->base.spec.words;
    const uint64_t total = gpu_tree_root_slots(t->tree);
    uint64_t pos = b->cursor_set ? b->cursor.position : 0;
    b->scan_n = 0;
    assert(b->limit == 0 || b->scan_keys); /* the buffer (floe_batch_check) */
    const uint64_t generation = gpu_tree_generation(t->tree);
    if (b->cursor_set && b->cursor.generation != generation)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "scan cursor is from generation %llu, the table is at %llu: start the scan again",
                                (unsigned long long)b->cursor.generation, (unsigned long long)generation);
    if (pos > total)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "scan cursor position %llu is past the table's %llu root slots",
                                (unsigned long long)pos, (unsigned long long)total);
    tree_stage *s = &t->ts;
    floe_status st = tree_stage_reserve(s, TREE_SCAN_STEP, W, err);
    uint64_t budget = GPU_SCAN_WINDOW;
    while (st == FLOE_OK && pos < total && b->scan_n < b->limit && budget > 0) {
        size_t m = total - pos < TREE_SCAN_STEP ? (size_t)(total - pos) : TREE_SCAN_STEP;
        st = gpu_tree_get(t->tree, NULL, pos, m, s->d_res, s->d_vec, t->ks, err);
        if (st != FLOE_OK)
            break;
        TREE_CUDA(cudaMemcpyAsync(s->h_res, s->d_res, m, cudaMemcpyDeviceToHost, t->ks));
        TREE_CUDA(cudaMemcpyAsync(s->h_vec, s->d_vec, m * W * 4, cudaMemcpyDeviceToHost, t->ks));
        TREE_CUDA(cudaStreamSynchronize(t->ks));
        size_t k = 0;
        for (; k < m && b->scan_n < b->limit; k++) {
            if (s->h_res[k] != FLOE_PRESENT)
                continue;
            b->scan_keys[b->scan_n] = pos + k;
            if (b->scan_vectors)
                memcpy(b->scan_vectors + b->scan_n * W, s->h_vec + k * W, W * 4);
            b->scan_n++;
        }
        pos += k;
        budget = budget > k ? budget - k : 0;
    }
    b->next.position = pos;
    b->next.generation = generation;
    b->scan_done = pos >= total;
    return st;
}

/* The image of a TREE table: downloaded into a host tree that the image owns. */
static floe_status tree_copy_gpu(gpu_table *t, floe_file_image **out, floe_errinfo *err)
{
    tree *host;
    floe_status st = tree_create_sized(&t->base.spec, gpu_tree_sizes(t->tree), NULL, &host, err);
    if (st != FLOE_OK)
        return st;
    st = gpu_tree_download(t->tree, host, err);
    if (st == FLOE_OK)
        st = tree_image_of(host, out, err);
    if (st != FLOE_OK)
        tree_destroy(host);
    return st;
}

static floe_status tree_save_gpu(gpu_table *t, const char *path, floe_errinfo *err)
{
    if (!path)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "save needs a path");
    floe_file_image *im = NULL;
    floe_status st = tree_copy_gpu(t, &im, err);
    return st == FLOE_OK ? write_image(im, path, err) : st;
}

/* Every lane's stage timers, together (klock held). */
static void stage_times(const gpu_table *t, floe_stage_time out[FLOE_STAGES])
{
    memset(out, 0, FLOE_STAGES * sizeof *out);
    for (unsigned i = 0; i < t->nlanes; i++)
        for (int k = 0; k < FLOE_STAGES; k++)
            floe_stage_sum(&out[k], &t->lanes[i].stage[k]);
}

/* A TREE's batch, whatever it is, runs alone: its engine waits for the
 * device within every batch anyway. */
static void run_tree(lane *L, floe_batch *b)
{
    gpu_table *t = L->t;
    floe_errinfo *e = &b->error;
    assert(b->op != FLOE_OP_ERASE && b->op != FLOE_OP_REBUILD); /* refused at the door */
    pthread_mutex_lock(&t->klock);
    switch (b->op) {
    case FLOE_OP_INSERT:
    case FLOE_OP_FIND:
    case FLOE_OP_GET:
        b->status = b->parents ? tree_states(L, b, e) : tree_batch(L, b, e);
        b->generation = gpu_tree_generation(t->tree);
        if (b->status == FLOE_OK)
            floe_answer_counts_tally(&b->counts, b->results, b->n);
        break;
    case FLOE_OP_SCAN:
        b->status = tree_scan(t, b, e);
        break;
    case FLOE_OP_STATS:
        b->status = gpu_tree_stats(t->tree, &b->stats, e);
        stage_times(t, b->stats.stage);
        b->stats.device = t->be->device;
        break;
    case FLOE_OP_SAVE:
        b->status = tree_save_gpu(t, b->path, e);
        break;
    case FLOE_OP_COPY:
        b->status = tree_copy_gpu(t, &b->image, e);
        break;
    default:
        b->status = floe_errinfo_set(e, FLOE_ERR_UNSUPPORTED, "operation %d is not available on a TREE", (int)b->op);
    }
    pthread_mutex_unlock(&t->klock);
    complete(t, b);
}

/* ---- ORDERED tables -------------------------------------------------------------------------------------- */

#define ORD_PIECE_MAX ((size_t)1 << 22) /* keys per piece of a batch */

static void ord_stage_free(ord_stage *s)
{
    cudaFree(s->d_keys);
    cudaFree(s->d_found);
    cudaFree(s->d_res);
    cudaFree(s->d_vals);
    cudaFree(s->d_vout);
    memset(s, 0, sizeof *s);
}

static floe_status ord_stage_reserve(ord_stage *s, size_t n, floe_errinfo *err)
{
    if (n <= s->cap)
        return FLOE_OK;
    ord_stage_free(s);
    cudaError_t e = cudaMalloc(&s->d_keys, n * 8);
    if (e == cudaSuccess)
        e = cudaMalloc(&s->d_found, n * 8);
    if (e == cudaSuccess)
        e = cudaMalloc(&s->d_res, n);
    if (e == cudaSuccess)
        e = cudaMalloc(&s->d_vals, n * 8);
    if (e == cudaSuccess)
        e = cudaMalloc(&s->d_vout, n * 8);
    if (e != cudaSuccess) {
        ord_stage_free(s);
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "staging for %zu keys: %s", n, cuda_msg(e));
    }
    s->cap = n;
    return FLOE_OK;
}

/* INSERT, FIND, ERASE, SUCC or PRED of batch b's keys [off, off + m): in
 * pieces in batch order, so that the first occurrence of a key is still
 * the one INSERTED or ERASED. */
static floe_status ord_piece(lane *L, floe_batch *b, size_t off, size_t m, floe_errinfo *err)
{
    gpu_table *t = L->t;
    ord_stage *s = &t->os;
    const uint32_t vb = t->base.spec.value_bytes;
    const bool want_values = vb && (b->flags & FLOE_BATCH_WANT_VALUES) && floe_op_has(b->op, FLOE_OPF_VALUES_OUT);
    floe_status st = ord_stage_reserve(s, m, err);
    if (st != FLOE_OK)
        return st;
    const uint64_t t0 = floe_now_ns();
    TREE_CUDA(cudaMemcpyAsync(s->d_keys, b->keys + off, m * 8, cudaMemcpyHostToDevice, t->ks));
    if (b->op == FLOE_OP_INSERT && vb && b->values)
        TREE_CUDA(cudaMemcpyAsync(s->d_vals, (const unsigned char *)b->values + off * vb, m * vb,
                                  cudaMemcpyHostToDevice, t->ks));
    floe_answer_counts ignored;
    switch (b->op) {
    case FLOE_OP_INSERT:
        st = gpu_ordered_insert(t->ord, s->d_keys, vb && b->values ? s->d_vals : NULL, m,
                                (b->flags & FLOE_BATCH_OVERWRITE) != 0, s->d_res, want_values ? s->d_vout : NULL,
                                &ignored, t->ks, err);
        break;
    case FLOE_OP_FIND:
        st = gpu_ordered_find(t->ord, s->d_keys, m, s->d_res, want_values ? s->d_vout : NULL, t->ks, err);
        break;
    case FLOE_OP_ERASE:
        st = gpu_ordered_erase(t->ord, s->d_keys, m, s->d_res, &ignored, t->ks, err);
        break;
    default:
        st = gpu_ordered_neighbours(t->ord, b->op == FLOE_OP_PRED, s->d_keys, m, s->d_res, s->d_found,
                                    want_values ? s->d_vout : NULL, t->ks, err);
        if (st == FLOE_OK)
            TREE_CUDA(cudaMemcpyAsync(b->keys_out + off, s->d_found, m * 8, cudaMemcpyDeviceToHost, t->ks));
    }
    if (st != FLOE_OK)
        return st;
    TREE_CUDA(cudaMemcpyAsync(b->results + off, s->d_res, m, cudaMemcpyDeviceToHost, t->ks));
    if (want_values)
        TREE_CUDA(cudaMemcpyAsync((unsigned char *)b->values_out + off * vb, s->d_vout, m * vb, cudaMemcpyDeviceToHost,
                                  t->ks));
    TREE_CUDA(cudaStreamSynchronize(t->ks));
    /* one stream, synchronised once: copies and kernels are timed together, under kernel */
    floe_stage_add(&L->stage[FLOE_STAGE_KERNEL], m, floe_now_ns() - t0);
    return FLOE_OK;
}

/* RANGE, or SCAN (a range over every key from the cursor's key on). */
static floe_status ord_range(gpu_table *t, floe_batch *b, floe_errinfo *err)
{
    const uint32_t vb = t->base.spec.value_bytes;
    const uint64_t top = floe_mask_bits(t->base.spec.key_bits);
    const bool scan = b->op == FLOE_OP_SCAN;
    b->scan_n = 0;
    if (b->cursor_set && b->cursor.generation != 0)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "%s cursor is from generation %llu; an ORDERED table is always at generation 0",
                                scan ? "scan" : "range", (unsigned long long)b->cursor.generation);
    if (scan && b->cursor_set && b->cursor.position > top)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "scan cursor position %llu is not a key of key_bits = %u: start the scan again",
                                (unsigned long long)b->cursor.position, t->base.spec.key_bits);
    const uint64_t lo = scan ? (b->cursor_set ? b->cursor.position : 0) : b->lo, hi = scan ? top : b->hi;
    const bool desc = !scan && b->desc;
    ord_stage *s = &t->os;
    floe_status st = ord_stage_reserve(s, b->limit ? b->limit : 1, err);
    if (st != FLOE_OK)
        return st;
    const bool values = vb && (b->flags & FLOE_BATCH_WANT_VALUES) && b->scan_values;
    size_t n;
    uint64_t next;
    bool done;
    st = gpu_ordered_range(t->ord, lo, hi, desc, b->limit, s->d_keys, values ? s->d_vout : NULL, &n, &next, &done,
                           t->ks, err);
    if (st != FLOE_OK)
        return st;
    if (n)
        TREE_CUDA(cudaMemcpyAsync(b->scan_keys, s->d_keys, n * 8, cudaMemcpyDeviceToHost, t->ks));
    if (n && values)
        TREE_CUDA(cudaMemcpyAsync(b->scan_values, s->d_vout, n * vb, cudaMemcpyDeviceToHost, t->ks));
    TREE_CUDA(cudaStreamSynchronize(t->ks));
    b->scan_n = n;
    b->scan_done = done;
    b->next.position = next;
    b->next.generation = 0;
    return FLOE_OK;
}

/* The image of an ORDERED table: its keys and values downloaded in order. */
static floe_status ord_copy_gpu(gpu_table *t, floe_file_image **out, floe_errinfo *err)
{
    const uint64_t n = gpu_ordered_keys(t->ord);
    const uint32_t vb = t->base.spec.value_bytes;
    uint64_t *keys = (uint64_t *)malloc(n ? n * 8 : 8);
    void *values = malloc(n && vb ? n * vb : 8);
    if (!keys || !values) {
        free(keys);
        free(values);
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory copying table %s", t->base.spec.name);
    }
    floe_status st = gpu_ordered_download(t->ord, keys, vb ? values : NULL, err);
    if (st != FLOE_OK) {
        free(keys);
        free(values);
        return st;
    }
    return ordered_image_of(&t->base.spec, keys, values, n, out, err);
}

/* An ORDERED table's batch, whatever it is, runs alone, as a TREE's does. */
static void run_ordered(lane *L, floe_batch *b)
{
    gpu_table *t = L->t;
    floe_errinfo *e = &b->error;
    assert(b->op != FLOE_OP_GET && b->op != FLOE_OP_REBUILD); /* refused at the door */
    pthread_mutex_lock(&t->klock);
    switch (b->op) {
    case FLOE_OP_INSERT:
    case FLOE_OP_FIND:
    case FLOE_OP_ERASE:
    case FLOE_OP_SUCC:
    case FLOE_OP_PRED:
        b->status = FLOE_OK;
        for (size_t off = 0; off < b->n && b->status == FLOE_OK; off += ORD_PIECE_MAX)
            b->status = ord_piece(L, b, off, b->n - off < ORD_PIECE_MAX ? b->n - off : ORD_PIECE_MAX, e);
        if (b->status == FLOE_OK)
            floe_answer_counts_tally(&b->counts, b->results, b->n);
        break;
    case FLOE_OP_RANGE:
    case FLOE_OP_SCAN:
        b->status = ord_range(t, b, e);
        break;
    case FLOE_OP_STATS:
        gpu_ordered_stats(t->ord, &b->stats);
        stage_times(t, b->stats.stage);
        b->stats.device = t->be->device;
        b->status = FLOE_OK;
        break;
    case FLOE_OP_SAVE: {
        floe_file_image *im = NULL;
        b->status = !b->path ? floe_errinfo_set(e, FLOE_ERR_INVALID, "save needs a path") : ord_copy_gpu(t, &im, e);
        if (b->status == FLOE_OK)
            b->status = write_image(im, b->path, e);
        break;
    }
    case FLOE_OP_COPY:
        b->status = ord_copy_gpu(t, &b->image, e);
        break;
    default:
        b->status =
            floe_errinfo_set(e, FLOE_ERR_UNSUPPORTED, "operation %d is not available on an ORDERED table", (int)b->op);
    }
    pthread_mutex_unlock(&t->klock);
    complete(t, b);
}

static void run_alone_locked(gpu_table *t, floe_batch *b)
{
    floe_errinfo *e = &b->error;
    switch (b->op) {
    case FLOE_OP_SCAN: {
        const bool want_values = (b->flags & FLOE_BATCH_WANT_VALUES) != 0;
        uint64_t pos = b->cursor_set ? b->cursor.position : 0;
        b->scan_n = 0;
        assert(!want_values || t->vb);         /* values in a scan: a MAP's (floe_request_check) */
        assert(b->limit == 0 || b->scan_keys); /* the buffer (floe_batch_check) */
        if (b->cursor_set && b->cursor.generation != t->generation)
            b->status = floe_errinfo_set(e, FLOE_ERR_INVALID,
                                         "scan cursor is from generation %llu but the table was rebuilt (generation "
                                         "%llu): start the scan again",
                                         (unsigned long long)b->cursor.generation, (unsigned long long)t->generation);
        else if (pos > table_slots(t))
            b->status =
                floe_errinfo_set(e, FLOE_ERR_INVALID, "scan cursor position %llu is past the table's %llu slots",
                                 (unsigned long long)pos, (unsigned long long)table_slots(t));
        else {
            uint64_t next;
            b->status = gpu_iceberg_scan(t->ice, pos, b->limit, b->scan_keys, want_values ? b->scan_values : NULL,
                                         &b->scan_n, &next, &b->scan_done, e);
            b->next.position = next;
            b->next.generation = t->generation;
        }
        break;
    }
    case FLOE_OP_STATS:
        fill_stats(t, &b->stats);
        stage_times(t, b->stats.stage);
        b->stats.device = t->be->device;
        b->status = FLOE_OK;
        break;
    case FLOE_OP_REBUILD:
        b->status = rebuild(t, b->addr_bits, e);
        break;
    case FLOE_OP_SAVE:
        b->status = save(t, b->path, e);
        break;
    case FLOE_OP_COPY:
        b->status = copy_image(t, &b->image, e);
        break;
    default:
        assert(b->op != FLOE_OP_GET); /* refused at the door */
        b->status = floe_errinfo_set(e, FLOE_ERR_INVALID, "unknown operation %d", (int)b->op);
    }
}

/* SCAN, STATS, REBUILD, SAVE, COPY of a SET or MAP: after lane L's pieces,
 * and every lane's kernels enqueued so far (klock held, so none starts). */
static void run_alone(lane *L, floe_batch *b)
{
    gpu_table *t = L->t;
    floe_errinfo *e = &b->error;
    const bool renumbers = b->op == FLOE_OP_REBUILD; /* every id: no other lane's batch may be under way */
    drain(L);
    if (renumbers)
        exclusive_begin(L);
    pthread_mutex_lock(&t->klock);
    b->status = quiesce(t, e);
    if (b->status == FLOE_OK)
        run_alone_locked(t, b);
    pthread_mutex_unlock(&t->klock);
    if (renumbers)
        exclusive_end(L);
    complete(t, b);
}

/* ---- the worker ---------------------------------------------------------------------------------------- */

/* Makes b lane L's current batch once no other lane grows the table (its
 * own pieces retired meanwhile): from here until its last piece is retired
 * the lane is busy. */
static void take_batch(lane *L, floe_batch *b)
{
    gpu_table *t = L->t;
    pthread_mutex_lock(&t->glock);
    while (t->holder && t->holder != L) {
        if (L->count == 0) {
            pthread_cond_wait(&t->gcv, &t->glock);
            continue;
        }
        pthread_mutex_unlock(&t->glock);
        retire(L);
        pthread_mutex_lock(&t->glock);
    }
    L->cur = b;
    L->cur_off = 0;
    pthread_mutex_unlock(&t->glock);
}

/* Takes a batch off the queue: key batches become the current batch to cut
 * into pieces, the others run alone. */
static void begin(lane *L, floe_batch *b)
{
    gpu_table *t = L->t;
    if (b->status != FLOE_OK || (!t->tree && b->n == 0 && floe_op_keyed(b->op))) {
        /* refused by floe_table_submit, or nothing to do: answered in order, after everything before it */
        drain(L);
        complete(t, b);
        return;
    }
    const int device = t->be->device;
    if (device_failed(device)) { /* nothing of it can run: answered in order, without touching the device */
        drain(L);
        unavailable(device, &b->error);
        b->status = FLOE_ERR_UNAVAILABLE;
        complete(t, b);
        return;
    }
    if (fault_due(device)) /* tests (floe_gpu_fault_arm): this batch's kernels run after a faulting one */
        k_fault<<<1, 1, 0, t->ks>>>((unsigned *)(uintptr_t)16);
    memset(&b->counts, 0, sizeof b->counts);
    if (t->tree) {
        run_tree(L, b);
        return;
    }
    if (t->ord) {
        run_ordered(L, b);
        return;
    }
    if (!floe_op_keyed(b->op)) { /* a SET's or MAP's keyed operations are cut into pieces */
        run_alone(L, b);
        return;
    }
    if (b->op == FLOE_OP_INSERT && t->base.spec.grow) {
        const double limit = fill_limit(t);
        if ((double)(relaxed(&t->used) + inflight_all(t) + b->n) > limit) {
            drain(L);
            exclusive_begin(L);
            pthread_mutex_lock(&t->klock);
            if ((double)t->used > fill_limit(t)) {
                floe_errinfo ignored;
                rebuild(t, grow_target(t), &ignored); /* on failure the table stays as it is */
            }
            pthread_mutex_unlock(&t->klock);
            exclusive_end(L);
        }
    }
    take_batch(L, b);
}

/* Whether b, next in the queue, may join piece p (whose batches are all
 * done with once it ends): a key batch that does what p's do (op, flags),
 * fits in it whole, and, inserting on a grow table, keeps the fill below
 * max_fill with everything in flight (else begin checks it alone). */
static bool joins(const gpu_table *t, const piece &p, const floe_batch *b)
{
    /* t->used and other lanes' keys in flight move meanwhile: the check is a bound, as in begin */
    const floe_batch *first = p.seg[0].b;
    if (!b || p.nseg == PIECE_SEGS || b->status != FLOE_OK || b->n == 0 || b->n > PIECE_MAX - p.n ||
        b->op != first->op || b->flags != first->flags || (floe_op_has(b->op, FLOE_OPF_VALUES_IN) && t->vb) ||
        !floe_op_keyed(b->op))
        return false;
    return b->op != FLOE_OP_INSERT || !t->base.spec.grow ||
           (double)(relaxed(&t->used) + inflight_all(t) + p.n + b->n) <= fill_limit(t);
}

/* Moves batches queued in lane L that join p into it, in queue order. */
static void join_queued(lane *L, piece &p)
{
    gpu_table *t = L->t;
    pthread_mutex_lock(&t->lock);
    while (!queue_empty(&L->q) && joins(t, p, FLOE_BATCH_OF(L->q.head))) {
        floe_batch *b = FLOE_BATCH_OF(queue_pop(&L->q));
        memset(&b->counts, 0, sizeof b->counts);
        p.seg[p.nseg++] = {b, 0, b->n, true};
        p.n += b->n;
    }
    pthread_mutex_unlock(&t->lock);
}

/* Launches the next piece: redone pieces first, then the current batch and
 * the batches that join it. */
static void launch_next(lane *L)
{
    gpu_table *t = L->t;
    piece p;
    pthread_mutex_lock(&t->glock); /* the stage is taken as the piece leaves redo or cur (busy) */
    L->count++;
    const bool redo = L->redo_at < L->nredo;
    if (redo) {
        p = L->redo[L->redo_at++];
        if (L->redo_at == L->nredo)
            L->redo_at = L->nredo = 0;
    } else {
        floe_batch *b = L->cur;
        segment &g = p.seg[0];
        g.b = b;
        g.off = L->cur_off;
        g.n = b->n - L->cur_off < PIECE_MAX ? b->n - L->cur_off : PIECE_MAX;
        L->cur_off += g.n;
        g.last = L->cur_off == b->n;
        p.nseg = 1;
        p.n = g.n;
        if (g.last)
            L->cur = NULL;
    }
    pthread_mutex_unlock(&t->glock);
    if (!redo && p.seg[0].last)
        join_queued(L, p);
    launch(L, p);
}

static void *lane_main(void *arg)
{
    lane *L = (lane *)arg;
    gpu_table *t = L->t;
    pthread_setname_np(pthread_self(), "floe-gpu-table");
    cudaSetDevice(t->be->device); /* checked by the backend's creation on this device */
    pthread_mutex_lock(&t->lock);
    for (;;) {
        bool pieces = L->redo_at < L->nredo || L->cur;
        if (!pieces && L->count == 0 && queue_empty(&L->q)) {
            if (t->stopping)
                break;
            pthread_cond_wait(&L->cv, &t->lock);
            continue;
        }
        floe_batch *next = NULL;
        if (!pieces && !queue_empty(&L->q) && L->count < STAGES)
            next = FLOE_BATCH_OF(queue_pop(&L->q));
        pthread_mutex_unlock(&t->lock);
        if (L->count > 0 && L->stg[L->head].st == FLOE_OK && cudaEventQuery(L->stg[L->head].done_ev) == cudaSuccess)
            retire(L); /* finished already: answer it now */
        if (next)
            begin(L, next);
        else if (pieces && L->count < STAGES)
            launch_next(L);
        else if (L->count > 0)
            retire(L); /* every stage busy, or nothing else to do: wait for the oldest */
        pthread_mutex_lock(&t->lock);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

/* ---- backend interface ------------------------------------------------------------------------------------ */

static void table_free(gpu_table *t)
{
    for (unsigned k = 0; k < t->nlanes * STAGES; k++) {
        stage *s = &t->lanes[k / STAGES].stg[k % STAGES];
        stage_free_buffers(s);
        if (s->copy)
            cudaStreamDestroy(s->copy);
        cudaEvent_t *evs[6] = {&s->h0_ev, &s->in_ev, &s->k0_ev, &s->k_ev, &s->o0_ev, &s->done_ev};
        for (int j = 0; j < 6; j++)
            if (*evs[j])
                cudaEventDestroy(*evs[j]);
        cudaFree(s->d_tally);
        cudaFreeHost(s->h_counts);
    }
    if (t->ks)
        cudaStreamDestroy(t->ks);
    tree_stage_free(&t->ts);
    ord_stage_free(&t->os);
    gpu_iceberg_destroy(t->ice);
    gpu_tree_destroy(t->tree);
    gpu_ordered_destroy(t->ord);
    free(t);
}

/* Stops the first n lanes' threads once their work is done, and the table's locks. */
static void stop_lanes(gpu_table *t, unsigned n)
{
    pthread_mutex_lock(&t->lock);
    t->stopping = true;
    for (unsigned i = 0; i < n; i++)
        pthread_cond_signal(&t->lanes[i].cv);
    pthread_mutex_unlock(&t->lock);
    for (unsigned i = 0; i < n; i++) {
        pthread_join(t->lanes[i].thread, NULL);
        pthread_cond_destroy(&t->lanes[i].cv);
    }
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->gcv);
    pthread_mutex_destroy(&t->glock);
    pthread_mutex_destroy(&t->klock);
}

/* Takes ownership of ice, tree or ord (one of them). */
static floe_status start_table(gpu_backend *be, gpu_iceberg *ice, gpu_tree *tree, gpu_ordered *ord, uint64_t generation,
                               floe_table **out, floe_errinfo *err)
{
    gpu_table *t = (gpu_table *)calloc(1, sizeof *t);
    if (!t) {
        gpu_iceberg_destroy(ice);
        gpu_tree_destroy(tree);
        gpu_ordered_destroy(ord);
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    }
    t->base.backend = &be->base;
    t->base.spec = ice ? *gpu_iceberg_spec(ice) : tree ? *gpu_tree_spec(tree) : *gpu_ordered_spec(ord);
    t->be = be;
    t->ice = ice;
    t->tree = tree;
    t->ord = ord;
    t->vb = t->base.spec.kind == FLOE_KIND_MAP ? t->base.spec.value_bytes : 0;
    t->generation = generation;
    /* a TREE's or ORDERED table's batches run one at a time under klock: more lanes would only queue */
    t->nlanes = tree || ord ? 1 : floe_backend_lanes(&be->base);
    for (unsigned i = 0; i < t->nlanes; i++) {
        t->lanes[i].t = t;
        t->lanes[i].index = i;
    }
    cudaError_t e = cudaStreamCreateWithFlags(&t->ks, cudaStreamNonBlocking);
    for (unsigned k = 0; k < t->nlanes * STAGES && e == cudaSuccess; k++) {
        stage *s = &t->lanes[k / STAGES].stg[k % STAGES];
        e = cudaStreamCreateWithFlags(&s->copy, cudaStreamNonBlocking);
        cudaEvent_t *evs[6] = {&s->h0_ev, &s->in_ev, &s->k0_ev, &s->k_ev, &s->o0_ev, &s->done_ev};
        for (int j = 0; j < 6 && e == cudaSuccess; j++) /* with timing: they feed the stage timers */
            e = cudaEventCreate(evs[j]);
        if (e == cudaSuccess)
            e = cudaMalloc(&s->d_tally, sizeof *s->d_tally);
        if (e == cudaSuccess)
            e = cudaMemset(s->d_tally, 0, sizeof *s->d_tally);
        if (e == cudaSuccess)
            e = cudaHostAlloc(&s->h_counts, GPU_SEGMENTS_MAX * sizeof *s->h_counts, cudaHostAllocDefault);
    }
    floe_status st = FLOE_OK;
    if (e != cudaSuccess)
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "creating CUDA streams: %s", cuda_msg(e));
    if (st == FLOE_OK && ice)
        st = recount(t, err);
    if (st != FLOE_OK) {
        table_free(t);
        return st;
    }
    pthread_mutex_init(&t->klock, NULL);
    pthread_mutex_init(&t->glock, NULL);
    pthread_cond_init(&t->gcv, NULL);
    pthread_mutex_init(&t->lock, NULL);
    unsigned started = 0;
    for (; started < t->nlanes; started++) {
        lane *L = &t->lanes[started];
        pthread_cond_init(&L->cv, NULL);
        if (pthread_create(&L->thread, NULL, lane_main, L) != 0) {
            pthread_cond_destroy(&L->cv);
            break;
        }
    }
    if (started < t->nlanes) {
        stop_lanes(t, started);
        table_free(t);
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "cannot start the table's threads");
    }
    *out = &t->base;
    return FLOE_OK;
}

static floe_status create_table(gpu_backend *be, const floe_spec *spec, floe_table **out, floe_errinfo *err)
{
    floe_spec s = *spec;
    while (s.seed == 0)
        if (getrandom(&s.seed, sizeof s.seed, 0) != sizeof s.seed)
            s.seed = 0x6A09E667F3BCC909ull; /* no entropy: a fixed seed still works */
    if (s.kind == FLOE_KIND_ORDERED) {
        gpu_ordered *ord;
        floe_status st = gpu_ordered_create(&s, gpu_ordered_chunks_for(s.capacity), &ord, err);
        if (st != FLOE_OK)
            return st;
        return start_table(be, NULL, NULL, ord, 0, out, err);
    }
    if (s.kind == FLOE_KIND_TREE) {
        gpu_tree *tree;
        floe_status st = gpu_tree_create(&s, NULL, &tree, err);
        if (st != FLOE_OK)
            return st;
        return start_table(be, NULL, tree, NULL, 0, out, err);
    }
    gpu_iceberg *ice;
    uint32_t three;
    const uint32_t a = iceberg_size_for(s.key_bits, s.capacity, &three);
    floe_status st = gpu_iceberg_create(&s, a, three, &ice, err);
    if (st != FLOE_OK)
        return st;
    return start_table(be, ice, NULL, NULL, 0, out, err);
}

/* Creates and loads run on the caller's thread, with the backend's device
 * current meanwhile (device_scope); a failure that ruined the device reads
 * as FLOE_ERR_UNAVAILABLE, not as the out-of-memory a cudaMalloc says. */
/* Whether be's device, made current by `on`, can take a create or a load. */
static floe_status usable(const gpu_backend *be, const device_scope &on, floe_errinfo *err)
{
    if (device_failed(be->device))
        return unavailable(be->device, err);
    if (on.e != cudaSuccess)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "CUDA device %d: %s", be->device, cuda_msg(on.e));
    return FLOE_OK;
}

static floe_status gpu_create_table(floe_backend *base, const floe_spec *spec, floe_table **out, floe_errinfo *err)
{
    gpu_backend *be = (gpu_backend *)base;
    device_scope on(be->device);
    floe_status st = usable(be, on, err);
    if (st != FLOE_OK)
        return st;
    st = create_table(be, spec, out, err);
    return st == FLOE_OK ? st : device_status(be->device, spec->name, st, err);
}

/* Loads through the CPU engine's file code (checksums, damage checks), then
 * copies the arrays to the device. */
static floe_status load_table(gpu_backend *be, const char *path, const floe_file_part *part, floe_table **out,
                              floe_errinfo *err)
{
    floe_file_header h;
    const uint64_t offset = part ? part->offset : 0;
    floe_status st = floe_file_header_of(path, part, &h, err);
    if (st != FLOE_OK)
        return st;
    if (h.spec.kind == FLOE_KIND_ORDERED) { /* through the CPU engine's file code (checks), then built on the device */
        ordered *host;
        uint64_t *keys = NULL, n = 0;
        void *values = NULL;
        gpu_ordered *ord = NULL;
        st = ordered_load(path, offset, be->pool, &host, err);
        if (st != FLOE_OK)
            return st;
        st = ordered_export(host, &keys, &values, &n, err);
        ordered_destroy(host);
        if (st == FLOE_OK)
            st = gpu_ordered_create(&h.spec, gpu_ordered_chunks_for(n > h.spec.capacity ? n : h.spec.capacity), &ord,
                                    err);
        if (st == FLOE_OK)
            st = gpu_ordered_upload(ord, keys, values, n, err);
        free(keys);
        free(values);
        if (st != FLOE_OK) {
            gpu_ordered_destroy(ord);
            return st;
        }
        return start_table(be, NULL, NULL, ord, 0, out, err);
    }
    if (h.spec.kind == FLOE_KIND_TREE) {
        tree *th;
        st = tree_load(path, offset, be->pool, &th, err);
        if (st != FLOE_OK)
            return st;
        gpu_tree *gt = NULL;
        st = gpu_tree_create(tree_spec(th), tree_sizes(th), &gt, err);
        if (st == FLOE_OK)
            st = gpu_tree_upload(gt, th, err);
        tree_destroy(th);
        if (st != FLOE_OK) {
            gpu_tree_destroy(gt);
            return st;
        }
        return start_table(be, NULL, gt, NULL, 0, out, err);
    }
    iceberg *host;
    st = iceberg_load(path, offset, be->pool, &host, err);
    if (st != FLOE_OK)
        return st;
    iceberg_image im;
    iceberg_get_image(host, &im);
    gpu_iceberg *ice = NULL;
    st = gpu_iceberg_create(iceberg_spec(host), im.addr_bits, im.three, &ice, err);
    if (st == FLOE_OK)
        st = gpu_iceberg_upload(ice, im.sections, im.first_fill, err);
    iceberg_destroy(host);
    if (st != FLOE_OK) {
        gpu_iceberg_destroy(ice);
        return st;
    }
    return start_table(be, ice, NULL, NULL, im.generation, out, err);
}

static floe_status gpu_load_table(floe_backend *base, const char *path, const floe_file_part *part, floe_table **out,
                                  floe_errinfo *err)
{
    gpu_backend *be = (gpu_backend *)base;
    device_scope on(be->device);
    floe_status st = usable(be, on, err);
    if (st != FLOE_OK)
        return st;
    st = load_table(be, path, part, out, err);
    return st == FLOE_OK ? st : device_status(be->device, path, st, err);
}

static void gpu_submit(floe_table *base, floe_batch *b)
{
    gpu_table *t = (gpu_table *)base;
    lane *L = &t->lanes[b->lane % t->nlanes];
    pthread_mutex_lock(&t->lock);
    queue_push(&L->q, &b->link);
    pthread_cond_signal(&L->cv);
    pthread_mutex_unlock(&t->lock);
}

static void gpu_destroy_table(floe_table *base)
{
    gpu_table *t = (gpu_table *)base;
    stop_lanes(t, t->nlanes);
    device_scope on(t->be->device);
    table_free(t);
}

static void gpu_destroy(floe_backend *base)
{
    gpu_backend *be = (gpu_backend *)base;
    floe_pool_destroy(be->pool);
    free(be);
}

/* Pinned and portable: the copies of every device's tables go straight from and to it. */
static void *gpu_host_alloc(floe_backend *base, size_t bytes)
{
    void *p = NULL;
    device_scope on(((gpu_backend *)base)->device);
    if (on.e != cudaSuccess || cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    if (!pinned_add(p, bytes)) {
        cudaFreeHost(p);
        return NULL;
    }
    return p;
}

static void gpu_host_free(floe_backend *base, void *p)
{
    device_scope on(((gpu_backend *)base)->device); /* a thread with no context would get device 0's */
    pinned_remove(p);
    cudaFreeHost(p);
}

static floe_status gpu_memory(floe_backend *base, uint64_t *free_bytes, uint64_t *total_bytes)
{
    return floe_gpu_meminfo(((gpu_backend *)base)->device, free_bytes, total_bytes) == 0 ? FLOE_OK
                                                                                         : FLOE_ERR_UNAVAILABLE;
}

static const floe_backend_ops gpu_ops = {
    "gpu",       gpu_create_table, gpu_load_table, gpu_submit, gpu_destroy_table,
    gpu_destroy, gpu_host_alloc,   gpu_host_free,  NULL, /* set_lanes: the tables read the backend's own lanes */
    gpu_memory,
};

extern "C" int floe_gpu_built(void)
{
    return 1;
}

extern "C" int floe_gpu_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

extern "C" int floe_gpu_device(int device, char *name, size_t len)
{
    return gpu_available(device, name, len);
}

extern "C" int floe_gpu_meminfo(int device, uint64_t *free_bytes, uint64_t *total_bytes)
{
    size_t f = 0, t = 0;
    *free_bytes = *total_bytes = 0;
    if (device_failed(device))
        return -1;
    device_scope on(device);
    if (on.e != cudaSuccess || cudaMemGetInfo(&f, &t) != cudaSuccess) {
        cudaGetLastError(); /* not sticky: leave no error for this thread's next CUDA call */
        return -1;
    }
    *free_bytes = f;
    *total_bytes = t;
    return 0;
}

extern "C" floe_status floe_backend_gpu_create(int device, unsigned host_threads, floe_backend **out, floe_errinfo *err)
{
    *out = NULL;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0)
        return floe_errinfo_set(err, FLOE_ERR_UNSUPPORTED, "no CUDA device: %s",
                                e != cudaSuccess ? cuda_msg(e) : "the driver reports none");
    if (device < 0 || device >= n)
        return floe_errinfo_set(err, FLOE_ERR_UNSUPPORTED, "no CUDA device %d: this host has %d (0..%d)", device, n,
                                n - 1);
    {
        device_scope on(device); /* the context is made here, on the caller's thread, which keeps its own */
        if (on.e != cudaSuccess)
            return floe_errinfo_set(err, FLOE_ERR_UNSUPPORTED, "CUDA device %d: %s", device, cuda_msg(on.e));
    }
    gpu_backend *be = (gpu_backend *)calloc(1, sizeof *be);
    if (!be)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    floe_status st = floe_pool_create(host_threads, &be->pool, err);
    if (st != FLOE_OK) {
        free(be);
        return st;
    }
    be->base.ops = &gpu_ops;
    be->base.pool = be->pool;
    be->device = device;
    *out = &be->base;
    return FLOE_OK;
}

/* Asks the driver whether `device`'s context still works (a query that
 * waits for nothing): a sticky error met elsewhere, or on a device none of
 * whose tables has run since, is found here, and recorded. */
static void device_probe(int device)
{
    device_scope on(device);
    const cudaError_t e = on.e != cudaSuccess ? on.e : cudaStreamQuery(0);
    if (!sticky(e)) {
        cudaGetLastError();
        return;
    }
    mark_failed(device, e, "found by a health check");
}

extern "C" int floe_gpu_healthy(int device, char *why, size_t len)
{
    if (device < 0 || device >= GPU_DEVICES || device >= floe_gpu_count())
        return -1;
    if (!device_failed(device))
        device_probe(device);
    const bool failed = device_failed(device);
    if (why && len)
        snprintf(why, len, "%s", failed ? health[device].why : "");
    return failed ? 0 : 1;
}

extern "C" void floe_gpu_fault_arm(int device, unsigned after)
{
    if (device >= 0 && device < GPU_DEVICES)
        __atomic_store_n(&health[device].fault_in, after, __ATOMIC_RELAXED);
}
