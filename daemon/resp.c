/*
 * resp.c - the Redis protocol port's translator (resp.h): RESP commands in,
 * floe.v1 Request frames out; Response frames in, RESP replies out.
 *
 * The bytes, commands parsed and replies written, are resp_wire.c's.
 *
 * Keys of Redis are tables here; members and fields are decimal integers
 * below 2^key_bits, values decimal integers.  Before a command touches a
 * table this connection has not seen, a STATS request asks what it is (its
 * kind and widths) and the connection waits for it: a write to a table of
 * another kind is refused (WRONGTYPE) before anything runs, and a write to
 * no table creates a growing SET or MAP of 64-bit keys first, as Redis
 * creates a key on its first write.
 */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "alloc.h"
#include "envelope.h"
#include "hostmem.h"
#include "resp.h"
#include "resp_wire.h"

#define RESP_MERGE_KEYS   (64u << 10) /* keys of one merged request */
#define RESP_TABLES       64          /* tables a connection remembers */
#define RESP_QUEUED_MAX   (64u << 10) /* replies queued behind one not answered yet: then reading waits */
#define RESP_NAME_MAX     64
#define RESP_SCAN_COUNT   10  /* SSCAN's COUNT by default, as Redis */
#define RESP_SCAN_GEN_AT  44  /* a cursor: (generation << 44 | position) + 1; 0 is the start and the end */
#define RESP_SCAN_RESTART "1" /* position 0: the walk starts again (the table grew under it) */

/* What a reply is made from: the commands and floed's own requests. */
enum {
    C_LOCAL,      /* rendered already */
    C_PROBE,      /* STATS of a table this connection has not seen: its kind */
    C_CREATE,     /* the create before a first write */
    C_SADD,       /* insert: INSERTED count */
    C_SREM,       /* erase: ERASED count */
    C_HDEL,       /* erase: ERASED count */
    C_SISMEMBER,  /* find: 1/0 */
    C_HEXISTS,    /* find: 1/0 */
    C_SMISMEMBER, /* find: an array of 1/0 */
    C_HGET,       /* find with values: a bulk or nil */
    C_HMGET,      /* find with values: an array */
    C_HSET,       /* insert, overwrite: INSERTED count */
    C_HSETNX,     /* insert: 1/0 */
    C_HINCRBY,    /* add: the value after */
    C_CARD,       /* stats: keys */
    C_SSCAN,      /* scan: cursor and members */
    C_DBSIZE,     /* list: tables */
    C_EXISTS,     /* list: how many of the names */
    C_TYPE,       /* list: the kind of one name */
    C_DEL,        /* drop: 1 if dropped; the last of a DEL says the sum */
    C_INFO,       /* info: sections */
    C_CONFIG_GET, /* config: name, value pairs */
    C_CONFIG_OK,  /* config set, rewrite: +OK */
    C_SHUTDOWN,   /* shutdown: nothing on success */
};

typedef struct seg {
    uint8_t cmd;
    uint32_t n; /* its keys */
} seg;

typedef struct pending {
    struct pending *next;
    uint64_t id;       /* its request's; 0: a local reply */
    uint8_t cmd;       /* C_* */
    bool answered;     /* rendered (text holds the reply) */
    bool last;         /* C_DEL: the last of its command */
    long long dropped; /* C_DEL: 1 if its table was dropped */
    char *text;        /* the reply; for C_EXISTS, C_TYPE, C_INFO, C_SSCAN: its arguments until then */
    size_t len;
    seg *segs; /* merged key commands: one reply each */
    size_t nsegs;
    char table[RESP_NAME_MAX + 1];
} pending;

typedef struct table_info {
    char name[RESP_NAME_MAX + 1];
    int kind; /* FLOE__V1__TABLE_KIND__*; 0: none of that name; -1: the probe failed (status) */
    floe_status status;
    unsigned key_bits, value_bytes;
    bool known; /* the probe answered */
    bool asked; /* a probe in flight */
} table_info;

struct resp {
    server *srv;
    session *s;
    int proto; /* 2 or 3 (HELLO 3) */
    uint64_t next_id;
    pending *head, *tail;
    size_t nsent;    /* requests not yet answered */
    size_t nqueued;  /* replies not yet written */
    bool stalled;    /* RESP_QUEUED_MAX of them: no command is read until half are written */
    size_t del_next; /* the name a DEL sends next (0: none under way) */
    bool waiting;    /* a probe is out: no command is read until it is answered */
    bool closing;
    long long del_sum; /* the tables a DEL being written dropped so far */
    table_info tables[RESP_TABLES];
    unsigned tables_next;
    resp_args a, peek;
    /* a command's keys and values, merged */
    uint64_t *keys, *vals;
    size_t nkeys, capkeys;
};

/* ---- the queue of replies ---------------------------------------------------------------- */

static pending *pending_push(resp *r, uint8_t cmd, uint64_t id)
{
    pending *p = floe_calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->cmd = cmd;
    p->id = id;
    r->nqueued++;
    if (r->tail)
        r->tail->next = p;
    else
        r->head = p;
    r->tail = p;
    return p;
}

static void pending_free(pending *p)
{
    free(p->text);
    free(p->segs);
    free(p);
}

/* A reply ready now, behind those before it. */
static bool push_local(resp *r, sbuf *b)
{
    pending *p = b->oom ? NULL : pending_push(r, C_LOCAL, 0);
    if (!p) {
        free(b->p);
        return false;
    }
    p->text = b->p;
    p->len = b->len;
    p->answered = true;
    return true;
}

