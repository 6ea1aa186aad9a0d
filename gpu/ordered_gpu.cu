/*
 * ordered_gpu.cu - the GPU chunked skiplist of ORDERED tables (see
 * ordered_gpu.h).
 *
 * A chunk is 32 entries of the pool's two arrays, keys and vals: entries
 * 0..29 hold its keys, ascending (the first `count` of them), with their
 * values (at the bottom) or the chunks they lead down to (above); entry
 * FENCE holds the fence key; entry HEAD's key packs the count, the level
 * and the next chunk, so that one warp-wide read of the keys says where a
 * search goes, and HEAD's value is the previous chunk.  The first entry of
 * every level's first chunk above the bottom is key 0: every key is at or
 * past it.
 *
 * An update's kernels each write what no other thread of the same kernel
 * reads or writes (a chunk's run belongs to one group; a new chunk to the
 * one that fills it), and searches run in kernels of their own, so no
 * kernel needs a lock or a fence.
 */
#include "ordered_device.cuh"

/* ---- updates ------------------------------------------------------------------------------------ */

/* The position of the first of a[0..n) that is >= x (a ascending). */
__device__ static inline size_t lower_bound(const uint64_t *a, size_t n, uint64_t x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (a[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The last r with a[r] <= x (a ascending, a[0] <= x). */
__device__ static inline size_t last_at_or_below(const uint64_t *a, size_t n, uint64_t x)
{
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        const size_t mid = lo + (hi - lo) / 2;
        if (a[mid] <= x)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

__global__ void k_iota(uint32_t *a, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        a[i] = (uint32_t)i;
}

/* A key's first occurrence in the sorted batch. */
__global__ void k_group_heads(const uint64_t *sk, size_t n, uint8_t *flag)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        flag[i] = i == 0 || sk[i] != sk[i - 1];
}

/* Entry e's chunk at `level` (a group per entry). */
__global__ void k_locate_level(const view v, const uint64_t *keys, size_t m, uint32_t level, uint32_t *leaf)
{
    const group g = group_of();
    FOR_EACH_GROUP_ITEM(e, m)
    {
        uint64_t k[PER];
        uint32_t cnt;
        const uint32_t c = descend_group(v, keys[e], level, g, k, &cnt);
        if (g.l == 0)
            leaf[e] = c;
    }
}

/* Distinct key j (the group at sorted positions [gfirst[j], gfirst[j + 1]))
 * at the bottom: its chunk, its entry (-1: absent) and its value there.  A
 * present key of an insert with overwrite takes its last occurrence's
 * value.  fresh[j]: absent. */
__global__ void k_locate(const view v, const uint64_t *sk, const uint32_t *si, const uint64_t *gfirst, size_t m,
                         uint32_t *leaf, int8_t *slot, uint64_t *old, uint8_t *fresh, const void *values, uint32_t vb,
                         bool overwrite)
{
    const group g = group_of();
    FOR_EACH_GROUP_ITEM(j, m)
    {
        const uint64_t x = sk[gfirst[j]];
        uint64_t k[PER];
        uint32_t cnt;
        const uint32_t c = descend_group(v, x, 0, g, k, &cnt);
        const int s = entry_of(k, cnt, x, g);
        if (g.l == 0) {
            leaf[j] = c;
            slot[j] = (int8_t)s;
            fresh[j] = s < 0;
            uint64_t *at = &v.vals[(uint64_t)c * OC_LANES + (s < 0 ? 0 : s)];
            old[j] = s < 0 ? 0 : *at;
            if (s >= 0 && overwrite && values)
                *at = value_in(values, vb, si[gfirst[j + 1] - 1]);
        }
    }
}

/* An insert that failed: the stored values of its present keys as they were. */
__global__ void k_restore(const view v, size_t m, const uint32_t *leaf, const int8_t *slot, const uint64_t *old)
{
    for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < m; j += (size_t)gridDim.x * blockDim.x)
        if (slot[j] >= 0)
            v.vals[(uint64_t)leaf[j] * OC_LANES + slot[j]] = old[j];
}

/* The new entries of an insert: new entry e is distinct key fj[e], with
 * the value it stores (its first occurrence's, or with overwrite its
 * last's) and its chunk. */
__global__ void k_gather_new(const uint64_t *sk, const uint32_t *si, const uint64_t *gfirst, const uint32_t *fj,
                             size_t m2, const uint32_t *leaf, const void *values, uint32_t vb, bool overwrite,
                             uint64_t *nk, uint64_t *nv, uint32_t *nleaf)
{
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < m2; e += (size_t)gridDim.x * blockDim.x) {
        const uint32_t j = fj[e];
        nk[e] = sk[gfirst[j]];
        nv[e] = values ? value_in(values, vb, si[overwrite ? gfirst[j + 1] - 1 : gfirst[j]]) : 0;
        nleaf[e] = leaf[j];
    }
}

/* Entry e starts a run: the first of its chunk's entries. */
__global__ void k_run_heads(const uint32_t *leaf, size_t m, uint8_t *flag)
{
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < m; e += (size_t)gridDim.x * blockDim.x)
        flag[e] = e == 0 || leaf[e] != leaf[e - 1];
}

/* Run r: its chunk's keys then and now (t), the chunks they spread over (q)
 * and the new ones among them (extra: q - 1). */
__global__ void k_run_sizes(const view v, const uint64_t *run_start, size_t runs, size_t m, const uint32_t *leaf,
                            uint64_t *run_t, uint64_t *run_q, uint64_t *extra, uint8_t *spreads)
{
    for (size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x; r < runs; r += (size_t)gridDim.x * blockDim.x) {
        const uint64_t len = (r + 1 < runs ? run_start[r + 1] : m) - run_start[r];
        const uint32_t c = leaf[run_start[r]];
        const uint64_t t = head_count(v.keys[(uint64_t)c * OC_LANES + HEAD]) + len;
        const uint64_t q = t <= OC_DATA ? 1 : (t + OC_FILL - 1) / OC_FILL;
        run_t[r] = t;
        run_q[r] = q;
        extra[r] = q - 1;
        spreads[r] = q > 1;
    }
}

/* Each run's chunk as it was, before the scatter overwrites it. */
__global__ void k_stage(const view v, const uint64_t *run_start, const uint32_t *bigs, size_t nb, const uint32_t *leaf,
                        uint64_t *sk, uint64_t *sv)
{
    const size_t total = nb * OC_LANES;
    for (size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x; x < total; x += (size_t)gridDim.x * blockDim.x) {
        const size_t r = bigs[x / OC_LANES], lane = x % OC_LANES;
        const uint64_t at = (uint64_t)leaf[run_start[r]] * OC_LANES + lane;
        sk[r * OC_LANES + lane] = v.keys[at];
        sv[r * OC_LANES + lane] = v.vals[at];
    }
}

/* Position pos of run r's merged keys: its chunk (the run's own for part 0,
 * new ones after) and entry.  Part j holds positions [j t / q, (j + 1) t / q). */
__device__ static inline void place(uint64_t pos, uint64_t t, uint64_t q, uint32_t own, uint64_t first_new,
                                    uint64_t *chunk, uint32_t *entry)
{
    const uint64_t j = ((pos + 1) * q - 1) / t;
    *entry = (uint32_t)(pos - j * t / q);
    *chunk = j == 0 ? own : first_new + j - 1;
}

