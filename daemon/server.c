/*
 * server.c - floed's life: start (engine, tables from data-dir, io threads,
 * listener), serve, and the graceful stop on SIGTERM/SIGINT: stop accepting,
 * answer queued requests with ERR_SHUTTING_DOWN, let batches in flight
 * finish, save every table if data-dir is set, flush responses, exit 0.
 */
#define _GNU_SOURCE
#include "server.h"

#include "batcher.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend_gpu.h"
#include "conn.h"
#include "log.h"
#include "pool.h"
#include "tablefile.h"

#define MERGE_THREADS 4 /* the batchers' pool for large merges: the caller and three helpers */

/* ---- io threads ------------------------------------------------------------------------ */

static void *io_main(void *arg)
{
    io_thread *io = arg;
    pthread_setname_np(pthread_self(), "floed-io"); /* for top -H and ps -L */
    event_base_loop(io->base, EVLOOP_NO_EXIT_ON_EMPTY);
    return NULL;
}

static int start_io(server *srv)
{
    srv->nio = srv->cfg.io_threads;
    srv->io = calloc(srv->nio, sizeof *srv->io);
    if (!srv->io)
        return -1;
    for (size_t i = 0; i < srv->nio; i++) {
        io_thread *io = &srv->io[i];
        io->srv = srv;
        pthread_mutex_init(&io->lock, NULL);
        io->base = event_base_new();
        io->wake = io->base ? event_new(io->base, -1, 0, io_wake, io) : NULL;
        if (!io->wake || pthread_create(&io->thread, NULL, io_main, io) != 0) {
            log_error("cannot start io thread %zu", i);
            return -1;
        }
    }
    return 0;
}

floe_stage_time server_io_cpu(server *srv)
{
    floe_stage_time t = {0, 0, 0};
    for (size_t i = 0; i < srv->nio; i++) {
        clockid_t cid;
        struct timespec ts;
        if (pthread_getcpuclockid(srv->io[i].thread, &cid) == 0 && clock_gettime(cid, &ts) == 0) {
            t.count++;
            t.nanos += (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        }
    }
    return t;
}

static void stop_io(server *srv)
{
    for (size_t i = 0; i < srv->nio; i++) {
        io_thread *io = &srv->io[i];
        pthread_mutex_lock(&io->lock);
        io->stopping = true;
        pthread_mutex_unlock(&io->lock);
        event_active(io->wake, EV_READ, 0);
    }
    for (size_t i = 0; i < srv->nio; i++) {
        io_thread *io = &srv->io[i];
        pthread_join(io->thread, NULL);
        if (io->stop_timer)
            event_free(io->stop_timer);
        if (io->sweep_timer)
            event_free(io->sweep_timer);
        event_free(io->wake);
        event_base_free(io->base);
        free(io->new_fds);
        while (io->deliveries) { /* answers that arrived after the connection's last chance */
            frame *f = io->deliveries;
            io->deliveries = f->next;
            conn *c = f->to;
            free(f->item ? batcher_pack(f) : f);
            conn_unref(c);
        }
        pthread_mutex_destroy(&io->lock);
    }
    free(srv->io);
    srv->io = NULL;
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len, void *arg)
{
    (void)l;
    (void)sa;
    (void)len;
    server *srv = arg;
    io_thread *io = &srv->io[srv->next_io++ % srv->nio];
    pthread_mutex_lock(&io->lock);
    if (io->nnew == io->capnew) {
        size_t cap = io->capnew ? 2 * io->capnew : 16;
        int *grown = realloc(io->new_fds, cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&io->lock);
            log_error("out of memory accepting a connection");
            evutil_closesocket(fd);
            return;
        }
        io->new_fds = grown;
        io->capnew = cap;
    }
    io->new_fds[io->nnew++] = fd;
    pthread_mutex_unlock(&io->lock);
    event_active(io->wake, EV_READ, 0);
}

/* ---- dropped tables ---------------------------------------------------------------------- */

