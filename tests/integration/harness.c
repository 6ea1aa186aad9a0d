/*
 * harness.c - starting and stopping floed, raw frames, running the CLI.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *floed_path(void)
{
    const char *p = getenv("FLOED");
    return p ? p : "build/san/floed";
}

static const char *cli_path(void)
{
    const char *p = getenv("FLOE_CLI");
    return p ? p : "build/san/floe";
}

const char *expected_backend(void)
{
    const char *b = getenv("FLOE_BACKEND");
    return b && b[0] ? b : "cpu";
}

/* ---- TLS ---------------------------------------------------------------------------------- */

static char tls_dir[64]; /* FLOE_TLS: the suite's certificates */

int harness_tls(void)
{
    const char *v = getenv("FLOE_TLS");
    return v && v[0] && strcmp(v, "0") != 0 && strcmp(v, "no") != 0;
}

void make_certs(const char *dir)
{
    char cmd[4096];
    /* EC keys (fast); -days -1 makes a certificate that expired yesterday */
    snprintf(cmd, sizeof cmd,
             "set -e; cd '%s'; k='-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes'; "
             "openssl req -x509 $k -keyout ca.key -out ca.crt -days 30 -subj '/CN=floe test CA'; "
             "openssl req -x509 $k -keyout other-ca.key -out other-ca.crt -days 30 -subj '/CN=another CA'; "
             "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > san.ext; "
             "openssl req $k -keyout server.key -out server.csr -subj '/CN=localhost'; "
             "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 30 "
             "-extfile san.ext; "
             "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out expired.crt -days -1 "
             "-extfile san.ext; "
             "openssl req $k -keyout client.key -out client.csr -subj '/CN=floe client'; "
             "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt -days 30; "
             "openssl req $k -keyout other-client.key -out other-client.csr -subj '/CN=stranger'; "
             "openssl x509 -req -in other-client.csr -CA other-ca.crt -CAkey other-ca.key -CAcreateserial "
             "-out other-client.crt -days 30",
             dir);
    char full[4200];
    snprintf(full, sizeof full, "(%s) > '%s/openssl.log' 2>&1", cmd, dir);
    ck_assert_msg(system(full) == 0, "openssl could not make the test certificates (see %s/openssl.log)", dir);
}

static pid_t tls_owner; /* the process that made tls_dir: Check's forked test processes exit too */

static void remove_tls_dir(void)
{
    if (getpid() != tls_owner)
        return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tls_dir);
    if (tls_dir[0] && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tls_dir);
}

unsigned harness_parts(void)
{
    const char *p = getenv("FLOE_PARTITIONS");
    return p && atoi(p) > 1 ? (unsigned)atoi(p) : 0;
}

void harness_init(void)
{
    if (!harness_tls())
        return;
    snprintf(tls_dir, sizeof tls_dir, "/tmp/floe-itest-tls-XXXXXX");
    if (!mkdtemp(tls_dir)) {
        perror("mkdtemp");
        exit(1);
    }
    make_certs(tls_dir);
    tls_owner = getpid();
    atexit(remove_tls_dir);
    char ca[128];
    snprintf(ca, sizeof ca, "%s/ca.crt", tls_dir);
    setenv("FLOE_TLS", "yes", 1); /* the tools read both */
    setenv("FLOE_TLS_CA_FILE", ca, 1);
    fprintf(stderr, "integration tests over TLS (certificates in %s)\n", tls_dir);
}

floe *connect_uri(const char *uri, char *why, size_t len)
{
    floe_options o;
    memset(&o, 0, sizeof o);
    floe *c = NULL;
    if (floe_options_from_env(&o, why, len) != FLOE_OK)
        return NULL;
    o.timeout_ms = 20000;
    if (floe_connect_opts(uri, &o, &c) == FLOE_OK)
        return c;
    snprintf(why, len, "connect %s: %s", uri, c ? floe_errstr(c) : "out of memory");
    floe_close(c);
    return NULL;
}

