/*
 * file_source — static pods from a directory or a file (see
 * include/podmux/file_source.h and doc/pod-config.md section 6).
 *
 * State (struct state): store (namespace/name -> entry{pod, file}) and
 * files (path -> the key the file names), with two indexes; each name is
 * kept once and shared (see struct file_name and struct keyref), no map
 * copies a key.  A relist sends the store's whole content as one SET; an
 * event marks its file dirty, and dirty files are read in batches
 * (FILE_SOURCE_BATCH per loop turn), each change going out as a delta of
 * that one pod, so an event costs the same whatever the number of files.
 * Deviations from the kubelet (doc/pod-config.md): an empty or missing
 * relist clears the store; the first file in sorted order wins a
 * duplicate namespace/name; the watch is re-armed when the path is
 * deleted, moved or re-created; and an event leaves exactly the state a
 * relist would find then (the kubelet's waits for its next relist): a
 * file that renames its pod, or moves it to another namespace, or turns
 * bad, gives up its old pod at once, and the next file in sorted order
 * defining that pod takes it over at once.
 *
 * Bad files are logged once per distinct reason (a relist every period
 * would otherwise repeat the same line forever), and so are duplicates,
 * extra YAML documents, a missing path and a watch that cannot be set up
 * (doc/design.md "Errors"); a duplicate, the path and the watch say once
 * (info) when that is over.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "podmux/dir.h"
#include "podmux/keymap.h"
#include "podmux/file_source.h"
#include "podmux/log.h"
#include "podmux/manifest.h"
#include "podmux/mem.h"
#include "podmux/metrics.h"
#include "podmux/path.h"
#include "podmux/static_pod.h"
#include "podmux/str.h"
#include "podmux/strmap.h"

#define DIR_MASK (IN_CREATE | IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE | \
                  IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)
#define FILE_MASK (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF)

/*
 * A file's path, kept once: the files map borrows it as its key, and each
 * entry whose pod the file defined holds a reference.  An entry can
 * outlive the file's place in files for a moment (file_drop() takes the
 * name out before the pod goes), and a relist's state holds names of its
 * own, hence the count.  The fields are in this order so that the path
 * starts at offset 12, not 16.
 */
struct file_name {
        struct keyref *key; /* the key the file names; non-NULL iff in files */
        unsigned refs;      /* the files map's, while listed, and one per entry */
        char path[];
};

/* A store key as the files name it, kept once: shared by the files naming
 * it, and borrowed as its key by the keyrefs index.  It goes with the last
 * of those files (the key need not be stored: a key whose files are all
 * bad now stays named until they go).  The key starts at offset 4. */
struct keyref {
        unsigned files; /* how many files name it */
        char key[];
};

struct entry {
        struct pod *pod;
        struct file_name *file; /* a reference */
        /* On the entry the uids index holds for its pod's UID: how many
         * stored pods have that UID (else unused). */
        unsigned same_uid;
};

/*
 * The source's pods, or those a relist gathers.  Only store_set(),
 * store_del(), name_key() and file_gone() change the maps (state_free()
 * and replace_state() drop or swap them whole), and they keep them in
 * step.  store, files and keyrefs are keymaps, keyed by the text their
 * items hold (an entry's pod's key, a name's path, a keyref's text); uids
 * holds one stored entry per UID, which keeps the count, and when that
 * entry leaves, another with the same UID takes its place (uid_uncount).
 */
struct state {
        struct keymap *store; /* key -> struct entry* (keyed by the entries' pods' keys) */
        struct keymap *files; /* path -> struct file_name* (keyed by their paths) */
        /* Indexes that keep an event's cost independent of the number of
         * files: how many stored pods have each UID (a shared UID needs a
         * full SET), and how many files name each key (only a key named
         * by several files needs a search for the next one). */
        struct keymap *uids;    /* uid -> struct entry* whose same_uid counts it (keyed by its pod's UID) */
        struct keymap *keyrefs; /* key -> struct keyref* (keyed by their texts) */
};

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
        bool absent;         /* the path was last found missing (warned once) */
        char *watch_failure; /* why the watch cannot be armed, logged once; NULL if none */
        struct watcher_watch *watch;
        int watch_is_dir;
        struct loop_timer *relist_timer;
        struct loop_timer *retry_timer;
        uint64_t retry_delay;
        /* A relist or an event that failed for want of a resource (memory,
         * descriptors, a directory read error): the last good state stays
         * and a relist is tried again after relist_delay. */
        struct loop_timer *relist_retry_timer;
        uint64_t relist_retry_base;
        uint64_t relist_delay;
        char *failure; /* the failure being retried, logged once */
};

/* ---- small helpers ------------------------------------------------------------ */

/* How many stored pods have uid. */
static size_t count_of(struct keymap *uids, const char *uid)
{
        struct entry *e = keymap_get(uids, uid);

        return e ? e->same_uid : 0;
}

/* A name for path, not yet referenced.  NULL on ENOMEM. */
static struct file_name *name_new(const char *path)
{
        size_t len = strlen(path) + 1;
        struct file_name *f = malloc(sizeof(*f) + len);

        if (!f)
                return NULL;
        f->refs = 0;
        f->key = NULL;
        memcpy(f->path, path, len);
        return f;
}

