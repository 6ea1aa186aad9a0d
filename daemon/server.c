/*
 * server.c - floed's shared state: settings (the live ones too), the
 * backends and registry, the main event base with the reaper (see server.h).
 * Starting and stopping the daemon around it is floed.c.
 */
#define _GNU_SOURCE
#include "server.h"

#include <event2/event.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "backend_gpu.h"
#include "hostmem.h"
#include "log.h"
#include "metrics.h"
#include "partition.h"
#include "pool.h"
#include "tls.h"

#define MERGE_THREADS 4 /* the batchers' pool for large merges: the caller and three helpers */
/* Frames and answers kept for reuse (hostmem.h): pinned memory takes milliseconds to get. */
#define HOSTMEM_KEEP_GPU ((size_t)1 << 30)
#define HOSTMEM_KEEP_CPU ((size_t)64 << 20)

/* ---- live settings ------------------------------------------------------------------------- */

void server_set_live(server *srv, const floed_config *c)
{
    atomic_store(&srv->live.max_connections, c->max_connections);
    atomic_store(&srv->live.max_frame, c->max_frame);
    atomic_store(&srv->live.max_inflight, c->max_inflight);
    atomic_store(&srv->live.max_tables, c->max_tables);
    atomic_store(&srv->live.max_batch_keys, c->max_batch_keys);
    atomic_store(&srv->live.save_every, c->save_every);
    atomic_store(&srv->live.save_after_changes, c->save_after_changes);
    atomic_store(&srv->live.timeout, c->timeout);
    atomic_store(&srv->live.hello_timeout, c->hello_timeout);
    atomic_store(&srv->live.frame_timeout, c->frame_timeout);
    atomic_store(&srv->live.output_soft_limit, c->output_soft_limit);
    atomic_store(&srv->live.output_hard_limit, c->output_hard_limit);
    atomic_store(&srv->live.output_total_limit, c->output_total_limit);
    atomic_store(&srv->live.max_table_bytes, c->max_table_bytes);
    atomic_store(&srv->live.maxmemory, c->maxmemory);
    atomic_store(&srv->live.maxmemory_gpu, c->maxmemory_gpu);
    pthread_mutex_lock(&srv->live.lock);
    memcpy(srv->live.token, c->token, sizeof srv->live.token);
    memcpy(srv->live.backend, c->backend, sizeof srv->live.backend);
    pthread_mutex_unlock(&srv->live.lock);
    log_set_level((log_level)log_parse_level(c->log_level));
}

void server_settings(server *srv, floed_config *out)
{
    *out = srv->cfg;
    pthread_mutex_lock(&srv->live.lock);
    memcpy(out->token, srv->live.token, sizeof out->token);
    memcpy(out->backend, srv->live.backend, sizeof out->backend);
    pthread_mutex_unlock(&srv->live.lock);
}

typedef struct change_count {
    const char *who;
    int live, restart;
} change_count;

static void report_change(const char *name, int live, void *arg)
{
    change_count *n = arg;
    if (live) {
        log_info("%s: %s changed: applied", n->who, name);
        n->live++;
    } else {
        log_warn("%s: %s changed: kept as it was until floed restarts", n->who, name);
        n->restart++;
    }
}

void server_apply_settings(server *srv, const floed_config *next, const char *who, int *live, int *restart)
{
    floed_config now;
    server_settings(srv, &now);
    server_set_live(srv, next); /* first, so that the lines below follow the new log level */
    change_count n = {who, 0, 0};
    config_changes(&now, next, report_change, &n);
    /* srv->cfg keeps what needs a restart; its live fields follow next */
    config_apply_live(&srv->cfg, next);
    if (live)
        *live = n.live;
    if (restart)
        *restart = n.restart;
}

/* floe_alloc_set_budget's: a table's new arrays fit under maxmemory (one floed a process). */
static server *budget_srv;

static bool fits_maxmemory(uint64_t bytes)
{
    server *srv = budget_srv;
    const uint64_t limit = srv ? atomic_load_explicit(&srv->live.maxmemory, memory_order_relaxed) : 0;
    return !limit || atomic_load_explicit(&srv->rss, memory_order_relaxed) + bytes <= limit;
}

