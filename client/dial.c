/*
 * dial.c - a connection to one server: its URI, TCP (with its timeouts and
 * keepalive), TLS and the hello; and closing one.
 */
#define _GNU_SOURCE
#include "floe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "floe.pb-c.h"
#include "floe_internal.h"

#define CONNECT_TIMEOUT_MS 10000 /* floe_options.connect_timeout_ms 0 */
#define KEEPALIVE_S        30    /* floe_options.keepalive_s 0 */

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
    int st = floe__finish(c, call);
    if (st == FLOE_OK && call->resp && call->resp->body_case == FLOE__V1__RESPONSE__BODY_HELLO) {
        const Floe__V1__HelloReply *r = call->resp->hello;
        c->info.version = r->version;
        snprintf(c->info.server, sizeof c->info.server, "%s", r->server ? r->server : "");
        c->info.max_frame = r->max_frame;
        c->info.max_batch_keys = r->max_batch_keys;
        c->info.max_inflight = r->max_inflight;
        snprintf(c->info.backend, sizeof c->info.backend, "%s", r->backend ? r->backend : "");
        c->info.features[0] = '\0';
        for (size_t i = 0; i < r->n_features; i++) { /* those that fit */
            const size_t at = strlen(c->info.features);
            if (r->features[i] && strlen(r->features[i]) + 1 < sizeof c->info.features - at)
                snprintf(c->info.features + at, sizeof c->info.features - at, "%s ", r->features[i]);
        }
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
    uint64_t now = floe__now_ms();
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
        return floe__set_error(c, FLOE_ERR_TLS, "TLS: %s", floe__tls_reason(c, why, sizeof why));
    SSL_CTX_set_min_proto_version(c->tls_ctx, TLS1_2_VERSION);
    /* a server that closes without close_notify has closed (killed, or a timeout): every response
     * carries its length, so nothing can be cut short unnoticed */
    SSL_CTX_set_options(c->tls_ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_verify(c->tls_ctx, SSL_VERIFY_PEER, NULL);
    if (o->tls_ca_file ? SSL_CTX_load_verify_locations(c->tls_ctx, o->tls_ca_file, NULL) != 1
                       : SSL_CTX_set_default_verify_paths(c->tls_ctx) != 1)
        return floe__set_error(c, FLOE_ERR_TLS, "TLS: cannot load the CA certificates %s: %s",
                               o->tls_ca_file ? o->tls_ca_file : "of the system", floe__tls_reason(c, why, sizeof why));
    if (o->tls_cert_file) {
        const char *key = o->tls_key_file ? o->tls_key_file : o->tls_cert_file;
        if (SSL_CTX_use_certificate_chain_file(c->tls_ctx, o->tls_cert_file) != 1)
            return floe__set_error(c, FLOE_ERR_TLS, "TLS: cannot load the client certificate %s: %s", o->tls_cert_file,
                                   floe__tls_reason(c, why, sizeof why));
        if (SSL_CTX_use_PrivateKey_file(c->tls_ctx, key, SSL_FILETYPE_PEM) != 1 ||
            SSL_CTX_check_private_key(c->tls_ctx) != 1)
            return floe__set_error(c, FLOE_ERR_TLS, "TLS: cannot use the client key %s: %s", key,
                                   floe__tls_reason(c, why, sizeof why));
    } else if (o->tls_key_file) {
        return floe__set_error(c, FLOE_ERR_INVALID,
                               "TLS: a client key (tls-key-file) needs its certificate (tls-cert-file)");
    }
    c->tls = SSL_new(c->tls_ctx);
    if (!c->tls || SSL_set_fd(c->tls, c->fd) != 1)
        return floe__set_error(c, FLOE_ERR_TLS, "TLS: %s", floe__tls_reason(c, why, sizeof why));
    SSL_set_mode(c->tls, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    unsigned char ip[16];
    const bool is_ip = inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1;
    if (is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->tls), name) != 1
              : SSL_set_tlsext_host_name(c->tls, name) != 1 || SSL_set1_host(c->tls, name) != 1)
        return floe__set_error(c, FLOE_ERR_TLS, "TLS: cannot check the server's name '%s': %s", name,
                               floe__tls_reason(c, why, sizeof why));
    for (;;) {
        ERR_clear_error();
        errno = 0;
        sigpipe_guard g;
        floe__sigpipe_block(&g);
        int r = SSL_connect(c->tls);
        floe__sigpipe_restore(&g);
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
                                       : floe__tls_reason(c, why, sizeof why));
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
    const int cto = o.connect_timeout_ms                                    ? o.connect_timeout_ms
                    : o.timeout_ms > 0 && o.timeout_ms < CONNECT_TIMEOUT_MS ? o.timeout_ms
                                                                            : CONNECT_TIMEOUT_MS;
    const uint64_t deadline = cto > 0 ? floe__now_ms() + (uint64_t)cto : 0;
    st = tcp_connect(c, host, port, deadline, cto);
    if (st != FLOE_OK)
        return st;
    tune_socket(c->fd, o.keepalive_s);
    if (o.tls && (st = tls_connect(c, &o, o.tls_server_name ? o.tls_server_name : host, deadline)) != FLOE_OK) {
        floe__transport_close(c);
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
    floe__transport_close(c);
    floe__set_error(c, FLOE_ERR_IO, "connection closed");
    floe__fail_all(c);
    if (c->tls_ctx)
        SSL_CTX_free(c->tls_ctx);
    free(c->out);
    free(c->in);
    free(c);
}
