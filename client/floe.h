/*
 * floe.h - libfloe, the C client of floed.  The whole public API is here.
 *
 * A `floe` is one TCP connection to a floed.  Three ways to use it:
 *
 *   Blocking     floe_insert(c, "states", keys, n, results, &counts): send one
 *                request, wait for its answer.  Simple; one round trip each.
 *   Pipelined    floe_send_insert(...) queues a request and returns a
 *                floe_call at once; many may be in flight.  Completion comes
 *                through a callback (run inside floe_poll / floe_wait) or by
 *                waiting on the call like a future (floe_wait).  The blocking
 *                calls are exactly send + wait.
 *   Batcher      floe_batcher_add(b, key, tag) one key at a time; keys are
 *                sent in large requests with several in flight, and a
 *                callback gets every key's answer with its tag.  For
 *                producers of single states, such as model-checker workers.
 *
 * Errors are values.  Every call returns FLOE_OK (0) or an error code: the
 * protocol's Status codes (floe_wire.h) for errors the server reports, and
 * FLOE_ERR_IO / FLOE_ERR_PROTOCOL for the connection.  floe_errstr(c) holds
 * the last message; floe_strerror(code) names a code.  Nothing is printed.
 *
 * Keys are uint64_t, below 2^key_bits of the table.  MAP values are packed
 * little-endian, value_bytes (4 or 8) per key.  Answers are one byte per key:
 * FLOE_ABSENT, FLOE_PRESENT, FLOE_INSERTED, FLOE_FULL, FLOE_ERASED.
 *
 * TREE tables store vectors of `words` uint32_t words (2..256, fixed at
 * creation) instead of keys: the *_vectors calls take them packed, vector i
 * at vectors[i * words .. i * words + words).  Each stored vector has an id
 * (stable until the table grows: a table created with grow renames them
 * as a SET does) that floe_get_by_id turns back into the vector.  A TREE
 * does not erase or hold values.
 *
 * Threads: a floe and everything made from it (calls, batchers) belong to
 * one thread at a time; use one connection per thread.  Distinct
 * connections are independent.  Callbacks run on the thread that calls
 * floe_poll or floe_wait, and may send new requests on the same connection
 * (they go out on the next floe_poll; floe_poll or floe_wait from inside a
 * callback returns at once).
 */
#ifndef FLOE_CLIENT_H
#define FLOE_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "floe_wire.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FLOE_ERR_IO       100 /* the connection failed or was lost */
#define FLOE_ERR_PROTOCOL 101 /* the server sent something that is not a floe response */
#define FLOE_ERR_TIMEOUT  102 /* no answer within the deadline (floe_options): the connection is closed */
#define FLOE_ERR_TLS      103 /* TLS: the handshake or the server's certificate failed (floe_errstr says why) */

/* Table kinds (the protocol's TableKind). */
#define FLOE_TABLE_SET     1
#define FLOE_TABLE_MAP     2
#define FLOE_TABLE_TREE    3
#define FLOE_TABLE_ORDERED 4
#define FLOE_TABLE_STATIC  5 /* filled by inserts, then frozen (floe_freeze): finds only, from a static cuckoo table */

typedef struct floe floe;
typedef struct floe_call floe_call;

/* ---- connecting ---------------------------------------------------------------------------- */

/* Connects to uri and says hello.  uri: "floe://host:port", "host:port" or
 * "host" (port 7450), or "floes://host:port" for TLS; "?token=SECRET" may
 * follow; token (may be NULL) overrides it.  A list of servers,
 * "floe://h1:p1,h2:p2,h3:p3" (2..256 of them), makes a partitioned
 * connection (see floe_shards below).  Default options (floe_options):
 * a 10 s connect timeout, no per-call deadline, TCP keepalive, and for TLS
 * the system's CA certificates.  On success *out is the connection.  On
 * failure the return code says why and *out, if not NULL, is a closed
 * connection whose floe_errstr tells more: floe_close it either way. */
int floe_connect(const char *uri, const char *token, floe **out);
void floe_close(floe *c);

/* Connection options.  Zero the struct for the defaults. */
typedef struct floe_options {
    const char *token;      /* NULL: none (or the URI's ?token=) */
    /* TCP connect, TLS handshake and hello together: 0: 10000, or timeout_ms if less; -1: no limit */
    int connect_timeout_ms;
    /* Each call's deadline, counted from when it is sent: 0: none.  A call
     * not answered in time completes with FLOE_ERR_TIMEOUT, and so does
     * every other call in flight: the connection is closed (the server may
     * still carry them out); connect again to go on. */
    int timeout_ms;
    int keepalive_s; /* TCP keepalive: first probe after this many idle seconds: 0: 30; -1: off */
    /* TLS (floes://, or tls set): the server's certificate is checked against
     * tls_ca_file (PEM; NULL: the system's CA store) and must name the host
     * of the URI (or tls_server_name).  tls_cert_file and tls_key_file (PEM;
     * the key may be in the cert file) give a client certificate to servers
     * that ask for one. */
    int tls;
    const char *tls_ca_file, *tls_cert_file, *tls_key_file, *tls_server_name;
    char token_store_[FLOE_TOKEN_MAX + 1]; /* private: token-file's token (floe_options_set) */
} floe_options;

