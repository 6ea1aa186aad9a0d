/*
 * explore.c - libfloe's calls on exploring tables (see floe.h): inserts
 * with their parents, claims, and traces.
 */
#include <stdlib.h>
#include <string.h>

#include "floe.h"
#include "floe.pb-c.h"
#include "floe_internal.h"
#include "keymsg.h"

floe_call *floe_send_insert_explore(floe *c, const char *table, const void *keys, size_t key_bytes, size_t n,
                                    const uint64_t *from, const void *labels, size_t labels_len, uint64_t complete,
                                    floe_callback *cb, void *arg)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    _Alignas(max_align_t) unsigned char body[FLOE_KEYMSG_BODY_MAX];
    floe_keymsg m;
    if (!floe__keymsg_init(&req, FLOE__V1__REQUEST__OP_INSERT, body, &m) || !m.from || !m.labels || !m.complete) {
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
    return floe__send_request(c, &req, cb, arg);
}

floe_call *floe_send_insert_successors(floe *c, const char *table, const void *keys, size_t key_bytes, size_t n,
                                       uint64_t first_parent, const uint8_t *counts, size_t parents, const void *labels,
                                       size_t labels_len, uint64_t complete, floe_callback *cb, void *arg)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    _Alignas(max_align_t) unsigned char body[FLOE_KEYMSG_BODY_MAX];
    floe_keymsg m;
    if (!floe__keymsg_init(&req, FLOE__V1__REQUEST__OP_INSERT, body, &m) || !m.from_first || !m.from_counts ||
        !m.labels || !m.complete) {
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
    return floe__send_request(c, &req, cb, arg);
}

int floe_insert_explore(floe *c, const char *table, const void *keys, size_t key_bytes, size_t n, const uint64_t *from,
                        const void *labels, size_t labels_len, uint64_t complete, uint8_t *results, floe_counts *counts)
{
    floe_call *call =
        floe_send_insert_explore(c, table, keys, key_bytes, n, from, labels, labels_len, complete, NULL, NULL);
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

static floe_call *claim_call(floe *c, const char *table, size_t max, unsigned lease_ms, uint64_t renew,
                             floe_callback *cb, void *arg)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Claim q = FLOE__V1__CLAIM__INIT;
    q.table = (char *)table;
    q.max = (uint32_t)(max > UINT32_MAX ? UINT32_MAX : max);
    q.lease_ms = lease_ms;
    q.renew = renew;
    req.op_case = FLOE__V1__REQUEST__OP_CLAIM;
    req.claim = &q;
    return floe__send_request(c, &req, cb, arg);
}

floe_call *floe_send_claim(floe *c, const char *table, size_t max, unsigned lease_ms, floe_callback *cb, void *arg)
{
    if (max == 0) {
        floe_call *call = floe__new_call(c, cb, arg);
        if (call)
            floe__complete(c, call, FLOE_ERR_INVALID, "a claim of 0 states", NULL);
        return cb ? NULL : call;
    }
    return claim_call(c, table, max, lease_ms, 0, cb, arg);
}

int floe_call_claim(const floe_call *call, floe_claim *out, const uint64_t **ids, const void **keys)
{
    memset(out, 0, sizeof *out);
    *ids = NULL, *keys = NULL;
    if (call->status != FLOE_OK)
        return call->status;
    const Floe__V1__Response *r = call->resp;
    const Floe__V1__ClaimReply *cr = r && r->body_case == FLOE__V1__RESPONSE__BODY_CLAIM ? r->claim : NULL;
    const size_t n = cr ? cr->ids.len / 8 : 0;
    if (!cr || cr->ids.len % 8 || (n && cr->keys.len % n) || (!n && cr->keys.len) ||
        (cr->state == FLOE_CLAIM_GOT) != (n > 0))
        return FLOE_ERR_PROTOCOL;
    out->state = (int)cr->state;
    out->token = cr->token;
    out->depth = cr->depth;
    out->n = n;
    out->key_bytes = cr->keys.len;
    *ids = (const uint64_t *)(const void *)cr->ids.data;
    *keys = cr->keys.data;
    return FLOE_OK;
}

int floe_claim_states(floe *c, const char *table, size_t max, unsigned lease_ms, uint64_t *ids, void *keys,
                      size_t keys_cap, floe_claim *out)
{
    memset(out, 0, sizeof *out);
    if (max == 0)
        return floe__set_error(c, FLOE_ERR_INVALID, "a claim of 0 states");
    floe_call *call = claim_call(c, table, max, lease_ms, 0, NULL, NULL);
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
    floe_call *call = claim_call(c, table, 0, lease_ms, token, NULL, NULL);
    int st = floe__finish(c, call);
    floe_call_free(call);
    return st;
}

static void *dup_bytes(const ProtobufCBinaryData *b)
{
    void *p = malloc(b->len + 1);
    if (p && b->len)
        memcpy(p, b->data, b->len);
    return p;
}

int floe_trace(floe *c, const char *table, uint64_t id, uint64_t **ids, void **keys, void **labels, size_t *n)
{
    *ids = NULL, *keys = NULL, *labels = NULL, *n = 0;
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Trace q = FLOE__V1__TRACE__INIT;
    q.table = (char *)table;
    q.id = id;
    req.op_case = FLOE__V1__REQUEST__OP_TRACE;
    req.trace = &q;
    floe_call *call = floe__send_request(c, &req, NULL, NULL);
    int st = floe__finish(c, call);
    if (st == FLOE_OK) {
        const Floe__V1__Response *r = call->resp;
        const Floe__V1__TraceReply *tr = r->body_case == FLOE__V1__RESPONSE__BODY_TRACE ? r->trace : NULL;
        if (!tr || tr->ids.len % 8 || !tr->ids.len)
            st = floe__set_error(c, FLOE_ERR_PROTOCOL, "a trace's answer that does not hold together");
        else if (!(*ids = dup_bytes(&tr->ids)) || !(*keys = dup_bytes(&tr->keys)) ||
                 (tr->labels.len && !(*labels = dup_bytes(&tr->labels))))
            st = floe__set_error(c, FLOE_ERR_INTERNAL, "out of memory");
        else
            *n = tr->ids.len / 8;
        if (st != FLOE_OK) {
            free(*ids), free(*keys), free(*labels);
            *ids = NULL, *keys = NULL, *labels = NULL;
        }
    }
    floe_call_free(call);
    return st;
}
