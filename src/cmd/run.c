/*
 * `podmux run` — wires the sources, the Mux, the merger, the updates pipe
 * and the stream server onto one event loop (doc/design.md "Data flow").
 *
 * Signals are taken through a signalfd on the loop, blocked in every thread
 * (the checkpoint writer inherits the mask), so shutdown runs as an ordinary
 * loop callback: consumers are told, the socket is removed, exit 0.
 *
 * Descriptors: the soft limit is raised to the hard one at start, and
 * --max-consumers is lowered to what the limit leaves after RUN_FD_MARGIN
 * (README.md "Operating notes").
 *
 * Under a service manager (systemd's Type=notify: $NOTIFY_SOCKET set),
 * READY=1 is sent once the stream socket accepts, STATUS= as the sources
 * become ready, WATCHDOG=1 from a loop timer when $WATCHDOG_USEC asks, and
 * STOPPING=1 on the way out (doc/design.md "Service manager").
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "sources/api_source.h"
#include "cmd/cmd.h"
#include "cmd/usage.h"
#include "util/curl_loop.h"
#include "util/duration.h"
#include "events/event_recorder.h"
#include "core/file_record.h"
#include "sources/file_source.h"
#include "sources/http_source.h"
#include "kube/kube_client.h"
#include "kube/review.h"
#include "kube/kubeconfig.h"
#include "util/log.h"
#include "util/loop.h"
#include "util/mem.h"
#include "util/proto_words.h"
#include "metrics/metrics.h"
#include "metrics/metrics_server.h"
#include "core/mux.h"
#include "cmd/options.h"
#include "plugins/plugin_manager.h"
#include "util/sd_notify.h"
#include "util/str.h"
#include "core/storage.h"
#include "stream/files_msg.h"
#include "stream/stream_server.h"
#include "kubeapi/kube_api_server.h"
#include "kubeapi/kube_tls.h"
#include "core/updates_pipe.h"
#include "util/watcher.h"

/*
 * Descriptors kept for everything but consumers (one each) when
 * --max-consumers is fitted to the descriptor limit:
 *   standard streams 3, epoll 1, timerfd 1, signalfd 1;
 *   the stream socket, its lock file, the spare descriptor: 3;
 *   the service manager's notify socket: 1;
 *   the watcher: inotify 1, its pipe 2, its wake-up file 1;
 *   a relist: the directory and one file: 2;
 *   libcurl: its wake-up pair, the manifest URL, the API server's list
 *   and watch, each with a resolver pair: about 9;
 *   the metrics endpoint: its socket and lock file, libmicrohttpd's
 *   epoll and wake-up pair, 16 connections: 21;
 * about 47 in all; the rest is for plugin calls and what we missed.
 * Under twice this limit, half of the limit is kept instead.
 */
#define RUN_FD_MARGIN 128

/* Records a status message carries at most (its "files" member): those
 * not applied first, then the applied ones, each in path order; the
 * counts cover them all, and a files request (podmux status --files)
 * gets every one. */
#define RUN_STATUS_FILES_MAX 200

struct daemon {
        struct options opts;
        struct loop *loop;
        struct watcher *watcher;
        struct mux *mux;
        struct storage *storage;
        struct updates_pipe updates;
        struct stream_server *stream;
        struct file_source *file;
        struct curl_loop *curl;
        struct http_source *http;
        struct kube_client *kube; /* the API server's client, with the API source */
        struct api_source *api;
        struct event_recorder *events; /* --events with the API source; else NULL */
        struct plugin_manager *plugins;
        struct metrics metrics;
        struct metrics_server *metrics_srv;
        struct kube_api_server *kube_api; /* --kube-api-socket; else NULL */
        struct review *review;            /* tokens and Webhook on --kube-api-address, with d->kube */
        int sigfd;
        struct loop_io *sig_io;
        bool ready_sent;
        struct sd_notify notify;     /* the service manager; off without one */
        int notify_err;              /* the last send's error, logged once */
        struct loop_timer *watchdog; /* WATCHDOG=1 every watchdog_every */
        uint64_t watchdog_every;     /* half of $WATCHDOG_USEC */
        unsigned sources_told;       /* bit i: STATUS has said mux source i is ready */
        bool api_provisional;        /* consumers were told api serves its checkpoint */
        /* The checkpoint the API source said it serves (on_api_state). */
        uint64_t api_ckpt_time;
        char *api_ckpt_rv;
};

/* ---- the service manager (doc/design.md "Service manager") ---------------- */

/* Sends msg when a service manager listens; a failure is logged once per
 * reason, and once when sending works again. */
static void notify(struct daemon *d, const char *msg)
{
        int r = sd_notify_send(&d->notify, msg);

        if (r < 0 && r != d->notify_err)
                log_warn("service manager: cannot send to NOTIFY_SOCKET: %s", ERRNO_STR(r));
        else if (r == 0 && d->notify_err < 0)
                log_info("service manager: sending to NOTIFY_SOCKET again");
        d->notify_err = r;
}

/* Appends to out, which stays a string when full (the status is cut). */
static void status_add(char *out, size_t size, const char *s)
{
        size_t len = strlen(out);

        if (len + 1 < size)
                (void)snprintf(out + len, size - len, "%s", s);
}

/* Sends head (READY=1, or nothing) with a STATUS= line: the socket, and
 * which sources have delivered their first state (bits of ready). */
