/*
 * tls.c - the TLS server context (see tls.h).
 */
#define _GNU_SOURCE
#include "tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"

struct tls_server {
    pthread_mutex_t lock; /* guards ctx: io threads take sessions while SIGHUP swaps it */
    SSL_CTX *ctx;
};

const char *tls_last_error(unsigned long err, char *buf, size_t len)
{
    if (!err)
        err = ERR_peek_last_error();
    if (!err) {
        snprintf(buf, len, "the connection closed during the TLS exchange");
        return buf;
    }
    char why[256];
    ERR_error_string_n(err, why, sizeof why);
    ERR_clear_error();
    const int plain = ERR_GET_REASON(err) == SSL_R_WRONG_VERSION_NUMBER || ERR_GET_REASON(err) == SSL_R_HTTP_REQUEST ||
                      ERR_GET_REASON(err) == SSL_R_PACKET_LENGTH_TOO_LONG;
    snprintf(buf, len, "%s%s", why, plain ? " (a client speaking plain TCP to the TLS port?)" : "");
    return buf;
}

static SSL_CTX *fail(SSL_CTX *ctx, char *err, size_t errlen, const char *what, const char *path)
{
    char why[300];
    tls_last_error(0, why, sizeof why);
    snprintf(err, errlen, "TLS: %s %s: %s", what, path, why);
    SSL_CTX_free(ctx);
    return NULL;
}

static SSL_CTX *make_ctx(const floed_config *cfg, char *err, size_t errlen)
{
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx)
        return fail(NULL, err, errlen, "cannot make a context", "");
    int lo = 13, hi = 13;
    config_tls_protocols(cfg->tls_protocols, &lo, &hi); /* checked by config_finish */
    SSL_CTX_set_min_proto_version(ctx, lo == 12 ? TLS1_2_VERSION : TLS1_3_VERSION);
    SSL_CTX_set_max_proto_version(ctx, hi == 12 ? TLS1_2_VERSION : TLS1_3_VERSION);
    /* a client that closes its socket without close_notify has closed, not failed: it cannot truncate a
     * response unnoticed, since every response carries its length */
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_IGNORE_UNEXPECTED_EOF);
    /* idle connections keep no read or write buffers (10,000 of them add up) */
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert_file) != 1)
        return fail(ctx, err, errlen, "cannot load tls-cert-file", cfg->tls_cert_file);
    if (SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key_file, SSL_FILETYPE_PEM) != 1)
        return fail(ctx, err, errlen, "cannot load tls-key-file", cfg->tls_key_file);
    if (SSL_CTX_check_private_key(ctx) != 1)
        return fail(ctx, err, errlen, "tls-key-file does not match tls-cert-file:", cfg->tls_key_file);
    if (cfg->tls_ca_cert_file[0]) {
        if (SSL_CTX_load_verify_locations(ctx, cfg->tls_ca_cert_file, NULL) != 1)
            return fail(ctx, err, errlen, "cannot load tls-ca-cert-file", cfg->tls_ca_cert_file);
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(cfg->tls_ca_cert_file);
        if (names)
            SSL_CTX_set_client_CA_list(ctx, names);
    }
    if (strcmp(cfg->tls_auth_clients, "no") != 0) {
        const int required = strcmp(cfg->tls_auth_clients, "yes") == 0;
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | (required ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0), NULL);
        /* session resumption must know which verification a session passed */
        static const unsigned char sid[] = "floed";
        SSL_CTX_set_session_id_context(ctx, sid, sizeof sid - 1);
    }
    return ctx;
}

tls_server *tls_server_new(const floed_config *cfg, char *err, size_t errlen)
{
    tls_server *t = floe_calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (!(t->ctx = make_ctx(cfg, err, errlen))) {
        free(t);
        return NULL;
    }
    pthread_mutex_init(&t->lock, NULL);
    return t;
}

int tls_server_reload(tls_server *t, const floed_config *cfg, char *err, size_t errlen)
{
    SSL_CTX *fresh = make_ctx(cfg, err, errlen);
    if (!fresh)
        return -1;
    pthread_mutex_lock(&t->lock);
    SSL_CTX *old = t->ctx;
    t->ctx = fresh;
    pthread_mutex_unlock(&t->lock);
    SSL_CTX_free(old); /* sessions made from it hold their own references */
    return 0;
}

struct ssl_st *tls_server_session(tls_server *t)
{
    pthread_mutex_lock(&t->lock);
    SSL *ssl = SSL_new(t->ctx);
    pthread_mutex_unlock(&t->lock);
    return ssl;
}

void tls_server_describe(tls_server *t, char *buf, size_t len)
{
    pthread_mutex_lock(&t->lock);
    X509 *cert = SSL_CTX_get0_certificate(t->ctx);
    char subject[256] = "?", expiry[64] = "?";
    if (cert) {
        X509_NAME_oneline(X509_get_subject_name(cert), subject, sizeof subject);
        struct tm tm;
        if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) == 1)
            strftime(expiry, sizeof expiry, "%Y-%m-%d %H:%M:%S UTC", &tm);
        if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0)
            snprintf(expiry + strlen(expiry), sizeof expiry - strlen(expiry), ", EXPIRED");
    }
    pthread_mutex_unlock(&t->lock);
    snprintf(buf, len, "certificate %s, valid until %s", subject, expiry);
}

void tls_server_free(tls_server *t)
{
    if (!t)
        return;
    SSL_CTX_free(t->ctx);
    pthread_mutex_destroy(&t->lock);
    free(t);
}
