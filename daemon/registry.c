/*
 * registry.c - tables by name (see registry.h).  A linear list: max-tables
 * is small and lookups are one per request, far from the per-key work.
 */
#include "registry.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "layout.h"
#include "log.h"
#include "tablefile.h"

void registry_init(registry *r, const batcher_limits *limits)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->lock, NULL);
    pthread_mutex_init(&r->reap_lock, NULL);
    queue_init(&r->reaping);
    r->limits = *limits;
}

void registry_free(registry *r)
{
    registry_reap_run(r);
    table_entry *e;
    while ((e = r->head)) {
        registry_remove(r, e->name);
        floe_table_destroy(e->table);
        e->table = NULL;
        entry_unref(e);
    }
    pthread_mutex_destroy(&r->lock);
    pthread_mutex_destroy(&r->reap_lock);
}

void entry_ref(table_entry *e)
{
    atomic_fetch_add(&e->refs, 1);
}

void entry_unref(table_entry *e)
{
    if (atomic_fetch_sub(&e->refs, 1) == 1) {
        batcher_destroy(&e->bt);
        floe_explore_destroy(e->explore);
        free(e);
    }
}

static int write_cut(void *ctx, int (*put)(void *put_ctx, const void *p, size_t len), void *put_ctx)
{
    return floe_explore_cut_write(ctx, put, put_ctx);
}

static void free_cut(void *ctx)
{
    floe_explore_cut_free(ctx);
}

void entry_count_open_set(const table_entry *e, floe_table_stats *s)
{
    if (!e->explore)
        return;
    floe_explore_counts x;
    floe_explore_stats(e->explore, &x);
    s->memory_bytes += x.bytes;
    s->bytes_per_key = s->keys ? (double)s->memory_bytes / (double)s->keys : 0.0;
}

floe_status entry_open_set_image(table_entry *e, floe_file_image **out, floe_errinfo *err)
{
    floe_explore_counts x;
    floe_explore_stats(e->explore, &x);
    if (x.broken)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL,
                                "the open set lost states when copying into its GPU's memory failed: not saved (the "
                                "table's last snapshot stays)");
    floe_file_header h;
    memset(&h, 0, sizeof h);
    h.spec = e->table->spec;
    h.layout_version = FLOE_LAYOUT_VERSION;
    h.parts = 1;
    h.keys = x.states;
    floe_file_stream *s = floe_calloc(1, sizeof *s);
    floe_explore_cut *cut = s ? floe_explore_cut_take(e->explore) : NULL;
    floe_file_image *im = cut ? floe_file_image_adopt(&h, NULL) : NULL;
    if (!im) {
        floe_explore_cut_free(cut);
        free(s);
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory for the open set's bookkeeping");
    }
    *s = (floe_file_stream){floe_explore_cut_bytes(cut), write_cut, cut, free_cut};
    im->open_set = s;
    *out = im;
    return FLOE_OK;
}

static table_entry *find_locked(registry *r, const char *name)
{
    for (table_entry *e = r->head; e; e = e->next)
        if (strcmp(e->name, name) == 0)
            return e;
    return NULL;
}

table_entry *registry_get(registry *r, const char *name)
{
    pthread_mutex_lock(&r->lock);
    table_entry *e = find_locked(r, name);
    if (e)
        entry_ref(e);
    pthread_mutex_unlock(&r->lock);
    return e;
}

static floe_status registry_add(registry *r, table_entry *e, size_t max_tables, floe_errinfo *err)
{
    floe_status st = FLOE_OK;
    pthread_mutex_lock(&r->lock);
    if (find_locked(r, e->name))
        st = floe_errinfo_set(err, FLOE_ERR_EXISTS, "table %s exists", e->name);
    else if (r->count >= max_tables)
        st = floe_errinfo_set(err, FLOE_ERR_BUSY, "max-tables (%zu) reached: drop a table first", max_tables);
    else {
        e->next = r->head;
        r->head = e;
        r->count++;
    }
    pthread_mutex_unlock(&r->lock);
    return st;
}

