/*
 * spec.c - table spec defaults and validation (see spec.h).
 */
#include "spec.h"

#include "tree_layout.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <time.h>

void floe_spec_default(floe_spec *s)
{
    memset(s, 0, sizeof *s);
    s->kind = FLOE_KIND_SET;
    s->key_bits = 64;
    s->capacity = FLOE_DEFAULT_CAPACITY;
    s->max_fill = FLOE_DEFAULT_MAX_FILL;
    strcpy(s->backend, "auto");
}

const char *floe_kind_name(floe_kind k)
{
    switch (k) {
    case FLOE_KIND_SET:
        return "SET";
    case FLOE_KIND_MAP:
        return "MAP";
    case FLOE_KIND_TREE:
        return "TREE";
    case FLOE_KIND_ORDERED:
        return "ORDERED";
    case FLOE_KIND_STATIC:
        return "STATIC";
    default:
        return "KIND_UNSPECIFIED";
    }
}

const char *floe_stage_name(int stage)
{
    static const char *const names[FLOE_STAGES] = {
        "parse",  "queue", "merge",     "backend", "split", "stage_in", "h2d",
        "kernel", "d2h",   "stage_out", "join",    "reply", "io_cpu",
    };
    return stage >= 0 && stage < FLOE_STAGES ? names[stage] : NULL;
}

uint64_t floe_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool name_ok(const char *n)
{
    size_t len = strnlen(n, FLOE_NAME_MAX + 1);
    /* a name is also a file name in data-dir: no ".", "..", or hidden files */
    if (len == 0 || len > FLOE_NAME_MAX || n[0] == '.')
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = n[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
                  c == '.';
        if (!ok)
            return false;
    }
    return true;
}

