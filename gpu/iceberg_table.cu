/*
 * iceberg_table.cu - the GPU engine's SET and MAP tables as a whole (see
 * iceberg_gpu.h): their arrays' life, counting rows, growing (the keys
 * moved a share at a time with the batches, or all at once by a rebuild)
 * into larger arrays, scans, snapshots' sections in and out, and every key
 * held or the key in given slots.  The batches' kernels are in
 * iceberg_gpu.cu; what both use is iceberg_device.cuh.
 */
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include "iceberg_device.cuh"

/* ---- whole-table kernels: count, rebuild, scan --------------------------------------------------- */

/* out[0] += non-empty rows, out[1] += tombstones, over nwords words: a
 * grid of COUNT_BLOCKS at most, each block's sums added with one atomic
 * each (an atomic a warp queued 10^6 of them on two counters for a root
 * table of 2^20 buckets: 0.85 ms a count on the H100, 0.05 ms now). */
#define COUNT_BLOCKS 2048
__global__ void __launch_bounds__(BLOCK)
    k_count(const uint64_t *words, uint64_t nwords, uint32_t row_bits, unsigned long long *out)
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

/* The slots in column order, as if the table were rows of 32: thread i of
 * count takes slot 32 (i mod S) + i / S.  The keys of one bucket go to one
 * or two buckets of the grown table, and its neighbours' threads all
 * claiming rows there at once would queue on the same words; this way a
 * bucket's slots are taken S threads apart, by different waves. */
__device__ __forceinline__ uint64_t column_order(uint64_t i, uint64_t count)
{
    const uint64_t S = count / 32;
    return i < S * 32 ? (i % S) * 32 + i / S : i;
}

/* Every key of the old table into the new one (distinct keys, no readers:
 * rows go in directly, values after). */
template <int SHAPE>
__global__ void __launch_bounds__(BLOCK, 2)
    k_rebuild(const __grid_constant__ floe_geometry from, const levels old, const void *old_vals,
              const __grid_constant__ floe_geometry to, levels nw, void *new_vals, uint32_t vb, uint64_t first,
              uint64_t count, int *failed)
{
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= count)
        return;
    uint64_t key, p = first + column_order(i, count);
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

/* A moved key put into the new arrays (a key of a table with values left
 * unpublished until its value is written, then published); the put's
 * answer: R_FULL where no probe had room. */
template <int SN>
__device__ __forceinline__ uint8_t put_moved(const floe_geometry &to, const levels &nw, void *new_vals, uint32_t vb,
                                             uint64_t key, uint64_t value)
{
    uint8_t res;
    uint64_t id, put;
    if (vb)
        op_key<SN, true, true>(to, nw.L[0], nw.L[1], nw.L[2], key, &res, &id, &put);
    else
        op_key<SN, true>(to, nw.L[0], nw.L[1], nw.L[2], key, &res, &id, &put);
    if (res == R_INSERTED && vb) {
        value_set(new_vals, vb, id, value);
        publish(to, nw.L[0], nw.L[1], nw.L[2], id, put);
    }
    return res;
}

/* A growth that moves the primary level a group of buckets at a time
 * (floe_geometry_moves_by_group: a doubling, a half, a third): groups
 * [glo, ghi), each group's old buckets' keys into its new buckets in slot
 * order (the levels' prefix order kept), with their values; tombstones are
 * dropped.  A warp a group, a lane a slot: the group's old buckets (and
 * their values) are read before any is placed, each key's place among its
 * new bucket's keys is those before it (a ballot a new bucket), and the new
 * buckets' words are put together in shared memory and stored whole, so
 * that reads and writes stream (a thread a bucket wrote its words a few
 * bytes at a time: a tenth of the memory's speed).  A key past its new
 * bucket's slots (a spread's, rarely) is put as any key is, deeper, once
 * the new buckets are written; one that finds no room there stays where it
 * was (*failed).  With clear, a growth's moves, each old bucket keeps only
 * such keys (as k_move leaves tombstones); a rebuild, which may read the
 * old arrays again for a larger size, leaves them as they were.  The other
 * levels' keys move key by key (k_rebuild, k_move). */
static_assert(FLOE_L0_SLOTS == 32, "k_spread: a lane a primary slot");
#define SPREAD_WARPS (BLOCK / 32)
template <int SN>
__global__ void __launch_bounds__(BLOCK)
    k_spread(const __grid_constant__ floe_geometry from, const levels old, const void *old_vals,
             const __grid_constant__ floe_geometry to, const levels nw, void *new_vals, uint32_t vb, int shape,
             uint64_t glo, uint64_t ghi, bool clear, int *failed)
{
    /* a group's new buckets (or, to clear, its old ones) of rows up to 64 bits */
    __shared__ unsigned long long out[SPREAD_WARPS][FLOE_SPREAD_NEW_MAX * FLOE_L0_SLOTS];
    const floe_level &a = from.level[0], &b = to.level[0];
    const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const unsigned before = (1u << lane) - 1;
    const uint64_t gi = glo + blockIdx.x * (uint64_t)SPREAD_WARPS + warp;
    if (gi >= ghi) /* the whole warp */
        return;
    uint64_t ob[FLOE_SPREAD_OLD_MAX], nb[FLOE_SPREAD_NEW_MAX], row[FLOE_SPREAD_OLD_MAX], val[FLOE_SPREAD_OLD_MAX];
    unsigned nold, nnew;
    floe_spread_group(&from, shape, gi, ob, &nold, nb, &nnew);
#pragma unroll
    for (unsigned k = 0; k < FLOE_SPREAD_OLD_MAX; k++) {
        const bool in = k < nold;
        const uint64_t w = in ? __ldcs(reinterpret_cast<const unsigned long long *>(old.L[0]) + ob[k] * a.words +
                                       floe_row_word(a.row_bits, lane))
                              : 0;
        row[k] = (w >> ((lane * a.row_bits) & 63)) & floe_row_mask(a.row_bits);
        val[k] = in && vb ? value_get(old_vals, vb, floe_slot_id(&from, 0, ob[k], lane)) : 0;
    }
    for (uint32_t i = lane; i < nnew * b.words; i += 32)
        out[warp][i] = 0;
    __syncwarp();
    uint32_t count[FLOE_SPREAD_NEW_MAX] = {0, 0, 0, 0}; /* the same in every lane */
    unsigned over = 0;                                  /* old buckets whose key of this lane goes deeper */
#pragma unroll
    for (unsigned k = 0; k < FLOE_SPREAD_OLD_MAX; k++) {
        if (k >= nold) /* the whole warp */
            break;
        const bool key = floe_row_is_key(row[k], a.row_bits);
        uint64_t nrem = 0;
        const unsigned d =
            key ? floe_spread_dest(&from, &to, shape, k, ob[k], floe_row_remainder(0, row[k]), &nrem) : 0;
        uint32_t j = 0;
#pragma unroll
        for (unsigned e = 0; e < FLOE_SPREAD_NEW_MAX; e++) {
            const unsigned m = __ballot_sync(0xFFFFFFFFu, key && d == e);
            if (key && d == e)
                j = count[e] + (uint32_t)__popc(m & before);
            count[e] += (uint32_t)__popc(m);
        }
        if (key && j < b.slots) {
            atomicOr(&out[warp][d * b.words + floe_row_word(b.row_bits, j)],
                     (unsigned long long)(floe_row_encode(0, nrem, 0) << ((j * b.row_bits) & 63)));
            if (vb)
                value_set(new_vals, vb, floe_slot_id(&to, 0, nb[d], j), val[k]);
        } else if (key) {
            over |= 1u << k;
        }
    }
    __syncwarp();
    for (unsigned e = 0; e < nnew; e++)
        for (uint32_t i = lane; i < b.words; i += 32)
            nw.L[0][nb[e] * b.words + i] = out[warp][e * b.words + i];
    /* the new buckets written (and seen full) before a key goes deeper; out read */
    __syncwarp();
    unsigned stay = 0; /* old buckets whose key of this lane found no room */
    for (unsigned k = 0; k < nold && over; k++) {
        if (!(over >> k & 1))
            continue;
        const uint64_t key = floe_join(&from, 0, 0, ob[k], floe_row_remainder(0, row[k]));
        if (put_moved<SN>(to, nw, new_vals, vb, key, val[k]) == R_FULL) {
            stay |= 1u << k;
            *(volatile int *)failed = 1;
        }
    }
    if (!clear)
        return;
    for (uint32_t i = lane; i < nold * a.words; i += 32)
        out[warp][i] = 0;
    __syncwarp();
    for (unsigned k = 0; k < nold; k++)
        if (stay >> k & 1)
            atomicOr(&out[warp][k * a.words + floe_row_word(a.row_bits, lane)],
                     (unsigned long long)(row[k] << ((lane * a.row_bits) & 63)));
    __syncwarp();
    for (unsigned k = 0; k < nold; k++)
        for (uint32_t i = lane; i < a.words; i += 32)
            old.L[0][ob[k] * a.words + i] = out[warp][k * a.words + i];
}

