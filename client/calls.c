/*
 * calls.c - libfloe's calls (see floe.h): what a call answered, each
 * operation sent (floe_send_*: pipelined), and each blocking call (send
 * and wait), tables, stats and scans, ORDERED tables' ranges and
 * neighbours.
 */
#define _GNU_SOURCE
#include "floe.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "floe.pb-c.h"
#include "floe_internal.h"
#include "keymsg.h"

/* ---- call accessors ----------------------------------------------------------------------------- */

int floe_call_status(const floe_call *call)
{
    return call->done ? call->status : -1;
}

const char *floe_call_error(const floe_call *call)
{
    return call->error ? call->error : "";
}

uint64_t floe_call_id(const floe_call *call)
{
    return call->id;
}

const uint8_t *floe_call_results(const floe_call *call, size_t *n)
{
    *n = call->resp ? call->resp->results.len : 0;
    return call->resp ? call->resp->results.data : NULL;
}

const unsigned char *floe_call_ids(const floe_call *call, size_t *bytes)
{
    *bytes = call->resp ? call->resp->ids.len : 0;
    return call->resp ? call->resp->ids.data : NULL;
}

/* A range's page, or NULL (not a range's answer). */
static const Floe__V1__ScanReply *range_page(const floe_call *call)
{
    return call->resp && call->resp->body_case == FLOE__V1__RESPONSE__BODY_SCAN ? call->resp->scan : NULL;
}

const unsigned char *floe_call_values(const floe_call *call, size_t *bytes)
{
    const Floe__V1__ScanReply *page = range_page(call);
    const ProtobufCBinaryData *v = page ? &page->values : call->resp ? &call->resp->values : NULL;
    *bytes = v ? v->len : 0;
    return v ? v->data : NULL;
}

const unsigned char *floe_call_keys(const floe_call *call, size_t *bytes)
{
    const Floe__V1__ScanReply *page = range_page(call);
    const ProtobufCBinaryData *k = page ? &page->keys : call->resp ? &call->resp->keys : NULL;
    *bytes = k ? k->len : 0;
    return k ? k->data : NULL;
}

int floe_call_range_next(const floe_call *call, floe_range_cursor *next, int *done)
{
    if (call->status != FLOE_OK)
        return call->status;
    const Floe__V1__ScanReply *page = range_page(call);
    if (!page || page->cursor.len != sizeof next->bytes || page->keys.len % 8)
        return FLOE_ERR_PROTOCOL;
    memcpy(next->bytes, page->cursor.data, sizeof next->bytes);
    next->started = 1;
    *done = page->done;
    return FLOE_OK;
}

const unsigned char *floe_call_vectors(const floe_call *call, size_t *bytes)
{
    *bytes = call->resp ? call->resp->vectors.len : 0;
    return call->resp ? call->resp->vectors.data : NULL;
}

uint64_t floe_call_generation(const floe_call *call)
{
    return call->resp ? call->resp->generation : 0;
}

void floe_call_counts(const floe_call *call, floe_counts *k)
{
    memset(k, 0, sizeof *k);
    if (!call->resp)
        return;
    k->inserted = call->resp->inserted;
    k->present = call->resp->present;
    k->absent = call->resp->absent;
    k->full = call->resp->full;
    k->erased = call->resp->erased;
}

/* ---- sending ------------------------------------------------------------------------------------ */

/* A call that fails here, before anything is sent: completed at once, as
 * send_request does for a broken connection. */
static floe_call *refuse_call(floe *c, int status, const char *msg, floe_callback *cb, void *arg)
{
    floe_call *call = floe__new_call(c, cb, arg);
    if (!call)
        return NULL;
    floe__complete(c, call, status, msg, NULL);
    return cb ? NULL : call;
}

/* Every key request: operation op's message (proto/keymsg.h) with its
 * parts set; a flag its message has no part for is not sent. */
static floe_call *send_keys(floe *c, uint32_t op, const char *table, const void *keys, size_t key_bytes,
                            const void *values, size_t values_len, unsigned flags, floe_callback *cb, void *arg)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    _Alignas(max_align_t) unsigned char body[FLOE_KEYMSG_BODY_MAX];
    floe_keymsg m;
    if (!floe__keymsg_init(&req, op, body, &m))
        return refuse_call(c, FLOE_ERR_INVALID, "not an operation on keys", cb, arg);
    if (values && values_len && !m.values)
        return refuse_call(c, FLOE_ERR_INVALID, "this operation takes no values", cb, arg);
    *m.table = (char *)table;
    *m.keys = (ProtobufCBinaryData){key_bytes, (uint8_t *)keys};
    if (m.values && values)
        *m.values = (ProtobufCBinaryData){values_len, (uint8_t *)values};
    if (m.overwrite)
        *m.overwrite = (flags & FLOE_OVERWRITE) != 0;
    if (m.want_ids)
        *m.want_ids = (flags & FLOE_WANT_IDS) != 0;
    if (m.want_values)
        *m.want_values = (flags & FLOE_WANT_VALUES) != 0;
    return floe__send_request(c, &req, cb, arg);
}

