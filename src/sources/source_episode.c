/*
 * source_episode — a source's failures in its stats and its log (see
 * src/sources/source_episode.h).
 */
#include "sources/source_episode.h"

bool source_episode_fail(struct source_stats *st, struct episode *ep, bool parse, enum log_level level,
                         const char *reason, const char *fmt, ...)
{
        va_list ap;
        bool said;

        source_stats_error(st, parse, "%s", reason);
        source_stats_state(st, "failing");
        va_start(ap, fmt);
        said = episode_vlog(ep, level, reason, fmt, ap);
        va_end(ap);
        return said;
}

bool source_episode_clear(struct source_stats *st, struct episode *ep, const char *fmt, ...)
{
        va_list ap;
        bool was;

        source_stats_state(st, "ok");
        va_start(ap, fmt);
        was = episode_vclear(ep, fmt, ap);
        va_end(ap);
        return was;
}
