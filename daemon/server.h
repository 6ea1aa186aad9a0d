/*
 * server.h - floed's moving parts and how they fit.
 *
 * Threads (written down once, as in memcached):
 *   main       the listener, signals and the reaper (tables being dropped are
 *              destroyed here, never on their own backend thread);
 *   io x N     each with its own libevent base: reads frames, parses requests,
 *              answers what needs no table at once and hands the rest to the
 *              table's batcher; writes every response of its connections;
 *   backend    the table engine's threads (tables/backend.h) run batches and
 *              call back into the batcher, which packs the responses and
 *              hands each to its connection's io thread (conn_deliver).
 * A connection belongs to one io thread for its whole life.  Requests in
 * flight hold a reference to their connection, so a client that disconnects
 * costs only the work already queued for it.
 */
#ifndef FLOE_DAEMON_SERVER_H
#define FLOE_DAEMON_SERVER_H

#include <event2/event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "backend.h"
#include "config.h"
#include "registry.h"

typedef struct conn conn;
typedef struct frame frame;
struct saver;

/* The settings SIGHUP may change while floed runs (config.c marks them
 * live).  Every thread reads them, so the numbers are atomics (LIVE) and
 * the strings are read under the lock; srv->cfg keeps the rest. */
typedef struct live_settings {
    atomic_uint_fast64_t max_connections, max_frame, max_inflight, max_tables, max_batch_keys;
    atomic_uint_fast64_t save_every, save_after_changes;
    atomic_uint_fast64_t timeout, hello_timeout, output_soft_limit, output_hard_limit;
    pthread_mutex_t lock;
    char token[sizeof(((floed_config *)0)->token)];
    char backend[sizeof(((floed_config *)0)->backend)];
} live_settings;

#define LIVE(srv, field) atomic_load_explicit(&(srv)->live.field, memory_order_relaxed)

/* A socket accepted by the main thread, on its way to an io thread. */
typedef struct accepted {
    int fd;
    bool tls; /* from the TLS port */
} accepted;

typedef struct io_thread {
    struct server *srv;
    pthread_t thread;
    struct event_base *base;
    struct event *wake;
    struct event *tick;   /* once a second: closes idle connections and those that never said hello */
    pthread_mutex_t lock; /* guards the inboxes below */
    frame *deliveries, *deliveries_tail;
    accepted *new_fds;
    size_t nnew, capnew;
    bool stopping;             /* under lock: set by the main thread */
    bool stop_seen;            /* io thread's copy */
    struct event *stop_timer;  /* the stop's hard limit: close whatever is left */
    struct event *sweep_timer; /* during the stop: close connections gone quiet */
    conn *conns;               /* open connections, io thread only */
} io_thread;

typedef struct server {
    floed_config cfg; /* as started; the live settings are in live */
    live_settings live;
    int argc; /* the command line, read again on SIGHUP */
    char **argv;
    struct event_base *base;
    struct evconnlistener *listener;     /* the plain port (NULL with tls-only) */
    struct evconnlistener *tls_listener; /* the TLS port (NULL without tls-port) */
    struct tls_server *tls;              /* the TLS context (tls.h) */
    unsigned tls_port;
    int reserve_fd;                /* /dev/null, given up to accept and close a connection when out of fds */
    uint64_t fd_connections;       /* connections the open-file limit allows */
    struct event *accept_pause_ev; /* listeners back on after a pause for want of fds */
    io_thread *io;
    size_t nio, next_io;
    atomic_int nconns;
    atomic_bool shutting_down;
    registry reg;
    floe_backend *cpu;            /* tables/partition.h over the CPU engine */
    floe_backend *gpu;            /* tables/partition.h over one GPU backend per device; NULL without a device */
    int gpu_ids[FLOE_PARTS_MAX];  /* its devices (setting gpus) */
    int ngpus;
    struct floe_pool *merge_pool; /* batchers' large merges (NULL: inline) */
    struct metrics *metrics;      /* counters, info, /metrics (metrics.h) */
    char gpu_name[400];           /* the device, or why there is none */
    struct event *sig_term, *sig_int, *reap_ev, *drain_ev;
    struct event *sig_hup, *snapshot_ev, *watchdog_ev;
    struct saver *saver; /* with a data-dir: writes snapshots, removes dropped tables' files */
    int lock_fd;         /* data-dir's lock, held for floed's life */
    pthread_mutex_t reap_lock;
    table_entry *reap_list;
    unsigned port;
    int exit_code;
} server;

/* Runs floed until SIGTERM or SIGINT; returns the exit code (2: a setting
 * that cannot work here).  argv is read again on SIGHUP. */
int server_run(const floed_config *cfg, int argc, char **argv);

/* What serves requests, without listener, signals, timers, data-dir or io
 * threads (server_run adds them; tests/fuzz drives the rest itself): the
 * settings, counters, registry, backends, merge pool, and the main event
 * base with its reaper.  0, or server_run's exit code for a failed start. */
int server_new(const floed_config *cfg, int argc, char **argv, server **out);
/* Destroys every table, then srv; its io threads must be gone. */
void server_free(server *srv);
/* An io thread's event base, wake event and inbox; server_run starts a
 * thread on each, tests/fuzz runs the base on its own thread.  0 or -1. */
int io_thread_init(server *srv, io_thread *io);
/* Once nothing runs its base: answers still undelivered are dropped. */
void io_thread_free(io_thread *io);

/* The live token: whether one is set, and whether got is it (constant time). */
bool server_token_required(server *srv);
bool server_token_matches(server *srv, const char *got);
/* The live default backend for new tables, copied into buf. */
const char *server_default_backend(server *srv, char buf[sizeof(((floed_config *)0)->backend)]);

/* The backend a table asking for `want` (cpu, gpu or auto) runs on: auto
 * is the GPU where floed has one.  gpu without a device is an error. */
floe_status server_backend_for(server *srv, const char *want, floe_backend **be, floe_errinfo *err);

/* CPU time of all io threads so far (the io_cpu stage), with its count
 * the number of io threads. */
floe_stage_time server_io_cpu(server *srv);

/* Queues a dropped table for destruction on the main thread. */
void server_reap(server *srv, table_entry *e);

#endif
