/*
 * ordered.c - the requests of ORDERED tables: range, min and max (a range
 * of one key over every key, answered as a successor's), successor and
 * predecessor (key requests: keys.c serves them, from the fields here).
 */
#include <string.h>

#include "handlers.h"

/* A range's cursor: the key the next reply starts from, the table's
 * generation, and a tag of the table (its seed) and the range (bounds,
 * direction), so that a cursor of another table or range is refused. */
#define RANGE_CURSOR_BYTES 24

static uint64_t range_tag(uint64_t seed, uint64_t from, uint64_t to, bool desc)
{
    uint64_t x = seed ^ (desc ? 0xD1B54A32D192ED03ull : 0);
    uint64_t h = floe_splitmix64(&x);
    x = h ^ from;
    h = floe_splitmix64(&x);
    x = h ^ to;
    return floe_splitmix64(&x);
}

/* A min or max: its range's one key, answered as a successor's. */
static frame *bound_reply(const batcher *bt, const floe_batch *b, const item *it)
{
    Floe__V1__Response r = FLOE__V1__RESPONSE__INIT;
    uint8_t result = b->scan_n ? FLOE_PRESENT : FLOE_ABSENT;
    uint64_t key = b->scan_n ? b->scan_keys[0] : 0;
    uint8_t value[8] = {0};
    if (b->scan_n && b->scan_values)
        memcpy(value, b->scan_values, bt->value_bytes);
    r.id = it->id;
    r.results.data = &result;
    r.results.len = 1;
    r.keys.data = (uint8_t *)&key;
    r.keys.len = 8;
    if (b->scan_values) {
        r.values.data = value;
        r.values.len = bt->value_bytes;
    }
    r.present = b->scan_n;
    r.absent = !b->scan_n;
    return reply_pack(&r);
}

/* A range's answer: its keys with its cursor, or a min's or max's key. */
frame *range_reply(const job_end *e, const item *it)
{
    if (it->row->metric != METRICS_OP_RANGE)
        return bound_reply(e->bt, e->b, it);
    const uint64_t tag = range_tag(e->bt->table->spec.seed, it->from, it->to, e->b->desc);
    return scan_frame(e->bt, e->b, it, &tag);
}

/* A range, or a min or max (a range of one key over every key). */
void handle_range(server *srv, session *c, Floe__V1__Request *req, const request_row *row)
{
    const Floe__V1__Range *rg = req->range;
    const bool bound = row->metric != METRICS_OP_RANGE;
    const char *name = row->metric == METRICS_OP_MIN   ? req->min->table
                       : row->metric == METRICS_OP_MAX ? req->max->table
                                                       : rg->table;
    table_entry *e = request_table(srv, c, req->id, name, req);
    item *it = e ? request_item(srv, c, req, row, e) : NULL;
    if (!it)
        return;
    const floe_spec *spec = &e->table->spec;
    job *j = &it->j;
    j->gone = &c->gone;
    j->unread = &c->unread;
    bool want_values;
    if (bound) {
        want_values = row->metric == METRICS_OP_MIN ? req->min->want_values : req->max->want_values;
        it->from = 0;
        it->to = floe_mask_bits(spec->key_bits ? spec->key_bits : 64);
        j->desc = row->metric == METRICS_OP_MAX;
        j->limit = 1;
    } else {
        want_values = rg->want_values;
        it->from = rg->from;
        it->to = rg->to;
        j->desc = rg->desc;
        j->limit = rg->limit ? rg->limit : FLOE_SCAN_DEFAULT_LIMIT;
        if (j->limit > FLOE_SCAN_MAX_LIMIT)
            j->limit = FLOE_SCAN_MAX_LIMIT;
    }
    j->lo = it->from;
    j->hi = it->to;
    j->flags = want_values ? FLOE_BATCH_WANT_VALUES : 0;
    floe_errinfo err;
    floe_status st = request_shard_check(spec, req, err.msg, sizeof err.msg);
    if (st == FLOE_OK)
        st = floe_range_check(spec, j->flags, j->lo, j->hi, &err);
    if (st != FLOE_OK) {
        item_refuse(it, st, err.msg);
    } else if (!bound && rg->cursor.len != 0) {
        uint64_t next, generation, tag;
        if (rg->cursor.len != RANGE_CURSOR_BYTES) {
            item_refuse(it, FLOE_ERR_INVALID,
                        "a range cursor is empty (the start) or the 24 bytes of a previous ScanReply.cursor of the "
                        "same range");
        } else {
            memcpy(&next, rg->cursor.data, 8);
            memcpy(&generation, rg->cursor.data + 8, 8);
            memcpy(&tag, rg->cursor.data + 16, 8);
            if (tag != range_tag(spec->seed, it->from, it->to, j->desc) || next < j->lo || next > j->hi) {
                item_refuse(it, FLOE_ERR_INVALID,
                            "the range cursor is not one of this range: it comes from another table (or one "
                            "dropped and made again), other bounds or the other direction; start the range again");
            } else {
                if (j->desc)
                    j->hi = next;
                else
                    j->lo = next;
                j->cursor.generation = generation;
                j->cursor_set = 1;
            }
        }
    }
    item_submit(c, e, it);
    entry_unref(e);
}
