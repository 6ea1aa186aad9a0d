/*
 * tls.h - floed's TLS (OpenSSL): the server context made from the tls-*
 * settings, made again on SIGHUP (new certificate files, versions, client
 * authentication) without touching connections already up, and a session
 * for each connection accepted on the TLS port (conn.c wraps it in a
 * libevent bufferevent_openssl).
 */
#ifndef FLOE_DAEMON_TLS_H
#define FLOE_DAEMON_TLS_H

#include <stddef.h>

#include "config.h"

typedef struct tls_server tls_server;
struct ssl_st;

/* The context of cfg's tls-* settings; NULL with a message in err. */
tls_server *tls_server_new(const floed_config *cfg, char *err, size_t errlen);
/* Makes the context again from cfg (files read again); connections made
 * from now on use it.  0, or -1 with a message (the old one stays). */
int tls_server_reload(tls_server *t, const floed_config *cfg, char *err, size_t errlen);
/* A server-side session for a new connection (NULL if out of memory). */
struct ssl_st *tls_server_session(tls_server *t);
/* What the certificate in use says, for the log: subject and expiry. */
void tls_server_describe(tls_server *t, char *buf, size_t len);
void tls_server_free(tls_server *t);

/* The reason of the last TLS failure on this thread (OpenSSL's error
 * queue, emptied), with a hint where it says a client spoke plain TCP. */
const char *tls_last_error(unsigned long err, char *buf, size_t len);

#endif
