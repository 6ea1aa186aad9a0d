/*
 * ordered.c - the CPU engine for ORDERED tables (ordered.h): a B+tree.
 *
 * Inner node: n children and n - 1 separators; child i holds the keys in
 * [sep[i - 1], sep[i]) (unbounded at the ends), so a key's child is the
 * number of separators <= it.  The separators only bound the children's
 * ranges: removing an emptied child merges its range into a neighbour's by
 * dropping one separator.  Leaves are never empty except the root leaf of
 * an empty table, so the neighbour of a key beyond its leaf's keys is the
 * first (last) key of the next (previous) leaf.
 */
#include "ordered.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "alloc.h"
#include "tablefile.h"

#define ORD_MAX_HEIGHT 16 /* a root splits at ORD_FANOUT children, each made by a split of a full node */

typedef struct ord_leaf {
    struct ord_leaf *prev, *next;
    uint32_t n;
    uint64_t key[ORD_LEAF_KEYS];
    uint64_t val[]; /* ORD_LEAF_KEYS of them in a table with values */
} ord_leaf;

typedef struct ord_inner {
    uint32_t n;
    uint64_t sep[ORD_FANOUT - 1];
    void *child[ORD_FANOUT];
} ord_inner;

struct ordered {
    floe_spec spec;
    floe_pool *pool;
    pthread_rwlock_t lock;
    void *root;      /* an ord_leaf when height is 0 */
    uint32_t height; /* inner levels above the leaves */
    ord_leaf *first, *last;
    uint64_t keys;
    _Atomic uint64_t leaves, inners; /* nodes: a parallel insert's tasks make them side by side */
    uint32_t vb; /* value bytes: 0, 4 or 8 */
};

/* The path from the root to a leaf: the inner node at each of its levels
 * below height and the child taken. */
typedef struct ord_path {
    uint32_t height;
    ord_inner *node[ORD_MAX_HEIGHT];
    uint32_t idx[ORD_MAX_HEIGHT];
} ord_path;

/* ---- search ------------------------------------------------------------------------------------ */

