/*
 * keys.c - the key requests: insert, find, erase, get_by_id, successor,
 * predecessor and add (MAP: value += delta) are one shape (a table, keys or
 * ids, maybe values, an answer byte each) served by one path; scan is here
 * too.
 *
 * A key request comes decoded in place from its frame (envelope.h:
 * request_handle_keys) or unpacked by protobuf-c (its row's fields say
 * where its table, keys and values are); either way handle_keys checks it
 * at the door (tables/spec.c) and gives its table's batcher a job whose
 * keys point into the request's own bytes (copied only when unaligned).
 * Its answer is its slice of the batch's answers, packed into a frame on
 * its connection's io thread (request_pack).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "handlers.h"
#include "hostmem.h"
#include "keymsg.h"

/* The answer of a scan, or of a range (an ORDERED table's keys, with a range's cursor). */
frame *scan_frame(const batcher *bt, const floe_batch *b, const item *it, const uint64_t *tag)
{
    Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
    Floe__V1__ScanReply sr = FLOE__V1__SCAN_REPLY__INIT;
    uint8_t cursor[24];
    memcpy(cursor, &b->next.position, 8);
    memcpy(cursor + 8, &b->next.generation, 8);
    if (tag)
        memcpy(cursor + 16, tag, 8);
    r.id = it->id;
    if (bt->words) { /* a TREE: the vectors are the keys; ids on request */
        sr.keys.data = (uint8_t *)b->scan_vectors;
        sr.keys.len = b->scan_n * bt->words * 4;
        if (it->j.flags & FLOE_BATCH_WANT_IDS) {
            sr.ids.data = (uint8_t *)b->scan_keys;
            sr.ids.len = b->scan_n * 8;
        }
    } else {
        sr.keys.data = (uint8_t *)b->scan_keys;
        sr.keys.len = b->scan_n * 8;
    }
    if (b->scan_values) {
        sr.values.data = b->scan_values;
        sr.values.len = b->scan_n * bt->value_bytes;
    }
    sr.cursor.data = cursor;
    sr.cursor.len = tag ? 24 : 16;
    sr.done = b->scan_done != 0;
    r.body_case = FLOE__V1__RESPONSE__BODY_SCAN;
    r.scan = &sr;
    return reply_pack(&r);
}

frame *scan_reply(const job_end *e, const item *it)
{
    return scan_frame(e->bt, e->b, it, NULL);
}

/* ---- shards --------------------------------------------------------------------------------- */

/* A client with another
 * server list, or one that takes a shard for a whole table (or a whole
 * table for a shard), would put keys where no other client looks. */
floe_status shard_check(const floe_spec *spec, uint64_t set, uint32_t shard, uint32_t shards, char *msg, size_t len)
{
    if (spec->shards == 0 && shards == 0)
        return FLOE_OK;
    if (spec->shards == 0)
        snprintf(msg, len,
                 "table %s is a whole table on this server, but this client holds it partitioned over %u servers: "
                 "connect to this server alone",
                 spec->name, shards);
    else if (shards == 0)
        snprintf(msg, len,
                 "table %s is shard %u/%u of a table partitioned over several floed: connect with the list of its "
                 "servers (floe://h1:p1,h2:p2,...)",
                 spec->name, spec->shard + 1, spec->shards);
    else if (set != spec->shard_set || shard != spec->shard || shards != spec->shards)
        snprintf(msg, len,
                 "table %s is shard %u/%u of server list %016llx, this client says shard %u/%u of list %016llx: "
                 "clients must list the same servers in the same order",
                 spec->name, spec->shard + 1, spec->shards, (unsigned long long)spec->shard_set, shard + 1, shards,
                 (unsigned long long)set);
    else
        return FLOE_OK;
    return FLOE_ERR_INVALID;
}

/* shard_check of a request protobuf-c unpacked. */
floe_status request_shard_check(const floe_spec *spec, const Floe__V1__Request *req, char *msg, size_t len)
{
    const Floe__V1__ShardCheck *c = req->shard;
    return c ? shard_check(spec, c->shard_set, c->shard, c->shards, msg, len) : shard_check(spec, 0, 0, 0, msg, len);
}

