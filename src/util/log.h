/*
 * log — leveled, one line per event, text or JSON, to stderr.
 *
 * Owns: the process's log settings (level, format) — the one piece of
 * process-wide state outside main, set once at start-up.
 * Never: called by library-style modules (they return errors; the caller
 * logs once).  Never given a token or key: callers pass names, not secrets.
 */
#ifndef PODMUX_LOG_H
#define PODMUX_LOG_H

#include <stddef.h>

#include "util/str.h" /* ERRNO_STR, used with nearly every log line */

enum log_level {
        LOG_LEVEL_ERROR = 0,
        LOG_LEVEL_WARN = 1,
        LOG_LEVEL_INFO = 2,
        LOG_LEVEL_DEBUG = 3,
        LOG_LEVEL_TRACE = 4,
};

enum log_format {
        LOG_FORMAT_TEXT,
        LOG_FORMAT_JSON,
};

void log_setup(enum log_level max_level, enum log_format format);
/* "text" or "json" (the --log-format names).  0 or -EINVAL. */
int log_format_from_string(const char *s, enum log_format *ret);
int log_enabled(enum log_level level);
void log_write(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_write(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...) log_write(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...) log_write(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_write(LOG_LEVEL_DEBUG, __VA_ARGS__)
#define log_trace(...) log_write(LOG_LEVEL_TRACE, __VA_ARGS__)

#endif
