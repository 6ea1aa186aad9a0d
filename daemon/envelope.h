/*
 * envelope.h - a key request read where it lies in its frame.
 *
 * protobuf-c's unpack copies every `bytes` field: a 64 Ki-key insert would
 * cost a 512 KiB copy before floed has looked at it.  The requests that
 * carry keys (every operation proto/keymsg.h finds keys in: insert, find,
 * erase, get_by_id, add, successor, predecessor) are read here instead, in
 * place, each field known by the part it plays: the envelope points at
 * the table name, keys and values (and an exploring table's parents and
 * labels) inside the frame.  Only the plain shape is read (each field at most once, with the
 * wire type the schema gives it, no unknown fields, no NUL in the name);
 * anything else returns false and the caller unpacks the frame as before,
 * so protobuf-c stays the judge of everything unusual.  tests/unit checks
 * that the two agree on every message.
 */
#ifndef FLOE_DAEMON_ENVELOPE_H
#define FLOE_DAEMON_ENVELOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "floe.pb-c.h"
#include "keymsg.h"

typedef struct envelope {
    uint64_t id;
    Floe__V1__Request__OpCase op; /* one that carries keys (floe__keymsg_keyed) */
    const char *table;            /* not NUL-terminated */
    size_t table_len;
    const uint8_t *keys; /* GET_BY_ID: the ids */
    size_t keys_len;
    size_t keys_at; /* the keys' offset in the frame */
    const uint8_t *values;
    size_t values_len;
    bool overwrite, want_ids, want_values;
    /* an exploring table's insert: parents, labels, the claim it ends */
    const uint8_t *from, *labels, *from_counts;
    size_t from_len, labels_len, from_counts_len;
    uint64_t complete, from_first;
    uint32_t from_depth;
    uint64_t shard_set; /* Request.shard (all 0 when absent) */
    uint32_t shard, shards;
} envelope;

/* Reads frame (len bytes) as a key request; false if it is not one of the
 * plain shape (the caller unpacks it then). */
bool envelope_read(const uint8_t *frame, size_t len, envelope *e);

/* Where the keys of a key request start in its frame, read from the first
 * have bytes of it: so that the frame can be placed with its keys aligned.
 * false if they do not start within those bytes. */
bool envelope_keys_at(const uint8_t *head, size_t have, size_t *at);

#endif
