/*
 * floe.c - libfloe (see floe.h).
 *
 * One non-blocking socket; requests are packed into an output buffer at
 * send time, and floe_poll writes it out while reading responses, so a
 * client never deadlocks against a server that is pushing back.  Calls in
 * flight wait in a list; a response completes the call with its id
 * (responses on different tables may overtake each other).
 */
#define _GNU_SOURCE
#include "floe.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "floe.pb-c.h"
#include "floe_internal.h"

struct floe_call {
    uint64_t id;
    bool done;
    int status;
    char *error;
    Floe__V1__Response *resp;
    floe_callback *cb;
    void *arg;
    floe_call *next, *prev;
};

struct floe {
    int fd;
    int err;
    char errstr[256];
    uint64_t next_id;
    unsigned char *out;
    size_t out_len, out_off, out_cap;
    unsigned char *in;
    size_t in_len, in_cap;
    floe_call *head, *tail; /* in flight */
    size_t inflight;
    floe_server_info info;
    /* An error response with no call's id (id 0): the server could not read
     * a frame, or refuses the connection (max-connections).  When the
     * connection ends right after it, it is the reason, not the EOF. */
    int bye_status;
    char bye_msg[256];
};

static int set_error(floe *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int set_error(floe *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    c->err = code;
    vsnprintf(c->errstr, sizeof c->errstr, fmt, ap);
    va_end(ap);
    return code;
}

const char *floe_strerror(int code)
{
    if (code == FLOE_ERR_IO)
        return "ERR_IO";
    if (code == FLOE_ERR_PROTOCOL)
        return "ERR_PROTOCOL";
    return floe_wire_status_name(code);
}

int floe_error(const floe *c)
{
    return c ? c->err : FLOE_ERR_IO;
}

const char *floe_errstr(const floe *c)
{
    return c ? c->errstr : "out of memory";
}

const floe_server_info *floe_info(const floe *c)
{
    return &c->info;
}

const char *floe_version(void)
{
    return FLOE_VERSION;
}

size_t floe_inflight(const floe *c)
{
    return c->inflight;
}

int floe_fd(const floe *c)
{
    return c->fd;
}

int floe_want_write(const floe *c)
{
    return c->fd >= 0 && c->out_off < c->out_len;
}

/* ---- calls ------------------------------------------------------------------------------------- */

static void complete(floe *c, floe_call *call, int status, const char *error, Floe__V1__Response *resp)
{
    if (call->prev)
        call->prev->next = call->next;
    else
        c->head = call->next;
    if (call->next)
        call->next->prev = call->prev;
    else
        c->tail = call->prev;
    call->next = call->prev = NULL;
    c->inflight--;
    call->done = true;
    call->status = status;
    call->error = strdup(error ? error : "");
    call->resp = resp;
    if (call->cb) {
        call->cb(c, call, call->arg);
        floe_call_free(call);
    }
}

/* The connection is gone: every call in flight fails with c's error. */
static void fail_all(floe *c)
{
    while (c->head)
        complete(c, c->head, c->err ? c->err : FLOE_ERR_IO, c->errstr, NULL);
}

static int handle_frames(floe *c);

/* Room for 64 KiB more input; 0 or -1 when out of memory. */
static int reserve_in(floe *c)
{
    if (c->in_cap - c->in_len >= 65536)
        return 0;
    size_t cap = c->in_cap ? c->in_cap * 2 : 131072;
    unsigned char *grown = realloc(c->in, cap);
    if (!grown)
        return -1;
    c->in = grown;
    c->in_cap = cap;
    return 0;
}

/* The connection ended (detail says how).  What the server sent before it
 * is still read: answers complete their calls, and an error response with
 * id 0 (ERR_BUSY at max-connections, a frame above max-frame) becomes the
 * error of the calls left, instead of "connection reset". */
static void broken(floe *c, const char *fmt, const char *detail)
{
    const int fd = c->fd;
    c->fd = -1; /* callbacks run below must not use the socket */
    set_error(c, FLOE_ERR_IO, fmt, detail);
    if (fd >= 0) {
        for (;;) {
            if (reserve_in(c) != 0)
                break;
            ssize_t r = recv(fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            c->in_len += (size_t)r;
        }
        close(fd);
        handle_frames(c);
        if (c->bye_status == FLOE_OK)
            set_error(c, FLOE_ERR_IO, fmt, detail);
    }
    if (c->bye_status != FLOE_OK)
        set_error(c, c->bye_status, "%s", c->bye_msg);
    fail_all(c);
}

static floe_call *new_call(floe *c, floe_callback *cb, void *arg)
{
    floe_call *call = calloc(1, sizeof *call);
    if (!call)
        return NULL;
    call->id = ++c->next_id;
    call->cb = cb;
    call->arg = arg;
    call->prev = c->tail;
    if (c->tail)
        c->tail->next = call;
    else
        c->head = call;
    c->tail = call;
    c->inflight++;
    return call;
}

/* Packs req into the output buffer and registers call; on a broken
 * connection the call completes at once with FLOE_ERR_IO. */
static floe_call *send_request(floe *c, Floe__V1__Request *req, floe_callback *cb, void *arg)
{
    floe_call *call = new_call(c, cb, arg);
    if (!call)
        return NULL;
    req->id = call->id;
    if (c->fd < 0) {
        complete(c, call, FLOE_ERR_IO, c->errstr[0] ? c->errstr : "not connected", NULL);
        return cb ? NULL : call;
    }
    size_t len = floe__v1__request__get_packed_size(req);
    if (len > UINT32_MAX || (c->info.max_frame && len > c->info.max_frame)) {
        char msg[128];
        snprintf(msg, sizeof msg, "request of %zu bytes is above the server's max-frame (%llu)", len,
                 (unsigned long long)c->info.max_frame);
        complete(c, call, FLOE_ERR_TOO_LARGE, msg, NULL);
        return cb ? NULL : call;
    }
    if (c->out_off == c->out_len)
        c->out_off = c->out_len = 0;
    if (c->out_len + 4 + len > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 65536;
        while (cap < c->out_len + 4 + len)
            cap *= 2;
        unsigned char *grown = realloc(c->out, cap);
        if (!grown) {
            complete(c, call, FLOE_ERR_IO, "out of memory", NULL);
            return cb ? NULL : call;
        }
        c->out = grown;
        c->out_cap = cap;
    }
    unsigned char *p = c->out + c->out_len;
    p[0] = (unsigned char)(len >> 24);
    p[1] = (unsigned char)(len >> 16);
    p[2] = (unsigned char)(len >> 8);
    p[3] = (unsigned char)len;
    floe__v1__request__pack(req, p + 4);
    c->out_len += 4 + len;
    floe_poll(c, 0); /* start writing at once */
    return call;
}

/* ---- I/O ---------------------------------------------------------------------------------------- */

static int handle_frames(floe *c)
{
    int completed = 0;
    size_t off = 0;
    while (c->in_len - off >= 4) {
        const unsigned char *p = c->in + off;
        uint32_t len = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        if (c->in_len - off - 4 < len)
            break;
        Floe__V1__Response *r = floe__v1__response__unpack(NULL, len, p + 4);
        off += 4 + (size_t)len;
        if (!r) {
            c->err = FLOE_ERR_PROTOCOL;
            snprintf(c->errstr, sizeof c->errstr, "a response of %u bytes does not parse", len);
            continue;
        }
        /* A status is a Status code: not -1 ("not done") or libfloe's own codes */
        int status = (int)r->status;
        char msg[96];
        const char *error = r->error;
        if (status < 0 || status >= FLOE_ERR_IO) {
            snprintf(msg, sizeof msg, "the server answered with status %d, which is no floe status", status);
            status = FLOE_ERR_PROTOCOL;
            error = msg;
        }
        floe_call *call = c->head;
        while (call && call->id != r->id)
            call = call->next;
        if (!call) {
            /* id 0: the server answers a frame it could not read, or refuses
             * the connection; keep the message, the close may follow */
            if (status != FLOE_OK) {
                set_error(c, status, "%s", error ? error : "");
                c->bye_status = status;
                snprintf(c->bye_msg, sizeof c->bye_msg, "%s", error ? error : "");
            }
            floe__v1__response__free_unpacked(r, NULL);
            continue;
        }
        c->bye_status = FLOE_OK; /* the connection went on after it */
        complete(c, call, status, error, r);
        completed++;
    }
    if (off) {
        memmove(c->in, c->in + off, c->in_len - off);
        c->in_len -= off;
    }
    return completed;
}

int floe_poll(floe *c, int timeout_ms)
{
    int completed = 0;
    for (;;) {
        if (c->fd < 0)
            return completed ? completed : -1;
        struct pollfd pfd = {c->fd, POLLIN | (c->out_off < c->out_len ? POLLOUT : 0), 0};
        int wait = completed ? 0 : timeout_ms;
        int rc = poll(&pfd, 1, wait);
        if (rc < 0) {
            if (errno == EINTR)
                continue;
            broken(c, "poll: %s", strerror(errno));
            return -1;
        }
        if (rc == 0)
            return completed;
        if (pfd.revents & POLLOUT) {
            ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
            if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                broken(c, "send: %s", strerror(errno));
                return -1;
            }
            if (w > 0)
                c->out_off += (size_t)w;
        }
        if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
            if (reserve_in(c) != 0) {
                broken(c, "%s", "out of memory");
                return -1;
            }
            ssize_t r = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
            if (r == 0) {
                broken(c, "%s", "the server closed the connection");
                return completed ? completed : -1;
            }
            if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                broken(c, "recv: %s", strerror(errno));
                return -1;
            }
            if (r > 0) {
                c->in_len += (size_t)r;
                completed += handle_frames(c);
            }
        }
        if (timeout_ms == 0 && !(pfd.revents & POLLIN))
            return completed;
        if (completed && timeout_ms >= 0 && c->out_off == c->out_len)
            return completed;
    }
}

