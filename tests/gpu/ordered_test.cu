/*
 * ordered_test.cu - the GPU ORDERED engine (gpu/ordered_gpu.h) against the
 * CPU one (tables/ordered.h) on the same fresh random batches: inserts
 * (some with overwrite), finds and erases with heavy duplication inside
 * batches, for key widths 1, 8, 31, 40 and 64, with and without values;
 * after each batch every answer and value compared, then successors and
 * predecessors of random keys and of the ends, ranges in pages both ways,
 * many short ranges at once, and the whole table in order.  The pool
 * starts small and grows; erasing most keys builds the table again; a
 * table built from sorted keys (a load) answers as the one it came from.
 * Then ORDERED tables through both backends, saved by each, loaded by the
 * other.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vector>

#include "backend.h"
#include "backend_test.h"
#include "ordered.h"
#include "ordered_gpu.h"

static floe_spec spec_for(uint32_t bits, uint32_t vb, uint64_t seed)
{
    floe_spec s;
    floe_spec_default(&s);
    strcpy(s.name, "o");
    s.kind = FLOE_KIND_ORDERED;
    s.key_bits = bits;
    s.value_bytes = vb;
    s.seed = seed | 1;
    return s;
}

static uint64_t mask_of(uint32_t bits)
{
    return bits >= 64 ? ~0ull : (1ull << bits) - 1;
}

/* A key from `distinct` scattered ones, sometimes any, sometimes an end. */
static uint64_t pick(uint64_t *rng, uint32_t bits, uint64_t distinct)
{
    const uint64_t r = test_rng(rng), m = mask_of(bits);
    if (r % 64 == 0)
        return r % 128 == 0 ? 0 : m;
    if (r % 8 == 1)
        return test_rng(rng) & m;
    return ((test_rng(rng) % distinct) * 0x9E3779B97F4A7C15ull) & m;
}

/* Both tables' whole contents, in order, the same. */
static bool same_contents(ordered *cpu, gpu_ordered *gpu, uint32_t vb, const char *when)
{
    floe_table_stats st;
    ordered_stats(cpu, &st);
    const size_t n = st.keys;
    EXPECT_OR_RETURN(false, gpu_ordered_keys(gpu) == n, "%s: the GPU table holds %llu keys, the CPU %zu", when,
                     (unsigned long long)gpu_ordered_keys(gpu), n);
    std::vector<uint64_t> ck(n + 1), gk(n + 1);
    std::vector<uint8_t> cv((n + 1) * 8), gv((n + 1) * 8);
    size_t got;
    uint64_t next;
    bool done;
    ordered_range(cpu, 0, ~0ull, false, n, ck.data(), vb ? cv.data() : NULL, &got, &next, &done);
    floe_errinfo err;
    EXPECT_OR_RETURN(false, gpu_ordered_download(gpu, gk.data(), vb ? gv.data() : NULL, &err) == FLOE_OK,
                     "%s: download: %s", when, err.msg);
    for (size_t i = 0; i < n; i++) {
        EXPECT_OR_RETURN(false, ck[i] == gk[i], "%s: key %zu is %llx on the GPU, %llx on the CPU", when, i,
                         (unsigned long long)gk[i], (unsigned long long)ck[i]);
        EXPECT_OR_RETURN(false, !vb || !memcmp(&cv[i * vb], &gv[i * vb], vb), "%s: the value of key %zu differs", when,
                         i);
    }
    return true;
}

