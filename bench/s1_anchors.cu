/*
 * s1_anchors.cu - floe-s1-anchors: S1 (docs/PERFORMANCE.md) with its anchors
 * in the same run: the same unique random 40-bit keys built into floe's
 * static table (gpu/cuckoo_gpu.h), put into floe's iceberg SET
 * (gpu/iceberg_gpu.h), into cuCollections' static_set (its default: double
 * hashing with cooperative groups of 4, 8-byte slots, load 0.9) and into
 * the seed library's compact cuckoo table (Hegeman et al. 2024,
 * System-Verification-Lab/compact-parallel-hash-tables: 32-bit rows, 16 a
 * bucket, 3 hash functions, 2^a buckets; its Cuckoo takes rows of 32 bits
 * or more, not 16); then each finds every key (hits)
 * and as many others (misses).  G keys/s, medians of --runs runs, every
 * answer counted (floe's and cuCollections' must all be right; the seed
 * library's wrong ones are reported); fill and bytes a key of each.
 *
 * Built against the two libraries' headers, which are not part of floe:
 * bench/s1-anchors.sh fetches nothing; it takes their checkouts
 * (CUCO_DIR, CPHT_DIR) and builds this with nvcc.  cuCollections' October
 * 2024 headers use thrust::identity, which CCCL 3 dropped: the shim below
 * gives it back where it is missing.
 */
#include <algorithm>
#include <cuda_runtime.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <thrust/count.h>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <vector>

#if !defined(THRUST_IDENTITY_SHIM_DONE) && CCCL_MAJOR_VERSION >= 3
namespace thrust
{
template <typename T = void> struct identity {
    __host__ __device__ constexpr const T &operator()(const T &x) const
    {
        return x;
    }
};
template <> struct identity<void> {
    template <typename U> __host__ __device__ constexpr U &&operator()(U &&x) const noexcept
    {
        return static_cast<U &&>(x);
    }
};
} // namespace thrust
#endif

#include <cuco/static_set.cuh>

#include "cuckoo.cuh" /* the seed library's */

#include "cuckoo_gpu.h"
#include "gpu_args.h"
#include "iceberg_gpu.h"
#include "layout.h"

static const unsigned KEY_BITS = 40;

/* keys[i] = perm(start + i): distinct for distinct inputs. */
__global__ void k_keys(const __grid_constant__ floe_perm p, uint64_t start, uint64_t n, uint64_t *keys)
{
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i < n)
        keys[i] = floe_permute(&p, start + i);
}

static void must(floe_status st, const floe_errinfo &err)
{
    gpu_args_must("floe-s1-anchors", st, &err);
}

struct timer {
    cudaEvent_t a, b;
    timer()
    {
        CHECK(cudaEventCreate(&a));
        CHECK(cudaEventCreate(&b));
    }
    void start()
    {
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaEventRecord(a));
    }
    /* G keys/s for n keys since start */
    double rate(uint64_t n)
    {
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        return (double)n / ms / 1e6;
    }
};

/* One table's rows of a run: build, hits, misses (G keys/s). */
struct figures {
    std::vector<double> r[3];
    double fill = 0, bpk = 0;
    const char *name;
};

template <typename T> static uint64_t count_eq(const T *d, uint64_t n, T v)
{
    return (uint64_t)thrust::count(thrust::device, d, d + n, v);
}

static void fail(const char *what, uint64_t got, uint64_t n)
{
    fprintf(stderr, "floe-s1-anchors: %s: %llu of %llu answers right\n", what, (unsigned long long)got,
            (unsigned long long)n);
    exit(1);
}

