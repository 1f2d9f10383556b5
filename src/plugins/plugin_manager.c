/*
 * plugin_manager — registry watcher, reconciler, executor and registration
 * ops (see src/plugins/plugin_manager.h and doc/plugin-manager.md).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "pluginregistration.pb-c.h"
#include "util/backoff.h"
#include "util/dir.h"
#include "util/episode.h"
#include "plugins/grpc_client.h"
#include "util/log.h"
#include "util/path.h"
#include "plugins/plugin_cache.h"
#include "plugins/plugin_handlers.h"
#include "plugins/plugin_manager.h"
#include "util/strmap.h"

/* IN_MOVED_FROM only tells that a watched directory left its name. */
#define DIR_MASK (IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_DELETE_SELF)
#define METHOD_GETINFO "/pluginregistration.Registration/GetInfo"
#define METHOD_NOTIFY "/pluginregistration.Registration/NotifyRegistrationStatus"

struct reg_op;

/* Executor state of one socket path (shared by register and unregister). */
struct op_state {
        char *path;
        int pending;
        struct backoff backoff; /* .at: the last failure; .delay 0: none (plugin_manager.h) */
        struct reg_op *op;
        uint64_t failed_generation; /* FAILED published for this ... */
        char *failed_text;          /* ... and this text */
};

struct reg_op {
        struct plugin_manager *pm;
        struct op_state *st;
        char *path;
        uint64_t generation;
        uint64_t timestamp;
        struct grpc_call *call;
        Pluginregistration__PluginInfo *info;
        char *endpoint;
        char *fail_text;   /* the op's failure, sent with Notify(false) */
        int notify_ok;     /* the Notify in flight says "registered" */
};

struct plugin_manager {
        struct loop *loop;
        struct watcher *watcher;
        struct curl_loop *cl;
        char *dir;
        plugin_event_fn event;
        void *event_data;
        plugin_call_fn call;     /* test seam: NULL = grpc_call_start */
        plugin_cancel_fn cancel;
        void *call_data;
        struct plugin_cache *cache;
        struct plugin_handlers *handlers;
        struct strmap *ops;     /* path -> struct op_state* */
        struct strmap *watches; /* directory -> struct watcher_watch* */
        struct loop_timer *timer;
        struct loop_timer *retry; /* reads the registry again (retry_later) */
        struct episode failing;   /* retry_later() until a walk succeeds (util/episode.h) */
        uint64_t pass_due; /* monotonic µs the armed pass is due, 0 if none */
};

/* ---- events ------------------------------------------------------------------------ */

int plugin_event_render(const struct plugin_event *ev, struct buf *out)
{
        const char *s;

        if (buf_puts(out, "{\"type\":") < 0 || buf_json_string(out, ev->type, strlen(ev->type)) < 0 ||
            buf_puts(out, ",\"name\":") < 0 || buf_json_string(out, ev->name, strlen(ev->name)) < 0 ||
            buf_puts(out, ",\"endpoint\":") < 0 ||
            buf_json_string(out, ev->endpoint, strlen(ev->endpoint)) < 0 ||
            buf_puts(out, ",\"versions\":[") < 0)
                return -ENOMEM;
        for (size_t i = 0; i < ev->n_versions; i++) {
                s = ev->versions[i];
                if ((i && buf_putc(out, ',') < 0) || buf_json_string(out, s, strlen(s)) < 0)
                        return -ENOMEM;
        }
        if (buf_puts(out, "],\"socket\":") < 0 ||
            buf_json_string(out, ev->socket, strlen(ev->socket)) < 0 || buf_putc(out, '}') < 0)
                return -ENOMEM;
        return 0;
}

static void publish(struct plugin_manager *pm, const char *op, const char *socket,
                    const Pluginregistration__PluginInfo *info, const char *endpoint,
                    const char *error)
{
        struct plugin_event ev = {
                .op = op,
                .socket = socket,
                .type = info && info->type ? info->type : "",
                .name = info && info->name ? info->name : "",
                .endpoint = endpoint ? endpoint : "",
                .versions = info ? info->supported_versions : NULL,
                .n_versions = info ? info->n_supported_versions : 0,
                .error = error,
        };

        if (pm->event)
                pm->event(pm->event_data, &ev);
}

