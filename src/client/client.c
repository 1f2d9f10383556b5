/*
 * client — libpodmux-client's connection and protocol state (see
 * include/podmux/client.h, doc/protocol.md).
 *
 * A client is IDLE (no connection; the next attempt is due at
 * next_attempt), CONNECTED, or STOPPED.  A connection goes: hello, then
 * messages held until "synced", then live.  At synced the held messages
 * are either a replay (applied one by one, each as if live) or a full
 * state (applied to a new cache, compared with the current one as the
 * merger compares pods, and the difference handed to the handlers as
 * computed records; or, when the cache held only what came after a point
 * given by podmux_client_set_resume(), handed on whole as one SET).
 *
 * The resume point is the number of the last message applied to the
 * cache: synced's number after a full state, then each live message's.
 * A message that cannot be applied (out of memory, malformed) ends the
 * connection without moving it, so the next connection resumes right
 * before that message and nothing is lost or seen twice.
 *
 * The connection's end is never acted on inside the loop over lines
 * (the buffer being walked belongs to it): a line that ends it records
 * why in c->end, and the loop stops; process() ends it afterwards.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>

#include "podmux/client.h"
#include "util/backoff.h"
#include "util/grow.h"
#include "util/clock.h"
#include "util/json_parse.h"
#include "util/json_path.h"
#include "util/proto_words.h"
#include "util/str.h"
#include "client_cache.h"
#include "client_index.h"
#include "client_informer.h"
#include "client_msg.h"

/* Bytes read per podmux_client_process() call before it returns to the
 * application's loop (the descriptor stays readable for the rest). */
#define READ_BUDGET (4u * 1024u * 1024u)
#define READ_CHUNK (256u * 1024u)
#define TEXT_MAX 512
/* Bytes of a bad line quoted in its error message. */
#define EXCERPT_MAX 80

enum state {
        ST_IDLE,
        ST_CONNECTED,
        ST_STOPPED,
};

struct end {
        bool pending;
        enum podmux_error_kind kind;
        int err;
        char reason[TEXT_MAX];
        char message[TEXT_MAX];
};

struct src_state {
        char *source, *state, *cp_time, *cp_rv;
        uint64_t seq;
        bool confirmed; /* said since the last synced */
};

struct podmux_client {
        char *path;
        void *data;
        unsigned flags;
        size_t max_line;
        podmux_pods_fn on_pods;
        podmux_synced_fn on_synced;
        podmux_sources_ready_fn on_ready;
        podmux_plugin_fn on_plugin;
        podmux_source_fn on_source;
        podmux_error_fn on_error;
        podmux_reconnect_fn on_reconnect;
        podmux_log_fn on_log;
        podmux_line_fn on_line;

        int epfd;
        int fd;
        enum state st;
        int stop_err;
        bool stop_requested;

        /* the reconnection's backoff (client_msg.h) */
        uint64_t next_attempt; /* monotonic usec */
        struct backoff backoff;
        unsigned attempt;

        /* the connection */
        char out[64];
        size_t out_len, out_off;
        uint32_t events;
        struct buf in;
        bool hello_seen, live;
        struct client_msg *held; /* before synced */
        size_t n_held, held_cap;
        struct end end;

        /* what was applied */
        bool have_point;
        uint64_t point;
        bool synced_once;
        /* The cache holds only what came after a point given by
         * podmux_client_set_resume(): the application holds the rest.
         * Cleared by a full state. */
        bool partial;
        struct cache cache;
        struct informer inf; /* podmux_client_add_handler() */
        struct indexes ix;   /* podmux_client_add_index(), in step with cache */
        char **ready;
        size_t n_ready;
        bool have_ready;
        /* Sources said not to be live ("source" messages); "live" drops
         * one.  confirming: from a synced to the first message after it
         * that is not a "source" message, during which the daemon says
         * again every state that is not live (doc/protocol.md, "source"). */
        struct src_state *srcs;
        size_t n_srcs;
        bool confirming;
};

/* ---- small helpers ------------------------------------------------------------- */

/* A message stays one line whatever went into it (a bad line, the
 * daemon's own message, the path): control characters become '?'. */
static void one_line(char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || *s == 0x7f)
                        *s = '?';
}

