/*
 * cli_keys.c - the CLI's commands that send keys: insert, find, erase and
 * get in parts of a frame each, load with a progress bar, dump, and the
 * ORDERED commands (range, succ, pred, min, max).
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
#include "ops.h"

/* ---- insert, find, erase: keys (TREE: vectors) sent in parts ----------------------------------- */

/* Items of item_bytes each that fit in half of the server's max-frame
 * (32 MiB at most): the rest of the frame is room for the other fields. */
static size_t frame_items(floe *c, size_t item_bytes)
{
    uint64_t budget = floe_info(c)->max_frame / 2;
    if (!budget || budget > ((uint64_t)32 << 20))
        budget = (uint64_t)32 << 20;
    uint64_t n = budget / (item_bytes ? item_bytes : 1);
    return n ? (size_t)n : 1;
}

/* Items per request of insert, find, erase and get: as `load` sends them. */
static size_t part_size(floe *c, size_t item_bytes)
{
    size_t n = frame_items(c, item_bytes);
    return n < 65536 ? n : 65536;
}

typedef floe_call *send_part_fn(floe *c, void *ctx, size_t at, size_t n);
/* Prints the answers of items at..at+n; NULL, or why the reply is malformed. */
typedef const char *print_part_fn(void *ctx, floe_call *call, size_t at, size_t n);

/* Sends total items in requests of at most chunk, WINDOW of them in flight,
 * and prints the answers in order as they come back (the server answers
 * requests on one table in the order sent).  The first error stops the
 * sending; answers of the requests already out are still printed.  At
 * least one request goes out, so that an empty list still meets the
 * server's checks.  Returns the exit code. */
static int send_in_parts(floe *c, size_t total, size_t chunk, send_part_fn *send, print_part_fn *print, void *ctx,
                         const char *noun)
{
    struct part {
        floe_call *call;
        size_t at, n;
    } ring[WINDOW];
    size_t head = 0, count = 0, at = 0, answered = 0;
    bool sent_any = false;
    int err = FLOE_OK;
    char msg[512] = "";
    floe_counts sum = {0};
    while (count > 0 || (err == FLOE_OK && (at < total || !sent_any))) {
        if (err == FLOE_OK && (at < total || !sent_any) && count < WINDOW) {
            size_t n = total - at < chunk ? total - at : chunk;
            floe_call *call = send(c, ctx, at, n);
            sent_any = true;
            if (!call) {
                err = FLOE_ERR_IO;
                snprintf(msg, sizeof msg, "out of memory");
                continue;
            }
            ring[(head + count) % WINDOW] = (struct part){call, at, n};
            count++;
            at += n;
            continue;
        }
        struct part p = ring[head];
        head = (head + 1) % WINDOW;
        count--;
        int st = floe_wait(c, p.call);
        const char *why = st == FLOE_OK ? print(ctx, p.call, p.at, p.n) : floe_call_error(p.call);
        if (st == FLOE_OK && why)
            st = FLOE_ERR_PROTOCOL;
        if (st == FLOE_OK) {
            floe_counts k;
            floe_call_counts(p.call, &k);
            sum.inserted += k.inserted, sum.present += k.present, sum.absent += k.absent;
            sum.full += k.full, sum.erased += k.erased;
            answered += p.n;
        } else if (err == FLOE_OK) {
            err = st;
            if (total > p.n)
                snprintf(msg, sizeof msg, "%s (%s %zu..%zu of %zu; later ones not sent)", why, noun, p.at + 1,
                         p.at + p.n, total);
            else
                snprintf(msg, sizeof msg, "%s", why);
        }
        floe_call_free(p.call);
    }
    if (err == FLOE_OK || answered > 0)
        print_summary(&sum);
    if (err != FLOE_OK) {
        fprintf(stderr, "floe: %s%s%s\n", floe_strerror(err), msg[0] ? ": " : "", msg);
        return 1;
    }
    return 0;
}

