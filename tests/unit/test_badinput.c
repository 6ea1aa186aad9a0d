/*
 * test_badinput.c - bad input gets a clear error and changes nothing.
 *
 * Specs: floe_spec_validate.  Requests: the door, floe_request_check, rule by
 * rule for each table kind, with its status and floed's message word for
 * word; then the same rules through floe_table_run (the in-process door,
 * floe_table_submit) on whole and partitioned CPU tables, which refuse the
 * batch, complete it in its place in the order, and leave the table as it
 * was; a batch marked FLOE_BATCH_CHECKED runs as any other.  Last, what the
 * engine still checks itself (cursors, rebuild sizes).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "iceberg.h"
#include "partition.h"
#include "testutil.h"

static floe_spec good_spec(floe_kind kind)
{
    floe_spec s;
    floe_spec_default(&s);
    strcpy(s.name, "bad-input_1.0");
    s.kind = kind;
    s.key_bits = 20;
    s.capacity = 1000;
    s.value_bytes = kind == FLOE_KIND_MAP ? 8 : 0;
    s.seed = 3;
    return s;
}

static void expect_spec_error(const floe_spec *s, floe_status want, const char *words)
{
    iceberg *t = NULL;
    floe_errinfo err;
    floe_status st = iceberg_create(s, NULL, &t, &err);
    ck_assert_int_eq(st, want);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(err.msg, words) != NULL, "message '%s' does not mention '%s'", err.msg, words);
}

START_TEST(bad_specs_refused)
{
    floe_spec s = good_spec(FLOE_KIND_SET);
    s.key_bits = 0;
    expect_spec_error(&s, FLOE_ERR_INVALID, "key_bits");
    s.key_bits = 65;
    expect_spec_error(&s, FLOE_ERR_INVALID, "key_bits");
    s = good_spec(FLOE_KIND_SET);
    s.capacity = 0;
    expect_spec_error(&s, FLOE_ERR_INVALID, "capacity");
    s.capacity = ((uint64_t)1 << 40) + 1;
    expect_spec_error(&s, FLOE_ERR_TOO_LARGE, "capacity");
    s = good_spec(FLOE_KIND_SET);
    s.value_bytes = 8;
    expect_spec_error(&s, FLOE_ERR_INVALID, "SET");
    s = good_spec(FLOE_KIND_MAP);
    s.value_bytes = 3;
    expect_spec_error(&s, FLOE_ERR_INVALID, "value_bytes");
    s.value_bytes = 0;
    expect_spec_error(&s, FLOE_ERR_INVALID, "value_bytes");
    s = good_spec(FLOE_KIND_SET);
    s.name[0] = '\0';
    expect_spec_error(&s, FLOE_ERR_INVALID, "name");
    strcpy(s.name, "has space");
    expect_spec_error(&s, FLOE_ERR_INVALID, "name");
    s = good_spec(FLOE_KIND_SET);
    s.kind = FLOE_KIND_UNSPECIFIED;
    expect_spec_error(&s, FLOE_ERR_INVALID, "kind");
    s.kind = (floe_kind)6;
    expect_spec_error(&s, FLOE_ERR_INVALID, "kind");
    s.kind = FLOE_KIND_STATIC;
    s.value_bytes = 3;
    expect_spec_error(&s, FLOE_ERR_INVALID, "a STATIC table's value_bytes is 0 (keys only), 4 or 8, got 3");
    s.value_bytes = 0;
    s.kind = FLOE_KIND_ORDERED; /* valid, but ordered.c's: the iceberg engine refuses it */
    ck_assert_int_eq(floe_spec_validate(&s, NULL), FLOE_OK);
    expect_spec_error(&s, FLOE_ERR_INVALID, "ORDERED");
    floe_errinfo err;
    s.value_bytes = 3;
    ck_assert_int_eq(floe_spec_validate(&s, &err), FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.msg, "an ORDERED table's value_bytes is 0 (keys only), 4 or 8, got 3"));
    s.value_bytes = 4;
    s.words = 2;
    ck_assert_int_eq(floe_spec_validate(&s, &err), FLOE_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.msg, "words is for TREE tables"));
    s.words = 0;
    s.memory = 1 << 20;
    ck_assert_int_eq(floe_spec_validate(&s, &err), FLOE_ERR_INVALID);
    s = good_spec(FLOE_KIND_SET);
    s.kind = FLOE_KIND_TREE; /* a TREE is tree.c's: the iceberg engine refuses it */
    s.key_bits = 0;
    s.words = 4;
    expect_spec_error(&s, FLOE_ERR_INVALID, "TREE");
    s = good_spec(FLOE_KIND_SET);
    s.max_fill = 1.5;
    expect_spec_error(&s, FLOE_ERR_INVALID, "max_fill");
    s = good_spec(FLOE_KIND_SET);
    strcpy(s.backend, "tpu");
    expect_spec_error(&s, FLOE_ERR_INVALID, "backend");
    /* a shard of a partitioned table: shard < shards, 2..FLOE_SHARDS_MAX shards, a list hash */
    s = good_spec(FLOE_KIND_SET);
    s.shard = 2, s.shards = 3, s.shard_set = 77;
    ck_assert_int_eq(floe_spec_validate(&s, NULL), FLOE_OK);
    s.shard = 3;
    expect_spec_error(&s, FLOE_ERR_INVALID, "got shard 3 of 3");
    s.shard = 0, s.shards = 1;
    expect_spec_error(&s, FLOE_ERR_INVALID, "shard");
    s.shards = FLOE_SHARDS_MAX + 1;
    expect_spec_error(&s, FLOE_ERR_INVALID, "shard");
    s.shards = 2, s.shard_set = 0;
    expect_spec_error(&s, FLOE_ERR_INVALID, "shard_set");
    s.shards = 0, s.shard = 1;
    expect_spec_error(&s, FLOE_ERR_INVALID, "shard");
    s = good_spec(FLOE_KIND_SET);
    iceberg *t = NULL;
    ck_assert_int_eq(iceberg_create_sized(&s, 21, 0, NULL, &t, NULL), FLOE_ERR_INVALID); /* > key_bits */
    ck_assert_ptr_null(t);
}
END_TEST

/* ---- the door, called directly ---------------------------------------------------------------- */

static floe_spec door_spec(floe_kind kind)
{
    floe_spec s;
    floe_spec_default(&s);
    s.kind = kind;
    s.capacity = 1000;
    s.seed = 3;
    strcpy(s.backend, "cpu");
    if (kind == FLOE_KIND_TREE) {
        strcpy(s.name, "door-tree");
        s.key_bits = 0;
        s.words = 3;
    } else {
        strcpy(s.name, kind == FLOE_KIND_MAP ? "door-map" : kind == FLOE_KIND_ORDERED ? "door-ordered" : "door-set");
        s.key_bits = 20;
        s.value_bytes = kind == FLOE_KIND_MAP || kind == FLOE_KIND_ORDERED ? 8 : 0;
    }
    ck_assert_int_eq(floe_spec_validate(&s, NULL), FLOE_OK);
    return s;
}

/* floe_request_check refuses with status want and a message that is exactly
 * msg (exact: floed answers with it, and clients and tests match on it), or
 * that contains msg when exact is false; *n comes back 0. */
static void refused_as(const floe_spec *s, floe_op op, unsigned flags, const void *keys, size_t keys_len,
                       const void *values, size_t values_len, floe_status want, const char *msg, bool exact)
{
    floe_errinfo err;
    size_t n = 12345;
    floe_status st = floe_request_check(s, op, flags, keys, keys_len, values, values_len, &n, &err);
    ck_assert_msg(st == want, "%s, op %d, flags %u: %s (%s), expected %s", s->name, (int)op, flags,
                  floe_status_name(st), st == FLOE_OK ? "" : err.msg, floe_status_name(want));
    ck_assert_int_eq(err.code, want);
    if (exact)
        ck_assert_str_eq(err.msg, msg);
    else
        ck_assert_msg(strstr(err.msg, msg) != NULL, "message '%s' does not mention '%s'", err.msg, msg);
    ck_assert_uint_eq(n, 0);
    /* err and n may be NULL: the status alone */
    ck_assert_int_eq(floe_request_check(s, op, flags, keys, keys_len, values, values_len, NULL, NULL), want);
}