static void logf_(struct podmux_client *c, enum podmux_log_level level, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* No allocation: a line longer than TEXT_MAX is cut. */
static void logf_(struct podmux_client *c, enum podmux_log_level level, const char *fmt, ...)
{
        char line[TEXT_MAX];
        va_list ap;

        if (!c->on_log)
                return;
        va_start(ap, fmt);
        (void)vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        one_line(line);
        c->on_log(c, level, line, c->data);
}

static void set_end(struct podmux_client *c, enum podmux_error_kind kind, int err, const char *reason,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void set_end(struct podmux_client *c, enum podmux_error_kind kind, int err, const char *reason,
                    const char *fmt, ...)
{
        va_list ap;

        if (c->end.pending)
                return; /* the first cause is the one reported */
        c->end.pending = true;
        c->end.kind = kind;
        c->end.err = err;
        (void)snprintf(c->end.reason, sizeof(c->end.reason), "%s", reason ? reason : "");
        va_start(ap, fmt);
        (void)vsnprintf(c->end.message, sizeof(c->end.message), fmt, ap);
        va_end(ap);
        one_line(c->end.message);
}

/* ---- life ------------------------------------------------------------------------- */

int podmux_client_new(const char *path, void *data, struct podmux_client **ret_c)
{
        struct podmux_client *c;
        int r;

        if (!path)
                path = PODMUX_CLIENT_DEFAULT_SOCKET;
        if (!*path || !ret_c)
                return -EINVAL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->fd = -1;
        buf_init(&c->in);
        c->data = data;
        c->inf.stop = &c->stop_requested;
        c->max_line = PODMUX_CLIENT_DEFAULT_MAX_LINE;
        c->backoff = BACKOFF_INIT(PODMUX_CLIENT_BACKOFF_MIN_USEC, PODMUX_CLIENT_BACKOFF_MAX_USEC);
        c->path = strdup(path);
        if (!c->path) {
                free(c);
                return -ENOMEM;
        }
        c->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (c->epfd < 0) {
                r = -errno;
                free(c->path);
                free(c);
                return r;
        }
        *ret_c = c;
        return 0;
}

static void held_clear(struct podmux_client *c)
{
        for (size_t i = 0; i < c->n_held; i++)
                client_msg_clear(&c->held[i]);
        c->n_held = 0;
}

static void src_state_free(struct src_state *s)
{
        free(s->source);
        free(s->state);
        free(s->cp_time);
        free(s->cp_rv);
}

static void ready_free(struct podmux_client *c)
{
        for (size_t i = 0; i < c->n_ready; i++)
                free(c->ready[i]);
        free(c->ready);
        c->ready = NULL;
        c->n_ready = 0;
}

/* Closes the connection, drops what it held; the cache stays. */
static void conn_close(struct podmux_client *c)
{
        if (c->fd >= 0) {
                (void)epoll_ctl(c->epfd, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
        }
        c->fd = -1;
        held_clear(c);
        buf_free(&c->in);
        c->hello_seen = false;
        c->live = false;
        c->out_len = c->out_off = 0;
        c->events = 0;
}

void podmux_client_free(struct podmux_client *c)
{
        if (!c)
                return;
        conn_close(c);
        free(c->held);
        if (c->epfd >= 0)
                close(c->epfd);
        informer_free(&c->inf);
        indexes_free(&c->ix);
        cache_free(&c->cache);
        ready_free(c);
        for (size_t i = 0; i < c->n_srcs; i++)
                src_state_free(&c->srcs[i]);
        free(c->srcs);
        free(c->path);
        free(c);
}

void podmux_client_on_pods(struct podmux_client *c, podmux_pods_fn fn)
{
        c->on_pods = fn;
}

int podmux_client_add_handler(struct podmux_client *c, const struct podmux_handler *h, void *data)
{
        if (!h)
                return -EINVAL;
        return informer_add(c, &c->inf, h, data, c->cache.v, c->cache.n);
}
int podmux_client_add_index(struct podmux_client *c, const char *name, podmux_index_fn fn, void *data)
{
        if (!name || !fn)
                return -EINVAL;
        return index_add(&c->ix, name, fn, data, c->cache.v, c->cache.n);
}
int podmux_client_by_index(struct podmux_client *c, const char *name, const char *key,
                           const struct podmux_pod ***ret_pods, size_t *ret_n)
{
        if (!name || !key || !ret_pods || !ret_n)
                return -EINVAL;
        return index_lookup(&c->ix, name, key, c->cache.v, c->cache.n, ret_pods, ret_n);
}
void podmux_client_on_synced(struct podmux_client *c, podmux_synced_fn fn) { c->on_synced = fn; }
void podmux_client_on_sources_ready(struct podmux_client *c, podmux_sources_ready_fn fn) { c->on_ready = fn; }
void podmux_client_on_source(struct podmux_client *c, podmux_source_fn fn)
{
        c->on_source = fn;
}
void podmux_client_on_plugin(struct podmux_client *c, podmux_plugin_fn fn) { c->on_plugin = fn; }
void podmux_client_on_error(struct podmux_client *c, podmux_error_fn fn) { c->on_error = fn; }
void podmux_client_on_reconnect(struct podmux_client *c, podmux_reconnect_fn fn) { c->on_reconnect = fn; }
void podmux_client_on_log(struct podmux_client *c, podmux_log_fn fn) { c->on_log = fn; }
void podmux_client_on_line(struct podmux_client *c, podmux_line_fn fn) { c->on_line = fn; }
void podmux_client_set_flags(struct podmux_client *c, unsigned flags) { c->flags = flags; }
void *podmux_client_data(const struct podmux_client *c) { return c->data; }

void podmux_client_set_max_line(struct podmux_client *c, size_t bytes)
{
        c->max_line = bytes ? bytes : PODMUX_CLIENT_DEFAULT_MAX_LINE;
}

void client_set_backoff(struct podmux_client *c, uint64_t min_usec, uint64_t max_usec)
{
        c->backoff = BACKOFF_INIT(min_usec, max_usec);
}

void podmux_client_set_resume(struct podmux_client *c, uint64_t seq)
{
        c->have_point = true;
        c->point = seq;
        c->partial = true;
}

int podmux_client_fd(const struct podmux_client *c)
{
        return c->epfd;
}

int podmux_client_timeout(const struct podmux_client *c)
{
        uint64_t now;

        if (c->stop_requested && c->st != ST_STOPPED)
                return 0; /* process() closes the connection */
        if (c->st != ST_IDLE)
                return -1;
        now = mono_usec();
        if (now >= c->next_attempt)
                return 0;
        return (int)((c->next_attempt - now + 999) / 1000);
}

/* ---- the end of a connection ------------------------------------------------------ */

static void report(struct podmux_client *c, enum podmux_error_kind kind, int err, const char *reason,
                   const char *message, bool fatal)
{
        struct podmux_error e = {
                .kind = kind, .err = err, .reason = reason && *reason ? reason : NULL,
                .message = message, .fatal = fatal,
        };

        logf_(c, fatal ? PODMUX_LOG_ERROR : PODMUX_LOG_WARNING, "%s", message);
        if (c->on_error)
                c->on_error(c, &e, c->data);
}

static bool is_fatal(const struct podmux_client *c, enum podmux_error_kind kind, const char *reason)
{
        if (c->flags & PODMUX_CLIENT_NO_RECONNECT)
                return true;
        if (kind == PODMUX_ERROR_PERMISSION || kind == PODMUX_ERROR_PROTOCOL)
                return true;
        return kind == PODMUX_ERROR_SERVER && reason && strcmp(reason, PROTO_ERROR_BAD_REQUEST) == 0;
}

static void stop_now(struct podmux_client *c, int err)
{
        conn_close(c);
        c->st = ST_STOPPED;
        c->stop_err = err;
}

/* Ends the connection for c->end: reports it, then stops or schedules the
 * next attempt. */
static void end_connection(struct podmux_client *c)
{
        struct end e = c->end;
        bool fatal = is_fatal(c, e.kind, e.reason);
        struct podmux_reconnect rc;

        c->end.pending = false;
        conn_close(c);
        report(c, e.kind, e.err, e.reason, e.message, fatal);
        if (fatal) {
                stop_now(c, e.err);
                return;
        }
        if (c->stop_requested) {
                stop_now(c, -ECANCELED);
                return;
        }
        rc.delay_usec = backoff_next(&c->backoff, 0);
        rc.attempt = ++c->attempt;
        rc.resume = c->have_point;
        rc.resume_after = c->point;
        c->next_attempt = mono_usec() + rc.delay_usec;
        c->st = ST_IDLE;
        logf_(c, PODMUX_LOG_INFO, "reconnecting to \"%s\" in %" PRIu64 " ms (attempt %u)", c->path,
              rc.delay_usec / 1000, rc.attempt);
        if (c->on_reconnect)
                c->on_reconnect(c, &rc, c->data);
}

void podmux_client_stop(struct podmux_client *c)
{
        /* A flag and no more: the connection is closed by the next
         * podmux_client_process(), which podmux_client_timeout() says is
         * due at once (from a handler, process() is still reading it). */
        c->stop_requested = true;
}

/* ---- connecting -------------------------------------------------------------------- */

static int update_events(struct podmux_client *c)
{
        uint32_t want = EPOLLIN | (c->out_off < c->out_len ? EPOLLOUT : 0);
        struct epoll_event ev = {.events = want, .data.fd = c->fd};

        if (want == c->events)
                return 0;
        if (epoll_ctl(c->epfd, c->events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev) < 0)
                return -errno;
        c->events = want;
        return 0;
}

/* Sends what is left of the first line.  A refused send is not the end:
 * the daemon may have written why it closes (Forbidden, ...), so reading
 * goes on and tells. */
static void flush_out(struct podmux_client *c)
{
        while (c->out_off < c->out_len) {
                ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                                 MSG_NOSIGNAL | MSG_DONTWAIT);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN && errno != EWOULDBLOCK)
                                c->out_off = c->out_len;
                        break;
                }
                c->out_off += (size_t)n;
        }
}

