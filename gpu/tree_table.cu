/*
 * tree_table.cu - the GPU engine's TREE tables as a whole (see
 * tree_gpu.h): the node and root tables' arrays, their growth (every node
 * once, references translated class by class), counts, and snapshots in
 * and out.  A batch's kernels are in tree_gpu.cu; what both use is
 * tree_device.cuh.
 */
#include <cub/device/device_select.cuh>
#include <math.h>
#include <string.h>

#include "tree_device.cuh"

void tree_tables_free(gpu_tree *t)
{
    cudaFree(t->nodes); /* the orphan count too */
    gpu_iceberg_destroy(t->roots);
    t->nodes = NULL;
    t->orphans = NULL;
    t->roots = NULL;
}

/* The arrays of t's tables, laid out as t->z: the node table, its orphan
 * count (one allocation: a growth pays a cudaMalloc and a cudaFree, about
 * 0.1 ms each) and the root table (what a growth replaces; the batch
 * counters and scratch stay).  On failure the ones made are freed. */
floe_status tree_tables_alloc(gpu_tree *t, floe_errinfo *err)
{
    tree_geometry_for(&t->spec, &t->z, &t->g);
    const size_t bytes = t->z.node_bytes + sizeof *t->orphans; /* 8-byte nodes: the count stays aligned */
    cudaError_t e = cudaMalloc(&t->nodes, bytes);
    if (e == cudaSuccess) {
        t->orphans = (unsigned long long *)(t->nodes + t->z.node_bytes / sizeof *t->nodes);
        e = cudaMemset(t->nodes, 0, bytes);
    } else {
        t->nodes = NULL;
        cudaGetLastError(); /* an out-of-memory error is not sticky: clear it */
    }
    floe_status st = FLOE_OK;
    if (e != cudaSuccess)
        st = floe_errinfo_set(err, e == cudaErrorMemoryAllocation ? FLOE_ERR_FULL : FLOE_ERR_INTERNAL,
                              "device memory for a TREE node table of %llu bytes: %s",
                              (unsigned long long)t->z.node_bytes, cudaGetErrorString(e));
    else
        st = gpu_iceberg_create(&t->z.root_spec, t->z.root_addr_bits, t->z.root_three, &t->roots, err);
    if (st != FLOE_OK)
        tree_tables_free(t);
    return st;
}

/* ---- stats, save, load ------------------------------------------------------------------------------------------ */

static floe_status count_nodes(gpu_tree *t, uint64_t *nodes, uint64_t *orphans, floe_errinfo *err)
{
    CUDA_TRY(cudaMemset(t->counter, 0, sizeof *t->counter), err);
    unsigned blocks = blocks_for(t->g.node_slots);
    if (blocks > 4096)
        blocks = 4096;
    k_count_other<uint64_t><<<blocks, BLOCK>>>(t->nodes, t->g.node_slots, (uint64_t)FLOE_NODE_EMPTY, t->counter);
    CUDA_TRY(cudaGetLastError(), err);
    unsigned long long c[2];
    CUDA_TRY(cudaMemcpy(&c[0], t->counter, sizeof c[0], cudaMemcpyDeviceToHost), err);
    CUDA_TRY(cudaMemcpy(&c[1], t->orphans, sizeof c[1], cudaMemcpyDeviceToHost), err);
    *nodes = c[0];
    *orphans = c[1];
    return FLOE_OK;
}

/* ---- growth: every node once ------------------------------------------------------------------------------------
 *
 * A node table that grows moves every node, so every reference changes.
 * Instead of refolding each stored vector (its W - 2 nodes read and put
 * again, though vectors share most of them), a growth translates each node
 * reached from a root once, bottom-up: a node's new reference is the put of
 * its halves' new references into the new table.  What a half holds (a
 * word, or a reference to a node of which shape) depends only on the node's
 * place in the vector's tree, so the nodes fall into a few classes (one a
 * level, two where a level's last node pairs a carried item), each with a
 * bit a node slot, marked from the roots down (a bitmap of the node table is
 * a 64th of its bytes: the marks' random writes stay in L2), and a map from
 * old to new references, written from the leaves up where marked (no other
 * entry is read: a marked node's halves are marked). */
