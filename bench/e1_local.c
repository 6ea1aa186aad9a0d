/*
 * e1_local.c - floe-e1-local: the E1 workload of docs/PERFORMANCE.md without the network,
 * through the same backend interface floed drives (tables/backend.h): the
 * ceiling an E1 run over TCP can approach.
 *
 * Batches of --keys keys (64 Ki), --inflight batches submitted at once (64:
 * E1's 16 connections x 4 requests), find-or-put of 40-bit keys of which
 * --present (half) were stored by batches that already completed and the
 * rest are new.  The table is preloaded so that present keys exist from the
 * first batch.  New keys are distinct by construction (a bijection of a
 * counter), so every answer is known: INSERTED for new keys, PRESENT for the
 * others; any other answer is reported and the exit status is 1.
 *
 * --fill F is the capacity run instead (docs/PERFORMANCE.md, "Several
 * GPUs"): a SET of --capacity keys (no growth) filled to fill F with keys
 * made on the fly by --threads threads (a bijection of a counter: all
 * distinct, so every answer must be INSERTED), then every key found
 * (PRESENT) and an eighth as many never inserted (ABSENT), every answer
 * checked.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "backend_gpu.h"
#include "layout.h"
#include "partition.h"

typedef struct options {
    const char *backend;
    unsigned gpus, parts;
    size_t keys;
    unsigned inflight;
    unsigned batches;
    unsigned key_bits;
    double present;
    unsigned runs, warmup;
    bool pinned;
    unsigned tables;
    unsigned lanes;
    double fill;       /* the capacity run: fill to reach (0: E1) */
    uint64_t capacity; /* its table's keys */
    unsigned threads;  /* its key-making threads */
} options;

typedef struct slot {
    floe_batch b;
    uint64_t *keys;
    uint8_t *results;
    size_t want_new; /* keys of this batch that are new */
    struct bench *bn;
} slot;

/* Finished batches wait in check_slots for a checker thread, which counts
 * their answers and frees the slot: the engine's thread, which calls
 * batch_done, does no per-key work for the benchmark. */
#define CHECKERS 2

typedef struct bench {
    pthread_mutex_t lock;
    pthread_cond_t cv, check_cv;
    unsigned free_n, check_n;
    slot **free_slots, **check_slots;
    bool stop;
    uint64_t inserted, present, wrong;
    floe_status failed;
    char error[FLOE_ERROR_MAX];
} bench;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static void batch_done(floe_batch *b)
{
    slot *s = b->user;
    bench *bn = s->bn;
    pthread_mutex_lock(&bn->lock);
    bn->check_slots[bn->check_n++] = s;
    pthread_cond_signal(&bn->check_cv);
    pthread_mutex_unlock(&bn->lock);
}

/* Counts each finished batch's answers itself (not the engine's counts). */
static void *checker(void *arg)
{
    bench *bn = arg;
    pthread_mutex_lock(&bn->lock);
    for (;;) {
        while (bn->check_n == 0 && !bn->stop)
            pthread_cond_wait(&bn->check_cv, &bn->lock);
        if (bn->check_n == 0)
            break;
        slot *s = bn->check_slots[--bn->check_n];
        pthread_mutex_unlock(&bn->lock);
        const floe_batch *b = &s->b;
        floe_answer_counts c;
        floe_answer_counts_tally(&c, s->results, b->n);
        pthread_mutex_lock(&bn->lock);
        if (b->status != FLOE_OK && bn->failed == FLOE_OK) {
            bn->failed = b->status;
            snprintf(bn->error, sizeof bn->error, "%s", b->error.msg);
        }
        bn->inserted += c.inserted;
        bn->present += c.present;
        if (c.inserted != s->want_new || c.inserted + c.present != b->n)
            bn->wrong++;
        bn->free_slots[bn->free_n++] = s;
        pthread_cond_signal(&bn->cv);
    }
    pthread_mutex_unlock(&bn->lock);
    return NULL;
}

/* The engine's stage timers so far. */
static void stages_now(floe_table *t, floe_stage_time out[FLOE_STAGES])
{
    floe_batch b;
    memset(&b, 0, sizeof b);
    b.op = FLOE_OP_STATS;
    if (floe_table_run(t, &b) == FLOE_OK)
        memcpy(out, b.stats.stage, sizeof b.stats.stage);
    else
        memset(out, 0, sizeof b.stats.stage);
}

