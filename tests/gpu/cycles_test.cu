/*
 * cycles_test.cu - part of floe-gpu-tests: a SET in parts over every device,
 * created, filled, searched and dropped again and again, against the CPU
 * engine.
 *
 * Each cycle creates a table in one part per device (two parts where there
 * is one device), fills it from several threads at once, each in a lane of
 * its own with keys of its own (the lane in the top key bits: no key of two
 * lanes meets, so every answer is determined), in batches of `keys` keys of
 * which about half were sent by the lane before; then each lane finds as
 * many keys, half of them stored, half never sent; then the table is
 * dropped.  Odd cycles start at the default capacity and grow, even ones
 * are sized for their keys.  A CPU table gets the same batches, lane by
 * lane: every answer must be the CPU engine's, and the key counts the same.
 *
 * Cycles take turns, two by two, between the two ways a table in parts runs
 * a batch: split on the host (two lanes, the keys in ordinary memory) and
 * split on the devices (tables/group.h: one lane, the keys and answers in
 * the backend's pinned memory); each cycle checks by the table's stage
 * timers that the way it meant ran (only the host's split joins answers).
 * A device-split cycle's first batch is small, split on the host, so that
 * the large ones queue behind a batch of the other kind.
 *
 * Each completion allocates and frees pinned host memory of the GPU backend
 * on the thread that runs it, as floed's batcher does when it launches the
 * next batch.  A completion runs on a part's thread: until 2026-11 that
 * left the first part's device current on the thread of a part on another
 * device, whose next scratch was then allocated on the wrong device and
 * faulted (an illegal address, at the second to sixth cycle on two H200s).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "backend.h"
#include "backend_gpu.h"
#include "backend_test.h"
#include "partition.h"

#define LANES      2
#define INSERTS    2 /* insert batches per lane and cycle, then one find */
#define LANE_SHIFT 38
#define KEY_BITS   40
#define DONE_ALLOC (1u << 20) /* bytes each completion allocates and frees, as floed's batcher */
#define SMALL_FIRST 1000       /* keys of a device-split cycle's first batch */

