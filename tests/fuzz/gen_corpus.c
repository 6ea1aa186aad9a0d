/*
 * gen_corpus.c - writes the generated seeds of the fuzz targets (make
 * fuzz-corpus): tests/fuzz/corpus/TARGET/gen-*.  Request frames of every
 * operation for the daemon, table files of each kind saved by the engine
 * at small sizes, typical CLI keys and vectors, and responses of every kind
 * in the order fuzz_response.c makes its calls.  Fixed seeds and contents:
 * a second run writes the same bytes.  Other files there (crash-*: inputs
 * that found a bug) are left alone.
 *
 *   fuzz-gen-corpus DIR    (DIR/daemon, DIR/tablefile, DIR/cli, DIR/response)
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "floe.pb-c.h"

static const char *dir;

static void die(const char *what)
{
    fprintf(stderr, "fuzz-gen-corpus: %s\n", what);
    exit(1);
}

/* ---- a growing byte buffer ---------------------------------------------------------------- */

typedef struct buf {
    unsigned char *p;
    size_t len, cap;
} buf;

static void put(buf *b, const void *data, size_t len)
{
    if (b->len + len > b->cap) {
        b->cap = (b->len + len) * 2 + 64;
        if (!(b->p = realloc(b->p, b->cap)))
            die("out of memory");
    }
    memcpy(b->p + b->len, data, len);
    b->len += len;
}

static void put_len(buf *b, size_t len)
{
    const unsigned char hdr[4] = {(unsigned char)(len >> 24), (unsigned char)(len >> 16), (unsigned char)(len >> 8),
                                  (unsigned char)len};
    put(b, hdr, 4);
}

static void save(const char *target, const char *name, const buf *b)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/gen-%s", dir, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b->p, 1, b->len, f) != b->len || fclose(f) != 0)
        die(path);
}

/* ---- requests (daemon) ------------------------------------------------------------------- */

static uint64_t next_id = 1;

static void req(buf *b, Floe__V1__Request *r)
{
    r->id = next_id++;
    size_t len = floe__v1__request__get_packed_size(r);
    unsigned char *tmp = malloc(len + 1);
    if (!tmp)
        die("out of memory");
    floe__v1__request__pack(r, tmp);
    put_len(b, len);
    put(b, tmp, len);
    free(tmp);
}

static void hello(buf *b, uint32_t version, const char *token)
{
    Floe__V1__Request r = FLOE__V1__REQUEST__INIT;
    Floe__V1__Hello h = FLOE__V1__HELLO__INIT;
    h.version = version;
    h.token = (char *)token;
    r.op_case = FLOE__V1__REQUEST__OP_HELLO;
    r.hello = &h;
    req(b, &r);
}

static void ping(buf *b)
{
    Floe__V1__Request r = FLOE__V1__REQUEST__INIT;
    Floe__V1__Ping p = FLOE__V1__PING__INIT;
    r.op_case = FLOE__V1__REQUEST__OP_PING;
    r.ping = &p;
    req(b, &r);
}

static void create(buf *b, const char *name, int kind, uint32_t key_bits, uint32_t value_bytes, uint32_t words,
                   uint64_t capacity, uint64_t memory, int grow)
{
    Floe__V1__Request r = FLOE__V1__REQUEST__INIT;
    Floe__V1__CreateTable ct = FLOE__V1__CREATE_TABLE__INIT;
    Floe__V1__TableSpec s = FLOE__V1__TABLE_SPEC__INIT;
    s.name = (char *)name;
    s.kind = (Floe__V1__TableKind)kind;
    s.key_bits = key_bits;
    s.value_bytes = value_bytes;
    s.words = words;
    s.capacity = capacity;
    s.memory = memory;
    s.grow = grow;
    s.backend = "cpu";
    ct.spec = &s;
    r.op_case = FLOE__V1__REQUEST__OP_CREATE_TABLE;
    r.create_table = &ct;
    req(b, &r);
}

