/*
 * iceberg_gpu.cu - the GPU engine's kernels for SET tables (see
 * iceberg_gpu.h).  The layout, permutations, row codes and word-at-a-time
 * search are tables/layout.h's; this file only adds device access.
 *
 * One thread per key, no warp cooperation: each thread reads its own
 * primary bucket a 32-byte sector at a time, with 16-byte loads (load_path
 * says which caches each may use), so a warp has 32 independent bucket
 * reads in flight instead of one key at a time per 32-thread tile (the
 * reference library's shape), and stops at the first sector that decides.  A
 * thread writes with a 64-bit atomicCAS on the word that holds the first
 * empty slot, exactly as the CPU engine does, so the paper's invariant and
 * the exactly-one-INSERTED guarantee carry over unchanged.
 *
 * Buckets of the primary and secondary levels are templated on their row
 * width so that a snapshot lives in registers; the stash (rarely reached)
 * uses the generic layout.h functions.
 *
 * First occurrence wins inside a batch.  A SET put makes one pass over the
 * table (k_put_pass), where exactly one occurrence of each new key is
 * INSERTED and the others come back PRESENT: "losers" of their own batch,
 * which cannot tell themselves by what they read from a key present before
 * the batch.  So, after the pass and only if some key came back PRESENT,
 * every INSERTED key sets its slot's bit in a per-batch filter (a few bits
 * a key); an occurrence that found its key PRESENT in a slot whose bit is
 * set may be a loser, and enters a scratch map keyed by the slot id all
 * occurrences share, with the smallest index.  A winner whose map entry has
 * a smaller index hands INSERTED to it.  A batch thus reads each bucket
 * once, and one of distinct new keys ends after its pass.  Map entries
 * carry the batch's tag above the id, so that an entry of an earlier batch
 * reads as empty: only the filters are cleared, by the put itself.  An
 * erase finds each key, then tombstones it: an occurrence that finds the
 * tombstone already there lost to a twin, and the same map hands ERASED to
 * the first occurrence.
 */
#include <assert.h>
#include <cub/block/block_reduce.cuh>
#include <cub/device/device_select.cuh>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <thrust/iterator/counting_iterator.h>
#include <type_traits>

#include "append.h"
#include "cuda_try.h"
#include "dedup.h"
#include "iceberg.h"
#include "iceberg_gpu.h"
#include "layout.h"

#define BLOCK 256

/* A put runs its batch in pieces of at most this many keys, one after the
 * other in the stream.  A key of a later piece finds its twin's slot
 * PRESENT, as the first occurrence must win, so only twins inside one
 * piece need the fix-up; and a piece's filters (9 bits a key: 18 MB) stay
 * in L2 while the table's traffic streams through it, and its losers' map
 * is a quarter of a 2^26-key batch's (docs/PERFORMANCE.md, K1). */
#define PUT_PIECE_KEYS ((size_t)1 << 24)

struct gpu_iceberg {
    floe_spec spec;
    floe_geometry g;
    uint32_t addr_bits, three; /* 2^addr_bits primary buckets, 1.5 times that with three */
    uint64_t *level[FLOE_LEVELS];
    size_t bytes[FLOE_LEVELS];
    void *values; /* MAP: vb bytes per slot */
    size_t values_bytes;
    uint32_t vb;
    unsigned *halt; /* grow tables, one word a lane: the sequence number of the batch that met FULL, 0: none */
    unsigned lane;  /* whose word the next launches read and set (gpu_iceberg_lane) */
    unsigned seq;   /* batches launched, numbered from 1 */
    /* scan scratch */
    uint64_t *scan_pos;
    unsigned long long *scan_count;
    void *scan_tmp;
    size_t scan_tmp_bytes;
    /* fix-up scratch, grown on demand; its entries carry the tag of the
     * batch that wrote them */
    ulonglong2 *scratch_map; /* the losers' map (struct losers) */
    unsigned *batch_tags; /* TAGGED words: the tag of the last batch with a loser, with a key PRESENT */
    unsigned tag;         /* the current batch's, 1 .. TAG_MAX */
    uint64_t *tmp_ids;
    size_t scratch_cap, tmp_cap;
    /* a batch's id filters (claimed, lost), cleared before each batch */
    uint32_t *filter;
    size_t filter_words;
    bool pdl;     /* the device launches kernels programmatically after the one before (9.0 and up) */
    size_t piece; /* the most keys a put runs at once (gpu_iceberg_put) */
};

/* The halt word of the lane the next launches run for (NULL: the table does not grow). */
static unsigned *lane_halt(const gpu_iceberg *t)
{
    return t->halt ? t->halt + t->lane : NULL;
}

extern "C" void gpu_iceberg_lane(gpu_iceberg *t, unsigned lane)
{
    assert(lane < GPU_LANES_MAX);
    t->lane = lane;
}

/* ---- device helpers ----------------------------------------------------------------------------- */

/* A bucket snapshot with 16-byte loads, by one of three paths:
 *   READ_ONLY (__ldg): a find kernel writes nothing and runs alone on its
 *     table; the second 16 bytes of a 32-byte sector hit L1 instead of
 *     costing another L2 request;
 *   L2_ONLY (__ldcg): inserts change buckets that other SMs read, and a CAS
 *     retry must see them;
 *   L1_FIRST (__ldca): a SET insert's first snapshot of each sector may be
 *     an old one from L1, because during a put slots only go from EMPTY to
 *     a key: a key seen is there, a full sector stays full with the same
 *     keys, and a claim of the first EMPTY slot seen succeeds only if its
 *     word is still as seen, so that the slot and all after it are EMPTY. */
enum load_path { READ_ONLY, L2_ONLY, L1_FIRST };

