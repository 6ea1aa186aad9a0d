/*
 * log.h - floed's log: one line per event on stderr, with an ISO-8601 UTC
 * timestamp with microseconds, the level, and the message.  Thread-safe.
 * Lines below the configured level are dropped before formatting.
 * When stderr is the systemd journal (JOURNAL_STREAM names it), a line is
 * the message after its syslog priority instead (`<6>` info, `<4>` warn,
 * `<3>` error, `<7>` debug): journald adds the time and keeps the priority.
 */
#ifndef FLOE_DAEMON_LOG_H
#define FLOE_DAEMON_LOG_H

#include <stdbool.h>

typedef enum log_level { LOG_DEBUG = 0, LOG_INFO = 1, LOG_WARN = 2, LOG_ERROR = 3 } log_level;

void log_set_level(log_level level);
/* "debug", "info", "warn" or "error" -> level; -1 if unknown. */
int log_parse_level(const char *name);
/* Whether stderr is the journal (decided at the first call). */
bool log_to_journal(void);
void log_msg(log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* For events a client can cause at will (a wrong token, a refused or idle
 * connection, a full fd table): at most one line a second from one call
 * site; the next line that gets through says how many were left out. */
typedef struct log_limit {
    _Atomic unsigned long long next_ns; /* CLOCK_MONOTONIC: the next line may go out then */
    _Atomic unsigned long dropped;
} log_limit;
void log_limited(log_limit *lim, log_level level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define LOG_LIMITED(level, ...)                                                                                        \
    do {                                                                                                               \
        static log_limit lim_;                                                                                         \
        log_limited(&lim_, level, __VA_ARGS__);                                                                        \
    } while (0)

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
