/*
 * ordered_device.cuh - what the GPU skiplist's two files share: the
 * pool's struct and a chunk's header words, a group of lanes' search of a
 * chunk (searches and updates both descend), and the host's stream-ordered
 * scratch.  Included by ordered_gpu.cu (updates, the table as a whole) and
 * ordered_search.cu (finds, neighbours, ranges) only.
 */
#ifndef FLOE_GPU_ORDERED_DEVICE_CUH
#define FLOE_GPU_ORDERED_DEVICE_CUH

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>
#include <thrust/iterator/counting_iterator.h>

#include "cuda_try.h"
#include "ordered_gpu.h"

#define NIL        0xFFFFFFFFu
#define DOWN       0x80000000u /* chunk ids are below it: step_of */
#define FENCE      (OC_LANES - 2u)
#define HEAD       (OC_LANES - 1u)
#define FULL_MASK  0xFFFFFFFFu
#define BLOCK      256
#define WARPS      (BLOCK / 32)
#define MAX_LEVELS 48
#define MIN_CHUNKS 1024
#define MAX_GRID   65535u

struct view {
    uint64_t *keys, *vals;
    uint32_t top, height;
};

struct gpu_ordered {
    floe_spec spec;
    uint32_t vb;
    uint64_t *keys, *vals; /* the pool: cap chunks of OC_LANES entries */
    uint64_t cap, used;
    uint32_t height;
    uint32_t head[MAX_LEVELS]; /* each level's first chunk */
    uint64_t live;
    bool (*fits)(void *ctx, uint64_t bytes); /* gpu_ordered_set_limit's (NULL: no limit) */
    void *fits_ctx;
};

/* ---- chunk headers ---------------------------------------------------------------------------- */

__host__ __device__ static inline uint64_t head_word(uint32_t count, uint32_t level, uint32_t next)
{
    return (uint64_t)count | (uint64_t)level << 8 | (uint64_t)next << 32;
}
__host__ __device__ static inline uint32_t head_count(uint64_t h)
{
    return (uint32_t)(h & 0xFF);
}
__host__ __device__ static inline uint32_t head_level(uint64_t h)
{
    return (uint32_t)(h >> 8) & 0xFF;
}
__host__ __device__ static inline uint32_t head_next(uint64_t h)
{
    return (uint32_t)(h >> 32);
}

__device__ static inline uint64_t value_in(const void *v, uint32_t vb, size_t i)
{
    if (vb == 8)
        return ((const uint64_t *)v)[i];
    return vb == 4 ? ((const uint32_t *)v)[i] : 0;
}

__device__ static inline void value_out(void *v, uint32_t vb, size_t i, uint64_t x)
{
    if (vb == 8)
        ((uint64_t *)v)[i] = x;
    else if (vb == 4)
        ((uint32_t *)v)[i] = (uint32_t)x;
}

static inline uint32_t grid_for(size_t threads)
{
    size_t blocks = (threads + BLOCK - 1) / BLOCK;
    return (uint32_t)(blocks < 1 ? 1 : blocks > MAX_GRID ? MAX_GRID : blocks);
}

/* Entry `lane` of chunk c, for kernels that read a chunk a lane an entry
 * (lanes past a chunk narrower than the warp read nothing). */
__device__ static inline uint64_t lane_entry(const uint64_t *a, uint64_t c, uint32_t lane)
{
    return lane < OC_LANES ? a[c * OC_LANES + lane] : 0;
}
static_assert(OC_LANES <= 32, "a warp reads a chunk a lane an entry");

/* ---- searches: a warp per key ----------------------------------------------------------------- */

/* The chunk of level `to` whose range holds k, from the top; every lane
 * gets the same answer. */
__device__ static uint32_t descend(const view v, uint64_t k, uint32_t to)
{
    const uint32_t lane = threadIdx.x & 31;
    uint32_t c = v.top, level = v.height - 1;
    for (;;) {
        const uint64_t key = lane_entry(v.keys, c, lane);
        const uint64_t head = __shfl_sync(FULL_MASK, key, HEAD);
        const uint64_t fence = __shfl_sync(FULL_MASK, key, FENCE);
        const uint32_t next = head_next(head);
        if (next != NIL && k >= fence) {
            c = next;
            continue;
        }
        if (level == to)
            return c;
        const unsigned m = __ballot_sync(FULL_MASK, lane < head_count(head) && key <= k);
        const int i = m ? 31 - __clz(m) : 0;
        c = (uint32_t)v.vals[(uint64_t)c * OC_LANES + i];
        level--;
    }
}

