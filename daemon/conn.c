/*
 * conn.c - client connections: framing, authentication, back-pressure and
 * the dispatch of each request (see conn.h and server.h).
 *
 * Everything here runs on the connection's io thread except conn_deliver,
 * which any thread may call to hand a response over.
 */
#define _GNU_SOURCE
#include "conn.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "alloc.h"
#include "batcher.h"
#include "datadir.h"
#include "log.h"
#include "metrics.h"
#include "registry.h"
#include "snapshot.h"
#include "tls.h"

#define IO_MAX_SINGLE      ((size_t)4 << 20) /* bytes per socket read or write call */

static atomic_ulong next_serial = 1;

/* The connection's io thread: its shard of the counters (metrics.h). */
#define SHARD(c) ((size_t)((c)->io - (c)->srv->io))

static void count_request(conn *c, int op, size_t frame_bytes)
{
    c->req_op = op;
    metrics_request(c->srv->metrics, SHARD(c), op, frame_bytes);
}

void conn_ref(conn *c)
{
    atomic_fetch_add(&c->refs, 1);
}

void conn_unref(conn *c)
{
    if (atomic_fetch_sub(&c->refs, 1) == 1)
        free(c);
}

static void close_now(conn *c)
{
    if (!c->open)
        return;
    c->open = false;
    atomic_store(&c->gone, true); /* its queued requests need not run */
    /* Closing a socket with unread bytes makes the kernel send a reset, which can destroy our last
     * answer (or TLS alert) before the client reads it: take what has arrived first. */
    const evutil_socket_t fd = bufferevent_getfd(c->bev);
    char sink[4096];
    for (int i = 0; fd >= 0 && i < 64 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++)
        ;
    bufferevent_free(c->bev);
    c->bev = NULL;
    if (c->prev)
        c->prev->next = c->next;
    else
        c->io->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    atomic_fetch_sub(&c->srv->nconns, 1);
    if (c->io->stop_seen && !c->io->conns)
        event_base_loopbreak(c->io->base);
    log_debug("connection %llu (%s) closed, %u requests in flight", (unsigned long long)c->serial, c->peer,
              c->inflight);
    conn_unref(c); /* the io thread's own reference */
}

static void read_frames(conn *c);

/* Reads while nothing holds the connection back: max-inflight requests out
 * (paused) or output-soft-limit bytes of responses unread (out_paused). */
static void update_reading(conn *c)
{
    if (!c->open || c->closing)
        return;
    if (c->paused || c->out_paused) {
        bufferevent_disable(c->bev, EV_READ);
    } else {
        bufferevent_enable(c->bev, EV_READ);
        read_frames(c); /* frames already buffered get no new read event */
    }
}

/* After responses were written into c's output: a client that sends and
 * never reads must not grow floed without bound (as Redis's
 * client-output-buffer-limit).  Past output-hard-limit unread bytes the
 * connection closes; past output-soft-limit floed reads no more requests
 * until the client has read half of it. */
static void check_output(conn *c)
{
    if (!c->open)
        return;
    const size_t out = evbuffer_get_length(bufferevent_get_output(c->bev));
    const uint64_t hard = LIVE(c->srv, output_hard_limit), soft = LIVE(c->srv, output_soft_limit);
    if (hard && out > hard) {
        LOG_LIMITED(LOG_WARN,
                    "connection %llu (%s): %zu bytes of responses unread, above output-hard-limit (%llu): "
                    "closing it",
                    (unsigned long long)c->serial, c->peer, out, (unsigned long long)hard);
        close_now(c);
        return;
    }
    if (soft && out > soft && !c->out_paused) {
        c->out_paused = true;
        bufferevent_setwatermark(c->bev, EV_WRITE, soft / 2, 0); /* on_write once it is down to half */
        update_reading(c);
    }
}

static void on_write(struct bufferevent *bev, void *arg)
{
    conn *c = arg;
    const size_t out = evbuffer_get_length(bufferevent_get_output(bev));
    if (c->closing && out == 0) {
        close_now(c);
        return;
    }
    if (c->out_paused && out <= LIVE(c->srv, output_soft_limit) / 2) {
        c->out_paused = false;
        bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
        update_reading(c);
    }
}

/* While floed stops, a connection closes once it is quiet: nothing in
 * flight, every response written, nothing unparsed and nothing read for
 * STOP_QUIET_NS.  Closing earlier, while the client is still sending, would
 * make the kernel answer with a reset that destroys responses the client
 * has not read yet; meanwhile every request that arrives is answered with
 * ERR_SHUTTING_DOWN.  The stop timer closes whatever is left. */
#define STOP_QUIET_NS (100 * 1000000ull)
/* How long a connection that is closing may take to read its last answer. */
#define CLOSING_NS (5 * 1000000000ull)

static bool quiet(const conn *c, uint64_t now)
{
    return c->inflight == 0 && evbuffer_get_length(bufferevent_get_output(c->bev)) == 0 &&
           evbuffer_get_length(bufferevent_get_input(c->bev)) == 0 && now - c->last_read >= STOP_QUIET_NS;
}

static void stop_sweep(io_thread *io)
{
    const uint64_t now = floe_now_ns();
    for (conn *c = io->conns, *next; c; c = next) {
        next = c->next;
        if (quiet(c, now))
            close_now(c);
    }
    if (!io->conns)
        event_base_loopbreak(io->base);
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    stop_sweep(arg);
}

