/*
 * run_group.cu - a batch of a SET table in parts that the parts' devices
 * split among themselves (tables/group.h), run by each part's lane worker.
 *
 * Part p's worker gets chunk p of the batch, whose keys and answers lie in
 * pinned host memory, and with every other part's worker:
 *  1. copies its chunk's keys in, notes each key's part, sorts the keys by
 *     part (a stable radix sort of the part bytes, so that each part's keys
 *     keep the batch's order), and reads back how many keys each part has;
 *     meets the others;
 *  2. copies its part's keys from every chunk, in chunk order, straight
 *     from the other devices' memory (peer access: NVLink where there is
 *     one), runs the operation on its table, and counts the answers;
 *     meets the others;
 *  3. copies its chunk's answers from every part's device, puts them back
 *     in the chunk's order, and copies them out to the caller.
 * So every key crosses the host's memory once in and its answer once out,
 * as with a whole table, and no host thread touches the keys: the split and
 * join of tables/partition.c cost the host's memory three more passes,
 * which bounded a table in parts (docs/PERFORMANCE.md, "Several GPUs").
 *
 * The batches pipeline on each device: step 1 of the next batches in the
 * lane's queue, if they are of these and sets are free, is enqueued on the
 * stage's own stream as soon as step 2 of this run is, and step 3 is
 * enqueued on a third stream and waited for (group_finish) once step 2 of
 * the next run is enqueued: copies in and out run while the table runs a
 * batch.  Each batch takes the next of GROUP_SETS sets of buffers; a set is
 * written again only once the batch that last used it has been answered
 * here (group_finish, before sort_ahead) and every part has met over a
 * later run, which each reaches only once done with reading that set: so
 * no third meeting is needed.
 *
 * A run may take several batches: at the first meeting each worker offers
 * the batches queued behind this one that are of these, do the same, are
 * sorted already and keep the run's chunks under GROUP_MERGE_KEYS, and all
 * take the least offer (floe_group_meet_least).  The run's keys go to the
 * table in the batches' order, each batch's by chunk as above, and its two
 * meetings, the table's kernels and its wait for them are paid once for
 * them all: a batch of 1 Mi keys over 4 devices is a quarter of a million
 * a device, which those fixed costs bounded (docs/PERFORMANCE.md, "Several
 * GPUs").
 *
 * Each worker runs one such run at a time, drained (begin, in
 * backend_gpu.cu), with its table's one lane: a worker waiting at a
 * meeting must not hold up another lane of its table that another part's
 * worker waits for (growth waits for every lane).  Growth: before step 2
 * for the run's keys of this part (grow_if_due), and keys that come back
 * FULL (or skipped after a FULL of the same launch) are retried in order
 * after growing, as retire does.
 */
#include <cub/device/device_radix_sort.cuh>

#include "partition.h"
#include "pipeline.h"

/* Smaller batches are split on the host: two meetings and a dozen driver
 * calls a part cost more than their keys' passes. */
#define GROUP_MIN_KEYS ((size_t)1 << 16)
/* A run's chunks together (this part's share of its batches' keys) at most:
 * larger batches pay their fixed costs alone well enough. */
#define GROUP_MERGE_KEYS ((size_t)1 << 21)
#define GROUP_BLOCK    256
/* meta's words */
#define META_BITS        FLOE_PARTS_MAX       /* every key of the chunk, or'ed */
#define META_PART_TALLY  (FLOE_PARTS_MAX + 1) /* the part's answers: 0..4, then anything else (skipped) */
#define META_CHUNK_TALLY (META_PART_TALLY + 6)
static_assert(META_CHUNK_TALLY + 6 <= GROUP_META, "meta holds the counts, the bits and two tallies");

