/*
 * tree_layout.h - the one definition of the TREE table layout (tree-
 * compressed vectors, notes/tree-compression.md), shared by the CPU engine
 * (tables/tree.c), the GPU engine (gpu/tree_gpu.cu) and the table file.
 *
 * A vector of N 32-bit words (2 <= N <= 256) is stored as a binary tree built
 * bottom-up, level by level: the items of a level are paired neighbour with
 * neighbour, each pair becomes a node of the node table and the node's slot
 * index (its reference) becomes an item of the next level; an odd last item
 * is carried up unchanged, so odd lengths cost no extra level.  When two items
 * remain they are the root pair, which is not a node: it is the key of a
 * compact iceberg SET (layout.h), the root table, and its root slot id is the
 * vector's id.  A vector costs at most N - 2 nodes plus one root slot, and
 * vectors that share subtrees share their nodes.
 *
 * Node table: buckets of 4 64-bit slots (one 32-byte sector), 2^bucket_bits
 * of them, or 1.5 times that (a "three" table: 3 << (bucket_bits - 1)), so
 * that a table grows in steps of 1.5 and 4/3 and a grown table is never
 * less than 1 / 2 full where it grew at fill 3 / 4 or more.  A node (left |
 * right << 32) goes through a seeded 64-bit bijection x; the high xor_bits
 * of x (bucket_bits, less one in a three table) pick a bucket of its part,
 * the low 64 - xor_bits are the rest.  In a three table the rest splits
 * once more: rest % 3 picks which of the three parts, rest / 3 is the
 * remainder; otherwise the rest is the remainder.  Probe c (0 .. choices - 1)
 * looks in bucket home ^ probe_xor[c], inside the home's part, and stores
 * (remainder << tag_bits) | (c + 1): never 0 (EMPTY), and with the slot's
 * position it gives the node back, so a slot holds any 64-bit node although
 * the node itself may be 0.  A slot is claimed with one 64-bit CAS from EMPTY
 * and never changes again; nodes never move, so references stay valid for
 * the table's life.  As in the iceberg table, a node is only written into the
 * first EMPTY slot of a bucket, so a lookup stops at the first EMPTY slot and
 * concurrent find-or-puts of one node agree on one slot.
 *
 * Node layout versions (the table file's layout version): up to 2, 15
 * choices with 4-bit tags and power-of-two tables, which fill to 0.75-0.85
 * before a node finds no room; from 3, 31 choices with 5-bit tags (about
 * 0.9, where max_fill grows a table anyway) and three tables.  A table keeps
 * its node layout until its node table grows.
 */
#ifndef FLOE_TABLES_TREE_LAYOUT_H
#define FLOE_TABLES_TREE_LAYOUT_H

#include <stdint.h>

#include "layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/* FLOE_TREE_MIN_WORDS and FLOE_TREE_MAX_WORDS are the protocol's: floe_wire.h. */
#define FLOE_NODE_BUCKET       4u /* slots per node bucket: 32 bytes */
#define FLOE_NODE_BUCKET_SHIFT 2u
#define FLOE_NODE_TAG_BITS     5u  /* node layout 3: 31 probes per node */
#define FLOE_NODE_OLD_TAG_BITS 4u  /* node layouts 1 and 2: 15 */
#define FLOE_NODE_MAX_CHOICES  31u /* (1 << FLOE_NODE_TAG_BITS) - 1 */
#define FLOE_NODE_LAYOUT       3u  /* the first layout version with 5-bit tags and three tables */
#define FLOE_NODE_MIN_BITS     7u  /* 32 buckets: bucket_bits >= the tag bits */
#define FLOE_NODE_MAX_BITS     32u /* references are 32-bit */
#define FLOE_NODE_EMPTY        0ull

typedef struct floe_tree_geometry {
    uint32_t words;       /* N */
    uint32_t node_bits;   /* log2 of the node slots, rounded down */
    uint32_t three;       /* 1: 1.5 * 2^node_bits slots */
    uint32_t bucket_bits; /* node_bits - 2 */
    uint32_t xor_bits;    /* bucket_bits - three: the bits a probe offset spans */
    uint32_t tag_bits;    /* FLOE_NODE_TAG_BITS, or FLOE_NODE_OLD_TAG_BITS in an older table */
    uint32_t choices;     /* (1 << tag_bits) - 1 */
    uint32_t ref_bits;    /* node_bits + three: the bits of a reference */
    uint32_t left_bits;   /* bits of the root's left half: 32 for a word, ref_bits for a reference */
    uint32_t right_bits;
    uint32_t root_key_bits; /* left_bits + right_bits: the root table's key_bits */
    uint32_t pad;
    uint64_t node_slots;
    floe_perm perm; /* on 64 bits */
    uint64_t probe_xor[FLOE_NODE_MAX_CHOICES];
} floe_tree_geometry;

