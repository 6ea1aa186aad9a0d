/*
 * floe.c - libfloe (see floe.h).
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
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "floe.pb-c.h"
#include "floe_internal.h"

#define CONNECT_TIMEOUT_MS 10000 /* floe_options.connect_timeout_ms 0 */
#define KEEPALIVE_S        30    /* floe_options.keepalive_s 0 */

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

static uint64_t now_ms(void)
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
static void fail_all(floe *c)
{
    while (c->head)
        floe__complete(c, c->head, c->err ? c->err : FLOE_ERR_IO, c->errstr, NULL);
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

/* ---- the transport: plain TCP or TLS on c->fd ----------------------------------------------------- */

enum { IO_AGAIN = 0, IO_EOF = -1, IO_FAILED = -2, IO_TLS_FAILED = -3 };

/* Why the last TLS call failed: the certificate check, else OpenSSL's error queue. */
static const char *tls_reason(floe *c, char *buf, size_t len)
{
    const long v = c->tls ? SSL_get_verify_result(c->tls) : X509_V_OK;
    const unsigned long e = ERR_peek_last_error(), first = ERR_peek_error();
    if (v != X509_V_OK)
        snprintf(buf, len, "the server's certificate: %s", X509_verify_cert_error_string(v));
    else if (first && ERR_SYSTEM_ERROR(first)) /* a file that cannot be read: its errno */
        snprintf(buf, len, "%s", strerror(ERR_GET_REASON(first)));
    else if (first && ERR_reason_error_string(first)) /* the first cause, in words ("no start line") */
        snprintf(buf, len, "%s (%s)", ERR_reason_error_string(first),
                 ERR_lib_error_string(first) ? ERR_lib_error_string(first) : "OpenSSL");
    else if (e)
        ERR_error_string_n(e, buf, len);
    else
        snprintf(buf, len, "%s", errno ? strerror(errno) : "the connection closed during the TLS exchange");
    ERR_clear_error();
    return buf;
}

/* OpenSSL writes to its socket with write(2), which raises SIGPIPE once the
 * peer is gone (plain TCP sends with MSG_NOSIGNAL), and a library must not
 * kill its caller or change its signal handlers.  As libpq does, the
 * calling thread blocks SIGPIPE around each TLS call that may write and
 * takes back a SIGPIPE the call raised; errno is kept. */
typedef struct {
    sigset_t old;
    bool was_pending;
} sigpipe_guard;

static void sigpipe_block(sigpipe_guard *g)
{
    sigset_t pipe, pending;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe, &g->old);
}

