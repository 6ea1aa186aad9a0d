/*
 * keymsg.h - the key requests' messages, read and written through the
 * schema.
 *
 * Every operation of Request whose message carries keys (Insert, Find,
 * Erase, GetById, Successor, Predecessor, Add, and any added later) names
 * its parts alike in proto/floe.proto: `table`, `keys` (GetById: `ids`),
 * `values` (Add: `deltas`), the flags `overwrite`, `want_ids` and
 * `want_values`, and an Insert's states by parent (`parents`,
 * `change_counts`, `changes`, `generation`).  So one reader and one writer
 * serve them all, from protobuf-c's descriptors of the generated code: a
 * new key operation needs its message in floe.proto and nothing here.
 * Shared by floed (the in-place reader, the unpacked requests) and libfloe
 * (the calls, the routing over several floed); floe__ names stay out of
 * libfloe.so's exports.
 */
#ifndef FLOE_PROTO_KEYMSG_H
#define FLOE_PROTO_KEYMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "floe.pb-c.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The parts a key request's message may have, by the name of their field. */
typedef enum floe_keymsg_part {
    FLOE_KEYMSG_NONE = 0, /* not a part: a field of no known name, or of another type */
    FLOE_KEYMSG_TABLE,    /* string table */
    FLOE_KEYMSG_KEYS,     /* bytes keys, or bytes ids */
    FLOE_KEYMSG_VALUES,   /* bytes values, or bytes deltas */
    FLOE_KEYMSG_OVERWRITE,
    FLOE_KEYMSG_WANT_IDS,
    FLOE_KEYMSG_WANT_VALUES,
    FLOE_KEYMSG_PARENTS, /* bytes parents, change_counts, changes; uint64 generation */
    FLOE_KEYMSG_CHANGE_COUNTS,
    FLOE_KEYMSG_CHANGES,
    FLOE_KEYMSG_GENERATION,
    FLOE_KEYMSG_FROM,       /* bytes from: exploring tables' parents in the open set */
    FLOE_KEYMSG_LABELS,     /* bytes labels */
    FLOE_KEYMSG_COMPLETE,   /* uint64 complete: the claim the request ends */
    FLOE_KEYMSG_FROM_FIRST, /* uint64 from_first, bytes from_counts: from, run-length coded */
    FLOE_KEYMSG_FROM_COUNTS,
    FLOE_KEYMSG_FROM_DEPTH, /* uint32 from_depth: the depth of parents on other shards */
    FLOE_KEYMSG_PARTS
} floe_keymsg_part;

/* Whether operation op (a Request field number, its OpCase) carries keys:
 * its message has a table and keys. */
bool floe__keymsg_keyed(uint32_t op);

/* The part that field `field` of op's message is (NONE for any field of a
 * message that carries no keys). */
floe_keymsg_part floe__keymsg_part_of(uint32_t op, uint32_t field);

/* The parts of an unpacked key request, pointing into its message (NULL
 * where its message has no such part). */
typedef struct floe_keymsg {
    char **table;
    ProtobufCBinaryData *keys, *values, *parents, *change_counts, *changes;
    protobuf_c_boolean *overwrite, *want_ids, *want_values;
    uint64_t *generation;
    ProtobufCBinaryData *from, *labels, *from_counts; /* an exploring table's insert */
    uint64_t *complete, *from_first;
    uint32_t *from_depth;
} floe_keymsg;

/* req's parts; false (m zeroed) if its operation carries no keys or its
 * message is absent. */
bool floe__keymsg_of(const Floe__V1__Request *req, floe_keymsg *m);

/* The most bytes a key request's message takes (floe__keymsg_init's body). */
#define FLOE_KEYMSG_BODY_MAX 256

/* Makes req (initialised by the caller) a request of key operation op, its
 * message in body (FLOE_KEYMSG_BODY_MAX bytes, aligned as any message) set
 * to its defaults, and fills m with its parts; false if op carries no keys. */
bool floe__keymsg_init(Floe__V1__Request *req, uint32_t op, void *body, floe_keymsg *m);

/* The name of operation op's field of Request ("insert", "add", ...), ""
 * if op names none. */
const char *floe__keymsg_op_name(uint32_t op);

/* The operation whose field of Request is named `name` ("insert", "add",
 * "get_by_id", ...: an operation row's name, tables/ops.h), 0 if none. */
uint32_t floe__keymsg_op_named(const char *name);

#ifdef __cplusplus
}
#endif

#endif
