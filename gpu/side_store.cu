/*
 * side_store.cu - the memory a GPU table's side arrays live in (tables/
 * store.h: an exploring table's open set, parents and labels): its device's.
 *
 * Pieces are carved in order from slabs that double from SLAB_FIRST to
 * SLAB_MOST: an open set takes a chunk at a time and never gives one back
 * before its table goes, and a cudaMalloc a chunk would be thousands of
 * calls that synchronise the device in a long run.  Every slab is counted
 * against maxmemory-gpu (device_budget_fits) as the tables' arrays are;
 * where a slab does not fit, the piece alone is asked for.
 * Copies go through a pinned buffer of the thread that asks (floed's io
 * threads, its saver) on that thread's default stream of the device: the
 * tables' streams are non-blocking, so neither waits for the other, and
 * the caller's device is put back after each.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"
#include "store.h"

#define SLAB_FIRST ((size_t)32 << 20)
#define SLAB_MOST   ((size_t)256 << 20) /* the most a slab's unused end leaves idle */
#define PIECE_ALIGN 256

typedef struct side_store {
    int device;
    pthread_mutex_t lock; /* the slabs */
    void **slabs;
    size_t nslabs, cap;
    size_t next;         /* the next slab's bytes */
    unsigned char *free; /* the rest of the last slab */
    size_t left;
} side_store;

/* The device of s current on this thread while it lives; the caller's back after. */
struct on_device {
    int was;
    bool ok;
    explicit on_device(int device) : was(-1)
    {
        ok = cudaGetDevice(&was) == cudaSuccess && (was == device || cudaSetDevice(device) == cudaSuccess);
    }
    ~on_device()
    {
        if (was >= 0)
            cudaSetDevice(was);
    }
};

/* Room in s->slabs for one more (lock held). */
static bool slab_room(side_store *s)
{
    if (s->nslabs < s->cap)
        return true;
    void **more = (void **)realloc(s->slabs, (s->cap * 2 + 4) * sizeof *more);
    if (!more)
        return false;
    s->slabs = more;
    s->cap = s->cap * 2 + 4;
    return true;
}

static void *side_alloc(void *ctx, size_t bytes)
{
    side_store *s = (side_store *)ctx;
    bytes = (bytes + PIECE_ALIGN - 1) / PIECE_ALIGN * PIECE_ALIGN;
    void *piece = NULL;
    pthread_mutex_lock(&s->lock);
    for (size_t want = bytes > s->next ? bytes : s->next; bytes > s->left && want >= bytes;
         want = want > bytes ? bytes : 0) {
        if (device_failed(s->device) || !slab_room(s))
            break;
        if (!device_budget_fits(s->device, want))
            continue; /* the piece alone, then */
        on_device d(s->device);
        void *slab = NULL;
        if (d.ok && cudaMalloc(&slab, want) == cudaSuccess) { /* (the last slab's rest is left) */
            s->slabs[s->nslabs++] = slab;
            s->free = (unsigned char *)slab;
            s->left = want;
            if (want >= s->next) /* (a piece alone leaves the slabs' steps as they were) */
                s->next = want * 2 < SLAB_MOST ? want * 2 : SLAB_MOST;
        } else {
            cudaGetLastError(); /* out of memory is an answer (FULL), not a fault of the device */
        }
    }
    if (bytes <= s->left) {
        piece = s->free;
        s->free += bytes;
        s->left -= bytes;
    }
    pthread_mutex_unlock(&s->lock);
    return piece;
}

/* This thread's pinned buffer the copies pass through (a device copies
 * pageable memory through a staging buffer of the driver's, one copy at a
 * time): grown as copies need, freed when the thread ends. */
struct bounce {
    unsigned char *p = nullptr;
    size_t cap = 0;
    ~bounce()
    {
        if (p)
            cudaFreeHost(p);
    }
    unsigned char *room(size_t bytes)
    {
        if (bytes > cap) {
            if (p)
                cudaFreeHost(p);
            p = nullptr, cap = 0;
            const size_t want = bytes < ((size_t)1 << 20) ? (size_t)1 << 20 : bytes + bytes / 4;
            if (cudaHostAlloc((void **)&p, want, cudaHostAllocPortable) != cudaSuccess) {
                cudaGetLastError();
                p = nullptr;
                return nullptr;
            }
            cap = want;
        }
        return p;
    }
};
static thread_local bounce my_bounce;

/* The n copies, all enqueued on this thread's default stream of the
 * device, through its pinned buffer, and waited for once: several threads
 * copy at once, each in its own stream, and none waits for the tables'. */
static int side_copy(const side_store *s, const floe_store_copy *c, size_t n, bool in)
{
    if (device_failed(s->device))
        return -1;
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += c[i].bytes;
    unsigned char *b = my_bounce.room(total);
    on_device d(s->device);
    if (!b || !d.ok)
        return -1;
    cudaError_t e = cudaSuccess;
    size_t at = 0;
    for (size_t i = 0; i < n && e == cudaSuccess; at += c[i++].bytes) {
        if (!c[i].bytes)
            continue;
        if (in)
            memcpy(b + at, c[i].from, c[i].bytes);
        e = in ? cudaMemcpyAsync(c[i].to, b + at, c[i].bytes, cudaMemcpyHostToDevice, cudaStreamPerThread)
               : cudaMemcpyAsync(b + at, c[i].from, c[i].bytes, cudaMemcpyDeviceToHost, cudaStreamPerThread);
    }
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(cudaStreamPerThread);
    if (e != cudaSuccess) {
        if (sticky(e))
            mark_failed(s->device, e, "copying a table's side arrays");
        else
            cudaGetLastError();
        return -1;
    }
    for (size_t i = 0, o = 0; !in && i < n; o += c[i++].bytes)
        memcpy(c[i].to, b + o, c[i].bytes);
    return 0;
}

static int side_put(void *ctx, const floe_store_copy *c, size_t n)
{
    return side_copy((const side_store *)ctx, c, n, true);
}

static int side_get(void *ctx, const floe_store_copy *c, size_t n)
{
    return side_copy((const side_store *)ctx, c, n, false);
}

static void side_close(void *ctx)
{
    side_store *s = (side_store *)ctx;
    {
        on_device d(s->device);
        for (size_t i = 0; i < s->nslabs; i++)
            cudaFree(s->slabs[i]);
    }
    free(s->slabs);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static const floe_store_ops side_ops = {side_alloc, side_put, side_get, side_close};

floe_status gpu_side_store(floe_table *t, floe_store *out, floe_errinfo *err)
{
    const int device = ((const gpu_table *)t)->be->device;
    if (device_failed(device))
        return unavailable(device, err);
    side_store *s = (side_store *)calloc(1, sizeof *s);
    if (!s)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    s->device = device;
    s->next = SLAB_FIRST;
    pthread_mutex_init(&s->lock, NULL);
    *out = (floe_store){&side_ops, s, device};
    return FLOE_OK;
}
