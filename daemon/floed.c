/*
 * floed.c - floed's life: start (engine, tables from data-dir, io threads,
 * listener), serve, and the graceful stop on SIGTERM/SIGINT: stop accepting,
 * answer queued requests with ERR_SHUTTING_DOWN, let batches in flight
 * finish, save every table if data-dir is set, flush responses, exit 0.
 */
#define _GNU_SOURCE
#include "floed.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <event2/listener.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "backend_gpu.h"
#include "conn.h"
#include "datadir.h"
#include "log.h"
#include "metrics_port.h"
#include "ops/handlers.h"
#include "partition.h"
#include "request.h"
#include "server.h"
#include "snapshot.h"
#include "tablefile.h"
#include "tls.h"

/* ---- SIGHUP ---------------------------------------------------------------------------------- */

/* SIGHUP: the config file and the command line again, the live settings applied. */
static void on_hup(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    server *srv = arg;
    floed_config next;
    char err[1200];
    sd_notify(0, "RELOADING=1");
    if (config_from_args(&next, srv->argc, srv->argv, err, sizeof err) != 0) {
        log_error("SIGHUP: %s; the running settings stay as they were", err);
    } else if (strcmp(next.tls_port, srv->cfg.tls_port) != 0 && (!next.tls_port[0] || !srv->cfg.tls_port[0])) {
        /* the TLS files of a floed without a TLS port were never checked, and vice versa */
        log_error("SIGHUP: tls-port %s: turning TLS on or off needs a restart; the running settings stay as they were",
                  next.tls_port[0] ? "set" : "removed");
    } else {
        int live, restart;
        server_apply_settings(srv, &next, "SIGHUP", &live, &restart);
        log_info("SIGHUP: settings read again from %s: %d applied, %d need a restart",
                 srv->cfg.config_file[0] ? srv->cfg.config_file : "the command line", live, restart);
        if (srv->tls) { /* certificate files may have changed in place: read them again whatever the settings say */
            if (tls_server_reload(srv->tls, &srv->cfg, err, sizeof err) == 0) {
                char cert[400];
                tls_server_describe(srv->tls, cert, sizeof cert);
                log_info("SIGHUP: TLS context made again: %s", cert);
            } else {
                log_error("SIGHUP: %s; TLS goes on with the certificate it had", err);
            }
        }
    }
    sd_notify(0, "READY=1");
}

/* A client's CONFIG requests, run here on the main thread, where the settings change. */
static void on_config_asked(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    config_requests_run(arg);
}

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
    srv->nio = config_io_threads(&srv->cfg);
    srv->io = floe_calloc(srv->nio, sizeof *srv->io);
    if (!srv->io)
        return -1;
    for (size_t i = 0; i < srv->nio; i++) {
        io_thread *io = &srv->io[i];
        if (io_thread_init(srv, io) != 0 || pthread_create(&io->thread, NULL, io_main, io) != 0) {
            log_error("cannot start io thread %zu", i);
            return -1;
        }
    }
    return 0;
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
        pthread_join(srv->io[i].thread, NULL);
        io_thread_free(&srv->io[i]);
    }
    free(srv->io);
    srv->io = NULL;
}

/* Hands an accepted socket to the next io thread. */
static void dispatch(server *srv, evutil_socket_t fd, bool tls, bool resp)
{
    io_thread *io = &srv->io[srv->next_io++ % srv->nio];
    pthread_mutex_lock(&io->lock);
    if (io->nnew == io->capnew) {
        size_t cap = io->capnew ? 2 * io->capnew : 16;
        accepted *grown = floe_realloc(io->new_fds, cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&io->lock);
            log_error("out of memory accepting a connection");
            evutil_closesocket(fd);
            return;
        }
        io->new_fds = grown;
        io->capnew = cap;
    }
    io->new_fds[io->nnew++] = (accepted){fd, tls, resp};
    pthread_mutex_unlock(&io->lock);
    event_active(io->wake, EV_READ, 0);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len, void *arg)
{
    (void)l;
    (void)sa;
    (void)len;
    dispatch(arg, fd, false, false);
}

static void on_accept_tls(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len, void *arg)
{
    (void)l;
    (void)sa;
    (void)len;
    dispatch(arg, fd, true, false);
}