/* A command on keys is an operation row's (tables/ops.h): whether it
 * takes values and answers them is the row's, the request is the
 * operation's by its name (floe_send_keys). */
typedef struct key_job {
    const char *table;
    const keylist *kl;
    int op; /* FLOE_OP_* */
    bool map;
    unsigned flags;      /* FLOE_OVERWRITE, FLOE_WANT_VALUES */
    unsigned vb;         /* MAP: value bytes */
    unsigned char *vals; /* a part's values, packed (a MAP insert's values, an add's deltas) */
} key_job;

static floe_call *send_keys(floe *c, void *ctx, size_t at, size_t n)
{
    key_job *j = ctx;
    for (size_t i = 0; j->vals && i < n; i++)
        memcpy(j->vals + i * j->vb, &j->kl->values[at + i], j->vb);
    return floe_send_keys(c, floe_op_name(j->op), j->table, j->kl->keys ? j->kl->keys + at : NULL, n * 8, j->vals,
                          j->vals ? n * j->vb : 0, j->flags, NULL, NULL);
}

/* KEY ANSWER [VALUE] per key (MAP insert: the value before, or the new one
 * where INSERTED; MAP find: the stored value; add: the value after). */
static const char *print_keys(void *ctx, floe_call *call, size_t at, size_t n)
{
    key_job *j = ctx;
    size_t got, vgot;
    const uint8_t *res = floe_call_results(call, &got);
    const unsigned char *vals = floe_call_values(call, &vgot);
    const bool with_values = j->map && floe_op_has(j->op, FLOE_OPF_VALUES_OUT);
    if (got != n || (with_values && vgot != n * j->vb))
        return "the server's answer does not match the keys sent";
    for (size_t i = 0; i < n; i++) {
        printf("%" PRIu64 " %s", j->kl->keys[at + i], floe_answer_name(res[i]));
        if (with_values && res[i] != FLOE_ABSENT && res[i] != FLOE_FULL) {
            uint64_t v = 0;
            memcpy(&v, vals + i * j->vb, j->vb);
            printf(" %" PRIu64, v);
        }
        putchar('\n');
    }
    return NULL;
}

typedef struct vec_job {
    const floe_table_info *t;
    const veclist *vl;
    int op; /* FLOE_OP_INSERT, FLOE_OP_FIND */
} vec_job;

static floe_call *send_vecs(floe *c, void *ctx, size_t at, size_t n)
{
    vec_job *j = ctx;
    const uint32_t *v = j->vl->v ? j->vl->v + at * j->t->words : NULL;
    return j->op == FLOE_OP_INSERT
               ? floe_send_insert_vectors(c, j->t->name, v, n, j->t->words, FLOE_WANT_IDS, NULL, NULL)
               : floe_send_find_vectors(c, j->t->name, v, n, j->t->words, FLOE_WANT_IDS, NULL, NULL);
}

/* VECTOR ANSWER [ID] per vector. */
static const char *print_vecs(void *ctx, floe_call *call, size_t at, size_t n)
{
    vec_job *j = ctx;
    const unsigned words = j->t->words;
    size_t got, idb;
    const uint8_t *res = floe_call_results(call, &got);
    const unsigned char *ids = floe_call_ids(call, &idb);
    if (got != n || idb != n * 8)
        return "the server's answer does not match the vectors sent";
    for (size_t i = 0; i < n; i++) {
        print_vector(j->vl->v + (at + i) * words, words);
        printf(" %s", floe_answer_name(res[i]));
        if (res[i] == FLOE_INSERTED || res[i] == FLOE_PRESENT) {
            uint64_t id;
            memcpy(&id, ids + i * 8, 8);
            printf(" %" PRIu64, id);
        }
        putchar('\n');
    }
    return NULL;
}

/* Whether every key is below 2^key_bits of table t; if not, says which
 * (an argument the table cannot take is a usage error, as a malformed one). */