__global__ void k_scatter_new(const view v, const uint64_t *nk, const uint64_t *nv, size_t m, const uint64_t *run_start,
                              const uint32_t *run_of, const uint32_t *leaf, const uint64_t *run_t,
                              const uint64_t *run_q, const uint64_t *off, uint64_t base, const uint64_t *stk)
{
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < m; e += (size_t)gridDim.x * blockDim.x) {
        const size_t r = run_of[e];
        if (run_q[r] == 1)
            continue; /* k_merge_small's */
        const uint64_t k = nk[e];
        const uint64_t *old = stk + r * OC_LANES;
        const uint32_t n_old = head_count(old[HEAD]);
        uint64_t less = 0;
        for (uint32_t o = 0; o < n_old; o++)
            less += old[o] < k;
        uint64_t chunk;
        uint32_t entry;
        place(e - run_start[r] + less, run_t[r], run_q[r], leaf[run_start[r]], base + off[r], &chunk, &entry);
        v.keys[chunk * OC_LANES + entry] = k;
        v.vals[chunk * OC_LANES + entry] = nv[e];
    }
}

__global__ void k_scatter_old(const view v, const uint64_t *nk, size_t m, const uint64_t *run_start, size_t runs,
                              const uint32_t *bigs, size_t nb, const uint32_t *leaf, const uint64_t *run_t,
                              const uint64_t *run_q, const uint64_t *off, uint64_t base, const uint64_t *stk,
                              const uint64_t *stv)
{
    const size_t total = nb * OC_DATA;
    for (size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x; x < total; x += (size_t)gridDim.x * blockDim.x) {
        const size_t r = bigs[x / OC_DATA], o = x % OC_DATA;
        const uint64_t *old = stk + r * OC_LANES;
        if (o >= head_count(old[HEAD]))
            continue;
        const uint64_t start = run_start[r], len = (r + 1 < runs ? run_start[r + 1] : m) - start;
        uint64_t chunk;
        uint32_t entry;
        place(o + lower_bound(nk + start, len, old[o]), run_t[r], run_q[r], leaf[start], base + off[r], &chunk, &entry);
        v.keys[chunk * OC_LANES + entry] = old[o];
        v.vals[chunk * OC_LANES + entry] = stv[r * OC_LANES + o];
    }
}

/* How many of the first n lanes' values of `sorted` (ascending across the
 * warp) are below x: a binary search over the lanes, five shuffles. */
__device__ static inline uint32_t count_below(uint64_t sorted, uint32_t n, uint64_t x)
{
    uint32_t pos = 0;
    for (uint32_t step = 16; step > 0; step /= 2) {
        const uint32_t at = pos + step - 1 < 31 ? pos + step - 1 : 31;
        const uint64_t v = __shfl_sync(FULL_MASK, sorted, at);
        if (pos + step <= n && v < x)
            pos += step;
    }
    return pos;
}

/* A run whose chunk keeps all its keys and the run's (q 1, most runs of a
 * batch): merged in place by one warp, without staging.  Lane i holds the
 * chunk's entry i and the run's entry i; each goes to its rank among both. */
__global__ void k_merge_small(const view v, uint32_t level, const uint64_t *nk, const uint64_t *nv, size_t m,
                              const uint64_t *run_start, size_t runs, const uint32_t *leaf, const uint64_t *run_q,
                              uint32_t *run_of)
{
    const uint32_t lane = threadIdx.x & 31;
    const size_t stride = (size_t)gridDim.x * WARPS;
    for (size_t r = (size_t)blockIdx.x * WARPS + threadIdx.x / 32; r < runs; r += stride) {
        const uint64_t start = run_start[r], len = (r + 1 < runs ? run_start[r + 1] : m) - start;
        if (run_q[r] != 1) { /* spread over new chunks: the general kernels' */
            for (uint64_t e = start + lane; e < start + len; e += 32)
                run_of[e] = (uint32_t)r;
            continue;
        }
        const uint64_t c = leaf[start];
        const uint64_t key = lane_entry(v.keys, c, lane), val = lane_entry(v.vals, c, lane);
        const uint64_t head = __shfl_sync(FULL_MASK, key, HEAD);
        const uint32_t n_old = head_count(head);
        const bool is_old = lane < n_old, is_new = lane < len;
        const uint64_t nkey = is_new ? nk[start + lane] : 0, nval = is_new ? nv[start + lane] : 0;
        /* new keys below my old key, old keys below my new key: both lists are sorted, so a binary search
         * over the other's lanes (five steps) */
        const uint32_t before_old = count_below(nkey, (uint32_t)len, key), before_new = count_below(key, n_old, nkey);
        for (uint64_t e = start + lane; e < start + len; e += 32)
            run_of[e] = (uint32_t)r; /* for the general kernels, whatever the run */
        __syncwarp(); /* every lane has read the chunk before any writes it */
        if (is_old) {
            v.keys[c * OC_LANES + lane + before_old] = key;
            v.vals[c * OC_LANES + lane + before_old] = val;
        }
        if (is_new) {
            v.keys[c * OC_LANES + lane + before_new] = nkey;
            v.vals[c * OC_LANES + lane + before_new] = nval;
        }
        if (lane == 0)
            v.keys[c * OC_LANES + HEAD] = head_word(n_old + (uint32_t)len, level, head_next(head));
    }
}

/* Output chunk g of the merge of the runs that spread (run r's part j): its header, fence and
 * links, and (a new chunk) its separator for the level above. */
__global__ void k_link(const view v, uint32_t level, const uint64_t *run_start, const uint32_t *bigs, size_t nb,
                       const uint32_t *leaf, const uint64_t *run_t, const uint64_t *run_q, const uint64_t *off,
                       uint64_t base, size_t outputs, const uint64_t *stk, uint64_t *sep_k, uint64_t *sep_v)
{
    for (size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x; g < outputs; g += (size_t)gridDim.x * blockDim.x) {
        /* the spreading run b whose parts hold g: the last b with off[bigs[b]] + b <= g (the runs that fit their
         * chunk add no parts, and k_merge_small wrote their headers) */
        size_t lo = 0, hi = nb;
        while (hi - lo > 1) {
            const size_t mid = lo + (hi - lo) / 2;
            if (off[bigs[mid]] + mid <= g)
                lo = mid;
            else
                hi = mid;
        }
        const size_t r = bigs[lo];
        const uint64_t j = g - (off[r] + lo), t = run_t[r], q = run_q[r];
        const uint32_t own = leaf[run_start[r]];
        const uint64_t id = j == 0 ? own : base + off[r] + j - 1;
        const uint64_t next_id = base + off[r] + j; /* part j + 1 */
        const uint64_t old_head = stk[r * OC_LANES + HEAD], old_fence = stk[r * OC_LANES + FENCE];
        const uint32_t old_next = head_next(old_head);
        const uint32_t size = (uint32_t)((j + 1) * t / q - j * t / q);
        const bool last = j + 1 == q;
        const uint32_t next = last ? old_next : (uint32_t)next_id;
        v.keys[id * OC_LANES + FENCE] = last ? old_fence : v.keys[next_id * OC_LANES];
        v.keys[id * OC_LANES + HEAD] = head_word(size, level, next);
        if (j > 0) {
            v.vals[id * OC_LANES + HEAD] = j == 1 ? own : id - 1;
            sep_k[off[r] + j - 1] = v.keys[id * OC_LANES];
            sep_v[off[r] + j - 1] = id;
        }
        if (last && q > 1 && old_next != NIL)
            v.vals[(uint64_t)old_next * OC_LANES + HEAD] = id;
    }
}

