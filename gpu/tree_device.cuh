/*
 * tree_device.cuh - what the GPU engine's two files for TREE tables share:
 * the table's struct, the device helpers that load vectors and fold them
 * into nodes, and the host helpers for launches and scratch.  Included by
 * tree_gpu.cu (batches) and tree_table.cu (the tables as a whole) only.
 */
#ifndef FLOE_GPU_TREE_DEVICE_CUH
#define FLOE_GPU_TREE_DEVICE_CUH

#include <assert.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cub/block/block_reduce.cuh>
#include <cub/device/device_select.cuh>
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>
#include <thrust/iterator/counting_iterator.h>
#include <utility>

#include "append.h"
#include "cuda_try.h"
#include "tree_gpu.h"
#include "tree_layout.h"

#define BLOCK         256
#define COUNTERS      6
#define FOLDED        0xFFu
#define DAMAGED       0xFEu /* a fold met a reference to no node: the table is damaged */
#define FULL_IN_NODES 1ull  /* a batch's counter[3]: which tables had no room for one of its vectors */
#define FULL_IN_ROOTS 2ull

struct gpu_tree {
    floe_spec spec;
    floe_tree_geometry g;
    tree_sizing z;
    uint64_t *nodes;
    gpu_iceberg *roots;
    unsigned long long *orphans;
    unsigned long long *counter;   /* a batch's: leaders, folded leaders, nodes made, FULL_IN_*, roots put,
                                    * leaders listed FULL (COUNTERS) */
    unsigned long long *h_counter; /* pinned */
    /* on the host: nodes stored (counted by the batches), and at most as many roots */
    uint64_t nodes_used, roots_bound;
    uint64_t last_n, last_made, last_put; /* the last insert batch: vectors, nodes it made, roots it put */
    uint64_t batch_made; /* the nodes the batch running has made (its folds' counts: a growth renumbers nodes_used) */
    uint64_t generation; /* growths: ids of an earlier one name other vectors */
    cudaStream_t grow_stream; /* a root table's growth beside a batch's fold (made at the first; NULL: none) */
    /* batch scratch, grown on demand: one allocation, which a node table's
     * growth borrows where it is large enough (copy_into) */
    void *scratch;
    size_t scratch_bytes, cap;
    uint64_t *dd_table; /* dedup table: room for dedup_slots(cap) 64-bit entries */
    uint32_t *dd_slot, *leader, *list, *rk_idx;
    uint64_t *rk, *ids_c;
    uint8_t *res_c, *created;
    uint32_t *whole; /* states by parent that go whole: their vectors (not batch scratch: a growth
                      * in their insert reserves scratch of its own) */
    size_t whole_cap;
    bool (*fits)(void *ctx, uint64_t bytes); /* maxmemory-gpu (gpu_tree_set_limit); NULL: none */
    void *fits_ctx;
};

/* ---- device ------------------------------------------------------------------------------------------ */

/* Vectors of WC words (WC > 0: known at compile time, a multiple of 4)
 * move as 16-byte loads: a thread's vector is one run of memory, and word
 * loads would make a warp ask for each line W / 4 times.  A batch's
 * vectors are read once a kernel: loads that L2 evicts first (__ldcs),
 * so that they do not push out the dedup table or the nodes. */
template <int WC> __device__ __forceinline__ void load_vector(const uint32_t *v, uint32_t W, uint32_t *items)
{
    if constexpr (WC > 0 && (WC % 4) == 0) {
#pragma unroll
        for (int w = 0; w < WC; w += 4) {
            const uint4 q = __ldcs(reinterpret_cast<const uint4 *>(v + w));
            items[w] = q.x, items[w + 1] = q.y, items[w + 2] = q.z, items[w + 3] = q.w;
        }
    } else {
        for (uint32_t w = 0; w < W; w++)
            items[w] = v[w];
    }
}

