/*
 * run_tree.cu - the GPU backend's runner of TREE tables: one lane, one batch
 * at a time, in pieces through one pinned staging area (the engine reads a
 * count back from the device within every batch anyway).
 */
#include "pipeline.h"

/* ---- TREE tables ---------------------------------------------------------------------------------------- */

#define TREE_PIECE_MAX (1u << 20) /* vectors per piece */
#define TREE_SCAN_STEP (1u << 16) /* root slots per scan step */

/* Room for n vectors of W words in the table's staging (their ids,
 * answers, and states' first changes). */
static floe_status tree_stage_reserve(staging *s, size_t n, uint32_t W, floe_errinfo *err)
{
    floe_status st = s->vec.reserve(n * W, ON_BOTH, err);
    if (st == FLOE_OK)
        st = s->ids.reserve(n, ON_BOTH, err);
    if (st == FLOE_OK)
        st = s->res.reserve(n, ON_BOTH, err);
    if (st == FLOE_OK)
        st = s->first.reserve(n + 1, ON_BOTH, err);
    return st;
}

/* INSERT or FIND of m vectors (answers and, ids not NULL, ids), or GET of
 * the m ids `in` (vectors_out gets the vectors), through the table's staging. */
static floe_status tree_run(lane *L, floe_op op, const void *in, size_t m, uint8_t *results, uint64_t *ids,
                            uint32_t *vectors_out, floe_errinfo *err)
{
    gpu_table *t = L->t;
    const uint32_t W = t->base.spec.words;
    staging *s = &t->one;
    const bool want_ids = op != FLOE_OP_GET && ids;
    floe_status st = tree_stage_reserve(s, m, W, err);
    if (st != FLOE_OK)
        return st;
    if (op == FLOE_OP_GET) {
        memcpy(s->ids.h, in, m * 8);
        RUN_CUDA(cudaMemcpyAsync(s->ids.d, s->ids.h, m * 8, cudaMemcpyHostToDevice, t->ks));
        st = gpu_tree_get(t->tree, s->ids.d, 0, m, s->res.d, s->vec.d, t->ks, err);
        if (st != FLOE_OK)
            return st;
        RUN_CUDA(cudaMemcpyAsync(s->vec.h, s->vec.d, m * W * 4, cudaMemcpyDeviceToHost, t->ks));
    } else {
        const uint64_t t0 = floe_now_ns();
        memcpy(s->vec.h, in, m * W * 4);
        floe_stage_add(&L->stage[FLOE_STAGE_STAGE_IN], m, floe_now_ns() - t0);
        RUN_CUDA(cudaMemcpyAsync(s->vec.d, s->vec.h, m * W * 4, cudaMemcpyHostToDevice, t->ks));
        st = op == FLOE_OP_INSERT
                 ? gpu_tree_insert(t->tree, s->vec.d, m, s->res.d, want_ids ? s->ids.d : NULL, t->ks, err)
                 : gpu_tree_find(t->tree, s->vec.d, m, s->res.d, want_ids ? s->ids.d : NULL, t->ks, err);
        if (st != FLOE_OK)
            return st;
        if (want_ids)
            RUN_CUDA(cudaMemcpyAsync(s->ids.h, s->ids.d, m * 8, cudaMemcpyDeviceToHost, t->ks));
    }
    RUN_CUDA(cudaMemcpyAsync(s->res.h, s->res.d, m, cudaMemcpyDeviceToHost, t->ks));
    const uint64_t t1 = floe_now_ns();
    RUN_CUDA(cudaStreamSynchronize(t->ks));
    const uint64_t t2 = floe_now_ns();
    /* one stream, synchronised once: copies and kernels are timed together, under kernel */
    floe_stage_add(&L->stage[FLOE_STAGE_KERNEL], m, t2 - t1);
    memcpy(results, s->res.h, m);
    if (want_ids)
        memcpy(ids, s->ids.h, m * 8);
    if (op == FLOE_OP_GET)
        memcpy(vectors_out, s->vec.h, m * W * 4);
    floe_stage_add(&L->stage[FLOE_STAGE_STAGE_OUT], m, floe_now_ns() - t2);
    return FLOE_OK;
}