/* floe_gpu_set_budget's: a GPU table's new arrays fit under maxmemory-gpu on their device, asked now. */
static bool fits_maxmemory_gpu(int device, uint64_t bytes)
{
    server *srv = budget_srv;
    const uint64_t limit = srv ? atomic_load_explicit(&srv->live.maxmemory_gpu, memory_order_relaxed) : 0;
    uint64_t free_bytes, total;
    if (!limit || floe_gpu_meminfo(device, &free_bytes, &total) != 0)
        return true;
    return total - free_bytes + bytes <= limit;
}

void server_sample_memory(server *srv)
{
    atomic_store_explicit(&srv->rss, metrics_resident_bytes(), memory_order_relaxed);
    if (!atomic_load_explicit(&srv->live.maxmemory_gpu, memory_order_relaxed) || !srv->reg.gpu)
        return;
    uint64_t most = 0;
    int at = -1;
    for (int i = 0; i < srv->ngpus; i++) {
        uint64_t free_bytes, total;
        if (floe_gpu_meminfo(srv->gpu_ids[i], &free_bytes, &total) == 0 && total - free_bytes >= most) {
            most = total - free_bytes;
            at = srv->gpu_ids[i];
        }
    }
    atomic_store_explicit(&srv->gpu_used, most, memory_order_relaxed);
    atomic_store_explicit(&srv->gpu_used_device, at, memory_order_relaxed);
}

/* A limit's refusal in the log at most every 10 s (*said: when it last was), not once a request. */
static void warn_now_and_then(_Atomic uint64_t *said, const char *msg)
{
    const uint64_t now = floe_now_ns(), last = atomic_load(said);
    if (now - last > 10000000000ull && atomic_compare_exchange_strong(said, &(uint64_t){last}, now))
        log_warn("%s", msg);
}

bool server_over_gpu_memory(server *srv, char *msg, size_t len)
{
    const uint64_t limit = atomic_load_explicit(&srv->live.maxmemory_gpu, memory_order_relaxed);
    const uint64_t used = atomic_load_explicit(&srv->gpu_used, memory_order_relaxed);
    if (!limit || used < limit)
        return false;
    snprintf(msg, len,
             "GPU %d has %.1f MiB in use, at floed's maxmemory-gpu (%.1f MiB): writes to GPU tables are refused until "
             "device memory is freed (drop a table) or the limit raised (floe config set maxmemory-gpu)",
             atomic_load_explicit(&srv->gpu_used_device, memory_order_relaxed), (double)used / 1048576.0,
             (double)limit / 1048576.0);
    static _Atomic uint64_t said;
    warn_now_and_then(&said, msg);
    return true;
}

bool server_over_memory(server *srv, char *msg, size_t len)
{
    const uint64_t limit = atomic_load_explicit(&srv->live.maxmemory, memory_order_relaxed);
    const uint64_t rss = atomic_load_explicit(&srv->rss, memory_order_relaxed);
    if (!limit || rss < limit)
        return false;
    snprintf(msg, len,
             "floed is at its maxmemory: %.1f MiB resident, the limit is %.1f MiB; writes are refused until memory "
             "is freed (drop a table) or the limit raised (floe config set maxmemory)",
             (double)rss / 1048576.0, (double)limit / 1048576.0);
    static _Atomic uint64_t said;
    warn_now_and_then(&said, msg);
    return true;
}

bool server_token_required(server *srv)
{
    pthread_mutex_lock(&srv->live.lock);
    bool required = srv->live.token[0] != '\0';
    pthread_mutex_unlock(&srv->live.lock);
    return required;
}

bool server_token_matches(server *srv, const char *got)
{
    /* Compare digests so that neither the content nor the length leaks through timing. */
    unsigned char a[32], b[32];
    unsigned int la = 0, lb = 0;
    pthread_mutex_lock(&srv->live.lock);
    EVP_Digest(srv->live.token, strlen(srv->live.token), a, &la, EVP_sha256(), NULL);
    pthread_mutex_unlock(&srv->live.lock);
    EVP_Digest(got, strlen(got), b, &lb, EVP_sha256(), NULL);
    return la == 32 && lb == 32 && CRYPTO_memcmp(a, b, 32) == 0;
}

