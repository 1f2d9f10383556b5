/*
 * file_source — static pods from a directory or a file (see
 * include/podmux/file_source.h and spec/pod-config.md section 6).
 *
 * State: store (namespace/name -> entry{pod, file}) and files (path ->
 * store key).  Every change to the store sends the store's whole content as
 * one SET on the channel.  Deviations from the kubelet (README): an empty or
 * missing relist clears the store; the first file in sorted order wins a
 * duplicate namespace/name; the watch is re-armed when the path is deleted,
 * moved or re-created.
 *
 * Bad files are logged once per distinct reason (a relist every period
 * would otherwise repeat the same line forever).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "podmux/file_source.h"
#include "podmux/metrics.h"
#include "podmux/log.h"
#include "podmux/manifest.h"
#include "podmux/path.h"
#include "podmux/strmap.h"

#define DIR_MASK (IN_CREATE | IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE | \
                  IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)
#define FILE_MASK (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF)

struct entry {
        struct pod *pod;
        char *file;
};

struct file_source {
        struct loop *loop;
        struct watcher *watcher;
        struct mux_channel *ch;
        char *path;
        char *node_name;
        uint64_t period;
        struct source_stats *stats; /* may be NULL */
        struct strmap *store;  /* key -> struct entry* */
        struct strmap *files;  /* file -> key (char*) */
        struct strmap *errors; /* file -> last logged reason (char*) */
        struct watcher_watch *watch;
        int watch_is_dir;
        struct loop_timer *relist_timer;
        struct loop_timer *retry_timer;
        uint64_t retry_delay;
};

/* ---- small helpers ------------------------------------------------------------ */

static void entry_free(void *v)
{
        struct entry *e = v;

        if (!e)
                return;
        pod_unref(e->pod);
        free(e->file);
        free(e);
}

