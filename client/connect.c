/*
 * connect.c - floe_connect: a URI that names one server is a connection
 * (dial.c), one that names a list is a partitioned connection (shards.c).
 */
#include <stdbool.h>
#include <string.h>

#include "floe_internal.h"

/* A comma in the authority: floe://h1:p1,h2:p2,...[?query]. */
static bool names_a_list(const char *uri)
{
    if (!uri)
        return false;
    const char *p = strstr(uri, "://");
    p = p ? p + 3 : uri;
    return memchr(p, ',', strcspn(p, "?")) != NULL;
}

int floe_connect_opts(const char *uri, const floe_options *opts, floe **out)
{
    return names_a_list(uri) ? floe__shards_connect(uri, opts, out) : floe__connect_one(uri, opts, out);
}

int floe_connect(const char *uri, const char *token, floe **out)
{
    floe_options o;
    memset(&o, 0, sizeof o);
    o.token = token;
    return floe_connect_opts(uri, &o, out);
}
