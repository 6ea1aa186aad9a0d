/*
 * tablefile.c - save and load table files (format in tablefile.h).
 */
#define _GNU_SOURCE
#include "tablefile.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"

#define DIGEST_BYTES 32
static const char MAGIC[8] = {'F', 'L', 'O', 'E', 'T', 'B', 'L', '\0'};

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "table files hold little-endian arrays; add byte swapping for this host"
#endif

/* ---- header (de)serialisation: explicit little-endian fields, no struct dumps ---- */

typedef struct cursor {
    unsigned char *p;
    size_t off;
} cursor;

static void put_u32(cursor *c, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        c->p[c->off++] = (unsigned char)(v >> (8 * i));
}

static void put_u64(cursor *c, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        c->p[c->off++] = (unsigned char)(v >> (8 * i));
}

static void put_bytes(cursor *c, const void *b, size_t n)
{
    memcpy(c->p + c->off, b, n);
    c->off += n;
}

static uint32_t get_u32(cursor *c)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)c->p[c->off++] << (8 * i);
    return v;
}

static uint64_t get_u64(cursor *c)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)c->p[c->off++] << (8 * i);
    return v;
}

static void encode_header(const floe_file_header *h, unsigned char *buf)
{
    cursor c = {buf, 0};
    uint64_t fill_bits;
    memset(buf, 0, FLOE_FILE_HEADER_BYTES);
    put_bytes(&c, MAGIC, sizeof MAGIC);
    put_u32(&c, h->open_set ? FLOE_FILE_VERSION_MAX : FLOE_FILE_VERSION);
    put_u32(&c, FLOE_FILE_HEADER_BYTES);
    put_bytes(&c, h->spec.name, FLOE_NAME_MAX);
    put_u32(&c, (uint32_t)h->spec.kind);
    put_u32(&c, h->spec.key_bits);
    put_u32(&c, h->spec.words);
    put_u32(&c, h->spec.value_bytes);
    put_u64(&c, h->spec.capacity);
    put_u32(&c, h->spec.grow ? 1 : 0);
    memcpy(&fill_bits, &h->spec.max_fill, sizeof fill_bits);
    put_u64(&c, fill_bits);
    put_u64(&c, h->spec.seed);
    put_bytes(&c, h->spec.backend, FLOE_BACKEND_NAME_MAX);
    put_u32(&c, h->layout_version);
    put_u32(&c, h->addr_bits);
    put_u64(&c, h->generation);
    put_u64(&c, h->keys);
    put_u64(&c, h->tombstones);
    for (int l = 0; l < FLOE_LEVELS; l++)
        put_u64(&c, h->used[l]);
    put_u32(&c, h->nsections);
    for (int i = 0; i < FLOE_FILE_MAX_SECTIONS; i++)
        put_u64(&c, h->section_bytes[i]);
    /* Added after version 1's first fields: zero in files that predate them. */
    put_u64(&c, h->spec.memory);
    put_u64(&c, h->nodes);
    put_u64(&c, h->orphans);
    put_u32(&c, h->parts > 1 ? h->parts : 0);
    put_u32(&c, h->parts > 1 ? h->part : 0);
    put_u64(&c, h->parts > 1 ? h->whole_capacity : 0);
    put_u64(&c, h->parts > 1 ? h->whole_memory : 0);
    put_u32(&c, h->spec.shard);
    put_u32(&c, h->spec.shards);
    put_u64(&c, h->spec.shard_set);
    put_u32(&c, h->three);
    /* Version 2 on (zero before). */
    put_u32(&c, (h->spec.explore ? 1u : 0u) | (h->spec.explore_any_order ? 2u : 0u));
    put_u32(&c, h->spec.label_bytes);
    put_u32(&c, h->open_set);
    /* A STATIC table's (zero before there were any). */
    put_u32(&c, h->frozen);
    put_u32(&c, h->cuckoo_mult);
}

