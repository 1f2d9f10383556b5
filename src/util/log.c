/* log — leveled text/JSON log lines on stderr (see src/util/log.h). */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/log.h"
#include "util/clock.h"

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
                return -EINVAL;
        return 0;
}

int log_enabled(enum log_level level)
{
        return level <= log_max;
}

void log_write(enum log_level level, const char *fmt, ...)
{
        struct buf line = BUF_INIT, msg = BUF_INIT;
        char ts[CLOCK_RFC3339_MAX];
        uint64_t now = wall_usec();
        va_list ap;

        if (!log_enabled(level))
                return;
        va_start(ap, fmt);
        if (buf_vprintf(&msg, fmt, ap) < 0) {
                va_end(ap);
                return;
        }
        va_end(ap);
        clock_rfc3339(now, CLOCK_MICRO, ts);
        if (log_fmt == LOG_FORMAT_JSON) {
                buf_printf(&line, "{\"time\":\"%s\",\"level\":\"%s\",\"msg\":",
                           ts, level_names[level]);
                buf_json_string(&line, msg.data, msg.len);
                buf_puts(&line, "}\n");
        } else {
                buf_printf(&line, "%s %-5s %s\n", ts, level_names[level], msg.data);
        }
        /* One write per line so lines from two threads never interleave. */
        if (line.len) {
                ssize_t r = write(STDERR_FILENO, line.data, line.len);
                (void)r;
        }
        buf_free(&line);
        buf_free(&msg);
}
