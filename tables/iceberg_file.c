/*
 * iceberg_file.c - the CPU engine's SET and MAP tables in files (see
 * iceberg.h): a table saved, copied or lent as an image, loaded and
 * checked row by row, and its arrays and counters handed to and from
 * another engine.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "iceberg.h"
#include "iceberg_store.h"
#include "tablefile.h"

/* The file header and sections of t, pointing into its arrays. */
static void file_view(iceberg *t, floe_file_header *h, const void **sections)
{
    memset(h, 0, sizeof *h);
    h->spec = t->spec;
    h->layout_version = floe_layout_version(t->s.g.first_fill, t->three);
    h->addr_bits = t->addr_bits;
    h->three = t->three;
    h->generation = atomic_load(&t->generation);
    h->tombstones = atomic_load(&t->tombstones);
    for (int l = 0; l < FLOE_LEVELS; l++)
        h->used[l] = atomic_load(&t->used[l]);
    h->keys = iceberg_used_slots(t) - h->tombstones;
    h->nsections = FLOE_LEVELS + 1;
    for (int l = 0; l < FLOE_LEVELS; l++) {
        h->section_bytes[l] = t->s.bytes[l];
        sections[l] = (const void *)t->s.words[l];
    }
    h->section_bytes[FLOE_LEVELS] = t->s.values_bytes;
    sections[FLOE_LEVELS] = t->s.values;
}

floe_status iceberg_save(iceberg *t, const char *path, floe_errinfo *err)
{
    /* The write lock: the file must be one consistent state. */
    pthread_rwlock_wrlock(&t->lock);
    floe_file_header h;
    const void *sections[FLOE_FILE_MAX_SECTIONS];
    file_view(t, &h, sections);
    floe_status st = floe_file_save(path, &h, sections, err);
    pthread_rwlock_unlock(&t->lock);
    return st;
}

floe_status iceberg_copy_image(iceberg *t, floe_file_image **out, floe_errinfo *err)
{
    pthread_rwlock_wrlock(&t->lock);
    floe_file_header h;
    const void *sections[FLOE_FILE_MAX_SECTIONS];
    file_view(t, &h, sections);
    *out = floe_file_image_copy(&h, sections);
    pthread_rwlock_unlock(&t->lock);
    if (!*out)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory copying table %s for a snapshot", t->spec.name);
    return FLOE_OK;
}

static void release_table(floe_file_image *im)
{
    iceberg_destroy(im->owner);
}

floe_status iceberg_image_of(iceberg *t, floe_file_image **out, floe_errinfo *err)
{
    floe_file_image *im = floe_calloc(1, sizeof *im);
    if (!im)
        return floe_errinfo_set(err, FLOE_ERR_INTERNAL, "out of memory");
    file_view(t, &im->h, im->sections);
    im->owner = t;
    im->release = release_table;
    *out = im;
    return FLOE_OK;
}

/* Recounts a loaded table: counters in the header must match the rows. */
floe_status iceberg_verify_loaded(iceberg *t, const floe_file_header *h, const char *path, floe_errinfo *err)
{
    const store *s = &t->s;
    uint64_t tomb = 0;
    for (uint32_t l = 0; l < FLOE_LEVELS; l++) {
        const floe_level *lv = &s->g.level[l];
        uint64_t used = 0, nb = floe_level_buckets(lv);
        for (uint64_t b = 0; b < nb; b++) {
            const aword *bp = bucket_ptr(s, l, b);
            bool seen_empty = false;
            for (uint32_t i = 0; i < lv->slots; i++) {
                uint64_t w = atomic_load_explicit(&bp[floe_row_word(lv->row_bits, i)], memory_order_relaxed);
                uint64_t row = (w >> ((i * lv->row_bits) & 63)) & floe_row_mask(lv->row_bits);
                if (row == FLOE_ROW_EMPTY) {
                    seen_empty = true;
                    continue;
                }
                if (seen_empty || row == floe_row_busy(lv->row_bits) ||
                    (floe_row_is_key(row, lv->row_bits) && floe_row_remainder(l, row) > floe_mask_bits(lv->rem_bits)))
                    return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is damaged: bad row in level %u bucket %llu",
                                            path, l, (unsigned long long)b);
                used++;
                tomb += row == floe_row_tombstone(lv->row_bits);
            }
        }
        if (used != h->used[l])
            return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is damaged: level %u holds %llu rows, header says %llu",
                                    path, l, (unsigned long long)used, (unsigned long long)h->used[l]);
    }
    if (tomb != h->tombstones || h->keys != h->used[0] + h->used[1] + h->used[2] - tomb)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is damaged: key and tombstone counts disagree", path);
    return FLOE_OK;
}