template <int W, load_path P> __device__ __forceinline__ void load_bucket(const uint64_t *p, uint64_t (&s)[W])
{
#pragma unroll
    for (int i = 0; i < W; i += 2) {
        const ulonglong2 *q = reinterpret_cast<const ulonglong2 *>(p + i);
        ulonglong2 v = P == READ_ONLY ? __ldg(q) : P == L1_FIRST ? __ldca(q) : __ldcg(q);
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

/* A table's shape, one compile-time int S of the kernels that put and find:
 * its level-0 row width (16, 32 or 64 bits), plus 1 where its levels have
 * 1.5 x 2^a buckets (layout.h; a TREE's root table), whose split has a
 * path that a SET or MAP table's kernels then do not carry. */
#define SHAPE_ROW_BITS(S) ((S) & ~1)
#define SHAPE_THREE(S)    (((S) & 1) != 0)

__device__ __forceinline__ uint64_t scratch_hash(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x7FB5D329728EA185ull;
    x ^= x >> 27;
    return x;
}

/* A batch's filter of slot ids (a blocked Bloom filter), cleared before the
 * batch: an id's bits all set say "maybe", any clear says "no". */
struct id_bits {
    uint32_t *bits;
    uint64_t mask;
};

/* Four bits of one word (fewer where two coincide), all set for an id: a
 * test costs one read, and a false "maybe" needs all four. */
__device__ __forceinline__ uint32_t bits_of(uint64_t h)
{
    return 1u << ((h >> 35) & 31) | 1u << ((h >> 40) & 31) | 1u << ((h >> 45) & 31) | 1u << ((h >> 50) & 31);
}

/* Where id's bits are (*word) and which they are (the mask returned): a
 * test reads the word and compares (fix_maybe, several ids at once). */
__device__ __forceinline__ uint32_t bits_at(const id_bits &f, uint64_t id, uint32_t **word)
{
    const uint64_t h = scratch_hash(id);
    *word = f.bits + ((h & f.mask) >> 5);
    return bits_of(h);
}

__device__ __forceinline__ void bit_set(const id_bits &f, uint64_t id)
{
    uint32_t *w;
    const uint32_t m = bits_at(f, id, &w);
    atomicOr(w, m);
}

/* Finds and puts look for a row a 32-byte sector at a time: slots fill in
 * order (an erase leaves a tombstone), so the sectors after one with an
 * EMPTY slot are EMPTY too, and are not read (at fill 0.9 half the hits
 * are in a primary bucket's first sector; below 0.5 most puts claim a slot
 * in it).  The slot of row, or W * 64 / RB; *empty: the bucket's first
 * EMPTY slot (W * 64 / RB: none), *word: the word that holds it, as read.
 * A put's later snapshots (again = true) go to L2 whatever the path. */
template <int W, int RB, load_path P>
__device__ __forceinline__ int scan_bucket(const uint64_t *bp, uint64_t row, bool again, int *empty, uint64_t *word)
{
    constexpr int H = 4, PER = H * 64 / RB; /* words, slots a sector */
#pragma unroll
    for (int h = 0; h < W; h += H) {
        uint64_t s[H];
        if (P == L1_FIRST && again)
            load_bucket<H, L2_ONLY>(bp + h, s);
        else
            load_bucket<H, P>(bp + h, s);
        const int hit = first_eq<H, RB>(s, row);
        if (hit < PER) {
            *empty = W * 64 / RB;
            return h * 64 / RB + hit;
        }
        const int e = first_eq<H, RB>(s, FLOE_ROW_EMPTY);
        if (e < PER) {
            *empty = h * 64 / RB + e;
            *word = word_at<H>(s, e * RB / 64);
            return W * 64 / RB;
        }
    }
    *empty = W * 64 / RB;
    return W * 64 / RB;
}

/* A find's look at one bucket: the slot of row, or W * 64 / RB; *keys: the
 * bucket's first EMPTY slot (W * 64 / RB: none), the keys it holds. */
template <int W, int RB> __device__ __forceinline__ int find_row(const uint64_t *bp, uint64_t row, int *keys)
{
    uint64_t word;
    return scan_bucket<W, RB, READ_ONLY>(bp, row, false, keys, &word);
}

/* One candidate bucket (level 0): 0 = found or inserted (res/id set), 1 = full.
 * A MAP insert claims its slot with the BUSY row and publishes the key's row
 * (*put) once the value is written (publish()). */
template <int RB, int SLOTS, bool insert, bool map = false>
__device__ __forceinline__ int put_single(uint64_t *bp, uint64_t row, uint64_t first_id, uint8_t *res, uint64_t *id,
                                          uint64_t *put)
{
    constexpr int W = SLOTS * RB / 64;
    if constexpr (!insert) {
        int keys;
        const int hit = find_row<W, RB>(bp, row, &keys);
        if (hit < SLOTS) {
            *res = R_PRESENT;
            *id = first_id + (uint64_t)hit;
            return 0;
        }
        if (keys == SLOTS)
            return 1;
        *res = R_ABSENT;
        *id = FLOE_NO_ID;
        return 0;
    } else {
        constexpr load_path P = map ? L2_ONLY : L1_FIRST;
        for (bool again = false;; again = true) {
            int f;
            uint64_t expect;
            const int hit = scan_bucket<W, RB, P>(bp, row, again, &f, &expect);
            if (hit < SLOTS) {
                *res = R_PRESENT;
                *id = first_id + (uint64_t)hit;
                return 0;
            }
            if (f == SLOTS)
                return 1;
            const int w = f * RB / 64;
            const uint64_t desired = floe_row_put(expect, RB, (uint32_t)f, map ? floe_row_busy(RB) : row);
            if (atomicCAS(reinterpret_cast<unsigned long long *>(bp + w), expect, desired) == expect) {
                *res = R_INSERTED;
                *id = first_id + (uint64_t)f;
                *put = row;
                return 0;
            }
        }
    }
}

/* Two candidates (levels 1 and 2 when their rows are RB wide), the second
 * read only where the first holds g.first_fill keys or more (FLOE_FIRST_FILL). */
template <int RB, int SLOTS, bool insert, bool map>
__device__ __forceinline__ int put_double(const floe_geometry &g, uint64_t *b0, uint64_t *b1, uint64_t r0, uint64_t r1,
                                          uint64_t id0, uint64_t id1, uint8_t *res, uint64_t *id, uint64_t *put)
{
    constexpr int W = SLOTS * RB / 64;
    if constexpr (!insert) {
        int n0, n1 = SLOTS;
        int hit = find_row<W, RB>(b0, r0, &n0);
        if (hit < SLOTS) {
            *res = R_PRESENT;
            *id = id0 + (uint64_t)hit;
            return 0;
        }
        if (floe_second_may_hold(&g, (uint32_t)n0)) {
            hit = find_row<W, RB>(b1, r1, &n1);
            if (hit < SLOTS) {
                *res = R_PRESENT;
                *id = id1 + (uint64_t)hit;
                return 0;
            }
        }
        if (n0 < SLOTS || n1 < SLOTS) { /* a candidate had room: the key never went deeper */
            *res = R_ABSENT;
            *id = FLOE_NO_ID;
            return 0;
        }
        return 1;
    } else {
        for (;;) {
            int f0, f1 = SLOTS;
            uint64_t e0, e1 = 0;
            int hit = scan_bucket<W, RB, L2_ONLY>(b0, r0, true, &f0, &e0);
            if (hit < SLOTS) {
                *res = R_PRESENT;
                *id = id0 + (uint64_t)hit;
                return 0;
            }
            if (floe_second_may_hold(&g, (uint32_t)f0)) {
                hit = scan_bucket<W, RB, L2_ONLY>(b1, r1, true, &f1, &e1);
                if (hit < SLOTS) {
                    *res = R_PRESENT;
                    *id = id1 + (uint64_t)hit;
                    return 0;
                }
            }
            const int c = (int)floe_pick_choice(&g, (uint32_t)f0, (uint32_t)f1); /* f1 = SLOTS: unread */
            int f = c ? f1 : f0;
            if (f == SLOTS)
                return 1;
            uint64_t *bp = c ? b1 : b0;
            int w = f * RB / 64;
            uint64_t expect = c ? e1 : e0;
            uint64_t desired = floe_row_put(expect, RB, (uint32_t)f, map ? floe_row_busy(RB) : (c ? r1 : r0));
            if (atomicCAS(reinterpret_cast<unsigned long long *>(bp + w), expect, desired) == expect) {
                *res = R_INSERTED;
                *id = (c ? id1 : id0) + (uint64_t)f;
                *put = c ? r1 : r0;
                return 0;
            }
        }
    }
}

template <int RB, bool insert, bool map, bool three>
__device__ __forceinline__ int level_double(const floe_geometry &g, uint32_t l, uint64_t *base, uint64_t key,
                                            uint8_t *res, uint64_t *id, uint64_t *put)
{
    const floe_level &lv = g.level[l];
    uint64_t b0, b1, rem0, rem1;
    floe_split_as(&g, l, 0, key, &b0, &rem0, three && lv.three);
    floe_split_as(&g, l, 1, key, &b1, &rem1, three && lv.three);
    return put_double<RB, FLOE_L1_SLOTS, insert, map>(
        g, base + b0 * lv.words, base + b1 * lv.words, floe_row_encode(l, rem0, 0), floe_row_encode(l, rem1, 1),
        floe_slot_id(&g, l, b0, 0), floe_slot_id(&g, l, b1, 0), res, id, put);
}

template <bool insert, bool map, bool three>
__device__ __forceinline__ int level_double_any(const floe_geometry &g, uint32_t l, uint64_t *base, uint64_t key,
                                                uint8_t *res, uint64_t *id, uint64_t *put)
{
    switch (g.level[l].row_bits) {
    case 16:
        return level_double<16, insert, map, three>(g, l, base, key, res, id, put);
    case 32:
        return level_double<32, insert, map, three>(g, l, base, key, res, id, put);
    default:
        return level_double<64, insert, map, three>(g, l, base, key, res, id, put);
    }
}

/* Find (insert = false) or find-or-put of one key; *put gets the row an
 * INSERTED key was given.  S is the table's shape (with_row_bits). */
template <int S, bool insert, bool map = false>
__device__ __forceinline__ void op_key(const floe_geometry &g, uint64_t *L0, uint64_t *L1, uint64_t *L2, uint64_t key,
                                       uint8_t *res, uint64_t *id, uint64_t *put)
{
    uint64_t b, rem;
    floe_split_as(&g, 0, 0, key, &b, &rem, SHAPE_THREE(S));
    if (put_single<SHAPE_ROW_BITS(S), FLOE_L0_SLOTS, insert, map>(L0 + b * g.level[0].words, floe_row_encode(0, rem, 0),
                                                                  floe_slot_id(&g, 0, b, 0), res, id, put) == 0)
        return;
    if (level_double_any<insert, map, SHAPE_THREE(S)>(g, 1, L1, key, res, id, put) == 0)
        return;
    if (level_double_any<insert, map, SHAPE_THREE(S)>(g, 2, L2, key, res, id, put) == 0)
        return;
    *res = insert ? R_FULL : R_ABSENT;
    *id = FLOE_NO_ID;
}

/* The 64-bit word that holds slot id, and the slot's shift inside it. */
__device__ __forceinline__ uint64_t *slot_word(const floe_geometry &g, uint64_t *L0, uint64_t *L1, uint64_t *L2,
                                               uint64_t id, uint32_t *shift, uint32_t *row_bits)
{
    uint32_t l, slot;
    uint64_t b;
    floe_slot_split(&g, id, &l, &b, &slot);
    const floe_level &lv = g.level[l];
    *shift = (slot * lv.row_bits) & 63;
    *row_bits = lv.row_bits;
    return (l == 0 ? L0 : l == 1 ? L1 : L2) + b * lv.words + floe_row_word(lv.row_bits, slot);
}

/* MAP values: 4 or 8 bytes per slot, indexed by slot id. */
__device__ __forceinline__ uint64_t value_get(const void *vals, uint32_t vb, uint64_t i)
{
    return vb == 4 ? (uint64_t)__ldcg(reinterpret_cast<const unsigned int *>(vals) + i)
                   : (uint64_t)__ldcg(reinterpret_cast<const unsigned long long *>(vals) + i);
}

__device__ __forceinline__ void value_set(void *vals, uint32_t vb, uint64_t i, uint64_t v)
{
    if (vb == 4)
        reinterpret_cast<uint32_t *>(vals)[i] = (uint32_t)v;
    else
        reinterpret_cast<uint64_t *>(vals)[i] = v;
}

__device__ __forceinline__ uint64_t value_swap(void *vals, uint32_t vb, uint64_t i, uint64_t v)
{
    if (vb == 4)
        return atomicExch(reinterpret_cast<unsigned int *>(vals) + i, (unsigned int)v);
    return atomicExch(reinterpret_cast<unsigned long long *>(vals) + i, (unsigned long long)v);
}

/* The value before; it wraps at vb bytes. */
__device__ __forceinline__ uint64_t value_add(void *vals, uint32_t vb, uint64_t i, uint64_t v)
{
    if (vb == 4)
        return atomicAdd(reinterpret_cast<unsigned int *>(vals) + i, (unsigned int)v);
    return atomicAdd(reinterpret_cast<unsigned long long *>(vals) + i, (unsigned long long)v);
}

/* A MAP insert's slot holds BUSY until the value is written; only its
 * claimant changes a BUSY slot, so an xor of the difference publishes the
 * key's row without touching the word's other slots. */
__device__ __forceinline__ void publish(const floe_geometry &g, uint64_t *L0, uint64_t *L1, uint64_t *L2, uint64_t id,
                                        uint64_t row)
{
    uint32_t shift, rb;
    uint64_t *w = slot_word(g, L0, L1, L2, id, &shift, &rb);
    __threadfence(); /* the value before the row */
    atomicXor(reinterpret_cast<unsigned long long *>(w), (unsigned long long)((floe_row_busy(rb) ^ row) << shift));
}

/* Blocks per SM that the launch bounds ask for: they cap the registers so
 * that enough warps are resident to keep many bucket reads in flight (the
 * kernels are latency-bound).  Finds fit 6 in 40 registers without
 * spilling.  SET puts, which also read a sector at a time now, need 48
 * and no spills (5 blocks fit); a cap of 4 instead of 3 measured the same. */
#define FIND_BLOCKS 6
#define PUT_BLOCKS 3

#define SKIPPED 0x40 /* results: the table was halted (see gpu_iceberg_clear_halt) */

/* A batch is skipped if an EARLIER batch met FULL: the batch that sets the
 * flag (its own sequence number) keeps running in every thread. */
__device__ __forceinline__ bool halted(const unsigned *halt, unsigned seq)
{
    if (!halt)
        return false;
    unsigned h = *(volatile const unsigned *)halt;
    return h != 0 && h != seq;
}

/* halted() once a block, for all its threads (every one calls it, before
 * any returns): one read of the flag a block, not one a warp to one line. */
__device__ __forceinline__ bool block_halted(const unsigned *halt, unsigned seq)
{
    __shared__ bool skip;
    if (threadIdx.x == 0)
        skip = halted(halt, seq);
    __syncthreads();
    return skip;
}

__device__ __forceinline__ void halt_on_full(unsigned *halt, unsigned seq)
{
    if (halt)
        atomicCAS(halt, 0u, seq);
}

template <int SHAPE, bool insert>
__global__ void __launch_bounds__(BLOCK, insert ? PUT_BLOCKS : FIND_BLOCKS)
    k_op(const __grid_constant__ floe_geometry g, uint64_t *L0, uint64_t *L1, uint64_t *L2, const uint64_t *keys,
         uint64_t n, uint8_t *results, uint64_t *ids, unsigned *halt, unsigned seq, const void *vals, uint32_t vb,
         void *vals_out)
{
    const bool skip = block_halted(halt, seq);
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    if (skip) {
        results[i] = SKIPPED;
        return;
    }
    uint8_t res;
    uint64_t id, put;
    op_key<SHAPE, insert>(g, L0, L1, L2, __ldg(keys + i), &res, &id, &put);
    if (insert && res == R_FULL)
        halt_on_full(halt, seq);
    results[i] = res;
    if (ids)
        ids[i] = id;
    if (vals_out) /* a MAP find: values were published by earlier kernels */
        value_set(vals_out, vb, i, res == R_PRESENT ? value_get(vals, vb, id) : 0);
}

/* MAP find-or-put of distinct keys (the host deduplicated the batch): a new
 * key's slot is claimed BUSY, its value written, then its row published; a
 * PRESENT key's value comes back (mode, dedup.h: kept, swapped for the new
 * one, or added to; an add's new key answers 0, the value before it). */
template <int SHAPE>
__global__ void __launch_bounds__(BLOCK, 2)
    k_put_map(const __grid_constant__ floe_geometry g, uint64_t *L0, uint64_t *L1, uint64_t *L2, const uint64_t *keys,
              const void *in, uint64_t n, uint8_t *results, uint64_t *ids, unsigned *halt, unsigned seq, void *vals,
              uint32_t vb, int mode, void *out)
{
    const bool skip = block_halted(halt, seq);
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    if (skip) {
        results[i] = SKIPPED;
        return;
    }
    uint8_t res;
    uint64_t id, put;
    op_key<SHAPE, true, true>(g, L0, L1, L2, __ldg(keys + i), &res, &id, &put);
    uint64_t v =
        vb == 4 ? (uint64_t) reinterpret_cast<const uint32_t *>(in)[i] : reinterpret_cast<const uint64_t *>(in)[i];
    uint64_t answer = 0;
    if (res == R_INSERTED) {
        value_set(vals, vb, id, v);
        publish(g, L0, L1, L2, id, put);
        answer = mode == FLOE_VALUES_ADD ? 0 : v;
    } else if (res == R_PRESENT) {
        answer = mode == FLOE_VALUES_OVERWRITE ? value_swap(vals, vb, id, v)
                 : mode == FLOE_VALUES_ADD     ? value_add(vals, vb, id, v)
                                               : value_get(vals, vb, id);
    } else {
        halt_on_full(halt, seq);
    }
    results[i] = res;
    if (ids)
        ids[i] = id;
    if (out)
        value_set(out, vb, i, answer);
}

/* ---- first occurrence wins: the fix-up ------------------------------------------------------------ */

/* The losers' map entries: the batch's tag in the bits above the id (.x)
 * and above the index (.y).  Tag 0 is never used: zeroed memory is empty. */
#define TAG_SHIFT 46
#define TAG_MAX   ((1u << (64 - TAG_SHIFT)) - 1)
static_assert((uint64_t)FLOE_L0_SLOTS << FLOE_MAX_ADDR_BITS <= 1ull << (TAG_SHIFT - 1),
              "ids (fewer than twice the primary slots) stay below the tag");

/* What a batch's kernels tell the next ones: its tag written in these
 * words says "some key lost to a twin" or "some key was PRESENT". */
enum { TAGGED_LOSER, TAGGED_PRESENT, TAGGED };

/* The map of a batch's losers: keyed by slot id, each entry holding the
 * smallest index of a loser of that id, side by side in 16 bytes so that
 * one read gets both.  Entering marks the id in `lost`; the kernel marks
 * the batch in tags[TAGGED_LOSER] (tag_block). */
struct losers {
    ulonglong2 *map;
    uint64_t mask;
    id_bits lost;
    unsigned *tags;
    unsigned tag;
};

__device__ __forceinline__ void enter_loser(const losers &L, uint64_t id, uint64_t i)
{
    const uint64_t want = (uint64_t)L.tag << TAG_SHIFT | id;
    uint64_t h = scratch_hash(id) & L.mask;
    ulonglong2 e = __ldcg(L.map + h);
    for (;;) { /* the first entry that is this key's, or empty (another batch's) and claimed */
        if (e.x == want)
            break;
        if (e.x >> TAG_SHIFT != L.tag) {
            const uint64_t old = atomicCAS(&L.map[h].x, e.x, want);
            if (old == e.x)
                break;
            e.x = old; /* taken meanwhile: look again */
            continue;
        }
        h = (h + 1) & L.mask;
        e = __ldcg(L.map + h);
    }
    /* e.y as read with the key: where another loser changed it since, the
     * first exchange fails and returns it */
    const uint64_t mine = (uint64_t)L.tag << 32 | (uint32_t)i;
    uint64_t m = e.y;
    while (m >> 32 != L.tag || (uint32_t)m > (uint32_t)i) { /* another batch's, or a later index */
        const uint64_t old = atomicCAS(&L.map[h].y, m, mine);
        if (old == m)
            break;
        m = old;
    }
    bit_set(L.lost, id);
}

/* Writes the batch's tag in tags[which] if some thread of the block says
 * so: one store a block, not one a key, to a word every block would write.
 * Every thread of the block calls it (no early return before). */
__device__ __forceinline__ void tag_block(bool said, const losers &L, int which)
{
    if (__syncthreads_or(said) && threadIdx.x == 0)
        L.tags[which] = L.tag;
}

/* ---- a SET's put: the phases per key, and the kernels that run them ----------------------------- */

/* Ids of 32 bits are the fix-up's alone (the caller wants none, and every
 * slot id is below FIX_PRESENT), and carry the answer that the fix-up
 * looks for, so that it reads 4 bytes a key, not 5: an INSERTED key's slot
 * id, a PRESENT key's with FIX_PRESENT set, or FIX_NONE for the others. */
#define FIX_PRESENT 0x80000000u
#define FIX_NONE    0xFFFFFFFFu

/* Find-or-put of key i (skipped: the table is halted); whether it came back
 * PRESENT.  Id: the ids' type: 64 bits, the slot ids the caller wants (an
 * id of a FULL key is never read), or 32 bits with the answer in them. */
template <int SHAPE, typename Id>
__device__ __forceinline__ bool put_one(const floe_geometry &g, uint64_t *L0, uint64_t *L1, uint64_t *L2,
                                        const uint64_t *keys, uint64_t i, uint8_t *results, Id *ids, bool skip,
                                        unsigned *halt, unsigned seq)
{
    if (skip) {
        results[i] = SKIPPED;
        if constexpr (sizeof(Id) == 4)
            ids[i] = FIX_NONE;
        return false;
    }
    uint8_t res;
    uint64_t id, put;
    op_key<SHAPE, true>(g, L0, L1, L2, __ldg(keys + i), &res, &id, &put);
    if (res == R_FULL)
        halt_on_full(halt, seq);
    results[i] = res;
    if constexpr (sizeof(Id) == 4)
        ids[i] = res == R_INSERTED ? (uint32_t)id : res == R_PRESENT ? (uint32_t)id | FIX_PRESENT : FIX_NONE;
    else
        ids[i] = id;
    return res == R_PRESENT;
}

/* The fix-up's kernels take FIX_KEYS keys a thread, BLOCK apart (each
 * load of a warp one run of memory), and read all their answers and ids,
 * then all their filter words, before they look at any: a key's reads do
 * not wait for the one before it. */
#define FIX_KEYS 4

__device__ __forceinline__ uint64_t fix_index(int j)
{
    return (blockIdx.x * (uint64_t)FIX_KEYS + (uint64_t)j) * BLOCK + threadIdx.x;
}

/* The answers and ids of this thread's keys (from 32-bit ids alone, see
 * put_one); ABSENT past the end and for FIX_NONE, which no phase looks for
 * (a put answers no key ABSENT; an erase settles ERASED). */
template <typename Id>
__device__ __forceinline__ void fix_load(const Id *ids, const uint8_t *results, uint64_t n, uint8_t (&r)[FIX_KEYS],
                                         Id (&id)[FIX_KEYS])
{
#pragma unroll
    for (int j = 0; j < FIX_KEYS; j++) {
        const uint64_t i = fix_index(j);
        if constexpr (sizeof(Id) == 4) {
            const uint32_t w = i < n ? ids[i] : FIX_NONE;
            r[j] = w == FIX_NONE ? R_ABSENT : w & FIX_PRESENT ? R_PRESENT : R_INSERTED;
            id[j] = w & ~FIX_PRESENT;
        } else {
            r[j] = i < n ? results[i] : (uint8_t)R_ABSENT;
            id[j] = i < n ? ids[i] : 0;
        }
    }
}

/* Which of this thread's keys answered `want` and have all their bits set
 * in f (bit j of the mask returned). */
template <typename Id>
__device__ __forceinline__ unsigned fix_maybe(const id_bits &f, const uint8_t (&r)[FIX_KEYS], const Id (&id)[FIX_KEYS],
                                              uint8_t want)
{
    uint32_t w[FIX_KEYS], m[FIX_KEYS];
#pragma unroll
    for (int j = 0; j < FIX_KEYS; j++) {
        uint32_t *word;
        m[j] = bits_at(f, id[j], &word);
        w[j] = r[j] == want ? __ldcg(word) : 0;
    }
    unsigned maybe = 0;
#pragma unroll
    for (int j = 0; j < FIX_KEYS; j++)
        maybe |= (r[j] == want && (w[j] & m[j]) == m[j]) << j;
    return maybe;
}

/* A winner (INSERTED, ERASED) with an earlier loser of its key hands its
 * answer over: a loser is PRESENT after a put, ABSENT after an erase. */
__device__ __forceinline__ void settle_one(uint64_t id, uint8_t *results, uint64_t i, const losers &L, uint8_t win,
                                           uint8_t lose)
{
    const uint64_t want = (uint64_t)L.tag << TAG_SHIFT | id;
    uint64_t h = scratch_hash(id) & L.mask;
    ulonglong2 e;
    for (;;) {
        e = __ldcg(L.map + h);
        if (e.x >> TAG_SHIFT != L.tag)
            return; /* no loser of this key */
        if (e.x == want)
            break;
        h = (h + 1) & L.mask;
    }
    const uint32_t first = (uint32_t)e.y;
    if (first < (uint32_t)i) {
        results[i] = lose;
        results[first] = win;
    }
}

/* Programmatic dependent launch (compute capability 9.0 and up; no-ops
 * elsewhere and in a kernel launched plainly): a kernel launched with
 * launch_next() may start its blocks while the kernel before it in the
 * stream ends, once every block of that one has called let_next_start(),
 * and waits in wait_previous() until it has finished and its writes are
 * visible.  The put's phases hide the launch between them that way. */
__device__ __forceinline__ void let_next_start()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;");
#endif
}

__device__ __forceinline__ void wait_previous()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* A SET's find-or-put of a batch, a kernel a phase, a key a thread:
 *   1. the batch's filters are cleared and every key is put (k_put_pass);
 *   2. if some key came back PRESENT, every INSERTED key sets its slot's
 *      bit in `claimed` (k_claims);
 *   3. PRESENT keys whose bit is set enter the losers' map (k_losers);
 *   4. if some key did, the winners settle (k_settle).
 * A batch of distinct new keys does its work in the first; the others
 * read its answers and return. */
template <int SHAPE, typename Id>
__global__ void __launch_bounds__(BLOCK, PUT_BLOCKS)
    k_put_pass(const __grid_constant__ floe_geometry g, uint64_t *L0, uint64_t *L1, uint64_t *L2, const uint64_t *keys,
               uint64_t n, uint8_t *results, Id *ids, uint32_t *filter, uint64_t filter_words, const losers L,
               unsigned *halt, unsigned seq, bool pdl)
{
    const bool skip = block_halted(halt, seq);
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i < filter_words)
        filter[i] = 0;
    const bool present = i < n && put_one<SHAPE, Id>(g, L0, L1, L2, keys, i, results, ids, skip, halt, seq);
    tag_block(present, L, TAGGED_PRESENT);
    if (pdl)
        let_next_start();
}

