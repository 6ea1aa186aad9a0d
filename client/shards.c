/*
 * shards.c - libfloe's partitioned connections: one logical table over
 * several floed (floe://h1:p1,h2:p2,...; docs/OPERATIONS.md).
 *
 * A partitioned floe holds one connection a server, in the list's order,
 * and no socket of its own.  Each key (TREE: vector) belongs to the shard
 * floe_shard_of_key (floe_shard_of_vector) of proto/floe_wire.h picks, the
 * same in every client.  A key request is split into one request a shard,
 * all sent at once; a parent call waits for the parts and merges their
 * answers back into the caller's order, so every call of floe.h works the
 * same over one server or several.  Ids name their shard in their top 8
 * bits.  Every request a shard connection sends carries a ShardCheck (the
 * list's hash, its place, the count), and a server refuses key operations
 * whose check differs from its table's: a client with another list, or one
 * that takes a shard for a whole table, cannot put keys on the wrong shard.
 * A shard that fails fails the call, with the shard named; answers are
 * never partial.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "floe_internal.h"
#include "keymsg.h"
#include "ops.h"

static uint64_t id_of_shard(uint64_t id, unsigned shard)
{
    return id == UINT64_MAX ? id : id | (uint64_t)shard << FLOE_ID_SHARD_SHIFT;
}

/* ---- the list --------------------------------------------------------------------------------- */

/* One server of the list as the list's hash takes it: host:port, port 7450 when none is given. */
static int canonical(const char *entry, size_t len, char *out, size_t cap)
{
    if (len && entry[len - 1] == '/')
        len--;
    if (len == 0)
        return -1;
    bool has_port;
    if (entry[0] == '[') {
        const char *end = memchr(entry, ']', len);
        if (!end)
            return -1;
        has_port = (size_t)(end - entry) + 1 < len;
    } else {
        has_port = memchr(entry, ':', len) != NULL;
    }
    int w = has_port ? snprintf(out, cap, "%.*s", (int)len, entry)
                     : snprintf(out, cap, "%.*s:%d", (int)len, entry, FLOE_DEFAULT_PORT);
    return w < 0 || (size_t)w >= cap ? -1 : 0;
}

/* ---- connecting ------------------------------------------------------------------------------- */

static void arm(floe *c);
static const floe_router ROUTER;

