/*
 * conn.c - client connections and the io threads that serve them: framing,
 * authentication, back-pressure; each decoded request goes to request.c
 * (see conn.h and server.h).
 *
 * Everything here runs on the connection's io thread except conn_deliver
 * (the session's deliver), which any thread may call to hand a response over.
 */
#define _GNU_SOURCE
#include "conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "alloc.h"
#include "envelope.h"
#include "hostmem.h"
#include "log.h"
#include "metrics.h"
#include "request.h"
#include "resp.h"
#include "tls.h"

#define IO_MAX_SINGLE      ((size_t)4 << 20) /* bytes per socket read or write call */
/* On TLS, libevent reserves the whole max single read in the input buffer for every read (a
 * plain read asks the socket how much it has) and OpenSSL fills one record of it, at most 16 KiB:
 * with 4 MiB, an allocation of 4 MiB a request.  One record's room is all a read takes. */
#define TLS_MAX_SINGLE_READ ((size_t)16 << 10)
/* A frame this large on a plain connection is read straight from the socket
 * into its own buffer: libevent 2.1 reads at most 4 KiB a call into its
 * input buffer (EVBUFFER_MAX_READ), 128 calls and callbacks and a copy out
 * for each of E1's 512 KiB requests. */
#define DIRECT_READ_MIN    ((uint32_t)64 << 10)

static atomic_ulong next_serial = 1;

/* The connection's io thread: its shard of the counters (metrics.h). */
#define SHARD(c) ((size_t)((c)->io - (c)->srv->io))

static void count_request(conn *c, int op, size_t frame_bytes)
{
    c->req_op = op;
    metrics_request(c->srv->metrics, SHARD(c), op, frame_bytes);
}

void conn_ref(conn *c)
{
    atomic_fetch_add(&c->refs, 1);
}

void conn_unref(conn *c)
{
    if (atomic_fetch_sub(&c->refs, 1) == 1) {
        resp_free(c->resp);
        free(c);
    }
}

/* Keeps srv->out_bytes, every connection's unread responses, as each
 * connection's output buffer grows and drains (output-total-limit). */
static void count_output(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    (void)buf;
    server *srv = arg;
    if (info->n_added)
        atomic_fetch_add(&srv->out_bytes, info->n_added);
    if (info->n_deleted)
        atomic_fetch_sub(&srv->out_bytes, info->n_deleted);
}

static void close_now(conn *c)
{
    if (!c->open)
        return;
    c->open = false;
    atomic_store(&c->s.gone, true); /* its queued requests need not run */
    /* Closing a socket with unread bytes makes the kernel send a reset, which can destroy our last
     * answer (or TLS alert) before the client reads it: take what has arrived first. */
    const evutil_socket_t fd = bufferevent_getfd(c->bev);
    char sink[4096];
    for (int i = 0; fd >= 0 && i < 64 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++)
        ;
    struct evbuffer *out = bufferevent_get_output(c->bev);
    evbuffer_remove_cb(out, count_output, c->srv); /* its unread responses leave the account with it */
    atomic_fetch_sub(&c->srv->out_bytes, evbuffer_get_length(out));
    bufferevent_free(c->bev);
    c->bev = NULL;
    hostmem_put(c->srv->mem, c->rx_mem); /* a frame it was reading */
    c->rx_mem = c->rx_frame = NULL;
    if (c->prev)
        c->prev->next = c->next;
    else
        c->io->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    atomic_fetch_sub(&c->srv->nconns, 1);
    if (c->io->stop_seen && !c->io->conns)
        event_base_loopbreak(c->io->base);
    log_debug("connection %llu (%s) closed, %u requests in flight", (unsigned long long)c->s.serial, c->peer,
              c->inflight);
    conn_unref(c); /* the io thread's own reference */
}

static void read_frames(conn *c);

/* Reads while nothing holds the connection back: max-inflight requests out
 * (paused) or output-soft-limit bytes of responses unread (out_paused). */
static void update_reading(conn *c)
{
    if (!c->open || c->closing)
        return;
    if (c->paused || c->out_paused) {
        bufferevent_disable(c->bev, EV_READ);
    } else {
        bufferevent_enable(c->bev, EV_READ);
        read_frames(c); /* frames already buffered get no new read event */
    }
}

/* After responses were written into c's output: a client that sends and
 * never reads must not grow floed without bound (as Redis's
 * client-output-buffer-limit).  Past output-hard-limit unread bytes the
 * connection closes; past output-soft-limit floed reads no more requests
 * until the client has read half of it; and while all connections' unread
 * responses are past output-total-limit, none of those with responses
 * unread is read until it has read them all. */
