/*
 * dedup_gpu.cu - first occurrences inside a MAP insert's batch, on the
 * device (dedup_gpu.cuh says how).
 */
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cuda/functional>

#include "iceberg_device.cuh"

__global__ void k_iota(uint32_t *idx, uint32_t n)
{
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        idx[i] = i;
}

/* Sorted position j, where it starts its key's run; 0 elsewhere (a max scan
 * then gives every position its run's start). */
__global__ void k_heads(const uint64_t *skeys, uint32_t n, uint32_t *head_in)
{
    const uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < n)
        head_in[j] = j == 0 || skeys[j] != skeys[j - 1] ? j : 0;
}

/* Each occurrence's first and previous twin; with overwrite, the last
 * twin's value for the first to put; with add, the deltas in key order. */
__global__ void k_links(const uint64_t *skeys, const uint32_t *sidx, const uint32_t *head, uint32_t n, int mode,
                        const void *vin, uint32_t vb, uint32_t *rep, uint32_t *prev, void *vput, uint64_t *sdelta)
{
    const uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n)
        return;
    const uint32_t i = sidx[j], h = head[j], r = sidx[h];
    rep[i] = r;
    prev[i] = j == h ? i : sidx[j - 1];
    const bool last = j + 1 == n || skeys[j + 1] != skeys[j];
    if (mode == FLOE_VALUES_OVERWRITE && last)
        value_set(vput, vb, r, value_get(vin, vb, i));
    if (mode == FLOE_VALUES_ADD)
        sdelta[j] = value_get(vin, vb, i);
}

/* An add's running sums back in batch order; a key's whole sum is what its
 * first occurrence puts. */
__global__ void k_sums(const uint64_t *skeys, const uint32_t *sidx, const uint32_t *head, const uint64_t *ssum,
                       uint32_t n, uint32_t vb, uint64_t *sum, void *vput)
{
    const uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n)
        return;
    sum[sidx[j]] = ssum[j];
    if (j + 1 == n || skeys[j + 1] != skeys[j])
        value_set(vput, vb, sidx[head[j]], ssum[j]); /* wraps at vb bytes, as the stored value does */
}

/* Later occurrences: they read their first occurrence's answer, which
 * k_settle_first changes after them. */
__global__ void k_settle_later(const uint32_t *rep, const uint32_t *prev, const uint64_t *sum, uint32_t n, int mode,
                               const void *vin, uint32_t vb, uint8_t *results, uint64_t *ids, void *vout)
{
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const uint32_t r = rep[i];
    if (r == i)
        return;
    const uint8_t first = results[r];
    const bool full = first == R_FULL;
    results[i] = full || first == SKIPPED ? first : (uint8_t)R_PRESENT;
    if (ids)
        ids[i] = ids[r];
    if (!vout)
        return;
    uint64_t v = 0; /* FULL: nothing stored */
    if (!full && mode == FLOE_VALUES_OVERWRITE)
        v = value_get(vin, vb, prev[i]); /* what the twin before it put */
    else if (!full && mode == FLOE_VALUES_ADD)
        v = value_get(vout, vb, r) + sum[i]; /* the value before the batch, plus the deltas so far */
    else if (!full)
        v = value_get(vout, vb, r); /* what the first occurrence left */
    value_set(vout, vb, i, v);
}

/* First occurrences: an overwrite's INSERTED put the last twin's value but
 * answers its own; an add's answers the value after its own delta. */
__global__ void k_settle_first(const uint32_t *rep, const uint64_t *sum, uint32_t n, int mode, const void *vin,
                               uint32_t vb, const uint8_t *results, void *vout)
{
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || rep[i] != i)
        return;
    if (mode == FLOE_VALUES_OVERWRITE && results[i] == R_INSERTED)
        value_set(vout, vb, i, value_get(vin, vb, i));
    else if (mode == FLOE_VALUES_ADD)
        value_set(vout, vb, i, results[i] == R_FULL ? 0 : value_get(vout, vb, i) + sum[i]);
}

/* CUB's scratch for n keys: the most any of the three passes asks. */
static cudaError_t tmp_bytes_for(size_t n, size_t *bytes)
{
    size_t sort = 0, scan = 0, sums = 0;
    cudaError_t e = cub::DeviceRadixSort::SortPairs(NULL, sort, (const uint64_t *)NULL, (uint64_t *)NULL,
                                                    (const uint32_t *)NULL, (uint32_t *)NULL, n, 0, 64);
    if (e == cudaSuccess)
        e = cub::DeviceScan::InclusiveScan(NULL, scan, (const uint32_t *)NULL, (uint32_t *)NULL,
                                           cuda::maximum<uint32_t>{}, n);
    if (e == cudaSuccess)
        e = cub::DeviceScan::InclusiveSumByKey(NULL, sums, (const uint64_t *)NULL, (const uint64_t *)NULL,
                                               (uint64_t *)NULL, n);
    *bytes = sort > scan ? sort : scan;
    *bytes = *bytes > sums ? *bytes : sums;
    return e;
}

