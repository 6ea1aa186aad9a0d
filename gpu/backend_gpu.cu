/*
 * backend_gpu.cu - the GPU backend (see backend_gpu.h): tables in device
 * memory, batches through a pipeline of pinned staging buffers.
 *
 * Each table has one or more lanes (floe_backend_lanes): pipelines side by
 * side over the one device table, each fed by its own submitters, with its
 * own worker thread and STAGES stages (struct lane).  What follows is one
 * lane's; the lanes meet only at the table's klock, under which each piece's
 * kernels are enqueued on the one kernel stream, and a growth, a scan or a
 * TREE batch runs.  A batch is cut into
 * pieces of at most PIECE_MAX keys (applying consecutive pieces in order is
 * applying the batch in order, so the semantics hold), and batches queued
 * behind one that do the same join its last piece (up to PIECE_SEGS of
 * them: one launch for many requests).  Each piece takes a stage: its keys
 * go to the device on the stage's copy stream (straight from the batches
 * where they are pinned, else through the stage's pinned buffer), the
 * table's kernels run on the table's kernel stream (which waits for the
 * copy with an event, and so runs the pieces one after another in
 * submission order), and the last of them writes every batch's answers
 * where they go, with their counts (gpu_answers_out: the worker never reads
 * a piece's answers).  A piece of several segments comes in by one kernel
 * too (gpu_keys_in), so a piece costs a handful of driver calls, whatever
 * its batches: those calls were the worker's time per piece.  With three
 * stages, copy-in of piece k+1 overlaps the kernels of piece k.  The worker
 * retires stages in order, so a lane's batches complete in submission order.
 * Nothing synchronises the device on this path: the worker waits on events
 * only.
 *
 * First occurrences are resolved on the device: a SET insert's and an
 * erase's after the put (iceberg_gpu.cu's fix-up), a MAP insert's before it
 * (dedup_gpu.cuh: its first occurrence stores what the batch implies), with
 * the answers tables/dedup.c gives on the CPU.
 *
 * Growth: before an insert batch the worker checks an upper bound on the
 * fill (every lane's keys in flight counted) and, past max_fill, drains its
 * lane and rebuilds on the device.  A key that still comes back FULL halts
 * its lane on the device (every later piece of the lane in flight answers
 * GPU_SKIPPED and changes nothing); the worker then drains, rebuilds at
 * twice the size (unless another lane grew the table meanwhile), retries
 * the FULL keys, and runs the skipped pieces again, in their order.  A
 * rebuild waits until no other lane has a batch under way
 * (exclusive_begin), so a batch's ids are of one generation, or looked up
 * again after its own lane's growth.
 *
 * SCAN, STATS, REBUILD and SAVE drain the lane and, under klock, wait for
 * every kernel enqueued, then run on the worker.
 *
 * floe_table_submit has checked every batch (the door, tables/backend.h):
 * the worker completes a refused one in its turn, after draining what came
 * before it, and otherwise only asserts what the door guarantees.
 *
 * The backend by role: pipeline.h says which file does what.
 *
 * TREE tables (tree_gpu.cu) have one lane and run one batch at a time on it, in
 * pieces through one pinned staging area: their engine reads a count back
 * from the device in the middle of every batch anyway.  A TREE that grows
 * grows inside its engine (gpu_tree_insert), which keeps its generation.
 * A CUDA error fails the batch it hit with FLOE_ERR_INTERNAL and the CUDA
 * message; the daemon logs it.  One that ruins the device's context (a
 * sticky error: "devices" below) answers FLOE_ERR_UNAVAILABLE, and so does
 * every later batch, create or load on that device, without touching it.
 */
#include <stdlib.h>

#include "pipeline.h"

/* Every lane's stage timers, together (klock held). */
void stage_times(const gpu_table *t, floe_stage_time out[FLOE_STAGES])
{
    memset(out, 0, FLOE_STAGES * sizeof *out);
    for (unsigned i = 0; i < t->nlanes; i++)
        for (int k = 0; k < FLOE_STAGES; k++)
            floe_stage_sum(&out[k], &t->lanes[i].stage[k]);
}

/* ---- the worker ---------------------------------------------------------------------------------------- */

