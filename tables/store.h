/*
 * store.h - the memory a table keeps its side arrays in (an exploring
 * table's open set, parents and labels: explore.h): its device's for a GPU
 * table (floe_table_side_store), host memory otherwise, so that they live
 * where the table lives and count against the same memory.
 *
 * Its holder never touches the memory but through put and get: a device's
 * is not the host's to read.  alloc hands out pieces that stay until close
 * frees them all at once (side arrays only grow, and a device's allocations
 * are slow and synchronise: the store takes large slabs and carves them).
 * put and get take several copies at once (a device's are each a round
 * trip: they are enqueued together and waited for once), and may be called
 * from several threads at once.
 */
#ifndef FLOE_TABLES_STORE_H
#define FLOE_TABLES_STORE_H

#include <stddef.h>

typedef struct floe_store_copy {
    void *to;
    const void *from;
    size_t bytes;
} floe_store_copy;

typedef struct floe_store_ops {
    void *(*alloc)(void *ctx, size_t bytes);                    /* NULL: out of memory (or its limit) */
    int (*put)(void *ctx, const floe_store_copy *c, size_t n); /* host -> store, all n; nonzero: failed */
    int (*get)(void *ctx, const floe_store_copy *c, size_t n); /* store -> host, all n; nonzero: failed */
    void (*close)(void *ctx);                                   /* frees what alloc gave, then ctx */
} floe_store_ops;

typedef struct floe_store {
    const floe_store_ops *ops; /* NULL: host memory (malloc, memcpy, free) */
    void *ctx;
    int device; /* the GPU it is on; -1: host memory */
} floe_store;

#define FLOE_STORE_HOST ((floe_store){NULL, NULL, -1})

#endif
