/*
 * file_store — see src/sources/file_store.h.
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

/* How many stored pods have uid. */
size_t file_store_count_of(struct keymap *uids, const char *uid)
{
        struct entry *e = keymap_get(uids, uid);

        return e ? e->same_uid : 0;
}

/* A name for rec's path, not yet referenced.  NULL on ENOMEM. */
struct file_name *file_store_name_new(struct frec *rec, bool filtered)
{
        struct file_name *f = malloc(sizeof(*f));

        if (!f)
                return NULL;
        f->refs = 0;
        f->key = NULL;
        f->filtered = filtered;
        f->rec = rec;
        rec->refs++;
        return f;
}

/* Drops a reference to a struct file_name; frees it at zero.  NULL-safe. */
void file_store_name_unref(void *v)
{
        struct file_name *f = v;

        if (f && --f->refs == 0) {
                file_records_unref(f->rec);
                free(f);
        }
}

static const char *entry_key(const void *v)
{
        return pod_key(((const struct entry *)v)->pod);
}

static const char *entry_uid(const void *v)
{
        return pod_uid(((const struct entry *)v)->pod);
}

static const char *name_path(const void *v)
{
        return ((const struct file_name *)v)->rec->path;
}

static const char *keyref_text(const void *v)
{
        return ((const struct keyref *)v)->key;
}

static void entry_free(void *v)
{
        struct entry *e = v;

        if (!e)
                return;
        pod_unref(e->pod);
        file_store_name_unref(e->file);
        free(e);
}

/* The keyref of key, with one more file naming it (made if there is none).
 * NULL on ENOMEM, keyrefs unchanged. */
static struct keyref *key_hold(struct keymap *keyrefs, const char *key)
{
        struct keyref *kr = keymap_get(keyrefs, key);
        size_t len = strlen(key) + 1;

        if (!kr) {
                kr = malloc(sizeof(*kr) + len);
                if (!kr)
                        return NULL;
                kr->files = 0;
                memcpy(kr->key, key, len);
                if (keymap_put(keyrefs, kr, NULL) < 0) {
                        free(kr);
                        return NULL;
                }
        }
        kr->files++;
        return kr;
}

/* Frees kr (and its place in keyrefs) if no file names it.  Never
 * allocates. */
void file_store_key_forget_unused(struct keymap *keyrefs, struct keyref *kr)
{
        if (kr->files == 0) {
                (void)keymap_remove(keyrefs, kr->key);
                free(kr);
        }
}

static void key_drop(struct keymap *keyrefs, struct keyref *kr)
{
        kr->files--;
        file_store_key_forget_unused(keyrefs, kr);
}

void file_store_state_free(struct state *s)
{
        /* A map with borrowed keys never reads them while it is freed, so
         * the order does not matter. */
        keymap_free(s->store, entry_free);
        keymap_free(s->files, file_store_name_unref);
        keymap_free(s->uids, NULL);
        keymap_free(s->keyrefs, free);
        memset(s, 0, sizeof(*s));
}

/* Empty maps.  0 or -ENOMEM (s left empty). */
int file_store_state_init(struct state *s)
{
        s->store = keymap_new(entry_key);
        s->files = keymap_new(name_path);
        s->uids = keymap_new(entry_uid);
        s->keyrefs = keymap_new(keyref_text);
        if (s->store && s->files && s->uids && s->keyrefs)
                return 0;
        file_store_state_free(s);
        return -ENOMEM;
}

/* The file r's state names, and its stored pod, or NULL. */
const struct entry *file_store_rec_entry(const struct state *st, const struct frec *r, const struct file_name **ret_f)
{
        const struct file_name *f = keymap_get(st->files, r->path);
        const struct entry *e = f ? keymap_get(st->store, f->key->key) : NULL;

        *ret_f = f;
        return e && e->file == f ? e : NULL;
}

/* r as a view (src/core/file_record.h); pod is where its pod goes. */
void file_store_rec_view(void *data, const struct frec *r, struct file_record_view *v, struct file_record_pod *pod)
{
        const struct file_source *fs = data;
        const struct file_name *f = NULL;
        const struct entry *e = r->state == FILE_RECORD_GONE ? NULL : file_store_rec_entry(&fs->st, r, &f);

        *v = (struct file_record_view){
                .source = POD_SOURCE_FILE,
                .path = r->path,
                .state = (enum file_record_state)r->state,
                .reason = r->text,
                .digest = r->have_digest ? r->digest : NULL,
                .size = r->size,
                .mtime_usec = r->mtime,
                .pods = pod,
                .seq = r->seq,
        };
        if (e && r->state != FILE_RECORD_DUPLICATE) {
                pod->key = pod_key(e->pod);
                pod->uid = pod_uid(e->pod);
                v->n_pods = 1;
        } else if (r->state == FILE_RECORD_DUPLICATE && r->ident) {
                pod->key = r->ident;
                pod->uid = r->ident + strlen(r->ident) + 1;
                v->n_pods = 1;
        }
}