int floe__shards_connect(const char *uri, const floe_options *opts, floe **out)
{
    floe *c = calloc(1, sizeof *c);
    *out = c;
    if (!c)
        return FLOE_ERR_IO;
    c->fd = -1;
    c->epfd = -1;
    c->router = &ROUTER;
    const char *sep = strstr(uri, "://");
    const size_t scheme_len = sep ? (size_t)(sep + 3 - uri) : 0;
    const char *list = uri + scheme_len;
    const size_t list_len = strcspn(list, "?");
    const char *query = list + list_len; /* "" or "?..." */
    unsigned n = 1;
    for (size_t i = 0; i < list_len; i++)
        n += list[i] == ',';
    if (n > FLOE_SHARDS_MAX)
        return floe__set_error(c, FLOE_ERR_INVALID, "'%s' names %u servers; a partitioned table has at most %u", uri, n,
                               FLOE_SHARDS_MAX);
    c->shards = calloc(n, sizeof *c->shards);
    c->shard_names = calloc(n, sizeof *c->shard_names);
    char *joined = malloc((size_t)n * FLOE_SHARD_NAME_MAX);
    if (!c->shards || !c->shard_names || !joined) {
        free(joined);
        return floe__set_error(c, FLOE_ERR_IO, "out of memory");
    }
    joined[0] = '\0';
    const char *p = list;
    for (unsigned i = 0; i < n; i++) {
        const size_t len = strcspn(p, ",?");
        if (canonical(p, len, c->shard_names[i], FLOE_SHARD_NAME_MAX) != 0) {
            free(joined);
            return floe__set_error(c, FLOE_ERR_INVALID, "'%s': server %u of the list (\"%.*s\") is not HOST[:PORT]",
                                   uri, i + 1, (int)len, p);
        }
        if (i)
            strcat(joined, ",");
        strcat(joined, c->shard_names[i]);
        p += len + 1;
    }
    const uint64_t set = floe_shard_set(joined);
    free(joined);
    c->nshards = n;
    for (unsigned i = 0; i < n; i++) {
        char sub[FLOE_SHARD_NAME_MAX + 2048];
        if (snprintf(sub, sizeof sub, "%.*s%s%s", (int)scheme_len, uri, c->shard_names[i], query) >= (int)sizeof sub)
            return floe__set_error(c, FLOE_ERR_INVALID, "'%s': too long", uri);
        int st = floe__connect_one(sub, opts, &c->shards[i]);
        if (st != FLOE_OK)
            return floe__set_error(c, st, "shard %u of %u (%s): %s", i + 1, n, c->shard_names[i],
                                   c->shards[i] ? floe_errstr(c->shards[i]) : floe_strerror(st));
        floe *s = c->shards[i];
        floe__v1__shard_check__init(&s->check);
        s->check.shard_set = set;
        s->check.shard = i;
        s->check.shards = n;
        s->checked = true;
    }
    /* one server named twice (127.0.0.1:7450,localhost:7450) would hold two shards' keys in one
     * table, and its creates would fail with ERR_EXISTS: refused by the address connected to */
    struct sockaddr_storage peer[FLOE_SHARDS_MAX];
    socklen_t peer_len[FLOE_SHARDS_MAX];
    for (unsigned i = 0; i < n && i < FLOE_SHARDS_MAX; i++) {
        peer_len[i] = sizeof peer[i];
        if (getpeername(c->shards[i]->fd, (struct sockaddr *)&peer[i], &peer_len[i]) != 0)
            peer_len[i] = 0;
        for (unsigned j = 0; j < i && peer_len[i]; j++)
            if (peer_len[j] == peer_len[i] && memcmp(&peer[j], &peer[i], peer_len[i]) == 0) {
                char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";
                getnameinfo((struct sockaddr *)&peer[i], peer_len[i], host, sizeof host, port, sizeof port,
                            NI_NUMERICHOST | NI_NUMERICSERV);
                return floe__set_error(c, FLOE_ERR_INVALID,
                                       "'%s': servers %u (%s) and %u (%s) of the list are one server (%s port %s): "
                                       "name each server once",
                                       uri, j + 1, c->shard_names[j], i + 1, c->shard_names[i], host, port);
            }
    }
    /* what the servers said, as the tightest of them allows */
    c->info = c->shards[0]->info;
    for (unsigned i = 1; i < n; i++) {
        const floe_server_info *in = &c->shards[i]->info;
        if (in->max_frame && (!c->info.max_frame || in->max_frame < c->info.max_frame))
            c->info.max_frame = in->max_frame;
        if (in->max_batch_keys && (!c->info.max_batch_keys || in->max_batch_keys < c->info.max_batch_keys))
            c->info.max_batch_keys = in->max_batch_keys;
        /* a feature is the list's only where every server has it */
        char kept[sizeof c->info.features] = "";
        for (char *w = c->info.features, *end; *w; w = end + 1) {
            end = strchr(w, ' ');
            if (!end)
                break;
            const size_t len = (size_t)(end - w) + 1; /* the word and its space */
            bool all = false;
            for (const char *q = in->features; !all && *q; q++)
                all = (q == in->features || q[-1] == ' ') && strncmp(q, w, len) == 0;
            if (all)
                strncat(kept, w, len);
        }
        memcpy(c->info.features, kept, sizeof kept);
    }
    c->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (c->epfd < 0)
        return floe__set_error(c, FLOE_ERR_IO, "epoll_create1: %s", strerror(errno));
    for (unsigned i = 0; i < n; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};
        if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->shards[i]->fd, &ev) != 0)
            return floe__set_error(c, FLOE_ERR_IO, "epoll_ctl: %s", strerror(errno));
    }
    return FLOE_OK;
}

static void shards_close(floe *c)
{
    for (unsigned i = 0; i < c->nshards; i++)
        floe_close(c->shards[i]); /* their calls fail, and with them the parents (floe_close fails c's after) */
    free(c->shards);
    free(c->shard_names);
    free(c->route_buf);
    c->route_buf = NULL;
    c->route_cap = 0;
    if (c->epfd >= 0)
        close(c->epfd);
    c->shards = NULL;
    c->nshards = 0;
}

unsigned floe_shards(const floe *c)
{
    return c->nshards ? c->nshards : 1;
}

floe *floe_shard(floe *c, unsigned i)
{
    return c->nshards ? (i < c->nshards ? c->shards[i] : NULL) : i == 0 ? c : NULL;
}

const char *floe_shard_name(const floe *c, unsigned i)
{
    return c->nshards && i < c->nshards ? c->shard_names[i] : NULL;
}

/* The epoll set says readable when a shard's socket is readable, or writable while it has bytes to write. */
static void arm(floe *c)
{
    for (unsigned i = 0; i < c->nshards; i++) {
        floe *s = c->shards[i];
        if (s->fd < 0)
            continue;
        struct epoll_event ev = {.events = EPOLLIN | (floe_want_write(s) ? EPOLLOUT : 0), .data.u32 = i};
        epoll_ctl(c->epfd, EPOLL_CTL_MOD, s->fd, &ev);
    }
}

/* ---- a call split over the shards -------------------------------------------------------------- */

