/*
 * iceberg_gpu.cu - the GPU engine's kernels for SET tables (see
 * iceberg_gpu.h).  The layout, permutations, row codes and word-at-a-time
 * search are tables/layout.h's; this file only adds device access.
 *
 * One thread per key, no warp cooperation: each thread reads its own
 * primary bucket with 16-byte loads that bypass L1 (__ldcg: other SMs write
 * the table), so a warp has 32 independent bucket reads in flight instead of
 * one key at a time per 32-thread tile (the reference library's shape).  A
 * thread writes with a 64-bit atomicCAS on the word that holds the first
 * empty slot, exactly as the CPU engine does, so the paper's invariant and
 * the exactly-one-INSERTED guarantee carry over unchanged.
 *
 * Buckets of the primary and secondary levels are templated on their row
 * width so that a snapshot lives in registers; the stash (rarely reached)
 * uses the generic layout.h functions.
 *
 * First occurrence wins inside a batch.  A find pass first marks the keys
 * present before the batch; only the others race in the table, where
 * exactly one occurrence of each is INSERTED.  An occurrence that was absent
 * before but comes back PRESENT lost to another occurrence of its own batch:
 * a "loser".  Losers (none in a batch of distinct keys) go into a small
 * scratch map keyed by the slot id all occurrences share (ids are below
 * 2^45, so ~0 marks an empty entry) with the smallest loser index; a winner
 * whose map entry has a smaller index hands INSERTED to it.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iceberg_gpu.h"
#include "layout.h"

#define CUDA_TRY(call, err)                                                                                            \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess)                                                                                         \
            return floe_error_set((err), FLOE_ERR_INTERNAL, "%s: %s", #call, cudaGetErrorString(e_));                  \
    } while (0)

#define BLOCK 256
#define NO_ID (~0ull)

struct gpu_iceberg {
    floe_spec spec;
    floe_geometry g;
    uint32_t addr_bits;
    uint64_t *level[FLOE_LEVELS];
    size_t bytes[FLOE_LEVELS];
    /* fix-up scratch, grown on demand */
    uint64_t *scratch_ids;
    uint32_t *scratch_min;
    unsigned long long *losers;
    uint64_t *tmp_ids;
    size_t scratch_cap, tmp_cap;
};

/* ---- device helpers ----------------------------------------------------------------------------- */

/* A bucket snapshot with 16-byte loads.  Inserts bypass L1 (__ldcg): other
 * SMs change buckets during the kernel, and a CAS retry must see them.  A
 * find kernel writes nothing and runs alone on its table, so it may use the
 * read-only path (__ldg), where the second 16 bytes of a 32-byte sector hit
 * L1 instead of costing another L2 request. */
template <int W, bool cached> __device__ __forceinline__ void load_bucket(const uint64_t *p, uint64_t (&s)[W])
{
#pragma unroll
    for (int i = 0; i < W; i += 2) {
        const ulonglong2 *q = reinterpret_cast<const ulonglong2 *>(p + i);
        ulonglong2 v = cached ? __ldg(q) : __ldcg(q);
        s[i] = v.x;
        s[i + 1] = v.y;
    }
}

/* First slot whose row equals v, or SLOTS. */
template <int W, int RB> __device__ __forceinline__ int first_eq(const uint64_t (&s)[W], uint64_t v)
{
    const uint64_t pattern = v * floe_lanes_lo(RB);
#pragma unroll
    for (int i = 0; i < W; i++) {
        uint64_t z = floe_zero_lanes(s[i] ^ pattern, RB);
        if (z)
            return i * (64 / RB) + (int)(floe_ctz64(z) / RB);
    }
    return W * 64 / RB;
}

template <int W> __device__ __forceinline__ uint64_t word_at(const uint64_t (&s)[W], int w)
{
    uint64_t x = 0;
#pragma unroll
    for (int i = 0; i < W; i++)
        x = i == w ? s[i] : x;
    return x;
}

enum { R_ABSENT = FLOE_ABSENT, R_PRESENT = FLOE_PRESENT, R_INSERTED = FLOE_INSERTED, R_FULL = FLOE_FULL };

