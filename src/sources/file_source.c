/*
 * file_source — static pods from a directory or a file (see
 * src/sources/file_source.h and doc/pod-config.md section 6).
 *
 * State (struct state, src/sources/file_store.h): store (namespace/name
 * -> entry{pod, file}) and files (path -> the key the file names), with
 * two indexes; each name is kept once and shared, no map copies a key.
 * This file keeps the relist, the watch and its queue of dirty files;
 * what one event does to the state is src/sources/file_events.c, what
 * is said about the files src/sources/file_reports.c.  A relist sends the store's whole content as one SET; an
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
 * extra YAML documents (src/sources/file_reports.h), a missing path and
 * a watch that cannot be set up (doc/design.md "Errors"); a duplicate,
 * the path and the watch say once (info) when that is over.
 *
 * Records (struct frec, src/sources/file_records.h, doc/pod-config.md
 * 6.7): one per path seen, in recs, holding the path the file's names
 * borrow.  An event sets the records of the files it touches (the file,
 * and the files naming a key whose holder changed: file_events_settle())
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

/* ---- reading a file ------------------------------------------------------------ */

bool file_source_filtered(const struct file_source *fs, const char *path)
{
        const char *slash = strrchr(path, '/');

        return fs->n_patterns && strcmp(path, fs->path) != 0 &&
               static_pod_name_kind(slash ? slash + 1 : path, (const char *const *)fs->patterns, fs->n_patterns) ==
                       STATIC_POD_NAME_FILTERED;
}

static void mark_dirty(struct file_source *fs, const char *file, uint32_t mask);

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
 * the bytes could not be read (file_reports_unreadable()); other errors are the
 * file's, reported (once) unless quiet or filtered.
 */
int file_source_load(struct file_source *fs, struct frec *rec, int quiet, bool filtered, struct pod **ret_pod)
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
                file_reports_unreadable(fs, rec, err.len ? err.data : ERRNO_STR(r), r, filtered);
                r = LOAD_UNREADABLE;
                goto out;
        }
        file_reports_readable_again(fs, file);
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
                file_reports_bad(fs, file, why, quiet, r != -EACCES && r != -EIO);
        } else if (!filtered) {
                file_reports_clear_bad(fs, file);
                file_reports_unknown(fs, file, &unknown);
                file_reports_docs(fs, file, docs);
        }
out:
        v1_unknown_clear(&unknown);
        buf_free(&err);
        return r;
}

/* ---- sending ---------------------------------------------------------------------- */

/* Sends store as the source's state.  0 with *ret_sent its number
 * (mux_channel_sent()), or -ENOMEM with nothing sent. */
