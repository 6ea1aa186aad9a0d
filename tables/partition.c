/*
 * partition.c - tables in parts over inner backends (see partition.h).
 *
 * Placement: a table is made in the parts its spec asks (spec.parts), else
 * the backend's (parts), else whole on the inner backend with the most free
 * memory (floe_backend_memory; the fewest parts placed breaks ties), and in
 * parts over every inner backend only when it fits on none whole.  Parts go
 * to the inner backends in that order too.
 *
 * A submitted batch is queued on its table and split by a task of the
 * backend's pool (floe_pool_post): several batches are split at once, each
 * by one thread, which is what scales (a batch cut across many threads
 * paid the threads' wake-ups for every batch).  A split copies each key
 * into its part's region of a buffer of the first inner backend's host
 * memory (pinned for a GPU, and kept for reuse: hostmem.h), in one pass:
 * a region holds the part's expected share and six standard deviations
 * more, and only a batch that overflows one (keys chosen to land in one
 * part) is counted first.  Each part's device copies its share straight
 * from the buffer and writes its answers straight into it.  The splits
 * hand their sub-batches (one per part that has keys, in the batch's lane)
 * to the parts in submission order, each waiting for its turn.  The split
 * notes each key's part (a byte), and when the last part has answered, one
 * pass joins every part's answers into the caller's arrays by those bytes
 * (posted to the pool, a small batch on the part's thread) and adds up the
 * counts; whoever completes the oldest split delivers it and every
 * complete split behind it, so callers see submission order.
 *
 * A batch the parts' backend can split on its devices (goes_whole: a
 * large SET batch in pinned memory, GPUs that reach each other) is not
 * split here: each part gets its chunk of the batch in place (split_group,
 * group.h), and its devices put every answer where it goes; merge only
 * adds up the counts.
 *
 * floe_table_submit has checked the batch against the whole table's spec
 * (the door, backend.h): a refused one completes through part 0 in its
 * place in the order, and the parts' sub-batches go in marked
 * FLOE_BATCH_CHECKED, so that their keys are not scanned a second time.
 *
 * A TREE insert of states by their parents becomes one of whole vectors in
 * its split, in its turn (states_to_vectors): a state's part is its whole vector's,
 * which its parent's part need not hold.  The table's generation, which
 * such parents must be of, is the sum of its parts' (as STATS says), and
 * the answers of INSERT, FIND and GET carry it.
 */
#define _GNU_SOURCE
#include "partition.h"

#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <unistd.h>

#include "alloc.h"
#include "floe_wire.h"
#include "group.h"
#include "hostmem.h"
#include "pool.h"
#include "tablefile.h"
#include "tree.h"

#define JOIN_INLINE ((size_t)1 << 14) /* a batch's answers joined on its last part's thread, not posted to the pool */
/* Split buffers kept for reuse: pinned memory takes milliseconds to get,
 * and 64 batches of 4 Mi keys in flight need 4 GiB of them (kept 2 GiB:
 * a quarter of the speed, buffers coming and going); a sixteenth of the
 * host's memory, at least SPLIT_KEEP_DEVICE_MIN. */
#define SPLIT_KEEP_DEVICE_MIN ((size_t)1 << 30)
#define SPLIT_KEEP_HOST       ((size_t)64 << 20)
#define SPLIT_STREAM          ((size_t)1 << 16) /* keys of a batch split with streaming stores (x86-64) */

typedef struct part_backend {
    floe_backend base;
    floe_backend_ops ops;   /* the layer's functions under inner[0]'s name */
    floe_pool *pool;        /* splits batches and joins their answers (floe_pool_post) */
    hostmem *mem;           /* split buffers, of inner[0]'s host memory */
    unsigned ninner, parts; /* parts: of every table; 0: each table's own, or placed (see the top) */
    pthread_mutex_t place_lock;
    unsigned placed[FLOE_PARTS_MAX]; /* parts of live tables on each inner backend (under place_lock) */
    floe_backend *inner[FLOE_PARTS_MAX];
} part_backend;

typedef struct split split;

typedef struct part_table {
    floe_table base;
    part_backend *be;
    unsigned parts;
    floe_table *part[FLOE_PARTS_MAX];
    unsigned on[FLOE_PARTS_MAX]; /* each part's inner backend */
    /* submitted batches wait here for a split task (a submit only queues, as
     * the interface asks: a caller holding its own lock is not held up) */
    pthread_mutex_t in_lock;
    pthread_cond_t turn_cv; /* under in_lock: handed moved on */
    queue in;               /* floe_batch.link */
    floe_pool_task drain; /* takes the head batch and splits it */
    bool drain_posted;    /* drain is queued or about to be (one at a time) */
    uint64_t submitted, taken, handed; /* batches queued, taken by a split, handed to the parts */
    /* completion */
    pthread_mutex_t lock;
    pthread_cond_t cv;
    queue splits; /* split.link, in submission order */
    bool delivering;
    split *spare; /* for a batch that arrives when no split can be allocated */
    bool spare_busy;
    floe_stage_time split_time, join_time; /* under lock */
    uint64_t gen[FLOE_PARTS_MAX]; /* each part's generation as its last INSERT, FIND or GET said (under lock) */
} part_table;

struct split {
    part_table *t;
    floe_batch *b;
    queue_link link;  /* in the table's splits */
    atomic_uint left; /* sub-batches not yet done */
    bool complete;
    bool is_spare;
    floe_status st; /* refused before any part saw it */
    floe_errinfo err;
    floe_batch one;   /* the sub-batch of a scan, of a refusal, or of a batch with no keys */
    floe_batch *subs; /* per part, for batches that fan out */
    unsigned scan_part;
    /* part p holds places [at[p], at[p] + cnt[p]), its keys in the caller's
     * order; the pid words hold the part of each of the caller's keys (pid_of) */
    size_t at[FLOE_PARTS_MAX], cnt[FLOE_PARTS_MAX];
    floe_pool_task join; /* the answers into the caller's order, posted to the pool */
    uint64_t *pid;
    uint64_t *keys; /* by place (GET: the parts' own ids) */
    uint64_t bits;  /* every key's bits, or'ed */
    void *vin;      /* MAP insert values */
    uint8_t *res;
    uint64_t *ids;
    void *vout;
    uint32_t *vec;    /* TREE vectors in, or GET's vectors out */
    void *mem;        /* all of the above (hostmem) */
    uint32_t *states; /* a TREE insert of states by their parents: their vectors, which b->vectors points to */
    floe_group *group; /* a batch the parts' devices split among themselves (split_group) */
};

static const floe_backend_ops part_ops;

static part_backend *backend_of(floe_backend *be)
{
    return (part_backend *)be;
}

unsigned floe_backend_parts(const floe_backend *be)
{
    if (be->ops->submit != part_ops.submit)
        return 1;
    return ((const part_backend *)be)->parts;
}

unsigned floe_backend_devices(const floe_backend *be)
{
    if (be->ops->submit != part_ops.submit)
        return 1;
    return ((const part_backend *)be)->ninner;
}

unsigned floe_table_parts(const floe_table *t)
{
    if (t->backend->ops->submit != part_ops.submit)
        return 1;
    return ((const part_table *)t)->parts;
}

/* ---- the spec of a part --------------------------------------------------------------------- */

/* A part's share of the capacity, with room for the hash's imbalance
 * (about sqrt of the share), so a table that fits whole fits in parts. */