/* ---- the door and the job ------------------------------------------------------------------ */

static void key_request_free(server *srv, key_request *kr)
{
    if (kr->req)
        floe__v1__request__free_unpacked(kr->req, NULL);
    hostmem_put(srv->mem, kr->frame);
}

/* The rules of a key operation on the table of spec (tables/spec.c's door,
 * and max-frame for what a get_by_id answers): OK with *n, or the error
 * and msg.  keys and values are aligned as the engines read them. */
static floe_status check_key_request(server *srv, const floe_spec *spec, floe_op op, const key_request *kr,
                                     const void *keys, const void *values, size_t *n, char *msg, size_t len)
{
    floe_errinfo err;
    floe_status st;
    if (kr->parents_len || kr->change_counts_len || kr->changes_len) {
        st = !floe_op_has(op, FLOE_OPF_STORES) || kr->keys_len || kr->values_len
                 ? floe_errinfo_set(&err, FLOE_ERR_INVALID,
                                    "parents, change_counts and changes go with an insert, instead of keys")
                 : floe_states_check(spec, kr->flags, kr->parents_len, kr->change_counts, kr->change_counts_len,
                                     kr->changes, kr->changes_len, n, &err);
    } else {
        st = floe_request_check(spec, op, kr->flags, keys, kr->keys_len, values, kr->values_len, n, &err);
    }
    if (st != FLOE_OK) {
        snprintf(msg, len, "%s", err.msg);
        return st;
    }
    const uint64_t max_frame = LIVE(srv, max_frame), vb = (uint64_t)spec->words * 4;
    if (floe_op_has(op, FLOE_OPF_VECTORS_OUT) && *n * vb > max_frame) {
        snprintf(msg, len,
                 "get_by_id of %zu ids would answer %llu bytes of vectors (words = %u), above max-frame (%llu bytes): "
                 "ask for at most %llu ids per request",
                 *n, (unsigned long long)(*n * vb), spec->words, (unsigned long long)max_frame,
                 (unsigned long long)(max_frame / vb));
        return FLOE_ERR_TOO_LARGE;
    }
    return FLOE_OK;
}

/* p itself if it is aligned to align bytes (a power of two), else a copy
 * in *copy; NULL if out of memory. */
static const void *aligned(const void *p, size_t len, size_t align, void **copy)
{
    if (((uintptr_t)p & (align - 1)) == 0 || !len)
        return p;
    if ((*copy = floe_malloc(len)))
        memcpy(*copy, p, len);
    return *copy;
}

/* Whether Insert.from_first and from_counts stand for one parent a key of
 * the n (and no from beside them). */
static floe_status counts_check(const key_request *kr, size_t n, char *msg, size_t len)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < kr->from_counts_len; i++)
        sum += kr->from_counts[i];
    if (kr->from_len) {
        snprintf(msg, len, "from and from_counts: one or the other");
        return FLOE_ERR_INVALID;
    }
    if (sum != n) {
        snprintf(msg, len, "from_counts add up to %llu keys; the request has %zu", (unsigned long long)sum, n);
        return FLOE_ERR_INVALID;
    }
    return FLOE_OK;
}

/* Insert.from_first and from_counts (counts_check passed) as the from they
 * stand for (8 bytes a key), into the item's copy: for the checks that
 * need each parent. */
static floe_status from_of_counts(const key_request *kr, size_t n, item *it, const uint64_t **from, char *msg,
                                  size_t len)
{
    uint64_t *f = floe_malloc(n * 8 + 8);
    if (!f) {
        snprintf(msg, len, "out of memory");
        return FLOE_ERR_INTERNAL;
    }
    for (size_t i = 0, k = 0; i < kr->from_counts_len; i++)
        for (unsigned c = 0; c < kr->from_counts[i]; c++)
            f[k++] = kr->from_first + i;
    free(it->explore_copy);
    it->explore_copy = f;
    *from = f;
    return FLOE_OK;
}

