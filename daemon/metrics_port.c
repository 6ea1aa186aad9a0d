/*
 * metrics_port.c - the HTTP server of /metrics (see metrics_port.h).
 */
#define _GNU_SOURCE
#include "metrics_port.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"
#include "log.h"
#include "metrics.h"
#include "request.h"
#include "server.h"

/* Scrapes gathering table stats at once; more get 503 (each one queues a
 * STATS behind every table's batches). */
#define MAX_SCRAPES 8

typedef struct scrape {
    metrics_port *p;
    struct evhttp_request *req;
    metrics_view *v; /* once every table answered */
    struct scrape *next;
} scrape;

/* Held by floed and by every scrape still gathering: a scrape may finish
 * after the port has stopped (its tables answer on the backends' threads). */
struct metrics_port {
    atomic_int refs;
    server *srv;
    pthread_mutex_t lock; /* stopped, done */
    bool running, stopped;
    pthread_t thread;
    struct event_base *base;
    struct evhttp *http;
    struct event *wake;
    scrape *done;     /* scrapes whose tables have all answered */
    unsigned scrapes; /* metrics thread only */
    char address[300];
};

/* ---- the HTTP server ---------------------------------------------------------------------- */

static void port_unref(metrics_port *p)
{
    if (atomic_fetch_sub(&p->refs, 1) != 1)
        return;
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* Any thread: every table answered a scrape; the metrics thread replies. */
static void scrape_done(metrics_view *v, void *arg)
{
    scrape *sc = arg;
    metrics_port *p = sc->p;
    sc->v = v;
    pthread_mutex_lock(&p->lock);
    if (p->stopped) { /* the HTTP server is gone, and the request with it */
        pthread_mutex_unlock(&p->lock);
        request_view_free(v);
        free(sc);
        port_unref(p);
        return;
    }
    sc->next = p->done;
    p->done = sc;
    event_active(p->wake, EV_READ, 0); /* under the lock: the stop frees wake only after stopped is set */
    pthread_mutex_unlock(&p->lock);
}

/* Metrics thread: reply to the scrapes whose tables have answered. */
static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    metrics_port *p = arg;
    pthread_mutex_lock(&p->lock);
    scrape *list = p->done;
    p->done = NULL;
    pthread_mutex_unlock(&p->lock);
    while (list) {
        scrape *sc = list;
        list = sc->next;
        struct evbuffer *b = evbuffer_new();
        if (b) {
            metrics_render(p->srv->metrics, b, sc->v);
            evhttp_add_header(evhttp_request_get_output_headers(sc->req), "Content-Type",
                              "text/plain; version=0.0.4; charset=utf-8");
            /* libevent 2.1 would send a body after HEAD too */
            const bool head = evhttp_request_get_command(sc->req) == EVHTTP_REQ_HEAD;
            evhttp_send_reply(sc->req, HTTP_OK, "OK", head ? NULL : b);
            evbuffer_free(b);
        } else {
            evhttp_send_error(sc->req, HTTP_INTERNAL, "out of memory");
        }
        p->scrapes--;
        request_view_free(sc->v);
        free(sc);
        port_unref(p);
    }
}

static void on_request(struct evhttp_request *req, void *arg)
{
    metrics_port *p = arg;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    if (!path || strcmp(path, "/metrics") != 0) {
        evhttp_send_error(req, HTTP_NOTFOUND, "Not Found"); /* floed serves /metrics only */
        return;
    }
    if (p->scrapes >= MAX_SCRAPES) {
        evhttp_send_error(req, HTTP_SERVUNAVAIL, "too many scrapes at once");
        return;
    }
    scrape *sc = floe_calloc(1, sizeof *sc);
    if (sc) {
        sc->p = p;
        sc->req = req;
        p->scrapes++;
        atomic_fetch_add(&p->refs, 1);
        if (request_gather(p->srv, scrape_done, sc) == 0)
            return; /* answered by on_wake */
        atomic_fetch_sub(&p->refs, 1);
        p->scrapes--;
        free(sc);
    }
    evhttp_send_error(req, HTTP_INTERNAL, "out of memory");
}

static void *metrics_main(void *arg)
{
    metrics_port *p = arg;
    pthread_setname_np(pthread_self(), "floed-metrics");
    event_base_loop(p->base, EVLOOP_NO_EXIT_ON_EMPTY);
    return NULL;
}

/* A listening socket on host (an address, or a name that resolves) and
 * port; -1 with why.  Resolved here rather than by evhttp, whose failures
 * go to libevent's own log without a reason. */
