/*
 * tree_test.cu - the GPU TREE engine against the CPU engine (part of
 * floe-gpu-tests).
 *
 * Both engines get the same fresh streams: random walks that change one or
 * two words a step (heavy sharing of subtrees), with ~30% repeats inside and
 * across batches of random sizes, for lengths 2, 3, 16, 17, 64 and 256.
 * Every per-vector answer must be identical; ids may differ (node placement
 * depends on the order of concurrent CASes) but must be consistent: one id
 * per distinct vector, and get_by_id gives the exact vector back.  Both end
 * with the same number of vectors and nodes.  A GPU table saved through the
 * file code and loaded by the CPU engine (and back to the GPU) answers the
 * same.  A full node table answers FULL without a false PRESENT; a growth
 * past a memory limit refuses its batch whole, and one with no free device
 * memory answers FULL.  Then a TREE
 * table through the GPU backend against one through the CPU backend.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <unistd.h>
#include <unordered_map>
#include <vector>

#include "backend.h"
#include "backend_gpu.h"
#include "backend_test.h"
#include "tree.h"
#include "tree_gpu.h"

/* A walk stream: n vectors of W words, values mostly below domain. */
static void walk_stream(uint32_t W, size_t n, uint32_t domain, uint64_t *rng, std::vector<uint32_t> &state,
                        std::vector<uint32_t> &out)
{
    out.resize(n * W);
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && test_rng(rng) % 10 < 3) {
            size_t back = 1 + test_rng(rng) % (i < 64 ? i : 64);
            memcpy(&out[i * W], &out[(i - back) * W], W * 4);
            continue;
        }
        int changes = 1 + (int)(test_rng(rng) % 2);
        for (int c = 0; c < changes; c++) {
            uint64_t r = test_rng(rng);
            uint32_t v = (r & 15) == 0   ? 0xFFFFFFFFu
                         : (r & 15) == 1 ? (uint32_t)(r >> 32)
                                         : (uint32_t)((r >> 32) % domain);
            state[test_rng(rng) % W] = v;
        }
        memcpy(&out[i * W], state.data(), W * 4);
    }
}

static floe_spec tree_spec_for(uint32_t W, uint64_t capacity, uint64_t memory, uint64_t seed)
{
    floe_spec s;
    floe_spec_default(&s);
    strcpy(s.name, "gt");
    s.kind = FLOE_KIND_TREE;
    s.key_bits = 0;
    s.words = W;
    s.capacity = capacity;
    s.memory = memory;
    s.seed = seed | 1;
    return s;
}

static std::string key_of(const uint32_t *v, uint32_t W)
{
    return std::string((const char *)v, W * 4);
}

static void engine_vs_cpu(uint32_t W, size_t total, uint64_t seed)
{
    floe_errinfo err;
    floe_spec spec = tree_spec_for(W, total, (uint64_t)total * W * 16 + (1u << 20), seed);
    tree *cpu = NULL;
    gpu_tree *gpu = NULL;
    EXPECT(tree_create(&spec, NULL, &cpu, &err) == FLOE_OK, "tree_create: %s", err.msg);
    EXPECT(gpu_tree_create(&spec, NULL, &gpu, &err) == FLOE_OK, "gpu_tree_create: %s", err.msg);
    uint64_t rng = seed;
    std::vector<uint32_t> state(W, 0), stream;
    walk_stream(W, total, W > 64 ? 4 : 16, &rng, state, stream);
    std::vector<uint8_t> rc(total), rg(total);
    std::vector<uint64_t> ic(total), ig(total);
    std::unordered_map<std::string, uint64_t> gid;
    size_t at = 0;
    while (at < total) {
        size_t b = 1 + test_rng(&rng) % 5000;
        if (b > total - at)
            b = total - at;
        const uint32_t *v = &stream[at * W];
        EXPECT(tree_insert(cpu, v, b, &rc[at], &ic[at], NULL, &err) == FLOE_OK, "cpu insert: %s", err.msg);
        EXPECT(gpu_tree_insert_host(gpu, v, b, &rg[at], &ig[at], &err) == FLOE_OK, "gpu insert: %s", err.msg);
        for (size_t i = at; i < at + b; i++) {
            EXPECT(rc[i] == rg[i], "W=%u vector %zu: cpu %d gpu %d", W, i, rc[i], rg[i]);
            std::string k = key_of(&stream[i * W], W);
            auto it = gid.find(k);
            if (rg[i] == FLOE_INSERTED) {
                EXPECT(it == gid.end(), "W=%u vector %zu INSERTED twice", W, i);
                gid[k] = ig[i];
            } else {
                EXPECT(it != gid.end() && it->second == ig[i], "W=%u vector %zu: PRESENT with another id", W, i);
            }
        }
        at += b;
    }
    /* get_by_id: every vector back, exactly */
    std::vector<uint64_t> ids;
    std::vector<uint32_t> want;
    for (auto &kv : gid) {
        ids.push_back(kv.second);
        want.insert(want.end(), (const uint32_t *)kv.first.data(), (const uint32_t *)kv.first.data() + W);
    }
    size_t n = ids.size();
    std::vector<uint8_t> res(n);
    std::vector<uint32_t> back(n * W);
    EXPECT(gpu_tree_get_host(gpu, ids.data(), n, res.data(), back.data(), &err) == FLOE_OK, "get: %s", err.msg);
    for (size_t i = 0; i < n; i++)
        EXPECT(res[i] == FLOE_PRESENT && !memcmp(&back[i * W], &want[i * W], W * 4), "W=%u get_by_id %llu differs", W,
               (unsigned long long)ids[i]);
    /* find: stored and never-stored vectors, against the CPU engine */
    std::vector<uint32_t> other, st2(W, 7);
    walk_stream(W, 3000, 1u << 30, &rng, st2, other);
    other.insert(other.end(), stream.begin(), stream.begin() + (total < 3000 ? total : 3000) * W);
    size_t m = other.size() / W;
    std::vector<uint8_t> fc(m), fg(m);
    std::vector<uint64_t> fi(m);
    EXPECT(tree_find(cpu, other.data(), m, fc.data(), NULL, NULL, &err) == FLOE_OK, "cpu find: %s", err.msg);
    EXPECT(gpu_tree_find_host(gpu, other.data(), m, fg.data(), fi.data(), &err) == FLOE_OK, "gpu find: %s", err.msg);
    for (size_t i = 0; i < m; i++) {
        EXPECT(fc[i] == fg[i], "W=%u find %zu: cpu %d gpu %d", W, i, fc[i], fg[i]);
        if (fg[i] == FLOE_PRESENT)
            EXPECT(gid[key_of(&other[i * W], W)] == fi[i], "W=%u find %zu: another id", W, i);
    }
    floe_table_stats sc, sg;
    tree_stats(cpu, &sc);
    EXPECT(gpu_tree_stats(gpu, &sg, &err) == FLOE_OK, "stats: %s", err.msg);
    EXPECT(sc.keys == sg.keys && sg.keys == gid.size(), "W=%u vectors: cpu %llu gpu %llu model %zu", W,
           (unsigned long long)sc.keys, (unsigned long long)sg.keys, gid.size());
    EXPECT(sc.nodes == sg.nodes, "W=%u nodes: cpu %llu gpu %llu", W, (unsigned long long)sc.nodes,
           (unsigned long long)sg.nodes);
    /* save the GPU table through the file code, load it on the CPU, and back */
    char path[] = "/tmp/floe-gtree-XXXXXX";
    int fd = mkstemp(path);
    EXPECT(fd >= 0, "mkstemp");
    close(fd);
    tree *host = NULL, *loaded = NULL;
    EXPECT(tree_create(&spec, NULL, &host, &err) == FLOE_OK, "%s", err.msg);
    EXPECT(gpu_tree_download(gpu, host, &err) == FLOE_OK, "download: %s", err.msg);
    EXPECT(tree_save(host, path, &err) == FLOE_OK, "save: %s", err.msg);
    EXPECT(tree_load(path, 0, NULL, &loaded, &err) == FLOE_OK, "load: %s", err.msg);
    unlink(path);
    EXPECT(tree_get(loaded, ids.data(), n, res.data(), back.data(), NULL, &err) == FLOE_OK, "%s", err.msg);
    for (size_t i = 0; i < n; i++)
        EXPECT(res[i] == FLOE_PRESENT && !memcmp(&back[i * W], &want[i * W], W * 4), "W=%u loaded get differs", W);
    gpu_tree *again = NULL;
    EXPECT(gpu_tree_create(&spec, NULL, &again, &err) == FLOE_OK, "%s", err.msg);
    EXPECT(gpu_tree_upload(again, loaded, &err) == FLOE_OK, "upload: %s", err.msg);
    std::vector<uint64_t> ids2(n);
    EXPECT(gpu_tree_find_host(again, want.data(), n, res.data(), ids2.data(), &err) == FLOE_OK, "%s", err.msg);
    for (size_t i = 0; i < n; i++)
        EXPECT(res[i] == FLOE_PRESENT && ids2[i] == ids[i], "W=%u uploaded find differs", W);
    printf("tree W=%u: %zu vectors (%zu distinct), %llu nodes, compression %.3f: GPU = CPU\n", W, total, gid.size(),
           (unsigned long long)sg.nodes, sg.compression);
    gpu_tree_destroy(again);
    tree_destroy(loaded);
    tree_destroy(host);
    tree_destroy(cpu);
    gpu_tree_destroy(gpu);
}