struct split {
    floe *c;
    floe_call *call; /* the caller's */
    unsigned pending;
    size_t n;                  /* keys (vectors, ids) of the request */
    uint8_t *shard_of;         /* each key's shard (FLOE_SHARDS_MAX 256) */
    size_t *count;             /* keys a shard */
    Floe__V1__Response **resp; /* each shard's answer, taken from its call */
    int status;                /* the first failure's */
    char error[512];
};

static void split_free(split *sp)
{
    for (unsigned i = 0; sp->resp && i < sp->c->nshards; i++)
        if (sp->resp[i])
            floe__v1__response__free_unpacked(sp->resp[i], NULL);
    free(sp->resp);
    free(sp->count);
    free(sp->shard_of);
    free(sp);
}

static bool bytes_alloc(ProtobufCBinaryData *b, size_t len)
{
    b->len = len;
    b->data = len ? malloc(len) : NULL;
    return !len || b->data;
}

/* Each shard's answer, as the merge reads it. */
typedef struct part_view {
    const uint8_t *results;
    const unsigned char *ids, *values, *vectors;
    size_t at; /* keys of it merged so far */
} part_view;

/* The parts' answers in the caller's order: results, ids (with their
 * shard), values and vectors key by key, counts summed.  NULL if out of
 * memory or the parts answer in shapes that differ from each other or from
 * their keys. */
static Floe__V1__Response *merged(const split *sp)
{
    const unsigned ns = sp->c->nshards;
    part_view pv[FLOE_SHARDS_MAX];
    int results = -1, ids = -1;    /* whether the parts answered them (-1: no part with keys yet) */
    size_t vbytes = 0, wbytes = 0; /* per key: values, vectors */
    bool seen = false;
    for (unsigned s = 0; s < ns; s++) {
        const Floe__V1__Response *r = sp->resp[s];
        const size_t k = sp->count[s];
        memset(&pv[s], 0, sizeof pv[s]);
        if (!k)
            continue;
        if (!r)
            return NULL;
        const int has_results = r->results.len != 0, has_ids = r->ids.len != 0;
        const size_t vb = r->values.len / k, wb = r->vectors.len / k;
        if ((has_results && r->results.len != k) || (has_ids && r->ids.len != k * 8) || r->values.len != vb * k ||
            r->vectors.len != wb * k)
            return NULL;
        if (seen && (has_results != results || has_ids != ids || vb != vbytes || wb != wbytes))
            return NULL; /* the parts disagree on what they answer */
        seen = true;
        results = has_results, ids = has_ids, vbytes = vb, wbytes = wb;
        pv[s] = (part_view){r->results.data, r->ids.data, r->values.data, r->vectors.data, 0};
    }
    Floe__V1__Response *m = malloc(sizeof *m);
    if (!m)
        return NULL;
    floe__v1__response__init(m);
    if (!bytes_alloc(&m->results, results > 0 ? sp->n : 0) || !bytes_alloc(&m->ids, ids > 0 ? sp->n * 8 : 0) ||
        !bytes_alloc(&m->values, sp->n * vbytes) || !bytes_alloc(&m->vectors, sp->n * wbytes)) {
        floe__v1__response__free_unpacked(m, NULL);
        return NULL;
    }
    for (size_t i = 0; i < sp->n; i++) {
        part_view *p = &pv[sp->shard_of[i]];
        const size_t j = p->at++;
        if (results > 0)
            m->results.data[i] = p->results[j];
        if (ids > 0) {
            uint64_t id;
            memcpy(&id, p->ids + j * 8, 8);
            id = id_of_shard(id, sp->shard_of[i]);
            memcpy(m->ids.data + i * 8, &id, 8);
        }
        if (vbytes)
            memcpy(m->values.data + i * vbytes, p->values + j * vbytes, vbytes);
        if (wbytes)
            memcpy(m->vectors.data + i * wbytes, p->vectors + j * wbytes, wbytes);
    }
    for (unsigned s = 0; s < ns; s++) {
        const Floe__V1__Response *r = sp->resp[s];
        if (!r)
            continue;
        m->inserted += r->inserted;
        m->present += r->present;
        m->absent += r->absent;
        m->full += r->full;
        m->erased += r->erased;
    }
    return m; /* generation 0: each shard has its own */
}

static void split_done(split *sp)
{
    floe *c = sp->c;
    floe_call *call = sp->call;
    Floe__V1__Response *m = NULL;
    if (sp->status == FLOE_OK && !(m = merged(sp))) {
        sp->status = FLOE_ERR_PROTOCOL;
        snprintf(sp->error, sizeof sp->error, "the shards' answers do not fit their requests (or out of memory)");
    }
    const int status = sp->status;
    char error[sizeof sp->error];
    memcpy(error, sp->error, sizeof error);
    split_free(sp);
    floe__complete(c, call, status, error, m);
}