static void notify_status(struct daemon *d, const char *head, unsigned ready)
{
        char msg[512];
        size_t n;
        const char *const *names = mux_sources(d->mux, &n);
        const char *sep = "";

        (void)snprintf(msg, sizeof(msg), "%sSTATUS=serving %s; ", head, d->opts.socket_path);
        if (n == 0)
                status_add(msg, sizeof(msg), "no pod source configured");
        else if (ready == (1u << n) - 1)
                status_add(msg, sizeof(msg), "all sources ready:");
        else
                status_add(msg, sizeof(msg), ready ? "sources ready:" : "waiting for sources:");
        for (size_t i = 0; i < n; i++) {
                if (!ready || (ready >> i & 1)) {
                        status_add(msg, sizeof(msg), " ");
                        status_add(msg, sizeof(msg), names[i]);
                }
        }
        for (size_t i = 0; ready && i < n; i++) {
                if (!(ready >> i & 1)) {
                        status_add(msg, sizeof(msg), *sep ? ", " : "; waiting for: ");
                        status_add(msg, sizeof(msg), names[i]);
                        sep = ",";
                }
        }
        notify(d, msg);
}

/* A STATUS= line each time more sources have delivered (after a merge). */
static void notify_sources(struct daemon *d)
{
        size_t n;
        const char *const *names;
        unsigned ready = 0;

        if (!sd_notify_on(&d->notify))
                return;
        names = mux_sources(d->mux, &n);
        for (size_t i = 0; i < n && i < 8 * sizeof(ready); i++)
                if (storage_seen_all(d->storage, &names[i], 1))
                        ready |= 1u << i;
        if (ready != d->sources_told) {
                d->sources_told = ready;
                notify_status(d, "", ready);
        }
}

/* Fed from the loop: a loop that stalls stops feeding it, and the
 * manager restarts the daemon (WatchdogSec= in scripts/podmux.service.in). */
static void on_watchdog(struct loop_timer *t, void *data)
{
        struct daemon *d = data;

        notify(d, "WATCHDOG=1");
        loop_timer_arm(t, d->watchdog_every);
}

/* The notify socket and the watchdog from the environment systemd gives
 * a Type=notify service.  A bad value is logged and ignored: the daemon
 * serves either way.  0, or -ENOMEM for the watchdog's timer. */
static int notify_setup(struct daemon *d)
{
        const char *addr = getenv("NOTIFY_SOCKET");
        const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
        uint64_t period;
        int r = sd_notify_open(&d->notify, addr);

        if (r < 0)
                log_warn("NOTIFY_SOCKET \"%s\": %s: the service manager is not told of readiness", addr,
                         r == -EINVAL ? "not an absolute path or an @abstract name" : ERRNO_STR(r));
        if (r <= 0)
                return 0;
        r = sd_notify_watchdog(usec, pid, getpid(), &period);
        if (r < 0)
                log_warn("WATCHDOG_USEC \"%s\" or WATCHDOG_PID \"%s\" is not a positive number: no watchdog pings",
                         usec, pid ? pid : "");
        if (r <= 0)
                return 0;
        d->watchdog_every = period / 2 ? period / 2 : 1;
        log_debug("service manager: watchdog pings every %" PRIu64 " us", d->watchdog_every);
        return loop_timer_new(d->loop, on_watchdog, d, &d->watchdog);
}

/* The merger's output goes into the updates pipe ... */
static void on_emit(void *data, struct pod_update *u)
{
        struct daemon *d = data;

        if (log_enabled(LOG_LEVEL_DEBUG))
                log_debug("merge: %s from source \"%s\": %zu pod(s)",
                          pod_op_to_string(u->op), u->source, u->n_pods);
        updates_pipe_push(&d->updates, u);
}

/* ---- Kubernetes Events (doc/events.md) ------------------------------------- */

/* The reason of the Node's event for a static pod or a manifest URL that
 * is refused (the kubelet has no such event). */
#define EVENT_REASON_REJECTED "StaticPodRejected"

/* Writing events fails (one line per kind of failure), or works again. */
static void events_report(void *data, const char *problem, uint64_t lost)
{
        (void)data;
        if (problem)
                log_warn("events: %s", problem);
        else
                log_info("events: the API server accepts events again (%" PRIu64 " dropped meanwhile)", lost);
}

/* A Warning about obj, when events are on.  A drop is counted in the
 * metrics, not logged (the log line that came with the event is). */
static void events_warn(struct daemon *d, const struct event_ref *obj, const char *reason, const char *message)
{
        int r;

        if (!d->events)
                return;
        r = event_recorder_record(d->events, obj, "Warning", reason, message);
        if (r < 0 && r != -ENOBUFS)
                log_debug("events: cannot record %s: %s", reason, ERRNO_STR(r));
}

/* A static pod manifest or the manifest URL refused (once per distinct
 * reason, as the source logs it): a Warning on the Node, naming where and
 * why, so that `kubectl get events` says why a static pod did not start. */
static void on_rejected(void *data, const char *source, const char *where, const char *reason)
{
        struct daemon *d = data;
        struct buf msg = BUF_INIT;
        struct event_ref node;

        if (!d->events)
                return;
        node = event_recorder_node(d->events);
        if (buf_printf(&msg, "%s \"%s\" rejected: %s",
                       strcmp(source, POD_SOURCE_FILE) == 0 ? "static pod manifest" : "manifest URL", where,
                       reason) == 0)
                events_warn(d, &node, EVENT_REASON_REJECTED, msg.data);
        buf_free(&msg);
}

/* The merger dropped a pod (a duplicate name): logged, and, as the
 * kubelet does, a Warning on the pod. */
static void on_storage_event(void *data, const char *source, const struct pod *p,
                             const char *reason, const char *message)
{
        struct daemon *d = data;

        log_warn("source \"%s\": %s: %s", source, reason, message);
        if (p) {
                struct event_ref ref = {.kind = "Pod",
                                        .namespace = pod_namespace(p),
                                        .name = pod_name(p),
                                        .uid = pod_uid(p),
                                        .api_version = "v1"};

                events_warn(d, &ref, reason, message);
        }
}