/* The RESP port: plain, or TLS as the main port is with tls-only. */
static void on_accept_resp(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len, void *arg)
{
    (void)l;
    (void)sa;
    (void)len;
    server *srv = arg;
    dispatch(srv, fd, srv->cfg.tls_only, true);
}

/* ---- running out of file descriptors ---------------------------------------------------------- */

/* Descriptors kept for everything but connections: listeners, the data
 * dir, table files being written, the metrics port, libevent, the GPU
 * driver. */
#define FD_RESERVE 64

/* Descriptors open now (/proc/self/fd; 0 where it cannot be read). */
static uint64_t fds_open(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    uint64_t n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n > 0 ? n - 1 : 0; /* not the directory's own */
}

/* max-connections against the open-file limit, once floed is set up (its
 * own descriptors open: listeners, io threads, the GPU driver's, one per
 * device and more): the soft limit is raised to what max-connections needs
 * where the hard limit allows; if it still falls short, floed takes fewer
 * connections and says so. */
static void check_fd_limit(server *srv)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    const uint64_t own = fds_open();
    const uint64_t need = srv->cfg.max_connections + own + FD_RESERVE;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        struct rlimit want = rl;
        want.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &want) == 0)
            rl = want;
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
        return;
    srv->fd_connections = rl.rlim_cur > own + FD_RESERVE + 1 ? rl.rlim_cur - own - FD_RESERVE : 1;
    log_warn("the open-file limit is %llu (hard limit %llu), %llu open at start: floed takes at most %llu "
             "connections, not max-connections %llu; raise the limit to %llu (ulimit -n, or LimitNOFILE= under "
             "systemd)",
             (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max, (unsigned long long)own,
             (unsigned long long)srv->fd_connections, (unsigned long long)srv->cfg.max_connections,
             (unsigned long long)need);
}

static void on_accept_resume(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    server *srv = arg;
    if (atomic_load(&srv->shutting_down))
        return;
    if (srv->listener)
        evconnlistener_enable(srv->listener);
    if (srv->tls_listener)
        evconnlistener_enable(srv->tls_listener);
    if (srv->resp_listener)
        evconnlistener_enable(srv->resp_listener);
}

/* accept() failed.  Out of descriptors, the listening socket stays readable
 * and a plain retry would spin: as memcached and Redis do, give up the
 * reserve descriptor to accept the waiting connection and close it at once
 * (the client sees a close, not a hang), take the reserve back, and pause
 * accepting for a moment. */
