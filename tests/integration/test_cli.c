/*
 * test_cli.c - the floe command-line client, subcommand by subcommand: its
 * option parsing, keys from stdin in several requests, --json read back by
 * Python's json module, `floe info`, and a refused connection (ERR_BUSY),
 * also against a stand-in server written here (an older floed without the
 * info operation, a server that refuses in two ways).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pty.h>

#include "harness.h"


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
    /* the columns of `floe tables` line up whatever the kind (issue 41, 10) */
    expect_cli(&d, NULL, 0, NULL, ARGS("create", "tr", "--kind", "tree", "--words", "4"));
    expect_cli(&d, NULL, 0, NULL, ARGS("create", "ord", "--kind", "ordered"));
    char *tabs;
    ck_assert_int_eq(run_cli(&d, NULL, &tabs, ARGS("tables")), 0);
    int rows = 0;
    long col = -1;
    for (char *l = tabs, *nl; *l; l = nl + 1) {
        nl = strchr(l, '\n');
        ck_assert_ptr_nonnull(nl);
        const char *b = strstr(l, "backend=");
        ck_assert_msg(b && b < nl, "no backend= in a line of:\n%s", tabs);
        ck_assert_msg(col < 0 || b - l == col, "columns do not line up:\n%s", tabs);
        col = b - l;
        rows++;
    }
    ck_assert_int_eq(rows, 4);
    free(tabs);
    expect_cli(&d, NULL, 0, NULL, ARGS("drop", "tr"));
    expect_cli(&d, NULL, 0, NULL, ARGS("drop", "ord"));
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
    expect_cli(&d, NULL, 2, NULL, ARGS("insert", "s", "0x100000000")); /* wider than the table: a usage error */
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

/* ---- option parsing, stdin in parts, --json, info, refused connections ---------------------------- */

static floe_table_info stats_of(const daemon_proc *d, const char *table)
{
    floe *c = connect_ok(d);
    floe_table_info t;
    int st = floe_stats(c, table, &t);
    ck_assert_msg(st == FLOE_OK, "stats %s: %s", table, floe_errstr(c));
    floe_close(c);
    return t;
}

/* The tables' names, sorted and comma-separated, through libfloe. */
static void table_names(const daemon_proc *d, char *buf, size_t len)
{
    floe *c = connect_ok(d);
    floe_table_info *t;
    size_t n;
    ck_assert_int_eq(floe_tables(c, &t, &n), FLOE_OK);
    for (size_t i = 0; i < n; i++) /* insertion sort: a handful of names */
        for (size_t j = i; j > 0 && strcmp(t[j - 1].name, t[j].name) > 0; j--) {
            floe_table_info x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++)
        snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", i ? "," : "", t[i].name);
    free(t);
    floe_close(c);
}

