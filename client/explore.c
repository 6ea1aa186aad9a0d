/*
 * explore.c - libfloe's calls on exploring tables (see floe.h): inserts
 * with their parents, claims, and traces.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "floe.h"
#include "floe.pb-c.h"
#include "floe_internal.h"
#include "floe_wire.h"
#include "keymsg.h"

/* A partitioned connection splits states by their width: a TREE's vectors
 * (more than 8 bytes; a TREE of 2 words passes for keys, and its servers
 * refuse what lands on the wrong one) by floe_shard_of_vector. */
static floe_call *send_states(floe *c, Floe__V1__Request *req, size_t key_bytes, size_t n, floe_callback *cb, void *arg)
{
    c->route_words = n && key_bytes / n > 8 ? (unsigned)(key_bytes / n / 4) : 0;
    floe_call *call = floe__send_request(c, req, cb, arg);
    c->route_words = 0;
    return call;
}

floe_call *floe_send_insert_explore(floe *c, const char *table, const void *keys, size_t key_bytes, size_t n,
                                    const uint64_t *from, uint32_t parent_depth, const void *labels, size_t labels_len,
                                    uint64_t complete, floe_callback *cb, void *arg)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    _Alignas(max_align_t) unsigned char body[FLOE_KEYMSG_BODY_MAX];
    floe_keymsg m;
    if (!floe__keymsg_init(&req, FLOE__V1__REQUEST__OP_INSERT, body, &m) || !m.from || !m.labels || !m.complete ||
        !m.from_depth) {
        floe_call *call = floe__new_call(c, cb, arg);
        if (call)
            floe__complete(c, call, FLOE_ERR_INTERNAL, "this libfloe's Insert has no from, labels or complete", NULL);
        return cb ? NULL : call;
    }
    *m.table = (char *)table;
    *m.keys = (ProtobufCBinaryData){key_bytes, (uint8_t *)keys};
    if (from)
        *m.from = (ProtobufCBinaryData){n * 8, (uint8_t *)from};
    if (labels)
        *m.labels = (ProtobufCBinaryData){labels_len, (uint8_t *)labels};
    *m.complete = complete;
    *m.from_depth = parent_depth;
    return send_states(c, &req, key_bytes, n, cb, arg);
}

floe_call *floe_send_insert_successors(floe *c, const char *table, const void *keys, size_t key_bytes, size_t n,
                                       uint64_t first_parent, const uint8_t *counts, size_t parents,
                                       uint32_t parent_depth, const void *labels, size_t labels_len, uint64_t complete,
                                       floe_callback *cb, void *arg)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    _Alignas(max_align_t) unsigned char body[FLOE_KEYMSG_BODY_MAX];
    floe_keymsg m;
    if (!floe__keymsg_init(&req, FLOE__V1__REQUEST__OP_INSERT, body, &m) || !m.from_first || !m.from_counts ||
        !m.labels || !m.complete || !m.from_depth) {
        floe_call *call = floe__new_call(c, cb, arg);
        if (call)
            floe__complete(c, call, FLOE_ERR_INTERNAL, "this libfloe's Insert has no from_counts", NULL);
        return cb ? NULL : call;
    }
    (void)n;
    *m.table = (char *)table;
    *m.keys = (ProtobufCBinaryData){key_bytes, (uint8_t *)keys};
    *m.from_first = first_parent;
    *m.from_counts = (ProtobufCBinaryData){parents, (uint8_t *)counts};
    if (labels)
        *m.labels = (ProtobufCBinaryData){labels_len, (uint8_t *)labels};
    *m.complete = complete;
    *m.from_depth = parent_depth;
    return send_states(c, &req, key_bytes, n, cb, arg);
}

