/*
 * backend_test.cu - part of floe-gpu-tests: the GPU backend against the CPU
 * backend through tables/backend.h, the way floed drives them.
 *
 * Both backends get the same fresh random batches, submitted asynchronously
 * so that several are in flight in the GPU pipeline: SET and MAP (4- and
 * 8-byte values) tables, inserts with ids and values, upserts, adds (value
 * += delta, keys repeated within a batch), finds with values, erases, batches larger than a pipeline piece, growing
 * tables, a bad batch in the middle of the stream; the same again with the GPU batches' buffers in the backend's pinned
 * memory (floe_backend_host_alloc), which its copies use directly.  Every per-key answer and value must be identical
 * (ids are checked for consistency instead: placement differs); at the end both hold the same keys and values (full
 * scans), and a table saved by either backend loads in the other with the same content.
 *
 * Lanes (lanes_case): several threads, each submitting in a lane of its own
 * to one GPU table (growing through several generations meanwhile), each
 * with its own keys and a CPU table that gets the same batches: the GPU's
 * answers to a thread's keys must be the CPU table's, exactly.  Keys that
 * every thread inserts at once are INSERTED exactly once in all, and the
 * table ends up holding exactly the CPU tables' keys and the shared ones.
 */
#include <algorithm>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "../unit/data/layout1_map.h"
#include "backend.h"
#include "backend_gpu.h"
#include "backend_test.h"
#include "partition.h"
#include "tablefile.h"

#define CHECK(cond, ...)  EXPECT_OR_RETURN(false, cond, __VA_ARGS__)
#define WCHECK(cond, ...) EXPECT_OR_RETURN(NULL, cond, __VA_ARGS__) /* in a thread's function */

/* One batch and its buffers, for one backend. */
struct job {
    floe_batch b;
    std::vector<uint64_t> keys, ids;
    std::vector<uint8_t> results;
    std::vector<unsigned char> values, values_out;
    void *pinned[4]; /* the batch's keys, results, ids, values_out in a backend's host memory (pin) */
};

/* Set by the pinned cases: the GPU batches' buffers come from this
 * backend's host memory, which the GPU backend copies from and to directly. */
static floe_backend *pinned_from;

/* Moves j's batch buffers into be's host memory. */
static bool pin(job &j, floe_backend *be, uint32_t vb)
{
    const size_t n = j.b.n, sizes[4] = {n * 8 + 8, n + 1, n * 8 + 8, n * vb + 1};
    for (int i = 0; i < 4; i++)
        if (!(j.pinned[i] = floe_backend_host_alloc(be, sizes[i])))
            return false;
    memcpy(j.pinned[0], j.keys.data(), n * 8);
    memcpy(j.pinned[1], j.results.data(), n);
    memcpy(j.pinned[2], j.ids.data(), n * 8);
    memcpy(j.pinned[3], j.values_out.data(), n * vb + 1);
    j.b.keys = (const uint64_t *)j.pinned[0];
    j.b.results = (uint8_t *)j.pinned[1];
    j.b.ids = (uint64_t *)j.pinned[2];
    j.b.values_out = j.pinned[3];
    return true;
}

/* Brings a pinned batch's answers back into j's vectors, and frees its buffers. */
static void unpin(job &j, floe_backend *be, uint32_t vb)
{
    const size_t n = j.b.n;
    memcpy(j.results.data(), j.pinned[1], n);
    memcpy(j.ids.data(), j.pinned[2], n * 8);
    memcpy(j.values_out.data(), j.pinned[3], n * vb + 1);
    for (int i = 0; i < 4; i++)
        floe_backend_host_free(be, j.pinned[i]);
}

struct counter {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    size_t done;
};

static void on_done(floe_batch *b)
{
    counter *c = (counter *)b->user;
    pthread_mutex_lock(&c->lock);
    c->done++;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->lock);
}

static void wait_for(counter *c, size_t n)
{
    pthread_mutex_lock(&c->lock);
    while (c->done < n)
        pthread_cond_wait(&c->cv, &c->lock);
    pthread_mutex_unlock(&c->lock);
}

static void prepare(job &j, floe_op op, unsigned flags, uint32_t vb, counter *c)
{
    size_t n = j.keys.size();
    memset(&j.b, 0, sizeof j.b);
    j.results.assign(n, 0xEE);
    j.ids.assign(n, 0);
    j.values_out.assign(n * vb + 1, 0xEE);
    j.b.op = op;
    j.b.flags = flags;
    j.b.keys = j.keys.data();
    j.b.n = n;
    j.b.results = j.results.data();
    /* an erase or an add gives no ids, asked or not: no buffer for them (floe_table_submit's rule, and
     * what a table in parts gives its parts) */
    j.b.ids = floe_op_has(op, FLOE_OPF_IDS_OUT) ? j.ids.data() : NULL;
    if (floe_op_has(op, FLOE_OPF_VALUES_IN) && vb) { /* an insert's values, an add's deltas */
        j.b.values = j.values.data();
        j.b.values_len = n * vb;
    }
    j.b.values_out = j.values_out.data();
    j.b.done = on_done;
    j.b.user = c;
}

/* Every key and value of a table, sorted: a full scan in small steps. */
static bool scan_all(floe_table *t, uint32_t vb, std::vector<std::pair<uint64_t, uint64_t>> &out)
{
    out.clear();
    floe_batch b;
    memset(&b, 0, sizeof b);
    std::vector<uint64_t> keys(100000);
    std::vector<unsigned char> vals(100000 * 8);
    for (int first = 1;; first = 0) {
        b.op = FLOE_OP_SCAN;
        b.flags = vb ? FLOE_BATCH_WANT_VALUES : 0;
        b.cursor_set = !first;
        b.cursor = b.next;
        b.limit = keys.size();
        b.scan_keys = keys.data();
        b.scan_values = vals.data();
        CHECK(floe_table_run(t, &b) == FLOE_OK, "scan: %s", b.error.msg);
        for (size_t i = 0; i < b.scan_n; i++) {
            uint64_t v = 0;
            if (vb)
                memcpy(&v, vals.data() + i * vb, vb);
            out.push_back(std::make_pair(keys[i], v));
        }
        if (b.scan_done)
            break;
    }
    std::sort(out.begin(), out.end());
    for (size_t i = 1; i < out.size(); i++)
        CHECK(out[i].first != out[i - 1].first, "scan returned key %llu twice", (unsigned long long)out[i].first);
    return true;
}