static floe_spec part_spec(const floe_spec *whole, unsigned parts)
{
    floe_spec s = *whole;
    if (parts > 1) {
        const double share = ceil((double)whole->capacity / parts);
        double cap = share + 4.0 * sqrt(share) + 64.0;
        if (cap > (double)whole->capacity)
            cap = (double)whole->capacity;
        s.capacity = (uint64_t)cap;
        if (whole->memory)
            s.memory = whole->memory / parts;
    }
    return s;
}

/* ---- completion --------------------------------------------------------------------------- */

static void split_free(split *sp)
{
    part_table *t = sp->t;
    if (sp->states) { /* the caller's batch as it came: states by their parents */
        sp->b->vectors = NULL;
        free(sp->states);
    }
    free(sp->subs);
    if (sp->group) {
        floe_group_destroy(sp->group);
        free(sp->group);
    }
    hostmem_put(t->be->mem, sp->mem);
    if (sp->is_spare) {
        pthread_mutex_lock(&t->lock);
        t->spare_busy = false;
        pthread_cond_broadcast(&t->cv);
        pthread_mutex_unlock(&t->lock);
    } else {
        free(sp);
    }
}

#define SPLIT_OF(l) QUEUE_ENTRY(l, split, link)

/* Marks sp complete and delivers the complete splits at the head, in
 * order; one thread delivers at a time. */
static void split_complete(split *sp)
{
    part_table *t = sp->t;
    pthread_mutex_lock(&t->lock);
    sp->complete = true;
    if (t->delivering) {
        pthread_mutex_unlock(&t->lock);
        return;
    }
    t->delivering = true;
    while (!queue_empty(&t->splits) && SPLIT_OF(t->splits.head)->complete) {
        split *h = SPLIT_OF(queue_pop(&t->splits));
        pthread_mutex_unlock(&t->lock);
        floe_batch *b = h->b;
        split_free(h);
        b->done(b);
        pthread_mutex_lock(&t->lock);
    }
    t->delivering = false;
    if (queue_empty(&t->splits))
        pthread_cond_broadcast(&t->cv); /* table_free may be waiting */
    pthread_mutex_unlock(&t->lock);
}

static void fail(floe_batch *b, floe_status st, const floe_errinfo *err)
{
    if (b->status != FLOE_OK)
        return; /* the first part's error stands */
    b->status = st;
    b->error = *err;
}

static void add_stage_times(floe_stage_time *to, const floe_stage_time *from)
{
    for (int i = 0; i < FLOE_STAGES; i++) {
        to[i].count += from[i].count;
        to[i].keys += from[i].keys;
        to[i].nanos += from[i].nanos;
    }
}

static void merge_stats(split *sp)
{
    part_table *t = sp->t;
    floe_table_stats *st = &sp->b->stats;
    const floe_table_stats *p0 = &sp->subs[0].stats;
    double stored = 0; /* TREE: compression x vector bytes, summed */
    memset(st, 0, sizeof *st);
    st->spec = t->base.spec;
    memcpy(st->backend, p0->backend, sizeof st->backend);
    st->device = p0->device;
    st->parts = t->parts;
    st->frozen = true;
    for (unsigned p = 0; p < t->parts; p++) {
        const floe_table_stats *s = &sp->subs[p].stats;
        st->frozen &= s->frozen; /* a freeze that failed in a part leaves the table unfrozen: freeze it again */
        st->keys += s->keys;
        st->tombstones += s->tombstones;
        st->slots += s->slots;
        st->memory_bytes += s->memory_bytes;
        st->generation += s->generation;
        st->nodes += s->nodes;
        st->node_slots += s->node_slots;
        st->orphan_nodes += s->orphan_nodes;
        stored += s->compression * (double)s->keys;
        if (s->device != st->device)
            st->device = -1;
        st->used_bytes += s->used_bytes;
        for (int l = 0; l < FLOE_LEVELS; l++) {
            st->level[l].slots += s->level[l].slots;
            st->level[l].used += s->level[l].used;
            st->level[l].row_bits = s->level[l].row_bits;
            st->level[l].buckets_log2 = s->level[l].buckets_log2;
        }
        add_stage_times(st->stage, s->stage);
        st->part[p] = (floe_part_stats){s->keys, s->slots, s->memory_bytes, s->generation, s->device};
    }
    pthread_mutex_lock(&t->lock);
    st->stage[FLOE_STAGE_SPLIT] = t->split_time;
    st->stage[FLOE_STAGE_JOIN] = t->join_time;
    pthread_mutex_unlock(&t->lock);
    st->fill = st->slots ? (double)(st->keys + st->tombstones) / (double)st->slots : 0.0;
    st->bytes_per_key = st->keys ? (double)st->memory_bytes / (double)st->keys : 0.0;
    st->node_fill = st->node_slots ? (double)st->nodes / (double)st->node_slots : 0.0;
    st->compression = st->keys ? stored / (double)st->keys : 0.0;
    for (int l = 0; l < FLOE_LEVELS; l++)
        st->level[l].fill = st->level[l].slots ? (double)st->level[l].used / (double)st->level[l].slots : 0.0;
}

/* The parts' images, each marked with its place, chained in part order. */
static floe_file_image *chain_images(split *sp)
{
    part_table *t = sp->t;
    floe_file_image *first = NULL, **link = &first;
    for (unsigned p = 0; p < t->parts; p++) {
        floe_file_image *im = sp->subs[p].image;
        sp->subs[p].image = NULL;
        im->h.parts = t->parts;
        im->h.part = p;
        im->h.whole_capacity = t->base.spec.capacity;
        im->h.whole_memory = t->base.spec.memory;
        *link = im;
        link = &im->next_part;
    }
    return first;
}

/* A key's part is noted in 2^PID_LOG(P) bits (1, 2 or 4) of the pid words:
 * less of the memory traffic that bounds a table in parts than a byte. */
#define PID_LOG(P)  ((P) <= 2 ? 0u : (P) <= 4 ? 1u : 2u) /* log2 of the bits per key */
#define PID_PER(lg) (64u >> (lg))                       /* keys per word */

static inline unsigned pid_of(const uint64_t *pid, size_t i, unsigned lg)
{
    return (unsigned)(pid[i >> (6 - lg)] >> ((i & (PID_PER(lg) - 1)) << lg)) & ((1u << (1u << lg)) - 1);
}

/* Key k to place *at: a large batch's with a streaming store (x86-64).  A
 * large batch's keys go past the caches to memory, where the device reads
 * them: streaming stores skip reading each line first (host memory
 * bandwidth bounds a table in parts). */
static inline void put_key(uint64_t *at, uint64_t k, bool stream)
{
#if defined(__x86_64__)
    if (stream) {
        _mm_stream_si64((long long *)at, (long long)k);
        return;
    }
#else
    (void)stream;
#endif
    *at = k;
}

static inline void stream_done(bool stream)
{
#if defined(__x86_64__)
    if (stream)
        _mm_sfence(); /* the streamed keys visible before the device is told to read them */
#else
    (void)stream;
#endif
}

/* m answers (a multiple of 16 when streamed, to a 16-byte boundary) to `to`. */
static inline void put_answers(uint8_t *to, const uint8_t *from, size_t m, bool stream)
{
#if defined(__x86_64__)
    if (stream) {
        for (size_t k = 0; k < m; k += 16)
            _mm_stream_si128((__m128i *)(void *)(to + k), _mm_load_si128((const __m128i *)(const void *)(from + k)));
        return;
    }
#else
    (void)stream;
#endif
    memcpy(to, from, m);
}

/* The parts' answers into the caller's order, in one pass over the batch
 * (each part's joined as it finished wrote the same cache lines from
 * several threads at once); a part that failed leaves its keys' answers
 * as they were. */
