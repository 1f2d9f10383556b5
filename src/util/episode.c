/*
 * episode — a failure said once per reason and once when it is over
 * (see src/util/episode.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/episode.h"

bool episode_fail(struct episode *ep, const char *reason)
{
        ep->failures++;
        if (ep->said && strcmp(ep->said, reason) == 0)
                return false;
        free(ep->said);
        ep->said = strdup(reason); /* NULL: said again next time, no harm */
        return true;
}

bool episode_vlog(struct episode *ep, enum log_level level, const char *reason, const char *fmt, va_list ap)
{
        struct buf line = BUF_INIT;
        bool say = episode_fail(ep, reason);

        if (!say && !log_enabled(LOG_LEVEL_DEBUG))
                return false;
        /* Out of memory: no line, as log_write() itself would do. */
        if (buf_vprintf(&line, fmt, ap) == 0) {
                if (say)
                        log_write(level, "%s", line.data);
                else
                        log_debug("%s (failure %u in a row)", line.data, ep->failures);
        }
        buf_free(&line);
        return say;
}

bool episode_log(struct episode *ep, enum log_level level, const char *reason, const char *fmt, ...)
{
        va_list ap;
        bool said;

        va_start(ap, fmt);
        said = episode_vlog(ep, level, reason, fmt, ap);
        va_end(ap);
        return said;
}

bool episode_vclear(struct episode *ep, const char *fmt, va_list ap)
{
        struct buf line = BUF_INIT;

        if (!ep->failures)
                return false;
        if (fmt && buf_vprintf(&line, fmt, ap) == 0)
                log_info("%s", line.data);
        buf_free(&line);
        free(ep->said);
        ep->said = NULL;
        ep->failures = 0;
        return true;
}

bool episode_clear(struct episode *ep, const char *fmt, ...)
{
        va_list ap;
        bool was;

        va_start(ap, fmt);
        was = episode_vclear(ep, fmt, ap);
        va_end(ap);
        return was;
}

void episode_free(struct episode *ep)
{
        if (!ep)
                return;
        free(ep->said);
        ep->said = NULL;
        ep->failures = 0;
}

bool episode_fail_in(struct strmap *map, const char *key, const char *reason)
{
        char *prev = strmap_get(map, key), *copy;

        if (prev && strcmp(prev, reason) == 0)
                return false;
        copy = strdup(reason);
        if (copy && strmap_put(map, key, copy, (void **)&prev) == 0) {
                free(prev);
                return true;
        }
        /* Not kept: the map is unchanged, so the next failure is said
         * again, and a key that failed before keeps its place (the file
         * source reads again the files its map of unreadable ones
         * holds). */
        free(copy);
        return true;
}

bool episode_clear_in(struct strmap *map, const char *key)
{
        char *prev = strmap_remove(map, key);

        free(prev);
        return prev != NULL;
}