static void do_connect(struct podmux_client *c)
{
        struct sockaddr_un sa;
        struct stat st;
        char eb[128];
        size_t plen = strlen(c->path);
        int fd, r;

        memset(&sa, 0, sizeof(sa));
        sa.sun_family = AF_UNIX;
        if (plen >= sizeof(sa.sun_path)) {
                set_end(c, PODMUX_ERROR_CONNECT, -ENAMETOOLONG, NULL,
                        "cannot connect to \"%s\": the path is longer than %zu bytes", c->path,
                        sizeof(sa.sun_path) - 1);
                c->flags |= PODMUX_CLIENT_NO_RECONNECT; /* it will not get shorter */
                return;
        }
        memcpy(sa.sun_path, c->path, plen + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                r = -errno;
                set_end(c, PODMUX_ERROR_CONNECT, r, NULL, "cannot make a socket: %s", errno_str(r, eb, sizeof(eb)));
                return;
        }
        /* A unix connect completes at once or fails; EAGAIN is a full
         * accept backlog, retried like a daemon not yet there. */
        while (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                r = -errno;
                if (r == -EINTR)
                        continue;
                close(fd);
                /* Linux refuses a connection to a path that is no
                 * socket as it does one nobody listens on: say which. */
                if (r == -ECONNREFUSED && stat(c->path, &st) == 0 && !S_ISSOCK(st.st_mode))
                        r = -ENOTSOCK;
                if (r == -EACCES || r == -EPERM)
                        set_end(c, PODMUX_ERROR_PERMISSION, r, NULL,
                                "cannot connect to \"%s\": %s (the socket's mode and group decide "
                                "who may read the stream)",
                                c->path, errno_str(r, eb, sizeof(eb)));
                else
                        set_end(c, PODMUX_ERROR_CONNECT, r, NULL,
                                "cannot connect to \"%s\": %s (is podmux run serving this path?)", c->path,
                                errno_str(r, eb, sizeof(eb)));
                return;
        }
        c->fd = fd;
        c->st = ST_CONNECTED;
        c->end.pending = false;
        if (c->have_point)
                c->out_len = (size_t)snprintf(c->out, sizeof(c->out), "{\"resume_after\":%" PRIu64 "}\n",
                                              c->point);
        else
                c->out_len = (size_t)snprintf(c->out, sizeof(c->out), "{}\n");
        c->out_off = 0;
        flush_out(c);
        r = update_events(c);
        if (r < 0)
                set_end(c, PODMUX_ERROR_CONNECT, r, NULL, "cannot watch the connection to \"%s\": %s", c->path,
                        errno_str(r, eb, sizeof(eb)));
        else
                logf_(c, PODMUX_LOG_DEBUG, "connected to \"%s\"; asked for %s", c->path,
                      c->have_point ? "a resume" : "the full state");
}

/* ---- delivering ---------------------------------------------------------------------- */

static void deliver_pods(struct podmux_client *c, enum podmux_op op, const char *source,
                         struct podmux_pod *const *pods, size_t n, uint64_t seq, bool resync)
{
        struct podmux_update u = {
                .op = op, .source = source, .pods = (const struct podmux_pod *const *)pods,
                .n_pods = n, .seq = seq, .resync = resync,
        };

        if (c->on_pods && !c->stop_requested)
                c->on_pods(c, &u, c->data);
        informer_record(c, &c->inf, op, pods, n);
}

static void deliver_plugin(struct podmux_client *c, const char *op, const struct plugin_ent *e,
                           const struct client_msg *m, bool resync)
{
        struct podmux_plugin_event ev = {.op = op, .resync = resync};

        if (!c->on_plugin || c->stop_requested)
                return;
        if (m) {
                ev.socket = m->socket;
                ev.type = m->plugin_type;
                ev.name = m->plugin_name;
                ev.plugin_json = m->plugin_json;
                ev.error = m->error;
                ev.seq = m->seq;
        } else {
                ev.socket = e->socket;
                ev.type = e->type;
                ev.name = e->name;
                ev.plugin_json = e->json;
        }
        c->on_plugin(c, &ev, c->data);
}

static void end_nomem(struct podmux_client *c, uint64_t seq)
{
        set_end(c, PODMUX_ERROR_NOMEM, -ENOMEM, NULL,
                "out of memory applying message %" PRIu64 " from \"%s\": nothing of it was applied; "
                "resynchronizing",
                seq, c->path);
}

/* A sources_ready list: *ret_copy a copy of it when it differs from the
 * one kept (else NULL).  0 or -ENOMEM. */
static int ready_prepare(const struct podmux_client *c, const struct client_msg *m, char ***ret_copy)
{
        char **copy;
        bool same = c->have_ready && c->n_ready == m->n_sources;

        *ret_copy = NULL;
        for (size_t i = 0; same && i < m->n_sources; i++)
                same = strcmp(c->ready[i], m->sources[i]) == 0;
        if (same)
                return 0;
        copy = calloc(m->n_sources + 1, sizeof(*copy));
        if (!copy)
                return -ENOMEM;
        for (size_t i = 0; i < m->n_sources; i++) {
                copy[i] = strdup(m->sources[i]);
                if (!copy[i]) {
                        for (size_t j = 0; j < i; j++)
                                free(copy[j]);
                        free(copy);
                        return -ENOMEM;
                }
        }
        *ret_copy = copy;
        return 0;
}

/* Keeps the list ready_prepare() copied, and tells it. */
static void ready_commit(struct podmux_client *c, const struct client_msg *m, char **copy)
{
        if (!copy)
                return;
        ready_free(c);
        c->ready = copy;
        c->n_ready = m->n_sources;
        c->have_ready = true;
        if (c->on_ready && !c->stop_requested)
                c->on_ready(c, (const char *const *)c->ready, c->n_ready, c->data);
}

/* A new sources_ready list: kept, and told when it differs.  0 or
 * -ENOMEM (nothing changed). */
static int apply_ready(struct podmux_client *c, const struct client_msg *m)
{
        char **copy;

        if (ready_prepare(c, m, &copy) < 0)
                return -ENOMEM;
        ready_commit(c, m, copy);
        return 0;
}

