/*
 * Unit tests: the plugin manager end to end in one process — the real loop,
 * the real inotify watcher on a temporary registry directory with real unix
 * sockets (bound, not listening), the reconciler and the executor — with
 * the gRPC transport replaced by a fake through the manager's call/cancel
 * seam (plugin_manager.h).  The fake answers GetInfo and
 * NotifyRegistrationStatus from a table of fake plugins, from the loop
 * (loop_defer, never inside the call), and records every call.
 *
 * In the spirit of the kubelet's pluginwatcher, reconciler and
 * operationexecutor tests.  Time is only driven by waiting on the loop for
 * what is expected, each wait bounded by a generous limit; no assertion is
 * made on elapsed time.  Backoff is shown by order: a pass the test
 * provokes (a new socket, "poke") inside the backoff window does not retry
 * the path, a later one does.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "failalloc.h"
#include "pluginregistration.pb-c.h"
#include "plugins/plugin_manager.h"
#include "unit.h"

#define METHOD_GETINFO "/pluginregistration.Registration/GetInfo"
#define METHOD_NOTIFY "/pluginregistration.Registration/NotifyRegistrationStatus"

/* Give up waiting after this long (a bound, not an expectation). */
#define WAIT_USEC (30ull * 1000000ull)

#define MAX_PLUGINS 32
#define MAX_CALLS 512
#define MAX_EVENTS 256
#define PATH_SIZE 108 /* sun_path */

struct fake_plugin {
        char socket[PATH_SIZE];
        char type[64];
        char name[320];
        char endpoint[128];
        char versions[4][64];
        size_t n_versions;
        int getinfo_status; /* GRPC_STATUS_OK: reply with the info */
        int notify_status;
        int hold;           /* GetInfo waits for fake_release() */
};

struct call_rec {
        char socket[PATH_SIZE];
        char method[96];
        int notify;
        uint64_t deadline;
        size_t req_len;
        int registered; /* Notify's RegistrationStatus */
        char error[512];
        int answered;   /* done() has returned */
};

struct fake_call {
        struct fixture *fx;
        struct fake_call *next;
        size_t rec;     /* index in calls[] */
        int held;
        grpc_done_fn done;
        void *done_data;
};

struct ev_rec {
        char op[16];
        char socket[PATH_SIZE];
        char type[64];
        char name[320];
        char endpoint[128];
        char versions[256];
        char error[512];
        char json[1024];
};

struct fixture {
        char dir[64];             /* the test's temporary directory */
        char root[128];           /* the registry directory inside it */
        struct loop *loop;
        struct watcher *watcher;
        struct curl_loop *cl;
        struct plugin_manager *pm;
        struct fake_plugin plugins[MAX_PLUGINS];
        size_t n_plugins;
        struct call_rec calls[MAX_CALLS];
        size_t n_calls;
        struct fake_call *live;   /* calls started and not answered/cancelled */
        struct ev_rec evs[MAX_EVENTS];
        size_t n_evs;
        int n_pokes;
        /* Sweep: the Nth allocation of the manager's first answer to a
         * GetInfo (and what it does on, up to the Notify call) fails. */
        long fail_nth;
        bool fail_hit;
};

/* A fixture left behind by a failed test (CK_FORK=no longjmps out of it)
 * is freed by the next setup or at exit, so a failure does not turn into
 * leak reports. */
static struct fixture *leftover;

/* ---- paths and files ------------------------------------------------------ */

/* root/rel in one of a ring of buffers (valid for the next 31 calls). */
static const char *at(struct fixture *fx, const char *rel)
{
        static char ring[32][256];
        static unsigned next;
        char *b = ring[next++ % 32];

        snprintf(b, sizeof(ring[0]), "%s/%s", fx->root, rel);
        return b;
}

/* A path relative to the registry root, for messages. */
static const char *rel_of(const struct fixture *fx, const char *path)
{
        size_t n = strlen(fx->root);

        return strncmp(path, fx->root, n) == 0 && path[n] == '/' ? path + n + 1 : path;
}

