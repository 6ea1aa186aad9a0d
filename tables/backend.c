/*
 * backend.c - dispatch from the backend interface to a backend's functions,
 * and the blocking floe_table_run built on submit (see backend.h).
 */
#include "backend.h"

#include <pthread.h>
#include <stdbool.h>

floe_status floe_table_create(floe_backend *be, const floe_spec *spec, floe_table **out, floe_error *err)
{
    floe_status st = floe_spec_validate(spec, err);
    if (st != FLOE_OK)
        return st;
    return be->ops->create_table(be, spec, out, err);
}

floe_status floe_table_load(floe_backend *be, const char *path, floe_table **out, floe_error *err)
{
    return be->ops->load_table(be, path, out, err);
}

void floe_table_submit(floe_table *t, floe_batch *b)
{
    b->status = FLOE_OK;
    floe_error_clear(&b->error);
    t->backend->ops->submit(t, b);
}

void floe_table_destroy(floe_table *t)
{
    if (t)
        t->backend->ops->destroy_table(t);
}

void floe_backend_destroy(floe_backend *be)
{
    if (be)
        be->ops->destroy(be);
}

const char *floe_backend_name(const floe_backend *be)
{
    return be->ops->name;
}

typedef struct waiter {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    bool done;
} waiter;

static void wake(floe_batch *b)
{
    waiter *w = b->user;
    pthread_mutex_lock(&w->lock);
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->lock);
}

floe_status floe_table_run(floe_table *t, floe_batch *b)
{
    waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
    b->done = wake;
    b->user = &w;
    floe_table_submit(t, b);
    pthread_mutex_lock(&w.lock);
    while (!w.done)
        pthread_cond_wait(&w.cv, &w.lock);
    pthread_mutex_unlock(&w.lock);
    b->done = NULL;
    b->user = NULL;
    return b->status;
}