int floe_wait(floe *c, floe_call *call)
{
    while (!call->done) {
        if (floe_poll(c, -1) < 0 && !call->done)
            return FLOE_ERR_IO;
    }
    return call->status;
}

int floe_wait_all(floe *c)
{
    while (c->inflight > 0)
        if (floe_poll(c, -1) < 0)
            return FLOE_ERR_IO;
    return c->err == FLOE_ERR_IO ? FLOE_ERR_IO : FLOE_OK;
}

/* ---- call accessors ----------------------------------------------------------------------------- */

int floe_call_status(const floe_call *call)
{
    return call->done ? call->status : -1;
}

const char *floe_call_error(const floe_call *call)
{
    return call->error ? call->error : "";
}

uint64_t floe_call_id(const floe_call *call)
{
    return call->id;
}

const uint8_t *floe_call_results(const floe_call *call, size_t *n)
{
    *n = call->resp ? call->resp->results.len : 0;
    return call->resp ? call->resp->results.data : NULL;
}

const unsigned char *floe_call_ids(const floe_call *call, size_t *bytes)
{
    *bytes = call->resp ? call->resp->ids.len : 0;
    return call->resp ? call->resp->ids.data : NULL;
}

const unsigned char *floe_call_values(const floe_call *call, size_t *bytes)
{
    *bytes = call->resp ? call->resp->values.len : 0;
    return call->resp ? call->resp->values.data : NULL;
}