static void on_accept_error(struct evconnlistener *l, void *arg)
{
    server *srv = arg;
    const int e = EVUTIL_SOCKET_ERROR();
    if (e != EMFILE && e != ENFILE && e != ENOBUFS && e != ENOMEM) {
        LOG_LIMITED(LOG_WARN, "accept: %s", strerror(e));
        return;
    }
    if (srv->reserve_fd >= 0) {
        close(srv->reserve_fd);
        int fd = accept(evconnlistener_get_fd(l), NULL, NULL);
        if (fd >= 0)
            close(fd);
        srv->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    LOG_LIMITED(LOG_WARN,
                "accept: %s with %d connections open: closing new connections for 0.1 s; raise the "
                "open-file limit (ulimit -n, LimitNOFILE=) or lower max-connections",
                strerror(e), atomic_load(&srv->nconns));
    if (srv->listener)
        evconnlistener_disable(srv->listener);
    if (srv->tls_listener)
        evconnlistener_disable(srv->tls_listener);
    if (srv->resp_listener)
        evconnlistener_disable(srv->resp_listener);
    const struct timeval pause = {0, 100000};
    evtimer_add(srv->accept_pause_ev, &pause);
}

/* ---- persistence ------------------------------------------------------------------------- */

/* "3 h 2 min ago" */
static void describe_age(time_t then, char *buf, size_t len)
{
    long long d = (long long)(time(NULL) - then);
    if (d < 0)
        snprintf(buf, len, "in the future: check the clock");
    else if (d < 120)
        snprintf(buf, len, "%lld s ago", d);
    else if (d < 7200)
        snprintf(buf, len, "%lld min ago", d / 60);
    else if (d < 172800)
        snprintf(buf, len, "%lld h %lld min ago", d / 3600, d % 3600 / 60);
    else
        snprintf(buf, len, "%lld days ago", d / 86400);
}

static int read_open_set(void *ctx, void *p, size_t len)
{
    return floe_file_read_bytes(ctx, p, len);
}

/* The open set an exploring table's file ends with (tables/tablefile.h):
 * its claims out when saved are open again, under this run's tokens. */
static floe_status load_open_set(const char *path, const floe_spec *spec, floe_explore **x, floe_errinfo *err)
{
    floe_file_reader *r;
    uint64_t bytes;
    floe_status st = floe_file_open_set(path, &r, &bytes, err);
    if (st != FLOE_OK)
        return st;
    st = floe_explore_load(read_open_set, r, 0, floe_spec_shard_index(spec), x, err);
    if (st == FLOE_OK && (st = floe_file_finish(r, err)) != FLOE_OK) {
        floe_explore_destroy(*x);
        *x = NULL;
    } else if (st == FLOE_ERR_INVALID) { /* say where */
        char msg[FLOE_ERROR_MAX];
        snprintf(msg, sizeof msg, "%s", err->msg);
        floe_errinfo_set(err, st, "%s: %s", path, msg);
    }
    floe_file_close(r);
    return st;
}

/* An exploring table from its file: the open set, then the table built
 * again from the states it holds (registry.h: the file has no arrays), on
 * be, each state answered INSERTED (another answer: the file lies). */
static floe_status load_explored(floe_backend *be, const char *path, const floe_file_header *h, floe_table **out,
                                 floe_explore **open_set, floe_errinfo *err)
{
    enum { STEP = 1u << 20 };
    floe_status st = load_open_set(path, &h->spec, open_set, err);
    if (st != FLOE_OK)
        return st;
    floe_explore_counts x;
    floe_explore_stats(*open_set, &x);
    floe_spec spec = h->spec;
    snprintf(spec.backend, sizeof spec.backend, "%s", floe_backend_name(be));
    spec.parts = 0;
    if (spec.capacity < x.states + x.states / 8) /* room for what it holds at once */
        spec.capacity = x.states + x.states / 8;
    const size_t kb = spec.kind == FLOE_KIND_TREE ? (size_t)spec.words * 4 : 8;
    void *keys = floe_malloc(STEP * kb);
    uint8_t *res = floe_malloc(STEP);
    floe_table *t = NULL;
    if (!keys || !res)
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    else
        st = floe_table_create(be, &spec, &t, err);
    for (uint64_t at = 0; st == FLOE_OK && at < x.states; at += STEP) {
        const size_t n = x.states - at < STEP ? (size_t)(x.states - at) : STEP;
        floe_batch b = {.op = FLOE_OP_INSERT, .n = n, .results = res};
        if (spec.kind == FLOE_KIND_TREE)
            b.vectors = keys;
        else
            b.keys = keys;
        if ((st = floe_explore_keys(*open_set, at, n, keys, err)) == FLOE_OK && (st = floe_table_run(t, &b)) != FLOE_OK)
            *err = b.error;
        for (size_t i = 0; st == FLOE_OK && i < n; i++)
            if (res[i] != FLOE_INSERTED)
                st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%s: state %llu of its open set is there twice", path,
                                      (unsigned long long)(at + i));
    }
    free(keys);
    free(res);
    if (st != FLOE_OK) {
        floe_table_destroy(t);
        floe_explore_destroy(*open_set);
        *open_set = NULL;
        return st;
    }
    *out = t;
    return FLOE_OK;
}