/* Logs a bad file once per distinct reason. */
static void report_bad(struct file_source *fs, const char *file, const char *reason,
                       int quiet, bool parse)
{
        char *prev = strmap_get(fs->errors, file), *copy;

        if (quiet || (prev && strcmp(prev, reason) == 0)) {
                log_debug("file \"%s\": %s", file, reason);
                return;
        }
        log_error("file \"%s\": %s", file, reason);
        source_stats_error(fs->stats, parse, "file \"%s\": %s", file, reason);
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

/* Reads and decodes one file into a pod.  Returns -ENOENT quietly when the
 * file vanished; other errors are reported (once) unless quiet. */
static int load_file(struct file_source *fs, const char *file, int quiet,
                     struct pod **ret_pod)
{
        struct manifest_ctx ctx = {
                .origin = MANIFEST_ORIGIN_FILE,
                .node_name = fs->node_name,
                .location = file,
        };
        struct buf err = BUF_INIT;
        json_object *obj = NULL;
        char *data = NULL;
        size_t len = 0;
        int r;

        r = manifest_read_file(file, &data, &len, &err);
        if (r == -ENOENT)
                goto out;
        if (r == 0)
                r = manifest_decode_pod(data, len, &ctx, &obj, &err);
        if (r == 0)
                r = pod_from_json(obj, ret_pod, &err);
        if (r < 0)
                report_bad(fs, file, err.data ? err.data : "invalid manifest", quiet, r != -EACCES && r != -EIO);
        else
                clear_bad(fs, file);
out:
        json_object_put(obj);
        free(data);
        buf_free(&err);
        return r;
}

/* ---- sending ---------------------------------------------------------------------- */

static void send_store(struct file_source *fs)
{
        struct pod_update *u = pod_update_new(POD_OP_SET, POD_SOURCE_FILE);
        size_t it = 0;
        void *v;

        if (!u) {
                log_error("file source: out of memory building an update");
                return;
        }
        while (strmap_next(fs->store, &it, NULL, &v)) {
                struct entry *e = v;

                if (pod_update_add(u, e->pod) < 0) {
                        pod_update_free(u);
                        log_error("file source: out of memory building an update");
                        return;
                }
        }
        pod_update_sort(u);
        source_stats_success(fs->stats, u->n_pods);
        mux_channel_send(fs->ch, u);
}

static void clear_store(struct file_source *fs)
{
        strmap_free(fs->store, entry_free);
        fs->store = strmap_new();
}

/* Puts (file -> pod) into store/files.  The first file in sorted order
 * keeps a namespace/name; a later one is refused with a warning naming both.
 * Returns 1 if the store changed, 0 if not, -errno. */
static int store_put(struct file_source *fs, struct strmap *store, const char *file,
                     struct pod *pod)
{
        struct buf key = BUF_INIT;
        struct entry *e, *old = NULL;
        char *k, *oldk = NULL;
        int r = -ENOMEM;

        if (pod_store_key(pod, &key) < 0)
                goto out;
        old = strmap_get(store, key.data);
        if (old && strcmp(old->file, file) != 0 && strcmp(old->file, file) < 0) {
                struct stat st;

                /* The earlier file still defines it: it keeps the pod. */
                if (stat(old->file, &st) == 0) {
                        log_warn("file \"%s\": pod \"%s\" is already defined by file \"%s\": ignored (the first file in sorted order wins)",
                                 file, key.data, old->file);
                        r = 0;
                        goto record;
                }
        }
        if (old && old->pod == pod) {
                r = 0;
                goto record;
        }
        if (old && strcmp(old->file, file) != 0)
                log_warn("file \"%s\": now defines pod \"%s\" in place of file \"%s\" (which sorts later or is gone)",
                         file, key.data, old->file);
        e = calloc(1, sizeof(*e));
        if (!e)
                goto out;
        e->pod = pod_ref(pod);
        e->file = strdup(file);
        if (!e->file || strmap_put(store, key.data, e, (void **)&old) < 0) {
                entry_free(e);
                goto out;
        }
        entry_free(old);
        r = 1;
record:
        k = strdup(key.data);
        if (!k || strmap_put(fs->files, file, k, (void **)&oldk) < 0) {
                free(k);
                r = -ENOMEM;
                goto out;
        }
        free(oldk);
out:
        buf_free(&key);
        return r;
}

/* ---- relist ------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static void relist_dir(struct file_source *fs)
{
        struct strmap *fresh = strmap_new();
        char **names = NULL, **tmp;
        size_t n = 0, cap = 0;
        struct dirent *de;
        DIR *d;

        if (!fresh)
                return;
        d = opendir(fs->path);
        if (!d) {
                /* The kubelet lists an unreadable directory as empty. */
                int e = errno;

                log_error("file source: cannot read directory \"%s\": %s", fs->path, ERRNO_STR(e));
                source_stats_error(fs->stats, false, "cannot read directory \"%s\": %s", fs->path, ERRNO_STR(e));
        } else {
                while ((de = readdir(d))) {
                        if (de->d_name[0] == '.')
                                continue;
                        if (n == cap) {
                                cap = cap ? cap * 2 : 32;
                                tmp = realloc(names, cap * sizeof(*names));
                                if (!tmp)
                                        break;
                                names = tmp;
                        }
                        names[n] = path_join(fs->path, de->d_name);
                        if (names[n])
                                n++;
                }
                closedir(d);
        }
        if (n > 1)
                qsort(names, n, sizeof(*names), cmp_str);
        for (size_t i = 0; i < n; i++) {
                struct stat st;
                struct pod *pod = NULL;

                if (stat(names[i], &st) < 0) {
                        int e = errno;
                        struct stat lst;

                        /* Vanished since the listing: silent.  A link to
                         * nothing: said once. */
                        if (e != ENOENT)
                                report_bad(fs, names[i], ERRNO_STR(e), 0, false);
                        else if (lstat(names[i], &lst) == 0 && S_ISLNK(lst.st_mode))
                                report_bad(fs, names[i], "dangling symbolic link: skipped", 0, false);
                        continue;
                }
                if (S_ISDIR(st.st_mode)) {
                        log_debug("file source: skipping directory \"%s\"", names[i]);
                        continue;
                }
                if (!S_ISREG(st.st_mode)) {
                        report_bad(fs, names[i], "not a regular file: skipped", 0, false);
                        continue;
                }
                if (load_file(fs, names[i], 0, &pod) < 0)
                        continue;
                /* store_put records files[] in fs; point it at fresh. */
                store_put(fs, fresh, names[i], pod);
                pod_unref(pod);
        }
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
        strmap_free(fs->store, entry_free);
        fs->store = fresh;
        send_store(fs);
}