/* INSERT, FIND or GET of batch b's vectors (ids) [off, off + m). */
static floe_status tree_piece(lane *L, floe_batch *b, size_t off, size_t m, floe_errinfo *err)
{
    gpu_table *t = L->t;
    const uint32_t W = t->base.spec.words;
    if (b->op == FLOE_OP_GET)
        return tree_run(L, b->op, b->keys + off, m, b->results + off, NULL, b->vectors_out + off * W, err);
    return tree_run(L, b->op, b->vectors + off * W, m, b->results + off,
                    (b->flags & FLOE_BATCH_WANT_IDS) ? b->ids + off : NULL, NULL, err);
}

/* INSERT, FIND or GET of batch b, piece by piece.  A growing table grows
 * inside a piece (gpu_tree_insert): if it grew after the first piece, the
 * ids of the pieces before are looked up again, in the last generation. */
static floe_status tree_batch(lane *L, floe_batch *b, floe_errinfo *err)
{
    gpu_table *t = L->t;
    const uint32_t W = t->base.spec.words;
    uint64_t generation = 0;
    floe_status st = FLOE_OK;
    for (size_t off = 0; off < b->n && st == FLOE_OK; off += TREE_PIECE_MAX) {
        st = tree_piece(L, b, off, b->n - off < TREE_PIECE_MAX ? b->n - off : TREE_PIECE_MAX, err);
        if (off == 0)
            generation = gpu_tree_generation(t->tree);
    }
    const bool ids = b->op == FLOE_OP_INSERT && (b->flags & FLOE_BATCH_WANT_IDS);
    if (st != FLOE_OK || !ids || gpu_tree_generation(t->tree) == generation)
        return st;
    uint8_t *found = (uint8_t *)malloc(TREE_PIECE_MAX);
    if (!found)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory looking ids up again");
    for (size_t off = 0; off < b->n && st == FLOE_OK; off += TREE_PIECE_MAX) {
        const size_t m = b->n - off < TREE_PIECE_MAX ? b->n - off : TREE_PIECE_MAX;
        st = tree_run(L, FLOE_OP_FIND, b->vectors + off * W, m, found, b->ids + off, NULL, err);
    }
    free(found);
    return st;
}

/* An INSERT of states by their parents: one piece on the device
 * (tree_states_piece); a larger batch's parents' vectors come back from the
 * device (get_by_id), take their changes on the host, and go in whole
 * (tree_batch).  Parents of another generation, or that name no vector,
 * fail the batch before anything changes. */
/* A batch of states by parent that fits in one piece, on the device: the
 * parents and changes go up, the engine folds the changed words' paths
 * from the parents' nodes (gpu_tree_insert_delta), and only answers (and
 * ids) come back.  The engine's growth inside the insert looks the piece's
 * ids up again itself. */