/* ---- reconcile scheduling ------------------------------------------------------------ */

/*
 * The kubelet reconciles every second whether or not anything changed.
 * Here a pass runs when something can have changed — the desired state,
 * an op ending, a backoff running out — so an idle daemon never wakes up,
 * and nothing waits longer than it would for the kubelet's next tick.
 */
static void schedule_reconcile(struct plugin_manager *pm, uint64_t delay)
{
        uint64_t due = mono_usec() + delay;

        if (pm->pass_due && pm->pass_due <= due && loop_timer_armed(pm->timer))
                return;
        pm->pass_due = due;
        loop_timer_arm(pm->timer, delay);
}

/* ---- executor -------------------------------------------------------------------- */

static void op_state_free(void *v)
{
        struct op_state *st = v;

        if (!st)
                return;
        free(st->path);
        free(st->failed_text);
        free(st);
}

/* 0 (now pending), -EALREADY (in flight) or -EAGAIN (in backoff: a retry
 * is allowed only once strictly more than the backoff has elapsed since
 * the last failure). */
static int executor_try(struct plugin_manager *pm, const char *path, struct op_state **ret)
{
        struct op_state *st = strmap_get(pm->ops, path);

        if (st && st->pending)
                return -EALREADY;
        if (st && backoff_waiting(&st->backoff, mono_usec())) {
                /* Come back once strictly more than the backoff elapsed. */
                schedule_reconcile(pm, st->backoff.delay - (mono_usec() - st->backoff.at) + 1000);
                return -EAGAIN;
        }
        if (!st) {
                st = calloc(1, sizeof(*st));
                if (!st || !(st->path = strdup(path)) || strmap_put(pm->ops, path, st, NULL) < 0) {
                        op_state_free(st);
                        return -ENOMEM;
                }
                st->backoff = BACKOFF_INIT(PLUGIN_BACKOFF_INITIAL_USEC, PLUGIN_BACKOFF_CAP_USEC);
        }
        st->pending = 1;
        *ret = st;
        return 0;
}

/* Admits an op (what: "a registration", "an unregistration") for path: 0
 * when it is now pending; <0 when refused — in flight or in backoff are the
 * expected refusals, silent; anything else is logged. */
static int executor_admit(struct plugin_manager *pm, const char *path, const char *what,
                          struct op_state **ret)
{
        int r = executor_try(pm, path, ret);

        if (r < 0 && r != -EALREADY && r != -EAGAIN)
                log_error("plugin socket \"%s\": cannot start %s: %s", path, what, ERRNO_STR(r));
        return r;
}

static void executor_success(struct plugin_manager *pm, struct op_state *st)
{
        op_state_free(strmap_remove(pm->ops, st->path));
        schedule_reconcile(pm, 0);
}

static void executor_failure(struct plugin_manager *pm, struct op_state *st)
{
        st->pending = 0;
        st->op = NULL;
        schedule_reconcile(pm, backoff_next(&st->backoff, mono_usec()) + 1000);
}

/* ---- registration op ---------------------------------------------------------------- */

/* The gRPC transport, or the test seam's (plugin_manager.h). */
static int call_start(struct plugin_manager *pm, const struct grpc_call_config *cfg, grpc_done_fn fn,
                      void *data, struct grpc_call **ret_call)
{
        if (pm->call)
                return pm->call(pm->call_data, cfg->socket_path, cfg->method, cfg->request,
                                cfg->request_len, cfg->deadline_usec, fn, data, ret_call);
        return grpc_call_start(pm->loop, pm->cl, cfg, fn, data, ret_call);
}

static void call_cancel(struct plugin_manager *pm, struct grpc_call *call)
{
        if (call && pm->cancel)
                pm->cancel(pm->call_data, call);
        else
                grpc_call_cancel(call);
}

