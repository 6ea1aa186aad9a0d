/*
 * workload.c - floe-bench's key and vector streams (see workload.h for the
 * layout of the key space and why every answer is known in advance).
 */
#include "workload.h"

#include <stdlib.h>
#include <string.h>

#include "floe.h"

#define TREE_HOT_MARK  0xFFFFFFFFu
#define TREE_MISS_MARK 0xFFFFFFFEu
#define TREE_DOMAIN    4u         /* values a walk word takes (T1's --domain) */
#define RING_WORDS     (1u << 18) /* 1 MiB of recent TREE vectors per stream */
#define HOT_KEYS_MAX   (UINT64_C(1) << 26)

static uint64_t splitmix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* xorshift64*: a few ns per key, deterministic per seed. */
static inline uint64_t rnd(wl_stream *s)
{
    uint64_t x = s->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    s->rng = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* Uniform in [0, n) without a division. */
static inline uint64_t below(wl_stream *s, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)rnd(s) * n) >> 64);
}

/* True with probability p (p <= 0: never; p >= 1: always). */
static inline bool coin(wl_stream *s, double p)
{
    return (double)(rnd(s) >> 11) * 0x1p-53 < p;
}

/* A bijection of [0, 2^key_bits): seeded offset, then multiply (odd, so
 * invertible mod 2^bits) and xorshift rounds, each invertible on bits bits. */
static inline uint64_t permute(const wl_stream *s, uint64_t x)
{
    x = (x + s->seed_off) & s->mask;
    x = (x * 0x9E3779B97F4A7C15ull) & s->mask;
    x ^= x >> s->shift;
    x = (x * 0xBF58476D1CE4E5B9ull) & s->mask;
    x ^= x >> s->shift;
    x = (x * 0x94D049BB133111EBull) & s->mask;
    x ^= x >> s->shift;
    return x;
}

static inline uint64_t key_of(const wl_stream *s, uint64_t ordinal)
{
    return s->spec->distribution == WL_SEQUENTIAL ? ordinal : permute(s, ordinal);
}

static inline uint64_t hot_count(const wl_spec *spec)
{
    return spec->distribution == WL_HOTSET ? spec->hot_keys : 0;
}

/* The i-th fresh ordinal of this stream. */
static inline uint64_t fresh_ordinal(const wl_stream *s, uint64_t i)
{
    return hot_count(s->spec) + i * s->spec->streams + s->index;
}

static inline uint64_t miss_ordinal(wl_stream *s)
{
    uint64_t off;
    if (s->spec->distribution == WL_SEQUENTIAL)
        off = (uint64_t)(((unsigned __int128)s->miss_next++ * s->spec->streams + s->index) % s->miss_size);
    else
        off = below(s, s->miss_size);
    return s->lo_size + off;
}

/* Keys the inserts may use: [0, lo) with lo = 2^key_bits, or half of it
 * when misses are kept apart. */
static unsigned __int128 insert_space(const wl_spec *spec)
{
    unsigned bits = spec->misses ? spec->key_bits - 1 : spec->key_bits;
    return (unsigned __int128)1 << bits;
}

const char *wl_spec_check(const wl_spec *spec)
{
    if (spec->streams == 0)
        return "no connections";
    if (hot_count(spec) > HOT_KEYS_MAX)
        return "--hotset-keys is at most 2^26 (67108864)";
    if (spec->distribution == WL_HOTSET && spec->hot_keys == 0)
        return "--hotset-keys must be at least 1";
    if (spec->kind == FLOE_TABLE_TREE) {
        if (spec->streams >= TREE_MISS_MARK)
            return "too many connections for TREE vectors";
        return NULL;
    }
    if (spec->key_bits < 1 || spec->key_bits > 64)
        return "--key-bits must be 1..64";
    if (spec->misses && spec->key_bits < 2)
        return "finds and erases need --key-bits 2 or more (half of the key space is kept for misses)";
    if (insert_space(spec) < (unsigned __int128)hot_count(spec) + spec->streams)
        return "--key-bits leaves too few keys: every connection needs keys of its own beside the hot set (and, "
               "with finds or erases, the half of the key space kept for misses)";
    return NULL;
}