/* Drops a reference to a struct file_name; frees it at zero.  NULL-safe. */
static void name_unref(void *v)
{
        struct file_name *f = v;

        if (f && --f->refs == 0)
                free(f);
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
        return ((const struct file_name *)v)->path;
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
        name_unref(e->file);
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
static void key_forget_unused(struct keymap *keyrefs, struct keyref *kr)
{
        if (kr->files == 0) {
                (void)keymap_remove(keyrefs, kr->key);
                free(kr);
        }
}

static void key_drop(struct keymap *keyrefs, struct keyref *kr)
{
        kr->files--;
        key_forget_unused(keyrefs, kr);
}

static void state_free(struct state *s)
{
        /* A map with borrowed keys never reads them while it is freed, so
         * the order does not matter. */
        keymap_free(s->store, entry_free);
        keymap_free(s->files, name_unref);
        keymap_free(s->uids, NULL);
        keymap_free(s->keyrefs, free);
        memset(s, 0, sizeof(*s));
}

/* Empty maps.  0 or -ENOMEM (s left empty). */
static int state_init(struct state *s)
{
        s->store = keymap_new(entry_key);
        s->files = keymap_new(name_path);
        s->uids = keymap_new(entry_uid);
        s->keyrefs = keymap_new(keyref_text);
        if (s->store && s->files && s->uids && s->keyrefs)
                return 0;
        state_free(s);
        return -ENOMEM;
}

/* Logs a bad file once per distinct reason. */
static void report_bad(struct file_source *fs, const char *file, const char *reason,
                       int quiet, bool parse)
{
        char *prev = strmap_get(fs->errors, file), *copy;

        /* One line per change of the file's state: a write in progress
         * says nothing, a reason already given is not repeated. */
        if (quiet) {
                log_trace("file \"%s\": %s (still being written?)", file, reason);
                return;
        }
        if (prev && strcmp(prev, reason) == 0) {
                log_debug("file \"%s\": %s", file, reason);
                return;
        }
        log_error("file \"%s\": %s", file, reason);
        source_stats_error(fs->stats, parse, "file \"%s\": %s", file, reason);
        /* Bad, it duplicates nothing: said again if it does once fixed. */
        free(strmap_remove(fs->dups, file));
        copy = strdup(reason);
        if (copy && strmap_put(fs->errors, file, copy, (void **)&prev) == 0)
                free(prev);
        else
                free(copy);
}

static void clear_bad(struct file_source *fs, const char *file)
{
        char *prev = strmap_remove(fs->errors, file);

        if (prev) {
                log_info("file \"%s\": valid again", file);
                free(prev);
        }
}

/* A file that is gone: what was said about it is forgotten, silently (it
 * is said again if the file comes back still bad). */
static void forget_reports(struct file_source *fs, const char *file)
{
        free(strmap_remove(fs->errors, file));
        free(strmap_remove(fs->unknown, file));
        free(strmap_remove(fs->docs, file));
        free(strmap_remove(fs->dups, file));
}

static int cmp_name(const void *key, const void *elem)
{
        return strcmp(key, *(char *const *)elem);
}

/* After a listing of the directory (names, sorted): files it did not
 * find are gone, whatever events were missed.  O(reports log n). */
static void trim_reports(struct file_source *fs, char **names, size_t n)
{
        struct strmap *maps[] = {fs->errors, fs->unknown, fs->docs, fs->dups};

        for (size_t m = 0; m < sizeof(maps) / sizeof(maps[0]); m++) {
                size_t it = 0;
                const char *k;

                while (strmap_next(maps[m], &it, &k, NULL))
                        if (!n || !bsearch(k, names, n, sizeof(*names), cmp_name))
                                free(strmap_remove(maps[m], k)); /* the current key */
        }
}

/* Warns about the fields a file's manifest has that v1 does not define
 * (dropped, as the kubelet drops them) when that list changes. */
static void warn_unknown(struct file_source *fs, const char *file, const struct v1_unknown *u)
{
        struct buf list = BUF_INIT;
        char *prev = strmap_get(fs->unknown, file), *copy;

        if (u->total == 0) {
                free(strmap_remove(fs->unknown, file));
                return;
        }
        if (v1_unknown_join(u, &list) < 0 || (prev && strcmp(prev, list.data) == 0))
                goto out;
        log_warn("file \"%s\": unknown fields ignored (not in core/v1 of Kubernetes %s): %s",
                 file, v1_schema_kubernetes, list.data);
        copy = buf_steal(&list, NULL);
        if (copy && strmap_put(fs->unknown, file, copy, (void **)&prev) == 0)
                free(prev);
        else
                free(copy);
out:
        buf_free(&list);
}

/* Records text in map as what was said last about file (out of memory:
 * it is said again next time). */
static void remember(struct strmap *map, const char *file, const char *text)
{
        char *copy = strdup(text), *prev = NULL;

        if (copy && strmap_put(map, file, copy, (void **)&prev) == 0)
                free(prev);
        else
                free(copy);
}

/* Logs text as a warning about file unless map says it was said last,
 * then at debug only. */
static void warn_once(struct strmap *map, const char *file, const char *text)
{
        const char *prev = strmap_get(map, file);

        if (prev && strcmp(prev, text) == 0) {
                log_debug("file \"%s\": %s", file, text);
                return;
        }
        log_warn("file \"%s\": %s", file, text);
        remember(map, file, text);
}

/* Warns that a file holds documents after its first, which are ignored
 * (as the kubelet ignores them, silently), when their number changes. */
static void warn_docs(struct file_source *fs, const char *file, int docs)
{
        char text[128];

        if (docs <= 1) {
                free(strmap_remove(fs->docs, file));
                return;
        }
        (void)snprintf(text, sizeof(text), "%d YAML documents: only the first is used, the others are ignored", docs);
        warn_once(fs->docs, file, text);
}

/* Room for a duplicate's text: a key, a path and words. */
#define DUP_TEXT (2 * PATH_MAX + 256)

/* The text a duplicate is warned with. */
static void dup_text(char *text, size_t size, const char *key, const char *winner)
{
        (void)snprintf(text, size,
                       "pod \"%s\" is already defined by file \"%s\": ignored (the first file in "
                       "sorted order wins)",
                       key, winner);
}

/* file defines key, which winner keeps: one warning while that stays so
 * (a relist finds it again every period). */
static void note_dup(struct file_source *fs, const char *file, const char *key, const char *winner)
{
        char text[DUP_TEXT];

        dup_text(text, sizeof(text), key, winner);
        warn_once(fs->dups, file, text);
}

/* file's pod is stored: if it was a duplicate, that is over (one info
 * line). */
static void clear_dup(struct file_source *fs, const char *file, const char *key)
{
        char *prev = strmap_remove(fs->dups, file);

        if (prev) {
                log_info("file \"%s\": now defines pod \"%s\" (no longer a duplicate)", file, key);
                free(prev);
        }
}

/* Reads and decodes one file into a pod.  Returns -ENOENT quietly when the
 * file vanished, and a resource error (see static_pod_resource_error()) quietly for
 * the caller to handle; other errors are the file's, reported (once)
 * unless quiet. */
static int load_file(struct file_source *fs, const char *file, int quiet,
                     struct pod **ret_pod)
{
        struct v1_unknown unknown = {NULL, 0, 0};
        struct buf err = BUF_INIT;
        int r, docs = 1;

        /* The same steps `podmux validate` takes (static_pod.h). */
        r = static_pod_load(file, fs->node_name, ret_pod, &unknown, &docs, NULL, &err);
        if (r == -ENOENT || static_pod_resource_error(r))
                goto out; /* gone, or not the file's fault: the caller retries */
        if (r < 0) {
                report_bad(fs, file, err.len ? err.data : "invalid manifest", quiet, r != -EACCES && r != -EIO);
        } else {
                clear_bad(fs, file);
                warn_unknown(fs, file, &unknown);
                warn_docs(fs, file, docs);
        }
out:
        v1_unknown_clear(&unknown);
        buf_free(&err);
        return r;
}

/* ---- sending ---------------------------------------------------------------------- */

/* The store's whole content as one SET, sorted.  0 or -ENOMEM.  O(n) in
 * the source's pods: inherent while a source speaks in SETs. */
static int store_update(struct keymap *store, struct pod_update **ret_u)
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

/* Sends store as the source's state.  0, or -ENOMEM with nothing sent. */
static int send_state(struct file_source *fs, struct keymap *store)
{
        struct pod_update *u = NULL;
        size_t n;
        int r = store_update(store, &u);

        if (r < 0)
                return r;
        n = u->n_pods;
        r = mux_channel_send(fs->ch, u);
        if (r < 0)
                return r;
        source_stats_success(fs->stats, n);
        return 0;
}

/* ---- the state ------------------------------------------------------------------- */

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
static void store_del(struct state *s, const char *key)
{
        struct entry *e = keymap_remove(s->store, key);

        if (e)
                uid_uncount(s->uids, s->store, e);
        entry_free(e);
}

/* Records that file f names key, listing f in files if it is not there.
 * 0 or -ENOMEM with nothing changed. */
static int name_key(struct state *s, struct file_name *f, const char *key)
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
 * relist then keeps the object the merger stores too (include/podmux/pod.h)
 * rather than a second copy of its text.  Takes the caller's reference to
 * pod and returns one to what it keeps.  O(the pod's text).
 */
static struct pod *keep_stored(const struct state *prev, const char *file, struct pod *pod)
{
        struct entry *e = prev->store ? keymap_get(prev->store, pod_key(pod)) : NULL;

        if (!e || e->pod == pod || strcmp(e->file->path, file) != 0 || !pod_same(e->pod, pod))
                return pod;
        pod_unref(pod);
        return pod_ref(e->pod);
}

/* file now defines key in other's place: other sorts later (file is new)
 * or is gone (its event is still to come).  One warning; other, if it is
 * still there, is now a duplicate, which that warning said already. */
static void take_from(struct file_source *fs, const char *file, const char *key, const char *other)
{
        char text[DUP_TEXT];
        struct stat st;

        log_warn("file \"%s\": now defines pod \"%s\" in place of file \"%s\" (which sorts later or is gone)", file,
                 key, other);
        if (stat(other, &st) < 0)
                return;
        dup_text(text, sizeof(text), key, file);
        remember(fs->dups, other, text);
}

/* Puts (file -> pod) into the state.  The first file in sorted order
 * keeps a namespace/name; a later one is refused with a warning naming
 * both, once while that stays so (note_dup()).  Returns 1 if the store
 * changed, 0 if not, -errno. */
static int store_put(struct file_source *fs, struct state *s, const char *file, struct pod *pod)
{
        struct buf key = BUF_INIT;
        struct file_name *f = NULL;
        struct entry *old;
        int r = -ENOMEM;

        if (pod_store_key(pod, &key) < 0)
                goto out;
        f = keymap_get(s->files, file);
        if (!f && !(f = name_new(file)))
                goto out;
        f->refs++; /* ours until the end: a new name nothing took goes there */
        old = keymap_get(s->store, key.data);
        if (old && strcmp(old->file->path, file) < 0) {
                struct stat st;

                /* The earlier file still defines it: it keeps the pod. */
                if (stat(old->file->path, &st) == 0) {
                        note_dup(fs, file, key.data, old->file->path);
                        r = 0;
                        goto record;
                }
        }
        if (old && old->pod == pod) {
                clear_dup(fs, file, key.data);
                r = 0;
                goto record;
        }
        if (old && strcmp(old->file->path, file) != 0)
                take_from(fs, file, key.data, old->file->path);
        r = store_set(s, f, pod);
        if (r < 0)
                goto out;
        clear_dup(fs, file, key.data);
        r = 1;
record:
        if (name_key(s, f, key.data) < 0)
                r = -ENOMEM;
out:
        name_unref(f);
        buf_free(&key);
        return r;
}

/* ---- relist ------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Loads every listed file into st (a fresh state).  A file that
 * vanished is skipped; a file that is bad (unreadable, invalid, not a
 * regular file) is reported and skipped, so its pod drops out as in the
 * kubelet; a resource error fails the whole load.  0 or -errno (a resource
 * error) with *ret_what set.
 */
static int load_all(struct file_source *fs, char **names, size_t n, struct state *st, const char **ret_what)
{
        for (size_t i = 0; i < n; i++) {
                struct buf reason = BUF_INIT;
                struct pod *pod = NULL;
                int r, kind = static_pod_entry(names[i], &reason);

                if (kind < 0) {
                        buf_free(&reason);
                        *ret_what = "cannot check a file";
                        return kind;
                }
                if (kind == STATIC_POD_BAD)
                        report_bad(fs, names[i], reason.len ? reason.data : "skipped", 0, false);
                else if (kind == STATIC_POD_DIRECTORY)
                        log_debug("file source: skipping directory \"%s\"", names[i]);
                buf_free(&reason);
                if (kind != STATIC_POD_MANIFEST)
                        continue;
                r = load_file(fs, names[i], 0, &pod);
                if (static_pod_resource_error(r)) {
                        *ret_what = "cannot load a file";
                        return r;
                }
                if (r < 0)
                        continue;
                pod = keep_stored(&fs->st, names[i], pod);
                r = store_put(fs, st, names[i], pod);
                pod_unref(pod);
                if (r < 0) {
                        *ret_what = "cannot store a pod";
                        return r;
                }
        }
        return 0;
}

/* Sends st (built by a relist, its indexes with it) and makes it the
 * source's state, leaving st empty.  On failure nothing changes and st
 * stays the caller's.  0 or -ENOMEM. */
static int replace_state(struct file_source *fs, struct state *st)
{
        int r = send_state(fs, st->store);

        if (r < 0)
                return r;
        state_free(&fs->st);
        fs->st = *st;
        memset(st, 0, sizeof(*st));
        return 0;
}

/* relist(): the listing is taken and fs->job reads it, a batch per turn. */
#define RELIST_STARTED 2

static void job_free(struct relist_job *j)
{
        if (!j)
                return;
        dir_list_free(j->names, j->n);
        state_free(&j->st);
        free(j);
}

/*
 * relist() of a directory: lists it, and hands the names with st to a new
 * fs->job (RELIST_STARTED: the maps are the job's now, st is left empty).
 * 0 when there is no entry (or the directory went away), or -errno with
 * *ret_what set; st stays the caller's.
 */
static int relist_dir(struct file_source *fs, struct state *st, const char **ret_what)
{
        struct relist_job *j;
        char **names = NULL;
        size_t n = 0;
        int r;

        r = dir_list(fs->path, DIR_LIST_NO_HIDDEN | DIR_LIST_PATHS, &names, &n, ret_what);
        /* The directory went away between stat and open. */
        if (r == -ENOENT || r == -ENOTDIR)
                r = 0;
        if (r < 0 || n == 0)
                goto out;
        /* The files are read a batch per loop turn. */
        j = calloc(1, sizeof(*j));
        if (!j) {
                r = -ENOMEM;
                *ret_what = "cannot list";
                goto out;
        }
        j->names = names;
        j->n = n;
        j->st = *st;
        memset(st, 0, sizeof(*st));
        fs->job = j;
        return RELIST_STARTED;
out:
        dir_list_free(names, n);
        return r;
}

/* relist() of a regular file: loads it into st.  0 (also when it is gone:
 * no pods), 1 for a bad file (what was sent before is kept), or -errno (a
 * resource error) with *ret_what set. */
static int relist_file(struct file_source *fs, struct state *st, const char **ret_what)
{
        struct pod *pod = NULL;
        int r;

        r = load_file(fs, fs->path, 0, &pod);
        if (r == -ENOENT)
                return 0; /* gone: no pods */
        if (r < 0) {
                /* A bad file keeps what was sent before; a resource
                 * error is retried. */
                *ret_what = "cannot load the file";
                return static_pod_resource_error(r) ? r : 1;
        }
        pod = keep_stored(&fs->st, fs->path, pod);
        r = store_put(fs, st, fs->path, pod);
        pod_unref(pod);
        *ret_what = "cannot store the pod";
        return r > 0 ? 0 : r;
}

/* The path is not there: no pods.  Said once (a warning, in the
 * kubelet's words), however many relists find it so, until it appears. */
static void path_missing(struct file_source *fs)
{
        if (fs->absent) {
                log_debug("file source: \"%s\": path does not exist", fs->path);
                return;
        }
        fs->absent = true;
        log_warn("file source: \"%s\": path does not exist: no static pods until it is created", fs->path);
        source_stats_error(fs->stats, false, "\"%s\": path does not exist", fs->path);
}

/* What status shows the source doing (include/podmux/metrics.h). */
static void update_state(struct file_source *fs)
{
        source_stats_state(fs->stats, fs->absent          ? "absent"
                                      : fs->failure       ? "failing"
                                      : fs->watch_failure ? "unwatched"
                                                          : "ok");
}

/*
 * One relist of the path: the state it finds replaces the source's whole
 * state, or, on any error that is not a file's own, nothing changes.
 * 0 (or 1: a bad single file, nothing changed), RELIST_STARTED for a
 * directory (relist_step() goes on), or -errno with *ret_what naming the
 * step.  Listing is O(entries); reading the files, O(files), is inherent
 * and is spread over loop turns.
 */
static int relist(struct file_source *fs, const char **ret_what)
{
        struct state found = {0};
        struct stat st;
        int r;

        *ret_what = "cannot stat";
        if (stat(fs->path, &st) < 0) {
                r = -errno;
                /* Only a path that is not there means "no pods". */
                if (r != -ENOENT && r != -ENOTDIR)
                        return r;
                path_missing(fs);
                st.st_mode = 0;
        } else if (fs->absent) {
                fs->absent = false;
                log_info("file source: \"%s\" exists now: reading it", fs->path);
        }
        r = state_init(&found);
        if (r < 0) {
                *ret_what = "cannot list";
                goto out;
        }
        if (S_ISDIR(st.st_mode)) {
                r = relist_dir(fs, &found, ret_what);
                if (r == RELIST_STARTED)
                        return r;
        } else if (S_ISREG(st.st_mode)) {
                r = relist_file(fs, &found, ret_what);
        } else if (st.st_mode) {
                log_error("file source: \"%s\" is neither a directory nor a regular file",
                          fs->path);
                r = 1;
        } else {
                r = 0;
        }
        if (r == 0) {
                *ret_what = "cannot send the pods";
                r = replace_state(fs, &found);
                /* An empty or missing directory: no file is left to be
                 * bad (a single file keeps what was said about it). */
                if (r == 0 && !S_ISREG(st.st_mode))
                        trim_reports(fs, NULL, 0);
        }
out:
        state_free(&found);
        return r;
}

/* Logs a failure once per distinct text, and arms the retry: 1 s (the
 * configured base) doubling to the relist period. */
static void relist_failed(struct file_source *fs, const char *what, int r)
{
        char text[512];

        (void)snprintf(text, sizeof(text), "%s \"%s\": %s", what, fs->path, ERRNO_STR(r));
        fs->relist_delay = fs->relist_delay ? fs->relist_delay * 2 : fs->relist_retry_base;
        if (fs->relist_delay > fs->period)
                fs->relist_delay = fs->period;
        if (!fs->failure || strcmp(fs->failure, text) != 0) {
                log_error("file source: %s: keeping the last good state, trying again in %.1f s",
                          text, (double)fs->relist_delay / 1e6);
                source_stats_error(fs->stats, false, "%s", text);
                (void)str_set(&fs->failure, text);
        } else {
                log_debug("file source: %s: trying again in %.1f s", text,
                          (double)fs->relist_delay / 1e6);
        }
        loop_timer_arm(fs->relist_retry_timer, fs->relist_delay);
}

/* The oldest dirty file, taken off the queue (the caller frees it). */
static struct dirty_file *pop_dirty(struct file_source *fs)
{
        struct dirty_file *d = fs->dirty_head;

        if (!d)
                return NULL;
        (void)strmap_remove(fs->dirty, d->path);
        fs->dirty_head = d->next;
        if (!fs->dirty_head)
                fs->dirty_tail = NULL;
        return d;
}

static void clear_dirty(struct file_source *fs)
{
        struct dirty_file *d;

        while ((d = pop_dirty(fs)))
                free(d);
        loop_timer_stop(fs->batch_timer);
}

/* The end of a relist: r < 0 failed (what names the step), else it
 * succeeded.  Events that came in meanwhile are looked at now. */
static void relist_done(struct file_source *fs, const char *what, int r)
{
        if (r < 0) {
                relist_failed(fs, what, r);
        } else {
                loop_timer_stop(fs->relist_retry_timer);
                fs->relist_delay = 0;
                if (fs->failure) {
                        log_info("file source: \"%s\" listed again", fs->path);
                        free(fs->failure);
                        fs->failure = NULL;
                }
        }
        update_state(fs);
        if (fs->dirty_head)
                loop_timer_arm(fs->batch_timer, 0);
}

/* FILE_SOURCE_BATCH more files of the relist in progress; the last batch
 * installs and sends the state.  All or nothing, as relist(). */
static void relist_step(struct loop_timer *t, void *data)
{
        struct file_source *fs = data;
        struct relist_job *j = fs->job;
        size_t k = j->n - j->next < FILE_SOURCE_BATCH ? j->n - j->next : FILE_SOURCE_BATCH;
        const char *what = "cannot list";
        int r = load_all(fs, j->names + j->next, k, &j->st, &what);

        if (r == 0) {
                j->next += k;
                if (j->next < j->n) {
                        loop_timer_arm(t, 0);
                        return;
                }
                what = "cannot send the pods";
                r = replace_state(fs, &j->st);
                if (r == 0)
                        trim_reports(fs, j->names, j->n);
        }
        job_free(j);
        fs->job = NULL;
        relist_done(fs, what, r);
        /* What reading every file freed goes back to the system. */
        mem_give_back();
}

void file_source_relist(struct file_source *fs)
{
        const char *what = "cannot list";
        int r;

        /* A relist in progress starts over: this one reads every file
         * after the events so far, so those need no other look. */
        if (fs->job) {
                loop_timer_stop(fs->step_timer);
                job_free(fs->job);
                fs->job = NULL;
        }
        clear_dirty(fs);
        r = relist(fs, &what);
        if (r == RELIST_STARTED) {
                loop_timer_arm(fs->step_timer, 0);
                return;
        }
        relist_done(fs, what, r);
}

/* An event could not be applied for want of a resource: the store may
 * now differ from what was sent, so a relist puts both right. */
static void event_failed(struct file_source *fs, const char *file, int r)
{
        log_debug("file source: file \"%s\": %s: re-listing", file, ERRNO_STR(r));
        relist_failed(fs, "cannot apply an event for", r);
        update_state(fs);
}

static void on_relist_retry(struct loop_timer *t, void *data)
{
        (void)t;
        file_source_relist(data);
}

/* ---- watch ---------------------------------------------------------------------------- */

static void arm_watch(struct file_source *fs);

static void schedule_retry(struct file_source *fs, int missing)
{
        if (missing) {
                /* A missing path is polled every second without backoff. */
                fs->retry_delay = FILE_SOURCE_RETRY_USEC;
        } else {
                fs->retry_delay = fs->retry_delay ? fs->retry_delay * 2 : FILE_SOURCE_RETRY_USEC;
                if (fs->retry_delay > FILE_SOURCE_RETRY_MAX_USEC)
                        fs->retry_delay = FILE_SOURCE_RETRY_MAX_USEC;
        }
        loop_timer_arm(fs->retry_timer, fs->retry_delay);
}

/*
 * What one event did under each key it touched (at most two: the key a
 * file's pod had and the one it has now): the pod stored there before
 * and after, NULL for none, with a reference each.  The store and its UID
 * counts already say after.
 */
struct change {
        struct pod *before[2], *after[2];
        size_t n;
};

static void change_clear(struct change *c)
{
        for (size_t i = 0; i < c->n; i++) {
                pod_unref(c->before[i]);
                pod_unref(c->after[i]);
        }
        c->n = 0;
}

/* Whether the merger would find nothing changed from before to after. */
static bool pod_unchanged(const struct pod *before, const struct pod *after)
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

                if (a && count_of(st->uids, pod_uid(a)) > 1)
                        return false;
                if (b && count_of(st->uids, pod_uid(b)) > 0 && !(a && strcmp(pod_uid(a), pod_uid(b)) == 0))
                        return false;
        }
        return true;
}

