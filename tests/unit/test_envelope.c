/*
 * test_envelope.c - floed's in-place reading of key requests
 * (daemon/envelope.c) against protobuf-c's unpack, the independent judge:
 * every request protobuf-c packs is read the same way, and whatever bytes
 * the reader accepts (random requests, then the same cut, flipped, grown
 * and glued together) protobuf-c unpacks to the same fields.
 */
#include <stdlib.h>
#include <string.h>

#include "envelope.h"
#include "floe.pb-c.h"
#include "keymsg.h"
#include "ops.h"
#include "testutil.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static size_t below(size_t n)
{
    return n ? (size_t)(next() % n) : 0;
}

/* Buffers a random request points into. */
typedef struct room {
    char name[100];
    uint8_t keys[4096], values[1024], from[512], labels[128];
    Floe__V1__Insert in;
    Floe__V1__Find fi;
    Floe__V1__Erase er;
    Floe__V1__GetById gb;
    Floe__V1__Add add;
    Floe__V1__Successor su;
    Floe__V1__Predecessor pr;
    Floe__V1__Stats st;
    Floe__V1__Ping ping;
    Floe__V1__DropTable drop;
    Floe__V1__ShardCheck shard;
} room;

static char *random_name(room *r)
{
    size_t n = below(8) == 0 ? below(sizeof r->name) : below(24); /* now and then past FLOE_NAME_MAX */
    for (size_t i = 0; i < n; i++)
        r->name[i] = (char)(' ' + below(95));
    r->name[n] = '\0';
    return r->name;
}

static ProtobufCBinaryData random_bytes(uint8_t *buf, size_t cap)
{
    ProtobufCBinaryData b;
    b.len = below(3) == 0 ? 0 : below(cap);
    for (size_t i = 0; i < b.len; i++)
        buf[i] = (uint8_t)next();
    b.data = buf;
    return b;
}

/* A random request of any operation: key requests most of the time. */
static void random_request(Floe__V1__Request *q, room *r)
{
    floe__v1__request__init(q);
    q->id = below(4) == 0 ? 0 : next() >> below(64);
    switch (below(9)) {
    case 0:
        floe__v1__insert__init(&r->in);
        r->in.table = random_name(r);
        r->in.keys = random_bytes(r->keys, sizeof r->keys);
        r->in.values = random_bytes(r->values, sizeof r->values);
        r->in.overwrite = below(2);
        r->in.want_ids = below(2);
        if (below(3) == 0) { /* an exploring table's */
            r->in.from = random_bytes(r->from, sizeof r->from);
            r->in.labels = random_bytes(r->labels, sizeof r->labels);
            r->in.complete = below(2) ? next() : 0;
            if (below(2)) { /* or its parents run-length coded */
                r->in.from_first = next() >> below(64);
                r->in.from_counts = random_bytes(r->labels, sizeof r->labels);
            }
            r->in.from_depth = below(2) ? (uint32_t)(next() >> below(32)) : 0;
        }
        q->op_case = FLOE__V1__REQUEST__OP_INSERT;
        q->insert = &r->in;
        break;
    case 1:
        floe__v1__find__init(&r->fi);
        r->fi.table = random_name(r);
        r->fi.keys = random_bytes(r->keys, sizeof r->keys);
        r->fi.want_values = below(2);
        r->fi.want_ids = below(2);
        q->op_case = FLOE__V1__REQUEST__OP_FIND;
        q->find = &r->fi;
        break;
    case 2:
        floe__v1__erase__init(&r->er);
        r->er.table = random_name(r);
        r->er.keys = random_bytes(r->keys, sizeof r->keys);
        q->op_case = FLOE__V1__REQUEST__OP_ERASE;
        q->erase = &r->er;
        break;
    case 3:
        floe__v1__get_by_id__init(&r->gb);
        r->gb.table = random_name(r);
        r->gb.ids = random_bytes(r->keys, sizeof r->keys);
        q->op_case = FLOE__V1__REQUEST__OP_GET_BY_ID;
        q->get_by_id = &r->gb;
        break;
    case 5:
        floe__v1__add__init(&r->add);
        r->add.table = random_name(r);
        r->add.keys = random_bytes(r->keys, sizeof r->keys);
        r->add.deltas = random_bytes(r->values, sizeof r->values);
        q->op_case = FLOE__V1__REQUEST__OP_ADD;
        q->add = &r->add;
        break;
    case 6:
        floe__v1__successor__init(&r->su);
        r->su.table = random_name(r);
        r->su.keys = random_bytes(r->keys, sizeof r->keys);
        r->su.want_values = below(2);
        q->op_case = FLOE__V1__REQUEST__OP_SUCCESSOR;
        q->successor = &r->su;
        break;
    case 7:
        floe__v1__predecessor__init(&r->pr);
        r->pr.table = random_name(r);
        r->pr.keys = random_bytes(r->keys, sizeof r->keys);
        r->pr.want_values = below(2);
        q->op_case = FLOE__V1__REQUEST__OP_PREDECESSOR;
        q->predecessor = &r->pr;
        break;
    case 4:
        floe__v1__stats__init(&r->st);
        r->st.table = random_name(r);
        q->op_case = FLOE__V1__REQUEST__OP_STATS;
        q->stats = &r->st;
        break;
    default:
        if (below(2)) {
            floe__v1__ping__init(&r->ping);
            q->op_case = FLOE__V1__REQUEST__OP_PING;
            q->ping = &r->ping;
        } else {
            floe__v1__drop_table__init(&r->drop);
            r->drop.table = random_name(r);
            q->op_case = FLOE__V1__REQUEST__OP_DROP_TABLE;
            q->drop_table = &r->drop;
        }
        break;
    }
    if (below(3) == 0) { /* a client of a partitioned table */
        floe__v1__shard_check__init(&r->shard);
        r->shard.shard_set = below(4) ? next() : 0;
        r->shard.shard = (uint32_t)below(300);
        r->shard.shards = (uint32_t)below(300);
        q->shard = &r->shard;
    }
}