START_TEST(cli_options_getopt)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    const char *prog = tool_path("FLOE_CLI", "build/san/floe");
    char host_eq[96], server_eq[160], attached[96];
    snprintf(host_eq, sizeof host_eq, "--host=%s", d.hostport);
    snprintf(server_eq, sizeof server_eq, "--server=%s", d.uri);
    snprintf(attached, sizeof attached, "-H%s", d.hostport);
    expect_tool(&d, NULL, 0, "PONG", NULL, ARGS(prog, host_eq, "ping"));
    expect_tool(&d, NULL, 0, "PONG", NULL, ARGS(prog, server_eq, "ping"));
    expect_tool(&d, NULL, 0, "PONG", NULL, ARGS(prog, attached, "ping"));
    expect_tool(&d, NULL, 0, "PONG", NULL, ARGS(prog, "ping", "-H", "@HOSTPORT")); /* after the command too */

    /* --opt=value, and options after the table's name */
    expect_cli2(&d, NULL, 0, "created big", NULL,
                ARGS("create", "big", "--capacity=10M", "--grow", "--key-bits", "40"));
    floe_table_info t = stats_of(&d, "big");
    ck_assert_uint_eq(t.capacity, 10u << 20);
    ck_assert_int_eq(t.grow, 1);
    ck_assert_uint_eq(t.key_bits, 40);
    /* options before the name: `create --grow s2` names s2 */
    expect_cli2(&d, NULL, 0, "created s2", NULL, ARGS("create", "--grow", "s2"));
    t = stats_of(&d, "s2");
    ck_assert_int_eq(t.grow, 1);
    ck_assert_uint_eq(t.key_bits, 64);
    ck_assert_int_eq(t.kind, FLOE_TABLE_SET);
    expect_cli2(&d, NULL, 0, "created m2", NULL,
                ARGS("create", "--kind=map", "m2", "--value-bytes=4", "--capacity", "0x1000"));
    t = stats_of(&d, "m2");
    ck_assert_int_eq(t.kind, FLOE_TABLE_MAP);
    ck_assert_uint_eq(t.value_bytes, 4);
    ck_assert_uint_eq(t.capacity, 4096);
    expect_cli2(&d, NULL, 0, "5 ABSENT", NULL, ARGS("find", "--", "s2", "5")); /* `--` ends the options */

    /* bad command lines: exit 2 with a message, before anything is sent */
    static const struct {
        const char *args[8];
        const char *err;
    } bad[] = {
        {{"create", "x1", "--kind=bogus"}, "--kind is set, map, tree, ordered or static, not 'bogus'"},
        {{"create", "x1", "--capacity=10Q"}, "--capacity is a count"},
        {{"create", "x1", "--key-bits", "65"}, "--key-bits is 1..64"},
        {{"create", "x1", "--max-fill", "0.5x"}, "--max-fill needs a number"},
        /* zero is not "the default" (issue 41, 4), nor a value out of range the server's error (8) */
        {{"create", "x1", "--key-bits", "0"}, "--key-bits is 1..64, not '0'"},
        {{"create", "x1", "--capacity", "0"}, "--capacity is at least 1 key"},
        {{"create", "x1", "--max-fill", "0"}, "--max-fill is in (0, 1], not '0'"},
        {{"create", "x1", "--max-fill", "1.5"}, "--max-fill is in (0, 1], not '1.5'"},
        {{"create", "x1", "--value-bytes", "3"}, "--value-bytes is 4 or 8"},
        {{"create", "x1", "--kind", "tree", "--words", "1"}, "--words is 2..256, not '1'"},
        {{"create", "x1", "--kind", "tree"}, "a TREE needs --words"},
        {{"create", "x1", "x2"}, "unexpected argument 'x2'"},
        {{"create"}, "missing arguments"},
        {{"create", "x1", "--frobnicate"}, "unknown option '--frobnicate'"},
        {{"create", "x1", "--capacity"}, "--capacity needs a value"},
        {{"tables", "--grow"}, "--grow is not an option of tables"},
        {{"ping", "--json"}, "--json is not an option of ping"},
        {{"drop"}, "missing arguments"},
        {{"load", "x1"}, "missing arguments"},
        {{"load", "x1", "file", "--batch", "0"}, "--batch is 1..16M"},
        {{"insert", "s2", "-5"}, "unknown option '-5'"},
        {{"insert", "s2", "1", "banana"}, "'banana' is not a key"},
        {{"insert", "s2", " -1"}, "' -1' is not a key"}, /* not 2^64 - 1 */
        {{"insert", "s2", "+1"}, "'+1' is not a key"},
        {{"frobnicate"}, "unknown command 'frobnicate'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_cli2(&d, NULL, 2, NULL, bad[i].err, bad[i].args);
    expect_tool(&d, NULL, 2, NULL, "unknown option '--bogus'", ARGS(prog, "--bogus", "ping"));
    expect_tool(&d, NULL, 2, NULL, "--token needs a value", ARGS(prog, "--token"));
    /* a malformed server address is a usage error too, though libfloe finds it (issue 41, 8) */
    expect_tool(&d, NULL, 2, NULL, "'http://x': the scheme must be floe:// or floes://",
                ARGS(prog, "-H", "http://x", "ping"));
    expect_tool(&d, NULL, 2, NULL, "'127.0.0.1:99999': the port must be 1..65535",
                ARGS(prog, "-H", "127.0.0.1:99999", "ping"));
    /* all of a long key counts: 0x, 200 zeros, 1 is 1 */
    char long_key[256] = "0x";
    memset(long_key + 2, '0', 200);
    strcpy(long_key + 202, "1");
    expect_cli2(&d, NULL, 0, "\n1 ABSENT\n", NULL, ARGS("find", "s2", "0", long_key));
    char names[256];
    table_names(&d, names, sizeof names);
    ck_assert_str_eq(names, "big,m2,s2"); /* none of the bad lines made a table */
    ck_assert_uint_eq(stats_of(&d, "s2").keys, 0);

    /* --help: the global one, a command's (even beside a bad option), no server needed */
    expect_tool(&d, NULL, 0, "$FLOE_SERVER", NULL, ARGS(prog, "--help"));
    expect_cli2(&d, NULL, 0, "usage: floe create NAME", NULL, ARGS("create", "--bogus", "--help"));
    expect_cli2(&d, NULL, 0, "--json", NULL, ARGS("stats", "-h"));
    /* --version: the version floed reports in hello (one version for the project) and its protocol */
    floe *c = connect_ok(&d);
    char want[128];
    ck_assert_msg(strncmp(floe_info(c)->server, "floed ", 6) == 0, "hello says '%s'", floe_info(c)->server);
    snprintf(want, sizeof want, "floe %s (protocol %u)\n", floe_info(c)->server + 6, floe_info(c)->version);
    floe_close(c);
    char *out;
    ck_assert_int_eq(run_tool(&d, NULL, &out, ARGS(prog, "--version")), 0);
    ck_assert_str_eq(out, want);
    free(out);
    ck_assert_int_eq(run_tool(&d, NULL, &out, ARGS(prog, "-V")), 0);
    ck_assert_str_eq(out, want);
    free(out);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* n lines: fmt with i from `from` on. */
static char *lines(long from, long n, const char *fmt)
{
    size_t cap = (size_t)n * 64 + 64, len = 0;
    char *buf = malloc(cap);
    buf[0] = '\0';
    for (long i = from; i < from + n; i++)
        len += (size_t)snprintf(buf + len, cap - len, fmt, i, i * 3);
    return buf;
}

/* Checks that out is n lines, line j being fmt with from + j (and 3 times
 * that), then tail. */
static void expect_lines(const char *out, long from, long n, const char *fmt, const char *tail)
{
    const char *p = out;
    char want[128];
    for (long i = from; i < from + n; i++) {
        int len = snprintf(want, sizeof want, fmt, i, i * 3);
        ck_assert_msg(strncmp(p, want, (size_t)len) == 0, "line %ld: expected '%.*s', got '%.40s'", i - from + 1,
                      len - 1, want, p);
        p += len;
    }
    ck_assert_msg(strcmp(p, tail) == 0, "after %ld lines: '%.40s', expected '%s'", n, p, tail);
}

/* Keys from stdin go in several requests when one would pass max-frame:
 * 64 KiB here, so 20000 keys (160 KB in one request) need at least 3. */
START_TEST(cli_stdin_in_parts)
{
    daemon_proc d;
    const char *flags[] = {"--max-frame", "64K", NULL};
    daemon_start(&d, flags);
    expect_cli(&d, NULL, 0, "created s", ARGS("create", "s", "--key-bits", "32", "--capacity", "100000"));
    /* the independent check that one request is too many: libfloe refuses it */
    floe *c = connect_ok(&d);
    uint64_t *keys = malloc(20000 * sizeof *keys);
    for (int i = 0; i < 20000; i++)
        keys[i] = (uint64_t)i + 1;
    ck_assert_int_eq(floe_insert(c, "s", keys, 20000, NULL, NULL), FLOE_ERR_TOO_LARGE);
    free(keys);
    floe_close(c);
    ck_assert_uint_eq(stats_of(&d, "s").keys, 0);

    char *in = lines(1, 20000, "%ld\n"), *out;
    ck_assert_int_eq(run_cli(&d, in, &out, ARGS("insert", "s")), 0);
    expect_lines(out, 1, 20000, "%ld INSERTED\n", "");
    free(out);
    free(in);
    char *err = last_stderr(&d);
    ck_assert_msg(strstr(err, "inserted 20000, present 0,") != NULL, "summary: %s", err);
    free(err);
    ck_assert_uint_eq(stats_of(&d, "s").keys, 20000);

    in = lines(1, 20001, "%ld\n"); /* 20001 is absent */
    ck_assert_int_eq(run_cli(&d, in, &out, ARGS("find", "s")), 0);
    expect_lines(out, 1, 20000, "%ld PRESENT\n", "20001 ABSENT\n");
    free(out);
    free(in);
    in = lines(1, 10000, "%ld\n");
    ck_assert_int_eq(run_cli(&d, in, &out, ARGS("erase", "s")), 0);
    expect_lines(out, 1, 10000, "%ld ERASED\n", "");
    free(out);
    free(in);
    ck_assert_uint_eq(stats_of(&d, "s").keys, 10000);

    /* a bad line at the very end: nothing is sent, nothing changes */
    in = lines(30001, 20000, "%ld\n");
    char *bad = malloc(strlen(in) + 32);
    sprintf(bad, "%sbanana\n", in);
    expect_cli2(&d, bad, 2, NULL, "stdin line 20001: 'banana' is not a key", ARGS("insert", "s"));
    sprintf(bad, "%s0x100000000\n", in);
    expect_cli2(&d, bad, 2, NULL, "not below 2^32", ARGS("insert", "s")); /* a usage error (issue 41, 8) */
    ck_assert_uint_eq(stats_of(&d, "s").keys, 10000);
    free(bad);
    free(in);

    /* load: a bad line past the first batches stops it there, every key before it in and counted,
     * and the bar not at 100% (issue 41, 3) */
    expect_cli(&d, NULL, 0, "created ld", ARGS("create", "ld", "--key-bits", "40"));
    char kpath[256];
    snprintf(kpath, sizeof kpath, "%s/bad-at-100001.txt", d.dir);
    FILE *kf = fopen(kpath, "w");
    for (long k = 1; k <= 200000; k++)
        fprintf(kf, k == 100001 ? "bad\n%ld\n" : "%ld\n", k);
    fclose(kf);
    expect_cli2(&d, NULL, 2, NULL, "line 100001: expected a key", ARGS("load", "ld", kpath));
    char *lerr = last_stderr(&d);
    ck_assert_msg(strstr(lerr, "load stopped after 100000 keys sent to ld: inserted 100000, present 0") != NULL, "%s",
                  lerr);
    ck_assert_msg(strstr(lerr, "100.0%") == NULL, "a stopped load's bar says 100%%:\n%s", lerr);
    free(lerr);
    ck_assert_uint_eq(stats_of(&d, "ld").keys, 100000);
    expect_cli2(&d, NULL, 2, NULL, "is a directory", ARGS("load", "ld", d.dir));
    expect_cli2(&d, "1\n2\n3\n1099511627776\n4\n", 2, NULL,
                "stdin line 4: key 1099511627776 is not below 2^40, the key width of ld", ARGS("load", "ld", "-"));
    ck_assert_uint_eq(stats_of(&d, "ld").keys, 100000); /* 1, 2, 3 were there */
    snprintf(kpath, sizeof kpath, "%s/partial.bin", d.dir);
    kf = fopen(kpath, "wb");
    for (uint64_t k = 500000; k < 500125; k++)
        fwrite(&k, 8, 1, kf);
    fwrite("xyz", 1, 3, kf);
    fclose(kf);
    expect_cli2(&d, NULL, 2, NULL, "ends with a partial key: 3 bytes after the last whole one",
                ARGS("load", "ld", kpath, "--binary"));
    ck_assert_uint_eq(stats_of(&d, "ld").keys, 100125);

    /* MAP: KEY=VALUE lines, answered with the values */
    expect_cli(&d, NULL, 0, "created m", ARGS("create", "m", "--kind", "map", "--value-bytes", "4"));
    /* a value too wide for 4 bytes is refused, not cut (fuzz-cli's note): nothing sent */
    expect_cli2(&d, NULL, 2, NULL, "value 4294967296 (key 2 of 2) does not fit the 4-byte values",
                ARGS("insert", "m", "1=7", "2=4294967296"));
    ck_assert_uint_eq(stats_of(&d, "m").keys, 0);
    char lpath[256];
    snprintf(lpath, sizeof lpath, "%s/map.txt", d.dir);
    FILE *lf = fopen(lpath, "w");
    fputs("1 7\n2 4294967296\n", lf);
    fclose(lf);
    /* load streams: a bad line stops it, the lines before it inserted (issue 41, 3) */
    expect_cli2(&d, NULL, 2, NULL, "line 2: value 4294967296 does not fit the 4-byte values", ARGS("load", "m", lpath));
    ck_assert_uint_eq(stats_of(&d, "m").keys, 1);
    lf = fopen(lpath, "w");
    fputs("1 7\n2 8 9\n", lf); /* more on a line than KEY VALUE */
    fclose(lf);
    expect_cli2(&d, NULL, 2, NULL, "line 2: expected KEY VALUE (decimal or 0x-hex) and nothing else",
                ARGS("load", "m", lpath));
    ck_assert_uint_eq(stats_of(&d, "m").keys, 1);
    expect_cli(&d, NULL, 0, "1 ERASED", ARGS("erase", "m", "1"));
    in = lines(1, 10000, "%ld=%ld\n");
    ck_assert_int_eq(run_cli(&d, in, &out, ARGS("insert", "m")), 0);
    expect_lines(out, 1, 10000, "%ld INSERTED %ld\n", "");
    free(out);
    free(in);
    in = lines(1, 10000, "%ld\n");
    ck_assert_int_eq(run_cli(&d, in, &out, ARGS("find", "m")), 0);
    expect_lines(out, 1, 10000, "%ld PRESENT %ld\n", "");
    free(out);
    free(in);

    /* TREE: 3000 vectors of 16 words (64 bytes each) */
    expect_cli(&d, NULL, 0, "created t", ARGS("create", "t", "--kind", "tree", "--words", "16"));
    in = lines(1, 3000, "%ld,0,0,0,0,0,0,0,0,0,0,0,0,0,0,%ld\n");
    ck_assert_int_eq(run_cli(&d, in, &out, ARGS("insert", "t")), 0);
    long n = 0;
    char want[128];
    for (const char *p = out; *p; p = strchr(p, '\n') + 1, n++) {
        int len = snprintf(want, sizeof want, "%ld,0,0,0,0,0,0,0,0,0,0,0,0,0,0,%ld INSERTED ", n + 1, (n + 1) * 3);
        ck_assert_msg(strncmp(p, want, (size_t)len) == 0, "vector %ld: '%.60s'", n + 1, p);
    }
    ck_assert_int_eq(n, 3000);
    free(out);
    ck_assert_int_eq(run_cli(&d, in, &out, ARGS("find", "t")), 0);
    ck_assert_ptr_nonnull(strstr(out, "3000,0,0,0,0,0,0,0,0,0,0,0,0,0,0,9000 PRESENT "));
    free(out);
    free(in);
    ck_assert_uint_eq(stats_of(&d, "t").keys, 3000);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* The default max-frame: 200000 keys in requests of 64 Ki, 4 in flight. */
START_TEST(cli_stdin_many_keys)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    expect_cli(&d, NULL, 0, "created s", ARGS("create", "s", "--capacity", "400000"));
    char *in = lines(0, 200000, "%ld\n"), *out;
    ck_assert_int_eq(run_cli(&d, in, &out, ARGS("insert", "s")), 0);
    expect_lines(out, 0, 200000, "%ld INSERTED\n", "");
    free(out);
    free(in);
    in = lines(100000, 200000, "%ld\n");
    ck_assert_int_eq(run_cli(&d, in, &out, ARGS("insert", "s")), 0);
    char *err = last_stderr(&d);
    ck_assert_msg(strstr(err, "inserted 100000, present 100000,") != NULL, "summary: %s", err);
    free(err);
    ck_assert_ptr_nonnull(strstr(out, "\n199999 PRESENT\n200000 INSERTED\n"));
    free(out);
    free(in);
    ck_assert_uint_eq(stats_of(&d, "s").keys, 300000);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* floed at max-connections refuses with ERR_BUSY; the client says so. */
START_TEST(cli_busy_at_max_connections)
{
    daemon_proc d;
    const char *flags[] = {"--max-connections", "1", "--log-level", "error", NULL}; /* no line per refusal */
    daemon_start(&d, flags);
    floe *held = connect_ok(&d);
    for (int i = 0; i < 20; i++) {
        floe *c;
        int st = harness_connect(&d, NULL, &c);
        ck_assert_msg(st == FLOE_ERR_BUSY, "connect %d: %s: %s", i, floe_strerror(st), floe_errstr(c));
        ck_assert_str_eq(floe_errstr(c), "too many connections (max-connections)");
        floe_close(c);
    }
    expect_cli2(&d, NULL, 1, NULL, "floe: ERR_BUSY: too many connections (max-connections)\n", ARGS("ping"));
    ck_assert_int_eq(floe_ping(held), FLOE_OK); /* the one admitted is unharmed */
    floe_close(held);
    int rc = -1;
    for (int i = 0; i < 100 && rc != 0; i++) { /* the slot frees once floed has seen the close */
        char *out;
        rc = run_cli(&d, NULL, &out, ARGS("ping"));
        free(out);
        if (rc)
            usleep(50000);
    }
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* Runs python3 on the JSON document text: `script` sees it as d and fails
 * with an assert.  Python's json module is the independent parser. */
static void check_json(const daemon_proc *d, const char *text, const char *script)
{
    if (system("command -v python3 >/dev/null 2>&1") != 0) {
        fprintf(stderr, "test_cli: no python3: the --json output is not parsed\n");
        return;
    }
    char doc[300], py[300], log[300], cmd[1000];
    snprintf(doc, sizeof doc, "%s/doc.json", d->dir);
    snprintf(py, sizeof py, "%s/check.py", d->dir);
    snprintf(log, sizeof log, "%s/check.log", d->dir);
    FILE *f = fopen(doc, "w");
    fputs(text, f);
    fclose(f);
    f = fopen(py, "w");
    fprintf(f, "import json, sys\nd = json.load(open(sys.argv[1]))\n%s\n", script);
    fclose(f);
    snprintf(cmd, sizeof cmd, "python3 %s %s >%s 2>&1", py, doc, log);
    int rc = system(cmd);
    char msg[4096] = "";
    f = fopen(log, "r");
    if (f) {
        size_t n = fread(msg, 1, sizeof msg - 1, f);
        msg[n] = '\0';
        fclose(f);
    }
    ck_assert_msg(rc == 0, "JSON check failed:\n%s\nscript:\n%s\ndocument:\n%s", msg, script, text);
}

static char *cli_out(const daemon_proc *d, const char *const *args)
{
    char *out;
    int rc = run_cli(d, NULL, &out, args);
    char *err = last_stderr(d);
    ck_assert_msg(rc == 0, "floe %s: exit %d:\n%s%s", args[0], rc, out, err);
    free(err);
    return out;
}

START_TEST(cli_json_output)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    expect_cli(&d, NULL, 0, "created s", ARGS("create", "s", "--key-bits", "32"));
    expect_cli(&d, NULL, 0, NULL, ARGS("insert", "s", "1", "2", "3"));
    expect_cli(&d, NULL, 0, "created m", ARGS("create", "m", "--kind", "map"));
    expect_cli(&d, NULL, 0, NULL, ARGS("insert", "m", "5=50"));
    expect_cli(&d, NULL, 0, "created t", ARGS("create", "t", "--kind", "tree", "--words", "4"));
    expect_cli(&d, NULL, 0, NULL, ARGS("insert", "t", "1,2,3,4"));
    char *out = cli_out(&d, ARGS("tables", "--json"));
    check_json(&d, out,
               "t = {x['name']: x for x in d['tables']}\n"
               "assert sorted(t) == ['m', 's', 't'], t\n"
               "assert t['s']['kind'] == 'SET' and t['s']['keys'] == 3 and t['s']['key_bits'] == 32\n"
               "assert t['s']['grow'] is False and 0 < t['s']['fill'] < 1\n"
               "assert t['m']['kind'] == 'MAP' and t['m']['value_bytes'] == 8 and t['m']['keys'] == 1\n"
               "assert t['t']['kind'] == 'TREE' and t['t']['words'] == 4 and t['t']['vectors'] == 1\n");
    free(out);
    out = cli_out(&d, ARGS("stats", "s", "--json"));
    char script[1024];
    snprintf(script, sizeof script,
             "assert d['name'] == 's' and d['keys'] == 3 and d['backend'] == '%s'\n"
             "assert d['levels']['primary']['slots'] > 0 and d['memory_bytes'] > 0\n"
             "assert isinstance(d['stages'], dict)\n"
             "for s in d['stages'].values(): assert s['count'] >= 0 and s['seconds'] >= 0\n",
             expected_backend());
    check_json(&d, out, script);
    free(out);
    out = cli_out(&d, ARGS("stats", "--json", "t"));
    check_json(&d, out, "assert d['kind'] == 'TREE' and d['vectors'] == 1 and d['nodes'] > 0\n");
    free(out);
    out = cli_out(&d, ARGS("info", "--json"));
    snprintf(script, sizeof script,
             "assert d['server'].startswith('floed ') and d['protocol'] == 1 and d['backend'] == '%s'\n"
             "assert d['max_frame'] > 0 and d['client'].startswith('floe ')\n"
             "assert d['info'] is not None or d['info_unavailable']\n",
             expected_backend());
    check_json(&d, out, script);
    free(out);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* floe info and floe_server_stats_get against floed's info operation:
 * figures the test knows independently (floed's pid, the table it made
 * and the keys it put there, its own connection). */
START_TEST(cli_info_server_wide)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    expect_cli(&d, NULL, 0, "created s", ARGS("create", "s", "--key-bits", "32"));
    expect_cli(&d, NULL, 0, NULL, ARGS("insert", "s", "1", "2", "3"));
    floe *c = connect_ok(&d);
    floe_server_stats *s;
    int st = floe_server_stats_get(c, &s);
    ck_assert_msg(st == FLOE_OK, "info: %s: %s", floe_strerror(st), floe_errstr(c));
    ck_assert_str_eq(s->version, floe_info(c)->server);
    ck_assert_uint_eq(s->pid, (uint64_t)d.pid);
    ck_assert_uint_ge(s->connections, 1);
    ck_assert_uint_ge(s->connections_total, 3); /* create, insert, this one */
    ck_assert_uint_lt(s->uptime_seconds, 600);
    ck_assert_str_eq(s->data_dir, "");
    ck_assert_uint_eq(s->n_tables, 1);
    ck_assert_str_eq(s->tables[0].name, "s");
    ck_assert_int_eq(s->tables[0].kind, FLOE_TABLE_SET);
    ck_assert_uint_eq(s->tables[0].keys, 3);
    bool insert_seen = false;
    for (size_t i = 0; i < s->n_ops; i++)
        if (strcmp(s->ops[i].op, "insert") == 0) {
            insert_seen = true;
            ck_assert_uint_ge(s->ops[i].requests, 1);
            ck_assert_uint_ge(s->ops[i].keys, 3);
        }
    ck_assert_msg(insert_seen, "no insert among the %zu ops", s->n_ops);
    floe_server_stats_free(s);
    floe_close(c);

    char *out = cli_out(&d, ARGS("info"));
    char want[64];
    snprintf(want, sizeof want, "pid: %d\n", (int)d.pid);
    ck_assert_msg(strstr(out, want) != NULL, "no '%s' in:\n%s", want, out);
    ck_assert_msg(strstr(out, "server: floed ") && strstr(out, "uptime: ") && strstr(out, "connections: "),
                  "floe info:\n%s", out);
    const char *row = strstr(out, "\n  s ");
    ck_assert_msg(row && strstr(row, "keys=3 "), "no table s with keys=3 in:\n%s", out);
    free(out);
    out = cli_out(&d, ARGS("info", "--json"));
    char script[1024];
    snprintf(script, sizeof script,
             "i = d['info']\n"
             "assert i is not None, d\n"
             "assert i['version'] == d['server'] and i['pid'] == %d and i['uptime_seconds'] < 600\n"
             "assert i['connections']['open'] >= 1 and i['connections']['total'] >= i['connections']['open']\n"
             "assert [(t['name'], t['kind'], t['keys']) for t in i['tables']] == [('s', 'SET', 3)], i['tables']\n"
             "assert i['ops']['insert']['requests'] >= 1 and i['ops']['insert']['keys'] >= 3\n"
             "assert isinstance(i['errors'], dict) and i['bytes_in'] > 0 and i['bytes_out'] > 0\n",
             (int)d.pid);
    check_json(&d, out, script);
    free(out);
    /* one section, as redis-cli's INFO SECTION: its lines, and no other's */
    out = cli_out(&d, ARGS("info", "clients"));
    ck_assert_msg(strncmp(out, "connections: ", 13) == 0 && !strchr(out + 13, ':'), "info clients:\n%s", out);
    free(out);
    out = cli_out(&d, ARGS("info", "TABLES"));
    ck_assert_msg(strncmp(out, "tables:\n  s ", 12) == 0 && !strstr(out, "pid:"), "info tables:\n%s", out);
    free(out);
    out = cli_out(&d, ARGS("info", "stats"));
    ck_assert_msg(strstr(out, "traffic: ") && strstr(out, "\n  insert ") && !strstr(out, "server:"), "%s", out);
    free(out);
    expect_cli2(&d, NULL, 2, NULL, "no section 'bogus'", ARGS("info", "bogus"));
    expect_cli2(&d, NULL, 2, NULL, "--json prints every section", ARGS("info", "server", "--json"));
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* ---- a stand-in server: an older floed, or one that refuses connections ---------------------------- */

typedef enum { FAKE_OLD_FLOED, FAKE_REFUSE_AT_ONCE, FAKE_REFUSE_AFTER_HELLO, FAKE_SILENT } fake_mode;

static int read_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len) {
        ssize_t r = recv(fd, p, len, 0);
        if (r <= 0)
            return -1;
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

static void fake_reply(int fd, Floe__V1__Response *r)
{
    size_t len = floe__v1__response__get_packed_size(r);
    unsigned char *buf = malloc(len + 4);
    buf[0] = (unsigned char)(len >> 24), buf[1] = (unsigned char)(len >> 16);
    buf[2] = (unsigned char)(len >> 8), buf[3] = (unsigned char)len;
    floe__v1__response__pack(r, buf + 4);
    raw_send(fd, buf, len + 4);
    free(buf);
}

/* One connection: floed 0.0.9, which knows hello and nothing of info (as
 * floed answers an operation it does not know), or a refusal: an error
 * frame with id 0, then close, at once or once the hello has arrived
 * unread (the close then resets the connection). */
static void fake_serve(int fd, fake_mode mode)
{
    if (mode == FAKE_SILENT) { /* reads what comes, answers nothing, until the client gives up */
        char buf[4096];
        struct pollfd pfd = {fd, POLLIN, 0};
        while (poll(&pfd, 1, 8000) > 0 && recv(fd, buf, sizeof buf, 0) > 0)
            ;
        return;
    }
    if (mode != FAKE_OLD_FLOED) {
        if (mode == FAKE_REFUSE_AFTER_HELLO) {
            struct pollfd pfd = {fd, POLLIN, 0};
            poll(&pfd, 1, 5000);
        }
        Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
        r.status = FLOE__V1__STATUS__ERR_BUSY;
        r.error = "too many connections (max-connections)";
        fake_reply(fd, &r);
        return;
    }
    for (;;) {
        unsigned char hdr[4];
        if (read_all(fd, hdr, 4))
            return;
        uint32_t len = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
        unsigned char *buf = malloc(len + 1);
        Floe__V1__Request *req = read_all(fd, buf, len) ? NULL : floe__v1__request__unpack(NULL, len, buf);
        free(buf);
        if (!req)
            return;
        Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
        Floe__V1__HelloReply hr = FLOE__V1__HELLO_REPLY__INIT;
        char msg[128];
        r.id = req->id;
        if (req->op_case == FLOE__V1__REQUEST__OP_HELLO) {
            hr.version = 1;
            hr.server = "floed 0.0.9";
            hr.max_frame = 64u << 20;
            hr.max_batch_keys = 4u << 20;
            hr.max_inflight = 64;
            hr.backend = "cpu";
            r.body_case = FLOE__V1__RESPONSE__BODY_HELLO;
            r.hello = &hr;
        } else {
            snprintf(msg, sizeof msg, "unknown or missing operation in request %llu", (unsigned long long)req->id);
            r.status = FLOE__V1__STATUS__ERR_INVALID;
            r.error = msg;
        }
        fake_reply(fd, &r);
        floe__v1__request__free_unpacked(req, NULL);
    }
}

/* Starts the stand-in for `conns` connections; d gets its address and a
 * scratch directory (daemon_stop removes it; fake_stop reaps the server). */
static void fake_start(daemon_proc *d, fake_mode mode, int conns)
{
    memset(d, 0, sizeof *d);
    snprintf(d->dir, sizeof d->dir, "/tmp/floe-itest-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(d->dir));
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sin;
    ck_assert_int_eq(bind(ls, (struct sockaddr *)&sin, sizeof sin), 0);
    ck_assert_int_eq(listen(ls, 16), 0);
    ck_assert_int_eq(getsockname(ls, (struct sockaddr *)&sin, &sl), 0);
    d->port = ntohs(sin.sin_port);
    snprintf(d->uri, sizeof d->uri, "floe://127.0.0.1:%u", d->port);
    snprintf(d->hostport, sizeof d->hostport, "127.0.0.1:%u", d->port);
    unsetenv("FLOE_TLS"); /* the stand-in speaks plain TCP (each test runs in a process of its own) */
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        for (int i = 0; i < conns; i++) {
            int fd = accept(ls, NULL, NULL);
            if (fd < 0)
                _exit(1);
            fake_serve(fd, mode);
            close(fd);
        }
        _exit(0);
    }
    close(ls);
    d->pid = pid;
}

static void fake_stop(daemon_proc *d)
{
    int status = 0;
    for (int i = 0; i < 500 && waitpid(d->pid, &status, WNOHANG) != d->pid; i++) {
        if (i == 499) {
            kill(d->pid, SIGKILL);
            waitpid(d->pid, &status, 0);
        }
        usleep(10000);
    }
    d->pid = 0;
    daemon_stop(d, SIGTERM); /* removes the scratch directory */
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the stand-in server failed (status %d)", status);
}

START_TEST(cli_info_from_an_older_floed)
{
    daemon_proc d;
    fake_start(&d, FAKE_OLD_FLOED, 3);
    floe *c = connect_ok(&d);
    floe_server_stats *s = (floe_server_stats *)&d; /* must become NULL */
    ck_assert_int_eq(floe_server_stats_get(c, &s), FLOE_ERR_UNSUPPORTED);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(floe_errstr(c), "floed 0.0.9 does not know the info operation"), "%s", floe_errstr(c));
    ck_assert_int_eq(floe_ping(c), FLOE_ERR_INVALID); /* the stand-in knows hello only */
    floe_close(c);
    char *out = cli_out(&d, ARGS("info"));
    ck_assert_msg(strstr(out, "server: floed 0.0.9\n") && strstr(out, "backend: cpu\n") &&
                      strstr(out, "info: not available (floed 0.0.9 does not know the info operation"),
                  "floe info:\n%s", out);
    ck_assert_msg(!strstr(out, "uptime"), "floe info:\n%s", out);
    free(out);
    out = cli_out(&d, ARGS("info", "--json"));
    check_json(&d, out,
               "assert d['server'] == 'floed 0.0.9' and d['info'] is None\n"
               "assert 'does not know the info operation' in d['info_unavailable']\n");
    free(out);
    fake_stop(&d);
}
END_TEST

START_TEST(refused_connection_reports_the_servers_reason)
{
    const fake_mode modes[] = {FAKE_REFUSE_AT_ONCE, FAKE_REFUSE_AFTER_HELLO};
    for (int m = 0; m < 2; m++) {
        daemon_proc d;
        fake_start(&d, modes[m], 11);
        for (int i = 0; i < 10; i++) {
            floe *c;
            int st = harness_connect(&d, NULL, &c);
            ck_assert_msg(st == FLOE_ERR_BUSY, "mode %d, try %d: %s: %s", m, i, floe_strerror(st), floe_errstr(c));
            ck_assert_str_eq(floe_errstr(c), "too many connections (max-connections)");
            floe_close(c);
        }
        expect_cli2(&d, NULL, 1, NULL, "floe: ERR_BUSY: too many connections (max-connections)\n", ARGS("ping"));
        fake_stop(&d);
    }
}
END_TEST

/* --timeout bounds the whole command, connecting included, unless
 * --connect-timeout is given (issue 41, 12): a server that accepts and
 * never answers. */
START_TEST(timeout_bounds_the_whole_command)
{
    daemon_proc d;
    fake_start(&d, FAKE_SILENT, 4);
    const char *mc = tool_path("FLOE_MC", "build/san/floe-mc"),
               *bench = tool_path("FLOE_BENCH", "build/rel/floe-bench");
    uint64_t t0 = now_ms();
    expect_cli2(&d, NULL, 1, NULL, "ERR_TIMEOUT: the command did not finish within --timeout 1 s",
                ARGS("--timeout", "1", "ping"));
    uint64_t took = now_ms() - t0;
    ck_assert_msg(took >= 900 && took < 4000, "floe --timeout 1 took %llu ms", (unsigned long long)took);
    t0 = now_ms();
    expect_cli2(&d, NULL, 1, NULL, "did not answer hello within 2000 ms",
                ARGS("--timeout", "1", "--connect-timeout", "2", "ping"));
    took = now_ms() - t0;
    ck_assert_msg(took >= 1900 && took < 5000, "floe --connect-timeout 2 took %llu ms", (unsigned long long)took);
    t0 = now_ms();
    expect_tool(&d, NULL, 1, NULL, "did not answer hello within 1000 ms",
                ARGS(bench, "-s", "@HOSTPORT", "--timeout", "1", "-n", "1", "-q"));
    expect_tool(&d, NULL, 1, NULL, "did not answer hello within 1000 ms",
                ARGS(mc, "--server", "@HOSTPORT", "--timeout", "1", "--model", "hanoi:3"));
    took = now_ms() - t0;
    ck_assert_msg(took < 8000, "floe-bench and floe-mc with --timeout 1 took %llu ms", (unsigned long long)took);
    fake_stop(&d);
}
END_TEST

/* `floe` with no command: a session of the lines on stdin on one connection (cli_shell.c); its
 * exit code the last failure's; quit ends it; keys come on the line. */
START_TEST(cli_session_from_stdin)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    const char *script = "create s --key-bits 16\n"
                         "insert s 1 2\n"
                         "find s 2 '3'\n"
                         "# a note, and an empty line\n"
                         "\n"
                         "bogus\n"
                         "insert s\n"
                         "ping -H 127.0.0.1:1\n"
                         "find \"s\" 1\n"
                         "help erase\n"
                         "quit\n"
                         "insert s 9\n";
    char *out = NULL;
    int rc = run_cli(&d, script, &out, (const char *const[]){NULL});
    char *err = last_stderr(&d);
    ck_assert_msg(rc == 2, "exit %d:\n%s\n%s", rc, out ? out : "", err ? err : "");
    ck_assert_ptr_nonnull(strstr(out, "1 INSERTED\n2 INSERTED\n"));
    ck_assert_ptr_nonnull(strstr(out, "2 PRESENT\n3 ABSENT\n"));
    ck_assert_ptr_nonnull(strstr(out, "1 PRESENT\n"));
    ck_assert_ptr_nonnull(strstr(out, "usage: floe erase"));
    ck_assert_msg(err && strstr(err, "unknown command 'bogus'") && strstr(err, "give the keys on the line") &&
                      strstr(err, "connection are fixed"),
                  "%s", err ? err : "");
    free(out);
    free(err);
    ck_assert_uint_eq(stats_of(&d, "s").keys, 2); /* nothing after quit ran */
    ck_assert_int_eq(run_cli(&d, "ping\ntables\n", &out, (const char *const[]){NULL}), 0);
    ck_assert_ptr_nonnull(strstr(out, "PONG"));
    free(out);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* At a terminal: a prompt, completion of commands and table names, history in ~/.floe_history. */
START_TEST(cli_session_at_a_terminal)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    expect_cli(&d, NULL, 0, "created", ARGS("create", "tabby", "--key-bits", "16"));
    char home[] = "/tmp/floe-home-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(home));
    int fd;
    const pid_t pid = forkpty(&fd, NULL, NULL, NULL);
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setenv("HOME", home, 1);
        const char *cli = getenv("FLOE_CLI") ? getenv("FLOE_CLI") : "build/san/floe";
        execl(cli, cli, "-H", d.uri, (char *)NULL);
        _exit(127);
    }
    char seen[16384];
    size_t have = 0;
    /* reads what the terminal shows until `want` appears after `from` (or 10 s pass) */
#define SHOWS(want)                                                                                                    \
    do {                                                                                                               \
        const size_t from = have;                                                                                      \
        for (int t = 0; t < 1000 && !(seen[have] = '\0', strstr(seen + from, want)); t++) {                            \
            struct pollfd p = {fd, POLLIN, 0};                                                                         \
            if (poll(&p, 1, 10) > 0) {                                                                                 \
                const ssize_t r = read(fd, seen + have, sizeof seen - 1 - have);                                       \
                have += r > 0 ? (size_t)r : 0;                                                                         \
            }                                                                                                          \
        }                                                                                                              \
        seen[have] = '\0';                                                                                             \
        ck_assert_msg(strstr(seen + from, want), "the terminal does not show '%s':\n%s", want, seen);                  \
    } while (0)
    SHOWS("> ");
    ck_assert_int_eq(write(fd, "pi\t\n", 4), 4); /* "ping", completed */
    SHOWS("PONG");
    ck_assert_int_eq(write(fd, "stats tab\t\n", 11), 11); /* the table's name, completed */
    SHOWS("name: tabby");
    ck_assert_int_eq(write(fd, "quit\n", 5), 5);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
#undef SHOWS
    close(fd);
    char path[256];
    snprintf(path, sizeof path, "%s/.floe_history", home);
    char *hist = slurp(path);
    ck_assert_msg(hist && strstr(hist, "ping") && strstr(hist, "tabby"), "history: %s", hist ? hist : "(none)");
    free(hist);
    rm_rf(home);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

Suite *cli_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, cli_subcommands);
    tcase_add_test(tc, sizes_the_tools_take);
    tcase_add_test(tc, cli_options_getopt);
    tcase_add_test(tc, cli_stdin_in_parts);
    tcase_add_test(tc, cli_stdin_many_keys);
    tcase_add_test(tc, cli_busy_at_max_connections);
    tcase_add_test(tc, cli_json_output);
    tcase_add_test(tc, cli_info_server_wide);
    tcase_add_test(tc, cli_info_from_an_older_floed);
    tcase_add_test(tc, refused_connection_reports_the_servers_reason);
    tcase_add_test(tc, timeout_bounds_the_whole_command);
    tcase_add_test(tc, cli_session_from_stdin);
    tcase_add_test(tc, cli_session_at_a_terminal);
    suite_add_tcase(s, tc);
    return s;
}