static void join_all(split *sp)
{
    part_table *t = sp->t;
    floe_batch *b = sp->b;
    const unsigned P = t->parts, lg = PID_LOG(P), per = PID_PER(lg);
    const uint32_t vb = floe_spec_has_values(&t->base.spec) ? t->base.spec.value_bytes : 0;
    const size_t W = t->base.spec.words;
    const bool ids = floe_batch_wants_ids(b);
    const bool vals = vb && (b->flags & FLOE_BATCH_WANT_VALUES) && floe_op_has(b->op, FLOE_OPF_VALUES_OUT);
    const bool get = floe_op_has(b->op, FLOE_OPF_VECTORS_OUT);
    const uint64_t *pid = sp->pid;
    const size_t n = b->n;
    const uint64_t t0 = floe_now_ns();
    bool ok[FLOE_PARTS_MAX], all_ok = true;
    for (unsigned p = 0; p < P; p++)
        all_ok &= ok[p] = !sp->cnt[p] || sp->subs[p].status == FLOE_OK;
    size_t next[FLOE_PARTS_MAX];
    for (unsigned p = 0; p < P; p++)
        next[p] = sp->at[p];
    if (all_ok && !ids && !vals && !get) { /* the answers alone: the common case, kept tight */
        const unsigned mask = (1u << (1u << lg)) - 1;
        /* a large batch's answers streamed out, 16 at a time (see put_key) */
        const bool stream = n >= SPLIT_STREAM && per % 16 == 0 && ((uintptr_t)b->results & 15) == 0;
        _Alignas(16) uint8_t out[64];
        for (size_t i = 0; i < n; i += per) {
            uint64_t word = pid[i >> (6 - lg)];
            const size_t m = n - i < per ? n - i : per;
            if (lg == 0) { /* two parts: each one's next place in a register */
                size_t j0 = next[0], j1 = next[1];
                for (size_t k = 0; k < m; k++, word >>= 1) {
                    const size_t q = word & 1;
                    out[k] = sp->res[q ? j1 : j0];
                    j0 += q ^ 1;
                    j1 += q;
                }
                next[0] = j0;
                next[1] = j1;
            } else {
                for (size_t k = 0; k < m; k++, word >>= (1u << lg))
                    out[k] = sp->res[next[word & mask]++];
            }
            put_answers(b->results + i, out, m, stream && m == per);
        }
        stream_done(stream);
    } else {
        for (size_t i = 0; i < n; i++) {
            const unsigned p = pid_of(pid, i, lg);
            const size_t j = next[p]++;
            if (!ok[p])
                continue;
            b->results[i] = sp->res[j];
            if (ids)
                b->ids[i] = sp->ids[j] == FLOE_NO_ID ? FLOE_NO_ID : sp->ids[j] * P + p;
            if (vals && vb == 8)
                ((uint64_t *)b->values_out)[i] = ((const uint64_t *)sp->vout)[j];
            else if (vals)
                ((uint32_t *)b->values_out)[i] = ((const uint32_t *)sp->vout)[j];
            if (get)
                memcpy(b->vectors_out + i * W, sp->vec + j * W, W * 4);
        }
    }
    const uint64_t ns = floe_now_ns() - t0;
    pthread_mutex_lock(&t->lock);
    floe_stage_add(&t->join_time, n, ns);
    pthread_mutex_unlock(&t->lock);
}

/* Part p's generation, as an answer of it says (INSERT, FIND, GET). */
static void note_generation(part_table *t, unsigned p, uint64_t generation)
{
    pthread_mutex_lock(&t->lock);
    t->gen[p] = generation;
    pthread_mutex_unlock(&t->lock);
}

/* The table's generation: the sum of its parts' (under lock). */
static uint64_t generation_locked(const part_table *t)
{
    uint64_t g = 0;
    for (unsigned p = 0; p < t->parts; p++)
        g += t->gen[p];
    return g;
}

/* Whether op's answers are of the table's generation (they give ids, or
 * take them), which a table in parts sums from its parts'. */
static bool of_generation(floe_op op)
{
    return floe_op_has(op, FLOE_OPF_IDS_OUT) || floe_op_def(op)->shape == FLOE_SHAPE_IDS;
}

/* Every part has answered: the caller's batch from theirs. */
static void merge(split *sp)
{
    part_table *t = sp->t;
    floe_batch *b = sp->b;
    for (unsigned p = 0; p < t->parts; p++) {
        const floe_batch *s = &sp->subs[p];
        if (s->done && s->status != FLOE_OK)
            fail(b, s->status, &s->error);
        b->counts.inserted += s->counts.inserted;
        b->counts.present += s->counts.present;
        b->counts.absent += s->counts.absent;
        b->counts.full += s->counts.full;
        b->counts.erased += s->counts.erased;
    }
    if (sp->group && sp->group->too_wide) { /* a device found a key too wide, and nothing ran: the door's words */
        b->status = floe_batch_check(&t->base.spec, b, NULL, &b->error);
        if (b->status == FLOE_OK)
            b->status = floe_errinfo_set(&b->error, FLOE_ERR_INTERNAL, "a key too wide, unnamed");
    }
    if (b->op == FLOE_OP_STATS && b->status == FLOE_OK) {
        merge_stats(sp);
    } else if ((b->op == FLOE_OP_COPY || b->op == FLOE_OP_SAVE) && b->status == FLOE_OK) {
        floe_file_image *im = chain_images(sp);
        if (b->op == FLOE_OP_COPY) {
            b->image = im;
        } else {
            b->status = floe_file_image_save(b->path, im, &b->error);
            floe_file_image_free(im);
        }
    } else if (of_generation(b->op)) { /* each part joined its answers when it finished */
        pthread_mutex_lock(&t->lock);
        b->generation = generation_locked(t);
        pthread_mutex_unlock(&t->lock);
    }
    for (unsigned p = 0; p < t->parts; p++) /* images of parts whose neighbours failed */
        floe_file_image_free(sp->subs[p].image);
}

static void scan_done(floe_batch *s);

static void join_posted(floe_pool_task *task)
{
    split *sp = (split *)((char *)task - offsetof(split, join));
    join_all(sp);
    merge(sp);
    split_complete(sp);
}

/* One more part has answered; the last joins their answers (a large batch
 * on the pool, off the part's thread, which has its next batch to run)
 * and completes sp. */
static void sub_finished(split *sp)
{
    if (atomic_fetch_sub(&sp->left, 1) != 1)
        return;
    if (sp->pid) { /* a keyed batch (split_keys): its answers to join */
        if (sp->b->n >= JOIN_INLINE) {
            floe_pool_post(sp->t->be->pool, &sp->join);
            return;
        }
        join_all(sp);
    }
    merge(sp);
    split_complete(sp);
}

static void sub_done(floe_batch *s)
{
    split *sp = s->user;
    const floe_op op = sp->b->op;
    const unsigned p = (unsigned)(s - sp->subs);
    if (s->status == FLOE_OK && of_generation(op))
        note_generation(sp->t, p, s->generation);
    sub_finished(sp);
}

