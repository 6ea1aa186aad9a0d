/*
 * backend.h - the interface between floed and a table engine.
 *
 * floed drives every table through this interface; the CPU backend
 * (backend_cpu.c, over iceberg.c) and the GPU backend (gpu/) implement it.
 * Work is asynchronous and batch-oriented: the caller fills a floe_batch,
 * submits it, and the backend calls b->done(b) from one of its own threads
 * when the batch is complete (never from inside floe_table_submit).
 *
 * Ordering: batches submitted to one table in one lane (floe_batch.lane) are
 * executed and completed in submission order, whatever their operation, so a
 * SAVE or SCAN sees every INSERT submitted before it in its lane.  A backend
 * whose tables have several lanes (floe_backend_lanes: the GPU backend's
 * pipelines) runs the lanes side by side, as the requests of different
 * connections: batches of different lanes are concurrent (any interleaving,
 * each atomic per key), and a SAVE, SCAN, STATS, COPY or REBUILD also sees
 * every batch of another lane that completed before it was submitted.  A
 * backend with one lane ignores the field.  Batches on different tables are
 * independent.
 *
 * Ownership: every buffer a batch points to belongs to the caller and must
 * stay valid until done() is called.  Output arrays are sized by the caller:
 * results n bytes; ids n * 8 bytes (FLOE_BATCH_WANT_IDS); values_out
 * n * value_bytes (MAP, FLOE_BATCH_WANT_VALUES); scan_keys limit * 8 bytes and
 * scan_values limit * value_bytes; keys_out n * 8 bytes (SUCC, PRED).
 *
 * TREE tables take vectors where other kinds take keys: INSERT and FIND read
 * n vectors of spec.words 32-bit words from `vectors`; GET reads n ids from
 * `keys` and writes n * words words to vectors_out; SCAN writes ids to
 * scan_keys and, if scan_vectors is set, limit * words words there.  ERASE,
 * REBUILD and values are for SET and MAP only.
 *
 * ORDERED tables take keys as SET and MAP do (values as a MAP's when
 * value_bytes is 4 or 8), and three operations of their own: SUCC and PRED
 * write each key's neighbour to keys_out (PRESENT, or ABSENT and 0 where
 * there is none) and its value to values_out (WANT_VALUES); RANGE writes up
 * to limit keys of [lo, hi] to scan_keys (values to scan_values with
 * WANT_VALUES), ascending, or descending from hi with desc, and sets
 * scan_n, scan_done and next.position (the key the next call starts from).
 * A SCAN of an ORDERED table walks it in key order; its positions are keys.
 *
 * STATIC tables take keys (and values as a MAP's when value_bytes is 4 or 8)
 * as a growing SET or MAP does until a FREEZE builds their static table;
 * from then on FIND, SCAN, STATS, SAVE and COPY run, a FREEZE again does
 * nothing, and a write completes with FLOE_ERR_FROZEN (both backends).
 *
 * The door: floe_table_submit checks every batch once, with floe_batch_check
 * (floe_request_check of spec.h, the rules of what each kind accepts, plus
 * the buffers), before the backend sees it, and sets b->status.  A batch
 * that fails is still handed to the backend's submit with that status: the
 * backend completes it in its place in the order, on its own thread, without
 * running it (so done() is still never called from inside
 * floe_table_submit, and nothing before or after it changes place).
 * Backends, and the engines under them, take a batch whose status is
 * FLOE_OK as valid and only assert it; a backend built over other backends
 * (tables in parts) hands its parts batches marked FLOE_BATCH_CHECKED, so
 * that the keys are scanned once.
 */
#ifndef FLOE_TABLES_BACKEND_H
#define FLOE_TABLES_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "queue.h"

#include "spec.h"
#include "status.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* floe_op and the FLOE_BATCH_* flags are the table vocabulary of spec.h. */

