/*
 * request.c - a decoded request to its handler, by its row (see request.h).
 *
 * The requests' rows (daemon/rows.h) become the table ROWS, indexed by
 * their metric; request_handle finds a request's row by its oneof case and
 * runs its handler (daemon/ops/: keys.c, ordered.c, tables.c, service.c),
 * which answers at once or makes an item (item.h) for its table.  A key
 * request read in place from its frame (envelope.h) goes to keys.c's
 * serve_keys by the same rows.
 */
#define _GNU_SOURCE
#include "request.h"

#include <stdio.h>
#include <string.h>

#include "hostmem.h"
#include "ops/handlers.h"

#define ROW_(row, wire, str, table_op, row_flags, handler, reply_of)                                                   \
    [METRICS_OP_##row] = {.metric = METRICS_OP_##row,                                                                  \
                          .name = str,                                                                                 \
                          .op = (floe_op)(table_op),                                                                   \
                          .flags = row_flags,                                                                          \
                          .handle = handler,                                                                           \
                          .reply = reply_of},
static const request_row ROWS[METRICS_OPS] = {REQUEST_OPS(ROW_)};
#undef ROW_

const request_row *request_row_of(Floe__V1__Request__OpCase wire)
{
    const int at = metrics_op_of_request(wire);
    return at == METRICS_OP_UNKNOWN ? NULL : &ROWS[at];
}

bool request_in_place(Floe__V1__Request__OpCase wire)
{
    const request_row *row = request_row_of(wire);
    return row && row->handle == handle_keys;
}

/* maxmemory: a write (a create, or an operation that stores) while floed is
 * at its limit is answered ERR_NO_MEMORY before anything runs. */
static bool refused_for_memory(server *srv, session *c, uint64_t id, const request_row *row)
{
    if (!row || !((row->op && floe_op_has(row->op, FLOE_OPF_STORES)) || row->metric == METRICS_OP_CREATE_TABLE))
        return false;
    char msg[300];
    if (!server_over_memory(srv, msg, sizeof msg))
        return false;
    send_error(c, id, FLOE_ERR_NO_MEMORY, "%s", msg);
    return true;
}

void request_handle(server *srv, session *c, Floe__V1__Request *req)
{
    const uint64_t id = req->id;
    const request_row *row = request_row_of(req->op_case);
    if (!row)
        send_error(c, id, FLOE_ERR_INVALID, "unknown or missing operation in request %llu", (unsigned long long)id);
    else if (atomic_load(&srv->shutting_down) && !(row->flags & REQ_ANY_TIME))
        send_error(c, id, FLOE_ERR_SHUTTING_DOWN, "floed is shutting down");
    else if (refused_for_memory(srv, c, id, row))
        ;
    else if ((row->flags & REQ_DATA_DIR) && !srv->cfg.data_dir[0])
        send_error(c, id, FLOE_ERR_UNSUPPORTED, "%ss need a data-dir: start floed with --data-dir DIR", row->name);
    else if (row->flags & REQ_TAKES) {
        row->handle(srv, c, req, row);
        return;
    } else {
        row->handle(srv, c, req, row);
    }
    floe__v1__request__free_unpacked(req, NULL);
}

void request_handle_keys(server *srv, session *c, const envelope *env, void *mem)
{
    key_request kr = {.id = env->id, .frame = mem};
    char table[FLOE_NAME_MAX + 1];
    if (env->table_len > FLOE_NAME_MAX) { /* no table has such a name */
        send_error(c, env->id, FLOE_ERR_NO_TABLE, "no table %.*s", (int)env->table_len, env->table);
        hostmem_put(srv->mem, mem);
        return;
    }
    memcpy(table, env->table, env->table_len);
    table[env->table_len] = '\0';
    const request_row *row = request_row_of(env->op);
    kr.table = table;
    kr.keys = env->keys;
    kr.keys_len = env->keys_len;
    /* the envelope reads only the fields its message has (values, overwrite: an insert's) */
    kr.values = env->values;
    kr.values_len = env->values_len;
    kr.from = env->from;
    kr.from_len = env->from_len;
    kr.labels = env->labels;
    kr.labels_len = env->labels_len;
    kr.complete = env->complete;
    kr.from_first = env->from_first;
    kr.from_depth = env->from_depth;
    kr.from_counts = env->from_counts;
    kr.from_counts_len = env->from_counts_len;
    kr.flags = (env->overwrite ? FLOE_BATCH_OVERWRITE : 0) | (env->want_ids ? FLOE_BATCH_WANT_IDS : 0) |
               (env->want_values ? FLOE_BATCH_WANT_VALUES : 0);
    kr.shard_set = env->shard_set;
    kr.shard = env->shard;
    kr.shards = env->shards;
    if (atomic_load(&srv->shutting_down)) {
        send_error(c, env->id, FLOE_ERR_SHUTTING_DOWN, "floed is shutting down");
        hostmem_put(srv->mem, mem);
        return;
    }
    if (refused_for_memory(srv, c, env->id, row)) {
        hostmem_put(srv->mem, mem);
        return;
    }
    serve_keys(srv, c, row, &kr);
}