/* Writes f to c now (io thread); frees f. */
static void send_frame(conn *c, frame *f)
{
    if (!f) {
        log_error("out of memory building a response for connection %llu", (unsigned long long)c->serial);
        close_now(c);
        return;
    }
    const bool open = c->open;
    if (open)
        bufferevent_write(c->bev, f->data, f->len);
    metrics_answered(c->srv->metrics, SHARD(c), c->req_op, f->status, 0, c->t_frame, open ? f->len : 0);
    free(f);
    check_output(c);
}

static void send_error(conn *c, uint64_t id, floe_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void send_error(conn *c, uint64_t id, floe_status st, const char *fmt, ...)
{
    char msg[FLOE_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    send_frame(c, reply_error(id, st, msg));
}

/* Answers, then closes once the answer is written. */
static void fail_and_close(conn *c, uint64_t id, floe_status st, const char *msg)
{
    /* a client can cause this at will: at most a line a second */
    LOG_LIMITED(LOG_WARN, "connection %llu (%s): %s; closing", (unsigned long long)c->serial, c->peer, msg);
    send_frame(c, reply_error(id, st, msg));
    if (!c->open)
        return;
    c->closing = true;
    c->t_closing = floe_now_ns();
    bufferevent_disable(c->bev, EV_READ);
    if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
        close_now(c);
}

/* ---- request dispatch ---------------------------------------------------------------- */

static void handle_hello(conn *c, Floe__V1__Request *req)
{
    const Floe__V1__Hello *h = req->hello;
    if (server_token_required(c->srv)) {
        if (!h->token || !server_token_matches(c->srv, h->token)) {
            fail_and_close(c, req->id, FLOE_ERR_UNAUTHENTICATED, "wrong token");
            return;
        }
        c->authed = true;
    }
    if (h->version > FLOE_PROTOCOL_VERSION) {
        log_debug("connection %llu speaks protocol %u; answering with %u", (unsigned long long)c->serial, h->version,
                  FLOE_PROTOCOL_VERSION);
    }
    Floe__V1__HelloReply hr = FLOE__V1__HELLO_REPLY__INIT;
    hr.version = FLOE_PROTOCOL_VERSION;
    hr.server = "floed " FLOE_VERSION;
    hr.max_frame = LIVE(c->srv, max_frame);
    hr.max_batch_keys = LIVE(c->srv, max_batch_keys);
    hr.max_inflight = (uint32_t)LIVE(c->srv, max_inflight);
    floe_backend *dflt = c->srv->cpu;
    floe_errinfo ignored;
    char want[sizeof c->srv->cfg.backend];
    server_backend_for(c->srv, server_default_backend(c->srv, want), &dflt, &ignored);
    hr.backend = (char *)floe_backend_name(dflt);
    hr.authenticated = c->authed;
    Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
    r.id = req->id;
    r.body_case = FLOE__V1__RESPONSE__BODY_HELLO;
    r.hello = &hr;
    send_frame(c, reply_pack(&r));
}

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
    s->grow = p->grow;
    s->max_fill = p->max_fill != 0.0 ? p->max_fill : FLOE_DEFAULT_MAX_FILL;
    s->seed = p->seed;
    const char *be = p->backend && p->backend[0] ? p->backend : default_backend;
    if (strlen(be) >= sizeof s->backend)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "backend must be cpu, gpu or auto");
    strcpy(s->backend, be);
    return floe_spec_validate(s, err);
}

static void handle_create(conn *c, Floe__V1__Request *req)
{
    server *srv = c->srv;
    floe_spec spec;
    floe_errinfo err;
    floe_backend *be = NULL;
    char want[sizeof srv->cfg.backend];
    floe_status st = spec_from_proto(req->create_table->spec, server_default_backend(srv, want), &spec, &err);
    if (st == FLOE_OK)
        st = server_backend_for(srv, spec.backend, &be, &err);
    if (st != FLOE_OK) {
        send_frame(c, reply_error(req->id, st, err.msg));
        return;
    }
    table_entry *probe = registry_get(&srv->reg, spec.name);
    if (probe) { /* cheap early answer; registry_add decides for real */
        entry_unref(probe);
        send_error(c, req->id, FLOE_ERR_EXISTS, "table %s exists", spec.name);
        return;
    }
    floe_table *t;
    snprintf(spec.backend, sizeof spec.backend, "%s", floe_backend_name(be)); /* what it runs on, for stats */
    st = floe_table_create(be, &spec, &t, &err);
    if (st == FLOE_OK)
        st = registry_install(&srv->reg, srv, t, LIVE(srv, max_tables), &err);
    if (st != FLOE_OK) {
        send_frame(c, reply_error(req->id, st, err.msg));
        return;
    }
    if (spec.kind == FLOE_KIND_TREE)
        log_info("created table %s: TREE, words %u, capacity %llu, memory %llu%s, backend %s", spec.name, spec.words,
                 (unsigned long long)spec.capacity, (unsigned long long)spec.memory,
                 spec.memory ? " bytes" : " (sized from capacity)", floe_backend_name(be));
    else
        log_info("created table %s: %s, key_bits %u, value_bytes %u, capacity %llu%s, backend %s", spec.name,
                 floe_kind_name(spec.kind), spec.key_bits, spec.value_bytes, (unsigned long long)spec.capacity,
                 spec.grow ? ", grows" : "", floe_backend_name(be));
    send_frame(c, reply_ok(req->id));
}