/* Groups [glo, ghi) of a growth of the shape moved by k_spread, enqueued on s. */
static cudaError_t spread_groups(const floe_geometry &from, const levels &old, const void *old_vals,
                                 const floe_geometry &to, const levels &nw, void *new_vals, uint32_t vb, int shape,
                                 uint64_t glo, uint64_t ghi, bool clear, int *failed, cudaStream_t s)
{
    const uint64_t step = (uint64_t)SPREAD_WARPS << 30; /* groups a launch */
    for (uint64_t lo = glo; lo < ghi; lo += step) {
        const uint64_t hi = ghi - lo < step ? ghi : lo + step;
        with_row_bits(to.level[0], [&](auto rn) {
            k_spread<decltype(rn)::value><<<(unsigned)((hi - lo + SPREAD_WARPS - 1) / SPREAD_WARPS), BLOCK, 0, s>>>(
                from, old, old_vals, to, nw, new_vals, vb, shape, lo, hi, clear, failed);
        });
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            return e;
    }
    return cudaSuccess;
}

/* ---- growth that does not stop the batches (gpu_iceberg_grow) ------------------------------------------ */

/* Moves the key in the row at shift of old word (slot p, bucket b of level
 * l), if it holds one (another thread may have taken it) and, with a
 * filter (ghi > glo), its group is in [glo, ghi), into the new arrays: the
 * slot is claimed BUSY, the key put (with its value, published after it),
 * and the slot made a tombstone; or given its row back where the new
 * arrays cannot place the key (*failed).  Only the mover changes a BUSY
 * slot, so an xor sets its row. */
template <int SN>
__device__ __forceinline__ void move_row(const floe_geometry &from, const void *old_vals, const floe_geometry &to,
                                         const levels &nw, void *new_vals, uint32_t vb, unsigned long long *word,
                                         uint32_t shift, uint32_t rb, uint32_t l, uint64_t b, uint64_t p,
                                         uint32_t gbits, uint64_t glo, uint64_t ghi, int *failed)
{
    const uint64_t mask = floe_row_mask(rb), busy = floe_row_busy(rb);
    unsigned long long cur = *(volatile unsigned long long *)word;
    uint64_t row, key;
    for (;;) {
        row = (cur >> shift) & mask;
        if (!floe_row_is_key(row, rb))
            return;
        key = floe_join(&from, l, floe_row_choice(l, row), b, floe_row_remainder(l, row));
        if (ghi > glo) {
            const uint64_t grp = key_group(from, gbits, key);
            if (grp < glo || grp >= ghi)
                return;
        }
        const unsigned long long seen = atomicCAS(word, cur, cur ^ ((row ^ busy) << shift));
        if (seen == cur)
            break;
        cur = seen;
    }
    /* the slot is BUSY: its value stays as it is until the tombstone */
    if (put_moved<SN>(to, nw, new_vals, vb, key, vb ? value_get(old_vals, vb, p) : 0) == R_FULL) {
        atomicXor(word, (unsigned long long)((busy ^ row) << shift));
        *(volatile int *)failed = 1;
        return;
    }
    atomicXor(word, (unsigned long long)((busy ^ floe_row_tombstone(rb)) << shift));
}

/* Old slots [first, first + count) moved (move_row), in column order. */
template <int SN>
__global__ void __launch_bounds__(BLOCK)
    k_move(const __grid_constant__ floe_geometry from, const levels old, const void *old_vals,
           const __grid_constant__ floe_geometry to, const levels nw, void *new_vals, uint32_t vb, uint64_t first,
           uint64_t count, int *failed)
{
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= count)
        return;
    const uint64_t p = first + column_order(i, count);
    uint32_t shift, rb, l, slot;
    uint64_t b;
    uint64_t *w = slot_word(from, old.L[0], old.L[1], old.L[2], p, &shift, &rb);
    floe_slot_split(&from, p, &l, &b, &slot);
    move_row<SN>(from, old_vals, to, nw, new_vals, vb, reinterpret_cast<unsigned long long *>(w), shift, rb, l, b, p, 0,
                 0, 0, failed);
}

/* A share's moves of the old overflow levels' keys of its groups: each
 * share must look at every overflow slot (a batch may have put a key of
 * any group not moved yet there), and a kernel that moves keys holds too
 * many registers (put_moved) to keep enough loads in flight for a slot a
 * thread (at 2^30 keys, 100 M slots, 3 ms a share).  So a light kernel
 * marks the keys that may be the share's (k_over_marks) and a second moves
 * the marked ones (k_move_marked, a thread 32 marks).  A key's group costs
 * two permutations: worked out once a growth, and kept as its bin. */
#define BIN_BITS    7u
#define BIN_UNKNOWN 0xffu

/* The 32-bit words of marks of overflow level lv: a bit a row, word c *
 * rows + r holding row r of the 32 words of rows [32c, 32c + 32). */
static inline uint64_t marks_words(const floe_level &lv)
{
    const uint64_t words = floe_level_buckets(&lv) * lv.words;
    return (words + 31) / 32 * (64 / lv.row_bits);
}

/* Marks the keys of old overflow level l whose bin is in [blo, bhi]
 * (bins and marks: the level's), a thread a 64-bit word of rows; a key's
 * bin is worked out where it is BIN_UNKNOWN (the growth's first share, a
 * key put since). */
