/*
 * layout2_tree.h - how tests/unit/data/layout2-tree.floe was made, for the
 * tests that load it (tests/unit/test_tree.c).  C and C++.
 *
 * d579ee9 saved it, before the node layout of FLOE_NODE_LAYOUT (table
 * layout version 2: node tables of 15 choices with 4-bit tags and
 * power-of-two sizes): a TREE of LAYOUT2_WORDS words (seed 0x5EED0002,
 * capacity 1000, grow on) into which batches of 500 put LAYOUT2_VECTORS
 * vectors, vector i word w being layout2_word(i, w); it grew from 2^6 node
 * slots on the way (generation 3).
 */
#ifndef FLOE_TESTS_LAYOUT2_TREE_H
#define FLOE_TESTS_LAYOUT2_TREE_H

#include <stdint.h>

#define LAYOUT2_FILE    "tests/unit/data/layout2-tree.floe" /* from the repository's root */
#define LAYOUT2_WORDS   8u
#define LAYOUT2_VECTORS 3000u
#define LAYOUT2_SEED    0x5EED0002ull

/* Word w of vector i: 6 values a word, so that vectors share subtrees. */
static inline uint32_t layout2_word(uint32_t i, uint32_t w)
{
    uint64_t x = ((uint64_t)i << 8 | w) * 0x9E3779B97F4A7C15ull;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    return (uint32_t)(x % 6u);
}

#endif /* FLOE_TESTS_LAYOUT2_TREE_H */
