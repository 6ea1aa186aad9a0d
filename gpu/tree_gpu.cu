/*
 * tree_gpu.cu - the GPU engine's kernels for TREE tables (see tree_gpu.h).
 * Layout, node encoding and the unfold walk are tables/tree_layout.h's.
 *
 * A batch, all on one stream:
 *   dedup   each vector looks itself up in a scratch hash table of vector
 *           indices (1.25n slots, entries hash tag | index: 32 bits for a
 *           batch below 2^24 vectors, 64 above) and joins
 *           the class of equal vectors there, lowering the class's index
 *           with atomicMin; the class's final index is its first occurrence,
 *           the leader.  Equal vectors probe the same sequence, and a slot
 *           once taken holds one class for the batch, so the classes are
 *           exact (the full vectors are compared, not just hashes).
 *   fold    one thread per leader (listed with one atomic a block) folds
 *           its vector bottom-up: each node is found or put with one 64-bit
 *           atomicCAS from EMPTY, its reference replaces the pair; leaders
 *           that fold write their root key into a compact list (one
 *           atomicAdd per warp).
 *   roots   the root keys, distinct by construction, go to the root table
 *           (gpu_iceberg, without its in-batch fix-up: they are distinct).
 *   answer  leaders take the root table's answers; the other occurrences
 *           copy their leader's (INSERTED becomes PRESENT).
 * The host reads the number of folded leaders between fold and roots: the
 * one synchronisation of a batch.  A growing table whose node table had no
 * room for a leader grows there (refold_grown), before the roots.
 *
 * One thread per vector, no intra-vector parallelism (the tree thesis found
 * it the best of its variants); for 16-word vectors the fold is compiled for
 * that length so the items stay in registers.
 */
#include <assert.h>
#include <cub/device/device_select.cuh>
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "tree_device.cuh"

/* The dedup table's entries, tag | index: 32 bits while a batch's indices
 * take at most 24 (a tag of 8 bits or more), so that the table stays in
 * L2 while the vectors stream past (dedup_slots); 64 bits (a 32-bit tag)
 * beyond.  An index below 2^idx_bits - 1 keeps an entry from being all
 * ones, which is empty. */
#define DEDUP_SMALL_BITS 24

/* The batch index an entry holds. */
template <typename E> __device__ __forceinline__ uint32_t dedup_index(E entry, uint32_t idx_bits)
{
    return (uint32_t)(entry & (((E)1 << idx_bits) - 1));
}

template <typename E> __device__ __forceinline__ E atomic_cas(E *a, E expect, E want)
{
    if constexpr (sizeof(E) == 4)
        return atomicCAS((unsigned *)a, (unsigned)expect, (unsigned)want);
    else
        return atomicCAS((unsigned long long *)a, (unsigned long long)expect, (unsigned long long)want);
}

template <typename E> __device__ __forceinline__ void atomic_min(E *a, E v)
{
    if constexpr (sizeof(E) == 4)
        atomicMin((unsigned *)a, (unsigned)v);
    else
        atomicMin((unsigned long long *)a, (unsigned long long)v);
}

/* Joins vector i's class in the dedup table; dd_slot[i] = the class's slot. */
template <int WC, typename E>
__global__ void __launch_bounds__(BLOCK)
    k_dedup(const uint32_t *vecs, uint32_t W, uint64_t n, E *table, uint64_t slots, uint32_t idx_bits,
            uint32_t *dd_slot)
{
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    /* WC 0: the vector stays in memory (up to 256 words) */
    constexpr int N = WC > 0 ? WC : 1;
    constexpr E EMPTY = (E)~(E)0;
    uint32_t reg[N];
    const uint32_t *v = vecs + i * W;
    if (WC > 0)
        load_vector<WC>(v, W, reg);
    const uint32_t *items = WC > 0 ? reg : v;
    const uint64_t h = vector_hash<WC>(items, W);
    const E tag = (E)(h >> (64 - (8 * sizeof(E) - idx_bits))), mine = tag << idx_bits | (E)i;
    uint64_t s = __umul64hi(h << 32, slots); /* h's low half onto [0, slots); the tag is its top bits */
    for (;;) {
        E cur = __ldcg(table + s);
        if (cur == EMPTY) {
            cur = atomic_cas<E>(table + s, EMPTY, mine);
            if (cur == EMPTY) {
                dd_slot[i] = (uint32_t)s;
                return;
            }
        }
        if ((cur >> idx_bits) == tag && vectors_equal<WC>(items, vecs + (uint64_t)dedup_index(cur, idx_bits) * W, W)) {
            if (mine < cur) /* an entry only falls: one above this occurrence stays above */
                atomic_min<E>(table + s, mine);
            dd_slot[i] = (uint32_t)s;
            return;
        }
        s = s + 1 == slots ? 0 : s + 1;
    }
}

/* leader[i]: the first occurrence of vector i; leaders go to the list,
 * a block's with one atomic. */
template <typename E>
__global__ void __launch_bounds__(BLOCK) k_leaders(const E *table, const uint32_t *dd_slot, uint64_t n,
                                                   uint32_t idx_bits, uint32_t *leader, uint32_t *list,
                                                   unsigned long long *count)
{
    __shared__ block_append<BLOCK> append;
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    bool leads = false;
    if (i < n) {
        const uint32_t l = dedup_index(table[dd_slot[i]], idx_bits);
        leader[i] = l;
        leads = l == i;
    }
    const unsigned long long at = append(count, leads);
    if (leads)
        list[at] = (uint32_t)i;
}

/* No __launch_bounds__: with it ptxas holds the 16-word fold to 40
 * registers (six blocks an SM) and spills 40 bytes to local memory, read
 * back in the divergent probe loop a lane at a time (H100, ncu: 950 K
 * local requests a batch); without it the fold takes 42 registers, five
 * blocks an SM, and spills nothing. */
template <int WC, bool insert>
__global__ void k_fold(const __grid_constant__ floe_tree_geometry g, uint64_t *nodes, const uint32_t *vecs, uint32_t W,
                       const uint32_t *list, const unsigned long long *nlist, uint64_t *rk, uint32_t *rk_idx,
                       unsigned long long *nrk, uint8_t *results, uint64_t *ids, uint8_t *created_out,
                       unsigned long long *orphans, unsigned long long *made, unsigned long long *full_in,
                       uint32_t *full_list, unsigned long long *nfull)
{
    uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (k >= *nlist)
        return;
    const uint32_t i = list[k];
    constexpr int N = WC > 0 ? WC : FLOE_TREE_MAX_WORDS;
    uint32_t items[N];
    load_vector<WC>(vecs + (uint64_t)i * W, W, items);
    unsigned created = 0;
    uint32_t r = fold<WC, insert>(g, nodes, items, W, &created);
    if (insert) { /* the nodes the batch made, an atomic a group of threads that runs here together */
        namespace cg = cooperative_groups;
        cg::coalesced_group here = cg::coalesced_threads();
        const unsigned sum = cg::reduce(here, created, cg::plus<unsigned>());
        if (here.thread_rank() == 0 && sum)
            atomicAdd(made, (unsigned long long)sum);
    }
    if (created_out)
        created_out[i] = (uint8_t)created;
    if (r == FOLDED) {
        unsigned long long at = warp_append(nrk);
        rk[at] = floe_tree_root_key(&g, items[0], items[1]);
        rk_idx[at] = i;
        return;
    }
    results[i] = (uint8_t)r;
    if (ids)
        ids[i] = FLOE_NO_ID;
    if (insert && r == FLOE_FULL) {
        atomicOr(full_in, FULL_IN_NODES);
        if (full_list) /* to fold again after a growth */
            full_list[warp_append(nfull)] = i;
    }
    if (created)
        atomicAdd(orphans, (unsigned long long)created);
}

