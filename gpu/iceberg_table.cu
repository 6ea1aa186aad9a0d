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

/* A growth that splits the primary level (floe_geometry_splits): old
 * primary bucket ob's keys into new buckets 2 ob and 2 ob + 1 by their
 * remainder's top bit, in slot order (the levels' prefix order kept), with
 * their values; tombstones are dropped.  A warp a bucket, a lane a slot:
 * each key's place in its half is the keys of that half before it (a
 * ballot); the two new buckets' words are put together in shared memory and
 * stored whole, side by side, so that reads and writes stream (a thread a
 * bucket wrote its words a few bytes at a time: 12.6 ms for 2^25 buckets of
 * 16-bit rows on the H200, a tenth of the memory's speed); a warp's
 * SPLIT_BUCKETS buckets (and their values) are read before any is split.
 * The other levels' keys go through k_rebuild after. */
static_assert(FLOE_L0_SLOTS == 32, "k_split: a lane a primary slot");
#define SPLIT_WARPS   (BLOCK / 32)
#define SPLIT_BUCKETS 4 /* a warp's buckets, read at once: more reads in flight */
__global__ void __launch_bounds__(BLOCK)
    k_split(const __grid_constant__ floe_geometry from, const uint64_t *old0, const void *old_vals,
            const __grid_constant__ floe_geometry to, uint64_t *new0, void *new_vals, uint32_t vb)
{
    __shared__ unsigned long long out[SPLIT_WARPS][2 * FLOE_L0_SLOTS]; /* two buckets of rows up to 64 bits */
    const floe_level &a = from.level[0], &b = to.level[0];
    const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const uint64_t nb = floe_level_buckets(&a), first = (blockIdx.x * (uint64_t)SPLIT_WARPS + warp) * SPLIT_BUCKETS;
    if (first >= nb) /* the whole warp */
        return;
    uint64_t w[SPLIT_BUCKETS], val[SPLIT_BUCKETS];
#pragma unroll
    for (int k = 0; k < SPLIT_BUCKETS; k++) {
        const bool in = first + k < nb;
        w[k] = in ? __ldcs(reinterpret_cast<const unsigned long long *>(old0) + (first + k) * a.words +
                           floe_row_word(a.row_bits, lane))
                  : 0;
        val[k] = in && vb ? value_get(old_vals, vb, floe_slot_id(&from, 0, first + k, lane)) : 0;
    }
#pragma unroll
    for (int k = 0; k < SPLIT_BUCKETS; k++) {
        const uint64_t ob = first + k;
        if (ob >= nb) /* the whole warp */
            break;
        for (uint32_t i = lane; i < 2 * b.words; i += 32)
            out[warp][i] = 0;
        __syncwarp();
        const uint64_t row = (w[k] >> ((lane * a.row_bits) & 63)) & floe_row_mask(a.row_bits);
        const bool key = floe_row_is_key(row, a.row_bits);
        const uint64_t rem = key ? floe_row_remainder(0, row) : 0;
        const uint32_t h = (uint32_t)(rem >> b.rem_bits) & 1;
        const unsigned high = __ballot_sync(0xFFFFFFFFu, key && h), low = __ballot_sync(0xFFFFFFFFu, key && !h);
        const uint32_t j = (uint32_t)__popc((h ? high : low) & ((1u << lane) - 1));
        if (key) {
            const uint64_t nrow = floe_row_encode(0, rem & floe_mask_bits(b.rem_bits), 0);
            atomicOr(&out[warp][h * b.words + floe_row_word(b.row_bits, j)],
                     (unsigned long long)(nrow << ((j * b.row_bits) & 63)));
            if (vb)
                value_set(new_vals, vb, floe_slot_id(&to, 0, 2 * ob + h, j), val[k]);
        }
        __syncwarp();
        for (uint32_t i = lane; i < 2 * b.words; i += 32) /* buckets 2 ob and 2 ob + 1 are side by side */
            new0[2 * ob * b.words + i] = out[warp][i];
        __syncwarp(); /* out read before the next bucket clears it */
    }
}

/* ---- growth that does not stop the batches (gpu_iceberg_grow) ------------------------------------------ */

