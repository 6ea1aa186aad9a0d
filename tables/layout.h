/*
 * layout.h - the one definition of the compact iceberg table layout.
 *
 * Everything that must agree between the CPU engine (tables/iceberg.c), the
 * GPU engine (gpu/) and the table file format lives here: level geometry,
 * the seeded bijective permutations that split a key into bucket address and
 * remainder, the row encoding (EMPTY, TOMBSTONE, BUSY, stored remainders),
 * how rows pack into 64-bit words, and stable slot ids.  The functions are
 * pure (no atomics, no allocation) so that both gcc and nvcc compile them:
 * under nvcc they are __host__ __device__.
 *
 * A table has three levels (notes/compact-iceberg.md):
 *   level 0  primary:   2^a0 buckets of 32 slots, one candidate bucket;
 *   level 1  secondary: ~1/8 of the primary slots, buckets of 16, two
 *                       candidate buckets: the first takes the key while it
 *                       holds fewer than FLOE_FIRST_FILL keys, then the less
 *                       full one;
 *   level 2  stash:     ~1/256 of the primary slots, shaped like level 1; it
 *                       takes what both secondary buckets could not, so that
 *                       FULL appears late (past 0.96 fill with random keys).
 * Each level has a w-bit row chosen from {16, 32, 64}: the smallest that holds
 * the level's remainder plus its tag bits.  Rows are packed little-endian into
 * 64-bit words, so that every atomic on every backend is a 64-bit CAS (16-bit
 * CAS is emulated on GPUs, and mixed-size atomics are not C11).
 *
 * The one invariant that makes concurrent find-or-put exact (paper, appendix
 * A): a key is only ever written into the first EMPTY slot of a bucket, and a
 * slot never becomes EMPTY again.  Non-empty slots therefore form a prefix of
 * every bucket; erase writes a TOMBSTONE, which is never reused before a
 * rebuild.
 */
#ifndef FLOE_TABLES_LAYOUT_H
#define FLOE_TABLES_LAYOUT_H

#include <stdint.h>

#include "floe_wire.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Per-key answers (FLOE_ABSENT ... FLOE_ERASED) are the protocol's: floe_wire.h. */

#define FLOE_LEVELS        3
#define FLOE_L0_SLOTS      32u /* slots per primary bucket */
#define FLOE_L1_SLOTS      16u /* slots per secondary / stash bucket */
#define FLOE_L1_SHIFT      2u  /* secondary buckets = primary buckets >> 2 (1/8 of the slots) */
#define FLOE_L2_SHIFT      7u  /* stash buckets = primary buckets >> 7 (1/256 of the slots) */
#define FLOE_MAX_ADDR_BITS 40u /* 2^45 primary slots: far beyond any device */
#define FLOE_PERMS         5   /* level 0; level 1 choices 0,1; level 2 choices 0,1 */

/* Levels 1 and 2 put a key into its first candidate bucket while that holds
 * fewer than FLOE_FIRST_FILL keys, and past that into the less full of the
 * two (ties to the second).  A slot never becomes EMPTY again, so a first
 * candidate found with fewer keys than that says the key is neither in the
 * second nor deeper: a find or put that reaches level 1 reads one bucket of
 * it, mostly, instead of two.  At fill 0.9 a miss reads 1.79 buckets instead
 * of 2.12, and the stash still takes every key through fill 0.96 (the less
 * full rule alone: the same; the first candidate until full: FULL from 0.95).
 * A table of layout version 1 (FLOE_LAYOUT_VERSION below) has first_fill
 * 0: the less full rule alone. */
#define FLOE_FIRST_FILL 12u

/* Table files (tablefile.h) record the layout their arrays follow: bumped
 * whenever this file or tree_layout.h changes how keys map to slots.
 * Version 1 tables (before FLOE_FIRST_FILL) are still read, and keep their
 * rule until a rebuild: their geometry's first_fill is 0.  Version 2 is
 * every iceberg table of power-of-two levels since (SET, MAP), and version
 * 3 a TREE whose nodes are laid out as tree_layout.h's FLOE_NODE_LAYOUT
 * says, whose root table may have levels of 1.5 x 2^a buckets. */