static void reap_all(server *srv)
{
    pthread_mutex_lock(&srv->reap_lock);
    table_entry *list = srv->reap_list;
    srv->reap_list = NULL;
    pthread_mutex_unlock(&srv->reap_lock);
    while (list) {
        table_entry *e = list;
        list = e->next;
        log_info("table %s dropped", e->name);
        floe_table_destroy(e->table);
        e->table = NULL;
        entry_unref(e);
    }
}

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    reap_all(arg);
}

void server_reap(server *srv, table_entry *e)
{
    pthread_mutex_lock(&srv->reap_lock);
    e->next = srv->reap_list;
    srv->reap_list = e;
    pthread_mutex_unlock(&srv->reap_lock);
    event_active(srv->reap_ev, EV_READ, 0);
}

/* ---- persistence ------------------------------------------------------------------------- */

floe_status server_backend_for(server *srv, const char *want, floe_backend **be, floe_error *err)
{
    if (strcmp(want, "cpu") == 0) {
        *be = srv->cpu;
        return FLOE_OK;
    }
    if (strcmp(want, "gpu") == 0 && !srv->gpu)
        return floe_error_set(err, FLOE_ERR_UNSUPPORTED, "backend gpu: %s", srv->gpu_name);
    *be = srv->gpu ? srv->gpu : srv->cpu;
    return FLOE_OK;
}

/* A saved table goes back to the backend it ran on, or to the CPU engine
 * where this host has no GPU (the file format is the same). */
static floe_status backend_for_file(server *srv, const char *path, floe_backend **be, floe_error *err)
{
    floe_file_header h;
    floe_file_reader *r;
    floe_status st = floe_file_open(path, &h, &r, err);
    if (st != FLOE_OK)
        return st;
    floe_file_close(r);
    if (strcmp(h.spec.backend, "gpu") == 0 && !srv->gpu)
        log_warn("%s ran on the GPU; this floed has none, so it is loaded on the CPU engine", path);
    *be = strcmp(h.spec.backend, "cpu") == 0 || !srv->gpu ? srv->cpu : srv->gpu;
    return FLOE_OK;
}

static int load_tables(server *srv)
{
    DIR *d = opendir(srv->cfg.data_dir);
    if (!d) {
        if (errno == ENOENT && mkdir(srv->cfg.data_dir, 0755) == 0) {
            log_info("created data-dir %s: starting with no tables", srv->cfg.data_dir);
            return 0;
        }
        log_error("cannot open data-dir %s: %s", srv->cfg.data_dir, strerror(errno));
        return -1;
    }
    struct dirent *de;
    int rc = 0;
    while (rc == 0 && (de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 6 || strcmp(de->d_name + len - 5, ".floe") != 0)
            continue;
        char *path;
        if (asprintf(&path, "%s/%s", srv->cfg.data_dir, de->d_name) < 0)
            return -1;
        floe_error err;
        floe_table *t;
        floe_backend *be = NULL;
        floe_status st = backend_for_file(srv, path, &be, &err);
        if (st == FLOE_OK)
            st = floe_table_load(be, path, &t, &err);
        if (st == FLOE_OK) {
            char name[FLOE_NAME_MAX + 1];
            strcpy(name, t->spec.name);
            st = registry_install(&srv->reg, srv, t, srv->cfg.max_tables, &err);
            if (st == FLOE_OK)
                log_info("loaded table %s from %s (backend %s)", name, path, floe_backend_name(be));
        }
        if (st != FLOE_OK) {
            log_error("cannot load %s: %s (move the file away to start without it)", path, err.msg);
            rc = -1;
        }
        free(path);
    }
    closedir(d);
    return rc;
}