const unsigned char *floe_call_vectors(const floe_call *call, size_t *bytes)
{
    *bytes = call->resp ? call->resp->vectors.len : 0;
    return call->resp ? call->resp->vectors.data : NULL;
}

void floe_call_counts(const floe_call *call, floe_counts *k)
{
    memset(k, 0, sizeof *k);
    if (!call->resp)
        return;
    k->inserted = call->resp->inserted;
    k->present = call->resp->present;
    k->absent = call->resp->absent;
    k->full = call->resp->full;
    k->erased = call->resp->erased;
}

void floe_call_free(floe_call *call)
{
    if (!call)
        return;
    if (call->resp)
        floe__v1__response__free_unpacked(call->resp, NULL);
    free(call->error);
    free(call);
}

/* ---- sending ------------------------------------------------------------------------------------ */

floe_call *floe_send_insert(floe *c, const char *table, const uint64_t *keys, size_t n, const void *values,
                            size_t values_len, unsigned flags, floe_callback *cb, void *arg)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Insert in = FLOE__V1__INSERT__INIT;
    in.table = (char *)table;
    in.keys.data = (uint8_t *)keys;
    in.keys.len = n * 8;
    in.values.data = (uint8_t *)values;
    in.values.len = values ? values_len : 0;
    in.overwrite = (flags & FLOE_OVERWRITE) != 0;
    in.want_ids = (flags & FLOE_WANT_IDS) != 0;
    req.op_case = FLOE__V1__REQUEST__OP_INSERT;
    req.insert = &in;
    return send_request(c, &req, cb, arg);
}

floe_call *floe_send_find(floe *c, const char *table, const uint64_t *keys, size_t n, unsigned flags, floe_callback *cb,
                          void *arg)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Find f = FLOE__V1__FIND__INIT;
    f.table = (char *)table;
    f.keys.data = (uint8_t *)keys;
    f.keys.len = n * 8;
    f.want_ids = (flags & FLOE_WANT_IDS) != 0;
    f.want_values = (flags & FLOE_WANT_VALUES) != 0;
    req.op_case = FLOE__V1__REQUEST__OP_FIND;
    req.find = &f;
    return send_request(c, &req, cb, arg);
}

floe_call *floe_send_erase(floe *c, const char *table, const uint64_t *keys, size_t n, floe_callback *cb, void *arg)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Erase e = FLOE__V1__ERASE__INIT;
    e.table = (char *)table;
    e.keys.data = (uint8_t *)keys;
    e.keys.len = n * 8;
    req.op_case = FLOE__V1__REQUEST__OP_ERASE;
    req.erase = &e;
    return send_request(c, &req, cb, arg);
}

/* A call that fails here, before anything is sent: completed at once, as
 * send_request does for a broken connection. */
static floe_call *refuse_call(floe *c, int status, const char *msg, floe_callback *cb, void *arg)
{
    floe_call *call = new_call(c, cb, arg);
    if (!call)
        return NULL;
    complete(c, call, status, msg, NULL);
    return cb ? NULL : call;
}

static floe_call *send_vectors(floe *c, int op, const char *table, const uint32_t *vectors, size_t n, unsigned words,
                               unsigned flags, floe_callback *cb, void *arg)
{
    if (words == 0 && n > 0)
        return refuse_call(c, FLOE_ERR_INVALID, "words must be the TREE table's words per vector (2..256), not 0", cb,
                           arg);
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Insert in = FLOE__V1__INSERT__INIT;
    Floe__V1__Find f = FLOE__V1__FIND__INIT;
    const size_t len = n * words * 4; /* little-endian u32 words: the host's order on the platforms floe runs on */
    if (op == FLOE__V1__REQUEST__OP_INSERT) {
        in.table = (char *)table;
        in.keys.data = (uint8_t *)vectors;
        in.keys.len = len;
        in.want_ids = (flags & FLOE_WANT_IDS) != 0;
        req.insert = &in;
    } else {
        f.table = (char *)table;
        f.keys.data = (uint8_t *)vectors;
        f.keys.len = len;
        f.want_ids = (flags & FLOE_WANT_IDS) != 0;
        req.find = &f;
    }
    req.op_case = (Floe__V1__Request__OpCase)op;
    return send_request(c, &req, cb, arg);
}

floe_call *floe_send_insert_vectors(floe *c, const char *table, const uint32_t *vectors, size_t n, unsigned words,
                                    unsigned flags, floe_callback *cb, void *arg)
{
    return send_vectors(c, FLOE__V1__REQUEST__OP_INSERT, table, vectors, n, words, flags, cb, arg);
}