floe_status floe_spec_validate(const floe_spec *s, floe_errinfo *err)
{
    if (!name_ok(s->name))
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "table name must be 1 to %d characters of letters, digits, '_', '-' or '.', not "
                                "starting with '.'",
                                FLOE_NAME_MAX);
    if (s->kind < FLOE_KIND_SET || s->kind > FLOE_KIND_STATIC)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "table kind must be SET, MAP, TREE, ORDERED or STATIC");
    if (s->kind == FLOE_KIND_TREE) {
        if (s->words < FLOE_TREE_MIN_WORDS || s->words > FLOE_TREE_MAX_WORDS)
            return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                    "a TREE needs words = %u..%u (32-bit words per vector), got %u",
                                    FLOE_TREE_MIN_WORDS, FLOE_TREE_MAX_WORDS, s->words);
        if (s->key_bits != 0)
            return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                    "key_bits is for SET and MAP; a TREE's keys are vectors of `words` words (got "
                                    "key_bits %u)",
                                    s->key_bits);
        if (s->value_bytes != 0)
            return floe_errinfo_set(err, FLOE_ERR_INVALID, "a TREE has no values: value_bytes must be 0, got %u",
                                    s->value_bytes);
    } else {
        if (s->key_bits < 1 || s->key_bits > 64)
            return floe_errinfo_set(err, FLOE_ERR_INVALID, "key_bits must be 1..64, got %u", s->key_bits);
        if (s->kind == FLOE_KIND_SET && s->value_bytes != 0)
            return floe_errinfo_set(err, FLOE_ERR_INVALID, "a SET has no values: value_bytes must be 0, got %u",
                                    s->value_bytes);
        if (s->kind == FLOE_KIND_MAP && s->value_bytes != 4 && s->value_bytes != 8)
            return floe_errinfo_set(err, FLOE_ERR_INVALID, "a MAP needs value_bytes 4 or 8, got %u", s->value_bytes);
        if ((s->kind == FLOE_KIND_ORDERED || s->kind == FLOE_KIND_STATIC) && s->value_bytes != 0 &&
            s->value_bytes != 4 && s->value_bytes != 8)
            return floe_errinfo_set(err, FLOE_ERR_INVALID, "%s %s table's value_bytes is 0 (keys only), 4 or 8, got %u",
                                    s->kind == FLOE_KIND_ORDERED ? "an" : "a", floe_kind_name(s->kind), s->value_bytes);
        if (s->words != 0)
            return floe_errinfo_set(err, FLOE_ERR_INVALID, "words is for TREE tables; a %s needs words = 0",
                                    floe_kind_name(s->kind));
        if (s->memory != 0)
            return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                    "memory is for TREE tables; a %s is sized by capacity (memory must be 0)",
                                    floe_kind_name(s->kind));
    }
    if (s->capacity == 0)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "capacity must be at least 1");
    if (s->capacity > FLOE_MAX_CAPACITY)
        return floe_errinfo_set(err, FLOE_ERR_TOO_LARGE, "capacity %llu is above the limit of 2^40 keys",
                                (unsigned long long)s->capacity);
    if (!(s->max_fill > 0.0 && s->max_fill <= 1.0) || isnan(s->max_fill))
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "max_fill must be in (0, 1], got %g", s->max_fill);
    if (s->shards == 0 ? s->shard != 0 || s->shard_set != 0
                       : s->shards < 2 || s->shards > FLOE_SHARDS_MAX || s->shard >= s->shards || s->shard_set == 0)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "a shard is shard 0..shards-1 of 2..%u shards with a nonzero shard_set (all 0 for a "
                                "whole table); got shard %u of %u, shard_set %llx",
                                FLOE_SHARDS_MAX, s->shard, s->shards, (unsigned long long)s->shard_set);
    if (!memchr(s->backend, '\0', sizeof s->backend) ||
        (s->backend[0] && strcmp(s->backend, "cpu") != 0 && strcmp(s->backend, "gpu") != 0 &&
         strcmp(s->backend, "auto") != 0))
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "backend must be cpu, gpu or auto");
    if (s->parts > FLOE_PARTS_MAX)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "parts must be 0 (the server's choice) to %d, got %u",
                                FLOE_PARTS_MAX, s->parts);
    if (s->explore && s->kind != FLOE_KIND_SET && s->kind != FLOE_KIND_MAP && s->kind != FLOE_KIND_TREE)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "explore is for SET, MAP and TREE tables, not %s",
                                floe_kind_name(s->kind));
    if (s->explore_any_order && s->shards)
        return floe_errinfo_set(err, FLOE_ERR_UNSUPPORTED,
                                "an exploring table over several floed is breadth-first: its workers end each level "
                                "(explore_any_order is for a table on one floed)");
    if ((s->label_bytes || s->explore_any_order) && !s->explore)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "label_bytes and explore_any_order go with explore");
    if (s->label_bytes > 4)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "label_bytes is 0..4, got %u", s->label_bytes);
    if (s->kind == FLOE_KIND_ORDERED && s->parts > 1)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "an ORDERED table is one part (its order is one structure's), "
                                "not %u",
                                s->parts);
    return FLOE_OK;
}

void floe_answer_counts_tally(floe_answer_counts *c, const uint8_t *results, size_t n)
{
    if (!c)
        return;
    /* A GPU batch's answers are tallied on the table's worker, in the way
     * of its next piece: sixteen at a time where the host has SSE2 (0.1 ns
     * a key, against 0.4-1 for a histogram per byte). */
    uint64_t count[5] = {0};
    size_t i = 0;
#ifdef __SSE2__
    const __m128i zero = _mm_setzero_si128();
    while (i + 16 <= n) {
        __m128i acc[5] = {zero, zero, zero, zero, zero}; /* per byte lane: at most 255 before they are added up */
        const size_t end = n - i > 255 * 16 ? i + 255 * 16 : i + (n - i) / 16 * 16;
        for (; i < end; i += 16) {
            const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(results + i));
            for (int k = 0; k < 5; k++)
                acc[k] = _mm_sub_epi8(acc[k], _mm_cmpeq_epi8(v, _mm_set1_epi8((char)k)));
        }
        for (int k = 0; k < 5; k++) {
            const __m128i sums = _mm_sad_epu8(acc[k], zero);
            count[k] += (uint64_t)_mm_cvtsi128_si64(sums) + (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(sums, sums));
        }
    }