/* ---- source states (doc/protocol.md, "source") ------------------------------- */

const char *podmux_serving_name(enum podmux_serving s)
{
#define NAME(n) n,
        static const char *const names[] = {PROTO_CLIENT_SERVING(NAME)};
#undef NAME

        if ((int)s < 0 || (size_t)s >= sizeof(names) / sizeof(names[0]))
                return NULL;
        return names[s];
}

static enum podmux_serving serving_of(const char *state)
{
        if (strcmp(state, PROTO_SERVING_LIVE) == 0)
                return PODMUX_SERVING_LIVE;
        if (strcmp(state, PROTO_SERVING_CHECKPOINT) == 0)
                return PODMUX_SERVING_CHECKPOINT;
        return PODMUX_SERVING_UNKNOWN;
}

static struct src_state *src_find(const struct podmux_client *c, const char *source)
{
        for (size_t i = 0; i < c->n_srcs; i++)
                if (strcmp(c->srcs[i].source, source) == 0)
                        return &c->srcs[i];
        return NULL;
}

/* s (NULL: live) as the public view of source. */
static void src_view(const struct src_state *s, const char *source, struct podmux_source_state *v)
{
        memset(v, 0, sizeof(*v));
        v->source = source;
        v->serving = s ? serving_of(s->state) : PODMUX_SERVING_LIVE;
        v->state = s ? s->state : PROTO_SERVING_LIVE;
        if (s) {
                v->checkpoint_time = s->cp_time;
                v->checkpoint_resource_version = s->cp_rv;
                v->seq = s->seq;
        }
}

static void tell_source(struct podmux_client *c, const struct podmux_source_state *v)
{
        logf_(c, PODMUX_LOG_INFO, "source %s on \"%s\": %s%s%s%s%s%s", v->source, c->path, v->state,
              v->checkpoint_time ? " of " : "", v->checkpoint_time ? v->checkpoint_time : "",
              v->checkpoint_resource_version ? " at resourceVersion " : "",
              v->checkpoint_resource_version ? v->checkpoint_resource_version : "",
              v->resync ? " (not said again after synced)" : "");
        if (c->on_source && !c->stop_requested)
                c->on_source(c, v, c->data);
}

static bool str_same(const char *a, const char *b)
{
        return a == b || (a && b && strcmp(a, b) == 0);
}

/* The source dropped (it is live), and told. */
static void src_drop(struct podmux_client *c, struct src_state *s, uint64_t seq, bool resync)
{
        struct src_state gone = *s;
        struct podmux_source_state v;

        *s = c->srcs[--c->n_srcs];
        src_view(NULL, gone.source, &v);
        v.seq = seq;
        v.resync = resync;
        tell_source(c, &v);
        src_state_free(&gone);
}

/* A "source" message: the state kept (dropped for "live"), told when it
 * changed.  0 or -ENOMEM (nothing changed). */
static int apply_source(struct podmux_client *c, const struct client_msg *m)
{
        struct src_state *old = src_find(c, m->source), n = {0};
        struct podmux_source_state v;

        if (old && strcmp(old->state, m->state) == 0 && str_same(old->cp_time, m->cp_time) &&
            str_same(old->cp_rv, m->cp_rv)) {
                old->confirmed = true; /* said again: unchanged */
        } else if (strcmp(m->state, PROTO_SERVING_LIVE) == 0) {
                if (old)
                        src_drop(c, old, m->seq, false);
        } else {
                n.source = strdup(m->source);
                n.state = strdup(m->state);
                n.cp_time = m->cp_time ? strdup(m->cp_time) : NULL;
                n.cp_rv = m->cp_rv ? strdup(m->cp_rv) : NULL;
                if (!n.source || !n.state || (m->cp_time && !n.cp_time) || (m->cp_rv && !n.cp_rv))
                        goto nomem;
                if (!old) {
                        struct src_state *grown = realloc(c->srcs, (c->n_srcs + 1) * sizeof(*grown));

                        if (!grown)
                                goto nomem;
                        c->srcs = grown;
                        old = &c->srcs[c->n_srcs++];
                } else {
                        src_state_free(old);
                }
                n.seq = m->seq;
                n.confirmed = true;
                *old = n;
                src_view(old, old->source, &v);
                tell_source(c, &v);
        }
        c->point = m->seq;
        c->have_point = true;
        return 0;
nomem:
        src_state_free(&n);
        return -ENOMEM;
}

/* A synced: the daemon says again, right after it, every state that is
 * not live. */
static void confirm_begin(struct podmux_client *c)
{
        for (size_t i = 0; i < c->n_srcs; i++)
                c->srcs[i].confirmed = false;
        c->confirming = c->n_srcs > 0;
}

/* The first message after synced that is not a "source" message: a state
 * not said again is live now (told, resync). */
static void confirm_end(struct podmux_client *c)
{
        size_t i = 0;

        c->confirming = false;
        while (i < c->n_srcs) {
                if (c->srcs[i].confirmed)
                        i++;
                else
                        src_drop(c, &c->srcs[i], 0, true);
        }
}

bool podmux_client_source_state(const struct podmux_client *c, const char *source,
                                struct podmux_source_state *ret_state)
{
        const struct src_state *s = source ? src_find(c, source) : NULL;

        if (ret_state)
                src_view(s, source, ret_state);
        return s != NULL;
}

/* A pods message prepared for the cache and the indexes: 0, or -ENOMEM
 * (or an index function's error) with nothing changed. */
static int pods_prepare(struct podmux_client *c, const struct client_msg *m, struct cache_prep *prep,
                        struct index_prep *iprep)
{
        int r = cache_pods_prepare(&c->cache, m, prep);

        if (r < 0)
                return r;
        /* A SET's pods are the new cache (prep->set), in order. */
        if (m->op == PODMUX_OP_SET)
                r = index_prepare(&c->ix, m->op, prep->set.v, prep->set.n, iprep);
        else
                r = index_prepare(&c->ix, m->op, m->pods, m->n_pods, iprep);
        if (r < 0)
                cache_prep_free(prep);
        return r;
}

static void pods_commit(struct podmux_client *c, const struct client_msg *m, struct cache_prep *prep,
                        struct index_prep *iprep)
{
        index_commit(&c->ix, iprep);
        index_prep_free(iprep);
        cache_pods_commit(&c->cache, m, prep);
        cache_prep_free(prep);
}

/* The held pods' removal from the indexes prepared.  0 or -ENOMEM. */
static int held_index_prepare(struct podmux_client *c, struct index_prep *iprep)
{
        struct podmux_pod **v = malloc(c->cache.n_held * sizeof(*v));
        size_t k = 0;
        int r;

        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < c->cache.n; i++)
                if (c->cache.v[i]->held)
                        v[k++] = c->cache.v[i];
        r = index_prepare(&c->ix, PODMUX_OP_REMOVE, v, k, iprep);
        free(v); /* the prepared removal keeps no pointer to it */
        return r;
}