static void reg_op_free(struct reg_op *op)
{
        if (!op)
                return;
        call_cancel(op->pm, op->call);
        if (op->info)
                pluginregistration__plugin_info__free_unpacked(op->info, NULL);
        free(op->path);
        free(op->endpoint);
        free(op->fail_text);
        free(op);
}

static void reg_op_fail(struct reg_op *op, const char *text)
{
        struct plugin_manager *pm = op->pm;
        struct op_state *st = op->st;

        log_error("plugin socket \"%s\": registration failed: %s", op->path, text);
        /* FAILED once per (path, generation, text): backoff retries of the
         * same failure do not flood consumers. */
        if (!st->failed_text || st->failed_generation != op->generation || strcmp(st->failed_text, text) != 0) {
                free(st->failed_text);
                st->failed_text = strdup(text);
                st->failed_generation = op->generation;
                publish(pm, "FAILED", op->path, op->info, op->endpoint, text);
        }
        executor_failure(pm, st);
        reg_op_free(op);
}

static void on_notify(void *data, int status, const char *message, const uint8_t *reply, size_t len);

/* The plugin cannot be told it is registered (out of memory starting the
 * call): take the registration back, so the reconciler makes it again
 * after the backoff rather than leave a plugin that never heard. */
static void notify_failed(struct reg_op *op, int registered, const char *text)
{
        if (registered) {
                plugin_handlers_deregister(op->pm->handlers, op->info->type, op->info->name, op->endpoint);
                plugin_asw_remove(op->pm->cache, op->path);
        }
        reg_op_fail(op, text);
}

/* NotifyRegistrationStatus(registered, error).  The op goes on in
 * on_notify. */
static void notify(struct reg_op *op, int registered, const char *error)
{
        Pluginregistration__RegistrationStatus rs = PLUGINREGISTRATION__REGISTRATION_STATUS__INIT;
        struct grpc_call_config cfg = {0};
        uint8_t *bytes;
        size_t n;

        rs.plugin_registered = registered;
        rs.error = (char *)(error ? error : "");
        n = pluginregistration__registration_status__get_packed_size(&rs);
        bytes = malloc(n ? n : 1);
        if (!bytes) {
                notify_failed(op, registered, "out of memory");
                return;
        }
        pluginregistration__registration_status__pack(&rs, bytes);
        op->notify_ok = registered;
        cfg.socket_path = op->path;
        cfg.method = METHOD_NOTIFY;
        cfg.request = bytes;
        cfg.request_len = n;
        cfg.deadline_usec = PLUGIN_NOTIFY_USEC;
        cfg.dial_usec = PLUGIN_NOTIFY_USEC;
        op->call = NULL;
        if (call_start(op->pm, &cfg, on_notify, op, &op->call) < 0) {
                free(bytes);
                notify_failed(op, registered, "cannot start NotifyRegistrationStatus");
                return;
        }
        free(bytes);
}

static void on_notify(void *data, int status, const char *message, const uint8_t *reply, size_t len)
{
        struct reg_op *op = data;
        struct plugin_manager *pm = op->pm;

        op->call = NULL;
        if (!op->notify_ok) {
                /* The plugin was told why; the op fails with that reason. */
                if (status != GRPC_STATUS_OK) {
                        struct buf t = BUF_INIT;

                        buf_printf(&t, "%s (and telling the plugin failed: %s)", op->fail_text, message);
                        reg_op_fail(op, t.len ? t.data : op->fail_text);
                        buf_free(&t);
                } else {
                        reg_op_fail(op, op->fail_text);
                }
                return;
        }
        log_info("plugin socket \"%s\": registered %s \"%s\" (endpoint \"%s\")", op->path, op->info->type,
                 op->info->name, op->endpoint);
        publish(pm, "REGISTERED", op->path, op->info, op->endpoint, NULL);
        if (status != GRPC_STATUS_OK) {
                /* Registered all the same (kubelet quirk Q2); the path
                 * gets a failure record. */
                struct buf t = BUF_INIT;

                buf_printf(&t, "failed to send registration status at socket %s, err: %s", op->path, message);
                log_error("plugin socket \"%s\": %s", op->path, t.len ? t.data : "notify failed");
                executor_failure(pm, op->st);
                buf_free(&t);
                reg_op_free(op);
                return;
        }
        executor_success(pm, op->st);
        reg_op_free(op);
}

