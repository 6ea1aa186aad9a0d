/*
 * metrics_port.h - the HTTP server of /metrics (metrics-port, metrics-bind),
 * on a thread of its own: each scrape gathers every table's figures
 * (request_gather) and renders them with the counters (metrics.h).
 */
#ifndef FLOE_DAEMON_METRICS_PORT_H
#define FLOE_DAEMON_METRICS_PORT_H

struct server;
typedef struct metrics_port metrics_port;

/* Starts the HTTP server when metrics-port is set (logs the address) into
 * srv->metrics_port.  0, or -1 (logged) if it cannot listen. */
int metrics_port_start(struct server *srv);
/* Stops it; scrapes still gathering are dropped when their tables answer
 * (before the backends are destroyed).  NULL is fine. */
void metrics_port_stop(metrics_port *p);

#endif