/* How many of a[0..n) are <= key (a sorted). */
static uint32_t count_le(const uint64_t *a, uint32_t n, uint64_t key)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (a[mid] <= key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* How many of a[0..n) are < key. */
static uint32_t count_lt(const uint64_t *a, uint32_t n, uint64_t key)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (a[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The leaf whose range holds key; p (may be NULL) gets the path. */
static ord_leaf *descend(const ordered *t, uint64_t key, ord_path *p)
{
    void *node = t->root;
    if (p)
        p->height = t->height;
    for (uint32_t h = t->height; h > 0; h--) {
        ord_inner *in = node;
        uint32_t i = count_le(in->sep, in->n - 1, key);
        if (p) {
            p->node[h - 1] = in;
            p->idx[h - 1] = i;
        }
        node = in->child[i];
    }
    return node;
}

/* The leaf below node (an inner node of height h, or a leaf when h is 0)
 * whose range holds key, with the path from node down. */
static ord_leaf *descend_from(void *node, uint32_t h, uint64_t key, ord_path *p)
{
    p->height = h;
    for (; h > 0; h--) {
        ord_inner *in = node;
        uint32_t i = count_le(in->sep, in->n - 1, key);
        p->node[h - 1] = in;
        p->idx[h - 1] = i;
        node = in->child[i];
    }
    return node;
}

/* descend with the path, for writers, kept out of gcc's interprocedural
 * analysis: gcc 12.2 at -O2 lost the path's writes there (it warned that
 * they may be uninitialized, and compiled reading them into a trap). */
#if defined(__GNUC__) && !defined(__clang__)
#define ORD_OPAQUE __attribute__((noipa))
#else
#define ORD_OPAQUE __attribute__((noinline)) /* clang has no noipa, and does not need it */
#endif
ORD_OPAQUE static ord_leaf *descend_path(const ordered *t, uint64_t key, ord_path *p)
{
    return descend(t, key, p);
}
ORD_OPAQUE static ord_leaf *descend_path_from(void *node, uint32_t h, uint64_t key, ord_path *p)
{
    return descend_from(node, h, key, p);
}

static uint64_t value_in(const void *values, uint32_t vb, size_t i)
{
    if (vb == 4) {
        uint32_t v;
        memcpy(&v, (const uint8_t *)values + i * 4, 4);
        return v;
    }
    uint64_t v;
    memcpy(&v, (const uint8_t *)values + i * 8, 8);
    return v;
}

static void value_out(void *values, uint32_t vb, size_t i, uint64_t v)
{
    if (!values || !vb)
        return;
    if (vb == 4) {
        uint32_t w = (uint32_t)v;
        memcpy((uint8_t *)values + i * 4, &w, 4);
    } else {
        memcpy((uint8_t *)values + i * 8, &v, 8);
    }
}

/* ---- nodes ------------------------------------------------------------------------------------- */

static ord_leaf *leaf_new(ordered *t)
{
    ord_leaf *l = floe_malloc(sizeof *l + (t->vb ? ORD_LEAF_KEYS * sizeof(uint64_t) : 0));
    if (!l)
        return NULL;
    l->prev = l->next = NULL;
    l->n = 0;
    t->leaves++;
    return l;
}

static void leaf_free(ordered *t, ord_leaf *l)
{
    t->leaves--;
    free(l);
}

static ord_inner *inner_new(ordered *t)
{
    ord_inner *in = floe_malloc(sizeof *in);
    if (!in)
        return NULL;
    in->n = 0;
    t->inners++;
    return in;
}

static void inner_free(ordered *t, ord_inner *in)
{
    t->inners--;
    free(in);
}

static void free_subtree(ordered *t, void *node, uint32_t h)
{
    if (h > 0) {
        ord_inner *in = node;
        for (uint32_t i = 0; i < in->n; i++)
            free_subtree(t, in->child[i], h - 1);
        inner_free(t, in);
    } else {
        leaf_free(t, node);
    }
}

/* Puts child c, whose keys are >= sep, right after child i of in (in has room). */
static void inner_put(ord_inner *in, uint32_t i, uint64_t sep, void *c)
{
    memmove(&in->child[i + 2], &in->child[i + 1], (in->n - i - 1) * sizeof in->child[0]);
    memmove(&in->sep[i + 1], &in->sep[i], (in->n - 1 - i) * sizeof in->sep[0]);
    in->child[i + 1] = c;
    in->sep[i] = sep;
    in->n++;
}

/* The inner nodes a split of the leaf at the end of path p needs: one for
 * each full node above it, and a new root when they all are. */
static uint32_t splits_above(const ordered *t, const ord_path *p)
{
    uint32_t k = 0;
    while (k < p->height && p->node[k]->n == ORD_FANOUT)
        k++;
    return k + (k == p->height);
}

/* After the leaf at the end of path p split into itself and `right` (keys
 * >= sep): right goes into the parent, which splits in turn when full,
 * taking its new nodes from spare (splits_above of them); a root that
 * splits gets a new root above it. */
static void put_split(ordered *t, ord_path *p, uint64_t sep, void *right, ord_inner **spare)
{
    for (uint32_t level = 0;; level++) {
        if (level == p->height) { /* the root split */
            ord_inner *root = *spare++;
            root->n = 2;
            root->child[0] = t->root;
            root->child[1] = right;
            root->sep[0] = sep;
            t->root = root;
            t->height++;
            return;
        }
        ord_inner *in = p->node[level];
        const uint32_t i = p->idx[level];
        if (in->n < ORD_FANOUT) {
            inner_put(in, i, sep, right);
            return;
        }
        /* full: ORD_FANOUT + 1 children in all, the left half stays, the
         * right half moves to a new node, the middle separator goes up */
        ord_inner *r = *spare++;
        void *child[ORD_FANOUT + 1];
        uint64_t seps[ORD_FANOUT];
        for (uint32_t k = 0, from = 0; k <= ORD_FANOUT; k++)
            child[k] = k == i + 1 ? right : in->child[from++];
        for (uint32_t k = 0, from = 0; k < ORD_FANOUT; k++)
            seps[k] = k == i ? sep : in->sep[from++];
        const uint32_t left_n = (ORD_FANOUT + 1) / 2;
        in->n = left_n;
        memcpy(in->child, child, left_n * sizeof child[0]);
        memcpy(in->sep, seps, (left_n - 1) * sizeof seps[0]);
        r->n = ORD_FANOUT + 1 - left_n;
        memcpy(r->child, &child[left_n], r->n * sizeof child[0]);
        memcpy(r->sep, &seps[left_n], (r->n - 1) * sizeof seps[0]);
        sep = seps[left_n - 1];
        right = r;
    }
}

/* Removes child i of the inner node at `level` of the path (the child was
 * freed); an inner node left with no child goes too, and a root of one
 * child gives way to it. */
static void remove_child(ordered *t, ord_path *p, uint32_t level)
{
    for (;;) {
        assert(level < p->height);
        ord_inner *in = p->node[level];
        const uint32_t i = p->idx[level];
        memmove(&in->child[i], &in->child[i + 1], (in->n - i - 1) * sizeof in->child[0]);
        if (in->n > 1) { /* the separator below child i, or (child 0) the one above it */
            const uint32_t s = i > 0 ? i - 1 : 0;
            memmove(&in->sep[s], &in->sep[s + 1], (in->n - 2 - s) * sizeof in->sep[0]);
        }
        in->n--;
        if (in->n > 0 || level + 1 == p->height)
            break;
        inner_free(t, in);
        level++;
    }
    while (t->height > 0 && ((ord_inner *)t->root)->n == 1) {
        ord_inner *root = t->root;
        t->root = root->child[0];
        inner_free(t, root);
        t->height--;
    }
}

/* ---- one key ---------------------------------------------------------------------------------- */

#define ORD_DEFER 0xFF /* insert_below: the key needs a split of its top node; nothing changed */

/* Find-or-put of key below `top` (the root, or with !whole one subtree of
 * it, of height h): INSERTED (the caller counts it), PRESENT, FULL, or
 * (!whole) ORD_DEFER when it would split top itself, whose parent a
 * subtree's task may not touch. */
static uint8_t insert_below(ordered *t, void *top, uint32_t h, bool whole, uint64_t key, uint64_t value, bool overwrite,
                            uint64_t *out)
{
    ord_path p;
    ord_leaf *l = descend_path_from(top, h, key, &p);
    uint32_t pos = count_lt(l->key, l->n, key);
    if (pos < l->n && l->key[pos] == key) {
        if (t->vb) {
            *out = l->val[pos];
            if (overwrite)
                l->val[pos] = value;
        }
        return FLOE_PRESENT;
    }
    if (l->n == ORD_LEAF_KEYS) { /* split: the upper half to a new leaf after it */
        /* every node the split needs first, so that running out of memory changes nothing */
        ord_inner *spare[ORD_MAX_HEIGHT + 1];
        const uint32_t need = splits_above(t, &p);
        if (!whole && need > p.height) /* every node up to top is full: top would split */
            return ORD_DEFER;
        ord_leaf *r = leaf_new(t);
        uint32_t got = 0;
        while (r && got < need && (spare[got] = inner_new(t)) != NULL)
            got++;
        if (!r || got < need) {
            while (got > 0)
                inner_free(t, spare[--got]);
            if (r)
                leaf_free(t, r);
            return FLOE_FULL;
        }
        const uint32_t half = ORD_LEAF_KEYS / 2;
        r->n = ORD_LEAF_KEYS - half;
        memcpy(r->key, &l->key[half], r->n * sizeof r->key[0]);
        if (t->vb)
            memcpy(r->val, &l->val[half], r->n * sizeof r->val[0]);
        put_split(t, &p, r->key[0], r, spare);
        l->n = half;
        r->prev = l;
        r->next = l->next;
        if (l->next)
            l->next->prev = r;
        else
            t->last = r;
        l->next = r;
        if (pos > half) {
            l = r;
            pos -= half;
        }
    }
    memmove(&l->key[pos + 1], &l->key[pos], (l->n - pos) * sizeof l->key[0]);
    l->key[pos] = key;
    if (t->vb) {
        memmove(&l->val[pos + 1], &l->val[pos], (l->n - pos) * sizeof l->val[0]);
        l->val[pos] = value;
    }
    l->n++;
    *out = value;
    return FLOE_INSERTED;
}

static uint8_t erase_one(ordered *t, uint64_t key)
{
    ord_path p;
    ord_leaf *l = descend_path(t, key, &p);
    const uint32_t pos = count_lt(l->key, l->n, key);
    if (pos == l->n || l->key[pos] != key)
        return FLOE_ABSENT;
    memmove(&l->key[pos], &l->key[pos + 1], (l->n - pos - 1) * sizeof l->key[0]);
    if (t->vb)
        memmove(&l->val[pos], &l->val[pos + 1], (l->n - pos - 1) * sizeof l->val[0]);
    l->n--;
    t->keys--;
    if (l->n == 0 && t->height > 0) { /* not the last leaf: an inner node has another child */
        if (l->prev)
            l->prev->next = l->next;
        else
            t->first = l->next;
        if (l->next)
            l->next->prev = l->prev;
        else
            t->last = l->prev;
        leaf_free(t, l);
        remove_child(t, &p, 0);
    }
    return FLOE_ERASED;
}

/* The stored neighbour of key: successor (pred false) or predecessor. */
static bool neighbour(const ordered *t, bool pred, uint64_t key, uint64_t *found, uint64_t *value)
{
    const ord_leaf *l = descend(t, key, NULL);
    uint32_t pos;
    if (!pred) {
        pos = count_lt(l->key, l->n, key);
        if (pos == l->n) {
            l = l->next;
            pos = 0;
        }
    } else {
        pos = count_le(l->key, l->n, key);
        if (pos == 0) {
            l = l->prev;
            pos = l ? l->n : 0;
        }
        pos--;
    }
    if (!l || l->n == 0)
        return false;
    *found = l->key[pos];
    *value = t->vb ? l->val[pos] : 0;
    return true;
}

/* ---- batches ---------------------------------------------------------------------------------- */

floe_status ordered_create(const floe_spec *spec, floe_pool *pool, ordered **out, floe_errinfo *err)
{
    *out = NULL;
    if (spec->kind != FLOE_KIND_ORDERED)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "ordered_create needs an ORDERED spec, not %s",
                                floe_kind_name(spec->kind));
    if (spec->key_bits < 1 || spec->key_bits > 64)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "key_bits must be 1..64, got %u", spec->key_bits);
    if (spec->value_bytes != 0 && spec->value_bytes != 4 && spec->value_bytes != 8)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "an ORDERED table's value_bytes is 0, 4 or 8, got %u",
                                spec->value_bytes);
    ordered *t = floe_calloc(1, sizeof *t);
    if (!t)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    t->spec = *spec;
    while (t->spec.seed == 0) /* no layout needs it: it tells this table's range cursors from another's */
        if (getrandom(&t->spec.seed, sizeof t->spec.seed, 0) != sizeof t->spec.seed)
            t->spec.seed = 0x6A09E667F3BCC909ull;
    t->pool = pool;
    t->vb = spec->value_bytes;
    ord_leaf *l = leaf_new(t);
    if (!l || pthread_rwlock_init(&t->lock, NULL) != 0) {
        free(l);
        free(t);
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    }
    t->root = t->first = t->last = l;
    *out = t;
    return FLOE_OK;
}

