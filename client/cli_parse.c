/*
 * cli_parse.c - the floe CLI's key, value and vector parsers (cli_parse.h).
 */
#define _GNU_SOURCE
#include "cli_parse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool cli_parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (s[0] < '0' || s[0] > '9')
        return false; /* strtoull would skip blanks and take a sign: " -1" is not 2^64 - 1 */
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end || (s[0] == '0' && s[1] && s[1] != 'x' && s[1] != 'X'))
        return false; /* no octal surprises: 010 is refused, not 8 */
    *out = v;
    return true;
}

int cli_parse_key(const char *text, bool with_value, uint64_t *key, uint64_t *value, const char *where, char *msg,
                  size_t len)
{
    /* all of it: a copy cut short would take "0x000...01" for 0 */
    char *buf = strdup(text);
    if (!buf) {
        snprintf(msg, len, "out of memory");
        return -1;
    }
    char *eq = NULL;
    int rc = -1;
    if (with_value) {
        eq = strpbrk(buf, "= \t");
        if (!eq) {
            snprintf(msg, len, "%s: '%s' needs a value: KEY=VALUE", where, text);
            goto out;
        }
        *eq++ = '\0';
        while (*eq == ' ' || *eq == '\t' || *eq == '=')
            eq++;
    }
    if (!cli_parse_u64(buf, key))
        snprintf(msg, len, "%s: '%s' is not a key (a decimal or 0x-hex number below 2^64)", where, buf);
    else if (with_value && !cli_parse_u64(eq, value))
        snprintf(msg, len, "%s: '%s' is not a value (a decimal or 0x-hex number)", where, eq);
    else
        rc = 0;
out:
    free(buf);
    return rc;
}

int cli_parse_vector(const char *text, unsigned words, const char *table, uint32_t *out, const char *where, char *msg,
                     size_t len)
{
    size_t tlen = strlen(text);
    char *buf = malloc(tlen + 1);
    if (!buf) {
        snprintf(msg, len, "out of memory");
        return -1;
    }
    memcpy(buf, text, tlen + 1);
    size_t count = 0;
    int rc = 0;
    char *save = NULL;
    for (char *p = buf;; p = NULL) {
        char *tok = strtok_r(p, ",", &save);
        if (!tok)
            break;
        while (*tok == ' ' || *tok == '\t')
            tok++;
        size_t tl = strlen(tok);
        while (tl && (tok[tl - 1] == ' ' || tok[tl - 1] == '\t'))
            tok[--tl] = '\0';
        uint64_t x;
        if (!cli_parse_u64(tok, &x) || x > UINT32_MAX) {
            snprintf(msg, len, "%s: '%s' in '%.60s%s' is not a word (a decimal or 0x-hex number below 2^32)", where,
                     tok, text, tlen > 60 ? "..." : "");
            rc = -1;
            break;
        }
        if (count < words)
            out[count] = (uint32_t)x;
        count++;
    }
    if (!rc && count != words) {
        snprintf(msg, len,
                 "%s: '%.60s%s' has %zu words; table %s holds vectors of %u words, written 1,2,3,... "
                 "(decimal or 0x-hex, comma-separated)",
                 where, text, tlen > 60 ? "..." : "", count, table, words);
        rc = -1;
    }
    free(buf);
    return rc;
}

char *cli_trim_line(char *line)
{
    char *p = line;
    while (*p == ' ' || *p == '\t')
        p++;
    p[strcspn(p, "#\r\n")] = '\0';
    size_t l = strlen(p);
    while (l && (p[l - 1] == ' ' || p[l - 1] == '\t'))
        p[--l] = '\0';
    return p;
}

int cli_parse_load_line(char *line, bool map, uint64_t *key, uint64_t *value)
{
    char *save = NULL;
    line[strcspn(line, "#\r\n")] = '\0';
    char *tok = strtok_r(line, " \t,=", &save);
    if (!tok)
        return 0;
    char *vtok = map ? strtok_r(NULL, " \t,=", &save) : NULL;
    *value = 0;
    if (!cli_parse_u64(tok, key) || (map && (!vtok || !cli_parse_u64(vtok, value))))
        return -1;
    if (strtok_r(NULL, " \t,=", &save))
        return -1; /* more on the line than a key (and a value): not what it was meant to be */
    return 1;
}