/* A scan's sub-batch into part p for what is left of the caller's page. */
static void scan_into(split *sp, unsigned p, const floe_scan_pos *from)
{
    part_table *t = sp->t;
    floe_batch *b = sp->b, *s = &sp->one;
    const size_t got = b->scan_n;
    const uint32_t vb = floe_spec_has_values(&t->base.spec) ? t->base.spec.value_bytes : 0;
    memset(s, 0, sizeof *s);
    sp->scan_part = p;
    s->op = FLOE_OP_SCAN;
    s->flags = b->flags | FLOE_BATCH_CHECKED;
    s->lane = b->lane;
    if (from && from->position) { /* local position 0 is the part's start */
        s->cursor = *from;
        s->cursor_set = 1;
    }
    s->limit = b->limit - got;
    s->scan_keys = b->scan_keys ? b->scan_keys + got : NULL;
    s->scan_values = b->scan_values ? (unsigned char *)b->scan_values + got * vb : NULL;
    s->scan_vectors = b->scan_vectors ? b->scan_vectors + got * t->base.spec.words : NULL;
    s->done = scan_done;
    s->user = sp;
    floe_table_submit(t->part[p], s);
}

/* A scan's part has answered: ids and cursor in the caller's terms; a part
 * walked to its end with room left on the page goes on into the next one. */
static void scan_done(floe_batch *s)
{
    split *sp = s->user;
    part_table *t = sp->t;
    floe_batch *b = sp->b;
    const unsigned p = sp->scan_part;
    if (s->status != FLOE_OK) {
        fail(b, s->status, &s->error);
        split_complete(sp);
        return;
    }
    if (t->base.spec.kind == FLOE_KIND_TREE)
        for (size_t i = 0; i < s->scan_n; i++)
            s->scan_keys[i] = s->scan_keys[i] * t->parts + p;
    b->scan_n += s->scan_n;
    if (s->scan_done && p + 1 < t->parts) {
        if (b->scan_n < b->limit) {
            scan_into(sp, p + 1, NULL);
            return;
        }
        b->next = (floe_scan_pos){p + 1, 0}; /* the next part's start */
        b->scan_done = 0;
    } else {
        b->next = (floe_scan_pos){s->next.position * t->parts + p, s->next.generation};
        b->scan_done = s->scan_done;
    }
    split_complete(sp);
}

/* A refused batch, or one with nothing for any part, completes through its
 * own part-0 sub-batch so that it keeps its place in the order. */
static void carrier_done(floe_batch *s)
{
    split *sp = s->user;
    if (sp->st != FLOE_OK)
        fail(sp->b, sp->st, &sp->err);
    else if (s->status != FLOE_OK)
        fail(sp->b, s->status, &s->error);
    split_complete(sp);
}

/* ---- splitting ------------------------------------------------------------------------------- */

static size_t align8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/* Places a part's region holds: its expected share of n keys and six
 * standard deviations more, so that random keys overflow it about once in
 * 10^9 batches (a small batch: room for all of them). */
static size_t region_of(size_t n, unsigned parts)
{
    if (n <= 1024)
        return n;
    const double share = ceil((double)n / parts);
    const double cap = share + 6.0 * sqrt(share) + 64.0;
    return cap < (double)n ? (size_t)cap : n;
}

/* The part of the caller's key or vector i. */
static inline unsigned part_of(const part_table *t, const floe_batch *b, size_t i)
{
    if (floe_op_def(b->op)->shape == FLOE_SHAPE_IDS) /* an id names its part */
        return (unsigned)(b->keys[i] % t->parts);
    if (t->base.spec.kind == FLOE_KIND_TREE)
        return floe_part_of(floe_part_hash_vector(b->vectors + i * t->base.spec.words, t->base.spec.words), t->parts);
    return floe_part_of(floe_part_hash_key(b->keys[i]), t->parts);
}

/* Each key (value, vector) to the next place of its part's region, which
 * ends at end[p], and its part into sp->pid; sp->cnt[p] counts them,
 * sp->bits has every key's bits (for the door's check of their widths:
 * floe_table.checks_widths).  False when a region is full. */
static bool scatter(split *sp, const size_t *end)
{
    const part_table *t = sp->t;
    const floe_batch *b = sp->b;
    const unsigned P = t->parts, lg = PID_LOG(P), per = PID_PER(lg);
    const size_t n = b->n;
    size_t next[FLOE_PARTS_MAX];
    for (unsigned p = 0; p < P; p++)
        next[p] = sp->at[p];
    const uint32_t vb = sp->vin ? t->base.spec.value_bytes : 0;
    const size_t W = t->base.spec.words;
    const bool ids_in = floe_op_def(b->op)->shape == FLOE_SHAPE_IDS;
    const bool vectors = floe_op_takes_vectors(b->op, (unsigned)W);
    uint64_t bits = 0;
    bool fits = true;
    /* a word of parts at a time: per keys, then one store */
    if (!vectors && !vb && !ids_in) { /* keys alone: the common case, kept tight */
        const bool stream = n >= SPLIT_STREAM;
        for (size_t i0 = 0; i0 < n && fits; i0 += per) {
            const size_t m = n - i0 < per ? n - i0 : per;
            uint64_t word = 0;
            for (size_t k = 0; k < m; k++) {
                const uint64_t key = b->keys[i0 + k];
                const unsigned p = floe_part_of(floe_part_hash_key(key), P);
                const size_t j = next[p];
                if (j == end[p]) {
                    fits = false;
                    break;
                }
                next[p] = j + 1;
                put_key(&sp->keys[j], key, stream);
                bits |= key;
                word |= (uint64_t)p << (k << lg);
            }
            sp->pid[i0 >> (6 - lg)] = word;
        }
        stream_done(stream);
    } else {
        for (size_t i0 = 0; i0 < n && fits; i0 += per) {
            const size_t m = n - i0 < per ? n - i0 : per;
            uint64_t word = 0;
            for (size_t k = 0; k < m; k++) {
                const size_t i = i0 + k;
                const unsigned p = part_of(t, b, i);
                const size_t j = next[p];
                if (j == end[p]) {
                    fits = false;
                    break;
                }
                next[p] = j + 1;
                word |= (uint64_t)p << (k << lg);
                if (vectors)
                    memcpy(sp->vec + j * W, b->vectors + i * W, W * 4);
                else if (ids_in)
                    sp->keys[j] = b->keys[i] / P; /* the part's own id */
                else
                    bits |= sp->keys[j] = b->keys[i];
                if (vb == 8)
                    ((uint64_t *)sp->vin)[j] = ((const uint64_t *)b->values)[i];
                else if (vb == 4)
                    ((uint32_t *)sp->vin)[j] = ((const uint32_t *)b->values)[i];
            }
            sp->pid[i0 >> (6 - lg)] = word;
        }
    }
    if (!fits)
        return false;
    for (unsigned p = 0; p < P; p++)
        sp->cnt[p] = next[p] - sp->at[p];
    sp->bits = bits;
    return true;
}

/* Cuts a keyed batch (INSERT, FIND, ERASE, GET) into its parts' regions,
 * each part's keys in the caller's order, and fills sp->subs;
 * FLOE_ERR_INTERNAL when out of memory. */
