/*
 * floe_wire.h - the protocol's numeric codes as C: the Status enum of
 * proto/floe.proto and the per-key answers of Response.results.  The one
 * definition shared by the server (tables/, daemon/), the GPU code and the
 * client library (installed beside floe.h).
 */
#ifndef FLOE_WIRE_H
#define FLOE_WIRE_H

/* Status of a request (floe.v1.Status). */
typedef enum floe_status {
    FLOE_OK = 0,
    FLOE_ERR_INVALID = 1,
    FLOE_ERR_NO_TABLE = 2,
    FLOE_ERR_EXISTS = 3,
    FLOE_ERR_FULL = 4,
    FLOE_ERR_BUSY = 5,
    FLOE_ERR_UNAUTHENTICATED = 6,
    FLOE_ERR_TOO_LARGE = 7,
    FLOE_ERR_UNSUPPORTED = 8,
    FLOE_ERR_SHUTTING_DOWN = 9,
    FLOE_ERR_INTERNAL = 10,
} floe_status;

/* One answer per key (Response.results). */
enum {
    FLOE_ABSENT = 0,   /* find, erase: the key is not stored */
    FLOE_PRESENT = 1,  /* the key was already stored */
    FLOE_INSERTED = 2, /* insert: the key was absent and is now stored */
    FLOE_FULL = 3,     /* insert: no room, and the table may not grow */
    FLOE_ERASED = 4,   /* erase: the key was stored and is now gone */
};

#endif /* FLOE_WIRE_H */