static void check_output(conn *c)
{
    if (!c->open)
        return;
    const size_t out = evbuffer_get_length(bufferevent_get_output(c->bev));
    const uint64_t hard = LIVE(c->srv, output_hard_limit), soft = LIVE(c->srv, output_soft_limit);
    const uint64_t total = LIVE(c->srv, output_total_limit);
    if (total && out && (atomic_load(&c->s.unread) || atomic_load(&c->srv->out_bytes) > total) &&
        c->out_paused != OUT_TOTAL) {
        atomic_store(&c->s.unread, true); /* its requests queued are answered ERR_BUSY, not run */
        c->out_paused = OUT_TOTAL;
        bufferevent_setwatermark(c->bev, EV_WRITE, 0, 0); /* on_write once it is all read */
        update_reading(c);
    }
    if (hard && out > hard) {
        LOG_LIMITED(LOG_WARN,
                    "connection %llu (%s): %zu bytes of responses unread, above output-hard-limit (%llu): "
                    "closing it",
                    (unsigned long long)c->s.serial, c->peer, out, (unsigned long long)hard);
        close_now(c);
        return;
    }
    if (soft && out > soft && c->out_paused == OUT_READING) {
        c->out_paused = OUT_SOFT;
        bufferevent_setwatermark(c->bev, EV_WRITE, soft / 2, 0); /* on_write once it is down to half */
        update_reading(c);
    }
}

static void on_write(struct bufferevent *bev, void *arg)
{
    conn *c = arg;
    const size_t out = evbuffer_get_length(bufferevent_get_output(bev));
    if (c->closing && out == 0 && (!c->resp || !resp_waiting(c->resp))) {
        close_now(c);
        return;
    }
    if (out == 0)
        atomic_store(&c->s.unread, false);
    if ((c->out_paused == OUT_SOFT && out <= LIVE(c->srv, output_soft_limit) / 2) ||
        (c->out_paused == OUT_TOTAL && out == 0)) {
        c->out_paused = OUT_READING;
        bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
        update_reading(c);
    }
}

/* While floed stops, a connection closes once it is quiet: nothing in
 * flight, every response written, nothing unparsed and nothing read for
 * STOP_QUIET_NS.  Closing earlier, while the client is still sending, would
 * make the kernel answer with a reset that destroys responses the client
 * has not read yet; meanwhile every request that arrives is answered with
 * ERR_SHUTTING_DOWN.  The stop timer closes whatever is left. */
#define STOP_QUIET_NS (100 * 1000000ull)
/* How long a connection that is closing may take to read its last answer. */
#define CLOSING_NS (5 * 1000000000ull)

static bool quiet(const conn *c, uint64_t now)
{
    return c->inflight == 0 && evbuffer_get_length(bufferevent_get_output(c->bev)) == 0 &&
           evbuffer_get_length(bufferevent_get_input(c->bev)) == 0 && !c->rx_mem && /* no frame half read */
           now - c->last_read >= STOP_QUIET_NS;
}

static void stop_sweep(io_thread *io)
{
    const uint64_t now = floe_now_ns();
    for (conn *c = io->conns, *next; c; c = next) {
        next = c->next;
        if (quiet(c, now))
            close_now(c);
    }
    if (!io->conns)
        event_base_loopbreak(io->base);
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    stop_sweep(arg);
}

/* f, or in its place an ERR_BUSY answer (f freed) when c has responses
 * unread already and f would take all connections' unread responses past
 * output-total-limit: the memory of slow readers is bounded, a client that
 * reads its answers is still answered, and the process goes on. */
static frame *within_total(conn *c, frame *f)
{
    const uint64_t limit = LIVE(c->srv, output_total_limit);
    if (!limit || !f || !f->len || !c->open)
        return f;
    const size_t own = evbuffer_get_length(bufferevent_get_output(c->bev));
    const uint64_t all = atomic_load(&c->srv->out_bytes);
    if (!own || all + f->len <= limit)
        return f;
    frame *e = reply_errorf(f->id, FLOE_ERR_BUSY,
                            "the server's unread responses are past output-total-limit (%llu bytes): the request ran, "
                            "but its %zu-byte answer was dropped; read the answers sent before it, then retry",
                            (unsigned long long)limit, f->len);
    if (!e)
        return f;
    LOG_LIMITED(LOG_WARN,
                "connection %llu (%s): %zu bytes of its responses and %llu of all connections' unread, past "
                "output-total-limit (%llu): a %zu-byte answer dropped for ERR_BUSY",
                (unsigned long long)c->s.serial, c->peer, own, (unsigned long long)all, (unsigned long long)limit,
                f->len);
    e->to = f->to;
    e->req_op = f->req_op;
    e->t_parse = f->t_parse;
    free(f);
    atomic_store(&c->s.unread, true); /* its other requests queued are answered so too, not run */
    return e;
}