/* Makes b lane L's current batch once no other lane grows the table (its
 * own pieces retired meanwhile): from here until its last piece is retired
 * the lane is busy.  False, with nothing taken, where the table is frozen
 * by then (another lane's freeze, which ran alone). */
static bool take_batch(lane *L, floe_batch *b)
{
    gpu_table *t = L->t;
    pthread_mutex_lock(&t->glock);
    while (t->holder && t->holder != L) {
        if (L->count == 0) {
            pthread_cond_wait(&t->gcv, &t->glock);
            continue;
        }
        pthread_mutex_unlock(&t->glock);
        retire(L);
        pthread_mutex_lock(&t->glock);
    }
    const bool frozen = t->frozen != NULL;
    if (!frozen) {
        L->cur = b;
        L->cur_off = 0;
    }
    pthread_mutex_unlock(&t->glock);
    return !frozen;
}

/* Takes a batch off the queue: key batches become the current batch to cut
 * into pieces, the others run alone. */
static void begin(lane *L, floe_batch *b)
{
    gpu_table *t = L->t;
    if (b->group) {         /* a chunk of a batch its table's parts split on their devices: it meets them, whatever */
        if (!t->gs.npending) /* else nothing else is under way: the previous batch was one of these */
            drain(L);
        fault_if_due(t->be->device, t->ks);
        memset(&b->counts, 0, sizeof b->counts);
        run_group(L, b);
        return;
    }
    group_finish(L); /* a batch split on the devices answered first, in its turn */
    if (b->status != FLOE_OK || (!t->tree && b->n == 0 && floe_op_keyed(b->op))) {
        /* refused by floe_table_submit, or nothing to do: answered in order, after everything before it */
        drain(L);
        complete(t, b);
        return;
    }
    const int device = t->be->device;
    if (device_failed(device)) { /* nothing of it can run: answered in order, without touching the device */
        drain(L);
        unavailable(device, &b->error);
        b->status = FLOE_ERR_UNAVAILABLE;
        complete(t, b);
        return;
    }
    fault_if_due(device, t->ks); /* tests (floe_gpu_fault_arm): this batch's kernels run after a faulting one */
    memset(&b->counts, 0, sizeof b->counts);
    if (t->tree) {
        run_tree(L, b);
        return;
    }
    if (t->ord) {
        run_ordered(L, b);
        return;
    }
    if (t->base.spec.kind == FLOE_KIND_STATIC && frozen_now(t)) { /* only a STATIC table freezes */
        run_static(L, b);
        return;
    }
    if (!floe_op_keyed(b->op)) { /* a SET's or MAP's keyed operations are cut into pieces */
        run_alone(L, b);
        return;
    }
    if (floe_op_has(b->op, FLOE_OPF_STORES))
        grow_if_due(L, b->n);
    if (!take_batch(L, b)) /* frozen meanwhile */
        run_static(L, b);
}

/* Before an insert of n keys on a grow table: grows it (drained, alone)
 * if its fill, with every lane's keys in flight and these, may pass
 * max_fill, so that the keys find room and no batch pays for FULL keys
 * and their retries (a growth does not stop the batches: only the next
 * arrays are made here). */
void grow_if_due(lane *L, size_t n)
{
    gpu_table *t = L->t;
    if (!t->base.spec.grow || (double)(relaxed(&t->used) + inflight_all(t) + n) <= fill_limit(t))
        return;
    drain(L);
    exclusive_begin(L);
    pthread_mutex_lock(&t->klock);
    if (t->ice && (double)(t->used + n) > fill_limit(t)) { /* (no ice: frozen meanwhile; the batch is refused) */
        floe_errinfo ignored;
        uint32_t three;
        const uint32_t a = grow_target(t, n, &three);
        rebuild(t, a, three, n, &ignored); /* on failure the table stays as it is */
    }
    pthread_mutex_unlock(&t->klock);
    exclusive_end(L);
}

/* Whether b, next in the queue, may join piece p (whose batches are all
 * done with once it ends): a key batch of the table's own keys (not a
 * chunk of a batch split on the devices: run_group) that does what p's do (op, flags),
 * fits in it whole, and, inserting on a grow table, keeps the fill below
 * max_fill with everything in flight (else begin checks it alone). */
