/*
 * cli.c - floe, the command-line client: one subcommand per protocol
 * operation, keys as arguments or one per line on stdin, bulk loading with
 * a progress bar.  Output goes to stdout, errors to stderr; the exit code is
 * 0 on success, 1 when the server or the connection reports an error, 2 for
 * a usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "floe.h"

#define EXIT_USAGE 2

static const char *const ANSWERS[] = {"ABSENT", "PRESENT", "INSERTED", "FULL", "ERASED"};

typedef struct cmd {
    const char *name, *args, *help;
    int (*run)(floe *c, int argc, char **argv);
} cmd;

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("floe: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\n", stderr);
    va_end(ap);
    return EXIT_USAGE;
}

static int fail(floe *c, int st)
{
    const char *msg = floe_errstr(c);
    fprintf(stderr, "floe: %s%s%s\n", floe_strerror(st), msg && msg[0] ? ": " : "", msg ? msg : "");
    return 1;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Decimal or 0x-hex, the whole string. */
static bool parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (!s[0] || s[0] == '-')
        return false;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end || (s[0] == '0' && s[1] && s[1] != 'x' && s[1] != 'X'))
        return false; /* no octal surprises: 010 is refused, not 8 */
    *out = v;
    return true;
}

static const char *kind_name(int kind)
{
    return kind == FLOE_TABLE_SET ? "SET" : kind == FLOE_TABLE_MAP ? "MAP" : kind == FLOE_TABLE_TREE ? "TREE" : "?";
}

/* ---- TREE vectors: words u32 words written 1,2,3,... ---------------------------------------- */

typedef struct veclist {
    uint32_t *v; /* n * words */
    size_t n, cap;
    unsigned words;
    const char *table;
} veclist;

/* Parses "1,2,3" (decimal or 0x-hex u32 words, commas, optional blanks)
 * into exactly `words` words; on failure a usage message naming where. */
static int parse_vector(const char *text, unsigned words, const char *table, uint32_t *out, const char *where)
{
    size_t len = strlen(text);
    char *buf = malloc(len + 1);
    if (!buf)
        return usage_error("out of memory");
    memcpy(buf, text, len + 1);
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
        if (!parse_u64(tok, &x) || x > UINT32_MAX) {
            rc = usage_error("%s: '%s' in '%.60s%s' is not a word (a decimal or 0x-hex number below 2^32)", where, tok,
                             text, len > 60 ? "..." : "");
            break;
        }
        if (count < words)
            out[count] = (uint32_t)x;
        count++;
    }
    if (!rc && count != words)
        rc = usage_error("%s: '%.60s%s' has %zu words; table %s holds vectors of %u words, written 1,2,3,... "
                         "(decimal or 0x-hex, comma-separated)",
                         where, text, len > 60 ? "..." : "", count, table, words);
    free(buf);
    return rc;
}

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
    int rc = parse_vector(text, vl->words, vl->table, vl->v + vl->n * vl->words, where);
    if (rc == 0)
        vl->n++;
    return rc;
}

static void print_vector(const uint32_t *v, unsigned words)
{
    for (unsigned i = 0; i < words; i++)
        printf(i ? ",%" PRIu32 : "%" PRIu32, v[i]);
}

/* ---- keys from arguments or stdin -------------------------------------------------------------- */

typedef struct keylist {
    uint64_t *keys, *values;
    size_t n, cap;
} keylist;

static int add_key(keylist *kl, const char *text, bool with_value, const char *where)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", text);
    char *eq = NULL;
    if (with_value) {
        eq = strpbrk(buf, "= \t");
        if (!eq)
            return usage_error("%s: '%s' needs a value: KEY=VALUE", where, text);
        *eq++ = '\0';
        while (*eq == ' ' || *eq == '\t' || *eq == '=')
            eq++;
    }
    if (kl->n == kl->cap) {
        kl->cap = kl->cap ? 2 * kl->cap : 1024;
        kl->keys = realloc(kl->keys, kl->cap * sizeof *kl->keys);
        kl->values = realloc(kl->values, kl->cap * sizeof *kl->values);
        if (!kl->keys || !kl->values)
            return usage_error("out of memory");
    }
    if (!parse_u64(buf, &kl->keys[kl->n]))
        return usage_error("%s: '%s' is not a key (a decimal or 0x-hex number below 2^64)", where, buf);
    kl->values[kl->n] = 0;
    if (with_value && !parse_u64(eq, &kl->values[kl->n]))
        return usage_error("%s: '%s' is not a value (a decimal or 0x-hex number)", where, eq);
    kl->n++;
    return 0;
}

