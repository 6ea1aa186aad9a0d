/*
 * fuzz_cli.c - libFuzzer target: the floe CLI's parsers of keys, values and
 * vectors (client/cli_parse.c) and libfloe's floe_parse_size, on the input
 * as one line of text (up to its first NUL, as an argument would be).  The
 * input's first byte picks the vector width (words 2..256).
 *
 * Besides not crashing, what a parser accepts must be what the whole text
 * says: a number parses back to the same value from its decimal form, a
 * KEY=VALUE line's key and value are those of the text's two parts (not of
 * a shortened copy), a vector prints and parses back to the same words.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_parse.h"
#include "floe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "fuzz_cli: %s:%d: %s\n", __FILE__, __LINE__, #cond);                                       \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

static void check_u64(const char *text)
{
    uint64_t v, back;
    char dec[32];
    if (!cli_parse_u64(text, &v))
        return;
    /* digits, or 0x and hex digits: no blank, sign or octal */
    const size_t hex = text[0] == '0' && (text[1] == 'x' || text[1] == 'X') ? 2 : 0;
    CHECK(text[hex] && strspn(text + hex, hex ? "0123456789abcdefABCDEF" : "0123456789") == strlen(text + hex));
    CHECK(text[0] != '0' || hex || text[1] == '\0');
    snprintf(dec, sizeof dec, "%" PRIu64, v);
    CHECK(cli_parse_u64(dec, &back) && back == v);
    char *end;
    CHECK(strtoull(text, &end, 0) == v && *end == '\0');
}

static void check_key(const char *text)
{
    char msg[CLI_MSG_MAX];
    uint64_t key, value = 0, want;
    if (cli_parse_key(text, false, &key, &value, "fuzz", msg, sizeof msg) == 0)
        CHECK(cli_parse_u64(text, &want) && want == key);
    if (cli_parse_key(text, true, &key, &value, "fuzz", msg, sizeof msg) != 0)
        return;
    /* KEY, then one or more of '=', blank, tab, then VALUE: the text's own parts */
    char *copy = strdup(text);
    CHECK(copy);
    char *sep = strpbrk(copy, "= \t");
    CHECK(sep);
    *sep++ = '\0';
    sep += strspn(sep, "= \t");
    uint64_t want_value;
    CHECK(cli_parse_u64(copy, &want) && want == key);
    CHECK(cli_parse_u64(sep, &want_value) && want_value == value);
    free(copy);
}

static void check_vector(const char *text, unsigned words)
{
    char msg[CLI_MSG_MAX];
    uint32_t *v = malloc(words * sizeof *v), *back = malloc(words * sizeof *back);
    char *printed = malloc(words * 11 + 1);
    CHECK(v && back && printed);
    if (cli_parse_vector(text, words, "t", v, "fuzz", msg, sizeof msg) == 0) {
        size_t at = 0;
        for (unsigned i = 0; i < words; i++)
            at += (size_t)sprintf(printed + at, i ? ",%" PRIu32 : "%" PRIu32, v[i]);
        CHECK(cli_parse_vector(printed, words, "t", back, "fuzz", msg, sizeof msg) == 0);
        CHECK(memcmp(v, back, words * sizeof *v) == 0);
    } else {
        CHECK(msg[0] != '\0');
    }
    free(v);
    free(back);
    free(printed);
}

static void check_lines(const char *text)
{
    char *copy = strdup(text);
    CHECK(copy);
    const char *p = cli_trim_line(copy);
    size_t len = strlen(p);
    CHECK(!strpbrk(p, "#\r\n"));
    CHECK(len == 0 || (p[0] != ' ' && p[0] != '\t' && p[len - 1] != ' ' && p[len - 1] != '\t'));
    free(copy);
    for (int map = 0; map <= 1; map++) {
        uint64_t key, value, key2, value2;
        char again[64];
        copy = strdup(text);
        CHECK(copy);
        const int got = cli_parse_load_line(copy, map, &key, &value);
        free(copy);
        if (got != 1)
            continue;
        if (map) /* a line holds a key, and for a MAP its value, and nothing else */
            snprintf(again, sizeof again, "%" PRIu64 " %" PRIu64, key, value);
        else
            snprintf(again, sizeof again, "%" PRIu64, key);
        CHECK(cli_parse_load_line(again, map, &key2, &value2) == 1 && key2 == key && value2 == value);
    }
}

static void check_size(const char *text)
{
    uint64_t v, back;
    char dec[32];
    if (!floe_parse_size(text, &v))
        return;
    snprintf(dec, sizeof dec, "%" PRIu64, v);
    CHECK(floe_parse_size(dec, &back) && back == v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const unsigned words = 2 + data[0] % 255;
    char *text = strndup((const char *)data + 1, size - 1);
    CHECK(text);
    check_u64(text);
    check_key(text);
    check_vector(text, words);
    check_lines(text);
    check_size(text);
    free(text);
    return 0;
}