/* Writes answer f to c's socket: as it is, or on the RESP port as the
 * replies it answers (resp.h); a RESP connection that waited for it reads
 * on. */
static void write_answer(conn *c, const frame *f)
{
    if (!c->resp) {
        bufferevent_write(c->bev, f->data, f->len);
        return;
    }
    if (resp_answer(c->resp, f, bufferevent_get_output(c->bev)))
        bufferevent_trigger(c->bev, EV_READ, BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
}

/* Writes f to c now (io thread); frees f. */
static void send_frame(conn *c, frame *f)
{
    if (!f) {
        log_error("out of memory building a response for connection %llu", (unsigned long long)c->s.serial);
        close_now(c);
        return;
    }
    f = within_total(c, f);
    const bool open = c->open;
    if (open)
        write_answer(c, f);
    metrics_answered(c->srv->metrics, SHARD(c), c->req_op, f->status, 0, c->s.t_frame, open ? f->len : 0);
    free(f);
    check_output(c);
}

#define send_error(c, id, st, ...) send_frame(c, reply_errorf(id, st, __VA_ARGS__))

/* Answers with f, then closes once the answer is written. */
static void fail_and_close(conn *c, frame *f, const char *why)
{
    /* a client can cause this at will: at most a line a second */
    LOG_LIMITED(LOG_WARN, "connection %llu (%s): %s; closing", (unsigned long long)c->s.serial, c->peer, why);
    send_frame(c, f);
    if (!c->open)
        return;
    c->closing = true;
    c->t_closing = floe_now_ns();
    bufferevent_disable(c->bev, EV_READ);
    if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
        close_now(c);
}

/* ---- the session: what request.c sees of a connection ------------------------------------ */

static conn *conn_of(session *s)
{
    return (conn *)(void *)s;
}

static void session_send(session *s, frame *f)
{
    send_frame(conn_of(s), f);
}

static void session_send_and_close(session *s, frame *f, const char *why)
{
    fail_and_close(conn_of(s), f, why);
}

/* A request in flight holds the connection until its answer is delivered. */
static void session_hold(session *s)
{
    conn *c = conn_of(s);
    conn_ref(c);
    c->inflight++;
}

static void conn_deliver(conn *c, frame *f);

static void session_deliver(session *s, frame *f)
{
    conn_deliver(conn_of(s), f);
}

static const session_ops SESSION_OPS = {
    .send = session_send,
    .send_and_close = session_send_and_close,
    .hold = session_hold,
    .deliver = session_deliver,
};

/* Counts a decoded request and lets it through unless the connection
 * must say hello with the token first (then it answers and closes). */
static bool admit(conn *c, Floe__V1__Request__OpCase op, uint64_t id)
{
    count_request(c, metrics_op_of_request(op), 0);
    if (!c->s.authed && op != FLOE__V1__REQUEST__OP_HELLO && server_token_required(c->srv)) {
        const char *why = "this server requires a token: send hello with it first";
        fail_and_close(c, reply_error(id, FLOE_ERR_UNAUTHENTICATED, why), why);
        return false;
    }
    c->said_hello = true; /* hello-timeout is met (a hello with a wrong token closes the connection) */
    return true;
}

/* ---- framing ------------------------------------------------------------------------------- */

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

/* protobuf-c hands strings over NUL-terminated without their length, so
 * "ab\0cd" would silently become "ab": look at the string fields of the
 * raw message (walking it with its descriptor) for a NUL byte.  false if
 * one has one; the message itself has already parsed. */
static bool strings_clean(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len, int depth)
{
    const uint8_t *end = p + len;
    while (p < end) {
        uint64_t tag, n;
        if (!read_varint(&p, end, &tag))
            return false;
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(d, (unsigned)(tag >> 3));
        switch (tag & 7) {
        case 0:
            if (!read_varint(&p, end, &n))
                return false;
            break;
        case 1:
            p += 8;
            break;
        case 5:
            p += 4;
            break;
        case 2:
            if (!read_varint(&p, end, &n) || n > (uint64_t)(end - p))
                return false;
            if (f && f->type == PROTOBUF_C_TYPE_STRING && memchr(p, 0, n))
                return false;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE && depth < 8 && !strings_clean(f->descriptor, p, n, depth + 1))
                return false;
            p += n;
            break;
        default:
            return false;
        }
    }
    return p == end;
}