#define FLOE_LAYOUT_VERSION     3u
#define FLOE_LAYOUT_THREE       3u /* and iceberg tables of 1.5 x 2^a primary buckets (a TREE's roots) */
#define FLOE_LAYOUT_FIRST_FILL  2u
#define FLOE_LAYOUT_OLDEST      1u

/* Row codes shared by every width: 0 is EMPTY, all-ones is TOMBSTONE and
 * all-ones minus one is BUSY (a MAP slot claimed whose value is still being
 * written).  Stored tags start at 1 and stay below 2^(w-1), far from both. */
#define FLOE_ROW_EMPTY 0u

/* One bijection on key_bits bits: fmix64-style xorshift-multiply rounds with a
 * seeded xor in front, all arithmetic mod 2^bits.  Multipliers are odd, so
 * each round is invertible; shift >= bits/2 makes xorshift self-inverting in
 * two steps. */
typedef struct floe_perm {
    uint64_t mask; /* 2^bits - 1 */
    uint64_t xor_in;
    uint64_t mul1, mul2;
    uint64_t inv1, inv2; /* multiplicative inverses mod 2^bits */
    uint32_t shift;
    uint32_t pad;
} floe_perm;

typedef struct floe_level {
    uint32_t addr_bits; /* log2 of the bucket count, rounded down */
    uint32_t three;     /* 1: 1.5 * 2^addr_bits buckets (floe_split) */
    uint32_t rem_bits;  /* key_bits - addr_bits */
    uint32_t row_bits;  /* 16, 32 or 64 */
    uint32_t slots;     /* slots per bucket */
    uint32_t choices;   /* 1 (level 0) or 2 */
    uint32_t words;     /* 64-bit words per bucket */
    uint32_t pad;
    uint64_t first_id;  /* id of slot 0 of bucket 0 */
} floe_level;

typedef struct floe_geometry {
    uint32_t key_bits;
    uint32_t first_fill; /* FLOE_FIRST_FILL, or 0 in a table of layout version 1 */
    floe_level level[FLOE_LEVELS];
    uint64_t total_slots;
    floe_perm perm[FLOE_PERMS];
} floe_geometry;

/* ---- small integer helpers ------------------------------------------------ */

FLOE_HD static inline uint64_t floe_mask_bits(uint32_t bits)
{
    return bits >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << bits) - 1);
}

/* splitmix64: derives permutation parameters from the table seed. */
FLOE_HD static inline uint64_t floe_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Inverse of an odd number mod 2^64 by Newton's iteration (each step doubles
 * the correct low bits: 3 -> 6 -> 12 -> 24 -> 48 -> 96). */
FLOE_HD static inline uint64_t floe_inverse_odd(uint64_t m)
{
    uint64_t x = m; /* correct to 3 bits for odd m */
    for (int i = 0; i < 5; i++)
        x *= 2 - m * x;
    return x;
}

/* ---- permutations ------------------------------------------------------------ */

FLOE_HD static inline void floe_perm_init(floe_perm *p, uint32_t bits, uint64_t seed, uint32_t which)
{
    uint64_t st = seed ^ (0xD6E8FEB86659FD93ull * (uint64_t)(which + 1));
    p->mask = floe_mask_bits(bits);
    p->xor_in = floe_splitmix64(&st) & p->mask;
    p->mul1 = (floe_splitmix64(&st) | 1) & p->mask;
    p->mul2 = (floe_splitmix64(&st) | 1) & p->mask;
    p->inv1 = floe_inverse_odd(p->mul1) & p->mask;
    p->inv2 = floe_inverse_odd(p->mul2) & p->mask;
    p->shift = bits > 1 ? (bits + 1) / 2 : 1;
    p->pad = 0;
}

FLOE_HD static inline uint64_t floe_permute(const floe_perm *p, uint64_t x)
{
    const uint64_t m = p->mask;
    const uint32_t s = p->shift;
    x ^= p->xor_in;
    x ^= x >> s;
    x = (x * p->mul1) & m;
    x ^= x >> s;
    x = (x * p->mul2) & m;
    x ^= x >> s;
    return x;
}