static floe_status split_keys(split *sp, floe_errinfo *err)
{
    part_table *t = sp->t;
    floe_batch *b = sp->b;
    const size_t n = b->n;
    const unsigned P = t->parts;
    const bool is_tree = t->base.spec.kind == FLOE_KIND_TREE;
    const bool get = floe_op_has(b->op, FLOE_OPF_VECTORS_OUT);
    const uint32_t vb = floe_spec_has_values(&t->base.spec) ? t->base.spec.value_bytes : 0;
    const size_t wb = (size_t)t->base.spec.words * 4;
    const bool vals_in = vb && b->values && floe_op_has(b->op, FLOE_OPF_VALUES_IN);
    const bool ids = floe_batch_wants_ids(b);
    const bool vals_out = vb && (b->flags & FLOE_BATCH_WANT_VALUES) && floe_op_has(b->op, FLOE_OPF_VALUES_OUT);
    const bool vec_in = floe_op_takes_vectors(b->op, is_tree ? t->base.spec.words : 0);

    const size_t region = region_of(n, P), places = region * P;
    const size_t sz_pid = (n / PID_PER(PID_LOG(P)) + 1) * 8, sz_keys = vec_in ? 0 : places * 8;
    const size_t sz_vin = vals_in ? align8(places * vb) : 0, sz_res = align8(places);
    const size_t sz_ids = ids ? places * 8 : 0, sz_vout = vals_out ? align8(places * vb) : 0;
    const size_t sz_vec = vec_in || get ? align8(places * wb) : 0;
    unsigned char *m =
        hostmem_get(t->be->mem, sz_pid + sz_keys + sz_vin + sz_res + sz_ids + sz_vout + sz_vec + 8);
    sp->subs = floe_calloc(P, sizeof *sp->subs);
    if (!m || !sp->subs) {
        hostmem_put(t->be->mem, m);
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory splitting a batch of %zu keys", n);
    }
    sp->mem = m;
    sp->pid = (uint64_t *)m;
    m += sz_pid;
    sp->keys = sz_keys ? (uint64_t *)m : NULL;
    m += sz_keys;
    sp->vin = sz_vin ? m : NULL;
    m += sz_vin;
    sp->res = m;
    m += sz_res;
    sp->ids = sz_ids ? (uint64_t *)m : NULL;
    m += sz_ids;
    sp->vout = sz_vout ? m : NULL;
    m += sz_vout;
    sp->vec = sz_vec ? (uint32_t *)m : NULL;

    size_t end[FLOE_PARTS_MAX] = {0};
    for (unsigned p = 0; p < P; p++) {
        sp->at[p] = p * region;
        end[p] = sp->at[p] + region;
    }
    if (!scatter(sp, end)) { /* a region overflowed: count, then place exactly */
        size_t count[FLOE_PARTS_MAX] = {0};
        for (size_t i = 0; i < n; i++)
            count[part_of(t, b, i)]++;
        for (unsigned p = 0; p < P; p++) {
            sp->at[p] = p ? end[p - 1] : 0;
            end[p] = sp->at[p] + count[p];
        }
        const bool placed_all = scatter(sp, end);
        assert(placed_all);
        (void)placed_all;
    }
    const uint32_t kb = t->base.spec.key_bits;
    if (floe_batch_width_pass(&t->base.spec, b) && kb < 64 && (sp->bits >> kb)) {
        /* a key too wide: the door's whole check names it, and nothing runs */
        const floe_status st = floe_batch_check(&t->base.spec, b, NULL, err);
        assert(st != FLOE_OK);
        return st != FLOE_OK ? st : floe_errinfo_set(err, FLOE_ERR_INTERNAL, "a key too wide, unnamed");
    }

    sp->join = (floe_pool_task){join_posted, NULL};
    for (unsigned p = 0; p < P; p++) {
        const size_t o = sp->at[p], c = sp->cnt[p];
        if (!c)
            continue;
        floe_batch *s = &sp->subs[p];
        s->op = b->op;
        s->flags = b->flags | FLOE_BATCH_CHECKED; /* the door has seen these keys: no second pass */
        s->lane = b->lane;
        s->n = c;
        if (vec_in)
            s->vectors = sp->vec + o * (wb / 4);
        else
            s->keys = sp->keys + o;
        if (vals_in) {
            s->values = (unsigned char *)sp->vin + o * vb;
            s->values_len = c * vb;
        }
        s->results = sp->res + o;
        if (ids)
            s->ids = sp->ids + o;
        if (vals_out)
            s->values_out = (unsigned char *)sp->vout + o * vb;
        if (get)
            s->vectors_out = sp->vec + o * (wb / 4);
    }
    return FLOE_OK;
}

/* Whether the parts' devices can split keyed batch b among themselves
 * (group.h): their backend says so, for each of them. */
static bool goes_whole(const part_table *t, const floe_batch *b)
{
    const floe_backend_ops *ops = t->part[0]->backend->ops;
    if (!ops->group_fits || b->parents)
        return false;
    for (unsigned p = 1; p < t->parts; p++) /* every part of the same kind of backend */
        if (t->part[p]->backend->ops->group_fits != ops->group_fits)
            return false;
    return ops->group_fits(t->part, t->parts, b);
}

/* Sub-batches of b for the parts' devices to split among themselves: part
 * p's is chunk p of the batch, in place (group.h). */
static floe_status split_group(split *sp, floe_errinfo *err)
{
    part_table *t = sp->t;
    floe_batch *b = sp->b;
    sp->subs = floe_calloc(t->parts, sizeof *sp->subs);
    sp->group = floe_malloc(sizeof *sp->group);
    if (!sp->subs || !sp->group) {
        free(sp->group);
        sp->group = NULL;
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    }
    floe_group_init(sp->group, t->part, t->parts, b->n);
    for (unsigned p = 0; p < t->parts; p++) {
        floe_batch *s = &sp->subs[p];
        const size_t at = sp->group->start[p];
        s->op = b->op;
        s->flags = b->flags | FLOE_BATCH_CHECKED;
        s->lane = b->lane;
        s->keys = b->keys + at;
        s->n = sp->group->start[p + 1] - at;
        s->results = b->results + at;
        s->group = sp->group;
        sp->cnt[p] = 1; /* every part runs */
    }
    return FLOE_OK;
}

/* Sub-batches of an operation every part runs whole (STATS, REBUILD, SAVE as COPY, COPY). */
static floe_status split_all(split *sp, floe_errinfo *err)
{
    part_table *t = sp->t;
    floe_batch *b = sp->b;
    sp->subs = floe_calloc(t->parts, sizeof *sp->subs);
    if (!sp->subs)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    if (b->op == FLOE_OP_SAVE && !b->path)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "save needs a path");
    unsigned shift = 0;
    while ((2u << shift) <= t->parts)
        shift++;
    for (unsigned p = 0; p < t->parts; p++) {
        floe_batch *s = &sp->subs[p];
        s->op = b->op == FLOE_OP_SAVE ? FLOE_OP_COPY : b->op; /* one file of all parts: written here */
        s->flags = b->flags | FLOE_BATCH_CHECKED;
        s->lane = b->lane;
        s->addr_bits = b->addr_bits > shift + 1 ? b->addr_bits - shift : b->addr_bits ? 1 : 0;
    }
    for (unsigned p = 0; p < t->parts; p++)
        sp->cnt[p] = 1; /* every part runs */
    return FLOE_OK;
}

/* A TREE insert of states by their parents (see the top): each part gets a
 * GET of the parents it holds, all at once, behind everything submitted
 * before (the splitter waits for them, so each part's generation is as of
 * this batch); the vectors take their changes here, and b goes on as whole
 * vectors.  Parents of another generation than the table's, or that name no
 * vector, fail b before anything changes. */
