/*
 * episode — "a failure is said once per distinct reason, and once when
 * it is over": the one home of that rule for every part of the daemon
 * that retries something that may fail for a long time (the API and
 * manifest-URL sources, the checkpoint writes, the plugin registry, the
 * static-pod files, the Events writes).  A server down for an hour fails
 * every retry alike; the log gets one line for it, not one per retry.
 *
 * An episode starts with the first failure and ends with episode_clear().
 * While it lasts, a failure whose reason is the one said last is a
 * repeat: not said again (episode_log() writes it at debug).  A new
 * reason is said, and becomes the one said last.
 *
 * Reasons compare as text: the caller keeps what varies on every retry
 * (a pause, a count) out of the reason and in the line.
 *
 * Owns: a copy of the reason said last.  Never: blocks, or logs except
 * in episode_log() and episode_clear() (episode_fail() only decides,
 * for a caller that reports through a callback).
 * Out of memory: the copy is not kept, so the next failure is said again
 * (a repeated line, nothing lost); the failure is still counted and its
 * end still said.
 * Cost: one strcmp() of the reason per failure, one strdup() per reason
 * said.
 */
#ifndef PODMUX_EPISODE_H
#define PODMUX_EPISODE_H

#include <stdarg.h>
#include <stdbool.h>

#include "util/log.h"
#include "util/strmap.h"

struct episode {
        char *said;        /* the reason said last; NULL: none (or not kept) */
        unsigned failures; /* since the episode began; 0: none going on */
};

#define EPISODE_INIT {NULL, 0}

/* A failure for reason: counted; true when it is to be said (the first
 * of the episode, or a reason other than the one said last), false for
 * a repeat. */
bool episode_fail(struct episode *ep, const char *reason);

/* episode_fail(), and the line (fmt, which says the reason) logged: at
 * level when it is to be said, else at debug with the count of failures
 * in a row after it.  Returns whether it was said at level. */
bool episode_log(struct episode *ep, enum log_level level, const char *reason, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
bool episode_vlog(struct episode *ep, enum log_level level, const char *reason, const char *fmt, va_list ap)
        __attribute__((format(printf, 4, 0)));

/* It works again.  When an episode was going on, the line fmt is
 * logged at info (fmt NULL: nothing is logged; the arguments may read
 * the episode, which is forgotten only afterwards) and true returned;
 * false when there was none. */
bool episode_clear(struct episode *ep, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool episode_vclear(struct episode *ep, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

static inline bool episode_failing(const struct episode *ep)
{
        return ep->failures > 0;
}

/* Frees the reason kept; the struct is the caller's.  NULL-safe. */
void episode_free(struct episode *ep);

/*
 * The same rule for many things at once, one episode per key (a file's
 * path): map holds key -> a heap copy of the reason said last, which the
 * map's owner frees with free() (strmap_free(map, free)).  No count is
 * kept; the caller logs.  O(1) expected per call.
 */
/* A failure of key for reason: true when it is to be said (a reason
 * other than the one said last about key); the reason is kept.  Out of
 * memory: true, and the map is unchanged (what key held stays). */
bool episode_fail_in(struct strmap *map, const char *key, const char *reason);
/* key works again: true when a failure of it had been said (its end is
 * to be said once); key is forgotten either way. */
bool episode_clear_in(struct strmap *map, const char *key);

#endif