void file_source_relist(struct file_source *fs)
{
        struct stat st;
        struct pod *pod = NULL;

        if (stat(fs->path, &st) < 0) {
                if (errno == ENOENT) {
                        log_debug("file source: path \"%s\" does not exist", fs->path);
                        clear_store(fs);
                        send_store(fs);
                } else {
                        int e = errno;

                        log_error("file source: cannot stat \"%s\": %s", fs->path, ERRNO_STR(e));
                        source_stats_error(fs->stats, false, "cannot stat \"%s\": %s", fs->path, ERRNO_STR(e));
                }
                return;
        }
        if (S_ISDIR(st.st_mode)) {
                relist_dir(fs);
        } else if (S_ISREG(st.st_mode)) {
                if (load_file(fs, fs->path, 0, &pod) < 0)
                        return;
                clear_store(fs);
                store_put(fs, fs->store, fs->path, pod);
                pod_unref(pod);
                send_store(fs);
        } else {
                log_error("file source: \"%s\" is neither a directory nor a regular file",
                          fs->path);
        }
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

static void watch_event_add(struct file_source *fs, const char *file, uint32_t mask)
{
        struct stat st;
        struct pod *pod = NULL;
        /* A file still being written fails to parse on early events; only
         * the close after writing (or a rename into place) reports errors. */
        int quiet = !(mask & (IN_CLOSE_WRITE | IN_MOVED_TO | IN_ATTRIB));

        if (stat(file, &st) < 0 || S_ISDIR(st.st_mode))
                return;
        if (!S_ISREG(st.st_mode)) {
                report_bad(fs, file, "not a regular file: skipped", 0, false);
                return;
        }
        if ((mask & IN_CREATE) && st.st_size == 0)
                return; /* content follows with IN_MODIFY / IN_CLOSE_WRITE */
        if (load_file(fs, file, quiet, &pod) < 0)
                return;
        if (store_put(fs, fs->store, file, pod) > 0)
                send_store(fs);
        pod_unref(pod);
}

static void watch_event_delete(struct file_source *fs, const char *file)
{
        char *key = strmap_remove(fs->files, file);
        struct entry *e;
        size_t it = 0;
        const char *other;
        void *v;

        if (!key)
                return;
        e = strmap_get(fs->store, key);
        if (!e) {
                log_error("file source: file \"%s\" maps to pod \"%s\" which is not in the store",
                          file, key);
        } else if (strcmp(e->file, file) == 0) {
                entry_free(strmap_remove(fs->store, key));
                /* Another file defining the same pod takes over at once
                 * (the kubelet waits for the next relist). */
                while (strmap_next(fs->files, &it, &other, &v)) {
                        struct pod *pod = NULL;

                        if (strcmp(v, key) != 0)
                                continue;
                        if (load_file(fs, other, 0, &pod) == 0) {
                                store_put(fs, fs->store, other, pod);
                                pod_unref(pod);
                                break;
                        }
                }
                send_store(fs);
        }
        free(key);
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
                        watch_event_delete(fs, fs->path);
                if (mask & IN_IGNORED) {
                        /* The kernel dropped the watch (the path went away):
                         * re-arm, treating the path as missing meanwhile. */
                        fs->watch = NULL;
                        log_info("file source: \"%s\" was removed or moved: watching for it to come back",
                                 fs->path);
                        file_source_relist(fs);
                        fs->retry_delay = 0;
                        schedule_retry(fs, 1);
                }
                return;
        }
        if (fs->watch_is_dir) {
                if (!name[0] || name[0] == '.')
                        return;
                file = path_join(path, name);
        } else {
                file = strdup(fs->path);
        }
        if (!file)
                return;
        if (mask & (IN_DELETE | IN_MOVED_FROM))
                watch_event_delete(fs, file);
        else if (mask & (IN_CREATE | IN_MOVED_TO | IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE))
                watch_event_add(fs, file, mask);
        free(file);
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
                        log_error("file source: cannot watch \"%s\": %s", fs->path, ERRNO_STR(r));
                fs->watch = NULL;
                schedule_retry(fs, r == -ENOENT);
                return;
        }
        fs->retry_delay = 0;
        log_debug("file source: watching \"%s\"", fs->path);
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

        if (!cfg->path || !cfg->path[0]) {
                buf_puts(err, "the static pod path is empty");
                return -EINVAL;
        }
        if (!cfg->node_name || !cfg->node_name[0]) {
                buf_puts(err, "the node name is empty");
                return -EINVAL;
        }
        fs = calloc(1, sizeof(*fs));
        if (!fs)
                return -ENOMEM;
        fs->loop = loop;
        fs->watcher = watcher;
        fs->ch = ch;
        fs->period = cfg->period_usec ? cfg->period_usec : FILE_SOURCE_DEFAULT_PERIOD_USEC;
        fs->path = path_clean(cfg->path);
        fs->node_name = strdup(cfg->node_name);
        fs->stats = cfg->stats;
        fs->store = strmap_new();
        fs->files = strmap_new();
        fs->errors = strmap_new();
        if (!fs->path || !fs->node_name || !fs->store || !fs->files || !fs->errors)
                goto fail;
        if ((r = loop_timer_new(loop, on_relist, fs, &fs->relist_timer)) < 0 ||
            (r = loop_timer_new(loop, on_retry, fs, &fs->retry_timer)) < 0)
                goto fail;
        *ret_fs = fs;
        return 0;
fail:
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
        strmap_free(fs->store, entry_free);
        strmap_free(fs->files, free);
        strmap_free(fs->errors, free);
        free(fs->path);
        free(fs->node_name);
        free(fs);
}
