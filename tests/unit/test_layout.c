/*
 * test_layout.c - the shared layout: permutations are bijections with exact
 * inverses, rows encode and decode, keys split and join, ids round-trip.
 */
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "testutil.h"
#include "tree_layout.h"

static const uint64_t SEEDS[] = {1, 0x123456789ABCDEFull, 0xFFFFFFFFFFFFFFFFull};

START_TEST(perm_exhaustive_small_widths)
{
    /* Every width up to 20: the image of all 2^w inputs is all of 2^w, and
     * the inverse maps each output back. */
    for (uint32_t bits = 1; bits <= 20; bits++) {
        for (size_t s = 0; s < sizeof SEEDS / sizeof SEEDS[0]; s++) {
            floe_perm p;
            floe_perm_init(&p, bits, SEEDS[s], (uint32_t)s);
            uint64_t n = (uint64_t)1 << bits;
            uint8_t *seen = calloc(n, 1);
            ck_assert_ptr_nonnull(seen);
            for (uint64_t x = 0; x < n; x++) {
                uint64_t y = floe_permute(&p, x);
                ck_assert_msg(y < n, "bits %u: %llu -> %llu out of range", bits, (unsigned long long)x,
                              (unsigned long long)y);
                ck_assert_msg(!seen[y], "bits %u: collision at %llu", bits, (unsigned long long)y);
                seen[y] = 1;
                ck_assert_uint_eq(floe_unpermute(&p, y), x);
            }
            free(seen);
        }
    }
}
END_TEST

START_TEST(perm_random_large_widths)
{
    uint64_t r = 42;
    for (uint32_t bits = 21; bits <= 64; bits++) {
        for (size_t s = 0; s < sizeof SEEDS / sizeof SEEDS[0]; s++) {
            floe_perm p;
            floe_perm_init(&p, bits, SEEDS[s], 3);
            uint64_t mask = floe_mask_bits(bits);
            for (int i = 0; i < 20000; i++) {
                uint64_t x = rng_next(&r) & mask;
                uint64_t y = floe_permute(&p, x);
                ck_assert_uint_le(y, mask);
                ck_assert_uint_eq(floe_unpermute(&p, y), x);
                ck_assert_uint_eq(floe_permute(&p, floe_unpermute(&p, x)), x);
            }
            /* the edges of the domain */
            ck_assert_uint_eq(floe_unpermute(&p, floe_permute(&p, 0)), 0);
            ck_assert_uint_eq(floe_unpermute(&p, floe_permute(&p, mask)), mask);
        }
    }
}
END_TEST

START_TEST(perm_mixes_sequential_keys)
{
    /* Sequential keys must spread over buckets: with 2^10 buckets and 2^16
     * keys, no bucket should get more than twice its share. */
    floe_perm p;
    floe_perm_init(&p, 40, 7, 0);
    static uint32_t count[1024];
    memset(count, 0, sizeof count);
    for (uint64_t k = 0; k < 65536; k++)
        count[floe_permute(&p, k) >> 30]++;
    for (int b = 0; b < 1024; b++)
        ck_assert_msg(count[b] > 16 && count[b] < 128, "bucket %d got %u of 65536 sequential keys", b, count[b]);
}
END_TEST

