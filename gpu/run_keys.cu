/*
 * run_keys.cu - the GPU backend's runner of SET and MAP tables: a lane's
 * batches cut into pieces through its stages (pinned staging, the copy and
 * kernel streams, answers out), growth among lanes, and the operations
 * that run alone (scan, stats, rebuild, save).  backend_gpu.cu says how
 * the pipeline goes.
 */
#include "pipeline.h"

/* ---- stages ------------------------------------------------------------------------------------- */

const char *cuda_msg(cudaError_t e)
{
    return cudaGetErrorString(e);
}

void stage_free_buffers(stage *s)
{
    staging_free(&s->buf);
    s->cap = 0;
}

/* Buffers for n keys (grown to a power of two, at most PIECE_MAX). */
static floe_status stage_reserve(stage *s, size_t n, uint32_t vb, floe_errinfo *err)
{
    if (n <= s->cap)
        return FLOE_OK;
    size_t cap = 4096;
    while (cap < n)
        cap <<= 1;
    stage_free_buffers(s);
    staging *g = &s->buf;
    floe_status st = g->keys.reserve(cap, ON_BOTH, err);
    if (st == FLOE_OK)
        st = g->ids.reserve(cap, ON_BOTH, err);
    if (st == FLOE_OK)
        st = g->res.reserve(cap, ON_BOTH, err);
    if (st == FLOE_OK && vb)
        st = g->vin.reserve(cap * vb, ON_BOTH, err);
    if (st == FLOE_OK && vb)
        st = g->vout.reserve(cap * vb, ON_BOTH, err);
    if (st != FLOE_OK) {
        stage_free_buffers(s);
        return st;
    }
    s->cap = cap;
    return FLOE_OK;
}

/* ---- table state ------------------------------------------------------------------------------------ */

static uint64_t table_slots(const gpu_table *t)
{
    return gpu_iceberg_slots(t->ice);
}

/* A grow table rebuilds before its keys would pass this many. */
double fill_limit(const gpu_table *t)
{
    return t->base.spec.max_fill * (double)table_slots(t);
}

/* Exact counters from the device (after a load or rebuild; klock held). */
floe_status recount(gpu_table *t, floe_errinfo *err)
{
    uint64_t used[3], tomb;
    floe_status st = gpu_iceberg_count(t->ice, used, &tomb, NULL, err);
    if (st == FLOE_OK) {
        relaxed_set(&t->used, used[0] + used[1] + used[2]);
        relaxed_set(&t->tombstones, tomb);
    }
    return st;
}

/* Waits for every kernel enqueued on the table (klock held: no lane enqueues more meanwhile). */
static floe_status quiesce(gpu_table *t, floe_errinfo *err)
{
    cudaError_t e = cudaStreamSynchronize(t->ks);
    if (e != cudaSuccess)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "waiting for the table's kernels: %s", cudaGetErrorString(e));
    return FLOE_OK;
}

/* Rebuild at 2^addr_bits primary buckets (1.5 times that with three; 0:
 * the current size), or grow to them where they are more slots
 * (gpu_iceberg_grow: the table does not stop; batch, the keys of the batch
 * it makes room for, 0 if none); klock held. */
floe_status rebuild(gpu_table *t, uint32_t addr_bits, uint32_t three, size_t batch, floe_errinfo *err)
{
    if (addr_bits == 0) {
        addr_bits = gpu_iceberg_addr_bits(t->ice);
        three = gpu_iceberg_three(t->ice);
    }
    floe_status st = iceberg_size_check(t->base.spec.key_bits, addr_bits, three, err);
    floe_geometry to;
    floe_geometry_init(&to, t->base.spec.key_bits, addr_bits, three, 0);
    const bool grow = to.total_slots > table_slots(t);
    const uint64_t need = iceberg_bytes_at(&t->base.spec, addr_bits, three);
    if (st == FLOE_OK && !device_budget_fits(t->be->device, need)) /* the new arrays, beside the old until built */
        st = floe_errinfo_set(err, FLOE_ERR_NO_MEMORY,
                              "table %s: growing it takes %.1f MiB more on GPU %d, past maxmemory-gpu",
                              t->base.spec.name, (double)need / 1048576.0, t->be->device);
    if (st == FLOE_OK)
        st = quiesce(t, err);  /* other lanes' pieces */
    if (st == FLOE_OK && grow) /* larger: the keys move while the batches go on */
        st = gpu_iceberg_grow(t->ice, addr_bits, three, batch, err);
    else if (st == FLOE_OK)
        st = gpu_iceberg_rebuild(t->ice, &addr_bits, &three, err);
    if (st != FLOE_OK)
        return st;
    t->generation++;
    if (!grow)
        return recount(t, err);
    /* the same keys, drained: no count on the device (two tables' arrays to read); tombstones stay behind */
    relaxed_set(&t->used, t->used - t->tombstones);
    relaxed_set(&t->tombstones, 0);
    return FLOE_OK;
}

/* The size to grow to before n more keys (*three with it): the next step up
 * (iceberg_step_up) or more, so that the keys and the n fit below max_fill,
 * unless tombstones hold most of the occupied space (then the same size
 * reclaims it). */
uint32_t grow_target(const gpu_table *t, uint64_t n, uint32_t *three)
{
    const uint64_t keys = t->used - t->tombstones;
    uint32_t to = gpu_iceberg_addr_bits(t->ice);
    *three = gpu_iceberg_three(t->ice);
    const double fill = t->base.spec.max_fill;
    if ((double)keys < fill * 0.5 * (double)table_slots(t))
        return to;
    for (floe_geometry g;;) { /* a batch larger than the table: one growth to its size, not several */
        iceberg_step_up(&to, three);
        floe_geometry_init(&g, t->base.spec.key_bits, to, *three, 0);
        if (to >= floe_max_addr_bits(t->base.spec.key_bits) || fill * (double)g.total_slots >= (double)(keys + n))
            return to;
    }
}

