/*
 * model.c - parsing a model name, and packing states into 64-bit keys.
 */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *mc_model_help(void)
{
    return "  puzzle:RxC   sliding-tile puzzle on an R x C board, from the solved board: (R*C)!/2 states\n"
           "  hanoi:N      Towers of Hanoi, 3 pegs, N discs, any legal move: 3^N states\n"
           "  phils:N      N dining philosophers in a ring (think, take left fork, eat)\n";
}

/* A positive integer that fills the rest of s up to end (or to a stop character). */
static int number(const char *s, char stop, const char **rest)
{
    char *e;
    if (*s < '0' || *s > '9')
        return -1;
    long v = strtol(s, &e, 10);
    if (v < 1 || v > 1000000 || (*e != stop && !(stop == 0 && *e == 0)))
        return -1;
    if (rest)
        *rest = e;
    return (int)v;
}

int mc_model_parse(const char *spec, mc_model *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    const char *colon = strchr(spec, ':');
    int rc = -1;
    if (colon && strncmp(spec, "puzzle:", 7) == 0) {
        const char *rest;
        int r = number(colon + 1, 'x', &rest), c = r > 0 ? number(rest + 1, 0, NULL) : -1;
        if (r < 0 || c < 0)
            snprintf(err, errlen, "model %s: expected puzzle:RxC, e.g. puzzle:3x4", spec);
        else
            rc = mc_puzzle_init(m, r, c, err, errlen);
    } else if (colon && strncmp(spec, "hanoi:", 6) == 0) {
        int n = number(colon + 1, 0, NULL);
        if (n < 0)
            snprintf(err, errlen, "model %s: expected hanoi:N, e.g. hanoi:8", spec);
        else
            rc = mc_hanoi_init(m, n, err, errlen);
    } else if (colon && strncmp(spec, "phils:", 6) == 0) {
        int n = number(colon + 1, 0, NULL);
        if (n < 0)
            snprintf(err, errlen, "model %s: expected phils:N, e.g. phils:10", spec);
        else
            rc = mc_phils_init(m, n, err, errlen);
    } else {
        snprintf(err, errlen, "unknown model '%s' (puzzle:RxC, hanoi:N or phils:N)", spec);
    }
    if (rc == 0)
        snprintf(m->name, sizeof m->name, "%s", spec);
    return rc;
}

int mc_packs(const mc_model *m)
{
    return m->words * m->bits <= 64;
}

unsigned mc_key_bits(const mc_model *m)
{
    return m->words * m->bits;
}

uint64_t mc_pack(const mc_model *m, const uint32_t *s)
{
    uint64_t k = 0;
    for (unsigned i = 0; i < m->words; i++)
        k |= (uint64_t)s[i] << (i * m->bits);
    return k;
}

void mc_unpack(const mc_model *m, uint64_t key, uint32_t *s)
{
    const uint64_t mask = m->bits >= 64 ? ~0ull : (1ull << m->bits) - 1;
    for (unsigned i = 0; i < m->words; i++)
        s[i] = (uint32_t)(key >> (i * m->bits) & mask);
}