void ordered_destroy(ordered *t)
{
    if (!t)
        return;
    free_subtree(t, t->root, t->height);
    pthread_rwlock_destroy(&t->lock);
    free(t);
}

const floe_spec *ordered_spec(const ordered *t)
{
    return &t->spec;
}

/* A large insert runs on the pool, one task for each child of the root:
 * the batch's keys go to the child whose range holds them (a counting
 * sort that keeps their order), and each task inserts its keys below its
 * child, in batch order, splitting leaves and inner nodes of its subtree as
 * it goes.  Each key's occurrences meet in one task, in order, so the
 * first is the one INSERTED, as in a serial insert.  A task touches only
 * its subtree (and the prev link of the next subtree's first leaf, which
 * nothing else of the batch reads or writes); a key whose insert would
 * split the child itself, and every key of that task after it, is left
 * for a serial pass at the end, which may split the root. */
#define INSERT_PAR_MIN 4096 /* keys below which the serial loop is faster */

typedef struct insert_job {
    ordered *t;
    const uint64_t *keys;
    const void *values;
    bool overwrite;
    uint8_t *results;
    void *values_out;
    const uint32_t *order; /* the batch's indexes, child by child, in batch order */
    const size_t *start;   /* child c's: order[start[c] .. start[c + 1]) */
    size_t *deferred;      /* child c's first position left for the serial pass */
    uint64_t *added;       /* keys child c's task inserted */
} insert_job;