/* One candidate bucket (level 0): 0 = found or inserted (res/id set), 1 = full. */
template <int RB, int SLOTS, bool insert>
__device__ __forceinline__ int put_single(uint64_t *bp, uint64_t row, uint64_t first_id, uint8_t *res, uint64_t *id)
{
    constexpr int W = SLOTS * RB / 64;
    uint64_t s[W];
    load_bucket<W, !insert>(bp, s);
    for (;;) {
        int hit = first_eq<W, RB>(s, row);
        if (hit < SLOTS) {
            *res = R_PRESENT;
            *id = first_id + (uint64_t)hit;
            return 0;
        }
        int f = first_eq<W, RB>(s, FLOE_ROW_EMPTY);
        if (f == SLOTS)
            return 1;
        if (!insert) {
            *res = R_ABSENT;
            *id = NO_ID;
            return 0;
        }
        int w = f * RB / 64;
        uint64_t expect = word_at<W>(s, w);
        uint64_t desired = floe_row_put(expect, RB, (uint32_t)f, row);
        uint64_t old = atomicCAS(reinterpret_cast<unsigned long long *>(bp + w), expect, desired);
        if (old == expect) {
            *res = R_INSERTED;
            *id = first_id + (uint64_t)f;
            return 0;
        }
        load_bucket<W, !insert>(bp, s);
    }
}

/* Two candidates (levels 1 and 2 when their rows are RB wide). */
template <int RB, int SLOTS, bool insert>
__device__ __forceinline__ int put_double(uint64_t *b0, uint64_t *b1, uint64_t r0, uint64_t r1, uint64_t id0,
                                          uint64_t id1, uint8_t *res, uint64_t *id)
{
    constexpr int W = SLOTS * RB / 64;
    uint64_t s0[W], s1[W];
    for (;;) {
        load_bucket<W, !insert>(b0, s0);
        int hit = first_eq<W, RB>(s0, r0);
        if (hit < SLOTS) {
            *res = R_PRESENT;
            *id = id0 + (uint64_t)hit;
            return 0;
        }
        load_bucket<W, !insert>(b1, s1);
        hit = first_eq<W, RB>(s1, r1);
        if (hit < SLOTS) {
            *res = R_PRESENT;
            *id = id1 + (uint64_t)hit;
            return 0;
        }
        int f0 = first_eq<W, RB>(s0, FLOE_ROW_EMPTY), f1 = first_eq<W, RB>(s1, FLOE_ROW_EMPTY);
        int c = (int)floe_pick_choice((uint32_t)f0, (uint32_t)f1);
        int f = c ? f1 : f0;
        if (!insert) {
            if (f0 < SLOTS || f1 < SLOTS) { /* a candidate had room: the key never went deeper */
                *res = R_ABSENT;
                *id = NO_ID;
                return 0;
            }
            return 1;
        }
        if (f == SLOTS)
            return 1;
        uint64_t *bp = c ? b1 : b0;
        int w = f * RB / 64;
        uint64_t expect = c ? word_at<W>(s1, w) : word_at<W>(s0, w);
        uint64_t desired = floe_row_put(expect, RB, (uint32_t)f, c ? r1 : r0);
        if (atomicCAS(reinterpret_cast<unsigned long long *>(bp + w), expect, desired) == expect) {
            *res = R_INSERTED;
            *id = (c ? id1 : id0) + (uint64_t)f;
            return 0;
        }
    }
}

template <int RB, bool insert>
__device__ __forceinline__ int level_double(const floe_geometry &g, uint32_t l, uint64_t *base, uint64_t key,
                                            uint8_t *res, uint64_t *id)
{
    const floe_level &lv = g.level[l];
    uint64_t b0, b1, rem0, rem1;
    floe_split(&g, l, 0, key, &b0, &rem0);
    floe_split(&g, l, 1, key, &b1, &rem1);
    return put_double<RB, FLOE_L1_SLOTS, insert>(base + b0 * lv.words, base + b1 * lv.words,
                                                 floe_row_encode(l, rem0, 0), floe_row_encode(l, rem1, 1),
                                                 floe_slot_id(&g, l, b0, 0), floe_slot_id(&g, l, b1, 0), res, id);
}