/* One table file: loaded and registered, or 0/-1 for the caller to stop. */
static int load_table_file(server *srv, const char *path, size_t index, size_t count)
{
    struct stat sb;
    char age[64] = "";
    if (stat(path, &sb) == 0)
        describe_age(sb.st_mtime, age, sizeof age);
    sd_notifyf(0, "STATUS=loading table file %zu of %zu: %s (%.1f MiB)", index + 1, count, path,
               (double)sb.st_size / 1048576.0);
    const uint64_t t0 = floe_now_ns();
    floe_errinfo err;
    floe_table *t;
    floe_backend *be = NULL;
    bool moved = false;
    floe_status st = registry_backend_for_file(&srv->reg, path, &be, &moved, &err);
    if (st == FLOE_OK && moved)
        log_warn("%s ran on the GPU; this floed has none, so it is loaded on the CPU engine", path);
    floe_file_header h;
    if (st == FLOE_OK)
        st = floe_file_header_at(path, 0, &h, &err);
    floe_explore *open_set = NULL;
    if (st == FLOE_OK)
        st = h.spec.explore ? load_explored(be, path, &h, &t, &open_set, &err) : floe_table_load(be, path, &t, &err);
    char run[128] = "";
    if (open_set) {
        floe_explore_counts x;
        floe_explore_stats(open_set, &x);
        snprintf(run, sizeof run, "; its run: %llu states found, %llu open, %u levels", (unsigned long long)x.states,
                 (unsigned long long)x.open, x.levels);
    }
    if (st == FLOE_OK) {
        char name[FLOE_NAME_MAX + 1];
        strcpy(name, t->spec.name);
        st = registry_install(&srv->reg, t, open_set, srv->cfg.max_tables, &err);
        table_entry *e = st == FLOE_OK ? registry_get(&srv->reg, name) : NULL;
        if (e) {
            atomic_store(&e->saved_at, (int_fast64_t)sb.st_mtime);
            entry_unref(e);
        }
        if (st == FLOE_OK)
            log_info("loaded table %s from %s: snapshot written %s, %.1f MiB in %.2f s, backend %s%s", name, path, age,
                     (double)sb.st_size / 1048576.0, (double)(floe_now_ns() - t0) / 1e9, floe_backend_name(be), run);
    }
    if (st == FLOE_OK)
        return 0;
    if (st == FLOE_ERR_INVALID) {
        /* damaged or truncated: kept for the operator, never loaded half */
        if (datadir_set_aside(path) == 0)
            log_error("cannot load %s: %s; the file is set aside as %s%s and floed stops: see docs/OPERATIONS.md "
                      "(Persistence) for what to do",
                      path, err.msg, path, DATADIR_DAMAGED);
        else
            log_error("cannot load %s: %s (and cannot set it aside: %s); move it away to start without it", path,
                      err.msg, strerror(errno));
    } else {
        log_error("cannot load %s: %s (move the file away to start without it)", path, err.msg);
    }
    return -1;
}

static int is_table_file(const struct dirent *de)
{
    size_t len = strlen(de->d_name), sl = strlen(DATADIR_SUFFIX);
    return len > sl && strcmp(de->d_name + len - sl, DATADIR_SUFFIX) == 0;
}

/* The data-dir: locked, cleaned of unfinished snapshots, every table loaded. */
static int open_data_dir(server *srv)
{
    const char *dir = srv->cfg.data_dir;
    char err[1400];
    srv->lock_fd = datadir_lock(dir, err, sizeof err);
    if (srv->lock_fd < 0) {
        log_error("%s", err);
        return -1;
    }
    datadir_remove_temporaries(dir);
    if (datadir_check_damaged(dir, err, sizeof err) != 0) {
        log_error("%s", err);
        return -1;
    }
    struct dirent **files;
    int n = scandir(dir, &files, is_table_file, alphasort);
    if (n < 0) {
        log_error("cannot read data-dir %s: %s", dir, strerror(errno));
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        char *path = NULL;
        if (rc == 0 && floe_asprintf(&path, "%s/%s", dir, files[i]->d_name) < 0)
            rc = -1;
        if (rc == 0)
            rc = load_table_file(srv, path, (size_t)i, (size_t)n);
        free(path);
        free(files[i]);
    }
    free(files);
    if (rc == 0)
        log_info("data-dir %s: %d table%s loaded", dir, n, n == 1 ? "" : "s");
    return rc;
}

typedef struct save_state {
    server *srv;
    size_t done, count;
} save_state;

static void count_entry(table_entry *e, void *arg)
{
    (void)e;
    ((save_state *)arg)->count++;
}