START_TEST(geometry_rows_fit)
{
    for (uint32_t kb = 1; kb <= 64; kb++) {
        for (uint32_t a = floe_min_addr_bits(kb); a <= floe_max_addr_bits(kb) && a <= 30; a++) {
            floe_geometry g;
            floe_geometry_init(&g, kb, a, 0, 9);
            for (uint32_t l = 0; l < FLOE_LEVELS; l++) {
                const floe_level *lv = &g.level[l];
                ck_assert_uint_eq(lv->addr_bits + lv->rem_bits, kb);
                ck_assert(lv->row_bits == 16 || lv->row_bits == 32 || lv->row_bits == 64);
                ck_assert_uint_le(lv->rem_bits + (l == 0 ? 1 : 2), lv->row_bits);
                ck_assert_uint_eq(lv->words * 64, lv->slots * lv->row_bits);
                /* the largest stored row stays below BUSY and TOMBSTONE */
                uint64_t top = floe_row_encode(l, floe_mask_bits(lv->rem_bits), lv->choices - 1);
                ck_assert(floe_row_is_key(top, lv->row_bits));
                ck_assert_uint_lt(top, floe_row_busy(lv->row_bits));
                ck_assert(!floe_row_is_key(floe_row_busy(lv->row_bits), lv->row_bits));
                ck_assert(!floe_row_is_key(floe_row_tombstone(lv->row_bits), lv->row_bits));
                ck_assert(!floe_row_is_key(FLOE_ROW_EMPTY, lv->row_bits));
                ck_assert(floe_row_is_key(floe_row_encode(l, 0, 0), lv->row_bits));
            }
            ck_assert_uint_eq(g.level[1].first_id, floe_level_slots(&g.level[0]));
            /* 1.5 times the slots, level by level where a level has an address bit, in rows as wide */
            if (a >= 1) {
                floe_geometry g3;
                floe_geometry_init(&g3, kb, a, 1, 9);
                for (uint32_t l = 0; l < FLOE_LEVELS; l++) {
                    ck_assert_uint_eq(g3.level[l].row_bits, g.level[l].row_bits);
                    ck_assert_uint_eq(g3.level[l].three, g.level[l].addr_bits >= 1);
                    ck_assert_uint_eq(floe_level_slots(&g3.level[l]) * 2,
                                      floe_level_slots(&g.level[l]) * (g3.level[l].three ? 3 : 2));
                }
                ck_assert_uint_eq(g3.level[2].first_id + floe_level_slots(&g3.level[2]), g3.total_slots);
            }
        }
    }
}
END_TEST

START_TEST(geometry_k1_shape)
{
    /* The K1 table: 2^30 primary slots, 40-bit keys -> 16-bit primary rows and
     * 32-bit secondary rows (the reference library's faulty configuration). */
    floe_geometry g;
    floe_geometry_init(&g, 40, 25, 0, 1);
    ck_assert_uint_eq(floe_level_slots(&g.level[0]), (uint64_t)1 << 30);
    ck_assert_uint_eq(floe_level_slots(&g.level[1]), (uint64_t)1 << 27);
    ck_assert_uint_eq(floe_level_slots(&g.level[2]), (uint64_t)1 << 22);
    ck_assert_uint_eq(g.level[0].row_bits, 16);
    ck_assert_uint_eq(g.level[1].row_bits, 32);
    ck_assert_uint_eq(g.level[0].words * 8, 64); /* one cache line per primary bucket */
}
END_TEST

/* Every width, in tables of 2^a and of 1.5 x 2^a primary buckets (the
 * smallest and largest a too): a key's bucket is in range and its key comes
 * back from bucket and remainder. */
START_TEST(split_join_roundtrip)
{
    uint64_t r = 5;
    const uint32_t widths[] = {1, 2, 7, 16, 31, 40, 52, 63, 64};
    for (size_t w = 0; w < 3 * 2 * sizeof widths / sizeof widths[0]; w++) {
        const uint32_t kb = widths[w / 6], three = w & 1, size = w / 2 % 3;
        const uint32_t lo = floe_min_addr_bits(kb) > three ? floe_min_addr_bits(kb) : three;
        const uint32_t a = size == 0 ? lo : size == 1 ? floe_max_addr_bits(kb) : floe_clamp_u32(12, lo, floe_max_addr_bits(kb));
        if (a < lo || a > floe_max_addr_bits(kb))
            continue;
        floe_geometry g;
        floe_geometry_init(&g, kb, a, three, 77);
        ck_assert_uint_eq(g.level[0].three, three);
        ck_assert_uint_eq(floe_level_buckets(&g.level[0]), three ? 3ull << (a - 1) : 1ull << a);
        for (int i = 0; i < 2000; i++) {
            uint64_t key = rng_next(&r) & floe_mask_bits(kb);
            for (uint32_t l = 0; l < FLOE_LEVELS; l++) {
                for (uint32_t c = 0; c < g.level[l].choices; c++) {
                    uint64_t b, rem;
                    floe_split(&g, l, c, key, &b, &rem);
                    ck_assert_uint_lt(b, floe_level_buckets(&g.level[l]));
                    ck_assert_uint_le(rem, floe_mask_bits(g.level[l].rem_bits));
                    uint64_t row = floe_row_encode(l, rem, c);
                    ck_assert_uint_eq(floe_row_choice(l, row), c);
                    ck_assert_uint_eq(floe_row_remainder(l, row), rem);
                    ck_assert_uint_eq(floe_join(&g, l, c, b, rem), key);
                }
            }
        }
    }
}
END_TEST

