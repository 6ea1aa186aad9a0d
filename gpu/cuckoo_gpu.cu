/*
 * cuckoo_gpu.cu - the GPU engine of frozen STATIC tables (see
 * cuckoo_gpu.h): the build, finds, and the arrays to and from the host.
 * The layout and every rule of it are tables/cuckoo_layout.h's.
 */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "bucket_device.cuh"
#include "cuckoo_gpu.h"
#include "cuda_try.h"

#define BLOCK 256
/* Buckets a scan copies from the device at a time (2 MiB of 16-bit rows). */
#define SCAN_WINDOW ((uint64_t)1 << 16)

struct gpu_cuckoo {
    floe_spec spec;
    floe_cuckoo_geometry g;
    uint64_t *d_words;
    size_t bytes;
    unsigned char *d_values; /* value_bytes a slot (NULL without values) */
    size_t values_bytes;
    uint64_t keys, generation;
};

static unsigned blocks_for(size_t n)
{
    return (unsigned)((n + BLOCK - 1) / BLOCK);
}

/* ---- device side --------------------------------------------------------------------------------- */

/* A bucket of W words (rows of 4W bits: 16 rows) as the layout's searches
 * take it, its sizes compile-time constants so that the snapshot stays in
 * registers. */
template <uint32_t W> __device__ __forceinline__ floe_level level_of(const floe_cuckoo_geometry &g)
{
    floe_level lv = g.level;
    lv.words = W;
    lv.row_bits = W * 64 / FLOE_CUCKOO_SLOTS;
    lv.slots = FLOE_CUCKOO_SLOTS;
    return lv;
}

/* Key's slot, or FLOE_NO_ID: its buckets in choice order until one holds
 * it or has room (buckets fill in order: no later choice holds it then). */
template <uint32_t W>
__device__ __forceinline__ uint64_t find_slot(const floe_cuckoo_geometry &g, const uint64_t *words, uint64_t key)
{
    if (g.key_bits < 64 && (key >> g.key_bits) != 0)
        return FLOE_NO_ID;
    const floe_level lv = level_of<W>(g);
#pragma unroll
    for (uint32_t c = 0; c < FLOE_CUCKOO_CHOICES; c++) {
        uint64_t b, row, w[W];
        floe_cuckoo_split(&g, c, key, &b, &row);
        load_bucket<W, READ_ONLY>(words + b * W, w);
        const int i = floe_bucket_find(w, &lv, row);
        if (i >= 0)
            return b * FLOE_CUCKOO_SLOTS + (uint64_t)i;
        if (floe_bucket_first_empty(w, &lv) < FLOE_CUCKOO_SLOTS)
            return FLOE_NO_ID;
    }
    return FLOE_NO_ID;
}

template <uint32_t W>
__global__ void __launch_bounds__(BLOCK)
    k_find(const __grid_constant__ floe_cuckoo_geometry g, const uint64_t *words, const unsigned char *values,
           uint32_t vb, const uint64_t *keys, uint64_t n, uint8_t *res, uint64_t *ids, unsigned char *vout)
{
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const uint64_t slot = find_slot<W>(g, words, keys[i]);
    res[i] = slot == FLOE_NO_ID ? FLOE_ABSENT : FLOE_PRESENT;
    if (ids)
        ids[i] = slot;
    if (vout && vb == 8)
        reinterpret_cast<uint64_t *>(vout)[i] =
            slot == FLOE_NO_ID ? 0 : reinterpret_cast<const uint64_t *>(values)[slot];
    else if (vout && vb == 4)
        reinterpret_cast<uint32_t *>(vout)[i] =
            slot == FLOE_NO_ID ? 0 : reinterpret_cast<const uint32_t *>(values)[slot];
}

/* Of a full bucket b (its snapshot), the row whose key to move on: of up
 * to FLOE_CUCKOO_LOOKAHEAD rows from a random one on, the first of a key
 * at its choice 0 whose bucket of choice 1 has room, else the random one. */