/* The event recorder, on the API source's kube client (--events). */
static int build_event_recorder(struct daemon *d)
{
        struct event_recorder_config cfg = {
                .node_name = d->opts.node_name,
                .qps = d->opts.event_qps,
                .burst = d->opts.event_burst,
                .kube = d->kube,
                .report = events_report,
                .stats = &d->metrics.events,
        };

        return event_recorder_new(d->loop, d->curl, &cfg, &d->events);
}

/* ---- the Kubernetes API view (doc/kube-api.md) ---------------------------- */

/* A record the stream carried, into the view, numbered as the stream
 * numbered it.  A record the view could not take (out of memory) leaves
 * it stale: it answers 503 until kube_api_catch_up() brings it back. */
static void kube_api_feed(struct daemon *d, const struct pod_update *u)
{
        if (!d->kube_api || kube_api_server_stale(d->kube_api))
                return;
        if (kube_api_server_update(d->kube_api, u, stream_server_last_seq(d->stream)) < 0)
                log_error("kube-api: out of memory applying an update: lists and watches get 503 until the view "
                          "is rebuilt from the merged state");
}

/* The view serves once every configured source has delivered, or the
 * API source serves its checkpoint and the others have delivered; a
 * stale view is rebuilt from the merger's whole state (retried after
 * each merge while memory is short). */
static void kube_api_catch_up(struct daemon *d)
{
        struct pod_update *set = NULL;
        const char *const *names;
        const char *others[8];
        size_t n, m = 0;

        if (!d->kube_api)
                return;
        if (kube_api_server_stale(d->kube_api)) {
                if (storage_merged(d->storage, &set) < 0 ||
                    kube_api_server_resync(d->kube_api, set, stream_server_last_seq(d->stream)) < 0) {
                        pod_update_free(set);
                        return;
                }
                pod_update_free(set);
                log_info("kube-api: the view is rebuilt, serving again");
        }
        if (d->ready_sent) {
                kube_api_server_set_ready(d->kube_api, true);
                return;
        }
        names = mux_sources(d->mux, &n);
        for (size_t i = 0; i < n && m < 8; i++)
                if (strcmp(names[i], POD_SOURCE_API) != 0)
                        others[m++] = names[i];
        kube_api_server_set_ready(d->kube_api, d->api_provisional && storage_seen_all(d->storage, others, m));
}

/* ... which the stream server drains right after each merge. */
static void drain_updates(struct daemon *d)
{
        struct pod_update *u;
        size_t n;
        const char *const *names;

        while ((u = updates_pipe_pop(&d->updates))) {
                metrics_count_update(&d->metrics, u);
                kube_api_feed(d, u);
                if (stream_server_broadcast(d->stream, u) < 0) {
                        log_error("stream: out of memory broadcasting an update: consumers were cut and resync on reconnect");
                } else {
                        /* The files whose pods it carried are applied. */
                        uint64_t seq = stream_server_last_seq(d->stream);

                        if (d->file)
                                file_source_carried(d->file, u, seq);
                        if (d->http)
                                http_source_carried(d->http, u, seq);
                }
                pod_update_free(u);
        }
        if (d->ready_sent) {
                kube_api_catch_up(d);
                return;
        }
        notify_sources(d);
        names = mux_sources(d->mux, &n);
        /* Out of memory: announced again after the next merge. */
        if (storage_seen_all(d->storage, names, n) &&
            stream_server_sources_ready(d->stream, names, n) == 0) {
                d->ready_sent = true;
                log_info("all sources ready (%zu)", n);
        }
        kube_api_catch_up(d);
}

/* The API source serves its checkpoint, or the server's pods: what it
 * serves is kept for the merge of the SET that goes with it. */
static void on_api_state(void *data, enum api_serving state, uint64_t time_usec, const char *rv)
{
        struct daemon *d = data;

        if (state != API_SERVING_CHECKPOINT)
                return;
        d->api_ckpt_time = time_usec;
        /* Out of memory: tell_api_state() says it cannot tell. */
        (void)str_set(&d->api_ckpt_rv, rv);
}

/* The API source's SETs say whether they are provisional (its
 * checkpoint's): when that changes, consumers are told, before the
 * merge's records go out (doc/checkpoint.md section 9), so the message
 * follows the records, not the source's state, which may be ahead of
 * them.  A message that cannot be sent is logged; the next change of
 * state says it again. */
static void tell_api_state(struct daemon *d, const struct pod_update *u)
{
        int r;

        if (u->op != POD_OP_SET || u->delta || u->provisional == d->api_provisional)
                return;
        if (!u->provisional)
                r = stream_server_source_state(d->stream, POD_SOURCE_API, PROTO_SERVING_LIVE, NULL);
        else if (d->api_ckpt_rv)
                r = stream_server_source_checkpoint(d->stream, POD_SOURCE_API, d->api_ckpt_time, d->api_ckpt_rv);
        else
                r = -ENOMEM;
        if (r < 0)
                log_error("stream: cannot tell consumers that source api serves %s: %s",
                          u->provisional ? "its checkpoint" : "the API server's pods", ERRNO_STR(r));
        else
                d->api_provisional = u->provisional;
}

/* A record that ran out of memory is merged again by the mux (it stays
 * first in line); nothing of it was applied. */
static int on_merge(void *data, const char *source, struct pod_update **u)
{
        struct daemon *d = data;
        uint64_t t0 = mono_usec();
        int r = storage_apply(d->storage, source, *u);

        metrics_observe_merge(&d->metrics, mono_usec() - t0);
        if (r == 0 && strcmp(source, POD_SOURCE_API) == 0)
                tell_api_state(d, *u);
        if (r == -ENOMEM)
                log_error("merge: source \"%s\": out of memory: merging the update again shortly", source);
        else if (r < 0)
                log_error("merge: source \"%s\": %s", source, ERRNO_STR(r));
        drain_updates(d);
        return r;
}