/* A part answered: its answer is kept, the first failure named. */
static void part_done(floe *s, floe_call *part, void *arg)
{
    split *sp = arg;
    floe *c = sp->c;
    unsigned i = 0;
    while (i < c->nshards && c->shards[i] != s)
        i++;
    if (part->status != FLOE_OK && sp->status == FLOE_OK) {
        sp->status = part->status;
        snprintf(sp->error, sizeof sp->error, "shard %u of %u (%s): %s", i + 1, c->nshards, c->shard_names[i],
                 part->error && part->error[0] ? part->error : floe_strerror(part->status));
    }
    if (i < c->nshards && part->resp) {
        sp->resp[i] = part->resp;
        part->resp = NULL;
    }
    if (--sp->pending == 0)
        split_done(sp);
}

/* What a key request carries, to split: its keys (or vectors, or ids),
 * their width, and what goes beside each key (values; an exploring
 * table's parents and labels). */
typedef struct keyed {
    ProtobufCBinaryData *keys, *values, *from, *labels, *from_counts;
    uint64_t *from_first, *complete;
    size_t width; /* bytes a key: 8, or words x 4 */
    bool vectors; /* a TREE's vectors (by width alone, 2 words would pass for a key) */
    bool ids;     /* get_by_id: ids name their shard */
} keyed;

/* What req carries to split, by its operation's row (tables/ops.h: split
 * by key, or not on a partitioned table) and its message's parts
 * (proto/keymsg.h). */
static bool keyed_of(floe *c, Floe__V1__Request *req, keyed *k, char *why, size_t len)
{
    memset(k, 0, sizeof *k);
    if (req->op_case == FLOE__V1__REQUEST__OP_PING)
        return true; /* no keys: every shard */
    if (req->op_case == FLOE__V1__REQUEST__OP_CLAIM || req->op_case == FLOE__V1__REQUEST__OP_TRACE) {
        snprintf(why, len,
                 "over several floed each server hands out its own states: claim from each one (floe_shard) with "
                 "floe_send_claim_upto (docs/PROTOCOL.md)");
        return false;
    }
    const int op = floe_op_named(floe__keymsg_op_name((uint32_t)req->op_case));
    floe_keymsg m;
    if (floe_op_def(op)->parts != FLOE_PARTS_SPLIT || !floe__keymsg_of(req, &m)) {
        snprintf(why, len,
                 "this operation is not supported on a partitioned connection (ORDERED tables, ranges, neighbours "
                 "and min/max are not partitioned): connect to one server");
        return false;
    }
    if ((m.parents && m.parents->len) || (m.change_counts && m.change_counts->len)) {
        snprintf(why, len,
                 "inserts by parent ids go to the parent's server, but a state's shard is its vector's: on a "
                 "partitioned table send whole vectors");
        return false;
    }
    k->keys = m.keys;
    k->values = m.values;
    k->from = m.from;
    k->labels = m.labels;
    k->from_counts = m.from_counts;
    k->from_first = m.from_first;
    k->complete = m.complete;
    k->ids = floe_op_def(op)->shape == FLOE_SHAPE_IDS; /* ids name their shard */
    k->vectors = floe_op_takes_vectors(op, c->route_words);
    k->width = k->vectors ? (size_t)c->route_words * 4 : 8;
    return true;
}

/* The shard of key i of k, and (ids) the id as its shard knows it. */
static unsigned shard_of(const floe *c, const keyed *k, size_t i, uint64_t *id)
{
    const unsigned char *p = k->keys->data + i * k->width;
    if (k->ids) {
        memcpy(id, p, 8);
        const unsigned s = (unsigned)(*id >> FLOE_ID_SHARD_SHIFT);
        if (*id == UINT64_MAX || s >= c->nshards) {
            *id = UINT64_MAX; /* names no vector anywhere: shard 0 answers ABSENT */
            return 0;
        }
        *id &= FLOE_ID_LOCAL_MASK;
        return s;
    }
    if (!k->vectors) {
        uint64_t key;
        memcpy(&key, p, 8);
        return floe_shard_of_key(key, c->nshards);
    }
    uint32_t w[FLOE_TREE_MAX_WORDS];
    memcpy(w, p, k->width);
    return floe_shard_of_vector(w, (unsigned)(k->width / 4), c->nshards);
}

/* What goes beside each key, split with the keys: a field of the request,
 * its bytes a key, and what it held (put back once the parts are sent). */
typedef struct column {
    ProtobufCBinaryData *field;
    size_t width;
    ProtobufCBinaryData was;
    unsigned char *at; /* its place in the route buffer */
} column;

/* An exploring table's parents as one id a key, from Insert.from_first and
 * from_counts (the shards' parts are not consecutive runs); NULL after
 * naming what is wrong. */