template <uint32_t W>
__device__ __forceinline__ uint32_t pick_victim(const floe_cuckoo_geometry &g, const uint64_t *words, uint64_t b,
                                                const uint64_t (&snap)[W], const floe_level &lv, uint64_t &rng)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    const uint32_t start = (uint32_t)(rng % FLOE_CUCKOO_SLOTS), per = 64 / lv.row_bits;
    for (uint32_t j = 0; j < FLOE_CUCKOO_LOOKAHEAD; j++) {
        const uint32_t s = (start + j) % FLOE_CUCKOO_SLOTS;
        const uint64_t w = word_at(snap, floe_row_word(lv.row_bits, s)), row = floe_row_get(&w, lv.row_bits, s % per);
        if (floe_cuckoo_choice(row) != 0)
            continue;
        uint64_t nb, nrow, other[W];
        floe_cuckoo_split(&g, 1, floe_cuckoo_join(&g, b, row), &nb, &nrow);
        load_bucket<W, L2_ONLY>(words + nb * W, other);
        if (floe_bucket_first_empty(other, &lv) < FLOE_CUCKOO_SLOTS)
            return s;
    }
    return start;
}

/* Places key (not stored yet) from its choice c on, as tables/cuckoo.c's
 * place: into its bucket's first empty row, or where the bucket is full
 * (first_only: left there, false) into the row pick_victim names, the key
 * that held it carried on to its next choice; each row goes in by a
 * compare-and-swap of its word.  False also where a chain of moves ran
 * out (a key left out). */
template <uint32_t W>
__device__ bool place(const floe_cuckoo_geometry &g, uint64_t *words, uint64_t key, uint32_t c, bool first_only,
                      uint64_t &rng)
{
    const floe_level lv = level_of<W>(g);
    for (uint32_t moves = 0; moves < FLOE_CUCKOO_PLACE_MOVES; moves++) {
        uint64_t b, row, snap[W];
        floe_cuckoo_split(&g, c, key, &b, &row);
        unsigned long long *w = reinterpret_cast<unsigned long long *>(words + b * W);
        for (;;) {
            load_bucket<W, L2_ONLY>(words + b * W, snap);
            uint32_t s = floe_bucket_first_empty(snap, &lv);
            const bool full = s == FLOE_CUCKOO_SLOTS;
            if (full && first_only)
                return false;
            if (full)
                s = pick_victim(g, words, b, snap, lv, rng);
            const uint32_t wi = floe_row_word(lv.row_bits, s), per = 64 / lv.row_bits;
            const uint64_t was = word_at(snap, wi), old = floe_row_get(&was, lv.row_bits, s % per);
            if (atomicCAS(w + wi, was, floe_row_put(was, lv.row_bits, s, row)) != was)
                continue; /* another thread changed the word: look again */
            if (!full)
                return true;
            key = floe_cuckoo_join(&g, b, old);
            c = (floe_cuckoo_choice(old) + 1) % FLOE_CUCKOO_CHOICES;
            break;
        }
    }
    return false;
}

/* The build's first pass: key i into its bucket of choice 0 where it has
 * room; the others marked in `later` (a bit a key, a warp's 32 keys a word). */
template <uint32_t W>
__global__ void __launch_bounds__(BLOCK) k_place_first(const __grid_constant__ floe_cuckoo_geometry g, uint64_t *words,
                                                       const uint64_t *keys, uint64_t n, uint32_t *later)
{
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    uint64_t rng = 1; /* unused: no moves */
    const bool left = i < n && !place<W>(g, words, keys[i], 0, true, rng);
    const uint32_t m = __ballot_sync(0xFFFFFFFFu, left);
    if ((threadIdx.x & 31) == 0 && i < n)
        later[i / 32] = m;
}

/* The second pass: each key marked by the first placed from its choice 1
 * on (its choice-0 bucket is full), by moves; *failed set where a chain of
 * moves ran out (the size is given up). */
