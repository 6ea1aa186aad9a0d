/*
 * registry.h - the tables of a floed by name.
 *
 * An entry is reference-counted: the registry holds one reference, and a
 * thread that looks a table up holds one until it has handed its request to
 * the table's batcher.  Dropping removes the name at once (new requests see
 * ERR_NO_TABLE), lets queued requests finish through the batcher's DRAIN,
 * and destroys the table on the main thread (server_reap).
 */
#ifndef FLOE_DAEMON_REGISTRY_H
#define FLOE_DAEMON_REGISTRY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "backend.h"
#include "batcher.h"

typedef struct table_entry {
    char name[FLOE_NAME_MAX + 1];
    floe_table *table;
    batcher bt;
    atomic_int refs;
    struct table_entry *next;
} table_entry;

typedef struct registry {
    pthread_mutex_t lock;
    table_entry *head;
    size_t count;
} registry;

void registry_init(registry *r);
/* The entry named name with a reference taken, or NULL. */
table_entry *registry_get(registry *r, const char *name);
/* Adds e (its registry reference included); FLOE_ERR_EXISTS or FLOE_ERR_BUSY if not. */
floe_status registry_add(registry *r, table_entry *e, size_t max_tables, floe_errinfo *err);
/* Wraps table t in a new entry (with its batcher) and adds it; on failure t
 * is destroyed and the error says why (exists, max-tables). */
struct server;
floe_status registry_install(registry *r, struct server *srv, floe_table *t, size_t max_tables, floe_errinfo *err);
/* Removes name; returns the entry with the registry's reference, or NULL. */
table_entry *registry_remove(registry *r, const char *name);
/* Every entry, each with a reference taken; *n entries in a malloc'ed array
 * (NULL and 0 entries when out of memory). */
table_entry **registry_list(registry *r, size_t *n);
/* Calls fn for every entry, under the registry's lock: it allocates nothing,
 * for the shutdown, which must work out of memory too.  fn must not take
 * the registry's lock (no registry calls). */
void registry_each(registry *r, void (*fn)(table_entry *e, void *arg), void *arg);
void entry_ref(table_entry *e);
/* Frees e when the last reference goes; its table must be destroyed by then. */
void entry_unref(table_entry *e);

#endif