/* Key i of the batch, inserted below top (insert_below); its answers written. */
static uint8_t insert_key(ordered *t, void *top, uint32_t h, bool whole, const insert_job *j, size_t i)
{
    uint64_t stored = 0;
    const uint8_t r =
        insert_below(t, top, h, whole, j->keys[i], t->vb ? value_in(j->values, t->vb, i) : 0, j->overwrite, &stored);
    if (r != ORD_DEFER) {
        j->results[i] = r;
        value_out(j->values_out, t->vb, i, r == FLOE_FULL ? 0 : stored);
    }
    return r;
}

static void insert_part(void *arg, size_t c)
{
    insert_job *j = arg;
    ordered *t = j->t;
    void *sub = ((ord_inner *)t->root)->child[c];
    size_t k = j->start[c];
    for (; k < j->start[c + 1]; k++) {
        const uint8_t r = insert_key(t, sub, t->height - 1, false, j, j->order[k]);
        if (r == ORD_DEFER)
            break;
        j->added[c] += r == FLOE_INSERTED;
    }
    j->deferred[c] = k;
}

/* The parallel insert; false (nothing done) when its scratch does not fit in memory. */
static bool insert_parallel(ordered *t, insert_job *j, size_t n)
{
    const ord_inner *root = t->root;
    const uint32_t nc = root->n;
    uint8_t *child = floe_malloc(n);
    uint32_t *order = floe_malloc(n * sizeof *order);
    size_t *start = calloc(3 * (size_t)nc + 1, sizeof *start);
    uint64_t *added = calloc(nc, sizeof *added);
    const bool ok = child && order && start && added;
    if (ok) {
        size_t *at = start + nc + 1;
        for (size_t i = 0; i < n; i++) {
            child[i] = (uint8_t)count_le(root->sep, nc - 1, j->keys[i]);
            start[child[i] + 1]++;
        }
        for (uint32_t c = 0; c < nc; c++)
            start[c + 1] += start[c];
        for (uint32_t c = 0; c < nc; c++)
            at[c] = start[c];
        for (size_t i = 0; i < n; i++)
            order[at[child[i]]++] = (uint32_t)i;
        j->order = order;
        j->start = start;
        j->deferred = at; /* the positions are done with */
        j->added = added;
        floe_pool_run(t->pool, nc, insert_part, j);
        uint64_t keys = t->keys;
        for (uint32_t c = 0; c < nc; c++)
            keys += added[c];
        t->keys = keys;
        for (uint32_t c = 0; c < nc; c++) /* what the tasks left, child by child, in batch order */
            for (size_t k = j->deferred[c]; k < start[c + 1]; k++)
                t->keys += insert_key(t, t->root, t->height, true, j, order[k]) == FLOE_INSERTED;
    }
    free(child);
    free(order);
    free(start);
    free(added);
    return ok;
}

