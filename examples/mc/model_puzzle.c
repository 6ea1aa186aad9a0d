/*
 * model_puzzle.c - the sliding-tile puzzle on an R x C board: word i is the
 * tile on cell i (row-major), 0 the blank; a move slides an orthogonal
 * neighbour of the blank into it.  From the solved board (tiles 1..R*C-1,
 * blank last) (R*C)!/2 boards are reachable when R, C >= 2.
 */
#include <stdio.h>

#include "model.h"

static void initial(const mc_model *m, unsigned which, uint32_t *s) /* one initial state: which is 0 */
{
    const unsigned cells = m->words;
    for (unsigned i = 0; i + 1 < cells; i++)
        s[i] = i + 1;
    s[cells - 1] = 0;
}

static unsigned next(const mc_model *m, const uint32_t *s, uint32_t *out)
{
    const int rows = m->p[0], cols = m->p[1];
    const unsigned cells = m->words;
    unsigned blank = 0;
    while (s[blank] != 0)
        blank++;
    const int r = (int)blank / cols, c = (int)blank % cols;
    static const int dr[4] = {-1, 1, 0, 0}, dc[4] = {0, 0, -1, 1};
    unsigned n = 0;
    for (int d = 0; d < 4; d++) {
        const int nr = r + dr[d], nc = c + dc[d];
        if (nr < 0 || nr >= rows || nc < 0 || nc >= cols)
            continue;
        const unsigned from = (unsigned)(nr * cols + nc);
        uint32_t *t = out + n++ * cells;
        for (unsigned i = 0; i < cells; i++)
            t[i] = s[i];
        t[blank] = s[from];
        t[from] = 0;
    }
    return n;
}

/* next on a packed board: cell i's tile in bits [i*b, i*b + b). */
static unsigned next_packed(const mc_model *m, uint64_t s, uint64_t *out)
{
    const int rows = m->p[0], cols = m->p[1];
    const unsigned b = m->bits;
    const uint64_t mask = (1ull << b) - 1;
    unsigned blank = 0;
    while ((s >> (blank * b)) & mask)
        blank++;
    const int r = (int)blank / cols, c = (int)blank % cols;
    unsigned n = 0;
    /* the neighbours, in next()'s order: up, down, left, right */
    const int from[4] = {r > 0 ? (int)blank - cols : -1, r + 1 < rows ? (int)blank + cols : -1,
                         c > 0 ? (int)blank - 1 : -1, c + 1 < cols ? (int)blank + 1 : -1};
    for (int d = 0; d < 4; d++) {
        if (from[d] < 0)
            continue;
        const unsigned f = (unsigned)from[d];
        const uint64_t tile = (s >> (f * b)) & mask;
        out[n++] = (s & ~(mask << (f * b))) | tile << (blank * b);
    }
    return n;
}

int mc_puzzle_init(mc_model *m, int rows, int cols, char *err, size_t errlen)
{
    if (rows < 2 || cols < 2 || rows * cols > MC_MAX_WORDS) {
        snprintf(err, errlen, "puzzle:%dx%d: R and C must be at least 2 and R*C at most %d", rows, cols, MC_MAX_WORDS);
        return -1;
    }
    const unsigned cells = (unsigned)(rows * cols);
    m->p[0] = rows;
    m->p[1] = cols;
    m->words = cells;
    m->bits = 1;
    while ((1u << m->bits) < cells)
        m->bits++;
    /* (R*C)!/2, while it fits in 64 bits (up to 20 cells) */
    m->expect = 0;
    if (cells <= 20) {
        uint64_t f = 1;
        for (unsigned i = 3; i <= cells; i++)
            f *= i;
        m->expect = f;
    }
    m->initials = 1;
    m->initial = initial;
    m->next = next;
    m->next_packed = cells * m->bits <= 64 ? next_packed : NULL;
    return 0;
}
