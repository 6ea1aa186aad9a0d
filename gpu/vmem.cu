/*
 * vmem.cu - device arrays mapped a chunk at a time (see vmem.h).
 */
#include <cuda.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "vmem.h"


struct gpu_vmem {
    CUdeviceptr base;
    size_t bytes;   /* the array's */
    size_t chunk;   /* a multiple of the granularity */
    size_t nchunks; /* the range reserved: nchunks * chunk */
    size_t mapped;  /* chunks mapped */
    int device;
    bool *on; /* which chunks are mapped (their memory goes back when unmapped) */
};

/* The driver's functions, through the runtime. */
static struct {
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*free_range)(CUdeviceptr, size_t);
    CUresult (*granularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
    cudaError_t loaded;
} drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

static void load_one(const char *name, void **fn)
{
    cudaDriverEntryPointQueryResult q;
    if (drv.loaded == cudaSuccess &&
        (cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
         q != cudaDriverEntryPointSuccess || !*fn))
        drv.loaded = cudaErrorNotSupported;
}

static void load_driver(void)
{
    drv.loaded = cudaSuccess;
    load_one("cuMemCreate", (void **)&drv.create);
    load_one("cuMemRelease", (void **)&drv.release);
    load_one("cuMemMap", (void **)&drv.map);
    load_one("cuMemUnmap", (void **)&drv.unmap);
    load_one("cuMemSetAccess", (void **)&drv.set_access);
    load_one("cuMemAddressReserve", (void **)&drv.reserve);
    load_one("cuMemAddressFree", (void **)&drv.free_range);
    load_one("cuMemGetAllocationGranularity", (void **)&drv.granularity);
}

static cudaError_t from_cu(CUresult r)
{
    return r == CUDA_SUCCESS               ? cudaSuccess
           : r == CUDA_ERROR_OUT_OF_MEMORY ? cudaErrorMemoryAllocation
                                           : cudaErrorUnknown;
}

static CUmemAllocationProp prop_of(int device)
{
    CUmemAllocationProp p = {};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = device;
    return p;
}

extern "C" cudaError_t gpu_vmem_reserve(size_t bytes, unsigned chunks, gpu_vmem **out, void **base)
{
    *out = NULL;
    *base = NULL;
    pthread_once(&drv_once, load_driver);
    if (drv.loaded != cudaSuccess)
        return drv.loaded;
    int device;
    cudaError_t e = cudaGetDevice(&device);
    if (e != cudaSuccess)
        return e;
    const CUmemAllocationProp p = prop_of(device);
    size_t gran = 0;
    if ((e = from_cu(drv.granularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))) != cudaSuccess)
        return e;
    size_t chunk = (bytes / chunks + gran - 1) / gran * gran;
    if (chunk < gran)
        chunk = gran;
    gpu_vmem *v = (gpu_vmem *)calloc(1, sizeof *v);
    if (!v)
        return cudaErrorMemoryAllocation;
    v->bytes = bytes;
    v->chunk = chunk;
    v->nchunks = bytes ? (bytes + chunk - 1) / chunk : 1;
    v->device = device;
    v->on = (bool *)calloc(v->nchunks, sizeof *v->on);
    if (!v->on || (e = from_cu(drv.reserve(&v->base, v->nchunks * chunk, gran, 0, 0))) != cudaSuccess) {
        free(v->on);
        free(v);
        return e != cudaSuccess ? e : cudaErrorMemoryAllocation;
    }
    *out = v;
    *base = (void *)v->base;
    return cudaSuccess;
}

/* Chunks [c, end) unmapped, in one call (their memory goes back). */
static cudaError_t unmap_run(gpu_vmem *v, size_t c, size_t end)
{
    if (c == end)
        return cudaSuccess;
    const cudaError_t e = from_cu(drv.unmap(v->base + c * v->chunk, (end - c) * v->chunk));
    for (size_t k = c; k < end; k++)
        v->on[k] = false;
    v->mapped -= end - c;
    return e;
}

/* Chunks [c, end), none mapped, mapped: each its own memory (released at
 * once: the mapping holds it), then access for the run in one call. */
static cudaError_t map_run(gpu_vmem *v, size_t c, size_t end, cudaStream_t s)
{
    const CUmemAllocationProp p = prop_of(v->device);
    cudaError_t e = cudaSuccess;
    size_t k = c;
    for (; k < end && e == cudaSuccess; k++) {
        CUmemGenericAllocationHandle h;
        if ((e = from_cu(drv.create(&h, v->chunk, &p, 0))) != cudaSuccess)
            break;
        e = from_cu(drv.map(v->base + k * v->chunk, v->chunk, 0, h, 0));
        drv.release(h);
        if (e != cudaSuccess)
            break;
        v->on[k] = true;
        v->mapped++;
    }
    if (e == cudaSuccess) {
        CUmemAccessDesc access = {};
        access.location = p.location;
        access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        e = from_cu(drv.set_access(v->base + c * v->chunk, (end - c) * v->chunk, &access, 1));
    }
    if (e == cudaSuccess)
        e = cudaMemsetAsync((void *)(v->base + c * v->chunk), 0, (end - c) * v->chunk, s);
    if (e != cudaSuccess)
        unmap_run(v, c, k); /* the run's chunks mapped so far */
    return e;
}

extern "C" cudaError_t gpu_vmem_map(gpu_vmem *v, size_t off, size_t len, cudaStream_t s)
{
    if (len == 0)
        return cudaSuccess;
    const size_t end = (off + len - 1) / v->chunk + 1 < v->nchunks ? (off + len - 1) / v->chunk + 1 : v->nchunks;
    cudaError_t e = cudaSuccess;
    for (size_t c = off / v->chunk; c < end && e == cudaSuccess;) {
        size_t r = c;
        while (r < end && !v->on[r])
            r++;
        if (r > c)
            e = map_run(v, c, r, s);
        while (r < end && v->on[r])
            r++;
        c = r;
    }
    return e;
}

/* The mapped runs of chunks [c, end) unmapped. */
static cudaError_t unmap_chunks(gpu_vmem *v, size_t c, size_t end)
{
    cudaError_t e = cudaSuccess;
    while (c < end && e == cudaSuccess) {
        while (c < end && !v->on[c])
            c++;
        size_t r = c;
        while (r < end && v->on[r])
            r++;
        e = unmap_run(v, c, r);
        c = r;
    }
    return e;
}

extern "C" cudaError_t gpu_vmem_unmap(gpu_vmem *v, size_t off, size_t len)
{
    const size_t end = off + len >= v->bytes ? v->nchunks : (off + len) / v->chunk;
    const size_t c = (off + v->chunk - 1) / v->chunk;
    return c < end ? unmap_chunks(v, c, end) : cudaSuccess;
}

extern "C" size_t gpu_vmem_mapped(const gpu_vmem *v)
{
    return v ? v->mapped * v->chunk : 0;
}

extern "C" void gpu_vmem_free(gpu_vmem *v)
{
    if (!v)
        return;
    unmap_chunks(v, 0, v->nchunks);
    drv.free_range(v->base, v->nchunks * v->chunk);
    free(v->on);
    free(v);
}