size_t wl_hot_bytes(const wl_spec *spec)
{
    return (size_t)((hot_count(spec) + 7) / 8);
}

int wl_stream_init(wl_stream *s, const wl_spec *spec, uint64_t index)
{
    memset(s, 0, sizeof *s);
    s->spec = spec;
    s->index = index;
    s->rng = splitmix(spec->seed ^ splitmix(index + 1)) | 1;
    if (wl_hot_bytes(spec) && !(s->hot_seen = calloc(wl_hot_bytes(spec), 1)))
        goto oom;
    if (spec->kind == FLOE_TABLE_TREE) {
        s->fresh_limit = UINT64_C(1) << 32; /* word 1 counts the steps */
        s->ring_cap = RING_WORDS / spec->words;
        if (s->ring_cap < 1024)
            s->ring_cap = 1024;
        s->walk = calloc(spec->words, sizeof *s->walk);
        s->ring = malloc(s->ring_cap * spec->words * sizeof *s->ring);
        if (!s->walk || !s->ring)
            goto oom;
        s->walk[0] = (uint32_t)index;
        return 0;
    }
    unsigned bits = spec->key_bits;
    s->mask = bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
    s->shift = (bits + 1) / 2;
    s->seed_off = splitmix(spec->seed) & s->mask;
    unsigned __int128 lo = insert_space(spec), used = (unsigned __int128)hot_count(spec) + index;
    unsigned __int128 limit = lo > used ? (lo - used + spec->streams - 1) / spec->streams : 0;
    s->fresh_limit = limit > UINT64_MAX ? UINT64_MAX : (uint64_t)limit;
    if (spec->misses) {
        s->lo_size = (uint64_t)lo; /* at most 2^63 */
        s->miss_size = (uint64_t)lo;
    }
    return 0;
oom:
    wl_stream_free(s);
    return -1;
}

void wl_stream_free(wl_stream *s)
{
    free(s->hot_seen);
    free(s->walk);
    free(s->ring);
    s->hot_seen = NULL;
    s->walk = s->ring = NULL;
}

static inline bool hot_test(const wl_stream *s, uint64_t h)
{
    return (s->hot_seen[h >> 3] >> (h & 7)) & 1;
}

static inline void hot_set(wl_stream *s, uint64_t h)
{
    s->hot_seen[h >> 3] |= (uint8_t)(1u << (h & 7));
}

/* The common case of E1: an insert of keys that are fresh or repeats, with
 * room for n more fresh keys, in four passes over blocks so that the hashing
 * passes vectorise (64-bit multiplies and conversions: AVX-512 where the CPU
 * has it, picked at load time) and only a short add chain stays serial.  A
 * repeat is a 50/50 guess for a branch predictor at E1's dup ratio, so no
 * pass branches on it.  About 1.4 ns a key on the development machine. */
#define FAST_BLOCK 1024

/* AVX-512 and baseline versions, picked at load time by an ifunc resolver;
 * not under ThreadSanitizer, whose runtime is not up yet when resolvers run. */
#if defined(__SANITIZE_THREAD__)
#define VECTOR_CLONES
#else
#define VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "default")))
#endif

/* Pass 1: a hash of a counter per key (no serial chain through a
 * generator: xorshift's is 6 cycles a draw). */
VECTOR_CLONES static void fast_draws(uint64_t ctr, size_t n, uint64_t *r)
{
    for (size_t i = 0; i < n; i++)
        r[i] = splitmix(ctr + (i + 1) * 0x632BE59BD9B4E019ull);
}

