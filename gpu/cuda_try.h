/*
 * cuda_try.h - the one way the GPU engines turn a failed CUDA call into an
 * error value: FLOE_ERR_INTERNAL naming the call and CUDA's message.
 */
#ifndef FLOE_GPU_CUDA_TRY_H
#define FLOE_GPU_CUDA_TRY_H

#include <cuda_runtime.h>

#include "status.h"

#define CUDA_TRY(call, err)                                                                                            \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess)                                                                                         \
            return floe_errinfo_set((err), FLOE_ERR_INTERNAL, "%s: %s", #call, cudaGetErrorString(e_));                \
    } while (0)

#endif /* FLOE_GPU_CUDA_TRY_H */