const char *server_default_backend(server *srv, char buf[sizeof(((floed_config *)0)->backend)])
{
    pthread_mutex_lock(&srv->live.lock);
    memcpy(buf, srv->live.backend, sizeof srv->live.backend);
    pthread_mutex_unlock(&srv->live.lock);
    return buf;
}

const char *server_default_backend_name(server *srv)
{
    char want[sizeof srv->cfg.backend];
    floe_backend *be = srv->reg.cpu;
    floe_errinfo ignored;
    registry_backend_for(&srv->reg, server_default_backend(srv, want), FLOE_KIND_SET, &be,
                         &ignored); /* SIGHUP may change it */
    return floe_backend_name(be);
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

static void from_libevent(int severity, const char *msg)
{
    static log_limit lim;
    /* EVENT_LOG_DEBUG 0, _MSG 1, _WARN 2, _ERR 3 */
    log_limited(&lim, severity >= 3 ? LOG_ERROR : severity == 2 ? LOG_WARN : LOG_DEBUG, "libevent: %s", msg);
}

/* ---- dropped tables ---------------------------------------------------------------------- */

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    registry_reap_run(arg);
}

static void wake_reaper(void *arg)
{
    event_active(arg, EV_READ, 0);
}

/* ---- backends ------------------------------------------------------------------------------ */

/* The devices of the gpus setting, checked against the host's: 0, or with
 * gpu_name saying why, -1 (no GPU here) or -2 (gpus names one not here). */
static int gpu_devices(server *srv)
{
    char why[200];
    const int have = floe_gpu_count();
    if (have == 0) {
        snprintf(srv->reg.gpu_name, sizeof srv->reg.gpu_name, "this host has no GPU (no CUDA device found)");
        return -1;
    }
    int n = config_gpus(srv->cfg.gpus, srv->gpu_ids, why, sizeof why);
    if (n == 0) {
        n = have < FLOE_PARTS_MAX ? have : FLOE_PARTS_MAX;
        for (int i = 0; i < n; i++)
            srv->gpu_ids[i] = i;
    }
    for (int i = 0; i < n; i++)
        if (srv->gpu_ids[i] >= have) {
            snprintf(srv->reg.gpu_name, sizeof srv->reg.gpu_name, "gpus names device %d; this host has %d (0..%d)",
                     srv->gpu_ids[i], have, have - 1);
            return -2;
        }
    srv->ngpus = n;
    return 0;
}

int server_failed_gpu(server *srv, char *why, size_t len)
{
    for (int i = 0; srv->reg.gpu && i < srv->ngpus; i++)
        if (floe_gpu_healthy(srv->gpu_ids[i], why, len) == 0)
            return srv->gpu_ids[i];
    return -1;
}

/* Tests: FLOE_FAULT_GPU=DEVICE[:N] makes the Nth batch (default 1) begun on
 * a table of DEVICE fail the device on purpose (floe_gpu_fault_arm). */
static void arm_gpu_fault(void)
{
    const char *s = getenv("FLOE_FAULT_GPU");
    if (!s || !*s)
        return;
    char *end;
    const long d = strtol(s, &end, 10);
    const unsigned long n = *end == ':' ? strtoul(end + 1, &end, 10) : 1;
    if (*end || d < 0 || n == 0 || n > UINT32_MAX) {
        log_warn("FLOE_FAULT_GPU=%s: not DEVICE[:N]; no fault armed", s);
        return;
    }
    floe_gpu_fault_arm((int)d, (unsigned)n);
    log_warn("FLOE_FAULT_GPU: GPU %ld fails on purpose at its batch %lu (tests only)", d, n);
}

/* The GPU backend, where this build has one and the host a device: one
 * backend per device of `gpus`, a table partitioned over them. */