/* Erase: each run's chunk without the run's keys (a warp per run). */
__global__ void k_compact(const view v, const uint64_t *ek, const uint64_t *run_start, size_t runs, size_t m,
                          const uint32_t *eleaf)
{
    const uint32_t lane = threadIdx.x & 31;
    const size_t stride = (size_t)gridDim.x * WARPS;
    for (size_t r = (size_t)blockIdx.x * WARPS + threadIdx.x / 32; r < runs; r += stride) {
        const uint64_t start = run_start[r], len = (r + 1 < runs ? run_start[r + 1] : m) - start;
        const uint64_t c = eleaf[start];
        const uint64_t key = lane_entry(v.keys, c, lane), val = lane_entry(v.vals, c, lane);
        const uint64_t head = __shfl_sync(FULL_MASK, key, HEAD);
        const uint32_t cnt = head_count(head);
        bool keep = false;
        if (lane < cnt) {
            const size_t p = lower_bound(ek + start, len, key);
            keep = p == len || ek[start + p] != key;
        }
        const unsigned kept = __ballot_sync(FULL_MASK, keep);
        __syncwarp();
        if (keep) {
            const uint32_t to = __popc(kept & ((1u << lane) - 1u));
            v.keys[c * OC_LANES + to] = key;
            v.vals[c * OC_LANES + to] = val;
        }
        if (lane == 0)
            v.keys[c * OC_LANES + HEAD] = head_word(__popc(kept), head_level(head), head_next(head));
    }
}

/* The answers of a batch, at each key's place in the caller's order:
 * sorted position i is occurrence i - gfirst[j] of distinct key j. */
__global__ void k_answer_insert(const uint32_t *si, size_t n, const uint64_t *gfirst, size_t m, const int8_t *slot,
                                const uint64_t *old, const void *values, uint32_t vb, bool overwrite, uint8_t *res,
                                void *vout)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t j = last_at_or_below(gfirst, m, i);
        const bool first = i == gfirst[j], had = slot[j] >= 0;
        uint64_t val;
        if (had) /* the stored value, or the occurrence's before it that replaced it */
            val = overwrite && !first && values ? value_in(values, vb, si[i - 1]) : old[j];
        else if (first)
            val = values ? value_in(values, vb, si[i]) : 0;
        else
            val = values ? value_in(values, vb, si[overwrite ? i - 1 : gfirst[j]]) : 0;
        res[si[i]] = had || !first ? FLOE_PRESENT : FLOE_INSERTED;
        if (vout)
            value_out(vout, vb, si[i], val);
    }
}

__global__ void k_answer_erase(const uint32_t *si, size_t n, const uint64_t *gfirst, size_t m, const int8_t *slot,
                               uint8_t *res)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t j = last_at_or_below(gfirst, m, i);
        res[si[i]] = slot[j] >= 0 && i == gfirst[j] ? FLOE_ERASED : FLOE_ABSENT;
    }
}

/* Found keys of an erase: distinct key fj[e] and its chunk. */
__global__ void k_gather_found(const uint64_t *sk, const uint64_t *gfirst, const uint32_t *fj, size_t m3,
                               const uint32_t *leaf, uint64_t *ek, uint32_t *eleaf)
{
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < m3; e += (size_t)gridDim.x * blockDim.x) {
        ek[e] = sk[gfirst[fj[e]]];
        eleaf[e] = leaf[fj[e]];
    }
}

/* ---- every key in order (download, rebuild) ---------------------------------------------------- */

__global__ void k_bottom_flags(const view v, uint64_t used, uint8_t *flag)
{
    for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < used; c += (size_t)gridDim.x * blockDim.x) {
        const uint64_t h = v.keys[c * OC_LANES + HEAD];
        flag[c] = head_level(h) == 0 && head_count(h) > 0;
    }
}

__global__ void k_first_keys(const view v, const uint32_t *ids, size_t nb, uint64_t *first, uint64_t *counts)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nb; i += (size_t)gridDim.x * blockDim.x) {
        first[i] = v.keys[(uint64_t)ids[i] * OC_LANES];
        counts[i] = head_count(v.keys[(uint64_t)ids[i] * OC_LANES + HEAD]);
    }
}

__global__ void k_gather_all(const view v, const uint32_t *ids, size_t nb, const uint64_t *pos, uint64_t *kout,
                             uint64_t *vout)
{
    const size_t total = nb * OC_DATA;
    for (size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x; x < total; x += (size_t)gridDim.x * blockDim.x) {
        const size_t i = x / OC_DATA, e = x % OC_DATA;
        const uint64_t c = ids[i];
        if (e >= head_count(v.keys[c * OC_LANES + HEAD]))
            continue;
        kout[pos[i] + e] = v.keys[c * OC_LANES + e];
        vout[pos[i] + e] = v.vals[c * OC_LANES + e];
    }
}

/* ---- host side ---------------------------------------------------------------------------------- */

/* A pool of at least `need` chunks, the chunks in use kept; with `limited`,
 * a growth the limit (gpu_ordered_set_limit) refuses changes nothing. */
static floe_status reserve(gpu_ordered *t, uint64_t need, cudaStream_t s, floe_errinfo *err, bool limited = false)
{
    if (need <= t->cap)
        return FLOE_OK;
    uint64_t cap = t->cap * 2; /* growing: double, or past that with a quarter to spare */
    if (cap < need)
        cap = t->used ? need + need / 4 : need;
    if (cap > DOWN) /* chunk ids below DOWN, and a pool of 2^31 chunks is 1 TiB */
        cap = need <= DOWN ? DOWN : need;
    if (cap > DOWN)
        return floe_errinfo_set(err, FLOE_ERR_FULL, "an ORDERED table of more than %u chunks", DOWN);
    uint64_t *k = NULL, *v = NULL;
    const size_t bytes = cap * OC_LANES * 8;
    if (limited && t->fits && !t->fits(t->fits_ctx, 2 * bytes))
        return floe_errinfo_set(err, FLOE_ERR_NO_MEMORY,
                                "table %s: its chunks would grow by %.1f MiB on its GPU, past maxmemory-gpu: none of "
                                "these keys stored",
                                t->spec.name, (double)(2 * bytes) / 1048576.0);
    cudaError_t e = cudaMalloc(&k, bytes);
    if (e == cudaSuccess)
        e = cudaMalloc(&v, bytes);
    if (e != cudaSuccess) {
        cudaFree(k);
        cudaGetLastError();
        return floe_errinfo_set(err, FLOE_ERR_FULL, "no device memory for a pool of %llu chunks (%llu bytes)",
                                (unsigned long long)cap, (unsigned long long)(2 * bytes));
    }
    if (t->used) {
        CUDA_TRY(cudaMemcpyAsync(k, t->keys, t->used * OC_LANES * 8, cudaMemcpyDeviceToDevice, s), err);
        CUDA_TRY(cudaMemcpyAsync(v, t->vals, t->used * OC_LANES * 8, cudaMemcpyDeviceToDevice, s), err);
        CUDA_TRY(cudaStreamSynchronize(s), err);
    }
    cudaFree(t->keys);
    cudaFree(t->vals);
    t->keys = k;
    t->vals = v;
    t->cap = cap;
    return FLOE_OK;
}

