/*
 * floe_wire.h - the protocol's numeric codes as C: the Status enum of
 * proto/floe.proto and the per-key answers of Response.results.  The one
 * definition shared by the server (tables/, daemon/), the GPU code and the
 * client library (installed beside floe.h).
 */
#ifndef FLOE_WIRE_H
#define FLOE_WIRE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Functions that CPU and GPU code share are __host__ __device__ under nvcc. */
#ifdef __CUDACC__
#define FLOE_HD __host__ __device__
#else
#define FLOE_HD
#endif

/* The release of floed, libfloe and the tools (one number for all), and the
 * protocol version they speak (Hello.version, HelloReply.version). */
#define FLOE_VERSION          "0.1.0"
#define FLOE_PROTOCOL_VERSION 1

/* The protocol's limits and defaults, as both ends see them (docs/PROTOCOL.md). */
#define FLOE_DEFAULT_PORT        7450
#define FLOE_NAME_MAX            64 /* a table's name: 1..64 of [A-Za-z0-9_.-] */
#define FLOE_TREE_MIN_WORDS      2u /* a TREE's u32 words per vector: 2..256 */
#define FLOE_TREE_MAX_WORDS      256u
#define FLOE_MAX_CAPACITY        ((uint64_t)1 << 40) /* the largest capacity a TableSpec may ask for */
#define FLOE_DEFAULT_CAPACITY    ((uint64_t)1 << 20) /* TableSpec.capacity 0 */
#define FLOE_DEFAULT_MAX_FILL    0.9                 /* TableSpec.max_fill 0 */
#define FLOE_SCAN_DEFAULT_LIMIT  1024                /* Scan.limit 0 */
#define FLOE_SCAN_MAX_LIMIT      (1u << 20)          /* Scan.limit above this is taken as this */
#define FLOE_TREE_SCAN_MAX_BYTES ((size_t)32 << 20)  /* a TREE scan reply carries at most this of ids and vectors */

/* HelloReply.features: what a server does past protocol 1's first form, so
 * that a client can refuse a server that would drop what it sends (protobuf
 * skips fields it does not know).  "explore": exploring tables as
 * docs/PROTOCOL.md has them (claims, bounded claims, Insert.from_counts and
 * from_depth, traces across servers). */
#define FLOE_FEATURE_EXPLORE "explore"

/* Partitioned tables (docs/OPERATIONS.md): a table over 2..FLOE_SHARDS_MAX
 * floed servers, each key on the shard its hash picks.  These functions are
 * the contract every client of every version follows. */
#define FLOE_SHARDS_MAX 256u
/* An id of a partitioned table (a TREE vector's, an exploring table's
 * state's) names its shard in its top 8 bits, the shard's own id below. */
#define FLOE_ID_SHARD_SHIFT 56
#define FLOE_ID_LOCAL_MASK  (((uint64_t)1 << FLOE_ID_SHARD_SHIFT) - 1)

/* The 64-bit finalizer of splitmix64: a fixed bijection that spreads keys. */
static inline uint64_t floe_shard_mix(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A hash's place among n (a shard, a part): its high 32 bits scaled to 0..n-1. */
FLOE_HD static inline unsigned floe_hash_pick(uint64_t h, unsigned n)
{
    return (unsigned)(((h >> 32) * (uint64_t)n) >> 32);
}

/* The shard of a SET, MAP or ORDERED key. */
static inline unsigned floe_shard_of_key(uint64_t key, unsigned shards)
{
    return floe_hash_pick(floe_shard_mix(key), shards);
}

/* The shard of a TREE vector: each word mixed into the hash in order. */
static inline unsigned floe_shard_of_vector(const uint32_t *words, unsigned n, unsigned shards)
{
    uint64_t h = n;
    for (unsigned i = 0; i < n; i++)
        h = floe_shard_mix(h ^ words[i]);
    return floe_hash_pick(h, shards);
}

/* The hash of a server list (ShardCheck.shard_set, TableSpec.shard_set):
 * FNV-1a 64 over its text, the servers as "host:port" joined by ","
 * (never 0). */
static inline uint64_t floe_shard_set(const char *list)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (const unsigned char *p = (const unsigned char *)list; *p; p++)
        h = (h ^ *p) * 0x100000001B3ull;
    return h ? h : 1;
}

/* The longest token a hello may carry (floed's token and token-file, libfloe's token). */
#define FLOE_TOKEN_MAX 1024

/* A count or size as floed.conf and the floe tools write it: a whole decimal
 * number with an optional K, M, G or T (powers of 1024) and an optional i
 * and B (64M, 4GiB).  Returns 1 and sets *out, or 0 if s is not one.  (The
 * one parser of sizes: floed's settings, libfloe's floe_parse_size, the GPU
 * programs.) */
static inline int floe_size_parse(const char *s, uint64_t *out)
{
    char *end;
    if (s[0] < '0' || s[0] > '9')
        return 0;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return 0;
    unsigned shift = 0;
    switch (*end) {
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    case 't':
    case 'T':
        shift = 40;
        break;
    default:
        break;
    }
    if (shift) {
        end++;
        if (*end == 'i' || *end == 'I')
            end++;
        if (*end == 'b' || *end == 'B')
            end++;
    }
    if (*end || v > (UINT64_MAX >> shift))
        return 0;
    *out = (uint64_t)v << shift;
    return 1;
}