static void full_is_exact(uint64_t seed)
{
    const uint32_t W = 16;
    floe_errinfo err;
    floe_spec spec = tree_spec_for(W, 4096, 0, seed);
    tree_sizing z;
    EXPECT(tree_size(&spec, &z, &err) == FLOE_OK, "%s", err.msg);
    spec.memory = z.root_bytes + 8192 * 8;
    gpu_tree *gpu = NULL;
    EXPECT(gpu_tree_create(&spec, NULL, &gpu, &err) == FLOE_OK, "%s", err.msg);
    /* A first batch that fits, then one that does not: on the GPU every
     * vector of a batch claims nodes at once, so an overfull batch may leave
     * each of its vectors a partial tree (all FULL, all nodes orphans). */
    size_t n = 4000, first = 400;
    std::vector<uint32_t> v(n * W);
    uint64_t rng = seed;
    for (auto &x : v)
        x = (uint32_t)test_rng(&rng);
    std::vector<uint8_t> r(n), f(n);
    std::vector<uint64_t> id(n), fid(n);
    EXPECT(gpu_tree_insert_host(gpu, v.data(), first, r.data(), id.data(), &err) == FLOE_OK, "%s", err.msg);
    EXPECT(gpu_tree_insert_host(gpu, v.data() + first * W, n - first, r.data() + first, id.data() + first, &err) ==
               FLOE_OK,
           "%s", err.msg);
    EXPECT(gpu_tree_find_host(gpu, v.data(), n, f.data(), fid.data(), &err) == FLOE_OK, "%s", err.msg);
    size_t full = 0, ins = 0;
    for (size_t i = 0; i < n; i++) {
        full += r[i] == FLOE_FULL;
        ins += r[i] == FLOE_INSERTED;
        EXPECT(f[i] == (r[i] == FLOE_FULL ? FLOE_ABSENT : FLOE_PRESENT), "vector %zu: insert %d, find %d", i, r[i],
               f[i]);
        if (r[i] == FLOE_INSERTED)
            EXPECT(fid[i] == id[i], "vector %zu: another id", i);
    }
    floe_table_stats st;
    EXPECT(gpu_tree_stats(gpu, &st, &err) == FLOE_OK, "%s", err.msg);
    EXPECT(full > 0 && ins > 0 && st.keys == ins && st.orphan_nodes > 0, "full %zu ins %zu keys %llu orphans %llu",
           full, ins, (unsigned long long)st.keys, (unsigned long long)st.orphan_nodes);
    printf("tree FULL: %zu of %zu vectors FULL at node fill %.3f, %llu orphan nodes, no false PRESENT\n", full, n,
           st.node_fill, (unsigned long long)st.orphan_nodes);
    gpu_tree_destroy(gpu);
}

/* One TREE table through each backend, the same batches; with parts > 1,
 * tables in that many parts on both (over every GPU, up to parts). */
