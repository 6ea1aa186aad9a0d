/*
 * append.h - appending to a compact device list from many threads,
 * with one atomicAdd a warp or one a block (CUDA C++ only: included by
 * gpu/ kernels).  Every append of a kernel goes to one counter, so its
 * atomics queue at one L2 slice: a block's one atomic instead of its
 * warps' eight is worth its two barriers where many threads append.
 */
#ifndef FLOE_GPU_APPEND_H
#define FLOE_GPU_APPEND_H

#include <cub/block/block_scan.cuh>

/* Adds the calling threads of a warp to *counter at once; returns the
 * calling thread's place in the list. */
__device__ __forceinline__ unsigned long long warp_append(unsigned long long *counter)
{
    unsigned active = __activemask();
    int lane = threadIdx.x & 31, leader = __ffs(active) - 1;
    unsigned long long base = 0;
    if (lane == leader)
        base = atomicAdd(counter, (unsigned long long)__popc(active));
    base = __shfl_sync(active, base, leader);
    return base + __popc(active & ((1u << lane) - 1));
}

/* A block's appends, in its shared memory (__shared__ block_append<N> a):
 * a(counter, take) adds the threads with take set to *counter with one
 * atomic and returns each one's place (meaningless where take is not set).
 * Every thread of the block calls it: it synchronises the block. */
template <int THREADS> struct block_append {
    typedef cub::BlockScan<unsigned, THREADS> scan;
    typename scan::TempStorage tmp;
    unsigned long long base;

    __device__ __forceinline__ unsigned long long operator()(unsigned long long *counter, bool take)
    {
        unsigned at, total;
        scan(tmp).ExclusiveSum(take ? 1u : 0u, at, total);
        if (threadIdx.x == 0 && total)
            base = atomicAdd(counter, (unsigned long long)total);
        __syncthreads();
        const unsigned long long place = base + at;
        __syncthreads(); /* tmp and base are the next call's */
        return place;
    }
};

#endif /* FLOE_GPU_APPEND_H */