static void sigpipe_restore(sigpipe_guard *g)
{
    const int saved = errno;
    sigset_t pipe, pending;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    sigpending(&pending);
    if (!g->was_pending && sigismember(&pending, SIGPIPE) == 1) {
        const struct timespec now = {0, 0};
        while (sigtimedwait(&pipe, NULL, &now) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
    errno = saved;
}

/* Classifies a failed SSL_read/SSL_write/SSL_connect: IO_AGAIN (retry when
 * fd is ready), IO_EOF, IO_FAILED (errno) or IO_TLS_FAILED. */
static int tls_outcome(floe *c, int r)
{
    switch (SSL_get_error(c->tls, r)) {
    case SSL_ERROR_WANT_WRITE:
        c->tls_want_write = true;
        return IO_AGAIN;
    case SSL_ERROR_WANT_READ:
        return IO_AGAIN;
    case SSL_ERROR_ZERO_RETURN:
        return IO_EOF;
    case SSL_ERROR_SYSCALL:
        return ERR_peek_last_error() ? IO_TLS_FAILED : errno ? IO_FAILED : IO_EOF;
    default:
        return IO_TLS_FAILED;
    }
}

/* Reads what is there into c->in: the bytes read, or IO_AGAIN (nothing now),
 * IO_EOF, IO_FAILED, IO_TLS_FAILED; no other side effect. */
static ssize_t transport_read(floe *c)
{
    if (reserve_in(c) != 0) {
        errno = ENOMEM;
        return IO_FAILED;
    }
    size_t room = c->in_cap - c->in_len;
    if (c->tls) {
        ERR_clear_error();
        errno = 0;
        int r = SSL_read(c->tls, c->in + c->in_len, room > INT_MAX ? INT_MAX : (int)room);
        if (r > 0) {
            c->in_len += (size_t)r;
            return r;
        }
        return tls_outcome(c, r);
    }
    for (;;) {
        ssize_t r = recv(c->fd, c->in + c->in_len, room, MSG_DONTWAIT);
        if (r > 0) {
            c->in_len += (size_t)r;
            return r;
        }
        if (r == 0)
            return IO_EOF;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? IO_AGAIN : IO_FAILED;
    }
}

/* Writes what it can of c->out: the bytes written, or IO_AGAIN, IO_FAILED,
 * IO_TLS_FAILED. */
static ssize_t transport_write(floe *c)
{
    size_t n = c->out_len - c->out_off;
    if (c->tls) {
        ERR_clear_error();
        errno = 0;
        /* partial writes and a buffer that moves (realloc) are allowed: floe_connect sets the modes */
        sigpipe_guard g;
        sigpipe_block(&g);
        int r = SSL_write(c->tls, c->out + c->out_off, n > INT_MAX ? INT_MAX : (int)n);
        sigpipe_restore(&g);
        if (r > 0)
            return r;
        const int outcome = tls_outcome(c, r);
        return outcome == IO_EOF ? IO_FAILED : outcome;
    }
    for (;;) {
        ssize_t w = send(c->fd, c->out + c->out_off, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w >= 0)
            return w;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? IO_AGAIN : IO_FAILED;
    }
}

static void transport_close(floe *c)
{
    if (c->tls) {
        if (c->fd >= 0 && SSL_is_init_finished(c->tls)) { /* close_notify, best effort: the socket is non-blocking */
            sigpipe_guard g;
            sigpipe_block(&g);
            SSL_shutdown(c->tls);
            sigpipe_restore(&g);
        }
        ERR_clear_error();
        SSL_free(c->tls);
        c->tls = NULL;
    }
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->tls_want_write = false;
}

/* The connection ended (detail says how; code FLOE_ERR_IO or FLOE_ERR_TLS).
 * What the server sent before it is still read: answers complete their
 * calls, and an error response with id 0 (ERR_BUSY at max-connections, a
 * frame above max-frame) becomes the error of the calls left, instead of
 * "connection reset". */
static void broken(floe *c, int code, const char *fmt, const char *detail)
{
    if (c->fd >= 0) {
        while (transport_read(c) > 0)
            ;
        transport_close(c); /* callbacks run below must not use the connection */
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
    fail_all(c);
}

/* A transport outcome other than bytes: the connection is broken. */
static void transport_failed(floe *c, ssize_t outcome, const char *what)
{
    char why[256];
    if (outcome == IO_EOF)
        broken(c, FLOE_ERR_IO, "%s", "the server closed the connection");
    else if (outcome == IO_TLS_FAILED)
        broken(c, FLOE_ERR_TLS, "TLS: %s", tls_reason(c, why, sizeof why));
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
    transport_close(c);
    floe__set_error(c, FLOE_ERR_TIMEOUT,
                    "no answer from the server within %d ms; the connection is closed (the server may still carry out "
                    "the %zu request%s in flight)",
                    c->timeout_ms, c->inflight, c->inflight == 1 ? "" : "s");
    fail_all(c);
}

floe_call *floe__new_call(floe *c, floe_callback *cb, void *arg)
{
    floe_call *call = calloc(1, sizeof *call);
    if (!call)
        return NULL;
    call->id = ++c->next_id;
    call->deadline = c->timeout_ms ? now_ms() + (uint64_t)c->timeout_ms : 0;
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
    const uint64_t until = timeout_ms > 0 ? now_ms() + (uint64_t)timeout_ms : 0;
    for (;;) {
        if (c->fd < 0)
            return completed ? completed : -1;
        if (timeout_ms < 0 && !c->head && !floe_want_write(c))
            return completed; /* nothing in flight: waiting could only hang */
        const uint64_t now = now_ms();
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
            if (deadline && now_ms() >= deadline)
                continue; /* the deadline, not the caller's timeout: fail the calls above */
            return completed;
        }
        c->tls_want_write = false;
        if ((pfd.revents & POLLOUT) && c->out_off < c->out_len) {
            ssize_t w = transport_write(c);
            if (w < 0 && w != IO_AGAIN) {
                transport_failed(c, w, "send");
                return completed ? completed : -1;
            }
            if (w > 0)
                c->out_off += (size_t)w;
        }
        if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t r;
            while ((r = transport_read(c)) > 0) /* TLS: drain what OpenSSL holds too */
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

/* A range's page, or NULL (not a range's answer). */
static const Floe__V1__ScanReply *range_page(const floe_call *call)
{
    return call->resp && call->resp->body_case == FLOE__V1__RESPONSE__BODY_SCAN ? call->resp->scan : NULL;
}

const unsigned char *floe_call_values(const floe_call *call, size_t *bytes)
{
    const Floe__V1__ScanReply *page = range_page(call);
    const ProtobufCBinaryData *v = page ? &page->values : call->resp ? &call->resp->values : NULL;
    *bytes = v ? v->len : 0;
    return v ? v->data : NULL;
}

const unsigned char *floe_call_keys(const floe_call *call, size_t *bytes)
{
    const Floe__V1__ScanReply *page = range_page(call);
    const ProtobufCBinaryData *k = page ? &page->keys : call->resp ? &call->resp->keys : NULL;
    *bytes = k ? k->len : 0;
    return k ? k->data : NULL;
}

int floe_call_range_next(const floe_call *call, floe_range_cursor *next, int *done)
{
    if (call->status != FLOE_OK)
        return call->status;
    const Floe__V1__ScanReply *page = range_page(call);
    if (!page || page->cursor.len != sizeof next->bytes || page->keys.len % 8)
        return FLOE_ERR_PROTOCOL;
    memcpy(next->bytes, page->cursor.data, sizeof next->bytes);
    next->started = 1;
    *done = page->done;
    return FLOE_OK;
}

const unsigned char *floe_call_vectors(const floe_call *call, size_t *bytes)
{
    *bytes = call->resp ? call->resp->vectors.len : 0;
    return call->resp ? call->resp->vectors.data : NULL;
}

uint64_t floe_call_generation(const floe_call *call)
{
    return call->resp ? call->resp->generation : 0;
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
    return floe__send_request(c, &req, cb, arg);
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
    return floe__send_request(c, &req, cb, arg);
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
    return floe__send_request(c, &req, cb, arg);
}

static floe_call *send_neighbours(floe *c, bool pred, const char *table, const uint64_t *keys, size_t n, unsigned flags,
                                  floe_callback *cb, void *arg)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Successor succ = FLOE__V1__SUCCESSOR__INIT;
    Floe__V1__Predecessor pr = FLOE__V1__PREDECESSOR__INIT;
    const ProtobufCBinaryData k = {n * 8, (uint8_t *)keys};
    const bool want_values = (flags & FLOE_WANT_VALUES) != 0;
    if (pred) {
        pr.table = (char *)table, pr.keys = k, pr.want_values = want_values;
        req.op_case = FLOE__V1__REQUEST__OP_PREDECESSOR;
        req.predecessor = &pr;
    } else {
        succ.table = (char *)table, succ.keys = k, succ.want_values = want_values;
        req.op_case = FLOE__V1__REQUEST__OP_SUCCESSOR;
        req.successor = &succ;
    }
    return floe__send_request(c, &req, cb, arg);
}

floe_call *floe_send_successor(floe *c, const char *table, const uint64_t *keys, size_t n, unsigned flags,
                               floe_callback *cb, void *arg)
{
    return send_neighbours(c, false, table, keys, n, flags, cb, arg);
}

floe_call *floe_send_predecessor(floe *c, const char *table, const uint64_t *keys, size_t n, unsigned flags,
                                 floe_callback *cb, void *arg)
{
    return send_neighbours(c, true, table, keys, n, flags, cb, arg);
}

floe_call *floe_send_range(floe *c, const char *table, uint64_t lo, uint64_t hi, unsigned flags,
                           const floe_range_cursor *cursor, size_t limit, floe_callback *cb, void *arg)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Range r = FLOE__V1__RANGE__INIT;
    r.table = (char *)table;
    r.from = lo;
    r.to = hi;
    r.desc = (flags & FLOE_RANGE_DESC) != 0;
    r.want_values = (flags & FLOE_WANT_VALUES) != 0;
    r.limit = (uint32_t)(limit > UINT32_MAX ? UINT32_MAX : limit);
    if (cursor && cursor->started) {
        r.cursor.data = (uint8_t *)cursor->bytes;
        r.cursor.len = sizeof cursor->bytes;
    }
    req.op_case = FLOE__V1__REQUEST__OP_RANGE;
    req.range = &r;
    return floe__send_request(c, &req, cb, arg);
}

/* A call that fails here, before anything is sent: completed at once, as
 * send_request does for a broken connection. */
static floe_call *refuse_call(floe *c, int status, const char *msg, floe_callback *cb, void *arg)
{
    floe_call *call = floe__new_call(c, cb, arg);
    if (!call)
        return NULL;
    floe__complete(c, call, status, msg, NULL);
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
    c->route_words = words; /* a partitioned connection splits the vectors by their words */
    floe_call *call = floe__send_request(c, &req, cb, arg);
    c->route_words = 0;
    return call;
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

floe_call *floe_send_insert_states(floe *c, const char *table, uint64_t generation, const uint64_t *parents,
                                   const uint8_t *counts, const uint8_t *changes, size_t n, unsigned flags,
                                   floe_callback *cb, void *arg)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += counts[i];
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Insert in = FLOE__V1__INSERT__INIT;
    in.table = (char *)table;
    in.parents.data = (uint8_t *)parents; /* little-endian u64: the host's order on the platforms floe runs on */
    in.parents.len = n * 8;
    in.change_counts.data = (uint8_t *)counts;
    in.change_counts.len = n;
    in.changes.data = (uint8_t *)changes;
    in.changes.len = total * FLOE_CHANGE_BYTES;
    in.generation = generation;
    in.want_ids = (flags & FLOE_WANT_IDS) != 0;
    req.op_case = FLOE__V1__REQUEST__OP_INSERT;
    req.insert = &in;
    return floe__send_request(c, &req, cb, arg);
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
    return floe__send_request(c, &req, cb, arg);
}

floe_call *floe_send_ping(floe *c, floe_callback *cb, void *arg)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Ping p = FLOE__V1__PING__INIT;
    req.op_case = FLOE__V1__REQUEST__OP_PING;
    req.ping = &p;
    return floe__send_request(c, &req, cb, arg);
}

/* ---- blocking calls: send + wait ------------------------------------------------------------------ */

/* Waits for a future, records its error on c, and returns its status. */
static int finish(floe *c, floe_call *call)
{
    if (!call)
        return floe__set_error(c, FLOE_ERR_IO, "out of memory");
    int st = floe_wait(c, call);
    if (st != FLOE_OK)
        floe__set_error(c, st, "%s", floe_call_error(call)[0] ? floe_call_error(call) : floe_strerror(st));
    else
        c->err = FLOE_OK, c->errstr[0] = '\0';
    return st;
}

/* Sends req, waits, and keeps only the status: for calls with no answer body. */
static int simple_call(floe *c, Floe__V1__Request *req)
{
    floe_call *call = floe__send_request(c, req, NULL, NULL);
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
        return floe__set_error(c, FLOE_ERR_PROTOCOL, "the server answered %zu keys of %zu", got, n);
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
        return floe__set_error(c, FLOE_ERR_PROTOCOL, "the server answered %zu ids for %zu vectors", idb / 8, n);
    }
    if (ids && n)
        memcpy(ids, got_ids, n * 8);
    c->ids_generation = floe_call_generation(call);
    return copy_key_answers(c, call, n, results, NULL, 0, counts);
}