#define MAX_CLASSES  16          /* 2 a level at most: 8 levels for 256 words */
#define TYPE_WORD    0xFFu       /* a half that holds a word */
#define REF_NONE     0xFFFFFFFFu /* map entries: a marked slot that holds no node, */
#define REF_NO_ROOM  0xFFFFFFFEu /* one whose put found no room */
#define GROW_FULL    1           /* what went wrong (the worse wins): the new node table had no room, */
#define GROW_DAMAGED 2           /* a reference to no node */

struct node_classes {
    uint32_t n;
    uint8_t left[MAX_CLASSES], right[MAX_CLASSES]; /* what the halves hold: a class, or TYPE_WORD */
    uint8_t root_left, root_right;
};

/* The classes of a tree of W words, each after the classes its halves hold
 * (so ascending is bottom-up). */
static void classes_of(uint32_t W, node_classes *c)
{
    uint8_t type[FLOE_TREE_MAX_WORDS];
    memset(type, TYPE_WORD, sizeof type);
    c->n = 0;
    for (uint32_t m = W; m > 2; m = floe_tree_up(m)) {
        const uint32_t half = m / 2, first = c->n;
        for (uint32_t j = 0; j < half; j++) {
            uint32_t k = first;
            while (k < c->n && !(c->left[k] == type[2 * j] && c->right[k] == type[2 * j + 1]))
                k++;
            if (k == c->n) {
                c->left[k] = type[2 * j];
                c->right[k] = type[2 * j + 1];
                c->n++;
            }
            type[j] = (uint8_t)k; /* j <= 2 j: read before it is written */
        }
        if (m & 1)
            type[half] = type[m - 1];
    }
    c->root_left = type[0];
    c->root_right = type[1];
}

/* 32-bit words of a class's bitmap of the node slots. */
static inline uint64_t mark_words(uint64_t slots)
{
    return (slots + 31) / 32;
}

/* A half's map or bitmap (NULL for a word): class `type`'s of n entries. */
template <typename T> static inline T *class_part(T *parts, uint64_t n, uint8_t type)
{
    return type == TYPE_WORD ? NULL : parts + type * n;
}

__device__ __forceinline__ bool marked(const uint32_t *marks, uint64_t s)
{
    return (marks[s >> 5] >> (s & 31)) & 1u;
}

__device__ __forceinline__ void mark(uint32_t *marks, uint32_t ref, uint64_t slots, int *bad)
{
    if (!marks)
        return;
    if (ref >= slots) {
        atomicMax(bad, GROW_DAMAGED); /* a reference past the table */
        return;
    }
    uint32_t *w = marks + (ref >> 5);
    const uint32_t bit = 1u << (ref & 31);
    if (!(*w & bit)) /* most halves are shared: a read first spares the atomic */
        atomicOr(w, bit);
}

__device__ __forceinline__ uint32_t translated(const uint32_t *map, uint32_t x, uint64_t slots, int *bad)
{
    if (!map)
        return x;
    if (x >= slots) { /* reported by its mark */
        atomicMax(bad, GROW_DAMAGED);
        return REF_NONE;
    }
    const uint32_t r = map[x];
    if (r == REF_NO_ROOM) /* its own put found no room */
        atomicMax(bad, GROW_FULL);
    else if (r == REF_NONE)
        atomicMax(bad, GROW_DAMAGED);
    return r;
}

/* The halves of every root of rk[0, n) marked. */
__global__ void k_mark_roots(const __grid_constant__ floe_tree_geometry g, const uint64_t *rk, uint64_t n,
                             uint32_t *marks_l, uint32_t *marks_r, int *bad)
{
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    uint32_t l, r;
    floe_tree_root_split(&g, rk[i], &l, &r);
    mark(marks_l, l, g.node_slots, bad);
    mark(marks_r, r, g.node_slots, bad);
}

