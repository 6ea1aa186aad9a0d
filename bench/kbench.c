/*
 * kbench.c - floe-kbench: the K1 kernel benchmark of docs/PERFORMANCE.md on the CPU
 * engine, scaled to the machine.
 *
 * K1: a table of 2^S primary slots (32 per bucket) plus 2^(S-3) secondary
 * and 2^(S-8) stash slots, 40-bit unique random keys, keys already in memory.
 * Rows (fill = occupied slots / all slots):
 *   put         fill 0 -> 0.5, 0.5 -> 0.8, 0.8 -> 0.9
 *   find-hit    every key stored, at fill 0.9
 *   find-miss   no key stored, at fill 0.9
 *   find-or-put a stream in which every key occurs twice, fill 0 -> 0.8
 * Keys go through the public batch API (iceberg_insert / iceberg_find) in
 * batches of --batch keys, so the figures include in-batch deduplication.
 * Each row is the median of --runs runs on fresh tables.
 *
 * --static: S1 scaled: the keys K1 fills its table with to 0.9, built into a
 * STATIC table (tables/cuckoo.h) sized for fill FLOE_CUCKOO_FILL, then found (all hits,
 * all misses), beside the same finds on the K1 table, in the same run.
 *
 * --grow: G1 scaled: --keys unique random 40-bit keys in batches of --batch
 * into a SET (then a MAP of 8-byte values) created with the default
 * capacity and growth on, and into one sized for them, in the same run:
 * the rate over the whole run and the slowest batch against the median one
 * (a stall is what a client feels).
 *
 * --ordered: O1 on the CPU engine of ORDERED tables (tables/ordered.h),
 * scaled: --keys unique random 64-bit keys with 8-byte values inserted in
 * batches into an empty table; find all hits and all misses; successors of
 * random keys; ranges of about 32 keys.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuckoo.h"
#include "iceberg.h"
#include "layout.h"
#include "ordered.h"
#include "pool.h"

enum { ROW_PUT05, ROW_PUT08, ROW_PUT09, ROW_HIT, ROW_MISS, ROW_FOP, ROWS };
static const char *const ROW_NAMES[ROWS] = {
    "put, fill 0 -> 0.5",       "put, fill 0.5 -> 0.8",       "put, fill 0.8 -> 0.9",
    "find, all hits, fill 0.9", "find, all misses, fill 0.9", "find-or-put, every key twice, fill 0 -> 0.8",
};

typedef struct options {
    unsigned log2_slots;
    unsigned runs;
    size_t batch;
    unsigned threads;
    unsigned key_bits;
    bool ordered;
    bool is_static;
    bool grow;
    size_t keys; /* --ordered, --grow */
} options;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, const floe_errinfo *e)
{
    fprintf(stderr, "floe-kbench: %s: %s\n", what, e->msg);
    exit(1);
}

/* Runs keys[0..n) through the table in batches; returns seconds. */
static double timed(iceberg *t, int insert, const uint64_t *keys, size_t n, size_t batch, uint8_t *res,
                    floe_answer_counts *total)
{
    floe_errinfo err;
    memset(total, 0, sizeof *total);
    double t0 = now();
    for (size_t at = 0; at < n; at += batch) {
        size_t m = n - at < batch ? n - at : batch;
        floe_answer_counts c;
        floe_status st = insert ? iceberg_insert(t, keys + at, m, NULL, 0, 0, res, NULL, NULL, &c, &err)
                                : iceberg_find(t, keys + at, m, res, NULL, NULL, &c, &err);
        if (st != FLOE_OK)
            die("batch", &err);
        total->inserted += c.inserted;
        total->present += c.present;
        total->absent += c.absent;
        total->full += c.full;
    }
    return now() - t0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: floe-kbench [options]\n"
               "K1 kernel benchmark on the CPU engine (see bench/kbench.c and docs/PERFORMANCE.md).\n"
               "  --log2-slots S   primary slots 2^S (default 24; K1 in docs/PERFORMANCE.md uses 30)\n"
               "  --runs R         runs per row, the median is reported (default 5)\n"
               "  --batch B        keys per batch call (default 1048576)\n"
               "  --threads T      pool threads, 0 = one per CPU (default 0)\n"
               "  --key-bits K     key width (default 40)\n"
               "  --static         instead: S1, a STATIC table of K1's keys at fill 0.9 beside K1's table\n"
               "  --grow           instead: G1, --keys keys into tables that grow from the default capacity,\n"
               "                   beside tables sized for them: rate, and the slowest batch against the median\n"
               "  --ordered        instead: O1 on the ORDERED engine, scaled (see docs/PERFORMANCE.md)\n"
               "  --keys N         with --ordered or --grow: keys inserted (default 4194304)\n"
               "  --help           this text\n");
}

