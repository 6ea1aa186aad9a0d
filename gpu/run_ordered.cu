/*
 * run_ordered.cu - the GPU backend's runner of ORDERED tables: one lane,
 * batches in pieces through one pinned staging area, ranges and images.
 */
#include "pipeline.h"

/* ---- ORDERED tables -------------------------------------------------------------------------------------- */

#define ORD_PIECE_MAX ((size_t)1 << 22) /* keys per piece of a batch */

/* Room for n keys of a piece on the device (values up to 8 bytes, the
 * keys found, answers) in the table's staging: an ORDERED or frozen STATIC
 * table's batches copy straight from and to the batch's own buffers. */
floe_status ord_stage_reserve(staging *s, size_t n, floe_errinfo *err)
{
    floe_status st = s->keys.reserve(n, ON_DEVICE, err);
    if (st == FLOE_OK)
        st = s->ids.reserve(n, ON_DEVICE, err);
    if (st == FLOE_OK)
        st = s->res.reserve(n, ON_DEVICE, err);
    if (st == FLOE_OK)
        st = s->vin.reserve(n * 8, ON_DEVICE, err);
    if (st == FLOE_OK)
        st = s->vout.reserve(n * 8, ON_DEVICE, err);
    return st;
}

/* INSERT, FIND, ERASE, SUCC or PRED of batch b's keys [off, off + m): in
 * pieces in batch order, so that the first occurrence of a key is still
 * the one INSERTED or ERASED. */
static floe_status ord_piece(lane *L, floe_batch *b, size_t off, size_t m, floe_errinfo *err)
{
    gpu_table *t = L->t;
    staging *s = &t->one;
    const uint32_t vb = t->base.spec.value_bytes;
    const bool want_values = vb && (b->flags & FLOE_BATCH_WANT_VALUES) && floe_op_has(b->op, FLOE_OPF_VALUES_OUT);
    floe_status st = ord_stage_reserve(s, m, err);
    if (st != FLOE_OK)
        return st;
    const uint64_t t0 = floe_now_ns();
    RUN_CUDA(cudaMemcpyAsync(s->keys.d, b->keys + off, m * 8, cudaMemcpyHostToDevice, t->ks));
    if (b->op == FLOE_OP_INSERT && vb && b->values)
        RUN_CUDA(cudaMemcpyAsync(s->vin.d, (const unsigned char *)b->values + off * vb, m * vb, cudaMemcpyHostToDevice,
                                 t->ks));
    floe_answer_counts ignored;
    switch (b->op) {
    case FLOE_OP_INSERT:
        st = gpu_ordered_insert(t->ord, s->keys.d, vb && b->values ? s->vin.d : NULL, m,
                                (b->flags & FLOE_BATCH_OVERWRITE) != 0, s->res.d, want_values ? s->vout.d : NULL,
                                &ignored, t->ks, err);
        break;
    case FLOE_OP_FIND:
        st = gpu_ordered_find(t->ord, s->keys.d, m, s->res.d, want_values ? s->vout.d : NULL, t->ks, err);
        break;
    case FLOE_OP_ERASE:
        st = gpu_ordered_erase(t->ord, s->keys.d, m, s->res.d, &ignored, t->ks, err);
        break;
    default:
        st = gpu_ordered_neighbours(t->ord, b->op == FLOE_OP_PRED, s->keys.d, m, s->res.d, s->ids.d,
                                    want_values ? s->vout.d : NULL, t->ks, err);
        if (st == FLOE_OK)
            RUN_CUDA(cudaMemcpyAsync(b->keys_out + off, s->ids.d, m * 8, cudaMemcpyDeviceToHost, t->ks));
    }
    if (st != FLOE_OK)
        return st;
    RUN_CUDA(cudaMemcpyAsync(b->results + off, s->res.d, m, cudaMemcpyDeviceToHost, t->ks));
    if (want_values)
        RUN_CUDA(cudaMemcpyAsync((unsigned char *)b->values_out + off * vb, s->vout.d, m * vb, cudaMemcpyDeviceToHost,
                                 t->ks));
    RUN_CUDA(cudaStreamSynchronize(t->ks));
    /* one stream, synchronised once: copies and kernels are timed together, under kernel */
    floe_stage_add(&L->stage[FLOE_STAGE_KERNEL], m, floe_now_ns() - t0);
    return FLOE_OK;
}