/* Whether the parents of from_first and from_counts are one run of ids of
 * one shard, and if so the first and last used in ends: checking them
 * checks every parent (the ids between are places between theirs). */
static bool parents_range(const key_request *kr, uint64_t ends[2])
{
    size_t a = 0, z = kr->from_counts_len;
    while (a < z && !kr->from_counts[a])
        a++;
    while (z > a && !kr->from_counts[z - 1])
        z--;
    if (a == z)
        return false;
    ends[0] = kr->from_first + a;
    ends[1] = kr->from_first + (z - 1);
    return ends[1] >= ends[0] && ends[1] != FLOE_EXPLORE_ROOT &&
           ends[0] >> FLOE_ID_SHARD_SHIFT == ends[1] >> FLOE_ID_SHARD_SHIFT;
}

/* An exploring table's part of an insert (its parents, labels, the claim
 * it ends), checked against the open set before the batch runs, so that a
 * bad one changes nothing; the item then adds its states when answered
 * (item.c).  Other tables take none of it. */
static floe_status explore_door(table_entry *e, floe_op op, const key_request *kr, size_t n, bool states, item *it,
                                char *msg, size_t len)
{
    const floe_spec *spec = &e->table->spec;
    const bool asks =
        kr->from_len || kr->labels_len || kr->complete || kr->from_counts_len || kr->from_first || kr->from_depth;
    if (!e->explore || !floe_op_has(op, FLOE_OPF_STORES)) {
        if (asks)
            snprintf(msg, len,
                     "table %s is not an exploring table: from, labels and complete go with the inserts of one "
                     "(created with explore)",
                     spec->name);
        return asks ? FLOE_ERR_INVALID : FLOE_OK;
    }
    if (states) {
        snprintf(msg, len, "table %s explores: send whole vectors, not states by their parents", spec->name);
        return FLOE_ERR_INVALID;
    }
    if (kr->from_len && kr->from_len != n * 8) {
        snprintf(msg, len, "from has %zu bytes: 8 per key (%zu keys), or none", kr->from_len, n);
        return FLOE_ERR_INVALID;
    }
    if (kr->labels_len && kr->labels_len != n * spec->label_bytes) {
        snprintf(msg, len, "labels has %zu bytes: %u per key (%zu keys), or none", kr->labels_len, spec->label_bytes,
                 n);
        return FLOE_ERR_INVALID;
    }
    const uint64_t *from = NULL;
    /* runs of parents stay runs where their ends check them all (one run of ids of one shard),
     * else they are spelled out, one a key, to check each */
    uint64_t ends[2];
    const bool range = kr->from_counts_len && parents_range(kr, ends);
    floe_status st = kr->from_counts_len ? counts_check(kr, n, msg, len) : FLOE_OK;
    if (st == FLOE_OK && kr->from_counts_len && !range)
        st = from_of_counts(kr, n, it, &from, msg, len);
    if (st != FLOE_OK)
        return st;
    if (!kr->from_counts_len && kr->from_len && !(from = aligned(kr->from, kr->from_len, 8, &it->explore_copy))) {
        snprintf(msg, len, "out of memory");
        return FLOE_ERR_INTERNAL;
    }
    floe_errinfo err;
    st = floe_explore_check_parents(e->explore, range ? ends : from, range ? 2 : from ? n : 0, &err);
    if (st != FLOE_OK && range) { /* spelled out, to name the parent that is no state */
        if ((st = from_of_counts(kr, n, it, &from, msg, len)) != FLOE_OK)
            return st;
        st = floe_explore_check_parents(e->explore, from, n, &err);
    }
    if (st == FLOE_OK && kr->complete && !floe_explore_holds(e->explore, kr->complete))
        st = floe_errinfo_set(&err, FLOE_ERR_INVALID,
                              "no claim 0x%llx is out on table %s: completed, expired (its states are open again) or "
                              "another table's",
                              (unsigned long long)kr->complete, spec->name);
    if (st != FLOE_OK) {
        snprintf(msg, len, "%s", err.msg);
        return st;
    }
    it->explore = true;
    it->explore_from = from;
    if (range)
        it->explore_runs = (floe_parent_runs){kr->from_first, kr->from_counts, kr->from_counts_len};
    it->explore_labels = kr->labels_len ? kr->labels : NULL;
    it->explore_complete = kr->complete;
    it->explore_from_depth = kr->from_depth;
    entry_ref(e);
    it->entry = e;
    return FLOE_OK;
}