floe_call *floe_send_keys(floe *c, const char *op, const char *table, const void *keys, size_t key_bytes,
                          const void *values, size_t values_len, unsigned flags, floe_callback *cb, void *arg)
{
    const uint32_t wire = floe__keymsg_op_named(op ? op : "");
    if (!floe__keymsg_keyed(wire)) {
        char msg[128];
        snprintf(msg, sizeof msg, "%.64s is not an operation on keys", op ? op : "(null)");
        return refuse_call(c, FLOE_ERR_INVALID, msg, cb, arg);
    }
    return send_keys(c, wire, table, keys, key_bytes, values, values_len, flags, cb, arg);
}

floe_call *floe_send_insert(floe *c, const char *table, const uint64_t *keys, size_t n, const void *values,
                            size_t values_len, unsigned flags, floe_callback *cb, void *arg)
{
    return send_keys(c, FLOE__V1__REQUEST__OP_INSERT, table, keys, n * 8, values, values_len,
                     flags & (FLOE_OVERWRITE | FLOE_WANT_IDS), cb, arg);
}

floe_call *floe_send_add(floe *c, const char *table, const uint64_t *keys, size_t n, const void *deltas,
                         size_t deltas_len, floe_callback *cb, void *arg)
{
    return send_keys(c, FLOE__V1__REQUEST__OP_ADD, table, keys, n * 8, deltas, deltas_len, 0, cb, arg);
}

floe_call *floe_send_find(floe *c, const char *table, const uint64_t *keys, size_t n, unsigned flags, floe_callback *cb,
                          void *arg)
{
    return send_keys(c, FLOE__V1__REQUEST__OP_FIND, table, keys, n * 8, NULL, 0, flags, cb, arg);
}

floe_call *floe_send_erase(floe *c, const char *table, const uint64_t *keys, size_t n, floe_callback *cb, void *arg)
{
    return send_keys(c, FLOE__V1__REQUEST__OP_ERASE, table, keys, n * 8, NULL, 0, 0, cb, arg);
}

floe_call *floe_send_successor(floe *c, const char *table, const uint64_t *keys, size_t n, unsigned flags,
                               floe_callback *cb, void *arg)
{
    return send_keys(c, FLOE__V1__REQUEST__OP_SUCCESSOR, table, keys, n * 8, NULL, 0, flags & FLOE_WANT_VALUES, cb,
                     arg);
}

floe_call *floe_send_predecessor(floe *c, const char *table, const uint64_t *keys, size_t n, unsigned flags,
                                 floe_callback *cb, void *arg)
{
    return send_keys(c, FLOE__V1__REQUEST__OP_PREDECESSOR, table, keys, n * 8, NULL, 0, flags & FLOE_WANT_VALUES, cb,
                     arg);
}

floe_call *floe_send_range(floe *c, const char *table, uint64_t lo, uint64_t hi, unsigned flags,
                           const floe_range_cursor *cursor, size_t limit, floe_callback *cb, void *arg)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Range r = FLOE__V1__RANGE__INIT;
    r.table = (char *)table;
    r.from = lo;
    r.to = hi;
    r.desc = (flags & FLOE_RANGE_DESC) != 0;
    r.want_values = (flags & FLOE_WANT_VALUES) != 0;
    r.limit = (uint32_t)(limit > UINT32_MAX ? UINT32_MAX : limit);
    if (cursor && cursor->started) {
        r.cursor.data = (uint8_t *)cursor->bytes;
        r.cursor.len = sizeof cursor->bytes;
    }
    req.op_case = FLOE__V1__REQUEST__OP_RANGE;
    req.range = &r;
    return floe__send_request(c, &req, cb, arg);
}

static floe_call *send_vectors(floe *c, uint32_t op, const char *table, const uint32_t *vectors, size_t n,
                               unsigned words, unsigned flags, floe_callback *cb, void *arg)
{
    if (words == 0 && n > 0)
        return refuse_call(c, FLOE_ERR_INVALID, "words must be the TREE table's words per vector (2..256), not 0", cb,
                           arg);
    c->route_words = words; /* a partitioned connection splits the vectors by their words */
    /* little-endian u32 words: the host's order on the platforms floe runs on */
    floe_call *call = send_keys(c, op, table, vectors, n * words * 4, NULL, 0, flags & FLOE_WANT_IDS, cb, arg);
    c->route_words = 0;
    return call;
}

floe_call *floe_send_insert_vectors(floe *c, const char *table, const uint32_t *vectors, size_t n, unsigned words,
                                    unsigned flags, floe_callback *cb, void *arg)
{
    return send_vectors(c, FLOE__V1__REQUEST__OP_INSERT, table, vectors, n, words, flags, cb, arg);
}

floe_call *floe_send_find_vectors(floe *c, const char *table, const uint32_t *vectors, size_t n, unsigned words,
                                  unsigned flags, floe_callback *cb, void *arg)
{
    return send_vectors(c, FLOE__V1__REQUEST__OP_FIND, table, vectors, n, words, flags, cb, arg);
}

