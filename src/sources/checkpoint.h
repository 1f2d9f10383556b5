/*
 * checkpoint — the API source's last good pod set on disk: the file
 * format, the crash-safe write and the load that refuses anything that is
 * not provably ours and whole (doc/checkpoint.md).
 *
 * Owns: the format and the checks.  Never: logs, keeps state between
 * calls, or runs a thread (checkpoint_writer does the writing off the
 * loop); every function here may be called from any thread.
 *
 * The file, DIR/api.checkpoint, is a 56-byte header then the content:
 *
 *   0  magic "PODMUXCP"          8 bytes
 *   8  format version            u32, little-endian (CHECKPOINT_VERSION)
 *   12 zero                      u32 (reserved)
 *   16 content length            u64, little-endian
 *   24 SHA-256 of bytes 0..23 and of the content      32 bytes
 *   56 content: one line of JSON (node, server, caSHA256, resourceVersion,
 *      time, pods: the count), then one line per pod: the pod's JSON as
 *      the source received it, less config.source and config.seen, which
 *      the merger owns.  JSON text holds no raw newline, so a line is a
 *      pod.
 *
 * Why SHA-256: libcrypto is linked already (no code of ours to get
 * wrong), it catches any corruption, of any length, anywhere in the
 * header or content, and it costs about 2 ms per megabyte on the writer
 * thread, never on the loop.  CRC32C would be faster, but the write is off
 * the critical path and the file is small (about 3 KB a pod).  It is not
 * a signature: whoever can write the file can recompute it, which is why
 * the directory and file must be the daemon's own (below).
 *
 * Whole or refused: the length in the header and the checksum make any
 * truncation, extension or flipped byte a refusal, and the write
 * (checkpoint_write) makes a crash at any point leave the previous file
 * or the new one, never a mix.
 *
 * Trust: the directory must be owned by the daemon's effective user and
 * not writable by group or others; the file must be a regular file owned
 * by that user, mode 0600 exactly.  Whoever can write the checkpoint can
 * make the node run a pod, as with the static pod directory.
 *
 * Errors: 0 or a negative errno, with one reason in err (util/buf.h's
 * convention: err may be NULL, a failure replaces what it held, success
 * leaves it alone, -ENOMEM may leave it empty).  The errno says which kind
 * of refusal it is:
 *   -ENOENT           no checkpoint (the directory or the file is missing)
 *   -EPERM            not trusted: owner, mode or file type
 *   -EBADMSG          corrupt or truncated: magic, length, checksum, content
 *   -EPROTONOSUPPORT  another format version
 *   -EXDEV            written for another node or another API server
 *   -ESTALE           older than the maximum age, or written in the future
 *   -EFBIG            larger than CHECKPOINT_MAX_BYTES
 *   -ENOMEM, or the -errno of a failed system call (reading, writing)
 */
#ifndef PODMUX_CHECKPOINT_H
#define PODMUX_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "core/pod.h"

#define CHECKPOINT_FILE "api.checkpoint"
#define CHECKPOINT_TMP_FILE "api.checkpoint.tmp"
#define CHECKPOINT_MAGIC "PODMUXCP"
#define CHECKPOINT_VERSION 1u
#define CHECKPOINT_HEADER_SIZE 56u
/* A checkpoint larger than this is neither written nor read: 5,000 pods of
 * 10 KB each is 50 MB. */
#define CHECKPOINT_MAX_BYTES (256u * 1024u * 1024u)
/* A pod line's JSON nesting limit, as for a list item. */
#define CHECKPOINT_MAX_DEPTH 64u
/* A SHA-256 in hex, NUL included. */
#define CHECKPOINT_FINGERPRINT_SIZE 65u

/* Whose checkpoint it is: compared field by field at load. */
struct checkpoint_identity {
        const char *node;
        /* The API server's URL, without credentials or query (as logged). */
        const char *server;
        /* SHA-256 of the CA bundle's bytes in hex (checkpoint_fingerprint),
         * or "" when none is configured (the system's CAs, or plain HTTP). */
        const char *ca_sha256;
};