int floe_insert_vectors(floe *c, const char *table, const uint32_t *vectors, size_t n, unsigned words, uint8_t *results,
                        uint64_t *ids, floe_counts *counts)
{
    return vectors_call(c, floe_send_insert_vectors(c, table, vectors, n, words, ids ? FLOE_WANT_IDS : 0, NULL, NULL),
                        n, results, ids, counts);
}

int floe_insert_states(floe *c, const char *table, uint64_t generation, const uint64_t *parents, const uint8_t *counts,
                       const uint8_t *changes, size_t n, uint8_t *results, uint64_t *ids, floe_counts *counts_out)
{
    return vectors_call(
        c,
        floe_send_insert_states(c, table, generation, parents, counts, changes, n, ids ? FLOE_WANT_IDS : 0, NULL, NULL),
        n, results, ids, counts_out);
}

uint64_t floe_ids_generation(const floe *c)
{
    return c->ids_generation;
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
        return floe__set_error(c, FLOE_ERR_INVALID, "words must be the TREE table's words per vector (2..256), not 0");
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
            st = floe__set_error(c, FLOE_ERR_INVALID, "table %s holds vectors of %zu words; the call said words = %u",
                                 table, vbytes / (n * 4), words);
        else
            st = floe__set_error(c, FLOE_ERR_PROTOCOL, "the server answered %zu bytes of vectors for %zu ids", vbytes,
                                 n);
        floe_call_free(call);
        return st;
    }
    if (vectors && n)
        memcpy(vectors, v, vbytes);
    return copy_key_answers(c, call, n, results, NULL, 0, NULL);
}

int floe_create(floe *c, const floe_table_def *def)
{
    return c->router ? c->router->create(c, def) : floe__create_shard(c, def, 0, 0, 0);
}