static void pause_if_full(conn *c)
{
    if (c->open && !c->paused && c->inflight >= LIVE(c->srv, max_inflight)) {
        c->paused = true;
        update_reading(c);
    }
}

/* The first bytes of a TLS ClientHello: a handshake record, version 3.x. */
static bool looks_like_tls(const unsigned char *hdr)
{
    return hdr[0] == 0x16 && hdr[1] == 0x03;
}

/* A buffer of its own for a frame of len bytes that begins `in` (the
 * request keeps it: its keys are read in place), placed so that the keys
 * of a key request start 8-byte aligned, as the engines read them: the
 * envelope is read from the first 256 bytes.  Returns the buffer to free,
 * *at_frame where the frame starts in it; NULL if out of memory. */
static unsigned char *frame_buffer(hostmem *mem, struct evbuffer *in, uint32_t len, unsigned char **at_frame)
{
    unsigned char head[256];
    const ev_ssize_t got = evbuffer_copyout(in, head, len < sizeof head ? len : sizeof head);
    size_t at, pad = 0;
    if (got > 0 && envelope_keys_at(head, (size_t)got, &at))
        pad = (8 - at % 8) % 8;
    unsigned char *buf = hostmem_get(mem, (size_t)len + 8);
    if (buf)
        *at_frame = buf + pad;
    return buf;
}

/* Takes a whole frame's bytes out of `in` into a buffer of its own
 * (frame_buffer); NULL if out of memory (the frame is dropped from `in`). */
static unsigned char *take_frame(hostmem *mem, struct evbuffer *in, uint32_t len, unsigned char **at_frame)
{
    unsigned char *buf = frame_buffer(mem, in, len, at_frame);
    if (buf)
        evbuffer_remove(in, *at_frame, len);
    else
        evbuffer_drain(in, len);
    return buf;
}

/* Reads the rest of c's large frame: what libevent read meanwhile (it comes
 * first), then straight from the socket, no further than the frame's end.
 * True once the frame is whole; false when the socket has no more yet (an
 * end of file or error is libevent's to see on its next read). */
static bool read_direct(conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    c->rx_have += (uint32_t)evbuffer_remove(in, c->rx_frame + c->rx_have, c->rx_len - c->rx_have);
    const evutil_socket_t fd = bufferevent_getfd(c->bev);
    while (c->rx_have < c->rx_len) {
        const ssize_t n = recv(fd, c->rx_frame + c->rx_have, c->rx_len - c->rx_have, MSG_DONTWAIT);
        if (n > 0)
            c->rx_have += (uint32_t)n;
        else if (!(n < 0 && errno == EINTR))
            return false;
    }
    return true;
}

static void read_frames_held(conn *c);

/* No memory for a request's frame: its id is not known, so closing is the
 * one way to tell its client. */
static void frame_out_of_memory(conn *c, uint32_t len)
{
    count_request(c, METRICS_OP_UNKNOWN, 0);
    LOG_LIMITED(LOG_ERROR, "connection %llu (%s): out of memory reading a request of %u bytes; closing it",
                (unsigned long long)c->s.serial, c->peer, len);
    close_now(c);
}

/* A request may close the connection (an answer that cannot be built, the
 * output limit): the reference keeps c alive until the loop has seen it. */
static void read_frames(conn *c)
{
    conn_ref(c);
    read_frames_held(c);
    /* frame-timeout: a frame that has begun must end (each byte of it is no proof of life); a
     * connection not being read (paused) owes nothing meanwhile */
    const bool partial = c->open && !c->closing && !c->paused && !c->out_paused &&
                         (c->rx_mem || evbuffer_get_length(bufferevent_get_input(c->bev)) > 0);
    if (!partial)
        c->t_partial = 0;
    else if (!c->t_partial)
        c->t_partial = floe_now_ns();
    conn_unref(c);
}

/* The next whole frame of c in a buffer of its own: true with *mem (the
 * buffer to free), *bytes and *len; false when none is whole yet, or the
 * frame closed c (its header was wrong, or no memory for it). */
