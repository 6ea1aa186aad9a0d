/*
 * vmem.h - device arrays whose memory is mapped and given back a chunk at a
 * time (CUDA's virtual memory management), so that a growing table holds
 * only the parts of its old and new arrays that keys still live in
 * (iceberg_table.cu, "growth within twice the bytes").
 *
 * An array reserves its address range once; chunks of it are mapped
 * (zeroed) and unmapped by byte ranges.  Kernels must not touch an
 * unmapped chunk: the caller orders unmaps after every kernel that read
 * the range.  The driver's functions are reached through the runtime
 * (cudaGetDriverEntryPointByVersion), so nothing links libcuda.
 */
#ifndef FLOE_GPU_VMEM_H
#define FLOE_GPU_VMEM_H

#include <cuda_runtime.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpu_vmem gpu_vmem;

/* An array of `bytes` on the current device, nothing mapped yet: its address
 * in *base.  It is cut into `chunks` chunks, or fewer of the device's
 * granularity. */
cudaError_t gpu_vmem_reserve(size_t bytes, unsigned chunks, gpu_vmem **out, void **base);

/* Maps every chunk that [off, off + len) touches and is not mapped yet, and
 * zeroes it on stream s (a run of chunks with one call for access). */
cudaError_t gpu_vmem_map(gpu_vmem *v, size_t off, size_t len, cudaStream_t s);

/* Unmaps every chunk that lies wholly inside [off, off + len) (a range that
 * reaches the array's end takes its last chunk). */
cudaError_t gpu_vmem_unmap(gpu_vmem *v, size_t off, size_t len);

/* Bytes mapped now. */
size_t gpu_vmem_mapped(const gpu_vmem *v);

/* Everything unmapped and the range given back (NULL: nothing). */
void gpu_vmem_free(gpu_vmem *v);

#ifdef __cplusplus
}
#endif

#endif /* FLOE_GPU_VMEM_H */
