/*
 * static_test.cu - part of floe-gpu-tests: STATIC tables on the GPU.
 *
 * The engine (gpu/cuckoo_gpu.h) against a reference (the distinct keys,
 * sorted) and against the CPU engine on fresh random keys of widths 1 to
 * 64, with and without values: every key built in PRESENT with its value,
 * every other key ABSENT (wider ones too); ids distinct slots; the table
 * the device built, copied to the host, answers the CPU engine's finds
 * exactly as the device does (the same layout, bit for bit), and a table
 * the CPU engine built answers on the device as on the host; scans give
 * every key once; a build that cannot place its keys answers FULL and
 * leaves no device memory behind.
 *
 * The backend: a STATIC table filled through the GPU backend (whole, and
 * in 2 parts), by batches with repeats, against the same on the CPU
 * backend: every insert's answers, then the freeze, then finds of hits and
 * misses with ids and values; writes refused with ERR_FROZEN changing
 * nothing; a freeze again changes nothing; a frozen table saved by either
 * backend loads on the other with the same answers; full scans agree.
 */
#include <algorithm>
#include <set>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <vector>

#include "backend.h"
#include "backend_gpu.h"
#include "backend_test.h"
#include "cuckoo.h"
#include "cuckoo_gpu.h"

#define CHECK(cond, ...) EXPECT_OR_RETURN(false, cond, __VA_ARGS__)

static floe_spec static_spec(uint32_t key_bits, uint32_t vb, uint64_t seed)
{
    floe_spec s;
    floe_spec_default(&s);
    strcpy(s.name, "frozen");
    s.kind = FLOE_KIND_STATIC;
    s.key_bits = key_bits;
    s.value_bytes = vb;
    s.capacity = 1024; /* grows while it fills */
    s.grow = true;
    s.seed = seed;
    return s;
}

static uint64_t below(uint64_t *s, uint32_t bits)
{
    return test_rng(s) & floe_mask_bits(bits);
}

/* n distinct keys below 2^key_bits (fewer where there are not that many), shuffled. */
static std::vector<uint64_t> distinct_keys(uint32_t key_bits, size_t n, uint64_t *s)
{
    std::vector<uint64_t> k;
    if (key_bits < 20 && n >= ((size_t)1 << key_bits)) {
        for (uint64_t i = 0; i < ((uint64_t)1 << key_bits); i++)
            k.push_back(i);
    } else {
        k.reserve(n + n / 8);
        while (k.size() < n) {
            for (size_t i = k.size(); i < n + n / 16 + 16; i++)
                k.push_back(below(s, key_bits));
            std::sort(k.begin(), k.end());
            k.erase(std::unique(k.begin(), k.end()), k.end());
        }
        k.resize(n);
    }
    for (size_t i = k.size(); i > 1; i--)
        std::swap(k[i - 1], k[test_rng(s) % i]);
    return k;
}

template <typename T> static T *to_device(const std::vector<T> &v)
{
    T *d = NULL;
    if (cudaMalloc((void **)&d, v.size() * sizeof(T) + 8) != cudaSuccess ||
        cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice) != cudaSuccess)
        return NULL;
    return d;
}