/* A key request of row: takes kr's bytes over. */
void serve_keys(server *srv, session *c, const request_row *row, key_request *kr)
{
    table_entry *e = registry_get(&srv->reg, kr->table);
    if (!e) {
        send_error(c, kr->id, FLOE_ERR_NO_TABLE, "no table %s", kr->table);
        key_request_free(srv, kr);
        return;
    }
    const floe_spec *spec = &e->table->spec;
    const bool valued = floe_spec_has_values(spec), tree = spec->kind == FLOE_KIND_TREE;
    const floe_op op = row->op;
    item *it = item_new(srv, c, kr->id, row, op, kr->req);
    if (!it) {
        send_error(c, kr->id, FLOE_ERR_INTERNAL, "out of memory");
        key_request_free(srv, kr);
        entry_unref(e);
        return;
    }
    it->frame = kr->frame;
    unsigned flags = kr->flags;
    if (valued && floe_op_has(op, FLOE_OPF_VALUES_IN))
        flags |= FLOE_BATCH_WANT_VALUES; /* an insert returns each key's stored value */
    it->j.flags = flags;
    it->j.gone = &c->gone;
    it->j.unread = &c->unread;
    /* TREE INSERT and FIND take vectors (4-byte aligned); the rest 8-byte keys or ids; MAP values
     * are read as value_bytes words */
    const bool states = kr->parents_len > 0; /* TREE states by their parents: the parents are 8-byte ids */
    const bool vectors = floe_op_takes_vectors(op, tree ? spec->words : 0) && !states;
    const bool with_values = valued && floe_op_has(op, FLOE_OPF_VALUES_IN);
    const void *data = states ? aligned(kr->parents, kr->parents_len, 8, &it->keys_copy)
                              : aligned(kr->keys, kr->keys_len, vectors ? 4 : 8, &it->keys_copy);
    const void *values = with_values ? aligned(kr->values, kr->values_len, spec->value_bytes, &it->values_copy) : NULL;
    char msg[FLOE_ERROR_MAX];
    size_t n = 0;
    floe_status st = shard_check(spec, kr->shard_set, kr->shard, kr->shards, msg, sizeof msg);
    if (st != FLOE_OK)
        ;
    else if (floe_op_has(op, FLOE_OPF_STORES) && srv->reg.gpu && e->table->backend == srv->reg.gpu &&
             server_over_gpu_memory(srv, msg, sizeof msg))
        st = FLOE_ERR_NO_MEMORY; /* maxmemory-gpu: nothing runs */
    else if ((data || !(states ? kr->parents_len : kr->keys_len)) && (values || !with_values || !kr->values_len))
        st = check_key_request(srv, spec, op, kr, data, values, &n, msg, sizeof msg);
    else
        st = FLOE_ERR_INTERNAL, snprintf(msg, sizeof msg, "out of memory");
    if (st == FLOE_OK)
        st = explore_door(e, op, kr, n, states, it, msg, sizeof msg);
    if (st != FLOE_OK) {
        item_refuse(it, st, msg);
    } else {
        it->j.n = n;
        if (states) {
            it->j.parents = data;
            it->j.change_counts = kr->change_counts;
            it->j.changes = kr->changes;
            it->j.changes_len = kr->changes_len;
            it->j.parent_generation = kr->parent_generation;
        } else if (vectors) {
            it->j.vectors = data;
        } else {
            it->j.keys = data;
        }
        if (with_values) {
            it->j.values = values;
            it->j.values_len = kr->values_len;
        }
    }
    item_submit(c, e, it);
    entry_unref(e);
}

/* A key request unpacked by protobuf-c: its parts by their names in the
 * schema (proto/keymsg.h), whatever its operation.  Takes req over. */
