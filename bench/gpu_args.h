/*
 * gpu_args.h - option values of the GPU benchmarks (k1_gpu.cu, t1_gpu.cu).
 */
#ifndef FLOE_BENCH_GPU_ARGS_H
#define FLOE_BENCH_GPU_ARGS_H

#include <stdint.h>
#include <stdio.h>

#include "floe_wire.h"

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