static floe_status decode_header(const unsigned char *buf, floe_file_header *h, const char *path, floe_errinfo *err)
{
    cursor c = {(unsigned char *)buf, 0};
    uint64_t fill_bits;
    memset(h, 0, sizeof *h);
    if (memcmp(buf, MAGIC, sizeof MAGIC) != 0)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is not a floe table file (bad magic)", path);
    c.off = sizeof MAGIC;
    uint32_t version = get_u32(&c);
    if (version < FLOE_FILE_VERSION || version > FLOE_FILE_VERSION_MAX)
        return floe_errinfo_set(err, FLOE_ERR_UNSUPPORTED,
                                "%s has file format version %u; this floe reads versions %u to %u", path, version,
                                FLOE_FILE_VERSION, FLOE_FILE_VERSION_MAX);
    if (get_u32(&c) != FLOE_FILE_HEADER_BYTES)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s: damaged header (header size)", path);
    memcpy(h->spec.name, c.p + c.off, FLOE_NAME_MAX);
    c.off += FLOE_NAME_MAX;
    h->spec.kind = (floe_kind)get_u32(&c);
    h->spec.key_bits = get_u32(&c);
    h->spec.words = get_u32(&c);
    h->spec.value_bytes = get_u32(&c);
    h->spec.capacity = get_u64(&c);
    h->spec.grow = get_u32(&c) != 0;
    fill_bits = get_u64(&c);
    memcpy(&h->spec.max_fill, &fill_bits, sizeof fill_bits);
    h->spec.seed = get_u64(&c);
    memcpy(h->spec.backend, c.p + c.off, FLOE_BACKEND_NAME_MAX);
    h->spec.backend[FLOE_BACKEND_NAME_MAX - 1] = '\0';
    c.off += FLOE_BACKEND_NAME_MAX;
    h->layout_version = get_u32(&c);
    h->addr_bits = get_u32(&c);
    h->generation = get_u64(&c);
    h->keys = get_u64(&c);
    h->tombstones = get_u64(&c);
    for (int l = 0; l < FLOE_LEVELS; l++)
        h->used[l] = get_u64(&c);
    h->nsections = get_u32(&c);
    if (h->nsections > FLOE_FILE_MAX_SECTIONS)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s: damaged header (%u sections)", path, h->nsections);
    for (int i = 0; i < FLOE_FILE_MAX_SECTIONS; i++)
        h->section_bytes[i] = get_u64(&c);
    h->spec.memory = get_u64(&c);
    h->nodes = get_u64(&c);
    h->orphans = get_u64(&c);
    h->parts = get_u32(&c);
    h->part = get_u32(&c);
    h->whole_capacity = get_u64(&c);
    h->whole_memory = get_u64(&c);
    h->spec.shard = get_u32(&c);
    h->spec.shards = get_u32(&c);
    h->spec.shard_set = get_u64(&c);
    h->three = get_u32(&c);
    const uint32_t explore = get_u32(&c);
    h->spec.explore = explore & 1u;
    h->spec.explore_any_order = (explore & 2u) != 0;
    h->spec.label_bytes = get_u32(&c);
    h->open_set = get_u32(&c);
    h->frozen = get_u32(&c);
    h->cuckoo_mult = get_u32(&c);
    if (h->frozen > 1 || (h->frozen && h->spec.kind != FLOE_KIND_STATIC) || (!h->frozen && h->cuckoo_mult != 0))
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s: damaged header (frozen %u, size code %u, kind %u)", path,
                                h->frozen, h->cuckoo_mult, (unsigned)h->spec.kind);
    if (explore > 3 || h->open_set > FLOE_FILE_OPEN_SET_BLOCK || (h->open_set != 0) != (version == 2) ||
        (h->open_set != FLOE_FILE_OPEN_SET_BLOCK && (h->open_set == FLOE_FILE_OPEN_SET_FOLLOWS) != h->spec.explore))
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s: damaged header (open set %u, explore %u, version %u)",
                                path, h->open_set, explore, version);
    if (h->parts == 0) { /* a whole table */
        if (h->part != 0)
            return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s: damaged header (part %u of none)", path, h->part);
        h->parts = 1;
        h->whole_capacity = h->spec.capacity;
        h->whole_memory = h->spec.memory;
    } else if (h->parts < 2 || h->parts > FLOE_PARTS_MAX || h->part >= h->parts) {
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s: damaged header (part %u of %u)", path, h->part, h->parts);
    }
    if (h->layout_version < FLOE_LAYOUT_OLDEST || h->layout_version > FLOE_LAYOUT_VERSION)
        return floe_errinfo_set(err, FLOE_ERR_UNSUPPORTED,
                                "%s uses table layout version %u; this floe reads versions %u to %u", path,
                                h->layout_version, FLOE_LAYOUT_OLDEST, FLOE_LAYOUT_VERSION);
    if (h->three > 1 || (h->three && h->layout_version < FLOE_LAYOUT_THREE))
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s: damaged header (primary size code %u in layout version %u)",
                                path, h->three, h->layout_version);
    return FLOE_OK;
}

