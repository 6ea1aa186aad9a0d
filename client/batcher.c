/*
 * batcher.c - libfloe's client-side batcher (see floe.h): one key at a time
 * in, large requests out, several in flight, answers back in order.
 */
#include <stdlib.h>
#include <string.h>

#include "floe_internal.h"

#define SPARES 8

typedef struct chunk {
    floe_batcher *b;
    uint64_t *keys, *tags;
    size_t n;
} chunk;

struct floe_batcher {
    floe *c;
    char *table;
    int op;
    size_t batch_keys;
    unsigned max_inflight, inflight;
    floe_batch_callback *cb;
    void *arg;
    uint64_t *keys, *tags; /* the chunk being filled */
    size_t n;
    /* buffers of answered chunks, reused: a fresh 512 KiB buffer per request
     * is an mmap and a page fault per 4 KiB */
    uint64_t *spare_keys[SPARES], *spare_tags[SPARES];
    unsigned nspare;
    int status; /* the first error seen */
};

floe_batcher *floe_batcher_new(floe *c, const char *table, int op, size_t batch_keys, unsigned max_inflight,
                               floe_batch_callback *cb, void *arg)
{
    if (op != FLOE_BATCH_INSERT && op != FLOE_BATCH_FIND)
        return NULL;
    floe_batcher *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->c = c;
    b->table = strdup(table);
    b->op = op;
    b->batch_keys = batch_keys ? batch_keys : 65536;
    b->max_inflight = max_inflight ? max_inflight : 4;
    b->cb = cb;
    b->arg = arg;
    b->keys = malloc(b->batch_keys * sizeof *b->keys);
    b->tags = malloc(b->batch_keys * sizeof *b->tags);
    if (!b->table || !b->keys || !b->tags) {
        floe_batcher_free(b);
        return NULL;
    }
    return b;
}

static void on_answer(floe *c, floe_call *call, void *arg)
{
    chunk *ch = arg;
    floe_batcher *b = ch->b;
    size_t n;
    const uint8_t *results = floe_call_results(call, &n);
    int st = floe_call_status(call);
    if (st == FLOE_OK && n != ch->n)
        st = FLOE_ERR_PROTOCOL;
    if (st != FLOE_OK) /* the callback gets the status; floe_errstr(c) says why */
        floe__set_error(c, st, "%s", floe_call_error(call)[0] ? floe_call_error(call) : floe_strerror(st));
    if (st != FLOE_OK && b->status == FLOE_OK)
        b->status = st;
    b->inflight--;
    if (b->cb)
        b->cb(b->arg, st, ch->keys, ch->tags, st == FLOE_OK ? results : NULL, ch->n);
    if (b->nspare < SPARES) {
        b->spare_keys[b->nspare] = ch->keys;
        b->spare_tags[b->nspare++] = ch->tags;
    } else {
        free(ch->keys);
        free(ch->tags);
    }
    free(ch);
}

int floe_batcher_flush(floe_batcher *b)
{
    if (b->n == 0)
        return b->status;
    while (b->inflight >= b->max_inflight)
        if (floe_poll(b->c, -1) < 0)
            return FLOE_ERR_IO;
    chunk *ch = malloc(sizeof *ch);
    if (!ch)
        return FLOE_ERR_IO;
    ch->b = b;
    ch->keys = b->keys;
    ch->tags = b->tags;
    ch->n = b->n;
    if (b->nspare > 0) {
        b->nspare--;
        b->keys = b->spare_keys[b->nspare];
        b->tags = b->spare_tags[b->nspare];
    } else {
        b->keys = malloc(b->batch_keys * sizeof *b->keys);
        b->tags = malloc(b->batch_keys * sizeof *b->tags);
    }
    b->n = 0;
    b->inflight++;
    floe_call *call = b->op == FLOE_BATCH_INSERT
                          ? floe_send_insert(b->c, b->table, ch->keys, ch->n, NULL, 0, 0, on_answer, ch)
                          : floe_send_find(b->c, b->table, ch->keys, ch->n, 0, on_answer, ch);
    (void)call; /* completion, or an immediate failure, arrives through on_answer */
    if (!b->keys || !b->tags)
        return FLOE_ERR_IO;
    return b->status;
}

int floe_batcher_add(floe_batcher *b, uint64_t key, uint64_t tag)
{
    if (!b->keys || !b->tags)
        return FLOE_ERR_IO;
    b->keys[b->n] = key;
    b->tags[b->n] = tag;
    if (++b->n == b->batch_keys)
        return floe_batcher_flush(b);
    return b->status;
}

int floe_batcher_finish(floe_batcher *b)
{
    int st = floe_batcher_flush(b);
    while (b->inflight > 0)
        if (floe_poll(b->c, -1) < 0)
            return FLOE_ERR_IO;
    return st != FLOE_OK ? st : b->status;
}

void floe_batcher_free(floe_batcher *b)
{
    if (!b)
        return;
    free(b->table);
    free(b->keys);
    free(b->tags);
    for (unsigned i = 0; i < b->nspare; i++) {
        free(b->spare_keys[i]);
        free(b->spare_tags[i]);
    }
    free(b);
}
