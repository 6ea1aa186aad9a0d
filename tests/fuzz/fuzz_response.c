/*
 * fuzz_response.c - libFuzzer target: libfloe's response decoder
 * (client/conn.c: handle_frames, call completion; client/calls.c: what
 * each call makes of its answer), fed the input as if a server sent it.
 *
 * libfloe talks over one end of a socketpair (floe__connect_fd); this
 * thread plays the server on the other.  The input is read as frames (a
 * 4-byte big-endian length and that many bytes, cut at the input's end):
 * frame k answers the k-th call of a fixed sequence of blocking calls
 * (hello, insert, MAP insert with values, find, erase, TREE insert, find,
 * get_by_id, scans, stats, list, info, create, drop, snapshot, ping), the
 * k-th call having id k.  Each frame is written before its call, followed
 * by an empty OK response with the call's id, so that a call whose frame
 * does not answer it still ends.  What follows those frames is written as
 * it is to pipelined calls in flight, then the "server" closes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "floe.h"
#include "floe.pb-c.h"
#include "floe_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "fuzz_response: %s:%d: %s\n", __FILE__, __LINE__, #cond);                                  \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

#define MAX_FRAME (64u << 10) /* a step's frame fits in the socket's buffer */
#define N         3           /* keys, vectors or ids per call */
#define WORDS     4           /* the TREE's words */
#define LIMIT     16          /* scan limit */

typedef struct feed {
    const uint8_t *p;
    size_t left;
    int peer;
    uint64_t next_id;
} feed;

static void write_all(int fd, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    while (len > 0) {
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        CHECK(w > 0);
        p += w;
        len -= (size_t)w;
    }
}

/* Throws away what libfloe sent (its requests). */
static void drain(int fd)
{
    char buf[4096];
    while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0)
        ;
}

/* The next frame of the input, and an empty OK for the call about to be made. */
static void answer_next(feed *f)
{
    drain(f->peer);
    const uint64_t id = f->next_id++;
    if (f->left >= 4) {
        uint32_t len = (uint32_t)f->p[0] << 24 | (uint32_t)f->p[1] << 16 | (uint32_t)f->p[2] << 8 | f->p[3];
        if (len > f->left - 4)
            len = (uint32_t)(f->left - 4);
        if (len > MAX_FRAME)
            len = MAX_FRAME;
        const unsigned char hdr[4] = {(unsigned char)(len >> 24), (unsigned char)(len >> 16), (unsigned char)(len >> 8),
                                      (unsigned char)len};
        write_all(f->peer, hdr, 4);
        write_all(f->peer, f->p + 4, len);
        f->p += 4 + (size_t)len;
        f->left -= 4 + (size_t)len;
    } else {
        f->p += f->left;
        f->left = 0;
    }
    Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
    r.id = id;
    unsigned char buf[64];
    const size_t len = floe__v1__response__pack(&r, buf + 4);
    buf[0] = buf[1] = 0;
    buf[2] = (unsigned char)(len >> 8);
    buf[3] = (unsigned char)len;
    write_all(f->peer, buf, 4 + len);
}

static void on_done(floe *c, floe_call *call, void *arg)
{
    (void)c;
    int *count = arg;
    size_t n;
    floe_call_results(call, &n);
    floe_call_ids(call, &n);
    floe_call_values(call, &n);
    floe_call_vectors(call, &n);
    floe_counts k;
    floe_call_counts(call, &k);
    CHECK(floe_call_status(call) >= 0);
    (*count)++;
}