/* Hands it to e's batcher; on refusal answers with the reason. */
static void submit(conn *c, table_entry *e, item *it)
{
    conn_ref(c);
    c->inflight++;
    floe_status st = batcher_submit(&e->bt, it);
    if (st != FLOE_OK) {
        c->inflight--;
        conn_unref(c);
        if (st == FLOE_ERR_SHUTTING_DOWN)
            send_error(c, it->id, st, "floed is shutting down");
        else
            send_error(c, it->id, st, "no table %s", e->name);
        if (it->op == ITEM_DRAIN)
            server_reap(c->srv, it->drop);
        item_free(it);
    }
}

static void handle_drop(conn *c, Floe__V1__Request *req)
{
    const char *name = req->drop_table->table ? req->drop_table->table : "";
    table_entry *e = registry_remove(&c->srv->reg, name);
    if (!e) {
        send_error(c, req->id, FLOE_ERR_NO_TABLE, "no table %s", name);
        return;
    }
    log_info("dropping table %s", name);
    item *it = item_new(c, req->id, ITEM_DRAIN, NULL);
    if (!it) {
        send_error(c, req->id, FLOE_ERR_INTERNAL, "out of memory");
        server_reap(c->srv, e);
        return;
    }
    it->drop = e; /* the registry's reference travels with the DRAIN */
    if (c->srv->cfg.data_dir[0] && !(it->path = datadir_table_path(c->srv->cfg.data_dir, name))) {
        item_free(it);
        send_error(c, req->id, FLOE_ERR_INTERNAL, "out of memory");
        server_reap(c->srv, e);
        return;
    }
    submit(c, e, it);
}

static void handle_list(conn *c, Floe__V1__Request *req, int op)
{
    size_t n;
    table_entry **all = registry_list(&c->srv->reg, &n);
    const char *only = op == FLOE_OP_SAVE && req->snapshot->table ? req->snapshot->table : "";
    size_t want = 0;
    for (size_t i = 0; i < n; i++)
        want += !only[0] || strcmp(all[i]->name, only) == 0;
    if (!all) {
        send_error(c, req->id, FLOE_ERR_INTERNAL, "out of memory listing the tables");
    } else if (only[0] && want == 0) {
        send_error(c, req->id, FLOE_ERR_NO_TABLE, "no table %s", only);
    } else {
        multi *m = multi_new(c, req->id, op, want);
        if (!m) {
            send_error(c, req->id, FLOE_ERR_INTERNAL, "out of memory");
        } else {
            conn_ref(c);
            c->inflight++;
            size_t k = 0;
            for (size_t i = 0; i < n; i++) {
                if (only[0] && strcmp(all[i]->name, only) != 0)
                    continue;
                /* a snapshot is a COPY in the table's order, written by the saver */
                item *it =
                    op == FLOE_OP_SAVE ? snapshot_item(c->srv, c, req->id, all[i]) : item_new(c, req->id, op, NULL);
                if (it) {
                    it->multi = m;
                    it->multi_index = k;
                }
                const floe_status st = it ? batcher_submit(&all[i]->bt, it) : FLOE_ERR_INTERNAL;
                if (st != FLOE_OK) {
                    item_free(it);
                    multi_part_done(m, k, st, st == FLOE_ERR_INTERNAL ? "out of memory" : "dropped meanwhile", NULL);
                }
                k++;
            }
            if (want == 0)
                multi_part_done(m, 0, FLOE_OK, NULL, NULL);
        }
    }
    for (size_t i = 0; i < n; i++)
        entry_unref(all[i]);
    free(all);
}

/* Checks the keys (and values) of a key operation against the table. */
static floe_status check_keys(const floe_spec *spec, const ProtobufCBinaryData *keys, const ProtobufCBinaryData *values,
                              bool values_allowed, char *msg, size_t len)
{
    if (spec->kind == FLOE_KIND_TREE) {
        /* Keys are vectors: any u32 words, words x 4 bytes each; values are refused by the caller. */
        const size_t vb = (size_t)spec->words * 4;
        if (keys->len % vb) {
            snprintf(msg, len,
                     "table %s is a TREE of words = %u: keys are vectors of %u little-endian u32 words (%zu bytes "
                     "each); got %zu bytes, not a multiple of %zu",
                     spec->name, spec->words, spec->words, vb, keys->len, vb);
            return FLOE_ERR_INVALID;
        }
        return FLOE_OK;
    }
    if (keys->len % 8) {
        snprintf(msg, len, "keys are 8 bytes each (little-endian u64); got %zu bytes, not a multiple of 8", keys->len);
        return FLOE_ERR_INVALID;
    }
    size_t n = keys->len / 8;
    /* per request, so that a bad key fails its own request, not the batch it would join
     * (protobuf-c allocates bytes fields: the keys are aligned u64s, as the batch uses them) */
    floe_errinfo e;
    floe_status st = floe_keys_check(spec->key_bits, (const uint64_t *)(const void *)keys->data, n, &e);
    if (st != FLOE_OK) {
        snprintf(msg, len, "table %.64s: %.180s", spec->name, e.msg);
        return st;
    }
    if (values && values->len && !values_allowed) {
        snprintf(msg, len, "table %s is a %s: values are for MAP tables", spec->name, floe_kind_name(spec->kind));
        return FLOE_ERR_INVALID;
    }
    if (values_allowed && values && values->len != n * spec->value_bytes) {
        snprintf(msg, len, "%zu keys need %zu bytes of values (%u per key) in table %s; got %zu", n,
                 n * spec->value_bytes, spec->value_bytes, spec->name, values->len);
        return FLOE_ERR_INVALID;
    }
    return FLOE_OK;
}