/* A new chunk of level `level` holding n_entries entries (keys, vals) and no neighbours. */
static floe_status new_chunk(gpu_ordered *t, uint32_t level, const uint64_t *keys, const uint64_t *vals,
                             uint32_t n_entries, cudaStream_t s, uint32_t *id, floe_errinfo *err)
{
    floe_status st = reserve(t, t->used + 1, s, err);
    if (st != FLOE_OK)
        return st;
    uint64_t k[OC_LANES] = {0}, v[OC_LANES] = {0};
    memcpy(k, keys, n_entries * 8);
    memcpy(v, vals, n_entries * 8);
    k[HEAD] = head_word(n_entries, level, NIL);
    v[HEAD] = NIL;
    *id = (uint32_t)t->used++;
    CUDA_TRY(cudaMemcpyAsync(t->keys + (uint64_t)*id * OC_LANES, k, sizeof k, cudaMemcpyHostToDevice, s), err);
    CUDA_TRY(cudaMemcpyAsync(t->vals + (uint64_t)*id * OC_LANES, v, sizeof v, cudaMemcpyHostToDevice, s), err);
    return sync(s, err); /* k and v are on this stack */
}

/* Positions 0..n-1 whose flag is set, in order, and how many. */
static floe_status select_flagged(scratch &sc, const uint8_t *flag, size_t n, uint32_t *out, size_t *count,
                                  cudaStream_t s, floe_errinfo *err)
{
    thrust::counting_iterator<uint32_t> it(0);
    uint64_t *c_d, c = 0;
    size_t bytes = 0;
    uint8_t *tmp;
    CUDA_TRY(sc.get(&c_d, 1), err);
    CUDA_TRY(cub::DeviceSelect::Flagged(NULL, bytes, it, flag, out, c_d, n, s), err);
    CUDA_TRY(sc.get(&tmp, bytes), err);
    CUDA_TRY(cub::DeviceSelect::Flagged(tmp, bytes, it, flag, out, c_d, n, s), err);
    floe_status st = read_back(c_d, &c, s, err);
    *count = (size_t)c;
    return st;
}

/* The first entry of each run of entries with the same chunk (leaf ascending): run_start, *runs of them. */
static floe_status select_runs(scratch &sc, const uint32_t *leaf, size_t m, uint64_t **run_start, size_t *runs,
                               cudaStream_t s, floe_errinfo *err)
{
    uint8_t *flag;
    uint64_t *c_d, c = 0;
    size_t bytes = 0;
    uint8_t *tmp;
    thrust::counting_iterator<uint64_t> count(0);
    CUDA_TRY(sc.get(&flag, m), err);
    CUDA_TRY(sc.get(run_start, m), err);
    CUDA_TRY(sc.get(&c_d, 1), err);
    k_run_heads<<<grid_for(m), BLOCK, 0, s>>>(leaf, m, flag);
    CUDA_TRY(cub::DeviceSelect::Flagged(NULL, bytes, count, flag, *run_start, c_d, m, s), err);
    CUDA_TRY(sc.get(&tmp, bytes), err);
    CUDA_TRY(cub::DeviceSelect::Flagged(tmp, bytes, count, flag, *run_start, c_d, m, s), err);
    floe_status st = read_back(c_d, &c, s, err);
    *runs = (size_t)c;
    return st;
}

/* Merges m new entries (ascending keys none of which is at `level`, with
 * their values or the chunks below they lead to) into `level`, and the
 * separators of the chunks that made into the level above.  leaf (may be
 * NULL: found here): each entry's chunk at that level. */
static floe_status merge_level(gpu_ordered *t, uint32_t level, const uint64_t *nk, const uint64_t *nv,
                               const uint32_t *leaf_in, size_t m, cudaStream_t s, floe_errinfo *err)
{
    if (m == 0)
        return FLOE_OK;
    floe_status st;
    if (level >= MAX_LEVELS)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "an ORDERED table of more than %d levels", MAX_LEVELS);
    if (level == t->height) { /* a new top: key 0 leads to the old top */
        const uint64_t k0 = 0, v0 = t->head[level - 1];
        uint32_t id;
        if ((st = new_chunk(t, level, &k0, &v0, 1, s, &id, err)) != FLOE_OK)
            return st;
        t->head[level] = id;
        t->height++;
    }
    scratch sc(s);
    uint32_t *leaf = (uint32_t *)leaf_in;
    if (!leaf) {
        CUDA_TRY(sc.get(&leaf, m), err);
        /* a separator's chunk at `level`: as a search finds it, below the levels above */
        k_locate_level<<<grid_for(m * GROUP), BLOCK, 0, s>>>(view_of(t), nk, m, level, leaf);
    }
    uint64_t *run_start;
    size_t nruns = 0;
    if ((st = select_runs(sc, leaf, m, &run_start, &nruns, s, err)) != FLOE_OK)
        return st;
    uint64_t *run_t, *run_q, *extra, *off, *stk, *stv;
    CUDA_TRY(sc.get(&run_t, nruns), err);
    CUDA_TRY(sc.get(&run_q, nruns), err);
    CUDA_TRY(sc.get(&extra, nruns + 1), err);
    CUDA_TRY(cudaMemsetAsync(extra + nruns, 0, 8, s), err); /* so that off[nruns] is the total */
    CUDA_TRY(sc.get(&off, nruns + 1), err);
    CUDA_TRY(sc.get(&stk, nruns * OC_LANES), err);
    CUDA_TRY(sc.get(&stv, nruns * OC_LANES), err);
    uint8_t *spreads;
    uint32_t *bigs;
    CUDA_TRY(sc.get(&spreads, nruns), err);
    CUDA_TRY(sc.get(&bigs, nruns), err);
    const view v0 = view_of(t);
    k_run_sizes<<<grid_for(nruns), BLOCK, 0, s>>>(v0, run_start, nruns, m, leaf, run_t, run_q, extra, spreads);
    size_t scan_bytes = 0;
    CUDA_TRY(cub::DeviceScan::ExclusiveSum(NULL, scan_bytes, extra, off, nruns + 1, s), err);
    void *scan_tmp;
    CUDA_TRY(sc.get((uint8_t **)&scan_tmp, scan_bytes), err);
    CUDA_TRY(cub::DeviceScan::ExclusiveSum(scan_tmp, scan_bytes, extra, off, nruns + 1, s), err);
    /* the runs that spread over new chunks (the others k_merge_small merges in place), and how many chunks
     * they add */
    size_t nb = 0;
    if ((st = select_flagged(sc, spreads, nruns, bigs, &nb, s, err)) != FLOE_OK)
        return st;
    uint64_t fresh = 0;
    if ((st = read_back(off + nruns, &fresh, s, err)) != FLOE_OK)
        return st;
    k_stage<<<grid_for(nb * OC_LANES), BLOCK, 0, s>>>(v0, run_start, bigs, nb, leaf, stk, stv);
    /* before anything is written; at the first level with room for the levels above too (a
     * chunk's separator each at most, a 24th of them in a random batch), so that only this growth
     * asks the limit and one it refuses leaves the table as it was */
    const uint64_t above = level == 0 ? fresh / 8 + MAX_LEVELS : 0;
    if ((st = reserve(t, t->used + fresh + above, s, err, level == 0)) != FLOE_OK)
        return st;
    const uint64_t base = t->used;
    t->used += fresh;
    const view v = view_of(t);
    uint32_t *run_of;
    CUDA_TRY(sc.get(&run_of, m), err);
    k_merge_small<<<grid_for(nruns * 32), BLOCK, 0, s>>>(v, level, nk, nv, m, run_start, nruns, leaf, run_q, run_of);
    k_scatter_new<<<grid_for(m), BLOCK, 0, s>>>(v, nk, nv, m, run_start, run_of, leaf, run_t, run_q, off, base, stk);
    k_scatter_old<<<grid_for(nb * OC_DATA), BLOCK, 0, s>>>(v, nk, m, run_start, nruns, bigs, nb, leaf, run_t, run_q,
                                                           off, base, stk, stv);
    uint64_t *sep_k = NULL, *sep_v = NULL;
    CUDA_TRY(sc.get(&sep_k, fresh), err);
    CUDA_TRY(sc.get(&sep_v, fresh), err);
    k_link<<<grid_for(nb + fresh), BLOCK, 0, s>>>(v, level, run_start, bigs, nb, leaf, run_t, run_q, off, base,
                                                  nb + fresh, stk, sep_k, sep_v);
    if ((st = sync(s, err)) != FLOE_OK)
        return st;
    /* no memory for the level above: the new chunks are linked, searches reach them going right */
    st = merge_level(t, level + 1, sep_k, sep_v, NULL, fresh, s, err);
    return st == FLOE_ERR_FULL ? FLOE_OK : st;
}

