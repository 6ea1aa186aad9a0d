/*
 * snapshot.h - table snapshots while floed serves.
 *
 * A snapshot is two steps.  A COPY item goes through the table's batcher
 * like any request, so the copy holds every request queued before it; the
 * backend copies the table's arrays into a host image (the only pause the
 * table sees).  The saver thread then writes the image: a temporary file,
 * fsync, rename over DIR/NAME.floe, fsync of the directory, so a crash
 * leaves the previous snapshot or the new one.  The saver also removes the
 * files of dropped tables, in the same queue, so that a write queued before
 * a drop can never bring the file back after it.
 *
 * Snapshots come from `floe snapshot` (answered once written), from the
 * rules (save-every, save-after-changes: snapshot_tick on the main loop,
 * one snapshot of a table at a time) and, at shutdown, from server.c
 * (after the saver has finished, so an older image never lands last).
 */
#ifndef FLOE_DAEMON_SNAPSHOT_H
#define FLOE_DAEMON_SNAPSHOT_H

#include <stdbool.h>
#include <stdint.h>

#include "batcher.h"

struct server;
struct table_entry;
typedef struct saver saver;

/* NULL if the thread cannot start. */
saver *saver_start(struct server *srv);
/* Writes what is queued, then stops the thread. */
void saver_stop(saver *s);
/* Nothing queued or being written. */
bool saver_idle(saver *s);

/* A COPY item for e's table, answered to c (NULL: a snapshot by the rules,
 * answered to nobody), or NULL if out of memory. */
item *snapshot_item(struct server *srv, struct conn *c, uint64_t id, struct table_entry *e);

/* Batcher: takes over a COPY item whose copy is done (it->image set unless
 * status failed) and writes it. */
void saver_write(saver *s, item *it, floe_status status, const char *error);
/* Batcher: takes over the DRAIN item of a dropped table (it->path set):
 * removes the file, then answers the drop. */
void saver_remove(saver *s, item *it);

/* Main loop, once a second: snapshots the tables the rules say are due. */
void snapshot_tick(struct server *srv);

#endif