/* Point searches run in groups of GROUP lanes, 32 / GROUP keys to a warp in
 * flight at once: a group reads a chunk (32 entries, 256 bytes) in PER / 2
 * loads of 16 bytes a lane, load j of lane l taking entry pair
 * j GROUP + l, so that each load of a group is one contiguous piece of
 * the chunk and a line is read by consecutive loads (lanes reading every
 * other half of a line make L1 serve each line twice).  Keys of a chunk
 * are sorted, so the entries at or below a key are a prefix: its length is
 * a sum over the group. */
#ifndef OC_GROUP
#define OC_GROUP 4u /* measured against 8 and 16: docs/PERFORMANCE.md */
#endif
#define GROUP OC_GROUP           /* lanes to a key */
#define PER   (OC_LANES / GROUP) /* entries a lane reads */
static_assert(PER >= 2 && PER % 2 == 0, "a lane reads pairs of entries");

struct group {
    uint32_t l;    /* lane in the group */
    unsigned mask; /* the group's lanes */
};

__device__ static inline group group_of(void)
{
    const uint32_t lane = threadIdx.x & 31;
    return group{lane % GROUP, ((1u << GROUP) - 1u) << (lane / GROUP * GROUP)};
}

/* The entry that slot j of lane l holds. */
__device__ static inline uint32_t entry_in(uint32_t l, uint32_t j)
{
    return (j / 2 * GROUP + l) * 2 + (j & 1);
}

/* Lane g.l's entries of chunk c.  A bottom chunk is read once by most
 * searches of a table larger than L2, so it is loaded evicted first, and
 * the levels above stay in L2 longer (docs/PERFORMANCE.md). */
__device__ static inline void load_part(const uint64_t *keys, uint64_t c, const group g, uint64_t k[PER], bool bottom)
{
    const ulonglong2 *p = reinterpret_cast<const ulonglong2 *>(keys + c * OC_LANES) + g.l;
#pragma unroll
    for (uint32_t j = 0; j < PER / 2; j++) {
        const ulonglong2 a = bottom ? __ldcs(p + j * GROUP) : p[j * GROUP];
        k[2 * j] = a.x, k[2 * j + 1] = a.y;
    }
}

__device__ static inline uint32_t group_sum(uint32_t x, const group g)
{
#pragma unroll
    for (uint32_t d = 1; d < GROUP; d *= 2)
        x += __shfl_xor_sync(g.mask, x, d, GROUP);
    return x;
}

/* The header and the fence of the chunk whose entries k holds: the last
 * pair (FENCE, HEAD) is the last lane's last two slots. */
__device__ static inline uint64_t head_of(const uint64_t k[PER], const group g)
{
    return __shfl_sync(g.mask, k[PER - 1], GROUP - 1, GROUP);
}

/* Entry e of the chunk whose entries k holds. */
__device__ static inline uint64_t entry_key(const uint64_t k[PER], uint32_t e, const group g)
{
    const uint32_t slot = e / 2 / GROUP * 2 + (e & 1);
    uint64_t mine = k[0];
#pragma unroll
    for (uint32_t j = 1; j < PER; j++)
        if (slot == j)
            mine = k[j];
    return __shfl_sync(g.mask, mine, e / 2 % GROUP, GROUP);
}

/* How many of the chunk's keys are below x (or at most x: at_most). */
__device__ static inline uint32_t rank_of(const uint64_t k[PER], uint32_t cnt, uint64_t x, bool at_most, const group g)
{
    uint32_t r = 0;
#pragma unroll
    for (uint32_t j = 0; j < PER; j++)
        r += entry_in(g.l, j) < cnt && (at_most ? k[j] <= x : k[j] < x);
    return group_sum(r, g);
}

/* The chunk below entry e of chunk c of `level`.  Above the bottom's
 * level, each search reads a different pointer, once: it is loaded evicted
 * first, so that this level's keys, which each search reads whole, stay
 * in L2 (docs/PERFORMANCE.md). */
__device__ static inline uint32_t child_of(const view v, uint64_t c, uint32_t e, uint32_t level)
{
    const unsigned long long *p = reinterpret_cast<const unsigned long long *>(v.vals + c * OC_LANES + e);
    return (uint32_t)(level == 1 ? __ldcs(p) : *p);
}