static void backends_agree(uint64_t seed, bool small, unsigned parts)
{
    const uint32_t W = 17;
    floe_errinfo err;
    floe_backend *gb = NULL, *cb = NULL;
    if (parts > 1) {
        gb = test_gpu_parts(parts);
        cb = test_cpu_parts(parts);
        EXPECT(gb && cb, "backends in %u parts", parts);
    } else {
        EXPECT(floe_backend_gpu_create(0, 0, &gb, &err) == FLOE_OK, "%s", err.msg);
        EXPECT(floe_backend_cpu_create(0, &cb, &err) == FLOE_OK, "%s", err.msg);
    }
    size_t total = small ? 5000 : 200000;
    floe_spec spec = tree_spec_for(W, total, (uint64_t)total * W * 16 + (1u << 20), seed);
    floe_table *gt = NULL, *ct = NULL;
    EXPECT(floe_table_create(gb, &spec, &gt, &err) == FLOE_OK, "%s", err.msg);
    EXPECT(floe_table_create(cb, &spec, &ct, &err) == FLOE_OK, "%s", err.msg);
    uint64_t rng = seed;
    std::vector<uint32_t> state(W, 0), stream;
    walk_stream(W, total, 16, &rng, state, stream);
    std::vector<uint8_t> rg(total), rc(total);
    std::vector<uint64_t> ig(total);
    floe_batch b;
    memset(&b, 0, sizeof b);
    b.op = FLOE_OP_INSERT;
    b.flags = FLOE_BATCH_WANT_IDS;
    b.vectors = stream.data();
    b.n = total;
    b.results = rg.data();
    b.ids = ig.data();
    EXPECT(floe_table_run(gt, &b) == FLOE_OK, "gpu backend insert: %s", b.error.msg);
    uint64_t inserted = b.counts.inserted;
    b.results = rc.data();
    b.ids = NULL;
    b.flags = 0;
    EXPECT(floe_table_run(ct, &b) == FLOE_OK, "cpu backend insert: %s", b.error.msg);
    EXPECT(b.counts.inserted == inserted, "inserted: cpu %llu gpu %llu", (unsigned long long)b.counts.inserted,
           (unsigned long long)inserted);
    for (size_t i = 0; i < total; i++)
        EXPECT(rg[i] == rc[i], "backend answer %zu: cpu %d gpu %d", i, rc[i], rg[i]);
    /* GET through the backend */
    std::vector<uint32_t> back(total * W);
    memset(&b, 0, sizeof b);
    b.op = FLOE_OP_GET;
    b.keys = ig.data();
    b.n = total;
    b.results = rg.data();
    b.vectors_out = back.data();
    EXPECT(floe_table_run(gt, &b) == FLOE_OK, "get: %s", b.error.msg);
    EXPECT(!memcmp(back.data(), stream.data(), total * W * 4), "backend get_by_id differs");
    /* SCAN: every vector once */
    std::unordered_map<std::string, int> seen;
    std::vector<uint64_t> sids(1000);
    std::vector<uint32_t> svec(1000 * W);
    floe_scan_pos cur = {0, 0};
    int first = 1, done = 0;
    while (!done) {
        memset(&b, 0, sizeof b);
        b.op = FLOE_OP_SCAN;
        b.cursor = cur;
        b.cursor_set = !first;
        b.limit = 1000;
        b.scan_keys = sids.data();
        b.scan_vectors = svec.data();
        EXPECT(floe_table_run(gt, &b) == FLOE_OK, "scan: %s", b.error.msg);
        for (size_t k = 0; k < b.scan_n; k++)
            EXPECT(++seen[key_of(&svec[k * W], W)] == 1, "scan returned a vector twice");
        cur = b.next;
        done = b.scan_done;
        first = 0;
    }
    EXPECT(seen.size() == inserted, "scan: %zu vectors, %llu inserted", seen.size(), (unsigned long long)inserted);
    /* STATS, SAVE on the GPU, LOAD on the CPU backend */
    memset(&b, 0, sizeof b);
    b.op = FLOE_OP_STATS;
    EXPECT(floe_table_run(gt, &b) == FLOE_OK, "stats: %s", b.error.msg);
    EXPECT(b.stats.keys == inserted && !strcmp(b.stats.backend, "gpu"), "stats keys %llu",
           (unsigned long long)b.stats.keys);
    char path[] = "/tmp/floe-gtreeb-XXXXXX";
    int fd = mkstemp(path);
    EXPECT(fd >= 0, "mkstemp");
    close(fd);
    memset(&b, 0, sizeof b);
    b.op = FLOE_OP_SAVE;
    b.path = path;
    EXPECT(floe_table_run(gt, &b) == FLOE_OK, "save: %s", b.error.msg);
    floe_table *lt = NULL;
    EXPECT(floe_table_load(cb, path, &lt, &err) == FLOE_OK, "load on cpu: %s", err.msg);
    floe_table *lg = NULL;
    EXPECT(floe_table_load(gb, path, &lg, &err) == FLOE_OK, "load on gpu: %s", err.msg);
    unlink(path);
    for (floe_table *t : {lt, lg}) {
        memset(&b, 0, sizeof b);
        b.op = FLOE_OP_FIND;
        b.flags = FLOE_BATCH_WANT_IDS;
        b.vectors = stream.data();
        b.n = total;
        b.results = rc.data();
        std::vector<uint64_t> fi(total);
        b.ids = fi.data();
        EXPECT(floe_table_run(t, &b) == FLOE_OK, "find after load: %s", b.error.msg);
        EXPECT(b.counts.present == total, "after load: %llu of %zu present", (unsigned long long)b.counts.present,
               total);
        EXPECT(!memcmp(fi.data(), ig.data(), total * 8), "after load: ids differ");
    }
    /* refused on a TREE at the door (floe_request_check, whatever the backend): erase, rebuild, MAP
     * flags and values, a GET without a vectors buffer; none changes anything */
    EXPECT(floe_request_check(&gt->spec, FLOE_OP_ERASE, 0, stream.data(), (size_t)W * 4, NULL, 0, NULL, &err) ==
                   FLOE_ERR_UNSUPPORTED &&
               strstr(err.msg, "TREE tables do not erase"),
           "the door on erase: %s", err.msg);
    for (int k = 0; k < 5; k++) {
        static const floe_status want[5] = {FLOE_ERR_UNSUPPORTED, FLOE_ERR_UNSUPPORTED, FLOE_ERR_INVALID,
                                            FLOE_ERR_INVALID, FLOE_ERR_INVALID};
        static const char *const words[5] = {"do not erase", "do not rebuild", "values and overwrite are for MAP",
                                             "values and overwrite are for MAP", "needs a vectors buffer"};
        uint64_t v = 1;
        memset(&b, 0, sizeof b);
        b.op = k == 0 ? FLOE_OP_ERASE : k == 1 ? FLOE_OP_REBUILD : k == 4 ? FLOE_OP_GET : FLOE_OP_INSERT;
        b.flags = k == 2 ? FLOE_BATCH_OVERWRITE : 0;
        b.vectors = stream.data();
        b.keys = k == 4 ? ig.data() : NULL;
        b.n = k == 1 ? 0 : 1;
        b.values = k == 3 ? &v : NULL;
        b.values_len = k == 3 ? 8 : 0;
        b.results = rc.data();
        EXPECT(floe_table_run(gt, &b) == want[k] && strstr(b.error.msg, words[k]), "refusal %d on a TREE: %d (%s)", k,
               (int)b.status, b.error.msg);
    }
    memset(&b, 0, sizeof b);
    b.op = FLOE_OP_STATS;
    EXPECT(floe_table_run(gt, &b) == FLOE_OK && b.stats.keys == inserted, "after the refusals: %llu keys, not %llu",
           (unsigned long long)b.stats.keys, (unsigned long long)inserted);
    printf("tree backends%s: %zu vectors through the GPU and CPU backends agree (insert, get, scan, save/load)\n",
           parts > 1 ? " in parts" : "", total);
    floe_table_destroy(lg);
    floe_table_destroy(lt);
    floe_table_destroy(gt);
    floe_table_destroy(ct);
    floe_backend_destroy(gb);
    floe_backend_destroy(cb);
}

/* The GPU engine and the CPU engine, both growing from 64 vectors, the same
 * batches (one larger than the table at once, which the GPU engine grows
 * for in a growth or two): the same answers, never FULL, each batch's ids
 * giving its vectors back in the generation after it, and every vector
 * there at the end. */