static uint64_t *from_of_counts(const keyed *k, size_t n, char *why, size_t len)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < k->from_counts->len; i++)
        sum += k->from_counts->data[i];
    if (sum != n || (k->from && k->from->len)) {
        snprintf(why, len, "from_counts add up to %llu keys (the request has %zu), or come with from",
                 (unsigned long long)sum, n);
        return NULL;
    }
    uint64_t *f = malloc(n * 8 + 8);
    if (!f) {
        snprintf(why, len, "out of memory");
        return NULL;
    }
    for (size_t i = 0, j = 0; i < k->from_counts->len; i++)
        for (unsigned c = 0; c < k->from_counts->data[i]; c++)
            f[j++] = *k->from_first + i;
    return f;
}

static floe_call *shards_send(floe *c, Floe__V1__Request *req, floe_callback *cb, void *arg)
{
    keyed k;
    char why[256];
    if (!keyed_of(c, req, &k, why, sizeof why)) {
        floe_call *call = floe__new_call(c, cb, arg);
        if (call)
            floe__complete(c, call, FLOE_ERR_UNSUPPORTED, why, NULL);
        return cb ? NULL : call;
    }
    const unsigned ns = c->nshards;
    const size_t n = k.keys ? k.keys->len / k.width : 0;
    /* a request of no keys goes to shard 0 alone (it still says whether the table is there), or
     * with a claim's end to the claim's server (a token names it as an id does); a claim ends
     * alone, once its successors are in on every server */
    const uint64_t token = k.complete ? *k.complete : 0;
    unsigned lone = 0;
    const char *refuse = NULL;
    if (token && n)
        refuse = "over several floed a claim ends with an insert of no states of its own, sent once every insert of "
                 "its successors has been answered";
    else if (token && (lone = (unsigned)(token >> FLOE_ID_SHARD_SHIFT)) >= ns)
        refuse = "the claim's token names no server of this connection";
    uint64_t *from_copy = NULL;
    ProtobufCBinaryData from_was = {0, NULL}, counts_was = {0, NULL};
    uint64_t first_was = 0;
    if (!refuse && k.from_counts && k.from_counts->len) { /* sent as from: each shard's keys' parents */
        if (!(from_copy = from_of_counts(&k, n, why, sizeof why)))
            refuse = why;
        else {
            from_was = *k.from;
            counts_was = *k.from_counts;
            first_was = *k.from_first;
            *k.from = (ProtobufCBinaryData){n * 8, (uint8_t *)from_copy};
            *k.from_counts = (ProtobufCBinaryData){0, NULL};
            *k.from_first = 0;
        }
    }
    if (refuse) {
        floe_call *call = floe__new_call(c, cb, arg);
        if (call)
            floe__complete(c, call, FLOE_ERR_INVALID, refuse, NULL);
        return cb ? NULL : call;
    }
    /* the fields beside the keys that have whole keys' worth (others go as they are: a server says
     * what is wrong with them) */
    column cols[3];
    unsigned ncols = 0;
    ProtobufCBinaryData *beside[3] = {k.values, k.from, k.labels};
    size_t per_key = 0;
    for (unsigned i = 0; i < 3; i++) {
        ProtobufCBinaryData *f = beside[i];
        if (!f || !n || !f->len || f->len % n)
            continue;
        cols[ncols++] = (column){f, f->len / n, *f, NULL};
        per_key += f->len / n;
    }
    /* everything a split needs, at once, so that running out of memory has one way out */
    floe_call *call = floe__new_call(c, cb, arg);
    split *sp = calloc(1, sizeof *sp);
    size_t *start = calloc(2 * (size_t)ns + 1, sizeof *start); /* and at, after it */
    /* the shards' keys and what goes beside them, gathered: packed into each request at once, so
     * the buffer is c's, reused */
    const size_t kbytes = k.keys ? k.keys->len : 0, need = kbytes + n * per_key;
    if (need > c->route_cap) {
        free(c->route_buf);
        c->route_cap = need + need / 2;
        if (!(c->route_buf = malloc(c->route_cap)))
            c->route_cap = 0;
    }
    unsigned char *kb = c->route_buf;
    for (unsigned i = 0, off = 0; kb && i < ncols; off += (unsigned)cols[i++].width)
        cols[i].at = kb + kbytes + n * off;
    if (sp) {
        sp->c = c;
        sp->shard_of = malloc((n ? n : 1) * sizeof *sp->shard_of);
        sp->count = calloc(ns, sizeof *sp->count);
        sp->resp = calloc(ns, sizeof *sp->resp);
    }
    if (!call || !sp || !sp->shard_of || !sp->count || !sp->resp || !start || (need && !kb)) {
        free(start);
        if (sp)
            split_free(sp);
        if (from_copy) {
            *k.from = from_was, *k.from_counts = counts_was, *k.from_first = first_was;
            free(from_copy);
        }
        if (call)
            floe__complete(c, call, FLOE_ERR_IO, "out of memory", NULL);
        return cb ? NULL : call;
    }
    sp->call = call;
    sp->n = n;
    /* each shard's keys together, in the caller's order (a counting sort) */
    size_t *at = start + ns + 1;
    if (!k.ids && !k.vectors) { /* keys: the common case, a tight loop */
        for (size_t i = 0; i < n; i++) {
            uint64_t key;
            memcpy(&key, k.keys->data + i * 8, 8);
            sp->count[sp->shard_of[i] = (uint8_t)floe_shard_of_key(key, ns)]++;
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            uint64_t id;
            sp->count[sp->shard_of[i] = (uint8_t)shard_of(c, &k, i, &id)]++;
        }
    }
    for (unsigned s = 0; s < ns; s++)
        start[s + 1] = start[s] + sp->count[s];
    for (size_t i = 0; i < n; i++) {
        const unsigned s = sp->shard_of[i];
        const size_t j = start[s] + at[s]++;
        if (k.ids) {
            uint64_t id;
            shard_of(c, &k, i, &id); /* the id as its shard knows it */
            memcpy(kb + j * 8, &id, 8);
        } else {
            memcpy(kb + j * k.width, k.keys->data + i * k.width, k.width);
        }
        for (unsigned f = 0; f < ncols; f++)
            memcpy(cols[f].at + j * cols[f].width, cols[f].was.data + i * cols[f].width, cols[f].width);
    }
    const bool everyone = req->op_case == FLOE__V1__REQUEST__OP_PING;
    const ProtobufCBinaryData keys0 = k.keys ? *k.keys : (ProtobufCBinaryData){0, NULL};
    sp->pending = 1; /* until every part is sent: a part that fails at once must not finish the call */
    for (unsigned s = 0; s < ns; s++) {
        if (!everyone && sp->count[s] == 0 && !(n == 0 && s == lone))
            continue;
        if (k.keys) {
            k.keys->data = kb + start[s] * k.width;
            k.keys->len = sp->count[s] * k.width;
        }
        for (unsigned f = 0; f < ncols; f++)
            *cols[f].field = (ProtobufCBinaryData){sp->count[s] * cols[f].width, cols[f].at + start[s] * cols[f].width};
        sp->pending++;
        floe__send_request(c->shards[s], req, part_done, sp); /* packed at once: the buffers may go */
    }
    if (k.keys)
        *k.keys = keys0;
    for (unsigned f = 0; f < ncols; f++)
        *cols[f].field = cols[f].was;
    if (from_copy) {
        *k.from = from_was, *k.from_counts = counts_was, *k.from_first = first_was;
        free(from_copy);
    }
    free(start);
    const uint64_t before = c->completions;
    if (--sp->pending == 0)
        split_done(sp);
    arm(c);
    return cb && c->completions != before ? NULL : call;
}