static void refused_exactly(const floe_spec *s, floe_op op, unsigned flags, const void *keys, size_t keys_len,
                            const void *values, size_t values_len, floe_status want, const char *msg)
{
    refused_as(s, op, flags, keys, keys_len, values, values_len, want, msg, true);
}

static void refused(const floe_spec *s, floe_op op, unsigned flags, const void *keys, size_t keys_len,
                    const void *values, size_t values_len, floe_status want, const char *words)
{
    refused_as(s, op, flags, keys, keys_len, values, values_len, want, words, false);
}

static void accepted(const floe_spec *s, floe_op op, unsigned flags, const void *keys, size_t keys_len,
                     const void *values, size_t values_len, size_t want_n)
{
    floe_errinfo err;
    size_t n = 12345;
    floe_status st = floe_request_check(s, op, flags, keys, keys_len, values, values_len, &n, &err);
    ck_assert_msg(st == FLOE_OK, "%s, op %d, flags %u: %s (%s)", s->name, (int)op, flags, floe_status_name(st),
                  err.msg);
    ck_assert_uint_eq(n, want_n);
}

#define TOO_MANY ((size_t)1 << 32) /* keys in a batch: one more than the door lets through */

START_TEST(door_set)
{
    const floe_spec s = door_spec(FLOE_KIND_SET);
    const uint64_t keys[3] = {1, 2, (1u << 20) - 1};
    const uint64_t wide[3] = {2000, 3000, 1u << 20};
    const uint64_t v[3] = {7, 8, 9};
    accepted(&s, FLOE_OP_INSERT, 0, keys, 24, NULL, 0, 3);
    accepted(&s, FLOE_OP_INSERT, FLOE_BATCH_WANT_IDS, keys, 24, NULL, 0, 3);
    accepted(&s, FLOE_OP_FIND, FLOE_BATCH_WANT_IDS, keys, 16, NULL, 0, 2);
    accepted(&s, FLOE_OP_ERASE, FLOE_BATCH_WANT_IDS, keys, 8, NULL, 0, 1); /* want_ids means nothing to an erase */
    accepted(&s, FLOE_OP_INSERT, 0, NULL, 0, NULL, 0, 0);                  /* no keys: nothing to point at */
    accepted(&s, FLOE_OP_INSERT, FLOE_BATCH_CHECKED, keys, 24, NULL, 0, 3);

    /* keys: whole u64s, each below 2^key_bits, present, fewer than 2^32 */
    refused_exactly(&s, FLOE_OP_INSERT, 0, keys, 20, NULL, 0, FLOE_ERR_INVALID,
                    "keys are 8 bytes each (little-endian u64); got 20 bytes, not a multiple of 8");
    refused_exactly(&s, FLOE_OP_FIND, 0, keys, 7, NULL, 0, FLOE_ERR_INVALID,
                    "keys are 8 bytes each (little-endian u64); got 7 bytes, not a multiple of 8");
    refused_exactly(&s, FLOE_OP_INSERT, 0, wide, 24, NULL, 0, FLOE_ERR_INVALID,
                    "table door-set: key 1048576 at index 2 does not fit in key_bits = 20 (must be below 2^20)");
    refused_exactly(&s, FLOE_OP_FIND, 0, wide, 24, NULL, 0, FLOE_ERR_INVALID,
                    "table door-set: key 1048576 at index 2 does not fit in key_bits = 20 (must be below 2^20)");
    const uint64_t huge = ~0ull;
    refused_exactly(&s, FLOE_OP_ERASE, 0, &huge, 8, NULL, 0, FLOE_ERR_INVALID,
                    "table door-set: key 18446744073709551615 at index 0 does not fit in key_bits = 20 (must be "
                    "below 2^20)");
    accepted(&s, FLOE_OP_INSERT, 0, wide, 16, NULL, 0, 2); /* the good ones alone */
    /* keys as they come off the wire: at any alignment */
    unsigned char raw[8 * 3 + 1];
    memcpy(raw + 1, wide, sizeof wide);
    refused_exactly(&s, FLOE_OP_INSERT, 0, raw + 1, 24, NULL, 0, FLOE_ERR_INVALID,
                    "table door-set: key 1048576 at index 2 does not fit in key_bits = 20 (must be below 2^20)");
    accepted(&s, FLOE_OP_INSERT, 0, raw + 1, 16, NULL, 0, 2);
    refused_exactly(&s, FLOE_OP_INSERT, 0, NULL, 16, NULL, 0, FLOE_ERR_INVALID,
                    "table door-set: no keys given for 2 keys");
    refused_exactly(&s, FLOE_OP_INSERT, 0, keys, TOO_MANY * 8, NULL, 0, FLOE_ERR_TOO_LARGE,
                    "table door-set: a batch holds at most 2^32 - 1 keys, got 4294967296");

    /* values and the flags that ask for them: a MAP's */
    refused_exactly(&s, FLOE_OP_INSERT, 0, keys, 24, v, 24, FLOE_ERR_INVALID,
                    "table door-set is a SET: values are for MAP tables");
    refused_exactly(&s, FLOE_OP_INSERT, FLOE_BATCH_OVERWRITE, keys, 24, NULL, 0, FLOE_ERR_INVALID,
                    "table door-set is a SET: overwrite and values are for MAP tables");
    refused_exactly(&s, FLOE_OP_FIND, FLOE_BATCH_WANT_VALUES, keys, 24, NULL, 0, FLOE_ERR_INVALID,
                    "table door-set is a SET: overwrite and values are for MAP tables");
    refused_exactly(&s, FLOE_OP_ERASE, FLOE_BATCH_WANT_VALUES, keys, 24, NULL, 0, FLOE_ERR_INVALID,
                    "table door-set is a SET: overwrite and values are for MAP tables");
    /* the operation on the kind */
    refused_exactly(&s, FLOE_OP_GET, 0, keys, 8, NULL, 0, FLOE_ERR_UNSUPPORTED,
                    "get_by_id is for TREE tables; table door-set is a SET");
    refused(&s, FLOE_OP_INSERT, 0x40, keys, 24, NULL, 0, FLOE_ERR_INVALID, "unknown flags 0x40");
    /* which rule speaks first when several are broken: floed's order */
    refused_exactly(&s, FLOE_OP_INSERT, FLOE_BATCH_OVERWRITE, wide, 24, v, 24, FLOE_ERR_INVALID,
                    "table door-set: key 1048576 at index 2 does not fit in key_bits = 20 (must be below 2^20)");
    refused_exactly(&s, FLOE_OP_INSERT, FLOE_BATCH_OVERWRITE, keys, 24, v, 24, FLOE_ERR_INVALID,
                    "table door-set is a SET: values are for MAP tables");

    /* operations without keys */
    accepted(&s, FLOE_OP_REBUILD, 0, NULL, 0, NULL, 0, 0);
    accepted(&s, FLOE_OP_STATS, 0, NULL, 0, NULL, 0, 0);
    accepted(&s, FLOE_OP_SAVE, 0, NULL, 0, NULL, 0, 0);
    accepted(&s, FLOE_OP_COPY, 0, NULL, 0, NULL, 0, 0);

    /* a table of 64-bit keys takes any key */
    floe_spec s64 = s;
    s64.key_bits = 64;
    accepted(&s64, FLOE_OP_INSERT, 0, &huge, 8, NULL, 0, 1);
}
END_TEST