floe_status iceberg_load(const char *path, uint64_t offset, floe_pool *pool, iceberg **out, floe_errinfo *err)
{
    floe_file_header h;
    floe_file_reader *r;
    iceberg *t = NULL;
    floe_status st = floe_file_open(path, offset, &h, &r, err);
    if (st != FLOE_OK)
        return st;
    floe_errinfo spec_err;
    if ((h.spec.kind != FLOE_KIND_SET && h.spec.kind != FLOE_KIND_MAP && h.spec.kind != FLOE_KIND_STATIC) || h.frozen) {
        st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%s holds a %s%s table, not a SET or MAP", path,
                              h.frozen ? "frozen " : "", floe_kind_name(h.spec.kind));
        goto out;
    }
    if (floe_spec_validate(&h.spec, &spec_err) != FLOE_OK || h.spec.seed == 0) {
        st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%s holds an invalid table spec: %s", path,
                              h.spec.seed == 0 ? "seed 0" : spec_err.msg);
        goto out;
    }
    if (iceberg_size_check(h.spec.key_bits, h.addr_bits, h.three, &spec_err) != FLOE_OK) {
        st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is damaged: %s", path, spec_err.msg);
        goto out;
    }
    floe_geometry g;
    floe_geometry_init(&g, h.spec.key_bits, h.addr_bits, h.three, h.spec.seed);
    uint64_t vbytes = floe_spec_has_values(&h.spec) ? g.total_slots * h.spec.value_bytes : 0;
    bool sizes_ok = h.nsections == FLOE_LEVELS + 1 && h.section_bytes[FLOE_LEVELS] == vbytes;
    for (int l = 0; l < FLOE_LEVELS; l++)
        sizes_ok = sizes_ok && h.section_bytes[l] == floe_level_words(&g.level[l]) * sizeof(uint64_t);
    if (!sizes_ok) {
        st = floe_errinfo_set(err, FLOE_ERR_INVALID, "%s is damaged: section sizes do not match the table's geometry",
                              path);
        goto out;
    }
    st = iceberg_create_sized(&h.spec, h.addr_bits, h.three, pool, &t, err);
    if (st != FLOE_OK)
        goto out;
    iceberg_set_first_fill(t, floe_layout_first_fill(h.layout_version));
    void *sections[FLOE_LEVELS + 1];
    for (int l = 0; l < FLOE_LEVELS; l++)
        sections[l] = (void *)t->s.words[l];
    sections[FLOE_LEVELS] = t->s.values;
    st = floe_file_read(r, sections, err);
    if (st != FLOE_OK)
        goto out;
    st = iceberg_verify_loaded(t, &h, path, err);
    if (st != FLOE_OK)
        goto out;
    for (int l = 0; l < FLOE_LEVELS; l++)
        atomic_store(&t->used[l], h.used[l]);
    atomic_store(&t->tombstones, h.tombstones);
    atomic_store(&t->generation, h.generation);
    *out = t;
    t = NULL;
out:
    iceberg_destroy(t);
    floe_file_close(r);
    return st;
}

void iceberg_get_image(iceberg *t, iceberg_image *im)
{
    memset(im, 0, sizeof *im);
    im->addr_bits = t->addr_bits;
    im->three = t->three;
    im->first_fill = t->s.g.first_fill;
    for (int l = 0; l < FLOE_LEVELS; l++) {
        im->sections[l] = (void *)t->s.words[l];
        im->bytes[l] = t->s.bytes[l];
        im->used[l] = atomic_load(&t->used[l]);
    }
    im->sections[FLOE_LEVELS] = t->s.values;
    im->bytes[FLOE_LEVELS] = t->s.values_bytes;
    im->tombstones = atomic_load(&t->tombstones);
    im->generation = atomic_load(&t->generation);
}

void iceberg_set_first_fill(iceberg *t, uint32_t first_fill)
{
    t->s.g.first_fill = first_fill;
}

void iceberg_set_counters(iceberg *t, const uint64_t used[FLOE_LEVELS], uint64_t tombstones, uint64_t generation)
{
    for (int l = 0; l < FLOE_LEVELS; l++)
        atomic_store(&t->used[l], used[l]);
    atomic_store(&t->tombstones, tombstones);
    atomic_store(&t->generation, generation);
}