/* The engine: n keys of key_bits with vb-byte values, built on the device. */
static bool engine_case(uint32_t key_bits, size_t n, uint32_t vb, uint64_t seed)
{
    uint64_t s = seed;
    const std::vector<uint64_t> keys = distinct_keys(key_bits, n, &s);
    n = keys.size();
    std::vector<unsigned char> vals(n * vb + 8);
    for (auto &c : vals)
        c = (unsigned char)test_rng(&s);
    std::vector<uint64_t> sorted(keys);
    std::sort(sorted.begin(), sorted.end());
    /* probes: every key, as many others (below 2^key_bits where any are left), some too wide */
    std::vector<uint64_t> probe(keys);
    const bool room = key_bits >= 20 || n < ((size_t)1 << key_bits);
    for (size_t i = 0; i < n && room; i++) {
        uint64_t k;
        do
            k = below(&s, key_bits);
        while (std::binary_search(sorted.begin(), sorted.end(), k));
        probe.push_back(k);
    }
    for (int i = 0; i < 8 && key_bits < 64; i++)
        probe.push_back(keys[0] | (1ull << (key_bits + test_rng(&s) % (64 - key_bits))));
    const size_t np = probe.size();

    floe_spec spec = static_spec(key_bits, vb, seed | 1);
    floe_errinfo err;
    gpu_cuckoo *g = NULL;
    uint64_t *d_keys = to_device(keys);
    unsigned char *d_vals = vb ? to_device(vals) : NULL;
    CHECK(d_keys && (!vb || d_vals), "device buffers");
    floe_status st = gpu_cuckoo_build(&spec, 7, d_keys, d_vals, n, FLOE_CUCKOO_FILL, 0, &g, &err);
    cudaFree(d_keys);
    cudaFree(d_vals);
    CHECK(st == FLOE_OK, "build of %zu keys of %u bits: %s", n, key_bits, err.msg);
    const floe_cuckoo_geometry *geo = gpu_cuckoo_geometry(g);
    const uint64_t slots = floe_cuckoo_slots(geo);
    const uint32_t row_bits = geo->level.row_bits;
    const double fill = (double)n / (double)slots;
    bool ok = n < 20000 || (fill >= 0.95 && fill <= FLOE_CUCKOO_FILL);
    EXPECT_OR_RETURN((gpu_cuckoo_destroy(g), false), ok, "%zu keys: fill %.4f", n, fill);

    std::vector<uint8_t> res(np), hres(np);
    std::vector<uint64_t> ids(np), hids(np);
    std::vector<unsigned char> vout(np * vb + 8), hvout(np * vb + 8);
    st = gpu_cuckoo_find_host(g, probe.data(), np, res.data(), ids.data(), vb ? vout.data() : NULL, &err);
    cuckoo *h = NULL;
    if (st == FLOE_OK)
        st = gpu_cuckoo_download(g, &h, &err);
    if (st != FLOE_OK) {
        gpu_cuckoo_destroy(g);
        CHECK(false, "find or download: %s", err.msg);
    }
    cuckoo_find(h, probe.data(), np, hres.data(), hids.data(), vb ? hvout.data() : NULL, NULL, NULL);
    std::vector<uint64_t> hit_ids;
    for (size_t i = 0; i < np && ok; i++) {
        const bool in = i < n;
        uint64_t v = 0, hv = 0, want = 0;
        memcpy(&v, &vout[i * vb], vb);
        memcpy(&hv, &hvout[i * vb], vb);
        if (in)
            memcpy(&want, &vals[i * vb], vb);
        ok = res[i] == (in ? FLOE_PRESENT : FLOE_ABSENT) && v == want && (in ? ids[i] < slots : ids[i] == FLOE_NO_ID) &&
             hres[i] == res[i] && hids[i] == ids[i] && hv == v;
        if (!ok)
            fprintf(stderr,
                    "FAIL %s:%d: %u bits, key %llu (%s): device %u id %llu value %llu, host %u id %llu value "
                    "%llu, want value %llu\n",
                    __FILE__, __LINE__, key_bits, (unsigned long long)probe[i], in ? "built in" : "not", res[i],
                    (unsigned long long)ids[i], (unsigned long long)v, hres[i], (unsigned long long)hids[i],
                    (unsigned long long)hv, (unsigned long long)want);
        if (in)
            hit_ids.push_back(ids[i]);
    }
    std::sort(hit_ids.begin(), hit_ids.end());
    if (ok && std::adjacent_find(hit_ids.begin(), hit_ids.end()) != hit_ids.end()) {
        fprintf(stderr, "FAIL %s:%d: two keys with one id\n", __FILE__, __LINE__);
        ok = false;
    }
    /* a full scan in pages: every key once, with its value */
    std::vector<uint64_t> scanned, page(1000);
    std::vector<unsigned char> pvals(1000 * vb + 8);
    std::vector<std::pair<uint64_t, uint64_t>> got;
    floe_scan_pos at = {0, 7};
    int done = 0;
    while (ok && !done) {
        size_t m = 0;
        st = gpu_cuckoo_scan(g, &at, page.size(), page.data(), vb ? pvals.data() : NULL, &m, &at, &done, &err);
        ok = st == FLOE_OK;
        for (size_t i = 0; i < m && ok; i++) {
            uint64_t v = 0;
            memcpy(&v, &pvals[i * vb], vb);
            got.push_back({page[i], v});
        }
    }
    std::sort(got.begin(), got.end());
    if (ok) {
        ok = got.size() == n;
        for (size_t i = 0; i < n && ok; i++)
            ok = got[i].first == sorted[i];
        if (!ok)
            fprintf(stderr, "FAIL %s:%d: a scan gave %zu keys, not the %zu built in\n", __FILE__, __LINE__, got.size(),
                    n);
    }
    for (size_t i = 0; i < n && ok && vb; i++) { /* each scanned value the key's */
        uint64_t want = 0;
        memcpy(&want, &vals[i * vb], vb);
        auto it = std::lower_bound(got.begin(), got.end(), std::make_pair(keys[i], (uint64_t)0));
        ok = it != got.end() && it->first == keys[i] && it->second == want;
        if (!ok)
            fprintf(stderr, "FAIL %s:%d: a scan's value of key %llu\n", __FILE__, __LINE__,
                    (unsigned long long)keys[i]);
    }
    cuckoo_destroy(h);
    gpu_cuckoo_destroy(g);
    if (!ok) {
        failures++;
        return false;
    }

    /* the CPU engine's build of the same keys, on the device: the host's answers */
    cuckoo *c = NULL;
    st =
        cuckoo_build(key_bits, vb, seed | 1, FLOE_CUCKOO_FILL, keys.data(), vb ? vals.data() : NULL, n, NULL, &c, &err);
    CHECK(st == FLOE_OK, "the CPU engine's build: %s", err.msg);
    st = gpu_cuckoo_upload(c, &g, &err);
    if (st == FLOE_OK)
        st = gpu_cuckoo_find_host(g, probe.data(), np, res.data(), ids.data(), vb ? vout.data() : NULL, &err);
    cuckoo_find(c, probe.data(), np, hres.data(), hids.data(), vb ? hvout.data() : NULL, NULL, NULL);
    ok = st == FLOE_OK && res == hres && ids == hids && (!vb || memcmp(vout.data(), hvout.data(), np * vb) == 0);
    gpu_cuckoo_destroy(g);
    cuckoo_destroy(c);
    CHECK(ok, "%u bits: the CPU engine's table answers otherwise on the device (%s)", key_bits,
          st == FLOE_OK ? "answers differ" : err.msg);
    printf("static engine: %zu keys of %u bits%s: fill %.4f, %u-bit rows, every answer the reference's and the CPU "
           "engine's\n",
           n, key_bits,
           vb == 8   ? ", 8-byte values"
           : vb == 4 ? ", 4-byte values"
                     : "",
           fill, row_bits);
    return true;
}