START_TEST(rows_pack_into_words)
{
    const uint32_t widths[] = {16, 32, 64};
    for (size_t w = 0; w < 3; w++) {
        uint32_t rb = widths[w];
        floe_level lv = {.row_bits = rb, .slots = 32, .words = 32 * rb / 64};
        uint64_t words[32];
        memset(words, 0, sizeof words);
        ck_assert_uint_eq(floe_bucket_load(words, &lv), 0);
        for (uint32_t i = 0; i < 32; i++) {
            uint32_t wi = floe_row_word(rb, i);
            words[wi] = floe_row_put(words[wi], rb, i, i + 1);
        }
        for (uint32_t i = 0; i < 32; i++)
            ck_assert_uint_eq(floe_row_get(words, rb, i), i + 1);
        ck_assert_int_eq(floe_bucket_find(words, &lv, 17), 16);
        ck_assert_int_eq(floe_bucket_find(words, &lv, 99), -1);
        ck_assert_uint_eq(floe_bucket_load(words, &lv), 32);
        ck_assert(!floe_bucket_has_busy(words, &lv));
    }
}
END_TEST

START_TEST(first_candidate_until_first_fill)
{
    floe_geometry g;
    floe_geometry_init(&g, 40, 10, 0, 5);
    ck_assert_uint_eq(g.first_fill, FLOE_FIRST_FILL);
    ck_assert_uint_lt(FLOE_FIRST_FILL, FLOE_L1_SLOTS);
    /* below first_fill the first candidate takes the key, however full the second */
    for (uint32_t n0 = 0; n0 < FLOE_FIRST_FILL; n0++) {
        ck_assert(!floe_second_may_hold(&g, n0));
        for (uint32_t n1 = 0; n1 <= FLOE_L1_SLOTS; n1++)
            ck_assert_uint_eq(floe_pick_choice(&g, n0, n1), 0);
    }
    /* from there on the strictly less full, ties to the second */
    for (uint32_t n0 = FLOE_FIRST_FILL; n0 <= FLOE_L1_SLOTS; n0++) {
        ck_assert(floe_second_may_hold(&g, n0));
        for (uint32_t n1 = 0; n1 <= FLOE_L1_SLOTS; n1++)
            ck_assert_uint_eq(floe_pick_choice(&g, n0, n1), n0 < n1 ? 0u : 1u);
    }
    /* layout version 1: the less full rule alone, and the second always read */
    ck_assert_uint_eq(floe_layout_version(g.first_fill, 0), FLOE_LAYOUT_FIRST_FILL); /* an iceberg table of today */
    g.first_fill = floe_layout_first_fill(1);
    ck_assert_uint_eq(g.first_fill, 0);
    ck_assert_uint_eq(floe_layout_version(g.first_fill, 0), 1);
    ck_assert_uint_eq(floe_layout_version(FLOE_FIRST_FILL, 1), FLOE_LAYOUT_THREE);
    ck_assert_uint_eq(floe_layout_first_fill(FLOE_LAYOUT_VERSION), FLOE_FIRST_FILL);
    ck_assert_uint_eq(floe_pick_choice(&g, 3, 4), 0);
    ck_assert_uint_eq(floe_pick_choice(&g, 4, 4), 1);
    ck_assert_uint_eq(floe_pick_choice(&g, 5, 4), 1);
    ck_assert(floe_second_may_hold(&g, 0));
}
END_TEST

