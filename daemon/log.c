/*
 * log.c - timestamped, levelled log lines on stderr (see log.h).
 */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>

static atomic_int min_level = LOG_INFO;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const char *const NAMES[] = {"DEBUG", "INFO", "WARN", "ERROR"};
/* sd-daemon(3) priorities: debug, info, warning, err */
static const int PRIORITY[] = {7, 6, 4, 3};

static pthread_once_t journal_once = PTHREAD_ONCE_INIT;
static bool journal;

/* systemd.exec(5): JOURNAL_STREAM is the device and inode of the stream it
 * connected to stderr; if stderr is still that stream, journald reads it. */
static void detect_journal(void)
{
    const char *env = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    char end;
    journal = env && sscanf(env, "%llu:%llu%c", &dev, &ino, &end) == 2 && fstat(2, &st) == 0 &&
              (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

bool log_to_journal(void)
{
    pthread_once(&journal_once, detect_journal);
    return journal;
}

void log_set_level(log_level level)
{
    atomic_store(&min_level, level);
}

int log_parse_level(const char *name)
{
    static const char *const lower[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++)
        if (strcmp(name, lower[i]) == 0)
            return i;
    return -1;
}

static void log_line(log_level level, char *msg);

void log_msg(log_level level, const char *fmt, ...)
{
    if ((int)level < atomic_load(&min_level))
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_line(level, msg);
}

void log_limited(log_limit *lim, log_level level, const char *fmt, ...)
{
    if ((int)level < atomic_load(&min_level))
        return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const unsigned long long now = (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
    unsigned long long next = atomic_load(&lim->next_ns);
    if (now < next || !atomic_compare_exchange_strong(&lim->next_ns, &next, now + 1000000000ull)) {
        atomic_fetch_add(&lim->dropped, 1);
        return;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const unsigned long dropped = atomic_exchange(&lim->dropped, 0);
    if (dropped && len >= 0 && (size_t)len < sizeof msg)
        snprintf(msg + len, sizeof msg - (size_t)len, " (and %lu more like it since the last such line)", dropped);
    log_line(level, msg);
}

static void log_line(log_level level, char *msg)
{
    if (log_to_journal()) {
        /* journald stamps each line itself and takes its priority from the
         * prefix; a line break would start an entry without one */
        for (char *p = msg; (p = strchr(p, '\n'));)
            *p = ' ';
        pthread_mutex_lock(&lock);
        fprintf(stderr, "<%d>%s\n", PRIORITY[level], msg);
        fflush(stderr);
        pthread_mutex_unlock(&lock);
        return;
    }
    char stamp[32];
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    pthread_mutex_lock(&lock);
    fprintf(stderr, "%s.%06ldZ %-5s %s\n", stamp, (long)tv.tv_usec, NAMES[level], msg);
    fflush(stderr);
    pthread_mutex_unlock(&lock);
}