floe_call *floe_send_find_vectors(floe *c, const char *table, const uint32_t *vectors, size_t n, unsigned words,
                                  unsigned flags, floe_callback *cb, void *arg)
{
    return send_vectors(c, FLOE__V1__REQUEST__OP_FIND, table, vectors, n, words, flags, cb, arg);
}

floe_call *floe_send_get_by_id(floe *c, const char *table, const uint64_t *ids, size_t n, floe_callback *cb, void *arg)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__GetById g = FLOE__V1__GET_BY_ID__INIT;
    g.table = (char *)table;
    g.ids.data = (uint8_t *)ids;
    g.ids.len = n * 8;
    req.op_case = FLOE__V1__REQUEST__OP_GET_BY_ID;
    req.get_by_id = &g;
    return send_request(c, &req, cb, arg);
}

floe_call *floe_send_ping(floe *c, floe_callback *cb, void *arg)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Ping p = FLOE__V1__PING__INIT;
    req.op_case = FLOE__V1__REQUEST__OP_PING;
    req.ping = &p;
    return send_request(c, &req, cb, arg);
}

/* ---- blocking calls: send + wait ------------------------------------------------------------------ */

/* Waits for a future, records its error on c, and returns its status. */
static int finish(floe *c, floe_call *call)
{
    if (!call)
        return set_error(c, FLOE_ERR_IO, "out of memory");
    int st = floe_wait(c, call);
    if (st != FLOE_OK)
        set_error(c, st, "%s", floe_call_error(call)[0] ? floe_call_error(call) : floe_strerror(st));
    else
        c->err = FLOE_OK, c->errstr[0] = '\0';
    return st;
}

/* Sends req, waits, and keeps only the status: for calls with no answer body. */
static int simple_call(floe *c, Floe__V1__Request *req)
{
    floe_call *call = send_request(c, req, NULL, NULL);
    int st = finish(c, call);
    floe_call_free(call);
    return st;
}

static int copy_key_answers(floe *c, floe_call *call, size_t n, uint8_t *results, void *values, size_t vbytes,
                            floe_counts *counts)
{
    size_t got, vgot;
    const uint8_t *r = floe_call_results(call, &got);
    const unsigned char *v = floe_call_values(call, &vgot);
    if (got != n || (values && vgot != vbytes)) {
        floe_call_free(call);
        return set_error(c, FLOE_ERR_PROTOCOL, "the server answered %zu keys of %zu", got, n);
    }
    if (results && n)
        memcpy(results, r, n);
    if (values && vbytes)
        memcpy(values, v, vbytes);
    if (counts)
        floe_call_counts(call, counts);
    floe_call_free(call);
    return FLOE_OK;
}

int floe_ping(floe *c)
{
    floe_call *call = floe_send_ping(c, NULL, NULL);
    int st = finish(c, call);
    floe_call_free(call);
    return st;
}

int floe_insert(floe *c, const char *table, const uint64_t *keys, size_t n, uint8_t *results, floe_counts *counts)
{
    floe_call *call = floe_send_insert(c, table, keys, n, NULL, 0, 0, NULL, NULL);
    int st = finish(c, call);
    if (st != FLOE_OK) {
        floe_call_free(call);
        return st;
    }
    return copy_key_answers(c, call, n, results, NULL, 0, counts);
}

int floe_insert_values(floe *c, const char *table, const uint64_t *keys, const void *values, size_t n,
                       unsigned value_bytes, int overwrite, uint8_t *results, void *old_values, floe_counts *counts)
{
    floe_call *call =
        floe_send_insert(c, table, keys, n, values, n * value_bytes, overwrite ? FLOE_OVERWRITE : 0, NULL, NULL);
    int st = finish(c, call);
    if (st != FLOE_OK) {
        floe_call_free(call);
        return st;
    }
    return copy_key_answers(c, call, n, results, old_values, old_values ? n * value_bytes : 0, counts);
}

int floe_find(floe *c, const char *table, const uint64_t *keys, size_t n, uint8_t *results, void *values,
              unsigned value_bytes, floe_counts *counts)
{
    floe_call *call = floe_send_find(c, table, keys, n, values ? FLOE_WANT_VALUES : 0, NULL, NULL);
    int st = finish(c, call);
    if (st != FLOE_OK) {
        floe_call_free(call);
        return st;
    }
    return copy_key_answers(c, call, n, results, values, values ? n * value_bytes : 0, counts);
}

int floe_erase(floe *c, const char *table, const uint64_t *keys, size_t n, uint8_t *results, floe_counts *counts)
{
    floe_call *call = floe_send_erase(c, table, keys, n, NULL, NULL);
    int st = finish(c, call);
    if (st != FLOE_OK) {
        floe_call_free(call);
        return st;
    }
    return copy_key_answers(c, call, n, results, NULL, 0, counts);
}

/* Blocking insert or find of vectors: send + wait + copy the answers. */
static int vectors_call(floe *c, floe_call *call, size_t n, uint8_t *results, uint64_t *ids, floe_counts *counts)
{
    int st = finish(c, call);
    if (st != FLOE_OK) {
        floe_call_free(call);
        return st;
    }
    size_t idb;
    const unsigned char *got_ids = floe_call_ids(call, &idb);
    if (ids && idb != n * 8) {
        floe_call_free(call);
        return set_error(c, FLOE_ERR_PROTOCOL, "the server answered %zu ids for %zu vectors", idb / 8, n);
    }
    if (ids && n)
        memcpy(ids, got_ids, n * 8);
    return copy_key_answers(c, call, n, results, NULL, 0, counts);
}