/* The halves of every marked node of a class marked. */
__global__ void k_mark_class(const __grid_constant__ floe_tree_geometry g, const uint64_t *nodes, const uint32_t *marks,
                             uint32_t *marks_a, uint32_t *marks_b, int *bad)
{
    for (uint64_t s = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; s < g.node_slots;
         s += (uint64_t)gridDim.x * blockDim.x) {
        if (!marked(marks, s))
            continue;
        const uint64_t v = nodes[s];
        if (!floe_node_valid(&g, v)) {
            atomicMax(bad, GROW_DAMAGED);
            continue;
        }
        const uint64_t node = floe_node_decode(&g, s, v);
        mark(marks_a, (uint32_t)node, g.node_slots, bad);
        mark(marks_b, (uint32_t)(node >> 32), g.node_slots, bad);
    }
}

/* Every marked node of a class put into the new table: its map entry the
 * new reference (REF_NO_ROOM, and *bad GROW_FULL, where the new table had
 * no room). */
__global__ void __launch_bounds__(BLOCK)
    k_translate_class(const __grid_constant__ floe_tree_geometry from, const uint64_t *from_nodes,
                      const uint32_t *marks, uint32_t *map, const uint32_t *map_a, const uint32_t *map_b,
                      const __grid_constant__ floe_tree_geometry to, uint64_t *to_nodes, int *bad,
                      unsigned long long *made)
{
    unsigned created = 0;
    for (uint64_t s = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; s < from.node_slots;
         s += (uint64_t)gridDim.x * blockDim.x) {
        if (!marked(marks, s))
            continue;
        const uint64_t v = from_nodes[s];
        if (!floe_node_valid(&from, v)) { /* damaged: reported where a half or a root reads REF_NONE */
            map[s] = REF_NONE;
            continue;
        }
        const uint64_t node = floe_node_decode(&from, s, v);
        const uint32_t a = translated(map_a, (uint32_t)node, from.node_slots, bad),
                       b = translated(map_b, (uint32_t)(node >> 32), from.node_slots, bad);
        uint32_t ref;
        if (node_ref<true>(to, to_nodes, floe_node_pack(a, b), &ref, &created))
            map[s] = ref;
        else {
            map[s] = REF_NO_ROOM;
            atomicMax(bad, GROW_FULL);
        }
    }
    typedef cub::BlockReduce<unsigned, BLOCK> block_reduce; /* an atomic a block, not a group of threads */
    __shared__ typename block_reduce::TempStorage tmp;
    const unsigned sum = block_reduce(tmp).Sum(created);
    if (threadIdx.x == 0 && sum)
        atomicAdd(made, (unsigned long long)sum);
}

/* Each root of rk[0, n) with its halves' new references, in place. */
__global__ void k_translate_roots(const __grid_constant__ floe_tree_geometry from, uint64_t *rk, uint64_t n,
                                  const uint32_t *map_l, const uint32_t *map_r,
                                  const __grid_constant__ floe_tree_geometry to, int *bad)
{
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    uint32_t l, r;
    floe_tree_root_split(&from, rk[i], &l, &r);
    rk[i] =
        floe_tree_root_key(&to, translated(map_l, l, from.node_slots, bad), translated(map_r, r, from.node_slots, bad));
}

/* copy_into's scratch for t with this many roots, in sizes[COPY_PIECES]:
 * their keys and answers, a map and a bitmap of the node slots for each
 * node class, counters, a flag. */
#define COPY_PIECES 6
static size_t copy_scratch(const gpu_tree *t, uint64_t roots, size_t sizes[COPY_PIECES])
{
    node_classes cl;
    classes_of(t->g.words, &cl);
    sizes[0] = (roots ? roots : 1) * 8;
    sizes[1] = roots ? roots : 1;
    sizes[2] = cl.n * t->g.node_slots * 4;
    sizes[3] = cl.n * mark_words(t->g.node_slots) * 4;
    sizes[4] = 3 * 8;
    sizes[5] = sizeof(int);
    return carved_bytes(sizes, COPY_PIECES);
}

/* Puts every vector of t into n (empty, larger): each node reached from a
 * root translated once (above), then every new root into n's root table in
 * one put; *full when n had no room for one.  Nothing waits between the
 * steps.  keys[0, nkeys) (NULL: none), root keys of vectors folded but not
 * yet put (a batch that met a full node table), keep their nodes too and
 * become keys of n where it had room. */
