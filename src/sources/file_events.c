/*
 * file_events — see src/sources/file_events.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "util/backoff.h"
#include "util/digest.h"
#include "sources/file_records.h"
#include "sources/file_events.h"
#include "sources/file_reports.h"
#include "sources/file_source_int.h"
#include "sources/file_store.h"
#include "util/dir.h"
#include "util/keymap.h"
#include "sources/file_source.h"
#include "util/log.h"
#include "sources/manifest.h"
#include "util/mem.h"
#include "metrics/metrics.h"
#include "util/path.h"
#include "sources/static_pod.h"
#include "util/str.h"
#include "util/strmap.h"

static void change_clear(struct change *c)
{
        for (size_t i = 0; i < c->n; i++) {
                pod_unref(c->before[i]);
                pod_unref(c->after[i]);
                file_store_name_unref(c->held[i]);
        }
        c->n = 0;
}

/* Whether the merger would find nothing changed from before to after. */
bool file_events_pod_unchanged(const struct pod *before, const struct pod *after)
{
        return before == after || (before && after && strcmp(pod_uid(before), pod_uid(after)) == 0 &&
                                   pod_semantic_equal(before, after) && pod_status_equal(before, after));
}

/* Whether one of the first n before pods of c has uid. */
static bool uid_before(const struct change *c, size_t n, const char *uid)
{
        for (size_t i = 0; i < n; i++)
                if (c->before[i] && strcmp(pod_uid(c->before[i]), uid) == 0)
                        return true;
        return false;
}

/*
 * Whether c's change can go out as a delta: a delta speaks by UID, so
 * every UID it touches must name one stored pod, before and after.  Each
 * pod now there must be the only one with its UID, and each pod that was
 * there must have left no other pod with its UID, or kept its UID under
 * its key.  Else (pinned UIDs shared between files, or moved from one
 * name to another) the merger's choice depends on the whole set (a full
 * SET keeps only the last pod of a UID).
 */
static bool change_is_local(const struct state *st, const struct change *c)
{
        for (size_t i = 0; i < c->n; i++) {
                const struct pod *b = c->before[i], *a = c->after[i];

                if (a && file_store_count_of(st->uids, pod_uid(a)) > 1)
                        return false;
                if (b && file_store_count_of(st->uids, pod_uid(b)) > 0 && !(a && strcmp(pod_uid(a), pod_uid(b)) == 0))
                        return false;
        }
        return true;
}

/* The outcomes c sent (file_reports_outcome()): a pod applied, replaced or
 * removed under each key it touched. */
static void log_changes(struct file_source *fs, const struct change *c)
{
        for (size_t i = 0; i < c->n; i++) {
                const struct pod *b = c->before[i], *a = c->after[i];
                const struct entry *e = a ? keymap_get(fs->st.store, pod_key(a)) : NULL;

                if (file_events_pod_unchanged(b, a))
                        continue;
                if (a && e)
                        file_reports_outcome(b ? "replaced" : "applied", a, NAME(e->file));
                else if (b && c->held[i])
                        file_reports_outcome("removed", b, NAME(c->held[i]));
        }
}

/*
 * Sends what changed under c's keys as one delta: nothing for unchanged
 * re-reads, the new pods, and the old ones whose UIDs no pod has any more
 * as gone.  A UID shared between stored pods is the one case where the
 * decision needs the whole set, so then the full SET goes: O(n), only
 * for pinned UIDs shared between files.  Else O(1).  0 or -ENOMEM (the
 * caller re-lists).
 */