static bool is_key_op(Floe__V1__Request__OpCase op)
{
    return op == FLOE__V1__REQUEST__OP_INSERT || op == FLOE__V1__REQUEST__OP_FIND ||
           op == FLOE__V1__REQUEST__OP_ERASE || op == FLOE__V1__REQUEST__OP_GET_BY_ID ||
           op == FLOE__V1__REQUEST__OP_ADD || op == FLOE__V1__REQUEST__OP_SUCCESSOR ||
           op == FLOE__V1__REQUEST__OP_PREDECESSOR;
}

static bool same_bytes(const uint8_t *a, size_t alen, const ProtobufCBinaryData *b)
{
    return alen == b->len && (alen == 0 || memcmp(a, b->data, alen) == 0);
}

/* Whether e says what protobuf-c's q says (q unpacked from the same bytes). */
static void expect_same(const envelope *e, const Floe__V1__Request *q)
{
    ck_assert_uint_eq(e->id, q->id);
    ck_assert_int_eq(e->op, q->op_case);
    const char *table = NULL;
    const ProtobufCBinaryData *keys = NULL, *values = NULL;
    bool overwrite = false, want_ids = false, want_values = false;
    const ProtobufCBinaryData none = {0, NULL}, *from = &none, *labels = &none, *counts = &none;
    uint64_t complete = 0, first = 0;
    uint32_t from_depth = 0;
    switch (q->op_case) {
    case FLOE__V1__REQUEST__OP_INSERT:
        table = q->insert->table, keys = &q->insert->keys, values = &q->insert->values;
        overwrite = q->insert->overwrite, want_ids = q->insert->want_ids;
        from = &q->insert->from, labels = &q->insert->labels, complete = q->insert->complete;
        counts = &q->insert->from_counts, first = q->insert->from_first;
        from_depth = q->insert->from_depth;
        break;
    case FLOE__V1__REQUEST__OP_FIND:
        table = q->find->table, keys = &q->find->keys;
        want_values = q->find->want_values, want_ids = q->find->want_ids;
        break;
    case FLOE__V1__REQUEST__OP_ERASE:
        table = q->erase->table, keys = &q->erase->keys;
        break;
    case FLOE__V1__REQUEST__OP_GET_BY_ID:
        table = q->get_by_id->table, keys = &q->get_by_id->ids;
        break;
    case FLOE__V1__REQUEST__OP_ADD:
        table = q->add->table, keys = &q->add->keys, values = &q->add->deltas;
        break;
    case FLOE__V1__REQUEST__OP_SUCCESSOR:
        table = q->successor->table, keys = &q->successor->keys, want_values = q->successor->want_values;
        break;
    case FLOE__V1__REQUEST__OP_PREDECESSOR:
        table = q->predecessor->table, keys = &q->predecessor->keys, want_values = q->predecessor->want_values;
        break;
    default:
        ck_abort_msg("the reader took a request of operation %d", (int)q->op_case);
    }
    ck_assert_uint_eq(e->table_len, strlen(table));
    ck_assert(memcmp(e->table, table, e->table_len) == 0);
    ck_assert(same_bytes(e->keys, e->keys_len, keys));
    if (values)
        ck_assert(same_bytes(e->values, e->values_len, values));
    else
        ck_assert_uint_eq(e->values_len, 0);
    ck_assert(same_bytes(e->from, e->from_len, from));
    ck_assert(same_bytes(e->labels, e->labels_len, labels));
    ck_assert_uint_eq(e->complete, complete);
    ck_assert(same_bytes(e->from_counts, e->from_counts_len, counts));
    ck_assert_uint_eq(e->from_first, first);
    ck_assert_uint_eq(e->from_depth, from_depth);
    ck_assert_int_eq(e->overwrite, overwrite);
    ck_assert_int_eq(e->want_ids, want_ids);
    ck_assert_int_eq(e->want_values, want_values);
    ck_assert_uint_eq(e->shard_set, q->shard ? q->shard->shard_set : 0);
    ck_assert_uint_eq(e->shard, q->shard ? q->shard->shard : 0);
    ck_assert_uint_eq(e->shards, q->shard ? q->shard->shards : 0);
}

