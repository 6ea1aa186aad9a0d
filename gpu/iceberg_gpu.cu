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
#include <cub/device/device_select.cuh>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iceberg_device.cuh"

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

template <int SHAPE, bool insert>
__global__ void __launch_bounds__(BLOCK, insert ? PUT_BLOCKS : FIND_BLOCKS)
    k_op(const __grid_constant__ floe_geometry g, uint64_t *L0, uint64_t *L1, uint64_t *L2, const uint64_t *keys,
         uint64_t n, uint8_t *results, uint64_t *ids, unsigned *halt, unsigned seq, const void *vals, uint32_t vb,
         void *vals_out, const key_side pick)
{
    const bool skip = block_halted(halt, seq);
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    if (skip) {
        results[i] = SKIPPED;
        return;
    }
    const uint64_t key = __ldg(keys + i);
    if (off_side(g, pick, key)) {
        results[i] = R_ABSENT;
        return;
    }
    uint8_t res;
    uint64_t id, put;
    op_key<SHAPE, insert>(g, L0, L1, L2, key, &res, &id, &put);
    if (insert && res == R_FULL)
        halt_on_full(halt, seq);
    results[i] = res;
    if (ids)
        ids[i] = id;
    if (vals_out) /* a MAP find: values were published by earlier kernels */
        value_set(vals_out, vb, i, res == R_PRESENT ? value_get(vals, vb, id) : 0);
}

/* MAP find-or-put of the first occurrences of a batch's keys (rep[i] == i,
 * dedup_gpu.cuh; the others wait for the settle): a new key's slot is
 * claimed BUSY, its value written, then its row published; a PRESENT key's
 * value comes back (mode, dedup.h: kept, swapped for the new one, or added
 * to; an add's new key answers 0, the value before it). */
template <int SHAPE>
__global__ void __launch_bounds__(BLOCK, 2)
    k_put_map(const __grid_constant__ floe_geometry g, uint64_t *L0, uint64_t *L1, uint64_t *L2, const uint64_t *keys,
              const uint32_t *rep, const void *in, uint64_t n, uint8_t *results, uint64_t *ids, unsigned *halt,
              unsigned seq, void *vals, uint32_t vb, int mode, void *out, const key_side pick)
{
    const bool skip = block_halted(halt, seq);
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n || rep[i] != i)
        return;
    if (skip) {
        results[i] = SKIPPED;
        return;
    }
    const uint64_t key = __ldg(keys + i);
    if (off_side(g, pick, key)) {
        results[i] = R_ABSENT;
        return;
    }
    uint8_t res;
    uint64_t id, put;
    op_key<SHAPE, true, true>(g, L0, L1, L2, key, &res, &id, &put);
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

/* Find-or-put of key i (skipped: the table is halted; ABSENT: the key is
 * another launch's, see key_side); whether it came back PRESENT.  Id: the
 * ids' type: 64 bits, the slot ids the caller wants (an id of a FULL or
 * ABSENT key is never read), or 32 bits with the answer in them. */
template <int SHAPE, typename Id>
__device__ __forceinline__ bool put_one(const floe_geometry &g, uint64_t *L0, uint64_t *L1, uint64_t *L2,
                                        const uint64_t *keys, uint64_t i, uint8_t *results, Id *ids, bool skip,
                                        unsigned *halt, unsigned seq, const key_side &pick)
{
    const uint64_t key = skip ? 0 : __ldg(keys + i);
    if (skip || off_side(g, pick, key)) {
        results[i] = skip ? SKIPPED : R_ABSENT;
        if constexpr (sizeof(Id) == 4)
            ids[i] = FIX_NONE;
        return false;
    }
    uint8_t res;
    uint64_t id, put;
    op_key<SHAPE, true>(g, L0, L1, L2, key, &res, &id, &put);
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
               unsigned *halt, unsigned seq, bool pdl, const key_side pick)
{
    const bool skip = block_halted(halt, seq);
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i < filter_words)
        filter[i] = 0;
    const bool present = i < n && put_one<SHAPE, Id>(g, L0, L1, L2, keys, i, results, ids, skip, halt, seq, pick);
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
            uint32_t n, uint8_t *results, uint64_t *ids_out, unsigned *halt, unsigned seq, const key_side pick)
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
    uint8_t res = R_ABSENT; /* and for a key of another launch (key_side) */
    uint64_t id = FLOE_NO_ID, put, key = i < n ? keys[i] : 0;
    const bool mine = i < n && !off_side(g, pick, key);
    if (mine)
        op_key<SHAPE, false>(g, L0, L1, L2, key, &res, &id, &put);
    if (insert) {
        __syncthreads(); /* every key looked up before any is put */
        if (mine && res == R_ABSENT) {
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

/* ---- host side ------------------------------------------------------------------------------------ */

static inline unsigned fix_blocks_for(uint64_t n)
{
    return (unsigned)((n + (uint64_t)BLOCK * FIX_KEYS - 1) / ((uint64_t)BLOCK * FIX_KEYS));
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
            t->g, L0, L1, L2, d_keys, n, d_results, d_ids, lane_halt(t), t->seq, t->values, t->vb, d_vout, t->pick);
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
            t->g, L0, L1, L2, d_keys, n, d_results, ids, t->filter, filter_words, L, lane_halt(t), t->seq, pdl,
            t->pick);
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

/* ---- a batch while a growth is under way ---------------------------------------------------------------- */

/* The old side's answers (run into scratch) put in the batch's: its keys'
 * places in res hold the new side's ABSENT (off_side). */
__global__ void k_route_merge(const __grid_constant__ floe_geometry g, const key_side old_side, const uint64_t *keys,
                              uint64_t n, const uint8_t *sres, const uint64_t *sids, const void *svout, uint32_t vb,
                              uint8_t *res, uint64_t *ids, void *vout)
{
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n || off_side(g, old_side, keys[i]))
        return;
    res[i] = sres[i];
    if (ids)
        ids[i] = sids[i];
    if (vout)
        value_set(vout, vb, i, value_get(svout, vb, i));
}

