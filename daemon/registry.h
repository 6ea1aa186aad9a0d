/*
 * registry.h - the tables of a floed by name, the backends they run on, and
 * their reaping.
 *
 * An entry is reference-counted: the registry holds one reference, and a
 * thread that looks a table up holds one until it has handed its request to
 * the table's batcher.  Dropping removes the name at once (new requests see
 * ERR_NO_TABLE), lets queued requests finish through the batcher's drain,
 * and destroys the table on the main thread (registry_reap, then
 * registry_reap_run from the reaper's wake-up): never on the table's own
 * backend thread, which is where the drain ends.
 */
#ifndef FLOE_DAEMON_REGISTRY_H
#define FLOE_DAEMON_REGISTRY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "batcher.h"
#include "explore.h"
#include "queue.h"

typedef struct table_entry {
    char name[FLOE_NAME_MAX + 1];
    floe_table *table;
    batcher bt;
    atomic_int refs;
    struct table_entry *next; /* in the registry's list */
    queue_link reap;          /* in the reaper's queue, once dropped */
    /* persistence (snapshot.c): the batcher's change count as of the last
     * snapshot, and times in unix seconds */
    atomic_uint_fast64_t saved_changes;
    atomic_int_fast64_t last_save;   /* last snapshot, or creation/load (for the rules) */
    atomic_int_fast64_t saved_at;    /* last snapshot written (0: none) */
    atomic_int_fast64_t retry_after; /* no snapshot by the rules before */
    atomic_bool snapshot_pending;    /* one by the rules is on its way */
    /* An exploring table's open set (spec.explore; tables/explore.h, which
     * locks it): inserts' answers add to it on the backends' threads,
     * claims and traces read it on the io threads. */
    floe_explore *explore;
} table_entry;

typedef struct registry {
    pthread_mutex_t lock;
    table_entry *head;
    size_t count;
    batcher_limits limits; /* every table's batcher's */
    /* The backends: cpu always; gpu where floed has a device (else NULL,
     * and gpu_name says why). */
    floe_backend *cpu, *gpu;
    char gpu_name[400]; /* the device, or why there is none */
    /* dropped tables waiting for the main thread */
    pthread_mutex_t reap_lock;
    queue reaping;
    void (*wake_reaper)(void *arg);
    void *wake_arg;
} registry;

void registry_init(registry *r, const batcher_limits *limits);
/* Destroys every table left and the entries (nothing may run any more);
 * the backends stay the caller's. */
void registry_free(registry *r);
/* A snapshot of an exploring table: its spec and its open set as they are
 * now, as an image for floe_file_image_save (tables/tablefile.h).  The
 * table's arrays are not in it: the open set holds every state found, and
 * a load builds the table again from them (daemon/floed.c), so the two
 * always agree, whatever the table's batches in flight. */
floe_status entry_open_set_image(table_entry *e, struct floe_file_image **out, floe_errinfo *err);
/* The table's figures (its engine's, from a STATS batch) with its open set's
 * memory counted in (memory_bytes, bytes_per_key): a state's bytes are its
 * key's in the table and its place in the open set. */
void entry_count_open_set(const table_entry *e, floe_table_stats *s);
/* The entry named name with a reference taken, or NULL. */
table_entry *registry_get(registry *r, const char *name);
/* Wraps table t in a new entry (with its batcher) and adds it; an
 * exploring table's open set is open_set (a loaded one; NULL: a new, empty
 * one), taken over and moved where t lives (its GPU's memory; a loaded one
 * that does not fit there stays in host memory, with a warning).  On failure t and open_set are destroyed and the error
 * says why (exists, max-tables). */
floe_status registry_install(registry *r, floe_table *t, floe_explore *open_set, size_t max_tables,
                             floe_errinfo *err);
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

/* Any thread: queues a removed entry (with the registry's reference) for
 * destruction and wakes the reaper (wake_reaper, set by the owner of the
 * main loop; without one the caller runs registry_reap_run itself). */
void registry_reap(registry *r, table_entry *e);
/* Main thread: destroys the tables queued for reaping. */
void registry_reap_run(registry *r);

/* The backend a table of `kind` asking for `want` (cpu, gpu or auto) runs
 * on: auto is the GPU where floed has one (every kind has an engine on
 * both).  gpu without a device is an error. */
floe_status registry_backend_for(registry *r, const char *want, floe_kind kind, floe_backend **be, floe_errinfo *err);
/* The backend a saved table goes back to: the one it ran on, or the CPU
 * engine where floed has no GPU (the file format is the same).  *moved:
 * a GPU table that loads on the CPU. */
floe_status registry_backend_for_file(registry *r, const char *path, floe_backend **be, bool *moved,
                                      floe_errinfo *err);

#endif