/* The reader on bytes: where it says yes, protobuf-c agrees field by field. */
static bool check_bytes(const uint8_t *buf, size_t len)
{
    envelope e;
    if (!envelope_read(buf, len, &e))
        return false;
    Floe__V1__Request *q = floe__v1__request__unpack(NULL, len, buf);
    ck_assert_msg(q != NULL, "the reader took %zu bytes protobuf-c refuses", len);
    expect_same(&e, q);
    if (e.keys_len)
        ck_assert_uint_eq(e.keys_at, (size_t)(e.keys - buf));
    floe__v1__request__free_unpacked(q, NULL);
    return true;
}

START_TEST(packed_requests_read_alike)
{
    static uint8_t buf[8192];
    size_t key_requests = 0;
    for (int i = 0; i < 20000; i++) {
        Floe__V1__Request q;
        room r;
        random_request(&q, &r);
        const size_t len = floe__v1__request__pack(&q, buf);
        const bool read = check_bytes(buf, len);
        /* what protobuf-c packs is the plain shape: every key request is read in place */
        ck_assert_int_eq(read, is_key_op(q.op_case));
        key_requests += read;
        envelope e;
        if (read && envelope_read(buf, len, &e) && e.keys_len) {
            size_t at;
            const size_t head = len < 256 ? len : 256;
            if (envelope_keys_at(buf, head, &at)) /* from the frame's first bytes alone */
                ck_assert_uint_eq(at, e.keys_at);
            else
                ck_assert_uint_gt(e.keys_at, head - 6); /* only keys that start past the head are not found */
        }
    }
    ck_assert_uint_gt(key_requests, 10000);
}
END_TEST

