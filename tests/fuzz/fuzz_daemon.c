/*
 * fuzz_daemon.c - libFuzzer target: floed's frame reader and request
 * handling (daemon/conn.c, request.c, item.c, ops/, batcher.c, registry.c,
 * metrics.c) fed straight from bytes: the input is what a client sends on
 * one connection.
 *
 * No sockets: the connection is one end of a libevent bufferevent pair on
 * an io thread's base, which this thread runs itself; the tables are real
 * CPU-backend tables whose threads answer through the connection's session
 * as in floed.
 * Each run serves its input until every request is answered, closes the
 * connection as a client going away would, and drops every table, so runs
 * do not depend on each other.  Not covered: tokens (hello compares SHA-256
 * digests, which a fuzzer cannot solve), data-dir snapshots, the GPU.
 *
 * Tables are created through a backend that wraps the CPU one: it refuses
 * tables over BUDGET_BYTES with ERR_FULL, as the engine does when mmap
 * fails (the engine faults a table's memory in at creation: a 2^40-key
 * table would only measure the fuzzer's memory limit), gives tables seed 0
 * a fixed seed (runs repeat exactly), and counts the tables alive.
 */
#define _GNU_SOURCE
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "conn.h"
#include "iceberg.h"
#include "log.h"
#include "registry.h"
#include "server.h"
#include "tree.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BUDGET_BYTES ((uint64_t)16 << 20)
#define FIXED_SEED   0x9E3779B97F4A7C15ull

typedef struct budget_backend {
    floe_backend base;
    floe_backend *inner;
} budget_backend;

typedef struct budget_table {
    floe_table base;
    floe_table *inner;
} budget_table;

static server *srv;
static atomic_int tables_alive;

/* What the engine would map for spec (0 if the spec is not one it sizes). */
static uint64_t table_bytes(const floe_spec *spec)
{
    floe_errinfo err;
    if (spec->kind == FLOE_KIND_TREE) {
        tree_sizing z;
        return tree_size(spec, &z, &err) == FLOE_OK ? z.node_bytes + z.root_bytes : 0;
    }
    floe_geometry g;
    uint32_t three;
    const uint32_t a = iceberg_size_for(spec->key_bits, spec->capacity, &three);
    floe_geometry_init(&g, spec->key_bits, a, three, 1);
    uint64_t bytes = (uint64_t)g.total_slots * (spec->kind == FLOE_KIND_MAP ? spec->value_bytes : 0);
    for (int l = 0; l < FLOE_LEVELS; l++)
        bytes += floe_level_words(&g.level[l]) * sizeof(uint64_t);
    return bytes;
}

static floe_status wrap(budget_backend *be, floe_status st, floe_table *inner, floe_table **out, floe_errinfo *err)
{
    if (st != FLOE_OK)
        return st;
    budget_table *t = calloc(1, sizeof *t);
    if (!t) {
        floe_table_destroy(inner);
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    }
    t->base.backend = &be->base;
    t->base.spec = inner->spec;
    t->inner = inner;
    atomic_fetch_add(&tables_alive, 1);
    *out = &t->base;
    return FLOE_OK;
}

static floe_status budget_create(floe_backend *base, const floe_spec *spec, floe_table **out, floe_errinfo *err)
{
    budget_backend *be = (budget_backend *)base;
    floe_spec s = *spec;
    if (s.seed == 0)
        s.seed = FIXED_SEED;
    const uint64_t bytes = table_bytes(&s);
    if (bytes > BUDGET_BYTES)
        return floe_errinfo_set(err, FLOE_ERR_FULL, "fuzzing: %llu bytes is above the budget",
                                (unsigned long long)bytes);
    floe_table *inner = NULL;
    floe_status st = be->inner->ops->create_table(be->inner, &s, &inner, err);
    return wrap(be, st, inner, out, err);
}

static floe_status budget_load(floe_backend *base, const char *path, const struct floe_file_part *part,
                               floe_table **out, floe_errinfo *err)
{
    budget_backend *be = (budget_backend *)base;
    floe_table *inner = NULL;
    floe_status st = be->inner->ops->load_table(be->inner, path, part, &inner, err);
    return wrap(be, st, inner, out, err);
}