static void make_sock_at(const char *path)
{
        struct sockaddr_un sa;
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        ck_assert_int_ge(fd, 0);
        memset(&sa, 0, sizeof(sa));
        sa.sun_family = AF_UNIX;
        ck_assert_msg(strlen(path) < sizeof(sa.sun_path), "socket path too long: %s", path);
        memcpy(sa.sun_path, path, strlen(path) + 1);
        ck_assert_msg(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind %s: %m", path);
        close(fd); /* the socket file stays */
}

static void make_sock(struct fixture *fx, const char *rel)
{
        make_sock_at(at(fx, rel));
}

static void make_dir(struct fixture *fx, const char *rel)
{
        const char *p = at(fx, rel);

        ck_assert_msg(mkdir(p, 0755) == 0, "mkdir %s: %m", p);
}

static void make_file(const char *path)
{
        FILE *f = fopen(path, "w");

        ck_assert_msg(f != NULL, "create %s: %m", path);
        fputs("not a socket\n", f);
        fclose(f);
}

static void remove_path(struct fixture *fx, const char *rel)
{
        const char *p = at(fx, rel);

        ck_assert_msg(unlink(p) == 0, "unlink %s: %m", p);
}

static void move(const char *from, const char *to)
{
        ck_assert_msg(rename(from, to) == 0, "rename %s -> %s: %m", from, to);
}

/* Replaces rel by a fresh socket the way plugins do: bound under a hidden
 * name, renamed over (a create, with no delete in between). */
static void recreate_by_rename(struct fixture *fx, const char *rel)
{
        char tmp[256];
        const char *slash = strrchr(rel, '/');

        snprintf(tmp, sizeof(tmp), "%s/%.*s.tmp-%s", fx->root, slash ? (int)(slash - rel + 1) : 0, rel,
                 slash ? slash + 1 : rel);
        make_sock_at(tmp);
        move(tmp, at(fx, rel));
}

/* ---- the fake plugins ---------------------------------------------------- */

static struct fake_plugin *find_plugin(struct fixture *fx, const char *socket)
{
        for (size_t i = 0; i < fx->n_plugins; i++)
                if (strcmp(fx->plugins[i].socket, socket) == 0)
                        return &fx->plugins[i];
        return NULL;
}

/* versions: comma-separated. */
static struct fake_plugin *add_plugin(struct fixture *fx, const char *rel, const char *type, const char *name,
                                      const char *endpoint, const char *versions)
{
        struct fake_plugin *p;
        const char *v = versions;

        ck_assert_uint_lt(fx->n_plugins, MAX_PLUGINS);
        p = &fx->plugins[fx->n_plugins++];
        memset(p, 0, sizeof(*p));
        snprintf(p->socket, sizeof(p->socket), "%s", at(fx, rel));
        snprintf(p->type, sizeof(p->type), "%s", type);
        snprintf(p->name, sizeof(p->name), "%s", name);
        snprintf(p->endpoint, sizeof(p->endpoint), "%s", endpoint);
        while (v && *v && p->n_versions < 4) {
                size_t n = strcspn(v, ",");

                snprintf(p->versions[p->n_versions++], sizeof(p->versions[0]), "%.*s", (int)n, v);
                v += n;
                if (*v == ',')
                        v++;
        }
        p->getinfo_status = GRPC_STATUS_OK;
        p->notify_status = GRPC_STATUS_OK;
        return p;
}

static struct fake_plugin *device(struct fixture *fx, const char *rel, const char *name)
{
        return add_plugin(fx, rel, "DevicePlugin", name, "", "v1beta1,v1beta2");
}

static void unlink_call(struct fixture *fx, struct fake_call *fc)
{
        for (struct fake_call **pp = &fx->live; *pp; pp = &(*pp)->next) {
                if (*pp == fc) {
                        *pp = fc->next;
                        return;
                }
        }
}

static void fake_answer(void *data)
{
        struct fake_call *fc = data;
        struct fixture *fx = fc->fx;
        struct call_rec *rec = &fx->calls[fc->rec];
        struct fake_plugin *p = find_plugin(fx, rec->socket);
        grpc_done_fn done = fc->done;
        void *done_data = fc->done_data;
        size_t ix = fc->rec;

        unlink_call(fx, fc);
        free(fc);
        if (!p) {
                done(done_data, GRPC_STATUS_UNAVAILABLE, "connection refused", NULL, 0);
        } else if (rec->notify) {
                done(done_data, p->notify_status, p->notify_status ? "notify failed" : "", NULL, 0);
        } else if (p->getinfo_status != GRPC_STATUS_OK) {
                done(done_data, p->getinfo_status, "GetInfo failed", NULL, 0);
        } else {
                Pluginregistration__PluginInfo info = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
                char *v[4];
                uint8_t *bytes;
                size_t n;

                for (size_t i = 0; i < p->n_versions; i++)
                        v[i] = p->versions[i];
                info.type = p->type;
                info.name = p->name;
                info.endpoint = p->endpoint;
                info.supported_versions = v;
                info.n_supported_versions = p->n_versions;
                n = pluginregistration__plugin_info__get_packed_size(&info);
                bytes = malloc(n ? n : 1);
                ck_assert_ptr_nonnull(bytes);
                pluginregistration__plugin_info__pack(&info, bytes);
                if (fx->fail_nth > 0) {
                        failalloc_arm(fx->fail_nth);
                        fx->fail_nth = 0;
                        done(done_data, GRPC_STATUS_OK, "", bytes, n);
                        fx->fail_hit = failalloc_failed();
                        failalloc_arm(0);
                } else {
                        done(done_data, GRPC_STATUS_OK, "", bytes, n);
                }
                free(bytes);
        }
        fx->calls[ix].answered = 1;
}

static int fake_call(void *call_data, const char *socket, const char *method, const uint8_t *req, size_t len,
                     uint64_t deadline_usec, grpc_done_fn done, void *done_data, struct grpc_call **ret)
{
        struct fixture *fx = call_data;
        struct fake_plugin *p = find_plugin(fx, socket);
        struct call_rec *rec;
        struct fake_call *fc;

        /* The fake's own work is never failed (a sweep may be armed). */
        failalloc_hold();
        ck_assert_msg(fx->n_calls < MAX_CALLS, "too many calls");
        ck_assert_ptr_nonnull(ret);
        rec = &fx->calls[fx->n_calls];
        memset(rec, 0, sizeof(*rec));
        snprintf(rec->socket, sizeof(rec->socket), "%s", socket);
        snprintf(rec->method, sizeof(rec->method), "%s", method);
        rec->notify = strcmp(method, METHOD_NOTIFY) == 0;
        rec->deadline = deadline_usec;
        rec->req_len = len;
        if (rec->notify) {
                Pluginregistration__RegistrationStatus *rs =
                        pluginregistration__registration_status__unpack(NULL, len, req);

                ck_assert_msg(rs != NULL, "Notify to %s: undecodable RegistrationStatus (%zu bytes)", socket, len);
                rec->registered = rs->plugin_registered;
                snprintf(rec->error, sizeof(rec->error), "%s", rs->error ? rs->error : "");
                pluginregistration__registration_status__free_unpacked(rs, NULL);
        }
        fc = calloc(1, sizeof(*fc));
        ck_assert_ptr_nonnull(fc);
        fc->fx = fx;
        fc->rec = fx->n_calls++;
        fc->done = done;
        fc->done_data = done_data;
        fc->held = !rec->notify && p && p->hold;
        fc->next = fx->live;
        fx->live = fc;
        if (!fc->held)
                ck_assert_int_eq(loop_defer(fx->loop, fake_answer, fc), 0);
        /* The handle is opaque to the manager: only given back to cancel. */
        *ret = (struct grpc_call *)(void *)fc;
        failalloc_release();
        return 0;
}

static void fake_cancel(void *call_data, struct grpc_call *call)
{
        struct fixture *fx = call_data;
        struct fake_call *fc = (struct fake_call *)(void *)call;

        unlink_call(fx, fc);
        loop_defer_cancel(fx->loop, fake_answer, fc);
        free(fc);
}

/* Answers the held GetInfo calls of p, and the next ones at once. */
static void fake_release(struct fixture *fx, struct fake_plugin *p)
{
        p->hold = 0;
        for (struct fake_call *fc = fx->live; fc; fc = fc->next) {
                if (fc->held && strcmp(fx->calls[fc->rec].socket, p->socket) == 0) {
                        fc->held = 0;
                        ck_assert_int_eq(loop_defer(fx->loop, fake_answer, fc), 0);
                }
        }
}

/* ---- what the manager publishes ------------------------------------------ */

static void on_event(void *data, const struct plugin_event *ev)
{
        struct fixture *fx = data;
        struct ev_rec *r;
        struct buf j = BUF_INIT;

        ck_assert_msg(fx->n_evs < MAX_EVENTS, "too many events");
        r = &fx->evs[fx->n_evs++];
        memset(r, 0, sizeof(*r));
        snprintf(r->op, sizeof(r->op), "%s", ev->op);
        snprintf(r->socket, sizeof(r->socket), "%s", ev->socket);
        snprintf(r->type, sizeof(r->type), "%s", ev->type);
        snprintf(r->name, sizeof(r->name), "%s", ev->name);
        snprintf(r->endpoint, sizeof(r->endpoint), "%s", ev->endpoint);
        for (size_t i = 0; i < ev->n_versions; i++)
                snprintf(r->versions + strlen(r->versions), sizeof(r->versions) - strlen(r->versions), "%s%s",
                         i ? "," : "", ev->versions[i]);
        snprintf(r->error, sizeof(r->error), "%s", ev->error ? ev->error : "");
        ck_assert_int_eq(plugin_event_render(ev, &j), 0);
        snprintf(r->json, sizeof(r->json), "%s", j.data);
        buf_free(&j);
}

static const char *calls_of(struct fixture *fx);
static const char *events_of(struct fixture *fx, const char *rel);

static int count_calls(struct fixture *fx, const char *rel, int notify)
{
        const char *p = at(fx, rel);
        int n = 0;

        for (size_t i = 0; i < fx->n_calls; i++)
                n += strcmp(fx->calls[i].socket, p) == 0 && fx->calls[i].notify == notify;
        return n;
}

static int count_answered(struct fixture *fx, const char *rel, int notify)
{
        const char *p = at(fx, rel);
        int n = 0;

        for (size_t i = 0; i < fx->n_calls; i++)
                n += strcmp(fx->calls[i].socket, p) == 0 && fx->calls[i].notify == notify && fx->calls[i].answered;
        return n;
}

/* The nth (0-based) call of that kind to rel. */
static const struct call_rec *nth_call(struct fixture *fx, const char *rel, int notify, int nth)
{
        const char *p = at(fx, rel);
        int left = nth;

        for (size_t i = 0; i < fx->n_calls; i++)
                if (strcmp(fx->calls[i].socket, p) == 0 && fx->calls[i].notify == notify && left-- == 0)
                        return &fx->calls[i];
        ck_abort_msg("no call #%d (%s) to %s; calls: %s", nth, notify ? "Notify" : "GetInfo", rel, calls_of(fx));
        return NULL;
}

static int count_events(struct fixture *fx, const char *op, const char *rel)
{
        const char *p = at(fx, rel);
        int n = 0;

        for (size_t i = 0; i < fx->n_evs; i++)
                n += strcmp(fx->evs[i].op, op) == 0 && strcmp(fx->evs[i].socket, p) == 0;
        return n;
}

static const struct ev_rec *nth_event(struct fixture *fx, const char *op, const char *rel, int nth)
{
        const char *p = at(fx, rel);
        int left = nth;

        for (size_t i = 0; i < fx->n_evs; i++)
                if (strcmp(fx->evs[i].op, op) == 0 && strcmp(fx->evs[i].socket, p) == 0 && left-- == 0)
                        return &fx->evs[i];
        ck_abort_msg("no %s event #%d for %s; events: %s", op, nth, rel, events_of(fx, NULL));
        return NULL;
}

/* "OP rel; OP rel; ..." of the events for rel (all if NULL). */
static const char *events_of(struct fixture *fx, const char *rel)
{
        static char out[8192];
        const char *p = rel ? at(fx, rel) : NULL;

        out[0] = '\0';
        for (size_t i = 0; i < fx->n_evs; i++) {
                if (p && strcmp(fx->evs[i].socket, p) != 0)
                        continue;
                snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s %s%s%s%s", out[0] ? "; " : "",
                         fx->evs[i].op, rel_of(fx, fx->evs[i].socket), fx->evs[i].error[0] ? " (" : "",
                         fx->evs[i].error, fx->evs[i].error[0] ? ")" : "");
        }
        return out[0] ? out : "(none)";
}

static const char *calls_of(struct fixture *fx)
{
        static char out[8192];

        out[0] = '\0';
        for (size_t i = 0; i < fx->n_calls; i++)
                snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s %s", out[0] ? "; " : "",
                         fx->calls[i].notify ? "Notify" : "GetInfo", rel_of(fx, fx->calls[i].socket));
        return out[0] ? out : "(none)";
}

