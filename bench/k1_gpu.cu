/*
 * k1_gpu.cu - floe-k1-gpu: the K1 kernel benchmark (docs/PERFORMANCE.md) on the GPU
 * engine.  Table already on the device: 2^S primary slots (32 per bucket;
 * S = 30 gives 16-bit rows for 40-bit keys), 2^(S-3) secondary, 2^(S-8)
 * stash; 40-bit unique random keys generated on the device.  Rows as in
 * docs/PERFORMANCE.md (fill = occupied slots / all slots); puts run in batches of
 * --batch keys.  Each row is timed with CUDA events; medians of --runs runs.
 * `--no-dedup` also times the puts without the first-occurrence fix-up (the
 * reference library's semantics: any occurrence may win).  `--static` adds
 * S1: the keys of the fill to 0.9 built into a static cuckoo table
 * (cuckoo_gpu.h), its finds of all hits and all misses beside the K1
 * table's in the same run, and its bytes per key.  `--grow` runs G1
 * instead: --keys keys in batches of 1 Mi through the GPU backend (as floed
 * runs them), into a SET and a MAP that grow from the default capacity and
 * into ones sized for the keys, in the same run.
 */
#include <algorithm>
#include <cuda_runtime.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "backend.h"
#include "backend_gpu.h"
#include "cuckoo_gpu.h"
#include "gpu_args.h"
#include "iceberg_gpu.h"
#include "layout.h"

static void must(floe_status st, const floe_errinfo &err)
{
    gpu_args_must("floe-k1-gpu", st, &err);
}

/* keys[i] = perm(start + i): distinct for distinct inputs. */
__global__ void k_keys(const __grid_constant__ floe_perm p, uint64_t start, uint64_t n, uint64_t *keys)
{
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i < n)
        keys[i] = floe_permute(&p, start + i);
}

/* A stream of 2m keys in which each of keys perm(0..m) occurs twice, at
 * positions scattered by a bijection on [0, 2m) (cycle-walking a
 * power-of-two permutation). */
__global__ void k_twice(const __grid_constant__ floe_perm keyp, const __grid_constant__ floe_perm walk, uint64_t m,
                        uint64_t *keys)
{
    uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (j >= 2 * m)
        return;
    uint64_t x = floe_permute(&walk, j);
    while (x >= 2 * m)
        x = floe_permute(&walk, x);
    keys[j] = floe_permute(&keyp, x >> 1);
}

__global__ void k_count(const uint8_t *r, uint64_t n, unsigned long long *c)
{
    __shared__ unsigned long long s[5];
    if (threadIdx.x < 5)
        s[threadIdx.x] = 0;
    __syncthreads();
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i < n && r[i] < 5)
        atomicAdd(&s[r[i]], 1ull);
    __syncthreads();
    if (threadIdx.x < 5 && s[threadIdx.x])
        atomicAdd(&c[threadIdx.x], s[threadIdx.x]);
}

static void counts(const uint8_t *d_r, uint64_t n, unsigned long long *d_c, unsigned long long h[5])
{
    CHECK(cudaMemset(d_c, 0, 5 * sizeof *d_c));
    k_count<<<(unsigned)((n + 255) / 256), 256>>>(d_r, n, d_c);
    CHECK(cudaMemcpy(h, d_c, 5 * sizeof *h, cudaMemcpyDeviceToHost));
}

/* 40-bit keys; 2^S slots with 32 (2^5) per primary bucket: S - 5 primary address bits. */
static const unsigned KEY_BITS = 40, LOG2_BUCKET_SLOTS = 5;
static const unsigned MIN_LOG2_SLOTS = floe_min_addr_bits(KEY_BITS) + LOG2_BUCKET_SLOTS;
static const unsigned MAX_LOG2_SLOTS = floe_max_addr_bits(KEY_BITS) + LOG2_BUCKET_SLOTS;

static void usage_line(FILE *f)
{
    fprintf(f, "usage: floe-k1-gpu [--log2-slots S] [--runs R] [--batch B] [--no-dedup] [--static] [--sweep]\n"
               "       floe-k1-gpu --grow [--keys N] [--runs R] [--per-batch]\n");
}