static void handle_key_op(conn *c, Floe__V1__Request *req, int op, const char *table, const ProtobufCBinaryData *keys,
                          const ProtobufCBinaryData *values, unsigned flags)
{
    table_entry *e = registry_get(&c->srv->reg, table ? table : "");
    if (!e) {
        send_error(c, req->id, FLOE_ERR_NO_TABLE, "no table %s", table ? table : "");
        floe__v1__request__free_unpacked(req, NULL);
        return;
    }
    const floe_spec *spec = &e->table->spec;
    const bool map = spec->kind == FLOE_KIND_MAP, tree = spec->kind == FLOE_KIND_TREE;
    char msg[FLOE_ERROR_MAX];
    floe_status st = FLOE_OK;
    if (op == FLOE_OP_GET) {
        const uint64_t max_frame = LIVE(c->srv, max_frame), vb = (uint64_t)spec->words * 4;
        if (!tree)
            st = FLOE_ERR_UNSUPPORTED, snprintf(msg, sizeof msg, "get_by_id is for TREE tables; table %s is a %s",
                                                spec->name, floe_kind_name(spec->kind));
        else if (keys->len % 8)
            st = FLOE_ERR_INVALID,
            snprintf(msg, sizeof msg, "ids are 8 bytes each (little-endian u64); got %zu bytes, not a multiple of 8",
                     keys->len);
        else if (keys->len / 8 * vb > max_frame)
            st = FLOE_ERR_TOO_LARGE,
            snprintf(msg, sizeof msg,
                     "get_by_id of %zu ids would answer %llu bytes of vectors (words = %u), above max-frame (%llu "
                     "bytes): ask for at most %llu ids per request",
                     keys->len / 8, (unsigned long long)(keys->len / 8 * vb), spec->words,
                     (unsigned long long)max_frame, (unsigned long long)(max_frame / vb));
    } else if (tree && op == FLOE_OP_ERASE)
        st = FLOE_ERR_UNSUPPORTED,
        snprintf(msg, sizeof msg,
                 "table %s is a TREE: TREE tables do not erase (vectors share their nodes; a visited set only grows)",
                 spec->name);
    else if (tree && ((flags & (FLOE_BATCH_OVERWRITE | FLOE_BATCH_WANT_VALUES)) ||
                      (op == FLOE_OP_INSERT && values && values->len)))
        st = FLOE_ERR_INVALID,
        snprintf(msg, sizeof msg, "table %s is a TREE: it stores vectors only; values and overwrite are for MAP tables",
                 spec->name);
    if (st == FLOE_OK && op != FLOE_OP_GET)
        st = check_keys(spec, keys, op == FLOE_OP_INSERT ? values : NULL, map && op == FLOE_OP_INSERT, msg, sizeof msg);
    if (st == FLOE_OK && !map && (flags & (FLOE_BATCH_OVERWRITE | FLOE_BATCH_WANT_VALUES)))
        st = FLOE_ERR_INVALID, snprintf(msg, sizeof msg, "table %s is a %s: overwrite and values are for MAP tables",
                                        spec->name, floe_kind_name(spec->kind));
    item *it = item_new(c, req->id, op, req);
    if (!it) {
        send_error(c, req->id, FLOE_ERR_INTERNAL, "out of memory");
        floe__v1__request__free_unpacked(req, NULL);
        entry_unref(e);
        return;
    }
    if (map && op == FLOE_OP_INSERT)
        flags |= FLOE_BATCH_WANT_VALUES; /* a MAP insert returns each key's stored value */
    it->flags = flags;
    it->t_parse = c->t_frame;
    if (st != FLOE_OK) {
        it->pre_status = st;
        it->pre_error = floe_strdup(msg);
    } else {
        /* TREE INSERT and FIND take vectors (4-byte aligned); the rest 8-byte keys or ids */
        const bool vectors = tree && (op == FLOE_OP_INSERT || op == FLOE_OP_FIND);
        const size_t kb = vectors ? (size_t)spec->words * 4 : 8, align = vectors ? 4 : 8;
        it->n = keys->len / kb;
        const void *data = keys->data;
        if (((uintptr_t)keys->data & (align - 1)) != 0 && it->n) {
            it->keys_copy = floe_malloc(keys->len);
            if (it->keys_copy)
                memcpy(it->keys_copy, keys->data, keys->len);
            else
                it->pre_status = FLOE_ERR_INTERNAL, it->pre_error = floe_strdup("out of memory");
            data = it->keys_copy;
        }
        if (vectors)
            it->vectors = data;
        else
            it->keys = data;
        if (op == FLOE_OP_INSERT && map) {
            it->values = values->data;
            it->values_len = values->len;
        }
    }
    submit(c, e, it);
    entry_unref(e);
}