static int start_gpu(server *srv)
{
    floe_errinfo err;
    floe_backend *dev_be[FLOE_PARTS_MAX];
    char dev[96];
    int n = 0, devices = 0;
    if (!floe_gpu_built()) {
        snprintf(srv->reg.gpu_name, sizeof srv->reg.gpu_name, "this floed was built without GPU support (GPU=0)");
    } else if ((devices = gpu_devices(srv)) != 0) {
        /* gpu_name says why */
    } else {
        for (; n < srv->ngpus; n++)
            if (floe_backend_gpu_create(srv->gpu_ids[n], (unsigned)srv->cfg.engine_threads, &dev_be[n], &err) !=
                FLOE_OK)
                break;
        if (n < srv->ngpus) {
            snprintf(srv->reg.gpu_name, sizeof srv->reg.gpu_name, "the GPU backend did not start on device %d: %s",
                     srv->gpu_ids[n], err.msg);
            for (int i = 0; i < n; i++)
                floe_backend_destroy(dev_be[i]);
        } else {
            const unsigned parts = (unsigned)srv->cfg.partitions; /* 0: each table placed (partition.h) */
            if (floe_backend_partition_create(dev_be, (unsigned)n, parts, (unsigned)srv->cfg.engine_threads,
                                              &srv->reg.gpu, &err) != FLOE_OK) {
                snprintf(srv->reg.gpu_name, sizeof srv->reg.gpu_name, "the GPU backend did not start: %s", err.msg);
            } else {
                floe_gpu_device(srv->gpu_ids[0], dev, sizeof dev);
                int len = snprintf(srv->reg.gpu_name, sizeof srv->reg.gpu_name, "%s", dev);
                if (n > 1)
                    len +=
                        snprintf(srv->reg.gpu_name + len, sizeof srv->reg.gpu_name - (size_t)len, " x%d (devices", n);
                for (int i = 0; n > 1 && i < n && len < (int)sizeof srv->reg.gpu_name; i++)
                    len += snprintf(srv->reg.gpu_name + len, sizeof srv->reg.gpu_name - (size_t)len, "%c%d",
                                    i ? ',' : ' ', srv->gpu_ids[i]);
                if (n > 1 && len < (int)sizeof srv->reg.gpu_name)
                    snprintf(srv->reg.gpu_name + len, sizeof srv->reg.gpu_name - (size_t)len, ")");
                if (parts)
                    log_info("GPU backend on %s, every table in %u part%s", srv->reg.gpu_name, parts,
                             parts == 1 ? "" : "s");
                else if (n > 1)
                    log_info("GPU backend on %s: each table whole on the GPU with the most free memory, in parts "
                             "over all %d when it fits on none, or in the parts its create asks",
                             srv->reg.gpu_name, n);
                else
                    log_info("GPU backend on %s", srv->reg.gpu_name);
                arm_gpu_fault();
            }
        }
    }
    if (!srv->reg.gpu && (devices == -2 || strcmp(srv->cfg.backend, "gpu") == 0)) {
        log_error("backend gpu: %s", srv->reg.gpu_name);
        return -1;
    }
    return 0;
}

