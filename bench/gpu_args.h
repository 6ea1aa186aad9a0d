/*
 * gpu_args.h - what the GPU benchmarks (k1_gpu.cu, t1_gpu.cu, o1_gpu.cu) share:
 * option values, and the checks that end a run on a failed call.
 */
#ifndef FLOE_BENCH_GPU_ARGS_H
#define FLOE_BENCH_GPU_ARGS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "floe_wire.h"
#include "status.h"

#ifdef __CUDACC__
#include <cuda_runtime.h>
/* A CUDA call that must succeed: else the place, the call and CUDA's message, and exit 1. */
#define CHECK(call)                                                                                                    \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) {                                                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));                     \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)
#endif

/* An engine call that must succeed: else prog's message, and exit 1. */
static inline void gpu_args_must(const char *prog, floe_status st, const floe_errinfo *err)
{
    if (st != FLOE_OK) {
        fprintf(stderr, "%s: %s\n", prog, err->msg);
        exit(1);
    }
}

/* The value of option --opt in lo..hi (a whole number; K, M, G suffixes as
 * every floe tool takes them: floe_size_parse) in *out, or 0 after saying
 * on stderr, as program prog, what --opt takes. */
static inline int gpu_args_number(const char *prog, const char *opt, const char *arg, uint64_t lo, uint64_t hi,
                                  uint64_t *out)
{
    if (floe_size_parse(arg, out) && *out >= lo && *out <= hi)
        return 1;
    if (hi == UINT64_MAX)
        fprintf(stderr, "%s: --%s takes a whole number >= %llu (K, M, G suffixes allowed), got '%s'\n", prog, opt,
                (unsigned long long)lo, arg);
    else
        fprintf(stderr, "%s: --%s takes a whole number %llu..%llu, got '%s'\n", prog, opt, (unsigned long long)lo,
                (unsigned long long)hi, arg);
    return 0;
}

#endif /* FLOE_BENCH_GPU_ARGS_H */