/* One side's run: keys, values in (NULL: none), answers, ids and values out
 * (NULL: not wanted), n of each. */
struct side_io {
    const uint64_t *keys;
    const void *vin;
    uint8_t *res;
    uint64_t *ids;
    void *vout;
};

/* A batch of n keys while a growth is under way: `run` runs it twice, on
 * the old arrays (swapped into t for it) and on the new, each launch
 * taking its side's keys alone (t->pick, key_side) in place, so that
 * nothing waits for the host: the old side answers into scratch, the new
 * side into the batch's arrays, and the old side's answers are put there
 * last.  A key's repeats share its side, so the first occurrence wins as
 * in one run. */
template <typename Run>
static floe_status routed(gpu_iceberg *t, const side_io &io, size_t n, cudaStream_t s, Run run, floe_errinfo *err)
{
    assert(n <= UINT32_MAX);
    const uint32_t vb = t->vb;
    const size_t parts[] = {n, io.ids ? 8 * n : 0, io.vout ? (size_t)vb * n : 0}; /* answers, ids, values out */
    size_t need = 0;
    for (size_t b : parts)
        need += (b + 255) / 256 * 256;
    if (need > t->route_bytes) {
        cudaFree(t->route); /* waits for the kernels that read it */
        t->route = NULL;
        t->route_bytes = 0;
        CUDA_TRY(cudaMalloc(&t->route, need), err);
        t->route_bytes = need;
    }
    char *at = (char *)t->route;
    auto piece = [&](size_t b) {
        char *p = at;
        at += (b + 255) / 256 * 256;
        return (void *)p;
    };
    uint8_t *sres = (uint8_t *)piece(parts[0]);
    uint64_t *sids = (uint64_t *)piece(parts[1]);
    void *svout = piece(parts[2]);
    const side_io old_io = {io.keys, io.vin, sres, io.ids ? sids : NULL, io.vout ? svout : NULL};
    const key_side old_side = {t->front, t->gbits, SIDE_OLD};
    t->pick = old_side;
    iceberg_swap_arrays(t, t->old);
    floe_status st = run(old_io, n);
    iceberg_swap_arrays(t, t->old);
    t->pick.side = SIDE_NEW;
    if (st == FLOE_OK)
        st = run(io, n);
    t->pick.side = SIDE_ALL;
    if (st != FLOE_OK)
        return st;
    k_route_merge<<<blocks_for(n), BLOCK, 0, s>>>(t->g, old_side, io.keys, n, sres, io.ids ? sids : NULL,
                                                  io.vout ? svout : NULL, vb, io.res, io.ids, io.vout);
    CUDA_TRY(cudaGetLastError(), err);
    return FLOE_OK;
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
    floe_status st = iceberg_move_step(t, n, d_ids != NULL, s, err);
    if (st != FLOE_OK)
        return st;
    auto run = [&](const side_io &io, size_t m) {
        if (flags & GPU_NO_DEDUP)
            return launch(t, io.keys, m, true, io.res, io.ids, NULL, s, err);
        const size_t piece = t->piece;
        floe_status r = FLOE_OK;
        for (size_t at = 0; at < m && r == FLOE_OK; at += piece)
            r = put_piece(t, io.keys + at, m - at < piece ? m - at : piece, io.res + at, io.ids ? io.ids + at : NULL, s,
                          err);
        return r;
    };
    const side_io io = {d_keys, NULL, d_results, d_ids, NULL};
    return iceberg_routing(t) ? routed(t, io, n, s, run, err) : run(io, n);
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
    floe_status st = iceberg_move_step(t, n, d_ids != NULL, s, err);
    const void *put_values = NULL;
    if (st == FLOE_OK)
        st = gpu_dedup_run(&t->dedup, d_keys, n, t->spec.key_bits, d_values, t->vb, mode, &put_values, s, err);
    if (st != FLOE_OK)
        return st;
    const uint32_t *rep = t->dedup->rep;
    auto run = [&](const side_io &io, size_t m) {
        uint64_t *L0 = t->level[0], *L1 = t->level[1], *L2 = t->level[2];
        with_row_bits(t->g.level[0], [&](auto rb) {
            k_put_map<decltype(rb)::value><<<blocks_for(m), BLOCK, 0, s>>>(
                t->g, L0, L1, L2, io.keys, rep, io.vin, m, io.res, io.ids, lane_halt(t), t->seq, t->values, t->vb,
                mode, io.vout, t->pick);
        });
        CUDA_TRY(cudaGetLastError(), err);
        return FLOE_OK;
    };
    const side_io io = {d_keys, put_values, d_results, d_ids, d_values_out};
    st = iceberg_routing(t) ? routed(t, io, n, s, run, err) : run(io, n);
    if (st == FLOE_OK)
        st = gpu_dedup_settle(t->dedup, n, t->vb, mode, d_values, d_results, d_ids, d_values_out, s, err);
    return st;
}

