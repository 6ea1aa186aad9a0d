/*
 * floe_getopt.h - libfloe's connection options (floe_option_specs: token,
 * timeouts, TLS) as getopt_long flags, so that the floe CLI, floe-bench and
 * floe-mc take them with the same names, environment variables and help.
 *
 *   struct option *all = floe_getopt_table(own, FLOE_GETOPT_CODE);
 *   ... getopt_long(argc, argv, short, all, NULL) ...
 *   if (ch >= FLOE_GETOPT_CODE) floe_getopt_set(&opts, ch, optarg, err, len);
 *
 * Header-only: the tools compile it in; it is not part of libfloe's API.
 */
#ifndef FLOE_GETOPT_H
#define FLOE_GETOPT_H

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "floe.h"

/* getopt_long's return value for connection option i is FLOE_GETOPT_CODE + i. */
#define FLOE_GETOPT_CODE 0x4000

/* own (terminated by a zero entry) followed by the connection options, in a
 * malloc'ed table (NULL if out of memory); free it when done. */
static inline struct option *floe_getopt_table(const struct option *own)
{
    size_t n_own = 0, n;
    while (own[n_own].name)
        n_own++;
    const floe_option_spec *spec = floe_option_specs(&n);
    struct option *all = (struct option *)calloc(n_own + n + 1, sizeof *all);
    if (!all)
        return NULL;
    memcpy(all, own, n_own * sizeof *all);
    for (size_t i = 0; i < n; i++)
        all[n_own + i] = (struct option){spec[i].name, spec[i].arg ? required_argument : no_argument, NULL,
                                         FLOE_GETOPT_CODE + (int)i};
    return all;
}

/* Applies what getopt_long returned for a connection option. */
static inline int floe_getopt_set(floe_options *o, int code, const char *arg, char *err, size_t errlen)
{
    size_t n;
    const floe_option_spec *spec = floe_option_specs(&n);
    if (code < FLOE_GETOPT_CODE || (size_t)(code - FLOE_GETOPT_CODE) >= n) {
        snprintf(err, errlen, "not a connection option");
        return FLOE_ERR_INVALID;
    }
    return floe_options_set(o, spec[code - FLOE_GETOPT_CODE].name, arg, err, errlen);
}

/* The connection options' lines of a --help text, flags at indent columns,
 * help text from column help_col; timeout_help: what --timeout does in
 * this program, if not libfloe's (its own default, a whole command). */
static inline void floe_getopt_help(FILE *f, int indent, int help_col, const char *timeout_help)
{
    size_t n;
    const floe_option_spec *spec = floe_option_specs(&n);
    for (size_t i = 0; i < n; i++) {
        char flag[64], help[256];
        snprintf(flag, sizeof flag, "--%s%s%s", spec[i].name, spec[i].arg ? " " : "", spec[i].arg ? spec[i].arg : "");
        if (timeout_help && strcmp(spec[i].name, "timeout") == 0)
            snprintf(help, sizeof help, "%s", timeout_help);
        else
            snprintf(help, sizeof help, "%s", spec[i].help);
        int w = help_col - indent - 1;
        if ((int)strlen(flag) > w)
            fprintf(f, "%*s%s\n%*s%s ($%s)\n", indent, "", flag, help_col, "", help, spec[i].env);
        else
            fprintf(f, "%*s%-*s %s ($%s)\n", indent, "", w, flag, help, spec[i].env);
    }
}

#endif