/* Leaders take the root table's answers. */
__global__ void __launch_bounds__(BLOCK) k_scatter(const uint32_t *rk_idx, const unsigned long long *nrk,
                                                   const uint8_t *res_c, const uint64_t *ids_c, uint8_t *results,
                                                   uint64_t *ids, const uint8_t *created, unsigned long long *orphans,
                                                   unsigned long long *full_in, unsigned long long *put)
{
    const uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    const bool mine = k < *nrk;
    if (created) { /* an insert: the roots it put, an atomic a block */
        typedef cub::BlockReduce<unsigned, BLOCK> block_reduce;
        __shared__ typename block_reduce::TempStorage tmp;
        const unsigned sum = block_reduce(tmp).Sum(mine && res_c[k] == FLOE_INSERTED ? 1u : 0u);
        if (threadIdx.x == 0 && sum)
            atomicAdd(put, (unsigned long long)sum);
    }
    if (!mine)
        return;
    const uint32_t i = rk_idx[k];
    results[i] = res_c[k];
    if (ids)
        ids[i] = res_c[k] == FLOE_FULL || res_c[k] == FLOE_ABSENT ? FLOE_NO_ID : ids_c[k];
    if (res_c[k] == FLOE_FULL && created && created[i])
        atomicAdd(orphans, (unsigned long long)created[i]);
    if (res_c[k] == FLOE_FULL && created)
        atomicOr(full_in, FULL_IN_ROOTS);
}

/* Later occurrences copy their leader's answer. */
__global__ void k_copy_dups(const uint32_t *leader, uint64_t n, uint8_t *results, uint64_t *ids)
{
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    uint32_t l = leader[i];
    if (l == i)
        return;
    uint8_t r = results[l];
    results[i] = r == FLOE_INSERTED ? (uint8_t)FLOE_PRESENT : r;
    if (ids)
        ids[i] = ids[l];
}

__global__ void k_unfold(const __grid_constant__ floe_tree_geometry g, const uint64_t *nodes, const uint64_t *keys,
                         const uint8_t *found, uint64_t n, uint8_t *results, uint32_t *vecs, int *damaged)
{
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    uint32_t *out = vecs + i * g.words;
    if (!found[i]) {
        results[i] = FLOE_ABSENT;
        for (uint32_t w = 0; w < g.words; w++)
            out[w] = 0;
        return;
    }
    uint32_t left, right;
    floe_tree_root_split(&g, keys[i], &left, &right);
    if (!floe_tree_unfold(&g, nodes, left, right, out))
        *damaged = 1;
    results[i] = FLOE_PRESENT;
}

/* ---- host ------------------------------------------------------------------------------------------------ */

/* The dedup table of a batch of n: 1.25 n slots (a fill of 0.8 at most,
 * and the probes of 4-byte entries mostly stay in their line), so that a
 * batch of 4 Mi vectors' table is 21 MB, in L2. */
static uint64_t dedup_slots(uint64_t n)
{
    const uint64_t slots = (n + n / 4 + 31) & ~(uint64_t)31;
    return slots > 1024 ? slots : 1024;
}

static void scratch_free(gpu_tree *t)
{
    cudaFree(t->scratch);
    t->scratch = NULL;
    t->scratch_bytes = 0;
    t->dd_table = t->rk = t->ids_c = NULL;
    t->dd_slot = t->leader = t->list = t->rk_idx = NULL;
    t->res_c = t->created = NULL;
    t->cap = 0;
}

static floe_status scratch_reserve(gpu_tree *t, size_t n, floe_errinfo *err)
{
    if (n <= t->cap)
        return FLOE_OK;
    scratch_free(t);
    const size_t sizes[] = {dedup_slots(n) * 8, n * 4, n * 4, n * 4, n * 4, n * 8, n * 8, n, n};
    const size_t bytes = carved_bytes(sizes, 9);
    CUDA_TRY(cudaMalloc(&t->scratch, bytes), err);
    carver c = {(char *)t->scratch, (char *)t->scratch + bytes};
    t->dd_table = (uint64_t *)c.piece(sizes[0]);
    t->dd_slot = (uint32_t *)c.piece(sizes[1]);
    t->leader = (uint32_t *)c.piece(sizes[2]);
    t->list = (uint32_t *)c.piece(sizes[3]);
    t->rk_idx = (uint32_t *)c.piece(sizes[4]);
    t->rk = (uint64_t *)c.piece(sizes[5]);
    t->ids_c = (uint64_t *)c.piece(sizes[6]);
    t->res_c = (uint8_t *)c.piece(sizes[7]);
    t->created = (uint8_t *)c.piece(sizes[8]);
    t->scratch_bytes = bytes;
    t->cap = n;
    return FLOE_OK;
}

extern "C" floe_status gpu_tree_create(const floe_spec *spec, const tree_sizing *z, gpu_tree **out, floe_errinfo *err)
{
    *out = NULL;
    if (spec->kind != FLOE_KIND_TREE || spec->seed == 0)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "gpu_tree_create needs a TREE spec with its seed set");
    gpu_tree *t = (gpu_tree *)calloc(1, sizeof *t);
    if (!t)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    t->spec = *spec;
    floe_status st = FLOE_OK;
    if (z)
        t->z = *z;
    else
        st = tree_size(spec, &t->z, err);
    if (st == FLOE_OK)
        st = tree_tables_alloc(t, err);
    if (st != FLOE_OK) {
        free(t);
        return st;
    }
    cudaError_t e = cudaMalloc(&t->counter, COUNTERS * sizeof *t->counter);
    if (e == cudaSuccess)
        e = cudaMallocHost(&t->h_counter, COUNTERS * sizeof *t->h_counter);
    if (e != cudaSuccess) {
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "memory for a TREE table's counters: %s", cudaGetErrorString(e));
        gpu_tree_destroy(t);
        return st;
    }
    *out = t;
    return FLOE_OK;
}

extern "C" void gpu_tree_destroy(gpu_tree *t)
{
    if (!t)
        return;
    scratch_free(t);
    cudaFree(t->whole);
    tree_tables_free(t);
    if (t->grow_stream)
        cudaStreamDestroy(t->grow_stream);
    cudaFree(t->counter);
    cudaFreeHost(t->h_counter);
    free(t);
}

extern "C" const floe_spec *gpu_tree_spec(const gpu_tree *t)
{
    return &t->spec;
}

extern "C" const tree_sizing *gpu_tree_sizes(const gpu_tree *t)
{
    return &t->z;
}

extern "C" uint64_t gpu_tree_root_slots(const gpu_tree *t)
{
    return gpu_iceberg_slots(t->roots);
}

/* The vectors at list[0, counter[0]) folded (n bounds the count), their
 * root keys appended to rk at counter[1]; those that find no room listed
 * in full_list at counter[5] (NULL: not listed). */