static bool local_error(resp *r, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool local_error(resp *r, const char *code, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sbuf b = {0};
    sb_error(&b, code, msg);
    return push_local(r, &b);
}

static bool local_text(resp *r, const char *text)
{
    sbuf b = {0};
    sb_add(&b, text, strlen(text));
    return push_local(r, &b);
}

static bool local_int(resp *r, long long v)
{
    sbuf b = {0};
    sb_int(&b, v);
    return push_local(r, &b);
}

/* Writes the replies at the head that are ready. */
static void flush(resp *r, struct evbuffer *out)
{
    while (r->head && r->head->answered) {
        pending *p = r->head;
        r->head = p->next;
        if (!r->head)
            r->tail = NULL;
        r->nqueued--;
        if (p->cmd == C_DEL) { /* a DEL's replies are its last drop's: the sum, in order */
            r->del_sum += p->dropped;
            if (p->last) {
                char n[32];
                evbuffer_add(out, n, (size_t)snprintf(n, sizeof n, ":%lld\r\n", r->del_sum));
                r->del_sum = 0;
            }
        }
        if (p->len)
            evbuffer_add(out, p->text, p->len);
        pending_free(p);
    }
}

/* ---- the tables this connection has seen -------------------------------------------------- */

static table_info *table_find(resp *r, const char *name)
{
    for (unsigned i = 0; i < RESP_TABLES; i++)
        if (r->tables[i].name[0] && strcmp(r->tables[i].name, name) == 0)
            return &r->tables[i];
    return NULL;
}

static table_info *table_slot(resp *r, const char *name)
{
    table_info *t = table_find(r, name);
    if (t)
        return t;
    for (unsigned i = 0; i < RESP_TABLES; i++) { /* one whose probe is not out, round robin */
        t = &r->tables[r->tables_next++ % RESP_TABLES];
        if (!t->asked)
            break;
    }
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    return t;
}

static void table_forget(resp *r, const char *name)
{
    table_info *t = table_find(r, name);
    if (t && !t->asked)
        memset(t, 0, sizeof *t);
}

/* ---- frames ------------------------------------------------------------------------------- */

/* r's request with op set: packed into hostmem, its keys 8-byte aligned
 * (as conn.c places a frame read from a socket), and a reply of cmd queued
 * for its answer.  NULL p: out of memory. */
static pending *send_request(resp *r, Floe__V1__Request *req, uint8_t cmd, unsigned char **mem, unsigned char **bytes,
                             uint32_t *len)
{
    req->id = r->next_id++;
    const size_t n = floe__v1__request__get_packed_size(req);
    unsigned char *buf = hostmem_get(r->srv->mem, n + 8);
    if (!buf)
        return NULL;
    floe__v1__request__pack(req, buf);
    size_t at, pad = 0;
    if (envelope_keys_at(buf, n, &at) && (pad = (8 - at % 8) % 8))
        memmove(buf + pad, buf, n);
    pending *p = pending_push(r, cmd, req->id);
    if (!p) {
        hostmem_put(r->srv->mem, buf);
        return NULL;
    }
    *mem = buf;
    *bytes = buf + pad;
    *len = (uint32_t)n;
    r->nsent++;
    return p;
}

/* send_request for a request about table name: its reply knows the table. */
static pending *send_on_table(resp *r, Floe__V1__Request *req, uint8_t cmd, const char *name, unsigned char **mem,
                              unsigned char **bytes, uint32_t *len)
{
    pending *p = send_request(r, req, cmd, mem, bytes, len);
    if (p)
        snprintf(p->table, sizeof p->table, "%s", name);
    return p;
}

/* ---- commands ---------------------------------------------------------------------------- */

typedef struct out_frame {
    unsigned char **mem, **bytes;
    uint32_t *len;
} out_frame;

/* What a command did: replied locally (or nothing), sent a frame, must wait, closes. */
typedef enum { DONE, SENT, WAIT, CLOSE, OOM } cmd_rc;

typedef struct resp_command resp_command;
typedef cmd_rc (*cmd_fn)(resp *r, const resp_command *c, const unsigned char *in, size_t len, size_t *used,
                         out_frame *o);

#define F_ANY_TIME 1u /* before AUTH too */
#define F_TABLE    2u /* its argv[1] names a table this connection must know */
#define F_WRITE    4u /* creates its table if there is none */
#define F_SET      8u /* of SET tables */
#define F_MAP      16u

struct resp_command {
    const char *name;
    int arity; /* as Redis: n exactly, -n at least n */
    unsigned flags;
    uint8_t cmd; /* C_* of a key command */
    cmd_fn run;
};

static bool name_ok(const resp_args *a, char *name)
{
    if (a->len[1] == 0 || a->len[1] > RESP_NAME_MAX)
        return false;
    for (size_t i = 0; i < a->len[1]; i++) {
        const unsigned char ch = a->v[1][i];
        if (!isalnum(ch) && ch != '_' && ch != '.' && ch != '-')
            return false;
    }
    memcpy(name, a->v[1], a->len[1]);
    name[a->len[1]] = 0;
    return true;
}

static bool grow_keys(resp *r, size_t n)
{
    if (n <= r->capkeys)
        return true;
    size_t cap = r->capkeys ? r->capkeys : 64;
    while (cap < n)
        cap *= 2;
    uint64_t *k = floe_realloc(r->keys, cap * 8);
    if (!k)
        return false;
    r->keys = k;
    uint64_t *v = floe_realloc(r->vals, cap * 8);
    if (!v)
        return false;
    r->vals = v;
    r->capkeys = cap;
    return true;
}

/* The members (or fields) a[from, to) step apart into r->keys from r->nkeys,
 * and with values the argument after each into r->vals: false after
 * queueing the error (nothing is sent). */
static bool take_members(resp *r, const resp_args *a, size_t from, size_t step, bool values, const table_info *t)
{
    const unsigned kb = t->key_bits ? t->key_bits : 64;
    const unsigned vb = t->value_bytes ? t->value_bytes : 8;
    if (!grow_keys(r, r->nkeys + (a->argc - from) / step + 1))
        return false;
    size_t n = r->nkeys;
    for (size_t i = from; i + (values ? 1 : 0) < a->argc; i += step) {
        uint64_t k;
        if (!resp_u64(a->v[i], a->len[i], &k) || (kb < 64 && k >> kb)) {
            local_error(r, "ERR",
                        "member '%.*s' is not a decimal integer below 2^%u (members and fields of table '%s' are its "
                        "%u-bit keys)",
                        (int)(a->len[i] > 40 ? 40 : a->len[i]), (const char *)a->v[i], kb, t->name, kb);
            return false;
        }
        if (values) {
            int64_t v;
            if (!resp_i64(a->v[i + 1], a->len[i + 1], &v) || (vb == 4 && (v < INT32_MIN || v > (int64_t)UINT32_MAX))) {
                local_error(r, "ERR", "value is not an integer or out of range (values of table '%s' are %u-byte)",
                            t->name, vb);
                return false;
            }
            r->vals[n] = (uint64_t)v;
        }
        r->keys[n++] = k;
    }
    r->nkeys = n;
    return true;
}

static void pack_values(const resp *r, unsigned vb, unsigned char *out)
{
    for (size_t i = 0; i < r->nkeys; i++) {
        const uint64_t v = r->vals[i];
        for (unsigned b = 0; b < vb; b++)
            out[i * vb + b] = (unsigned char)(v >> (8 * b));
    }
}

/* The frame of a key command's request: keys r->keys (little-endian, as the host's). */
static cmd_rc send_keys(resp *r, uint8_t cmd, const table_info *t, const seg *segs, size_t nsegs, out_frame *o)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    char *table = (char *)t->name;
    ProtobufCBinaryData keys = {r->nkeys * 8, (uint8_t *)r->keys};
    const unsigned vb = t->value_bytes ? t->value_bytes : 8;
    unsigned char *vals = NULL;
    Floe__V1__Insert ins = FLOE__V1__INSERT__INIT;
    Floe__V1__Find fd = FLOE__V1__FIND__INIT;
    Floe__V1__Erase er = FLOE__V1__ERASE__INIT;
    Floe__V1__Add ad = FLOE__V1__ADD__INIT;
    if (cmd == C_HSET || cmd == C_HSETNX || cmd == C_HINCRBY) {
        if (!(vals = malloc(r->nkeys * vb + 1)))
            return OOM;
        pack_values(r, vb, vals);
    }
    switch (cmd) {
    case C_SADD:
    case C_HSET:
    case C_HSETNX:
        ins.table = table;
        ins.keys = keys;
        if (vals)
            ins.values = (ProtobufCBinaryData){r->nkeys * vb, vals};
        ins.overwrite = cmd == C_HSET;
        req.op_case = FLOE__V1__REQUEST__OP_INSERT;
        req.insert = &ins;
        break;
    case C_HINCRBY:
        ad.table = table;
        ad.keys = keys;
        ad.deltas = (ProtobufCBinaryData){r->nkeys * vb, vals};
        req.op_case = FLOE__V1__REQUEST__OP_ADD;
        req.add = &ad;
        break;
    case C_SREM:
    case C_HDEL:
        er.table = table;
        er.keys = keys;
        req.op_case = FLOE__V1__REQUEST__OP_ERASE;
        req.erase = &er;
        break;
    default: /* finds */
        fd.table = table;
        fd.keys = keys;
        fd.want_values = cmd == C_HGET || cmd == C_HMGET;
        req.op_case = FLOE__V1__REQUEST__OP_FIND;
        req.find = &fd;
        break;
    }
    pending *p = send_on_table(r, &req, cmd, t->name, o->mem, o->bytes, o->len);
    free(vals);
    if (!p)
        return OOM;
    p->segs = floe_malloc(nsegs * sizeof *segs);
    if (!p->segs)
        return OOM;
    memcpy(p->segs, segs, nsegs * sizeof *segs);
    p->nsegs = nsegs;
    return SENT;
}