int main(int argc, char **argv)
{
    uint64_t n = (uint64_t)(0.95 * (double)(1ull << 30));
    unsigned runs = 3;
    static const struct option longopts[] = {
        {"keys", required_argument, NULL, 'k'},
        {"runs", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        uint64_t v;
        switch (ch) {
        case 'k':
            if (!gpu_args_number("floe-s1-anchors", "keys", optarg, 1024, 1ull << 33, &v))
                return 2;
            n = v;
            break;
        case 'r':
            if (!gpu_args_number("floe-s1-anchors", "runs", optarg, 1, 100, &v))
                return 2;
            runs = (unsigned)v;
            break;
        case 'h':
            printf("usage: floe-s1-anchors [--keys N] [--runs R]\n"
                   "S1 with its anchors in the same run: N unique random %u-bit keys (default 0.95 x 2^30, the\n"
                   "seed library's cuckoo table of 2^26 buckets of 16 at fill 0.95) into floe's static table,\n"
                   "floe's iceberg SET (the K1 geometry: 2^30 primary slots), cuCollections' static_set (load\n"
                   "0.9) and the seed library's compact cuckoo table; then finds of every key and of N others.\n"
                   "G keys/s (median of R runs, default 3), fill and bytes a key.\n",
                   KEY_BITS);
            return 0;
        default:
            fprintf(stderr, "Try 'floe-s1-anchors --help'.\n");
            return 2;
        }
    }
    char name[256];
    if (!gpu_available(0, name, sizeof name)) {
        fprintf(stderr, "floe-s1-anchors: no CUDA device\n");
        return 2;
    }
    floe_perm keyp;
    floe_perm_init(&keyp, KEY_BITS, 12345, 0);
    uint64_t *d_keys;
    uint8_t *d_res;
    bool *d_found;
    CHECK(cudaMalloc(&d_keys, 2 * n * 8));
    CHECK(cudaMalloc(&d_res, n));
    CHECK(cudaMalloc(&d_found, n));
    k_keys<<<(unsigned)((2 * n + 255) / 256), 256>>>(keyp, 0, 2 * n, d_keys);
    CHECK(cudaGetLastError());
    const uint64_t *hits = d_keys, *misses = d_keys + n;
    floe_errinfo err;
    timer tm;

    figures fs[4];
    static char seed_note[256];
    fs[0].name = "floe static table (STATIC, frozen)";
    fs[1].name = "floe iceberg SET (K1 geometry)";
    fs[2].name = "cuCollections static_set<uint64_t> (double hashing, cg 4)";
    fs[3].name = "seed library Cuckoo<uint32_t, 16> (3 hash functions)";
    /* the seed's table: 2^a buckets of 16 rows, the fewest at fill <= 0.95 */
    unsigned seed_a = 1;
    while ((double)(16ull << seed_a) * 0.95 < (double)n)
        seed_a++;
    for (unsigned run = 0; run < runs; run++) {
        { /* floe's static table */
            floe_spec s;
            floe_spec_default(&s);
            strcpy(s.name, "s1");
            s.kind = FLOE_KIND_STATIC;
            s.key_bits = KEY_BITS;
            s.seed = 0x5EED;
            gpu_cuckoo *c;
            tm.start();
            must(gpu_cuckoo_build(&s, 1, hits, NULL, n, FLOE_CUCKOO_FILL, 0, &c, &err), err);
            fs[0].r[0].push_back(tm.rate(n));
            for (int k = 0; k < 2; k++) {
                tm.start();
                must(gpu_cuckoo_find(c, k ? misses : hits, n, d_res, NULL, NULL, 0, &err), err);
                fs[0].r[1 + k].push_back(tm.rate(n));
                const uint64_t right = count_eq<uint8_t>(d_res, n, k ? FLOE_ABSENT : FLOE_PRESENT);
                if (right != n)
                    fail("floe static find", right, n);
            }
            fs[0].fill = (double)n / (double)floe_cuckoo_slots(gpu_cuckoo_geometry(c));
            fs[0].bpk = (double)gpu_cuckoo_memory(c) / (double)n;
            gpu_cuckoo_destroy(c);
        }
        { /* floe's iceberg SET, K1's table: 2^30 primary slots */
            floe_spec s;
            floe_spec_default(&s);
            strcpy(s.name, "k1");
            s.key_bits = KEY_BITS;
            s.seed = 0x5EED;
            gpu_iceberg *t;
            must(gpu_iceberg_create(&s, 25, 0, &t, &err), err);
            const uint64_t batch = 1ull << 26;
            tm.start();
            for (uint64_t at = 0; at < n; at += batch)
                must(gpu_iceberg_put(t, hits + at, std::min(batch, n - at), d_res + at, NULL, 0, 0, &err), err);
            fs[1].r[0].push_back(tm.rate(n));
            uint64_t right = count_eq<uint8_t>(d_res, n, FLOE_INSERTED);
            if (right != n)
                fail("floe iceberg put", right, n);
            for (int k = 0; k < 2; k++) {
                tm.start();
                must(gpu_iceberg_find(t, k ? misses : hits, n, d_res, NULL, NULL, 0, &err), err);
                fs[1].r[1 + k].push_back(tm.rate(n));
                right = count_eq<uint8_t>(d_res, n, k ? FLOE_ABSENT : FLOE_PRESENT);
                if (right != n)
                    fail("floe iceberg find", right, n);
            }
            fs[1].fill = (double)n / (double)gpu_iceberg_slots(t);
            fs[1].bpk = (double)gpu_iceberg_memory(t) / (double)n;
            gpu_iceberg_destroy(t);
        }
        { /* cuCollections */
            const auto keys = reinterpret_cast<const uint64_t *>(hits);
            cuco::static_set<uint64_t> set{n, 0.9, cuco::empty_key<uint64_t>{~0ull}};
            tm.start();
            set.insert(keys, keys + n);
            fs[2].r[0].push_back(tm.rate(n));
            if (set.size() != n)
                fail("cuco insert (size)", set.size(), n);
            for (int k = 0; k < 2; k++) {
                const uint64_t *q = k ? misses : hits;
                tm.start();
                set.contains(q, q + n, d_found);
                fs[2].r[1 + k].push_back(tm.rate(n));
                const uint64_t right = count_eq<bool>(d_found, n, k == 0);
                if (right != n)
                    fail("cuco contains", right, n);
            }
            fs[2].fill = (double)n / (double)set.capacity();
            fs[2].bpk = (double)set.capacity() * 8.0 / (double)n;
        }
        { /* the seed library */
            using seed_table = Cuckoo<uint32_t, 16>;
            seed_table t(KEY_BITS, (uint8_t)seed_a);
            const auto keys = reinterpret_cast<const key_type *>(hits);
            Result *d_put;
            CHECK(cudaMalloc(&d_put, n * sizeof *d_put));
            tm.start();
            t.put(keys, keys + n, d_put, false);
            fs[3].r[0].push_back(tm.rate(n));
            const uint64_t put = count_eq<Result>(d_put, n, Result::PUT),
                           full = count_eq<Result>(d_put, n, Result::FULL);
            CHECK(cudaFree(d_put));
            uint64_t right[2];
            for (int k = 0; k < 2; k++) {
                const auto q = reinterpret_cast<const key_type *>(k ? misses : hits);
                tm.start();
                t.find(q, q + n, d_found, false);
                fs[3].r[1 + k].push_back(tm.rate(n));
                right[k] = count_eq<bool>(d_found, n, k == 0);
            }
            /* its answers are counted and reported, not required: the anchor is the library as it is */
            snprintf(seed_note, sizeof seed_note,
                     "seed library: put answered PUT for %llu and FULL for %llu of %llu keys; find found %llu of the "
                     "keys put (%.3f%% missed) and %llu of the others (false positives)",
                     (unsigned long long)put, (unsigned long long)full, (unsigned long long)n,
                     (unsigned long long)right[0], 100.0 * (double)(n - right[0]) / (double)n,
                     (unsigned long long)(n - right[1]));
            const double rows = (double)(16ull << seed_a);
            fs[3].fill = (double)n / rows;
            fs[3].bpk = rows * 4.0 / (double)n; /* its logical rows: it allocates 4 times as many (notes: fault 2) */
        }
        fprintf(stderr, "run %u/%u done\n", run + 1, runs);
    }
    printf("# floe-s1-anchors on %s: %llu unique random %u-bit keys, finds of all of them and of as many others, "
           "median of %u runs (G keys/s)\n",
           name, (unsigned long long)n, KEY_BITS, runs);
    printf("| table | build | find, all hits | find, all misses | fill | bytes a key |\n|---|---|---|---|---|---|\n");
    for (auto &f : fs) {
        double med[3];
        for (int k = 0; k < 3; k++) {
            std::sort(f.r[k].begin(), f.r[k].end());
            med[k] = f.r[k][f.r[k].size() / 2];
        }
        printf("| %s | %.2f | %.2f | %.2f | %.4f | %.3f |\n", f.name, med[0], med[1], med[2], f.fill, f.bpk);
    }
    printf("# %s\n", seed_note);
    CHECK(cudaFree(d_keys));
    CHECK(cudaFree(d_res));
    CHECK(cudaFree(d_found));
    return 0;
}