floe_status ordered_insert(ordered *t, const uint64_t *keys, const void *values, size_t n, bool overwrite,
                           uint8_t *results, void *values_out, floe_answer_counts *counts, floe_errinfo *err)
{
    (void)err;
    assert(floe_keys_fit(t->spec.key_bits, keys, n)); /* the door's */
    assert(!t->vb || n == 0 || values);
    assert(n <= UINT32_MAX);
    insert_job j = {t, keys, values, overwrite, results, values_out, NULL, NULL, NULL, NULL};
    pthread_rwlock_wrlock(&t->lock);
    const bool parallel = t->pool && n >= INSERT_PAR_MIN && t->height >= 2 && insert_parallel(t, &j, n);
    for (size_t i = 0; i < n && !parallel; i++)
        t->keys += insert_key(t, t->root, t->height, true, &j, i) == FLOE_INSERTED;
    pthread_rwlock_unlock(&t->lock);
    floe_answer_counts_tally(counts, results, n);
    return FLOE_OK;
}

typedef struct find_job {
    ordered *t;
    const uint64_t *keys;
    size_t n, per;
    uint8_t *results;
    void *values_out;
} find_job;

static void find_part(void *arg, size_t part)
{
    find_job *j = arg;
    const ordered *t = j->t;
    const size_t end = (part + 1) * j->per < j->n ? (part + 1) * j->per : j->n;
    for (size_t i = part * j->per; i < end; i++) {
        const ord_leaf *l = descend(t, j->keys[i], NULL);
        const uint32_t pos = count_lt(l->key, l->n, j->keys[i]);
        const bool hit = pos < l->n && l->key[pos] == j->keys[i];
        j->results[i] = hit ? FLOE_PRESENT : FLOE_ABSENT;
        value_out(j->values_out, t->vb, i, hit && t->vb ? l->val[pos] : 0);
    }
}

#define FIND_PART 16384 /* keys a pool task looks up */

floe_status ordered_find(ordered *t, const uint64_t *keys, size_t n, uint8_t *results, void *values_out,
                         floe_answer_counts *counts, floe_errinfo *err)
{
    (void)err;
    assert(floe_keys_fit(t->spec.key_bits, keys, n));
    find_job j = {t, keys, n, FIND_PART, results, values_out};
    pthread_rwlock_rdlock(&t->lock);
    floe_pool_run(t->pool, (n + FIND_PART - 1) / FIND_PART, find_part, &j);
    pthread_rwlock_unlock(&t->lock);
    floe_answer_counts_tally(counts, results, n);
    return FLOE_OK;
}

floe_status ordered_erase(ordered *t, const uint64_t *keys, size_t n, uint8_t *results, floe_answer_counts *counts,
                          floe_errinfo *err)
{
    (void)err;
    assert(floe_keys_fit(t->spec.key_bits, keys, n));
    pthread_rwlock_wrlock(&t->lock);
    for (size_t i = 0; i < n; i++)
        results[i] = erase_one(t, keys[i]);
    pthread_rwlock_unlock(&t->lock);
    floe_answer_counts_tally(counts, results, n);
    return FLOE_OK;
}