int floe__create_shard(floe *c, const floe_table_def *def, unsigned shard, unsigned shards, uint64_t set)
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
    spec.no_grow = def->no_grow != 0;
    spec.max_fill = def->max_fill;
    spec.backend = (char *)(def->backend ? def->backend : "");
    spec.words = def->words;
    spec.memory = def->memory;
    spec.parts = def->parts;
    spec.shard = shard;
    spec.shards = shards;
    spec.shard_set = set;
    ct.spec = &spec;
    req.op_case = FLOE__V1__REQUEST__OP_CREATE_TABLE;
    req.create_table = &ct;
    return simple_call(c, &req);
}

int floe_drop(floe *c, const char *table)
{
    if (c->router)
        return c->router->each(c, floe_drop, table);
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__DropTable d = FLOE__V1__DROP_TABLE__INIT;
    d.table = (char *)table;
    req.op_case = FLOE__V1__REQUEST__OP_DROP_TABLE;
    req.drop_table = &d;
    return simple_call(c, &req);
}

int floe_snapshot(floe *c, const char *table)
{
    if (c->router)
        return c->router->each(c, floe_snapshot, table);
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Snapshot s = FLOE__V1__SNAPSHOT__INIT;
    s.table = (char *)(table ? table : "");
    req.op_case = FLOE__V1__REQUEST__OP_SNAPSHOT;
    req.snapshot = &s;
    return simple_call(c, &req);
}

void floe__info_from(floe_table_info *o, const Floe__V1__TableStats *s)
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
        o->shard = s->spec->shard;
        o->shards = s->spec->shards;
        o->shard_set = s->spec->shard_set;
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
    o->device = s->device;
    for (size_t i = 0; i < s->n_parts && o->n_parts < sizeof o->parts / sizeof o->parts[0]; i++) {
        floe_part_info *d = &o->parts[o->n_parts++];
        d->keys = s->parts[i]->keys;
        d->slots = s->parts[i]->slots;
        d->memory_bytes = s->parts[i]->memory_bytes;
        d->generation = s->parts[i]->generation;
        d->device = s->parts[i]->device;
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
    if (c->router)
        return c->router->stats(c, table, info);
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Stats s = FLOE__V1__STATS__INIT;
    s.table = (char *)table;
    req.op_case = FLOE__V1__REQUEST__OP_STATS;
    req.stats = &s;
    floe_call *call = floe__send_request(c, &req, NULL, NULL);
    int st = finish(c, call);
    if (st == FLOE_OK) {
        if (call->resp->body_case != FLOE__V1__RESPONSE__BODY_STATS)
            st = floe__set_error(c, FLOE_ERR_PROTOCOL, "stats reply without stats");
        else
            floe__info_from(info, call->resp->stats);
    }
    floe_call_free(call);
    return st;
}