template <uint32_t W>
__global__ void __launch_bounds__(BLOCK)
    k_place_rest(const __grid_constant__ floe_cuckoo_geometry g, uint64_t *words, const uint64_t *keys, uint64_t n,
                 const uint32_t *later, uint64_t seed, unsigned *failed)
{
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n || !(later[i / 32] >> (i % 32) & 1))
        return;
    uint64_t rng = (seed ^ ((i + 1) * 0x9E3779B97F4A7C15ull)) | 1;
    if (!place<W>(g, words, keys[i], 1, false, rng))
        atomicExch(failed, 1u);
}

/* Key i's value into its slot (keys distinct: each slot written once). */
template <uint32_t W>
__global__ void __launch_bounds__(BLOCK)
    k_values(const __grid_constant__ floe_cuckoo_geometry g, const uint64_t *words, const uint64_t *keys, uint64_t n,
             const unsigned char *in, uint32_t vb, unsigned char *values)
{
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const uint64_t slot = find_slot<W>(g, words, keys[i]);
    if (vb == 8)
        reinterpret_cast<uint64_t *>(values)[slot] = reinterpret_cast<const uint64_t *>(in)[i];
    else
        reinterpret_cast<uint32_t *>(values)[slot] = reinterpret_cast<const uint32_t *>(in)[i];
}

/* ---- host side ----------------------------------------------------------------------------------- */

/* Launches kernel K<W> for the table's row width: 16, 32 or 64 bits, 4, 8 or 16 words a bucket. */
#define BY_WIDTH(g, K, grid, stream, ...)                                                                              \
    do {                                                                                                               \
        switch ((g).level.words) {                                                                                     \
        case 4:                                                                                                        \
            K<4><<<(grid), BLOCK, 0, (stream)>>>(__VA_ARGS__);                                                         \
            break;                                                                                                     \
        case 8:                                                                                                        \
            K<8><<<(grid), BLOCK, 0, (stream)>>>(__VA_ARGS__);                                                         \
            break;                                                                                                     \
        default:                                                                                                       \
            K<16><<<(grid), BLOCK, 0, (stream)>>>(__VA_ARGS__);                                                        \
        }                                                                                                              \
    } while (0)

static_assert(FLOE_CUCKOO_SLOTS == 16, "a bucket of W words holds rows of 4W bits");

void gpu_cuckoo_destroy(gpu_cuckoo *t)
{
    if (!t)
        return;
    cudaFree(t->d_words);
    cudaFree(t->d_values);
    free(t);
}

/* t's arrays for mult x 2^hi_bits buckets, the words zeroed (EMPTY). */
static floe_status alloc_arrays(gpu_cuckoo *t, uint32_t hi_bits, uint32_t mult, gpu_stream stream, floe_errinfo *err)
{
    floe_cuckoo_geometry_init(&t->g, t->spec.key_bits, hi_bits, mult, t->spec.seed);
    t->bytes = t->g.buckets * t->g.level.words * 8;
    t->values_bytes = floe_cuckoo_slots(&t->g) * (floe_spec_has_values(&t->spec) ? t->spec.value_bytes : 0);
    cudaError_t e = cudaMalloc((void **)&t->d_words, t->bytes);
    if (e == cudaSuccess && t->values_bytes)
        e = cudaMalloc((void **)&t->d_values, t->values_bytes);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(t->d_words, 0, t->bytes, stream);
    if (e == cudaSuccess && t->values_bytes)
        e = cudaMemsetAsync(t->d_values, 0, t->values_bytes, stream);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* an allocation's failure is not sticky: clear it */
        return floe_errinfo_set(err, FLOE_ERR_FULL,
                                "cannot allocate %zu bytes of device memory for a static table of %llu buckets: %s",
                                t->bytes + t->values_bytes, (unsigned long long)t->g.buckets, cudaGetErrorString(e));
    }
    return FLOE_OK;
}

static void free_arrays(gpu_cuckoo *t)
{
    cudaFree(t->d_words);
    cudaFree(t->d_values);
    t->d_words = NULL;
    t->d_values = NULL;
}

