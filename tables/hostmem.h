/*
 * hostmem.h - buffers in the host memory a backend copies fastest, kept for
 * reuse: floed's requests' keys and answers, and the parts' shares of a
 * batch of a table in parts (tables/partition.c).
 *
 * A GPU table's copies to and from the device go straight from pinned
 * memory (floe_backend_host_alloc) with no staging copy on the host; getting
 * pinned memory takes milliseconds, so freed buffers are kept, by size
 * class (powers of two), up to a cap, for the next use.  Without a GPU the
 * buffers are malloc's.  Any thread.
 */
#ifndef FLOE_TABLES_HOSTMEM_H
#define FLOE_TABLES_HOSTMEM_H

#include <stddef.h>

#include "backend.h"

typedef struct hostmem hostmem;

/* Buffers of be's host memory (NULL: malloc's), at most keep bytes of them
 * kept for reuse.  NULL if out of memory. */
hostmem *hostmem_new(floe_backend *be, size_t keep);
/* Frees every kept buffer; every buffer must be back (before be is destroyed). */
void hostmem_free(hostmem *h);
/* A buffer of at least bytes bytes (8-byte aligned), or NULL. */
void *hostmem_get(hostmem *h, size_t bytes);
/* Gives p (from hostmem_get on h, or NULL) back. */
void hostmem_put(hostmem *h, void *p);

#endif /* FLOE_TABLES_HOSTMEM_H */