static int keys_fit(const keylist *kl, const floe_table_info *t)
{
    for (size_t i = 0; t->key_bits < 64 && i < kl->n; i++)
        if (kl->keys[i] >> t->key_bits) {
            fprintf(stderr,
                    "floe: ERR_INVALID: key %" PRIu64 " (key %zu of %zu) is not below 2^%u, the key width of table "
                    "%s; nothing was sent\n",
                    kl->keys[i], i + 1, kl->n, t->key_bits, t->name);
            return 1;
        }
    return 0;
}

static int key_command(floe *c, int argc, char **argv, int op)
{
    const char *table = argv[0];
    floe_table_info t;
    if (table_shape(c, table, &t))
        return 1;
    if (!floe_op_for_kind(op, t.kind)) { /* the server's refusal in its words: the request with no keys */
        const keylist none = {0};
        key_job j = {table, &none, op, false, 0, 0, NULL};
        return send_in_parts(c, 0, 1, send_keys, print_keys, &j, "keys");
    }
    if (t.kind == FLOE_TABLE_TREE) {
        veclist vl;
        if (read_vectors(argc - 1, argv + 1, &t, &vl))
            return EXIT_USAGE;
        vec_job j = {&t, &vl, op};
        int rc = send_in_parts(c, vl.n, part_size(c, (size_t)t.words * 4), send_vecs, print_vecs, &j, "vectors");
        free(vl.v);
        return rc;
    }
    const bool map = has_values(&t);
    keylist kl;
    const bool with_values = map && floe_op_has(op, FLOE_OPF_VALUES_IN);
    if (read_keys(argc - 1, argv + 1, with_values, &kl))
        return EXIT_USAGE;
    /* Every key is read and checked before the first request: a bad one
     * anywhere changes nothing, even when the keys go in several requests. */
    if (keys_fit(&kl, &t)) {
        free_keys(&kl);
        return EXIT_USAGE;
    }
    const unsigned vb = map ? t.value_bytes : 0;
    for (size_t i = 0; with_values && i < kl.n; i++) {
        if (!cli_value_fits(kl.values[i], vb)) {
            fprintf(stderr,
                    "floe: ERR_INVALID: %s %" PRIu64 " (key %zu of %zu) does not fit the %u-byte values of table %s; "
                    "nothing was sent\n",
                    floe_op_has(op, FLOE_OPF_DELTAS) ? "delta" : "value", kl.values[i], i + 1, kl.n, vb, table);
            free_keys(&kl);
            return EXIT_USAGE;
        }
    }
    const size_t chunk = part_size(c, 8 + (with_values ? vb : 0));
    /* a MAP insert from the CLI sets the values; a find on a MAP shows them */
    const unsigned flags = (map && op == FLOE_OP_INSERT ? FLOE_OVERWRITE : 0) |
                           (map && !with_values && floe_op_has(op, FLOE_OPF_VALUES_OUT) ? FLOE_WANT_VALUES : 0);
    key_job j = {table, &kl, op, map, flags, vb, NULL};
    if (with_values && !(j.vals = malloc(chunk * vb + 8))) {
        free_keys(&kl);
        return usage_error("out of memory");
    }
    int rc = send_in_parts(c, kl.n, chunk, send_keys, print_keys, &j, "keys");
    free(j.vals);
    free_keys(&kl);
    return rc;
}

int cmd_insert(floe *c, const opts *o, int argc, char **argv)
{
    return key_command(c, argc, argv, FLOE_OP_INSERT);
}

int cmd_find(floe *c, const opts *o, int argc, char **argv)
{
    return key_command(c, argc, argv, FLOE_OP_FIND);
}

int cmd_erase(floe *c, const opts *o, int argc, char **argv)
{
    return key_command(c, argc, argv, FLOE_OP_ERASE);
}

