/*
 * test_badinput.c - every bad input gets a clear error, changes nothing,
 * and leaves the daemon serving everyone else; libfloe takes a status that
 * is no floe status for a protocol error.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <signal.h>
#include <stdio.h>

#include "floe_internal.h"
#include "harness.h"

static uint64_t keys_in(floe *c, const char *table)
{
    floe_table_info info;
    ck_assert_int_eq(floe_stats(c, table, &info), FLOE_OK);
    return info.keys;
}

static Floe__V1__Response *insert_raw(int fd, uint64_t id, const char *table, const void *keys, size_t klen,
                                      const void *values, size_t vlen)
{
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Insert in = FLOE__V1__INSERT__INIT;
    in.table = (char *)table;
    in.keys.data = (uint8_t *)keys;
    in.keys.len = klen;
    in.values.data = (uint8_t *)values;
    in.values.len = vlen;
    req.id = id;
    req.op_case = FLOE__V1__REQUEST__OP_INSERT;
    req.insert = &in;
    raw_send_request(fd, &req);
    return raw_read_response(fd, 5000);
}

static void expect(Floe__V1__Response *r, uint64_t id, int status, const char *words)
{
    ck_assert_ptr_nonnull(r);
    ck_assert_uint_eq(r->id, id);
    ck_assert_int_eq(r->status, status);
    ck_assert_msg(strstr(r->error, words) != NULL, "error '%s' does not mention '%s'", r->error, words);
    floe__v1__response__free_unpacked(r, NULL);
}

START_TEST(bad_requests_change_nothing)
{
    daemon_proc d;
    daemon_start(&d, NULL);
    floe *c = connect_ok(&d);
    floe_table_def sd = {.name = "s", .kind = FLOE_TABLE_SET, .key_bits = 20, .capacity = 1000};
    floe_table_def md = {.name = "m", .kind = FLOE_TABLE_MAP, .key_bits = 20, .value_bytes = 4, .capacity = 1000};
    ck_assert_int_eq(floe_create(c, &sd), FLOE_OK);
    ck_assert_int_eq(floe_create(c, &md), FLOE_OK);
    uint64_t seed[3] = {1, 2, 3};
    ck_assert_int_eq(floe_insert(c, "s", seed, 3, NULL, NULL), FLOE_OK);

    int fd = raw_connect(d.port);
    uint64_t good_and_bad[3] = {10, 11, 1u << 20};
    expect(insert_raw(fd, 1, "s", good_and_bad, 24, NULL, 0), 1, FLOE_ERR_INVALID, "key_bits");
    expect(insert_raw(fd, 2, "s", good_and_bad, 20, NULL, 0), 2, FLOE_ERR_INVALID, "multiple of 8");
    expect(insert_raw(fd, 3, "nosuch", good_and_bad, 16, NULL, 0), 3, FLOE_ERR_NO_TABLE, "nosuch");
    uint32_t v[2] = {5, 6};
    expect(insert_raw(fd, 4, "s", good_and_bad, 16, v, 8), 4, FLOE_ERR_INVALID, "values");
    expect(insert_raw(fd, 5, "m", good_and_bad, 16, v, 7), 5, FLOE_ERR_INVALID, "bytes of values");
    expect(insert_raw(fd, 6, "m", good_and_bad, 16, NULL, 0), 6, FLOE_ERR_INVALID, "bytes of values");
    /* a request with no operation */
    Floe__V1__Request empty = FLOE__V1__REQUEST__INIT;
    empty.id = 7;
    raw_send_request(fd, &empty);
    expect(raw_read_response(fd, 5000), 7, FLOE_ERR_INVALID, "operation");
    /* bytes that are not a Request: answered, and the connection stays */
    unsigned char junk[] = {0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0xff};
    raw_send(fd, junk, sizeof junk);
    expect(raw_read_response(fd, 5000), 0, FLOE_ERR_INVALID, "does not parse");
    expect(insert_raw(fd, 8, "nosuch", seed, 8, NULL, 0), 8, FLOE_ERR_NO_TABLE, "nosuch");
    close(fd);

    /* bad specs */
    floe_table_def bad = {.name = "x", .kind = FLOE_TABLE_SET, .key_bits = 65};
    ck_assert_int_eq(floe_create(c, &bad), FLOE_ERR_INVALID);
    ck_assert(strstr(floe_errstr(c), "key_bits") != NULL);
    bad = (floe_table_def){.name = "bad name", .kind = FLOE_TABLE_SET};
    ck_assert_int_eq(floe_create(c, &bad), FLOE_ERR_INVALID);
    bad = (floe_table_def){.name = "x", .kind = FLOE_TABLE_MAP, .value_bytes = 3};
    ck_assert_int_eq(floe_create(c, &bad), FLOE_ERR_INVALID);
    bad = (floe_table_def){.name = "x", .kind = FLOE_TABLE_STATIC, .value_bytes = 2};
    ck_assert_int_eq(floe_create(c, &bad), FLOE_ERR_INVALID);
    ck_assert(strstr(floe_errstr(c), "STATIC table's value_bytes") != NULL);
    bad = (floe_table_def){.name = "x", .kind = 6};
    ck_assert_int_eq(floe_create(c, &bad), FLOE_ERR_INVALID);
    ck_assert(strstr(floe_errstr(c), "kind") != NULL);
    bad = (floe_table_def){.name = "x", .kind = FLOE_TABLE_TREE}; /* a TREE without words */
    ck_assert_int_eq(floe_create(c, &bad), FLOE_ERR_INVALID);
    ck_assert(strstr(floe_errstr(c), "words") != NULL);
    if (strcmp(expected_backend(), "gpu") != 0) { /* no GPU here: a clear refusal */
        bad = (floe_table_def){.name = "x", .kind = FLOE_TABLE_SET, .backend = "gpu"};
        ck_assert_int_eq(floe_create(c, &bad), FLOE_ERR_UNSUPPORTED);
        ck_assert_msg(strstr(floe_errstr(c), "GPU") != NULL, "message: %s", floe_errstr(c));
    }

    /* nothing changed, and the server still serves */
    ck_assert_uint_eq(keys_in(c, "s"), 3);
    ck_assert_uint_eq(keys_in(c, "m"), 0);
    floe_table_info *all;
    size_t n;
    ck_assert_int_eq(floe_tables(c, &all, &n), FLOE_OK);
    ck_assert_uint_eq(n, 2);
    free(all);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(bad_frames_close_the_connection)
{
    const char *flags[] = {"--max-frame", "4096", NULL};
    daemon_proc d;
    daemon_start(&d, flags);
    /* length 0 */
    int fd = raw_connect(d.port);
    unsigned char zero[4] = {0, 0, 0, 0};
    raw_send(fd, zero, 4);
    expect(raw_read_response(fd, 5000), 0, FLOE_ERR_INVALID, "length 0");
    ck_assert(raw_closed(fd, 5000));
    close(fd);
    /* above max-frame */
    fd = raw_connect(d.port);
    unsigned char big[4] = {0, 1, 0, 0};
    raw_send(fd, big, 4);
    expect(raw_read_response(fd, 5000), 0, FLOE_ERR_TOO_LARGE, "max-frame");
    ck_assert(raw_closed(fd, 5000));
    close(fd);
    /* libfloe refuses to send a request above the server's max-frame */
    floe *c = connect_ok(&d);
    static uint64_t many[1000];
    floe_table_def sd = {.name = "s", .kind = FLOE_TABLE_SET};
    ck_assert_int_eq(floe_create(c, &sd), FLOE_OK);
    ck_assert_int_eq(floe_insert(c, "s", many, 1000, NULL, NULL), FLOE_ERR_TOO_LARGE);
    ck_assert_int_eq(floe_ping(c), FLOE_OK); /* the connection is still good */
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(limits)
{
    const char *flags[] = {"--max-tables", "2", "--max-connections", "3", NULL};
    daemon_proc d;
    daemon_start(&d, flags);
    floe *c = connect_ok(&d);
    floe_table_def t = {.name = "a", .kind = FLOE_TABLE_SET, .capacity = 10};
    ck_assert_int_eq(floe_create(c, &t), FLOE_OK);
    t.name = "b";
    ck_assert_int_eq(floe_create(c, &t), FLOE_OK);
    t.name = "c";
    ck_assert_int_eq(floe_create(c, &t), FLOE_ERR_BUSY);
    ck_assert(strstr(floe_errstr(c), "max-tables") != NULL);
    floe *c2 = connect_ok(&d), *c3 = connect_ok(&d), *c4;
    ck_assert_int_ne(harness_connect(&d, NULL, &c4), FLOE_OK);
    floe_close(c4);
    floe_close(c3);
    ck_assert_int_eq(floe_ping(c2), FLOE_OK);
    floe_close(c2);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(token_required)
{
    const char *flags[] = {"--token", "s3cret", NULL};
    daemon_proc d;
    daemon_start(&d, flags);
    floe *c;
    ck_assert_int_eq(harness_connect(&d, "wrong", &c), FLOE_ERR_UNAUTHENTICATED);
    floe_close(c);
    ck_assert_int_eq(harness_connect(&d, NULL, &c), FLOE_ERR_UNAUTHENTICATED);
    floe_close(c);
    /* a request before hello: refused and closed */
    int fd = raw_connect(d.port);
    Floe__V1__Request req = FLOE__V1__REQUEST__INIT;
    Floe__V1__Ping ping = FLOE__V1__PING__INIT;
    req.id = 9;
    req.op_case = FLOE__V1__REQUEST__OP_PING;
    req.ping = &ping;
    raw_send_request(fd, &req);
    expect(raw_read_response(fd, 5000), 9, FLOE_ERR_UNAUTHENTICATED, "token");
    ck_assert(raw_closed(fd, 5000));
    close(fd);
    daemon_proc with_token = d; /* the token in the URI */
    snprintf(with_token.uri, sizeof with_token.uri, "%.100s?token=s3cret", d.uri);
    ck_assert_int_eq(harness_connect(&with_token, NULL, &c), FLOE_OK);
    ck_assert_int_eq(floe_ping(c), FLOE_OK);
    floe_close(c);
    ck_assert_int_eq(daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* A response frame of r on fd. */
static void send_response(int fd, const Floe__V1__Response *r)
{
    unsigned char buf[256];
    size_t len = floe__v1__response__pack(r, buf + 4);
    buf[0] = buf[1] = 0;
    buf[2] = (unsigned char)(len >> 8);
    buf[3] = (unsigned char)len;
    ck_assert_int_eq(write(fd, buf, 4 + len), (ssize_t)(4 + len));
}

/* libfloe against a server that answers with statuses no floed sends. */
START_TEST(server_status_out_of_range)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
    Floe__V1__HelloReply h = FLOE__V1__HELLO_REPLY__INIT;
    h.version = 1;
    r.id = 1;
    r.body_case = FLOE__V1__RESPONSE__BODY_HELLO;
    r.hello = &h;
    send_response(sv[1], &r);
    floe *c;
    ck_assert_int_eq(floe__connect_fd(sv[0], NULL, &c), FLOE_OK);
    /* -1 would read as "not done yet", 100 as FLOE_ERR_IO: both are protocol errors */
    const int bad[3] = {-1, FLOE_ERR_IO, 12345};
    for (int i = 0; i < 3; i++) {
        Floe__V1__Response e = FLOE__V1__RESPONSE__INIT;
        e.id = 2 + (uint64_t)i;
        e.status = (Floe__V1__Status)bad[i];
        send_response(sv[1], &e);
        floe_call *call = floe_send_ping(c, NULL, NULL);
        ck_assert_int_eq(floe_wait(c, call), FLOE_ERR_PROTOCOL);
        ck_assert_int_eq(floe_call_status(call), FLOE_ERR_PROTOCOL);
        ck_assert_msg(strstr(floe_call_error(call), "no floe status"), "error: %s", floe_call_error(call));
        floe_call_free(call);
    }
    Floe__V1__Response ok = FLOE__V1__RESPONSE__INIT;
    ok.id = 5;
    ok.status = FLOE__V1__STATUS__ERR_FULL; /* a real status still comes through */
    send_response(sv[1], &ok);
    ck_assert_int_eq(floe_ping(c), FLOE_ERR_FULL);
    floe_close(c);
    close(sv[1]);
}
END_TEST

Suite *badinput_suite(void)
{
    Suite *s = suite_create("badinput");
    TCase *tc = tcase_create("badinput");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, bad_requests_change_nothing);
    tcase_add_test(tc, bad_frames_close_the_connection);
    tcase_add_test(tc, limits);
    tcase_add_test(tc, token_required);
    tcase_add_test(tc, server_status_out_of_range);
    suite_add_tcase(s, tc);
    return s;
}