static void named(buf *b, int op, const char *table)
{
    Floe__V1__Request r = FLOE__V1__REQUEST__INIT;
    Floe__V1__DropTable d = FLOE__V1__DROP_TABLE__INIT;
    Floe__V1__Stats st = FLOE__V1__STATS__INIT;
    Floe__V1__Snapshot sn = FLOE__V1__SNAPSHOT__INIT;
    Floe__V1__ListTables l = FLOE__V1__LIST_TABLES__INIT;
    Floe__V1__Info in = FLOE__V1__INFO__INIT;
    Floe__V1__Range rg = FLOE__V1__RANGE__INIT;
    r.op_case = (Floe__V1__Request__OpCase)op;
    d.table = st.table = sn.table = rg.table = (char *)table;
    rg.to = 100;
    switch (op) {
    case FLOE__V1__REQUEST__OP_DROP_TABLE:
        r.drop_table = &d;
        break;
    case FLOE__V1__REQUEST__OP_STATS:
        r.stats = &st;
        break;
    case FLOE__V1__REQUEST__OP_SNAPSHOT:
        r.snapshot = &sn;
        break;
    case FLOE__V1__REQUEST__OP_LIST_TABLES:
        r.list_tables = &l;
        break;
    case FLOE__V1__REQUEST__OP_INFO:
        r.info = &in;
        break;
    case FLOE__V1__REQUEST__OP_RANGE:
        r.range = &rg;
        break;
    default:
        die("named: operation");
    }
    req(b, &r);
}

/* Insert (op INSERT), find or erase of n keys from first, step apart (TREE: vectors). */
static void keys_op(buf *b, int op, const char *table, uint64_t first, uint64_t step, size_t n, uint32_t words,
                    uint32_t value_bytes, int overwrite, int want_ids, int want_values)
{
    const size_t kb = words ? (size_t)words * 4 : 8;
    unsigned char *keys = calloc(n + 1, kb), *values = calloc(n + 1, 8);
    if (!keys || !values)
        die("out of memory");
    for (size_t i = 0; i < n; i++) {
        uint64_t k = first + i * step;
        if (words)
            for (uint32_t w = 0; w < words; w++) {
                uint32_t x = w + 1 == words ? (uint32_t)k : w;
                memcpy(keys + i * kb + w * 4, &x, 4);
            }
        else
            memcpy(keys + i * 8, &k, 8);
        uint64_t v = k * 10 + 1;
        memcpy(values + i * value_bytes, &v, value_bytes);
    }
    Floe__V1__Request r = FLOE__V1__REQUEST__INIT;
    Floe__V1__Insert in = FLOE__V1__INSERT__INIT;
    Floe__V1__Find f = FLOE__V1__FIND__INIT;
    Floe__V1__Erase e = FLOE__V1__ERASE__INIT;
    ProtobufCBinaryData kd = {n * kb, keys}, vd = {n * value_bytes, values};
    r.op_case = (Floe__V1__Request__OpCase)op;
    if (op == FLOE__V1__REQUEST__OP_INSERT) {
        in.table = (char *)table;
        in.keys = kd;
        in.values = vd;
        in.overwrite = overwrite;
        in.want_ids = want_ids;
        r.insert = &in;
    } else if (op == FLOE__V1__REQUEST__OP_FIND) {
        f.table = (char *)table;
        f.keys = kd;
        f.want_ids = want_ids;
        f.want_values = want_values;
        r.find = &f;
    } else {
        e.table = (char *)table;
        e.keys = kd;
        r.erase = &e;
    }
    req(b, &r);
    free(keys);
    free(values);
}

static void scan(buf *b, const char *table, uint32_t limit, const void *cursor, size_t cursor_len, int want_values,
                 int want_ids)
{
    Floe__V1__Request r = FLOE__V1__REQUEST__INIT;
    Floe__V1__Scan s = FLOE__V1__SCAN__INIT;
    s.table = (char *)table;
    s.limit = limit;
    s.cursor.data = (uint8_t *)cursor;
    s.cursor.len = cursor_len;
    s.want_values = want_values;
    s.want_ids = want_ids;
    r.op_case = FLOE__V1__REQUEST__OP_SCAN;
    r.scan = &s;
    req(b, &r);
}