int floe_tables(floe *c, floe_table_info **tables, size_t *n)
{
    if (c->router)
        return c->router->tables(c, tables, n);
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__ListTables l = FLOE__V1__LIST_TABLES__INIT;
    req.op_case = FLOE__V1__REQUEST__OP_LIST_TABLES;
    req.list_tables = &l;
    *tables = NULL;
    *n = 0;
    floe_call *call = floe__send_request(c, &req, NULL, NULL);
    int st = finish(c, call);
    if (st == FLOE_OK && call->resp->body_case == FLOE__V1__RESPONSE__BODY_TABLES) {
        const Floe__V1__TableList *tl = call->resp->tables;
        *tables = calloc(tl->n_tables + 1, sizeof **tables);
        if (!*tables) {
            st = floe__set_error(c, FLOE_ERR_IO, "out of memory");
        } else {
            for (size_t i = 0; i < tl->n_tables; i++)
                floe__info_from(&(*tables)[i], tl->tables[i]);
            *n = tl->n_tables;
        }
    } else if (st == FLOE_OK) {
        st = floe__set_error(c, FLOE_ERR_PROTOCOL, "list reply without tables");
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
    free(s->gpus);
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
    s->gpus = calloc(r->n_gpus + 1, sizeof *s->gpus);
    if (oom || !s->ops || !s->errors || !s->tables || !s->gpus) {
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
    for (size_t i = 0; i < r->n_gpus; i++) {
        const Floe__V1__GpuInfo *g = r->gpus[i];
        floe_gpu_summary *d = &s->gpus[i];
        d->device = g->device;
        snprintf(d->name, sizeof d->name, "%s", g->name ? g->name : "");
        d->healthy = g->healthy;
        snprintf(d->error, sizeof d->error, "%s", g->error ? g->error : "");
        d->memory_total = g->memory_total;
        d->memory_free = g->memory_free;
    }
    s->n_gpus = r->n_gpus;
    return s;
}

int floe_server_stats_get(floe *c, floe_server_stats **out)
{
    *out = NULL;
    if (c->router)
        return floe__set_error(c, FLOE_ERR_UNSUPPORTED,
                               "a partitioned connection speaks to %u servers: ask each one (floe_shard)", c->nshards);
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Info in = FLOE__V1__INFO__INIT;
    req.op_case = FLOE__V1__REQUEST__OP_INFO;
    req.info = &in;
    floe_call *call = floe__send_request(c, &req, NULL, NULL);
    int st = finish(c, call);
    if (st == FLOE_ERR_INVALID) {
        /* Info has no fields that could be wrong: the server does not know the operation */
        st = floe__set_error(c, FLOE_ERR_UNSUPPORTED, "%s does not know the info operation (%s)",
                             c->info.server[0] ? c->info.server : "the server", floe_call_error(call));
    } else if (st == FLOE_OK) {
        if (call->resp->body_case != FLOE__V1__RESPONSE__BODY_INFO || !call->resp->info)
            st = floe__set_error(c, FLOE_ERR_PROTOCOL, "info reply without info");
        else if (!(*out = server_stats_from(call->resp->info)))
            st = floe__set_error(c, FLOE_ERR_IO, "out of memory");
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
    floe_call *call = floe__send_request(c, &req, NULL, NULL);
    int st = finish(c, call);
    if (st == FLOE_OK) {
        const Floe__V1__ScanReply *r = call->resp->body_case == FLOE__V1__RESPONSE__BODY_SCAN ? call->resp->scan : NULL;
        /* with ids (TREE) they count the vectors, so a wrong words shows as such */
        size_t got = !r ? 0 : want_ids ? r->ids.len / 8 : r->keys.len / key_bytes;
        if (r && want_ids && got > 0 && r->keys.len != got * key_bytes && r->keys.len % (got * 4) == 0) {
            st = floe__set_error(c, FLOE_ERR_INVALID, "table %s holds vectors of %zu words; the call said words = %zu",
                                 table, r->keys.len / (got * 4), key_bytes / 4);
        } else if (!r || r->keys.len != got * key_bytes || got > limit || r->cursor.len != sizeof cursor->bytes ||
                   (want_ids && r->ids.len != got * 8) || (values && r->values.len != got * value_bytes)) {
            st = floe__set_error(c, FLOE_ERR_PROTOCOL, "malformed scan reply");
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
    if (c->router)
        return c->router->scan(c, table, cursor, limit, 0, keys, values, value_bytes, NULL, NULL, n, done);
    return scan_call(c, table, cursor, limit, 8, keys, values, value_bytes, NULL, false, n, done);
}

int floe_scan_vectors(floe *c, const char *table, floe_cursor *cursor, size_t limit, unsigned words, uint64_t *ids,
                      uint32_t *vectors, size_t *n, int *done)
{
    if (words == 0) {
        *n = 0;
        *done = 0;
        return floe__set_error(c, FLOE_ERR_INVALID, "words must be the TREE table's words per vector (2..256), not 0");
    }
    if (c->router)
        return c->router->scan(c, table, cursor, limit, words, NULL, NULL, 0, ids, vectors, n, done);
    /* ids are always asked for: they say how many vectors came, whatever words is */
    return scan_call(c, table, cursor, limit, (size_t)words * 4, vectors, NULL, 0, ids, true, n, done);
}

/* ---- ORDERED tables ---------------------------------------------------------------------------- */

int floe_range(floe *c, const char *table, uint64_t lo, uint64_t hi, unsigned flags, floe_range_cursor *cursor,
               size_t limit, uint64_t *keys, void *values, unsigned value_bytes, size_t *n, int *done)
{
    *n = 0;
    *done = 0;
    flags = (flags & FLOE_RANGE_DESC) | (values ? FLOE_WANT_VALUES : 0);
    floe_call *call = floe_send_range(c, table, lo, hi, flags, cursor, limit, NULL, NULL);
    int st = finish(c, call);
    if (st == FLOE_OK) {
        size_t kb, vbytes;
        const unsigned char *k = floe_call_keys(call, &kb), *v = floe_call_values(call, &vbytes);
        const size_t got = kb / 8;
        floe_range_cursor next;
        int end;
        if (floe_call_range_next(call, &next, &end) != FLOE_OK || got > limit ||
            (values && vbytes != got * value_bytes)) {
            st = floe__set_error(c, FLOE_ERR_PROTOCOL, "malformed range reply");
        } else {
            if (keys && got)
                memcpy(keys, k, got * 8);
            if (values && got)
                memcpy(values, v, got * value_bytes);
            *cursor = next;
            *n = got;
            *done = end;
        }
    }
    floe_call_free(call);
    return st;
}

static int neighbours_call(floe *c, floe_call *call, size_t n, uint8_t *results, uint64_t *found, void *values,
                           unsigned value_bytes)
{
    int st = finish(c, call);
    if (st != FLOE_OK) {
        floe_call_free(call);
        return st;
    }
    size_t kb;
    const unsigned char *k = floe_call_keys(call, &kb);
    if (kb != n * 8) {
        floe_call_free(call);
        return floe__set_error(c, FLOE_ERR_PROTOCOL, "the server answered %zu neighbours for %zu keys", kb / 8, n);
    }
    if (found && n)
        memcpy(found, k, n * 8);
    return copy_key_answers(c, call, n, results, values, values ? n * value_bytes : 0, NULL);
}

int floe_successor(floe *c, const char *table, const uint64_t *keys, size_t n, uint8_t *results, uint64_t *found,
                   void *values, unsigned value_bytes)
{
    floe_call *call = floe_send_successor(c, table, keys, n, values ? FLOE_WANT_VALUES : 0, NULL, NULL);
    return neighbours_call(c, call, n, results, found, values, value_bytes);
}

int floe_predecessor(floe *c, const char *table, const uint64_t *keys, size_t n, uint8_t *results, uint64_t *found,
                     void *values, unsigned value_bytes)
{
    floe_call *call = floe_send_predecessor(c, table, keys, n, values ? FLOE_WANT_VALUES : 0, NULL, NULL);
    return neighbours_call(c, call, n, results, found, values, value_bytes);
}

static int bound_call(floe *c, bool max, const char *table, int *found, uint64_t *key, void *value,
                      unsigned value_bytes)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Min mn = FLOE__V1__MIN__INIT;
    Floe__V1__Max mx = FLOE__V1__MAX__INIT;
    if (max) {
        mx.table = (char *)table, mx.want_values = value != NULL;
        req.op_case = FLOE__V1__REQUEST__OP_MAX;
        req.max = &mx;
    } else {
        mn.table = (char *)table, mn.want_values = value != NULL;
        req.op_case = FLOE__V1__REQUEST__OP_MIN;
        req.min = &mn;
    }
    uint8_t result = FLOE_ABSENT;
    *found = 0;
    *key = 0;
    int st = neighbours_call(c, floe__send_request(c, &req, NULL, NULL), 1, &result, key, value, value_bytes);
    *found = st == FLOE_OK && result == FLOE_PRESENT;
    return st;
}

int floe_min(floe *c, const char *table, int *found, uint64_t *key, void *value, unsigned value_bytes)
{
    return bound_call(c, false, table, found, key, value, value_bytes);
}

int floe_max(floe *c, const char *table, int *found, uint64_t *key, void *value, unsigned value_bytes)
{
    return bound_call(c, true, table, found, key, value, value_bytes);
}

/* ---- connecting ---------------------------------------------------------------------------------- */

/* uri: [floe://|floes://]host[:port][/][?token=T]; *tls set for floes://. */
static int parse_uri(floe *c, const char *uri, char *host, size_t hostlen, char *port, size_t portlen, char *token,
                     size_t toklen, int *tls)
{
    const char *p = uri;
    if (strncmp(p, "floes://", 8) == 0)
        p += 8, *tls = 1;
    else if (strncmp(p, "floe://", 7) == 0)
        p += 7;
    else if (strstr(p, "://"))
        return floe__set_error(c, FLOE_ERR_INVALID, "'%s': the scheme must be floe:// or floes:// (TLS)", uri);
    const char *q = strchr(p, '?');
    size_t hplen = q ? (size_t)(q - p) : strlen(p);
    char hp[300];
    if (hplen == 0 || hplen >= sizeof hp)
        return floe__set_error(c, FLOE_ERR_INVALID, "'%s': no host", uri);
    memcpy(hp, p, hplen);
    hp[hplen] = '\0';
    if (hp[hplen - 1] == '/')
        hp[--hplen] = '\0';
    const char *h = hp, *colon;
    size_t hl;
    if (hp[0] == '[') { /* [v6]:port */
        const char *end = strchr(hp, ']');
        if (!end)
            return floe__set_error(c, FLOE_ERR_INVALID, "'%s': unclosed [", uri);
        h = hp + 1;
        hl = (size_t)(end - h);
        colon = end[1] == ':' ? end + 1 : NULL;
    } else {
        colon = strrchr(hp, ':');
        hl = colon ? (size_t)(colon - hp) : hplen;
    }
    if (hl == 0 || hl >= hostlen)
        return floe__set_error(c, FLOE_ERR_INVALID, "'%s': bad host", uri);
    memcpy(host, h, hl);
    host[hl] = '\0';
    snprintf(port, portlen, "%s", colon ? colon + 1 : "7450");
    char *end;
    long pn = strtol(port, &end, 10);
    if (!port[0] || *end || pn < 1 || pn > 65535)
        return floe__set_error(c, FLOE_ERR_INVALID, "'%s': the port must be 1..65535", uri);
    token[0] = '\0';
    if (q) {
        const char *t = strstr(q + 1, "token=");
        if (t) {
            size_t tl = strcspn(t + 6, "&");
            if (tl >= toklen)
                return floe__set_error(c, FLOE_ERR_INVALID, "the URI's token is longer than %d bytes", FLOE_TOKEN_MAX);
            memcpy(token, t + 6, tl);
            token[tl] = '\0';
        }
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
    floe_call *call = floe__send_request(c, &req, NULL, NULL);
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
        st = floe__set_error(c, FLOE_ERR_PROTOCOL, "the server's hello reply is malformed");
    }
    floe_call_free(call);
    return st;
}

/* Milliseconds left until deadline (0: none) for poll: -1 for none. */
static int left_ms(uint64_t deadline)
{
    if (!deadline)
        return -1;
    uint64_t now = now_ms();
    return now >= deadline ? 0 : (int)(deadline - now);
}

/* Waits until fd is ready for events or deadline passes: 1, 0 (timed out) or -1. */
static int wait_fd(int fd, short events, uint64_t deadline)
{
    for (;;) {
        struct pollfd pfd = {fd, events, 0};
        int rc = poll(&pfd, 1, left_ms(deadline));
        if (rc >= 0 || errno != EINTR)
            return rc > 0 ? 1 : rc;
    }
}

/* A non-blocking TCP connection to host:port by deadline (0: none). */
static int tcp_connect(floe *c, const char *host, const char *port, uint64_t deadline, int connect_timeout_ms)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_family = AF_UNSPEC}, *ai, *a;
    int gai = getaddrinfo(host, port, &hints, &ai);
    if (gai != 0)
        return floe__set_error(c, FLOE_ERR_IO, "cannot resolve %s: %s", host, gai_strerror(gai));
    int last = 0;
    bool late = false;
    for (a = ai; a && c->fd < 0 && !late; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) {
            last = errno;
            continue;
        }
        int rc = connect(fd, a->ai_addr, a->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
            rc = wait_fd(fd, POLLOUT, deadline);
            socklen_t len = sizeof last;
            if (rc == 0)
                late = true, last = ETIMEDOUT;
            else if (rc < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &last, &len) != 0)
                last = errno;
            rc = rc > 0 && last == 0 ? 0 : -1;
        } else if (rc != 0) {
            last = errno;
        }
        if (rc == 0)
            c->fd = fd;
        else
            close(fd);
    }
    freeaddrinfo(ai);
    if (late)
        return floe__set_error(c, FLOE_ERR_TIMEOUT, "cannot connect to %s:%s: no answer within %d ms", host, port,
                               connect_timeout_ms);
    if (c->fd < 0)
        return floe__set_error(c, FLOE_ERR_IO, "cannot connect to %s:%s: %s", host, port, strerror(last));
    return FLOE_OK;
}