namespace
{

struct cycle_lane {
    floe_backend *gpu_be;
    floe_table *gpu;
    unsigned lane;
    size_t keys;
    uint64_t rng;
    std::vector<uint64_t> sent;               /* every key this lane inserted, in all cycles of the table */
    std::vector<uint64_t> batch[INSERTS + 1]; /* this cycle's inserts, then its find */
    std::vector<uint8_t> res[INSERTS + 1];
    floe_batch b[INSERTS + 1];
    bool pinned;                     /* this cycle's batches from pin_keys and pin_res (split on the devices) */
    uint64_t *pin_keys[INSERTS + 1]; /* the backend's pinned memory, keys each */
    uint8_t *pin_res[INSERTS + 1];
    pthread_mutex_t lock;
    pthread_cond_t cv;
    unsigned done;
    bool alloc_failed;
};

void lane_done(floe_batch *b)
{
    cycle_lane *L = (cycle_lane *)b->user;
    /* what floed's batch_done does next: the following batch's buffers, in the backend's pinned memory */
    void *p = floe_backend_host_alloc(L->gpu_be, DONE_ALLOC);
    if (p)
        memset(p, 0, 4096);
    floe_backend_host_free(L->gpu_be, p);
    pthread_mutex_lock(&L->lock);
    L->alloc_failed = L->alloc_failed || !p;
    L->done++;
    pthread_cond_signal(&L->cv);
    pthread_mutex_unlock(&L->lock);
}

uint64_t lane_key(const cycle_lane *L, uint64_t r)
{
    return (uint64_t)L->lane << LANE_SHIFT | (r & ((1ull << LANE_SHIFT) - 1));
}

/* This cycle's batches: inserts half from the lane's earlier keys, the find
 * half stored keys and half keys never sent (bit 37 set: sent keys never have it). */
void make_batches(cycle_lane *L)
{
    for (unsigned k = 0; k <= INSERTS; k++) {
        std::vector<uint64_t> &v = L->batch[k];
        v.resize(L->keys);
        for (size_t i = 0; i < L->keys; i++) {
            const uint64_t r = test_rng(&L->rng);
            if ((r & 1) && !L->sent.empty())
                v[i] = L->sent[(r >> 1) % L->sent.size()];
            else if (k == INSERTS)
                v[i] = lane_key(L, r | 1ull << 37);
            else
                v[i] = lane_key(L, r & ~(1ull << 37));
        }
        if (k < INSERTS)
            L->sent.insert(L->sent.end(), v.begin(), v.end());
        L->res[k].assign(L->keys, 0xEE);
    }
}

void *lane_main(void *arg)
{
    cycle_lane *L = (cycle_lane *)arg;
    make_batches(L);
    L->done = 0;
    for (unsigned k = 0; k <= INSERTS; k++) { /* all in flight at once, in this lane's order */
        floe_batch &b = L->b[k];
        memset(&b, 0, sizeof b);
        b.op = k < INSERTS ? FLOE_OP_INSERT : FLOE_OP_FIND;
        b.keys = L->batch[k].data();
        b.n = L->keys;
        b.results = L->res[k].data();
        if (L->pinned) {
            if (k == 0) /* split on the host: the device-split batches behind it wait their turn, not join it */
                b.n = SMALL_FIRST;
            memcpy(L->pin_keys[k], b.keys, b.n * 8);
            memset(L->pin_res[k], 0xEE, b.n);
            b.keys = L->pin_keys[k];
            b.results = L->pin_res[k];
        }
        b.lane = L->lane;
        b.done = lane_done;
        b.user = L;
        floe_table_submit(L->gpu, &b);
    }
    pthread_mutex_lock(&L->lock);
    while (L->done < INSERTS + 1)
        pthread_cond_wait(&L->cv, &L->lock);
    pthread_mutex_unlock(&L->lock);
    return NULL;
}

/* The table's keys, and the batches whose answers it joined on the host (a split there). */
uint64_t table_keys(floe_table *t, uint64_t *joined)
{
    floe_batch b;
    memset(&b, 0, sizeof b);
    b.op = FLOE_OP_STATS;
    if (floe_table_run(t, &b) != FLOE_OK)
        return UINT64_MAX;
    if (joined)
        *joined = b.stats.stage[FLOE_STAGE_JOIN].count;
    return b.stats.keys;
}

/* One cycle; false on the first failure (counted). */
bool one_cycle(floe_backend *cpu_be, floe_backend *gpu_be, cycle_lane *lanes, unsigned cycle, uint64_t *checked)
{
    floe_errinfo err;
    floe_spec spec;
    floe_spec_default(&spec);
    snprintf(spec.name, sizeof spec.name, "cycle%u", cycle);
    spec.key_bits = KEY_BITS;
    spec.grow = true;
    if (cycle % 2 == 0)
        spec.capacity = (uint64_t)LANES * INSERTS * lanes[0].keys + (uint64_t)LANES * INSERTS * lanes[0].keys / 4;
    const bool on_devices = cycle / 2 % 2 == 1; /* cycles 2, 3, 6, 7, ...: split on the devices */
    floe_table *gpu = NULL, *cpu = NULL;
    EXPECT_OR_RETURN(false, floe_backend_set_lanes(gpu_be, on_devices ? 1 : LANES, &err) == FLOE_OK,
                     "cycle %u: lanes: %s", cycle, err.msg);
    EXPECT_OR_RETURN(false, floe_table_create(gpu_be, &spec, &gpu, &err) == FLOE_OK, "cycle %u: create on gpu: %s",
                     cycle, err.msg);
    if (floe_table_create(cpu_be, &spec, &cpu, &err) != FLOE_OK) {
        floe_table_destroy(gpu);
        EXPECT_OR_RETURN(false, false, "cycle %u: create on cpu: %s", cycle, err.msg);
    }
    pthread_t th[LANES];
    for (unsigned l = 0; l < LANES; l++) {
        lanes[l].gpu = gpu;
        lanes[l].pinned = on_devices;
        lanes[l].sent.clear(); /* a new table: nothing sent to it yet */
        pthread_create(&th[l], NULL, lane_main, &lanes[l]);
    }
    for (unsigned l = 0; l < LANES; l++)
        pthread_join(th[l], NULL);
    bool ok = true;
    std::vector<uint8_t> want(lanes[0].keys);
    for (unsigned l = 0; l < LANES && ok; l++) {
        cycle_lane *L = &lanes[l];
        for (unsigned k = 0; k <= INSERTS && ok; k++) {
            const floe_batch &g = L->b[k];
            if (g.status != FLOE_OK || L->alloc_failed) {
                failures++;
                fprintf(stderr, "FAIL: cycle %u lane %u batch %u: %s: %s\n", cycle, l, k, floe_status_name(g.status),
                        L->alloc_failed ? "a completion's host allocation failed" : g.error.msg);
                ok = false;
                break;
            }
            floe_batch c;
            memset(&c, 0, sizeof c);
            c.op = g.op;
            c.keys = g.keys;
            c.n = g.n;
            c.results = want.data();
            if (floe_table_run(cpu, &c) != FLOE_OK) {
                failures++;
                fprintf(stderr, "FAIL: cycle %u: cpu batch: %s\n", cycle, c.error.msg);
                ok = false;
                break;
            }
            for (size_t i = 0; i < g.n; i++)
                if (g.results[i] != want[i]) {
                    failures++;
                    fprintf(stderr, "FAIL: cycle %u lane %u batch %u key %zu (%llx): gpu %u, cpu %u\n", cycle, l, k, i,
                            (unsigned long long)g.keys[i], g.results[i], want[i]);
                    ok = false;
                    break;
                }
            *checked += g.n;
        }
    }
    if (ok) {
        uint64_t joined = 0;
        const uint64_t kg = table_keys(gpu, &joined), kc = table_keys(cpu, NULL);
        if (kg != kc) {
            failures++;
            fprintf(stderr, "FAIL: cycle %u: the gpu table holds %llu keys, the cpu table %llu\n", cycle,
                    (unsigned long long)kg, (unsigned long long)kc);
            ok = false;
        } else if (joined != (on_devices ? LANES : LANES * (INSERTS + 1))) {
            failures++;
            fprintf(stderr, "FAIL: cycle %u: meant to split %s, but %llu batches were joined on the host\n", cycle,
                    on_devices ? "all but the small ones on the devices" : "on the host", (unsigned long long)joined);
            ok = false;
        }
    }
    floe_table_destroy(gpu); /* the drop: every part, each on its device */
    floe_table_destroy(cpu);
    return ok;
}

} // namespace