/* Keys that cannot all be placed (one key 40 times: two buckets of 16
 * rows): FULL after every size, and no device memory kept. */
static bool unplaceable(void)
{
    std::vector<uint64_t> keys(40, 12345);
    uint64_t *d_keys = to_device(keys);
    CHECK(d_keys, "device buffer");
    size_t free0, free1, total;
    cudaDeviceSynchronize();
    cudaMemGetInfo(&free0, &total);
    floe_spec spec = static_spec(40, 0, 99);
    gpu_cuckoo *g = (gpu_cuckoo *)&spec; /* set to NULL by the build */
    floe_errinfo err;
    const floe_status st = gpu_cuckoo_build(&spec, 1, d_keys, NULL, keys.size(), FLOE_CUCKOO_FILL, 0, &g, &err);
    cudaMemGetInfo(&free1, &total);
    cudaFree(d_keys);
    CHECK(st == FLOE_ERR_FULL && g == NULL, "an unplaceable build: %s (%d)", err.msg, (int)st);
    CHECK(free1 == free0, "an unplaceable build kept %lld bytes of device memory", (long long)free0 - (long long)free1);
    printf("static engine: a build that cannot place its keys: %s\n", err.msg);
    return true;
}

/* ---- through the backends ------------------------------------------------------------------------ */

