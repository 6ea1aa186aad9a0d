/*
 * server.h - floed's shared state: what every part reads.
 *
 * Threads (written down once, as in memcached):
 *   main       the listener, signals and the reaper (tables being dropped are
 *              destroyed here, never on their own backend thread): floed.c;
 *   io x N     each with its own libevent base: reads frames (conn.c), turns
 *              each request into table work or an answer (request.c, its
 *              handlers in ops/, items), and
 *              writes every response of its connections;
 *   backend    the table engine's threads (tables/backend.h) run batches and
 *              call back into the batcher, which ends each job; request.c
 *              turns its end into a response for its connection's io thread.
 * A connection belongs to one io thread for its whole life.  Requests in
 * flight hold a reference to their connection, so a client that disconnects
 * costs only the work already queued for it.
 *
 * The daemon's files, each using only those above it:
 *   log, config, datadir, tls, envelope, resp_wire   leaves (hostmem, queue: tables/)
 *   rows       the requests' rows (macros only: metrics counts by them)
 *   reply      response frames; the session (where answers go)
 *   batcher    a table's jobs into engine batches (the backend interface only)
 *   registry   tables by name, their backends, reaping
 *   server     this: settings, io threads' inboxes, the shared parts
 *   metrics    counters and the info and Prometheus renderings
 *   snapshot   the saver thread
 *   item       a request's job to its answer; answers of several tables
 *   ops/       the handlers by family (keys, ordered, tables, service)
 *   request    a decoded request to its row's handler
 *   resp       the Redis protocol port's commands to requests, answers to replies
 *   conn       connections and io threads: framing, back-pressure
 *   metrics_port  the HTTP server of /metrics
 *   floed      start, listeners, signals, data-dir, stop
 */
#ifndef FLOE_DAEMON_SERVER_H
#define FLOE_DAEMON_SERVER_H

#include <event2/event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "backend.h"
#include "config.h"
#include "queue.h"
#include "registry.h"

struct conn;
struct saver;
struct metrics;
struct metrics_port;

/* The settings SIGHUP may change while floed runs (config.c marks them
 * live).  Every thread reads them, so the numbers are atomics (LIVE) and
 * the strings are read under the lock; srv->cfg keeps the rest. */
typedef struct live_settings {
    atomic_uint_fast64_t max_connections, max_frame, max_inflight, max_tables, max_batch_keys;
    atomic_uint_fast64_t save_every, save_after_changes;
    atomic_uint_fast64_t timeout, hello_timeout, frame_timeout, output_soft_limit, output_hard_limit;
    atomic_uint_fast64_t output_total_limit, max_table_bytes, maxmemory, maxmemory_gpu;
    pthread_mutex_t lock;
    char token[sizeof(((floed_config *)0)->token)];
    char backend[sizeof(((floed_config *)0)->backend)];
} live_settings;

#define LIVE(srv, field) atomic_load_explicit(&(srv)->live.field, memory_order_relaxed)

/* A socket accepted by the main thread, on its way to an io thread. */
typedef struct accepted {
    int fd;
    bool tls;  /* over TLS: from the TLS port, or the RESP port with tls-only */
    bool resp; /* from the RESP port */
} accepted;

typedef struct io_thread {
    struct server *srv;
    pthread_t thread;
    struct event_base *base;
    struct event *wake;
    struct event *tick;   /* once a second: closes idle connections and those that never said hello */
    pthread_mutex_t lock; /* guards the inboxes below */
    queue deliveries;     /* answers (reply.h frames) for its connections */
    accepted *new_fds;
    size_t nnew, capnew;
    bool stopping;             /* under lock: set by the main thread */
    bool stop_seen;            /* io thread's copy */
    struct event *stop_timer;  /* the stop's hard limit: close whatever is left */
    struct event *sweep_timer; /* during the stop: close connections gone quiet */
    struct conn *conns;        /* open connections, io thread only */
} io_thread;

