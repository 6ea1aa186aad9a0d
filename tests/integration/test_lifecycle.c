/*
 * test_lifecycle.c - clients that vanish, SIGTERM with requests in flight,
 * and tables that survive a restart through data-dir.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

START_TEST(client_killed_mid_request)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    floe *c = connect_ok(&d);
    floe_table_def t = {.name = "k", .kind = FLOE_TABLE_SET, .capacity = 4000000};
    ck_assert_int_eq(floe_create(c, &t), FLOE_OK);
    pid_t pid = fork();
    if (pid == 0) {
        floe *x;
        if (harness_connect(&d, NULL, &x) != FLOE_OK)
            _exit(1);
        static uint64_t keys[200000];
        for (int i = 0; i < 200000; i++)
            keys[i] = (uint64_t)i;
        for (int r = 0; r < 10; r++)
            floe_send_insert(x, "k", keys, 200000, NULL, 0, 0, NULL, NULL);
        floe_poll(x, 50);
        _exit(0); /* gone, answers unread */
    }
    int status;
    waitpid(pid, &status, 0);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* the server goes on, and the table is consistent */
    for (int i = 0; i < 20; i++)
        ck_assert_int_eq(floe_ping(c), FLOE_OK);
    uint64_t probe[2] = {5, 1u << 30};
    uint8_t res[2];
    ck_assert_int_eq(floe_find(c, "k", probe, 2, res, NULL, 0, NULL), FLOE_OK);
    ck_assert_uint_eq(res[1], FLOE_ABSENT);
    floe_table_info info;
    ck_assert_int_eq(floe_stats(c, "k", &info), FLOE_OK);
    ck_assert(info.keys == 0 || info.keys == 200000);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(sigterm_with_requests_in_flight)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    floe *c = connect_ok(&d);
    floe_table_def t = {.name = "t", .kind = FLOE_TABLE_SET, .capacity = 100, .grow = 1};
    ck_assert_int_eq(floe_create(c, &t), FLOE_OK);
    enum { R = 40, K = 50000 };
    static uint64_t keys[R][K];
    floe_call *calls[R];
    for (int r = 0; r < R; r++) {
        for (int i = 0; i < K; i++)
            keys[r][i] = (uint64_t)r * K + (uint64_t)i;
        calls[r] = floe_send_insert(c, "t", keys[r], K, NULL, 0, 0, NULL, NULL);
    }
    floe_poll(c, 20);
    kill(d.pid, SIGTERM);
    int ok = 0, stopped = 0;
    for (int r = 0; r < R; r++) {
        int st = floe_wait(c, calls[r]);
        ck_assert_msg(st == FLOE_OK || st == FLOE_ERR_SHUTTING_DOWN, "request %d: %s (%s)", r, floe_strerror(st),
                      floe_call_error(calls[r]));
        ok += st == FLOE_OK;
        stopped += st == FLOE_ERR_SHUTTING_DOWN;
        floe_call_free(calls[r]);
    }
    ck_assert_int_eq(ok + stopped, R);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0); /* exit 0 */
}
END_TEST

/* A large frame half sent when floed is told to stop (floed reads such
 * frames straight into their buffers, outside libevent's): the connection
 * is not quiet, so floed waits for the rest and answers it. */