/* Counts e, just stored, under its pod's UID.  Cannot fail after
 * keymap_reserve(uids, 1). */
static void uid_count(struct keymap *uids, struct entry *e)
{
        struct entry *held = keymap_get(uids, pod_uid(e->pod));

        if (held) {
                held->same_uid++;
                return;
        }
        e->same_uid = 1;
        (void)keymap_put(uids, e, NULL);
}

/*
 * Uncounts e, which has just left store (and may be freed next).  If uids
 * holds e itself, another stored entry with that UID takes its place and
 * its count.  The search is O(n), but only for a UID that stored pods
 * share, and such a change goes out as a full SET, O(n) anyway.  Cannot
 * fail.
 */
static void uid_uncount(struct keymap *uids, struct keymap *store, struct entry *e)
{
        struct entry *held = keymap_get(uids, pod_uid(e->pod));
        size_t it = 0;
        void *v;

        if (held && held != e && held->same_uid > 1) {
                held->same_uid--;
                return;
        }
        if (held == e && e->same_uid > 1) {
                while (keymap_next(store, &it, &v)) {
                        struct entry *o = v;

                        if (o != e && strcmp(pod_uid(o->pod), pod_uid(e->pod)) == 0) {
                                o->same_uid = e->same_uid - 1;
                                (void)keymap_put(uids, o, NULL); /* in e's place: no allocation */
                                return;
                        }
                }
        }
        /* Its last pod (a count gone wrong would land here too: the entry
         * goes rather than dangle). */
        if (held)
                (void)keymap_remove(uids, pod_uid(e->pod));
}

/* Stores pod, defined by file f, in place of what its key held (freed,
 * once uncounted).  0 or -ENOMEM with nothing changed. */
static int store_set(struct state *s, struct file_name *f, struct pod *pod)
{
        struct entry *e = calloc(1, sizeof(*e)), *old = NULL;

        if (!e)
                return -ENOMEM;
        e->pod = pod_ref(pod);
        e->file = f;
        f->refs++;
        /* With a slot reserved, counting the UID cannot fail. */
        if (keymap_reserve(s->uids, 1) < 0 || keymap_put(s->store, e, (void **)&old) < 0) {
                entry_free(e);
                return -ENOMEM;
        }
        if (old && strcmp(pod_uid(old->pod), pod_uid(pod)) == 0) {
                /* The same count; if uids holds old, e takes its place. */
                if (keymap_get(s->uids, pod_uid(pod)) == old) {
                        e->same_uid = old->same_uid;
                        (void)keymap_put(s->uids, e, NULL);
                }
        } else {
                if (old)
                        uid_uncount(s->uids, s->store, old);
                uid_count(s->uids, e);
        }
        entry_free(old);
        return 0;
}

/* Takes key's entry, if any, out of the store, uncounts its pod and frees
 * it.  Never allocates. */
void file_store_del(struct state *s, const char *key)
{
        struct entry *e = keymap_remove(s->store, key);

        if (e)
                uid_uncount(s->uids, s->store, e);
        entry_free(e);
}

/* Records that file f names key, listing f in files if it is not there.
 * 0 or -ENOMEM with nothing changed. */
int file_store_name_key(struct state *s, struct file_name *f, const char *key)
{
        struct keyref *kr;

        if (f->key && strcmp(f->key->key, key) == 0)
                return 0;
        kr = key_hold(s->keyrefs, key);
        if (!kr)
                return -ENOMEM;
        if (f->key) {
                key_drop(s->keyrefs, f->key);
        } else if (keymap_put(s->files, f, NULL) < 0) {
                key_drop(s->keyrefs, kr);
                return -ENOMEM;
        } else {
                f->refs++;
        }
        f->key = kr;
        return 0;
}

/*
 * pod, just read from file, or the pod prev already stores for that file
 * under the same key if it is the same (pod_same): an unchanged re-read or
 * relist then keeps the object the merger stores too (src/core/pod.h)
 * rather than a second copy of its text.  Takes the caller's reference to
 * pod and returns one to what it keeps.  O(the pod's text).
 */
struct pod *file_store_keep_stored(const struct state *prev, const char *file, struct pod *pod)
{
        struct entry *e = prev->store ? keymap_get(prev->store, pod_key(pod)) : NULL;

        if (!e || e->pod == pod || strcmp(NAME(e->file), file) != 0 || !pod_same(e->pod, pod))
                return pod;
        pod_unref(pod);
        return pod_ref(e->pod);
}

/* The store's whole content as one SET, sorted.  0 or -ENOMEM.  O(n) in
 * the source's pods: inherent while a source speaks in SETs. */