/* Node slots of a table of 2^node_bits slots, or 1.5 times that with three. */
FLOE_HD static inline uint64_t floe_node_slots_for(uint32_t node_bits, uint32_t three)
{
    return three ? (uint64_t)3 << (node_bits - 1) : (uint64_t)1 << node_bits;
}

/* Whether a node table of node_bits (and three) can be laid out with
 * tag_bits: the remainder and the tag fill 64 bits at most, and every
 * probe has its own offset. */
FLOE_HD static inline int floe_node_size_ok(uint32_t node_bits, uint32_t three, uint32_t tag_bits)
{
    if (node_bits > FLOE_NODE_MAX_BITS || (three && (tag_bits < FLOE_NODE_TAG_BITS || node_bits >= FLOE_NODE_MAX_BITS)))
        return 0;
    return node_bits >= tag_bits + FLOE_NODE_BUCKET_SHIFT + three;
}

/* A TREE file's layout version: its nodes' (tag_bits) and its root table's
 * (first_fill and three, layout.h; only a table of today's nodes has a
 * root table of three). */
FLOE_HD static inline uint32_t floe_tree_layout_version(uint32_t tag_bits, uint32_t first_fill, uint32_t three)
{
    return tag_bits >= FLOE_NODE_TAG_BITS ? FLOE_NODE_LAYOUT : floe_layout_version(first_fill, three);
}

/* The node layout of a table file's layout version: its tag bits. */
FLOE_HD static inline uint32_t floe_node_tag_bits_of(uint32_t layout_version)
{
    return layout_version >= FLOE_NODE_LAYOUT ? FLOE_NODE_TAG_BITS : FLOE_NODE_OLD_TAG_BITS;
}

/* Items at the level above one of m items. */
FLOE_HD static inline uint32_t floe_tree_up(uint32_t m)
{
    return (m + 1) / 2;
}

/* Fills g for vectors of `words` words and a node table of 2^node_bits
 * slots, 1.5 times that with three (floe_node_size_ok with tag_bits), with
 * the permutation and probe offsets derived from seed. */
FLOE_HD static inline void floe_tree_geometry_init(floe_tree_geometry *g, uint32_t words, uint32_t node_bits,
                                                   uint32_t three, uint32_t tag_bits, uint64_t seed)
{
    g->words = words;
    g->node_bits = node_bits;
    g->three = three;
    g->bucket_bits = node_bits - FLOE_NODE_BUCKET_SHIFT;
    g->xor_bits = g->bucket_bits - three;
    g->tag_bits = tag_bits;
    g->choices = (1u << tag_bits) - 1;
    g->ref_bits = node_bits + three;
    g->pad = 0;
    g->node_slots = floe_node_slots_for(node_bits, three);
    /* The root's left half is a reference unless the vector is one pair; the
     * right half is the last word carried all the way up when every level
     * above the leaves has an odd number of items (N = 2^k + 1), else a
     * reference. */
    int right_is_word = 1;
    for (uint32_t m = words; m > 2; m = floe_tree_up(m))
        right_is_word &= (int)(m & 1);
    g->left_bits = words == 2 ? 32u : g->ref_bits;
    g->right_bits = right_is_word ? 32u : g->ref_bits;
    g->root_key_bits = g->left_bits + g->right_bits;
    floe_perm_init(&g->perm, 64, seed, 101);
    uint64_t st = seed ^ 0x5851F42D4C957F2Dull;
    for (uint32_t c = 0; c < FLOE_NODE_MAX_CHOICES; c++)
        g->probe_xor[c] = 0;
    for (uint32_t c = 1; c < g->choices; c++) {
        /* Distinct offsets, so a node's probes visit as many different buckets. */
        uint64_t x;
        int again;
        do {
            x = floe_splitmix64(&st) & floe_mask_bits(g->xor_bits);
            again = 0;
            for (uint32_t k = 0; k < c; k++)
                again |= g->probe_xor[k] == x;
        } while (again);
        g->probe_xor[c] = x;
    }
}

/* ---- node slots ----------------------------------------------------------------- */

FLOE_HD static inline uint64_t floe_node_pack(uint32_t left, uint32_t right)
{
    return (uint64_t)left | ((uint64_t)right << 32);
}