/* Where a key command's members start, how far apart, and whether values follow each. */
static void member_layout(uint8_t cmd, size_t *from, size_t *step, bool *values)
{
    *from = 2;
    *step = cmd == C_HSET || cmd == C_HSETNX || cmd == C_HINCRBY ? 2 : 1;
    *values = cmd == C_HSET || cmd == C_HSETNX || cmd == C_HINCRBY;
}

/* The empty answer of a read on no table, as Redis gives for a missing key. */
static void render_empty(sbuf *b, uint8_t cmd, size_t n, int proto)
{
    switch (cmd) {
    case C_SMISMEMBER:
        sb_array(b, n);
        for (size_t i = 0; i < n; i++)
            sb_int(b, 0);
        break;
    case C_HGET:
        sb_nil(b, proto);
        break;
    case C_HMGET:
        sb_array(b, n);
        for (size_t i = 0; i < n; i++)
            sb_nil(b, proto);
        break;
    case C_SSCAN:
        sb_array(b, 2);
        sb_str(b, "0");
        sb_array(b, 0);
        break;
    default: /* counts, 1/0 */
        sb_int(b, 0);
        break;
    }
}

static bool is_write(uint8_t cmd)
{
    return cmd == C_SADD || cmd == C_HSET || cmd == C_HSETNX || cmd == C_HINCRBY;
}

/* SADD, SREM, SISMEMBER, SMISMEMBER, HSET, HSETNX, HGET, HMGET, HDEL,
 * HEXISTS, HINCRBY: one request for this command and those of the same kind
 * on the same table right behind it in the input. */
static cmd_rc run_keys(resp *r, const resp_command *c, const unsigned char *in, size_t len, size_t *used, out_frame *o,
                       const table_info *t)
{
    const resp_args *a = &r->a;
    size_t from, step;
    bool values;
    member_layout(c->cmd, &from, &step, &values);
    if (c->cmd == C_HSET && (a->argc - 2) % 2) {
        local_error(r, "ERR", "wrong number of arguments for 'hset' command");
        return DONE;
    }
    r->nkeys = 0;
    if (!take_members(r, a, from, step, values, t))
        return DONE;
    seg one = {c->cmd, (uint32_t)r->nkeys};
    seg *segs = &one, *many = NULL;
    size_t nsegs = 1, capsegs = 1;
    /* merge: commands of the same kind and table that follow (not HSET, HINCRBY: a field twice in one batch
     * would not be applied in order) */
    const bool merges = c->cmd != C_HSET && c->cmd != C_HINCRBY;
    while (merges && r->nkeys < RESP_MERGE_KEYS) {
        size_t more;
        char err[128];
        if (resp_parse(in + *used, len - *used, LIVE(r->srv, max_frame), &r->peek, &more, err, sizeof err) != 1)
            break;
        const resp_args *b = &r->peek;
        if (b->argc != a->argc && c->cmd != C_SADD && c->cmd != C_SREM && c->cmd != C_SMISMEMBER && c->cmd != C_HMGET &&
            c->cmd != C_HDEL)
            break;
        if (b->argc < 3 || b->len[0] != a->len[0] ||
            strncasecmp((const char *)b->v[0], (const char *)a->v[0], a->len[0]) || b->len[1] != strlen(t->name) ||
            memcmp(b->v[1], t->name, b->len[1]))
            break;
        if (c->cmd == C_HSETNX && b->argc != 4)
            break;
        const size_t before = r->nkeys;
        /* a member that does not parse: leave that command to be answered on its own */
        bool fine = true;
        for (size_t i = from; i < b->argc && fine; i += step) {
            uint64_t k;
            fine = resp_u64(b->v[i], b->len[i], &k) && !(t->key_bits && t->key_bits < 64 && k >> t->key_bits);
            if (fine && c->cmd == C_HSETNX) {
                int64_t v;
                fine = resp_i64(b->v[i + 1], b->len[i + 1], &v) &&
                       !(t->value_bytes == 4 && (v < INT32_MIN || v > (int64_t)UINT32_MAX));
            }
        }
        if (!fine)
            break;
        if (!take_members(r, b, from, step, values, t))
            break;
        if (nsegs == capsegs) {
            capsegs *= 2;
            seg *g = floe_realloc(many, capsegs * sizeof *g);
            if (!g) {
                r->nkeys = before;
                break;
            }
            if (!many)
                g[0] = one;
            many = segs = g;
        }
        segs[nsegs++] = (seg){c->cmd, (uint32_t)(r->nkeys - before)};
        *used += more;
    }
    const cmd_rc rc = send_keys(r, c->cmd, t, segs, nsegs, o);
    free(many);
    return rc;
}

/* The table of a command that names one: known (run the command), or
 * asked about (WAIT, a frame sent), or created first (SENT). */