static bool joins(const gpu_table *t, const piece &p, const floe_batch *b)
{
    /* t->used and other lanes' keys in flight move meanwhile: the check is a bound, as in begin */
    const floe_batch *first = p.seg[0].b;
    if (!b || b->group || p.nseg == PIECE_SEGS || b->status != FLOE_OK || b->n == 0 || b->n > PIECE_MAX - p.n ||
        b->op != first->op || b->flags != first->flags || (floe_op_has(b->op, FLOE_OPF_VALUES_IN) && t->vb) ||
        !floe_op_keyed(b->op))
        return false;
    return !floe_op_has(b->op, FLOE_OPF_STORES) || !t->base.spec.grow ||
           (double)(relaxed(&t->used) + inflight_all(t) + p.n + b->n) <= fill_limit(t);
}

/* Moves batches queued in lane L that join p into it, in queue order. */
static void join_queued(lane *L, piece &p)
{
    gpu_table *t = L->t;
    pthread_mutex_lock(&t->lock);
    while (!queue_empty(&L->q) && joins(t, p, FLOE_BATCH_OF(L->q.head))) {
        floe_batch *b = FLOE_BATCH_OF(queue_pop(&L->q));
        memset(&b->counts, 0, sizeof b->counts);
        p.seg[p.nseg++] = {b, 0, b->n, true};
        p.n += b->n;
    }
    pthread_mutex_unlock(&t->lock);
}

/* Launches the next piece: redone pieces first, then the current batch and
 * the batches that join it. */
void launch_next(lane *L)
{
    gpu_table *t = L->t;
    piece p;
    pthread_mutex_lock(&t->glock); /* the stage is taken as the piece leaves redo or cur (busy) */
    L->count++;
    const bool redo = L->redo_at < L->nredo;
    if (redo) {
        p = L->redo[L->redo_at++];
        if (L->redo_at == L->nredo)
            L->redo_at = L->nredo = 0;
    } else {
        floe_batch *b = L->cur;
        segment &g = p.seg[0];
        g.b = b;
        g.off = L->cur_off;
        g.n = b->n - L->cur_off < PIECE_MAX ? b->n - L->cur_off : PIECE_MAX;
        L->cur_off += g.n;
        g.last = L->cur_off == b->n;
        p.nseg = 1;
        p.n = g.n;
        if (g.last)
            L->cur = NULL;
    }
    pthread_mutex_unlock(&t->glock);
    if (!redo && p.seg[0].last)
        join_queued(L, p);
    launch(L, p);
}