static bool same_content(floe_table *a, floe_table *b, uint32_t vb, const char *what)
{
    std::vector<std::pair<uint64_t, uint64_t>> ka, kb;
    if (!scan_all(a, vb, ka) || !scan_all(b, vb, kb))
        return false;
    CHECK(ka.size() == kb.size(), "%s: %zu keys against %zu", what, ka.size(), kb.size());
    for (size_t i = 0; i < ka.size(); i++)
        CHECK(ka[i] == kb[i], "%s: entry %zu differs: key %llu value %llu against key %llu value %llu", what, i,
              (unsigned long long)ka[i].first, (unsigned long long)ka[i].second, (unsigned long long)kb[i].first,
              (unsigned long long)kb[i].second);
    floe_batch s;
    memset(&s, 0, sizeof s);
    s.op = FLOE_OP_STATS;
    CHECK(floe_table_run(a, &s) == FLOE_OK, "stats: %s", s.error.msg);
    CHECK(s.stats.keys == ka.size(), "%s: stats say %llu keys, scan found %zu", what, (unsigned long long)s.stats.keys,
          ka.size());
    return true;
}

/* Runs rounds of random batches on both backends and compares.  Tables
 * without growth get a universe well inside their capacity: where FULL
 * appears depends on placement, which differs between the engines, and
 * erases leave tombstones that count as used until a rebuild. */
static bool stream(floe_table *cpu, floe_table *gpu, uint32_t key_bits, uint32_t vb, uint64_t universe, size_t rounds,
                   size_t max_n, uint64_t seed, bool grow)
{
    uint64_t r = seed;
    const uint64_t mask = key_bits == 64 ? ~0ull : ((1ull << key_bits) - 1);
    std::vector<uint64_t> pool(universe);
    for (auto &k : pool)
        k = test_rng(&r) & mask;
    counter cc = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    counter cg = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    const size_t per_round = 6;
    for (size_t round = 0; round < rounds; round++) {
        std::vector<job> jc(per_round), jg(per_round);
        for (size_t k = 0; k < per_round; k++) {
            size_t n = 1 + (size_t)(test_rng(&r) % (k == 0 ? max_n : max_n / 8 + 1));
            std::vector<uint64_t> keys(n);
            for (size_t i = 0; i < n; i++)
                keys[i] = (i > 0 && test_rng(&r) % 5 == 0) ? keys[test_rng(&r) % i] : pool[test_rng(&r) % universe];
            unsigned pick = (unsigned)(test_rng(&r) % 10);
            floe_op op = pick < 6 ? FLOE_OP_INSERT : pick < 9 ? FLOE_OP_FIND : FLOE_OP_ERASE;
            if (vb && pick == 5)
                op = FLOE_OP_ADD;
            unsigned flags = FLOE_BATCH_WANT_IDS;
            if (vb && op != FLOE_OP_ERASE)
                flags |= FLOE_BATCH_WANT_VALUES;
            if (vb && op == FLOE_OP_INSERT && test_rng(&r) % 3 == 0)
                flags |= FLOE_BATCH_OVERWRITE;
            std::vector<unsigned char> values(n * vb);
            for (auto &x : values)
                x = (unsigned char)test_rng(&r);
            if (round == 1 && k == 3 && key_bits < 64) { /* a bad batch: refused, changes nothing */
                keys[n / 2] = mask + 1;
                op = FLOE_OP_INSERT;
                flags &= ~FLOE_BATCH_OVERWRITE;
            }
            jc[k].keys = keys;
            jg[k].keys = keys;
            jc[k].values = values;
            jg[k].values = values;
            prepare(jc[k], op, flags, vb, &cc);
            prepare(jg[k], op, flags, vb, &cg);
            CHECK(!pinned_from || pin(jg[k], pinned_from, vb), "out of pinned host memory");
        }
        size_t before_c = cc.done, before_g = cg.done;
        for (size_t k = 0; k < per_round; k++) { /* all in flight at once */
            floe_table_submit(cpu, &jc[k].b);
            floe_table_submit(gpu, &jg[k].b);
        }
        wait_for(&cc, before_c + per_round);
        wait_for(&cg, before_g + per_round);
        for (size_t k = 0; pinned_from && k < per_round; k++)
            unpin(jg[k], pinned_from, vb);
        for (size_t k = 0; k < per_round; k++) {
            floe_batch &a = jc[k].b, &g = jg[k].b;
            CHECK(a.status == g.status, "round %zu batch %zu op %d: cpu status %d (%s), gpu %d (%s)", round, k,
                  (int)a.op, (int)a.status, a.error.msg, (int)g.status, g.error.msg);
            if (a.status != FLOE_OK)
                continue;
            CHECK(!memcmp(&a.counts, &g.counts, sizeof a.counts),
                  "round %zu batch %zu op %d, %zu keys: counts differ: cpu/gpu inserted %llu/%llu present "
                  "%llu/%llu absent %llu/%llu full %llu/%llu erased %llu/%llu",
                  round, k, (int)a.op, a.n, (unsigned long long)a.counts.inserted,
                  (unsigned long long)g.counts.inserted, (unsigned long long)a.counts.present,
                  (unsigned long long)g.counts.present, (unsigned long long)a.counts.absent,
                  (unsigned long long)g.counts.absent, (unsigned long long)a.counts.full,
                  (unsigned long long)g.counts.full, (unsigned long long)a.counts.erased,
                  (unsigned long long)g.counts.erased);
            for (size_t i = 0; i < a.n; i++) {
                CHECK(jc[k].results[i] == jg[k].results[i], "round %zu batch %zu op %d key %zu (%llu): cpu %u gpu %u",
                      round, k, (int)a.op, i, (unsigned long long)jc[k].keys[i], jc[k].results[i], jg[k].results[i]);
                if (grow)
                    CHECK(jc[k].results[i] != FLOE_FULL, "FULL on a growing table");
            }
            if (a.op != FLOE_OP_ERASE && vb)
                CHECK(!memcmp(jc[k].values_out.data(), jg[k].values_out.data(), a.n * vb),
                      "round %zu batch %zu op %d: values differ", round, k, (int)a.op);
            if (floe_op_has(a.op, FLOE_OPF_IDS_OUT)) { /* ids: none exactly where no key, equal for equal keys */
                std::vector<std::pair<uint64_t, uint64_t>> byid;
                for (size_t i = 0; i < a.n; i++) {
                    bool has = jg[k].results[i] == FLOE_PRESENT || jg[k].results[i] == FLOE_INSERTED;
                    CHECK(has == (jg[k].ids[i] != ~0ull), "id of key %zu: %llx with answer %u", i,
                          (unsigned long long)jg[k].ids[i], jg[k].results[i]);
                    if (has)
                        byid.push_back(std::make_pair(jg[k].ids[i], jg[k].keys[i]));
                }
                std::sort(byid.begin(), byid.end());
                for (size_t i = 1; i < byid.size(); i++)
                    CHECK(byid[i].first != byid[i - 1].first || byid[i].second == byid[i - 1].second,
                          "two keys with id %llu", (unsigned long long)byid[i].first);
            }
        }
    }
    return true;
}