/* Neighbours, ranges (paged, both ways; many at once) of random bounds. */
static void same_queries(ordered *cpu, gpu_ordered *gpu, uint32_t bits, uint32_t vb, uint64_t *rng, const char *when)
{
    const uint64_t m = mask_of(bits);
    enum { Q = 3000 };
    std::vector<uint64_t> q(Q), cf(Q), gf(Q);
    std::vector<uint8_t> cr(Q), gr(Q), cv(Q * 8), gv(Q * 8);
    floe_table_stats st;
    ordered_stats(cpu, &st);
    std::vector<uint64_t> all(st.keys + 1);
    size_t nall;
    uint64_t nx;
    bool dn;
    ordered_range(cpu, 0, ~0ull, false, st.keys, all.data(), NULL, &nall, &nx, &dn);
    for (int i = 0; i < Q; i++) {
        const uint64_t r = test_rng(rng);
        q[i] = i == 0 ? 0 : i == 1 ? m : (nall && r % 3 == 0) ? all[r % nall] + (r & 4 ? 1 : 0) : test_rng(rng);
        q[i] &= m;
    }
    floe_errinfo err;
    for (int pred = 0; pred < 2; pred++) {
        ordered_neighbours(cpu, pred, q.data(), Q, cr.data(), cf.data(), vb ? cv.data() : NULL, NULL);
        EXPECT(gpu_ordered_neighbours_host(gpu, pred, q.data(), Q, gr.data(), gf.data(), vb ? gv.data() : NULL, &err) ==
                   FLOE_OK,
               "%s: neighbours: %s", when, err.msg);
        for (int i = 0; i < Q; i++) {
            EXPECT(cr[i] == gr[i] && cf[i] == gf[i] && (!vb || !memcmp(&cv[i * vb], &gv[i * vb], vb)),
                   "%s: %s of %llx: GPU %u %llx, CPU %u %llx", when, pred ? "predecessor" : "successor",
                   (unsigned long long)q[i], gr[i], (unsigned long long)gf[i], cr[i], (unsigned long long)cf[i]);
        }
    }
    /* single ranges, paged both ways */
    for (int i = 0; i < 12; i++) {
        uint64_t lo = test_rng(rng) & m, hi = test_rng(rng) & m;
        if (nall && i % 2)
            lo = all[test_rng(rng) % nall], hi = all[test_rng(rng) % nall];
        if (i == 0)
            lo = 0, hi = m;
        if (lo > hi)
            std::swap(lo, hi);
        const bool desc = i % 3 == 1;
        const size_t limit = 1 + test_rng(rng) % (i % 2 ? 5 : 700);
        std::vector<uint64_t> ck(limit), gk(limit);
        std::vector<uint8_t> cvv(limit * 8), gvv(limit * 8);
        uint64_t clo = lo, chi = hi, glo = lo, ghi = hi;
        for (int page = 0; page < 40; page++) {
            size_t cn, gn;
            uint64_t cnext, gnext;
            bool cdone, gdone;
            ordered_range(cpu, clo, chi, desc, limit, ck.data(), vb ? cvv.data() : NULL, &cn, &cnext, &cdone);
            EXPECT(gpu_ordered_range_host(gpu, glo, ghi, desc, limit, gk.data(), vb ? gvv.data() : NULL, &gn, &gnext,
                                          &gdone, &err) == FLOE_OK,
                   "%s: range: %s", when, err.msg);
            EXPECT(cn == gn && cdone == gdone && (cdone || cnext == gnext),
                   "%s: range [%llx, %llx] %s page %d: GPU %zu keys done %d next %llx, CPU %zu done %d next %llx", when,
                   (unsigned long long)lo, (unsigned long long)hi, desc ? "desc" : "asc", page, gn, gdone,
                   (unsigned long long)gnext, cn, cdone, (unsigned long long)cnext);
            EXPECT(!memcmp(ck.data(), gk.data(), cn * 8) && (!vb || !memcmp(cvv.data(), gvv.data(), cn * vb)),
                   "%s: range [%llx, %llx] page %d: keys or values differ", when, (unsigned long long)lo,
                   (unsigned long long)hi, page);
            if (cdone)
                break;
            (desc ? chi : clo) = cnext;
            (desc ? ghi : glo) = gnext;
        }
    }
    /* many short ranges at once, as O1 runs them */
    enum { R = 500, L = 33 };
    std::vector<uint64_t> lo(R), hi(R), out((size_t)R * L);
    std::vector<uint8_t> vout((size_t)R * L * 8);
    std::vector<uint32_t> counts(R);
    for (int i = 0; i < R; i++) {
        lo[i] = q[i];
        hi[i] = i % 5 == 0 ? lo[i] + (test_rng(rng) % 1000) : m;
        if (hi[i] < lo[i] || hi[i] > m)
            hi[i] = m;
    }
    uint64_t *d_lo, *d_hi, *d_out;
    uint32_t *d_counts;
    uint8_t *d_vout;
    cudaMalloc(&d_lo, R * 8);
    cudaMalloc(&d_hi, R * 8);
    cudaMalloc(&d_out, (size_t)R * L * 8);
    cudaMalloc(&d_vout, (size_t)R * L * 8);
    cudaMalloc(&d_counts, R * 4);
    cudaMemcpy(d_lo, lo.data(), R * 8, cudaMemcpyHostToDevice);
    cudaMemcpy(d_hi, hi.data(), R * 8, cudaMemcpyHostToDevice);
    EXPECT(gpu_ordered_ranges(gpu, d_lo, d_hi, R, L, d_out, vb ? d_vout : NULL, d_counts, 0, &err) == FLOE_OK,
           "%s: ranges: %s", when, err.msg);
    EXPECT(cudaDeviceSynchronize() == cudaSuccess, "%s: ranges: %s", when, cudaGetErrorString(cudaGetLastError()));
    cudaMemcpy(out.data(), d_out, (size_t)R * L * 8, cudaMemcpyDeviceToHost);
    cudaMemcpy(vout.data(), d_vout, (size_t)R * L * 8, cudaMemcpyDeviceToHost);
    cudaMemcpy(counts.data(), d_counts, R * 4, cudaMemcpyDeviceToHost);
    std::vector<uint64_t> ck(L);
    std::vector<uint8_t> cvv(L * 8);
    for (int i = 0; i < R; i++) {
        size_t cn;
        uint64_t cnext;
        bool cdone;
        ordered_range(cpu, lo[i], hi[i], false, L, ck.data(), vb ? cvv.data() : NULL, &cn, &cnext, &cdone);
        EXPECT(cn == counts[i] && !memcmp(ck.data(), &out[(size_t)i * L], cn * 8), "%s: short range %d: %u keys, %zu",
               when, i, counts[i], cn);
        EXPECT(!vb || !memcmp(cvv.data(), &vout[(size_t)i * L * vb], cn * vb), "%s: short range %d: values differ",
               when, i);
    }
    cudaFree(d_lo);
    cudaFree(d_hi);
    cudaFree(d_out);
    cudaFree(d_vout);
    cudaFree(d_counts);
}