template <bool insert>
__device__ __forceinline__ int level_double_any(const floe_geometry &g, uint32_t l, uint64_t *base, uint64_t key,
                                                uint8_t *res, uint64_t *id)
{
    switch (g.level[l].row_bits) {
    case 16:
        return level_double<16, insert>(g, l, base, key, res, id);
    case 32:
        return level_double<32, insert>(g, l, base, key, res, id);
    default:
        return level_double<64, insert>(g, l, base, key, res, id);
    }
}

template <int RB0, bool insert>
__device__ __forceinline__ void op_key(const floe_geometry &g, uint64_t *L0, uint64_t *L1, uint64_t *L2, uint64_t key,
                                       uint8_t *res, uint64_t *id)
{
    uint64_t b, rem;
    floe_split(&g, 0, 0, key, &b, &rem);
    if (put_single<RB0, FLOE_L0_SLOTS, insert>(L0 + b * g.level[0].words, floe_row_encode(0, rem, 0),
                                               floe_slot_id(&g, 0, b, 0), res, id) == 0)
        return;
    if (level_double_any<insert>(g, 1, L1, key, res, id) == 0)
        return;
    if (level_double_any<insert>(g, 2, L2, key, res, id) == 0)
        return;
    *res = insert ? R_FULL : R_ABSENT;
    *id = NO_ID;
}

/* MIN_BLOCKS per SM caps the registers so that enough warps are resident to
 * keep many bucket reads in flight (the kernels are latency-bound). */
#define MIN_BLOCKS 3

template <int RB0, bool insert>
__global__ void __launch_bounds__(BLOCK, insert ? 2 : MIN_BLOCKS)
    k_op(const __grid_constant__ floe_geometry g, uint64_t *L0, uint64_t *L1, uint64_t *L2, const uint64_t *keys,
         uint64_t n, uint8_t *results, uint64_t *ids)
{
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    uint8_t res;
    uint64_t id;
    op_key<RB0, insert>(g, L0, L1, L2, __ldg(keys + i), &res, &id);
    results[i] = res;
    if (ids)
        ids[i] = id;
}

/* ---- first occurrence wins: the fix-up ------------------------------------------------------------ */

__device__ __forceinline__ uint64_t scratch_hash(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x7FB5D329728EA185ull;
    x ^= x >> 27;
    return x;
}

#define LOSER 0x80 /* results flag: absent before the batch, PRESENT after */

/* Pass 2: the keys absent before the batch (pass 1 left them ABSENT). */
template <int RB0>
__global__ void __launch_bounds__(BLOCK, 2)
    k_put_absent(const __grid_constant__ floe_geometry g, uint64_t *L0, uint64_t *L1, uint64_t *L2,
                 const uint64_t *keys, uint64_t n, uint8_t *results, uint64_t *ids, unsigned long long *losers)
{
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n || results[i] != R_ABSENT)
        return;
    uint8_t res;
    uint64_t id;
    op_key<RB0, true>(g, L0, L1, L2, __ldg(keys + i), &res, &id);
    if (res == R_PRESENT) {
        res |= LOSER;
        atomicAdd(losers, 1ull);
    }
    results[i] = res;
    ids[i] = id;
}

__device__ __forceinline__ uint64_t scratch_mask(const unsigned long long *losers)
{
    uint64_t cap = 1024;
    while (cap < 2 * *losers)
        cap <<= 1;
    return cap - 1;
}

__global__ void k_clear(uint64_t *skeys, uint32_t *smin, const unsigned long long *losers, uint64_t limit)
{
    uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (j > scratch_mask(losers) || j >= limit)
        return;
    skeys[j] = NO_ID;
    smin[j] = 0xFFFFFFFFu;
}

/* Losers enter the map with their index; each takes its plain answer
 * (PRESENT for a put, ABSENT for an erase). */