/* The engine's stage times of the timed batches (now less before): per
 * key, and as a share of the run's wall time (above 100%: the stage ran on
 * several threads or overlapped itself). */
static void print_stages(floe_table *t, const floe_stage_time before[FLOE_STAGES], double secs, uint64_t keys)
{
    floe_stage_time after[FLOE_STAGES];
    stages_now(t, after);
    for (int i = 0; i < FLOE_STAGES; i++) {
        const uint64_t count = after[i].count - before[i].count, nanos = after[i].nanos - before[i].nanos;
        if (!count)
            continue;
        printf("  %-10s %9llu x %8.3f s  %6.2f ns/key  %5.0f%%\n", floe_stage_name(i), (unsigned long long)count,
               (double)nanos / 1e9, (double)nanos / (double)keys, 100.0 * (double)nanos / 1e9 / secs);
    }
}

/* The timed batches' keys: batch k's new keys are the counter values
 * preload + k * n_new and on (distinct from every other batch's and from the
 * preload's), its present ones drawn from the preload, the two interleaved
 * at random.  Each batch has its own generator, so o->threads threads make
 * them at once (one thread took a minute for 2000 batches of 1 Mi keys). */
typedef struct key_maker {
    const options *o;
    const floe_perm *perm;
    uint64_t *all;
    uint64_t preload;
    size_t n_new;
    unsigned run;
    unsigned next; /* the next batch to make (atomic) */
} key_maker;

static void *make_keys_main(void *arg)
{
    key_maker *m = arg;
    const options *o = m->o;
    const size_t n_present = o->keys - m->n_new;
    for (;;) {
        const unsigned k = __atomic_fetch_add(&m->next, 1, __ATOMIC_RELAXED);
        if (k >= o->batches)
            return NULL;
        uint64_t *keys = m->all + (uint64_t)k * o->keys;
        uint64_t rng = 0x5EED + ((uint64_t)m->run << 32 | k), next_new = m->preload + (uint64_t)k * m->n_new;
        xorshift(&rng);
        size_t np = 0, nn = 0;
        for (size_t i = 0; i < o->keys; i++) {
            const bool take_new = nn < m->n_new && (np >= n_present || (xorshift(&rng) & 1));
            keys[i] = floe_permute(m->perm, take_new ? next_new++ : xorshift(&rng) % m->preload);
            take_new ? nn++ : np++;
        }
    }
}

static void make_keys(key_maker *m)
{
    const unsigned n = m->o->threads < m->o->batches ? m->o->threads : m->o->batches;
    pthread_t th[256];
    unsigned made = 0;
    while (made < n && pthread_create(&th[made], NULL, make_keys_main, m) == 0)
        made++;
    if (made == 0) /* no thread to be had: this one makes them all */
        make_keys_main(m);
    for (unsigned i = 0; i < made; i++)
        pthread_join(th[i], NULL);
}

/* A submitting thread: the batches of its lane (batch k is lane k mod lanes), as floed's io threads each
 * feed their own. */
typedef struct submitter {
    bench *bn;
    const options *o;
    floe_table **tables;
    const uint64_t *all;
    size_t n_new;
    unsigned lane;
    double submit_s, wait_s; /* in floe_table_submit, waiting for a free slot */
} submitter;