/* y = x ^ (x >> s) with 2s >= bits is undone by the same step applied twice
 * in the form x = y ^ (y >> s): the second-order term (y >> 2s) is zero. */
FLOE_HD static inline uint64_t floe_unpermute(const floe_perm *p, uint64_t x)
{
    const uint64_t m = p->mask;
    const uint32_t s = p->shift;
    x ^= x >> s;
    x = (x * p->inv2) & m;
    x ^= x >> s;
    x = (x * p->inv1) & m;
    x ^= x >> s;
    x ^= p->xor_in;
    return x;
}

/* ---- geometry ------------------------------------------------------------------ */

/* Smallest row of 16, 32 or 64 bits that holds rem_bits plus tag_bits. */
FLOE_HD static inline uint32_t floe_row_bits_for(uint32_t rem_bits, uint32_t tag_bits)
{
    uint32_t need = rem_bits + tag_bits;
    return need <= 16 ? 16u : need <= 32 ? 32u : 64u;
}

FLOE_HD static inline uint32_t floe_clamp_u32(int64_t v, int64_t lo, int64_t hi)
{
    if (v < lo)
        v = lo;
    if (v > hi)
        v = hi;
    return (uint32_t)v;
}

/* Primary address bits possible for key_bits: level 0 needs rem + 1 <= 64,
 * and no level can have more address bits than the key has bits.  (Levels 1
 * and 2 clamp their own address bits for rem + 2 <= 64.) */
FLOE_HD static inline uint32_t floe_min_addr_bits(uint32_t key_bits)
{
    return key_bits > 63 ? key_bits - 63 : 0u;
}

FLOE_HD static inline uint32_t floe_max_addr_bits(uint32_t key_bits)
{
    return key_bits < FLOE_MAX_ADDR_BITS ? key_bits : FLOE_MAX_ADDR_BITS;
}

FLOE_HD static inline uint64_t floe_level_buckets(const floe_level *lv)
{
    return lv->three ? (uint64_t)3 << (lv->addr_bits - 1) : (uint64_t)1 << lv->addr_bits;
}

FLOE_HD static inline uint64_t floe_level_slots(const floe_level *lv)
{
    return floe_level_buckets(lv) * lv->slots;
}

FLOE_HD static inline uint64_t floe_level_words(const floe_level *lv)
{
    return floe_level_buckets(lv) * lv->words;
}

/* Fills g for key_bits (1..64) and 2^a0 primary buckets (a0 already clamped
 * to [floe_min_addr_bits, floe_max_addr_bits]), 1.5 times that with three
 * (a table that grows by steps of 1.5 and 4/3: a TREE's roots), with
 * permutations from seed.  Each level has its own share of the primary
 * size, 1.5 times a power of two too where it has an address bit. */
FLOE_HD static inline void floe_geometry_init(floe_geometry *g, uint32_t key_bits, uint32_t a0, uint32_t three,
                                              uint64_t seed)
{
    uint64_t first = 0;
    g->key_bits = key_bits;
    g->first_fill = FLOE_FIRST_FILL;
    for (int l = 0; l < FLOE_LEVELS; l++) {
        floe_level *lv = &g->level[l];
        uint32_t tag = l == 0 ? 1u : 2u;
        int64_t lo = (int64_t)key_bits - (64 - (int64_t)tag);
        lv->addr_bits = floe_clamp_u32((int64_t)a0 - (l == 0   ? 0
                                                      : l == 1 ? FLOE_L1_SHIFT
                                                               : FLOE_L2_SHIFT),
                                       lo < 0 ? 0 : lo, key_bits);
        lv->three = three && lv->addr_bits >= 1;
        lv->rem_bits = key_bits - lv->addr_bits;
        lv->row_bits = floe_row_bits_for(lv->rem_bits, tag);
        lv->slots = l == 0 ? FLOE_L0_SLOTS : FLOE_L1_SLOTS;
        lv->choices = l == 0 ? 1u : 2u;
        lv->words = lv->slots * lv->row_bits / 64;
        lv->pad = 0;
        lv->first_id = first;
        first += floe_level_slots(lv);
    }
    g->total_slots = first;
    floe_perm_init(&g->perm[0], key_bits, seed, 0);
    for (uint32_t i = 1; i < FLOE_PERMS; i++)
        floe_perm_init(&g->perm[i], key_bits, seed, i);
}