__global__ void __launch_bounds__(BLOCK)
    k_over_marks(const __grid_constant__ floe_geometry from, const uint64_t *L, uint32_t l, uint64_t words,
                 uint32_t gbits, uint32_t bin_shift, uint32_t blo, uint32_t bhi, uint8_t *bins, uint32_t *marks)
{
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    const floe_level &lv = from.level[l];
    const uint32_t rb = lv.row_bits, rows = 64 / rb, wlog = __ffs(lv.words) - 1; /* words a bucket: 4, 8, 16 */
    const uint64_t w = i < words ? __ldcg(L + i) : FLOE_ROW_EMPTY;
    for (uint32_t r = 0; r < rows; r++) { /* every lane to the ballots */
        const uint64_t row = (w >> (r * rb)) & floe_row_mask(rb);
        bool mark = false;
        if (floe_row_is_key(row, rb)) {
            uint32_t bin = bins[i * rows + r];
            if (bin == BIN_UNKNOWN) { /* a slot holds no other key till the growth ends */
                const uint64_t key =
                    floe_join(&from, l, floe_row_choice(l, row), i >> wlog, floe_row_remainder(l, row));
                bin = (uint32_t)(key_group(from, gbits, key) >> bin_shift);
                bins[i * rows + r] = (uint8_t)bin;
            }
            mark = bin >= blo && bin <= bhi;
        }
        const unsigned m = __ballot_sync(~0u, mark);
        if ((i & 31) == 0 && i < words)
            marks[i / 32 * rows + r] = m;
    }
}

/* The marked keys of old overflow level l of groups [glo, ghi) moved
 * (move_row), a thread a word of marks (k_over_marks). */
template <int SN>
__global__ void __launch_bounds__(BLOCK)
    k_move_marked(const __grid_constant__ floe_geometry from, const levels old, const void *old_vals,
                  const __grid_constant__ floe_geometry to, const levels nw, void *new_vals, uint32_t vb, uint32_t l,
                  const uint32_t *marks, uint64_t count, uint32_t gbits, uint64_t glo, uint64_t ghi, int *failed)
{
    const uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (j >= count)
        return;
    uint32_t m = marks[j];
    const floe_level &lv = from.level[l];
    const uint32_t rb = lv.row_bits, rows = 64 / rb, r = (uint32_t)(j % rows), wlog = __ffs(lv.words) - 1;
    for (; m; m &= m - 1) {
        const uint64_t i = j / rows * 32 + (__ffs(m) - 1); /* the row's word */
        move_row<SN>(from, old_vals, to, nw, new_vals, vb, reinterpret_cast<unsigned long long *>(old.L[l]) + i, r * rb,
                     rb, l, i >> wlog, lv.first_id + i * rows + r, gbits, glo, ghi, failed);
    }
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
__global__ void __launch_bounds__(BLOCK) k_keys_all(const __grid_constant__ floe_geometry g, const levels lv,
                                                    uint64_t *keys, uint64_t cap, unsigned long long *count)
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
    if (t->vm_l0 || t->vm_values)
        cudaDeviceSynchronize(); /* as cudaFree does: no kernel reads them any more */
    cudaFree(t->block);
    for (int l = 0; l < FLOE_LEVELS; l++)
        t->level[l] = NULL;
    gpu_vmem_free(t->vm_l0);
    gpu_vmem_free(t->vm_values);
    t->block = NULL;
    t->vm_l0 = t->vm_values = NULL;
    t->values = NULL;
}

/* The arrays (and the geometry they follow) of `from` given to `to`. */
static void arrays_from(gpu_iceberg *to, const gpu_iceberg *from)
{
    to->g = from->g;
    to->addr_bits = from->addr_bits;
    to->three = from->three;
    for (int l = 0; l < FLOE_LEVELS; l++) {
        to->level[l] = from->level[l];
        to->bytes[l] = from->bytes[l];
    }
    to->values = from->values;
    to->values_bytes = from->values_bytes;
    to->block = from->block;
    to->vm_l0 = from->vm_l0;
    to->vm_values = from->vm_values;
}

void iceberg_swap_arrays(gpu_iceberg *a, gpu_iceberg *b)
{
    gpu_iceberg tmp;
    arrays_from(&tmp, a);
    arrays_from(a, b);
    arrays_from(b, &tmp);
}

/* The chunks of a growing table's primary level and of its values (vmem.h).
 * A chunk costs the host about 0.2 ms to map and give back (H200: mostly
 * cuMemSetAccess and cuMemUnmap; a run of chunks takes one call of each),
 * and a growth holds up to a chunk of its old and new arrays more than its
 * keys fill.  A SET's batches are short enough for the chunks' cost to
 * show (G1: 64 chunks cost a grown SET 60-80 ms of 300, 16 about 35).  A
 * MAP's values, 4 times the bytes, take 32: each chunk costs the stop of
 * a table under 32 batches (iceberg_move_step) about 40 us to map, and
 * with 64 the largest stop took 7-10 ms against MAP batches of 1.4 (G1),
 * while 16 took the first growth in shares past twice the bytes the keys
 * fill (docs/PERFORMANCE.md, G1). */
#define L0_CHUNKS     16
#define VALUES_CHUNKS 32

/* How alloc_arrays makes a table's primary level and values: whole, in
 * one allocation with the other levels (a cudaMalloc and a cudaFree cost
 * the host 0.1-0.3 ms whatever the size), or a chunk at a time (vmem.h:
 * a growth maps the new arrays' chunks as their keys come and gives the
 * old ones' back as they leave, so the two stay within twice the bytes
 * the keys fill, at about 40 us of the host a chunk), mapped now or, for
 * a growth, not yet. */
enum arrays_kind { ARRAYS_WHOLE, ARRAYS_CHUNKED, ARRAYS_LAZY };

/* Whether t's arrays were made whole (ARRAYS_WHOLE: nothing of them mapped a chunk at a time). */
static bool arrays_whole(const gpu_iceberg *t)
{
    return !t->vm_l0;
}

/* The arrays a table of spec is made with, at creation and at a rebuild: a table that grows maps
 * them a chunk at a time (its growths move a chunk at a time too). */
static arrays_kind arrays_for(const floe_spec *spec)
{
    return spec->grow ? ARRAYS_CHUNKED : ARRAYS_WHOLE;
}

/* Zeroed level and value arrays for 2^addr_bits primary buckets, 1.5 times
 * that with three, of the kind asked.  The other levels share one
 * allocation (t->block): a TREE's root table is rebuilt at each of its
 * growths. */
