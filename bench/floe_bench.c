/*
 * floe_bench.c - floe-bench, the load generator of docs/PERFORMANCE.md (E1, E2): a
 * memtier-style client that drives floed through libfloe's pipelined API
 * and reports throughput, latency percentiles and every answer it got.
 *
 * Threads and connections: --threads T threads, each owning --connections C
 * libfloe connections (all made by the main thread before the run, then
 * handed over).  A thread keeps up to --pipeline P requests in flight on each
 * of its connections and multiplexes them with one ppoll(2) over their
 * sockets (floe_fd), calling floe_poll(c, 0) on the ready ones; answers come
 * back through callbacks.  Closed loop by default (a slot is refilled as soon
 * as it frees); with --rate, open loop: request j of a connection is due at a
 * fixed time, and its latency is measured from that time, not from when it
 * could actually be sent, so a slow server shows as latency instead of
 * quietly lowering the load (no coordinated omission).
 *
 * Keys come from bench/workload.c, which makes them so that every answer is
 * known in advance; when the run created the table and does not erase, each
 * answer is checked and the INSERTED count must equal the distinct keys
 * sent.  Latencies go into per-thread log-linear histograms
 * (bench/histogram.c), merged at the end; the main thread prints a progress
 * line each second from per-thread "last second" histograms that it swaps
 * out under a per-thread mutex.
 *
 * Exit status: 0 success, 1 the run failed (connection, request errors, FULL
 * answers, a wrong answer or count), 2 a usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "floe.h"
#include "floe_getopt.h"
#include "histogram.h"
#include "workload.h"

#define EXIT_FAILED 1
#define EXIT_USAGE  2

#define DEFAULT_SERVER   "floe://127.0.0.1:7450"
#define DEFAULT_CAPACITY (UINT64_C(16) << 20)       /* --duration runs: then the table grows */
#define ERR_SLOTS        (FLOE_STATUS_MAX + 4)      /* status codes 0..FLOE_STATUS_MAX, ERR_IO, ERR_PROTOCOL, other */
#define NS               1000000000ull

static const char *const DIST_NAMES[] = {"uniform", "sequential", "hotset"};

typedef struct options {
    const char *server, *table, *backend;
    floe_options conn; /* token, timeouts, TLS */
    unsigned threads, conns, pipeline;
    uint64_t keys; /* per request */
    unsigned ratio[WL_OPS];
    double dup_ratio;
    unsigned key_bits, value_bytes, words;
    bool key_bits_set, value_bytes_set, words_set, kind_set, hot_set;
    int kind, distribution;
    double hot_fraction;
    uint64_t hot_keys, seed;
    bool create, keep;
    uint64_t capacity;
    int grow; /* -1: the default for the run */
    double duration, rate, warmup;
    uint64_t requests; /* per connection; 0: --duration */
    bool quiet, json;
} options;

/* One request in flight: what the answer must be, and when it started. */
typedef struct slot {
    struct conn *conn;
    uint64_t start_ns; /* sent, or with --rate scheduled */
    uint8_t *expect;   /* keys_per_request bytes */
    uint64_t seq;      /* the connection's request number, from 1 */
    uint32_t n;
    uint8_t op;
    bool busy;
    uint64_t lo; /* a range's first key */
} slot;

typedef struct conn {
    floe *c;
    struct worker *w;
    wl_stream stream;
    slot *slots; /* pipeline of them */
    unsigned inflight;
    uint64_t sent;
    uint64_t index; /* 0 .. threads * connections - 1 */
    uint64_t op_rng;
    bool dead;
} conn;

/* What one thread measured after the warm-up (merged at the end). */
typedef struct stats {
    histogram lat[WL_OPS];
    uint64_t requests[WL_OPS], keys[WL_OPS];
    uint64_t answers[5];
    uint64_t last_ns; /* the last completion */
} stats;

typedef struct worker {
    pthread_t tid;
    conn *conns;
    unsigned nconns;
    uint64_t *keys; /* request buffers, reused (libfloe copies at send) */
    uint32_t *vectors;
    unsigned char *values;
    struct pollfd *pfds;
    conn **ready;
    stats st;
    /* over the whole run, warm-up included: the check and the exit status */
    uint64_t errors[ERR_SLOTS];
    uint64_t inserted, full, mismatches;
    char problem[320]; /* the first error or wrong answer, for the report */
    /* the last second, for the progress line: under mu */
    pthread_mutex_t mu;
    histogram tick_lat;
    uint64_t tick_requests, tick_keys, tick_errors;
} worker;

static struct run {
    options opt;
    floe_table_info before; /* stats when the run began: the stage timers' zero */
    bool have_before;
    uint64_t before_ns;
    wl_spec spec;
    uint64_t total_conns;
    uint64_t t0, measure_start, deadline; /* ns; deadline 0: --requests */
    double interval_ns;                   /* --rate: between requests of one connection */
    bool check;                           /* answers are known: the table is ours and nothing is erased */
    unsigned op_total;
    atomic_int stop;
    atomic_uint finished;
} R;

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("floe-bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (floe-bench --help)\n", stderr);
    va_end(ap);
    return EXIT_USAGE;
}

static int run_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("floe-bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\n", stderr);
    va_end(ap);
    return EXIT_FAILED;
}

/* ---- options ------------------------------------------------------------------------------------ */