#endif
    for (; i < n; i++)
        if (results[i] < 5)
            count[results[i]]++;
    floe_answer_counts_of(c, count);
}

void floe_answer_counts_of(floe_answer_counts *c, const uint64_t by_answer[5])
{
    c->inserted = by_answer[FLOE_INSERTED];
    c->present = by_answer[FLOE_PRESENT];
    c->absent = by_answer[FLOE_ABSENT];
    c->full = by_answer[FLOE_FULL];
    c->erased = by_answer[FLOE_ERASED];
}

/* Key i of n packed u64 keys at any alignment: the wire's bytes, as they
 * arrive, are not always aligned; a batch's keys are. */
static inline uint64_t key_at(const unsigned char *keys, size_t i)
{
    uint64_t k;
    memcpy(&k, keys + i * 8, 8);
    return k;
}

/* Present, fewer than 2^32, and (scan) each below 2^key_bits. */
static floe_status keys_check(uint32_t key_bits, const void *keys, size_t n, bool scan, floe_errinfo *err)
{
    if (n > 0 && !keys)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "no keys given for %zu keys", n);
    if (n >= ((size_t)1 << 32))
        return floe_errinfo_set(err, FLOE_ERR_TOO_LARGE, "a batch holds at most 2^32 - 1 keys, got %zu", n);
    if (key_bits >= 64 || !scan)
        return FLOE_OK;
    const unsigned char *p = keys;
    uint64_t over = 0; /* one branch-free pass; the slow one only to name the culprit */
    for (size_t i = 0; i < n; i++)
        over |= key_at(p, i) >> key_bits;
    for (size_t i = 0; over && i < n; i++)
        if (key_at(p, i) >> key_bits)
            return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                    "key %llu at index %zu does not fit in key_bits = %u (must be below 2^%u)",
                                    (unsigned long long)key_at(p, i), i, key_bits, key_bits);
    return FLOE_OK;
}

/* A shard's inserts are of its own keys (vectors): a key of another shard
 * stored here would be stored twice over the shards (the client puts it on
 * its own).  A find or an erase of one only answers ABSENT, as a shard's
 * own view of the key. */
static floe_status own_keys(const floe_spec *spec, const unsigned char *p, size_t count, bool vectors,
                            floe_errinfo *err)
{
    const size_t wb = (size_t)spec->words * 4;
    uint32_t w[FLOE_TREE_MAX_WORDS];
    for (size_t i = 0; i < count; i++) {
        unsigned s;
        if (vectors) {
            memcpy(w, p + i * wb, wb);
            s = floe_shard_of_vector(w, spec->words, spec->shards);
        } else {
            s = floe_shard_of_key(key_at(p, i), spec->shards);
        }
        if (s != spec->shard)
            return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                    "table %s is shard %u of %u: its %s at index %zu belongs to shard %u (keys go to "
                                    "the shard of their hash; nothing was changed)",
                                    spec->name, spec->shard, spec->shards, vectors ? "vector" : "key", i, s);
    }
    return FLOE_OK;
}

bool floe_keys_fit(uint32_t key_bits, const uint64_t *keys, size_t n)
{
    if (key_bits >= 64)
        return true;
    uint64_t over = 0;
    for (size_t i = 0; i < n; i++)
        over |= keys[i] >> key_bits;
    return over == 0;
}

/* Why a table of spec (without values) refuses values or overwrite, in floed's words. */
static floe_status no_values(const floe_spec *spec, const char *what, floe_errinfo *err)
{
    if (spec->kind == FLOE_KIND_ORDERED || spec->kind == FLOE_KIND_STATIC)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "table %s is %s %s table of value_bytes 0: it stores keys only; %s are for MAP "
                                "tables and %s tables with values",
                                spec->name, spec->kind == FLOE_KIND_ORDERED ? "an" : "a", floe_kind_name(spec->kind),
                                what, floe_kind_name(spec->kind));
    return floe_errinfo_set(err, FLOE_ERR_INVALID, "table %s is a %s: %s are for MAP tables", spec->name,
                            floe_kind_name(spec->kind), what);
}