/* Partitioned tables: a connection to a list of servers holds one
 * connection to each, and each key lives on the server its hash picks
 * (floe_shard_of_key, floe_shard_of_vector of floe_wire.h: fixed, the same
 * for every client and version).  Every call works as on one server: its
 * keys are split by server, sent to all at once and the answers merged into
 * the caller's order.  A server that fails or answers an error fails the
 * call with its place and name in the message (keys sent to the others may
 * have been stored).  Differences from one server:
 *   - create, drop, snapshot act on every server; a create that fails on one
 *     drops what it made on the others.  The table records the list (a hash
 *     of "host:port,host:port,..." as given, port 7450 when left out) and its
 *     place in it, and refuses key operations from a client with another list
 *     or order, or connected to one server alone (FLOE_ERR_INVALID).
 *   - floe_stats and floe_tables sum the servers' figures (floe_stats on
 *     floe_shard(c, i) gives one server's); a scan walks them in turn.
 *   - ids (TREE, want_ids) carry their server in their top 8 bits; answers'
 *     generation is 0; floe_ids_generation is 0.
 *   - not partitioned: ORDERED tables (create, range, successor,
 *     predecessor, min, max), inserts by parent ids (floe_insert_states: send
 *     whole vectors), floe_server_stats_get (ask each server):
 *     FLOE_ERR_UNSUPPORTED.
 *   - floe_fd is an epoll descriptor over the servers' sockets: it polls
 *     readable when any of them is readable, or writable while it has bytes
 *     to write, so floe_want_write is 0. */
unsigned floe_shards(const floe *c);   /* servers: 1 for a plain connection */
floe *floe_shard(floe *c, unsigned i); /* the connection to server i (c itself for i 0 of a plain one) */
const char *floe_shard_name(const floe *c, unsigned i); /* "host:port" of server i; NULL for a plain connection */

/* floe_connect with options (opts may be NULL: the defaults). */
int floe_connect_opts(const char *uri, const floe_options *opts, floe **out);
/* Changes the per-call deadline for calls sent from now on (0: none). */
void floe_set_timeout(floe *c, int timeout_ms);

/* The options as the floe tools take them, flags and environment alike:
 * --NAME VALUE, or $ENV.  So that every program that uses libfloe can offer
 * them the same way:
 *   token            FLOE_TOKEN            the server's token
 *   token-file       FLOE_TOKEN_FILE       a file holding the token
 *   timeout          FLOE_TIMEOUT          per-call deadline in seconds (0: none)
 *   connect-timeout  FLOE_CONNECT_TIMEOUT  connect deadline in seconds (0: none)
 *   tls              FLOE_TLS              "yes": TLS even for a URI without floes://
 *   tls-ca-file      FLOE_TLS_CA_FILE      CA certificates (PEM) to check the server with
 *   tls-cert-file    FLOE_TLS_CERT_FILE    client certificate (PEM)
 *   tls-key-file     FLOE_TLS_KEY_FILE     its private key (PEM)
 *   tls-server-name  FLOE_TLS_SERVER_NAME  the name the server certificate must carry */
typedef struct floe_option_spec {
    const char *name; /* the flag without dashes */
    const char *env;  /* the environment variable */
    const char *arg;  /* the value's placeholder in a usage line ("SECONDS"), NULL for a switch */
    const char *help; /* one line */
} floe_option_spec;
/* The table above (*n entries). */
const floe_option_spec *floe_option_specs(size_t *n);
/* Sets option name (a floe_option_specs name) from text (NULL for a
 * switch); value is kept by pointer, not copied (token-file is read now).
 * FLOE_OK, or FLOE_ERR_INVALID with a message in err. */
int floe_options_set(floe_options *o, const char *name, const char *value, char *err, size_t errlen);
/* Sets every option whose environment variable is set and not empty;
 * FLOE_OK, or FLOE_ERR_INVALID with a message naming the variable. */
int floe_options_from_env(floe_options *o, char *err, size_t errlen);

int floe_error(const floe *c);          /* the last error code, or FLOE_OK */
const char *floe_errstr(const floe *c); /* its message ("" if none) */
const char *floe_strerror(int code);    /* "OK", "ERR_NO_TABLE", "ERR_IO", ... */
/* A count or size as the floe tools take it: a whole decimal number with an
 * optional K, M, G or T (powers of 1024, as in floed.conf) and an optional
 * i and B (64M, 4GiB).  Returns 1 and sets *out, or 0 if s is not one. */
int floe_parse_size(const char *s, uint64_t *out);

typedef struct floe_server_info {
    unsigned version;   /* protocol version */
    char server[64];    /* "floed 0.1.0" */
    uint64_t max_frame; /* bytes */
    uint64_t max_batch_keys;
    unsigned max_inflight; /* per connection, before the server pushes back */
    char backend[16];
    char features[128]; /* HelloReply.features, each followed by a space (floe_server_has) */
} floe_server_info;

/* What the server said in its hello reply. */
const floe_server_info *floe_info(const floe *c);
/* Whether the server (over several floed: every one) said it has feature
 * (FLOE_FEATURE_* of floe_wire.h: "explore", ...) in its hello reply. */
int floe_server_has(const floe *c, const char *feature);
/* FLOE_VERSION of the libfloe linked in (a shared library may be newer than
 * the header a program was built with). */
const char *floe_version(void);