int floe_insert_vectors(floe *c, const char *table, const uint32_t *vectors, size_t n, unsigned words, uint8_t *results,
                        uint64_t *ids, floe_counts *counts)
{
    return vectors_call(c, floe_send_insert_vectors(c, table, vectors, n, words, ids ? FLOE_WANT_IDS : 0, NULL, NULL),
                        n, results, ids, counts);
}

int floe_find_vectors(floe *c, const char *table, const uint32_t *vectors, size_t n, unsigned words, uint8_t *results,
                      uint64_t *ids, floe_counts *counts)
{
    return vectors_call(c, floe_send_find_vectors(c, table, vectors, n, words, ids ? FLOE_WANT_IDS : 0, NULL, NULL), n,
                        results, ids, counts);
}

int floe_get_by_id(floe *c, const char *table, const uint64_t *ids, size_t n, unsigned words, uint8_t *results,
                   uint32_t *vectors)
{
    if (words == 0 && vectors && n > 0)
        return set_error(c, FLOE_ERR_INVALID, "words must be the TREE table's words per vector (2..256), not 0");
    floe_call *call = floe_send_get_by_id(c, table, ids, n, NULL, NULL);
    int st = finish(c, call);
    if (st != FLOE_OK) {
        floe_call_free(call);
        return st;
    }
    size_t vbytes;
    const unsigned char *v = floe_call_vectors(call, &vbytes);
    if (vectors && vbytes != n * words * 4) {
        if (n > 0 && vbytes % (n * 4) == 0)
            st = set_error(c, FLOE_ERR_INVALID, "table %s holds vectors of %zu words; the call said words = %u", table,
                           vbytes / (n * 4), words);
        else
            st = set_error(c, FLOE_ERR_PROTOCOL, "the server answered %zu bytes of vectors for %zu ids", vbytes, n);
        floe_call_free(call);
        return st;
    }
    if (vectors && n)
        memcpy(vectors, v, vbytes);
    return copy_key_answers(c, call, n, results, NULL, 0, NULL);
}

int floe_create(floe *c, const floe_table_def *def)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__CreateTable ct = FLOE__V1__CREATE_TABLE__INIT;
    Floe__V1__TableSpec spec = FLOE__V1__TABLE_SPEC__INIT;
    spec.name = (char *)(def->name ? def->name : "");
    spec.kind = (Floe__V1__TableKind)def->kind;
    spec.key_bits = def->key_bits;
    spec.value_bytes = def->value_bytes;
    spec.capacity = def->capacity;
    spec.grow = def->grow != 0;
    spec.max_fill = def->max_fill;
    spec.backend = (char *)(def->backend ? def->backend : "");
    spec.words = def->words;
    spec.memory = def->memory;
    ct.spec = &spec;
    req.op_case = FLOE__V1__REQUEST__OP_CREATE_TABLE;
    req.create_table = &ct;
    return simple_call(c, &req);
}

int floe_drop(floe *c, const char *table)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__DropTable d = FLOE__V1__DROP_TABLE__INIT;
    d.table = (char *)table;
    req.op_case = FLOE__V1__REQUEST__OP_DROP_TABLE;
    req.drop_table = &d;
    return simple_call(c, &req);
}

int floe_snapshot(floe *c, const char *table)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Snapshot s = FLOE__V1__SNAPSHOT__INIT;
    s.table = (char *)(table ? table : "");
    req.op_case = FLOE__V1__REQUEST__OP_SNAPSHOT;
    req.snapshot = &s;
    return simple_call(c, &req);
}

static void info_from(floe_table_info *o, const Floe__V1__TableStats *s)
{
    memset(o, 0, sizeof *o);
    if (s->spec) {
        snprintf(o->name, sizeof o->name, "%s", s->spec->name ? s->spec->name : "");
        o->kind = (int)s->spec->kind;
        o->key_bits = s->spec->key_bits;
        o->value_bytes = s->spec->value_bytes;
        o->capacity = s->spec->capacity;
        o->grow = s->spec->grow;
        o->max_fill = s->spec->max_fill;
        o->seed = s->spec->seed;
        o->words = s->spec->words;
        o->memory = s->spec->memory;
    }
    o->nodes = s->nodes;
    o->node_slots = s->node_slots;
    o->node_fill = s->node_fill;
    o->orphan_nodes = s->orphan_nodes;
    o->compression = s->compression;
    o->keys = s->keys;
    o->tombstones = s->tombstones;
    o->slots = s->slots;
    o->memory_bytes = s->memory_bytes;
    o->generation = s->generation;
    o->fill = s->fill;
    o->bytes_per_key = s->bytes_per_key;
    snprintf(o->backend, sizeof o->backend, "%s", s->backend ? s->backend : "");
    for (size_t i = 0; i < s->n_stages && o->n_stages < sizeof o->stages / sizeof o->stages[0]; i++) {
        floe_stage_info *d = &o->stages[o->n_stages++];
        snprintf(d->name, sizeof d->name, "%s", s->stages[i]->name ? s->stages[i]->name : "");
        d->count = s->stages[i]->count;
        d->keys = s->stages[i]->keys;
        d->nanos = s->stages[i]->nanos;
    }
    for (size_t l = 0; l < s->n_levels && l < 3; l++) {
        o->level[l].slots = s->levels[l]->slots;
        o->level[l].used = s->levels[l]->used;
        o->level[l].row_bits = s->levels[l]->row_bits;
        o->level[l].fill = s->levels[l]->fill;
    }
}

