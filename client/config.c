/*
 * config.c - the server's settings while it runs (floe_config_get, _set,
 * _rewrite: the protocol's config operation, Redis's CONFIG), over one
 * server or each of a list of them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "floe.h"
#include "floe.pb-c.h"
#include "floe_internal.h"

/* A config request to one server; its answer in *call (NULL: not wanted). */
static int config_call(floe *c, Floe__V1__Config__Action action, const char *name, const char *value, floe_call **out)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Config m = FLOE__V1__CONFIG__INIT;
    m.action = action;
    m.name = (char *)(name ? name : "");
    m.value = (char *)(value ? value : "");
    req.op_case = FLOE__V1__REQUEST__OP_CONFIG;
    req.config = &m;
    floe_call *call = floe__send_request(c, &req, NULL, NULL);
    const int st = floe__finish(c, call);
    if (st != FLOE_OK || !out) {
        floe_call_free(call);
        return st;
    }
    *out = call;
    return FLOE_OK;
}

int floe_config_get(floe *c, const char *pattern, floe_setting **settings, size_t *n, char *file, size_t file_len)
{
    *settings = NULL;
    *n = 0;
    if (floe_shards(c) > 1)
        return floe__set_error(c, FLOE_ERR_INVALID, "config get asks one server: floe_shard(c, i) for each of %u",
                               floe_shards(c));
    floe_call *call;
    int st = config_call(c, FLOE__V1__CONFIG__ACTION__GET, pattern, NULL, &call);
    if (st != FLOE_OK)
        return st;
    const Floe__V1__Response *r = call->resp;
    const Floe__V1__ConfigReply *cr = r->body_case == FLOE__V1__RESPONSE__BODY_CONFIG ? r->config : NULL;
    if (!cr) {
        floe_call_free(call);
        return floe__set_error(c, FLOE_ERR_PROTOCOL, "a config answer without its settings");
    }
    floe_setting *out = calloc(cr->n_settings ? cr->n_settings : 1, sizeof *out);
    if (!out) {
        floe_call_free(call);
        return floe__set_error(c, FLOE_ERR_INTERNAL, "out of memory");
    }
    for (size_t i = 0; i < cr->n_settings; i++) {
        snprintf(out[i].name, sizeof out[i].name, "%s", cr->settings[i]->name ? cr->settings[i]->name : "");
        snprintf(out[i].value, sizeof out[i].value, "%s", cr->settings[i]->value ? cr->settings[i]->value : "");
        out[i].live = cr->settings[i]->live;
    }
    if (file && file_len)
        snprintf(file, file_len, "%s", cr->file ? cr->file : "");
    *settings = out;
    *n = cr->n_settings;
    floe_call_free(call);
    return FLOE_OK;
}

/* A set or a rewrite on every server of c, in turn; the first failure stops it. */
static int config_each(floe *c, Floe__V1__Config__Action action, const char *name, const char *value)
{
    const unsigned shards = floe_shards(c);
    if (shards <= 1)
        return config_call(c, action, name, value, NULL);
    for (unsigned i = 0; i < shards; i++) {
        floe *s = floe_shard(c, i);
        const int st = config_call(s, action, name, value, NULL);
        if (st != FLOE_OK)
            return floe__set_error(c, st, "server %u of %u (%s): %s", i + 1, shards, floe_shard_name(c, i),
                                   floe_errstr(s));
    }
    return FLOE_OK;
}

int floe_config_set(floe *c, const char *name, const char *value)
{
    return config_each(c, FLOE__V1__CONFIG__ACTION__SET, name, value);
}

int floe_config_rewrite(floe *c)
{
    return config_each(c, FLOE__V1__CONFIG__ACTION__REWRITE, NULL, NULL);
}
