/*
 * metrics — the daemon's counters, and their two renderings: Prometheus
 * text format (the metrics endpoint) and the "sources" member of a status
 * message (`podmux status`).
 *
 * Owns: plain counters, one struct per daemon (no globals), written only
 * from the loop thread.  The sources record into their source_stats
 * through a pointer they are given (NULL: not counted), and so does the
 * event recorder into its event_stats; run.c records updates, merges and
 * plugin events.  Gauges that other modules own
 * (consumers, plugins registered) are passed in at render time.
 * Never: logs, or holds anything secret (error texts are the log lines the
 * sources wrote, which never hold a token or a key).
 */
#ifndef PODMUX_METRICS_H
#define PODMUX_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "core/pod.h"

#define METRICS_ERROR_TEXT 256   /* bytes kept of a source's last error */
#define METRICS_TARGET_TEXT 4096 /* bytes kept of a source's path or URL */

/* What one source has done; times are wall-clock microseconds, 0 never. */
struct source_stats {
        bool configured;
        /* What the source reads, as it may be shown (a path, a URL
         * without credentials or query); set by the source, "" unknown. */
        char target[METRICS_TARGET_TEXT];
        /* One word for what the source is doing, set by the source from
         * a string literal (never freed): "ok", "failing", "absent"...
         * NULL: not started yet (shown as "starting"). */
        const char *state;
        /* api: whose pods it serves: "waiting" (none yet), "checkpoint"
         * (its checkpoint's, doc/checkpoint.md), "live" (a list's).  A
         * string literal; NULL for the other sources. */
        const char *serving;
        uint64_t last_success;
        uint64_t last_error_at;
        char last_error[METRICS_ERROR_TEXT];
        uint64_t errors;         /* failed polls, lists, watches, reads */
        uint64_t parse_errors;   /* manifests or objects that did not decode */
        uint64_t relists;        /* api: lists started */
        uint64_t watch_restarts; /* api: watches ended and started again */
        size_t pods;             /* in the source's last delivery */
};

/* NULL-safe: a source given no stats counts nothing.  pods is the number
 * delivered, or METRICS_PODS_UNCHANGED (a poll that found no change).
 * A delivery while serving "checkpoint" is no success: only the pods
 * are counted. */
#define METRICS_PODS_UNCHANGED ((size_t)-1)
void source_stats_success(struct source_stats *st, size_t pods);
/* Records an error (parse: also a parse error); the text is formatted
 * from fmt and truncated to METRICS_ERROR_TEXT - 1 bytes. */
void source_stats_error(struct source_stats *st, bool parse, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* Sets the target (copied, truncated to METRICS_TARGET_TEXT - 1 bytes).
 * NULL-safe. */
void source_stats_target(struct source_stats *st, const char *target);
/* Sets the state: state must be a string literal (it is kept, not
 * copied).  NULL-safe. */
void source_stats_state(struct source_stats *st, const char *state);

/* The API source's checkpoint (doc/checkpoint.md): what the writer did
 * (counted by checkpoint_writer on the loop thread) and what the source
 * serves.  Times are wall-clock microseconds, 0 never. */
struct checkpoint_stats {
        bool configured;
        char dir[METRICS_TARGET_TEXT];
        uint64_t served_time; /* the served checkpoint's time, 0 none */
        char served_rv[METRICS_ERROR_TEXT];
        /* Why the checkpoint was not loaded at start ("" if it was). */
        char refused[METRICS_ERROR_TEXT];
        uint64_t writes; /* checkpoints written */
        uint64_t write_errors;
        uint64_t bytes;           /* written in all */
        uint64_t last_bytes;      /* the last checkpoint's size */
        uint64_t last_write_usec; /* how long the last write took */
        uint64_t last_write_at;   /* when the last write ended */
        /* The time of the state on disk: loaded at start, then written. */
        uint64_t written_time;
        uint64_t last_error_at;
        char last_error[METRICS_ERROR_TEXT];
};

/* Records a failed write (text truncated as source_stats_error's).
 * NULL-safe. */
void checkpoint_stats_error(struct checkpoint_stats *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Copies text into a text field of a stats struct (dst, size bytes),
 * truncated to a whole UTF-8 character as above. */
void metrics_text(char *dst, size_t size, const char *text);

enum metrics_source {
        METRICS_SOURCE_FILE,
        METRICS_SOURCE_HTTP,
        METRICS_SOURCE_API,
        METRICS_SOURCE_ALL, /* "*": merged snapshots */
        _METRICS_SOURCE_MAX,
};

/* What the event recorder has done (doc/events.md); rendered when
 * configured. */
struct event_stats {
        bool configured;
        uint64_t recorded;   /* events handed to the recorder */
        uint64_t sent;       /* writes the API server accepted (POST or PATCH) */
        uint64_t throttled;  /* dropped by the per-object spam filter */
        uint64_t queue_full; /* dropped: the queue was full */
        uint64_t rejected;   /* dropped: the API server refused the write */
        uint64_t gave_up;    /* dropped: no answer after every try */
        size_t queue_depth;  /* writes waiting, the one in flight included */
        size_t queue_peak;   /* the most there ever were */
};

/* Merge latency buckets, upper bounds in microseconds (+Inf follows). */
#define METRICS_MERGE_BUCKETS 14

struct metrics {
        uint64_t started; /* wall clock */
        struct source_stats sources[METRICS_SOURCE_API + 1];
        uint64_t updates[_POD_OP_MAX][_METRICS_SOURCE_MAX];
        uint64_t update_pods[_POD_OP_MAX][_METRICS_SOURCE_MAX];
        uint64_t merge_buckets[METRICS_MERGE_BUCKETS + 1];
        uint64_t merge_count;
        uint64_t merge_sum_usec;
        uint64_t plugin_registrations;
        uint64_t plugin_deregistrations;
        uint64_t plugin_failures;
        uint64_t scrapes;
        struct event_stats events;
        struct checkpoint_stats checkpoint;
};

/* What other modules own, read at render time. */
struct metrics_gauges {
        size_t consumers;
        uint64_t consumers_dropped;
        size_t plugins_registered;
        uint64_t stream_seq;
};

void metrics_init(struct metrics *m); /* zeroes, stamps the start time */
/* "file", "http", "api" -> that source's stats; NULL for anything else. */
struct source_stats *metrics_source(struct metrics *m, const char *source);
void metrics_count_update(struct metrics *m, const struct pod_update *u);
void metrics_observe_merge(struct metrics *m, uint64_t usec);
/* op: REGISTERED, DEREGISTERED or FAILED (others are ignored). */
void metrics_count_plugin(struct metrics *m, const char *op);

/* Appends the Prometheus text exposition (format 0.0.4).  0 or -ENOMEM.
 * Ages (the checkpoint's) are counted to wall_usec() now. */
int metrics_render(const struct metrics *m, const struct metrics_gauges *g, struct buf *out);
/* Appends ,"started":...,"sources":[...] for a status message: each
 * configured source with its target and state, its last success, last
 * error and counters; for api also what it serves and its checkpoint.
 * 0 or -ENOMEM. */
int metrics_render_status(const struct metrics *m, struct buf *out);

#endif
