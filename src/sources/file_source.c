/*
 * file_source — static pods from a directory or a file (see
 * src/sources/file_source.h and doc/pod-config.md section 6).
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
 *
 * Records (struct frec, src/sources/file_records.h, doc/pod-config.md
 * 6.7): one per path seen, in recs, holding the path the file's names
 * borrow.  An event sets the records of the files it touches (the file,
 * and the files naming a key whose holder changed: settle_change())
 * after its change is sent, and tells them once, at its end
 * (file_records_flush()), so a record never shows new bytes with an old
 * verdict.  A relist sets what each file is as it reads it, and the rest
 * when its state is installed (settle_relist()).  A record pending under
 * send N is on the pending list (in send order) until a broadcast
 * carries its pod (file_source_carried()) or send N is merged
 * (file_records_merged()).  A record that cannot be kept for want of
 * memory makes a relist, as any other resource failure.
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
#include "util/dir.h"
#include "util/episode.h"
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

#define DIR_MASK (IN_CREATE | IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE | \
                  IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)
#define FILE_MASK (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF)

/*
 * A file as one state names it: the files map (keyed by the record's
 * path) holds it while the file names a key, and each entry whose pod the
 * file defined holds a reference.  An entry can outlive the file's place
 * in files for a moment (file_drop() takes the name out before the pod
 * goes), and a relist's state holds names of its own, hence the count.
 */