static void free_keys(keylist *kl)
{
    free(kl->keys);
    free(kl->values);
}

typedef int add_fn(void *ctx, const char *text, const char *where);

/* Items (keys, vectors) from argv, or (when none) one per line on stdin. */
static int read_items(int argc, char **argv, add_fn *add, void *ctx)
{
    if (argc > 0) {
        for (int i = 0; i < argc; i++)
            if (add(ctx, argv[i], "argument"))
                return EXIT_USAGE;
        return 0;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    while ((len = getline(&line, &cap, stdin)) >= 0) {
        lineno++;
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        p[strcspn(p, "#\r\n")] = '\0';
        size_t l = strlen(p);
        while (l && (p[l - 1] == ' ' || p[l - 1] == '\t'))
            p[--l] = '\0';
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

typedef struct key_ctx {
    keylist *kl;
    bool with_value;
} key_ctx;

static int add_key_item(void *ctx, const char *text, const char *where)
{
    key_ctx *k = ctx;
    return add_key(k->kl, text, k->with_value, where);
}

/* Keys from argv, or (when none) one per line on stdin. */
static int read_keys(int argc, char **argv, bool with_value, keylist *kl)
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
static int read_vectors(int argc, char **argv, const floe_table_info *t, veclist *vl)
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

/* ---- subcommands --------------------------------------------------------------------------------- */

static int cmd_ping(floe *c, int argc, char **argv)
{
    (void)argv;
    if (argc)
        return usage_error("ping takes no arguments");
    double t0 = now();
    int st = floe_ping(c);
    if (st)
        return fail(c, st);
    printf("PONG %.3f ms\n", (now() - t0) * 1e3);
    return 0;
}

static int cmd_info(floe *c, int argc, char **argv)
{
    (void)argv;
    if (argc)
        return usage_error("info takes no arguments");
    const floe_server_info *i = floe_info(c);
    printf("server: %s\nprotocol: %u\nbackend: %s\nmax-frame: %" PRIu64 " bytes\nmax-batch-keys: %" PRIu64
           "\nmax-inflight: %u\n",
           i->server, i->version, i->backend, i->max_frame, i->max_batch_keys, i->max_inflight);
    return 0;
}

static void print_tree_info(const floe_table_info *t, bool long_form)
{
    if (!long_form) {
        printf("%-24s %-4s words=%-4u vectors=%-12" PRIu64 " node_fill=%.4f bytes/vector=%.3f backend=%s\n", t->name,
               kind_name(t->kind), t->words, t->keys, t->node_fill, t->bytes_per_key, t->backend);
        return;
    }
    printf("name: %s\nkind: TREE\nwords: %u\ncapacity: %" PRIu64 "\n", t->name, t->words, t->capacity);
    if (t->memory)
        printf("memory asked: %" PRIu64 " bytes\n", t->memory);
    printf("backend: %s\nvectors: %" PRIu64 "\nnodes: %" PRIu64 "\nnode_slots: %" PRIu64 "\nnode_fill: %.4f\n",
           t->backend, t->keys, t->nodes, t->node_slots, t->node_fill);
    printf("orphan_nodes: %" PRIu64 "\nmemory: %" PRIu64 " bytes\nbytes_per_vector: %.3f\ncompression: %.4f\n",
           t->orphan_nodes, t->memory_bytes, t->bytes_per_key, t->compression);
    static const char *const lv[] = {"primary", "secondary", "stash"};
    for (int l = 0; l < 3; l++)
        printf("root level %s: slots=%" PRIu64 " used=%" PRIu64 " fill=%.4f row_bits=%u\n", lv[l], t->level[l].slots,
               t->level[l].used, t->level[l].fill, t->level[l].row_bits);
}

static void print_info(const floe_table_info *t, bool long_form)
{
    if (t->kind == FLOE_TABLE_TREE) {
        print_tree_info(t, long_form);
        return;
    }
    if (!long_form) {
        printf("%-24s %-4s key_bits=%-2u keys=%-12" PRIu64 " fill=%.4f bytes/key=%.3f backend=%s\n", t->name,
               kind_name(t->kind), t->key_bits, t->keys, t->fill, t->bytes_per_key, t->backend);
        return;
    }
    printf("name: %s\nkind: %s\nkey_bits: %u\n", t->name, kind_name(t->kind), t->key_bits);
    if (t->kind == FLOE_TABLE_MAP)
        printf("value_bytes: %u\n", t->value_bytes);
    printf("capacity: %" PRIu64 "\ngrow: %s\n", t->capacity, t->grow ? "yes" : "no");
    if (t->grow)
        printf("max_fill: %.3f\n", t->max_fill);
    printf("backend: %s\nkeys: %" PRIu64 "\ntombstones: %" PRIu64 "\nslots: %" PRIu64 "\nfill: %.4f\n", t->backend,
           t->keys, t->tombstones, t->slots, t->fill);
    printf("memory: %" PRIu64 " bytes\nbytes_per_key: %.3f\ngeneration: %" PRIu64 "\n", t->memory_bytes,
           t->bytes_per_key, t->generation);
    static const char *const lv[] = {"primary", "secondary", "stash"};
    for (int l = 0; l < 3; l++)
        printf("level %s: slots=%" PRIu64 " used=%" PRIu64 " fill=%.4f row_bits=%u\n", lv[l], t->level[l].slots,
               t->level[l].used, t->level[l].fill, t->level[l].row_bits);
}

static int cmd_tables(floe *c, int argc, char **argv)
{
    (void)argv;
    if (argc)
        return usage_error("tables takes no arguments");
    floe_table_info *t;
    size_t n;
    int st = floe_tables(c, &t, &n);
    if (st)
        return fail(c, st);
    for (size_t i = 0; i < n; i++)
        print_info(&t[i], false);
    if (n == 0)
        fprintf(stderr, "(no tables)\n");
    free(t);
    return 0;
}

static int cmd_create(floe *c, int argc, char **argv)
{
    if (argc < 1)
        return usage_error("create needs a table name (floe create --help)");
    floe_table_def d = {.name = argv[0], .kind = FLOE_TABLE_SET, .key_bits = 64};
    bool key_bits_given = false;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t x;
        if (strcmp(o, "--grow") == 0) {
            d.grow = 1;
            continue;
        }
        if (!v)
            return usage_error("create: %s needs a value", o);
        i++;
        if (strcmp(o, "--kind") == 0) {
            if (strcasecmp(v, "set") == 0)
                d.kind = FLOE_TABLE_SET;
            else if (strcasecmp(v, "map") == 0)
                d.kind = FLOE_TABLE_MAP, d.value_bytes = d.value_bytes ? d.value_bytes : 8;
            else if (strcasecmp(v, "tree") == 0)
                d.kind = FLOE_TABLE_TREE;
            else
                return usage_error("create: --kind is set, map or tree, not '%s'", v);
        } else if (strcmp(o, "--key-bits") == 0 && parse_u64(v, &x) && x <= 64) {
            d.key_bits = (unsigned)x;
            key_bits_given = true;
        } else if (strcmp(o, "--value-bytes") == 0 && parse_u64(v, &x) && x <= 64) {
            d.value_bytes = (unsigned)x;
        } else if (strcmp(o, "--words") == 0 && parse_u64(v, &x) && x <= 65536) {
            d.words = (unsigned)x; /* the server checks the range (2..256) */
        } else if (strcmp(o, "--capacity") == 0 && (parse_u64(v, &x) || floe_parse_size(v, &x))) {
            d.capacity = x;
        } else if (strcmp(o, "--memory") == 0 && floe_parse_size(v, &x)) {
            d.memory = x;
        } else if (strcmp(o, "--max-fill") == 0) {
            char *end;
            d.max_fill = strtod(v, &end);
            if (*end)
                return usage_error("create: --max-fill needs a number, not '%s'", v);
        } else if (strcmp(o, "--backend") == 0) {
            d.backend = v;
        } else {
            return usage_error("create: bad option or value '%s %s' (floe create --help)", o, v);
        }
    }
    if (d.kind == FLOE_TABLE_TREE) {
        if (!d.words)
            return usage_error("create: a TREE needs --words N (32-bit words per vector, 2..256)");
        if (!key_bits_given)
            d.key_bits = 0; /* a TREE has no key_bits; given, the server says why not */
    }
    int st = floe_create(c, &d);
    if (st)
        return fail(c, st);
    printf("created %s\n", d.name);
    return 0;
}

static int cmd_drop(floe *c, int argc, char **argv)
{
    if (argc != 1)
        return usage_error("drop needs exactly one table name");
    int st = floe_drop(c, argv[0]);
    if (st)
        return fail(c, st);
    printf("dropped %s\n", argv[0]);
    return 0;
}

static int cmd_stats(floe *c, int argc, char **argv)
{
    if (argc != 1)
        return usage_error("stats needs exactly one table name");
    floe_table_info t;
    int st = floe_stats(c, argv[0], &t);
    if (st)
        return fail(c, st);
    print_info(&t, true);
    /* where the table's batches spent their time (docs/PROTOCOL.md, StageTime) */
    for (unsigned i = 0; i < t.n_stages; i++) {
        const floe_stage_info *s = &t.stages[i];
        printf("stage %s: count=%" PRIu64 " keys=%" PRIu64 " seconds=%.6f", s->name, s->count, s->keys,
               (double)s->nanos / 1e9);
        if (s->keys)
            printf(" ns_per_key=%.2f", (double)s->nanos / (double)s->keys);
        printf("\n");
    }
    return 0;
}

static int cmd_snapshot(floe *c, int argc, char **argv)
{
    if (argc > 1)
        return usage_error("snapshot takes at most one table name");
    int st = floe_snapshot(c, argc ? argv[0] : NULL);
    if (st)
        return fail(c, st);
    printf("saved %s\n", argc ? argv[0] : "every table");
    return 0;
}

/* The kind and value width of a table, for commands that need them. */
static int table_shape(floe *c, const char *table, floe_table_info *t)
{
    int st = floe_stats(c, table, t);
    return st ? fail(c, st) : 0;
}

static void print_summary(const floe_counts *k)
{
    fflush(stdout); /* the answers first, then the tally */
    fprintf(stderr,
            "inserted %" PRIu64 ", present %" PRIu64 ", absent %" PRIu64 ", full %" PRIu64 ", erased %" PRIu64 "\n",
            k->inserted, k->present, k->absent, k->full, k->erased);
}

/* insert (op 0) or find (op 1) of vectors on a TREE: VECTOR ANSWER [ID] per line. */
static int vector_command(floe *c, const floe_table_info *t, int argc, char **argv, int op)
{
    veclist vl;
    if (read_vectors(argc, argv, t, &vl))
        return EXIT_USAGE;
    uint8_t *res = malloc(vl.n + 1);
    uint64_t *ids = malloc(vl.n * 8 + 8);
    if (!res || !ids) {
        free(res);
        free(ids);
        free(vl.v);
        return usage_error("out of memory");
    }
    floe_counts k;
    int st = op == 0 ? floe_insert_vectors(c, t->name, vl.v, vl.n, t->words, res, ids, &k)
                     : floe_find_vectors(c, t->name, vl.v, vl.n, t->words, res, ids, &k);
    if (st == FLOE_OK) {
        for (size_t i = 0; i < vl.n; i++) {
            print_vector(vl.v + i * t->words, t->words);
            printf(" %s", res[i] < 5 ? ANSWERS[res[i]] : "?");
            if (res[i] == FLOE_INSERTED || res[i] == FLOE_PRESENT)
                printf(" %" PRIu64, ids[i]);
            putchar('\n');
        }
        print_summary(&k);
    }
    free(res);
    free(ids);
    free(vl.v);
    return st ? fail(c, st) : 0;
}

static int key_command(floe *c, int argc, char **argv, int op)
{
    if (argc < 1)
        return usage_error("%s needs a table name", op == 0 ? "insert" : op == 1 ? "find" : "erase");
    const char *table = argv[0];
    floe_table_info t;
    if (table_shape(c, table, &t))
        return 1;
    if (t.kind == FLOE_TABLE_TREE) {
        if (op == 2) {
            fprintf(stderr, "floe: ERR_UNSUPPORTED: table %s is a TREE: TREE tables do not erase\n", table);
            return 1;
        }
        return vector_command(c, &t, argc - 1, argv + 1, op);
    }
    bool map = t.kind == FLOE_TABLE_MAP;
    keylist kl;
    if (read_keys(argc - 1, argv + 1, map && op == 0, &kl))
        return EXIT_USAGE;
    uint8_t *res = malloc(kl.n + 1);
    unsigned char *vin = malloc(kl.n * 8 + 8), *vout = malloc(kl.n * 8 + 8);
    const unsigned vb = t.value_bytes;
    floe_counts k;
    int st;
    for (size_t i = 0; map && i < kl.n; i++)
        memcpy(vin + i * vb, &kl.values[i], vb);
    if (op == 0)
        st = map ? floe_insert_values(c, table, kl.keys, vin, kl.n, vb, 1, res, vout, &k)
                 : floe_insert(c, table, kl.keys, kl.n, res, &k);
    else if (op == 1)
        st = floe_find(c, table, kl.keys, kl.n, res, map ? vout : NULL, vb, &k);
    else
        st = floe_erase(c, table, kl.keys, kl.n, res, &k);
    if (st == FLOE_OK) {
        for (size_t i = 0; i < kl.n; i++) {
            printf("%" PRIu64 " %s", kl.keys[i], res[i] < 5 ? ANSWERS[res[i]] : "?");
            if (map && op != 2 && res[i] != FLOE_ABSENT && res[i] != FLOE_FULL) {
                uint64_t v = 0;
                memcpy(&v, vout + i * vb, vb);
                printf(" %" PRIu64, v);
            }
            putchar('\n');
        }
        print_summary(&k);
    }
    free(res);
    free(vin);
    free(vout);
    free_keys(&kl);
    return st ? fail(c, st) : 0;
}

static int cmd_insert(floe *c, int argc, char **argv)
{
    return key_command(c, argc, argv, 0);
}

static int cmd_find(floe *c, int argc, char **argv)
{
    return key_command(c, argc, argv, 1);
}

static int cmd_erase(floe *c, int argc, char **argv)
{
    return key_command(c, argc, argv, 2);
}

/* get_by_id: ID VECTOR (or ID ABSENT) per id. */
static int cmd_get(floe *c, int argc, char **argv)
{
    if (argc < 1)
        return usage_error("get needs a TREE table name and ids (floe get --help)");
    const char *table = argv[0];
    floe_table_info t;
    if (table_shape(c, table, &t))
        return 1;
    keylist kl;
    if (read_keys(argc - 1, argv + 1, false, &kl))
        return EXIT_USAGE;
    /* Not a TREE: ask anyway with a dummy width, and the server says why not. */
    const unsigned words = t.kind == FLOE_TABLE_TREE ? t.words : 1;
    /* Requests of at most 16 MiB of vectors (the answer must fit in a frame). */
    size_t chunk = ((size_t)16 << 20) / ((size_t)words * 4);
    if (chunk > kl.n)
        chunk = kl.n;
    uint8_t *res = malloc(chunk + 1);
    uint32_t *vecs = malloc(chunk * words * 4 + 4);
    if (!res || !vecs) {
        free(res);
        free(vecs);
        free_keys(&kl);
        return usage_error("out of memory");
    }
    floe_counts k = {0};
    int st = FLOE_OK;
    for (size_t at = 0; at < kl.n && st == FLOE_OK; at += chunk) {
        size_t n = kl.n - at < chunk ? kl.n - at : chunk;
        st = floe_get_by_id(c, table, kl.keys + at, n, words, res, vecs);
        for (size_t i = 0; st == FLOE_OK && i < n; i++) {
            printf("%" PRIu64 " ", kl.keys[at + i]);
            if (res[i] == FLOE_PRESENT)
                print_vector(vecs + i * words, words), k.present++;
            else
                fputs("ABSENT", stdout), k.absent++;
            putchar('\n');
        }
    }
    if (st == FLOE_OK && kl.n == 0) /* no ids: still let the server judge the table */
        st = floe_get_by_id(c, table, NULL, 0, words, NULL, NULL);
    if (st == FLOE_OK)
        print_summary(&k);
    free(res);
    free(vecs);
    free_keys(&kl);
    return st ? fail(c, st) : 0;
}

/* ---- load ---------------------------------------------------------------------------------------- */

typedef struct loader {
    floe_counts total;
    int status;
    char error[256];
    unsigned inflight;
} loader;

static void on_loaded(floe *c, floe_call *call, void *arg)
{
    (void)c;
    loader *ld = arg;
    floe_counts k;
    ld->inflight--;
    int st = floe_call_status(call);
    if (st != FLOE_OK && ld->status == FLOE_OK) {
        ld->status = st;
        snprintf(ld->error, sizeof ld->error, "%s", floe_call_error(call));
    }
    floe_call_counts(call, &k);
    ld->total.inserted += k.inserted;
    ld->total.present += k.present;
    ld->total.full += k.full;
}

static void progress(double done, double total, uint64_t keys, double secs, bool final, const char *noun)
{
    if (!isatty(STDERR_FILENO) && !final)
        return;
    int width = 30, fill = total > 0 ? (int)(width * done / total) : width;
    if (fill > width)
        fill = width;
    fprintf(stderr, "\r[%.*s%*s] %5.1f%% %" PRIu64 " %s %.1f M %s/s%s", fill, "##############################",
            width - fill, "", total > 0 ? 100.0 * done / total : 100.0, keys, noun, secs > 0 ? keys / secs / 1e6 : 0.0,
            noun, final ? "\n" : "");
}

static int cmd_load(floe *c, int argc, char **argv)
{
    bool binary = false;
    size_t batch = 65536;
    const char *table = NULL, *path = NULL;
    for (int i = 0; i < argc; i++) {
        uint64_t x;
        if (strcmp(argv[i], "--binary") == 0)
            binary = true;
        else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc && parse_u64(argv[i + 1], &x) && x > 0 &&
                 x <= (1u << 24))
            batch = x, i++;
        else if (!table)
            table = argv[i];
        else if (!path)
            path = argv[i];
        else
            return usage_error("load: unexpected argument '%s' (floe load --help)", argv[i]);
    }
    if (!table || !path)
        return usage_error("load needs a table name and a file (floe load --help)");
    floe_table_info t;
    if (table_shape(c, table, &t))
        return 1;
    bool map = t.kind == FLOE_TABLE_MAP, tree = t.kind == FLOE_TABLE_TREE;
    if (map && binary)
        return usage_error("load --binary is for SET tables (8-byte keys); load a MAP from text 'KEY VALUE' lines");
    const unsigned words = tree ? t.words : 0;
    const char *noun = tree ? "vectors" : "keys";
    if (tree) { /* a request of at most 32 MiB of vectors (and half of max-frame) */
        uint64_t max_bytes = floe_info(c)->max_frame / 2;
        if (!max_bytes || max_bytes > ((uint64_t)32 << 20))
            max_bytes = (uint64_t)32 << 20;
        size_t cap = (size_t)(max_bytes / ((uint64_t)words * 4));
        if (batch > cap)
            batch = cap ? cap : 1;
    }
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, binary ? "rb" : "r");
    if (!f) {
        fprintf(stderr, "floe: cannot open %s: %s\n", path, strerror(errno));
        return 1;
    }
    struct stat sb;
    double total = fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) ? (double)sb.st_size : 0;
    uint64_t *keys = malloc(batch * 8);
    unsigned char *vals = malloc(batch * 8);
    uint32_t *vecs = tree ? malloc(batch * words * 4) : NULL;
    if (!keys || !vals || (tree && !vecs)) {
        if (f != stdin)
            fclose(f);
        free(keys);
        free(vals);
        free(vecs);
        return usage_error("out of memory for batches of %zu %s", batch, noun);
    }
    loader ld = {.status = FLOE_OK};
    const unsigned window = 4;
    uint64_t sent = 0;
    double t0 = now(), last = 0;
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    int rc = 0;
    for (bool eof = false; !eof && ld.status == FLOE_OK;) {
        size_t n = 0;
        if (binary) {
            n = tree ? fread(vecs, (size_t)words * 4, batch, f) : fread(keys, 8, batch, f);
            eof = n < batch;
            if (eof && ferror(f)) {
                fprintf(stderr, "floe: reading %s: %s\n", path, strerror(errno));
                rc = 1;
                break;
            }
        } else {
            while (n < batch) {
                ssize_t len = getline(&line, &cap, f);
                if (len < 0) {
                    eof = true;
                    break;
                }
                lineno++;
                char *p = line;
                p[strcspn(p, "#\r\n")] = '\0';
                if (tree) {
                    while (*p == ' ' || *p == '\t')
                        p++;
                    size_t l = strlen(p);
                    while (l && (p[l - 1] == ' ' || p[l - 1] == '\t'))
                        p[--l] = '\0';
                    if (!*p)
                        continue;
                    char where[300];
                    snprintf(where, sizeof where, "%s line %ld", path, lineno);
                    if (parse_vector(p, words, table, vecs + n * words, where)) {
                        rc = EXIT_USAGE;
                        eof = true;
                        n = 0;
                        break;
                    }
                    n++;
                    continue;
                }
                char *tok = strtok(p, " \t,=");
                if (!tok)
                    continue;
                char *vtok = map ? strtok(NULL, " \t,=") : NULL;
                uint64_t v = 0;
                if (!parse_u64(tok, &keys[n]) || (map && (!vtok || !parse_u64(vtok, &v)))) {
                    fprintf(stderr, "\nfloe: %s line %ld: expected %s\n", path, lineno,
                            map ? "KEY VALUE (decimal or 0x-hex)" : "a key (decimal or 0x-hex)");
                    rc = EXIT_USAGE;
                    eof = true;
                    n = 0;
                    break;
                }
                if (map)
                    memcpy(vals + n * t.value_bytes, &v, t.value_bytes);
                n++;
            }
        }
        if (n) {
            while (ld.inflight >= window)
                if (floe_poll(c, -1) < 0)
                    break;
            ld.inflight++;
            if (tree)
                floe_send_insert_vectors(c, table, vecs, n, words, 0, on_loaded, &ld);
            else
                floe_send_insert(c, table, keys, n, map ? vals : NULL, map ? n * t.value_bytes : 0, 0, on_loaded, &ld);
            sent += n;
        }
        double el = now() - t0;
        if (el - last > 0.2) {
            progress(total > 0 ? (double)ftell(f) : 0, total, sent, el, false, noun);
            last = el;
        }
    }
    if (floe_wait_all(c) != FLOE_OK && ld.status == FLOE_OK) {
        ld.status = floe_error(c);
        snprintf(ld.error, sizeof ld.error, "%s", floe_errstr(c));
    }
    double secs = now() - t0;
    if (rc == 0)
        progress(total, total, sent, secs, true, noun);
    if (f != stdin)
        fclose(f);
    free(line);
    free(keys);
    free(vals);
    free(vecs);
    if (ld.status != FLOE_OK) {
        fprintf(stderr, "floe: %s: %s\n", floe_strerror(ld.status), ld.error);
        return 1;
    }
    if (rc)
        return rc;
    printf("loaded %" PRIu64 " %s into %s in %.2f s (%.2f M %s/s): inserted %" PRIu64 ", present %" PRIu64
           ", full %" PRIu64 "\n",
           sent, noun, table, secs, secs > 0 ? sent / secs / 1e6 : 0.0, noun, ld.total.inserted, ld.total.present,
           ld.total.full);
    return ld.total.full ? 1 : 0;
}

