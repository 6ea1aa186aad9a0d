/*
 * group.c - where the parts' backends meet over a batch split on the
 * devices (see group.h).
 */
#include "group.h"

#include <limits.h>
#include <string.h>

void floe_group_init(floe_group *g, struct floe_table *const *parts, unsigned nparts, size_t n)
{
    memset(g, 0, sizeof *g);
    g->parts = nparts;
    for (unsigned p = 0; p < nparts; p++) {
        g->part[p] = parts[p];
        g->start[p] = n / nparts * p + (p < n % nparts ? p : n % nparts);
    }
    g->start[nparts] = n;
    g->least = UINT_MAX;
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cv, NULL);
}

void floe_group_destroy(floe_group *g)
{
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->lock);
}

static floe_status meet(floe_group *g, unsigned *k, floe_status st, const floe_errinfo *err_in, floe_errinfo *err)
{
    pthread_mutex_lock(&g->lock);
    if (k && *k < g->least)
        g->least = *k;
    if (st != FLOE_OK && g->st == FLOE_OK) {
        g->st = st;
        g->err = *err_in;
    }
    const unsigned long round = g->round;
    if (++g->arrived == g->parts) {
        g->arrived = 0;
        g->round++;
        pthread_cond_broadcast(&g->cv);
    } else {
        while (g->round == round)
            pthread_cond_wait(&g->cv, &g->lock);
    }
    const floe_status out = g->st;
    if (out != FLOE_OK)
        *err = g->err;
    if (k)
        *k = g->least;
    pthread_mutex_unlock(&g->lock);
    return out;
}

floe_status floe_group_meet(floe_group *g, floe_status st, const floe_errinfo *err_in, floe_errinfo *err)
{
    return meet(g, NULL, st, err_in, err);
}

floe_status floe_group_meet_least(floe_group *g, unsigned *k, floe_status st, const floe_errinfo *err_in,
                                  floe_errinfo *err)
{
    return meet(g, k, st, err_in, err);
}
