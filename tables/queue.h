/*
 * queue.h - the one FIFO of floe: an intrusive singly-linked queue, used by
 * floed (batchers, io threads' inboxes, the saver, the reaper) and by the
 * backends' batch queues (CPU, GPU, tables in parts).
 *
 * A thing that waits in a queue embeds a queue_link; QUEUE_ENTRY gets the
 * thing back from its link.  Queues hold no lock of their own: each owner
 * guards its queue with the lock it already has (a table's batcher or
 * backend, an io thread's inbox, the saver, the reaper), so that waking the
 * consumer and queueing stay one critical section.  C and CUDA include it
 * alike.
 */
#ifndef FLOE_TABLES_QUEUE_H
#define FLOE_TABLES_QUEUE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct queue_link {
    struct queue_link *next;
} queue_link;

typedef struct queue {
    queue_link *head, *tail;
} queue;

#define QUEUE_ENTRY(link, type, member) ((type *)(void *)((char *)(link) - offsetof(type, member)))

static inline void queue_init(queue *q)
{
    q->head = q->tail = NULL;
}

static inline bool queue_empty(const queue *q)
{
    return q->head == NULL;
}

static inline void queue_push(queue *q, queue_link *l)
{
    l->next = NULL;
    if (q->tail)
        q->tail->next = l;
    else
        q->head = l;
    q->tail = l;
}

/* The first link, taken off; NULL if empty. */
static inline queue_link *queue_pop(queue *q)
{
    queue_link *l = q->head;
    if (l) {
        q->head = l->next;
        if (!q->head)
            q->tail = NULL;
        l->next = NULL;
    }
    return l;
}

/* Takes everything: the links stay chained through next (NULL-ended). */
static inline queue_link *queue_take(queue *q)
{
    queue_link *l = q->head;
    q->head = q->tail = NULL;
    return l;
}

/* Takes the links from the head up to and including last, chained. */
static inline queue_link *queue_take_until(queue *q, queue_link *last)
{
    queue_link *first = q->head;
    q->head = last->next;
    if (!q->head)
        q->tail = NULL;
    last->next = NULL;
    return first;
}

/* Takes l out; prev is the link before it (NULL: l is the head). */
static inline void queue_unlink(queue *q, queue_link *prev, queue_link *l)
{
    if (prev)
        prev->next = l->next;
    else
        q->head = l->next;
    if (q->tail == l)
        q->tail = prev;
    l->next = NULL;
}

#endif