/* A refused connection: when floed refuses it at max-connections (it sends
 * one error response and closes), floe_connect returns FLOE_ERR_BUSY with
 * the server's message, not FLOE_ERR_IO.  Likewise any call in flight when
 * the server closes with a reason (a frame above max-frame, say) completes
 * with the server's status and message. */

/* ---- server-wide counters (the info operation) ---------------------------------------------- */

typedef struct floe_op_counters {
    char op[32]; /* "insert", "find", "erase", "scan", "stats", ... */
    uint64_t requests, keys, errors;
} floe_op_counters;

typedef struct floe_status_count {
    char status[32]; /* "ERR_INVALID", ... */
    uint64_t count;
} floe_status_count;

typedef struct floe_table_summary {
    char name[FLOE_NAME_MAX + 1];
    int kind; /* FLOE_TABLE_* */
    char backend[16];
    uint64_t keys; /* live keys (TREE: vectors) */
    double fill;
    uint64_t memory_bytes;
    uint64_t changes;           /* keys inserted or erased since the last snapshot */
    int64_t last_snapshot_time; /* unix seconds of its last completed snapshot; 0: none */
} floe_table_summary;

typedef struct floe_gpu_summary {
    int device;      /* CUDA device id */
    char name[96];   /* "NVIDIA H200" */
    int healthy;     /* 0 once a sticky CUDA error ruined it: its tables answer FLOE_ERR_UNAVAILABLE until a restart */
    char error[256]; /* what failed ("" while healthy) */
    uint64_t memory_total, memory_free; /* bytes (0 once failed) */
} floe_gpu_summary;

/* What the server reports about itself (docs/PROTOCOL.md, InfoReply).
 * Strings are never NULL ("" when the server did not say). */
typedef struct floe_server_stats {
    char *version; /* "floed 0.1.0" */
    char *build;   /* compiler, build date, GPU support */
    uint64_t uptime_seconds, pid;
    char *backend;                                               /* the default backend for new tables */
    char *gpu;                                                   /* the device, or why there is none */
    uint64_t gpu_memory_total, gpu_memory_used, gpu_memory_free; /* bytes; 0 without a GPU */
    uint64_t connections, connections_total, connections_refused;
    size_t n_ops;
    floe_op_counters *ops;
    size_t n_errors;
    floe_status_count *errors; /* error responses by status */
    uint64_t bytes_in, bytes_out, rss_bytes;
    uint64_t maxmemory;         /* the server's limit on rss_bytes past which writes are refused (0: none) */
    uint64_t maxmemory_gpu;     /* its limit on a GPU's memory in use past which GPU writes are refused (0: none) */
    int64_t last_snapshot_time; /* unix seconds of the last snapshot attempt; 0: none */
    char *last_snapshot_status; /* "ok", why it failed, or "" before any */
    char *data_dir;             /* "" when persistence is off */
    char *metrics_address;      /* "127.0.0.1:9450": where /metrics is served; "" when off */
    size_t n_tables;
    floe_table_summary *tables;
    size_t n_gpus;
    floe_gpu_summary *gpus; /* each GPU the server uses */
} floe_server_stats;

/* Asks the server for its counters; on success *out is malloc'ed (free it
 * with floe_server_stats_free).  A floed that predates the info operation
 * answers FLOE_ERR_UNSUPPORTED (floe_info still has its hello reply). */
int floe_server_stats_get(floe *c, floe_server_stats **out);
void floe_server_stats_free(floe_server_stats *s);

/* ---- tables ---------------------------------------------------------------------------------- */

typedef struct floe_table_def {
    const char *name;     /* 1..64 of [A-Za-z0-9_.-] */
    int kind;             /* FLOE_TABLE_SET, _MAP, _TREE, _ORDERED or _STATIC */
    unsigned key_bits;    /* SET, MAP, ORDERED: 1..64; 0 means 64.  TREE: 0 */
    unsigned value_bytes; /* MAP: 4 or 8; ORDERED: 0 (keys only), 4 or 8 */
    uint64_t capacity;    /* keys (TREE: vectors) to hold without growing; 0 means 1 Mi */
    int grow;             /* rebuild at twice the size instead of answering FULL */
    double max_fill;      /* with grow: 0 means 0.9 */
    const char *backend;  /* "cpu", "gpu", "auto" or NULL (the server's default) */
    unsigned words;       /* TREE: 32-bit words per vector, 2..256 */
    uint64_t memory;      /* TREE: bytes for the node and root tables; 0: sized from capacity */
    int no_grow;          /* never grow: FULL reaches the caller.  A TREE grows unless this is set,
                           * a SET or MAP only with grow (both set: FLOE_ERR_INVALID) */
    unsigned parts;       /* over the server's GPUs: 0 the server's choice (whole on one GPU unless it
                           * needs more), 1..16 (docs/OPERATIONS.md, "Several GPUs") */
    int explore;          /* an exploring table (SET, MAP, TREE): its new states join an open set
                           * that workers claim (floe_claim_states; docs/PROTOCOL.md) */
    unsigned label_bytes; /* explore: bytes of each state's action label, 0..4 */
    int any_order;        /* explore: claims not level by level (default: strict breadth-first) */
} floe_table_def;

typedef struct floe_level_info {
    uint64_t slots, used;
    unsigned row_bits;
    double fill;
} floe_level_info;