static void save_tables(server *srv)
{
    size_t n;
    table_entry **all = registry_list(&srv->reg, &n);
    for (size_t i = 0; i < n; i++) {
        char *path;
        if (asprintf(&path, "%s/%s.floe", srv->cfg.data_dir, all[i]->name) < 0)
            continue;
        floe_batch b = {.op = FLOE_OP_SAVE, .path = path};
        if (floe_table_run(all[i]->table, &b) == FLOE_OK) {
            log_info("saved table %s to %s", all[i]->name, path);
        } else {
            log_error("cannot save table %s: %s", all[i]->name, b.error.msg);
            srv->exit_code = 1;
        }
        free(path);
    }
    for (size_t i = 0; i < n; i++)
        entry_unref(all[i]);
    free(all);
}

/* ---- shutdown ------------------------------------------------------------------------------ */

static bool all_idle(server *srv)
{
    size_t n;
    table_entry **all = registry_list(&srv->reg, &n);
    bool idle = true;
    for (size_t i = 0; i < n; i++) {
        idle = idle && batcher_idle(&all[i]->bt);
        entry_unref(all[i]);
    }
    free(all);
    return idle;
}

static void on_drain_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    server *srv = arg;
    if (!all_idle(srv))
        return; /* batches still with the engine: look again at the next tick */
    if (srv->cfg.data_dir[0])
        save_tables(srv);
    event_base_loopbreak(srv->base);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    server *srv = arg;
    if (atomic_exchange(&srv->shutting_down, true))
        return;
    log_info("%s: shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    evconnlistener_disable(srv->listener);
    size_t n;
    table_entry **all = registry_list(&srv->reg, &n);
    for (size_t i = 0; i < n; i++) {
        batcher_shutdown(&all[i]->bt);
        entry_unref(all[i]);
    }
    free(all);
    struct timeval tick = {0, 10000};
    srv->drain_ev = event_new(srv->base, -1, EV_PERSIST, on_drain_tick, srv);
    if (srv->drain_ev)
        event_add(srv->drain_ev, &tick);
    else
        event_base_loopbreak(srv->base);
}

/* ---- start ----------------------------------------------------------------------------------- */

static int write_port_file(const char *path, unsigned port)
{
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    fprintf(f, "%u\n", port);
    if (fclose(f) != 0)
        return -1;
    return rename(tmp, path);
}

static int start_listener(server *srv)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, srv->cfg.bind, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)srv->cfg.port);
        sl = sizeof *v4;
    } else if (inet_pton(AF_INET6, srv->cfg.bind, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)srv->cfg.port);
        sl = sizeof *v6;
    } else {
        log_error("bind: '%s' is not an IPv4 or IPv6 address", srv->cfg.bind);
        return -1;
    }
    srv->listener = evconnlistener_new_bind(srv->base, on_accept, srv,
                                            LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC, 1024,
                                            (struct sockaddr *)&ss, (int)sl);
    if (!srv->listener) {
        log_error("cannot listen on %s port %llu: %s", srv->cfg.bind, (unsigned long long)srv->cfg.port,
                  strerror(errno));
        return -1;
    }
    socklen_t len = sizeof ss;
    getsockname(evconnlistener_get_fd(srv->listener), (struct sockaddr *)&ss, &len);
    srv->port = ntohs(ss.ss_family == AF_INET6 ? v6->sin6_port : v4->sin_port);
    return 0;
}

/* The GPU backend, where this build has one and the host a device. */
static int start_gpu(server *srv)
{
    floe_error err;
    char dev[96];
    if (!floe_gpu_built()) {
        snprintf(srv->gpu_name, sizeof srv->gpu_name, "this floed was built without GPU support (GPU=0)");
    } else if (!floe_gpu_device(dev, sizeof dev)) {
        snprintf(srv->gpu_name, sizeof srv->gpu_name, "this host has no GPU (no CUDA device found)");
    } else if (floe_backend_gpu_create((unsigned)srv->cfg.engine_threads, &srv->gpu, &err) != FLOE_OK) {
        snprintf(srv->gpu_name, sizeof srv->gpu_name, "the GPU backend did not start: %s", err.msg);
    } else {
        snprintf(srv->gpu_name, sizeof srv->gpu_name, "%s", dev);
        log_info("GPU backend on %s", dev);
    }
    if (!srv->gpu && strcmp(srv->cfg.backend, "gpu") == 0) {
        log_error("backend gpu: %s", srv->gpu_name);
        return -1;
    }
    return 0;
}

