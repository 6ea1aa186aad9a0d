/*
 * backend_cpu.c - the CPU backend: tables/backend.h over the iceberg engine
 * (SET, MAP, and a STATIC table while it fills), the static cuckoo table (a
 * STATIC table once frozen), the tree engine (TREE) and the B+tree
 * (ORDERED).
 *
 * Each table has a FIFO of submitted batches and one thread that drains it,
 * executing each batch with the whole thread pool (iceberg.c splits it into
 * chunks) and then calling its done().  One thread per table keeps a long
 * SAVE of one table from holding up the others; the pool is shared, so the
 * CPU is never oversubscribed by more than the table threads themselves.
 *
 * floe_table_submit has checked every batch (the door, backend.h); one it
 * refused is completed in its turn without running.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "cuckoo.h"
#include "iceberg.h"
#include "ordered.h"
#include "pool.h"
#include "tablefile.h"
#include "tree.h"

typedef struct cpu_backend {
    floe_backend base;
    floe_pool *pool;
} cpu_backend;

typedef struct cpu_table {
    floe_table base;
    iceberg *ice;   /* SET, MAP; a STATIC table until its freeze */
    cuckoo *frozen; /* a STATIC table from its freeze on */
    tree *tree;   /* TREE */
    ordered *ord; /* ORDERED */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    queue q; /* submitted batches, in order (calloc: empty) */
    bool stopping;
} cpu_table;

static void execute_tree(cpu_table *t, floe_batch *b)
{
    floe_errinfo *e = &b->error;
    tree *tr = t->tree;
    uint64_t *ids = (b->flags & FLOE_BATCH_WANT_IDS) ? b->ids : NULL;
    assert(b->op != FLOE_OP_ERASE && b->op != FLOE_OP_REBUILD); /* refused at the door */
    switch (b->op) {
    case FLOE_OP_INSERT:
        b->status = b->parents ? tree_insert_delta(tr, b->parent_generation, b->parents, b->change_counts, b->changes,
                                                   b->n, b->results, ids, &b->counts, e)
                               : tree_insert(tr, b->vectors, b->n, b->results, ids, &b->counts, e);
        b->generation = tree_generation(tr); /* one batch at a time: the generation its ids are of */
        break;
    case FLOE_OP_FIND:
        b->status = tree_find(tr, b->vectors, b->n, b->results, ids, &b->counts, e);
        b->generation = tree_generation(tr);
        break;
    case FLOE_OP_GET:
        b->status = tree_get(tr, b->keys, b->n, b->results, b->vectors_out, &b->counts, e);
        b->generation = tree_generation(tr);
        break;
    case FLOE_OP_SCAN:
        b->status = tree_scan(tr, b->cursor_set ? &b->cursor : NULL, b->limit, b->scan_keys, b->scan_vectors,
                              &b->scan_n, &b->next, &b->scan_done, e);
        break;
    case FLOE_OP_STATS:
        tree_stats(tr, &b->stats);
        b->stats.device = -1;
        b->status = FLOE_OK;
        break;
    case FLOE_OP_SAVE:
        b->status = b->path ? tree_save(tr, b->path, e) : floe_errinfo_set(e, FLOE_ERR_INVALID, "save needs a path");
        break;
    case FLOE_OP_COPY:
        b->status = tree_copy_image(tr, &b->image, e);
        break;
    default:
        b->status = floe_errinfo_set(e, FLOE_ERR_UNSUPPORTED, "operation %d is not available on a TREE", (int)b->op);
    }
}