/* ---- the pipeline ------------------------------------------------------------------------------------ */

/* Hands b to its caller (on a lane's thread).  A failure that ruined the
 * device's context answers FLOE_ERR_UNAVAILABLE, whatever the call that met
 * it said.  done() may make another device current (see "devices" above):
 * the lane's own is made current again. */
void complete(gpu_table *t, floe_batch *b)
{
    const int device = t->be->device;
    if (b->status == FLOE_OK)
        floe_errinfo_clear(&b->error);
    else
        b->status = device_status(device, t->base.spec.name, b->status, &b->error);
    if (b->done)
        b->done(b);
    cudaSetDevice(device);
}

static void fail_batch(floe_batch *b, floe_status st, const floe_errinfo *err)
{
    if (b->status == FLOE_OK) {
        b->status = st;
        b->error = *err;
    }
}

/* The moves of a growth under way that stage s's batch owes, after its
 * kernels, so that they run while the host stages the next batch (klock
 * held). */
static void move_after(gpu_table *t, stage *s)
{
    if (s->st == FLOE_OK)
        s->st = gpu_iceberg_move_owed(t->ice, (gpu_stream)t->ks, &s->err);
}

/* A small SET insert or find (E2's requests): one kernel reads the keys
 * and writes the answers (and ids) in pinned host memory, then one event:
 * no copy on the device and one launch instead of a dozen.  A batch alone
 * in its piece is read and answered where it lies if that is pinned (a
 * merged batch is); otherwise the keys go through the stage's pinned
 * buffers, a copy each way on the host. */
static void launch_small(lane *L, stage *s)
{
    gpu_table *t = L->t;
    const piece &p = s->p;
    floe_batch *b = p.seg[0].b;
    const bool want_ids = floe_batch_wants_ids(b);
    size_t m = 0;
    for (unsigned i = 0; i < p.nseg; i++) {
        const segment &g = p.seg[i];
        const uint64_t *keys = g.b->keys + g.off;
        uint8_t *res = g.b->results + g.off;
        uint64_t *ids = want_ids ? g.b->ids + g.off : NULL;
        const bool alone = p.nseg == 1; /* else the kernel's arrays are the stage's, one after another */
        seg_io &io = s->io[i];
        io = {s->buf.keys.h + m, NULL, s->buf.res.h + m, want_ids ? s->buf.ids.h + m : NULL, NULL, m, g.n};
        if (alone && pinned(keys, g.n * 8))
            io.in_keys = keys;
        else
            memcpy(s->buf.keys.h + m, keys, g.n * 8);
        if (alone && pinned(res, g.n))
            io.out_res = res;
        if (alone && ids && pinned(ids, g.n * 8))
            io.out_ids = ids;
        m += g.n;
    }
    s->m = m;
    if (b->op == FLOE_OP_INSERT)
        relaxed_set(&L->inflight_keys, L->inflight_keys + m);
    const bool timing = L->launched++ % TIME_EVERY == 0;
    pthread_mutex_lock(&t->klock);
    s->gen = t->generation;
    gpu_iceberg_lane(t->ice, L->index);
    cudaError_t e = timing ? cudaEventRecord(s->k0_ev, t->ks) : cudaSuccess;
    if (e != cudaSuccess)
        s->st = floe_errinfo_set(&s->err, FLOE_ERR_INTERNAL, "staging a batch: %s", cuda_msg(e));
    else
        s->st = gpu_iceberg_small(t->ice, b->op == FLOE_OP_INSERT, s->io[0].in_keys, m, s->io[0].out_res,
                                  s->io[0].out_ids, (gpu_stream)t->ks, &s->err);
    if (s->st == FLOE_OK) {
        e = timing ? cudaEventRecord(s->k_ev, t->ks) : cudaSuccess;
        if (e == cudaSuccess)
            e = cudaEventRecord(s->done_ev, t->ks);
        if (e != cudaSuccess)
            s->st = floe_errinfo_set(&s->err, FLOE_ERR_INTERNAL, "running a batch: %s", cuda_msg(e));
        else
            s->timed = timing;
    }
    move_after(t, s);
    pthread_mutex_unlock(&t->klock);
}

/* Where each segment's keys come from and its answers go: the device reads and writes them there. */
static void segments_of(const stage *s, gpu_segments *segs)
{
    segs->n = s->p.nseg;
    for (unsigned i = 0; i < s->p.nseg; i++) {
        const seg_io &io = s->io[i];
        segs->end[i] = (uint32_t)(io.at + io.m);
        segs->keys[i] = io.in_keys;
        segs->res[i] = io.out_res;
        segs->ids[i] = io.out_ids;
        segs->vout[i] = io.out_vout;
    }
}

/* The kernels of stage s's piece (its keys on their way in on the stage's
 * copy stream), on the table's kernel stream; klock held. */
