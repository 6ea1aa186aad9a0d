/*
 * model_hanoi.c - Towers of Hanoi with 3 pegs and N discs: word i is the peg
 * (0..2) of disc i, disc 0 the smallest.  A move takes the top (smallest)
 * disc of one peg onto another whose top is larger, or onto an empty peg.
 * Every one of the 3^N placements is reachable from all discs on peg 0.
 */
#include <stdio.h>

#include "model.h"

static void initial(const mc_model *m, unsigned which, uint32_t *s) /* one initial state: which is 0 */
{
    for (unsigned i = 0; i < m->words; i++)
        s[i] = 0;
}

static unsigned next(const mc_model *m, const uint32_t *s, uint32_t *out)
{
    const unsigned n = m->words;
    unsigned top[3] = {n, n, n}; /* smallest disc on each peg; n: empty */
    for (unsigned i = n; i-- > 0;)
        top[s[i]] = i;
    unsigned k = 0;
    for (unsigned from = 0; from < 3; from++) {
        if (top[from] == n)
            continue;
        for (unsigned to = 0; to < 3; to++) {
            if (to == from || top[to] < top[from])
                continue;
            uint32_t *t = out + k++ * n;
            for (unsigned i = 0; i < n; i++)
                t[i] = s[i];
            t[top[from]] = to;
        }
    }
    return k;
}

int mc_hanoi_init(mc_model *m, int discs, char *err, size_t errlen)
{
    if (discs < 1 || discs > MC_MAX_WORDS) {
        snprintf(err, errlen, "hanoi:%d: N must be 1..%d", discs, MC_MAX_WORDS);
        return -1;
    }
    m->p[0] = discs;
    m->words = (unsigned)discs;
    m->bits = 2;
    m->expect = 0;
    if (discs <= 40) { /* 3^N while it fits */
        uint64_t e = 1;
        for (int i = 0; i < discs; i++)
            e *= 3;
        m->expect = e;
    }
    m->initials = 1;
    m->initial = initial;
    m->next = next;
    return 0;
}