static floe_status tree_states_piece(lane *L, floe_batch *b, floe_errinfo *err)
{
    gpu_table *t = L->t;
    const uint32_t W = t->base.spec.words;
    const size_t n = b->n;
    staging *s = &t->one;
    const bool want_ids = (b->flags & FLOE_BATCH_WANT_IDS) != 0;
    floe_status st = tree_stage_reserve(s, n, W, err);
    if (st == FLOE_OK)
        st = s->vin.reserve(b->changes_len ? b->changes_len : 1, ON_BOTH, err);
    if (st != FLOE_OK)
        return st;
    const uint64_t t0 = floe_now_ns();
    memcpy(s->ids.h, b->parents, n * 8);
    s->first.h[0] = 0;
    for (size_t i = 0; i < n; i++)
        s->first.h[i + 1] = s->first.h[i] + b->change_counts[i];
    memcpy(s->vin.h, b->changes, b->changes_len);
    floe_stage_add(&L->stage[FLOE_STAGE_STAGE_IN], n, floe_now_ns() - t0);
    RUN_CUDA(cudaMemcpyAsync(s->ids.d, s->ids.h, n * 8, cudaMemcpyHostToDevice, t->ks));
    RUN_CUDA(cudaMemcpyAsync(s->first.d, s->first.h, (n + 1) * 4, cudaMemcpyHostToDevice, t->ks));
    RUN_CUDA(cudaMemcpyAsync(s->vin.d, s->vin.h, b->changes_len, cudaMemcpyHostToDevice, t->ks));
    const uint64_t t1 = floe_now_ns();
    /* s->ids.d holds the parents, then the answers' ids */
    st = gpu_tree_insert_delta(t->tree, s->ids.d, s->first.d, s->vin.d, n, s->res.d, want_ids ? s->ids.d : NULL, t->ks,
                               err);
    if (st != FLOE_OK)
        return st;
    RUN_CUDA(cudaMemcpyAsync(s->res.h, s->res.d, n, cudaMemcpyDeviceToHost, t->ks));
    if (want_ids)
        RUN_CUDA(cudaMemcpyAsync(s->ids.h, s->ids.d, n * 8, cudaMemcpyDeviceToHost, t->ks));
    RUN_CUDA(cudaStreamSynchronize(t->ks));
    const uint64_t t2 = floe_now_ns();
    floe_stage_add(&L->stage[FLOE_STAGE_KERNEL], n, t2 - t1);
    memcpy(b->results, s->res.h, n);
    if (want_ids)
        memcpy(b->ids, s->ids.h, n * 8);
    floe_stage_add(&L->stage[FLOE_STAGE_STAGE_OUT], n, floe_now_ns() - t2);
    return FLOE_OK;
}

static floe_status tree_states(lane *L, floe_batch *b, floe_errinfo *err)
{
    gpu_table *t = L->t;
    const uint32_t W = t->base.spec.words;
    floe_status st =
        tree_parents_generation(t->base.spec.name, b->parent_generation, gpu_tree_generation(t->tree), err);
    if (st != FLOE_OK)
        return st;
    if (b->n <= TREE_PIECE_MAX)
        return tree_states_piece(L, b, err);
    /* larger: whole vectors on the host, so that the pieces' ids can be looked up again */
    uint32_t *vectors = (uint32_t *)malloc((b->n ? b->n : 1) * (size_t)W * 4);
    if (!vectors)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory for a batch of %zu states", b->n);
    for (size_t off = 0; off < b->n && st == FLOE_OK; off += TREE_PIECE_MAX) {
        const size_t m = b->n - off < TREE_PIECE_MAX ? b->n - off : TREE_PIECE_MAX;
        st = tree_run(L, FLOE_OP_GET, b->parents + off, m, b->results + off, NULL, vectors + off * W, err);
        for (size_t i = off; st == FLOE_OK && i < off + m; i++)
            if (b->results[i] != FLOE_PRESENT)
                st = tree_parent_missing(t->base.spec.name, i, b->parents[i], err);
    }
    if (st == FLOE_OK) {
        tree_apply_changes(vectors, W, b->change_counts, b->changes, b->n);
        b->vectors = vectors;
        st = tree_batch(L, b, err);
        b->vectors = NULL;
    }
    free(vectors);
    return st;
}

