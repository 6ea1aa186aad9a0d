/*
 * tables.c - the requests on tables as a whole: create_table, drop_table,
 * list_tables and snapshot (answered for several tables at once:
 * request.c's multi), stats and a STATIC table's freeze.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "datadir.h"
#include "handlers.h"
#include "log.h"

static floe_status spec_from_proto(const Floe__V1__TableSpec *p, const char *default_backend, floe_spec *s,
                                   floe_errinfo *err)
{
    floe_spec_default(s);
    if (!p)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "create_table needs a spec");
    if (!p->name || strlen(p->name) > FLOE_NAME_MAX)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "table name must be 1 to %d characters", FLOE_NAME_MAX);
    strcpy(s->name, p->name);
    s->kind = (floe_kind)p->kind;
    /* key_bits 0 means 64 for SET and MAP; a TREE has none (its keys are vectors) */
    s->key_bits = p->key_bits ? p->key_bits : s->kind == FLOE_KIND_TREE ? 0 : 64;
    s->words = p->words;
    s->memory = p->memory;
    s->value_bytes = p->value_bytes;
    s->capacity = p->capacity ? p->capacity : s->capacity;
    if (p->grow && p->no_grow)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "grow and no_grow contradict each other: give one");
    /* SET and MAP grow when asked; a TREE unless told not to (a model
     * checker does not know its state count), and a STATIC table until its
     * freeze (sized then from the keys it holds); an ORDERED table always
     * (its nodes are made as keys come) */
    if (s->kind == FLOE_KIND_ORDERED && p->no_grow)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "an ORDERED table always grows (its nodes are made as keys come): no_grow is for SET, "
                                "MAP and TREE tables");
    s->grow = p->grow || ((s->kind == FLOE_KIND_TREE || s->kind == FLOE_KIND_ORDERED || s->kind == FLOE_KIND_STATIC) &&
                          !p->no_grow);
    s->max_fill = p->max_fill != 0.0 ? p->max_fill : FLOE_DEFAULT_MAX_FILL;
    s->seed = p->seed;
    s->shard = p->shard;
    s->shards = p->shards;
    s->shard_set = p->shard_set;
    s->parts = p->parts;
    s->explore = p->explore;
    s->label_bytes = p->label_bytes;
    s->explore_any_order = p->explore_any_order;
    /* the server's default where the client named none */
    const char *be = p->backend && p->backend[0] ? p->backend : default_backend;
    if (strlen(be) >= sizeof s->backend)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "backend must be cpu, gpu or auto");
    strcpy(s->backend, be);
    return floe_spec_validate(s, err);
}

void handle_create(server *srv, session *c, Floe__V1__Request *req, const request_row *row)
{
    floe_spec spec;
    floe_errinfo err;
    floe_backend *be = NULL;
    char want[sizeof srv->cfg.backend];
    floe_status st = spec_from_proto(req->create_table->spec, server_default_backend(srv, want), &spec, &err);
    if (st == FLOE_OK)
        st = registry_backend_for(&srv->reg, spec.backend, spec.kind, &be, &err);
    if (st != FLOE_OK) {
        send_now(c, reply_error(req->id, st, err.msg));
        return;
    }
    char full[300];
    if (be == srv->reg.gpu && server_over_gpu_memory(srv, full, sizeof full)) {
        send_error(c, req->id, FLOE_ERR_NO_MEMORY, "%s", full);
        return;
    }
    table_entry *probe = registry_get(&srv->reg, spec.name);
    if (probe) { /* cheap early answer; registry_install decides for real */
        entry_unref(probe);
        send_error(c, req->id, FLOE_ERR_EXISTS, "table %s exists", spec.name);
        return;
    }
    const uint64_t max_bytes = LIVE(srv, max_table_bytes), need = floe_table_bytes_for(&spec);
    if (max_bytes && need > max_bytes) {
        send_error(c, req->id, FLOE_ERR_FULL,
                   "table %s: its arrays for a capacity of %llu take %.2f GiB, past max-table-bytes (%.2f GiB): ask a "
                   "smaller capacity (with grow it grows as keys come)",
                   spec.name, (unsigned long long)spec.capacity, need / 1073741824.0, max_bytes / 1073741824.0);
        return;
    }
    floe_table *t;
    snprintf(spec.backend, sizeof spec.backend, "%s", floe_backend_name(be)); /* what it runs on, for stats */
    st = floe_table_create(be, &spec, &t, &err);
    if (st == FLOE_OK)
        st = registry_install(&srv->reg, t, NULL, LIVE(srv, max_tables), &err);
    if (st != FLOE_OK) {
        send_now(c, reply_error(req->id, st, err.msg));
        return;
    }
    if (spec.kind == FLOE_KIND_TREE)
        log_info("created table %s: TREE, words %u, capacity %llu, memory %llu%s%s, backend %s", spec.name, spec.words,
                 (unsigned long long)spec.capacity, (unsigned long long)spec.memory,
                 spec.memory ? " bytes" : " (sized from capacity)", spec.grow ? ", grows" : ", fixed size",
                 floe_backend_name(be));
    else
        log_info("created table %s: %s, key_bits %u, value_bytes %u, capacity %llu%s, backend %s", spec.name,
                 floe_kind_name(spec.kind), spec.key_bits, spec.value_bytes, (unsigned long long)spec.capacity,
                 spec.grow ? ", grows" : "", floe_backend_name(be));
    send_now(c, reply_ok(req->id));
}

