/*
 * test_tools.c - what floe, floe-bench and floe-mc share: the server and
 * token from $FLOE_SERVER and $FLOE_TOKEN, flags over the environment, and
 * --help texts that say so.  floe-bench is $FLOE_BENCH (default
 * build/rel/floe-bench: it has no sanitizer build); without it its part is
 * skipped with a message.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"


/* Runs argv with the environment as it is now; checks the exit code, and
 * that stdout (or stderr: d->dir/cli.err) holds want. */
static void expect(const daemon_proc *d, int code, const char *want, const char *const *argv)
{
    char *out;
    int rc = run_tool(d, NULL, &out, argv);
    char path[300], err[8192] = "";
    snprintf(path, sizeof path, "%s/cli.err", d->dir);
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(err, 1, sizeof err - 1, f);
        err[n] = '\0';
        fclose(f);
    }
    ck_assert_msg(rc == code, "%s %s %s (FLOE_SERVER=%s FLOE_TOKEN=%s): exit %d, expected %d\nstdout:\n%s\nstderr:\n%s",
                  argv[0], argv[1] ? argv[1] : "", argv[1] && argv[2] ? argv[2] : "", getenv("FLOE_SERVER"),
                  getenv("FLOE_TOKEN"), rc, code, out, err);
    if (want)
        ck_assert_msg(strstr(out, want) || strstr(err, want), "%s: no '%s' in its output:\n%s\n%s", argv[0], want, out,
                      err);
    free(out);
}

/* floed with a token; each tool finds it through the environment alone,
 * fails without the token or with a wrong one, and its flags win over the
 * environment (a dead port or a wrong token there). */