static cmd_rc with_table(resp *r, const resp_command *c, const unsigned char *in, size_t len, size_t *used,
                         out_frame *o)
{
    const resp_args *a = &r->a;
    char name[RESP_NAME_MAX + 1];
    if (!name_ok(a, name)) {
        local_error(r, "ERR",
                    "key '%.*s' cannot name a table: floe's keys are tables, named by 1 to 64 of A-Z a-z 0-9 _ . -",
                    (int)(a->len[1] > 64 ? 64 : a->len[1]), (const char *)a->v[1]);
        return DONE;
    }
    table_info *t = table_find(r, name);
    if (!t || !t->known) {
        if (t && t->asked)
            return WAIT;
        t = table_slot(r, name);
        Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
        Floe__V1__Stats st = FLOE__V1__STATS__INIT;
        st.table = t->name;
        req.op_case = FLOE__V1__REQUEST__OP_STATS;
        req.stats = &st;
        pending *p = send_on_table(r, &req, C_PROBE, name, o->mem, o->bytes, o->len);
        if (!p)
            return OOM;
        p->answered = false;
        t->asked = true;
        r->waiting = true;
        *used = 0; /* read again once known */
        return SENT;
    }
    const int want = c->flags & F_SET ? FLOE__V1__TABLE_KIND__SET : FLOE__V1__TABLE_KIND__MAP;
    if (t->kind < 0) { /* the look at it failed: say why, and look again next time */
        local_error(r, t->status == FLOE_ERR_UNAUTHENTICATED ? "NOAUTH" : "ERR", "table '%s': %s", name,
                    floe_status_name(t->status));
        table_forget(r, name);
        return DONE;
    }
    if (!t->kind) {
        if (!(c->flags & F_WRITE)) {
            sbuf b = {0};
            render_empty(&b, c->cmd, c->cmd == C_SMISMEMBER || c->cmd == C_HMGET ? a->argc - 2 : 1, r->proto);
            push_local(r, &b);
            return DONE;
        }
        /* created as Redis creates a key: growing, 64-bit keys (and values) */
        Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
        Floe__V1__CreateTable ct = FLOE__V1__CREATE_TABLE__INIT;
        Floe__V1__TableSpec spec = FLOE__V1__TABLE_SPEC__INIT;
        spec.name = t->name;
        spec.kind = want;
        spec.key_bits = 64;
        spec.value_bytes = want == FLOE__V1__TABLE_KIND__MAP ? 8 : 0;
        spec.grow = true;
        ct.spec = &spec;
        req.op_case = FLOE__V1__REQUEST__OP_CREATE_TABLE;
        req.create_table = &ct;
        if (!send_on_table(r, &req, C_CREATE, name, o->mem, o->bytes, o->len))
            return OOM;
        t->kind = want;
        t->key_bits = 64;
        t->value_bytes = spec.value_bytes;
        *used = 0; /* the command runs next, on the new table */
        return SENT;
    }
    if (t->kind != want) {
        local_error(r, "WRONGTYPE", "Operation against a key holding the wrong kind of value (table '%s' is a %s)",
                    name, resp_kind_word(t->kind));
        return DONE;
    }
    if (c->cmd == C_CARD || c->cmd == C_SSCAN) {
        Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
        Floe__V1__Stats st = FLOE__V1__STATS__INIT;
        Floe__V1__Scan sc = FLOE__V1__SCAN__INIT;
        uint8_t cursor[16];
        char *match = NULL;
        if (c->cmd == C_CARD) {
            st.table = t->name;
            req.op_case = FLOE__V1__REQUEST__OP_STATS;
            req.stats = &st;
        } else {
            uint64_t cur, count = RESP_SCAN_COUNT;
            if (!resp_u64(a->v[2], a->len[2], &cur)) {
                local_error(r, "ERR", "invalid cursor");
                return DONE;
            }
            for (size_t i = 3; i < a->argc; i += 2) {
                if (i + 1 < a->argc && resp_arg_is(a, i, "COUNT") && resp_u64(a->v[i + 1], a->len[i + 1], &count) &&
                    count >= 1) {
                    continue;
                } else if (i + 1 < a->argc && resp_arg_is(a, i, "MATCH")) {
                    free(match);
                    match = floe_malloc(a->len[i + 1] + 1);
                    if (!match)
                        return OOM;
                    resp_arg_str(a, i + 1, match, a->len[i + 1] + 1);
                } else {
                    free(match);
                    local_error(r, "ERR", "syntax error");
                    return DONE;
                }
            }
            sc.table = t->name;
            const uint64_t pos = cur ? (cur - 1) & ((1ull << RESP_SCAN_GEN_AT) - 1) : 0;
            if (pos) { /* position 0 is the start, of whatever generation (RESP_SCAN_RESTART) */
                const uint64_t gen = (cur - 1) >> RESP_SCAN_GEN_AT;
                memcpy(cursor, &pos, 8);
                memcpy(cursor + 8, &gen, 8);
                sc.cursor = (ProtobufCBinaryData){16, cursor};
            }
            sc.limit = count > 65536 ? 65536 : (uint32_t)count;
            req.op_case = FLOE__V1__REQUEST__OP_SCAN;
            req.scan = &sc;
        }
        pending *p = send_on_table(r, &req, c->cmd, name, o->mem, o->bytes, o->len);
        if (!p) {
            free(match);
            return OOM;
        }
        p->text = match;
        return SENT;
    }
    return run_keys(r, c, in, len, used, o, t);
}

static cmd_rc cmd_ping(resp *r, const resp_command *c, const unsigned char *in, size_t len, size_t *used, out_frame *o)
{
    const resp_args *a = &r->a;
    if (a->argc == 2) {
        sbuf b = {0};
        sb_bulk(&b, a->v[1], a->len[1]);
        push_local(r, &b);
    } else if (a->argc > 2) {
        local_error(r, "ERR", "wrong number of arguments for 'ping' command");
    } else {
        local_text(r, "+PONG\r\n");
    }
    return DONE;
}

static cmd_rc cmd_echo(resp *r, const resp_command *c, const unsigned char *in, size_t len, size_t *used, out_frame *o)
{
    sbuf b = {0};
    sb_bulk(&b, r->a.v[1], r->a.len[1]);
    push_local(r, &b);
    return DONE;
}

static cmd_rc cmd_quit(resp *r, const resp_command *c, const unsigned char *in, size_t len, size_t *used, out_frame *o)
{
    local_text(r, "+OK\r\n");
    return CLOSE;
}

static cmd_rc cmd_select(resp *r, const resp_command *c, const unsigned char *in, size_t len, size_t *used,
                         out_frame *o)
{
    if (r->a.len[1] == 1 && r->a.v[1][0] == '0')
        local_text(r, "+OK\r\n");
    else
        local_error(r, "ERR", "DB index is out of range (floed has one database, 0)");
    return DONE;
}

/* AUTH [user] token: the server's token (user: "default" or none). */
static bool auth_with(resp *r, const resp_args *a, size_t at)
{
    const size_t n = a->argc - at;
    if (n < 1 || n > 2) {
        local_error(r, "ERR", "wrong number of arguments for 'auth' command");
        return false;
    }
    char tok[1024];
    if (n == 2 && !resp_arg_is(a, at, "default")) {
        local_error(r, "WRONGPASS", "invalid username-password pair or user is disabled.");
        return false;
    }
    if (!server_token_required(r->srv)) {
        local_error(r, "ERR",
                    "AUTH <password> called without any password configured for the default user. Are you sure your "
                    "configuration is correct?");
        return false;
    }
    if (!resp_arg_str(a, at + n - 1, tok, sizeof tok) || !server_token_matches(r->srv, tok)) {
        local_error(r, "WRONGPASS", "invalid username-password pair or user is disabled.");
        return false;
    }
    r->s->authed = true;
    return true;
}

static cmd_rc cmd_auth(resp *r, const resp_command *c, const unsigned char *in, size_t len, size_t *used, out_frame *o)
{
    if (auth_with(r, &r->a, 1))
        local_text(r, "+OK\r\n");
    return DONE;
}

