/*
 * cuckoo_layout.h - the one definition of the STATIC table's layout: the
 * seed paper's compact bucketed cuckoo table (notes/compact-iceberg.md;
 * Hegeman et al. 2024, section 4.4), built once from a set of keys and then
 * only queried.  Shared by the CPU engine (tables/cuckoo.c), the GPU engine
 * (gpu/cuckoo_gpu.cu) and the table file: a frozen table's file loads on
 * either.
 *
 * One level of buckets of FLOE_CUCKOO_SLOTS rows, mult x 2^hi_bits of them
 * (mult 1..63 with hi_bits 0, else 32..63: a size for every 1/32 step, so
 * that a table of any number of keys past 1,000 or so is 0.95 to 0.98
 * full, unless a size past the next power of two takes fewer bytes with
 * narrower rows: floe_cuckoo_first_step).  A key
 * has FLOE_CUCKOO_CHOICES candidate buckets, one for each of as many seeded
 * bijections (layout.h's floe_perm: permutations instead of hash functions,
 * so that a row keeps only a remainder): of the permuted key x, the high
 * hi_bits pick a bucket inside a part, and the low bits (the rest) split
 * once more: rest % mult picks the part, and rest / mult is the remainder
 * (below 2^rem_bits, rem_bits = the low bits less floor(log2 mult)).  Choice
 * c stores ((remainder << 1) | c) + 1, never 0 (EMPTY), from which the
 * bucket's position gives the key back.
 *
 * Buckets fill in order: a key goes to its choice c + 1 only when its
 * bucket of choice c is full, and an evicted key moves on to its next
 * choice, whose earlier buckets are full too; a static table never empties
 * a slot.  So a lookup reads the buckets of choices 0 and 1 in turn and
 * stops at the first one that holds the key, or that has an EMPTY slot
 * (then the key is not in the table): a miss at fill 0.9 reads little more
 * than one bucket.  Rows are packed into 64-bit words as layout.h packs
 * them, and found with its word-at-a-time search.
 */
#ifndef FLOE_TABLES_CUCKOO_LAYOUT_H
#define FLOE_TABLES_CUCKOO_LAYOUT_H

#include <stdint.h>

#include "layout.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FLOE_CUCKOO_CHOICES 2u
#define FLOE_CUCKOO_CHOICE_BITS 1u /* a row's bits that say its choice */
#define FLOE_CUCKOO_SLOTS       16u /* rows a bucket: 16 of 16 bits are a 32-byte sector; two choices fill them to 0.98 */
#define FLOE_CUCKOO_TAG     (FLOE_CUCKOO_CHOICE_BITS + 1u) /* and a spare bit: a row is below 2^(w-1) */
#define FLOE_CUCKOO_FILL        0.98                           /* the most a table is sized to hold */
#define FLOE_CUCKOO_PERM    16u  /* floe_perm_init's `which` of choice 0 (iceberg levels take 0..4) */

typedef struct floe_cuckoo_geometry {
    uint32_t key_bits;
    uint32_t mult;    /* 1..63; 32..63 where hi_bits > 0 */
    uint32_t hi_bits; /* mult x 2^hi_bits buckets */
    uint32_t low_bits;
    uint64_t buckets;
    floe_level level; /* the rows: rem_bits, row_bits, slots, words (addr_bits and three unused) */
    floe_perm perm[FLOE_CUCKOO_CHOICES];
} floe_cuckoo_geometry;

#define FLOE_CUCKOO_MULT_MAX 63u /* buckets: mult x 2^hi_bits, mult below 64 */

/* The build (both engines): moves one placement may make before its size is
 * given up (chains stay short until a table nears the fill its bucket size
 * allows), and sizes tried in all, each a 1/32 step past the one before (up
 * to about 1.6 times the first). */
#define FLOE_CUCKOO_PLACE_MOVES 4096u
#define FLOE_CUCKOO_SIZES_TRIED 16u
/* The build places every key it can at its choice 0 first, then the rest
 * (about 8% at fill 0.956) by cuckoo moves from choice 1 on, where a full
 * bucket's key to move is, of up to FLOE_CUCKOO_LOOKAHEAD rows from a
 * random one on, the first of a key at its choice 0 whose choice-1 bucket
 * has room: 8.6% of keys end at choice 1 against 18.8% by moves alone
 * (nearly the 8.1% that must), and a hit reads a second bucket that much
 * less often (docs/PERFORMANCE.md, S1). */
#define FLOE_CUCKOO_LOOKAHEAD 6u
/* Size steps there are (floe_cuckoo_size_step): 63 of one factor, then 32 a power of two up to 2^64. */
#define FLOE_CUCKOO_SIZE_STEPS (63u + 32u * 64u)