/* Fails the op after telling the plugin why (Notify(false, text)). */
static void fail_and_tell(struct reg_op *op, const char *text)
{
        free(op->fail_text);
        op->fail_text = strdup(text);
        if (!op->fail_text) {
                reg_op_fail(op, "out of memory");
                return;
        }
        notify(op, 0, text);
}

static void on_getinfo(void *data, int status, const char *message, const uint8_t *reply, size_t len)
{
        struct reg_op *op = data;
        struct plugin_manager *pm = op->pm;
        struct plugin_asw_entry a;
        struct buf t = BUF_INIT, e = BUF_INIT;
        Pluginregistration__PluginInfo *info;
        int r;

        op->call = NULL;
        if (status != GRPC_STATUS_OK) {
                buf_printf(&t, "failed to get plugin info using RPC GetInfo at socket %s, err: %s", op->path,
                           message);
                reg_op_fail(op, t.len ? t.data : "GetInfo failed");
                goto out;
        }
        info = pluginregistration__plugin_info__unpack(NULL, len, reply);
        if (!info) {
                buf_printf(&t, "GetInfo at socket %s: the reply is not a PluginInfo", op->path);
                reg_op_fail(op, t.len ? t.data : "undecodable GetInfo reply");
                goto out;
        }
        op->info = info;
        op->endpoint = strdup(info->endpoint && info->endpoint[0] ? info->endpoint : op->path);
        if (!op->endpoint) {
                reg_op_fail(op, "out of memory");
                goto out;
        }
        if (!plugin_handlers_has(pm->handlers, info->type)) {
                buf_printf(&t, "RegisterPlugin error -- no handler registered for plugin type: %s at socket %s",
                           info->type, op->path);
                fail_and_tell(op, t.len ? t.data : "no handler");
                goto out;
        }
        if (plugin_handlers_validate(pm->handlers, info->type, info->name, op->endpoint,
                                     info->supported_versions, info->n_supported_versions, &e) < 0) {
                buf_printf(&t, "RegisterPlugin error -- plugin validation failed with err: %s",
                           e.len ? e.data : "invalid");
                fail_and_tell(op, t.len ? t.data : "validation failed");
                goto out;
        }
        /* The ASW entry comes before the handler's register, so a delete
         * arriving meanwhile is handled as an unregister. */
        memset(&a, 0, sizeof(a));
        a.path = op->path;
        a.generation = op->generation;
        a.timestamp = op->timestamp;
        a.type = info->type;
        a.name = info->name;
        a.endpoint = op->endpoint;
        a.versions = info->supported_versions;
        a.n_versions = info->n_supported_versions;
        if (plugin_asw_add(pm->cache, &a) < 0) {
                /* Not recorded, so not registered either: a plugin the
                 * actual state does not hold would never be unregistered.
                 * The op fails and is retried after its backoff. */
                fail_and_tell(op, "RegisterPlugin error -- out of memory recording the plugin");
                goto out;
        }
        buf_reset(&e);
        r = plugin_handlers_register(pm->handlers, info->type, info->name, op->endpoint,
                                     info->supported_versions, info->n_supported_versions, &e);
        if (r == -ENOMEM) {
                /* Not the handler's refusal (which stays recorded, as the
                 * kubelet keeps it): forget the plugin so the reconciler
                 * registers it again after the backoff. */
                plugin_asw_remove(pm->cache, op->path);
                fail_and_tell(op, "RegisterPlugin error -- out of memory registering the plugin");
                goto out;
        }
        if (r < 0) {
                buf_printf(&t, "RegisterPlugin error -- plugin registration failed with err: %s",
                           e.len ? e.data : "refused");
                fail_and_tell(op, t.len ? t.data : "registration failed");
                goto out;
        }
        notify(op, 1, NULL);
out:
        buf_free(&t);
        buf_free(&e);
}