/* ---- saving ---------------------------------------------------------------------------- */

static int write_all(int fd, const void *buf, size_t n, EVP_MD_CTX *md)
{
    const unsigned char *p = buf;
    if (md && EVP_DigestUpdate(md, buf, n) != 1)
        return -1;
    while (n > 0) {
        size_t step = n < ((size_t)1 << 30) ? n : ((size_t)1 << 30);
        ssize_t w = write(fd, p, step);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void fsync_dir_of(const char *path)
{
    char *copy = floe_strdup(path);
    if (!copy)
        return;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(copy);
}

uint64_t floe_file_bytes(const floe_file_header *h)
{
    uint64_t n = FLOE_FILE_HEADER_BYTES + DIGEST_BYTES;
    for (uint32_t i = 0; i < h->nsections; i++)
        n += h->section_bytes[i];
    return n;
}

typedef struct digest_put {
    int fd;
    EVP_MD_CTX *md;
} digest_put;

static int put_digested(void *ctx, const void *p, size_t len)
{
    digest_put *d = ctx;
    return write_all(d->fd, p, len, d->md);
}

/* One whole file (or part): header, sections (or the one section that
 * stream writes), checksum. */
static int write_part(int fd, const floe_file_header *h, const void *const *sections, const floe_file_stream *stream)
{
    unsigned char hdr[FLOE_FILE_HEADER_BYTES];
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    int rc = -1;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        errno = ENOMEM;
        goto out;
    }
    encode_header(h, hdr);
    if (write_all(fd, hdr, sizeof hdr, md) != 0)
        goto out;
    for (uint32_t i = 0; !stream && i < h->nsections; i++)
        if (h->section_bytes[i] && write_all(fd, sections[i], h->section_bytes[i], md) != 0)
            goto out;
    if (stream && stream->write(stream->ctx, put_digested, &(digest_put){fd, md}) != 0) {
        if (!errno)
            errno = EIO;
        goto out;
    }
    if (EVP_DigestFinal_ex(md, digest, &dlen) != 1 || dlen != DIGEST_BYTES) {
        errno = EIO;
        goto out;
    }
    rc = write_all(fd, digest, DIGEST_BYTES, NULL);
out:
    EVP_MD_CTX_free(md);
    return rc;
}

#define TEMP_MARK ".tmp."

int floe_file_temporary(const char *path, char *tmp, size_t tmp_len)
{
    const char *slash = strrchr(path, '/');
    const int dir_len = slash ? (int)(slash - path + 1) : 0;
    if (snprintf(tmp, tmp_len, "%.*s.%s" TEMP_MARK "XXXXXX", dir_len, path, path + dir_len) >= (int)tmp_len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    const int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd >= 0 && fchmod(fd, 0640) != 0) {
        const int e = errno;
        close(fd);
        unlink(tmp);
        errno = e;
        return -1;
    }
    return fd;
}

static bool all_of(const char *s, int (*is)(int))
{
    for (; *s; s++)
        if (!is((unsigned char)*s))
            return false;
    return true;
}

bool floe_file_is_temporary(const char *name, const char *suffix)
{
    char mark[64];
    if (snprintf(mark, sizeof mark, "%s" TEMP_MARK, suffix) >= (int)sizeof mark)
        return false;
    const char *at = NULL;
    for (const char *p = strstr(name, mark); p; p = strstr(p + 1, mark))
        at = p; /* the last one */
    if (!at)
        return false;
    const char *tail = at + strlen(mark);
    if (name[0] == '.')
        return strlen(tail) == 6 && all_of(tail, isalnum);
    return *tail && all_of(tail, isdigit);
}

/* Writes the parts (headers[i], sections[i]) to a temporary file beside
 * path, and the open-set block after them if open_set, then fsyncs and
 * renames it into place. */
static floe_status save_parts(const char *path, uint32_t nparts, const floe_file_header *const *headers,
                              const void *const *const *sections, const floe_file_stream *open_set,
                              floe_errinfo *err)
{
    for (uint32_t i = 0; i < nparts; i++)
        if (headers[i]->spec.explore != (open_set != NULL))
            return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "table %s: %s", headers[i]->spec.name,
                                    open_set ? "an open set for a table that does not explore"
                                             : "an exploring table is saved with its open set (floe_file_image_save)");
    char tmp[4096];
    int fd = floe_file_temporary(path, tmp, sizeof tmp);
    if (fd < 0 && errno == ENAMETOOLONG)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "path too long: %s", path);
    if (fd < 0)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "cannot create a temporary beside %s: %s", path,
                                strerror(errno));
    for (uint32_t i = 0; i < nparts; i++)
        if (write_part(fd, headers[i], sections[i], NULL) != 0)
            goto io_fail;
    if (open_set) {
        floe_file_header b = *headers[0];
        memset(b.section_bytes, 0, sizeof b.section_bytes);
        b.nsections = 1;
        b.section_bytes[0] = open_set->bytes;
        b.parts = 1;
        b.part = 0;
        b.open_set = FLOE_FILE_OPEN_SET_BLOCK;
        errno = 0;
        if (write_part(fd, &b, NULL, open_set) != 0)
            goto io_fail;
    }
    if (fsync(fd) != 0)
        goto io_fail;
    if (close(fd) != 0) {
        fd = -1;
        goto io_fail;
    }
    fd = -1;
    if (rename(tmp, path) != 0)
        goto io_fail;
    fsync_dir_of(path);
    return FLOE_OK;