/* Moves the key in old slot p, if it holds one (another thread may have
 * taken it), into the new arrays: the slot is claimed BUSY, the key put
 * (with its value, published after it), and the slot made a tombstone; or
 * given its row back where the new arrays cannot place the key (*failed).
 * Only the mover changes a BUSY slot, so an xor sets its row. */
template <int SN>
__device__ __forceinline__ void move_slot(const floe_geometry &from, const levels &old, const void *old_vals,
                                          const floe_geometry &to, const levels &nw, void *new_vals, uint32_t vb,
                                          uint64_t p, int *failed)
{
    uint32_t shift, rb;
    uint64_t *w = slot_word(from, old.L[0], old.L[1], old.L[2], p, &shift, &rb);
    unsigned long long *word = reinterpret_cast<unsigned long long *>(w);
    const uint64_t mask = floe_row_mask(rb), busy = floe_row_busy(rb);
    unsigned long long cur = *(volatile unsigned long long *)word;
    uint64_t row;
    for (;;) {
        row = (cur >> shift) & mask;
        if (!floe_row_is_key(row, rb))
            return;
        const unsigned long long seen = atomicCAS(word, cur, cur ^ ((row ^ busy) << shift));
        if (seen == cur)
            break;
        cur = seen;
    }
    uint32_t l, slot;
    uint64_t b;
    floe_slot_split(&from, p, &l, &b, &slot);
    const uint64_t key = floe_join(&from, l, floe_row_choice(l, row), b, floe_row_remainder(l, row));
    uint8_t res;
    uint64_t id, put;
    if (vb)
        op_key<SN, true, true>(to, nw.L[0], nw.L[1], nw.L[2], key, &res, &id, &put);
    else
        op_key<SN, true>(to, nw.L[0], nw.L[1], nw.L[2], key, &res, &id, &put);
    if (res == R_FULL) {
        atomicXor(word, (unsigned long long)((busy ^ row) << shift));
        *(volatile int *)failed = 1;
        return;
    }
    if (res == R_INSERTED && vb) {
        value_set(new_vals, vb, id, value_get(old_vals, vb, p));
        publish(to, nw.L[0], nw.L[1], nw.L[2], id, put);
    }
    atomicXor(word, (unsigned long long)((busy ^ floe_row_tombstone(rb)) << shift));
}

/* Old slots moved: slots[i] for i < count where slots is not NULL
 * (UINT64_MAX: none), else [first, first + count) in column order. */
template <int SN>
__global__ void __launch_bounds__(BLOCK)
    k_move(const __grid_constant__ floe_geometry from, const levels old, const void *old_vals,
           const __grid_constant__ floe_geometry to, const levels nw, void *new_vals, uint32_t vb, uint64_t first,
           uint64_t count, const uint64_t *slots, int *failed)
{
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= count)
        return;
    const uint64_t p = slots ? slots[i] : first + column_order(i, count);
    if (p != UINT64_MAX)
        move_slot<SN>(from, old, old_vals, to, nw, new_vals, vb, p, failed);
}

/* Where each of a batch's n keys is in the old arrays (UINT64_MAX: not
 * there, or too wide: the batch answers it), for k_move. */
template <int SO>
__global__ void __launch_bounds__(BLOCK) k_old_slots(const __grid_constant__ floe_geometry from, const levels old,
                                                     const uint64_t *keys, uint64_t n, uint64_t *slots)
{
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const uint64_t key = keys[i];
    uint8_t res = R_ABSENT;
    uint64_t id, put;
    if (!(key & ~floe_mask_bits(from.key_bits)))
        op_key<SO, false>(from, old.L[0], old.L[1], old.L[2], key, &res, &id, &put);
    slots[i] = res == R_PRESENT ? id : UINT64_MAX;
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
    for (int l = 0; l < FLOE_LEVELS; l++) {
        cudaFree(t->level[l]);
        t->level[l] = NULL;
    }
    cudaFree(t->values);
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
}

