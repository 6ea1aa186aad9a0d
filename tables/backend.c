/*
 * backend.c - dispatch from the backend interface to a backend's functions,
 * the in-process door (every batch checked once, in floe_table_submit), the
 * blocking floe_table_run built on submit, and a table's keys copied into
 * another through it (see backend.h).
 */
#include "backend.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "iceberg.h"
#include "pool.h"
#include "tree.h"

uint64_t floe_table_bytes_for(const floe_spec *spec)
{
    switch (spec->kind) {
    case FLOE_KIND_SET:
    case FLOE_KIND_MAP:
    case FLOE_KIND_STATIC: /* as it fills */
        return iceberg_bytes_for(spec);
    case FLOE_KIND_TREE: {
        tree_sizing z;
        floe_errinfo ignored;
        return tree_size(spec, &z, &ignored) == FLOE_OK ? z.node_bytes + z.root_bytes : 0;
    }
    default:
        return 0;
    }
}

/* The host's available and total memory (/proc/meminfo); false where unknown. */
static bool host_memory(uint64_t *avail, uint64_t *total)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return false;
    char line[256];
    unsigned long long kb;
    int got = 0;
    while (got != 3 && fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
            *avail = (uint64_t)kb << 10;
            got |= 1;
        } else if (sscanf(line, "MemTotal: %llu kB", &kb) == 1) {
            *total = (uint64_t)kb << 10;
            got |= 2;
        }
    }
    fclose(f);
    return got == 3;
}

floe_status floe_table_create(floe_backend *be, const floe_spec *spec, floe_table **out, floe_errinfo *err)
{
    floe_status st = floe_spec_validate(spec, err);
    if (st != FLOE_OK)
        return st;
    /* Refused before anything is allocated: a table the memory cannot hold would otherwise fault
     * in gigabytes (a CPU table's pages are touched at creation) until the kernel kills the process. */
    const uint64_t need = floe_table_bytes_for(spec);
    uint64_t free_bytes = 0, total = 0;
    const floe_status mem = floe_backend_memory(be, &free_bytes, &total);
    const bool host = mem == FLOE_ERR_UNSUPPORTED;
    if (need && (mem == FLOE_OK || (host && host_memory(&free_bytes, &total))) && need > free_bytes)
        return floe_errinfo_set(err, FLOE_ERR_FULL,
                                "table %s: its arrays for a capacity of %llu take %.2f GiB, more than the %.2f GiB "
                                "%s has free (of %.2f GiB): ask a smaller capacity (with grow it grows as keys come)",
                                spec->name, (unsigned long long)spec->capacity, need / 1073741824.0,
                                free_bytes / 1073741824.0, host ? "this host" : "the device", total / 1073741824.0);
    return be->ops->create_table(be, spec, out, err);
}

floe_status floe_table_load(floe_backend *be, const char *path, floe_table **out, floe_errinfo *err)
{
    return be->ops->load_table(be, path, NULL, out, err);
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

floe_status floe_backend_set_lanes(floe_backend *be, unsigned lanes, floe_errinfo *err)
{
    if (lanes < 1 || lanes > FLOE_LANES_MAX)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "lanes must be 1..%d, not %u", FLOE_LANES_MAX, lanes);
    be->lanes = lanes;
    if (be->ops->set_lanes)
        be->ops->set_lanes(be, lanes);
    return FLOE_OK;
}

