/*
 * envelope.c - key requests read in place (see envelope.h).
 *
 * The limits below are protobuf-c's own (protobuf-c.c: a tag in at most 5
 * bytes, a length in at most 5 bytes and below 2^32, a varint in at most
 * 10): a frame past them is left to protobuf-c, which refuses it.
 */
#include "envelope.h"

#include <string.h>

enum { WIRE_VARINT = 0, WIRE_LEN = 2 };

/* A varint of at most max bytes; false if it is longer, cut off, or its
 * tenth byte carries bits past 64. */
static bool varint(const uint8_t **p, const uint8_t *end, int max, uint64_t *v)
{
    *v = 0;
    for (int i = 0; i < max && *p < end; i++) {
        const uint8_t b = *(*p)++;
        if (i == 9 && b > 1)
            return false;
        *v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80))
            return true;
    }
    return false;
}

static bool tag(const uint8_t **p, const uint8_t *end, uint32_t *field, int *wire)
{
    uint64_t t;
    if (!varint(p, end, 5, &t) || t >> 32)
        return false;
    *field = (uint32_t)(t >> 3);
    *wire = (int)(t & 7);
    return *field != 0;
}

/* A length-delimited field's bytes: [*data, *data + *len) within end. */
static bool span(const uint8_t **p, const uint8_t *end, const uint8_t **data, size_t *len)
{
    uint64_t n;
    if (!varint(p, end, 5, &n) || n > UINT32_MAX || n > (uint64_t)(end - *p))
        return false;
    *data = *p;
    *len = (size_t)n;
    *p += n;
    return true;
}

/* Request.shard's field number. */
enum { F_SHARD = 20 };

/* The part field `field` of op's message is, and the wire type it must
 * come in; flag: where a flag goes.  -1: a field the envelope does not read
 * (an insert's states by parent, a field of no known name). */
static int field_kind(Floe__V1__Request__OpCase op, uint32_t field, floe_keymsg_part *part, bool **flag, envelope *e)
{
    *flag = NULL;
    switch ((*part = floe__keymsg_part_of((uint32_t)op, field))) {
    case FLOE_KEYMSG_TABLE:
    case FLOE_KEYMSG_KEYS:
    case FLOE_KEYMSG_VALUES:
    case FLOE_KEYMSG_FROM:
    case FLOE_KEYMSG_LABELS:
    case FLOE_KEYMSG_FROM_COUNTS:
        return WIRE_LEN;
    case FLOE_KEYMSG_COMPLETE: /* numbers, not flags */
    case FLOE_KEYMSG_FROM_FIRST:
    case FLOE_KEYMSG_FROM_DEPTH:
        return WIRE_VARINT;
    case FLOE_KEYMSG_OVERWRITE:
        *flag = &e->overwrite;
        return WIRE_VARINT;
    case FLOE_KEYMSG_WANT_IDS:
        *flag = &e->want_ids;
        return WIRE_VARINT;
    case FLOE_KEYMSG_WANT_VALUES:
        *flag = &e->want_values;
        return WIRE_VARINT;
    default:
        return -1;
    }
}

/* Reads the body of a key request.  frame is where offsets count from;
 * with keys_only, the body may be cut off anywhere after the keys begin. */
