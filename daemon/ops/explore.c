/*
 * explore.c - the requests on an exploring table's open set (tables/explore.h):
 * claim (states handed out under a lease, or a lease renewed) and trace
 * (the chain from an initial state).  The inserts that fill the open set
 * and end claims are key requests (keys.c checks their parents, item.c
 * adds their states once answered).  Both run on the io thread under the
 * table's explore lock: a claim touches a few claims and copies at most
 * max states.  A shard of a table over several floed hands out bounded
 * claims alone, and answers a trace as far as its own states go: the
 * workers, who see every shard, end the levels and follow a trace across.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "handlers.h"

#define CLAIM_DEFAULT_MAX 1024u
#define CLAIM_MAX         (1u << 20)
#define LEASE_DEFAULT_MS  60000u
#define TRACE_MAX_STATES  (1u << 20)

/* The exploring table a request names, or NULL after answering why not. */
static table_entry *explored(server *srv, session *c, uint64_t id, const char *name)
{
    table_entry *e = request_table(srv, c, id, name, NULL);
    if (e && !e->explore) {
        send_error(c, id, FLOE_ERR_INVALID, "table %s is not an exploring table (create it with explore)", e->name);
        entry_unref(e);
        return NULL;
    }
    return e;
}

static uint64_t now_ms(void)
{
    return floe_now_ns() / 1000000u;
}

static size_t key_bytes(const table_entry *e)
{
    const floe_spec *s = &e->table->spec;
    return s->kind == FLOE_KIND_TREE ? (size_t)s->words * 4 : 8;
}

void handle_claim(server *srv, session *c, Floe__V1__Request *req, const request_row *row)
{
    const Floe__V1__Claim *q = req->claim;
    table_entry *e = explored(srv, c, req->id, q->table);
    if (!e)
        return;
    const uint64_t lease = q->lease_ms ? q->lease_ms : LEASE_DEFAULT_MS;
    floe_errinfo err;
    if (q->renew) {
        floe_status st = floe_explore_renew(e->explore, q->renew, now_ms(), lease, &err);
        send_now(c, st == FLOE_OK ? reply_ok(req->id) : reply_error(req->id, st, err.msg));
        entry_unref(e);
        return;
    }
    if (!q->bounded && e->table->spec.shards) {
        send_error(c, req->id, FLOE_ERR_INVALID,
                   "table %s is shard %u of %u: its claims are bounded (Claim.bounded, upto), as a partitioned "
                   "client's workers make them, for no shard alone knows when a level ends",
                   e->name, e->table->spec.shard + 1, e->table->spec.shards);
        entry_unref(e);
        return;
    }
    const size_t max = q->max ? (q->max < CLAIM_MAX ? q->max : CLAIM_MAX) : CLAIM_DEFAULT_MAX, kb = key_bytes(e);
    uint64_t *ids = floe_malloc(max * 8);
    unsigned char *keys = floe_malloc(max * kb);
    size_t n = 0;
    uint32_t depth = 0;
    uint64_t token = 0;
    uint64_t found = 0, next = 0;
    floe_explore_state state = FLOE_EXPLORE_WAIT;
    floe_status st = ids && keys ? FLOE_OK : floe_errinfo_set(&err, FLOE_ERR_INTERNAL, "out of memory");
    if (st == FLOE_OK && q->bounded)
        st = floe_explore_claim_upto(e->explore, max, q->upto, now_ms(), lease, ids, keys, &n, &depth, &token, &state,
                                     &found, &next, &err);
    else if (st == FLOE_OK)
        st = floe_explore_claim(e->explore, max, now_ms(), lease, ids, keys, &n, &depth, &token, &state, &err);
    if (st == FLOE_OK) {
        Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
        Floe__V1__ClaimReply cr = FLOE__V1__CLAIM_REPLY__INIT;
        r.id = req->id;
        cr.state = state == FLOE_EXPLORE_GOT          ? FLOE__V1__CLAIM_STATE__CLAIM_GOT
                   : state == FLOE_EXPLORE_DONE       ? FLOE__V1__CLAIM_STATE__CLAIM_DONE
                   : state == FLOE_EXPLORE_LEVEL_DONE ? FLOE__V1__CLAIM_STATE__CLAIM_LEVEL_DONE
                                                      : FLOE__V1__CLAIM_STATE__CLAIM_WAIT;
        cr.found = found;
        cr.next = next;
        cr.token = token;
        /* consecutive ids (a claim from the cursor) as a range, to a client that reads one: half
         * the bytes of a claim of 8-byte keys */
        bool range = q->ids_range && n > 0;
        for (size_t i = 1; range && i < n; i++)
            range = ids[i] == ids[0] + i;
        if (range) {
            cr.count = (uint32_t)n;
            cr.first_id = ids[0];
        } else {
            cr.ids = (ProtobufCBinaryData){n * 8, (uint8_t *)ids};
        }
        cr.keys = (ProtobufCBinaryData){n * kb, keys};
        cr.depth = depth;
        r.body_case = FLOE__V1__RESPONSE__BODY_CLAIM;
        r.claim = &cr;
        send_now(c, reply_pack(&r));
    } else {
        send_now(c, reply_error(req->id, st, err.msg));
    }
    free(ids);
    free(keys);
    entry_unref(e);
}

void handle_trace(server *srv, session *c, Floe__V1__Request *req, const request_row *row)
{
    const Floe__V1__Trace *q = req->trace;
    table_entry *e = explored(srv, c, req->id, q->table);
    if (!e)
        return;
    const size_t kb = key_bytes(e), lb = e->table->spec.label_bytes;
    floe_errinfo err;
    uint32_t depth = 0;
    floe_status st = floe_explore_depth(e->explore, q->id, &depth, &err);
    const size_t len = (size_t)depth + 1;
    if (st == FLOE_OK && len > TRACE_MAX_STATES)
        st = floe_errinfo_set(&err, FLOE_ERR_TOO_LARGE, "the trace to state %llu has %zu states, more than %u",
                              (unsigned long long)q->id, len, TRACE_MAX_STATES);
    uint64_t *ids = st == FLOE_OK ? floe_malloc(len * 8) : NULL;
    unsigned char *keys = st == FLOE_OK ? floe_malloc(len * kb) : NULL, *labels = lb ? floe_malloc(len * lb + 1) : NULL;
    if (st == FLOE_OK && (!ids || !keys || (lb && !labels)))
        st = floe_errinfo_set(&err, FLOE_ERR_INTERNAL, "out of memory for a trace of %zu states", len);
    size_t n = 0;
    uint64_t from = FLOE_EXPLORE_ROOT;
    if (st == FLOE_OK) {
        st = floe_explore_trace(e->explore, q->id, len, ids, keys, labels, &n, &from, &err);
    }
    if (st == FLOE_OK) {
        Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
        Floe__V1__TraceReply tr = FLOE__V1__TRACE_REPLY__INIT;
        r.id = req->id;
        tr.ids = (ProtobufCBinaryData){n * 8, (uint8_t *)ids};
        tr.keys = (ProtobufCBinaryData){n * kb, keys};
        tr.labels = (ProtobufCBinaryData){lb ? n * lb : 0, labels};
        tr.from = from;
        r.body_case = FLOE__V1__RESPONSE__BODY_TRACE;
        r.trace = &tr;
        send_now(c, reply_pack(&r));
    } else {
        send_now(c, reply_error(req->id, st, err.msg));
    }
    free(ids);
    free(keys);
    free(labels);
    entry_unref(e);
}
