/*
 * test_resp_wire.c - the Redis protocol's bytes (daemon/resp_wire.c)
 * against hiredis, the independent side: commands that hiredis formats
 * (redisFormatCommandArgv), cut anywhere and glued together, parse to the
 * same arguments; replies that resp_wire writes read back through hiredis's
 * reader as written; bad input is refused with Redis's words; the integer
 * rules at their edges.
 */
#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

#include "resp_wire.h"
#include "testutil.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Parses the one command of in (len) whole: rc, and its arguments in a. */
static int parse_all(const char *in, size_t len, resp_args *a, size_t *used)
{
    char err[128];
    return resp_parse((const unsigned char *)in, len, 1u << 20, a, used, err, sizeof err);
}

START_TEST(commands_formatted_by_hiredis)
{
    resp_args a = {0};
    for (int round = 0; round < 300; round++) {
        /* a few commands of random arguments, bytes of every value (CR, LF, NUL) among them */
        enum { CMDS = 4, ARGS = 6 };
        char *argv[CMDS][ARGS];
        size_t argl[CMDS][ARGS], argc[CMDS];
        char *wire = NULL;
        size_t wlen = 0;
        for (int c = 0; c < CMDS; c++) {
            argc[c] = 1 + next() % ARGS;
            for (size_t i = 0; i < argc[c]; i++) {
                argl[c][i] = next() % 20;
                argv[c][i] = malloc(argl[c][i] + 1);
                for (size_t k = 0; k < argl[c][i]; k++)
                    argv[c][i][k] = next() % 4 == 0 ? "\r\n\0$"[next() % 4] : (char)('a' + next() % 26);
            }
            char *cmd;
            const long n = redisFormatCommandArgv(&cmd, (int)argc[c], (const char **)argv[c], argl[c]);
            ck_assert_int_gt(n, 0);
            wire = realloc(wire, wlen + (size_t)n);
            memcpy(wire + wlen, cmd, (size_t)n);
            wlen += (size_t)n;
            redisFreeCommand(cmd);
        }
        /* every prefix short of the first command's end is "not whole yet" */
        size_t used, at = 0;
        ck_assert_int_eq(parse_all(wire, wlen, &a, &used), 1);
        const size_t first = used;
        for (size_t cut = 0; cut < first; cut += 1 + next() % 7)
            ck_assert_int_eq(parse_all(wire, cut, &a, &used), 0);
        for (int c = 0; c < CMDS; c++) {
            ck_assert_int_eq(parse_all(wire + at, wlen - at, &a, &used), 1);
            ck_assert_uint_eq(a.argc, argc[c]);
            for (size_t i = 0; i < argc[c]; i++) {
                ck_assert_uint_eq(a.len[i], argl[c][i]);
                ck_assert(memcmp(a.v[i], argv[c][i], argl[c][i]) == 0);
                free(argv[c][i]);
            }
            at += used;
        }
        ck_assert_uint_eq(at, wlen);
        free(wire);
    }
    free(a.v);
    free(a.len);
}
END_TEST

START_TEST(inline_commands)
{
    resp_args a = {0};
    size_t used;
    const char *in = "  SADD\ts  1 2  \r\nPING\n\r\n";
    ck_assert_int_eq(parse_all(in, strlen(in), &a, &used), 1);
    ck_assert_uint_eq(a.argc, 4);
    ck_assert(resp_arg_is(&a, 0, "sadd") && resp_arg_is(&a, 1, "s") && resp_arg_is(&a, 3, "2"));
    ck_assert_uint_eq(used, 17);
    ck_assert_int_eq(parse_all(in + used, strlen(in) - used, &a, &used), 1);
    ck_assert(a.argc == 1 && resp_arg_is(&a, 0, "PING"));
    ck_assert_int_eq(parse_all("\r\n", 2, &a, &used), 1);
    ck_assert_uint_eq(a.argc, 0); /* an empty line: skipped */
    ck_assert_int_eq(parse_all("PING", 4, &a, &used), 0);
    char buf[16];
    ck_assert_int_eq(parse_all("ECHO hello\r\n", 12, &a, &used), 1);
    ck_assert(resp_arg_str(&a, 1, buf, sizeof buf) && strcmp(buf, "hello") == 0);
    ck_assert(!resp_arg_str(&a, 1, buf, 5)); /* does not fit */
    free(a.v);
    free(a.len);
}
END_TEST

