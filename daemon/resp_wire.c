/*
 * resp_wire.c - the Redis protocol's bytes (resp_wire.h): replies written
 * in RESP2 or RESP3, and commands parsed as Redis parses them
 * (networking.c: a multibulk array of bulk strings, or an inline line split
 * at blanks) with its limits: at most 1 Mi arguments, none longer than the
 * caller's limit.  (hiredis's reader parses replies, of any type and depth,
 * without those limits; the tests use it, through redis-cli and
 * python3-redis, as the independent side.)
 */
#define _GNU_SOURCE /* strcasestr */
#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "resp_wire.h"

#define RESP_MAX_ARGS   (1u << 20) /* as Redis: a multibulk of more is refused */
#define RESP_INLINE_MAX (64u << 10)


void sb_add(sbuf *b, const void *d, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        while (cap < b->len + n)
            cap *= 2;
        char *p = floe_realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
}

void sb_printf(sbuf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof tmp) {
        sb_add(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb_add(b, big, (size_t)n);
    free(big);
}

void sb_int(sbuf *b, long long v)
{
    sb_printf(b, ":%lld\r\n", v);
}

void sb_bulk(sbuf *b, const void *d, size_t n)
{
    sb_printf(b, "$%zu\r\n", n);
    sb_add(b, d, n);
    sb_add(b, "\r\n", 2);
}

void sb_str(sbuf *b, const char *s)
{
    sb_bulk(b, s, strlen(s));
}

void sb_nil(sbuf *b, int proto)
{
    sb_add(b, proto == 3 ? "_\r\n" : "$-1\r\n", proto == 3 ? 3 : 5);
}

void sb_array(sbuf *b, size_t n)
{
    sb_printf(b, "*%zu\r\n", n);
}

void sb_map(sbuf *b, size_t pairs, int proto)
{
    if (proto == 3)
        sb_printf(b, "%%%zu\r\n", pairs);
    else
        sb_array(b, 2 * pairs);
}

/* An error reply: "-ERR text" (code: ERR, WRONGTYPE, NOAUTH, ...), one line. */
void sb_error(sbuf *b, const char *code, const char *text)
{
    sb_printf(b, "-%s ", code);
    for (const char *t = text; *t; t++)
        sb_add(b, (*t == '\r' || *t == '\n') ? " " : t, 1);
    sb_add(b, "\r\n", 2);
}


static bool args_add(resp_args *a, const unsigned char *v, size_t len)
{
    if (a->argc == a->cap) {
        const size_t cap = a->cap ? a->cap * 2 : 16;
        const unsigned char **nv = floe_realloc(a->v, cap * sizeof *nv);
        if (!nv)
            return false;
        a->v = nv;
        size_t *nl = floe_realloc(a->len, cap * sizeof *nl);
        if (!nl)
            return false;
        a->len = nl;
        a->cap = cap;
    }
    a->v[a->argc] = v;
    a->len[a->argc++] = len;
    return true;
}

/* The number on a line "<c>N\r\n" at p (have bytes): 1 with *n and *end,
 * 0 not whole yet, -1 not a number. */
static int line_number(const unsigned char *p, size_t have, long long *n, size_t *end)
{
    const unsigned char *nl = memchr(p, '\r', have < 32 ? have : 32);
    if (!nl)
        return have < 32 ? 0 : -1;
    const size_t at = (size_t)(nl - p);
    if (at + 1 >= have)
        return 0;
    if (p[at + 1] != '\n' || at < 2)
        return -1;
    long long v = 0;
    bool neg = p[1] == '-';
    for (size_t i = neg ? 2 : 1; i < at; i++) {
        if (!isdigit(p[i]) || v > (LLONG_MAX - 9) / 10)
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    *n = neg ? -v : v;
    *end = at + 2;
    return 1;
}

/* One command of in[0, len) into a: 1 (*used its bytes; argc 0: an empty
 * one, skipped), 0 not whole yet, -1 not RESP (why in err). */
int resp_parse(const unsigned char *in, size_t len, size_t max_bulk, resp_args *a, size_t *used, char *err,
                         size_t errlen)
{
    a->argc = 0;
    if (!len)
        return 0;
    if (in[0] != '*') { /* inline: a line split at blanks (telnet, redis-cli's pipe mode) */
        const unsigned char *nl = memchr(in, '\n', len);
        if (!nl) {
            if (len > RESP_INLINE_MAX) {
                snprintf(err, errlen, "Protocol error: too big inline request");
                return -1;
            }
            return 0;
        }
        size_t end = (size_t)(nl - in);
        *used = end + 1;
        if (end && in[end - 1] == '\r')
            end--;
        for (size_t i = 0; i < end;) {
            while (i < end && (in[i] == ' ' || in[i] == '\t'))
                i++;
            const size_t from = i;
            while (i < end && in[i] != ' ' && in[i] != '\t')
                i++;
            if (i > from && !args_add(a, in + from, i - from)) {
                snprintf(err, errlen, "out of memory");
                return -1;
            }
        }
        return 1;
    }
    long long count;
    size_t at;
    int rc = line_number(in, len, &count, &at);
    if (rc <= 0) {
        if (rc < 0)
            snprintf(err, errlen, "Protocol error: invalid multibulk length");
        return rc;
    }
    if (count > (long long)RESP_MAX_ARGS) {
        snprintf(err, errlen, "Protocol error: invalid multibulk length");
        return -1;
    }
    for (long long i = 0; i < count; i++) {
        if (at >= len)
            return 0;
        if (in[at] != '$') {
            snprintf(err, errlen, "Protocol error: expected '$', got '%c'", isprint(in[at]) ? in[at] : '?');
            return -1;
        }
        long long n;
        size_t end;
        rc = line_number(in + at, len - at, &n, &end);
        if (rc <= 0) {
            if (rc < 0)
                snprintf(err, errlen, "Protocol error: invalid bulk length");
            return rc;
        }
        if (n < 0 || (unsigned long long)n > max_bulk) {
            snprintf(err, errlen, "Protocol error: invalid bulk length");
            return -1;
        }
        at += end;
        if (len - at < (size_t)n + 2)
            return 0;
        if (in[at + n] != '\r' || in[at + n + 1] != '\n') {
            snprintf(err, errlen, "Protocol error: a bulk string does not end with CRLF");
            return -1;
        }
        if (!args_add(a, in + at, (size_t)n)) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        at += (size_t)n + 2;
    }
    *used = at;
    return 1;
}

bool resp_arg_is(const resp_args *a, size_t i, const char *word)
{
    return i < a->argc && a->len[i] == strlen(word) && strncasecmp((const char *)a->v[i], word, a->len[i]) == 0;
}

/* argument i as a NUL-terminated string in buf (false: too long) */
bool resp_arg_str(const resp_args *a, size_t i, char *buf, size_t size)
{
    if (i >= a->argc || a->len[i] >= size)
        return false;
    memcpy(buf, a->v[i], a->len[i]);
    buf[a->len[i]] = 0;
    return true;
}

bool resp_u64(const unsigned char *p, size_t n, uint64_t *v)
{
    if (!n || n > 20)
        return false;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit(p[i]) || x > (UINT64_MAX - (uint64_t)(p[i] - '0')) / 10)
            return false;
        x = x * 10 + (uint64_t)(p[i] - '0');
    }
    *v = x;
    return true;
}