struct run {
    floe_status st;
    std::vector<uint8_t> res;
    std::vector<uint64_t> ids;
    std::vector<unsigned char> vout;
    floe_errinfo err;
};

static run keys_op(floe_table *t, floe_op op, unsigned flags, const std::vector<uint64_t> &keys,
                   const std::vector<unsigned char> *values, uint32_t vb)
{
    run r;
    r.res.assign(keys.size(), 0xEE);
    r.ids.assign(keys.size(), 0);
    r.vout.assign(keys.size() * vb + 8, 0);
    floe_batch b;
    memset(&b, 0, sizeof b);
    b.op = op;
    b.flags = flags;
    b.keys = keys.data();
    b.n = keys.size();
    b.values = values ? values->data() : NULL;
    b.values_len = values ? keys.size() * vb : 0;
    b.results = r.res.data();
    b.ids = r.ids.data();
    b.values_out = vb ? r.vout.data() : NULL;
    r.st = floe_table_run(t, &b);
    r.err = b.error;
    return r;
}

static floe_status table_op(floe_table *t, floe_op op, const char *path, floe_table_stats *stats = NULL)
{
    floe_batch b;
    memset(&b, 0, sizeof b);
    b.op = op;
    b.path = path;
    const floe_status st = floe_table_run(t, &b);
    if (stats)
        *stats = b.stats;
    return st;
}

/* Every key of t by a full scan, sorted, with its value. */
static std::vector<std::pair<uint64_t, uint64_t>> scan_all(floe_table *t, uint32_t vb)
{
    std::vector<std::pair<uint64_t, uint64_t>> all;
    std::vector<uint64_t> page(4096);
    std::vector<unsigned char> vals(4096 * 8);
    floe_batch b;
    memset(&b, 0, sizeof b);
    for (int done = 0; !done;) {
        const floe_scan_pos at = b.next;
        const bool more = b.op == FLOE_OP_SCAN;
        memset(&b, 0, sizeof b);
        b.op = FLOE_OP_SCAN;
        b.flags = vb ? FLOE_BATCH_WANT_VALUES : 0;
        b.cursor_set = more;
        b.cursor = at;
        b.limit = page.size();
        b.scan_keys = page.data();
        b.scan_values = vals.data();
        if (floe_table_run(t, &b) != FLOE_OK) {
            fprintf(stderr, "scan: %s\n", b.error.msg);
            all.clear();
            all.push_back({~0ull, ~0ull});
            return all;
        }
        for (size_t i = 0; i < b.scan_n; i++) {
            uint64_t v = 0;
            memcpy(&v, &vals[i * vb], vb);
            all.push_back({page[i], v});
        }
        done = b.scan_done;
    }
    std::sort(all.begin(), all.end());
    return all;
}

/* Finds of probe on both tables: the same answers and values; the GPU's ids
 * each a slot of one key. */