/* The batch's TAGGED words were written by an earlier kernel and are read
 * only here: through the read-only cache (__ldg), an L2 request an SM, not
 * one a warp to a single line. */
template <typename Id>
__global__ void k_claims(const Id *ids, const uint8_t *results, uint64_t n, const id_bits claimed, const losers L,
                         bool pdl)
{
    wait_previous();
    if (__ldg(L.tags + TAGGED_PRESENT) == L.tag) {
        uint8_t r[FIX_KEYS];
        Id id[FIX_KEYS];
        fix_load(ids, results, n, r, id);
#pragma unroll
        for (int j = 0; j < FIX_KEYS; j++)
            if (r[j] == R_INSERTED)
                bit_set(claimed, id[j]);
    }
    if (pdl)
        let_next_start();
}

/* A key PRESENT in a slot whose bits are set may have been put by a twin of
 * its batch (or the bits are other slots'): it enters the losers' map, and
 * the settling decides. */
template <typename Id>
__global__ void k_losers(const Id *ids, const uint8_t *results, uint64_t n, const id_bits claimed, const losers L,
                         bool pdl)
{
    wait_previous();
    uint8_t r[FIX_KEYS];
    Id id[FIX_KEYS];
    fix_load(ids, results, n, r, id);
    const unsigned maybe = fix_maybe(claimed, r, id, R_PRESENT);
#pragma unroll
    for (int j = 0; j < FIX_KEYS; j++)
        if (maybe >> j & 1)
            enter_loser(L, id[j], fix_index(j));
    tag_block(maybe != 0, L, TAGGED_LOSER);
    if (pdl)
        let_next_start();
}

