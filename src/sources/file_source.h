/*
 * file_source — the static-pod file source (source "file"): a directory or
 * a single manifest file, watched through the watcher and re-listed every
 * period (doc/pod-config.md section 6).
 *
 * Owns: its snapshot store (namespace/name -> pod), the file -> store key
 * map, the relist timer and the watch on the path.
 * Never: merges.  It sends its complete set as a SET on its mux channel
 * when it lists the path (start, each period, SIGHUP, a watch overflow),
 * and on each event only what changed, as a delta (see struct
 * pod_update); a file read again unchanged sends nothing.  Decoding is
 * manifest's job.
 *
 * Also owns a record of every path it has seen in the directory
 * (doc/pod-config.md 6.7, src/core/file_record.h; their life cycle is
 * src/sources/file_records.h's, shared with the URL source): the
 * digest, size and mtime of the bytes last read, and the verdict (pending, applied,
 * rejected, duplicate, ignored), updated in the turn of the event that
 * changes it, O(1) per file and per event (a key several files define
 * costs a look at every file, as its hand-over does).  A record goes from
 * pending to applied when the change is merged: file_source_carried()
 * names the pods message that carried it, and the mux's merged callback
 * (src/core/mux.h) settles what no message carried (the merger
 * found nothing new).
 */
#ifndef PODMUX_FILE_SOURCE_H
#define PODMUX_FILE_SOURCE_H

#include <stdint.h>

#include "util/buf.h"
#include "core/file_record.h"
#include "util/loop.h"
#include "metrics/metrics.h"
#include "core/mux.h"
#include "util/watcher.h"

#define FILE_SOURCE_DEFAULT_PERIOD_USEC (20u * 1000u * 1000u)
/* Its two backoffs (util/backoff.h), neither with jitter:
 * - the watch's: a missing path is looked for every FILE_SOURCE_RETRY_USEC
 *   (reset, then one step); a watch that cannot be armed is tried again
 *   after FILE_SOURCE_RETRY_USEC doubling to FILE_SOURCE_RETRY_MAX_USEC;
 *   reset when the watch is armed or the path goes away;
 * - the relist's, after a relist or event that failed for want of a
 *   resource: base the config's retry_usec (FILE_SOURCE_RETRY_USEC),
 *   doubling, cap the period; reset by a relist that succeeds. */
#define FILE_SOURCE_RETRY_USEC (1000u * 1000u)
#define FILE_SOURCE_RETRY_MAX_USEC (20u * 1000u * 1000u)

/* Changed files read per loop turn at most: a burst of files is taken in
 * pieces of this many (about 30 ms of parsing), and the loop answers
 * signals, consumers and the other sources in between. */
#define FILE_SOURCE_BATCH 256

struct file_source;

struct file_source_config {
        const char *path; /* directory or file; cleaned by the source */
        const char *node_name;
        uint64_t period_usec;       /* 0: default */
        struct source_stats *stats; /* counted into when not NULL; outlives the source */
        /* First pause before a failed relist is tried again (doubling to
         * the period); 0: FILE_SOURCE_RETRY_USEC.  Tests make it short. */
        uint64_t retry_usec;
        /* Called, when not NULL, as a bad file is logged: once per
         * distinct reason (source is "file"; the Events of doc/events.md). */
        void (*rejected)(void *data, const char *source, const char *path, const char *reason);
        void *rejected_data;
        /* --static-pod-file-pattern: in a directory, only names matching
         * one of these fnmatch(3) globs are read (names starting with '.'
         * never are); n_patterns 0: every other name (the kubelet's rule).
         * A name left out is still decoded, silently, to tell whether its
         * pod is a duplicate; it never defines one.  Copied. */
        const char *const *patterns;
        size_t n_patterns;
        /* Told of each change of a record, once per event, after it (the
         * record as it now is; state FILE_RECORD_GONE when it is dropped,
         * the file and its pod gone); NULL: none.  It must not call into
         * the source. */
        void (*record)(void *data, const struct file_record_view *v);
        void *record_data;
};

#define FILE_SOURCE_MAX_PATTERNS 64

/* watcher may be NULL (no watch; relist only).  0; -EINVAL for an empty
 * path or node name, with the reason in err (may be NULL; util/buf.h: it
 * replaces what err held, a success leaves err alone); -ENOMEM (err
 * empty). */
int file_source_new(struct loop *loop, struct watcher *watcher, struct mux_channel *ch,
                    const struct file_source_config *cfg, struct file_source **ret_fs, struct buf *err);
/* First relist now, then the watch and the periodic relist. */
int file_source_start(struct file_source *fs);
/*
 * Relist now (tests, SIGHUP).  All or nothing: the state found replaces
 * the source's state, or, after an error that is not one file's own (the
 * directory cannot be read, memory or descriptors run out, the path
 * cannot be stat'ed for a reason other than not existing), the last good
 * state stays, the error is logged and counted, and the relist is tried
 * again after 1 s doubling to the period.  A path that does not exist
 * means no pods; a bad file drops its own pod, as in the kubelet.
 */
void file_source_relist(struct file_source *fs);
void file_source_free(struct file_source *fs); /* NULL-safe */

/*
 * The pods message numbered seq, built from u, went to consumers
 * (podmux run calls this after each broadcast): each pending file whose
 * current pod u carries (by UID; the same pod as the merger would judge
 * it) is applied, with seq.  O(pods of u), O(1) while nothing is pending.
 */
void file_source_carried(struct file_source *fs, const struct pod_update *u, uint64_t seq);

/*
 * Calls fn with each record, in path order, each view borrowed for the
 * call; stops at fn's first negative return, which it returns.  0 or
 * -ENOMEM.  O(n log n) for n records.
 */
int file_source_records(struct file_source *fs, int (*fn)(void *data, const struct file_record_view *v), void *data);
/* How many records there are (tests only). */
size_t file_source_record_count(const struct file_source *fs);

#endif
