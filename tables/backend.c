/*
 * backend.c - dispatch from the backend interface to a backend's functions,
 * and the blocking floe_table_run built on submit (see backend.h).
 */
#include "backend.h"

#include <pthread.h>
#include <stdbool.h>

#include "tree.h"

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
    b->status = FLOE_OK;
    floe_errinfo_clear(&b->error);
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

static floe_status tree_batch_check(const floe_spec *spec, const floe_batch *b, floe_errinfo *err)
{
    const size_t n = b->n;
    switch (b->op) {
    case FLOE_OP_INSERT:
    case FLOE_OP_FIND: {
        floe_status st = tree_vectors_check(b->vectors, n, err);
        if (st != FLOE_OK)
            return st;
        break;
    }
    case FLOE_OP_GET:
        if (n > 0 && (!b->keys || !b->vectors_out))
            return floe_errinfo_set(err, FLOE_ERR_INVALID, "get_by_id needs ids and a vectors buffer");
        break;
    case FLOE_OP_ERASE:
        return floe_errinfo_set(err, FLOE_ERR_UNSUPPORTED,
                              "TREE tables do not erase: vectors share their nodes, and a model checker's "
                              "visited set only grows");
    case FLOE_OP_REBUILD:
        return floe_errinfo_set(err, FLOE_ERR_UNSUPPORTED, "TREE tables do not rebuild: ids must stay valid");
    default:
        return FLOE_OK;
    }
    if (n > 0 && !b->results)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "no results buffer for %zu vectors", n);
    if ((b->flags & FLOE_BATCH_WANT_IDS) && n > 0 && !b->ids)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "ids requested without an ids buffer");
    if (b->values || b->values_len || (b->flags & (FLOE_BATCH_WANT_VALUES | FLOE_BATCH_OVERWRITE)))
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "values and overwrite are for MAP tables; a TREE stores vectors");
    return FLOE_OK;
}

floe_status floe_batch_check(const floe_spec *spec, const floe_batch *b, floe_errinfo *err)
{
    if (spec->kind == FLOE_KIND_TREE)
        return tree_batch_check(spec, b, err);
    if (b->op == FLOE_OP_GET)
        return floe_errinfo_set(err, FLOE_ERR_UNSUPPORTED, "get_by_id is for TREE tables");
    if (b->op != FLOE_OP_INSERT && b->op != FLOE_OP_FIND && b->op != FLOE_OP_ERASE)
        return FLOE_OK;
    const size_t n = b->n;
    const uint32_t vb = spec->kind == FLOE_KIND_MAP ? spec->value_bytes : 0;
    const bool overwrite = (b->flags & FLOE_BATCH_OVERWRITE) != 0;
    const bool want_values = (b->flags & FLOE_BATCH_WANT_VALUES) != 0;
    floe_status st = floe_keys_check(spec->key_bits, b->keys, n, err);
    if (st != FLOE_OK)
        return st;
    if (n > 0 && !b->results)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "no results buffer for %zu keys", n);
    if ((b->flags & FLOE_BATCH_WANT_IDS) && n > 0 && !b->ids)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "ids requested without an ids buffer");
    if (!vb && (b->values || b->values_len))
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "values given for a SET: a SET stores keys only");
    if (!vb && want_values && b->op != FLOE_OP_ERASE)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "values requested from a SET: a SET stores keys only");
    if (!vb && overwrite)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "overwrite is for MAP tables");
    if (vb && want_values && n > 0 && !b->values_out)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "values requested without a values buffer");
    if (vb && b->op == FLOE_OP_INSERT && (b->values_len != n * vb || (n > 0 && !b->values)))
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                              "a MAP insert of %zu keys needs %zu bytes of values (%u per key), got %zu", n, n * vb, vb,
                              b->values_len);
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
