/*
 * resp_wire.h - the Redis protocol's bytes: replies built in memory (RESP2
 * and RESP3 types), and one command parsed from a buffer.  No state of a
 * connection (resp.h has that).  resp_wire.c.
 */
#ifndef FLOE_DAEMON_RESP_WIRE_H
#define FLOE_DAEMON_RESP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "floe.pb-c.h"

/* ---- replies ---- */
/* A reply being built; oom once an allocation failed (the reply is then not to be sent). */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

void sb_add(sbuf *b, const void *d, size_t n);
void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_int(sbuf *b, long long v);              /* :v */
void sb_bulk(sbuf *b, const void *d, size_t n); /* $n d */
void sb_str(sbuf *b, const char *s);            /* a bulk string */
void sb_nil(sbuf *b, int proto);                /* RESP2 $-1, RESP3 _ */
void sb_array(sbuf *b, size_t n);
void sb_map(sbuf *b, size_t pairs, int proto); /* RESP3 %; RESP2 an array of twice as many */
/* "-code text": code ERR, WRONGTYPE, NOAUTH, ...; a line break in text becomes a blank */
void sb_error(sbuf *b, const char *code, const char *text);

/* ---- commands ---- */
/* The arguments of one command: slices of the buffer it was parsed from. */
typedef struct resp_args {
    size_t argc, cap;
    const unsigned char **v;
    size_t *len;
} resp_args;

/* One command of in[0, len) into a (its arrays grown as needed; the caller
 * frees a->v and a->len): 1 with *used its bytes (argc 0: an empty line or
 * array, to skip), 0 when it is not whole yet, -1 when it is not RESP (a
 * message in err, as Redis words it: "Protocol error: ...").  No argument
 * may be longer than max_bulk. */
int resp_parse(const unsigned char *in, size_t len, size_t max_bulk, resp_args *a, size_t *used, char *err,
               size_t errlen);
/* Argument i is word, in any case. */
bool resp_arg_is(const resp_args *a, size_t i, const char *word);
/* Argument i NUL-terminated in buf (false: it does not fit). */
bool resp_arg_str(const resp_args *a, size_t i, char *buf, size_t size);
/* A decimal integer of n bytes at p: unsigned 64-bit; signed 64-bit (a leading -). */
bool resp_u64(const unsigned char *p, size_t n, uint64_t *v);
bool resp_i64(const unsigned char *p, size_t n, int64_t *v);

/* ---- floe's answers as replies ---- */
/* Redis's TYPE word for a table kind (FLOE__V1__TABLE_KIND__*): set, hash, tree, ordered, static, none. */
const char *resp_kind_word(int kind);
/* INFO's bulk string from floed's info: the sections named in sections
 * (blank-separated, each followed by a blank; NULL or "": Redis's default,
 * all of them) in Redis's layout. */
void resp_info(sbuf *b, const char *sections, const Floe__V1__InfoReply *in);

#endif