unsigned floe_backend_lanes(const floe_backend *be)
{
    return be->lanes ? be->lanes : 1;
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

floe_status floe_table_side_store(floe_table *t, floe_store *out, floe_errinfo *err)
{
    *out = FLOE_STORE_HOST;
    return t->backend->ops->side_store ? t->backend->ops->side_store(t, out, err) : FLOE_OK;
}

floe_status floe_backend_memory(floe_backend *be, uint64_t *free_bytes, uint64_t *total_bytes)
{
    *free_bytes = *total_bytes = 0;
    return be->ops->memory ? be->ops->memory(be, free_bytes, total_bytes) : FLOE_ERR_UNSUPPORTED;
}

/* A batch of at least this many keys has their widths checked across the
 * backend's threads: on the submitting thread alone the pass over 8 bytes a
 * key held in-process E1 on the GPU to ~600 M keys/s, a quarter of what the
 * copy engines and kernels behind it take. */
#define DOOR_SPLIT_KEYS ((size_t)1 << 15)
#define DOOR_CHUNK_KEYS ((size_t)1 << 14)

typedef struct fit_job {
    const uint64_t *keys;
    size_t n;
    uint32_t key_bits;
    _Atomic bool over; /* some chunk has a key too wide */
} fit_job;

static void fit_task(void *arg, size_t task)
{
    fit_job *j = arg;
    const size_t at = task * DOOR_CHUNK_KEYS, m = j->n - at < DOOR_CHUNK_KEYS ? j->n - at : DOOR_CHUNK_KEYS;
    if (!floe_keys_fit(j->key_bits, j->keys + at, m))
        j->over = true;
}

/* Whether floe_batch_check may skip floe_request_check's pass over b's
 * keys: they were found to fit here, split across the pool (a batch with a
 * key too wide takes the whole check, which names it). */
static bool keys_fit_split(floe_pool *pool, const floe_spec *spec, const floe_batch *b)
{
    if (!pool || !floe_op_keyed(b->op) || spec->kind == FLOE_KIND_TREE || (b->flags & FLOE_BATCH_CHECKED) || !b->keys ||
        b->n < DOOR_SPLIT_KEYS || b->n >= ((size_t)1 << 32))
        return false;
    fit_job j = {b->keys, b->n, spec->key_bits, false};
    floe_pool_run(pool, (b->n + DOOR_CHUNK_KEYS - 1) / DOOR_CHUNK_KEYS, fit_task, &j);
    return !j.over;
}

bool floe_batch_width_pass(const floe_spec *spec, const floe_batch *b)
{
    const floe_opdef *def = floe_op_def(b->op); /* keys a table in parts splits by */
    return def->shape == FLOE_SHAPE_KEYS && def->parts == FLOE_PARTS_SPLIT && spec->kind != FLOE_KIND_TREE &&
           !(b->flags & FLOE_BATCH_CHECKED) && !b->parents && b->keys && b->n < ((size_t)1 << 32);
}

/* floe_batch_check; widths_later: the table checks the keys' widths itself
 * (floe_table.checks_widths), so every check but that pass. */
static floe_status batch_check(const floe_spec *spec, const floe_batch *b, floe_pool *pool, bool widths_later,
                               floe_errinfo *err)
{
    const bool is_tree = spec->kind == FLOE_KIND_TREE, valued = floe_spec_has_values(spec);
    const floe_opdef *def = floe_op_def(b->op);
    const bool vectors = floe_op_takes_vectors(b->op, is_tree ? spec->words : 0);
    const size_t n = floe_op_keyed(b->op) ? b->n : 0;
    if (b->parents) { /* TREE states by their parents */
        if (!(def->flags & FLOE_OPF_STORES) || b->vectors)
            return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                    "states by their parents go with an insert, without vectors");
        const size_t cl = n < SIZE_MAX / 8 ? n : SIZE_MAX / 8;
        floe_status st = (b->flags & FLOE_BATCH_CHECKED) ? FLOE_OK
                                                         : floe_states_check(spec, b->flags, cl * 8, b->change_counts,
                                                                             cl, b->changes, b->changes_len, NULL, err);
        if (st != FLOE_OK)
            return st;
        if (n > 0 && !b->results)
            return floe_errinfo_set(err, FLOE_ERR_INVALID, "no results buffer for %zu states", n);
        if (n > 0 && (b->flags & FLOE_BATCH_WANT_IDS) && !b->ids)
            return floe_errinfo_set(err, FLOE_ERR_INVALID, "ids requested without an ids buffer");
        return FLOE_OK;
    }
    if (def->shape == FLOE_SHAPE_RANGE) {
        floe_status st = floe_range_check(spec, b->flags, b->lo, b->hi, err);
        if (st != FLOE_OK)
            return st;
    } else if (!(b->flags & FLOE_BATCH_CHECKED)) {
        /* the batch as the bytes of a request: n keys, vectors or ids (so
         * many that their bytes would overflow: still at least 2^32, refused) */
        const size_t kb = vectors ? (size_t)spec->words * 4 : 8;
        const void *keys = vectors ? (const void *)b->vectors : (const void *)b->keys;
        const size_t len = (n < SIZE_MAX / kb ? n : SIZE_MAX / kb) * kb;
        /* keys found to fit across the pool: every other check, without a second pass over them */
        floe_status (*check)(const floe_spec *, floe_op, unsigned, const void *, size_t, const void *, size_t, size_t *,
                             floe_errinfo *) =
            widths_later || keys_fit_split(pool, spec, b) ? floe_request_check_fitted : floe_request_check;
        floe_status st = check(spec, b->op, b->flags, n ? keys : NULL, len, b->values, b->values_len, NULL, err);
        if (st != FLOE_OK)
            return st;
    }
    /* the buffers, which only an in-process caller can forget */
    const char *what = vectors ? "vectors" : def->shape == FLOE_SHAPE_IDS ? "ids" : "keys";
    if (n > 0 && !b->results)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "no results buffer for %zu %s", n, what);
    if (n > 0 && floe_batch_wants_ids(b) && !b->ids)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "ids requested without an ids buffer");
    if (n > 0 && valued && (b->flags & FLOE_BATCH_WANT_VALUES) && (def->flags & FLOE_OPF_VALUES_OUT) && !b->values_out)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "values requested without a values buffer");
    if (n > 0 && (def->flags & FLOE_OPF_KEYS_OUT) && !b->keys_out)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s of %zu keys needs a keys_out buffer", def->name, n);
    if (n > 0 && (def->flags & FLOE_OPF_VECTORS_OUT) && !b->vectors_out)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s of %zu ids needs a vectors buffer", def->name, n);
    const bool scan = def->shape == FLOE_SHAPE_SCAN || def->shape == FLOE_SHAPE_RANGE;
    if (scan && b->limit > 0 && !b->scan_keys)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "a %s of up to %zu %s needs a buffer for them", def->name,
                                b->limit, is_tree ? "ids" : "keys");
    if (scan && b->limit > 0 && valued && (b->flags & FLOE_BATCH_WANT_VALUES) && !b->scan_values)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "values requested from a %s without a scan_values buffer",
                                def->name);
    return FLOE_OK;
}