template <bool insert>
static void launch_fold(gpu_tree *t, const uint32_t *d_vectors, const uint32_t *list, size_t n, uint8_t *d_results,
                        uint64_t *d_ids, uint32_t *full_list, cudaStream_t s)
{
    const uint32_t W = t->g.words;
    unsigned long long *nlist = t->counter, *nrk = t->counter + 1, *made = t->counter + 2, *full_in = t->counter + 3,
                       *nfull = t->counter + 5;
    uint8_t *created = insert ? t->created : NULL;
    if (W == 16)
        k_fold<16, insert><<<blocks_for(n), BLOCK, 0, s>>>(t->g, t->nodes, d_vectors, W, list, nlist, t->rk, t->rk_idx,
                                                           nrk, d_results, d_ids, created, t->orphans, made, full_in,
                                                           full_list, nfull);
    else
        k_fold<0, insert><<<blocks_for(n), BLOCK, 0, s>>>(t->g, t->nodes, d_vectors, W, list, nlist, t->rk, t->rk_idx,
                                                          nrk, d_results, d_ids, created, t->orphans, made, full_in,
                                                          full_list, nfull);
}

/* A batch of n into classes of equal vectors (dedup, leaders), with
 * entries of type E and indices of idx_bits. */
template <typename E>
static cudaError_t launch_dedup(gpu_tree *t, const uint32_t *d_vectors, size_t n, uint32_t idx_bits, cudaStream_t s)
{
    const uint64_t slots = dedup_slots(n);
    E *table = (E *)t->dd_table;
    cudaError_t e = cudaMemsetAsync(table, 0xFF, slots * sizeof(E), s);
    if (e != cudaSuccess)
        return e;
    if (t->g.words == 16)
        k_dedup<16, E><<<blocks_for(n), BLOCK, 0, s>>>(d_vectors, 16, n, table, slots, idx_bits, t->dd_slot);
    else
        k_dedup<0, E><<<blocks_for(n), BLOCK, 0, s>>>(d_vectors, t->g.words, n, table, slots, idx_bits,
                                                      t->dd_slot);
    k_leaders<E><<<blocks_for(n), BLOCK, 0, s>>>(table, t->dd_slot, n, idx_bits, t->leader, t->list, t->counter);
    return cudaGetLastError();
}

static floe_status refold_grown(gpu_tree *t, const uint32_t *d_vectors, uint8_t *d_results, uint64_t *d_ids,
                                cudaStream_t s, floe_errinfo *err);

/* The stream of t's root table's growths beside a fold (made at the first;
 * where it cannot be, s: the growth after the fold). */
static cudaStream_t grow_stream(gpu_tree *t, cudaStream_t s)
{
    if (!t->grow_stream && cudaStreamCreateWithFlags(&t->grow_stream, cudaStreamNonBlocking) != cudaSuccess) {
        cudaGetLastError();
        t->grow_stream = NULL;
        return s;
    }
    return t->grow_stream;
}

/* The shared body of insert and find; with grow_roots (a growing table's
 * insert), the root table grows for the batch while it folds (which reads
 * only the node table): the growth's host work and kernels go beside the
 * fold's, not before it. */
template <bool insert>
static floe_status run_batch(gpu_tree *t, const uint32_t *d_vectors, size_t n, uint8_t *d_results, uint64_t *d_ids,
                             gpu_stream stream, floe_errinfo *err, bool grow_roots = false)
{
    assert(n < ((size_t)1 << 32)); /* the door's limit (floe_request_check) */
    if (n == 0)
        return FLOE_OK;
    floe_status st = scratch_reserve(t, n, err);
    if (st != FLOE_OK)
        return st;
    cudaStream_t s = (cudaStream_t)stream;
    const bool empty = t->roots_bound == 0; /* a bound: 0 holds no root */
    CUDA_TRY(cudaMemsetAsync(t->counter, 0, COUNTERS * sizeof *t->counter, s), err);
    const uint32_t idx_bits = 64 - (uint32_t)__builtin_clzll((unsigned long long)n); /* n < 2^idx_bits */
    if (idx_bits <= DEDUP_SMALL_BITS)
        CUDA_TRY(launch_dedup<uint32_t>(t, d_vectors, n, idx_bits, s), err);
    else
        CUDA_TRY(launch_dedup<uint64_t>(t, d_vectors, n, 32, s), err);
    launch_fold<insert>(t, d_vectors, t->list, n, d_results, d_ids, insert && t->spec.grow ? full_lists(t) : NULL, s);
    CUDA_TRY(cudaGetLastError(), err);
    CUDA_TRY(cudaMemcpyAsync(t->h_counter, t->counter, COUNTERS * sizeof *t->counter, cudaMemcpyDeviceToHost, s), err);
    if (insert && grow_roots) {
        floe_errinfo ignored;
        (void)tree_grow_roots(t, n, grow_stream(t, s), &ignored); /* where it cannot, FULL answers decide */
    }
    CUDA_TRY(cudaStreamSynchronize(s), err);
    if (insert) {
        t->nodes_used += t->h_counter[2];
        t->batch_made = t->h_counter[2];
        t->roots_bound += t->h_counter[1]; /* no more roots than vectors folded */
    }
    if (insert && t->spec.grow && (t->h_counter[3] & FULL_IN_NODES)) {
        st = refold_grown(t, d_vectors, d_results, d_ids, s, err);
        if (st != FLOE_OK)
            return st;
    }
    const size_t m = (size_t)t->h_counter[1];
    if (insert && t->spec.grow && empty && (double)m > t->spec.max_fill * (double)gpu_iceberg_slots(t->roots)) {
        /* an empty table's roots are all new, so the fold counted them exactly: the root table grows
         * for them now, not after a put that met FULL (its answers picked out and put again) */
        floe_errinfo ignored;
        (void)tree_grow_roots(t, 0, s, &ignored); /* where it cannot, FULL answers decide */
    }
    if (m > 0) {
        st = insert ? gpu_iceberg_put(t->roots, t->rk, m, t->res_c, t->ids_c, GPU_NO_DEDUP, stream, err)
                    : gpu_iceberg_find(t->roots, t->rk, m, t->res_c, t->ids_c, NULL, stream, err);
        if (st != FLOE_OK)
            return st;
        k_scatter<<<blocks_for(m), BLOCK, 0, s>>>(t->rk_idx, t->counter + 1, t->res_c, t->ids_c, d_results, d_ids,
                                                  insert ? t->created : NULL, t->orphans, t->counter + 3,
                                                  t->counter + 4);
    }
    k_copy_dups<<<blocks_for(n), BLOCK, 0, s>>>(t->leader, n, d_results, d_ids);
    CUDA_TRY(cudaGetLastError(), err);
    return FLOE_OK;
}

static floe_status insert_growing(gpu_tree *t, const uint32_t *d_vectors, size_t n, uint8_t *d_results, uint64_t *d_ids,
                                  gpu_stream stream, floe_errinfo *err);

extern "C" floe_status gpu_tree_insert(gpu_tree *t, const uint32_t *d_vectors, size_t n, uint8_t *d_results,
                                       uint64_t *d_ids, gpu_stream stream, floe_errinfo *err)
{
    if (t->spec.grow)
        return insert_growing(t, d_vectors, n, d_results, d_ids, stream, err);
    return run_batch<true>(t, d_vectors, n, d_results, d_ids, stream, err);
}

extern "C" floe_status gpu_tree_find(gpu_tree *t, const uint32_t *d_vectors, size_t n, uint8_t *d_results,
                                     uint64_t *d_ids, gpu_stream stream, floe_errinfo *err)
{
    return run_batch<false>(t, d_vectors, n, d_results, d_ids, stream, err);
}

