/*
 * test_faults — the whole static-pod path under injected faults, the way
 * SQLite tests malloc failure.
 *
 * One "world" is what `podmux run` wires for a manifest directory: the
 * file source (with the real watcher), the mux, the merger, the
 * updates pipe and the stream server, with three consumers connected over
 * its unix socket.  A scenario edits two manifests (inotify events; one
 * keeps its pinned UID, so the merger merges the change into the stored
 * pod), adds another and re-lists the directory.  It is run once without faults to
 * learn every pod text a consumer may legitimately see; then, for every N
 * along the path, again with the Nth allocation failing (once, and from N
 * on until released), and with the Nth readdir, opendir, open, read and
 * sendmsg failing.  Each time:
 *   - nothing crashes;
 *   - no consumer ever receives a pod that is not one of the legitimate
 *     texts (a half-built pod would differ), nor a REMOVE or DELETE of a
 *     pod whose file is on disk;
 *   - once faults stop, every consumer converges to the files on disk (a
 *     consumer that was cut reconnects with resume_after, as clients do);
 *   - after teardown no block is left allocated (a leak on an error path).
 *
 * Under AddressSanitizer nothing can be interposed (failalloc.h): the
 * sweeps then run the scenario once, fault-free.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>

#include "failalloc.h"
#include "sources/file_source.h"
#include "util/loop.h"
#include "core/mux.h"
#include "core/storage.h"
#include "stream/stream_server.h"
#include "util/strmap.h"
#include "core/updates_pipe.h"
#include "util/watcher.h"
#include "unit.h"

#define N_CLIENTS 3
#define MAX_VALID 32

/* a.yaml has what normalization rewrites (a number quantity, a plain
 * field at its zero value, an unknown field and its warning), so those
 * allocations are swept too. */
static const char *const manifests[][2] = {
        {"a.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: alpha\n  labels: {app: a}\n"
                   "spec:\n  containers:\n  - name: c\n    image: busybox:1.36\n"
                   "    resources: {limits: {cpu: 100m, memory: 64}}\n    tty: false\n"
                   "  - name: d\n    image: nginx\n    imagePullPolicyy: Never\n"},
        {"b.json", "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"beta\","
                   "\"annotations\":{\"x\":\"1\"}},\"spec\":{\"containers\":[{\"name\":\"c\","
                   "\"image\":\"redis:7\",\"env\":[{\"name\":\"A\",\"value\":\"b\"}]}]}}\n"},
        {"c.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: gamma\n  namespace: kube-system\n"
                   "spec:\n  hostNetwork: true\n  containers:\n  - name: c\n    image: etcd:3.5\n"
                   "    command: [etcd, --data-dir=/var/lib/etcd]\n"},
        /* A pinned UID: an edit keeps it, so the merger merges the
         * change into the stored pod (UPDATE) instead of REMOVE + ADD. */
        {"e.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: epsilon\n  uid: pinned-e\n"
                   "  labels: {tier: x}\nspec:\n  containers:\n  - name: c\n    image: app:1\n"},
};
static const char *const edited_e =
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: epsilon\n  uid: pinned-e\n"
        "  labels: {tier: two}\n  annotations: {note: \"edited \\u00e9\"}\nspec:\n  containers:\n"
        "  - name: c\n    image: app:2\n    env: [{name: K, value: \"1\"}]\n";
/* The edit (an inotify event) and the file added before the relist. */
static const char *const edited_b =
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"beta\","
        "\"annotations\":{\"x\":\"2\"}},\"spec\":{\"containers\":[{\"name\":\"c\","
        "\"image\":\"redis:7.2\",\"env\":[{\"name\":\"A\",\"value\":\"b\"}]}]}}\n";
static const char *const added_d =
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: delta\nspec:\n  containers:\n"
        "  - name: c\n    image: busybox\n    args: [sleep, '3600']\n";

/* ---- a consumer speaking protocol 1 -------------------------------------- */

struct client {
        int fd;
        char *in;
        size_t in_len, in_cap;
        uint64_t last_seq;
        bool have_seq, synced, staged_resumed;
        struct strmap *held;     /* uid -> normalised pod text */
        json_object *staged;     /* messages between hello and synced */
        int reconnects;
};