/* TCP_NODELAY (requests are whole frames), and keepalive so that a server
 * host that vanishes is noticed even with no deadline set. */
static void tune_socket(int fd, int keepalive_s)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (keepalive_s < 0)
        return;
    int idle = keepalive_s ? keepalive_s : KEEPALIVE_S, intvl = idle / 3 > 0 ? idle / 3 : 1, cnt = 3;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

/* The TLS handshake on c->fd by deadline: the server's certificate checked
 * against the CA file (or the system's store) and for name. */
static int tls_connect(floe *c, const floe_options *o, const char *name, uint64_t deadline)
{
    char why[256];
    ERR_clear_error();
    c->tls_ctx = SSL_CTX_new(TLS_client_method());
    if (!c->tls_ctx)
        return floe__set_error(c, FLOE_ERR_TLS, "TLS: %s", tls_reason(c, why, sizeof why));
    SSL_CTX_set_min_proto_version(c->tls_ctx, TLS1_2_VERSION);
    /* a server that closes without close_notify has closed (killed, or a timeout): every response
     * carries its length, so nothing can be cut short unnoticed */
    SSL_CTX_set_options(c->tls_ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_verify(c->tls_ctx, SSL_VERIFY_PEER, NULL);
    if (o->tls_ca_file ? SSL_CTX_load_verify_locations(c->tls_ctx, o->tls_ca_file, NULL) != 1
                       : SSL_CTX_set_default_verify_paths(c->tls_ctx) != 1)
        return floe__set_error(c, FLOE_ERR_TLS, "TLS: cannot load the CA certificates %s: %s",
                               o->tls_ca_file ? o->tls_ca_file : "of the system", tls_reason(c, why, sizeof why));
    if (o->tls_cert_file) {
        const char *key = o->tls_key_file ? o->tls_key_file : o->tls_cert_file;
        if (SSL_CTX_use_certificate_chain_file(c->tls_ctx, o->tls_cert_file) != 1)
            return floe__set_error(c, FLOE_ERR_TLS, "TLS: cannot load the client certificate %s: %s", o->tls_cert_file,
                                   tls_reason(c, why, sizeof why));
        if (SSL_CTX_use_PrivateKey_file(c->tls_ctx, key, SSL_FILETYPE_PEM) != 1 ||
            SSL_CTX_check_private_key(c->tls_ctx) != 1)
            return floe__set_error(c, FLOE_ERR_TLS, "TLS: cannot use the client key %s: %s", key,
                                   tls_reason(c, why, sizeof why));
    } else if (o->tls_key_file) {
        return floe__set_error(c, FLOE_ERR_INVALID,
                               "TLS: a client key (tls-key-file) needs its certificate (tls-cert-file)");
    }
    c->tls = SSL_new(c->tls_ctx);
    if (!c->tls || SSL_set_fd(c->tls, c->fd) != 1)
        return floe__set_error(c, FLOE_ERR_TLS, "TLS: %s", tls_reason(c, why, sizeof why));
    SSL_set_mode(c->tls, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    unsigned char ip[16];
    const bool is_ip = inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1;
    if (is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->tls), name) != 1
              : SSL_set_tlsext_host_name(c->tls, name) != 1 || SSL_set1_host(c->tls, name) != 1)
        return floe__set_error(c, FLOE_ERR_TLS, "TLS: cannot check the server's name '%s': %s", name,
                               tls_reason(c, why, sizeof why));
    for (;;) {
        ERR_clear_error();
        errno = 0;
        sigpipe_guard g;
        sigpipe_block(&g);
        int r = SSL_connect(c->tls);
        sigpipe_restore(&g);
        if (r == 1)
            return FLOE_OK;
        const int e = SSL_get_error(c->tls, r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
            const unsigned long last = ERR_peek_last_error();
            const bool eof = e == SSL_ERROR_ZERO_RETURN ||
                             (e == SSL_ERROR_SYSCALL && !last && (!errno || errno == ECONNRESET || errno == EPIPE)) ||
                             ERR_GET_REASON(last) == SSL_R_UNEXPECTED_EOF_WHILE_READING;
            return floe__set_error(c, FLOE_ERR_TLS, "TLS handshake with %s: %s", name,
                                   eof ? "the server closed the connection (not a TLS port?)"
                                       : tls_reason(c, why, sizeof why));
        }
        int rc = wait_fd(c->fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline);
        if (rc == 0)
            return floe__set_error(
                c, FLOE_ERR_TIMEOUT,
                "%s accepted the connection but did not answer the TLS handshake in time (a stopped or "
                "overloaded server, or not a TLS port?)",
                name);
        if (rc < 0)
            return floe__set_error(c, FLOE_ERR_IO, "TLS handshake with %s: poll: %s", name, strerror(errno));
    }
}