/* sources_ready: every configured source has delivered, so a pod still
 * held over was not delivered again (or its source is gone): removed,
 * as REMOVE records flagged resync, before the list is told.  0 or
 * -ENOMEM (nothing changed). */
static int release_held(struct podmux_client *c, const struct client_msg *m)
{
        struct diff d = {0};
        struct index_prep iprep = {0};
        char **copy = NULL;

        if (c->cache.n_held && (cache_held_records(&c->cache, &d) < 0 || held_index_prepare(c, &iprep) < 0)) {
                diff_free(&d);
                return -ENOMEM;
        }
        if (ready_prepare(c, m, &copy) < 0) {
                index_prep_free(&iprep);
                diff_free(&d);
                return -ENOMEM;
        }
        index_commit(&c->ix, &iprep);
        index_prep_free(&iprep);
        if (c->cache.n_held) {
                size_t n_held = c->cache.n_held;

                /* Dropped before the log handler runs: it may read the
                 * cache and the indexes, which must agree. */
                cache_drop_held(&c->cache);
                logf_(c, PODMUX_LOG_INFO,
                      "sources ready on \"%s\": %zu pods held over since the last full state were not delivered "
                      "again: removed",
                      c->path, n_held);
        }
        c->point = m->seq;
        c->have_point = true;
        for (size_t i = 0; i < d.n_recs; i++)
                deliver_pods(c, d.recs[i].op, d.recs[i].source, d.recs[i].pods, d.recs[i].n_pods, 0, true);
        diff_free(&d);
        ready_commit(c, m, copy);
        return 0;
}

/* A pods message while pods are held over (doc/protocol.md, "A restarted
 * daemon's late sources").  An ADD that carries a held pod again ends its
 * hold-over: the cache takes the text, and the pod is handed on only if
 * it changed, in an UPDATE flagged resync after the ADD (which goes on
 * with the other pods, maybe none).  A SET keeps the held pods it does
 * not carry and is handed on with the whole cache.  Other ops go as live.
 * 0, or -1 with c->end set (nothing applied). */
static int apply_pods_held(struct podmux_client *c, const struct client_msg *m)
{
        struct client_msg view = *m; /* the pods applied; owns nothing */
        struct podmux_pod **keep = NULL, **upd = NULL, **all = NULL;
        size_t n_keep = 0, n_upd = 0, k = 0;
        struct cache_prep prep;
        struct index_prep iprep;

        if (m->op == PODMUX_OP_ADD) {
                keep = malloc((m->n_pods + 1) * sizeof(*keep));
                upd = malloc((m->n_pods + 1) * sizeof(*upd));
                for (size_t i = 0; keep && upd && i < m->n_pods; i++) {
                        struct podmux_pod *p = m->pods[i];
                        const struct podmux_pod *h = cache_by_key(&c->cache, p->source, p->uid);
                        int same = h && h->held ? client_pod_text_same(h->json, h->len, p->json, p->len) : -EAGAIN;

                        if (same == -EAGAIN)
                                keep[n_keep++] = p;
                        else if (same < 0)
                                goto nomem; /* -ENOMEM: the texts were checked when they came */
                        else if (!same)
                                upd[n_upd++] = p;
                }
                if (!keep || !upd)
                        goto nomem;
        } else if (m->op == PODMUX_OP_SET) {
                /* Held pods first: of a source and UID, the SET's wins. */
                all = malloc((c->cache.n_held + m->n_pods + 1) * sizeof(*all));
                if (!all)
                        goto nomem;
                for (size_t i = 0; i < c->cache.n; i++)
                        if (c->cache.v[i]->held)
                                all[k++] = c->cache.v[i];
                memcpy(all + k, m->pods, m->n_pods * sizeof(*all));
                view.pods = all;
                view.n_pods = k + m->n_pods;
        }
        if (pods_prepare(c, &view, &prep, &iprep) < 0)
                goto nomem;
        pods_commit(c, &view, &prep, &iprep);
        c->point = m->seq;
        c->have_point = true;
        if (m->op == PODMUX_OP_ADD) {
                deliver_pods(c, m->op, m->source, keep, n_keep, m->seq, false);
                if (n_upd)
                        deliver_pods(c, PODMUX_OP_UPDATE, m->source, upd, n_upd, 0, true);
        } else if (m->op == PODMUX_OP_SET) {
                deliver_pods(c, m->op, m->source, c->cache.v, c->cache.n, m->seq, false);
        } else {
                deliver_pods(c, m->op, m->source, m->pods, m->n_pods, m->seq, false);
        }
        free(keep);
        free(upd);
        free(all);
        return 0;
nomem:
        free(keep);
        free(upd);
        free(all);
        end_nomem(c, m->seq);
        return -1;
}

/* One message applied to the cache and handed on, as live.  0, or -1 with
 * c->end set (the point did not move). */
static int apply_one(struct podmux_client *c, const struct client_msg *m)
{
        struct cache_prep prep;
        struct index_prep iprep;

        switch (m->type) {
        case CLIENT_MSG_PODS:
                if (c->cache.n_held)
                        return apply_pods_held(c, m);
                if (pods_prepare(c, m, &prep, &iprep) < 0) {
                        end_nomem(c, m->seq);
                        return -1;
                }
                pods_commit(c, m, &prep, &iprep);
                c->point = m->seq;
                c->have_point = true;
                deliver_pods(c, m->op, m->source, m->pods, m->n_pods, m->seq, false);
                return 0;
        case CLIENT_MSG_PLUGIN:
                if (cache_plugin_apply(&c->cache, m) < 0) {
                        end_nomem(c, m->seq);
                        return -1;
                }
                c->point = m->seq;
                c->have_point = true;
                deliver_plugin(c, m->plugin_op, NULL, m, false);
                return 0;
        case CLIENT_MSG_SOURCES_READY:
                if (release_held(c, m) < 0) {
                        end_nomem(c, m->seq);
                        return -1;
                }
                return 0;
        case CLIENT_MSG_SOURCE:
                if (apply_source(c, m) < 0) {
                        end_nomem(c, m->seq);
                        return -1;
                }
                return 0;
        default:
                break;
        }
        c->point = m->seq;
        c->have_point = true;
        return 0;
}

/* The held messages of a full state applied to an empty cache (fresh);
 * *ready the last sources_ready among them.  0 or -ENOMEM (fresh to be
 * freed by the caller). */
