/*
 * tablefile.h - the table file format, shared by every backend.
 *
 * A file is a 512-byte header, the table's arrays as sections, and a SHA-256
 * of everything before it:
 *
 *   header   magic "FLOETBL\0", format version, the spec (name, kind,
 *            key_bits, words, value_bytes, capacity, grow, max_fill, seed,
 *            memory),
 *            the layout version and primary address bits (from which the
 *            geometry is recomputed), generation, counters, section sizes
 *   sections raw little-endian arrays (SET/MAP, and a STATIC table while it
 *            fills: level 0, 1, 2, values; TREE: the root table's level 0,
 *            1, 2, an empty values section, then the node table; a frozen
 *            STATIC table: its buckets, its values)
 *   trailer  SHA-256 (OpenSSL) over header and sections
 *
 * An exploring table's file (tables/explore.h) ends with its open set: a
 * block in the form of a part (a header saying FLOE_FILE_OPEN_SET_BLOCK,
 * one section, a checksum) after the table's last part, whose headers all
 * say FLOE_FILE_OPEN_SET_FOLLOWS.  floed writes such a table as its header
 * alone (no sections) and the block: the open set holds every state found,
 * and a load builds the table from them (daemon/registry.h).  Such files
 * are format version 2, so that a floe that reads only version 1 refuses
 * them instead of loading a table without its open set (or setting the file
 * aside as damaged).
 *
 * Saving writes a temporary file beside the target, fsyncs it and renames it
 * into place, so a crash leaves the old file or the new one, never half of
 * one.  Loading checks magic, versions, sizes against the file's length and
 * the checksum before anything is trusted; a damaged or truncated file is
 * refused with a message saying what is wrong.
 */
#ifndef FLOE_TABLES_TABLEFILE_H
#define FLOE_TABLES_TABLEFILE_H

#include <stdint.h>

#include "spec.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FLOE_FILE_VERSION      1 /* what a file without an open set says */
#define FLOE_FILE_VERSION_MAX  2 /* an exploring table's file, with its open set */
#define FLOE_FILE_HEADER_BYTES 512
#define FLOE_FILE_MAX_SECTIONS 8
/* The layout versions (FLOE_LAYOUT_VERSION, FLOE_LAYOUT_OLDEST) are layout.h's. */

typedef struct floe_file_header {
    floe_spec spec;
    uint32_t layout_version;
    uint32_t addr_bits; /* primary address bits */
    uint32_t three;     /* 1: 1.5 * 2^addr_bits primary buckets (layout version 3 on) */
    uint64_t generation;
    uint64_t keys, tombstones;
    uint64_t used[FLOE_LEVELS];
    uint32_t nsections;
    uint64_t section_bytes[FLOE_FILE_MAX_SECTIONS];
    uint64_t nodes, orphans; /* TREE: node slots in use, orphan nodes */
    /* A partitioned table (tables/partition.h) is one file of `parts` whole
     * files one after another, part 0 first, each with its own header and
     * checksum; a part's spec is its own (its share of the capacity), the
     * whole table's capacity and memory are in every part.  1 / 0 / the
     * spec's own figures in a file of one table. */
    uint32_t parts, part;
    uint64_t whole_capacity, whole_memory;
    uint32_t open_set; /* FLOE_FILE_OPEN_SET_* */
    /* A STATIC table (tables/cuckoo.h): 0 while it fills (an iceberg
     * table's sections), 1 once frozen: its buckets are cuckoo_mult x
     * 2^addr_bits, the sections its buckets' words and its values. */
    uint32_t frozen, cuckoo_mult;
} floe_file_header;

enum {
    FLOE_FILE_NO_OPEN_SET = 0,
    FLOE_FILE_OPEN_SET_FOLLOWS = 1, /* a table's part: the open-set block follows the last part */
    FLOE_FILE_OPEN_SET_BLOCK = 2,   /* the open-set block itself */
};

/* Bytes a file (or part) with header h takes: header, sections, checksum. */
uint64_t floe_file_bytes(const floe_file_header *h);

/* Writes h and its sections (sections[i] holds h->section_bytes[i] bytes):
 * into a temporary beside path (floe_file_temporary), then renamed over it. */
floe_status floe_file_save(const char *path, const floe_file_header *h, const void *const *sections, floe_errinfo *err);

/* The one rule for the temporaries of files written whole then renamed into
 * place (snapshots, floed's port file): DIR/.BASE.tmp.XXXXXX beside
 * DIR/BASE, hidden (a table's name never starts with '.', so no table's
 * file is ever one) and made by mkostemp (O_CREAT | O_EXCL: never through
 * a name that exists, a symlink included), mode 0640.  Returns its fd with
 * its path in tmp, or -1 (errno; ENAMETOOLONG when tmp is too small). */
