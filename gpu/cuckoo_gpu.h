/*
 * cuckoo_gpu.h - the GPU engine of frozen STATIC tables, a plain C API over
 * CUDA kernels (cuckoo_gpu.cu): the compact bucketed cuckoo table of
 * tables/cuckoo_layout.h in device memory, the same rows in the same
 * buckets as the CPU engine's (tables/cuckoo.h) for the same keys placed
 * alike, and the same answers; a frozen table's file loads on either.
 *
 * The build places every key at once, a thread a key, each row by a
 * compare-and-swap of its word: first every key that finds room at its
 * choice 0, then the rest by cuckoo moves, an evicted key carried on to
 * its next choice by the thread that evicted it (cuckoo_layout.h says how;
 * the CPU engine's build on its pool is the same, a thread a chunk).  A find is a thread a key: its bucket of choice 0
 * read whole (32 bytes of 16-bit rows), then, only where that one is full and does not hold it, its bucket of choice 1.
 *
 * Every function returns a floe_status; CUDA errors come back as
 * FLOE_ERR_INTERNAL with CUDA's message.  Functions that say "waits"
 * synchronise their stream.
 */
#ifndef FLOE_GPU_CUCKOO_GPU_H
#define FLOE_GPU_CUCKOO_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "cuckoo.h"
#include "cuckoo_layout.h"
#include "iceberg_gpu.h" /* gpu_stream */
#include "spec.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpu_cuckoo gpu_cuckoo;

/* A table of n DISTINCT device keys (each below 2^key_bits) and, where
 * spec has values, their values (d_values: n x value_bytes, packed), sized
 * as the CPU engine sizes it (at most `fill` full, the next sizes while a
 * build fails), its permutations from spec->seed, at `generation`.
 * ERR_FULL if no size places every key, nothing left allocated; ERR_FULL
 * too where the device has no room for it.  Waits. */
floe_status gpu_cuckoo_build(const floe_spec *spec, uint64_t generation, const uint64_t *d_keys, const void *d_values,
                             size_t n, double fill, gpu_stream stream, gpu_cuckoo **out, floe_errinfo *err);
void gpu_cuckoo_destroy(gpu_cuckoo *t);

/* PRESENT or ABSENT for n device keys (a key wider than the table's is
 * ABSENT); d_ids (may be NULL) each key's slot, FLOE_NO_ID where ABSENT;
 * d_values_out (may be NULL; a table with values) its value, 0 where
 * ABSENT.  Enqueues only. */
floe_status gpu_cuckoo_find(const gpu_cuckoo *t, const uint64_t *d_keys, size_t n, uint8_t *d_results, uint64_t *d_ids,
                            void *d_values_out, gpu_stream stream, floe_errinfo *err);
/* The same with host arrays: copies in, runs, copies out, waits (tests). */
floe_status gpu_cuckoo_find_host(const gpu_cuckoo *t, const uint64_t *keys, size_t n, uint8_t *results, uint64_t *ids,
                                 void *values_out, floe_errinfo *err);

/* The host table h copied to the device (a load: cuckoo_load checked it). */
floe_status gpu_cuckoo_upload(const cuckoo *h, gpu_cuckoo **out, floe_errinfo *err);
/* A host copy of t (a save or a snapshot: cuckoo_save of it).  Waits. */
floe_status gpu_cuckoo_download(const gpu_cuckoo *t, cuckoo **out, floe_errinfo *err);

/* As cuckoo_scan, its rows copied from the device a window at a time. */
floe_status gpu_cuckoo_scan(const gpu_cuckoo *t, const floe_scan_pos *from, size_t limit, uint64_t *keys, void *values,
                            size_t *n, floe_scan_pos *next, int *done, floe_errinfo *err);
/* As cuckoo_stats (backend "gpu"; the caller sets the device). */
void gpu_cuckoo_stats(const gpu_cuckoo *t, floe_table_stats *s);

const floe_spec *gpu_cuckoo_spec(const gpu_cuckoo *t);
uint64_t gpu_cuckoo_keys(const gpu_cuckoo *t);
uint64_t gpu_cuckoo_generation(const gpu_cuckoo *t);
/* Bytes of device memory its arrays hold: the buckets and the values. */
uint64_t gpu_cuckoo_memory(const gpu_cuckoo *t);
const floe_cuckoo_geometry *gpu_cuckoo_geometry(const gpu_cuckoo *t);

#ifdef __cplusplus
}
#endif

#endif /* FLOE_GPU_CUCKOO_GPU_H */