/*
 * Sends what changed under c's keys as one delta: nothing for unchanged
 * re-reads, the new pods, and the old ones whose UIDs no pod has any more
 * as gone.  A UID shared between stored pods is the one case where the
 * decision needs the whole set, so then the full SET goes: O(n), only
 * for pinned UIDs shared between files.  Else O(1).  0 or -ENOMEM (the
 * caller re-lists).
 */
static int send_changes(struct file_source *fs, const struct change *c)
{
        struct pod_update *u;
        bool any = false;
        int r;

        for (size_t i = 0; i < c->n; i++)
                any = any || !pod_unchanged(c->before[i], c->after[i]);
        if (!any)
                return 0;
        if (!change_is_local(&fs->st, c))
                return send_state(fs, fs->st.store);
        u = pod_update_new_delta(POD_SOURCE_FILE);
        if (!u)
                return -ENOMEM;
        for (size_t i = 0; i < c->n; i++) {
                const struct pod *b = c->before[i];

                if (c->after[i] && !pod_unchanged(b, c->after[i]) && pod_update_add(u, c->after[i]) < 0)
                        goto nomem;
                if (b && count_of(fs->st.uids, pod_uid(b)) == 0 && !uid_before(c, i, pod_uid(b)) &&
                    pod_update_add_gone(u, c->before[i]) < 0)
                        goto nomem;
        }
        r = mux_channel_send(fs->ch, u);
        if (r == 0)
                source_stats_success(fs->stats, keymap_size(fs->st.store));
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
        /* The files naming the key share its keyref. */
        while (keymap_next(fs->st.files, &it, &v) && n < kr->files)
                if (((struct file_name *)v)->key == kr)
                        cands[n++] = ((struct file_name *)v)->path;
        if (n > 1)
                qsort(cands, n, sizeof(*cands), cmp_str);
        for (size_t i = 0; i < n && r == 0 && !keymap_get(fs->st.store, kr->key); i++) {
                struct pod *pod = NULL;
                struct buf k = BUF_INIT;

                r = load_file(fs, cands[i], 0, &pod);
                if (r == 0 && (r = pod_store_key(pod, &k)) == 0 && strcmp(k.data, kr->key) == 0)
                        r = store_put(fs, &fs->st, cands[i], pod);
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
        if (!e || strcmp(e->file->path, file) != 0)
                return 0;
        c->before[i] = pod_ref(e->pod);
        c->n++;
        store_del(&fs->st, kr->key);
        /* Another file defining the same pod takes over at once (the
         * kubelet waits for the next relist). */
        r = take_over(fs, kr);
        c->after[i] = stored_pod(fs, kr->key);
        return r;
}

/*
 * file no longer defines a pod (it is gone, or is now bad): its pod goes,
 * or moves to another file defining it, as the next relist would decide,
 * and the change is sent.  What was said about the file is kept.
 */
static void file_drop(struct file_source *fs, const char *file)
{
        struct file_name *f = keymap_remove(fs->st.files, file);
        struct change c = {.n = 0};
        struct keyref *kr;
        int r;

        /* It names no pod now: not a duplicate either (said no more). */
        free(strmap_remove(fs->dups, file));
        if (!f)
                return;
        /* The file names the key no more, but the keyref (whose text is
         * used below) goes only at the end, if no other file names it:
         * nothing in between names a key anew. */
        kr = f->key;
        f->key = NULL;
        kr->files--;
        r = release_key(fs, kr, file, &c);
        if (r >= 0)
                r = send_changes(fs, &c);
        if (r < 0)
                event_failed(fs, file, r);
        change_clear(&c);
        key_forget_unused(fs->st.keyrefs, kr);
        name_unref(f); /* the files map's reference */
}

/* A file that is gone (or no longer a regular file): what was said about
 * it is forgotten, and its pod goes or moves to another file. */
static void file_gone(struct file_source *fs, const char *file)
{
        forget_reports(fs, file);
        file_drop(fs, file);
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

        if (!e || strcmp(e->file->path, file) >= 0 || stat(e->file->path, &st) == 0 || errno != ENOENT)
                return;
        holder = e->file;
        holder->refs++; /* its path outlives the entry */
        file_gone(fs, holder->path);
        name_unref(holder);
}

/*
 * Stores pod, just read from file, and records in c what changed: under
 * its key, and, when the file defined another pod before (a new name or
 * namespace), under that key too, which the file gives up at once as the
 * next relist would: its pod goes, or another file defining it takes
 * over.  0 or -errno.
 */
static int put_changed(struct file_source *fs, const char *file, struct pod *pod, struct change *c)
{
        struct file_name *f = keymap_get(fs->st.files, file);
        struct keyref *old = NULL;
        struct buf key = BUF_INIT;
        int r = pod_store_key(pod, &key);

        if (r < 0)
                return r;
        take_holder_event(fs, key.data, file);
        if (f && strcmp(f->key->key, key.data) != 0) {
                old = f->key;
                old->files++; /* held: store_put's rename of f must not free it */
        }
        c->before[c->n] = stored_pod(fs, key.data);
        r = store_put(fs, &fs->st, file, pod);
        c->after[c->n] = stored_pod(fs, key.data);
        c->n++;
        if (old) {
                old->files--;
                if (r >= 0 && f->key != old)
                        r = release_key(fs, old, file, c);
                key_forget_unused(fs->st.keyrefs, old);
        }
        buf_free(&key);
        return r;
}

/* A file that is there: (re)load it and send what changed.  A file that
 * is now bad defines no pod, as in a relist (a single file path keeps its
 * pod, as its relist does). */
static void file_changed(struct file_source *fs, const char *file, uint32_t mask)
{
        struct change c = {.n = 0};
        struct pod *pod = NULL;
        /* A file still being written fails to parse on early events; only
         * the close after writing (or a rename into place) reports errors. */
        int quiet = !(mask & (IN_CLOSE_WRITE | IN_MOVED_TO | IN_ATTRIB));
        int r;

        r = load_file(fs, file, quiet, &pod);
        if (r < 0) {
                if (static_pod_resource_error(r))
                        event_failed(fs, file, r);
                else if (!quiet && r != -ENOENT && fs->watch_is_dir)
                        file_drop(fs, file);
                return;
        }
        pod = keep_stored(&fs->st, file, pod);
        r = put_changed(fs, file, pod, &c);
        if (r >= 0)
                r = send_changes(fs, &c);
        if (r < 0)
                event_failed(fs, file, r);
        change_clear(&c);
        pod_unref(pod);
}

/* What the file is now decides, whatever the events said; the mask only
 * says whether the writer is done (errors are reported) and whether an
 * empty file is still being created. */
static void process_file(struct file_source *fs, const char *file, uint32_t mask)
{
        struct stat st;

        if (stat(file, &st) < 0) {
                if (static_pod_resource_error(-errno))
                        event_failed(fs, file, -errno);
                else
                        file_gone(fs, file);
                return;
        }
        if (!S_ISREG(st.st_mode)) {
                if (!S_ISDIR(st.st_mode))
                        report_bad(fs, file, "not a regular file: skipped", 0, false);
                file_drop(fs, file); /* what was just said stays said */
                return;
        }
        if ((mask & IN_CREATE) && !(mask & (IN_CLOSE_WRITE | IN_MOVED_TO)) && st.st_size == 0)
                return; /* content follows with IN_MODIFY / IN_CLOSE_WRITE */
        file_changed(fs, file, mask);
}

/*
 * Up to FILE_SOURCE_BATCH changed files, oldest first, then back to the
 * loop; the rest waits for the next turn.  Events for one file that came
 * in the meantime were folded into its entry, so a file written in several
 * steps is read once; files are read in the order their changes began, so
 * a change is never handed on before one that came earlier.  O(batch).
 */
static void on_batch(struct loop_timer *t, void *data)
{
        struct file_source *fs = data;
        size_t done = 0;

        /* A relist in progress looks at them when it ends (relist_done). */
        if (fs->job)
                return;
        while (done < FILE_SOURCE_BATCH && fs->dirty_head) {
                struct dirty_file *d = pop_dirty(fs);

                process_file(fs, d->path, d->mask);
                free(d);
                done++;
        }
        if (done == FILE_SOURCE_BATCH)
                fs->burst = true;
        if (fs->dirty_head) {
                loop_timer_arm(t, 0);
        } else if (fs->burst) {
                /* The end of a burst: what reading it freed goes back. */
                fs->burst = false;
                mem_give_back();
        }
}

/* Remembers that file changed; it is looked at in a coming batch. */
static void mark_dirty(struct file_source *fs, const char *file, uint32_t mask)
{
        struct dirty_file *d = strmap_get(fs->dirty, file);
        size_t len = strlen(file) + 1;

        if (d) {
                d->mask |= mask;
                return;
        }
        d = malloc(sizeof(*d) + len);
        if (!d || (memcpy(d->path, file, len), strmap_put(fs->dirty, d->path, d, NULL) < 0)) {
                free(d);
                /* Cannot remember it: a relist will find the change. */
                event_failed(fs, file, -ENOMEM);
                return;
        }
        d->mask = mask;
        d->next = NULL;
        if (fs->dirty_tail)
                fs->dirty_tail->next = d;
        else
                fs->dirty_head = d;
        fs->dirty_tail = d;
        if (!loop_timer_armed(fs->batch_timer))
                loop_timer_arm(fs->batch_timer, 0);
}

static void on_watch_event(void *data, const char *path, const char *name, uint32_t mask)
{
        struct file_source *fs = data;
        char *file;

        if (mask & IN_Q_OVERFLOW) {
                log_warn("file source: watch queue overflowed: re-listing \"%s\"", fs->path);
                file_source_relist(fs);
                return;
        }
        if (mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT)) {
                if (!fs->watch_is_dir && (mask & (IN_DELETE_SELF | IN_MOVE_SELF)))
                        file_gone(fs, fs->path);
                if (mask & (IN_IGNORED | IN_MOVE_SELF)) {
                        /* The kernel dropped the watch (the path went
                         * away), or it follows an inode that was moved off
                         * the path (its events would name the wrong
                         * files): re-arm at the path, treating it as
                         * missing meanwhile. */
                        if (mask & IN_MOVE_SELF)
                                watcher_remove(fs->watch); /* safe in its own callback */
                        fs->watch = NULL;
                        /* The relist says whether the path is gone. */
                        log_debug("file source: \"%s\" was removed or moved: watching for it to come back", fs->path);
                        file_source_relist(fs);
                        fs->retry_delay = 0;
                        schedule_retry(fs, 1);
                }
                return;
        }
        if (!(mask & (IN_DELETE | IN_MOVED_FROM | IN_CREATE | IN_MOVED_TO | IN_MODIFY | IN_ATTRIB |
                      IN_CLOSE_WRITE)))
                return;
        if (fs->watch_is_dir) {
                if (!name[0] || name[0] == '.')
                        return;
                file = path_join(path, name);
        } else {
                file = strdup(fs->path);
        }
        if (!file) {
                event_failed(fs, fs->path, -ENOMEM);
                return;
        }
        mark_dirty(fs, file, mask);
        free(file);
}

