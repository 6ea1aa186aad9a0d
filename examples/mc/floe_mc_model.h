/*
 * floe_mc_model.h - a model for floe-mc, written as a plugin: a shared
 * library that floe-mc loads with --model-lib (LTSmin's PINS is the
 * model: the checker knows a state's size and a next-state function, and
 * nothing else of the model).
 *
 * A state is a vector of `words` 32-bit words, each below 2^bits.  States
 * of at most 64 bits (words x bits <= 64) are packed into the 64-bit keys
 * of a SET table; larger ones go to a TREE table as vectors.  The library
 * exports one function,
 *
 *     const floe_mc_plugin *floe_mc_model(const char *params, char *err, size_t errlen);
 *
 * which gets floe-mc's --model argument ("" when none was given: the
 * model's parameters, such as "peterson:3") and returns its model, or NULL
 * with a message in err.  floe-mc calls it once, before any worker starts;
 * the other functions are called from several threads at once and must
 * not change the plugin or anything shared.
 *
 * Build: cc -shared -fPIC -O2 -I/usr/include/floe mymodel.c -o libmymodel.so
 * (or -I examples/mc from a source tree); examples/mc/models/ has one, and
 * floe-mc's built-in models (examples/mc/model_*.c) are written to this
 * interface too.
 */
#ifndef FLOE_MC_PLUGIN_MODEL_H
#define FLOE_MC_PLUGIN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FLOE_MC_ABI       1   /* floe_mc_plugin.abi: the layout below */
#define FLOE_MC_MAX_WORDS 256 /* words of a state, at most */
#define FLOE_MC_MAX_SUCC  64  /* successors of one state, at most */

/* Called by next() once per successor: the state (words words) and the
 * number of the action that led to it (the model's own; 0 if it has none). */
typedef void floe_mc_emit(void *arg, const uint32_t *state, uint32_t action);

typedef struct floe_mc_plugin {
    unsigned abi;            /* FLOE_MC_ABI */
    const char *name;        /* as floe-mc's report prints it */
    unsigned words;          /* 1 .. FLOE_MC_MAX_WORDS */
    unsigned bits;           /* 1 .. 32: every word is below 2^bits */
    unsigned initial_states; /* 1 or more */
    uint64_t expect;         /* its reachable states when known (floe-mc checks its count), else 0 */
    /* Writes initial state i (0 .. initial_states - 1). */
    void (*initial)(const struct floe_mc_plugin *p, unsigned i, uint32_t *state);
    /* Calls emit(arg, ...) for each successor of state, at most
     * FLOE_MC_MAX_SUCC of them; none is a deadlock. */
    void (*next)(const struct floe_mc_plugin *p, const uint32_t *state, floe_mc_emit *emit, void *arg);
    /* Whether state satisfies the model's invariant (nonzero: it does); NULL: none. */
    int (*invariant)(const struct floe_mc_plugin *p, const uint32_t *state);
    /* The state as text, into buf (len bytes, NUL-terminated); NULL: floe-mc prints the words. */
    void (*print)(const struct floe_mc_plugin *p, const uint32_t *state, char *buf, size_t len);
    void *data; /* the library's own */
} floe_mc_plugin;

/* The one symbol a model library exports. */
typedef const floe_mc_plugin *floe_mc_model_fn(const char *params, char *err, size_t errlen);
floe_mc_model_fn floe_mc_model;

#ifdef __cplusplus
}
#endif

#endif
