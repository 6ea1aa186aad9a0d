/*
 * iceberg_gpu.h - the GPU engine for SET tables, a plain C API over CUDA
 * kernels (iceberg_gpu.cu).  Same layout as the CPU engine (tables/layout.h),
 * same answers: find-or-put with the first occurrence of a key in a batch
 * INSERTED, find, and erase with the first occurrence ERASED.
 *
 * Work step 1 of the GPU engine: device-resident tables and kernels driven
 * with device-resident keys (the K1 benchmark's setting) and a host path
 * for tests.  The batch pipeline behind tables/backend.h comes next.
 *
 * Every function takes a CUDA stream (0: the legacy default stream) and
 * returns a floe_status; CUDA errors come back as FLOE_ERR_INTERNAL with the
 * CUDA message in err.  Nothing synchronises the device except where a
 * function says it waits.
 */
#ifndef FLOE_GPU_ICEBERG_GPU_H
#define FLOE_GPU_ICEBERG_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "spec.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpu_iceberg gpu_iceberg;
typedef struct CUstream_st *gpu_stream;

/* Whether a usable CUDA device is present (and its name in name, if not NULL). */
int gpu_available(char *name, size_t len);

/* An empty SET table of 2^addr_bits primary buckets in device memory. */
floe_status gpu_iceberg_create(const floe_spec *spec, uint32_t addr_bits, gpu_iceberg **out, floe_error *err);
void gpu_iceberg_destroy(gpu_iceberg *t);

#define GPU_NO_DEDUP 1u /* skip the first-occurrence fix-up: any occurrence may be INSERTED */

/* Find-or-put of n device-resident keys; d_results (n bytes) and d_ids (n,
 * may be NULL) in device memory.  Asynchronous on stream. */
floe_status gpu_iceberg_put(gpu_iceberg *t, const uint64_t *d_keys, size_t n, uint8_t *d_results, uint64_t *d_ids,
                            unsigned flags, gpu_stream stream, floe_error *err);
/* PRESENT / ABSENT for n device-resident keys. */
floe_status gpu_iceberg_find(gpu_iceberg *t, const uint64_t *d_keys, size_t n, uint8_t *d_results, uint64_t *d_ids,
                             gpu_stream stream, floe_error *err);

/* ERASED / ABSENT for n device-resident keys (the first occurrence of a key
 * in the batch is the one ERASED); the slot becomes a tombstone. */
floe_status gpu_iceberg_erase(gpu_iceberg *t, const uint64_t *d_keys, size_t n, uint8_t *d_results, gpu_stream stream,
                              floe_error *err);

/* The same with host arrays: copies in, runs, copies out, waits. */
floe_status gpu_iceberg_put_host(gpu_iceberg *t, const uint64_t *keys, size_t n, uint8_t *results, uint64_t *ids,
                                 floe_error *err);
floe_status gpu_iceberg_erase_host(gpu_iceberg *t, const uint64_t *keys, size_t n, uint8_t *results, floe_error *err);
floe_status gpu_iceberg_find_host(gpu_iceberg *t, const uint64_t *keys, size_t n, uint8_t *results, uint64_t *ids,
                                  floe_error *err);

/* Occupied slots per level (waits for the device). */
floe_status gpu_iceberg_used(gpu_iceberg *t, uint64_t used[3], floe_error *err);
/* Bytes of device memory the table holds. */
uint64_t gpu_iceberg_memory(const gpu_iceberg *t);
uint64_t gpu_iceberg_slots(const gpu_iceberg *t);

#ifdef __cplusplus
}
#endif

#endif /* FLOE_GPU_ICEBERG_GPU_H */