bool group_fits(floe_table *const *parts, unsigned nparts, const floe_batch *b)
{
    static const bool host_split = getenv("FLOE_HOST_SPLIT") != NULL; /* diagnostics: the host's split, always */
    if (host_split || nparts < 2 || b->n < GROUP_MIN_KEYS || b->n >= ((size_t)1 << 31) ||
        (b->flags & FLOE_BATCH_WANT_IDS) ||
        (b->op != FLOE_OP_INSERT && b->op != FLOE_OP_FIND && b->op != FLOE_OP_ERASE))
        return false;
    if (!pinned(b->keys, b->n * 8) || !pinned(b->results, b->n))
        return false; /* the devices copy straight from and to them */
    for (unsigned p = 0; p < nparts; p++) {
        const gpu_table *t = (const gpu_table *)parts[p];
        if (!t->ice || t->base.spec.kind != FLOE_KIND_SET || t->nlanes != 1)
            return false;
        for (unsigned q = 0; q < p; q++) {
            const int a = t->be->device, c = ((const gpu_table *)parts[q])->be->device;
            if (!peer_reach(a, c) || !peer_reach(c, a))
                return false;
        }
    }
    return true;
}

/* ---- kernels ------------------------------------------------------------------------------------------------- */

static unsigned blocks_for(size_t n)
{
    const size_t b = (n + GROUP_BLOCK - 1) / GROUP_BLOCK;
    return b < 1 ? 1 : b > 4096 ? 4096 : (unsigned)b;
}

static __global__ void k_iota(uint32_t *a, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        a[i] = (uint32_t)i;
}

/* The part of each key (partition.h's rule), how many each part has, and
 * every key's bits or'ed (for the door's check of their widths). */
static __global__ void k_parts(const uint64_t *keys, size_t n, unsigned P, uint8_t *pb, unsigned long long *meta)
{
    __shared__ unsigned count[FLOE_PARTS_MAX];
    __shared__ unsigned long long bits;
    if (threadIdx.x < FLOE_PARTS_MAX)
        count[threadIdx.x] = 0;
    if (threadIdx.x == 0)
        bits = 0;
    __syncthreads();
    unsigned long long mine = 0;
    for (size_t i0 = (size_t)blockIdx.x * blockDim.x; i0 < n; i0 += (size_t)gridDim.x * blockDim.x) {
        const size_t i = i0 + threadIdx.x;
        unsigned p = P; /* none */
        if (i < n) {
            const uint64_t k = keys[i];
            p = floe_part_of(floe_part_hash_key(k), P);
            pb[i] = (uint8_t)p;
            mine |= k;
        }
        for (unsigned q = 0; q < P; q++) {
            const unsigned m = __ballot_sync(0xffffffffu, p == q);
            if ((threadIdx.x & 31) == 0 && m)
                atomicAdd(&count[q], __popc(m));
        }
    }
    for (int o = 16; o > 0; o >>= 1)
        mine |= __shfl_xor_sync(0xffffffffu, mine, o);
    if ((threadIdx.x & 31) == 0 && mine)
        atomicOr(&bits, mine);
    __syncthreads();
    if (threadIdx.x < P && count[threadIdx.x])
        atomicAdd(&meta[threadIdx.x], (unsigned long long)count[threadIdx.x]);
    if (threadIdx.x == 0 && bits)
        atomicOr(&meta[META_BITS], bits);
}

static __global__ void k_gather(const uint64_t *keys, const uint32_t *perm, size_t n, uint64_t *out)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = keys[perm[i]];
}

static __global__ void k_unscatter(const uint8_t *res, const uint32_t *perm, size_t n, uint8_t *out)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[perm[i]] = res[i];
}

/* How many answers are 0..4 (FLOE_ABSENT .. FLOE_ERASED), and anything else, into tally[0..5]. */
static __global__ void k_tally(const uint8_t *res, size_t n, unsigned long long *tally)
{
    __shared__ unsigned count[6];
    if (threadIdx.x < 6)
        count[threadIdx.x] = 0;
    __syncthreads();
    for (size_t i0 = (size_t)blockIdx.x * blockDim.x; i0 < n; i0 += (size_t)gridDim.x * blockDim.x) {
        const size_t i = i0 + threadIdx.x;
        const unsigned a = i < n ? (res[i] < 5 ? res[i] : 5) : 6;
        for (unsigned v = 0; v < 6; v++) {
            const unsigned m = __ballot_sync(0xffffffffu, a == v);
            if ((threadIdx.x & 31) == 0 && m)
                atomicAdd(&count[v], __popc(m));
        }
    }
    __syncthreads();
    if (threadIdx.x < 6 && count[threadIdx.x])
        atomicAdd(&tally[threadIdx.x], (unsigned long long)count[threadIdx.x]);
}

