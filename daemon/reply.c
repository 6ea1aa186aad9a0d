/*
 * reply.c - response frames (see reply.h).
 */
#include "reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

frame *reply_pack(const Floe__V1__Response *r)
{
    size_t len = floe__v1__response__get_packed_size(r);
    frame *f = floe_malloc(sizeof *f + 4 + len);
    if (!f)
        return NULL;
    memset(f, 0, sizeof *f);
    f->status = (floe_status)r->status;
    f->id = r->id;
    f->len = 4 + len;
    f->data[0] = (unsigned char)(len >> 24);
    f->data[1] = (unsigned char)(len >> 16);
    f->data[2] = (unsigned char)(len >> 8);
    f->data[3] = (unsigned char)len;
    floe__v1__response__pack(r, f->data + 4);
    return f;
}

frame *reply_error(uint64_t id, floe_status st, const char *msg)
{
    Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
    r.id = id;
    r.status = (Floe__V1__Status)st;
    r.error = (char *)(msg ? msg : "");
    return reply_pack(&r);
}

frame *reply_errorf(uint64_t id, floe_status st, const char *fmt, ...)
{
    char msg[FLOE_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return reply_error(id, st, msg);
}

frame *reply_ok(uint64_t id)
{
    return reply_error(id, FLOE_OK, NULL);
}

void reply_fill_stats(Floe__V1__TableStats *out, reply_stats_room *room, int one_table, const floe_table_stats *s)
{
    Floe__V1__TableSpec *spec = &room->spec;
    floe__v1__table_stats__init(out);
    floe__v1__table_spec__init(spec);
    spec->name = (char *)s->spec.name;
    spec->kind = (Floe__V1__TableKind)s->spec.kind;
    spec->key_bits = s->spec.key_bits;
    spec->words = s->spec.words;
    spec->value_bytes = s->spec.value_bytes;
    spec->capacity = s->spec.capacity;
    spec->grow = s->spec.grow;
    spec->backend = (char *)s->spec.backend;
    spec->max_fill = s->spec.max_fill;
    spec->seed = s->spec.seed;
    spec->memory = s->spec.memory;
    spec->shard = s->spec.shard;
    spec->shards = s->spec.shards;
    spec->shard_set = s->spec.shard_set;
    spec->parts = s->parts ? s->parts : 1;
    spec->explore = s->spec.explore;
    spec->label_bytes = s->spec.label_bytes;
    spec->explore_any_order = s->spec.explore_any_order;
    out->spec = spec;
    out->keys = s->keys;
    out->slots = s->slots;
    out->fill = s->fill;
    out->memory_bytes = s->memory_bytes;
    out->bytes_per_key = s->bytes_per_key;
    out->generation = s->generation;
    out->backend = (char *)s->backend;
    out->tombstones = s->tombstones;
    out->device = s->device;
    out->frozen = s->frozen;
    if (s->spec.kind == FLOE_KIND_TREE) {
        out->nodes = s->nodes;
        out->node_slots = s->node_slots;
        out->node_fill = s->node_fill;
        out->orphan_nodes = s->orphan_nodes;
        out->compression = s->compression;
    }
    for (int l = 0; l < FLOE_LEVELS; l++) {
        Floe__V1__LevelStats *lv = &room->lv[l];
        floe__v1__level_stats__init(lv);
        lv->slots = s->level[l].slots;
        lv->used = s->level[l].used;
        lv->row_bits = s->level[l].row_bits;
        lv->fill = s->level[l].fill;
        room->lvp[l] = lv;
    }
    out->n_levels = FLOE_LEVELS;
    out->levels = room->lvp;
    if (!one_table)
        return;
    size_t n = 0;
    for (int i = 0; i < FLOE_STAGES; i++) {
        if (!s->stage[i].count)
            continue;
        Floe__V1__StageTime *st = &room->st[n];
        floe__v1__stage_time__init(st);
        st->name = (char *)floe_stage_name(i);
        st->count = s->stage[i].count;
        st->keys = s->stage[i].keys;
        st->nanos = s->stage[i].nanos;
        room->stp[n++] = st;
    }
    out->n_stages = n;
    out->stages = room->stp;
    for (uint32_t p = 0; p < s->parts && p < FLOE_PARTS_MAX; p++) {
        Floe__V1__PartStats *pt = &room->pt[p];
        floe__v1__part_stats__init(pt);
        pt->keys = s->part[p].keys;
        pt->slots = s->part[p].slots;
        pt->memory_bytes = s->part[p].memory_bytes;
        pt->generation = s->part[p].generation;
        pt->device = s->part[p].device;
        room->ptp[p] = pt;
    }
    out->n_parts = s->parts < FLOE_PARTS_MAX ? s->parts : FLOE_PARTS_MAX;
    out->parts = room->ptp;
}