typedef struct neighbour_job {
    const ordered *t;
    bool pred;
    const uint64_t *keys;
    size_t n, per;
    uint8_t *results;
    uint64_t *found;
    void *values_out;
} neighbour_job;

static void neighbour_part(void *arg, size_t part)
{
    neighbour_job *j = arg;
    const size_t end = (part + 1) * j->per < j->n ? (part + 1) * j->per : j->n;
    for (size_t i = part * j->per; i < end; i++) {
        uint64_t k = 0, v = 0;
        const bool hit = neighbour(j->t, j->pred, j->keys[i], &k, &v);
        j->results[i] = hit ? FLOE_PRESENT : FLOE_ABSENT;
        j->found[i] = k;
        value_out(j->values_out, j->t->vb, i, v);
    }
}

floe_status ordered_neighbours(ordered *t, bool pred, const uint64_t *keys, size_t n, uint8_t *results, uint64_t *found,
                               void *values_out, floe_errinfo *err)
{
    (void)err;
    neighbour_job j = {t, pred, keys, n, FIND_PART, results, found, values_out};
    pthread_rwlock_rdlock(&t->lock);
    floe_pool_run(t->pool, (n + FIND_PART - 1) / FIND_PART, neighbour_part, &j);
    pthread_rwlock_unlock(&t->lock);
    return FLOE_OK;
}

void ordered_range(ordered *t, uint64_t lo, uint64_t hi, bool desc, size_t limit, uint64_t *keys_out, void *values_out,
                   size_t *n, uint64_t *next, bool *done)
{
    *n = 0;
    *next = desc ? hi : lo;
    *done = true;
    if (lo > hi)
        return;
    pthread_rwlock_rdlock(&t->lock);
    const ord_leaf *l = descend(t, desc ? hi : lo, NULL);
    int64_t pos = desc ? (int64_t)count_le(l->key, l->n, hi) - 1 : (int64_t)count_lt(l->key, l->n, lo);
    size_t got = 0;
    for (;;) {
        if (pos < 0) { /* descending past the leaf's first key */
            l = l->prev;
            if (!l)
                break;
            pos = (int64_t)l->n - 1;
            continue;
        }
        if (pos >= (int64_t)l->n) { /* ascending past its last */
            l = l->next;
            if (!l)
                break;
            pos = 0;
            continue;
        }
        const uint64_t k = l->key[pos];
        if (desc ? k < lo : k > hi)
            break;
        if (got == limit) { /* more to come: continue at this key */
            *next = k;
            *done = false;
            break;
        }
        keys_out[got] = k;
        value_out(values_out, t->vb, got, t->vb ? l->val[pos] : 0);
        got++;
        pos += desc ? -1 : 1;
    }
    pthread_rwlock_unlock(&t->lock);
    *n = got;
}

floe_status ordered_scan(ordered *t, const floe_scan_pos *from, size_t limit, uint64_t *keys, void *values, size_t *n,
                         floe_scan_pos *next, int *done, floe_errinfo *err)
{
    const uint64_t top = floe_mask_bits(t->spec.key_bits);
    *n = 0;
    if (from && from->generation != 0)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "scan cursor is from generation %llu; an ORDERED table is always at generation 0",
                                (unsigned long long)from->generation);
    if (from && from->position > top)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "scan cursor position %llu is not a key of key_bits = %u: start the scan again",
                                (unsigned long long)from->position, t->spec.key_bits);
    uint64_t at;
    bool end;
    ordered_range(t, from ? from->position : 0, top, false, limit, keys, values, n, &at, &end);
    *next = (floe_scan_pos){at, 0};
    *done = end;
    return FLOE_OK;
}

bool ordered_min_max(ordered *t, bool max, uint64_t *key, void *value)
{
    pthread_rwlock_rdlock(&t->lock);
    const ord_leaf *l = max ? t->last : t->first;
    const bool some = l->n > 0;
    if (some) {
        const uint32_t pos = max ? l->n - 1 : 0;
        *key = l->key[pos];
        value_out(value, t->vb, 0, t->vb ? l->val[pos] : 0);
    }
    pthread_rwlock_unlock(&t->lock);
    return some;
}

