/*
 * cli_parse.h - the floe CLI's parsers of keys, values and TREE vectors, as
 * given in arguments, on stdin and in `floe load` files.  They print
 * nothing: a failure comes back with the message the CLI prints.
 */
#ifndef FLOE_CLIENT_CLI_PARSE_H
#define FLOE_CLIENT_CLI_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CLI_MSG_MAX 1024

/* Decimal or 0x-hex, the whole string (no sign, no octal). */
bool cli_parse_u64(const char *s, uint64_t *out);

/* "KEY", or with_value "KEY=VALUE" (or a blank between them).  0, or -1
 * with a message naming where. */
int cli_parse_key(const char *text, bool with_value, uint64_t *key, uint64_t *value, const char *where, char *msg,
                  size_t len);

/* "1,2,3" (decimal or 0x-hex u32 words, commas, optional blanks) into
 * exactly `words` words of out.  0, or -1 with a message naming where and
 * table. */
int cli_parse_vector(const char *text, unsigned words, const char *table, uint32_t *out, const char *where, char *msg,
                     size_t len);

/* A line of keys or vectors: cut at '#', CR or LF and trimmed of blanks, in
 * place; returns where it now starts. */
char *cli_trim_line(char *line);

/* Whether value fits a MAP's value_bytes (4 or 8) bytes. */
static inline bool cli_value_fits(uint64_t value, unsigned value_bytes)
{
    return value_bytes >= 8 || value >> (8 * value_bytes) == 0;
}

/* A text line of `floe load` into a SET ("KEY") or MAP ("KEY VALUE"; blanks,
 * commas or '=' between), changed in place: 1 with key (and value), 0 for a
 * line with nothing on it, -1 if it does not parse or holds more than that. */
int cli_parse_load_line(char *line, bool map, uint64_t *key, uint64_t *value);

#endif