static void parse(int argc, char **argv, options *o)
{
    static const struct option longopts[] = {
        {"log2-slots", required_argument, NULL, 's'},
        {"runs", required_argument, NULL, 'r'},
        {"batch", required_argument, NULL, 'b'},
        {"threads", required_argument, NULL, 't'},
        {"key-bits", required_argument, NULL, 'k'},
        {"ordered", no_argument, NULL, 'o'},
        {"static", no_argument, NULL, 'S'},
        {"grow", no_argument, NULL, 'g'},
        {"keys", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (options){24, 5, (size_t)1 << 20, 0, 40, false, false, false, (size_t)1 << 22};
    int c;
    while ((c = getopt_long(argc, argv, "s:r:b:t:k:h", longopts, NULL)) != -1) {
        char *end = NULL;
        unsigned long long v = 0;
        if (c != 'h' && c != '?' && c != 'o' && c != 'S' && c != 'g') {
            v = strtoull(optarg, &end, 10);
            if (!end || *end || end == optarg) {
                fprintf(stderr, "floe-kbench: -%c needs a number, got '%s'\n", c, optarg);
                exit(2);
            }
        }
        switch (c) {
        case 's':
            o->log2_slots = (unsigned)v;
            break;
        case 'r':
            o->runs = (unsigned)v;
            break;
        case 'b':
            o->batch = (size_t)v;
            break;
        case 't':
            o->threads = (unsigned)v;
            break;
        case 'k':
            o->key_bits = (unsigned)v;
            break;
        case 'o':
            o->ordered = true;
            break;
        case 'S':
            o->is_static = true;
            break;
        case 'g':
            o->grow = true;
            break;
        case 'n':
            o->keys = (size_t)v;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            exit(2);
        }
    }
    if (o->log2_slots < 10 || o->log2_slots > 34 || o->runs < 1 || o->batch < 1 || o->key_bits < 30 ||
        o->key_bits > 64 || o->keys < 1024) {
        fprintf(stderr, "floe-kbench: need 10 <= --log2-slots <= 34, --runs >= 1, --batch >= 1, "
                        "30 <= --key-bits <= 64, --keys >= 1024\n");
        exit(2);
    }
}

enum { O_INSERT, O_HIT, O_MISS, O_SUCC, O_RANGE, O_ROWS };
static const char *const O_NAMES[O_ROWS] = {
    "insert into an empty table",
    "find, all hits",
    "find, all misses",
    "successor of random keys",
    "ranges of about 32 keys (keys returned)",
};

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "floe-kbench: %s\n", what);
        exit(1);
    }
}