static void enqueue_kernels(lane *L, stage *s, bool timing)
{
    gpu_table *t = L->t;
    const piece &p = s->p;
    floe_batch *b = p.seg[0].b;
    const bool want_ids = floe_batch_wants_ids(b);
    const bool want_values =
        t->vb && (b->flags & FLOE_BATCH_WANT_VALUES) != 0 && floe_op_has(b->op, FLOE_OPF_VALUES_OUT);
    const int mode = floe_value_mode_of(b->op, b->flags);
    const uint32_t vb = t->vb;
    const size_t m = s->m;
    gpu_stream ks = (gpu_stream)t->ks;
    s->gen = t->generation;
    gpu_iceberg_lane(t->ice, L->index);
    cudaError_t e = cudaStreamWaitEvent(t->ks, s->in_ev, 0);
    if (e == cudaSuccess && timing) /* the kernels start when the copy is in and the previous piece's are done */
        e = cudaEventRecord(s->k0_ev, t->ks);
    if (e != cudaSuccess) {
        s->st = floe_errinfo_set(&s->err, FLOE_ERR_INTERNAL, "staging a batch: %s", cuda_msg(e));
        return;
    }
    floe_status st;
    gpu_segments segs;
    segments_of(s, &segs);
    uint64_t *d_ids = want_ids ? s->buf.ids.d : NULL;
    void *d_vout = want_values ? s->buf.vout.d : NULL;
    switch (floe_op_has(b->op, FLOE_OPF_STORES) ? FLOE_OP_INSERT : b->op) {
    case FLOE_OP_INSERT: /* and add: a MAP's keys with their values or deltas (a SET's have none) */
        st = vb ? gpu_iceberg_put_map(t->ice, s->buf.keys.d, s->buf.vin.d, m, mode, s->buf.res.d, d_ids, d_vout, ks,
                                      &s->err)
                : gpu_iceberg_put(t->ice, s->buf.keys.d, m, s->buf.res.d, d_ids, 0, ks, &s->err);
        break;
    case FLOE_OP_FIND:
        st = gpu_iceberg_find(t->ice, s->buf.keys.d, m, s->buf.res.d, d_ids, d_vout, ks, &s->err);
        break;
    default:
        st = gpu_iceberg_erase(t->ice, s->buf.keys.d, m, s->buf.res.d, ks, &s->err);
        break;
    }
    if (st == FLOE_OK) /* answers and counts written where they go, by one kernel */
        st = gpu_answers_out(s->buf.res.d, d_ids, d_vout, vb, &segs, s->d_tally, s->h_counts, ks, &s->err);
    if (st != FLOE_OK) {
        s->st = st;
        return;
    }
    e = cudaEventRecord(s->done_ev, t->ks);
    if (e != cudaSuccess)
        s->st = floe_errinfo_set(&s->err, FLOE_ERR_INTERNAL, "running a batch: %s", cuda_msg(e));
    else
        s->timed = timing;
    move_after(t, s);
}

/* Stages a piece and enqueues its copies and kernels.  Its segments share
 * the op and flags (join_queued). */
static void enqueue_piece(lane *L, stage *s, const piece &p)
{
    gpu_table *t = L->t;
    floe_batch *b = p.seg[0].b;
    const bool want_ids = floe_batch_wants_ids(b);
    /* want_values means nothing to an erase (the door lets it through without values_out) */
    const bool want_values =
        t->vb && (b->flags & FLOE_BATCH_WANT_VALUES) != 0 && floe_op_has(b->op, FLOE_OPF_VALUES_OUT);
    const uint32_t vb = t->vb;
    s->p = p;
    s->st = FLOE_OK;
    s->timed = false;

    floe_status st = stage_reserve(s, p.n, vb, &s->err);
    s->small = st == FLOE_OK && !vb && (b->op == FLOE_OP_INSERT || b->op == FLOE_OP_FIND) && p.n <= GPU_SMALL_KEYS;
    if (s->small) {
        launch_small(L, s);
        return;
    }
    /* a MAP insert's values go in beside its keys (it is a piece of one segment: joins) */
    const bool values_in = floe_op_has(b->op, FLOE_OPF_VALUES_IN) && vb;
    size_t m = 0; /* keys sent to the device */
    for (unsigned i = 0; st == FLOE_OK && i < p.nseg; i++) {
        const segment &g = p.seg[i];
        const uint64_t *keys = g.b->keys + g.off;
        seg_io &io = s->io[i];
        io.at = m;
        io.m = g.n;
        io.in_keys = pinned(keys, g.n * 8) ? keys : s->buf.keys.h + m;
        if (io.in_keys != keys)
            floe_pool_copy(t->be->pool, s->buf.keys.h + m, keys, g.n * 8);
        const unsigned char *vin = values_in ? (const unsigned char *)g.b->values + g.off * vb : NULL;
        io.in_vals = !values_in ? NULL : pinned(vin, g.n * vb) ? (const void *)vin : s->buf.vin.h + m * vb;
        if (values_in && io.in_vals != vin)
            floe_pool_copy(t->be->pool, s->buf.vin.h + m * vb, vin, g.n * vb);
        io.out_res = pinned(g.b->results + g.off, g.n) ? g.b->results + g.off : s->buf.res.h + m;
        io.out_ids = !want_ids ? NULL : pinned(g.b->ids + g.off, g.n * 8) ? g.b->ids + g.off : s->buf.ids.h + m;
        unsigned char *vout = want_values ? (unsigned char *)g.b->values_out + g.off * vb : NULL;
        io.out_vout = !want_values             ? NULL
                      : pinned(vout, g.n * vb) ? (void *)vout
                                               : (unsigned char *)s->buf.vout.h + m * vb;
        m += g.n;
    }
    s->m = m;
    if (floe_op_has(b->op, FLOE_OPF_STORES))
        relaxed_set(&L->inflight_keys, L->inflight_keys + m);
    if (st != FLOE_OK) {
        s->st = st;
        return;
    }

    gpu_segments segs;
    segments_of(s, &segs);
    const bool timing = L->launched++ % TIME_EVERY == 0;
    cudaError_t e = timing ? cudaEventRecord(s->h0_ev, s->copy) : cudaSuccess;
    /* several segments: one launch for all; one segment: the copy engine */
    if (e == cudaSuccess && p.nseg > 1)
        st = gpu_keys_in(s->buf.keys.d, &segs, (gpu_stream)s->copy, &s->err);
    else if (e == cudaSuccess)
        e = cudaMemcpyAsync(s->buf.keys.d, s->io[0].in_keys, s->io[0].m * 8, cudaMemcpyHostToDevice, s->copy);
    if (st == FLOE_OK && e == cudaSuccess && values_in)
        e = cudaMemcpyAsync(s->buf.vin.d, s->io[0].in_vals, m * vb, cudaMemcpyHostToDevice, s->copy);
    if (st == FLOE_OK && e == cudaSuccess)
        e = cudaEventRecord(s->in_ev, s->copy);
    if (st != FLOE_OK || e != cudaSuccess) {
        s->st = st != FLOE_OK ? st : floe_errinfo_set(&s->err, FLOE_ERR_INTERNAL, "staging a batch: %s", cuda_msg(e));
        return;
    }
    pthread_mutex_lock(&t->klock);
    enqueue_kernels(L, s, timing);
    pthread_mutex_unlock(&t->klock);
}