typedef struct floe_stage_info {
    char name[16]; /* parse, queue, merge, backend, stage_in, h2d, kernel, d2h, stage_out, reply, io_cpu */
    uint64_t count, keys, nanos;
} floe_stage_info;

typedef struct floe_part_info {
    uint64_t keys, slots, memory_bytes, generation;
    int device; /* CUDA device; -1 on the CPU */
} floe_part_info;

typedef struct floe_table_info {
    char name[FLOE_NAME_MAX + 1];
    int kind;
    unsigned key_bits, value_bytes;
    uint64_t capacity;
    int grow;
    double max_fill;
    uint64_t seed;
    uint64_t keys, tombstones, slots, memory_bytes, generation; /* TREE: keys = vectors */
    double fill, bytes_per_key;                                 /* TREE: bytes per vector */
    char backend[16];
    floe_level_info level[3]; /* primary, secondary, stash (TREE: of the root table) */
    /* TREE only (the spec's words and memory; the node table's figures) */
    unsigned words;
    uint64_t memory;       /* as asked at creation (0: sized from capacity); memory_bytes is what it uses */
    uint64_t nodes;        /* node slots in use */
    uint64_t node_slots;   /* node table size */
    double node_fill;      /* nodes / node_slots */
    uint64_t orphan_nodes; /* nodes written for vectors that came back FULL */
    double compression;    /* stored bytes / (vectors x words x 4): below 1 is a saving */
    /* floe_stats only: where the table's batches spent their time, cumulative
     * (docs/PROTOCOL.md, StageTime); n_stages entries, those with a count */
    unsigned n_stages;
    floe_stage_info stages[16];
    int device; /* the CUDA device of a GPU table; -1 on the CPU or for parts on several */
    /* floe_stats only: a table in parts (floed setting partitions), each part
     * a whole table on one device; 0 parts for a whole table */
    unsigned n_parts;
    floe_part_info parts[16];
    /* A table partitioned over several floed: as one server holds it, shard
     * `shard` of `shards` of the server list hashing to shard_set (all 0 for
     * a whole table, and in floe_stats of a partitioned connection, which
     * sums its shards) */
    unsigned shard, shards;
    uint64_t shard_set;
    /* floe_stats of an exploring table (floe_table_def.explore): its open set */
    struct {
        int on, done;                           /* done: no state open, no claim out */
        uint64_t states, open, claimed, claims; /* found; open; in claims out; claims out */
        uint32_t levels;                        /* depths found */
        char memory[16]; /* where its states, parents and labels are: "host", "GPU n" ("" from an older floed) */
    } explore;
    int frozen; /* a STATIC table after floe_freeze (over several floed or in parts: on every one) */
} floe_table_info;

typedef struct floe_counts {
    uint64_t inserted, present, absent, full, erased;
} floe_counts;

/* A scan position; zero it to start. */
typedef struct floe_cursor {
    unsigned char bytes[16];
    int started;
} floe_cursor;

/* ---- blocking calls ------------------------------------------------------------------------ */

int floe_ping(floe *c);
int floe_create(floe *c, const floe_table_def *def);
int floe_drop(floe *c, const char *table);
/* *tables is malloc'ed (free it); *n entries. */
int floe_tables(floe *c, floe_table_info **tables, size_t *n);
int floe_stats(floe *c, const char *table, floe_table_info *info);
/* Find-or-put.  results (n bytes), ids (n) and counts may be NULL. */
int floe_insert(floe *c, const char *table, const uint64_t *keys, size_t n, uint8_t *results, floe_counts *counts);
/* Find-or-put on a MAP: values and old_values hold n * value_bytes bytes;
 * old_values (may be NULL) gets each key's value before this request (its
 * own value where INSERTED).  overwrite: replace values of PRESENT keys. */
int floe_insert_values(floe *c, const char *table, const uint64_t *keys, const void *values, size_t n,
                       unsigned value_bytes, int overwrite, uint8_t *results, void *old_values, floe_counts *counts);
/* values (MAP, may be NULL): n * value_bytes bytes, 0 for absent keys. */
int floe_find(floe *c, const char *table, const uint64_t *keys, size_t n, uint8_t *results, void *values,
              unsigned value_bytes, floe_counts *counts);
int floe_erase(floe *c, const char *table, const uint64_t *keys, size_t n, uint8_t *results, floe_counts *counts);
/* MAP: each key's value += its delta (deltas: n * value_bytes bytes, the
 * table's value_bytes; sums wrap at 2^32 or 2^64), an absent key stored with
 * its delta (INSERTED, else PRESENT; FULL as for an insert).  new_values (may
 * be NULL, n * value_bytes bytes) gets each key's value after its own delta:
 * a key twice in one call, the second sees the first's. */
int floe_add(floe *c, const char *table, const uint64_t *keys, const void *deltas, size_t n, unsigned value_bytes,
             uint8_t *results, void *new_values, floe_counts *counts);
/* Up to limit keys from *cursor on; *done when the table has been walked.
 * values (MAP, may be NULL): limit * value_bytes bytes.  SET and MAP: scan a
 * TREE with floe_scan_vectors. */
int floe_scan(floe *c, const char *table, floe_cursor *cursor, size_t limit, uint64_t *keys, void *values,
              unsigned value_bytes, size_t *n, int *done);