floe_call *floe_send_insert_states(floe *c, const char *table, uint64_t generation, const uint64_t *parents,
                                   const uint8_t *counts, const uint8_t *changes, size_t n, unsigned flags,
                                   floe_callback *cb, void *arg)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += counts[i];
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Insert in = FLOE__V1__INSERT__INIT;
    in.table = (char *)table;
    in.parents.data = (uint8_t *)parents; /* little-endian u64: the host's order on the platforms floe runs on */
    in.parents.len = n * 8;
    in.change_counts.data = (uint8_t *)counts;
    in.change_counts.len = n;
    in.changes.data = (uint8_t *)changes;
    in.changes.len = total * FLOE_CHANGE_BYTES;
    in.generation = generation;
    in.want_ids = (flags & FLOE_WANT_IDS) != 0;
    req.op_case = FLOE__V1__REQUEST__OP_INSERT;
    req.insert = &in;
    return floe__send_request(c, &req, cb, arg);
}

floe_call *floe_send_get_by_id(floe *c, const char *table, const uint64_t *ids, size_t n, floe_callback *cb, void *arg)
{
    return send_keys(c, FLOE__V1__REQUEST__OP_GET_BY_ID, table, ids, n * 8, NULL, 0, 0, cb, arg);
}

floe_call *floe_send_ping(floe *c, floe_callback *cb, void *arg)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Ping p = FLOE__V1__PING__INIT;
    req.op_case = FLOE__V1__REQUEST__OP_PING;
    req.ping = &p;
    return floe__send_request(c, &req, cb, arg);
}

/* ---- blocking calls: send + wait ------------------------------------------------------------------ */

int floe__finish(floe *c, floe_call *call)
{
    if (!call)
        return floe__set_error(c, FLOE_ERR_IO, "out of memory");
    int st = floe_wait(c, call);
    if (st != FLOE_OK)
        floe__set_error(c, st, "%s", floe_call_error(call)[0] ? floe_call_error(call) : floe_strerror(st));
    else
        c->err = FLOE_OK, c->errstr[0] = '\0';
    return st;
}

/* Sends req, waits, and keeps only the status: for calls with no answer body. */
static int simple_call(floe *c, Floe__V1__Request *req)
{
    floe_call *call = floe__send_request(c, req, NULL, NULL);
    int st = floe__finish(c, call);
    floe_call_free(call);
    return st;
}

static int copy_key_answers(floe *c, floe_call *call, size_t n, uint8_t *results, void *values, size_t vbytes,
                            floe_counts *counts)
{
    size_t got, vgot;
    const uint8_t *r = floe_call_results(call, &got);
    const unsigned char *v = floe_call_values(call, &vgot);
    if (got != n || (values && vgot != vbytes)) {
        floe_call_free(call);
        return floe__set_error(c, FLOE_ERR_PROTOCOL, "the server answered %zu keys of %zu", got, n);
    }
    if (results && n)
        memcpy(results, r, n);
    if (values && vbytes)
        memcpy(values, v, vbytes);
    if (counts)
        floe_call_counts(call, counts);
    floe_call_free(call);
    return FLOE_OK;
}

int floe_ping(floe *c)
{
    floe_call *call = floe_send_ping(c, NULL, NULL);
    int st = floe__finish(c, call);
    floe_call_free(call);
    return st;
}

int floe_insert(floe *c, const char *table, const uint64_t *keys, size_t n, uint8_t *results, floe_counts *counts)
{
    floe_call *call = floe_send_insert(c, table, keys, n, NULL, 0, 0, NULL, NULL);
    int st = floe__finish(c, call);
    if (st != FLOE_OK) {
        floe_call_free(call);
        return st;
    }
    return copy_key_answers(c, call, n, results, NULL, 0, counts);
}

int floe_insert_values(floe *c, const char *table, const uint64_t *keys, const void *values, size_t n,
                       unsigned value_bytes, int overwrite, uint8_t *results, void *old_values, floe_counts *counts)
{
    floe_call *call =
        floe_send_insert(c, table, keys, n, values, n * value_bytes, overwrite ? FLOE_OVERWRITE : 0, NULL, NULL);
    int st = floe__finish(c, call);
    if (st != FLOE_OK) {
        floe_call_free(call);
        return st;
    }
    return copy_key_answers(c, call, n, results, old_values, old_values ? n * value_bytes : 0, counts);
}

int floe_add(floe *c, const char *table, const uint64_t *keys, const void *deltas, size_t n, unsigned value_bytes,
             uint8_t *results, void *new_values, floe_counts *counts)
{
    floe_call *call = floe_send_add(c, table, keys, n, deltas, n * value_bytes, NULL, NULL);
    int st = floe__finish(c, call);
    if (st != FLOE_OK) {
        floe_call_free(call);
        return st;
    }
    return copy_key_answers(c, call, n, results, new_values, new_values ? n * value_bytes : 0, counts);
}

int floe_find(floe *c, const char *table, const uint64_t *keys, size_t n, uint8_t *results, void *values,
              unsigned value_bytes, floe_counts *counts)
{
    floe_call *call = floe_send_find(c, table, keys, n, values ? FLOE_WANT_VALUES : 0, NULL, NULL);
    int st = floe__finish(c, call);
    if (st != FLOE_OK) {
        floe_call_free(call);
        return st;
    }
    return copy_key_answers(c, call, n, results, values, values ? n * value_bytes : 0, counts);
}

