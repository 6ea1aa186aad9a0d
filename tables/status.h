/*
 * status.h - errors as values.
 *
 * Every fallible function in floe returns a floe_status and, when given a
 * floe_errinfo, fills it with a human-readable message.  Nothing in the table
 * engine prints or exits; the caller decides.  The numbers are those of the
 * wire protocol's Status enum (proto/floe.proto), so a status travels to the
 * client unchanged (one definition, in proto/floe_wire.h).
 */
#ifndef FLOE_TABLES_STATUS_H
#define FLOE_TABLES_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "floe_wire.h" /* floe_status: the protocol's Status enum */

#define FLOE_ERROR_MAX 256

typedef struct floe_errinfo {
    floe_status code;
    char msg[FLOE_ERROR_MAX];
} floe_errinfo;

/* Records code and a printf-style message in e (if e is not NULL); returns code. */
floe_status floe_errinfo_set(floe_errinfo *e, floe_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Resets e to FLOE_OK with an empty message. */
void floe_errinfo_clear(floe_errinfo *e);

/* "OK", "ERR_INVALID", ...: the protocol's names. */
const char *floe_status_name(floe_status s);

#ifdef __cplusplus
}
#endif

#endif /* FLOE_TABLES_STATUS_H */