static void on_plugin_event(void *data, const struct plugin_event *ev)
{
        struct daemon *d = data;
        struct buf b = BUF_INIT;

        metrics_count_plugin(&d->metrics, ev->op);
        if (plugin_event_render(ev, &b) < 0 ||
            stream_server_plugin(d->stream, ev->op, ev->socket, b.data, ev->error) < 0)
                log_error("stream: out of memory publishing a plugin event");
        buf_free(&b);
}

/* The stream server ran out of descriptors accepting a consumer, or has
 * them again: one line each per episode. */
static void on_stream_fds(void *data, int err, uint64_t refused)
{
        (void)data;
        if (err < 0)
                log_warn("stream: out of file descriptors (%s): new consumers are refused with TooManyConsumers until some are free",
                         ERRNO_STR(err));
        else
                log_info("stream: file descriptors available again: accepting consumers (%" PRIu64
                         " refused meanwhile)",
                         refused);
}

static int state_for_consumer(void *data, struct pod_update ***ret, size_t *ret_n)
{
        struct daemon *d = data;

        return storage_state(d->storage, ret, ret_n);
}

/* ---- per-file records (doc/protocol.md "Files request") ------------------- */

/* A record changed: told to the files consumers, if any. */
static void on_file_record(void *data, const struct file_record_view *v)
{
        struct daemon *d = data;
        struct buf b = BUF_INIT;

        if (!d->stream || !stream_server_files_wanted(d->stream))
                return;
        if (files_msg_record(v, &b) < 0 || stream_server_files(d->stream, "file", b.data) < 0)
                log_error("stream: out of memory telling a file's record: files consumers were cut and ask again");
        buf_free(&b);
}

/* Every record of the file and URL sources (files_msg_each_fn). */
static int each_record(void *data, int (*fn)(void *ctx, const struct file_record_view *v), void *ctx)
{
        struct daemon *d = data;
        int r = 0;

        if (d->file)
                r = file_source_records(d->file, fn, ctx);
        if (r >= 0 && d->http)
                r = http_source_record(d->http, fn, ctx);
        return r;
}

struct files_emit {
        int (*emit)(void *ctx, const char *type, const char *members);
        void *ctx;
};

static int emit_record(void *data, const struct file_record_view *v)
{
        struct files_emit *e = data;
        struct buf b = BUF_INIT;
        int r = files_msg_record(v, &b);

        if (r >= 0)
                r = e->emit(e->ctx, "file", b.data);
        buf_free(&b);
        return r < 0 ? -ENOMEM : 0;
}

/* A files request: the "files" message (what the file source reads,
 * which names, the manifest URL as the http source names it, never its
 * credentials), then every record. */
static int files_for_consumer(void *data, int (*emit)(void *ctx, const char *type, const char *members), void *ctx)
{
        struct daemon *d = data;
        const struct options *o = &d->opts;
        struct files_emit e = {emit, ctx};
        struct buf head = BUF_INIT;
        char *url = d->http ? http_redact_url(o->manifest_url) : NULL;
        int r = d->http && !url ? -ENOMEM : 0;

        if (r >= 0)
                r = files_msg_head(d->file ? o->pod_manifest_path : NULL, o->file_patterns, o->n_file_patterns, url,
                                   &head);
        if (r >= 0)
                r = emit(ctx, "files", head.data);
        buf_free(&head);
        free(url);
        if (r >= 0)
                r = each_record(d, emit_record, &e);
        return r;
}

/* The daemon's members of a status message (`podmux status`). */
static int status_for_consumer(void *data, struct buf *out)
{
        struct daemon *d = data;
        int r;

        r = buf_printf(out, ",\"version\":\"%s\",\"pid\":%ld,\"metrics_address\":", PODMUX_VERSION,
                       (long)getpid());
        if (r >= 0)
                r = d->metrics_srv ? buf_json_string(out, metrics_server_address(d->metrics_srv),
                                                     strlen(metrics_server_address(d->metrics_srv)))
                                   : buf_puts(out, "null");
        if (r >= 0)
                r = metrics_render_status(&d->metrics, out);
        if (r >= 0 && (d->file || d->http))
                r = files_msg_status(each_record, d, RUN_STATUS_FILES_MAX, out);
        return r < 0 ? -ENOMEM : 0;
}

/* GET /metrics. */
static int render_metrics(void *data, struct buf *out)
{
        struct daemon *d = data;
        struct metrics_gauges g = {
                .consumers = stream_server_consumers(d->stream),
                .consumers_dropped = stream_server_dropped(d->stream),
                .plugins_registered = stream_server_plugins(d->stream),
                .stream_seq = stream_server_last_seq(d->stream),
        };

        return metrics_render(&d->metrics, &g, out);
}

static void on_signal(struct loop_io *io, int fd, uint32_t events, void *data)
{
        struct daemon *d = data;
        struct signalfd_siginfo si;

        while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                switch (si.ssi_signo) {
                case SIGINT:
                case SIGTERM:
                        log_info("received %s: shutting down", si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
                        loop_stop(d->loop);
                        break;
                case SIGHUP:
                        log_info("received SIGHUP: re-listing sources");
                        /* The API server source watches: it is current. */
                        if (d->file)
                                file_source_relist(d->file);
                        if (d->http)
                                http_source_poll(d->http);
                        break;
                }
        }
}

static int setup_signals(struct daemon *d)
{
        sigset_t set;

        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGHUP);
        if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
                return -errno;
        signal(SIGPIPE, SIG_IGN);
        d->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
        if (d->sigfd < 0)
                return -errno;
        return loop_io_add(d->loop, d->sigfd, EPOLLIN, on_signal, d, &d->sig_io);
}

static const char *rlim_str(rlim_t v, char *buf, size_t size)
{
        if (v == RLIM_INFINITY)
                return "unlimited";
        (void)snprintf(buf, size, "%llu", (unsigned long long)v);
        return buf;
}
#define RLIM_STR(v) rlim_str((v), (char[32]){0}, 32)