static int build_state(struct podmux_client *c, struct cache *fresh, const struct client_msg **ready)
{
        for (size_t i = 0; i < c->n_held; i++) {
                const struct client_msg *m = &c->held[i];
                struct cache_prep prep;

                if (m->type == CLIENT_MSG_PODS) {
                        if (cache_pods_prepare(fresh, m, &prep) < 0)
                                return -ENOMEM;
                        cache_pods_commit(fresh, m, &prep);
                        cache_prep_free(&prep);
                } else if (m->type == CLIENT_MSG_PLUGIN) {
                        if (cache_plugin_apply(fresh, m) < 0)
                                return -ENOMEM;
                } else if (m->type == CLIENT_MSG_SOURCES_READY) {
                        *ready = m;
                }
        }
        return 0;
}

/* A full state met by a cache that holds only what came after a saved
 * resume point: what went away before it is unknown here, so no
 * difference can be told.  The state is handed on whole: one SET of every
 * pod (source "*") and REGISTERED for every plugin, resync. */
static void tell_whole(struct podmux_client *c)
{
        logf_(c, PODMUX_LOG_INFO,
              "full state from \"%s\": %zu pods, handed on whole (the cache held only what came after the "
              "resume point)",
              c->path, c->cache.n);
        deliver_pods(c, PODMUX_OP_SET, "*", c->cache.v, c->cache.n, 0, true);
        for (size_t i = 0; i < c->cache.n_plugins; i++)
                deliver_plugin(c, "REGISTERED", &c->cache.plugins[i], NULL, true);
}

/* The sources that delivered in the full state held: the source of each
 * pods message and of each pod.  *ret points into them (free the array
 * only).  0 or -ENOMEM. */
static int delivered_sources(const struct podmux_client *c, const struct cache *fresh, const char ***ret, size_t *ret_n)
{
        const char **v = malloc((c->n_held + fresh->n + 1) * sizeof(*v));
        size_t n = 0;

        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < c->n_held + fresh->n; i++) {
                const struct client_msg *m = i < c->n_held ? &c->held[i] : NULL;
                const char *s = m ? m->source : fresh->v[i - c->n_held]->source;
                size_t j = 0;

                if (m && m->type != CLIENT_MSG_PODS)
                        continue;
                while (j < n && strcmp(v[j], s) != 0)
                        j++;
                if (j == n)
                        v[n++] = s;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

/*
 * A full state: built aside, compared, swapped in, the difference told.
 * When it replaces a cache that held pods, the pods of a source that did
 * not deliver in it (the daemon restarted and has not heard from that
 * source yet) are held over: kept as they were, not told
 * (doc/protocol.md, "A restarted daemon's late sources").
 */
static int apply_state(struct podmux_client *c, const struct client_msg *synced)
{
        struct cache fresh = {0}, old;
        struct diff d = {0};
        struct index_prep iprep = {0};
        const struct client_msg *ready = NULL;
        const char **delivered = NULL;
        size_t n_delivered = 0, i;
        bool resync = c->synced_once, whole = !c->partial, hold = false;

        if (build_state(c, &fresh, &ready) < 0)
                goto nomem;
        /* sources_ready among them: every source delivered. */
        hold = whole && c->cache.n > 0 && !ready;
        if (hold && (delivered_sources(c, &fresh, &delivered, &n_delivered) < 0 ||
                     cache_hold_over(&c->cache, &fresh, delivered, n_delivered) < 0))
                goto nomem;
        if ((whole && cache_diff(&c->cache, &fresh, &d) < 0) ||
            index_prepare(&c->ix, PODMUX_OP_SET, fresh.v, fresh.n, &iprep) < 0 || (ready && apply_ready(c, ready) < 0))
                goto nomem;
        if (hold)
                cache_mark_held(&fresh, delivered, n_delivered);
        free(delivered);
        index_commit(&c->ix, &iprep);
        index_prep_free(&iprep);
        old = c->cache;
        c->cache = fresh;
        c->point = synced->seq;
        c->have_point = true;
        c->partial = false;
        if (!whole) {
                tell_whole(c);
                cache_free(&old);
                return 0;
        }
        logf_(c, PODMUX_LOG_INFO, "full state from \"%s\": %zu pods, %zu records of difference%s, %zu held over",
              c->path, c->cache.n, d.n_recs, resync ? " (resync)" : "", c->cache.n_held);
        for (i = 0; i < d.n_recs; i++)
                deliver_pods(c, d.recs[i].op, d.recs[i].source, d.recs[i].pods, d.recs[i].n_pods, 0, resync);
        for (i = 0; i < d.n_plugins; i++)
                deliver_plugin(c, d.plugins[i].registered ? "REGISTERED" : "DEREGISTERED", d.plugins[i].ent,
                               NULL, resync);
        diff_free(&d);
        cache_free(&old);
        return 0;
nomem:
        free(delivered);
        index_prep_free(&iprep);
        diff_free(&d);
        cache_free(&fresh);
        end_nomem(c, synced->seq);
        return -1;
}

static int on_synced(struct podmux_client *c, const struct client_msg *m)
{
        if (m->resumed) {
                if (!c->have_point) {
                        set_end(c, PODMUX_ERROR_BAD_MESSAGE, -EBADMSG, NULL,
                                "\"%s\" answered a replay to a client that did not ask to resume", c->path);
                        return -1;
                }
                logf_(c, PODMUX_LOG_INFO, "resumed after %" PRIu64 " on \"%s\": %zu messages replayed",
                      c->point, c->path, c->n_held);
                for (size_t i = 0; i < c->n_held; i++) {
                        /* A handler stopped the client: nothing more is
                         * applied, and the point stays the last applied. */
                        if (c->stop_requested)
                                return 0;
                        if (c->held[i].seq <= c->point) {
                                set_end(c, PODMUX_ERROR_BAD_MESSAGE, -EBADMSG, NULL,
                                        "\"%s\" replayed message %" PRIu64 ", not after %" PRIu64, c->path,
                                        c->held[i].seq, c->point);
                                return -1;
                        }
                        if (apply_one(c, &c->held[i]) < 0)
                                return -1;
                }
                c->point = m->seq;
        } else if (apply_state(c, m) < 0) {
                return -1;
        }
        held_clear(c);
        confirm_begin(c);
        c->live = true;
        c->synced_once = true;
        backoff_reset(&c->backoff);
        c->attempt = 0;
        if (c->on_synced && !c->stop_requested)
                c->on_synced(c, m->resumed, c->data);
        return 0;
}

static int hold(struct podmux_client *c, struct client_msg *m)
{
        if (GROW(c->held, c->held_cap, c->n_held + 1, 16) < 0)
                return -ENOMEM;
        c->held[c->n_held++] = *m; /* moved: m is not cleared by the caller */
        memset(m, 0, sizeof(*m));
        return 0;
}

/* PODMUX_ERROR_ and a kind of util/proto_words.h, once it is expanded. */
#define KIND_(k) PODMUX_ERROR_##k
#define KIND(k) KIND_(k)

static int server_error(struct podmux_client *c, const struct client_msg *m)
{
        static const struct {
                const char *reason;
                enum podmux_error_kind kind;
                int err;
        } map[] = {
#define REASON(reason, kind, err) {reason, PODMUX_ERROR_##kind, -err},
                PROTO_ERROR_REASONS(REASON)
#undef REASON
        };
        enum podmux_error_kind kind = KIND(PROTO_ERROR_OTHER_KIND);
        int err = -PROTO_ERROR_OTHER_ERRNO;

        for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
                if (strcmp(m->reason, map[i].reason) == 0) {
                        kind = map[i].kind;
                        err = map[i].err;
                }
        }
        set_end(c, kind, err, m->reason, "\"%s\" closed the connection: %s: %s", c->path, m->reason,
                m->message ? m->message : "");
        return -1;
}