static int send_changes(struct file_source *fs, const struct change *c, uint64_t *ret_sent)
{
        struct pod_update *u;
        bool any = false;
        int r;

        *ret_sent = 0;
        for (size_t i = 0; i < c->n; i++)
                any = any || !file_events_pod_unchanged(c->before[i], c->after[i]);
        if (!any || fs->diverged)
                return 0; /* unchanged, or the relist due sends it all */
        if (!change_is_local(&fs->st, c)) {
                r = file_source_send_state(fs, fs->st.store, ret_sent);
                if (r == 0)
                        log_changes(fs, c);
                return r;
        }
        u = pod_update_new_delta(POD_SOURCE_FILE);
        if (!u)
                return -ENOMEM;
        for (size_t i = 0; i < c->n; i++) {
                const struct pod *b = c->before[i];

                if (c->after[i] && !file_events_pod_unchanged(b, c->after[i]) && pod_update_add(u, c->after[i]) < 0)
                        goto nomem;
                if (b && file_store_count_of(fs->st.uids, pod_uid(b)) == 0 && !uid_before(c, i, pod_uid(b)) &&
                    pod_update_add_gone(u, c->before[i]) < 0)
                        goto nomem;
        }
        r = mux_channel_send(fs->ch, u);
        if (r == 0) {
                source_stats_success(fs->stats, keymap_size(fs->st.store));
                *ret_sent = mux_channel_sent(fs->ch);
                log_changes(fs, c);
        }
        return r;
nomem:
        pod_update_free(u);
        return -ENOMEM;
}

/* The pod stored under key now (a new reference), or NULL. */
static struct pod *stored_pod(struct file_source *fs, const char *key)
{
        struct entry *e = key ? keymap_get(fs->st.store, key) : NULL;

        return e ? pod_ref(e->pod) : NULL;
}

/* The file holding key now (a new reference), or NULL. */
static struct file_name *holder_of(struct file_source *fs, const char *key)
{
        struct entry *e = keymap_get(fs->st.store, key);

        if (!e)
                return NULL;
        e->file->refs++;
        return e->file;
}

/*
 * After an event sent c's changes as send number sent (0: nothing went
 * out), the records of the files naming c's keys: the holder of each key
 * now, pending if its pod changed; and, where the holder changed, every
 * other file naming the key (a duplicate names its holder), found by a
 * look through every file, which only a key several files name costs
 * (as its hand-over does).  The event's own file is the caller's.
 */
void file_events_settle(struct file_source *fs, const struct change *c, uint64_t sent)
{
        for (size_t i = 0; i < c->n; i++) {
                const struct pod *any = c->after[i] ? c->after[i] : c->before[i];
                struct entry *e = any ? keymap_get(fs->st.store, pod_key(any)) : NULL;
                struct keyref *kr = any ? keymap_get(fs->st.keyrefs, pod_key(any)) : NULL;
                const struct file_name *holder = e ? e->file : NULL;
                size_t it = 0;
                void *v;

                if (holder)
                        file_store_settle(fs, &fs->st, holder,
                                          file_events_pod_unchanged(c->before[i], c->after[i]) ? 0 : sent, 0, NULL);
                if (!kr || holder == c->held[i] || kr->files <= (holder ? 1u : 0u))
                        continue;
                while (keymap_next(fs->st.files, &it, &v)) {
                        const struct file_name *f = v;

                        if (f->key == kr && f != holder)
                                file_store_settle(fs, &fs->st, f, 0, 0,
                                                  f == c->held[i] && c->before[i] ? pod_uid(c->before[i]) : NULL);
                }
        }
}

/*
 * The pod of kr's key moves to the first other file in sorted order that
 * still defines it (the kubelet's next relist would pick that one, so the
 * pod changes hands once).  Looks through every file, but only when
 * another file names the key (a duplicate), so the common delete costs
 * O(1).  0 or -errno (a resource error).
 */