static void save_entry(table_entry *e, void *arg)
{
    save_state *ss = arg;
    server *srv = ss->srv;
    char path[sizeof srv->cfg.data_dir + FLOE_NAME_MAX + 8];
    snprintf(path, sizeof path, "%s/%s%s", srv->cfg.data_dir, e->name, DATADIR_SUFFIX);
    floe_batch b = {.op = FLOE_OP_SAVE, .path = path};
    sd_notifyf(0, "STATUS=stopping: saving table %s (%zu of %zu)", e->name, ++ss->done, ss->count);
    floe_status st;
    if (e->explore) { /* its open set (entry_open_set_image) */
        floe_file_image *im = NULL;
        st = entry_open_set_image(e, &im, &b.error);
        if (st == FLOE_OK)
            st = floe_file_image_save(path, im, &b.error);
        floe_file_image_free(im);
    } else {
        st = floe_table_run(e->table, &b);
    }
    if (st == FLOE_OK) {
        log_info("saved table %s to %s", e->name, path);
    } else {
        log_error("cannot save table %s: %s", e->name, b.error.msg);
        if (srv->exit_code == 0) /* a stop for a failed GPU keeps its own code */
            srv->exit_code = 1;
    }
}

/* At the stop, with nothing else running: every table to its file. */
static void save_tables(server *srv)
{
    save_state ss = {srv, 0, 0};
    registry_each(&srv->reg, count_entry, &ss);
    registry_each(&srv->reg, save_entry, &ss);
}

/* ---- shutdown ------------------------------------------------------------------------------ */

static void idle_entry(table_entry *e, void *arg)
{
    bool *idle = arg;
    *idle = *idle && batcher_idle(&e->bt);
}

static bool all_idle(server *srv)
{
    bool idle = true;
    registry_each(&srv->reg, idle_entry, &idle);
    return idle;
}

static void shutdown_entry(table_entry *e, void *arg)
{
    (void)arg;
    batcher_shutdown(&e->bt);
}

static void on_drain_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    server *srv = arg;
    if (!all_idle(srv) || (srv->saver && !saver_idle(srv->saver)))
        return; /* batches with the engine, or snapshots being written: look again at the next tick */
    if (srv->cfg.data_dir[0] && !atomic_load(&srv->stop_nosave))
        save_tables(srv);
    else if (srv->cfg.data_dir[0])
        log_warn("shutdown nosave: the tables' changes since their last snapshots are not saved");
    event_base_loopbreak(srv->base);
}

/* The graceful stop (a signal, or gpu-fault-exit): stop accepting, finish
 * or fail what is queued, save, leave the loop. */
static void begin_stop(server *srv, const char *why)
{
    if (atomic_exchange(&srv->shutting_down, true))
        return;
    log_info("%s: shutting down", why);
    sd_notify(0, "STOPPING=1\nSTATUS=stopping: finishing requests in flight");
    if (srv->listener)
        evconnlistener_disable(srv->listener);
    if (srv->tls_listener)
        evconnlistener_disable(srv->tls_listener);
    if (srv->resp_listener)
        evconnlistener_disable(srv->resp_listener);
    registry_each(&srv->reg, shutdown_entry, NULL);
    struct timeval tick = {0, 10000};
    srv->drain_ev = event_new(srv->base, -1, EV_PERSIST, on_drain_tick, srv);
    if (srv->drain_ev)
        event_add(srv->drain_ev, &tick);
    else
        event_base_loopbreak(srv->base);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    begin_stop(arg, sig == SIGTERM ? "SIGTERM" : "SIGINT");
}

static void on_stop_asked(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    server *srv = arg;
    begin_stop(srv, atomic_load(&srv->stop_nosave) ? "a client's shutdown nosave" : "a client's shutdown");
}

/* Once a second: a GPU whose context a sticky error ruined is said once, at
 * ERROR, to the log and to systemd (its tables already answer
 * ERR_UNAVAILABLE: the backend knows), and with gpu-fault-exit floed stops
 * with FLOED_EXIT_GPU so that its service manager starts it again. */
