/*
 * file_record — what the daemon knows of one manifest it has seen: a
 * static-pod file, or the manifest URL (doc/protocol.md "Files request",
 * doc/pod-config.md 6.7): the verdict on the bytes it last read, and
 * whether consumers have been told of its pod.
 *
 * The sources keep the records (each in its own structures: O(1) per file
 * beyond what they keep anyway) and show one through a view, borrowed for
 * a call; this module names the states and renders a view as the JSON
 * object the status and files requests send.  `podmux wait`, `podmux
 * status --files` and `podmux validate` read that object.
 *
 * Owns: nothing.  Never: keeps a view, logs.
 */
#ifndef PODMUX_FILE_RECORD_H
#define PODMUX_FILE_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

/* Bytes of a reason a record keeps: a longer one (a manifest with many bad
 * fields) is cut at a character's end and ends with "...". */
#define FILE_RECORD_REASON_MAX 2048
/* Bytes of a UID a record keeps for a pod it does not store (a duplicate):
 * pinned UIDs are the manifest's, of any length. */
#define FILE_RECORD_UID_MAX 256

enum file_record_state {
        FILE_RECORD_PENDING,    /* read (or gone), not yet merged */
        FILE_RECORD_APPLIED,    /* merged: consumers have its pod */
        FILE_RECORD_REJECTED,   /* the manifest is refused: reason says why */
        FILE_RECORD_DUPLICATE,  /* its pod is another file's: reason names it */
        FILE_RECORD_IGNORED,    /* not read as a manifest: reason says why */
        FILE_RECORD_UNREADABLE, /* not read (I/O error): reason says why; its pod stays */
        FILE_RECORD_GONE,       /* only in a change: the file and its pod are gone */
        _FILE_RECORD_STATE_MAX,
};

/* "pending", "applied", ...; NULL out of range. */
const char *file_record_state_name(enum file_record_state s);

/* One pod a record names. */
struct file_record_pod {
        const char *key; /* "namespace/name" (the name alone without one) */
        const char *uid; /* "" when unknown */
};

/* A record as a source shows it, every pointer borrowed for the call. */
struct file_record_view {
        const char *source; /* POD_SOURCE_FILE or POD_SOURCE_HTTP */
        const char *path;   /* the file's path, or the manifest URL as logged */
        enum file_record_state state;
        const char *reason;    /* NULL for none */
        const uint8_t *digest; /* SHA-256 of the bytes last read (DIGEST_LEN), or NULL */
        int64_t size;          /* bytes, -1 unknown */
        uint64_t mtime_usec;   /* wall clock, 0 unknown */
        const struct file_record_pod *pods;
        size_t n_pods;
        uint64_t seq; /* the pods message that carried its current pod; 0 none */
};

/*
 * Appends v as one JSON object:
 *   {"source":"file","path":P,"state":S,"reason":R|null,"digest":D|null,
 *    "size":N|null,"mtime":T|null,"pods":[{"namespace","name","uid"}],
 *    "seq":N|null}
 * ("url" instead of "path" for the http source; a path that is not
 * UTF-8 has its bytes in "path_hex" too, src/util/json_path.h).  0 or
 * -ENOMEM (out may hold part of it: the caller drops the buffer).
 */
int file_record_render(const struct file_record_view *v, struct buf *out);

/* A copy of reason for a record to keep: at most FILE_RECORD_REASON_MAX
 * bytes with the NUL (see above), valid UTF-8 kept whole.  NULL on
 * ENOMEM. */
char *file_record_reason_dup(const char *reason);

#endif