/* ---- buffers ------------------------------------------------------------------------------------------------- */

static void chunk_free(group_chunk *c)
{
    c->ck.release();
    c->sk.release();
    c->pb.release();
    c->pbs.release();
    c->iota.release();
    c->perm.release();
    c->temp.release();
    c->res.release();
    c->meta.release();
    if (c->sorted)
        cudaEventDestroy(c->sorted);
    memset(c, 0, sizeof *c);
}

void group_stage_free(group_stage *s)
{
    assert(!s->npending); /* the lane finished them before stopping */
    if (s->ss)
        cudaStreamSynchronize(s->ss);
    for (group_chunk &c : s->ch)
        chunk_free(&c);
    s->in.release();
    s->sres.release();
    s->cres.release();
    if (s->ss)
        cudaStreamDestroy(s->ss);
    if (s->as)
        cudaStreamDestroy(s->as);
    memset(s, 0, sizeof *s);
}

/* Room in set c for a chunk of m keys (enqueues on the stage's stream). */
static floe_status reserve_chunk(group_stage *s, group_chunk *c, size_t m, floe_errinfo *err)
{
    if (!s->ss)
        RUN_CUDA(cudaStreamCreateWithFlags(&s->ss, cudaStreamNonBlocking));
    if (!s->as)
        RUN_CUDA(cudaStreamCreateWithFlags(&s->as, cudaStreamNonBlocking));
    if (!c->sorted)
        RUN_CUDA(cudaEventCreateWithFlags(&c->sorted, cudaEventDisableTiming));
    floe_status st = c->meta.reserve(GROUP_META, ON_BOTH, err);
    if (st != FLOE_OK || m <= c->iota.cap) /* iota is grown last: its room is every array's */
        return st;
    const size_t cap = m + m / 4;
    if ((st = c->ck.reserve(cap, ON_DEVICE, err)) != FLOE_OK || (st = c->sk.reserve(cap, ON_DEVICE, err)) != FLOE_OK ||
        (st = c->pb.reserve(cap, ON_DEVICE, err)) != FLOE_OK || (st = c->pbs.reserve(cap, ON_DEVICE, err)) != FLOE_OK ||
        (st = c->perm.reserve(cap, ON_DEVICE, err)) != FLOE_OK)
        return st;
    c->temp_bytes = 0; /* cub's query: no array read */
    RUN_CUDA(cub::DeviceRadixSort::SortPairs(NULL, c->temp_bytes, c->pb.d, c->pbs.d, c->iota.d, c->perm.d, (int)cap, 0,
                                             8, s->ss));
    if ((st = c->temp.reserve(c->temp_bytes, ON_DEVICE, err)) != FLOE_OK ||
        (st = c->iota.reserve(cap, ON_DEVICE, err)) != FLOE_OK)
        return st;
    k_iota<<<blocks_for(cap), GROUP_BLOCK, 0, s->ss>>>(c->iota.d, cap);
    RUN_CUDA(cudaGetLastError());
    return FLOE_OK;
}

/* Room for m keys of this part from every chunk (their answers in set c),
 * and for a chunk's m2 answers. */
static floe_status reserve_part(group_stage *s, group_chunk *c, size_t m, size_t m2, floe_errinfo *err)
{
    floe_status st = FLOE_OK;
    if (m > s->in.cap)
        st = s->in.reserve(m + m / 4, ON_DEVICE, err);
    if (st == FLOE_OK && m > c->res.cap)
        st = c->res.reserve(m + m / 4, ON_DEVICE, err);
    if (st == FLOE_OK && m2 > s->sres.cap)
        st = s->sres.reserve(m2 + m2 / 4, ON_DEVICE, err);
    if (st == FLOE_OK && m2 > s->cres.cap)
        st = s->cres.reserve(m2 + m2 / 4, ON_DEVICE, err);
    return st;
}

/* ---- the steps ----------------------------------------------------------------------------------------------- */

static int device_of(const floe_group *g, unsigned p)
{
    return ((const gpu_table *)g->part[p])->be->device;
}

static const group_chunk *chunk_of(const floe_group *g, unsigned p)
{
    return (const group_chunk *)g->slot[p];
}