/* A scan takes no keys; its flags ask for values (of a table with values) or ids (a TREE's). */
static floe_status scan_check(const floe_spec *spec, unsigned flags, size_t keys_len, size_t values_len,
                              floe_errinfo *err)
{
    const char *kind = floe_kind_name(spec->kind);
    if ((flags & FLOE_BATCH_WANT_VALUES) && !floe_spec_has_values(spec))
        return no_values(spec, "values in a scan", err);
    if ((flags & FLOE_BATCH_WANT_IDS) && spec->kind != FLOE_KIND_TREE)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "ids in a scan are for TREE tables; table %s is a %s",
                                spec->name, kind);
    if (flags & ~FLOE_BATCH_FLAGS)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "table %s: unknown flags 0x%x", spec->name,
                                flags & ~FLOE_BATCH_FLAGS);
    if (keys_len || values_len)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "table %s: a scan takes no keys or values (got %zu and %zu bytes)", spec->name,
                                keys_len, values_len);
    return FLOE_OK;
}

/* Why op is not for the kind of spec's table (its row names the kinds it
 * is for), in floed's words. */
static floe_status not_for_kind(const floe_spec *spec, floe_op op, floe_errinfo *err)
{
    const char *name = spec->name, *kind = floe_kind_name(spec->kind);
    if (spec->kind == FLOE_KIND_TREE && op == FLOE_OP_ERASE)
        return floe_errinfo_set(
            err, FLOE_ERR_UNSUPPORTED,
            "table %s is a TREE: TREE tables do not erase (vectors share their nodes; a visited set only grows)", name);
    if (spec->kind == FLOE_KIND_TREE && op == FLOE_OP_REBUILD)
        return floe_errinfo_set(err, FLOE_ERR_UNSUPPORTED,
                                "table %s is a TREE: TREE tables do not rebuild (ids must stay valid)", name);
    if (spec->kind == FLOE_KIND_ORDERED && op == FLOE_OP_REBUILD)
        return floe_errinfo_set(err, FLOE_ERR_UNSUPPORTED,
                                "table %s is ORDERED: an ORDERED table has no slots to rebuild", name);
    const unsigned kinds = floe_op_def(op)->kinds;
    char list[64] = "";
    for (int k = FLOE_KIND_SET; k <= FLOE_KIND_STATIC; k++)
        if (kinds & (1u << k)) {
            const size_t at = strlen(list);
            snprintf(list + at, sizeof list - at, "%s%s", at ? ", " : "", floe_kind_name((floe_kind)k));
        }
    return floe_errinfo_set(err, FLOE_ERR_UNSUPPORTED, "%s is for %s tables; table %s is a %s", floe_op_name(op), list,
                            name, kind);
}