/* The settling, after k_losers or an erase's k_erase. */
template <typename Id>
__global__ void k_settle(const Id *ids, uint8_t *results, uint64_t n, const losers L, uint8_t win, uint8_t lose)
{
    wait_previous();
    if (__ldg(L.tags + TAGGED_LOSER) != L.tag)
        return;
    uint8_t r[FIX_KEYS];
    Id id[FIX_KEYS];
    fix_load(ids, results, n, r, id);
    const unsigned maybe = fix_maybe(L.lost, r, id, win);
#pragma unroll
    for (int j = 0; j < FIX_KEYS; j++)
        if (maybe >> j & 1)
            settle_one(id[j], results, fix_index(j), L, win, lose);
}

/* Erase pass 2: tombstone the slot pass 1 found.  Keys never move and an
 * erase batch runs alone, so the slot holds the key until some occurrence
 * tombstones it; the CAS loop only retries when a neighbour in the word
 * changed.  An occurrence that finds the tombstone already there lost to a
 * twin in its own batch. */
__global__ void k_erase(const __grid_constant__ floe_geometry g, uint64_t *L0, uint64_t *L1, uint64_t *L2, uint64_t n,
                        uint8_t *results, const uint64_t *ids, const losers L)
{
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    bool lost = false;
    if (i < n && results[i] == R_PRESENT) {
        uint32_t l, slot;
        uint64_t b;
        floe_slot_split(&g, ids[i], &l, &b, &slot);
        const floe_level &lv = g.level[l];
        uint64_t *word = (l == 0 ? L0 : l == 1 ? L1 : L2) + b * lv.words + floe_row_word(lv.row_bits, slot);
        const uint64_t tomb = floe_row_tombstone(lv.row_bits);
        uint64_t w = __ldcg(word);
        for (;;) {
            if (floe_row_get(&w, lv.row_bits, slot % (64 / lv.row_bits)) == tomb) {
                enter_loser(L, ids[i], i);
                results[i] = R_ABSENT;
                lost = true;
                break;
            }
            uint64_t desired = floe_row_put(w, lv.row_bits, slot % (64 / lv.row_bits), tomb);
            uint64_t old = atomicCAS(reinterpret_cast<unsigned long long *>(word), w, desired);
            if (old == w) {
                results[i] = FLOE_ERASED;
                break;
            }
            w = old;
        }
    }
    tag_block(lost, L, TAGGED_LOSER);
}

/* ---- small batches: one block, one launch ------------------------------------------------------------ */

#define LOSER 0x80 /* k_small's answers: absent before the batch, PRESENT after */

/* A SET insert (find-or-put) or find of n <= GPU_SMALL_KEYS keys by one
 * block, keys and answers in pinned host memory that it reads and writes
 * itself.  The insert orders the batch within the block, in shared memory:
 * every key is looked up, then the absent ones are put (exactly one
 * occurrence of each is INSERTED, the others lost: they come back
 * PRESENT), then a winner with an earlier loser of its key in the batch
 * hands INSERTED to the first one. */
template <int SHAPE, bool insert>
__global__ void __launch_bounds__(GPU_SMALL_KEYS, 1)
    k_small(const __grid_constant__ floe_geometry g, uint64_t *L0, uint64_t *L1, uint64_t *L2, const uint64_t *keys,
            uint32_t n, uint8_t *results, uint64_t *ids_out, unsigned *halt, unsigned seq)
{
    __shared__ uint64_t sid[GPU_SMALL_KEYS];
    __shared__ uint8_t sres[GPU_SMALL_KEYS], fin[GPU_SMALL_KEYS];
    __shared__ bool skip;
    __shared__ unsigned losers;
    const uint32_t i = threadIdx.x;
    if (i == 0) {
        skip = halted(halt, seq); /* one answer for the whole block: only this kernel sets halt meanwhile */
        losers = 0;
    }
    __syncthreads();
    if (skip) {
        if (i < n)
            results[i] = SKIPPED;
        return;
    }
    uint8_t res = R_ABSENT;
    uint64_t id = FLOE_NO_ID, put, key = i < n ? keys[i] : 0;
    if (i < n)
        op_key<SHAPE, false>(g, L0, L1, L2, key, &res, &id, &put);
    if (insert) {
        __syncthreads(); /* every key looked up before any is put */
        if (i < n && res == R_ABSENT) {
            op_key<SHAPE, true>(g, L0, L1, L2, key, &res, &id, &put);
            if (res == R_FULL)
                halt_on_full(halt, seq);
            if (res == R_PRESENT) {
                res |= LOSER;
                atomicAdd(&losers, 1u);
            }
        }
        sid[i] = id;
        sres[i] = res;
        fin[i] = res & ~LOSER;
        __syncthreads();
        if (losers && i < n && res == R_INSERTED) {
            for (uint32_t j = 0; j < i; j++)
                if ((sres[j] & LOSER) && sid[j] == id) { /* the first occurrence lost: it takes INSERTED */
                    fin[j] = R_INSERTED;
                    fin[i] = R_PRESENT;
                    break;
                }
        }
        __syncthreads();
        res = fin[i];
    }
    if (i < n) {
        results[i] = res;
        if (ids_out)
            ids_out[i] = id;
    }
}

/* ---- a piece's keys in and answers out, one launch each ----------------------------------------- */

#define OUT_BLOCKS 132 /* per segment, grid-stride: one block per SM of an H100 is plenty for a piece */

/* Column y of the grid copies segment y's keys from where they lie
 * (pinned host memory, read over the bus) to d_keys. */
__global__ void k_keys_in(uint64_t *d_keys, const __grid_constant__ gpu_segments segs)
{
    const unsigned y = blockIdx.y;
    const uint64_t from = y ? segs.end[y - 1] : 0, m = segs.end[y] - from;
    const uint64_t *src = segs.keys[y];
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < m; j += (uint64_t)gridDim.x * blockDim.x)
        d_keys[from + j] = src[j];
}

__device__ __forceinline__ void count_answer(unsigned (&c)[5], uint8_t r)
{
#pragma unroll
    for (int k = 0; k < 5; k++)
        c[k] += r == k;
}

/* Column y of the grid hands segment y its answers: the result bytes (16 a
 * store where the destination allows: one write over the bus per 16
 * answers), ids and values where wanted, and counts[y] = how many results
 * are 0..4.  t->acc[y] and t->ticket[y] are zero before and after (the
 * column's last block to finish moves acc to counts and clears it, so a
 * launch needs no memset before it). */