static void *lane_main(void *arg)
{
    lane *L = (lane *)arg;
    gpu_table *t = L->t;
    pthread_setname_np(pthread_self(), "floe-gpu-table");
    cudaSetDevice(t->be->device); /* checked by the backend's creation on this device */
    pthread_mutex_lock(&t->lock);
    for (;;) {
        bool pieces = L->redo_at < L->nredo || L->cur;
        if (!pieces && L->count == 0 && queue_empty(&L->q)) {
            if (t->gs.npending) { /* nothing else to do: answer it now */
                pthread_mutex_unlock(&t->lock);
                group_finish(L);
                pthread_mutex_lock(&t->lock);
                continue;
            }
            if (t->stopping)
                break;
            pthread_cond_wait(&L->cv, &t->lock);
            continue;
        }
        floe_batch *next = NULL;
        if (!pieces && !queue_empty(&L->q) && L->count < STAGES)
            next = FLOE_BATCH_OF(queue_pop(&L->q));
        pthread_mutex_unlock(&t->lock);
        if (L->count > 0 && L->stg[L->head].st == FLOE_OK && cudaEventQuery(L->stg[L->head].done_ev) == cudaSuccess)
            retire(L); /* finished already: answer it now */
        if (next)
            begin(L, next);
        else if (pieces && L->count < STAGES)
            launch_next(L);
        else if (L->count > 0)
            retire(L); /* every stage busy, or nothing else to do: wait for the oldest */
        pthread_mutex_lock(&t->lock);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

/* ---- backend interface ------------------------------------------------------------------------------------ */

static void table_free(gpu_table *t)
{
    for (unsigned k = 0; k < t->nlanes * STAGES; k++) {
        stage *s = &t->lanes[k / STAGES].stg[k % STAGES];
        stage_free_buffers(s);
        if (s->copy)
            cudaStreamDestroy(s->copy);
        cudaEvent_t *evs[5] = {&s->h0_ev, &s->in_ev, &s->k0_ev, &s->k_ev, &s->done_ev};
        for (int j = 0; j < 5; j++)
            if (*evs[j])
                cudaEventDestroy(*evs[j]);
        cudaFree(s->d_tally);
        cudaFreeHost(s->h_counts);
    }
    if (t->ks)
        cudaStreamDestroy(t->ks);
    staging_free(&t->one);
    group_stage_free(&t->gs);
    gpu_iceberg_destroy(t->ice);
    gpu_tree_destroy(t->tree);
    gpu_ordered_destroy(t->ord);
    gpu_cuckoo_destroy(t->frozen);
    free(t);
}

/* Stops the first n lanes' threads once their work is done, and the table's locks. */
static void stop_lanes(gpu_table *t, unsigned n)
{
    pthread_mutex_lock(&t->lock);
    t->stopping = true;
    for (unsigned i = 0; i < n; i++)
        pthread_cond_signal(&t->lanes[i].cv);
    pthread_mutex_unlock(&t->lock);
    for (unsigned i = 0; i < n; i++) {
        pthread_join(t->lanes[i].thread, NULL);
        pthread_cond_destroy(&t->lanes[i].cv);
    }
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->gcv);
    pthread_mutex_destroy(&t->glock);
    pthread_mutex_destroy(&t->klock);
}

/* The engine a table starts with: one of them. */
struct engines {
    gpu_iceberg *ice;
    gpu_tree *tree;
    gpu_ordered *ord;
    gpu_cuckoo *frozen;
};

/* maxmemory-gpu, as a TREE's or ORDERED table's engine asks it before it grows */
static bool table_fits(void *ctx, uint64_t bytes)
{
    return device_budget_fits(((const gpu_table *)ctx)->be->device, bytes);
}

/* Takes ownership of en's engine. */
static floe_status start_table(gpu_backend *be, engines en, uint64_t generation, floe_table **out, floe_errinfo *err)
{
    gpu_table *t = (gpu_table *)calloc(1, sizeof *t);
    if (!t) {
        gpu_iceberg_destroy(en.ice);
        gpu_tree_destroy(en.tree);
        gpu_ordered_destroy(en.ord);
        gpu_cuckoo_destroy(en.frozen);
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    }
    t->base.backend = &be->base;
    t->base.spec = en.ice    ? *gpu_iceberg_spec(en.ice)
                   : en.tree ? *gpu_tree_spec(en.tree)
                   : en.ord  ? *gpu_ordered_spec(en.ord)
                             : *gpu_cuckoo_spec(en.frozen);
    t->be = be;
    t->ice = en.ice;
    t->tree = en.tree;
    t->ord = en.ord;
    if (t->tree)
        gpu_tree_set_limit(t->tree, table_fits, t);
    if (t->ord)
        gpu_ordered_set_limit(t->ord, table_fits, t);
    t->frozen = en.frozen;
    t->vb = floe_spec_has_values(&t->base.spec) ? t->base.spec.value_bytes : 0;
    t->generation = en.frozen ? gpu_cuckoo_generation(en.frozen) : generation;
    /* a TREE's, ORDERED or frozen table's batches run one at a time under klock: more lanes would only queue */
    t->nlanes = en.tree || en.ord || en.frozen ? 1 : floe_backend_lanes(&be->base);
    for (unsigned i = 0; i < t->nlanes; i++) {
        t->lanes[i].t = t;
        t->lanes[i].index = i;
    }
    cudaError_t e = cudaStreamCreateWithFlags(&t->ks, cudaStreamNonBlocking);
    for (unsigned k = 0; k < t->nlanes * STAGES && e == cudaSuccess; k++) {
        stage *s = &t->lanes[k / STAGES].stg[k % STAGES];
        e = cudaStreamCreateWithFlags(&s->copy, cudaStreamNonBlocking);
        cudaEvent_t *evs[5] = {&s->h0_ev, &s->in_ev, &s->k0_ev, &s->k_ev, &s->done_ev};
        for (int j = 0; j < 5 && e == cudaSuccess; j++) /* with timing: they feed the stage timers */
            e = cudaEventCreate(evs[j]);
        if (e == cudaSuccess)
            e = cudaMalloc(&s->d_tally, sizeof *s->d_tally);
        if (e == cudaSuccess)
            e = cudaMemset(s->d_tally, 0, sizeof *s->d_tally);
        if (e == cudaSuccess)
            e = cudaHostAlloc(&s->h_counts, GPU_SEGMENTS_MAX * sizeof *s->h_counts, cudaHostAllocDefault);
    }
    floe_status st = FLOE_OK;
    if (e != cudaSuccess)
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "creating CUDA streams: %s", cuda_msg(e));
    if (st == FLOE_OK && en.ice)
        st = recount(t, err);
    if (st != FLOE_OK) {
        table_free(t);
        return st;
    }
    pthread_mutex_init(&t->klock, NULL);
    pthread_mutex_init(&t->glock, NULL);
    pthread_cond_init(&t->gcv, NULL);
    pthread_mutex_init(&t->lock, NULL);
    unsigned started = 0;
    for (; started < t->nlanes; started++) {
        lane *L = &t->lanes[started];
        pthread_cond_init(&L->cv, NULL);
        if (pthread_create(&L->thread, NULL, lane_main, L) != 0) {
            pthread_cond_destroy(&L->cv);
            break;
        }
    }
    if (started < t->nlanes) {
        stop_lanes(t, started);
        table_free(t);
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "cannot start the table's threads");
    }
    *out = &t->base;
    return FLOE_OK;
}