/*
 * Raises the soft descriptor limit to the hard one, as the Go runtime
 * does for the kubelet.  The low soft limit (often 1024) protects programs
 * that use select(), whose sets stop at FD_SETSIZE; our one select() is
 * libinotifytools' read on the loop, of the inotify descriptor made at
 * start, far below it.  Nothing is exec'd, so no child inherits the
 * raised limit.  Returns the soft limit in force (RLIM_INFINITY if it
 * cannot be read).
 */
static rlim_t raise_nofile(void)
{
        struct rlimit rl, want;
        rlim_t before;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
                log_warn("cannot read the descriptor limit: %s", ERRNO_STR(-errno));
                return RLIM_INFINITY;
        }
        before = rl.rlim_cur;
        if (rl.rlim_cur != rl.rlim_max) {
                want.rlim_cur = rl.rlim_max;
                want.rlim_max = rl.rlim_max;
                /* An unlimited hard limit is above the kernel's nr_open:
                 * refused (EPERM), and the soft limit stays. */
                if (setrlimit(RLIMIT_NOFILE, &want) == 0)
                        rl.rlim_cur = rl.rlim_max;
                else
                        log_debug("descriptors: cannot raise the soft limit to %s: %s",
                                  RLIM_STR(rl.rlim_max), ERRNO_STR(-errno));
        }
        log_debug("descriptors: soft limit %s, hard limit %s (the soft limit was %s)",
                  RLIM_STR(rl.rlim_cur), RLIM_STR(rl.rlim_max), RLIM_STR(before));
        return rl.rlim_cur;
}

/* The consumers a descriptor limit leaves room for (see RUN_FD_MARGIN). */
static size_t consumers_allowed(rlim_t limit)
{
        if (limit == RLIM_INFINITY)
                return SIZE_MAX;
        if (limit < 2 * RUN_FD_MARGIN)
                return limit >= 2 ? (size_t)(limit / 2) : 1;
        limit -= RUN_FD_MARGIN;
        return limit >= (rlim_t)SIZE_MAX ? SIZE_MAX : (size_t)limit;
}

static void daemon_free(struct daemon *d)
{
        plugin_manager_free(d->plugins);
        metrics_server_free(d->metrics_srv);
        kube_api_server_free(d->kube_api);
        review_free(d->review); /* after the server, whose waits it holds */
        file_source_free(d->file);
        http_source_free(d->http);
        event_recorder_free(d->events);
        api_source_free(d->api);
        kube_client_free(d->kube);
        free(d->api_ckpt_rv);
        curl_loop_free(d->curl);
        stream_server_free(d->stream);
        watcher_free(d->watcher);
        mux_free(d->mux);
        storage_free(d->storage);
        updates_pipe_free(&d->updates);
        loop_io_free(d->sig_io);
        if (d->sigfd >= 0)
                close(d->sigfd);
        loop_timer_free(d->watchdog);
        sd_notify_close(&d->notify);
        loop_free(d->loop);
        options_free(&d->opts);
}

/* Raises the descriptor limit, then lowers --max-consumers to what the
 * limit leaves room for (see RUN_FD_MARGIN), with a warning. */
static void fit_max_consumers(struct options *o)
{
        rlim_t nofile = raise_nofile();
        size_t allowed = consumers_allowed(nofile);

        if (o->max_consumers > allowed) {
                log_warn("--max-consumers %zu lowered to %zu: the descriptor limit is %s, and the rest is kept for the "
                         "sources, libcurl, inotify, the metrics endpoint and a spare (raise the hard limit, e.g. "
                         "LimitNOFILE=, to allow more)",
                         o->max_consumers, allowed, RLIM_STR(nofile));
                o->max_consumers = allowed;
        }
}

/* The merger's config: the mode, and where merged updates and pod
 * events go. */
static void storage_config_from_options(struct daemon *d, struct storage_config *cfg)
{
        *cfg = (struct storage_config){
                .mode = d->opts.mode,
                .emit = on_emit,
                .emit_data = d,
                .event = on_storage_event,
                .event_data = d,
        };
}

/* The stream server's config: the socket and who may connect, the
 * limits, and the daemon's callbacks. */
static void stream_config_from_options(struct daemon *d, struct stream_server_config *cfg)
{
        const struct options *o = &d->opts;

        *cfg = (struct stream_server_config){
                .socket_path = o->socket_path,
                .socket_mode = o->socket_mode,
                .set_socket_gid = o->set_socket_gid,
                .socket_gid = o->socket_gid,
                .allow_uids = o->allow_uids,
                .n_allow_uids = o->n_allow_uids,
                .allow_gids = o->allow_gids,
                .n_allow_gids = o->n_allow_gids,
                .mode_name = storage_mode_to_string(o->mode),
                .node_name = o->node_name,
                .max_consumers = o->max_consumers,
                .max_backlog = o->max_backlog,
                .history = o->history,
                .history_bytes = o->history_bytes,
                .state_fn = state_for_consumer,
                .state_data = d,
                .status_fn = status_for_consumer,
                .status_data = d,
                .files_fn = files_for_consumer,
                .files_data = d,
                .fd_fn = on_stream_fds,
                .fd_data = d,
        };
}

/* The file source's config (--pod-manifest-path). */
static void file_config_from_options(struct daemon *d, struct file_source_config *cfg)
{
        *cfg = (struct file_source_config){
                .path = d->opts.pod_manifest_path,
                .node_name = d->opts.node_name,
                .period_usec = d->opts.file_check_usec,
                .stats = metrics_source(&d->metrics, POD_SOURCE_FILE),
                .patterns = (const char *const *)d->opts.file_patterns,
                .n_patterns = d->opts.n_file_patterns,
                .record = on_file_record,
                .record_data = d,
        };
}