int floe_insert_explore(floe *c, const char *table, const void *keys, size_t key_bytes, size_t n, const uint64_t *from,
                        uint32_t parent_depth, const void *labels, size_t labels_len, uint64_t complete,
                        uint8_t *results, floe_counts *counts)
{
    floe_call *call = floe_send_insert_explore(c, table, keys, key_bytes, n, from, parent_depth, labels, labels_len,
                                               complete, NULL, NULL);
    int st = floe__finish(c, call);
    if (st == FLOE_OK) {
        size_t got;
        const uint8_t *res = floe_call_results(call, &got);
        if (got != n)
            st = floe__set_error(c, FLOE_ERR_PROTOCOL, "an insert of %zu states answered %zu", n, got);
        else if (results && n)
            memcpy(results, res, n);
        if (st == FLOE_OK && counts)
            floe_call_counts(call, counts);
    }
    floe_call_free(call);
    return st;
}

/* upto: UINT32_MAX for a claim the server bounds itself */
static floe_call *claim_call(floe *c, const char *table, size_t max, unsigned lease_ms, uint64_t renew, uint32_t upto,
                             floe_callback *cb, void *arg)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Claim q = FLOE__V1__CLAIM__INIT;
    q.table = (char *)table;
    q.max = (uint32_t)(max > UINT32_MAX ? UINT32_MAX : max);
    q.lease_ms = lease_ms;
    q.renew = renew;
    q.bounded = upto != UINT32_MAX;
    q.upto = q.bounded ? upto : 0;
    q.ids_range = true; /* floe_call_claim spells a range out */
    req.op_case = FLOE__V1__REQUEST__OP_CLAIM;
    req.claim = &q;
    return floe__send_request(c, &req, cb, arg);
}

/* A call that fails at once, or NULL after its callback ran. */
static floe_call *refused(floe *c, int status, const char *why, floe_callback *cb, void *arg)
{
    floe_call *call = floe__new_call(c, cb, arg);
    if (call)
        floe__complete(c, call, status, why, NULL);
    return cb ? NULL : call;
}

floe_call *floe_send_claim(floe *c, const char *table, size_t max, unsigned lease_ms, floe_callback *cb, void *arg)
{
    if (max == 0)
        return refused(c, FLOE_ERR_INVALID, "a claim of 0 states", cb, arg);
    return claim_call(c, table, max, lease_ms, 0, UINT32_MAX, cb, arg);
}

floe_call *floe_send_claim_upto(floe *c, const char *table, size_t max, unsigned lease_ms, uint32_t upto,
                                floe_callback *cb, void *arg)
{
    if (max == 0)
        return refused(c, FLOE_ERR_INVALID, "a claim of 0 states", cb, arg);
    if (upto == UINT32_MAX)
        return refused(c, FLOE_ERR_INVALID, "a claim up to depth 2^32 - 1: the deepest is 2^32 - 2", cb, arg);
    return claim_call(c, table, max, lease_ms, 0, upto, cb, arg);
}

int floe_call_claim(const floe_call *call, floe_claim *out, const uint64_t **ids, const void **keys)
{
    memset(out, 0, sizeof *out);
    *ids = NULL, *keys = NULL;
    if (call->status != FLOE_OK)
        return call->status;
    const Floe__V1__Response *r = call->resp;
    const Floe__V1__ClaimReply *cr = r && r->body_case == FLOE__V1__RESPONSE__BODY_CLAIM ? r->claim : NULL;
    const size_t n = !cr ? 0 : cr->count ? cr->count : cr->ids.len / 8;
    if (!cr || cr->ids.len % 8 || (cr->count && cr->ids.len) || (n && cr->keys.len % n) || (!n && cr->keys.len) ||
        (cr->state == FLOE_CLAIM_GOT) != (n > 0))
        return FLOE_ERR_PROTOCOL;
    if (cr->count && !call->ids) { /* the ids as a range: spelled out once, kept with the call */
        uint64_t *spelled = malloc(n * sizeof *spelled);
        if (!spelled)
            return FLOE_ERR_IO;
        for (size_t i = 0; i < n; i++)
            spelled[i] = cr->first_id + i;
        ((floe_call *)call)->ids = spelled; /* a cache: the call reads the same either way */
    }
    out->state = (int)cr->state;
    out->token = cr->token;
    out->depth = cr->depth;
    out->found = cr->found;
    out->next = cr->next;
    out->n = n;
    out->key_bytes = cr->keys.len;
    *ids = cr->count ? call->ids : (const uint64_t *)(const void *)cr->ids.data;
    *keys = cr->keys.data;
    return FLOE_OK;
}

