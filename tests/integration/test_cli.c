/*
 * test_cli.c - the floe command-line client, subcommand by subcommand.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <signal.h>
#include <stdio.h>

#include "harness.h"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

static void expect_cli(const daemon_proc *d, const char *in, int code, const char *want, const char *const *args)
{
    char *out;
    int rc = run_cli(d, in, &out, args);
    ck_assert_msg(rc == code, "floe %s: exit %d, expected %d; output:\n%s", args[0], rc, code, out);
    if (want)
        ck_assert_msg(strstr(out, want) != NULL, "floe %s: output lacks '%s':\n%s", args[0], want, out);
    free(out);
}

START_TEST(cli_subcommands)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    expect_cli(&d, NULL, 0, "PONG", ARGS("ping"));
    char want_backend[32];
    snprintf(want_backend, sizeof want_backend, "backend: %s", expected_backend());
    expect_cli(&d, NULL, 0, want_backend, ARGS("info"));
    expect_cli(&d, NULL, 0, "created s", ARGS("create", "s", "--key-bits", "32", "--capacity", "100000"));
    expect_cli(&d, NULL, 1, NULL, ARGS("create", "s"));
    expect_cli(&d, NULL, 0, "created m", ARGS("create", "m", "--kind", "map", "--value-bytes", "4"));
    expect_cli(&d, NULL, 0, "1 INSERTED\n255 INSERTED\n1 PRESENT", ARGS("insert", "s", "1", "0xff", "1"));
    expect_cli(&d, "7\n# comment\n\n8\n", 0, "7 INSERTED\n8 INSERTED", ARGS("insert", "s"));
    expect_cli(&d, NULL, 0, "7 PRESENT\n9 ABSENT", ARGS("find", "s", "7", "9"));
    expect_cli(&d, NULL, 0, "8 ERASED", ARGS("erase", "s", "8"));
    expect_cli(&d, NULL, 0, "5 INSERTED 50", ARGS("insert", "m", "5=50"));
    expect_cli(&d, NULL, 0, "5 PRESENT 50", ARGS("find", "m", "5"));
    expect_cli(&d, NULL, 0, "keys: 3", ARGS("stats", "s"));
    expect_cli(&d, NULL, 0, "m ", ARGS("tables"));
    expect_cli(&d, NULL, 0, "5 50", ARGS("dump", "m", "--values"));
    /* load: text with a progress summary, then dump counts the keys */
    char path[256];
    snprintf(path, sizeof path, "%s/keys.txt", d.dir);
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 5000; i++)
        fprintf(f, "%d\n", 1000 + i);
    fclose(f);
    expect_cli(&d, NULL, 0, "loaded 5000 keys into s", ARGS("load", "s", path));
    expect_cli(&d, NULL, 0, "inserted 0, present 5000", ARGS("load", "s", path));
    char bpath[256];
    snprintf(bpath, sizeof bpath, "%s/keys.bin", d.dir);
    f = fopen(bpath, "wb");
    for (uint64_t i = 0; i < 3000; i++) {
        uint64_t k = 100000 + i;
        fwrite(&k, 8, 1, f);
    }
    fclose(f);
    expect_cli(&d, NULL, 0, "inserted 3000", ARGS("load", "s", bpath, "--binary"));
    char *out;
    ck_assert_int_eq(run_cli(&d, NULL, &out, ARGS("dump", "s")), 0);
    int lines = 0;
    for (char *p = out; *p; p++)
        lines += *p == '\n';
    ck_assert_int_eq(lines, 3 + 5000 + 3000);
    free(out);
    /* errors: exit codes and messages */
    expect_cli(&d, NULL, 1, NULL, ARGS("find", "nosuch", "1"));
    expect_cli(&d, NULL, 1, NULL, ARGS("insert", "s", "0x100000000"));
    expect_cli(&d, NULL, 2, NULL, ARGS("insert", "s", "banana"));
    expect_cli(&d, NULL, 2, NULL, ARGS("frobnicate"));
    expect_cli(&d, NULL, 0, "usage: floe load", ARGS("load", "--help"));
    expect_cli(&d, NULL, 1, NULL, ARGS("snapshot")); /* no data-dir: ERR_UNSUPPORTED */
    expect_cli(&d, NULL, 0, "dropped m", ARGS("drop", "m"));
    expect_cli(&d, NULL, 1, NULL, ARGS("drop", "m"));
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* floe_parse_size, which the CLI, floe-bench and floe-mc share for their
 * counts and sizes. */
START_TEST(sizes_the_tools_take)
{
    static const struct {
        const char *text;
        uint64_t want;
    } good[] = {{"0", 0},           {"7", 7},         {"64K", 65536},
                {"64k", 65536},     {"3M", 3u << 20}, {"4GiB", 4ull << 30},
                {"2T", 2ull << 40}, {"1KB", 1024},    {"18446744073709551615", UINT64_MAX}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint64_t v = 1;
        ck_assert_msg(floe_parse_size(good[i].text, &v) == 1, "'%s' refused", good[i].text);
        ck_assert_uint_eq(v, good[i].want);
    }
    const char *bad[] = {"", "-1", " 5", "5 ", "0x10", "12Q", "1.5M", "K", "16777216T", "18446744073709551616"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 42;
        ck_assert_msg(floe_parse_size(bad[i], &v) == 0, "'%s' accepted", bad[i]);
        ck_assert_uint_eq(v, 42); /* untouched */
    }
}
END_TEST

Suite *cli_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, cli_subcommands);
    tcase_add_test(tc, sizes_the_tools_take);
    suite_add_tcase(s, tc);
    return s;
}
