/*
 * t1_gpu.cu - floe-t1-gpu: the T1 tree benchmark (docs/PERFORMANCE.md) on the GPU
 * TREE engine.  Vectors of --words words (16) from a random walk over a
 * model: --walkers independent walkers start from the all-zero state, and
 * each step changes one or two words (uniform positions) to a value below
 * --domain (the model's local state space per word).  Every vector occurs
 * twice: a batch holds --batch walk vectors and then the same vectors again
 * in a scattered order.  Vectors are generated on the device and not timed;
 * each gpu_tree_insert of a batch is timed with CUDA events (dedup, fold,
 * root table, answers, and the one count read back).  Reports G vectors/s
 * over all vectors sent (both occurrences), INSERTED = distinct vectors,
 * and the table's bytes per stored vector, and the slowest batch against
 * the median batch (a growth's stall); medians of --runs runs, each on a
 * fresh table.  The table grows, as a TREE does by default: it starts
 * at --capacity vectors (default --vectors: a node slot for 8 of them) and
 * grows itself inside gpu_tree_insert (as in floed), so the growths are
 * timed with the batches; the bytes allocated and used are printed as the
 * table grows (every batch with --per-batch, which also prints each
 * batch's time: a growth shows in the batch that meets it).  --no-grow
 * sizes a fixed table for --vectors.  With --by-parent every batch is one
 * step of every walker (--walkers = --batch), and its vectors go in as
 * their parents' ids (the last batch's answers) and the one or two words
 * the step changed, folded on the device by their paths from the parents'
 * nodes (gpu_tree_insert_delta, as floed does), all timed; untimed, the
 * answers' ids must give the walk's vectors back.
 */
#include <algorithm>
#include <cuda_runtime.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "backend_gpu.h"
#include "gpu_args.h"
#include "tree.h"
#include "tree_gpu.h"

static void must(floe_status st, const floe_errinfo &err)
{
    gpu_args_must("floe-t1-gpu", st, &err);
}

__device__ __forceinline__ uint64_t xs(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* Each walker takes `steps` steps; step k of walker w is vector k * walkers + w. */
__global__ void k_walk(uint32_t *state, uint64_t *rng, uint32_t W, uint32_t walkers, uint32_t steps, uint32_t domain,
                       uint32_t *out)
{
    uint32_t w = blockIdx.x * blockDim.x + threadIdx.x;
    if (w >= walkers)
        return;
    uint32_t *v = state + (uint64_t)w * W;
    uint64_t r = rng[w];
    for (uint32_t k = 0; k < steps; k++) {
        uint64_t x = xs(&r);
        int changes = 1 + (int)(x & 1);
        for (int c = 0; c < changes; c++) {
            uint64_t y = xs(&r);
            v[(y >> 8) % W] = (uint32_t)((y >> 40) % domain);
        }
        uint32_t *o = out + ((uint64_t)k * walkers + w) * W;
        for (uint32_t i = 0; i < W; i++)
            o[i] = v[i];
    }
    rng[w] = r;
}

/* A by-parent step: walker i's vector against its state before the step, as
 * two changes (the second repeats the first where one word changed). */
__global__ void k_changes(const uint32_t *before, const uint32_t *after, uint32_t W, uint64_t n, uint8_t *changes)
{
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    uint32_t word[2] = {0, 0}, k = 0;
    for (uint32_t w = 0; w < W && k < 2; w++)
        if (before[i * W + w] != after[i * W + w])
            word[k++] = w;
    if (k < 2)
        word[1] = word[0];
    for (int c = 0; c < 2; c++)
        floe_change_put(changes + (i * 2 + c) * FLOE_CHANGE_BYTES, word[c], after[i * W + word[c]]);
}

/* The second occurrences of a by-parent batch: the parent and changes of the first ones (k_again's order). */
__global__ void k_again_states(uint64_t *parents, uint8_t *changes, uint64_t b)
{
    uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (j >= b)
        return;
    uint64_t from = (j * 0x9E3779B97F4A7C15ull) & (b - 1);
    parents[b + j] = parents[from];
    for (int c = 0; c < 2 * FLOE_CHANGE_BYTES; c++)
        changes[(b + j) * 2 * FLOE_CHANGE_BYTES + c] = changes[from * 2 * FLOE_CHANGE_BYTES + c];
}

__global__ void k_first(uint32_t *first, uint64_t n)
{
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i <= n)
        first[i] = (uint32_t)(2 * i);
}

