/* log — leveled text/JSON log lines on stderr (see include/podmux/log.h). */

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "podmux/buf.h"
#include "podmux/log.h"
#include "podmux/loop.h"

/* Process-wide by nature: set once in main before any thread starts. */
static enum log_level log_max = LOG_LEVEL_INFO;
static enum log_format log_fmt = LOG_FORMAT_TEXT;

static const char *const level_names[] = {"error", "warn", "info", "debug",
                                          "trace"};

void log_setup(enum log_level max_level, enum log_format format)
{
        log_max = max_level;
        log_fmt = format;
}

int log_format_from_string(const char *s, enum log_format *ret)
{
        if (strcmp(s, "text") == 0)
                *ret = LOG_FORMAT_TEXT;
        else if (strcmp(s, "json") == 0)
                *ret = LOG_FORMAT_JSON;
        else
                return -1;
        return 0;
}

int log_enabled(enum log_level level)
{
        return level <= log_max;
}

const char *errno_str(int err, char *buf, size_t size)
{
        if (err < 0)
                err = -err;
#if defined(_GNU_SOURCE)
        /* GNU strerror_r may return a static string instead of filling buf. */
        return strerror_r(err, buf, size);
#else
        if (strerror_r(err, buf, size) != 0)
                snprintf(buf, size, "error %d", err);
        return buf;
#endif
}

void log_write(enum log_level level, const char *fmt, ...)
{
        struct buf line = BUF_INIT, msg = BUF_INIT;
        char ts[96];
        struct tm tm;
        uint64_t now = wall_usec();
        time_t secs = (time_t)(now / 1000000u);
        va_list ap;

        if (!log_enabled(level))
                return;
        va_start(ap, fmt);
        if (buf_vprintf(&msg, fmt, ap) < 0) {
                va_end(ap);
                return;
        }
        va_end(ap);
        gmtime_r(&secs, &tm);
        snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%06uZ",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                 tm.tm_min, tm.tm_sec, (unsigned)(now % 1000000u));
        if (log_fmt == LOG_FORMAT_JSON) {
                buf_printf(&line, "{\"time\":\"%s\",\"level\":\"%s\",\"msg\":",
                           ts, level_names[level]);
                buf_json_string(&line, msg.data ? msg.data : "", msg.len);
                buf_puts(&line, "}\n");
        } else {
                buf_printf(&line, "%s %-5s %s\n", ts, level_names[level],
                           msg.data ? msg.data : "");
        }
        /* One write per line so lines from two threads never interleave. */
        if (line.data) {
                ssize_t r = write(STDERR_FILENO, line.data, line.len);
                (void)r;
        }
        buf_free(&line);
        buf_free(&msg);
}