/* Launches a piece on the stage taken for it (launch_next): the worker's time for it is stage_in. */
void launch(lane *L, const piece &p)
{
    const uint64_t t0 = floe_now_ns();
    stage *s = &L->stg[(L->head + L->count - 1) % STAGES];
    enqueue_piece(L, s, p);
    s->stage_ns = floe_now_ns() - t0;
}

/* Adds a finished stage's times to its lane's stage timers (klock held). */
static void stage_account(lane *L, const stage *s)
{
    const uint64_t n = s->m;
    floe_stage_add(&L->stage[FLOE_STAGE_STAGE_IN], s->p.n, s->stage_ns);
    if (!s->timed)
        return;
    /* a small piece: its kernel only; another: its kernels end with the answers written out */
    const cudaEvent_t from[2] = {s->h0_ev, s->k0_ev};
    const cudaEvent_t to[2] = {s->in_ev, s->small ? s->k_ev : s->done_ev};
    const int which[2] = {FLOE_STAGE_H2D, FLOE_STAGE_KERNEL};
    for (int i = s->small ? 1 : 0; i < 2; i++) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, from[i], to[i]) == cudaSuccess) {
            floe_stage_time *st = &L->stage[which[i]]; /* for TIME_EVERY pieces of this one's size */
            floe_stage_add(st, n * TIME_EVERY, (uint64_t)((double)ms * 1e6) * TIME_EVERY);
            st->count += TIME_EVERY - 1;
        } else {
            cudaGetLastError();
        }
    }
}

/* Waits for a stage's work.  A launch that failed halfway may have left
 * copies or kernels queued: wait for the streams, so the stage's buffers
 * are free before it is used again. */
static floe_status stage_wait(gpu_table *t, stage *s)
{
    if (s->st != FLOE_OK) {
        cudaStreamSynchronize(t->ks);
        cudaStreamSynchronize(s->copy);
        return s->st;
    }
    cudaError_t e = cudaEventSynchronize(s->done_ev);
    if (e != cudaSuccess)
        s->st = floe_errinfo_set(&s->err, FLOE_ERR_INTERNAL, "batch on the GPU: %s", cuda_msg(e));
    return s->st;
}

/* Runs m keys (already in s->buf.keys.h, values in s->buf.vin.h) through one
 * operation of lane L synchronously on the table's stream: for retries
 * after growth and ids looked up again (klock held). */
static floe_status run_now(lane *L, stage *s, floe_op op, size_t m, bool ids, int mode, bool values, floe_errinfo *err)
{
    gpu_table *t = L->t;
    gpu_stream ks = (gpu_stream)t->ks;
    gpu_iceberg_lane(t->ice, L->index); /* its own halt flag (clear): another's would skip the keys */
    const uint32_t vb = t->vb;
    cudaError_t e = cudaMemcpyAsync(s->buf.keys.d, s->buf.keys.h, m * 8, cudaMemcpyHostToDevice, t->ks);
    if (e == cudaSuccess && floe_op_has(op, FLOE_OPF_STORES) && vb)
        e = cudaMemcpyAsync(s->buf.vin.d, s->buf.vin.h, m * vb, cudaMemcpyHostToDevice, t->ks);
    if (e != cudaSuccess)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "staging a retry: %s", cuda_msg(e));
    floe_status st;
    if (floe_op_has(op, FLOE_OPF_STORES))
        st = vb ? gpu_iceberg_put_map(t->ice, s->buf.keys.d, s->buf.vin.d, m, mode, s->buf.res.d,
                                      ids ? s->buf.ids.d : NULL, values ? s->buf.vout.d : NULL, ks, err)
                : gpu_iceberg_put(t->ice, s->buf.keys.d, m, s->buf.res.d, ids ? s->buf.ids.d : NULL, 0, ks, err);
    else
        st = gpu_iceberg_find(t->ice, s->buf.keys.d, m, s->buf.res.d, ids ? s->buf.ids.d : NULL, NULL, ks, err);
    if (st != FLOE_OK)
        return st;
    e = cudaMemcpyAsync(s->buf.res.h, s->buf.res.d, m, cudaMemcpyDeviceToHost, t->ks);
    if (e == cudaSuccess && ids)
        e = cudaMemcpyAsync(s->buf.ids.h, s->buf.ids.d, m * 8, cudaMemcpyDeviceToHost, t->ks);
    if (e == cudaSuccess && values)
        e = cudaMemcpyAsync(s->buf.vout.h, s->buf.vout.d, m * vb, cudaMemcpyDeviceToHost, t->ks);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(t->ks);
    if (e != cudaSuccess)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "retry on the GPU: %s", cuda_msg(e));
    return FLOE_OK;
}

/* ---- growth among lanes ----------------------------------------------------------------------------
 * A rebuild gives every key a new id, so it runs while no other lane has a
 * batch under way: from taking a batch (take_batch) to retiring its last
 * piece, and while it has skipped pieces to run again, a lane is busy and
 * holds growth off.  The lane that grows (the holder) waits until every
 * other is idle or itself waiting to grow (its pieces taken back, it will
 * look its batch's ids up again when its turn comes), and a lane waits to
 * take a batch while another grows.  So the ids of a batch are of one
 * generation, or looked up again by its own lane with nothing of it in
 * flight, as with one lane. */