/* The batch sorted by key, each key's occurrences in the caller's order
 * (a stable sort): sk, si (each sorted key's index in the batch), and its m
 * distinct keys: distinct key j at sorted positions [gfirst[j],
 * gfirst[j + 1]), gfirst[m] = n. */
struct sorted_batch {
    uint64_t *sk, *gfirst;
    uint32_t *si;
    size_t m;
};

static floe_status sort_batch(const gpu_ordered *t, scratch &sc, const uint64_t *d_keys, size_t n, cudaStream_t s,
                              sorted_batch *b, floe_errinfo *err)
{
    uint32_t *idx;
    uint8_t *flag;
    uint64_t *m_d;
    CUDA_TRY(sc.get(&b->sk, n), err);
    CUDA_TRY(sc.get(&b->si, n), err);
    CUDA_TRY(sc.get(&idx, n), err);
    CUDA_TRY(sc.get(&flag, n), err);
    CUDA_TRY(sc.get(&b->gfirst, n + 1), err);
    CUDA_TRY(sc.get(&m_d, 1), err);
    k_iota<<<grid_for(n), BLOCK, 0, s>>>(idx, n);
    size_t bytes = 0;
    CUDA_TRY(cub::DeviceRadixSort::SortPairs(NULL, bytes, d_keys, b->sk, idx, b->si, n, 0, (int)t->spec.key_bits, s),
             err);
    uint8_t *tmp;
    CUDA_TRY(sc.get(&tmp, bytes), err);
    CUDA_TRY(cub::DeviceRadixSort::SortPairs(tmp, bytes, d_keys, b->sk, idx, b->si, n, 0, (int)t->spec.key_bits, s),
             err);
    k_group_heads<<<grid_for(n), BLOCK, 0, s>>>(b->sk, n, flag);
    thrust::counting_iterator<uint64_t> count(0);
    size_t sel_bytes = 0;
    CUDA_TRY(cub::DeviceSelect::Flagged(NULL, sel_bytes, count, flag, b->gfirst, m_d, n, s), err);
    uint8_t *sel_tmp;
    CUDA_TRY(sc.get(&sel_tmp, sel_bytes), err);
    CUDA_TRY(cub::DeviceSelect::Flagged(sel_tmp, sel_bytes, count, flag, b->gfirst, m_d, n, s), err);
    uint64_t m = 0;
    floe_status st = read_back(m_d, &m, s, err);
    if (st != FLOE_OK)
        return st;
    const uint64_t end = n;
    CUDA_TRY(cudaMemcpyAsync(b->gfirst + m, &end, 8, cudaMemcpyHostToDevice, s), err);
    b->m = (size_t)m;
    return sync(s, err); /* end is on this stack */
}

/* A batch sorted and each distinct key found at the bottom (k_locate): its
 * chunk, entry (-1: absent), stored value, and whether it is absent. */
struct located {
    sorted_batch b;
    uint32_t *leaf;
    int8_t *slot;
    uint64_t *old;
    uint8_t *absent;
};

static floe_status locate_batch(gpu_ordered *t, scratch &sc, const uint64_t *d_keys, size_t n, const void *values,
                                bool overwrite, cudaStream_t s, located *l, floe_errinfo *err)
{
    floe_status st = sort_batch(t, sc, d_keys, n, s, &l->b, err);
    if (st != FLOE_OK)
        return st;
    const size_t m = l->b.m;
    CUDA_TRY(sc.get(&l->leaf, m), err);
    CUDA_TRY(sc.get(&l->slot, m), err);
    CUDA_TRY(sc.get(&l->old, m), err);
    CUDA_TRY(sc.get(&l->absent, m), err);
    k_locate<<<grid_for(m * GROUP), BLOCK, 0, s>>>(view_of(t), l->b.sk, l->b.si, l->b.gfirst, m, l->leaf, l->slot,
                                                   l->old, l->absent, values, t->vb, overwrite);
    return FLOE_OK;
}

/* The first chunk of [0, used) that breaks the layout (bad: its id, or
 * untouched), and what it breaks (why: 1 count, 2 order, 3 its fence, 4 its
 * level or next chunk). */
__global__ void k_check(const view v, uint64_t used, unsigned long long *bad, uint32_t *why)
{
    for (uint64_t c = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; c < used;
         c += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t *e = v.keys + c * OC_LANES;
        const uint64_t head = e[HEAD];
        const uint32_t cnt = head_count(head), next = head_next(head);
        uint32_t w = 0;
        if (cnt > OC_DATA)
            w = 1;
        for (uint32_t i = 1; !w && i < cnt; i++)
            if (e[i - 1] >= e[i])
                w = 2;
        if (!w && next != NIL && cnt && e[cnt - 1] >= e[FENCE])
            w = 3;
        if (!w && (head_level(head) >= v.height || (next != NIL && next >= used)))
            w = 4;
        if (w && atomicMin(bad, (unsigned long long)c) > c)
            *why = w; /* racy between two bad chunks: either reason is one */
    }
}