static floe_spec spec_for(const char *name, floe_kind kind, uint32_t key_bits, uint32_t vb, uint64_t capacity,
                          bool grow, uint64_t seed)
{
    floe_spec s;
    floe_spec_default(&s);
    snprintf(s.name, sizeof s.name, "%s", name);
    s.kind = kind;
    s.key_bits = key_bits;
    s.value_bytes = vb;
    s.capacity = capacity;
    s.grow = grow;
    s.seed = seed;
    return s;
}

static bool one_case(floe_backend *cpu_be, floe_backend *gpu_be, const char *name, floe_kind kind, uint32_t key_bits,
                     uint32_t vb, uint64_t capacity, bool grow, uint64_t universe, size_t rounds, size_t max_n,
                     uint64_t seed)
{
    floe_spec s = spec_for(name, kind, key_bits, vb, capacity, grow, seed | 1);
    floe_errinfo err;
    floe_table *cpu, *gpu;
    CHECK(floe_table_create(cpu_be, &s, &cpu, &err) == FLOE_OK, "cpu create: %s", err.msg);
    CHECK(floe_table_create(gpu_be, &s, &gpu, &err) == FLOE_OK, "gpu create: %s", err.msg);
    bool ok = stream(cpu, gpu, key_bits, vb, universe, rounds, max_n, seed * 31 + 7, grow) &&
              same_content(cpu, gpu, vb, name);
    if (ok) {
        floe_batch st;
        memset(&st, 0, sizeof st);
        st.op = FLOE_OP_STATS;
        floe_table_run(gpu, &st);
        ok = !strcmp(st.stats.backend, "gpu");
        if (!ok) {
            failures++;
            fprintf(stderr, "FAIL: stats backend %s\n", st.stats.backend);
        }
        printf("ok: backend %s: %s, key_bits %u, %u-byte values%s: %llu keys, fill %.3f, generation %llu, %.2f "
               "bytes/key\n",
               name, floe_kind_name(kind), key_bits, vb, grow ? ", growing" : "", (unsigned long long)st.stats.keys,
               st.stats.fill, (unsigned long long)st.stats.generation, st.stats.bytes_per_key);
    }
    /* save on one backend, load on the other: same content both ways */
    if (ok) {
        char pg[] = "/tmp/floe-gpu-test-XXXXXX";
        int fd = mkstemp(pg);
        close(fd);
        std::string pc = std::string(pg) + ".cpu";
        floe_batch sv;
        memset(&sv, 0, sizeof sv);
        sv.op = FLOE_OP_SAVE;
        sv.path = pg;
        ok = floe_table_run(gpu, &sv) == FLOE_OK;
        memset(&sv, 0, sizeof sv);
        sv.op = FLOE_OP_SAVE;
        sv.path = pc.c_str();
        ok = ok && floe_table_run(cpu, &sv) == FLOE_OK;
        floe_table *cpu2 = NULL, *gpu2 = NULL;
        ok = ok && floe_table_load(cpu_be, pg, &cpu2, &err) == FLOE_OK;
        ok = ok && floe_table_load(gpu_be, pc.c_str(), &gpu2, &err) == FLOE_OK;
        if (!ok) {
            failures++;
            fprintf(stderr, "FAIL: save/load across backends: %s / %s\n", sv.error.msg, err.msg);
        } else {
            ok = same_content(cpu, cpu2, vb, "gpu file on cpu") && same_content(cpu, gpu2, vb, "cpu file on gpu");
            /* and a rebuild on the device keeps every key */
            floe_batch rb;
            memset(&rb, 0, sizeof rb);
            rb.op = FLOE_OP_REBUILD;
            ok = ok && floe_table_run(gpu2, &rb) == FLOE_OK && same_content(cpu, gpu2, vb, "after a gpu rebuild");
            if (ok)
                printf("ok: backend %s: saved on gpu, loaded on cpu; saved on cpu, loaded on gpu and rebuilt\n", name);
            /* a snapshot's COPY of the GPU table, written later, loads with the same content */
            floe_batch cp;
            memset(&cp, 0, sizeof cp);
            cp.op = FLOE_OP_COPY;
            std::string pi = std::string(pg) + ".image";
            floe_table *cpu3 = NULL;
            const bool copied = floe_table_run(gpu, &cp) == FLOE_OK && cp.image &&
                                floe_file_image_save(pi.c_str(), cp.image, &err) == FLOE_OK &&
                                floe_table_load(cpu_be, pi.c_str(), &cpu3, &err) == FLOE_OK &&
                                same_content(cpu, cpu3, vb, "gpu copy image on cpu");
            floe_file_image_free(cp.image);
            floe_table_destroy(cpu3);
            unlink(pi.c_str());
            if (copied) {
                printf("ok: backend %s: a COPY image of the gpu table, written and loaded on cpu\n", name);
            } else {
                failures++;
                fprintf(stderr, "FAIL: backend %s: COPY image: %s / %s\n", name, cp.error.msg, err.msg);
            }
            ok = ok && copied;
        }
        floe_table_destroy(cpu2);
        floe_table_destroy(gpu2);
        unlink(pg);
        unlink(pc.c_str());
    }
    floe_table_destroy(cpu);
    floe_table_destroy(gpu);
    return ok;
}

