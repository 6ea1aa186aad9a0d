/*
 * iceberg_device.cuh - what the GPU engine's two files for SET and MAP
 * tables share: the table's struct, the device helpers that read buckets
 * (over bucket_device.cuh's snapshots) and claim slots (one thread per
 * key, see iceberg_gpu.cu), the key in a
 * slot, and the host helpers that pick a kernel's shape.  Included by
 * iceberg_gpu.cu (batches) and iceberg_table.cu (the table as a whole)
 * only: everything here is static or inline.
 */
#ifndef FLOE_GPU_ICEBERG_DEVICE_CUH
#define FLOE_GPU_ICEBERG_DEVICE_CUH

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
#include "bucket_device.cuh"
#include "cuda_try.h"
#include "dedup.h"
#include "dedup_gpu.cuh"
#include "iceberg.h"
#include "iceberg_gpu.h"
#include "layout.h"
#include "vmem.h"

#define BLOCK 256

/* A put runs its batch in pieces of at most this many keys, one after the
 * other in the stream.  A key of a later piece finds its twin's slot
 * PRESENT, as the first occurrence must win, so only twins inside one
 * piece need the fix-up; and a piece's filters (9 bits a key: 18 MB) stay
 * in L2 while the table's traffic streams through it, and its losers' map
 * is a quarter of a 2^26-key batch's (docs/PERFORMANCE.md, K1). */
#define PUT_PIECE_KEYS ((size_t)1 << 24)

/* The keys a launch runs while a batch of a growth runs on both arrays
 * (routed(), iceberg_gpu.cu): every key (ALL: the batches of a table that
 * is not growing), or those of one side, the new arrays' (groups [0,
 * front) and keys too wide, which either side answers alike) or the old
 * arrays'.  A key of the other side is answered ABSENT and touches
 * nothing (off_side). */
enum { SIDE_ALL, SIDE_OLD, SIDE_NEW };
struct key_side {
    uint64_t front;
    uint32_t gbits;
    int side;
};

struct gpu_iceberg {
    floe_spec spec;
    floe_geometry g;
    uint32_t addr_bits, three; /* 2^addr_bits primary buckets, 1.5 times that with three */
    uint64_t *level[FLOE_LEVELS];
    size_t bytes[FLOE_LEVELS];
    void *values; /* MAP: vb bytes per slot */
    size_t values_bytes;
    void *block; /* the one allocation of the arrays not mapped a chunk at a time (alloc_arrays) */
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
    unsigned *batch_tags;    /* TAGGED words: the tag of the last batch with a loser, with a key PRESENT */
    unsigned tag;            /* the current batch's, 1 .. TAG_MAX */
    uint64_t *tmp_ids;
    size_t scratch_cap, tmp_cap;
    /* a batch's id filters (claimed, lost), cleared before each batch */
    uint32_t *filter;
    size_t filter_words;
    bool pdl;     /* the device launches kernels programmatically after the one before (9.0 and up) */
    size_t piece; /* the most keys a put runs at once (gpu_iceberg_put) */
    /* A growing table's primary level and values, mapped a chunk at a time
     * (vmem.h; NULL: plain device memory, mapped whole). */
    gpu_vmem *vm_l0, *vm_values;
    /* A growth under way (gpu_iceberg_grow): the arrays before it, whose
     * keys move into these a group at a time, in order (iceberg_move_step);
     * NULL: none.  A key's group is the top gbits of its primary
     * permutation (key_group): the keys of groups [0, front) live in these
     * arrays, the others in the old ones, and a batch runs on each its own
     * keys (routed(), iceberg_gpu.cu).  The new primary level is mapped
     * for groups [0, front) only, and the old one's chunks of groups [0,
     * released) are given back, so the two stay within twice the bytes
     * the keys fill (docs/OPERATIONS.md, "Backends: CPU and GPU"). */
    gpu_iceberg *old;
    uint32_t gbits;
    uint64_t groups, front, released;
    cudaEvent_t share_ev; /* recorded after the last share, which moved groups [0, shared_front) */
    uint64_t shared_front;
    uint64_t owed; /* slots the batches so far owe the growth (gpu_iceberg_move_owed) */
    /* A growth's old overflow slots: the bin of each one's key (its group >> bin_shift; BIN_UNKNOWN:
     * not worked out yet), and a bit each that marks the keys of a share's bins (k_over_marks), in
     * one allocation of bins_bytes. */
    uint8_t *bins;
    uint32_t *marks;
    size_t bins_bytes;
    uint32_t bin_shift;
    int *move_failed; /* device: a key the new arrays could not place (a growth's: it stayed in the old), or a
                       * rebuild's */
    /* The old arrays (and bins) of a growth that ended inside a batch (iceberg_move_step), given
     * back once the batch's kernels are enqueued (gpu_iceberg_move_owed), so that the driver's
     * unmaps, a few milliseconds at a MAP's stop, overlap them; NULL: none. */
    gpu_iceberg *retired;
    void *route;      /* routed()'s scratch (iceberg_gpu.cu) */
    size_t route_bytes;
    gpu_dedup *dedup; /* a MAP insert's first occurrences (gpu_iceberg_put_map) */
    key_side pick; /* the keys the next launches run (routed(); zero: every key) */
};