/* Zeroed level and value arrays for 2^addr_bits primary buckets, 1.5 times that with three. */
static floe_status alloc_arrays(gpu_iceberg *t, uint32_t addr_bits, uint32_t three, floe_errinfo *err)
{
    floe_geometry_init(&t->g, t->spec.key_bits, addr_bits, three, t->spec.seed);
    t->addr_bits = addr_bits;
    t->three = three;
    size_t total = 0;
    cudaError_t e = cudaSuccess;
    /* new arrays: t's pointers may be a copy of arrays in use (a rebuild's,
     * a growth's), which a failure below must not free */
    for (int l = 0; l < FLOE_LEVELS; l++)
        t->level[l] = NULL;
    t->values = NULL;
    for (int l = 0; l < FLOE_LEVELS && e == cudaSuccess; l++) {
        t->bytes[l] = floe_level_words(&t->g.level[l]) * sizeof(uint64_t);
        total += t->bytes[l];
        if ((e = cudaMalloc(&t->level[l], t->bytes[l])) != cudaSuccess)
            t->level[l] = NULL;
        else
            e = cudaMemset(t->level[l], 0, t->bytes[l]);
    }
    t->values_bytes = t->vb ? (size_t)t->g.total_slots * t->vb : 0;
    total += t->values_bytes;
    if (e == cudaSuccess && t->vb) {
        if ((e = cudaMalloc(&t->values, t->values_bytes)) != cudaSuccess)
            t->values = NULL;
        else
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

/* A growth's kernels, every instantiation, loaded on the current device
 * now: CUDA loads a kernel at its first use (lazy loading, the default),
 * which would be a table's first growth, inside a batch. */
static cudaError_t load_growth_kernels(void)
{
    cudaFuncAttributes a;
    const void *const kernels[] = {
        (const void *)k_move<16>,          (const void *)k_move<32>,          (const void *)k_move<64>,
        (const void *)k_move<16 | 1>,      (const void *)k_move<32 | 1>,      (const void *)k_move<64 | 1>,
        (const void *)k_old_slots<16>,     (const void *)k_old_slots<32>,     (const void *)k_old_slots<64>,
        (const void *)k_old_slots<16 | 1>, (const void *)k_old_slots<32 | 1>, (const void *)k_old_slots<64 | 1>,
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
    st = alloc_arrays(t, addr_bits, three, err);
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

extern "C" void gpu_iceberg_destroy(gpu_iceberg *t)
{
    if (!t)
        return;
    if (t->old) {
        free_arrays(t->old);
        free(t->old);
    }
    cudaFree(t->move_failed);
    cudaFree(t->move_list);
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

/* Counts of a table's arrays as they are in g/L (waits): rows that are
 * not EMPTY, and tombstones, per level. */
static floe_status count_levels(const floe_geometry &g, uint64_t *const *L, uint64_t used[3], uint64_t tomb[3],
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
    for (int l = 0; l < FLOE_LEVELS; l++) {
        used[l] = h[2 * l];
        tomb[l] = h[2 * l + 1];
    }
    return FLOE_OK;
}

extern "C" floe_status gpu_iceberg_count(gpu_iceberg *t, uint64_t used[3], uint64_t *tombstones, floe_errinfo *err)
{
    uint64_t tomb[3], old_used[3], old_tomb[3];
    floe_status st = count_levels(t->g, t->level, used, tomb, err);
    if (st == FLOE_OK && t->old) /* its keys, not the tombstones its moves left */
        st = count_levels(t->old->g, t->old->level, old_used, old_tomb, err);
    if (st != FLOE_OK)
        return st;
    *tombstones = tomb[0] + tomb[1] + tomb[2];
    for (int l = 0; l < FLOE_LEVELS && t->old; l++)
        used[l] += old_used[l] - old_tomb[l];
    return FLOE_OK;
}

extern "C" floe_status gpu_iceberg_used(gpu_iceberg *t, uint64_t used[3], floe_errinfo *err)
{
    uint64_t tomb;
    return gpu_iceberg_count(t, used, &tomb, err);
}

static uint64_t arrays_bytes(const gpu_iceberg *t)
{
    return t->bytes[0] + t->bytes[1] + t->bytes[2] + t->values_bytes;
}

extern "C" uint64_t gpu_iceberg_memory(const gpu_iceberg *t)
{
    return arrays_bytes(t) + (t->old ? arrays_bytes(t->old) : 0);
}

extern "C" uint64_t gpu_iceberg_slots(const gpu_iceberg *t)
{
    return t->g.total_slots;
}

/* gpu_iceberg_rebuild of t's arrays (a growth under way keeps its old arrays). */
static floe_status rebuild_arrays(gpu_iceberg *t, uint32_t *addr_bits, uint32_t *three, floe_errinfo *err)
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
        uint64_t begin = 0; /* the first slot moved key by key */
        if (floe_geometry_splits(&t->g, &nt.g)) {
            const uint64_t nb = floe_level_buckets(&t->g.level[0]);
            const uint64_t per_block = SPLIT_WARPS * SPLIT_BUCKETS;
            k_split<<<(unsigned)((nb + per_block - 1) / per_block), BLOCK>>>(t->g, t->level[0], t->values, nt.g,
                                                                             nt.level[0], nt.values, t->vb);
            begin = t->g.level[1].first_id;
        }
        for (uint64_t first = begin; first < total && e == cudaSuccess; first += step) {
            uint64_t count = total - first < step ? total - first : step;
            with_row_bits(nt.g.level[0], [&](auto rb) {
                k_rebuild<decltype(rb)::value><<<blocks_for(count), BLOCK>>>(t->g, from, t->values, nt.g, to, nt.values,
                                                                             t->vb, first, count, failed);
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
        arrays_from(t, &nt); /* alloc_arrays set its addr_bits and three: a, a3 */
        *addr_bits = a;
        *three = a3;
        cudaFree(failed);
        return FLOE_OK;
    }
}

extern "C" floe_status gpu_iceberg_rebuild(gpu_iceberg *t, uint32_t *addr_bits, uint32_t *three, floe_errinfo *err)
{
    floe_status st = gpu_iceberg_settle(t, err);
    return st == FLOE_OK ? rebuild_arrays(t, addr_bits, three, err) : st;
}

extern "C" int gpu_iceberg_growing(const gpu_iceberg *t)
{
    return t->old != NULL;
}

/* Old slots moved, enqueued on s: [first, first + count), or the count
 * slots listed in slots (device memory) where it is not NULL. */
static floe_status move_slots(gpu_iceberg *t, uint64_t first, uint64_t count, const uint64_t *slots, cudaStream_t s,
                              floe_errinfo *err)
{
    const gpu_iceberg *o = t->old;
    const uint64_t step = (uint64_t)1 << 30;
    for (uint64_t at = 0; at < count; at += step) {
        const uint64_t m = count - at < step ? count - at : step;
        with_row_bits(t->g.level[0], [&](auto rn) {
            k_move<decltype(rn)::value><<<blocks_for(m), BLOCK, 0, s>>>(o->g, levels_of(o), o->values, t->g,
                                                                        levels_of(t), t->values, t->vb, first + at, m,
                                                                        slots ? slots + at : NULL, t->move_failed);
        });
        CUDA_TRY(cudaGetLastError(), err);
    }
    return FLOE_OK;
}

/* Ends the growth under way: the old slots not yet moved are, and, where a
 * key could not be placed (the new arrays have 4/3 of the old's slots or
 * more: not met below fill 0.9), every old slot again after the new arrays
 * double at once; then
 * the old arrays are freed.  Waits for s. */
static floe_status settle_on(gpu_iceberg *t, cudaStream_t s, floe_errinfo *err)
{
    gpu_iceberg *o = t->old;
    if (!o)
        return FLOE_OK;
    for (uint64_t from = t->moved;; from = 0) {
        floe_status st = move_slots(t, from, o->g.total_slots - from, NULL, s, err);
        if (st != FLOE_OK)
            return st;
        int failed = 1;
        CUDA_TRY(cudaMemcpyAsync(&failed, t->move_failed, sizeof failed, cudaMemcpyDeviceToHost, s), err);
        CUDA_TRY(cudaStreamSynchronize(s), err);
        if (!failed)
            break;
        uint32_t a = t->addr_bits + 1, a3 = 0;
        if ((st = rebuild_arrays(t, &a, &a3, err)) != FLOE_OK)
            return st;
        CUDA_TRY(cudaMemset(t->move_failed, 0, sizeof(int)), err);
        CUDA_TRY(cudaDeviceSynchronize(), err);
    }
    free_arrays(o);
    free(o);
    t->old = NULL;
    t->moved = 0;
    t->owed = 0;
    return FLOE_OK;
}

extern "C" floe_status gpu_iceberg_settle(gpu_iceberg *t, floe_errinfo *err)
{
    if (!t->old)
        return FLOE_OK;
    CUDA_TRY(cudaDeviceSynchronize(), err); /* the batches enqueued on any stream */
    return settle_on(t, 0, err);
}

static floe_status move_share(gpu_iceberg *t, bool last, cudaStream_t s, floe_errinfo *err);

floe_status iceberg_move_step(gpu_iceberg *t, const uint64_t *keys, size_t n, cudaStream_t s, floe_errinfo *err)
{
    const gpu_iceberg *o = t->old;
    if (!o)
        return FLOE_OK;
    if (n) { /* the batch's keys first: where each is, then those moved */
        if (n > t->move_cap) {
            cudaFree(t->move_list); /* waits for the kernels that read it */
            t->move_list = NULL;
            t->move_cap = 0;
            CUDA_TRY(cudaMalloc(&t->move_list, n * sizeof *t->move_list), err);
            t->move_cap = n;
        }
        with_row_bits(o->g.level[0], [&](auto ro) {
            k_old_slots<decltype(ro)::value><<<blocks_for(n), BLOCK, 0, s>>>(o->g, levels_of(o), keys, n, t->move_list);
        });
        CUDA_TRY(cudaGetLastError(), err);
        floe_status st = move_slots(t, 0, n, t->move_list, s, err);
        if (st != FLOE_OK)
            return st;
    }
    floe_status st = move_share(t, true, s, err); /* what the batches before owe, if not moved after them */
    if (st == FLOE_OK && t->old) {
        const uint64_t share = (uint64_t)n * GPU_MOVE_PER_KEY;
        t->owed += share > GPU_MOVE_MIN ? share : GPU_MOVE_MIN;
    }
    return st;
}

/* The share of old slots the batches owe moved, enqueued on s; with last,
 * the last share too, which ends the growth (waits). */
static floe_status move_share(gpu_iceberg *t, bool last, cudaStream_t s, floe_errinfo *err)
{
    if (!t->old || t->owed == 0)
        return FLOE_OK;
    const uint64_t left = t->old->g.total_slots - t->moved;
    if (left <= t->owed || left <= GPU_MOVE_MIN)
        return last ? settle_on(t, s, err) : FLOE_OK;
    floe_status st = move_slots(t, t->moved, t->owed, NULL, s, err);
    if (st == FLOE_OK) {
        t->moved += t->owed;
        t->owed = 0;
    }
    return st;
}

extern "C" floe_status gpu_iceberg_move_owed(gpu_iceberg *t, gpu_stream stream, floe_errinfo *err)
{
    return move_share(t, false, (cudaStream_t)stream, err);
}

extern "C" floe_status gpu_iceberg_grow(gpu_iceberg *t, uint32_t addr_bits, uint32_t three, floe_errinfo *err)
{
    floe_status st = gpu_iceberg_settle(t, err);
    if (st == FLOE_OK)
        st = iceberg_size_check(t->spec.key_bits, addr_bits, three, err);
    if (st != FLOE_OK)
        return st;
    floe_geometry to;
    floe_geometry_init(&to, t->spec.key_bits, addr_bits, three, t->spec.seed);
    if (to.total_slots <= t->g.total_slots) /* not a growth the moves make: at once */
        return rebuild_arrays(t, &addr_bits, &three, err);
    if (!t->move_failed)
        CUDA_TRY(cudaMalloc(&t->move_failed, sizeof(int)), err);
    CUDA_TRY(cudaDeviceSynchronize(), err); /* the batches before, on any stream */
    gpu_iceberg *o = (gpu_iceberg *)calloc(1, sizeof *o);
    if (!o)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    o->spec = t->spec;
    o->vb = t->vb;
    arrays_from(o, t);
    if ((st = alloc_arrays(t, addr_bits, three, err)) != FLOE_OK) { /* t's arrays are NULL: the old ones back */
        arrays_from(t, o);
        free(o);
        return st;
    }
    cudaError_t e = cudaMemset(t->move_failed, 0, sizeof(int));
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize(); /* zeroed before any stream's kernel reads them */
    t->old = o;
    t->moved = 0;
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