void cycles_suite(uint64_t seed, bool small, unsigned cycles)
{
    const int ndev = floe_gpu_count();
    const unsigned parts = ndev > 1 ? (unsigned)(ndev < FLOE_PARTS_MAX ? ndev : FLOE_PARTS_MAX) : 2;
    floe_errinfo err;
    floe_backend *gpu_be = test_gpu_parts(parts), *cpu_be = NULL;
    if (!gpu_be)
        return;
    if (floe_backend_set_lanes(gpu_be, LANES, &err) != FLOE_OK ||
        floe_backend_cpu_create(0, &cpu_be, &err) != FLOE_OK) {
        failures++;
        fprintf(stderr, "FAIL: cycles: %s\n", err.msg);
        floe_backend_destroy(gpu_be);
        return;
    }
    const size_t keys = small ? (size_t)1 << 16 : (size_t)1 << 24;
    cycle_lane lanes[LANES];
    for (unsigned l = 0; l < LANES; l++) {
        cycle_lane *L = &lanes[l];
        L->gpu_be = gpu_be;
        L->lane = l;
        L->keys = keys;
        L->rng = seed * 2 + l + 1;
        L->done = 0;
        L->alloc_failed = false;
        for (unsigned k = 0; k <= INSERTS; k++) {
            L->pin_keys[k] = (uint64_t *)floe_backend_host_alloc(gpu_be, keys * 8);
            L->pin_res[k] = (uint8_t *)floe_backend_host_alloc(gpu_be, keys);
            if (!L->pin_keys[k] || !L->pin_res[k]) {
                failures++;
                fprintf(stderr, "FAIL: cycles: no pinned memory for %zu keys\n", keys);
                return; /* the process ends with the failure */
            }
        }
        pthread_mutex_init(&L->lock, NULL);
        pthread_cond_init(&L->cv, NULL);
    }
    printf("cycles: %u cycles of create / fill / find / drop, %u parts over %d device(s), %u threads, batches of %zu "
           "keys, split on the host (%u lanes) and on the devices (1 lane), two cycles each in turn\n",
           cycles, parts, ndev < (int)parts ? ndev : (int)parts, LANES, keys, LANES);
    fflush(stdout);
    uint64_t checked = 0;
    unsigned c = 0;
    for (; c < cycles; c++) {
        if (!one_cycle(cpu_be, gpu_be, lanes, c, &checked))
            break;
        if ((c + 1) % 10 == 0 || c + 1 == cycles) {
            printf("  cycle %u: %llu answers checked so far\n", c + 1, (unsigned long long)checked);
            fflush(stdout);
        }
    }
    if (c == cycles)
        printf("ok: cycles: %u cycles, %llu answers as the cpu engine's\n", cycles, (unsigned long long)checked);
    for (unsigned l = 0; l < LANES; l++) {
        pthread_mutex_destroy(&lanes[l].lock);
        pthread_cond_destroy(&lanes[l].cv);
        for (unsigned k = 0; k <= INSERTS; k++) {
            floe_backend_host_free(gpu_be, lanes[l].pin_keys[k]);
            floe_backend_host_free(gpu_be, lanes[l].pin_res[k]);
        }
    }
    floe_backend_destroy(cpu_be);
    floe_backend_destroy(gpu_be);
}
