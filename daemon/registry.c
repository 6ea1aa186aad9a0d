/*
 * registry.c - tables by name (see registry.h).  A linear list: max-tables
 * is small and lookups are one per request, far from the per-key work.
 */
#include "registry.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"

void registry_init(registry *r)
{
    pthread_mutex_init(&r->lock, NULL);
    r->head = NULL;
    r->count = 0;
}

void entry_ref(table_entry *e)
{
    atomic_fetch_add(&e->refs, 1);
}

void entry_unref(table_entry *e)
{
    if (atomic_fetch_sub(&e->refs, 1) == 1) {
        batcher_destroy(&e->bt);
        free(e);
    }
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

floe_status registry_add(registry *r, table_entry *e, size_t max_tables, floe_errinfo *err)
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

floe_status registry_install(registry *r, struct server *srv, floe_table *t, size_t max_tables, floe_errinfo *err)
{
    table_entry *e = floe_calloc(1, sizeof *e);
    if (!e) {
        floe_table_destroy(t);
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    }
    strcpy(e->name, t->spec.name);
    e->table = t;
    atomic_init(&e->refs, 1);
    batcher_init(&e->bt, srv, t);
    floe_status st = registry_add(r, e, max_tables, err);
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
