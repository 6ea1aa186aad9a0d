/*
 * floe_internal.h - libfloe's entry points for its own tests and fuzzers,
 * not part of its API: libfloe.so exports no floe__ name (libfloe.map).
 */
#ifndef FLOE_CLIENT_FLOE_INTERNAL_H
#define FLOE_CLIENT_FLOE_INTERNAL_H

#include "floe.h"

/* floe_connect over fd, a connected stream socket that c takes over (and
 * floe_close closes): the hello exchange with token, nothing resolved or
 * connected.  *out is set even on failure, as by floe_connect. */
int floe__connect_fd(int fd, const char *token, floe **out);

#endif