static void usage(void)
{
    printf("usage: floe-bench [OPTIONS]\n"
           "\n"
           "Load generator for floed: T threads x C connections each keep P requests of K keys in\n"
           "flight (libfloe's pipelined calls), then print throughput, latency percentiles and the\n"
           "answers.  When the run created its table and does not erase, it knows every answer in\n"
           "advance and checks them: any wrong answer, FULL answer or request error fails the run.\n"
           "\n"
           "Connection:\n"
           "  -s, --server URI          floe://host:port, floes://host:port (TLS) or host:port\n"
           "                            (default $FLOE_SERVER, else " DEFAULT_SERVER "); a list\n"
           "                            floe://h1:p1,h2:p2,... partitions the table over them\n");
    floe_getopt_help(stdout, 6, 28, NULL);
    printf("Load shape:\n"
           "  -t, --threads T           client threads (default 1)\n"
           "  -c, --connections C       connections per thread (default 1; T x C in all)\n"
           "  -P, --pipeline P          requests in flight per connection (default 1)\n"
           "  -k, --keys-per-request K  keys (TREE: vectors) per request; a range asks for K keys\n"
           "                            (default 1; 64K = 65536)\n"
           "      --rate R              open loop: R requests/s in all, at fixed intervals; latency is\n"
           "                            measured from each request's scheduled time (default: closed\n"
           "                            loop, as fast as answers come back)\n"
           "Duration (one of):\n"
           "  -d, --duration S          seconds to send, after the warm-up (default 10)\n"
           "  -n, --requests N          requests per connection\n"
           "      --warmup S            seconds of load before measuring (default 0); the report covers\n"
           "                            requests started after it, the check covers the whole run\n"
           "Workload:\n"
           "      --ratio I:F:E[:S[:R[:A]]]  insert (find-or-put) : find : erase : successor : range :\n"
           "                            add, per request (default 1:0:0:0:0:0); S and R are for ORDERED\n"
           "                            tables: a range asks for the K keys from a key on (from a stored\n"
           "                            key of the connection as often as --dup-ratio says, as a find);\n"
           "                            A is for MAP tables: value += delta, keys drawn as an insert's\n"
           "      --dup-ratio D         0..1: the fraction of keys that repeat a key the same connection\n"
           "                            already inserted (default 0).  In an insert a repeat answers\n"
           "                            PRESENT, a new key INSERTED; in a find a repeat is a hit\n"
           "                            (PRESENT) and the rest are misses (ABSENT): D is the hit ratio\n"
           "      --distribution DIST   uniform: new keys spread over the key space (default);\n"
           "                            sequential: new keys count up (connection g's i-th new key is\n"
           "                            i x connections + g); hotset: like uniform, but a fraction of\n"
           "                            the requests take all their keys from a small hot set shared\n"
           "                            by every connection\n"
           "      --hotset-fraction F   hotset: the fraction of requests on the hot set (default 0.9)\n"
           "      --hotset-keys H       hotset: keys in the hot set (default 1024)\n"
           "      --key-bits B          SET, MAP, ORDERED: keys below 2^B (default 64, or the table's)\n"
           "      --seed S              key generation seed (default 1): the same seed, the same keys\n"
           "Table:\n"
           "      --table NAME          (default bench)\n"
           "      --kind set|map|tree|ordered\n"
           "                            (default set, or the table's kind when it exists)\n"
           "      --value-bytes 0|4|8   MAP values, 4 or 8 (default 8); ORDERED: 0 (keys only), 4 or 8\n"
           "                            (default 8)\n"
           "      --words N             TREE: 32-bit words per vector, 2..256 (default 16)\n"
           "      --create              create the table first and drop it at the end\n"
           "      --keep                with --create: keep the table\n"
           "      --capacity N          with --create: keys to hold (default: with --requests, every\n"
           "                            key the run can send; with --duration, 16M, and the table grows)\n"
           "      --grow, --no-grow     with --create: let the table grow (any kind; default: with\n"
           "                            --duration yes, with --requests no, so that FULL shows)\n"
           "      --backend cpu|gpu|auto  with --create: where the table lives (default: floed's)\n"
           "Output:\n"
           "  -q, --quiet               no progress line (one a second on stderr otherwise)\n"
           "      --json                the report as one JSON object on stdout\n"
           "  -h, --help                this text\n"
           "      --version             floe-bench's and libfloe's versions\n"
           "\n"
           "Keys: each connection makes new keys of its own, distinct by construction (a seeded\n"
           "bijection of the key space), so the run knows which keys are new; with finds or erases in\n"
           "the mix, half of the key space is kept for misses.  TREE vectors come from one random walk\n"
           "per connection: word 0 is the connection, word 1 a step counter, and each step sets one\n"
           "of the other words to a value below 4 half of the time (one or two words change per step,\n"
           "so subtrees are shared as in T1, docs/PERFORMANCE.md).  --distribution sequential is uniform\n"
           "there.\n"
           "\n"
           "Report (stdout): per operation and in all: requests, keys, requests/s, keys/s and latency\n"
           "p50/p90/p99/p99.9/max in microseconds (histograms with 1%% precision from 1 us to 18 min);\n"
           "answers (INSERTED, PRESENT, ABSENT, FULL, ERASED; a range's keys count as keys, with no\n"
           "answers); errors by status name; the table's keys and bytes per key, and how often it was\n"
           "rebuilt during the run (a table that grows: each rebuild holds its requests while its keys\n"
           "move); the check; and where floed spent the run's time: the table's stage timers (stats\n"
           "before and after the run; docs/PROTOCOL.md, StageTime), each with its seconds summed over\n"
           "floed's threads and its share of the run (over 100%% when several threads share a stage).\n"
           "Seconds run from the end of the warm-up to the last answer.\n"
           "\n"
           "JSON keys: config {server, kind, table, threads, connections_per_thread, connections,\n"
           "pipeline, keys_per_request, ratio {insert, find, erase, succ, range, add}, dup_ratio, distribution,\n"
           "hotset_fraction, hotset_keys, key_bits, value_bytes, words, seed, rate, duration,\n"
           "requests_per_connection, warmup, created}, interrupted (SIGINT or SIGTERM: the run stopped\n"
           "early, answered what was in flight and reported), seconds, requests, keys, requests_per_sec,\n"
           "keys_per_sec, latency_us {p50, p90, p99, p99_9, max, min, mean}, ops {insert|find|erase|succ|range|add:\n"
           "{requests, keys, requests_per_sec, keys_per_sec, latency_us}}, answers {INSERTED, PRESENT,\n"
           "ABSENT, FULL, ERASED}, errors {STATUS_NAME: count}, table {keys, bytes_per_key, fill,\n"
           "rebuilds, backend} or null, stages {seconds, STAGE: {count, keys, seconds}} or null, check {status:\n"
           "ok|failed|skipped, distinct_keys_sent, inserted,\n"
           "mismatches, message}, ok.  Numbers are numbers; absent settings are null.\n"
           "\n"
           "Examples (E1 and E2 as docs/PERFORMANCE.md defines them):\n"
           "  E1: floe-bench --create --key-bits 40 -t 4 -c 4 -k 64K -P 4 --dup-ratio 0.5 -n 500\n"
           "  E2: floe-bench --create --key-bits 40 -t 4 -c 4 -k 1 -P 1 --dup-ratio 0.5 --capacity 64M \\\n"
           "          --warmup 2 -d 30\n"
           "  TREE: floe-bench --create --kind tree --words 16 -c 4 -k 64K -P 2 --dup-ratio 0.5 -n 50\n"
           "  ORDERED, successors and ranges of 32 keys over inserts:\n"
           "        floe-bench --create --kind ordered --key-bits 40 -c 4 -k 32 -P 8 --ratio 2:0:0:1:1 \\\n"
           "          --dup-ratio 0.5 -d 10\n"
           "\n"
           "Exit status: 0 the run succeeded and every check passed; 1 the run failed (connection,\n"
           "request errors, FULL, wrong answers or counts); 2 a usage error.\n");
}

static bool parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
    uint64_t v;
    if (!floe_parse_size(s, &v) || v < lo || v > hi)
        return false;
    *out = (unsigned)v;
    return true;
}

static bool parse_real(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!s[0] || *end || errno || !isfinite(v) || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* I:F:E, I:F:E:S, I:F:E:S:R or I:F:E:S:R:A (the missing ones 0), not all 0. */
static bool parse_ratio(const char *s, unsigned r[WL_OPS])
{
    char *end = NULL;
    const char *p = s;
    unsigned sum = 0;
    for (int i = 0; i < WL_OPS; i++)
        r[i] = 0;
    for (int i = 0; i < WL_OPS; i++) {
        if (*p < '0' || *p > '9')
            return false;
        errno = 0;
        unsigned long v = strtoul(p, &end, 10);
        if (errno || v > 1000000)
            return false;
        r[i] = (unsigned)v;
        sum += r[i];
        if (*end == '\0')
            return i >= WL_ERASE && sum > 0;
        if (*end != ':')
            return false;
        p = end + 1;
    }
    return false;
}

enum {
    OPT_RATIO = 256,
    OPT_DUP,
    OPT_KEY_BITS,
    OPT_DIST,
    OPT_HOT_FRACTION,
    OPT_HOT_KEYS,
    OPT_SEED,
    OPT_KIND,
    OPT_VALUE_BYTES,
    OPT_WORDS,
    OPT_TABLE,
    OPT_CREATE,
    OPT_KEEP,
    OPT_CAPACITY,
    OPT_GROW,
    OPT_NO_GROW,
    OPT_BACKEND,
    OPT_RATE,
    OPT_WARMUP,
    OPT_JSON,
};

static const struct option LONG_OPTS[] = {
    {"server", required_argument, NULL, 's'},
    {"threads", required_argument, NULL, 't'},
    {"connections", required_argument, NULL, 'c'},
    {"pipeline", required_argument, NULL, 'P'},
    {"keys-per-request", required_argument, NULL, 'k'},
    {"ratio", required_argument, NULL, OPT_RATIO},
    {"dup-ratio", required_argument, NULL, OPT_DUP},
    {"key-bits", required_argument, NULL, OPT_KEY_BITS},
    {"distribution", required_argument, NULL, OPT_DIST},
    {"hotset-fraction", required_argument, NULL, OPT_HOT_FRACTION},
    {"hotset-keys", required_argument, NULL, OPT_HOT_KEYS},
    {"seed", required_argument, NULL, OPT_SEED},
    {"kind", required_argument, NULL, OPT_KIND},
    {"value-bytes", required_argument, NULL, OPT_VALUE_BYTES},
    {"words", required_argument, NULL, OPT_WORDS},
    {"table", required_argument, NULL, OPT_TABLE},
    {"create", no_argument, NULL, OPT_CREATE},
    {"keep", no_argument, NULL, OPT_KEEP},
    {"capacity", required_argument, NULL, OPT_CAPACITY},
    {"grow", no_argument, NULL, OPT_GROW},
    {"no-grow", no_argument, NULL, OPT_NO_GROW},
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"duration", required_argument, NULL, 'd'},
    {"requests", required_argument, NULL, 'n'},
    {"rate", required_argument, NULL, OPT_RATE},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"quiet", no_argument, NULL, 'q'},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static const char *kind_name(int kind)
{
    return kind == FLOE_TABLE_SET       ? "set"
           : kind == FLOE_TABLE_MAP     ? "map"
           : kind == FLOE_TABLE_TREE    ? "tree"
           : kind == FLOE_TABLE_ORDERED ? "ordered"
                                        : "?";
}

/* Why the mix of --ratio has an operation that is not for tables of o's
 * kind (its row's kinds, tables/ops.h), NULL if none; `whose` says where
 * the kind came from. */