int harness_connect(const daemon_proc *d, const char *token, floe **c)
{
    floe_options o;
    memset(&o, 0, sizeof o);
    o.token = token;
    char ca[128];
    if (harness_tls()) { /* d->uri says floes:// already; the CA is the suite's */
        snprintf(ca, sizeof ca, "%s/ca.crt", tls_dir);
        o.tls_ca_file = ca;
    }
    return floe_connect_opts(d->uri, &o, c);
}

/* Reads a port from path; 0 while it is not there. */
static unsigned read_port(const char *path)
{
    unsigned port = 0;
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%u", &port) != 1)
            port = 0;
        fclose(f);
    }
    return port;
}

/* ---- floed -------------------------------------------------------------------------------- */

static const char *const *exec_prefix;

void daemon_set_prefix(const char *const *prefix)
{
    exec_prefix = prefix;
}

static void start(daemon_proc *d, const char *const *flags, bool logged)
{
    memset(d, 0, sizeof *d);
    snprintf(d->dir, sizeof d->dir, "/tmp/floe-itest-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(d->dir));
    char portfile[256];
    snprintf(portfile, sizeof portfile, "%s/port", d->dir);
    const char *argv[64];
    int n = 0;
    for (int i = 0; exec_prefix && exec_prefix[i]; i++)
        argv[n++] = exec_prefix[i];
    argv[n++] = floed_path();
    argv[n++] = "--port";
    argv[n++] = "0";
    argv[n++] = "--port-file";
    argv[n++] = portfile;
    bool has_config = false; /* a test of the config file sets its own log level */
    for (int i = 0; flags && flags[i]; i++)
        has_config = has_config || strcmp(flags[i], "--config") == 0;
    if (!has_config) {
        argv[n++] = "--log-level";
        argv[n++] = getenv("FLOED_LOG") ? getenv("FLOED_LOG") : logged ? "info" : "warn";
    }
    argv[n++] = "--io-threads";
    argv[n++] = "2";
    argv[n++] = "--engine-threads";
    argv[n++] = "2";
    if (getenv("FLOE_PARTITIONS")) { /* every table in parts (make test-integration-parts) */
        argv[n++] = "--partitions";
        argv[n++] = getenv("FLOE_PARTITIONS");
    }
    if (getenv("FLOE_PIPELINES")) { /* every table in lanes, one an io thread (make test-integration-pipelines) */
        argv[n++] = "--pipelines";
        argv[n++] = getenv("FLOE_PIPELINES");
    }
    char tlsportfile[256], cert[128], key[128];
    snprintf(tlsportfile, sizeof tlsportfile, "%s/tlsport", d->dir);
    const bool tls = harness_tls();
    if (tls) {
        snprintf(cert, sizeof cert, "%s/server.crt", tls_dir);
        snprintf(key, sizeof key, "%s/server.key", tls_dir);
        const char *more[] = {"--tls-port",      "0",  "--tls-port-file", tlsportfile,
                              "--tls-cert-file", cert, "--tls-key-file",  key};
        for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
            argv[n++] = more[i];
    }
    for (int i = 0; flags && flags[i]; i++)
        argv[n++] = flags[i];
    argv[n] = NULL;
    if (logged)
        snprintf(d->log, sizeof d->log, "%s/floed.log", d->dir);
    d->pid = fork();
    ck_assert_int_ge(d->pid, 0);
    if (d->pid == 0) {
        if (logged && !freopen(d->log, "a", stderr))
            _exit(126);
        execv(argv[0], (char *const *)argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    for (int i = 0; i < 2000; i++) { /* up to 20 s: the sanitizer build starts slowly */
        d->port = read_port(portfile);
        d->tls_port = tls ? read_port(tlsportfile) : 0;
        if (d->port && (!tls || d->tls_port)) {
            const unsigned client_port = tls ? d->tls_port : d->port;
            snprintf(d->uri, sizeof d->uri, "%s://127.0.0.1:%u", tls ? "floes" : "floe", client_port);
            snprintf(d->hostport, sizeof d->hostport, "127.0.0.1:%u", client_port);
            return;
        }
        int status;
        if (waitpid(d->pid, &status, WNOHANG) == d->pid)
            ck_abort_msg("floed exited before listening (status %d)", status);
        usleep(10000);
    }
    ck_abort_msg("floed did not start listening in 20 s");
}

void daemon_start(daemon_proc *d, const char *const *flags)
{
    start(d, flags, false);
}

void daemon_start_logged(daemon_proc *d, const char *const *flags)
{
    start(d, flags, true);
}

char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0, r;
    char *buf = malloc(cap);
    while ((r = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += r;
        if (len + 1 == cap)
            buf = realloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    fclose(f);
    return buf;
}

int floed_run_to_exit(const char *const *flags, char **err)
{
    char errpath[] = "/tmp/floe-itest-err-XXXXXX";
    int fd = mkstemp(errpath);
    ck_assert_int_ge(fd, 0);
    const char *argv[64];
    int n = 0;
    argv[n++] = floed_path();
    for (int i = 0; flags[i]; i++)
        argv[n++] = flags[i];
    argv[n] = NULL;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(fd, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fd);
    int status = -1;
    for (int i = 0; i < 3000; i++) { /* a start that should fail must not hang: 30 s at most */
        if (waitpid(pid, &status, WNOHANG) == pid)
            break;
        usleep(10000);
        if (i == 2999) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
        }
    }
    *err = slurp(errpath);
    unlink(errpath);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int daemon_stop(daemon_proc *d, int sig)
{
    int status = -1;
    if (d->pid > 0) {
        kill(d->pid, sig);
        for (int i = 0; i < 2000; i++) {
            if (waitpid(d->pid, &status, WNOHANG) == d->pid)
                break;
            usleep(10000);
            if (i == 1999) {
                kill(d->pid, SIGKILL);
                waitpid(d->pid, &status, 0);
                status = -1;
            }
        }
        d->pid = 0;
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", d->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", d->dir);
    if (status == -1)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

floe *connect_ok(const daemon_proc *d)
{
    floe *c;
    int st = harness_connect(d, NULL, &c);
    ck_assert_msg(st == FLOE_OK, "connect: %s", floe_errstr(c));
    return c;
}

int raw_connect(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sin, sizeof sin), 0);
    return fd;
}

void raw_send(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
        if (w <= 0)
            return; /* the server may have closed: the test reads the answer */
        p += w;
        len -= (size_t)w;
    }
}

size_t raw_frame(Floe__V1__Request *req, unsigned char *buf)
{
    const size_t len = floe__v1__request__get_packed_size(req);
    if (buf) {
        buf[0] = (unsigned char)(len >> 24);
        buf[1] = (unsigned char)(len >> 16);
        buf[2] = (unsigned char)(len >> 8);
        buf[3] = (unsigned char)len;
        floe__v1__request__pack(req, buf + 4);
    }
    return len + 4;
}

size_t raw_insert_frame(unsigned char *buf, uint64_t id, const char *table, const uint64_t *keys, size_t n)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Insert in = FLOE__V1__INSERT__INIT;
    in.table = (char *)table;
    in.keys.data = (uint8_t *)keys;
    in.keys.len = n * 8;
    req.id = id;
    req.op_case = FLOE__V1__REQUEST__OP_INSERT;
    req.insert = &in;
    return raw_frame(&req, buf);
}

void raw_send_request(int fd, Floe__V1__Request *req)
{
    const size_t len = raw_frame(req, NULL);
    unsigned char *buf = malloc(len);
    raw_frame(req, buf);
    raw_send(fd, buf, len);
    free(buf);
}

static int read_full(int fd, void *buf, size_t len, int timeout_ms)
{
    char *p = buf;
    while (len) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, timeout_ms) <= 0)
            return -1;
        ssize_t r = recv(fd, p, len, 0);
        if (r <= 0)
            return -1;
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