/* Home bucket and remainder of a node. */
FLOE_HD static inline void floe_node_home(const floe_tree_geometry *g, uint64_t node, uint64_t *home, uint64_t *rem)
{
    const uint64_t x = floe_permute(&g->perm, node);
    const uint32_t low_bits = 64 - g->xor_bits;
    const uint64_t hi = x >> low_bits, lo = x & floe_mask_bits(low_bits);
    if (g->three) {
        const uint64_t q = lo / 3;
        *home = ((lo - 3 * q) << g->xor_bits) | hi;
        *rem = q;
    } else {
        *home = hi;
        *rem = lo;
    }
}

/* Bucket of probe c and the value probe c stores. */
FLOE_HD static inline uint64_t floe_node_bucket(const floe_tree_geometry *g, uint64_t home, uint32_t c)
{
    return home ^ g->probe_xor[c];
}

FLOE_HD static inline uint64_t floe_node_stored(const floe_tree_geometry *g, uint64_t rem, uint32_t c)
{
    return (rem << g->tag_bits) | (uint64_t)(c + 1);
}

/* Whether v could be a stored node at all (a valid probe tag). */
FLOE_HD static inline int floe_node_valid(const floe_tree_geometry *g, uint64_t v)
{
    uint32_t tag = (uint32_t)(v & floe_mask_bits(g->tag_bits));
    return tag >= 1 && tag <= g->choices;
}

/* The node held by slot `ref` whose stored value is v (floe_node_valid). */
FLOE_HD static inline uint64_t floe_node_decode(const floe_tree_geometry *g, uint64_t ref, uint64_t v)
{
    const uint32_t c = (uint32_t)(v & floe_mask_bits(g->tag_bits)) - 1;
    const uint64_t home = (ref >> FLOE_NODE_BUCKET_SHIFT) ^ g->probe_xor[c], rem = v >> g->tag_bits;
    const uint32_t low_bits = 64 - g->xor_bits;
    uint64_t x;
    if (g->three)
        x = ((home & floe_mask_bits(g->xor_bits)) << low_bits) | ((rem * 3 + (home >> g->xor_bits)) & floe_mask_bits(low_bits));
    else
        x = (home << low_bits) | rem;
    return floe_unpermute(&g->perm, x);
}

/* ---- roots ------------------------------------------------------------------------ */

FLOE_HD static inline uint64_t floe_tree_root_key(const floe_tree_geometry *g, uint32_t left, uint32_t right)
{
    return ((uint64_t)left << g->right_bits) | right;
}

FLOE_HD static inline void floe_tree_root_split(const floe_tree_geometry *g, uint64_t key, uint32_t *left,
                                                uint32_t *right)
{
    *right = (uint32_t)(key & floe_mask_bits(g->right_bits));
    *left = (uint32_t)(key >> g->right_bits);
}

/* Rebuilds the vector under a root pair into out[0..words): the bottom-up
 * pairing run backwards, in place, reading nodes from the node array.
 * Returns 0 if a reference is out of range or names an EMPTY slot (a damaged
 * table), 1 otherwise. */
FLOE_HD static inline int floe_tree_unfold(const floe_tree_geometry *g, const uint64_t *nodes, uint32_t left,
                                           uint32_t right, uint32_t *out)
{
    uint32_t counts[10]; /* items per level: 256 words -> 9 levels of pairs */
    uint32_t levels = 0;
    for (uint32_t m = g->words; m > 2; m = floe_tree_up(m))
        counts[levels++] = m;
    out[0] = left;
    out[1] = right;
    uint32_t m_up = 2;
    while (levels > 0) {
        uint32_t m = counts[--levels];
        /* Item j of the level above expands into items 2j, 2j+1; descending
         * j writes only at or above positions still to be read. */
        for (uint32_t j = m_up; j-- > 0;) {
            if ((m & 1) && j == m_up - 1) {
                out[m - 1] = out[j];
                continue;
            }
            uint64_t ref = out[j];
            if (ref >= g->node_slots)
                return 0;
            uint64_t v = nodes[ref];
            if (!floe_node_valid(g, v))
                return 0;
            uint64_t node = floe_node_decode(g, ref, v);
            out[2 * j] = (uint32_t)node;
            out[2 * j + 1] = (uint32_t)(node >> 32);
        }
        m_up = m;
    }
    return 1;
}

#ifdef __cplusplus
}
#endif

#endif /* FLOE_TABLES_TREE_LAYOUT_H */
