/*
 * status.c - status names and error messages (see status.h).
 */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>

floe_status floe_errinfo_set(floe_errinfo *e, floe_status code, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        e->code = code;
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

void floe_errinfo_clear(floe_errinfo *e)
{
    if (e) {
        e->code = FLOE_OK;
        e->msg[0] = '\0';
    }
}

const char *floe_status_name(floe_status s)
{
    return floe_wire_status_name((int)s);
}