static void engine_grows(uint32_t W, size_t total, uint64_t seed)
{
    floe_errinfo err;
    floe_spec spec = tree_spec_for(W, 64, 0, seed);
    spec.grow = true;
    tree *cpu = NULL;
    gpu_tree *gpu = NULL;
    EXPECT(tree_create(&spec, NULL, &cpu, &err) == FLOE_OK, "tree_create: %s", err.msg);
    EXPECT(gpu_tree_create(&spec, NULL, &gpu, &err) == FLOE_OK, "gpu_tree_create: %s", err.msg);
    uint64_t rng = seed;
    std::vector<uint32_t> state(W, 0), stream, back;
    walk_stream(W, total, 1u << 12, &rng, state, stream);
    std::vector<uint8_t> rc(total), rg(total), rr(total);
    std::vector<uint64_t> ig(total);
    for (size_t at = 0, k = 0; at < total; k++) {
        size_t b = k == 1 ? 20000 : 1 + test_rng(&rng) % 3000; /* the second batch: far more than the table holds */
        if (b > total - at)
            b = total - at;
        const uint32_t *v = &stream[at * W];
        const uint64_t gen = gpu_tree_generation(gpu);
        const tree_sizing z0 = *gpu_tree_sizes(gpu);
        EXPECT(tree_insert(cpu, v, b, &rc[at], NULL, NULL, &err) == FLOE_OK, "cpu insert: %s", err.msg);
        EXPECT(gpu_tree_insert_host(gpu, v, b, &rg[at], &ig[at], &err) == FLOE_OK, "gpu insert: %s", err.msg);
        if (k == 1) { /* sized for the batch at the last one's rates: fewer growths than steps of 1.5 or 4/3 */
            const tree_sizing *z1 = gpu_tree_sizes(gpu);
            const int node_steps =
                          2 * ((int)z1->node_bits - (int)z0.node_bits) + (int)z1->node_three - (int)z0.node_three,
                      root_steps = 2 * ((int)z1->root_addr_bits - (int)z0.root_addr_bits) + (int)z1->root_three -
                                   (int)z0.root_three;
            const int steps = node_steps > root_steps ? node_steps : root_steps;
            const uint64_t growths = gpu_tree_generation(gpu) - gen;
            EXPECT(steps >= 4 && growths < (uint64_t)steps,
                   "W=%u: a batch of %zu grew the table %llu times, %d node steps, %d root steps", W, b,
                   (unsigned long long)growths, node_steps, root_steps);
            printf("tree engine growing, W=%u: a batch of %zu, %llu growths for %d node and %d root steps\n", W, b,
                   (unsigned long long)growths, node_steps, root_steps);
        }
        for (size_t i = at; i < at + b; i++)
            EXPECT(rc[i] == rg[i] && rg[i] != FLOE_FULL, "W=%u growing vector %zu: cpu %d gpu %d", W, i, rc[i], rg[i]);
        back.resize(b * W);
        EXPECT(gpu_tree_get_host(gpu, &ig[at], b, &rr[at], back.data(), &err) == FLOE_OK, "get: %s", err.msg);
        EXPECT(!memcmp(back.data(), v, b * W * 4), "W=%u: the ids of the batch at %zu do not give its vectors back", W,
               at);
        at += b;
    }
    floe_table_stats sg, sc;
    EXPECT(gpu_tree_stats(gpu, &sg, &err) == FLOE_OK, "%s", err.msg);
    tree_stats(cpu, &sc);
    /* grown at least once: how often depends on the sizing (a growth sized for the large batch at the
     * first one's rates may hold the rest; seed 1796133956, W=3: one growth) */
    EXPECT(sg.keys == sc.keys && sg.generation >= 1 && sg.generation == gpu_tree_generation(gpu),
           "W=%u growing: gpu %llu vectors, cpu %llu, generation %llu", W, (unsigned long long)sg.keys,
           (unsigned long long)sc.keys, (unsigned long long)sg.generation);
    EXPECT(gpu_tree_find_host(gpu, stream.data(), total, rg.data(), ig.data(), &err) == FLOE_OK, "%s", err.msg);
    for (size_t i = 0; i < total; i++)
        EXPECT(rg[i] == FLOE_PRESENT, "W=%u growing: vector %zu lost", W, i);
    printf("tree engine growing, W=%u: %llu vectors, %llu generations, node fill %.2f\n", W,
           (unsigned long long)sg.keys, (unsigned long long)sg.generation, sg.node_fill);
    tree_destroy(cpu);
    gpu_tree_destroy(gpu);
}

/* The limit gpu_tree_set_limit asks: a growth fits while its bytes are at most *ctx. */
static bool bytes_at_most(void *ctx, uint64_t bytes)
{
    return bytes <= *(const uint64_t *)ctx;
}

/* A growing table of W words made for 64 vectors, and its spec; NULL (a
 * failure counted) where it cannot be made. */
static gpu_tree *small_growing_table(uint32_t W, uint64_t seed, floe_spec *spec)
{
    floe_errinfo err;
    *spec = tree_spec_for(W, 64, 0, seed);
    spec->grow = true;
    gpu_tree *gpu = NULL;
    EXPECT_OR_RETURN(NULL, gpu_tree_create(spec, NULL, &gpu, &err) == FLOE_OK, "%s", err.msg);
    return gpu;
}

/* Under a limit (maxmemory-gpu's): a growing table's first batch, which no
 * growth before it foresees (no rates yet) and whose fold meets a full node
 * table, answers ERR_NO_MEMORY with none of its vectors stored and the
 * table as it was; with the limit lifted the same batch is stored whole. */
static void limit_refuses_growth(uint64_t seed)
{
    const uint32_t W = 8;
    const size_t n = 20000;
    floe_errinfo err;
    floe_spec spec;
    gpu_tree *gpu = small_growing_table(W, seed, &spec);
    if (!gpu)
        return;
    uint64_t allowed = 0;
    gpu_tree_set_limit(gpu, bytes_at_most, &allowed);
    std::vector<uint32_t> v(n * W);
    uint64_t rng = seed;
    for (auto &x : v)
        x = (uint32_t)test_rng(&rng); /* random vectors: every one new, W - 2 nodes each */
    std::vector<uint8_t> r(n);
    std::vector<uint64_t> id(n);
    const tree_sizing z0 = *gpu_tree_sizes(gpu);
    const floe_status st = gpu_tree_insert_host(gpu, v.data(), n, r.data(), id.data(), &err);
    EXPECT(st == FLOE_ERR_NO_MEMORY && strstr(err.msg, "maxmemory-gpu") && strstr(err.msg, "nothing stored"),
           "a batch past the limit: %s (%s)", floe_status_name(st), err.msg);
    const std::string refused = err.msg;
    floe_table_stats s;
    EXPECT(gpu_tree_stats(gpu, &s, &err) == FLOE_OK, "%s", err.msg);
    EXPECT(s.keys == 0 && gpu_tree_generation(gpu) == 0 && gpu_tree_sizes(gpu)->node_bits == z0.node_bits,
           "refused: %llu vectors, generation %llu", (unsigned long long)s.keys,
           (unsigned long long)gpu_tree_generation(gpu));
    EXPECT(gpu_tree_find_host(gpu, v.data(), n, r.data(), id.data(), &err) == FLOE_OK, "%s", err.msg);
    for (size_t i = 0; i < n; i++)
        EXPECT(r[i] == FLOE_ABSENT, "refused vector %zu: find %d", i, r[i]);
    allowed = UINT64_MAX;
    EXPECT(gpu_tree_insert_host(gpu, v.data(), n, r.data(), id.data(), &err) == FLOE_OK, "%s", err.msg);
    for (size_t i = 0; i < n; i++)
        EXPECT(r[i] == FLOE_INSERTED, "vector %zu under no limit: %d", i, r[i]);
    EXPECT(gpu_tree_find_host(gpu, v.data(), n, r.data(), id.data(), &err) == FLOE_OK, "%s", err.msg);
    for (size_t i = 0; i < n; i++)
        EXPECT(r[i] == FLOE_PRESENT, "vector %zu under no limit: find %d", i, r[i]);
    EXPECT(gpu_tree_stats(gpu, &s, &err) == FLOE_OK && s.keys == n, "%llu vectors", (unsigned long long)s.keys);
    /* the refusal left nothing that makes the batch's growths more than in a table that never met the limit */
    gpu_tree *fresh = NULL;
    EXPECT(gpu_tree_create(&spec, NULL, &fresh, &err) == FLOE_OK, "%s", err.msg);
    EXPECT(gpu_tree_insert_host(fresh, v.data(), n, r.data(), id.data(), &err) == FLOE_OK, "%s", err.msg);
    EXPECT(gpu_tree_generation(gpu) <= gpu_tree_generation(fresh), "%llu growths after the refusal, %llu without",
           (unsigned long long)gpu_tree_generation(gpu), (unsigned long long)gpu_tree_generation(fresh));
    printf("tree growth under a limit: refused whole (%s), then %zu vectors in %llu growths (%llu in a fresh "
           "table)\n",
           refused.c_str(), n, (unsigned long long)gpu_tree_generation(gpu),
           (unsigned long long)gpu_tree_generation(fresh));
    gpu_tree_destroy(fresh);
    gpu_tree_destroy(gpu);
}

