/*
 * options.c - connection options as the tools take them (--token,
 * --timeout, ... and FLOE_* variables: floe_options_set,
 * floe_options_from_env) and sizes with units.
 */
#define _GNU_SOURCE
#include "floe.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "floe_internal.h"

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