static void submit_register(struct plugin_manager *pm, const struct plugin_dsw_entry *d)
{
        struct grpc_call_config cfg = {0};
        struct op_state *st;
        struct reg_op *op;

        if (executor_admit(pm, d->path, "a registration", &st) < 0)
                return;
        op = calloc(1, sizeof(*op));
        if (!op || !(op->path = strdup(d->path))) {
                free(op);
                st->pending = 0;
                return;
        }
        op->pm = pm;
        op->st = st;
        op->generation = d->generation;
        op->timestamp = d->timestamp;
        st->op = op;
        cfg.socket_path = d->path;
        cfg.method = METHOD_GETINFO;
        cfg.request = NULL; /* InfoRequest is empty */
        cfg.request_len = 0;
        cfg.deadline_usec = PLUGIN_GETINFO_USEC;
        cfg.dial_usec = PLUGIN_DIAL_USEC;
        log_debug("plugin socket \"%s\": registering", d->path);
        if (call_start(pm, &cfg, on_getinfo, op, &op->call) < 0)
                reg_op_fail(op, "cannot start GetInfo");
}

/* Unregistration: forget the plugin first, then tell its handler.  The
 * plugin is not contacted (its socket is usually gone). */
static void submit_unregister(struct plugin_manager *pm, const struct plugin_asw_entry *a)
{
        Pluginregistration__PluginInfo info = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
        struct op_state *st;
        char *path, *type, *name, *endpoint;

        if (executor_admit(pm, a->path, "an unregistration", &st) < 0)
                return;
        path = strdup(a->path);
        type = strdup(a->type);
        name = strdup(a->name);
        endpoint = strdup(a->endpoint);
        info.type = type;
        info.name = name;
        info.supported_versions = a->versions;
        info.n_supported_versions = a->n_versions;
        if (path && type && name && endpoint) {
                /* Publish while the versions still exist, then forget. */
                log_info("plugin socket \"%s\": deregistered %s \"%s\"", path, type, name);
                publish(pm, "DEREGISTERED", path, &info, endpoint, NULL);
                plugin_asw_remove(pm->cache, path);
                plugin_handlers_deregister(pm->handlers, type, name, endpoint);
                executor_success(pm, st);
        } else {
                executor_failure(pm, st);
        }
        free(path);
        free(type);
        free(name);
        free(endpoint);
}

/* ---- reconciler ----------------------------------------------------------------------- */

static void reconcile(struct plugin_manager *pm)
{
        const struct plugin_asw_entry **asw = NULL;
        const struct plugin_dsw_entry **dsw = NULL;
        size_t na = 0, nd = 0;

        /* Unregister what is gone or was re-created ... */
        if (plugin_asw_list(pm->cache, &asw, &na) == 0) {
                for (size_t i = 0; i < na; i++) {
                        const struct plugin_dsw_entry *d = plugin_dsw_get(pm->cache, asw[i]->path);

                        if (!d || d->generation != asw[i]->generation)
                                submit_unregister(pm, asw[i]);
                }
        }
        free(asw);
        /* ... then register what is missing. */
        if (plugin_dsw_list(pm->cache, &dsw, &nd) == 0) {
                for (size_t i = 0; i < nd; i++)
                        if (!plugin_asw_same_generation(pm->cache, dsw[i]))
                                submit_register(pm, dsw[i]);
        }
        free(dsw);
}

static void on_reconcile(struct loop_timer *t, void *data)
{
        struct plugin_manager *pm = data;

        pm->pass_due = 0;
        reconcile(pm);
}

/* The desired state changed: reconcile once the current burst of events
 * is handled. */
static void dsw_changed(struct plugin_manager *pm)
{
        schedule_reconcile(pm, 0);
}

/* ---- watcher ------------------------------------------------------------------------------ */

static void on_dir_event(void *data, const char *path, const char *name, uint32_t mask);