/* O1 on the ORDERED engine: M operations (range: keys returned) a second. */
static int run_o1(const options *o, floe_pool *pool)
{
    const size_t n = o->keys, b = o->batch < n ? o->batch : n;
    floe_errinfo err;
    floe_spec spec;
    floe_spec_default(&spec);
    strcpy(spec.name, "o1");
    spec.kind = FLOE_KIND_ORDERED;
    spec.key_bits = 64;
    spec.value_bytes = 8;
    floe_perm keygen; /* unique keys: a bijection on 64 bits of a counter; the first n stored */
    floe_perm_init(&keygen, 64, 4242, 0);
    uint64_t *keys = malloc(2 * n * 8), *vals = malloc(n * 8), *found = malloc(b * 8), *out = malloc(b * 8);
    uint8_t *res = malloc(b);
    check(keys && vals && found && out && res, "out of memory");
    for (size_t i = 0; i < 2 * n; i++)
        keys[i] = floe_permute(&keygen, i);
    for (size_t i = 0; i < n; i++)
        vals[i] = keys[i] ^ 0xABCDull;
    printf("# floe-kbench --ordered: O1 scaled, %zu random 64-bit keys with 8-byte values, batches of %zu, "
           "%u threads, median of %u runs\n",
           n, b, floe_pool_width(pool), o->runs);
    double *rate[O_ROWS];
    for (int r = 0; r < O_ROWS; r++)
        rate[r] = calloc(o->runs, sizeof(double));
    double bpk = 0;
    const uint64_t span = UINT64_MAX / n * 32; /* about 32 stored keys a range */
    for (unsigned run = 0; run < o->runs; run++) {
        ordered *t;
        if (ordered_create(&spec, pool, &t, &err) != FLOE_OK)
            die("create", &err);
        floe_answer_counts c, all = {0};
        double s = now();
        for (size_t at = 0; at < n; at += b) {
            const size_t m = n - at < b ? n - at : b;
            ordered_insert(t, keys + at, vals + at, m, false, res, NULL, &c, &err);
            all.inserted += c.inserted;
        }
        rate[O_INSERT][run] = (double)n / (now() - s) / 1e6;
        check(all.inserted == n, "insert: not every key INSERTED");
        for (int miss = 0; miss < 2; miss++) {
            uint64_t hits = 0;
            s = now();
            for (size_t at = 0; at < n; at += b) {
                const size_t m = n - at < b ? n - at : b;
                ordered_find(t, keys + miss * n + at, m, res, out, &c, &err);
                hits += c.present;
            }
            rate[miss ? O_MISS : O_HIT][run] = (double)n / (now() - s) / 1e6;
            check(hits == (miss ? 0 : n), "find: answers do not add up");
        }
        uint64_t some = 0;
        s = now();
        for (size_t at = 0; at < n; at += b) { /* the misses are random keys */
            const size_t m = n - at < b ? n - at : b;
            ordered_neighbours(t, false, keys + n + at, m, res, found, out, &err);
            for (size_t i = 0; i < m; i++)
                some += res[i] == FLOE_PRESENT;
        }
        rate[O_SUCC][run] = (double)n / (now() - s) / 1e6;
        check(some > n / 2, "successor: too few found");
        const size_t ranges = n / 32 < 1 ? 1 : n / 32;
        uint64_t returned = 0;
        s = now();
        for (size_t i = 0; i < ranges; i++) {
            const uint64_t lo = keys[n + i], hi = lo > UINT64_MAX - span ? UINT64_MAX : lo + span;
            size_t got;
            uint64_t next;
            bool done;
            ordered_range(t, lo, hi, false, b, found, out, &got, &next, &done);
            returned += got;
        }
        rate[O_RANGE][run] = (double)returned / (now() - s) / 1e6;
        floe_table_stats st;
        ordered_stats(t, &st);
        check(st.keys == n, "stats: keys do not add up");
        bpk = st.bytes_per_key;
        ordered_destroy(t);
        fprintf(stderr, "run %u/%u done\n", run + 1, o->runs);
    }
    printf("| row | M per second (median) | min | max |\n|---|---|---|---|\n");
    for (int r = 0; r < O_ROWS; r++) {
        qsort(rate[r], o->runs, sizeof(double), cmp_double);
        printf("| %s | %.1f | %.1f | %.1f |\n", O_NAMES[r], rate[r][o->runs / 2], rate[r][0], rate[r][o->runs - 1]);
        free(rate[r]);
    }
    printf("# memory: %.2f bytes per key (8-byte keys and values in leaves of %u, inner nodes of %u)\n", bpk,
           ORD_LEAF_KEYS, ORD_FANOUT);
    free(keys);
    free(vals);
    free(found);
    free(out);
    free(res);
    return 0;
}

/* G1 scaled: M keys/s over the whole run, and the slowest batch against
 * the median one, for a SET and a MAP (8-byte values) that grow from the
 * default capacity and for ones sized for the keys, in turn, median of runs. */