/* HELLO [protover [AUTH user pass] [SETNAME name]] */
static cmd_rc cmd_hello(resp *r, const resp_command *c, const unsigned char *in, size_t len, size_t *used, out_frame *o)
{
    const resp_args *a = &r->a;
    int proto = r->proto;
    size_t i = 1;
    if (a->argc > 1) {
        uint64_t v;
        if (!resp_u64(a->v[1], a->len[1], &v)) {
            local_error(r, "ERR", "Protocol version is not an integer or out of range");
            return DONE;
        }
        if (v != 2 && v != 3) {
            local_error(r, "NOPROTO", "unsupported protocol version");
            return DONE;
        }
        proto = (int)v;
        i = 2;
    }
    for (; i < a->argc; i++) {
        if (resp_arg_is(a, i, "AUTH") && i + 2 < a->argc) {
            resp_args two = {.argc = 2, .v = (const unsigned char **)&a->v[i + 1], .len = &a->len[i + 1]};
            if (!auth_with(r, &two, 0))
                return DONE;
            i += 2;
        } else if (resp_arg_is(a, i, "SETNAME") && i + 1 < a->argc) {
            i++;
        } else {
            local_error(r, "ERR", "Syntax error in HELLO option '%.*s'", (int)(a->len[i] > 32 ? 32 : a->len[i]),
                        (const char *)a->v[i]);
            return DONE;
        }
    }
    if (server_token_required(r->srv) && !r->s->authed) {
        local_error(r, "NOAUTH", "HELLO must be called with the client's password (AUTH default <token>)");
        return DONE;
    }
    r->proto = proto;
    sbuf b = {0};
    sb_map(&b, 7, proto);
    sb_str(&b, "server");
    sb_str(&b, "floed");
    sb_str(&b, "version");
    sb_str(&b, FLOE_VERSION);
    sb_str(&b, "proto");
    sb_int(&b, proto);
    sb_str(&b, "id");
    sb_int(&b, (long long)r->s->serial);
    sb_str(&b, "mode");
    sb_str(&b, "standalone");
    sb_str(&b, "role");
    sb_str(&b, "master");
    sb_str(&b, "modules");
    sb_array(&b, 0);
    push_local(r, &b);
    return DONE;
}

/* COMMAND [COUNT | DOCS | INFO ...]: enough for redis-cli's hints (none) */
static cmd_rc cmd_command(resp *r, const resp_command *c, const unsigned char *in, size_t len, size_t *used,
                          out_frame *o);

static cmd_rc cmd_client(resp *r, const resp_command *c, const unsigned char *in, size_t len, size_t *used,
                         out_frame *o)
{
    const resp_args *a = &r->a;
    if (resp_arg_is(a, 1, "SETNAME") || resp_arg_is(a, 1, "SETINFO"))
        local_text(r, "+OK\r\n");
    else if (resp_arg_is(a, 1, "ID"))
        local_int(r, (long long)r->s->serial);
    else
        local_error(r, "ERR", "unknown subcommand '%.*s'. Try CLIENT SETNAME, SETINFO or ID.",
                    (int)(a->len[1] > 32 ? 32 : a->len[1]), (const char *)a->v[1]);
    return DONE;
}

static cmd_rc send_simple(resp *r, Floe__V1__Request *req, uint8_t cmd, out_frame *o, char *text)
{
    pending *p = send_request(r, req, cmd, o->mem, o->bytes, o->len);
    if (!p) {
        free(text);
        return OOM;
    }
    p->text = text;
    return SENT;
}

static cmd_rc cmd_info(resp *r, const resp_command *c, const unsigned char *in, size_t len, size_t *used, out_frame *o)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Info in_ = FLOE__V1__INFO__INIT;
    req.op_case = FLOE__V1__REQUEST__OP_INFO;
    req.info = &in_;
    char *sections = floe_calloc(1, 256);
    if (!sections)
        return OOM;
    for (size_t i = 1; i < r->a.argc; i++) {
        const size_t at = strlen(sections);
        if (at + r->a.len[i] + 2 < 256)
            snprintf(sections + at, 256 - at, "%.*s ", (int)r->a.len[i], (const char *)r->a.v[i]);
    }
    return send_simple(r, &req, C_INFO, o, sections);
}

static cmd_rc cmd_config(resp *r, const resp_command *c, const unsigned char *in, size_t len, size_t *used,
                         out_frame *o)
{
    const resp_args *a = &r->a;
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Config cf = FLOE__V1__CONFIG__INIT;
    char name[256], value[1200];
    uint8_t cmd = C_CONFIG_OK;
    if (resp_arg_is(a, 1, "GET") && a->argc == 3 && resp_arg_str(a, 2, name, sizeof name)) {
        cf.action = FLOE__V1__CONFIG__ACTION__GET;
        cf.name = name;
        cmd = C_CONFIG_GET;
    } else if (resp_arg_is(a, 1, "SET") && a->argc == 4 && resp_arg_str(a, 2, name, sizeof name) &&
               resp_arg_str(a, 3, value, sizeof value)) {
        cf.action = FLOE__V1__CONFIG__ACTION__SET;
        cf.name = name;
        cf.value = value;
    } else if (resp_arg_is(a, 1, "REWRITE") && a->argc == 2) {
        cf.action = FLOE__V1__CONFIG__ACTION__REWRITE;
    } else if (resp_arg_is(a, 1, "RESETSTAT") && a->argc == 2) {
        local_text(r, "+OK\r\n");
        return DONE;
    } else {
        local_error(r, "ERR", "CONFIG: GET pattern, SET name value or REWRITE (one setting at a time)");
        return DONE;
    }
    req.op_case = FLOE__V1__REQUEST__OP_CONFIG;
    req.config = &cf;
    return send_simple(r, &req, cmd, o, cmd == C_CONFIG_GET ? floe_strdup(name) : NULL);
}

static cmd_rc send_list(resp *r, uint8_t cmd, out_frame *o)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__ListTables lt = FLOE__V1__LIST_TABLES__INIT;
    req.op_case = FLOE__V1__REQUEST__OP_LIST_TABLES;
    req.list_tables = &lt;
    /* the names asked about, NUL-separated */
    sbuf names = {0};
    for (size_t i = 1; i < r->a.argc; i++) {
        sb_add(&names, r->a.v[i], r->a.len[i]);
        sb_add(&names, "", 1);
    }
    if (names.oom)
        return OOM;
    pending *p = send_request(r, &req, cmd, o->mem, o->bytes, o->len);
    if (!p) {
        free(names.p);
        return OOM;
    }
    p->text = names.p;
    p->len = names.len;
    return SENT;
}

static cmd_rc cmd_list(resp *r, const resp_command *c, const unsigned char *in, size_t len, size_t *used, out_frame *o)
{
    return send_list(r, c->cmd, o);
}

