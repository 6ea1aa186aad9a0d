/*
 * alloc.c - allocations with a fault-injection hook (see alloc.h).
 */
#define _GNU_SOURCE
#include "alloc.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* in the sanitizers' runtime, when linked in */
extern void __sanitizer_print_stack_trace(void) __attribute__((weak));

static _Atomic uint64_t target;  /* the allocation to fail (1-based), 0: none */
static _Atomic uint64_t counted; /* allocations since armed */
static atomic_bool fired;

bool floe_alloc_fails(void)
{
    const uint64_t t = atomic_load_explicit(&target, memory_order_relaxed);
    if (!t)
        return false;
    if (atomic_fetch_add(&counted, 1) + 1 != t)
        return false;
    atomic_store(&fired, true);
    if (__sanitizer_print_stack_trace && getenv("FLOE_FAULT_TRACE"))
        __sanitizer_print_stack_trace(); /* where it failed: sanitizer builds only */
    errno = ENOMEM;
    return true;
}

static bool (*_Atomic budget)(uint64_t bytes);

void floe_alloc_set_budget(bool (*fits)(uint64_t bytes))
{
    atomic_store(&budget, fits);
}

bool floe_alloc_fits(uint64_t bytes)
{
    bool (*fits)(uint64_t) = atomic_load_explicit(&budget, memory_order_relaxed);
    if (!fits || fits(bytes))
        return true;
    errno = EDQUOT; /* not the host's memory: the budget's (floe_alloc_over_budget) */
    return false;
}

bool floe_alloc_growth_refused(const char *table, size_t n, const char *units, uint64_t bytes, floe_errinfo *err)
{
    if (floe_alloc_fits(bytes))
        return false;
    floe_errinfo_set(err, FLOE_ERR_NO_MEMORY,
                     "table %s: these %zu %s could need its next growth (%.1f MiB), which would pass floed's "
                     "maxmemory: nothing was stored",
                     table, n, units, (double)bytes / 1048576.0);
    return true;
}

void floe_alloc_fail_nth(uint64_t nth)
{
    atomic_store(&target, 0);
    atomic_store(&counted, 0);
    atomic_store(&fired, false);
    atomic_store(&target, nth);
}

uint64_t floe_alloc_count(void)
{
    return atomic_load(&counted);
}

bool floe_alloc_failed(void)
{
    return atomic_load(&fired);
}

void *floe_malloc(size_t n)
{
    return floe_alloc_fails() ? NULL : malloc(n);
}

void *floe_calloc(size_t count, size_t size)
{
    return floe_alloc_fails() ? NULL : calloc(count, size);
}

void *floe_realloc(void *p, size_t n)
{
    return floe_alloc_fails() ? NULL : realloc(p, n);
}

void *floe_aligned_alloc(size_t align, size_t n)
{
    return floe_alloc_fails() ? NULL : aligned_alloc(align, n);
}

char *floe_strdup(const char *s)
{
    return floe_alloc_fails() ? NULL : strdup(s);
}

int floe_asprintf(char **out, const char *fmt, ...)
{
    *out = NULL;
    if (floe_alloc_fails())
        return -1;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(out, fmt, ap);
    va_end(ap);
    if (n < 0)
        *out = NULL;
    return n;
}

bool floe_alloc_over_budget(void)
{
    return errno == EDQUOT;
}