/* RANGE, or SCAN (a range over every key from the cursor's key on). */
static floe_status ord_range(gpu_table *t, floe_batch *b, floe_errinfo *err)
{
    const uint32_t vb = t->base.spec.value_bytes;
    const uint64_t top = floe_mask_bits(t->base.spec.key_bits);
    const bool scan = b->op == FLOE_OP_SCAN;
    b->scan_n = 0;
    if (b->cursor_set && b->cursor.generation != 0)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "%s cursor is from generation %llu; an ORDERED table is always at generation 0",
                                scan ? "scan" : "range", (unsigned long long)b->cursor.generation);
    if (scan && b->cursor_set && b->cursor.position > top)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "scan cursor position %llu is not a key of key_bits = %u: start the scan again",
                                (unsigned long long)b->cursor.position, t->base.spec.key_bits);
    const uint64_t lo = scan ? (b->cursor_set ? b->cursor.position : 0) : b->lo, hi = scan ? top : b->hi;
    const bool desc = !scan && b->desc;
    staging *s = &t->one;
    floe_status st = ord_stage_reserve(s, b->limit ? b->limit : 1, err);
    if (st != FLOE_OK)
        return st;
    const bool values = vb && (b->flags & FLOE_BATCH_WANT_VALUES) && b->scan_values;
    size_t n;
    uint64_t next;
    bool done;
    st = gpu_ordered_range(t->ord, lo, hi, desc, b->limit, s->keys.d, values ? s->vout.d : NULL, &n, &next, &done,
                           t->ks, err);
    if (st != FLOE_OK)
        return st;
    if (n)
        RUN_CUDA(cudaMemcpyAsync(b->scan_keys, s->keys.d, n * 8, cudaMemcpyDeviceToHost, t->ks));
    if (n && values)
        RUN_CUDA(cudaMemcpyAsync(b->scan_values, s->vout.d, n * vb, cudaMemcpyDeviceToHost, t->ks));
    RUN_CUDA(cudaStreamSynchronize(t->ks));
    b->scan_n = n;
    b->scan_done = done;
    b->next.position = next;
    b->next.generation = 0;
    return FLOE_OK;
}

/* The image of an ORDERED table: its keys and values downloaded in order. */
static floe_status ord_copy_gpu(gpu_table *t, floe_file_image **out, floe_errinfo *err)
{
    const uint64_t n = gpu_ordered_keys(t->ord);
    const uint32_t vb = t->base.spec.value_bytes;
    uint64_t *keys = (uint64_t *)malloc(n ? n * 8 : 8);
    void *values = malloc(n && vb ? n * vb : 8);
    if (!keys || !values) {
        free(keys);
        free(values);
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory copying table %s", t->base.spec.name);
    }
    floe_status st = gpu_ordered_download(t->ord, keys, vb ? values : NULL, err);
    if (st != FLOE_OK) {
        free(keys);
        free(values);
        return st;
    }
    return ordered_image_of(&t->base.spec, keys, values, n, out, err);
}

/* An ORDERED table's batch, whatever it is, runs alone, as a TREE's does. */
void run_ordered(lane *L, floe_batch *b)
{
    gpu_table *t = L->t;
    floe_errinfo *e = &b->error;
    assert(b->op != FLOE_OP_GET && b->op != FLOE_OP_REBUILD); /* refused at the door */
    pthread_mutex_lock(&t->klock);
    switch (b->op) {
    case FLOE_OP_INSERT:
    case FLOE_OP_FIND:
    case FLOE_OP_ERASE:
    case FLOE_OP_SUCC:
    case FLOE_OP_PRED:
        b->status = FLOE_OK;
        for (size_t off = 0; off < b->n && b->status == FLOE_OK; off += ORD_PIECE_MAX)
            b->status = ord_piece(L, b, off, b->n - off < ORD_PIECE_MAX ? b->n - off : ORD_PIECE_MAX, e);
        if (b->status == FLOE_OK)
            floe_answer_counts_tally(&b->counts, b->results, b->n);
        break;
    case FLOE_OP_RANGE:
    case FLOE_OP_SCAN:
        b->status = ord_range(t, b, e);
        break;
    case FLOE_OP_STATS:
        gpu_ordered_stats(t->ord, &b->stats);
        stage_times(t, b->stats.stage);
        b->stats.device = t->be->device;
        b->status = FLOE_OK;
        break;
    case FLOE_OP_SAVE: {
        floe_file_image *im = NULL;
        b->status = !b->path ? floe_errinfo_set(e, FLOE_ERR_INVALID, "save needs a path") : ord_copy_gpu(t, &im, e);
        if (b->status == FLOE_OK)
            b->status = write_image(im, b->path, e);
        break;
    }
    case FLOE_OP_COPY:
        b->status = ord_copy_gpu(t, &b->image, e);
        break;
    default:
        b->status =
            floe_errinfo_set(e, FLOE_ERR_UNSUPPORTED, "operation %d is not available on an ORDERED table", (int)b->op);
    }
    pthread_mutex_unlock(&t->klock);
    complete(t, b);
}