START_TEST(swar_search_matches_naive)
{
    /* The word-at-a-time search must agree with a slot-by-slot scan for
     * every width, including rows next to the searched value (borrows). */
    uint64_t r = 1;
    const uint32_t widths[] = {16, 32, 64};
    for (size_t w = 0; w < 3; w++) {
        uint32_t rb = widths[w];
        for (uint32_t slots = 16; slots <= 32; slots += 16) {
            floe_level lv = {.row_bits = rb, .slots = slots, .words = slots * rb / 64};
            for (int trial = 0; trial < 20000; trial++) {
                uint64_t words[32] = {0};
                uint64_t pool[4] = {rng_next(&r) & floe_row_mask(rb), 0, floe_row_busy(rb), 1};
                pool[1] = pool[0] + 1;
                for (uint32_t i = 0; i < slots; i++) {
                    uint64_t v = rng_below(&r, 3) ? pool[rng_below(&r, 4)] : (rng_next(&r) & floe_row_mask(rb));
                    uint32_t wi = floe_row_word(rb, i);
                    words[wi] = floe_row_put(words[wi], rb, i, v);
                }
                uint64_t probes[5] = {pool[0], pool[1], 0, floe_row_busy(rb), floe_row_tombstone(rb)};
                for (int p = 0; p < 5; p++) {
                    uint32_t naive = slots;
                    for (uint32_t i = 0; i < slots && naive == slots; i++)
                        if (floe_row_get(words, rb, i) == probes[p])
                            naive = i;
                    ck_assert_uint_eq(floe_bucket_first(words, &lv, probes[p]), naive);
                }
                ck_assert_uint_eq(floe_bucket_first_empty(words, &lv), floe_bucket_first(words, &lv, 0));
            }
        }
    }
}
END_TEST

START_TEST(slot_ids_roundtrip)
{
    floe_geometry g;
    floe_geometry_init(&g, 40, 10, 0, 3);
    uint64_t r = 11;
    for (int i = 0; i < 10000; i++) {
        uint32_t l = (uint32_t)rng_below(&r, FLOE_LEVELS);
        uint64_t b = rng_below(&r, floe_level_buckets(&g.level[l]));
        uint32_t s = (uint32_t)rng_below(&r, g.level[l].slots);
        uint64_t id = floe_slot_id(&g, l, b, s);
        uint32_t l2, s2;
        uint64_t b2;
        ck_assert(floe_slot_split(&g, id, &l2, &b2, &s2));
        ck_assert_uint_eq(l2, l);
        ck_assert_uint_eq(b2, b);
        ck_assert_uint_eq(s2, s);
    }
    uint32_t l;
    uint64_t b;
    uint32_t s;
    ck_assert(!floe_slot_split(&g, g.total_slots, &l, &b, &s));
}
END_TEST

/* Tree nodes: in every node table size and layout, a node's home bucket
 * and probes lie inside the table, the probes of one node are distinct
 * buckets, a stored value carries a valid tag, and the slot's position with
 * the stored value gives the node back; the parts of a three table are
 * about equally likely homes. */