int floe_erase(floe *c, const char *table, const uint64_t *keys, size_t n, uint8_t *results, floe_counts *counts)
{
    floe_call *call = floe_send_erase(c, table, keys, n, NULL, NULL);
    int st = floe__finish(c, call);
    if (st != FLOE_OK) {
        floe_call_free(call);
        return st;
    }
    return copy_key_answers(c, call, n, results, NULL, 0, counts);
}

/* Blocking insert or find of vectors: send + wait + copy the answers. */
static int vectors_call(floe *c, floe_call *call, size_t n, uint8_t *results, uint64_t *ids, floe_counts *counts)
{
    int st = floe__finish(c, call);
    if (st != FLOE_OK) {
        floe_call_free(call);
        return st;
    }
    size_t idb;
    const unsigned char *got_ids = floe_call_ids(call, &idb);
    if (ids && idb != n * 8) {
        floe_call_free(call);
        return floe__set_error(c, FLOE_ERR_PROTOCOL, "the server answered %zu ids for %zu vectors", idb / 8, n);
    }
    if (ids && n)
        memcpy(ids, got_ids, n * 8);
    c->ids_generation = floe_call_generation(call);
    return copy_key_answers(c, call, n, results, NULL, 0, counts);
}

int floe_insert_vectors(floe *c, const char *table, const uint32_t *vectors, size_t n, unsigned words, uint8_t *results,
                        uint64_t *ids, floe_counts *counts)
{
    return vectors_call(c, floe_send_insert_vectors(c, table, vectors, n, words, ids ? FLOE_WANT_IDS : 0, NULL, NULL),
                        n, results, ids, counts);
}

int floe_insert_states(floe *c, const char *table, uint64_t generation, const uint64_t *parents, const uint8_t *counts,
                       const uint8_t *changes, size_t n, uint8_t *results, uint64_t *ids, floe_counts *counts_out)
{
    return vectors_call(
        c,
        floe_send_insert_states(c, table, generation, parents, counts, changes, n, ids ? FLOE_WANT_IDS : 0, NULL, NULL),
        n, results, ids, counts_out);
}

uint64_t floe_ids_generation(const floe *c)
{
    return c->ids_generation;
}

int floe_find_vectors(floe *c, const char *table, const uint32_t *vectors, size_t n, unsigned words, uint8_t *results,
                      uint64_t *ids, floe_counts *counts)
{
    return vectors_call(c, floe_send_find_vectors(c, table, vectors, n, words, ids ? FLOE_WANT_IDS : 0, NULL, NULL), n,
                        results, ids, counts);
}

int floe_get_by_id(floe *c, const char *table, const uint64_t *ids, size_t n, unsigned words, uint8_t *results,
                   uint32_t *vectors)
{
    if (words == 0 && vectors && n > 0)
        return floe__set_error(c, FLOE_ERR_INVALID, "words must be the TREE table's words per vector (2..256), not 0");
    floe_call *call = floe_send_get_by_id(c, table, ids, n, NULL, NULL);
    int st = floe__finish(c, call);
    if (st != FLOE_OK) {
        floe_call_free(call);
        return st;
    }
    size_t vbytes;
    const unsigned char *v = floe_call_vectors(call, &vbytes);
    if (vectors && vbytes != n * words * 4) {
        if (n > 0 && vbytes % (n * 4) == 0)
            st = floe__set_error(c, FLOE_ERR_INVALID, "table %s holds vectors of %zu words; the call said words = %u",
                                 table, vbytes / (n * 4), words);
        else
            st = floe__set_error(c, FLOE_ERR_PROTOCOL, "the server answered %zu bytes of vectors for %zu ids", vbytes,
                                 n);
        floe_call_free(call);
        return st;
    }
    if (vectors && n)
        memcpy(vectors, v, vbytes);
    return copy_key_answers(c, call, n, results, NULL, 0, NULL);
}

int floe_create(floe *c, const floe_table_def *def)
{
    return c->router ? c->router->create(c, def) : floe__create_shard(c, def, 0, 0, 0);
}

int floe__create_shard(floe *c, const floe_table_def *def, unsigned shard, unsigned shards, uint64_t set)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__CreateTable ct = FLOE__V1__CREATE_TABLE__INIT;
    Floe__V1__TableSpec spec = FLOE__V1__TABLE_SPEC__INIT;
    spec.name = (char *)(def->name ? def->name : "");
    spec.kind = (Floe__V1__TableKind)def->kind;
    spec.key_bits = def->key_bits;
    spec.value_bytes = def->value_bytes;
    spec.capacity = def->capacity;
    spec.grow = def->grow != 0;
    spec.no_grow = def->no_grow != 0;
    spec.max_fill = def->max_fill;
    spec.backend = (char *)(def->backend ? def->backend : "");
    spec.words = def->words;
    spec.memory = def->memory;
    spec.parts = def->parts;
    spec.explore = def->explore != 0;
    spec.label_bytes = def->label_bytes;
    spec.explore_any_order = def->any_order != 0;
    spec.shard = shard;
    spec.shards = shards;
    spec.shard_set = set;
    ct.spec = &spec;
    req.op_case = FLOE__V1__REQUEST__OP_CREATE_TABLE;
    req.create_table = &ct;
    return simple_call(c, &req);
}