static bool next_frame(conn *c, unsigned char **mem, unsigned char **bytes, uint32_t *len)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    if (c->rx_mem) { /* a large frame on its way */
        if (!read_direct(c))
            return false;
        *mem = c->rx_mem;
        *bytes = c->rx_frame;
        *len = c->rx_len;
        c->rx_mem = c->rx_frame = NULL;
        c->s.t_frame = floe_now_ns();
        metrics_request(c->srv->metrics, SHARD(c), -1, 4 + (size_t)*len);
        return true;
    }
    const uint64_t max_frame = LIVE(c->srv, max_frame);
    size_t have = evbuffer_get_length(in);
    unsigned char hdr[4];
    if (have < 4)
        return false;
    evbuffer_copyout(in, hdr, 4);
    if (!c->tls && !c->said_hello && looks_like_tls(hdr)) {
        /* an answer in our framing would only confuse its TLS client */
        LOG_LIMITED(LOG_WARN, "connection %llu (%s): a TLS handshake on the plain port%s; closing",
                    (unsigned long long)c->s.serial, c->peer,
                    c->srv->tls_listener ? " (this floed has a TLS port)" : " (this floed has no TLS port)");
        close_now(c);
        return false;
    }
    const uint32_t n = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
    if (n == 0 || n > max_frame) {
        c->s.t_frame = floe_now_ns();
        count_request(c, METRICS_OP_UNKNOWN, 4);
    }
    if (n == 0) {
        fail_and_close(c, reply_error(0, FLOE_ERR_INVALID, "frame of length 0"), "frame of length 0");
        return false;
    }
    if (n > max_frame) {
        char msg[128];
        snprintf(msg, sizeof msg, "frame of %u bytes is above max-frame (%llu bytes)", n,
                 (unsigned long long)max_frame);
        fail_and_close(c, reply_error(0, FLOE_ERR_TOO_LARGE, msg), msg);
        return false;
    }
    if (have < 4 + (size_t)n) { /* the rest is on its way */
        if (c->tls || n < DIRECT_READ_MIN || have < 4 + 256)
            return false;
        evbuffer_drain(in, 4); /* its envelope is in: the rest goes straight into its buffer */
        c->rx_mem = frame_buffer(c->srv->mem, in, n, &c->rx_frame);
        c->rx_len = n;
        c->rx_have = 0;
        if (!c->rx_mem) {
            frame_out_of_memory(c, n);
            return false;
        }
        return next_frame(c, mem, bytes, len);
    }
    evbuffer_drain(in, 4);
    c->s.t_frame = floe_now_ns();
    metrics_request(c->srv->metrics, SHARD(c), -1, 4 + (size_t)n); /* its bytes; the operation once parsed */
    *mem = take_frame(c->srv->mem, in, n, bytes);
    if (!*mem) {
        frame_out_of_memory(c, n);
        return false;
    }
    *len = n;
    return true;
}

/* Serves one request frame of c: bytes[0, len) in mem (hostmem, given back here). */
static void serve_frame(conn *c, unsigned char *mem, unsigned char *bytes, uint32_t len)
{
    envelope env;
    if (envelope_read(bytes, len, &env) && request_in_place(env.op)) { /* a key request: served where it lies */
        if (admit(c, env.op, env.id))
            request_handle_keys(c->srv, &c->s, &env, mem);
        else
            hostmem_put(c->srv->mem, mem);
        pause_if_full(c);
        return;
    }
    Floe__V1__Request *req = floe__v1__request__unpack(NULL, len, bytes);
    const bool clean = req && strings_clean(&floe__v1__request__descriptor, bytes, len, 0);
    hostmem_put(c->srv->mem, mem);
    if (!req) {
        count_request(c, METRICS_OP_UNKNOWN, 0);
        send_error(c, 0, FLOE_ERR_INVALID, "a frame of %u bytes does not parse as a floe.v1.Request", len);
        return;
    }
    if (!clean) {
        count_request(c, metrics_op_of_request(req->op_case), 0);
        send_error(c, req->id, FLOE_ERR_INVALID, "a string of the request (a table name?) holds a NUL byte");
        floe__v1__request__free_unpacked(req, NULL);
        return;
    }
    if (admit(c, req->op_case, req->id))
        request_handle(c->srv, &c->s, req);
    else
        floe__v1__request__free_unpacked(req, NULL);
    pause_if_full(c);
}

/* A RESP connection's commands (resp.h): each request they make is served
 * as a frame read from the socket is; the rest are answered by resp.c. */