/* Index into g->perm of level l's choice c. */
FLOE_HD static inline uint32_t floe_perm_index(uint32_t l, uint32_t c)
{
    return l == 0 ? 0u : 1u + (l - 1) * 2u + c;
}

/* ---- rows -------------------------------------------------------------------------- */

FLOE_HD static inline uint64_t floe_row_mask(uint32_t row_bits)
{
    return floe_mask_bits(row_bits);
}

FLOE_HD static inline uint64_t floe_row_tombstone(uint32_t row_bits)
{
    return floe_row_mask(row_bits);
}

FLOE_HD static inline uint64_t floe_row_busy(uint32_t row_bits)
{
    return floe_row_mask(row_bits) - 1;
}

/* The stored row for a remainder: rem + 1 on level 0, ((rem << 1) | choice) + 1
 * on levels 1 and 2, so a stored row is never 0 and stays below 2^(w-1). */
FLOE_HD static inline uint64_t floe_row_encode(uint32_t level, uint64_t rem, uint32_t choice)
{
    return level == 0 ? rem + 1 : ((rem << 1) | choice) + 1;
}

/* A row is a key when it is neither EMPTY, TOMBSTONE nor BUSY. */
FLOE_HD static inline int floe_row_is_key(uint64_t row, uint32_t row_bits)
{
    return row != FLOE_ROW_EMPTY && row < floe_row_busy(row_bits);
}

FLOE_HD static inline uint64_t floe_row_remainder(uint32_t level, uint64_t row)
{
    return level == 0 ? row - 1 : (row - 1) >> 1;
}

FLOE_HD static inline uint32_t floe_row_choice(uint32_t level, uint64_t row)
{
    return level == 0 ? 0u : (uint32_t)((row - 1) & 1);
}

/* Row i of a bucket held as 64-bit words (w in 16, 32, 64). */
FLOE_HD static inline uint64_t floe_row_get(const uint64_t *words, uint32_t row_bits, uint32_t i)
{
    uint32_t bit = i * row_bits;
    return (words[bit >> 6] >> (bit & 63)) & floe_row_mask(row_bits);
}

/* The word that results from writing row value v into slot i of word w. */
FLOE_HD static inline uint64_t floe_row_put(uint64_t word, uint32_t row_bits, uint32_t i, uint64_t v)
{
    uint32_t sh = (i * row_bits) & 63;
    uint64_t m = floe_row_mask(row_bits) << sh;
    return (word & ~m) | (v << sh);
}

FLOE_HD static inline uint32_t floe_row_word(uint32_t row_bits, uint32_t i)
{
    return (i * row_bits) >> 6;
}

/* ---- keys <-> (bucket, remainder) ----------------------------------------------------- */

/* The permuted key's high addr_bits pick the bucket, the low rem_bits are
 * stored.  In a level of 1.5 * 2^addr_bits buckets the high addr_bits - 1
 * pick a bucket of a third, the low rem_bits + 1 (the rest) split once
 * more: rest % 3 picks the third, rest / 3 (below 2^rem_bits) is stored.
 * three is the level's (lv->three): a kernel that knows at compile time
 * that it is 0 passes 0, and its split has no other path (floe_split). */
FLOE_HD static inline void floe_split_as(const floe_geometry *g, uint32_t l, uint32_t c, uint64_t key, uint64_t *bucket,
                                         uint64_t *rem, uint32_t three)
{
    const floe_level *lv = &g->level[l];
    uint64_t x = floe_permute(&g->perm[floe_perm_index(l, c)], key);
    if (three) {
        const uint32_t low = lv->rem_bits + 1;
        const uint64_t rest = x & floe_mask_bits(low), q = rest / 3;
        *bucket = ((rest - 3 * q) << (lv->addr_bits - 1)) | (low >= 64 ? 0 : x >> low);
        *rem = q;
        return;
    }
    *bucket = lv->rem_bits >= 64 ? 0 : x >> lv->rem_bits;
    *rem = x & floe_mask_bits(lv->rem_bits);
}

