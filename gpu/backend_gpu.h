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

/* The number of CUDA devices (0 where there is none or no CUDA in this build). */
int floe_gpu_count(void);

/* 1 if CUDA device `device` is present; its name goes to name (if not NULL). */
int floe_gpu_device(int device, char *name, size_t len);

/* Free and total memory of a device in bytes (cudaMemGetInfo): 0, or -1
 * where there is no such device or no CUDA in this build. */
int floe_gpu_meminfo(int device, uint64_t *free_bytes, uint64_t *total_bytes);

/* The GPU backend on CUDA device `device` (every table of it lives there;
 * tables/partition.h spreads one table over several); host_threads size
 * the pool that deduplicates MAP batches (0: one per CPU).
 * FLOE_ERR_UNSUPPORTED with a message saying why where there is no such
 * device or no CUDA in this build. */
floe_status floe_backend_gpu_create(int device, unsigned host_threads, floe_backend **out, floe_errinfo *err);

#ifdef __cplusplus
}
#endif

#endif /* FLOE_GPU_BACKEND_GPU_H */
