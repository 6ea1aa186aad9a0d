/*
 * model_puzzle.c - the sliding-tile puzzle on an R x C board: word i is the
 * tile on cell i (row-major), 0 the blank; a move slides an orthogonal
 * neighbour of the blank into it (action: 0 up, 1 down, 2 left, 3 right).
 * From the solved board (tiles 1..R*C-1, blank last) (R*C)!/2 boards are
 * reachable when R, C >= 2.  A plugin (floe_mc_model.h) built in, with a
 * next function on packed boards beside it: the fast path.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "model.h"

typedef struct puzzle {
    floe_mc_plugin p;
    int rows, cols;
    /* next_packed's tables: a 1 at the bottom and the top of each cell's field (the blank is the
     * field that is zero), the cell whose field's top bit is bit i, and for the blank on each
     * cell its four neighbours in next()'s order (up, down, left, right; one off the board is
     * the blank's own cell, not counted) */
    uint64_t lows, highs;
    uint8_t cell_at[64];
    uint8_t from[MC_MAX_WORDS][4];
    uint8_t on_board[MC_MAX_WORDS][4];
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

/* next on a packed board: cell i's tile in bits [i*b, i*b + b).  No loop
 * and no branch: the blank is the lowest field that is zero (the one zero
 * field, found as strlen finds a zero byte), its neighbours come from the
 * tables, and all four moves are written, the ones on the board counted
 * (where the blank is, and so which moves there are, is as good as random). */
static unsigned next_packed(const mc_model *m, uint64_t s, uint64_t *out)
{
    const puzzle *z = board(m->plugin);
    const unsigned b = m->bits;
    const uint64_t mask = (1ull << b) - 1, zero = (s - z->lows) & ~s & z->highs;
    const unsigned blank = z->cell_at[__builtin_ctzll(zero | 1ull << 63)];
    unsigned n = 0;
    for (int d = 0; d < 4; d++) {
        const unsigned f = z->from[blank][d];
        const uint64_t tile = (s >> (f * b)) & mask;
        out[n] = (s & ~(mask << (f * b))) | tile << (blank * b);
        n += z->on_board[blank][d];
    }
    return n;
}

/* next_packed's tables (a board that packs: cells x bits <= 64). */
static void packed_tables(puzzle *z, unsigned cells, unsigned b)
{
    for (unsigned i = 0; i < cells; i++) {
        z->lows |= 1ull << (i * b);
        z->highs |= 1ull << (i * b + b - 1);
        z->cell_at[i * b + b - 1] = (uint8_t)i;
    }
    static const int dr[4] = {-1, 1, 0, 0}, dc[4] = {0, 0, -1, 1};
    for (unsigned i = 0; i < cells; i++)
        for (int d = 0; d < 4; d++) {
            const int r = (int)i / z->cols + dr[d], c = (int)i % z->cols + dc[d];
            const bool on = r >= 0 && r < z->rows && c >= 0 && c < z->cols;
            z->on_board[i][d] = on;
            z->from[i][d] = (uint8_t)(on ? r * z->cols + c : (int)i);
        }
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
    if (mc_packs(m))
        packed_tables(z, cells, p->bits);
    m->next_packed = mc_packs(m) ? next_packed : NULL;
    return 0;
}