static int run_g1(const options *o, floe_pool *pool)
{
    const size_t n = o->keys, b = o->batch < n ? o->batch : n, batches = (n + b - 1) / b;
    floe_perm keygen;
    floe_perm_init(&keygen, 40, 777, 0);
    uint64_t *keys = malloc(n * 8), *vals = malloc(n * 8);
    uint8_t *res = malloc(b);
    double *lat = malloc(batches * sizeof *lat);
    check(keys && vals && res && lat, "out of memory");
    for (size_t i = 0; i < n; i++) {
        keys[i] = floe_permute(&keygen, i);
        vals[i] = i;
    }
    printf("# floe-kbench --grow: G1 scaled, %zu unique random 40-bit keys in batches of %zu, %u threads, median "
           "of %u runs\n",
           n, b, floe_pool_width(pool), o->runs);
    printf("| table | M keys/s (median) | slowest batch / median batch (median) | slowest batch, ms | growths | "
           "allocated / used, most after a growth |\n"
           "|---|---|---|---|---|---|\n");
    for (int map = 0; map < 2; map++)
        for (int sized = 0; sized < 2; sized++) {
            double *rate = calloc(o->runs, sizeof(double)), *ratio = calloc(o->runs, sizeof(double));
            double *worst = calloc(o->runs, sizeof(double));
            check(rate && ratio && worst, "out of memory");
            uint64_t growths = 0;
            double spare =
                0; /* the table's bytes over those its keys fill (1 / fill), most after a batch that grew it */
            for (unsigned run = 0; run < o->runs; run++) {
                floe_spec spec;
                floe_errinfo err;
                floe_spec_default(&spec);
                strcpy(spec.name, "g1");
                spec.key_bits = 40;
                spec.value_bytes = map ? 8 : 0;
                spec.kind = map ? FLOE_KIND_MAP : FLOE_KIND_SET;
                spec.grow = 1;
                if (sized)
                    spec.capacity = n;
                iceberg *t;
                if (iceberg_create(&spec, pool, &t, &err) != FLOE_OK)
                    die("create", &err);
                const double s = now();
                uint64_t seen = 0; /* growths seen so far in this run */
                for (size_t k = 0; k < batches; k++) {
                    const size_t at = k * b, m = n - at < b ? n - at : b;
                    floe_answer_counts c;
                    const double t0 = now();
                    if (iceberg_insert(t, keys + at, m, map ? vals + at : NULL, map ? m * 8 : 0, FLOE_VALUES_KEEP, res,
                                       NULL, NULL, &c, &err) != FLOE_OK)
                        die("insert", &err);
                    lat[k] = now() - t0;
                    check(c.inserted == m, "insert: not every key INSERTED");
                    if (iceberg_generation(t) != seen) { /* timed apart from the batches */
                        floe_table_stats st;
                        iceberg_stats(t, &st);
                        seen = iceberg_generation(t);
                        if (st.fill > 0 && 1.0 / st.fill > spare)
                            spare = 1.0 / st.fill;
                    }
                }
                rate[run] = (double)n / (now() - s) / 1e6;
                growths = iceberg_generation(t);
                qsort(lat, batches, sizeof *lat, cmp_double);
                worst[run] = lat[batches - 1] * 1e3;
                ratio[run] = lat[batches - 1] / lat[batches / 2];
                iceberg_destroy(t);
            }
            qsort(rate, o->runs, sizeof(double), cmp_double);
            qsort(ratio, o->runs, sizeof(double), cmp_double);
            qsort(worst, o->runs, sizeof(double), cmp_double);
            char sp[32] = "(none)";
            if (spare > 0)
                snprintf(sp, sizeof sp, "%.2f", spare);
            printf("| %s, %s | %.1f | %.1f | %.1f | %llu | %s |\n", map ? "MAP (8-byte values)" : "SET",
                   sized ? "sized for the keys" : "grown from the default capacity", rate[o->runs / 2],
                   ratio[o->runs / 2], worst[o->runs / 2], (unsigned long long)growths, sp);
            free(rate);
            free(ratio);
            free(worst);
        }
    free(keys);
    free(vals);
    free(res);
    free(lat);
    return 0;
}

/* S1 scaled: keys[0..n) (K1's, at fill 0.9 of its table) built into a STATIC
 * table sized for fill 0.95, found (keys[0..n): all hits; keys[n..2n): all
 * misses); beside the K1 table's finds of the same keys in the same runs. */