static void get_by_id(buf *b, const char *table, const uint64_t *ids, size_t n)
{
    Floe__V1__Request r = FLOE__V1__REQUEST__INIT;
    Floe__V1__GetById g = FLOE__V1__GET_BY_ID__INIT;
    g.table = (char *)table;
    g.ids.data = (uint8_t *)ids;
    g.ids.len = n * 8;
    r.op_case = FLOE__V1__REQUEST__OP_GET_BY_ID;
    r.get_by_id = &g;
    req(b, &r);
}

enum {
    INSERT = FLOE__V1__REQUEST__OP_INSERT,
    FIND = FLOE__V1__REQUEST__OP_FIND,
    ERASE = FLOE__V1__REQUEST__OP_ERASE,
    DROP = FLOE__V1__REQUEST__OP_DROP_TABLE,
    STATS = FLOE__V1__REQUEST__OP_STATS,
    LIST = FLOE__V1__REQUEST__OP_LIST_TABLES,
    INFO = FLOE__V1__REQUEST__OP_INFO,
    SNAPSHOT = FLOE__V1__REQUEST__OP_SNAPSHOT,
    RANGE = FLOE__V1__REQUEST__OP_RANGE,
};

static void daemon_seeds(void)
{
    buf b = {0};
    const unsigned char cursor[16] = {0};

    hello(&b, 1, "");
    ping(&b);
    save("daemon", "hello-ping", &b);

    b.len = 0;
    create(&b, "s", 1, 40, 0, 0, 1024, 0, 1);
    keys_op(&b, INSERT, "s", 1, 1, 64, 0, 0, 0, 1, 0);
    keys_op(&b, INSERT, "s", 32, 1, 64, 0, 0, 0, 0, 0);
    keys_op(&b, FIND, "s", 1, 7, 32, 0, 0, 0, 1, 0);
    keys_op(&b, ERASE, "s", 1, 3, 16, 0, 0, 0, 0, 0);
    scan(&b, "s", 16, NULL, 0, 0, 0);
    scan(&b, "s", 0, cursor, 16, 0, 0);
    named(&b, STATS, "s");
    named(&b, LIST, "");
    named(&b, INFO, "");
    named(&b, DROP, "s");
    save("daemon", "set", &b);

    b.len = 0;
    create(&b, "m", 2, 64, 8, 0, 256, 0, 0);
    keys_op(&b, INSERT, "m", 5, 1, 32, 0, 8, 0, 0, 0);
    keys_op(&b, INSERT, "m", 20, 1, 32, 0, 8, 1, 1, 0);
    keys_op(&b, FIND, "m", 1, 2, 32, 0, 0, 0, 1, 1);
    scan(&b, "m", 8, NULL, 0, 1, 0);
    keys_op(&b, ERASE, "m", 5, 1, 8, 0, 0, 0, 0, 0);
    named(&b, STATS, "m");
    named(&b, DROP, "m");
    save("daemon", "map8", &b);

    b.len = 0;
    create(&b, "m4", 2, 32, 4, 0, 100, 0, 1);
    keys_op(&b, INSERT, "m4", 1, 1000, 200, 0, 4, 0, 0, 0);
    keys_op(&b, FIND, "m4", 1, 1000, 8, 0, 0, 0, 0, 1);
    scan(&b, "m4", 64, NULL, 0, 1, 0);
    save("daemon", "map4-grow", &b);

    b.len = 0;
    create(&b, "t", 3, 0, 0, 4, 256, 0, 0);
    keys_op(&b, INSERT, "t", 1, 1, 16, 4, 0, 0, 1, 0);
    keys_op(&b, FIND, "t", 1, 2, 16, 4, 0, 0, 1, 0);
    const uint64_t ids[4] = {0, 1, 12345, ~0ull};
    get_by_id(&b, "t", ids, 4);
    scan(&b, "t", 8, NULL, 0, 0, 1);
    keys_op(&b, ERASE, "t", 1, 1, 2, 0, 0, 0, 0, 0);
    named(&b, STATS, "t");
    named(&b, DROP, "t");
    save("daemon", "tree", &b);

    b.len = 0;
    create(&b, "t8", 3, 0, 0, 8, 64, 1 << 20, 0);
    keys_op(&b, INSERT, "t8", 1, 3, 80, 8, 0, 0, 0, 0);
    scan(&b, "t8", 0, NULL, 0, 0, 0);
    named(&b, LIST, "");
    save("daemon", "tree-memory", &b);

    b.len = 0; /* a table too small: FULL answers */
    create(&b, "f", 1, 12, 0, 0, 16, 0, 0);
    keys_op(&b, INSERT, "f", 0, 1, 300, 0, 0, 0, 1, 0);
    save("daemon", "full", &b);

    b.len = 0; /* more requests than max-inflight, more keys than max-batch-keys */
    create(&b, "p", 1, 64, 0, 0, 4096, 0, 0);
    for (int i = 0; i < 12; i++)
        keys_op(&b, i % 3 == 2 ? FIND : INSERT, "p", (uint64_t)i * 50, 1, i % 4 == 0 ? 150 : 10, 0, 0, 0, 0, 0);
    save("daemon", "pipeline", &b);

    b.len = 0; /* max-tables, exists, invalid specs */
    create(&b, "a", 1, 64, 0, 0, 16, 0, 0);
    create(&b, "a", 1, 64, 0, 0, 16, 0, 0);
    create(&b, "b", 2, 64, 4, 0, 16, 0, 0);
    create(&b, "c", 3, 0, 0, 2, 16, 0, 0);
    create(&b, "d", 1, 8, 0, 0, 16, 0, 0);
    create(&b, "e", 1, 64, 0, 0, 16, 0, 0);
    create(&b, "bad", 2, 64, 3, 0, 16, 0, 0);
    create(&b, "bad", 3, 0, 0, 1, 16, 0, 0);
    create(&b, "bad", 1, 65, 0, 0, 16, 0, 0);
    create(&b, "huge", 1, 64, 0, 0, (uint64_t)1 << 40, 0, 0);
    create(&b, "", 1, 64, 0, 0, 16, 0, 0);
    named(&b, DROP, "a");
    named(&b, DROP, "a");
    named(&b, LIST, "");
    save("daemon", "tables", &b);

    b.len = 0; /* wrong keys and requests the server refuses */
    create(&b, "s", 1, 8, 0, 0, 64, 0, 0);
    keys_op(&b, INSERT, "s", 250, 1, 10, 0, 0, 0, 0, 0); /* keys above 2^8 */
    keys_op(&b, INSERT, "s", 1, 1, 4, 0, 8, 0, 0, 0);    /* values for a SET */
    keys_op(&b, FIND, "s", 1, 1, 4, 0, 0, 0, 0, 1);      /* values from a SET */
    keys_op(&b, FIND, "nope", 1, 1, 4, 0, 0, 0, 0, 0);
    get_by_id(&b, "s", ids, 2);
    scan(&b, "s", 4, cursor, 5, 0, 0);
    scan(&b, "s", 4, NULL, 0, 1, 1);
    named(&b, SNAPSHOT, "");
    named(&b, RANGE, "s");
    named(&b, STATS, "nope");
    put_len(&b, 3);
    put(&b, "\xff\xff\xff", 3); /* does not parse */
    put_len(&b, 2);
    put(&b, "\x08\x07", 2); /* no operation */
    save("daemon", "errors", &b);

    b.len = 0; /* a NUL in a table name */
    Floe__V1__Request r = FLOE__V1__REQUEST__INIT;
    Floe__V1__Stats st = FLOE__V1__STATS__INIT;
    st.table = "s";
    r.op_case = FLOE__V1__REQUEST__OP_STATS;
    r.stats = &st;
    r.id = 9;
    unsigned char packed[64];
    size_t len = floe__v1__request__pack(&r, packed);
    packed[len - 1] = '\0'; /* the name's one byte */
    put_len(&b, len);
    put(&b, packed, len);
    hello(&b, 7, "token");
    save("daemon", "nul-string", &b);

    b.len = 0;
    ping(&b);
    put_len(&b, 0); /* frame of length 0: closes */
    ping(&b);
    save("daemon", "zero-frame", &b);

    b.len = 0;
    ping(&b);
    put_len(&b, 1u << 30); /* above max-frame: closes */
    save("daemon", "too-large", &b);
    free(b.p);
}