static floe_status create_table(gpu_backend *be, const floe_spec *spec, floe_table **out, floe_errinfo *err)
{
    floe_spec s = *spec;
    while (s.seed == 0)
        if (getrandom(&s.seed, sizeof s.seed, 0) != sizeof s.seed)
            s.seed = 0x6A09E667F3BCC909ull; /* no entropy: a fixed seed still works */
    if (s.kind == FLOE_KIND_ORDERED) {
        gpu_ordered *ord;
        floe_status st = gpu_ordered_create(&s, gpu_ordered_chunks_for(s.capacity), &ord, err);
        if (st != FLOE_OK)
            return st;
        return start_table(be, engines{NULL, NULL, ord, NULL}, 0, out, err);
    }
    if (s.kind == FLOE_KIND_TREE) {
        gpu_tree *tree;
        floe_status st = gpu_tree_create(&s, NULL, &tree, err);
        if (st != FLOE_OK)
            return st;
        return start_table(be, engines{NULL, tree, NULL, NULL}, 0, out, err);
    }
    gpu_iceberg *ice;
    uint32_t three;
    const uint32_t a = iceberg_size_for(s.key_bits, s.capacity, &three);
    floe_status st = gpu_iceberg_create(&s, a, three, &ice, err);
    if (st != FLOE_OK)
        return st;
    return start_table(be, engines{ice, NULL, NULL, NULL}, 0, out, err);
}

/* Creates and loads run on the caller's thread, with the backend's device
 * current meanwhile (device_scope); a failure that ruined the device reads
 * as FLOE_ERR_UNAVAILABLE, not as the out-of-memory a cudaMalloc says. */
/* Whether be's device, made current by `on`, can take a create or a load. */
static floe_status usable(const gpu_backend *be, const device_scope &on, floe_errinfo *err)
{
    if (device_failed(be->device))
        return unavailable(be->device, err);
    if (on.e != cudaSuccess)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "CUDA device %d: %s", be->device, cuda_msg(on.e));
    return FLOE_OK;
}

static floe_status gpu_create_table(floe_backend *base, const floe_spec *spec, floe_table **out, floe_errinfo *err)
{
    gpu_backend *be = (gpu_backend *)base;
    device_scope on(be->device);
    floe_status st = usable(be, on, err);
    if (st != FLOE_OK)
        return st;
    st = create_table(be, spec, out, err);
    return st == FLOE_OK ? st : device_status(be->device, spec->name, st, err);
}