/* What a lanes_case thread does and finds. */
struct lane_worker {
    floe_table *gpu, *ref; /* ref: this thread's CPU table */
    unsigned lane;
    uint32_t key_bits, vb;
    size_t rounds, max_n;
    uint64_t seed;
    const std::vector<uint64_t> *shared;
    std::vector<uint64_t> shared_inserted; /* shared keys this thread saw INSERTED (values: shared_value) */
    std::vector<std::pair<uint64_t, uint64_t>> shared_seen; /* (key, value) of every PRESENT answer */
    bool ok;
};

/* The value thread `lane` gives shared key k (MAP). */
static uint64_t shared_value(uint64_t k, unsigned lane)
{
    return k * 0x9E3779B97F4A7C15ull + lane;
}

static uint64_t value_at(const std::vector<unsigned char> &v, size_t i, uint32_t vb)
{
    uint64_t x = 0;
    memcpy(&x, v.data() + i * vb, vb);
    return x;
}

/* One thread of lanes_case: rounds of 4 batches in flight in its lane, on
 * its own keys (high bits: the lane) against its CPU table, and inserts of
 * the shared keys. */
static void *lane_worker_main(void *arg)
{
    lane_worker *w = (lane_worker *)arg;
    uint64_t r = w->seed;
    const uint32_t vb = w->vb;
    const uint64_t own = 1ull << (w->key_bits - 4) | (uint64_t)w->lane << (w->key_bits - 8);
    counter cg = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    counter cc = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    w->ok = false;
    for (size_t round = 0; round < w->rounds; round++) {
        enum { IN_FLIGHT = 4 };
        std::vector<job> jg(IN_FLIGHT), jc(IN_FLIGHT);
        std::vector<bool> is_shared(IN_FLIGHT);
        for (size_t k = 0; k < IN_FLIGHT; k++) {
            const size_t n = 1 + (size_t)(test_rng(&r) % w->max_n);
            is_shared[k] = k == 1 && round % 2 == 0;
            std::vector<uint64_t> keys(n);
            std::vector<unsigned char> values(n * vb);
            for (size_t i = 0; i < n; i++) {
                if (i > 0 && test_rng(&r) % 5 == 0)
                    keys[i] = keys[test_rng(&r) % i];
                else if (is_shared[k])
                    keys[i] = (*w->shared)[test_rng(&r) % w->shared->size()];
                else
                    keys[i] = own | test_rng(&r) % (4 * w->max_n);
                uint64_t v = is_shared[k] ? shared_value(keys[i], w->lane) : test_rng(&r);
                memcpy(values.data() + i * vb, &v, vb);
            }
            const unsigned pick = (unsigned)(test_rng(&r) % 10);
            const floe_op op = is_shared[k] || pick < 6 ? FLOE_OP_INSERT : pick < 9 ? FLOE_OP_FIND : FLOE_OP_ERASE;
            unsigned flags = FLOE_BATCH_WANT_IDS | (vb && op != FLOE_OP_ERASE ? FLOE_BATCH_WANT_VALUES : 0);
            jg[k].keys = jc[k].keys = keys;
            jg[k].values = jc[k].values = values;
            prepare(jg[k], op, flags, vb, &cg);
            prepare(jc[k], op, flags, vb, &cc);
            jg[k].b.lane = w->lane;
        }
        const size_t before_g = cg.done, before_c = cc.done;
        for (size_t k = 0; k < IN_FLIGHT; k++) {
            floe_table_submit(w->gpu, &jg[k].b);
            if (!is_shared[k])
                floe_table_submit(w->ref, &jc[k].b);
        }
        wait_for(&cg, before_g + IN_FLIGHT);
        wait_for(&cc, before_c + IN_FLIGHT - (round % 2 == 0));
        for (size_t k = 0; k < IN_FLIGHT; k++) {
            const floe_batch &g = jg[k].b, &c = jc[k].b;
            WCHECK(g.status == FLOE_OK, "lane %u round %zu batch %zu: %s", w->lane, round, k, g.error.msg);
            for (size_t i = 0; i < g.n; i++) {
                const uint8_t a = jg[k].results[i];
                const bool has = a == FLOE_PRESENT || a == FLOE_INSERTED;
                WCHECK(a != FLOE_FULL, "lane %u: FULL on a growing table", w->lane);
                if (g.op != FLOE_OP_ERASE)
                    WCHECK(has == (jg[k].ids[i] != FLOE_NO_ID), "lane %u: id %llx with answer %u", w->lane,
                           (unsigned long long)jg[k].ids[i], a);
                if (!is_shared[k]) {
                    WCHECK(a == jc[k].results[i], "lane %u round %zu batch %zu op %d key %zu (%llx): gpu %u, cpu %u",
                           w->lane, round, k, (int)g.op, i, (unsigned long long)jg[k].keys[i], a, jc[k].results[i]);
                    WCHECK(!vb || g.op == FLOE_OP_ERASE ||
                               value_at(jg[k].values_out, i, vb) == value_at(jc[k].values_out, i, vb),
                           "lane %u round %zu: value of key %zu differs", w->lane, round, i);
                } else if (a == FLOE_INSERTED) {
                    for (size_t e = 0; e < i; e++)
                        WCHECK(jg[k].keys[e] != jg[k].keys[i], "lane %u: a later occurrence INSERTED", w->lane);
                    w->shared_inserted.push_back(jg[k].keys[i]);
                } else {
                    WCHECK(a == FLOE_PRESENT, "lane %u: shared key answered %u", w->lane, a);
                    w->shared_seen.push_back(std::make_pair(jg[k].keys[i], vb ? value_at(jg[k].values_out, i, vb) : 0));
                }
            }
            if (!is_shared[k])
                WCHECK(!memcmp(&g.counts, &c.counts, sizeof g.counts), "lane %u round %zu batch %zu: counts differ",
                       w->lane, round, k);
        }
    }
    w->ok = true;
    return NULL;
}

