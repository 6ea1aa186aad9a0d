/*
 * pool.h - a thread pool: the CPU engine's, and the splits of tables in parts.
 *
 * floe_pool_run(pool, tasks, fn, arg) calls fn(arg, i) for every i < tasks
 * across the pool's threads and returns when all are done.  The calling
 * thread works on its own job too, so a caller never waits idle and several
 * callers (one per table) may run jobs at once without deadlock: a job never
 * waits for another job.  A NULL pool runs the tasks inline.
 *
 * floe_pool_post(pool, task) runs one task on a worker and returns at once:
 * posted tasks start in the order posted, after any job waiting (a caller
 * of floe_pool_run is blocked; a posted task's poster is not).  A task may
 * wait for a task posted before it, never for one posted after.
 */
#ifndef FLOE_TABLES_POOL_H
#define FLOE_TABLES_POOL_H

#include <stddef.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct floe_pool floe_pool;

/* threads = 0 uses one thread per online CPU. */
floe_status floe_pool_create(unsigned threads, floe_pool **out, floe_errinfo *err);
void floe_pool_destroy(floe_pool *p);
/* Threads that execute tasks (workers plus the caller); 1 for a NULL pool. */
unsigned floe_pool_width(const floe_pool *p);
void floe_pool_run(floe_pool *p, size_t tasks, void (*fn)(void *arg, size_t task), void *arg);

/* A posted task: the caller's, untouched by the pool once fn is called
 * (fn may post it again or free it). */
typedef struct floe_pool_task {
    void (*fn)(struct floe_pool_task *task);
    struct floe_pool_task *next;
} floe_pool_task;

/* Queues task for a worker; a pool without workers (NULL, or one thread)
 * runs it inline. */
void floe_pool_post(floe_pool *p, floe_pool_task *task);
/* memcpy(dst, src, n), split across the pool when n is large: one thread
 * copies about 7 GB/s into pinned staging memory, a few saturate it. */
void floe_pool_copy(floe_pool *p, void *dst, const void *src, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* FLOE_TABLES_POOL_H */