static floe_status alloc_arrays(gpu_iceberg *t, uint32_t addr_bits, uint32_t three, arrays_kind kind, cudaStream_t s,
                                floe_errinfo *err)
{
    floe_geometry_init(&t->g, t->spec.key_bits, addr_bits, three, t->spec.seed);
    t->addr_bits = addr_bits;
    t->three = three;
    const bool chunked = kind != ARRAYS_WHOLE, lazy = kind == ARRAYS_LAZY;
    /* new arrays: t's pointers may be a copy of arrays in use (a rebuild's,
     * a growth's), which a failure below must not free */
    for (int l = 0; l < FLOE_LEVELS; l++)
        t->level[l] = NULL;
    t->values = t->block = NULL;
    t->vm_l0 = t->vm_values = NULL;
    size_t total = 0, at[FLOE_LEVELS + 1] = {0}, block = 0; /* offsets in the block, 256-byte aligned */
    for (int l = 0; l < FLOE_LEVELS; l++) {
        t->bytes[l] = floe_level_words(&t->g.level[l]) * sizeof(uint64_t);
        total += t->bytes[l];
        if (l > 0 || !chunked) {
            at[l] = block;
            block += (t->bytes[l] + 255) & ~(size_t)255;
        }
    }
    t->values_bytes = t->vb ? (size_t)t->g.total_slots * t->vb : 0;
    total += t->values_bytes;
    at[FLOE_LEVELS] = block;
    if (t->vb && !chunked)
        block += t->values_bytes;
    cudaError_t e = cudaMalloc(&t->block, block);
    if (e != cudaSuccess)
        t->block = NULL;
    else
        e = cudaMemsetAsync(t->block, 0, block, s);
    for (int l = 0; l < FLOE_LEVELS && e == cudaSuccess; l++)
        if (l > 0 || !chunked)
            t->level[l] = (uint64_t *)((char *)t->block + at[l]);
    if (e == cudaSuccess && t->vb && !chunked)
        t->values = (char *)t->block + at[FLOE_LEVELS];
    if (e == cudaSuccess && chunked) {
        e = gpu_vmem_reserve(t->bytes[0], L0_CHUNKS, &t->vm_l0, (void **)&t->level[0]);
        if (e == cudaSuccess && !lazy)
            e = gpu_vmem_map(t->vm_l0, 0, t->bytes[0], 0);
    }
    if (e == cudaSuccess && t->vb && chunked) {
        const size_t primary = (size_t)floe_level_slots(&t->g.level[0]) * t->vb; /* the values of the primary slots */
        e = gpu_vmem_reserve(t->values_bytes, VALUES_CHUNKS, &t->vm_values, &t->values);
        if (e == cudaSuccess)
            e = gpu_vmem_map(t->vm_values, lazy ? primary : 0, lazy ? t->values_bytes - primary : t->values_bytes, 0);
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

/* A growth's kernels, every instantiation, loaded on the current device
 * now: CUDA loads a kernel at its first use (lazy loading, the default),
 * which would be a table's first growth, inside a batch. */
static cudaError_t load_growth_kernels(void)
{
    cudaFuncAttributes a;
    const void *const kernels[] = {
        (const void *)k_move<16>,
        (const void *)k_move<32>,
        (const void *)k_move<64>,
        (const void *)k_move<16 | 1>,
        (const void *)k_move<32 | 1>,
        (const void *)k_move<64 | 1>,
        (const void *)k_move_marked<16>,
        (const void *)k_move_marked<32>,
        (const void *)k_move_marked<64>,
        (const void *)k_move_marked<16 | 1>,
        (const void *)k_move_marked<32 | 1>,
        (const void *)k_move_marked<64 | 1>,
        (const void *)k_over_marks,
    };
    cudaError_t e = cudaSuccess;
    for (size_t i = 0; i < sizeof kernels / sizeof *kernels && e == cudaSuccess; i++)
        e = cudaFuncGetAttributes(&a, kernels[i]);
    return e;
}

extern "C" floe_status gpu_iceberg_create(const floe_spec *spec, uint32_t addr_bits, uint32_t three, gpu_iceberg **out,
                                          floe_errinfo *err)
{
    floe_status st = floe_spec_validate(spec, err);
    if (st != FLOE_OK)
        return st;
    if (spec->kind != FLOE_KIND_SET && spec->kind != FLOE_KIND_MAP && spec->kind != FLOE_KIND_STATIC)
        return floe_errinfo_set(err, FLOE_ERR_UNSUPPORTED,
                                "the GPU iceberg engine holds SET and MAP tables (and STATIC ones until their freeze), "
                                "not %s",
                                floe_kind_name(spec->kind));
    if ((st = iceberg_size_check(spec->key_bits, addr_bits, three, err)) != FLOE_OK)
        return st;
    gpu_iceberg *t = (gpu_iceberg *)calloc(1, sizeof *t);
    if (!t)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    t->spec = *spec;
    if (!t->spec.seed)
        t->spec.seed = 0x243F6A8885A308D3ull;
    t->vb = floe_spec_has_values(spec) ? spec->value_bytes : 0;
    st = alloc_arrays(t, addr_bits, three, arrays_for(spec), 0, err);
    t->piece = PUT_PIECE_KEYS;
    int dev, major;
    t->pdl = cudaGetDevice(&dev) == cudaSuccess &&
             cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9;
    if (st == FLOE_OK && spec->grow) {
        cudaError_t e = cudaMalloc((void **)&t->halt, GPU_LANES_MAX * sizeof *t->halt);
        if (e == cudaSuccess)
            e = cudaMemset(t->halt, 0, GPU_LANES_MAX * sizeof *t->halt);
        if (e == cudaSuccess)
            e = load_growth_kernels();
        if (e != cudaSuccess)
            st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "making a growing table: %s", cudaGetErrorString(e));
    }
    if (st != FLOE_OK) {
        gpu_iceberg_destroy(t);
        return st;
    }
    *out = t;
    return FLOE_OK;
}

/* The old arrays of a growth that ended given back, with their bins (none: nothing). */
static void give_back_retired(gpu_iceberg *t)
{
    gpu_iceberg *o = t->retired;
    if (!o)
        return;
    free_arrays(o);
    cudaFree(o->bins);
    free(o);
    t->retired = NULL;
}

/* A growth's old arrays and its bins set aside, for give_back_retired (none: nothing). */
static void retire_old(gpu_iceberg *t)
{
    give_back_retired(t);
    if (t->old) {
        t->old->bins = t->bins; /* given back with them */
        t->old->bins_bytes = t->bins_bytes;
        t->bins = NULL;
    }
    t->retired = t->old;
    t->old = NULL;
    cudaFree(t->bins);
    t->bins = NULL;
    t->marks = NULL;
    t->bins_bytes = 0;
}

extern "C" void gpu_iceberg_destroy(gpu_iceberg *t)
{
    if (!t)
        return;
    retire_old(t);
    give_back_retired(t);
    cudaFree(t->move_failed);
    cudaFree(t->route);
    gpu_dedup_destroy(t->dedup);
    if (t->share_ev)
        cudaEventDestroy(t->share_ev);
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

/* ---- growth within twice the bytes: groups of keys ---------------------------------------------------- */

/* The primary buckets of groups [lo, hi) of a growth of gbits in geometry g:
 * one range, or one in each third of a table of 1.5 x 2^a buckets (layout.h,
 * floe_split_as: a bucket's low bits there are the top bits of the
 * permutation, its third comes from the low ones).  Returns the ranges. */
static unsigned group_buckets(const floe_geometry &g, uint32_t gbits, uint64_t lo, uint64_t hi, uint64_t first[3],
                              uint64_t count[3])
{
    const floe_level &lv = g.level[0];
    const uint32_t hb = lv.addr_bits - lv.three, sh = hb - gbits;
    const unsigned n = lv.three ? 3 : 1;
    for (unsigned k = 0; k < n; k++) {
        first[k] = ((uint64_t)k << hb) + (lo << sh);
        count[k] = (hi - lo) << sh;
    }
    return n;
}

/* Counts of a table's arrays as they are in g/L (waits): rows that are not
 * EMPTY, and tombstones, per level; of the primary level, with part, only
 * the buckets of groups [glo, ghi) of a growth of gbits (the part of it
 * that is mapped). */
static floe_status count_levels(const floe_geometry &g, uint64_t *const *L, bool part, uint32_t gbits, uint64_t glo,
                                uint64_t ghi, uint64_t used[3], uint64_t tomb[3], floe_errinfo *err)
{
    unsigned long long *d, h[2 * FLOE_LEVELS];
    CUDA_TRY(cudaMalloc(&d, sizeof h), err);
    cudaError_t e = cudaMemset(d, 0, sizeof h);
    for (int l = 0; l < FLOE_LEVELS && e == cudaSuccess; l++) {
        uint64_t first[3] = {0, 0, 0}, count[3] = {floe_level_buckets(&g.level[l]), 0, 0};
        const unsigned ranges = l > 0 || !part ? 1 : ghi > glo ? group_buckets(g, gbits, glo, ghi, first, count) : 0;
        for (unsigned k = 0; k < ranges && e == cudaSuccess; k++) {
            const uint64_t nw = count[k] * g.level[l].words;
            if (nw == 0)
                continue;
            const unsigned blocks = blocks_for(nw) < COUNT_BLOCKS ? blocks_for(nw) : COUNT_BLOCKS;
            k_count<<<blocks, BLOCK>>>(L[l] + first[k] * g.level[l].words, nw, g.level[l].row_bits, d + 2 * l);
            e = cudaGetLastError();
        }
    }
    if (e == cudaSuccess)
        e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    cudaFree(d);
    if (e != cudaSuccess)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "counting rows: %s", cudaGetErrorString(e));
    for (int l = 0; l < FLOE_LEVELS; l++) {
        used[l] = h[2 * l];
        tomb[l] = h[2 * l + 1];
    }
    return FLOE_OK;
}

/* The bytes of n slots of level l of geometry g, with their values (vb bytes a slot). */
static uint64_t slot_bytes(const floe_geometry &g, int l, uint64_t n, uint32_t vb)
{
    return n * (g.level[l].row_bits / 8 + vb);
}

extern "C" floe_status gpu_iceberg_count(gpu_iceberg *t, uint64_t used[3], uint64_t *tombstones, uint64_t *used_bytes,
                                         floe_errinfo *err)
{
    uint64_t tomb[3], old_used[3], old_tomb[3];
    const gpu_iceberg *o = t->old;
    /* while a growth is under way, the new primary level holds groups [0, front), the old one the rest */
    const bool part = iceberg_routing(t);
    floe_status st = count_levels(t->g, t->level, part, t->gbits, 0, t->front, used, tomb, err);
    if (st == FLOE_OK && o) /* its keys, not the tombstones its moves left */
        st = count_levels(o->g, o->level, part, t->gbits, t->front, t->groups, old_used, old_tomb, err);
    if (st != FLOE_OK)
        return st;
    *tombstones = tomb[0] + tomb[1] + tomb[2];
    uint64_t bytes = 0;
    for (int l = 0; l < FLOE_LEVELS; l++) {
        bytes += slot_bytes(t->g, l, used[l], t->vb);
        if (o) {
            bytes += slot_bytes(o->g, l, old_used[l] - old_tomb[l], t->vb);
            used[l] += old_used[l] - old_tomb[l];
        }
    }
    if (used_bytes)
        *used_bytes = bytes;
    return FLOE_OK;
}

extern "C" floe_status gpu_iceberg_used(gpu_iceberg *t, uint64_t used[3], floe_errinfo *err)
{
    uint64_t tomb;
    return gpu_iceberg_count(t, used, &tomb, NULL, err);
}

/* The device memory t's arrays hold now (a chunked array's mapped chunks). */
static uint64_t arrays_bytes(const gpu_iceberg *t)
{
    return (t->vm_l0 ? gpu_vmem_mapped(t->vm_l0) : t->bytes[0]) + t->bytes[1] + t->bytes[2] +
           (t->vm_values ? gpu_vmem_mapped(t->vm_values) : t->values_bytes);
}

/* The slots of a growth's old overflow levels. */
static uint64_t over_slots(const gpu_iceberg *o)
{
    return o->g.total_slots - o->g.level[1].first_id;
}

extern "C" uint64_t gpu_iceberg_memory(const gpu_iceberg *t)
{
    const gpu_iceberg *r = t->retired;
    return arrays_bytes(t) + (t->old ? arrays_bytes(t->old) : 0) + t->bins_bytes +
           (r ? arrays_bytes(r) + r->bins_bytes : 0);
}

extern "C" uint64_t gpu_iceberg_slots(const gpu_iceberg *t)
{
    return t->g.total_slots;
}

/* gpu_iceberg_rebuild_on of t's arrays (a growth under way keeps its old arrays). */
static floe_status rebuild_arrays(gpu_iceberg *t, uint32_t *addr_bits, uint32_t *three, cudaStream_t s,
                                  floe_errinfo *err)
{
    const uint32_t max = floe_max_addr_bits(t->spec.key_bits);
    if (!s)
        CUDA_TRY(cudaDeviceSynchronize(), err); /* the batches before, on any stream */
    /* the flag is kept for the table's next rebuild or growth */
    if (!t->move_failed)
        CUDA_TRY(cudaMalloc(&t->move_failed, sizeof(int)), err);
    int *failed = t->move_failed;
    uint32_t a3 = *three;
    for (uint32_t a = *addr_bits;; a++, a3 = 0) { /* where a size cannot hold every key: the next power of two */
        if (a > max)
            return floe_errinfo_set(err, FLOE_ERR_FULL, "table cannot grow past 2^%u primary buckets", max);
        gpu_iceberg nt = *t; /* the new arrays; everything else shared */
        floe_status st = alloc_arrays(&nt, a, a3, arrays_for(&t->spec), s, err);
        if (st != FLOE_OK)
            return st;
        cudaError_t e = cudaMemsetAsync(failed, 0, sizeof *failed, s);
        const levels from = levels_of(t), to = levels_of(&nt);
        const uint64_t total = t->g.total_slots, step = (uint64_t)1 << 30;
        uint64_t begin = 0; /* the first slot moved key by key */
        const int shape = floe_geometry_moves_by_group(&t->g, &nt.g);
        if (shape && e == cudaSuccess) {
            const uint64_t groups = floe_level_buckets(&t->g.level[0]) / floe_spread_olds(shape);
            e = spread_groups(t->g, from, t->values, nt.g, to, nt.values, t->vb, shape, 0, groups, false, failed, s);
            begin = t->g.level[1].first_id;
        }
        for (uint64_t first = begin; first < total && e == cudaSuccess; first += step) {
            uint64_t count = total - first < step ? total - first : step;
            with_row_bits(nt.g.level[0], [&](auto rb) {
                k_rebuild<decltype(rb)::value><<<blocks_for(count), BLOCK, 0, s>>>(
                    t->g, from, t->values, nt.g, to, nt.values, t->vb, first, count, failed);
            });
            e = cudaGetLastError();
        }
        int h = 1;
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(&h, failed, sizeof h, cudaMemcpyDeviceToHost, s);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(s);
        if (e != cudaSuccess) {
            free_arrays(&nt);
            return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "rebuilding: %s", cudaGetErrorString(e));
        }
        if (h) { /* the new size could not hold every key: try larger */
            free_arrays(&nt);
            continue;
        }
        free_arrays(t);
        arrays_from(t, &nt); /* alloc_arrays set its addr_bits and three: a, a3 */
        *addr_bits = a;
        *three = a3;
        return FLOE_OK;
    }
}