/* Step 1, enqueued: b's chunk in, sorted by part, and its counts and bits
 * on their way to meta.h, into the next set (c->st says how it went). */
static group_chunk *sort_chunk(gpu_table *t, const floe_batch *b)
{
    group_stage *s = &t->gs;
    group_chunk *c = &s->ch[s->next];
    s->next = (s->next + 1) % GROUP_SETS;
    c->b = b;
    const size_t m = b->n;
    const unsigned P = b->group->parts;
    unsigned end_bit = 1;
    while ((1u << end_bit) < P)
        end_bit++;
    floe_errinfo *err = &c->err;
    if ((c->st = reserve_chunk(s, c, m, err)) != FLOE_OK)
        return c;
    const cudaStream_t ss = s->ss;
    cudaError_t e = cudaMemsetAsync(c->meta.d, 0, GROUP_META * sizeof *c->meta.d, ss);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(c->ck.d, b->keys, m * 8, cudaMemcpyHostToDevice, ss);
    if (e == cudaSuccess) {
        k_parts<<<blocks_for(m), GROUP_BLOCK, 0, ss>>>(c->ck.d, m, P, c->pb.d, c->meta.d);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cub::DeviceRadixSort::SortPairs(c->temp.d, c->temp_bytes, c->pb.d, c->pbs.d, c->iota.d, c->perm.d, (int)m,
                                            0, (int)end_bit, ss);
    if (e == cudaSuccess) {
        k_gather<<<blocks_for(m), GROUP_BLOCK, 0, ss>>>(c->ck.d, c->perm.d, m, c->sk.d);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(c->meta.h, c->meta.d, (META_BITS + 1) * sizeof *c->meta.d, cudaMemcpyDeviceToHost, ss);
    if (e == cudaSuccess)
        e = cudaEventRecord(c->sorted, ss);
    if (e != cudaSuccess)
        c->st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "splitting a batch on the GPU: %s", cuda_msg(e));
    return c;
}

/* The set that holds b's chunk, if one does. */
static group_chunk *set_of(group_stage *s, const floe_batch *b)
{
    for (group_chunk &c : s->ch)
        if (c.b == b)
            return &c;
    return NULL;
}

/* Step 1 of b done: its set, sorted, with its counts. */
static group_chunk *sorted_chunk(gpu_table *t, const floe_batch *b, floe_status *st, floe_errinfo *err)
{
    group_stage *s = &t->gs;
    group_chunk *c = set_of(s, b);
    if (!c)
        c = sort_chunk(t, b);
    *st = c->st;
    if (*st == FLOE_OK) {
        const cudaError_t e = cudaEventSynchronize(c->sorted); /* not the sorts enqueued after it */
        if (e != cudaSuccess)
            *st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "splitting a batch on the GPU: %s", cuda_msg(e));
    } else {
        *err = c->err;
    }
    for (unsigned q = 0; q < b->group->parts; q++)
        c->cnt[q] = *st == FLOE_OK ? (size_t)c->meta.h[q] : 0;
    return c;
}

/* Whether chunk c has a key wider than its table's (k_parts or'ed their bits). */
static bool too_wide(const gpu_table *t, const group_chunk *c)
{
    const uint32_t kb = t->base.spec.key_bits;
    return kb < 64 && (c->meta.h[META_BITS] >> kb) != 0;
}

/* Step 1 of the batches at the head of lane L's queue that are of these
 * and not under way yet, while a run runs: as many as there are free sets. */
static void sort_ahead(lane *L)
{
    gpu_table *t = L->t;
    group_stage *s = &t->gs;
    if (device_failed(t->be->device))
        return;
    pthread_mutex_lock(&t->lock);
    const queue_link *l = L->q.head;
    pthread_mutex_unlock(&t->lock);
    /* the links ahead of the head stay as they are: only this worker pops them */
    for (unsigned ahead = 0; l && ahead < GROUP_SETS - 1; ahead++) {
        const floe_batch *next = FLOE_BATCH_OF(l);
        if (!next->group)
            return;
        if (!set_of(s, next)) {
            if (s->ch[s->next].b)
                return; /* no free set */
            sort_chunk(t, next);
        }
        pthread_mutex_lock(&t->lock);
        l = l->next;
        pthread_mutex_unlock(&t->lock);
    }
}

