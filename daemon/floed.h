/*
 * floed.h - floed's life: start, serve until SIGTERM or SIGINT, stop.
 */
#ifndef FLOE_DAEMON_FLOED_H
#define FLOE_DAEMON_FLOED_H

#include "config.h"

/* Runs floed; returns the exit code (2: a setting that cannot work here).
 * argv is read again on SIGHUP. */
int floed_run(const floed_config *cfg, int argc, char **argv);

#endif