__global__ void k_group(const uint64_t *ids, uint8_t *results, uint64_t n, uint64_t *skeys, uint32_t *smin,
                        const unsigned long long *losers, uint8_t lose)
{
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n || !(results[i] & LOSER))
        return;
    const uint64_t mask = scratch_mask(losers);
    uint64_t id = ids[i], h = scratch_hash(id) & mask;
    for (;;) {
        unsigned long long old = atomicCAS(reinterpret_cast<unsigned long long *>(skeys + h), NO_ID, id);
        if (old == NO_ID || old == id) {
            atomicMin(smin + h, (uint32_t)i);
            break;
        }
        h = (h + 1) & mask;
    }
    results[i] = lose;
}

/* A winner (INSERTED, ERASED) with an earlier loser of its key hands its answer over. */
__global__ void k_settle(const uint64_t *ids, uint8_t *results, uint64_t n, const uint64_t *skeys, const uint32_t *smin,
                         const unsigned long long *losers, uint8_t win, uint8_t lose)
{
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n || results[i] != win || *losers == 0)
        return;
    const uint64_t mask = scratch_mask(losers);
    uint64_t id = ids[i], h = scratch_hash(id) & mask;
    for (;;) {
        uint64_t k = skeys[h];
        if (k == NO_ID)
            return; /* no loser of this key */
        if (k == id)
            break;
        h = (h + 1) & mask;
    }
    if (smin[h] < (uint32_t)i) {
        results[i] = lose;
        results[smin[h]] = win;
    }
}

/* Erase pass 2: tombstone the slot pass 1 found.  Keys never move and an
 * erase batch runs alone, so the slot holds the key until some occurrence
 * tombstones it; the CAS loop only retries when a neighbour in the word
 * changed.  An occurrence that finds the tombstone already there lost to a
 * twin in its own batch. */
__global__ void k_erase(const __grid_constant__ floe_geometry g, uint64_t *L0, uint64_t *L1, uint64_t *L2, uint64_t n,
                        uint8_t *results, const uint64_t *ids, unsigned long long *losers)
{
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n || results[i] != R_PRESENT)
        return;
    uint32_t l, slot;
    uint64_t b;
    floe_slot_split(&g, ids[i], &l, &b, &slot);
    const floe_level &lv = g.level[l];
    uint64_t *word = (l == 0 ? L0 : l == 1 ? L1 : L2) + b * lv.words + floe_row_word(lv.row_bits, slot);
    const uint64_t tomb = floe_row_tombstone(lv.row_bits);
    uint64_t w = __ldcg(word);
    for (;;) {
        if (floe_row_get(&w, lv.row_bits, slot % (64 / lv.row_bits)) == tomb) {
            results[i] = R_ABSENT | LOSER;
            atomicAdd(losers, 1ull);
            return;
        }
        uint64_t desired = floe_row_put(w, lv.row_bits, slot % (64 / lv.row_bits), tomb);
        uint64_t old = atomicCAS(reinterpret_cast<unsigned long long *>(word), w, desired);
        if (old == w) {
            results[i] = FLOE_ERASED;
            return;
        }
        w = old;
    }
}

/* ---- host side ------------------------------------------------------------------------------------ */

extern "C" int gpu_available(char *name, size_t len)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
        return 0;
    if (name && len) {
        cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, 0) == cudaSuccess)
            snprintf(name, len, "%s", p.name);
    }
    return 1;
}

extern "C" floe_status gpu_iceberg_create(const floe_spec *spec, uint32_t addr_bits, gpu_iceberg **out, floe_error *err)
{
    floe_status st = floe_spec_validate(spec, err);
    if (st != FLOE_OK)
        return st;
    if (spec->kind != FLOE_KIND_SET)
        return floe_error_set(err, FLOE_ERR_UNSUPPORTED, "the GPU engine has SET tables only so far");
    if (addr_bits < floe_min_addr_bits(spec->key_bits) || addr_bits > floe_max_addr_bits(spec->key_bits))
        return floe_error_set(err, FLOE_ERR_INVALID, "primary address bits must be %u..%u",
                              floe_min_addr_bits(spec->key_bits), floe_max_addr_bits(spec->key_bits));
    gpu_iceberg *t = (gpu_iceberg *)calloc(1, sizeof *t);
    if (!t)
        return floe_error_set(err, FLOE_ERR_INTERNAL, "out of memory");
    t->spec = *spec;
    if (!t->spec.seed)
        t->spec.seed = 0x243F6A8885A308D3ull;
    t->addr_bits = addr_bits;
    floe_geometry_init(&t->g, spec->key_bits, addr_bits, t->spec.seed);
    for (int l = 0; l < FLOE_LEVELS; l++) {
        t->bytes[l] = floe_level_words(&t->g.level[l]) * sizeof(uint64_t);
        cudaError_t e = cudaMalloc(&t->level[l], t->bytes[l]);
        if (e == cudaSuccess)
            e = cudaMemset(t->level[l], 0, t->bytes[l]);
        if (e != cudaSuccess) {
            size_t bytes = t->bytes[l];
            gpu_iceberg_destroy(t);
            return floe_error_set(err, FLOE_ERR_FULL, "cannot allocate %zu bytes of device memory: %s", bytes,
                                  cudaGetErrorString(e));
        }
    }
    *out = t;
    return FLOE_OK;
}