static void handle_scan(conn *c, Floe__V1__Request *req)
{
    const Floe__V1__Scan *s = req->scan;
    table_entry *e = registry_get(&c->srv->reg, s->table ? s->table : "");
    if (!e) {
        send_error(c, req->id, FLOE_ERR_NO_TABLE, "no table %s", s->table ? s->table : "");
        floe__v1__request__free_unpacked(req, NULL);
        return;
    }
    item *it = item_new(c, req->id, FLOE_OP_SCAN, req);
    if (!it) {
        send_error(c, req->id, FLOE_ERR_INTERNAL, "out of memory");
        floe__v1__request__free_unpacked(req, NULL);
        entry_unref(e);
        return;
    }
    it->limit = s->limit ? s->limit : FLOE_SCAN_DEFAULT_LIMIT;
    if (it->limit > FLOE_SCAN_MAX_LIMIT)
        it->limit = FLOE_SCAN_MAX_LIMIT;
    const floe_spec *spec = &e->table->spec;
    if (spec->kind == FLOE_KIND_TREE) {
        /* A reply carries limit vectors and ids: keep it a sensible frame. */
        const size_t cap = FLOE_TREE_SCAN_MAX_BYTES / ((size_t)spec->words * 4 + 8);
        if (it->limit > cap)
            it->limit = cap ? cap : 1;
    }
    if (s->want_values)
        it->flags |= FLOE_BATCH_WANT_VALUES;
    if (s->want_ids)
        it->flags |= FLOE_BATCH_WANT_IDS;
    if (s->want_values && spec->kind != FLOE_KIND_MAP) {
        it->pre_status = FLOE_ERR_INVALID;
        char msg[FLOE_ERROR_MAX];
        snprintf(msg, sizeof msg, "table %s is a %s: values in a scan are for MAP tables", spec->name,
                 floe_kind_name(spec->kind));
        it->pre_error = floe_strdup(msg);
    } else if (s->want_ids && spec->kind != FLOE_KIND_TREE) {
        it->pre_status = FLOE_ERR_INVALID;
        char msg[FLOE_ERROR_MAX];
        snprintf(msg, sizeof msg, "ids in a scan are for TREE tables; table %s is a %s", spec->name,
                 floe_kind_name(spec->kind));
        it->pre_error = floe_strdup(msg);
    } else if (s->cursor.len == 16) {
        memcpy(&it->cursor.position, s->cursor.data, 8);
        memcpy(&it->cursor.generation, s->cursor.data + 8, 8);
        it->cursor_set = 1;
    } else if (s->cursor.len != 0) {
        it->pre_status = FLOE_ERR_INVALID;
        it->pre_error = floe_strdup("a scan cursor is empty (start) or the 16 bytes of a previous ScanReply.cursor");
    }
    submit(c, e, it);
    entry_unref(e);
}

static void handle_stats(conn *c, Floe__V1__Request *req)
{
    const char *name = req->stats->table ? req->stats->table : "";
    table_entry *e = registry_get(&c->srv->reg, name);
    if (!e) {
        send_error(c, req->id, FLOE_ERR_NO_TABLE, "no table %s", name);
        floe__v1__request__free_unpacked(req, NULL);
        return;
    }
    item *it = item_new(c, req->id, FLOE_OP_STATS, req);
    if (!it)
        send_error(c, req->id, FLOE_ERR_INTERNAL, "out of memory"), floe__v1__request__free_unpacked(req, NULL);
    else
        submit(c, e, it);
    entry_unref(e);
}

