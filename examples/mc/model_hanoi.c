/*
 * model_hanoi.c - Towers of Hanoi with 3 pegs and N discs: word i is the peg
 * (0..2) of disc i, disc 0 the smallest.  A move takes the top (smallest)
 * disc of one peg onto another whose top is larger, or onto an empty peg
 * (action: from * 3 + to).  Every one of the 3^N placements is reachable
 * from all discs on peg 0.  A plugin (floe_mc_model.h) built in.
 */
#include <stdio.h>
#include <stdlib.h>

#include "model.h"

static void initial(const floe_mc_plugin *p, unsigned which, uint32_t *s) /* one initial state: which is 0 */
{
    for (unsigned i = 0; i < p->words; i++)
        s[i] = 0;
}

static void next(const floe_mc_plugin *p, const uint32_t *s, floe_mc_emit *emit, void *arg)
{
    const unsigned n = p->words;
    unsigned top[3] = {n, n, n}; /* smallest disc on each peg; n: empty */
    for (unsigned i = n; i-- > 0;)
        top[s[i]] = i;
    uint32_t t[MC_MAX_WORDS];
    for (unsigned from = 0; from < 3; from++) {
        if (top[from] == n)
            continue;
        for (unsigned to = 0; to < 3; to++) {
            if (to == from || top[to] < top[from])
                continue;
            for (unsigned i = 0; i < n; i++)
                t[i] = s[i];
            t[top[from]] = to;
            emit(arg, t, from * 3 + to);
        }
    }
}

int mc_hanoi_init(mc_model *m, int discs, char *err, size_t errlen)
{
    if (discs < 1 || discs > MC_MAX_WORDS) {
        snprintf(err, errlen, "hanoi:%d: N must be 1..%d", discs, MC_MAX_WORDS);
        return -1;
    }
    floe_mc_plugin *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    *p = (floe_mc_plugin){
        .abi = FLOE_MC_ABI, .words = (unsigned)discs, .bits = 2, .initial_states = 1, .initial = initial, .next = next};
    if (discs <= 40) { /* 3^N while it fits */
        p->expect = 1;
        for (int i = 0; i < discs; i++)
            p->expect *= 3;
    }
    return mc_model_from_plugin(p, p, m, err, errlen);
}