extern "C" void gpu_iceberg_destroy(gpu_iceberg *t)
{
    if (!t)
        return;
    for (int l = 0; l < FLOE_LEVELS; l++)
        cudaFree(t->level[l]);
    cudaFree(t->scratch_ids);
    cudaFree(t->scratch_min);
    cudaFree(t->losers);
    cudaFree(t->tmp_ids);
    free(t);
}

static floe_status launch(gpu_iceberg *t, const uint64_t *d_keys, size_t n, bool insert, uint8_t *d_results,
                          uint64_t *d_ids, cudaStream_t s, floe_error *err)
{
    if (n == 0)
        return FLOE_OK;
    unsigned blocks = (unsigned)((n + BLOCK - 1) / BLOCK);
    uint64_t *L0 = t->level[0], *L1 = t->level[1], *L2 = t->level[2];
#define K_OP(RB, INS) k_op<RB, INS><<<blocks, BLOCK, 0, s>>>(t->g, L0, L1, L2, d_keys, n, d_results, d_ids)
    switch (t->g.level[0].row_bits * 2 + (insert ? 1 : 0)) {
    case 32:
        K_OP(16, false);
        break;
    case 33:
        K_OP(16, true);
        break;
    case 64:
        K_OP(32, false);
        break;
    case 65:
        K_OP(32, true);
        break;
    case 128:
        K_OP(64, false);
        break;
    default:
        K_OP(64, true);
        break;
    }
#undef K_OP
    CUDA_TRY(cudaGetLastError(), err);
    return FLOE_OK;
}

static floe_status grow_scratch(gpu_iceberg *t, size_t n, floe_error *err)
{
    size_t cap = 1024;
    while (cap < 2 * n)
        cap <<= 1;
    if (!t->losers)
        CUDA_TRY(cudaMalloc(&t->losers, sizeof *t->losers), err);
    if (cap > t->scratch_cap) {
        cudaFree(t->scratch_ids);
        cudaFree(t->scratch_min);
        t->scratch_ids = NULL;
        t->scratch_min = NULL;
        t->scratch_cap = 0;
        CUDA_TRY(cudaMalloc(&t->scratch_ids, cap * sizeof(uint64_t)), err);
        CUDA_TRY(cudaMalloc(&t->scratch_min, cap * sizeof(uint32_t)), err);
        t->scratch_cap = cap;
    }
    if (n > t->tmp_cap) {
        cudaFree(t->tmp_ids);
        t->tmp_ids = NULL;
        t->tmp_cap = 0;
        CUDA_TRY(cudaMalloc(&t->tmp_ids, n * sizeof(uint64_t)), err);
        t->tmp_cap = n;
    }
    return FLOE_OK;
}

/* The first-occurrence fix-up over results flagged LOSER (see the top). */
static floe_status settle(gpu_iceberg *t, const uint64_t *ids, uint8_t *d_results, size_t n, uint8_t win, uint8_t lose,
                          cudaStream_t s, floe_error *err)
{
    unsigned blocks = (unsigned)((n + BLOCK - 1) / BLOCK);
    unsigned cblocks = (unsigned)((t->scratch_cap + BLOCK - 1) / BLOCK);
    k_clear<<<cblocks, BLOCK, 0, s>>>(t->scratch_ids, t->scratch_min, t->losers, t->scratch_cap);
    k_group<<<blocks, BLOCK, 0, s>>>(ids, d_results, n, t->scratch_ids, t->scratch_min, t->losers, lose);
    k_settle<<<blocks, BLOCK, 0, s>>>(ids, d_results, n, t->scratch_ids, t->scratch_min, t->losers, win, lose);
    CUDA_TRY(cudaGetLastError(), err);
    return FLOE_OK;
}