/* The HTTP source's config (--manifest-url). */
static void http_config_from_options(struct daemon *d, struct http_source_config *cfg)
{
        *cfg = (struct http_source_config){
                .url = d->opts.manifest_url,
                .headers = d->opts.headers,
                .n_headers = d->opts.n_headers,
                .node_name = d->opts.node_name,
                .period_usec = d->opts.http_check_usec,
                .stats = metrics_source(&d->metrics, POD_SOURCE_HTTP),
                .record = on_file_record,
                .record_data = d,
        };
}

/* The API server source's config, on the daemon's kube client. */
static void api_config_from_options(struct daemon *d, struct api_source_config *cfg)
{
        *cfg = (struct api_source_config){
                .kube = d->kube,
                .node_name = d->opts.node_name,
                .stats = metrics_source(&d->metrics, POD_SOURCE_API),
                .relist_spread_usec = d->opts.relist_spread_usec,
                .watch_list = d->opts.watch_list,
                .checkpoint =
                        {
                                .dir = d->opts.checkpoint_dir,
                                .interval_usec = d->opts.checkpoint_interval_usec,
                                .grace_usec = d->opts.checkpoint_grace_usec,
                                .max_age_usec = d->opts.checkpoint_max_age_usec,
                                .stats = &d->metrics.checkpoint,
                        },
                .state = on_api_state,
                .state_data = d,
        };
}

/* The plugin manager's config (--plugins-registry-dir). */
static void plugins_config_from_options(struct daemon *d, struct plugin_manager_config *cfg)
{
        *cfg = (struct plugin_manager_config){
                .dir = d->opts.plugins_dir,
                .event = on_plugin_event,
                .event_data = d,
        };
}

/* The metrics endpoint's config: --metrics-address, with the stream
 * socket's mode and group for a unix socket. */
static void metrics_config_from_options(struct daemon *d, struct metrics_server_config *cfg)
{
        *cfg = (struct metrics_server_config){
                .address = d->opts.metrics_address,
                .socket_mode = d->opts.socket_mode,
                .socket_gid = d->opts.set_socket_gid ? d->opts.socket_gid : (gid_t)-1,
                .render = render_metrics,
                .render_data = d,
        };
}

/* The libcurl loop the HTTP source, the API source and the plugin
 * manager share: made by the first of them that is configured. */
static int need_curl(struct daemon *d)
{
        return d->curl ? 0 : curl_loop_new(d->loop, &d->curl);
}

/* The inotify watcher the file source and the plugin manager share.
 * Without one they still work, less promptly (without says how): a
 * warning, not an error. */
static void want_watcher(struct daemon *d, const char *without)
{
        int r;

        if (!d->watcher && (r = watcher_new(d->loop, &d->watcher)) < 0)
                log_warn("inotify unavailable (%s): %s", ERRNO_STR(r), without);
}

/* Logs why a module could not be made or started: "what: why". */
static void module_failed(const char *what, int r, const struct buf *err)
{
        log_error("%s: %s", what, err->len ? err->data : ERRNO_STR(r));
}

/*
 * The build_* functions make one module each from d->opts, in the daemon:
 * 0, or -errno with the reason in err when they take one (util/buf.h).
 * The caller logs.
 */

/* The merger: the storage, and the mux that feeds it. */
static int build_merger(struct daemon *d)
{
        struct storage_config cfg;
        int r;

        storage_config_from_options(d, &cfg);
        if ((r = storage_new(&cfg, &d->storage)) < 0)
                return r;
        return mux_new(d->loop, on_merge, d, &d->mux);
}

/* The stream server: binds and locks the socket. */
static int build_stream(struct daemon *d, struct buf *err)
{
        struct stream_server_config cfg;

        stream_config_from_options(d, &cfg);
        return stream_server_new(d->loop, &cfg, &d->stream, err);
}

/* The Kubernetes API view (--kube-api-socket), with the stream socket's
 * mode, group and allow lists; its versions start from the stream's
 * number now. */
static int build_kube_api(struct daemon *d, struct buf *err)
{
        const struct options *o = &d->opts;
        struct kube_api_server_config cfg = {
                .socket_path = o->kube_api_socket,
                .socket_mode = o->socket_mode,
                .socket_gid = o->set_socket_gid ? o->socket_gid : (gid_t)-1,
                .allow_uids = o->allow_uids,
                .n_allow_uids = o->n_allow_uids,
                .allow_gids = o->allow_gids,
                .n_allow_gids = o->n_allow_gids,
                .history = o->kube_api_history,
                .base_seq = stream_server_last_seq(d->stream),
                .min_request_timeout_usec = o->kube_api_min_request_timeout_usec,
        };
        struct kube_tls_config tls = {
                .cert_file = o->kube_api_tls_cert,
                .key_file = o->kube_api_tls_key,
                .cert_dir = o->kube_api_cert_dir ? o->kube_api_cert_dir : OPTIONS_DEFAULT_KUBE_API_CERT_DIR,
                .host = o->node_name,
        };
        const char *every = getenv("PODMUX_KUBE_API_BOOKMARK_INTERVAL");
        char *cert = NULL, *key = NULL, *ca = NULL;
        int r;

        /* A test knob (doc/kube-api.md): bookmarks sooner than a minute. */
        if (every && every[0] && duration_parse(every, &cfg.bookmark_usec) < 0)
                return buf_set_err(err, -EINVAL, "PODMUX_KUBE_API_BOOKMARK_INTERVAL \"%s\": not a duration", every);
        if (o->kube_api_address && d->kube) {
                /* Tokens by TokenReview whenever an API server is
                 * configured; Webhook needs it (options_parse checks). */
                struct review_config rc = {.kube = d->kube};

                if ((r = need_curl(d)) < 0 || (r = review_new(d->loop, d->curl, &rc, &d->review)) < 0)
                        return r;
                cfg.review = d->review;
        }
        cfg.authz_webhook = !o->kube_api_always_allow;
        if (o->kube_api_address) {
                /* No client CA: tokens only (options_parse checks that an
                 * API server verifies them). */
                if ((r = kube_tls_load(&tls, &cert, &key, err)) < 0 ||
                    (o->kube_api_client_ca && (r = kube_tls_read(o->kube_api_client_ca, &ca, err)) < 0))
                        goto out;
                cfg.address = o->kube_api_address;
                cfg.tls_cert_pem = cert;
                cfg.tls_key_pem = key;
                cfg.client_ca_pem = ca;
        }
        r = kube_api_server_new(d->loop, &cfg, &d->kube_api, err);
out:
        free(cert);
        if (key)
                OPENSSL_cleanse(key, strlen(key));
        free(key);
        free(ca);
        return r;
}