int floe_file_temporary(const char *path, char *tmp, size_t tmp_len);

/* Whether a directory entry's name is a temporary of a file whose name ends
 * in suffix (".floe"): .NAME<suffix>.tmp.XXXXXX, or the form floed wrote
 * before 2026-11-28, NAME<suffix>.tmp.PID (a table's file ends in the
 * suffix, which neither form does). */
bool floe_file_is_temporary(const char *name, const char *suffix);

/* A table's file contents in host memory: the header and its sections,
 * owned by whoever made the image.  A snapshot copies a table into an image
 * in the table's batch order (a short pause), then writes the image to disk
 * on another thread while the table serves again. */
typedef struct floe_file_image {
    floe_file_header h;
    const void *sections[FLOE_FILE_MAX_SECTIONS];
    void (*release)(struct floe_file_image *im); /* frees what owner holds */
    void *owner;
    struct floe_file_image *next_part; /* a partitioned table's next part, saved after this one */
    struct floe_file_stream *open_set; /* the first image's only (owned): the block that ends the file */
} floe_file_image;

/* A block written by its owner as the file is written (an exploring
 * table's open set, from the live structure on the saver's thread): bytes
 * of it, through put (nonzero: failed; write then returns nonzero). */
typedef struct floe_file_stream {
    uint64_t bytes;
    int (*write)(void *ctx, int (*put)(void *put_ctx, const void *p, size_t len), void *put_ctx);
    void *ctx;
    void (*release)(void *ctx);
} floe_file_stream;

/* An image owning a private copy of h and sections (NULL if out of memory). */
floe_file_image *floe_file_image_copy(const floe_file_header *h, const void *const *sections);
/* An image that takes h's sections as they are (each from floe_malloc, or
 * NULL), freeing them with itself; NULL if out of memory, the sections
 * then freed already. */
floe_file_image *floe_file_image_adopt(const floe_file_header *h, void *const *sections);
/* Writes im and its next parts as one file (temporary, fsync, rename). */
floe_status floe_file_image_save(const char *path, const floe_file_image *im, floe_errinfo *err);
/* Frees im and its next parts. */
void floe_file_image_free(floe_file_image *im);

typedef struct floe_file_reader floe_file_reader;

/* Opens path, reads and checks the header of the part at byte offset (0:
 * a whole table, or part 0); the caller then allocates the sections h
 * describes and calls floe_file_read.  The part's size is checked against
 * the file's: the last part ends the file, others leave room for the rest. */
floe_status floe_file_open(const char *path, uint64_t offset, floe_file_header *h, floe_file_reader **r,
                           floe_errinfo *err);
/* Reads every section into sections[i] and verifies the checksum. */
floe_status floe_file_read(floe_file_reader *r, void *const *sections, floe_errinfo *err);
void floe_file_close(floe_file_reader *r);

/* Opens the open-set block of path, an exploring table's file: *bytes of
 * it, read in order with floe_file_read_bytes, then floe_file_finish.
 * ERR_INVALID if the file has none or it is damaged. */
floe_status floe_file_open_set(const char *path, floe_file_reader **r, uint64_t *bytes, floe_errinfo *err);
/* The next len bytes of a block opened by floe_file_open_set: 0, or -1 if
 * the block (or the file) ends first. */
int floe_file_read_bytes(floe_file_reader *r, void *p, size_t len);
/* Every byte of the block read and its checksum right: FLOE_OK. */
floe_status floe_file_finish(floe_file_reader *r, floe_errinfo *err);

/* The header of the part at offset (checked as by floe_file_open). */
floe_status floe_file_header_at(const char *path, uint64_t offset, floe_file_header *h, floe_errinfo *err);

/* Which table of a file a backend loads: part `index` of a partitioned
 * file, at byte offset. */
typedef struct floe_file_part {
    uint64_t offset;
    uint32_t index;
} floe_file_part;

/* The header of what a backend is asked to load: with part NULL, a whole
 * table (a partitioned file is refused, saying how to load it); otherwise
 * that part, checked to be the one named. */
floe_status floe_file_header_of(const char *path, const floe_file_part *part, floe_file_header *h, floe_errinfo *err);

/* Every part's header of the file at path, checked to be parts of one
 * table: where each is (nparts of them, at most FLOE_PARTS_MAX), and the
 * whole table's spec (its capacity and memory the whole's). */
floe_status floe_file_read_parts(const char *path, floe_file_part *where, unsigned *nparts, floe_spec *whole,
                                 floe_errinfo *err);

#ifdef __cplusplus
}
#endif

#endif /* FLOE_TABLES_TABLEFILE_H */
