/*
 * o1_gpu.cu - floe-o1-gpu: the O1 benchmark (docs/PERFORMANCE.md) on the GPU
 * ORDERED engine, next to a sorted array built in the same run (cub radix
 * sort, then binary searches: the strongest read-only competitor).
 *
 * --keys N unique random 64-bit keys with 8-byte values (generated on the
 * device) go into an empty table in batches of --batch keys; then finds of
 * every key (hits) and of N others (misses), successors of the N others,
 * and N / 32 ranges of --range-keys keys from random starts (keys returned
 * a second).  Every answer is checked against the sorted array.  Each row
 * is timed on the device (CUDA events; an insert batch waits for itself);
 * medians of --runs runs.
 */
#include <algorithm>
#include <cub/device/device_radix_sort.cuh>
#include <cuda_runtime.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "backend_gpu.h"
#include "gpu_args.h"
#include "layout.h"
#include "ordered_gpu.h"

static void must(floe_status st, const floe_errinfo &err)
{
    gpu_args_must("floe-o1-gpu", st, &err);
}

/* keys[i] = perm(start + i), values[i] = a mix of it: distinct keys for distinct inputs. */
__global__ void k_keys(const __grid_constant__ floe_perm p, uint64_t start, uint64_t n, uint64_t *keys,
                       uint64_t *values)
{
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i < n) {
        keys[i] = floe_permute(&p, start + i);
        if (values)
            values[i] = keys[i] * 0x9E3779B97F4A7C15ull + 1;
    }
}

/* The sorted array's answers: find (res, value), successor (res, key), a
 * range of `limit` keys from lo. */
__device__ static uint64_t lower_bound(const uint64_t *a, uint64_t n, uint64_t x)
{
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        if (a[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

__global__ void k_sa_find(const uint64_t *sk, const uint64_t *sv, uint64_t n, const uint64_t *q, uint64_t m,
                          uint8_t *res, uint64_t *val)
{
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= m)
        return;
    const uint64_t p = lower_bound(sk, n, q[i]);
    const bool hit = p < n && sk[p] == q[i];
    res[i] = hit ? FLOE_PRESENT : FLOE_ABSENT;
    val[i] = hit ? sv[p] : 0;
}

__global__ void k_sa_succ(const uint64_t *sk, uint64_t n, const uint64_t *q, uint64_t m, uint8_t *res, uint64_t *found)
{
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= m)
        return;
    const uint64_t p = lower_bound(sk, n, q[i]);
    res[i] = p < n ? FLOE_PRESENT : FLOE_ABSENT;
    found[i] = p < n ? sk[p] : 0;
}

/* A warp per range: the first `limit` keys from lo. */
__global__ void k_sa_ranges(const uint64_t *sk, const uint64_t *sv, uint64_t n, const uint64_t *lo, uint64_t m,
                            uint32_t limit, uint64_t *out, uint64_t *vout, uint32_t *counts)
{
    const uint64_t w = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32;
    const uint32_t lane = threadIdx.x & 31;
    if (w >= m)
        return;
    uint64_t p = 0;
    if (lane == 0)
        p = lower_bound(sk, n, lo[w]);
    p = __shfl_sync(0xFFFFFFFFu, p, 0);
    const uint64_t got = n - p < limit ? n - p : limit;
    for (uint32_t j = lane; j < got; j += 32) {
        out[w * limit + j] = sk[p + j];
        vout[w * limit + j] = sv[p + j];
    }
    if (lane == 0)
        counts[w] = (uint32_t)got;
}

/* Answers that differ from the reference's (results, and 8-byte words where both answered PRESENT). */
__global__ void k_diff(const uint8_t *ra, const uint8_t *rb, const uint64_t *wa, const uint64_t *wb, uint64_t n,
                       unsigned long long *bad)
{
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i < n && (ra[i] != rb[i] || (ra[i] == FLOE_PRESENT && wa[i] != wb[i])))
        atomicAdd(bad, 1ull);
}