extern "C" floe_status gpu_iceberg_rebuild(gpu_iceberg *t, uint32_t *addr_bits, uint32_t *three, floe_errinfo *err)
{
    return gpu_iceberg_rebuild_on(t, addr_bits, three, NULL, err);
}

extern "C" floe_status gpu_iceberg_rebuild_on(gpu_iceberg *t, uint32_t *addr_bits, uint32_t *three, gpu_stream stream,
                                              floe_errinfo *err)
{
    floe_status st = gpu_iceberg_settle(t, err);
    return st == FLOE_OK ? rebuild_arrays(t, addr_bits, three, (cudaStream_t)stream, err) : st;
}

extern "C" int gpu_iceberg_growing(const gpu_iceberg *t)
{
    return t->old != NULL;
}

/* ---- growth within twice the bytes: the moves (gpu_iceberg_grow) ------------------------------------------ */

/* A batch of more keys than the old arrays' slots / ROUTE_SHARE ends a growth first (iceberg_move_step). */
#define ROUTE_SHARE 32u

/* Old slots [first, first + count) moved, enqueued on s. */
static floe_status move_slots(gpu_iceberg *t, uint64_t first, uint64_t count, cudaStream_t s, floe_errinfo *err)
{
    const gpu_iceberg *o = t->old;
    const uint64_t step = (uint64_t)1 << 30;
    for (uint64_t at = 0; at < count; at += step) {
        const uint64_t m = count - at < step ? count - at : step;
        with_row_bits(t->g.level[0], [&](auto rn) {
            k_move<decltype(rn)::value><<<blocks_for(m), BLOCK, 0, s>>>(
                o->g, levels_of(o), o->values, t->g, levels_of(t), t->values, t->vb, first + at, m, t->move_failed);
        });
        CUDA_TRY(cudaGetLastError(), err);
    }
    return FLOE_OK;
}

