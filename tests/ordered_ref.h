/*
 * ordered_ref.h - the reference ordered map that the ORDERED tables' tests
 * (unit and integration) check against, written plainly: keys ascending in
 * an array with their values, binary search, memmove.
 */
#ifndef FLOE_TESTS_ORDERED_REF_H
#define FLOE_TESTS_ORDERED_REF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "floe_wire.h"

typedef struct ref {
    uint64_t *key, *val;
    size_t n, cap;
} ref;

/* Where key is, or would go. */
static inline size_t ref_pos(const ref *r, uint64_t key)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (r->key[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static inline bool ref_has(const ref *r, uint64_t key, size_t *at)
{
    *at = ref_pos(r, key);
    return *at < r->n && r->key[*at] == key;
}

static inline void ref_put(ref *r, size_t at, uint64_t key, uint64_t val)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 1024;
        r->key = (uint64_t *)realloc(r->key, r->cap * 8);
        r->val = (uint64_t *)realloc(r->val, r->cap * 8);
        if (!r->key || !r->val) {
            fprintf(stderr, "ordered_ref: out of memory\n");
            abort();
        }
    }
    memmove(&r->key[at + 1], &r->key[at], (r->n - at) * 8);
    memmove(&r->val[at + 1], &r->val[at], (r->n - at) * 8);
    r->key[at] = key;
    r->val[at] = val;
    r->n++;
}

static inline void ref_del(ref *r, size_t at)
{
    memmove(&r->key[at], &r->key[at + 1], (r->n - at - 1) * 8);
    memmove(&r->val[at], &r->val[at + 1], (r->n - at - 1) * 8);
    r->n--;
}

/* Op (0 insert, 1 insert with overwrite, 2 find, 3 erase) of key with
 * value v applied to r as an ORDERED table applies it: its answer, and in
 * *value the value it reports (the stored one, or v where INSERTED; 0 for
 * an erase or a key that is absent). */
static inline uint8_t ref_apply(ref *r, int op, uint64_t key, uint64_t v, uint64_t *value)
{
    size_t at;
    const bool had = ref_has(r, key, &at);
    *value = 0;
    if (op <= 1) {
        *value = had ? r->val[at] : v;
        if (!had)
            ref_put(r, at, key, v);
        else if (op == 1)
            r->val[at] = v;
        return had ? FLOE_PRESENT : FLOE_INSERTED;
    }
    if (op == 2) {
        *value = had ? r->val[at] : 0;
        return had ? FLOE_PRESENT : FLOE_ABSENT;
    }
    if (had)
        ref_del(r, at);
    return had ? FLOE_ERASED : FLOE_ABSENT;
}

static inline void ref_free(ref *r)
{
    free(r->key);
    free(r->val);
    memset(r, 0, sizeof *r);
}

#endif /* FLOE_TESTS_ORDERED_REF_H */