START_TEST(changed_bytes_read_alike_or_not_at_all)
{
    static uint8_t a[8192], b[8192], glued[16384];
    size_t taken = 0, tried = 0;
    for (int i = 0; i < 20000; i++) {
        Floe__V1__Request q, q2;
        room r, r2;
        random_request(&q, &r);
        size_t len = floe__v1__request__pack(&q, a);
        switch (below(5)) {
        case 0: /* cut off */
            len = below(len + 1);
            break;
        case 1: /* bytes flipped */
            for (int k = 0, n = 1 + (int)below(4); k < n && len; k++)
                a[below(len)] ^= (uint8_t)(1u << below(8));
            break;
        case 2: /* a byte set to a tag-like value */
            if (len)
                a[below(len)] = (uint8_t)below(256);
            break;
        case 3: { /* two requests back to back: protobuf merges them */
            random_request(&q2, &r2);
            const size_t len2 = floe__v1__request__pack(&q2, b);
            memcpy(glued, a, len);
            memcpy(glued + len, b, len2);
            tried++;
            taken += check_bytes(glued, len + len2);
            continue;
        }
        default: /* random bytes after it (an unknown field, often) */
            for (int k = 0, n = 1 + (int)below(6); k < n; k++)
                a[len++] = (uint8_t)next();
            break;
        }
        tried++;
        taken += check_bytes(a, len);
    }
    ck_assert_uint_gt(tried, 10000);
    ck_assert_uint_gt(taken, 0);
}
END_TEST

START_TEST(unusual_shapes_left_to_protobuf_c)
{
    envelope e;
    /* insert {table "t", keys 8 bytes}, id 5 after the operation: read */
    const uint8_t late_id[] = {0x3a, 0x0d, 0x0a, 0x01, 't', 0x12, 0x08, 1, 2, 3, 4, 5, 6, 7, 8, 0x08, 0x05};
    ck_assert(envelope_read(late_id, sizeof late_id, &e));
    ck_assert_uint_eq(e.id, 5);
    ck_assert_uint_eq(e.keys_len, 8);
    ck_assert_uint_eq(e.keys_at, 7);
    /* the same with an unknown field 9 (varint) inside the insert: left to protobuf-c */
    const uint8_t unknown[] = {0x3a, 0x0f, 0x0a, 0x01, 't', 0x12, 0x08, 1, 2, 3, 4, 5, 6, 7, 8, 0x48, 0x01};
    ck_assert(!envelope_read(unknown, sizeof unknown, &e));
    Floe__V1__Request *q = floe__v1__request__unpack(NULL, sizeof unknown, unknown);
    ck_assert_ptr_nonnull(q); /* which takes it */
    floe__v1__request__free_unpacked(q, NULL);
    /* a NUL in the table name: left to protobuf-c (floed refuses it with its own message) */
    const uint8_t nul[] = {0x3a, 0x04, 0x0a, 0x02, 't', 0x00};
    ck_assert(!envelope_read(nul, sizeof nul, &e));
    /* want_ids (field 5) as a length-delimited field: left to protobuf-c */
    const uint8_t wire[] = {0x3a, 0x03, 0x2a, 0x01, 0x01};
    ck_assert(!envelope_read(wire, sizeof wire, &e));
    /* an id of 11 varint bytes: left to protobuf-c */
    const uint8_t longid[] = {0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x3a, 0x00};
    ck_assert(!envelope_read(longid, sizeof longid, &e));
    /* the keys field twice (protobuf: the last wins): left to protobuf-c */
    const uint8_t twice[] = {0x3a, 0x06, 0x12, 0x01, 0x01, 0x12, 0x01, 0x02};
    ck_assert(!envelope_read(twice, sizeof twice, &e));
    /* no operation, or another one: not a key request */
    const uint8_t only_id[] = {0x08, 0x07};
    ck_assert(!envelope_read(only_id, sizeof only_id, &e));
    const uint8_t ping[] = {0x08, 0x07, 0x1a, 0x00};
    ck_assert(!envelope_read(ping, sizeof ping, &e));
    /* an empty find: read, nothing set */
    const uint8_t empty_find[] = {0x42, 0x00};
    ck_assert(envelope_read(empty_find, sizeof empty_find, &e));
    ck_assert_int_eq(e.op, FLOE__V1__REQUEST__OP_FIND);
    ck_assert_uint_eq(e.keys_len + e.table_len + e.values_len, 0);
}
END_TEST

/* proto/keymsg.h against the schema as written: which operations carry
 * keys, and a message it writes packs as the hand-built one does. */