/* Saves the table (NULL: every table) into the server's data-dir. */
int floe_snapshot(floe *c, const char *table);
/* Freezes a STATIC table (FLOE_KIND_STATIC): the server builds its static
 * cuckoo table from the keys (and values) stored; from then on it answers
 * finds, scans and stats, and refuses writes with FLOE_ERR_FROZEN.  A
 * freeze again changes nothing; one that fails (FLOE_ERR_FULL,
 * FLOE_ERR_NO_MEMORY) leaves the table filling.  Over several floed: each
 * one's shard. */
int floe_freeze(floe *c, const char *table);
/* Stops the server as SIGTERM does (over several floed: each one): what is
 * in flight finishes, the tables are saved into its data-dir (nosave: not),
 * it exits.  FLOE_OK once the server has agreed; the connection then closes. */
int floe_shutdown(floe *c, int nosave);

/* The server's settings while it runs, as Redis's CONFIG.  One setting: its
 * value as floed's config file writes it (the token: "(set)" or ""), and
 * whether floe_config_set can change it (else it needs a restart). */
typedef struct floe_setting {
    char name[64];
    char value[1100];
    int live;
} floe_setting;
/* The settings whose names match pattern (a shell pattern, as fnmatch; NULL
 * or "": every one), in floed --help's order, into *settings (free() it) and
 * *n; file (may be NULL) gets the config file the server was started with
 * ("" if none).  One server: over several floed, ask each (floe_shard). */
int floe_config_get(floe *c, const char *pattern, floe_setting **settings, size_t *n, char *file, size_t file_len);
/* Sets one setting that the server applies while it runs (what SIGHUP
 * applies), by floed's own rules; FLOE_ERR_INVALID, and nothing changed,
 * for an unknown setting, a bad value or one that needs a restart.  It
 * lasts until the server restarts or reads its file again (SIGHUP), unless
 * floe_config_rewrite writes it there.  Over several floed: each. */
int floe_config_set(floe *c, const char *name, const char *value);
/* Writes the server's config file again with the settings in force, its
 * comments and order kept (FLOE_ERR_INVALID when it was started without
 * one).  Over several floed: each. */
int floe_config_rewrite(floe *c);

/* TREE tables.  words must be the table's (floe_stats says it).
 * Find-or-put of n vectors (n * words words): INSERTED / PRESENT / FULL per
 * vector, the first occurrence inside a request being the one INSERTED.
 * results (n bytes), ids (n; each vector's id, UINT64_MAX for FULL) and
 * counts may be NULL. */
int floe_insert_vectors(floe *c, const char *table, const uint32_t *vectors, size_t n, unsigned words, uint8_t *results,
                        uint64_t *ids, floe_counts *counts);
/* Find-or-put of n states, each given as its parent (the id of a stored
 * vector, of `generation`) and the words that differ from it: counts[i]
 * words for state i, each FLOE_CHANGE_BYTES bytes of changes in state order
 * (floe_change_put of floe_wire.h writes one: the word's index, its value).
 * A state whose words mostly differ is cheaper sent whole.  Answers as
 * floe_insert_vectors's for the whole vectors.  Parents of another
 * generation than the table's (it grew since their answer), or that name
 * no vector, fail the request with FLOE_ERR_INVALID and change nothing:
 * send those states whole.  A SET or MAP answers FLOE_ERR_UNSUPPORTED. */
int floe_insert_states(floe *c, const char *table, uint64_t generation, const uint64_t *parents, const uint8_t *counts,
                       const uint8_t *changes, size_t n, uint8_t *results, uint64_t *ids, floe_counts *counts_out);
/* The generation of the table that the ids of the last blocking insert or
 * find (of vectors or states) on c are of: a request by parents names it. */
uint64_t floe_ids_generation(const floe *c);
/* PRESENT / ABSENT per vector; ids (may be NULL): UINT64_MAX for ABSENT. */
int floe_find_vectors(floe *c, const char *table, const uint32_t *vectors, size_t n, unsigned words, uint8_t *results,
                      uint64_t *ids, floe_counts *counts);
/* The vectors of n ids: results[i] PRESENT and vectors[i * words ..] the
 * vector, or ABSENT and zeros where the id names no stored vector.  results
 * and vectors (n * words words) may be NULL.  A non-TREE table answers
 * FLOE_ERR_UNSUPPORTED. */
int floe_get_by_id(floe *c, const char *table, const uint64_t *ids, size_t n, unsigned words, uint8_t *results,
                   uint32_t *vectors);
/* As floe_scan, for a TREE: up to limit vectors from *cursor on, their ids
 * (limit entries, may be NULL) and the vectors (limit * words words, may be
 * NULL).  The server may return fewer than limit per call (a reply holds at
 * most 32 MiB); go on until *done. */
int floe_scan_vectors(floe *c, const char *table, floe_cursor *cursor, size_t limit, unsigned words, uint64_t *ids,
                      uint32_t *vectors, size_t *n, int *done);

/* ORDERED tables (insert, find, erase, scan as for a SET, or a MAP when
 * value_bytes is 4 or 8; a scan walks the keys in order).  A SET, MAP or
 * TREE answers these with FLOE_ERR_UNSUPPORTED. */

/* Where a range resumes; zero it to start. */
typedef struct floe_range_cursor {
    unsigned char bytes[24];
    int started;
} floe_range_cursor;

#define FLOE_RANGE_DESC 8u /* floe_range, floe_send_range: descending, from hi down to lo */

