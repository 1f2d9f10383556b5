/*
 * source_episode — a source's failure counted in its stats and said once
 * per reason (util/episode.h), and its end: the two halves the API and
 * manifest-URL sources do on every failed and every good request.  util
 * may not call metrics, so the stats half lives here, in the layer that
 * has both.
 *
 * Owns: nothing (the episode and the stats are the source's).
 * Never: blocks.  Cost: episode_log()'s, and a bounded copy of the
 * reason into the stats.
 */
#ifndef PODMUX_SOURCE_EPISODE_H
#define PODMUX_SOURCE_EPISODE_H

#include <stdbool.h>

#include "metrics/metrics.h"
#include "util/episode.h"

/* A failure for reason: counted as an error (a parse error when parse)
 * with reason as the last error, the state "failing", and the line fmt
 * logged as episode_log() does.  st may be NULL.  Returns whether the
 * line was said at level. */
bool source_episode_fail(struct source_stats *st, struct episode *ep, bool parse, enum log_level level,
                         const char *reason, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* It works: the state "ok", and the line fmt logged at info if a failure
 * was going on (episode_clear()).  st may be NULL.  Returns whether one
 * was. */
bool source_episode_clear(struct source_stats *st, struct episode *ep, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

#endif