static bool busy(const lane *L)
{
    return !L->waiting && (L->count > 0 || L->cur || L->redo_at < L->nredo);
}

/* A change to what busy() reads (glock held): wakes a lane waiting to grow. */
static void lane_changed(gpu_table *t)
{
    if (t->holder)
        pthread_cond_broadcast(&t->gcv);
}

/* Makes lane L (nothing of it in flight) the one that grows, alone. */
void exclusive_begin(lane *L)
{
    gpu_table *t = L->t;
    pthread_mutex_lock(&t->glock);
    L->waiting = true;
    pthread_cond_broadcast(&t->gcv);
    for (;;) {
        if (!t->holder)
            t->holder = L;
        bool others = false;
        for (unsigned i = 0; t->holder == L && i < t->nlanes; i++)
            others = others || (&t->lanes[i] != L && busy(&t->lanes[i]));
        if (t->holder == L && !others)
            break;
        pthread_cond_wait(&t->gcv, &t->glock);
    }
    L->waiting = false;
    pthread_mutex_unlock(&t->glock);
}

void exclusive_end(lane *L)
{
    gpu_table *t = L->t;
    pthread_mutex_lock(&t->glock);
    t->holder = NULL;
    pthread_cond_broadcast(&t->gcv);
    pthread_mutex_unlock(&t->glock);
}

floe_status retry_after_growth(lane *L, uint8_t *res, uint32_t *idx, size_t m, bool grown, retry_round round, void *ctx,
                               floe_errinfo *err)
{
    gpu_table *t = L->t;
    gpu_iceberg_lane(t->ice, L->index);
    floe_status st = gpu_iceberg_clear_halt(t->ice, (gpu_stream)t->ks, err);
    for (; st == FLOE_OK; grown = false) {
        size_t nf = 0;
        for (size_t j = 0; j < m; j++)
            if (res[j] == FLOE_FULL || res[j] == GPU_SKIPPED)
                idx[nf++] = (uint32_t)j;
        if (nf == 0)
            break;
        floe_errinfo ignored;
        uint32_t a = gpu_iceberg_addr_bits(t->ice), three = gpu_iceberg_three(t->ice);
        iceberg_step_up(&a, &three);
        if (!grown && rebuild(t, a, three, m, &ignored) != FLOE_OK) {
            for (size_t k = 0; k < nf; k++) /* cannot grow: FULL stands */
                res[idx[k]] = FLOE_FULL;
            break;
        }
        /* in the batch's order, so first occurrences stay first */
        st = round(ctx, idx, nf, res, err);
        if (st == FLOE_OK)
            st = gpu_iceberg_clear_halt(t->ice, (gpu_stream)t->ks, err);
    }
    return st;
}

/* A retry round of a stage's keys through the stage itself (grow_and_retry):
 * the keys and a MAP insert's values kept aside while its buffers serve. */
struct stage_round {
    lane *L;
    stage *s;
    floe_op op;
    int mode;
    bool want_values;
    const uint64_t *keys;
    const unsigned char *vin;
    unsigned char *vout;
};

static floe_status stage_retry(void *ctx, const uint32_t *idx, size_t nf, uint8_t *res, floe_errinfo *err)
{
    const stage_round *r = (const stage_round *)ctx;
    stage *s = r->s;
    const uint32_t vb = r->L->t->vb;
    for (size_t k = 0; k < nf; k++) {
        s->buf.keys.h[k] = r->keys[idx[k]];
        if (vb)
            memcpy((unsigned char *)s->buf.vin.h + k * vb, r->vin + (size_t)idx[k] * vb, vb);
    }
    floe_status st = run_now(r->L, s, r->op, nf, false, r->mode, r->want_values, err);
    if (st != FLOE_OK)
        return st;
    for (size_t k = 0; k < nf; k++) {
        res[idx[k]] = s->buf.res.h[k];
        if (r->want_values)
            memcpy(r->vout + (size_t)idx[k] * vb, (unsigned char *)s->buf.vout.h + k * vb, vb);
    }
    return FLOE_OK;
}

/* Stage s (retired, its results in buf.res.h) had FULL keys on a grow table:
 * every piece of its lane in flight behind it was skipped.  Drain them into
 * the redo list, grow, and retry the FULL keys until none is left or the
 * table cannot grow.  If another lane grew the table since s ran, the keys
 * are first retried as it is. */