int floe_drop(floe *c, const char *table)
{
    if (c->router)
        return c->router->each(c, floe_drop, table);
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__DropTable d = FLOE__V1__DROP_TABLE__INIT;
    d.table = (char *)table;
    req.op_case = FLOE__V1__REQUEST__OP_DROP_TABLE;
    req.drop_table = &d;
    return simple_call(c, &req);
}

int floe_freeze(floe *c, const char *table)
{
    if (c->router)
        return c->router->each(c, floe_freeze, table);
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Freeze f = FLOE__V1__FREEZE__INIT;
    f.table = (char *)(table ? table : "");
    req.op_case = FLOE__V1__REQUEST__OP_FREEZE;
    req.freeze = &f;
    return simple_call(c, &req);
}

int floe_snapshot(floe *c, const char *table)
{
    if (c->router)
        return c->router->each(c, floe_snapshot, table);
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Snapshot s = FLOE__V1__SNAPSHOT__INIT;
    s.table = (char *)(table ? table : "");
    req.op_case = FLOE__V1__REQUEST__OP_SNAPSHOT;
    req.snapshot = &s;
    return simple_call(c, &req);
}

/* floe_shutdown's, as the router's each takes an operation (the table unused). */
static int shutdown_save(floe *c, const char *table)
{
    (void)table;
    return floe_shutdown(c, 0);
}

static int shutdown_nosave(floe *c, const char *table)
{
    (void)table;
    return floe_shutdown(c, 1);
}

int floe_shutdown(floe *c, int nosave)
{
    if (c->router) /* every server */
        return c->router->each(c, nosave ? shutdown_nosave : shutdown_save, NULL);
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Shutdown s = FLOE__V1__SHUTDOWN__INIT;
    s.nosave = nosave != 0;
    req.op_case = FLOE__V1__REQUEST__OP_SHUTDOWN;
    req.shutdown = &s;
    return simple_call(c, &req);
}

void floe__info_from(floe_table_info *o, const Floe__V1__TableStats *s)
{
    memset(o, 0, sizeof *o);
    if (s->spec) {
        snprintf(o->name, sizeof o->name, "%s", s->spec->name ? s->spec->name : "");
        o->kind = (int)s->spec->kind;
        o->key_bits = s->spec->key_bits;
        o->value_bytes = s->spec->value_bytes;
        o->capacity = s->spec->capacity;
        o->grow = s->spec->grow;
        o->max_fill = s->spec->max_fill;
        o->seed = s->spec->seed;
        o->words = s->spec->words;
        o->memory = s->spec->memory;
        o->shard = s->spec->shard;
        o->shards = s->spec->shards;
        o->shard_set = s->spec->shard_set;
    }
    o->nodes = s->nodes;
    o->node_slots = s->node_slots;
    o->node_fill = s->node_fill;
    o->orphan_nodes = s->orphan_nodes;
    o->compression = s->compression;
    o->keys = s->keys;
    o->tombstones = s->tombstones;
    o->slots = s->slots;
    o->memory_bytes = s->memory_bytes;
    o->generation = s->generation;
    o->fill = s->fill;
    o->bytes_per_key = s->bytes_per_key;
    snprintf(o->backend, sizeof o->backend, "%s", s->backend ? s->backend : "");
    for (size_t i = 0; i < s->n_stages && o->n_stages < sizeof o->stages / sizeof o->stages[0]; i++) {
        floe_stage_info *d = &o->stages[o->n_stages++];
        snprintf(d->name, sizeof d->name, "%s", s->stages[i]->name ? s->stages[i]->name : "");
        d->count = s->stages[i]->count;
        d->keys = s->stages[i]->keys;
        d->nanos = s->stages[i]->nanos;
    }
    o->device = s->device;
    o->frozen = s->frozen;
    for (size_t i = 0; i < s->n_parts && o->n_parts < sizeof o->parts / sizeof o->parts[0]; i++) {
        floe_part_info *d = &o->parts[o->n_parts++];
        d->keys = s->parts[i]->keys;
        d->slots = s->parts[i]->slots;
        d->memory_bytes = s->parts[i]->memory_bytes;
        d->generation = s->parts[i]->generation;
        d->device = s->parts[i]->device;
    }
    if (s->explore) {
        o->explore.on = 1;
        o->explore.done = s->explore->done;
        o->explore.states = s->explore->states;
        o->explore.open = s->explore->open;
        o->explore.claimed = s->explore->claimed;
        o->explore.claims = s->explore->claims;
        o->explore.levels = s->explore->levels;
        snprintf(o->explore.memory, sizeof o->explore.memory, "%s", s->explore->memory ? s->explore->memory : "");
    }
    for (size_t l = 0; l < s->n_levels && l < 3; l++) {
        o->level[l].slots = s->levels[l]->slots;
        o->level[l].used = s->levels[l]->used;
        o->level[l].row_bits = s->levels[l]->row_bits;
        o->level[l].fill = s->levels[l]->fill;
    }
}