bool resp_i64(const unsigned char *p, size_t n, int64_t *v)
{
    const bool neg = n && p[0] == '-';
    uint64_t u;
    if (!resp_u64(p + neg, n - neg, &u) || u > (uint64_t)INT64_MAX + neg)
        return false;
    *v = neg ? (int64_t)(0 - u) : (int64_t)u;
    return true;
}

/* ---- floe's answers as replies ---- */

const char *resp_kind_word(int kind)
{
    switch (kind) {
    case FLOE__V1__TABLE_KIND__SET:
        return "set";
    case FLOE__V1__TABLE_KIND__MAP:
        return "hash";
    case FLOE__V1__TABLE_KIND__TREE:
        return "tree";
    case FLOE__V1__TABLE_KIND__ORDERED:
        return "ordered";
    case FLOE__V1__TABLE_KIND__STATIC:
        return "static";
    default:
        return "none";
    }
}

void resp_info(sbuf *b, const char *sections, const Floe__V1__InfoReply *in)
{
    const char *want = sections && sections[0] ? sections : "default ";
    const bool all = strstr(want, "all ") || strstr(want, "everything ") || strstr(want, "default ");
#define SECTION(name) (all || strcasestr(want, name " "))
    sbuf t = {0};
    if (SECTION("server")) {
        sb_printf(&t, "# Server\r\nfloe_version:%s\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\n",
                  in->version ? in->version : "");
        sb_printf(&t, "process_id:%" PRIu64 "\r\nuptime_in_seconds:%" PRIu64 "\r\nbackend:%s\r\ngpu:%s\r\n\r\n",
                  in->pid, in->uptime_seconds, in->backend ? in->backend : "", in->gpu ? in->gpu : "");
    }
    if (SECTION("clients"))
        sb_printf(&t,
                  "# Clients\r\nconnected_clients:%" PRIu64 "\r\ntotal_connections_received:%" PRIu64
                  "\r\nrejected_connections:%" PRIu64 "\r\n\r\n",
                  in->connections, in->connections_total, in->connections_refused);
    if (SECTION("memory"))
        sb_printf(&t,
                  "# Memory\r\nused_memory_rss:%" PRIu64 "\r\nmaxmemory:%" PRIu64 "\r\ngpu_memory_total:%" PRIu64
                  "\r\ngpu_memory_used:%" PRIu64 "\r\nmaxmemory_gpu:%" PRIu64 "\r\n\r\n",
                  in->rss_bytes, in->maxmemory, in->gpu_memory_total, in->gpu_memory_used, in->maxmemory_gpu);
    if (SECTION("persistence"))
        sb_printf(&t,
                  "# Persistence\r\ndata_dir:%s\r\nlast_snapshot_time:%" PRId64 "\r\nlast_snapshot_status:%s\r\n\r\n",
                  in->data_dir ? in->data_dir : "", in->last_snapshot_time,
                  in->last_snapshot_status ? in->last_snapshot_status : "");
    if (SECTION("stats")) {
        uint64_t reqs = 0;
        for (size_t i = 0; i < in->n_ops; i++)
            reqs += in->ops[i]->requests;
        sb_printf(&t,
                  "# Stats\r\ntotal_commands_processed:%" PRIu64 "\r\ntotal_net_input_bytes:%" PRIu64
                  "\r\ntotal_net_output_bytes:%" PRIu64 "\r\n",
                  reqs, in->bytes_in, in->bytes_out);
        for (size_t i = 0; i < in->n_ops; i++)
            sb_printf(&t, "op_%s:requests=%" PRIu64 ",keys=%" PRIu64 ",errors=%" PRIu64 "\r\n", in->ops[i]->op,
                      in->ops[i]->requests, in->ops[i]->keys, in->ops[i]->errors);
        sb_add(&t, "\r\n", 2);
    }
    if (SECTION("gpu")) {
        sb_add(&t, "# Gpu\r\n", 7);
        for (size_t i = 0; i < in->n_gpus; i++)
            sb_printf(&t, "gpu%d:name=%s,healthy=%d,memory_total=%" PRIu64 ",memory_free=%" PRIu64 "\r\n",
                      in->gpus[i]->device, in->gpus[i]->name, in->gpus[i]->healthy, in->gpus[i]->memory_total,
                      in->gpus[i]->memory_free);
        sb_add(&t, "\r\n", 2);
    }
    if (SECTION("keyspace")) {
        uint64_t keys = 0;
        for (size_t i = 0; i < in->n_tables; i++)
            keys += in->tables[i]->keys;
        sb_printf(&t, "# Keyspace\r\n");
        if (in->n_tables)
            sb_printf(&t, "db0:keys=%zu,expires=0,avg_ttl=0,members=%" PRIu64 "\r\n", in->n_tables, keys);
        for (size_t i = 0; i < in->n_tables; i++)
            sb_printf(&t, "table_%s:kind=%s,keys=%" PRIu64 ",backend=%s,fill=%.3f,memory=%" PRIu64 "\r\n",
                      in->tables[i]->name, resp_kind_word(in->tables[i]->kind), in->tables[i]->keys, in->tables[i]->backend,
                      in->tables[i]->fill, in->tables[i]->memory_bytes);
        sb_add(&t, "\r\n", 2);
    }
#undef SECTION
    if (t.len >= 2)
        t.len -= 2; /* no blank line at the end */
    if (t.oom)
        sb_error(b, "ERR", "out of memory");
    else
        sb_bulk(b, t.p ? t.p : "", t.len);
    free(t.p);
}