floe_status gpu_ordered_check(gpu_ordered *t, floe_errinfo *err)
{
    static const char *const what[] = {"", "a count past the chunk", "keys out of order", "a key at or past its fence",
                                       "a level or next chunk out of range"};
    cudaStream_t s = 0;
    scratch sc(s);
    unsigned long long *bad;
    uint32_t *why;
    CUDA_TRY(sc.get(&bad, 1), err);
    CUDA_TRY(sc.get(&why, 1), err);
    CUDA_TRY(cudaMemsetAsync(bad, 0xFF, sizeof *bad, s), err);
    CUDA_TRY(cudaMemsetAsync(why, 0, sizeof *why, s), err);
    k_check<<<grid_for(t->used), BLOCK, 0, s>>>(view_of(t), t->used, bad, why);
    unsigned long long b;
    uint32_t w;
    floe_status st = read_back(bad, &b, s, err);
    if (st == FLOE_OK)
        st = read_back(why, &w, s, err);
    if (st != FLOE_OK)
        return st;
    if (b != ~0ull)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "chunk %llu of %llu: %s", b, (unsigned long long)t->used,
                                what[w < 5 ? w : 0]);
    return FLOE_OK;
}

__global__ void k_not(const uint8_t *a, size_t n, uint8_t *out)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = !a[i];
}

/* The bottom head of an empty table (the pool kept). */
static floe_status reset(gpu_ordered *t, cudaStream_t s, floe_errinfo *err)
{
    t->used = 0;
    t->height = 0;
    t->live = 0;
    uint32_t id;
    floe_status st = new_chunk(t, 0, NULL, NULL, 0, s, &id, err);
    if (st != FLOE_OK)
        return st;
    t->head[0] = id;
    t->height = 1;
    return FLOE_OK;
}

floe_status gpu_ordered_create(const floe_spec *spec, uint64_t chunks, gpu_ordered **out, floe_errinfo *err)
{

    *out = NULL;
    if (spec->kind != FLOE_KIND_ORDERED || spec->key_bits < 1 || spec->key_bits > 64 ||
        (spec->value_bytes != 0 && spec->value_bytes != 4 && spec->value_bytes != 8))
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "gpu_ordered_create needs a valid ORDERED spec");
    /* a batch's scratch comes from the stream-ordered pool: keep what it frees for the next batch
     * instead of handing it back to the driver at every synchronisation */
    cudaMemPool_t pool;
    int device;
    uint64_t keep = UINT64_MAX;
    CUDA_TRY(cudaGetDevice(&device), err);
    CUDA_TRY(cudaDeviceGetDefaultMemPool(&pool, device), err);
    CUDA_TRY(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), err);
    gpu_ordered *t = (gpu_ordered *)calloc(1, sizeof *t);
    if (!t)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    t->spec = *spec;
    t->vb = spec->value_bytes;
    floe_status st = reserve(t, chunks > MIN_CHUNKS ? chunks : MIN_CHUNKS, 0, err);
    if (st == FLOE_OK)
        st = reset(t, 0, err);
    if (st != FLOE_OK) {
        gpu_ordered_destroy(t);
        return st;
    }
    *out = t;
    return FLOE_OK;
}

void gpu_ordered_set_limit(gpu_ordered *t, bool (*fits)(void *ctx, uint64_t bytes), void *ctx)
{
    t->fits = fits;
    t->fits_ctx = ctx;
}

void gpu_ordered_destroy(gpu_ordered *t)
{
    if (!t)
        return;
    cudaFree(t->keys);
    cudaFree(t->vals);
    free(t);
}

uint64_t gpu_ordered_chunks_for(uint64_t keys)
{
    /* random inserts leave chunks about 3/4 full; the levels above add a chunk for every OC_DATA / 2 */
    const uint64_t bottom = keys / (OC_DATA * 2 / 3) + 1;
    return bottom + bottom / (OC_DATA / 2) + 64;
}

const floe_spec *gpu_ordered_spec(const gpu_ordered *t)
{
    return &t->spec;
}

uint64_t gpu_ordered_keys(const gpu_ordered *t)
{
    return t->live;
}

uint32_t gpu_ordered_height(const gpu_ordered *t)
{
    return t->height;
}

void gpu_ordered_stats(const gpu_ordered *t, floe_table_stats *s)
{
    memset(s, 0, sizeof *s);
    s->spec = t->spec;
    s->keys = t->live;
    s->slots = t->used * OC_DATA;
    s->fill = s->slots ? (double)t->live / (double)s->slots : 0.0;
    s->memory_bytes = t->cap * OC_LANES * 16;
    s->bytes_per_key = t->live ? (double)s->memory_bytes / (double)t->live : 0.0;
    strcpy(s->backend, "gpu");
}

floe_status gpu_ordered_insert(gpu_ordered *t, const uint64_t *d_keys, const void *d_values, size_t n, bool overwrite,
                               uint8_t *d_results, void *d_values_out, floe_answer_counts *counts, gpu_stream stream,
                               floe_errinfo *err)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (counts)
        memset(counts, 0, sizeof *counts);
    if (n == 0)
        return FLOE_OK;
    scratch sc(s);
    const void *values = t->vb ? d_values : NULL;
    located l;
    floe_status st = locate_batch(t, sc, d_keys, n, values, overwrite, s, &l, err);
    if (st != FLOE_OK)
        return st;
    const sorted_batch &b = l.b;
    const size_t m = b.m;
    uint32_t *fj, *nleaf;
    uint64_t *nk, *nv;
    CUDA_TRY(sc.get(&fj, m), err);
    size_t m2 = 0;
    if ((st = select_flagged(sc, l.absent, m, fj, &m2, s, err)) != FLOE_OK)
        return st;
    CUDA_TRY(sc.get(&nk, m2), err);
    CUDA_TRY(sc.get(&nv, m2), err);
    CUDA_TRY(sc.get(&nleaf, m2), err);
    k_gather_new<<<grid_for(m2), BLOCK, 0, s>>>(b.sk, b.si, b.gfirst, fj, m2, l.leaf, values, t->vb, overwrite, nk, nv,
                                                nleaf);
    if ((st = merge_level(t, 0, nk, nv, nleaf, m2, s, err)) != FLOE_OK) {
        /* nothing merged (no memory for the chunks): the values an overwrite replaced go back */
        if (overwrite && values)
            k_restore<<<grid_for(m), BLOCK, 0, s>>>(view_of(t), m, l.leaf, l.slot, l.old);
        sync(s, err);
        return st;
    }
    k_answer_insert<<<grid_for(n), BLOCK, 0, s>>>(b.si, n, b.gfirst, m, l.slot, l.old, values, t->vb, overwrite,
                                                  d_results, d_values_out);
    if ((st = sync(s, err)) != FLOE_OK)
        return st;
    t->live += m2;
    if (counts) {
        counts->inserted = m2;
        counts->present = n - m2;
    }
    return FLOE_OK;
}

