/*
 * test_tls.c - floed's TLS port: an independent client (Python's ssl module,
 * tests/integration/tls_client.py) over TLS 1.3, certificates checked both
 * ways (wrong CA, wrong name, expired, client certificates required or
 * optional), TLS 1.2 only when allowed, the wrong protocol on each port,
 * tls-only, certificate reload on SIGHUP, and protected mode with mTLS.
 * Certificates are made at test time by the openssl command (make_certs).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

typedef struct tls_env {
    char dir[64]; /* the certificates */
    char path[12][160];
} tls_env;

static const char *cert(tls_env *t, int slot, const char *name)
{
    char dir[sizeof t->dir]; /* (gcc -Wrestrict cannot tell the two members apart) */
    memcpy(dir, t->dir, sizeof dir);
    snprintf(t->path[slot], sizeof t->path[slot], "%s/%s", dir, name);
    return t->path[slot];
}

static void certs(tls_env *t)
{
    unsetenv("FLOE_TLS"); /* these tests set up TLS themselves, also under FLOE_TLS=1 (a process per test) */
    snprintf(t->dir, sizeof t->dir, "/tmp/floe-tls-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(t->dir));
    make_certs(t->dir);
}

/* floed with a TLS port on the test's certificates (flags after them); the
 * TLS port is returned (d->port stays the plain one, if any). */
static unsigned start_tls(daemon_proc *d, tls_env *t, const char *server_cert, const char *const *flags)
{
    char portfile[128];
    snprintf(portfile, sizeof portfile, "%s/tlsport-%d", t->dir, rand());
    const char *argv[40];
    int n = 0;
    const char *base[] = {"--tls-port",      "0",         "--tls-port-file", portfile,
                          "--tls-cert-file", server_cert, "--tls-key-file",  cert(t, 11, "server.key")};
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++)
        argv[n++] = base[i];
    for (int i = 0; flags && flags[i]; i++)
        argv[n++] = flags[i];
    argv[n] = NULL;
    daemon_start_logged(d, argv);
    unsigned port = 0;
    for (int i = 0; i < 500 && !port; i++) {
        FILE *f = fopen(portfile, "r");
        if (f) {
            if (fscanf(f, "%u", &port) != 1)
                port = 0;
            fclose(f);
        }
        if (!port)
            usleep(10000);
    }
    ck_assert_uint_gt(port, 0);
    return port;
}

/* A libfloe connection over TLS: its status (and *c for the caller to close). */
static int tls_connect(unsigned port, const char *ca, const char *name, const char *ccert, const char *ckey, floe **c)
{
    char uri[64];
    snprintf(uri, sizeof uri, "floes://127.0.0.1:%u", port);
    floe_options o = {.tls_ca_file = ca, .tls_server_name = name, .tls_cert_file = ccert, .tls_key_file = ckey};
    return floe_connect_opts(uri, &o, c);
}

static void expect_refused(unsigned port, const char *ca, const char *name, const char *ccert, const char *ckey,
                           const char *why)
{
    floe *c;
    int st = tls_connect(port, ca, name, ccert, ckey, &c);
    if (st == FLOE_OK) /* TLS 1.3: a server that refuses the client's certificate says so after the handshake */
        st = floe_ping(c);
    ck_assert_msg(st != FLOE_OK, "connected; expected a refusal (%s)", why);
    ck_assert_msg(strstr(floe_errstr(c), why) != NULL, "refused, but not for '%s': %s: %s", why, floe_strerror(st),
                  floe_errstr(c));
    floe_close(c);
}

static void expect_ok(unsigned port, const char *ca, const char *ccert, const char *ckey)
{
    floe *c;
    int st = tls_connect(port, ca, NULL, ccert, ckey, &c);
    ck_assert_msg(st == FLOE_OK, "TLS connect: %s: %s", floe_strerror(st), floe_errstr(c));
    ck_assert_int_eq(floe_ping(c), FLOE_OK);
    floe_close(c);
}