__global__ void k_differ(const uint32_t *a, const uint32_t *b, uint64_t words, unsigned long long *out)
{
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i < words && a[i] != b[i])
        atomicAdd(out, 1ull);
}

/* The second occurrences: vector b + j is vector (j * odd) mod b (b a power of two). */
__global__ void k_again(uint32_t *vecs, uint32_t W, uint64_t b)
{
    uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (j >= b)
        return;
    uint64_t from = (j * 0x9E3779B97F4A7C15ull) & (b - 1);
    for (uint32_t i = 0; i < W; i++)
        vecs[(b + j) * W + i] = vecs[from * W + i];
}

__global__ void k_count(const uint8_t *r, uint64_t n, unsigned long long *c)
{
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i < n && r[i] < 5)
        atomicAdd(&c[r[i]], 1ull);
}

static void usage_line(FILE *f)
{
    fprintf(f,
            "usage: floe-t1-gpu [--words W] [--vectors N] [--batch B] [--walkers K] [--domain D]\n"
            "                   [--capacity N | --no-grow [--memory SIZE]] [--by-parent] [--per-batch] [--runs R]\n");
}

static void help(void)
{
    usage_line(stdout);
    printf("The T1 tree benchmark (docs/PERFORMANCE.md) on the GPU TREE engine: vectors from random walks,\n"
           "each sent twice, inserted batch by batch into a fresh table per run; prints G vectors/s,\n"
           "INSERTED/PRESENT/FULL, bytes per stored vector and the slowest batch against the median\n"
           "batch (a growth's stall) per run, then their medians.\n"
           "\n"
           "Options:\n"
           "      --words W       words per vector, 2..256 (default 16)\n"
           "      --vectors N     walk vectors per run, each sent twice; a multiple of --batch (default 32M)\n"
           "      --batch B       walk vectors per batch (each batch then repeats them in a scattered order);\n"
           "                      a power of two and a multiple of --walkers (default 2M)\n"
           "      --walkers K     independent walkers, each from the all-zero vector (default 65536)\n"
           "      --domain D      values per word: each step sets one or two words to a value below D\n"
           "                      (default 4)\n"
           "      --capacity N    the vectors the table starts sized for; it grows as a TREE does by\n"
           "                      default (default: --vectors, a node slot for 8 of them)\n"
           "      --no-grow       a table that does not grow, sized for --vectors (two node slots each)\n"
           "      --memory SIZE   with --no-grow: the table's memory budget in bytes (default 0: sized\n"
           "                      from --vectors)\n"
           "      --grow          the default: a table that grows\n"
           "      --by-parent     each batch one step of every walker (--walkers = --batch), sent as the\n"
           "                      parents' ids and the changed words, folded on the device by the\n"
           "                      changed words' paths from the parents' nodes\n"
           "      --per-batch     print each batch's time and the table's growths so far (where a\n"
           "                      growth's time goes), and a growing table's bytes after every batch\n"
           "                      (not only at every doubling of the vectors sent)\n"
           "      --runs R        runs, each on a fresh table; medians reported (default 3)\n"
           "  -h, --help          this text\n"
           "\n"
           "Numbers are decimal, with K, M, G suffixes (powers of 1024).\n"
           "Exit status: 0 done, 1 a CUDA error or answers that do not add up, 2 a usage error.\n");
}

[[noreturn]] static void usage_error(void)
{
    usage_line(stderr);
    fprintf(stderr, "Try 'floe-t1-gpu --help'.\n");
    exit(2);
}

/* The value of option --opt in lo..hi, or a usage error. */
static uint64_t number(const char *opt, const char *arg, uint64_t lo, uint64_t hi)
{
    uint64_t v;
    if (!gpu_args_number("floe-t1-gpu", opt, arg, lo, hi, &v))
        usage_error();
    return v;
}