/* ---- table files -------------------------------------------------------------------------- */

static floe_table *make_table(floe_backend *be, const char *name, floe_kind kind, uint32_t key_bits,
                              uint32_t value_bytes, uint32_t words, uint64_t capacity, uint64_t memory)
{
    floe_spec s;
    floe_spec_default(&s);
    snprintf(s.name, sizeof s.name, "%s", name);
    s.kind = kind;
    s.key_bits = key_bits;
    s.value_bytes = value_bytes;
    s.words = words;
    s.capacity = capacity;
    s.memory = memory;
    s.seed = 0x0123456789abcdefull;
    snprintf(s.backend, sizeof s.backend, "cpu");
    floe_table *t;
    floe_errinfo err;
    if (floe_table_create(be, &s, &t, &err) != FLOE_OK)
        die(err.msg);
    return t;
}

static void fill(floe_table *t, size_t n, size_t erase)
{
    const floe_spec *s = &t->spec;
    const uint32_t words = s->kind == FLOE_KIND_TREE ? s->words : 0;
    uint64_t *keys = calloc(n + 1, 8), *values = calloc(n + 1, 8);
    uint32_t *vectors = calloc((n + 1) * (words + 1), 4);
    uint8_t *results = calloc(n + 1, 1);
    if (!keys || !values || !vectors || !results)
        die("out of memory");
    const uint64_t mask = s->key_bits >= 64 ? ~0ull : (1ull << s->key_bits) - 1;
    for (size_t i = 0; i < n; i++) {
        keys[i] = (i * 0x9E3779B97F4A7C15ull + 1) & mask;
        values[i] = i + 100;
        for (uint32_t w = 0; w < words; w++)
            vectors[i * words + w] = w + 1 == words ? (uint32_t)i : (uint32_t)(i / 7 + w);
    }
    floe_batch b = {.op = FLOE_OP_INSERT, .n = n, .results = results};
    if (words) {
        b.vectors = vectors;
    } else {
        b.keys = keys;
        if (s->kind == FLOE_KIND_MAP) {
            for (size_t i = 0; i < n; i++) /* packed value_bytes each */
                memcpy((unsigned char *)values + i * s->value_bytes, &(uint64_t){i + 100}, s->value_bytes);
            b.values = values;
            b.values_len = n * s->value_bytes;
        }
    }
    if (floe_table_run(t, &b) != FLOE_OK)
        die(b.error.msg);
    if (erase) {
        floe_batch e = {.op = FLOE_OP_ERASE, .n = erase, .keys = keys, .results = results};
        if (floe_table_run(t, &e) != FLOE_OK)
            die(e.error.msg);
    }
    free(keys);
    free(values);
    free(vectors);
    free(results);
}