/* Every key and value in order, into device arrays of sc (*count of them). */
static floe_status collect(gpu_ordered *t, scratch &sc, uint64_t **kout, uint64_t **vout, size_t *count, cudaStream_t s,
                           floe_errinfo *err)
{
    const view v = view_of(t);
    uint8_t *flag;
    uint32_t *ids, *sids;
    uint64_t *first, *sfirst, *cnt, *pos;
    CUDA_TRY(sc.get(&flag, t->used), err);
    CUDA_TRY(sc.get(&ids, t->used), err);
    k_bottom_flags<<<grid_for(t->used), BLOCK, 0, s>>>(v, t->used, flag);
    size_t nb = 0;
    floe_status st = select_flagged(sc, flag, t->used, ids, &nb, s, err);
    if (st != FLOE_OK)
        return st;
    *count = 0;
    CUDA_TRY(sc.get(kout, t->live), err);
    CUDA_TRY(sc.get(vout, t->live), err);
    if (nb == 0)
        return FLOE_OK;
    CUDA_TRY(sc.get(&sids, nb), err);
    CUDA_TRY(sc.get(&first, nb), err);
    CUDA_TRY(sc.get(&sfirst, nb), err);
    CUDA_TRY(sc.get(&cnt, nb), err);
    CUDA_TRY(sc.get(&pos, nb), err);
    k_first_keys<<<grid_for(nb), BLOCK, 0, s>>>(v, ids, nb, first, cnt);
    size_t bytes = 0;
    CUDA_TRY(cub::DeviceRadixSort::SortPairs(NULL, bytes, first, sfirst, ids, sids, nb, 0, (int)t->spec.key_bits, s),
             err);
    uint8_t *tmp;
    CUDA_TRY(sc.get(&tmp, bytes), err);
    CUDA_TRY(cub::DeviceRadixSort::SortPairs(tmp, bytes, first, sfirst, ids, sids, nb, 0, (int)t->spec.key_bits, s),
             err);
    k_first_keys<<<grid_for(nb), BLOCK, 0, s>>>(v, sids, nb, first, cnt); /* the counts in key order */
    size_t scan_bytes = 0;
    CUDA_TRY(cub::DeviceScan::ExclusiveSum(NULL, scan_bytes, cnt, pos, nb, s), err);
    uint8_t *scan_tmp;
    CUDA_TRY(sc.get(&scan_tmp, scan_bytes), err);
    CUDA_TRY(cub::DeviceScan::ExclusiveSum(scan_tmp, scan_bytes, cnt, pos, nb, s), err);
    uint64_t last_pos = 0, last_cnt = 0;
    if ((st = read_back(pos + nb - 1, &last_pos, s, err)) != FLOE_OK ||
        (st = read_back(cnt + nb - 1, &last_cnt, s, err)) != FLOE_OK)
        return st;
    if (last_pos + last_cnt != t->live)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "the ORDERED table's chunks hold %llu keys, not %llu",
                                (unsigned long long)(last_pos + last_cnt), (unsigned long long)t->live);
    k_gather_all<<<grid_for(nb * OC_DATA), BLOCK, 0, s>>>(v, sids, nb, pos, *kout, *vout);
    *count = t->live;
    return sync(s, err);
}

/* t built again from its keys in a pool sized for them: what erased keys
 * held comes back.  On failure t is as it was. */
static floe_status rebuild(gpu_ordered *t, cudaStream_t s, floe_errinfo *err)
{
    scratch sc(s);
    uint64_t *k, *v;
    size_t n;
    floe_status st = collect(t, sc, &k, &v, &n, s, err);
    if (st != FLOE_OK)
        return st;
    gpu_ordered fresh = *t;
    fresh.keys = fresh.vals = NULL;
    fresh.cap = fresh.used = 0;
    const uint64_t want = n / OC_FILL + n / (4 * OC_FILL) + 64;
    st = reserve(&fresh, want > MIN_CHUNKS ? want : MIN_CHUNKS, s, err);
    if (st == FLOE_OK)
        st = reset(&fresh, s, err);
    if (st == FLOE_OK)
        st = merge_level(&fresh, 0, k, v, NULL, n, s, err);
    if (st != FLOE_OK) {
        cudaFree(fresh.keys);
        cudaFree(fresh.vals);
        return st;
    }
    fresh.live = n;
    cudaFree(t->keys);
    cudaFree(t->vals);
    *t = fresh;
    return FLOE_OK;
}

floe_status gpu_ordered_erase(gpu_ordered *t, const uint64_t *d_keys, size_t n, uint8_t *d_results,
                              floe_answer_counts *counts, gpu_stream stream, floe_errinfo *err)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (counts)
        memset(counts, 0, sizeof *counts);
    if (n == 0)
        return FLOE_OK;
    scratch sc(s);
    located l;
    floe_status st = locate_batch(t, sc, d_keys, n, NULL, false, s, &l, err);
    if (st != FLOE_OK)
        return st;
    const sorted_batch &b = l.b;
    const size_t m = b.m;
    uint32_t *fj, *eleaf;
    uint64_t *ek;
    uint8_t *found;
    CUDA_TRY(sc.get(&found, m), err);
    CUDA_TRY(sc.get(&fj, m), err);
    k_not<<<grid_for(m), BLOCK, 0, s>>>(l.absent, m, found);
    size_t m3 = 0;
    if ((st = select_flagged(sc, found, m, fj, &m3, s, err)) != FLOE_OK)
        return st;
    if (m3 > 0) {
        CUDA_TRY(sc.get(&ek, m3), err);
        CUDA_TRY(sc.get(&eleaf, m3), err);
        k_gather_found<<<grid_for(m3), BLOCK, 0, s>>>(b.sk, b.gfirst, fj, m3, l.leaf, ek, eleaf);
        uint64_t *run_start;
        size_t runs = 0;
        if ((st = select_runs(sc, eleaf, m3, &run_start, &runs, s, err)) != FLOE_OK)
            return st;
        k_compact<<<grid_for(runs * 32), BLOCK, 0, s>>>(view_of(t), ek, run_start, runs, m3, eleaf);
    }
    k_answer_erase<<<grid_for(n), BLOCK, 0, s>>>(b.si, n, b.gfirst, m, l.slot, d_results);
    if ((st = sync(s, err)) != FLOE_OK)
        return st;
    t->live -= m3;
    if (counts) {
        counts->erased = m3;
        counts->absent = n - m3;
    }
    /* chunks a quarter full at most: the table again from its keys (a failure leaves it as it is) */
    if (m3 > 0 && t->used > MIN_CHUNKS && t->live * 4 < t->used * OC_DATA) {
        floe_errinfo ignored;
        rebuild(t, s, &ignored);
    }
    return FLOE_OK;
}

floe_status gpu_ordered_download(gpu_ordered *t, uint64_t *keys, void *values, floe_errinfo *err)
{
    cudaStream_t s = 0;
    scratch sc(s);
    uint64_t *k, *v;
    size_t n;
    floe_status st = collect(t, sc, &k, &v, &n, s, err);
    if (st != FLOE_OK || n == 0)
        return st;
    CUDA_TRY(cudaMemcpy(keys, k, n * 8, cudaMemcpyDeviceToHost), err);
    if (values && t->vb) {
        uint64_t *wide = (uint64_t *)malloc(n * 8);
        if (!wide)
            return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
        cudaError_t e = cudaMemcpy(wide, v, n * 8, cudaMemcpyDeviceToHost);
        for (size_t i = 0; e == cudaSuccess && i < n; i++)
            memcpy((uint8_t *)values + i * t->vb, &wide[i], t->vb); /* little-endian: the low bytes */
        free(wide);
        CUDA_TRY(e, err);
    }
    return FLOE_OK;
}

