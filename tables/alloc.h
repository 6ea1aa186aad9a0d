/*
 * alloc.h - the allocations of the table engine and of floed, through one
 * hook, so that a test can make the Nth of them fail (fault injection, as
 * SQLite's tests do with their malloc hooks) and check that each failure
 * comes back as an error status, leaks nothing, and leaves the tables
 * exact.  Disarmed (always, outside those tests) they are the C library's
 * calls behind one relaxed atomic load.
 *
 * Large table arrays that are mapped rather than allocated ask
 * floe_alloc_fails() before mapping, so they fail the same way.  libevent,
 * protobuf-c and OpenSSL allocate on their own and are not counted.
 *
 * floed arms it from FLOE_FAULT_ALLOC=N once it serves (and logs at exit
 * whether allocation N came); FLOE_FAULT_TRACE=1 prints the stack of the
 * allocation that fails (sanitizer builds).  tests/unit/test_faults.c and
 * tests/integration/test_faults.c walk N over whole sessions.
 */
#ifndef FLOE_TABLES_ALLOC_H
#define FLOE_TABLES_ALLOC_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

void *floe_malloc(size_t n);
void *floe_calloc(size_t count, size_t size);
void *floe_realloc(void *p, size_t n);
void *floe_aligned_alloc(size_t align, size_t n);
char *floe_strdup(const char *s);
/* asprintf: the length, or -1 (and *out NULL) when out of memory. */
int floe_asprintf(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Counts one allocation about to be made: true if it is the one to fail
 * (then errno is ENOMEM).  The wrappers above call it. */
bool floe_alloc_fails(void);

/* A host memory budget for the large table arrays a table maps (a create,
 * a growth): fits(bytes) says whether bytes more may be taken (floed's
 * maxmemory); NULL (the default): no budget.  floe_alloc_fits asks it
 * (false: errno EDQUOT) before such a mapping, as floe_alloc_fails does. */
void floe_alloc_set_budget(bool (*fits)(uint64_t bytes));
bool floe_alloc_fits(uint64_t bytes);
/* The one rule of a growing table under that budget: a write of n keys
 * (units: "keys", "vectors") that could need a growth of `bytes` more,
 * where the budget would not allow them, is refused whole before anything
 * is stored: true, and ERR_NO_MEMORY naming table in *err. */
bool floe_alloc_growth_refused(const char *table, size_t n, const char *units, uint64_t bytes, floe_errinfo *err);
/* Whether the allocation that just failed was refused by the budget (errno
 * EDQUOT) rather than by the host. */
bool floe_alloc_over_budget(void);

/* Fault injection (tests): the nth allocation from now on fails, once, in
 * whichever thread makes it; 0 disarms.  Counting starts afresh. */
void floe_alloc_fail_nth(uint64_t nth);
/* Allocations counted since the last floe_alloc_fail_nth. */
uint64_t floe_alloc_count(void);
/* Whether the armed failure has happened. */
bool floe_alloc_failed(void);

#endif