extern "C" floe_status gpu_iceberg_put(gpu_iceberg *t, const uint64_t *d_keys, size_t n, uint8_t *d_results,
                                       uint64_t *d_ids, unsigned flags, gpu_stream stream, floe_error *err)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (n >= (1ull << 32))
        return floe_error_set(err, FLOE_ERR_TOO_LARGE, "a GPU batch holds at most 2^32 - 1 keys");
    if (n == 0)
        return FLOE_OK;
    if (flags & GPU_NO_DEDUP)
        return launch(t, d_keys, n, true, d_results, d_ids, s, err);
    floe_status st = grow_scratch(t, n, err);
    if (st != FLOE_OK)
        return st;
    uint64_t *ids = d_ids ? d_ids : t->tmp_ids;
    /* pass 1: which keys were there before the batch */
    st = launch(t, d_keys, n, false, d_results, ids, s, err);
    if (st != FLOE_OK)
        return st;
    CUDA_TRY(cudaMemsetAsync(t->losers, 0, sizeof *t->losers, s), err);
    unsigned blocks = (unsigned)((n + BLOCK - 1) / BLOCK);
    uint64_t *L0 = t->level[0], *L1 = t->level[1], *L2 = t->level[2];
    switch (t->g.level[0].row_bits) {
    case 16:
        k_put_absent<16><<<blocks, BLOCK, 0, s>>>(t->g, L0, L1, L2, d_keys, n, d_results, ids, t->losers);
        break;
    case 32:
        k_put_absent<32><<<blocks, BLOCK, 0, s>>>(t->g, L0, L1, L2, d_keys, n, d_results, ids, t->losers);
        break;
    default:
        k_put_absent<64><<<blocks, BLOCK, 0, s>>>(t->g, L0, L1, L2, d_keys, n, d_results, ids, t->losers);
        break;
    }
    return settle(t, ids, d_results, n, R_INSERTED, R_PRESENT, s, err);
}

extern "C" floe_status gpu_iceberg_erase(gpu_iceberg *t, const uint64_t *d_keys, size_t n, uint8_t *d_results,
                                         gpu_stream stream, floe_error *err)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (n >= (1ull << 32))
        return floe_error_set(err, FLOE_ERR_TOO_LARGE, "a GPU batch holds at most 2^32 - 1 keys");
    if (n == 0)
        return FLOE_OK;
    floe_status st = grow_scratch(t, n, err);
    if (st == FLOE_OK)
        st = launch(t, d_keys, n, false, d_results, t->tmp_ids, s, err); /* where each key lives */
    if (st != FLOE_OK)
        return st;
    CUDA_TRY(cudaMemsetAsync(t->losers, 0, sizeof *t->losers, s), err);
    unsigned blocks = (unsigned)((n + BLOCK - 1) / BLOCK);
    k_erase<<<blocks, BLOCK, 0, s>>>(t->g, t->level[0], t->level[1], t->level[2], n, d_results, t->tmp_ids, t->losers);
    return settle(t, t->tmp_ids, d_results, n, FLOE_ERASED, R_ABSENT, s, err);
}

extern "C" floe_status gpu_iceberg_find(gpu_iceberg *t, const uint64_t *d_keys, size_t n, uint8_t *d_results,
                                        uint64_t *d_ids, gpu_stream stream, floe_error *err)
{
    return launch(t, d_keys, n, false, d_results, d_ids, (cudaStream_t)stream, err);
}

enum host_kind { HOST_PUT, HOST_FIND, HOST_ERASE };