static bool read_body(const uint8_t *frame, const uint8_t *p, const uint8_t *end, envelope *e, bool keys_only)
{
    unsigned seen = 0;
    while (p < end) {
        uint32_t field;
        int wire;
        bool *flag;
        floe_keymsg_part part;
        if (!tag(&p, end, &field, &wire) || field > 31 || (seen & (1u << field)))
            return false;
        seen |= 1u << field;
        if (field_kind(e->op, field, &part, &flag, e) != wire)
            return false;
        if (wire == WIRE_VARINT) {
            uint64_t v;
            if (!varint(&p, end, 10, &v))
                return false;
            if (flag)
                *flag = v != 0;
            else if (part == FLOE_KEYMSG_COMPLETE)
                e->complete = v;
            else if (part == FLOE_KEYMSG_FROM_DEPTH)
                e->from_depth = (uint32_t)v; /* as protobuf-c reads a uint32 */
            else
                e->from_first = v;
            continue;
        }
        if (keys_only && part == FLOE_KEYMSG_KEYS) { /* its length, then its first byte is the answer */
            uint64_t n;
            if (!varint(&p, end, 5, &n) || n > UINT32_MAX)
                return false;
            e->keys_at = (size_t)(p - frame);
            return true;
        }
        const uint8_t *data;
        size_t len;
        if (!span(&p, end, &data, &len))
            return false;
        if (part == FLOE_KEYMSG_TABLE) {
            if (memchr(data, 0, len))
                return false; /* protobuf-c would cut the name at the NUL: floed refuses it (conn.c) */
            e->table = (const char *)data;
            e->table_len = len;
        } else if (part == FLOE_KEYMSG_KEYS) {
            e->keys = data;
            e->keys_len = len;
            e->keys_at = (size_t)(data - frame);
        } else if (part == FLOE_KEYMSG_FROM) {
            e->from = data;
            e->from_len = len;
        } else if (part == FLOE_KEYMSG_LABELS) {
            e->labels = data;
            e->labels_len = len;
        } else if (part == FLOE_KEYMSG_FROM_COUNTS) {
            e->from_counts = data;
            e->from_counts_len = len;
        } else {
            e->values = data;
            e->values_len = len;
        }
    }
    return !keys_only;
}

/* Request.shard, a ShardCheck: shard_set 1, shard 2, shards 3 (varints, each at most once, fitting their types). */
static bool read_shard(const uint8_t *p, const uint8_t *end, envelope *e)
{
    unsigned seen = 0;
    while (p < end) {
        uint32_t field;
        int wire;
        uint64_t v;
        if (!tag(&p, end, &field, &wire) || field > 3 || wire != WIRE_VARINT || (seen & (1u << field)) ||
            !varint(&p, end, 10, &v))
            return false;
        seen |= 1u << field;
        if (field == 1)
            e->shard_set = v;
        else if (v > UINT32_MAX)
            return false; /* protobuf-c keeps the low 32 bits: leave it to protobuf-c */
        else if (field == 2)
            e->shard = (uint32_t)v;
        else
            e->shards = (uint32_t)v;
    }
    return true;
}

static bool read_request(const uint8_t *frame, size_t len, envelope *e, bool keys_only)
{
    memset(e, 0, sizeof *e);
    e->table = "";
    const uint8_t *p = frame, *end = frame + len;
    bool have_id = false, have_shard = false;
    while (p < end) {
        uint32_t field;
        int wire;
        if (!tag(&p, end, &field, &wire))
            return false;
        if (field == 1 && wire == WIRE_VARINT && !have_id) {
            if (!varint(&p, end, 10, &e->id))
                return false;
            have_id = true;
            continue;
        }
        if (field == F_SHARD && wire == WIRE_LEN && !have_shard) {
            const uint8_t *body;
            size_t n;
            if (!span(&p, end, &body, &n) || !read_shard(body, body + n, e))
                return false;
            have_shard = true;
            continue;
        }
        if (!floe__keymsg_keyed(field) || wire != WIRE_LEN || e->op)
            return false;
        e->op = (Floe__V1__Request__OpCase)field;
        const uint8_t *body;
        size_t n;
        if (keys_only) { /* the body may run past what we have */
            uint64_t blen;
            if (!varint(&p, end, 5, &blen) || blen > UINT32_MAX)
                return false;
            const size_t have = (size_t)(end - p);
            return read_body(frame, p, p + (blen < have ? (size_t)blen : have), e, true);
        }
        if (!span(&p, end, &body, &n) || !read_body(frame, body, body + n, e, false))
            return false;
    }
    return e->op != 0 && !keys_only;
}

bool envelope_read(const uint8_t *frame, size_t len, envelope *e)
{
    return read_request(frame, len, e, false);
}

bool envelope_keys_at(const uint8_t *head, size_t have, size_t *at)
{
    envelope e;
    if (!read_request(head, have, &e, true))
        return false;
    *at = e.keys_at;
    return true;
}