/* Every vector of a TREE: ID VECTOR per line. */
static int dump_tree(floe *c, const floe_table_info *t)
{
    const unsigned words = t->words;
    size_t page = ((size_t)32 << 20) / ((size_t)words * 4 + 8); /* the server's own bound per reply */
    if (page > 65536)
        page = 65536;
    uint64_t *ids = malloc(page * 8);
    uint32_t *vecs = malloc(page * words * 4);
    if (!ids || !vecs) {
        free(ids);
        free(vecs);
        return usage_error("out of memory");
    }
    floe_cursor cur = {{0}, 0};
    int done = 0, st = FLOE_OK;
    while (!done) {
        size_t n;
        st = floe_scan_vectors(c, t->name, &cur, page, words, ids, vecs, &n, &done);
        if (st)
            break;
        for (size_t i = 0; i < n; i++) {
            printf("%" PRIu64 " ", ids[i]);
            print_vector(vecs + i * words, words);
            putchar('\n');
        }
    }
    free(ids);
    free(vecs);
    return st ? fail(c, st) : 0;
}

static int cmd_dump(floe *c, int argc, char **argv)
{
    bool values = false;
    const char *table = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--values") == 0)
            values = true;
        else if (!table)
            table = argv[i];
        else
            return usage_error("dump: unexpected argument '%s'", argv[i]);
    }
    if (!table)
        return usage_error("dump needs a table name");
    floe_table_info t;
    if (table_shape(c, table, &t))
        return 1;
    if (values && t.kind != FLOE_TABLE_MAP)
        return usage_error("dump --values is for MAP tables; %s is a %s", table, kind_name(t.kind));
    if (t.kind == FLOE_TABLE_TREE)
        return dump_tree(c, &t);
    enum { PAGE = 65536 };
    uint64_t *keys = malloc(PAGE * 8);
    unsigned char *vals = malloc(PAGE * 8);
    floe_cursor cur = {{0}, 0};
    int done = 0, st = FLOE_OK;
    while (!done) {
        size_t n;
        st = floe_scan(c, table, &cur, PAGE, keys, values ? vals : NULL, t.value_bytes, &n, &done);
        if (st)
            break;
        for (size_t i = 0; i < n; i++) {
            if (values) {
                uint64_t v = 0;
                memcpy(&v, vals + i * t.value_bytes, t.value_bytes);
                printf("%" PRIu64 " %" PRIu64 "\n", keys[i], v);
            } else {
                printf("%" PRIu64 "\n", keys[i]);
            }
        }
    }
    free(keys);
    free(vals);
    return st ? fail(c, st) : 0;
}

