/*
 * fuzz_tablefile.c - libFuzzer target: the table-file loader of every kind
 * (tables/tablefile.c, the SET/MAP loader in iceberg.c, the TREE loader in
 * tree.c) through the CPU backend's floe_table_load, on a file holding the
 * input (a memfd: no disk).
 *
 * The last 32 bytes (the trailer) are first set to the SHA-256 of the rest,
 * as a save writes them, so that mutations get past the checksum to the
 * checks behind it (inputs too short to hold a header and a trailer are
 * loaded as they are).  A table that loads must be usable: it is scanned to
 * the end, what the scan gave is looked up again (TREE ids back to
 * vectors), a few keys are inserted and it is scanned again, its stats are
 * read, and it is destroyed.
 */
#define _GNU_SOURCE
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend.h"
#include "tablefile.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PAGE         64   /* keys per scan request */
#define MAX_PAGES    4096 /* a scan that does not end is a bug, not a slow input */
#define MAX_INSERT   16
#define DIGEST_BYTES 32 /* the trailer: SHA-256 */

static floe_backend *cpu;
static int fd = -1;
static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    floe_errinfo err;
    if (floe_backend_cpu_create(1, &cpu, &err) != FLOE_OK)
        abort();
    fd = memfd_create("fuzz-table", MFD_CLOEXEC);
    if (fd < 0)
        abort();
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return 0;
}

static void run(floe_table *t, floe_batch *b)
{
    floe_table_run(t, b);
}

/* Every key (TREE: id and vector) of t, page by page, each looked up again. */
static void walk(floe_table *t)
{
    const floe_spec *s = &t->spec;
    const bool tree = s->kind == FLOE_KIND_TREE, map = s->kind == FLOE_KIND_MAP;
    const size_t words = tree ? s->words : 0;
    uint64_t keys[PAGE], ids[PAGE];
    unsigned char values[PAGE * 8];
    uint32_t *vectors = tree ? malloc(PAGE * words * 4) : NULL, *got = tree ? malloc(PAGE * words * 4) : NULL;
    uint8_t results[PAGE];
    floe_scan_pos cursor = {0, 0};
    for (int page = 0, started = 0; page < MAX_PAGES; page++) {
        floe_batch b = {.op = FLOE_OP_SCAN, .limit = PAGE, .scan_keys = keys};
        b.cursor = cursor;
        b.cursor_set = started;
        b.scan_vectors = vectors;
        if (map) {
            b.scan_values = values;
            b.flags = FLOE_BATCH_WANT_VALUES;
        }
        if (run(t, &b), b.status != FLOE_OK || b.scan_n > PAGE)
            break;
        const size_t n = b.scan_n;
        floe_batch f = {.op = FLOE_OP_FIND, .n = n, .results = results, .ids = ids, .flags = FLOE_BATCH_WANT_IDS};
        if (tree) {
            f.vectors = vectors;
        } else {
            f.keys = keys;
            f.values_out = map ? values : NULL;
            f.flags |= map ? FLOE_BATCH_WANT_VALUES : 0;
        }
        run(t, &f);
        if (tree) { /* the ids the scan gave, back to vectors */
            floe_batch g = {.op = FLOE_OP_GET, .n = n, .keys = keys, .results = results, .vectors_out = got};
            run(t, &g);
        }
        if (b.scan_done)
            break;
        cursor = b.next;
        started = 1;
    }
    free(vectors);
    free(got);
}

/* A few new keys (vectors) made from the input, inserted with their ids. */
static void insert_some(floe_table *t, const uint8_t *data, size_t size)
{
    const floe_spec *s = &t->spec;
    const bool tree = s->kind == FLOE_KIND_TREE, map = s->kind == FLOE_KIND_MAP;
    const size_t words = tree ? s->words : 0;
    uint64_t keys[MAX_INSERT], ids[MAX_INSERT], values[MAX_INSERT];
    uint8_t results[MAX_INSERT];
    uint32_t *vectors = tree ? calloc(MAX_INSERT * words, 4) : NULL;
    const uint64_t mask = s->key_bits >= 64 ? UINT64_MAX : ((uint64_t)1 << s->key_bits) - 1;
    for (size_t i = 0; i < MAX_INSERT; i++) {
        uint64_t h = 0xcbf29ce484222325ull ^ i;
        for (size_t j = i; j < size; j += MAX_INSERT)
            h = (h ^ data[j]) * 0x100000001b3ull;
        keys[i] = h & mask;
        values[i] = h;
        for (size_t w = 0; tree && w < words; w++)
            vectors[i * words + w] = (uint32_t)(h >> (w % 33));
    }
    floe_batch b = {
        .op = FLOE_OP_INSERT, .n = MAX_INSERT, .results = results, .ids = ids, .flags = FLOE_BATCH_WANT_IDS};
    if (tree) {
        b.vectors = vectors;
    } else {
        b.keys = keys;
        if (map) {
            b.values = values; /* value_bytes 4 or 8: the first n * value_bytes bytes */
            b.values_len = MAX_INSERT * s->value_bytes;
        }
    }
    run(t, &b);
    free(vectors);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *file = malloc(size + 1);
    if (!file)
        abort();
    memcpy(file, data, size);
    if (size >= FLOE_FILE_HEADER_BYTES + DIGEST_BYTES &&
        EVP_Digest(file, size - DIGEST_BYTES, file + size - DIGEST_BYTES, NULL, EVP_sha256(), NULL) != 1)
        abort();
    if (ftruncate(fd, 0) != 0 || pwrite(fd, file, size, 0) != (ssize_t)size)
        abort();
    free(file);
    floe_table *t = NULL;
    floe_errinfo err;
    if (floe_table_load(cpu, path, &t, &err) == FLOE_OK) {
        walk(t);
        insert_some(t, data, size);
        walk(t);
        floe_batch st = {.op = FLOE_OP_STATS};
        run(t, &st);
        floe_table_destroy(t);
    }
    return 0;
}