io_fail:;
    floe_status st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "cannot write %s: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    return st;
}

floe_status floe_file_save(const char *path, const floe_file_header *h, const void *const *sections, floe_errinfo *err)
{
    return save_parts(path, 1, &h, &sections, NULL, err);
}

/* ---- images -------------------------------------------------------------------------------- */

static void release_copy(floe_file_image *im)
{
    for (int i = 0; i < FLOE_FILE_MAX_SECTIONS; i++)
        free((void *)im->sections[i]);
}

floe_file_image *floe_file_image_copy(const floe_file_header *h, const void *const *sections)
{
    floe_file_image *im = floe_calloc(1, sizeof *im);
    if (!im)
        return NULL;
    im->h = *h;
    im->release = release_copy;
    for (uint32_t i = 0; i < h->nsections; i++) {
        const size_t n = h->section_bytes[i];
        void *copy = floe_malloc(n ? n : 1);
        if (!copy) {
            floe_file_image_free(im);
            return NULL;
        }
        if (n)
            memcpy(copy, sections[i], n);
        im->sections[i] = copy;
    }
    return im;
}

floe_file_image *floe_file_image_adopt(const floe_file_header *h, void *const *sections)
{
    floe_file_image *im = floe_calloc(1, sizeof *im);
    if (!im) {
        for (uint32_t i = 0; i < h->nsections; i++)
            free(sections[i]);
        return NULL;
    }
    im->h = *h;
    im->release = release_copy;
    for (uint32_t i = 0; i < h->nsections; i++)
        im->sections[i] = sections[i];
    return im;
}

floe_status floe_file_image_save(const char *path, const floe_file_image *im, floe_errinfo *err)
{
    floe_file_header hs[FLOE_PARTS_MAX];
    const floe_file_header *headers[FLOE_PARTS_MAX];
    const void *const *sections[FLOE_PARTS_MAX];
    uint32_t n = 0;
    for (const floe_file_image *p = im; p; p = p->next_part) {
        if (n == FLOE_PARTS_MAX)
            return floe_errinfo_set(err, FLOE_ERR_INVALID, "an image of more than %d parts", FLOE_PARTS_MAX);
        hs[n] = p->h;
        hs[n].open_set = im->open_set ? FLOE_FILE_OPEN_SET_FOLLOWS : FLOE_FILE_NO_OPEN_SET;
        headers[n] = &hs[n];
        sections[n++] = p->sections;
    }
    return save_parts(path, n, headers, sections, im->open_set, err);
}

void floe_file_image_free(floe_file_image *im)
{
    if (im && im->open_set) {
        if (im->open_set->release)
            im->open_set->release(im->open_set->ctx);
        free(im->open_set);
    }
    while (im) {
        floe_file_image *next = im->next_part;
        if (im->release)
            im->release(im);
        free(im);
        im = next;
    }
}