/* Runs tls_client.py; its exit code, its stdout in *out. */
static int py_client(const daemon_proc *d, unsigned port, const char *ca, const char *const *extra, char **out)
{
    char p[16];
    snprintf(p, sizeof p, "%u", port);
    const char *argv[20] = {"/usr/bin/python3", "tests/integration/tls_client.py", "127.0.0.1", p, ca};
    int n = 5;
    for (int i = 0; extra && extra[i]; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    return run_tool(d, NULL, out, argv);
}

START_TEST(independent_client_over_tls13)
{
    tls_env t;
    certs(&t);
    daemon_proc d;
    unsigned port = start_tls(&d, &t, cert(&t, 0, "server.crt"), NULL);
    char *out;
    ck_assert_int_eq(py_client(&d, port, cert(&t, 1, "ca.crt"), NULL, &out), 0);
    ck_assert_msg(strstr(out, "tls TLSv1.3") && strstr(out, "insert [2, 2, 2, 1]") && strstr(out, "find [1, 0]"), "%s",
                  out);
    free(out);
    /* the keys are the ones libfloe sees too */
    floe *c;
    ck_assert_int_eq(tls_connect(port, cert(&t, 1, "ca.crt"), NULL, NULL, NULL, &c), FLOE_OK);
    uint64_t keys[3] = {1, 3, 4};
    uint8_t r[3];
    ck_assert_int_eq(floe_find(c, "py", keys, 3, r, NULL, 0, NULL), FLOE_OK);
    ck_assert(r[0] == FLOE_PRESENT && r[1] == FLOE_PRESENT && r[2] == FLOE_ABSENT);
    floe_close(c);
    /* TLS 1.2 is refused unless tls-protocols lets it in */
    const char *tls12[] = {"--tls12", NULL};
    ck_assert_int_eq(py_client(&d, port, cert(&t, 1, "ca.crt"), tls12, &out), 3);
    free(out);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
    const char *both[] = {"--tls-protocols", "TLSv1.2,TLSv1.3", NULL};
    port = start_tls(&d, &t, cert(&t, 0, "server.crt"), both);
    ck_assert_int_eq(py_client(&d, port, cert(&t, 1, "ca.crt"), tls12, &out), 0);
    ck_assert_msg(strstr(out, "tls TLSv1.2"), "%s", out);
    free(out);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
    rm_rf(t.dir);
}
END_TEST

START_TEST(server_certificates_are_checked)
{
    tls_env t;
    certs(&t);
    daemon_proc d;
    unsigned port = start_tls(&d, &t, cert(&t, 0, "server.crt"), NULL);
    expect_ok(port, cert(&t, 1, "ca.crt"), NULL, NULL);
    expect_refused(port, cert(&t, 2, "other-ca.crt"), NULL, NULL, NULL, "certificate");
    expect_refused(port, cert(&t, 1, "ca.crt"), "floe.example.org", NULL, NULL, "hostname mismatch");
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
    /* an expired server certificate */
    port = start_tls(&d, &t, cert(&t, 3, "expired.crt"), NULL);
    expect_refused(port, cert(&t, 1, "ca.crt"), NULL, NULL, NULL, "expired");
    char *out;
    ck_assert_int_eq(py_client(&d, port, cert(&t, 1, "ca.crt"), NULL, &out), 3);
    free(out);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
    rm_rf(t.dir);
}
END_TEST

START_TEST(client_certificates)
{
    tls_env t;
    certs(&t);
    const char *ca = cert(&t, 1, "ca.crt"), *ccert = cert(&t, 4, "client.crt"), *ckey = cert(&t, 5, "client.key");
    const char *ocert = cert(&t, 6, "other-client.crt"), *okey = cert(&t, 7, "other-client.key");
    daemon_proc d;
    const char *required[] = {"--tls-auth-clients", "yes", "--tls-ca-cert-file", ca, NULL};
    unsigned port = start_tls(&d, &t, cert(&t, 0, "server.crt"), required);
    expect_ok(port, ca, ccert, ckey);
    expect_refused(port, ca, NULL, NULL, NULL, "certificate required");
    expect_refused(port, ca, NULL, ocert, okey, "unknown ca");
    /* files that cannot be used, said in words (not OpenSSL's error codes) */
    expect_refused(port, ca, NULL, "/nonexistent/client.crt", ckey,
                   "cannot load the client certificate /nonexistent/client.crt: No such file or directory");
    expect_refused(port, ca, NULL, ckey, ckey, "no start line");
    expect_refused(port, "/nonexistent/ca.crt", NULL, NULL, NULL,
                   "cannot load the CA certificates /nonexistent/ca.crt: No such file or directory");
    char *out;
    const char *with_cert[] = {"--cert", ccert, "--key", ckey, NULL};
    ck_assert_int_eq(py_client(&d, port, ca, with_cert, &out), 0);
    free(out);
    ck_assert_int_ne(py_client(&d, port, ca, NULL, &out), 0);
    free(out);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
    /* optional: none is fine, a bad one is not */
    const char *optional[] = {"--tls-auth-clients", "optional", "--tls-ca-cert-file", ca, NULL};
    port = start_tls(&d, &t, cert(&t, 0, "server.crt"), optional);
    expect_ok(port, ca, NULL, NULL);
    expect_ok(port, ca, ccert, ckey);
    expect_refused(port, ca, NULL, ocert, okey, "unknown ca");
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
    rm_rf(t.dir);
}
END_TEST

START_TEST(the_wrong_protocol_on_each_port)
{
    tls_env t;
    certs(&t);
    daemon_proc d;
    unsigned port = start_tls(&d, &t, cert(&t, 0, "server.crt"), NULL);
    /* plain frames to the TLS port: no answer, a clean close, a log line */
    int fd = raw_connect(port);
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Ping ping = FLOE__V1__PING__INIT;
    req.id = 1;
    req.op_case = FLOE__V1__REQUEST__OP_PING;
    req.ping = &ping;
    raw_send_request(fd, &req);
    ck_assert_ptr_null(raw_read_response(fd, 3000));
    close(fd);
    ck_assert_msg(log_has(&d, "plain TCP to the TLS port", 3000), "no log line for plaintext on the TLS port");
    floe *c;
    char uri[64];
    snprintf(uri, sizeof uri, "floe://127.0.0.1:%u", port);
    ck_assert_int_eq(floe_connect(uri, NULL, &c), FLOE_ERR_IO);
    ck_assert_msg(strstr(floe_errstr(c), "TLS port"), "%s", floe_errstr(c));
    floe_close(c);
    /* TLS to the plain port: the same */
    floe_options o = {.tls = 1, .tls_ca_file = cert(&t, 1, "ca.crt")};
    snprintf(uri, sizeof uri, "127.0.0.1:%u", d.port);
    ck_assert_int_eq(floe_connect_opts(uri, &o, &c), FLOE_ERR_TLS);
    ck_assert_msg(strstr(floe_errstr(c), "not a TLS port"), "%s", floe_errstr(c));
    floe_close(c);
    ck_assert_msg(log_has(&d, "a TLS handshake on the plain port", 3000), "no log line for TLS on the plain port");
    /* floed is fine on both */
    expect_ok(port, cert(&t, 1, "ca.crt"), NULL, NULL);
    c = NULL;
    ck_assert_int_eq(floe_connect(uri, NULL, &c), FLOE_OK);
    ck_assert_int_eq(floe_ping(c), FLOE_OK);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
    rm_rf(t.dir);
}
END_TEST

START_TEST(tls_only_and_protected_mode)
{
    tls_env t;
    certs(&t);
    const char *ca = cert(&t, 1, "ca.crt");
    char *err;
    /* every interface with client certificates on a TLS-only floed: authenticated, so allowed */
    const char *mtls[] = {"--bind", "0.0.0.0", "--tls-only", "yes", "--tls-auth-clients", "yes", "--tls-ca-cert-file",
                          ca,       NULL};
    daemon_proc d;
    unsigned port = start_tls(&d, &t, cert(&t, 0, "server.crt"), mtls);
    /* tls-only: the port-file names the TLS port, and there is no plain one */
    ck_assert_uint_eq(d.port, port);
    char line[96]; /* and the log says so once (issue 41, 5: "port TLS port N") */
    snprintf(line, sizeof line, "listening on 0.0.0.0 TLS port %u (", port);
    ck_assert_msg(log_has(&d, line, 2000), "no '%s' in floed's log", line);
    expect_ok(port, ca, cert(&t, 4, "client.crt"), cert(&t, 5, "client.key"));
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
    /* with a plain port beside it, that port would be open to all: refused */
    const char *half[] = {"--bind",
                          "0.0.0.0",
                          "--port",
                          "0",
                          "--tls-port",
                          "0",
                          "--tls-auth-clients",
                          "yes",
                          "--tls-ca-cert-file",
                          ca,
                          "--tls-cert-file",
                          cert(&t, 0, "server.crt"),
                          "--tls-key-file",
                          cert(&t, 11, "server.key"),
                          NULL};
    ck_assert_int_eq(floed_run_to_exit(half, &err), 2);
    ck_assert_msg(strstr(err, "protected mode") && strstr(err, "plain port"), "%s", err);
    free(err);
    /* settings that cannot work are refused at start, with the reason */
    const char *nokey[] = {"--tls-port", "0", "--tls-cert-file", cert(&t, 0, "server.crt"), NULL};
    ck_assert_int_eq(floed_run_to_exit(nokey, &err), 2);
    ck_assert_msg(strstr(err, "tls-key-file"), "%s", err);
    free(err);
    const char *mismatch[] = {
        "--tls-port", "0", "--tls-cert-file", cert(&t, 0, "server.crt"), "--tls-key-file", cert(&t, 5, "client.key"),
        NULL};
    ck_assert_int_eq(floed_run_to_exit(mismatch, &err), 2);
    ck_assert_msg(strstr(err, "mismatch"), "%s", err);
    free(err);
    const char *noca[] = {"--tls-port",
                          "0",
                          "--tls-cert-file",
                          cert(&t, 0, "server.crt"),
                          "--tls-key-file",
                          cert(&t, 11, "server.key"),
                          "--tls-auth-clients",
                          "yes",
                          NULL};
    ck_assert_int_eq(floed_run_to_exit(noca, &err), 2);
    ck_assert_msg(strstr(err, "tls-ca-cert-file"), "%s", err);
    free(err);
    rm_rf(t.dir);
}
END_TEST

static void copy_file(const char *from, const char *to)
{
    char *text = slurp(from);
    ck_assert_ptr_nonnull(text);
    FILE *f = fopen(to, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    free(text);
}

START_TEST(certificates_reload_on_sighup)
{
    tls_env t;
    certs(&t);
    /* floed reads the certificate from files that are then replaced in place */
    char live_cert[160], live_key[160];
    snprintf(live_cert, sizeof live_cert, "%s/live.crt", t.dir);
    snprintf(live_key, sizeof live_key, "%s/live.key", t.dir);
    copy_file(cert(&t, 0, "expired.crt"), live_cert);
    copy_file(cert(&t, 11, "server.key"), live_key);
    char portfile[160];
    snprintf(portfile, sizeof portfile, "%s/port", t.dir);
    const char *flags[] = {
        "--tls-port", "0", "--tls-port-file", portfile, "--tls-cert-file", live_cert, "--tls-key-file", live_key, NULL};
    daemon_proc d;
    daemon_start_logged(&d, flags);
    usleep(100000);
    char *ptext = slurp(portfile);
    ck_assert_ptr_nonnull(ptext);
    unsigned port = (unsigned)atoi(ptext);
    free(ptext);
    const char *ca = cert(&t, 1, "ca.crt");
    expect_refused(port, ca, NULL, NULL, NULL, "expired");
    floe *before;
    /* the renewed certificate goes in place; SIGHUP reads it */
    copy_file(cert(&t, 0, "server.crt"), live_cert);
    ck_assert_int_eq(kill(d.pid, SIGHUP), 0);
    ck_assert_msg(log_has(&d, "TLS context made again", 5000), "no reload line");
    expect_ok(port, ca, NULL, NULL);
    ck_assert_int_eq(tls_connect(port, ca, NULL, NULL, NULL, &before), FLOE_OK);
    /* a broken file on the next SIGHUP: logged, and the certificate in use stays */
    FILE *f = fopen(live_cert, "w");
    fputs("not a certificate\n", f);
    fclose(f);
    ck_assert_int_eq(kill(d.pid, SIGHUP), 0);
    ck_assert_msg(log_has(&d, "TLS goes on with the certificate it had", 5000), "no line for the broken reload");
    expect_ok(port, ca, NULL, NULL);
    ck_assert_int_eq(floe_ping(before), FLOE_OK); /* connections already up are not touched */
    floe_close(before);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
    rm_rf(t.dir);
}
END_TEST

Suite *tls_suite(void)
{
    Suite *s = suite_create("tls");
    TCase *tc = tcase_create("tls");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, independent_client_over_tls13);
    tcase_add_test(tc, server_certificates_are_checked);
    tcase_add_test(tc, client_certificates);
    tcase_add_test(tc, the_wrong_protocol_on_each_port);
    tcase_add_test(tc, tls_only_and_protected_mode);
    tcase_add_test(tc, certificates_reload_on_sighup);
    suite_add_tcase(s, tc);
    return s;
}
