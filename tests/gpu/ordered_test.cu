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
 */
#include <stdlib.h>
#include <string.h>

#include <vector>

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

void ordered_suite(uint64_t seed, bool small)
{
    const uint32_t widths[] = {1, 8, 31, 40, 64};
    for (int i = 0; i < 5; i++)
        for (uint32_t vb = 0; vb <= 8; vb += small ? 8 : 4)
            engine_vs_cpu(widths[i], vb, small ? 3000 : 200000, small ? 12 : 24, seed + (uint64_t)i * 16 + vb);
}