START_TEST(door_map)
{
    const floe_spec s = door_spec(FLOE_KIND_MAP);
    const uint64_t keys[2] = {1, 2}, wide[2] = {1, 1u << 20}, v[4] = {10, 20, 30, 40};
    accepted(&s, FLOE_OP_INSERT, 0, keys, 16, v, 16, 2);
    accepted(&s, FLOE_OP_INSERT, FLOE_BATCH_OVERWRITE | FLOE_BATCH_WANT_VALUES | FLOE_BATCH_WANT_IDS, keys, 16, v, 16,
             2);
    accepted(&s, FLOE_OP_FIND, FLOE_BATCH_WANT_VALUES | FLOE_BATCH_WANT_IDS, keys, 16, NULL, 0, 2);
    accepted(&s, FLOE_OP_ERASE, 0, keys, 16, NULL, 0, 2);
    accepted(&s, FLOE_OP_INSERT, 0, NULL, 0, NULL, 0, 0);

    /* a MAP insert carries value_bytes per key, no more, no fewer */
    refused_exactly(&s, FLOE_OP_INSERT, 0, keys, 16, v, 15, FLOE_ERR_INVALID,
                    "2 keys need 16 bytes of values (8 per key) in table door-map; got 15");
    refused_exactly(&s, FLOE_OP_INSERT, 0, keys, 16, v, 32, FLOE_ERR_INVALID,
                    "2 keys need 16 bytes of values (8 per key) in table door-map; got 32");
    refused_exactly(&s, FLOE_OP_INSERT, 0, keys, 16, NULL, 0, FLOE_ERR_INVALID,
                    "2 keys need 16 bytes of values (8 per key) in table door-map; got 0");
    refused_exactly(&s, FLOE_OP_INSERT, 0, keys, 16, NULL, 16, FLOE_ERR_INVALID,
                    "table door-map: 16 bytes of values announced but none given");
    /* ... and only an insert carries values */
    refused_exactly(&s, FLOE_OP_FIND, 0, keys, 16, v, 16, FLOE_ERR_INVALID,
                    "table door-map: values go with an insert only");
    refused_exactly(&s, FLOE_OP_ERASE, 0, keys, 16, v, 16, FLOE_ERR_INVALID,
                    "table door-map: values go with an insert only");
    /* keys as in a SET */
    refused_exactly(&s, FLOE_OP_INSERT, 0, wide, 16, v, 16, FLOE_ERR_INVALID,
                    "table door-map: key 1048576 at index 1 does not fit in key_bits = 20 (must be below 2^20)");
    refused_exactly(&s, FLOE_OP_INSERT, 0, keys, 12, v, 12, FLOE_ERR_INVALID,
                    "keys are 8 bytes each (little-endian u64); got 12 bytes, not a multiple of 8");
    refused_exactly(&s, FLOE_OP_GET, 0, keys, 8, NULL, 0, FLOE_ERR_UNSUPPORTED,
                    "get_by_id is for TREE tables; table door-map is a MAP");
}
END_TEST

START_TEST(door_tree)
{
    const floe_spec s = door_spec(FLOE_KIND_TREE);
    const uint32_t vec[6] = {1, 2, 3, 4, 5, 6};
    const uint64_t ids[2] = {0, 7}, v[2] = {1, 2};
    accepted(&s, FLOE_OP_INSERT, 0, vec, 24, NULL, 0, 2);
    accepted(&s, FLOE_OP_INSERT, FLOE_BATCH_WANT_IDS, vec, 12, NULL, 0, 1);
    accepted(&s, FLOE_OP_FIND, FLOE_BATCH_WANT_IDS, vec, 24, NULL, 0, 2);
    accepted(&s, FLOE_OP_GET, 0, ids, 16, NULL, 0, 2); /* ids: any u64 (ABSENT where none) */

    /* vectors of words x 4 bytes; ids of 8 */
    refused_exactly(&s, FLOE_OP_INSERT, 0, ids, 8, NULL, 0, FLOE_ERR_INVALID,
                    "table door-tree is a TREE of words = 3: keys are vectors of 3 little-endian u32 words (12 bytes "
                    "each); got 8 bytes, not a multiple of 12");
    refused_exactly(&s, FLOE_OP_FIND, 0, vec, 16, NULL, 0, FLOE_ERR_INVALID,
                    "table door-tree is a TREE of words = 3: keys are vectors of 3 little-endian u32 words (12 bytes "
                    "each); got 16 bytes, not a multiple of 12");
    refused_exactly(&s, FLOE_OP_GET, 0, vec, 12, NULL, 0, FLOE_ERR_INVALID,
                    "ids are 8 bytes each (little-endian u64); got 12 bytes, not a multiple of 8");
    refused_exactly(&s, FLOE_OP_INSERT, 0, NULL, 24, NULL, 0, FLOE_ERR_INVALID,
                    "table door-tree: no vectors given for 2 vectors");
    refused_exactly(&s, FLOE_OP_GET, 0, NULL, 16, NULL, 0, FLOE_ERR_INVALID, "table door-tree: no ids given for 2 ids");
    refused_exactly(&s, FLOE_OP_INSERT, 0, vec, TOO_MANY * 12, NULL, 0, FLOE_ERR_TOO_LARGE,
                    "table door-tree: a batch holds at most 2^32 - 1 vectors, got 4294967296");
    refused_exactly(&s, FLOE_OP_GET, 0, ids, TOO_MANY * 8, NULL, 0, FLOE_ERR_TOO_LARGE,
                    "table door-tree: a batch holds at most 2^32 - 1 ids, got 4294967296");

    /* what a TREE does not do */
    refused_exactly(&s, FLOE_OP_ERASE, 0, vec, 24, NULL, 0, FLOE_ERR_UNSUPPORTED,
                    "table door-tree is a TREE: TREE tables do not erase (vectors share their nodes; a visited set "
                    "only grows)");
    refused_exactly(&s, FLOE_OP_ERASE, 0, ids, 8, NULL, 0, FLOE_ERR_UNSUPPORTED,
                    "table door-tree is a TREE: TREE tables do not erase (vectors share their nodes; a visited set "
                    "only grows)");
    refused_exactly(&s, FLOE_OP_REBUILD, 0, NULL, 0, NULL, 0, FLOE_ERR_UNSUPPORTED,
                    "table door-tree is a TREE: TREE tables do not rebuild (ids must stay valid)");
    const char *no_values =
        "table door-tree is a TREE: it stores vectors only; values and overwrite are for MAP tables";
    refused_exactly(&s, FLOE_OP_INSERT, FLOE_BATCH_OVERWRITE, vec, 24, NULL, 0, FLOE_ERR_INVALID, no_values);
    refused_exactly(&s, FLOE_OP_INSERT, 0, vec, 24, v, 16, FLOE_ERR_INVALID, no_values);
    refused_exactly(&s, FLOE_OP_FIND, FLOE_BATCH_WANT_VALUES, vec, 24, NULL, 0, FLOE_ERR_INVALID, no_values);
    refused_exactly(&s, FLOE_OP_GET, 0, ids, 16, v, 16, FLOE_ERR_INVALID, no_values);
    /* floed's order: the operation, then values and flags, then the keys */
    refused_exactly(&s, FLOE_OP_INSERT, FLOE_BATCH_OVERWRITE, vec, 8, NULL, 0, FLOE_ERR_INVALID, no_values);
}
END_TEST