/* The old overflow levels' keys of groups [glo, ghi) moved, enqueued on s. */
static floe_status move_overflow(gpu_iceberg *t, uint64_t glo, uint64_t ghi, cudaStream_t s, floe_errinfo *err)
{
    static_assert((FLOE_L1_SLOTS & (FLOE_L1_SLOTS - 1)) == 0, "k_over_marks: a power of two of words a bucket");
    const gpu_iceberg *o = t->old;
    const uint64_t over = o->g.level[1].first_id;
    uint64_t marks_at = 0;
    for (uint32_t l = 1; l < FLOE_LEVELS; l++) {
        const floe_level &lv = o->g.level[l];
        const uint64_t words = floe_level_buckets(&lv) * lv.words, nm = marks_words(lv);
        uint8_t *bins = t->bins + (lv.first_id - over);
        uint32_t *marks = t->marks + marks_at;
        assert(nm / BLOCK < UINT32_MAX && words / BLOCK < UINT32_MAX); /* a grid of 32-bit size */
        k_over_marks<<<blocks_for(words), BLOCK, 0, s>>>(o->g, o->level[l], l, words, t->gbits, t->bin_shift,
                                                         (uint32_t)(glo >> t->bin_shift),
                                                         (uint32_t)((ghi - 1) >> t->bin_shift), bins, marks);
        CUDA_TRY(cudaGetLastError(), err);
        with_row_bits(t->g.level[0], [&](auto rn) {
            k_move_marked<decltype(rn)::value>
                <<<blocks_for(nm), BLOCK, 0, s>>>(o->g, levels_of(o), o->values, t->g, levels_of(t), t->values, t->vb,
                                                  l, marks, nm, t->gbits, glo, ghi, t->move_failed);
        });
        CUDA_TRY(cudaGetLastError(), err);
        marks_at += nm;
    }
    return FLOE_OK;
}

/* Maps (zeroed on s) or unmaps the chunks of a chunked table's primary level
 * and values that hold the buckets of groups [lo, hi). */
static cudaError_t chunks_of_groups(gpu_iceberg *t, uint32_t gbits, uint64_t lo, uint64_t hi, bool map, cudaStream_t s)
{
    uint64_t first[3], count[3];
    const unsigned n = group_buckets(t->g, gbits, lo, hi, first, count);
    const floe_level &lv = t->g.level[0];
    cudaError_t e = cudaSuccess;
    for (unsigned k = 0; k < n && e == cudaSuccess; k++) {
        const size_t w = lv.words * sizeof(uint64_t), v = (size_t)lv.slots * t->vb;
        if (t->vm_l0)
            e = map ? gpu_vmem_map(t->vm_l0, first[k] * w, count[k] * w, s)
                    : gpu_vmem_unmap(t->vm_l0, first[k] * w, count[k] * w);
        if (e == cudaSuccess && t->vm_values)
            e = map ? gpu_vmem_map(t->vm_values, first[k] * v, count[k] * v, s)
                    : gpu_vmem_unmap(t->vm_values, first[k] * v, count[k] * v);
    }
    return e;
}

/* Groups [lo, hi) moved, enqueued on s: the new arrays' buckets of them
 * mapped, then the keys of the old primary buckets of them and those of
 * them in the old overflow levels moved; front = hi. */
static floe_status move_groups(gpu_iceberg *t, uint64_t lo, uint64_t hi, cudaStream_t s, floe_errinfo *err)
{
    const gpu_iceberg *o = t->old;
    const cudaError_t e = chunks_of_groups(t, t->gbits, lo, hi, true, s);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* an out-of-memory error is not sticky */
        return floe_errinfo_set(err, e == cudaErrorMemoryAllocation ? FLOE_ERR_FULL : FLOE_ERR_INTERNAL,
                                "device memory for table %s's growth: %s", t->spec.name, cudaGetErrorString(e));
    }
    floe_status st = FLOE_OK;
    const int shape = floe_geometry_moves_by_group(&o->g, &t->g);
    if (shape && floe_level_buckets(&o->g.level[0]) / floe_spread_olds(shape) == t->groups) { /* a group at a time */
        CUDA_TRY(spread_groups(o->g, levels_of(o), o->values, t->g, levels_of(t), t->values, t->vb, shape, lo, hi, true,
                               t->move_failed, s),
                 err);
    } else { /* a larger step: key by key */
        uint64_t first[3], count[3];
        const unsigned n = group_buckets(o->g, t->gbits, lo, hi, first, count);
        const uint64_t per = o->g.level[0].slots;
        for (unsigned k = 0; k < n && st == FLOE_OK; k++)
            st = move_slots(t, first[k] * per, count[k] * per, s, err);
    }
    if (st == FLOE_OK) /* the overflow levels: their keys of these groups */
        st = move_overflow(t, lo, hi, s, err);
    if (st == FLOE_OK)
        t->front = hi;
    return st;
}

/* The old arrays' chunks of groups [0, hi) given back: every key of them
 * moved (no kernel reads them any more). */
