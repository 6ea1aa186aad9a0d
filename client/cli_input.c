/*
 * cli_input.c - keys (KEY, KEY=VALUE) and TREE vectors (1,2,3,...) from the
 * command's arguments or stdin, one per line.
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

/* ---- TREE vectors: words u32 words written 1,2,3,... ---------------------------------------- */

static int add_vector(void *ctx, const char *text, const char *where)
{
    veclist *vl = ctx;
    if (vl->n == vl->cap) {
        size_t cap = vl->cap ? 2 * vl->cap : 256;
        uint32_t *grown = realloc(vl->v, cap * vl->words * sizeof *grown);
        if (!grown)
            return usage_error("out of memory");
        vl->v = grown;
        vl->cap = cap;
    }
    char msg[CLI_MSG_MAX];
    if (cli_parse_vector(text, vl->words, vl->table, vl->v + vl->n * vl->words, where, msg, sizeof msg) != 0)
        return usage_error("%s", msg);
    vl->n++;
    return 0;
}

void print_vector(const uint32_t *v, unsigned words)
{
    for (unsigned i = 0; i < words; i++)
        printf(i ? ",%" PRIu32 : "%" PRIu32, v[i]);
}

/* ---- keys from arguments or stdin -------------------------------------------------------------- */

static int add_key(keylist *kl, const char *text, bool with_value, const char *where)
{
    uint64_t key, value = 0;
    char msg[CLI_MSG_MAX];
    if (cli_parse_key(text, with_value, &key, &value, where, msg, sizeof msg) != 0)
        return usage_error("%s", msg);
    if (kl->n == kl->cap) { /* values only with them: stdin may bring millions of keys */
        size_t cap = kl->cap ? 2 * kl->cap : 1024;
        uint64_t *keys = realloc(kl->keys, cap * sizeof *keys);
        if (keys)
            kl->keys = keys;
        uint64_t *values = with_value ? realloc(kl->values, cap * sizeof *values) : NULL;
        if (values)
            kl->values = values;
        if (!keys || (with_value && !values))
            return usage_error("out of memory");
        kl->cap = cap;
    }
    kl->keys[kl->n] = key;
    if (with_value)
        kl->values[kl->n] = value;
    kl->n++;
    return 0;
}

void free_keys(keylist *kl)
{
    free(kl->keys);
    free(kl->values);
}

/* Items (keys, vectors) from argv, or (when none) one per line on stdin. */
static int read_items(int argc, char **argv, add_fn *add, void *ctx)
{
    if (argc > 0) {
        for (int i = 0; i < argc; i++)
            if (add(ctx, argv[i], "argument"))
                return EXIT_USAGE;
        return 0;
    }
    if (cli_stdin_is_commands)
        return usage_error("give the keys on the line (in a session stdin carries the commands)");
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    while ((len = getline(&line, &cap, stdin)) >= 0) {
        lineno++;
        char *p = cli_trim_line(line);
        if (!*p)
            continue;
        char where[32];
        snprintf(where, sizeof where, "stdin line %ld", lineno);
        if (add(ctx, p, where)) {
            free(line);
            return EXIT_USAGE;
        }
    }
    free(line);
    return 0;
}

static int add_key_item(void *ctx, const char *text, const char *where)
{
    key_ctx *k = ctx;
    return add_key(k->kl, text, k->with_value, where);
}

/* Keys from argv, or (when none) one per line on stdin. */
int read_keys(int argc, char **argv, bool with_value, keylist *kl)
{
    memset(kl, 0, sizeof *kl);
    key_ctx k = {kl, with_value};
    if (read_items(argc, argv, add_key_item, &k)) {
        free_keys(kl);
        return EXIT_USAGE;
    }
    return 0;
}

/* Vectors of a TREE from argv, or (when none) one per line on stdin. */
int read_vectors(int argc, char **argv, const floe_table_info *t, veclist *vl)
{
    memset(vl, 0, sizeof *vl);
    vl->words = t->words;
    vl->table = t->name;
    if (read_items(argc, argv, add_vector, vl)) {
        free(vl->v);
        vl->v = NULL;
        return EXIT_USAGE;
    }
    return 0;
}