static floe_status copy_into(gpu_tree *t, gpu_tree *n, uint64_t *keys, size_t nkeys, bool *full, floe_errinfo *err)
{
    const uint64_t node_slots = t->g.node_slots;
    uint64_t used[FLOE_LEVELS];
    floe_status st = gpu_iceberg_used(t->roots, used, err);
    if (st != FLOE_OK)
        return st;
    const uint64_t roots = used[0] + used[1] + used[2]; /* no erased rows: a TREE never erases (tree_load) */
    node_classes cl;
    classes_of(t->g.words, &cl);
    /* its scratch: the batch scratch where that is large enough and free
     * (a growth between batches; one with keys runs inside a batch), else
     * an allocation of its own */
    size_t sizes[COPY_PIECES];
    const size_t bytes = copy_scratch(t, roots, sizes);
    void *own = NULL;
    cudaError_t e = cudaSuccess;
    if ((bytes > t->scratch_bytes || keys) && (e = cudaMalloc(&own, bytes)) != cudaSuccess)
        cudaGetLastError(); /* not sticky: leave it for the status, not the next check */
    char *base = (char *)(own ? own : t->scratch);
    carver cv = {base, base + bytes};
    uint64_t *rk = (uint64_t *)cv.piece(sizes[0]);
    uint8_t *res = (uint8_t *)cv.piece(sizes[1]);
    uint32_t *maps = (uint32_t *)cv.piece(sizes[2]);
    uint32_t *marks = (uint32_t *)cv.piece(sizes[3]);
    unsigned long long *c = (unsigned long long *)cv.piece(sizes[4]);
    unsigned long long h[3] = {0, 0, 0}; /* roots gathered, not INSERTED, nodes made */
    int *d_bad = (int *)cv.piece(sizes[5]), h_bad = 0;
    const uint64_t words = mark_words(node_slots);
    if (e == cudaSuccess && cl.n)
        e = cudaMemset(marks, 0, cl.n * words * 4);
    if (e == cudaSuccess)
        e = cudaMemset(c, 0, sizeof h);
    if (e == cudaSuccess)
        e = cudaMemset(d_bad, 0, sizeof *d_bad);
    if (e != cudaSuccess)
        st = floe_errinfo_set(err, e == cudaErrorMemoryAllocation ? FLOE_ERR_FULL : FLOE_ERR_INTERNAL,
                              "device memory to grow table %s: %s", t->spec.name, cudaGetErrorString(e));
    uint32_t *map_l = class_part(maps, node_slots, cl.root_left), *map_r = class_part(maps, node_slots, cl.root_right);
    uint32_t *marks_l = class_part(marks, words, cl.root_left), *marks_r = class_part(marks, words, cl.root_right);
    const unsigned node_blocks = blocks_for(node_slots) < 8192 ? blocks_for(node_slots) : 8192;
    /* down from the roots (gathered into rk in one pass over the root table), then up from the
     * leaves, then the roots */
    if (st == FLOE_OK && roots)
        st = gpu_iceberg_keys_all(t->roots, rk, roots, c, NULL, err);
    if (st == FLOE_OK && roots)
        k_mark_roots<<<blocks_for(roots), BLOCK>>>(t->g, rk, roots, marks_l, marks_r, d_bad);
    if (st == FLOE_OK && nkeys)
        k_mark_roots<<<blocks_for(nkeys), BLOCK>>>(t->g, keys, nkeys, marks_l, marks_r, d_bad);
    for (uint32_t k = cl.n; st == FLOE_OK && k-- > 0;)
        if (cl.left[k] != TYPE_WORD || cl.right[k] != TYPE_WORD) /* a node of two words marks nothing */
            k_mark_class<<<node_blocks, BLOCK>>>(t->g, t->nodes, marks + k * words,
                                                 class_part(marks, words, cl.left[k]),
                                                 class_part(marks, words, cl.right[k]), d_bad);
    for (uint32_t k = 0; st == FLOE_OK && k < cl.n; k++)
        k_translate_class<<<node_blocks, BLOCK>>>(
            t->g, t->nodes, marks + k * words, maps + k * node_slots, class_part(maps, node_slots, cl.left[k]),
            class_part(maps, node_slots, cl.right[k]), n->g, n->nodes, d_bad, c + 2);
    if (st == FLOE_OK && roots)
        k_translate_roots<<<blocks_for(roots), BLOCK>>>(t->g, rk, roots, map_l, map_r, n->g, d_bad);
    if (st == FLOE_OK && (e = cudaGetLastError()) != cudaSuccess)
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "growing table %s: %s", t->spec.name, cudaGetErrorString(e));
    if (st == FLOE_OK && (e = cudaMemcpy(h, c, sizeof h, cudaMemcpyDeviceToHost)) == cudaSuccess)
        e = cudaMemcpy(&h_bad, d_bad, sizeof h_bad, cudaMemcpyDeviceToHost);
    if (st == FLOE_OK && e != cudaSuccess)
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "growing table %s: %s", t->spec.name, cudaGetErrorString(e));
    if (st == FLOE_OK && h[0] != roots)
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "table %s: %llu roots counted, %llu found", t->spec.name,
                              (unsigned long long)roots, h[0]);
    if (st == FLOE_OK && h_bad == GROW_DAMAGED)
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "table %s is damaged: a root leads to a missing node",
                              t->spec.name);
    *full = h_bad == GROW_FULL;
    if (st == FLOE_OK && !*full && h[0] > 0) { /* the roots, distinct: one put, every one INSERTED or no room */
        st = gpu_iceberg_put(n->roots, rk, (size_t)h[0], res, NULL, GPU_NO_DEDUP, NULL, err);
        if (st == FLOE_OK) {
            const unsigned blocks = blocks_for(h[0]) < 4096 ? blocks_for(h[0]) : 4096;
            k_count_other<uint8_t><<<blocks, BLOCK>>>(res, h[0], (uint8_t)FLOE_INSERTED, c + 1);
            if ((e = cudaMemcpy(h, c, sizeof h, cudaMemcpyDeviceToHost)) != cudaSuccess)
                st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "growing table %s: %s", t->spec.name,
                                      cudaGetErrorString(e));
            *full = st == FLOE_OK && h[1] > 0;
        }
    }
    if (st == FLOE_OK && !*full && nkeys) { /* the batch's keys, translated as the roots were */
        k_translate_roots<<<blocks_for(nkeys), BLOCK>>>(t->g, keys, nkeys, map_l, map_r, n->g, d_bad);
        if ((e = cudaMemcpy(&h_bad, d_bad, sizeof h_bad, cudaMemcpyDeviceToHost)) != cudaSuccess)
            st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "growing table %s: %s", t->spec.name, cudaGetErrorString(e));
        else if (h_bad)
            st = floe_errinfo_set(err, FLOE_ERR_INTERNAL,
                                  "table %s is damaged: a folded vector leads to a missing node", t->spec.name);
    }
    if (st == FLOE_OK && !*full) {
        n->nodes_used = h[2];
        n->roots_bound = h[0];
    }
    cudaFree(own);
    return st;
}