static void save_table(floe_table *t, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tablefile/gen-%s", dir, name);
    floe_batch b = {.op = FLOE_OP_SAVE, .path = path};
    if (floe_table_run(t, &b) != FLOE_OK)
        die(b.error.msg);
    floe_table_destroy(t);
}

static void tablefile_seeds(void)
{
    floe_backend *be;
    floe_errinfo err;
    if (floe_backend_cpu_create(1, &be, &err) != FLOE_OK)
        die(err.msg);
    floe_table *t = make_table(be, "set-empty", FLOE_KIND_SET, 16, 0, 0, 64, 0);
    save_table(t, "set-empty");
    t = make_table(be, "set16", FLOE_KIND_SET, 16, 0, 0, 200, 0);
    fill(t, 150, 20); /* with tombstones */
    save_table(t, "set16");
    t = make_table(be, "set64", FLOE_KIND_SET, 64, 0, 0, 100, 0);
    fill(t, 60, 0);
    save_table(t, "set64");
    t = make_table(be, "map4", FLOE_KIND_MAP, 24, 4, 0, 100, 0);
    fill(t, 80, 5);
    save_table(t, "map4");
    t = make_table(be, "map8", FLOE_KIND_MAP, 40, 8, 0, 64, 0);
    fill(t, 50, 0);
    save_table(t, "map8");
    t = make_table(be, "tree4", FLOE_KIND_TREE, 0, 0, 4, 64, 0);
    fill(t, 60, 0);
    save_table(t, "tree4");
    t = make_table(be, "tree2", FLOE_KIND_TREE, 0, 0, 2, 16, 0);
    fill(t, 10, 0);
    save_table(t, "tree2");
    floe_backend_destroy(be);
}