static floe_status release_groups(gpu_iceberg *t, uint64_t hi, floe_errinfo *err)
{
    /* from group 0 each time: a chunk across the last boundary goes back only now */
    const cudaError_t e = chunks_of_groups(t->old, t->gbits, 0, hi, false, 0);
    if (e != cudaSuccess)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "giving back table %s's old arrays: %s", t->spec.name,
                                cudaGetErrorString(e));
    t->released = hi;
    return FLOE_OK;
}

static floe_status settle_on(gpu_iceberg *t, cudaStream_t s, floe_errinfo *err);

/* The old chunks of the groups that the shares so far moved given back,
 * once the last share is done (its event: waited for, so that a share's old
 * chunks go back before the next one's new chunks are mapped and the two
 * arrays stay within twice the bytes the keys fill, rather than piling up
 * while the host runs ahead of the device); where a move found no room in
 * the new arrays, the growth ends here instead (settle_on, which waits). */
static floe_status release_done(gpu_iceberg *t, cudaStream_t s, floe_errinfo *err)
{
    if (!t->old || t->shared_front <= t->released)
        return FLOE_OK;
    CUDA_TRY(cudaEventSynchronize(t->share_ev), err);
    int failed = 0;
    CUDA_TRY(cudaMemcpy(&failed, t->move_failed, sizeof failed, cudaMemcpyDeviceToHost), err);
    return failed ? settle_on(t, s, err) : release_groups(t, t->shared_front, err);
}

/* Ends the growth under way, waiting for s: the groups left moved, a
 * sixteenth at a time, the old chunks of each given back before the next
 * is mapped; where a key could not be placed (the new arrays have 4/3 of
 * the old's slots or more: not met below fill 0.9), the new arrays double
 * at once and every key still in the old arrays moves again; then the old
 * arrays are set aside whole (retire_old), for the caller to give back. */
#define SETTLE_WHOLE ((size_t)256 << 20)
static floe_status settle_on(gpu_iceberg *t, cudaStream_t s, floe_errinfo *err)
{
    gpu_iceberg *o = t->old;
    if (!o)
        return FLOE_OK;
    /* a sixteenth at a time where that bounds the bytes; old arrays below SETTLE_WHOLE, or whole ones,
     * at once (their chunks are few or none, and a step costs a wait) */
    const bool at_once = arrays_whole(o) || o->bytes[0] < SETTLE_WHOLE || t->groups < 16;
    const uint64_t step = at_once ? t->groups : t->groups / 16;
    int failed = 0;
    floe_status st = FLOE_OK;
    while (st == FLOE_OK && !failed && t->front < t->groups) {
        const uint64_t hi = t->groups - t->front < step ? t->groups : t->front + step;
        if ((st = move_groups(t, t->front, hi, s, err)) != FLOE_OK)
            return st;
        CUDA_TRY(cudaMemcpyAsync(&failed, t->move_failed, sizeof failed, cudaMemcpyDeviceToHost, s), err);
        CUDA_TRY(cudaStreamSynchronize(s), err);
        if (!failed && t->front < t->groups) /* the last step's go back with the rest */
            st = release_groups(t, t->front, err);
    }
    while (st == FLOE_OK && failed) {
        /* the new primary level whole, for the rebuild to read; the old keys of groups
         * [released, groups) and of its overflow levels into the doubled arrays */
        cudaError_t e = chunks_of_groups(t, t->gbits, 0, t->groups, true, s);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(s);
        if (e != cudaSuccess)
            return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "growing table %s: %s", t->spec.name,
                                    cudaGetErrorString(e));
        uint32_t a = t->addr_bits + 1, a3 = 0;
        if ((st = rebuild_arrays(t, &a, &a3, 0, err)) != FLOE_OK)
            return st;
        CUDA_TRY(cudaMemset(t->move_failed, 0, sizeof(int)), err);
        CUDA_TRY(cudaDeviceSynchronize(), err);
        uint64_t first[3], count[3];
        const unsigned n = group_buckets(o->g, t->gbits, t->released, t->groups, first, count);
        const uint64_t per = o->g.level[0].slots, over = o->g.level[1].first_id;
        for (unsigned k = 0; k < n && st == FLOE_OK; k++)
            st = move_slots(t, first[k] * per, count[k] * per, s, err);
        if (st == FLOE_OK)
            st = move_slots(t, over, over_slots(o), s, err);
        if (st != FLOE_OK)
            return st;
        CUDA_TRY(cudaMemcpyAsync(&failed, t->move_failed, sizeof failed, cudaMemcpyDeviceToHost, s), err);
        CUDA_TRY(cudaStreamSynchronize(s), err);
    }
    if (st != FLOE_OK)
        return st;
    retire_old(t); /* given back by the caller, or after the batch that ended the growth */
    t->gbits = 0;
    t->groups = t->front = t->released = t->shared_front = 0;
    t->owed = 0;
    return FLOE_OK;
}

extern "C" floe_status gpu_iceberg_settle(gpu_iceberg *t, floe_errinfo *err)
{
    if (!t->old) {
        give_back_retired(t);
        return FLOE_OK;
    }
    CUDA_TRY(cudaDeviceSynchronize(), err); /* the batches enqueued on any stream */
    const floe_status st = settle_on(t, 0, err);
    give_back_retired(t);
    return st;
}

static floe_status move_share(gpu_iceberg *t, bool last, cudaStream_t s, floe_errinfo *err);

floe_status iceberg_move_step(gpu_iceberg *t, size_t n, bool ids, cudaStream_t s, floe_errinfo *err)
{
    if (!t->old)
        return FLOE_OK;
    if (ids) /* an old slot's id would not outlive the growth */
        return settle_on(t, s, err);
    /* a batch the old arrays could not take beside their keys (its keys of the groups not moved would
     * go there): the growth ends first, a stop of a table under ROUTE_SHARE times the batch, whose
     * primary level moves a group at a time (k_spread); so does a growing table's into or from
     * whole arrays (made for batches that large; smaller ones since), which in shares would hold
     * whole new arrays from the start, or whole old ones to the end: past twice the bytes */
    if ((uint64_t)n * ROUTE_SHARE > t->old->g.total_slots ||
        (t->spec.grow && (arrays_whole(t) || arrays_whole(t->old))))
        return settle_on(t, s, err);
    floe_status st = move_share(t, true, s, err); /* what the batches before owe, if not moved after them */
    if (st == FLOE_OK && t->old) {
        const uint64_t share = (uint64_t)n * GPU_MOVE_PER_KEY;
        t->owed += share > GPU_MOVE_MIN ? share : GPU_MOVE_MIN;
    }
    return st;
}

/* Whether settle_on's ERR_FULL was chunks it could not map (every key
 * still where its group says: the batches may go on as they were), not the
 * doubling after a key found no room in the new arrays. */
static bool settle_stalled(const gpu_iceberg *t)
{
    int failed = 1;
    return t->old && t->front < t->groups &&
           cudaMemcpy(&failed, t->move_failed, sizeof failed, cudaMemcpyDeviceToHost) == cudaSuccess && !failed;
}

