/*
 * peterson.c - Peterson's filter lock for N processes (2..16), a floe-mc
 * model written as a plugin (floe_mc_model.h):
 *
 *   for L = 1 .. N-1:                      pc 1: level[i] = L written
 *       level[i] = L; victim[L] = i        pc 2: victim[L] = i written,
 *       wait while victim[L] == i and            waiting at L
 *            some k != i has level[k] >= L
 *   critical section                       pc 3
 *   level[i] = 0                           pc 0: not trying
 *
 * A state is pc[0..N-1], level[0..N-1], victim[1..N-1]: 3N - 1 words.  The
 * invariant is mutual exclusion: at most one process at pc 3.  Its state
 * counts, from peterson_count.py (a search of its own), are in README.md.
 * "naive:N" is the same lock without its wait (a process passes every
 * level at once): mutual exclusion fails, for floe-mc to find.
 *
 *   floe-mc --model-lib build/rel/libmc_peterson.so --model peterson:3
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "floe_mc_model.h"

enum { IDLE, LEVEL, WAIT, CRIT };

typedef struct shape {
    unsigned n; /* processes */
    int naive;  /* no wait: a broken lock */
} shape;

static unsigned procs(const floe_mc_plugin *p)
{
    return ((const shape *)p->data)->n;
}

/* The words of process i's pc and level, and of victim[L]. */
#define PC(s, i)       (s)[(i)]
#define LEVEL_OF(s, i) (s)[n + (i)]
#define VICTIM(s, L)   (s)[2 * n + (L)-1]

static void initial(const floe_mc_plugin *p, unsigned which, uint32_t *s)
{
    (void)which;
    memset(s, 0, p->words * sizeof *s);
}

static int may_pass(const uint32_t *s, unsigned n, unsigned i)
{
    const uint32_t L = LEVEL_OF(s, i);
    if (VICTIM(s, L) != i)
        return 1;
    for (unsigned k = 0; k < n; k++)
        if (k != i && LEVEL_OF(s, k) >= L)
            return 0;
    return 1;
}

static void next(const floe_mc_plugin *p, const uint32_t *s, floe_mc_emit *emit, void *arg)
{
    const unsigned n = procs(p);
    uint32_t t[3 * 16];
    for (unsigned i = 0; i < n; i++) {
        memcpy(t, s, p->words * sizeof *t);
        switch (PC(s, i)) {
        case IDLE:
            LEVEL_OF(t, i) = 1;
            PC(t, i) = LEVEL;
            break;
        case LEVEL:
            VICTIM(t, LEVEL_OF(s, i)) = i;
            PC(t, i) = WAIT;
            break;
        case WAIT:
            if (!((const shape *)p->data)->naive && !may_pass(s, n, i))
                continue; /* blocked: no step for process i */
            if (LEVEL_OF(s, i) == n - 1) {
                PC(t, i) = CRIT;
            } else {
                LEVEL_OF(t, i) = LEVEL_OF(s, i) + 1;
                PC(t, i) = LEVEL;
            }
            break;
        default: /* CRIT: leave */
            LEVEL_OF(t, i) = 0;
            PC(t, i) = IDLE;
            break;
        }
        emit(arg, t, i * 4 + PC(s, i));
    }
}

static int mutual_exclusion(const floe_mc_plugin *p, const uint32_t *s)
{
    unsigned in = 0;
    for (unsigned i = 0; i < procs(p); i++)
        in += PC(s, i) == CRIT;
    return in <= 1;
}

static void print(const floe_mc_plugin *p, const uint32_t *s, char *buf, size_t len)
{
    static const char *const PCS[] = {"idle", "level", "wait", "crit"};
    const unsigned n = procs(p);
    size_t at = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < n && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%sP%u %s L%u", i ? ", " : "", i, PCS[PC(s, i) & 3], LEVEL_OF(s, i));
    for (unsigned L = 1; L < n && at < len; L++)
        at += (size_t)snprintf(buf + at, len - at, "%s%u", L == 1 ? "; victims " : " ", VICTIM(s, L));
}

static shape the_shape;
static floe_mc_plugin the_model = {
    .abi = FLOE_MC_ABI,
    .initial_states = 1,
    .initial = initial,
    .next = next,
    .invariant = mutual_exclusion,
    .print = print,
    .data = &the_shape,
};

/* "peterson:N", "naive:N" or "N" (or "" for peterson:3).  No count is
 * known in closed form: README.md has peterson_count.py's, for --expect. */
const floe_mc_plugin *floe_mc_model(const char *params, char *err, size_t errlen)
{
    unsigned n = 3;
    const int naive = strncmp(params, "naive:", 6) == 0;
    if (params[0]) {
        char *end;
        const char *num = naive ? params + 6 : strncmp(params, "peterson:", 9) == 0 ? params + 9 : params;
        unsigned long v = strtoul(num, &end, 10);
        if (*num < '0' || *num > '9' || *end || v < 2 || v > 16) {
            snprintf(err, errlen, "expected peterson:N or naive:N with N processes, 2..16, not '%s'", params);
            return NULL;
        }
        n = (unsigned)v;
    }
    the_shape.n = n;
    the_shape.naive = naive;
    the_model.words = 3 * n - 1;
    the_model.bits = n <= 4 ? 2 : n <= 8 ? 3 : 4;
    static char name[32];
    snprintf(name, sizeof name, "%s:%u", naive ? "naive" : "peterson", n);
    the_model.name = name;
    return &the_model;
}