/* The start of a bad line for its error message, which stays one line:
 * at most EXCERPT_MAX bytes of line[0..len) (the buffer goes on with the
 * lines after it), cut before a UTF-8 continuation byte and then marked
 * "..." (set_end() replaces control characters).  out holds EXCERPT_MAX +
 * 4 bytes. */
static const char *excerpt(const char *line, size_t len, char out[EXCERPT_MAX + 4])
{
        size_t n = len;

        if (n > EXCERPT_MAX) {
                n = EXCERPT_MAX;
                while (n > 0 && ((unsigned char)line[n] & 0xc0) == 0x80)
                        n--;
        }
        memcpy(out, line, n);
        memcpy(out + n, n < len ? "..." : "", n < len ? 4 : 1);
        return out;
}

/* One line.  0 to go on, -1 when the connection is to end (c->end set). */
static int handle_line(struct podmux_client *c, const char *line, size_t len)
{
        struct client_msg m;
        struct buf why = BUF_INIT;
        int r;

        r = client_msg_parse(line, len, &m, &why);
        if (r == -ENOMEM) {
                buf_free(&why);
                set_end(c, PODMUX_ERROR_NOMEM, -ENOMEM, NULL,
                        "out of memory reading a message from \"%s\"; resynchronizing", c->path);
                return -1;
        }
        if (r == -EPROTONOSUPPORT) {
                buf_free(&why);
                set_end(c, PODMUX_ERROR_PROTOCOL, r, NULL,
                        "\"%s\" speaks protocol %" PRId64 "; this library speaks protocol %d (a newer "
                        "libpodmux-client is needed)",
                        c->path, m.protocol, PODMUX_CLIENT_PROTOCOL);
                client_msg_clear(&m);
                return -1;
        }
        if (r < 0) {
                char start[EXCERPT_MAX + 4];

                set_end(c, PODMUX_ERROR_BAD_MESSAGE, -EBADMSG, NULL,
                        "\"%s\" sent a line that is not a protocol %d message (%s): %s", c->path,
                        PODMUX_CLIENT_PROTOCOL, why.len ? why.data : "?", excerpt(line, len, start));
                buf_free(&why);
                return -1;
        }
        buf_free(&why);
        r = 0;
        if (m.type == CLIENT_MSG_ERROR) {
                r = server_error(c, &m);
        } else if (!c->hello_seen) {
                if (m.type != CLIENT_MSG_HELLO) {
                        set_end(c, PODMUX_ERROR_BAD_MESSAGE, -EBADMSG, NULL,
                                "\"%s\" sent a message before its hello", c->path);
                        r = -1;
                } else {
                        c->hello_seen = true;
                        logf_(c, PODMUX_LOG_DEBUG, "hello from \"%s\": node %s, mode %s", c->path,
                              m.node ? m.node : "?", m.mode ? m.mode : "?");
                }
        } else if (m.type == CLIENT_MSG_HELLO) {
                set_end(c, PODMUX_ERROR_BAD_MESSAGE, -EBADMSG, NULL, "\"%s\" sent a second hello", c->path);
                r = -1;
        } else if (!c->live) {
                if (m.type == CLIENT_MSG_SYNCED) {
                        r = on_synced(c, &m);
                } else if (m.type != CLIENT_MSG_OTHER && hold(c, &m) < 0) {
                        set_end(c, PODMUX_ERROR_NOMEM, -ENOMEM, NULL,
                                "out of memory holding the messages before synced from \"%s\"; "
                                "resynchronizing",
                                c->path);
                        r = -1;
                }
        } else if (m.seq <= c->point) {
                set_end(c, PODMUX_ERROR_BAD_MESSAGE, -EBADMSG, NULL,
                        "\"%s\" sent message %" PRIu64 " after %" PRIu64 " (numbers must grow)", c->path, m.seq,
                        c->point);
                r = -1;
        } else {
                if (c->confirming && m.type != CLIENT_MSG_SOURCE)
                        confirm_end(c);
                /* Unless a source handler it called stopped the client. */
                if (!c->stop_requested)
                        r = apply_one(c, &m);
        }
        client_msg_clear(&m);
        return r;
}

/* Every whole line in c->in from scan on.  Returns the bytes consumed. */
static size_t dispatch(struct podmux_client *c, size_t *scan)
{
        size_t start = 0;
        char *nl;

        while (!c->end.pending && !c->stop_requested &&
               (nl = memchr(c->in.data + *scan, '\n', c->in.len - *scan))) {
                size_t end = (size_t)(nl - c->in.data);

                if (end - start > c->max_line) {
                        set_end(c, PODMUX_ERROR_BAD_MESSAGE, -EMSGSIZE, NULL,
                                "\"%s\" sent a line longer than %zu bytes", c->path, c->max_line);
                        break;
                }
                if (c->on_line)
                        c->on_line(c, c->in.data + start, end - start, c->data);
                if (!c->stop_requested)
                        (void)handle_line(c, c->in.data + start, end - start);
                start = end + 1;
                *scan = start;
        }
        return start;
}

/* Reads what is there (up to READ_BUDGET) and dispatches it. */
static void do_read(struct podmux_client *c)
{
        size_t total = 0;
        char eb[128];

        while (total < READ_BUDGET && !c->end.pending && !c->stop_requested) {
                size_t scan = c->in.len, used;
                ssize_t n;

                if (buf_reserve(&c->in, READ_CHUNK) < 0) {
                        set_end(c, PODMUX_ERROR_NOMEM, -ENOMEM, NULL,
                                "out of memory reading from \"%s\"; resynchronizing", c->path);
                        return;
                }
                n = recv(c->fd, c->in.data + c->in.len, READ_CHUNK, MSG_DONTWAIT);
                if (n < 0) {
                        int r = -errno;

                        if (r == -EINTR)
                                continue;
                        if (r == -EAGAIN || r == -EWOULDBLOCK)
                                return;
                        set_end(c, PODMUX_ERROR_CLOSED, r, NULL, "the connection to \"%s\" failed: %s", c->path,
                                errno_str(r, eb, sizeof(eb)));
                        return;
                }
                if (n == 0) {
                        if (c->in.len > 0)
                                logf_(c, PODMUX_LOG_INFO,
                                      "dropped a partial line of %zu bytes: the connection to \"%s\" was cut "
                                      "inside a message",
                                      c->in.len, c->path);
                        set_end(c, PODMUX_ERROR_CLOSED, -ECONNRESET, NULL,
                                "\"%s\" closed the connection%s", c->path,
                                c->live ? "" : " before the state was complete");
                        return;
                }
                total += (size_t)n;
                c->in.len += (size_t)n;
                c->in.data[c->in.len] = '\0';
                used = dispatch(c, &scan);
                buf_consume(&c->in, used);
                if (!c->end.pending && c->in.len > c->max_line) {
                        set_end(c, PODMUX_ERROR_BAD_MESSAGE, -EMSGSIZE, NULL,
                                "\"%s\" sent a line longer than %zu bytes", c->path, c->max_line);
                        return;
                }
        }
}

