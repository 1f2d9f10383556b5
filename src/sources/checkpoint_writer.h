/*
 * checkpoint_writer — keeps the API source's checkpoint up to date
 * without the event loop ever waiting on a disk (doc/checkpoint.md).
 *
 * Owns: one thread that encodes and writes (sources/checkpoint.h), the
 * checkpoint directory's descriptor, locked so that one daemon writes a
 * directory, the eventfd through which the thread reports to the loop,
 * the snapshot being written, and the pacing timer.
 * Never: logs (done_fn is told each result, on the loop), blocks the loop
 * (except checkpoint_writer_flush, at shutdown), or touches a pod's
 * reference count off the loop.
 *
 * Pacing.  checkpoint_writer_changed() only marks the state changed:
 * O(1), however often it is called.  A write starts on the loop's next
 * turn when none started in the last interval_usec, else once that
 * interval has passed, and never while one is in flight; only then is the
 * state taken, through snapshot_fn.  So a burst of changes costs one
 * write, at most one write starts per interval, and an unchanged state
 * costs nothing.  Every refresh_usec (0: never) the state is taken again
 * and written if its time is newer than the one on disk (the server
 * confirmed it since): the age a later load measures is then the age of
 * the server's last word, not of the last change.  A failed write is
 * tried again an interval later.
 *
 * Threads.  A snapshot's pod references are taken (by snapshot_fn) and
 * dropped (by the writer) on the loop thread; in between, the writer
 * thread reads only the members a pod never changes once built
 * (src/core/pod.h, "Threads"), and what it allocates is its own.
 * It hands the result back under a mutex and wakes the loop through an
 * eventfd.  Cost on the loop per write: the snapshot (one reference per
 * pod) and its release; encoding, checksum and fsync run on the thread.
 * The thread blocks every signal.
 */
#ifndef PODMUX_CHECKPOINT_WRITER_H
#define PODMUX_CHECKPOINT_WRITER_H

#include <stdint.h>

#include "util/buf.h"
#include "sources/checkpoint.h"
#include "util/loop.h"
#include "metrics/metrics.h"

/* A write that could not start for want of memory is tried again after
 * this pause. */
#define CHECKPOINT_RETRY_USEC 1000000ull

/* A state handed to the writer.  Filled by snapshot_fn; the writer owns
 * it from then on and clears it on the loop thread. */
struct checkpoint_snapshot {
        char *rv;           /* heap, may be NULL */
        uint64_t time_usec; /* see struct checkpoint_state */
        struct pod **pods;  /* heap array, one reference each */
        size_t n_pods;
};

/* Drops the references and frees the members; zeroes s.  Loop thread
 * only.  NULL-safe. */
void checkpoint_snapshot_clear(struct checkpoint_snapshot *s);

/* What one write did. */
struct checkpoint_result {
        int error;          /* 0 or -errno */
        const char *reason; /* why it failed ("" on success) */
        size_t bytes;       /* the file's size */
        uint64_t time_usec; /* the state's time */
        uint64_t took_usec; /* encoding and writing */
};

/* Fills *ret with the state to write: 0; 1 when there is nothing to write
 * (the source has no state of its own yet); -ENOMEM.  Called on the loop
 * thread. */
typedef int (*checkpoint_snapshot_fn)(void *data, struct checkpoint_snapshot *ret);
/* Called on the loop thread after each write. */
typedef void (*checkpoint_done_fn)(void *data, const struct checkpoint_result *res);

struct checkpoint_writer_config {
        const char *dir;               /* copied */
        struct checkpoint_identity id; /* copied */
        uint64_t interval_usec;        /* > 0 */
        uint64_t refresh_usec;         /* 0: never */
        checkpoint_snapshot_fn snapshot;
        void *snapshot_data;
        checkpoint_done_fn done; /* may be NULL */
        void *done_data;
        struct checkpoint_stats *stats; /* may be NULL; outlives the writer */
        /* Tests: called on the writing thread at each step of a write. */
        checkpoint_step_fn step;
        void *step_data;
};

struct checkpoint_writer;

/*
 * Opens and checks the directory (checkpoint_dir_check), creating it
 * (mode 0700, with its missing parents 0755, as mkdir -p: util/dir.h
 * dir_make()) when it is missing, locks it, and
 * starts the thread.  0; -EPERM for a directory that cannot be trusted,
 * -EBUSY when another process holds the lock, -errno, each with the
 * reason in err; -ENOMEM (err empty).
 */
int checkpoint_writer_new(struct loop *loop, const struct checkpoint_writer_config *cfg,
                          struct checkpoint_writer **ret_w, struct buf *err);
/* The state changed: a write will start within the interval.  O(1). */
void checkpoint_writer_changed(struct checkpoint_writer *w);
/*
 * At a clean shutdown, on the loop thread with the loop no longer run:
 * waits for the write in flight, then writes the current state on the
 * calling thread if it is newer than the one on disk.  0 (also when there
 * was nothing to write) or the write's error, with the reason in err.
 */
int checkpoint_writer_flush(struct checkpoint_writer *w, struct buf *err);
/* Waits for the write in flight, stops the thread, unlocks.  NULL-safe. */
void checkpoint_writer_free(struct checkpoint_writer *w);

#endif