int floe_stats(floe *c, const char *table, floe_table_info *info)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Stats s = FLOE__V1__STATS__INIT;
    s.table = (char *)table;
    req.op_case = FLOE__V1__REQUEST__OP_STATS;
    req.stats = &s;
    floe_call *call = send_request(c, &req, NULL, NULL);
    int st = finish(c, call);
    if (st == FLOE_OK) {
        if (call->resp->body_case != FLOE__V1__RESPONSE__BODY_STATS)
            st = set_error(c, FLOE_ERR_PROTOCOL, "stats reply without stats");
        else
            info_from(info, call->resp->stats);
    }
    floe_call_free(call);
    return st;
}

int floe_tables(floe *c, floe_table_info **tables, size_t *n)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__ListTables l = FLOE__V1__LIST_TABLES__INIT;
    req.op_case = FLOE__V1__REQUEST__OP_LIST_TABLES;
    req.list_tables = &l;
    *tables = NULL;
    *n = 0;
    floe_call *call = send_request(c, &req, NULL, NULL);
    int st = finish(c, call);
    if (st == FLOE_OK && call->resp->body_case == FLOE__V1__RESPONSE__BODY_TABLES) {
        const Floe__V1__TableList *tl = call->resp->tables;
        *tables = calloc(tl->n_tables + 1, sizeof **tables);
        if (!*tables) {
            st = set_error(c, FLOE_ERR_IO, "out of memory");
        } else {
            for (size_t i = 0; i < tl->n_tables; i++)
                info_from(&(*tables)[i], tl->tables[i]);
            *n = tl->n_tables;
        }
    } else if (st == FLOE_OK) {
        st = set_error(c, FLOE_ERR_PROTOCOL, "list reply without tables");
    }
    floe_call_free(call);
    return st;
}

void floe_server_stats_free(floe_server_stats *s)
{
    if (!s)
        return;
    free(s->version);
    free(s->build);
    free(s->backend);
    free(s->gpu);
    free(s->last_snapshot_status);
    free(s->data_dir);
    free(s->metrics_address);
    free(s->ops);
    free(s->errors);
    free(s->tables);
    free(s);
}

static char *dup_str(const char *s, bool *oom)
{
    char *d = strdup(s ? s : "");
    if (!d)
        *oom = true;
    return d;
}

/* The plain C copy of an InfoReply; NULL when out of memory. */
static floe_server_stats *server_stats_from(const Floe__V1__InfoReply *r)
{
    floe_server_stats *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    bool oom = false;
    s->version = dup_str(r->version, &oom);
    s->build = dup_str(r->build, &oom);
    s->backend = dup_str(r->backend, &oom);
    s->gpu = dup_str(r->gpu, &oom);
    s->last_snapshot_status = dup_str(r->last_snapshot_status, &oom);
    s->data_dir = dup_str(r->data_dir, &oom);
    s->metrics_address = dup_str(r->metrics_address, &oom);
    s->uptime_seconds = r->uptime_seconds;
    s->pid = r->pid;
    s->gpu_memory_total = r->gpu_memory_total;
    s->gpu_memory_used = r->gpu_memory_used;
    s->gpu_memory_free = r->gpu_memory_free;
    s->connections = r->connections;
    s->connections_total = r->connections_total;
    s->connections_refused = r->connections_refused;
    s->bytes_in = r->bytes_in;
    s->bytes_out = r->bytes_out;
    s->rss_bytes = r->rss_bytes;
    s->last_snapshot_time = r->last_snapshot_time;
    /* one spare entry each, so that an empty list is still a valid pointer */
    s->ops = calloc(r->n_ops + 1, sizeof *s->ops);
    s->errors = calloc(r->n_errors + 1, sizeof *s->errors);
    s->tables = calloc(r->n_tables + 1, sizeof *s->tables);
    if (oom || !s->ops || !s->errors || !s->tables) {
        floe_server_stats_free(s);
        return NULL;
    }
    for (size_t i = 0; i < r->n_ops; i++) {
        const Floe__V1__OpCounters *o = r->ops[i];
        snprintf(s->ops[i].op, sizeof s->ops[i].op, "%s", o->op ? o->op : "");
        s->ops[i].requests = o->requests;
        s->ops[i].keys = o->keys;
        s->ops[i].errors = o->errors;
    }
    s->n_ops = r->n_ops;
    for (size_t i = 0; i < r->n_errors; i++) {
        snprintf(s->errors[i].status, sizeof s->errors[i].status, "%s",
                 r->errors[i]->status ? r->errors[i]->status : "");
        s->errors[i].count = r->errors[i]->count;
    }
    s->n_errors = r->n_errors;
    for (size_t i = 0; i < r->n_tables; i++) {
        const Floe__V1__TableInfo *t = r->tables[i];
        floe_table_summary *d = &s->tables[i];
        snprintf(d->name, sizeof d->name, "%s", t->name ? t->name : "");
        d->kind = (int)t->kind;
        snprintf(d->backend, sizeof d->backend, "%s", t->backend ? t->backend : "");
        d->keys = t->keys;
        d->fill = t->fill;
        d->memory_bytes = t->memory_bytes;
        d->changes = t->changes;
        d->last_snapshot_time = t->last_snapshot_time;
    }
    s->n_tables = r->n_tables;
    return s;
}