/* floor(log2 mult) for mult 1..FLOE_CUCKOO_MULT_MAX. */
FLOE_HD static inline uint32_t floe_cuckoo_mult_bits(uint32_t mult)
{
    uint32_t b = 0;
    while (b < 5 && (mult >> (b + 1)) != 0)
        b++;
    return b;
}

/* Whether key_bits keys fit a table of mult x 2^hi_bits buckets: a
 * remainder of 0 bits or more, in a row of 64 bits at most, and no more
 * buckets than an iceberg table's primary level may have. */
FLOE_HD static inline int floe_cuckoo_size_ok(uint32_t key_bits, uint32_t hi_bits, uint32_t mult)
{
    const uint32_t mb = floe_cuckoo_mult_bits(mult);
    return hi_bits <= FLOE_MAX_ADDR_BITS && hi_bits + mb <= key_bits && key_bits - hi_bits - mb + FLOE_CUCKOO_TAG <= 64;
}

/* Size step k: k + 1 buckets while fewer than 64 (mult k + 1), then mult
 * 32..63 times 2^hi_bits: each a 1/32 step or less past the one before;
 * 0 where key_bits keys do not fit it. */
FLOE_HD static inline int floe_cuckoo_size_step(uint32_t key_bits, uint32_t k, uint32_t *hi_bits, uint32_t *mult)
{
    if (k < 63) {
        *mult = k + 1;
        *hi_bits = 0;
    } else {
        *mult = 32 + (k - 63) % 32;
        *hi_bits = 1 + (k - 63) / 32;
    }
    return floe_cuckoo_size_ok(key_bits, *hi_bits, *mult);
}

/* Bytes of the buckets of mult x 2^hi_bits buckets for key_bits keys
 * (floe_cuckoo_size_ok): one row width short of a power of two, one wider
 * past it. */
FLOE_HD static inline uint64_t floe_cuckoo_size_bytes(uint32_t key_bits, uint32_t hi_bits, uint32_t mult)
{
    const uint32_t rem_bits = key_bits - hi_bits - floe_cuckoo_mult_bits(mult);
    return ((uint64_t)mult << hi_bits) * FLOE_CUCKOO_SLOTS * floe_row_bits_for(rem_bits, FLOE_CUCKOO_TAG) / 8;
}

/* The size step a table of n keys, at most `fill` full, starts from: of
 * the steps from the first that holds them up to twice its buckets, the
 * one of fewest bytes (the first of them where several are as few).  A
 * size just short of a power of two may need rows a width wider than one
 * just past it: 1.02 G 40-bit keys fit 2^26 buckets of 16-bit rows, 0.95
 * full, in half the bytes of 63 x 2^20 buckets of 32-bit rows, 0.97 full.
 * FLOE_CUCKOO_SIZE_STEPS if no step holds them. */
FLOE_HD static inline uint32_t floe_cuckoo_first_step(uint32_t key_bits, uint64_t n, double fill)
{
    uint32_t k = 0, hi_bits, mult;
    for (; k < FLOE_CUCKOO_SIZE_STEPS; k++)
        if (floe_cuckoo_size_step(key_bits, k, &hi_bits, &mult) &&
            (double)(((uint64_t)mult << hi_bits) * FLOE_CUCKOO_SLOTS) * fill >= (double)n)
            break;
    if (k == FLOE_CUCKOO_SIZE_STEPS)
        return k;
    const uint64_t first = (uint64_t)mult << hi_bits;
    uint64_t best_bytes = floe_cuckoo_size_bytes(key_bits, hi_bits, mult);
    uint32_t best = k;
    for (uint32_t j = k + 1; j < FLOE_CUCKOO_SIZE_STEPS; j++) {
        if (!floe_cuckoo_size_step(key_bits, j, &hi_bits, &mult))
            continue;
        if (((uint64_t)mult << hi_bits) > 2 * first)
            break;
        if (floe_cuckoo_size_bytes(key_bits, hi_bits, mult) < best_bytes) {
            best_bytes = floe_cuckoo_size_bytes(key_bits, hi_bits, mult);
            best = j;
        }
    }
    return best;
}

/* Fills g for key_bits (1..64) and mult x 2^hi_bits buckets
 * (floe_cuckoo_size_ok), permutations from seed. */