/* The distinct sockets GetInfo was called for, sorted, "a,b,". */
static const char *getinfo_sockets(struct fixture *fx)
{
        static char out[4096];
        const char *names[MAX_CALLS];
        size_t n = 0;

        for (size_t i = 0; i < fx->n_calls; i++) {
                const char *r = rel_of(fx, fx->calls[i].socket);
                size_t j;

                if (fx->calls[i].notify)
                        continue;
                for (j = 0; j < n && strcmp(names[j], r) != 0; j++)
                        ;
                if (j == n)
                        names[n++] = r;
        }
        for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
                        const char *t = names[j];

                        names[j] = names[j - 1];
                        names[j - 1] = t;
                }
        out[0] = '\0';
        for (size_t i = 0; i < n; i++)
                snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s,", names[i]);
        return out;
}

/* Runs the loop until cond holds; gives up (fails) after WAIT_USEC. */
#define WAIT_UNTIL(fx, cond, ...)                                                   \
        do {                                                                        \
                uint64_t until_ = mono_usec() + WAIT_USEC;                          \
                while (!(cond)) {                                                   \
                        if (mono_usec() > until_)                                   \
                                ck_abort_msg(__VA_ARGS__);                          \
                        loop_run_once((fx)->loop, 100000);                          \
                }                                                                   \
        } while (0)

static void wait_event(struct fixture *fx, const char *op, const char *rel, int n)
{
        WAIT_UNTIL(fx, count_events(fx, op, rel) >= n, "want %d %s for %s; events: %s; calls: %s", n, op, rel,
                   events_of(fx, NULL), calls_of(fx));
}

static void wait_calls(struct fixture *fx, const char *rel, int notify, int n)
{
        WAIT_UNTIL(fx, count_answered(fx, rel, notify) >= n, "want %d answered %s to %s; calls: %s; events: %s", n,
                   notify ? "Notify" : "GetInfo", rel, calls_of(fx), events_of(fx, NULL));
}

static void on_wait_timer(struct loop_timer *t, void *data)
{
        *(int *)data = 1;
}

/* Lets the loop run for at least usec (the manager's timers fire as due). */
static void run_for(struct fixture *fx, uint64_t usec)
{
        struct loop_timer *t = NULL;
        int fired = 0;

        ck_assert_int_eq(loop_timer_new(fx->loop, on_wait_timer, &fired, &t), 0);
        loop_timer_arm(t, usec);
        WAIT_UNTIL(fx, fired, "the test's own timer did not fire");
        loop_timer_free(t);
}

/* Makes the manager run a reconcile pass now: a new, valid plugin socket.
 * Returns once that plugin is registered, i.e. a whole pass has run after
 * everything the test did before. */
static void poke(struct fixture *fx)
{
        char rel[32];

        snprintf(rel, sizeof(rel), "zz-poke-%d.sock", ++fx->n_pokes);
        device(fx, rel, "example.com/poke");
        make_sock(fx, rel);
        wait_event(fx, "REGISTERED", rel, 1);
}

/* ---- set-up ---------------------------------------------------------------- */

static void teardown(struct fixture *fx);

static void free_leftover(void)
{
        if (leftover)
                teardown(leftover);
}

/* The manager is created, not started (tests prepare the directory). */
static struct fixture *setup_root(const char *root_rel)
{
        static int atexit_done;
        struct plugin_manager_config cfg = {0};
        struct buf err = BUF_INIT;
        struct fixture *fx;
        int r;

        if (!atexit_done) {
                atexit(free_leftover);
                atexit_done = 1;
        }
        free_leftover();
        fx = calloc(1, sizeof(*fx));
        ck_assert_ptr_nonnull(fx);
        leftover = fx;
        snprintf(fx->dir, sizeof(fx->dir), "/tmp/podmux-pm-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(fx->dir));
        snprintf(fx->root, sizeof(fx->root), "%s/%s", fx->dir, root_rel);
        ck_assert_int_eq(curl_global_init(CURL_GLOBAL_DEFAULT), CURLE_OK);
        ck_assert_int_eq(loop_new(&fx->loop), 0);
        ck_assert_int_eq(watcher_new(fx->loop, &fx->watcher), 0);
        ck_assert_int_eq(curl_loop_new(fx->loop, &fx->cl), 0);
        cfg.dir = fx->root;
        cfg.event = on_event;
        cfg.event_data = fx;
        cfg.call = fake_call;
        cfg.cancel = fake_cancel;
        cfg.call_data = fx;
        r = plugin_manager_new(fx->loop, fx->watcher, fx->cl, &cfg, &fx->pm, &err);
        ck_assert_msg(r == 0, "plugin_manager_new: %d (%s)", r, err.data);
        buf_free(&err);
        return fx;
}

static struct fixture *setup(void)
{
        struct fixture *fx = setup_root("plugins_registry");

