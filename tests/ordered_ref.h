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

static inline void ref_free(ref *r)
{
    free(r->key);
    free(r->val);
    memset(r, 0, sizeof *r);
}

#endif /* FLOE_TESTS_ORDERED_REF_H */
