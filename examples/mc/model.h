/*
 * model.h - floe-mc's model interface: a model's states are fixed-length
 * vectors of 32-bit words; it has initial states, a next-state function
 * that writes a state's successors and perhaps an invariant.  The built-in
 * models (model_*.c) are plugins (floe_mc_model.h) compiled in, and a
 * model of one's own is one loaded from its library (mc_model_load): both
 * reach the workers through mc_model_from_plugin.  A model whose words each fit
 * in `bits` bits and whose words x bits <= 64 packs into one 64-bit key
 * (a SET table); any other goes to a TREE table as vectors.
 */
#ifndef FLOE_MC_MODEL_H
#define FLOE_MC_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "floe_mc_model.h"

#define MC_MAX_WORDS 256 /* a TREE vector's limit */
#define MC_MAX_SUCC  64  /* successors of one state, at most */

typedef struct mc_model {
    char name[64];   /* as given: "puzzle:3x4" */
    unsigned words;  /* words per state */
    unsigned bits;   /* every word is below 2^bits */
    uint64_t expect; /* reachable states when known in closed form, else 0 */
    unsigned initials; /* initial states */
    void (*initial)(const struct mc_model *m, unsigned i, uint32_t *state);
    /* Writes the successors of s to out (words each, at most MC_MAX_SUCC)
     * and returns how many. */
    unsigned (*next)(const struct mc_model *m, const uint32_t *s, uint32_t *out);
    /* The same on packed states (mc_pack), where a model has it (NULL: the
     * worker unpacks, calls next and packs): several times cheaper, and the
     * workers' own work bounds a fast run. */
    unsigned (*next_packed)(const struct mc_model *m, uint64_t s, uint64_t *out);
    /* Whether s satisfies the model's invariant (nonzero: it does); NULL: none. */
    int (*invariant)(const struct mc_model *m, const uint32_t *s);
    /* s as text into buf (len bytes); NULL: the words. */
    void (*print)(const struct mc_model *m, const uint32_t *s, char *buf, size_t len);
    const struct floe_mc_plugin *plugin; /* a plugin's model (mc_model_load), else NULL */
    void *lib;                           /* its library (dlopen) */
    void *owned;                         /* a built-in's: its plugin's memory */
    _Atomic unsigned *overflow;          /* a plugin's: set when next() emitted past MC_MAX_SUCC */
} mc_model;

/* Parses "puzzle:RxC", "hanoi:N" or "phils:N"; on error returns -1 with a
 * message in err. */
int mc_model_parse(const char *spec, mc_model *m, char *err, size_t errlen);
/* The bits of *m->overflow: how a plugin broke its word (floe_mc_model.h). */
#define MC_PLUGIN_TOO_MANY 1u /* more than MC_MAX_SUCC successors of one state */
#define MC_PLUGIN_TOO_WIDE 2u /* a successor's word at or past 2^bits */

/* m for plugin p (checked; the built-in models are plugins too): owned
 * (may be NULL) is freed by mc_model_unload; on error -1 with a message in
 * err, and owned freed. */
int mc_model_from_plugin(const floe_mc_plugin *p, void *owned, mc_model *m, char *err, size_t errlen);
/* A plugin's model: the library at path (floe_mc_model.h), given params
 * (the --model argument, "" for none); on error -1 with a message in err.
 * mc_model_unload closes it. */
int mc_model_load(const char *path, const char *params, mc_model *m, char *err, size_t errlen);
void mc_model_unload(mc_model *m);
/* s as text: the model's printer, else its words separated by commas. */
void mc_model_print(const mc_model *m, const uint32_t *s, char *buf, size_t len);

/* The models, one line each, for --help. */
const char *mc_model_help(void);

/* Whether states pack into one 64-bit key, and the key width they need. */
int mc_packs(const mc_model *m);
unsigned mc_key_bits(const mc_model *m);
uint64_t mc_pack(const mc_model *m, const uint32_t *s);
void mc_unpack(const mc_model *m, uint64_t key, uint32_t *s);

/* The built-in models (model_*.c); mc_model_unload frees what they hold. */
int mc_puzzle_init(mc_model *m, int rows, int cols, char *err, size_t errlen);
int mc_hanoi_init(mc_model *m, int discs, char *err, size_t errlen);
int mc_phils_init(mc_model *m, int n, char *err, size_t errlen);

#endif