extern "C" floe_status gpu_tree_get(gpu_tree *t, const uint64_t *d_ids, uint64_t first, size_t n, uint8_t *d_results,
                                    uint32_t *d_vectors, gpu_stream stream, floe_errinfo *err)
{
    if (n == 0)
        return FLOE_OK;
    floe_status st = scratch_reserve(t, n, err);
    if (st != FLOE_OK)
        return st;
    cudaStream_t s = (cudaStream_t)stream;
    /* rk and res_c hold the root keys and whether each id has one. */
    st = gpu_iceberg_keys_at(t->roots, d_ids, first, n, t->rk, t->res_c, stream, err);
    if (st != FLOE_OK)
        return st;
    int *damaged = (int *)t->counter;
    CUDA_TRY(cudaMemsetAsync(damaged, 0, sizeof *damaged, s), err);
    k_unfold<<<blocks_for(n), BLOCK, 0, s>>>(t->g, t->nodes, t->rk, t->res_c, n, d_results, d_vectors, damaged);
    CUDA_TRY(cudaGetLastError(), err);
    int h_damaged = 0;
    CUDA_TRY(cudaMemcpyAsync(&h_damaged, damaged, sizeof h_damaged, cudaMemcpyDeviceToHost, s), err);
    CUDA_TRY(cudaStreamSynchronize(s), err);
    if (h_damaged)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "table %s is damaged: an id leads to a missing node",
                                t->spec.name);
    return FLOE_OK;
}

/* ---- host variants ---------------------------------------------------------------------------------------- */

typedef floe_status (*vec_fn)(gpu_tree *, const uint32_t *, size_t, uint8_t *, uint64_t *, gpu_stream, floe_errinfo *);

static floe_status run_host(gpu_tree *t, vec_fn fn, const uint32_t *vectors, size_t n, uint8_t *results, uint64_t *ids,
                            floe_errinfo *err)
{
    if (n == 0)
        return FLOE_OK;
    const size_t W = t->g.words;
    uint32_t *d_vec = NULL;
    uint8_t *d_res = NULL;
    uint64_t *d_ids = NULL;
    floe_status st = FLOE_OK;
    cudaError_t e = cudaMalloc(&d_vec, n * W * 4);
    if (e == cudaSuccess)
        e = cudaMalloc(&d_res, n);
    if (e == cudaSuccess && ids)
        e = cudaMalloc(&d_ids, n * 8);
    if (e == cudaSuccess)
        e = cudaMemcpy(d_vec, vectors, n * W * 4, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) {
        st = fn(t, d_vec, n, d_res, d_ids, NULL, err);
        if (st == FLOE_OK) {
            e = cudaMemcpy(results, d_res, n, cudaMemcpyDeviceToHost);
            if (e == cudaSuccess && ids)
                e = cudaMemcpy(ids, d_ids, n * 8, cudaMemcpyDeviceToHost);
        }
    }
    if (st == FLOE_OK && e != cudaSuccess)
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "CUDA: %s", cudaGetErrorString(e));
    cudaFree(d_vec);
    cudaFree(d_res);
    cudaFree(d_ids);
    return st;
}

extern "C" floe_status gpu_tree_insert_host(gpu_tree *t, const uint32_t *vectors, size_t n, uint8_t *results,
                                            uint64_t *ids, floe_errinfo *err)
{
    return run_host(t, gpu_tree_insert, vectors, n, results, ids, err);
}

extern "C" floe_status gpu_tree_find_host(gpu_tree *t, const uint32_t *vectors, size_t n, uint8_t *results,
                                          uint64_t *ids, floe_errinfo *err)
{
    return run_host(t, gpu_tree_find, vectors, n, results, ids, err);
}

extern "C" floe_status gpu_tree_get_host(gpu_tree *t, const uint64_t *ids, size_t n, uint8_t *results,
                                         uint32_t *vectors, floe_errinfo *err)
{
    if (n == 0)
        return FLOE_OK;
    const size_t W = t->g.words;
    uint64_t *d_ids = NULL;
    uint8_t *d_res = NULL;
    uint32_t *d_vec = NULL;
    floe_status st = FLOE_OK;
    cudaError_t e = cudaMalloc(&d_ids, n * 8);
    if (e == cudaSuccess)
        e = cudaMalloc(&d_res, n);
    if (e == cudaSuccess)
        e = cudaMalloc(&d_vec, n * W * 4);
    if (e == cudaSuccess)
        e = cudaMemcpy(d_ids, ids, n * 8, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) {
        st = gpu_tree_get(t, d_ids, 0, n, d_res, d_vec, NULL, err);
        if (st == FLOE_OK) {
            e = cudaMemcpy(results, d_res, n, cudaMemcpyDeviceToHost);
            if (e == cudaSuccess)
                e = cudaMemcpy(vectors, d_vec, n * W * 4, cudaMemcpyDeviceToHost);
        }
    }
    if (st == FLOE_OK && e != cudaSuccess)
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "CUDA: %s", cudaGetErrorString(e));
    cudaFree(d_ids);
    cudaFree(d_res);
    cudaFree(d_vec);
    return st;
}

/* A growing batch whose fold found the node table full (FULL_IN_NODES)
 * grows it here, between the fold and the root put, and takes the root
 * keys folded so far (rk[0, counter[1])) along into the new generation;
 * the leaders that found no room (full_lists) then fold into the new
 * table, until none is left or the table is as large as it gets (FULL
 * stands).  The root put that follows gives ids of the new generation, so
 * the batch looks none up again.  The growth sizes the node table at this
 * batch's rate so far: the nodes its fold made for the leaders it folded.
 * Leaves the counters as a fold does (h_counter too).  ERR_NO_MEMORY where
 * the limit (gpu_tree_set_limit) does not allow the growth: no root of the
 * batch is put yet, so none of its vectors is stored. */
static floe_status refold_grown(gpu_tree *t, const uint32_t *d_vectors, uint8_t *d_results, uint64_t *d_ids,
                                cudaStream_t s, floe_errinfo *err)
{
    uint32_t *from = full_lists(t), *to = from + t->cap;
    while (t->h_counter[3] & FULL_IN_NODES) {
        const uint64_t folded = t->h_counter[1], nfull = t->h_counter[5], tried = t->h_counter[0];
        /* the batch's rates so far, for the growth's room for the nfull to fold again: its nodes
         * over the vectors it folded whole (the leaders it tried would understate them by the
         * share the full table stopped; grown_sizes takes no more than a vector can make); where
         * none went whole, nothing is known: the most a vector makes, and a root each */
        t->last_n = folded ? folded : tried;
        t->last_made = folded ? t->batch_made : (uint64_t)(tree_most_nodes_a_vector(&t->spec) * (double)tried);
        t->last_put = folded ? folded : tried;
        floe_errinfo gerr;
        const floe_status gst = tree_grow_tables(t, TREE_GROW_NODES, (size_t)nfull, t->rk, folded, &gerr);
        if (gst == FLOE_ERR_TOO_LARGE)
            return FLOE_OK; /* as large as a TREE gets: FULL stands */
        if (gst == FLOE_ERR_NO_MEMORY) /* before the root put: none of the batch is stored */
            return floe_errinfo_set(err, gst, "%s: nothing stored", gerr.msg);
        if (gst != FLOE_OK)
            return floe_errinfo_set(err, FLOE_ERR_FULL, "table %s is full and could not grow: %s", t->spec.name,
                                    gerr.msg);
        /* the list to fold: counter[0] = nfull; made, FULL_IN_* and the next list start again */
        CUDA_TRY(cudaMemcpyAsync(t->counter, t->counter + 5, sizeof *t->counter, cudaMemcpyDeviceToDevice, s), err);
        CUDA_TRY(cudaMemsetAsync(t->counter + 2, 0, 2 * sizeof *t->counter, s), err);
        CUDA_TRY(cudaMemsetAsync(t->counter + 5, 0, sizeof *t->counter, s), err);
        launch_fold<true>(t, d_vectors, from, nfull, d_results, d_ids, to, s);
        CUDA_TRY(cudaGetLastError(), err);
        CUDA_TRY(cudaMemcpyAsync(t->h_counter, t->counter, COUNTERS * sizeof *t->counter, cudaMemcpyDeviceToHost, s),
                 err);
        CUDA_TRY(cudaStreamSynchronize(s), err);
        t->nodes_used += t->h_counter[2];
        t->batch_made += t->h_counter[2];
        t->roots_bound += t->h_counter[1] - folded;
        std::swap(from, to);
    }
    return FLOE_OK;
}

