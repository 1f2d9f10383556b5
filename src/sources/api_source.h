/*
 * api_source — the API server source (source "api"): list and watch the
 * pods bound to this node with client-go's reflector semantics, and hand
 * the merger the complete set after every change
 * (doc/api-source.md, doc/pod-config.md section 8).
 *
 * Owns: the node's pod store (namespace/name -> pod), the last resource
 * version, the one request in flight, the backoff state.
 * Never: logs a token, a key or an Authorization header; merges; sets a
 * request up itself (the kube client it is given does, for the Events
 * recorder's requests too: src/kube/kube_client.h).
 *
 * With a checkpoint directory (doc/checkpoint.md) it also keeps the last
 * live state on disk (checkpoint_writer: changes of what runs within the
 * interval, the rest with the hourly refresh).  At start it resumes: the
 * checkpoint's pods become the store and the watch starts from its
 * resourceVersion, with no list; the store goes to the merger as live
 * once the server confirms (a bookmark, or a watch that ran its course),
 * and a 410 falls back to a list.  Until the source is live it serves
 * the checkpoint's pods as its SET (marked provisional: the merger does
 * not count the source seen for it) once the grace has passed or a
 * request failed.  A checkpoint that is refused is said once, and the
 * source waits for the server as without one.
 *
 * With watch_list (--watch-list, doc/api-source.md section 5) each list
 * is a streaming list instead: a watch with sendInitialEvents whose
 * events are gathered aside and replace the store at the bookmark that
 * ends them, as a list's pages do; a server that refuses it (an error
 * status) or never ends them (API_WATCH_LIST_WAIT_USEC) is listed and
 * watched from then on, said once.
 *
 * Fail safe: a list is applied whole or not at all, a watch event too.
 * Running out of memory is never taken for bad data: a list is tried
 * again after the backoff, a watch resumes from the last resource version,
 * and a SET that could not be built or queued is sent again after
 * API_PUSH_RETRY_USEC (doubling), so the merger catches up with the store
 * once memory is back, without waiting for another change.
 *
 * Its two backoffs (util/backoff.h):
 * - the reflector's, before a list or watch is tried again (client-go's
 *   backoff manager): base API_BACKOFF_INITIAL_USEC, doubling, cap
 *   API_BACKOFF_CAP_USEC, jitter 1 (each wait is d + rand * d), and
 *   started over by a failure more than API_BACKOFF_RESET_USEC after the
 *   previous one, or by a watch that worked (answered 200, and an event
 *   came or it ran API_WATCH_HEALTHY_USEC);
 * - while requests get no answer at all (the server is down), the
 *   reconnect's instead: base API_BACKOFF_INITIAL_USEC, doubling, cap
 *   API_RECONNECT_CAP_USEC, full jitter (each wait is rand * d), reset
 *   by any answer; the reflector's does not grow meanwhile;
 * - the push's, before a SET that could not be sent is sent again: base
 *   API_PUSH_RETRY_USEC, doubling, cap API_BACKOFF_CAP_USEC, no jitter,
 *   reset when a SET is sent.
 */
#ifndef PODMUX_API_SOURCE_H
#define PODMUX_API_SOURCE_H

#include <stdbool.h>
#include <stdint.h>

#include "util/buf.h"
#include "sources/checkpoint_writer.h"
#include "util/curl_loop.h"
#include "kube/kube_client.h"
#include "util/loop.h"
#include "util/retry_after.h"
#include "metrics/metrics.h"
#include "core/mux.h"

/* client-go's figures. */
#define API_PAGE_SIZE 500
#define API_BACKOFF_INITIAL_USEC 800000ull
#define API_BACKOFF_CAP_USEC 30000000ull
#define API_BACKOFF_RESET_USEC 120000000ull
/* podmux's: while nothing answers, a node tries again within this, so
 * after an outage every node is back within it (doc/api-source.md 7.4:
 * 5,000 nodes reconnect at about 500 a second). */
#define API_RECONNECT_CAP_USEC 10000000ull
/* A watch that ran this long ended a run of failures (with an event,
 * at once); one shorter with no event is taken for a failure. */
#define API_WATCH_HEALTHY_USEC 1000000ull
#define API_WATCH_MIN_TIMEOUT_SEC 300
/* Retry-After retries of one request (and of a GET that lost its
 * connection): client-go's, kept in util/retry_after.h. */
#define API_MAX_RETRY_AFTER RETRY_AFTER_MAX_RETRIES
/* A server that accepts and sends no response headers this long is
 * treated as a dropped connection (the API server answers at once). */
#define API_RESPONSE_TIMEOUT_USEC 30000000ull
/* A SET that could not be sent for want of memory is sent again after
 * this pause, doubling to API_BACKOFF_CAP_USEC. */
#define API_PUSH_RETRY_USEC 1000000ull
/* A list page larger than this is refused. */
#define API_MAX_BODY (64u * 1024u * 1024u)
/* After a watch's ERROR event the rest of its response is read, so that
 * the connection serves the relist (no new TLS handshake): at most this
 * many bytes, for at most this long; a server that goes on is cut off. */
