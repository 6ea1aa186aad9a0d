/*
 * layout1_map.h - how tests/unit/data/layout1-map.floe was made, for the tests
 * that load it on the CPU (tests/unit/test_tablefile.c) and GPU
 * (tests/gpu/backend_test.cu) backends.  C and C++.
 *
 * d203658 saved it, before FLOE_FIRST_FILL (table layout version 1): a MAP
 * of 32-bit keys and 4-byte values (seed 0x5EED0001, capacity 4000, 4624
 * slots) into which one batch put LAYOUT1_KEYS keys, the low 32 bits of the
 * xorshift64* sequence from LAYOUT1_RNG_SEED (rng_next, test_rng), each with
 * the value layout1_value(key); then every LAYOUT1_ERASED_EVERY-th of them,
 * from the first, was erased: 3887 rows in level 0, 367 in level 1 (of its
 * 512 slots).
 */
#ifndef FLOE_TESTS_LAYOUT1_MAP_H
#define FLOE_TESTS_LAYOUT1_MAP_H

#include <stddef.h>
#include <stdint.h>

#define LAYOUT1_FILE         "tests/unit/data/layout1-map.floe" /* from the repository's root */
#define LAYOUT1_KEYS         4254
#define LAYOUT1_RNG_SEED     2026
#define LAYOUT1_ERASED_EVERY 20

static inline uint64_t layout1_key(uint64_t random)
{
    return random & 0xFFFFFFFFull;
}

static inline uint32_t layout1_value(uint64_t key)
{
    return (uint32_t)(key * 0x9E3779B9u);
}

static inline int layout1_erased(size_t i)
{
    return i % LAYOUT1_ERASED_EVERY == 0;
}

#endif /* FLOE_TESTS_LAYOUT1_MAP_H */
