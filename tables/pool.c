/*
 * pool.c - a fork-join thread pool (see pool.h).
 *
 * Jobs wait in a FIFO list.  A worker takes task numbers from the head job
 * with an atomic counter; when a job has handed out its last task it leaves
 * the list.  The job lives on its caller's stack, so the caller returns only
 * when every task is finished and no thread is still looking at the job.
 * Posted tasks wait in a second FIFO, taken one at a time when no job waits.
 */
#define _GNU_SOURCE
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"

typedef struct job {
    void (*fn)(void *, size_t);
    void *arg;
    size_t tasks;
    atomic_size_t next; /* next task to hand out */
    size_t finished;    /* under pool->lock */
    unsigned active;    /* threads inside work_on for this job, under pool->lock */
    bool queued;        /* still in the list */
    pthread_cond_t done;
    struct job *link;
} job;

struct floe_pool {
    pthread_mutex_t lock;
    pthread_cond_t work;
    job *head, *tail;
    floe_pool_task *posted, *posted_tail;
    bool stopping;
    unsigned nthreads;
    pthread_t *threads;
};

static void unlink_job(floe_pool *p, job *j)
{
    job **pp = &p->head, *prev = NULL;
    while (*pp && *pp != j) {
        prev = *pp;
        pp = &(*pp)->link;
    }
    if (*pp) {
        *pp = j->link;
        if (p->tail == j)
            p->tail = prev;
    }
    j->queued = false;
}

/* Runs tasks of j until none is left; returns with p->lock held. */
static void work_on(floe_pool *p, job *j)
{
    size_t mine = 0;
    j->active++; /* keeps the caller from returning (and freeing j) under us */
    pthread_mutex_unlock(&p->lock);
    for (;;) {
        size_t t = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (t >= j->tasks)
            break;
        j->fn(j->arg, t);
        mine++;
    }
    pthread_mutex_lock(&p->lock);
    if (j->queued)
        unlink_job(p, j);
    j->finished += mine;
    j->active--;
    if (j->finished == j->tasks && j->active == 0)
        pthread_cond_broadcast(&j->done);
}

static void *worker_main(void *arg)
{
    floe_pool *p = arg;
    pthread_setname_np(pthread_self(), "floe-pool");
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->head && !p->posted && !p->stopping)
            pthread_cond_wait(&p->work, &p->lock);
        if (p->head) {
            work_on(p, p->head);
        } else if (p->posted) {
            floe_pool_task *task = p->posted;
            p->posted = task->next;
            if (!p->posted)
                p->posted_tail = NULL;
            pthread_mutex_unlock(&p->lock);
            task->fn(task);
            pthread_mutex_lock(&p->lock);
        } else {
            break; /* stopping, nothing queued */
        }
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

floe_status floe_pool_create(unsigned threads, floe_pool **out, floe_errinfo *err)
{
    floe_pool *p = floe_calloc(1, sizeof *p);
    if (!p)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory creating the thread pool");
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (unsigned)n : 1;
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    /* The caller of floe_pool_run works too, so threads - 1 helpers suffice. */
    p->threads = floe_calloc(threads, sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory creating the thread pool");
    }
    for (unsigned i = 0; i + 1 < threads; i++) {
        if (pthread_create(&p->threads[i], NULL, worker_main, p) != 0) {
            floe_pool_destroy(p);
            return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "cannot start thread pool worker %u", i);
        }
        p->nthreads++;
    }
    *out = p;
    return FLOE_OK;
}

void floe_pool_destroy(floe_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stopping = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->lock);
    free(p->threads);
    free(p);
}

unsigned floe_pool_width(const floe_pool *p)
{
    return p ? p->nthreads + 1 : 1;
}

void floe_pool_run(floe_pool *p, size_t tasks, void (*fn)(void *arg, size_t task), void *arg)
{
    if (tasks == 0)
        return;
    if (!p || p->nthreads == 0 || tasks == 1) {
        for (size_t t = 0; t < tasks; t++)
            fn(arg, t);
        return;
    }
    job j = {.fn = fn, .arg = arg, .tasks = tasks, .queued = true};
    atomic_init(&j.next, 0);
    pthread_cond_init(&j.done, NULL);
    pthread_mutex_lock(&p->lock);
    if (p->tail)
        p->tail->link = &j;
    else
        p->head = &j;
    p->tail = &j;
    pthread_cond_broadcast(&p->work);
    work_on(p, &j);
    while (j.finished < j.tasks || j.active > 0)
        pthread_cond_wait(&j.done, &p->lock);
    pthread_mutex_unlock(&p->lock);
    pthread_cond_destroy(&j.done);
}

void floe_pool_post(floe_pool *p, floe_pool_task *task)
{
    if (!p || p->nthreads == 0) {
        task->fn(task);
        return;
    }
    task->next = NULL;
    pthread_mutex_lock(&p->lock);
    if (p->posted_tail)
        p->posted_tail->next = task;
    else
        p->posted = task;
    p->posted_tail = task;
    pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->lock);
}

#define COPY_CHUNK     (512u << 10) /* below this, a thread's wake-up costs more than it saves */
#define COPY_MAX_TASKS 8u           /* about what saturates a socket's memory bandwidth */

typedef struct {
    unsigned char *dst;
    const unsigned char *src;
    size_t n, per;
} copy_job;

static void copy_task(void *arg, size_t task)
{
    const copy_job *j = arg;
    const size_t at = task * j->per;
    if (at < j->n)
        memcpy(j->dst + at, j->src + at, j->n - at < j->per ? j->n - at : j->per);
}

void floe_pool_copy(floe_pool *p, void *dst, const void *src, size_t n)
{
    size_t tasks = n / COPY_CHUNK;
    const unsigned width = floe_pool_width(p);
    if (tasks > width)
        tasks = width;
    if (tasks > COPY_MAX_TASKS)
        tasks = COPY_MAX_TASKS;
    if (tasks < 2) {
        memcpy(dst, src, n);
        return;
    }
    copy_job j = {dst, src, n, (n + tasks - 1) / tasks};
    j.per = (j.per + 63) & ~(size_t)63; /* whole cache lines per task */
    floe_pool_run(p, tasks, copy_task, &j);
}
