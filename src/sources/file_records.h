/*
 * file_records — the life cycle of the records a source keeps of the
 * manifests it has seen (doc/pod-config.md 6.7; src/core/file_record.h
 * names the states and renders a view).  A record is pending under the
 * send that carries its change, applied with the pods message that
 * carried its pod (the owner says which, as it knows its pods), and
 * settled when the mux has merged that send (file_records_merged()):
 * applied with the last message of the owner's when nothing new went
 * out, or, for a gone file, dropped.  Changes are told once each, at
 * file_records_flush(), so a record never shows new bytes with an old
 * verdict.
 *
 * Owns: the records (keyed by path), their pending and changed lists.
 * Never: logs, sends, or knows which pod a record names (the owner's
 * view callback does).  O(1) per record changed; listing them all
 * O(n log n).
 */
#ifndef PODMUX_FILE_RECORDS_H
#define PODMUX_FILE_RECORDS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "core/file_record.h"
#include "util/digest.h"
#include "util/keymap.h"
#include "sources/static_pod.h"

/* A record's send number while it waits for a send (read, not yet
 * judged or sent). */
#define FILE_RECORDS_SENT_NONE UINT64_MAX

/*
 * What the source knows of one path it has seen (src/core/
 * file_record.h): kept in recs, and referenced by each struct file_name
 * of the path, which borrows the path from here.  A record dropped from
 * recs (its file gone) lives on while a name still holds it; a path seen
 * again gets a new record.
 */
struct frec {
        unsigned refs;            /* recs' while in it, one per file_name, one while on the dirty list */
        uint8_t state;            /* enum file_record_state */
        bool have_digest;         /* digest names the bytes last read */
        bool gone;                /* the file is gone: kept until its pod's removal is merged */
        bool dirty;               /* changed since it was last told (on the dirty list) */
        uint32_t seen;            /* the relist that last found the file (the owner's count of relists) */
        struct frec *prev, *next; /* the pending list, while sent != FILE_RECORDS_SENT_NONE */
        struct frec *dnext;       /* the dirty list */
        uint64_t sent;            /* PENDING: the send that carries its change, or FILE_RECORDS_SENT_NONE */
        uint64_t seq;             /* the pods message that carried its pod; 0 none */
        uint64_t carried;         /* PENDING: the last message that carried it (file_records_carried()), 0 none */
        int64_t size;             /* -1 unknown */
        uint64_t mtime;           /* wall usec, 0 unknown */
        uint8_t digest[DIGEST_LEN];
        char *text; /* the reason (REJECTED, DUPLICATE, IGNORED, UNREADABLE), or NULL */
        /* The key and, after a NUL, the UID of the file's pod when the
         * source does not store it (a duplicate, a name left out by
         * --static-pod-file-pattern), or NULL. */
        char *ident;
        char path[];
};

/*
 * A set of records, keyed by path, with the pending ones in send order
 * and the changed ones waiting to be told.  Who keeps one fills in the
 * callbacks: view shows a record as it is now (the owner knows which pod
 * a record names), record is told of each change, at file_records_flush().
 */
struct file_records {
        struct keymap *map; /* path -> struct frec* (keyed by their paths) */
        /* The pending ones in send order (file_records_merged() settles
         * from the head); the changed ones to tell (file_records_flush()). */
        struct frec *pend_head, *pend_tail;
        struct frec *changed_head, *changed_tail;
        bool oom;          /* a record could not be kept: the owner puts it right */
        uint64_t last_seq; /* the last pods message that carried a pod of the owner's */
        void (*view)(void *data, const struct frec *r, struct file_record_view *v, struct file_record_pod *pod);
        void *view_data;
        void (*record_fn)(void *data, const struct file_record_view *v);
        void *record_data;
};

/* Empty, with its callbacks (record may be NULL).  0 or -ENOMEM. */
int file_records_init(struct file_records *rs,
                      void (*view)(void *data, const struct frec *r, struct file_record_view *v,
                                   struct file_record_pod *pod),
                      void *view_data, void (*record_fn)(void *data, const struct file_record_view *v),
                      void *record_data);
/* Drops every record rs holds (the owner's references stay theirs).
 * NULL-safe fields: a half-built rs is fine. */