struct world {
        char dir[64], mdir[96], sock[96];
        enum storage_mode mode;
        struct loop *loop;
        struct watcher *watcher;
        struct mux *mux;
        struct storage *st;
        struct updates_pipe pipe;
        struct stream_server *srv;
        struct file_source *fs;
        struct client cl[N_CLIENTS];
        /* What the checks found. */
        char problem[512];
        /* The legitimate texts (from the fault-free run) and the final state. */
        struct strmap *valid; /* normalised text -> (void *)1 */
        struct strmap *want;  /* uid -> text, NULL while learning */
};

static uint64_t fixed_wall(void)
{
        return 1700000000ULL * 1000000ULL + 123456ULL;
}

static void problem(struct world *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void problem(struct world *w, const char *fmt, ...)
{
        va_list ap;

        if (w->problem[0])
                return; /* the first one is what matters */
        va_start(ap, fmt);
        vsnprintf(w->problem, sizeof(w->problem), fmt, ap);
        va_end(ap);
}

static void client_close(struct client *c)
{
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
        c->in_len = 0;
        c->synced = false;
        json_object_put(c->staged);
        c->staged = NULL;
}

static void client_connect(struct world *w, struct client *c)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        char line[96];
        int n;

        client_close(c);
        c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(c->fd, 0);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", w->sock);
        ck_assert_int_eq(connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        if (c->have_seq)
                n = snprintf(line, sizeof(line), "{\"resume_after\":%" PRIu64 "}\n", c->last_seq);
        else
                n = snprintf(line, sizeof(line), "{}\n");
        /* A refused or failed write shows up as EOF below. */
        (void)!send(c->fd, line, (size_t)n, MSG_NOSIGNAL);
        ck_assert_int_eq(fcntl(c->fd, F_SETFL, O_NONBLOCK), 0);
        c->staged = json_object_new_array();
}

static char *normalise(json_object *pod)
{
        return strdup(json_object_to_json_string_ext(pod, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
}

static const char *uid_of(json_object *pod)
{
        json_object *meta, *uid;

        if (!json_object_object_get_ex(pod, "metadata", &meta) ||
            !json_object_object_get_ex(meta, "uid", &uid))
                return "";
        return json_object_get_string(uid);
}

static void apply_pods(struct world *w, struct client *c, json_object *msg)
{
        json_object *opv, *pods;
        const char *op;
        size_t n;

        if (!json_object_object_get_ex(msg, "op", &opv) ||
            !json_object_object_get_ex(msg, "pods", &pods)) {
                problem(w, "a pods message without op or pods: %s", json_object_to_json_string(msg));
                return;
        }
        op = json_object_get_string(opv);
        n = json_object_array_length(pods);
        if (strcmp(op, "SET") == 0) {
                strmap_free(c->held, free);
                c->held = strmap_new();
        }
        for (size_t i = 0; i < n; i++) {
                json_object *pod = json_object_array_get_idx(pods, i);
                char *text = normalise(pod), *old = NULL;
                const char *uid = uid_of(pod);

                ck_assert_ptr_nonnull(text);
                if (w->want && !strmap_get(w->valid, text)) {
                        if (getenv("FAULTS_VERBOSE")) {
                                size_t it = 0;
                                const char *k;

                                while (strmap_next(w->valid, &it, &k, NULL))
                                        fprintf(stderr, "# valid: %s\n", k);
                        }
                        problem(w, "a consumer got a pod that is not a legitimate text: %s", text);
                }
                if (!w->want)
                        strmap_put(w->valid, text, (void *)1, NULL);
                /* An edit gives a static pod a new UID, so the old one is
                 * removed; a pod of the final state never is. */
                if (w->want && (strcmp(op, "REMOVE") == 0 || strcmp(op, "DELETE") == 0) &&
                    strmap_get(w->want, uid))
                        problem(w, "a consumer got %s of pod %s although its file is still there", op, uid);
                if (strcmp(op, "REMOVE") == 0) {
                        free(strmap_remove(c->held, uid));
                        free(text);
                        continue;
                }
                ck_assert_int_eq(strmap_put(c->held, uid, text, (void **)&old), 0);
                free(old);
        }
}

static void handle_line(struct world *w, struct client *c, const char *line, size_t len)
{
        json_object *msg = json_tokener_parse(line), *v;
        const char *type;

        (void)len;
        if (!msg) {
                problem(w, "a consumer got a line that is not JSON: %.200s", line);
                return;
        }
        type = json_object_object_get_ex(msg, "type", &v) ? json_object_get_string(v) : "";
        if (json_object_object_get_ex(msg, "seq", &v)) {
                c->last_seq = (uint64_t)json_object_get_int64(v);
                c->have_seq = true;
        }
        if (strcmp(type, "error") == 0) {
                json_object_object_get_ex(msg, "reason", &v);
                if (strcmp(json_object_get_string(v), "ResourceExhausted") != 0 &&
                    strcmp(json_object_get_string(v), "SlowConsumer") != 0)
                        problem(w, "unexpected error: %s", line);
                json_object_put(msg);
                client_close(c); /* reconnected by the driver */
                return;
        }
        if (strcmp(type, "synced") == 0) {
                bool resumed = json_object_object_get_ex(msg, "resumed", &v) && json_object_get_boolean(v);

                if (!resumed) {
                        strmap_free(c->held, free);
                        c->held = strmap_new();
                }
                for (size_t i = 0; i < json_object_array_length(c->staged); i++)
                        apply_pods(w, c, json_object_array_get_idx(c->staged, i));
                json_object_put(c->staged);
                c->staged = NULL;
                c->synced = true;
        } else if (strcmp(type, "pods") == 0) {
                if (c->synced)
                        apply_pods(w, c, msg);
                else
                        json_object_array_add(c->staged, json_object_get(msg));
        }
        json_object_put(msg);
}

/* Reads what is there; EOF closes the client (the driver reconnects it). */
static void client_read(struct world *w, struct client *c)
{
        for (;;) {
                ssize_t n;
                char *nl;

                if (c->fd < 0)
                        return;
                if (c->in_cap - c->in_len < 65536) {
                        c->in_cap = c->in_cap ? c->in_cap * 2 : 131072;
                        c->in = realloc(c->in, c->in_cap);
                        ck_assert_ptr_nonnull(c->in);
                }
                n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len - 1, 0);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return;
                if (n <= 0) {
                        client_close(c); /* a partial line is dropped */
                        return;
                }
                c->in_len += (size_t)n;
                c->in[c->in_len] = '\0';
                while (c->fd >= 0 && (nl = memchr(c->in, '\n', c->in_len))) {
                        size_t len = (size_t)(nl - c->in);

                        *nl = '\0';
                        handle_line(w, c, c->in, len);
                        if (c->fd < 0)
                                break;
                        memmove(c->in, nl + 1, c->in_len - len - 1);
                        c->in_len -= len + 1;
                }
        }
}

/* ---- the world ------------------------------------------------------------ */

static void on_emit(void *data, struct pod_update *u)
{
        struct world *w = data;

        updates_pipe_push(&w->pipe, u);
}

/* What run.c's on_merge does. */
static int on_merge(void *data, const char *source, struct pod_update **u)
{
        struct world *w = data;
        int r = storage_apply(w->st, source, *u);
        struct pod_update *out;

        while ((out = updates_pipe_pop(&w->pipe))) {
                (void)stream_server_broadcast(w->srv, out);
                pod_update_free(out);
        }
        return r;
}

static int state_for_consumer(void *data, struct pod_update ***ret, size_t *ret_n)
{
        struct world *w = data;

        return storage_state(w->st, ret, ret_n);
}

static void write_file(struct world *w, const char *name, const char *text)
{
        char tmp[160], path[160];
        FILE *f;

        /* Written aside and renamed into place, as admins should.  The
         * test's own work: no fault. */
        failalloc_pause(true);
        snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", w->mdir, name);
        snprintf(path, sizeof(path), "%s/%s", w->mdir, name);
        f = fopen(tmp, "w");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        ck_assert_int_eq(fclose(f), 0);
        ck_assert_int_eq(rename(tmp, path), 0);
        failalloc_pause(false);
}

static void world_up(struct world *w, enum storage_mode mode)
{
        struct storage_config scfg = {
                .mode = mode, .emit = on_emit, .wall_usec = fixed_wall,
        };
        struct stream_server_config ccfg = {0};
        struct file_source_config fcfg = {0};
        struct mux_channel *ch;
        struct buf err = BUF_INIT;

        w->mode = mode;
        w->problem[0] = '\0';
        /* The same path every time: a static pod's UID hashes its file's
         * path, and every run must produce the same texts. */
        snprintf(w->dir, sizeof(w->dir), "/tmp/podmux-faults-%ld", (long)getpid());
        ck_assert_int_eq(mkdir(w->dir, 0700), 0);
        snprintf(w->mdir, sizeof(w->mdir), "%s/m", w->dir);
        snprintf(w->sock, sizeof(w->sock), "%s/s", w->dir);
        ck_assert_int_eq(mkdir(w->mdir, 0755), 0);
        for (size_t i = 0; i < sizeof(manifests) / sizeof(manifests[0]); i++)
                write_file(w, manifests[i][0], manifests[i][1]);
        updates_pipe_init(&w->pipe);
        scfg.emit_data = w;
        ck_assert_int_eq(loop_new(&w->loop), 0);
        ck_assert_int_eq(watcher_new(w->loop, &w->watcher), 0);
        ck_assert_int_eq(storage_new(&scfg, &w->st), 0);
        ck_assert_int_eq(mux_new(w->loop, on_merge, w, &w->mux), 0);
        ccfg.socket_path = w->sock;
        ccfg.mode_name = storage_mode_to_string(mode);
        ccfg.node_name = "node1";
        ccfg.state_fn = state_for_consumer;
        ccfg.state_data = w;
        ck_assert_int_eq(stream_server_new(w->loop, &ccfg, &w->srv, &err), 0);
        ck_assert_int_eq(mux_channel(w->mux, POD_SOURCE_FILE, &ch), 0);
        fcfg.path = w->mdir;
        fcfg.node_name = "node1";
        fcfg.period_usec = 3600ULL * 1000000; /* relists only when asked */
        fcfg.retry_usec = 1000;               /* retries fast */
        ck_assert_int_eq(file_source_new(w->loop, w->watcher, ch, &fcfg, &w->fs, &err), 0);
        buf_free(&err);
        ck_assert_int_eq(file_source_start(w->fs), 0);
        for (int i = 0; i < N_CLIENTS; i++) {
                w->cl[i].fd = -1;
                w->cl[i].held = strmap_new();
                client_connect(w, &w->cl[i]);
        }
}

static void world_down(struct world *w)
{
        char cmd[128];

        for (int i = 0; i < N_CLIENTS; i++) {
                client_close(&w->cl[i]);
                strmap_free(w->cl[i].held, free);
                free(w->cl[i].in);
                memset(&w->cl[i], 0, sizeof(w->cl[i]));
        }
        file_source_free(w->fs);
        stream_server_free(w->srv);
        watcher_free(w->watcher);
        mux_free(w->mux);
        storage_free(w->st);
        updates_pipe_free(&w->pipe);
        loop_free(w->loop);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", w->dir);
        ck_assert_int_eq(system(cmd), 0);
}

/* Whether client c holds exactly `want` (uid -> text). */
static bool holds(const struct client *c, const struct strmap *want)
{
        size_t it = 0;
        const char *uid;
        void *v;

        if (!c->synced || strmap_size(c->held) != strmap_size(want))
                return false;
        while (strmap_next(want, &it, &uid, &v)) {
                const char *got = strmap_get(c->held, uid);

                if (!got || strcmp(got, v) != 0)
                        return false;
        }
        return true;
}

/* Whether every client holds pods named with all of names (learning run)
 * or exactly want (checked runs). */
static bool all_hold(struct world *w, const struct strmap *want, size_t n_pods)
{
        for (int i = 0; i < N_CLIENTS; i++) {
                const struct client *c = &w->cl[i];

                if (want ? !holds(c, want) : (!c->synced || strmap_size(c->held) != n_pods))
                        return false;
        }
        return true;
}

/* One loop step, then the consumers read (faults paused: that is the
 * test's own work) and closed ones reconnect. */
static void step(struct world *w, int64_t timeout_usec)
{
        loop_run_once(w->loop, timeout_usec);
        failalloc_pause(true);
        for (int i = 0; i < N_CLIENTS; i++) {
                client_read(w, &w->cl[i]);
                if (w->cl[i].fd < 0) {
                        w->cl[i].reconnects++;
                        client_connect(w, &w->cl[i]);
                }
        }
        failalloc_pause(false);
}

/* Runs until cond holds or the time is up; returns whether it held. */
static bool run_until(struct world *w, bool (*cond)(struct world *, void *), void *arg,
                      uint64_t usec)
{
        uint64_t end = mono_usec() + usec;

        while (mono_usec() < end) {
                if (cond(w, arg))
                        return true;
                step(w, 2000);
        }
        return cond(w, arg);
}

static bool cond_count(struct world *w, void *arg)
{
        return all_hold(w, NULL, (size_t)(uintptr_t)arg);
}

/* Every client holds a pod whose text contains the marker. */
static bool cond_marker(struct world *w, void *arg)
{
        for (int i = 0; i < N_CLIENTS; i++) {
                size_t it = 0;
                void *v;
                bool found = false;

                if (!w->cl[i].synced)
                        return false;
                while (!found && strmap_next(w->cl[i].held, &it, NULL, &v))
                        found = strstr(v, arg) != NULL;
                if (!found)
                        return false;
        }
        return true;
}

static bool cond_want(struct world *w, void *arg)
{
        (void)arg;
        return all_hold(w, w->want, 0);
}

/*
 * The scenario after the world is up and synced: the edit (an event), a
 * new file, a relist.  Returns with faults still as armed.  phase_usec
 * bounds each phase when the change cannot get through (persistent
 * faults).
 */
static void scenario(struct world *w, uint64_t phase_usec)
{
        write_file(w, "b.json", edited_b);
        run_until(w, cond_marker, "redis:7.2", phase_usec);
        write_file(w, "e.yaml", edited_e);
        run_until(w, cond_marker, "app:2", phase_usec);
        write_file(w, "d.yaml", added_d);
        file_source_relist(w->fs);
        run_until(w, cond_count, (void *)(uintptr_t)5, phase_usec);
}

/* The fault-free run: learns every legitimate text and the final state. */
static void learn(struct world *w, enum storage_mode mode)
{
        w->valid = strmap_new();
        w->want = NULL;
        world_up(w, mode);
        if (!run_until(w, cond_count, (void *)(uintptr_t)4, 5000000)) {
                for (int i = 0; i < N_CLIENTS; i++)
                        fprintf(stderr, "# client %d: synced %d, %zu pod(s), fd %d, problem %s\n", i,
                                w->cl[i].synced, strmap_size(w->cl[i].held), w->cl[i].fd, w->problem);
                ck_abort_msg("no initial state");
        }
        scenario(w, 5000000);
        ck_assert_msg(all_hold(w, NULL, 5), "the fault-free scenario did not converge");
        ck_assert_msg(!w->problem[0], "fault-free run: %s", w->problem);
        /* The final state, from the first client. */
        {
                struct strmap *want = strmap_new();
                size_t it = 0;
                const char *uid;
                void *v;

                while (strmap_next(w->cl[0].held, &it, &uid, &v))
                        ck_assert_int_eq(strmap_put(want, uid, strdup(v), NULL), 0);
                world_down(w);
                w->want = want;
        }
}

static void forget(struct world *w)
{
        strmap_free(w->valid, NULL);
        strmap_free(w->want, free);
        w->valid = w->want = NULL;
}

struct fault {
        const char *what;
        long n;
        bool persist;
        int call; /* -1: allocation, else enum failsys_call */
        int err;
};

/* One checked run with one fault; returns whether the fault was hit. */
static bool run_with(struct world *w, const struct fault *f)
{
        long live0 = failalloc_live();
        bool hit;

        if (getenv("FAULTS_VERBOSE"))
                fprintf(stderr, "# run %s %ld%s\n", f->what, f->n, f->persist ? " persistent" : "");
        world_up(w, w->mode);
        ck_assert_msg(run_until(w, cond_count, (void *)(uintptr_t)4, 5000000),
                      "%s %ld: no initial state", f->what, f->n);
        if (f->call < 0) {
                failalloc_persist(f->persist);
                failalloc_arm(f->n);
        } else {
                failsys_arm((enum failsys_call)f->call, f->n, f->err);
        }
        scenario(w, f->persist ? 30000 : 2000000);
        hit = f->call < 0 ? failalloc_failed() : failsys_failed((enum failsys_call)f->call);
        failalloc_arm(0);
        for (int c = 0; c < _FAILSYS_MAX; c++)
                failsys_arm((enum failsys_call)c, 0, 0);
        /* Faults are over: the source and the merger retry by
         * themselves (timers); a SIGHUP-like relist is not needed. */
        if (!run_until(w, cond_want, NULL, 5000000)) {
                for (int i = 0; i < N_CLIENTS && getenv("FAULTS_VERBOSE"); i++)
                        fprintf(stderr, "# client %d: synced %d, %zu pod(s), fd %d, reconnects %d\n", i,
                                w->cl[i].synced, strmap_size(w->cl[i].held), w->cl[i].fd, w->cl[i].reconnects);
                problem(w, "consumers did not converge to the files on disk");
        }
        if (w->problem[0]) {
                char text[640];

                snprintf(text, sizeof(text), "%s", w->problem);
                world_down(w);
                ck_abort_msg("%s %ld%s: %s", f->what, f->n, f->persist ? " (persistent)" : "", text);
        }
        world_down(w);
        ck_assert_msg(failalloc_live() == live0, "%s %ld: %ld block(s) leaked", f->what, f->n,
                      failalloc_live() - live0);
        return hit;
}

/* Sweeps N = 1, 2, ... (by stride) until a run no longer reaches the
 * fault; returns how many runs hit it. */
static long sweep(struct world *w, struct fault f, long stride)
{
        long hits = 0;

        for (f.n = getenv("FAULTS_FROM") ? atol(getenv("FAULTS_FROM")) : 1;; f.n += stride) {
                if (!run_with(w, &f))
                        break;
                hits++;
        }
        return hits;
}

/* FAULTS_ONLY=name runs one sweep (debugging). */
static bool skipped(const char *name)
{
        const char *only = getenv("FAULTS_ONLY");

        return only && !strstr(name, only);
}

static void sweep_allocations(enum storage_mode mode, long stride, bool persist)
{
        struct world w;
        struct fault f = {.what = "allocation", .call = -1, .persist = persist};
        long hits;

        memset(&w, 0, sizeof(w));
        learn(&w, mode);
        w.mode = mode;
        if (!failalloc_enabled()) {
                forget(&w);
                return;
        }
        hits = sweep(&w, f, stride);
        forget(&w);
        fprintf(stderr, "# %s: %ld allocation failure(s)%s injected and survived\n",
                storage_mode_to_string(mode), hits, persist ? " (persistent)" : "");
        ck_assert_int_gt(hits, 100);
}

START_TEST(test_alloc_sweep_incremental)
{
        if (skipped("test_alloc_sweep_incremental"))
                return;
        sweep_allocations(STORAGE_MODE_INCREMENTAL, 1, false);
}
END_TEST

START_TEST(test_alloc_sweep_persistent)
{
        if (skipped("test_alloc_sweep_persistent"))
                return;
        sweep_allocations(STORAGE_MODE_INCREMENTAL, 5, true);
}
END_TEST

START_TEST(test_alloc_sweep_snapshot_and_updates)
{
        if (skipped("test_alloc_sweep_snapshot_and_updates"))
                return;
        sweep_allocations(STORAGE_MODE_SNAPSHOT_AND_UPDATES, 5, false);
}
END_TEST

START_TEST(test_alloc_sweep_snapshot)
{
        if (skipped("test_alloc_sweep_snapshot"))
                return;
        sweep_allocations(STORAGE_MODE_SNAPSHOT, 7, false);
}
END_TEST

/* Each system call failing at each of its calls along the path. */
START_TEST(test_syscall_sweep)
{
        if (skipped("test_syscall_sweep"))
                return;
        static const struct {
                const char *what;
                enum failsys_call call;
                int err;
        } cases[] = {
                {"readdir EIO", FAILSYS_READDIR, EIO},
                {"opendir EMFILE", FAILSYS_OPENDIR, EMFILE},
                {"opendir EACCES", FAILSYS_OPENDIR, EACCES},
                {"opendir EIO", FAILSYS_OPENDIR, EIO},
                {"open EMFILE", FAILSYS_OPEN, EMFILE},
                {"open ENFILE", FAILSYS_OPEN, ENFILE},
                {"read EINTR", FAILSYS_READ, EINTR},
                {"read EAGAIN", FAILSYS_READ, EAGAIN},
                {"sendmsg EAGAIN", FAILSYS_SENDMSG, EAGAIN},
                {"sendmsg EINTR", FAILSYS_SENDMSG, EINTR},
                {"sendmsg short", FAILSYS_SENDMSG, 0},
        };
        struct world w;

        memset(&w, 0, sizeof(w));
        learn(&w, STORAGE_MODE_INCREMENTAL);
        w.mode = STORAGE_MODE_INCREMENTAL;
        if (!failalloc_enabled()) {
                forget(&w);
                return;
        }
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct fault f = {.what = cases[i].what, .call = (int)cases[i].call, .err = cases[i].err};
                long hits = sweep(&w, f, 1);

                fprintf(stderr, "# %s: %ld position(s)\n", cases[i].what, hits);
                ck_assert_msg(hits > 0, "%s: the path never reached the call", cases[i].what);
        }
        forget(&w);
}
END_TEST

UNIT_MAIN(test_alloc_sweep_incremental, test_alloc_sweep_persistent, test_alloc_sweep_snapshot_and_updates,
          test_alloc_sweep_snapshot, test_syscall_sweep)