typedef struct floe_batch floe_batch;
struct floe_file_image; /* tablefile.h */
struct floe_file_part;  /* tablefile.h */
struct floe_group;      /* group.h */

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
    /* TREE INSERT of states by their parents, instead of vectors (floe_states_check): n parent ids of
     * parent_generation, a change count each, and the changes (FLOE_CHANGE_BYTES each, proto/floe_wire.h) */
    const uint64_t *parents;
    const uint8_t *change_counts;
    const uint8_t *changes;
    size_t changes_len;
    uint64_t parent_generation;
    /* INSERT, FIND (and a TREE's GET): the generation of the table the ids are of (the backend's answer; a
     * table in parts: the sum of its parts') */
    uint64_t generation;

    /* SUCC, PRED: the neighbour of each key */
    uint64_t *keys_out;

    /* RANGE: keys in [lo, hi], ascending (desc: descending), limit of them into the SCAN outputs below */
    uint64_t lo, hi;
    bool desc;

    /* SCAN (and RANGE: a cursor_set cursor's generation must be the table's) */
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

    /* the lane it runs in (taken modulo floe_backend_lanes; see Ordering) */
    unsigned lane;

    /* a table in parts' sub-batch that the parts' devices split among themselves (group.h): keys and
     * results are this part's chunk of the batch (NULL: a batch of the part's own keys) */
    struct floe_group *group;

    /* completion */
    floe_status status;
    floe_errinfo error;
    void (*done)(floe_batch *b);
    void *user;

    queue_link link; /* backend private: its place in the backend's queue (queue.h) */
};

/* The batch of a backend queue's link. */
#define FLOE_BATCH_OF(l) QUEUE_ENTRY(l, floe_batch, link)

/* Whether b's answers include ids: asked for, and its operation gives them
 * (FLOE_OPF_IDS_OUT).  Otherwise ids may be NULL (an erase or an add asked
 * for ids has none to give: floe_table_submit's rule), and nothing writes it. */
static inline bool floe_batch_wants_ids(const floe_batch *b)
{
    return (b->flags & FLOE_BATCH_WANT_IDS) && floe_op_has(b->op, FLOE_OPF_IDS_OUT);
}

typedef struct floe_backend floe_backend;
typedef struct floe_table floe_table;

typedef struct floe_backend_ops {
    const char *name;
    floe_status (*create_table)(floe_backend *be, const floe_spec *spec, floe_table **out, floe_errinfo *err);
    /* part NULL: the whole table in path; else that part of a partitioned file (tablefile.h) */
    floe_status (*load_table)(floe_backend *be, const char *path, const struct floe_file_part *part, floe_table **out,
                              floe_errinfo *err);
    void (*submit)(floe_table *t, floe_batch *b);
    void (*destroy_table)(floe_table *t); /* waits for submitted batches */
    void (*destroy)(floe_backend *be);    /* after all its tables are destroyed */
    /* optional (NULL: malloc and free): host memory the backend moves fastest */
    void *(*host_alloc)(floe_backend *be, size_t bytes);
    void (*host_free)(floe_backend *be, void *p);
    /* optional: a backend over others passes lanes (floe_backend_set_lanes) on to them */
    void (*set_lanes)(floe_backend *be, unsigned lanes);
    /* optional: free and total bytes of the memory its tables live in (a GPU's); an error when it
     * cannot be used (a failed device) */
    floe_status (*memory)(floe_backend *be, uint64_t *free_bytes, uint64_t *total_bytes);
    /* optional: whether the parts (tables of this backend) can split keyed batch b (checked) among
     * themselves on their devices (group.h) */
    bool (*group_fits)(floe_table *const *parts, unsigned nparts, const floe_batch *b);
    /* optional (NULL: host memory): the memory t's side arrays live in, its device's (store.h) */
    floe_status (*side_store)(floe_table *t, floe_store *out, floe_errinfo *err);
} floe_backend_ops;

/* Every backend's own structs begin with these. */
struct floe_backend {
    const floe_backend_ops *ops;
    struct floe_pool *pool; /* its host threads (NULL: none): the door's pass over a large batch runs on them */
    unsigned lanes;         /* of the tables it creates from now on (floe_backend_set_lanes; 0: 1) */
};

struct floe_table {
    floe_backend *backend;
    floe_spec spec;     /* as created (seed filled in) */
    bool checks_widths; /* its submit reads every key anyway (a table in parts splits them) and refuses a
                         * batch whose keys are too wide itself: the door leaves that pass to it */
};

/* Makes a table of spec on be: ERR_FULL, before anything is allocated,
 * where its arrays (floe_table_bytes_for) take more than be's device has
 * free, or for a backend of host memory, more than the host has available. */
floe_status floe_table_create(floe_backend *be, const floe_spec *spec, floe_table **out, floe_errinfo *err);
/* The bytes a new table of spec (valid) takes at creation: SET and MAP their
 * levels and values, TREE its node and root tables; an ORDERED table makes
 * its nodes as keys come (0). */