START_TEST(server_and_token_from_the_environment)
{
    daemon_proc d;
    const char *flags[] = {"--token", "s3cret", NULL};
    daemon_start(&d, flags);
    const char *hostport = d.hostport;
    const char *dead = "127.0.0.1:1"; /* nothing listens on port 1 */
    const char *floe_cli = tool_path("FLOE_CLI", "build/san/floe");
    const char *mc = tool_path("FLOE_MC", "build/san/floe-mc");
    const char *bench = tool_path("FLOE_BENCH", "build/rel/floe-bench");

    setenv("FLOE_SERVER", hostport, 1);
    setenv("FLOE_TOKEN", "s3cret", 1);
    expect(&d, 0, "PONG", ARGS(floe_cli, "ping"));
    expect(&d, 0, "states       81\n", ARGS(mc, "--model", "hanoi:4", "--quiet"));
    setenv("FLOE_SERVER", d.uri, 1); /* floe:// works too */
    expect(&d, 0, "PONG", ARGS(floe_cli, "ping"));

    unsetenv("FLOE_TOKEN");
    expect(&d, 1, "ERR_UNAUTHENTICATED", ARGS(floe_cli, "ping"));
    expect(&d, 1, "the hello gave none", ARGS(floe_cli, "ping")); /* not "wrong token" (issue 41, 5) */
    expect(&d, 1, NULL, ARGS(mc, "--model", "hanoi:4", "--quiet"));
    setenv("FLOE_TOKEN", "wrong", 1);
    expect(&d, 1, "wrong token", ARGS(floe_cli, "ping"));
    expect(&d, 0, "PONG", ARGS(floe_cli, "--token", "s3cret", "ping"));
    expect(&d, 0, "states       81\n", ARGS(mc, "--token", "s3cret", "--model", "hanoi:4", "--quiet"));

    setenv("FLOE_SERVER", dead, 1);
    setenv("FLOE_TOKEN", "s3cret", 1);
    expect(&d, 1, "cannot connect", ARGS(floe_cli, "ping"));
    expect(&d, 1, NULL, ARGS(mc, "--model", "hanoi:4", "--quiet"));
    expect(&d, 0, "PONG", ARGS(floe_cli, "-H", "@HOSTPORT", "ping"));
    expect(&d, 0, "states       81\n", ARGS(mc, "--server", "@URI", "--model", "hanoi:4", "--quiet"));

    if (access(bench, X_OK) != 0) {
        fprintf(stderr, "test_tools: %s not built: floe-bench's environment not tested\n", bench);
    } else {
        const char *run[] = {"--create",           "--table", "envtest", "--requests", "5",
                             "--keys-per-request", "10",      "--quiet"};
        setenv("FLOE_SERVER", d.uri, 1);
        expect(&d, 0, "check    ok", ARGS(bench, run[0], run[1], run[2], run[3], run[4], run[5], run[6], run[7]));
        unsetenv("FLOE_TOKEN");
        expect(&d, 1, NULL, ARGS(bench, run[0], run[1], run[2], run[3], run[4], run[5], run[6], run[7]));
        expect(&d, 0, "check    ok",
               ARGS(bench, "--token", "s3cret", run[0], run[1], run[2], run[3], run[4], run[5], run[6], run[7]));
        setenv("FLOE_SERVER", dead, 1);
        setenv("FLOE_TOKEN", "s3cret", 1);
        expect(&d, 1, NULL, ARGS(bench, run[0], run[1], run[2], run[3], run[4], run[5], run[6], run[7]));
        expect(&d, 0, "check    ok",
               ARGS(bench, "-s", "@URI", run[0], run[1], run[2], run[3], run[4], run[5], run[6], run[7]));
    }
    unsetenv("FLOE_SERVER");
    unsetenv("FLOE_TOKEN");
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* Each tool's --help names the variables (and exits 0 with no server). */
START_TEST(help_texts_name_the_environment)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    const char *tools[] = {tool_path("FLOE_CLI", "build/san/floe"), tool_path("FLOE_MC", "build/san/floe-mc"),
                           tool_path("FLOE_BENCH", "build/rel/floe-bench")};
    for (int i = 0; i < 3; i++) {
        if (i == 2 && access(tools[i], X_OK) != 0) {
            fprintf(stderr, "test_tools: %s not built: its --help not checked\n", tools[i]);
            continue;
        }
        expect(&d, 0, "$FLOE_SERVER", ARGS(tools[i], "--help"));
        expect(&d, 0, "$FLOE_TOKEN", ARGS(tools[i], "--help"));
        /* every tool says its version (issue 41, 7) */
        expect(&d, 0, i == 0 ? "floe 0." : i == 1 ? "floe-mc 0." : "floe-bench 0.", ARGS(tools[i], "--version"));
    }
    /* an unknown option is one line and a hint, not the whole help, in every tool; floe-mc's help
     * gives the --timeout it uses (60 s), not libfloe's "0: wait" beside it */
    char *out;
    char path[300];
    snprintf(path, sizeof path, "%s/cli.err", d.dir);
    static const char *const hint[3] = {"(floe --help)", "Try 'floe-mc --help'", "(floe-bench --help)"};
    for (int i = 0; i < 3; i++) {
        if (access(tools[i], X_OK) != 0)
            continue;
        ck_assert_int_eq(run_tool(&d, NULL, &out, ARGS(tools[i], "--bogus", "ping")), 2);
        free(out);
        char *err = slurp(path);
        ck_assert_msg(err && strstr(err, "--bogus") && strstr(err, hint[i]) && !strstr(err, "usage:"), "%s: %s",
                      tools[i], err ? err : "(no stderr)");
        free(err);
    }
    expect(&d, 0, "(default 60; 0: wait)", ARGS(tools[1], "--help"));
    ck_assert_int_eq(run_tool(&d, NULL, &out, ARGS(tools[1], "--help")), 0);
    ck_assert_msg(!strstr(out, "default 0: wait"), "%s", out);
    free(out);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* floe-bench says how often the table was rebuilt during the run: a table
 * that grows stalls its requests at each growth (issue 41, 11), one sized
 * for the run does not. */
START_TEST(bench_reports_the_rebuilds_of_its_table)
{
    const char *bench = tool_path("FLOE_BENCH", "build/rel/floe-bench");
    if (access(bench, X_OK) != 0) {
        fprintf(stderr, "test_tools: %s not built: its rebuild count not checked\n", bench);
        return;
    }
    daemon_proc d;
    daemon_start(&d, NULL);
    /* 400,000 keys into a table made for 10,000 that grows: a rebuild a doubling, 6 of them here (each
     * part's, in a table in parts: FLOE_PARTITIONS) */
    char *out;
    ck_assert_int_eq(run_tool(&d, NULL, &out,
                              ARGS(bench, "-s", "@HOSTPORT", "--create", "--table", "grows", "--capacity", "10000",
                                   "--grow", "-n", "20", "-k", "10000", "-c", "2", "-t", "1", "-q", "--json")),
                     0);
    const char *r = strstr(out, "\"rebuilds\": ");
    unsigned long long rebuilds = 0;
    ck_assert_msg(r && sscanf(r, "\"rebuilds\": %llu", &rebuilds) == 1, "%s", out);
    ck_assert_msg(rebuilds >= 5, "%llu rebuilds reported for 40 times the keys (5 doublings or more): %s", rebuilds,
                  out);
    free(out);
    expect(&d, 0, "growth   the table was rebuilt ",
           ARGS(bench, "-s", "@HOSTPORT", "--create", "--table", "grows2", "--capacity", "10000", "--grow", "-n", "20",
                "-k", "10000", "-c", "2", "-t", "1", "-q"));
    /* --requests sizes it: no rebuild, no growth line */
    expect(&d, 0, "\"rebuilds\": 0,",
           ARGS(bench, "-s", "@HOSTPORT", "--create", "--table", "sized", "-n", "20", "-k", "10000", "-c", "2", "-t",
                "1", "-q", "--json"));
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

Suite *tools_suite(void)
{
    Suite *s = suite_create("tools");
    TCase *tc = tcase_create("tools");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, server_and_token_from_the_environment);
    tcase_add_test(tc, help_texts_name_the_environment);
    tcase_add_test(tc, bench_reports_the_rebuilds_of_its_table);
    suite_add_tcase(s, tc);
    return s;
}