/* One batch of op (0 insert, 1 insert with overwrite, 2 find, 3 erase) on both engines, answers compared. */
static bool same_batch(ordered *cpu, gpu_ordered *gpu, int op, const uint64_t *keys, const uint8_t *vals, size_t n,
                       uint32_t vb, const char *when)
{
    std::vector<uint8_t> cr(n + 1), gr(n + 1), cv(n * 8 + 8), gv(n * 8 + 8);
    floe_answer_counts cc = {0, 0, 0, 0, 0}, gc = {0, 0, 0, 0, 0};
    floe_errinfo err;
    floe_status st;
    if (op <= 1) {
        ordered_insert(cpu, keys, vb ? vals : NULL, n, op == 1, cr.data(), vb ? cv.data() : NULL, &cc, NULL);
        st = gpu_ordered_insert_host(gpu, keys, vb ? vals : NULL, n, op == 1, gr.data(), vb ? gv.data() : NULL, &gc,
                                     &err);
    } else if (op == 2) {
        ordered_find(cpu, keys, n, cr.data(), vb ? cv.data() : NULL, &cc, NULL);
        st = gpu_ordered_find_host(gpu, keys, n, gr.data(), vb ? gv.data() : NULL, &err);
        floe_answer_counts_tally(&gc, gr.data(), n);
    } else {
        ordered_erase(cpu, keys, n, cr.data(), &cc, NULL);
        st = gpu_ordered_erase_host(gpu, keys, n, gr.data(), &gc, &err);
    }
    EXPECT_OR_RETURN(false, st == FLOE_OK, "%s: op %d: %s", when, op, err.msg);
    EXPECT_OR_RETURN(false, gpu_ordered_check(gpu, &err) == FLOE_OK, "%s: after op %d: %s", when, op, err.msg);
    for (size_t i = 0; i < n; i++) {
        EXPECT_OR_RETURN(false, cr[i] == gr[i], "%s: op %d, key %zu (%llx): GPU %u, CPU %u", when, op, i,
                         (unsigned long long)keys[i], gr[i], cr[i]);
        EXPECT_OR_RETURN(false, !vb || op > 2 || !memcmp(&cv[i * vb], &gv[i * vb], vb),
                         "%s: op %d, key %zu: values differ", when, op, i);
    }
    EXPECT_OR_RETURN(false,
                     cc.inserted == gc.inserted && cc.present == gc.present && cc.absent == gc.absent &&
                         cc.erased == gc.erased,
                     "%s: op %d: counts differ", when, op);
    return true;
}