START_TEST(large_frame_half_sent_at_stop)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    floe *c = connect_ok(&d);
    floe_table_def t = {.name = "h", .kind = FLOE_TABLE_SET, .capacity = 1000000};
    ck_assert_int_eq(floe_create(c, &t), FLOE_OK);
    enum { K = 100000 };
    static uint64_t keys[K];
    for (int i = 0; i < K; i++)
        keys[i] = (uint64_t)i;
    const size_t len = raw_insert_frame(NULL, 7, "h", keys, K), half = len / 4;
    unsigned char *frame = malloc(len);
    raw_insert_frame(frame, 7, "h", keys, K);
    int fd = raw_connect(d.port);
    raw_send(fd, frame, half);
    usleep(50000);
    kill(d.pid, SIGTERM);
    usleep(300000); /* past the 100 ms after which a connection with nothing unread counts as quiet */
    raw_send(fd, frame + half, len - half);
    Floe__V1__Response *r = raw_read_response(fd, 5000);
    ck_assert_msg(r != NULL, "the connection was closed with a frame half read");
    ck_assert_uint_eq(r->id, 7);
    ck_assert_msg(r->status == FLOE__V1__STATUS__OK || r->status == FLOE__V1__STATUS__ERR_SHUTTING_DOWN,
                  "status %d: %s", r->status, r->error);
    floe__v1__response__free_unpacked(r, NULL);
    close(fd);
    free(frame);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(tables_survive_restart)
{
    char dir[] = "/tmp/floe-data-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const char *flags[] = {"--data-dir", dir, NULL};
    daemon_proc d;
    daemon_start(&d, flags);
    floe *c = connect_ok(&d);
    floe_table_def t = {.name = "keep", .kind = FLOE_TABLE_MAP, .key_bits = 48, .value_bytes = 8, .capacity = 5000};
    ck_assert_int_eq(floe_create(c, &t), FLOE_OK);
    uint64_t keys[3] = {1, 2, 3}, vals[3] = {10, 20, 30};
    ck_assert_int_eq(floe_insert_values(c, "keep", keys, vals, 3, 8, 0, NULL, NULL, NULL), FLOE_OK);
    ck_assert_int_eq(floe_snapshot(c, "keep"), FLOE_OK);
    char *out;
    ck_assert_int_eq(run_cli(&d, NULL, &out, (const char *const[]){"snapshot", NULL}), 0);
    ck_assert(strstr(out, "saved every table") != NULL);
    free(out);
    ck_assert_int_eq(floe_snapshot(c, "nosuch"), FLOE_ERR_NO_TABLE);
    uint64_t k4 = 4, v4 = 40;
    ck_assert_int_eq(floe_insert_values(c, "keep", &k4, &v4, 1, 8, 0, NULL, NULL, NULL), FLOE_OK);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0); /* saves at shutdown */

    daemon_start(&d, flags);
    c = connect_ok(&d);
    uint64_t q[5] = {1, 2, 3, 4, 5}, got[5];
    uint8_t res[5];
    ck_assert_int_eq(floe_find(c, "keep", q, 5, res, got, 8, NULL), FLOE_OK);
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(res[i], FLOE_PRESENT);
        ck_assert_uint_eq(got[i], (uint64_t)(i + 1) * 10);
    }
    ck_assert_uint_eq(res[4], FLOE_ABSENT);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGINT), 0);

    /* a damaged snapshot keeps floed from starting, with a message */
    char path[256];
    snprintf(path, sizeof path, "%s/keep.floe", dir);
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, 600, SEEK_SET);
    fputc(0x5a, f);
    fclose(f);
    pid_t pid = fork();
    if (pid == 0) {
        const char *fl = getenv("FLOED") ? getenv("FLOED") : "build/san/floed";
        if (!freopen("/dev/null", "w", stderr))
            _exit(126);
        execl(fl, fl, "--port", "0", "--data-dir", dir, (char *)NULL);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    char cmd[300]; /* the damaged file is set aside, the lock file stays: test_service.c checks both */
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* floe shutdown: floed stops as on SIGTERM and exits 0, its tables saved; with --nosave the
 * changes since their last snapshots are not. */
START_TEST(shutdown_by_a_client)
{
    char dir[] = "/tmp/floe-down-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const char *flags[] = {"--data-dir", dir, "--save-every", "0", NULL};
    daemon_proc d;
    daemon_start_logged(&d, flags);
    floe *c = connect_ok(&d);
    floe_table_def t = {.name = "s", .kind = FLOE_TABLE_SET, .key_bits = 20};
    ck_assert_int_eq(floe_create(c, &t), FLOE_OK);
    const uint64_t k[3] = {1, 2, 3};
    uint8_t res[3];
    ck_assert_int_eq(floe_insert(c, "s", k, 2, res, NULL), FLOE_OK);
    floe_close(c);
    expect_cli(&d, NULL, 2, NULL, ARGS("shutdown", "now")); /* no arguments: a usage error, floed goes on */
    expect_cli(&d, NULL, 0, "is shutting down\n", ARGS("shutdown"));
    ck_assert(log_has(&d, "asked floed to shut down", 5000));
    ck_assert_int_eq(daemon_stop(&d, 0), 0); /* it stops by itself */
    daemon_start(&d, flags);
    c = connect_ok(&d);
    ck_assert_int_eq(floe_find(c, "s", k, 3, res, NULL, 0, NULL), FLOE_OK);
    ck_assert(res[0] == FLOE_PRESENT && res[1] == FLOE_PRESENT && res[2] == FLOE_ABSENT); /* saved at the stop */
    ck_assert_int_eq(floe_insert(c, "s", k + 2, 1, res, NULL), FLOE_OK);
    floe_close(c);
    expect_cli(&d, NULL, 0, "without saving", ARGS("shutdown", "--nosave"));
    ck_assert_int_eq(daemon_stop(&d, 0), 0);
    daemon_start(&d, flags);
    c = connect_ok(&d);
    ck_assert_int_eq(floe_find(c, "s", k, 3, res, NULL, 0, NULL), FLOE_OK);
    ck_assert(res[0] == FLOE_PRESENT && res[1] == FLOE_PRESENT && res[2] == FLOE_ABSENT); /* 3 was not saved */
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
    rm_rf(dir);
}
END_TEST

START_TEST(config_file_and_flags)
{
    /* the file sets two limits; a flag overrides one of them wherever it stands */
    char conf[] = "/tmp/floe-conf-XXXXXX";
    int fd = mkstemp(conf);
    ck_assert_int_ge(fd, 0);
    const char *body = "max-inflight 7\nmax-batch-keys 1K\n";
    ck_assert_int_eq(write(fd, body, strlen(body)), (ssize_t)strlen(body));
    close(fd);
    const char *flags[] = {"--max-inflight", "9", "--config", conf, NULL};
    daemon_proc d;
    daemon_start(&d, flags);
    floe *c = connect_ok(&d);
    ck_assert_uint_eq(floe_info(c)->max_inflight, 9);
    ck_assert_uint_eq(floe_info(c)->max_batch_keys, 1024);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
    unlink(conf);
}
END_TEST

static floe *connect_token(const daemon_proc *d, const char *token)
{
    floe *c = NULL;
    ck_assert_int_eq(harness_connect(d, token, &c), FLOE_OK);
    return c;
}

/* A setting of c's server (floe_config_get), "" if there is none. */
static void setting_of(floe *c, const char *name, char *value, size_t len, int *live)
{
    floe_setting *set;
    size_t n;
    ck_assert_int_eq(floe_config_get(c, name, &set, &n, NULL, 0), FLOE_OK);
    ck_assert_uint_le(n, 1);
    snprintf(value, len, "%s", n ? set[0].value : "");
    if (live)
        *live = n ? set[0].live : -1;
    free(set);
}

/* CONFIG GET, SET and REWRITE (floe config): a live setting changes what a
 * new connection's hello says; one that needs a restart, a bad value and
 * an unknown name are refused and change nothing; the token is not shown;
 * REWRITE keeps the file's comments and lines, changes the one setting,
 * and a restart from it has the new value; without a file, no rewrite. */
START_TEST(config_get_set_rewrite)
{
    char conf[] = "/tmp/floe-conf-XXXXXX";
    int fd = mkstemp(conf);
    ck_assert_int_ge(fd, 0);
    const char *body = "# keep me\nmax-inflight 7   # a note\nmax-batch-keys 1K\n";
    ck_assert_int_eq(write(fd, body, strlen(body)), (ssize_t)strlen(body));
    close(fd);
    const char *flags[] = {"--config", conf, "--token", "s3cret", NULL};
    daemon_proc d;
    daemon_start(&d, flags);
    floe *c = connect_token(&d, "s3cret");
    char v[1100], file[1024];
    int live;
    setting_of(c, "max-inflight", v, sizeof v, &live);
    ck_assert_str_eq(v, "7");
    ck_assert_int_eq(live, 1);
    setting_of(c, "max-batch-keys", v, sizeof v, NULL);
    ck_assert_str_eq(v, "1024");
    setting_of(c, "port", v, sizeof v, &live);
    ck_assert_int_eq(live, 0);
    setting_of(c, "token", v, sizeof v, NULL);
    ck_assert_str_eq(v, "(set)"); /* never the secret */
    floe_setting *all;
    size_t n;
    ck_assert_int_eq(floe_config_get(c, "max-*", &all, &n, file, sizeof file), FLOE_OK);
    ck_assert_uint_ge(n, 5);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(!strncmp(all[i].name, "max-", 4), "%s", all[i].name);
    free(all);
    ck_assert_str_eq(file, conf);

    ck_assert_int_eq(floe_config_set(c, "max-inflight", "3"), FLOE_OK);
    floe *c2 = connect_token(&d, "s3cret");
    ck_assert_uint_eq(floe_info(c2)->max_inflight, 3); /* what a new connection's hello says */
    floe_close(c2);
    ck_assert_int_eq(floe_config_set(c, "port", "1"), FLOE_ERR_INVALID);
    ck_assert_msg(strstr(floe_errstr(c), "restart"), "%s", floe_errstr(c));
    ck_assert_int_eq(floe_config_set(c, "max-inflight", "0"), FLOE_ERR_INVALID);
    ck_assert_int_eq(floe_config_set(c, "no-such-setting", "1"), FLOE_ERR_INVALID);
    setting_of(c, "max-inflight", v, sizeof v, NULL);
    ck_assert_str_eq(v, "3");
    ck_assert_int_eq(floe_config_rewrite(c), FLOE_OK);
    floe_close(c);
    expect_cli(&d, NULL, 0, "max-inflight 3\n", ARGS("--token", "s3cret", "config", "get", "max-inflight"));
    expect_cli(&d, NULL, 2, NULL, ARGS("--token", "s3cret", "config", "frob"));
    expect_cli(&d, NULL, 1, NULL, ARGS("config", "get")); /* no token: refused */
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);

    char got[512] = {0};
    FILE *f = fopen(conf, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_gt(fread(got, 1, sizeof got - 1, f), 0);
    fclose(f);
    ck_assert_msg(!strncmp(got, "# keep me\nmax-inflight 3 # a note\nmax-batch-keys 1K\n", 51), "%s", got);
    ck_assert_msg(!strstr(got, "s3cret"), "%s", got); /* a token from the command line stays off the file */

    const char *again[] = {"--config", conf, "--token", "s3cret", NULL};
    daemon_start(&d, again);
    c = connect_token(&d, "s3cret");
    ck_assert_uint_eq(floe_info(c)->max_inflight, 3); /* the rewritten file */
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
    unlink(conf);

    daemon_start(&d, NULL); /* no file */
    c = connect_ok(&d);
    ck_assert_int_eq(floe_config_rewrite(c), FLOE_ERR_INVALID);
    ck_assert_msg(strstr(floe_errstr(c), "without a config file"), "%s", floe_errstr(c));
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

static uint64_t server_rss(floe *c)
{
    floe_server_stats *s;
    ck_assert_int_eq(floe_server_stats_get(c, &s), FLOE_OK);
    const uint64_t rss = s->rss_bytes;
    floe_server_stats_free(s);
    return rss;
}

/* maxmemory: a growing table stops growing where its next arrays would
 * pass the limit (ERR_NO_MEMORY, every key of the calls answered before it
 * still there); once floed is at the limit, writes and creates are refused
 * (ERR_NO_MEMORY) and change nothing, reads and erases go on; raising the
 * limit lets writes in again. */
START_TEST(maxmemory_refuses_writes)
{
    if (getenv("TSAN_OPTIONS")) { /* the pipelines run's floed: its shadow memory moves the resident memory by 100s of
                                     MiB */
        fprintf(stderr, "maxmemory_refuses_writes: skipped against a ThreadSanitizer floed (run in the other runs)\n");
        return;
    }
    daemon_proc d;
    daemon_start_logged(&d, NULL);
    floe *c = connect_ok(&d);
    /* on the CPU engine whatever the run's backend: maxmemory is the host's, a GPU table's arrays are in device
     * memory */
    floe_table_def g = {
        .name = "g", .kind = FLOE_TABLE_SET, .key_bits = 40, .capacity = 1000, .grow = 1, .backend = "cpu"};
    ck_assert_int_eq(floe_create(c, &g), FLOE_OK);
    enum { B = 1 << 20 };
    static uint64_t keys[B];
    static uint8_t res[B];
    uint64_t stored = 0;
    for (size_t i = 0; i < B; i++) /* a first request before the limit: a sanitizer's shadow of its buffers */
        keys[i] = i;
    ck_assert_int_eq(floe_insert(c, "g", keys, B, res, NULL), FLOE_OK);
    stored = B;
    usleep(200000);
    char v[32];
    /* room for a few growths above what floed holds now */
    snprintf(v, sizeof v, "%llu", (unsigned long long)(server_rss(c) + (64u << 20)));
    ck_assert_int_eq(floe_config_set(c, "maxmemory", v), FLOE_OK);
    usleep(200000); /* a few samples of the resident memory */
    int st = FLOE_OK;
    for (int round = 0; round < 400 && st == FLOE_OK; round++) {
        for (size_t i = 0; i < B; i++)
            keys[i] = stored + i;
        st = floe_insert(c, "g", keys, B, res, NULL);
        if (st == FLOE_OK)
            stored += B;
    }
    ck_assert_msg(st == FLOE_ERR_NO_MEMORY, "%s: %s", floe_strerror(st), floe_errstr(c));
    ck_assert_msg(strstr(floe_errstr(c), "maxmemory"), "%s", floe_errstr(c));
    ck_assert_msg(stored > B, "the first insert under the limit: %s (limit %s)", floe_errstr(c), v);
    ck_assert_int_eq(floe_find(c, "g", keys, B, res, NULL, 0, NULL), FLOE_OK); /* the refused call: none of it */
    for (size_t i = 0; i < B; i++)
        ck_assert_msg(res[i] == FLOE_ABSENT, "key %llu of the refused insert is stored", (unsigned long long)keys[i]);
    for (uint64_t k0 = 0; k0 < stored; k0 += B) { /* every key of the calls answered OK is there */
        for (size_t i = 0; i < B; i++)
            keys[i] = k0 + i;
        ck_assert_int_eq(floe_find(c, "g", keys, B, res, NULL, 0, NULL), FLOE_OK);
        for (size_t i = 0; i < B; i++)
            ck_assert_int_eq(res[i], FLOE_PRESENT);
    }
    floe_table_info t;
    ck_assert_int_eq(floe_stats(c, "g", &t), FLOE_OK);
    const uint64_t held = t.keys;

    ck_assert_int_eq(floe_config_set(c, "maxmemory", "1M"), FLOE_OK); /* below what floed holds */
    usleep(200000);
    const uint64_t fresh[2] = {1ull << 39, (1ull << 39) + 1};
    ck_assert_int_eq(floe_insert(c, "g", fresh, 2, res, NULL), FLOE_ERR_NO_MEMORY);
    floe_table_def h = {.name = "h", .kind = FLOE_TABLE_SET, .key_bits = 20};
    ck_assert_int_eq(floe_create(c, &h), FLOE_ERR_NO_MEMORY);
    ck_assert_int_eq(floe_find(c, "g", fresh, 2, res, NULL, 0, NULL), FLOE_OK); /* reads go on */
    ck_assert(res[0] == FLOE_ABSENT && res[1] == FLOE_ABSENT);                  /* nothing was written */
    ck_assert_int_eq(floe_stats(c, "g", &t), FLOE_OK);
    ck_assert_uint_eq(t.keys, held);
    ck_assert_int_eq(floe_erase(c, "g", keys, 1, res, NULL), FLOE_OK); /* erases too */
    ck_assert_int_eq(floe_config_set(c, "maxmemory", "0"), FLOE_OK);
    usleep(100000);
    ck_assert_int_eq(floe_insert(c, "g", fresh, 2, res, NULL), FLOE_OK);
    ck_assert_int_eq(res[0], FLOE_INSERTED);
    floe_close(c);
    ck_assert(log_has(&d, "is at its maxmemory", 2000));
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* The most device memory in use on one of d's GPUs (0 without any). */
static uint64_t gpu_in_use(floe *c)
{
    floe_server_stats *s;
    ck_assert_int_eq(floe_server_stats_get(c, &s), FLOE_OK);
    uint64_t most = 0;
    for (size_t i = 0; i < s->n_gpus; i++)
        if (s->gpus[i].memory_total - s->gpus[i].memory_free > most)
            most = s->gpus[i].memory_total - s->gpus[i].memory_free;
    floe_server_stats_free(s);
    return most;
}

/* maxmemory-gpu: while a GPU has that much in use, writes to GPU tables and
 * creates of GPU tables are refused (ERR_NO_MEMORY) and change nothing, a
 * CPU table's writes and every read go on; a growing GPU table stops
 * growing at the limit, the keys that needed the room answering FULL and
 * every key answered INSERTED stored; a growing GPU TREE's insert that
 * would grow it past the limit is refused whole (ERR_NO_MEMORY), every
 * vector of the calls before it stored and none of it, and an ORDERED
 * table's likewise; and an exploring table whose open set (on its GPU)
 * has no room answers the insert that found new states with ERR_FULL, its
 * open set unchanged.  Without a GPU the
 * setting is there (config, info, /metrics) and touches no CPU table. */
START_TEST(maxmemory_gpu_refuses_gpu_writes)
{
    daemon_proc d;
    daemon_start_logged(&d, NULL);
    floe *c = connect_ok(&d);
    const bool gpu = strcmp(expected_backend(), "gpu") == 0;
    floe_table_def cpu = {.name = "cc", .kind = FLOE_TABLE_SET, .key_bits = 40, .grow = 1, .backend = "cpu"};
    ck_assert_int_eq(floe_create(c, &cpu), FLOE_OK);
    floe_table_def gt = {.name = "gg", .kind = FLOE_TABLE_SET, .key_bits = 40, .grow = 1, .backend = "gpu"};
    if (gpu)
        ck_assert_int_eq(floe_create(c, &gt), FLOE_OK);
    ck_assert_int_eq(floe_config_set(c, "maxmemory-gpu", "1"), FLOE_OK); /* below anything a GPU holds */
    usleep(200000);
    floe_server_stats *s;
    ck_assert_int_eq(floe_server_stats_get(c, &s), FLOE_OK);
    ck_assert_uint_eq(s->maxmemory_gpu, 1);
    floe_server_stats_free(s);
    uint64_t k[2] = {5, 6};
    uint8_t r[2];
    ck_assert_int_eq(floe_insert(c, "cc", k, 2, r, NULL), FLOE_OK); /* a CPU table's writes go on */
    ck_assert_int_eq(r[0], FLOE_INSERTED);
    if (!gpu) {
        floe_close(c);
        ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
        return;
    }
    ck_assert_int_eq(floe_insert(c, "gg", k, 2, r, NULL), FLOE_ERR_NO_MEMORY);
    ck_assert_msg(strstr(floe_errstr(c), "maxmemory-gpu"), "%s", floe_errstr(c));
    floe_table_def g2 = {.name = "g2", .kind = FLOE_TABLE_SET, .key_bits = 40, .backend = "gpu"};
    ck_assert_int_eq(floe_create(c, &g2), FLOE_ERR_NO_MEMORY);
    ck_assert_int_eq(floe_find(c, "gg", k, 2, r, NULL, 0, NULL), FLOE_OK); /* reads go on; nothing was written */
    ck_assert(r[0] == FLOE_ABSENT && r[1] == FLOE_ABSENT);
    /* room for a few growths: the table stops at the limit */
    char v[32];
    snprintf(v, sizeof v, "%llu", (unsigned long long)(gpu_in_use(c) + (256u << 20)));
    ck_assert_int_eq(floe_config_set(c, "maxmemory-gpu", v), FLOE_OK);
    usleep(200000);
    enum { B = 1 << 22 }; /* 32 MiB of keys a request: below max-frame */
    uint64_t *keys = malloc(B * 8);
    uint8_t *res = malloc(B);
    uint64_t inserted = 0, full = 0, next = 0;
    int st = FLOE_OK;
    for (int round = 0; round < 128 && !full && st == FLOE_OK; round++, next += B) {
        for (size_t i = 0; i < B; i++)
            keys[i] = next + i;
        st = floe_insert(c, "gg", keys, B, res, NULL);
        for (size_t i = 0; st == FLOE_OK && i < B; i++) {
            inserted += res[i] == FLOE_INSERTED;
            full += res[i] == FLOE_FULL;
        }
    }
    fprintf(stderr, "maxmemory-gpu: %llu keys inserted, %llu answered FULL, the last insert %s\n",
            (unsigned long long)inserted, (unsigned long long)full, floe_strerror(st));
    /* either the growth was refused (FULL answers) or floed saw the limit first (ERR_NO_MEMORY) */
    ck_assert_msg(full > 0 || st == FLOE_ERR_NO_MEMORY, "%s: %s", floe_strerror(st), floe_errstr(c));
    ck_assert_msg(inserted > B, "the first insert under the limit: %llu", (unsigned long long)inserted);
    floe_table_info t;
    ck_assert_int_eq(floe_stats(c, "gg", &t), FLOE_OK);
    ck_assert_uint_eq(t.keys, inserted); /* every key answered INSERTED is stored, no other */
    ck_assert_int_eq(floe_config_set(c, "maxmemory-gpu", "0"), FLOE_OK);
    usleep(100000);
    const uint64_t fresh[1] = {1ull << 39};
    ck_assert_int_eq(floe_insert(c, "gg", fresh, 1, r, NULL), FLOE_OK);
    ck_assert_int_eq(r[0], FLOE_INSERTED);
    free(keys);
    free(res);

    /* a growing TREE: refused whole at the growth the limit does not allow (by its own check, not at
     * the door: gg dropped, no GPU is near the limit but by the TREE's growth) */
    ck_assert_int_eq(floe_drop(c, "gg"), FLOE_OK);
    enum { W = 8, V = 1 << 18 };
    floe_table_def tt = {.name = "tt", .kind = FLOE_TABLE_TREE, .words = W, .grow = 1, .backend = "gpu"};
    ck_assert_int_eq(floe_create(c, &tt), FLOE_OK);
    snprintf(v, sizeof v, "%llu", (unsigned long long)(gpu_in_use(c) + (128u << 20)));
    ck_assert_int_eq(floe_config_set(c, "maxmemory-gpu", v), FLOE_OK);
    usleep(200000);
    uint32_t *vec = malloc((size_t)V * W * 4);
    uint8_t *vres = malloc(V);
    ck_assert(vec && vres);
    uint64_t stored = 0, rng = 12345;
    st = FLOE_OK;
    for (int round = 0; round < 200 && st == FLOE_OK; round++) {
        for (size_t i = 0; i < (size_t)V * W; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            vec[i] = (uint32_t)(rng >> 33);
        }
        st = floe_insert_vectors(c, "tt", vec, V, W, vres, NULL, NULL);
        for (size_t i = 0; st == FLOE_OK && i < V; i++)
            ck_assert_int_eq(vres[i], FLOE_INSERTED); /* random vectors: new, and no growth refused halfway */
        if (st == FLOE_OK)
            stored += V;
    }
    fprintf(stderr, "maxmemory-gpu: a TREE took %llu vectors, then %s: %s\n", (unsigned long long)stored,
            floe_strerror(st), floe_errstr(c));
    ck_assert_msg(st == FLOE_ERR_NO_MEMORY && strstr(floe_errstr(c), "would grow it") &&
                      strstr(floe_errstr(c), "maxmemory-gpu"),
                  "%s: %s", floe_strerror(st), floe_errstr(c));
    ck_assert_int_eq(floe_find_vectors(c, "tt", vec, V, W, vres, NULL, NULL), FLOE_OK); /* none of the refused call */
    for (size_t i = 0; i < V; i++)
        ck_assert_int_eq(vres[i], FLOE_ABSENT);
    ck_assert_int_eq(floe_stats(c, "tt", &t), FLOE_OK);
    ck_assert_uint_eq(t.keys, stored); /* every vector of the calls before */
    ck_assert_int_eq(floe_config_set(c, "maxmemory-gpu", "0"), FLOE_OK);
    free(vec);
    free(vres);

    /* an ORDERED table: its pool of chunks does not grow past the limit, the insert that needed
     * it refused whole by the engine (not at the door: the GPU stays under the limit) */
    ck_assert_int_eq(floe_drop(c, "tt"), FLOE_OK);
    enum { K = 1 << 20 };
    floe_table_def ot = {.name = "oo", .kind = FLOE_TABLE_ORDERED, .key_bits = 64, .backend = "gpu"};
    ck_assert_int_eq(floe_create(c, &ot), FLOE_OK);
    snprintf(v, sizeof v, "%llu", (unsigned long long)(gpu_in_use(c) + (256u << 20)));
    ck_assert_int_eq(floe_config_set(c, "maxmemory-gpu", v), FLOE_OK);
    usleep(200000);
    keys = malloc((size_t)K * 8);
    res = malloc(K);
    ck_assert(keys && res);
    stored = 0;
    st = FLOE_OK;
    for (int round = 0; round < 400 && st == FLOE_OK; round++) {
        for (size_t i = 0; i < K; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            keys[i] = rng ^ (rng >> 29);
        }
        st = floe_insert(c, "oo", keys, K, res, NULL);
        for (size_t i = 0; st == FLOE_OK && i < K; i++)
            ck_assert_int_eq(res[i], FLOE_INSERTED); /* random 64-bit keys: new */
        if (st == FLOE_OK)
            stored += K;
    }
    fprintf(stderr, "maxmemory-gpu: an ORDERED table took %llu keys, then %s: %s\n", (unsigned long long)stored,
            floe_strerror(st), floe_errstr(c));
    ck_assert_msg(st == FLOE_ERR_NO_MEMORY && strstr(floe_errstr(c), "chunks would grow") &&
                      strstr(floe_errstr(c), "maxmemory-gpu"),
                  "%s: %s", floe_strerror(st), floe_errstr(c));
    ck_assert_uint_gt(stored, 0);
    ck_assert_int_eq(floe_find(c, "oo", keys, K, res, NULL, 0, NULL), FLOE_OK); /* none of the refused call */
    for (size_t i = 0; i < K; i++)
        ck_assert_int_eq(res[i], FLOE_ABSENT);
    ck_assert_int_eq(floe_stats(c, "oo", &t), FLOE_OK);
    ck_assert_uint_eq(t.keys, stored); /* every key of the calls before */
    ck_assert_int_eq(floe_config_set(c, "maxmemory-gpu", "0"), FLOE_OK);
    usleep(100000);
    ck_assert_int_eq(floe_insert(c, "oo", keys, K, res, NULL), FLOE_OK); /* the limit gone, it grows again */
    ck_assert_int_eq(res[0], FLOE_INSERTED);

    /* an exploring table whose open set's memory on the GPU runs out: its first slab used up, and
     * not even the next chunk's piece (1.1 MiB) under the limit */
    ck_assert_int_eq(floe_drop(c, "oo"), FLOE_OK);
    enum { E = 1 << 22 }; /* twice the states the first slab (32 MiB) holds */
    floe_table_def et = {
        .name = "ex", .kind = FLOE_TABLE_SET, .key_bits = 64, .capacity = 2 * E, .explore = 1, .backend = "gpu"};
    ck_assert_int_eq(floe_create(c, &et), FLOE_OK);
    uint64_t *ek = malloc((size_t)E * 8);
    uint8_t *er = malloc(E);
    ck_assert(ek && er);
    for (size_t i = 0; i < E; i++)
        ek[i] = i * 0x9E3779B97F4A7C15ull;
    ck_assert_int_eq(floe_insert_explore(c, "ex", ek, 8 * 1000, 1000, NULL, 0, NULL, 0, 0, er, NULL), FLOE_OK);
    uint64_t used = gpu_in_use(c), was; /* once the dropped tables' memory is back (the reaper frees it) */
    do {
        was = used;
        usleep(300000);
        used = gpu_in_use(c);
    } while (used != was);
    snprintf(v, sizeof v, "%llu", (unsigned long long)(used + (512u << 10)));
    ck_assert_int_eq(floe_config_set(c, "maxmemory-gpu", v), FLOE_OK);
    usleep(200000);
    st = floe_insert_explore(c, "ex", ek + 1000, 8 * (size_t)(E - 1000), E - 1000, NULL, 0, NULL, 0, 0, er, NULL);
    ck_assert_msg(st == FLOE_ERR_FULL && strstr(floe_errstr(c), "could not join the open set") &&
                      strstr(floe_errstr(c), "no room on GPU"),
                  "%s: %s (GPU memory in use %llu, now %llu)", floe_strerror(st), floe_errstr(c),
                  (unsigned long long)used, (unsigned long long)gpu_in_use(c));
    ck_assert_int_eq(floe_stats(c, "ex", &t), FLOE_OK); /* none of them joined */
    ck_assert(t.explore.on && t.explore.states == 1000 && strncmp(t.explore.memory, "GPU ", 4) == 0);
    ck_assert_int_eq(floe_config_set(c, "maxmemory-gpu", "0"), FLOE_OK);
    usleep(100000);
    for (size_t i = 0; i < 1000; i++)
        ek[i] = (i + E) * 0x9E3779B97F4A7C15ull;
    ck_assert_int_eq(floe_insert_explore(c, "ex", ek, 8 * 1000, 1000, NULL, 0, NULL, 0, 0, er, NULL), FLOE_OK);
    ck_assert_int_eq(floe_stats(c, "ex", &t), FLOE_OK);
    ck_assert_uint_eq(t.explore.states, 2000);
    free(ek);
    free(er);
    free(keys);
    free(res);
    floe_close(c);
    ck_assert(log_has(&d, "maxmemory-gpu", 2000));
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

Suite *lifecycle_suite(void)
{
    Suite *s = suite_create("lifecycle");
    TCase *tc = tcase_create("lifecycle");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, client_killed_mid_request);
    tcase_add_test(tc, sigterm_with_requests_in_flight);
    tcase_add_test(tc, large_frame_half_sent_at_stop);
    tcase_add_test(tc, tables_survive_restart);
    tcase_add_test(tc, config_file_and_flags);
    tcase_add_test(tc, config_get_set_rewrite);
    tcase_add_test(tc, maxmemory_refuses_writes);
    tcase_add_test(tc, maxmemory_gpu_refuses_gpu_writes);
    tcase_add_test(tc, shutdown_by_a_client);
    suite_add_tcase(s, tc);
    return s;
}
