/*
 * datadir.h - floed's data directory: its lock and the names of its files.
 *
 *   DIR/floed.lock            held (flock) by the floed that owns DIR; holds its pid
 *   DIR/NAME.floe             table NAME's last complete snapshot
 *   DIR/.NAME.floe.tmp.XXXXXX a snapshot being written (renamed into place
 *                             when complete; left behind only by a crash):
 *                             floe_file_temporary's rule (tables/tablefile.h)
 *   DIR/NAME.floe.damaged     a snapshot that failed its checks at start,
 *                             set aside for the operator (never deleted)
 */
#ifndef FLOE_DAEMON_DATADIR_H
#define FLOE_DAEMON_DATADIR_H

#include <stddef.h>

#define DATADIR_LOCK    "floed.lock"
#define DATADIR_SUFFIX  ".floe"
#define DATADIR_DAMAGED ".damaged"

/* Creates dir if it is missing, takes its lock and writes our pid into it.
 * Returns the lock's fd (kept open for floed's life), or -1 with a message
 * that names the floed holding it where the lock file says. */
int datadir_lock(const char *dir, char *err, size_t errlen);

/* Removes the temporaries of interrupted snapshots (logged): only the owner
 * of the lock may, since another floed's would be live. */
void datadir_remove_temporaries(const char *dir);

/* 0 if no snapshot was set aside as damaged; else -1 with a message naming
 * the first one and what to do. */
int datadir_check_damaged(const char *dir, char *err, size_t errlen);

/* Sets path aside as PATH.damaged; 0 or -1 (errno). */
int datadir_set_aside(const char *path);

/* Table name's snapshot file (malloc'ed; NULL if out of memory). */
char *datadir_table_path(const char *dir, const char *name);

#endif
