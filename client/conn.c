/*
 * conn.c - libfloe (see floe.h): a connection's errors, its calls in flight
 * and its frames in and out.  The library by role: connect.c (one server
 * or a list), dial.c (one server: URIs, TCP, TLS, the hello), transport.c
 * (bytes over the socket), this file (framing, polling, completing calls),
 * calls.c (every call), options.c (the tools' options), batcher.c
 * (client-side batching), shards.c (a table over several floed).
 *
 * One non-blocking socket, plain or TLS (OpenSSL on the same socket);
 * requests are packed into an output buffer at send time, and floe_poll
 * writes it out while reading responses, so a client never deadlocks
 * against a server that is pushing back.  Calls in flight wait in a list,
 * oldest first; a response completes the call with its id (responses on
 * different tables may overtake each other).  Each call may carry a
 * deadline: the oldest call's is the earliest, so floe_poll never waits
 * past it, and a call past it ends the connection (FLOE_ERR_TIMEOUT).
 */
#define _GNU_SOURCE
#include "floe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "floe.pb-c.h"
#include "floe_internal.h"


int floe__set_error(floe *c, int code, const char *fmt, ...)
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
    switch (code) {
    case FLOE_ERR_IO:
        return "ERR_IO";
    case FLOE_ERR_PROTOCOL:
        return "ERR_PROTOCOL";
    case FLOE_ERR_TIMEOUT:
        return "ERR_TIMEOUT";
    case FLOE_ERR_TLS:
        return "ERR_TLS";
    default:
        return floe_wire_status_name(code);
    }
}

uint64_t floe__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void floe_set_timeout(floe *c, int timeout_ms)
{
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
    for (unsigned i = 0; i < c->nshards; i++)
        floe_set_timeout(c->shards[i], timeout_ms);
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

int floe_server_has(const floe *c, const char *feature)
{
    char word[96];
    if (!feature || !feature[0] || strchr(feature, ' ') ||
        snprintf(word, sizeof word, "%s ", feature) >= (int)sizeof word)
        return 0;
    /* (a partitioned connection's info has the features every server has: shards.c) */
    const char *f = c->info.features;
    for (const char *p = f; (p = strstr(p, word)); p++)
        if (p == f || p[-1] == ' ')
            return 1;
    return 0;
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
    return c->router ? c->epfd : c->fd;
}

int floe_want_write(const floe *c)
{
    /* a partitioned connection's epoll set reports a shard that can write as readable */
    return c->fd >= 0 && (c->out_off < c->out_len || c->tls_want_write);
}

/* ---- calls ------------------------------------------------------------------------------------- */

void floe__complete(floe *c, floe_call *call, int status, const char *error, Floe__V1__Response *resp)
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
    c->completions++;
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
void floe__fail_all(floe *c)
{
    while (c->head)
        floe__complete(c, c->head, c->err ? c->err : FLOE_ERR_IO, c->errstr, NULL);
}

static int handle_frames(floe *c);

/* The connection ended (detail says how; code FLOE_ERR_IO or FLOE_ERR_TLS).
 * What the server sent before it is still read: answers complete their
 * calls, and an error response with id 0 (ERR_BUSY at max-connections, a
 * frame above max-frame) becomes the error of the calls left, instead of
 * "connection reset". */
static void broken(floe *c, int code, const char *fmt, const char *detail)
{
    if (c->fd >= 0) {
        while (floe__transport_read(c) > 0)
            ;
        floe__transport_close(c); /* callbacks run below must not use the connection */
        handle_frames(c);
        if (c->bye_status == FLOE_OK && c->inflight && code == FLOE_ERR_IO) {
            char msg[200];
            snprintf(msg, sizeof msg, fmt, detail);
            floe__set_error(c, code, "%s with %zu request%s unanswered (the server may or may not have carried %s out)",
                            msg, c->inflight, c->inflight == 1 ? "" : "s", c->inflight == 1 ? "it" : "them");
        } else if (c->bye_status == FLOE_OK) {
            floe__set_error(c, code, fmt, detail);
        }
    } else {
        floe__set_error(c, code, fmt, detail);
    }
    if (c->bye_status != FLOE_OK)
        floe__set_error(c, c->bye_status, "%s", c->bye_msg);
    floe__fail_all(c);
}

/* A transport outcome other than bytes: the connection is broken. */
static void transport_failed(floe *c, ssize_t outcome, const char *what)
{
    char why[256];
    if (outcome == IO_EOF)
        broken(c, FLOE_ERR_IO, "%s", "the server closed the connection");
    else if (outcome == IO_TLS_FAILED)
        broken(c, FLOE_ERR_TLS, "TLS: %s", floe__tls_reason(c, why, sizeof why));
    else {
        snprintf(why, sizeof why, "%s: %s", what, strerror(errno));
        broken(c, FLOE_ERR_IO, "%s", why);
    }
}

/* The oldest call in flight is past its deadline: every call in flight
 * fails with FLOE_ERR_TIMEOUT and the connection closes (the answers, if
 * they come, would belong to calls already given up). */
static void timed_out(floe *c)
{
    floe__transport_close(c);
    floe__set_error(c, FLOE_ERR_TIMEOUT,
                    "no answer from the server within %d ms; the connection is closed (the server may still carry out "
                    "the %zu request%s in flight)",
                    c->timeout_ms, c->inflight, c->inflight == 1 ? "" : "s");
    floe__fail_all(c);
}

void floe_call_free(floe_call *call)
{
    if (!call)
        return;
    if (call->resp)
        floe__v1__response__free_unpacked(call->resp, NULL);
    free(call->ids);
    free(call->error);
    free(call);
}

floe_call *floe__new_call(floe *c, floe_callback *cb, void *arg)
{
    floe_call *call = calloc(1, sizeof *call);
    if (!call)
        return NULL;
    call->id = ++c->next_id;
    call->deadline = c->timeout_ms ? floe__now_ms() + (uint64_t)c->timeout_ms : 0;
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
floe_call *floe__send_request(floe *c, Floe__V1__Request *req, floe_callback *cb, void *arg)
{
    if (c->router)
        return c->router->send(c, req, cb, arg);
    if (c->checked)
        req->shard = &c->check;
    floe_call *call = floe__new_call(c, cb, arg);
    if (!call)
        return NULL;
    req->id = call->id;
    if (c->fd < 0) {
        floe__complete(c, call, FLOE_ERR_IO, c->errstr[0] ? c->errstr : "not connected", NULL);
        return cb ? NULL : call;
    }
    size_t len = floe__v1__request__get_packed_size(req);
    if (len > UINT32_MAX || (c->info.max_frame && len > c->info.max_frame)) {
        char msg[128];
        snprintf(msg, sizeof msg, "request of %zu bytes is above the server's max-frame (%llu)", len,
                 (unsigned long long)c->info.max_frame);
        floe__complete(c, call, FLOE_ERR_TOO_LARGE, msg, NULL);
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
            floe__complete(c, call, FLOE_ERR_IO, "out of memory", NULL);
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
    c->handling = true;
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
                floe__set_error(c, status, "%s", error ? error : "");
                c->bye_status = status;
                snprintf(c->bye_msg, sizeof c->bye_msg, "%s", error ? error : "");
            }
            floe__v1__response__free_unpacked(r, NULL);
            continue;
        }
        c->bye_status = FLOE_OK; /* the connection went on after it */
        floe__complete(c, call, status, error, r);
        completed++;
    }
    c->handling = false;
    if (off) {
        memmove(c->in, c->in + off, c->in_len - off);
        c->in_len -= off;
    }
    return completed;
}