int podmux_client_process(struct podmux_client *c)
{
        if (c->st != ST_STOPPED && c->stop_requested)
                stop_now(c, -ECANCELED);
        if (c->st == ST_STOPPED)
                return c->stop_err;
        if (c->st == ST_IDLE && mono_usec() >= c->next_attempt)
                do_connect(c);
        if (c->st == ST_CONNECTED && !c->end.pending) {
                flush_out(c);
                do_read(c);
                if (!c->end.pending && c->st == ST_CONNECTED && update_events(c) < 0)
                        set_end(c, PODMUX_ERROR_CLOSED, -EIO, NULL, "cannot watch the connection to \"%s\"",
                                c->path);
        }
        /* Between messages the cache is whole: a handler map that could
         * not follow a record catches up on it.  If it cannot either, the
         * connection ends like any out of memory, so this is retried when
         * the client reconnects. */
        informer_fix(c, &c->inf, c->cache.v, c->cache.n);
        if (c->inf.stale && c->st == ST_CONNECTED && !c->end.pending)
                set_end(c, PODMUX_ERROR_NOMEM, -ENOMEM, NULL,
                        "out of memory handing changes to the handlers of \"%s\": resynchronizing", c->path);
        if (c->end.pending)
                end_connection(c);
        if (c->st != ST_STOPPED && c->stop_requested)
                stop_now(c, -ECANCELED);
        return c->st == ST_STOPPED ? c->stop_err : 0;
}

int podmux_client_run(struct podmux_client *c, int timeout_ms)
{
        uint64_t deadline = timeout_ms >= 0 ? mono_usec() + (uint64_t)timeout_ms * 1000u : 0;

        for (;;) {
                struct pollfd pfd = {.fd = c->epfd, .events = POLLIN};
                int r = podmux_client_process(c), wait;

                if (r < 0)
                        return r;
                wait = podmux_client_timeout(c);
                if (timeout_ms >= 0) {
                        uint64_t now = mono_usec();
                        int left;

                        if (now >= deadline)
                                return 0;
                        left = (int)((deadline - now + 999) / 1000);
                        if (wait < 0 || left < wait)
                                wait = left;
                }
                if (poll(&pfd, 1, wait) < 0)
                        return -errno; /* -EINTR: the caller looks at its signal */
        }
}

/* ---- the cache ------------------------------------------------------------------------ */

bool podmux_client_has_synced(const struct podmux_client *c)
{
        return c->synced_once && !c->partial;
}

bool podmux_client_resume_point(const struct podmux_client *c, uint64_t *ret_seq)
{
        if (!c->have_point)
                return false;
        if (ret_seq)
                *ret_seq = c->point;
        return true;
}

size_t podmux_client_pod_count(const struct podmux_client *c)
{
        return c->cache.n;
}

const struct podmux_pod *podmux_client_pod_by_uid(const struct podmux_client *c, const char *uid)
{
        return cache_by_uid(&c->cache, uid);
}

const struct podmux_pod *podmux_client_pod_by_name(const struct podmux_client *c, const char *namespace_,
                                                   const char *name)
{
        return cache_by_name(&c->cache, namespace_, name);
}

const struct podmux_pod *podmux_client_pod_first(const struct podmux_client *c)
{
        return c->cache.n ? c->cache.v[0] : NULL;
}

const struct podmux_pod *podmux_client_pod_next(const struct podmux_client *c, const struct podmux_pod *p)
{
        size_t pos;

        if (!p)
                return NULL;
        if (cache_find(&c->cache, p, &pos))
                pos++;
        return pos < c->cache.n ? c->cache.v[pos] : NULL;
}

bool podmux_client_plugin_next(const struct podmux_client *c, size_t *it, const char **ret_socket,
                               const char **ret_plugin_json)
{
        if (*it >= c->cache.n_plugins)
                return false;
        if (ret_socket)
                *ret_socket = c->cache.plugins[*it].socket;
        if (ret_plugin_json)
                *ret_plugin_json = c->cache.plugins[*it].json;
        (*it)++;
        return true;
}

bool podmux_client_sources_ready(const struct podmux_client *c, const char *const **ret_sources,
                                 size_t *ret_n)
{
        if (!c->have_ready)
                return false;
        if (ret_sources)
                *ret_sources = (const char *const *)c->ready;
        if (ret_n)
                *ret_n = c->n_ready;
        return true;
}

/* ---- pods ---------------------------------------------------------------------------------- */

const char *podmux_pod_json(const struct podmux_pod *p, size_t *ret_len)
{
        if (ret_len)
                *ret_len = p->len;
        return p->json;
}

const char *podmux_pod_uid(const struct podmux_pod *p) { return p->uid; }
const char *podmux_pod_namespace(const struct podmux_pod *p) { return p->ns; }
const char *podmux_pod_name(const struct podmux_pod *p) { return p->name; }
const char *podmux_pod_source(const struct podmux_pod *p) { return p->source; }

int podmux_pod_object(const struct podmux_pod *p, struct json_object **ret_obj)
{
        int r = json_parse(p->json, p->len, CLIENT_MSG_MAX_DEPTH, ret_obj, NULL);

        /* The text was checked when it arrived: only memory can fail. */
        return r < 0 ? -ENOMEM : 0;
}

const struct podmux_pod *podmux_pod_ref(const struct podmux_pod *p)
{
        return client_pod_ref((struct podmux_pod *)p);
}

void podmux_pod_unref(const struct podmux_pod *p)
{
        client_pod_unref((struct podmux_pod *)p);
}

/* ---- per-file records ------------------------------------------------------------------------ */

int podmux_record_path(struct json_object *record, char **ret_path, size_t *ret_len)
{
        size_t len;
        int r = json_path_get(record, ret_path, &len);

        if (r == 0 && ret_len)
                *ret_len = len;
        return r;
}