void handle_keys(server *srv, session *c, Floe__V1__Request *req, const request_row *row)
{
    key_request kr = {.id = req->id, .req = req};
    floe_keymsg m;
    floe__keymsg_of(req, &m); /* a row of handle_keys carries keys: its message's parts, if it came */
    kr.table = m.table && *m.table ? *m.table : "";
    if (m.keys)
        kr.keys = m.keys->data, kr.keys_len = m.keys->len;
    if (m.values)
        kr.values = m.values->data, kr.values_len = m.values->len;
    kr.flags = (m.overwrite && *m.overwrite ? FLOE_BATCH_OVERWRITE : 0) |
               (m.want_ids && *m.want_ids ? FLOE_BATCH_WANT_IDS : 0) |
               (m.want_values && *m.want_values ? FLOE_BATCH_WANT_VALUES : 0);
    /* a TREE's states by their parents: the unusual shape, only unpacked */
    if (m.parents)
        kr.parents = m.parents->data, kr.parents_len = m.parents->len;
    if (m.change_counts)
        kr.change_counts = m.change_counts->data, kr.change_counts_len = m.change_counts->len;
    if (m.changes)
        kr.changes = m.changes->data, kr.changes_len = m.changes->len;
    if (m.generation)
        kr.parent_generation = *m.generation;
    if (m.from)
        kr.from = m.from->data, kr.from_len = m.from->len;
    if (m.labels)
        kr.labels = m.labels->data, kr.labels_len = m.labels->len;
    if (m.complete)
        kr.complete = *m.complete;
    if (m.from_first)
        kr.from_first = *m.from_first;
    if (m.from_counts)
        kr.from_counts = m.from_counts->data, kr.from_counts_len = m.from_counts->len;
    if (m.from_depth)
        kr.from_depth = *m.from_depth;
    if (req->shard) {
        kr.shard_set = req->shard->shard_set;
        kr.shard = req->shard->shard;
        kr.shards = req->shard->shards;
    }
    serve_keys(srv, c, row, &kr);
}

/* ---- scan ----------------------------------------------------------------------------------- */

void handle_scan(server *srv, session *c, Floe__V1__Request *req, const request_row *row)
{
    const Floe__V1__Scan *s = req->scan;
    table_entry *e = request_table(srv, c, req->id, s->table, req);
    item *it = e ? request_item(srv, c, req, row, e) : NULL;
    if (!it)
        return;
    job *j = &it->j;
    j->gone = &c->gone;
    j->unread = &c->unread;
    j->limit = s->limit ? s->limit : FLOE_SCAN_DEFAULT_LIMIT;
    if (j->limit > FLOE_SCAN_MAX_LIMIT)
        j->limit = FLOE_SCAN_MAX_LIMIT;
    const floe_spec *spec = &e->table->spec;
    if (spec->kind == FLOE_KIND_TREE) {
        /* A reply carries limit vectors and ids: keep it a sensible frame. */
        const size_t cap = FLOE_TREE_SCAN_MAX_BYTES / ((size_t)spec->words * 4 + 8);
        if (j->limit > cap)
            j->limit = cap ? cap : 1;
    }
    if (s->want_values)
        j->flags |= FLOE_BATCH_WANT_VALUES;
    if (s->want_ids)
        j->flags |= FLOE_BATCH_WANT_IDS;
    floe_errinfo err;
    floe_status st = request_shard_check(spec, req, err.msg, sizeof err.msg);
    if (st == FLOE_OK)
        st = floe_request_check(spec, row->op, j->flags, NULL, 0, NULL, 0, NULL, &err);
    if (st != FLOE_OK) {
        item_refuse(it, st, err.msg);
    } else if (s->cursor.len == 16) {
        memcpy(&j->cursor.position, s->cursor.data, 8);
        memcpy(&j->cursor.generation, s->cursor.data + 8, 8);
        j->cursor_set = 1;
    } else if (s->cursor.len != 0) {
        item_refuse(it, FLOE_ERR_INVALID,
                    "a scan cursor is empty (start) or the 16 bytes of a previous ScanReply.cursor");
    }
    item_submit(c, e, it);
    entry_unref(e);
}