static int take_over(struct file_source *fs, struct keyref *kr)
{
        const char **cands = NULL;
        size_t n = 0, it = 0;
        void *v;
        int r = 0;

        if (kr->files == 0)
                return 0;
        cands = malloc(kr->files * sizeof(*cands));
        if (!cands)
                return -ENOMEM;
        /* The files naming the key share its keyref; a name left out by
         * --static-pod-file-pattern never holds it. */
        for (size_t seen = 0; seen < kr->files && keymap_next(fs->st.files, &it, &v);) {
                const struct file_name *f = v;

                if (f->key != kr)
                        continue;
                seen++;
                if (!f->filtered)
                        cands[n++] = NAME(f);
        }
        if (n > 1)
                qsort(cands, n, sizeof(*cands), file_source_cmp_str);
        for (size_t i = 0; i < n && r == 0 && !keymap_get(fs->st.store, kr->key); i++) {
                struct frec *rec = file_records_get(&fs->recs, cands[i], false);
                struct pod *pod = NULL;
                struct buf k = BUF_INIT;
                bool retried, same = false;

                if (!rec)
                        continue;
                /* A file waiting for the read retry had its own event
                 * while it could not be read: reading it here takes it
                 * off the retry, so what it now holds, if not this key,
                 * needs an event of its own. */
                retried = strmap_get(fs->unreadable, rec->path) != NULL;
                r = file_source_load(fs, rec, 0, false, &pod);
                if (r == 0 && (r = pod_store_key(pod, &k)) == 0 && (same = strcmp(k.data, kr->key) == 0))
                        r = file_store_put(fs, &fs->st, rec, pod);
                if (retried && !same && r != LOAD_UNREADABLE && r != -ENOENT && !static_pod_resource_error(r))
                        file_source_mark_dirty(fs, rec->path, IN_CLOSE_WRITE);
                /* A bad file is skipped (reported); a file that now
                 * defines another pod is left to its own event. */
                if (r > 0 || (r < 0 && !static_pod_resource_error(r)))
                        r = 0;
                pod_unref(pod);
                buf_free(&k);
        }
        free(cands);
        return r;
}

/*
 * file no longer names kr's key (kr->files already leaves it out): if it
 * held the key's pod, that pod goes, or moves to the next file defining
 * the key, and c records the key's before and after.  O(1) unless another
 * file names the key (take_over).  0 or -errno (a resource error).
 */
static int release_key(struct file_source *fs, struct keyref *kr, const char *file, struct change *c)
{
        struct entry *e = keymap_get(fs->st.store, kr->key);
        size_t i = c->n;
        int r;

        /* Another file holds the key, or none does (its files were all
         * bad when it last changed hands). */
        if (!e || strcmp(NAME(e->file), file) != 0)
                return 0;
        c->before[i] = pod_ref(e->pod);
        c->held[i] = e->file;
        e->file->refs++;
        c->after[i] = NULL;
        c->n++;
        file_store_del(&fs->st, kr->key);
        /* Another file defining the same pod takes over at once (the
         * kubelet waits for the next relist). */
        r = take_over(fs, kr);
        c->after[i] = stored_pod(fs, kr->key);
        return r;
}

/*
 * file no longer defines a pod (it is gone, or is now bad): its pod goes,
 * or moves to another file defining it, as the next relist would decide,
 * and the change is sent; the records of the files naming its key follow
 * (the file's own is the caller's).  What was said about the file is
 * kept.  Returns the number of the send that took the file's pod away,
 * 0 when it held none (or its going changed nothing),
 * FILE_RECORDS_SENT_NONE when the change could not be made (a relist
 * will).
 */
uint64_t file_events_drop(struct file_source *fs, const char *file)
{
        struct file_name *f = keymap_remove(fs->st.files, file);
        struct change c = {.n = 0};
        uint64_t sent = 0;
        struct keyref *kr;
        bool held;
        int r;

        if (!f)
                return 0;
        /* The file names the key no more, but the keyref (whose text is
         * used below) goes only at the end, if no other file names it:
         * nothing in between names a key anew. */
        kr = f->key;
        f->key = NULL;
        kr->files--;
        r = release_key(fs, kr, file, &c);
        held = c.n > 0;
        if (r >= 0)
                r = send_changes(fs, &c, &sent);
        if (r < 0) {
                file_source_event_failed(fs, file, r);
                sent = FILE_RECORDS_SENT_NONE;
        } else {
                file_events_settle(fs, &c, sent);
        }
        if (held)
                file_records_no_pod(&fs->recs, f->rec);
        change_clear(&c);
        file_store_key_forget_unused(fs->st.keyrefs, kr);
        file_store_name_unref(f); /* the files map's reference */
        return held ? sent : 0;
}

/* A file that is gone: what was said about it is forgotten, its pod goes
 * or moves to another file, and its record goes once that is merged. */