static floe_status grow_and_retry(lane *L, stage *s, floe_errinfo *err)
{
    gpu_table *t = L->t;
    piece later[2 * STAGES];
    unsigned nl = 0;
    for (unsigned k = 0; k < L->count; k++) { /* skipped (or failed): run them again after the retry */
        stage *q = &L->stg[(L->head + k) % STAGES];
        stage_wait(t, q);
        later[nl++] = q->p;
    }
    for (unsigned i = L->redo_at; i < L->nredo && nl < 2 * STAGES; i++)
        later[nl++] = L->redo[i]; /* the list only shrinks: at most STAGES - 1 pieces */
    pthread_mutex_lock(&t->glock);
    memcpy(L->redo, later, nl * sizeof *later);
    L->nredo = nl;
    L->redo_at = 0;
    L->head = (L->head + L->count) % STAGES;
    L->count = 0;
    lane_changed(t);
    pthread_mutex_unlock(&t->glock);
    relaxed_set(&L->inflight_keys, 0);

    floe_batch *b = s->p.seg[0].b; /* the segments share op and flags */
    const bool want_values = t->vb && (b->flags & FLOE_BATCH_WANT_VALUES) != 0;
    const int mode = floe_value_mode_of(b->op, b->flags);
    const uint32_t vb = t->vb;
    uint64_t *keys = (uint64_t *)malloc(s->m * 8);
    uint32_t *idx = (uint32_t *)malloc(s->m * sizeof *idx);
    uint8_t *res = (uint8_t *)malloc(s->m);
    unsigned char *vin = vb ? (unsigned char *)malloc(s->m * vb) : NULL;
    unsigned char *vout = vb ? (unsigned char *)malloc(s->m * vb) : NULL;
    floe_status st = FLOE_OK;
    if (!keys || !idx || !res || (vb && (!vin || !vout))) {
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory retrying FULL keys");
        goto out;
    }
    /* the stage's keys and answers, kept while its buffers serve the retries (values: a MAP
     * insert's, a piece of one segment) */
    for (unsigned i = 0; i < s->p.nseg; i++) {
        memcpy(keys + s->io[i].at, s->io[i].in_keys, s->io[i].m * 8);
        memcpy(res + s->io[i].at, s->io[i].out_res, s->io[i].m);
    }
    if (vb && s->io[0].in_vals)
        memcpy(vin, s->io[0].in_vals, s->m * vb);
    if (want_values)
        memcpy(vout, s->io[0].out_vout, s->m * vb);
    exclusive_begin(L);
    pthread_mutex_lock(&t->klock);
    {
        stage_round r = {L, s, b->op, mode, want_values, keys, vin, vout};
        st = retry_after_growth(L, res, idx, s->m, t->generation != s->gen, stage_retry, &r, err);
    }
    pthread_mutex_unlock(&t->klock);
    exclusive_end(L);
    /* ids are looked up again for the whole batch once it is retired (refind_ids) */
    if (st == FLOE_OK) {
        for (unsigned i = 0; i < s->p.nseg; i++)
            memcpy(s->io[i].out_res, res + s->io[i].at, s->io[i].m);
        if (want_values)
            memcpy(s->io[0].out_vout, vout, s->m * vb);
    }
out:
    free(keys);
    free(idx);
    free(res);
    free(vin);
    free(vout);
    return st;
}

/* The table was rebuilt while b ran, so ids of keys [0, upto) may be stale:
 * look them all up again (through stage s of lane L, free now), as the CPU
 * engine does after growth.  klock held. */
static void refind_ids(lane *L, stage *s, floe_batch *b, size_t upto)
{
    gpu_table *t = L->t;
    floe_errinfo err;
    for (size_t at = 0; at < upto;) {
        size_t m = upto - at < PIECE_MAX ? upto - at : PIECE_MAX;
        floe_status st = stage_reserve(s, m, t->vb, &err);
        if (st == FLOE_OK) {
            memcpy(s->buf.keys.h, b->keys + at, m * 8);
            st = run_now(L, s, FLOE_OP_FIND, m, true, false, false, &err);
        }
        if (st != FLOE_OK) {
            fail_batch(b, st, &err);
            return;
        }
        for (size_t j = 0; j < m; j++)
            b->ids[at + j] = s->buf.res.h[j] == FLOE_PRESENT ? s->buf.ids.h[j] : FLOE_NO_ID;
        at += m;
    }
}

#define OUT_CHUNK ((size_t)1 << 18) /* keys a task copies out of staging */

struct out_job {
    const seg_io *io;
    uint8_t *res;
    uint64_t *ids;
    unsigned char *vout;
    uint32_t vb;
    size_t n;
};

static void out_task(void *arg, size_t task)
{
    out_job *j = (out_job *)arg;
    const size_t at = task * OUT_CHUNK, m = j->n - at < OUT_CHUNK ? j->n - at : OUT_CHUNK;
    const seg_io *io = j->io; /* answers the device wrote straight into the batch need no copy */
    if (io->out_res != j->res)
        memcpy(j->res + at, io->out_res + at, m);
    if (j->ids && io->out_ids != j->ids)
        memcpy(j->ids + at, io->out_ids + at, m * 8);
    if (j->vout && io->out_vout != j->vout)
        memcpy(j->vout + at * j->vb, (const unsigned char *)io->out_vout + at * j->vb, m * j->vb);
}

/* Copies a segment's answers (one per key, no dedup) out of pinned staging,
 * spread over the backend's pool, unless the device wrote them straight
 * into the batch. */
static void answers_out(gpu_table *t, const seg_io *io, uint8_t *res, uint64_t *ids, unsigned char *vout, size_t n)
{
    if (io->out_res == res && (!ids || io->out_ids == ids) && (!vout || io->out_vout == vout))
        return;
    out_job j = {io, res, ids, vout, t->vb, n};
    const size_t tasks = (n + OUT_CHUNK - 1) / OUT_CHUNK;
    if (tasks < 2)
        out_task(&j, 0);
    else
        floe_pool_run(t->be->pool, tasks, out_task, &j);
}

/* Whether some key of the stage's piece came back FULL. */
static bool stage_full(const stage *s)
{
    if (s->small) /* answers counted on the host: in one array (io[0]'s and on) */
        return memchr(s->io[0].out_res, FLOE_FULL, s->m) != NULL;
    for (unsigned i = 0; i < s->p.nseg; i++)
        if (s->h_counts[i][FLOE_FULL])
            return true;
    return false;
}

/* Hands segment i's answers to its batch: copied out of staging where the
 * device did not write them there, counted (also into *piece_counts). */