/* Pass 4: ordinals to keys. */
VECTOR_CLONES static void fast_permute(const wl_stream *s, size_t n, uint64_t *x)
{
    const uint64_t off = s->seed_off, mask = s->mask;
    const unsigned shift = s->shift;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = (x[i] + off) & mask;
        v = (v * 0x9E3779B97F4A7C15ull) & mask;
        v ^= v >> shift;
        v = (v * 0xBF58476D1CE4E5B9ull) & mask;
        v ^= v >> shift;
        v = (v * 0x94D049BB133111EBull) & mask;
        v ^= v >> shift;
        x[i] = v;
    }
}

/* Pass 3: each key's ordinal: a fresh one (f[i], the fresh count before
 * it), or a repeat of one of the f[i] made so far, from a second hash of its
 * draw (a double in [0, 1) times f[i]: 64-bit conversions and multiplies,
 * where a 128-bit product would keep the loop scalar). */
VECTOR_CLONES static void fast_ordinals(const uint64_t *r, const uint64_t *f, size_t n, uint64_t threshold,
                                        uint64_t base, uint64_t streams, uint64_t index, uint64_t *ord, uint8_t *e)
{
    for (size_t i = 0; i < n; i++) {
        const bool dup = (r[i] >> 11) < threshold;
        const double u = (double)((r[i] * 0xD1B54A32D192ED03ull) >> 11) * 0x1p-53;
        uint64_t pick = (uint64_t)(u * (double)f[i]);
        pick = pick < f[i] ? pick : f[i] - 1; /* u * f[i] may round up to f[i] */
        const uint64_t j = dup ? pick : f[i];
        ord[i] = base + j * streams + index;
        e[i] = dup ? WL_EXPECT_PRESENT : WL_EXPECT_INSERTED;
    }
}

static void insert_keys_fast(wl_stream *s, size_t n, uint64_t *keys, uint8_t *expect)
{
    const wl_spec *sp = s->spec;
    const double p = sp->dup_ratio < 0 ? 0 : sp->dup_ratio > 1 ? 1 : sp->dup_ratio;
    const uint64_t threshold = (uint64_t)(p * 0x1p53); /* repeat when the top 53 bits are below it */
    uint64_t fresh = s->fresh, ctr = s->rng;
    uint64_t r[FAST_BLOCK], f[FAST_BLOCK];
    for (size_t at = 0; at < n; at += FAST_BLOCK) {
        const size_t m = n - at < FAST_BLOCK ? n - at : FAST_BLOCK;
        fast_draws(ctr, m, r);
        ctr += m * 0x632BE59BD9B4E019ull;
        /* Pass 2, the only serial one: the fresh count before each key */
        for (size_t i = 0; i < m; i++) {
            f[i] = fresh;
            fresh += (r[i] >> 11) >= threshold;
        }
        fast_ordinals(r, f, m, threshold, hot_count(sp), sp->streams, s->index, keys + at, expect + at);
        if (sp->distribution != WL_SEQUENTIAL)
            fast_permute(s, m, keys + at);
    }
    s->rng = splitmix(ctr) | 1;
    s->fresh = fresh;
}

