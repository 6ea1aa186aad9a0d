/*
 * run_static.cu - the GPU backend's STATIC tables past their filling: the
 * freeze (the keys and values of the iceberg table it filled, gathered on
 * the device and built into a static cuckoo table that takes its place),
 * and the runner of a frozen table's batches (finds in pieces through the
 * table's device buffers, scans, figures, files; writes refused).
 */
#include "pipeline.h"

#define STATIC_PIECE_MAX ((size_t)1 << 22) /* keys per piece of a find */

/* Whether t is frozen, read as the lanes' growth reads the table's state
 * (glock: the freeze ran alone and ended under it). */
bool frozen_now(gpu_table *t)
{
    pthread_mutex_lock(&t->glock);
    const bool f = t->frozen != NULL;
    pthread_mutex_unlock(&t->glock);
    return f;
}

/* The device memory a freeze of n keys of vb-byte values needs at most
 * beside the filling table: the keys and values gathered, the static
 * table itself (16-bit rows or wider: 2 to 8 bytes a slot). */
static uint64_t freeze_bytes(const gpu_table *t, uint64_t n)
{
    const floe_spec *s = &t->base.spec;
    const uint64_t slots = (uint64_t)((double)n / 0.9) + FLOE_CUCKOO_SLOTS * 64;
    const uint32_t row_bytes = s->key_bits > 46 ? 8 : s->key_bits > 30 ? 4 : 2; /* a bound: rem_bits + 2 */
    return n * (8 + t->vb + 1) + slots * (row_bytes + t->vb);
}

/* The freeze (klock held, every lane's kernels done, no other lane's batch
 * under way: run_alone).  On failure the filling table stays as it was. */
floe_status static_freeze(gpu_table *t, floe_errinfo *err)
{
    const floe_spec *spec = &t->base.spec;
    uint64_t used[3], tomb;
    floe_status st = gpu_iceberg_count(t->ice, used, &tomb, NULL, err);
    if (st != FLOE_OK)
        return st;
    const uint64_t n = used[0] + used[1] + used[2] - tomb; /* no erase on a STATIC table: no tombstones either */
    if (!device_budget_fits(t->be->device, freeze_bytes(t, n)))
        return floe_errinfo_set(err, FLOE_ERR_NO_MEMORY,
                                "table %s: its freeze takes up to %.1f MiB more on GPU %d, past maxmemory-gpu",
                                spec->name, (double)freeze_bytes(t, n) / 1048576.0, t->be->device);
    uint64_t *d_keys = NULL;
    unsigned long long *d_count = NULL, count = 0;
    uint8_t *d_res = NULL;
    void *d_vals = NULL;
    gpu_cuckoo *c = NULL;
    cudaError_t e = cudaMalloc(&d_keys, n * 8 + 8);
    if (e == cudaSuccess)
        e = cudaMalloc(&d_count, sizeof *d_count);
    if (e == cudaSuccess && t->vb)
        e = cudaMalloc(&d_res, n + 1);
    if (e == cudaSuccess && t->vb)
        e = cudaMalloc(&d_vals, n * t->vb + 8);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(d_count, 0, sizeof *d_count, t->ks);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* an allocation's failure is not sticky */
        st = floe_errinfo_set(err, FLOE_ERR_FULL, "table %s: no device memory to gather its %llu keys: %s", spec->name,
                              (unsigned long long)n, cuda_msg(e));
    }
    if (st == FLOE_OK)
        st = gpu_iceberg_keys_all(t->ice, d_keys, n, d_count, t->ks, err);
    if (st == FLOE_OK && t->vb) /* each key's value, as a find answers it */
        st = gpu_iceberg_find(t->ice, d_keys, n, d_res, NULL, d_vals, t->ks, err);
    if (st == FLOE_OK &&
        (e = cudaMemcpyAsync(&count, d_count, sizeof count, cudaMemcpyDeviceToHost, t->ks)) == cudaSuccess)
        e = cudaStreamSynchronize(t->ks);
    if (st == FLOE_OK && e != cudaSuccess)
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "gathering table %s's keys: %s", spec->name, cuda_msg(e));
    if (st == FLOE_OK && count != n)
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "table %s: %llu keys gathered, %llu counted", spec->name, count,
                              (unsigned long long)n);
    if (st == FLOE_OK)
        st = gpu_cuckoo_build(spec, t->generation + 1, d_keys, d_vals, n, FLOE_CUCKOO_FILL, t->ks, &c, err);
    cudaFree(d_keys);
    cudaFree(d_count);
    cudaFree(d_res);
    cudaFree(d_vals);
    if (st != FLOE_OK)
        return st;
    gpu_iceberg_destroy(t->ice);
    pthread_mutex_lock(&t->glock);
    t->ice = NULL;
    t->frozen = c;
    t->generation = gpu_cuckoo_generation(c);
    t->used = n;
    pthread_mutex_unlock(&t->glock);
    return FLOE_OK;
}