/* Up to limit vectors from the cursor: root slots in steps, stored ones kept. */
static floe_status tree_scan(gpu_table *t, floe_batch *b, floe_errinfo *err)
{
    const uint32_t W = t->base.spec.words;
    const uint64_t total = gpu_tree_root_slots(t->tree);
    uint64_t pos = b->cursor_set ? b->cursor.position : 0;
    b->scan_n = 0;
    assert(b->limit == 0 || b->scan_keys); /* the buffer (floe_batch_check) */
    const uint64_t generation = gpu_tree_generation(t->tree);
    if (b->cursor_set && b->cursor.generation != generation)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "scan cursor is from generation %llu, the table is at %llu: start the scan again",
                                (unsigned long long)b->cursor.generation, (unsigned long long)generation);
    if (pos > total)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "scan cursor position %llu is past the table's %llu root slots",
                                (unsigned long long)pos, (unsigned long long)total);
    staging *s = &t->one;
    floe_status st = tree_stage_reserve(s, TREE_SCAN_STEP, W, err);
    uint64_t budget = GPU_SCAN_WINDOW;
    while (st == FLOE_OK && pos < total && b->scan_n < b->limit && budget > 0) {
        size_t m = total - pos < TREE_SCAN_STEP ? (size_t)(total - pos) : TREE_SCAN_STEP;
        st = gpu_tree_get(t->tree, NULL, pos, m, s->res.d, s->vec.d, t->ks, err);
        if (st != FLOE_OK)
            break;
        RUN_CUDA(cudaMemcpyAsync(s->res.h, s->res.d, m, cudaMemcpyDeviceToHost, t->ks));
        RUN_CUDA(cudaMemcpyAsync(s->vec.h, s->vec.d, m * W * 4, cudaMemcpyDeviceToHost, t->ks));
        RUN_CUDA(cudaStreamSynchronize(t->ks));
        size_t k = 0;
        for (; k < m && b->scan_n < b->limit; k++) {
            if (s->res.h[k] != FLOE_PRESENT)
                continue;
            b->scan_keys[b->scan_n] = pos + k;
            if (b->scan_vectors)
                memcpy(b->scan_vectors + b->scan_n * W, s->vec.h + k * W, W * 4);
            b->scan_n++;
        }
        pos += k;
        budget = budget > k ? budget - k : 0;
    }
    b->next.position = pos;
    b->next.generation = generation;
    b->scan_done = pos >= total;
    return st;
}

/* The image of a TREE table: downloaded into a host tree that the image owns. */
static floe_status tree_copy_gpu(gpu_table *t, floe_file_image **out, floe_errinfo *err)
{
    tree *host;
    floe_status st = tree_create_sized(&t->base.spec, gpu_tree_sizes(t->tree), NULL, &host, err);
    if (st != FLOE_OK)
        return st;
    st = gpu_tree_download(t->tree, host, err);
    if (st == FLOE_OK)
        st = tree_image_of(host, out, err);
    if (st != FLOE_OK)
        tree_destroy(host);
    return st;
}

static floe_status tree_save_gpu(gpu_table *t, const char *path, floe_errinfo *err)
{
    if (!path)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "save needs a path");
    floe_file_image *im = NULL;
    floe_status st = tree_copy_gpu(t, &im, err);
    return st == FLOE_OK ? write_image(im, path, err) : st;
}

/* A TREE's batch, whatever it is, runs alone: its engine waits for the
 * device within every batch anyway. */
void run_tree(lane *L, floe_batch *b)
{
    gpu_table *t = L->t;
    floe_errinfo *e = &b->error;
    assert(b->op != FLOE_OP_ERASE && b->op != FLOE_OP_REBUILD); /* refused at the door */
    pthread_mutex_lock(&t->klock);
    switch (b->op) {
    case FLOE_OP_INSERT:
    case FLOE_OP_FIND:
    case FLOE_OP_GET:
        /* maxmemory-gpu: an insert that could grow the table past it is refused whole, before
         * anything is stored (the engine holds the limit: table_fits in backend_gpu.cu) */
        if (b->op == FLOE_OP_INSERT && gpu_tree_refuses(t->tree, b->n, e)) {
            b->status = FLOE_ERR_NO_MEMORY;
            break;
        }
        b->status = b->parents ? tree_states(L, b, e) : tree_batch(L, b, e);
        b->generation = gpu_tree_generation(t->tree);
        if (b->status == FLOE_OK)
            floe_answer_counts_tally(&b->counts, b->results, b->n);
        break;
    case FLOE_OP_SCAN:
        b->status = tree_scan(t, b, e);
        break;
    case FLOE_OP_STATS:
        b->status = gpu_tree_stats(t->tree, &b->stats, e);
        stage_times(t, b->stats.stage);
        b->stats.device = t->be->device;
        break;
    case FLOE_OP_SAVE:
        b->status = tree_save_gpu(t, b->path, e);
        break;
    case FLOE_OP_COPY:
        b->status = tree_copy_gpu(t, &b->image, e);
        break;
    default:
        b->status = floe_errinfo_set(e, FLOE_ERR_UNSUPPORTED, "operation %d is not available on a TREE", (int)b->op);
    }
    pthread_mutex_unlock(&t->klock);
    complete(t, b);
}
