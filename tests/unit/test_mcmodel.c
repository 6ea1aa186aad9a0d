/*
 * test_mcmodel.c - floe-mc's models (examples/mc/): packing round-trips,
 * the packed next function against the plain one along random walks, and
 * the parser's refusals.
 */
#include <string.h>

#include "../../examples/mc/model.h"
#include "testutil.h"

START_TEST(pack_roundtrip_and_packed_next)
{
    const char *specs[] = {"puzzle:2x2", "puzzle:2x3", "puzzle:2x4", "puzzle:3x3",
                           "puzzle:3x4", "puzzle:4x4", "hanoi:9",    "phils:7"};
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        mc_model m;
        char err[256];
        ck_assert_msg(mc_model_parse(specs[k], &m, err, sizeof err) == 0, "%s: %s", specs[k], err);
        ck_assert(mc_packs(&m));
        uint32_t s[MC_MAX_WORDS], back[MC_MAX_WORDS], succ[MC_MAX_SUCC * MC_MAX_WORDS];
        uint64_t psucc[MC_MAX_SUCC], x = 0x2545F4914F6CDD1Dull + k;
        m.initial(&m, 0, s);
        for (int step = 0; step < 20000; step++) {
            const uint64_t key = mc_pack(&m, s);
            mc_unpack(&m, key, back);
            ck_assert(memcmp(s, back, m.words * 4) == 0);
            const unsigned n = m.next(&m, s, succ);
            if (m.next_packed) {
                ck_assert_uint_eq(m.next_packed(&m, key, psucc), n);
                for (unsigned j = 0; j < n; j++)
                    ck_assert_msg(psucc[j] == mc_pack(&m, succ + j * m.words), "%s step %d successor %u", specs[k],
                                  step, j);
            }
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            if (n == 0) /* a deadlock (the philosophers all holding their left fork): start over */
                m.initial(&m, 0, s);
            else
                memcpy(s, succ + (x % n) * m.words, m.words * 4);
        }
        mc_model_unload(&m);
    }
}
END_TEST

START_TEST(widths_and_closed_forms)
{
    mc_model m;
    char err[256];
    ck_assert_int_eq(mc_model_parse("puzzle:3x4", &m, err, sizeof err), 0);
    ck_assert_uint_eq(m.words, 12);
    ck_assert_uint_eq(mc_key_bits(&m), 48);
    ck_assert_uint_eq(m.expect, 239500800ull); /* 12!/2 */
    mc_model_unload(&m);
    ck_assert_int_eq(mc_model_parse("hanoi:20", &m, err, sizeof err), 0);
    ck_assert_uint_eq(m.expect, 3486784401ull);
    mc_model_unload(&m);
    ck_assert_int_eq(mc_model_parse("phils:40", &m, err, sizeof err), 0);
    ck_assert(!mc_packs(&m)); /* 80 bits: a TREE */
    ck_assert_uint_eq(m.expect, 0);
    mc_model_unload(&m);
    ck_assert_int_eq(mc_model_parse("puzzle:5x5", &m, err, sizeof err), 0);
    ck_assert(!mc_packs(&m));
    ck_assert_ptr_null(m.next_packed);
    mc_model_unload(&m);
    const char *bad[] = {"puzzle:1x4", "puzzle:3", "puzzle:3x", "puzzle:x3", "puzzle:3x4x5", "puzzle:-2x3", "hanoi:0",
                         "hanoi:",     "hanoi:3a", "phils:1",   "phils:65",  "dining:5",     "puzzle",      ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        ck_assert_msg(mc_model_parse(bad[i], &m, err, sizeof err) != 0, "'%s' accepted", bad[i]);
        ck_assert_msg(err[0] != '\0', "'%s': no message", bad[i]);
    }
}
END_TEST

Suite *mcmodel_suite(void)
{
    Suite *s = suite_create("mcmodel");
    TCase *tc = tcase_create("mcmodel");
    tcase_add_test(tc, pack_roundtrip_and_packed_next);
    tcase_add_test(tc, widths_and_closed_forms);
    suite_add_tcase(s, tc);
    return s;
}