/* A token file (floed's token-file, the tools' --token-file) holds one line,
 * the token, of 1 to FLOE_TOKEN_MAX bytes; a trailing newline is not part
 * of it.  Returns 0 with the token in buf (FLOE_TOKEN_MAX + 1 bytes), or -1
 * with why in err. */
static inline int floe_token_file_read(const char *path, char *buf, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    char tmp[FLOE_TOKEN_MAX + 3];
    size_t n = fread(tmp, 1, sizeof tmp, f);
    fclose(f);
    if (n && tmp[n - 1] == '\n')
        n--;
    if (n && tmp[n - 1] == '\r')
        n--;
    if (n > FLOE_TOKEN_MAX) {
        snprintf(err, errlen, "%s: the token is longer than %d bytes", path, FLOE_TOKEN_MAX);
        return -1;
    }
    if (!n || memchr(tmp, '\n', n) || memchr(tmp, '\r', n) || memchr(tmp, '\0', n)) {
        snprintf(err, errlen, "%s: %s", path, n ? "not one line of text" : "empty");
        return -1;
    }
    memcpy(buf, tmp, n);
    buf[n] = '\0';
    return 0;
}

/* Status of a request (floe.v1.Status). */
typedef enum floe_status {
    FLOE_OK = 0,
    FLOE_ERR_INVALID = 1,
    FLOE_ERR_NO_TABLE = 2,
    FLOE_ERR_EXISTS = 3,
    FLOE_ERR_FULL = 4,
    FLOE_ERR_BUSY = 5,
    FLOE_ERR_UNAUTHENTICATED = 6,
    FLOE_ERR_TOO_LARGE = 7,
    FLOE_ERR_UNSUPPORTED = 8,
    FLOE_ERR_SHUTTING_DOWN = 9,
    FLOE_ERR_INTERNAL = 10,
    FLOE_ERR_UNAVAILABLE = 11,
    FLOE_ERR_NO_MEMORY = 12,
    FLOE_ERR_FROZEN = 13,
} floe_status;
/* The largest status code (floe_wire_status_name names 0 to it). */
#define FLOE_STATUS_MAX FLOE_ERR_FROZEN

/* The id of a key that has none (FULL, ABSENT) in Response.ids, and in the
 * engines' id arrays. */
#define FLOE_NO_ID UINT64_MAX

/* A TREE state given by its parent (Insert.parents, change_counts, changes):
 * a byte per state says how many of its words differ from its parent's, and
 * each of those is FLOE_CHANGE_BYTES bytes of Insert.changes, in state
 * order: the word's index, then its value, u32 little-endian.  A word named
 * twice in one state takes its last value. */
#define FLOE_CHANGE_BYTES 5
#define FLOE_CHANGES_MAX  255 /* changed words of one state */
#ifdef __CUDACC__             /* the GPU backend applies changes on the device too */
#define FLOE_CHANGE_HD __host__ __device__
#else
#define FLOE_CHANGE_HD
#endif

FLOE_CHANGE_HD static inline void floe_change_put(uint8_t *p, uint32_t word, uint32_t value)
{
    p[0] = (uint8_t)word;
    for (int i = 0; i < 4; i++)
        p[1 + i] = (uint8_t)(value >> (8 * i));
}

FLOE_CHANGE_HD static inline uint32_t floe_change_word(const uint8_t *p)
{
    return p[0];
}

FLOE_CHANGE_HD static inline uint32_t floe_change_value(const uint8_t *p)
{
    return (uint32_t)p[1] | (uint32_t)p[2] << 8 | (uint32_t)p[3] << 16 | (uint32_t)p[4] << 24;
}

/* One answer per key (Response.results). */
enum {
    FLOE_ABSENT = 0,   /* find, erase: the key is not stored */
    FLOE_PRESENT = 1,  /* the key was already stored */
    FLOE_INSERTED = 2, /* insert: the key was absent and is now stored */
    FLOE_FULL = 3,     /* insert: no room, and the table may not grow */
    FLOE_ERASED = 4,   /* erase: the key was stored and is now gone */
};

/* "ABSENT", "PRESENT", ...: an answer's name ("?" for a byte that is none). */
static inline const char *floe_answer_name(int a)
{
    static const char *const names[] = {"ABSENT", "PRESENT", "INSERTED", "FULL", "ERASED"};
    return a >= 0 && a < (int)(sizeof names / sizeof names[0]) ? names[a] : "?";
}

/* "OK", "ERR_INVALID", ...: a Status code's name in the protocol. */
static inline const char *floe_wire_status_name(int s)
{
    static const char *const names[] = {
        "OK",           "ERR_INVALID",         "ERR_NO_TABLE",  "ERR_EXISTS",      "ERR_FULL",
        "ERR_BUSY",     "ERR_UNAUTHENTICATED", "ERR_TOO_LARGE", "ERR_UNSUPPORTED", "ERR_SHUTTING_DOWN",
        "ERR_INTERNAL", "ERR_UNAVAILABLE",     "ERR_NO_MEMORY", "ERR_FROZEN",
    };
    return s >= 0 && s < (int)(sizeof names / sizeof names[0]) ? names[s] : "ERR_UNKNOWN";
}

#endif /* FLOE_WIRE_H */