static const char *mix_refused(const options *o, const char *whose)
{
    static char why[256];
    for (int op = 0; op < WL_OPS; op++) {
        const int row = wl_op_def(op)->row;
        if (!o->ratio[op] || floe_op_for_kind(row, o->kind))
            continue;
        char kinds[64] = "";
        for (int k = FLOE_TABLE_SET; k <= FLOE_TABLE_ORDERED; k++)
            if (floe_op_def(row)->kinds & (1u << k)) {
                const size_t at = strlen(kinds);
                snprintf(kinds + at, sizeof kinds - at, "%s%s", at ? ", " : "", kind_name(k));
            }
        snprintf(why, sizeof why, "%s (--ratio I:F:E:S:R:A, place %d) is for %s tables; %s is %s", wl_op_def(op)->name,
                 op + 1, kinds, whose, kind_name(o->kind));
        return why;
    }
    return NULL;
}

/* Returns -1 to go on, else the exit code. */
static int parse_options(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    /* the environment, as for the floe CLI; the flags override it */
    const char *env_server = getenv("FLOE_SERVER");
    o->server = env_server && env_server[0] ? env_server : DEFAULT_SERVER;
    char why[400];
    if (floe_options_from_env(&o->conn, why, sizeof why) != FLOE_OK)
        return usage_error("%s", why);
    static struct option *long_opts; /* ours and libfloe's connection options; the process's life */
    if (!long_opts && !(long_opts = floe_getopt_table(LONG_OPTS)))
        return usage_error("out of memory");
    o->table = "bench";
    o->threads = o->conns = o->pipeline = 1;
    o->keys = 1;
    o->ratio[WL_INSERT] = 1;
    o->key_bits = 64;
    o->value_bytes = 8;
    o->words = 16;
    o->kind = FLOE_TABLE_SET;
    o->distribution = WL_UNIFORM;
    o->hot_fraction = 0.9;
    o->hot_keys = 1024;
    o->seed = 1;
    o->grow = -1;
    bool duration_set = false, hot_knob = false, create_knob = false;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, ":s:t:c:P:k:d:n:qh", long_opts, NULL)) != -1) {
        const char *a = optarg;
        if (ch >= FLOE_GETOPT_CODE) {
            if (floe_getopt_set(&o->conn, ch, a, why, sizeof why) != FLOE_OK)
                return usage_error("--%s", why);
            continue;
        }
        switch (ch) {
        case 's':
            o->server = a;
            break;
        case 't':
            if (!parse_uint(a, 1, 1024, &o->threads))
                return usage_error("--threads is 1..1024, not '%s'", a);
            break;
        case 'c':
            if (!parse_uint(a, 1, 4096, &o->conns))
                return usage_error("--connections (per thread) is 1..4096, not '%s'", a);
            break;
        case 'P':
            if (!parse_uint(a, 1, 4096, &o->pipeline))
                return usage_error("--pipeline is 1..4096, not '%s'", a);
            break;
        case 'k':
            if (!floe_parse_size(a, &o->keys) || o->keys < 1 || o->keys > (UINT64_C(1) << 26))
                return usage_error("--keys-per-request is 1..64M, not '%s'", a);
            break;
        case OPT_RATIO:
            if (!parse_ratio(a, o->ratio))
                return usage_error("--ratio is I:F:E[:S[:R]], three to five whole numbers (not all 0), not '%s'", a);
            break;
        case OPT_DUP:
            if (!parse_real(a, 0, 1, &o->dup_ratio))
                return usage_error("--dup-ratio is a number in 0..1, not '%s'", a);
            break;
        case OPT_KEY_BITS:
            if (!parse_uint(a, 1, 64, &o->key_bits))
                return usage_error("--key-bits is 1..64, not '%s'", a);
            o->key_bits_set = true;
            break;
        case OPT_DIST:
            if (!strcmp(a, "uniform"))
                o->distribution = WL_UNIFORM;
            else if (!strcmp(a, "sequential"))
                o->distribution = WL_SEQUENTIAL;
            else if (!strcmp(a, "hotset"))
                o->distribution = WL_HOTSET;
            else
                return usage_error("--distribution is uniform, sequential or hotset, not '%s'", a);
            break;
        case OPT_HOT_FRACTION:
            if (!parse_real(a, 0, 1, &o->hot_fraction))
                return usage_error("--hotset-fraction is a number in 0..1, not '%s'", a);
            hot_knob = true;
            break;
        case OPT_HOT_KEYS:
            if (!floe_parse_size(a, &o->hot_keys) || o->hot_keys < 1 || o->hot_keys > (UINT64_C(1) << 26))
                return usage_error("--hotset-keys is 1..64M, not '%s'", a);
            hot_knob = true;
            break;
        case OPT_SEED:
            if (!floe_parse_size(a, &o->seed))
                return usage_error("--seed is a whole number, not '%s'", a);
            break;
        case OPT_KIND:
            if (!strcmp(a, "set"))
                o->kind = FLOE_TABLE_SET;
            else if (!strcmp(a, "map"))
                o->kind = FLOE_TABLE_MAP;
            else if (!strcmp(a, "tree"))
                o->kind = FLOE_TABLE_TREE;
            else if (!strcmp(a, "ordered"))
                o->kind = FLOE_TABLE_ORDERED;
            else
                return usage_error("--kind is set, map, tree or ordered, not '%s'", a);
            o->kind_set = true;
            break;
        case OPT_VALUE_BYTES:
            if (!parse_uint(a, 0, 8, &o->value_bytes) || (o->value_bytes % 4))
                return usage_error("--value-bytes is 4 or 8 (ORDERED: 0, 4 or 8), not '%s'", a);
            o->value_bytes_set = true;
            break;
        case OPT_WORDS:
            if (!parse_uint(a, 2, 256, &o->words))
                return usage_error("--words is 2..256, not '%s'", a);
            o->words_set = true;
            break;
        case OPT_TABLE:
            if (!a[0] || strlen(a) > 64)
                return usage_error("--table needs a name of 1..64 characters");
            o->table = a;
            break;
        case OPT_CREATE:
            o->create = true;
            break;
        case OPT_KEEP:
            o->keep = create_knob = true;
            break;
        case OPT_CAPACITY:
            if (!floe_parse_size(a, &o->capacity) || o->capacity < 1)
                return usage_error("--capacity is a count of keys (16M, 1000000), not '%s'", a);
            create_knob = true;
            break;
        case OPT_GROW:
        case OPT_NO_GROW:
            o->grow = ch == OPT_GROW;
            create_knob = true;
            break;
        case OPT_BACKEND:
            if (strcmp(a, "cpu") && strcmp(a, "gpu") && strcmp(a, "auto"))
                return usage_error("--backend is cpu, gpu or auto, not '%s'", a);
            o->backend = a;
            create_knob = true;
            break;
        case 'd':
            if (!parse_real(a, 0.001, 1e7, &o->duration))
                return usage_error("--duration is seconds above 0, not '%s'", a);
            duration_set = true;
            break;
        case 'n':
            if (!floe_parse_size(a, &o->requests) || o->requests < 1)
                return usage_error("--requests (per connection) is a count of at least 1, not '%s'", a);
            break;
        case OPT_RATE:
            if (!parse_real(a, 1e-3, 1e10, &o->rate))
                return usage_error("--rate is requests per second above 0, not '%s'", a);
            break;
        case OPT_WARMUP:
            if (!parse_real(a, 0, 1e6, &o->warmup))
                return usage_error("--warmup is seconds (0 or more), not '%s'", a);
            break;
        case 'q':
            o->quiet = true;
            break;
        case OPT_JSON:
            o->json = true;
            break;
        case 'h':
            usage();
            return 0;
        case 'V':
            printf("floe-bench %s (libfloe %s)\n", FLOE_VERSION, floe_version());
            return 0;
        case ':':
            return usage_error("%s needs a value", argv[optind - 1]);
        default:
            if (optopt)
                return usage_error("unknown option '-%c'", optopt);
            return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return usage_error("unexpected argument '%s' (every setting is an option)", argv[optind]);
    if (duration_set && o->requests)
        return usage_error("--duration and --requests exclude each other");
    if (!o->requests && !duration_set)
        o->duration = 10;
    if (hot_knob && o->distribution != WL_HOTSET)
        return usage_error("--hotset-fraction and --hotset-keys need --distribution hotset");
    if (create_knob && !o->create)
        return usage_error("--capacity, --grow, --no-grow, --backend and --keep need --create");
    if (o->kind_set || o->create) { /* the kind is known: given, or the default of a table made here */
        if (o->kind == FLOE_TABLE_TREE && o->key_bits_set)
            return usage_error("--key-bits is for set and map tables; a TREE takes --words");
        if (o->kind != FLOE_TABLE_TREE && o->words_set)
            return usage_error("--words is for TREE tables (--kind tree)");
        if (o->kind != FLOE_TABLE_MAP && o->kind != FLOE_TABLE_ORDERED && o->value_bytes_set)
            return usage_error("--value-bytes is for MAP and ORDERED tables (--kind map, --kind ordered)");
        if (o->kind == FLOE_TABLE_MAP && o->value_bytes_set && !o->value_bytes)
            return usage_error("a MAP needs --value-bytes 4 or 8");
        const char *refused = mix_refused(o, "--kind");
        if (refused)
            return usage_error("%s", refused);
    }
    return -1;
}

/* ---- the run --------------------------------------------------------------------------------------- */

/* Status codes in their own slots, then ERR_IO, ERR_PROTOCOL and any other. */
#define SLOT_IO    (FLOE_STATUS_MAX + 1)
#define SLOT_PROTO (FLOE_STATUS_MAX + 2)

static unsigned err_slot(int status)
{
    if (status >= 0 && status <= FLOE_STATUS_MAX)
        return (unsigned)status;
    return status == FLOE_ERR_IO ? SLOT_IO : status == FLOE_ERR_PROTOCOL ? SLOT_PROTO : ERR_SLOTS - 1;
}

static const char *err_slot_name(unsigned s)
{
    return s <= FLOE_STATUS_MAX ? floe_strerror((int)s)
           : s == SLOT_IO       ? floe_strerror(FLOE_ERR_IO)
           : s == SLOT_PROTO    ? floe_strerror(FLOE_ERR_PROTOCOL)
                                : "ERR_UNKNOWN";
}

static void note_problem(worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note_problem(worker *w, const char *fmt, ...)
{
    if (w->problem[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->problem, sizeof w->problem, fmt, ap);
    va_end(ap);
}

/* A request completed (inside floe_poll, or inside a send that failed at once). */
static void on_answer(floe *c, floe_call *call, void *arg)
{
    slot *s = arg;
    conn *k = s->conn;
    worker *w = k->w;
    const uint64_t t = now_ns();
    int st = floe_call_status(call);
    size_t n = 0;
    const uint8_t *res = floe_call_results(call, &n);
    if (st == FLOE_OK && s->op == WL_RANGE) { /* its keys, ascending from lo, are its answer */
        size_t kb;
        const unsigned char *keys = floe_call_keys(call, &kb);
        uint64_t prev = 0;
        n = kb / 8;
        for (size_t i = 0; i < n && st == FLOE_OK; i++) {
            uint64_t key;
            memcpy(&key, keys + i * 8, 8);
            if (i == 0 ? key < s->lo : key <= prev) {
                note_problem(w, "connection %" PRIu64 ": a range from %" PRIu64 " answered key %" PRIu64 " at %zu",
                             k->index, s->lo, key, i);
                st = FLOE_ERR_PROTOCOL;
            }
            prev = key;
        }
        if (st == FLOE_OK && n > s->n) {
            note_problem(w, "connection %" PRIu64 ": a range of %u keys answered %zu", k->index, s->n, n);
            st = FLOE_ERR_PROTOCOL;
        }
        s->n = (uint32_t)n; /* keys returned */
        res = NULL;
    } else if (st == FLOE_OK && n != s->n) {
        note_problem(w, "connection %" PRIu64 ": %zu answers for a request of %u keys", k->index, n, s->n);
        st = FLOE_ERR_PROTOCOL;
    }
    floe_counts cnt = {0};
    if (st == FLOE_OK) {
        floe_call_counts(call, &cnt);
        w->inserted += cnt.inserted;
        w->full += cnt.full;
        if (cnt.full)
            note_problem(w, "connection %" PRIu64 ": %" PRIu64 " keys answered FULL (the table is full%s)", k->index,
                         cnt.full, R.opt.create ? "; a larger --capacity or --grow" : "");
        if (R.check && res) {
            for (size_t i = wl_first_wrong(s->expect, res, n); i < n; i++) {
                if (!wl_answer_ok(s->expect[i], res[i])) {
                    /* the request buffer is reused: where the key was is what is left to say */
                    if (!w->mismatches)
                        note_problem(
                            w, "connection %" PRIu64 ", request %" PRIu64 " (%s), %s %zu: answered %s, expected %s",
                            k->index, s->seq, wl_op_def(s->op)->name, R.spec.kind == FLOE_TABLE_TREE ? "vector" : "key",
                            i, floe_answer_name(res[i]), wl_expect_name(s->expect[i]));
                    w->mismatches++;
                }
            }
        }
    } else {
        w->errors[err_slot(st)]++;
        const char *msg = floe_call_error(call);
        note_problem(w, "connection %" PRIu64 ": %s request failed: %s%s%s", k->index, wl_op_def(s->op)->name,
                     floe_strerror(st), msg[0] ? ": " : "", msg);
        if (st == FLOE_ERR_IO || floe_fd(c) < 0)
            k->dead = true;
    }
    if (st == FLOE_OK && s->start_ns >= R.measure_start) { /* failed requests count as errors only */
        stats *m = &w->st;
        hist_record(&m->lat[s->op], t - s->start_ns);
        m->requests[s->op]++;
        m->keys[s->op] += s->n;
        m->answers[FLOE_ABSENT] += cnt.absent;
        m->answers[FLOE_PRESENT] += cnt.present;
        m->answers[FLOE_INSERTED] += cnt.inserted;
        m->answers[FLOE_FULL] += cnt.full;
        m->answers[FLOE_ERASED] += cnt.erased;
        if (t > m->last_ns)
            m->last_ns = t;
    }
    pthread_mutex_lock(&w->mu);
    hist_record(&w->tick_lat, t - s->start_ns);
    w->tick_requests++;
    w->tick_keys += s->n;
    w->tick_errors += st != FLOE_OK;
    pthread_mutex_unlock(&w->mu);
    s->busy = false;
    k->inflight--;
}

static int pick_op(conn *k)
{
    if (R.opt.ratio[WL_INSERT] == R.op_total)
        return WL_INSERT;
    uint64_t x = k->op_rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    k->op_rng = x;
    unsigned r = (unsigned)((((x * 0x2545F4914F6CDD1Dull) >> 32) * R.op_total) >> 32);
    int op = 0;
    while (op < WL_OPS - 1 && r >= R.opt.ratio[op])
        r -= R.opt.ratio[op++];
    return op;
}

/* Builds and sends one request on k; start_ns: its scheduled time, or 0 to
 * take the time just before it is handed to libfloe. */
static void send_one(worker *w, conn *k, uint64_t start_ns)
{
    const options *o = &R.opt;
    slot *s = NULL;
    for (unsigned i = 0; i < o->pipeline && !s; i++)
        if (!k->slots[i].busy)
            s = &k->slots[i];
    const int op = pick_op(k);
    const size_t n = o->keys;
    if (R.spec.kind == FLOE_TABLE_TREE)
        wl_next_vectors(&k->stream, op, n, w->vectors, s->expect);
    else
        wl_next_keys(&k->stream, op, op == WL_RANGE ? 1 : n, w->keys, w->values, s->expect);
    s->busy = true;
    s->op = (uint8_t)op;
    s->n = (uint32_t)n;
    s->start_ns = start_ns ? start_ns : now_ns();
    k->inflight++;
    s->seq = ++k->sent;
    floe_call *call;
    if (R.spec.kind == FLOE_TABLE_TREE) {
        call = op == WL_INSERT ? floe_send_insert_vectors(k->c, o->table, w->vectors, n, o->words, 0, on_answer, s)
                               : floe_send_find_vectors(k->c, o->table, w->vectors, n, o->words, 0, on_answer, s);
    } else if (op == WL_RANGE) {
        s->lo = w->keys[0];
        const uint64_t top = o->key_bits >= 64 ? UINT64_MAX : (UINT64_C(1) << o->key_bits) - 1;
        call = floe_send_range(k->c, o->table, s->lo, top, 0, NULL, n, on_answer, s);
    } else { /* an operation on keys, by its row's name: with values (a MAP's, an add's deltas) where it takes them */
        const int row = wl_op_def(op)->row;
        const size_t vb = floe_op_has(row, FLOE_OPF_VALUES_IN) ? R.spec.value_bytes : 0;
        call = floe_send_keys(k->c, floe_op_name(row), o->table, w->keys, n * 8, vb ? w->values : NULL, n * vb, 0,
                              on_answer, s);
    }
    if (!call && s->busy) { /* out of memory: no callback ran */
        w->errors[err_slot(FLOE_ERR_IO)]++;
        note_problem(w, "connection %" PRIu64 ": out of memory sending a request", k->index);
        s->busy = false;
        k->inflight--;
        k->dead = true;
    }
}

/* With --rate: when request j of k is due. */
static uint64_t due_time(const conn *k, uint64_t j)
{
    double phase = (double)k->index / (double)R.total_conns;
    return R.t0 + (uint64_t)(((double)j + phase) * R.interval_ns);
}

static bool conn_done(const conn *k)
{
    return k->dead || (R.opt.requests && k->sent >= R.opt.requests);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    const options *o = &R.opt;
    for (;;) {
        uint64_t now = now_ns();
        const bool stopping = atomic_load(&R.stop) || (R.deadline && now >= R.deadline);
        uint64_t wake = now + NS / 10; /* look at the stop flag ten times a second */
        if (R.deadline && R.deadline > now && R.deadline < wake)
            wake = R.deadline;
        bool busy = false, more = false;
        for (unsigned i = 0; i < w->nconns; i++) {
            conn *k = &w->conns[i];
            while (!stopping && !conn_done(k) && k->inflight < o->pipeline) {
                uint64_t due = 0;
                if (o->rate > 0) {
                    due = due_time(k, k->sent);
                    if (R.deadline && due >= R.deadline)
                        break;
                    if (due > now) {
                        if (due < wake)
                            wake = due;
                        break;
                    }
                }
                send_one(w, k, due);
                if (o->rate > 0)
                    now = now_ns();
            }
            if (k->inflight)
                busy = true;
            if (!stopping && !conn_done(k) && !(o->rate > 0 && R.deadline && due_time(k, k->sent) >= R.deadline))
                more = true;
        }
        if (!busy && !more)
            break;
        /* wait for answers on the connections that have requests out */
        nfds_t nfds = 0;
        for (unsigned i = 0; i < w->nconns; i++) {
            conn *k = &w->conns[i];
            int fd = floe_fd(k->c);
            if (!k->inflight || fd < 0)
                continue;
            w->pfds[nfds] = (struct pollfd){fd, (short)(POLLIN | (floe_want_write(k->c) ? POLLOUT : 0)), 0};
            w->ready[nfds++] = k;
        }
        now = now_ns();
        uint64_t wait = wake > now ? wake - now : 0;
        struct timespec ts = {(time_t)(wait / NS), (long)(wait % NS)};
        int rc = ppoll(w->pfds, nfds, &ts, NULL);
        if (rc < 0 && errno != EINTR)
            rc = 0;
        for (nfds_t i = 0; i < nfds; i++) /* with --timeout, every 0.1 s: libfloe checks its deadlines */
            if (w->pfds[i].revents || (rc == 0 && o->conn.timeout_ms))
                floe_poll(w->ready[i]->c, 0);
    }
    atomic_fetch_add(&R.finished, 1);
    return NULL;
}

/* ---- setting up ---------------------------------------------------------------------------------- */

static void on_signal(int sig)
{
    (void)sig;
    atomic_store(&R.stop, 1);
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    return a && b > UINT64_MAX / a ? UINT64_MAX : a * b;
}

/* Learns the table's shape (an existing table) or creates it. */
static int prepare_table(floe *ctl, bool *created)
{
    options *o = &R.opt;
    *created = false;
    if (!o->create) {
        floe_table_info ti;
        int st = floe_stats(ctl, o->table, &ti);
        if (st == FLOE_ERR_NO_TABLE)
            return run_error("table %s does not exist: create it, or add --create", o->table);
        if (st != FLOE_OK)
            return run_error("stats %s: %s: %s", o->table, floe_strerror(st), floe_errstr(ctl));
        if (o->kind_set && ti.kind != o->kind)
            return usage_error("table %s is a %s table, not --kind %s", o->table, kind_name(ti.kind),
                               kind_name(o->kind));
        o->kind = ti.kind;
        if (o->kind == FLOE_TABLE_TREE) {
            if (o->words_set && o->words != ti.words)
                return usage_error("table %s holds vectors of %u words, not --words %u", o->table, ti.words, o->words);
            o->words = ti.words;
            if (o->key_bits_set || o->value_bytes_set)
                return usage_error("table %s is a TREE: --key-bits and --value-bytes do not apply", o->table);
        } else {
            if (o->words_set)
                return usage_error("--words is for TREE tables; %s is a %s table", o->table, kind_name(ti.kind));
            if (o->key_bits_set && o->key_bits > ti.key_bits)
                return usage_error("table %s holds keys of %u bits, fewer than --key-bits %u", o->table, ti.key_bits,
                                   o->key_bits);
            if (!o->key_bits_set)
                o->key_bits = ti.key_bits;
            if (o->kind == FLOE_TABLE_MAP || o->kind == FLOE_TABLE_ORDERED) {
                if (o->value_bytes_set && o->value_bytes != ti.value_bytes)
                    return usage_error("table %s holds %u-byte values, not --value-bytes %u", o->table, ti.value_bytes,
                                       o->value_bytes);
                o->value_bytes = ti.value_bytes;
            }
        }
        char whose[FLOE_NAME_MAX + 16];
        snprintf(whose, sizeof whose, "table %s", o->table);
        const char *why = mix_refused(o, whose);
        return why ? usage_error("%s", why) : -1;
    }
    bool tree = o->kind == FLOE_TABLE_TREE;
    uint64_t hot = o->distribution == WL_HOTSET ? o->hot_keys : 0;
    uint64_t cap = o->capacity;
    if (!cap)
        cap = o->requests ? sat_mul(sat_mul(R.total_conns, o->requests), o->keys) + hot : DEFAULT_CAPACITY;
    bool stores = false; /* whether the mix puts keys in */
    for (int op = 0; op < WL_OPS; op++)
        stores = stores || (o->ratio[op] && floe_op_has(wl_op_def(op)->row, FLOE_OPF_STORES));
    if (!o->capacity && o->requests && !stores) /* nothing stored */
        cap = 1024;
    if (cap < 1024)
        cap = 1024;
    o->capacity = cap;
    if (o->grow < 0)
        o->grow = !o->requests;
    floe_table_def def = {
        .name = o->table,
        .kind = o->kind,
        .key_bits = tree ? 0 : o->key_bits,
        .value_bytes = o->kind == FLOE_TABLE_MAP || o->kind == FLOE_TABLE_ORDERED ? o->value_bytes : 0,
        .capacity = cap,
        .grow = o->grow,
        .no_grow =
            !o->grow && o->kind != FLOE_TABLE_ORDERED, /* a TREE would grow by default; an ORDERED table always does */
        .backend = o->backend,
        .words = tree ? o->words : 0,
    };
    int st = floe_create(ctl, &def);
    if (st == FLOE_ERR_EXISTS)
        return run_error("table %s exists already: drop it (floe drop %s), choose another --table, or leave out "
                         "--create to run against it",
                         o->table, o->table);
    if (st != FLOE_OK)
        return run_error("create %s: %s: %s", o->table, floe_strerror(st), floe_errstr(ctl));
    *created = true;
    return -1;
}

static void free_workers(worker *ws, unsigned nw)
{
    for (unsigned t = 0; ws && t < nw; t++) {
        worker *w = &ws[t];
        for (unsigned i = 0; w->conns && i < w->nconns; i++) {
            conn *k = &w->conns[i];
            if (k->c)
                floe_close(k->c); /* completes anything still in flight */
            wl_stream_free(&k->stream);
            for (unsigned j = 0; k->slots && j < R.opt.pipeline; j++)
                free(k->slots[j].expect);
            free(k->slots);
        }
        free(w->conns);
        free(w->keys);
        free(w->vectors);
        free(w->values);
        free(w->pfds);
        free(w->ready);
        pthread_mutex_destroy(&w->mu);
    }
    free(ws);
}

/* Allocates the workers and opens every connection. */
static int make_workers(worker **out)
{
    const options *o = &R.opt;
    worker *ws = calloc(o->threads, sizeof *ws);
    *out = ws;
    if (!ws)
        return run_error("out of memory");
    for (unsigned t = 0; t < o->threads; t++)
        pthread_mutex_init(&ws[t].mu, NULL);
    for (unsigned t = 0; t < o->threads; t++) {
        worker *w = &ws[t];
        w->nconns = o->conns;
        w->conns = calloc(o->conns, sizeof *w->conns);
        w->pfds = calloc(o->conns, sizeof *w->pfds);
        w->ready = calloc(o->conns, sizeof *w->ready);
        if (R.spec.kind == FLOE_TABLE_TREE) {
            w->vectors = malloc(o->keys * o->words * sizeof *w->vectors);
        } else {
            w->keys = malloc(o->keys * sizeof *w->keys);
            w->values = malloc(o->keys * 8);
        }
        if (!w->conns || !w->pfds || !w->ready || (!w->vectors && !w->keys) || (w->keys && !w->values))
            return run_error("out of memory");
        for (int op = 0; op < WL_OPS; op++)
            hist_reset(&w->st.lat[op]);
        hist_reset(&w->tick_lat);
        for (unsigned i = 0; i < o->conns; i++) {
            conn *k = &w->conns[i];
            k->w = w;
            k->index = (uint64_t)t * o->conns + i;
            k->op_rng = (o->seed + 1) * 0x9E3779B97F4A7C15ull ^ (k->index + 1) * 0xD1B54A32D192ED03ull;
            if (!k->op_rng)
                k->op_rng = 1;
            if (wl_stream_init(&k->stream, &R.spec, k->index) != 0)
                return run_error("out of memory");
            k->slots = calloc(o->pipeline, sizeof *k->slots);
            if (!k->slots)
                return run_error("out of memory");
            for (unsigned j = 0; j < o->pipeline; j++) {
                k->slots[j].conn = k;
                if (!(k->slots[j].expect = malloc(o->keys)))
                    return run_error("out of memory (%u x %" PRIu64 " bytes of expected answers per connection)",
                                     o->pipeline, o->keys);
            }
            int st = floe_connect_opts(o->server, &o->conn, &k->c);
            if (st != FLOE_OK)
                return run_error("connection %" PRIu64 " to %s: %s: %s", k->index, o->server, floe_strerror(st),
                                 floe_errstr(k->c));
        }
    }
    return -1;
}

/* ---- progress and report ------------------------------------------------------------------------ */

/* "12.3M" style. */
static const char *human(double v, char *buf, size_t len)
{
    if (v >= 1e9)
        snprintf(buf, len, "%.2fG", v / 1e9);
    else if (v >= 1e6)
        snprintf(buf, len, "%.2fM", v / 1e6);
    else if (v >= 1e4)
        snprintf(buf, len, "%.1fk", v / 1e3);
    else
        snprintf(buf, len, "%.0f", v);
    return buf;
}

static double us(uint64_t ns)
{
    return (double)ns / 1000.0;
}

/* One line about the interval that started at since_ns. */
static void progress_line(worker *ws, uint64_t since_ns)
{
    const uint64_t now = now_ns();
    const double seconds_since = (double)(now - since_ns) / 1e9;
    static histogram h; /* the main thread's only */
    hist_reset(&h);
    uint64_t req = 0, keys = 0, errs = 0;
    for (unsigned t = 0; t < R.opt.threads; t++) {
        worker *w = &ws[t];
        pthread_mutex_lock(&w->mu);
        hist_merge(&h, &w->tick_lat);
        hist_reset(&w->tick_lat);
        req += w->tick_requests;
        keys += w->tick_keys;
        errs += w->tick_errors;
        w->tick_requests = w->tick_keys = w->tick_errors = 0;
        pthread_mutex_unlock(&w->mu);
    }
    double el = (double)(now - R.t0) / 1e9;
    char a[32], b[32];
    fprintf(stderr, "[%6.1fs]%s %9s req/s %9s keys/s  p50 %9.1f us  p99 %9.1f us  errors %" PRIu64 "\n", el,
            since_ns < R.measure_start ? " warmup" : "", human((double)req / seconds_since, a, sizeof a),
            human((double)keys / seconds_since, b, sizeof b), us(hist_percentile(&h, 50)), us(hist_percentile(&h, 99)),
            errs);
}

typedef struct summary {
    stats all; /* merged over threads */
    histogram total_lat;
    uint64_t requests, keys;
    double seconds;
    uint64_t errors[ERR_SLOTS], error_total;
    uint64_t inserted, full, mismatches;
    uint64_t distinct; /* fresh keys sent + distinct hot keys inserted */
    const char *problem;
    bool have_table;
    floe_table_info table;
    uint64_t rebuilds; /* of the table during the run (its generation went up: a growth, or a rebuild) */
    bool have_stages; /* the server's stage timers over the run: table minus before */
    floe_stage_info stages[16];
    unsigned n_stages;
    double stage_seconds; /* wall time between the two stats calls */
    const char *check_status;
    char check_msg[512];
    bool ok;
} summary;

static void summarize(worker *ws, summary *s)
{
    memset(s, 0, sizeof *s);
    for (int op = 0; op < WL_OPS; op++)
        hist_reset(&s->all.lat[op]);
    hist_reset(&s->total_lat);
    uint8_t *hot = calloc(wl_hot_bytes(&R.spec) + 1, 1);
    for (unsigned t = 0; t < R.opt.threads; t++) {
        worker *w = &ws[t];
        for (int op = 0; op < WL_OPS; op++) {
            hist_merge(&s->all.lat[op], &w->st.lat[op]);
            hist_merge(&s->total_lat, &w->st.lat[op]);
            s->all.requests[op] += w->st.requests[op];
            s->all.keys[op] += w->st.keys[op];
        }
        for (int a = 0; a < 5; a++)
            s->all.answers[a] += w->st.answers[a];
        if (w->st.last_ns > s->all.last_ns)
            s->all.last_ns = w->st.last_ns;
        for (unsigned e = 0; e < ERR_SLOTS; e++) {
            s->errors[e] += w->errors[e];
            s->error_total += w->errors[e];
        }
        s->inserted += w->inserted;
        s->full += w->full;
        s->mismatches += w->mismatches;
        if (!s->problem && w->problem[0])
            s->problem = w->problem;
        for (unsigned i = 0; i < w->nconns; i++) {
            s->distinct += w->conns[i].stream.fresh;
            if (hot)
                wl_hot_union(hot, &w->conns[i].stream);
        }
    }
    if (hot)
        s->distinct += wl_hot_count(hot, &R.spec);
    free(hot);
    for (int op = 0; op < WL_OPS; op++) {
        s->requests += s->all.requests[op];
        s->keys += s->all.keys[op];
    }
    s->seconds = s->all.last_ns > R.measure_start ? (double)(s->all.last_ns - R.measure_start) / 1e9 : 0;
}

/* The server's stage timers over the run (stats after minus stats before). */
static void stage_diff(summary *s, const floe_table_info *before, const floe_table_info *after, double seconds)
{
    s->n_stages = 0;
    for (unsigned i = 0; i < after->n_stages; i++) {
        floe_stage_info d = after->stages[i];
        for (unsigned j = 0; j < before->n_stages; j++)
            if (!strcmp(before->stages[j].name, d.name)) {
                d.count -= before->stages[j].count;
                d.keys -= before->stages[j].keys;
                d.nanos -= before->stages[j].nanos;
            }
        if (!strcmp(d.name, "io_cpu"))
            d.count = after->stages[i].count; /* io threads, not a difference */
        if (d.nanos || d.count)
            s->stages[s->n_stages++] = d;
    }
    s->have_stages = s->n_stages > 0;
    s->stage_seconds = seconds;
}

/* Decides the check and the exit status. */
static void judge(summary *s)
{
    s->ok = s->error_total == 0 && s->full == 0;
    if (!R.check) {
        s->check_status = "skipped";
        snprintf(s->check_msg, sizeof s->check_msg, "%s",
                 !R.opt.create ? "the table was not created by this run, so its contents are unknown"
                               : "erases in the mix: answers are not tracked");
        if (!s->ok)
            snprintf(s->check_msg, sizeof s->check_msg, "%s", s->problem ? s->problem : "errors");
        return;
    }
    if (s->error_total) {
        snprintf(s->check_msg, sizeof s->check_msg, "%" PRIu64 " requests failed; first: %s", s->error_total,
                 s->problem ? s->problem : "?");
    } else if (s->full) {
        snprintf(s->check_msg, sizeof s->check_msg, "%s", s->problem ? s->problem : "FULL answers");
    } else if (s->mismatches) {
        snprintf(s->check_msg, sizeof s->check_msg, "%" PRIu64 " wrong answers; first: %s", s->mismatches,
                 s->problem ? s->problem : "?");
        s->ok = false;
    } else if (s->inserted != s->distinct) {
        snprintf(s->check_msg, sizeof s->check_msg,
                 "%" PRIu64 " keys answered INSERTED, but the run sent %" PRIu64 " distinct keys", s->inserted,
                 s->distinct);
        s->ok = false;
    } else if (s->have_table && s->table.keys != s->distinct) {
        snprintf(s->check_msg, sizeof s->check_msg,
                 "the table holds %" PRIu64 " keys after the run, but the run inserted %" PRIu64 " distinct keys",
                 s->table.keys, s->distinct);
        s->ok = false;
    } else {
        snprintf(s->check_msg, sizeof s->check_msg,
                 "every answer as expected; %" PRIu64 " INSERTED = %" PRIu64 " distinct keys sent%s", s->inserted,
                 s->distinct, s->have_table ? " = keys in the table" : "");
    }
    s->check_status = s->ok ? "ok" : "failed";
}

static void text_row(const char *name, const histogram *h, uint64_t req, uint64_t keys, double sec)
{
    printf("%-8s %12" PRIu64 " %14" PRIu64 " %12.1f %14.0f %10.1f %10.1f %10.1f %10.1f %10.1f\n", name, req, keys,
           sec > 0 ? (double)req / sec : 0, sec > 0 ? (double)keys / sec : 0, us(hist_percentile(h, 50)),
           us(hist_percentile(h, 90)), us(hist_percentile(h, 99)), us(hist_percentile(h, 99.9)), us(hist_max(h)));
}

static void print_text(const summary *s, const char *backend)
{
    const options *o = &R.opt;
    printf("floe-bench: %s, %" PRIu64 " connections (%u thread%s x %u), pipeline %u, %" PRIu64
           " %s per request, insert:find:erase:succ:range:add %u:%u:%u:%u:%u:%u, dup-ratio %g, %s",
           o->server, R.total_conns, o->threads, o->threads == 1 ? "" : "s", o->conns, o->pipeline, o->keys,
           o->kind == FLOE_TABLE_TREE ? (o->keys == 1 ? "vector" : "vectors") : (o->keys == 1 ? "key" : "keys"),
           o->ratio[0], o->ratio[1], o->ratio[2], o->ratio[3], o->ratio[4], o->ratio[5], o->dup_ratio,
           DIST_NAMES[o->distribution]);
    if (o->distribution == WL_HOTSET)
        printf(" (%g of requests on %" PRIu64 " hot keys)", o->hot_fraction, o->hot_keys);
    if (o->kind == FLOE_TABLE_TREE)
        printf(", TREE table %s of %u-word vectors", o->table, o->words);
    else
        printf(", %u-bit keys, %s table %s%s", o->key_bits,
               o->kind == FLOE_TABLE_MAP       ? "MAP"
               : o->kind == FLOE_TABLE_ORDERED ? "ORDERED"
                                               : "SET",
               o->table,
               R.spec.value_bytes == 4   ? " (4-byte values)"
               : R.spec.value_bytes == 8 ? " (8-byte values)"
                                         : "");
    printf(" (backend %s)", backend[0] ? backend : "?");
    if (o->rate > 0)
        printf(", rate %g requests/s", o->rate);
    if (atomic_load(&R.stop))
        printf(", interrupted");
    printf("\n\n");
    printf("%-8s %12s %14s %12s %14s %10s %10s %10s %10s %10s\n", "op", "requests", "keys", "requests/s", "keys/s",
           "p50 us", "p90 us", "p99 us", "p99.9 us", "max us");
    int ops = 0;
    for (int op = 0; op < WL_OPS; op++)
        if (o->ratio[op]) {
            ops++;
            text_row(wl_op_def(op)->name, &s->all.lat[op], s->all.requests[op], s->all.keys[op], s->seconds);
        }
    if (ops > 1)
        text_row("all", &s->total_lat, s->requests, s->keys, s->seconds);
    printf("\nseconds  %.3f\n", s->seconds);
    printf("answers  INSERTED %" PRIu64 "  PRESENT %" PRIu64 "  ABSENT %" PRIu64 "  FULL %" PRIu64 "  ERASED %" PRIu64
           "\n",
           s->all.answers[FLOE_INSERTED], s->all.answers[FLOE_PRESENT], s->all.answers[FLOE_ABSENT],
           s->all.answers[FLOE_FULL], s->all.answers[FLOE_ERASED]);
    printf("errors  ");
    if (!s->error_total)
        printf(" none");
    for (unsigned e = 0; e < ERR_SLOTS; e++)
        if (s->errors[e])
            printf(" %s %" PRIu64, err_slot_name(e), s->errors[e]);
    printf("\n");
    if (s->have_table)
        printf("table    %" PRIu64 " %s, %.2f bytes per %s, fill %.3f, backend %s\n", s->table.keys,
               o->kind == FLOE_TABLE_TREE ? "vectors" : "keys", s->table.bytes_per_key,
               o->kind == FLOE_TABLE_TREE ? "vector" : "key", s->table.fill, s->table.backend);
    if (s->rebuilds) /* each held the table's batches while its keys moved: the latencies' tail */
        printf("growth   the table was rebuilt %" PRIu64 " time%s during the run (it grew): its requests waited while "
               "its keys moved; --capacity (or --requests) sizes it for the run\n",
               s->rebuilds, s->rebuilds == 1 ? "" : "s");
    printf("check    %s: %s\n", s->check_status, s->check_msg);
    if (s->have_stages) {
        printf("\nserver stages over the run (%.3f s; floed's timers for this table, summed over its threads; "
               "share = seconds / run):\n",
               s->stage_seconds);
        printf("%-10s %10s %14s %10s %8s %11s %9s\n", "stage", "count", "keys", "seconds", "share", "us/count",
               "ns/key");
        for (unsigned i = 0; i < s->n_stages; i++) {
            const floe_stage_info *d = &s->stages[i];
            double sec = (double)d->nanos / 1e9;
            printf("%-10s %10" PRIu64 " %14" PRIu64 " %10.3f %7.1f%% %11.1f %9.2f\n", d->name, d->count, d->keys, sec,
                   s->stage_seconds > 0 ? 100.0 * sec / s->stage_seconds : 0,
                   d->count ? (double)d->nanos / 1e3 / (double)d->count : 0,
                   d->keys ? (double)d->nanos / (double)d->keys : 0);
        }
    }
}

static void json_str(const char *v)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p < 0x20)
            printf("\\u%04x", *p);
        else
            putchar(*p);
    }
    putchar('"');
}