/* iceberg_table.cu: with a growth under way, before a batch of n keys runs:
 * the share of the moves that the batches before owe, if
 * gpu_iceberg_move_owed did not move it after them; this batch owes the
 * next share (GPU_MOVE_PER_KEY a key, GPU_MOVE_MIN at least).  The last
 * share ends the growth (waits, frees the old arrays).  A batch that wants
 * ids (the new arrays' slots: valid until the next growth), or one too
 * large for the old arrays' room, ends the growth first.  Enqueued on s. */
floe_status iceberg_move_step(gpu_iceberg *t, size_t n, bool ids, cudaStream_t s, floe_errinfo *err);

/* Whether a batch now runs on the old and the new arrays, each its own keys (routed(), iceberg_gpu.cu). */
static inline bool iceberg_routing(const gpu_iceberg *t)
{
    return t->old != NULL;
}

/* The arrays (and the geometry they follow) of a and b exchanged: a batch
 * of the old arrays' keys runs on t with them in place. */
void iceberg_swap_arrays(gpu_iceberg *a, gpu_iceberg *b);

/* A key's group in a growth of gbits (see gpu_iceberg.old): the top gbits of
 * its primary permutation, where both geometries' primary buckets begin. */
__host__ __device__ __forceinline__ uint64_t key_group(const floe_geometry &g, uint32_t gbits, uint64_t key)
{
    return gbits == 0 ? 0 : floe_permute(&g.perm[0], key) >> (g.key_bits - gbits);
}

/* Whether a launch of pick leaves key alone (see key_side). */
__device__ __forceinline__ bool off_side(const floe_geometry &g, const key_side &pick, uint64_t key)
{
    if (pick.side == SIDE_ALL)
        return false;
    const bool nw = (key & ~floe_mask_bits(g.key_bits)) != 0 || key_group(g, pick.gbits, key) < pick.front;
    return nw != (pick.side == SIDE_NEW);
}

/* ---- device helpers ----------------------------------------------------------------------------- */

enum { R_ABSENT = FLOE_ABSENT, R_PRESENT = FLOE_PRESENT, R_INSERTED = FLOE_INSERTED, R_FULL = FLOE_FULL };

/* A table's shape, one compile-time int S of the kernels that put and find:
 * its level-0 row width (16, 32 or 64 bits), plus 1 where its levels have
 * 1.5 x 2^a buckets (layout.h; a TREE's root table), whose split has a
 * path that a SET or MAP table's kernels then do not carry. */
#define SHAPE_ROW_BITS(S) ((S) & ~1)
#define SHAPE_THREE(S)    (((S)&1) != 0)

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
#define PUT_BLOCKS  3

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

/* ---- host helpers ----------------------------------------------------------------------------------- */

static inline unsigned blocks_for(uint64_t n)
{
    return (unsigned)((n + BLOCK - 1) / BLOCK);
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

static inline levels levels_of(const gpu_iceberg *t)
{
    levels v;
    for (int l = 0; l < FLOE_LEVELS; l++)
        v.L[l] = t->level[l];
    return v;
}

#endif