/* A growth with no free device memory (every byte taken, as another
 * process might): the batch that needs it answers ERR_FULL ("could not
 * grow"), not an error of the device, with none of its vectors stored and
 * the ones before found; with the memory back the same batch is stored
 * whole. */
static void growth_without_device_memory(uint64_t seed)
{
    const uint32_t W = 8;
    const size_t n = 20000;
    floe_errinfo err;
    floe_spec spec;
    gpu_tree *gpu = small_growing_table(W, seed, &spec);
    if (!gpu)
        return;
    std::vector<uint32_t> a(n * W), b(n * W);
    uint64_t rng = seed;
    for (size_t i = 0; i < n * W; i++) { /* random vectors: every one new, W - 2 nodes each */
        a[i] = (uint32_t)test_rng(&rng);
        b[i] = (uint32_t)test_rng(&rng);
    }
    std::vector<uint8_t> r(n);
    uint32_t *dv = NULL;
    uint8_t *dr = NULL;
    EXPECT(cudaMalloc(&dv, n * W * 4) == cudaSuccess && cudaMalloc(&dr, n) == cudaSuccess, "device buffers");
    /* the first batch sizes the batch scratch for this size */
    EXPECT(cudaMemcpy(dv, a.data(), n * W * 4, cudaMemcpyHostToDevice) == cudaSuccess, "copy");
    EXPECT(gpu_tree_insert(gpu, dv, n, dr, NULL, 0, &err) == FLOE_OK, "%s", err.msg);
    const uint64_t gen = gpu_tree_generation(gpu);
    device_hog hog;
    hog.take_all();
    EXPECT(cudaMemcpy(dv, b.data(), n * W * 4, cudaMemcpyHostToDevice) == cudaSuccess, "copy");
    const floe_status st = gpu_tree_insert(gpu, dv, n, dr, NULL, 0, &err);
    const std::string answer = err.msg;
    hog.release();
    EXPECT(st == FLOE_ERR_FULL && strstr(answer.c_str(), "could not grow"),
           "a batch whose growth has no device memory: %s (%s)", floe_status_name(st), answer.c_str());
    EXPECT(gpu_tree_generation(gpu) == gen, "%llu growths with no device memory",
           (unsigned long long)(gpu_tree_generation(gpu) - gen));
    EXPECT(gpu_tree_find_host(gpu, a.data(), n, r.data(), NULL, &err) == FLOE_OK, "%s", err.msg);
    for (size_t i = 0; i < n; i++)
        EXPECT(r[i] == FLOE_PRESENT, "vector %zu of the first batch: find %d", i, r[i]);
    EXPECT(gpu_tree_find_host(gpu, b.data(), n, r.data(), NULL, &err) == FLOE_OK, "%s", err.msg);
    for (size_t i = 0; i < n; i++)
        EXPECT(r[i] == FLOE_ABSENT, "vector %zu of the batch that could not grow: find %d", i, r[i]);
    EXPECT(gpu_tree_insert_host(gpu, b.data(), n, r.data(), NULL, &err) == FLOE_OK, "%s", err.msg);
    for (size_t i = 0; i < n; i++)
        EXPECT(r[i] == FLOE_INSERTED, "vector %zu with the memory back: %d", i, r[i]);
    floe_table_stats s;
    EXPECT(gpu_tree_stats(gpu, &s, &err) == FLOE_OK && s.keys == 2 * n, "%llu vectors", (unsigned long long)s.keys);
    printf("tree growth with no free device memory: %s (%s); %zu vectors with the memory back\n", floe_status_name(st),
           answer.c_str(), n);
    cudaFree(dv);
    cudaFree(dr);
    gpu_tree_destroy(gpu);
}

/* A batch through a table, waiting; the answers' status. */
static floe_status run_vectors(floe_table *t, floe_op op, const uint32_t *v, size_t n, uint8_t *res, uint64_t *ids,
                               floe_batch *b)
{
    memset(b, 0, sizeof *b);
    b->op = op;
    b->flags = ids ? FLOE_BATCH_WANT_IDS : 0;
    b->vectors = v;
    b->n = n;
    b->results = res;
    b->ids = ids;
    return floe_table_run(t, b);
}

/* A TREE that grows (spec.grow), created for 64 vectors, through the GPU
 * and the CPU backend, the same batches: the same answers and never FULL;
 * each batch's ids name its vectors in the generation after it (get_by_id
 * gives them back); the GPU table grew several times; saved on the GPU, it
 * loads on the CPU with the same ids. */
static void backends_grow(uint64_t seed, bool small)
{
    const uint32_t W = 17;
    floe_errinfo err;
    floe_backend *gb = NULL, *cb = NULL;
    EXPECT(floe_backend_gpu_create(0, 0, &gb, &err) == FLOE_OK, "%s", err.msg);
    EXPECT(floe_backend_cpu_create(0, &cb, &err) == FLOE_OK, "%s", err.msg);
    const size_t total = small ? 30000 : 600000;
    floe_spec spec = tree_spec_for(W, 64, 0, seed);
    spec.grow = true;
    floe_table *gt = NULL, *ct = NULL;
    EXPECT(floe_table_create(gb, &spec, &gt, &err) == FLOE_OK, "%s", err.msg);
    EXPECT(floe_table_create(cb, &spec, &ct, &err) == FLOE_OK, "%s", err.msg);
    uint64_t rng = seed;
    std::vector<uint32_t> state(W, 0), stream;
    walk_stream(W, total, 1u << 12, &rng, state, stream);
    std::vector<uint8_t> rg(total), rc(total), rr(total);
    std::vector<uint64_t> ig(total);
    std::vector<uint32_t> back(total * W);
    floe_batch b;
    uint64_t inserted = 0, generations = 0;
    for (size_t at = 0; at < total;) {
        size_t n = 1 + test_rng(&rng) % (small ? 3000 : 40000);
        if (n > total - at)
            n = total - at;
        const uint32_t *v = &stream[at * W];
        EXPECT(run_vectors(gt, FLOE_OP_INSERT, v, n, &rg[at], &ig[at], &b) == FLOE_OK, "gpu insert: %s", b.error.msg);
        inserted += b.counts.inserted;
        EXPECT(run_vectors(ct, FLOE_OP_INSERT, v, n, &rc[at], NULL, &b) == FLOE_OK, "cpu insert: %s", b.error.msg);
        for (size_t i = at; i < at + n; i++)
            EXPECT(rg[i] == rc[i] && rg[i] != FLOE_FULL, "growing: vector %zu cpu %d gpu %d", i, rc[i], rg[i]);
        /* the batch's ids, in the generation it left the table at */
        memset(&b, 0, sizeof b);
        b.op = FLOE_OP_GET;
        b.keys = &ig[at];
        b.n = n;
        b.results = &rr[at];
        b.vectors_out = &back[at * W];
        EXPECT(floe_table_run(gt, &b) == FLOE_OK, "get: %s", b.error.msg);
        EXPECT(b.counts.present == n && !memcmp(&back[at * W], v, n * W * 4),
               "growing: the ids of the batch at %zu do not give its vectors back", at);
        at += n;
    }
    memset(&b, 0, sizeof b);
    b.op = FLOE_OP_STATS;
    EXPECT(floe_table_run(gt, &b) == FLOE_OK, "stats: %s", b.error.msg);
    generations = b.stats.generation;
    EXPECT(generations >= 3 && b.stats.keys == inserted, "growing: generation %llu, keys %llu of %llu",
           (unsigned long long)generations, (unsigned long long)b.stats.keys, (unsigned long long)inserted);
    const double used = b.stats.compression * (double)inserted * W * 4;
    printf("tree growing: %llu vectors, generation %llu, %.1f bytes a vector allocated, %.1f used\n",
           (unsigned long long)inserted, (unsigned long long)generations, (double)b.stats.memory_bytes / inserted,
           used / inserted);
    /* every id of the last generation, saved on the GPU and loaded on the CPU: the same ids */
    EXPECT(run_vectors(gt, FLOE_OP_FIND, stream.data(), total, rg.data(), ig.data(), &b) == FLOE_OK &&
               b.counts.present == total,
           "find after growth: %s", b.error.msg);
    char path[] = "/tmp/floe-gtreeg-XXXXXX";
    int fd = mkstemp(path);
    EXPECT(fd >= 0, "mkstemp");
    close(fd);
    memset(&b, 0, sizeof b);
    b.op = FLOE_OP_SAVE;
    b.path = path;
    EXPECT(floe_table_run(gt, &b) == FLOE_OK, "save: %s", b.error.msg);
    floe_table *lt = NULL;
    EXPECT(floe_table_load(cb, path, &lt, &err) == FLOE_OK, "load on cpu: %s", err.msg);
    unlink(path);
    std::vector<uint64_t> il(total);
    EXPECT(run_vectors(lt, FLOE_OP_FIND, stream.data(), total, rc.data(), il.data(), &b) == FLOE_OK &&
               b.counts.present == total && !memcmp(il.data(), ig.data(), total * 8),
           "after load on the cpu: other answers or ids");
    memset(&b, 0, sizeof b);
    b.op = FLOE_OP_STATS;
    EXPECT(floe_table_run(lt, &b) == FLOE_OK && b.stats.generation == generations, "loaded generation %llu",
           (unsigned long long)b.stats.generation);
    floe_table_destroy(lt);
    floe_table_destroy(gt);
    floe_table_destroy(ct);
    floe_backend_destroy(gb);
    floe_backend_destroy(cb);
}