extern "C" floe_status gpu_cuckoo_build(const floe_spec *spec, uint64_t generation, const uint64_t *d_keys,
                                        const void *d_values, size_t n, double fill, gpu_stream stream,
                                        gpu_cuckoo **out, floe_errinfo *err)
{
    *out = NULL;
    const uint32_t vb = floe_spec_has_values(spec) ? spec->value_bytes : 0;
    if (spec->kind != FLOE_KIND_STATIC || spec->key_bits < 1 || spec->key_bits > 64 || (vb != 0 && vb != 4 && vb != 8))
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "table %s: not a static table's spec", spec->name);
    if ((vb != 0) != (d_values != NULL) && n > 0)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "values go with value_bytes 4 or 8, and only then");
    if (!(fill > 0.0 && fill <= FLOE_CUCKOO_FILL))
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "a static table's fill must be in (0, %.2f], got %g",
                                FLOE_CUCKOO_FILL, fill);
    uint32_t k = floe_cuckoo_first_step(spec->key_bits, n, fill), hi_bits = 0, mult = 1;
    if (k >= FLOE_CUCKOO_SIZE_STEPS)
        return floe_errinfo_set(err, FLOE_ERR_FULL, "%zu keys of %u bits need a larger static table than there is", n,
                                spec->key_bits);
    gpu_cuckoo *t = (gpu_cuckoo *)calloc(1, sizeof *t);
    unsigned *d_failed = NULL;
    uint32_t *d_later = NULL; /* the keys of the second pass */
    if (!t)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    t->spec = *spec;
    t->generation = generation;
    t->keys = n;
    floe_status st = FLOE_ERR_FULL;
    cudaError_t e = cudaMalloc((void **)&d_failed, sizeof *d_failed);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&d_later, (n / 32 + 1) * sizeof *d_later);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* an allocation's failure is not sticky */
        cudaFree(d_failed);
        free(t);
        return floe_errinfo_set(err, FLOE_ERR_FULL, "no device memory to build a static table of %zu keys: %s", n,
                                cudaGetErrorString(e));
    }
    for (uint32_t tried = 0; tried < FLOE_CUCKOO_SIZES_TRIED && k < FLOE_CUCKOO_SIZE_STEPS; k++) {
        if (!floe_cuckoo_size_step(spec->key_bits, k, &hi_bits, &mult))
            continue;
        tried++;
        if ((st = alloc_arrays(t, hi_bits, mult, stream, err)) != FLOE_OK)
            break;
        unsigned failed = 0;
        e = cudaMemsetAsync(d_failed, 0, sizeof *d_failed, stream);
        if (e == cudaSuccess && n) {
            BY_WIDTH(t->g, k_place_first, blocks_for(n), stream, t->g, t->d_words, d_keys, n, d_later);
            BY_WIDTH(t->g, k_place_rest, blocks_for(n), stream, t->g, t->d_words, d_keys, n, d_later, spec->seed,
                     d_failed);
            e = cudaGetLastError();
        }
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(&failed, d_failed, sizeof failed, cudaMemcpyDeviceToHost, stream);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(stream);
        if (e != cudaSuccess) {
            st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "building a static table: %s", cudaGetErrorString(e));
            break;
        }
        if (!failed) {
            if (vb && n) {
                BY_WIDTH(t->g, k_values, blocks_for(n), stream, t->g, t->d_words, d_keys, n,
                         (const unsigned char *)d_values, vb, t->d_values);
                e = cudaGetLastError();
                if (e == cudaSuccess)
                    e = cudaStreamSynchronize(stream);
                if (e != cudaSuccess) {
                    st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "a static table's values: %s", cudaGetErrorString(e));
                    break;
                }
            }
            cudaFree(d_failed);
            cudaFree(d_later);
            *out = t;
            return FLOE_OK;
        }
        free_arrays(t);
        st = floe_errinfo_set(err, FLOE_ERR_FULL,
                              "no static table of up to %u sizes past the first holds these %zu keys",
                              FLOE_CUCKOO_SIZES_TRIED, n);
    }
    cudaFree(d_failed);
    cudaFree(d_later);
    gpu_cuckoo_destroy(t);
    return st;
}

