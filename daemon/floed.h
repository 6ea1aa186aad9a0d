/*
 * floed.h - floed's life: start, serve until SIGTERM or SIGINT, stop.
 */
#ifndef FLOE_DAEMON_FLOED_H
#define FLOE_DAEMON_FLOED_H

#include "config.h"

/* floed's exit codes (floed --help and floed(8) say them). */
#define FLOED_EXIT_OK      0 /* stopped cleanly */
#define FLOED_EXIT_FAILED  1 /* see the log */
#define FLOED_EXIT_SETTING 2 /* a setting that cannot work here */
#define FLOED_EXIT_GPU     3 /* a GPU failed and gpu-fault-exit stopped floed */

/* Runs floed; returns the exit code (FLOED_EXIT_*).  argv is read again on SIGHUP. */
int floed_run(const floed_config *cfg, int argc, char **argv);

#endif
