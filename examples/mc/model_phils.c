/*
 * model_phils.c - N dining philosophers in a ring.  Word i is philosopher
 * i's state: THINK, LEFT (holds fork i) or EAT (holds forks i and i+1 mod
 * N).  THINK -> LEFT if fork i is free; LEFT -> EAT if fork i+1 mod N is
 * free; EAT -> THINK puts both down (action: the philosopher's number).  All
 * think at first; all holding the left fork is a deadlock.  No closed form:
 * tests count it with a plain search of their own.  A plugin
 * (floe_mc_model.h) built in.
 */
#include <stdio.h>
#include <stdlib.h>

#include "model.h"

enum { THINK, LEFT, EAT };

static void initial(const floe_mc_plugin *p, unsigned which, uint32_t *s) /* one initial state: which is 0 */
{
    for (unsigned i = 0; i < p->words; i++)
        s[i] = THINK;
}

/* Fork f is held by philosopher f (LEFT or EAT) or by f-1 (EAT). */
static int fork_free(const uint32_t *s, unsigned n, unsigned f)
{
    return s[f] == THINK && s[(f + n - 1) % n] != EAT;
}

static void next(const floe_mc_plugin *p, const uint32_t *s, floe_mc_emit *emit, void *arg)
{
    const unsigned n = p->words;
    uint32_t t[MC_MAX_WORDS];
    for (unsigned i = 0; i < n; i++) {
        uint32_t to;
        if (s[i] == THINK && fork_free(s, n, i))
            to = LEFT;
        else if (s[i] == LEFT && fork_free(s, n, (i + 1) % n))
            to = EAT;
        else if (s[i] == EAT)
            to = THINK;
        else
            continue;
        for (unsigned j = 0; j < n; j++)
            t[j] = s[j];
        t[i] = to;
        emit(arg, t, i);
    }
}

static void print(const floe_mc_plugin *p, const uint32_t *s, char *buf, size_t len)
{
    static const char *const WHAT[] = {"think", "left", "eat"};
    size_t at = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < p->words && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? " " : "", WHAT[s[i] % 3]);
}

int mc_phils_init(mc_model *m, int n, char *err, size_t errlen)
{
    if (n < 2 || n > MC_MAX_SUCC) {
        snprintf(err, errlen, "phils:%d: N must be 2..%d", n, MC_MAX_SUCC);
        return -1;
    }
    floe_mc_plugin *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    *p = (floe_mc_plugin){.abi = FLOE_MC_ABI,
                          .words = (unsigned)n,
                          .bits = 2,
                          .initial_states = 1,
                          .initial = initial,
                          .next = next,
                          .print = print};
    return mc_model_from_plugin(p, p, m, err, errlen);
}