void file_events_gone(struct file_source *fs, const char *file)
{
        struct frec *r = file_records_get(&fs->recs, file, false);
        uint64_t sent;

        if (r)
                r->refs++; /* file_events_drop() may let go of the last name */
        file_reports_forget(fs, file);
        sent = file_events_drop(fs, file);
        if (r && sent)
                file_records_gone(&fs->recs, r, sent);
        else if (r && !r->gone)
                file_records_drop(&fs->recs, r, 0);
        file_records_unref(r);
}

/*
 * Before file defines key: when the file holding key sorts first but is
 * gone from the disk, its event still queued, that event is taken now, so
 * that the key passes to the first file in sorted order that defines it
 * (file among them), not to file merely because it came first.
 */
static void take_holder_event(struct file_source *fs, const char *key, const char *file)
{
        struct entry *e = keymap_get(fs->st.store, key);
        struct file_name *holder;
        struct stat st;

        if (!e || strcmp(NAME(e->file), file) >= 0 || stat(NAME(e->file), &st) == 0 || errno != ENOENT)
                return;
        holder = e->file;
        holder->refs++; /* its path outlives the entry */
        file_events_gone(fs, NAME(holder));
        file_store_name_unref(holder);
}

/*
 * Stores pod, just read from file, and records in c what changed: under
 * its key, and, when the file defined another pod before (a new name or
 * namespace), under that key too, which the file gives up at once as the
 * next relist would: its pod goes, or another file defining it takes
 * over.  0 or -errno.
 */
static int put_changed(struct file_source *fs, struct frec *rec, struct pod *pod, struct change *c)
{
        const char *file = rec->path;
        struct file_name *f = keymap_get(fs->st.files, file);
        struct keyref *old = NULL;
        struct buf key = BUF_INIT;
        int r = pod_store_key(pod, &key);

        if (r < 0)
                return r;
        take_holder_event(fs, key.data, file);
        if (f && strcmp(f->key->key, key.data) != 0) {
                old = f->key;
                old->files++; /* held: file_store_put's rename of f must not free it */
        }
        c->before[c->n] = stored_pod(fs, key.data);
        c->held[c->n] = holder_of(fs, key.data);
        r = file_store_put(fs, &fs->st, rec, pod);
        c->after[c->n] = stored_pod(fs, key.data);
        c->n++;
        if (old) {
                old->files--;
                if (r >= 0 && f->key != old)
                        r = release_key(fs, old, file, c);
                file_store_key_forget_unused(fs->st.keyrefs, old);
        }
        buf_free(&key);
        return r;
}

/* A file that is there: (re)load it, send what changed, and settle the
 * records it touched.  A file that is now bad defines no pod, as in a
 * relist (a single file path keeps its pod, as its relist does); one
 * --static-pod-file-pattern leaves out only names its key. */
void file_events_changed(struct file_source *fs, struct frec *rec, uint32_t mask)
{
        const char *file = rec->path;
        struct change c = {.n = 0};
        struct pod *pod = NULL;
        struct file_name *f;
        uint64_t sent = 0;
        /* A file still being written fails to parse on early events; only
         * the close after writing (or a rename into place) reports errors. */
        int quiet = !(mask & (IN_CLOSE_WRITE | IN_MOVED_TO | IN_ATTRIB));
        int r;

        r = file_source_load(fs, rec, quiet, file_source_filtered(fs, file), &pod);
        if (r == LOAD_UNREADABLE)
                return; /* what the file gave stays */
        if (r < 0) {
                if (static_pod_resource_error(r))
                        file_source_event_failed(fs, file, r);
                else if (!quiet && r != -ENOENT && fs->watch_is_dir)
                        file_events_drop(fs, file);
                return;
        }
        pod = file_store_keep_stored(&fs->st, file, pod);
        r = put_changed(fs, rec, pod, &c);
        if (r >= 0)
                r = send_changes(fs, &c, &sent);
        if (r < 0) {
                file_source_event_failed(fs, file, r);
        } else {
                file_events_settle(fs, &c, sent);
                if ((f = keymap_get(fs->st.files, file)))
                        file_store_settle(fs, &fs->st, f, 0, 0, pod_uid(pod));
        }
        change_clear(&c);
        pod_unref(pod);
}