static void segment_out(gpu_table *t, const stage *s, unsigned i, bool retried, floe_answer_counts *piece_counts)
{
    const segment &g = s->p.seg[i];
    floe_batch *b = g.b;
    const bool want_ids = floe_batch_wants_ids(b);
    const bool want_values =
        t->vb && (b->flags & FLOE_BATCH_WANT_VALUES) != 0 && floe_op_has(b->op, FLOE_OPF_VALUES_OUT);
    const uint32_t vb = t->vb;
    uint8_t *res = b->results + g.off;
    uint64_t *ids = want_ids ? b->ids + g.off : NULL;
    unsigned char *vout = want_values ? (unsigned char *)b->values_out + g.off * vb : NULL;
    floe_answer_counts c;
    answers_out(t, &s->io[i], res, ids, vout, g.n);
    if (retried || s->small) /* FULL keys retried after growth: the answers differ from the device's counts */
        floe_answer_counts_tally(&c, res, g.n);
    else
        floe_answer_counts_of(&c, s->h_counts[i]); /* as the device counted them */
    b->counts.inserted += c.inserted;
    b->counts.present += c.present;
    b->counts.absent += c.absent;
    b->counts.full += c.full;
    b->counts.erased += c.erased;
    piece_counts->inserted += c.inserted;
    piece_counts->erased += c.erased;
}

/* Hands the oldest stage of lane L's answers to its batches (waits for them). */
void retire(lane *L)
{
    gpu_table *t = L->t;
    stage *s = &L->stg[L->head];
    floe_status st = stage_wait(t, s);
    pthread_mutex_lock(&t->glock);
    L->count--;
    /* idle, the next piece takes the first stage again: a lane fed one batch at a time makes one
     * stage's staging, not STAGES (each a first batch's wait for pinned memory) */
    L->head = L->count ? (L->head + 1) % STAGES : 0;
    lane_changed(t);
    pthread_mutex_unlock(&t->glock);
    const uint64_t t0 = floe_now_ns();
    const floe_op op = s->p.seg[0].b->op;
    const bool stores = floe_op_has(op, FLOE_OPF_STORES);
    if (stores)
        relaxed_set(&L->inflight_keys, L->inflight_keys - (s->m < L->inflight_keys ? s->m : L->inflight_keys));
    if (st == FLOE_OK && s->m > 0 && s->io[0].out_res[0] == GPU_SKIPPED) /* grow_and_retry collects skipped pieces */
        st = floe_errinfo_set(&s->err, FLOE_ERR_INTERNAL, "a batch was skipped on a halted table");
    const uint64_t generation = s->gen; /* the one every segment ran on */
    bool retried = false;
    if (st == FLOE_OK && stores && t->base.spec.grow && stage_full(s)) {
        st = grow_and_retry(L, s, &s->err);
        retried = true;
    }
    floe_answer_counts c = {};
    for (unsigned i = 0; i < s->p.nseg; i++) {
        if (st != FLOE_OK)
            fail_batch(s->p.seg[i].b, st, &s->err);
        else
            segment_out(t, s, i, retried, &c);
    }
    pthread_mutex_lock(&t->klock);
    if (s->st == FLOE_OK)
        stage_account(L, s);
    relaxed_set(&t->used, t->used + c.inserted);
    relaxed_set(&t->tombstones, t->tombstones + c.erased);
    /* Ids: stage s's buffers are free now (every segment's answers are out) to look ids up again. */
    for (unsigned i = 0; i < s->p.nseg; i++) {
        const segment &g = s->p.seg[i];
        floe_batch *b = g.b;
        uint64_t ids_gen = g.off == 0 ? generation : L->ids_gen; /* the generation b's ids start from */
        if (b->status == FLOE_OK && floe_batch_wants_ids(b) && t->generation != generation) {
            /* The table grew for this piece: the ids of the batch so far (its retried keys' too) are
             * looked up again now, while no later batch of this lane has run on the grown table
             * (grow_and_retry took their pieces back: a later erase must not hide a key this batch
             * inserted; another lane's is a request of another connection, which may come first). */
            refind_ids(L, s, b, g.off + g.n);
            ids_gen = t->generation;
        }
        if (g.last && b->status == FLOE_OK && floe_batch_wants_ids(b) && ids_gen != t->generation)
            refind_ids(L, s, b, g.off + g.n); /* the table grew while the batch ran */
        if (!g.last)
            L->ids_gen = ids_gen;
        if (g.last)
            b->generation = t->generation; /* its ids were looked up again if the table grew */
    }
    floe_stage_add(&L->stage[FLOE_STAGE_STAGE_OUT], s->p.n, floe_now_ns() - t0);
    pthread_mutex_unlock(&t->klock);
    for (unsigned i = 0; i < s->p.nseg; i++)
        if (s->p.seg[i].last)
            complete(t, s->p.seg[i].b);
}

/* Runs everything lane L launched or began to completion: stages in
 * flight, pieces to redo, the rest of the current batch, a batch split on
 * the devices whose answers are on their way (run_group.cu). */
void drain(lane *L)
{
    while (L->count > 0 || L->redo_at < L->nredo || L->cur) {
        if ((L->redo_at < L->nredo || L->cur) && L->count < STAGES)
            launch_next(L);
        else
            retire(L);
    }
    group_finish(L);
}

/* ---- operations that run alone ------------------------------------------------------------------------ */

