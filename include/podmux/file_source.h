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
 */
#ifndef PODMUX_FILE_SOURCE_H
#define PODMUX_FILE_SOURCE_H

#include <stdint.h>

#include "podmux/buf.h"
#include "podmux/loop.h"
#include "podmux/metrics.h"
#include "podmux/mux.h"
#include "podmux/watcher.h"

#define FILE_SOURCE_DEFAULT_PERIOD_USEC (20u * 1000u * 1000u)
/* Retry of a missing path or a failed watch: 1 s doubling to 20 s. */
#define FILE_SOURCE_RETRY_USEC (1000u * 1000u)
#define FILE_SOURCE_RETRY_MAX_USEC (20u * 1000u * 1000u)

/* Changed files read per loop turn at most: a burst of files is taken in
 * pieces of this many (about 30 ms of parsing), and the loop answers
 * signals, consumers and the other sources in between. */
#define FILE_SOURCE_BATCH 256

struct file_source;

struct file_source_config {
        const char *path;      /* directory or file; cleaned by the source */
        const char *node_name;
        uint64_t period_usec;  /* 0: default */
        struct source_stats *stats; /* counted into when not NULL; outlives the source */
        /* First pause before a failed relist is tried again (doubling to
         * the period); 0: FILE_SOURCE_RETRY_USEC.  Tests make it short. */
        uint64_t retry_usec;
        /* Called, when not NULL, as a bad file is logged: once per
         * distinct reason (source is "file"; the Events of doc/events.md). */
        void (*rejected)(void *data, const char *source, const char *path, const char *reason);
        void *rejected_data;
};

/* watcher may be NULL (no watch; relist only).  0; -EINVAL for an empty
 * path or node name, with the reason in err (may be NULL; podmux/buf.h: it
 * replaces what err held, a success leaves err alone); -ENOMEM (err
 * empty). */
int file_source_new(struct loop *loop, struct watcher *watcher,
                    struct mux_channel *ch,
                    const struct file_source_config *cfg,
                    struct file_source **ret_fs, struct buf *err);
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

#endif