/* ---- driving the shards ----------------------------------------------------------------------- */

static int shards_poll(floe *c, int timeout_ms)
{
    const uint64_t before = c->completions;
    const uint64_t until = timeout_ms > 0 ? floe__now_ms() + (uint64_t)timeout_ms : 0;
    struct pollfd pfd[FLOE_SHARDS_MAX];
    unsigned who[FLOE_SHARDS_MAX];
    for (;;) {
        unsigned np = 0;
        bool ready = false;
        uint64_t deadline = 0;
        for (unsigned i = 0; i < c->nshards; i++) {
            floe *s = c->shards[i];
            if (s->fd < 0)
                continue;
            if (s->tls && SSL_pending(s->tls) > 0)
                ready = true; /* decrypted bytes wait inside OpenSSL */
            if (s->head && s->head->deadline && (!deadline || s->head->deadline < deadline))
                deadline = s->head->deadline;
            pfd[np] = (struct pollfd){s->fd, (short)(POLLIN | (floe_want_write(s) ? POLLOUT : 0)), 0};
            who[np++] = i;
        }
        if (np == 0) {
            floe__set_error(c, FLOE_ERR_IO, "every server of the partitioned connection is gone");
            return c->completions != before ? (int)(c->completions - before) : -1;
        }
        if (timeout_ms < 0 && !c->head)
            return (int)(c->completions - before); /* nothing in flight: waiting could only hang */
        const uint64_t now = floe__now_ms();
        int wait = ready || timeout_ms == 0 ? 0 : timeout_ms < 0 ? -1 : now >= until ? 0 : (int)(until - now);
        if (deadline && (wait < 0 || (deadline > now ? deadline - now : 0) < (uint64_t)wait))
            wait = deadline > now ? (int)(deadline - now) : 0;
        int rc = poll(pfd, np, wait);
        if (rc < 0 && errno != EINTR)
            return floe__set_error(c, FLOE_ERR_IO, "poll: %s", strerror(errno)), -1;
        const uint64_t after = floe__now_ms();
        for (unsigned j = 0; j < np; j++) {
            floe *s = c->shards[who[j]];
            const bool late = s->head && s->head->deadline && after >= s->head->deadline;
            if ((rc > 0 && pfd[j].revents) || late || (s->tls && SSL_pending(s->tls) > 0))
                floe_poll(s, 0);
        }
        arm(c);
        if (c->completions != before || timeout_ms == 0 || (timeout_ms > 0 && after >= until))
            return (int)(c->completions - before);
    }
}