static void help(void)
{
    usage_line(stdout);
    printf("The K1 kernel benchmark (docs/PERFORMANCE.md) on the GPU engine: puts to fill 0.5, 0.8 and 0.9,\n"
           "finds (all hits, all misses) and find-or-puts (every key twice) of %u-bit random keys on a table\n"
           "already on the device; prints G keys/s per row (median, min and max of the runs).\n"
           "\n"
           "Options:\n"
           "      --log2-slots S  2^S primary slots, 32 per bucket (plus 1/8 secondary, 1/256 stash);\n"
           "                      %u..%u (default 30: 16-bit primary rows)\n"
           "      --runs R        runs, each on fresh tables; the table shows their median (default 3)\n"
           "      --batch B       keys per put call; K, M, G suffixes (default 64M = 2^26)\n"
           "      --no-dedup      also time the puts without the first-occurrence fix-up (the reference\n"
           "                      library's semantics: any occurrence may win) (default: off)\n"
           "      --static        also S1: the fill's keys built into a static cuckoo table (STATIC tables\n"
           "                      once frozen), its finds of all hits and all misses against the K1\n"
           "                      table's of the same run, and its bytes per key (default: off)\n"
           "      --grow          instead of K1: G1, --keys keys in batches of 1 Mi through the GPU backend\n"
           "                      into a SET and a MAP (8-byte values) that grow from the default capacity,\n"
           "                      and into ones sized for them: M keys/s over the run, the slowest batch\n"
           "                      against the median one, and the most slots a key (1 / fill) and the\n"
           "                      most device bytes over the bytes the keys fill (the slots in use, in\n"
           "                      the arrays that hold them; the old arrays' too while a growth moves\n"
           "                      them) seen every 4 batches\n"
           "      --keys N        with --grow: keys inserted (default 1G = 2^30)\n"
           "      --per-batch     with --grow: after each run, its first 8 batches' times and every later\n"
           "                      batch over 3x the median, and (a growing table's) the samples of more than\n"
           "                      1.8 times the device bytes the keys fill\n"
           "      --sweep         instead of K1: the batch-size sweep, find-or-put of a stream in which each\n"
           "                      of 2^25 keys occurs twice, in batches of 2^10, 2^12 .. 2^26 keys, on the\n"
           "                      same table (what a batch costs besides its keys)\n"
           "  -h, --help          this text\n"
           "\n"
           "Numbers are decimal, with K, M, G suffixes (powers of 1024).\n"
           "Exit status: 0 done, 1 a CUDA error or a wrong answer, 2 a usage error or no CUDA device.\n",
           KEY_BITS, MIN_LOG2_SLOTS, MAX_LOG2_SLOTS);
}

[[noreturn]] static void usage_error(void)
{
    usage_line(stderr);
    fprintf(stderr, "Try 'floe-k1-gpu --help'.\n");
    exit(2);
}

/* The value of option --opt in lo..hi, or a usage error. */
static uint64_t number(const char *opt, const char *arg, uint64_t lo, uint64_t hi)
{
    uint64_t v;
    if (!gpu_args_number("floe-k1-gpu", opt, arg, lo, hi, &v))
        usage_error();
    return v;
}

/* One run of S1: keys [0, n) (on the device) built into a static table,
 * found (hits), and keys [n, 2n) found (misses); G keys/s to s1[0..2],
 * every answer counted. */
static int s1_static(const floe_spec &spec, const uint64_t *d_keys, uint64_t n, uint8_t *d_res,
                     unsigned long long *d_cnt, std::vector<double> s1[3], double *fill, double *bpk)
{
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    floe_errinfo err;
    gpu_cuckoo *c;
    float ms;
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaEventRecord(e0));
    must(gpu_cuckoo_build(&spec, 1, d_keys, NULL, n, FLOE_CUCKOO_FILL, 0, &c, &err), err);
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    s1[0].push_back((double)n / ms / 1e6);
    *fill = (double)n / (double)floe_cuckoo_slots(gpu_cuckoo_geometry(c));
    *bpk = (double)gpu_cuckoo_memory(c) / (double)n;
    for (int r = 0; r < 2; r++) {
        CHECK(cudaEventRecord(e0));
        must(gpu_cuckoo_find(c, d_keys + r * n, n, d_res, NULL, NULL, 0, &err), err);
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        s1[1 + r].push_back((double)n / ms / 1e6);
        unsigned long long cnt[5];
        counts(d_res, n, d_cnt, cnt);
        if (cnt[r == 0 ? FLOE_PRESENT : FLOE_ABSENT] != n) {
            fprintf(stderr, "floe-k1-gpu: static find-%s answered %llu PRESENT, %llu ABSENT of %llu\n",
                    r ? "miss" : "hit", cnt[FLOE_PRESENT], cnt[FLOE_ABSENT], (unsigned long long)n);
            return 1;
        }
    }
    gpu_cuckoo_destroy(c);
    CHECK(cudaEventDestroy(e0));
    CHECK(cudaEventDestroy(e1));
    return 0;
}