/* DEL / UNLINK name...: one drop a name, a frame each call */
static cmd_rc cmd_del(resp *r, const resp_command *c, const unsigned char *in, size_t len, size_t *used, out_frame *o)
{
    const resp_args *a = &r->a;
    /* each call sends the next name's drop and comes back here (*used 0) until the last */
    const size_t next = r->del_next ? r->del_next : 1;
    char name[RESP_NAME_MAX + 1];
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__DropTable dt = FLOE__V1__DROP_TABLE__INIT;
    if (!resp_arg_str(a, next, name, sizeof name))
        snprintf(name, sizeof name, "-"); /* no table is named so: counts 0 */
    table_forget(r, name);
    dt.table = name;
    req.op_case = FLOE__V1__REQUEST__OP_DROP_TABLE;
    req.drop_table = &dt;
    pending *p = send_request(r, &req, C_DEL, o->mem, o->bytes, o->len);
    if (!p)
        return OOM;
    p->last = next + 1 >= a->argc;
    r->del_next = p->last ? 0 : next + 1;
    if (!p->last)
        *used = 0; /* the next name on the next call */
    return SENT;
}

static cmd_rc cmd_shutdown(resp *r, const resp_command *c, const unsigned char *in, size_t len, size_t *used,
                           out_frame *o)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Shutdown sd = FLOE__V1__SHUTDOWN__INIT;
    if (r->a.argc > 2 || (r->a.argc == 2 && !resp_arg_is(&r->a, 1, "NOSAVE") && !resp_arg_is(&r->a, 1, "SAVE"))) {
        local_error(r, "ERR", "syntax error: SHUTDOWN [NOSAVE|SAVE]");
        return DONE;
    }
    sd.nosave = resp_arg_is(&r->a, 1, "NOSAVE");
    req.op_case = FLOE__V1__REQUEST__OP_SHUTDOWN;
    req.shutdown = &sd;
    return send_simple(r, &req, C_SHUTDOWN, o, NULL);
}

/* The commands: the rows of the RESP port (docs/RESP.md). */
static const resp_command RESP_COMMANDS[] = {
    {"ping", -1, 0, C_LOCAL, cmd_ping},
    {"echo", 2, 0, C_LOCAL, cmd_echo},
    {"quit", -1, F_ANY_TIME, C_LOCAL, cmd_quit},
    {"select", 2, 0, C_LOCAL, cmd_select},
    {"auth", -2, F_ANY_TIME, C_LOCAL, cmd_auth},
    {"hello", -1, F_ANY_TIME, C_LOCAL, cmd_hello},
    {"command", -1, 0, C_LOCAL, cmd_command},
    {"client", -2, 0, C_LOCAL, cmd_client},
    {"info", -1, 0, C_INFO, cmd_info},
    {"config", -2, 0, C_CONFIG_OK, cmd_config},
    {"dbsize", 1, 0, C_DBSIZE, cmd_list},
    {"exists", -2, 0, C_EXISTS, cmd_list},
    {"type", 2, 0, C_TYPE, cmd_list},
    {"del", -2, 0, C_DEL, cmd_del},
    {"unlink", -2, 0, C_DEL, cmd_del},
    {"shutdown", -1, 0, C_SHUTDOWN, cmd_shutdown},
    {"sadd", -3, F_TABLE | F_WRITE | F_SET, C_SADD, with_table},
    {"srem", -3, F_TABLE | F_SET, C_SREM, with_table},
    {"sismember", 3, F_TABLE | F_SET, C_SISMEMBER, with_table},
    {"smismember", -3, F_TABLE | F_SET, C_SMISMEMBER, with_table},
    {"scard", 2, F_TABLE | F_SET, C_CARD, with_table},
    {"sscan", -3, F_TABLE | F_SET, C_SSCAN, with_table},
    {"hset", -4, F_TABLE | F_WRITE | F_MAP, C_HSET, with_table},
    {"hsetnx", 4, F_TABLE | F_WRITE | F_MAP, C_HSETNX, with_table},
    {"hget", 3, F_TABLE | F_MAP, C_HGET, with_table},
    {"hmget", -3, F_TABLE | F_MAP, C_HMGET, with_table},
    {"hdel", -3, F_TABLE | F_MAP, C_HDEL, with_table},
    {"hexists", 3, F_TABLE | F_MAP, C_HEXISTS, with_table},
    {"hlen", 2, F_TABLE | F_MAP, C_CARD, with_table},
    {"hincrby", 4, F_TABLE | F_WRITE | F_MAP, C_HINCRBY, with_table},
};
#define NCOMMANDS (sizeof RESP_COMMANDS / sizeof RESP_COMMANDS[0])

static cmd_rc cmd_command(resp *r, const resp_command *c, const unsigned char *in, size_t len, size_t *used,
                          out_frame *o)
{
    const resp_args *a = &r->a;
    sbuf b = {0};
    if (resp_arg_is(a, 1, "COUNT")) {
        sb_int(&b, (long long)NCOMMANDS);
    } else if (a->argc == 1 || resp_arg_is(a, 1, "LIST")) {
        sb_array(&b, NCOMMANDS);
        for (size_t i = 0; i < NCOMMANDS; i++)
            sb_str(&b, RESP_COMMANDS[i].name);
    } else if (resp_arg_is(a, 1, "DOCS")) {
        sb_map(&b, 0, r->proto);
    } else {
        sb_array(&b, 0);
    }
    push_local(r, &b);
    return DONE;
}

static const resp_command *command_of(const resp_args *a)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strlen(RESP_COMMANDS[i].name) == a->len[0] &&
            strncasecmp(RESP_COMMANDS[i].name, (const char *)a->v[0], a->len[0]) == 0)
            return &RESP_COMMANDS[i];
    return NULL;
}

/* ---- the way in -------------------------------------------------------------------------- */

resp *resp_new(server *srv, session *s)
{
    resp *r = floe_calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->srv = srv;
    r->s = s;
    r->proto = 2;
    r->next_id = 1;
    return r;
}

void resp_free(resp *r)
{
    if (!r)
        return;
    while (r->head) {
        pending *p = r->head;
        r->head = p->next;
        pending_free(p);
    }
    free(r->a.v);
    free(r->a.len);
    free(r->peek.v);
    free(r->peek.len);
    free(r->keys);
    free(r->vals);
    free(r);
}

void resp_refuse(resp *r, const char *msg, struct evbuffer *out)
{
    local_error(r, "ERR", "%s", msg);
    r->closing = true;
    flush(r, out);
}

size_t resp_waiting(const resp *r)
{
    return r->nsent;
}