/* Several lanes of one GPU table, fed at once by as many threads (see the top). */
static bool lanes_case(const char *name, floe_kind kind, uint32_t key_bits, uint32_t vb, uint64_t capacity,
                       unsigned lanes, size_t rounds, size_t max_n, uint64_t seed)
{
    floe_errinfo err;
    floe_backend *cpu_be = NULL, *gpu_be = NULL;
    CHECK(floe_backend_cpu_create(0, &cpu_be, &err) == FLOE_OK &&
              floe_backend_gpu_create(0, 0, &gpu_be, &err) == FLOE_OK,
          "backends: %s", err.msg);
    CHECK(floe_backend_set_lanes(gpu_be, lanes, &err) == FLOE_OK, "lanes: %s", err.msg);
    CHECK(floe_backend_lanes(gpu_be) == lanes, "the backend has %u lanes", floe_backend_lanes(gpu_be));
    floe_spec s = spec_for(name, kind, key_bits, vb, capacity, true, seed | 1);
    floe_table *gpu = NULL;
    CHECK(floe_table_create(gpu_be, &s, &gpu, &err) == FLOE_OK, "gpu create: %s", err.msg);
    uint64_t r = seed;
    std::vector<uint64_t> shared(2 * max_n);
    for (auto &k : shared)
        k = test_rng(&r) & ((1ull << (key_bits - 4)) - 1); /* below every thread's own keys */
    std::vector<lane_worker> w(lanes);
    std::vector<pthread_t> th(lanes);
    bool ok = true;
    for (unsigned i = 0; i < lanes; i++) {
        floe_spec rs = spec_for(name, kind, key_bits, vb, capacity, true, seed + 100 + i);
        CHECK(floe_table_create(cpu_be, &rs, &w[i].ref, &err) == FLOE_OK, "cpu create: %s", err.msg);
        w[i].gpu = gpu;
        w[i].lane = i;
        w[i].key_bits = key_bits;
        w[i].vb = vb;
        w[i].rounds = rounds;
        w[i].max_n = max_n;
        w[i].seed = seed * 1000 + i;
        w[i].shared = &shared;
    }
    for (unsigned i = 0; i < lanes; i++)
        pthread_create(&th[i], NULL, lane_worker_main, &w[i]);
    for (unsigned i = 0; i < lanes; i++) {
        pthread_join(th[i], NULL);
        ok = ok && w[i].ok;
    }
    /* shared keys: one INSERTED each, every PRESENT answer with the winner's value; the table holds
     * exactly the CPU tables' keys and the shared ones */
    std::vector<std::pair<uint64_t, uint64_t>> want, got;
    std::vector<std::pair<uint64_t, uint64_t>> winners;
    for (unsigned i = 0; i < lanes; i++)
        for (uint64_t k : w[i].shared_inserted)
            winners.push_back(std::make_pair(k, vb ? shared_value(k, i) & (vb == 8 ? ~0ull : 0xFFFFFFFFull) : 0));
    std::sort(winners.begin(), winners.end());
    for (size_t i = 1; ok && i < winners.size(); i++)
        if (winners[i].first == winners[i - 1].first) {
            failures++;
            fprintf(stderr, "FAIL: %s: shared key %llx INSERTED twice\n", name, (unsigned long long)winners[i].first);
            ok = false;
        }
    for (unsigned i = 0; ok && i < lanes; i++)
        for (const auto &kv : w[i].shared_seen) {
            auto it = std::lower_bound(winners.begin(), winners.end(), std::make_pair(kv.first, (uint64_t)0));
            if (it == winners.end() || it->first != kv.first || it->second != kv.second) {
                failures++;
                fprintf(stderr, "FAIL: %s: shared key %llx PRESENT without its winner's value\n", name,
                        (unsigned long long)kv.first);
                ok = false;
                break;
            }
        }
    for (unsigned i = 0; ok && i < lanes; i++) {
        std::vector<std::pair<uint64_t, uint64_t>> part;
        ok = scan_all(w[i].ref, vb, part);
        want.insert(want.end(), part.begin(), part.end());
    }
    want.insert(want.end(), winners.begin(), winners.end());
    std::sort(want.begin(), want.end());
    ok = ok && scan_all(gpu, vb, got);
    if (ok && want != got) {
        failures++;
        fprintf(stderr, "FAIL: %s: the table holds %zu keys, the references %zu (or other values)\n", name, got.size(),
                want.size());
        ok = false;
    }
    floe_batch st;
    memset(&st, 0, sizeof st);
    st.op = FLOE_OP_STATS;
    floe_table_run(gpu, &st);
    if (ok)
        printf("ok: backend %s: %s, %u lanes fed at once, %llu keys, generation %llu (%zu shared keys inserted once)\n",
               name, floe_kind_name(kind), lanes, (unsigned long long)got.size(),
               (unsigned long long)st.stats.generation, winners.size());
    for (unsigned i = 0; i < lanes; i++)
        floe_table_destroy(w[i].ref);
    floe_table_destroy(gpu);
    floe_backend_destroy(cpu_be);
    floe_backend_destroy(gpu_be);
    return ok;
}