/* t->roots_bound made the count of the roots stored (waits for the device). */
static floe_status count_roots(gpu_tree *t, floe_errinfo *err)
{
    uint64_t used[FLOE_LEVELS];
    CUDA_TRY(cudaDeviceSynchronize(), err);
    floe_status st = gpu_iceberg_used(t->roots, used, err);
    if (st == FLOE_OK)
        t->roots_bound = used[0] + used[1] + used[2];
    return st;
}

/* The growths a batch of `coming` vectors could need at most (tree_growths_possible, by the roots
 * counted where the bound says they might: waits then). */
static floe_status growths_possible(gpu_tree *t, size_t coming, unsigned *what, floe_errinfo *err)
{
    const uint64_t root_slots = gpu_iceberg_slots(t->roots);
    *what = tree_growths_possible(&t->spec, t->nodes_used, t->g.node_slots, t->roots_bound, root_slots, coming);
    if (!(*what & TREE_GROW_ROOTS))
        return FLOE_OK;
    floe_status st = count_roots(t, err); /* the bound says maybe */
    if (st == FLOE_OK)
        *what = tree_growths_possible(&t->spec, t->nodes_used, t->g.node_slots, t->roots_bound, root_slots, coming);
    return st;
}

extern "C" void gpu_tree_set_limit(gpu_tree *t, bool (*fits)(void *ctx, uint64_t bytes), void *ctx)
{
    t->fits = fits;
    t->fits_ctx = ctx;
}

