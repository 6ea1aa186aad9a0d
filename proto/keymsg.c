/*
 * keymsg.c - the key requests' messages through the schema (see keymsg.h).
 *
 * The shapes are read once from protobuf-c's descriptor of Request: each
 * field of its `op` oneof whose message has a table and keys is a key
 * operation, and its fields play the part their name says.
 */
#include "keymsg.h"

#include <pthread.h>
#include <string.h>

#define OPS_MAX    64 /* Request's field numbers of operations are below it */
#define FIELDS_MAX 32 /* a key message's field numbers are below it */

typedef struct op_shape {
    const ProtobufCMessageDescriptor *desc; /* its message's; NULL: the operation carries no keys */
    unsigned offset;                        /* where Request keeps the message's pointer */
    uint8_t part[FIELDS_MAX];               /* floe_keymsg_part of each field number */
    int at[FLOE_KEYMSG_PARTS];              /* where the message keeps each part, -1: it has none */
} op_shape;

static op_shape shapes[OPS_MAX];
static pthread_once_t shapes_once = PTHREAD_ONCE_INIT;

/* The names of the parts, each with the one type it may have. */
static const struct {
    const char *name;
    ProtobufCType type;
    floe_keymsg_part part;
} NAMES[] = {
    {"table", PROTOBUF_C_TYPE_STRING, FLOE_KEYMSG_TABLE},
    {"keys", PROTOBUF_C_TYPE_BYTES, FLOE_KEYMSG_KEYS},
    {"ids", PROTOBUF_C_TYPE_BYTES, FLOE_KEYMSG_KEYS},
    {"values", PROTOBUF_C_TYPE_BYTES, FLOE_KEYMSG_VALUES},
    {"deltas", PROTOBUF_C_TYPE_BYTES, FLOE_KEYMSG_VALUES},
    {"overwrite", PROTOBUF_C_TYPE_BOOL, FLOE_KEYMSG_OVERWRITE},
    {"want_ids", PROTOBUF_C_TYPE_BOOL, FLOE_KEYMSG_WANT_IDS},
    {"want_values", PROTOBUF_C_TYPE_BOOL, FLOE_KEYMSG_WANT_VALUES},
    {"parents", PROTOBUF_C_TYPE_BYTES, FLOE_KEYMSG_PARENTS},
    {"change_counts", PROTOBUF_C_TYPE_BYTES, FLOE_KEYMSG_CHANGE_COUNTS},
    {"changes", PROTOBUF_C_TYPE_BYTES, FLOE_KEYMSG_CHANGES},
    {"generation", PROTOBUF_C_TYPE_UINT64, FLOE_KEYMSG_GENERATION},
    {"from", PROTOBUF_C_TYPE_BYTES, FLOE_KEYMSG_FROM},
    {"labels", PROTOBUF_C_TYPE_BYTES, FLOE_KEYMSG_LABELS},
    {"complete", PROTOBUF_C_TYPE_UINT64, FLOE_KEYMSG_COMPLETE},
    {"from_first", PROTOBUF_C_TYPE_UINT64, FLOE_KEYMSG_FROM_FIRST},
    {"from_counts", PROTOBUF_C_TYPE_BYTES, FLOE_KEYMSG_FROM_COUNTS},
    {"from_depth", PROTOBUF_C_TYPE_UINT32, FLOE_KEYMSG_FROM_DEPTH},
};

static void shape_of(const ProtobufCFieldDescriptor *f, op_shape *s)
{
    const ProtobufCMessageDescriptor *md = f->descriptor;
    for (int p = 0; p < FLOE_KEYMSG_PARTS; p++)
        s->at[p] = -1;
    for (unsigned j = 0; j < md->n_fields; j++) {
        const ProtobufCFieldDescriptor *g = &md->fields[j];
        if (g->id >= FIELDS_MAX || g->label == PROTOBUF_C_LABEL_REPEATED)
            continue;
        for (size_t k = 0; k < sizeof NAMES / sizeof NAMES[0]; k++) {
            const floe_keymsg_part p = NAMES[k].part;
            if (strcmp(g->name, NAMES[k].name) == 0 && g->type == NAMES[k].type && s->at[p] < 0) {
                s->part[g->id] = (uint8_t)p;
                s->at[p] = (int)g->offset;
            }
        }
    }
    if (s->at[FLOE_KEYMSG_TABLE] >= 0 && s->at[FLOE_KEYMSG_KEYS] >= 0 && md->sizeof_message <= FLOE_KEYMSG_BODY_MAX) {
        s->desc = md;
        s->offset = f->offset;
    } else {
        memset(s->part, 0, sizeof s->part);
    }
}

