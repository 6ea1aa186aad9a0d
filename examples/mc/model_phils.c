/*
 * model_phils.c - N dining philosophers in a ring.  Word i is philosopher
 * i's state: THINK, LEFT (holds fork i) or EAT (holds forks i and i+1 mod
 * N).  THINK -> LEFT if fork i is free; LEFT -> EAT if fork i+1 mod N is
 * free; EAT -> THINK puts both down.  All think at first.  No closed form:
 * tests count it with a plain search of their own.
 */
#include <stdio.h>

#include "model.h"

enum { THINK, LEFT, EAT };

static void initial(const mc_model *m, unsigned which, uint32_t *s) /* one initial state: which is 0 */
{
    for (unsigned i = 0; i < m->words; i++)
        s[i] = THINK;
}

/* Fork f is held by philosopher f (LEFT or EAT) or by f-1 (EAT). */
static int fork_free(const uint32_t *s, unsigned n, unsigned f)
{
    return s[f] == THINK && s[(f + n - 1) % n] != EAT;
}

static unsigned next(const mc_model *m, const uint32_t *s, uint32_t *out)
{
    const unsigned n = m->words;
    unsigned k = 0;
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
        uint32_t *t = out + k++ * n;
        for (unsigned j = 0; j < n; j++)
            t[j] = s[j];
        t[i] = to;
    }
    return k;
}

int mc_phils_init(mc_model *m, int n, char *err, size_t errlen)
{
    if (n < 2 || n > MC_MAX_SUCC) {
        snprintf(err, errlen, "phils:%d: N must be 2..%d", n, MC_MAX_SUCC);
        return -1;
    }
    m->p[0] = n;
    m->words = (unsigned)n;
    m->bits = 2;
    m->expect = 0;
    m->initials = 1;
    m->initial = initial;
    m->next = next;
    return 0;
}