/* The node slots the look ahead wants for t's capacity (tree_nodes_ahead; 0: none) at the last
 * batch's nodes a new vector (a model's rate changes as it runs). */
static double nodes_ahead(const gpu_tree *t)
{
    /* a batch cut short by a full table counts nodes that vectors it did not fold whole made: no
     * vector makes more than tree_most_nodes_a_vector */
    const double most = tree_most_nodes_a_vector(&t->spec);
    const double rate = t->last_put ? fmin((double)t->last_made / (double)t->last_put, most) : 0.0;
    return tree_nodes_ahead(&t->spec, t->nodes_used, t->roots_bound, rate);
}

extern "C" floe_status gpu_tree_over_fill(gpu_tree *t, size_t coming, double max_fill, unsigned *what,
                                          floe_errinfo *err)
{
    *what = 0;
    /* the nodes `coming` vectors will make, at the last batch's rate: a node table that fills in
     * the middle of a batch leaves its vectors half folded, to fold again after the growth */
    const double made = t->last_n ? (double)t->last_made * (double)coming / (double)t->last_n : 0.0;
    const double node_fill = max_fill < TREE_NODE_GROW_FILL || nodes_ahead(t) > 0.0 ? max_fill : TREE_NODE_GROW_FILL;
    if ((double)t->nodes_used + made > node_fill * (double)t->g.node_slots)
        *what |= TREE_GROW_NODES;
    /* the roots likewise, at the last batch's rate of new roots */
    const double root_slots = (double)gpu_iceberg_slots(t->roots);
    const double added = t->last_n ? (double)t->last_put * (double)coming / (double)t->last_n : 0.0;
    if ((double)t->roots_bound + added > max_fill * root_slots) { /* the bound says maybe: count them */
        floe_status st = count_roots(t, err);
        if (st != FLOE_OK)
            return st;
        if ((double)t->roots_bound + added > max_fill * root_slots)
            *what |= TREE_GROW_ROOTS;
    }
    return FLOE_OK;
}

/* The sizes a growth of `what` takes t to (tree_size_for): the nodes to the
 * step nearest the look ahead's guess at the last batch's nodes a new
 * vector (a model's rate changes as it runs), and room for `coming` vectors
 * at the last batch's rates of new nodes and roots a vector. */
static floe_status grown_sizes(const gpu_tree *t, unsigned what, size_t coming, tree_sizing *z, floe_errinfo *err)
{
    const double most = tree_most_nodes_a_vector(&t->spec);
    const double want = nodes_ahead(t);
    const double made = t->last_n ? fmin((double)t->last_made / (double)t->last_n, most) : 0.0;
    const double per = t->last_n ? (double)coming / (double)t->last_n : 0.0;
    return tree_size_for(&t->spec, &t->z, what, want, (double)t->nodes_used + made * (double)coming,
                         (double)t->roots_bound + (double)t->last_put * per, z, err);
}

/* The bytes a growth to z allocates beside t's tables while it runs. */
static uint64_t bytes_to_grow(const gpu_tree *t, unsigned what, const tree_sizing *z)
{
    if (!(what & TREE_GROW_NODES))
        return z->root_bytes;
    /* the copy's scratch too, beside both generations while it runs (counted even where the batch
     * scratch would serve: a growth inside a batch allocates its own) */
    size_t sizes[COPY_PIECES];
    return z->node_bytes + z->root_bytes + copy_scratch(t, t->roots_bound, sizes);
}

static uint64_t growth_bytes(const gpu_tree *t, unsigned what, size_t coming)
{
    tree_sizing z;
    floe_errinfo ignored;
    if (!what || grown_sizes(t, what, coming, &z, &ignored) != FLOE_OK)
        return 0;
    return bytes_to_grow(t, what, &z);
}

