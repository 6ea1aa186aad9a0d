/*
 * testutil.c - the reference model used by the unit tests (see testutil.h).
 */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static size_t slot_of(const model *m, uint64_t key)
{
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 29)) & (m->cap - 1);
}

void model_init(model *m, size_t expected)
{
    memset(m, 0, sizeof *m);
    m->cap = 64;
    while (m->cap < 2 * expected + 16)
        m->cap <<= 1;
    m->keys = calloc(m->cap, sizeof *m->keys);
    m->values = calloc(m->cap, sizeof *m->values);
    m->ids = calloc(m->cap, sizeof *m->ids);
    m->state = calloc(m->cap, 1);
    ck_assert(m->keys && m->values && m->ids && m->state);
}

void model_free(model *m)
{
    free(m->keys);
    free(m->values);
    free(m->ids);
    free(m->state);
    memset(m, 0, sizeof *m);
}

/* Slot holding key, or the first empty slot on its probe path. Deleted slots
 * are skipped (never reused), which keeps the model obviously right. */
static size_t probe(const model *m, uint64_t key, bool *found)
{
    size_t i = slot_of(m, key);
    for (;;) {
        if (m->state[i] == 0) {
            *found = false;
            return i;
        }
        if (m->state[i] == 1 && m->keys[i] == key) {
            *found = true;
            return i;
        }
        i = (i + 1) & (m->cap - 1);
    }
}

bool model_get(const model *m, uint64_t key, uint64_t *value, uint64_t *id)
{
    bool found;
    size_t i = probe(m, key, &found);
    if (found) {
        if (value)
            *value = m->values[i];
        if (id)
            *id = m->ids[i];
    }
    return found;
}

/* Rehash into twice the room, dropping deleted entries. */
static void model_grow(model *m)
{
    model bigger;
    model_init(&bigger, m->cap);
    for (size_t i = 0; i < m->cap; i++)
        if (m->state[i] == 1)
            model_put(&bigger, m->keys[i], m->values[i], m->ids[i]);
    model_free(m);
    *m = bigger;
}

void model_put(model *m, uint64_t key, uint64_t value, uint64_t id)
{
    bool found;
    size_t i = probe(m, key, &found);
    if (!found && m->used + 1 >= m->cap / 2) {
        model_grow(m);
        i = probe(m, key, &found);
    }
    if (!found) {
        m->used++;
        m->state[i] = 1;
        m->keys[i] = key;
        m->live++;
    }
    m->values[i] = value;
    m->ids[i] = id;
}

bool model_del(model *m, uint64_t key)
{
    bool found;
    size_t i = probe(m, key, &found);
    if (found) {
        m->state[i] = 2;
        m->live--;
    }
    return found;
}