uint64_t floe_table_bytes_for(const floe_spec *spec);
floe_status floe_table_load(floe_backend *be, const char *path, floe_table **out, floe_errinfo *err);
/* Checks b (floe_batch_check), then hands it to the backend, which calls
 * b->done(b) on its own thread, in submission order, whether b ran or was
 * refused.  b->status and b->error say which; b->counts start at zero. */
void floe_table_submit(floe_table *t, floe_batch *b);
/* Submits b and waits for it: for tools and tests.  b->done must be NULL. */
floe_status floe_table_run(floe_table *t, floe_batch *b);
/* Every key (with its value) or vector of from inserted into to, through
 * scans of from and inserts into to (a table loaded into a different
 * number of parts); ERR_FULL if to could not take them all. */
floe_status floe_table_copy_keys(floe_table *from, floe_table *to, floe_errinfo *err);
/* Submits b[i] to t[i] for every i < n, all at once, and waits for all of
 * them (a layer over several tables: tables in parts).  Each done NULL. */
void floe_tables_run(floe_table *const *t, floe_batch *const *b, size_t n);
void floe_table_destroy(floe_table *t);
void floe_backend_destroy(floe_backend *be);
const char *floe_backend_name(const floe_backend *be);
/* Host memory the backend moves fastest, for a caller's keys, values and
 * answer buffers: the GPU backend's is pinned, so that its copies to and
 * from the device go straight from and to the caller's buffers, with no
 * staging copy on the host; elsewhere it is malloc's.  Slow to get (the
 * GPU's: milliseconds): keep it and reuse it.  NULL if out of memory.
 * Free with floe_backend_host_free on the same backend, before the backend
 * is destroyed. */
void *floe_backend_host_alloc(floe_backend *be, size_t bytes);
void floe_backend_host_free(floe_backend *be, void *p);
/* A new store (store.h) in the memory t lives in, for arrays kept beside it
 * (an exploring table's open set): a GPU table's device's (a table in parts:
 * its first part's), else FLOE_STORE_HOST.  UNAVAILABLE for a failed device. */
floe_status floe_table_side_store(floe_table *t, floe_store *out, floe_errinfo *err);
/* Free and total bytes of the device memory be's tables live in: FLOE_OK,
 * FLOE_ERR_UNSUPPORTED for a backend of host memory, FLOE_ERR_UNAVAILABLE
 * for a device that has failed.  For placing tables (tables/partition.h). */
floe_status floe_backend_memory(floe_backend *be, uint64_t *free_bytes, uint64_t *total_bytes);

/* Lanes of the tables be creates or loads from now on (1 .. FLOE_LANES_MAX;
 * default 1): each lane of a GPU table is a pipeline of its own (worker,
 * staging, copies) over the one table on the device.  The CPU backend and
 * tables in parts run every lane's batches in one queue, in submission
 * order, which keeps every lane's order too; they report the lanes asked
 * for, so that callers may still split their work by lane. */
floe_status floe_backend_set_lanes(floe_backend *be, unsigned lanes, floe_errinfo *err);
unsigned floe_backend_lanes(const floe_backend *be);

/* The door for in-process callers, run once per batch by floe_table_submit:
 * floe_request_check on the batch's op, flags, keys (vectors), n and values
 * (skipped when FLOE_BATCH_CHECKED is set), then the buffers only an
 * in-process caller can get wrong: results, ids (WANT_IDS), values_out (a
 * MAP's WANT_VALUES), vectors_out (GET), scan_keys and scan_values (SCAN).
 * pool (may be NULL): a SET's or MAP's large batch has its keys' widths
 * checked across it first. */
floe_status floe_batch_check(const floe_spec *spec, const floe_batch *b, struct floe_pool *pool, floe_errinfo *err);

/* Whether the door makes a pass over b's keys for their widths (the keys of
 * an operation a table in parts splits by key, not marked FLOE_BATCH_CHECKED): the pass a
 * table that checks_widths makes itself, calling floe_batch_check without
 * a pool for the error when a key is too wide. */
bool floe_batch_width_pass(const floe_spec *spec, const floe_batch *b);

/* The CPU backend, on a pool of `threads` threads (0: one per CPU). */
floe_status floe_backend_cpu_create(unsigned threads, floe_backend **out, floe_errinfo *err);

#ifdef __cplusplus
}
#endif

#endif /* FLOE_TABLES_BACKEND_H */