static void budget_submit(floe_table *base, floe_batch *b)
{
    budget_table *t = (budget_table *)base;
    t->inner->backend->ops->submit(t->inner, b);
}

static void budget_destroy_table(floe_table *base)
{
    budget_table *t = (budget_table *)base;
    floe_table_destroy(t->inner);
    free(t);
    atomic_fetch_sub(&tables_alive, 1);
}

static void budget_destroy(floe_backend *base)
{
    budget_backend *be = (budget_backend *)base;
    floe_backend_destroy(be->inner);
    free(be);
}

static const floe_backend_ops budget_ops = {
    .name = "cpu",
    .create_table = budget_create,
    .load_table = budget_load,
    .submit = budget_submit,
    .destroy_table = budget_destroy_table,
    .destroy = budget_destroy,
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (evthread_use_pthreads() != 0)
        abort();
    floed_config cfg;
    config_defaults(&cfg);
    cfg.io_threads = 1;
    cfg.engine_threads = 1; /* the table thread does the work: no pool threads */
    /* small limits, so that short inputs reach them */
    cfg.max_inflight = 8;
    cfg.max_tables = 4;
    cfg.max_batch_keys = 256;
    cfg.max_frame = 1 << 20;
    snprintf(cfg.backend, sizeof cfg.backend, "cpu");
    if (server_new(&cfg, 0, NULL, &srv) != 0)
        abort();
    log_set_level((log_level)(LOG_ERROR + 1)); /* quiet: libFuzzer reports on stderr */
    budget_backend *be = calloc(1, sizeof *be);
    if (!be)
        abort();
    be->base.ops = &budget_ops;
    be->inner = srv->reg.cpu;
    srv->reg.cpu = &be->base;
    srv->nio = 1;
    srv->io = calloc(1, sizeof *srv->io);
    if (!srv->io || io_thread_init(srv, &srv->io[0]) != 0)
        abort();
    srv->io[0].thread = pthread_self(); /* this thread is the io thread (its CPU time goes in stats) */
    return 0;
}

/* Runs the io thread's loop until every request of c is answered and no
 * callback is pending (a pair's callbacks are deferred to the loop), and
 * the main loop's reaper; the responses are thrown away. */
static void serve(conn *c, struct bufferevent *client)
{
    io_thread *io = &srv->io[0];
    for (;;) {
        event_base_loop(srv->base, EVLOOP_NONBLOCK);
        event_base_loop(io->base, EVLOOP_NONBLOCK);
        struct evbuffer *in = bufferevent_get_input(client);
        evbuffer_drain(in, evbuffer_get_length(in));
        if (event_base_get_num_events(io->base, EVENT_BASE_COUNT_ACTIVE) > 0)
            continue;
        if (c->inflight == 0)
            return;
        /* blocks until a backend thread delivers an answer */
        event_base_loop(io->base, EVLOOP_ONCE | EVLOOP_NO_EXIT_ON_EMPTY);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    io_thread *io = &srv->io[0];
    struct bufferevent *pair[2];
    if (bufferevent_pair_new(io->base, 0, pair) != 0)
        abort();
    atomic_fetch_add(&srv->nconns, 1);
    conn *c = conn_attach(io, pair[0], "fuzz");
    if (!c)
        abort();
    conn_ref(c); /* ours, to watch it after it closes */
    bufferevent_write(pair[1], data, size);
    serve(c, pair[1]);
    /* the client goes away: end of file on the connection */
    bufferevent_flush(pair[1], EV_WRITE, BEV_FINISHED);
    serve(c, pair[1]);
    if (c->open)
        abort(); /* the end of file did not close it */
    bufferevent_free(pair[1]);
    conn_unref(c);

    /* every table goes, as when floed stops; dropped ones once reaped */
    table_entry *e;
    while ((e = srv->reg.head)) {
        registry_remove(&srv->reg, e->name);
        floe_table_destroy(e->table);
        e->table = NULL;
        entry_unref(e);
    }
    while (atomic_load(&tables_alive) > 0)
        event_base_loop(srv->base, EVLOOP_ONCE | EVLOOP_NO_EXIT_ON_EMPTY);
    return 0;
}
