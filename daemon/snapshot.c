/*
 * snapshot.c - the saver thread and the snapshot rules (see snapshot.h).
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
#include "datadir.h"
#include "log.h"
#include "metrics.h"
#include "registry.h"
#include "server.h"
#include "tablefile.h"

/* After a failed snapshot by the rules, the next try waits this long (a
 * full disk must not turn into a copy of every table every second). */
#define RETRY_SECONDS 60

struct saver {
    struct server *srv;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    item *head, *tail;
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

/* The end of a snapshot by COPY: the table's bookkeeping, the log, the answer. */
static void finish_write(item *it, floe_status st, const char *error, double seconds)
{
    batcher *bt = &it->entry->bt;
    const bool by_rules = it->c == NULL && it->multi == NULL;
    if (st == FLOE_OK) {
        /* it->changes is the table's running count when copied; snapshots of one table land in order */
        const uint64_t before = atomic_exchange(&bt->saved_changes, it->changes);
        atomic_store(&bt->last_save, unix_now());
        atomic_store(&bt->saved_at, unix_now());
        log_info("snapshot of table %s written to %s (%.2f s, %llu changes since the one before)", it->entry->name,
                 it->path, seconds, (unsigned long long)(it->changes - before));
    } else {
        atomic_store(&bt->retry_after, unix_now() + RETRY_SECONDS);
        log_error("snapshot of table %s failed: %s", it->entry->name, error);
    }
    metrics_snapshot_done(it->entry->bt.srv->metrics, unix_now(), st == FLOE_OK, error);
    if (by_rules)
        atomic_store(&bt->snapshot_pending, false);
    batcher_item_done(it, st, error);
}

static void run_job(saver *s, item *it)
{
    floe_errinfo err;
    floe_errinfo_clear(&err);
    if (it->op == ITEM_DRAIN) {
        floe_status st = FLOE_OK;
        if (unlink(it->path) == 0)
            fsync_dir_of(it->path);
        else if (errno != ENOENT)
            st = floe_errinfo_set(&err, FLOE_ERR_INTERNAL, "table dropped, but its snapshot %s could not be removed: %s",
                                it->path, strerror(errno));
        if (st != FLOE_OK)
            log_error("%s", err.msg);
        batcher_item_done(it, st, err.msg);
        return;
    }
    const uint64_t t0 = floe_now_ns();
    sd_notifyf(0, "STATUS=saving table %s to %s", it->entry->name, it->path);
    floe_status st = it->pre_status;
    if (st != FLOE_OK)
        snprintf(err.msg, sizeof err.msg, "%s", it->pre_error ? it->pre_error : "copy failed");
    else
        st = floe_file_image_save(it->path, it->image, &err);
    floe_file_image_free(it->image);
    it->image = NULL;
    sd_notifyf(0, "STATUS=serving (last snapshot: table %s, %s)", it->entry->name, st == FLOE_OK ? "ok" : "failed");
    (void)s;
    finish_write(it, st, err.msg, (double)(floe_now_ns() - t0) / 1e9);
}

static void *saver_main(void *arg)
{
    saver *s = arg;
    pthread_setname_np(pthread_self(), "floed-saver");
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->head && !s->stopping)
            pthread_cond_wait(&s->cv, &s->lock);
        if (!s->head)
            break;
        item *it = s->head;
        s->head = it->next;
        if (!s->head)
            s->tail = NULL;
        s->busy = true;
        pthread_mutex_unlock(&s->lock);
        it->next = NULL;
        run_job(s, it);
        pthread_mutex_lock(&s->lock);
        s->busy = false;
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

saver *saver_start(struct server *srv)
{
    saver *s = floe_calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->srv = srv;
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
    bool idle = !s->head && !s->busy;
    pthread_mutex_unlock(&s->lock);
    return idle;
}

static void enqueue(saver *s, item *it)
{
    it->next = NULL;
    pthread_mutex_lock(&s->lock);
    if (s->tail)
        s->tail->next = it;
    else
        s->head = it;
    s->tail = it;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->lock);
}

void saver_write(saver *s, item *it, floe_status status, const char *error)
{
    if (status != FLOE_OK && it->pre_status == FLOE_OK) { /* the copy failed: say so in the job's turn */
        it->pre_status = status;
        free(it->pre_error);
        it->pre_error = floe_strdup(error ? error : "");
    }
    enqueue(s, it);
}

void saver_remove(saver *s, item *it)
{
    enqueue(s, it);
}

item *snapshot_item(struct server *srv, struct conn *c, uint64_t id, struct table_entry *e)
{
    item *it = item_new(c, id, FLOE_OP_COPY, NULL);
    if (!it)
        return NULL;
    it->path = datadir_table_path(srv->cfg.data_dir, e->name);
    if (!it->path) {
        item_free(it);
        return NULL;
    }
    entry_ref(e);
    it->entry = e;
    return it;
}

void snapshot_tick(struct server *srv)
{
    const uint64_t every = LIVE(srv, save_every), after = LIVE(srv, save_after_changes);
    if (!srv->cfg.data_dir[0] || (!every && !after) || atomic_load(&srv->shutting_down))
        return;
    const int64_t now = unix_now();
    size_t n;
    table_entry **all = registry_list(&srv->reg, &n);
    for (size_t i = 0; all && i < n; i++) {
        batcher *bt = &all[i]->bt;
        const uint64_t changes = atomic_load(&bt->changes) - atomic_load(&bt->saved_changes);
        const bool due = changes > 0 && ((every && now - atomic_load(&bt->last_save) >= (int64_t)every) ||
                                         (after && changes >= after));
        if (!due || now < atomic_load(&bt->retry_after) || atomic_exchange(&bt->snapshot_pending, true))
            continue;
        item *it = snapshot_item(srv, NULL, 0, all[i]);
        if (!it || batcher_submit(bt, it) != FLOE_OK) { /* out of memory, or dropped meanwhile */
            item_free(it);
            atomic_store(&bt->snapshot_pending, false);
        }
    }
    for (size_t i = 0; all && i < n; i++)
        entry_unref(all[i]);
    free(all);
}