FLOE_HD static inline void floe_split(const floe_geometry *g, uint32_t l, uint32_t c, uint64_t key, uint64_t *bucket,
                                      uint64_t *rem)
{
    floe_split_as(g, l, c, key, bucket, rem, g->level[l].three);
}

FLOE_HD static inline uint64_t floe_join(const floe_geometry *g, uint32_t l, uint32_t c, uint64_t bucket, uint64_t rem)
{
    const floe_level *lv = &g->level[l];
    uint64_t x;
    if (lv->three) {
        const uint32_t low = lv->rem_bits + 1;
        const uint64_t hi = bucket & floe_mask_bits(lv->addr_bits - 1);
        x = (low >= 64 ? 0 : hi << low) | ((rem * 3 + (bucket >> (lv->addr_bits - 1))) & floe_mask_bits(low));
    } else {
        x = lv->rem_bits >= 64 ? rem : (bucket << lv->rem_bits) | rem;
    }
    return floe_unpermute(&g->perm[floe_perm_index(l, c)], x);
}

/* ---- bucket snapshots -------------------------------------------------------------------- */

/* Bucket searches work a 64-bit word at a time (SWAR): with lo = 1 in every
 * lane's lowest bit and hi = 1 in every lane's highest, (x - lo) & ~x & hi
 * marks lanes of x that are zero; the lowest mark is exact (higher ones can
 * be borrow artefacts), which is all a search for the first match needs. */
FLOE_HD static inline uint64_t floe_lanes_lo(uint32_t row_bits)
{
    return row_bits == 16 ? 0x0001000100010001ull : row_bits == 32 ? 0x0000000100000001ull : 1ull;
}

FLOE_HD static inline uint64_t floe_zero_lanes(uint64_t x, uint32_t row_bits)
{
    uint64_t lo = floe_lanes_lo(row_bits);
    return (x - lo) & ~x & (lo << (row_bits - 1));
}

FLOE_HD static inline uint32_t floe_ctz64(uint64_t x)
{
#ifdef __CUDA_ARCH__
    return (uint32_t)(__ffsll((long long)x) - 1);
#else
    return (uint32_t)__builtin_ctzll(x);
#endif
}

/* First slot of a snapshot whose row equals v, or lv->slots. */
FLOE_HD static inline uint32_t floe_bucket_first(const uint64_t *words, const floe_level *lv, uint64_t v)
{
    const uint32_t rb = lv->row_bits;
    const uint64_t pattern = v * floe_lanes_lo(rb);
    for (uint32_t w = 0; w < lv->words; w++) {
        uint64_t z = floe_zero_lanes(words[w] ^ pattern, rb);
        if (z)
            return w * (64 / rb) + floe_ctz64(z) / rb;
    }
    return lv->slots;
}

/* In a snapshot of a bucket: the slot holding row value v, or -1. */
FLOE_HD static inline int floe_bucket_find(const uint64_t *words, const floe_level *lv, uint64_t v)
{
    uint32_t i = floe_bucket_first(words, lv, v);
    return i < lv->slots ? (int)i : -1;
}

/* First EMPTY slot, or lv->slots.  By the prefix invariant, in a consistent
 * snapshot also the number of non-empty slots; in one read word by word
 * (a later word may be newer than an earlier one) only the first empty slot
 * may be claimed. */
FLOE_HD static inline uint32_t floe_bucket_first_empty(const uint64_t *words, const floe_level *lv)
{
    return floe_bucket_first(words, lv, FLOE_ROW_EMPTY);
}

/* Number of non-empty slots. */
FLOE_HD static inline uint32_t floe_bucket_load(const uint64_t *words, const floe_level *lv)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < lv->slots; i++)
        n += floe_row_get(words, lv->row_bits, i) != FLOE_ROW_EMPTY;
    return n;
}

/* Whether any slot is BUSY (a MAP insert between claim and publish). */
FLOE_HD static inline int floe_bucket_has_busy(const uint64_t *words, const floe_level *lv)
{
    return floe_bucket_first(words, lv, floe_row_busy(lv->row_bits)) < lv->slots;
}