static void engine_vs_cpu(uint32_t bits, uint32_t vb, size_t batch, int rounds, uint64_t seed)
{
    char when[96];
    floe_spec spec = spec_for(bits, vb, seed);
    ordered *cpu;
    gpu_ordered *gpu;
    floe_errinfo err;
    EXPECT(ordered_create(&spec, NULL, &cpu, &err) == FLOE_OK, "ordered_create: %s", err.msg);
    EXPECT(gpu_ordered_create(&spec, 0, &gpu, &err) == FLOE_OK, "gpu_ordered_create: %s", err.msg);
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 1;
    const uint64_t distinct = bits <= 8 ? 300 : batch * 4;
    std::vector<uint64_t> keys(batch);
    std::vector<uint8_t> vals(batch * 8);
    int r = 0;
    for (; r < rounds && !failures; r++) {
        /* fill, then erase most (the table built again), then fill again */
        const int phase = r < rounds / 2 ? 0 : r < rounds * 3 / 4 ? 1 : 0;
        const size_t n = 1 + test_rng(&rng) % batch;
        for (size_t i = 0; i < n; i++) {
            keys[i] = pick(&rng, bits, distinct);
            const uint64_t v = test_rng(&rng);
            memcpy(&vals[i * 8], &v, 8);
        }
        for (size_t i = 0; vb == 4 && i < n; i++)
            memmove(&vals[i * 4], &vals[i * 8], 4);
        const uint64_t p = test_rng(&rng) % 10;
        const int op = phase == 1 ? (p < 8 ? 3 : 2) : (p < 5 ? 0 : p < 7 ? 1 : p < 9 ? 2 : 3);
        snprintf(when, sizeof when, "key_bits %u vb %u round %d", bits, vb, r);
        if (!same_batch(cpu, gpu, op, keys.data(), vals.data(), n, vb, when))
            break;
        if (r % 4 == 3 || r == rounds - 1) {
            same_queries(cpu, gpu, bits, vb, &rng, when);
            if (!same_contents(cpu, gpu, vb, when))
                break;
        }
    }
    /* a table built from the sorted keys (a load) answers as the one it came from */
    floe_table_stats st;
    ordered_stats(cpu, &st);
    std::vector<uint64_t> all(st.keys + 1);
    std::vector<uint8_t> allv((st.keys + 1) * 8);
    size_t nall;
    uint64_t nx;
    bool dn;
    ordered_range(cpu, 0, ~0ull, false, st.keys, all.data(), vb ? allv.data() : NULL, &nall, &nx, &dn);
    gpu_ordered *built;
    EXPECT(gpu_ordered_create(&spec, 0, &built, &err) == FLOE_OK, "create: %s", err.msg);
    EXPECT(gpu_ordered_upload(built, all.data(), vb ? allv.data() : NULL, nall, &err) == FLOE_OK, "upload: %s",
           err.msg);
    EXPECT(gpu_ordered_check(built, &err) == FLOE_OK, "after upload: %s", err.msg);
    snprintf(when, sizeof when, "key_bits %u vb %u, built from %zu keys", bits, vb, nall);
    same_queries(cpu, built, bits, vb, &rng, when);
    same_contents(cpu, built, vb, when);
    if (!failures)
        printf("ok: ORDERED key_bits %2u, %u-byte values: %d batches of up to %zu keys, %zu keys left, %u levels, "
               "built again from them: %u levels\n",
               bits, vb, r, batch, nall, gpu_ordered_height(gpu), gpu_ordered_height(built));
    gpu_ordered_destroy(built);
    gpu_ordered_destroy(gpu);
    ordered_destroy(cpu);
}