int floe__connect_one(const char *uri, const floe_options *opts, floe **out)
{
    floe_options o;
    if (opts) {
        o = *opts;
        if (opts->token == opts->token_store_)
            o.token = o.token_store_;
    } else {
        memset(&o, 0, sizeof o);
    }
    floe *c = calloc(1, sizeof *c);
    *out = c;
    if (!c)
        return FLOE_ERR_IO;
    c->fd = -1;
    char host[256], port[16], utoken[FLOE_TOKEN_MAX + 1];
    int st = parse_uri(c, uri ? uri : "", host, sizeof host, port, sizeof port, utoken, sizeof utoken, &o.tls);
    if (st != FLOE_OK)
        return st;
    const char *token = o.token && o.token[0] ? o.token : utoken;
    if (strlen(token) > FLOE_TOKEN_MAX)
        return floe__set_error(c, FLOE_ERR_INVALID, "the token is longer than %d bytes", FLOE_TOKEN_MAX);
    /* unless a connect timeout is given, a call's timeout bounds connecting too (curl's --max-time) */
    const int cto = o.connect_timeout_ms         ? o.connect_timeout_ms
                    : o.timeout_ms > 0 && o.timeout_ms < CONNECT_TIMEOUT_MS ? o.timeout_ms
                                                                            : CONNECT_TIMEOUT_MS;
    const uint64_t deadline = cto > 0 ? now_ms() + (uint64_t)cto : 0;
    st = tcp_connect(c, host, port, deadline, cto);
    if (st != FLOE_OK)
        return st;
    tune_socket(c->fd, o.keepalive_s);
    if (o.tls && (st = tls_connect(c, &o, o.tls_server_name ? o.tls_server_name : host, deadline)) != FLOE_OK) {
        transport_close(c);
        return st;
    }
    /* the hello is part of connecting: it runs under the connect deadline */
    c->timeout_ms = deadline ? left_ms(deadline) + 1 : 0;
    st = hello(c, token);
    if (st == FLOE_ERR_TIMEOUT)
        floe__set_error(c, st,
                        "%s:%s%s accepted the connection but did not answer hello within %d ms (a stopped or "
                        "overloaded server, or not a floed%s?)",
                        host, port, o.tls ? " (TLS)" : "", cto, o.tls ? "" : ", or a TLS port");
    else if (st == FLOE_ERR_IO && c->fd < 0)
        floe__set_error(c, st, "%s:%s%s closed the connection before answering hello (not a floed%s?)", host, port,
                        o.tls ? " (TLS)" : "", o.tls ? ", or not a TLS port" : ", or a TLS port");
    floe_set_timeout(c, o.timeout_ms);
    return st;
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
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
        return floe__set_error(c, FLOE_ERR_IO, "cannot make the socket non-blocking");
    tune_socket(fd, -1); /* a socketpair takes neither option: no matter */
    return hello(c, token ? token : "");
}