resp_step resp_take(resp *r, const unsigned char *in, size_t len, size_t *used, unsigned char **mem,
                    unsigned char **bytes, uint32_t *len_out, struct evbuffer *out)
{
    *used = 0;
    out_frame o = {mem, bytes, len_out};
    resp_step step = RESP_MORE;
    while (!r->closing) {
        if (r->nqueued >= RESP_QUEUED_MAX) { /* replies pile up: write those ready, wait if the head is not */
            flush(r, out);
            r->stalled = r->nqueued >= RESP_QUEUED_MAX;
        }
        if (r->waiting || r->stalled) {
            step = RESP_BLOCKED;
            break;
        }
        size_t n = 0;
        char err[160];
        const int rc = resp_parse(in + *used, len - *used, LIVE(r->srv, max_frame), &r->a, &n, err, sizeof err);
        if (rc == 0)
            break;
        if (rc < 0) { /* as Redis: the error, then the connection closes */
            local_error(r, "ERR", "%s", err);
            r->closing = true;
            break;
        }
        const resp_args *a = &r->a;
        if (a->argc == 0) {
            *used += n;
            continue;
        }
        const resp_command *c = command_of(a);
        cmd_rc done = DONE;
        size_t took = n;
        if (!c) {
            local_error(r, "ERR", "unknown command '%.*s', with args beginning with: %s%.*s%s",
                        (int)(a->len[0] > 64 ? 64 : a->len[0]), (const char *)a->v[0], a->argc > 1 ? "'" : "",
                        (int)(a->argc > 1 ? (a->len[1] > 64 ? 64 : a->len[1]) : 0),
                        a->argc > 1 ? (const char *)a->v[1] : "", a->argc > 1 ? "' " : "");
        } else if ((c->arity > 0 && a->argc != (size_t)c->arity) || (c->arity < 0 && a->argc < (size_t)-c->arity)) {
            local_error(r, "ERR", "wrong number of arguments for '%s' command", c->name);
        } else if (!(c->flags & F_ANY_TIME) && server_token_required(r->srv) && !r->s->authed) {
            local_error(r, "NOAUTH", "Authentication required.");
        } else {
            done = c->run(r, c, in + *used, len - *used, &took, &o);
        }
        if (done == OOM) {
            local_error(r, "ERR", "out of memory");
            r->closing = true;
            break;
        }
        *used += took;
        if (done == CLOSE) {
            r->closing = true;
            break;
        }
        if (done == WAIT) {
            step = RESP_BLOCKED;
            break;
        }
        if (done == SENT) {
            step = RESP_FRAME;
            break;
        }
    }
    flush(r, out);
    if (r->closing && step != RESP_FRAME)
        return RESP_CLOSE;
    return step;
}

/* ---- the way out ------------------------------------------------------------------------- */

static long long count_of(const uint8_t *res, size_t n, uint8_t what)
{
    long long k = 0;
    for (size_t i = 0; i < n; i++)
        k += res[i] == what;
    return k;
}

static int64_t value_at(const ProtobufCBinaryData *v, size_t i, unsigned vb)
{
    uint64_t x = 0;
    for (unsigned b = 0; b < vb; b++)
        x |= (uint64_t)v->data[i * vb + b] << (8 * b);
    if (vb == 4)
        return (int64_t)(int32_t)(uint32_t)x;
    return (int64_t)x;
}

/* A key command's replies, one a segment, from rs's answers. */
static void render_keys(resp *r, const pending *p, const Floe__V1__Response *rs, sbuf *b)
{
    const uint8_t *res = rs->results.data;
    size_t at = 0;
    size_t total = 0;
    for (size_t s = 0; s < p->nsegs; s++)
        total += p->segs[s].n;
    const unsigned vb = total && rs->values.len / total ? (unsigned)(rs->values.len / total) : 8;
    for (size_t s = 0; s < p->nsegs; s++) {
        const size_t n = p->segs[s].n;
        if (rs->results.len < at + n) { /* not the answer expected: say so for each */
            sb_error(b, "ERR", "floed answered fewer keys than were sent");
            at += n;
            continue;
        }
        const uint8_t *x = res + at;
        if (count_of(x, n, FLOE_FULL) && is_write(p->cmd)) {
            sb_error(b, "ERR", "the table is full and cannot grow (its capacity, or maxmemory)");
            at += n;
            continue;
        }
        switch (p->segs[s].cmd) {
        case C_SADD:
        case C_HSET:
            sb_int(b, count_of(x, n, FLOE_INSERTED));
            break;
        case C_HSETNX:
            sb_int(b, x[0] == FLOE_INSERTED);
            break;
        case C_SREM:
        case C_HDEL:
            sb_int(b, count_of(x, n, FLOE_ERASED));
            break;
        case C_SISMEMBER:
        case C_HEXISTS:
            sb_int(b, x[0] == FLOE_PRESENT);
            break;
        case C_SMISMEMBER:
            sb_array(b, n);
            for (size_t i = 0; i < n; i++)
                sb_int(b, x[i] == FLOE_PRESENT);
            break;
        case C_HGET:
        case C_HMGET:
            if (p->segs[s].cmd == C_HMGET)
                sb_array(b, n);
            for (size_t i = 0; i < n; i++) {
                if (x[i] != FLOE_PRESENT || rs->values.len < (at + i + 1) * vb) {
                    sb_nil(b, r->proto);
                } else {
                    char num[24];
                    snprintf(num, sizeof num, "%" PRId64, value_at(&rs->values, at + i, vb));
                    sb_str(b, num);
                }
            }
            break;
        case C_HINCRBY:
            if (rs->values.len < (at + 1) * vb)
                sb_error(b, "ERR", "floed gave no value back");
            else
                sb_int(b, value_at(&rs->values, at, vb));
            break;
        }
        at += n;
    }
}

/* A list's answer to EXISTS, TYPE or DBSIZE. */
static void render_list(resp *r, const pending *p, const Floe__V1__TableList *tl, sbuf *b)
{
    if (p->cmd == C_DBSIZE) {
        sb_int(b, tl ? (long long)tl->n_tables : 0);
        return;
    }
    if (p->cmd == C_TYPE) {
        int kind = 0;
        for (size_t i = 0; tl && i < tl->n_tables; i++)
            if (tl->tables[i]->spec && strcmp(tl->tables[i]->spec->name, p->text) == 0)
                kind = tl->tables[i]->spec->kind;
        sb_printf(b, "+%s\r\n", resp_kind_word(kind));
        return;
    }
    long long n = 0; /* EXISTS counts each name given, as often as given */
    for (size_t at = 0; at < p->len; at += strlen(p->text + at) + 1)
        for (size_t i = 0; tl && i < tl->n_tables; i++)
            if (tl->tables[i]->spec && strcmp(tl->tables[i]->spec->name, p->text + at) == 0) {
                n++;
                break;
            }
    sb_int(b, n);
}

static void render_scan(resp *r, const pending *p, const Floe__V1__ScanReply *sr, sbuf *b)
{
    uint64_t next = 0;
    if (sr && !sr->done && sr->cursor.len >= 16) {
        uint64_t pos, gen;
        memcpy(&pos, sr->cursor.data, 8);
        memcpy(&gen, sr->cursor.data + 8, 8);
        if (pos >> RESP_SCAN_GEN_AT || gen >> (64 - RESP_SCAN_GEN_AT) || (gen << RESP_SCAN_GEN_AT | pos) == UINT64_MAX)
            next = 0; /* not expressible: the walk ends here (a Redis client then has all it asked for so far) */
        else
            next = (gen << RESP_SCAN_GEN_AT | pos) + 1;
    }
    char num[24];
    snprintf(num, sizeof num, "%" PRIu64, next);
    const size_t nk = sr ? sr->keys.len / 8 : 0;
    sbuf m = {0};
    size_t shown = 0;
    for (size_t i = 0; i < nk; i++) {
        uint64_t k;
        memcpy(&k, sr->keys.data + 8 * i, 8);
        char s[24];
        snprintf(s, sizeof s, "%" PRIu64, k);
        if (p->text && fnmatch(p->text, s, 0) != 0)
            continue;
        sb_str(&m, s);
        shown++;
    }
    sb_array(b, 2);
    sb_str(b, num);
    sb_array(b, shown);
    sb_add(b, m.p ? m.p : "", m.len);
    if (m.oom)
        b->oom = true;
    free(m.p);
}