/* One batch on both backends' tables; answers (and neighbours, values) compared. */
static bool backends_batch(floe_table *ct, floe_table *gt, floe_batch *cb, floe_batch *gb, size_t n, uint32_t vb,
                           const char *when)
{
    const floe_status cs = floe_table_run(ct, cb), gs = floe_table_run(gt, gb);
    EXPECT_OR_RETURN(false, cs == FLOE_OK && gs == FLOE_OK, "%s: op %d: CPU %s, GPU %s", when, (int)cb->op,
                     cb->error.msg, gb->error.msg);
    if (cb->op == FLOE_OP_RANGE || cb->op == FLOE_OP_SCAN) {
        EXPECT_OR_RETURN(false,
                         cb->scan_n == gb->scan_n && cb->scan_done == gb->scan_done &&
                             (cb->scan_done || cb->next.position == gb->next.position) &&
                             !memcmp(cb->scan_keys, gb->scan_keys, cb->scan_n * 8) &&
                             (!cb->scan_values || !memcmp(cb->scan_values, gb->scan_values, cb->scan_n * vb)),
                         "%s: op %d: %zu keys (done %d) on the GPU, %zu (done %d) on the CPU", when, (int)cb->op,
                         gb->scan_n, gb->scan_done, cb->scan_n, cb->scan_done);
        return true;
    }
    EXPECT_OR_RETURN(false, !memcmp(cb->results, gb->results, n), "%s: op %d: answers differ", when, (int)cb->op);
    EXPECT_OR_RETURN(false, !cb->keys_out || !memcmp(cb->keys_out, gb->keys_out, n * 8), "%s: op %d: neighbours differ",
                     when, (int)cb->op);
    EXPECT_OR_RETURN(false, !cb->values_out || !memcmp(cb->values_out, gb->values_out, n * vb),
                     "%s: op %d: values differ", when, (int)cb->op);
    EXPECT_OR_RETURN(false, !memcmp(&cb->counts, &gb->counts, sizeof cb->counts), "%s: op %d: counts differ", when,
                     (int)cb->op);
    return true;
}

/* ORDERED tables through both backends (tables/backend.h): every operation
 * on the same random batches, scans and ranges paged, stats, and a table
 * saved by either backend loaded by the other. */