static const cmd CMDS[] = {
    {"ping", "", "check that the server answers, and how fast", cmd_ping},
    {"info", "", "the server's version, backend and limits", cmd_info},
    {"tables", "", "list the tables with their sizes", cmd_tables},
    {"create",
     "NAME [--kind set|map|tree] [--key-bits N] [--value-bytes 4|8] [--words N] [--capacity N] [--memory SIZE] "
     "[--grow] [--max-fill F] [--backend cpu|gpu|auto]",
     "create a table (defaults: SET, 64-bit keys, capacity 1 Mi, no growth; MAP values 8 bytes). TREE: vectors of "
     "--words N 32-bit words (2..256), --memory bytes for its node and root tables (default: from --capacity). "
     "Sizes take K, M, G, T (powers of 1024)",
     cmd_create},
    {"drop", "NAME", "drop a table and everything in it", cmd_drop},
    {"stats", "NAME",
     "a table's figures: keys, fill per level, memory, bytes per key (TREE: vectors, nodes, node fill, bytes per "
     "vector, compression, orphan nodes)",
     cmd_stats},
    {"insert", "NAME [KEY... | KEY=VALUE... | VECTOR...]",
     "find-or-put keys (MAP: KEY=VALUE, upsert; TREE: vectors 1,2,3,... of exactly `words` words, answered "
     "VECTOR ANSWER ID); no keys: read them from stdin, one per line",
     cmd_insert},
    {"find", "NAME [KEY... | VECTOR...]",
     "look keys up (MAP: with their values; TREE: vectors 1,2,3,..., with their ids); no keys: stdin", cmd_find},
    {"erase", "NAME [KEY...]", "erase keys (not on a TREE); no keys: stdin", cmd_erase},
    {"get", "NAME [ID...]",
     "TREE: the vector of each id, ID 1,2,3,... per line (ID ABSENT for an id that names none); no ids: stdin",
     cmd_get},
    {"load", "NAME FILE [--binary] [--batch N]",
     "bulk insert from FILE (- for stdin): text, one key per line (MAP: KEY VALUE; TREE: a vector 1,2,3,...), or "
     "--binary raw little-endian u64 keys (TREE: `words` u32 words per vector); shows progress and a summary; "
     "exits 1 if any key came back FULL",
     cmd_load},
    {"dump", "NAME [--values]", "print every key (MAP --values: KEY VALUE; TREE: ID VECTOR) one per line", cmd_dump},
    {"snapshot", "[NAME]", "save a table (or all) into the server's data-dir", cmd_snapshot},
};
#define NCMDS (sizeof CMDS / sizeof CMDS[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: floe [-H HOST:PORT | -H floe://HOST:PORT] [--token T] COMMAND [ARGS]\n\n"
               "The command-line client of floed (default server 127.0.0.1:7450; also $FLOE_SERVER, $FLOE_TOKEN).\n"
               "Keys are decimal or 0x-hex numbers below 2^key_bits of the table; a TREE table's keys are vectors\n"
               "of `words` 32-bit words, written 1,2,3,...\n\nCommands:\n");
    for (size_t i = 0; i < NCMDS; i++)
        fprintf(f, "  %-9s %s\n", CMDS[i].name, CMDS[i].help);
    fprintf(f, "\n`floe COMMAND --help` shows a command's arguments. Exit code: 0 ok, 1 error from the server or "
               "the connection, 2 usage.\n");
}