static int is_candidate(const char *full, const char *name)
{
        struct stat st;

        return name[0] != '.' && stat(full, &st) == 0 && S_ISSOCK(st.st_mode);
}


/*
 * Directory watches are filed by path in pm->watches, and each handle's
 * path is its key.  inotify watches inodes, so a name event is where a
 * path stops meaning the directory filed under it.
 */

/* Ends the watch filed under dir and those under dir/ (the directory left
 * that name: moved or deleted).  O(1) unless dir is a watched directory,
 * then O(watches). */
static void forget_dir(struct plugin_manager *pm, const char *dir)
{
        size_t len = strlen(dir), it = 0;
        const char *k;
        void *v;

        v = strmap_remove(pm->watches, dir);
        if (!v)
                return;
        watcher_remove(v);
        while (strmap_next(pm->watches, &it, &k, &v)) {
                if (strncmp(k, dir, len) != 0 || k[len] != '/')
                        continue;
                strmap_remove(pm->watches, k);
                watcher_remove(v);
        }
}

/* Takes ww out of pm->watches, wherever it is filed.  O(watches). */
static void unfile_watch(struct plugin_manager *pm, const struct watcher_watch *ww)
{
        size_t it = 0;
        const char *k;
        void *v;

        while (strmap_next(pm->watches, &it, &k, &v)) {
                if (v == ww) {
                        strmap_remove(pm->watches, k);
                        return;
                }
        }
}

/*
 * Watches dir and files the watch under it.  A directory already watched
 * under another name (renamed while its events were lost) keeps its watch,
 * which follows it here (watcher_add() returns 1); whatever else was filed
 * under dir is another directory, gone from there, and is forgotten.
 */
static int watch_dir(struct plugin_manager *pm, const char *dir)
{
        struct watcher_watch *ww = NULL, *old;
        int r;

        if (!pm->watcher)
                return 0;
        r = watcher_add(pm->watcher, dir, DIR_MASK, on_dir_event, pm, &ww);
        if (r < 0)
                return r;
        old = strmap_get(pm->watches, dir);
        if (old == ww)
                return 0;
        if (r == 1)
                unfile_watch(pm, ww);
        if (old)
                forget_dir(pm, dir);
        if (strmap_put(pm->watches, dir, ww, NULL) < 0) {
                watcher_remove(ww);
                return -ENOMEM;
        }
        return 0;
}

static void on_retry(struct loop_timer *t, void *data);

/* Something on disk could not be taken in (a directory unreadable or
 * unwatchable, memory or descriptors short): the registry is read again
 * in PLUGIN_RETRY_USEC, so no socket is missed for good.  Said once per
 * distinct reason (the first of a walk), not once per retry: a directory
 * that stays unreadable would repeat the line every second; walked() says
 * when it is over. */
static void retry_later(struct plugin_manager *pm, const char *what, const char *path, int r)
{
        char text[PATH_MAX + 256];

        if (loop_timer_armed(pm->retry))
                return;
        loop_timer_arm(pm->retry, PLUGIN_RETRY_USEC);
        (void)snprintf(text, sizeof(text), "%s \"%s\": %s", what, path, ERRNO_STR(r));
        (void)episode_log(&pm->failing, LOG_LEVEL_ERROR, text,
                          "plugin registry: %s; reading the registry again every %llu ms until it works", text,
                          (unsigned long long)(PLUGIN_RETRY_USEC / 1000));
}

/* After a walk of the whole registry: with no retry armed, it took
 * everything in, and a failure logged before is over (one line). */
static void walked(struct plugin_manager *pm)
{
        if (!loop_timer_armed(pm->retry))
                (void)episode_clear(&pm->failing, "plugin registry: \"%s\" read again: every directory is watched",
                                    pm->dir);
}

/* Depth-first, lexical order; symlinked directories are not followed.
 * The directory is watched before it is read, so nothing created during
 * the walk is missed.  refresh: a socket already desired is taken in
 * again (a new generation: registered again, as the kubelet does for a
 * socket it sees created); otherwise only sockets not desired yet are
 * (a retry: what was taken in before stays as it is). */