static void ordered_backends_agree(uint64_t seed, bool small)
{
    floe_backend *cpu_be = test_cpu_parts(1), *gpu_be = test_gpu_parts(1);
    EXPECT(cpu_be && gpu_be, "backends");
    const uint32_t vb = 8, bits = 40;
    floe_spec spec = spec_for(bits, vb, seed);
    strcpy(spec.backend, "auto");
    floe_table *ct, *gt;
    floe_errinfo err;
    EXPECT(floe_table_create(cpu_be, &spec, &ct, &err) == FLOE_OK, "create on the CPU: %s", err.msg);
    EXPECT(floe_table_create(gpu_be, &spec, &gt, &err) == FLOE_OK, "create on the GPU: %s", err.msg);
    const size_t B = small ? 2000 : 300000;
    std::vector<uint64_t> keys(B), ck(B), gk(B);
    std::vector<uint8_t> vals(B * 8), cr(B), gr(B), cv(B * 8), gv(B * 8);
    uint64_t rng = seed + 99;
    char when[80];
    for (int round = 0; round < 16 && !failures; round++) {
        const size_t n = 1 + test_rng(&rng) % B;
        for (size_t i = 0; i < n; i++) {
            keys[i] = pick(&rng, bits, B * 2);
            const uint64_t v = test_rng(&rng);
            memcpy(&vals[i * 8], &v, 8);
        }
        static const floe_op ops[] = {FLOE_OP_INSERT, FLOE_OP_INSERT, FLOE_OP_FIND,
                                      FLOE_OP_ERASE,  FLOE_OP_SUCC,   FLOE_OP_PRED};
        const floe_op op = ops[test_rng(&rng) % 6];
        floe_batch cb = {}, gb = {};
        cb.op = op;
        cb.keys = keys.data();
        cb.n = n;
        cb.results = cr.data();
        if (op == FLOE_OP_INSERT) {
            cb.values = vals.data(), cb.values_len = n * vb;
            cb.flags = FLOE_BATCH_WANT_VALUES | (round % 3 == 0 ? FLOE_BATCH_OVERWRITE : 0);
        } else if (op != FLOE_OP_ERASE) {
            cb.flags = FLOE_BATCH_WANT_VALUES;
        }
        if (cb.flags & FLOE_BATCH_WANT_VALUES)
            cb.values_out = cv.data();
        if (op == FLOE_OP_SUCC || op == FLOE_OP_PRED)
            cb.keys_out = ck.data();
        gb = cb;
        gb.results = gr.data();
        gb.values_out = cb.values_out ? gv.data() : NULL;
        gb.keys_out = cb.keys_out ? gk.data() : NULL;
        snprintf(when, sizeof when, "backends, round %d", round);
        if (!backends_batch(ct, gt, &cb, &gb, n, vb, when))
            break;
        /* a range and a scan, paged */
        for (int scan = 0; scan < 2; scan++) {
            const uint64_t lo = test_rng(&rng) & mask_of(bits), hi = lo + (test_rng(&rng) % (1ull << 36));
            floe_batch cs = {}, gs = {};
            cs.op = scan ? FLOE_OP_SCAN : FLOE_OP_RANGE;
            cs.lo = lo;
            cs.hi = hi > mask_of(bits) ? mask_of(bits) : hi;
            cs.desc = round % 2;
            cs.limit = 1 + test_rng(&rng) % 500;
            cs.flags = FLOE_BATCH_WANT_VALUES;
            cs.scan_keys = ck.data(), cs.scan_values = cv.data();
            gs = cs;
            gs.scan_keys = gk.data(), gs.scan_values = gv.data();
            for (int page = 0; page < 6; page++) {
                if (!backends_batch(ct, gt, &cs, &gs, 0, vb, when) || cs.scan_done)
                    break;
                if (scan) {
                    cs.cursor = cs.next, gs.cursor = gs.next;
                    cs.cursor_set = gs.cursor_set = 1;
                } else {
                    (cs.desc ? cs.hi : cs.lo) = cs.next.position;
                    (gs.desc ? gs.hi : gs.lo) = gs.next.position;
                    cs.cursor_set = gs.cursor_set = 1; /* a continued range: generation 0 */
                }
            }
        }
    }
    floe_batch cst = {}, gst = {};
    cst.op = gst.op = FLOE_OP_STATS;
    EXPECT(floe_table_run(ct, &cst) == FLOE_OK && floe_table_run(gt, &gst) == FLOE_OK, "stats");
    EXPECT(cst.stats.keys == gst.stats.keys, "stats: %llu keys on the GPU, %llu on the CPU",
           (unsigned long long)gst.stats.keys, (unsigned long long)cst.stats.keys);
    /* saved by one backend, loaded by the other: the same table */
    char cpath[] = "/tmp/floe-ord-cpu-XXXXXX", gpath[] = "/tmp/floe-ord-gpu-XXXXXX";
    int fd1 = mkstemp(cpath), fd2 = mkstemp(gpath);
    close(fd1), close(fd2);
    floe_batch sv = {};
    sv.op = FLOE_OP_SAVE;
    sv.path = cpath;
    EXPECT(floe_table_run(ct, &sv) == FLOE_OK, "save on the CPU: %s", sv.error.msg);
    sv.path = gpath;
    EXPECT(floe_table_run(gt, &sv) == FLOE_OK, "save on the GPU: %s", sv.error.msg);
    floe_table *from_cpu = NULL, *from_gpu = NULL;
    EXPECT(floe_table_load(gpu_be, cpath, &from_cpu, &err) == FLOE_OK, "the CPU's file on the GPU: %s", err.msg);
    EXPECT(floe_table_load(cpu_be, gpath, &from_gpu, &err) == FLOE_OK, "the GPU's file on the CPU: %s", err.msg);
    floe_batch a = {}, b = {};
    a.op = b.op = FLOE_OP_SCAN;
    a.limit = b.limit = B;
    a.flags = b.flags = FLOE_BATCH_WANT_VALUES;
    a.scan_keys = ck.data(), a.scan_values = cv.data();
    b.scan_keys = gk.data(), b.scan_values = gv.data();
    for (int page = 0; page < 1000 && from_cpu && from_gpu; page++) {
        if (!backends_batch(from_gpu, from_cpu, &a, &b, 0, vb, "loaded across backends") || a.scan_done)
            break;
        a.cursor = a.next, b.cursor = b.next;
        a.cursor_set = b.cursor_set = 1;
    }
    unlink(cpath);
    unlink(gpath);
    if (!failures)
        printf("ok: ORDERED through both backends: 16 rounds of every operation, ranges and scans paged, a table "
               "saved by each loaded by the other (%llu keys)\n",
               (unsigned long long)cst.stats.keys);
    floe_table_destroy(from_cpu);
    floe_table_destroy(from_gpu);
    floe_table_destroy(ct);
    floe_table_destroy(gt);
    floe_backend_destroy(cpu_be);
    floe_backend_destroy(gpu_be);
}

void ordered_suite(uint64_t seed, bool small)
{
    ordered_backends_agree(seed + 7, small);
    const uint32_t widths[] = {1, 8, 31, 40, 64};
    for (int i = 0; i < 5; i++)
        for (uint32_t vb = 0; vb <= 8; vb += small ? 8 : 4)
            engine_vs_cpu(widths[i], vb, small ? 3000 : 200000, small ? 12 : 24, seed + (uint64_t)i * 16 + vb);
}