static void on_health(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    server *srv = arg;
    for (int i = 0; i < srv->ngpus; i++) {
        char why[FLOE_ERROR_MAX];
        if (srv->gpu_failed[i] || floe_gpu_healthy(srv->gpu_ids[i], why, sizeof why) != 0)
            continue;
        srv->gpu_failed[i] = true;
        const bool stop = config_gpu_fault_exit(&srv->cfg);
        log_error("GPU %d has failed: %s; requests for its tables get ERR_UNAVAILABLE until floed restarts%s",
                  srv->gpu_ids[i], why,
                  stop ? " (gpu-fault-exit: stopping with exit code 3, to be started again from the last snapshots)"
                       : "");
        sd_notifyf(0,
                   "STATUS=degraded: GPU %d has failed (%s); its tables answer ERR_UNAVAILABLE until floed "
                   "restarts",
                   srv->gpu_ids[i], why);
        if (stop && !atomic_load(&srv->shutting_down)) {
            srv->exit_code = FLOED_EXIT_GPU;
            begin_stop(srv, "gpu-fault-exit");
        }
    }
}

static void on_snapshot_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    request_snapshot_tick(arg);
}

/* From the main loop, so that a wedged loop stops the pings and systemd
 * restarts floed. */
static void on_watchdog(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    sd_notify(0, "WATCHDOG=1");
}

/* The resident memory, for maxmemory (server_over_memory). */
static void on_memory_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    server_sample_memory(arg);
}

static int start_timers(server *srv)
{
    struct timeval second = {1, 0}, sample = {0, MEMORY_SAMPLE_MS * 1000};
    srv->memory_ev = event_new(srv->base, -1, EV_PERSIST, on_memory_tick, srv);
    if (!srv->memory_ev || event_add(srv->memory_ev, &sample) != 0)
        return -1;
    if (srv->cfg.data_dir[0]) {
        srv->snapshot_ev = event_new(srv->base, -1, EV_PERSIST, on_snapshot_tick, srv);
        if (!srv->snapshot_ev || event_add(srv->snapshot_ev, &second) != 0)
            return -1;
    }
    if (srv->reg.gpu) {
        srv->health_ev = event_new(srv->base, -1, EV_PERSIST, on_health, srv);
        if (!srv->health_ev || event_add(srv->health_ev, &second) != 0)
            return -1;
    }
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
        struct timeval half = {(time_t)(usec / 2 / 1000000), (suseconds_t)(usec / 2 % 1000000)};
        srv->watchdog_ev = event_new(srv->base, -1, EV_PERSIST, on_watchdog, srv);
        if (!srv->watchdog_ev || event_add(srv->watchdog_ev, &half) != 0)
            return -1;
        log_info("systemd watchdog: a ping every %.3f s", (double)usec / 2e6);
    }
    return 0;
}

/* ---- start ----------------------------------------------------------------------------------- */

