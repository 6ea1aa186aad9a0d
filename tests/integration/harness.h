/*
 * harness.h - integration tests: a real floed on an ephemeral port, raw
 * frames for the malformed-input tests, and the suites main.c runs.
 */
#ifndef FLOE_TESTS_HARNESS_H
#define FLOE_TESTS_HARNESS_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "floe.h"
#include "floe.pb-c.h"

/* Passing assertions record nothing (see tests/unit/testutil.h). */
#undef _mark_point
#define _mark_point(file, line) ((void)0)

typedef struct daemon_proc {
    pid_t pid;
    unsigned port;     /* the plain port (raw frames go there) */
    unsigned tls_port; /* with FLOE_TLS: the TLS port, which clients use */
    char uri[128];     /* what clients connect to: floe://, or floes:// with FLOE_TLS */
    char hostport[64]; /* the same as 127.0.0.1:PORT */
    char dir[128];     /* a scratch directory for this daemon */
    char log[160];     /* daemon_start_logged: floed's stderr */
} daemon_proc;

/* The backend floed is expected to run tables on: $FLOE_BACKEND, default
 * cpu (tests/gpu/device-check.sh sets gpu on a GPU host). */
const char *expected_backend(void);

/* Starts floed with extra flags (NULL-terminated), waits until it listens. */
void daemon_start(daemon_proc *d, const char *const *flags);
/* The same with floed's stderr in d->log (d->dir/floed.log, removed with
 * d->dir by daemon_stop) and --log-level info before the flags. */
void daemon_start_logged(daemon_proc *d, const char *const *flags);
/* A command that floed is started through by the next daemon_start (its
 * argv, NULL-terminated, e.g. prlimit; NULL: none). */
void daemon_set_prefix(const char *const *prefix);
/* Runs floed with flags to its exit (for starts that must fail): its exit
 * code, and its stderr (malloc'ed) in *err. */
int floed_run_to_exit(const char *const *flags, char **err);
/* The contents of a file (malloc'ed, NUL-terminated), or NULL. */
char *slurp(const char *path);
/* Sends sig and returns the exit status (-1 if it did not stop in 20 s). */
int daemon_stop(daemon_proc *d, int sig);
/* A connection to d that must succeed. */
floe *connect_ok(const daemon_proc *d);
/* A connection to uri (a list: a partitioned connection) with the
 * environment's options (FLOE_TLS_CA_FILE under FLOE_TLS) and a 20 s
 * deadline a call; NULL and why (a client thread cannot assert). */
floe *connect_uri(const char *uri, char *why, size_t len);
/* floe_connect to d->uri with token (may be NULL), over TLS with FLOE_TLS. */
int harness_connect(const daemon_proc *d, const char *token, floe **c);

/* FLOE_TLS=1: the whole suite over TLS.  Every floed gets a TLS port as
 * well (certificates made at the start by the openssl command); libfloe,
 * the CLI, floe-bench and floe-mc connect to it (FLOE_TLS and
 * FLOE_TLS_CA_FILE in the environment); raw frames still use the plain
 * port.  harness_init runs once, before the suites. */
void harness_init(void);
int harness_tls(void);
/* The parts of every table floed makes (FLOE_PARTITIONS; 0: whole tables). */
unsigned harness_parts(void);
/* Makes, with the openssl command, in dir: ca.crt/ca.key, server.crt/.key
 * (localhost and 127.0.0.1), client.crt/.key (from ca), expired.crt (the
 * server's key, expired), other-ca.crt and other-client.crt/.key (a CA the
 * server does not know). */
void make_certs(const char *dir);

/* A free TCP port on loopback (for a setting that takes a number, not 0). */
unsigned free_port(void);
/* An HTTP request on a port (the metrics port); returns the response (malloc'ed). */
char *http_request(unsigned port, const char *request);
/* Runs /usr/bin/python3 ($FLOE_PYTHON) script with args (NULL-terminated),
 * its output to d->dir/script.out (printed on failure): its exit code; 77
 * (its Debian package missing) is 0 after a note, except under CI. */
int run_python(const daemon_proc *d, const char *script, const char *const *args);

