/*
 * file_source_int — struct file_source itself, shared by the modules the
 * file source is made of (file_source.c: the relist, the watch and the
 * life cycle; file_store, file_events, file_reports), and the few
 * functions of file_source.c they call.
 *
 * Never included outside src/sources/file_*.c: the source's users see
 * src/sources/file_source.h only.
 *
 * Costs: nothing of its own.
 */
#ifndef PODMUX_FILE_SOURCE_INT_H
#define PODMUX_FILE_SOURCE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/pod.h"
#include "sources/file_records.h"
#include "sources/file_source.h"
#include "sources/file_store.h"
#include "util/backoff.h"
#include "util/episode.h"
#include "util/loop.h"
#include "util/strmap.h"

#define DIR_MASK                                                                                                       \
        (IN_CREATE | IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |                \
         IN_DELETE_SELF | IN_MOVE_SELF)
#define FILE_MASK (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF)

/* file_source_load(): the bytes could not be read; nothing changes but the
 * record (doc/pod-config.md 6.8). */
#define LOAD_UNREADABLE 1

struct dirty_file {
        struct dirty_file *next;
        uint32_t mask;
        char path[];
};

struct relist_job {
        char **names; /* the listing, sorted */
        size_t n, next;
        struct state st; /* the state being built */
};

struct file_source {
        struct loop *loop;
        struct watcher *watcher;
        struct mux_channel *ch;
        char *path;
        char *node_name;
        char **patterns; /* --static-pod-file-pattern */
        size_t n_patterns;
        struct file_records recs; /* every path seen (struct frec) */
        uint32_t gen;             /* relists started */
        uint64_t period;
        struct source_stats *stats; /* may be NULL */
        struct state st;            /* the pods sent, with their indexes */
        struct strmap *errors;      /* file -> last logged reason (char*) */
        /* Files with events not yet looked at, in the order of their first
         * event (a queue), each with its events' masks OR'ed, and indexed
         * by path (keys borrowed from the entries); batch_timer (zero
         * delay) works through them. */
        struct strmap *dirty;
        struct dirty_file *dirty_head, *dirty_tail;
        bool burst; /* a full batch was read since the queue was empty */
        struct loop_timer *batch_timer;
        /* A relist of the directory in progress (step_timer reads its
         * next batch), or NULL. */
        struct relist_job *job;
        struct loop_timer *step_timer;
        struct strmap *unknown; /* file -> unknown fields last warned about (char*) */
        struct strmap *docs;    /* file -> the documents last warned about (char*) */
        /* file -> the duplicate it was last warned as (char*): the pod
         * and the file that keeps it */
        struct strmap *dups;
        bool absent;                  /* the path was last found missing (warned once) */
        struct episode watch_failing; /* the watch cannot be armed (util/episode.h) */
        struct watcher_watch *watch;
        int watch_is_dir;
        struct loop_timer *relist_timer;
        struct loop_timer *retry_timer;
        struct backoff retry; /* of the watch (file_source.h) */
        /* A relist or an event that failed for want of a resource (memory,
         * descriptors, a directory read error): the last good state stays
         * and a relist is tried again after the relist backoff. */
        struct loop_timer *relist_retry_timer;
        struct backoff relist;  /* file_source.h */
        struct episode failing; /* the relist failing, being retried */
        /* An event failed half way: the store may differ from what was
         * sent, so no delta goes out until a relist has sent it whole. */
        bool diverged;
        void (*rejected)(void *data, const char *source, const char *path, const char *reason);
        void *rejected_data;
        /* Files whose bytes could not be read (doc/pod-config.md 6.8):
         * path -> the reason logged (char*).  Each keeps what it had;
         * read_retry_timer reads them all again after the read backoff,
         * which starts over once none is left. */
        struct strmap *unreadable;
        struct loop_timer *read_retry_timer;
        struct backoff read_retry;
};

/* Names are never read when they start with '.', and, in a directory,
 * only when they match a --static-pod-file-pattern if some are given. */
bool file_source_filtered(const struct file_source *fs, const char *path);

int file_source_load(struct file_source *fs, struct frec *rec, int quiet, bool filtered, struct pod **ret_pod);
int file_source_cmp_str(const void *a, const void *b);
void file_source_event_failed(struct file_source *fs, const char *file, int r);
/* file is looked at in a coming batch, as if an event named it. */
void file_source_mark_dirty(struct file_source *fs, const char *file, uint32_t mask);
int file_source_send_state(struct file_source *fs, struct keymap *store, uint64_t *ret_sent);

#endif