static void blocking_calls(floe *c, feed *f)
{
    const uint64_t keys[N] = {1, 2, 3};
    const uint64_t values[N] = {10, 20, 30};
    uint32_t vectors[N * WORDS] = {1, 2, 3, 4, 1, 2, 3, 5, 9, 9, 9, 9};
    uint8_t results[N];
    uint64_t ids[N] = {0}, old_values[N], scan_keys[LIMIT], scan_ids[LIMIT];
    uint32_t got_vectors[N * WORDS], scan_vectors[LIMIT * WORDS];
    unsigned char found_values[N * 4], scan_values[LIMIT * 8];
    floe_counts counts;
    size_t n;
    int done;

    answer_next(f);
    floe_insert(c, "s", keys, N, results, &counts);
    answer_next(f);
    floe_insert_values(c, "m", keys, values, N, 8, 1, results, old_values, &counts);
    answer_next(f);
    floe_find(c, "m", keys, N, results, found_values, 4, &counts);
    answer_next(f);
    floe_erase(c, "s", keys, N, results, &counts);
    answer_next(f);
    floe_insert_vectors(c, "t", vectors, N, WORDS, results, ids, &counts);
    answer_next(f);
    floe_find_vectors(c, "t", vectors, N, WORDS, results, ids, &counts);
    answer_next(f);
    floe_get_by_id(c, "t", ids, N, WORDS, results, got_vectors);

    floe_cursor cursor = {{0}, 0};
    answer_next(f);
    if (floe_scan(c, "s", &cursor, LIMIT, scan_keys, NULL, 0, &n, &done) == FLOE_OK)
        CHECK(n <= LIMIT);
    answer_next(f);
    if (floe_scan(c, "m", &cursor, LIMIT, scan_keys, scan_values, 8, &n, &done) == FLOE_OK)
        CHECK(n <= LIMIT);
    answer_next(f);
    if (floe_scan_vectors(c, "t", &cursor, LIMIT, WORDS, scan_ids, scan_vectors, &n, &done) == FLOE_OK)
        CHECK(n <= LIMIT);

    floe_table_info info;
    answer_next(f);
    floe_stats(c, "s", &info);
    floe_table_info *tables;
    answer_next(f);
    if (floe_tables(c, &tables, &n) == FLOE_OK)
        CHECK(tables != NULL);
    free(tables);
    floe_server_stats *ss;
    answer_next(f);
    if (floe_server_stats_get(c, &ss) == FLOE_OK)
        CHECK(ss && ss->ops && ss->errors && ss->tables);
    floe_server_stats_free(ss);

    floe_table_def def = {.name = "s", .kind = FLOE_TABLE_SET, .key_bits = 64};
    answer_next(f);
    floe_create(c, &def);
    answer_next(f);
    floe_drop(c, "s");
    answer_next(f);
    floe_snapshot(c, NULL);
    answer_next(f);
    floe_ping(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    feed f = {data, size, sv[1], 1};
    answer_next(&f); /* hello */
    floe *c;
    if (floe__connect_fd(sv[0], NULL, &c) == FLOE_OK)
        blocking_calls(c, &f);

    /* Pipelined calls, then the rest of the input as it is, then the close. */
    const uint64_t keys[N] = {1, 2, 3};
    const uint32_t vectors[N * WORDS] = {0};
    int completed = 0;
    floe_send_insert(c, "s", keys, N, NULL, 0, FLOE_WANT_IDS, on_done, &completed);
    floe_send_find(c, "m", keys, N, FLOE_WANT_VALUES, on_done, &completed);
    floe_send_insert_vectors(c, "t", vectors, N, WORDS, FLOE_WANT_IDS, on_done, &completed);
    floe_call *futures[3] = {floe_send_get_by_id(c, "t", keys, N, NULL, NULL),
                             floe_send_erase(c, "s", keys, N, NULL, NULL), floe_send_ping(c, NULL, NULL)};
    fcntl(f.peer, F_SETFL, O_NONBLOCK);
    while (f.left > 0) {
        ssize_t w = send(f.peer, f.p, f.left, MSG_NOSIGNAL);
        if (w > 0) {
            f.p += w;
            f.left -= (size_t)w;
        } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
            break; /* libfloe closed its end */
        }
        drain(f.peer);
        floe_poll(c, 1);
    }
    shutdown(f.peer, SHUT_WR);
    floe_wait_all(c);
    CHECK(floe_inflight(c) == 0 && completed == 3);
    for (int i = 0; i < 3; i++) {
        CHECK(futures[i] && floe_call_status(futures[i]) >= 0);
        floe_call_free(futures[i]);
    }
    floe_close(c);
    close(f.peer);
    return 0;
}