static bool same_finds(floe_table *gt, floe_table *ct, const std::vector<uint64_t> &probe, uint32_t vb,
                       const char *what)
{
    const unsigned flags = FLOE_BATCH_WANT_IDS | (vb ? FLOE_BATCH_WANT_VALUES : 0);
    run g = keys_op(gt, FLOE_OP_FIND, flags, probe, NULL, vb), c = keys_op(ct, FLOE_OP_FIND, flags, probe, NULL, vb);
    CHECK(g.st == FLOE_OK && c.st == FLOE_OK, "%s: finds: %s / %s", what, g.err.msg, c.err.msg);
    CHECK(g.res == c.res, "%s: the finds' answers differ", what);
    CHECK(memcmp(g.vout.data(), c.vout.data(), probe.size() * vb) == 0, "%s: the finds' values differ", what);
    std::vector<std::pair<uint64_t, uint64_t>> id_key;
    for (size_t i = 0; i < probe.size(); i++)
        if (g.res[i] == FLOE_PRESENT)
            id_key.push_back({g.ids[i], probe[i]});
        else
            CHECK(g.ids[i] == FLOE_NO_ID, "%s: an absent key's id", what);
    std::sort(id_key.begin(), id_key.end());
    for (size_t i = 1; i < id_key.size(); i++)
        CHECK(id_key[i].first != id_key[i - 1].first || id_key[i].second == id_key[i - 1].second,
              "%s: keys %llu and %llu with one id", what, (unsigned long long)id_key[i].second,
              (unsigned long long)id_key[i - 1].second);
    return true;
}

static bool backend_case(floe_backend *gpu_be, floe_backend *cpu_be, const char *where, uint32_t key_bits, uint32_t vb,
                         size_t batches, size_t batch, uint64_t seed)
{
    uint64_t s = seed;
    const floe_spec spec = static_spec(key_bits, vb, seed | 1);
    floe_errinfo err;
    floe_table *gt = NULL, *ct = NULL;
    CHECK(floe_table_create(gpu_be, &spec, &gt, &err) == FLOE_OK, "%s: create: %s", where, err.msg);
    CHECK(floe_table_create(cpu_be, &spec, &ct, &err) == FLOE_OK, "%s: create on the CPU: %s", where, err.msg);
    /* inserts with repeats, within and across batches */
    const std::vector<uint64_t> pool = distinct_keys(key_bits, batches * batch * 3 / 4, &s);
    std::vector<uint64_t> probe;
    bool ok = true;
    for (size_t k = 0; k < batches && ok; k++) {
        std::vector<uint64_t> keys(batch);
        std::vector<unsigned char> vals(batch * vb + 8);
        for (auto &x : keys)
            x = pool[test_rng(&s) % pool.size()];
        for (auto &c : vals)
            c = (unsigned char)test_rng(&s);
        run g = keys_op(gt, FLOE_OP_INSERT, vb ? FLOE_BATCH_WANT_VALUES : 0, keys, vb ? &vals : NULL, vb);
        run c = keys_op(ct, FLOE_OP_INSERT, vb ? FLOE_BATCH_WANT_VALUES : 0, keys, vb ? &vals : NULL, vb);
        ok = g.st == FLOE_OK && c.st == FLOE_OK && g.res == c.res &&
             memcmp(g.vout.data(), c.vout.data(), batch * vb) == 0;
        EXPECT_OR_RETURN(false, ok, "%s: insert batch %zu: %s / %s%s", where, k, g.err.msg, c.err.msg,
                         g.st == FLOE_OK && c.st == FLOE_OK ? " (answers differ)" : "");
    }
    for (size_t i = 0; i < pool.size(); i++) {
        probe.push_back(pool[i]);
        probe.push_back(below(&s, key_bits));
    }
    floe_table_stats st;
    CHECK(table_op(gt, FLOE_OP_FREEZE, NULL) == FLOE_OK, "%s: freeze", where);
    CHECK(table_op(ct, FLOE_OP_FREEZE, NULL) == FLOE_OK, "%s: freeze on the CPU", where);
    CHECK(table_op(gt, FLOE_OP_STATS, NULL, &st) == FLOE_OK && st.frozen && !strcmp(st.backend, "gpu"),
          "%s: stats after the freeze (frozen %d, backend %s)", where, (int)st.frozen, st.backend);
    floe_table_stats cst;
    CHECK(table_op(ct, FLOE_OP_STATS, NULL, &cst) == FLOE_OK && cst.keys == st.keys, "%s: %llu keys, the CPU's %llu",
          where, (unsigned long long)st.keys, (unsigned long long)cst.keys);
    if (!same_finds(gt, ct, probe, vb, where))
        return false;
    /* writes refused, nothing changed; a freeze again changes nothing */
    std::vector<uint64_t> fresh = {probe[1], probe[3]};
    std::vector<unsigned char> fv(16 + 8, 1);
    run w = keys_op(gt, FLOE_OP_INSERT, 0, fresh, vb ? &fv : NULL, vb);
    CHECK(w.st == FLOE_ERR_FROZEN, "%s: an insert after the freeze: %d %s", where, (int)w.st, w.err.msg);
    CHECK(table_op(gt, FLOE_OP_FREEZE, NULL) == FLOE_OK, "%s: a freeze again", where);
    if (!same_finds(gt, ct, probe, vb, where))
        return false;
    CHECK(scan_all(gt, vb) == scan_all(ct, vb), "%s: full scans differ", where);
    /* files: each backend's loads on the other */
    char gpath[64], cpath[64];
    snprintf(gpath, sizeof gpath, "/tmp/floe-gpu-static-%d.g", (int)getpid());
    snprintf(cpath, sizeof cpath, "/tmp/floe-gpu-static-%d.c", (int)getpid());
    floe_table *g2 = NULL, *c2 = NULL;
    CHECK(table_op(gt, FLOE_OP_SAVE, gpath) == FLOE_OK && table_op(ct, FLOE_OP_SAVE, cpath) == FLOE_OK, "%s: saves",
          where);
    CHECK(floe_table_load(cpu_be, gpath, &c2, &err) == FLOE_OK, "%s: the GPU's file on the CPU: %s", where, err.msg);
    CHECK(floe_table_load(gpu_be, cpath, &g2, &err) == FLOE_OK, "%s: the CPU's file on the GPU: %s", where, err.msg);
    unlink(gpath);
    unlink(cpath);
    ok = same_finds(g2, c2, probe, vb, where) && same_finds(g2, ct, probe, vb, where);
    floe_table_destroy(g2);
    floe_table_destroy(c2);
    floe_table_destroy(gt);
    floe_table_destroy(ct);
    if (ok)
        printf("static %s: %zu batches of %zu keys of %u bits%s, %llu distinct: every answer the CPU backend's before "
               "and after the freeze, writes refused, files across\n",
               where, batches, batch, key_bits, vb ? (vb == 8 ? ", 8-byte values" : ", 4-byte values") : "",
               (unsigned long long)st.keys);
    return ok;
}

