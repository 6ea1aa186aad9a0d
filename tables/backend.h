/*
 * backend.h - the interface between floed and a table engine.
 *
 * floed drives every table through this interface; the CPU backend
 * (backend_cpu.c, over iceberg.c) and the GPU backend (gpu/) implement it.
 * Work is asynchronous and batch-oriented: the caller fills a floe_batch,
 * submits it, and the backend calls b->done(b) from one of its own threads
 * when the batch is complete (never from inside floe_table_submit).
 *
 * Ordering: batches submitted to one table are executed and completed in
 * submission order, whatever their operation, so a SAVE or SCAN sees every
 * INSERT submitted before it.  Batches on different tables are independent.
 *
 * Ownership: every buffer a batch points to belongs to the caller and must
 * stay valid until done() is called.  Output arrays are sized by the caller:
 * results n bytes; ids n * 8 bytes (FLOE_BATCH_WANT_IDS); values_out
 * n * value_bytes (MAP, FLOE_BATCH_WANT_VALUES); scan_keys limit * 8 bytes and
 * scan_values limit * value_bytes.
 *
 * TREE tables take vectors where other kinds take keys: INSERT and FIND read
 * n vectors of spec.words 32-bit words from `vectors`; GET reads n ids from
 * `keys` and writes n * words words to vectors_out; SCAN writes ids to
 * scan_keys and, if scan_vectors is set, limit * words words there.  ERASE,
 * REBUILD and values are for SET and MAP only.
 */
#ifndef FLOE_TABLES_BACKEND_H
#define FLOE_TABLES_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "spec.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum floe_op {
    FLOE_OP_INSERT = 1, /* find-or-put: INSERTED / PRESENT / FULL */
    FLOE_OP_FIND,       /* PRESENT / ABSENT */
    FLOE_OP_ERASE,      /* ERASED / ABSENT */
    FLOE_OP_SCAN,       /* up to limit keys from cursor */
    FLOE_OP_STATS,
    FLOE_OP_REBUILD, /* rebuild at 2^addr_bits primary buckets (0: same size), drop tombstones */
    FLOE_OP_SAVE,    /* write the table to path */
    FLOE_OP_GET,     /* TREE: the vectors of ids: PRESENT / ABSENT */
    FLOE_OP_COPY,    /* the table's file contents into a host image (a snapshot's pause) */
} floe_op;

#define FLOE_BATCH_OVERWRITE   1u /* INSERT on a MAP: replace the value of PRESENT keys */
#define FLOE_BATCH_WANT_IDS    2u /* INSERT, FIND: fill ids */
#define FLOE_BATCH_WANT_VALUES 4u /* INSERT, FIND on a MAP: fill values_out; SCAN: fill scan_values */

typedef struct floe_batch floe_batch;
struct floe_file_image; /* tablefile.h */
struct floe_file_part;  /* tablefile.h */

struct floe_batch {
    floe_op op;
    unsigned flags;

    /* INSERT, FIND, ERASE */
    const uint64_t *keys;
    size_t n;
    const void *values; /* INSERT on a MAP: n * value_bytes, packed little-endian */
    size_t values_len;
    uint8_t *results;
    uint64_t *ids;
    void *values_out;
    floe_answer_counts counts;

    /* TREE */
    const uint32_t *vectors; /* INSERT, FIND: n * words words */
    uint32_t *vectors_out;   /* GET: n * words words */

    /* SCAN */
    floe_scan_pos cursor;
    int cursor_set; /* 0: start from the beginning */
    size_t limit;
    uint64_t *scan_keys;
    void *scan_values;
    uint32_t *scan_vectors; /* TREE */
    size_t scan_n;
    floe_scan_pos next;
    int scan_done;

    /* STATS */
    floe_table_stats stats;

    /* REBUILD, SAVE */
    uint32_t addr_bits;
    const char *path;

    /* COPY: the image (tables/tablefile.h), the caller's to write and free */
    struct floe_file_image *image;

    /* completion */
    floe_status status;
    floe_errinfo error;
    void (*done)(floe_batch *b);
    void *user;

    floe_batch *link; /* backend private: queue link */
};

typedef struct floe_backend floe_backend;
typedef struct floe_table floe_table;

typedef struct floe_backend_ops {
    const char *name;
    floe_status (*create_table)(floe_backend *be, const floe_spec *spec, floe_table **out, floe_errinfo *err);
    /* part NULL: the whole table in path; else that part of a partitioned file (tablefile.h) */
    floe_status (*load_table)(floe_backend *be, const char *path, const struct floe_file_part *part,
                              floe_table **out, floe_errinfo *err);
    void (*submit)(floe_table *t, floe_batch *b);
    void (*destroy_table)(floe_table *t); /* waits for submitted batches */
    void (*destroy)(floe_backend *be);    /* after all its tables are destroyed */
} floe_backend_ops;

/* Every backend's own structs begin with these. */
struct floe_backend {
    const floe_backend_ops *ops;
};

struct floe_table {
    floe_backend *backend;
    floe_spec spec; /* as created (seed filled in) */
};

floe_status floe_table_create(floe_backend *be, const floe_spec *spec, floe_table **out, floe_errinfo *err);
floe_status floe_table_load(floe_backend *be, const char *path, floe_table **out, floe_errinfo *err);
void floe_table_submit(floe_table *t, floe_batch *b);
/* Submits b and waits for it: for tools and tests.  b->done must be NULL. */
floe_status floe_table_run(floe_table *t, floe_batch *b);
void floe_table_destroy(floe_table *t);
void floe_backend_destroy(floe_backend *be);
const char *floe_backend_name(const floe_backend *be);

/* Checks an INSERT, FIND, ERASE or GET batch against the table's spec the
 * way every engine must (keys below 2^key_bits, values sized for a MAP
 * insert, no values on a SET, vectors for a TREE, buffers present, the
 * operation possible on the kind): for backends that validate before they
 * split a batch.  FLOE_OK for other operations. */
floe_status floe_batch_check(const floe_spec *spec, const floe_batch *b, floe_errinfo *err);

/* The CPU backend, on a pool of `threads` threads (0: one per CPU). */
floe_status floe_backend_cpu_create(unsigned threads, floe_backend **out, floe_errinfo *err);

#ifdef __cplusplus
}
#endif

#endif /* FLOE_TABLES_BACKEND_H */