static void fill_stats(gpu_table *t, floe_table_stats *st)
{
    uint64_t used[3] = {0, 0, 0}, tomb = 0, used_bytes = 0;
    floe_errinfo err;
    memset(st, 0, sizeof *st);
    if (gpu_iceberg_count(t->ice, used, &tomb, &used_bytes, &err) != FLOE_OK) {
        used[0] = t->used; /* the device cannot count: report what the host knows */
        tomb = t->tombstones;
    }
    floe_geometry g;
    floe_geometry_init(&g, t->base.spec.key_bits, gpu_iceberg_addr_bits(t->ice), gpu_iceberg_three(t->ice),
                       t->base.spec.seed);
    st->spec = t->base.spec;
    st->tombstones = tomb;
    uint64_t u = used[0] + used[1] + used[2];
    st->keys = u - tomb;
    st->slots = g.total_slots;
    st->fill = (double)u / (double)st->slots;
    st->memory_bytes = gpu_iceberg_memory(t->ice);
    st->used_bytes = used_bytes;
    st->bytes_per_key = st->keys ? (double)st->memory_bytes / (double)st->keys : 0.0;
    st->generation = t->generation;
    strcpy(st->backend, "gpu");
    for (int l = 0; l < FLOE_LEVELS; l++) {
        floe_level_stats *ls = &st->level[l];
        ls->slots = floe_level_slots(&g.level[l]);
        ls->used = used[l];
        ls->row_bits = g.level[l].row_bits;
        ls->buckets_log2 = g.level[l].addr_bits;
        ls->fill = (double)ls->used / (double)ls->slots;
    }
}

/* The table's file image, through the CPU engine's file code: the arrays are
 * the same, downloaded into a host table that the image then owns. */
static floe_status copy_image(gpu_table *t, floe_file_image **out, floe_errinfo *err)
{
    iceberg *host;
    floe_status st =
        iceberg_create_sized(&t->base.spec, gpu_iceberg_addr_bits(t->ice), gpu_iceberg_three(t->ice), NULL, &host, err);
    if (st != FLOE_OK)
        return st;
    iceberg_set_first_fill(host, gpu_iceberg_first_fill(t->ice));
    iceberg_image im;
    iceberg_get_image(host, &im);
    uint64_t used[3], tomb;
    st = gpu_iceberg_download(t->ice, im.sections, err);
    if (st == FLOE_OK)
        st = gpu_iceberg_count(t->ice, used, &tomb, NULL, err);
    if (st == FLOE_OK) {
        iceberg_set_counters(host, used, tomb, t->generation);
        st = iceberg_image_of(host, out, err);
    }
    if (st != FLOE_OK)
        iceberg_destroy(host);
    return st;
}

/* SAVE is a COPY written at once. */
floe_status write_image(floe_file_image *im, const char *path, floe_errinfo *err)
{
    floe_status st = floe_file_image_save(path, im, err);
    floe_file_image_free(im);
    return st;
}

static floe_status save(gpu_table *t, const char *path, floe_errinfo *err)
{
    if (!path)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "save needs a path");
    floe_file_image *im = NULL;
    floe_status st = copy_image(t, &im, err);
    return st == FLOE_OK ? write_image(im, path, err) : st;
}

static void run_alone_locked(gpu_table *t, floe_batch *b)
{
    floe_errinfo *e = &b->error;
    switch (b->op) {
    case FLOE_OP_SCAN: {
        const bool want_values = (b->flags & FLOE_BATCH_WANT_VALUES) != 0;
        uint64_t pos = b->cursor_set ? b->cursor.position : 0;
        b->scan_n = 0;
        assert(!want_values || t->vb);         /* values in a scan: a MAP's (floe_request_check) */
        assert(b->limit == 0 || b->scan_keys); /* the buffer (floe_batch_check) */
        if (b->cursor_set && b->cursor.generation != t->generation)
            b->status = floe_errinfo_set(e, FLOE_ERR_INVALID,
                                         "scan cursor is from generation %llu but the table was rebuilt (generation "
                                         "%llu): start the scan again",
                                         (unsigned long long)b->cursor.generation, (unsigned long long)t->generation);
        else if (pos > table_slots(t))
            b->status =
                floe_errinfo_set(e, FLOE_ERR_INVALID, "scan cursor position %llu is past the table's %llu slots",
                                 (unsigned long long)pos, (unsigned long long)table_slots(t));
        else {
            uint64_t next;
            b->status = gpu_iceberg_scan(t->ice, pos, b->limit, b->scan_keys, want_values ? b->scan_values : NULL,
                                         &b->scan_n, &next, &b->scan_done, e);
            b->next.position = next;
            b->next.generation = t->generation;
        }
        break;
    }
    case FLOE_OP_STATS:
        fill_stats(t, &b->stats);
        stage_times(t, b->stats.stage);
        b->stats.device = t->be->device;
        b->status = FLOE_OK;
        break;
    case FLOE_OP_REBUILD:
        b->status = rebuild(t, b->addr_bits, 0, 0, e);
        break;
    case FLOE_OP_SAVE:
        b->status = save(t, b->path, e);
        break;
    case FLOE_OP_COPY:
        b->status = copy_image(t, &b->image, e);
        break;
    case FLOE_OP_FREEZE:
        assert(t->base.spec.kind == FLOE_KIND_STATIC); /* the door */
        b->status = static_freeze(t, e);
        break;
    default:
        assert(b->op != FLOE_OP_GET); /* refused at the door */
        b->status = floe_errinfo_set(e, FLOE_ERR_INVALID, "unknown operation %d", (int)b->op);
    }
}

/* SCAN, STATS, REBUILD, SAVE, COPY of a SET or MAP, and a STATIC table's
 * FREEZE: after lane L's pieces, and every lane's kernels enqueued so far
 * (klock held, so none starts). */
void run_alone(lane *L, floe_batch *b)
{
    gpu_table *t = L->t;
    floe_errinfo *e = &b->error;
    /* every id, or the engine itself: no other lane's batch may be under way */
    const bool renumbers = b->op == FLOE_OP_REBUILD || b->op == FLOE_OP_FREEZE;
    drain(L);
    if (renumbers)
        exclusive_begin(L);
    pthread_mutex_lock(&t->klock);
    b->status = quiesce(t, e);
    if (b->status == FLOE_OK)
        run_alone_locked(t, b);
    pthread_mutex_unlock(&t->klock);
    if (renumbers)
        exclusive_end(L);
    complete(t, b);
}