/* Takes ownership of req. */
static void handle_request(conn *c, Floe__V1__Request *req)
{
    server *srv = c->srv;
    uint64_t id = req->id;
    count_request(c, metrics_op_of_request(req->op_case), 0);
    if (!c->authed && req->op_case != FLOE__V1__REQUEST__OP_HELLO && server_token_required(srv)) {
        fail_and_close(c, id, FLOE_ERR_UNAUTHENTICATED, "this server requires a token: send hello with it first");
        floe__v1__request__free_unpacked(req, NULL);
        return;
    }
    c->said_hello = true; /* hello-timeout is met (a hello with a wrong token closes the connection) */
    if (atomic_load(&srv->shutting_down) && req->op_case != FLOE__V1__REQUEST__OP_HELLO &&
        req->op_case != FLOE__V1__REQUEST__OP_PING) {
        send_error(c, id, FLOE_ERR_SHUTTING_DOWN, "floed is shutting down");
        floe__v1__request__free_unpacked(req, NULL);
        return;
    }
    switch (req->op_case) {
    case FLOE__V1__REQUEST__OP_HELLO:
        handle_hello(c, req);
        break;
    case FLOE__V1__REQUEST__OP_PING:
        send_frame(c, reply_ok(id));
        break;
    case FLOE__V1__REQUEST__OP_CREATE_TABLE:
        handle_create(c, req);
        break;
    case FLOE__V1__REQUEST__OP_DROP_TABLE:
        handle_drop(c, req);
        break;
    case FLOE__V1__REQUEST__OP_LIST_TABLES:
        handle_list(c, req, FLOE_OP_STATS);
        break;
    case FLOE__V1__REQUEST__OP_SNAPSHOT:
        if (!srv->cfg.data_dir[0])
            send_error(c, id, FLOE_ERR_UNSUPPORTED, "snapshots need a data-dir: start floed with --data-dir DIR");
        else
            handle_list(c, req, FLOE_OP_SAVE);
        break;
    case FLOE__V1__REQUEST__OP_INSERT: {
        const Floe__V1__Insert *in = req->insert;
        unsigned flags = (in->overwrite ? FLOE_BATCH_OVERWRITE : 0) | (in->want_ids ? FLOE_BATCH_WANT_IDS : 0);
        handle_key_op(c, req, FLOE_OP_INSERT, in->table, &in->keys, &in->values, flags);
        return; /* req owned by the item */
    }
    case FLOE__V1__REQUEST__OP_FIND: {
        const Floe__V1__Find *f = req->find;
        unsigned flags = (f->want_ids ? FLOE_BATCH_WANT_IDS : 0) | (f->want_values ? FLOE_BATCH_WANT_VALUES : 0);
        handle_key_op(c, req, FLOE_OP_FIND, f->table, &f->keys, NULL, flags);
        return;
    }
    case FLOE__V1__REQUEST__OP_ERASE:
        handle_key_op(c, req, FLOE_OP_ERASE, req->erase->table, &req->erase->keys, NULL, 0);
        return;
    case FLOE__V1__REQUEST__OP_STATS:
        handle_stats(c, req);
        return;
    case FLOE__V1__REQUEST__OP_SCAN:
        handle_scan(c, req);
        return;
    case FLOE__V1__REQUEST__OP_GET_BY_ID:
        handle_key_op(c, req, FLOE_OP_GET, req->get_by_id->table, &req->get_by_id->ids, NULL, 0);
        return;
    case FLOE__V1__REQUEST__OP_RANGE:
        send_error(c, id, FLOE_ERR_UNSUPPORTED, "range is for ORDERED tables, which this floed does not have yet");
        break;
    case FLOE__V1__REQUEST__OP_INFO:
        metrics_handle_info(c, id);
        break;
    default:
        send_error(c, id, FLOE_ERR_INVALID, "unknown or missing operation in request %llu", (unsigned long long)id);
        break;
    }
    floe__v1__request__free_unpacked(req, NULL);
}

/* ---- framing ------------------------------------------------------------------------------- */

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

/* protobuf-c hands strings over NUL-terminated without their length, so
 * "ab\0cd" would silently become "ab": look at the string fields of the
 * raw message (walking it with its descriptor) for a NUL byte.  false if
 * one has one; the message itself has already parsed. */
static bool strings_clean(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len, int depth)
{
    const uint8_t *end = p + len;
    while (p < end) {
        uint64_t tag, n;
        if (!read_varint(&p, end, &tag))
            return false;
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(d, (unsigned)(tag >> 3));
        switch (tag & 7) {
        case 0:
            if (!read_varint(&p, end, &n))
                return false;
            break;
        case 1:
            p += 8;
            break;
        case 5:
            p += 4;
            break;
        case 2:
            if (!read_varint(&p, end, &n) || n > (uint64_t)(end - p))
                return false;
            if (f && f->type == PROTOBUF_C_TYPE_STRING && memchr(p, 0, n))
                return false;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE && depth < 8 && !strings_clean(f->descriptor, p, n, depth + 1))
                return false;
            p += n;
            break;
        default:
            return false;
        }
    }
    return p == end;
}

static void pause_if_full(conn *c)
{
    if (c->open && !c->paused && c->inflight >= LIVE(c->srv, max_inflight)) {
        c->paused = true;
        update_reading(c);
    }
}

/* The first bytes of a TLS ClientHello: a handshake record, version 3.x. */
static bool looks_like_tls(const unsigned char *hdr)
{
    return hdr[0] == 0x16 && hdr[1] == 0x03;
}

static void read_frames_held(conn *c);

/* A request may close the connection (an answer that cannot be built, the
 * output limit): the reference keeps c alive until the loop has seen it. */
static void read_frames(conn *c)
{
    conn_ref(c);
    read_frames_held(c);
    conn_unref(c);
}

static void read_frames_held(conn *c)
{
    const uint64_t max_frame = LIVE(c->srv, max_frame);
    while (c->open && !c->closing && !c->paused && !c->out_paused) {
        struct evbuffer *in = bufferevent_get_input(c->bev);
        size_t have = evbuffer_get_length(in);
        unsigned char hdr[4];
        if (have < 4)
            return;
        evbuffer_copyout(in, hdr, 4);
        if (!c->tls && !c->said_hello && looks_like_tls(hdr)) {
            /* an answer in our framing would only confuse its TLS client */
            LOG_LIMITED(LOG_WARN, "connection %llu (%s): a TLS handshake on the plain port%s; closing",
                        (unsigned long long)c->serial, c->peer,
                        c->srv->tls_listener ? " (this floed has a TLS port)" : " (this floed has no TLS port)");
            close_now(c);
            return;
        }
        uint32_t len = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
        if (len == 0 || len > max_frame) {
            c->t_frame = floe_now_ns();
            count_request(c, METRICS_OP_UNKNOWN, 4);
        }
        if (len == 0) {
            fail_and_close(c, 0, FLOE_ERR_INVALID, "frame of length 0");
            return;
        }
        if (len > max_frame) {
            char msg[128];
            snprintf(msg, sizeof msg, "frame of %u bytes is above max-frame (%llu bytes)", len,
                     (unsigned long long)max_frame);
            fail_and_close(c, 0, FLOE_ERR_TOO_LARGE, msg);
            return;
        }
        if (have < 4 + (size_t)len)
            return; /* the rest is on its way */
        evbuffer_drain(in, 4);
        c->t_frame = floe_now_ns();
        metrics_request(c->srv->metrics, SHARD(c), -1, 4 + (size_t)len); /* its bytes; the operation once parsed */
        unsigned char *buf = evbuffer_pullup(in, len);
        Floe__V1__Request *req = buf ? floe__v1__request__unpack(NULL, len, buf) : NULL;
        const bool clean = req && strings_clean(&floe__v1__request__descriptor, buf, len, 0);
        evbuffer_drain(in, len);
        if (!req) {
            count_request(c, METRICS_OP_UNKNOWN, 0);
            send_error(c, 0, FLOE_ERR_INVALID, "a frame of %u bytes does not parse as a floe.v1.Request", len);
            continue;
        }
        if (!clean) {
            count_request(c, metrics_op_of_request(req->op_case), 0);
            send_error(c, req->id, FLOE_ERR_INVALID, "a string of the request (a table name?) holds a NUL byte");
            floe__v1__request__free_unpacked(req, NULL);
            continue;
        }
        handle_request(c, req);
        pause_if_full(c);
    }
}

