/*
 * snapshot.c - the saver thread (see snapshot.h).
 */
#define _GNU_SOURCE
#include "snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "log.h"
#include "metrics.h"
#include "tablefile.h"

/* After a failed snapshot by the rules, the next try waits this long (a
 * full disk must not turn into a copy of every table every second). */
#define RETRY_SECONDS 60

struct saver {
    struct metrics *metrics;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    queue q; /* of save_job.link */
    bool busy, stopping;
};

static int64_t unix_now(void)
{
    return (int64_t)time(NULL);
}

static void fsync_dir_of(const char *path)
{
    char *copy = floe_strdup(path);
    if (!copy)
        return;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(copy);
}

/* The end of a write: the table's bookkeeping, the log, the answer. */
static void finish_write(saver *s, save_job *sj, floe_status st, const char *error, double seconds)
{
    table_entry *e = sj->entry;
    if (st == FLOE_OK) {
        /* sj->changes is the table's running count when copied; snapshots of one table land in order */
        const uint64_t before = atomic_exchange(&e->saved_changes, sj->changes);
        atomic_store(&e->last_save, unix_now());
        atomic_store(&e->saved_at, unix_now());
        log_info("snapshot of table %s written to %s (%.2f s, %llu changes since the one before)", e->name, sj->path,
                 seconds, (unsigned long long)(sj->changes - before));
    } else {
        atomic_store(&e->retry_after, unix_now() + RETRY_SECONDS);
        log_error("snapshot of table %s failed: %s", e->name, error);
    }
    metrics_snapshot_done(s->metrics, unix_now(), st == FLOE_OK, error);
    if (sj->by_rules)
        atomic_store(&e->snapshot_pending, false);
    sj->done(sj, st, error);
}

static void run_job(saver *s, save_job *sj)
{
    floe_errinfo err;
    floe_errinfo_clear(&err);
    if (!sj->entry) { /* a dropped table's file */
        floe_status st = FLOE_OK;
        if (unlink(sj->path) == 0)
            fsync_dir_of(sj->path);
        else if (errno != ENOENT)
            st = floe_errinfo_set(&err, FLOE_ERR_INTERNAL, "table dropped, but its snapshot %s could not be removed: %s",
                                sj->path, strerror(errno));
        if (st != FLOE_OK)
            log_error("%s", err.msg);
        sj->done(sj, st, err.msg);
        return;
    }
    const uint64_t t0 = floe_now_ns();
    sd_notifyf(0, "STATUS=saving table %s to %s", sj->entry->name, sj->path);
    floe_status st = sj->status;
    if (st != FLOE_OK)
        snprintf(err.msg, sizeof err.msg, "%s", sj->error ? sj->error : "copy failed");
    else
        st = floe_file_image_save(sj->path, sj->image, &err);
    floe_file_image_free(sj->image);
    sj->image = NULL;
    sd_notifyf(0, "STATUS=serving (last snapshot: table %s, %s)", sj->entry->name, st == FLOE_OK ? "ok" : "failed");
    finish_write(s, sj, st, err.msg, (double)(floe_now_ns() - t0) / 1e9);
}

static void *saver_main(void *arg)
{
    saver *s = arg;
    pthread_setname_np(pthread_self(), "floed-saver");
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (queue_empty(&s->q) && !s->stopping)
            pthread_cond_wait(&s->cv, &s->lock);
        queue_link *l = queue_pop(&s->q);
        if (!l)
            break;
        s->busy = true;
        pthread_mutex_unlock(&s->lock);
        run_job(s, QUEUE_ENTRY(l, save_job, link));
        pthread_mutex_lock(&s->lock);
        s->busy = false;
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

saver *saver_start(struct metrics *m)
{
    saver *s = floe_calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->metrics = m;
    queue_init(&s->q);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->thread, NULL, saver_main, s) != 0) {
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->cv);
        free(s);
        return NULL;
    }
    return s;
}

void saver_stop(saver *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cv);
    free(s);
}

bool saver_idle(saver *s)
{
    pthread_mutex_lock(&s->lock);
    bool idle = queue_empty(&s->q) && !s->busy;
    pthread_mutex_unlock(&s->lock);
    return idle;
}

void saver_queue(saver *s, save_job *sj)
{
    pthread_mutex_lock(&s->lock);
    queue_push(&s->q, &sj->link);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->lock);
}
