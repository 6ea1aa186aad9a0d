/*
 * bucket_device.cuh - device helpers for a bucket of rows packed into
 * 64-bit words (tables/layout.h), for every GPU engine that keeps them
 * (iceberg_device.cuh's SET and MAP tables, cuckoo_gpu.cu's static ones):
 * a bucket's snapshot in 16-byte loads by the cache path its kernel needs,
 * the first row of a value in it, and a word of it by a run-time index.
 * The snapshot's size W is a compile-time constant, so that it stays in
 * registers.
 */
#ifndef FLOE_GPU_BUCKET_DEVICE_CUH
#define FLOE_GPU_BUCKET_DEVICE_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "layout.h"

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

/* s[w] for a run-time w, without indexing the snapshot (which would put it in local memory). */
template <int W> __device__ __forceinline__ uint64_t word_at(const uint64_t (&s)[W], int w)
{
    uint64_t x = 0;
#pragma unroll
    for (int i = 0; i < W; i++)
        x = i == w ? s[i] : x;
    return x;
}

#endif /* FLOE_GPU_BUCKET_DEVICE_CUH */