FLOE_HD static inline void floe_cuckoo_geometry_init(floe_cuckoo_geometry *g, uint32_t key_bits, uint32_t hi_bits,
                                                     uint32_t mult, uint64_t seed)
{
    floe_level *lv = &g->level;
    g->key_bits = key_bits;
    g->mult = mult;
    g->hi_bits = hi_bits;
    g->low_bits = key_bits - hi_bits;
    g->buckets = (uint64_t)mult << hi_bits;
    lv->addr_bits = 0;
    lv->three = 0;
    lv->rem_bits = g->low_bits - floe_cuckoo_mult_bits(mult);
    lv->row_bits = floe_row_bits_for(lv->rem_bits, FLOE_CUCKOO_TAG);
    lv->slots = FLOE_CUCKOO_SLOTS;
    lv->choices = FLOE_CUCKOO_CHOICES;
    lv->words = lv->slots * lv->row_bits / 64;
    lv->pad = 0;
    lv->first_id = 0;
    for (uint32_t c = 0; c < FLOE_CUCKOO_CHOICES; c++)
        floe_perm_init(&g->perm[c], key_bits, seed, FLOE_CUCKOO_PERM + c);
}

FLOE_HD static inline uint64_t floe_cuckoo_slots(const floe_cuckoo_geometry *g)
{
    return g->buckets * g->level.slots;
}

/* x / mult, each mult a constant the compiler turns into a multiplication
 * (a table's mult never changes, so the switch predicts). */
#define FLOE_CUCKOO_DIV_(m)                                                                                            \
    case m:                                                                                                            \
        return x / (m);
#define FLOE_CUCKOO_DIV8_(m)                                                                                           \
    FLOE_CUCKOO_DIV_(m)                                                                                                \
    FLOE_CUCKOO_DIV_(m + 1)                                                                                            \
    FLOE_CUCKOO_DIV_(m + 2) FLOE_CUCKOO_DIV_(m + 3) FLOE_CUCKOO_DIV_(m + 4) FLOE_CUCKOO_DIV_(m + 5)                    \
        FLOE_CUCKOO_DIV_(m + 6) FLOE_CUCKOO_DIV_(m + 7)
FLOE_HD static inline uint64_t floe_cuckoo_div(uint64_t x, uint32_t mult)
{
    switch (mult) {
        FLOE_CUCKOO_DIV_(2)
        FLOE_CUCKOO_DIV_(3)
        FLOE_CUCKOO_DIV_(4)
        FLOE_CUCKOO_DIV_(5)
        FLOE_CUCKOO_DIV_(6)
        FLOE_CUCKOO_DIV_(7)
        FLOE_CUCKOO_DIV8_(8)
        FLOE_CUCKOO_DIV8_(16)
        FLOE_CUCKOO_DIV8_(24)
        FLOE_CUCKOO_DIV8_(32)
        FLOE_CUCKOO_DIV8_(40)
        FLOE_CUCKOO_DIV8_(48)
        FLOE_CUCKOO_DIV8_(56)
    default:
        return x; /* 1 */
    }
}
#undef FLOE_CUCKOO_DIV8_
#undef FLOE_CUCKOO_DIV_

/* Key's bucket and row for choice c. */
FLOE_HD static inline void floe_cuckoo_split(const floe_cuckoo_geometry *g, uint32_t c, uint64_t key, uint64_t *bucket,
                                             uint64_t *row)
{
    const uint64_t x = floe_permute(&g->perm[c], key);
    const uint64_t rest = x & floe_mask_bits(g->low_bits), q = floe_cuckoo_div(rest, g->mult);
    *bucket = ((rest - q * g->mult) << g->hi_bits) | (g->low_bits >= 64 ? 0 : x >> g->low_bits);
    *row = ((q << FLOE_CUCKOO_CHOICE_BITS) | c) + 1;
}

FLOE_HD static inline uint32_t floe_cuckoo_choice(uint64_t row)
{
    return (uint32_t)((row - 1) & ((1u << FLOE_CUCKOO_CHOICE_BITS) - 1));
}

/* The key a stored row of a bucket holds. */
FLOE_HD static inline uint64_t floe_cuckoo_join(const floe_cuckoo_geometry *g, uint64_t bucket, uint64_t row)
{
    const uint64_t part = bucket >> g->hi_bits, hi = bucket & floe_mask_bits(g->hi_bits);
    const uint64_t x = (g->low_bits >= 64 ? 0 : hi << g->low_bits) | (((row - 1) >> FLOE_CUCKOO_CHOICE_BITS) * g->mult + part);
    return floe_unpermute(&g->perm[floe_cuckoo_choice(row)], x);
}

#ifdef __cplusplus
}
#endif

#endif /* FLOE_TABLES_CUCKOO_LAYOUT_H */