template <int WC> __device__ __forceinline__ uint64_t vector_hash(const uint32_t *v, uint32_t W)
{
    const uint32_t m = WC > 0 ? (uint32_t)WC : W;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ m;
#pragma unroll
    for (uint32_t i = 0; i < m; i++) {
        h = (h ^ v[i]) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    h *= 0xC4CEB9FE1A85EC53ull;
    return h ^ (h >> 29);
}

/* items (this thread's vector) against vector b in memory. */
template <int WC> __device__ __forceinline__ bool vectors_equal(const uint32_t *items, const uint32_t *b, uint32_t W)
{
    if constexpr (WC > 0 && (WC % 4) == 0) {
        bool same = true;
#pragma unroll
        for (int w = 0; w < WC; w += 4) {
            const uint4 q = __ldcs(reinterpret_cast<const uint4 *>(b + w));
            same &= q.x == items[w] && q.y == items[w + 1] && q.z == items[w + 2] && q.w == items[w + 3];
        }
        return same;
    } else {
        for (uint32_t i = 0; i < W; i++)
            if (items[i] != b[i])
                return false;
        return true;
    }
}

/* Finds or (insert) puts one node: 1 and its reference, or 0. */
template <bool insert>
__device__ __forceinline__ int node_ref(const floe_tree_geometry &g, uint64_t *nodes, uint64_t node, uint32_t *ref,
                                        unsigned *created)
{
    uint64_t home, rem;
    floe_node_home(&g, node, &home, &rem);
    for (uint32_t c = 0; c < g.choices; c++) {
        const uint64_t b = floe_node_bucket(&g, home, c), v = floe_node_stored(&g, rem, c);
        uint64_t *slots = nodes + (b << FLOE_NODE_BUCKET_SHIFT);
        const ulonglong2 *q = reinterpret_cast<const ulonglong2 *>(slots);
        /* Through L1 first, inserts too: a slot goes from EMPTY to its node
         * once in a generation, so a stale line can only show EMPTY where
         * another SM has since put a node, never a wrong node.  A node found
         * there is an answer; an EMPTY seen sends an insert to L2 for the
         * bucket as it is now, before it claims a slot. */
        ulonglong2 a = insert ? __ldca(q) : __ldg(q), d = insert ? __ldca(q + 1) : __ldg(q + 1);
        uint64_t s[FLOE_NODE_BUCKET] = {a.x, a.y, d.x, d.y};
        if (insert) {
            bool hit = false, empty = false;
#pragma unroll
            for (uint32_t i = 0; i < FLOE_NODE_BUCKET; i++) {
                if (!hit && !empty && s[i] == v) {
                    *ref = (uint32_t)((b << FLOE_NODE_BUCKET_SHIFT) + i);
                    hit = true;
                }
                empty |= s[i] == FLOE_NODE_EMPTY;
            }
            if (hit)
                return 1;
            if (!empty)
                continue; /* full, as it stays: the next choice */
            a = __ldcg(q), d = __ldcg(q + 1);
            s[0] = a.x, s[1] = a.y, s[2] = d.x, s[3] = d.y;
        }
#pragma unroll
        for (uint32_t i = 0; i < FLOE_NODE_BUCKET; i++) {
            uint64_t cur = s[i];
            if (cur == FLOE_NODE_EMPTY) {
                if (!insert)
                    return 0;
                cur = atomicCAS((unsigned long long *)(slots + i), FLOE_NODE_EMPTY, v);
                if (cur == FLOE_NODE_EMPTY) {
                    *ref = (uint32_t)((b << FLOE_NODE_BUCKET_SHIFT) + i);
                    ++*created;
                    return 1;
                }
            }
            if (cur == v) {
                *ref = (uint32_t)((b << FLOE_NODE_BUCKET_SHIFT) + i);
                return 1;
            }
        }
    }
    return 0;
}

/* Folds items[0..W) in place; FOLDED and the root pair in items[0..1], or
 * FLOE_FULL / FLOE_ABSENT.  WC > 0: the length known at compile time. */
template <int WC, bool insert>
__device__ __forceinline__ uint32_t fold(const floe_tree_geometry &g, uint64_t *nodes, uint32_t *items, uint32_t W,
                                         unsigned *created)
{
    uint32_t m = WC > 0 ? (uint32_t)WC : W;
#pragma unroll
    for (int level = 0; level < 9; level++) {
        if (m <= 2)
            break;
        const uint32_t half = m / 2;
#pragma unroll
        for (uint32_t j = 0; j < (WC > 0 ? (uint32_t)WC / 2 : half); j++) {
            if (j >= half)
                break;
            if (!node_ref<insert>(g, nodes, floe_node_pack(items[2 * j], items[2 * j + 1]), &items[j], created))
                return insert ? FLOE_FULL : FLOE_ABSENT;
        }
        if (m & 1)
            items[half] = items[m - 1];
        m = floe_tree_up(m);
    }
    return FOLDED;
}

/* How many of a[0..n) are not `value` (node slots in use, answers not INSERTED). */
template <typename T> __global__ void k_count_other(const T *a, uint64_t n, T value, unsigned long long *out)
{
    unsigned long long c = 0;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
        c += a[i] != value;
    for (int o = 16; o > 0; o /= 2)
        c += __shfl_down_sync(0xFFFFFFFFu, c, o);
    if ((threadIdx.x & 31) == 0 && c)
        atomicAdd(out, c);
}

/* ---- host ------------------------------------------------------------------------------------------------ */

static inline unsigned blocks_for(uint64_t n)
{
    return (unsigned)((n + BLOCK - 1) / BLOCK);
}

/* Arrays carved one after another from one allocation: piece(bytes) the
 * next one, at 256-byte boundaries (NULL past the end). */
struct carver {
    char *at, *end;
    void *piece(size_t bytes)
    {
        char *p = at;
        at += (bytes + 255) & ~(size_t)255;
        return at <= end ? p : NULL;
    }
};

/* The bytes of pieces of these sizes carved one after another. */
static size_t carved_bytes(const size_t *sizes, int n)
{
    size_t b = 0;
    for (int i = 0; i < n; i++)
        b += (sizes[i] + 255) & ~(size_t)255;
    return b;
}

/* Two lists of a batch's leaders that found no room, in the dedup table's
 * room (no longer needed once the leaders are listed): a growing batch
 * folds them again after a growth (refold_grown). */
static inline uint32_t *full_lists(gpu_tree *t)
{
    return (uint32_t *)t->dd_table;
}

/* tree_table.cu: the arrays of t's tables, laid out as t->z (tables_alloc frees what it made on failure), a
 * growth of the tables `what` (TREE_GROW_*) taking keys[0, nkeys) (root keys of the batch) along, and one of
 * the root table alone for `coming` vectors, its work on stream s (gpu_iceberg_rebuild_on; NULL: the device
 * waits first). */
floe_status tree_tables_alloc(gpu_tree *t, floe_errinfo *err);
void tree_tables_free(gpu_tree *t);
floe_status tree_grow_tables(gpu_tree *t, unsigned what, size_t coming, uint64_t *keys, size_t nkeys,
                             floe_errinfo *err);
floe_status tree_grow_roots(gpu_tree *t, size_t coming, cudaStream_t s, floe_errinfo *err);

#endif