floe_status registry_install(registry *r, floe_table *t, floe_explore *open_set, size_t max_tables,
                             floe_errinfo *err)
{
    table_entry *e = floe_calloc(1, sizeof *e);
    if (!e || !batcher_init(&e->bt, t, &r->limits)) {
        free(e);
        floe_table_destroy(t);
        floe_explore_destroy(open_set);
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    }
    const floe_spec *spec = &t->spec;
    e->explore = open_set;
    floe_status st = FLOE_OK;
    if (spec->explore && !open_set) {
        const uint32_t key_bytes = spec->kind == FLOE_KIND_TREE ? spec->words * 4 : 8;
        st = floe_explore_create(key_bytes, spec->label_bytes, !spec->explore_any_order, 0, floe_spec_shard_index(spec),
                                 &e->explore, err);
    }
    if (st == FLOE_OK && e->explore) { /* the open set lives where its table does */
        floe_store store;
        st = floe_table_side_store(t, &store, err);
        if (st == FLOE_OK)
            st = floe_explore_move(e->explore, &store, err);
        if (st == FLOE_ERR_FULL) { /* a loaded one that its GPU cannot take: served from host memory */
            log_warn("table %s: %s: its open set stays in host memory", spec->name, err->msg);
            st = FLOE_OK;
        }
    }
    if (st != FLOE_OK) {
        batcher_destroy(&e->bt);
        floe_explore_destroy(e->explore);
        free(e);
        floe_table_destroy(t);
        return st;
    }
    strcpy(e->name, t->spec.name);
    e->table = t;
    atomic_init(&e->refs, 1);
    atomic_init(&e->last_save, (int_fast64_t)time(NULL));
    st = registry_add(r, e, max_tables, err);
    if (st != FLOE_OK) {
        floe_table_destroy(t);
        e->table = NULL;
        entry_unref(e);
    }
    return st;
}

table_entry *registry_remove(registry *r, const char *name)
{
    pthread_mutex_lock(&r->lock);
    table_entry **pp = &r->head, *e = NULL;
    while (*pp && strcmp((*pp)->name, name) != 0)
        pp = &(*pp)->next;
    if (*pp) {
        e = *pp;
        *pp = e->next;
        e->next = NULL;
        r->count--;
    }
    pthread_mutex_unlock(&r->lock);
    return e;
}

table_entry **registry_list(registry *r, size_t *n)
{
    pthread_mutex_lock(&r->lock);
    table_entry **all = floe_malloc((r->count + 1) * sizeof *all);
    size_t k = 0;
    for (table_entry *e = r->head; all && e; e = e->next) {
        entry_ref(e);
        all[k++] = e;
    }
    pthread_mutex_unlock(&r->lock);
    *n = k;
    return all;
}

void registry_each(registry *r, void (*fn)(table_entry *e, void *arg), void *arg)
{
    pthread_mutex_lock(&r->lock);
    for (table_entry *e = r->head; e; e = e->next)
        fn(e, arg);
    pthread_mutex_unlock(&r->lock);
}

void registry_reap(registry *r, table_entry *e)
{
    pthread_mutex_lock(&r->reap_lock);
    queue_push(&r->reaping, &e->reap);
    pthread_mutex_unlock(&r->reap_lock);
    if (r->wake_reaper)
        r->wake_reaper(r->wake_arg);
}

void registry_reap_run(registry *r)
{
    pthread_mutex_lock(&r->reap_lock);
    queue_link *list = queue_take(&r->reaping);
    pthread_mutex_unlock(&r->reap_lock);
    while (list) {
        table_entry *e = QUEUE_ENTRY(list, table_entry, reap);
        list = list->next;
        log_info("table %s dropped", e->name);
        floe_table_destroy(e->table);
        e->table = NULL;
        entry_unref(e);
    }
}

floe_status registry_backend_for(registry *r, const char *want, floe_kind kind, floe_backend **be, floe_errinfo *err)
{
    (void)kind; /* every kind has both engines */
    if (strcmp(want, "cpu") == 0) {
        *be = r->cpu;
        return FLOE_OK;
    }
    if (strcmp(want, "gpu") == 0 && !r->gpu)
        return floe_errinfo_set(err, FLOE_ERR_UNSUPPORTED, "backend gpu: %s", r->gpu_name);
    *be = r->gpu ? r->gpu : r->cpu;
    return FLOE_OK;
}

floe_status registry_backend_for_file(registry *r, const char *path, floe_backend **be, bool *moved,
                                      floe_errinfo *err)
{
    floe_file_header h;
    floe_status st = floe_file_header_at(path, 0, &h, err);
    if (st != FLOE_OK)
        return st;
    *moved = strcmp(h.spec.backend, "gpu") == 0 && !r->gpu;
    *be = strcmp(h.spec.backend, "cpu") == 0 || !r->gpu ? r->cpu : r->gpu;
    return FLOE_OK;
}