void floe_close(floe *c)
{
    if (!c)
        return;
    if (c->router)
        c->router->close(c);
    transport_close(c);
    floe__set_error(c, FLOE_ERR_IO, "connection closed");
    fail_all(c);
    if (c->tls_ctx)
        SSL_CTX_free(c->tls_ctx);
    free(c->out);
    free(c->in);
    free(c);
}

/* ---- options as the tools take them ---------------------------------------------------------------- */

static const floe_option_spec OPTION_SPECS[] = {
    {"token", "FLOE_TOKEN", "TOKEN", "the server's token"},
    {"token-file", "FLOE_TOKEN_FILE", "FILE", "read the server's token from FILE (keeps it out of ps)"},
    {"timeout", "FLOE_TIMEOUT", "SECONDS",
     "give up on a request not answered in SECONDS, and on connecting after as long unless "
     "--connect-timeout is given (default 0: wait)"},
    {"connect-timeout", "FLOE_CONNECT_TIMEOUT", "SECONDS",
     "give up connecting (TCP, TLS, hello) after SECONDS (default 10, or --timeout if less; 0: wait)"},
    {"tls", "FLOE_TLS", NULL, "use TLS (as floes:// does) even for HOST:PORT"},
    {"tls-ca-file", "FLOE_TLS_CA_FILE", "FILE",
     "CA certificates (PEM) to check the server with (default: the system's)"},
    {"tls-cert-file", "FLOE_TLS_CERT_FILE", "FILE", "client certificate (PEM), for a server that asks for one"},
    {"tls-key-file", "FLOE_TLS_KEY_FILE", "FILE", "the client certificate's key (PEM; default: in the cert file)"},
    {"tls-server-name", "FLOE_TLS_SERVER_NAME", "NAME",
     "the name the server's certificate must carry (default: the host connected to)"},
};
#define NOPTION_SPECS (sizeof OPTION_SPECS / sizeof OPTION_SPECS[0])

const floe_option_spec *floe_option_specs(size_t *n)
{
    *n = NOPTION_SPECS;
    return OPTION_SPECS;
}

/* Seconds, with a fraction ("2.5"), as milliseconds; 0 or more, below 24 days. */
static int parse_seconds(const char *s, int *ms)
{
    char *end;
    errno = 0;
    double v = s[0] == '-' ? -1 : strtod(s, &end);
    if (v < 0 || errno || end == s || *end || !isfinite(v) || v * 1000.0 > INT_MAX)
        return -1;
    *ms = (int)ceil(v * 1000.0);
    return 0;
}

int floe_options_set(floe_options *o, const char *name, const char *value, char *err, size_t errlen)
{
    if (strcmp(name, "tls") == 0) {
        if (!value || !strcmp(value, "1") || !strcmp(value, "yes") || !strcmp(value, "true") || !strcmp(value, "on"))
            o->tls = 1;
        else if (!strcmp(value, "0") || !strcmp(value, "no") || !strcmp(value, "false") || !strcmp(value, "off"))
            o->tls = 0;
        else {
            snprintf(err, errlen, "tls: '%s' is not yes or no", value);
            return FLOE_ERR_INVALID;
        }
        return FLOE_OK;
    }
    if (!value) {
        snprintf(err, errlen, "%s needs a value", name);
        return FLOE_ERR_INVALID;
    }
    int ms;
    if (strcmp(name, "token") == 0) {
        if (strlen(value) > FLOE_TOKEN_MAX) {
            snprintf(err, errlen, "token: longer than %d bytes", FLOE_TOKEN_MAX);
            return FLOE_ERR_INVALID;
        }
        o->token = value;
    } else if (strcmp(name, "token-file") == 0) {
        char why[300];
        if (floe_token_file_read(value, o->token_store_, why, sizeof why) != 0) {
            snprintf(err, errlen, "token-file %s", why);
            return FLOE_ERR_INVALID;
        }
        o->token = o->token_store_;
    } else if (strcmp(name, "timeout") == 0 || strcmp(name, "connect-timeout") == 0) {
        if (parse_seconds(value, &ms) != 0) {
            snprintf(err, errlen, "%s: '%s' is not a number of seconds (0 or more)", name, value);
            return FLOE_ERR_INVALID;
        }
        if (name[0] == 't')
            o->timeout_ms = ms;
        else
            o->connect_timeout_ms = ms ? ms : -1;
    } else if (strcmp(name, "tls-ca-file") == 0) {
        o->tls_ca_file = value;
    } else if (strcmp(name, "tls-cert-file") == 0) {
        o->tls_cert_file = value;
    } else if (strcmp(name, "tls-key-file") == 0) {
        o->tls_key_file = value;
    } else if (strcmp(name, "tls-server-name") == 0) {
        o->tls_server_name = value;
    } else {
        snprintf(err, errlen, "unknown option '%s'", name);
        return FLOE_ERR_INVALID;
    }
    return FLOE_OK;
}

int floe_options_from_env(floe_options *o, char *err, size_t errlen)
{
    for (size_t i = 0; i < NOPTION_SPECS; i++) {
        const char *v = getenv(OPTION_SPECS[i].env);
        if (!v || !v[0])
            continue;
        char why[300];
        if (floe_options_set(o, OPTION_SPECS[i].name, v, why, sizeof why) != FLOE_OK) {
            snprintf(err, errlen, "$%s: %s", OPTION_SPECS[i].env, why);
            return FLOE_ERR_INVALID;
        }
    }
    return FLOE_OK;
}

int floe_parse_size(const char *s, uint64_t *out)
{
    return floe_size_parse(s, out);
}