__global__ void k_out(const uint8_t *results, const uint64_t *ids, const void *vals, uint32_t vb,
                      const __grid_constant__ gpu_segments segs, gpu_tally *t, unsigned long long (*counts)[5])
{
    const unsigned y = blockIdx.y;
    const uint64_t from = y ? segs.end[y - 1] : 0, m = segs.end[y] - from;
    const uint64_t tid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x, stride = (uint64_t)gridDim.x * blockDim.x;
    const uint8_t *r = results + from;
    uint8_t *dst = segs.res[y];
    __shared__ unsigned long long sum[5];
    __shared__ bool last;
    if (threadIdx.x < 5)
        sum[threadIdx.x] = 0;
    __syncthreads();
    unsigned c[5] = {0, 0, 0, 0, 0};
    const uint64_t head = min(m, (uint64_t)((16 - ((uintptr_t)dst & 15)) & 15)); /* bytes until dst is aligned */
    const uint64_t chunks = (m - head) / 16, tail = head + chunks * 16;
    for (uint64_t j = tid; j < head; j += stride) {
        dst[j] = r[j];
        count_answer(c, r[j]);
    }
    for (uint64_t q = tid; q < chunks; q += stride) {
        const uint8_t *p = r + head + q * 16;
        uint32_t w[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            w[k] = 0;
#pragma unroll
            for (int b = 0; b < 4; b++) {
                count_answer(c, p[4 * k + b]);
                w[k] |= (uint32_t)p[4 * k + b] << (8 * b);
            }
        }
        *reinterpret_cast<uint4 *>(dst + head + q * 16) = make_uint4(w[0], w[1], w[2], w[3]);
    }
    for (uint64_t j = tail + tid; j < m; j += stride) {
        dst[j] = r[j];
        count_answer(c, r[j]);
    }
    if (segs.ids[y])
        for (uint64_t j = tid; j < m; j += stride)
            segs.ids[y][j] = ids[from + j];
    if (segs.vout[y])
        for (uint64_t j = tid; j < m; j += stride)
            value_set(segs.vout[y], vb, j, value_get(vals, vb, from + j));
#pragma unroll
    for (int k = 0; k < 5; k++) {
        const unsigned w = __reduce_add_sync(0xFFFFFFFFu, c[k]);
        if ((threadIdx.x & 31) == 0 && w)
            atomicAdd(&sum[k], (unsigned long long)w);
    }
    __syncthreads();
    if (threadIdx.x < 5 && sum[threadIdx.x])
        atomicAdd(&t->acc[y][threadIdx.x], sum[threadIdx.x]);
    __threadfence(); /* this block's sums land before its ticket */
    __syncthreads();
    if (threadIdx.x == 0)
        last = atomicAdd(&t->ticket[y], 1u) == gridDim.x - 1;
    __syncthreads();
    if (last && threadIdx.x < 5) {
        counts[y][threadIdx.x] = atomicExch(&t->acc[y][threadIdx.x], 0ull);
        if (threadIdx.x == 0)
            t->ticket[y] = 0;
    }
}

/* ---- whole-table kernels: count, rebuild, scan --------------------------------------------------- */

/* out[0] += non-empty rows, out[1] += tombstones, over nwords words: a
 * grid of COUNT_BLOCKS at most, each block's sums added with one atomic
 * each (an atomic a warp queued 10^6 of them on two counters for a root
 * table of 2^20 buckets: 0.85 ms a count on the H100, 0.05 ms now). */
#define COUNT_BLOCKS 2048
__global__ void __launch_bounds__(BLOCK) k_count(const uint64_t *words, uint64_t nwords, uint32_t row_bits,
                                                 unsigned long long *out)
{
    const uint64_t mask = floe_row_mask(row_bits), t = floe_row_tombstone(row_bits);
    unsigned long long used = 0, tomb = 0;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < nwords;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t w = words[i];
        for (uint32_t r = 0; r < 64 / row_bits; r++) {
            const uint64_t row = (w >> (r * row_bits)) & mask;
            used += row != 0;
            tomb += row == t;
        }
    }
    typedef cub::BlockReduce<unsigned long long, BLOCK> block_reduce;
    __shared__ typename block_reduce::TempStorage tmp;
    used = block_reduce(tmp).Sum(used);
    __syncthreads(); /* tmp again */
    tomb = block_reduce(tmp).Sum(tomb);
    if (threadIdx.x == 0 && used)
        atomicAdd(out, used);
    if (threadIdx.x == 0 && tomb)
        atomicAdd(out + 1, tomb);
}

/* The key in slot position p of the table, if the slot holds one. */
__device__ __forceinline__ bool key_at(const floe_geometry &g, uint64_t *const *L, uint64_t p, uint64_t *key)
{
    uint32_t l, slot;
    uint64_t b;
    floe_slot_split(&g, p, &l, &b, &slot);
    const floe_level &lv = g.level[l];
    uint64_t w = __ldcg(L[l] + b * lv.words + floe_row_word(lv.row_bits, slot));
    uint64_t row = (w >> ((slot * lv.row_bits) & 63)) & floe_row_mask(lv.row_bits);
    if (!floe_row_is_key(row, lv.row_bits))
        return false;
    *key = floe_join(&g, l, floe_row_choice(l, row), b, floe_row_remainder(l, row));
    return true;
}

struct levels {
    uint64_t *L[FLOE_LEVELS];
};

/* Every key of the old table into the new one (distinct keys, no readers:
 * rows go in directly, values after). */
template <int SHAPE>
__global__ void __launch_bounds__(BLOCK, 2)
    k_rebuild(const __grid_constant__ floe_geometry from, const levels old, const void *old_vals,
              const __grid_constant__ floe_geometry to, levels nw, void *new_vals, uint32_t vb, uint64_t first,
              uint64_t count, int *failed)
{
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= count)
        return;
    /* The slots in column order, as if the table were rows of 32: thread i
     * takes slot 32 (i mod S) + i / S.  The keys of one bucket go to one
     * or two buckets of the grown table, and its neighbours' threads all
     * claiming rows there at once would queue on the same words; this way
     * a bucket's slots are taken S threads apart, by different waves. */
    const uint64_t S = count / 32;
    if (i < S * 32)
        i = (i % S) * 32 + i / S;
    uint64_t key, p = first + i;
    if (!key_at(from, old.L, p, &key))
        return;
    uint8_t res;
    uint64_t id, put;
    op_key<SHAPE, true>(to, nw.L[0], nw.L[1], nw.L[2], key, &res, &id, &put);
    if (res != R_INSERTED) {
        *(volatile int *)failed = 1;
        return;
    }
    if (vb)
        value_set(new_vals, vb, id, value_get(old_vals, vb, p));
}

struct live_slot {
    floe_geometry g;
    levels lv;
    __device__ bool operator()(uint64_t p) const
    {
        uint64_t key;
        return key_at(g, lv.L, p, &key);
    }
};

__global__ void k_scan_gather(const __grid_constant__ floe_geometry g, const levels lv, const uint64_t *pos, uint64_t m,
                              const void *vals, uint32_t vb, uint64_t *keys, void *vals_out)
{
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= m)
        return;
    uint64_t key = 0;
    key_at(g, lv.L, pos[i], &key);
    keys[i] = key;
    if (vals_out)
        value_set(vals_out, vb, i, value_get(vals, vb, pos[i]));
}

/* The key in each slot id (ids NULL: slot first + i); found[i] 0 where the
 * slot holds none (empty, erased, or past the table). */
__global__ void k_keys_at(const __grid_constant__ floe_geometry g, const levels lv, const uint64_t *ids, uint64_t first,
                          uint64_t n, uint64_t *keys, uint8_t *found)
{
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    uint64_t p = ids ? ids[i] : first + i, key = 0;
    bool ok = p < g.total_slots && key_at(g, lv.L, p, &key);
    keys[i] = key;
    found[i] = ok ? 1 : 0;
}

/* Every key held appended to keys, in no order: the first cap of them
 * written, *count added every one.  A block adds its keys of a step with
 * one atomic: the keys are sparse in the slots, and a warp's few would
 * queue one atomic each on the one counter. */
__global__ void __launch_bounds__(BLOCK)
    k_keys_all(const __grid_constant__ floe_geometry g, const levels lv, uint64_t *keys, uint64_t cap,
               unsigned long long *count)
{
    __shared__ block_append<BLOCK> append;
    const uint64_t step = (uint64_t)gridDim.x * BLOCK;
    for (uint64_t first = blockIdx.x * (uint64_t)BLOCK; first < g.total_slots; first += step) {
        const uint64_t p = first + threadIdx.x;
        uint64_t key = 0;
        const bool held = p < g.total_slots && key_at(g, lv.L, p, &key);
        const unsigned long long at = append(count, held);
        if (held && at < cap)
            keys[at] = key;
    }
}

/* ---- host side ------------------------------------------------------------------------------------ */

static inline unsigned blocks_for(uint64_t n)
{
    return (unsigned)((n + BLOCK - 1) / BLOCK);
}

static inline unsigned fix_blocks_for(uint64_t n)
{
    return (unsigned)((n + (uint64_t)BLOCK * FIX_KEYS - 1) / ((uint64_t)BLOCK * FIX_KEYS));
}

/* The kernels are templated on the table's shape (SHAPE_ROW_BITS,
 * SHAPE_THREE): f(S) with it as a compile-time constant (S::value), the one
 * place that picks it.  with_shape: f(S, INS) for the kernels also templated
 * on insert. */
template <typename F> static void with_row_bits(const floe_level &l0, F f)
{
    if (l0.three) { /* a TREE's root table: SET and MAP tables have no such kernels' code in their path */
        if (l0.row_bits == 16)
            f(std::integral_constant<int, 16 | 1>{});
        else if (l0.row_bits == 32)
            f(std::integral_constant<int, 32 | 1>{});
        else
            f(std::integral_constant<int, 64 | 1>{});
    } else if (l0.row_bits == 16) {
        f(std::integral_constant<int, 16>{});
    } else if (l0.row_bits == 32) {
        f(std::integral_constant<int, 32>{});
    } else {
        f(std::integral_constant<int, 64>{});
    }
}

template <typename F> static void with_shape(const floe_level &l0, bool insert, F f)
{
    with_row_bits(l0, [&](auto rb) {
        if (insert)
            f(rb, std::true_type{});
        else
            f(rb, std::false_type{});
    });
}

static levels levels_of(const gpu_iceberg *t)
{
    levels v;
    for (int l = 0; l < FLOE_LEVELS; l++)
        v.L[l] = t->level[l];
    return v;
}

extern "C" int gpu_available(int device, char *name, size_t len)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || device < 0 || device >= n)
        return 0;
    if (name && len) {
        cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, device) == cudaSuccess)
            snprintf(name, len, "%s", p.name);
    }
    return 1;
}

static void free_arrays(gpu_iceberg *t)
{
    for (int l = 0; l < FLOE_LEVELS; l++) {
        cudaFree(t->level[l]);
        t->level[l] = NULL;
    }
    cudaFree(t->values);
    t->values = NULL;
}

/* Zeroed level and value arrays for 2^addr_bits primary buckets, 1.5 times that with three. */
static floe_status alloc_arrays(gpu_iceberg *t, uint32_t addr_bits, uint32_t three, floe_errinfo *err)
{
    floe_geometry_init(&t->g, t->spec.key_bits, addr_bits, three, t->spec.seed);
    t->addr_bits = addr_bits;
    t->three = three;
    size_t total = 0;
    cudaError_t e = cudaSuccess;
    for (int l = 0; l < FLOE_LEVELS && e == cudaSuccess; l++) {
        t->bytes[l] = floe_level_words(&t->g.level[l]) * sizeof(uint64_t);
        total += t->bytes[l];
        e = cudaMalloc(&t->level[l], t->bytes[l]);
        if (e == cudaSuccess)
            e = cudaMemset(t->level[l], 0, t->bytes[l]);
    }
    t->values_bytes = t->vb ? (size_t)t->g.total_slots * t->vb : 0;
    total += t->values_bytes;
    if (e == cudaSuccess && t->vb) {
        e = cudaMalloc(&t->values, t->values_bytes);
        if (e == cudaSuccess)
            e = cudaMemset(t->values, 0, t->values_bytes);
    }
    if (e != cudaSuccess) {
        free_arrays(t);
        cudaGetLastError(); /* an out-of-memory error is not sticky: clear it */
        return floe_errinfo_set(err, FLOE_ERR_FULL,
                                "cannot allocate %zu bytes of device memory for a table of 2^%u "
                                "primary buckets: %s",
                                total, addr_bits, cudaGetErrorString(e));
    }
    return FLOE_OK;
}