__global__ void k_diff_ranges(const uint32_t *ca, const uint32_t *cb, const uint64_t *a, const uint64_t *b,
                              const uint64_t *va, const uint64_t *vb, uint64_t m, uint32_t limit,
                              unsigned long long *bad, unsigned long long *returned)
{
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= m)
        return;
    bool ok = ca[i] == cb[i];
    for (uint32_t j = 0; ok && j < ca[i]; j++)
        ok = a[i * limit + j] == b[i * limit + j] && va[i * limit + j] == vb[i * limit + j];
    if (!ok)
        atomicAdd(bad, 1ull);
    atomicAdd(returned, (unsigned long long)ca[i]);
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

static void usage(FILE *f)
{
    fprintf(f, "usage: floe-o1-gpu [--keys N] [--batch N] [--range-keys N] [--runs N]\n"
               "\n"
               "O1 (docs/PERFORMANCE.md) on the GPU ORDERED engine beside a sorted array built in the same run\n"
               "(cub radix sort + binary search).  Every answer is checked against the sorted array.\n"
               "\n"
               "      --keys N        unique random 64-bit keys with 8-byte values (default 2^27 = 128M)\n"
               "      --batch N       keys per insert batch (default 4M)\n"
               "      --range-keys N  keys per range (default 32); keys/32 ranges from random starts\n"
               "      --runs N        runs; rows are medians (default 3)\n"
               "      --grow          the table starts with the smallest pool and grows (default: a pool\n"
               "                      sized for the keys, gpu_ordered_chunks_for)\n"
               "  -h, --help          this text\n"
               "\n"
               "Exit status: 0 every answer right, 1 a wrong answer or a failure, 2 a usage error.\n");
}