START_TEST(key_messages_by_their_parts)
{
    const uint32_t keyed[] = {FLOE__V1__REQUEST__OP_INSERT,    FLOE__V1__REQUEST__OP_FIND,
                              FLOE__V1__REQUEST__OP_ERASE,     FLOE__V1__REQUEST__OP_GET_BY_ID,
                              FLOE__V1__REQUEST__OP_SUCCESSOR, FLOE__V1__REQUEST__OP_PREDECESSOR,
                              FLOE__V1__REQUEST__OP_ADD};
    for (uint32_t op = 0; op < 64; op++) {
        bool want = false;
        for (size_t i = 0; i < sizeof keyed / sizeof keyed[0]; i++)
            want = want || keyed[i] == op;
        ck_assert_msg(floe__keymsg_keyed(op) == want, "operation %u: keyed %d", op, floe__keymsg_keyed(op));
        if (want) /* the client routes by the row of the same name (tables/ops.h) */
            ck_assert_msg(floe_op_named(floe__keymsg_op_name(op)) != 0, "no row named %s", floe__keymsg_op_name(op));
    }
    ck_assert_uint_eq(floe__keymsg_op_named("add"), FLOE__V1__REQUEST__OP_ADD);
    ck_assert_uint_eq(floe__keymsg_op_named("get_by_id"), FLOE__V1__REQUEST__OP_GET_BY_ID);
    ck_assert_uint_eq(floe__keymsg_op_named("shard"), 0); /* a field of Request, not an operation */
    ck_assert_uint_eq(floe__keymsg_op_named("nosuch"), 0);
    ck_assert_str_eq(floe__keymsg_op_name(FLOE__V1__REQUEST__OP_SUCCESSOR), "successor");
    ck_assert_int_eq(floe__keymsg_part_of(FLOE__V1__REQUEST__OP_ADD, 3), FLOE_KEYMSG_VALUES);     /* deltas */
    ck_assert_int_eq(floe__keymsg_part_of(FLOE__V1__REQUEST__OP_GET_BY_ID, 2), FLOE_KEYMSG_KEYS); /* ids */
    ck_assert_int_eq(floe__keymsg_part_of(FLOE__V1__REQUEST__OP_INSERT, 9), FLOE_KEYMSG_GENERATION);
    ck_assert_int_eq(floe__keymsg_part_of(FLOE__V1__REQUEST__OP_STATS, 1), FLOE_KEYMSG_NONE);

    /* an add written through its parts packs as one written by hand */
    uint8_t keys[16] = {1, 2, 3}, deltas[8] = {9};
    Floe__V1__Request a = FLOE__V1__REQUEST__INIT, b = FLOE__V1__REQUEST__INIT;
    _Alignas(max_align_t) unsigned char body[FLOE_KEYMSG_BODY_MAX];
    floe_keymsg m;
    ck_assert(floe__keymsg_init(&a, FLOE__V1__REQUEST__OP_ADD, body, &m));
    ck_assert(m.table && m.keys && m.values && !m.overwrite && !m.want_ids && !m.parents);
    *m.table = "t";
    *m.keys = (ProtobufCBinaryData){sizeof keys, keys};
    *m.values = (ProtobufCBinaryData){sizeof deltas, deltas};
    Floe__V1__Add add = FLOE__V1__ADD__INIT;
    add.table = "t";
    add.keys = (ProtobufCBinaryData){sizeof keys, keys};
    add.deltas = (ProtobufCBinaryData){sizeof deltas, deltas};
    b.op_case = FLOE__V1__REQUEST__OP_ADD;
    b.add = &add;
    uint8_t pa[128], pb[128];
    const size_t la = floe__v1__request__pack(&a, pa), lb = floe__v1__request__pack(&b, pb);
    ck_assert_uint_eq(la, lb);
    ck_assert(memcmp(pa, pb, la) == 0);
    floe_keymsg back;
    ck_assert(floe__keymsg_of(&b, &back));
    ck_assert_ptr_eq(back.values, &add.deltas);
    ck_assert(!floe__keymsg_init(&a, FLOE__V1__REQUEST__OP_STATS, body, &m));
}
END_TEST

Suite *envelope_suite(void)
{
    Suite *s = suite_create("envelope");
    TCase *tc = tcase_create("read");
    tcase_add_test(tc, packed_requests_read_alike);
    tcase_add_test(tc, changed_bytes_read_alike_or_not_at_all);
    tcase_add_test(tc, unusual_shapes_left_to_protobuf_c);
    tcase_add_test(tc, key_messages_by_their_parts);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}