/* Whether answer i of a batch is FULL. */
struct answer_full {
    const uint8_t *results;
    __host__ __device__ bool operator()(uint64_t i) const
    {
        return results[i] == FLOE_FULL;
    }
};

/* The vectors at a list of a batch's indices, packed. */
__global__ void k_gather(const uint32_t *vecs, uint32_t W, const uint64_t *idx, uint64_t n, uint32_t *out)
{
    uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (k >= n)
        return;
    for (uint32_t w = 0; w < W; w++)
        out[k * W + w] = vecs[idx[k] * W + w];
}

/* The answers of those vectors, back in their places. */
__global__ void k_put_back(const uint8_t *res, const uint64_t *idx, uint64_t n, uint8_t *results)
{
    uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (k < n)
        results[idx[k]] = res[k];
}

/* The tables to grow for a batch's FULL answers: those its fold and its
 * root put found no room in (its FULL_IN_* bits, counter[3]). */
static unsigned full_tables(unsigned long long bits)
{
    return ((bits & FULL_IN_NODES) ? TREE_GROW_NODES : 0) | ((bits & FULL_IN_ROOTS) ? TREE_GROW_ROOTS : 0);
}

/* A batch's FULL_IN_* bits and the roots it put (counter[3], counter[4]); waits. */
static floe_status batch_tail(gpu_tree *t, unsigned long long tail[2], cudaStream_t s, floe_errinfo *err)
{
    CUDA_TRY(cudaMemcpyAsync(t->h_counter + 3, t->counter + 3, 2 * sizeof *t->counter, cudaMemcpyDeviceToHost, s), err);
    CUDA_TRY(cudaStreamSynchronize(s), err);
    tail[0] = t->h_counter[3];
    tail[1] = t->h_counter[4];
    return FLOE_OK;
}

/* A batch of whole vectors put (run_batch) and its tail read back.  The
 * fold counts every vector it folded as a root (a bound); the tail says
 * how many the root put INSERTED, so that the bound stays the count where
 * it was one, and the look ahead of the next batch need not count the
 * roots on the device (a sync and a pass over the root table). */
static floe_status put_vectors(gpu_tree *t, const uint32_t *d_vectors, size_t n, uint8_t *d_results, uint64_t *d_ids,
                               unsigned long long tail[2], gpu_stream stream, floe_errinfo *err, bool grow_roots = false)
{
    const uint64_t before = t->roots_bound;
    floe_status st = run_batch<true>(t, d_vectors, n, d_results, d_ids, stream, err, grow_roots);
    if (st == FLOE_OK)
        st = batch_tail(t, tail, (cudaStream_t)stream, err);
    if (st == FLOE_OK)
        t->roots_bound = before + tail[1];
    return st;
}

/* Scratch of a growing batch's retries, made on its first FULL answer:
 * the FULL answers' indices (room for the batch), and their items and
 * answers (room for cap of them: FULL answers are few, a batch many). */
struct retry_scratch {
    uint64_t *idx;
    unsigned long long *count;
    uint32_t *vec;
    uint8_t *res;
    size_t cap;
    void *tmp;
    size_t tmp_bytes;
};

static void retry_free(retry_scratch *r)
{
    cudaFree(r->idx);
    cudaFree(r->count);
    cudaFree(r->vec);
    cudaFree(r->res);
    cudaFree(r->tmp);
}

/* Room in r for k items of item_bytes (0: answers only) and their answers. */
static floe_status retry_room(retry_scratch *r, size_t k, size_t item_bytes, floe_errinfo *err)
{
    if (k <= r->cap && (r->vec || item_bytes == 0))
        return FLOE_OK;
    const size_t cap = k > r->cap ? k : r->cap;
    cudaFree(r->vec);
    cudaFree(r->res);
    r->vec = NULL;
    r->res = NULL;
    r->cap = 0;
    if (item_bytes)
        CUDA_TRY(cudaMalloc(&r->vec, cap * item_bytes), err);
    CUDA_TRY(cudaMalloc(&r->res, cap), err);
    r->cap = cap;
    return FLOE_OK;
}

/* The FULL answers of a batch of n, in batch order: their indices in
 * r->idx, how many in *nf (r->vec, r->res: room for nf, items of item_bytes). */
static floe_status select_full(retry_scratch *r, const uint8_t *d_results, size_t n, size_t item_bytes, size_t *nf,
                               cudaStream_t s, floe_errinfo *err)
{
    if (!r->idx) {
        CUDA_TRY(cudaMalloc(&r->idx, n * 8), err);
        CUDA_TRY(cudaMalloc(&r->count, sizeof *r->count), err);
    }
    thrust::counting_iterator<uint64_t> first(0);
    answer_full pred = {d_results};
    size_t need = 0;
    CUDA_TRY(cub::DeviceSelect::If(NULL, need, first, r->idx, r->count, (int64_t)n, pred, s), err);
    if (need > r->tmp_bytes) {
        cudaFree(r->tmp);
        r->tmp = NULL;
        CUDA_TRY(cudaMalloc(&r->tmp, need), err);
        r->tmp_bytes = need;
    }
    CUDA_TRY(cub::DeviceSelect::If(r->tmp, need, first, r->idx, r->count, (int64_t)n, pred, s), err);
    unsigned long long h = 0;
    CUDA_TRY(cudaMemcpyAsync(&h, r->count, sizeof h, cudaMemcpyDeviceToHost, s), err);
    CUDA_TRY(cudaStreamSynchronize(s), err);
    *nf = (size_t)h;
    return *nf ? retry_room(r, *nf, item_bytes, err) : FLOE_OK;
}

/* The FULL answers of a growing batch of n put again, in batch order,
 * after a growth of the tables `bits` (FULL_IN_*) names, until none is
 * left, or FULL stands where the table is as large as it gets.
 * again(idx, nf, vec, res, &bits) puts the nf items at batch indices idx
 * (vec: room for them) with answers into res and the FULL_IN_* bits of
 * that put; the answers go back in place.  r keeps the scratch. */
