/*
 * backend_gpu_none.c - the GPU backend's entry points in a build without
 * CUDA (make GPU=0, or no nvcc): they report that, so that floed and the
 * tools need no #ifdef.
 */
#include "backend_gpu.h"

int floe_gpu_built(void)
{
    return 0;
}

void floe_gpu_load_kernels_at_start(void)
{
}

int floe_gpu_count(void)
{
    return 0;
}

int floe_gpu_device(int device, char *name, size_t len)
{
    (void)device;
    if (name && len)
        name[0] = '\0';
    return 0;
}

int floe_gpu_meminfo(int device, uint64_t *free_bytes, uint64_t *total_bytes)
{
    (void)device;
    *free_bytes = *total_bytes = 0;
    return -1;
}

void floe_gpu_set_budget(bool (*fits)(int device, uint64_t bytes))
{
    (void)fits;
}

int floe_gpu_healthy(int device, char *why, size_t len)
{
    (void)device;
    if (why && len)
        why[0] = '\0';
    return -1;
}

void floe_gpu_fault_arm(int device, unsigned after)
{
    (void)device;
    (void)after;
}

floe_status floe_backend_gpu_create(int device, unsigned host_threads, floe_backend **out, floe_errinfo *err)
{
    (void)device;
    (void)host_threads;
    *out = NULL;
    return floe_errinfo_set(err, FLOE_ERR_UNSUPPORTED,
                            "this build has no GPU backend (built with GPU=0 or without nvcc)");
}