static void *submit_main(void *arg)
{
    submitter *u = arg;
    bench *bn = u->bn;
    const options *o = u->o;
    for (unsigned k = u->lane; k < o->batches; k += o->lanes) {
        double w0 = now();
        pthread_mutex_lock(&bn->lock);
        while (bn->free_n == 0)
            pthread_cond_wait(&bn->cv, &bn->lock);
        slot *s = bn->free_slots[--bn->free_n];
        pthread_mutex_unlock(&bn->lock);
        u->wait_s += now() - w0;
        memset(&s->b, 0, sizeof s->b);
        s->b.op = FLOE_OP_INSERT;
        s->b.keys = u->all + (uint64_t)k * o->keys;
        s->b.n = o->keys;
        s->b.results = s->results;
        s->b.lane = u->lane;
        s->b.done = batch_done;
        s->b.user = s;
        s->want_new = u->n_new;
        double s0 = now();
        floe_table_submit(u->tables[k % o->tables], &s->b);
        u->submit_s += now() - s0;
    }
    return NULL;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: floe-e1-local [options]\n"
               "The E1 workload of docs/PERFORMANCE.md in process, through floed's backend interface (no network).\n"
               "  --backend cpu|gpu   engine (default cpu)\n"
               "  --gpus N            gpu: devices 0..N-1, the table partitioned over them (default 1)\n"
               "  --parts P           the table in P parts (tables/partition.h; default: one per GPU, 1 on the CPU)\n"
               "  --keys K            keys per batch (default 65536)\n"
               "  --inflight N        batches in flight (default 64: 16 connections x 4)\n"
               "  --batches B         timed batches per run (default 2000; their keys are made first,\n"
               "                      B x K x 8 bytes of memory)\n"
               "  --key-bits K        key width (default 40)\n"
               "  --present F         fraction of each batch already stored (default 0.5)\n"
               "  --runs R            runs, each on a fresh table; the median is reported (default 3)\n"
               "  --warmup W          runs before those, not counted (default 1): a fresh process's first\n"
               "                      run also pays for the pinned buffers the engine then keeps for reuse\n"
               "  --pinned            keys and answers in the backend's own host memory (floe_backend_host_alloc:\n"
               "                      pinned for the GPU, so that its copies skip the staging buffers), as a\n"
               "                      program that owns its buffers would keep them\n"
               "  --tables N          N tables, each preloaded alike, batch i going to table i mod N: the\n"
               "                      ceiling of N independent pipelines on one engine (default 1)\n"
               "  --lanes L           each table in L lanes (floed's pipelines, tables/backend.h), batch i in\n"
               "                      lane i mod L, submitted by a thread of that lane, as floed's io threads\n"
               "                      do: L pipelines side by side over one table (default 1)\n"
               "The capacity run instead of E1 (a table larger than one device, over all of them):\n"
               "  --fill F            fill a SET of --capacity keys to F (0.9) with distinct keys made on the\n"
               "                      fly, in batches of --keys, then find each once and an eighth as many\n"
               "                      absent ones;\n"
               "                      every answer is checked (INSERTED, PRESENT, ABSENT)\n"
               "  --capacity N        its table's capacity in keys (K, M, G, T: powers of 1024)\n"
               "  --threads T         threads making keys and running batches (default: one per CPU, at most 256)\n"
               "After each run: the engine's stage times (per key; %% of the run's wall time; the first\n"
               "table's), and the submitting threads' time in floe_table_submit (the door's checks) and\n"
               "waiting for a free batch slot.  Each batch's answers are counted by checker threads, off\n"
               "the engine's thread.\n");
}

/* ---- the capacity run ------------------------------------------------------------------------- */

typedef struct cap_run {
    floe_table *t;
    const options *o;
    floe_perm perm;
    floe_op op;
    uint64_t first, count;  /* counter values [first, first + count) */
    uint8_t want;           /* every answer */
    uint64_t next;          /* the next batch's first counter value (atomic) */
    uint64_t wrong, failed; /* atomics */
    char error[FLOE_ERROR_MAX];
    pthread_mutex_t lock;
} cap_run;

/* A key-making thread: batches of the run's counter range, each made, run and checked here. */
static void *cap_worker(void *arg)
{
    cap_run *r = arg;
    const size_t K = r->o->keys;
    uint64_t *keys = malloc(K * 8);
    uint8_t *res = malloc(K);
    for (;;) {
        const uint64_t at = __atomic_fetch_add(&r->next, K, __ATOMIC_RELAXED);
        if (!keys || !res || at >= r->count)
            break;
        const size_t n = r->count - at < K ? (size_t)(r->count - at) : K;
        for (size_t i = 0; i < n; i++)
            keys[i] = floe_permute(&r->perm, r->first + at + i);
        floe_batch b;
        memset(&b, 0, sizeof b);
        b.op = r->op;
        b.keys = keys;
        b.n = n;
        b.results = res;
        if (floe_table_run(r->t, &b) != FLOE_OK) {
            pthread_mutex_lock(&r->lock);
            if (!r->failed++)
                snprintf(r->error, sizeof r->error, "%s", b.error.msg);
            pthread_mutex_unlock(&r->lock);
            break;
        }
        uint64_t bad = 0;
        for (size_t i = 0; i < n; i++)
            bad += res[i] != r->want;
        if (bad)
            __atomic_fetch_add(&r->wrong, bad, __ATOMIC_RELAXED);
    }
    if (!keys || !res)
        __atomic_fetch_add(&r->failed, 1, __ATOMIC_RELAXED);
    free(keys);
    free(res);
    return NULL;
}