static void json_latency(const histogram *h)
{
    printf("{\"p50\": %.1f, \"p90\": %.1f, \"p99\": %.1f, \"p99_9\": %.1f, \"max\": %.1f, \"min\": %.1f, "
           "\"mean\": %.1f}",
           us(hist_percentile(h, 50)), us(hist_percentile(h, 90)), us(hist_percentile(h, 99)),
           us(hist_percentile(h, 99.9)), us(hist_max(h)), us(hist_min(h)), hist_mean(h) / 1000.0);
}

static void print_json(const summary *s, bool created)
{
    const options *o = &R.opt;
    const bool tree = o->kind == FLOE_TABLE_TREE;
    double sec = s->seconds;
    printf("{\"config\": {\"server\": ");
    json_str(o->server);
    printf(", \"kind\": \"%s\", \"table\": ", kind_name(o->kind));
    json_str(o->table);
    printf(", \"threads\": %u, \"connections_per_thread\": %u, \"connections\": %" PRIu64
           ", \"pipeline\": %u, \"keys_per_request\": %" PRIu64
           ", \"ratio\": {\"insert\": %u, \"find\": %u, \"erase\": %u, \"succ\": %u, \"range\": %u, \"add\": %u}, "
           "\"dup_ratio\": %g, \"distribution\": \"%s\"",
           o->threads, o->conns, R.total_conns, o->pipeline, o->keys, o->ratio[0], o->ratio[1], o->ratio[2],
           o->ratio[3], o->ratio[4], o->ratio[5], o->dup_ratio, DIST_NAMES[o->distribution]);
    if (o->distribution == WL_HOTSET)
        printf(", \"hotset_fraction\": %g, \"hotset_keys\": %" PRIu64, o->hot_fraction, o->hot_keys);
    else
        printf(", \"hotset_fraction\": null, \"hotset_keys\": null");
    if (tree)
        printf(", \"key_bits\": null, \"value_bytes\": null, \"words\": %u", o->words);
    else if (R.spec.value_bytes)
        printf(", \"key_bits\": %u, \"value_bytes\": %u, \"words\": null", o->key_bits, R.spec.value_bytes);
    else
        printf(", \"key_bits\": %u, \"value_bytes\": null, \"words\": null", o->key_bits);
    printf(", \"seed\": %" PRIu64, o->seed);
    if (o->rate > 0)
        printf(", \"rate\": %g", o->rate);
    else
        printf(", \"rate\": null");
    if (o->requests)
        printf(", \"duration\": null, \"requests_per_connection\": %" PRIu64, o->requests);
    else
        printf(", \"duration\": %g, \"requests_per_connection\": null", o->duration);
    printf(", \"warmup\": %g, \"created\": %s}, \"interrupted\": %s", o->warmup, created ? "true" : "false",
           atomic_load(&R.stop) ? "true" : "false");
    printf(", \"seconds\": %.3f, \"requests\": %" PRIu64 ", \"keys\": %" PRIu64
           ", \"requests_per_sec\": %.1f, \"keys_per_sec\": %.1f, \"latency_us\": ",
           sec, s->requests, s->keys, sec > 0 ? (double)s->requests / sec : 0, sec > 0 ? (double)s->keys / sec : 0);
    json_latency(&s->total_lat);
    printf(", \"ops\": {");
    int n = 0;
    for (int op = 0; op < WL_OPS; op++) {
        if (!o->ratio[op])
            continue;
        printf("%s\"%s\": {\"requests\": %" PRIu64 ", \"keys\": %" PRIu64
               ", \"requests_per_sec\": %.1f, \"keys_per_sec\": %.1f, \"latency_us\": ",
               n++ ? ", " : "", wl_op_def(op)->name, s->all.requests[op], s->all.keys[op],
               sec > 0 ? (double)s->all.requests[op] / sec : 0, sec > 0 ? (double)s->all.keys[op] / sec : 0);
        json_latency(&s->all.lat[op]);
        printf("}");
    }
    printf("}, \"answers\": {\"INSERTED\": %" PRIu64 ", \"PRESENT\": %" PRIu64 ", \"ABSENT\": %" PRIu64
           ", \"FULL\": %" PRIu64 ", \"ERASED\": %" PRIu64 "}, \"errors\": {",
           s->all.answers[FLOE_INSERTED], s->all.answers[FLOE_PRESENT], s->all.answers[FLOE_ABSENT],
           s->all.answers[FLOE_FULL], s->all.answers[FLOE_ERASED]);
    n = 0;
    for (unsigned e = 0; e < ERR_SLOTS; e++)
        if (s->errors[e])
            printf("%s\"%s\": %" PRIu64, n++ ? ", " : "", err_slot_name(e), s->errors[e]);
    printf("}, \"table\": ");
    if (s->have_table) {
        printf("{\"keys\": %" PRIu64 ", \"bytes_per_key\": %.3f, \"fill\": %.4f, \"rebuilds\": %" PRIu64
               ", \"backend\": ",
               s->table.keys, s->table.bytes_per_key, s->table.fill, s->rebuilds);
        json_str(s->table.backend);
        printf("}");
    } else {
        printf("null");
    }
    printf(", \"stages\": ");
    if (s->have_stages) {
        printf("{\"seconds\": %.3f", s->stage_seconds);
        for (unsigned i = 0; i < s->n_stages; i++)
            printf(", \"%s\": {\"count\": %" PRIu64 ", \"keys\": %" PRIu64 ", \"seconds\": %.6f}", s->stages[i].name,
                   s->stages[i].count, s->stages[i].keys, (double)s->stages[i].nanos / 1e9);
        printf("}");
    } else {
        printf("null");
    }
    printf(", \"check\": {\"status\": \"%s\", \"distinct_keys_sent\": %" PRIu64 ", \"inserted\": %" PRIu64
           ", \"mismatches\": %" PRIu64 ", \"message\": ",
           s->check_status, s->distinct, s->inserted, s->mismatches);
    json_str(s->check_msg);
    printf("}, \"ok\": %s}\n", s->ok ? "true" : "false");
}