extern "C" floe_status gpu_iceberg_erase(gpu_iceberg *t, const uint64_t *d_keys, size_t n, uint8_t *d_results,
                                         gpu_stream stream, floe_errinfo *err)
{
    cudaStream_t s = (cudaStream_t)stream;
    assert_n(n);
    next_seq(t);
    if (n == 0)
        return FLOE_OK;
    floe_status st = iceberg_move_step(t, n, false, s, err);
    if (st != FLOE_OK)
        return st;
    auto run = [&](const side_io &io, size_t m) {
        id_bits claimed; /* an erase claims no slot */
        losers L;
        floe_status r = begin_fixup(t, m, s, &claimed, &L, err);
        if (r != FLOE_OK)
            return r;
        CUDA_TRY(cudaMemsetAsync(L.lost.bits, 0, (L.lost.mask + 1) / 8, s), err);
        if ((r = launch(t, io.keys, m, false, io.res, t->tmp_ids, NULL, s, err)) != FLOE_OK) /* where each key lives */
            return r;
        k_erase<<<blocks_for(m), BLOCK, 0, s>>>(t->g, t->level[0], t->level[1], t->level[2], m, io.res, t->tmp_ids, L);
        k_settle<uint64_t><<<fix_blocks_for(m), BLOCK, 0, s>>>(t->tmp_ids, io.res, m, L, FLOE_ERASED, R_ABSENT);
        CUDA_TRY(cudaGetLastError(), err);
        return FLOE_OK;
    };
    const side_io io = {d_keys, NULL, d_results, NULL, NULL};
    return iceberg_routing(t) ? routed(t, io, n, s, run, err) : run(io, n);
}

extern "C" floe_status gpu_iceberg_find(gpu_iceberg *t, const uint64_t *d_keys, size_t n, uint8_t *d_results,
                                        uint64_t *d_ids, void *d_values_out, gpu_stream stream, floe_errinfo *err)
{
    assert_n(n);
    assert(!d_values_out || t->vb); /* values: a MAP's */
    next_seq(t);
    const cudaStream_t s = (cudaStream_t)stream;
    floe_status st = iceberg_move_step(t, n, d_ids != NULL, s, err);
    if (st != FLOE_OK)
        return st;
    auto run = [&](const side_io &io, size_t m) {
        return launch(t, io.keys, m, false, io.res, io.ids, io.vout, s, err);
    };
    const side_io io = {d_keys, NULL, d_results, d_ids, d_values_out};
    return iceberg_routing(t) && n ? routed(t, io, n, s, run, err) : run(io, n);
}

extern "C" floe_status gpu_iceberg_small(gpu_iceberg *t, int insert, const uint64_t *h_keys, size_t n,
                                         uint8_t *h_results, uint64_t *h_ids, gpu_stream stream, floe_errinfo *err)
{
    cudaStream_t s = (cudaStream_t)stream;
    assert(n >= 1 && n <= GPU_SMALL_KEYS);
    assert(!t->vb); /* a SET's */
    next_seq(t);
    floe_status st = iceberg_move_step(t, n, h_ids != NULL, s, err);
    if (st != FLOE_OK)
        return st;
    auto run = [&](const side_io &io, size_t m) { /* pinned keys and answers: the kernel reads and writes them */
                                                  const unsigned threads = (unsigned)((m + 31) / 32 * 32);
                                                  uint64_t *L0 = t->level[0], *L1 = t->level[1], *L2 = t->level[2];
                                                  with_shape(t->g.level[0], insert, [&](auto rb, auto ins) {
                                                      k_small<decltype(rb)::value, decltype(ins)::value>
                                                          <<<1, threads, 0, s>>>(t->g, L0, L1, L2, io.keys, (uint32_t)m,
                                                                                 io.res, io.ids, lane_halt(t), t->seq,
                                                                                 t->pick);
                                                  });
                                                  CUDA_TRY(cudaGetLastError(), err);
                                                  return FLOE_OK;
    };
    const side_io io = {h_keys, NULL, h_results, h_ids, NULL};
    return iceberg_routing(t) ? routed(t, io, n, s, run, err) : run(io, n);
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