int floe__stats_call(floe *c, const char *table, floe_call **call)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Stats s = FLOE__V1__STATS__INIT;
    s.table = (char *)table;
    req.op_case = FLOE__V1__REQUEST__OP_STATS;
    req.stats = &s;
    *call = floe__send_request(c, &req, NULL, NULL);
    int st = floe__finish(c, *call);
    if (st == FLOE_OK && (call[0]->resp->body_case != FLOE__V1__RESPONSE__BODY_STATS || !call[0]->resp->stats))
        st = floe__set_error(c, FLOE_ERR_PROTOCOL, "stats reply without stats");
    return st;
}

int floe_stats(floe *c, const char *table, floe_table_info *info)
{
    if (c->router)
        return c->router->stats(c, table, info);
    floe_call *call;
    int st = floe__stats_call(c, table, &call);
    if (st == FLOE_OK)
        floe__info_from(info, call->resp->stats);
    floe_call_free(call);
    return st;
}

int floe_tables(floe *c, floe_table_info **tables, size_t *n)
{
    if (c->router)
        return c->router->tables(c, tables, n);
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__ListTables l = FLOE__V1__LIST_TABLES__INIT;
    req.op_case = FLOE__V1__REQUEST__OP_LIST_TABLES;
    req.list_tables = &l;
    *tables = NULL;
    *n = 0;
    floe_call *call = floe__send_request(c, &req, NULL, NULL);
    int st = floe__finish(c, call);
    if (st == FLOE_OK && call->resp->body_case == FLOE__V1__RESPONSE__BODY_TABLES) {
        const Floe__V1__TableList *tl = call->resp->tables;
        *tables = calloc(tl->n_tables + 1, sizeof **tables);
        if (!*tables) {
            st = floe__set_error(c, FLOE_ERR_IO, "out of memory");
        } else {
            for (size_t i = 0; i < tl->n_tables; i++)
                floe__info_from(&(*tables)[i], tl->tables[i]);
            *n = tl->n_tables;
        }
    } else if (st == FLOE_OK) {
        st = floe__set_error(c, FLOE_ERR_PROTOCOL, "list reply without tables");
    }
    floe_call_free(call);
    return st;
}

void floe_server_stats_free(floe_server_stats *s)
{
    if (!s)
        return;
    free(s->version);
    free(s->build);
    free(s->backend);
    free(s->gpu);
    free(s->last_snapshot_status);
    free(s->data_dir);
    free(s->metrics_address);
    free(s->ops);
    free(s->errors);
    free(s->tables);
    free(s->gpus);
    free(s);
}

static char *dup_str(const char *s, bool *oom)
{
    char *d = strdup(s ? s : "");
    if (!d)
        *oom = true;
    return d;
}

/* The plain C copy of an InfoReply; NULL when out of memory. */
static floe_server_stats *server_stats_from(const Floe__V1__InfoReply *r)
{
    floe_server_stats *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    bool oom = false;
    s->version = dup_str(r->version, &oom);
    s->build = dup_str(r->build, &oom);
    s->backend = dup_str(r->backend, &oom);
    s->gpu = dup_str(r->gpu, &oom);
    s->last_snapshot_status = dup_str(r->last_snapshot_status, &oom);
    s->data_dir = dup_str(r->data_dir, &oom);
    s->metrics_address = dup_str(r->metrics_address, &oom);
    s->uptime_seconds = r->uptime_seconds;
    s->pid = r->pid;
    s->gpu_memory_total = r->gpu_memory_total;
    s->gpu_memory_used = r->gpu_memory_used;
    s->gpu_memory_free = r->gpu_memory_free;
    s->connections = r->connections;
    s->connections_total = r->connections_total;
    s->connections_refused = r->connections_refused;
    s->bytes_in = r->bytes_in;
    s->bytes_out = r->bytes_out;
    s->rss_bytes = r->rss_bytes;
    s->maxmemory = r->maxmemory;
    s->maxmemory_gpu = r->maxmemory_gpu;
    s->last_snapshot_time = r->last_snapshot_time;
    /* one spare entry each, so that an empty list is still a valid pointer */
    s->ops = calloc(r->n_ops + 1, sizeof *s->ops);
    s->errors = calloc(r->n_errors + 1, sizeof *s->errors);
    s->tables = calloc(r->n_tables + 1, sizeof *s->tables);
    s->gpus = calloc(r->n_gpus + 1, sizeof *s->gpus);
    if (oom || !s->ops || !s->errors || !s->tables || !s->gpus) {
        floe_server_stats_free(s);
        return NULL;
    }
    for (size_t i = 0; i < r->n_ops; i++) {
        const Floe__V1__OpCounters *o = r->ops[i];
        snprintf(s->ops[i].op, sizeof s->ops[i].op, "%s", o->op ? o->op : "");
        s->ops[i].requests = o->requests;
        s->ops[i].keys = o->keys;
        s->ops[i].errors = o->errors;
    }
    s->n_ops = r->n_ops;
    for (size_t i = 0; i < r->n_errors; i++) {
        snprintf(s->errors[i].status, sizeof s->errors[i].status, "%s",
                 r->errors[i]->status ? r->errors[i]->status : "");
        s->errors[i].count = r->errors[i]->count;
    }
    s->n_errors = r->n_errors;
    for (size_t i = 0; i < r->n_tables; i++) {
        const Floe__V1__TableInfo *t = r->tables[i];
        floe_table_summary *d = &s->tables[i];
        snprintf(d->name, sizeof d->name, "%s", t->name ? t->name : "");
        d->kind = (int)t->kind;
        snprintf(d->backend, sizeof d->backend, "%s", t->backend ? t->backend : "");
        d->keys = t->keys;
        d->fill = t->fill;
        d->memory_bytes = t->memory_bytes;
        d->changes = t->changes;
        d->last_snapshot_time = t->last_snapshot_time;
    }
    s->n_tables = r->n_tables;
    for (size_t i = 0; i < r->n_gpus; i++) {
        const Floe__V1__GpuInfo *g = r->gpus[i];
        floe_gpu_summary *d = &s->gpus[i];
        d->device = g->device;
        snprintf(d->name, sizeof d->name, "%s", g->name ? g->name : "");
        d->healthy = g->healthy;
        snprintf(d->error, sizeof d->error, "%s", g->error ? g->error : "");
        d->memory_total = g->memory_total;
        d->memory_free = g->memory_free;
    }
    s->n_gpus = r->n_gpus;
    return s;
}