/* The messages are floed's answers, word for word: clients and tests match on them. */
static floe_status request_check(const floe_spec *spec, floe_op op, unsigned flags, const void *keys, size_t keys_len,
                                 const void *values, size_t values_len, size_t *n, bool scan_keys, floe_errinfo *err)
{
    const char *name = spec->name;
    const bool valued = floe_spec_has_values(spec), tree = spec->kind == FLOE_KIND_TREE;
    const bool ordered = spec->kind == FLOE_KIND_ORDERED;
    const unsigned map_flags = FLOE_BATCH_OVERWRITE | FLOE_BATCH_WANT_VALUES;
    if (n)
        *n = 0;
    const floe_opdef *def = floe_op_def(op);
    if (!def->kinds) /* not an operation of a table's (an unknown number): nothing to check */
        return FLOE_OK;
    if (!floe_op_for_kind(op, spec->kind))
        return not_for_kind(spec, op, err);
    if (def->shape == FLOE_SHAPE_SCAN)
        return scan_check(spec, flags, keys_len, values_len, err);
    if (def->shape == FLOE_SHAPE_RANGE) {
        if ((flags & FLOE_BATCH_WANT_VALUES) && !valued)
            return no_values(spec, "values in a range", err);
        if (flags & ~FLOE_BATCH_FLAGS)
            return floe_errinfo_set(err, FLOE_ERR_INVALID, "table %s: unknown flags 0x%x", name,
                                    flags & ~FLOE_BATCH_FLAGS);
        return FLOE_OK;
    }
    if (def->shape == FLOE_SHAPE_TABLE)
        return FLOE_OK;

    /* the flags on the kind */
    if (flags & ~FLOE_BATCH_FLAGS)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "table %s: unknown flags 0x%x", name, flags & ~FLOE_BATCH_FLAGS);
    if (ordered && (flags & FLOE_BATCH_WANT_IDS) && (def->flags & FLOE_OPF_IDS_OUT))
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "table %s is ORDERED: its keys have no slot ids (ids are for SET, MAP and TREE tables)",
                                name);
    if (tree && ((flags & map_flags) || values_len))
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "table %s is a TREE: it stores vectors only; values and overwrite are for MAP tables",
                                name);

    /* whole keys (vectors, ids), not too many, present, each below 2^key_bits */
    const bool vectors = floe_op_takes_vectors(op, tree ? spec->words : 0);
    const size_t kb = vectors ? (size_t)spec->words * 4 : 8;
    if (keys_len % kb) {
        if (vectors)
            return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                    "table %s is a TREE of words = %u: keys are vectors of %u little-endian u32 words "
                                    "(%zu bytes each); got %zu bytes, not a multiple of %zu",
                                    name, spec->words, spec->words, kb, keys_len, kb);
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "%s are 8 bytes each (little-endian u64); got %zu bytes, not a multiple of 8",
                                def->shape == FLOE_SHAPE_IDS ? "ids" : "keys", keys_len);
    }
    const size_t count = keys_len / kb;
    if (tree) {
        const char *what = vectors ? "vectors" : "ids";
        if (count > 0 && !keys)
            return floe_errinfo_set(err, FLOE_ERR_INVALID, "table %s: no %s given for %zu %s", name, what, count, what);
        if (count >= ((size_t)1 << 32))
            return floe_errinfo_set(err, FLOE_ERR_TOO_LARGE, "table %s: a batch holds at most 2^32 - 1 %s, got %zu",
                                    name, what, count);
    } else {
        floe_errinfo e;
        floe_status st = keys_check(spec->key_bits, keys, count, scan_keys, &e);
        if (st != FLOE_OK)
            return floe_errinfo_set(err, st, "table %.64s: %.180s", name, e.msg);
    }

    if (spec->shards > 1 && count > 0 && (def->flags & FLOE_OPF_STORES)) {
        /* a key of another shard may not be stored here (a find or erase of one changes nothing) */
        floe_status st = own_keys(spec, keys, count, vectors, err);
        if (st != FLOE_OK)
            return st;
    }

    /* values: an insert's into a table with values, value_bytes per key */
    if (values_len && !valued)
        return no_values(spec, "values", err);
    const bool values_in = (def->flags & FLOE_OPF_VALUES_IN) != 0;
    if (values_len && !values_in)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "table %s: values go with an insert only", name);
    if (valued && values_in && values_len != count * spec->value_bytes)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "%zu keys need %zu bytes of values (%u per key) in table %s; got %zu", count,
                                count * spec->value_bytes, spec->value_bytes, name, values_len);
    if (values_len && !values)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "table %s: %zu bytes of values announced but none given", name,
                                values_len);
    if (!valued && (flags & map_flags))
        return no_values(spec, "overwrite and values", err);
    if (n)
        *n = count;
    return FLOE_OK;
}