void wl_next_keys(wl_stream *s, int op, size_t n, uint64_t *keys, void *values, uint8_t *expect)
{
    const wl_spec *sp = s->spec;
    op = wl_op_def(op)->draws; /* an add's keys, deltas and answers are an insert's */
    const bool hot = sp->distribution == WL_HOTSET && coin(s, sp->hot_fraction);
    const bool looks_up = op == WL_FIND || op == WL_SUCC; /* a stored key answers PRESENT */
    size_t general = n; /* keys for the general loop */
    if (!hot && op == WL_INSERT && s->fresh > 0 && s->fresh_limit - s->fresh >= n) {
        insert_keys_fast(s, n, keys, expect);
        general = 0;
    }
    for (size_t i = 0; i < general; i++) {
        uint64_t ord;
        uint8_t e;
        if (hot) {
            ord = below(s, sp->hot_keys);
            if (op == WL_INSERT) {
                e = WL_EXPECT_STORED;
                hot_set(s, ord);
            } else {
                e = looks_up && hot_test(s, ord) ? WL_EXPECT_PRESENT : WL_EXPECT_ANY;
            }
        } else if (op == WL_INSERT) {
            if (s->fresh && (s->fresh >= s->fresh_limit || coin(s, sp->dup_ratio))) {
                ord = fresh_ordinal(s, below(s, s->fresh));
                e = WL_EXPECT_PRESENT;
            } else {
                ord = fresh_ordinal(s, s->fresh++);
                e = WL_EXPECT_INSERTED;
            }
        } else if (!s->miss_size || (s->fresh && coin(s, sp->dup_ratio))) {
            ord = fresh_ordinal(s, s->fresh ? below(s, s->fresh) : 0);
            e = looks_up && s->fresh ? WL_EXPECT_PRESENT : WL_EXPECT_ANY;
        } else {
            ord = miss_ordinal(s);
            e = op == WL_FIND ? WL_EXPECT_ABSENT : WL_EXPECT_ANY;
        }
        keys[i] = key_of(s, ord);
        expect[i] = e;
    }
    if (values && op == WL_INSERT && sp->value_bytes) {
        unsigned char *v = values;
        for (size_t i = 0; i < n; i++) {
            uint64_t x = keys[i] * 0x9E3779B97F4A7C15ull; /* little-endian hosts: the low value_bytes */
            memcpy(v + i * sp->value_bytes, &x, sp->value_bytes);
        }
    }
}

static void hot_vector(const wl_stream *s, uint64_t h, uint32_t *v)
{
    unsigned w = s->spec->words;
    v[0] = TREE_HOT_MARK;
    v[1] = (uint32_t)h;
    for (unsigned j = 2; j < w; j++)
        v[j] = (uint32_t)(splitmix(h * w + j) >> 40) % TREE_DOMAIN;
}

/* One of this stream's last ring_cap fresh vectors. */
static void recent_vector(wl_stream *s, uint32_t *v)
{
    unsigned w = s->spec->words;
    uint64_t back = s->fresh < s->ring_cap ? s->fresh : s->ring_cap;
    uint64_t j = s->fresh - 1 - below(s, back);
    memcpy(v, s->ring + (j % s->ring_cap) * w, w * sizeof *v);
}

void wl_next_vectors(wl_stream *s, int op, size_t n, uint32_t *vectors, uint8_t *expect)
{
    const wl_spec *sp = s->spec;
    const unsigned w = sp->words;
    const bool hot = sp->distribution == WL_HOTSET && coin(s, sp->hot_fraction);
    for (size_t i = 0; i < n; i++) {
        uint32_t *v = vectors + i * w;
        uint8_t e;
        if (hot) {
            uint64_t h = below(s, sp->hot_keys);
            hot_vector(s, h, v);
            if (op == WL_INSERT) {
                e = WL_EXPECT_STORED;
                hot_set(s, h);
            } else {
                e = op == WL_FIND && hot_test(s, h) ? WL_EXPECT_PRESENT : WL_EXPECT_ANY;
            }
        } else if (op == WL_INSERT && !(s->fresh && (s->fresh >= s->fresh_limit || coin(s, sp->dup_ratio)))) {
            /* a walk step: the counter and, half the time, one more word */
            s->walk[1] = (uint32_t)s->fresh;
            if (w > 2 && coin(s, 0.5))
                s->walk[2 + below(s, w - 2)] = (uint32_t)below(s, TREE_DOMAIN);
            memcpy(v, s->walk, w * sizeof *v);
            memcpy(s->ring + (s->fresh % s->ring_cap) * w, v, w * sizeof *v);
            s->fresh++;
            e = WL_EXPECT_INSERTED;
        } else if (op == WL_INSERT || (s->fresh && coin(s, sp->dup_ratio))) {
            recent_vector(s, v);
            e = op == WL_ERASE ? WL_EXPECT_ANY : WL_EXPECT_PRESENT;
        } else {
            v[0] = TREE_MISS_MARK;
            v[1] = (uint32_t)rnd(s);
            for (unsigned j = 2; j < w; j++)
                v[j] = (uint32_t)below(s, TREE_DOMAIN);
            e = op == WL_FIND ? WL_EXPECT_ABSENT : WL_EXPECT_ANY;
        }
        expect[i] = e;
    }
}

