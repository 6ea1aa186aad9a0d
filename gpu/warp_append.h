/*
 * warp_append.h - appending to a compact device list from many threads,
 * with one atomicAdd a warp (CUDA C++ only: included by gpu/ kernels).
 */
#ifndef FLOE_GPU_WARP_APPEND_H
#define FLOE_GPU_WARP_APPEND_H

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

#endif /* FLOE_GPU_WARP_APPEND_H */