START_TEST(door_scan)
{
    const floe_spec set = door_spec(FLOE_KIND_SET), map = door_spec(FLOE_KIND_MAP), tree = door_spec(FLOE_KIND_TREE);
    const uint64_t keys[1] = {1};
    accepted(&set, FLOE_OP_SCAN, 0, NULL, 0, NULL, 0, 0);
    accepted(&map, FLOE_OP_SCAN, FLOE_BATCH_WANT_VALUES, NULL, 0, NULL, 0, 0);
    accepted(&tree, FLOE_OP_SCAN, FLOE_BATCH_WANT_IDS, NULL, 0, NULL, 0, 0);
    accepted(&tree, FLOE_OP_SCAN, 0, NULL, 0, NULL, 0, 0);
    refused_exactly(&set, FLOE_OP_SCAN, FLOE_BATCH_WANT_VALUES, NULL, 0, NULL, 0, FLOE_ERR_INVALID,
                    "table door-set is a SET: values in a scan are for MAP tables");
    refused_exactly(&tree, FLOE_OP_SCAN, FLOE_BATCH_WANT_VALUES, NULL, 0, NULL, 0, FLOE_ERR_INVALID,
                    "table door-tree is a TREE: values in a scan are for MAP tables");
    refused_exactly(&set, FLOE_OP_SCAN, FLOE_BATCH_WANT_IDS, NULL, 0, NULL, 0, FLOE_ERR_INVALID,
                    "ids in a scan are for TREE tables; table door-set is a SET");
    refused_exactly(&map, FLOE_OP_SCAN, FLOE_BATCH_WANT_IDS | FLOE_BATCH_WANT_VALUES, NULL, 0, NULL, 0,
                    FLOE_ERR_INVALID, "ids in a scan are for TREE tables; table door-map is a MAP");
    refused(&set, FLOE_OP_SCAN, 0, keys, 8, NULL, 0, FLOE_ERR_INVALID, "a scan takes no keys or values");
    refused(&map, FLOE_OP_SCAN, 0, NULL, 0, keys, 8, FLOE_ERR_INVALID, "a scan takes no keys or values");
    refused(&set, FLOE_OP_SCAN, 0x100, NULL, 0, NULL, 0, FLOE_ERR_INVALID, "unknown flags 0x100");
}
END_TEST

/* ---- the door in process: floe_table_run ------------------------------------------------------ */

#define PROBES 64

/* A table's state as batches see it: its figures and the answers (values,
 * ids) for probe keys or vectors. */
typedef struct state {
    floe_table_stats st;
    uint8_t res[PROBES];
    uint64_t vals[PROBES], ids[PROBES];
} state;

static void probe_vector(uint32_t *v, size_t i)
{
    for (int w = 0; w < 3; w++)
        v[w] = (uint32_t)(i * 7 + (size_t)w);
}

static void take_state(floe_table *t, state *f)
{
    memset(f, 0, sizeof *f);
    floe_batch s = {.op = FLOE_OP_STATS};
    ck_assert_int_eq(floe_table_run(t, &s), FLOE_OK);
    f->st = s.stats;
    const floe_kind kind = t->spec.kind;
    uint64_t keys[PROBES];
    uint32_t vec[PROBES * 3];
    for (size_t i = 0; i < PROBES; i++) {
        keys[i] = i * 1000;
        probe_vector(vec + i * 3, i);
    }
    floe_batch b = {.op = FLOE_OP_FIND, .n = PROBES, .results = f->res};
    if (kind != FLOE_KIND_ORDERED) /* an ORDERED table's keys have no ids */
        b.flags = FLOE_BATCH_WANT_IDS, b.ids = f->ids;
    if (kind == FLOE_KIND_TREE) {
        b.vectors = vec;
    } else {
        b.keys = keys;
        if (floe_spec_has_values(&t->spec))
            b.flags |= FLOE_BATCH_WANT_VALUES, b.values_out = f->vals;
    }
    ck_assert_int_eq(floe_table_run(t, &b), FLOE_OK);
}

static void same_state(const state *a, const state *b)
{
    ck_assert_uint_eq(a->st.keys, b->st.keys);
    ck_assert_uint_eq(a->st.tombstones, b->st.tombstones);
    ck_assert_uint_eq(a->st.generation, b->st.generation);
    ck_assert_uint_eq(a->st.nodes, b->st.nodes);
    ck_assert_uint_eq(a->st.orphan_nodes, b->st.orphan_nodes);
    for (int l = 0; l < FLOE_LEVELS; l++)
        ck_assert_uint_eq(a->st.level[l].used, b->st.level[l].used);
    ck_assert_mem_eq(a->res, b->res, sizeof a->res);
    ck_assert_mem_eq(a->vals, b->vals, sizeof a->vals);
    ck_assert_mem_eq(a->ids, b->ids, sizeof a->ids);
}

/* b is refused with want and a message naming words, its counts zero, and the table is as it was. */
static void run_refused(floe_table *t, floe_batch *b, floe_status want, const char *words)
{
    state before, after;
    take_state(t, &before);
    b->counts = (floe_answer_counts){7, 7, 7, 7, 7};
    floe_status st = floe_table_run(t, b);
    ck_assert_msg(st == want, "%s, op %d: %s (%s), expected %s", t->spec.name, (int)b->op, floe_status_name(st),
                  b->error.msg, floe_status_name(want));
    ck_assert_int_eq(b->status, want);
    ck_assert_msg(strstr(b->error.msg, words) != NULL, "message '%s' does not mention '%s'", b->error.msg, words);
    ck_assert_uint_eq(b->counts.inserted + b->counts.present + b->counts.absent + b->counts.full + b->counts.erased, 0);
    take_state(t, &after);
    same_state(&before, &after);
}

static floe_backend *door_backend(unsigned parts)
{
    floe_backend *in[2], *be;
    floe_errinfo err;
    ck_assert_int_eq(floe_backend_cpu_create(2, &in[0], &err), FLOE_OK);
    if (parts == 1)
        return in[0];
    ck_assert_int_eq(floe_backend_cpu_create(2, &in[1], &err), FLOE_OK);
    ck_assert_msg(floe_backend_partition_create(in, 2, parts, 2, &be, &err) == FLOE_OK, "%s", err.msg);
    return be;
}

static floe_table *door_table(floe_backend *be, floe_kind kind)
{
    floe_spec s = door_spec(kind);
    floe_table *t;
    floe_errinfo err;
    ck_assert_msg(floe_table_create(be, &s, &t, &err) == FLOE_OK, "%s", err.msg);
    return t;
}

