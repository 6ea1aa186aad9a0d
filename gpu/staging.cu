/*
 * staging.cu - the runners' staging buffers (pipeline.h's stage_buf and
 * staging): pinned host memory and device memory, grown as pieces need,
 * and the pinned blocks kept between tables.
 */
#include <pthread.h>

#include "pipeline.h"

/* ---- pinned staging kept between tables ----------------------------------------------------------
 * Pinning is slow (cudaHostAlloc maps and locks page by page: a new
 * table's first batch of 1 Mi keys spent 8-17 ms on its staging, a MAP's
 * 30-45 ms), so the pinned side of a staging buffer a table gives back is
 * kept, up to POOL_BYTES in POOL_SLOTS blocks, for the next buffer that
 * fits it (at most twice what it asks: no large block for a small need).
 * Portable, so any device's stages take any block. */
#define POOL_SLOTS 32
#define POOL_BYTES ((size_t)256 << 20)

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    void *p;
    size_t bytes;
} pool[POOL_SLOTS];
static size_t pool_n, pool_total;

/* A kept block of at least bytes (its size in *got), or NULL. */
static void *pool_take(size_t bytes, size_t *got)
{
    pthread_mutex_lock(&pool_lock);
    size_t best = pool_n;
    for (size_t i = 0; i < pool_n; i++)
        if (pool[i].bytes >= bytes && pool[i].bytes / 2 <= bytes &&
            (best == pool_n || pool[i].bytes < pool[best].bytes))
            best = i;
    void *p = NULL;
    if (best < pool_n) {
        p = pool[best].p;
        *got = pool[best].bytes;
        pool_total -= pool[best].bytes;
        pool[best] = pool[--pool_n];
    }
    pthread_mutex_unlock(&pool_lock);
    return p;
}

/* Keeps p (bytes) if there is room, else frees it. */
static void pool_give(void *p, size_t bytes)
{
    pthread_mutex_lock(&pool_lock);
    const bool keep = pool_n < POOL_SLOTS && pool_total + bytes <= POOL_BYTES;
    if (keep) {
        pool[pool_n].p = p;
        pool[pool_n++].bytes = bytes;
        pool_total += bytes;
    }
    pthread_mutex_unlock(&pool_lock);
    if (!keep)
        cudaFreeHost(p);
}

void stage_pool_drain(void)
{
    pthread_mutex_lock(&pool_lock);
    for (size_t i = 0; i < pool_n; i++)
        cudaFreeHost(pool[i].p);
    pool_n = pool_total = 0;
    pthread_mutex_unlock(&pool_lock);
}

void stage_buf_release(void **h, void **d, size_t bytes)
{
    if (*h)
        pool_give(*h, bytes);
    if (*d)
        cudaFree(*d);
    *h = *d = NULL;
}

floe_status stage_buf_alloc(void **h, void **d, size_t old_bytes, size_t *bytes, unsigned where, floe_errinfo *err)
{
    stage_buf_release(h, d, old_bytes);
    size_t n = *bytes ? *bytes : 1;
    cudaError_t e = cudaSuccess;
    if (where & ON_HOST) {
        size_t got;
        if ((*h = pool_take(n, &got)))
            n = got; /* the device side as large: the buffer holds what the block does */
        else
            e = cudaHostAlloc(h, n, cudaHostAllocPortable);
    }
    if (e == cudaSuccess && (where & ON_DEVICE))
        e = cudaMalloc(d, n);
    if (e == cudaSuccess) {
        *bytes = n;
        return FLOE_OK;
    }
    stage_buf_release(h, d, n); /* what did get allocated (a failed call leaves NULL, as released above) */
    cudaGetLastError();         /* an allocation's failure is not sticky: clear it */
    return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "cannot allocate %zu bytes of staging%s: %s", *bytes,
                            where == ON_BOTH   ? " (pinned and on the device)"
                            : where == ON_HOST ? " (pinned)"
                                               : "",
                            cuda_msg(e));
}

void staging_free(staging *s)
{
    s->keys.release();
    s->vec.release();
    s->ids.release();
    s->res.release();
    s->vin.release();
    s->vout.release();
    s->first.release();
}