/* Up to limit stored keys of [lo, hi] from *cursor on, ascending from lo
 * (flags FLOE_RANGE_DESC: descending from hi); *done when the range holds
 * no more.  Call again with the same table, bounds and flags to go on.
 * values (may be NULL): limit * value_bytes bytes.  lo > hi, or a bound of
 * 2^key_bits or more: FLOE_ERR_INVALID. */
int floe_range(floe *c, const char *table, uint64_t lo, uint64_t hi, unsigned flags, floe_range_cursor *cursor,
               size_t limit, uint64_t *keys, void *values, unsigned value_bytes, size_t *n, int *done);
/* For each of n keys the smallest stored key >= it (successor) or the
 * largest <= it (predecessor): results[i] PRESENT and found[i] (and its
 * value, value_bytes at values + i * value_bytes), or ABSENT and 0 where
 * there is none.  results, found and values may be NULL. */
int floe_successor(floe *c, const char *table, const uint64_t *keys, size_t n, uint8_t *results, uint64_t *found,
                   void *values, unsigned value_bytes);
int floe_predecessor(floe *c, const char *table, const uint64_t *keys, size_t n, uint8_t *results, uint64_t *found,
                     void *values, unsigned value_bytes);
/* The smallest (floe_min) or largest (floe_max) stored key: *found 1 with
 * *key (and its value in value, may be NULL), or 0 when the table is
 * empty. */
int floe_min(floe *c, const char *table, int *found, uint64_t *key, void *value, unsigned value_bytes);
int floe_max(floe *c, const char *table, int *found, uint64_t *key, void *value, unsigned value_bytes);

/* ---- exploring tables: a model checker's run on the server ------------------------------------ */

/* An exploring table (floe_table_def.explore) keeps the states it stored
 * new in an open set, in the order found, each under an explore id (0, 1,
 * ...) with its parent's id, its label and its depth.  Workers claim open
 * states, expand them, insert the successors with their parent's id and
 * end the claim with the last of those inserts; a claim whose lease runs
 * out returns its states to the open set.  When no state is open and no
 * claim out, claims answer FLOE_CLAIM_DONE.
 *
 * Over several floed (a partitioned connection) each server keeps the
 * open set of its own states, and the workers end each level themselves
 * (docs/PROTOCOL.md, "Exploring over several floed"): they claim from each
 * server (floe_shard) with floe_send_claim_upto; inserts go through the
 * partitioned connection, which sends each state to its server with its
 * parent's id (an id names its server in its top 8 bits) and the parents'
 * depth; a claim ends with an insert of no states, sent once every insert
 * of its successors has been answered; floe_trace follows a path across. */
#define FLOE_EXPLORE_INITIAL  UINT64_MAX /* the parent of an initial state */
#define FLOE_CLAIM_GOT        0          /* states handed out */
#define FLOE_CLAIM_WAIT       1          /* states are open but deeper than a claim out (or none yet): ask again */
#define FLOE_CLAIM_DONE       2          /* the run has ended */
#define FLOE_CLAIM_LEVEL_DONE 3          /* floe_send_claim_upto: no state of depth <= upto open, out or coming here */

typedef struct floe_claim {
    int state;      /* FLOE_CLAIM_* */
    uint64_t token; /* GOT: the claim's (for complete and renew) */
    uint32_t depth; /* GOT: of every state handed out */
    size_t n;       /* GOT: states in ids and keys */
    size_t key_bytes; /* GOT: bytes of keys (n x 8, or n x a TREE's words x 4) */
    uint64_t found;   /* floe_send_claim_upto: the server's states of depth <= upto, */
    uint64_t next;    /* and of depth upto + 1 */
} floe_claim;

/* n states (key_bytes of keys: 8 a key, or a TREE's vectors) into an
 * exploring table, each with its parent's explore id (from NULL: all
 * initial; FLOE_EXPLORE_INITIAL for one) and its action label (labels NULL:
 * zeros; else n x label_bytes bytes); parent_depth: the parents' depth (a
 * claim's; read for parents on another server of a partitioned table);
 * complete: the claim this request ends once its states joined the open
 * set (0: none).  results: n answers. */
int floe_insert_explore(floe *c, const char *table, const void *keys, size_t key_bytes, size_t n, const uint64_t *from,
                        uint32_t parent_depth, const void *labels, size_t labels_len, uint64_t complete,
                        uint8_t *results, floe_counts *counts);
/* Up to max open states (ids: max, keys: max x the state's bytes), under a
 * lease of lease_ms (0: 60 s); out says what came. */
int floe_claim_states(floe *c, const char *table, size_t max, unsigned lease_ms, uint64_t *ids, void *keys,
                      size_t keys_cap, floe_claim *out);
/* The claim token's lease, to lease_ms from now. */
int floe_claim_renew(floe *c, const char *table, uint64_t token, unsigned lease_ms);
/* The path from an initial state to state id: *n states, their ids, keys
 * and labels (each malloc'd, for the caller to free; labels NULL when the
 * table has none); over several floed, followed from server to server. */
int floe_trace(floe *c, const char *table, uint64_t id, uint64_t **ids, void **keys, void **labels, size_t *n);
/* An exploring table's run, level by level: *n sizes, the states found at
 * each depth (malloc'd, for the caller to free), and in *bytes (may be
 * NULL) the host memory of its open set (the states in the order found,
 * their parents and labels); over several floed, every server's added up.
 * ERR_INVALID for a table that does not explore. */
