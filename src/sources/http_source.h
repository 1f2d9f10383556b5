/*
 * http_source — the manifest URL source (source "http"): polls one URL
 * and hands the merger its pods as a SET (doc/pod-config.md section 7).
 *
 * Owns: the poll timer, the one transfer in flight, the last body seen.
 * Never: merges, or logs a header value (they may hold credentials); the
 * URL is logged without user info or query.
 *
 * One request at a time: the next poll starts one period after the previous
 * one finished, so a slow server never piles requests up.
 *
 * Logs one line per distinct reason: a failure that repeats poll after
 * poll is logged once (then at debug), another reason again, and the
 * first success after failures once.
 *
 * Fail safe: a body is applied whole or not at all (a transfer cut short,
 * an oversized or bad body sends nothing, so the merger keeps the last
 * pods).  Running out of memory is never reported as a bad body: it is
 * logged, counted as an error, and the poll is tried again after a
 * backoff (util/backoff.h): base HTTP_SOURCE_RETRY_USEC (or the config's
 * retry_usec), doubling, cap the period, no jitter; reset by any other
 * outcome of a poll.
 *
 * Also owns the URL's record (src/core/file_record.h): the digest
 * and size of the last body read, its verdict (pending until merged,
 * applied, or rejected with the reason), the identities of its pods, and
 * the seq of the message that carried them; a failed poll (transport,
 * status) leaves it as it was: it speaks of the last body.
 */
#ifndef PODMUX_HTTP_SOURCE_H
#define PODMUX_HTTP_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/curl_loop.h"
#include "core/file_record.h"
#include "util/loop.h"
#include "metrics/metrics.h"
#include "core/mux.h"

#define HTTP_SOURCE_DEFAULT_PERIOD_USEC (20u * 1000u * 1000u)
/* The kubelet's client timeout; capped by the period. */
#define HTTP_SOURCE_TIMEOUT_USEC (10u * 1000u * 1000u)
#define HTTP_SOURCE_MAX_REDIRECTS 10
/* After a poll failed for want of memory: tried again after this pause,
 * doubling up to the period. */
#define HTTP_SOURCE_RETRY_USEC (1000u * 1000u)

struct http_source;

/* One header sent with every request (--manifest-url-header). */
struct http_header {
        char *name;
        char *value;
};

struct http_source_config {
        const char *url;
        const struct http_header *headers; /* copied */
        size_t n_headers;
        const char *node_name;
        uint64_t period_usec;       /* 0: default */
        uint64_t timeout_usec;      /* 0: HTTP_SOURCE_TIMEOUT_USEC, capped by the period */
        struct source_stats *stats; /* counted into when not NULL; outlives the source */
        uint64_t retry_usec;        /* 0: HTTP_SOURCE_RETRY_USEC (tests make it short) */
        /* Called, when not NULL, as a body that does not decode is
         * logged: once per distinct body (source is "http", where the
         * URL as it may be logged; the Events of doc/events.md). */
        void (*rejected)(void *data, const char *source, const char *where, const char *reason);
        void *rejected_data;
        /* Told of each change of the URL's record, after it; NULL: none.
         * It must not call into the source. */
        void (*record)(void *data, const struct file_record_view *v);
        void *record_data;
};

/* 0; -EINVAL for a URL that is empty or not http(s), with the reason in
 * err (may be NULL; util/buf.h: it replaces what err held, a success
 * leaves err alone); -ENOMEM (err empty). */
int http_source_new(struct loop *loop, struct curl_loop *cl, struct mux_channel *ch,
                    const struct http_source_config *cfg, struct http_source **ret_hs, struct buf *err);
/* First poll now, then every period after the previous one finished. */
int http_source_start(struct http_source *hs);
/* Polls now, unless a poll is in flight (SIGHUP; tests); the period
 * restarts from this poll's end. */
void http_source_poll(struct http_source *hs);
void http_source_free(struct http_source *hs); /* NULL-safe */

/* The pods message numbered seq, built from u, went to consumers: when
 * the URL's body is pending and u is a record of this source, seq is
 * the one that carried it.  O(1). */
void http_source_carried(struct http_source *hs, const struct pod_update *u, uint64_t seq);
/* Calls fn with the URL's record (borrowed for the call), once a body
 * was polled; returns what fn returns, or 0. */
int http_source_record(struct http_source *hs, int (*fn)(void *data, const struct file_record_view *v), void *data);

/* The URL as it may be logged: no user info, no query, no fragment.
 * Caller frees; NULL on ENOMEM. */
char *http_redact_url(const char *url);

#endif