/* A state to write: only read, by whichever thread writes. */
struct checkpoint_state {
        const char *rv; /* resourceVersion of the set; NULL or "" if unknown */
        /* Wall clock, microseconds: when the server last confirmed this
         * set (the age at load is counted from it). */
        uint64_t time_usec;
        /* The pods.  Only their members that never change after they are
         * built are read (src/core/pod.h, "Threads"), so another
         * thread may write them while the loop holds their references. */
        struct pod *const *pods;
        size_t n_pods;
};

/* A loaded checkpoint, owned by the caller (checkpoint_free). */
struct checkpoint {
        char *rv;
        uint64_t time_usec;
        struct pod **pods; /* one reference each, in file order */
        size_t n_pods;
        size_t bytes; /* the file's size */
};

/* Frees what c holds and zeroes it.  NULL-safe. */
void checkpoint_free(struct checkpoint *c);

/* SHA-256 of data[0..len) in lower-case hex into out.  0 or -ENOMEM. */
int checkpoint_fingerprint(const void *data, size_t len, char out[CHECKPOINT_FINGERPRINT_SIZE]);

/*
 * Checks that the directory open as fd (whose name, for messages, is
 * name) may hold a checkpoint: a directory owned by the effective user,
 * not writable by group or others.  0, -EPERM with the reason, or the
 * -errno of fstat.
 */
int checkpoint_dir_check(int fd, const char *name, struct buf *err);

/*
 * The whole file (header and content) for st, appended to out.
 * O(bytes).  0, -EFBIG (larger than CHECKPOINT_MAX_BYTES, err says), or
 * -ENOMEM (out as it was).
 */
int checkpoint_encode(const struct checkpoint_identity *id, const struct checkpoint_state *st, struct buf *out,
                      struct buf *err);

/* The points between the steps of a write, for tests to stop or kill a
 * writer at each (checkpoint_write's step argument). */
enum checkpoint_step {
        CHECKPOINT_STEP_OPENED,  /* the temporary file exists, empty */
        CHECKPOINT_STEP_PARTIAL, /* half of the bytes written */
        CHECKPOINT_STEP_WRITTEN, /* all written, not synced */
        CHECKPOINT_STEP_SYNCED,  /* the temporary file synced */
        CHECKPOINT_STEP_RENAMED, /* renamed over the checkpoint */
        CHECKPOINT_STEP_DONE,    /* the directory synced */
        _CHECKPOINT_STEP_MAX,
};
typedef void (*checkpoint_step_fn)(void *data, enum checkpoint_step step);

/*
 * Writes bytes[0..len) as the checkpoint in the directory open as dirfd
 * (name is its path, for messages), crash-safe: the directory is checked
 * (checkpoint_dir_check); a stale temporary file left by a crash is
 * removed; CHECKPOINT_TMP_FILE is created (O_EXCL, no symlink followed,
 * mode 0600), written whole, fsync'ed, renamed over CHECKPOINT_FILE, and
 * the directory fsync'ed.  step (may be NULL) is called at each point of
 * enum checkpoint_step.  On a failure before the rename the temporary
 * file is removed and the previous checkpoint is untouched; a failure of
 * the directory's fsync leaves the new file in place, not known durable.
 * Blocks for as long as the disk takes: never call it on the loop.
 * 0 or -errno, with the step that failed and why in err.
 */
int checkpoint_write(int dirfd, const char *name, const void *bytes, size_t len, checkpoint_step_fn step,
                     void *step_data, struct buf *err);

/*
 * Loads DIR/api.checkpoint when it is provably ours and whole: the
 * directory and the file pass the trust checks, the header's magic,
 * version, length and checksum hold, the content decodes, it names the
 * node, server and CA fingerprint of id, and it is at most max_age_usec
 * old at now_usec (wall clock; 0: no limit) and not from after now_usec.
 * Checked in that order; the first failure is the one reported.
 * 0 and *ret (the caller frees it with checkpoint_free), or a refusal (see
 * the errno list above) with one reason in err.  O(file size); the pods
 * are decoded one line at a time.
 */
int checkpoint_load(const char *dir, const struct checkpoint_identity *id, uint64_t max_age_usec, uint64_t now_usec,
                    struct checkpoint *ret, struct buf *err);

#endif
