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
    return kind == FLOE_TABLE_SET ? "SET" : kind == FLOE_TABLE_MAP ? "MAP" : "?";
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

/* Keys from argv, or (when none) one per line on stdin. */
static int read_keys(int argc, char **argv, bool with_value, keylist *kl)
{
    memset(kl, 0, sizeof *kl);
    if (argc > 0) {
        for (int i = 0; i < argc; i++) {
            if (add_key(kl, argv[i], with_value, "argument")) {
                free_keys(kl);
                return EXIT_USAGE;
            }
        }
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
        if (add_key(kl, p, with_value, where)) {
            free(line);
            free_keys(kl);
            return EXIT_USAGE;
        }
    }
    free(line);
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

static void print_info(const floe_table_info *t, bool long_form)
{
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
            else
                return usage_error("create: --kind is set or map, not '%s'", v);
        } else if (strcmp(o, "--key-bits") == 0 && parse_u64(v, &x) && x <= 64) {
            d.key_bits = (unsigned)x;
        } else if (strcmp(o, "--value-bytes") == 0 && parse_u64(v, &x) && x <= 64) {
            d.value_bytes = (unsigned)x;
        } else if (strcmp(o, "--capacity") == 0 && parse_u64(v, &x)) {
            d.capacity = x;
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

static int key_command(floe *c, int argc, char **argv, int op)
{
    if (argc < 1)
        return usage_error("%s needs a table name", op == 0 ? "insert" : op == 1 ? "find" : "erase");
    const char *table = argv[0];
    floe_table_info t;
    if (table_shape(c, table, &t))
        return 1;
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

static void progress(double done, double total, uint64_t keys, double secs, bool final)
{
    if (!isatty(STDERR_FILENO) && !final)
        return;
    int width = 30, fill = total > 0 ? (int)(width * done / total) : width;
    if (fill > width)
        fill = width;
    fprintf(stderr, "\r[%.*s%*s] %5.1f%% %" PRIu64 " keys %.1f M keys/s%s", fill, "##############################",
            width - fill, "", total > 0 ? 100.0 * done / total : 100.0, keys, secs > 0 ? keys / secs / 1e6 : 0.0,
            final ? "\n" : "");
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
    bool map = t.kind == FLOE_TABLE_MAP;
    if (map && binary)
        return usage_error("load --binary is for SET tables (8-byte keys); load a MAP from text 'KEY VALUE' lines");
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, binary ? "rb" : "r");
    if (!f) {
        fprintf(stderr, "floe: cannot open %s: %s\n", path, strerror(errno));
        return 1;
    }
    struct stat sb;
    double total = fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) ? (double)sb.st_size : 0;
    uint64_t *keys = malloc(batch * 8);
    unsigned char *vals = malloc(batch * 8);
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
            n = fread(keys, 8, batch, f);
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
            floe_send_insert(c, table, keys, n, map ? vals : NULL, map ? n * t.value_bytes : 0, 0, on_loaded, &ld);
            sent += n;
        }
        double el = now() - t0;
        if (el - last > 0.2) {
            progress(total > 0 ? (double)ftell(f) : 0, total, sent, el, false);
            last = el;
        }
    }
    if (floe_wait_all(c) != FLOE_OK && ld.status == FLOE_OK) {
        ld.status = floe_error(c);
        snprintf(ld.error, sizeof ld.error, "%s", floe_errstr(c));
    }
    double secs = now() - t0;
    if (rc == 0)
        progress(total, total, sent, secs, true);
    if (f != stdin)
        fclose(f);
    free(line);
    free(keys);
    free(vals);
    if (ld.status != FLOE_OK) {
        fprintf(stderr, "floe: %s: %s\n", floe_strerror(ld.status), ld.error);
        return 1;
    }
    if (rc)
        return rc;
    printf("loaded %" PRIu64 " keys into %s in %.2f s (%.2f M keys/s): inserted %" PRIu64 ", present %" PRIu64
           ", full %" PRIu64 "\n",
           sent, table, secs, secs > 0 ? sent / secs / 1e6 : 0.0, ld.total.inserted, ld.total.present, ld.total.full);
    return ld.total.full ? 1 : 0;
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
     "NAME [--kind set|map] [--key-bits N] [--value-bytes 4|8] [--capacity N] [--grow] [--max-fill F] "
     "[--backend cpu|gpu|auto]",
     "create a table (defaults: SET, 64-bit keys, capacity 1 Mi, no growth; MAP values 8 bytes)", cmd_create},
    {"drop", "NAME", "drop a table and everything in it", cmd_drop},
    {"stats", "NAME", "a table's figures: keys, fill per level, memory, bytes per key", cmd_stats},
    {"insert", "NAME [KEY... | KEY=VALUE...]",
     "find-or-put keys (MAP: KEY=VALUE, upsert); no keys: read them from stdin, one per line", cmd_insert},
    {"find", "NAME [KEY...]", "look keys up (MAP: with their values); no keys: stdin", cmd_find},
    {"erase", "NAME [KEY...]", "erase keys; no keys: stdin", cmd_erase},
    {"load", "NAME FILE [--binary] [--batch N]",
     "bulk insert from FILE (- for stdin): text, one key per line (MAP: KEY VALUE), or --binary raw little-endian "
     "u64 keys; shows progress and a summary; exits 1 if any key came back FULL",
     cmd_load},
    {"dump", "NAME [--values]", "print every key (MAP --values: KEY VALUE) one per line", cmd_dump},
    {"snapshot", "[NAME]", "save a table (or all) into the server's data-dir", cmd_snapshot},
};
#define NCMDS (sizeof CMDS / sizeof CMDS[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: floe [-H HOST:PORT | -H floe://HOST:PORT] [--token T] COMMAND [ARGS]\n\n"
               "The command-line client of floed (default server 127.0.0.1:7450; also $FLOE_SERVER, $FLOE_TOKEN).\n"
               "Keys are decimal or 0x-hex numbers below 2^key_bits of the table.\n\nCommands:\n");
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