/* A batch of states by their parents through a table, waiting. */
static floe_status run_states(floe_table *t, uint64_t generation, const uint64_t *parents, const uint8_t *counts,
                              const uint8_t *changes, size_t changes_len, size_t n, uint8_t *res, uint64_t *ids,
                              floe_batch *b)
{
    memset(b, 0, sizeof *b);
    b->op = FLOE_OP_INSERT;
    b->flags = FLOE_BATCH_WANT_IDS;
    b->parents = parents;
    b->change_counts = counts;
    b->changes = changes;
    b->changes_len = changes_len;
    b->parent_generation = generation;
    b->n = n;
    b->results = res;
    b->ids = ids;
    return floe_table_run(t, b);
}

/* States by their parents through the GPU backend and the CPU backend, both
 * growing from 64 vectors: each backend names the parents by its own ids,
 * the changes are the same, and so are the answers; a parent of an old
 * generation or that names no vector is refused, changing nothing. */
static void backends_states(uint64_t seed, bool small)
{
    const uint32_t W = 16;
    floe_errinfo err;
    floe_backend *gb = NULL, *cb = NULL;
    EXPECT(floe_backend_gpu_create(0, 0, &gb, &err) == FLOE_OK, "%s", err.msg);
    EXPECT(floe_backend_cpu_create(0, &cb, &err) == FLOE_OK, "%s", err.msg);
    floe_spec spec = tree_spec_for(W, 64, 0, seed);
    spec.grow = true;
    floe_table *tab[2] = {NULL, NULL}; /* gpu, cpu */
    EXPECT(floe_table_create(gb, &spec, &tab[0], &err) == FLOE_OK, "%s", err.msg);
    EXPECT(floe_table_create(cb, &spec, &tab[1], &err) == FLOE_OK, "%s", err.msg);
    uint64_t rng = seed;
    const size_t seeds = 256, rounds = small ? 6 : 40, B = small ? 4000 : 100000;
    std::vector<uint32_t> state(W, 0), known, v(B * W);
    walk_stream(W, seeds, 8, &rng, state, known);
    std::vector<uint64_t> ids[2] = {std::vector<uint64_t>(seeds), std::vector<uint64_t>(seeds)};
    std::vector<uint8_t> res[2] = {std::vector<uint8_t>(B), std::vector<uint8_t>(B)};
    std::vector<uint64_t> got[2] = {std::vector<uint64_t>(B), std::vector<uint64_t>(B)};
    uint64_t gen[2];
    floe_batch b;
    for (int k = 0; k < 2; k++) {
        EXPECT(run_vectors(tab[k], FLOE_OP_INSERT, known.data(), seeds, res[k].data(), ids[k].data(), &b) == FLOE_OK,
               "seed: %s", b.error.msg);
        gen[k] = b.generation;
    }
    std::vector<uint64_t> parents[2] = {std::vector<uint64_t>(B), std::vector<uint64_t>(B)};
    std::vector<uint8_t> counts(B), changes(B * 2 * FLOE_CHANGE_BYTES);
    for (size_t round = 0; round < rounds; round++) {
        size_t nc = 0;
        const size_t stored = ids[0].size();
        for (size_t i = 0; i < B; i++) {
            const size_t p = test_rng(&rng) % stored;
            memcpy(&v[i * W], &known[p * W], W * 4);
            parents[0][i] = ids[0][p];
            parents[1][i] = ids[1][p];
            counts[i] = (uint8_t)(1 + test_rng(&rng) % 2);
            for (unsigned c = 0; c < counts[i]; c++, nc++) {
                const uint32_t word = (uint32_t)(test_rng(&rng) % W), value = (uint32_t)(test_rng(&rng) % 8);
                floe_change_put(&changes[nc * FLOE_CHANGE_BYTES], word, value);
                v[i * W + word] = value;
            }
        }
        for (int k = 0; k < 2; k++) {
            EXPECT(run_states(tab[k], gen[k], parents[k].data(), counts.data(), changes.data(), nc * FLOE_CHANGE_BYTES,
                              B, res[k].data(), got[k].data(), &b) == FLOE_OK,
                   "%s states: %s", k ? "cpu" : "gpu", b.error.msg);
            if (b.generation != gen[k]) { /* it grew: the known states' ids of the new generation */
                std::vector<uint8_t> f(ids[k].size());
                EXPECT(run_vectors(tab[k], FLOE_OP_FIND, known.data(), ids[k].size(), f.data(), ids[k].data(), &b) ==
                           FLOE_OK,
                       "find: %s", b.error.msg);
                /* parents of the old generation: refused, nothing changed */
                floe_batch r;
                EXPECT(run_states(tab[k], gen[k], parents[k].data(), counts.data(), changes.data(),
                                  counts[0] * FLOE_CHANGE_BYTES, 1, res[k].data(), got[k].data(),
                                  &r) == FLOE_ERR_INVALID &&
                           strstr(r.error.msg, "generation"),
                       "%s: parents of an old generation: %s", k ? "cpu" : "gpu", r.error.msg);
                gen[k] = b.generation;
            }
        }
        for (size_t i = 0; i < B; i++) {
            EXPECT(res[0][i] == res[1][i] && res[0][i] != FLOE_FULL, "state %zu of round %zu: gpu %d cpu %d", i, round,
                   res[0][i], res[1][i]);
            if (res[0][i] == FLOE_INSERTED) {
                known.insert(known.end(), &v[i * W], &v[i * W] + W);
                ids[0].push_back(got[0][i]);
                ids[1].push_back(got[1][i]);
            }
        }
    }
    /* every id of the last generation gives its vector back, on the GPU */
    const size_t n = ids[0].size();
    std::vector<uint8_t> r(n);
    std::vector<uint32_t> back(n * W);
    memset(&b, 0, sizeof b);
    b.op = FLOE_OP_GET;
    b.keys = ids[0].data();
    b.n = n;
    b.results = r.data();
    b.vectors_out = back.data();
    EXPECT(floe_table_run(tab[0], &b) == FLOE_OK && b.counts.present == n &&
               !memcmp(back.data(), known.data(), n * W * 4),
           "gpu: ids after states by parent do not give the vectors back");
    /* a parent that names no vector: refused on the GPU, nothing changed */
    memset(&b, 0, sizeof b);
    b.op = FLOE_OP_STATS;
    floe_table_run(tab[0], &b);
    const uint64_t keys = b.stats.keys;
    parents[0][0] = ids[0][0];
    parents[0][1] = (uint64_t)1 << 50;
    counts[0] = counts[1] = 1;
    floe_change_put(&changes[0], 0, 0xABCDu);
    floe_change_put(&changes[FLOE_CHANGE_BYTES], 1, 0xABCDu);
    floe_batch bad;
    EXPECT(run_states(tab[0], gen[0], parents[0].data(), counts.data(), changes.data(), 2 * FLOE_CHANGE_BYTES, 2,
                      res[0].data(), got[0].data(), &bad) == FLOE_ERR_INVALID &&
               strstr(bad.error.msg, "names no vector"),
           "gpu: a parent that names no vector: %s", bad.error.msg);
    memset(&b, 0, sizeof b);
    b.op = FLOE_OP_STATS;
    floe_table_run(tab[0], &b);
    EXPECT(b.stats.keys == keys, "gpu: a refused batch changed the table (%llu -> %llu vectors)",
           (unsigned long long)keys, (unsigned long long)b.stats.keys);
    printf("tree states by parent: %zu rounds of %zu, gpu and cpu backends agree; generation %llu\n", rounds, B,
           (unsigned long long)gen[0]);
    floe_table_destroy(tab[0]);
    floe_table_destroy(tab[1]);
    floe_backend_destroy(gb);
    floe_backend_destroy(cb);
}