int floe_server_stats_get(floe *c, floe_server_stats **out)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Info in = FLOE__V1__INFO__INIT;
    req.op_case = FLOE__V1__REQUEST__OP_INFO;
    req.info = &in;
    *out = NULL;
    floe_call *call = send_request(c, &req, NULL, NULL);
    int st = finish(c, call);
    if (st == FLOE_ERR_INVALID) {
        /* Info has no fields that could be wrong: the server does not know the operation */
        st = set_error(c, FLOE_ERR_UNSUPPORTED, "%s does not know the info operation (%s)",
                       c->info.server[0] ? c->info.server : "the server", floe_call_error(call));
    } else if (st == FLOE_OK) {
        if (call->resp->body_case != FLOE__V1__RESPONSE__BODY_INFO || !call->resp->info)
            st = set_error(c, FLOE_ERR_PROTOCOL, "info reply without info");
        else if (!(*out = server_stats_from(call->resp->info)))
            st = set_error(c, FLOE_ERR_IO, "out of memory");
    }
    floe_call_free(call);
    return st;
}

/* One scan request: keys (8 bytes per key, or TREE vectors of words words)
 * into keys, values or ids when asked. */
static int scan_call(floe *c, const char *table, floe_cursor *cursor, size_t limit, size_t key_bytes, void *keys,
                     void *values, unsigned value_bytes, uint64_t *ids, bool want_ids, size_t *n, int *done)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Scan s = FLOE__V1__SCAN__INIT;
    s.table = (char *)table;
    if (cursor->started) {
        s.cursor.data = cursor->bytes;
        s.cursor.len = sizeof cursor->bytes;
    }
    s.limit = (uint32_t)(limit > UINT32_MAX ? UINT32_MAX : limit);
    s.want_values = values != NULL;
    s.want_ids = want_ids;
    req.op_case = FLOE__V1__REQUEST__OP_SCAN;
    req.scan = &s;
    *n = 0;
    *done = 0;
    floe_call *call = send_request(c, &req, NULL, NULL);
    int st = finish(c, call);
    if (st == FLOE_OK) {
        const Floe__V1__ScanReply *r = call->resp->body_case == FLOE__V1__RESPONSE__BODY_SCAN ? call->resp->scan : NULL;
        /* with ids (TREE) they count the vectors, so a wrong words shows as such */
        size_t got = !r ? 0 : want_ids ? r->ids.len / 8 : r->keys.len / key_bytes;
        if (r && want_ids && got > 0 && r->keys.len != got * key_bytes && r->keys.len % (got * 4) == 0) {
            st = set_error(c, FLOE_ERR_INVALID, "table %s holds vectors of %zu words; the call said words = %zu", table,
                           r->keys.len / (got * 4), key_bytes / 4);
        } else if (!r || r->keys.len != got * key_bytes || got > limit || r->cursor.len != sizeof cursor->bytes ||
                   (want_ids && r->ids.len != got * 8) || (values && r->values.len != got * value_bytes)) {
            st = set_error(c, FLOE_ERR_PROTOCOL, "malformed scan reply");
        } else {
            if (keys && got)
                memcpy(keys, r->keys.data, got * key_bytes);
            if (values && got)
                memcpy(values, r->values.data, got * value_bytes);
            if (ids && got)
                memcpy(ids, r->ids.data, got * 8);
            memcpy(cursor->bytes, r->cursor.data, sizeof cursor->bytes);
            cursor->started = 1;
            *n = got;
            *done = r->done;
        }
    }
    floe_call_free(call);
    return st;
}

int floe_scan(floe *c, const char *table, floe_cursor *cursor, size_t limit, uint64_t *keys, void *values,
              unsigned value_bytes, size_t *n, int *done)
{
    return scan_call(c, table, cursor, limit, 8, keys, values, value_bytes, NULL, false, n, done);
}

int floe_scan_vectors(floe *c, const char *table, floe_cursor *cursor, size_t limit, unsigned words, uint64_t *ids,
                      uint32_t *vectors, size_t *n, int *done)
{
    if (words == 0) {
        *n = 0;
        *done = 0;
        return set_error(c, FLOE_ERR_INVALID, "words must be the TREE table's words per vector (2..256), not 0");
    }
    /* ids are always asked for: they say how many vectors came, whatever words is */
    return scan_call(c, table, cursor, limit, (size_t)words * 4, vectors, NULL, 0, ids, true, n, done);
}

/* ---- connecting ---------------------------------------------------------------------------------- */