/* ---- loading ---------------------------------------------------------------------------- */

struct floe_file_reader {
    FILE *f;
    char *path;
    floe_file_header h;
    EVP_MD_CTX *md;
    uint64_t left; /* an open-set block's bytes not yet read */
};

void floe_file_close(floe_file_reader *r)
{
    if (!r)
        return;
    if (r->f)
        fclose(r->f);
    EVP_MD_CTX_free(r->md);
    free(r->path);
    free(r);
}

floe_status floe_file_open(const char *path, uint64_t offset, floe_file_header *h, floe_file_reader **out,
                           floe_errinfo *err)
{
    unsigned char hdr[FLOE_FILE_HEADER_BYTES];
    struct stat sb;
    floe_status st;
    floe_file_reader *r = floe_calloc(1, sizeof *r);
    if (!r)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    r->path = floe_strdup(path);
    r->md = EVP_MD_CTX_new();
    if (!r->path || !r->md || EVP_DigestInit_ex(r->md, EVP_sha256(), NULL) != 1) {
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "cannot initialise SHA-256");
        goto fail;
    }
    r->f = fopen(path, "rbe");
    if (!r->f) {
        st = floe_errinfo_set(err, errno == ENOENT ? FLOE_ERR_NO_TABLE : FLOE_ERR_INTERNAL, "cannot open %s: %s", path,
                            strerror(errno));
        goto fail;
    }
    if (fstat(fileno(r->f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is not a regular file", path);
        goto fail;
    }
    if (offset > (uint64_t)sb.st_size || fseeko(r->f, (off_t)offset, SEEK_SET) != 0) {
        st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is truncated: no part at byte %llu", path,
                            (unsigned long long)offset);
        goto fail;
    }
    if (fread(hdr, 1, sizeof hdr, r->f) != sizeof hdr) {
        st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is truncated: shorter than a table file header", path);
        goto fail;
    }
    st = decode_header(hdr, &r->h, path, err);
    if (st != FLOE_OK)
        goto fail;
    /* Sizes come from an unverified header: check them against the file's
     * length before anyone allocates that much. */
    for (uint32_t i = 0; i < r->h.nsections; i++) {
        if (r->h.section_bytes[i] > (uint64_t)sb.st_size) {
            st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%s: damaged header (section %u size)", path, i);
            goto fail;
        }
    }
    const uint64_t expect = offset + floe_file_bytes(&r->h);
    const bool last = r->h.open_set == FLOE_FILE_OPEN_SET_BLOCK ||
                      (r->h.part + 1 == r->h.parts && r->h.open_set != FLOE_FILE_OPEN_SET_FOLLOWS);
    if (!(last ? expect == (uint64_t)sb.st_size : expect + FLOE_FILE_HEADER_BYTES < (uint64_t)sb.st_size)) {
        st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is %s: %llu bytes, the header describes %llu", path,
                            (uint64_t)sb.st_size < expect ? "truncated" : "damaged (trailing bytes)",
                            (unsigned long long)sb.st_size, (unsigned long long)expect);
        goto fail;
    }
    EVP_DigestUpdate(r->md, hdr, sizeof hdr);
    *h = r->h;
    *out = r;
    return FLOE_OK;
fail:
    floe_file_close(r);
    return st;
}

/* The checksum after the sections, against what was read. */
static floe_status check_digest(floe_file_reader *r, floe_errinfo *err)
{
    unsigned char want[EVP_MAX_MD_SIZE], got[DIGEST_BYTES];
    unsigned int dlen = 0;
    if (fread(got, 1, sizeof got, r->f) != sizeof got)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is truncated: no checksum", r->path);
    if (EVP_DigestFinal_ex(r->md, want, &dlen) != 1 || dlen != DIGEST_BYTES)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "cannot finish SHA-256");
    if (memcmp(want, got, DIGEST_BYTES) != 0)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is damaged: checksum mismatch", r->path);
    return FLOE_OK;
}