static floe_status states_to_vectors(split *sp, floe_errinfo *err)
{
    part_table *t = sp->t;
    floe_batch *b = sp->b;
    const uint32_t W = t->base.spec.words;
    const size_t n = b->n;
    size_t off[FLOE_PARTS_MAX + 1] = {0};
    floe_batch g[FLOE_PARTS_MAX];
    uint32_t *vec = floe_malloc((n ? n : 1) * (size_t)W * 4);
    uint64_t *ids = floe_malloc((n ? n : 1) * 8);
    uint32_t *at = floe_malloc((n ? n : 1) * sizeof *at);
    uint8_t *res = floe_malloc(n ? n : 1);
    uint32_t *got = floe_malloc((n ? n : 1) * (size_t)W * 4);
    if (!vec || !ids || !at || !res || !got) {
        free(vec), free(ids), free(at), free(res), free(got);
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    }
    /* the parents in part order, as their parts' own ids; at[k]: the state of the k-th */
    for (size_t i = 0; i < n; i++)
        off[b->parents[i] % t->parts + 1]++;
    for (unsigned p = 0; p < t->parts; p++)
        off[p + 1] += off[p];
    size_t fill[FLOE_PARTS_MAX];
    memcpy(fill, off, sizeof fill);
    for (size_t i = 0; i < n; i++) {
        const size_t k = fill[b->parents[i] % t->parts]++;
        ids[k] = b->parents[i] / t->parts;
        at[k] = (uint32_t)i;
    }
    floe_batch *gp[FLOE_PARTS_MAX];
    for (unsigned p = 0; p < t->parts; p++) { /* every part, with parents or not: its generation counts */
        g[p] = (floe_batch){.op = FLOE_OP_GET,
                            .flags = FLOE_BATCH_CHECKED,
                            .keys = ids + off[p],
                            .n = off[p + 1] - off[p],
                            .results = res + off[p],
                            .vectors_out = got + off[p] * W};
        gp[p] = &g[p];
    }
    floe_tables_run(t->part, gp, t->parts);
    floe_status st = FLOE_OK;
    uint64_t generation = 0;
    for (unsigned p = 0; p < t->parts; p++) {
        if (g[p].status != FLOE_OK && st == FLOE_OK) {
            st = g[p].status;
            *err = g[p].error;
        }
        note_generation(t, p, g[p].generation);
        generation += g[p].generation;
    }
    if (st == FLOE_OK) /* the engines' rules, in their order: the generation, then the first missing parent */
        st = tree_parents_generation(t->base.spec.name, b->parent_generation, generation, err);
    size_t missing = n;
    for (size_t k = 0; k < n && st == FLOE_OK; k++) {
        if (res[k] == FLOE_PRESENT)
            memcpy(vec + (size_t)at[k] * W, got + k * W, (size_t)W * 4);
        else if (at[k] < missing)
            missing = at[k];
    }
    if (st == FLOE_OK && missing < n)
        st = tree_parent_missing(t->base.spec.name, missing, b->parents[missing], err);
    free(ids);
    free(at);
    free(res);
    free(got);
    if (st != FLOE_OK) {
        free(vec);
        return st;
    }
    tree_apply_changes(vec, W, b->change_counts, b->changes, n);
    sp->states = vec;
    b->vectors = vec; /* until the split is freed (split_free) */
    return FLOE_OK;
}

static split *split_new(part_table *t, floe_batch *b)
{
    split *sp = floe_calloc(1, sizeof *sp);
    if (!sp) { /* the spare: wait until it is free, which one batch's completion makes it */
        pthread_mutex_lock(&t->lock);
        while (t->spare_busy)
            pthread_cond_wait(&t->cv, &t->lock);
        t->spare_busy = true;
        sp = t->spare;
        pthread_mutex_unlock(&t->lock);
        memset(sp, 0, sizeof *sp);
        sp->is_spare = true;
        sp->st = floe_errinfo_set(&sp->err, FLOE_ERR_INTERNAL, "out of memory");
    }
    sp->t = t;
    sp->b = b;
    return sp;
}

static void submit_parts(part_table *t, split *sp, bool fan_out, unsigned first_part);

static void part_submit(floe_table *base, floe_batch *b)
{
    part_table *t = (part_table *)base;
    if (t->parts == 1) { /* checked by floe_table_submit already: straight to the part's backend */
        t->part[0]->backend->ops->submit(t->part[0], b);
        return;
    }
    pthread_mutex_lock(&t->in_lock);
    queue_push(&t->in, &b->link);
    t->submitted++;
    const bool post = !t->drain_posted;
    t->drain_posted = true;
    pthread_mutex_unlock(&t->in_lock);
    if (post)
        floe_pool_post(t->be->pool, &t->drain);
}

/* Waits until every batch taken before the one numbered `seq` has been
 * handed to the parts. */
static void wait_turn(part_table *t, uint64_t seq)
{
    pthread_mutex_lock(&t->in_lock);
    while (t->handed != seq)
        pthread_cond_wait(&t->turn_cv, &t->in_lock);
    pthread_mutex_unlock(&t->in_lock);
}

/* Splits b, the table's batch number seq, and hands its pieces to the
 * parts in its turn (a task of the pool). */
static void split_and_submit(part_table *t, floe_batch *b, uint64_t seq)
{
    memset(&b->counts, 0, sizeof b->counts);
    split *sp = split_new(t, b);
    if (b->status != FLOE_OK) { /* refused at the door (floe_table_submit): completes in order, unsplit */
        sp->st = b->status;
        sp->err = b->error;
    }
    bool fan_out = false, my_turn = false;
    if (sp->st == FLOE_OK && b->parents) { /* the parents' GETs go behind every batch before this one */
        wait_turn(t, seq);
        my_turn = true;
        sp->st = states_to_vectors(sp, &sp->err);
    }
    if (sp->st == FLOE_OK) {
        switch (floe_op_def(b->op)->parts) {
        case FLOE_PARTS_SPLIT:
            if (b->n > 0) {
                const uint64_t t0 = floe_now_ns();
                if (goes_whole(t, b))
                    sp->st = split_group(sp, &sp->err);
                else
                    sp->st = split_keys(sp, &sp->err);
                fan_out = sp->st == FLOE_OK;
                const uint64_t ns = floe_now_ns() - t0;
                pthread_mutex_lock(&t->lock);
                floe_stage_add(&t->split_time, b->n, ns);
                pthread_mutex_unlock(&t->lock);
            }
            break;
        case FLOE_PARTS_EVERY:
            fan_out = (sp->st = split_all(sp, &sp->err)) == FLOE_OK;
            break;
        case FLOE_PARTS_WALK: /* below */
            break;
        case FLOE_PARTS_NONE:
            sp->st = floe_errinfo_set(&sp->err, FLOE_ERR_INVALID, "%s is not an operation of a table in parts",
                                      floe_op_name(b->op));
        }
    }
    unsigned first_part = 0;
    if (sp->st == FLOE_OK && floe_op_def(b->op)->parts == FLOE_PARTS_WALK && b->cursor_set) {
        first_part = (unsigned)(b->cursor.position % t->parts);
        if (b->cursor.position / t->parts > UINT64_MAX / FLOE_PARTS_MAX)
            sp->st = floe_errinfo_set(&sp->err, FLOE_ERR_INVALID, "scan cursor position %llu is past the table",
                                      (unsigned long long)b->cursor.position);
    }

    /* In its turn: the split joins the completion queue before any part can
     * answer it, and its sub-batches reach every part after those of the
     * batches submitted before it. */
    if (!my_turn)
        wait_turn(t, seq);
    pthread_mutex_lock(&t->lock);
    queue_push(&t->splits, &sp->link);
    pthread_mutex_unlock(&t->lock);
    submit_parts(t, sp, fan_out, first_part);
    pthread_mutex_lock(&t->in_lock);
    t->handed++;
    pthread_cond_broadcast(&t->turn_cv);
    pthread_mutex_unlock(&t->in_lock);
}