extern "C" floe_status gpu_iceberg_create(const floe_spec *spec, uint32_t addr_bits, uint32_t three,
                                          gpu_iceberg **out, floe_errinfo *err)
{
    floe_status st = floe_spec_validate(spec, err);
    if (st != FLOE_OK)
        return st;
    if (spec->kind != FLOE_KIND_SET && spec->kind != FLOE_KIND_MAP)
        return floe_errinfo_set(err, FLOE_ERR_UNSUPPORTED, "the GPU engine holds SET and MAP tables, not %s",
                                floe_kind_name(spec->kind));
    if ((st = iceberg_size_check(spec->key_bits, addr_bits, three, err)) != FLOE_OK)
        return st;
    gpu_iceberg *t = (gpu_iceberg *)calloc(1, sizeof *t);
    if (!t)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    t->spec = *spec;
    if (!t->spec.seed)
        t->spec.seed = 0x243F6A8885A308D3ull;
    t->vb = spec->kind == FLOE_KIND_MAP ? spec->value_bytes : 0;
    st = alloc_arrays(t, addr_bits, three, err);
    t->piece = PUT_PIECE_KEYS;
    int dev, major;
    t->pdl = cudaGetDevice(&dev) == cudaSuccess &&
             cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9;
    if (st == FLOE_OK && spec->grow) {
        cudaError_t e = cudaMalloc((void **)&t->halt, GPU_LANES_MAX * sizeof *t->halt);
        if (e == cudaSuccess)
            e = cudaMemset(t->halt, 0, GPU_LANES_MAX * sizeof *t->halt);
        if (e != cudaSuccess)
            st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "allocating a flag: %s", cudaGetErrorString(e));
    }
    if (st != FLOE_OK) {
        gpu_iceberg_destroy(t);
        return st;
    }
    *out = t;
    return FLOE_OK;
}

extern "C" void gpu_iceberg_destroy(gpu_iceberg *t)
{
    if (!t)
        return;
    free_arrays(t);
    cudaFree(t->halt);
    cudaFree(t->scratch_map);
    cudaFree(t->batch_tags);
    cudaFree(t->tmp_ids);
    cudaFree(t->filter);
    cudaFree(t->scan_pos);
    cudaFree(t->scan_count);
    cudaFree(t->scan_tmp);
    free(t);
}

extern "C" const floe_spec *gpu_iceberg_spec(const gpu_iceberg *t)
{
    return &t->spec;
}

extern "C" uint32_t gpu_iceberg_addr_bits(const gpu_iceberg *t)
{
    return t->addr_bits;
}

extern "C" uint32_t gpu_iceberg_three(const gpu_iceberg *t)
{
    return t->three;
}

extern "C" uint32_t gpu_iceberg_first_fill(const gpu_iceberg *t)
{
    return t->g.first_fill;
}

static floe_status launch(gpu_iceberg *t, const uint64_t *d_keys, size_t n, bool insert, uint8_t *d_results,
                          uint64_t *d_ids, void *d_vout, cudaStream_t s, floe_errinfo *err)
{
    if (n == 0)
        return FLOE_OK;
    unsigned blocks = blocks_for(n);
    uint64_t *L0 = t->level[0], *L1 = t->level[1], *L2 = t->level[2];
    with_shape(t->g.level[0], insert, [&](auto rb, auto ins) {
        k_op<decltype(rb)::value, decltype(ins)::value><<<blocks, BLOCK, 0, s>>>(
            t->g, L0, L1, L2, d_keys, n, d_results, d_ids, lane_halt(t), t->seq, t->values, t->vb, d_vout);
    });
    CUDA_TRY(cudaGetLastError(), err);
    return FLOE_OK;
}

/* Bits per key of a batch's filters: `claimed` gets eight, four set for
 * every key INSERTED (4 in 16 where half the keys were PRESENT; a key
 * present before the batch then meets a false "maybe" about 1 in 250
 * times, and enters the losers' map), `lost` one, four set for every loser
 * (a winner probes the map where its bits are set). */
#define CLAIMED_BITS 8
#define LOST_BITS    1

static size_t filter_bits(size_t n, unsigned per_key)
{
    size_t bits = 1024;
    while (bits < per_key * n)
        bits <<= 1;
    return bits;
}

static floe_status grow_scratch(gpu_iceberg *t, size_t n, floe_errinfo *err)
{
    size_t cap = 1024;
    while (cap < 2 * n)
        cap <<= 1;
    if (!t->batch_tags) {
        CUDA_TRY(cudaMalloc(&t->batch_tags, TAGGED * sizeof *t->batch_tags), err);
        CUDA_TRY(cudaMemset(t->batch_tags, 0, TAGGED * sizeof *t->batch_tags), err);
    }
    if (cap > t->scratch_cap) {
        cudaFree(t->scratch_map);
        t->scratch_map = NULL;
        t->scratch_cap = 0;
        CUDA_TRY(cudaMalloc(&t->scratch_map, cap * sizeof *t->scratch_map), err);
        CUDA_TRY(cudaMemset(t->scratch_map, 0, cap * sizeof *t->scratch_map), err); /* tag 0: empty */
        t->scratch_cap = cap;
    }
    if (n > t->tmp_cap) {
        cudaFree(t->tmp_ids);
        t->tmp_ids = NULL;
        t->tmp_cap = 0;
        CUDA_TRY(cudaMalloc(&t->tmp_ids, n * sizeof(uint64_t)), err);
        t->tmp_cap = n;
    }
    const size_t words = (filter_bits(n, CLAIMED_BITS) + filter_bits(n, LOST_BITS)) / 32;
    if (words > t->filter_words) {
        cudaFree(t->filter);
        t->filter = NULL;
        t->filter_words = 0;
        CUDA_TRY(cudaMalloc(&t->filter, words * sizeof(uint32_t)), err);
        t->filter_words = words;
    }
    return FLOE_OK;
}

/* The tag of the next batch with a fix-up.  When every tag has been used,
 * entries of TAG_MAX batches ago would read as the new batch's: the scratch
 * is cleared (once in 2^18 batches). */
static floe_status next_tag(gpu_iceberg *t, cudaStream_t s, floe_errinfo *err)
{
    if (++t->tag <= TAG_MAX)
        return FLOE_OK;
    t->tag = 1;
    CUDA_TRY(cudaMemsetAsync(t->scratch_map, 0, t->scratch_cap * sizeof *t->scratch_map, s), err);
    CUDA_TRY(cudaMemsetAsync(t->batch_tags, 0, TAGGED * sizeof *t->batch_tags, s), err);
    return FLOE_OK;
}

extern "C" void gpu_iceberg_piece_keys(gpu_iceberg *t, size_t keys)
{
    t->piece = keys ? keys : PUT_PIECE_KEYS;
}

extern "C" void gpu_iceberg_tags_left(gpu_iceberg *t, unsigned left)
{
    t->tag = left < TAG_MAX ? TAG_MAX - left : 0;
}

/* The largest batch whose phases overlap their launches: about 4 us less a
 * batch up to here (a fifth of a small batch), but 3.5% slower puts in
 * K1's batches of 2^26 keys, whose phases after the pass have nothing to
 * do (docs/PERFORMANCE.md).  floed's pieces are at most 2^20 keys. */
#define PDL_MAX_KEYS ((size_t)1 << 20)

/* Launches kernel k after the kernel before it in stream s, overlapping
 * its start with that one's end where the device can (pdl: programmatic
 * dependent launch, compute capability 9.0 and up). */
template <typename... P, typename... A>
static cudaError_t launch_next(bool pdl, void (*k)(P...), unsigned blocks, cudaStream_t s, A... args)
{
    cudaLaunchAttribute at;
    at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(BLOCK);
    cfg.stream = s;
    cfg.attrs = &at;
    cfg.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, k, args...);
}

/* A batch with a fix-up: scratch for n keys, its tag, its filters (a few
 * bits a key, to be cleared before use) and the losers' map of its tag. */
static floe_status begin_fixup(gpu_iceberg *t, size_t n, cudaStream_t s, id_bits *claimed, losers *L, floe_errinfo *err)
{
    floe_status st = grow_scratch(t, n, err);
    if (st == FLOE_OK)
        st = next_tag(t, s, err);
    if (st != FLOE_OK)
        return st;
    const size_t cbits = filter_bits(n, CLAIMED_BITS), lbits = filter_bits(n, LOST_BITS);
    *claimed = {t->filter, cbits - 1};
    const id_bits lost = {t->filter + cbits / 32, lbits - 1};
    *L = {t->scratch_map, t->scratch_cap - 1, lost, t->batch_tags, t->tag};
    return FLOE_OK;
}

/* Each batch gets the next sequence number (0 stays "no halt"). */
static void next_seq(gpu_iceberg *t)
{
    if (++t->seq == 0)
        t->seq = 1;
}

/* A batch as the door (floe_request_check) lets it through: fewer than 2^32
 * keys (kernels index them with 32 bits); the backend's pieces are smaller. */
static void assert_n(size_t n)
{
    assert(n < (1ull << 32));
    (void)n;
}

