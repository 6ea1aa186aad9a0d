/*
 * test_resp.c - the Redis protocol port (daemon/resp.c) through independent
 * clients: check_resp.py drives python3-redis, redis-cli, redis-benchmark
 * and a raw socket against a reference model, errors included; with a
 * token (NOAUTH, WRONGPASS, AUTH, HELLO AUTH), and over TLS with tls-only.
 * Settings that cannot work are refused at start.
 */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static const char *script(void)
{
    return getenv("FLOE_RESP_CHECK") ? getenv("FLOE_RESP_CHECK") : "tests/integration/check_resp.py";
}

/* floed with a RESP port (flags after it): that port. */
static unsigned start_resp(daemon_proc *d, const char *const *flags)
{
    static char port[16];
    snprintf(port, sizeof port, "%u", free_port());
    const char *argv[32] = {"--resp-port", port};
    int n = 2;
    for (int i = 0; flags && flags[i] && n < 31; i++)
        argv[n++] = flags[i];
    argv[n] = NULL;
    daemon_start_logged(d, argv);
    return (unsigned)atoi(port);
}

START_TEST(redis_clients)
{
    daemon_proc d;
    const unsigned port = start_resp(&d, NULL);
    char ps[16];
    snprintf(ps, sizeof ps, "%u", port);
    const char *cli = tool_path("FLOE_CLI", "build/san/floe");
    const int rc = run_python(&d, script(), (const char *const[]){ps, "--cli", cli, "--uri", d.uri, "--quick", NULL});
    ck_assert_msg(rc == 0, rc == 77 ? "python3-redis is missing: make deps" : "check_resp.py failed (%d)", rc);
    ck_assert_msg(!log_has(&d, "ERROR", 0), "floed logged an error:\n%s", log_text(&d));
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(redis_clients_with_a_token)
{
    daemon_proc d;
    const char *token = "resp-test-token-0123456789";
    const unsigned port = start_resp(&d, (const char *const[]){"--token", token, NULL});
    char ps[16];
    snprintf(ps, sizeof ps, "%u", port);
    const int rc = run_python(&d, script(), (const char *const[]){ps, "--token", token, "--quick", NULL});
    ck_assert_msg(rc == 0, rc == 77 ? "python3-redis is missing: make deps" : "check_resp.py failed (%d)", rc);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(redis_clients_over_tls)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/floe-resp-tls-%d", getpid());
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    make_certs(dir);
    char crt[128], key[128], ca[128];
    snprintf(crt, sizeof crt, "%s/server.crt", dir);
    snprintf(key, sizeof key, "%s/server.key", dir);
    snprintf(ca, sizeof ca, "%s/ca.crt", dir);
    daemon_proc d;
    const unsigned port = start_resp(&d, (const char *const[]){"--tls-only", "yes", "--tls-port", "0",
                                                               "--tls-cert-file", crt, "--tls-key-file", key, NULL});
    char ps[16];
    snprintf(ps, sizeof ps, "%u", port);
    const int rc = run_python(&d, script(), (const char *const[]){ps, "--tls-ca", ca, "--quick", NULL});
    ck_assert_msg(rc == 0, rc == 77 ? "python3-redis is missing: make deps" : "check_resp.py failed (%d)", rc);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
    rm_rf(dir);
}
END_TEST

/* A command longer than max-frame, of many short arguments: refused, and
 * the connection closes (no argument alone is too long, so only its
 * length tells). */
START_TEST(a_command_past_max_frame)
{
    daemon_proc d;
    const unsigned port = start_resp(&d, (const char *const[]){"--max-frame", "65536", NULL});
    int fd = raw_connect(port);
    const char *ping = "*1\r\n$4\r\nPING\r\n";
    raw_send(fd, ping, strlen(ping));
    char head[32];
    snprintf(head, sizeof head, "*%d\r\n", 100000);
    raw_send(fd, head, strlen(head));
    static char args[100000 * 7];
    for (int i = 0; i < 100000; i++)
        memcpy(args + 7 * i, "$1\r\n1\r\n", 7);
    for (size_t at = 0; at < sizeof args;) { /* the server stops reading: send what the socket takes */
        const ssize_t n = send(fd, args + at, sizeof args - at, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n <= 0)
            break;
        at += (size_t)n;
    }
    char got[512] = "";
    size_t have = 0;
    const uint64_t t0 = now_ms();
    while (now_ms() - t0 < 10000 && have < sizeof got - 1) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        const ssize_t n = recv(fd, got + have, sizeof got - 1 - have, 0);
        if (n <= 0)
            break;
        have += (size_t)n;
        got[have] = 0;
    }
    ck_assert_msg(strncmp(got, "+PONG\r\n-ERR Protocol error: a command longer than max-frame\r\n", 60) == 0, "got: %s",
                  got);
    ck_assert_msg(raw_closed(fd, 5000), "the connection closes after the refusal");
    close(fd);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(settings_that_cannot_work)
{
    char *err = NULL;
    ck_assert_int_eq(floed_run_to_exit((const char *const[]){"--resp-port", "70000", NULL}, &err), 2);
    ck_assert_msg(strstr(err, "resp-port: '70000' is not a port"), "%s", err);
    free(err);
    char ps[16];
    snprintf(ps, sizeof ps, "%u", free_port());
    ck_assert_int_eq(floed_run_to_exit((const char *const[]){"--port", ps, "--resp-port", ps, NULL}, &err), 2);
    ck_assert_msg(strstr(err, "is also floed's plain port"), "%s", err);
    free(err);
}
END_TEST

Suite *resp_suite(void)
{
    Suite *s = suite_create("resp");
    TCase *tc = tcase_create("resp");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, redis_clients);
    tcase_add_test(tc, redis_clients_with_a_token);
    tcase_add_test(tc, redis_clients_over_tls);
    tcase_add_test(tc, a_command_past_max_frame);
    tcase_add_test(tc, settings_that_cannot_work);
    suite_add_tcase(s, tc);
    return s;
}