/* Raw socket helpers. */
int raw_connect(unsigned port);
void raw_send(int fd, const void *buf, size_t len);
void raw_send_request(int fd, Floe__V1__Request *req);
/* req as a frame (length, then the packed request) at buf, if not NULL; its bytes. */
size_t raw_frame(Floe__V1__Request *req, unsigned char *buf);
/* An insert of n keys into table as a frame at buf (if not NULL); its bytes. */
size_t raw_insert_frame(unsigned char *buf, uint64_t id, const char *table, const uint64_t *keys, size_t n);
/* Sends req with id and reads its answer (which must come, with that id). */
Floe__V1__Response *raw_call(int fd, Floe__V1__Request *req, uint64_t id);
/* r's status is want and its error names needle (NULL: any); frees r.  what: the case, for the message. */
void expect_status(Floe__V1__Response *r, int want, const char *needle, const char *what);
/* Reads one response frame (NULL on EOF or after timeout_ms). */
Floe__V1__Response *raw_read_response(int fd, int timeout_ms);
/* 1 if the server closed the connection within timeout_ms. */
int raw_closed(int fd, int timeout_ms);

uint64_t now_ms(void); /* CLOCK_MONOTONIC */
void rm_rf(const char *dir);
/* Waits until d's log (daemon_start_logged) holds text, or timeout_ms passes. */
int log_has(const daemon_proc *d, const char *text, int timeout_ms);
/* d's log so far (malloc'ed; NULL if none). */
char *log_text(const daemon_proc *d);
/* How many times d's log holds text. */
int log_count(const daemon_proc *d, const char *text);

/* Runs the floe CLI with args (NULL-terminated) against d; returns its exit
 * code and its stdout (malloc'ed) in *out. */
int run_cli(const daemon_proc *d, const char *stdin_text, char **out, const char *const *args);
/* Runs the floe CLI with args against d: its exit code must be code and
 * its stdout hold want (NULL: anything; "": nothing at all). */
void expect_cli(const daemon_proc *d, const char *in, int code, const char *want, const char *const *args);
/* A NULL-terminated argument list, for run_cli, expect_cli and the like. */
#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* A program the tests run: $env, else dflt (FLOE_BENCH: build/rel/floe-bench). */
const char *tool_path(const char *env, const char *dflt);
/* The last CLI or tool run's stderr (d->dir/cli.err), malloc'ed. */
char *last_stderr(const daemon_proc *d);
/* floe -H d ARGS with stdin in: its exit code must be code, its stdout hold
 * want and its stderr want_err (NULL: anything). */
void expect_cli2(const daemon_proc *d, const char *in, int code, const char *want, const char *want_err,
                 const char *const *args);
/* The same for argv as given (argv[0] the program; "@HOSTPORT" and "@URI"
 * stand for d's address), with no -H added. */
void expect_tool(const daemon_proc *d, const char *in, int code, const char *want, const char *want_err,
                 const char *const *argv);
/* Runs argv (argv[0] the program; "@HOSTPORT" and "@URI" stand for d's
 * address) with stdin_text: the same contract as run_cli (its stderr in
 * d->dir/cli.err). */
int run_tool(const daemon_proc *d, const char *stdin_text, char **out, const char *const *argv);
/* Runs floe-mc ($FLOE_MC, default build/san/floe-mc) with --server d
 * --quiet and args; the same contract as run_cli (stderr in d->dir/cli.err). */
int run_mc(const daemon_proc *d, char **out, const char *const *args);

Suite *ops_suite(void);
Suite *load_suite(void);
Suite *badinput_suite(void);
Suite *lifecycle_suite(void);
Suite *cli_suite(void);
Suite *tree_suite(void);
Suite *ordered_suite(void);
Suite *mc_suite(void);
Suite *metrics_suite(void);
Suite *tools_suite(void);
Suite *service_suite(void);
Suite *security_suite(void);
Suite *tls_suite(void);
Suite *faults_suite(void);
Suite *shards_suite(void);
Suite *add_suite(void);
Suite *explore_suite(void); /* exploring tables: claims, parents, traces */
Suite *resp_suite(void);    /* the Redis protocol port */
Suite *static_suite(void);  /* STATIC tables: filled, frozen, kept */

#endif