/* A task of the pool: takes the table's oldest queued batch and splits it,
 * having posted itself again for the next one, so that the pool's threads
 * split several batches at once. */
static void drain_posted(floe_pool_task *task)
{
    part_table *t = (part_table *)((char *)task - offsetof(part_table, drain));
    pthread_mutex_lock(&t->in_lock);
    floe_batch *b = FLOE_BATCH_OF(queue_pop(&t->in));
    const uint64_t seq = t->taken++;
    const bool more = !queue_empty(&t->in);
    t->drain_posted = more;
    pthread_mutex_unlock(&t->in_lock);
    if (more)
        floe_pool_post(t->be->pool, &t->drain);
    split_and_submit(t, b, seq);
}

static void submit_parts(part_table *t, split *sp, bool fan_out, unsigned first_part)
{
    floe_batch *b = sp->b;

    if (fan_out) {
        /* sp may be delivered and freed as soon as its last sub-batch is in */
        unsigned todo[FLOE_PARTS_MAX], used = 0;
        for (unsigned p = 0; p < t->parts; p++)
            if (sp->cnt[p])
                todo[used++] = p;
        atomic_store(&sp->left, used);
        for (unsigned i = 0; i < used; i++) {
            floe_batch *s = &sp->subs[todo[i]];
            s->done = sub_done;
            s->user = sp;
            floe_table_submit(t->part[todo[i]], s);
        }
        return;
    }
    if (sp->st == FLOE_OK && floe_op_def(b->op)->parts == FLOE_PARTS_WALK) {
        const floe_scan_pos from = {b->cursor_set ? b->cursor.position / t->parts : 0, b->cursor.generation};
        b->scan_n = 0;
        scan_into(sp, first_part, &from);
        return;
    }
    floe_batch *s = &sp->one;
    s->user = sp;
    s->op = FLOE_OP_FIND; /* no keys: answers nothing, in order behind part 0's earlier work */
    s->flags = FLOE_BATCH_CHECKED;
    s->lane = b->lane;
    s->done = carrier_done;
    floe_table_submit(t->part[0], s);
}

/* ---- tables --------------------------------------------------------------------------------- */

static void table_free(part_table *t)
{
    pthread_mutex_lock(&t->in_lock); /* every batch submitted is handed to the parts */
    while (t->handed != t->submitted)
        pthread_cond_wait(&t->turn_cv, &t->in_lock);
    pthread_mutex_unlock(&t->in_lock);
    pthread_mutex_lock(&t->lock); /* and delivered, its joins done */
    while (!queue_empty(&t->splits) || t->delivering)
        pthread_cond_wait(&t->cv, &t->lock);
    pthread_mutex_unlock(&t->lock);
    part_backend *be = t->be;
    for (unsigned p = 0; p < t->parts; p++) {
        if (!t->part[p])
            continue;
        floe_table_destroy(t->part[p]);
        pthread_mutex_lock(&be->place_lock);
        be->placed[t->on[p]]--;
        pthread_mutex_unlock(&be->place_lock);
    }
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->lock);
    pthread_mutex_destroy(&t->in_lock);
    pthread_cond_destroy(&t->turn_cv);
    free(t->spare);
    free(t);
}

/* The parts of a new table of spec: an ORDERED table is one (its order is
 * one structure's: a range or a neighbour over parts would merge every
 * part's answer), any other the spec's, else the backend's, else one (and
 * more only if it fits on no inner backend whole: part_create_table). */
static unsigned parts_for(const part_backend *be, const floe_spec *spec)
{
    if (spec->kind == FLOE_KIND_ORDERED)
        return 1;
    return spec->parts ? spec->parts : be->parts ? be->parts : 1;
}

/* Where each of `parts` parts goes (t->on), best first: the inner backend
 * with the most free memory, then the one with the fewest parts placed,
 * then the lowest index; a backend that cannot say (the CPU's) counts as
 * having none free, and one that has failed comes last.  Parts past the
 * number of backends go round again in the same order. */
static void place(part_backend *be, part_table *t)
{
    uint64_t free_bytes[FLOE_PARTS_MAX];
    int usable[FLOE_PARTS_MAX];
    for (unsigned i = 0; i < be->ninner; i++) {
        uint64_t total;
        const floe_status st = floe_backend_memory(be->inner[i], &free_bytes[i], &total);
        usable[i] = st != FLOE_ERR_UNAVAILABLE;
        if (st != FLOE_OK)
            free_bytes[i] = 0;
    }
    unsigned order[FLOE_PARTS_MAX];
    pthread_mutex_lock(&be->place_lock);
    for (unsigned i = 0; i < be->ninner; i++) { /* insertion sort: a handful of devices */
        unsigned j = i;
        for (; j > 0; j--) {
            const unsigned o = order[j - 1];
            const bool before = usable[i] != usable[o]           ? usable[i] > usable[o]
                                : free_bytes[i] != free_bytes[o] ? free_bytes[i] > free_bytes[o]
                                                                 : be->placed[i] < be->placed[o];
            if (!before)
                break;
            order[j] = o;
        }
        order[j] = i;
    }
    pthread_mutex_unlock(&be->place_lock);
    for (unsigned p = 0; p < t->parts; p++)
        t->on[p] = order[p % be->ninner];
}

/* A table of `parts` parts, placed (no part made yet). */
static part_table *table_new(part_backend *be, const floe_spec *whole, unsigned parts, floe_errinfo *err)
{
    part_table *t = floe_calloc(1, sizeof *t);
    split *spare = floe_malloc(sizeof *spare);
    if (!t || !spare) {
        free(t);
        free(spare);
        floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
        return NULL;
    }
    t->base.backend = &be->base;
    t->base.spec = *whole;
    t->base.spec.parts = parts;
    t->base.checks_widths = parts > 1; /* the split reads every key: scatter checks them */
    t->be = be;
    t->parts = parts;
    t->spare = spare;
    pthread_mutex_init(&t->in_lock, NULL);
    pthread_cond_init(&t->turn_cv, NULL);
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->drain.fn = drain_posted;
    place(be, t);
    return t;
}

/* Part p of t made (or loaded) on its inner backend: counted there. */
static void placed(part_table *t, unsigned p)
{
    pthread_mutex_lock(&t->be->place_lock);
    t->be->placed[t->on[p]]++;
    pthread_mutex_unlock(&t->be->place_lock);
}

static floe_status create_in_parts(part_backend *be, const floe_spec *spec, unsigned parts, floe_table **out,
                                   floe_errinfo *err)
{
    part_table *t = table_new(be, spec, parts, err);
    if (!t)
        return FLOE_ERR_INTERNAL;
    floe_spec ps = part_spec(spec, t->parts);
    ps.parts = 0;
    floe_status st = FLOE_OK;
    for (unsigned p = 0; p < t->parts && st == FLOE_OK; p++) {
        st = floe_table_create(be->inner[t->on[p]], &ps, &t->part[p], err);
        if (st == FLOE_OK)
            placed(t, p);
        if (st == FLOE_OK && p == 0)
            ps.seed = t->part[0]->spec.seed; /* one seed for all: a part's file names it */
    }
    if (st != FLOE_OK) {
        table_free(t);
        return st;
    }
    t->base.spec.seed = ps.seed;
    if (t->parts == 1) {
        t->base.spec = t->part[0]->spec;
        t->base.spec.parts = 1;
    }
    *out = &t->base;
    return FLOE_OK;
}