static void read_commands(conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev), *out = bufferevent_get_output(c->bev);
    while (c->open && !c->closing && !c->paused && !c->out_paused) {
        const size_t have = evbuffer_get_length(in);
        if (!have)
            break;
        const unsigned char *p = evbuffer_pullup(in, -1);
        unsigned char *mem, *bytes;
        uint32_t len;
        size_t used = 0;
        c->s.t_frame = floe_now_ns();
        resp_step st = resp_take(c->resp, p, have, &used, &mem, &bytes, &len, out);
        evbuffer_drain(in, used);
        if (used)
            metrics_request(c->srv->metrics, SHARD(c), -1, used);
        if (used && (c->s.authed || !server_token_required(c->srv)))
            c->said_hello = true; /* hello-timeout: met by a command, with the token if one is set (AUTH) */
        if (st == RESP_MORE && !used && have >= LIVE(c->srv, max_frame)) { /* read no further: the watermark */
            resp_refuse(c->resp, "Protocol error: a command longer than max-frame", out);
            st = RESP_CLOSE;
        }
        if (st == RESP_FRAME) {
            serve_frame(c, mem, bytes, len);
            continue;
        }
        if (st == RESP_CLOSE) { /* once every reply queued is written */
            c->closing = true;
            c->t_closing = floe_now_ns();
            bufferevent_disable(c->bev, EV_READ);
            if (evbuffer_get_length(out) == 0 && !resp_waiting(c->resp))
                close_now(c);
            return;
        }
        break;
    }
    check_output(c);
}

static void read_frames_held(conn *c)
{
    if (c->resp) {
        read_commands(c);
        return;
    }
    while (c->open && !c->closing && !c->paused && !c->out_paused) {
        unsigned char *bytes, *mem;
        uint32_t len;
        if (!next_frame(c, &mem, &bytes, &len))
            return;
        serve_frame(c, mem, bytes, len);
    }
}

static void on_read(struct bufferevent *bev, void *arg)
{
    (void)bev;
    conn *c = arg;
    c->last_read = floe_now_ns();
    read_frames(c);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    conn *c = arg;
    if (c->tls && (what & BEV_EVENT_ERROR)) {
        unsigned long e = bufferevent_get_openssl_error(bev);
        if (e) {
            char why[300];
            LOG_LIMITED(LOG_WARN, "connection %llu (%s): TLS: %s; closing", (unsigned long long)c->s.serial, c->peer,
                        tls_last_error(e, why, sizeof why));
            while (bufferevent_get_openssl_error(bev))
                ;
        }
    }
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        close_now(c);
}

/* The connections floed takes at once: max-connections, or fewer when the
 * open-file limit allows fewer (floed.c). */
static uint64_t connection_limit(const server *srv)
{
    const uint64_t setting = LIVE(srv, max_connections);
    return srv->fd_connections && srv->fd_connections < setting ? srv->fd_connections : setting;
}

void conn_accept(io_thread *io, int fd, bool tls, bool resp_port)
{
    server *srv = io->srv;
    const uint64_t max_connections = connection_limit(srv);
    const bool refuse = atomic_fetch_add(&srv->nconns, 1) >= (int)max_connections;
    if (refuse) {
        metrics_connection(srv->metrics, (size_t)(io - srv->io), true);
        LOG_LIMITED(LOG_WARN, "refused a connection: %llu connections open (%s)", (unsigned long long)max_connections,
                    max_connections < LIVE(srv, max_connections) ? "as many as the open-file limit allows"
                                                                 : "max-connections");
    }
    if (refuse && !tls) { /* ERR_BUSY straight into the socket; a TLS client gets it after the handshake */
        atomic_fetch_sub(&srv->nconns, 1);
        frame *f = reply_error(0, FLOE_ERR_BUSY, "too many connections (max-connections)");
        static const char resp_busy[] = "-ERR max number of clients reached (max-connections)\r\n";
        if (resp_port) {
            ssize_t ignored = send(fd, resp_busy, sizeof resp_busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)ignored;
        } else if (f) {
            ssize_t ignored = send(fd, f->data, f->len, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)ignored;
            free(f);
        }
        evutil_closesocket(fd);
        return;
    }
    struct bufferevent *bev = NULL;
    if (!tls) {
        bev = bufferevent_socket_new(io->base, fd, BEV_OPT_CLOSE_ON_FREE);
    } else {
        struct ssl_st *ssl = tls_server_session(srv->tls);
        bev = ssl ? bufferevent_openssl_socket_new(io->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE)
                  : NULL;
        if (bev) /* a client that closes without close_notify has closed, not failed */
            bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
        else if (ssl)
            SSL_free(ssl);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char peer[64] = "?";
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0 && ss.ss_family == AF_INET) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
        char ip[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof ip);
        snprintf(peer, sizeof peer, "%s:%u", ip, ntohs(sin->sin_port));
    }
    conn *c = bev ? conn_attach(io, bev, peer) : NULL;
    if (!c) {
        if (bev)
            bufferevent_free(bev); /* closes fd */
        else
            evutil_closesocket(fd);
        atomic_fetch_sub(&srv->nconns, 1);
        LOG_LIMITED(LOG_ERROR, "out of memory accepting a connection");
        return;
    }
    c->tls = tls;
    if (resp_port && !(c->resp = resp_new(srv, &c->s))) {
        LOG_LIMITED(LOG_ERROR, "out of memory accepting a connection");
        close_now(c);
        return;
    }
    if (refuse) { /* over TLS: sent once the handshake is done, then closed */
        send_frame(c, reply_error(0, FLOE_ERR_BUSY, "too many connections (max-connections)"));
        c->closing = true;
        c->t_closing = c->t_accept;
        bufferevent_disable(bev, EV_READ);
        return;
    }
    metrics_connection(srv->metrics, (size_t)(io - srv->io), false);
}

