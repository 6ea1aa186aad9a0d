/*
 * tablefile.c - save and load table files (format in tablefile.h).
 */
#define _GNU_SOURCE
#include "tablefile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <openssl/evp.h>
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
    put_u32(&c, FLOE_FILE_VERSION);
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
    if (version != FLOE_FILE_VERSION)
        return floe_errinfo_set(err, FLOE_ERR_UNSUPPORTED, "%s has file format version %u; this floe reads version %u",
                              path, version, FLOE_FILE_VERSION);
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
    if (h->layout_version != FLOE_LAYOUT_VERSION)
        return floe_errinfo_set(err, FLOE_ERR_UNSUPPORTED, "%s uses table layout version %u; this floe uses %u", path,
                              h->layout_version, FLOE_LAYOUT_VERSION);
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

floe_status floe_file_save(const char *path, const floe_file_header *h, const void *const *sections, floe_errinfo *err)
{
    unsigned char hdr[FLOE_FILE_HEADER_BYTES];
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    char tmp[4096];
    floe_status st = FLOE_OK;
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "path too long: %s", path);
    int fd = open(tmp, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "cannot create %s: %s", tmp, strerror(errno));
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "cannot initialise SHA-256");
        goto fail;
    }
    encode_header(h, hdr);
    if (write_all(fd, hdr, sizeof hdr, md) != 0)
        goto io_fail;
    for (uint32_t i = 0; i < h->nsections; i++)
        if (h->section_bytes[i] && write_all(fd, sections[i], h->section_bytes[i], md) != 0)
            goto io_fail;
    if (EVP_DigestFinal_ex(md, digest, &dlen) != 1 || dlen != DIGEST_BYTES) {
        st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "cannot finish SHA-256");
        goto fail;
    }
    if (write_all(fd, digest, DIGEST_BYTES, NULL) != 0 || fsync(fd) != 0)
        goto io_fail;
    if (close(fd) != 0) {
        fd = -1;
        goto io_fail;
    }
    fd = -1;
    if (rename(tmp, path) != 0)
        goto io_fail;
    fsync_dir_of(path);
    EVP_MD_CTX_free(md);
    return FLOE_OK;
io_fail:
    st = floe_errinfo_set(err, FLOE_ERR_INTERNAL, "cannot write %s: %s", path, strerror(errno));
fail:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    EVP_MD_CTX_free(md);
    return st;
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

floe_status floe_file_image_save(const char *path, const floe_file_image *im, floe_errinfo *err)
{
    return floe_file_save(path, &im->h, im->sections, err);
}

void floe_file_image_free(floe_file_image *im)
{
    if (!im)
        return;
    if (im->release)
        im->release(im);
    free(im);
}

/* ---- loading ---------------------------------------------------------------------------- */

struct floe_file_reader {
    FILE *f;
    char *path;
    floe_file_header h;
    EVP_MD_CTX *md;
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

floe_status floe_file_open(const char *path, floe_file_header *h, floe_file_reader **out, floe_errinfo *err)
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
    if (fread(hdr, 1, sizeof hdr, r->f) != sizeof hdr) {
        st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is truncated: shorter than a table file header", path);
        goto fail;
    }
    st = decode_header(hdr, &r->h, path, err);
    if (st != FLOE_OK)
        goto fail;
    /* Sizes come from an unverified header: check them against the file's
     * length before anyone allocates that much. */
    uint64_t expect = FLOE_FILE_HEADER_BYTES + DIGEST_BYTES;
    for (uint32_t i = 0; i < r->h.nsections; i++) {
        if (r->h.section_bytes[i] > (uint64_t)sb.st_size) {
            st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%s: damaged header (section %u size)", path, i);
            goto fail;
        }
        expect += r->h.section_bytes[i];
    }
    if (expect != (uint64_t)sb.st_size) {
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

floe_status floe_file_read(floe_file_reader *r, void *const *sections, floe_errinfo *err)
{
    unsigned char want[EVP_MAX_MD_SIZE], got[DIGEST_BYTES];
    unsigned int dlen = 0;
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
    if (fread(got, 1, sizeof got, r->f) != sizeof got)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is truncated: no checksum", r->path);
    if (EVP_DigestFinal_ex(r->md, want, &dlen) != 1 || dlen != DIGEST_BYTES)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "cannot finish SHA-256");
    if (memcmp(want, got, DIGEST_BYTES) != 0)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is damaged: checksum mismatch", r->path);
    return FLOE_OK;
}

floe_status floe_file_kind(const char *path, floe_kind *kind, floe_errinfo *err)
{
    floe_file_header h;
    floe_file_reader *r;
    floe_status st = floe_file_open(path, &h, &r, err);
    if (st != FLOE_OK)
        return st;
    *kind = h.spec.kind;
    floe_file_close(r);
    return FLOE_OK;
}