/* The share of old slots the batches owe moved (whole groups, in order),
 * enqueued on s; with last, the last share too, which ends the growth
 * (waits).  Where the device has no memory for a share's chunks now (taken
 * since the growth began), its groups stay where they are, still owed, and
 * the batches go on: a key goes where its group is (FULL where the old
 * arrays have no room), and the next batch tries again. */
static floe_status move_share(gpu_iceberg *t, bool last, cudaStream_t s, floe_errinfo *err)
{
    floe_status st = release_done(t, s, err); /* what the shares before emptied */
    if (st != FLOE_OK || !t->old || t->owed == 0)
        return st;
    const uint64_t per = floe_level_slots(&t->old->g.level[0]) / t->groups; /* primary slots a group */
    const uint64_t left = (t->groups - t->front) * per;
    if (left <= t->owed || left <= GPU_MOVE_MIN) {
        if (!last)
            return FLOE_OK;
        st = settle_on(t, s, err);
        return st == FLOE_ERR_FULL && settle_stalled(t) ? FLOE_OK : st;
    }
    const uint64_t d = (t->owed + per - 1) / per;
    st = move_groups(t, t->front, t->front + d, s, err);
    if (st == FLOE_ERR_FULL)
        return FLOE_OK;
    if (st == FLOE_OK)
        CUDA_TRY(cudaEventRecord(t->share_ev, s), err);
    if (st == FLOE_OK) {
        t->shared_front = t->front;
        t->owed = 0;
    }
    return st;
}

extern "C" floe_status gpu_iceberg_move_owed(gpu_iceberg *t, gpu_stream stream, floe_errinfo *err)
{
    give_back_retired(t); /* a growth that the batch before these kernels ended */
    return move_share(t, false, (cudaStream_t)stream, err);
}

/* The bits of a geometry's primary bucket that are the top bits of the
 * permutation (all of them, but the third's in a table of thirds). */
static uint32_t top_bucket_bits(const floe_geometry &g)
{
    return g.level[0].addr_bits - g.level[0].three;
}

extern "C" floe_status gpu_iceberg_grow(gpu_iceberg *t, uint32_t addr_bits, uint32_t three, size_t batch,
                                        floe_errinfo *err)
{
    floe_status st = gpu_iceberg_settle(t, err);
    if (st == FLOE_OK)
        st = iceberg_size_check(t->spec.key_bits, addr_bits, three, err);
    if (st != FLOE_OK)
        return st;
    floe_geometry to;
    floe_geometry_init(&to, t->spec.key_bits, addr_bits, three, t->spec.seed);
    if (to.total_slots <= t->g.total_slots) /* not a growth the moves make: at once */
        return rebuild_arrays(t, &addr_bits, &three, 0, err);
    if (!t->move_failed)
        CUDA_TRY(cudaMalloc(&t->move_failed, sizeof(int)), err);
    if (!t->share_ev)
        CUDA_TRY(cudaEventCreateWithFlags(&t->share_ev, cudaEventDisableTiming), err);
    CUDA_TRY(cudaDeviceSynchronize(), err); /* the batches before, on any stream */
    gpu_iceberg *o = (gpu_iceberg *)calloc(1, sizeof *o);
    if (!o)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    o->spec = t->spec;
    o->vb = t->vb;
    arrays_from(o, t);
    /* the new primary level (and its values) mapped as the groups move, the rest now; or all of them
     * whole, where batches of this size end this growth at once and the next one too (a stop maps
     * every chunk, and unmaps them at the next: 2-6 ms of the driver's calls for a MAP's); a
     * growth into or from whole arrays is a stop whatever its batches (iceberg_move_step) */
    const bool whole = !t->spec.grow || (uint64_t)batch * ROUTE_SHARE > to.total_slots;
    st = alloc_arrays(t, addr_bits, three, whole ? ARRAYS_WHOLE : ARRAYS_LAZY, 0, err);
    if (st != FLOE_OK) { /* t's arrays are NULL: the old ones back */
        arrays_from(t, o);
        free(o);
        return st;
    }
    const uint32_t a = top_bucket_bits(o->g), b = top_bucket_bits(t->g);
    t->gbits = a < b ? a : b;
    /* the old overflow slots' bins (BIN_UNKNOWN) and marks */
    t->bin_shift = t->gbits > BIN_BITS ? t->gbits - BIN_BITS : 0;
    const size_t nbins = (over_slots(o) + 255) / 256 * 256;
    const size_t bytes = nbins + 4 * (marks_words(o->g.level[1]) + marks_words(o->g.level[2]));
    uint8_t *bins = NULL;
    cudaError_t e = cudaMalloc(&bins, bytes);
    if (e == cudaSuccess && (e = cudaMemset(bins, BIN_UNKNOWN, nbins)) != cudaSuccess)
        cudaFree(bins);
    if (e != cudaSuccess) { /* the old arrays back */
        cudaGetLastError(); /* an out-of-memory error is not sticky */
        free_arrays(t);
        arrays_from(t, o);
        free(o);
        return floe_errinfo_set(err, e == cudaErrorMemoryAllocation ? FLOE_ERR_FULL : FLOE_ERR_INTERNAL,
                                "device memory for table %s's growth: %s", t->spec.name, cudaGetErrorString(e));
    }
    t->bins = bins;
    t->marks = (uint32_t *)(bins + nbins);
    t->bins_bytes = bytes;
    e = cudaMemset(t->move_failed, 0, sizeof(int));
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize(); /* zeroed before any stream's kernel reads them */
    t->old = o;
    t->groups = (uint64_t)1 << t->gbits;
    t->front = t->released = t->shared_front = 0;
    t->owed = 0;
    if (e != cudaSuccess)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "growing: %s", cudaGetErrorString(e));
    return FLOE_OK;
}

extern "C" floe_status gpu_iceberg_scan(gpu_iceberg *t, uint64_t pos, size_t limit, uint64_t *keys, void *values,
                                        size_t *n, uint64_t *next, int *done, floe_errinfo *err)
{
    floe_status st = gpu_iceberg_settle(t, err);
    if (st != FLOE_OK)
        return st;
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
    floe_status st = gpu_iceberg_settle(t, err);
    if (st != FLOE_OK)
        return st;
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
    floe_status st = gpu_iceberg_settle(t, err);
    if (st != FLOE_OK)
        return st;
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
    floe_status st = gpu_iceberg_settle(t, err);
    if (st != FLOE_OK)
        return st;
    const unsigned blocks = blocks_for(t->g.total_slots) < 8192 ? blocks_for(t->g.total_slots) : 8192;
    k_keys_all<<<blocks, BLOCK, 0, stream>>>(t->g, levels_of(t), d_keys, cap, d_count);
    CUDA_TRY(cudaGetLastError(), err);
    return FLOE_OK;
}

extern "C" floe_status gpu_iceberg_keys_at(gpu_iceberg *t, const uint64_t *d_ids, uint64_t first, size_t n,
                                           uint64_t *d_keys, uint8_t *d_found, gpu_stream stream, floe_errinfo *err)
{
    floe_status st = gpu_iceberg_settle(t, err);
    if (st != FLOE_OK || n == 0)
        return st;
    k_keys_at<<<blocks_for(n), BLOCK, 0, stream>>>(t->g, levels_of(t), d_ids, first, n, d_keys, d_found);
    CUDA_TRY(cudaGetLastError(), err);
    return FLOE_OK;
}