/* The watch cannot be armed (not for want of the path): the path is
 * re-listed every period only, and the watch tried again (1 s doubling to
 * 20 s).  Said once per distinct reason, not at every try. */
static void watch_failed(struct file_source *fs, int r)
{
        char text[PATH_MAX + 128];

        (void)snprintf(text, sizeof(text), "cannot watch \"%s\": %s", fs->path, ERRNO_STR(r));
        if (fs->watch_failure && strcmp(fs->watch_failure, text) == 0) {
                log_debug("file source: %s: trying again", text);
                return;
        }
        log_error("file source: %s: changes are seen at the relist every period only, until it can be watched", text);
        source_stats_error(fs->stats, false, "%s", text);
        (void)str_set(&fs->watch_failure, text);
        update_state(fs);
}

static void arm_watch(struct file_source *fs)
{
        struct stat st;
        int r;

        if (fs->watch || !fs->watcher)
                return;
        if (stat(fs->path, &st) < 0) {
                schedule_retry(fs, errno == ENOENT);
                return;
        }
        fs->watch_is_dir = S_ISDIR(st.st_mode);
        r = watcher_add(fs->watcher, fs->path, fs->watch_is_dir ? DIR_MASK : FILE_MASK,
                        on_watch_event, fs, &fs->watch);
        if (r < 0) {
                if (r != -ENOENT)
                        watch_failed(fs, r);
                fs->watch = NULL;
                schedule_retry(fs, r == -ENOENT);
                return;
        }
        fs->retry_delay = 0;
        if (fs->watch_failure) {
                log_info("file source: watching \"%s\" again", fs->path);
                free(fs->watch_failure);
                fs->watch_failure = NULL;
                update_state(fs);
        } else {
                log_debug("file source: watching \"%s\"", fs->path);
        }
}

