/*
 * ordered_search.cu - the GPU skiplist's searches (see ordered_gpu.h):
 * finds, successors and predecessors, and ranges, a group of OC_GROUP lanes
 * a key, in kernels of their own (no update runs beside them).  The chunk
 * layout and a group's descent are ordered_device.cuh's.
 */
#include "ordered_device.cuh"

__global__ void k_find(const view v, const uint64_t *keys, size_t n, uint8_t *res, void *vout, uint32_t vb)
{
    const group g = group_of();
    FOR_EACH_GROUP_ITEM(i, n)
    {
        const uint64_t x = keys[i];
        uint64_t k[PER];
        uint32_t cnt;
        const uint32_t c = descend_group(v, x, 0, g, k, &cnt);
        const int e = entry_of(k, cnt, x, g);
        if (g.l == 0) {
            res[i] = e >= 0 ? FLOE_PRESENT : FLOE_ABSENT;
            if (vout)
                value_out(vout, vb, i, e >= 0 ? bottom_value(v, c, e) : 0);
        }
    }
}

__global__ void k_neighbours(const view v, bool pred, const uint64_t *keys, size_t n, uint8_t *res, uint64_t *found,
                             void *vout, uint32_t vb)
{
    const group g = group_of();
    FOR_EACH_GROUP_ITEM(i, n)
    {
        const uint64_t x = keys[i];
        uint64_t k[PER];
        uint32_t cnt;
        uint32_t c = descend_group(v, x, 0, g, k, &cnt);
        /* the successor is entry rank(< x) of the chunk, the predecessor entry rank(<= x) - 1; past the
         * chunk's ends, the first (last) key of the next (previous) chunk that has one */
        int e = pred ? (int)rank_of(k, cnt, x, true, g) - 1 : (int)rank_of(k, cnt, x, false, g);
        while (e < 0 || e >= (int)cnt) {
            const uint32_t to = pred ? (uint32_t)v.vals[(uint64_t)c * OC_LANES + HEAD] : head_next(head_of(k, g));
            if (to == NIL)
                break;
            c = to;
            load_part(v.keys, c, g, k, true);
            cnt = head_count(head_of(k, g));
            e = pred ? (int)cnt - 1 : 0;
        }
        const bool some = e >= 0 && e < (int)cnt;
        const uint32_t at = some ? (uint32_t)e : 0;
        const uint64_t fk = entry_key(k, at, g);
        if (g.l == 0) {
            res[i] = some ? FLOE_PRESENT : FLOE_ABSENT;
            found[i] = some ? fk : 0;
            if (vout)
                value_out(vout, vb, i, some ? bottom_value(v, c, at) : 0);
        }
    }
}

/* Range i: up to limit keys of [lo[i], hi[i]] at out + i * limit, ascending
 * (desc: descending from hi).  more/next (may be NULL): whether the range
 * holds more, and the first key not written. */
__global__ void k_ranges(const view v, const uint64_t *lo, const uint64_t *hi, size_t n, uint32_t limit, bool desc,
                         uint64_t *kout, void *vout, uint32_t vb, uint32_t *counts, uint8_t *more, uint64_t *next)
{
    const uint32_t lane = threadIdx.x & 31;
    const size_t stride = (size_t)gridDim.x * WARPS;
    for (size_t i = (size_t)blockIdx.x * WARPS + threadIdx.x / 32; i < n; i += stride) {
        const uint64_t a = lo[i], b = hi[i];
        uint32_t c = descend(v, desc ? b : a, 0), got = 0;
        bool extra = false;
        uint64_t after = 0;
        for (;;) {
            const uint64_t key = lane_entry(v.keys, c, lane);
            const uint64_t head = __shfl_sync(FULL_MASK, key, HEAD);
            const uint32_t cnt = head_count(head);
            const bool in = lane < cnt && key >= a && key <= b;
            const unsigned m = __ballot_sync(FULL_MASK, in);
            const uint32_t rank = desc ? __popc(m & ~((2u << lane) - 1u)) : __popc(m & ((1u << lane) - 1u));
            const uint32_t total = __popc(m);
            if (in && got + rank < limit) {
                const size_t at = i * limit + got + rank;
                kout[at] = key;
                if (vout)
                    value_out(vout, vb, at, v.vals[(uint64_t)c * OC_LANES + lane]);
            }
            if (got + total > limit) { /* the key at rank limit - got is the first not written */
                const unsigned sel = __ballot_sync(FULL_MASK, in && got + rank == limit);
                after = __shfl_sync(FULL_MASK, key, __ffs(sel) - 1);
                extra = true;
                got = limit;
                break;
            }
            got += total;
            const bool past = __ballot_sync(FULL_MASK, lane < cnt && (desc ? key < a : key > b)) != 0;
            const uint32_t to = desc ? (uint32_t)v.vals[(uint64_t)c * OC_LANES + HEAD] : head_next(head);
            if (past || to == NIL)
                break;
            c = to;
        }
        if (lane == 0) {
            counts[i] = got;
            if (more)
                more[i] = extra;
            if (next)
                next[i] = after;
        }
    }
}