static void set_refusals(floe_backend *be, floe_kind kind)
{
    floe_table *t = door_table(be, kind);
    const bool map = kind == FLOE_KIND_MAP;
    uint64_t keys[4] = {0, 1000, 2000, 3000}, vals[4] = {1, 2, 3, 4}, out[4], sk[8];
    uint8_t res[4];
    floe_batch in = {.op = FLOE_OP_INSERT, .keys = keys, .n = 2, .results = res};
    if (map)
        in.values = vals, in.values_len = 16;
    ck_assert_int_eq(floe_table_run(t, &in), FLOE_OK);
    ck_assert_uint_eq(in.counts.inserted, 2);

    /* a key >= 2^key_bits after valid ones: none of the batch applies */
    uint64_t wide[3] = {2000, 3000, 1u << 20};
    floe_batch b = {.op = FLOE_OP_INSERT, .keys = wide, .n = 3, .results = res};
    if (map)
        b.values = vals, b.values_len = 24;
    run_refused(t, &b, FLOE_ERR_INVALID, "key 1048576 at index 2 does not fit in key_bits = 20");
    b = (floe_batch){.op = FLOE_OP_FIND, .keys = wide, .n = 3, .results = res};
    run_refused(t, &b, FLOE_ERR_INVALID, "index 2");
    b = (floe_batch){.op = FLOE_OP_ERASE, .keys = wide, .n = 3, .results = res};
    run_refused(t, &b, FLOE_ERR_INVALID, "index 2");
    uint64_t huge = ~0ull;
    b = (floe_batch){.op = FLOE_OP_ERASE, .keys = &huge, .n = 1, .results = res};
    run_refused(t, &b, FLOE_ERR_INVALID, "key_bits");
    /* keys missing, too many (refused before a key is read) */
    b = (floe_batch){.op = FLOE_OP_FIND, .n = 2, .results = res};
    run_refused(t, &b, FLOE_ERR_INVALID, "no keys given for 2 keys");
    b = (floe_batch){.op = FLOE_OP_FIND, .keys = keys, .n = TOO_MANY, .results = res};
    run_refused(t, &b, FLOE_ERR_TOO_LARGE, "at most 2^32 - 1 keys");
    b = (floe_batch){.op = FLOE_OP_FIND, .keys = keys, .n = SIZE_MAX, .results = res};
    run_refused(t, &b, FLOE_ERR_TOO_LARGE, "at most 2^32 - 1 keys");
    b = (floe_batch){.op = FLOE_OP_FIND, .flags = 0x20, .keys = keys, .n = 1, .results = res};
    run_refused(t, &b, FLOE_ERR_INVALID, "unknown flags 0x20");
    /* the buffers */
    b = (floe_batch){.op = FLOE_OP_INSERT, .keys = keys + 2, .n = 2, .values = vals, .values_len = map ? 16 : 0};
    run_refused(t, &b, FLOE_ERR_INVALID, "no results buffer for 2 keys");
    b = (floe_batch){.op = FLOE_OP_FIND, .flags = FLOE_BATCH_WANT_IDS, .keys = keys, .n = 2, .results = res};
    run_refused(t, &b, FLOE_ERR_INVALID, "ids requested without an ids buffer");
    b = (floe_batch){.op = FLOE_OP_SCAN, .limit = 8};
    run_refused(t, &b, FLOE_ERR_INVALID, "a scan of up to 8 keys needs a buffer");
    b = (floe_batch){.op = FLOE_OP_GET, .keys = keys, .n = 1, .results = res};
    run_refused(t, &b, FLOE_ERR_UNSUPPORTED, "get_by_id is for TREE tables");
    b = (floe_batch){.op = FLOE_OP_SCAN, .flags = FLOE_BATCH_WANT_IDS, .limit = 8, .scan_keys = sk};
    run_refused(t, &b, FLOE_ERR_INVALID, "ids in a scan are for TREE tables");

    if (map) {
        b = (floe_batch){
            .op = FLOE_OP_INSERT, .keys = keys + 2, .n = 2, .values = vals, .values_len = 15, .results = res};
        run_refused(t, &b, FLOE_ERR_INVALID, "2 keys need 16 bytes of values (8 per key) in table door-map; got 15");
        b.values_len = 32;
        run_refused(t, &b, FLOE_ERR_INVALID, "bytes of values");
        b.values = NULL, b.values_len = 0;
        run_refused(t, &b, FLOE_ERR_INVALID, "bytes of values");
        b.values_len = 16;
        run_refused(t, &b, FLOE_ERR_INVALID, "announced but none given");
        b = (floe_batch){.op = FLOE_OP_FIND, .keys = keys, .n = 2, .values = vals, .values_len = 16, .results = res};
        run_refused(t, &b, FLOE_ERR_INVALID, "values go with an insert only");
        b = (floe_batch){.op = FLOE_OP_FIND, .flags = FLOE_BATCH_WANT_VALUES, .keys = keys, .n = 2, .results = res};
        run_refused(t, &b, FLOE_ERR_INVALID, "values requested without a values buffer");
        b = (floe_batch){.op = FLOE_OP_SCAN, .flags = FLOE_BATCH_WANT_VALUES, .limit = 8, .scan_keys = sk};
        run_refused(t, &b, FLOE_ERR_INVALID, "scan_values");
        /* want_values means nothing to an erase: no buffer needed (this one runs) */
        b = (floe_batch){.op = FLOE_OP_ERASE, .flags = FLOE_BATCH_WANT_VALUES, .keys = &huge, .n = 0, .results = res};
        ck_assert_int_eq(floe_table_run(t, &b), FLOE_OK);
    } else {
        b = (floe_batch){
            .op = FLOE_OP_INSERT, .keys = keys + 1, .n = 2, .values = vals, .values_len = 16, .results = res};
        run_refused(t, &b, FLOE_ERR_INVALID, "table door-set is a SET: values are for MAP tables");
        b = (floe_batch){.op = FLOE_OP_INSERT, .flags = FLOE_BATCH_OVERWRITE, .keys = keys + 1, .n = 2, .results = res};
        run_refused(t, &b, FLOE_ERR_INVALID, "table door-set is a SET: overwrite and values are for MAP tables");
        b = (floe_batch){.op = FLOE_OP_FIND,
                         .flags = FLOE_BATCH_WANT_VALUES,
                         .keys = keys,
                         .n = 2,
                         .results = res,
                         .values_out = out};
        run_refused(t, &b, FLOE_ERR_INVALID, "overwrite and values are for MAP tables");
        b = (floe_batch){
            .op = FLOE_OP_SCAN, .flags = FLOE_BATCH_WANT_VALUES, .limit = 4, .scan_keys = sk, .scan_values = out};
        run_refused(t, &b, FLOE_ERR_INVALID, "values in a scan are for MAP tables");
    }
    /* and the table still works: the refused keys are not there, the first two are */
    floe_batch f = {.op = FLOE_OP_FIND, .keys = keys, .n = 4, .results = res};
    ck_assert_int_eq(floe_table_run(t, &f), FLOE_OK);
    ck_assert_uint_eq(f.counts.present, 2);
    ck_assert_uint_eq(f.counts.absent, 2);
    floe_table_destroy(t);
}

static void tree_refusals(floe_backend *be)
{
    floe_table *t = door_table(be, FLOE_KIND_TREE);
    uint32_t vec[4 * 3];
    for (size_t i = 0; i < 4; i++)
        probe_vector(vec + i * 3, i);
    uint64_t ids[4], v[4] = {1, 2, 3, 4}, sk[8];
    uint8_t res[4];
    uint32_t back[4 * 3];
    floe_batch in = {
        .op = FLOE_OP_INSERT, .flags = FLOE_BATCH_WANT_IDS, .vectors = vec, .n = 2, .results = res, .ids = ids};
    ck_assert_int_eq(floe_table_run(t, &in), FLOE_OK);
    ck_assert_uint_eq(in.counts.inserted, 2);

    floe_batch b = {.op = FLOE_OP_ERASE, .vectors = vec, .n = 1, .results = res};
    run_refused(t, &b, FLOE_ERR_UNSUPPORTED, "TREE tables do not erase");
    b = (floe_batch){.op = FLOE_OP_ERASE, .keys = ids, .n = 1, .results = res};
    run_refused(t, &b, FLOE_ERR_UNSUPPORTED, "TREE tables do not erase");
    b = (floe_batch){.op = FLOE_OP_REBUILD};
    run_refused(t, &b, FLOE_ERR_UNSUPPORTED, "TREE tables do not rebuild");
    b = (floe_batch){.op = FLOE_OP_INSERT, .flags = FLOE_BATCH_OVERWRITE, .vectors = vec + 6, .n = 2, .results = res};
    run_refused(t, &b, FLOE_ERR_INVALID, "values and overwrite are for MAP tables");
    b = (floe_batch){.op = FLOE_OP_INSERT, .vectors = vec + 6, .n = 2, .values = v, .values_len = 16, .results = res};
    run_refused(t, &b, FLOE_ERR_INVALID, "values and overwrite are for MAP tables");
    b = (floe_batch){.op = FLOE_OP_FIND, .flags = FLOE_BATCH_WANT_VALUES, .vectors = vec, .n = 2, .results = res};
    run_refused(t, &b, FLOE_ERR_INVALID, "values and overwrite are for MAP tables");
    b = (floe_batch){.op = FLOE_OP_INSERT, .n = 2, .results = res};
    run_refused(t, &b, FLOE_ERR_INVALID, "no vectors given for 2 vectors");
    b = (floe_batch){.op = FLOE_OP_INSERT, .vectors = vec, .n = TOO_MANY, .results = res};
    run_refused(t, &b, FLOE_ERR_TOO_LARGE, "at most 2^32 - 1 vectors");
    b = (floe_batch){.op = FLOE_OP_INSERT, .vectors = vec + 6, .n = 2};
    run_refused(t, &b, FLOE_ERR_INVALID, "no results buffer for 2 vectors");
    b = (floe_batch){.op = FLOE_OP_GET, .keys = ids, .n = 2, .results = res};
    run_refused(t, &b, FLOE_ERR_INVALID, "get_by_id of 2 ids needs a vectors buffer");
    b = (floe_batch){.op = FLOE_OP_GET, .n = 2, .results = res, .vectors_out = back};
    run_refused(t, &b, FLOE_ERR_INVALID, "no ids given for 2 ids");
    b = (floe_batch){.op = FLOE_OP_SCAN, .flags = FLOE_BATCH_WANT_VALUES, .limit = 8, .scan_keys = sk};
    run_refused(t, &b, FLOE_ERR_INVALID, "table door-tree is a TREE: values in a scan are for MAP tables");
    b = (floe_batch){.op = FLOE_OP_SCAN, .limit = 8};
    run_refused(t, &b, FLOE_ERR_INVALID, "a scan of up to 8 ids needs a buffer");

    floe_batch g = {.op = FLOE_OP_GET, .keys = ids, .n = 2, .results = res, .vectors_out = back};
    ck_assert_int_eq(floe_table_run(t, &g), FLOE_OK);
    ck_assert_uint_eq(g.counts.present, 2);
    ck_assert_mem_eq(back, vec, 2 * 3 * 4);
    floe_table_destroy(t);
}