static int run_s1(const options *o, floe_pool *pool, const uint64_t *keys, size_t n, double *k1_hit, double *k1_miss,
                  double k1_bpk)
{
    enum { S_BUILD, S_HIT, S_MISS, S_ROWS };
    static const char *const names[S_ROWS] = {"build (on the pool)", "find, all hits", "find, all misses"};
    double *rate[S_ROWS];
    for (int r = 0; r < S_ROWS; r++)
        rate[r] = calloc(o->runs, sizeof(double));
    uint8_t *res = malloc(n);
    check(res != NULL, "out of memory");
    double bpk = 0, fill = 0;
    for (unsigned run = 0; run < o->runs; run++) {
        cuckoo *t;
        floe_errinfo err;
        double s = now();
        if (cuckoo_build(o->key_bits, 0, 0x5EED + run, FLOE_CUCKOO_FILL, keys, NULL, n, pool, &t, &err) != FLOE_OK)
            die("static build", &err);
        rate[S_BUILD][run] = (double)n / (now() - s) / 1e6;
        for (int miss = 0; miss < 2; miss++) {
            floe_answer_counts c = {0};
            s = now();
            for (size_t at = 0; at < n; at += o->batch) {
                const size_t m = n - at < o->batch ? n - at : o->batch;
                floe_answer_counts part;
                cuckoo_find(t, keys + miss * n + at, m, res, NULL, NULL, &part, pool);
                c.present += part.present;
            }
            rate[miss ? S_MISS : S_HIT][run] = (double)n / (now() - s) / 1e6;
            check(c.present == (miss ? 0 : n), "static find: answers do not add up");
        }
        bpk = (double)cuckoo_bytes(t) / (double)n;
        fill = (double)n / (double)floe_cuckoo_slots(cuckoo_geometry(t));
        cuckoo_destroy(t);
    }
    printf("# S1 scaled: the %zu keys of K1 at fill 0.9 in a STATIC table (compact cuckoo, %u slots a bucket, "
           "%u choices) at fill %.3f; K1's table beside it, same runs\n",
           n, FLOE_CUCKOO_SLOTS, FLOE_CUCKOO_CHOICES, fill);
    printf("| row | STATIC, M keys/s (median) | min | max | K1 table (median) |\n|---|---|---|---|---|\n");
    for (int r = 0; r < S_ROWS; r++) {
        qsort(rate[r], o->runs, sizeof(double), cmp_double);
        double *k1 = r == S_HIT ? k1_hit : r == S_MISS ? k1_miss : NULL;
        if (k1)
            qsort(k1, o->runs, sizeof(double), cmp_double);
        char beside[32] = "-";
        if (k1)
            snprintf(beside, sizeof beside, "%.1f", k1[o->runs / 2]);
        printf("| %s | %.1f | %.1f | %.1f | %s |\n", names[r], rate[r][o->runs / 2], rate[r][0], rate[r][o->runs - 1],
               beside);
        free(rate[r]);
    }
    printf("# memory: %.3f bytes per key (K1's table at fill 0.9: %.3f)\n", bpk, k1_bpk);
    free(res);
    return 0;
}