static void execute_ordered(cpu_table *t, floe_batch *b)
{
    floe_errinfo *e = &b->error;
    ordered *o = t->ord;
    void *values_out = (b->flags & FLOE_BATCH_WANT_VALUES) ? b->values_out : NULL;
    void *scan_values = (b->flags & FLOE_BATCH_WANT_VALUES) ? b->scan_values : NULL;
    switch (b->op) {
    case FLOE_OP_INSERT:
        b->status = ordered_insert(o, b->keys, b->values, b->n, (b->flags & FLOE_BATCH_OVERWRITE) != 0, b->results,
                                   values_out, &b->counts, e);
        break;
    case FLOE_OP_FIND:
        b->status = ordered_find(o, b->keys, b->n, b->results, values_out, &b->counts, e);
        break;
    case FLOE_OP_ERASE:
        b->status = ordered_erase(o, b->keys, b->n, b->results, &b->counts, e);
        break;
    case FLOE_OP_SUCC:
    case FLOE_OP_PRED:
        b->status = ordered_neighbours(o, b->op == FLOE_OP_PRED, b->keys, b->n, b->results, b->keys_out, values_out, e);
        floe_answer_counts_tally(&b->counts, b->results, b->n);
        break;
    case FLOE_OP_RANGE: {
        bool done;
        if (b->cursor_set && b->cursor.generation != 0) {
            b->status = floe_errinfo_set(e, FLOE_ERR_INVALID,
                                         "range cursor is from generation %llu; an ORDERED table is always at "
                                         "generation 0",
                                         (unsigned long long)b->cursor.generation);
            break;
        }
        ordered_range(o, b->lo, b->hi, b->desc, b->limit, b->scan_keys, scan_values, &b->scan_n, &b->next.position,
                      &done);
        b->next.generation = 0;
        b->scan_done = done;
        b->status = FLOE_OK;
        break;
    }
    case FLOE_OP_SCAN:
        b->status = ordered_scan(o, b->cursor_set ? &b->cursor : NULL, b->limit, b->scan_keys, scan_values, &b->scan_n,
                                 &b->next, &b->scan_done, e);
        break;
    case FLOE_OP_STATS:
        ordered_stats(o, &b->stats);
        b->status = FLOE_OK;
        break;
    case FLOE_OP_SAVE:
        b->status = b->path ? ordered_save(o, b->path, e) : floe_errinfo_set(e, FLOE_ERR_INVALID, "save needs a path");
        break;
    case FLOE_OP_COPY:
        b->status = ordered_copy_image(o, &b->image, e);
        break;
    default:
        assert(b->op != FLOE_OP_GET && b->op != FLOE_OP_REBUILD); /* refused at the door */
        b->status = floe_errinfo_set(e, FLOE_ERR_INVALID, "unknown operation %d", (int)b->op);
    }
}

/* A STATIC table's freeze: its keys from the filling table into a static
 * one, which takes its place; where the build fails, the filling table
 * stays as it was. */
static void freeze(cpu_table *t, floe_batch *b)
{
    cuckoo *c;
    b->status = cuckoo_freeze(t->ice, t->base.backend->pool, &c, &b->error);
    if (b->status != FLOE_OK)
        return;
    iceberg_destroy(t->ice);
    t->ice = NULL;
    t->frozen = c;
}

/* A frozen STATIC table: finds, scans and the table's figures and files; a
 * freeze again changes nothing; a write is refused. */
static void execute_frozen(cpu_table *t, floe_batch *b)
{
    floe_errinfo *e = &b->error;
    const cuckoo *c = t->frozen;
    switch (b->op) {
    case FLOE_OP_FIND:
        cuckoo_find(c, b->keys, b->n, b->results, (b->flags & FLOE_BATCH_WANT_IDS) ? b->ids : NULL,
                    (b->flags & FLOE_BATCH_WANT_VALUES) ? b->values_out : NULL, &b->counts, t->base.backend->pool);
        b->generation = cuckoo_generation(c);
        b->status = FLOE_OK;
        break;
    case FLOE_OP_SCAN:
        b->status = cuckoo_scan(c, b->cursor_set ? &b->cursor : NULL, b->limit, b->scan_keys,
                                (b->flags & FLOE_BATCH_WANT_VALUES) ? b->scan_values : NULL, &b->scan_n, &b->next,
                                &b->scan_done, e);
        break;
    case FLOE_OP_STATS:
        cuckoo_stats(c, &b->stats);
        b->status = FLOE_OK;
        break;
    case FLOE_OP_SAVE:
        b->status = b->path ? cuckoo_save(c, b->path, e) : floe_errinfo_set(e, FLOE_ERR_INVALID, "save needs a path");
        break;
    case FLOE_OP_COPY:
        b->status = cuckoo_copy_image(c, &b->image, e);
        break;
    case FLOE_OP_FREEZE:
        b->status = FLOE_OK;
        break;
    default:
        b->status = cuckoo_refuse(&t->base.spec, b->op, e);
    }
}