/* Which answers each expectation accepts, a bit per answer; a byte that is
 * none of the five answers is always wrong. */
/* clang-format off */
static const uint8_t ACCEPTS[8] = {
    [WL_EXPECT_INSERTED] = 1u << FLOE_INSERTED,
    [WL_EXPECT_PRESENT] = 1u << FLOE_PRESENT,
    [WL_EXPECT_ABSENT] = 1u << FLOE_ABSENT,
    [WL_EXPECT_STORED] = 1u << FLOE_INSERTED | 1u << FLOE_PRESENT,
    [WL_EXPECT_ANY] = (1u << (FLOE_ERASED + 1)) - 1, /* any of the five answers */
};
/* clang-format on */

bool wl_answer_ok(uint8_t expect, uint8_t answer)
{
    return answer < 8 && (ACCEPTS[expect & 7] >> answer & 1);
}

/* The exact expectations' answers are 2 - expect (INSERTED 0 -> 2, PRESENT
 * 1 -> 1, ABSENT 2 -> 0): for those, answer + expect == 2 in bytes. */
_Static_assert(WL_EXPECT_INSERTED + FLOE_INSERTED == 2 && WL_EXPECT_PRESENT + FLOE_PRESENT == 2 &&
                   WL_EXPECT_ABSENT + FLOE_ABSENT == 2,
               "wl_first_wrong's exact pass");

size_t wl_first_wrong(const uint8_t *expect, const uint8_t *answers, size_t n)
{
    /* E1's case, every expectation exact and met, eight keys a step (a table
     * lookup per key costs 0.8 ns): answers below 8 with answer + expect == 2
     * can only be an exact expectation's one answer.  The byte lanes' sums
     * are taken without carries from one lane into the next. */
    const uint64_t low7 = 0x7F7F7F7F7F7F7F7Full, high = 0x8080808080808080ull, twos = 0x0202020202020202ull;
    uint64_t off = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t a, e;
        memcpy(&a, answers + i, 8);
        memcpy(&e, expect + i, 8);
        const uint64_t sum = ((a & low7) + (e & low7)) ^ ((a ^ e) & high);
        off |= (sum ^ twos) | (a & 0xF8F8F8F8F8F8F8F8ull);
    }
    for (; i < n; i++)
        off |= (uint8_t)(((uint8_t)(answers[i] + expect[i]) ^ 2) | (answers[i] & 0xF8));
    if (!off)
        return n;
    /* the common case, every answer right, without a branch per key */
    unsigned wrong = 0;
    for (i = 0; i < n; i++)
        wrong |= (answers[i] >> 3) | (~ACCEPTS[expect[i] & 7] >> (answers[i] & 7) & 1);
    if (!wrong)
        return n;
    for (i = 0; i < n; i++)
        if (!wl_answer_ok(expect[i], answers[i]))
            return i;
    return n;
}

const char *wl_expect_name(uint8_t expect)
{
    static const char *const names[] = {"INSERTED", "PRESENT", "ABSENT", "INSERTED or PRESENT", "anything"};
    return expect < sizeof names / sizeof names[0] ? names[expect] : "?";
}

void wl_hot_union(uint8_t *acc, const wl_stream *s)
{
    size_t n = wl_hot_bytes(s->spec);
    for (size_t i = 0; i < n; i++)
        acc[i] |= s->hot_seen[i];
}

uint64_t wl_hot_count(const uint8_t *acc, const wl_spec *spec)
{
    uint64_t c = 0;
    size_t n = wl_hot_bytes(spec);
    for (size_t i = 0; i < n; i++)
        c += (uint64_t)__builtin_popcount(acc[i]);
    return c;
}