/* ---- CLI text ------------------------------------------------------------------------------- */

static void cli_seeds(void)
{
    /* the first byte picks the vector width: words = 2 + byte % 255 */
    static const struct {
        const char *name;
        unsigned char words;
        const char *text;
    } seeds[] = {
        {"key", 0, "123"},
        {"key-hex", 0, "0x1f"},
        {"key-max", 0, "18446744073709551615"},
        {"key-over", 0, "18446744073709551616"},
        {"key-octal", 0, "010"},
        {"key-value", 0, "5=7"},
        {"key-blank-value", 0, "5 0x10"},
        {"key-tab-value", 0, "5\t\t9"},
        {"vector2", 0, "1,2"},
        {"vector4", 2, "1,2,3,4"},
        {"vector-blanks", 2, " 1, 2 ,0x3,\t4 "},
        {"vector-wide", 255, "4294967295,0,1,2"},
        {"line-comment", 0, "  42   # a comment\r\n"},
        {"size-k", 0, "64K"},
        {"size-mib", 0, "16MiB"},
        {"size-gb", 0, "1GB"},
        {"size-t", 0, "2t"},
    };
    buf b = {0};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        b.len = 0;
        put(&b, &seeds[i].words, 1);
        put(&b, seeds[i].text, strlen(seeds[i].text));
        save("cli", seeds[i].name, &b);
    }
    free(b.p);
}

/* ---- responses ---------------------------------------------------------------------------- */

static void resp(buf *b, Floe__V1__Response *r)
{
    size_t len = floe__v1__response__get_packed_size(r);
    unsigned char *tmp = malloc(len + 1);
    if (!tmp)
        die("out of memory");
    floe__v1__response__pack(r, tmp);
    put_len(b, len);
    put(b, tmp, len);
    free(tmp);
}

/* Answers of n keys: results, ids, values (vb each), vectors (words each). */
static void key_answer(buf *b, uint64_t id, size_t n, int ids, unsigned vb, unsigned words)
{
    uint8_t results[16];
    uint64_t idv[16];
    uint8_t values[16 * 8];
    uint32_t vectors[16 * 8];
    for (size_t i = 0; i < n; i++) {
        results[i] = (uint8_t)(i % 3 == 0 ? 2 : 1);
        idv[i] = 1000 + i;
    }
    memset(values, 7, sizeof values);
    for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++)
        vectors[i] = (uint32_t)i;
    Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
    r.id = id;
    r.results.data = results;
    r.results.len = n;
    if (ids) {
        r.ids.data = (uint8_t *)idv;
        r.ids.len = n * 8;
    }
    r.values.data = values;
    r.values.len = n * vb;
    r.vectors.data = (uint8_t *)vectors;
    r.vectors.len = n * words * 4;
    r.inserted = 1;
    r.present = n - 1;
    resp(b, &r);
}

static void scan_answer(buf *b, uint64_t id, size_t n, unsigned key_bytes, unsigned vb, int ids)
{
    unsigned char keys[16 * 16] = {1, 2, 3}, values[16 * 8] = {4, 5}, cursor[16] = {9};
    uint64_t idv[16] = {1, 2, 3};
    Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
    Floe__V1__ScanReply sr = FLOE__V1__SCAN_REPLY__INIT;
    r.id = id;
    sr.keys.data = keys;
    sr.keys.len = n * key_bytes;
    sr.values.data = values;
    sr.values.len = n * vb;
    if (ids) {
        sr.ids.data = (uint8_t *)idv;
        sr.ids.len = n * 8;
    }
    sr.cursor.data = cursor;
    sr.cursor.len = 16;
    sr.done = n < 2;
    r.body_case = FLOE__V1__RESPONSE__BODY_SCAN;
    r.scan = &sr;
    resp(b, &r);
}