template <typename Again>
static floe_status retry_full(gpu_tree *t, unsigned long long bits, uint8_t *d_results, size_t n, size_t item_bytes,
                              retry_scratch *r, cudaStream_t s, floe_errinfo *err, Again again)
{
    floe_status st = FLOE_OK;
    for (size_t nf = 0; st == FLOE_OK && bits;) {
        st = select_full(r, d_results, n, item_bytes, &nf, s, err);
        if (st != FLOE_OK || nf == 0)
            break;
        /* each vector FULL here wants a root at most, and nodes at the batch's rate: room for them all
         * (the rates of the batch count only the roots its full table took) */
        t->last_made = t->last_n ? (uint64_t)((double)t->last_made * (double)nf / (double)t->last_n) : 0;
        t->last_n = t->last_put = nf;
        floe_errinfo gerr;
        floe_status gst = gpu_tree_grow(t, full_tables(bits), nf, &gerr);
        if (gst == FLOE_ERR_TOO_LARGE || gst == FLOE_ERR_NO_MEMORY)
            break; /* as large as a TREE gets, or may get under maxmemory-gpu: FULL stands */
        if (gst != FLOE_OK)
            return floe_errinfo_set(err, FLOE_ERR_FULL, "table %s is full and could not grow: %s", t->spec.name,
                                    gerr.msg);
        st = again(r->idx, nf, r->vec, r->res, &bits);
        if (st == FLOE_OK) {
            k_put_back<<<blocks_for(nf), BLOCK, 0, s>>>(r->res, r->idx, nf, d_results);
            CUDA_TRY(cudaGetLastError(), err);
        }
    }
    return st;
}

/* A growing table's find-or-put: grown first until the batch fits (by
 * gpu_tree_over_fill's estimate), then the batch, whose fold grows a full
 * node table itself (refold_grown); then the FULL answers left (a full
 * root table) put again after a growth, in batch order (first occurrences
 * stay first), until none is left; a batch that saw its table grow there
 * looks its ids up again.  Waits. */
static floe_status insert_growing(gpu_tree *t, const uint32_t *d_vectors, size_t n, uint8_t *d_results, uint64_t *d_ids,
                                  gpu_stream stream, floe_errinfo *err)
{
    cudaStream_t s = (cudaStream_t)stream;
    const uint32_t W = t->g.words;
    floe_status st = FLOE_OK;
    unsigned what = 0;
    for (;;) { /* a batch larger than the room left meets FULL below */
        st = gpu_tree_over_fill(t, n, t->spec.max_fill, &what, err);
        if (st != FLOE_OK || !(what & TREE_GROW_NODES)) /* the root table alone grows beside the fold */
            break;
        floe_errinfo ignored; /* on failure the table stays as it is: FULL answers decide */
        CUDA_TRY(cudaStreamSynchronize(s), err); /* the batch's vectors are written on s; a growth runs on its own */
        if (gpu_tree_grow(t, what, n, &ignored) != FLOE_OK) {
            what = 0;
            break;
        }
    }
    unsigned long long tail[2] = {0, 0};
    if (st == FLOE_OK)
        st = put_vectors(t, d_vectors, n, d_results, d_ids, tail, stream, err, (what & TREE_GROW_ROOTS) != 0);
    if (st == FLOE_OK) { /* the batch's rates, for the look ahead of the next one */
        t->last_n = n;
        t->last_made = t->batch_made;
        t->last_put = tail[1];
    }
    const uint64_t generation = t->generation;
    retry_scratch r = {};
    /* Only a batch whose root put met a full table (or whose node table is
     * as large as it gets) has FULL answers (a later occurrence copies its
     * leader's): the others skip the search. */
    if (st == FLOE_OK)
        st = retry_full(t, tail[0], d_results, n, (size_t)W * 4, &r, s, err,
                        [&](const uint64_t *idx, size_t nf, uint32_t *vec, uint8_t *res, unsigned long long *bits) {
                            k_gather<<<blocks_for(nf), BLOCK, 0, s>>>(d_vectors, W, idx, nf, vec);
                            floe_status rs = put_vectors(t, vec, nf, res, NULL, tail, stream, err);
                            *bits = tail[0];
                            return rs;
                        });
    if (st == FLOE_OK && d_ids && t->generation != generation) {
        /* ids of the new generation; the answers stay those of the puts */
        st = retry_room(&r, n, 0, err);
        if (st == FLOE_OK)
            st = run_batch<false>(t, d_vectors, n, r.res, d_ids, stream, err);
    }
    cudaError_t e = cudaStreamSynchronize(s);
    if (st == FLOE_OK && e != cudaSuccess)
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "a growing batch: %s", cudaGetErrorString(e));
    retry_free(&r);
    return st;
}

/* State i's changes, [first[i], first[i + 1]) of the changes, on its parent's vector. */
__global__ void k_apply_changes(uint32_t *vectors, uint32_t W, const uint32_t *first, const uint8_t *changes,
                                uint64_t n)
{
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    for (uint32_t c = first[i]; c < first[i + 1]; c++) { /* in order: the last value of a word counts */
        const uint8_t *p = changes + (uint64_t)c * FLOE_CHANGE_BYTES;
        vectors[i * W + floe_change_word(p)] = floe_change_value(p);
    }
}

extern "C" floe_status gpu_tree_apply_changes(uint32_t *d_vectors, uint32_t words, const uint32_t *d_first,
                                              const uint8_t *d_changes, size_t n, gpu_stream stream, floe_errinfo *err)
{
    if (n == 0)
        return FLOE_OK;
    k_apply_changes<<<blocks_for(n), BLOCK, 0, (cudaStream_t)stream>>>(d_vectors, words, d_first, d_changes, n);
    CUDA_TRY(cudaGetLastError(), err);
    return FLOE_OK;
}

/* ---- states by parent ------------------------------------------------------------------------------ */

#define DELTA_MAX 8 /* changes of a state folded by their paths; a state of more unfolds and folds whole */

/* The items of one level that lie on a state's changed paths: two per
 * change at most (the children of a node on the path above). */
struct delta_level {
    uint32_t n;
    uint32_t pos[2 * DELTA_MAX], val[2 * DELTA_MAX];
};

__device__ __forceinline__ int delta_at(const delta_level &l, uint32_t pos)
{
    for (uint32_t k = 0; k < l.n; k++)
        if (l.pos[k] == pos)
            return (int)k;
    return -1;
}

__device__ __forceinline__ void delta_add(delta_level &l, uint32_t pos, uint32_t val)
{
    l.pos[l.n] = pos;
    l.val[l.n] = val;
    l.n++;
}

/* The root pair *left, *right of the vector under root pair (*left, *right)
 * with nc <= DELTA_MAX changes, reading and putting only the nodes on the
 * changed words' paths (tables/tree.c's fold_delta): the item of word w at
 * level k is at position w >> k, and an odd level's last item is carried
 * up unchanged.  FOLDED, FLOE_FULL or DAMAGED.  L: levels below the root
 * pair (LC > 0: known at compile time). */