/* ---- host side ---------------------------------------------------------------------------------- */

floe_status gpu_ordered_find(gpu_ordered *t, const uint64_t *d_keys, size_t n, uint8_t *d_results, void *d_values_out,
                             gpu_stream stream, floe_errinfo *err)
{
    if (n == 0)
        return FLOE_OK;
    k_find<<<grid_for(n * GROUP), BLOCK, 0, (cudaStream_t)stream>>>(view_of(t), d_keys, n, d_results,
                                                                    t->vb ? d_values_out : NULL, t->vb);
    CUDA_TRY(cudaGetLastError(), err);
    return FLOE_OK;
}

floe_status gpu_ordered_neighbours(gpu_ordered *t, bool pred, const uint64_t *d_keys, size_t n, uint8_t *d_results,
                                   uint64_t *d_found, void *d_values_out, gpu_stream stream, floe_errinfo *err)
{
    if (n == 0)
        return FLOE_OK;
    k_neighbours<<<grid_for(n * GROUP), BLOCK, 0, (cudaStream_t)stream>>>(view_of(t), pred, d_keys, n, d_results,
                                                                          d_found, t->vb ? d_values_out : NULL, t->vb);
    CUDA_TRY(cudaGetLastError(), err);
    return FLOE_OK;
}

floe_status gpu_ordered_ranges(gpu_ordered *t, const uint64_t *d_lo, const uint64_t *d_hi, size_t n, uint32_t limit,
                               uint64_t *d_keys_out, void *d_values_out, uint32_t *d_counts, gpu_stream stream,
                               floe_errinfo *err)
{
    if (n == 0)
        return FLOE_OK;
    k_ranges<<<grid_for(n * 32), BLOCK, 0, (cudaStream_t)stream>>>(
        view_of(t), d_lo, d_hi, n, limit, false, d_keys_out, t->vb ? d_values_out : NULL, t->vb, d_counts, NULL, NULL);
    CUDA_TRY(cudaGetLastError(), err);
    return FLOE_OK;
}

floe_status gpu_ordered_range(gpu_ordered *t, uint64_t lo, uint64_t hi, bool desc, size_t limit, uint64_t *d_keys_out,
                              void *d_values_out, size_t *n, uint64_t *next, bool *done, gpu_stream stream,
                              floe_errinfo *err)
{
    cudaStream_t s = (cudaStream_t)stream;
    *n = 0;
    *next = desc ? hi : lo;
    *done = true;
    if (lo > hi)
        return FLOE_OK;
    if (limit > UINT32_MAX)
        limit = UINT32_MAX;
    scratch sc(s);
    uint64_t *bounds, *after;
    uint32_t *count;
    uint8_t *more;
    CUDA_TRY(sc.get(&bounds, 2), err);
    CUDA_TRY(sc.get(&after, 1), err);
    CUDA_TRY(sc.get(&count, 1), err);
    CUDA_TRY(sc.get(&more, 1), err);
    const uint64_t b[2] = {lo, hi};
    CUDA_TRY(cudaMemcpyAsync(bounds, b, sizeof b, cudaMemcpyHostToDevice, s), err);
    k_ranges<<<1, 32, 0, s>>>(view_of(t), bounds, bounds + 1, 1, (uint32_t)limit, desc, d_keys_out,
                              t->vb ? d_values_out : NULL, t->vb, count, more, after);
    uint32_t got = 0;
    uint8_t extra = 0;
    uint64_t a = 0;
    CUDA_TRY(cudaMemcpyAsync(&got, count, 4, cudaMemcpyDeviceToHost, s), err);
    CUDA_TRY(cudaMemcpyAsync(&extra, more, 1, cudaMemcpyDeviceToHost, s), err);
    CUDA_TRY(cudaMemcpyAsync(&a, after, 8, cudaMemcpyDeviceToHost, s), err);
    floe_status st = sync(s, err);
    if (st != FLOE_OK)
        return st;
    *n = got;
    *done = !extra;
    if (extra)
        *next = a;
    return FLOE_OK;
}