/* A piece's kernels, its scratch ready (put_piece). */
template <typename Id>
static floe_status put_phases(gpu_iceberg *t, const uint64_t *d_keys, size_t n, uint8_t *d_results, Id *ids,
                              const id_bits &claimed, const losers &L, cudaStream_t s, floe_errinfo *err)
{
    uint64_t *L0 = t->level[0], *L1 = t->level[1], *L2 = t->level[2];
    const uint64_t filter_words = (claimed.mask + 1 + L.lost.mask + 1) / 32;
    const unsigned blocks = blocks_for(n);
    assert(filter_words <= (uint64_t)blocks * BLOCK); /* k_put_pass clears a word a thread */
    const bool pdl = t->pdl && n <= PDL_MAX_KEYS;
    with_row_bits(t->g.level[0], [&](auto rb) {
        k_put_pass<decltype(rb)::value, Id><<<blocks, BLOCK, 0, s>>>(
            t->g, L0, L1, L2, d_keys, n, d_results, ids, t->filter, filter_words, L, lane_halt(t), t->seq, pdl);
    });
    CUDA_TRY(cudaGetLastError(), err);
    const unsigned fix = fix_blocks_for(n);
    CUDA_TRY(launch_next(pdl, k_claims<Id>, fix, s, (const Id *)ids, (const uint8_t *)d_results, (uint64_t)n, claimed,
                         L, pdl),
             err);
    CUDA_TRY(launch_next(pdl, k_losers<Id>, fix, s, (const Id *)ids, (const uint8_t *)d_results, (uint64_t)n, claimed,
                         L, pdl),
             err);
    CUDA_TRY(launch_next(pdl, k_settle<Id>, fix, s, (const Id *)ids, d_results, (uint64_t)n, L, (uint8_t)R_INSERTED,
                         (uint8_t)R_PRESENT),
             err);
    return FLOE_OK;
}

/* One piece of a put: its scratch, then its kernels.  Ids the caller does
 * not want are the fix-up's alone: 4 bytes each, with the answer in them,
 * where every slot id is below FIX_PRESENT (put_one). */
static floe_status put_piece(gpu_iceberg *t, const uint64_t *d_keys, size_t n, uint8_t *d_results, uint64_t *d_ids,
                             cudaStream_t s, floe_errinfo *err)
{
    id_bits claimed;
    losers L;
    floe_status st = begin_fixup(t, n, s, &claimed, &L, err);
    if (st != FLOE_OK)
        return st;
    if (d_ids)
        return put_phases(t, d_keys, n, d_results, d_ids, claimed, L, s, err);
    if (t->g.total_slots < FIX_PRESENT)
        return put_phases(t, d_keys, n, d_results, reinterpret_cast<uint32_t *>(t->tmp_ids), claimed, L, s, err);
    return put_phases(t, d_keys, n, d_results, t->tmp_ids, claimed, L, s, err);
}

extern "C" floe_status gpu_iceberg_put(gpu_iceberg *t, const uint64_t *d_keys, size_t n, uint8_t *d_results,
                                       uint64_t *d_ids, unsigned flags, gpu_stream stream, floe_errinfo *err)
{
    cudaStream_t s = (cudaStream_t)stream;
    assert_n(n);
    assert(!t->vb); /* a SET's: MAP inserts need values (gpu_iceberg_put_map) */
    next_seq(t);
    if (n == 0)
        return FLOE_OK;
    if (flags & GPU_NO_DEDUP)
        return launch(t, d_keys, n, true, d_results, d_ids, NULL, s, err);
    const size_t piece = t->piece;
    floe_status st = FLOE_OK;
    for (size_t at = 0; at < n && st == FLOE_OK; at += piece)
        st = put_piece(t, d_keys + at, n - at < piece ? n - at : piece, d_results + at, d_ids ? d_ids + at : NULL, s,
                       err);
    return st;
}

extern "C" floe_status gpu_iceberg_put_map(gpu_iceberg *t, const uint64_t *d_keys, const void *d_values, size_t n,
                                           int mode, uint8_t *d_results, uint64_t *d_ids, void *d_values_out,
                                           gpu_stream stream, floe_errinfo *err)
{
    cudaStream_t s = (cudaStream_t)stream;
    assert_n(n);
    assert(t->vb); /* a MAP's */
    next_seq(t);
    if (n == 0)
        return FLOE_OK;
    uint64_t *L0 = t->level[0], *L1 = t->level[1], *L2 = t->level[2];
    with_row_bits(t->g.level[0], [&](auto rb) {
        k_put_map<decltype(rb)::value><<<blocks_for(n), BLOCK, 0, s>>>(t->g, L0, L1, L2, d_keys, d_values, n, d_results,
                                                                       d_ids, lane_halt(t), t->seq, t->values, t->vb,
                                                                       mode, d_values_out);
    });
    CUDA_TRY(cudaGetLastError(), err);
    return FLOE_OK;
}

extern "C" floe_status gpu_iceberg_erase(gpu_iceberg *t, const uint64_t *d_keys, size_t n, uint8_t *d_results,
                                         gpu_stream stream, floe_errinfo *err)
{
    cudaStream_t s = (cudaStream_t)stream;
    assert_n(n);
    next_seq(t);
    if (n == 0)
        return FLOE_OK;
    id_bits claimed; /* an erase claims no slot */
    losers L;
    floe_status st = begin_fixup(t, n, s, &claimed, &L, err);
    if (st != FLOE_OK)
        return st;
    CUDA_TRY(cudaMemsetAsync(L.lost.bits, 0, (L.lost.mask + 1) / 8, s), err);
    if (st == FLOE_OK)
        st = launch(t, d_keys, n, false, d_results, t->tmp_ids, NULL, s, err); /* where each key lives */
    if (st != FLOE_OK)
        return st;
    const unsigned blocks = blocks_for(n);
    k_erase<<<blocks, BLOCK, 0, s>>>(t->g, t->level[0], t->level[1], t->level[2], n, d_results, t->tmp_ids, L);
    k_settle<uint64_t><<<fix_blocks_for(n), BLOCK, 0, s>>>(t->tmp_ids, d_results, n, L, FLOE_ERASED, R_ABSENT);
    CUDA_TRY(cudaGetLastError(), err);
    return FLOE_OK;
}

extern "C" floe_status gpu_iceberg_find(gpu_iceberg *t, const uint64_t *d_keys, size_t n, uint8_t *d_results,
                                        uint64_t *d_ids, void *d_values_out, gpu_stream stream, floe_errinfo *err)
{
    assert_n(n);
    assert(!d_values_out || t->vb); /* values: a MAP's */
    next_seq(t);
    return launch(t, d_keys, n, false, d_results, d_ids, d_values_out, (cudaStream_t)stream, err);
}

extern "C" floe_status gpu_iceberg_small(gpu_iceberg *t, int insert, const uint64_t *h_keys, size_t n,
                                         uint8_t *h_results, uint64_t *h_ids, gpu_stream stream, floe_errinfo *err)
{
    cudaStream_t s = (cudaStream_t)stream;
    assert(n >= 1 && n <= GPU_SMALL_KEYS);
    assert(!t->vb); /* a SET's */
    next_seq(t);
    const unsigned threads = (unsigned)((n + 31) / 32 * 32);
    uint64_t *L0 = t->level[0], *L1 = t->level[1], *L2 = t->level[2];
    with_shape(t->g.level[0], insert, [&](auto rb, auto ins) {
        k_small<decltype(rb)::value, decltype(ins)::value>
            <<<1, threads, 0, s>>>(t->g, L0, L1, L2, h_keys, (uint32_t)n, h_results, h_ids, lane_halt(t), t->seq);
    });
    CUDA_TRY(cudaGetLastError(), err);
    return FLOE_OK;
}

/* Blocks per column for a piece whose largest segment has m keys. */
static unsigned column_blocks(uint64_t m, unsigned most)
{
    const uint64_t b = blocks_for(m);
    return b < 1 ? 1 : b > most ? most : (unsigned)b;
}

static uint64_t largest_segment(const gpu_segments *segs)
{
    uint64_t most = 0;
    for (unsigned i = 0; i < segs->n; i++) {
        const uint64_t m = segs->end[i] - (i ? segs->end[i - 1] : 0);
        most = m > most ? m : most;
    }
    return most;
}

extern "C" floe_status gpu_keys_in(uint64_t *d_keys, const gpu_segments *segs, gpu_stream stream, floe_errinfo *err)
{
    assert(segs->n >= 1 && segs->n <= GPU_SEGMENTS_MAX);
    const unsigned blocks = column_blocks(largest_segment(segs), 1u << 12); /* a thread a key: every read in flight */
    k_keys_in<<<dim3(blocks, segs->n), BLOCK, 0, (cudaStream_t)stream>>>(d_keys, *segs);
    CUDA_TRY(cudaGetLastError(), err);
    return FLOE_OK;
}

extern "C" floe_status gpu_answers_out(const uint8_t *d_results, const uint64_t *d_ids, const void *d_values,
                                       uint32_t vb, const gpu_segments *segs, gpu_tally *d_tally, uint64_t (*counts)[5],
                                       gpu_stream stream, floe_errinfo *err)
{
    static_assert(sizeof(unsigned long long) == sizeof(uint64_t), "counts are 64-bit");
    assert(segs->n >= 1 && segs->n <= GPU_SEGMENTS_MAX);
    assert_n(segs->end[segs->n - 1]);
    const unsigned blocks = column_blocks(largest_segment(segs), OUT_BLOCKS);
    k_out<<<dim3(blocks, segs->n), BLOCK, 0, (cudaStream_t)stream>>>(d_results, d_ids, d_values, vb, *segs, d_tally,
                                                                     (unsigned long long(*)[5])counts);
    CUDA_TRY(cudaGetLastError(), err);
    return FLOE_OK;
}

extern "C" floe_status gpu_iceberg_clear_halt(gpu_iceberg *t, gpu_stream stream, floe_errinfo *err)
{
    if (t->halt)
        CUDA_TRY(cudaMemsetAsync(lane_halt(t), 0, sizeof *t->halt, (cudaStream_t)stream), err);
    return FLOE_OK;
}

enum host_kind { HOST_PUT, HOST_FIND, HOST_ERASE };

/* Stages host keys on the device, runs one operation, copies the answers back, waits. */
static floe_status host_op(gpu_iceberg *t, host_kind op, const uint64_t *keys, size_t n, uint8_t *results,
                           uint64_t *ids, floe_errinfo *err)
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
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "staging a batch: %s", cudaGetErrorString(e));
    } else {
        st = op == HOST_PUT    ? gpu_iceberg_put(t, dk, n, dr, di, 0, 0, err)
             : op == HOST_FIND ? gpu_iceberg_find(t, dk, n, dr, di, NULL, 0, err)
                               : gpu_iceberg_erase(t, dk, n, dr, 0, err);
        if (st == FLOE_OK) {
            e = cudaMemcpy(results, dr, n, cudaMemcpyDeviceToHost);
            if (e == cudaSuccess && ids)
                e = cudaMemcpy(ids, di, n * 8, cudaMemcpyDeviceToHost);
            if (e != cudaSuccess)
                st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "batch: %s", cudaGetErrorString(e));
        }
    }
    cudaFree(dk);
    cudaFree(dr);
    cudaFree(di);
    return st;
}

extern "C" floe_status gpu_iceberg_put_host(gpu_iceberg *t, const uint64_t *keys, size_t n, uint8_t *results,
                                            uint64_t *ids, floe_errinfo *err)
{
    return host_op(t, HOST_PUT, keys, n, results, ids, err);
}