/* One pass of op over counter values [first, first + count); its rate, or -1 if an answer was not `want`. */
static double cap_pass(cap_run *r, floe_op op, uint64_t first, uint64_t count, uint8_t want, const char *what)
{
    r->op = op;
    r->first = first;
    r->count = count;
    r->want = want;
    r->next = 0;
    r->wrong = r->failed = 0;
    pthread_t th[256];
    const double t0 = now();
    for (unsigned i = 0; i < r->o->threads; i++)
        pthread_create(&th[i], NULL, cap_worker, r);
    for (unsigned i = 0; i < r->o->threads; i++)
        pthread_join(th[i], NULL);
    const double secs = now() - t0, rate = (double)count / secs;
    printf("  %-28s %14llu keys in %8.2f s: %8.1f M keys/s, %s\n", what, (unsigned long long)count, secs, rate / 1e6,
           r->failed  ? "FAILED"
           : r->wrong ? "WRONG ANSWERS"
                      : "every answer as expected");
    fflush(stdout);
    if (r->failed)
        fprintf(stderr, "floe-e1-local: a batch failed: %s\n", r->error);
    if (r->wrong)
        fprintf(stderr, "floe-e1-local: %llu answers were not %s\n", (unsigned long long)r->wrong,
                floe_answer_name(want));
    return r->failed || r->wrong ? -1 : rate;
}

static floe_status table_stats(floe_table *t, floe_table_stats *out)
{
    floe_batch b;
    memset(&b, 0, sizeof b);
    b.op = FLOE_OP_STATS;
    floe_status st = floe_table_run(t, &b);
    *out = b.stats;
    return st;
}