void file_records_clear(struct file_records *rs);
/* Drops a reference to r; frees it at zero.  NULL-safe. */
void file_records_unref(struct frec *r);
/* The record of path; made (pending, nothing read) when there is none and
 * create.  NULL when there is none, or for want of memory (create). */
struct frec *file_records_get(struct file_records *rs, const char *path, bool create);
/* r changed in a way only its owner's view shows (its pods): it is told
 * at the next file_records_flush(), once. */
void file_records_touch(struct file_records *rs, struct frec *r);
/* Off the pending list (if on it). */
void file_records_unpend(struct file_records *rs, struct frec *r);
/* Pending under send number sent (the newest: the list stays in order),
 * or, with FILE_RECORDS_SENT_NONE, read and not yet sent: a record
 * already waiting for a send keeps it (what that send carries is still
 * on its way). */
void file_records_pending(struct file_records *rs, struct frec *r, uint64_t sent);
/* Sets a final state (not PENDING) with its reason (copied, bounded;
 * NULL none); for want of memory, pending instead, and rs->oom is set. */
void file_records_set(struct file_records *rs, struct frec *r, enum file_record_state state, const char *reason);
/* The same with a reason already copied (file_record_reason_dup(), or
 * NULL), which r takes: it cannot fail. */
void file_records_set_text(struct file_records *rs, struct frec *r, enum file_record_state state, char *text);
/* Applied: consumers have its pod, carried by the message numbered seq
 * (0: as before). */
void file_records_applied(struct file_records *rs, struct frec *r, uint64_t seq);
/* No message will carry a pod of r's any more: its seq goes. */
void file_records_no_pod(struct file_records *rs, struct frec *r);
/* The identity of r's pod, which the source does not store ("key\0uid",
 * the UID bounded); NULL key: none.  False when it cannot be kept for
 * want of memory (a relist is asked for: rs->oom). */
bool file_records_ident(struct file_records *rs, struct frec *r, const char *key, const char *uid);
/* What a look at the file found: the bytes' digest (rd->read) and stat.
 * New bytes are pending until judged. */
void file_records_read(struct file_records *rs, struct frec *r, const struct static_pod_read *rd);
/* What a read found: the bytes' digest (DIGEST_LEN; NULL: not read),
 * size (-1 unknown) and mtime (wall usec, 0 unknown).  New bytes are
 * pending until judged. */
void file_records_bytes(struct file_records *rs, struct frec *r, const uint8_t *digest, int64_t size, uint64_t mtime);
/* The pods message seq carried r's change, when r waits for a send: it
 * is applied with seq when that send is merged (the owner calls this for
 * each message of its own that carries it; the last one counts). */
void file_records_carried(struct frec *r, uint64_t seq);
/* What a look at an entry that is not read found (its stat; NULL: none). */
void file_records_stat(struct file_records *rs, struct frec *r, const struct stat *st);
/* r's file and its pod are gone for good: out of recs, told as GONE
 * (with seq, a message by which consumers know) at the next flush. */
void file_records_drop(struct file_records *rs, struct frec *r, uint64_t seq);
/* r's file is gone and the removal of its pod was sent as send number
 * sent: pending until that is merged, then dropped. */
void file_records_gone(struct file_records *rs, struct frec *r, uint64_t sent);
/* Tells each record changed since the last flush, oldest change first. */
void file_records_flush(struct file_records *rs);
/* Whether a record waits for a send to be carried or merged.  O(1). */
bool file_records_waiting(const struct file_records *rs);
/* The owner's sends up to number through were merged: settles what waits
 * for them, applied with the message file_records_carried() named, else
 * as it was (the last message of the owner's when it had none: the
 * merger found nothing new); a gone record is dropped.  O(records
 * settled). */
void file_records_merged(struct file_records *rs, uint64_t through);
/* Calls fn with each record, in path order, each view borrowed for the
 * call; stops at fn's first negative return, which it returns.  0 or
 * -ENOMEM.  O(n log n) for n records. */
int file_records_each(struct file_records *rs, int (*fn)(void *data, const struct file_record_view *v), void *data);
size_t file_records_count(const struct file_records *rs);

#endif
