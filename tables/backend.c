/*
 * backend.c - dispatch from the backend interface to a backend's functions,
 * the in-process door (every batch checked once, in floe_table_submit), and
 * the blocking floe_table_run built on submit (see backend.h).
 */
#include "backend.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

floe_status floe_table_create(floe_backend *be, const floe_spec *spec, floe_table **out, floe_errinfo *err)
{
    floe_status st = floe_spec_validate(spec, err);
    if (st != FLOE_OK)
        return st;
    return be->ops->create_table(be, spec, out, err);
}

floe_status floe_table_load(floe_backend *be, const char *path, floe_table **out, floe_errinfo *err)
{
    return be->ops->load_table(be, path, NULL, out, err);
}

void floe_table_submit(floe_table *t, floe_batch *b)
{
    memset(&b->counts, 0, sizeof b->counts);
    floe_errinfo_clear(&b->error);
    /* a refused batch still goes to the backend, which completes it in its
     * place in the order, on its own thread, without running it */
    b->status = floe_batch_check(&t->spec, b, &b->error);
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

void *floe_backend_host_alloc(floe_backend *be, size_t bytes)
{
    return be->ops->host_alloc ? be->ops->host_alloc(be, bytes) : floe_malloc(bytes ? bytes : 1);
}

void floe_backend_host_free(floe_backend *be, void *p)
{
    if (!p)
        return;
    if (be->ops->host_free)
        be->ops->host_free(be, p);
    else
        free(p);
}

static bool keyed(floe_op op)
{
    return op == FLOE_OP_INSERT || op == FLOE_OP_FIND || op == FLOE_OP_ERASE || op == FLOE_OP_GET;
}

floe_status floe_batch_check(const floe_spec *spec, const floe_batch *b, floe_errinfo *err)
{
    const bool tree = spec->kind == FLOE_KIND_TREE, map = spec->kind == FLOE_KIND_MAP;
    const bool vectors = tree && (b->op == FLOE_OP_INSERT || b->op == FLOE_OP_FIND);
    const size_t n = keyed(b->op) ? b->n : 0;
    if (!(b->flags & FLOE_BATCH_CHECKED)) {
        /* the batch as the bytes of a request: n keys, vectors or ids (so
         * many that their bytes would overflow: still at least 2^32, refused) */
        const size_t kb = vectors ? (size_t)spec->words * 4 : 8;
        const void *keys = vectors ? (const void *)b->vectors : (const void *)b->keys;
        floe_status st =
            floe_request_check(spec, b->op, b->flags, n ? keys : NULL, (n < SIZE_MAX / kb ? n : SIZE_MAX / kb) * kb,
                               b->values, b->values_len, NULL, err);
        if (st != FLOE_OK)
            return st;
    }
    /* the buffers, which only an in-process caller can forget */
    const char *what = vectors ? "vectors" : b->op == FLOE_OP_GET ? "ids" : "keys";
    if (n > 0 && !b->results)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "no results buffer for %zu %s", n, what);
    if (n > 0 && (b->flags & FLOE_BATCH_WANT_IDS) && b->op != FLOE_OP_GET && !b->ids)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "ids requested without an ids buffer");
    if (n > 0 && map && (b->flags & FLOE_BATCH_WANT_VALUES) && b->op != FLOE_OP_ERASE && !b->values_out)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "values requested without a values buffer");
    if (n > 0 && b->op == FLOE_OP_GET && !b->vectors_out)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "get_by_id of %zu ids needs a vectors buffer", n);
    if (b->op == FLOE_OP_SCAN && b->limit > 0 && !b->scan_keys)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "a scan of up to %zu %s needs a buffer for them", b->limit,
                                tree ? "ids" : "keys");
    if (b->op == FLOE_OP_SCAN && b->limit > 0 && map && (b->flags & FLOE_BATCH_WANT_VALUES) && !b->scan_values)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "values requested from a scan without a scan_values buffer");
    return FLOE_OK;
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