/* The file source (--pod-manifest-path), on its mux channel. */
static int build_file_source(struct daemon *d, struct buf *err)
{
        struct file_source_config cfg;
        struct mux_channel *ch;
        int r;

        file_config_from_options(d, &cfg);
        cfg.rejected = on_rejected; /* events, once the recorder is made */
        cfg.rejected_data = d;
        want_watcher(d, "the static pod path is re-listed every period only");
        if ((r = mux_channel(d->mux, POD_SOURCE_FILE, &ch)) < 0)
                return r;
        return file_source_new(d->loop, d->watcher, ch, &cfg, &d->file, err);
}

/* The HTTP source (--manifest-url), on its mux channel. */
static int build_http_source(struct daemon *d, struct buf *err)
{
        struct http_source_config cfg;
        struct mux_channel *ch;
        int r;

        http_config_from_options(d, &cfg);
        cfg.rejected = on_rejected; /* events, once the recorder is made */
        cfg.rejected_data = d;
        if ((r = need_curl(d)) < 0 || (r = mux_channel(d->mux, POD_SOURCE_HTTP, &ch)) < 0)
                return r;
        return http_source_new(d->loop, d->curl, ch, &cfg, &d->http, err);
}

/* The API server source, on its mux channel, with the credentials from
 * --kubeconfig, else from the service account (--in-cluster). */
static int build_api_source(struct daemon *d, struct buf *err)
{
        struct kube_config kc;
        struct api_source_config cfg;
        struct mux_channel *ch;
        int r;

        r = d->opts.kubeconfig ? kubeconfig_load(d->opts.kubeconfig, NULL, &kc, err)
                               : kubeconfig_in_cluster(getenv("PODMUX_SERVICE_ACCOUNT_DIR"), &kc, err);
        if (r < 0)
                return r;
        /* kc is moved into the client, which frees it on failure too. */
        if ((r = kube_client_new(&kc, &d->kube, err)) < 0)
                return r;
        api_config_from_options(d, &cfg);
        if ((r = need_curl(d)) < 0 || (r = mux_channel(d->mux, POD_SOURCE_API, &ch)) < 0)
                return r;
        return api_source_new(d->loop, d->curl, ch, &cfg, &d->api, err);
}

/* The plugin manager (--plugins-registry-dir). */
static int build_plugins(struct daemon *d, struct buf *err)
{
        struct plugin_manager_config cfg;
        int r;

        plugins_config_from_options(d, &cfg);
        want_watcher(d, "plugins are found at start only");
        if ((r = need_curl(d)) < 0)
                return r;
        return plugin_manager_new(d->loop, d->watcher, d->curl, &cfg, &d->plugins, err);
}

/* The metrics endpoint (--metrics-address). */
static int build_metrics_server(struct daemon *d, struct buf *err)
{
        struct metrics_server_config cfg;

        metrics_config_from_options(d, &cfg);
        return metrics_server_new(d->loop, &cfg, &d->metrics_srv, err);
}

/* Makes every module d->opts asks for, in order: the loop and the
 * signals, the merger, the stream server, the sources, the plugin
 * manager, the metrics endpoint.  Nothing runs yet.  A failure is
 * logged here; daemon_free() takes what was made. */
static int daemon_build(struct daemon *d)
{
        const struct options *o = &d->opts;
        struct buf err = BUF_INIT;
        int r;

        if ((r = loop_new(&d->loop)) < 0 || (r = setup_signals(d)) < 0 || (r = notify_setup(d)) < 0) {
                log_error("cannot set up the event loop: %s", ERRNO_STR(r));
                goto out;
        }
        if ((r = build_merger(d)) < 0) {
                log_error("cannot create the merger: %s", ERRNO_STR(r));
                goto out;
        }
        if ((r = build_stream(d, &err)) < 0) {
                /* The message names the path ("another podmux (pid N)
                 * serves PATH" when the lock is taken). */
                if (err.len)
                        log_error("%s", err.data);
                else
                        log_error("socket \"%s\": %s", o->socket_path, ERRNO_STR(r));
                goto out;
        }
        if (o->pod_manifest_path && (r = build_file_source(d, &err)) < 0) {
                module_failed("file source", r, &err);
                goto out;
        }
        if (o->manifest_url && (r = build_http_source(d, &err)) < 0) {
                module_failed("http source", r, &err);
                goto out;
        }
        if ((o->kubeconfig || o->in_cluster) && (r = build_api_source(d, &err)) < 0) {
                module_failed("api source", r, &err);
                goto out;
        }
        /* After the API source, whose client verifies tokens. */
        if (o->kube_api_socket || o->kube_api_address) {
                if ((r = build_kube_api(d, &err)) < 0) {
                        module_failed("kube-api", r, &err);
                        goto out;
                }
                log_info("kube-api: the pods through the Kubernetes API on %s", kube_api_server_address(d->kube_api));
        }
        if (d->api && o->events) {
                if ((r = build_event_recorder(d)) < 0) {
                        log_error("events: cannot create the recorder: %s", ERRNO_STR(r));
                        goto out;
                }
                if (o->event_qps)
                        log_info("events: recording Kubernetes Events on the API server (at most %u writes/s "
                                 "after a burst of %u)",
                                 o->event_qps, o->event_burst ? o->event_burst : EVENT_CLIENT_BURST);
                else
                        log_info("events: recording Kubernetes Events on the API server (no limit on writes)");
        }
        if (o->plugins_dir && o->plugins_dir[0] && (r = build_plugins(d, &err)) < 0) {
                module_failed("plugin manager", r, &err);
                goto out;
        }
        if (d->file)
                metrics_source(&d->metrics, POD_SOURCE_FILE)->configured = true;
        if (d->http)
                metrics_source(&d->metrics, POD_SOURCE_HTTP)->configured = true;
        if (d->api)
                metrics_source(&d->metrics, POD_SOURCE_API)->configured = true;
        if (o->metrics_address) {
                if ((r = build_metrics_server(d, &err)) < 0) {
                        module_failed("metrics", r, &err);
                        goto out;
                }
                log_info("metrics on %s (GET /metrics)", metrics_server_address(d->metrics_srv));
        }
        r = 0;
out:
        buf_free(&err);
        return r;
}