int floe_server_stats_get(floe *c, floe_server_stats **out)
{
    *out = NULL;
    if (c->router)
        return floe__set_error(c, FLOE_ERR_UNSUPPORTED,
                               "a partitioned connection speaks to %u servers: ask each one (floe_shard)", c->nshards);
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Info in = FLOE__V1__INFO__INIT;
    req.op_case = FLOE__V1__REQUEST__OP_INFO;
    req.info = &in;
    floe_call *call = floe__send_request(c, &req, NULL, NULL);
    int st = floe__finish(c, call);
    if (st == FLOE_ERR_INVALID) {
        /* Info has no fields that could be wrong: the server does not know the operation */
        st = floe__set_error(c, FLOE_ERR_UNSUPPORTED, "%s does not know the info operation (%s)",
                             c->info.server[0] ? c->info.server : "the server", floe_call_error(call));
    } else if (st == FLOE_OK) {
        if (call->resp->body_case != FLOE__V1__RESPONSE__BODY_INFO || !call->resp->info)
            st = floe__set_error(c, FLOE_ERR_PROTOCOL, "info reply without info");
        else if (!(*out = server_stats_from(call->resp->info)))
            st = floe__set_error(c, FLOE_ERR_IO, "out of memory");
    }
    floe_call_free(call);
    return st;
}

/* One scan request: keys (8 bytes per key, or TREE vectors of words words)
 * into keys, values or ids when asked. */
static int scan_call(floe *c, const char *table, floe_cursor *cursor, size_t limit, size_t key_bytes, void *keys,
                     void *values, unsigned value_bytes, uint64_t *ids, bool want_ids, size_t *n, int *done)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Scan s = FLOE__V1__SCAN__INIT;
    s.table = (char *)table;
    if (cursor->started) {
        s.cursor.data = cursor->bytes;
        s.cursor.len = sizeof cursor->bytes;
    }
    s.limit = (uint32_t)(limit > UINT32_MAX ? UINT32_MAX : limit);
    s.want_values = values != NULL;
    s.want_ids = want_ids;
    req.op_case = FLOE__V1__REQUEST__OP_SCAN;
    req.scan = &s;
    *n = 0;
    *done = 0;
    floe_call *call = floe__send_request(c, &req, NULL, NULL);
    int st = floe__finish(c, call);
    if (st == FLOE_OK) {
        const Floe__V1__ScanReply *r = call->resp->body_case == FLOE__V1__RESPONSE__BODY_SCAN ? call->resp->scan : NULL;
        /* with ids (TREE) they count the vectors, so a wrong words shows as such */
        size_t got = !r ? 0 : want_ids ? r->ids.len / 8 : r->keys.len / key_bytes;
        if (r && want_ids && got > 0 && r->keys.len != got * key_bytes && r->keys.len % (got * 4) == 0) {
            st = floe__set_error(c, FLOE_ERR_INVALID, "table %s holds vectors of %zu words; the call said words = %zu",
                                 table, r->keys.len / (got * 4), key_bytes / 4);
        } else if (!r || r->keys.len != got * key_bytes || got > limit || r->cursor.len != sizeof cursor->bytes ||
                   (want_ids && r->ids.len != got * 8) || (values && r->values.len != got * value_bytes)) {
            st = floe__set_error(c, FLOE_ERR_PROTOCOL, "malformed scan reply");
        } else {
            if (keys && got)
                memcpy(keys, r->keys.data, got * key_bytes);
            if (values && got)
                memcpy(values, r->values.data, got * value_bytes);
            if (ids && got)
                memcpy(ids, r->ids.data, got * 8);
            memcpy(cursor->bytes, r->cursor.data, sizeof cursor->bytes);
            cursor->started = 1;
            *n = got;
            *done = r->done;
        }
    }
    floe_call_free(call);
    return st;
}