floe_backend *test_gpu_parts(unsigned parts)
{
    floe_errinfo err;
    floe_backend *in[FLOE_PARTS_MAX], *be = NULL;
    int n = floe_gpu_count();
    if (n > (int)parts)
        n = (int)parts;
    for (int d = 0; d < n; d++)
        if (floe_backend_gpu_create(d, 0, &in[d], &err) != FLOE_OK) {
            fprintf(stderr, "FAIL: gpu backend on device %d: %s\n", d, err.msg);
            failures++;
            return NULL;
        }
    if (floe_backend_partition_create(in, (unsigned)n, parts, 0, &be, &err) != FLOE_OK) {
        fprintf(stderr, "FAIL: %u parts over %d devices: %s\n", parts, n, err.msg);
        failures++;
    }
    return be;
}

floe_backend *test_cpu_parts(unsigned parts)
{
    floe_errinfo err;
    floe_backend *in, *be = NULL;
    if (floe_backend_cpu_create(0, &in, &err) != FLOE_OK ||
        floe_backend_partition_create(&in, 1, parts, 0, &be, &err) != FLOE_OK) {
        fprintf(stderr, "FAIL: cpu backend in %u parts: %s\n", parts, err.msg);
        failures++;
    }
    return be;
}

/* The same cases on tables in parts: at least 3 parts over every device
 * (several on one GPU where there are fewer), against CPU tables in 2 parts
 * (so that a file of one loads into the other by re-partitioning). */
static void parts_suite(uint64_t seed, bool small)
{
    const int ndev = floe_gpu_count();
    const unsigned parts = ndev > 3 ? (unsigned)(ndev < FLOE_PARTS_MAX ? ndev : FLOE_PARTS_MAX) : 3;
    floe_backend *cpu_be = test_cpu_parts(2), *gpu_be = test_gpu_parts(parts);
    if (cpu_be && gpu_be) {
        printf("tables in parts: %u parts over %d device(s)\n", parts, ndev < (int)parts ? ndev : (int)parts);
        if (small) {
            one_case(cpu_be, gpu_be, "set-small-parts", FLOE_KIND_SET, 40, 0, 20000, false, 30000, 3, 20000, seed);
        } else {
            one_case(cpu_be, gpu_be, "set40-parts", FLOE_KIND_SET, 40, 0, 3000000, false, 1500000, 8, 1500000, seed);
            one_case(cpu_be, gpu_be, "map48-grow-parts", FLOE_KIND_MAP, 48, 8, 1000, true, 3000000, 8, 1500000,
                     seed + 3);
            one_case(cpu_be, gpu_be, "set16-parts", FLOE_KIND_SET, 16, 0, 50000, false, 20000, 6, 100000, seed + 4);
        }
    }
    floe_backend_destroy(cpu_be);
    floe_backend_destroy(gpu_be);
}

/* A file of layout version 1 (tests/unit/data/layout1-map.floe, made before
 * FLOE_FIRST_FILL: layout1_map.h says how) loads on the GPU backend with
 * its own put rule: every key found with its value, as on the CPU backend,
 * and a save of it is of layout version 1 again.  Run from the repository's
 * root, as device-check.sh does. */
static bool layout1_case(floe_backend *cpu_be, floe_backend *gpu_be)
{
    const char *path = LAYOUT1_FILE;
    enum { N = LAYOUT1_KEYS, OTHERS = 20000 };
    floe_errinfo err;
    floe_table *cpu = NULL, *gpu = NULL;
    CHECK(floe_table_load(cpu_be, path, &cpu, &err) == FLOE_OK, "layout 1 on cpu: %s", err.msg);
    CHECK(floe_table_load(gpu_be, path, &gpu, &err) == FLOE_OK, "layout 1 on gpu: %s", err.msg);
    std::vector<uint64_t> keys(N + OTHERS);
    uint64_t r = LAYOUT1_RNG_SEED;
    for (size_t i = 0; i < N; i++)
        keys[i] = layout1_key(test_rng(&r));
    for (size_t i = N; i < keys.size(); i++)
        keys[i] = test_rng(&r) & 0xFFFFFFFFull;
    std::vector<uint8_t> rc(keys.size()), rg(keys.size());
    std::vector<uint32_t> vc(keys.size()), vg(keys.size());
    floe_table *both[2] = {cpu, gpu};
    for (int e = 0; e < 2; e++) {
        floe_batch b;
        memset(&b, 0, sizeof b);
        b.op = FLOE_OP_FIND;
        b.flags = FLOE_BATCH_WANT_VALUES;
        b.keys = keys.data();
        b.n = keys.size();
        b.results = e ? rg.data() : rc.data();
        b.values_out = e ? (unsigned char *)vg.data() : (unsigned char *)vc.data();
        CHECK(floe_table_run(both[e], &b) == FLOE_OK, "layout 1 find: %s", b.error.msg);
    }
    size_t present = 0;
    for (size_t i = 0; i < keys.size(); i++) {
        CHECK(rc[i] == rg[i] && (rc[i] != FLOE_PRESENT || vc[i] == vg[i]),
              "layout 1: key %zu (%llu): cpu %u value %u, gpu %u value %u", i, (unsigned long long)keys[i], rc[i],
              vc[i], rg[i], vg[i]);
        if (i < N) {
            const bool erased = layout1_erased(i);
            CHECK(rg[i] == (erased ? FLOE_ABSENT : FLOE_PRESENT), "layout 1: key %zu answers %u", i, rg[i]);
            CHECK(erased || vg[i] == layout1_value(keys[i]), "layout 1: key %zu has value %u", i, vg[i]);
        }
        present += rg[i] == FLOE_PRESENT;
    }
    char saved[] = "/tmp/floe-gpu-test-XXXXXX";
    int fd = mkstemp(saved);
    close(fd);
    floe_batch sv;
    memset(&sv, 0, sizeof sv);
    sv.op = FLOE_OP_SAVE;
    sv.path = saved;
    CHECK(floe_table_run(gpu, &sv) == FLOE_OK, "layout 1 save on gpu: %s", sv.error.msg);
    floe_file_header h;
    floe_file_reader *fr;
    CHECK(floe_file_open(saved, 0, &h, &fr, &err) == FLOE_OK, "%s", err.msg);
    floe_file_close(fr);
    CHECK(h.layout_version == 1, "the gpu saved a layout 1 table as layout %u", h.layout_version);
    floe_table *cpu2 = NULL;
    CHECK(floe_table_load(cpu_be, saved, &cpu2, &err) == FLOE_OK, "%s", err.msg);
    const bool ok = same_content(cpu, cpu2, 4, "layout 1 saved on gpu, loaded on cpu");
    unlink(saved);
    floe_table_destroy(cpu2);
    floe_table_destroy(cpu);
    floe_table_destroy(gpu);
    if (ok)
        printf("ok: backend: a layout 1 file on gpu: %zu of %zu keys present as on cpu, saved as layout 1\n", present,
               keys.size());
    return ok;
}