int main(int argc, char **argv)
{
    floe_gpu_load_kernels_at_start(); /* as floed runs the engines (backend_gpu.h) */
    uint64_t keys = 1ull << 27, batch = 4ull << 20, range_keys = 32, runs = 3, grow = 0;
    static const struct option opts[] = {{"keys", required_argument, NULL, 'k'},
                                         {"batch", required_argument, NULL, 'b'},
                                         {"range-keys", required_argument, NULL, 'r'},
                                         {"runs", required_argument, NULL, 'n'},
                                         {"grow", no_argument, NULL, 'g'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        const char *p = "floe-o1-gpu";
        if ((ch == 'k' && !gpu_args_number(p, "keys", optarg, 64, 1ull << 31, &keys)) ||
            (ch == 'b' && !gpu_args_number(p, "batch", optarg, 1, 1ull << 30, &batch)) ||
            (ch == 'r' && !gpu_args_number(p, "range-keys", optarg, 1, 4096, &range_keys)) ||
            (ch == 'n' && !gpu_args_number(p, "runs", optarg, 1, 100, &runs)))
            return 2;
        if (ch == 'g')
            grow = 1;
        if (ch == 'h') {
            usage(stdout);
            return 0;
        }
        if (ch == '?') {
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "floe-o1-gpu: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    const uint64_t n = keys, nr = keys / 32, L = range_keys;
    printf("floe-o1-gpu on %s: %llu keys in batches of %llu into an empty table (%s), %llu ranges of %llu keys, "
           "%llu runs\n",
           prop.name, (unsigned long long)n, (unsigned long long)batch,
           grow ? "the smallest pool, growing" : "a pool sized for them", (unsigned long long)nr, (unsigned long long)L,
           (unsigned long long)runs);
    uint64_t *d_k, *d_v, *d_miss, *d_sk, *d_sv, *d_w1, *d_w2, *d_rk1, *d_rk2, *d_rv1, *d_rv2;
    uint8_t *d_r1, *d_r2, *d_tmp = NULL;
    uint32_t *d_c1, *d_c2;
    unsigned long long *d_bad;
    CHECK(cudaMalloc(&d_k, n * 8));
    CHECK(cudaMalloc(&d_v, n * 8));
    CHECK(cudaMalloc(&d_miss, n * 8));
    CHECK(cudaMalloc(&d_sk, n * 8));
    CHECK(cudaMalloc(&d_sv, n * 8));
    CHECK(cudaMalloc(&d_w1, n * 8));
    CHECK(cudaMalloc(&d_w2, n * 8));
    CHECK(cudaMalloc(&d_r1, n));
    CHECK(cudaMalloc(&d_r2, n));
    CHECK(cudaMalloc(&d_rk1, nr * L * 8));
    CHECK(cudaMalloc(&d_rk2, nr * L * 8));
    CHECK(cudaMalloc(&d_rv1, nr * L * 8));
    CHECK(cudaMalloc(&d_rv2, nr * L * 8));
    CHECK(cudaMalloc(&d_c1, nr * 4));
    CHECK(cudaMalloc(&d_c2, nr * 4));
    CHECK(cudaMalloc(&d_bad, 2 * sizeof *d_bad));
    size_t sort_bytes = 0;
    CHECK(cub::DeviceRadixSort::SortPairs(NULL, sort_bytes, d_k, d_sk, d_v, d_sv, n));
    CHECK(cudaMalloc(&d_tmp, sort_bytes));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    enum { INSERT, HIT, MISS, SUCC, RANGE, SA_BUILD, SA_HIT, SA_MISS, SA_SUCC, SA_RANGE, ROWS };
    static const char *const names[ROWS] = {"insert (batches into an empty table)",
                                            "find, all hits",
                                            "find, all misses",
                                            "successor of random keys",
                                            "ranges (keys returned)",
                                            "sorted array: build (radix sort)",
                                            "sorted array: find, all hits",
                                            "sorted array: find, all misses",
                                            "sorted array: successor",
                                            "sorted array: ranges (keys returned)"};
    std::vector<double> rate[ROWS];
    std::vector<double> bpk, bpk_used, height;
    unsigned long long wrong = 0;
    const uint32_t B = 256;
    const unsigned grid = (unsigned)((n + B - 1) / B), rgrid = (unsigned)((nr * 32 + B - 1) / B);
    for (uint64_t run = 0; run < runs; run++) {
        floe_perm p; /* a bijection of the 64-bit keys: N inserted, N others never */
        floe_perm_init(&p, 64, 0x0DE4ED5EEDull + run * 7919, 0);
        k_keys<<<grid, B>>>(p, 0, n, d_k, d_v);
        k_keys<<<grid, B>>>(p, n, n, d_miss, NULL); /* others: never inserted */
        CHECK(cudaDeviceSynchronize());
        float ms;
        auto timed = [&](int row, uint64_t items, auto &&body) {
            CHECK(cudaEventRecord(e0));
            body();
            CHECK(cudaEventRecord(e1));
            CHECK(cudaEventSynchronize(e1));
            CHECK(cudaGetLastError());
            CHECK(cudaEventElapsedTime(&ms, e0, e1));
            rate[row].push_back((double)items / (ms * 1e-3) / 1e9);
        };
        /* the sorted array */
        timed(SA_BUILD, n, [&] { CHECK(cub::DeviceRadixSort::SortPairs(d_tmp, sort_bytes, d_k, d_sk, d_v, d_sv, n)); });
        /* the ORDERED table */
        floe_spec spec;
        floe_spec_default(&spec);
        strcpy(spec.name, "o1");
        spec.kind = FLOE_KIND_ORDERED;
        spec.key_bits = 64;
        spec.value_bytes = 8;
        spec.seed = 1;
        gpu_ordered *t;
        floe_errinfo err;
        must(gpu_ordered_create(&spec, grow ? 0 : gpu_ordered_chunks_for(n), &t, &err), err);
        timed(INSERT, n, [&] {
            for (uint64_t at = 0; at < n; at += batch) {
                const uint64_t m = n - at < batch ? n - at : batch;
                floe_answer_counts c;
                must(gpu_ordered_insert(t, d_k + at, d_v + at, m, false, d_r1, NULL, &c, 0, &err), err);
                if (c.inserted != m) {
                    fprintf(stderr, "floe-o1-gpu: a batch of %llu new keys answered %llu INSERTED\n",
                            (unsigned long long)m, (unsigned long long)c.inserted);
                    exit(1);
                }
            }
        });
        floe_table_stats st;
        gpu_ordered_stats(t, &st);
        bpk.push_back(st.bytes_per_key);
        bpk_used.push_back((double)(st.slots / OC_DATA) * OC_LANES * 16 / (double)n);
        height.push_back(gpu_ordered_height(t));
        /* finds, successors, ranges, each against the sorted array */
        const uint64_t *queries[2] = {d_k, d_miss};
        for (int miss = 0; miss < 2; miss++) {
            timed(miss ? MISS : HIT, n, [&] { must(gpu_ordered_find(t, queries[miss], n, d_r1, d_w1, 0, &err), err); });
            timed(miss ? SA_MISS : SA_HIT, n,
                  [&] { k_sa_find<<<grid, B>>>(d_sk, d_sv, n, queries[miss], n, d_r2, d_w2); });
            CHECK(cudaMemset(d_bad, 0, sizeof *d_bad));
            k_diff<<<grid, B>>>(d_r1, d_r2, d_w1, d_w2, n, d_bad);
            unsigned long long bad;
            CHECK(cudaMemcpy(&bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost));
            wrong += bad;
        }
        timed(SUCC, n, [&] { must(gpu_ordered_neighbours(t, false, d_miss, n, d_r1, d_w1, NULL, 0, &err), err); });
        timed(SA_SUCC, n, [&] { k_sa_succ<<<grid, B>>>(d_sk, n, d_miss, n, d_r2, d_w2); });
        CHECK(cudaMemset(d_bad, 0, sizeof *d_bad));
        k_diff<<<grid, B>>>(d_r1, d_r2, d_w1, d_w2, n, d_bad);
        /* ranges: from the first nr misses, up to the largest key */
        uint64_t *d_hi = d_w2; /* every range ends at 2^64 - 1 */
        CHECK(cudaMemset(d_hi, 0xFF, nr * 8));
        unsigned long long counts[2] = {0, 0};
        timed(RANGE, 0,
              [&] { must(gpu_ordered_ranges(t, d_miss, d_hi, nr, (uint32_t)L, d_rk1, d_rv1, d_c1, 0, &err), err); });
        const double range_ms = ms;
        timed(SA_RANGE, 0,
              [&] { k_sa_ranges<<<rgrid, B>>>(d_sk, d_sv, n, d_miss, nr, (uint32_t)L, d_rk2, d_rv2, d_c2); });
        const double sa_range_ms = ms;
        CHECK(cudaMemset(d_bad + 1, 0, sizeof *d_bad));
        k_diff_ranges<<<(unsigned)((nr + B - 1) / B), B>>>(d_c1, d_c2, d_rk1, d_rk2, d_rv1, d_rv2, nr, (uint32_t)L,
                                                           d_bad, d_bad + 1);
        CHECK(cudaMemcpy(counts, d_bad, sizeof counts, cudaMemcpyDeviceToHost));
        wrong += counts[0];
        rate[RANGE].back() = (double)counts[1] / (range_ms * 1e-3) / 1e9;
        rate[SA_RANGE].back() = (double)counts[1] / (sa_range_ms * 1e-3) / 1e9;
        printf("run %llu: insert %.3f, hit %.3f, miss %.3f, successor %.3f, ranges %.3f G/s; sorted array: build "
               "%.3f, hit %.3f, miss %.3f, successor %.3f, ranges %.3f G/s; %.2f bytes/key (%.2f in chunks used), "
               "%u levels; %llu keys returned by ranges\n",
               (unsigned long long)run, rate[INSERT].back(), rate[HIT].back(), rate[MISS].back(), rate[SUCC].back(),
               rate[RANGE].back(), rate[SA_BUILD].back(), rate[SA_HIT].back(), rate[SA_MISS].back(),
               rate[SA_SUCC].back(), rate[SA_RANGE].back(), bpk.back(), bpk_used.back(), gpu_ordered_height(t),
               counts[1]);
        fflush(stdout);
        gpu_ordered_destroy(t);
    }
    printf("\n%-40s %10s\n", "O1 row (median)", "G/s");
    for (int r = 0; r < ROWS; r++)
        printf("%-40s %10.3f\n", names[r], median(rate[r]));
    printf("%-40s %10.2f (%.2f in chunks in use; a sorted array: 16.00)\n", "bytes per key (pool)", median(bpk),
           median(bpk_used));
    printf("%-40s %10.0f\n", "levels", median(height));
    printf("check: %s (%llu wrong answers)\n", wrong ? "FAILED" : "every answer as the sorted array's", wrong);
    return wrong ? 1 : 0;
}