#define API_DRAIN_MAX_BYTES (64u * 1024u)
/* A list after a 410 (the server no longer has the version the watch or
 * the resumed start needed) waits, on top of the backoff, a random part
 * of this spread, so that a fleet whose server lost its history does not
 * list at once: 5,000 nodes list at about 83 per second on average
 * (doc/api-source.md 7.4).  A watch that can go on never waits for it. */
#define API_RELIST_SPREAD_USEC 60000000ull
/* And a budget: API_RELIST_BURST lists after a 410, then one more per
 * API_RELIST_REFILL_SPREADS spreads (5 minutes at the default), so that
 * a server that keeps losing its history cannot make the node list in a
 * loop (doc/api-source.md 7.4: 5,000 nodes then list at about 17 a
 * second).  It scales with the spread: a short one (a test, a small
 * cluster) gets a short budget. */
#define API_RELIST_BURST 3u
#define API_RELIST_REFILL_SPREADS 5u
#define API_DRAIN_USEC 1000000ull
/* --watch-list: a streaming list whose initial-events-end bookmark has
 * not come this long after it was sent is taken for a server that
 * ignores sendInitialEvents: LIST+WATCH from then on. */
#define API_WATCH_LIST_WAIT_USEC 30000000ull

/* The checkpoint's defaults (doc/checkpoint.md section 7). */
#define API_CHECKPOINT_INTERVAL_USEC 60000000ull
#define API_CHECKPOINT_GRACE_USEC 10000000ull
#define API_CHECKPOINT_MAX_AGE_USEC (168ull * 3600000000ull)
/* An unchanged state is written again this often (at most a quarter of
 * the maximum age, at least the interval), so the age a later load
 * measures is that of the server's last word. */
#define API_CHECKPOINT_REFRESH_USEC 3600000000ull

struct api_source;

/* Whose pods the source serves (doc/checkpoint.md section 7). */
enum api_serving { API_SERVING_WAITING, API_SERVING_CHECKPOINT, API_SERVING_LIVE };

/*
 * The source's serving state changed, said before the SET that goes with
 * it is sent (that SET is provisional for API_SERVING_CHECKPOINT, see
 * core/pod.h).  With API_SERVING_CHECKPOINT, time_usec (wall clock) and
 * resource_version are the checkpoint's: when the server last confirmed
 * it, and its resourceVersion (valid during the call only); else 0 and
 * NULL.  Like the sources' record callbacks, it only reports: the
 * receiver decides what to tell whom.
 */
typedef void (*api_state_fn)(void *data, enum api_serving state, uint64_t time_usec, const char *resource_version);

struct api_source_checkpoint {
        const char *dir; /* NULL: no checkpoint */
        uint64_t interval_usec, grace_usec, max_age_usec;
        struct checkpoint_stats *stats; /* may be NULL; outlives the source */
};

struct api_source_config {
        struct kube_client *kube; /* borrowed: outlives the source */
        const char *node_name;
        struct source_stats *stats; /* counted into when not NULL; outlives the source */
        struct api_source_checkpoint checkpoint;
        uint64_t relist_spread_usec; /* API_RELIST_SPREAD_USEC; 0: none */
        bool watch_list;             /* --watch-list: lists as streaming lists */
        api_state_fn state; /* may be NULL */
        void *state_data;
};

/* 0; -EINVAL for a CA bundle that cannot be read for the checkpoint's
 * fingerprint; the checkpoint writer's errors (checkpoint_writer_new: a
 * directory that cannot be trusted or made, or is locked); each with the
 * reason in err
 * (may be NULL; util/buf.h: it replaces what err held, a success leaves
 * err alone); -ENOMEM (err empty). */
int api_source_new(struct loop *loop, struct curl_loop *cl, struct mux_channel *ch, const struct api_source_config *cfg,
                   struct api_source **ret_as, struct buf *err);
int api_source_start(struct api_source *as);
/* The first backoff pause (API_BACKOFF_INITIAL_USEC) and the first pause
 * before a SET is sent again (API_PUSH_RETRY_USEC); tests make them
 * short.  Before api_source_start().  Tests only. */
void api_source_set_pauses(struct api_source *as, uint64_t backoff_usec, uint64_t push_retry_usec);
/* The bound of a streaming list's initial events (API_WATCH_LIST_WAIT_USEC);
 * tests make it short.  Before api_source_start().  Tests only. */
void api_source_set_watch_list_wait(struct api_source *as, uint64_t usec);
/* At a clean shutdown, with the loop no longer run: the live state, if
 * newer than the checkpoint on disk, is written now (blocking).  0 (also
 * without a checkpoint) or the write's error with the reason in err. */
int api_source_flush_checkpoint(struct api_source *as, struct buf *err);
void api_source_free(struct api_source *as); /* NULL-safe */

#endif