/* Adds from several lanes at once on the same keys of one growing GPU MAP
 * table: each key is INSERTED exactly once in all, and no add is lost:
 * every key ends at the sum of all its deltas (wrapping). */
struct add_worker {
    floe_table *gpu;
    unsigned lane;
    uint32_t vb;
    const std::vector<uint64_t> *keys;
    size_t rounds, n;
    uint64_t seed;
    std::vector<uint64_t> sums;                         /* per key of keys: this thread's deltas */
    std::vector<std::pair<uint64_t, uint64_t>> answers; /* (key index, value after) */
    size_t inserted;
    bool ok;
};

static void *add_worker_main(void *arg)
{
    add_worker *w = (add_worker *)arg;
    uint64_t r = w->seed;
    const uint64_t mask = w->vb == 8 ? ~0ull : 0xFFFFFFFFull;
    w->sums.assign(w->keys->size(), 0);
    w->inserted = 0;
    w->ok = true;
    counter c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    for (size_t round = 0; round < w->rounds && w->ok; round++) {
        job j;
        std::vector<size_t> at(w->n);
        j.keys.resize(w->n);
        j.values.resize(w->n * w->vb);
        for (size_t i = 0; i < w->n; i++) {
            at[i] = (size_t)(test_rng(&r) % w->keys->size());
            j.keys[i] = (*w->keys)[at[i]];
            const uint64_t d = (test_rng(&r) % 3 == 0 ? test_rng(&r) : test_rng(&r) % 100) & mask;
            memcpy(&j.values[i * w->vb], &d, w->vb);
            w->sums[at[i]] = (w->sums[at[i]] + d) & mask;
        }
        prepare(j, FLOE_OP_ADD, FLOE_BATCH_WANT_VALUES, w->vb, &c);
        j.b.lane = w->lane;
        floe_table_submit(w->gpu, &j.b);
        wait_for(&c, round + 1);
        if (j.b.status != FLOE_OK) {
            fprintf(stderr, "FAIL: add lane %u: %s\n", w->lane, j.b.error.msg);
            w->ok = false;
            break;
        }
        for (size_t i = 0; i < w->n; i++) {
            uint64_t v = 0;
            memcpy(&v, &j.values_out[i * w->vb], w->vb);
            w->answers.push_back(std::make_pair((uint64_t)at[i], v));
            w->inserted += j.results[i] == FLOE_INSERTED;
            if (j.results[i] != FLOE_INSERTED && j.results[i] != FLOE_PRESENT) {
                fprintf(stderr, "FAIL: add lane %u: answer %u\n", w->lane, j.results[i]);
                w->ok = false;
            }
        }
    }
    return NULL;
}

static bool adds_across_lanes(uint32_t vb, unsigned lanes, size_t nkeys, size_t rounds, size_t n, uint64_t seed)
{
    floe_errinfo err;
    floe_backend *gpu_be = NULL;
    CHECK(floe_backend_gpu_create(0, 0, &gpu_be, &err) == FLOE_OK, "backend: %s", err.msg);
    CHECK(floe_backend_set_lanes(gpu_be, lanes, &err) == FLOE_OK, "lanes: %s", err.msg);
    floe_spec s = spec_for("adds", FLOE_KIND_MAP, 40, vb, 1000, true, seed | 1);
    floe_table *gpu = NULL;
    CHECK(floe_table_create(gpu_be, &s, &gpu, &err) == FLOE_OK, "gpu create: %s", err.msg);
    uint64_t r = seed;
    std::vector<uint64_t> keys(nkeys);
    for (auto &k : keys)
        k = test_rng(&r) & ((1ull << 40) - 1); /* a repeat among them is one key twice as likely */
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    std::vector<add_worker> w(lanes);
    std::vector<pthread_t> th(lanes);
    for (unsigned i = 0; i < lanes; i++) {
        w[i].gpu = gpu;
        w[i].lane = i;
        w[i].vb = vb;
        w[i].keys = &keys;
        w[i].rounds = rounds;
        w[i].n = n;
        w[i].seed = seed * 77 + i;
        pthread_create(&th[i], NULL, add_worker_main, &w[i]);
    }
    bool ok = true;
    size_t inserted = 0;
    const uint64_t mask = vb == 8 ? ~0ull : 0xFFFFFFFFull;
    std::vector<uint64_t> total(keys.size(), 0);
    for (unsigned i = 0; i < lanes; i++) {
        pthread_join(th[i], NULL);
        ok = ok && w[i].ok;
        inserted += w[i].inserted;
        for (size_t k = 0; k < keys.size(); k++)
            total[k] = (total[k] + w[i].sums[k]) & mask;
    }
    CHECK(ok, "adds: a lane's batch failed");
    std::vector<size_t> touched(keys.size(), 0);
    std::vector<std::pair<uint64_t, uint64_t>> all;
    for (unsigned i = 0; i < lanes; i++) {
        for (const auto &a : w[i].answers)
            touched[a.first]++;
        all.insert(all.end(), w[i].answers.begin(), w[i].answers.end());
    }
    size_t used = 0;
    for (size_t k = 0; k < keys.size(); k++)
        used += touched[k] > 0;
    CHECK(inserted == used, "adds: %zu INSERTED answers for %zu keys added to", inserted, used);
    job f;
    f.keys = keys;
    counter c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    prepare(f, FLOE_OP_FIND, FLOE_BATCH_WANT_VALUES, vb, &c);
    floe_table_submit(gpu, &f.b);
    wait_for(&c, 1);
    CHECK(f.b.status == FLOE_OK, "find: %s", f.b.error.msg);
    size_t wrong = 0;
    for (size_t k = 0; k < keys.size(); k++) {
        uint64_t v = 0;
        memcpy(&v, &f.values_out[k * vb], vb);
        const bool want_present = touched[k] > 0;
        if ((f.results[k] == FLOE_PRESENT) != want_present || (want_present && v != total[k]))
            wrong++;
    }
    CHECK(wrong == 0, "adds: %zu of %zu keys do not hold the sum of their deltas", wrong, keys.size());
    floe_table_destroy(gpu);
    floe_backend_destroy(gpu_be);
    printf("ok: backend: adds from %u lanes at once, %zu-byte values: %zu adds on %zu keys, every sum exact, "
           "one INSERTED a key\n",
           lanes, (size_t)vb, all.size(), used);
    return true;
}