int floe_claim_states(floe *c, const char *table, size_t max, unsigned lease_ms, uint64_t *ids, void *keys,
                      size_t keys_cap, floe_claim *out)
{
    memset(out, 0, sizeof *out);
    if (max == 0)
        return floe__set_error(c, FLOE_ERR_INVALID, "a claim of 0 states");
    floe_call *call = claim_call(c, table, max, lease_ms, 0, UINT32_MAX, NULL, NULL);
    int st = floe__finish(c, call);
    if (st == FLOE_OK) {
        const uint64_t *got_ids;
        const void *got_keys;
        floe_claim got;
        if (floe_call_claim(call, &got, &got_ids, &got_keys) != FLOE_OK || got.n > max || got.key_bytes > keys_cap)
            st = floe__set_error(c, FLOE_ERR_PROTOCOL, "a claim's answer that does not hold together");
        else {
            *out = got;
            if (got.n) {
                memcpy(ids, got_ids, got.n * 8);
                memcpy(keys, got_keys, got.key_bytes);
            }
        }
    }
    floe_call_free(call);
    return st;
}

int floe_claim_renew(floe *c, const char *table, uint64_t token, unsigned lease_ms)
{
    if (!token)
        return floe__set_error(c, FLOE_ERR_INVALID, "no claim 0 to renew");
    /* over several floed, the server that gave it: a token names it as an id does */
    const unsigned shard = floe_shards(c) > 1 ? (unsigned)(token >> FLOE_ID_SHARD_SHIFT) : 0;
    floe *s = floe_shard(c, shard);
    if (!s)
        return floe__set_error(c, FLOE_ERR_INVALID, "claim 0x%llx names server %u; the connection has %u",
                               (unsigned long long)token, shard + 1, floe_shards(c));
    floe_call *call = claim_call(s, table, 0, lease_ms, token, UINT32_MAX, NULL, NULL);
    int st = floe__finish(s, call);
    floe_call_free(call);
    if (st != FLOE_OK && s != c)
        floe__set_error(c, st, "server %u of %u (%s): %s", shard + 1, floe_shards(c), floe_shard_name(c, shard),
                        floe_errstr(s));
    return st;
}

/* Joins part (len bytes) in front of *all (*have bytes): a trace is read
 * from its end. */
static bool prepend(void **all, size_t *have, const void *part, size_t len)
{
    unsigned char *p = malloc(*have + len + 1);
    if (!p)
        return false;
    if (len)
        memcpy(p, part, len);
    if (*have)
        memcpy(p + len, *all, *have);
    free(*all);
    *all = p;
    *have += len;
    return true;
}

#define TRACE_MAX_STATES (1u << 24) /* a longer chain over several floed is a loop */

