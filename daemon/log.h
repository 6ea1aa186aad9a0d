/*
 * log.h - floed's log: one line per event on stderr, with an ISO-8601 UTC
 * timestamp with microseconds, the level, and the message.  Thread-safe.
 * Lines below the configured level are dropped before formatting.
 */
#ifndef FLOE_DAEMON_LOG_H
#define FLOE_DAEMON_LOG_H

typedef enum log_level { LOG_DEBUG = 0, LOG_INFO = 1, LOG_WARN = 2, LOG_ERROR = 3 } log_level;

void log_set_level(log_level level);
/* "debug", "info", "warn" or "error" -> level; -1 if unknown. */
int log_parse_level(const char *name);
void log_msg(log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