static int write_port_file(const char *path, unsigned port)
{
    char tmp[1100];
    const int fd = floe_file_temporary(path, tmp, sizeof tmp);
    if (fd < 0)
        return -1;
    FILE *f = fchmod(fd, 0644) == 0 ? fdopen(fd, "w") : NULL; /* a port is no secret: readable by any client */
    if (!f) {
        close(fd);
        unlink(tmp);
        return -1;
    }
    fprintf(f, "%u\n", port);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Listens on bind:port (bind an address or a host name: the first address
 * it resolves to); the port it got goes to *bound. */
static struct evconnlistener *listen_on(server *srv, unsigned port, evconnlistener_cb cb, const char *what,
                                        unsigned *bound)
{
    char service[8];
    snprintf(service, sizeof service, "%u", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res;
    int rc = getaddrinfo(srv->cfg.bind, service, &hints, &res);
    if (rc != 0) {
        log_error("bind: cannot resolve '%s': %s", srv->cfg.bind, gai_strerror(rc));
        return NULL;
    }
    struct evconnlistener *l =
        evconnlistener_new_bind(srv->base, cb, srv, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
                                1024, res->ai_addr, (int)res->ai_addrlen);
    freeaddrinfo(res);
    if (!l) {
        log_error("cannot listen on %s %s %u: %s", srv->cfg.bind, what, port, strerror(errno));
        return NULL;
    }
    evconnlistener_set_error_cb(l, on_accept_error);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    getsockname(evconnlistener_get_fd(l), (struct sockaddr *)&ss, &len);
    *bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                            : ((struct sockaddr_in *)&ss)->sin_port);
    return l;
}

/* The plain port (unless tls-only) and the TLS port (with tls-port). */
static int start_listeners(server *srv)
{
    const floed_config *cfg = &srv->cfg;
    if (!cfg->tls_only && !(srv->listener = listen_on(srv, (unsigned)cfg->port, on_accept, "port", &srv->port)))
        return -1;
    if (cfg->tls_port[0]) {
        char err[1200];
        if (!(srv->tls = tls_server_new(cfg, err, sizeof err))) {
            log_error("%s", err);
            return -2; /* a setting that cannot work */
        }
        unsigned want = (unsigned)strtoul(cfg->tls_port, NULL, 10);
        if (!(srv->tls_listener = listen_on(srv, want, on_accept_tls, "tls-port", &srv->tls_port)))
            return -1;
        char what[400];
        tls_server_describe(srv->tls, what, sizeof what);
        log_info("TLS on %s:%u (%s; client certificates: %s; %s)", cfg->bind, srv->tls_port, cfg->tls_protocols,
                 cfg->tls_auth_clients, what);
    }
    if (cfg->resp_port[0]) {
        unsigned want = (unsigned)strtoul(cfg->resp_port, NULL, 10);
        if (!(srv->resp_listener = listen_on(srv, want, on_accept_resp, "resp-port", &srv->resp_port)))
            return -1;
        log_info("the Redis protocol (RESP2, RESP3) on %s:%u%s", cfg->bind, srv->resp_port,
                 cfg->tls_only ? " over TLS" : "");
    }
    return 0;
}

/* The files that name the ports.  They say floed is ready, so they are
 * written once every listener accepts, the metrics port's too. */
static int write_port_files(const server *srv)
{
    const floed_config *cfg = &srv->cfg;
    const struct {
        const char *path, *name;
        unsigned port;
    } files[] = {
        {cfg->port_file, "port-file", srv->listener ? srv->port : srv->tls_port},
        {cfg->tls_port_file, "tls-port-file", srv->tls_port},
        {cfg->resp_port_file, "resp-port-file", srv->resp_port},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        if (files[i].path[0] && write_port_file(files[i].path, files[i].port) != 0) {
            log_error("cannot write %s %s: %s", files[i].name, files[i].path, strerror(errno));
            return -1;
        }
    }
    return 0;
}

int floed_run(const floed_config *cfg, int argc, char **argv)
{
    server *srv;
    int rc = server_new(cfg, argc, argv, &srv);
    if (rc != 0)
        return rc;
    rc = 1;
    floe_errinfo err;
    /* libevent puts back the handler it found when a signal event is freed:
     * let that be SIG_IGN, so that a signal in the stop cannot kill floed */
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    srv->sig_term = evsignal_new(srv->base, SIGTERM, on_signal, srv);
    srv->sig_int = evsignal_new(srv->base, SIGINT, on_signal, srv);
    srv->stop_asked = event_new(srv->base, -1, 0, on_stop_asked, srv);
    srv->config_asked = event_new(srv->base, -1, 0, on_config_asked, srv);
    srv->sig_hup = evsignal_new(srv->base, SIGHUP, on_hup, srv);
    if (!srv->sig_term || !srv->sig_int || !srv->sig_hup || !srv->stop_asked || !srv->config_asked ||
        event_add(srv->sig_term, NULL) || event_add(srv->sig_int, NULL) || event_add(srv->sig_hup, NULL)) {
        log_error("cannot set up the main event loop");
        goto out;
    }
    if (cfg->data_dir[0]) {
        if (open_data_dir(srv) != 0)
            goto out;
        if (!(srv->saver = saver_start(srv->metrics))) {
            log_error("cannot start the snapshot thread");
            goto out;
        }
    }
    if (start_timers(srv) != 0) {
        log_error("cannot set up the main event loop's timers");
        goto out;
    }
    srv->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (!(srv->accept_pause_ev = evtimer_new(srv->base, on_accept_resume, srv)) || start_io(srv) != 0)
        goto out;
    int lrc = start_listeners(srv);
    if (lrc != 0) {
        rc = lrc == -2 ? 2 : 1;
        goto out;
    }
    if (metrics_port_start(srv) != 0 || write_port_files(srv) != 0)
        goto out;
    check_fd_limit(srv); /* before the loop runs: no connection is accepted yet */
    floe_backend *dflt = srv->reg.cpu;
    registry_backend_for(&srv->reg, cfg->backend, FLOE_KIND_SET, &dflt, &err);
    char ports[64] = "";
    if (srv->listener && srv->tls_listener)
        snprintf(ports, sizeof ports, "port %u and TLS port %u", srv->port, srv->tls_port);
    else
        snprintf(ports, sizeof ports, "%s%u", srv->listener ? "port " : "TLS port ",
                 srv->listener ? srv->port : srv->tls_port);
    char parts[48] = "";
    if (floe_backend_parts(dflt) > 1)
        snprintf(parts, sizeof parts, " in %u parts", floe_backend_parts(dflt));
    else if (floe_backend_parts(dflt) == 0 && floe_backend_devices(dflt) > 1)
        snprintf(parts, sizeof parts, " placed over %u devices", floe_backend_devices(dflt));
    log_info("floed %s listening on %s %s (new tables: backend %s%s, %zu io threads, max-frame %llu, "
             "max-inflight %llu%s)",
             FLOE_VERSION, cfg->bind, ports, floe_backend_name(dflt), parts, srv->nio,
             (unsigned long long)cfg->max_frame, (unsigned long long)cfg->max_inflight,
             cfg->token[0]                           ? ", token required"
             : !strcmp(cfg->tls_auth_clients, "yes") ? ", client certificates required"
             : cfg->protected_mode                   ? ""
                                                     : ", no authentication (protected-mode no)");
    if (cfg->data_dir[0]) {
        char every[64] = "", after[64] = "";
        if (cfg->save_every)
            snprintf(every, sizeof every, "%llu s after its last snapshot", (unsigned long long)cfg->save_every);
        if (cfg->save_after_changes)
            snprintf(after, sizeof after, "%safter %llu changes", cfg->save_every ? ", or " : "",
                     (unsigned long long)cfg->save_after_changes);
        if (every[0] || after[0])
            log_info("snapshots in %s: a changed table is saved %s%s, on demand and at shutdown", cfg->data_dir, every,
                     after);
        else
            log_info("snapshots in %s: on demand and at shutdown only (save-every and save-after-changes are 0)",
                     cfg->data_dir);
    }
    size_t ntables;
    table_entry **loaded = registry_list(&srv->reg, &ntables);
    for (size_t i = 0; loaded && i < ntables; i++)
        entry_unref(loaded[i]);
    free(loaded);
    /* every saved table is loaded and the port is open: systemd may start what depends on floed */
    sd_notifyf(0, "READY=1\nSTATUS=serving %zu table%s on %s port %s", ntables, ntables == 1 ? "" : "s", cfg->bind,
               ports);
    /* Tests (tables/alloc.h): FLOE_FAULT_ALLOC=N fails the Nth allocation made from now on, once. */
    const char *fault = getenv("FLOE_FAULT_ALLOC");
    const uint64_t fault_at = fault ? strtoull(fault, NULL, 10) : 0;
    if (fault_at)
        floe_alloc_fail_nth(fault_at);
    event_base_loop(srv->base, EVLOOP_NO_EXIT_ON_EMPTY);
    if (fault_at)
        log_warn("fault injection: allocation %llu %s (%llu counted)", (unsigned long long)fault_at,
                 floe_alloc_failed() ? "failed" : "was never reached", (unsigned long long)floe_alloc_count());
    rc = srv->exit_code;
out:
    /* Stopping: a second signal must not kill floed halfway through. */
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    if (srv->listener)
        evconnlistener_free(srv->listener);
    if (srv->tls_listener)
        evconnlistener_free(srv->tls_listener);
    if (srv->resp_listener)
        evconnlistener_free(srv->resp_listener);
    if (srv->accept_pause_ev)
        event_free(srv->accept_pause_ev);
    metrics_port_stop(srv->metrics_port);
    srv->metrics_port = NULL;
    saver_stop(srv->saver); /* idle by now, unless the start failed */
    if (srv->io)
        stop_io(srv);
    const int lock_fd = srv->lock_fd;
    server_free(srv);
    /* freeing the signal events put back the default actions: a late signal must still not kill */
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    if (rc == 0)
        log_info("floed stopped");
    if (lock_fd >= 0)
        close(lock_fd); /* the data-dir's lock goes last */
    return rc;
}
