/*
 * staging.cu - the runners' staging buffers (pipeline.h's stage_buf and
 * staging): pinned host memory and device memory, grown as pieces need.
 */
#include "pipeline.h"

void stage_buf_release(void **h, void **d)
{
    if (*h)
        cudaFreeHost(*h);
    if (*d)
        cudaFree(*d);
    *h = *d = NULL;
}

floe_status stage_buf_alloc(void **h, void **d, size_t bytes, unsigned where, floe_errinfo *err)
{
    stage_buf_release(h, d);
    const size_t n = bytes ? bytes : 1;
    cudaError_t e = cudaSuccess;
    if (where & ON_HOST)
        e = cudaHostAlloc(h, n, cudaHostAllocDefault);
    if (e == cudaSuccess && (where & ON_DEVICE))
        e = cudaMalloc(d, n);
    if (e == cudaSuccess)
        return FLOE_OK;
    stage_buf_release(h, d); /* what did get allocated (a failed call leaves NULL, as released above) */
    cudaGetLastError();      /* an allocation's failure is not sticky: clear it */
    return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "cannot allocate %zu bytes of staging%s: %s", bytes,
                            where == ON_BOTH   ? " (pinned and on the device)"
                            : where == ON_HOST ? " (pinned)"
                                               : "",
                            cuda_msg(e));
}

void staging_free(staging *s)
{
    s->keys.release();
    s->vec.release();
    s->ids.release();
    s->res.release();
    s->vin.release();
    s->vout.release();
    s->first.release();
}