/* States by parent through the engines themselves (gpu_tree_insert_delta
 * against tree_insert_delta): fresh random states of 0 to 2 changes, a few
 * of 9 to 24 (more than a path fold takes: unfolded and folded whole),
 * words changed twice, exact repeats and different parents that give one
 * vector, for every shape of tree (W 2: the root pair is the words; odd
 * levels carried up).  Each engine names parents by its own ids; the
 * answers must be the same, one id per distinct vector, and the ids give
 * the vectors back.  A growing pair starts at 64 vectors (node growths send
 * states whole, root growths keep their paths' keys); a fixed pair must end
 * with the same vectors and nodes.  A parent that names no vector fails the
 * batch and changes nothing. */
static void engine_delta(uint32_t W, bool grow, size_t rounds, size_t B, uint64_t seed)
{
    floe_errinfo err;
    floe_spec spec = tree_spec_for(W, grow ? 64 : rounds * B + 1024, 0, seed);
    spec.grow = grow;
    tree *cpu = NULL;
    gpu_tree *gpu = NULL;
    EXPECT(tree_create(&spec, NULL, &cpu, &err) == FLOE_OK, "tree_create: %s", err.msg);
    EXPECT(gpu_tree_create(&spec, NULL, &gpu, &err) == FLOE_OK, "gpu_tree_create: %s", err.msg);
    uint64_t rng = seed;
    const uint32_t domain = 6;
    std::vector<uint32_t> state(W, 0), known;
    walk_stream(W, 64, domain, &rng, state, known);
    { /* the first parents, whole, each distinct one kept in `known` */
        std::vector<uint8_t> rc(64), rg(64);
        EXPECT(tree_insert(cpu, known.data(), 64, rc.data(), NULL, NULL, &err) == FLOE_OK, "%s", err.msg);
        EXPECT(gpu_tree_insert_host(gpu, known.data(), 64, rg.data(), NULL, &err) == FLOE_OK, "%s", err.msg);
        std::vector<uint32_t> distinct;
        for (size_t i = 0; i < 64; i++)
            if (rc[i] == FLOE_INSERTED)
                distinct.insert(distinct.end(), &known[i * W], &known[i * W] + W);
        known.swap(distinct);
    }
    std::vector<uint64_t> idc, idg;
    { /* their ids in each engine (looked up again after every growth) */
        const size_t k = known.size() / W;
        std::vector<uint8_t> f(k);
        idc.resize(k);
        idg.resize(k);
        EXPECT(tree_find(cpu, known.data(), k, f.data(), idc.data(), NULL, &err) == FLOE_OK, "%s", err.msg);
        EXPECT(gpu_tree_find_host(gpu, known.data(), k, f.data(), idg.data(), &err) == FLOE_OK, "%s", err.msg);
    }
    std::unordered_map<std::string, size_t> where; /* vector -> index in known */
    for (size_t i = 0; i < known.size() / W; i++)
        where[key_of(&known[i * W], W)] = i;
    uint64_t *d_par, *d_ids;
    uint32_t *d_first;
    uint8_t *d_ch, *d_res;
    EXPECT(cudaMalloc(&d_par, B * 8) == cudaSuccess && cudaMalloc(&d_ids, B * 8) == cudaSuccess &&
               cudaMalloc(&d_first, (B + 1) * 4) == cudaSuccess &&
               cudaMalloc(&d_ch, B * 24 * FLOE_CHANGE_BYTES) == cudaSuccess && cudaMalloc(&d_res, B) == cudaSuccess,
           "cudaMalloc");
    std::vector<uint64_t> pc(B), pg(B), ic(B), ig(B);
    std::vector<uint8_t> counts(B), changes(B * 24 * FLOE_CHANGE_BYTES), rc(B), rg(B);
    std::vector<uint32_t> first(B + 1), v(B * W);
    size_t many = 0, repeats = 0;
    for (size_t round = 0; round < rounds; round++) {
        const size_t stored = known.size() / W;
        size_t nc = 0;
        first[0] = 0;
        for (size_t i = 0; i < B; i++) {
            const uint64_t r = test_rng(&rng);
            if (i > 0 && r % 16 == 0) { /* an exact repeat of an earlier state of the batch */
                const size_t j = test_rng(&rng) % i;
                pc[i] = pc[j], pg[i] = pg[j], counts[i] = counts[j];
                memcpy(&changes[nc * FLOE_CHANGE_BYTES], &changes[first[j] * FLOE_CHANGE_BYTES],
                       counts[j] * FLOE_CHANGE_BYTES);
                memcpy(&v[i * W], &v[j * W], W * 4);
                nc += counts[j];
                first[i + 1] = (uint32_t)nc;
                repeats++;
                continue;
            }
            const size_t p = test_rng(&rng) % stored;
            pc[i] = idc[p], pg[i] = idg[p];
            memcpy(&v[i * W], &known[p * W], W * 4);
            const unsigned k = r % 64 == 1 ? 9 + (unsigned)(test_rng(&rng) % 16) : (unsigned)(test_rng(&rng) % 3);
            many += k > 8;
            counts[i] = (uint8_t)k;
            for (unsigned c = 0; c < k; c++, nc++) {
                const uint32_t word = (uint32_t)(test_rng(&rng) % W);
                const uint32_t value =
                    (r >> 20) % 32 == 0 ? (uint32_t)test_rng(&rng) : (uint32_t)(test_rng(&rng) % domain);
                floe_change_put(&changes[nc * FLOE_CHANGE_BYTES], word, value);
                v[i * W + word] = value;
            }
            first[i + 1] = (uint32_t)nc;
        }
        const uint64_t gen_c = tree_generation(cpu), gen_g = gpu_tree_generation(gpu);
        EXPECT(tree_insert_delta(cpu, gen_c, pc.data(), counts.data(), changes.data(), B, rc.data(), ic.data(), NULL,
                                 &err) == FLOE_OK,
               "cpu states: %s", err.msg);
        EXPECT(cudaMemcpy(d_par, pg.data(), B * 8, cudaMemcpyHostToDevice) == cudaSuccess &&
                   cudaMemcpy(d_first, first.data(), (B + 1) * 4, cudaMemcpyHostToDevice) == cudaSuccess &&
                   cudaMemcpy(d_ch, changes.data(), (nc ? nc : 1) * FLOE_CHANGE_BYTES, cudaMemcpyHostToDevice) ==
                       cudaSuccess,
               "copy in");
        EXPECT(gpu_tree_insert_delta(gpu, d_par, d_first, d_ch, B, d_res, d_ids, NULL, &err) == FLOE_OK,
               "gpu states: %s", err.msg);
        EXPECT(cudaMemcpy(rg.data(), d_res, B, cudaMemcpyDeviceToHost) == cudaSuccess &&
                   cudaMemcpy(ig.data(), d_ids, B * 8, cudaMemcpyDeviceToHost) == cudaSuccess,
               "copy out");
        const bool moved_c = tree_generation(cpu) != gen_c, moved_g = gpu_tree_generation(gpu) != gen_g;
        for (size_t i = 0; i < B; i++) {
            EXPECT(rc[i] == rg[i] && rg[i] != FLOE_FULL, "W=%u round %zu state %zu: cpu %d gpu %d", W, round, i, rc[i],
                   rg[i]);
            const std::string key = key_of(&v[i * W], W);
            auto it = where.find(key);
            EXPECT((it == where.end()) == (rg[i] == FLOE_INSERTED), "W=%u state %zu: %d, but the vector was %s", W, i,
                   rg[i], it == where.end() ? "new" : "stored");
            if (it == where.end()) {
                where[key] = known.size() / W;
                known.insert(known.end(), &v[i * W], &v[i * W] + W);
                idc.push_back(ic[i]);
                idg.push_back(ig[i]);
            } else if (!moved_g) {
                EXPECT(ig[i] == idg[it->second], "W=%u state %zu: PRESENT with another id", W, i);
            }
        }
        const size_t k = known.size() / W;
        std::vector<uint8_t> f(k);
        if (moved_c) /* grown: every known id of the new generation */
            EXPECT(tree_find(cpu, known.data(), k, f.data(), idc.data(), NULL, &err) == FLOE_OK, "%s", err.msg);
        if (moved_g)
            EXPECT(gpu_tree_find_host(gpu, known.data(), k, f.data(), idg.data(), &err) == FLOE_OK, "%s", err.msg);
    }
    /* every id gives its vector back */
    const size_t k = known.size() / W;
    std::vector<uint8_t> r(k);
    std::vector<uint32_t> back(k * W);
    EXPECT(gpu_tree_get_host(gpu, idg.data(), k, r.data(), back.data(), &err) == FLOE_OK, "get: %s", err.msg);
    EXPECT(!memcmp(back.data(), known.data(), k * W * 4), "W=%u: ids after states by parent give other vectors", W);
    floe_table_stats sc, sg;
    tree_stats(cpu, &sc);
    EXPECT(gpu_tree_stats(gpu, &sg, &err) == FLOE_OK, "stats: %s", err.msg);
    EXPECT(sc.keys == k && sg.keys == k, "W=%u vectors: cpu %llu gpu %llu model %zu", W, (unsigned long long)sc.keys,
           (unsigned long long)sg.keys, k);
    if (!grow)
        EXPECT(sc.nodes == sg.nodes, "W=%u nodes: cpu %llu gpu %llu", W, (unsigned long long)sc.nodes,
               (unsigned long long)sg.nodes);
    /* a parent that names no vector: refused, nothing changed */
    pg[0] = idg[0];
    pg[1] = (uint64_t)1 << 40;
    first[0] = 0, first[1] = 1, first[2] = 2;
    floe_change_put(&changes[0], 0, 0xABCDEFu);
    floe_change_put(&changes[FLOE_CHANGE_BYTES], W - 1, 0xABCDEFu);
    EXPECT(cudaMemcpy(d_par, pg.data(), 16, cudaMemcpyHostToDevice) == cudaSuccess &&
               cudaMemcpy(d_first, first.data(), 12, cudaMemcpyHostToDevice) == cudaSuccess &&
               cudaMemcpy(d_ch, changes.data(), 2 * FLOE_CHANGE_BYTES, cudaMemcpyHostToDevice) == cudaSuccess,
           "copy in");
    EXPECT(gpu_tree_insert_delta(gpu, d_par, d_first, d_ch, 2, d_res, d_ids, NULL, &err) == FLOE_ERR_INVALID &&
               strstr(err.msg, "names no vector"),
           "W=%u: a parent that names no vector: %s", W, err.msg);
    floe_table_stats after;
    EXPECT(gpu_tree_stats(gpu, &after, &err) == FLOE_OK, "stats: %s", err.msg);
    EXPECT(after.keys == sg.keys && after.nodes == sg.nodes, "W=%u: a refused batch changed the table", W);
    printf("tree states by parent, engines: W=%u %s, %zu rounds of %zu (%zu of more than %d changes, %zu repeats), "
           "%zu vectors, generation %llu: GPU = CPU\n",
           W, grow ? "growing from 64" : "fixed", rounds, B, many, 8, repeats, k,
           (unsigned long long)gpu_tree_generation(gpu));
    cudaFree(d_par);
    cudaFree(d_ids);
    cudaFree(d_first);
    cudaFree(d_ch);
    cudaFree(d_res);
    tree_destroy(cpu);
    gpu_tree_destroy(gpu);
}

void tree_suite(uint64_t seed, bool small)
{
    static const uint32_t lengths[] = {2, 3, 16, 17, 64, 256};
    for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++) {
        size_t total = small ? 3000 : (lengths[i] >= 64 ? 100000 : 400000);
        engine_vs_cpu(lengths[i], total, seed + 100 + i);
    }
    full_is_exact(seed + 200);
    backends_agree(seed + 300, small, 1);
    backends_agree(seed + 301, small, 3);
    backends_grow(seed + 400, small);
    engine_grows(3, small ? 30000 : 300000, seed + 500);
    engine_grows(17, small ? 30000 : 300000, seed + 501);
    limit_refuses_growth(seed + 502);
    growth_without_device_memory(seed + 503);
    backends_states(seed + 600, small);
    static const uint32_t delta_lengths[] = {2, 3, 16, 17, 64};
    for (size_t i = 0; i < sizeof delta_lengths / sizeof *delta_lengths; i++)
        for (int grow = 0; grow < 2; grow++)
            engine_delta(delta_lengths[i], grow, small ? 6 : 30, small ? 2000 : 50000, seed + 700 + 2 * i + grow);
}