int main(int argc, char **argv)
{
    options o;
    parse(argc, argv, &o);
    floe_errinfo err;
    floe_pool *pool;
    if (floe_pool_create(o.threads, &pool, &err) != FLOE_OK)
        die("pool", &err);
    if (o.ordered || o.grow) {
        const int rc = o.ordered ? run_o1(&o, pool) : run_g1(&o, pool);
        floe_pool_destroy(pool);
        return rc;
    }
    floe_spec spec;
    floe_spec_default(&spec);
    strcpy(spec.name, "k1");
    spec.key_bits = o.key_bits;
    spec.capacity = (uint64_t)1 << o.log2_slots;
    spec.seed = 0x5EED;
    const uint32_t addr_bits = o.log2_slots - 5; /* 32 slots per primary bucket */
    floe_geometry g;
    floe_geometry_init(&g, o.key_bits, addr_bits, 0, spec.seed);
    const uint64_t slots = g.total_slots;
    const size_t n09 = (size_t)(0.9 * (double)slots), n05 = (size_t)(0.5 * (double)slots),
                 n08 = (size_t)(0.8 * (double)slots);

    /* Unique keys: a bijection on key_bits applied to a counter; the first
     * n09 are stored, the next n09 are misses. */
    floe_perm keygen;
    floe_perm_init(&keygen, o.key_bits, 12345, 0);
    uint64_t *keys = malloc(2 * n09 * sizeof *keys);
    uint64_t *twice = malloc(2 * n08 * sizeof *twice);
    uint8_t *res = malloc(o.batch);
    if (!keys || !twice || !res) {
        fprintf(stderr, "floe-kbench: out of memory for %zu keys\n", 2 * n09);
        return 1;
    }
    for (size_t i = 0; i < 2 * n09; i++)
        keys[i] = floe_permute(&keygen, i);
    /* every key of the first n08 twice, shuffled */
    uint64_t rs = 99;
    for (size_t i = 0; i < 2 * n08; i++)
        twice[i] = keys[i / 2];
    for (size_t i = 2 * n08 - 1; i > 0; i--) {
        rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
        size_t j = (size_t)(rs % (i + 1));
        uint64_t x = twice[i];
        twice[i] = twice[j];
        twice[j] = x;
    }

    printf("# floe-kbench: K1 on the CPU engine, %u threads\n", floe_pool_width(pool));
    printf("# table: 2^%u primary slots (%u-bit rows) + 2^%u secondary (%u-bit) + 2^%u stash (%u-bit) = %llu slots, "
           "%u-bit keys, batches of %zu, median of %u runs\n",
           o.log2_slots, g.level[0].row_bits, g.level[1].addr_bits + 4, g.level[1].row_bits, g.level[2].addr_bits + 4,
           g.level[2].row_bits, (unsigned long long)slots, o.key_bits, o.batch, o.runs);

    double *mks[ROWS];
    for (int r = 0; r < ROWS; r++)
        mks[r] = calloc(o.runs, sizeof(double));
    double bpk = 0;
    for (unsigned run = 0; run < o.runs; run++) {
        iceberg *t;
        floe_answer_counts c;
        if (iceberg_create_sized(&spec, addr_bits, 0, pool, &t, &err) != FLOE_OK)
            die("create", &err);
        double s;
        s = timed(t, 1, keys, n05, o.batch, res, &c);
        mks[ROW_PUT05][run] = (double)n05 / s / 1e6;
        s = timed(t, 1, keys + n05, n08 - n05, o.batch, res, &c);
        mks[ROW_PUT08][run] = (double)(n08 - n05) / s / 1e6;
        s = timed(t, 1, keys + n08, n09 - n08, o.batch, res, &c);
        mks[ROW_PUT09][run] = (double)(n09 - n08) / s / 1e6;
        floe_table_stats st;
        iceberg_stats(t, &st);
        if (st.keys != n09) {
            fprintf(stderr, "floe-kbench: table holds %llu keys after the puts, expected %zu\n",
                    (unsigned long long)st.keys, n09);
            return 1;
        }
        bpk = st.bytes_per_key;
        s = timed(t, 0, keys, n09, o.batch, res, &c);
        if (c.present != n09) {
            fprintf(stderr, "floe-kbench: find-hit found %llu of %zu\n", (unsigned long long)c.present, n09);
            return 1;
        }
        mks[ROW_HIT][run] = (double)n09 / s / 1e6;
        s = timed(t, 0, keys + n09, n09, o.batch, res, &c);
        if (c.absent != n09) {
            fprintf(stderr, "floe-kbench: find-miss found %llu keys that were never stored\n",
                    (unsigned long long)c.present);
            return 1;
        }
        mks[ROW_MISS][run] = (double)n09 / s / 1e6;
        iceberg_destroy(t);

        if (iceberg_create_sized(&spec, addr_bits, 0, pool, &t, &err) != FLOE_OK)
            die("create", &err);
        s = timed(t, 1, twice, 2 * n08, o.batch, res, &c);
        if (c.inserted != n08 || c.present != n08) {
            fprintf(stderr, "floe-kbench: find-or-put answered %llu INSERTED, %llu PRESENT; expected %zu each\n",
                    (unsigned long long)c.inserted, (unsigned long long)c.present, n08);
            return 1;
        }
        mks[ROW_FOP][run] = (double)(2 * n08) / s / 1e6;
        iceberg_destroy(t);
        fprintf(stderr, "run %u/%u done\n", run + 1, o.runs);
    }
    if (o.is_static) {
        const int rc = run_s1(&o, pool, keys, n09, mks[ROW_HIT], mks[ROW_MISS], bpk);
        free(keys);
        free(twice);
        free(res);
        floe_pool_destroy(pool);
        return rc;
    }
    printf("| row | M keys/s (median) | min | max |\n|---|---|---|---|\n");
    for (int r = 0; r < ROWS; r++) {
        qsort(mks[r], o.runs, sizeof(double), cmp_double);
        printf("| %s | %.1f | %.1f | %.1f |\n", ROW_NAMES[r], mks[r][o.runs / 2], mks[r][0], mks[r][o.runs - 1]);
        free(mks[r]);
    }
    printf("# memory at fill 0.9: %.3f bytes per key\n", bpk);
    free(keys);
    free(twice);
    free(res);
    floe_pool_destroy(pool);
    return 0;
}