/* ERR_NO_MEMORY where the limit (gpu_tree_set_limit) does not allow a growth to z. */
static floe_status growth_allowed(const gpu_tree *t, unsigned what, const tree_sizing *z, floe_errinfo *err)
{
    const uint64_t bytes = bytes_to_grow(t, what, z);
    if (!t->fits || t->fits(t->fits_ctx, bytes))
        return FLOE_OK;
    return floe_errinfo_set(err, FLOE_ERR_NO_MEMORY,
                            "table %s: its vectors would grow it by %.1f MiB on its GPU, past maxmemory-gpu",
                            t->spec.name, (double)bytes / 1048576.0);
}

extern "C" bool gpu_tree_refuses(gpu_tree *t, size_t n, floe_errinfo *err)
{
    unsigned what = 0;
    floe_errinfo ignored;
    if (!t->fits || !t->spec.grow)
        return false;
    /* first, on the host alone: whether any growth fits (far from the limit) */
    const uint64_t any = growth_bytes(t, TREE_GROW_NODES, n) + growth_bytes(t, TREE_GROW_ROOTS, n) +
                         growth_bytes(t, TREE_GROW_NODES | TREE_GROW_ROOTS, n);
    if (t->fits(t->fits_ctx, any) || growths_possible(t, n, &what, &ignored) != FLOE_OK || !what)
        return false;
    const uint64_t need = growth_bytes(t, what, n);
    if (t->fits(t->fits_ctx, need))
        return false;
    floe_errinfo_set(
        err, FLOE_ERR_NO_MEMORY,
        "table %s: the %zu vectors would grow it by %.1f MiB on its GPU, past maxmemory-gpu: nothing stored",
        t->spec.name, n, (double)need / 1048576.0);
    return true;
}

/* gpu_tree_grow, with the root keys keys[0, nkeys) of vectors folded but
 * not yet put (NULL: none) taken along: their nodes are kept and the keys
 * become the new generation's (copy_into). */
floe_status tree_grow_roots(gpu_tree *t, size_t coming, cudaStream_t s, floe_errinfo *err)
{
    tree_sizing z;
    floe_status st = grown_sizes(t, TREE_GROW_ROOTS, coming, &z, err);
    if (st == FLOE_OK)
        st = growth_allowed(t, TREE_GROW_ROOTS, &z, err);
    if (st == FLOE_OK) /* the roots move; the nodes stay where they are */
        st = gpu_iceberg_rebuild_on(t->roots, &z.root_addr_bits, &z.root_three, s, err); /* it may go larger still */
    if (st == FLOE_OK)
        st = tree_size_bits(&t->spec, &z, &t->z, err);
    t->generation += st == FLOE_OK;
    return st;
}

floe_status tree_grow_tables(gpu_tree *t, unsigned what, size_t coming, uint64_t *keys, size_t nkeys, floe_errinfo *err)
{
    if (!(what & TREE_GROW_NODES))
        return tree_grow_roots(t, coming, NULL, err);
    tree_sizing z;
    floe_status st = grown_sizes(t, what, coming, &z, err);
    if (st == FLOE_OK)
        st = growth_allowed(t, what, &z, err);
    if (st != FLOE_OK)
        return st;
    while (st == FLOE_OK) {
        /* new tables only: t's counters and batch scratch serve the new generation too */
        gpu_tree n;
        memset(&n, 0, sizeof n);
        n.spec = t->spec;
        n.z = z;
        st = tree_tables_alloc(&n, err);
        if (st != FLOE_OK)
            return st;
        bool full = false;
        st = copy_into(t, &n, keys, nkeys, &full, err);
        if (st == FLOE_OK && !full) { /* n's tables become t's; t's old ones go with n */
            std::swap(t->nodes, n.nodes);
            std::swap(t->orphans, n.orphans);
            std::swap(t->roots, n.roots);
            t->g = n.g;
            t->z = n.z;
            t->nodes_used = n.nodes_used;
            t->roots_bound = n.roots_bound;
            t->last_n = t->last_made = t->last_put = 0; /* rates of the old tables: none yet */
            t->generation++;
            tree_tables_free(&n);
            return FLOE_OK;
        }
        tree_tables_free(&n);
        if (st == FLOE_OK) /* which table had no room is not known here: both grow */
            st = tree_size_grown(&t->spec, &z, TREE_GROW_NODES | TREE_GROW_ROOTS, 0.0, &z, err);
        if (st == FLOE_OK)
            st = growth_allowed(t, TREE_GROW_NODES | TREE_GROW_ROOTS, &z, err);
    }
    return st;
}