/* The operations of ORDERED tables, refused where they do not apply and
 * with bad bounds or buffers; an ORDERED table refuses what it does not do. */
static void ordered_refusals(floe_backend *be)
{
    floe_table *set = door_table(be, FLOE_KIND_SET), *t = door_table(be, FLOE_KIND_ORDERED);
    uint64_t keys[4] = {0, 1000, 2000, 3000}, vals[4] = {1, 2, 3, 4}, out[8], sk[8];
    uint8_t res[4];
    floe_batch in = {.op = FLOE_OP_INSERT, .keys = keys, .n = 3, .values = vals, .values_len = 24, .results = res};
    ck_assert_int_eq(floe_table_run(t, &in), FLOE_OK);
    ck_assert_uint_eq(in.counts.inserted, 3);
    in.values = NULL, in.values_len = 0;
    ck_assert_int_eq(floe_table_run(set, &in), FLOE_OK);

    /* range, successor and predecessor are an ORDERED table's */
    floe_batch b = {.op = FLOE_OP_RANGE, .lo = 0, .hi = 10, .limit = 8, .scan_keys = sk};
    run_refused(set, &b, FLOE_ERR_UNSUPPORTED, "range is for ORDERED tables; table door-set is a SET");
    b = (floe_batch){.op = FLOE_OP_SUCC, .keys = keys, .n = 2, .results = res, .keys_out = out};
    run_refused(set, &b, FLOE_ERR_UNSUPPORTED, "successor is for ORDERED tables");
    b = (floe_batch){.op = FLOE_OP_PRED, .keys = keys, .n = 2, .results = res, .keys_out = out};
    run_refused(set, &b, FLOE_ERR_UNSUPPORTED, "predecessor is for ORDERED tables");

    /* bounds: too wide, lo > hi; keys too wide */
    b = (floe_batch){.op = FLOE_OP_RANGE, .lo = 5, .hi = 1u << 20, .limit = 8, .scan_keys = sk};
    run_refused(t, &b, FLOE_ERR_INVALID, "upper bound 1048576 does not fit in key_bits = 20");
    b = (floe_batch){.op = FLOE_OP_RANGE, .lo = 2000, .hi = 1000, .limit = 8, .scan_keys = sk};
    run_refused(t, &b, FLOE_ERR_INVALID, "lower bound 2000 is above its upper bound 1000");
    uint64_t wide[2] = {1, 1u << 20};
    b = (floe_batch){.op = FLOE_OP_SUCC, .keys = wide, .n = 2, .results = res, .keys_out = out};
    run_refused(t, &b, FLOE_ERR_INVALID, "key 1048576 at index 1 does not fit in key_bits = 20");
    b = (floe_batch){.op = FLOE_OP_INSERT, .keys = wide, .n = 2, .values = vals, .values_len = 16, .results = res};
    run_refused(t, &b, FLOE_ERR_INVALID, "key 1048576 at index 1 does not fit");
    /* what an ORDERED table does not do, and buffers */
    b = (floe_batch){.op = FLOE_OP_GET, .keys = keys, .n = 1, .results = res, .vectors_out = (uint32_t *)out};
    run_refused(t, &b, FLOE_ERR_UNSUPPORTED, "get_by_id is for TREE tables; table door-ordered is a ORDERED");
    b = (floe_batch){.op = FLOE_OP_REBUILD};
    run_refused(t, &b, FLOE_ERR_UNSUPPORTED, "no slots to rebuild");
    b = (floe_batch){
        .op = FLOE_OP_FIND, .flags = FLOE_BATCH_WANT_IDS, .keys = keys, .n = 1, .results = res, .ids = out};
    run_refused(t, &b, FLOE_ERR_INVALID, "its keys have no slot ids");
    b = (floe_batch){.op = FLOE_OP_INSERT, .keys = keys + 3, .n = 1, .values = vals, .values_len = 4, .results = res};
    run_refused(t, &b, FLOE_ERR_INVALID, "1 keys need 8 bytes of values");
    b = (floe_batch){.op = FLOE_OP_SUCC, .keys = keys, .n = 2, .results = res};
    run_refused(t, &b, FLOE_ERR_INVALID, "successor of 2 keys needs a keys_out buffer");
    b = (floe_batch){.op = FLOE_OP_RANGE, .lo = 0, .hi = 10, .limit = 8};
    run_refused(t, &b, FLOE_ERR_INVALID, "a range of up to 8 keys needs a buffer");
    b = (floe_batch){.op = FLOE_OP_RANGE, .hi = 10, .limit = 8, .scan_keys = sk, .cursor = {0, 3}, .cursor_set = 1};
    run_refused(t, &b, FLOE_ERR_INVALID, "range cursor is from generation 3");
    b = (floe_batch){.op = FLOE_OP_SCAN, .limit = 8, .scan_keys = sk, .cursor = {1u << 20, 0}, .cursor_set = 1};
    run_refused(t, &b, FLOE_ERR_INVALID, "scan cursor position 1048576 is not a key of key_bits = 20");

    /* and what it does: neighbours (none beyond the ends), a descending range with values */
    uint64_t q[4] = {1, 2000, 2001, (1u << 20) - 1}, got_v[8];
    b = (floe_batch){.op = FLOE_OP_SUCC,
                     .flags = FLOE_BATCH_WANT_VALUES,
                     .keys = q,
                     .n = 4,
                     .results = res,
                     .keys_out = out,
                     .values_out = got_v};
    ck_assert_int_eq(floe_table_run(t, &b), FLOE_OK);
    ck_assert_mem_eq(res, ((uint8_t[]){FLOE_PRESENT, FLOE_PRESENT, FLOE_ABSENT, FLOE_ABSENT}), 4);
    ck_assert_uint_eq(out[0], 1000);
    ck_assert_uint_eq(got_v[0], 2);
    ck_assert_uint_eq(out[1], 2000);
    ck_assert_uint_eq(got_v[1], 3);
    ck_assert_uint_eq(b.counts.present, 2);
    ck_assert_uint_eq(b.counts.absent, 2);
    b.op = FLOE_OP_PRED;
    ck_assert_int_eq(floe_table_run(t, &b), FLOE_OK);
    ck_assert_mem_eq(res, ((uint8_t[]){FLOE_PRESENT, FLOE_PRESENT, FLOE_PRESENT, FLOE_PRESENT}), 4);
    ck_assert_uint_eq(out[0], 0);
    ck_assert_uint_eq(out[2], 2000);
    ck_assert_uint_eq(out[3], 2000);
    b = (floe_batch){.op = FLOE_OP_RANGE,
                     .flags = FLOE_BATCH_WANT_VALUES,
                     .lo = 0,
                     .hi = 1999,
                     .desc = true,
                     .limit = 1,
                     .scan_keys = sk,
                     .scan_values = got_v};
    ck_assert_int_eq(floe_table_run(t, &b), FLOE_OK);
    ck_assert_uint_eq(b.scan_n, 1);
    ck_assert_uint_eq(sk[0], 1000);
    ck_assert_uint_eq(got_v[0], 2);
    ck_assert(!b.scan_done);
    ck_assert_uint_eq(b.next.position, 0);
    b.hi = b.next.position, b.cursor_set = 1;
    ck_assert_int_eq(floe_table_run(t, &b), FLOE_OK);
    ck_assert_uint_eq(b.scan_n, 1);
    ck_assert_uint_eq(sk[0], 0);
    ck_assert(b.scan_done);
    floe_table_destroy(set);
    floe_table_destroy(t);
}