/* Runs op on the first m keys of d_in into d_res (klock held). */
static floe_status run_op(gpu_table *t, floe_op op, const uint64_t *d_in, size_t m, uint8_t *d_res, floe_errinfo *err)
{
    if (floe_op_has(op, FLOE_OPF_STORES))
        return gpu_iceberg_put(t->ice, d_in, m, d_res, NULL, 0, (gpu_stream)t->ks, err);
    if (op == FLOE_OP_ERASE)
        return gpu_iceberg_erase(t->ice, d_in, m, d_res, (gpu_stream)t->ks, err);
    return gpu_iceberg_find(t->ice, d_in, m, d_res, NULL, NULL, (gpu_stream)t->ks, err);
}

/* A retry round of a chunk set's keys (retry_full): through the part's
 * staging on the device, run and copied back at once. */
struct group_round {
    gpu_table *t;
    group_chunk *c;
    floe_op op;
    const uint64_t *keys;
    uint64_t *redo;
};

static floe_status group_retry(void *ctx, const uint32_t *idx, size_t nf, uint8_t *res, floe_errinfo *err)
{
    const group_round *r = (const group_round *)ctx;
    gpu_table *t = r->t;
    for (size_t k = 0; k < nf; k++)
        r->redo[k] = r->keys[idx[k]];
    floe_status st = FLOE_OK;
    cudaError_t e = cudaMemcpyAsync(t->gs.in.d, r->redo, nf * 8, cudaMemcpyHostToDevice, t->ks);
    if (e == cudaSuccess && (st = run_op(t, r->op, t->gs.in.d, nf, r->c->res.d, err)) == FLOE_OK) {
        e = cudaMemcpyAsync(r->redo, r->c->res.d, nf, cudaMemcpyDeviceToHost, t->ks);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(t->ks);
    }
    if (st == FLOE_OK && e != cudaSuccess)
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "retrying FULL keys: %s", cuda_msg(e));
    if (st == FLOE_OK) {
        const uint8_t *got = (const uint8_t *)r->redo;
        for (size_t k = 0; k < nf; k++)
            res[idx[k]] = got[k];
    }
    return st;
}

/* Keys of an insert that came back FULL, or skipped behind a FULL one:
 * grown and retried (retry_after_growth, as retire's grow_and_retry does);
 * tally counted again. */
static floe_status retry_full(lane *L, group_chunk *c, floe_op op, size_t m, unsigned long long *tally,
                              floe_errinfo *err)
{
    gpu_table *t = L->t;
    group_stage *s = &t->gs;
    uint64_t *keys = (uint64_t *)malloc(m * 8), *redo = (uint64_t *)malloc(m * 8);
    uint8_t *res = (uint8_t *)malloc(m);
    uint32_t *idx = (uint32_t *)malloc(m * sizeof *idx);
    floe_status st = FLOE_OK;
    if (!keys || !redo || !res || !idx) {
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory retrying FULL keys");
        goto out;
    }
    exclusive_begin(L);
    pthread_mutex_lock(&t->klock);
    {
        cudaError_t e = cudaMemcpyAsync(keys, s->in.d, m * 8, cudaMemcpyDeviceToHost, t->ks);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(res, c->res.d, m, cudaMemcpyDeviceToHost, t->ks);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(t->ks);
        if (e != cudaSuccess)
            st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "retrying FULL keys: %s", cuda_msg(e));
    }
    if (st == FLOE_OK) {
        group_round r = {t, c, op, keys, redo};
        st = retry_after_growth(L, res, idx, m, false, group_retry, &r, err);
    }
    if (st == FLOE_OK) { /* the answers where step 3 reads them, and counted */
        cudaError_t e = cudaMemcpyAsync(c->res.d, res, m, cudaMemcpyHostToDevice, t->ks);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(t->ks);
        if (e != cudaSuccess)
            st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "retrying FULL keys: %s", cuda_msg(e));
        memset(tally, 0, 6 * sizeof *tally);
        for (size_t j = 0; j < m; j++)
            tally[res[j] < 5 ? res[j] : 5]++;
    }
    pthread_mutex_unlock(&t->klock);
    exclusive_end(L);
out:
    free(keys);
    free(redo);
    free(res);
    free(idx);
    return st;
}