static void on_read(struct bufferevent *bev, void *arg)
{
    (void)bev;
    conn *c = arg;
    c->last_read = floe_now_ns();
    read_frames(c);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    conn *c = arg;
    if (c->tls && (what & BEV_EVENT_ERROR)) {
        unsigned long e = bufferevent_get_openssl_error(bev);
        if (e) {
            char why[300];
            LOG_LIMITED(LOG_WARN, "connection %llu (%s): TLS: %s; closing", (unsigned long long)c->serial, c->peer,
                        tls_last_error(e, why, sizeof why));
            while (bufferevent_get_openssl_error(bev))
                ;
        }
    }
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        close_now(c);
}

/* The connections floed takes at once: max-connections, or fewer when the
 * open-file limit allows fewer (server.c). */
static uint64_t connection_limit(const server *srv)
{
    const uint64_t setting = LIVE(srv, max_connections);
    return srv->fd_connections && srv->fd_connections < setting ? srv->fd_connections : setting;
}

void conn_accept(io_thread *io, int fd, bool tls)
{
    server *srv = io->srv;
    const uint64_t max_connections = connection_limit(srv);
    const bool refuse = atomic_fetch_add(&srv->nconns, 1) >= (int)max_connections;
    if (refuse) {
        metrics_connection(srv->metrics, (size_t)(io - srv->io), true);
        LOG_LIMITED(LOG_WARN, "refused a connection: %llu connections open (%s)", (unsigned long long)max_connections,
                    max_connections < LIVE(srv, max_connections) ? "as many as the open-file limit allows"
                                                                 : "max-connections");
    }
    if (refuse && !tls) { /* ERR_BUSY straight into the socket; a TLS client gets it after the handshake */
        atomic_fetch_sub(&srv->nconns, 1);
        frame *f = reply_error(0, FLOE_ERR_BUSY, "too many connections (max-connections)");
        if (f) {
            ssize_t ignored = send(fd, f->data, f->len, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)ignored;
            free(f);
        }
        evutil_closesocket(fd);
        return;
    }
    struct bufferevent *bev = NULL;
    if (!tls) {
        bev = bufferevent_socket_new(io->base, fd, BEV_OPT_CLOSE_ON_FREE);
    } else {
        struct ssl_st *ssl = tls_server_session(srv->tls);
        bev = ssl ? bufferevent_openssl_socket_new(io->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE)
                  : NULL;
        if (bev) /* a client that closes without close_notify has closed, not failed */
            bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
        else if (ssl)
            SSL_free(ssl);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char peer[64] = "?";
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0 && ss.ss_family == AF_INET) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
        char ip[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof ip);
        snprintf(peer, sizeof peer, "%s:%u", ip, ntohs(sin->sin_port));
    }
    conn *c = bev ? conn_attach(io, bev, peer) : NULL;
    if (!c) {
        if (bev)
            bufferevent_free(bev); /* closes fd */
        else
            evutil_closesocket(fd);
        atomic_fetch_sub(&srv->nconns, 1);
        LOG_LIMITED(LOG_ERROR, "out of memory accepting a connection");
        return;
    }
    c->tls = tls;
    if (refuse) { /* over TLS: sent once the handshake is done, then closed */
        send_frame(c, reply_error(0, FLOE_ERR_BUSY, "too many connections (max-connections)"));
        c->closing = true;
        c->t_closing = c->t_accept;
        bufferevent_disable(bev, EV_READ);
        return;
    }
    metrics_connection(srv->metrics, (size_t)(io - srv->io), false);
}