int floe_poll(floe *c, int timeout_ms)
{
    if (c->router)
        return c->router->poll(c, timeout_ms);
    if (c->handling) /* from a callback: the frames being handled are c->in; the next poll goes on */
        return 0;
    int completed = 0;
    const uint64_t until = timeout_ms > 0 ? floe__now_ms() + (uint64_t)timeout_ms : 0;
    for (;;) {
        if (c->fd < 0)
            return completed ? completed : -1;
        if (timeout_ms < 0 && !c->head && !floe_want_write(c))
            return completed; /* nothing in flight: waiting could only hang */
        const uint64_t now = floe__now_ms();
        const uint64_t deadline = c->head ? c->head->deadline : 0; /* the oldest call's is the earliest */
        if (deadline && now >= deadline) {
            timed_out(c);
            return completed ? completed : -1;
        }
        int wait = completed || timeout_ms == 0 ? 0 : timeout_ms < 0 ? -1 : now >= until ? 0 : (int)(until - now);
        if (deadline && (wait < 0 || deadline - now < (uint64_t)wait))
            wait = (int)(deadline - now);
        struct pollfd pfd = {c->fd, (short)(POLLIN | (floe_want_write(c) ? POLLOUT : 0)), 0};
        int rc;
        if (c->tls && SSL_pending(c->tls) > 0) { /* decrypted bytes wait inside OpenSSL, not in the socket */
            rc = 1;
            pfd.revents = POLLIN;
        } else {
            rc = poll(&pfd, 1, wait);
        }
        if (rc < 0) {
            if (errno == EINTR)
                continue;
            broken(c, FLOE_ERR_IO, "poll: %s", strerror(errno));
            return -1;
        }
        if (rc == 0) {
            if (deadline && floe__now_ms() >= deadline)
                continue; /* the deadline, not the caller's timeout: fail the calls above */
            return completed;
        }
        c->tls_want_write = false;
        if ((pfd.revents & POLLOUT) && c->out_off < c->out_len) {
            ssize_t w = floe__transport_write(c);
            if (w < 0 && w != IO_AGAIN) {
                transport_failed(c, w, "send");
                return completed ? completed : -1;
            }
            if (w > 0)
                c->out_off += (size_t)w;
        }
        if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t r;
            while ((r = floe__transport_read(c)) > 0) /* TLS: drain what OpenSSL holds too */
                if (!c->tls)
                    break;
            completed += handle_frames(c);
            if (r < 0 && r != IO_AGAIN) {
                transport_failed(c, r, "recv");
                return completed ? completed : -1;
            }
        }
        if (timeout_ms == 0 && !(pfd.revents & POLLIN))
            return completed;
        if (completed && timeout_ms >= 0 && c->out_off == c->out_len)
            return completed;
    }
}

/* The error of a connection that is gone (FLOE_ERR_IO, _TIMEOUT, _TLS, or
 * the status the server closed it with). */
static int gone(const floe *c)
{
    return c->err != FLOE_OK ? c->err : FLOE_ERR_IO;
}

int floe_wait(floe *c, floe_call *call)
{
    while (!call->done) {
        if (floe_poll(c, -1) < 0 && !call->done)
            return gone(c);
    }
    return call->status;
}

int floe_wait_all(floe *c)
{
    while (c->inflight > 0)
        if (floe_poll(c, -1) < 0)
            return gone(c);
    return c->fd < 0 && !c->router ? gone(c) : FLOE_OK;
}