int file_source_send_state(struct file_source *fs, struct keymap *store, uint64_t *ret_sent)
{
        struct pod_update *u = NULL;
        size_t n;
        int r = file_store_update(store, &u);

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

/* ---- verdicts ------------------------------------------------------------------ */

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
                file_reports_bad(fs, rec->path, reason, 0, false);
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

int file_source_cmp_str(const void *a, const void *b)
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
        const struct entry *e = file_store_rec_entry(&fs->st, rec, &old);
        struct file_name *f;
        int r;

        if (e)
                return file_store_put(fs, st, rec, e->pod) < 0 ? -ENOMEM : 0;
        if (!old)
                return 0;
        f = keymap_get(st->files, rec->path);
        if (!f && !(f = file_store_name_new(rec, old->filtered)))
                return -ENOMEM;
        f->refs++; /* ours until the end: a new name nothing took goes there */
        r = file_store_name_key(st, f, old->key->key);
        file_store_name_unref(f);
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
        r = file_source_load(fs, rec, 0, nk == STATIC_POD_NAME_FILTERED, &pod);
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
        pod = file_store_keep_stored(&fs->st, path, pod);
        *ret_what = "cannot store a pod";
        r = file_store_put(fs, st, rec, pod);
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
static void settle_relist(struct file_source *fs, const struct state *st, uint64_t sent)
{
        struct frec *drop = NULL, *r;
        size_t it = 0;
        void *v;

        while (keymap_next(fs->recs.map, &it, &v)) {
                const struct file_name *fo = NULL, *f = NULL;
                const struct entry *eo, *en;

                r = v;
                eo = file_store_rec_entry(&fs->st, r, &fo);
                if (r->seen != fs->gen) {
                        if (eo)
                                file_reports_outcome("removed", eo->pod, r->path);
                        if (eo || r->gone) {
                                file_records_gone(&fs->recs, r, sent);
                        } else {
                                file_records_unpend(&fs->recs, r);
                                r->next = drop; /* dropped after the walk */
                                drop = r;
                        }
                        continue;
                }
                en = file_store_rec_entry(st, r, &f);
                if (en && (!eo || !file_events_pod_unchanged(eo->pod, en->pod)))
                        file_reports_outcome(eo ? "replaced" : "applied", en->pod, r->path);
                else if (eo && !en)
                        file_reports_outcome("removed", eo->pod, r->path);
                if (f)
                        file_store_settle(fs, st, f, en && eo && en->pod == eo->pod ? 0 : sent, sent, NULL);
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
        int r = file_source_send_state(fs, st->store, &sent);

        if (r < 0)
                return r;
        fs->diverged = false;
        settle_relist(fs, st, sent);
        file_store_state_free(&fs->st);
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
        file_store_state_free(&j->st);
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
        r = file_source_load(fs, rec, 0, false, &pod);
        if (r == -ENOENT)
                return 0; /* gone: no pods */
        rec->seen = fs->gen;
        if (r != 0) {
                /* A bad or unreadable file keeps what was sent before; a
                 * resource error is retried. */
                *ret_what = "cannot load the file";
                return static_pod_resource_error(r) ? r : 1;
        }
        pod = file_store_keep_stored(&fs->st, fs->path, pod);
        r = file_store_put(fs, st, rec, pod);
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
        r = file_store_state_init(&found);
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
                        file_reports_trim(fs, NULL, 0);
        }
out:
        file_store_state_free(&found);
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
                        file_reports_trim(fs, j->names, j->n);
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
void file_source_event_failed(struct file_source *fs, const char *file, int r)
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
                file_source_event_failed(fs, file, -ENOMEM);
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
                        file_source_event_failed(fs, file, kind);
                return;
        }
        kind = static_pod_entry(file, &reason);
        if (kind < 0) {
                file_source_event_failed(fs, file, kind);
        } else if (kind == STATIC_POD_GONE) {
                file_events_gone(fs, file);
        } else if (!(rec = file_records_get(&fs->recs, file, true))) {
                file_source_event_failed(fs, file, -ENOMEM);
        } else if (kind != STATIC_POD_MANIFEST) {
                not_read(fs, rec, kind, reason.len ? reason.data : "skipped");
                file_events_drop(fs, file); /* what was just said stays said */
        } else if (!((mask & IN_CREATE) && !(mask & (IN_CLOSE_WRITE | IN_MOVED_TO)) && stat(file, &st) == 0 &&
                     st.st_size == 0)) {
                /* (An empty file just created: content follows with
                 * IN_MODIFY / IN_CLOSE_WRITE.) */
                file_events_changed(fs, rec, mask);
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
                file_source_event_failed(fs, file, -ENOMEM);
                return;
        }
        d->mask = mask;
        d->next = NULL;
        if (fs->dirty_tail)
                fs->dirty_tail->next = d;
        else
                fs->dirty_head = d;
        fs->dirty_tail = d;
        /* Read once the events read with this one are folded in: at the
         * end of this loop turn, not after another wait (the drop's
         * latency, scripts/bench drop_c). */
        if (!loop_timer_armed(fs->batch_timer))
                loop_timer_soon(fs->batch_timer);
}

void file_source_mark_dirty(struct file_source *fs, const char *file, uint32_t mask)
{
        mark_dirty(fs, file, mask);
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
                        file_events_gone(fs, fs->path);
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
                file_source_event_failed(fs, fs->path, -ENOMEM);
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
                if (r->state == FILE_RECORD_PENDING && r->sent != FILE_RECORDS_SENT_NONE && !r->gone &&
                    file_events_pod_unchanged(e->pod, p))
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
        if (!fs->path || !fs->node_name || file_store_state_init(&fs->st) < 0 || !fs->errors || !fs->dirty ||
            !fs->unknown || !fs->docs || !fs->dups || !fs->unreadable ||
            file_records_init(&fs->recs, file_store_rec_view, fs, cfg->record, cfg->record_data) < 0)
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
        file_store_state_free(&fs->st);
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