conn *conn_attach(io_thread *io, struct bufferevent *bev, const char *peer)
{
    server *srv = io->srv;
    conn *c = floe_calloc(1, sizeof *c);
    if (!c)
        return NULL;
    atomic_init(&c->refs, 1);
    c->io = io;
    c->srv = srv;
    c->bev = bev;
    c->open = true;
    c->serial = atomic_fetch_add(&next_serial, 1);
    c->t_accept = c->last_read = floe_now_ns();
    snprintf(c->peer, sizeof c->peer, "%s", peer);
    c->next = io->conns;
    if (io->conns)
        io->conns->prev = c;
    io->conns = c;
    /* Stop reading when a frame's worth is buffered and unparsed: the high
     * watermark bounds memory per connection. */
    bufferevent_setwatermark(bev, EV_READ, 0, (size_t)LIVE(srv, max_frame) + 4 + 65536);
    /* libevent reads and writes at most 16 KiB per callback by default: a
     * 512 KiB request would take 32 read calls and as many wake-ups.  Take
     * whatever the socket has (fewer system calls, and a frame more often
     * lands in one buffer chain, so evbuffer_pullup need not copy it). */
    bufferevent_set_max_single_read(bev, IO_MAX_SINGLE);
    bufferevent_set_max_single_write(bev, IO_MAX_SINGLE);
    bufferevent_setcb(bev, on_read, on_write, on_event, c);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
    log_debug("connection %llu from %s", (unsigned long long)c->serial, c->peer);
    return c;
}

void conn_deliver(conn *c, frame *f)
{
    io_thread *io = c->io;
    if (!f) {
        f = floe_calloc(1, sizeof *f); /* still must answer for the in-flight count */
        if (!f)
            abort();
        f->len = 0;
    }
    f->to = c;
    f->next = NULL;
    pthread_mutex_lock(&io->lock);
    if (io->deliveries_tail)
        io->deliveries_tail->next = f;
    else
        io->deliveries = f;
    io->deliveries_tail = f;
    pthread_mutex_unlock(&io->lock);
    event_active(io->wake, EV_READ, 0);
}

static void stop_now(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    io_thread *io = arg;
    while (io->conns)
        close_now(io->conns);
    event_base_loopbreak(io->base);
}

void io_wake(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    io_thread *io = arg;
    pthread_mutex_lock(&io->lock);
    frame *list = io->deliveries;
    io->deliveries = io->deliveries_tail = NULL;
    accepted *fds = io->new_fds;
    size_t nfds = io->nnew;
    io->new_fds = NULL;
    io->nnew = io->capnew = 0;
    bool stopping = io->stopping;
    pthread_mutex_unlock(&io->lock);

    for (size_t i = 0; i < nfds; i++)
        conn_accept(io, fds[i].fd, fds[i].tls);
    free(fds);
    while (list) {
        frame *f = list;
        list = f->next;
        conn *c = f->to;
        metrics_answer ma;
        metrics_answer_of(f, &ma);
        const uint64_t id = f->item ? f->item->id : 0;
        if (f->item && !(f = batcher_pack(f))) /* an answer still to pack; if it cannot be, say so */
            f = reply_error(id, FLOE_ERR_INTERNAL, "out of memory building the answer");
        if ((!f || !f->len) && c->open) {
            /* no answer at all (the batcher could not build one): closing is the one way left to tell the
             * client, which would otherwise wait for ever; answers to closed connections are dropped here */
            LOG_LIMITED(LOG_ERROR, "connection %llu (%s): out of memory building an answer; closing it",
                        (unsigned long long)c->serial, c->peer);
            close_now(c);
        }
        const bool write = f && c->open && f->len;
        if (write)
            bufferevent_write(c->bev, f->data, f->len);
        if (f && f->len)
            metrics_answered(c->srv->metrics, SHARD(c), ma.op, ma.status, ma.keys, ma.t_parse, write ? f->len : 0);
        free(f);
        c->inflight--;
        if (write)
            check_output(c);
        if (c->open && c->paused && c->inflight < LIVE(c->srv, max_inflight)) {
            c->paused = false;
            update_reading(c);
        }
        conn_unref(c);
    }
    if (stopping && !io->stop_seen) {
        io->stop_seen = true;
        struct timeval limit = {2, 0}, every = {0, 20000};
        io->stop_timer = evtimer_new(io->base, stop_now, io);
        io->sweep_timer = event_new(io->base, -1, EV_PERSIST, on_sweep, io);
        if (io->stop_timer)
            evtimer_add(io->stop_timer, &limit);
        if (io->sweep_timer)
            evtimer_add(io->sweep_timer, &every);
    }
    if (stopping)
        stop_sweep(io);
}

void io_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    io_thread *io = arg;
    const uint64_t now = floe_now_ns(), s = 1000000000ull;
    const uint64_t hello = LIVE(io->srv, hello_timeout), idle = LIVE(io->srv, timeout);
    for (conn *c = io->conns, *next; c; c = next) {
        next = c->next;
        if (c->closing) { /* a last answer the client does not take: give up on it */
            if (now - c->t_closing > CLOSING_NS)
                close_now(c);
            continue;
        }
        if (hello && !c->said_hello && now - c->t_accept > hello * s) {
            LOG_LIMITED(LOG_INFO, "connection %llu (%s): no %s within hello-timeout (%llu s); closing",
                        (unsigned long long)c->serial, c->peer, server_token_required(io->srv) ? "hello" : "request",
                        (unsigned long long)hello);
            close_now(c);
        } else if (idle && c->inflight == 0 && evbuffer_get_length(bufferevent_get_output(c->bev)) == 0 &&
                   now - c->last_read > idle * s) {
            log_debug("connection %llu (%s): idle for timeout (%llu s); closing", (unsigned long long)c->serial,
                      c->peer, (unsigned long long)idle);
            close_now(c);
        }
    }
}
