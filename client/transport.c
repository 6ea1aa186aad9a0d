/*
 * transport.c - a connection's bytes over its socket, plain or TLS
 * (OpenSSL on the same socket): read, write and close, non-blocking, with
 * SIGPIPE held off; what a failed TLS call says.
 */
#define _GNU_SOURCE
#include "floe.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "floe_internal.h"

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

/* Why the last TLS call failed: the certificate check, else OpenSSL's error queue. */
const char *floe__tls_reason(floe *c, char *buf, size_t len)
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
void floe__sigpipe_block(sigpipe_guard *g)
{
    sigset_t pipe, pending;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe, &g->old);
}

void floe__sigpipe_restore(sigpipe_guard *g)
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
ssize_t floe__transport_read(floe *c)
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
ssize_t floe__transport_write(floe *c)
{
    size_t n = c->out_len - c->out_off;
    if (c->tls) {
        ERR_clear_error();
        errno = 0;
        /* partial writes and a buffer that moves (realloc) are allowed: floe_connect sets the modes */
        sigpipe_guard g;
        floe__sigpipe_block(&g);
        int r = SSL_write(c->tls, c->out + c->out_off, n > INT_MAX ? INT_MAX : (int)n);
        floe__sigpipe_restore(&g);
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

void floe__transport_close(floe *c)
{
    if (c->tls) {
        if (c->fd >= 0 && SSL_is_init_finished(c->tls)) { /* close_notify, best effort: the socket is non-blocking */
            sigpipe_guard g;
            floe__sigpipe_block(&g);
            SSL_shutdown(c->tls);
            floe__sigpipe_restore(&g);
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