extern "C" floe_status gpu_cuckoo_find(const gpu_cuckoo *t, const uint64_t *d_keys, size_t n, uint8_t *d_results,
                                       uint64_t *d_ids, void *d_values_out, gpu_stream stream, floe_errinfo *err)
{
    if (n == 0)
        return FLOE_OK;
    const uint32_t vb = t->d_values ? t->spec.value_bytes : 0;
    BY_WIDTH(t->g, k_find, blocks_for(n), stream, t->g, t->d_words, t->d_values, vb, d_keys, n, d_results, d_ids,
             vb ? (unsigned char *)d_values_out : NULL);
    CUDA_TRY(cudaGetLastError(), err);
    return FLOE_OK;
}

extern "C" floe_status gpu_cuckoo_find_host(const gpu_cuckoo *t, const uint64_t *keys, size_t n, uint8_t *results,
                                            uint64_t *ids, void *values_out, floe_errinfo *err)
{
    const uint32_t vb = t->d_values && values_out ? t->spec.value_bytes : 0;
    uint64_t *d_keys = NULL, *d_ids = NULL;
    uint8_t *d_res = NULL;
    void *d_vout = NULL;
    floe_status st = FLOE_OK;
    cudaError_t e = cudaMalloc((void **)&d_keys, n * 8 + 8);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&d_res, n + 1);
    if (e == cudaSuccess && ids)
        e = cudaMalloc((void **)&d_ids, n * 8 + 8);
    if (e == cudaSuccess && vb)
        e = cudaMalloc(&d_vout, n * vb + 8);
    if (e == cudaSuccess)
        e = cudaMemcpy(d_keys, keys, n * 8, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) {
        st = gpu_cuckoo_find(t, d_keys, n, d_res, d_ids, d_vout, 0, err);
        e = cudaDeviceSynchronize();
    }
    if (e == cudaSuccess && st == FLOE_OK)
        e = cudaMemcpy(results, d_res, n, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess && st == FLOE_OK && ids)
        e = cudaMemcpy(ids, d_ids, n * 8, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess && st == FLOE_OK && vb)
        e = cudaMemcpy(values_out, d_vout, n * vb, cudaMemcpyDeviceToHost);
    cudaFree(d_keys);
    cudaFree(d_res);
    cudaFree(d_ids);
    cudaFree(d_vout);
    if (e != cudaSuccess)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "a find on a static table: %s", cudaGetErrorString(e));
    return st;
}

extern "C" floe_status gpu_cuckoo_upload(const cuckoo *h, gpu_cuckoo **out, floe_errinfo *err)
{
    *out = NULL;
    gpu_cuckoo *t = (gpu_cuckoo *)calloc(1, sizeof *t);
    if (!t)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    const floe_cuckoo_geometry *g = cuckoo_geometry(h);
    t->spec = *cuckoo_spec(h);
    t->keys = cuckoo_keys(h);
    t->generation = cuckoo_generation(h);
    uint64_t *words;
    void *values;
    size_t words_bytes, values_bytes;
    cuckoo_arrays((cuckoo *)h, &words, &words_bytes, &values, &values_bytes);
    floe_status st = alloc_arrays(t, g->hi_bits, g->mult, 0, err);
    cudaError_t e = cudaSuccess;
    if (st == FLOE_OK && (t->bytes != words_bytes || t->values_bytes != values_bytes))
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "table %s: the host table's arrays are not its geometry's",
                              t->spec.name);
    if (st == FLOE_OK)
        e = cudaMemcpy(t->d_words, words, words_bytes, cudaMemcpyHostToDevice);
    if (st == FLOE_OK && e == cudaSuccess && values_bytes)
        e = cudaMemcpy(t->d_values, values, values_bytes, cudaMemcpyHostToDevice);
    if (st == FLOE_OK && e != cudaSuccess)
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "copying table %s to the device: %s", t->spec.name,
                              cudaGetErrorString(e));
    if (st != FLOE_OK) {
        gpu_cuckoo_destroy(t);
        return st;
    }
    *out = t;
    return FLOE_OK;
}