int floe_explore_levels(floe *c, const char *table, uint64_t **sizes, size_t *n, uint64_t *bytes);

/* ---- pipelined calls ------------------------------------------------------------------------ */

/* Runs when the call completes (inside floe_poll or floe_wait); the library
 * frees the call after it returns.  Calls sent without a callback are
 * futures: floe_wait for them, read them, floe_call_free them. */
typedef void floe_callback(floe *c, floe_call *call, void *arg);

#define FLOE_OVERWRITE   1u /* insert on a MAP: replace values of PRESENT keys */
#define FLOE_WANT_IDS    2u /* insert, find: return each key's slot id */
#define FLOE_WANT_VALUES 4u /* find on a MAP: return values */

/* Each returns the call, or NULL when out of memory.  A request that cannot
 * be sent (a broken connection: FLOE_ERR_IO; above max-frame:
 * FLOE_ERR_TOO_LARGE) completes at once: a future is returned completed, a
 * callback has run and NULL is returned.  Keys and values are copied before
 * the function returns. */
floe_call *floe_send_insert(floe *c, const char *table, const uint64_t *keys, size_t n, const void *values,
                            size_t values_len, unsigned flags, floe_callback *cb, void *arg);
floe_call *floe_send_find(floe *c, const char *table, const uint64_t *keys, size_t n, unsigned flags, floe_callback *cb,
                          void *arg);
floe_call *floe_send_erase(floe *c, const char *table, const uint64_t *keys, size_t n, floe_callback *cb, void *arg);
/* floe_insert_explore and floe_claim_states pipelined: floe_send_insert_explore's
 * answers are read with floe_call_results; floe_send_claim's with
 * floe_call_claim: *out, and its ids (out->n) and keys, which live as
 * long as the call; FLOE_OK, or the call's error (FLOE_ERR_IO: no memory to
 * spell out ids the server sent as a range). */
floe_call *floe_send_insert_explore(floe *c, const char *table, const void *keys, size_t key_bytes, size_t n,
                                    const uint64_t *from, uint32_t parent_depth, const void *labels, size_t labels_len,
                                    uint64_t complete, floe_callback *cb, void *arg);
floe_call *floe_send_claim(floe *c, const char *table, size_t max, unsigned lease_ms, floe_callback *cb, void *arg);
/* A claim whose workers end the levels themselves (over several floed, of
 * one server: floe_shard): states of depth <= upto only, no barrier on the
 * server; an answer of none says FLOE_CLAIM_WAIT (some of depth <= upto
 * are out or being added there) or FLOE_CLAIM_LEVEL_DONE, with the
 * server's figures in found and next. */
floe_call *floe_send_claim_upto(floe *c, const char *table, size_t max, unsigned lease_ms, uint32_t upto,
                                floe_callback *cb, void *arg);
/* floe_send_insert_explore for successors grouped by parent whose parents
 * are consecutive explore ids (a claim's, from the cursor: ids[i] ==
 * ids[0] + i): the first parent's id and each parent's number of keys
 * (counts, `parents` of them, each 0..255, their sum n) stand for from, one
 * byte a parent instead of 8 a key. */
floe_call *floe_send_insert_successors(floe *c, const char *table, const void *keys, size_t key_bytes, size_t n,
                                       uint64_t first_parent, const uint8_t *counts, size_t parents,
                                       uint32_t parent_depth, const void *labels, size_t labels_len, uint64_t complete,
                                       floe_callback *cb, void *arg);
int floe_call_claim(const floe_call *call, floe_claim *out, const uint64_t **ids, const void **keys);
/* floe_add's request; floe_call_values has the values after each delta. */
floe_call *floe_send_add(floe *c, const char *table, const uint64_t *keys, size_t n, const void *deltas,
                         size_t deltas_len, floe_callback *cb, void *arg);
/* Any operation on keys by its name, as the protocol's Request names it
 * ("insert", "find", "erase", "add", "get_by_id", "successor",
 * "predecessor", and those a later server adds): key_bytes of keys (8 a
 * key, or a TREE's vectors), values_len of values (NULL: none) and the flags
 * the operation has (the others are not sent).  A name that is no operation
 * on keys completes the call at once with FLOE_ERR_INVALID.  Read the answers
 * as for the named calls. */
floe_call *floe_send_keys(floe *c, const char *op, const char *table, const void *keys, size_t key_bytes,
                          const void *values, size_t values_len, unsigned flags, floe_callback *cb, void *arg);
floe_call *floe_send_ping(floe *c, floe_callback *cb, void *arg);
/* TREE: n vectors of words words each (copied before return); flags:
 * FLOE_WANT_IDS.  words 0 completes the call at once with FLOE_ERR_INVALID. */
floe_call *floe_send_insert_vectors(floe *c, const char *table, const uint32_t *vectors, size_t n, unsigned words,
                                    unsigned flags, floe_callback *cb, void *arg);
floe_call *floe_send_find_vectors(floe *c, const char *table, const uint32_t *vectors, size_t n, unsigned words,
                                  unsigned flags, floe_callback *cb, void *arg);