int floe_scan(floe *c, const char *table, floe_cursor *cursor, size_t limit, uint64_t *keys, void *values,
              unsigned value_bytes, size_t *n, int *done)
{
    if (c->router)
        return c->router->scan(c, table, cursor, limit, 0, keys, values, value_bytes, NULL, NULL, n, done);
    return scan_call(c, table, cursor, limit, 8, keys, values, value_bytes, NULL, false, n, done);
}

int floe_scan_vectors(floe *c, const char *table, floe_cursor *cursor, size_t limit, unsigned words, uint64_t *ids,
                      uint32_t *vectors, size_t *n, int *done)
{
    if (words == 0) {
        *n = 0;
        *done = 0;
        return floe__set_error(c, FLOE_ERR_INVALID, "words must be the TREE table's words per vector (2..256), not 0");
    }
    if (c->router)
        return c->router->scan(c, table, cursor, limit, words, NULL, NULL, 0, ids, vectors, n, done);
    /* ids are always asked for: they say how many vectors came, whatever words is */
    return scan_call(c, table, cursor, limit, (size_t)words * 4, vectors, NULL, 0, ids, true, n, done);
}

/* ---- ORDERED tables ---------------------------------------------------------------------------- */

int floe_range(floe *c, const char *table, uint64_t lo, uint64_t hi, unsigned flags, floe_range_cursor *cursor,
               size_t limit, uint64_t *keys, void *values, unsigned value_bytes, size_t *n, int *done)
{
    *n = 0;
    *done = 0;
    flags = (flags & FLOE_RANGE_DESC) | (values ? FLOE_WANT_VALUES : 0);
    floe_call *call = floe_send_range(c, table, lo, hi, flags, cursor, limit, NULL, NULL);
    int st = floe__finish(c, call);
    if (st == FLOE_OK) {
        size_t kb, vbytes;
        const unsigned char *k = floe_call_keys(call, &kb), *v = floe_call_values(call, &vbytes);
        const size_t got = kb / 8;
        floe_range_cursor next;
        int end;
        if (floe_call_range_next(call, &next, &end) != FLOE_OK || got > limit ||
            (values && vbytes != got * value_bytes)) {
            st = floe__set_error(c, FLOE_ERR_PROTOCOL, "malformed range reply");
        } else {
            if (keys && got)
                memcpy(keys, k, got * 8);
            if (values && got)
                memcpy(values, v, got * value_bytes);
            *cursor = next;
            *n = got;
            *done = end;
        }
    }
    floe_call_free(call);
    return st;
}

static int neighbours_call(floe *c, floe_call *call, size_t n, uint8_t *results, uint64_t *found, void *values,
                           unsigned value_bytes)
{
    int st = floe__finish(c, call);
    if (st != FLOE_OK) {
        floe_call_free(call);
        return st;
    }
    size_t kb;
    const unsigned char *k = floe_call_keys(call, &kb);
    if (kb != n * 8) {
        floe_call_free(call);
        return floe__set_error(c, FLOE_ERR_PROTOCOL, "the server answered %zu neighbours for %zu keys", kb / 8, n);
    }
    if (found && n)
        memcpy(found, k, n * 8);
    return copy_key_answers(c, call, n, results, values, values ? n * value_bytes : 0, NULL);
}

int floe_successor(floe *c, const char *table, const uint64_t *keys, size_t n, uint8_t *results, uint64_t *found,
                   void *values, unsigned value_bytes)
{
    floe_call *call = floe_send_successor(c, table, keys, n, values ? FLOE_WANT_VALUES : 0, NULL, NULL);
    return neighbours_call(c, call, n, results, found, values, value_bytes);
}

int floe_predecessor(floe *c, const char *table, const uint64_t *keys, size_t n, uint8_t *results, uint64_t *found,
                     void *values, unsigned value_bytes)
{
    floe_call *call = floe_send_predecessor(c, table, keys, n, values ? FLOE_WANT_VALUES : 0, NULL, NULL);
    return neighbours_call(c, call, n, results, found, values, value_bytes);
}

static int bound_call(floe *c, bool max, const char *table, int *found, uint64_t *key, void *value,
                      unsigned value_bytes)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Min mn = FLOE__V1__MIN__INIT;
    Floe__V1__Max mx = FLOE__V1__MAX__INIT;
    if (max) {
        mx.table = (char *)table, mx.want_values = value != NULL;
        req.op_case = FLOE__V1__REQUEST__OP_MAX;
        req.max = &mx;
    } else {
        mn.table = (char *)table, mn.want_values = value != NULL;
        req.op_case = FLOE__V1__REQUEST__OP_MIN;
        req.min = &mn;
    }
    uint8_t result = FLOE_ABSENT;
    *found = 0;
    *key = 0;
    int st = neighbours_call(c, floe__send_request(c, &req, NULL, NULL), 1, &result, key, value, value_bytes);
    *found = st == FLOE_OK && result == FLOE_PRESENT;
    return st;
}

int floe_min(floe *c, const char *table, int *found, uint64_t *key, void *value, unsigned value_bytes)
{
    return bound_call(c, false, table, found, key, value, value_bytes);
}

int floe_max(floe *c, const char *table, int *found, uint64_t *key, void *value, unsigned value_bytes)
{
    return bound_call(c, true, table, found, key, value, value_bytes);
}