/* Stages host keys on the device, runs one operation, copies the answers back, waits. */
static floe_status host_op(gpu_iceberg *t, host_kind op, const uint64_t *keys, size_t n, uint8_t *results,
                           uint64_t *ids, floe_error *err)
{
    uint64_t *dk = NULL, *di = NULL;
    uint8_t *dr = NULL;
    floe_status st = FLOE_OK;
    if (n == 0)
        return FLOE_OK;
    cudaError_t e = cudaMalloc(&dk, n * 8);
    if (e == cudaSuccess)
        e = cudaMalloc(&dr, n);
    if (e == cudaSuccess && ids)
        e = cudaMalloc(&di, n * 8);
    if (e == cudaSuccess)
        e = cudaMemcpy(dk, keys, n * 8, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
        st = floe_error_set(err, FLOE_ERR_INTERNAL, "staging a batch: %s", cudaGetErrorString(e));
    } else {
        st = op == HOST_PUT    ? gpu_iceberg_put(t, dk, n, dr, di, 0, 0, err)
             : op == HOST_FIND ? gpu_iceberg_find(t, dk, n, dr, di, 0, err)
                               : gpu_iceberg_erase(t, dk, n, dr, 0, err);
        if (st == FLOE_OK) {
            e = cudaMemcpy(results, dr, n, cudaMemcpyDeviceToHost);
            if (e == cudaSuccess && ids)
                e = cudaMemcpy(ids, di, n * 8, cudaMemcpyDeviceToHost);
            if (e != cudaSuccess)
                st = floe_error_set(err, FLOE_ERR_INTERNAL, "batch: %s", cudaGetErrorString(e));
        }
    }
    cudaFree(dk);
    cudaFree(dr);
    cudaFree(di);
    return st;
}

extern "C" floe_status gpu_iceberg_put_host(gpu_iceberg *t, const uint64_t *keys, size_t n, uint8_t *results,
                                            uint64_t *ids, floe_error *err)
{
    return host_op(t, HOST_PUT, keys, n, results, ids, err);
}

extern "C" floe_status gpu_iceberg_erase_host(gpu_iceberg *t, const uint64_t *keys, size_t n, uint8_t *results,
                                              floe_error *err)
{
    return host_op(t, HOST_ERASE, keys, n, results, NULL, err);
}

extern "C" floe_status gpu_iceberg_find_host(gpu_iceberg *t, const uint64_t *keys, size_t n, uint8_t *results,
                                             uint64_t *ids, floe_error *err)
{
    return host_op(t, HOST_FIND, keys, n, results, ids, err);
}

__global__ void k_count(const uint64_t *words, uint64_t nwords, uint32_t row_bits, unsigned long long *out)
{
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= nwords)
        return;
    uint64_t w = words[i];
    unsigned c = 0;
    for (uint32_t r = 0; r < 64 / row_bits; r++)
        c += ((w >> (r * row_bits)) & floe_row_mask(row_bits)) != 0;
    if (c)
        atomicAdd(out, (unsigned long long)c);
}

extern "C" floe_status gpu_iceberg_used(gpu_iceberg *t, uint64_t used[3], floe_error *err)
{
    unsigned long long *d;
    CUDA_TRY(cudaMalloc(&d, 3 * sizeof *d), err);
    CUDA_TRY(cudaMemset(d, 0, 3 * sizeof *d), err);
    for (int l = 0; l < FLOE_LEVELS; l++) {
        uint64_t nw = floe_level_words(&t->g.level[l]);
        k_count<<<(unsigned)((nw + BLOCK - 1) / BLOCK), BLOCK>>>(t->level[l], nw, t->g.level[l].row_bits, d + l);
    }
    unsigned long long h[3];
    cudaError_t e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    cudaFree(d);
    if (e != cudaSuccess)
        return floe_error_set(err, FLOE_ERR_INTERNAL, "counting rows: %s", cudaGetErrorString(e));
    for (int l = 0; l < 3; l++)
        used[l] = h[l];
    return FLOE_OK;
}

extern "C" uint64_t gpu_iceberg_memory(const gpu_iceberg *t)
{
    return t->bytes[0] + t->bytes[1] + t->bytes[2];
}

extern "C" uint64_t gpu_iceberg_slots(const gpu_iceberg *t)
{
    return t->g.total_slots;
}