int server_new(const floed_config *cfg, int argc, char **argv, server **out)
{
    *out = NULL;
    server *srv = floe_calloc(1, sizeof *srv);
    if (!srv)
        return 1;
    srv->cfg = *cfg;
    srv->argc = argc;
    srv->argv = argv;
    srv->lock_fd = srv->reserve_fd = -1;
    pthread_mutex_init(&srv->live.lock, NULL);
    pthread_mutex_init(&srv->config_lock, NULL);
    queue_init(&srv->config_q);
    event_set_log_callback(from_libevent);
    server_set_live(srv, cfg);
    server_sample_memory(srv);
    budget_srv = srv;
    floe_alloc_set_budget(fits_maxmemory);
    floe_gpu_set_budget(fits_maxmemory_gpu);
    if (!(srv->metrics = metrics_new((size_t)config_io_threads(cfg) + 1))) {
        free(srv);
        return 1;
    }
    atomic_init(&srv->nconns, 0);
    atomic_init(&srv->shutting_down, false);
    atomic_init(&srv->stop_nosave, false);
    /* a few threads: large merges are memory-bound (a NULL pool merges inline) */
    floe_errinfo err;
    if (floe_pool_create(MERGE_THREADS, &srv->merge_pool, &err) != FLOE_OK)
        log_warn("merging batches on one thread: %s", err.msg);
    const batcher_limits limits = {&srv->live.max_batch_keys, srv->merge_pool, NULL}; /* mem: once the GPU is known */
    registry_init(&srv->reg, &limits);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN); /* a file past RLIMIT_FSIZE: the write fails (EFBIG) and the snapshot says why */
    floe_backend *cpu = NULL;
    const unsigned cpu_parts = (unsigned)cfg->partitions; /* 0: whole, or the parts a create asks */
    if (floe_backend_cpu_create((unsigned)cfg->engine_threads, &cpu, &err) != FLOE_OK ||
        floe_backend_partition_create(&cpu, 1, cpu_parts, (unsigned)cfg->engine_threads, &srv->reg.cpu, &err) !=
            FLOE_OK) {
        log_error("cannot start the CPU engine: %s", err.msg);
        server_free(srv);
        return 1;
    }
    if (start_gpu(srv) != 0) {
        server_free(srv);
        return 2; /* a setting that cannot work on this host */
    }
    /* in range (config.c): the backends take it */
    floe_backend_set_lanes(srv->reg.cpu, (unsigned)cfg->pipelines, &err);
    if (srv->reg.gpu)
        floe_backend_set_lanes(srv->reg.gpu, (unsigned)cfg->pipelines, &err);
    if (cfg->pipelines > 1)
        log_info("tables run %u pipelines each, fed by %u io threads", (unsigned)cfg->pipelines,
                 config_io_threads(cfg));
    /* with a GPU, pinned: its copies go straight from the frames and into the answers */
    if (!(srv->mem = hostmem_new(srv->reg.gpu, srv->reg.gpu ? HOSTMEM_KEEP_GPU : HOSTMEM_KEEP_CPU))) {
        server_free(srv);
        return 1;
    }
    srv->reg.limits.mem = srv->mem;
    srv->base = event_base_new();
    srv->reap_ev = srv->base ? event_new(srv->base, -1, 0, on_reap, &srv->reg) : NULL;
    srv->reg.wake_reaper = wake_reaper;
    srv->reg.wake_arg = srv->reap_ev;
    if (!srv->reap_ev) {
        log_error("cannot set up the main event loop");
        server_free(srv);
        return 1;
    }
    *out = srv;
    return 0;
}

void server_free(server *srv)
{
    registry_free(&srv->reg); /* first: a table's threads (a growth's arrays made ahead) may ask the budget */
    if (budget_srv == srv) {
        floe_alloc_set_budget(NULL);
        budget_srv = NULL;
    }
    hostmem_free(srv->mem); /* every frame and answer is back: the io threads are gone */
    if (srv->drain_ev)
        event_free(srv->drain_ev);
    if (srv->stop_asked)
        event_free(srv->stop_asked);
    if (srv->config_asked)
        event_free(srv->config_asked);
    if (srv->sig_term)
        event_free(srv->sig_term);
    if (srv->sig_int)
        event_free(srv->sig_int);
    if (srv->sig_hup)
        event_free(srv->sig_hup);
    if (srv->snapshot_ev)
        event_free(srv->snapshot_ev);
    if (srv->watchdog_ev)
        event_free(srv->watchdog_ev);
    if (srv->health_ev)
        event_free(srv->health_ev);
    if (srv->memory_ev)
        event_free(srv->memory_ev);
    if (srv->reap_ev)
        event_free(srv->reap_ev);
    if (srv->base)
        event_base_free(srv->base);
    floe_backend_destroy(srv->reg.cpu);
    floe_backend_destroy(srv->reg.gpu);
    floe_pool_destroy(srv->merge_pool);
    metrics_free(srv->metrics);
    tls_server_free(srv->tls);
    if (srv->reserve_fd >= 0)
        close(srv->reserve_fd);
    pthread_mutex_destroy(&srv->live.lock);
    pthread_mutex_destroy(&srv->config_lock);
    free(srv);
}

void server_ask_stop(server *srv, bool nosave)
{
    atomic_store(&srv->stop_nosave, nosave);
    if (srv->stop_asked)
        event_active(srv->stop_asked, EV_READ, 0);
}
