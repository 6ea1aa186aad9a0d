/*
 * snapshot.h - table snapshots while floed serves.
 *
 * A snapshot is two steps.  A COPY job goes through the table's batcher
 * like any request, so the copy holds every request queued before it; the
 * backend copies the table's arrays into a host image (the only pause the
 * table sees).  The saver thread then writes the image: a temporary file,
 * fsync, rename over DIR/NAME.floe, fsync of the directory, so a crash
 * leaves the previous snapshot or the new one.  The saver also removes the
 * files of dropped tables, in the same queue, so that a write queued before
 * a drop can never bring the file back after it.
 *
 * Snapshots come from `floe snapshot` (answered once written), from the
 * rules (save-every, save-after-changes: request_snapshot_tick on the main
 * loop, one snapshot of a table at a time) and, at shutdown, from floed.c
 * (after the saver has finished, so an older image never lands last).
 * The saver knows jobs only: request.c makes them and answers them.
 */
#ifndef FLOE_DAEMON_SNAPSHOT_H
#define FLOE_DAEMON_SNAPSHOT_H

#include <stdbool.h>
#include <stdint.h>

#include "queue.h"
#include "registry.h"

struct metrics;
struct floe_file_image;
typedef struct saver saver;

/* A file to write or remove, in the saver's order. */
typedef struct save_job {
    queue_link link;
    const char *path;              /* the table's file */
    struct floe_file_image *image; /* a write: the copy (the saver frees it once written); NULL: remove path */
    table_entry *entry;            /* a write: the table, for its bookkeeping */
    uint64_t changes;              /* a write: the batcher's change count the copy holds */
    bool by_rules;                 /* a write by the rules: clears entry->snapshot_pending */
    floe_status status;            /* a write whose copy failed: reported in its turn */
    const char *error;
    /* Called once, on the saver thread, when the job is done. */
    void (*done)(struct save_job *sj, floe_status st, const char *error);
} save_job;

/* NULL if the thread cannot start.  Outcomes are counted in m. */
saver *saver_start(struct metrics *m);
/* Writes what is queued, then stops the thread. */
void saver_stop(saver *s);
/* Nothing queued or being written. */
bool saver_idle(saver *s);
/* Queues sj (a write, or the removal of a dropped table's file). */
void saver_queue(saver *s, save_job *sj);

#endif