static void execute(cpu_table *t, floe_batch *b)
{
    floe_errinfo *e = &b->error;
    const bool want_ids = (b->flags & FLOE_BATCH_WANT_IDS) != 0;
    const bool want_values = (b->flags & FLOE_BATCH_WANT_VALUES) != 0;
    if (b->status != FLOE_OK)
        return; /* refused by floe_table_submit: answered here, in its place in the order */
    memset(&b->counts, 0, sizeof b->counts);
    if (t->tree || t->ord || t->frozen) {
        (t->tree ? execute_tree : t->ord ? execute_ordered : execute_frozen)(t, b);
        if (b->status == FLOE_OK)
            floe_errinfo_clear(e);
        return;
    }
    switch (floe_op_has(b->op, FLOE_OPF_STORES) ? FLOE_OP_INSERT : b->op) {
    case FLOE_OP_INSERT: /* and every row that stores (add): find-or-put, in the row's value mode */
        b->status =
            iceberg_insert(t->ice, b->keys, b->n, b->values, b->values_len, floe_value_mode_of(b->op, b->flags),
                           b->results, want_ids ? b->ids : NULL, want_values ? b->values_out : NULL, &b->counts, e);
        b->generation = iceberg_generation(t->ice); /* one batch at a time: the generation its ids are of */
        break;
    case FLOE_OP_FIND:
        b->status = iceberg_find(t->ice, b->keys, b->n, b->results, want_ids ? b->ids : NULL,
                                 want_values ? b->values_out : NULL, &b->counts, e);
        b->generation = iceberg_generation(t->ice);
        break;
    case FLOE_OP_ERASE:
        b->status = iceberg_erase(t->ice, b->keys, b->n, b->results, &b->counts, e);
        break;
    case FLOE_OP_SCAN:
        b->status = iceberg_scan(t->ice, b->cursor_set ? &b->cursor : NULL, b->limit, b->scan_keys,
                                 want_values ? b->scan_values : NULL, &b->scan_n, &b->next, &b->scan_done, e);
        break;
    case FLOE_OP_STATS:
        iceberg_stats(t->ice, &b->stats);
        b->stats.device = -1;
        b->status = FLOE_OK;
        break;
    case FLOE_OP_REBUILD:
        b->status = iceberg_rebuild(t->ice, b->addr_bits, 0, e);
        break;
    case FLOE_OP_SAVE:
        b->status =
            b->path ? iceberg_save(t->ice, b->path, e) : floe_errinfo_set(e, FLOE_ERR_INVALID, "save needs a path");
        break;
    case FLOE_OP_COPY:
        b->status = iceberg_copy_image(t->ice, &b->image, e);
        break;
    case FLOE_OP_FREEZE:
        assert(t->base.spec.kind == FLOE_KIND_STATIC); /* the door */
        freeze(t, b);
        break;
    default:
        assert(b->op != FLOE_OP_GET); /* refused at the door */
        b->status = floe_errinfo_set(e, FLOE_ERR_INVALID, "unknown operation %d", (int)b->op);
    }
    if (b->status == FLOE_OK)
        floe_errinfo_clear(e);
}

