/*
 * dedup_gpu.cuh - first occurrences inside a MAP insert's batch, on the
 * device: the GPU engine's form of tables/dedup.h, with the same answers.
 *
 * A SET put settles its twins after the put (iceberg_gpu.cu's fix-up), but
 * a MAP's first occurrence must store the value the whole batch implies
 * (its own, the last twin's with overwrite, the sum of the deltas with
 * add), so the twins are found before the put: a stable radix sort of
 * (key, index) by key, in which each key's occurrences stand together in
 * batch order.  From it, each occurrence's first (rep) and previous twin
 * (prev), each first occurrence's value to put, and an add's running sums.
 * The put takes first occurrences only (rep[i] == i); the settle then gives
 * every later occurrence the answer in-order application implies.  All of
 * it is enqueued on the batch's stream: the host waits for nothing.
 */
#ifndef FLOE_GPU_DEDUP_GPU_CUH
#define FLOE_GPU_DEDUP_GPU_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* Scratch for batches of up to cap keys, grown on demand (one allocation). */
struct gpu_dedup {
    size_t cap;
    uint32_t vb;
    void *block;
    uint64_t *skeys; /* the keys sorted */
    uint32_t *idx;   /* 0 .. n - 1, then (sidx) their order by key */
    uint32_t *sidx;
    uint32_t *head; /* sorted position of each one's first occurrence (a max scan's in and out) */
    uint32_t *head_in;
    uint32_t *rep;    /* batch order: the first occurrence of each key's */
    uint32_t *prev;   /* batch order: the previous occurrence (itself for a first) */
    uint64_t *sdelta; /* an add's deltas, sorted, then their running sums by key */
    uint64_t *ssum;
    uint64_t *sum; /* batch order: the sum of the deltas up to and including each occurrence */
    void *vput;    /* batch order, at first occurrences: the value the put takes (overwrite, add) */
    void *tmp;     /* CUB's */
    size_t tmp_bytes;
};

/* Finds each key's first occurrence among keys[0, n) (device memory; every
 * key below 2^key_bits), and for mode (floe_value_mode) the values the
 * first occurrences put: *put_values is vin (keep) or d->vput.  *d is
 * created or grown as needed.  Enqueued on s. */
floe_status gpu_dedup_run(gpu_dedup **d, const uint64_t *keys, size_t n, uint32_t key_bits, const void *vin,
                          uint32_t vb, int mode, const void **put_values, cudaStream_t s, floe_errinfo *err);

/* After the put of the first occurrences (results, ids and values_out
 * written there, as k_put_map answers), every later occurrence's answer, as
 * floe_dedup_settle gives it: PRESENT (FULL, or skipped, where its first
 * occurrence was), the same id, the value stored before it (an add: every
 * occurrence, the first too, the value after its own delta).  ids and vout
 * may be NULL.  Enqueued on s. */
floe_status gpu_dedup_settle(const gpu_dedup *d, size_t n, uint32_t vb, int mode, const void *vin, uint8_t *results,
                             uint64_t *ids, void *vout, cudaStream_t s, floe_errinfo *err);

void gpu_dedup_destroy(gpu_dedup *d);

#endif /* FLOE_GPU_DEDUP_GPU_CUH */
