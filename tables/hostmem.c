/*
 * hostmem.c - host buffers kept for reuse (see hostmem.h).
 *
 * Each buffer starts with a header (its size class and, while kept, the
 * next kept buffer of the class); the caller gets what follows it.
 */
#include "hostmem.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "alloc.h"

#define MIN_SHIFT 12 /* 4 KiB */
#define CLASSES   32 /* up to 2^43 bytes */
#define HEADER    64 /* keeps the caller's part 64-byte aligned in a backend's (page-aligned) memory */

typedef struct block {
    unsigned cls;
    struct block *next;
} block;

struct hostmem {
    floe_backend *be;
    pthread_mutex_t lock;
    block *kept[CLASSES];
    size_t kept_bytes, keep;
};

static size_t class_bytes(unsigned cls)
{
    return (size_t)1 << (cls + MIN_SHIFT);
}

hostmem *hostmem_new(floe_backend *be, size_t keep)
{
    hostmem *h = floe_calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->be = be;
    h->keep = keep;
    pthread_mutex_init(&h->lock, NULL);
    return h;
}

static void release(hostmem *h, block *b)
{
    if (h->be)
        floe_backend_host_free(h->be, b);
    else
        free(b);
}

void hostmem_free(hostmem *h)
{
    if (!h)
        return;
    for (unsigned c = 0; c < CLASSES; c++)
        for (block *b = h->kept[c], *next; b; b = next) {
            next = b->next;
            release(h, b);
        }
    pthread_mutex_destroy(&h->lock);
    free(h);
}

void *hostmem_get(hostmem *h, size_t bytes)
{
    unsigned cls = 0;
    while (cls < CLASSES && class_bytes(cls) < bytes + HEADER)
        cls++;
    if (cls == CLASSES)
        return NULL;
    pthread_mutex_lock(&h->lock);
    block *b = h->kept[cls];
    if (b) {
        h->kept[cls] = b->next;
        h->kept_bytes -= class_bytes(cls);
    }
    pthread_mutex_unlock(&h->lock);
    if (!b) {
        const size_t size = class_bytes(cls);
        b = h->be ? floe_backend_host_alloc(h->be, size) : floe_malloc(size);
        if (!b)
            return NULL;
    }
    b->cls = cls;
    return (unsigned char *)b + HEADER;
}

void hostmem_put(hostmem *h, void *p)
{
    if (!p)
        return;
    block *b = (block *)(void *)((unsigned char *)p - HEADER);
    const size_t size = class_bytes(b->cls);
    pthread_mutex_lock(&h->lock);
    const bool keep = h->kept_bytes + size <= h->keep;
    if (keep) {
        b->next = h->kept[b->cls];
        h->kept[b->cls] = b;
        h->kept_bytes += size;
    }
    pthread_mutex_unlock(&h->lock);
    if (!keep)
        release(h, b);
}