/* ---- whole-table operations, shard by shard -------------------------------------------------------- */

static int shards_create(floe *c, const floe_table_def *def)
{
    if (def->kind == FLOE_TABLE_ORDERED)
        return floe__set_error(c, FLOE_ERR_UNSUPPORTED,
                               "an ORDERED table is not partitioned (its ranges would visit every server): create it "
                               "on one server");
    const uint64_t set = c->shards[0]->check.shard_set;
    for (unsigned i = 0; i < c->nshards; i++) {
        int st = floe__create_shard(c->shards[i], def, i, c->nshards, set);
        if (st == FLOE_OK)
            continue;
        floe__set_error(c, st, "shard %u of %u (%s): %s", i + 1, c->nshards, c->shard_names[i],
                        floe_errstr(c->shards[i]));
        for (unsigned j = 0; j < i; j++) /* what this call made goes again: a failed create changes nothing */
            floe_drop(c->shards[j], def->name);
        return st;
    }
    c->err = FLOE_OK, c->errstr[0] = '\0';
    return FLOE_OK;
}

static int shards_each(floe *c, int (*op)(floe *sub, const char *table), const char *table)
{
    int first = FLOE_OK;
    for (unsigned i = 0; i < c->nshards; i++) {
        int st = op(c->shards[i], table);
        if (st != FLOE_OK && first == FLOE_OK) {
            first = st;
            floe__set_error(c, st, "shard %u of %u (%s): %s", i + 1, c->nshards, c->shard_names[i],
                            floe_errstr(c->shards[i]));
        }
    }
    if (first == FLOE_OK)
        c->err = FLOE_OK, c->errstr[0] = '\0';
    return first;
}

/* b's figures added to a's (the sum of a table's shards). */
static void add_info(floe_table_info *a, const floe_table_info *b)
{
    a->keys += b->keys;
    a->tombstones += b->tombstones;
    a->slots += b->slots;
    a->memory_bytes += b->memory_bytes;
    a->capacity += b->capacity;
    a->nodes += b->nodes;
    a->node_slots += b->node_slots;
    a->orphan_nodes += b->orphan_nodes;
    a->generation = a->generation > b->generation ? a->generation : b->generation;
    /* an exploring table's run has ended when it has on every server */
    a->explore.done = a->explore.done && b->explore.done;
    a->frozen = a->frozen && b->frozen;
    a->explore.states += b->explore.states;
    a->explore.open += b->explore.open;
    a->explore.claimed += b->explore.claimed;
    a->explore.claims += b->explore.claims;
    a->explore.levels = a->explore.levels > b->explore.levels ? a->explore.levels : b->explore.levels;
    if (strcmp(a->explore.memory, b->explore.memory) != 0) /* each shard's where its floed keeps it */
        snprintf(a->explore.memory, sizeof a->explore.memory, "several");
    for (int l = 0; l < 3; l++) {
        a->level[l].slots += b->level[l].slots;
        a->level[l].used += b->level[l].used;
        a->level[l].fill = a->level[l].slots ? (double)a->level[l].used / (double)a->level[l].slots : 0;
    }
}

/* What no sum can say is cleared; ratios are of the sums. */
static void summed(floe_table_info *a, double fill_weight)
{
    a->fill = a->slots ? fill_weight / (double)a->slots : 0;
    a->bytes_per_key = a->keys ? (double)a->memory_bytes / (double)a->keys : 0;
    a->node_fill = a->node_slots ? (double)a->nodes / (double)a->node_slots : 0;
    a->n_stages = 0;
    a->n_parts = 0;
    a->device = -1;
    a->shard = a->shards = 0;
    a->shard_set = 0;
}

static int shards_stats(floe *c, const char *table, floe_table_info *info)
{
    double fill = 0, compression = 0;
    for (unsigned i = 0; i < c->nshards; i++) {
        floe_table_info one;
        int st = floe_stats(c->shards[i], table, &one);
        if (st != FLOE_OK)
            return floe__set_error(c, st, "shard %u of %u (%s): %s", i + 1, c->nshards, c->shard_names[i],
                                   floe_errstr(c->shards[i]));
        if (i == 0) {
            *info = one;
            info->keys = info->tombstones = info->slots = info->memory_bytes = info->capacity = 0;
            info->nodes = info->node_slots = info->orphan_nodes = info->generation = 0;
            info->explore.states = info->explore.open = info->explore.claimed = info->explore.claims = 0;
            info->explore.levels = 0;
            info->explore.done = one.explore.done;
            for (int l = 0; l < 3; l++) /* row_bits: shard 0's */
                info->level[l].slots = info->level[l].used = 0;
        }
        fill += one.fill * (double)one.slots;
        compression += one.compression * (double)one.keys;
        add_info(info, &one);
    }
    summed(info, fill);
    info->compression = info->keys ? compression / (double)info->keys : 0;
    c->err = FLOE_OK, c->errstr[0] = '\0';
    return FLOE_OK;
}