/* add: KEY=DELTA arguments (or KEY DELTA lines on stdin); KEY DELTA KEY DELTA ... pairs too. */
int cmd_add(floe *c, const opts *o, int argc, char **argv)
{
    bool pairs = argc > 1;
    for (int i = 1; i < argc; i++)
        pairs = pairs && !strpbrk(argv[i], "= \t");
    if (!pairs)
        return key_command(c, argc, argv, FLOE_OP_ADD);
    if ((argc - 1) % 2)
        return usage_error("add: key %s has no delta (KEY DELTA pairs, or KEY=DELTA)", argv[argc - 1]);
    const int n = (argc - 1) / 2;
    char **args = calloc((size_t)n + 1, sizeof *args);
    if (!args)
        return usage_error("out of memory");
    int rc = 0;
    args[0] = argv[0];
    for (int i = 0; rc == 0 && i < n; i++)
        if (asprintf(&args[i + 1], "%s=%s", argv[1 + 2 * i], argv[2 + 2 * i]) < 0)
            rc = usage_error("out of memory");
    if (rc == 0)
        rc = key_command(c, n + 1, args, FLOE_OP_ADD);
    for (int i = 1; i <= n; i++)
        free(args[i]);
    free(args);
    return rc;
}

/* get_by_id: ID VECTOR (or ID ABSENT) per id. */
int cmd_get(floe *c, const opts *o, int argc, char **argv)
{
    const char *table = argv[0];
    floe_table_info t;
    if (table_shape(c, table, &t))
        return 1;
    keylist kl;
    if (read_keys(argc - 1, argv + 1, false, &kl))
        return EXIT_USAGE;
    /* Not a TREE: ask anyway with a dummy width, and the server says why not. */
    const unsigned words = t.kind == FLOE_TABLE_TREE ? t.words : 1;
    /* the answer must fit in a frame too: words * 4 bytes per id */
    size_t chunk = part_size(c, (size_t)words * 4 > 8 ? (size_t)words * 4 : 8);
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

/* The progress line: done of total bytes read (total 0: a stream of unknown
 * length; below 0: a stream that stopped short, no percentage). */
static void progress(double done, double total, uint64_t keys, double secs, bool final, const char *noun)
{
    if (!isatty(STDERR_FILENO) && !final)
        return;
    int width = 30, fill = total > 0 ? (int)(width * done / total) : total == 0 ? width : 0;
    if (fill > width)
        fill = width;
    char pct[16] = "    -";
    if (total >= 0)
        snprintf(pct, sizeof pct, "%5.1f%%", total > 0 ? 100.0 * done / total : 100.0);
    fprintf(stderr, "\r[%.*s%*s] %s %" PRIu64 " %s %.1f M %s/s%s", fill, "##############################", width - fill,
            "", pct, keys, noun, secs > 0 ? keys / secs / 1e6 : 0.0, noun, final ? "\n" : "");
}

int cmd_load(floe *c, const opts *o, int argc, char **argv)
{
    const bool binary = o->binary;
    size_t batch = o->batch;
    const char *table = argv[0], *path = argv[1];
    floe_table_info t;
    if (table_shape(c, table, &t))
        return 1;
    bool map = has_values(&t), tree = t.kind == FLOE_TABLE_TREE;
    if (map && binary)
        return usage_error("load --binary is for tables of keys only (8-byte keys); load a %s with values from text "
                           "'KEY VALUE' lines",
                           kind_name(t.kind));
    const unsigned words = tree ? t.words : 0;
    const char *noun = tree ? "vectors" : "keys";
    const size_t frame_cap = frame_items(c, tree ? (size_t)words * 4 : 8 + (map ? t.value_bytes : 0));
    if (batch > frame_cap)
        batch = frame_cap;
    if (strcmp(path, "-") == 0 && cli_stdin_is_commands)
        return usage_error("load: give a file (in a session stdin carries the commands)");
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, binary ? "rb" : "r");
    if (!f) {
        fprintf(stderr, "floe: cannot open %s: %s\n", path, strerror(errno));
        return 1;
    }
    const char *fname = f == stdin ? "stdin" : path; /* in messages */
    struct stat sb;
    const bool have_stat = fstat(fileno(f), &sb) == 0;
    if (have_stat && S_ISDIR(sb.st_mode)) {
        fclose(f);
        return usage_error("load: %s is a directory, not a file of %s", path, noun);
    }
    double total = have_stat && S_ISREG(sb.st_mode) ? (double)sb.st_size : 0;
    const size_t item = tree ? (size_t)words * 4 : 8; /* bytes of one key or vector in a --binary file */
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
    uint64_t sent = 0;
    double t0 = now(), last = 0;
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    int rc = 0;
    char stopped[CLI_MSG_MAX + 400] = ""; /* why the file was not read to its end */
    /* Each batch read is sent, also the keys before a bad line or a partial key: the load stops
     * there, with what went before it inserted (the docs' promise). */
    for (bool eof = false; !eof && ld.status == FLOE_OK;) {
        size_t n = 0;
        if (binary) {
            void *to = tree ? (void *)vecs : (void *)keys;
            const size_t got = fread(to, 1, batch * item, f);
            n = got / item;
            eof = got < batch * item;
            if (eof && ferror(f)) {
                snprintf(stopped, sizeof stopped, "reading %s: %s", fname, strerror(errno));
                rc = 1;
            } else if (got % item) {
                snprintf(stopped, sizeof stopped,
                         "%s ends with a partial %s: %zu bytes after the last whole one (of %zu bytes)", fname,
                         tree ? "vector" : "key", got % item, item);
                rc = EXIT_USAGE;
            }
        } else {
            while (n < batch) {
                ssize_t len = getline(&line, &cap, f);
                if (len < 0) {
                    eof = true;
                    if (ferror(f)) {
                        snprintf(stopped, sizeof stopped, "reading %s: %s", fname, strerror(errno));
                        rc = 1;
                    }
                    break;
                }
                lineno++;
                if (tree) {
                    char *p = cli_trim_line(line);
                    if (!*p)
                        continue;
                    char where[300], msg[CLI_MSG_MAX];
                    snprintf(where, sizeof where, "%s line %ld", fname, lineno);
                    if (cli_parse_vector(p, words, table, vecs + n * words, where, msg, sizeof msg)) {
                        snprintf(stopped, sizeof stopped, "%s", msg);
                        rc = EXIT_USAGE;
                        eof = true;
                        break;
                    }
                    n++;
                    continue;
                }
                uint64_t v = 0;
                const int got = cli_parse_load_line(line, map, &keys[n], &v);
                if (got == 0)
                    continue;
                if (got < 0)
                    snprintf(stopped, sizeof stopped, "%s line %ld: expected %s and nothing else", fname, lineno,
                             map ? "KEY VALUE (decimal or 0x-hex)" : "a key (decimal or 0x-hex)");
                else if (t.key_bits < 64 && keys[n] >> t.key_bits)
                    snprintf(stopped, sizeof stopped,
                             "%s line %ld: key %" PRIu64 " is not below 2^%u, the key width of %s", fname, lineno,
                             keys[n], t.key_bits, table);
                else if (map && !cli_value_fits(v, t.value_bytes))
                    snprintf(stopped, sizeof stopped,
                             "%s line %ld: value %" PRIu64 " does not fit the %u-byte values of %s", fname, lineno, v,
                             t.value_bytes, table);
                if (stopped[0]) {
                    rc = EXIT_USAGE;
                    eof = true;
                    break;
                }
                if (map)
                    memcpy(vals + n * t.value_bytes, &v, t.value_bytes);
                n++;
            }
        }
        if (binary && !tree)
            for (size_t i = 0; t.key_bits < 64 && i < n; i++)
                if (keys[i] >> t.key_bits) {
                    snprintf(stopped, sizeof stopped,
                             "%s: key %" PRIu64 " (key %" PRIu64 " of the file) is not below 2^%u, the key width of %s",
                             fname, keys[i], sent + i + 1, t.key_bits, table);
                    rc = EXIT_USAGE;
                    eof = true;
                    n = i;
                    break;
                }
        if (n) {
            while (ld.inflight >= WINDOW)
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
    /* the bar ends where the reading did: 100% only for a file read whole and answered */
    const bool whole = rc == 0 && ld.status == FLOE_OK;
    progress(whole ? total : total > 0 ? (double)ftell(f) : 0, whole || total > 0 ? total : -1, sent, secs, true, noun);
    if (f != stdin)
        fclose(f);
    free(line);
    free(keys);
    free(vals);
    free(vecs);
    if (stopped[0])
        fprintf(stderr, "floe: %s\n", stopped);
    if (ld.status != FLOE_OK)
        fprintf(stderr, "floe: %s: %s\n", floe_strerror(ld.status), ld.error);
    if (!whole) { /* what went in before it stopped */
        fprintf(stderr,
                "floe: load stopped after %" PRIu64 " %s sent to %s: inserted %" PRIu64 ", present %" PRIu64
                ", full %" PRIu64 " (%s answered)\n",
                sent, noun, table, ld.total.inserted, ld.total.present, ld.total.full,
                ld.total.inserted + ld.total.present + ld.total.full == sent ? "every one" : "not every one");
        return ld.status != FLOE_OK ? 1 : rc;
    }
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

int cmd_dump(floe *c, const opts *o, int argc, char **argv)
{
    const bool values = o->values;
    const char *table = argv[0];
    floe_table_info t;
    if (table_shape(c, table, &t))
        return 1;
    if (values && !has_values(&t))
        return usage_error("dump --values is for MAP tables and ORDERED tables with values; %s is a %s%s", table,
                           kind_name(t.kind), t.kind == FLOE_TABLE_ORDERED ? " of keys only" : "");
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

/* ---- ORDERED tables: range, succ, pred, min, max --------------------------------------------- */

/* A key of the table given as an argument: 0, or the exit code. */
static int bound_arg(const char *text, const floe_table_info *t, const char *what, uint64_t *out)
{
    if (!cli_parse_u64(text, out))
        return usage_error("range: %s must be a key (decimal or 0x-hex), not '%s'", what, text);
    if (t->key_bits < 64 && *out >> t->key_bits)
        return usage_error("range: %s %" PRIu64 " is not below 2^%u, the key width of table %s", what, *out,
                           t->key_bits, t->name);
    return 0;
}

static void print_key_value(uint64_t key, const unsigned char *vals, size_t i, unsigned vb)
{
    printf("%" PRIu64, key);
    if (vals) {
        uint64_t v = 0;
        memcpy(&v, vals + i * vb, vb);
        printf(" %" PRIu64, v);
    }
    putchar('\n');
}

int cmd_range(floe *c, const opts *o, int argc, char **argv)
{
    const char *table = argv[0];
    floe_table_info t;
    if (table_shape(c, table, &t) || ordered_only(&t, "range"))
        return 1;
    if (o->values && !has_values(&t))
        return usage_error("range --values is for ORDERED tables with values; %s has none", table);
    uint64_t lo, hi;
    int rc = bound_arg(argv[1], &t, "LO", &lo);
    if (!rc)
        rc = bound_arg(argv[2], &t, "HI", &hi);
    if (rc)
        return rc;
    if (lo > hi)
        return usage_error("range: LO %" PRIu64 " is above HI %" PRIu64 " (--desc walks [LO, HI] from HI down)", lo,
                           hi);
    const size_t page_max = frame_items(c, 8 + t.value_bytes);
    const size_t page = page_max < 65536 ? page_max : 65536;
    uint64_t *keys = malloc(page * 8);
    unsigned char *vals = malloc(page * 8 + 8);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return usage_error("out of memory");
    }
    floe_range_cursor cur;
    memset(&cur, 0, sizeof cur);
    uint64_t left = o->limit ? o->limit : UINT64_MAX;
    int done = 0, st = FLOE_OK;
    while (!done && left > 0) {
        size_t n, want = left < page ? (size_t)left : page;
        st = floe_range(c, table, lo, hi, o->desc ? FLOE_RANGE_DESC : 0, &cur, want, keys, o->values ? vals : NULL,
                        t.value_bytes, &n, &done);
        if (st)
            break;
        for (size_t i = 0; i < n; i++)
            print_key_value(keys[i], o->values ? vals : NULL, i, t.value_bytes);
        left -= n;
    }
    free(keys);
    free(vals);
    return st ? fail(c, st) : 0;
}

typedef struct nb_job {
    const char *table;
    const keylist *kl;
    bool pred, values;
    unsigned vb;
} nb_job;

static floe_call *send_neighbours(floe *c, void *ctx, size_t at, size_t n)
{
    nb_job *j = ctx;
    const unsigned flags = j->values ? FLOE_WANT_VALUES : 0;
    return j->pred ? floe_send_predecessor(c, j->table, j->kl->keys + at, n, flags, NULL, NULL)
                   : floe_send_successor(c, j->table, j->kl->keys + at, n, flags, NULL, NULL);
}

/* KEY NEIGHBOUR [VALUE], or KEY none. */
static const char *print_neighbours(void *ctx, floe_call *call, size_t at, size_t n)
{
    nb_job *j = ctx;
    size_t got, kb, vgot;
    const uint8_t *res = floe_call_results(call, &got);
    const unsigned char *found = floe_call_keys(call, &kb), *vals = floe_call_values(call, &vgot);
    if (got != n || kb != n * 8 || (j->values && vgot != n * j->vb))
        return "the server's answer does not match the keys sent";
    for (size_t i = 0; i < n; i++) {
        printf("%" PRIu64 " ", j->kl->keys[at + i]);
        if (res[i] != FLOE_PRESENT) {
            printf("none\n");
            continue;
        }
        uint64_t k;
        memcpy(&k, found + i * 8, 8);
        print_key_value(k, j->values ? vals : NULL, i, j->vb);
    }
    return NULL;
}

static int neighbours_command(floe *c, const opts *o, int argc, char **argv, bool pred)
{
    const char *table = argv[0];
    floe_table_info t;
    if (table_shape(c, table, &t) || ordered_only(&t, pred ? "pred" : "succ"))
        return 1;
    if (o->values && !has_values(&t))
        return usage_error("%s --values is for ORDERED tables with values; %s has none", pred ? "pred" : "succ", table);
    keylist kl;
    if (read_keys(argc - 1, argv + 1, false, &kl))
        return EXIT_USAGE;
    if (keys_fit(&kl, &t)) {
        free_keys(&kl);
        return EXIT_USAGE;
    }
    nb_job j = {table, &kl, pred, o->values, t.value_bytes};
    int rc = send_in_parts(c, kl.n, part_size(c, 16 + t.value_bytes), send_neighbours, print_neighbours, &j, "keys");
    free_keys(&kl);
    return rc;
}

int cmd_succ(floe *c, const opts *o, int argc, char **argv)
{
    return neighbours_command(c, o, argc, argv, false);
}

int cmd_pred(floe *c, const opts *o, int argc, char **argv)
{
    return neighbours_command(c, o, argc, argv, true);
}

static int bound_command(floe *c, const opts *o, const char *table, bool max)
{
    floe_table_info t;
    if (table_shape(c, table, &t) || ordered_only(&t, max ? "max" : "min"))
        return 1;
    if (o->values && !has_values(&t))
        return usage_error("%s --values is for ORDERED tables with values; %s has none", max ? "max" : "min", table);
    int found;
    uint64_t key;
    unsigned char v[8];
    int st = (max ? floe_max : floe_min)(c, table, &found, &key, o->values ? v : NULL, t.value_bytes);
    if (st)
        return fail(c, st);
    if (!found) {
        fprintf(stderr, "floe: table %s is empty\n", table);
        return 1;
    }
    print_key_value(key, o->values ? v : NULL, 0, t.value_bytes);
    return 0;
}

int cmd_min(floe *c, const opts *o, int argc, char **argv)
{
    return bound_command(c, o, argv[0], false);
}

int cmd_max(floe *c, const opts *o, int argc, char **argv)
{
    return bound_command(c, o, argv[0], true);
}