static evutil_socket_t listen_on(const char *host, unsigned port, char *why, size_t len)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res = NULL;
    char service[16];
    snprintf(service, sizeof service, "%u", port);
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0) {
        snprintf(why, len, "%s", gai_strerror(rc));
        return -1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 64) != 0) {
        snprintf(why, len, "%s", strerror(errno));
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

/* "127.0.0.1:9450" or "[::1]:9450" of a bound socket. */
static void address_of(evutil_socket_t fd, char *out, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char ip[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET6) {
            const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof ip);
            port = ntohs(s6->sin6_port);
            snprintf(out, len, "[%s]:%u", ip, port);
            return;
        }
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof ip);
        port = ntohs(s4->sin_port);
    }
    snprintf(out, len, "%s:%u", ip, port);
}

/* Out of descriptors the listening socket stays readable: without a pause
 * the metrics thread would spin on it (conn.c's listeners do the same). */
static void on_accept_resume(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    evconnlistener_enable(arg);
}

/* (arg is evhttp's, not ours: the listener itself carries what is needed) */
static void on_accept_error(struct evconnlistener *l, void *arg)
{
    (void)arg;
    LOG_LIMITED(LOG_WARN, "metrics: accept: %s; not accepting for 0.1 s", strerror(EVUTIL_SOCKET_ERROR()));
    evconnlistener_disable(l);
    const struct timeval pause = {0, 100000};
    event_base_once(evconnlistener_get_base(l), -1, EV_TIMEOUT, on_accept_resume, l, &pause);
}

int metrics_port_start(server *srv)
{
    const floed_config *cfg = &srv->cfg;
    if (!cfg->metrics_port)
        return 0;
    metrics_port *p = floe_calloc(1, sizeof *p);
    if (!p) {
        log_error("cannot set up the metrics HTTP server: out of memory");
        return -1;
    }
    atomic_init(&p->refs, 1);
    p->srv = srv;
    pthread_mutex_init(&p->lock, NULL);
    srv->metrics_port = p; /* stopped and freed by metrics_port_stop, however far it got */
    p->base = event_base_new();
    p->http = p->base ? evhttp_new(p->base) : NULL;
    p->wake = p->base ? event_new(p->base, -1, 0, on_wake, p) : NULL;
    if (!p->http || !p->wake) {
        log_error("cannot set up the metrics HTTP server");
        return -1;
    }
    evhttp_set_allowed_methods(p->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
    evhttp_set_timeout(p->http, 30);
    evhttp_set_max_headers_size(p->http, 16384);
    evhttp_set_max_body_size(p->http, 4096);
    evhttp_set_gencb(p->http, on_request, p);
    char why[256];
    evutil_socket_t fd = listen_on(cfg->metrics_bind, (unsigned)cfg->metrics_port, why, sizeof why);
    struct evhttp_bound_socket *bs = fd >= 0 ? evhttp_accept_socket_with_handle(p->http, fd) : NULL;
    if (!bs) {
        if (fd >= 0) {
            snprintf(why, sizeof why, "libevent refused the socket");
            evutil_closesocket(fd);
        }
        log_error("cannot listen for metrics on %s port %llu: %s", cfg->metrics_bind,
                  (unsigned long long)cfg->metrics_port, why);
        return -1;
    }
    evconnlistener_set_error_cb(evhttp_bound_socket_get_listener(bs), on_accept_error);
    address_of(fd, p->address, sizeof p->address);
    if (pthread_create(&p->thread, NULL, metrics_main, p) != 0) {
        log_error("cannot start the metrics thread");
        return -1;
    }
    p->running = true;
    metrics_set_address(srv->metrics, p->address);
    log_info("metrics on http://%s/metrics", p->address);
    return 0;
}

void metrics_port_stop(metrics_port *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stopped = true;
    scrape *list = p->done;
    p->done = NULL;
    pthread_mutex_unlock(&p->lock);
    if (p->running) {
        event_base_loopbreak(p->base);
        pthread_join(p->thread, NULL);
    }
    while (list) { /* gathered, not replied: their requests go with the server */
        scrape *sc = list;
        list = sc->next;
        request_view_free(sc->v);
        free(sc);
        port_unref(p);
    }
    if (p->http)
        evhttp_free(p->http);
    if (p->wake)
        event_free(p->wake);
    if (p->base)
        event_base_free(p->base);
    p->http = NULL;
    p->wake = NULL;
    p->base = NULL;
    port_unref(p); /* floed's: scrapes still gathering hold theirs */
}
