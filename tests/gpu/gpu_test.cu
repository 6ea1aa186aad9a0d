/*
 * gpu_test.cu - floe-gpu-tests: the GPU engine against the CPU engine.
 *
 * Both engines get the same fresh random batches (heavy duplication inside
 * and across batches) on tables of the same geometry, for several key
 * widths, filling to 0.95; every per-key answer must be identical (ids may
 * differ: placement depends on the order of concurrent CASes), and at the
 * end both hold the same keys.  One case repeats the reference library's
 * fault: 16-bit primary rows with 32-bit secondary rows, where its find
 * missed keys stored in level 2; here every inserted key must be found at
 * fill 0.9 and 0.95.  Then the GPU backend against the CPU backend
 * (backend_test.cu), and the TREE engine and backend against the CPU ones
 * (tree_test.cu).  Exit 0: all passed.
 */
#include <algorithm>
#include <cuda.h> /* CUmoduleLoadingMode: the driver says how it loads kernels */
#include <cuda_runtime.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unordered_map>
#include <vector>

#include "backend_gpu.h"
#include "backend_test.h"
#include "floe_wire.h" /* floe_size_parse */
#include "iceberg.h"
#include "iceberg_gpu.h"
#include "layout.h"
#include "pipeline.h" /* staging (staging_kept) */

int failures = 0;