static void render_config(resp *r, const pending *p, const Floe__V1__ConfigReply *cr, sbuf *b)
{
    const size_t n = cr ? cr->n_settings : 0;
    /* Redis's persistence settings, which redis-benchmark asks for: floed has none of those names */
    static const char *const redis_only[][2] = {{"save", ""}, {"appendonly", "no"}};
    for (size_t i = 0; !n && p->text && i < sizeof redis_only / sizeof redis_only[0]; i++)
        if (strcasecmp(p->text, redis_only[i][0]) == 0) {
            sb_map(b, 1, r->proto);
            sb_str(b, redis_only[i][0]);
            sb_str(b, redis_only[i][1]);
            return;
        }
    sb_map(b, n, r->proto);
    for (size_t i = 0; i < n; i++) {
        sb_str(b, cr->settings[i]->name);
        sb_str(b, cr->settings[i]->value);
    }
}

/* The reply of p from its answer rs (NULL: it could not be read). */
static void render(resp *r, pending *p, const Floe__V1__Response *rs, sbuf *b)
{
    const floe_status st = rs ? (floe_status)rs->status : FLOE_ERR_INTERNAL;
    const char *msg = rs && rs->error && rs->error[0] ? rs->error : floe_status_name(st);
    if (p->cmd == C_PROBE) { /* no reply: what the table is */
        table_info *t = table_find(r, p->table);
        if (t) {
            t->asked = false;
            t->known = st == FLOE_OK || st == FLOE_ERR_NO_TABLE;
            t->kind = 0;
            if (st == FLOE_OK && rs->body_case == FLOE__V1__RESPONSE__BODY_STATS && rs->stats->spec) {
                t->kind = rs->stats->spec->kind;
                t->key_bits = rs->stats->spec->key_bits;
                t->value_bytes = rs->stats->spec->value_bytes;
            }
            if (!t->known) { /* the command waiting for it says why */
                t->known = true;
                t->kind = -1;
                t->status = st;
            }
        }
        r->waiting = false;
        return;
    }
    if (p->cmd == C_CREATE) {
        if (st != FLOE_OK && st != FLOE_ERR_EXISTS) /* the write behind it will fail too, and say so */
            table_forget(r, p->table);
        else if (st == FLOE_ERR_EXISTS) /* made by someone else meanwhile: ask again next time */
            table_forget(r, p->table);
        return;
    }
    if (p->cmd == C_DEL) { /* summed in order as written (flush) */
        p->dropped = st == FLOE_OK;
        return;
    }
    if (p->cmd == C_SHUTDOWN && st == FLOE_OK)
        return; /* as Redis: the connection closes with floed */
    if (st == FLOE_ERR_INVALID && p->cmd == C_SSCAN && strstr(msg, "rebuilt")) {
        /* the table grew under the walk: it starts again, as Redis's SSCAN may repeat members */
        sb_array(b, 2);
        sb_str(b, RESP_SCAN_RESTART);
        sb_array(b, 0);
        return;
    }
    if (st != FLOE_OK) {
        if (st == FLOE_ERR_NO_TABLE && p->table[0]) { /* dropped since this connection looked */
            table_forget(r, p->table);
            if (!is_write(p->cmd)) {
                size_t n = 0;
                for (size_t s = 0; s < p->nsegs; s++) {
                    n = p->segs[s].n;
                    render_empty(b, p->segs[s].cmd, n, r->proto);
                }
                if (!p->nsegs)
                    render_empty(b, p->cmd, 1, r->proto);
                return;
            }
        }
        const char *code = st == FLOE_ERR_NO_MEMORY ? "OOM" : st == FLOE_ERR_UNAUTHENTICATED ? "NOAUTH" : "ERR";
        for (size_t s = 0; s < (p->nsegs ? p->nsegs : 1); s++) {
            if (st == FLOE_ERR_NO_MEMORY)
                sb_error(b, code, "command not allowed when used memory > 'maxmemory'.");
            else
                sb_printf(b, "-%s %s: %s\r\n", code, floe_status_name(st), msg);
        }
        return;
    }
    switch (p->cmd) {
    case C_CARD:
        sb_int(b, rs->body_case == FLOE__V1__RESPONSE__BODY_STATS ? (long long)rs->stats->keys : 0);
        break;
    case C_SSCAN:
        render_scan(r, p, rs->body_case == FLOE__V1__RESPONSE__BODY_SCAN ? rs->scan : NULL, b);
        break;
    case C_DBSIZE:
    case C_EXISTS:
    case C_TYPE:
        render_list(r, p, rs->body_case == FLOE__V1__RESPONSE__BODY_TABLES ? rs->tables : NULL, b);
        break;
    case C_INFO:
        if (rs->body_case == FLOE__V1__RESPONSE__BODY_INFO)
            resp_info(b, p->text, rs->info);
        else
            sb_error(b, "ERR", "floed's info came back empty");
        break;
    case C_CONFIG_GET:
        render_config(r, p, rs->body_case == FLOE__V1__RESPONSE__BODY_CONFIG ? rs->config : NULL, b);
        break;
    case C_CONFIG_OK:
        sb_add(b, "+OK\r\n", 5);
        break;
    default:
        render_keys(r, p, rs, b);
        break;
    }
}

bool resp_answer(resp *r, const frame *f, struct evbuffer *out)
{
    Floe__V1__Response *rs = f->len > 4 ? floe__v1__response__unpack(NULL, f->len - 4, f->data + 4) : NULL;
    const uint64_t id = rs ? rs->id : f->id;
    pending *p = NULL;
    if (id)
        for (p = r->head; p && p->id != id; p = p->next)
            ;
    const bool was_waiting = r->waiting || r->stalled;
    sbuf b = {0};
    if (p && !p->answered) {
        r->nsent--;
        render(r, p, rs, &b);
        free(p->text);
        p->text = b.p;
        p->len = b.len;
        p->answered = true;
        if (b.oom) {
            free(p->text);
            p->text = NULL;
            p->len = 0;
        }
    } else if (rs && rs->status != FLOE__V1__STATUS__OK) { /* floed's own word (a frame it could not read) */
        sb_printf(&b, "-ERR %s: %s\r\n", floe_status_name((floe_status)rs->status), rs->error ? rs->error : "");
        push_local(r, &b);
    }
    if (rs)
        floe__v1__response__free_unpacked(rs, NULL);
    flush(r, out);
    if (r->stalled && r->nqueued < RESP_QUEUED_MAX / 2)
        r->stalled = false;
    return was_waiting && !r->waiting && !r->stalled;
}