static void stats_body(Floe__V1__TableStats *ts, Floe__V1__TableSpec *spec, Floe__V1__LevelStats *lv,
                       Floe__V1__LevelStats **lvp, Floe__V1__StageTime *stt, Floe__V1__StageTime **stp)
{
    floe__v1__table_stats__init(ts);
    floe__v1__table_spec__init(spec);
    spec->name = "s";
    spec->kind = FLOE__V1__TABLE_KIND__SET;
    spec->key_bits = 40;
    spec->capacity = 1024;
    ts->spec = spec;
    ts->keys = 3;
    ts->backend = "cpu";
    for (int l = 0; l < 3; l++) {
        floe__v1__level_stats__init(&lv[l]);
        lv[l].slots = 64u >> l;
        lvp[l] = &lv[l];
    }
    ts->n_levels = 3;
    ts->levels = lvp;
    floe__v1__stage_time__init(stt);
    stt->name = "parse";
    stt->count = 1;
    stp[0] = stt;
    ts->n_stages = 1;
    ts->stages = stp;
}

static void status(buf *b, uint64_t id, Floe__V1__Status st, const char *error)
{
    Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
    r.id = id;
    r.status = st;
    r.error = (char *)error;
    resp(b, &r);
}

/* The answers to fuzz_response.c's calls, ids 1.. in its order, all well formed. */
static void response_seed_ok(buf *b)
{
    Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
    Floe__V1__HelloReply h = FLOE__V1__HELLO_REPLY__INIT;
    h.version = 1;
    h.server = "floed 0.1.0";
    h.max_frame = 1 << 20;
    h.max_batch_keys = 1 << 20;
    h.max_inflight = 64;
    h.backend = "cpu";
    r.id = 1;
    r.body_case = FLOE__V1__RESPONSE__BODY_HELLO;
    r.hello = &h;
    resp(b, &r);
    key_answer(b, 2, 3, 0, 0, 0); /* insert */
    key_answer(b, 3, 3, 0, 8, 0); /* MAP insert: old values */
    key_answer(b, 4, 3, 0, 4, 0); /* find: values */
    key_answer(b, 5, 3, 0, 0, 0); /* erase */
    key_answer(b, 6, 3, 1, 0, 0); /* TREE insert: ids */
    key_answer(b, 7, 3, 1, 0, 0); /* TREE find */
    key_answer(b, 8, 3, 0, 0, 4); /* get_by_id: vectors */
    scan_answer(b, 9, 3, 8, 0, 0);
    scan_answer(b, 10, 2, 8, 8, 0);
    scan_answer(b, 11, 3, 16, 0, 1);
    Floe__V1__TableStats ts;
    Floe__V1__TableSpec spec;
    Floe__V1__LevelStats lv[3], *lvp[3];
    Floe__V1__StageTime stt, *stp[1];
    stats_body(&ts, &spec, lv, lvp, &stt, stp);
    Floe__V1__Response s = FLOE__V1__RESPONSE__INIT;
    s.id = 12;
    s.body_case = FLOE__V1__RESPONSE__BODY_STATS;
    s.stats = &ts;
    resp(b, &s);
    Floe__V1__TableStats *list[2] = {&ts, &ts};
    Floe__V1__TableList tl = FLOE__V1__TABLE_LIST__INIT;
    tl.n_tables = 2;
    tl.tables = list;
    Floe__V1__Response l = FLOE__V1__RESPONSE__INIT;
    l.id = 13;
    l.body_case = FLOE__V1__RESPONSE__BODY_TABLES;
    l.tables = &tl;
    resp(b, &l);
    Floe__V1__InfoReply ir = FLOE__V1__INFO_REPLY__INIT;
    Floe__V1__OpCounters oc = FLOE__V1__OP_COUNTERS__INIT, *ocp[1] = {&oc};
    Floe__V1__StatusCount sc = FLOE__V1__STATUS_COUNT__INIT, *scp[1] = {&sc};
    Floe__V1__TableInfo ti = FLOE__V1__TABLE_INFO__INIT, *tip[1] = {&ti};
    oc.op = "insert";
    oc.requests = 5;
    sc.status = "ERR_FULL";
    sc.count = 1;
    ti.name = "s";
    ti.backend = "cpu";
    ir.version = "floed 0.1.0";
    ir.backend = "cpu";
    ir.n_ops = 1;
    ir.ops = ocp;
    ir.n_errors = 1;
    ir.errors = scp;
    ir.n_tables = 1;
    ir.tables = tip;
    Floe__V1__Response i = FLOE__V1__RESPONSE__INIT;
    i.id = 14;
    i.body_case = FLOE__V1__RESPONSE__BODY_INFO;
    i.info = &ir;
    resp(b, &i);
    for (uint64_t id = 15; id <= 18; id++) /* create, drop, snapshot, ping */
        status(b, id, FLOE__V1__STATUS__OK, NULL);
    /* the pipelined calls */
    key_answer(b, 19, 3, 1, 0, 0);
    key_answer(b, 20, 3, 0, 8, 0);
    key_answer(b, 21, 3, 1, 0, 0);
    key_answer(b, 22, 3, 0, 0, 4);
    key_answer(b, 23, 3, 0, 0, 0);
    status(b, 24, FLOE__V1__STATUS__OK, NULL);
}