static void walk(struct plugin_manager *pm, const char *dir, bool refresh)
{
        const char *what = NULL;
        char **names = NULL;
        size_t n = 0;
        int r = watch_dir(pm, dir);

        if (r < 0) {
                retry_later(pm, "cannot watch", dir, r);
                return;
        }
        r = dir_list(dir, DIR_LIST_PATHS, &names, &n, &what);
        if (r < 0) {
                retry_later(pm, what, dir, r);
                return;
        }
        for (size_t i = 0; i < n; i++) {
                const char *full = names[i];
                struct stat st;

                if (lstat(full, &st) < 0) {
                        if (errno != ENOENT) /* gone since the listing: nothing to do */
                                retry_later(pm, "cannot stat", full, -errno);
                } else if (S_ISDIR(st.st_mode)) {
                        walk(pm, full, refresh);
                } else if (!refresh && plugin_dsw_get(pm->cache, full)) {
                        continue;
                } else if (is_candidate(full, strrchr(full, '/') + 1)) {
                        r = plugin_dsw_add_or_update(pm->cache, full, wall_usec());
                        if (r < 0)
                                retry_later(pm, "cannot take in", full, r);
                        else
                                dsw_changed(pm);
                }
        }
        dir_list_free(names, n);
}

/* After lost events: every socket on disk is (re-)observed, and paths no
 * longer there are dropped. */
static void resync(struct plugin_manager *pm)
{
        const struct plugin_dsw_entry **dsw = NULL;
        size_t n = 0;

        if (plugin_dsw_list(pm->cache, &dsw, &n) == 0) {
                for (size_t i = 0; i < n; i++) {
                        struct stat st;

                        if (stat(dsw[i]->path, &st) < 0 || !S_ISSOCK(st.st_mode)) {
                                char *p = strdup(dsw[i]->path);

                                if (p) {
                                        plugin_dsw_remove(pm->cache, p);
                                        dsw_changed(pm);
                                }
                                free(p);
                        }
                }
        }
        free(dsw);
        walk(pm, pm->dir, true);
        walked(pm);
}

static void on_retry(struct loop_timer *t, void *data)
{
        struct plugin_manager *pm = data;

        (void)t;
        walk(pm, pm->dir, false);
        walked(pm);
}