/* The capacity run: 0 if every answer was right. */
static int capacity_run(floe_backend *be, const options *o)
{
    floe_errinfo err;
    floe_spec spec;
    floe_spec_default(&spec);
    snprintf(spec.name, sizeof spec.name, "capacity");
    spec.key_bits = o->key_bits;
    spec.capacity = o->capacity;
    spec.seed = 99;
    floe_table *t = NULL;
    const double c0 = now();
    if (floe_table_create(be, &spec, &t, &err) != FLOE_OK) {
        fprintf(stderr, "floe-e1-local: a table of %llu keys: %s\n", (unsigned long long)o->capacity, err.msg);
        return 1;
    }
    floe_table_stats st;
    if (table_stats(t, &st) != FLOE_OK) {
        fprintf(stderr, "floe-e1-local: stats of the new table failed\n");
        return 1;
    }
    const uint64_t n = (uint64_t)(o->fill * (double)st.slots);
    printf("capacity run: a SET of %llu slots in %u part(s) (%.1f GiB of device memory, made in %.1f s); %llu "
           "distinct %u-bit keys to fill %.2f, batches of %zu keys from %u threads\n",
           (unsigned long long)st.slots, st.parts ? st.parts : 1, (double)st.memory_bytes / (1u << 30), now() - c0,
           (unsigned long long)n, o->key_bits, o->fill, o->keys, o->threads);
    for (unsigned p = 0; p < st.parts; p++)
        printf("  part %u on device %d: %llu slots, %.1f GiB\n", p, st.part[p].device,
               (unsigned long long)st.part[p].slots, (double)st.part[p].memory_bytes / (1u << 30));
    fflush(stdout);
    cap_run r = {.t = t, .o = o, .lock = PTHREAD_MUTEX_INITIALIZER};
    floe_perm_init(&r.perm, o->key_bits, 0xCA9AC17, 0);
    int bad = cap_pass(&r, FLOE_OP_INSERT, 0, n, FLOE_INSERTED, "insert (all new)") < 0;
    if (!bad && table_stats(t, &st) == FLOE_OK)
        printf("  the table: %llu keys, fill %.4f, %.3f bytes per key, %.1f GiB\n", (unsigned long long)st.keys,
               st.fill, st.bytes_per_key, (double)st.memory_bytes / (1u << 30));
    if (!bad && st.keys != n) {
        fprintf(stderr, "floe-e1-local: the table holds %llu keys, not %llu\n", (unsigned long long)st.keys,
                (unsigned long long)n);
        bad = 1;
    }
    bad = bad || cap_pass(&r, FLOE_OP_FIND, 0, n, FLOE_PRESENT, "find (all stored)") < 0;
    bad = bad || cap_pass(&r, FLOE_OP_FIND, n, n / 8, FLOE_ABSENT, "find (none stored, n/8)") < 0;
    floe_table_destroy(t);
    printf("capacity run: %s\n", bad ? "FAILED" : "every answer as expected");
    return bad;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    floe_gpu_load_kernels_at_start(); /* as floed runs the engines (backend_gpu.h) */
    options o = {"cpu", 1, 0, 65536, 64, 2000, 40, 0.5, 3, 1, false, 1, 1, 0, 0, 0};
    static const struct option longopts[] = {
        {"backend", required_argument, 0, 'B'},
        {"keys", required_argument, 0, 'k'},
        {"inflight", required_argument, 0, 'i'},
        {"batches", required_argument, 0, 'b'},
        {"key-bits", required_argument, 0, 'K'},
        {"present", required_argument, 0, 'p'},
        {"runs", required_argument, 0, 'r'},
        {"warmup", required_argument, 0, 'W'},
        {"help", no_argument, 0, 'h'},
        {"gpus", required_argument, 0, 'G'},
        {"parts", required_argument, 0, 'P'},
        {"pinned", no_argument, 0, 'M'},
        {"tables", required_argument, 0, 'T'},
        {"lanes", required_argument, 0, 'L'},
        {"fill", required_argument, 0, 'F'},
        {"capacity", required_argument, 0, 'C'},
        {"threads", required_argument, 0, 'j'},
        {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'B':
            o.backend = optarg;
            break;
        case 'k': {
            uint64_t k = 0;
            if (!floe_size_parse(optarg, &k)) {
                fprintf(stderr, "floe-e1-local: --keys takes a count (65536, 1M), not '%s'\n", optarg);
                return 2;
            }
            o.keys = (size_t)k;
            break;
        }
        case 'i':
            o.inflight = (unsigned)atoi(optarg);
            break;
        case 'b':
            o.batches = (unsigned)atoi(optarg);
            break;
        case 'K':
            o.key_bits = (unsigned)atoi(optarg);
            break;
        case 'p':
            o.present = atof(optarg);
            break;
        case 'r':
            o.runs = (unsigned)atoi(optarg);
            break;
        case 'W':
            o.warmup = (unsigned)atoi(optarg);
            break;
        case 'G':
            o.gpus = (unsigned)atoi(optarg);
            break;
        case 'P':
            o.parts = (unsigned)atoi(optarg);
            break;
        case 'M':
            o.pinned = true;
            break;
        case 'T':
            o.tables = (unsigned)atoi(optarg);
            break;
        case 'L':
            o.lanes = (unsigned)atoi(optarg);
            break;
        case 'F':
            o.fill = atof(optarg);
            break;
        case 'C':
            if (!floe_size_parse(optarg, &o.capacity)) {
                fprintf(stderr, "floe-e1-local: --capacity takes a count (72G), not '%s'\n", optarg);
                return 2;
            }
            break;
        case 'j':
            o.threads = (unsigned)atoi(optarg);
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (o.keys == 0 || o.inflight == 0 || o.batches == 0 || o.key_bits < 30 || o.key_bits > 64 || o.present < 0 ||
        o.present > 1 || o.runs == 0 || o.warmup > 100 || (strcmp(o.backend, "cpu") && strcmp(o.backend, "gpu")) ||
        o.gpus < 1 || o.gpus > FLOE_PARTS_MAX || o.parts > FLOE_PARTS_MAX || o.tables < 1 || o.tables > 64 ||
        o.lanes < 1 || o.lanes > FLOE_LANES_MAX || o.fill < 0 || o.fill > 1 || o.threads > 256 ||
        (o.fill > 0 && !o.capacity)) {
        usage(stderr);
        return 2;
    }
    if (!o.threads) {
        const long n = sysconf(_SC_NPROCESSORS_ONLN);
        o.threads = n < 1 ? 1 : n > 256 ? 256 : (unsigned)n;
    }
    floe_errinfo err;
    floe_backend *in[FLOE_PARTS_MAX], *be = NULL;
    const bool gpu = strcmp(o.backend, "gpu") == 0;
    const unsigned nin = gpu ? o.gpus : 1;
    floe_status st = FLOE_OK;
    for (unsigned i = 0; i < nin && st == FLOE_OK; i++)
        st = gpu ? floe_backend_gpu_create((int)i, 0, &in[i], &err) : floe_backend_cpu_create(0, &in[i], &err);
    if (st == FLOE_OK)
        st = floe_backend_partition_create(in, nin, o.parts ? o.parts : nin, 0, &be, &err);
    if (st == FLOE_OK)
        st = floe_backend_set_lanes(be, o.lanes, &err);
    if (st == FLOE_OK)
        printf("backend %s on %u device(s), tables in %u part(s), %u lane(s)\n", o.backend, nin, floe_backend_parts(be),
               floe_backend_lanes(be));
    if (st != FLOE_OK) {
        fprintf(stderr, "floe-e1-local: %s\n", err.msg);
        return 1;
    }
    if (o.fill > 0) {
        const int bad = capacity_run(be, &o);
        floe_backend_destroy(be);
        return bad;
    }
    const size_t n_present = (size_t)(o.keys * o.present), n_new = o.keys - n_present;
    const uint64_t preload = (uint64_t)o.inflight * o.keys; /* present keys exist from the first batch */
    floe_perm perm;
    floe_perm_init(&perm, o.key_bits, 0xE1E1, 0);
    double *rates = calloc(o.runs, sizeof *rates);
    const size_t all_bytes = (size_t)o.batches * o.keys * 8;
    uint64_t *all = o.pinned ? floe_backend_host_alloc(be, all_bytes) : malloc(all_bytes);
    if (!rates || !all) {
        fprintf(stderr, "floe-e1-local: out of memory for %u batches of %zu keys (--batches, --keys)\n", o.batches,
                o.keys);
        return 1;
    }
    int bad = 0;
    printf("E1 in process on the %s backend: %zu keys per batch (%zu present, %zu new), %u in flight, %u batches, "
           "%u-bit keys, %u table(s)\n",
           o.backend, o.keys, n_present, n_new, o.inflight, o.batches, o.key_bits, o.tables);
    for (unsigned run = 0; run < o.warmup + o.runs && !bad; run++) {
        const bool warming = run < o.warmup;
        floe_spec spec;
        floe_spec_default(&spec);
        snprintf(spec.name, sizeof spec.name, "e1");
        spec.key_bits = o.key_bits;
        /* each table holds the preload and its share of the new keys, at the same fill as one */
        const uint64_t per_table = preload + ((uint64_t)o.batches + o.tables - 1) / o.tables * n_new;
        spec.capacity = per_table + per_table / 8;
        spec.seed = 77 + run;
        floe_table *tables[64];
        for (unsigned i = 0; i < o.tables; i++)
            if (floe_table_create(be, &spec, &tables[i], &err) != FLOE_OK) {
                fprintf(stderr, "floe-e1-local: %s\n", err.msg);
                return 1;
            }
        floe_table *t = tables[0];
        bench bn = {.lock = PTHREAD_MUTEX_INITIALIZER,
                    .cv = PTHREAD_COND_INITIALIZER,
                    .check_cv = PTHREAD_COND_INITIALIZER,
                    .failed = FLOE_OK};
        slot *slots = calloc(o.inflight, sizeof *slots);
        bn.free_slots = calloc(o.inflight, sizeof *bn.free_slots);
        bn.check_slots = calloc(o.inflight, sizeof *bn.check_slots);
        pthread_t checkers[CHECKERS];
        for (unsigned i = 0; i < CHECKERS; i++)
            pthread_create(&checkers[i], NULL, checker, &bn);
        for (unsigned i = 0; i < o.inflight; i++) {
            slots[i].keys = malloc(o.keys * 8);
            slots[i].results = o.pinned ? floe_backend_host_alloc(be, o.keys) : malloc(o.keys);
            slots[i].bn = &bn;
            bn.free_slots[bn.free_n++] = &slots[i];
        }
        /* preload: new keys 0 .. preload-1, one batch at a time */
        uint64_t next_new = 0;
        for (uint64_t at = 0; at < preload; at += o.keys) {
            slot *s = &slots[0];
            for (size_t i = 0; i < o.keys; i++)
                s->keys[i] = floe_permute(&perm, next_new++);
            for (unsigned i = 0; i < o.tables; i++) {
                memset(&s->b, 0, sizeof s->b);
                s->b.op = FLOE_OP_INSERT;
                s->b.keys = s->keys;
                s->b.n = o.keys;
                s->b.results = s->results;
                floe_table_run(tables[i], &s->b);
            }
        }
        /* Every timed batch's keys, made before the clock starts */
        make_keys(&(key_maker){&o, &perm, all, preload, n_new, run, 0});
        floe_stage_time before[FLOE_STAGES];
        stages_now(t, before);
        submitter subs[FLOE_LANES_MAX];
        pthread_t sub_threads[FLOE_LANES_MAX];
        double t0 = now(), submit_s = 0, wait_s = 0;
        for (unsigned l = 0; l < o.lanes; l++) {
            subs[l] = (submitter){&bn, &o, tables, all, n_new, l, 0, 0};
            if (l > 0)
                pthread_create(&sub_threads[l], NULL, submit_main, &subs[l]);
        }
        submit_main(&subs[0]); /* lane 0 on this thread */
        for (unsigned l = 0; l < o.lanes; l++) {
            if (l > 0)
                pthread_join(sub_threads[l], NULL);
            submit_s += subs[l].submit_s;
            wait_s += subs[l].wait_s;
        }
        pthread_mutex_lock(&bn.lock);
        while (bn.free_n < o.inflight)
            pthread_cond_wait(&bn.cv, &bn.lock);
        pthread_mutex_unlock(&bn.lock);
        double secs = now() - t0;
        pthread_mutex_lock(&bn.lock);
        bn.stop = true;
        pthread_cond_broadcast(&bn.check_cv);
        pthread_mutex_unlock(&bn.lock);
        for (unsigned i = 0; i < CHECKERS; i++)
            pthread_join(checkers[i], NULL);
        const double rate = (double)o.batches * o.keys / secs;
        if (!warming)
            rates[run - o.warmup] = rate;
        printf("%s %u: %.1f M keys/s (%.3f s); inserted %llu, present %llu%s\n", warming ? "warm-up run" : "run",
               warming ? run : run - o.warmup, rate / 1e6, secs,
               (unsigned long long)bn.inserted, (unsigned long long)bn.present, bn.wrong ? " - WRONG ANSWERS" : "");
        if (bn.failed != FLOE_OK) {
            fprintf(stderr, "floe-e1-local: a batch failed: %s\n", bn.error);
            bad = 1;
        }
        if (bn.wrong || bn.inserted != (uint64_t)o.batches * n_new) {
            fprintf(stderr, "floe-e1-local: %llu batches answered other than expected\n", (unsigned long long)bn.wrong);
            bad = 1;
        }
        print_stages(t, before, secs, (uint64_t)o.batches * o.keys);
        printf("  submitter%s: %.3f s in floe_table_submit, %.3f s waiting for a free slot\n",
               o.lanes > 1 ? "s (summed)" : "", submit_s, wait_s);
        for (unsigned i = 0; i < o.tables; i++)
            floe_table_destroy(tables[i]);
        for (unsigned i = 0; i < o.inflight; i++) {
            free(slots[i].keys);
            if (o.pinned)
                floe_backend_host_free(be, slots[i].results);
            else
                free(slots[i].results);
        }
        free(slots);
        free(bn.free_slots);
        free(bn.check_slots);
    }
    if (!bad) {
        qsort(rates, o.runs, sizeof *rates, cmp_double);
        printf("E1 in process (%s): median %.1f M keys/s (min %.1f, max %.1f)\n", o.backend, rates[o.runs / 2] / 1e6,
               rates[0] / 1e6, rates[o.runs - 1] / 1e6);
    }
    free(rates);
    if (o.pinned)
        floe_backend_host_free(be, all);
    else
        free(all);
    floe_backend_destroy(be);
    return bad;
}