/* A find of batch b's keys [off, off + m) through the table's buffers. */
static floe_status find_piece(lane *L, floe_batch *b, size_t off, size_t m, floe_errinfo *err)
{
    gpu_table *t = L->t;
    staging *s = &t->one;
    const bool ids = floe_batch_wants_ids(b), values = t->vb && (b->flags & FLOE_BATCH_WANT_VALUES);
    floe_status st = ord_stage_reserve(s, m, err);
    if (st != FLOE_OK)
        return st;
    const uint64_t t0 = floe_now_ns();
    RUN_CUDA(cudaMemcpyAsync(s->keys.d, b->keys + off, m * 8, cudaMemcpyHostToDevice, t->ks));
    st = gpu_cuckoo_find(t->frozen, s->keys.d, m, s->res.d, ids ? s->ids.d : NULL, values ? s->vout.d : NULL, t->ks,
                         err);
    if (st != FLOE_OK)
        return st;
    RUN_CUDA(cudaMemcpyAsync(b->results + off, s->res.d, m, cudaMemcpyDeviceToHost, t->ks));
    if (ids)
        RUN_CUDA(cudaMemcpyAsync(b->ids + off, s->ids.d, m * 8, cudaMemcpyDeviceToHost, t->ks));
    if (values)
        RUN_CUDA(cudaMemcpyAsync((unsigned char *)b->values_out + off * t->vb, s->vout.d, m * t->vb,
                                 cudaMemcpyDeviceToHost, t->ks));
    RUN_CUDA(cudaStreamSynchronize(t->ks));
    /* one stream, synchronised once: copies and kernels are timed together, under kernel */
    floe_stage_add(&L->stage[FLOE_STAGE_KERNEL], m, floe_now_ns() - t0);
    return FLOE_OK;
}

/* A host copy of the frozen table, saved to path or kept as an image. */
static floe_status save_or_copy(gpu_table *t, const char *path, floe_file_image **image, floe_errinfo *err)
{
    cuckoo *h;
    floe_status st = gpu_cuckoo_download(t->frozen, &h, err);
    if (st != FLOE_OK)
        return st;
    st = path ? cuckoo_save(h, path, err) : cuckoo_copy_image(h, image, err);
    cuckoo_destroy(h);
    return st;
}

/* A frozen table's batch, whatever it is, runs alone, as an ORDERED
 * table's does: finds, scans, figures and files; a freeze again changes
 * nothing; a write is refused. */
void run_static(lane *L, floe_batch *b)
{
    gpu_table *t = L->t;
    floe_errinfo *e = &b->error;
    drain(L);
    pthread_mutex_lock(&t->klock);
    switch (b->op) {
    case FLOE_OP_FIND:
        b->status = FLOE_OK;
        for (size_t off = 0; off < b->n && b->status == FLOE_OK; off += STATIC_PIECE_MAX)
            b->status = find_piece(L, b, off, b->n - off < STATIC_PIECE_MAX ? b->n - off : STATIC_PIECE_MAX, e);
        if (b->status == FLOE_OK)
            floe_answer_counts_tally(&b->counts, b->results, b->n);
        b->generation = t->generation;
        break;
    case FLOE_OP_SCAN:
        b->status = gpu_cuckoo_scan(t->frozen, b->cursor_set ? &b->cursor : NULL, b->limit, b->scan_keys,
                                    (b->flags & FLOE_BATCH_WANT_VALUES) ? b->scan_values : NULL, &b->scan_n, &b->next,
                                    &b->scan_done, e);
        break;
    case FLOE_OP_STATS:
        gpu_cuckoo_stats(t->frozen, &b->stats);
        stage_times(t, b->stats.stage);
        b->stats.device = t->be->device;
        b->status = FLOE_OK;
        break;
    case FLOE_OP_SAVE:
        b->status =
            b->path ? save_or_copy(t, b->path, NULL, e) : floe_errinfo_set(e, FLOE_ERR_INVALID, "save needs a path");
        break;
    case FLOE_OP_COPY:
        b->status = save_or_copy(t, NULL, &b->image, e);
        break;
    case FLOE_OP_FREEZE:
        b->status = FLOE_OK;
        break;
    default:
        b->status = cuckoo_refuse(&t->base.spec, b->op, e);
    }
    if (b->status == FLOE_OK)
        floe_errinfo_clear(e);
    pthread_mutex_unlock(&t->klock);
    complete(t, b);
}