extern "C" floe_status gpu_cuckoo_download(const gpu_cuckoo *t, cuckoo **out, floe_errinfo *err)
{
    cuckoo *h;
    floe_status st = cuckoo_empty(&t->spec, t->g.hi_bits, t->g.mult, t->keys, t->generation, &h, err);
    if (st != FLOE_OK)
        return st;
    uint64_t *words;
    void *values;
    size_t words_bytes, values_bytes;
    cuckoo_arrays(h, &words, &words_bytes, &values, &values_bytes);
    cudaError_t e = cudaMemcpy(words, t->d_words, words_bytes, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess && values_bytes)
        e = cudaMemcpy(values, t->d_values, values_bytes, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        cuckoo_destroy(h);
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "copying table %s from the device: %s", t->spec.name,
                                cudaGetErrorString(e));
    }
    *out = h;
    return FLOE_OK;
}

/* A scan's window of rows: the buckets' words (and values) copied down. */
struct scan_window {
    const gpu_cuckoo *t;
    uint64_t *words;
    unsigned char *values;
};

static floe_status rows_from_device(void *arg, uint64_t first, uint64_t n, bool values, const uint64_t **words,
                                    const unsigned char **vals, floe_errinfo *err)
{
    scan_window *w = (scan_window *)arg;
    const gpu_cuckoo *t = w->t;
    const uint64_t per = t->g.level.words, vb = t->spec.value_bytes;
    CUDA_TRY(cudaMemcpy(w->words, t->d_words + first * per, n * per * 8, cudaMemcpyDeviceToHost), err);
    if (values)
        CUDA_TRY(cudaMemcpy(w->values, t->d_values + first * FLOE_CUCKOO_SLOTS * vb, n * FLOE_CUCKOO_SLOTS * vb,
                            cudaMemcpyDeviceToHost),
                 err);
    *words = w->words;
    *vals = values ? w->values : NULL;
    return FLOE_OK;
}

extern "C" floe_status gpu_cuckoo_scan(const gpu_cuckoo *t, const floe_scan_pos *from, size_t limit, uint64_t *keys,
                                       void *values, size_t *n, floe_scan_pos *next, int *done, floe_errinfo *err)
{
    const uint64_t window = t->g.buckets < SCAN_WINDOW ? t->g.buckets : SCAN_WINDOW;
    const bool vals = values && t->d_values;
    scan_window w = {t, (uint64_t *)malloc(window * t->g.level.words * 8),
                     vals ? (unsigned char *)malloc(window * FLOE_CUCKOO_SLOTS * t->spec.value_bytes) : NULL};
    floe_status st = !w.words || (vals && !w.values)
                         ? floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory scanning table %s", t->spec.name)
                         : cuckoo_scan_rows(&t->spec, &t->g, t->generation, rows_from_device, &w, window, from, limit,
                                            keys, vals ? values : NULL, n, next, done, err);
    free(w.words);
    free(w.values);
    return st;
}

extern "C" void gpu_cuckoo_stats(const gpu_cuckoo *t, floe_table_stats *s)
{
    cuckoo_stats_of(&t->spec, &t->g, t->keys, t->generation, gpu_cuckoo_memory(t), s);
    snprintf(s->backend, sizeof s->backend, "gpu");
}

extern "C" const floe_spec *gpu_cuckoo_spec(const gpu_cuckoo *t)
{
    return &t->spec;
}

extern "C" uint64_t gpu_cuckoo_keys(const gpu_cuckoo *t)
{
    return t->keys;
}

extern "C" uint64_t gpu_cuckoo_generation(const gpu_cuckoo *t)
{
    return t->generation;
}

extern "C" uint64_t gpu_cuckoo_memory(const gpu_cuckoo *t)
{
    return t->bytes + t->values_bytes;
}

extern "C" const floe_cuckoo_geometry *gpu_cuckoo_geometry(const gpu_cuckoo *t)
{
    return &t->g;
}