/* The layout version of an iceberg table whose geometry has first_fill and
 * three, and the first_fill of a table of layout version v
 * (FLOE_LAYOUT_OLDEST .. FLOE_LAYOUT_VERSION). */
FLOE_HD static inline uint32_t floe_layout_version(uint32_t first_fill, uint32_t three)
{
    return three ? FLOE_LAYOUT_THREE : first_fill ? FLOE_LAYOUT_FIRST_FILL : FLOE_LAYOUT_OLDEST;
}

FLOE_HD static inline uint32_t floe_layout_first_fill(uint32_t v)
{
    return v <= FLOE_LAYOUT_OLDEST ? 0u : FLOE_FIRST_FILL;
}

/* Of two candidates holding n0 and n1 keys (their first EMPTY slots), the
 * one to put a key into: the first while it holds fewer than first_fill
 * keys, then the strictly less full, ties to the second (paper, Algorithm 2). */
FLOE_HD static inline uint32_t floe_pick_choice(const floe_geometry *g, uint32_t n0, uint32_t n1)
{
    return n0 < g->first_fill || n0 < n1 ? 0u : 1u;
}

/* Whether a key not in a first candidate holding n0 keys may be in the
 * second candidate or deeper (FLOE_FIRST_FILL). */
FLOE_HD static inline int floe_second_may_hold(const floe_geometry *g, uint32_t n0)
{
    return n0 >= g->first_fill;
}

/* ---- stable slot ids ---------------------------------------------------------------------- */

FLOE_HD static inline uint64_t floe_slot_id(const floe_geometry *g, uint32_t l, uint64_t bucket, uint32_t slot)
{
    return g->level[l].first_id + bucket * g->level[l].slots + slot;
}

/* Whether geometry `to` is `from` with its primary level's buckets split in
 * two (one address bit more, one remainder bit less, as many slots): each
 * key of primary bucket b then belongs to bucket 2b or 2b + 1 by its
 * remainder's top bit, so a growth moves that level bucket by bucket, in
 * order, instead of key by key (iceberg.c; gpu/iceberg_table.cu). */
FLOE_HD static inline int floe_geometry_splits(const floe_geometry *from, const floe_geometry *to)
{
    const floe_level *a = &from->level[0], *b = &to->level[0];
    return !a->three && !b->three && b->addr_bits == a->addr_bits + 1 && b->slots == a->slots &&
           b->rem_bits + 1 == a->rem_bits;
}

/* The growths by a half and by a third that move the primary level bucket
 * group by bucket group, as a split does by one bucket (as many slots, the
 * permutation the same):
 * - FLOE_SPREAD_THIRDS, from 2^a buckets to 1.5 x 2^a (three, the same
 *   address bits and remainder bits): the keys of old buckets 2i and 2i + 1
 *   go to bucket i of the three thirds, by r mod 3, their remainder r / 3,
 *   where r is the old remainder with the old bucket's low bit above it;
 * - FLOE_SPREAD_QUARTERS, from 1.5 x 2^a (three) to 2^(a+1) (one address
 *   bit more, one remainder bit less): the keys of bucket i of the three
 *   thirds go to buckets 4i .. 4i + 3, by the top two bits of r = old
 *   remainder x 3 + third, their remainder the rest of r.
 * Two or three old buckets' keys meet in each new one, which may get more
 * keys than it has slots (the rest go deeper).  0 for neither. */
#define FLOE_SPREAD_THIRDS   3
#define FLOE_SPREAD_QUARTERS 4
FLOE_HD static inline int floe_geometry_spreads(const floe_geometry *from, const floe_geometry *to)
{
    const floe_level *a = &from->level[0], *b = &to->level[0];
    if (b->slots != a->slots || a->addr_bits < 1)
        return 0;
    if (!a->three && b->three && b->addr_bits == a->addr_bits && b->rem_bits == a->rem_bits)
        return FLOE_SPREAD_THIRDS;
    if (a->three && !b->three && b->addr_bits == a->addr_bits + 1 && b->rem_bits + 1 == a->rem_bits)
        return FLOE_SPREAD_QUARTERS;
    return 0;
}