START_TEST(door_in_process_refuses)
{
    for (unsigned parts = 1; parts <= 3; parts += 2) { /* a whole table, and one in 3 parts */
        floe_backend *be = door_backend(parts);
        set_refusals(be, FLOE_KIND_SET);
        set_refusals(be, FLOE_KIND_MAP);
        tree_refusals(be);
        ordered_refusals(be);
        floe_backend_destroy(be);
    }
}
END_TEST

/* A batch large enough that the door checks its keys' widths across the
 * backend's threads (tables/backend.c): a key too wide anywhere, in the first
 * or last of its chunks or across a chunk's edge, is refused with the same
 * message as a small batch's, and changes nothing; the batch without it runs. */
START_TEST(door_large_batches)
{
    const size_t n = 300000; /* split into chunks, the last one partial */
    uint64_t *keys = malloc(n * 8), *vals = calloc(n, 8);
    uint8_t *res = malloc(n);
    ck_assert(keys && vals && res);
    for (size_t i = 0; i < n; i++)
        keys[i] = (i * 7919) % ((size_t)1 << 20); /* distinct below 2^20 (7919 is odd) */
    const size_t bad_at[] = {0, 65535, 65536, 131072, 250001, n - 1};
    for (unsigned parts = 1; parts <= 3; parts += 2) {
        floe_backend *be = door_backend(parts);
        for (int kind = FLOE_KIND_SET; kind <= FLOE_KIND_MAP; kind++) {
            floe_spec spec = door_spec((floe_kind)kind);
            spec.capacity = 2 * n;
            floe_table *t;
            floe_errinfo err;
            ck_assert_msg(floe_table_create(be, &spec, &t, &err) == FLOE_OK, "%s", err.msg);
            const bool map = kind == FLOE_KIND_MAP;
            for (size_t k = 0; k < sizeof bad_at / sizeof *bad_at; k++) {
                const size_t i = bad_at[k];
                const uint64_t good = keys[i];
                keys[i] = ((uint64_t)1 << 20) + i;
                char words[128];
                snprintf(words, sizeof words, "key %llu at index %zu does not fit in key_bits = 20",
                         (unsigned long long)keys[i], i);
                floe_batch b = {.op = k % 2 ? FLOE_OP_FIND : FLOE_OP_INSERT, .keys = keys, .n = n, .results = res};
                if (map && b.op == FLOE_OP_INSERT) {
                    b.values = vals;
                    b.values_len = n * 8;
                }
                run_refused(t, &b, FLOE_ERR_INVALID, words);
                keys[i] = good;
            }
            floe_batch b = {.op = FLOE_OP_INSERT, .keys = keys, .n = n, .results = res};
            if (map) {
                b.values = vals;
                b.values_len = n * 8;
            }
            ck_assert_int_eq(floe_table_run(t, &b), FLOE_OK);
            ck_assert_uint_eq(b.counts.inserted, n);
            floe_table_destroy(t);
        }
        floe_backend_destroy(be);
    }
    free(keys);
    free(vals);
    free(res);
}
END_TEST

/* FLOE_BATCH_CHECKED: the caller ran floe_request_check; the batch runs as
 * any other, and only its buffers are checked again. */
START_TEST(door_checked_batches_run)
{
    for (unsigned parts = 1; parts <= 3; parts += 2) {
        floe_backend *be = door_backend(parts);
        floe_table *set = door_table(be, FLOE_KIND_SET), *map = door_table(be, FLOE_KIND_MAP);
        floe_table *tree = door_table(be, FLOE_KIND_TREE);
        const floe_spec *ss = &set->spec;
        uint64_t keys[4] = {5, 6, 5, 7}, vals[4] = {50, 60, 51, 70}, ids[4], vout[4];
        uint8_t res[4];
        size_t n;
        ck_assert_int_eq(floe_request_check(ss, FLOE_OP_INSERT, 0, keys, sizeof keys, NULL, 0, &n, NULL), FLOE_OK);
        ck_assert_uint_eq(n, 4);
        floe_batch b = {.op = FLOE_OP_INSERT,
                        .flags = FLOE_BATCH_CHECKED | FLOE_BATCH_WANT_IDS,
                        .keys = keys,
                        .n = n,
                        .results = res,
                        .ids = ids};
        ck_assert_int_eq(floe_table_run(set, &b), FLOE_OK);
        ck_assert_uint_eq(b.counts.inserted, 3);
        ck_assert_uint_eq(b.counts.present, 1);
        ck_assert_uint_eq(res[2], FLOE_PRESENT);
        ck_assert_uint_eq(ids[2], ids[0]);
        floe_batch f = {.op = FLOE_OP_FIND, .flags = FLOE_BATCH_CHECKED, .keys = keys, .n = 4, .results = res};
        ck_assert_int_eq(floe_table_run(set, &f), FLOE_OK);
        ck_assert_uint_eq(f.counts.present, 4);
        floe_batch e = {.op = FLOE_OP_ERASE, .flags = FLOE_BATCH_CHECKED, .keys = keys + 3, .n = 1, .results = res};
        ck_assert_int_eq(floe_table_run(set, &e), FLOE_OK);
        ck_assert_uint_eq(e.counts.erased, 1);
        /* the buffers are still checked */
        floe_batch nores = {.op = FLOE_OP_FIND, .flags = FLOE_BATCH_CHECKED, .keys = keys, .n = 4};
        run_refused(set, &nores, FLOE_ERR_INVALID, "no results buffer");

        floe_batch m = {.op = FLOE_OP_INSERT,
                        .flags = FLOE_BATCH_CHECKED | FLOE_BATCH_OVERWRITE | FLOE_BATCH_WANT_VALUES,
                        .keys = keys,
                        .n = 4,
                        .values = vals,
                        .values_len = sizeof vals,
                        .results = res,
                        .values_out = vout};
        ck_assert_int_eq(floe_table_run(map, &m), FLOE_OK);
        ck_assert_uint_eq(m.counts.inserted, 3);
        floe_batch mf = {.op = FLOE_OP_FIND,
                         .flags = FLOE_BATCH_CHECKED | FLOE_BATCH_WANT_VALUES,
                         .keys = keys,
                         .n = 4,
                         .results = res,
                         .values_out = vout};
        ck_assert_int_eq(floe_table_run(map, &mf), FLOE_OK);
        ck_assert_uint_eq(vout[0], 51); /* the upsert's last value */
        ck_assert_uint_eq(vout[1], 60);
        ck_assert_uint_eq(vout[3], 70);

        uint32_t vec[2 * 3] = {1, 2, 3, 4, 5, 6}, back[2 * 3];
        floe_batch ti = {.op = FLOE_OP_INSERT,
                         .flags = FLOE_BATCH_CHECKED | FLOE_BATCH_WANT_IDS,
                         .vectors = vec,
                         .n = 2,
                         .results = res,
                         .ids = ids};
        ck_assert_int_eq(floe_table_run(tree, &ti), FLOE_OK);
        ck_assert_uint_eq(ti.counts.inserted, 2);
        floe_batch tg = {
            .op = FLOE_OP_GET, .flags = FLOE_BATCH_CHECKED, .keys = ids, .n = 2, .results = res, .vectors_out = back};
        ck_assert_int_eq(floe_table_run(tree, &tg), FLOE_OK);
        ck_assert_uint_eq(tg.counts.present, 2);
        ck_assert_mem_eq(back, vec, sizeof vec);
        uint64_t sk[8];
        floe_batch sc = {.op = FLOE_OP_SCAN, .flags = FLOE_BATCH_CHECKED, .limit = 8, .scan_keys = sk};
        size_t got = 0;
        do {
            ck_assert_int_eq(floe_table_run(set, &sc), FLOE_OK);
            got += sc.scan_n;
            sc.cursor = sc.next;
            sc.cursor_set = 1;
        } while (!sc.scan_done);
        ck_assert_uint_eq(got, 2); /* 5 and 6; 7 was erased */
        floe_table_destroy(tree);
        floe_table_destroy(map);
        floe_table_destroy(set);
        floe_backend_destroy(be);
    }
}
END_TEST