int server_run(const floed_config *cfg)
{
    server *srv = calloc(1, sizeof *srv);
    if (!srv)
        return 1;
    srv->cfg = *cfg;
    atomic_init(&srv->nconns, 0);
    atomic_init(&srv->shutting_down, false);
    registry_init(&srv->reg);
    pthread_mutex_init(&srv->reap_lock, NULL);
    signal(SIGPIPE, SIG_IGN);
    int rc = 1;
    floe_error err;
    if (floe_backend_cpu_create((unsigned)cfg->engine_threads, &srv->cpu, &err) != FLOE_OK) {
        log_error("cannot start the CPU engine: %s", err.msg);
        free(srv);
        return 1;
    }
    if (start_gpu(srv) != 0)
        goto out;
    /* a few threads: large merges are memory-bound (a NULL pool merges inline) */
    if (floe_pool_create(MERGE_THREADS, &srv->merge_pool, &err) != FLOE_OK)
        log_warn("merging batches on one thread: %s", err.msg);
    srv->base = event_base_new();
    srv->reap_ev = srv->base ? event_new(srv->base, -1, 0, on_reap, srv) : NULL;
    srv->sig_term = srv->base ? evsignal_new(srv->base, SIGTERM, on_signal, srv) : NULL;
    srv->sig_int = srv->base ? evsignal_new(srv->base, SIGINT, on_signal, srv) : NULL;
    if (!srv->reap_ev || !srv->sig_term || !srv->sig_int || event_add(srv->sig_term, NULL) ||
        event_add(srv->sig_int, NULL)) {
        log_error("cannot set up the main event loop");
        goto out;
    }
    if (cfg->data_dir[0] && load_tables(srv) != 0)
        goto out;
    if (start_io(srv) != 0 || start_listener(srv) != 0)
        goto out;
    if (cfg->port_file[0] && write_port_file(cfg->port_file, srv->port) != 0) {
        log_error("cannot write port-file %s: %s", cfg->port_file, strerror(errno));
        goto out;
    }
    floe_backend *dflt = srv->cpu;
    server_backend_for(srv, cfg->backend, &dflt, &err);
    log_info("floed %s listening on %s:%u (new tables: backend %s, %zu io threads, max-frame %llu, max-inflight %llu%s)",
             FLOED_VERSION, cfg->bind, srv->port, floe_backend_name(dflt), srv->nio,
             (unsigned long long)cfg->max_frame, (unsigned long long)cfg->max_inflight,
             cfg->token[0] ? ", token required" : "");
    event_base_loop(srv->base, EVLOOP_NO_EXIT_ON_EMPTY);
    rc = srv->exit_code;
out:
    /* Stopping: a second signal must not kill floed halfway through. */
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    if (srv->listener)
        evconnlistener_free(srv->listener);
    if (srv->io)
        stop_io(srv);
    reap_all(srv);
    table_entry *e;
    while ((e = srv->reg.head)) {
        registry_remove(&srv->reg, e->name);
        floe_table_destroy(e->table);
        e->table = NULL;
        entry_unref(e);
    }
    if (srv->drain_ev)
        event_free(srv->drain_ev);
    if (srv->sig_term)
        event_free(srv->sig_term);
    if (srv->sig_int)
        event_free(srv->sig_int);
    if (srv->reap_ev)
        event_free(srv->reap_ev);
    if (srv->base)
        event_base_free(srv->base);
    /* freeing the signal events put back the default actions: a late signal must still not kill */
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    floe_backend_destroy(srv->cpu);
    floe_backend_destroy(srv->gpu);
    floe_pool_destroy(srv->merge_pool);
    if (rc == 0)
        log_info("floed stopped");
    free(srv);
    return rc;
}