typedef struct server {
    floed_config cfg; /* as started; the live settings are in live */
    live_settings live;
    int argc; /* the command line, read again on SIGHUP */
    char **argv;
    struct event_base *base;
    struct evconnlistener *listener;     /* the plain port (NULL with tls-only) */
    struct evconnlistener *tls_listener; /* the TLS port (NULL without tls-port) */
    struct evconnlistener *resp_listener; /* the Redis protocol's port (NULL without resp-port) */
    unsigned resp_port;
    struct tls_server *tls;              /* the TLS context (tls.h) */
    unsigned tls_port;
    int reserve_fd;                /* /dev/null, given up to accept and close a connection when out of fds */
    uint64_t fd_connections;       /* connections the open-file limit allows */
    struct event *accept_pause_ev; /* listeners back on after a pause for want of fds */
    io_thread *io;
    size_t nio, next_io;
    atomic_int nconns;
    atomic_uint_fast64_t out_bytes; /* every connection's responses not yet written to its socket (conn.c) */
    atomic_bool shutting_down;
    atomic_uint_fast64_t rss; /* resident bytes, sampled every MEMORY_SAMPLE_MS on the main thread (maxmemory) */
    /* with maxmemory-gpu: the most device memory in use on one of floed's GPUs, and which, sampled likewise */
    atomic_uint_fast64_t gpu_used;
    atomic_int gpu_used_device;
    /* the tables and their backends: reg.cpu (tables/partition.h over the
     * CPU engine), reg.gpu (over one GPU backend per device; NULL without) */
    registry reg;
    int gpu_ids[FLOE_PARTS_MAX]; /* reg.gpu's devices (setting gpus) */
    int ngpus;
    struct floe_pool *merge_pool;      /* batchers' large merges (NULL: inline) */
    struct hostmem *mem;               /* requests' frames and batches' answers (hostmem.h) */
    struct metrics *metrics;           /* counters (metrics.h) */
    struct metrics_port *metrics_port; /* the HTTP server of /metrics (metrics_port.h) */
    struct event *sig_term, *sig_int, *reap_ev, *drain_ev;
    struct event *stop_asked; /* a client's shutdown: the stop begins on the main thread */
    struct event *config_asked;  /* clients' CONFIG requests, run on the main thread (config_requests_run) */
    pthread_mutex_t config_lock; /* config_q */
    queue config_q;
    atomic_bool stop_nosave;  /* ... and saves nothing */
    struct event *sig_hup, *snapshot_ev, *watchdog_ev, *health_ev, *memory_ev;
    bool gpu_failed[FLOE_PARTS_MAX]; /* gpu_ids[i] was seen failed (floed.c: the health watch) */
    struct saver *saver;             /* with a data-dir: writes snapshots, removes dropped tables' files */
    int lock_fd;                     /* data-dir's lock, held for floed's life */
    unsigned port;
    int exit_code;
} server;

/* What serves requests, without listener, signals, timers, data-dir or io
 * threads (floed.c adds them; tests/fuzz drives the rest itself): the
 * settings, counters, registry, backends, merge pool, and the main event
 * base with its reaper.  0, or floed's exit code for a failed start (2: a
 * setting that cannot work here).  argv is read again on SIGHUP. */
int server_new(const floed_config *cfg, int argc, char **argv, server **out);
/* Destroys every table, then srv; its io threads must be gone. */
void server_free(server *srv);

/* Applies the live settings of c (SIGHUP). */
void server_set_live(server *srv, const floed_config *c);
/* The settings in force (main thread): srv->cfg with the live token and backend. */
void server_settings(server *srv, floed_config *out);
/* Applies next's live settings to a running floed (main thread), logging
 * each change as `who`'s: applied, or kept until a restart; *live and
 * *restart (may be NULL) count them. */
void server_apply_settings(server *srv, const floed_config *next, const char *who, int *live, int *restart);
/* maxmemory: whether a write must be refused now (floed is at its limit),
 * with why in msg.  Any thread. */
#define MEMORY_SAMPLE_MS 50
bool server_over_memory(server *srv, char *msg, size_t len);
/* maxmemory-gpu: the same for a write to a GPU table (one of floed's GPUs is at the limit). */
bool server_over_gpu_memory(server *srv, char *msg, size_t len);
/* Reads the resident memory into srv->rss, and with maxmemory-gpu the GPUs' into srv->gpu_used (the main
 * thread's timer). */
void server_sample_memory(server *srv);
/* The live token: whether one is set, and whether got is it (constant time). */
bool server_token_required(server *srv);
/* A client's shutdown: floed stops as on SIGTERM, saving its tables unless nosave (any thread). */
void server_ask_stop(server *srv, bool nosave);
bool server_token_matches(server *srv, const char *got);
/* The live default backend for new tables (cpu, gpu or auto), copied into buf. */
const char *server_default_backend(server *srv, char buf[sizeof(((floed_config *)0)->backend)]);
/* The name of the backend new tables get by default now (hello, info). */
const char *server_default_backend_name(server *srv);

/* The first of floed's GPUs that has failed (floe_gpu_healthy), with why,
 * or -1 while every one works. */
int server_failed_gpu(server *srv, char *why, size_t len);

/* CPU time of all io threads so far (the io_cpu stage), with its count
 * the number of io threads. */
floe_stage_time server_io_cpu(server *srv);

#endif