int main(int argc, char **argv)
{
    const char *server = getenv("FLOE_SERVER"), *token = getenv("FLOE_TOKEN");
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if ((strcmp(argv[i], "-H") == 0 || strcmp(argv[i], "--host") == 0) && i + 1 < argc) {
            server = argv[++i];
        } else if (strcmp(argv[i], "--token") == 0 && i + 1 < argc) {
            token = argv[++i];
        } else {
            usage(stderr);
            return usage_error("unknown option '%s'", argv[i]);
        }
    }
    if (i >= argc) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const cmd *cm = NULL;
    for (size_t k = 0; k < NCMDS; k++)
        if (strcmp(argv[i], CMDS[k].name) == 0)
            cm = &CMDS[k];
    if (!cm)
        return usage_error("unknown command '%s' (floe --help lists them)", argv[i]);
    for (int k = i + 1; k < argc; k++) {
        if (strcmp(argv[k], "--help") == 0 || strcmp(argv[k], "-h") == 0) {
            printf("usage: floe %s %s\n%s\n", cm->name, cm->args, cm->help);
            return 0;
        }
    }
    floe *c;
    int st = floe_connect(server ? server : "127.0.0.1:7450", token, &c);
    if (st != FLOE_OK) {
        fprintf(stderr, "floe: %s: %s\n", floe_strerror(st), floe_errstr(c));
        floe_close(c);
        return 1;
    }
    int rc = cm->run(c, argc - i - 1, argv + i + 1);
    floe_close(c);
    return rc;
}
