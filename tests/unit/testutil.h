/*
 * testutil.h - helpers shared by the unit tests: a deterministic random
 * generator, a reference model (a plain open-addressing map from key to
 * value and id), and the suite constructors main.c runs.
 */
#ifndef FLOE_TESTS_TESTUTIL_H
#define FLOE_TESTS_TESTUTIL_H

#include <check.h>

/* Check records every passing assertion through a pipe to its parent process
 * (a write(2) each); the model tests make millions of assertions, so passing
 * ones record nothing.  Failures still report file, line and message. */
#undef _mark_point
#define _mark_point(file, line) ((void)0)
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* xorshift64*: fast, deterministic per seed. */
static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static inline uint64_t rng_below(uint64_t *s, uint64_t n)
{
    return n ? rng_next(s) % n : 0;
}

/* The reference: whatever a test believes is stored, with no cleverness. */
typedef struct model {
    uint64_t *keys;
    uint64_t *values;
    uint64_t *ids;
    uint8_t *state;         /* 0 empty, 1 live, 2 deleted */
    size_t cap, live, used; /* used: live + deleted */
} model;

void model_init(model *m, size_t expected);
void model_free(model *m);
bool model_get(const model *m, uint64_t key, uint64_t *value, uint64_t *id);
void model_put(model *m, uint64_t key, uint64_t value, uint64_t id);
bool model_del(model *m, uint64_t key);

Suite *layout_suite(void);
Suite *dedup_suite(void);
Suite *pool_suite(void);
Suite *iceberg_suite(void);
Suite *concurrency_suite(void);
Suite *tablefile_suite(void);
Suite *badinput_suite(void);
Suite *backend_suite(void);
Suite *add_suite(void); /* the add operation (one file an operation) */
Suite *partition_suite(void);
Suite *faults_suite(void);
Suite *capacity_suite(void);
Suite *config_suite(void);
Suite *envelope_suite(void);
Suite *resp_wire_suite(void); /* the Redis protocol's bytes (daemon/resp_wire.c) */
Suite *cuckoo_suite(void);    /* STATIC tables: the compact cuckoo table (tables/cuckoo.c) */
Suite *static_suite(void);    /* STATIC tables through the backend: filled, frozen, saved, refused */
Suite *explore_suite(void); /* the open set of exploring tables (tables/explore.c) */
Suite *tree_suite(void);
Suite *ordered_suite(void);
Suite *histogram_suite(void); /* floe-bench's latency histogram (bench/histogram.c) */
Suite *workload_suite(void);  /* floe-bench's key streams (bench/workload.c) */
Suite *mcmodel_suite(void);   /* floe-mc's models (examples/mc/model*.c) */

#endif