void backend_suite(uint64_t seed, bool small, const char *only)
{
    floe_errinfo err;
    floe_backend *cpu_be, *gpu_be;
    if (floe_backend_cpu_create(0, &cpu_be, &err) != FLOE_OK ||
        floe_backend_gpu_create(0, 0, &gpu_be, &err) != FLOE_OK) {
        failures++;
        fprintf(stderr, "FAIL: backends: %s\n", err.msg);
        return;
    }
    if (small) {
        one_case(cpu_be, gpu_be, "set-small", FLOE_KIND_SET, 40, 0, 20000, false, 30000, 3, 20000, seed);
        one_case(cpu_be, gpu_be, "map-small", FLOE_KIND_MAP, 40, 8, 20000, true, 30000, 3, 20000, seed + 1);
        pinned_from = gpu_be;
        one_case(cpu_be, gpu_be, "set-small-pinned", FLOE_KIND_SET, 40, 0, 20000, false, 30000, 3, 20000, seed + 2);
        one_case(cpu_be, gpu_be, "map-small-pinned", FLOE_KIND_MAP, 40, 4, 20000, false, 30000, 3, 20000, seed + 3);
        pinned_from = NULL;
    } else if (only) { /* one case, by name: for debugging */
        if (!strcmp(only, "map48-grow"))
            one_case(cpu_be, gpu_be, "map48-grow", FLOE_KIND_MAP, 48, 8, 1000, true, 3000000, 8, 1500000, seed + 3);
    } else {
        one_case(cpu_be, gpu_be, "set40", FLOE_KIND_SET, 40, 0, 3000000, false, 1500000, 8, 1500000, seed);
        one_case(cpu_be, gpu_be, "set64-grow", FLOE_KIND_SET, 64, 0, 1000, true, 4000000, 8, 1500000, seed + 1);
        one_case(cpu_be, gpu_be, "map32", FLOE_KIND_MAP, 32, 4, 2000000, false, 1000000, 8, 1500000, seed + 2);
        one_case(cpu_be, gpu_be, "map48-grow", FLOE_KIND_MAP, 48, 8, 1000, true, 3000000, 8, 1500000, seed + 3);
        one_case(cpu_be, gpu_be, "set16", FLOE_KIND_SET, 16, 0, 50000, false, 20000, 6, 100000, seed + 4);
        pinned_from = gpu_be; /* straight from and to the batches' buffers, growth's retries included */
        one_case(cpu_be, gpu_be, "set40-pinned", FLOE_KIND_SET, 40, 0, 3000000, false, 1500000, 8, 1500000, seed + 5);
        one_case(cpu_be, gpu_be, "set64-grow-pinned", FLOE_KIND_SET, 64, 0, 1000, true, 4000000, 8, 1500000, seed + 6);
        one_case(cpu_be, gpu_be, "map32-pinned", FLOE_KIND_MAP, 32, 4, 2000000, false, 1000000, 8, 1500000, seed + 7);
        pinned_from = NULL;
    }
    if (!only)
        layout1_case(cpu_be, gpu_be);
    floe_backend_destroy(cpu_be);
    floe_backend_destroy(gpu_be);
    if (only)
        return;
    if (small) {
        lanes_case("set-lanes-small", FLOE_KIND_SET, 40, 0, 1000, 3, 6, 3000, seed + 20);
        lanes_case("map-lanes-small", FLOE_KIND_MAP, 40, 4, 1000, 2, 6, 3000, seed + 21);
        adds_across_lanes(8, 2, 2000, 6, 3000, seed + 23);
    } else {
        lanes_case("set-lanes", FLOE_KIND_SET, 48, 0, 1000, 4, 30, 200000, seed + 20);
        lanes_case("map-lanes", FLOE_KIND_MAP, 48, 8, 1000, 4, 30, 200000, seed + 21);
        lanes_case("set-lanes-small-batches", FLOE_KIND_SET, 40, 0, 1000, 8, 200, 900, seed + 22);
        adds_across_lanes(8, 4, 50000, 20, 200000, seed + 23);
        adds_across_lanes(4, 4, 1000, 50, 20000, seed + 24);
    }
    parts_suite(seed + 10, small);
}