void ordered_stats(ordered *t, floe_table_stats *s)
{
    memset(s, 0, sizeof *s);
    pthread_rwlock_rdlock(&t->lock);
    s->spec = t->spec;
    s->keys = t->keys;
    s->slots = t->leaves * ORD_LEAF_KEYS;
    s->fill = s->slots ? (double)t->keys / (double)s->slots : 0.0;
    const size_t leaf_bytes = sizeof(ord_leaf) + (t->vb ? ORD_LEAF_KEYS * sizeof(uint64_t) : 0);
    s->memory_bytes = t->leaves * leaf_bytes + t->inners * sizeof(ord_inner);
    pthread_rwlock_unlock(&t->lock);
    s->bytes_per_key = s->keys ? (double)s->memory_bytes / (double)s->keys : 0.0;
    s->device = -1;
    strcpy(s->backend, "cpu");
}

/* ---- files ------------------------------------------------------------------------------------ */

#define ORD_SECTIONS  2 /* keys, values */
#define ORD_LOAD_FILL (ORD_LEAF_KEYS * 7 / 8)

/* The table's keys and values in order, into new arrays (NULL: out of memory). */
static bool gather(const ordered *t, uint64_t **keys, uint8_t **values)
{
    *keys = floe_malloc(t->keys ? t->keys * 8 : 8);
    *values = floe_malloc(t->keys && t->vb ? t->keys * t->vb : 8);
    if (!*keys || !*values) {
        free(*keys);
        free(*values);
        return false;
    }
    size_t i = 0;
    for (const ord_leaf *l = t->first; l; l = l->next)
        for (uint32_t k = 0; k < l->n; k++, i++) {
            (*keys)[i] = l->key[k];
            value_out(*values, t->vb, i, t->vb ? l->val[k] : 0);
        }
    return true;
}

static void header_of(const floe_spec *spec, uint64_t keys, floe_file_header *h)
{
    memset(h, 0, sizeof *h);
    h->spec = *spec;
    h->layout_version = FLOE_LAYOUT_OLDEST; /* sorted keys follow no placement rule: every release reads them */
    h->keys = keys;
    h->nsections = ORD_SECTIONS;
    h->section_bytes[0] = keys * 8;
    h->section_bytes[1] = keys * spec->value_bytes;
    h->parts = 1;
    h->whole_capacity = spec->capacity;
}

floe_status ordered_image_of(const floe_spec *spec, uint64_t *keys, void *values, uint64_t n, floe_file_image **out,
                             floe_errinfo *err)
{
    floe_file_header h;
    header_of(spec, n, &h);
    *out = floe_file_image_adopt(&h, (void *const[]){keys, values});
    if (!*out) {
        free(keys);
        free(values);
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory copying table %s", spec->name);
    }
    return FLOE_OK;
}

floe_status ordered_export(ordered *t, uint64_t **keys, void **values, uint64_t *n, floe_errinfo *err)
{
    pthread_rwlock_rdlock(&t->lock);
    const bool ok = gather(t, keys, (uint8_t **)values);
    *n = t->keys;
    pthread_rwlock_unlock(&t->lock);
    return ok ? FLOE_OK : floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory copying table %s", t->spec.name);
}

floe_status ordered_copy_image(ordered *t, floe_file_image **out, floe_errinfo *err)
{
    uint64_t *keys, n;
    void *values;
    *out = NULL;
    floe_status st = ordered_export(t, &keys, &values, &n, err);
    /* the gathered arrays are the image's sections: no second copy */
    return st == FLOE_OK ? ordered_image_of(&t->spec, keys, values, n, out, err) : st;
}

floe_status ordered_save(ordered *t, const char *path, floe_errinfo *err)
{
    floe_file_image *im;
    floe_status st = ordered_copy_image(t, &im, err);
    if (st != FLOE_OK)
        return st;
    st = floe_file_image_save(path, im, err);
    floe_file_image_free(im);
    return st;
}

/* Frees every leaf after t's first and every node in made[0..m). */
static void unbuild(ordered *t, ord_inner **made, size_t m)
{
    for (ord_leaf *l = t->first->next, *next; l; l = next) {
        next = l->next;
        leaf_free(t, l);
    }
    t->first->next = NULL;
    t->last = t->first;
    while (m > 0)
        inner_free(t, made[--m]);
}

/* t (empty: its one leaf) built from n sorted keys: leaves ORD_LOAD_FILL
 * full, then each level of inner nodes over the one below (every node
 * allocated before any is linked, so that running out of memory leaves t
 * as it was). */