static int shards_tables(floe *c, floe_table_info **tables, size_t *n)
{
    *tables = NULL;
    *n = 0;
    floe_table_info *mine = NULL;
    size_t count = 0;
    int st = floe_tables(c->shards[0], &mine, &count);
    if (st != FLOE_OK)
        return floe__set_error(c, st, "shard 1 of %u (%s): %s", c->nshards, c->shard_names[0],
                               floe_errstr(c->shards[0]));
    double *fill = calloc(count + 1, sizeof *fill);
    if (!fill) {
        free(mine);
        return floe__set_error(c, FLOE_ERR_IO, "out of memory");
    }
    for (size_t t = 0; t < count; t++)
        fill[t] = mine[t].fill * (double)mine[t].slots;
    for (unsigned i = 1; i < c->nshards; i++) { /* the figures of shard 0's tables summed over every shard */
        floe_table_info *theirs = NULL;
        size_t m = 0;
        if ((st = floe_tables(c->shards[i], &theirs, &m)) != FLOE_OK) {
            free(mine);
            free(fill);
            return floe__set_error(c, st, "shard %u of %u (%s): %s", i + 1, c->nshards, c->shard_names[i],
                                   floe_errstr(c->shards[i]));
        }
        for (size_t t = 0; t < count; t++)
            for (size_t u = 0; u < m; u++)
                if (strcmp(mine[t].name, theirs[u].name) == 0) {
                    fill[t] += theirs[u].fill * (double)theirs[u].slots;
                    add_info(&mine[t], &theirs[u]);
                }
        free(theirs);
    }
    for (size_t t = 0; t < count; t++)
        summed(&mine[t], fill[t]);
    free(fill);
    *tables = mine;
    *n = count;
    c->err = FLOE_OK, c->errstr[0] = '\0';
    return FLOE_OK;
}

/* A partitioned scan walks shard 0 to the end, then shard 1, ...: the
 * cursor's `started` holds 1 + 2 x shard + (whether that shard's scan has
 * begun), its bytes that shard's cursor. */
static int shards_scan(floe *c, const char *table, floe_cursor *cursor, size_t limit, unsigned words, uint64_t *keys,
                       void *values, unsigned value_bytes, uint64_t *ids, uint32_t *vectors, size_t *n, int *done)
{
    *n = 0;
    *done = 0;
    unsigned shard = cursor->started ? (unsigned)(cursor->started - 1) / 2 : 0;
    if (cursor->started < 0 || shard >= c->nshards)
        return floe__set_error(c, FLOE_ERR_INVALID, "the scan cursor is not one of this partitioned connection");
    for (;;) {
        floe_cursor sub = *cursor;
        sub.started = cursor->started ? (cursor->started - 1) % 2 : 0;
        size_t got = 0;
        int sub_done = 0, st;
        floe *s = c->shards[shard];
        if (words)
            st = floe_scan_vectors(s, table, &sub, limit, words, ids, vectors, &got, &sub_done);
        else
            st = floe_scan(s, table, &sub, limit, keys, values, value_bytes, &got, &sub_done);
        if (st != FLOE_OK)
            return floe__set_error(c, st, "shard %u of %u (%s): %s", shard + 1, c->nshards, c->shard_names[shard],
                                   floe_errstr(s));
        for (size_t i = 0; ids && i < got; i++)
            ids[i] = id_of_shard(ids[i], shard);
        if (sub_done && shard + 1 < c->nshards) { /* the next shard, from its start */
            shard++;
            memset(cursor->bytes, 0, sizeof cursor->bytes);
            cursor->started = (int)(1 + 2 * shard);
        } else {
            memcpy(cursor->bytes, sub.bytes, sizeof cursor->bytes);
            cursor->started = (int)(1 + 2 * shard + 1);
            *done = sub_done;
        }
        if (got || *done) {
            *n = got;
            c->err = FLOE_OK, c->errstr[0] = '\0';
            return FLOE_OK;
        }
    }
}

static const floe_router ROUTER = {
    .send = shards_send,
    .poll = shards_poll,
    .close = shards_close,
    .create = shards_create,
    .each = shards_each,
    .stats = shards_stats,
    .tables = shards_tables,
    .scan = shards_scan,
};