static int parse_uri(floe *c, const char *uri, char *host, size_t hostlen, char *port, size_t portlen, char *token,
                     size_t toklen)
{
    const char *p = uri;
    if (strncmp(p, "floes://", 8) == 0)
        return set_error(c, FLOE_ERR_UNSUPPORTED, "floes:// (TLS) is not supported by this libfloe yet");
    if (strncmp(p, "floe://", 7) == 0)
        p += 7;
    else if (strstr(p, "://"))
        return set_error(c, FLOE_ERR_INVALID, "'%s': the scheme must be floe://", uri);
    const char *q = strchr(p, '?');
    size_t hplen = q ? (size_t)(q - p) : strlen(p);
    char hp[300];
    if (hplen == 0 || hplen >= sizeof hp)
        return set_error(c, FLOE_ERR_INVALID, "'%s': no host", uri);
    memcpy(hp, p, hplen);
    hp[hplen] = '\0';
    if (hp[hplen - 1] == '/')
        hp[--hplen] = '\0';
    const char *h = hp, *colon;
    size_t hl;
    if (hp[0] == '[') { /* [v6]:port */
        const char *end = strchr(hp, ']');
        if (!end)
            return set_error(c, FLOE_ERR_INVALID, "'%s': unclosed [", uri);
        h = hp + 1;
        hl = (size_t)(end - h);
        colon = end[1] == ':' ? end + 1 : NULL;
    } else {
        colon = strrchr(hp, ':');
        hl = colon ? (size_t)(colon - hp) : hplen;
    }
    if (hl == 0 || hl >= hostlen)
        return set_error(c, FLOE_ERR_INVALID, "'%s': bad host", uri);
    memcpy(host, h, hl);
    host[hl] = '\0';
    snprintf(port, portlen, "%s", colon ? colon + 1 : "7450");
    char *end;
    long pn = strtol(port, &end, 10);
    if (!port[0] || *end || pn < 1 || pn > 65535)
        return set_error(c, FLOE_ERR_INVALID, "'%s': the port must be 1..65535", uri);
    token[0] = '\0';
    if (q) {
        const char *t = strstr(q + 1, "token=");
        if (t)
            snprintf(token, toklen, "%.*s", (int)strcspn(t + 6, "&"), t + 6);
    }
    return FLOE_OK;
}

static int hello(floe *c, const char *token)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Hello h = FLOE__V1__HELLO__INIT;
    h.version = FLOE_PROTOCOL_VERSION;
    h.token = (char *)(token ? token : "");
    req.op_case = FLOE__V1__REQUEST__OP_HELLO;
    req.hello = &h;
    floe_call *call = send_request(c, &req, NULL, NULL);
    int st = finish(c, call);
    if (st == FLOE_OK && call->resp && call->resp->body_case == FLOE__V1__RESPONSE__BODY_HELLO) {
        const Floe__V1__HelloReply *r = call->resp->hello;
        c->info.version = r->version;
        snprintf(c->info.server, sizeof c->info.server, "%s", r->server ? r->server : "");
        c->info.max_frame = r->max_frame;
        c->info.max_batch_keys = r->max_batch_keys;
        c->info.max_inflight = r->max_inflight;
        snprintf(c->info.backend, sizeof c->info.backend, "%s", r->backend ? r->backend : "");
    } else if (st == FLOE_OK) {
        st = set_error(c, FLOE_ERR_PROTOCOL, "the server's hello reply is malformed");
    }
    floe_call_free(call);
    return st;
}

/* c on its connected socket: non-blocking, then the hello exchange. */
static int start(floe *c, const char *token)
{
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int fl = fcntl(c->fd, F_GETFL);
    if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) != 0)
        return set_error(c, FLOE_ERR_IO, "cannot make the socket non-blocking");
    return hello(c, token);
}

int floe_connect(const char *uri, const char *token, floe **out)
{
    floe *c = calloc(1, sizeof *c);
    *out = c;
    if (!c)
        return FLOE_ERR_IO;
    c->fd = -1;
    char host[256], port[16], utoken[256];
    int st = parse_uri(c, uri ? uri : "", host, sizeof host, port, sizeof port, utoken, sizeof utoken);
    if (st != FLOE_OK)
        return st;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_family = AF_UNSPEC}, *ai, *a;
    int gai = getaddrinfo(host, port, &hints, &ai);
    if (gai != 0)
        return set_error(c, FLOE_ERR_IO, "cannot resolve %s: %s", host, gai_strerror(gai));
    int last = 0;
    for (a = ai; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0)
            continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
            c->fd = fd;
            break;
        }
        last = errno;
        close(fd);
    }
    freeaddrinfo(ai);
    if (c->fd < 0)
        return set_error(c, FLOE_ERR_IO, "cannot connect to %s:%s: %s", host, port, strerror(last));
    return start(c, token && token[0] ? token : utoken);
}

int floe__connect_fd(int fd, const char *token, floe **out)
{
    floe *c = calloc(1, sizeof *c);
    *out = c;
    if (!c) {
        close(fd);
        return FLOE_ERR_IO;
    }
    c->fd = fd;
    return start(c, token ? token : "");
}

void floe_close(floe *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    set_error(c, FLOE_ERR_IO, "connection closed");
    fail_all(c);
    free(c->out);
    free(c->in);
    free(c);
}

int floe_parse_size(const char *s, uint64_t *out)
{
    char *end;
    if (s[0] < '0' || s[0] > '9')
        return 0;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return 0;
    unsigned shift = 0;
    switch (*end) {
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    case 't':
    case 'T':
        shift = 40;
        break;
    default:
        break;
    }
    if (shift) {
        end++;
        if (*end == 'i' || *end == 'I')
            end++;
        if (*end == 'b' || *end == 'B')
            end++;
    }
    if (*end || v > (UINT64_MAX >> shift))
        return 0;
    *out = (uint64_t)v << shift;
    return 1;
}