/* G1 (--grow): n unique random 40-bit keys, from pinned host memory, in
 * batches of 1 Mi through the GPU backend into tables that grow from the
 * default capacity and into ones sized for them, SET and MAP, in turn.
 * The slowest batch is also given past the first WARM_BATCHES, which pay
 * once for what a process does first (CUDA loads each kernel at its first
 * launch; the staging buffers are made). */
#define WARM_BATCHES 4
/* The table's slots over its keys (1 / fill; after a growth, how much of
 * the arrays the keys leave empty), and its device bytes over the bytes its
 * keys fill (bytes_over_filled; while a growth is under way the old
 * arrays' chunks still mapped count too), sampled every SPARE_EVERY
 * batches past the first WARM_BATCHES, their time taken out of the run's. */
#define SPARE_EVERY 4
/* --per-batch lists the samples of more device bytes than this over the keys' */
#define BYTES_SHOWN 1.8

/* The device bytes of a table over the bytes its keys fill: the bytes of
 * the slots in use in the arrays that hold them (stats' used_bytes: while a
 * growth moves the keys from arrays of wider rows, the keys not moved yet
 * at the old arrays' width). */
static double bytes_over_filled(const floe_table_stats &st)
{
    return st.used_bytes ? (double)st.memory_bytes / (double)st.used_bytes : 0.0;
}
static int run_g1(uint64_t n, unsigned runs, bool per_batch)
{
    const uint64_t b = std::min<uint64_t>(1ull << 20, n), batches = (n + b - 1) / b;
    floe_backend *be;
    floe_errinfo err;
    must(floe_backend_gpu_create(0, 0, &be, &err), err);
    uint64_t *keys = (uint64_t *)floe_backend_host_alloc(be, n * 8),
             *vals = (uint64_t *)floe_backend_host_alloc(be, n * 8);
    uint8_t *res = (uint8_t *)floe_backend_host_alloc(be, b);
    if (!keys || !vals || !res) {
        fprintf(stderr, "floe-k1-gpu: cannot allocate %llu bytes of pinned memory\n", (unsigned long long)(16 * n + b));
        return 1;
    }
    floe_perm keygen;
    floe_perm_init(&keygen, 40, 777, 0);
    for (uint64_t i = 0; i < n; i++) {
        keys[i] = floe_permute(&keygen, i);
        vals[i] = i;
    }
    std::vector<double> lat(batches);
    printf("# floe-k1-gpu --grow: G1, %llu unique random 40-bit keys in batches of %llu through the GPU backend, "
           "median of %u runs\n",
           (unsigned long long)n, (unsigned long long)b, runs);
    printf("| table | M keys/s (median) | slowest batch / median batch (median) | slowest batch, ms | median batch, "
           "ms | growths | the slowest batch of each run | slowest past the first %d / median (each run's) | slots "
           "/ keys, most seen | device bytes / bytes the keys fill, most seen |\n"
           "|---|---|---|---|---|---|---|---|---|---|\n",
           WARM_BATCHES);
    for (int map = 0; map < 2; map++)
        for (int sized = 1; sized >= 0; sized--) {
            std::vector<double> rate, ratio, worst, median, worst_at, warm_ratio;
            std::vector<std::pair<uint64_t, double>> warm_worst_at; /* each run's slowest past the first batches */
            uint64_t growths = 0;
            double spare = 0; /* the most slots over keys (1 / fill) a sample saw, over the runs */
            double bytes_most = 0; /* the most device bytes over the bytes the keys fill */
            for (unsigned run = 0; run < runs; run++) {
                floe_spec spec;
                floe_spec_default(&spec);
                strcpy(spec.name, "g1");
                spec.kind = map ? FLOE_KIND_MAP : FLOE_KIND_SET;
                spec.key_bits = 40;
                spec.value_bytes = map ? 8 : 0;
                spec.grow = true;
                if (sized)
                    spec.capacity = n;
                floe_table *t;
                must(floe_table_create(be, &spec, &t, &err), err);
                const uint64_t s0 = floe_now_ns();
                uint64_t untimed = 0; /* the samples' time, not the run's */
                /* the samples past BYTES_SHOWN */
                std::vector<std::pair<uint64_t, double>> bytes_seen;
                for (uint64_t k = 0; k < batches; k++) {
                    const uint64_t at = k * b, m = std::min(b, n - at);
                    floe_batch bt;
                    memset(&bt, 0, sizeof bt);
                    bt.op = FLOE_OP_INSERT;
                    bt.keys = keys + at;
                    bt.n = m;
                    bt.values = map ? vals + at : NULL;
                    bt.values_len = map ? m * 8 : 0;
                    bt.results = res;
                    const uint64_t t0 = floe_now_ns();
                    must(floe_table_run(t, &bt), bt.error);
                    lat[k] = (double)(floe_now_ns() - t0) / 1e6;
                    if (k >= WARM_BATCHES && k % SPARE_EVERY == 0) { /* the slots over the keys (1 / fill) */
                        const uint64_t u0 = floe_now_ns();
                        floe_batch q;
                        memset(&q, 0, sizeof q);
                        q.op = FLOE_OP_STATS;
                        must(floe_table_run(t, &q), q.error);
                        if (q.stats.fill > 0 && 1.0 / q.stats.fill > spare)
                            spare = 1.0 / q.stats.fill;
                        const double over = bytes_over_filled(q.stats);
                        bytes_most = std::max(bytes_most, over);
                        if (per_batch && !sized && over > BYTES_SHOWN) /* a sized table starts nearly empty */
                            bytes_seen.push_back({k, over});
                        untimed += floe_now_ns() - u0;
                    }
                    if (bt.counts.inserted != m) {
                        fprintf(stderr, "floe-k1-gpu: G1 batch %llu: %llu of %llu keys INSERTED\n",
                                (unsigned long long)k, (unsigned long long)bt.counts.inserted, (unsigned long long)m);
                        return 1;
                    }
                }
                rate.push_back((double)n / ((double)(floe_now_ns() - s0 - untimed) / 1e9) / 1e6);
                floe_batch st;
                memset(&st, 0, sizeof st);
                st.op = FLOE_OP_STATS;
                must(floe_table_run(t, &st), st.error);
                if (st.stats.keys != n) {
                    fprintf(stderr, "floe-k1-gpu: G1: the table holds %llu keys of %llu\n",
                            (unsigned long long)st.stats.keys, (unsigned long long)n);
                    return 1;
                }
                growths = st.stats.generation;
                floe_table_destroy(t);
                worst_at.push_back((double)(std::max_element(lat.begin(), lat.end()) - lat.begin()));
                const auto warm_it =
                    batches > WARM_BATCHES ? std::max_element(lat.begin() + WARM_BATCHES, lat.end()) : lat.end() - 1;
                const double warm_worst = *warm_it;
                warm_worst_at.push_back({(uint64_t)(warm_it - lat.begin()), warm_worst});
                std::vector<double> sorted(lat);
                std::sort(sorted.begin(), sorted.end());
                worst.push_back(sorted.back());
                median.push_back(sorted[sorted.size() / 2]);
                ratio.push_back(sorted.back() / sorted[sorted.size() / 2]);
                if (per_batch) { /* where the slow batches are: a table's first, or a growth's */
                    const double med = sorted[sorted.size() / 2];
                    printf("#   %s, %s, run %u: the first batches", map ? "MAP" : "SET", sized ? "sized" : "grown",
                           run);
                    for (uint64_t k = 0; k < batches && k < 8; k++)
                        printf(" #%llu %.2f", (unsigned long long)k, lat[k]);
                    printf(" ms; later ones over 3x the median (%.3f ms):", med);
                    for (uint64_t k = 8; k < batches; k++)
                        if (lat[k] > 3 * med)
                            printf(" #%llu %.2f", (unsigned long long)k, lat[k]);
                    if (!sized) {
                        printf("; device bytes over %.1fx the keys' after batch", BYTES_SHOWN);
                        for (const auto &b : bytes_seen)
                            printf(" #%llu %.2f", (unsigned long long)b.first, b.second);
                    }
                    printf("\n");
                }
                warm_ratio.push_back(warm_worst / sorted[sorted.size() / 2]);
            }
            for (auto *v : {&rate, &ratio, &worst, &median, &warm_ratio})
                std::sort(v->begin(), v->end());
            printf("| %s, %s | %.1f | %.1f | %.2f | %.3f | %llu |", map ? "MAP (8-byte values)" : "SET",
                   sized ? "sized for the keys" : "grown from the default capacity", rate[runs / 2], ratio[runs / 2],
                   worst[runs / 2], median[runs / 2], (unsigned long long)growths);
            for (double at : worst_at)
                printf(" #%.0f", at);
            printf(" | %.1f (", warm_ratio[runs / 2]);
            for (size_t j = 0; j < warm_worst_at.size(); j++)
                printf("%s#%llu %.2f ms", j ? ", " : "", (unsigned long long)warm_worst_at[j].first,
                       warm_worst_at[j].second);
            printf(") | %.2f | %.2f |\n", spare, bytes_most);
            fflush(stdout);
        }
    floe_backend_host_free(be, keys);
    floe_backend_host_free(be, vals);
    floe_backend_host_free(be, res);
    floe_backend_destroy(be);
    return 0;
}