floe_status gpu_ordered_upload(gpu_ordered *t, const uint64_t *keys, const void *values, size_t n, floe_errinfo *err)
{
    if (t->live)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "gpu_ordered_upload needs an empty table");
    if (n == 0)
        return FLOE_OK;
    cudaStream_t s = 0;
    scratch sc(s);
    uint64_t *dk, *dv;
    CUDA_TRY(sc.get(&dk, n), err);
    CUDA_TRY(sc.get(&dv, n), err);
    uint64_t *wide = (uint64_t *)calloc(n, 8);
    if (!wide)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    for (size_t i = 0; values && t->vb && i < n; i++)
        memcpy(&wide[i], (const uint8_t *)values + i * t->vb, t->vb);
    cudaError_t e = cudaMemcpyAsync(dk, keys, n * 8, cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(dv, wide, n * 8, cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s);
    free(wide);
    CUDA_TRY(e, err);
    floe_status st = merge_level(t, 0, dk, dv, NULL, n, s, err);
    if (st == FLOE_OK)
        t->live = n;
    return st;
}

/* ---- host arrays -------------------------------------------------------------------------------- */

/* Device copies of a host batch and room for its answers, freed with sc. */
static floe_status stage_in(scratch &sc, const uint64_t *keys, const void *values, size_t n, uint32_t vb, uint64_t **dk,
                            void **dv, uint8_t **dres, void **dvout, cudaStream_t s, floe_errinfo *err)
{
    CUDA_TRY(sc.get(dk, n), err);
    CUDA_TRY(sc.get(dres, n), err);
    CUDA_TRY(sc.get((uint8_t **)dv, n * (vb ? vb : 1)), err);
    CUDA_TRY(sc.get((uint8_t **)dvout, n * (vb ? vb : 1)), err);
    if (n)
        CUDA_TRY(cudaMemcpyAsync(*dk, keys, n * 8, cudaMemcpyHostToDevice, s), err);
    if (n && values && vb)
        CUDA_TRY(cudaMemcpyAsync(*dv, values, n * vb, cudaMemcpyHostToDevice, s), err);
    return FLOE_OK;
}

static floe_status stage_out(uint8_t *results, const uint8_t *dres, void *values_out, const void *dvout, size_t n,
                             uint32_t vb, cudaStream_t s, floe_errinfo *err)
{
    if (n && results)
        CUDA_TRY(cudaMemcpyAsync(results, dres, n, cudaMemcpyDeviceToHost, s), err);
    if (n && values_out && vb)
        CUDA_TRY(cudaMemcpyAsync(values_out, dvout, n * vb, cudaMemcpyDeviceToHost, s), err);
    return sync(s, err);
}

floe_status gpu_ordered_insert_host(gpu_ordered *t, const uint64_t *keys, const void *values, size_t n, bool overwrite,
                                    uint8_t *results, void *values_out, floe_answer_counts *counts, floe_errinfo *err)
{
    cudaStream_t s = 0;
    scratch sc(s);
    uint64_t *dk;
    void *dv, *dvout;
    uint8_t *dres;
    floe_status st = stage_in(sc, keys, values, n, t->vb, &dk, &dv, &dres, &dvout, s, err);
    if (st == FLOE_OK)
        st = gpu_ordered_insert(t, dk, values ? dv : NULL, n, overwrite, dres, values_out ? dvout : NULL, counts, s,
                                err);
    return st == FLOE_OK ? stage_out(results, dres, values_out, dvout, n, t->vb, s, err) : st;
}

floe_status gpu_ordered_find_host(gpu_ordered *t, const uint64_t *keys, size_t n, uint8_t *results, void *values_out,
                                  floe_errinfo *err)
{
    cudaStream_t s = 0;
    scratch sc(s);
    uint64_t *dk;
    void *dv, *dvout;
    uint8_t *dres;
    floe_status st = stage_in(sc, keys, NULL, n, t->vb, &dk, &dv, &dres, &dvout, s, err);
    if (st == FLOE_OK)
        st = gpu_ordered_find(t, dk, n, dres, values_out ? dvout : NULL, s, err);
    return st == FLOE_OK ? stage_out(results, dres, values_out, dvout, n, t->vb, s, err) : st;
}

floe_status gpu_ordered_erase_host(gpu_ordered *t, const uint64_t *keys, size_t n, uint8_t *results,
                                   floe_answer_counts *counts, floe_errinfo *err)
{
    cudaStream_t s = 0;
    scratch sc(s);
    uint64_t *dk;
    void *dv, *dvout;
    uint8_t *dres;
    floe_status st = stage_in(sc, keys, NULL, n, t->vb, &dk, &dv, &dres, &dvout, s, err);
    if (st == FLOE_OK)
        st = gpu_ordered_erase(t, dk, n, dres, counts, s, err);
    return st == FLOE_OK ? stage_out(results, dres, NULL, NULL, n, t->vb, s, err) : st;
}

floe_status gpu_ordered_neighbours_host(gpu_ordered *t, bool pred, const uint64_t *keys, size_t n, uint8_t *results,
                                        uint64_t *found, void *values_out, floe_errinfo *err)
{
    cudaStream_t s = 0;
    scratch sc(s);
    uint64_t *dk, *dfound;
    void *dv, *dvout;
    uint8_t *dres;
    floe_status st = stage_in(sc, keys, NULL, n, t->vb, &dk, &dv, &dres, &dvout, s, err);
    if (st != FLOE_OK)
        return st;
    CUDA_TRY(sc.get(&dfound, n), err);
    if ((st = gpu_ordered_neighbours(t, pred, dk, n, dres, dfound, values_out ? dvout : NULL, s, err)) != FLOE_OK)
        return st;
    if (n && found)
        CUDA_TRY(cudaMemcpyAsync(found, dfound, n * 8, cudaMemcpyDeviceToHost, s), err);
    return stage_out(results, dres, values_out, dvout, n, t->vb, s, err);
}

floe_status gpu_ordered_range_host(gpu_ordered *t, uint64_t lo, uint64_t hi, bool desc, size_t limit,
                                   uint64_t *keys_out, void *values_out, size_t *n, uint64_t *next, bool *done,
                                   floe_errinfo *err)
{
    cudaStream_t s = 0;
    scratch sc(s);
    uint64_t *dk;
    uint8_t *dv;
    CUDA_TRY(sc.get(&dk, limit), err);
    CUDA_TRY(sc.get(&dv, limit * (t->vb ? t->vb : 1)), err);
    floe_status st = gpu_ordered_range(t, lo, hi, desc, limit, dk, values_out ? dv : NULL, n, next, done, s, err);
    if (st != FLOE_OK)
        return st;
    if (*n && keys_out)
        CUDA_TRY(cudaMemcpyAsync(keys_out, dk, *n * 8, cudaMemcpyDeviceToHost, s), err);
    if (*n && values_out && t->vb)
        CUDA_TRY(cudaMemcpyAsync(values_out, dv, *n * t->vb, cudaMemcpyDeviceToHost, s), err);
    return sync(s, err);
}