/* Loads through the CPU engine's file code (checksums, damage checks), then
 * copies the arrays to the device. */
static floe_status load_table(gpu_backend *be, const char *path, const floe_file_part *part, floe_table **out,
                              floe_errinfo *err)
{
    floe_file_header h;
    const uint64_t offset = part ? part->offset : 0;
    floe_status st = floe_file_header_of(path, part, &h, err);
    if (st != FLOE_OK)
        return st;
    if (h.spec.kind == FLOE_KIND_STATIC && h.frozen) { /* checked row by row on the host, then copied */
        cuckoo *host;
        gpu_cuckoo *c = NULL;
        st = cuckoo_load(path, offset, &host, err);
        if (st != FLOE_OK)
            return st;
        st = gpu_cuckoo_upload(host, &c, err);
        cuckoo_destroy(host);
        if (st != FLOE_OK)
            return st;
        return start_table(be, engines{NULL, NULL, NULL, c}, 0, out, err);
    }
    if (h.spec.kind == FLOE_KIND_ORDERED) { /* through the CPU engine's file code (checks), then built on the device */
        ordered *host;
        uint64_t *keys = NULL, n = 0;
        void *values = NULL;
        gpu_ordered *ord = NULL;
        st = ordered_load(path, offset, be->pool, &host, err);
        if (st != FLOE_OK)
            return st;
        st = ordered_export(host, &keys, &values, &n, err);
        ordered_destroy(host);
        if (st == FLOE_OK)
            st = gpu_ordered_create(&h.spec, gpu_ordered_chunks_for(n > h.spec.capacity ? n : h.spec.capacity), &ord,
                                    err);
        if (st == FLOE_OK)
            st = gpu_ordered_upload(ord, keys, values, n, err);
        free(keys);
        free(values);
        if (st != FLOE_OK) {
            gpu_ordered_destroy(ord);
            return st;
        }
        return start_table(be, engines{NULL, NULL, ord, NULL}, 0, out, err);
    }
    if (h.spec.kind == FLOE_KIND_TREE) {
        tree *th;
        st = tree_load(path, offset, be->pool, &th, err);
        if (st != FLOE_OK)
            return st;
        gpu_tree *gt = NULL;
        st = gpu_tree_create(tree_spec(th), tree_sizes(th), &gt, err);
        if (st == FLOE_OK)
            st = gpu_tree_upload(gt, th, err);
        tree_destroy(th);
        if (st != FLOE_OK) {
            gpu_tree_destroy(gt);
            return st;
        }
        return start_table(be, engines{NULL, gt, NULL, NULL}, 0, out, err);
    }
    iceberg *host;
    st = iceberg_load(path, offset, be->pool, &host, err);
    if (st != FLOE_OK)
        return st;
    iceberg_image im;
    iceberg_get_image(host, &im);
    gpu_iceberg *ice = NULL;
    st = gpu_iceberg_create(iceberg_spec(host), im.addr_bits, im.three, &ice, err);
    if (st == FLOE_OK)
        st = gpu_iceberg_upload(ice, im.sections, im.first_fill, err);
    iceberg_destroy(host);
    if (st != FLOE_OK) {
        gpu_iceberg_destroy(ice);
        return st;
    }
    return start_table(be, engines{ice, NULL, NULL, NULL}, im.generation, out, err);
}

static floe_status gpu_load_table(floe_backend *base, const char *path, const floe_file_part *part, floe_table **out,
                                  floe_errinfo *err)
{
    gpu_backend *be = (gpu_backend *)base;
    device_scope on(be->device);
    floe_status st = usable(be, on, err);
    if (st != FLOE_OK)
        return st;
    st = load_table(be, path, part, out, err);
    return st == FLOE_OK ? st : device_status(be->device, path, st, err);
}

static void gpu_submit(floe_table *base, floe_batch *b)
{
    gpu_table *t = (gpu_table *)base;
    lane *L = &t->lanes[b->lane % t->nlanes];
    pthread_mutex_lock(&t->lock);
    queue_push(&L->q, &b->link);
    pthread_cond_signal(&L->cv);
    pthread_mutex_unlock(&t->lock);
}