START_TEST(bad_input_is_refused)
{
    static const struct {
        const char *in;
        const char *why;
    } bad[] = {
        {"*x\r\n", "Protocol error: invalid multibulk length"},
        {"*1048577\r\n", "Protocol error: invalid multibulk length"},
        {"*123456789012345678901234567890123\r\n", "Protocol error: invalid multibulk length"},
        {"*1\r\n+OK\r\n", "Protocol error: expected '$', got '+'"},
        {"*1\r\n$-1\r\n", "Protocol error: invalid bulk length"},
        {"*1\r\n$x\r\n", "Protocol error: invalid bulk length"},
        {"*1\r\n$2\r\nabc\r\n", "Protocol error: a bulk string does not end with CRLF"},
        {"*1\r\n$2000000\r\n", "Protocol error: invalid bulk length"}, /* past max_bulk */
    };
    resp_args a = {0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[128] = "";
        size_t used;
        ck_assert_int_eq(resp_parse((const unsigned char *)bad[i].in, strlen(bad[i].in), 1u << 20, &a, &used, err,
                                    sizeof err),
                         -1);
        ck_assert_msg(strcmp(err, bad[i].why) == 0, "%s: %s", bad[i].in, err);
    }
    static char line[70000]; /* an inline command past 64 KiB with no end of line */
    memset(line, 'a', sizeof line);
    char err[128] = "";
    size_t used;
    ck_assert_int_eq(resp_parse((const unsigned char *)line, sizeof line, 1u << 20, &a, &used, err, sizeof err), -1);
    ck_assert_str_eq(err, "Protocol error: too big inline request");
    free(a.v);
    free(a.len);
}
END_TEST

/* What hiredis's reader makes of b: one reply, whole. */
static redisReply *read_back(const sbuf *b)
{
    redisReader *rd = redisReaderCreate();
    ck_assert_int_eq(redisReaderFeed(rd, b->p, b->len), REDIS_OK);
    void *reply = NULL;
    ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_OK);
    ck_assert_ptr_nonnull(reply);
    void *more = NULL;
    ck_assert_int_eq(redisReaderGetReply(rd, &more), REDIS_OK);
    ck_assert_ptr_null(more); /* nothing after it */
    redisReaderFree(rd);
    return reply;
}

START_TEST(replies_read_by_hiredis)
{
    sbuf b = {0};
    sb_array(&b, 5);
    sb_int(&b, -42);
    sb_bulk(&b, "a\r\nb\0c", 6);
    sb_nil(&b, 2);
    sb_map(&b, 1, 2); /* RESP2: an array of two */
    sb_str(&b, "key");
    sb_str(&b, "");
    sb_error(&b, "WRONGTYPE", "two\r\nlines");
    ck_assert(!b.oom);
    redisReply *r = read_back(&b);
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    ck_assert_uint_eq(r->elements, 5);
    ck_assert(r->element[0]->type == REDIS_REPLY_INTEGER && r->element[0]->integer == -42);
    ck_assert(r->element[1]->type == REDIS_REPLY_STRING && r->element[1]->len == 6 &&
              memcmp(r->element[1]->str, "a\r\nb\0c", 6) == 0);
    ck_assert_int_eq(r->element[2]->type, REDIS_REPLY_NIL);
    ck_assert(r->element[3]->type == REDIS_REPLY_ARRAY && r->element[3]->elements == 2);
    ck_assert_str_eq(r->element[3]->element[0]->str, "key");
    ck_assert_uint_eq(r->element[3]->element[1]->len, 0);
    ck_assert(r->element[4]->type == REDIS_REPLY_ERROR);
    ck_assert_str_eq(r->element[4]->str, "WRONGTYPE two  lines");
    freeReplyObject(r);
    free(b.p);
    /* RESP3's own types, which this hiredis does not read: the bytes */
    sbuf c = {0};
    sb_map(&c, 1, 3);
    sb_nil(&c, 3);
    sb_printf(&c, "%s", "x");
    ck_assert(c.len == 8 && memcmp(c.p, "%1\r\n_\r\nx", 8) == 0);
    free(c.p);
}
END_TEST

START_TEST(integers_at_their_edges)
{
    uint64_t u;
    int64_t i;
#define U(s) resp_u64((const unsigned char *)(s), strlen(s), &u)
#define I(s) resp_i64((const unsigned char *)(s), strlen(s), &i)
    ck_assert(U("0") && u == 0);
    ck_assert(U("18446744073709551615") && u == UINT64_MAX);
    ck_assert(!U("18446744073709551616") && !U("") && !U("-1") && !U("+1") && !U("1a") && !U(" 1"));
    ck_assert(!U("000000000000000000001")); /* more digits than any 64-bit number has */
    ck_assert(I("-9223372036854775808") && i == INT64_MIN);
    ck_assert(I("9223372036854775807") && i == INT64_MAX);
    ck_assert(!I("9223372036854775808") && !I("-9223372036854775809") && !I("-") && !I("--1"));
    ck_assert(I("-0") && i == 0);
#undef U
#undef I
}
END_TEST

Suite *resp_wire_suite(void)
{
    Suite *s = suite_create("resp_wire");
    TCase *tc = tcase_create("resp_wire");
    tcase_add_test(tc, commands_formatted_by_hiredis);
    tcase_add_test(tc, inline_commands);
    tcase_add_test(tc, bad_input_is_refused);
    tcase_add_test(tc, replies_read_by_hiredis);
    tcase_add_test(tc, integers_at_their_edges);
    suite_add_tcase(s, tc);
    return s;
}