static void on_dir_event(void *data, const char *path, const char *name, uint32_t mask)
{
        struct plugin_manager *pm = data;
        char *full;
        struct stat st;
        int r;

        if (mask & IN_Q_OVERFLOW) {
                log_warn("plugin registry: events were lost: re-reading \"%s\"", pm->dir);
                resync(pm);
                return;
        }
        if (mask & IN_IGNORED) {
                /* The kernel dropped this directory's watch; the watcher
                 * frees the handle after this call. */
                strmap_remove(pm->watches, path);
                return;
        }
        if (!name[0])
                return;
        full = path_join(path, name);
        if (!full) {
                retry_later(pm, "cannot take in an event in", path, -ENOMEM);
                return;
        }
        /* A directory moved or deleted from here is no longer watched
         * under this name (nor its sub-directories), so the name is free
         * for a new directory; one moved within the registry is watched
         * again under its new name by the create it also makes.  A socket
         * moved away stays registered, as in the kubelet. */
        if (mask & (IN_MOVED_FROM | IN_DELETE))
                forget_dir(pm, full);
        if (mask & IN_DELETE) {
                if (plugin_dsw_get(pm->cache, full)) {
                        plugin_dsw_remove(pm->cache, full);
                        dsw_changed(pm);
                }
        } else if (mask & (IN_CREATE | IN_MOVED_TO)) {
                if (stat(full, &st) < 0)
                        log_debug("plugin registry: \"%s\" vanished: %s", full, ERRNO_STR(errno));
                else if (name[0] == '.')
                        ; /* hidden files and directories created later are ignored */
                else if (S_ISDIR(st.st_mode))
                        walk(pm, full, true);
                else if (S_ISSOCK(st.st_mode) && (r = plugin_dsw_add_or_update(pm->cache, full, wall_usec())) < 0)
                        retry_later(pm, "cannot take in", full, r);
                else if (S_ISSOCK(st.st_mode))
                        dsw_changed(pm);
        }
        free(full);
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

static int mkdir_p(const char *path)
{
        char *p = strdup(path);
        int r = 0;

        if (!p)
                return -ENOMEM;
        for (char *s = p + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = '\0';
                if (mkdir(p, 0755) < 0 && errno != EEXIST)
                        r = -errno;
                *s = '/';
                if (r < 0)
                        break;
        }
        if (r == 0 && mkdir(p, 0755) < 0 && errno != EEXIST)
                r = -errno;
        if (r == 0) {
                struct stat st;

                /* EEXIST also covers a file in the way. */
                if (stat(p, &st) < 0)
                        r = -errno;
                else if (!S_ISDIR(st.st_mode))
                        r = -ENOTDIR;
        }
        free(p);
        return r;
}

int plugin_manager_new(struct loop *loop, struct watcher *watcher, struct curl_loop *cl,
                       const struct plugin_manager_config *cfg, struct plugin_manager **ret_pm,
                       struct buf *err)
{
        struct plugin_manager *pm;
        int r = -ENOMEM;

        if (!cfg->dir || !cfg->dir[0])
                return buf_set_err(err, -EINVAL, "the plugin registry directory is empty");
        if (!cfg->call != !cfg->cancel)
                return buf_set_err(err, -EINVAL, "the plugin call hook needs both call and cancel");
        pm = calloc(1, sizeof(*pm));
        if (!pm)
                goto fail;
        pm->loop = loop;
        pm->watcher = watcher;
        pm->cl = cl;
        pm->event = cfg->event;
        pm->event_data = cfg->event_data;
        pm->call = cfg->call;
        pm->cancel = cfg->cancel;
        pm->call_data = cfg->call_data;
        /* Cleaned once, so every socket is named one way (as the file
         * source names manifests). */
        pm->dir = path_clean(cfg->dir);
        if (!pm->dir)
                goto fail;
        pm->ops = strmap_new();
        pm->watches = strmap_new();
        if (!pm->ops || !pm->watches || plugin_cache_new(&pm->cache) < 0 ||
            plugin_handlers_new(&pm->handlers) < 0)
                goto fail;
        if ((r = loop_timer_new(loop, on_reconcile, pm, &pm->timer)) < 0 ||
            (r = loop_timer_new(loop, on_retry, pm, &pm->retry)) < 0)
                goto fail;
        *ret_pm = pm;
        return 0;
fail:
        if (err)
                buf_reset(err); /* only memory runs out here */
        plugin_manager_free(pm);
        return r;
}

int plugin_manager_start(struct plugin_manager *pm, struct buf *err)
{
        int r = mkdir_p(pm->dir);

        if (r < 0)
                return buf_set_err(err, r, "cannot create the plugin registry directory \"%s\": %s", pm->dir,
                                   ERRNO_STR(r));
        walk(pm, pm->dir, true);
        log_info("plugin registry: watching \"%s\"", pm->dir);
        reconcile(pm);
        return 0;
}

static void free_watch(void *v)
{
        watcher_remove(v);
}

void plugin_manager_free(struct plugin_manager *pm)
{
        size_t it = 0;
        void *v;

        if (!pm)
                return;
        if (pm->ops) {
                while (strmap_next(pm->ops, &it, NULL, &v)) {
                        struct op_state *st = v;

                        reg_op_free(st->op);
                }
        }
        strmap_free(pm->ops, op_state_free);
        strmap_free(pm->watches, free_watch);
        loop_timer_free(pm->timer);
        loop_timer_free(pm->retry);
        plugin_cache_free(pm->cache);
        plugin_handlers_free(pm->handlers);
        free(pm->dir);
        episode_free(&pm->failing);
        free(pm);
}