conn *conn_attach(io_thread *io, struct bufferevent *bev, const char *peer)
{
    server *srv = io->srv;
    conn *c = floe_calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->s.ops = &SESSION_OPS;
    atomic_init(&c->s.gone, false);
    atomic_init(&c->s.unread, false);
    atomic_init(&c->refs, 1);
    c->io = io;
    c->s.lane = (unsigned)(io - io->srv->io); /* one lane an io thread: its connections merge together */
    c->srv = srv;
    c->bev = bev;
    evbuffer_add_cb(bufferevent_get_output(bev), count_output, srv);
    c->open = true;
    c->s.serial = atomic_fetch_add(&next_serial, 1);
    c->t_accept = c->last_read = floe_now_ns();
    snprintf(c->peer, sizeof c->peer, "%s", peer);
    c->next = io->conns;
    if (io->conns)
        io->conns->prev = c;
    io->conns = c;
    /* Stop reading when a frame's worth is buffered and unparsed: the high
     * watermark bounds memory per connection. */
    bufferevent_setwatermark(bev, EV_READ, 0, (size_t)LIVE(srv, max_frame) + 4 + 65536);
    /* libevent reads and writes at most 16 KiB per callback by default: a
     * 512 KiB request would take 32 read calls and as many wake-ups.  Take
     * whatever the socket has (fewer system calls, and a frame more often
     * lands in one buffer chain, so evbuffer_pullup need not copy it). */
    bufferevent_set_max_single_read(bev, bufferevent_openssl_get_ssl(bev) ? TLS_MAX_SINGLE_READ : IO_MAX_SINGLE);
    bufferevent_set_max_single_write(bev, IO_MAX_SINGLE);
    bufferevent_setcb(bev, on_read, on_write, on_event, c);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
    log_debug("connection %llu from %s", (unsigned long long)c->s.serial, c->peer);
    return c;
}

static void conn_deliver(conn *c, frame *f)
{
    io_thread *io = c->io;
    if (!f) {
        f = floe_calloc(1, sizeof *f); /* still must answer for the in-flight count */
        if (!f)
            abort();
        f->len = 0;
    }
    f->to = &c->s;
    pthread_mutex_lock(&io->lock);
    queue_push(&io->deliveries, &f->link);
    pthread_mutex_unlock(&io->lock);
    event_active(io->wake, EV_READ, 0);
}

static void stop_now(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    io_thread *io = arg;
    while (io->conns)
        close_now(io->conns);
    event_base_loopbreak(io->base);
}

