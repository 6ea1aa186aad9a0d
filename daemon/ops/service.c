/*
 * service.c - the requests on floed itself: hello (the version, the
 * limits, the token), ping (a health check) and info (every table's
 * figures with floed's counters).
 */
#include <string.h>

#include "alloc.h"
#include "backend_gpu.h"
#include "handlers.h"
#include "log.h"

void handle_hello(server *srv, session *c, Floe__V1__Request *req, const request_row *row)
{
    const Floe__V1__Hello *h = req->hello;
    if (server_token_required(srv)) {
        if (!h->token || !h->token[0]) { /* not a wrong token: none at all */
            const char *why = "this server requires a token; the hello gave none (the clients take --token, "
                              "$FLOE_TOKEN or ?token= in the URI)";
            c->ops->send_and_close(c, reply_error(req->id, FLOE_ERR_UNAUTHENTICATED, why), "hello without a token");
            return;
        }
        if (!server_token_matches(srv, h->token)) {
            c->ops->send_and_close(c, reply_error(req->id, FLOE_ERR_UNAUTHENTICATED, "wrong token"), "wrong token");
            return;
        }
        c->authed = true;
    }
    if (h->version > FLOE_PROTOCOL_VERSION) {
        log_debug("connection %llu speaks protocol %u; answering with %u", (unsigned long long)c->serial, h->version,
                  FLOE_PROTOCOL_VERSION);
    }
    Floe__V1__HelloReply hr = FLOE__V1__HELLO_REPLY__INIT;
    hr.version = FLOE_PROTOCOL_VERSION;
    hr.server = "floed " FLOE_VERSION;
    hr.max_frame = LIVE(srv, max_frame);
    hr.max_batch_keys = LIVE(srv, max_batch_keys);
    hr.max_inflight = (uint32_t)LIVE(srv, max_inflight);
    hr.backend = (char *)server_default_backend_name(srv);
    hr.authenticated = c->authed;
    static char *features[] = {FLOE_FEATURE_EXPLORE};
    hr.n_features = sizeof features / sizeof features[0];
    hr.features = features;
    Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
    r.id = req->id;
    r.body_case = FLOE__V1__RESPONSE__BODY_HELLO;
    r.hello = &hr;
    send_now(c, reply_pack(&r));
}

/* A health check: a failed GPU makes floed unwell. */
void handle_ping(server *srv, session *c, Floe__V1__Request *req, const request_row *row)
{
    char why[FLOE_ERROR_MAX];
    const int failed = server_failed_gpu(srv, why, sizeof why);
    if (failed >= 0)
        send_error(c, req->id, FLOE_ERR_UNAVAILABLE,
                   "GPU %d has failed (%s): its tables answer ERR_UNAVAILABLE until floed restarts", failed, why);
    else
        send_now(c, reply_ok(req->id));
}

typedef struct info_request {
    server *srv;
    session *c;
    uint64_t id, t_parse;
} info_request;

static void info_done(metrics_view *v, void *arg)
{
    info_request *ir = arg;
    frame *f = metrics_info_reply(ir->srv->metrics, ir->id, v);
    metrics_tag(f, METRICS_OP_INFO, ir->t_parse);
    ir->c->ops->deliver(ir->c, f); /* releases the request's hold on the session */
    request_view_free(v);
    free(ir);
}

void handle_info(server *srv, session *c, Floe__V1__Request *req, const request_row *row)
{
    const uint64_t id = req->id;
    c->ops->hold(c); /* until the answer is delivered, like any request in flight */
    info_request *ir = floe_calloc(1, sizeof *ir);
    if (ir) {
        *ir = (info_request){srv, c, id, c->t_frame};
        if (request_gather(srv, info_done, ir) == 0)
            return;
        free(ir);
    }
    frame *f = reply_error(id, FLOE_ERR_INTERNAL, "out of memory gathering info");
    metrics_tag(f, METRICS_OP_INFO, c->t_frame);
    c->ops->deliver(c, f);
}

/* Answered before the stop begins: the client hears OK, then floed goes as on SIGTERM. */
void handle_shutdown(server *srv, session *c, Floe__V1__Request *req, const request_row *row)
{
    const bool nosave = req->shutdown && req->shutdown->nosave;
    log_info("connection %llu asked floed to shut down%s", (unsigned long long)c->serial,
             nosave ? " without saving (nosave)" : "");
    send_now(c, reply_ok(req->id));
    server_ask_stop(srv, nosave);
}
