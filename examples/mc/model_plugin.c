/*
 * model_plugin.c - a model written as a plugin (floe_mc_model.h), loaded
 * from its shared library and put behind mc_model as the built-in models
 * are: its successors collected into the worker's array, its words checked
 * against the bits it declared (a word past them would pack into another
 * state's key).  A plugin that breaks its word (too many successors, a
 * word too wide) raises m->overflow; the worker ends the run with it.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "floe_mc_model.h"
#include "model.h"

_Static_assert(FLOE_MC_MAX_WORDS == MC_MAX_WORDS && FLOE_MC_MAX_SUCC == MC_MAX_SUCC, "a plugin's limits are floe-mc's");

static const floe_mc_plugin *plugin_of(const mc_model *m)
{
    return m->plugin;
}

static void plugin_initial(const mc_model *m, unsigned which, uint32_t *state)
{
    plugin_of(m)->initial(plugin_of(m), which, state);
}

typedef struct collect {
    const mc_model *m;
    uint32_t *out;
    unsigned k;
} collect;

static void collect_one(void *arg, const uint32_t *state, uint32_t action)
{
    (void)action; /* the label of the step: for traces, which floe-mc does not keep yet */
    collect *c = arg;
    const mc_model *m = c->m;
    if (c->k == MC_MAX_SUCC) {
        atomic_fetch_or(m->overflow, MC_PLUGIN_TOO_MANY);
        return;
    }
    for (unsigned w = 0; m->bits < 32 && w < m->words; w++)
        if (state[w] >> m->bits) {
            atomic_fetch_or(m->overflow, MC_PLUGIN_TOO_WIDE);
            return;
        }
    memcpy(c->out + (size_t)c->k * m->words, state, m->words * 4u);
    c->k++;
}

static unsigned plugin_next(const mc_model *m, const uint32_t *s, uint32_t *out)
{
    collect c = {m, out, 0};
    plugin_of(m)->next(plugin_of(m), s, collect_one, &c);
    return c.k;
}

static int plugin_invariant(const mc_model *m, const uint32_t *s)
{
    return plugin_of(m)->invariant(plugin_of(m), s);
}

static void plugin_print(const mc_model *m, const uint32_t *s, char *buf, size_t len)
{
    plugin_of(m)->print(plugin_of(m), s, buf, len);
}

/* Whether the plugin's structure is one floe-mc can use; if not, why. */
static int plugin_usable(const floe_mc_plugin *p, const char *what, char *err, size_t errlen)
{
    const char *why = p->abi != FLOE_MC_ABI                          ? "is of another floe_mc_model.h"
                      : !p->initial || !p->next                      ? "has no initial() or no next()"
                      : p->words < 1 || p->words > FLOE_MC_MAX_WORDS ? "has states of 0 or more than 256 words"
                      : p->bits < 1 || p->bits > 32                  ? "has words of 0 or more than 32 bits"
                      : p->initial_states < 1                        ? "has no initial state"
                                                                     : NULL;
    if (why)
        snprintf(err, errlen, "model %s: it %s (abi %u, %u words of %u bits, %u initial states)", what, why, p->abi,
                 p->words, p->bits, p->initial_states);
    return why ? -1 : 0;
}

int mc_model_from_plugin(const floe_mc_plugin *p, void *owned, mc_model *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    if (plugin_usable(p, p->name ? p->name : "built in", err, errlen) != 0 ||
        !(m->overflow = calloc(1, sizeof *m->overflow))) {
        if (!err[0])
            snprintf(err, errlen, "out of memory");
        free(owned);
        return -1;
    }
    snprintf(m->name, sizeof m->name, "%s", p->name ? p->name : "");
    m->words = p->words;
    m->bits = p->bits;
    m->expect = p->expect;
    m->initials = p->initial_states;
    m->initial = plugin_initial;
    m->next = plugin_next;
    m->invariant = p->invariant ? plugin_invariant : NULL;
    m->print = p->print ? plugin_print : NULL;
    m->plugin = p;
    m->owned = owned;
    return 0;
}

int mc_model_load(const char *path, const char *params, mc_model *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(err, errlen, "cannot load the model library %s: %s", path, dlerror());
        return -1;
    }
    floe_mc_model_fn *entry;
    *(void **)&entry = dlsym(lib, "floe_mc_model");
    if (!entry) {
        snprintf(err, errlen, "%s is no model library: it has no floe_mc_model() (floe_mc_model.h)", path);
        dlclose(lib);
        return -1;
    }
    char why[200] = "";
    const floe_mc_plugin *p = entry(params ? params : "", why, sizeof why);
    if (!p) {
        snprintf(err, errlen, "model library %s: %s", path, why[0] ? why : "no model for these parameters");
        dlclose(lib);
        return -1;
    }
    err[0] = '\0';
    if (mc_model_from_plugin(p, NULL, m, err, errlen) != 0) {
        dlclose(lib);
        return -1;
    }
    if (!m->name[0])
        snprintf(m->name, sizeof m->name, "%s", params && params[0] ? params : path);
    m->lib = lib;
    return 0;
}

void mc_model_unload(mc_model *m)
{
    if (m->lib)
        dlclose(m->lib);
    free((void *)m->overflow);
    free(m->owned);
    m->lib = m->owned = NULL;
    m->overflow = NULL;
    m->plugin = NULL;
}

void mc_model_print(const mc_model *m, const uint32_t *s, char *buf, size_t len)
{
    if (m->print) {
        m->print(m, s, buf, len);
        return;
    }
    size_t at = 0;
    buf[0] = '\0';
    for (unsigned w = 0; w < m->words && at + 12 < len; w++)
        at += (size_t)snprintf(buf + at, len - at, "%s%u", w ? "," : "", s[w]);
}