extern "C" floe_status gpu_iceberg_erase_host(gpu_iceberg *t, const uint64_t *keys, size_t n, uint8_t *results,
                                              floe_errinfo *err)
{
    return host_op(t, HOST_ERASE, keys, n, results, NULL, err);
}

extern "C" floe_status gpu_iceberg_find_host(gpu_iceberg *t, const uint64_t *keys, size_t n, uint8_t *results,
                                             uint64_t *ids, floe_errinfo *err)
{
    return host_op(t, HOST_FIND, keys, n, results, ids, err);
}

/* Counts of a table's arrays as they are in g/L (waits). */
static floe_status count_levels(const floe_geometry &g, uint64_t *const *L, uint64_t used[3], uint64_t *tomb,
                                floe_errinfo *err)
{
    unsigned long long *d, h[2 * FLOE_LEVELS];
    CUDA_TRY(cudaMalloc(&d, sizeof h), err);
    cudaError_t e = cudaMemset(d, 0, sizeof h);
    for (int l = 0; l < FLOE_LEVELS && e == cudaSuccess; l++) {
        uint64_t nw = floe_level_words(&g.level[l]);
        k_count<<<blocks_for(nw) < COUNT_BLOCKS ? blocks_for(nw) : COUNT_BLOCKS, BLOCK>>>(L[l], nw, g.level[l].row_bits,
                                                                                      d + 2 * l);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    cudaFree(d);
    if (e != cudaSuccess)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "counting rows: %s", cudaGetErrorString(e));
    *tomb = 0;
    for (int l = 0; l < FLOE_LEVELS; l++) {
        used[l] = h[2 * l];
        *tomb += h[2 * l + 1];
    }
    return FLOE_OK;
}

extern "C" floe_status gpu_iceberg_count(gpu_iceberg *t, uint64_t used[3], uint64_t *tombstones, floe_errinfo *err)
{
    return count_levels(t->g, t->level, used, tombstones, err);
}

extern "C" floe_status gpu_iceberg_used(gpu_iceberg *t, uint64_t used[3], floe_errinfo *err)
{
    uint64_t tomb;
    return gpu_iceberg_count(t, used, &tomb, err);
}

extern "C" uint64_t gpu_iceberg_memory(const gpu_iceberg *t)
{
    return t->bytes[0] + t->bytes[1] + t->bytes[2] + t->values_bytes;
}

extern "C" uint64_t gpu_iceberg_slots(const gpu_iceberg *t)
{
    return t->g.total_slots;
}

extern "C" floe_status gpu_iceberg_rebuild(gpu_iceberg *t, uint32_t *addr_bits, uint32_t *three, floe_errinfo *err)
{
    const uint32_t max = floe_max_addr_bits(t->spec.key_bits);
    CUDA_TRY(cudaDeviceSynchronize(), err);
    int *failed;
    CUDA_TRY(cudaMalloc(&failed, sizeof *failed), err);
    uint32_t a3 = *three;
    for (uint32_t a = *addr_bits;; a++, a3 = 0) { /* where a size cannot hold every key: the next power of two */
        if (a > max) {
            cudaFree(failed);
            return floe_errinfo_set(err, FLOE_ERR_FULL, "table cannot grow past 2^%u primary buckets", max);
        }
        gpu_iceberg nt = *t; /* the new arrays; everything else shared */
        floe_status st = alloc_arrays(&nt, a, a3, err);
        if (st != FLOE_OK) {
            cudaFree(failed);
            return st;
        }
        cudaError_t e = cudaMemset(failed, 0, sizeof *failed);
        const levels from = levels_of(t), to = levels_of(&nt);
        const uint64_t total = t->g.total_slots, step = (uint64_t)1 << 30;
        for (uint64_t first = 0; first < total && e == cudaSuccess; first += step) {
            uint64_t count = total - first < step ? total - first : step;
            with_row_bits(nt.g.level[0], [&](auto rb) {
                k_rebuild<decltype(rb)::value><<<blocks_for(count), BLOCK>>>(t->g, from, t->values, nt.g, to,
                                                                             nt.values, t->vb, first, count, failed);
            });
            e = cudaGetLastError();
        }
        int h = 1;
        if (e == cudaSuccess)
            e = cudaMemcpy(&h, failed, sizeof h, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) {
            free_arrays(&nt);
            cudaFree(failed);
            return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "rebuilding: %s", cudaGetErrorString(e));
        }
        if (h) { /* the new size could not hold every key: try larger */
            free_arrays(&nt);
            continue;
        }
        free_arrays(t);
        for (int l = 0; l < FLOE_LEVELS; l++) {
            t->level[l] = nt.level[l];
            t->bytes[l] = nt.bytes[l];
        }
        t->values = nt.values;
        t->values_bytes = nt.values_bytes;
        t->g = nt.g;
        t->addr_bits = a;
        t->three = a3;
        *addr_bits = a;
        *three = a3;
        cudaFree(failed);
        return FLOE_OK;
    }
}

extern "C" floe_status gpu_iceberg_scan(gpu_iceberg *t, uint64_t pos, size_t limit, uint64_t *keys, void *values,
                                        size_t *n, uint64_t *next, int *done, floe_errinfo *err)
{
    const uint64_t total = t->g.total_slots;
    *n = 0;
    *next = pos;
    *done = pos >= total;
    if (pos >= total || limit == 0)
        return FLOE_OK;
    const uint64_t window = total - pos < GPU_SCAN_WINDOW ? total - pos : GPU_SCAN_WINDOW;
    if (!t->scan_pos) {
        CUDA_TRY(cudaMalloc(&t->scan_pos, GPU_SCAN_WINDOW * sizeof(uint64_t)), err);
        CUDA_TRY(cudaMalloc(&t->scan_count, sizeof *t->scan_count), err);
    }
    live_slot pred;
    pred.g = t->g;
    pred.lv = levels_of(t);
    thrust::counting_iterator<uint64_t> first(pos);
    size_t need = 0;
    CUDA_TRY(cub::DeviceSelect::If(NULL, need, first, t->scan_pos, t->scan_count, (int64_t)window, pred), err);
    if (need > t->scan_tmp_bytes) {
        cudaFree(t->scan_tmp);
        t->scan_tmp = NULL;
        t->scan_tmp_bytes = 0;
        CUDA_TRY(cudaMalloc(&t->scan_tmp, need), err);
        t->scan_tmp_bytes = need;
    }
    size_t have = t->scan_tmp_bytes;
    CUDA_TRY(cub::DeviceSelect::If(t->scan_tmp, have, first, t->scan_pos, t->scan_count, (int64_t)window, pred), err);
    unsigned long long found = 0;
    CUDA_TRY(cudaMemcpy(&found, t->scan_count, sizeof found, cudaMemcpyDeviceToHost), err);
    uint64_t m = found < limit ? found : limit;
    uint64_t resume = pos + window;
    if (m > 0) {
        uint64_t *dkeys = NULL;
        void *dvals = NULL;
        cudaError_t e = cudaMalloc(&dkeys, m * 8);
        if (e == cudaSuccess && values)
            e = cudaMalloc(&dvals, m * t->vb);
        if (e == cudaSuccess) {
            k_scan_gather<<<blocks_for(m), BLOCK>>>(t->g, levels_of(t), t->scan_pos, m, t->values, t->vb, dkeys,
                                                    values ? dvals : NULL);
            e = cudaGetLastError();
        }
        if (e == cudaSuccess)
            e = cudaMemcpy(keys, dkeys, m * 8, cudaMemcpyDeviceToHost);
        if (e == cudaSuccess && values)
            e = cudaMemcpy(values, dvals, m * t->vb, cudaMemcpyDeviceToHost);
        if (e == cudaSuccess && m < found) { /* stopped at limit: resume after the last key taken */
            uint64_t last;
            e = cudaMemcpy(&last, t->scan_pos + m - 1, sizeof last, cudaMemcpyDeviceToHost);
            resume = last + 1;
        }
        cudaFree(dkeys);
        cudaFree(dvals);
        if (e != cudaSuccess)
            return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "scan: %s", cudaGetErrorString(e));
    }
    *n = (size_t)m;
    *next = resume;
    *done = resume >= total;
    return FLOE_OK;
}

extern "C" floe_status gpu_iceberg_download(gpu_iceberg *t, void *const sections[FLOE_LEVELS + 1], floe_errinfo *err)
{
    CUDA_TRY(cudaDeviceSynchronize(), err);
    for (int l = 0; l < FLOE_LEVELS; l++)
        CUDA_TRY(cudaMemcpy(sections[l], t->level[l], t->bytes[l], cudaMemcpyDeviceToHost), err);
    if (t->vb)
        CUDA_TRY(cudaMemcpy(sections[FLOE_LEVELS], t->values, t->values_bytes, cudaMemcpyDeviceToHost), err);
    return FLOE_OK;
}

extern "C" floe_status gpu_iceberg_upload(gpu_iceberg *t, const void *const sections[FLOE_LEVELS + 1],
                                          uint32_t first_fill, floe_errinfo *err)
{
    CUDA_TRY(cudaDeviceSynchronize(), err);
    t->g.first_fill = first_fill;
    for (int l = 0; l < FLOE_LEVELS; l++)
        CUDA_TRY(cudaMemcpy(t->level[l], sections[l], t->bytes[l], cudaMemcpyHostToDevice), err);
    if (t->vb)
        CUDA_TRY(cudaMemcpy(t->values, sections[FLOE_LEVELS], t->values_bytes, cudaMemcpyHostToDevice), err);
    return FLOE_OK;
}

extern "C" floe_status gpu_iceberg_keys_all(gpu_iceberg *t, uint64_t *d_keys, size_t cap, unsigned long long *d_count,
                                            gpu_stream stream, floe_errinfo *err)
{
    const unsigned blocks = blocks_for(t->g.total_slots) < 8192 ? blocks_for(t->g.total_slots) : 8192;
    k_keys_all<<<blocks, BLOCK, 0, stream>>>(t->g, levels_of(t), d_keys, cap, d_count);
    CUDA_TRY(cudaGetLastError(), err);
    return FLOE_OK;
}

extern "C" floe_status gpu_iceberg_keys_at(gpu_iceberg *t, const uint64_t *d_ids, uint64_t first, size_t n,
                                           uint64_t *d_keys, uint8_t *d_found, gpu_stream stream, floe_errinfo *err)
{
    if (n == 0)
        return FLOE_OK;
    k_keys_at<<<blocks_for(n), BLOCK, 0, stream>>>(t->g, levels_of(t), d_ids, first, n, d_keys, d_found);
    CUDA_TRY(cudaGetLastError(), err);
    return FLOE_OK;
}