/* The batches queued behind b that may run with it: of these, doing what b
 * does, sorted already (their chunks' counts ready), keys of the right
 * width, and with b's under GROUP_MERGE_KEYS together; into run[1..],
 * their sets into rc[1..] (each noted in its group's slot for the others),
 * and how many in all, b's included. */
static unsigned merge_candidates(lane *L, unsigned me, floe_batch **run, group_chunk **rc)
{
    gpu_table *t = L->t;
    group_stage *s = &t->gs;
    const floe_batch *b = run[0];
    size_t keys = b->n;
    unsigned k = 1;
    pthread_mutex_lock(&t->lock);
    const queue_link *l = L->q.head;
    pthread_mutex_unlock(&t->lock);
    /* the links ahead of the head stay as they are: only this worker pops them */
    while (l && k < GROUP_MERGE) {
        floe_batch *next = FLOE_BATCH_OF(l);
        if (!next->group || next->op != b->op || next->status != FLOE_OK || keys + next->n > GROUP_MERGE_KEYS ||
            !set_of(s, next))
            break;
        floe_status st;
        floe_errinfo err;
        group_chunk *c = sorted_chunk(t, next, &st, &err);
        if (st != FLOE_OK || too_wide(t, c))
            break; /* it runs alone, and its meeting tells */
        next->group->slot[me] = c;
        run[k] = next;
        rc[k++] = c;
        keys += next->n;
        pthread_mutex_lock(&t->lock);
        l = l->next;
        pthread_mutex_unlock(&t->lock);
    }
    return k;
}

/* Where part q's answers to chunk `me` of run[j] start in its res: after
 * its keys of the run's batches before j, and of chunks before me in j. */
static size_t answers_at(floe_batch *const *run, unsigned j, unsigned me, unsigned q)
{
    size_t at = 0;
    for (unsigned i = 0; i <= j; i++) {
        const floe_group *g = run[i]->group;
        for (unsigned d = 0; d < (i < j ? g->parts : me); d++)
            at += chunk_of(g, d)->cnt[q];
    }
    return at;
}

/* Step 2: this part's keys of every chunk of the run's k batches, in the
 * batches' order, run on its table into the res of the run's first set.
 * Meanwhile the previous run is answered (group_finish) and step 1 of the
 * next batches enqueued (sort_ahead), in that order: the sets the next take
 * are the previous run's. */
static floe_status run_part(lane *L, floe_batch *const *run, group_chunk *const *rc, unsigned k, unsigned me,
                            floe_errinfo *err)
{
    gpu_table *t = L->t;
    group_stage *s = &t->gs;
    const unsigned P = run[0]->group->parts;
    const int dev = t->be->device;
    const floe_op op = run[0]->op;
    group_chunk *c = rc[0];
    size_t m = 0, most = 0;
    for (unsigned j = 0; j < k; j++) {
        for (unsigned d = 0; d < P; d++)
            m += chunk_of(run[j]->group, d)->cnt[me];
        most = run[j]->n > most ? run[j]->n : most;
    }
    if (floe_op_has(op, FLOE_OPF_STORES))
        grow_if_due(L, m); /* finishes the previous run first */
    unsigned long long *tally = c->meta.h + META_PART_TALLY;
    memset(tally, 0, 6 * sizeof *tally);
    if (most > s->sres.cap)
        group_finish(L); /* the buffers its answers pass through are about to move */
    floe_status st = reserve_part(s, c, m, most, err);
    if (st != FLOE_OK) {
        group_finish(L);
        return st;
    }
    pthread_mutex_lock(&t->klock);
    cudaError_t e = cudaSuccess;
    size_t in = 0;
    for (unsigned j = 0; j < k && e == cudaSuccess; j++)
        for (unsigned d = 0; d < P && e == cudaSuccess; d++) {
            const floe_group *g = run[j]->group;
            const group_chunk *o = chunk_of(g, d);
            size_t at = 0; /* chunk d's keys of the parts before this one */
            for (unsigned q = 0; q < me; q++)
                at += o->cnt[q];
            if (o->cnt[me])
                e = cudaMemcpyPeerAsync(s->in.d + in, dev, o->sk.d + at, device_of(g, d), o->cnt[me] * 8, t->ks);
            in += o->cnt[me];
        }
    if (e == cudaSuccess && m) {
        gpu_iceberg_lane(t->ice, L->index);
        st = run_op(t, op, s->in.d, m, c->res.d, err);
        if (st == FLOE_OK) {
            k_tally<<<blocks_for(m), GROUP_BLOCK, 0, t->ks>>>(c->res.d, m, c->meta.d + META_PART_TALLY);
            e = cudaGetLastError();
        }
        if (e == cudaSuccess && st == FLOE_OK)
            e = cudaMemcpyAsync(tally, c->meta.d + META_PART_TALLY, 6 * sizeof *tally, cudaMemcpyDeviceToHost, t->ks);
    }
    pthread_mutex_unlock(&t->klock);
    group_finish(L);
    sort_ahead(L);
    if (e == cudaSuccess && st == FLOE_OK)
        e = cudaStreamSynchronize(t->ks);
    if (e != cudaSuccess)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "a batch on the GPU: %s", cuda_msg(e));
    if (st != FLOE_OK)
        return st;
    if (floe_op_has(op, FLOE_OPF_STORES) && t->base.spec.grow && tally[FLOE_FULL] + tally[5] > 0)
        st = retry_full(L, c, op, m, tally, err);
    if (st == FLOE_OK) {
        pthread_mutex_lock(&t->klock);
        relaxed_set(&t->used, t->used + tally[FLOE_INSERTED]);
        relaxed_set(&t->tombstones, t->tombstones + tally[FLOE_ERASED]);
        pthread_mutex_unlock(&t->klock);
    }
    return st;
}