int main(int argc, char **argv)
{
    floe_gpu_load_kernels_at_start(); /* as floed runs the engines (backend_gpu.h) */
    uint32_t W = 16, walkers = 1u << 16, domain = 4, runs = 3;
    uint64_t batch = 1ull << 21, vectors = 1ull << 25, memory = 0, capacity = 0;
    bool grow = true, capacity_set = false, by_parent = false, per_batch = false;
    static const struct option longopts[] = {
        {"words", required_argument, NULL, 'w'},
        {"walkers", required_argument, NULL, 'k'},
        {"domain", required_argument, NULL, 'd'},
        {"runs", required_argument, NULL, 'r'},
        {"batch", required_argument, NULL, 'b'},
        {"vectors", required_argument, NULL, 'n'},
        {"memory", required_argument, NULL, 'm'},
        {"grow", no_argument, NULL, 'g'},
        {"no-grow", no_argument, NULL, 'G'},
        {"capacity", required_argument, NULL, 'c'},
        {"by-parent", no_argument, NULL, 'p'},
        {"per-batch", no_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    /* arguments first: nothing here touches CUDA, so --help and usage errors work without a device */
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'w':
            W = (uint32_t)number("words", optarg, 2, 256);
            break;
        case 'k':
            walkers = (uint32_t)number("walkers", optarg, 1, UINT32_MAX);
            break;
        case 'd':
            domain = (uint32_t)number("domain", optarg, 1, UINT32_MAX);
            break;
        case 'r':
            runs = (uint32_t)number("runs", optarg, 1, UINT32_MAX);
            break;
        case 'b':
            batch = number("batch", optarg, 1, UINT64_MAX);
            break;
        case 'n':
            vectors = number("vectors", optarg, 1, UINT64_MAX);
            break;
        case 'm':
            memory = number("memory", optarg, 0, UINT64_MAX);
            break;
        case 'g':
        case 'G':
            grow = ch == 'g';
            break;
        case 'c':
            capacity = number("capacity", optarg, 1, FLOE_MAX_CAPACITY);
            capacity_set = true;
            break;
        case 'p':
            by_parent = true;
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
        fprintf(stderr, "floe-t1-gpu: unexpected argument '%s'\n", argv[optind]);
        usage_error();
    }
    /* each batch is batch / walkers steps of every walker, and a run is whole batches */
    const char *why = by_parent && walkers != batch
                          ? "--by-parent takes a step of every walker a batch: --walkers = --batch"
                      : grow && memory               ? "--memory is for --no-grow (a growing table sizes itself)"
                      : capacity_set && !grow        ? "--capacity is for a growing table (--no-grow holds --vectors)"
                      : (batch & (batch - 1))        ? "--batch must be a power of two"
                      : batch % walkers              ? "--batch must be a multiple of --walkers"
                      : vectors % batch              ? "--vectors must be a multiple of --batch"
                      : batch / walkers > UINT32_MAX ? "--batch / --walkers must be below 2^32"
                                                     : NULL;
    if (why) {
        fprintf(stderr, "floe-t1-gpu: %s (--vectors %llu, --batch %llu, --walkers %u)\n", why,
                (unsigned long long)vectors, (unsigned long long)batch, walkers);
        usage_error();
    }
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("T1 on %s: %u-word vectors, %u walkers, domain %u, %llu walk vectors each sent twice, batches of %llu "
           "(+ %llu repeats), median of %u runs\n",
           prop.name, W, walkers, domain, (unsigned long long)vectors, (unsigned long long)batch,
           (unsigned long long)batch, runs);
    uint32_t *d_vec, *d_state;
    uint64_t *d_rng, *d_ids;
    uint8_t *d_res;
    unsigned long long *d_c;
    CHECK(cudaMalloc(&d_vec, 2 * batch * W * 4));
    CHECK(cudaMalloc(&d_res, 2 * batch));
    CHECK(cudaMalloc(&d_ids, 2 * batch * 8));
    CHECK(cudaMalloc(&d_state, (uint64_t)walkers * W * 4));
    CHECK(cudaMalloc(&d_rng, (uint64_t)walkers * 8));
    CHECK(cudaMalloc(&d_c, 6 * sizeof *d_c)); /* the answers' counts, and (by parent) vector words that differ */
    uint32_t *d_before = NULL, *d_vec2 = NULL, *d_first = NULL;
    uint8_t *d_res2 = NULL;
    uint64_t *d_par = NULL;
    uint8_t *d_ch = NULL;
    if (by_parent) {
        CHECK(cudaMalloc(&d_before, (uint64_t)walkers * W * 4));
        CHECK(cudaMalloc(&d_vec2, 2 * batch * W * 4));
        CHECK(cudaMalloc(&d_res2, 2 * batch));
        CHECK(cudaMalloc(&d_par, 2 * batch * 8));
        CHECK(cudaMalloc(&d_ch, 2 * batch * 2 * FLOE_CHANGE_BYTES));
        CHECK(cudaMalloc(&d_first, (2 * batch + 1) * 4));
        k_first<<<(unsigned)((2 * batch + 256) / 256), 256>>>(d_first, 2 * batch);
    }
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    std::vector<double> rate, bpv, bpv_used, comp, stall; /* stall: a run's slowest batch / its median batch */
    unsigned long long c[6];
    floe_table_stats st;
    for (uint32_t run = 0; run < runs; run++) {
        floe_spec spec;
        floe_spec_default(&spec);
        strcpy(spec.name, "t1");
        spec.kind = FLOE_KIND_TREE;
        spec.key_bits = 0;
        spec.words = W;
        spec.capacity = grow && capacity_set ? capacity : vectors;
        spec.memory = memory;
        spec.grow = grow;
        spec.seed = 0x7165 + run;
        floe_errinfo err;
        gpu_tree *t;
        must(gpu_tree_create(&spec, NULL, &t, &err), err);
        CHECK(cudaMemset(d_state, 0, (uint64_t)walkers * W * 4));
        std::vector<uint64_t> seeds(walkers);
        for (uint32_t w = 0; w < walkers; w++)
            seeds[w] = 0x9E3779B97F4A7C15ull * (w + 1 + 1000003ull * run) | 1;
        CHECK(cudaMemcpy(d_rng, seeds.data(), walkers * 8, cudaMemcpyHostToDevice));
        CHECK(cudaMemset(d_c, 0, 6 * sizeof *d_c));
        unsigned long long extra = 0; /* by parent: the first parent, the all-zero vector, put before the batches */
        if (by_parent) {
            std::vector<uint32_t> zero(W, 0);
            uint8_t r;
            uint64_t zid;
            must(gpu_tree_insert_host(t, zero.data(), 1, &r, &zid, &err), err);
            extra = r == FLOE_INSERTED;
            std::vector<uint64_t> ids(batch, zid);
            CHECK(cudaMemcpy(d_ids, ids.data(), batch * 8, cudaMemcpyHostToDevice));
        }
        double ms_total = 0;
        std::vector<double> batch_ms;
        for (uint64_t done = 0, b = 1; done < vectors; done += batch, b++) {
            if (by_parent) /* each walker's state before the step: its vector's parent */
                CHECK(cudaMemcpyAsync(d_before, d_state, (uint64_t)walkers * W * 4, cudaMemcpyDeviceToDevice, s));
            k_walk<<<(walkers + 255) / 256, 256, 0, s>>>(d_state, d_rng, W, walkers, (uint32_t)(batch / walkers),
                                                         domain, d_vec);
            k_again<<<(unsigned)((batch + 255) / 256), 256, 0, s>>>(d_vec, W, batch);
            if (by_parent) { /* parents: the last batch's ids of the walkers' vectors (d_ids holds them) */
                k_changes<<<(unsigned)((batch + 255) / 256), 256, 0, s>>>(d_before, d_vec, W, batch, d_ch);
                CHECK(cudaMemcpyAsync(d_par, d_ids, batch * 8, cudaMemcpyDeviceToDevice, s));
                k_again_states<<<(unsigned)((batch + 255) / 256), 256, 0, s>>>(d_par, d_ch, batch);
            }
            CHECK(cudaEventRecord(e0, s));
            if (by_parent) {
                must(gpu_tree_insert_delta(t, d_par, d_first, d_ch, 2 * batch, d_res, d_ids, s, &err), err);
            } else {
                must(gpu_tree_insert(t, d_vec, 2 * batch, d_res, d_ids, s, &err), err);
            }
            CHECK(cudaEventRecord(e1, s));
            if (by_parent) { /* not timed: the answers' ids name the walk's vectors, every word */
                must(gpu_tree_get(t, d_ids, 0, 2 * batch, d_res2, d_vec2, s, &err), err);
                k_differ<<<(unsigned)((2 * batch * W + 255) / 256), 256, 0, s>>>(d_vec2, d_vec, 2 * batch * W, d_c + 5);
            }
            CHECK(cudaEventSynchronize(e1));
            float ms;
            CHECK(cudaEventElapsedTime(&ms, e0, e1));
            ms_total += ms;
            batch_ms.push_back(ms);
            if (per_batch)
                printf("  run %u, batch %llu: %.3f ms, %llu growths\n", run, (unsigned long long)b, ms,
                       (unsigned long long)gpu_tree_generation(t));
            k_count<<<(unsigned)((2 * batch + 255) / 256), 256, 0, s>>>(d_res, 2 * batch, d_c);
            if (grow && (per_batch || (b & (b - 1)) == 0)) { /* allocated against used, at every doubling of the
                                                             * vectors sent (every batch with --per-batch) */
                must(gpu_tree_stats(t, &st, &err), err);
                double used = (double)st.nodes * 8;
                for (int l = 0; l < 3; l++)
                    used += (double)st.level[l].used * st.level[l].row_bits / 8;
                printf(
                    "  run %u, %llu vectors stored: %.2f bytes a vector allocated, %.2f used (%.2fx), %llu growths\n",
                    run, (unsigned long long)st.keys, (double)st.memory_bytes / st.keys, used / st.keys,
                    (double)st.memory_bytes / used, (unsigned long long)gpu_tree_generation(t));
            }
        }
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaMemcpy(c, d_c, sizeof c, cudaMemcpyDeviceToHost));
        must(gpu_tree_stats(t, &st, &err), err);
        double used_bytes = (double)st.nodes * 8;
        for (int l = 0; l < 3; l++)
            used_bytes += (double)st.level[l].used * st.level[l].row_bits / 8;
        rate.push_back(2.0 * vectors / (ms_total * 1e-3) / 1e9);
        bpv.push_back(st.bytes_per_key);
        bpv_used.push_back(st.keys ? used_bytes / st.keys : 0);
        comp.push_back(st.compression);
        printf("run %u: %.3f G vectors/s; INSERTED %llu PRESENT %llu FULL %llu; %llu vectors, %llu nodes (fill %.3f), "
               "root rows %u bits, %.2f bytes/vector allocated, %.2f used, compression %.4f\n",
               run, rate.back(), c[FLOE_INSERTED], c[FLOE_PRESENT], c[FLOE_FULL], (unsigned long long)st.keys,
               (unsigned long long)st.nodes, st.node_fill, st.level[0].row_bits, bpv.back(), bpv_used.back(),
               comp.back());
        if (grow)
            printf("run %u: %llu growths (inside the timed inserts)\n", run,
                   (unsigned long long)gpu_tree_generation(t));
        { /* the slowest batch against the median batch: what a client waits for at a growth */
            std::vector<double> sorted = batch_ms;
            std::sort(sorted.begin(), sorted.end());
            const size_t slowest = (size_t)(std::max_element(batch_ms.begin(), batch_ms.end()) - batch_ms.begin());
            const double mid = sorted[sorted.size() / 2];
            stall.push_back(batch_ms[slowest] / mid);
            printf("run %u: slowest batch #%zu %.3f ms, %.1fx the median batch (%.3f ms)\n", run, slowest + 1,
                   batch_ms[slowest], stall.back(), mid);
        }
        if (c[FLOE_INSERTED] + extra != st.keys || c[FLOE_INSERTED] + c[FLOE_PRESENT] + c[FLOE_FULL] != 2 * vectors ||
            c[5] != 0) {
            fprintf(stderr, "floe-t1-gpu: answers do not add up\n");
            return 1;
        }
        gpu_tree_destroy(t);
    }
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    printf("T1 median: %.3f G vectors/s (min %.3f, max %.3f), %.2f bytes per stored vector allocated (%.2f used), "
           "compression %.4f, memory %.1f MiB, slowest batch %.1fx the median batch\n",
           median(rate), *std::min_element(rate.begin(), rate.end()), *std::max_element(rate.begin(), rate.end()),
           median(bpv), median(bpv_used), median(comp), st.memory_bytes / 1048576.0, median(stall));
    return 0;
}