floe_status floe_request_check(const floe_spec *spec, floe_op op, unsigned flags, const void *keys, size_t keys_len,
                               const void *values, size_t values_len, size_t *n, floe_errinfo *err)
{
    return request_check(spec, op, flags, keys, keys_len, values, values_len, n, true, err);
}

floe_status floe_states_check(const floe_spec *spec, unsigned flags, size_t parents_len, const uint8_t *counts,
                              size_t counts_len, const uint8_t *changes, size_t changes_len, size_t *n,
                              floe_errinfo *err)
{
    const char *name = spec->name;
    if (n)
        *n = 0;
    if (spec->kind != FLOE_KIND_TREE)
        return floe_errinfo_set(err, FLOE_ERR_UNSUPPORTED,
                                "table %s is a %s: states by their parents are for TREE tables", name,
                                floe_kind_name(spec->kind));
    if (flags & ~FLOE_BATCH_FLAGS)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "table %s: unknown flags 0x%x", name, flags & ~FLOE_BATCH_FLAGS);
    if (flags & (FLOE_BATCH_OVERWRITE | FLOE_BATCH_WANT_VALUES))
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "table %s is a TREE: it stores vectors only; values and overwrite are for MAP tables",
                                name);
    if (parents_len % 8)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "parent ids are 8 bytes each (little-endian u64); got %zu bytes, not a multiple of 8",
                                parents_len);
    const size_t count = parents_len / 8;
    if (count >= ((size_t)1 << 32))
        return floe_errinfo_set(err, FLOE_ERR_TOO_LARGE, "table %s: a batch holds at most 2^32 - 1 states, got %zu",
                                name, count);
    if (counts_len != count)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "%zu states by parent need %zu change counts (a byte each); got %zu", count, count,
                                counts_len);
    if (count > 0 && !counts)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "table %s: no change counts given for %zu states", name, count);
    size_t total = 0;
    for (size_t i = 0; i < count; i++)
        total += counts[i];
    if (changes_len != total * FLOE_CHANGE_BYTES)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "%zu changed words need %zu bytes of changes (%d each: the word's index and its "
                                "value); got %zu",
                                total, total * FLOE_CHANGE_BYTES, FLOE_CHANGE_BYTES, changes_len);
    if (total > 0 && !changes)
        return floe_errinfo_set(err, FLOE_ERR_INVALID, "table %s: no changes given for %zu changed words", name, total);
    for (size_t c = 0; c < total; c++) {
        const uint32_t word = floe_change_word(changes + c * FLOE_CHANGE_BYTES);
        if (word >= spec->words)
            return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                    "change %zu names word %u; table %s's vectors have words 0..%u", c, word, name,
                                    spec->words - 1);
    }
    if (n)
        *n = count;
    return FLOE_OK;
}

floe_status floe_request_check_fitted(const floe_spec *spec, floe_op op, unsigned flags, const void *keys,
                                      size_t keys_len, const void *values, size_t values_len, size_t *n,
                                      floe_errinfo *err)
{
    return request_check(spec, op, flags, keys, keys_len, values, values_len, n, false, err);
}

floe_status floe_range_check(const floe_spec *spec, unsigned flags, uint64_t lo, uint64_t hi, floe_errinfo *err)
{
    floe_status st = request_check(spec, FLOE_OP_RANGE, flags, NULL, 0, NULL, 0, NULL, false, err);
    if (st != FLOE_OK)
        return st;
    const uint64_t top = floe_mask_bits(spec->key_bits);
    if (lo > top || hi > top)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "table %s: the range's %s %llu does not fit in key_bits = %u (must be below 2^%u)",
                                spec->name, lo > top ? "lower bound" : "upper bound",
                                (unsigned long long)(lo > top ? lo : hi), spec->key_bits, spec->key_bits);
    if (lo > hi)
        return floe_errinfo_set(err, FLOE_ERR_INVALID,
                                "table %s: the range's lower bound %llu is above its upper bound %llu", spec->name,
                                (unsigned long long)lo, (unsigned long long)hi);
    return FLOE_OK;
}
