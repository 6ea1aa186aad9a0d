/*
 * cli_json.c - the CLI's JSON output: one object per command, on one line.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* ---- JSON output: one object per command, on one line ------------------------------------------ */

/* s as a JSON string: escapes, and U+FFFD for bytes that are not UTF-8
 * (the server's messages are not checked), so the output always parses. */
static void json_string(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    putchar('"');
    while (*p) {
        unsigned char ch = *p;
        if (ch == '"' || ch == '\\') {
            printf("\\%c", ch);
            p++;
        } else if (ch < 0x20) {
            printf("\\u%04x", ch);
            p++;
        } else if (ch < 0x80) {
            putchar(ch);
            p++;
        } else {
            size_t len = ch >= 0xc2 && ch <= 0xdf ? 2 : ch >= 0xe0 && ch <= 0xef ? 3 : ch >= 0xf0 && ch <= 0xf4 ? 4 : 0;
            bool ok = len > 0;
            for (size_t i = 1; ok && i < len; i++)
                ok = (p[i] & 0xc0) == 0x80;
            /* no overlong forms, surrogates or code points above U+10FFFF */
            if (ok && ((ch == 0xe0 && p[1] < 0xa0) || (ch == 0xed && p[1] > 0x9f) || (ch == 0xf0 && p[1] < 0x90) ||
                       (ch == 0xf4 && p[1] > 0x8f)))
                ok = false;
            if (ok) {
                fwrite(p, 1, len, stdout);
                p += len;
            } else {
                fputs("\\ufffd", stdout);
                p++;
            }
        }
    }
    putchar('"');
}

static void jw_value(jw *w)
{
    if (w->keyed) {
        w->keyed = false;
        return;
    }
    if (w->depth > 0 && !w->first[w->depth])
        putchar(',');
    w->first[w->depth] = false;
}

static void jw_key(jw *w, const char *key)
{
    if (key) {
        jw_value(w);
        json_string(key);
        putchar(':');
        w->keyed = true;
    }
}

void jw_open(jw *w, const char *key, char bracket)
{
    jw_key(w, key);
    jw_value(w);
    putchar(bracket);
    w->first[++w->depth] = true;
}

void jw_close(jw *w, char bracket)
{
    putchar(bracket);
    if (--w->depth == 0)
        putchar('\n');
}

void jw_str(jw *w, const char *key, const char *v)
{
    jw_key(w, key);
    jw_value(w);
    json_string(v);
}

void jw_u64(jw *w, const char *key, uint64_t v)
{
    jw_key(w, key);
    jw_value(w);
    printf("%" PRIu64, v);
}

void jw_i64(jw *w, const char *key, int64_t v)
{
    jw_key(w, key);
    jw_value(w);
    printf("%" PRId64, v);
}

void jw_real(jw *w, const char *key, double v)
{
    jw_key(w, key);
    jw_value(w);
    if (isfinite(v))
        printf("%.10g", v);
    else
        fputs("null", stdout); /* JSON has no NaN or infinity */
}

void jw_bool(jw *w, const char *key, bool v)
{
    jw_key(w, key);
    jw_value(w);
    fputs(v ? "true" : "false", stdout);
}

void jw_null(jw *w, const char *key)
{
    jw_key(w, key);
    jw_value(w);
    fputs("null", stdout);
}