static void on_retry(struct loop_timer *t, void *data)
{
        struct file_source *fs = data;

        arm_watch(fs);
        /* Whatever appeared between the path coming back and the watch
         * being armed is picked up by this relist. */
        if (fs->watch)
                file_source_relist(fs);
}

static void on_relist(struct loop_timer *t, void *data)
{
        struct file_source *fs = data;

        /* Fixed rate, like the kubelet's ticker. */
        loop_timer_arm(t, fs->period);
        file_source_relist(fs);
}

/* ---- lifecycle --------------------------------------------------------------------------- */

int file_source_new(struct loop *loop, struct watcher *watcher,
                    struct mux_channel *ch, const struct file_source_config *cfg,
                    struct file_source **ret_fs, struct buf *err)
{
        struct file_source *fs;
        int r = -ENOMEM;

        if (!cfg->path || !cfg->path[0])
                return buf_set_err(err, -EINVAL, "the static pod path is empty");
        if (!cfg->node_name || !cfg->node_name[0])
                return buf_set_err(err, -EINVAL, "the node name is empty");
        fs = calloc(1, sizeof(*fs));
        if (!fs)
                goto fail;
        fs->loop = loop;
        fs->watcher = watcher;
        fs->ch = ch;
        fs->period = cfg->period_usec ? cfg->period_usec : FILE_SOURCE_DEFAULT_PERIOD_USEC;
        fs->path = path_clean(cfg->path);
        fs->node_name = strdup(cfg->node_name);
        fs->stats = cfg->stats;
        fs->errors = strmap_new();
        fs->dirty = strmap_new_borrowed();
        fs->unknown = strmap_new();
        fs->docs = strmap_new();
        fs->dups = strmap_new();
        if (!fs->path || !fs->node_name || state_init(&fs->st) < 0 || !fs->errors || !fs->dirty || !fs->unknown ||
            !fs->docs || !fs->dups)
                goto fail;
        source_stats_target(fs->stats, fs->path);
        fs->relist_retry_base = cfg->retry_usec ? cfg->retry_usec : FILE_SOURCE_RETRY_USEC;
        if ((r = loop_timer_new(loop, on_relist, fs, &fs->relist_timer)) < 0 ||
            (r = loop_timer_new(loop, on_retry, fs, &fs->retry_timer)) < 0 ||
            (r = loop_timer_new(loop, on_relist_retry, fs, &fs->relist_retry_timer)) < 0 ||
            (r = loop_timer_new(loop, on_batch, fs, &fs->batch_timer)) < 0 ||
            (r = loop_timer_new(loop, relist_step, fs, &fs->step_timer)) < 0)
                goto fail;
        *ret_fs = fs;
        return 0;
fail:
        if (err)
                buf_reset(err); /* only memory runs out here */
        file_source_free(fs);
        return r;
}

int file_source_start(struct file_source *fs)
{
        arm_watch(fs);
        file_source_relist(fs);
        loop_timer_arm(fs->relist_timer, fs->period);
        return 0;
}

void file_source_free(struct file_source *fs)
{
        if (!fs)
                return;
        watcher_remove(fs->watch);
        loop_timer_free(fs->relist_timer);
        loop_timer_free(fs->retry_timer);
        loop_timer_free(fs->relist_retry_timer);
        loop_timer_free(fs->batch_timer);
        loop_timer_free(fs->step_timer);
        job_free(fs->job);
        free(fs->failure);
        state_free(&fs->st);
        strmap_free(fs->errors, free);
        while (fs->dirty_head) {
                struct dirty_file *d = fs->dirty_head;

                fs->dirty_head = d->next;
                free(d);
        }
        strmap_free(fs->dirty, NULL);
        strmap_free(fs->unknown, free);
        strmap_free(fs->docs, free);
        strmap_free(fs->dups, free);
        free(fs->watch_failure);
        free(fs->path);
        free(fs->node_name);
        free(fs);
}