floe_status floe_batch_check(const floe_spec *spec, const floe_batch *b, floe_pool *pool, floe_errinfo *err)
{
    return batch_check(spec, b, pool, false, err);
}

void floe_table_submit(floe_table *t, floe_batch *b)
{
    memset(&b->counts, 0, sizeof b->counts);
    floe_errinfo_clear(&b->error);
    /* a refused batch still goes to the backend, which completes it in its
     * place in the order, on its own thread, without running it */
    const bool later = t->checks_widths && floe_batch_width_pass(&t->spec, b);
    b->status = batch_check(&t->spec, b, t->backend->pool, later, &b->error);
    t->backend->ops->submit(t, b);
}

typedef struct waiter {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    size_t left; /* batches not yet done */
} waiter;

static void wake(floe_batch *b)
{
    waiter *w = b->user;
    pthread_mutex_lock(&w->lock);
    if (--w->left == 0)
        pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->lock);
}

void floe_tables_run(floe_table *const *t, floe_batch *const *b, size_t n)
{
    waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, n};
    for (size_t i = 0; i < n; i++) {
        b[i]->done = wake;
        b[i]->user = &w;
        floe_table_submit(t[i], b[i]);
    }
    pthread_mutex_lock(&w.lock);
    while (w.left > 0)
        pthread_cond_wait(&w.cv, &w.lock);
    pthread_mutex_unlock(&w.lock);
    for (size_t i = 0; i < n; i++) {
        b[i]->done = NULL;
        b[i]->user = NULL;
    }
}

floe_status floe_table_run(floe_table *t, floe_batch *b)
{
    floe_tables_run(&t, &b, 1);
    return b->status;
}

#define COPY_CHUNK ((size_t)1 << 18) /* keys per scan and insert */

floe_status floe_table_copy_keys(floe_table *from, floe_table *to, floe_errinfo *err)
{
    const floe_spec *s = &from->spec;
    const bool is_tree = s->kind == FLOE_KIND_TREE;
    const uint32_t vb = floe_spec_has_values(s) ? s->value_bytes : 0;
    const size_t wb = (size_t)s->words * 4;
    uint64_t *keys = floe_malloc(COPY_CHUNK * 8);
    void *vals = vb ? floe_malloc(COPY_CHUNK * vb) : NULL;
    uint32_t *vecs = is_tree ? floe_malloc(COPY_CHUNK * wb) : NULL;
    uint8_t *res = floe_malloc(COPY_CHUNK);
    floe_status st = FLOE_OK;
    if (!keys || !res || (vb && !vals) || (is_tree && !vecs))
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    floe_batch sc = {.op = FLOE_OP_SCAN, .limit = COPY_CHUNK, .scan_keys = keys};
    if (vb) {
        sc.flags = FLOE_BATCH_WANT_VALUES;
        sc.scan_values = vals;
    }
    sc.scan_vectors = vecs;
    while (st == FLOE_OK) {
        st = floe_table_run(from, &sc);
        if (st != FLOE_OK) {
            *err = sc.error;
            break;
        }
        if (sc.scan_n > 0) {
            floe_batch ins = {.op = FLOE_OP_INSERT, .n = sc.scan_n, .results = res};
            if (is_tree) {
                ins.vectors = vecs;
            } else {
                ins.keys = keys;
                ins.values = vals;
                ins.values_len = vb ? sc.scan_n * vb : 0;
            }
            st = floe_table_run(to, &ins);
            if (st != FLOE_OK)
                *err = ins.error;
            else if (ins.counts.full)
                st = floe_errinfo_set(err, FLOE_ERR_FULL, "%llu keys did not fit while loading",
                                      (unsigned long long)ins.counts.full);
        }
        if (sc.scan_done)
            break;
        sc.cursor = sc.next;
        sc.cursor_set = 1;
    }
    free(keys);
    free(vals);
    free(vecs);
    free(res);
    return st;
}