/* The growths that move the primary level a group of buckets at a time
 * (FLOE_SPREAD_HALVES: floe_geometry_splits; else floe_geometry_spreads),
 * the same rule for both engines: group gi's old buckets old[0 .. *nold)
 * and new ones nw[0 .. *nnew), and where a key of the group's k-th old
 * bucket ob with remainder rem goes (floe_spread_dest: the index of its
 * new bucket in nw, its new remainder in *nrem).  A group is the buckets
 * of one value of the permutation's top bits that both sizes share (the
 * third's excepted), so its keys belong to its new buckets alone. */
#define FLOE_SPREAD_HALVES  2
#define FLOE_SPREAD_OLD_MAX 3
#define FLOE_SPREAD_NEW_MAX 4
FLOE_HD static inline int floe_geometry_moves_by_group(const floe_geometry *from, const floe_geometry *to)
{
    return floe_geometry_splits(from, to) ? FLOE_SPREAD_HALVES : floe_geometry_spreads(from, to);
}

/* Old primary buckets a group has (1, 2 or 3). */
FLOE_HD static inline unsigned floe_spread_olds(int shape)
{
    return shape == FLOE_SPREAD_THIRDS ? 2 : shape == FLOE_SPREAD_QUARTERS ? 3 : 1;
}

FLOE_HD static inline void floe_spread_group(const floe_geometry *from, int shape, uint64_t gi, uint64_t *old,
                                             unsigned *nold, uint64_t *nw, unsigned *nnew)
{
    const uint32_t a = from->level[0].addr_bits; /* at least 1 where a spread is the shape */
    const uint64_t third = shape == FLOE_SPREAD_HALVES ? 0 : (uint64_t)1 << (a - 1);
    switch (shape) {
    case FLOE_SPREAD_THIRDS:
        *nold = 2, *nnew = 3;
        old[0] = 2 * gi, old[1] = 2 * gi + 1;
        for (unsigned t = 0; t < 3; t++)
            nw[t] = t * third + gi;
        break;
    case FLOE_SPREAD_QUARTERS:
        *nold = 3, *nnew = 4;
        for (unsigned t = 0; t < 3; t++)
            old[t] = t * third + gi;
        for (unsigned j = 0; j < 4; j++)
            nw[j] = 4 * gi + j;
        break;
    default:
        *nold = 1, *nnew = 2;
        old[0] = gi;
        nw[0] = 2 * gi, nw[1] = 2 * gi + 1;
    }
}

FLOE_HD static inline unsigned floe_spread_dest(const floe_geometry *from, const floe_geometry *to, int shape,
                                                unsigned k, uint64_t ob, uint64_t rem, uint64_t *nrem)
{
    const floe_level *a = &from->level[0], *b = &to->level[0];
    switch (shape) {
    case FLOE_SPREAD_THIRDS: {
        const uint64_t r = (ob & 1) << a->rem_bits | rem;
        *nrem = r / 3;
        return (unsigned)(r % 3);
    }
    case FLOE_SPREAD_QUARTERS: {
        const uint64_t r = rem * 3 + k;
        *nrem = r & floe_mask_bits(b->rem_bits);
        return (unsigned)(r >> b->rem_bits);
    }
    default:
        *nrem = rem & floe_mask_bits(b->rem_bits);
        return (unsigned)((rem >> b->rem_bits) & 1);
    }
}

/* Splits an id into level, bucket and slot; returns 0 if the id is out of range. */
FLOE_HD static inline int floe_slot_split(const floe_geometry *g, uint64_t id, uint32_t *l, uint64_t *bucket,
                                          uint32_t *slot)
{
    if (id >= g->total_slots)
        return 0;
    uint32_t k = FLOE_LEVELS - 1;
    while (id < g->level[k].first_id)
        k--;
    uint64_t off = id - g->level[k].first_id;
    *l = k;
    *bucket = off / g->level[k].slots;
    *slot = (uint32_t)(off % g->level[k].slots);
    return 1;
}

#ifdef __cplusplus
}
#endif

#endif /* FLOE_TABLES_LAYOUT_H */