static void read_shapes(void)
{
    const ProtobufCMessageDescriptor *rd = &floe__v1__request__descriptor;
    for (unsigned i = 0; i < rd->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &rd->fields[i];
        if (f->id < OPS_MAX && f->type == PROTOBUF_C_TYPE_MESSAGE && (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
            shape_of(f, &shapes[f->id]);
    }
}

static const op_shape *shape(uint32_t op)
{
    pthread_once(&shapes_once, read_shapes);
    return op < OPS_MAX && shapes[op].desc ? &shapes[op] : NULL;
}

bool floe__keymsg_keyed(uint32_t op)
{
    return shape(op) != NULL;
}

floe_keymsg_part floe__keymsg_part_of(uint32_t op, uint32_t field)
{
    const op_shape *s = shape(op);
    return s && field < FIELDS_MAX ? (floe_keymsg_part)s->part[field] : FLOE_KEYMSG_NONE;
}

static void *part_in(void *msg, const op_shape *s, floe_keymsg_part p)
{
    return s->at[p] >= 0 ? (char *)msg + s->at[p] : NULL;
}

static void parts_of(void *msg, const op_shape *s, floe_keymsg *m)
{
    m->table = part_in(msg, s, FLOE_KEYMSG_TABLE);
    m->keys = part_in(msg, s, FLOE_KEYMSG_KEYS);
    m->values = part_in(msg, s, FLOE_KEYMSG_VALUES);
    m->parents = part_in(msg, s, FLOE_KEYMSG_PARENTS);
    m->change_counts = part_in(msg, s, FLOE_KEYMSG_CHANGE_COUNTS);
    m->changes = part_in(msg, s, FLOE_KEYMSG_CHANGES);
    m->overwrite = part_in(msg, s, FLOE_KEYMSG_OVERWRITE);
    m->want_ids = part_in(msg, s, FLOE_KEYMSG_WANT_IDS);
    m->want_values = part_in(msg, s, FLOE_KEYMSG_WANT_VALUES);
    m->generation = part_in(msg, s, FLOE_KEYMSG_GENERATION);
    m->from = part_in(msg, s, FLOE_KEYMSG_FROM);
    m->labels = part_in(msg, s, FLOE_KEYMSG_LABELS);
    m->complete = part_in(msg, s, FLOE_KEYMSG_COMPLETE);
    m->from_first = part_in(msg, s, FLOE_KEYMSG_FROM_FIRST);
    m->from_counts = part_in(msg, s, FLOE_KEYMSG_FROM_COUNTS);
    m->from_depth = part_in(msg, s, FLOE_KEYMSG_FROM_DEPTH);
}

bool floe__keymsg_of(const Floe__V1__Request *req, floe_keymsg *m)
{
    memset(m, 0, sizeof *m);
    const op_shape *s = shape((uint32_t)req->op_case);
    void *msg = NULL;
    if (s)
        memcpy(&msg, (const char *)req + s->offset, sizeof msg);
    if (!msg)
        return false;
    parts_of(msg, s, m);
    return true;
}

bool floe__keymsg_init(Floe__V1__Request *req, uint32_t op, void *body, floe_keymsg *m)
{
    memset(m, 0, sizeof *m);
    const op_shape *s = shape(op);
    if (!s)
        return false;
    protobuf_c_message_init(s->desc, body);
    memcpy((char *)req + s->offset, &body, sizeof body);
    req->op_case = (Floe__V1__Request__OpCase)op;
    parts_of(body, s, m);
    return true;
}

const char *floe__keymsg_op_name(uint32_t op)
{
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(&floe__v1__request__descriptor, op);
    return f && (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) ? f->name : "";
}

uint32_t floe__keymsg_op_named(const char *name)
{
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(&floe__v1__request__descriptor, name);
    return f && (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) ? f->id : 0;
}