int file_store_update(struct keymap *store, struct pod_update **ret_u)
{
        struct pod_update *u = pod_update_new(POD_OP_SET, POD_SOURCE_FILE);
        size_t it = 0;
        void *v;

        if (!u)
                return -ENOMEM;
        while (keymap_next(store, &it, &v)) {
                struct entry *e = v;

                if (pod_update_add(u, e->pod) < 0) {
                        pod_update_free(u);
                        return -ENOMEM;
                }
        }
        pod_update_sort(u);
        *ret_u = u;
        return 0;
}

/* Puts (rec's file -> pod) into the state.  The first file in sorted
 * order keeps a namespace/name; a later one is refused with a warning
 * naming both, once while that stays so (file_reports_dup()).  A name
 * --static-pod-file-pattern leaves out only names its key, silently.
 * Returns 1 if the store changed, 0 if not, -errno. */
int file_store_put(struct file_source *fs, struct state *s, struct frec *rec, struct pod *pod)
{
        const char *file = rec->path;
        struct buf key = BUF_INIT;
        struct file_name *f = NULL;
        struct entry *old;
        int r = -ENOMEM;

        if (pod_store_key(pod, &key) < 0)
                goto out;
        f = keymap_get(s->files, file);
        if (!f && !(f = file_store_name_new(rec, file_source_filtered(fs, file))))
                goto out;
        f->refs++; /* ours until the end: a new name nothing took goes there */
        r = 0;
        if (f->filtered)
                goto record;
        old = keymap_get(s->store, key.data);
        if (old && strcmp(NAME(old->file), file) < 0) {
                struct stat st;

                /* The earlier file still defines it: it keeps the pod. */
                if (stat(NAME(old->file), &st) == 0) {
                        file_reports_dup(fs, file, key.data, NAME(old->file));
                        goto record;
                }
        }
        if (old && old->pod == pod) {
                file_reports_clear_dup(fs, file, key.data);
                goto record;
        }
        if (old && strcmp(NAME(old->file), file) != 0)
                file_reports_take_from(fs, file, key.data, NAME(old->file));
        r = store_set(s, f, pod);
        if (r < 0)
                goto out;
        file_reports_clear_dup(fs, file, key.data);
        r = 1;
record:
        if (file_store_name_key(s, f, key.data) < 0)
                r = -ENOMEM;
out:
        file_store_name_unref(f);
        buf_free(&key);
        return r;
}

/*
 * The verdict on file f, which names a key in st.  Holding it: pending
 * under send number sent when its pod went out in it (sent != 0); else,
 * if already pending, under pend when given (a relist's SET carries it
 * again) or under the send it waits for; else applied.  Another file
 * holding the key makes it a duplicate naming that file (uid: its pod's
 * UID; NULL: the one the record has); none holding it, it is ignored for
 * a name left out, else pending until the next relist (a resource
 * failure left the key so).
 */
void file_store_settle(struct file_source *fs, const struct state *st, const struct file_name *f, uint64_t sent,
                       uint64_t pend, const char *uid)
{
        const struct entry *e = keymap_get(st->store, f->key->key);
        struct frec *r = f->rec;
        char text[DUP_TEXT];

        /* Only a read of the file ends that (file_source_load()). */
        if (r->state == FILE_RECORD_UNREADABLE)
                return;
        if (e && e->file == f) {
                file_records_ident(&fs->recs, r, NULL, NULL);
                if (sent)
                        file_records_pending(&fs->recs, r, sent);
                else if (r->state == FILE_RECORD_PENDING && pend)
                        file_records_pending(&fs->recs, r, pend);
                else if (r->state != FILE_RECORD_PENDING || r->sent == FILE_RECORDS_SENT_NONE)
                        file_records_applied(&fs->recs, r, r->seq ? 0 : fs->recs.last_seq);
                return;
        }
        /* A duplicate without its pod's identity is not told: pending
         * until the relist that is asked for. */
        if ((uid || !r->ident || strcmp(r->ident, f->key->key) != 0) &&
            !file_records_ident(&fs->recs, r, f->key->key, uid ? uid : "")) {
                file_records_unpend(&fs->recs, r);
                file_records_pending(&fs->recs, r, FILE_RECORDS_SENT_NONE);
                return;
        }
        if (e) {
                file_reports_dup_reason(text, sizeof(text), f->key->key, NAME(e->file), f->filtered);
                file_records_no_pod(&fs->recs, r);
                file_records_set(&fs->recs, r, FILE_RECORD_DUPLICATE, text);
        } else if (f->filtered) {
                file_records_set(&fs->recs, r, FILE_RECORD_IGNORED, STATIC_POD_FILTERED_REASON);
        } else {
                file_records_pending(&fs->recs, r, FILE_RECORDS_SENT_NONE);
        }
}