/* A refused batch completes in its place in the order, on the backend's
 * thread (never inside floe_table_submit), between batches that run. */
typedef struct order_log {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int seen[5];
    int n;
    pthread_t submitter;
    bool on_submitter;
} order_log;

static void log_done(floe_batch *b)
{
    order_log *o = b->user;
    pthread_mutex_lock(&o->lock);
    if (pthread_equal(pthread_self(), o->submitter))
        o->on_submitter = true;
    o->seen[o->n++] = (int)b->counts.inserted + 10 * (b->status != FLOE_OK); /* which batch: see below */
    pthread_cond_signal(&o->cv);
    pthread_mutex_unlock(&o->lock);
}

START_TEST(door_refused_in_order)
{
    for (unsigned parts = 1; parts <= 3; parts += 2) {
        floe_backend *be = door_backend(parts);
        floe_table *t = door_table(be, FLOE_KIND_SET);
        order_log o = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, pthread_self(), false};
        /* batch i inserts i fresh keys, or is refused (a key too wide): the log tells them apart */
        static uint64_t keys[5][4];
        uint8_t res[5][4];
        floe_batch b[5];
        const bool bad[5] = {false, true, false, true, false};
        for (int i = 0; i < 5; i++) {
            for (int k = 0; k < 4; k++)
                keys[i][k] = (uint64_t)(100 * i + k);
            if (bad[i])
                keys[i][1] = 1u << 20;
            b[i] = (floe_batch){.op = FLOE_OP_INSERT,
                                .keys = keys[i],
                                .n = bad[i] ? 4 : (size_t)i,
                                .results = res[i],
                                .done = log_done,
                                .user = &o};
        }
        for (int i = 0; i < 5; i++)
            floe_table_submit(t, &b[i]);
        pthread_mutex_lock(&o.lock);
        while (o.n < 5)
            pthread_cond_wait(&o.cv, &o.lock);
        pthread_mutex_unlock(&o.lock);
        ck_assert(!o.on_submitter);
        const int want[5] = {0, 10, 2, 10, 4};
        for (int i = 0; i < 5; i++) {
            ck_assert_int_eq(o.seen[i], want[i]);
            ck_assert_int_eq(b[i].status, bad[i] ? FLOE_ERR_INVALID : FLOE_OK);
        }
        floe_batch st = {.op = FLOE_OP_STATS};
        ck_assert_int_eq(floe_table_run(t, &st), FLOE_OK);
        ck_assert_uint_eq(st.stats.keys, 0 + 2 + 4);
        floe_table_destroy(t);
        floe_backend_destroy(be);
    }
}
END_TEST

/* ---- what the engine still checks itself ------------------------------------------------------- */

/* A fingerprint of the table's state: stats plus the answers for probe keys. */
typedef struct fingerprint {
    floe_table_stats st;
    uint8_t res[64];
    uint64_t vals[64];
} fingerprint;

static void take(iceberg *t, fingerprint *f)
{
    uint64_t probe[64];
    memset(f, 0, sizeof *f);
    for (int i = 0; i < 64; i++)
        probe[i] = (uint64_t)i * 1000;
    iceberg_stats(t, &f->st);
    bool map = t && iceberg_spec(t)->kind == FLOE_KIND_MAP;
    ck_assert_int_eq(iceberg_find(t, probe, 64, f->res, NULL, map ? f->vals : NULL, NULL, NULL), FLOE_OK);
}

static void same(const fingerprint *a, const fingerprint *b)
{
    ck_assert_uint_eq(a->st.keys, b->st.keys);
    ck_assert_uint_eq(a->st.tombstones, b->st.tombstones);
    ck_assert_uint_eq(a->st.generation, b->st.generation);
    for (int l = 0; l < FLOE_LEVELS; l++)
        ck_assert_uint_eq(a->st.level[l].used, b->st.level[l].used);
    ck_assert_mem_eq(a->res, b->res, sizeof a->res);
    ck_assert_mem_eq(a->vals, b->vals, sizeof a->vals);
}

/* Not rules of a kind but of the table's state: a cursor past the table, a rebuild too large. */
START_TEST(engine_refusals_change_nothing)
{
    floe_spec s = good_spec(FLOE_KIND_MAP);
    iceberg *t;
    ck_assert_int_eq(iceberg_create(&s, NULL, &t, NULL), FLOE_OK);
    uint64_t keys[4] = {0, 1000, 2000, 3000}, vals[4] = {1, 2, 3, 4}, out[4];
    uint8_t res[4];
    ck_assert_int_eq(iceberg_insert(t, keys, 2, vals, 16, 0, res, NULL, NULL, NULL, NULL), FLOE_OK);
    fingerprint before, after;
    take(t, &before);
    floe_errinfo err;
    floe_scan_pos far = {~0ull, 0}, next;
    size_t n;
    int done;
    ck_assert_int_eq(iceberg_scan(t, &far, 4, out, NULL, &n, &next, &done, &err), FLOE_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "past the table") != NULL, "%s", err.msg);
    ck_assert_int_eq(iceberg_rebuild(t, 40, 0, &err), FLOE_ERR_INVALID);
    take(t, &after);
    same(&before, &after);
    iceberg_destroy(t);
}
END_TEST

START_TEST(empty_batches)
{
    floe_spec s = good_spec(FLOE_KIND_SET);
    iceberg *t;
    ck_assert_int_eq(iceberg_create(&s, NULL, &t, NULL), FLOE_OK);
    floe_answer_counts c;
    ck_assert_int_eq(iceberg_insert(t, NULL, 0, NULL, 0, 0, NULL, NULL, NULL, &c, NULL), FLOE_OK);
    ck_assert_uint_eq(c.inserted + c.present + c.full, 0);
    ck_assert_int_eq(iceberg_find(t, NULL, 0, NULL, NULL, NULL, &c, NULL), FLOE_OK);
    ck_assert_int_eq(iceberg_erase(t, NULL, 0, NULL, &c, NULL), FLOE_OK);
    iceberg_destroy(t);
}
END_TEST

Suite *badinput_suite(void)
{
    Suite *s = suite_create("badinput");
    TCase *tc = tcase_create("badinput");
    tcase_add_test(tc, bad_specs_refused);
    tcase_add_test(tc, door_set);
    tcase_add_test(tc, door_map);
    tcase_add_test(tc, door_tree);
    tcase_add_test(tc, door_scan);
    tcase_add_test(tc, door_in_process_refuses);
    tcase_add_test(tc, door_checked_batches_run);
    tcase_add_test(tc, door_large_batches);
    tcase_add_test(tc, door_refused_in_order);
    tcase_add_test(tc, engine_refusals_change_nothing);
    tcase_add_test(tc, empty_batches);
    suite_add_tcase(s, tc);
    return s;
}