static void response_seeds(void)
{
    buf b = {0};
    response_seed_ok(&b);
    save("response", "all-ok", &b);

    b.len = 0; /* hello, then every call refused */
    Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
    Floe__V1__HelloReply h = FLOE__V1__HELLO_REPLY__INIT;
    h.version = 1;
    h.server = "floed";
    r.id = 1;
    r.body_case = FLOE__V1__RESPONSE__BODY_HELLO;
    r.hello = &h;
    resp(&b, &r);
    for (uint64_t id = 2; id <= 24; id++)
        status(&b, id, (Floe__V1__Status)(1 + id % 10), "no");
    save("response", "errors", &b);

    b.len = 0; /* the server refuses the connection */
    status(&b, 0, FLOE__V1__STATUS__ERR_BUSY, "too many connections (max-connections)");
    save("response", "busy", &b);

    b.len = 0; /* answers that do not fit their calls */
    resp(&b, &r);
    key_answer(&b, 2, 2, 0, 0, 0);
    key_answer(&b, 3, 3, 0, 4, 0);
    key_answer(&b, 99, 3, 0, 0, 0);
    key_answer(&b, 5, 3, 0, 0, 0);
    key_answer(&b, 6, 3, 0, 0, 0);
    key_answer(&b, 7, 3, 1, 0, 0);
    key_answer(&b, 8, 3, 0, 0, 8);
    scan_answer(&b, 9, 16, 8, 0, 0);
    scan_answer(&b, 10, 2, 8, 4, 0);
    scan_answer(&b, 11, 3, 32, 0, 1);
    status(&b, 12, FLOE__V1__STATUS__OK, NULL);
    status(&b, 13, FLOE__V1__STATUS__OK, NULL);
    status(&b, 14, FLOE__V1__STATUS__ERR_INVALID, "unknown operation");
    put_len(&b, 3);
    put(&b, "\xff\xff\xff", 3);
    save("response", "mismatched", &b);
    free(b.p);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz-gen-corpus DIR\n");
        return 2;
    }
    dir = argv[1];
    const char *targets[] = {"daemon", "tablefile", "cli", "response"};
    for (int i = 0; i < 4; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, targets[i]);
        mkdir(dir, 0755);
        mkdir(path, 0755);
    }
    daemon_seeds();
    tablefile_seeds();
    cli_seeds();
    response_seeds();
    return 0;
}