int floe_trace(floe *c, const char *table, uint64_t id, uint64_t **ids, void **keys, void **labels, size_t *n)
{
    *ids = NULL, *keys = NULL, *labels = NULL, *n = 0;
    const unsigned shards = floe_shards(c);
    size_t id_bytes = 0, key_bytes = 0, label_bytes = 0;
    int st = FLOE_OK;
    /* over several floed, each server answers the chain as far as its own states go, and the part
     * before it is its first state's parent's server's */
    for (bool more = true; more && st == FLOE_OK;) {
        const unsigned shard = shards > 1 ? (unsigned)(id >> FLOE_ID_SHARD_SHIFT) : 0;
        floe *s = floe_shard(c, shard);
        if (!s) {
            st = floe__set_error(c, FLOE_ERR_INVALID, "state %llu names server %u; the connection has %u",
                                 (unsigned long long)id, shard + 1, shards);
            break;
        }
        Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
        Floe__V1__Trace q = FLOE__V1__TRACE__INIT;
        q.table = (char *)table;
        q.id = id;
        req.op_case = FLOE__V1__REQUEST__OP_TRACE;
        req.trace = &q;
        floe_call *call = floe__send_request(s, &req, NULL, NULL);
        st = floe__finish(s, call);
        const Floe__V1__Response *r = st == FLOE_OK ? call->resp : NULL;
        const Floe__V1__TraceReply *tr = r && r->body_case == FLOE__V1__RESPONSE__BODY_TRACE ? r->trace : NULL;
        if (st != FLOE_OK)
            st = s == c ? st
                        : floe__set_error(c, st, "server %u of %u (%s): %s", shard + 1, shards,
                                          floe_shard_name(c, shard), floe_errstr(s));
        else if (!tr || tr->ids.len % 8 || !tr->ids.len)
            st = floe__set_error(c, FLOE_ERR_PROTOCOL, "a trace's answer that does not hold together");
        else if (!prepend((void **)ids, &id_bytes, tr->ids.data, tr->ids.len) ||
                 !prepend(keys, &key_bytes, tr->keys.data, tr->keys.len) ||
                 !prepend(labels, &label_bytes, tr->labels.data, tr->labels.len))
            st = floe__set_error(c, FLOE_ERR_INTERNAL, "out of memory");
        else if ((more = shards > 1 && tr->from != FLOE_EXPLORE_INITIAL) && id_bytes / 8 > TRACE_MAX_STATES)
            st = floe__set_error(c, FLOE_ERR_PROTOCOL, "a trace over the servers longer than %u states: a loop",
                                 TRACE_MAX_STATES);
        else
            id = tr ? tr->from : id;
        floe_call_free(call);
    }
    if (st == FLOE_OK && !label_bytes) {
        free(*labels);
        *labels = NULL;
    }
    if (st != FLOE_OK) {
        free(*ids), free(*keys), free(*labels);
        *ids = NULL, *keys = NULL, *labels = NULL;
        return st;
    }
    *n = id_bytes / 8;
    return FLOE_OK;
}

int floe_explore_levels(floe *c, const char *table, uint64_t **sizes, size_t *n, uint64_t *bytes)
{
    *sizes = NULL, *n = 0;
    if (bytes)
        *bytes = 0;
    const unsigned shards = floe_shards(c);
    int st = FLOE_OK;
    for (unsigned shard = 0; shard < shards && st == FLOE_OK; shard++) {
        floe *s = floe_shard(c, shard);
        floe_call *call;
        st = floe__stats_call(s, table, &call);
        const Floe__V1__ExploreStats *x = st == FLOE_OK ? call->resp->stats->explore : NULL;
        if (st != FLOE_OK) {
            st = s == c ? st
                        : floe__set_error(c, st, "server %u of %u (%s): %s", shard + 1, shards,
                                          floe_shard_name(c, shard), floe_errstr(s));
        } else if (!x) {
            st = floe__set_error(c, FLOE_ERR_INVALID, "table %s is not an exploring table (create it with explore)",
                                 table);
        } else {
            if (x->n_level_sizes > *n) { /* each server's levels added up, depth by depth */
                uint64_t *more = realloc(*sizes, x->n_level_sizes * sizeof *more);
                if (!more) {
                    st = floe__set_error(c, FLOE_ERR_IO, "out of memory");
                } else {
                    memset(more + *n, 0, (x->n_level_sizes - *n) * sizeof *more);
                    *sizes = more;
                    *n = x->n_level_sizes;
                }
            }
            for (size_t d = 0; st == FLOE_OK && d < x->n_level_sizes; d++)
                (*sizes)[d] += x->level_sizes[d];
            if (bytes)
                *bytes += x->bytes;
        }
        floe_call_free(call);
    }
    if (st != FLOE_OK) {
        free(*sizes);
        *sizes = NULL, *n = 0;
    }
    return st;
}