template <int LC>
__device__ uint32_t fold_paths(const floe_tree_geometry &g, uint64_t *nodes, const uint8_t *ch, uint32_t nc,
                               uint32_t *left, uint32_t *right, unsigned *created)
{
    constexpr int LV = LC > 0 ? LC : 8; /* 256 words: 7 levels below the pair */
    uint32_t m[LV + 1], L = 0;          /* items per level; level L holds the root pair */
    for (m[0] = g.words; m[L] > 2; L++)
        m[L + 1] = floe_tree_up(m[L]);
    delta_level lv[LV + 1];
    lv[L].n = 0;
    delta_add(lv[L], 0, *left);
    delta_add(lv[L], 1, *right);
    for (uint32_t k = L; k > 0; k--) { /* down the paths: each node on one gives both its children */
        const uint32_t lo = m[k - 1];
        lv[k - 1].n = 0;
        for (uint32_t c = 0; c < nc; c++) {
            const uint32_t i = floe_change_word(ch + c * FLOE_CHANGE_BYTES) >> k;
            const bool carried = (lo & 1) && i == lo / 2;
            if (delta_at(lv[k - 1], carried ? lo - 1 : 2 * i) >= 0)
                continue; /* another change's path */
            const uint32_t item = lv[k].val[delta_at(lv[k], i)];
            if (carried) {
                delta_add(lv[k - 1], lo - 1, item);
                continue;
            }
            if (item >= g.node_slots)
                return DAMAGED;
            const uint64_t v = __ldcg(nodes + item);
            if (!floe_node_valid(&g, v))
                return DAMAGED;
            const uint64_t node = floe_node_decode(&g, item, v);
            delta_add(lv[k - 1], 2 * i, (uint32_t)node);
            delta_add(lv[k - 1], 2 * i + 1, (uint32_t)(node >> 32));
        }
    }
    for (uint32_t c = 0; c < nc; c++) { /* in order: a word changed twice takes the last value */
        const uint8_t *p = ch + c * FLOE_CHANGE_BYTES;
        lv[0].val[delta_at(lv[0], floe_change_word(p))] = floe_change_value(p);
    }
    for (uint32_t k = 0; k < L; k++) { /* and up again, putting the new nodes */
        uint32_t done = 0;             /* entries of level k + 1 made already */
        for (uint32_t c = 0; c < nc; c++) {
            const uint32_t i = floe_change_word(ch + c * FLOE_CHANGE_BYTES) >> (k + 1);
            const int up = delta_at(lv[k + 1], i);
            if (done & (1u << up))
                continue;
            done |= 1u << up;
            if ((m[k] & 1) && i == m[k] / 2) {
                lv[k + 1].val[up] = lv[k].val[delta_at(lv[k], m[k] - 1)];
                continue;
            }
            const uint64_t node =
                floe_node_pack(lv[k].val[delta_at(lv[k], 2 * i)], lv[k].val[delta_at(lv[k], 2 * i + 1)]);
            if (!node_ref<true>(g, nodes, node, &lv[k + 1].val[up], created))
                return FLOE_FULL;
        }
    }
    *left = lv[L].val[delta_at(lv[L], 0)];
    *right = lv[L].val[delta_at(lv[L], 1)];
    return FOLDED;
}

/* A state of more than DELTA_MAX changes: its parent unfolded, changed and folded whole. */
template <int WC>
__device__ uint32_t fold_changed_whole(const floe_tree_geometry &g, uint64_t *nodes, const uint8_t *ch, uint32_t nc,
                                       uint32_t *left, uint32_t *right, unsigned *created)
{
    constexpr int N = WC > 0 ? WC : FLOE_TREE_MAX_WORDS;
    uint32_t items[N];
    if (!floe_tree_unfold(&g, nodes, *left, *right, items))
        return DAMAGED;
    for (uint32_t c = 0; c < nc; c++) {
        const uint8_t *p = ch + c * FLOE_CHANGE_BYTES;
        items[floe_change_word(p)] = floe_change_value(p);
    }
    const uint32_t r = fold<WC, true>(g, nodes, items, g.words, created);
    *left = items[0];
    *right = items[1];
    return r;
}

/* States by parent: rk[i], the parent's root key, becomes the state's.
 * counter[1] DAMAGED seen, [2] nodes made, [3] FULL_IN_NODES. */
template <int WC, int LC>
__global__ void __launch_bounds__(BLOCK)
    k_fold_delta(const __grid_constant__ floe_tree_geometry g, uint64_t *nodes, uint64_t *rk, const uint32_t *first,
                 const uint8_t *changes, uint64_t n, unsigned long long *counter)
{
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const uint32_t nc = first[i + 1] - first[i];
    const uint8_t *ch = changes + (uint64_t)first[i] * FLOE_CHANGE_BYTES;
    uint32_t left, right;
    floe_tree_root_split(&g, rk[i], &left, &right);
    unsigned created = 0;
    const uint32_t r = nc <= DELTA_MAX ? fold_paths<LC>(g, nodes, ch, nc, &left, &right, &created)
                                       : fold_changed_whole<WC>(g, nodes, ch, nc, &left, &right, &created);
    namespace cg = cooperative_groups;
    cg::coalesced_group here = cg::coalesced_threads();
    const unsigned sum = cg::reduce(here, created, cg::plus<unsigned>());
    if (here.thread_rank() == 0 && sum)
        atomicAdd(counter + 2, (unsigned long long)sum);
    if (r == FOLDED)
        rk[i] = floe_tree_root_key(&g, left, right);
    else if (r == FLOE_FULL)
        atomicOr(counter + 3, FULL_IN_NODES);
    else
        atomicOr(counter + 1, 1ull);
}

/* counter[0]: the first state whose parent names no vector (found[i] 0). */
__global__ void k_first_missing(const uint8_t *found, uint64_t n, unsigned long long *first)
{
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i < n && !found[i])
        atomicMin(first, (unsigned long long)i);
}

/* counter[0] FULL answers, counter[4] INSERTED ones. */
__global__ void k_tally_put(const uint8_t *results, uint64_t n, unsigned long long *counter)
{
    unsigned long long full = 0, ins = 0;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
        full += results[i] == FLOE_FULL;
        ins += results[i] == FLOE_INSERTED;
    }
    for (int o = 16; o > 0; o /= 2) {
        full += __shfl_down_sync(0xFFFFFFFFu, full, o);
        ins += __shfl_down_sync(0xFFFFFFFFu, ins, o);
    }
    if ((threadIdx.x & 31) == 0 && full)
        atomicAdd(counter, full);
    if ((threadIdx.x & 31) == 0 && ins)
        atomicAdd(counter + 4, ins);
}

__global__ void k_gather_keys(const uint64_t *keys, const uint64_t *idx, uint64_t n, uint64_t *out)
{
    const uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (k < n)
        out[k] = keys[idx[k]];
}

/* Levels below the root pair of a vector of w words. */
static uint32_t levels_below_pair(uint32_t w)
{
    uint32_t L = 0;
    for (; w > 2; L++)
        w = floe_tree_up(w);
    return L;
}

/* States by parent the whole way: the parents unfolded, changed, and put
 * as whole vectors (gpu_tree_insert, which grows the table as it must). */
static floe_status insert_whole(gpu_tree *t, const uint64_t *d_parents, const uint32_t *d_first,
                                const uint8_t *d_changes, size_t n, uint8_t *d_results, uint64_t *d_ids,
                                gpu_stream stream, floe_errinfo *err)
{
    const size_t W = t->g.words;
    if (t->whole_cap < n) {
        cudaFree(t->whole);
        t->whole = NULL;
        t->whole_cap = 0;
        CUDA_TRY(cudaMalloc(&t->whole, n * W * 4), err);
        t->whole_cap = n;
    }
    floe_status st = gpu_tree_get(t, d_parents, 0, n, d_results, t->whole, stream, err);
    if (st == FLOE_OK)
        st = gpu_tree_apply_changes(t->whole, (uint32_t)W, d_first, d_changes, n, stream, err);
    if (st == FLOE_OK)
        st = gpu_tree_insert(t, t->whole, n, d_results, d_ids, stream, err);
    return st;
}