START_TEST(node_slots_roundtrip)
{
    const struct {
        uint32_t bits, three, tag;
    } sizes[] = {{6, 0, 4}, {7, 0, 5}, {8, 1, 5}, {9, 1, 5}, {12, 0, 4}, {20, 1, 5}, {31, 1, 5}, {32, 0, 5}};
    uint64_t r = 99;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        ck_assert(floe_node_size_ok(sizes[k].bits, sizes[k].three, sizes[k].tag));
        floe_tree_geometry g;
        floe_tree_geometry_init(&g, 16, sizes[k].bits, sizes[k].three, sizes[k].tag, SEEDS[k % 3]);
        const uint64_t buckets = g.node_slots / FLOE_NODE_BUCKET;
        ck_assert_uint_eq(g.node_slots, sizes[k].three ? 3ull << (sizes[k].bits - 1) : 1ull << sizes[k].bits);
        ck_assert_uint_eq(g.choices, (1u << sizes[k].tag) - 1);
        uint64_t part[3] = {0, 0, 0};
        for (int i = 0; i < 20000; i++) {
            /* random nodes, and the extremes */
            const uint64_t node = i == 0 ? 0 : i == 1 ? ~0ull : floe_splitmix64(&r);
            uint64_t home, rem;
            floe_node_home(&g, node, &home, &rem);
            ck_assert_uint_lt(home, buckets);
            part[home / (buckets / 3 ? buckets / 3 : 1) % 3]++;
            for (uint32_t c = 0; c < g.choices; c++) {
                const uint64_t b = floe_node_bucket(&g, home, c), v = floe_node_stored(&g, rem, c);
                ck_assert_uint_lt(b, buckets);
                for (uint32_t d = 0; d < c; d++)
                    ck_assert_uint_ne(floe_node_bucket(&g, home, d), b);
                ck_assert(v != FLOE_NODE_EMPTY && floe_node_valid(&g, v));
                const uint64_t ref = b * FLOE_NODE_BUCKET + (uint64_t)(i & 3);
                ck_assert_uint_eq(floe_node_decode(&g, ref, v), node);
            }
        }
        if (g.three)
            for (int p = 0; p < 3; p++)
                ck_assert_msg(part[p] > 6000 && part[p] < 7400, "size %zu: part %d homes %llu of 20000", k, p,
                              (unsigned long long)part[p]);
    }
    /* sizes no layout has: the remainder and tag would pass 64 bits, too few offsets, refs past 32 bits */
    ck_assert(!floe_node_size_ok(6, 0, 5));
    ck_assert(!floe_node_size_ok(7, 1, 5));
    ck_assert(!floe_node_size_ok(8, 1, 4));
    ck_assert(!floe_node_size_ok(32, 1, 5));
    ck_assert(!floe_node_size_ok(33, 0, 5));
    /* the layout versions: files before the node layout read as 15 choices */
    ck_assert_uint_eq(floe_node_tag_bits_of(1), 4);
    ck_assert_uint_eq(floe_node_tag_bits_of(2), 4);
    ck_assert_uint_eq(floe_node_tag_bits_of(3), 5);
    ck_assert_uint_eq(floe_tree_layout_version(5, FLOE_FIRST_FILL, 0), FLOE_LAYOUT_VERSION);
    ck_assert_uint_eq(floe_tree_layout_version(5, FLOE_FIRST_FILL, 1), FLOE_LAYOUT_VERSION);
    ck_assert_uint_eq(floe_tree_layout_version(4, FLOE_FIRST_FILL, 0), 2);
    ck_assert_uint_eq(floe_tree_layout_version(4, 0, 0), 1);
}
END_TEST

/* The growths by a half and by a third (floe_geometry_spreads) move keys
 * as its comment says: each key's bucket and remainder in the new geometry,
 * worked out from its old ones by that rule, are floe_split's. */
START_TEST(spreads_move_keys_as_said)
{
    uint64_t r = 88172645463325252ull;
    for (uint32_t kb = 24; kb <= 64; kb += 8)
        for (uint32_t a = 10; a < 16; a++) {
            floe_geometry g2, g3, g4;
            floe_geometry_init(&g2, kb, a, 0, 77);
            floe_geometry_init(&g3, kb, a, 1, 77);
            floe_geometry_init(&g4, kb, a + 1, 0, 77);
            ck_assert_int_eq(floe_geometry_spreads(&g2, &g3), FLOE_SPREAD_THIRDS);
            ck_assert_int_eq(floe_geometry_spreads(&g3, &g4), FLOE_SPREAD_QUARTERS);
            ck_assert_int_eq(floe_geometry_spreads(&g2, &g4), 0); /* a split, not a spread */
            const uint64_t third = (uint64_t)1 << (a - 1);
            for (int k = 0; k < 20000; k++) {
                const uint64_t key = rng_next(&r) & floe_mask_bits(kb);
                uint64_t b2, r2, b3, r3, b4, r4;
                floe_split(&g2, 0, 0, key, &b2, &r2);
                floe_split(&g3, 0, 0, key, &b3, &r3);
                floe_split(&g4, 0, 0, key, &b4, &r4);
                /* thirds: old buckets 2i, 2i + 1 to bucket i of third x mod 3, x = (b & 1) r */
                const uint64_t x = (b2 & 1) << g2.level[0].rem_bits | r2;
                ck_assert_uint_eq(b3, (x % 3) * third + (b2 >> 1));
                ck_assert_uint_eq(r3, x / 3);
                /* quarters: bucket i of third t to bucket 4i + (y's top two bits), y = 3 r + t */
                const uint64_t t = b3 / third, i = b3 % third, y = r3 * 3 + t;
                ck_assert_uint_eq(b4, 4 * i + (y >> g4.level[0].rem_bits));
                ck_assert_uint_eq(r4, y & floe_mask_bits(g4.level[0].rem_bits));
            }
        }
}
END_TEST

