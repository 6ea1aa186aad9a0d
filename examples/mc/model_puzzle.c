/*
 * model_puzzle.c - the sliding-tile puzzle on an R x C board: word i is the
 * tile on cell i (row-major), 0 the blank; a move slides an orthogonal
 * neighbour of the blank into it (action: 0 up, 1 down, 2 left, 3 right).
 * From the solved board (tiles 1..R*C-1, blank last) (R*C)!/2 boards are
 * reachable when R, C >= 2.  A plugin (floe_mc_model.h) built in, with a
 * next function on packed boards beside it: the fast path.
 */
#include <stdio.h>
#include <stdlib.h>

#include "model.h"

typedef struct puzzle {
    floe_mc_plugin p;
    int rows, cols;
} puzzle;

static const puzzle *board(const floe_mc_plugin *p)
{
    return (const puzzle *)p->data;
}

static void initial(const floe_mc_plugin *p, unsigned which, uint32_t *s) /* one initial state: which is 0 */
{
    const unsigned cells = p->words;
    for (unsigned i = 0; i + 1 < cells; i++)
        s[i] = i + 1;
    s[cells - 1] = 0;
}

static void next(const floe_mc_plugin *p, const uint32_t *s, floe_mc_emit *emit, void *arg)
{
    const int rows = board(p)->rows, cols = board(p)->cols;
    const unsigned cells = p->words;
    unsigned blank = 0;
    while (s[blank] != 0)
        blank++;
    const int r = (int)blank / cols, c = (int)blank % cols;
    static const int dr[4] = {-1, 1, 0, 0}, dc[4] = {0, 0, -1, 1};
    uint32_t t[MC_MAX_WORDS];
    for (int d = 0; d < 4; d++) {
        const int nr = r + dr[d], nc = c + dc[d];
        if (nr < 0 || nr >= rows || nc < 0 || nc >= cols)
            continue;
        const unsigned from = (unsigned)(nr * cols + nc);
        for (unsigned i = 0; i < cells; i++)
            t[i] = s[i];
        t[blank] = s[from];
        t[from] = 0;
        emit(arg, t, (uint32_t)d);
    }
}

/* next on a packed board: cell i's tile in bits [i*b, i*b + b). */
static unsigned next_packed(const mc_model *m, uint64_t s, uint64_t *out)
{
    const int rows = board(m->plugin)->rows, cols = board(m->plugin)->cols;
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
    puzzle *z = calloc(1, sizeof *z);
    if (!z) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    const unsigned cells = (unsigned)(rows * cols);
    z->rows = rows;
    z->cols = cols;
    floe_mc_plugin *p = &z->p;
    *p = (floe_mc_plugin){.abi = FLOE_MC_ABI,
                          .words = cells,
                          .bits = 1,
                          .initial_states = 1,
                          .initial = initial,
                          .next = next,
                          .data = z};
    while ((1u << p->bits) < cells)
        p->bits++;
    if (cells <= 20) { /* (R*C)!/2, while it fits in 64 bits (up to 20 cells) */
        uint64_t f = 1;
        for (unsigned i = 3; i <= cells; i++)
            f *= i;
        p->expect = f;
    }
    if (mc_model_from_plugin(p, z, m, err, errlen) != 0)
        return -1;
    m->next_packed = mc_packs(m) ? next_packed : NULL;
    return 0;
}