struct file_name {
        struct keyref *key; /* the key the file names; non-NULL iff in files */
        unsigned refs;      /* the files map's, while listed, and one per entry */
        /* --static-pod-file-pattern leaves the name out: it names its key
         * (to be told a duplicate) but never holds it. */
        bool filtered;
        struct frec *rec; /* a reference: the path is there */
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

/* Names are never read when they start with '.', and, in a directory,
 * only when they match a --static-pod-file-pattern if some are given. */
static bool name_filtered(const struct file_source *fs, const char *path);

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
        bool absent;         /* the path was last found missing (warned once) */
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
        struct backoff relist; /* file_source.h */
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

/* ---- small helpers ------------------------------------------------------------ */

/* How many stored pods have uid. */
static size_t count_of(struct keymap *uids, const char *uid)
{
        struct entry *e = keymap_get(uids, uid);

        return e ? e->same_uid : 0;
}

/* A name for rec's path, not yet referenced.  NULL on ENOMEM. */
static struct file_name *name_new(struct frec *rec, bool filtered)
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
static void name_unref(void *v)
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

/* The path of a file name: shorthand. */
#define NAME(f) ((f)->rec->path)

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

/* The file r's state names, and its stored pod, or NULL. */
static const struct entry *rec_entry(const struct state *st, const struct frec *r, const struct file_name **ret_f)
{
        const struct file_name *f = keymap_get(st->files, r->path);
        const struct entry *e = f ? keymap_get(st->store, f->key->key) : NULL;

        *ret_f = f;
        return e && e->file == f ? e : NULL;
}

/* r as a view (src/core/file_record.h); pod is where its pod goes. */
static void rec_view(void *data, const struct frec *r, struct file_record_view *v, struct file_record_pod *pod)
{
        const struct file_source *fs = data;
        const struct file_name *f = NULL;
        const struct entry *e = r->state == FILE_RECORD_GONE ? NULL : rec_entry(&fs->st, r, &f);

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

static bool name_filtered(const struct file_source *fs, const char *path)
{
        const char *slash = strrchr(path, '/');

        return fs->n_patterns && strcmp(path, fs->path) != 0 &&
               static_pod_name_kind(slash ? slash + 1 : path, (const char *const *)fs->patterns, fs->n_patterns) ==
                       STATIC_POD_NAME_FILTERED;
}

/* Logs a bad file once per distinct reason. */
static void report_bad(struct file_source *fs, const char *file, const char *reason,
                       int quiet, bool parse)
{
        /* One line per change of the file's state: a write in progress
         * says nothing, a reason already given is not repeated. */
        if (quiet) {
                log_trace("file \"%s\": %s (still being written?)", file, reason);
                return;
        }
        if (!episode_fail_in(fs->errors, file, reason)) {
                log_debug("file \"%s\": %s", file, reason);
                return;
        }
        log_error("file \"%s\": %s", file, reason);
        source_stats_error(fs->stats, parse, "file \"%s\": %s", file, reason);
        /* Bad, it duplicates nothing: said again if it does once fixed. */
        free(strmap_remove(fs->dups, file));
        if (fs->rejected)
                fs->rejected(fs->rejected_data, POD_SOURCE_FILE, file, reason);
}

static void clear_bad(struct file_source *fs, const char *file)
{
        if (episode_clear_in(fs->errors, file))
                log_info("file \"%s\": valid again", file);
}

/* A file that is gone: what was said about it is forgotten, silently (it
 * is said again if the file comes back still bad). */
static void forget_reports(struct file_source *fs, const char *file)
{
        free(strmap_remove(fs->errors, file));
        free(strmap_remove(fs->unknown, file));
        free(strmap_remove(fs->docs, file));
        free(strmap_remove(fs->dups, file));
        free(strmap_remove(fs->unreadable, file));
}

static int cmp_name(const void *key, const void *elem)
{
        return strcmp(key, *(char *const *)elem);
}

/* After a listing of the directory (names, sorted): files it did not
 * find are gone, whatever events were missed.  O(reports log n). */
static void trim_reports(struct file_source *fs, char **names, size_t n)
{
        struct strmap *maps[] = {fs->errors, fs->unknown, fs->docs, fs->dups, fs->unreadable};

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

        if (u->total == 0) {
                (void)episode_clear_in(fs->unknown, file);
                return;
        }
        if (v1_unknown_join(u, &list) < 0 || !episode_fail_in(fs->unknown, file, list.data))
                goto out;
        log_warn("file \"%s\": unknown fields ignored (not in core/v1 of Kubernetes %s): %s", file,
                 v1_schema_kubernetes, list.data);
out:
        buf_free(&list);
}

/* Logs text as a warning about file unless map says it was said last,
 * then at debug only. */
static void warn_once(struct strmap *map, const char *file, const char *text)
{
        if (!episode_fail_in(map, file, text)) {
                log_debug("file \"%s\": %s", file, text);
                return;
        }
        log_warn("file \"%s\": %s", file, text);
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

/* Whether file's name is what an editor, a package manager or `sed -i`
 * leaves beside a manifest (x.yaml~, x.yaml.bak, .swp, .orig,
 * .dpkg-old/-dist/-new, sed's sedXXXXXX temp file): every visible name is
 * read, so such a copy is the usual duplicate. */
static bool looks_leftover(const char *file)
{
        static const char *const ends[] = {"~", ".bak", ".swp", ".orig"};
        const char *slash = strrchr(file, '/'), *base = slash ? slash + 1 : file;
        size_t n = strlen(base), alnum = 0;

        for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++)
                if (n >= strlen(ends[i]) && strcmp(base + n - strlen(ends[i]), ends[i]) == 0)
                        return true;
        if (strstr(base, ".dpkg-"))
                return true;
        while (n == 9 && alnum < 6 &&
               ((base[3 + alnum] >= 'a' && base[3 + alnum] <= 'z') ||
                (base[3 + alnum] >= 'A' && base[3 + alnum] <= 'Z') ||
                (base[3 + alnum] >= '0' && base[3 + alnum] <= '9')))
                alnum++;
        return n == 9 && strncmp(base, "sed", 3) == 0 && alnum == 6;
}

/* Room for a duplicate's warning: its text and the hint. */
#define DUP_WARNING (DUP_TEXT + 128)

/* The warning about file, a duplicate of key which winner keeps: its
 * text, and for a leftover copy how to keep such names from being
 * read. */
static void dup_warning(char *text, size_t size, const char *file, const char *key, const char *winner)
{
        dup_text(text, size, key, winner);
        if (looks_leftover(file))
                (void)snprintf(text + strlen(text), size - strlen(text),
                               "; it looks like a leftover copy: remove it, or read only manifest names with "
                               "--static-pod-file-pattern '*.yaml'");
}

/* file defines key, which winner keeps: one warning while that stays so
 * (a relist finds it again every period). */
static void note_dup(struct file_source *fs, const char *file, const char *key, const char *winner)
{
        char text[DUP_WARNING];

        dup_warning(text, sizeof(text), file, key, winner);
        warn_once(fs->dups, file, text);
}

/* file's pod is stored: if it was a duplicate, that is over (one info
 * line). */
static void clear_dup(struct file_source *fs, const char *file, const char *key)
{
        if (episode_clear_in(fs->dups, file))
                log_info("file \"%s\": now defines pod \"%s\" (no longer a duplicate)", file, key);
}

/* load_file(): the bytes could not be read; nothing changes but the
 * record (doc/pod-config.md 6.8). */
#define LOAD_UNREADABLE 1

/*
 * rec's file could not be read (reason, from errno r): it keeps the pod
 * it holds, if any, and its record says so.  Logged and counted once per
 * distinct reason (unless filtered); every such file is read again after
 * the read backoff.
 */
static void mark_dirty(struct file_source *fs, const char *file, uint32_t mask);

static void note_unreadable(struct file_source *fs, struct frec *rec, const char *reason, int r, bool filtered)
{
        const struct file_name *f = NULL;
        const struct entry *e = rec_entry(&fs->st, rec, &f);
        char text[FILE_RECORD_REASON_MAX];

        /* The errno's number too: what an admin searches for. */
        (void)snprintf(text, sizeof(text), "cannot be read: %s (errno %d)", reason, -r);
        file_records_set(&fs->recs, rec, FILE_RECORD_UNREADABLE, text);
        if (!loop_timer_armed(fs->read_retry_timer))
                loop_timer_arm(fs->read_retry_timer, backoff_next(&fs->read_retry, 0));
        /* A name --static-pod-file-pattern leaves out is read only to
         * tell a duplicate: nothing is said about it. */
        if (filtered || !episode_fail_in(fs->unreadable, rec->path, text)) {
                log_debug("file \"%s\": %s: trying again in %.1f s", rec->path, text,
                          (double)fs->read_retry.delay / 1e6);
                return;
        }
        if (e)
                log_error("file \"%s\": %s: keeping its pod \"%s\", trying again in %.1f s", rec->path, text,
                          pod_key(e->pod), (double)fs->read_retry.delay / 1e6);
        else
                log_error("file \"%s\": %s: no pod to keep (never read), trying again in %.1f s", rec->path, text,
                          (double)fs->read_retry.delay / 1e6);
        source_stats_error(fs->stats, false, "file \"%s\": %s", rec->path, text);
}

/* rec's file was read: if it could not be before, that is over. */
static void readable_again(struct file_source *fs, const char *file)
{
        if (episode_clear_in(fs->unreadable, file))
                log_info("file \"%s\": readable again", file);
        if (strmap_size(fs->unreadable) == 0)
                backoff_reset(&fs->read_retry);
}

/* Every file that could not be read is read again, as an event would. */
static void on_read_retry(struct loop_timer *t, void *data)
{
        struct file_source *fs = data;
        size_t it = 0;
        const char *k;

        (void)t;
        while (strmap_next(fs->unreadable, &it, &k, NULL))
                mark_dirty(fs, k, IN_CLOSE_WRITE);
}

/*
 * Reads and decodes rec's file into a pod, and records what it read and,
 * for a file that fails, the verdict: rejected, or ignored for a name
 * --static-pod-file-pattern leaves out (filtered: read only to tell a
 * duplicate, and nothing is said about it).  A write in progress (quiet)
 * that fails changes nothing.  Returns -ENOENT quietly when the file
 * vanished, a resource error (see static_pod_resource_error()) quietly
 * for the caller to handle, and LOAD_UNREADABLE, without a pod, when
 * the bytes could not be read (note_unreadable()); other errors are the
 * file's, reported (once) unless quiet or filtered.
 */
static int load_file(struct file_source *fs, struct frec *rec, int quiet, bool filtered, struct pod **ret_pod)
{
        struct v1_unknown unknown = {NULL, 0, 0};
        struct static_pod_read rd;
        struct buf err = BUF_INIT;
        const char *file = rec->path, *why;
        int r, docs = 1;

        /* The same steps `podmux validate` takes (static_pod.h). */
        r = static_pod_load(file, fs->node_name, ret_pod, &unknown, &docs, &rd, &err);
        if (r == -ENOENT || static_pod_resource_error(r))
                goto out; /* gone, or not the file's fault: the caller retries */
        if (static_pod_unreadable(r, &rd)) {
                /* Not a verdict on the file: what it gave stays. */
                note_unreadable(fs, rec, err.len ? err.data : ERRNO_STR(r), r, filtered);
                r = LOAD_UNREADABLE;
                goto out;
        }
        readable_again(fs, file);
        if (rec->state == FILE_RECORD_UNREADABLE)
                file_records_pending(&fs->recs, rec, FILE_RECORDS_SENT_NONE); /* read: judged below */
        if (r == 0 || !quiet)
                file_records_read(&fs->recs, rec, &rd);
        why = err.len ? err.data : "invalid manifest";
        if (r < 0 && filtered) {
                if (!quiet)
                        file_records_set(&fs->recs, rec, FILE_RECORD_IGNORED, STATIC_POD_FILTERED_REASON);
        } else if (r < 0) {
                if (!quiet)
                        file_records_set(&fs->recs, rec, FILE_RECORD_REJECTED, why);
                report_bad(fs, file, why, quiet, r != -EACCES && r != -EIO);
        } else if (!filtered) {
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

/* One line per pod that goes out, comes back changed or goes (info, the
 * default level): what an admin greps the journal for, as the kubelet's
 * SyncLoop ADD/REMOVE lines.  A burst of n files logs n lines. */
static void log_outcome(const char *what, const struct pod *p, const char *file)
{
        log_info("static pod \"%s\" %s: file \"%s\" (uid %s)", pod_key(p), what, file, pod_uid(p));
}

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

/* Sends store as the source's state.  0 with *ret_sent its number
 * (mux_channel_sent()), or -ENOMEM with nothing sent. */
static int send_state(struct file_source *fs, struct keymap *store, uint64_t *ret_sent)
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
        *ret_sent = mux_channel_sent(fs->ch);
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
 * relist then keeps the object the merger stores too (src/core/pod.h)
 * rather than a second copy of its text.  Takes the caller's reference to
 * pod and returns one to what it keeps.  O(the pod's text).
 */
static struct pod *keep_stored(const struct state *prev, const char *file, struct pod *pod)
{
        struct entry *e = prev->store ? keymap_get(prev->store, pod_key(pod)) : NULL;

        if (!e || e->pod == pod || strcmp(NAME(e->file), file) != 0 || !pod_same(e->pod, pod))
                return pod;
        pod_unref(pod);
        return pod_ref(e->pod);
}

/* file now defines key in other's place: other sorts later (file is new)
 * or is gone (its event is still to come).  One warning; other, if it is
 * still there, is now a duplicate, which that warning said already. */
static void take_from(struct file_source *fs, const char *file, const char *key, const char *other)
{
        char text[DUP_WARNING];
        struct stat st;

        log_warn("file \"%s\": now defines pod \"%s\" in place of file \"%s\" (which sorts later or is gone)", file,
                 key, other);
        if (stat(other, &st) < 0)
                return;
        dup_warning(text, sizeof(text), other, key, file);
        (void)episode_fail_in(fs->dups, other, text); /* said by the line above */
}

/* Puts (rec's file -> pod) into the state.  The first file in sorted
 * order keeps a namespace/name; a later one is refused with a warning
 * naming both, once while that stays so (note_dup()).  A name
 * --static-pod-file-pattern leaves out only names its key, silently.
 * Returns 1 if the store changed, 0 if not, -errno. */
static int store_put(struct file_source *fs, struct state *s, struct frec *rec, struct pod *pod)
{
        const char *file = rec->path;
        struct buf key = BUF_INIT;
        struct file_name *f = NULL;
        struct entry *old;
        int r = -ENOMEM;

        if (pod_store_key(pod, &key) < 0)
                goto out;
        f = keymap_get(s->files, file);
        if (!f && !(f = name_new(rec, name_filtered(fs, file))))
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
                        note_dup(fs, file, key.data, NAME(old->file));
                        goto record;
                }
        }
        if (old && old->pod == pod) {
                clear_dup(fs, file, key.data);
                goto record;
        }
        if (old && strcmp(NAME(old->file), file) != 0)
                take_from(fs, file, key.data, NAME(old->file));
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

/* ---- verdicts ------------------------------------------------------------------ */

/* The reason a duplicate's record gives: the warning's words for a file
 * that is read; for a name --static-pod-file-pattern leaves out, that it
 * is a copy of a pod another file defines. */
static void dup_reason(char *text, size_t size, const char *key, const char *holder, bool filtered)
{
        if (filtered)
                (void)snprintf(text, size,
                               "pod \"%s\" is already defined by file \"%s\" (this name does not match "
                               "--static-pod-file-pattern and is not read)",
                               key, holder);
        else
                dup_text(text, size, key, holder);
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
static void settle_file(struct file_source *fs, const struct state *st, const struct file_name *f, uint64_t sent,
                        uint64_t pend, const char *uid)
{
        const struct entry *e = keymap_get(st->store, f->key->key);
        struct frec *r = f->rec;
        char text[DUP_TEXT];

        /* Only a read of the file ends that (load_file()). */
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
                dup_reason(text, sizeof(text), f->key->key, NAME(e->file), f->filtered);
                file_records_no_pod(&fs->recs, r);
                file_records_set(&fs->recs, r, FILE_RECORD_DUPLICATE, text);
        } else if (f->filtered) {
                file_records_set(&fs->recs, r, FILE_RECORD_IGNORED, STATIC_POD_FILTERED_REASON);
        } else {
                file_records_pending(&fs->recs, r, FILE_RECORDS_SENT_NONE);
        }
}

/* An entry that is not read: a directory, or what static_pod_entry()
 * says is bad (reported), with its reason (without ": skipped"). */
static void not_read(struct file_source *fs, struct frec *rec, int kind, const char *reason)
{
        static const char skipped[] = ": skipped";
        size_t len = strlen(reason);
        char why[256];
        struct stat st;
        bool have = lstat(rec->path, &st) == 0;

        if (kind == STATIC_POD_DIRECTORY) {
                log_debug("file source: skipping directory \"%s\"", rec->path);
                (void)snprintf(why, sizeof(why), "a directory (the file source does not recurse)");
        } else {
                report_bad(fs, rec->path, reason, 0, false);
                if (len >= sizeof(skipped) - 1 && strcmp(reason + len - (sizeof(skipped) - 1), skipped) == 0)
                        len -= sizeof(skipped) - 1;
                (void)snprintf(why, sizeof(why), "%.*s", (int)len, reason);
        }
        file_records_stat(&fs->recs, rec, have ? &st : NULL);
        file_records_set(&fs->recs, rec, FILE_RECORD_IGNORED, why);
}

/* A name starting with '.': never read, recorded as such (with its
 * lstat) while it is there.  0, or a resource error. */
static int dot_file(struct file_source *fs, const char *path)
{
        struct frec *r;
        struct stat st;

        if (lstat(path, &st) < 0) {
                if (static_pod_resource_error(-errno))
                        return -errno;
                r = file_records_get(&fs->recs, path, false);
                if (r)
                        file_records_drop(&fs->recs, r, 0);
                return 0;
        }
        r = file_records_get(&fs->recs, path, true);
        if (!r)
                return -ENOMEM;
        r->seen = fs->gen;
        file_records_stat(&fs->recs, r, &st);
        file_records_set(&fs->recs, r, FILE_RECORD_IGNORED, STATIC_POD_DOT_REASON);
        return 0;
}

/* ---- relist ------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* rec's pod, just put into st: if the file does not hold its key (a
 * duplicate, a name left out), the record keeps the pod's identity. */
static void note_ident(struct file_source *fs, const struct state *st, struct frec *rec, const struct pod *pod)
{
        const struct file_name *f = keymap_get(st->files, rec->path);
        const struct entry *e = f ? keymap_get(st->store, f->key->key) : NULL;

        if (f && (!e || e->file != f))
                (void)file_records_ident(&fs->recs, rec, f->key->key, pod_uid(pod)); /* else fs->recs.oom */
}

/*
 * rec's file could not be read by a relist building st: it keeps there
 * what it had in fs->st, the pod it held (if any) and the key it named,
 * just as an event with the same error leaves them (doc/pod-config.md
 * 6.8).  0 or -ENOMEM.
 */
static int keep_last(struct file_source *fs, struct state *st, struct frec *rec)
{
        const struct file_name *old = NULL;
        const struct entry *e = rec_entry(&fs->st, rec, &old);
        struct file_name *f;
        int r;

        if (e)
                return store_put(fs, st, rec, e->pod) < 0 ? -ENOMEM : 0;
        if (!old)
                return 0;
        f = keymap_get(st->files, rec->path);
        if (!f && !(f = name_new(rec, old->filtered)))
                return -ENOMEM;
        f->refs++; /* ours until the end: a new name nothing took goes there */
        r = name_key(st, f, old->key->key);
        name_unref(f);
        return r;
}

/*
 * The relist's look at one listed path: its record says what it is, and
 * a manifest's pod goes into st (a fresh state).  A file that vanished
 * is skipped; a file that is bad (unreadable, invalid, not a regular
 * file) is reported and skipped, so its pod drops out as in the kubelet;
 * a name left out by --static-pod-file-pattern only names its key.  0 or
 * a resource error, with *ret_what set.
 */
static int look_at(struct file_source *fs, const char *path, struct state *st, const char **ret_what)
{
        const char *slash = strrchr(path, '/');
        enum static_pod_name nk =
                static_pod_name_kind(slash ? slash + 1 : path, (const char *const *)fs->patterns, fs->n_patterns);
        struct buf reason = BUF_INIT;
        struct pod *pod = NULL;
        struct frec *rec;
        int r, kind;

        *ret_what = "cannot check a file";
        if (nk == STATIC_POD_NAME_DOT)
                return dot_file(fs, path);
        r = kind = static_pod_entry(path, &reason);
        if (kind < 0 || kind == STATIC_POD_GONE)
                goto out;
        *ret_what = "cannot record a file";
        r = -ENOMEM;
        if (!(rec = file_records_get(&fs->recs, path, true)))
                goto out;
        r = 0;
        if (kind != STATIC_POD_MANIFEST) {
                not_read(fs, rec, kind, reason.len ? reason.data : "skipped");
                rec->seen = fs->gen;
                goto out;
        }
        r = load_file(fs, rec, 0, nk == STATIC_POD_NAME_FILTERED, &pod);
        *ret_what = "cannot load a file";
        if (r == -ENOENT || static_pod_resource_error(r))
                goto out;
        rec->seen = fs->gen;
        if (r == LOAD_UNREADABLE) {
                *ret_what = "cannot keep a pod";
                r = keep_last(fs, st, rec);
                goto out;
        }
        if (r < 0) {
                r = 0;
                goto out;
        }
        pod = keep_stored(&fs->st, path, pod);
        *ret_what = "cannot store a pod";
        r = store_put(fs, st, rec, pod);
        if (r >= 0)
                note_ident(fs, st, rec, pod);
out:
        if (r == -ENOENT || kind == STATIC_POD_GONE)
                r = 0;
        pod_unref(pod);
        buf_free(&reason);
        return r < 0 ? r : 0;
}

/* Looks at every listed path (see look_at()).  0 or -errno (a resource
 * error) with *ret_what set. */
static int load_all(struct file_source *fs, char **names, size_t n, struct state *st, const char **ret_what)
{
        for (size_t i = 0; i < n; i++) {
                int r = look_at(fs, names[i], st, ret_what);

                if (r < 0)
                        return r;
        }
        return 0;
}

/*
 * The records once a relist's state st goes out as send number sent
 * (fs->st is still the one it replaces): a file it found is judged
 * against st, its pod pending under sent unless the very pod went out
 * before; a file it did not find is gone: pending until sent is merged
 * if it had a pod, else dropped.  O(records): a relist reads them all.
 */
static bool pod_unchanged(const struct pod *before, const struct pod *after);

static void settle_relist(struct file_source *fs, const struct state *st, uint64_t sent)
{
        struct frec *drop = NULL, *r;
        size_t it = 0;
        void *v;

        while (keymap_next(fs->recs.map, &it, &v)) {
                const struct file_name *fo = NULL, *f = NULL;
                const struct entry *eo, *en;

                r = v;
                eo = rec_entry(&fs->st, r, &fo);
                if (r->seen != fs->gen) {
                        if (eo)
                                log_outcome("removed", eo->pod, r->path);
                        if (eo || r->gone) {
                                file_records_gone(&fs->recs, r, sent);
                        } else {
                                file_records_unpend(&fs->recs, r);
                                r->next = drop; /* dropped after the walk */
                                drop = r;
                        }
                        continue;
                }
                en = rec_entry(st, r, &f);
                if (en && (!eo || !pod_unchanged(eo->pod, en->pod)))
                        log_outcome(eo ? "replaced" : "applied", en->pod, r->path);
                else if (eo && !en)
                        log_outcome("removed", eo->pod, r->path);
                if (f)
                        settle_file(fs, st, f, en && eo && en->pod == eo->pod ? 0 : sent, sent, NULL);
                else if (eo)
                        file_records_no_pod(&fs->recs, r);
        }
        while ((r = drop)) {
                drop = r->next;
                r->next = NULL;
                file_records_drop(&fs->recs, r, 0);
        }
}

/* Sends st (built by a relist, its indexes with it) and makes it the
 * source's state, leaving st empty; the records follow.  On failure
 * nothing changes and st stays the caller's.  0 or -ENOMEM. */
static int replace_state(struct file_source *fs, struct state *st)
{
        uint64_t sent = 0;
        int r = send_state(fs, st->store, &sent);

        if (r < 0)
                return r;
        fs->diverged = false;
        settle_relist(fs, st, sent);
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

        /* Dot files too: they are recorded (never read). */
        r = dir_list(fs->path, DIR_LIST_PATHS, &names, &n, ret_what);
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
        struct frec *rec = file_records_get(&fs->recs, fs->path, true);
        struct pod *pod = NULL;
        int r;

        *ret_what = "cannot record the file";
        if (!rec)
                return -ENOMEM;
        r = load_file(fs, rec, 0, false, &pod);
        if (r == -ENOENT)
                return 0; /* gone: no pods */
        rec->seen = fs->gen;
        if (r != 0) {
                /* A bad or unreadable file keeps what was sent before; a
                 * resource error is retried. */
                *ret_what = "cannot load the file";
                return static_pod_resource_error(r) ? r : 1;
        }
        pod = keep_stored(&fs->st, fs->path, pod);
        r = store_put(fs, st, rec, pod);
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

/* What status shows the source doing (src/metrics/metrics.h). */
static void update_state(struct file_source *fs)
{
        source_stats_state(fs->stats, fs->absent                            ? "absent"
                                      : episode_failing(&fs->failing)       ? "failing"
                                      : episode_failing(&fs->watch_failing) ? "unwatched"
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

        fs->gen++; /* what this relist finds is marked with it */
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
        (void)backoff_next(&fs->relist, 0);
        if (episode_log(&fs->failing, LOG_LEVEL_ERROR, text,
                        "file source: %s: keeping the last good state, trying again in %.1f s", text,
                        (double)fs->relist.delay / 1e6))
                source_stats_error(fs->stats, false, "%s", text);
        loop_timer_arm(fs->relist_retry_timer, fs->relist.delay);
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
        file_records_flush(&fs->recs);
        if (r >= 0 && fs->recs.oom) {
                what = "cannot record the files of";
                r = -ENOMEM;
        }
        fs->recs.oom = false;
        if (r < 0) {
                relist_failed(fs, what, r);
        } else {
                loop_timer_stop(fs->relist_retry_timer);
                backoff_reset(&fs->relist);
                (void)episode_clear(&fs->failing, "file source: \"%s\" listed again", fs->path);
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
        /* Deltas from a store that differs from what was sent would add
         * up to a mix of both: none goes out until the relist has sent
         * a whole state (replace_state). */
        fs->diverged = true;
        /* A relist is due already: it finds this change too, and the
         * pause before it does not grow with each event of a burst. */
        if (loop_timer_armed(fs->relist_retry_timer))
                return;
        relist_failed(fs, "cannot apply an event for", r);
        update_state(fs);
}

/* The end of an event on file: the records it changed are told, and a
 * record that could not be kept makes a relist, which sets it again. */
static void recs_told(struct file_source *fs, const char *file)
{
        file_records_flush(&fs->recs);
        if (fs->recs.oom) {
                fs->recs.oom = false;
                event_failed(fs, file, -ENOMEM);
        }
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
        /* A missing path is polled every second without backoff (and a
         * failure to watch it afterwards doubles from there). */
        if (missing)
                backoff_reset(&fs->retry);
        loop_timer_arm(fs->retry_timer, backoff_next(&fs->retry, 0));
}

/*
 * What one event did under each key it touched (at most two: the key a
 * file's pod had and the one it has now): the pod stored there before
 * and after, NULL for none, and the file that held it before, with a
 * reference each.  The store and its UID counts already say after.
 */
struct change {
        struct pod *before[2], *after[2];
        struct file_name *held[2];
        size_t n;
};

static void change_clear(struct change *c)
{
        for (size_t i = 0; i < c->n; i++) {
                pod_unref(c->before[i]);
                pod_unref(c->after[i]);
                name_unref(c->held[i]);
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
/* The outcomes c sent (log_outcome()): a pod applied, replaced or
 * removed under each key it touched. */
static void log_changes(struct file_source *fs, const struct change *c)
{
        for (size_t i = 0; i < c->n; i++) {
                const struct pod *b = c->before[i], *a = c->after[i];
                const struct entry *e = a ? keymap_get(fs->st.store, pod_key(a)) : NULL;

                if (pod_unchanged(b, a))
                        continue;
                if (a && e)
                        log_outcome(b ? "replaced" : "applied", a, NAME(e->file));
                else if (b && c->held[i])
                        log_outcome("removed", b, NAME(c->held[i]));
        }
}

static int send_changes(struct file_source *fs, const struct change *c, uint64_t *ret_sent)
{
        struct pod_update *u;
        bool any = false;
        int r;

        *ret_sent = 0;
        for (size_t i = 0; i < c->n; i++)
                any = any || !pod_unchanged(c->before[i], c->after[i]);
        if (!any || fs->diverged)
                return 0; /* unchanged, or the relist due sends it all */
        if (!change_is_local(&fs->st, c)) {
                r = send_state(fs, fs->st.store, ret_sent);
                if (r == 0)
                        log_changes(fs, c);
                return r;
        }
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
static void settle_change(struct file_source *fs, const struct change *c, uint64_t sent)
{
        for (size_t i = 0; i < c->n; i++) {
                const struct pod *any = c->after[i] ? c->after[i] : c->before[i];
                struct entry *e = any ? keymap_get(fs->st.store, pod_key(any)) : NULL;
                struct keyref *kr = any ? keymap_get(fs->st.keyrefs, pod_key(any)) : NULL;
                const struct file_name *holder = e ? e->file : NULL;
                size_t it = 0;
                void *v;

                if (holder)
                        settle_file(fs, &fs->st, holder, pod_unchanged(c->before[i], c->after[i]) ? 0 : sent, 0, NULL);
                if (!kr || holder == c->held[i] || kr->files <= (holder ? 1u : 0u))
                        continue;
                while (keymap_next(fs->st.files, &it, &v)) {
                        const struct file_name *f = v;

                        if (f->key == kr && f != holder)
                                settle_file(fs, &fs->st, f, 0, 0,
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
                qsort(cands, n, sizeof(*cands), cmp_str);
        for (size_t i = 0; i < n && r == 0 && !keymap_get(fs->st.store, kr->key); i++) {
                struct frec *rec = file_records_get(&fs->recs, cands[i], false);
                struct pod *pod = NULL;
                struct buf k = BUF_INIT;

                if (!rec)
                        continue;
                r = load_file(fs, rec, 0, false, &pod);
                if (r == 0 && (r = pod_store_key(pod, &k)) == 0 && strcmp(k.data, kr->key) == 0)
                        r = store_put(fs, &fs->st, rec, pod);
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
 * and the change is sent; the records of the files naming its key follow
 * (the file's own is the caller's).  What was said about the file is
 * kept.  Returns the number of the send that took the file's pod away,
 * 0 when it held none (or its going changed nothing), FILE_RECORDS_SENT_NONE when the
 * change could not be made (a relist will).
 */
static uint64_t file_drop(struct file_source *fs, const char *file)
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
                event_failed(fs, file, r);
                sent = FILE_RECORDS_SENT_NONE;
        } else {
                settle_change(fs, &c, sent);
        }
        if (held)
                file_records_no_pod(&fs->recs, f->rec);
        change_clear(&c);
        key_forget_unused(fs->st.keyrefs, kr);
        name_unref(f); /* the files map's reference */
        return held ? sent : 0;
}

/* A file that is gone: what was said about it is forgotten, its pod goes
 * or moves to another file, and its record goes once that is merged. */
static void file_gone(struct file_source *fs, const char *file)
{
        struct frec *r = file_records_get(&fs->recs, file, false);
        uint64_t sent;

        if (r)
                r->refs++; /* file_drop() may let go of the last name */
        forget_reports(fs, file);
        sent = file_drop(fs, file);
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
        file_gone(fs, NAME(holder));
        name_unref(holder);
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
                old->files++; /* held: store_put's rename of f must not free it */
        }
        c->before[c->n] = stored_pod(fs, key.data);
        c->held[c->n] = holder_of(fs, key.data);
        r = store_put(fs, &fs->st, rec, pod);
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

/* A file that is there: (re)load it, send what changed, and settle the
 * records it touched.  A file that is now bad defines no pod, as in a
 * relist (a single file path keeps its pod, as its relist does); one
 * --static-pod-file-pattern leaves out only names its key. */
static void file_changed(struct file_source *fs, struct frec *rec, uint32_t mask)
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

        r = load_file(fs, rec, quiet, name_filtered(fs, file), &pod);
        if (r == LOAD_UNREADABLE)
                return; /* what the file gave stays */
        if (r < 0) {
                if (static_pod_resource_error(r))
                        event_failed(fs, file, r);
                else if (!quiet && r != -ENOENT && fs->watch_is_dir)
                        file_drop(fs, file);
                return;
        }
        pod = keep_stored(&fs->st, file, pod);
        r = put_changed(fs, rec, pod, &c);
        if (r >= 0)
                r = send_changes(fs, &c, &sent);
        if (r < 0) {
                event_failed(fs, file, r);
        } else {
                settle_change(fs, &c, sent);
                if ((f = keymap_get(fs->st.files, file)))
                        settle_file(fs, &fs->st, f, 0, 0, pod_uid(pod));
        }
        change_clear(&c);
        pod_unref(pod);
}

/* What the file is now decides, whatever the events said; the mask only
 * says whether the writer is done (errors are reported) and whether an
 * empty file is still being created.  As a relist would: a dot file is
 * recorded, never read; an entry that is not a regular file defines no
 * pod. */
static void process_file(struct file_source *fs, const char *file, uint32_t mask)
{
        const char *slash = strrchr(file, '/');
        struct buf reason = BUF_INIT;
        struct frec *rec;
        struct stat st;
        int kind;

        if (fs->watch_is_dir && slash && slash[1] == '.') {
                if ((kind = dot_file(fs, file)) < 0)
                        event_failed(fs, file, kind);
                return;
        }
        kind = static_pod_entry(file, &reason);
        if (kind < 0) {
                event_failed(fs, file, kind);
        } else if (kind == STATIC_POD_GONE) {
                file_gone(fs, file);
        } else if (!(rec = file_records_get(&fs->recs, file, true))) {
                event_failed(fs, file, -ENOMEM);
        } else if (kind != STATIC_POD_MANIFEST) {
                not_read(fs, rec, kind, reason.len ? reason.data : "skipped");
                file_drop(fs, file); /* what was just said stays said */
        } else if (!((mask & IN_CREATE) && !(mask & (IN_CLOSE_WRITE | IN_MOVED_TO)) && stat(file, &st) == 0 &&
                     st.st_size == 0)) {
                /* (An empty file just created: content follows with
                 * IN_MODIFY / IN_CLOSE_WRITE.) */
                file_changed(fs, rec, mask);
        }
        buf_free(&reason);
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
                /* The event's records are told as it leaves them. */
                recs_told(fs, d->path);
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
                        backoff_reset(&fs->retry);
                        schedule_retry(fs, 1);
                }
                return;
        }
        if (!(mask & (IN_DELETE | IN_MOVED_FROM | IN_CREATE | IN_MOVED_TO | IN_MODIFY | IN_ATTRIB |
                      IN_CLOSE_WRITE)))
                return;
        if (fs->watch_is_dir) {
                /* Dot files too: they are recorded (never read). */
                if (!name[0])
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
        if (!episode_log(&fs->watch_failing, LOG_LEVEL_ERROR, text,
                         "file source: %s: changes are seen at the relist every period only, until it can be watched",
                         text))
                return;
        source_stats_error(fs->stats, false, "%s", text);
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
        backoff_reset(&fs->retry);
        if (episode_clear(&fs->watch_failing, "file source: watching \"%s\" again", fs->path)) {
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

/* ---- delivery ----------------------------------------------------------------------------- */

void file_source_carried(struct file_source *fs, const struct pod_update *u, uint64_t seq)
{
        if (u->source && strcmp(u->source, POD_SOURCE_FILE) == 0)
                fs->recs.last_seq = seq;
        if (!file_records_waiting(&fs->recs) || u->op == POD_OP_REMOVE)
                return;
        for (size_t i = 0; i < u->n_pods; i++) {
                const struct pod *p = u->pods[i];
                struct entry *e;
                struct frec *r;

                if (!p->source || strcmp(p->source, POD_SOURCE_FILE) != 0)
                        continue;
                e = keymap_get(fs->st.uids, pod_uid(p));
                /* A pinned UID several files share: the one of its key. */
                if (e && e->same_uid > 1 && (e = keymap_get(fs->st.store, pod_key(p))) &&
                    strcmp(pod_uid(e->pod), pod_uid(p)) != 0)
                        e = NULL;
                if (!e)
                        continue;
                r = e->file->rec;
                /* An older version of the pod does not do. */
                if (r->state == FILE_RECORD_PENDING && r->sent != FILE_RECORDS_SENT_NONE && !r->gone && pod_unchanged(e->pod, p))
                        file_records_applied(&fs->recs, r, seq);
        }
        file_records_flush(&fs->recs);
}

/* The mux merged what was sent up to number through. */
static void on_merged(void *data, uint64_t through)
{
        struct file_source *fs = data;

        file_records_merged(&fs->recs, through);
}

int file_source_records(struct file_source *fs, int (*fn)(void *data, const struct file_record_view *v), void *data)
{
        return file_records_each(&fs->recs, fn, data);
}

size_t file_source_record_count(const struct file_source *fs)
{
        return file_records_count(&fs->recs);
}

/* ---- lifecycle --------------------------------------------------------------------------- */

/* The config's patterns, copied into fs.  0, -EINVAL (err says why) or
 * -ENOMEM. */
static int copy_patterns(struct file_source *fs, const struct file_source_config *cfg, struct buf *err)
{
        if (cfg->n_patterns > FILE_SOURCE_MAX_PATTERNS)
                return buf_set_err(err, -EINVAL, "more than %d --static-pod-file-pattern", FILE_SOURCE_MAX_PATTERNS);
        fs->patterns = calloc(cfg->n_patterns ? cfg->n_patterns : 1, sizeof(*fs->patterns));
        if (!fs->patterns)
                return -ENOMEM;
        for (size_t i = 0; i < cfg->n_patterns; i++) {
                if (!cfg->patterns[i][0])
                        return buf_set_err(err, -EINVAL, "an empty --static-pod-file-pattern");
                if (!(fs->patterns[i] = strdup(cfg->patterns[i])))
                        return -ENOMEM;
                fs->n_patterns++;
        }
        return 0;
}

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
        if ((r = copy_patterns(fs, cfg, err)) < 0) {
                file_source_free(fs);
                return r;
        }
        r = -ENOMEM;
        fs->loop = loop;
        fs->watcher = watcher;
        fs->ch = ch;
        fs->period = cfg->period_usec ? cfg->period_usec : FILE_SOURCE_DEFAULT_PERIOD_USEC;
        fs->path = path_clean(cfg->path);
        fs->node_name = strdup(cfg->node_name);
        fs->stats = cfg->stats;
        fs->rejected = cfg->rejected;
        fs->rejected_data = cfg->rejected_data;
        fs->errors = strmap_new();
        fs->dirty = strmap_new_borrowed();
        fs->unknown = strmap_new();
        fs->docs = strmap_new();
        fs->dups = strmap_new();
        fs->unreadable = strmap_new();
        if (!fs->path || !fs->node_name || state_init(&fs->st) < 0 || !fs->errors || !fs->dirty || !fs->unknown ||
            !fs->docs || !fs->dups || !fs->unreadable ||
            file_records_init(&fs->recs, rec_view, fs, cfg->record, cfg->record_data) < 0)
                goto fail;
        source_stats_target(fs->stats, fs->path);
        fs->retry = BACKOFF_INIT(FILE_SOURCE_RETRY_USEC, FILE_SOURCE_RETRY_MAX_USEC);
        fs->relist = BACKOFF_INIT(cfg->retry_usec ? cfg->retry_usec : FILE_SOURCE_RETRY_USEC, fs->period);
        fs->read_retry = fs->relist;
        if ((r = loop_timer_new(loop, on_relist, fs, &fs->relist_timer)) < 0 ||
            (r = loop_timer_new(loop, on_retry, fs, &fs->retry_timer)) < 0 ||
            (r = loop_timer_new(loop, on_relist_retry, fs, &fs->relist_retry_timer)) < 0 ||
            (r = loop_timer_new(loop, on_batch, fs, &fs->batch_timer)) < 0 ||
            (r = loop_timer_new(loop, relist_step, fs, &fs->step_timer)) < 0 ||
            (r = loop_timer_new(loop, on_read_retry, fs, &fs->read_retry_timer)) < 0)
                goto fail;
        mux_channel_on_merged(ch, on_merged, fs);
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
        if (fs->ch && fs->recs.map)
                mux_channel_on_merged(fs->ch, NULL, NULL);
        watcher_remove(fs->watch);
        loop_timer_free(fs->relist_timer);
        loop_timer_free(fs->retry_timer);
        loop_timer_free(fs->relist_retry_timer);
        loop_timer_free(fs->batch_timer);
        loop_timer_free(fs->step_timer);
        loop_timer_free(fs->read_retry_timer);
        job_free(fs->job);
        episode_free(&fs->failing);
        state_free(&fs->st);
        /* Records last: the names above hold theirs. */
        file_records_clear(&fs->recs);
        for (size_t i = 0; i < fs->n_patterns; i++)
                free(fs->patterns[i]);
        free(fs->patterns);
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
        strmap_free(fs->unreadable, free);
        episode_free(&fs->watch_failing);
        free(fs->path);
        free(fs->node_name);
        free(fs);
}