static void gpu_destroy_table(floe_table *base)
{
    gpu_table *t = (gpu_table *)base;
    stop_lanes(t, t->nlanes);
    device_scope on(t->be->device);
    table_free(t);
}

static void gpu_destroy(floe_backend *base)
{
    gpu_backend *be = (gpu_backend *)base;
    floe_pool_destroy(be->pool);
    stage_pool_drain(); /* its tables' pinned staging (the other backends' too: it is only kept for speed) */
    free(be);
}

/* Pinned and portable: the copies of every device's tables go straight from and to it. */
static void *gpu_host_alloc(floe_backend *base, size_t bytes)
{
    void *p = NULL;
    device_scope on(((gpu_backend *)base)->device);
    if (on.e != cudaSuccess || cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    if (!pinned_add(p, bytes)) {
        cudaFreeHost(p);
        return NULL;
    }
    return p;
}

static void gpu_host_free(floe_backend *base, void *p)
{
    device_scope on(((gpu_backend *)base)->device); /* a thread with no context would get device 0's */
    pinned_remove(p);
    cudaFreeHost(p);
}

static floe_status gpu_memory(floe_backend *base, uint64_t *free_bytes, uint64_t *total_bytes)
{
    return floe_gpu_meminfo(((gpu_backend *)base)->device, free_bytes, total_bytes) == 0 ? FLOE_OK
                                                                                         : FLOE_ERR_UNAVAILABLE;
}

static const floe_backend_ops gpu_ops = {
    "gpu",       gpu_create_table, gpu_load_table, gpu_submit, gpu_destroy_table,
    gpu_destroy, gpu_host_alloc,   gpu_host_free,  NULL, /* set_lanes: the tables read the backend's own lanes */
    gpu_memory,  group_fits,       gpu_side_store,
};

extern "C" int floe_gpu_built(void)
{
    return 1;
}

extern "C" void floe_gpu_load_kernels_at_start(void)
{
    setenv("CUDA_MODULE_LOADING", "EAGER", 0); /* read when CUDA starts: a setting already there wins */
}

extern "C" int floe_gpu_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

extern "C" int floe_gpu_device(int device, char *name, size_t len)
{
    return gpu_available(device, name, len);
}

extern "C" int floe_gpu_meminfo(int device, uint64_t *free_bytes, uint64_t *total_bytes)
{
    size_t f = 0, t = 0;
    *free_bytes = *total_bytes = 0;
    if (device_failed(device))
        return -1;
    device_scope on(device);
    if (on.e != cudaSuccess || cudaMemGetInfo(&f, &t) != cudaSuccess) {
        cudaGetLastError(); /* not sticky: leave no error for this thread's next CUDA call */
        return -1;
    }
    *free_bytes = f;
    *total_bytes = t;
    return 0;
}

extern "C" floe_status floe_backend_gpu_create(int device, unsigned host_threads, floe_backend **out, floe_errinfo *err)
{
    *out = NULL;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0)
        return floe_errinfo_set(err, FLOE_ERR_UNSUPPORTED, "no CUDA device: %s",
                                e != cudaSuccess ? cuda_msg(e) : "the driver reports none");
    if (device < 0 || device >= n)
        return floe_errinfo_set(err, FLOE_ERR_UNSUPPORTED, "no CUDA device %d: this host has %d (0..%d)", device, n,
                                n - 1);
    {
        device_scope on(device); /* the context is made here, on the caller's thread, which keeps its own */
        if (on.e != cudaSuccess)
            return floe_errinfo_set(err, FLOE_ERR_UNSUPPORTED, "CUDA device %d: %s", device, cuda_msg(on.e));
    }
    gpu_backend *be = (gpu_backend *)calloc(1, sizeof *be);
    if (!be)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    floe_status st = floe_pool_create(host_threads, &be->pool, err);
    if (st != FLOE_OK) {
        free(be);
        return st;
    }
    be->base.ops = &gpu_ops;
    be->base.pool = be->pool;
    be->device = device;
    *out = &be->base;
    return FLOE_OK;
}