static floe_status part_create_table(floe_backend *base, const floe_spec *spec, floe_table **out, floe_errinfo *err)
{
    part_backend *be = backend_of(base);
    const bool chosen = spec->kind == FLOE_KIND_ORDERED || spec->parts || be->parts;
    floe_status st = create_in_parts(be, spec, parts_for(be, spec), out, err);
    if (st == FLOE_ERR_FULL && !chosen && be->ninner > 1) /* fits on no device whole: over all of them */
        st = create_in_parts(be, spec, be->ninner, out, err);
    return st;
}

static floe_status part_load_table(floe_backend *base, const char *path, const floe_file_part *part, floe_table **out,
                                   floe_errinfo *err)
{
    part_backend *be = backend_of(base);
    if (part)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s: a partitioned table does not load as a part", path);
    floe_file_part where[FLOE_PARTS_MAX];
    unsigned nparts = 0;
    floe_spec whole = {.kind = FLOE_KIND_UNSPECIFIED};
    floe_status st = floe_file_read_parts(path, where, &nparts, &whole, err);
    if (st != FLOE_OK)
        return st;
    /* the parts it was saved in, unless the backend makes every table in some other number */
    const unsigned want = whole.kind == FLOE_KIND_ORDERED ? 1 : be->parts ? be->parts : nparts;
    if (nparts == want) { /* part by part, ids kept */
        part_table *t = table_new(be, &whole, nparts, err);
        if (!t)
            return FLOE_ERR_INTERNAL;
        for (unsigned p = 0; p < t->parts && st == FLOE_OK; p++) {
            floe_backend *in = be->inner[t->on[p]];
            st = in->ops->load_table(in, path, nparts > 1 ? &where[p] : NULL, &t->part[p], err);
            if (st == FLOE_OK)
                placed(t, p);
        }
        if (st != FLOE_OK) {
            table_free(t);
            return st;
        }
        if (nparts == 1) {
            t->base.spec = t->part[0]->spec;
            t->base.spec.parts = 1;
        }
        *out = &t->base;
        return FLOE_OK;
    }
    /* Another number of parts: each of the file's parts loaded alone, its keys moved into a new table. */
    floe_table *t = NULL;
    st = part_create_table(base, &whole, &t, err);
    for (unsigned i = 0; i < nparts && st == FLOE_OK; i++) {
        floe_backend *in = be->inner[i % be->ninner];
        floe_table *from = NULL;
        st = in->ops->load_table(in, path, nparts > 1 ? &where[i] : NULL, &from, err);
        if (st == FLOE_OK)
            st = floe_table_copy_keys(from, t, err);
        floe_table_destroy(from);
    }
    if (st != FLOE_OK) {
        floe_table_destroy(t);
        return st;
    }
    *out = t;
    return FLOE_OK;
}

static void part_destroy_table(floe_table *base)
{
    table_free((part_table *)base); /* each part waits for its batches; the last delivers */
}

static void part_destroy(floe_backend *base)
{
    part_backend *be = backend_of(base);
    hostmem_free(be->mem); /* inner[0]'s memory: before it goes */
    for (unsigned i = 0; i < be->ninner; i++)
        floe_backend_destroy(be->inner[i]);
    floe_pool_destroy(be->pool);
    pthread_mutex_destroy(&be->place_lock);
    free(be);
}

/* A caller's buffers go to the parts through the split's own: host memory
 * of the first inner backend serves a table of one part straight (the
 * GPU's is portable, so any device's copies may use it). */
static void *part_host_alloc(floe_backend *base, size_t bytes)
{
    return floe_backend_host_alloc(((part_backend *)base)->inner[0], bytes);
}

static void part_host_free(floe_backend *base, void *p)
{
    floe_backend_host_free(((part_backend *)base)->inner[0], p);
}

/* A table of one part takes the batches straight (part_submit), in their
 * lanes; the parts of a table in parts get their sub-batches in the lanes
 * of the batches too, from the lanes' splitters.  So every inner backend
 * runs the lanes asked of the whole.  Set once here, not by each table
 * made: tables are made on several threads at once. */
static void part_set_lanes(floe_backend *base, unsigned lanes)
{
    part_backend *be = backend_of(base);
    for (unsigned i = 0; i < be->ninner; i++)
        be->inner[i]->lanes = lanes;
}

static floe_status part_memory(floe_backend *base, uint64_t *free_bytes, uint64_t *total_bytes)
{
    part_backend *be = backend_of(base);
    floe_status st = FLOE_ERR_UNSUPPORTED;
    for (unsigned i = 0; i < be->ninner; i++) { /* the sums of the inner backends that can say */
        uint64_t f, t;
        const floe_status s = floe_backend_memory(be->inner[i], &f, &t);
        if (s == FLOE_OK) {
            *free_bytes += f;
            *total_bytes += t;
            st = FLOE_OK;
        }
    }
    return st;
}

/* The first part's: one open set for the whole table, beside one of its parts. */
static floe_status part_side_store(floe_table *t, floe_store *out, floe_errinfo *err)
{
    return floe_table_side_store(((part_table *)t)->part[0], out, err);
}

static const floe_backend_ops part_ops = {
    .name = "partitioned",
    .create_table = part_create_table,
    .load_table = part_load_table,
    .submit = part_submit,
    .destroy_table = part_destroy_table,
    .destroy = part_destroy,
    .host_alloc = part_host_alloc,
    .host_free = part_host_free,
    .set_lanes = part_set_lanes,
    .memory = part_memory,
    .side_store = part_side_store,
};

static size_t split_keep_device(void)
{
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    const size_t sixteenth = pages > 0 && page > 0 ? (size_t)pages / 16 * (size_t)page : 0;
    return sixteenth > SPLIT_KEEP_DEVICE_MIN ? sixteenth : SPLIT_KEEP_DEVICE_MIN;
}

floe_status floe_backend_partition_create(floe_backend *const *inner, unsigned ninner, unsigned parts, unsigned threads,
                                          floe_backend **out, floe_errinfo *err)
{
    *out = NULL;
    floe_status st = FLOE_OK;
    if (ninner < 1 || ninner > FLOE_PARTS_MAX)
        st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%u inner backends: 1 to %d", ninner, FLOE_PARTS_MAX);
    else if (parts > FLOE_PARTS_MAX)
        st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%u parts: 0 (placed by table) or 1 to %d", parts, FLOE_PARTS_MAX);
    part_backend *be = st == FLOE_OK ? floe_calloc(1, sizeof *be) : NULL;
    if (st == FLOE_OK && !be)
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    /* a pool for splits and joins (with a worker at least: a split never runs on its submitter's thread) */
    if (st == FLOE_OK && (st = floe_pool_create(threads == 1 ? 2 : threads, &be->pool, err)) != FLOE_OK)
        free(be);
    if (st == FLOE_OK &&
        !(be->mem = hostmem_new(inner[0], inner[0]->ops->host_alloc ? split_keep_device() : SPLIT_KEEP_HOST))) {
        floe_pool_destroy(be->pool);
        free(be);
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    }
    if (st != FLOE_OK) {
        for (unsigned i = 0; i < ninner && i < FLOE_PARTS_MAX; i++)
            floe_backend_destroy(inner[i]);
        return st;
    }
    be->ops = part_ops;
    be->ops.name = inner[0]->ops->name;
    be->base.ops = &be->ops;
    be->base.pool = be->pool;
    be->ninner = ninner;
    be->parts = parts;
    pthread_mutex_init(&be->place_lock, NULL);
    memcpy(be->inner, inner, ninner * sizeof *inner);
    part_set_lanes(&be->base, floe_backend_lanes(&be->base));
    *out = &be->base;
    return FLOE_OK;
}
