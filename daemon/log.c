/*
 * log.c - timestamped, levelled log lines on stderr (see log.h).
 */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static atomic_int min_level = LOG_INFO;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const char *const NAMES[] = {"DEBUG", "INFO", "WARN", "ERROR"};

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

void log_msg(log_level level, const char *fmt, ...)
{
    if ((int)level < atomic_load(&min_level))
        return;
    char msg[1024], stamp[32];
    struct timeval tv;
    struct tm tm;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    pthread_mutex_lock(&lock);
    fprintf(stderr, "%s.%06ldZ %-5s %s\n", stamp, (long)tv.tv_usec, NAMES[level], msg);
    fflush(stderr);
    pthread_mutex_unlock(&lock);
}