/* The batch-size sweep (--sweep): find-or-put of 2^26 keys, each of 2^25
 * occurring twice, on a fresh table per batch size and run. */
static int batch_sweep(const floe_spec &spec, uint32_t a0, const floe_perm &keyp, unsigned runs)
{
    const uint64_t m = 1ull << 25, n = 2 * m;
    floe_perm walk;
    floe_perm_init(&walk, 26, 777, 0);
    uint64_t *d_keys;
    uint8_t *d_res;
    unsigned long long *d_cnt;
    CHECK(cudaMalloc(&d_keys, n * 8));
    CHECK(cudaMalloc(&d_res, n));
    CHECK(cudaMalloc(&d_cnt, 5 * sizeof *d_cnt));
    k_twice<<<(unsigned)((n + 255) / 256), 256>>>(keyp, walk, m, d_keys);
    CHECK(cudaGetLastError());
    uint64_t *d_warm; /* keys perm(m ..): none of the stream's */
    uint8_t *d_wres;
    CHECK(cudaMalloc(&d_warm, n * 8));
    CHECK(cudaMalloc(&d_wres, n));
    k_keys<<<(unsigned)((n + 255) / 256), 256>>>(keyp, m, n, d_warm);
    CHECK(cudaGetLastError());
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    floe_errinfo err;
    printf("| batch (keys) | G keys/s (median) | min | max | us per batch (median) |\n|---|---|---|---|---|\n");
    for (unsigned lb = 10; lb <= 26; lb += 2) {
        const uint64_t batch = 1ull << lb;
        std::vector<double> gks;
        for (unsigned run = 0; run < runs; run++) {
            gpu_iceberg *t;
            must(gpu_iceberg_create(&spec, a0, 0, &t, &err), err);
            /* untimed: a batch of other keys grows the table's scratch to the batch size */
            must(gpu_iceberg_put(t, d_warm, batch, d_wres, NULL, 0, 0, &err), err);
            CHECK(cudaDeviceSynchronize());
            CHECK(cudaEventRecord(e0));
            for (uint64_t at = 0; at < n; at += batch)
                must(gpu_iceberg_put(t, d_keys + at, std::min(batch, n - at), d_res + at, NULL, 0, 0, &err), err);
            CHECK(cudaEventRecord(e1));
            CHECK(cudaEventSynchronize(e1));
            float ms;
            CHECK(cudaEventElapsedTime(&ms, e0, e1));
            gks.push_back((double)n / ms / 1e6);
            unsigned long long c[5];
            counts(d_res, n, d_cnt, c);
            if (c[FLOE_INSERTED] != m || c[FLOE_PRESENT] != m) {
                fprintf(stderr, "floe-k1-gpu: sweep at 2^%u answered %llu INSERTED, %llu PRESENT; expected %llu each\n",
                        lb, c[FLOE_INSERTED], c[FLOE_PRESENT], (unsigned long long)m);
                return 1;
            }
            gpu_iceberg_destroy(t);
        }
        std::sort(gks.begin(), gks.end());
        const double med = gks[gks.size() / 2];
        printf("| 2^%u | %.2f | %.2f | %.2f | %.1f |\n", lb, med, gks.front(), gks.back(), (double)batch / med / 1e3);
    }
    return 0;
}

