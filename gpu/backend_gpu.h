/*
 * backend_gpu.h - the GPU backend: tables/backend.h over the GPU engine
 * (iceberg_gpu.h), with the batch pipeline (backend_gpu.cu).
 *
 * Builds without CUDA (make GPU=0) link backend_gpu_none.c instead, whose
 * functions say so; callers need no #ifdef.
 */
#ifndef FLOE_GPU_BACKEND_GPU_H
#define FLOE_GPU_BACKEND_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 if this build has the GPU backend. */
int floe_gpu_built(void);

/* Has CUDA load every kernel when the process first uses it, not each at
 * its first launch (CUDA's default since 12.2), unless the environment sets
 * CUDA_MODULE_LOADING: a server's first request of each kind and a table's
 * first growth then load nothing (on an H200, floed's first TREE insert took
 * 9 ms instead of 19, a TREE's first growth in T1 5-9 ms less), for about
 * 12 MiB more of each device's memory and no slower start.  For programs
 * that serve or measure (floed, the benchmarks): call first, before any
 * CUDA call. */
void floe_gpu_load_kernels_at_start(void);

/* The number of CUDA devices (0 where there is none or no CUDA in this build). */
int floe_gpu_count(void);

/* 1 if CUDA device `device` is present; its name goes to name (if not NULL). */
int floe_gpu_device(int device, char *name, size_t len);

/* Free and total memory of a device in bytes (cudaMemGetInfo): 0, or -1
 * where there is no such device or no CUDA in this build. */
int floe_gpu_meminfo(int device, uint64_t *free_bytes, uint64_t *total_bytes);

/* A limit on growth (floed's maxmemory-gpu): fits(device, bytes) is asked
 * before a GPU table grows, with the bytes its new arrays take on that
 * device; false leaves the table as it is (the keys that needed the room
 * answer FULL).  NULL, the default: no limit.  Set once, before any table. */
void floe_gpu_set_budget(bool (*fits)(int device, uint64_t bytes));

/* 1 while CUDA device `device` works; 0 once a CUDA call on it has reported
 * an error that leaves its context unusable for the rest of the process (an
 * illegal address, a launch failure, an uncorrectable ECC or NVLink error, a
 * lost device), with what happened and the table that met it first in why.
 * From then on every table with a part on it answers FLOE_ERR_UNAVAILABLE,
 * and only a new process can use the device again.  -1: no such device.
 * Each call asks the driver too (without waiting for any work), so that a
 * device is found failed even when no table of it has run since: on the
 * 2 x H200 hosts measured, a fault on one device left the process's context
 * on the other unusable as well (CUDA reported the same error on both). */
int floe_gpu_healthy(int device, char *why, size_t len);

/* Tests only: the `after`-th batch begun from now on a table of `device`
 * first runs a kernel that stores through an address no allocation covers,
 * so that the device fails as a bug would make it (0 disarms). */
void floe_gpu_fault_arm(int device, unsigned after);

/* The GPU backend on CUDA device `device` (every table of it lives there;
 * tables/partition.h spreads one table over several); host_threads size
 * the pool that copies batches into and out of staging (0: one per CPU).
 * FLOE_ERR_UNSUPPORTED with a message saying why where there is no such
 * device or no CUDA in this build. */
floe_status floe_backend_gpu_create(int device, unsigned host_threads, floe_backend **out, floe_errinfo *err);

#ifdef __cplusplus
}
#endif

#endif /* FLOE_GPU_BACKEND_GPU_H */
