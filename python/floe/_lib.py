"""The C side: libfloe's declarations (client/floe.h) and the library, opened
with cffi in ABI mode (no compiler).  FLOE_LIB names the library's path;
otherwise the installed libfloe.so.0 is found as the dynamic linker finds it,
then under /usr/local/lib and /usr/lib."""
import ctypes.util
import os

from cffi import FFI

ffi = FFI()
ffi.cdef(
    """
typedef struct floe floe;
typedef struct floe_call floe_call;

int floe_connect(const char *uri, const char *token, floe **out);
void floe_close(floe *c);
void floe_set_timeout(floe *c, int timeout_ms);
int floe_error(const floe *c);
const char *floe_errstr(const floe *c);
const char *floe_strerror(int code);
const char *floe_version(void);
unsigned floe_shards(const floe *c);

typedef struct floe_server_info {
    unsigned version;
    char server[64];
    uint64_t max_frame;
    uint64_t max_batch_keys;
    unsigned max_inflight;
    char backend[16];
    char features[128];
} floe_server_info;
const floe_server_info *floe_info(const floe *c);

typedef struct floe_table_def {
    const char *name;
    int kind;
    unsigned key_bits;
    unsigned value_bytes;
    uint64_t capacity;
    int grow;
    double max_fill;
    const char *backend;
    unsigned words;
    uint64_t memory;
    int no_grow;
    unsigned parts;
    int explore;
    unsigned label_bytes;
    int any_order;
} floe_table_def;

typedef struct floe_level_info {
    uint64_t slots, used;
    unsigned row_bits;
    double fill;
} floe_level_info;

typedef struct floe_stage_info {
    char name[16];
    uint64_t count, keys, nanos;
} floe_stage_info;

typedef struct floe_part_info {
    uint64_t keys, slots, memory_bytes, generation;
    int device;
} floe_part_info;

typedef struct floe_table_info {
    char name[65];
    int kind;
    unsigned key_bits, value_bytes;
    uint64_t capacity;
    int grow;
    double max_fill;
    uint64_t seed;
    uint64_t keys, tombstones, slots, memory_bytes, generation;
    double fill, bytes_per_key;
    char backend[16];
    floe_level_info level[3];
    unsigned words;
    uint64_t memory;
    uint64_t nodes;
    uint64_t node_slots;
    double node_fill;
    uint64_t orphan_nodes;
    double compression;
    unsigned n_stages;
    floe_stage_info stages[16];
    int device;
    unsigned n_parts;
    floe_part_info parts[16];
    unsigned shard, shards;
    uint64_t shard_set;
    struct {
        int on, done;
        uint64_t states, open, claimed, claims;
        uint32_t levels;
        char memory[16];
    } explore;
    int frozen;
} floe_table_info;

typedef struct floe_counts {
    uint64_t inserted, present, absent, full, erased;
} floe_counts;

typedef struct floe_range_cursor {
    unsigned char bytes[24];
    int started;
} floe_range_cursor;

typedef struct floe_setting {
    char name[64];
    char value[1100];
    int live;
} floe_setting;

int floe_ping(floe *c);
int floe_create(floe *c, const floe_table_def *def);
int floe_drop(floe *c, const char *table);
int floe_tables(floe *c, floe_table_info **tables, size_t *n);
int floe_stats(floe *c, const char *table, floe_table_info *info);
int floe_snapshot(floe *c, const char *table);
int floe_freeze(floe *c, const char *table);
int floe_get_by_id(floe *c, const char *table, const uint64_t *ids, size_t n, unsigned words, uint8_t *results,
                   uint32_t *vectors);
int floe_range(floe *c, const char *table, uint64_t lo, uint64_t hi, unsigned flags, floe_range_cursor *cursor,
               size_t limit, uint64_t *keys, void *values, unsigned value_bytes, size_t *n, int *done);
int floe_min(floe *c, const char *table, int *found, uint64_t *key, void *value, unsigned value_bytes);
int floe_max(floe *c, const char *table, int *found, uint64_t *key, void *value, unsigned value_bytes);
int floe_config_get(floe *c, const char *pattern, floe_setting **settings, size_t *n, char *file, size_t file_len);
int floe_config_set(floe *c, const char *name, const char *value);

typedef void floe_callback(floe *c, floe_call *call, void *arg);
floe_call *floe_send_insert(floe *c, const char *table, const uint64_t *keys, size_t n, const void *values,
                            size_t values_len, unsigned flags, floe_callback *cb, void *arg);
floe_call *floe_send_find(floe *c, const char *table, const uint64_t *keys, size_t n, unsigned flags, floe_callback *cb,
                          void *arg);
floe_call *floe_send_erase(floe *c, const char *table, const uint64_t *keys, size_t n, floe_callback *cb, void *arg);
floe_call *floe_send_add(floe *c, const char *table, const uint64_t *keys, size_t n, const void *deltas,
                         size_t deltas_len, floe_callback *cb, void *arg);
floe_call *floe_send_insert_vectors(floe *c, const char *table, const uint32_t *vectors, size_t n, unsigned words,
                                    unsigned flags, floe_callback *cb, void *arg);
floe_call *floe_send_find_vectors(floe *c, const char *table, const uint32_t *vectors, size_t n, unsigned words,
                                  unsigned flags, floe_callback *cb, void *arg);
floe_call *floe_send_successor(floe *c, const char *table, const uint64_t *keys, size_t n, unsigned flags,
                               floe_callback *cb, void *arg);
floe_call *floe_send_predecessor(floe *c, const char *table, const uint64_t *keys, size_t n, unsigned flags,
                                 floe_callback *cb, void *arg);
int floe_wait(floe *c, floe_call *call);
int floe_call_status(const floe_call *call);
const char *floe_call_error(const floe_call *call);
const uint8_t *floe_call_results(const floe_call *call, size_t *n);
const unsigned char *floe_call_ids(const floe_call *call, size_t *bytes);
const unsigned char *floe_call_values(const floe_call *call, size_t *bytes);
const unsigned char *floe_call_keys(const floe_call *call, size_t *bytes);
void floe_call_counts(const floe_call *call, floe_counts *counts);
void floe_call_free(floe_call *call);

void free(void *p);
"""
)


def _open():
    path = os.environ.get("FLOE_LIB")
    if path:
        return ffi.dlopen(path)
    tried = []
    for name in (ctypes.util.find_library("floe"), "libfloe.so.0", "/usr/local/lib/libfloe.so.0", "/usr/lib/libfloe.so.0"):
        if not name:
            continue
        try:
            return ffi.dlopen(name)
        except OSError as e:
            tried.append("%s (%s)" % (name, e))
    raise ImportError("floe: cannot open libfloe (make install, or FLOE_LIB=/path/libfloe.so): tried " + "; ".join(tried))


lib = _open()
C = ffi.dlopen(None)  # libc, for free()