/* *d with room for n keys of vb-byte values: grown (a power of two of keys) as one allocation. */
static floe_status reserve(gpu_dedup **dp, size_t n, uint32_t vb, floe_errinfo *err)
{
    gpu_dedup *d = *dp;
    if (d && d->cap >= n && d->vb >= vb)
        return FLOE_OK;
    size_t cap = 4096;
    while (cap < n)
        cap <<= 1;
    size_t tmp = 0;
    CUDA_TRY(tmp_bytes_for(cap, &tmp), err);
    const size_t parts[] = {8 * cap, 4 * cap, 4 * cap, 4 * cap, 4 * cap,          4 * cap,
                            4 * cap, 8 * cap, 8 * cap, 8 * cap, (size_t)vb * cap, tmp};
    size_t bytes = 0;
    for (size_t b : parts)
        bytes += (b + 255) / 256 * 256;
    void *block = NULL;
    cudaError_t e = cudaMalloc(&block, bytes);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* an out-of-memory error is not sticky */
        return floe_errinfo_set(err, e == cudaErrorMemoryAllocation ? FLOE_ERR_FULL : FLOE_ERR_INTERNAL,
                                "device memory for a batch's first occurrences (%zu bytes): %s", bytes,
                                cudaGetErrorString(e));
    }
    if (!d && !(d = (gpu_dedup *)calloc(1, sizeof *d))) {
        cudaFree(block);
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    }
    cudaFree(d->block); /* waits for the kernels that read it */
    char *at = (char *)block;
    auto piece = [&](size_t b) {
        char *p = at;
        at += (b + 255) / 256 * 256;
        return (void *)p;
    };
    d->block = block;
    d->cap = cap;
    d->vb = vb;
    d->skeys = (uint64_t *)piece(parts[0]);
    d->idx = (uint32_t *)piece(parts[1]);
    d->sidx = (uint32_t *)piece(parts[2]);
    d->head_in = (uint32_t *)piece(parts[3]);
    d->head = (uint32_t *)piece(parts[4]);
    d->rep = (uint32_t *)piece(parts[5]);
    d->prev = (uint32_t *)piece(parts[6]);
    d->sdelta = (uint64_t *)piece(parts[7]);
    d->ssum = (uint64_t *)piece(parts[8]);
    d->sum = (uint64_t *)piece(parts[9]);
    d->vput = piece(parts[10]);
    d->tmp = piece(parts[11]);
    d->tmp_bytes = tmp;
    *dp = d;
    return FLOE_OK;
}

floe_status gpu_dedup_run(gpu_dedup **dp, const uint64_t *keys, size_t n, uint32_t key_bits, const void *vin,
                          uint32_t vb, int mode, const void **put_values, cudaStream_t s, floe_errinfo *err)
{
    assert(n > 0 && n <= UINT32_MAX && (vb == 4 || vb == 8));
    floe_status st = reserve(dp, n, vb, err);
    if (st != FLOE_OK)
        return st;
    gpu_dedup *d = *dp;
    const uint32_t m = (uint32_t)n;
    size_t tmp = d->tmp_bytes;
    k_iota<<<blocks_for(m), BLOCK, 0, s>>>(d->idx, m);
    CUDA_TRY(cub::DeviceRadixSort::SortPairs(d->tmp, tmp, keys, d->skeys, d->idx, d->sidx, m, 0, (int)key_bits, s),
             err);
    k_heads<<<blocks_for(m), BLOCK, 0, s>>>(d->skeys, m, d->head_in);
    tmp = d->tmp_bytes;
    CUDA_TRY(cub::DeviceScan::InclusiveScan(d->tmp, tmp, d->head_in, d->head, cuda::maximum<uint32_t>{}, m, s), err);
    k_links<<<blocks_for(m), BLOCK, 0, s>>>(d->skeys, d->sidx, d->head, m, mode, vin, vb, d->rep, d->prev, d->vput,
                                            d->sdelta);
    if (mode == FLOE_VALUES_ADD) {
        tmp = d->tmp_bytes;
        CUDA_TRY(cub::DeviceScan::InclusiveSumByKey(d->tmp, tmp, d->skeys, d->sdelta, d->ssum, m,
                                                    cuda::std::equal_to<>{}, s),
                 err);
        k_sums<<<blocks_for(m), BLOCK, 0, s>>>(d->skeys, d->sidx, d->head, d->ssum, m, vb, d->sum, d->vput);
    }
    CUDA_TRY(cudaGetLastError(), err);
    *put_values = mode == FLOE_VALUES_KEEP ? vin : d->vput;
    return FLOE_OK;
}

floe_status gpu_dedup_settle(const gpu_dedup *d, size_t n, uint32_t vb, int mode, const void *vin, uint8_t *results,
                             uint64_t *ids, void *vout, cudaStream_t s, floe_errinfo *err)
{
    const uint32_t m = (uint32_t)n;
    k_settle_later<<<blocks_for(m), BLOCK, 0, s>>>(d->rep, d->prev, d->sum, m, mode, vin, vb, results, ids, vout);
    if (vout && mode != FLOE_VALUES_KEEP)
        k_settle_first<<<blocks_for(m), BLOCK, 0, s>>>(d->rep, d->sum, m, mode, vin, vb, results, vout);
    CUDA_TRY(cudaGetLastError(), err);
    return FLOE_OK;
}

void gpu_dedup_destroy(gpu_dedup *d)
{
    if (!d)
        return;
    cudaFree(d->block);
    free(d);
}