extern "C" floe_status gpu_tree_grow(gpu_tree *t, unsigned what, size_t coming, floe_errinfo *err)
{
    return tree_grow_tables(t, what, coming, NULL, 0, err);
}

extern "C" uint64_t gpu_tree_generation(const gpu_tree *t)
{
    return t->generation;
}

extern "C" floe_status gpu_tree_stats(gpu_tree *t, floe_table_stats *st, floe_errinfo *err)
{
    memset(st, 0, sizeof *st);
    uint64_t used[FLOE_LEVELS], nodes, orphans;
    CUDA_TRY(cudaDeviceSynchronize(), err);
    floe_status s = gpu_iceberg_used(t->roots, used, err);
    if (s == FLOE_OK)
        s = count_nodes(t, &nodes, &orphans, err);
    if (s != FLOE_OK)
        return s;
    floe_geometry rg;
    floe_geometry_init(&rg, t->z.root_spec.key_bits, t->z.root_addr_bits, t->z.root_three, t->z.root_spec.seed);
    st->spec = t->spec;
    st->generation = t->generation;
    for (int l = 0; l < FLOE_LEVELS; l++) {
        floe_level_stats *ls = &st->level[l];
        ls->slots = floe_level_slots(&rg.level[l]);
        ls->used = used[l];
        ls->row_bits = rg.level[l].row_bits;
        ls->buckets_log2 = rg.level[l].addr_bits;
        ls->fill = (double)used[l] / (double)ls->slots;
        st->keys += used[l];
    }
    st->slots = rg.total_slots;
    st->fill = (double)st->keys / (double)st->slots;
    st->memory_bytes = gpu_iceberg_memory(t->roots);
    strcpy(st->backend, "gpu");
    tree_fill_stats(st, &t->g, nodes, orphans, t->z.node_bytes);
    return FLOE_OK;
}

extern "C" floe_status gpu_tree_download(gpu_tree *t, tree *host, floe_errinfo *err)
{
    CUDA_TRY(cudaDeviceSynchronize(), err);
    CUDA_TRY(cudaMemcpy(tree_nodes(host), t->nodes, t->z.node_bytes, cudaMemcpyDeviceToHost), err);
    iceberg_set_first_fill(tree_roots(host), gpu_iceberg_first_fill(t->roots));
    iceberg_image im;
    iceberg_get_image(tree_roots(host), &im);
    floe_status st = gpu_iceberg_download(t->roots, im.sections, err);
    if (st != FLOE_OK)
        return st;
    uint64_t used[FLOE_LEVELS], nodes, orphans;
    st = gpu_iceberg_used(t->roots, used, err);
    if (st == FLOE_OK)
        st = count_nodes(t, &nodes, &orphans, err);
    if (st != FLOE_OK)
        return st;
    iceberg_set_counters(tree_roots(host), used, 0, 0);
    tree_set_counters(host, nodes, orphans);
    tree_set_generation(host, t->generation);
    return FLOE_OK;
}

extern "C" floe_status gpu_tree_upload(gpu_tree *t, tree *host, floe_errinfo *err)
{
    CUDA_TRY(cudaMemcpy(t->nodes, tree_nodes(host), t->z.node_bytes, cudaMemcpyHostToDevice), err);
    iceberg_image im;
    iceberg_get_image(tree_roots(host), &im);
    floe_status st = gpu_iceberg_upload(t->roots, im.sections, im.first_fill, err);
    if (st != FLOE_OK)
        return st;
    uint64_t nodes, orphans;
    tree_counters(host, &nodes, &orphans);
    unsigned long long o = orphans;
    CUDA_TRY(cudaMemcpy(t->orphans, &o, sizeof o, cudaMemcpyHostToDevice), err);
    t->nodes_used = nodes;
    t->roots_bound = im.used[0] + im.used[1] + im.used[2];
    t->generation = tree_generation(host);
    return FLOE_OK;
}