/* Where a group goes from the chunk it holds (k), decided by the lane that
 * holds the header and the fence and sent to the others in one 32-bit
 * shuffle: the next chunk (x at or past the fence), or DOWN | the count.
 * Chunk ids stay below DOWN (reserve). */
__device__ static inline uint32_t step_of(const uint64_t k[PER], uint64_t x, const group g)
{
    const uint64_t head = k[PER - 1], fence = k[PER - 2]; /* in the group's last lane */
    const uint32_t next = head_next(head);
    return __shfl_sync(g.mask, next != NIL && x >= fence ? next : DOWN | head_count(head), GROUP - 1, GROUP);
}

/* descend for a group: the chunk of level `to` whose range holds x; its
 * keys in k (this lane's PER), *cnt of them. */
__device__ static uint32_t descend_group(const view v, uint64_t x, uint32_t to, const group g, uint64_t k[PER],
                                         uint32_t *cnt)
{
    uint32_t c = v.top, level = v.height - 1;
    for (;;) {
        load_part(v.keys, c, g, k, level == 0);
        const uint32_t step = step_of(k, x, g);
        if (!(step & DOWN)) {
            c = step;
            continue;
        }
        *cnt = step & ~DOWN;
        if (level == to)
            return c;
        const uint32_t r = rank_of(k, *cnt, x, true, g);
        c = child_of(v, c, r ? r - 1 : 0, level);
        level--;
    }
}

/* The entry of chunk c (keys k) that holds x, or -1: whether a lane holds
 * x is a vote, where is a rank. */
__device__ static inline int entry_of(const uint64_t k[PER], uint32_t cnt, uint64_t x, const group g)
{
    bool here = false;
#pragma unroll
    for (uint32_t j = 0; j < PER; j++)
        here |= entry_in(g.l, j) < cnt && k[j] == x;
    if (!__any_sync(g.mask, here))
        return -1;
    return (int)rank_of(k, cnt, x, false, g);
}

/* The value of entry e of bottom chunk c (read once: evicted first). */
__device__ static inline uint64_t bottom_value(const view v, uint64_t c, uint32_t e)
{
    return __ldcs(reinterpret_cast<const unsigned long long *>(v.vals + c * OC_LANES + e));
}

/* Item i of n for each group of lanes of the grid. */
#define GROUPS_PER_BLOCK (BLOCK / GROUP)
#define FOR_EACH_GROUP_ITEM(i, n)                                                                                      \
    for (size_t i = ((size_t)blockIdx.x * BLOCK + threadIdx.x) / GROUP; i < (n);                                       \
         i += (size_t)gridDim.x * GROUPS_PER_BLOCK)

/* ---- host helpers ------------------------------------------------------------------------------- */

/* Stream-ordered device scratch, freed when it goes out of scope. */
class scratch
{
  public:
    explicit scratch(cudaStream_t s) : stream_(s), n_(0)
    {
    }
    ~scratch()
    {
        for (int i = 0; i < n_; i++)
            cudaFreeAsync(p_[i], stream_);
    }
    template <typename T> cudaError_t get(T **out, size_t count)
    {
        void *p = NULL;
        cudaError_t e = n_ < MAX ? cudaMallocAsync(&p, count * sizeof(T) + 16, stream_) : cudaErrorMemoryAllocation;
        if (e == cudaSuccess)
            p_[n_++] = p;
        *out = (T *)p;
        return e;
    }

  private:
    enum { MAX = 48 };
    cudaStream_t stream_;
    int n_;
    void *p_[MAX];
};

static view view_of(const gpu_ordered *t)
{
    view v = {t->keys, t->vals, t->head[t->height - 1], t->height};
    return v;
}

static floe_status sync(cudaStream_t s, floe_errinfo *err)
{
    CUDA_TRY(cudaStreamSynchronize(s), err);
    CUDA_TRY(cudaGetLastError(), err);
    return FLOE_OK;
}

/* Reads one count back from the device. */
template <typename T> static floe_status read_back(const T *d, T *h, cudaStream_t s, floe_errinfo *err)
{
    CUDA_TRY(cudaMemcpyAsync(h, d, sizeof(T), cudaMemcpyDeviceToHost, s), err);
    return sync(s, err);
}

#endif