int main(int argc, char **argv)
{
    floe_gpu_load_kernels_at_start(); /* as floed runs the engines (backend_gpu.h) */
    unsigned log2_slots = 30, runs = 3;
    const unsigned key_bits = KEY_BITS;
    uint64_t batch = 1ull << 26;
    bool no_dedup = false, sweep = false, statics = false, grow = false;
    uint64_t g1_keys = 1ull << 30;
    bool keys_given = false, per_batch = false;
    static const struct option longopts[] = {
        {"log2-slots", required_argument, NULL, 'S'},
        {"runs", required_argument, NULL, 'r'},
        {"batch", required_argument, NULL, 'b'},
        {"no-dedup", no_argument, NULL, 'N'},
        {"static", no_argument, NULL, 'X'},
        {"grow", no_argument, NULL, 'G'},
        {"keys", required_argument, NULL, 'k'},
        {"sweep", no_argument, NULL, 'W'},
        {"per-batch", no_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    /* arguments first: nothing here touches CUDA, so --help and usage errors work without a device */
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'S':
            log2_slots = (unsigned)number("log2-slots", optarg, MIN_LOG2_SLOTS, MAX_LOG2_SLOTS);
            break;
        case 'r':
            runs = (unsigned)number("runs", optarg, 1, UINT32_MAX);
            break;
        case 'b':
            batch = number("batch", optarg, 1, UINT64_MAX);
            break;
        case 'N':
            no_dedup = true;
            break;
        case 'X':
            statics = true;
            break;
        case 'G':
            grow = true;
            break;
        case 'k':
            g1_keys = number("keys", optarg, 1, 1ull << 36);
            keys_given = true;
            break;
        case 'W':
            sweep = true;
            break;
        case 'P':
            per_batch = true;
            break;
        case 'h':
            help();
            return 0;
        default: /* getopt_long said what is wrong */
            usage_error();
        }
    }
    if (optind < argc) {
        fprintf(stderr, "floe-k1-gpu: unexpected argument '%s'\n", argv[optind]);
        usage_error();
    }
    if (grow && (statics || sweep || no_dedup)) {
        fprintf(stderr, "floe-k1-gpu: --grow runs G1 instead of K1: --static, --sweep and --no-dedup are K1's\n");
        usage_error();
    }
    if (per_batch && !grow) {
        fprintf(stderr, "floe-k1-gpu: --per-batch is G1's (with --grow)\n");
        usage_error();
    }
    if (keys_given && !grow) {
        fprintf(stderr, "floe-k1-gpu: --keys is G1's (with --grow); K1's size is --log2-slots\n");
        usage_error();
    }
    char name[256];
    if (!gpu_available(0, name, sizeof name)) {
        fprintf(stderr, "floe-k1-gpu: no CUDA device\n");
        return 2;
    }
    if (grow) {
        printf("# on %s\n", name);
        return run_g1(g1_keys, runs, per_batch);
    }
    floe_spec spec;
    floe_spec_default(&spec);
    strcpy(spec.name, "k1");
    spec.key_bits = key_bits;
    spec.seed = 0x5EED;
    const uint32_t a0 = log2_slots - LOG2_BUCKET_SLOTS;
    floe_geometry g;
    floe_geometry_init(&g, key_bits, a0, 0, spec.seed);
    const uint64_t slots = g.total_slots;
    const uint64_t n05 = (uint64_t)(0.5 * slots), n08 = (uint64_t)(0.8 * slots), n09 = (uint64_t)(0.9 * slots);
    printf("# floe-k1-gpu on %s: 2^%u primary slots (%u-bit rows) + %llu secondary (%u-bit) + %llu stash (%u-bit) = "
           "%llu slots, %u-bit keys, put batches of %llu, median of %u runs\n",
           name, log2_slots, g.level[0].row_bits, (unsigned long long)floe_level_slots(&g.level[1]),
           g.level[1].row_bits, (unsigned long long)floe_level_slots(&g.level[2]), g.level[2].row_bits,
           (unsigned long long)slots, key_bits, (unsigned long long)batch, runs);

    floe_perm keyp, walk;
    floe_perm_init(&keyp, key_bits, 12345, 0);
    if (sweep)
        return batch_sweep(spec, a0, keyp, runs);
    unsigned walk_bits = 1;
    while ((1ull << walk_bits) < 2 * n08)
        walk_bits++;
    floe_perm_init(&walk, walk_bits, 777, 0);

    uint64_t *d_keys;
    uint8_t *d_res;
    unsigned long long *d_cnt;
    const uint64_t nkeys = std::max(2 * n09, 2 * n08);
    CHECK(cudaMalloc(&d_keys, nkeys * 8));
    CHECK(cudaMalloc(&d_res, nkeys));
    CHECK(cudaMalloc(&d_cnt, 5 * sizeof *d_cnt));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));

    const char *rows[] = {"put, fill 0 -> 0.5",         "put, fill 0.5 -> 0.8",
                          "put, fill 0.8 -> 0.9",       "find, all hits, fill 0.9",
                          "find, all misses, fill 0.9", "find-or-put, every key twice, fill 0 -> 0.8"};
    const int nrows = 6;
    std::vector<std::vector<double>> gks(2 * nrows);
    floe_errinfo err;
    double bpk = 0;
    /* S1 (--static): build, hits, misses (M keys/s), and the static table's fill and bytes per key */
    std::vector<double> s1[3];
    double s1_fill = 0, s1_bpk = 0;
    floe_spec sspec = spec;
    sspec.kind = FLOE_KIND_STATIC;

    for (int pass = 0; pass < (no_dedup ? 2 : 1); pass++) {
        unsigned flags = pass ? GPU_NO_DEDUP : 0;
        for (unsigned run = 0; run < runs; run++) {
            gpu_iceberg *t;
            must(gpu_iceberg_create(&spec, a0, 0, &t, &err), err);
            k_keys<<<(unsigned)((2 * n09 + 255) / 256), 256>>>(keyp, 0, 2 * n09, d_keys);
            CHECK(cudaGetLastError());
            CHECK(cudaDeviceSynchronize());
            uint64_t bounds[4] = {0, n05, n08, n09};
            for (int r = 0; r < 3; r++) {
                CHECK(cudaEventRecord(e0));
                for (uint64_t at = bounds[r]; at < bounds[r + 1]; at += batch) {
                    uint64_t m = std::min(batch, bounds[r + 1] - at);
                    must(gpu_iceberg_put(t, d_keys + at, m, d_res + at, NULL, flags, 0, &err), err);
                }
                CHECK(cudaEventRecord(e1));
                CHECK(cudaEventSynchronize(e1));
                float ms;
                CHECK(cudaEventElapsedTime(&ms, e0, e1));
                gks[pass * nrows + r].push_back((double)(bounds[r + 1] - bounds[r]) / ms / 1e6);
            }
            unsigned long long c[5];
            counts(d_res, n09, d_cnt, c);
            if (c[FLOE_INSERTED] != n09) {
                fprintf(stderr, "floe-k1-gpu: %llu of %llu puts INSERTED (%llu FULL)\n", c[FLOE_INSERTED],
                        (unsigned long long)n09, c[FLOE_FULL]);
                return 1;
            }
            bpk = (double)gpu_iceberg_memory(t) / (double)n09;
            for (int r = 0; r < 2; r++) {
                CHECK(cudaEventRecord(e0));
                must(gpu_iceberg_find(t, d_keys + r * n09, n09, d_res, NULL, NULL, 0, &err), err);
                CHECK(cudaEventRecord(e1));
                CHECK(cudaEventSynchronize(e1));
                float ms;
                CHECK(cudaEventElapsedTime(&ms, e0, e1));
                gks[pass * nrows + 3 + r].push_back((double)n09 / ms / 1e6);
                counts(d_res, n09, d_cnt, c);
                if (c[r == 0 ? FLOE_PRESENT : FLOE_ABSENT] != n09) {
                    fprintf(stderr, "floe-k1-gpu: find-%s answered %llu PRESENT, %llu ABSENT of %llu\n",
                            r ? "miss" : "hit", c[FLOE_PRESENT], c[FLOE_ABSENT], (unsigned long long)n09);
                    return 1;
                }
            }
            if (statics && pass == 0 && s1_static(sspec, d_keys, n09, d_res, d_cnt, s1, &s1_fill, &s1_bpk) != 0)
                return 1;
            gpu_iceberg_destroy(t);
            must(gpu_iceberg_create(&spec, a0, 0, &t, &err), err);
            k_twice<<<(unsigned)((2 * n08 + 255) / 256), 256>>>(keyp, walk, n08, d_keys);
            CHECK(cudaGetLastError());
            CHECK(cudaDeviceSynchronize());
            CHECK(cudaEventRecord(e0));
            for (uint64_t at = 0; at < 2 * n08; at += batch) {
                uint64_t m = std::min(batch, 2 * n08 - at);
                must(gpu_iceberg_put(t, d_keys + at, m, d_res + at, NULL, flags, 0, &err), err);
            }
            CHECK(cudaEventRecord(e1));
            CHECK(cudaEventSynchronize(e1));
            float ms;
            CHECK(cudaEventElapsedTime(&ms, e0, e1));
            gks[pass * nrows + 5].push_back((double)(2 * n08) / ms / 1e6);
            counts(d_res, 2 * n08, d_cnt, c);
            if (c[FLOE_INSERTED] != n08 || c[FLOE_PRESENT] != n08) {
                fprintf(stderr, "floe-k1-gpu: find-or-put answered %llu INSERTED, %llu PRESENT; expected %llu each\n",
                        c[FLOE_INSERTED], c[FLOE_PRESENT], (unsigned long long)n08);
                return 1;
            }
            gpu_iceberg_destroy(t);
            fprintf(stderr, "%s run %u/%u done\n", pass ? "no-dedup" : "ordered", run + 1, runs);
        }
    }
    printf("| row | G keys/s (median) | min | max |%s\n|---|---|---|---|%s\n", no_dedup ? " no fix-up (median) |" : "",
           no_dedup ? "---|" : "");
    for (int r = 0; r < nrows; r++) {
        std::vector<double> &v = gks[r];
        std::sort(v.begin(), v.end());
        printf("| %s | %.2f | %.2f | %.2f |", rows[r], v[v.size() / 2], v.front(), v.back());
        if (no_dedup) {
            std::vector<double> &w = gks[nrows + r];
            std::sort(w.begin(), w.end());
            printf(" %.2f |", w[w.size() / 2]);
        }
        printf("\n");
    }
    printf("# memory at fill 0.9: %.3f bytes per key\n", bpk);
    if (statics) {
        for (auto &v : s1)
            std::sort(v.begin(), v.end());
        const double hit = gks[3][gks[3].size() / 2], miss = gks[4][gks[4].size() / 2];
        printf("\nS1, the same %llu keys in a static cuckoo table: fill %.4f, %.3f bytes per key\n"
               "| row | G keys/s (median) | min | max | / the K1 table's (median) |\n|---|---|---|---|---|\n",
               (unsigned long long)n09, s1_fill, s1_bpk);
        const char *srows[3] = {"static: build", "static: find, all hits", "static: find, all misses"};
        for (int r = 0; r < 3; r++) {
            const std::vector<double> &v = s1[r];
            printf("| %s | %.2f | %.2f | %.2f |", srows[r], v[v.size() / 2], v.front(), v.back());
            if (r == 0)
                printf(" - |\n");
            else
                printf(" %.2fx |\n", v[v.size() / 2] / (r == 1 ? hit : miss));
        }
    }
    return 0;
}