/* TREE: n states by their parents (floe_insert_states); flags: FLOE_WANT_IDS. */
floe_call *floe_send_insert_states(floe *c, const char *table, uint64_t generation, const uint64_t *parents,
                                   const uint8_t *counts, const uint8_t *changes, size_t n, unsigned flags,
                                   floe_callback *cb, void *arg);
/* TREE: the vectors of n ids; read them with floe_call_vectors. */
floe_call *floe_send_get_by_id(floe *c, const char *table, const uint64_t *ids, size_t n, floe_callback *cb, void *arg);
/* ORDERED: the neighbours of n keys (floe_successor, floe_predecessor);
 * flags: FLOE_WANT_VALUES.  Read them with floe_call_results,
 * floe_call_keys and floe_call_values. */
floe_call *floe_send_successor(floe *c, const char *table, const uint64_t *keys, size_t n, unsigned flags,
                               floe_callback *cb, void *arg);
floe_call *floe_send_predecessor(floe *c, const char *table, const uint64_t *keys, size_t n, unsigned flags,
                                 floe_callback *cb, void *arg);
/* ORDERED: a page of a range (floe_range); cursor NULL or not started: its
 * start.  flags: FLOE_RANGE_DESC, FLOE_WANT_VALUES.  Read it with
 * floe_call_keys, floe_call_values and floe_call_range_next. */
floe_call *floe_send_range(floe *c, const char *table, uint64_t lo, uint64_t hi, unsigned flags,
                           const floe_range_cursor *cursor, size_t limit, floe_callback *cb, void *arg);

/* Writes what is queued and handles what arrives for up to timeout_ms
 * (0: do not wait; -1: until at least one call completes, or at once when
 * no call is in flight: nothing could complete).  Returns the number of
 * calls completed, or -1 if the connection failed. */
int floe_poll(floe *c, int timeout_ms);
/* For a program that multiplexes several connections in one thread (as
 * floe-bench does): the connection's socket, to poll(2) for POLLIN, and for
 * POLLOUT too while floe_want_write(c) is nonzero (queued request bytes not
 * yet written); when poll says it is ready, call floe_poll(c, 0).  Do not
 * read, write or close the socket.  floe_fd is -1 once the connection is
 * broken (its calls have then completed with FLOE_ERR_IO). */
int floe_fd(const floe *c);
int floe_want_write(const floe *c);
/* Drives the connection until call completes; returns its status. */
int floe_wait(floe *c, floe_call *call);
/* Drives the connection until no call is in flight. */
int floe_wait_all(floe *c);
size_t floe_inflight(const floe *c);

int floe_call_status(const floe_call *call);
const char *floe_call_error(const floe_call *call);
uint64_t floe_call_id(const floe_call *call);
/* Answers of a key operation: n bytes (NULL before completion or on error). */
const uint8_t *floe_call_results(const floe_call *call, size_t *n);
/* ids: 8 bytes little-endian per key; values: value_bytes per key. */
const unsigned char *floe_call_ids(const floe_call *call, size_t *bytes);
const unsigned char *floe_call_values(const floe_call *call, size_t *bytes);
/* get_by_id: words little-endian u32 per id (zeros for ABSENT ids). */
const unsigned char *floe_call_vectors(const floe_call *call, size_t *bytes);
/* successor, predecessor: the keys found (8 bytes little-endian each, 0
 * where ABSENT); range: the page's keys. */
const unsigned char *floe_call_keys(const floe_call *call, size_t *bytes);
/* range: where the next page starts (into *next), and whether the range
 * is walked.  FLOE_OK, or the call's error (or FLOE_ERR_PROTOCOL). */
int floe_call_range_next(const floe_call *call, floe_range_cursor *next, int *done);
void floe_call_counts(const floe_call *call, floe_counts *counts);
/* insert, find: the generation of the table the call's ids are of. */
uint64_t floe_call_generation(const floe_call *call);
void floe_call_free(floe_call *call);

/* ---- the batcher --------------------------------------------------------------------------- */

typedef struct floe_batcher floe_batcher;

/* Gets the answers of one request: keys[i] was added with tags[i] and
 * answered results[i].  status is the request's (on an error every key of
 * that request is unanswered, and floe_errstr of the batcher's connection
 * says why). */
typedef void floe_batch_callback(void *arg, int status, const uint64_t *keys, const uint64_t *tags,
                                 const uint8_t *results, size_t n);

#define FLOE_BATCH_INSERT 1
#define FLOE_BATCH_FIND   2

/* op: FLOE_BATCH_INSERT or FLOE_BATCH_FIND; batch_keys per request (0:
 * 65536); max_inflight requests (0: 4).  Answers come in the order the keys
 * were added. */
floe_batcher *floe_batcher_new(floe *c, const char *table, int op, size_t batch_keys, unsigned max_inflight,
                               floe_batch_callback *cb, void *arg);
/* Adds a key; sends a request when batch_keys are gathered, and waits for
 * an answer first if max_inflight requests are out.  Callbacks may run. */
int floe_batcher_add(floe_batcher *b, uint64_t key, uint64_t tag);
/* Sends the keys gathered so far. */
int floe_batcher_flush(floe_batcher *b);
/* Flushes and waits for every answer. */
int floe_batcher_finish(floe_batcher *b);
void floe_batcher_free(floe_batcher *b);

#ifdef __cplusplus
}
#endif

#endif /* FLOE_CLIENT_H */
