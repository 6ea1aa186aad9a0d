/*
 * layout_selftest.cu - the shared layout header on the device.
 *
 * tables/layout.h and tables/tree_layout.h are the one definition of
 * permutations, rows, ids and tree nodes for CPU and GPU code.  This program
 * compiles them with nvcc (so `make` fails if a header stops being valid
 * CUDA) and, on a GPU host, checks that the device computes bit-for-bit what
 * the host computes: permutation, inverse, bucket/remainder split and row
 * encoding, for random keys of every width (odd ones in tables of 1.5 x
 * 2^a primary buckets); and a tree node's home,
 * remainder, last probe and decoding, in every node layout and size kind.
 * Exit status 0: identical; 1: a mismatch; 2: no usable device or a CUDA error.
 */
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#include "layout.h"
#include "tree_layout.h"

#define CUDA_CHECK(call)                                                                                               \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) {                                                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));                     \
            exit(2);                                                                                                   \
        }                                                                                                              \
    } while (0)

/* out[i] = kernel's answer for in[i], computed on the device with geometry g. */
template <typename G, typename A>
static std::vector<A> on_device(const G &g, const std::vector<uint64_t> &in,
                                void (*kernel)(const G *, const uint64_t *, size_t, A *))
{
    const size_t n = in.size();
    G *dg;
    uint64_t *din;
    A *dout;
    CUDA_CHECK(cudaMalloc(&dg, sizeof g));
    CUDA_CHECK(cudaMalloc(&din, n * sizeof(uint64_t)));
    CUDA_CHECK(cudaMalloc(&dout, n * sizeof(A)));
    CUDA_CHECK(cudaMemcpy(dg, &g, sizeof g, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(din, in.data(), n * sizeof(uint64_t), cudaMemcpyHostToDevice));
    kernel<<<(unsigned)((n + 255) / 256), 256>>>(dg, din, n, dout);
    CUDA_CHECK(cudaGetLastError());
    std::vector<A> out(n);
    CUDA_CHECK(cudaMemcpy(out.data(), dout, n * sizeof(A), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(dg));
    CUDA_CHECK(cudaFree(din));
    CUDA_CHECK(cudaFree(dout));
    return out;
}

/* Per key: permuted value, its inverse, level-1 choice-1 bucket and row. */
struct answer {
    uint64_t perm, back, bucket, row;
};

__global__ void compute(const floe_geometry *g, const uint64_t *keys, size_t n, answer *out)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    uint64_t k = keys[i], b, rem;
    answer a;
    a.perm = floe_permute(&g->perm[0], k);
    a.back = floe_unpermute(&g->perm[0], a.perm);
    floe_split(g, 1, 1, k, &b, &rem);
    a.bucket = b;
    a.row = floe_row_encode(1, rem, 1);
    out[i] = a;
}

/* Per node: home bucket, remainder, the last probe's bucket and stored
 * value, and the node decoded from that slot. */
struct node_answer {
    uint64_t home, rem, bucket, stored, back;
};

FLOE_HD static node_answer node_of(const floe_tree_geometry *g, uint64_t node)
{
    node_answer a;
    floe_node_home(g, node, &a.home, &a.rem);
    const uint32_t c = g->choices - 1;
    a.bucket = floe_node_bucket(g, a.home, c);
    a.stored = floe_node_stored(g, a.rem, c);
    a.back = floe_node_decode(g, a.bucket * FLOE_NODE_BUCKET + (node & 3), a.stored);
    return a;
}

__global__ void compute_nodes(const floe_tree_geometry *g, const uint64_t *nodes, size_t n, node_answer *out)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = node_of(g, nodes[i]);
}

/* Mismatches between host and device over n random nodes, in node tables
 * of the old layout (15 choices), plain and three tables of today's. */
static size_t check_nodes(size_t n, uint64_t *state)
{
    const uint32_t sizes[][3] = {{6, 0, FLOE_NODE_OLD_TAG_BITS}, {22, 0, FLOE_NODE_OLD_TAG_BITS},
                                 {7, 0, FLOE_NODE_TAG_BITS},     {8, 1, FLOE_NODE_TAG_BITS},
                                 {25, 1, FLOE_NODE_TAG_BITS},    {32, 0, FLOE_NODE_TAG_BITS}};
    size_t mismatches = 0;
    for (const auto &z : sizes) {
        floe_tree_geometry g;
        floe_tree_geometry_init(&g, 16, z[0], z[1], z[2], 0xFEEDull * z[0] + z[1]);
        std::vector<uint64_t> nodes(n);
        for (auto &x : nodes)
            x = floe_splitmix64(state);
        const std::vector<node_answer> got = on_device(g, nodes, compute_nodes);
        for (size_t i = 0; i < n; i++) {
            const node_answer w = node_of(&g, nodes[i]);
            if (w.back != nodes[i] || w.home != got[i].home || w.rem != got[i].rem || w.bucket != got[i].bucket ||
                w.stored != got[i].stored || w.back != got[i].back) {
                if (mismatches++ < 5)
                    fprintf(stderr, "node table 2^%u%s, %u-bit tags, node %llu: device differs from host\n", z[0],
                            z[1] ? " x 1.5" : "", z[2], (unsigned long long)nodes[i]);
            }
        }
    }
    return mismatches;
}

int main(void)
{
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        fprintf(stderr, "layout_selftest: no CUDA device\n");
        return 2;
    }
    const size_t n = 1 << 20;
    uint64_t state = 1;
    size_t mismatches = 0;
    for (uint32_t bits = 1; bits <= 64; bits++) {
        floe_geometry g;
        uint32_t a0 = bits < 12 ? bits : 12;
        if (a0 < floe_min_addr_bits(bits))
            a0 = floe_min_addr_bits(bits);
        /* odd widths in tables of 1.5 x 2^a0 primary buckets (a TREE's root tables) */
        floe_geometry_init(&g, bits, a0, (bits & 1) && a0 >= 1, 0xC0FFEEull * bits);
        std::vector<uint64_t> keys(n);
        for (auto &k : keys)
            k = floe_splitmix64(&state) & floe_mask_bits(bits);
        const std::vector<answer> got = on_device(g, keys, compute);
        for (size_t i = 0; i < n; i++) {
            uint64_t b, rem;
            floe_split(&g, 1, 1, keys[i], &b, &rem);
            answer w = {floe_permute(&g.perm[0], keys[i]), keys[i], b, floe_row_encode(1, rem, 1)};
            if (w.perm != got[i].perm || w.back != got[i].back || w.bucket != got[i].bucket || w.row != got[i].row) {
                if (mismatches++ < 5)
                    fprintf(stderr, "bits %u key %llu: device differs from host\n", bits, (unsigned long long)keys[i]);
            }
        }
    }
    const size_t node_mismatches = check_nodes(n, &state);
    mismatches += node_mismatches;
    printf("layout_selftest: %s (%zu keys x 64 widths, %zu nodes x 6 node tables; %zu mismatches)\n",
           mismatches ? "FAILED" : "ok", n, n, mismatches);
    return mismatches ? 1 : 0;
}