/* ---- main --------------------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    options *o = &R.opt;
    int rc = parse_options(argc, argv, o);
    if (rc >= 0)
        return rc;
    R.total_conns = (uint64_t)o->threads * o->conns;

    floe *ctl = NULL;
    int st = floe_connect_opts(o->server, &o->conn, &ctl);
    if (st != FLOE_OK) {
        rc = run_error("cannot connect to %s: %s: %s", o->server, floe_strerror(st), floe_errstr(ctl));
        floe_close(ctl);
        return st == FLOE_ERR_INVALID ? EXIT_USAGE : rc; /* the address or the options themselves */
    }
    bool created = false;
    worker *ws = NULL;
    if ((rc = prepare_table(ctl, &created)) >= 0)
        goto out;

    /* a request must fit in the server's max-frame */
    uint64_t key_bytes =
        o->kind == FLOE_TABLE_TREE ? 4ull * o->words : 8 + (o->kind == FLOE_TABLE_MAP ? o->value_bytes : 0);
    uint64_t frame = sat_mul(o->keys, key_bytes) + 128 + strlen(o->table);
    const floe_server_info *info = floe_info(ctl);
    if (info->max_frame && frame > info->max_frame) {
        rc = usage_error("a request of %" PRIu64 " keys is %" PRIu64 " bytes, above the server's max-frame (%" PRIu64
                         "): use fewer --keys-per-request",
                         o->keys, frame, info->max_frame);
        goto out;
    }

    R.spec = (wl_spec){
        .kind = o->kind,
        .key_bits = o->key_bits,
        .words = o->words,
        .value_bytes = o->kind == FLOE_TABLE_MAP || o->kind == FLOE_TABLE_ORDERED ? o->value_bytes : 0,
        .distribution = o->distribution,
        .dup_ratio = o->dup_ratio,
        .hot_fraction = o->hot_fraction,
        .hot_keys = o->hot_keys,
        .misses = o->ratio[WL_FIND] || o->ratio[WL_ERASE] || o->ratio[WL_SUCC] || o->ratio[WL_RANGE],
        .seed = o->seed,
        .streams = R.total_conns,
    };
    const char *why = wl_spec_check(&R.spec);
    if (why) {
        rc = usage_error("%s", why);
        goto out;
    }
    R.check = created && !o->ratio[WL_ERASE];
    R.op_total = 0;
    for (int op = 0; op < WL_OPS; op++)
        R.op_total += o->ratio[op];
    if (o->rate > 0)
        R.interval_ns = (double)R.total_conns * 1e9 / o->rate;
    if ((rc = make_workers(&ws)) >= 0)
        goto out;

    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESETHAND}; /* a second ^C kills */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    R.have_before = floe_stats(ctl, o->table, &R.before) == FLOE_OK;
    R.before_ns = now_ns();
    R.t0 = now_ns();
    R.measure_start = R.t0 + (uint64_t)(o->warmup * 1e9);
    if (!o->requests)
        R.deadline = R.measure_start + (uint64_t)(o->duration * 1e9);
    unsigned started = 0;
    for (; started < o->threads; started++)
        if (pthread_create(&ws[started].tid, NULL, worker_main, &ws[started]) != 0)
            break;
    if (started < o->threads) {
        atomic_store(&R.stop, 1);
        rc = run_error("cannot start thread %u", started);
    }
    /* progress: once a second, from the threads' last-second histograms */
    uint64_t tick = R.t0 + NS, last = R.t0;
    while (atomic_load(&R.finished) < started) {
        struct timespec nap = {0, 20 * 1000 * 1000};
        nanosleep(&nap, NULL);
        uint64_t now = now_ns();
        if (now >= tick) {
            if (!o->quiet)
                progress_line(ws, last);
            last = now;
            while (tick <= now)
                tick += NS;
        }
    }
    for (unsigned t = 0; t < started; t++)
        pthread_join(ws[t].tid, NULL);
    if (rc >= 0)
        goto out;

    summary s;
    summarize(ws, &s);
    {
        floe_table_info after;
        st = floe_stats(ctl, o->table, &after);
        if (st == FLOE_OK && created) {
            s.table = after;
            s.have_table = true;
        } else if (st != FLOE_OK) {
            fprintf(stderr, "floe-bench: stats %s after the run: %s: %s\n", o->table, floe_strerror(st),
                    floe_errstr(ctl));
        }
        if (st == FLOE_OK && R.have_before) {
            stage_diff(&s, &R.before, &after, (double)(now_ns() - R.before_ns) / 1e9);
            s.rebuilds = after.generation > R.before.generation ? after.generation - R.before.generation : 0;
        }
    }
    judge(&s);
    if (o->json)
        print_json(&s, created);
    else
        print_text(&s, s.have_table ? s.table.backend : info->backend);
    fflush(stdout);
    if (!s.ok)
        fprintf(stderr, "floe-bench: FAILED: %s\n", s.check_msg);
    rc = s.ok ? 0 : EXIT_FAILED;
out:
    free_workers(ws, o->threads);
    if (created && !o->keep) {
        st = floe_drop(ctl, o->table);
        if (st == FLOE_ERR_IO) { /* the control connection may have idled out: once more */
            floe_close(ctl);
            ctl = NULL;
            if (floe_connect_opts(o->server, &o->conn, &ctl) == FLOE_OK)
                st = floe_drop(ctl, o->table);
        }
        if (st != FLOE_OK) {
            fprintf(stderr, "floe-bench: drop %s: %s: %s\n", o->table, floe_strerror(st), floe_errstr(ctl));
            if (rc == 0)
                rc = EXIT_FAILED;
        }
    }
    floe_close(ctl);
    return rc;
}