void static_suite(uint64_t seed, bool small)
{
    const uint32_t widths[] = {1, 2, 5, 9, 15, 16, 17, 24, 31, 32, 33, 40, 47, 48, 50, 56, 63, 64};
    for (size_t i = 0; i < sizeof widths / sizeof *widths; i++)
        engine_case(widths[i], small ? 3000 : 200000, i % 3 == 0 ? 8 : i % 3 == 1 ? 0 : 4, seed + i);
    if (!small)
        engine_case(40, (size_t)1 << 24, 0, seed + 40);
    unplaceable();
    floe_backend *cpu_be = NULL, *gpu_be = NULL;
    floe_errinfo err;
    if (floe_backend_cpu_create(0, &cpu_be, &err) != FLOE_OK ||
        floe_backend_gpu_create(0, 0, &gpu_be, &err) != FLOE_OK) {
        fprintf(stderr, "FAIL: backends: %s\n", err.msg);
        failures++;
        return;
    }
    const size_t batch = small ? 5000 : 300000;
    backend_case(gpu_be, cpu_be, "whole", 40, 8, 4, batch, seed + 50);
    backend_case(gpu_be, cpu_be, "whole", 64, 0, 3, batch, seed + 51);
    floe_backend *gparts = test_gpu_parts(2), *cparts = test_cpu_parts(2);
    if (gparts && cparts)
        backend_case(gparts, cparts, "in 2 parts", 40, 4, 3, batch, seed + 52);
    floe_backend_destroy(gparts);
    floe_backend_destroy(cparts);
    floe_backend_destroy(gpu_be);
    floe_backend_destroy(cpu_be);
}