/* Step 3, enqueued on the answers' stream: the answers to chunk `me` of
 * run[j] from every part (each part's in the res of its set of run[0]),
 * in the chunk's order, out to the caller, and counted. */
static floe_status answer_chunk(gpu_table *t, floe_batch *const *run, group_chunk *const *rc, unsigned j, unsigned me,
                                floe_errinfo *err)
{
    group_stage *s = &t->gs;
    const floe_group *g0 = run[0]->group;
    floe_batch *b = run[j];
    group_chunk *c = rc[j];
    const unsigned P = g0->parts;
    const int dev = t->be->device;
    const size_t m = b->n;
    unsigned long long *tally = c->meta.h + META_CHUNK_TALLY;
    cudaError_t e = cudaSuccess;
    size_t at = 0;
    for (unsigned q = 0; q < P && e == cudaSuccess; q++) {
        if (c->cnt[q])
            e = cudaMemcpyPeerAsync(s->sres.d + at, dev, chunk_of(g0, q)->res.d + answers_at(run, j, me, q),
                                    device_of(g0, q), c->cnt[q], s->as);
        at += c->cnt[q];
    }
    if (e == cudaSuccess) {
        k_unscatter<<<blocks_for(m), GROUP_BLOCK, 0, s->as>>>(s->sres.d, c->perm.d, m, s->cres.d);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(b->results, s->cres.d, m, cudaMemcpyDeviceToHost, s->as);
    if (e == cudaSuccess) {
        k_tally<<<blocks_for(m), GROUP_BLOCK, 0, s->as>>>(s->cres.d, m, c->meta.d + META_CHUNK_TALLY);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(tally, c->meta.d + META_CHUNK_TALLY, 6 * sizeof *tally, cudaMemcpyDeviceToHost, s->as);
    if (e != cudaSuccess)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "answers on the GPU: %s", cuda_msg(e));
    return FLOE_OK;
}

/* The time from *t0 to `to` to stage k of lane L's timers (klock for them), and *t0 moved on to it. */
static void timed_to(lane *L, int k, size_t keys, uint64_t *t0, uint64_t to)
{
    pthread_mutex_lock(&L->t->klock);
    floe_stage_add(&L->stage[k], keys, to - *t0);
    pthread_mutex_unlock(&L->t->klock);
    *t0 = to;
}

static void timed(lane *L, int k, size_t keys, uint64_t *t0)
{
    timed_to(L, k, keys, t0, floe_now_ns());
}

/* Completes the batches whose answers are on their way back, if any, in order. */
void group_finish(lane *L)
{
    gpu_table *t = L->t;
    group_stage *s = &t->gs;
    if (!s->npending)
        return;
    uint64_t t0 = floe_now_ns();
    const cudaError_t e = cudaStreamSynchronize(s->as);
    const unsigned n = s->npending;
    s->npending = 0;
    for (unsigned i = 0; i < n; i++) {
        group_chunk *c = s->pending[i];
        floe_batch *b = (floe_batch *)c->b;
        if (e != cudaSuccess) {
            b->status = floe_errinfo_set(&b->error, FLOE_ERR_INTERNAL, "answers on the GPU: %s", cuda_msg(e));
        } else {
            const unsigned long long *tally = c->meta.h + META_CHUNK_TALLY;
            b->counts.absent = tally[FLOE_ABSENT];
            b->counts.present = tally[FLOE_PRESENT];
            b->counts.inserted = tally[FLOE_INSERTED];
            b->counts.full = tally[FLOE_FULL];
            b->counts.erased = tally[FLOE_ERASED];
        }
        c->b = NULL;
        timed(L, FLOE_STAGE_D2H, b->n, &t0);
        complete(t, b);
    }
}

void run_group(lane *L, floe_batch *b)
{
    gpu_table *t = L->t;
    floe_group *g = b->group;
    const unsigned P = g->parts;
    const int dev = t->be->device;
    unsigned me = 0;
    while (me < P && g->part[me] != &t->base)
        me++;
    assert(me < P);
    uint64_t t0 = floe_now_ns();
    floe_errinfo err = b->error;
    floe_status st = b->status; /* refused at the door: it still meets the others, which then give up too */
    if (st == FLOE_OK && device_failed(dev))
        st = unavailable(dev, &err);
    for (unsigned q = 0; q < P && st == FLOE_OK; q++)
        st = peer_open(dev, device_of(g, q), &err);
    floe_batch *run[GROUP_MERGE] = {b};
    group_chunk *rc[GROUP_MERGE] = {NULL};
    if (st == FLOE_OK)
        rc[0] = sorted_chunk(t, b, &st, &err);
    if (st == FLOE_OK && too_wide(t, rc[0])) { /* nothing runs: the caller names the key */
        pthread_mutex_lock(&g->lock);
        g->too_wide = true;
        pthread_mutex_unlock(&g->lock);
        st = floe_errinfo_set(&err, FLOE_ERR_INVALID, "a key wider than %u bits", (unsigned)t->base.spec.key_bits);
    }
    g->slot[me] = rc[0]; /* read by the others after the meeting */
    unsigned k = st == FLOE_OK ? merge_candidates(L, me, run, rc) : 1;
    const uint64_t sorted_at = floe_now_ns();
    st = floe_group_meet_least(g, &k, st, &err, &err);
    pthread_mutex_lock(&t->lock); /* the run's other batches leave the queue: they are at its head, in order */
    for (unsigned j = 1; j < k; j++) {
        floe_batch *next = FLOE_BATCH_OF(queue_pop(&L->q));
        assert(next == run[j]);
        (void)next;
        memset(&run[j]->counts, 0, sizeof run[j]->counts);
    }
    pthread_mutex_unlock(&t->lock);
    size_t keys = 0;
    for (unsigned j = 0; j < k; j++)
        keys += run[j]->n;
    timed_to(L, FLOE_STAGE_H2D, keys, &t0, sorted_at); /* the meeting's wait counts as the kernels' */
    if (st == FLOE_OK)
        st = run_part(L, run, rc, k, me, &err);
    group_finish(L); /* where run_part did not */
    timed(L, FLOE_STAGE_KERNEL, keys, &t0);
    st = floe_group_meet(g, st, &err, &err);
    for (unsigned j = 0; j < k; j++) {
        floe_batch *bj = run[j];
        bj->generation = t->generation;
        floe_errinfo ej = err;
        const floe_status sj = st == FLOE_OK ? answer_chunk(t, run, rc, j, me, &ej) : st;
        if (sj == FLOE_OK) { /* answered by group_finish: while the next run runs, or when nothing else is left */
            t->gs.pending[t->gs.npending++] = rc[j];
            continue;
        }
        group_finish(L); /* the batches before it first */
        if (rc[j])
            rc[j]->b = NULL;
        bj->status = sj;
        bj->error = ej;
        complete(t, bj);
    }
}