Floe__V1__Response *raw_read_response(int fd, int timeout_ms)
{
    unsigned char hdr[4];
    if (read_full(fd, hdr, 4, timeout_ms) != 0)
        return NULL;
    uint32_t len = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
    unsigned char *buf = malloc(len + 1);
    if (read_full(fd, buf, len, timeout_ms) != 0) {
        free(buf);
        return NULL;
    }
    Floe__V1__Response *r = floe__v1__response__unpack(NULL, len, buf);
    free(buf);
    return r;
}

int raw_closed(int fd, int timeout_ms)
{
    char c;
    struct pollfd pfd = {fd, POLLIN, 0};
    if (poll(&pfd, 1, timeout_ms) <= 0)
        return 0;
    return recv(fd, &c, 1, 0) == 0;
}

static int run_prog(const daemon_proc *d, const char *const *pre, const char *stdin_text, char **out,
                    const char *const *args)
{
    char inpath[256], outpath[256];
    snprintf(inpath, sizeof inpath, "%s/cli.in", d->dir);
    snprintf(outpath, sizeof outpath, "%s/cli.out", d->dir);
    FILE *f = fopen(inpath, "w");
    ck_assert_ptr_nonnull(f);
    if (stdin_text)
        fputs(stdin_text, f);
    fclose(f);
    const char *hostport = d->hostport;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        const char *argv[64];
        int n = 0;
        for (int i = 0; pre[i]; i++)
            argv[n++] = strcmp(pre[i], "@HOSTPORT") == 0 ? hostport : strcmp(pre[i], "@URI") == 0 ? d->uri : pre[i];
        for (int i = 0; args[i]; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        char errpath[300];
        snprintf(errpath, sizeof errpath, "%s/cli.err", d->dir);
        if (!freopen(inpath, "r", stdin) || !freopen(outpath, "w", stdout) || !freopen(errpath, "w", stderr))
            _exit(126);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    f = fopen(outpath, "r");
    ck_assert_ptr_nonnull(f);
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    size_t r;
    while ((r = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += r;
        if (len + 1 == cap)
            buf = realloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    fclose(f);
    *out = buf;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int run_cli(const daemon_proc *d, const char *stdin_text, char **out, const char *const *args)
{
    const char *pre[] = {cli_path(), "-H", "@HOSTPORT", NULL};
    return run_prog(d, pre, stdin_text, out, args);
}

int run_tool(const daemon_proc *d, const char *stdin_text, char **out, const char *const *argv)
{
    const char *const none[] = {NULL};
    return run_prog(d, argv, stdin_text, out, none);
}

int run_mc(const daemon_proc *d, char **out, const char *const *args)
{
    const char *mc = getenv("FLOE_MC");
    const char *pre[] = {mc ? mc : "build/san/floe-mc", "--server", "@URI", "--quiet", NULL};
    return run_prog(d, pre, NULL, out, args);
}

/* ---- small helpers ---------------------------------------------------------------------------- */

void rm_rf(const char *dir)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Waits until the log holds text (or timeout_ms passes). */
int log_has(const daemon_proc *d, const char *text, int timeout_ms)
{
    for (uint64_t end = now_ms() + (uint64_t)timeout_ms;;) {
        char *log = slurp(d->log);
        int found = log && strstr(log, text) != NULL;
        free(log);
        if (found || now_ms() > end)
            return found;
        usleep(20000);
    }
}

char *log_text(const daemon_proc *d)
{
    return slurp(d->log);
}

/* How many times the log holds text. */
int log_count(const daemon_proc *d, const char *text)
{
    char *log = slurp(d->log);
    int n = 0;
    for (const char *p = log; p && (p = strstr(p, text)); p += strlen(text))
        n++;
    free(log);
    return n;
}

Floe__V1__Response *raw_call(int fd, Floe__V1__Request *req, uint64_t id)
{
    req->id = id;
    raw_send_request(fd, req);
    Floe__V1__Response *r = raw_read_response(fd, 10000);
    ck_assert_ptr_nonnull(r);
    ck_assert_uint_eq(r->id, id);
    return r;
}

void expect_status(Floe__V1__Response *r, int want, const char *needle, const char *what)
{
    ck_assert_msg((int)r->status == want, "%s: status %s (%s), expected %s", what, floe_strerror((int)r->status),
                  r->error ? r->error : "", floe_strerror(want));
    if (needle)
        ck_assert_msg(r->error && strstr(r->error, needle), "%s: message '%s' lacks '%s'", what,
                      r->error ? r->error : "", needle);
    floe__v1__response__free_unpacked(r, NULL);
}

const char *tool_path(const char *env, const char *dflt)
{
    const char *p = getenv(env);
    return p && p[0] ? p : dflt;
}

char *last_stderr(const daemon_proc *d)
{
    char path[300];
    snprintf(path, sizeof path, "%s/cli.err", d->dir);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t cap = 1 << 16;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void check_run(const daemon_proc *d, int rc, char *out, int code, const char *want, const char *want_err,
                      const char *what)
{
    char *err = last_stderr(d);
    ck_assert_msg(rc == code, "%s: exit %d, expected %d; stdout:\n%s\nstderr:\n%s", what, rc, code, out, err);
    if (want)
        ck_assert_msg(strstr(out, want) != NULL, "%s: stdout lacks '%s':\n%s", what, want, out);
    if (want_err)
        ck_assert_msg(strstr(err, want_err) != NULL, "%s: stderr lacks '%s':\n%s", what, want_err, err);
    free(err);
    free(out);
}

void expect_cli2(const daemon_proc *d, const char *in, int code, const char *want, const char *want_err,
                        const char *const *args)
{
    char *out, what[200];
    int rc = run_cli(d, in, &out, args);
    snprintf(what, sizeof what, "floe %s %s", args[0], args[0] && args[1] ? args[1] : "");
    check_run(d, rc, out, code, want, want_err, what);
}

void expect_tool(const daemon_proc *d, const char *in, int code, const char *want, const char *want_err,
                        const char *const *argv)
{
    char *out, what[200];
    int rc = run_tool(d, in, &out, argv);
    snprintf(what, sizeof what, "%s %s %s", argv[0], argv[1] ? argv[1] : "", argv[1] && argv[2] ? argv[2] : "");
    check_run(d, rc, out, code, want, want_err, what);
}

void expect_cli(const daemon_proc *d, const char *in, int code, const char *want, const char *const *args)
{
    char *out;
    int rc = run_cli(d, in, &out, args);
    ck_assert_msg(rc == code, "floe %s %s: exit %d, expected %d; output:\n%s", args[0], args[1] ? args[1] : "", rc,
                  code, out);
    if (want)
        ck_assert_msg(want[0] ? strstr(out, want) != NULL : out[0] == '\0', "floe %s: output lacks '%s':\n%s", args[0],
                      want, out);
    free(out);
}

unsigned free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sin;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &sl), 0);
    close(fd);
    return ntohs(sin.sin_port);
}

int run_python(const daemon_proc *d, const char *script, const char *const *args)
{
    const char *py = getenv("FLOE_PYTHON") ? getenv("FLOE_PYTHON") : "/usr/bin/python3";
    char outpath[256];
    snprintf(outpath, sizeof outpath, "%s/script.out", d->dir);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        const char *argv[64];
        int n = 0;
        argv[n++] = py;
        argv[n++] = script;
        for (int i = 0; args[i] && n < 62; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        if (!freopen(outpath, "w", stdout) || dup2(1, 2) < 0)
            _exit(126);
        execv(py, (char *const *)argv);
        printf("cannot run %s: %s\n", py, strerror(errno));
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    char *out = slurp(outpath);
    if (rc != 0 && out)
        fputs(out, stderr);
    free(out);
    if (rc == 77 && !getenv("CI")) {
        fprintf(stderr, "%s cannot run here, its Debian package is missing: not checked (make deps)\n", script);
        return 0;
    }
    return rc;
}

/* An HTTP request on the metrics port; returns the response (malloc'ed). */
char *http_request(unsigned port, const char *request)
{
    int fd = raw_connect(port);
    raw_send(fd, request, strlen(request));
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, 10000) <= 0)
            break;
        ssize_t got = recv(fd, buf + len, cap - len - 1, 0);
        if (got <= 0)
            break;
        len += (size_t)got;
        if (len + 1 == cap)
            buf = realloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    close(fd);
    return buf;
}
