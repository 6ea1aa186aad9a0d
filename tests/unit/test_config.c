/*
 * test_config.c - floed's settings: the shipped config/floed.conf names
 * every setting with its default, units parse, and bad lines are refused
 * with the file, the line and the reason.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "testutil.h"

START_TEST(shipped_file_lists_every_setting_with_its_default)
{
    floed_config defaults, from_file;
    char err[512];
    config_defaults(&defaults);
    config_defaults(&from_file);
    memset(&from_file.max_frame, 0xAB, sizeof from_file.max_frame); /* must be set by the file */
    ck_assert_msg(config_load_file(&from_file, "config/floed.conf", err, sizeof err) == 0, "%s", err);
    ck_assert_mem_eq(&defaults, &from_file, sizeof defaults);
    FILE *f = fopen("config/floed.conf", "r");
    ck_assert_ptr_nonnull(f);
    char text[16384];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    for (size_t i = 0; i < config_count(); i++) {
        char line[128];
        snprintf(line, sizeof line, "\n%s", config_name(i));
        ck_assert_msg(strstr(text, line) != NULL, "config/floed.conf does not list %s", config_name(i));
    }
}
END_TEST

START_TEST(values_units_and_errors)
{
    floed_config c;
    char err[512];
    config_defaults(&c);
    ck_assert_int_eq(config_set(&c, "max-frame", "1G", err, sizeof err), 0);
    ck_assert_uint_eq(c.max_frame, 1ull << 30);
    ck_assert_int_eq(config_set(&c, "max-batch-keys", "64KiB", err, sizeof err), 0);
    ck_assert_uint_eq(c.max_batch_keys, 65536);
    ck_assert_int_eq(config_set(&c, "port", "70000", err, sizeof err), -1);
    ck_assert(strstr(err, "out of range") != NULL);
    ck_assert_int_eq(config_set(&c, "port", "12x", err, sizeof err), -1);
    ck_assert(strstr(err, "whole number") != NULL);
    ck_assert_int_eq(config_set(&c, "max-frame", "12Q", err, sizeof err), -1);
    ck_assert_int_eq(config_set(&c, "nonsense", "1", err, sizeof err), -1);
    ck_assert(strstr(err, "unknown setting") != NULL);
    ck_assert_uint_eq(c.port, 7450); /* failed sets changed nothing */

    char path[] = "/tmp/floe-conf-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char *body = "# comment\n\nport 7451   # trailing comment\nio-threads 2\nmax-frame 8M\nbogus 1\n";
    ck_assert_int_eq(write(fd, body, strlen(body)), (ssize_t)strlen(body));
    close(fd);
    ck_assert_int_eq(config_load_file(&c, path, err, sizeof err), -1);
    ck_assert_msg(strstr(err, ":6:") != NULL && strstr(err, "bogus") != NULL, "%s", err);
    ck_assert_uint_eq(c.port, 7451);
    ck_assert_uint_eq(c.max_frame, 8ull << 20);
    unlink(path);
    ck_assert_int_eq(config_load_file(&c, "/nonexistent/floed.conf", err, sizeof err), -1);

    /* a '#' inside a value is part of it (issue 41, F); a NUL byte is refused with its line, and
     * the lines before it stand; a line longer than any buffer is read whole */
    strcpy(path, "/tmp/floe-conf-XXXXXX");
    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char body2[] = "token a#b  # the token\nport 7452\n";
    ck_assert_int_eq(write(fd, body2, strlen(body2)), (ssize_t)strlen(body2));
    close(fd);
    ck_assert_msg(config_load_file(&c, path, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(c.token, "a#b");
    ck_assert_uint_eq(c.port, 7452);
    unlink(path);
    strcpy(path, "/tmp/floe-conf-XXXXXX");
    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char body3[] = "port 7453\ntoken ab\0cd\n";
    ck_assert_int_eq(write(fd, body3, sizeof body3 - 1), (ssize_t)(sizeof body3 - 1));
    close(fd);
    ck_assert_int_eq(config_load_file(&c, path, err, sizeof err), -1);
    ck_assert_msg(strstr(err, ":2:") != NULL && strstr(err, "NUL") != NULL, "%s", err);
    ck_assert_uint_eq(c.port, 7453);
    ck_assert_str_eq(c.token, "a#b");
    unlink(path);
    strcpy(path, "/tmp/floe-conf-XXXXXX");
    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    char big[4000];
    memset(big, 'k', sizeof big);
    ck_assert_int_eq(write(fd, "token ", 6), 6);
    ck_assert_int_eq(write(fd, big, 1000), 1000);
    ck_assert_int_eq(write(fd, "\n", 1), 1);
    close(fd);
    ck_assert_msg(config_load_file(&c, path, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(strlen(c.token), 1000);
    unlink(path);

    config_defaults(&c);
    strcpy(c.log_level, "loud");
    ck_assert_int_eq(config_finish(&c, err, sizeof err), -1);
    config_defaults(&c);
    strcpy(c.token_file, "/nonexistent/token");
    ck_assert_int_eq(config_finish(&c, err, sizeof err), -1);
    ck_assert(strstr(err, "token-file") != NULL);
}
END_TEST

/* io-threads 0: one per two CPUs of this host, 4 to 16; any other number as given. */
START_TEST(io_threads_by_the_host)
{
    floed_config c;
    config_defaults(&c);
    ck_assert_uint_eq(c.io_threads, 0);
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const unsigned want = cpus / 2 < 4 ? 4 : cpus / 2 > 16 ? 16 : (unsigned)(cpus / 2);
    ck_assert_uint_eq(config_io_threads(&c), want);
    c.io_threads = 7;
    ck_assert_uint_eq(config_io_threads(&c), 7);
    c.io_threads = 100;
    ck_assert_uint_eq(config_io_threads(&c), 100);
}
END_TEST

START_TEST(gpu_lists)
{
    int ids[FLOE_PARTS_MAX];
    char err[200];
    ck_assert_int_eq(config_gpus("all", ids, err, sizeof err), 0);
    ck_assert_int_eq(config_gpus("0", ids, err, sizeof err), 1);
    ck_assert_int_eq(ids[0], 0);
    ck_assert_int_eq(config_gpus("3,1", ids, err, sizeof err), 2);
    ck_assert_int_eq(ids[0], 3);
    ck_assert_int_eq(ids[1], 1);
    const char *bad[] = {"", "x", "0,", ",1", "1,1", "-1", "0 1", "1.5", "99999", "all,0"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        ck_assert_msg(config_gpus(bad[i], ids, err, sizeof err) == -1, "'%s' accepted", bad[i]);
        ck_assert_msg(strstr(err, "gpus") != NULL, "'%s': %s", bad[i], err);
    }
    floed_config c;
    config_defaults(&c);
    ck_assert_int_eq(config_set(&c, "partitions", "17", err, sizeof err), -1);
    ck_assert_int_eq(config_set(&c, "partitions", "4", err, sizeof err), 0);
    ck_assert_uint_eq(c.partitions, 4);
}
END_TEST

/* CONFIG REWRITE's file: comments, blank lines and unchanged lines as they
 * were, each line of a changed setting with its new value and its comment
 * (a setting named twice: both lines), a last line without its newline
 * kept so, settings no line names added at the end (not the token), the
 * mode kept; and the result reads back as the settings written. */
START_TEST(rewrite_keeps_the_file)
{
    char path[] = "/tmp/floe-rewrite-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char *body = "# top\nmax-inflight 7   # a note\n\nmax-inflight 8\nmax-frame 64M\nbind 127.0.0.1";
    ck_assert_int_eq(write(fd, body, strlen(body)), (ssize_t)strlen(body));
    ck_assert_int_eq(fchmod(fd, 0600), 0);
    close(fd);
    floed_config c;
    char err[512];
    config_defaults(&c);
    ck_assert_int_eq(config_load_file(&c, path, err, sizeof err), 0);
    ck_assert_int_eq(config_set(&c, "max-inflight", "9", err, sizeof err), 0);
    ck_assert_int_eq(config_set(&c, "timeout", "30", err, sizeof err), 0);
    ck_assert_int_eq(config_set(&c, "token", "hush", err, sizeof err), 0);
    ck_assert_int_eq(config_rewrite(&c, path, err, sizeof err), 0);
    char got[1024] = {0};
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_gt(fread(got, 1, sizeof got - 1, f), 0);
    fclose(f);
    ck_assert_str_eq(got, "# top\nmax-inflight 9 # a note\n\nmax-inflight 9\nmax-frame 64M\nbind 127.0.0.1\n"
                          "# Written by CONFIG REWRITE: settings in force that the lines above did not name\n"
                          "timeout 30\n");
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_eq(sb.st_mode & 0777, 0600);
    floed_config back;
    config_defaults(&back);
    ck_assert_int_eq(config_load_file(&back, path, err, sizeof err), 0);
    ck_assert_uint_eq(back.max_inflight, 9);
    ck_assert_uint_eq(back.timeout, 30);
    ck_assert_uint_eq(back.max_frame, 64u << 20);
    ck_assert_int_eq(config_rewrite(&c, "/nonexistent/floed.conf", err, sizeof err), -1);
    ck_assert_msg(strstr(err, "/nonexistent/floed.conf"), "%s", err);
    unlink(path);
}
END_TEST

Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, shipped_file_lists_every_setting_with_its_default);
    tcase_add_test(tc, values_units_and_errors);
    tcase_add_test(tc, gpu_lists);
    tcase_add_test(tc, io_threads_by_the_host);
    tcase_add_test(tc, rewrite_keeps_the_file);
    suite_add_tcase(s, tc);
    return s;
}
