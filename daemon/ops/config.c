/*
 * config.c - the config request (Redis's CONFIG GET, SET and REWRITE):
 * floed's settings while it runs.  The io thread queues the request, and
 * the main thread, where SIGHUP changes the settings, runs it
 * (config_requests_run) and delivers the answer: srv->cfg has one writer.
 * A SET goes through the rules of a start (config_set, config_finish) and
 * applies as SIGHUP does (server_apply_settings), or changes nothing.
 */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "handlers.h"
#include "log.h"
#include "metrics.h"

typedef struct config_request {
    queue_link link; /* in srv->config_q */
    session *c;
    uint64_t id, t_parse, serial;
    Floe__V1__Config__Action action;
    char *name, *value;
} config_request;

#define CONFIG_REQUEST_OF(l) QUEUE_ENTRY(l, config_request, link)

static void request_free(config_request *r)
{
    free(r->name);
    free(r->value);
    free(r);
}

void handle_config(server *srv, session *c, Floe__V1__Request *req, const request_row *row)
{
    const Floe__V1__Config *m = req->config;
    if (!srv->config_asked) {
        send_error(c, req->id, FLOE_ERR_UNSUPPORTED, "config is not served here");
        return;
    }
    config_request *r = floe_calloc(1, sizeof *r);
    if (r) {
        r->name = floe_strdup(m->name ? m->name : "");
        r->value = floe_strdup(m->value ? m->value : "");
    }
    if (!r || !r->name || !r->value) {
        if (r)
            request_free(r);
        send_error(c, req->id, FLOE_ERR_INTERNAL, "out of memory");
        return;
    }
    r->c = c;
    r->id = req->id;
    r->t_parse = c->t_frame;
    r->serial = c->serial;
    r->action = m->action;
    c->ops->hold(c); /* until the main thread delivers the answer */
    pthread_mutex_lock(&srv->config_lock);
    queue_push(&srv->config_q, &r->link);
    pthread_mutex_unlock(&srv->config_lock);
    event_active(srv->config_asked, EV_READ, 0);
}

/* The reply: settings [from, to) of cfg whose names match pattern (NULL: all). */
static frame *settings_reply(server *srv, uint64_t id, const floed_config *cfg, const char *pattern)
{
    const size_t n = config_count();
    Floe__V1__ConfigEntry *e = floe_calloc(n, sizeof *e);
    Floe__V1__ConfigEntry **pe = floe_calloc(n, sizeof *pe);
    char(*vals)[1100] = floe_calloc(n, sizeof *vals);
    frame *f = NULL;
    if (e && pe && vals) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            const char *name = config_name(i);
            if (pattern && fnmatch(pattern, name, 0) != 0)
                continue;
            floe__v1__config_entry__init(&e[k]);
            e[k].name = (char *)name;
            if (!strcmp(name, "token")) /* a secret: whether there is one */
                strcpy(vals[k], cfg->token[0] ? "(set)" : "");
            else
                config_value(cfg, i, vals[k], sizeof vals[k]);
            e[k].value = vals[k];
            e[k].live = config_is_live(i);
            pe[k] = &e[k];
            k++;
        }
        Floe__V1__ConfigReply cr = FLOE__V1__CONFIG_REPLY__INIT;
        cr.n_settings = k;
        cr.settings = pe;
        cr.file = srv->cfg.config_file;
        Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
        r.id = id;
        r.body_case = FLOE__V1__RESPONSE__BODY_CONFIG;
        r.config = &cr;
        f = reply_pack(&r);
    }
    free(e);
    free(pe);
    free(vals);
    return f ? f : reply_error(id, FLOE_ERR_INTERNAL, "out of memory");
}

/* CONFIG SET name value: as a start would take it, and only what SIGHUP can apply. */
static frame *config_set_one(server *srv, const config_request *r)
{
    const int i = config_index(r->name);
    if (i < 0)
        return reply_errorf(r->id, FLOE_ERR_INVALID, "no setting '%s' (floe config get '*' lists them)", r->name);
    if (!config_is_live((size_t)i))
        return reply_errorf(r->id, FLOE_ERR_INVALID,
                            "%s cannot change while floed runs: set it in the config file or on the command line, "
                            "and restart floed",
                            r->name);
    floed_config next;
    server_settings(srv, &next);
    char err[1200];
    if (config_set(&next, r->name, r->value, err, sizeof err) != 0 || config_finish(&next, err, sizeof err) != 0)
        return reply_error(r->id, FLOE_ERR_INVALID, err);
    char who[64];
    snprintf(who, sizeof who, "CONFIG SET from connection %llu", (unsigned long long)r->serial);
    server_apply_settings(srv, &next, who, NULL, NULL);
    floed_config now;
    server_settings(srv, &now);
    return settings_reply(srv, r->id, &now, r->name);
}

static frame *config_rewrite_file(server *srv, const config_request *r)
{
    const char *path = srv->cfg.config_file;
    if (!path[0])
        return reply_error(r->id, FLOE_ERR_INVALID,
                           "floed was started without a config file (-c FILE): there is no file to rewrite");
    floed_config now;
    server_settings(srv, &now);
    char err[1200];
    if (config_rewrite(&now, path, err, sizeof err) != 0) {
        log_error("CONFIG REWRITE from connection %llu: %s", (unsigned long long)r->serial, err);
        return reply_error(r->id, FLOE_ERR_INTERNAL, err);
    }
    log_info("CONFIG REWRITE from connection %llu: %s written with the settings in force",
             (unsigned long long)r->serial, path);
    return reply_ok(r->id);
}

void config_requests_run(server *srv)
{
    pthread_mutex_lock(&srv->config_lock);
    queue_link *l = queue_take(&srv->config_q);
    pthread_mutex_unlock(&srv->config_lock);
    while (l) {
        config_request *r = CONFIG_REQUEST_OF(l);
        l = l->next;
        frame *f;
        if (r->action == FLOE__V1__CONFIG__ACTION__SET) {
            f = config_set_one(srv, r);
        } else if (r->action == FLOE__V1__CONFIG__ACTION__REWRITE) {
            f = config_rewrite_file(srv, r);
        } else {
            floed_config now;
            server_settings(srv, &now);
            f = settings_reply(srv, r->id, &now, r->name[0] ? r->name : NULL);
        }
        metrics_tag(f, METRICS_OP_CONFIG, r->t_parse);
        r->c->ops->deliver(r->c, f);
        request_free(r);
    }
}