static bool build(ordered *t, const uint64_t *keys, const uint8_t *values, size_t n)
{
    ord_leaf *l = t->first;
    size_t nodes = 1;
    for (size_t i = 0; i < n; i++) {
        if (l->n == ORD_LOAD_FILL) {
            ord_leaf *r = leaf_new(t);
            if (!r) {
                t->first->n = 0;
                unbuild(t, NULL, 0);
                return false;
            }
            r->prev = l;
            l->next = r;
            t->last = l = r;
            nodes++;
        }
        l->key[l->n] = keys[i];
        if (t->vb)
            l->val[l->n] = value_in(values, t->vb, i);
        l->n++;
    }
    size_t inners = 0; /* ceil(nodes / ORD_FANOUT) a level, up to one root */
    for (size_t k = nodes; k > 1; k = (k + ORD_FANOUT - 1) / ORD_FANOUT)
        inners += (k + ORD_FANOUT - 1) / ORD_FANOUT;
    void **below = floe_malloc(nodes * sizeof *below);
    uint64_t *low = floe_malloc(nodes * sizeof *low);
    ord_inner **made = floe_malloc((inners ? inners : 1) * sizeof *made);
    size_t m = 0;
    while (below && low && made && m < inners && (made[m] = inner_new(t)) != NULL)
        m++;
    if (!below || !low || !made || m < inners) {
        t->first->n = 0;
        unbuild(t, made, made ? m : 0);
        free(below);
        free(low);
        free(made);
        return false;
    }
    size_t k = 0; /* below[i]: the nodes of the level under construction's children, low[i] their first keys */
    for (ord_leaf *x = t->first; x; x = x->next, k++)
        below[k] = x, low[k] = x->n ? x->key[0] : 0;
    for (m = 0; nodes > 1; t->height++) {
        size_t up = 0;
        for (size_t i = 0; i < nodes; up++) {
            ord_inner *in = made[m++];
            size_t take = nodes - i < ORD_FANOUT ? nodes - i : ORD_FANOUT;
            if (nodes - i - take == 1) /* the last node of a level gets two children at least */
                take--;
            in->n = (uint32_t)take;
            for (size_t c = 0; c < take; c++) {
                in->child[c] = below[i + c];
                if (c > 0)
                    in->sep[c - 1] = low[i + c];
            }
            const uint64_t first = low[i];
            below[up] = in;
            low[up] = first;
            i += take;
        }
        nodes = up;
    }
    t->keys = n;
    t->root = below[0];
    free(below);
    free(low);
    free(made);
    return true;
}

floe_status ordered_load(const char *path, uint64_t offset, floe_pool *pool, ordered **out, floe_errinfo *err)
{
    *out = NULL;
    floe_file_header h;
    floe_file_reader *r;
    floe_status st = floe_file_open(path, offset, &h, &r, err);
    if (st != FLOE_OK)
        return st;
    ordered *t = NULL;
    uint64_t *keys = NULL;
    uint8_t *values = NULL;
    floe_errinfo spec_err;
    if (h.spec.kind != FLOE_KIND_ORDERED) {
        st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%s holds a %s table, not an ORDERED one", path,
                              floe_kind_name(h.spec.kind));
    } else if ((st = ordered_create(&h.spec, pool, &t, &spec_err)) != FLOE_OK) {
        st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%s holds an invalid table spec: %s", path, spec_err.msg);
    } else if (h.nsections != ORD_SECTIONS || h.section_bytes[0] != h.keys * 8 ||
               h.section_bytes[1] != h.keys * h.spec.value_bytes || h.keys > (UINT64_MAX >> 4)) {
        st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is damaged: section sizes do not match its %llu keys", path,
                              (unsigned long long)h.keys);
    } else if (!(keys = floe_malloc(h.keys ? h.keys * 8 : 8)) ||
               !(values = floe_malloc(h.keys && h.spec.value_bytes ? h.keys * h.spec.value_bytes : 8))) {
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory loading %s", path);
    } else if ((st = floe_file_read(r, (void *const[]){keys, values}, err)) == FLOE_OK) {
        const uint64_t top = h.spec.key_bits == 64 ? UINT64_MAX : (1ull << h.spec.key_bits) - 1;
        for (uint64_t i = 0; i < h.keys && st == FLOE_OK; i++)
            if (keys[i] > top || (i > 0 && keys[i] <= keys[i - 1]))
                st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is damaged: key %llu is %s", path,
                                      (unsigned long long)i,
                                      keys[i] > top ? "wider than key_bits" : "not above the one before it");
        if (st == FLOE_OK && !build(t, keys, values, h.keys))
            st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory loading %s", path);
    }
    floe_file_close(r);
    free(keys);
    free(values);
    if (st != FLOE_OK) {
        ordered_destroy(t);
        return st;
    }
    *out = t;
    return FLOE_OK;
}