/* The rule both engines move a group by (floe_spread_group, floe_spread_dest):
 * for a doubling, a half and a third, each key's old bucket is one of its
 * group's old buckets, and the new bucket and remainder the rule gives are
 * floe_split's in the new geometry. */
START_TEST(groups_move_keys_as_split_says)
{
    uint64_t r = 0x9E3779B97F4A7C15ull;
    for (uint32_t kb = 24; kb <= 64; kb += 20)
        for (uint32_t a = 10; a < 14; a++) {
            floe_geometry g[3];
            floe_geometry_init(&g[0], kb, a, 0, 91);
            floe_geometry_init(&g[1], kb, a, 1, 91);
            floe_geometry_init(&g[2], kb, a + 1, 0, 91);
            const floe_geometry *from[3] = {&g[0], &g[0], &g[1]}, *to[3] = {&g[2], &g[1], &g[2]};
            const int shapes[3] = {FLOE_SPREAD_HALVES, FLOE_SPREAD_THIRDS, FLOE_SPREAD_QUARTERS};
            for (int s = 0; s < 3; s++) {
                ck_assert_int_eq(floe_geometry_moves_by_group(from[s], to[s]), shapes[s]);
                const uint64_t groups = floe_level_buckets(&from[s]->level[0]) / floe_spread_olds(shapes[s]);
                for (int n = 0; n < 5000; n++) {
                    const uint64_t key = rng_next(&r) & floe_mask_bits(kb);
                    uint64_t ob, orem, nb, nrem;
                    floe_split(from[s], 0, 0, key, &ob, &orem);
                    floe_split(to[s], 0, 0, key, &nb, &nrem);
                    /* the group: the one whose old buckets hold ob (found by looking, not by the rule) */
                    uint64_t gi = UINT64_MAX, old[FLOE_SPREAD_OLD_MAX], nw[FLOE_SPREAD_NEW_MAX];
                    unsigned k = 0, nold = 0, nnew = 0;
                    const uint64_t guess[3] = {ob, ob >> 1, ob & floe_mask_bits(a - 1)};
                    floe_spread_group(from[s], shapes[s], guess[s], old, &nold, nw, &nnew);
                    for (unsigned j = 0; j < nold; j++)
                        if (old[j] == ob)
                            gi = guess[s], k = j;
                    ck_assert_uint_lt(gi, groups);
                    ck_assert_uint_eq(nold, floe_spread_olds(shapes[s]));
                    uint64_t rem2;
                    const unsigned d = floe_spread_dest(from[s], to[s], shapes[s], k, ob, orem, &rem2);
                    ck_assert_uint_lt(d, nnew);
                    ck_assert_uint_eq(nw[d], nb);
                    ck_assert_uint_eq(rem2, nrem);
                }
            }
        }
}
END_TEST

Suite *layout_suite(void)
{
    Suite *s = suite_create("layout");
    TCase *tc = tcase_create("layout");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, perm_exhaustive_small_widths);
    tcase_add_test(tc, groups_move_keys_as_split_says);
    tcase_add_test(tc, perm_random_large_widths);
    tcase_add_test(tc, perm_mixes_sequential_keys);
    tcase_add_test(tc, geometry_rows_fit);
    tcase_add_test(tc, geometry_k1_shape);
    tcase_add_test(tc, split_join_roundtrip);
    tcase_add_test(tc, spreads_move_keys_as_said);
    tcase_add_test(tc, rows_pack_into_words);
    tcase_add_test(tc, first_candidate_until_first_fill);
    tcase_add_test(tc, swar_search_matches_naive);
    tcase_add_test(tc, slot_ids_roundtrip);
    tcase_add_test(tc, node_slots_roundtrip);
    suite_add_tcase(s, tc);
    return s;
}