uint64_t test_rng(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* Same spec and geometry on both engines (1.5 x 2^addr_bits primary
 * buckets with three); batches until fill >= target. */
static void against_cpu(uint32_t key_bits, uint32_t addr_bits, double target, uint64_t seed, bool check_levels,
                        bool with_erase = false, unsigned tags_left = 0, size_t piece = 0, uint32_t three = 0)
{
    floe_spec spec;
    floe_spec_default(&spec);
    strcpy(spec.name, "g");
    spec.key_bits = key_bits;
    spec.capacity = 1000;
    spec.seed = seed;
    floe_errinfo err;
    iceberg *cpu;
    gpu_iceberg *gpu;
    EXPECT(iceberg_create_sized(&spec, addr_bits, three, NULL, &cpu, &err) == FLOE_OK, "cpu create: %s", err.msg);
    EXPECT(gpu_iceberg_create(&spec, addr_bits, three, &gpu, &err) == FLOE_OK, "gpu create: %s", err.msg);
    if (piece)
        gpu_iceberg_piece_keys(gpu, piece);
    floe_table_stats st;
    iceberg_stats(cpu, &st);
    const uint64_t slots = st.slots, mask = floe_mask_bits(key_bits);
    /* a universe a bit larger than the table, so keys repeat across batches */
    const uint64_t U = (uint64_t)(slots * 1.2) + 16;
    std::vector<uint64_t> universe(U);
    uint64_t r = seed * 7919 + 1;
    for (auto &k : universe)
        k = test_rng(&r) & mask;
    std::vector<uint64_t> keys, all_inserted;
    std::vector<uint8_t> rc, rg;
    uint64_t total_ins = 0;
    int batches = 0;
    while ((double)total_ins < target * (double)slots && batches < 100000) {
        /* The fix-up's tags run out every ten batches: the 5 batches after these take the last
         * tags, the next 5 wrap to tags 1 .. 5 again, so every batch with tag k meets the scratch
         * entries of the earlier ones with tag k, which must read as empty (cleared at the wrap). */
        if (tags_left && batches % 10 == 5)
            gpu_iceberg_tags_left(gpu, tags_left);
        size_t n = 1 + (size_t)(test_rng(&r) % (batches % 5 == 0 ? 200000 : 5000));
        /* never overshoot the target: past 0.95 FULL may appear, and where it
         * appears depends on placement, which differs between the engines */
        uint64_t room = (uint64_t)(target * (double)slots) - total_ins;
        if (n > room + 1)
            n = (size_t)room + 1;
        keys.resize(n);
        for (size_t i = 0; i < n; i++)
            keys[i] = (i > 0 && test_rng(&r) % 4 == 0) ? keys[test_rng(&r) % i] : universe[test_rng(&r) % U];
        rc.assign(n, 9);
        rg.assign(n, 9);
        floe_answer_counts c;
        if (with_erase && test_rng(&r) % 7 == 0) { /* an erase batch */
            EXPECT(iceberg_erase(cpu, keys.data(), n, rc.data(), NULL, &err) == FLOE_OK, "%s", err.msg);
            EXPECT(gpu_iceberg_erase_host(gpu, keys.data(), n, rg.data(), &err) == FLOE_OK, "%s", err.msg);
            for (size_t i = 0; i < n; i++)
                EXPECT(rc[i] == rg[i], "erase: key_bits %u batch %d key %zu (%llu): cpu %u gpu %u", key_bits, batches,
                       i, (unsigned long long)keys[i], rc[i], rg[i]);
            batches++;
            continue;
        }
        EXPECT(iceberg_insert(cpu, keys.data(), n, NULL, 0, FLOE_VALUES_KEEP, rc.data(), NULL, NULL, &c, &err) ==
                   FLOE_OK,
               "%s", err.msg);
        EXPECT(gpu_iceberg_put_host(gpu, keys.data(), n, rg.data(), NULL, &err) == FLOE_OK, "%s", err.msg);
        for (size_t i = 0; i < n; i++) {
            EXPECT(rc[i] == rg[i], "key_bits %u batch %d key %zu (%llu): cpu %u gpu %u", key_bits, batches, i,
                   (unsigned long long)keys[i], rc[i], rg[i]);
            if (rc[i] == FLOE_INSERTED)
                all_inserted.push_back(keys[i]);
        }
        EXPECT(c.full == 0 || (double)total_ins > 0.95 * (double)slots, "FULL at fill %.3f",
               (double)total_ins / (double)slots);
        total_ins += c.inserted;
        batches++;
        /* the reference library's fault: find every inserted key at 0.9 and at the end */
        if (check_levels && (double)(total_ins - c.inserted) < 0.9 * slots && (double)total_ins >= 0.9 * slots) {
            std::vector<uint8_t> f(all_inserted.size());
            EXPECT(gpu_iceberg_find_host(gpu, all_inserted.data(), all_inserted.size(), f.data(), NULL, &err) ==
                       FLOE_OK,
                   "%s", err.msg);
            for (size_t i = 0; i < f.size(); i++)
                EXPECT(f[i] == FLOE_PRESENT, "fill 0.9: inserted key %llu not found",
                       (unsigned long long)all_inserted[i]);
        }
    }
    /* the same key sets: every key of the universe answers the same, and every inserted key is PRESENT */
    rc.assign(U, 9);
    rg.assign(U, 9);
    EXPECT(iceberg_find(cpu, universe.data(), U, rc.data(), NULL, NULL, NULL, &err) == FLOE_OK, "%s", err.msg);
    EXPECT(gpu_iceberg_find_host(gpu, universe.data(), U, rg.data(), NULL, &err) == FLOE_OK, "%s", err.msg);
    for (uint64_t i = 0; i < U; i++)
        EXPECT(rc[i] == rg[i], "final find of %llu: cpu %u gpu %u", (unsigned long long)universe[i], rc[i], rg[i]);
    if (!with_erase) {
        std::vector<uint8_t> f(all_inserted.size());
        EXPECT(gpu_iceberg_find_host(gpu, all_inserted.data(), all_inserted.size(), f.data(), NULL, &err) == FLOE_OK,
               "%s", err.msg);
        for (size_t i = 0; i < f.size(); i++)
            EXPECT(f[i] == FLOE_PRESENT, "inserted key %llu not found", (unsigned long long)all_inserted[i]);
    }
    uint64_t used[3];
    EXPECT(gpu_iceberg_used(gpu, used, &err) == FLOE_OK, "%s", err.msg);
    EXPECT(used[0] + used[1] + used[2] == all_inserted.size(), "gpu holds %llu rows, %zu keys inserted",
           (unsigned long long)(used[0] + used[1] + used[2]), all_inserted.size());
    iceberg_stats(cpu, &st);
    char pieces[64] = "";
    if (piece)
        snprintf(pieces, sizeof pieces, " (puts in pieces of %zu keys)", piece);
    printf(
        "ok: key_bits %2u%s%s%s, %s2^%u primary buckets (%u/%u-bit rows), %d batches, %zu keys, fill %.4f, gpu levels "
        "%llu/%llu/%llu\n",
        key_bits, with_erase ? " with erases" : "", tags_left ? " (fix-up tags wrapped)" : "", pieces,
        three ? "1.5 x " : "", addr_bits, st.level[0].row_bits, st.level[1].row_bits, batches, all_inserted.size(),
        st.fill, (unsigned long long)used[0], (unsigned long long)used[1], (unsigned long long)used[2]);
    iceberg_destroy(cpu);
    gpu_iceberg_destroy(gpu);
}

/* Copies n host values to a device buffer, or back. */
#define TO_DEV(d, h, bytes)   EXPECT(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) == cudaSuccess, "copy in")
#define FROM_DEV(h, d, bytes) EXPECT(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost) == cudaSuccess, "copy out")

/* A table that grows while its batches go on (gpu_iceberg_grow): the keys
 * move into the new arrays a share at a time, each batch's after it (as
 * the pipeline enqueues it) or before the next, and with the batches that
 * name them.  Inserts (with repeats; a MAP's with values), finds and
 * erases in batches of up to a 64th of the slots, so that a growth's move
 * spans several batches, and now and then (and the first batch the first
 * growth meets) of 40000 to 80000 keys, more than the old arrays take,
 * which ends a growth under way first (its primary level moved a group at
 * a time); every answer and value the CPU engine's (a table sized never to
 * grow), through four growths in steps of a half and a third (2^14 -> 1.5
 * x 2^14 -> ... -> 2^16), one of them begun while another was under way;
 * then a scan, which ends any growth first, gives exactly the keys (and
 * values) of a plain map kept beside; and a growth and a rebuild to arrays
 * that cannot be had answer ERR_FULL and leave the table whole. */
static void grow_against_cpu(uint32_t key_bits, uint32_t vb, uint64_t seed)
{
    floe_spec spec;
    floe_spec_default(&spec);
    strcpy(spec.name, "g");
    spec.kind = vb ? FLOE_KIND_MAP : FLOE_KIND_SET;
    spec.value_bytes = vb;
    spec.key_bits = key_bits;
    spec.capacity = 1000;
    spec.seed = seed;
    spec.grow = true; /* arrays mapped a chunk at a time, as a growing table's are */
    floe_errinfo err;
    iceberg *cpu;
    gpu_iceberg *gpu;
    uint32_t addr = 14, three = 0;
    EXPECT(iceberg_create_sized(&spec, 18, 0, NULL, &cpu, &err) == FLOE_OK, "cpu create: %s", err.msg);
    EXPECT(gpu_iceberg_create(&spec, addr, 0, &gpu, &err) == FLOE_OK, "gpu create: %s", err.msg);
    const size_t most = 80000;
    uint64_t *dk, *dv, *dvo;
    uint8_t *dr;
    EXPECT(cudaMalloc(&dk, most * 8) == cudaSuccess && cudaMalloc(&dv, most * 8) == cudaSuccess &&
               cudaMalloc(&dvo, most * 8) == cudaSuccess && cudaMalloc(&dr, most) == cudaSuccess,
           "device buffers");
    const uint64_t mask = floe_mask_bits(key_bits), vmask = floe_mask_bits(vb * 8);
    std::vector<uint64_t> universe(1u << 22);
    uint64_t r = seed * 7919 + 3;
    for (auto &k : universe)
        k = test_rng(&r) & mask;
    std::unordered_map<uint64_t, uint64_t> model;
    std::vector<uint64_t> keys, vals, vc(most), vg(most);
    std::vector<unsigned char> cpu_out(most * 8), gpu_out(most * 8); /* values out, vb bytes each */
    std::vector<uint8_t> rc(most), rg(most);
    unsigned growths = 0, steps_growing = 0, batches = 0, ends_growing = 0;
    uint64_t old_slots = 0; /* the slots before the last growth */
    bool mid = false;       /* a growth begun while one was under way */
    while (growths < 4 || gpu_iceberg_growing(gpu) || batches < 40) {
        const int op = (int)(test_rng(&r) % 10); /* 0-5 insert, 6-8 find, 9 erase */
        /* mostly batches the old arrays take beside their keys (a growth's batches run on both), now
         * and then one too large for them, which ends a growth under way first; never in the last
         * growth, which its shares end (so that batches run beside moves whatever the seed) */
        const bool large =
            (growths == 1 && gpu_iceberg_growing(gpu) && ends_growing == 0) ||  /* the first growth's */
            (test_rng(&r) % 32 == 0 && !(growths == 2 && !mid) && growths < 4); /* not to end the second */
        size_t n = large ? most / 2 + (size_t)(test_rng(&r) % (most / 2))
                         : 1 + (size_t)(test_rng(&r) % (gpu_iceberg_slots(gpu) / 64));
        keys.clear();
        while (keys.size() < n)
            keys.push_back(!keys.empty() && test_rng(&r) % 4 == 0 ? keys[test_rng(&r) % keys.size()]
                                                                  : universe[test_rng(&r) % universe.size()]);
        vals.resize(n);
        for (auto &v : vals)
            v = test_rng(&r) & vmask;
        std::vector<unsigned char> packed(n * (vb ? vb : 1));
        for (size_t i = 0; i < n && vb; i++)
            memcpy(&packed[i * vb], &vals[i], vb);
        TO_DEV(dk, keys.data(), n * 8);
        std::fill(vc.begin(), vc.end(), 0);
        std::fill(vg.begin(), vg.end(), 0);
        const bool growing = gpu_iceberg_growing(gpu);
        if (op < 6) {
            EXPECT(iceberg_insert(cpu, keys.data(), n, vb ? packed.data() : NULL, vb ? n * vb : 0, FLOE_VALUES_KEEP,
                                  rc.data(), NULL, vb ? cpu_out.data() : NULL, NULL, &err) == FLOE_OK,
                   "%s", err.msg);
            if (vb) {
                TO_DEV(dv, packed.data(), n * vb);
                EXPECT(gpu_iceberg_put_map(gpu, dk, dv, n, FLOE_VALUES_KEEP, dr, NULL, dvo, 0, &err) == FLOE_OK, "%s",
                       err.msg);
            } else {
                EXPECT(gpu_iceberg_put(gpu, dk, n, dr, NULL, 0, 0, &err) == FLOE_OK, "%s", err.msg);
            }
            for (size_t i = 0; i < n; i++)
                if (rc[i] == FLOE_INSERTED)
                    model[keys[i]] = vb ? vals[i] : 0;
        } else if (op < 9) {
            EXPECT(iceberg_find(cpu, keys.data(), n, rc.data(), NULL, vb ? cpu_out.data() : NULL, NULL, &err) ==
                       FLOE_OK,
                   "%s", err.msg);
            EXPECT(gpu_iceberg_find(gpu, dk, n, dr, NULL, vb ? dvo : NULL, 0, &err) == FLOE_OK, "%s", err.msg);
        } else {
            EXPECT(iceberg_erase(cpu, keys.data(), n, rc.data(), NULL, &err) == FLOE_OK, "%s", err.msg);
            EXPECT(gpu_iceberg_erase(gpu, dk, n, dr, 0, &err) == FLOE_OK, "%s", err.msg);
            for (size_t i = 0; i < n; i++)
                if (rc[i] == FLOE_ERASED)
                    model.erase(keys[i]);
        }
        if (test_rng(&r) % 2) /* the batch's share of the moves after it, as the pipeline does; else before the next */
            EXPECT(gpu_iceberg_move_owed(gpu, 0, &err) == FLOE_OK, "%s", err.msg);
        FROM_DEV(rg.data(), dr, n);
        if (vb && op < 9) {
            FROM_DEV(gpu_out.data(), dvo, n * vb);
            for (size_t i = 0; i < n; i++) {
                memcpy(&vc[i], &cpu_out[i * vb], vb);
                memcpy(&vg[i], &gpu_out[i * vb], vb);
            }
        }
        for (size_t i = 0, bad = 0; i < n && bad < 5; i++)
            if (rc[i] != rg[i] || (vb && op < 9 && vc[i] != vg[i])) {
                bad++;
                EXPECT(false, "growing (%s) %s batch %u (op %d) key %zu (%llu): cpu %u / %llu, gpu %u / %llu",
                       growing ? "under way" : "none", vb ? "MAP" : "SET", batches, op, i, (unsigned long long)keys[i],
                       rc[i], (unsigned long long)vc[i], rg[i], (unsigned long long)vg[i]);
            }
        steps_growing += growing;
        if (growing && steps_growing == 4) { /* the slots in use, old and new arrays: within the bytes held */
            uint64_t u[3], tb, ub;
            EXPECT(gpu_iceberg_count(gpu, u, &tb, &ub, &err) == FLOE_OK, "%s", err.msg);
            EXPECT(ub >= (u[0] + u[1] + u[2] - tb) * (2 + vb) && ub <= gpu_iceberg_memory(gpu),
                   "growing: %llu bytes of slots in use, for %llu keys in %llu bytes of arrays", (unsigned long long)ub,
                   (unsigned long long)(u[0] + u[1] + u[2] - tb), (unsigned long long)gpu_iceberg_memory(gpu));
        }
        batches++;
        if (growing && n * 32 > old_slots) {
            ends_growing++;
            EXPECT(!gpu_iceberg_growing(gpu), "a batch of %zu keys ran on a growth from %llu slots", n,
                   (unsigned long long)old_slots);
        }
        const double fill = (double)model.size() / (double)gpu_iceberg_slots(gpu);
        bool grow = growths < 4 && fill > 0.7;
        if (growths == 2 && !mid && gpu_iceberg_growing(gpu)) /* the next one begun while this one is under way */
            grow = mid = true;
        if (grow) { /* in steps of a half and a third: 2^a -> 1.5 x 2^a -> 2^(a+1) */
            iceberg_step_up(&addr, &three);
            old_slots = gpu_iceberg_slots(gpu);
            EXPECT(gpu_iceberg_grow(gpu, addr, three, 0, &err) == FLOE_OK, "grow to %s2^%u: %s", three ? "1.5 x " : "",
                   addr, err.msg);
            growths++;
        }
    }
    /* every key once, with its value: a scan (which ends a growth under way first) */
    std::vector<uint64_t> got, got_vals;
    std::vector<uint64_t> kbuf(1 << 16), vbuf(1 << 16);
    uint64_t pos = 0;
    for (int done = 0; !done;) {
        size_t m = 0;
        uint64_t next = 0;
        EXPECT(gpu_iceberg_scan(gpu, pos, kbuf.size(), kbuf.data(), vb ? vbuf.data() : NULL, &m, &next, &done, &err) ==
                   FLOE_OK,
               "scan: %s", err.msg);
        if (failures)
            break;
        for (size_t i = 0; i < m; i++) {
            uint64_t v = 0;
            if (vb)
                memcpy(&v, (const unsigned char *)vbuf.data() + i * vb, vb);
            got.push_back(kbuf[i]);
            got_vals.push_back(v);
        }
        pos = next;
    }
    size_t wrong = 0;
    for (size_t i = 0; i < got.size(); i++) {
        auto it = model.find(got[i]);
        wrong += it == model.end() || (vb && it->second != got_vals[i]);
    }
    std::sort(got.begin(), got.end());
    EXPECT(got.size() == model.size() && wrong == 0 && std::adjacent_find(got.begin(), got.end()) == got.end(),
           "after the growths: %zu keys scanned (%zu not as the model says), the model holds %zu", got.size(), wrong,
           model.size());
    /* arrays that cannot be had (2^35 buckets: terabytes): ERR_FULL, and the table as it was, for a
     * growth and a rebuild alike */
    uint32_t big = 35, big3 = 0;
    if (key_bits >= big) {
        EXPECT(gpu_iceberg_grow(gpu, big, 0, 0, &err) == FLOE_ERR_FULL, "a growth to 2^35 buckets: not ERR_FULL");
        EXPECT(gpu_iceberg_rebuild(gpu, &big, &big3, &err) == FLOE_ERR_FULL, "a rebuild at 2^35 buckets: not ERR_FULL");
        EXPECT(!gpu_iceberg_growing(gpu) && gpu_iceberg_addr_bits(gpu) == addr && gpu_iceberg_three(gpu) == three,
               "the table changed size");
    }
    std::vector<uint64_t> held;
    for (const auto &kv : model)
        held.push_back(kv.first);
    std::vector<uint8_t> f(held.size());
    EXPECT(gpu_iceberg_find_host(gpu, held.data(), held.size(), f.data(), NULL, &err) == FLOE_OK, "%s", err.msg);
    EXPECT(std::count(f.begin(), f.end(), (uint8_t)FLOE_PRESENT) == (long)held.size(),
           "after a growth that could not allocate: %ld of %zu keys found",
           (long)std::count(f.begin(), f.end(), (uint8_t)FLOE_PRESENT), held.size());
    uint64_t used[3], tomb, used_bytes;
    EXPECT(gpu_iceberg_count(gpu, used, &tomb, &used_bytes, &err) == FLOE_OK, "%s", err.msg);
    EXPECT(used[0] + used[1] + used[2] - tomb == model.size(), "counted %llu keys, the model holds %zu",
           (unsigned long long)(used[0] + used[1] + used[2] - tomb), model.size());
    floe_geometry g; /* one set of arrays: each level's slots in use at its rows' width */
    floe_geometry_init(&g, key_bits, addr, three, spec.seed);
    uint64_t expect_bytes = 0;
    for (int l = 0; l < FLOE_LEVELS; l++)
        expect_bytes += used[l] * (g.level[l].row_bits / 8 + vb);
    EXPECT(used_bytes == expect_bytes, "%llu bytes of slots in use counted, %llu by the levels' rows",
           (unsigned long long)used_bytes, (unsigned long long)expect_bytes);
    EXPECT(steps_growing >= 8 && mid && ends_growing >= 1 && !gpu_iceberg_growing(gpu),
           "%u batches ran while a growth was under way (one begun in another: %d; %u ended one first)", steps_growing,
           (int)mid, ends_growing);
    printf("ok: %s of %u-bit keys grown from 2^14 to 2^%u primary buckets while %u of its %u batches ran (%u too "
           "large for the old arrays ended one first), %zu keys: every answer%s the CPU engine's\n",
           vb ? "MAP" : "SET", key_bits, addr, steps_growing, batches, ends_growing, model.size(),
           vb ? " and value" : "");
    cudaFree(dk);
    cudaFree(dv);
    cudaFree(dvo);
    cudaFree(dr);
    iceberg_destroy(cpu);
    gpu_iceberg_destroy(gpu);
}

/* The pinned side of staging a table gives back is kept for the next
 * buffer it fits (up to twice what that asks), whole (the buffer takes its
 * size); a smaller need gets a block of its own; a drained pool keeps none. */
static void staging_kept(void)
{
    floe_errinfo err;
    stage_pool_drain();
    stage_buf<uint64_t> a = {}, b = {}, c = {}, d = {};
    EXPECT(a.reserve(1000, ON_BOTH, &err) == FLOE_OK, "%s", err.msg);
    uint64_t *const block = a.h;
    for (size_t i = 0; i < 1000; i++) /* pinned and on the device, each as large */
        a.h[i] = i;
    EXPECT(cudaMemcpy(a.d, a.h, 8000, cudaMemcpyHostToDevice) == cudaSuccess, "copy in");
    a.release();
    EXPECT(b.reserve(900, ON_BOTH, &err) == FLOE_OK, "%s", err.msg);
    EXPECT(b.h == block && b.cap == 1000, "a kept block not taken again: %p of %p, cap %zu", (void *)b.h, (void *)block,
           b.cap);
    EXPECT(cudaMemcpy(b.h, b.d, 8000, cudaMemcpyDeviceToHost) == cudaSuccess, "copy out (its device side as large)");
    b.release();
    EXPECT(c.reserve(400, ON_HOST, &err) == FLOE_OK, "%s", err.msg); /* 3200 bytes: the 8000 kept are too many */
    EXPECT(c.h && c.h != block && c.cap == 400, "a small need took a large block");
    c.release();
    stage_pool_drain();
    EXPECT(d.reserve(900, ON_HOST, &err) == FLOE_OK && d.h && d.cap == 900, "after a drain: a block of its own");
    d.release();
    stage_pool_drain();
    printf("ok: pinned staging kept between tables\n");
}

static void usage_line(FILE *f)
{
    fprintf(f, "usage: floe-gpu-tests [--small] [--tree | --ordered | --static | --grow | --cycles N | --fault |\n"
               "                      --backend-case NAME]\n"
               "                      [--seed N | N]\n");
}

static void help(void)
{
    usage_line(stdout);
    printf("The GPU engines and the GPU backend against the CPU ones on fresh random batches (heavy\n"
           "duplication), then the TREE engine and TREE tables through both backends, then the ORDERED\n"
           "engine, then STATIC tables (the engine and both backends). Every run first checks that CUDA\n"
           "loads the kernels at start, as in floed (CUDA_MODULE_LOADING=EAGER unless the environment\n"
           "sets it, which wins).\n"
           "\n"
           "Options:\n"
           "      --small              small cases only, fast enough under compute-sanitizer; with --tree,\n"
           "                           the small TREE cases (default: the full sizes)\n"
           "      --tree               TREE tables only (default: every suite)\n"
           "      --ordered            the ORDERED engine only (default: every suite)\n"
           "      --static             STATIC tables only: the static cuckoo engine against a reference and\n"
           "                           the CPU engine, and through both backends (default: every suite)\n"
           "      --grow               only the SET and MAP tables that grow while batches go on, checked\n"
           "                           against the CPU engine (default: every suite)\n"
           "      --cycles N           only N cycles of create / fill / find / drop of a SET in parts over\n"
           "                           every device, batches of 2^24 keys (--small: 2^16) from 2 lanes at\n"
           "                           once (default: every suite, with 50 cycles; 4 small ones with --small)\n"
           "      --fault              only the device fault: a child process makes the last device fail on\n"
           "                           purpose and checks that its tables answer ERR_UNAVAILABLE and the\n"
           "                           others exactly (default: every suite; not with --small, whose runs\n"
           "                           are for compute-sanitizer, which would report the fault)\n"
           "      --backend-case NAME  one case of the GPU backend suite, for debugging; NAME: map48-grow\n"
           "                           (default: every suite)\n"
           "      --seed N, N          the random seed, a decimal number (default: the time; printed, so\n"
           "                           that a run can be repeated)\n"
           "  -h, --help               this text\n"
           "\n"
           "Exit status: 0 all passed, 1 a test failed, 2 a usage error or no CUDA device.\n");
}

[[noreturn]] static void usage_error(void)
{
    usage_line(stderr);
    fprintf(stderr, "Try 'floe-gpu-tests --help'.\n");
    exit(2);
}

/* The bytes a table of geometry g takes whole, a slot. */
static double bytes_a_slot(const floe_geometry &g, uint32_t vb)
{
    double b = 0;
    for (int l = 0; l < FLOE_LEVELS; l++)
        b += (double)floe_level_words(&g.level[l]) * 8;
    return b / (double)g.total_slots + vb;
}

/* A growing table of 40-bit keys (a MAP's with vb-byte values) of 2^addr
 * primary buckets; NULL (a failure counted) where it cannot be made. */
static gpu_iceberg *growing_table(const char *name, uint32_t vb, uint64_t seed, uint32_t addr)
{
    floe_spec spec;
    floe_spec_default(&spec);
    strcpy(spec.name, name);
    spec.kind = vb ? FLOE_KIND_MAP : FLOE_KIND_SET;
    spec.value_bytes = vb;
    spec.key_bits = 40;
    spec.seed = seed;
    spec.grow = true;
    floe_errinfo err;
    gpu_iceberg *gpu = NULL;
    EXPECT_OR_RETURN(NULL, gpu_iceberg_create(&spec, addr, 0, &gpu, &err) == FLOE_OK, "gpu create: %s", err.msg);
    return gpu;
}

/* n keys (a MAP's vb-byte values, from vals) inserted through dk and dv,
 * keeping stored values; their answers in dr. */
static void put_batch(gpu_iceberg *gpu, uint32_t vb, const uint64_t *keys, const uint64_t *vals, size_t n, uint64_t *dk,
                      uint64_t *dv, uint8_t *dr)
{
    floe_errinfo err;
    TO_DEV(dk, keys, n * 8);
    if (vb) {
        TO_DEV(dv, vals, n * 8);
        EXPECT(gpu_iceberg_put_map(gpu, dk, dv, n, FLOE_VALUES_KEEP, dr, NULL, NULL, 0, &err) == FLOE_OK, "%s",
               err.msg);
    } else {
        EXPECT(gpu_iceberg_put(gpu, dk, n, dr, NULL, 0, 0, &err) == FLOE_OK, "%s", err.msg);
    }
}

/* A growing table's device bytes stay within twice what its keys fill
 * (issue 44): distinct random 40-bit keys in batches of 2^18 into a SET or a
 * MAP of 8-byte values made with 2^20 primary buckets (32 Mi slots: its
 * batches run on the old and new arrays while it grows), grown a step (a
 * half, then a third, then a half) before the batch that would fill it past
 * 0.9, each batch's share of the moves after it, as the pipeline does.
 * After every batch, gpu_iceberg_memory (the old and new arrays' chunks
 * mapped) is at most twice the keys' bytes at the new arrays' bytes a slot,
 * from the first growth on; every key is INSERTED, and at the end found
 * (with its value), and as many others absent.  Ids asked for during the
 * last growth name the same keys after it. */
static void grow_within_twice(uint32_t vb, uint64_t seed)
{
    floe_errinfo err;
    uint32_t addr = 20, three = 0;
    gpu_iceberg *gpu = growing_table("g2", vb, seed, addr);
    if (!gpu)
        return;
    const uint64_t batch = 1u << 18, total = 76u << 20;
    floe_perm gen;
    floe_perm_init(&gen, 40, seed, 3);
    std::vector<uint64_t> keys(batch), vals(batch), got(batch);
    std::vector<uint8_t> res(batch);
    uint64_t *dk, *dv, *dvo, *di, *dko;
    uint8_t *dr;
    EXPECT(cudaMalloc(&dk, batch * 8) == cudaSuccess && cudaMalloc(&dv, batch * 8) == cudaSuccess &&
               cudaMalloc(&dvo, batch * 8) == cudaSuccess && cudaMalloc(&dr, batch) == cudaSuccess &&
               cudaMalloc(&di, batch * 8) == cudaSuccess && cudaMalloc(&dko, batch * 8) == cudaSuccess,
           "device buffers");
    bool ids_checked = false;
    double most = 0, most_growing = 0;
    unsigned growths = 0, growing_batches = 0;
    for (uint64_t at = 0; at < total && !failures; at += batch) {
        if ((double)(at + batch) > 0.9 * (double)gpu_iceberg_slots(gpu)) {
            iceberg_step_up(&addr, &three);
            EXPECT(gpu_iceberg_grow(gpu, addr, three, 0, &err) == FLOE_OK, "grow: %s", err.msg);
            growths++;
        }
        for (uint64_t i = 0; i < batch; i++) {
            keys[i] = floe_permute(&gen, at + i);
            vals[i] = keys[i] * 0x9E3779B97F4A7C15ull;
        }
        put_batch(gpu, vb, keys.data(), vals.data(), batch, dk, dv, dr);
        const bool growing = gpu_iceberg_growing(gpu);
        EXPECT(gpu_iceberg_move_owed(gpu, 0, &err) == FLOE_OK, "%s", err.msg);
        FROM_DEV(res.data(), dr, batch);
        if (growing && growths == 3 && !ids_checked) { /* ids asked for during a growth outlive it */
            ids_checked = true;
            EXPECT(gpu_iceberg_find(gpu, dk, batch, dr, di, NULL, 0, &err) == FLOE_OK, "%s", err.msg);
            EXPECT(gpu_iceberg_keys_at(gpu, di, 0, batch, dko, dr, 0, &err) == FLOE_OK, "%s", err.msg);
            FROM_DEV(got.data(), dko, batch * 8);
            size_t wrong = 0;
            for (uint64_t i = 0; i < batch; i++)
                wrong += got[i] != keys[i];
            EXPECT(wrong == 0, "%zu of %llu ids found during a growth name another key after it", wrong,
                   (unsigned long long)batch);
        }
        const size_t inserted = (size_t)std::count(res.begin(), res.end(), (uint8_t)FLOE_INSERTED);
        EXPECT(inserted == batch, "batch at %llu: %zu of %llu keys INSERTED", (unsigned long long)at, inserted,
               (unsigned long long)batch);
        const uint64_t held = at + batch;
        floe_geometry g;
        floe_geometry_init(&g, 40, gpu_iceberg_addr_bits(gpu), gpu_iceberg_three(gpu), seed);
        const double ratio = (double)gpu_iceberg_memory(gpu) / ((double)held * bytes_a_slot(g, vb));
        if (growths > 0) { /* the bound is a growth's: the first arrays were made larger than their keys */
            most = std::max(most, ratio);
            if (growing) {
                most_growing = std::max(most_growing, ratio);
                growing_batches++;
            }
            EXPECT(ratio <= 2.0, "%s, %llu keys (%s): %.3f times the bytes they fill", vb ? "MAP" : "SET",
                   (unsigned long long)held, growing ? "growing" : "not growing", ratio);
        }
    }
    EXPECT(growths >= 3 && growing_batches >= 8 && ids_checked, "%u growths, %u batches while growing%s", growths,
           growing_batches, ids_checked ? "" : ", none of the last growth's");
    /* every key found with its value (finds end no growth: the last one may be under way) */
    size_t wrong = 0;
    for (uint64_t at = 0; at < total && !failures; at += batch) {
        for (uint64_t i = 0; i < batch; i++)
            keys[i] = floe_permute(&gen, at + i);
        TO_DEV(dk, keys.data(), batch * 8);
        EXPECT(gpu_iceberg_find(gpu, dk, batch, dr, NULL, vb ? dvo : NULL, 0, &err) == FLOE_OK, "%s", err.msg);
        FROM_DEV(res.data(), dr, batch);
        if (vb)
            FROM_DEV(got.data(), dvo, batch * 8);
        for (uint64_t i = 0; i < batch; i++)
            wrong += res[i] != FLOE_PRESENT || (vb && got[i] != keys[i] * 0x9E3779B97F4A7C15ull);
    }
    for (uint64_t i = 0; i < batch; i++)
        keys[i] = floe_permute(&gen, total + i);
    TO_DEV(dk, keys.data(), batch * 8);
    EXPECT(gpu_iceberg_find(gpu, dk, batch, dr, NULL, NULL, 0, &err) == FLOE_OK, "%s", err.msg);
    FROM_DEV(res.data(), dr, batch);
    const size_t absent = (size_t)std::count(res.begin(), res.end(), (uint8_t)FLOE_ABSENT);
    EXPECT(wrong == 0 && absent == batch, "%zu keys not found as put, %zu of %llu others absent", wrong, absent,
           (unsigned long long)batch);
    printf("  %s grown from 32 Mi slots through %u growths: at most %.3f times the bytes the keys fill "
           "(%.3f while growing, over %u batches)\n",
           vb ? "MAP" : "SET", growths, most, most_growing, growing_batches);
    cudaFree(dk);
    cudaFree(dv);
    cudaFree(dvo);
    cudaFree(di);
    cudaFree(dko);
    cudaFree(dr);
    gpu_iceberg_destroy(gpu);
}

/* A growth whose device memory is taken while it is under way (every free
 * byte, as another process might): the batches go on, each key INSERTED or
 * FULL and no error, the new arrays mapping no chunk meanwhile; with the
 * memory back the growth goes on to its end, and every key answered
 * INSERTED is found, every one answered FULL absent. */
static void grow_out_of_device_memory(uint64_t seed)
{
    floe_errinfo err;
    uint32_t addr = 20, three = 0;
    gpu_iceberg *gpu = growing_table("g3", 0, seed, addr);
    if (!gpu)
        return;
    const uint64_t batch = 1u << 18;
    floe_perm gen;
    floe_perm_init(&gen, 40, seed, 3);
    std::vector<uint64_t> keys(batch);
    std::vector<uint8_t> res(batch), all_res;
    uint64_t *dk;
    uint8_t *dr;
    EXPECT(cudaMalloc(&dk, batch * 8) == cudaSuccess && cudaMalloc(&dr, batch) == cudaSuccess, "device buffers");
    device_hog hog;
    uint64_t at = 0, mem0 = 0, inserted_short = 0, full_short = 0;
    unsigned growing_batches = 0, short_batches = 0, after = 0;
    enum { SHORT = 24 }; /* past the batches that owe every group left: the last share meets no memory too */
    /* before the growth, two batches into it, SHORT with no free device memory, then until it ends */
    while (at < (256ull << 20)) {
        const bool growing = gpu_iceberg_growing(gpu);
        if (!growing && growing_batches > 0)
            break; /* it ended */
        if (!growing && (double)(at + batch) > 0.9 * (double)gpu_iceberg_slots(gpu)) {
            iceberg_step_up(&addr, &three);
            EXPECT(gpu_iceberg_grow(gpu, addr, three, 0, &err) == FLOE_OK, "grow: %s", err.msg);
        }
        if (growing && growing_batches == 2 && hog.pieces.empty()) { /* every free byte, in ever smaller pieces */
            hog.take_all();
            mem0 = gpu_iceberg_memory(gpu);
        }
        for (uint64_t i = 0; i < batch; i++)
            keys[i] = floe_permute(&gen, at + i);
        TO_DEV(dk, keys.data(), batch * 8);
        EXPECT(gpu_iceberg_put(gpu, dk, batch, dr, NULL, 0, 0, &err) == FLOE_OK, "batch at %llu: %s",
               (unsigned long long)at, err.msg);
        EXPECT(gpu_iceberg_move_owed(gpu, 0, &err) == FLOE_OK, "moves after the batch at %llu: %s",
               (unsigned long long)at, err.msg);
        FROM_DEV(res.data(), dr, batch);
        all_res.insert(all_res.end(), res.begin(), res.end());
        const size_t ins = (size_t)std::count(res.begin(), res.end(), (uint8_t)FLOE_INSERTED),
                     full = (size_t)std::count(res.begin(), res.end(), (uint8_t)FLOE_FULL);
        EXPECT(ins + full == batch, "batch at %llu (%u batches with no free memory): %zu INSERTED, %zu FULL of %llu",
               (unsigned long long)at, short_batches, ins, full, (unsigned long long)batch);
        if (full) /* as the backend does where the table cannot grow now: FULL stands, the next batch runs */
            EXPECT(gpu_iceberg_clear_halt(gpu, 0, &err) == FLOE_OK, "%s", err.msg);
        if (!hog.pieces.empty() && short_batches < SHORT) {
            short_batches++;
            inserted_short += ins;
            full_short += full;
            EXPECT(gpu_iceberg_growing(gpu) && gpu_iceberg_memory(gpu) <= mem0,
                   "with no free device memory: growing %d, %llu bytes mapped, %llu before", gpu_iceberg_growing(gpu),
                   (unsigned long long)gpu_iceberg_memory(gpu), (unsigned long long)mem0);
            if (short_batches == SHORT) /* the memory back */
                hog.release();
        } else if (short_batches == SHORT) {
            after++;
        }
        growing_batches += growing;
        at += batch;
    }
    EXPECT(short_batches == SHORT && !gpu_iceberg_growing(gpu), "%u batches with no free memory, growing %d",
           short_batches, gpu_iceberg_growing(gpu));
    /* every key as it was answered */
    size_t wrong = 0;
    for (uint64_t b = 0; b < at && !failures; b += batch) {
        for (uint64_t i = 0; i < batch; i++)
            keys[i] = floe_permute(&gen, b + i);
        TO_DEV(dk, keys.data(), batch * 8);
        EXPECT(gpu_iceberg_find(gpu, dk, batch, dr, NULL, NULL, 0, &err) == FLOE_OK, "%s", err.msg);
        FROM_DEV(res.data(), dr, batch);
        for (uint64_t i = 0; i < batch; i++)
            wrong += res[i] != (all_res[b + i] == FLOE_INSERTED ? FLOE_PRESENT : FLOE_ABSENT);
    }
    EXPECT(wrong == 0, "%zu keys not found as their inserts answered", wrong);
    printf("  SET growing with no free device memory: %u batches went on (%llu keys INSERTED, %llu FULL), "
           "the growth ended %u batches after the memory came back\n",
           short_batches, (unsigned long long)inserted_short, (unsigned long long)full_short, after);
    cudaFree(dk);
    cudaFree(dr);
    gpu_iceberg_destroy(gpu);
}

/* A table whose batches end each of its growths at once (more keys than
 * its slots / 32) grows into whole arrays (gpu_iceberg_grow's batch): after
 * such a growth its device bytes are at least the whole new arrays' (a
 * lazy growth's new primary level and values take none yet), and the next
 * batch ends it (with shrink, the second one by a batch 64 times smaller:
 * a growth into or from whole arrays is a stop whatever its batch, which
 * keeps the two arrays within twice the bytes).  Then a growth from them
 * into arrays mapped a chunk at a time, which the next batch ends at once
 * whether it is as large (as G1's largest stop) or, with shrink, 64 times
 * smaller (a client whose batches shrink); with shrink, the next growth,
 * from the chunked arrays, goes on in shares.
 * Distinct random 40-bit keys (a MAP's values derived from them): every
 * one INSERTED, at the end found with its value, and as many others
 * absent. */
static void grow_whole(uint32_t vb, bool shrink, uint64_t seed)
{
    floe_errinfo err;
    uint32_t addr = 12, three = 0;
    gpu_iceberg *gpu = growing_table("g4", vb, seed, addr);
    if (!gpu)
        return;
    const uint64_t big = 1u << 14, small = big / 64;
    floe_perm gen;
    floe_perm_init(&gen, 40, seed, 3);
    std::vector<uint64_t> keys(2 * big), vals(2 * big), got(2 * big);
    std::vector<uint8_t> res(2 * big);
    uint64_t *dk, *dv, *dvo;
    uint8_t *dr;
    EXPECT(cudaMalloc(&dk, 2 * big * 8) == cudaSuccess && cudaMalloc(&dv, 2 * big * 8) == cudaSuccess &&
               cudaMalloc(&dvo, 2 * big * 8) == cudaSuccess && cudaMalloc(&dr, 2 * big) == cudaSuccess,
           "device buffers");
    auto key_at = [&](uint64_t i) { return floe_permute(&gen, i); };
    auto value_of = [&](uint64_t k) { return (k * 0x9E3779B97F4A7C15ull) & floe_mask_bits(vb * 8); };
    auto insert = [&](uint64_t at, uint64_t n) {
        for (uint64_t i = 0; i < n; i++) {
            keys[i] = key_at(at + i);
            vals[i] = value_of(keys[i]);
        }
        put_batch(gpu, vb, keys.data(), vals.data(), n, dk, dv, dr);
        EXPECT(gpu_iceberg_move_owed(gpu, 0, &err) == FLOE_OK, "%s", err.msg);
        FROM_DEV(res.data(), dr, n);
        const size_t ins = (size_t)std::count(res.begin(), res.begin() + (long)n, (uint8_t)FLOE_INSERTED);
        EXPECT(ins == n, "batch at %llu: %zu of %llu keys INSERTED", (unsigned long long)at, ins,
               (unsigned long long)n);
    };
    /* grown before the batch that would fill it past 0.9, for batches of n keys; whether into whole arrays */
    auto grow_for = [&](uint64_t at, uint64_t n) {
        const uint64_t mem0 = gpu_iceberg_memory(gpu);
        iceberg_step_up(&addr, &three);
        floe_geometry g;
        floe_geometry_init(&g, 40, addr, three, seed);
        EXPECT_OR_RETURN(false, gpu_iceberg_grow(gpu, addr, three, n, &err) == FLOE_OK, "grow: %s", err.msg);
        const double whole = bytes_a_slot(g, vb) * (double)g.total_slots,
                     added = (double)(gpu_iceberg_memory(gpu) - mem0);
        const bool stops = n * 32 > g.total_slots; /* the growth after this one ends at once too */
        EXPECT_OR_RETURN(
            stops, stops ? added >= whole : added < whole,
            "a growth to %llu slots before batches of %llu keys at %llu: %.0f bytes more, the whole arrays %.0f",
            (unsigned long long)g.total_slots, (unsigned long long)n, (unsigned long long)at, added, whole);
        return stops;
    };
    uint64_t at = 0;
    unsigned whole_growths = 0, shares = 0;
    while (whole_growths < 2 && !failures) { /* large batches: each growth whole, ended by the next batch */
        uint64_t n = big;
        if ((double)(at + big) > 0.9 * (double)gpu_iceberg_slots(gpu)) {
            whole_growths += grow_for(at, big);
            EXPECT(gpu_iceberg_growing(gpu), "a growth begun");
            n = shrink && whole_growths == 2 ? small : big; /* into whole arrays: a stop whatever its batch */
        }
        insert(at, n);
        EXPECT(!gpu_iceberg_growing(gpu), "a batch of %llu keys left a growth of whole arrays under way",
               (unsigned long long)n);
        at += n;
    }
    /* from the whole arrays into chunked ones: at once, whatever the batch */
    const uint64_t next = shrink ? small : big;
    while ((double)(at + next) <= 0.9 * (double)gpu_iceberg_slots(gpu) && !failures) {
        insert(at, next);
        at += next;
    }
    EXPECT(!grow_for(at, shrink ? small : big / 4), "a growth into arrays its next growth would not stop: whole");
    for (; gpu_iceberg_growing(gpu) && !failures; at += next, shares++)
        insert(at, next);
    EXPECT(shares == 1, "a growth from whole arrays took %u batches of %llu keys (a stop: 1)", shares,
           (unsigned long long)next);
    if (shrink) { /* the next growth, from the chunked arrays, in shares */
        while ((double)(at + small) <= 0.9 * (double)gpu_iceberg_slots(gpu) && !failures) {
            insert(at, small);
            at += small;
        }
        EXPECT(!grow_for(at, small), "a growth before small batches made whole arrays");
        for (shares = 0; gpu_iceberg_growing(gpu) && !failures; at += small, shares++)
            insert(at, small);
        EXPECT(shares >= 4, "a growth from chunked arrays took %u batches of %llu keys (in shares: 4 or more)", shares,
               (unsigned long long)small);
    }
    /* every key found with its value, and as many others absent */
    size_t wrong = 0;
    for (uint64_t b = 0; b < 2 * at && !failures; b += 2 * big) {
        const uint64_t n = 2 * at - b < 2 * big ? 2 * at - b : 2 * big;
        for (uint64_t i = 0; i < n; i++)
            keys[i] = key_at(b + i);
        TO_DEV(dk, keys.data(), n * 8);
        EXPECT(gpu_iceberg_find(gpu, dk, n, dr, NULL, vb ? dvo : NULL, 0, &err) == FLOE_OK, "%s", err.msg);
        FROM_DEV(res.data(), dr, n);
        if (vb)
            FROM_DEV(got.data(), dvo, n * 8);
        for (uint64_t i = 0; i < n; i++) {
            const bool held = b + i < at;
            wrong += res[i] != (held ? FLOE_PRESENT : FLOE_ABSENT) ||
                     (vb && held && (got[i] & floe_mask_bits(vb * 8)) != value_of(keys[i]));
        }
    }
    EXPECT(wrong == 0, "%zu of %llu keys not found (or not absent) as inserted", wrong, (unsigned long long)(2 * at));
    printf("  %s of whole arrays: %u growths ended by their batch, then one from them into chunked arrays by a "
           "batch of %llu keys%s; %llu keys\n",
           vb ? "MAP" : "SET", whole_growths, (unsigned long long)next, shrink ? ", then one in shares" : "",
           (unsigned long long)at);
    cudaFree(dk);
    cudaFree(dv);
    cudaFree(dvo);
    cudaFree(dr);
    gpu_iceberg_destroy(gpu);
}

/* growth while the batches go on: SET and MAP; the full run adds wide and narrow rows */
static void grow_cases(uint64_t seed, bool small)
{
    if (small) {
        grow_against_cpu(40, 0, seed + 11);
        grow_against_cpu(48, 8, seed + 12);
        grow_whole(8, true, seed + 13);
        grow_whole(8, false, seed + 14);
        return;
    }
    grow_against_cpu(40, 0, seed + 26);
    grow_against_cpu(64, 0, seed + 27);
    grow_against_cpu(48, 8, seed + 28);
    grow_against_cpu(24, 4, seed + 29);
    grow_within_twice(0, seed + 30);
    grow_within_twice(8, seed + 31);
    grow_out_of_device_memory(seed + 32);
    grow_whole(0, true, seed + 33);
    grow_whole(8, true, seed + 34);
    grow_whole(0, false, seed + 35);
    grow_whole(8, false, seed + 36);
}

/* floe_gpu_load_kernels_at_start, called (as floed calls it) before CUDA started with `before`
 * the environment's CUDA_MODULE_LOADING then (NULL: none): the driver loads kernels eagerly,
 * or as the environment said, which wins. */
static void loading_check(const char *before)
{
    const char *want = before ? before : "EAGER";
    if (strcmp(want, "EAGER") && strcmp(want, "LAZY")) {
        printf("not checked: kernels' loading (CUDA_MODULE_LOADING=%s, neither EAGER nor LAZY)\n", want);
        return;
    }
    void *fn = NULL;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    CUmoduleLoadingMode mode = CU_MODULE_LAZY_LOADING;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuModuleGetLoadingMode", &fn, 12000, cudaEnableDefault, &q);
    EXPECT(e == cudaSuccess && q == cudaDriverEntryPointSuccess && fn, "cuModuleGetLoadingMode: not found (%s)",
           cudaGetErrorString(e));
    const CUresult r = ((CUresult(*)(CUmoduleLoadingMode *))fn)(&mode);
    EXPECT(r == CUDA_SUCCESS, "cuModuleGetLoadingMode: error %d", (int)r);
    const bool eager = mode == CU_MODULE_EAGER_LOADING;
    EXPECT(eager == !strcmp(want, "EAGER"), "the driver loads kernels %s, where CUDA_MODULE_LOADING was %s%s",
           eager ? "eagerly" : "lazily", want,
           before ? " in the environment" : " (set by floe_gpu_load_kernels_at_start)");
    printf("ok: kernels loaded %s (CUDA_MODULE_LOADING %s)\n", eager ? "at start" : "at their first launch",
           before ? "from the environment, kept" : "set to EAGER by floe_gpu_load_kernels_at_start");
}

int main(int argc, char **argv)
{
    /* the cases backend_suite runs by name (backend_test.cu); any other name would run nothing */
    static const char *const backend_cases[] = {"map48-grow"};
    static const struct option longopts[] = {
        {"small", no_argument, NULL, 's'},
        {"tree", no_argument, NULL, 't'},
        {"ordered", no_argument, NULL, 'o'},
        {"static", no_argument, NULL, 'x'},
        {"grow", no_argument, NULL, 'g'},
        {"cycles", required_argument, NULL, 'c'},
        {"fault", no_argument, NULL, 'f'},
        {"fault-child", no_argument, NULL, 'F'},
        {"backend-case", required_argument, NULL, 'b'},
        {"seed", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool small = false, tree = false, ordered = false, statics = false, grow = false, seeded = false;
    unsigned cycles = 0;
    bool fault = false, fault_child = false;
    const char *backend_case = NULL;
    uint64_t seed = 0;
    int ch;
    /* arguments first: nothing here touches CUDA, so --help and usage errors work without a device */
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 's':
            small = true; /* for compute-sanitizer */
            break;
        case 't':
            tree = true;
            break;
        case 'o':
            ordered = true;
            break;
        case 'x':
            statics = true;
            break;
        case 'g':
            grow = true;
            break;
        case 'f':
            fault = true;
            break;
        case 'F': /* fault_suite's child */
            fault_child = true;
            break;
        case 'c': {
            uint64_t v = 0;
            if (!floe_size_parse(optarg, &v) || v == 0 || v > 1000000) {
                fprintf(stderr, "floe-gpu-tests: --cycles takes a number from 1 to 1000000, got '%s'\n", optarg);
                usage_error();
            }
            cycles = (unsigned)v;
            break;
        }
        case 'b': {
            size_t i = 0, n = sizeof backend_cases / sizeof *backend_cases;
            while (i < n && strcmp(optarg, backend_cases[i]))
                i++;
            if (i == n) {
                fprintf(stderr, "floe-gpu-tests: --backend-case: no case '%s' (there is:", optarg);
                for (i = 0; i < n; i++)
                    fprintf(stderr, " %s", backend_cases[i]);
                fprintf(stderr, ")\n");
                usage_error();
            }
            backend_case = optarg;
            break;
        }
        case 'S':
            if (seeded) {
                fprintf(stderr, "floe-gpu-tests: the seed given twice\n");
                usage_error();
            }
            if (!floe_size_parse(optarg, &seed)) {
                fprintf(stderr, "floe-gpu-tests: --seed takes a whole decimal number, got '%s'\n", optarg);
                usage_error();
            }
            seeded = true;
            break;
        case 'h':
            help();
            return 0;
        default: /* getopt_long said what is wrong */
            usage_error();
        }
    }
    for (int i = optind; i < argc; i++) { /* a bare number is the seed, as --seed N */
        if (seeded || !floe_size_parse(argv[i], &seed)) {
            fprintf(stderr,
                    seeded ? "floe-gpu-tests: the seed given twice ('%s')\n"
                           : "floe-gpu-tests: unexpected argument '%s' (a bare argument is the seed: a "
                             "whole number)\n",
                    argv[i]);
            usage_error();
        }
        seeded = true;
    }
    if ((tree ? 1 : 0) + (ordered ? 1 : 0) + (statics ? 1 : 0) + (grow ? 1 : 0) + (cycles ? 1 : 0) + (fault ? 1 : 0) +
            (backend_case ? 1 : 0) >
        1) {
        fprintf(stderr, "floe-gpu-tests: --tree, --ordered, --static, --grow, --cycles, --fault and --backend-case "
                        "exclude each other\n");
        usage_error();
    }
    if (small && fault) {
        fprintf(stderr, "floe-gpu-tests: --fault has no small form\n");
        usage_error();
    }
    if (small && backend_case) {
        fprintf(stderr, "floe-gpu-tests: --backend-case runs its case at full size; --small does not apply\n");
        usage_error();
    }
    const char *loading = getenv("CUDA_MODULE_LOADING");
    floe_gpu_load_kernels_at_start(); /* as floed and the benchmarks run the engines */
    char name[256];
    if (!gpu_available(0, name, sizeof name)) {
        fprintf(stderr, "floe-gpu-tests: no CUDA device\n");
        return 2;
    }
    if (fault_child)
        return fault_child_main();
    printf("floe-gpu-tests on %s\n", name);
    if (!seeded)
        seed = (uint64_t)time(NULL); /* fresh inputs every run; printed to reproduce */
    printf("seed %llu\n", (unsigned long long)seed);
    loading_check(loading);
    if (backend_case) { /* floe-gpu-tests --backend-case NAME [SEED] */
        backend_suite(seed + 30, false, backend_case);
        printf("%s: %d failures\n", failures ? "FAILED" : "passed", failures);
        return failures ? 1 : 0;
    }
    if (tree) { /* floe-gpu-tests --tree [--small] [SEED]: TREE tables only */
        tree_suite(seed + 40, small);
        printf("%s: %d failures\n", failures ? "FAILED" : "passed", failures);
        return failures ? 1 : 0;
    }
    if (fault) { /* floe-gpu-tests --fault: a device failed on purpose, in a child process */
        fault_suite("/proc/self/exe");
        printf("%s: %d failures\n", failures ? "FAILED" : "passed", failures);
        return failures ? 1 : 0;
    }
    if (cycles) { /* floe-gpu-tests --cycles N [--small] [SEED]: tables in parts made and dropped */
        cycles_suite(seed + 60, small, cycles);
        printf("%s: %d failures\n", failures ? "FAILED" : "passed", failures);
        return failures ? 1 : 0;
    }
    if (ordered) { /* floe-gpu-tests --ordered [--small] [SEED]: the ORDERED engine only */
        ordered_suite(seed + 50, small);
        printf("%s: %d failures\n", failures ? "FAILED" : "passed", failures);
        return failures ? 1 : 0;
    }
    if (statics) { /* floe-gpu-tests --static [--small] [SEED]: STATIC tables only */
        static_suite(seed + 70, small);
        printf("%s: %d failures\n", failures ? "FAILED" : "passed", failures);
        return failures ? 1 : 0;
    }
    if (grow) { /* floe-gpu-tests --grow [--small] [SEED]: SET and MAP growth while batches go on */
        grow_cases(seed, small);
        printf("%s: %d failures\n", failures ? "FAILED" : "passed", failures);
        return failures ? 1 : 0;
    }
    staging_kept();
    if (small) {
        against_cpu(40, 8, 0.9, seed, true);
        against_cpu(64, 9, 0.9, seed + 1, false, true);
        against_cpu(40, 9, 0.9, seed + 4, false, true, 5);
        /* batches up to 200000 keys, a table of 2^18 slots */
        against_cpu(40, 13, 0.6, seed + 5, false);
        /* the same with puts in pieces: twins in different pieces of a batch */
        against_cpu(40, 13, 0.6, seed + 7, false, false, 0, 4096);
        /* 1.5 x 2^a primary buckets, as a TREE's root table grows */
        against_cpu(52, 9, 0.9, seed + 8, true, false, 0, 0, 1);
        grow_cases(seed, true);
        backend_suite(seed + 2, true, NULL);
        tree_suite(seed + 3, true);
        ordered_suite(seed + 6, true);
        static_suite(seed + 10, true);
        cycles_suite(seed + 9, true, 4);
    } else {
        const uint32_t widths[] = {16, 24, 31, 40, 48, 64};
        for (int i = 0; i < 6; i++)
            against_cpu(widths[i], widths[i] == 16 ? 10 : 14, 0.95, seed + i, true);
        /* the reference library's fault configuration: 16-bit primary, 32-bit secondary rows */
        against_cpu(31, 16, 0.95, seed + 10, true);
        /* erase batches mixed in: first occurrence ERASED, tombstones never reused */
        against_cpu(40, 14, 0.95, seed + 20, false, true);
        against_cpu(64, 12, 0.95, seed + 21, false, true);
        /* the fix-up's batch tags running out mid-run: the scratch is cleared, answers stay exact */
        against_cpu(40, 12, 0.95, seed + 22, false, true, 5);
        /* puts in pieces of 4096 keys: twins in different pieces of a batch */
        against_cpu(40, 14, 0.95, seed + 23, false, true, 0, 4096);
        /* 1.5 x 2^a primary buckets, as a TREE's root table grows */
        against_cpu(52, 13, 0.95, seed + 24, true, false, 0, 0, 1);
        against_cpu(31, 14, 0.95, seed + 25, false, true, 0, 0, 1);
        grow_cases(seed, false);
        /* the backend floed uses: pipeline, MAP, growth, scan, save/load across backends */
        backend_suite(seed + 30, false, NULL);
        /* TREE tables: engine against the CPU engine, both backends */
        tree_suite(seed + 40, false);
        /* ORDERED tables: the engine against the CPU engine */
        ordered_suite(seed + 50, false);
        /* STATIC tables: the static cuckoo engine, both backends */
        static_suite(seed + 70, false);
        /* tables in parts over every device, made and dropped again and again */
        cycles_suite(seed + 60, false, 50);
        /* last: a device failed on purpose (in a child process: the fault cannot be undone) */
        fault_suite("/proc/self/exe");
    }
    printf("%s: %d failures\n", failures ? "FAILED" : "passed", failures);
    return failures ? 1 : 0;
}