/* What the configuration says that may not be what was meant: one
 * warning each, at start (options_parse() found them; it never logs). */
static void warn_configuration(const struct daemon *d)
{
        const struct options *o = &d->opts;

        if (o->config_unknown)
                log_warn("--config \"%s\": unknown fields ignored (not in KubeletConfiguration v1beta1): %s",
                         o->config_file, o->config_unknown);
        if (o->n_file_patterns && (!d->file || !d->opts.pod_manifest_path))
                log_warn("--static-pod-file-pattern is given, but no static pod path (--pod-manifest-path, or "
                         "staticPodPath in --config): it applies to nothing");
        if (!d->file && !d->http && !d->api)
                log_warn("no pod source is configured (--pod-manifest-path, --manifest-url, --kubeconfig, "
                         "--in-cluster, or staticPodPath or staticPodURL in --config): consumers get no pods%s",
                         d->plugins ? ", only plugins" : "");
}

/* A clean shutdown writes the API source's live state, if newer than its
 * checkpoint (doc/checkpoint.md section 6).  A failure is logged. */
static void flush_checkpoint(struct daemon *d)
{
        struct buf err = BUF_INIT;
        int r = d->api ? api_source_flush_checkpoint(d->api, &err) : 0;

        if (r < 0)
                log_error("api source: cannot write the checkpoint at shutdown: %s", err.len ? err.data : ERRNO_STR(r));
        buf_free(&err);
}

/* Starts the sources and the plugin manager, then runs the loop until
 * SIGINT or SIGTERM stops it.  A failure is logged here. */
static int daemon_run(struct daemon *d)
{
        struct buf err = BUF_INIT;
        int r = 0;

        log_info("podmux %s serving on \"%s\" (node \"%s\", mode %s)", PODMUX_VERSION, d->opts.socket_path,
                 d->opts.node_name, storage_mode_to_string(d->opts.mode));
        warn_configuration(d);
        if (d->file)
                file_source_start(d->file);
        if (d->http)
                http_source_start(d->http);
        if (d->api)
                api_source_start(d->api);
        if (d->plugins && (r = plugin_manager_start(d->plugins, &err)) < 0)
                module_failed("plugin manager", r, &err);
        buf_free(&err);
        if (r < 0)
                return r;
        /* The stream socket listens since build_stream(): consumers can
         * connect, and a unit ordered After=podmux.service may start. */
        notify_status(d, "READY=1\n", 0);
        if (d->watchdog)
                loop_timer_arm(d->watchdog, d->watchdog_every);
        /* With no source configured, readiness holds at once (vacuously). */
        drain_updates(d);
        r = loop_run(d->loop);
        if (r < 0)
                log_error("event loop failed: %s", ERRNO_STR(r));
        notify(d, "STOPPING=1\nSTATUS=shutting down");
        flush_checkpoint(d);
        return r;
}

/* Parses the flags, builds the modules from them, runs the loop, and
 * tears down. */
int cmd_run(int argc, char **argv)
{
        struct daemon d;
        struct buf err = BUF_INIT;
        int r, status = 1;

        mem_tune();
        memset(&d, 0, sizeof(d));
        metrics_init(&d.metrics);
        d.sigfd = -1;
        d.notify = (struct sd_notify)SD_NOTIFY_INIT;
        updates_pipe_init(&d.updates);
        /* Every usage error, contradictions between flags included, is
         * found here, before anything is created. */
        r = options_parse(argc, argv, &d.opts, &err);
        if (r < 0) {
                if (r == -EINVAL)
                        status = cmd_usage_error("run", "%s", err.len ? err.data : ERRNO_STR(r));
                else
                        fprintf(stderr, "podmux run: %s\n", err.len ? err.data : ERRNO_STR(r));
                buf_free(&err);
                return status;
        }
        if (d.opts.help) {
                fputs(options_usage(), stdout);
                options_free(&d.opts);
                return 0;
        }
        /* Before any thread exists: curl_global_init is not thread-safe. */
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
                fprintf(stderr, "podmux run: cannot initialise libcurl\n");
                options_free(&d.opts);
                return 1;
        }
        log_setup(d.opts.verbosity >= 4 ? LOG_LEVEL_TRACE
                  : d.opts.verbosity >= 1 ? LOG_LEVEL_DEBUG : LOG_LEVEL_INFO,
                  d.opts.log_json ? LOG_FORMAT_JSON : LOG_FORMAT_TEXT);
        fit_max_consumers(&d.opts);
        if (daemon_build(&d) >= 0 && daemon_run(&d) >= 0)
                status = 0;
        buf_free(&err);
        daemon_free(&d);
        curl_global_cleanup();
        return status;
}