/* The FULL and INSERTED answers of n (waits). */
static floe_status tally_put(gpu_tree *t, const uint8_t *d_results, size_t n, unsigned long long *full,
                             unsigned long long *inserted, cudaStream_t s, floe_errinfo *err)
{
    CUDA_TRY(cudaMemsetAsync(t->counter, 0, COUNTERS * sizeof *t->counter, s), err);
    const unsigned blocks = blocks_for(n) < 4096 ? blocks_for(n) : 4096;
    k_tally_put<<<blocks, BLOCK, 0, s>>>(d_results, n, t->counter);
    CUDA_TRY(cudaGetLastError(), err);
    CUDA_TRY(cudaMemcpyAsync(t->h_counter, t->counter, COUNTERS * sizeof *t->counter, cudaMemcpyDeviceToHost, s), err);
    CUDA_TRY(cudaStreamSynchronize(s), err);
    *full = t->h_counter[0];
    *inserted = t->h_counter[4];
    return FLOE_OK;
}

/* The states' root keys (d_keys) into the root table, first occurrences
 * INSERTED; a growing table grows its root table ahead (the keys name
 * nodes, which stay) and after FULL answers, which are put again in order;
 * ids are then looked up again.  Waits. */
static floe_status put_roots(gpu_tree *t, const uint64_t *d_keys, size_t n, uint64_t made, uint8_t *d_results,
                             uint64_t *d_ids, cudaStream_t s, floe_errinfo *err)
{
    const bool grow = t->spec.grow;
    floe_status st = FLOE_OK;
    for (unsigned what = TREE_GROW_ROOTS; grow && (what & TREE_GROW_ROOTS) && st == FLOE_OK;) {
        st = gpu_tree_over_fill(t, n, t->spec.max_fill, &what, err);
        floe_errinfo ignored; /* on failure the table stays as it is: FULL answers decide */
        if (st == FLOE_OK && (what & TREE_GROW_ROOTS) && gpu_tree_grow(t, TREE_GROW_ROOTS, n, &ignored) != FLOE_OK)
            break;
    }
    if (st != FLOE_OK)
        return st;
    const uint64_t generation = t->generation;
    st = gpu_iceberg_put(t->roots, d_keys, n, d_results, d_ids, 0, s, err);
    unsigned long long full = 0, inserted = 0;
    if (st == FLOE_OK)
        st = tally_put(t, d_results, n, &full, &inserted, s, err);
    if (st != FLOE_OK)
        return st;
    t->roots_bound += inserted; /* the roots it put: the bound stays the count where it was */
    t->last_n = n;
    t->last_made = made;
    t->last_put = inserted;
    retry_scratch r = {};
    if (grow)
        st = retry_full(t, full ? FULL_IN_ROOTS : 0, d_results, n, 8, &r, s, err,
                        [&](const uint64_t *idx, size_t nf, uint32_t *vec, uint8_t *res, unsigned long long *bits) {
                            uint64_t *keys = (uint64_t *)vec;
                            k_gather_keys<<<blocks_for(nf), BLOCK, 0, s>>>(d_keys, idx, nf, keys);
                            floe_status rs = gpu_iceberg_put(t->roots, keys, nf, res, NULL, 0, s, err);
                            unsigned long long f = 0, ins = 0;
                            if (rs == FLOE_OK)
                                rs = tally_put(t, res, nf, &f, &ins, s, err);
                            t->last_put += ins;
                            *bits = f ? FULL_IN_ROOTS : 0;
                            return rs;
                        });
    if (st == FLOE_OK && d_ids && t->generation != generation) { /* ids of the new generation */
        st = retry_room(&r, n, 0, err);
        if (st == FLOE_OK)
            st = gpu_iceberg_find(t->roots, d_keys, n, r.res, d_ids, NULL, s, err);
        cudaError_t e = cudaStreamSynchronize(s);
        if (st == FLOE_OK && e != cudaSuccess)
            st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "looking ids up again: %s", cudaGetErrorString(e));
    }
    retry_free(&r);
    return st;
}

extern "C" floe_status gpu_tree_insert_delta(gpu_tree *t, const uint64_t *d_parents, const uint32_t *d_first,
                                             const uint8_t *d_changes, size_t n, uint8_t *d_results, uint64_t *d_ids,
                                             gpu_stream stream, floe_errinfo *err)
{
    if (n == 0)
        return FLOE_OK;
    cudaStream_t s = (cudaStream_t)stream;
    floe_status st = scratch_reserve(t, n, err);
    if (st != FLOE_OK)
        return st;
    /* the parents' root keys into t->rk; every parent must name a vector before anything is put */
    st = gpu_iceberg_keys_at(t->roots, d_parents, 0, n, t->rk, t->res_c, stream, err);
    if (st != FLOE_OK)
        return st;
    CUDA_TRY(cudaMemsetAsync(t->counter, 0, COUNTERS * sizeof *t->counter, s), err);
    CUDA_TRY(cudaMemsetAsync(t->counter, 0xFF, sizeof *t->counter, s), err);
    k_first_missing<<<blocks_for(n), BLOCK, 0, s>>>(t->res_c, n, t->counter);
    CUDA_TRY(cudaMemcpyAsync(t->h_counter, t->counter, sizeof *t->counter, cudaMemcpyDeviceToHost, s), err);
    CUDA_TRY(cudaStreamSynchronize(s), err);
    if (t->h_counter[0] != ~0ull) {
        uint64_t parent = 0;
        CUDA_TRY(cudaMemcpy(&parent, d_parents + t->h_counter[0], sizeof parent, cudaMemcpyDeviceToHost), err);
        return tree_parent_missing(t->spec.name, (size_t)t->h_counter[0], parent, err);
    }
    if (t->spec.grow) { /* a new node table renames every node the root keys name: then whole vectors */
        unsigned what = 0;
        st = gpu_tree_over_fill(t, n, t->spec.max_fill, &what, err);
        if (st != FLOE_OK)
            return st;
        if (what & TREE_GROW_NODES)
            return insert_whole(t, d_parents, d_first, d_changes, n, d_results, d_ids, stream, err);
    }
    /* the changed paths: t->rk becomes the states' root keys */
    CUDA_TRY(cudaMemsetAsync(t->counter, 0, COUNTERS * sizeof *t->counter, s), err);
    const uint32_t L = levels_below_pair(t->g.words);
    if (t->g.words == 16)
        k_fold_delta<16, 3><<<blocks_for(n), BLOCK, 0, s>>>(t->g, t->nodes, t->rk, d_first, d_changes, n, t->counter);
    else if (L <= 3)
        k_fold_delta<0, 3><<<blocks_for(n), BLOCK, 0, s>>>(t->g, t->nodes, t->rk, d_first, d_changes, n, t->counter);
    else
        k_fold_delta<0, 0><<<blocks_for(n), BLOCK, 0, s>>>(t->g, t->nodes, t->rk, d_first, d_changes, n, t->counter);
    CUDA_TRY(cudaGetLastError(), err);
    CUDA_TRY(cudaMemcpyAsync(t->h_counter, t->counter, COUNTERS * sizeof *t->counter, cudaMemcpyDeviceToHost, s), err);
    CUDA_TRY(cudaStreamSynchronize(s), err);
    const uint64_t made = t->h_counter[2];
    t->nodes_used += made;
    if (t->h_counter[1])
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "table %s is damaged: a parent leads to a missing node",
                                t->spec.name);
    if (t->h_counter[3]) /* the node table had room for some paths only: nothing is put yet, so whole vectors
                          * (the nodes made here are found again, or stay as nodes of no vector) */
        return insert_whole(t, d_parents, d_first, d_changes, n, d_results, d_ids, stream, err);
    return put_roots(t, t->rk, n, made, d_results, d_ids, s, err);
}