void handle_drop(server *srv, session *c, Floe__V1__Request *req, const request_row *row)
{
    const char *name = req->drop_table->table ? req->drop_table->table : "";
    table_entry *e = registry_remove(&srv->reg, name);
    if (!e) {
        send_error(c, req->id, FLOE_ERR_NO_TABLE, "no table %s", name);
        return;
    }
    log_info("dropping table %s", name);
    item *it = item_new(srv, c, req->id, row, JOB_DRAIN, NULL);
    if (!it) {
        send_error(c, req->id, FLOE_ERR_INTERNAL, "out of memory");
        registry_reap(&srv->reg, e);
        return;
    }
    it->drop = e; /* the registry's reference travels with the drain */
    if (srv->cfg.data_dir[0]) {
        if (!(it->path = datadir_table_path(srv->cfg.data_dir, name))) {
            item_free(it);
            send_error(c, req->id, FLOE_ERR_INTERNAL, "out of memory");
            registry_reap(&srv->reg, e);
            return;
        }
        it->save.path = it->path; /* no entry: the saver removes the file */
        it->save.done = item_saved;
    }
    item_submit(c, e, it);
}

/* list_tables (each table's STATS), or snapshot (each table's COPY, the
 * saver writing its file): one answer for them all. */
void handle_list(server *srv, session *c, Floe__V1__Request *req, const request_row *row)
{
    size_t n;
    table_entry **all = registry_list(&srv->reg, &n);
    const char *only = row->op == FLOE_OP_SAVE && req->snapshot->table ? req->snapshot->table : "";
    size_t want = 0;
    for (size_t i = 0; i < n; i++)
        want += !only[0] || strcmp(all[i]->name, only) == 0;
    multi *m = NULL;
    if (!all) {
        send_error(c, req->id, FLOE_ERR_INTERNAL, "out of memory listing the tables");
    } else if (only[0] && want == 0) {
        send_error(c, req->id, FLOE_ERR_NO_TABLE, "no table %s", only);
    } else if (!(m = multi_new(c, req->id, row, want))) {
        send_error(c, req->id, FLOE_ERR_INTERNAL, "out of memory");
    } else {
        c->ops->hold(c); /* the multi's, until its response */
        multi_fan_out(srv, m, all, n, only);
    }
    for (size_t i = 0; i < n; i++)
        entry_unref(all[i]);
    free(all);
}

frame *stats_reply(const job_end *e, const item *it)
{
    batcher *bt = e->bt;
    floe_batch *b = e->b;
    /* the engine's stages come with its stats; the daemon's and the io threads' are added here */
    floe_stage_time stage[FLOE_STAGES];
    batcher_stages(bt, stage);
    for (int s = 0; s < FLOE_STAGES; s++)
        if (stage[s].count)
            b->stats.stage[s] = stage[s];
    b->stats.stage[FLOE_STAGE_IO_CPU] = server_io_cpu(it->srv);
    Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
    Floe__V1__TableStats ts;
    reply_stats_room room;
    reply_fill_stats(&ts, &room, 1, &b->stats);
    /* an exploring table's open set, as of now (after the batches before this stats) */
    Floe__V1__ExploreStats xs = FLOE__V1__EXPLORE_STATS__INIT;
    uint64_t *levels = NULL;
    char where[16];
    table_entry *t = it->entry;
    if (t && t->explore) {
        floe_explore_counts x;
        floe_explore_stats(t->explore, &x);
        if ((levels = floe_calloc(x.levels + 1, sizeof *levels)))
            for (uint32_t d = 0; d < x.levels; d++)
                levels[d] = floe_explore_level(t->explore, d);
        xs.states = x.states;
        xs.open = x.open;
        xs.claimed = x.claimed;
        xs.claims = x.claims;
        xs.levels = x.levels;
        xs.done = x.done;
        xs.bytes = x.bytes;
        if (x.device >= 0)
            snprintf(where, sizeof where, "GPU %d", x.device);
        else
            snprintf(where, sizeof where, "host");
        xs.memory = where;
        xs.level_sizes = levels;
        xs.n_level_sizes = levels ? x.levels : 0;
        ts.explore = &xs;
    }
    r.id = it->id;
    r.body_case = FLOE__V1__RESPONSE__BODY_STATS;
    r.stats = &ts;
    frame *f = reply_pack(&r);
    free(levels);
    return f;
}

void handle_stats(server *srv, session *c, Floe__V1__Request *req, const request_row *row)
{
    table_entry *e = request_table(srv, c, req->id, req->stats->table, req);
    item *it = e ? request_item(srv, c, req, row, e) : NULL;
    if (it) {
        if (e->explore) { /* its reply reads the open set (stats_reply) */
            entry_ref(e);
            it->entry = e;
        }
        item_submit(c, e, it);
        entry_unref(e);
    }
}

void handle_freeze(server *srv, session *c, Floe__V1__Request *req, const request_row *row)
{
    table_entry *e = request_table(srv, c, req->id, req->freeze->table, req);
    item *it = e ? request_item(srv, c, req, row, e) : NULL;
    if (it) {
        log_info("freezing table %s", e->name);
        item_submit(c, e, it);
        entry_unref(e);
    }
}