        ck_assert_int_eq(mkdir(fx->root, 0755), 0);
        return fx;
}

static void start(struct fixture *fx)
{
        struct buf err = BUF_INIT;
        int r = plugin_manager_start(fx->pm, &err);

        ck_assert_msg(r == 0, "plugin_manager_start: %d (%s)", r, err.data);
        buf_free(&err);
}

static void teardown(struct fixture *fx)
{
        char cmd[128];
        int live = 0;

        leftover = NULL;
        /* Freeing the manager cancels what it has in flight. */
        plugin_manager_free(fx->pm);
        while (fx->live) {
                struct fake_call *fc = fx->live;

                fx->live = fc->next;
                loop_defer_cancel(fx->loop, fake_answer, fc);
                free(fc);
                live++;
        }
        curl_loop_free(fx->cl);
        watcher_free(fx->watcher);
        loop_free(fx->loop);
        curl_global_cleanup();
        snprintf(cmd, sizeof(cmd), "rm -rf %s", fx->dir);
        ck_assert_int_eq(system(cmd), 0);
        free(fx);
        ck_assert_msg(live == 0, "%d call(s) neither answered nor cancelled after plugin_manager_free", live);
}

/* ---- manager set-up --------------------------------------------------------- */

START_TEST(test_seam_needs_call_and_cancel)
{
        struct plugin_manager_config cfg = {.dir = "/tmp/x", .call = fake_call};
        struct plugin_manager *pm = NULL;
        struct buf err = BUF_INIT;
        struct loop *loop = NULL;

        ck_assert_int_eq(loop_new(&loop), 0);
        ck_assert_int_eq(plugin_manager_new(loop, NULL, NULL, &cfg, &pm, &err), -EINVAL);
        ck_assert_ptr_null(pm);
        ck_assert_msg(err.len, "no reason given");
        buf_free(&err);
        cfg.dir = "";
        cfg.call = NULL;
        ck_assert_int_eq(plugin_manager_new(loop, NULL, NULL, &cfg, &pm, &err), -EINVAL);
        buf_free(&err);
        loop_free(loop);
}
END_TEST

START_TEST(test_start_creates_missing_root)
{
        struct fixture *fx = setup_root("var/lib/kubelet/plugins_registry");
        struct stat st;

        start(fx);
        ck_assert_msg(stat(fx->root, &st) == 0, "root not created: %m");
        ck_assert_msg(S_ISDIR(st.st_mode), "root is not a directory: mode %o", st.st_mode);
        /* ... and watched. */
        device(fx, "a.sock", "vendor.example/a");
        make_sock(fx, "a.sock");
        wait_event(fx, "REGISTERED", "a.sock", 1);
        teardown(fx);
}
END_TEST

START_TEST(test_start_fails_when_root_cannot_be_created)
{
        struct fixture *fx = setup_root("file/plugins_registry");
        struct buf err = BUF_INIT;
        char parent[192];
        int r;

        snprintf(parent, sizeof(parent), "%s/file", fx->dir);
        make_file(parent);
        r = plugin_manager_start(fx->pm, &err);
        ck_assert_msg(r < 0, "start with a regular file as the root's parent: %d", r);
        ck_assert_msg(strstr(err.data, fx->root), "error does not name the directory: \"%s\"",
                      err.data);
        buf_free(&err);
        teardown(fx);
}
END_TEST

/* MkdirAll on a path that exists as a file fails (ENOTDIR), so the kubelet
 * does not start the watcher (doc/plugin-manager.md section 2). */
START_TEST(test_start_fails_when_root_is_a_file)
{
        struct fixture *fx = setup_root("plugins_registry");
        struct buf err = BUF_INIT;
        int r;

        make_file(fx->root);
        r = plugin_manager_start(fx->pm, &err);
        buf_free(&err);
        teardown(fx);
        ck_assert_msg(r < 0, "start with a regular file as the root: want -ENOTDIR, got %d", r);
}
END_TEST

/* ---- the start-up walk ---------------------------------------------------- */

START_TEST(test_start_walk_finds_sockets_at_any_depth)
{
        struct fixture *fx = setup();
        char outside[192], target[256];

        /* Plugin sockets: in the root, one level down, three levels down,
         * no extension, and a symlink to a socket (stat follows it). */
        make_dir(fx, "sub");
        make_dir(fx, "sub/deeper");
        make_dir(fx, "sub/deeper/deepest");
        make_sock(fx, "a.sock");
        make_sock(fx, "sub/b-reg.sock");
        make_sock(fx, "sub/deeper/deepest/c");
        device(fx, "a.sock", "vendor.example/a");
        device(fx, "sub/b-reg.sock", "vendor.example/b");
        device(fx, "sub/deeper/deepest/c", "vendor.example/c");
        snprintf(outside, sizeof(outside), "%s/outside", fx->dir);
        ck_assert_int_eq(mkdir(outside, 0755), 0);
        snprintf(target, sizeof(target), "%s/d.sock", outside);
        make_sock_at(target);
        ck_assert_int_eq(symlink(target, at(fx, "link.sock")), 0);
        device(fx, "link.sock", "vendor.example/link");
        /* Not plugins: hidden names, a regular file, a FIFO, a dangling
         * symlink, and a symlinked directory (not followed). */
        make_sock(fx, ".hidden.sock");
        make_sock(fx, "sub/.tmp-b.sock");
        make_file(at(fx, "plain.sock"));
        ck_assert_int_eq(mkfifo(at(fx, "fifo"), 0644), 0);
        ck_assert_int_eq(symlink(at(fx, "nowhere.sock"), at(fx, "dangling.sock")), 0);
        ck_assert_int_eq(symlink(outside, at(fx, "linkdir")), 0);
        device(fx, "linkdir/d.sock", "vendor.example/d");

        start(fx);
        /* The first pass runs inside start, on what the walk found. */
        ck_assert_str_eq(getinfo_sockets(fx), "a.sock,link.sock,sub/b-reg.sock,sub/deeper/deepest/c,");
        wait_event(fx, "REGISTERED", "a.sock", 1);
        wait_event(fx, "REGISTERED", "sub/b-reg.sock", 1);
        wait_event(fx, "REGISTERED", "sub/deeper/deepest/c", 1);
        wait_event(fx, "REGISTERED", "link.sock", 1);
        ck_assert_str_eq(nth_event(fx, "REGISTERED", "sub/deeper/deepest/c", 0)->endpoint,
                         at(fx, "sub/deeper/deepest/c"));
        /* The symlinked directory is not watched either. */
        snprintf(target, sizeof(target), "%s/e.sock", outside);
        make_sock_at(target);
        device(fx, "linkdir/e.sock", "vendor.example/e");
        poke(fx);
        ck_assert_str_eq(getinfo_sockets(fx),
                         "a.sock,link.sock,sub/b-reg.sock,sub/deeper/deepest/c,zz-poke-1.sock,");
        ck_assert_msg(fx->n_evs == 5, "events: %s", events_of(fx, NULL));
        teardown(fx);
}
END_TEST

/* A directory that cannot be read (out of descriptors here) does not lose
 * its sockets: the registry is read again a moment later, and what was
 * taken in already is not registered a second time. */
START_TEST(test_walk_retried_after_a_listing_error)
{
        struct fixture *fx = setup();

        make_dir(fx, "sub");
        make_sock(fx, "a.sock");
        make_sock(fx, "sub/b.sock");
        device(fx, "a.sock", "vendor.example/a");
        device(fx, "sub/b.sock", "vendor.example/b");
        if (failalloc_enabled())
                failsys_arm(FAILSYS_OPENDIR, 2, EMFILE); /* the root's is the first */
        start(fx);
        if (failalloc_enabled()) {
                ck_assert(failsys_failed(FAILSYS_OPENDIR));
                failsys_arm(FAILSYS_OPENDIR, 0, 0);
                ck_assert_str_eq(getinfo_sockets(fx), "a.sock,");
        }
        wait_event(fx, "REGISTERED", "a.sock", 1);
        wait_event(fx, "REGISTERED", "sub/b.sock", 1);
        run_for(fx, 200000);
        ck_assert_msg(count_events(fx, "REGISTERED", "a.sock") == 1 && fx->n_evs == 2, "events: %s",
                      events_of(fx, NULL));
        teardown(fx);
}
END_TEST

/* Every allocation the manager makes on a GetInfo answer (decoding it,
 * recording the plugin, the handler, the Notify call) fails in turn: the
 * registration fails and is tried again after its backoff, and the plugin
 * ends registered exactly once, told so once. */
START_TEST(test_registration_out_of_memory_sweep)
{
        if (!failalloc_enabled())
                return;
        for (long n = 1;; n++) {
                struct fixture *fx = setup();
                bool hit;

                make_sock(fx, "a.sock");
                device(fx, "a.sock", "vendor.example/a");
                fx->fail_nth = n;
                start(fx);
                wait_event(fx, "REGISTERED", "a.sock", 1);
                run_for(fx, 100000);
                hit = fx->fail_hit;
                ck_assert_msg(count_events(fx, "REGISTERED", "a.sock") == 1 &&
                                      count_events(fx, "DEREGISTERED", "a.sock") == 0,
                              "allocation %ld failed: events %s", n, events_of(fx, NULL));
                ck_assert_msg(count_answered(fx, "a.sock", 1) >= 1 &&
                                      nth_call(fx, "a.sock", 1, count_calls(fx, "a.sock", 1) - 1)->registered,
                              "allocation %ld failed: the plugin was not told it is registered: %s", n,
                              calls_of(fx));
                teardown(fx);
                if (!hit)
                        break;
        }
}
END_TEST

START_TEST(test_start_walk_empty_root_does_nothing)
{
        struct fixture *fx = setup();

        start(fx);
        ck_assert_uint_eq(fx->n_calls, 0);
        run_for(fx, 100000);
        ck_assert_uint_eq(fx->n_calls, 0);
        ck_assert_uint_eq(fx->n_evs, 0);
        teardown(fx);
}
END_TEST

/* ---- events ----------------------------------------------------------------- */

START_TEST(test_event_socket_created_and_deleted)
{
        struct fixture *fx = setup();

        start(fx);
        device(fx, "x.sock", "vendor.example/x");
        make_sock(fx, "x.sock");
        wait_event(fx, "REGISTERED", "x.sock", 1);
        remove_path(fx, "x.sock");
        wait_event(fx, "DEREGISTERED", "x.sock", 1);
        ck_assert_str_eq(events_of(fx, "x.sock"), "REGISTERED x.sock; DEREGISTERED x.sock");
        teardown(fx);
}
END_TEST

/* A socket bound under a hidden name and renamed in (IN_MOVED_TO) is a
 * create; the hidden name never is. */
START_TEST(test_event_rename_into_place)
{
        struct fixture *fx = setup();

        start(fx);
        device(fx, "r.sock", "vendor.example/r");
        device(fx, ".tmp-r.sock", "vendor.example/hidden");
        make_sock(fx, ".tmp-r.sock");
        move(at(fx, ".tmp-r.sock"), at(fx, "r.sock"));
        wait_event(fx, "REGISTERED", "r.sock", 1);
        ck_assert_int_eq(count_calls(fx, ".tmp-r.sock", 0), 0);
        teardown(fx);
}
END_TEST

START_TEST(test_event_directory_created_after_start)
{
        struct fixture *fx = setup();
        char pre[192], pre_sock[256];

        start(fx);
        /* A directory and a socket in it right away (maybe before the
         * watch exists: the walk of the new directory finds it). */
        device(fx, "newdir/n.sock", "vendor.example/n");
        make_dir(fx, "newdir");
        make_sock(fx, "newdir/n.sock");
        wait_event(fx, "REGISTERED", "newdir/n.sock", 1);
        /* The new directory is watched, at any depth. */
        device(fx, "newdir/sub2/m.sock", "vendor.example/m");
        make_dir(fx, "newdir/sub2");
        make_sock(fx, "newdir/sub2/m.sock");
        wait_event(fx, "REGISTERED", "newdir/sub2/m.sock", 1);
        /* A directory that already holds a socket, moved in: certainly
         * created before any watch. */
        snprintf(pre, sizeof(pre), "%s/prepared", fx->dir);
        ck_assert_int_eq(mkdir(pre, 0755), 0);
        snprintf(pre_sock, sizeof(pre_sock), "%s/pre.sock", pre);
        make_sock_at(pre_sock);
        device(fx, "moved/pre.sock", "vendor.example/pre");
        move(pre, at(fx, "moved"));
        wait_event(fx, "REGISTERED", "moved/pre.sock", 1);
        teardown(fx);
}
END_TEST

START_TEST(test_event_hidden_directory_and_non_sockets_ignored)
{
        struct fixture *fx = setup();
        char pre[192], pre_sock[256];

        start(fx);
        /* A hidden directory created after start is neither watched nor
         * walked: not for a socket made in it afterwards, nor for one it
         * already held when moved in. */
        device(fx, ".hdir/h.sock", "vendor.example/h");
        make_dir(fx, ".hdir");
        make_sock(fx, ".hdir/h.sock");
        snprintf(pre, sizeof(pre), "%s/prepared", fx->dir);
        ck_assert_int_eq(mkdir(pre, 0755), 0);
        snprintf(pre_sock, sizeof(pre_sock), "%s/h2.sock", pre);
        make_sock_at(pre_sock);
        device(fx, ".hmoved/h2.sock", "vendor.example/h2");
        move(pre, at(fx, ".hmoved"));
        /* Nor are hidden sockets, regular files or FIFOs. */
        device(fx, ".h3.sock", "vendor.example/h3");
        make_sock(fx, ".h3.sock");
        make_file(at(fx, "plain.sock"));
        ck_assert_int_eq(mkfifo(at(fx, "fifo.sock"), 0644), 0);
        poke(fx);
        ck_assert_str_eq(getinfo_sockets(fx), "zz-poke-1.sock,");
        /* Later sockets in the hidden directory are not seen either. */
        device(fx, ".hdir/later.sock", "vendor.example/later");
        make_sock(fx, ".hdir/later.sock");
        poke(fx);
        ck_assert_str_eq(getinfo_sockets(fx), "zz-poke-1.sock,zz-poke-2.sock,");
        teardown(fx);
}
END_TEST

/* Deleting a directory tree unregisters each socket in it. */
START_TEST(test_event_directory_tree_deleted)
{
        struct fixture *fx = setup();
        char cmd[256];

        make_dir(fx, "tree");
        make_dir(fx, "tree/deep");
        make_sock(fx, "tree/t1.sock");
        make_sock(fx, "tree/deep/t2.sock");
        make_sock(fx, "keep.sock");
        device(fx, "tree/t1.sock", "vendor.example/t1");
        device(fx, "tree/deep/t2.sock", "vendor.example/t2");
        device(fx, "keep.sock", "vendor.example/keep");
        start(fx);
        wait_event(fx, "REGISTERED", "tree/t1.sock", 1);
        wait_event(fx, "REGISTERED", "tree/deep/t2.sock", 1);
        wait_event(fx, "REGISTERED", "keep.sock", 1);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", at(fx, "tree"));
        ck_assert_int_eq(system(cmd), 0);
        wait_event(fx, "DEREGISTERED", "tree/t1.sock", 1);
        wait_event(fx, "DEREGISTERED", "tree/deep/t2.sock", 1);
        ck_assert_int_eq(count_events(fx, "DEREGISTERED", "keep.sock"), 0);
        /* The tree comes back with a socket in it: found by the walk of
         * the created directory. */
        make_dir(fx, "tree");
        make_sock(fx, "tree/t1.sock");
        wait_event(fx, "REGISTERED", "tree/t1.sock", 2);
        teardown(fx);
}
END_TEST

/* A directory deleted, then created again under the same name, is
 * watched again: sockets created in it later are found (doc/plugin-manager.md 5:
 * a created directory gets a watch and a walk). */
START_TEST(test_event_directory_recreated_is_watched_again)
{
        struct fixture *fx = setup();
        char cmd[256];

        make_dir(fx, "d");
        make_sock(fx, "d/s1.sock");
        device(fx, "d/s1.sock", "vendor.example/s1");
        device(fx, "d/s2.sock", "vendor.example/s2");
        start(fx);
        wait_event(fx, "REGISTERED", "d/s1.sock", 1);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", at(fx, "d"));
        ck_assert_int_eq(system(cmd), 0);
        wait_event(fx, "DEREGISTERED", "d/s1.sock", 1);
        /* The same name again; its creation is handled (the poke's pass
         * comes after it) ... */
        make_dir(fx, "d");
        poke(fx);
        /* ... so a socket made in it now is seen by the next pass. */
        make_sock(fx, "d/s2.sock");
        poke(fx);
        ck_assert_msg(count_calls(fx, "d/s2.sock", 0) == 1,
                      "socket in a re-created directory not seen: calls: %s; events: %s", calls_of(fx),
                      events_of(fx, NULL));
        teardown(fx);
}
END_TEST

/* mv a b inside the registry (the kubelet's plugin watcher sees a create
 * of b and walks it): the moved tree registers under its new name and is
 * watched there at any depth; the old name is free for a new directory,
 * which is watched too; sockets renamed away stay registered, as in the
 * kubelet.
 * Freeing the manager afterwards ends every watch once. */
START_TEST(test_event_directory_renamed)
{
        struct fixture *fx = setup();

        make_dir(fx, "a");
        make_dir(fx, "a/sub");
        make_sock(fx, "a/p.sock");
        make_sock(fx, "a/sub/q.sock");
        device(fx, "a/p.sock", "vendor.example/p");
        device(fx, "a/sub/q.sock", "vendor.example/q");
        device(fx, "b/p.sock", "vendor.example/p");
        device(fx, "b/sub/q.sock", "vendor.example/q");
        device(fx, "b/later.sock", "vendor.example/later");
        device(fx, "b/sub/later2.sock", "vendor.example/later2");
        device(fx, "a/new.sock", "vendor.example/new");
        device(fx, "a/sub/new2.sock", "vendor.example/new2");
        start(fx);
        wait_event(fx, "REGISTERED", "a/p.sock", 1);
        wait_event(fx, "REGISTERED", "a/sub/q.sock", 1);
        move(at(fx, "a"), at(fx, "b"));
        wait_event(fx, "REGISTERED", "b/p.sock", 1);
        wait_event(fx, "REGISTERED", "b/sub/q.sock", 1);
        make_sock(fx, "b/later.sock");
        make_sock(fx, "b/sub/later2.sock");
        wait_event(fx, "REGISTERED", "b/later.sock", 1);
        wait_event(fx, "REGISTERED", "b/sub/later2.sock", 1);
        /* The old name again, empty when its creation is handled (the
         * poke's pass comes after it), so only a watch can see what
         * follows. */
        make_dir(fx, "a");
        poke(fx);
        make_sock(fx, "a/new.sock");
        wait_event(fx, "REGISTERED", "a/new.sock", 1);
        make_dir(fx, "a/sub");
        poke(fx);
        make_sock(fx, "a/sub/new2.sock");
        wait_event(fx, "REGISTERED", "a/sub/new2.sock", 1);
        ck_assert_msg(count_events(fx, "DEREGISTERED", "a/p.sock") == 0 &&
                              count_events(fx, "DEREGISTERED", "a/sub/q.sock") == 0,
                      "sockets renamed away were deregistered: %s", events_of(fx, NULL));
        ck_assert_int_eq(count_calls(fx, "b/p.sock", 0), 1);
        ck_assert_int_eq(count_calls(fx, "b/later.sock", 0), 1);
        teardown(fx);
}
END_TEST

/* A directory moved out of the registry is no longer watched (what is
 * made in it is not a plugin here), its name is free, and moved back in
 * under another name it is walked and watched again. */
START_TEST(test_event_directory_moved_out_and_back)
{
        struct fixture *fx = setup();
        char out[192], out_sock[256];

        make_dir(fx, "a");
        device(fx, "a/x.sock", "vendor.example/x");
        device(fx, "a/y.sock", "vendor.example/y");
        device(fx, "c/x.sock", "vendor.example/x");
        device(fx, "c/z.sock", "vendor.example/z");
        start(fx);
        snprintf(out, sizeof(out), "%s/out", fx->dir);
        move(at(fx, "a"), out);
        snprintf(out_sock, sizeof(out_sock), "%s/x.sock", out);
        make_sock_at(out_sock);
        make_dir(fx, "a");
        poke(fx);
        make_sock(fx, "a/y.sock");
        wait_event(fx, "REGISTERED", "a/y.sock", 1);
        ck_assert_msg(count_calls(fx, "a/x.sock", 0) == 0, "a socket outside the registry was registered: %s",
                      calls_of(fx));
        move(out, at(fx, "c"));
        wait_event(fx, "REGISTERED", "c/x.sock", 1);
        make_sock(fx, "c/z.sock");
        wait_event(fx, "REGISTERED", "c/z.sock", 1);
        teardown(fx);
}
END_TEST

/* mv a b where b is an empty directory: b's old watch dies with it, and
 * the moved directory is watched under b. */
START_TEST(test_event_directory_renamed_over_an_empty_one)
{
        struct fixture *fx = setup();

        make_dir(fx, "a");
        make_dir(fx, "b");
        device(fx, "b/s.sock", "vendor.example/s");
        start(fx);
        move(at(fx, "a"), at(fx, "b"));
        poke(fx);
        make_sock(fx, "b/s.sock");
        wait_event(fx, "REGISTERED", "b/s.sock", 1);
        teardown(fx);
}
END_TEST

/* The rename is lost with far more events than the watcher can hold: the
 * manager re-reads the registry, finds the directory under its new name
 * (inotify's watch of it is the one it had), and files that watch there;
 * the old name is free for a new directory. */
START_TEST(test_rename_lost_with_other_events)
{
        enum { FLOOD = 80000 };
        struct fixture *fx = setup();
        char p[256];

        make_dir(fx, "a");
        make_dir(fx, "flood");
        make_sock(fx, "a/p.sock");
        device(fx, "a/p.sock", "vendor.example/p");
        device(fx, "b/p.sock", "vendor.example/p");
        device(fx, "b/c.sock", "vendor.example/c");
        device(fx, "a/d.sock", "vendor.example/d");
        start(fx);
        wait_event(fx, "REGISTERED", "a/p.sock", 1);
        /* The loop does not run: the watcher's pipe (1 MiB at most) fills
         * up long before the last of these, and the rename after them is
         * dropped with the rest (the subscribers are told to re-read). */
        for (int i = 0; i < FLOOD; i++) {
                FILE *f;

                snprintf(p, sizeof(p), "%s/f%05d", at(fx, "flood"), i);
                f = fopen(p, "w");
                ck_assert_msg(f != NULL, "create %s: %m", p);
                fclose(f);
        }
        move(at(fx, "a"), at(fx, "b"));
        wait_event(fx, "REGISTERED", "b/p.sock", 1);
        make_sock(fx, "b/c.sock");
        wait_event(fx, "REGISTERED", "b/c.sock", 1);
        make_dir(fx, "a");
        poke(fx);
        make_sock(fx, "a/d.sock");
        wait_event(fx, "REGISTERED", "a/d.sock", 1);
        teardown(fx);
}
END_TEST

/* TestPluginRegistrationSameName: one name, many sockets, all registered. */
START_TEST(test_same_name_on_many_sockets)
{
        struct fixture *fx = setup();
        char rel[32];

        start(fx);
        for (int i = 0; i < 6; i++) {
                snprintf(rel, sizeof(rel), "plugin-%d.sock", i);
                device(fx, rel, "vendor.example/same");
                make_sock(fx, rel);
        }
        for (int i = 0; i < 6; i++) {
                snprintf(rel, sizeof(rel), "plugin-%d.sock", i);
                wait_event(fx, "REGISTERED", rel, 1);
                ck_assert_str_eq(nth_event(fx, "REGISTERED", rel, 0)->name, "vendor.example/same");
        }
        teardown(fx);
}
END_TEST

/* ---- registration ops -------------------------------------------------------- */

START_TEST(test_register_flow)
{
        struct fixture *fx = setup();
        const struct call_rec *c;
        const struct ev_rec *e;
        char json[1024];

        device(fx, "gpu.sock", "vendor.example/gpu");
        add_plugin(fx, "dra.sock", "DRAPlugin", "gpu.example.com", "/run/dra/gpu.sock", "v1.DRAPlugin");
        make_sock(fx, "gpu.sock");
        make_sock(fx, "dra.sock");
        start(fx);
        wait_event(fx, "REGISTERED", "gpu.sock", 1);
        wait_event(fx, "REGISTERED", "dra.sock", 1);
        /* GetInfo (empty request, 1 s) then Notify(true, "") (5 s), on the
         * plugin's socket, nothing else. */
        ck_assert_int_eq(count_calls(fx, "gpu.sock", 0), 1);
        ck_assert_int_eq(count_calls(fx, "gpu.sock", 1), 1);
        c = nth_call(fx, "gpu.sock", 0, 0);
        ck_assert_str_eq(c->method, METHOD_GETINFO);
        ck_assert_uint_eq(c->req_len, 0);
        ck_assert_uint_eq(c->deadline, PLUGIN_GETINFO_USEC);
        c = nth_call(fx, "gpu.sock", 1, 0);
        ck_assert_str_eq(c->method, METHOD_NOTIFY);
        ck_assert_int_eq(c->registered, 1);
        ck_assert_str_eq(c->error, "");
        ck_assert_uint_eq(c->req_len, 2); /* 08 01 */
        ck_assert_uint_eq(c->deadline, PLUGIN_NOTIFY_USEC);
        ck_assert_uint_lt(nth_call(fx, "gpu.sock", 0, 0) - fx->calls, c - fx->calls);
        /* The event: the endpoint defaulted to the socket. */
        e = nth_event(fx, "REGISTERED", "gpu.sock", 0);
        ck_assert_str_eq(e->type, "DevicePlugin");
        ck_assert_str_eq(e->name, "vendor.example/gpu");
        ck_assert_str_eq(e->endpoint, at(fx, "gpu.sock"));
        ck_assert_str_eq(e->versions, "v1beta1,v1beta2");
        ck_assert_str_eq(e->error, "");
        snprintf(json, sizeof(json),
                 "{\"type\":\"DevicePlugin\",\"name\":\"vendor.example/gpu\",\"endpoint\":\"%s\","
                 "\"versions\":[\"v1beta1\",\"v1beta2\"],\"socket\":\"%s\"}",
                 at(fx, "gpu.sock"), at(fx, "gpu.sock"));
        ck_assert_str_eq(e->json, json);
        /* An endpoint given by the plugin is kept. */
        e = nth_event(fx, "REGISTERED", "dra.sock", 0);
        ck_assert_str_eq(e->type, "DRAPlugin");
        ck_assert_str_eq(e->endpoint, "/run/dra/gpu.sock");
        ck_assert_str_eq(e->versions, "v1.DRAPlugin");
        /* Registered: nothing more happens. */
        poke(fx);
        ck_assert_int_eq(count_calls(fx, "gpu.sock", 0), 1);
        ck_assert_int_eq(count_events(fx, "REGISTERED", "gpu.sock"), 1);
        ck_assert_uint_eq(fx->n_evs, 3);
        teardown(fx);
}
END_TEST

START_TEST(test_unknown_type_fails_once_per_generation_and_text)
{
        struct fixture *fx = setup();
        struct fake_plugin *p = add_plugin(fx, "foo.sock", "FooPlugin", "vendor.example/foo", "", "v1");
        char want[512];
        const struct ev_rec *e;

        make_sock(fx, "foo.sock");
        snprintf(want, sizeof(want),
                 "RegisterPlugin error -- no handler registered for plugin type: FooPlugin at socket %s",
                 at(fx, "foo.sock"));
        start(fx);
        /* Attempt 1: the plugin is told why; FAILED. */
        wait_calls(fx, "foo.sock", 1, 1);
        ck_assert_int_eq(nth_call(fx, "foo.sock", 1, 0)->registered, 0);
        ck_assert_str_eq(nth_call(fx, "foo.sock", 1, 0)->error, want);
        ck_assert_int_eq(count_events(fx, "FAILED", "foo.sock"), 1);
        e = nth_event(fx, "FAILED", "foo.sock", 0);
        ck_assert_str_eq(e->error, want);
        ck_assert_str_eq(e->type, "FooPlugin");
        /* Attempt 2, after the backoff: told again, no second FAILED. */
        wait_calls(fx, "foo.sock", 1, 2);
        ck_assert_int_eq(nth_call(fx, "foo.sock", 1, 1)->registered, 0);
        ck_assert_str_eq(nth_call(fx, "foo.sock", 1, 1)->error, want);
        ck_assert_msg(count_events(fx, "FAILED", "foo.sock") == 1, "events: %s", events_of(fx, "foo.sock"));
        /* The socket is re-created (new generation): the same failure is
         * published again. */
        remove_path(fx, "foo.sock");
        make_sock(fx, "foo.sock");
        wait_calls(fx, "foo.sock", 1, 3);
        ck_assert_msg(count_events(fx, "FAILED", "foo.sock") == 2, "events: %s", events_of(fx, "foo.sock"));
        ck_assert_str_eq(nth_event(fx, "FAILED", "foo.sock", 1)->error, want);
        /* Another failure text for the same generation: published. */
        snprintf(p->type, sizeof(p->type), "BarPlugin");
        wait_calls(fx, "foo.sock", 1, 4);
        ck_assert_msg(count_events(fx, "FAILED", "foo.sock") == 3, "events: %s", events_of(fx, "foo.sock"));
        ck_assert_msg(strstr(nth_event(fx, "FAILED", "foo.sock", 2)->error, "plugin type: BarPlugin at socket"),
                      "FAILED: %s", nth_event(fx, "FAILED", "foo.sock", 2)->error);
        ck_assert_int_eq(count_events(fx, "REGISTERED", "foo.sock"), 0);
        ck_assert_int_eq(count_events(fx, "DEREGISTERED", "foo.sock"), 0);
        teardown(fx);
}
END_TEST

START_TEST(test_validation_failure_is_told_and_retried)
{
        struct fixture *fx = setup();
        struct fake_plugin *p = device(fx, "gpu.sock", "gpu"); /* not domain-qualified */
        const char *prefix = "RegisterPlugin error -- plugin validation failed with err: ";
        const struct call_rec *c;

        make_sock(fx, "gpu.sock");
        start(fx);
        wait_calls(fx, "gpu.sock", 1, 1);
        c = nth_call(fx, "gpu.sock", 1, 0);
        ck_assert_int_eq(c->registered, 0);
        ck_assert_msg(strncmp(c->error, prefix, strlen(prefix)) == 0 && strstr(c->error, "gpu"),
                      "Notify error: \"%s\"", c->error);
        ck_assert_int_eq(count_events(fx, "FAILED", "gpu.sock"), 1);
        ck_assert_str_eq(nth_event(fx, "FAILED", "gpu.sock", 0)->error, c->error);
        /* Retried after the backoff: the plugin is fixed meanwhile. */
        snprintf(p->name, sizeof(p->name), "vendor.example/gpu");
        wait_event(fx, "REGISTERED", "gpu.sock", 1);
        ck_assert_int_eq(count_calls(fx, "gpu.sock", 0), 2);
        ck_assert_int_eq(nth_call(fx, "gpu.sock", 1, 1)->registered, 1);
        ck_assert_str_eq(nth_event(fx, "REGISTERED", "gpu.sock", 0)->name, "vendor.example/gpu");
        teardown(fx);
}
END_TEST

/* GetInfo failing: the plugin is told nothing; FAILED. */
START_TEST(test_getinfo_failure_tells_nothing)
{
        struct fixture *fx = setup();
        struct fake_plugin *p = device(fx, "g.sock", "vendor.example/g");

        p->getinfo_status = GRPC_STATUS_DEADLINE_EXCEEDED;
        make_sock(fx, "g.sock");
        make_sock(fx, "stale.sock"); /* nobody answers: UNAVAILABLE */
        start(fx);
        wait_event(fx, "FAILED", "g.sock", 1);
        wait_event(fx, "FAILED", "stale.sock", 1);
        ck_assert_int_eq(count_calls(fx, "g.sock", 1), 0);
        ck_assert_int_eq(count_calls(fx, "stale.sock", 1), 0);
        ck_assert_msg(strstr(nth_event(fx, "FAILED", "stale.sock", 0)->error, at(fx, "stale.sock")),
                      "FAILED does not name the socket: %s", nth_event(fx, "FAILED", "stale.sock", 0)->error);
        /* The plugin recovers: registered on a retry. */
        p->getinfo_status = GRPC_STATUS_OK;
        wait_event(fx, "REGISTERED", "g.sock", 1);
        teardown(fx);
}
END_TEST

/* Quirk Q1: the handler's register fails (a DRA driver's endpoint already
 * registered by another socket): the plugin is told, the op fails, but the
 * ASW entry stays — not retried, and deregistered when the socket goes. */
START_TEST(test_register_failure_keeps_asw_entry)
{
        struct fixture *fx = setup();
        const char *prefix = "RegisterPlugin error -- plugin registration failed with err: ";
        const struct call_rec *c;
        const struct ev_rec *e;

        add_plugin(fx, "d1.sock", "DRAPlugin", "gpu.example.com", "/run/dra/gpu.sock", "v1.DRAPlugin");
        add_plugin(fx, "d2.sock", "DRAPlugin", "gpu.example.com", "/run/dra/gpu.sock", "v1.DRAPlugin");
        make_sock(fx, "d1.sock");
        start(fx);
        wait_event(fx, "REGISTERED", "d1.sock", 1);
        make_sock(fx, "d2.sock");
        wait_event(fx, "FAILED", "d2.sock", 1);
        wait_calls(fx, "d2.sock", 1, 1);
        c = nth_call(fx, "d2.sock", 1, 0);
        ck_assert_int_eq(c->registered, 0);
        ck_assert_msg(strncmp(c->error, prefix, strlen(prefix)) == 0, "Notify error: \"%s\"", c->error);
        ck_assert_str_eq(nth_event(fx, "FAILED", "d2.sock", 0)->error, c->error);
        /* Well past the 0.5 s backoff, a pass: no retry (the ASW holds the
         * path with its generation). */
        run_for(fx, 1200000);
        poke(fx);
        ck_assert_msg(count_calls(fx, "d2.sock", 0) == 1, "retried: calls: %s", calls_of(fx));
        ck_assert_int_eq(count_events(fx, "REGISTERED", "d2.sock"), 0);
        /* The socket goes: DEREGISTERED with what was recorded, and the
         * plugin is not contacted. */
        remove_path(fx, "d2.sock");
        wait_event(fx, "DEREGISTERED", "d2.sock", 1);
        e = nth_event(fx, "DEREGISTERED", "d2.sock", 0);
        ck_assert_str_eq(e->type, "DRAPlugin");
        ck_assert_str_eq(e->name, "gpu.example.com");
        ck_assert_str_eq(e->endpoint, "/run/dra/gpu.sock");
        ck_assert_int_eq(count_calls(fx, "d2.sock", 0), 1);
        ck_assert_int_eq(count_calls(fx, "d2.sock", 1), 1);
        teardown(fx);
}
END_TEST

/* Quirk Q2: Notify(true) fails: registered all the same, not retried. */
START_TEST(test_notify_true_failure_stays_registered)
{
        struct fixture *fx = setup();
        struct fake_plugin *p = device(fx, "n.sock", "vendor.example/n");

        p->notify_status = GRPC_STATUS_UNAVAILABLE;
        make_sock(fx, "n.sock");
        start(fx);
        wait_event(fx, "REGISTERED", "n.sock", 1);
        run_for(fx, 1200000);
        poke(fx);
        ck_assert_msg(count_calls(fx, "n.sock", 0) == 1, "retried: calls: %s", calls_of(fx));
        remove_path(fx, "n.sock");
        wait_event(fx, "DEREGISTERED", "n.sock", 1);
        ck_assert_str_eq(events_of(fx, "n.sock"), "REGISTERED n.sock; DEREGISTERED n.sock");
        teardown(fx);
}
END_TEST

START_TEST(test_recreated_socket_deregisters_then_registers)
{
        struct fixture *fx = setup();

        device(fx, "p.sock", "vendor.example/p");
        make_sock(fx, "p.sock");
        start(fx);
        wait_event(fx, "REGISTERED", "p.sock", 1);
        /* Deleted and created again. */
        remove_path(fx, "p.sock");
        make_sock(fx, "p.sock");
        wait_event(fx, "REGISTERED", "p.sock", 2);
        ck_assert_str_eq(events_of(fx, "p.sock"), "REGISTERED p.sock; DEREGISTERED p.sock; REGISTERED p.sock");
        /* Replaced by a rename (no delete: only the generation changes). */
        recreate_by_rename(fx, "p.sock");
        wait_event(fx, "REGISTERED", "p.sock", 3);
        ck_assert_str_eq(events_of(fx, "p.sock"),
                         "REGISTERED p.sock; DEREGISTERED p.sock; REGISTERED p.sock; DEREGISTERED p.sock; "
                         "REGISTERED p.sock");
        ck_assert_int_eq(count_calls(fx, "p.sock", 0), 3);
        ck_assert_int_eq(count_calls(fx, "p.sock", 1), 3);
        teardown(fx);
}
END_TEST

START_TEST(test_removal_deregisters_without_calling_plugin)
{
        struct fixture *fx = setup();
        const struct ev_rec *e;
        size_t calls;

        add_plugin(fx, "csi.sock", "CSIPlugin", "csi.example.com", "/var/lib/kubelet/plugins/csi/csi.sock",
                   "1.0.0,1.2.0");
        make_sock(fx, "csi.sock");
        start(fx);
        wait_event(fx, "REGISTERED", "csi.sock", 1);
        calls = fx->n_calls;
        remove_path(fx, "csi.sock");
        wait_event(fx, "DEREGISTERED", "csi.sock", 1);
        e = nth_event(fx, "DEREGISTERED", "csi.sock", 0);
        ck_assert_str_eq(e->type, "CSIPlugin");
        ck_assert_str_eq(e->name, "csi.example.com");
        ck_assert_str_eq(e->endpoint, "/var/lib/kubelet/plugins/csi/csi.sock");
        ck_assert_str_eq(e->versions, "1.0.0,1.2.0");
        ck_assert_msg(fx->n_calls == calls, "the plugin was called on removal: %s", calls_of(fx));
        /* The CSI handler forgot the driver: the same version registers
         * again from a new socket. */
        add_plugin(fx, "csi2.sock", "CSIPlugin", "csi.example.com", "", "1.2.0");
        make_sock(fx, "csi2.sock");
        wait_event(fx, "REGISTERED", "csi2.sock", 1);
        teardown(fx);
}
END_TEST

/* The socket goes while its registration is in flight: the op ends (the
 * plugin counts as registered meanwhile), then it is unregistered. */
START_TEST(test_delete_while_registering)
{
        struct fixture *fx = setup();
        struct fake_plugin *p = device(fx, "w.sock", "vendor.example/w");

        p->hold = 1;
        make_sock(fx, "w.sock");
        start(fx);
        ck_assert_int_eq(count_calls(fx, "w.sock", 0), 1);
        remove_path(fx, "w.sock");
        poke(fx);
        ck_assert_str_eq(events_of(fx, "w.sock"), "(none)");
        fake_release(fx, p);
        wait_event(fx, "DEREGISTERED", "w.sock", 1);
        ck_assert_str_eq(events_of(fx, "w.sock"), "REGISTERED w.sock; DEREGISTERED w.sock");
        ck_assert_int_eq(count_calls(fx, "w.sock", 0), 1);
        teardown(fx);
}
END_TEST

/* ---- executor --------------------------------------------------------------------- */

/* One op per path: a GetInfo that does not answer blocks its path only.
 * Passes meanwhile (another socket, the same socket re-created) do not
 * start a second op for it; once it answers, the newer generation is
 * handled (deregistered, registered again). */
START_TEST(test_hung_getinfo_blocks_only_its_path)
{
        struct fixture *fx = setup();
        struct fake_plugin *h = device(fx, "h.sock", "vendor.example/h");

        h->hold = 1;
        device(fx, "g.sock", "vendor.example/g");
        make_sock(fx, "h.sock");
        make_sock(fx, "g.sock");
        start(fx);
        wait_event(fx, "REGISTERED", "g.sock", 1);
        ck_assert_int_eq(count_calls(fx, "h.sock", 0), 1);
        recreate_by_rename(fx, "h.sock");
        poke(fx);
        poke(fx);
        ck_assert_msg(count_calls(fx, "h.sock", 0) == 1, "second op for a path in flight: %s", calls_of(fx));
        ck_assert_str_eq(events_of(fx, "h.sock"), "(none)");
        fake_release(fx, h);
        wait_event(fx, "REGISTERED", "h.sock", 2);
        ck_assert_str_eq(events_of(fx, "h.sock"), "REGISTERED h.sock; DEREGISTERED h.sock; REGISTERED h.sock");
        ck_assert_int_eq(count_calls(fx, "h.sock", 0), 2);
        teardown(fx);
}
END_TEST

/* A call still in flight when the manager is freed is cancelled. */
START_TEST(test_free_cancels_calls_in_flight)
{
        struct fixture *fx = setup();

        device(fx, "h.sock", "vendor.example/h")->hold = 1;
        make_sock(fx, "h.sock");
        start(fx);
        ck_assert_int_eq(count_calls(fx, "h.sock", 0), 1);
        ck_assert_ptr_nonnull(fx->live);
        teardown(fx); /* fails if the call was not cancelled */
}
END_TEST

/*
 * Backoff after consecutive failures: 0.5 s, 1 s, 2 s ...  Shown by order,
 * never by measuring: after failure k the test waits (on the loop) longer
 * than backoff k-1, then provokes a pass — the path must still be refused;
 * later, with no help, it is admitted.
 */
START_TEST(test_backoff_doubles)
{
        struct fixture *fx = setup();

        make_sock(fx, "a-stale.sock"); /* nobody answers */
        start(fx);
        /* Failure 1 (backoff 0.5 s): a pass right away does not retry. */
        wait_calls(fx, "a-stale.sock", 0, 1);
        poke(fx);
        ck_assert_msg(count_calls(fx, "a-stale.sock", 0) == 1, "retried within the backoff: %s", calls_of(fx));
        /* Admitted once the backoff is over. */
        wait_calls(fx, "a-stale.sock", 0, 2);
        /* Failure 2 (backoff 1 s): 0.6 s later, still refused. */
        run_for(fx, 600000);
        poke(fx);
        ck_assert_msg(count_calls(fx, "a-stale.sock", 0) == 2, "backoff after failure 2 is not above 0.5 s: %s",
                      calls_of(fx));
        wait_calls(fx, "a-stale.sock", 0, 3);
        /* Failure 3 (backoff 2 s): 1.2 s later, still refused — even
         * though the socket is re-created meanwhile (a new generation does
         * not reset the backoff). */
        run_for(fx, 1200000);
        recreate_by_rename(fx, "a-stale.sock");
        poke(fx);
        ck_assert_msg(count_calls(fx, "a-stale.sock", 0) == 3,
                      "backoff after failure 3 is not above 1 s, or reset by re-creation: %s", calls_of(fx));
        wait_calls(fx, "a-stale.sock", 0, 4);
        /* The same failure text every time: one FAILED per generation. */
        ck_assert_msg(count_events(fx, "FAILED", "a-stale.sock") == 2, "events: %s",
                      events_of(fx, "a-stale.sock"));
        teardown(fx);
}
END_TEST

/* Quirk Q7: the backoff record of a path is shared by register and
 * unregister: a socket removed right after its registration failed is
 * deregistered only once that backoff is over. */
START_TEST(test_backoff_shared_by_register_and_unregister)
{
        struct fixture *fx = setup();

        add_plugin(fx, "d1.sock", "DRAPlugin", "gpu.example.com", "/run/dra/gpu.sock", "v1.DRAPlugin");
        add_plugin(fx, "d2.sock", "DRAPlugin", "gpu.example.com", "/run/dra/gpu.sock", "v1.DRAPlugin");
        make_sock(fx, "d1.sock");
        start(fx);
        wait_event(fx, "REGISTERED", "d1.sock", 1);
        make_sock(fx, "d2.sock");
        wait_event(fx, "FAILED", "d2.sock", 1); /* Q1: in the ASW, with a failure record */
        remove_path(fx, "d2.sock");
        poke(fx);
        ck_assert_msg(count_events(fx, "DEREGISTERED", "d2.sock") == 0,
                      "unregistered within the registration's backoff: %s", events_of(fx, NULL));
        wait_event(fx, "DEREGISTERED", "d2.sock", 1);
        ck_assert_int_eq(count_calls(fx, "d2.sock", 0), 1);
        teardown(fx);
}
END_TEST

UNIT_MAIN(test_registration_out_of_memory_sweep, test_walk_retried_after_a_listing_error, test_seam_needs_call_and_cancel, test_start_creates_missing_root,
          test_start_fails_when_root_cannot_be_created, test_start_fails_when_root_is_a_file,
          test_start_walk_finds_sockets_at_any_depth, test_start_walk_empty_root_does_nothing,
          test_event_socket_created_and_deleted, test_event_rename_into_place,
          test_event_directory_created_after_start, test_event_hidden_directory_and_non_sockets_ignored,
          test_event_directory_tree_deleted, test_event_directory_recreated_is_watched_again,
          test_event_directory_renamed, test_event_directory_moved_out_and_back,
          test_event_directory_renamed_over_an_empty_one, test_rename_lost_with_other_events,
          test_same_name_on_many_sockets, test_register_flow,
          test_unknown_type_fails_once_per_generation_and_text, test_validation_failure_is_told_and_retried,
          test_getinfo_failure_tells_nothing, test_register_failure_keeps_asw_entry,
          test_notify_true_failure_stays_registered, test_recreated_socket_deregisters_then_registers,
          test_removal_deregisters_without_calling_plugin, test_delete_while_registering,
          test_hung_getinfo_blocks_only_its_path,
          test_free_cancels_calls_in_flight, test_backoff_doubles, test_backoff_shared_by_register_and_unregister)