floe_status floe_file_read(floe_file_reader *r, void *const *sections, floe_errinfo *err)
{
    for (uint32_t i = 0; i < r->h.nsections; i++) {
        unsigned char *p = sections[i];
        uint64_t left = r->h.section_bytes[i];
        while (left > 0) {
            size_t step = left < ((uint64_t)1 << 28) ? (size_t)left : ((size_t)1 << 28);
            if (fread(p, 1, step, r->f) != step)
                return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is truncated in section %u", r->path, i);
            EVP_DigestUpdate(r->md, p, step);
            p += step;
            left -= step;
        }
    }
    return check_digest(r, err);
}

floe_status floe_file_open_set(const char *path, floe_file_reader **r, uint64_t *bytes, floe_errinfo *err)
{
    floe_file_header h0, h;
    floe_status st = floe_file_header_at(path, 0, &h0, err);
    if (st != FLOE_OK)
        return st;
    if (h0.open_set != FLOE_FILE_OPEN_SET_FOLLOWS)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s holds no open set", path);
    uint64_t off = floe_file_bytes(&h0);
    for (uint32_t i = 1; i < h0.parts; i++) {
        if ((st = floe_file_header_at(path, off, &h, err)) != FLOE_OK)
            return st;
        off += floe_file_bytes(&h);
    }
    if ((st = floe_file_open(path, off, &h, r, err)) != FLOE_OK)
        return st;
    if (h.open_set != FLOE_FILE_OPEN_SET_BLOCK || h.nsections != 1 || strcmp(h.spec.name, h0.spec.name) != 0) {
        floe_file_close(*r);
        *r = NULL;
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s: damaged (no open-set block after the table)", path);
    }
    (*r)->left = *bytes = h.section_bytes[0];
    return FLOE_OK;
}

int floe_file_read_bytes(floe_file_reader *r, void *p, size_t len)
{
    if (len > r->left || fread(p, 1, len, r->f) != len)
        return -1;
    EVP_DigestUpdate(r->md, p, len);
    r->left -= len;
    return 0;
}

floe_status floe_file_finish(floe_file_reader *r, floe_errinfo *err)
{
    if (r->left)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s: damaged (%llu bytes of the open set left unread)", r->path,
                                (unsigned long long)r->left);
    return check_digest(r, err);
}

floe_status floe_file_header_at(const char *path, uint64_t offset, floe_file_header *h, floe_errinfo *err)
{
    floe_file_reader *r;
    floe_status st = floe_file_open(path, offset, h, &r, err);
    if (st != FLOE_OK)
        return st;
    floe_file_close(r);
    return FLOE_OK;
}

floe_status floe_file_header_of(const char *path, const floe_file_part *part, floe_file_header *h, floe_errinfo *err)
{
    floe_status st = floe_file_header_at(path, part ? part->offset : 0, h, err);
    if (st != FLOE_OK)
        return st;
    if (!part && h->parts > 1)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                              "%s holds a table partitioned in %u parts: load it through a partitioned backend "
                              "(floed, or floe_backend_partition_create)",
                              path, h->parts);
    if (part && h->part != part->index)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s: damaged (part %u where part %u belongs)", path, h->part,
                              part->index);
    return FLOE_OK;
}

static bool same_table(const floe_spec *a, const floe_spec *b)
{
    return strcmp(a->name, b->name) == 0 && a->kind == b->kind && a->key_bits == b->key_bits && a->words == b->words &&
           a->value_bytes == b->value_bytes && a->seed == b->seed;
}

floe_status floe_file_read_parts(const char *path, floe_file_part *where, unsigned *nparts, floe_spec *whole,
                                 floe_errinfo *err)
{
    floe_file_header h0, h;
    floe_status st = floe_file_header_at(path, 0, &h0, err);
    if (st != FLOE_OK)
        return st;
    uint64_t off = 0;
    for (uint32_t i = 0; i < h0.parts; i++) {
        if (i > 0 && (st = floe_file_header_at(path, off, &h, err)) != FLOE_OK)
            return st;
        const floe_file_header *hi = i ? &h : &h0;
        if (hi->parts != h0.parts || hi->part != i || !same_table(&hi->spec, &h0.spec))
            return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s: damaged (part %u does not match part 0)", path, i);
        where[i] = (floe_file_part){off, i};
        off += floe_file_bytes(hi);
    }
    *nparts = h0.parts;
    *whole = h0.spec;
    whole->capacity = h0.whole_capacity;
    whole->memory = h0.whole_memory;
    return FLOE_OK;
}