void io_wake(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    io_thread *io = arg;
    pthread_mutex_lock(&io->lock);
    queue_link *list = queue_take(&io->deliveries);
    accepted *fds = io->new_fds;
    size_t nfds = io->nnew;
    io->new_fds = NULL;
    io->nnew = io->capnew = 0;
    bool stopping = io->stopping;
    pthread_mutex_unlock(&io->lock);

    for (size_t i = 0; i < nfds; i++)
        conn_accept(io, fds[i].fd, fds[i].tls, fds[i].resp);
    free(fds);
    while (list) {
        frame *f = QUEUE_ENTRY(list, frame, link);
        list = list->next;
        conn *c = conn_of(f->to);
        if (f->pending) /* an answer still to pack */
            f = request_pack(f);
        if ((!f || !f->len) && c->open) {
            /* no answer at all (the batcher could not build one): closing is the one way left to tell the
             * client, which would otherwise wait for ever; answers to closed connections are dropped here */
            LOG_LIMITED(LOG_ERROR, "connection %llu (%s): out of memory building an answer; closing it",
                        (unsigned long long)c->s.serial, c->peer);
            close_now(c);
        }
        f = within_total(c, f);
        const bool write = f && c->open && f->len;
        if (write)
            write_answer(c, f);
        if (f && f->len)
            metrics_answered(c->srv->metrics, SHARD(c), f->req_op, f->status, f->keys, f->t_parse, write ? f->len : 0);
        free(f);
        c->inflight--;
        if (write)
            check_output(c);
        if (c->open && c->paused && c->inflight < LIVE(c->srv, max_inflight)) {
            c->paused = false;
            update_reading(c);
        }
        conn_unref(c);
    }
    if (stopping && !io->stop_seen) {
        io->stop_seen = true;
        struct timeval limit = {2, 0}, every = {0, 20000};
        io->stop_timer = evtimer_new(io->base, stop_now, io);
        io->sweep_timer = event_new(io->base, -1, EV_PERSIST, on_sweep, io);
        if (io->stop_timer)
            evtimer_add(io->stop_timer, &limit);
        if (io->sweep_timer)
            evtimer_add(io->sweep_timer, &every);
    }
    if (stopping)
        stop_sweep(io);
}

static void io_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    io_thread *io = arg;
    const uint64_t now = floe_now_ns(), s = 1000000000ull;
    const uint64_t hello = LIVE(io->srv, hello_timeout), idle = LIVE(io->srv, timeout);
    const uint64_t frame_limit = LIVE(io->srv, frame_timeout);
    for (conn *c = io->conns, *next; c; c = next) {
        next = c->next;
        if (c->closing) { /* a last answer the client does not take: give up on it */
            if (now - c->t_closing > CLOSING_NS)
                close_now(c);
            continue;
        }
        if (hello && !c->said_hello && now - c->t_accept > hello * s) {
            LOG_LIMITED(LOG_INFO, "connection %llu (%s): no %s within hello-timeout (%llu s); closing",
                        (unsigned long long)c->s.serial, c->peer, server_token_required(io->srv) ? "hello" : "request",
                        (unsigned long long)hello);
            close_now(c);
        } else if (frame_limit && c->t_partial && now - c->t_partial > frame_limit * s) {
            LOG_LIMITED(LOG_INFO, "connection %llu (%s): a request frame begun %llu s ago is not whole within "
                        "frame-timeout (%llu s); closing",
                        (unsigned long long)c->s.serial, c->peer, (unsigned long long)((now - c->t_partial) / s),
                        (unsigned long long)frame_limit);
            close_now(c);
        } else if (idle && c->inflight == 0 && evbuffer_get_length(bufferevent_get_output(c->bev)) == 0 &&
                   now - c->last_read > idle * s) {
            log_debug("connection %llu (%s): idle for timeout (%llu s); closing", (unsigned long long)c->s.serial,
                      c->peer, (unsigned long long)idle);
            close_now(c);
        }
    }
}

/* ---- io threads ------------------------------------------------------------------------------ */

int io_thread_init(server *srv, io_thread *io)
{
    io->srv = srv;
    pthread_mutex_init(&io->lock, NULL);
    queue_init(&io->deliveries);
    io->base = event_base_new();
    io->wake = io->base ? event_new(io->base, -1, 0, io_wake, io) : NULL;
    io->tick = io->base ? event_new(io->base, -1, EV_PERSIST, io_tick, io) : NULL;
    const struct timeval second = {1, 0};
    return io->wake && io->tick && event_add(io->tick, &second) == 0 ? 0 : -1;
}

void io_thread_free(io_thread *io)
{
    /* a TLS bufferevent is freed by finalizers that the loop runs, one round after another (they
     * are queued "active later"): let those of the last closes run before the base goes */
    for (int round = 0; round < 4; round++)
        event_base_loop(io->base, EVLOOP_NONBLOCK);
    if (io->stop_timer)
        event_free(io->stop_timer);
    if (io->sweep_timer)
        event_free(io->sweep_timer);
    event_free(io->wake);
    if (io->tick)
        event_free(io->tick);
    event_base_free(io->base);
    free(io->new_fds);
    queue_link *l;
    while ((l = queue_pop(&io->deliveries))) { /* answers that arrived after the connection's last chance */
        frame *f = QUEUE_ENTRY(l, frame, link);
        conn *c = conn_of(f->to);
        free(f->pending ? request_pack(f) : f);
        conn_unref(c);
    }
    pthread_mutex_destroy(&io->lock);
}