static void *table_main(void *arg)
{
    cpu_table *t = arg;
    pthread_setname_np(pthread_self(), "floe-cpu-table");
    pthread_mutex_lock(&t->lock);
    for (;;) {
        while (queue_empty(&t->q) && !t->stopping)
            pthread_cond_wait(&t->cv, &t->lock);
        if (queue_empty(&t->q))
            break; /* stopping and drained */
        floe_batch *b = FLOE_BATCH_OF(queue_pop(&t->q));
        pthread_mutex_unlock(&t->lock);
        execute(t, b);
        if (b->done)
            b->done(b);
        pthread_mutex_lock(&t->lock);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

/* One engine's table: exactly one of its pointers is set. */
typedef struct engines {
    iceberg *ice;
    tree *tree;
    ordered *ord;
    cuckoo *frozen;
} engines;

static void engines_destroy(engines *en)
{
    iceberg_destroy(en->ice);
    tree_destroy(en->tree);
    ordered_destroy(en->ord);
    cuckoo_destroy(en->frozen);
}

/* Takes ownership of en's table. */
static floe_status start_table(cpu_backend *be, engines en, floe_table **out, floe_errinfo *err)
{
    cpu_table *t = floe_calloc(1, sizeof *t);
    if (!t) {
        engines_destroy(&en);
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    }
    t->base.backend = &be->base;
    t->base.spec = en.ice    ? *iceberg_spec(en.ice)
                   : en.tree ? *tree_spec(en.tree)
                   : en.ord  ? *ordered_spec(en.ord)
                             : *cuckoo_spec(en.frozen);
    t->ice = en.ice;
    t->tree = en.tree;
    t->ord = en.ord;
    t->frozen = en.frozen;
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->cv, NULL);
    if (pthread_create(&t->thread, NULL, table_main, t) != 0) {
        pthread_cond_destroy(&t->cv);
        pthread_mutex_destroy(&t->lock);
        engines_destroy(&en);
        free(t);
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "cannot start the table's thread");
    }
    *out = &t->base;
    return FLOE_OK;
}

static floe_status cpu_create_table(floe_backend *base, const floe_spec *spec, floe_table **out, floe_errinfo *err)
{
    cpu_backend *be = (cpu_backend *)base;
    engines en = {0};
    floe_status st = spec->kind == FLOE_KIND_TREE      ? tree_create(spec, be->pool, &en.tree, err)
                     : spec->kind == FLOE_KIND_ORDERED ? ordered_create(spec, be->pool, &en.ord, err)
                                                       : iceberg_create(spec, be->pool, &en.ice, err);
    if (st != FLOE_OK)
        return st;
    return start_table(be, en, out, err);
}

static floe_status cpu_load_table(floe_backend *base, const char *path, const floe_file_part *part, floe_table **out,
                                  floe_errinfo *err)
{
    cpu_backend *be = (cpu_backend *)base;
    engines en = {0};
    floe_file_header h;
    const uint64_t offset = part ? part->offset : 0;
    floe_status st = floe_file_header_of(path, part, &h, err);
    if (st == FLOE_OK)
        st = h.spec.kind == FLOE_KIND_TREE      ? tree_load(path, offset, be->pool, &en.tree, err)
             : h.spec.kind == FLOE_KIND_ORDERED ? ordered_load(path, offset, be->pool, &en.ord, err)
             : h.frozen                         ? cuckoo_load(path, offset, &en.frozen, err)
                                                : iceberg_load(path, offset, be->pool, &en.ice, err);
    if (st != FLOE_OK)
        return st;
    return start_table(be, en, out, err);
}

static void cpu_submit(floe_table *base, floe_batch *b)
{
    cpu_table *t = (cpu_table *)base;
    pthread_mutex_lock(&t->lock);
    queue_push(&t->q, &b->link);
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->lock);
}

static void cpu_destroy_table(floe_table *base)
{
    cpu_table *t = (cpu_table *)base;
    pthread_mutex_lock(&t->lock);
    t->stopping = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->lock);
    pthread_join(t->thread, NULL);
    engines_destroy(&(engines){t->ice, t->tree, t->ord, t->frozen});
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

static void cpu_destroy(floe_backend *base)
{
    cpu_backend *be = (cpu_backend *)base;
    floe_pool_destroy(be->pool);
    free(be);
}

static const floe_backend_ops cpu_ops = {
    .name = "cpu",
    .create_table = cpu_create_table,
    .load_table = cpu_load_table,
    .submit = cpu_submit,
    .destroy_table = cpu_destroy_table,
    .destroy = cpu_destroy,
};

floe_status floe_backend_cpu_create(unsigned threads, floe_backend **out, floe_errinfo *err)
{
    cpu_backend *be = floe_calloc(1, sizeof *be);
    if (!be)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    floe_status st = floe_pool_create(threads, &be->pool, err);
    if (st != FLOE_OK) {
        free(be);
        return st;
    }
    be->base.ops = &cpu_ops;
    be->base.pool = be->pool;
    *out = &be->base;
    return FLOE_OK;
}
