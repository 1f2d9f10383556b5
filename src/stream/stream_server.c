/*
 * stream_server — the update stream (see src/stream/stream_server.h and
 * doc/protocol.md, protocol 1).
 *
 * One piece, on purpose (about 2,000 lines): the consumer's life cycle,
 * the history it resumes from and the fan-out all act on the same
 * consumer ring and state machine, and the step to LIVE must read the
 * history's end in the same callback that queues "synced"; split apart,
 * each part would reach into the others' invariants.  What is separable
 * lives beside it: the first line's parser (stream_request.c) and the
 * per-file members (files_msg.c).
 *
 * Messages are built once, as one line of JSON text, into a reference
 * counted block (struct msg).  Every consumer queue holds references, so
 * a broadcast to N consumers costs one render plus N pointer appends,
 * never N copies.  The history keeps a pods message as its record, whose
 * pods are the merger's own (shared, immutable, reference counted), and
 * renders it again, byte for byte, only when a consumer resumes: in the
 * snapshot modes every message carries every pod, and keeping their text
 * would make the history hold its length times the node's pods.
 *
 * Each consumer has a ring of references and the offset already written
 * of the first one; a flush is one sendmsg() of up to FLUSH_IOV blocks.
 *
 * Writes are batched: queueing defers one flush pass to the end of the
 * loop turn, and while the loop broadcasts a stream of messages a live
 * consumer's queue waits until it reaches a bound in bytes or in time
 * (flush_consumers()).  So several broadcasts cost one syscall per
 * consumer, and nothing here ever blocks.  A consumer whose socket is
 * full waits for EPOLLOUT, watched only then: a reader that keeps up
 * never wakes the loop.
 *
 * A consumer's life: GREETING (hello queued; waiting at most
 * STREAM_RESUME_GRACE_USEC for its resume line; broadcasts are not queued
 * to it — they are in the history, or in the state it will be given, and
 * the news among them, which no state holds, is kept for it) -> REPLAY
 * (resuming: it is fed from the history, REPLAY_BUDGET bytes at a time as
 * its socket drains, up to the newest message, broadcasts included, so a
 * replay costs a little memory however long it is; one that falls so far
 * behind that the history drops its next message is cut) -> LIVE (after
 * the replay, or kept news and the state; synced, sources_ready) ->
 * CLOSING (an error is queued; nothing else is; closed once the error is
 * written or after CLOSE_TIMEOUT_USEC).  Because the step to LIVE reads
 * the end of the history or the merger's state in the same loop callback
 * that queues synced, a consumer holds exactly the merger's state when it
 * sees "synced".
 *
 * State and news: a pods message, a plugin REGISTERED or DEREGISTERED and
 * sources_ready stand for state, and a state built later holds what they
 * said (the merger's pods, the plugins registered now, sources_ready
 * after synced); sending them too would apply them twice.  A plugin
 * FAILED is news: no state holds it.  So every message numbered after a
 * consumer's hello reaches it, in order of number: a replay has them all;
 * a full state is preceded by the news kept since hello (lower numbers
 * than the state's, which are taken when it is built).
 *
 * Sequence numbers: one counter, each message takes the next number.  A
 * replay re-sends history messages as they were, with their original
 * (lower) numbers, between hello and synced; from synced on, numbers a
 * consumer sees only grow.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4(); the build defines it too */
#endif

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>

#include "util/arena.h"
#include "util/grow.h"
#include "util/str.h" /* ERRNO_STR */
#include "stream/stream_request.h"
#include "util/ring.h"
#include "util/search.h"
#include "stream/stream_server.h"
#include "util/strmap.h"
#include "util/unix_listen.h"
#include "util/proto_words.h"

/* How long a consumer being closed (error queued) may take to read it. */
#define CLOSE_TIMEOUT_USEC (2u * 1000u * 1000u)
/* Pause of the listener after accept() failed for want of memory, or of
 * descriptors when the spare one could not be used: the connection stays
 * pending and the listener readable, so retrying at once would spin. */
#define ACCEPT_RETRY_USEC (100u * 1000u)
/* What the spare descriptor is opened on (libuv's trick for EMFILE). */
#define RESERVE_PATH "/dev/null"
/* Connections accepted per wake-up, so a connect storm cannot starve the
 * other descriptors of the loop. */
#define ACCEPT_BATCH 64
/* Message blocks per sendmsg(). */
#define FLUSH_IOV 64
/* Bytes a consumer may make us read and drop per wake-up after its first
 * line (level-triggered epoll brings us back for the rest). */
#define IGNORE_READ_BUDGET (64u * 1024u)
/* A replaying consumer is given history messages while its unsent backlog
 * is below this (at least one message at a time). */
#define REPLAY_BUDGET (256u * 1024u)
/* While the loop is busy broadcasting (in this iteration and the one
 * before), a live consumer's messages are kept back until an iteration
 * broadcasts nothing, this many bytes wait, or the oldest has waited
 * CORK_USEC; see flush_consumers().  CORK_USEC is the bound on the delay
 * a stream of messages adds. */
#define CORK_BYTES (64u * 1024u)
#define CORK_USEC 5000u

/* Messages up to this length are kept in the server's arena with their
 * text; a longer one (a SET of many pods) keeps the buffer it was
 * rendered in, which the allocator maps apart from its heap. */
#define MSG_INLINE_MAX (16u * 1024u)
/* The arena's segments: large enough to be mapped apart from the heap. */
#define MSG_SEGMENT (256u * 1024u)

/* A block of the server's arena (util/arena.h): a backlog that drains
 * gives its memory back instead of leaving holes among the pods. */
struct msg {
        unsigned refs;
        bool news;      /* no state holds it (a plugin FAILED) */
        bool own_text;  /* text is an allocation of its own */
        uint64_t seq;
        size_t len;
        char *text; /* len bytes: one JSON object and '\n' */
};

/* One message of the history: a pods message by its record (rendered
 * again for a replay), any other by its text (a few hundred bytes). */
struct hist_entry {
        uint64_t seq;
        size_t len;            /* its text's length: what a replay sends */
        struct pod_update *u;  /* a pods message, or NULL */
        struct msg *m;         /* any other (or a pods message whose record
                                * could not be copied), or NULL */
};

enum consumer_state {
        CONSUMER_GREETING,
        CONSUMER_REPLAY,
        CONSUMER_LIVE,
        CONSUMER_CLOSING,
};

struct consumer {
        struct stream_server *srv;
        struct consumer *prev, *next;
        int fd;
        struct loop_io *io;
        struct loop_timer *timer; /* resume grace, then close timeout */
        enum consumer_state state;
        bool read_eof;   /* the client shut its side: stop reading */
        /* Its socket took less than it was given: EPOLLOUT is watched,
         * and the flush pass leaves c to it (consumer_watch()). */
        bool full;
        struct ring q;   /* of struct msg *: references */
        uint64_t queued_at; /* monotonic time the queue last stopped being empty */
        size_t offset;   /* bytes of the first block already written */
        size_t backlog;  /* unwritten bytes in the queue */
        char *line;      /* the first line, while GREETING */
        size_t line_len;
        struct msg **news; /* while GREETING: news broadcast since hello */
        size_t n_news, cap_news;
        uint64_t replay_ix; /* while REPLAY: the next history entry, as an
                             * absolute index (see hist_gone) */
        bool status;     /* asked for the status, not the stream */
        bool files;      /* asked for the per-file records, not the pods */
        pid_t pid;       /* the peer, from SO_PEERCRED (0 if unknown) */
        uid_t uid;
        uint64_t since;  /* wall clock at accept, microseconds */
};

struct stream_server {
        struct loop *loop;
        char *path;
        char *mode_name;
        char *node_name;
        size_t max_consumers;
        size_t max_backlog;
        stream_state_fn state_fn;
        void *state_data;
        stream_status_fn status_fn;
        void *status_data;
        stream_files_fn files_fn;
        void *files_data;
        size_t n_files; /* files consumers */

        struct unix_listener lis;
        struct loop_io *io;
        struct loop_timer *accept_timer;
        /* The spare descriptor (-1 while given up or lost), and the
         * episode of descriptor exhaustion we are in, if any. */
        int reserve_fd;
        bool fd_exhausted;
        uint64_t fd_refused; /* connections refused in this episode */
        stream_fd_fn fd_fn;
        void *fd_data;
        /* The flush, when a deferred call cannot be queued for want of
         * memory (a timer at 0 cannot fail). */
        struct loop_timer *flush_timer;
        bool flush_scheduled; /* flush_deferred() is queued */
        /* flush_next() is queued for the next iteration: consumers are
         * kept back (flush_consumers()). */
        bool next_scheduled;
        /* The loop iterations (loop_turns()) of the last broadcast, and
         * of the last one in an earlier iteration (flush_consumers()). */
        uint64_t bcast_turn, prev_bcast_turn;

        struct arena *msgs; /* where messages are kept (struct msg) */
        uint64_t seq;   /* the last number handed out */
        /* A resume_after below floor may have missed a message no longer
         * in the history: the newest evicted number, or the counter's start
         * (nothing from an earlier run can be replayed). */
        uint64_t floor;
        /* The last hist_cap broadcasts (struct hist_entry), its block
         * reserved at start so that keeping one never allocates. */
        struct ring hist;
        size_t hist_cap;
        /* Entries ever evicted: the absolute index of the oldest kept. */
        uint64_t hist_gone;
        /* Their text's length (as a replay sends it), at most
         * hist_max_bytes. */
        size_t hist_bytes, hist_max_bytes;

        /* Registered plugins, socket -> rendered "plugin" object, sent as
         * REGISTERED messages in a new consumer's initial state. */
        struct strmap *plugins;

        char **ready; /* sources_ready names, once announced */
        size_t n_ready;
        bool is_ready;

        /* Sources that do not serve what they read from their origin now:
         * source -> the members of their "source" message after "seq",
         * said again to each consumer after its synced.  NULL until the
         * first (stream_server_source_state). */
        struct strmap *source_states;

        struct consumer *consumers;
        size_t n_consumers;
        uint64_t dropped;

        gid_t socket_gid;
        uid_t *allow_uids;
        size_t n_allow_uids;
        gid_t *allow_gids;
        size_t n_allow_gids;
};

/* ---- message blocks ---------------------------------------------------- */

static void msg_unref(struct msg *m)
{
        if (!m || --m->refs > 0)
                return;
        if (m->own_text)
                free(m->text);
        arena_free(m);
}

/* Turns the text in b (without its newline) into a block of arena a
 * numbered seq.  b is left empty.  0 or -ENOMEM. */
static int msg_wrap(struct arena *a, struct buf *b, uint64_t seq, struct msg **ret_msg)
{
        struct msg *m;
        bool inline_text;

        if (buf_putc(b, '\n') < 0)
                goto nomem;
        inline_text = b->len <= MSG_INLINE_MAX;
        /* A long one is rare: its header apart too, keeping no segment. */
        m = inline_text ? arena_alloc(a, sizeof(*m) + b->len) : arena_alloc_apart(sizeof(*m));
        if (!m)
                goto nomem;
        *m = (struct msg){.refs = 1, .seq = seq, .own_text = !inline_text};
        if (inline_text) {
                m->text = (char *)(m + 1);
                memcpy(m->text, b->data, b->len);
                m->len = b->len;
                buf_free(b);
        } else {
                m->text = buf_steal(b, &m->len); /* b has its bytes: never NULL */
        }
        *ret_msg = m;
        return 0;
nomem:
        buf_free(b);
        return -ENOMEM;
}

/* m itself, or, for one of the arena, a copy of its own (the same
 * message): what a message kept for long holds, so that it does not keep
 * the arena segment of the messages made around it.  Never fails: out of
 * memory, m itself. */
static struct msg *msg_keep(struct msg *m)
{
        struct msg *k;

        if (m->own_text || !(k = arena_alloc_apart(sizeof(*k) + m->len))) {
                m->refs++;
                return m;
        }
        *k = *m;
        k->refs = 1;
        k->text = (char *)(k + 1);
        memcpy(k->text, m->text, m->len);
        return k;
}

/*
 * msg_wrap(), then commits seq as the server's last number.  Builders
 * compute seq as srv->seq + 1 and call this only when the text is
 * complete, so a failed build uses no number.
 */
static int msg_finish(struct stream_server *srv, struct buf *b, uint64_t seq,
                      struct msg **ret_msg)
{
        int r = msg_wrap(srv->msgs, b, seq, ret_msg);

        if (r == 0)
                srv->seq = seq;
        return r;
}

static int msg_hello(struct stream_server *srv, struct msg **ret_msg)
{
        struct buf b = BUF_INIT;
        uint64_t seq = srv->seq + 1;

        if (buf_printf(&b, "{\"type\":\"hello\",\"protocol\":%d,\"mode\":",
                       STREAM_PROTOCOL) < 0 ||
            buf_json_string(&b, srv->mode_name, strlen(srv->mode_name)) < 0 ||
            buf_puts(&b, ",\"node\":") < 0 ||
            buf_json_string(&b, srv->node_name, strlen(srv->node_name)) < 0 ||
            buf_printf(&b, ",\"seq\":%" PRIu64 "}", seq) < 0) {
                buf_free(&b);
                return -ENOMEM;
        }
        return msg_finish(srv, &b, seq, ret_msg);
}

/* The text of pods message u numbered seq, into b (emptied on failure).
 * The same record and number always give the same bytes: a replay
 * renders a kept record again.  0, -EINVAL or -ENOMEM. */
static int render_pods(struct buf *b, const struct pod_update *u, uint64_t seq)
{
        const char *op = pod_op_to_string(u->op);

        if (!op || !u->source)
                return -EINVAL;
        if (buf_printf(b, "{\"type\":\"pods\",\"seq\":%" PRIu64 ",\"op\":\"%s\",\"source\":", seq, op) < 0 ||
            buf_json_string(b, u->source, strlen(u->source)) < 0 || buf_puts(b, ",\"pods\":[") < 0)
                goto nomem;
        for (size_t i = 0; i < u->n_pods; i++)
                if ((i > 0 && buf_putc(b, ',') < 0) || pod_render(u->pods[i], b) < 0)
                        goto nomem;
        if (buf_puts(b, "]}") < 0)
                goto nomem;
        return 0;
nomem:
        buf_free(b);
        return -ENOMEM;
}

/* A new pods message: the next number. */
static int msg_pods(struct stream_server *srv, const struct pod_update *u,
                    struct msg **ret_msg)
{
        struct buf b = BUF_INIT;
        uint64_t seq = srv->seq + 1;
        int r = render_pods(&b, u, seq);

        if (r < 0)
                return r;
        return msg_finish(srv, &b, seq, ret_msg);
}

static int msg_plugin(struct stream_server *srv, const char *op, const char *plugin_json,
                      const char *error, struct msg **ret_msg)
{
        struct buf b = BUF_INIT;
        uint64_t seq = srv->seq + 1;

        if (buf_printf(&b, "{\"type\":\"plugin\",\"seq\":%" PRIu64 ",\"op\":", seq) < 0 ||
            buf_json_string(&b, op, strlen(op)) < 0 || buf_puts(&b, ",\"plugin\":") < 0 ||
            buf_puts(&b, plugin_json) < 0)
                goto nomem;
        if (error && (buf_puts(&b, ",\"error\":") < 0 || buf_json_string(&b, error, strlen(error)) < 0))
                goto nomem;
        if (buf_putc(&b, '}') < 0)
                goto nomem;
        return msg_finish(srv, &b, seq, ret_msg);
nomem:
        buf_free(&b);
        return -ENOMEM;
}

static int cmp_cstr(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int consumer_push(struct consumer *c, struct msg *m);
static int consumer_push_built(struct consumer *c, int build_r, struct msg *m);

/* The sockets of the registered plugins, sorted (the order consumers get
 * them in).  *ret_keys (NULL when none) points into the map; the caller
 * frees the array only.  0 or -ENOMEM. */
static int plugin_keys(const struct stream_server *srv, const char ***ret_keys, size_t *ret_n)
{
        size_t n = strmap_size(srv->plugins), i = 0, it = 0;
        const char **keys;
        const char *k;

        *ret_keys = NULL;
        *ret_n = 0;
        if (n == 0)
                return 0;
        keys = calloc(n, sizeof(*keys));
        if (!keys)
                return -ENOMEM;
        while (strmap_next(srv->plugins, &it, &k, NULL))
                keys[i++] = k;
        qsort(keys, n, sizeof(*keys), cmp_cstr);
        *ret_keys = keys;
        *ret_n = n;
        return 0;
}

/* The REGISTERED messages of a new consumer's initial state, in socket
 * order. */
static int push_plugins(struct consumer *c)
{
        struct stream_server *srv = c->srv;
        const char **keys = NULL;
        size_t n = 0;
        int r = plugin_keys(srv, &keys, &n);

        for (size_t i = 0; i < n && r >= 0; i++) {
                struct msg *m = NULL;

                r = msg_plugin(srv, "REGISTERED", strmap_get(srv->plugins, keys[i]), NULL, &m);
                r = consumer_push_built(c, r, m);
        }
        free(keys);
        return r;
}

/* resumed: what came before was a replay of the history (true) or the
 * full current state (false), so a client that asked to resume knows
 * which it got. */
static int msg_synced(struct stream_server *srv, bool resumed, struct msg **ret_msg)
{
        struct buf b = BUF_INIT;
        uint64_t seq = srv->seq + 1;

        if (buf_printf(&b, "{\"type\":\"synced\",\"seq\":%" PRIu64 ",\"resumed\":%s}", seq,
                       resumed ? "true" : "false") < 0) {
                buf_free(&b);
                return -ENOMEM;
        }
        return msg_finish(srv, &b, seq, ret_msg);
}

static int msg_sources_ready(struct stream_server *srv, struct msg **ret_msg)
{
        struct buf b = BUF_INIT;
        uint64_t seq = srv->seq + 1;
        size_t i;

        if (buf_printf(&b, "{\"type\":\"sources_ready\",\"seq\":%" PRIu64
                       ",\"sources\":[", seq) < 0)
                goto nomem;
        for (i = 0; i < srv->n_ready; i++) {
                if ((i > 0 && buf_putc(&b, ',') < 0) ||
                    buf_json_string(&b, srv->ready[i], strlen(srv->ready[i])) < 0)
                        goto nomem;
        }
        if (buf_puts(&b, "]}") < 0)
                goto nomem;
        return msg_finish(srv, &b, seq, ret_msg);
nomem:
        buf_free(&b);
        return -ENOMEM;
}

/* A "source" message: body is its members after "seq" (no braces). */
static int msg_source(struct stream_server *srv, const char *body, struct msg **ret_msg)
{
        struct buf b = BUF_INIT;
        uint64_t seq = srv->seq + 1;

        if (buf_printf(&b, "{\"type\":\"source\",\"seq\":%" PRIu64 ",%s}", seq, body) < 0) {
                buf_free(&b);
                return -ENOMEM;
        }
        return msg_finish(srv, &b, seq, ret_msg);
}

static int msg_error(struct stream_server *srv, const char *reason,
                     const char *message, struct msg **ret_msg)
{
        struct buf b = BUF_INIT;
        uint64_t seq = srv->seq + 1;

        if (buf_printf(&b, "{\"type\":\"error\",\"seq\":%" PRIu64 ",\"reason\":",
                       seq) < 0 ||
            buf_json_string(&b, reason, strlen(reason)) < 0 ||
            buf_puts(&b, ",\"message\":") < 0 ||
            buf_json_string(&b, message, strlen(message)) < 0 ||
            buf_putc(&b, '}') < 0) {
                buf_free(&b);
                return -ENOMEM;
        }
        return msg_finish(srv, &b, seq, ret_msg);
}

static const char *consumer_state_name(const struct consumer *c)
{
        switch (c->state) {
        case CONSUMER_GREETING:
                return "greeting";
        case CONSUMER_REPLAY:
                return "replaying";
        case CONSUMER_LIVE:
                return "live";
        case CONSUMER_CLOSING:
                break;
        }
        return "closing";
}

/* The answer to a status request (`podmux status`): what this server
 * holds, plus the members the daemon adds through status_fn. */
static int msg_status(struct stream_server *srv, struct msg **ret_msg)
{
        struct buf b = BUF_INIT;
        uint64_t seq = srv->seq + 1;
        const char **keys = NULL;
        size_t n = 0;
        bool first = true;

        if (buf_printf(&b, "{\"type\":\"status\",\"seq\":%" PRIu64 ",\"protocol\":%d,\"mode\":", seq,
                       STREAM_PROTOCOL) < 0 ||
            buf_json_string(&b, srv->mode_name, strlen(srv->mode_name)) < 0 || buf_puts(&b, ",\"node\":") < 0 ||
            buf_json_string(&b, srv->node_name, strlen(srv->node_name)) < 0 ||
            buf_printf(&b, ",\"last_seq\":%" PRIu64 ",\"history\":{\"messages\":%zu,\"bytes\":%zu}"
                           ",\"dropped_consumers\":%" PRIu64 ",\"consumers\":[",
                       srv->seq, srv->hist.len, srv->hist_bytes, srv->dropped) < 0)
                goto nomem;
        for (const struct consumer *c = srv->consumers; c; c = c->next) {
                if (c->status)
                        continue;
                if ((!first && buf_putc(&b, ',') < 0) ||
                    buf_printf(&b, "{\"pid\":%ld,\"uid\":%lu,\"since\":", (long)c->pid, (unsigned long)c->uid) < 0 ||
                    buf_json_time(&b, c->since) < 0 ||
                    buf_printf(&b, ",\"state\":\"%s\",\"stream\":\"%s\",\"backlog\":%zu}", consumer_state_name(c),
                               c->files ? "files" : "pods", c->backlog) < 0)
                        goto nomem;
                first = false;
        }
        if (buf_puts(&b, "],\"plugins\":[") < 0)
                goto nomem;
        if (plugin_keys(srv, &keys, &n) < 0)
                goto nomem;
        for (size_t i = 0; i < n; i++)
                if ((i > 0 && buf_putc(&b, ',') < 0) || buf_puts(&b, strmap_get(srv->plugins, keys[i])) < 0)
                        goto nomem;
        if (buf_putc(&b, ']') < 0)
                goto nomem;
        if (srv->status_fn && srv->status_fn(srv->status_data, &b) < 0)
                goto nomem;
        if (buf_putc(&b, '}') < 0)
                goto nomem;
        free(keys);
        return msg_finish(srv, &b, seq, ret_msg);
nomem:
        free(keys);
        buf_free(&b);
        return -ENOMEM;
}

/* ---- history ----------------------------------------------------------- */

static void hist_entry_clear(struct hist_entry *e)
{
        pod_update_free(e->u);
        msg_unref(e->m);
        memset(e, 0, sizeof(*e));
}

/*
 * Keeps broadcast m, dropping the oldest messages past the count or the
 * byte bound (a message larger than the byte bound is still kept, alone).
 * u: m's record when m is a pods message, kept instead of m's text (with
 * new references to its pods); should that copy fail for want of memory,
 * the text is kept, which is only bigger.  Evicting raises the floor.
 * Cost O(1) amortised, plus O(n) pointer copies for a record of n pods
 * (rendering it cost more).
 */
static void history_push(struct stream_server *srv, struct msg *m, const struct pod_update *u)
{
        struct hist_entry e = {m->seq, m->len, NULL, NULL};

        while (srv->hist.len > 0 &&
               (srv->hist.len == srv->hist_cap || srv->hist_bytes + m->len > srv->hist_max_bytes)) {
                struct hist_entry *old = ring_at(&srv->hist, 0);

                if (old->seq > srv->floor)
                        srv->floor = old->seq;
                srv->hist_bytes -= old->len;
                hist_entry_clear(old);
                ring_pop(&srv->hist);
                srv->hist_gone++;
        }
        if (!u || pod_update_share(u, &e.u) < 0) {
                e.u = NULL;
                e.m = msg_keep(m);
        }
        (void)ring_push(&srv->hist, &e); /* reserved: cannot fail */
        srv->hist_bytes += m->len;
}

/* Queues history entry e to c, rendering a kept record again.  0 or
 * -ENOMEM. */
static int consumer_push_kept(struct consumer *c, const struct hist_entry *e)
{
        struct buf b = BUF_INIT;
        struct msg *m = NULL;
        int r;

        if (e->m)
                return consumer_push(c, e->m);
        r = render_pods(&b, e->u, e->seq);
        if (r >= 0)
                r = msg_wrap(c->srv->msgs, &b, e->seq, &m);
        return consumer_push_built(c, r, m);
}

/* ---- consumers ---------------------------------------------------------- */

/* Releases the news kept for a GREETING consumer. */
static void news_drop(struct consumer *c)
{
        for (size_t i = 0; i < c->n_news; i++)
                msg_unref(c->news[i]);
        free(c->news);
        c->news = NULL;
        c->n_news = c->cap_news = 0;
}

/* Keeps a reference to news m for a GREETING consumer, to send before its
 * state.  0 or -ENOMEM.  O(1) amortised; holds only FAILED messages of
 * the grace period, so it stays small. */
static int news_keep(struct consumer *c, struct msg *m)
{
        if (GROW(c->news, c->cap_news, c->n_news + 1, 4) < 0)
                return -ENOMEM;
        m->refs++;
        c->news[c->n_news++] = m;
        return 0;
}

static void consumer_free(struct consumer *c)
{
        struct stream_server *srv;

        if (!c)
                return;
        srv = c->srv;
        if (c->prev)
                c->prev->next = c->next;
        else if (srv->consumers == c)
                srv->consumers = c->next;
        if (c->next)
                c->next->prev = c->prev;
        srv->n_consumers--;
        if (c->files)
                srv->n_files--;
        loop_io_free(c->io);
        loop_timer_free(c->timer);
        if (c->fd >= 0)
                close(c->fd);
        while (c->q.len > 0) {
                msg_unref(*(struct msg **)ring_at(&c->q, 0));
                ring_pop(&c->q);
        }
        ring_free(&c->q);
        free(c->line);
        news_drop(c);
        free(c);
}

static void flush_deferred(void *data);

/* Consumers are written once per loop pass, after everything the pass
 * broadcast: a deferred call (no syscall), or, should queueing it fail
 * for want of memory, the flush timer at 0 (which cannot fail). */
static void schedule_flush(struct stream_server *srv)
{
        if (srv->flush_scheduled)
                return;
        if (loop_defer(srv->loop, flush_deferred, srv) == 0)
                srv->flush_scheduled = true;
        else
                loop_timer_arm(srv->flush_timer, 0);
}

/* Queues a new reference to m.  0 or -ENOMEM.  Cost O(1) amortised. */
static int consumer_push(struct consumer *c, struct msg *m)
{
        if (c->q.len == 0)
                c->queued_at = mono_usec();
        if (ring_push(&c->q, &m) < 0)
                return -ENOMEM;
        m->refs++;
        c->backlog += m->len;
        schedule_flush(c->srv);
        return 0;
}

/* Queues a block just built for c alone (build_r is the builder's
 * result, m NULL when it failed) and drops the builder's reference. */
static int consumer_push_built(struct consumer *c, int build_r, struct msg *m)
{
        int r = build_r;

        if (r >= 0)
                r = consumer_push(c, m);
        msg_unref(m);
        return r;
}

/*
 * Queues an error and stops queueing anything else to c: it is closed once
 * the error is written, or after CLOSE_TIMEOUT_USEC.  The error is queued
 * past any backlog bound, so the queue may exceed it by that one message.
 * If the error cannot be built, c is still closed once its queue drains.
 *
 * The queue ahead of the error is not dropped: the error's number is past
 * every queued message, and a client resumes after the last number it
 * read, so dropping them would lose them.  A client that has stopped
 * reading altogether therefore may not get the error before the close
 * timeout: it sees the end of the stream (maybe after a partial line) and
 * resumes after the last whole message, losing nothing.
 */
static void consumer_fail(struct consumer *c, const char *reason,
                          const char *message)
{
        struct msg *m = NULL;
        int r;

        if (c->state == CONSUMER_CLOSING)
                return;
        c->state = CONSUMER_CLOSING;
        free(c->line);
        c->line = NULL;
        news_drop(c);
        r = msg_error(c->srv, reason, message, &m);
        (void)consumer_push_built(c, r, m);
        loop_timer_arm(c->timer, CLOSE_TIMEOUT_USEC);
        schedule_flush(c->srv);
}

/*
 * Makes c's watch ask for what c waits for: EPOLLIN until the client shut
 * its side, EPOLLOUT only while its socket is full.  The watch is
 * level-triggered, so EPOLLOUT on a socket with room would wake the loop
 * every turn; and a socket with room says nothing when the peer reads,
 * so a reader that keeps up costs the loop no wake-up (where watching
 * each read cost one per delivered message).  One epoll_ctl() when the
 * mask changes, none otherwise.  0 or -errno: c can no longer be
 * watched, and the caller closes it.
 */
static int consumer_watch(struct consumer *c)
{
        return loop_io_modify(c->io, (c->read_eof ? 0 : EPOLLIN) | (c->full ? EPOLLOUT : 0));
}

/* Writes what the socket takes, as many queued blocks per sendmsg() as
 * FLUSH_IOV, a block cut anywhere (c->offset says where to go on).  0
 * (maybe with data left: c->full) or -errno for a connection that is gone
 * (EPIPE, ECONNRESET, ...) or can no longer be watched. */
static int consumer_flush(struct consumer *c)
{
        while (c->q.len > 0) {
                struct iovec iov[FLUSH_IOV];
                struct msghdr mh;
                size_t n = 0, total = 0, left;
                ssize_t w;

                while (n < c->q.len && n < FLUSH_IOV) {
                        struct msg *m = *(struct msg **)ring_at(&c->q, n);
                        size_t off = n == 0 ? c->offset : 0;

                        iov[n].iov_base = m->text + off;
                        iov[n].iov_len = m->len - off;
                        total += m->len - off;
                        n++;
                }
                memset(&mh, 0, sizeof(mh));
                mh.msg_iov = iov;
                mh.msg_iovlen = n;
                /* MSG_NOSIGNAL: a consumer that went away is EPIPE here,
                 * not a SIGPIPE that kills the daemon. */
                w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN || errno == EWOULDBLOCK) {
                                c->full = true;
                                return consumer_watch(c);
                        }
                        return -errno;
                }
                c->backlog -= (size_t)w;
                left = (size_t)w;
                while (left > 0) {
                        struct msg *m = *(struct msg **)ring_at(&c->q, 0);
                        size_t rest = m->len - c->offset;

                        if (left < rest) {
                                c->offset += left;
                                break;
                        }
                        left -= rest;
                        c->offset = 0;
                        msg_unref(m);
                        ring_pop(&c->q);
                }
                /* A part taken: the socket is full (or took a part for
                 * another reason, and EPOLLOUT comes at once). */
                c->full = (size_t)w < total;
                if (c->full)
                        break;
        }
        return consumer_watch(c);
}

/* The absolute index of the first history entry numbered after n (one
 * past the newest when there is none).  O(log history). */
struct seq_key {
        const struct ring *hist;
        uint64_t n;
};

static bool numbered_up_to(const void *ctx, size_t i)
{
        const struct seq_key *k = ctx;

        return ((const struct hist_entry *)ring_at(k->hist, i))->seq <= k->n;
}

static uint64_t history_after(const struct stream_server *srv, uint64_t n)
{
        struct seq_key k = {&srv->hist, n};

        return srv->hist_gone + search_first(srv->hist.len, numbered_up_to, &k);
}

/* Ends a catch-up: synced (resumed says whether it was a replay), the
 * sources not live, and, if announced, sources_ready; c is LIVE.  0 or
 * -ENOMEM. */
static int consumer_synced(struct consumer *c, bool resumed)
{
        struct msg *m = NULL;
        int r = msg_synced(c->srv, resumed, &m);
        size_t it = 0;
        void *body;

        r = consumer_push_built(c, r, m);
        if (r < 0)
                return r;
        while (c->srv->source_states && strmap_next(c->srv->source_states, &it, NULL, &body)) {
                m = NULL;
                r = msg_source(c->srv, body, &m);
                r = consumer_push_built(c, r, m);
                if (r < 0)
                        return r;
        }
        if (c->srv->is_ready) {
                m = NULL;
                r = msg_sources_ready(c->srv, &m);
                r = consumer_push_built(c, r, m);
                if (r < 0)
                        return r;
        }
        c->state = CONSUMER_LIVE;
        return 0;
}

/*
 * REPLAY: queues the next history entries while c's backlog is below
 * REPLAY_BUDGET (one at least), and once the newest is queued, synced: c
 * is LIVE.  A next entry the history has dropped cuts c (SlowConsumer: it
 * resumes and gets the full state).  0 or -ENOMEM.  Cost: the messages
 * queued.
 */
static int replay_fill(struct consumer *c)
{
        struct stream_server *srv = c->srv;
        bool first = true;

        if (c->replay_ix < srv->hist_gone) {
                srv->dropped++;
                consumer_fail(c, PROTO_ERROR_SLOW_CONSUMER,
                              "the replay fell behind the history; reconnect with resume_after");
                return 0;
        }
        while (c->replay_ix < srv->hist_gone + srv->hist.len && (first || c->backlog < REPLAY_BUDGET)) {
                const struct hist_entry *e = ring_at(&srv->hist, (size_t)(c->replay_ix - srv->hist_gone));
                int r = consumer_push_kept(c, e);

                if (r < 0)
                        return r;
                c->replay_ix++;
                first = false;
        }
        if (c->replay_ix == srv->hist_gone + srv->hist.len)
                return consumer_synced(c, true);
        return 0;
}

/* Writes, then closes c if it is done or gone.  c may be freed. */
static void consumer_pump(struct consumer *c)
{
        if (consumer_flush(c) < 0) {
                consumer_free(c); /* gone: dropped quietly */
                return;
        }
        if (c->state == CONSUMER_REPLAY && c->backlog < REPLAY_BUDGET / 4 && replay_fill(c) < 0) {
                c->srv->dropped++;
                consumer_fail(c, PROTO_ERROR_RESOURCE_EXHAUSTED, "out of memory replaying the history; reconnect");
        }
        if (c->state == CONSUMER_CLOSING && c->q.len == 0)
                consumer_free(c);
}

/*
 * The end of GREETING.  have_resume: the client asked to resume after n.
 * If nothing after n was evicted and n is not in the future, c replays the
 * history after n (REPLAY, see replay_fill()).  Otherwise queues the news
 * kept since hello (numbered between hello and now), then the merger's
 * state, one message per record, and the registered plugins, then synced
 * and, if announced, sources_ready, all in this callback, so no broadcast
 * can fall between the state read here and the first live message.  The
 * bound on the backlog is not applied to this catch-up: it is checked
 * when live messages are queued, so a consumer is dropped only for falling
 * behind live traffic.  0 or -ENOMEM (the caller closes c).
 */
static int consumer_start(struct consumer *c, bool have_resume, uint64_t n)
{
        struct stream_server *srv = c->srv;
        struct pod_update **ups = NULL;
        size_t n_ups = 0, i;
        struct msg *m = NULL;
        bool replay = have_resume && n >= srv->floor && n <= srv->seq;
        int r = 0;

        loop_timer_stop(c->timer);
        free(c->line);
        c->line = NULL;
        if (replay) {
                /* The replay holds the kept news too, numbered. */
                news_drop(c);
                c->replay_ix = history_after(srv, n);
                c->state = CONSUMER_REPLAY;
                return replay_fill(c);
        } else {
                /* Kept news first: numbered before the state is built. */
                for (i = 0; i < c->n_news && r >= 0; i++)
                        r = consumer_push(c, c->news[i]);
                news_drop(c);
                if (r < 0)
                        return r;
                if (srv->state_fn) {
                        r = srv->state_fn(srv->state_data, &ups, &n_ups);
                        for (i = 0; i < n_ups && r >= 0; i++) {
                                m = NULL;
                                r = msg_pods(srv, ups[i], &m);
                                r = consumer_push_built(c, r, m);
                        }
                        for (i = 0; i < n_ups; i++)
                                pod_update_free(ups[i]);
                        free(ups);
                        if (r == -ENOMEM)
                                return r;
                        if (r < 0) {
                                /* The merger could not say what it holds (or
                                 * handed a record with no op name): this
                                 * consumer cannot be brought in sync. */
                                char text[160];

                                (void)snprintf(text, sizeof(text), "cannot build the current state: %s",
                                               ERRNO_STR(r));
                                consumer_fail(c, PROTO_ERROR_INTERNAL_ERROR, text);
                                return 0;
                        }
                }
                r = push_plugins(c);
                if (r < 0)
                        return r;
        }
        return consumer_synced(c, false);
}

/* A request other than the pods' (status, files): its first line is
 * read, and the news kept for a pods consumer is not for it. */
static void request_begin(struct consumer *c)
{
        loop_timer_stop(c->timer);
        free(c->line);
        c->line = NULL;
        news_drop(c);
}

/* A status request: one status message, then the connection closes. */
static int consumer_status(struct consumer *c)
{
        struct msg *m = NULL;
        int r;

        request_begin(c);
        r = msg_status(c->srv, &m);
        r = consumer_push_built(c, r, m);
        if (r < 0)
                return r;
        c->state = CONSUMER_CLOSING;
        loop_timer_arm(c->timer, CLOSE_TIMEOUT_USEC);
        return 0;
}

/* A message {"type":TYPE,"seq":N MEMBERS}, the next number.  0 or
 * -ENOMEM. */
static int msg_members(struct stream_server *srv, const char *type, const char *members, struct msg **ret_msg)
{
        struct buf b = BUF_INIT;
        uint64_t seq = srv->seq + 1;

        if (buf_puts(&b, "{\"type\":") < 0 || buf_json_string(&b, type, strlen(type)) < 0 ||
            buf_printf(&b, ",\"seq\":%" PRIu64, seq) < 0 || buf_puts(&b, members) < 0 || buf_putc(&b, '}') < 0) {
                buf_free(&b);
                return -ENOMEM;
        }
        return msg_finish(srv, &b, seq, ret_msg);
}

static int files_emit(void *ctx, const char *type, const char *members)
{
        struct consumer *c = ctx;
        struct msg *m = NULL;
        int r = msg_members(c->srv, type, members, &m);

        return consumer_push_built(c, r, m);
}

/* A files request: the records the callback emits, synced, then the
 * changes stream_server_files() sends.  0 or -ENOMEM (the caller closes
 * c). */
static int consumer_files(struct consumer *c)
{
        struct stream_server *srv = c->srv;
        struct msg *m = NULL;
        int r;

        request_begin(c);
        c->files = true;
        srv->n_files++;
        r = srv->files_fn(srv->files_data, files_emit, c);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                char text[160];

                (void)snprintf(text, sizeof(text), "cannot list the files: %s", ERRNO_STR(r));
                consumer_fail(c, PROTO_ERROR_INTERNAL_ERROR, text);
                return 0;
        }
        r = msg_synced(srv, false, &m);
        r = consumer_push_built(c, r, m);
        if (r < 0)
                return r;
        c->state = CONSUMER_LIVE;
        return 0;
}

/* The first line (len bytes at c->line, newline excluded), see
 * stream_request.h.  A bad line fails c with BadRequest.  0 or -ENOMEM. */
static int consumer_line(struct consumer *c, size_t len)
{
        struct stream_request req;
        const char *why = NULL;
        int r;

        r = stream_request_parse(c->line, len, &req, &why);
        if (r == -EINVAL) {
                consumer_fail(c, PROTO_ERROR_BAD_REQUEST, why);
                return 0;
        }
        if (r < 0)
                return r;
        if (req.status) {
                c->status = true;
                return consumer_status(c);
        }
        if (req.files && !c->srv->files_fn) {
                consumer_fail(c, PROTO_ERROR_BAD_REQUEST, "this daemon keeps no per-file records (no file source)");
                return 0;
        }
        if (req.files)
                return consumer_files(c);
        return consumer_start(c, req.have_resume, req.resume_after);
}

/* recv() of what is there: bytes read, 0 at the end, -EAGAIN when there
 * is nothing, or -errno. */
static ssize_t recv_some(int fd, void *into, size_t size)
{
        for (;;) {
                ssize_t n = recv(fd, into, size, 0);

                if (n >= 0)
                        return n;
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                        return -EAGAIN;
                if (errno != EINTR)
                        return -errno;
        }
}

/* GREETING: gathers the first line.  0 or -errno (c is to be closed). */
static int consumer_read_line(struct consumer *c)
{
        for (;;) {
                size_t room = STREAM_MAX_CLIENT_LINE + 1 - c->line_len;
                ssize_t n = recv_some(c->fd, c->line + c->line_len, room);
                char *nl;

                if (n < 0)
                        return n == -EAGAIN ? 0 : (int)n;
                if (n == 0) {
                        /* Shut without a newline: what came is the line. */
                        c->read_eof = true;
                        if (c->line_len == 0)
                                return consumer_start(c, false, 0);
                        return consumer_line(c, c->line_len);
                }
                nl = memchr(c->line + c->line_len, '\n', (size_t)n);
                c->line_len += (size_t)n;
                if (nl)
                        return consumer_line(c, (size_t)(nl - c->line));
                if (c->line_len > STREAM_MAX_CLIENT_LINE) {
                        char text[96];

                        (void)snprintf(text, sizeof(text),
                                       "the first line is longer than %d bytes",
                                       STREAM_MAX_CLIENT_LINE);
                        consumer_fail(c, PROTO_ERROR_BAD_REQUEST, text);
                        return 0;
                }
        }
}

/* After the first line: reads and drops, at most IGNORE_READ_BUDGET bytes
 * per wake-up (the watch is level-triggered: the rest is read on the next
 * pass).  0 or -errno. */
static int consumer_read_ignore(struct consumer *c)
{
        char scratch[4096];
        size_t total = 0;

        while (total < IGNORE_READ_BUDGET) {
                ssize_t n = recv_some(c->fd, scratch, sizeof(scratch));

                if (n < 0)
                        return n == -EAGAIN ? 0 : (int)n;
                if (n == 0) {
                        c->read_eof = true;
                        return 0;
                }
                total += (size_t)n;
        }
        return 0;
}

/*
 * What c's watch reports (consumer_watch()).  EPOLLIN: the first line
 * and what follows it are read in one pass.  EPOLLOUT: the full socket
 * has room, and what waited is written now rather than by the flush
 * pass, which may keep it back while the loop is busy: EPOLLOUT, still
 * watched, would wake every turn until then.
 */
static void consumer_io(struct loop_io *io, int fd, uint32_t events, void *data)
{
        struct consumer *c = data;
        int r = 0;

        /* HUP: the client closed its socket, nothing we send can arrive. */
        if (events & (EPOLLERR | EPOLLHUP)) {
                consumer_free(c);
                return;
        }
        if (events & EPOLLOUT)
                c->full = false;
        if ((events & EPOLLIN) && !c->read_eof) {
                if (c->state == CONSUMER_GREETING)
                        r = consumer_read_line(c);
                if (r >= 0 && c->state != CONSUMER_GREETING && !c->read_eof)
                        r = consumer_read_ignore(c);
                if (r >= 0 && c->read_eof)
                        r = consumer_watch(c); /* EPOLLIN would come every turn */
                if (r < 0) {
                        consumer_free(c);
                        return;
                }
        }
        /* What a live consumer has queued goes out in the flush pass, which
         * keeps it back while the loop is busy (flush_consumers()). */
        if (c->state == CONSUMER_LIVE && c->q.len > 0 && !(events & EPOLLOUT))
                schedule_flush(c->srv);
        else
                consumer_pump(c);
}

static void consumer_timer(struct loop_timer *t, void *data)
{
        struct consumer *c = data;

        if (c->state == CONSUMER_GREETING) {
                /* No resume line in time: the full state. */
                if (consumer_start(c, false, 0) < 0) {
                        consumer_free(c);
                        return;
                }
                consumer_pump(c);
        } else if (c->state == CONSUMER_CLOSING) {
                consumer_free(c); /* the error was not read in time */
        }
}

static int consumer_new(struct stream_server *srv, int fd, const struct ucred *cred)
{
        struct consumer *c = calloc(1, sizeof(*c));
        struct msg *m = NULL;
        int r;

        if (!c) {
                close(fd);
                return -ENOMEM;
        }
        c->srv = srv;
        c->fd = fd;
        c->since = wall_usec();
        if (cred) {
                c->pid = cred->pid;
                c->uid = cred->uid;
        }
        c->q = (struct ring)RING_INIT(struct msg *);
        c->line = malloc(STREAM_MAX_CLIENT_LINE + 1);
        c->next = srv->consumers;
        if (srv->consumers)
                srv->consumers->prev = c;
        srv->consumers = c;
        srv->n_consumers++;
        if (ring_reserve(&c->q, 8) < 0 || !c->line) {
                r = -ENOMEM;
                goto fail;
        }
        r = loop_io_add(srv->loop, fd, EPOLLIN, consumer_io, c, &c->io);
        if (r < 0)
                goto fail;
        r = loop_timer_new(srv->loop, consumer_timer, c, &c->timer);
        if (r < 0)
                goto fail;
        r = msg_hello(srv, &m);
        r = consumer_push_built(c, r, m);
        if (r < 0)
                goto fail;
        loop_timer_arm(c->timer, STREAM_RESUME_GRACE_USEC);
        return 0;
fail:
        consumer_free(c);
        return r;
}

/* Sends one error to a connection we will not serve, and closes it.  A
 * fresh socket's buffer takes the short line, so one try is enough. */
static void refuse(struct stream_server *srv, int fd, const char *reason,
                   const char *message)
{
        struct msg *m = NULL;

        if (msg_error(srv, reason, message, &m) == 0) {
                ssize_t w = send(fd, m->text, m->len, MSG_NOSIGNAL | MSG_DONTWAIT);

                (void)w;
                msg_unref(m);
        }
        close(fd);
}

/* ---- the listener -------------------------------------------------------- */

/* The allow lists, checked with the peer's credentials at connect time
 * (they cannot be forged over a unix socket). */
static bool peer_allowed(const struct stream_server *srv, const struct ucred *cred)
{
        if (!srv->n_allow_uids && !srv->n_allow_gids)
                return true;
        if (!cred)
                return false;
        if (cred->uid == 0 || cred->uid == geteuid())
                return true;
        for (size_t i = 0; i < srv->n_allow_uids; i++)
                if (srv->allow_uids[i] == cred->uid)
                        return true;
        for (size_t i = 0; i < srv->n_allow_gids; i++)
                if (srv->allow_gids[i] == cred->gid)
                        return true;
        return false;
}

/* Takes the spare descriptor back if it is not held.  0 or -errno. */
static int reserve_take(struct stream_server *srv)
{
        if (srv->reserve_fd < 0)
                srv->reserve_fd = open(RESERVE_PATH, O_RDONLY | O_CLOEXEC);
        return srv->reserve_fd < 0 ? -errno : 0;
}

/*
 * accept() failed with err (EMFILE or ENFILE).  Starts an episode (told
 * once), gives up the spare descriptor for one accept() and answers that
 * connection TooManyConsumers, then takes the spare back.  Each call
 * takes one connection off the backlog, so a flood cannot make us spin.
 * Returns 1 when the caller may accept again, 0 when nothing was pending,
 * -errno when there is no spare to give (the caller pauses the listener).
 */
static int refuse_with_reserve(struct stream_server *srv, int lfd, int err)
{
        int cfd, r;

        if (!srv->fd_exhausted) {
                srv->fd_exhausted = true;
                srv->fd_refused = 0;
                if (srv->fd_fn)
                        srv->fd_fn(srv->fd_data, -err, 0);
        }
        if (srv->reserve_fd < 0)
                return -err;
        close(srv->reserve_fd);
        srv->reserve_fd = -1;
        cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        r = cfd < 0 ? -errno : 1;
        if (cfd >= 0) {
                srv->fd_refused++;
                refuse(srv, cfd, PROTO_ERROR_TOO_MANY_CONSUMERS,
                       "the server has run out of file descriptors; try again later");
        }
        /* The number just freed is the lowest free one again, unless
         * another thread took it meanwhile; then accept_retry() tries. */
        (void)reserve_take(srv);
        if (r == -EAGAIN || r == -EWOULDBLOCK)
                return 0;
        if (r == -EINTR || r == -ECONNABORTED || r == -EPROTO)
                return 1;
        return r;
}

/*
 * A connection was accepted without the spare: the episode ends when the
 * spare is held and one more descriptor is free beside the one just
 * taken.  Without that margin a consumer leaving and another arriving at
 * the limit would end and start an episode each time.
 */
static void episode_check_end(struct stream_server *srv)
{
        int probe;

        if (!srv->fd_exhausted || reserve_take(srv) < 0)
                return;
        probe = open(RESERVE_PATH, O_RDONLY | O_CLOEXEC);
        if (probe < 0)
                return;
        close(probe);
        srv->fd_exhausted = false;
        if (srv->fd_fn)
                srv->fd_fn(srv->fd_data, 0, srv->fd_refused);
}

static void listener_io(struct loop_io *io, int fd, uint32_t events, void *data)
{
        struct stream_server *srv = data;
        struct ucred cred;
        socklen_t cred_len;
        bool have_cred;
        int i, r;

        for (i = 0; i < ACCEPT_BATCH; i++) {
                int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

                if (cfd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED ||
                            errno == EPROTO)
                                continue;
                        if (errno == EAGAIN || errno == EWOULDBLOCK)
                                return;
                        if (errno == EMFILE || errno == ENFILE) {
                                r = refuse_with_reserve(srv, fd, errno);
                                if (r > 0)
                                        continue;
                                if (r == 0)
                                        return;
                        }
                        /* ENOBUFS, ENOMEM, or no spare: pause. */
                        if (loop_io_modify(srv->io, 0) == 0)
                                loop_timer_arm(srv->accept_timer,
                                               ACCEPT_RETRY_USEC);
                        return;
                }
                episode_check_end(srv);
                /* One read of the peer's credentials serves the allow
                 * lists and the status (pid, uid). */
                cred_len = sizeof(cred);
                have_cred = getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) == 0;
                if (!peer_allowed(srv, have_cred ? &cred : NULL)) {
                        refuse(srv, cfd, PROTO_ERROR_FORBIDDEN,
                               "this user may not read the pod stream (see --allow-uids/--allow-gids)");
                        continue;
                }
                if (srv->n_consumers >= srv->max_consumers) {
                        char text[96];

                        (void)snprintf(text, sizeof(text),
                                       "the server has its maximum of %zu consumers",
                                       srv->max_consumers);
                        refuse(srv, cfd, PROTO_ERROR_TOO_MANY_CONSUMERS, text);
                        continue;
                }
                (void)consumer_new(srv, cfd, have_cred ? &cred : NULL); /* on ENOMEM cfd is closed */
        }
}

static void accept_retry(struct loop_timer *t, void *data)
{
        struct stream_server *srv = data;

        (void)reserve_take(srv); /* if it was lost: the next EMFILE needs it */
        if (loop_io_modify(srv->io, EPOLLIN) < 0)
                loop_timer_arm(t, ACCEPT_RETRY_USEC);
}

static void flush_next(void *data);

/* Whether a pass is queued for the end of the next iteration, queueing
 * it if not: what is kept back waits for it.  False when it cannot be
 * queued (out of memory): nothing may be kept back then. */
static bool next_pass(struct stream_server *srv)
{
        if (!srv->next_scheduled && loop_defer_next(srv->loop, flush_next, srv) == 0)
                srv->next_scheduled = true;
        return srv->next_scheduled;
}

/*
 * The flush pass, once per loop turn at its end: writes every consumer
 * with something queued, except
 *   - those whose socket is full: EPOLLOUT writes them when it has room;
 *   - live ones, while the loop is busy (this iteration broadcast and so
 *     did the one before: a stream, which the next iteration probably
 *     continues), until CORK_BYTES wait for them or the oldest has waited
 *     CORK_USEC.  The pass of the next iteration looks again, and writes
 *     them if that iteration broadcast nothing: the stream has stopped,
 *     or its source waits for the consumers.
 * A message alone is thus written at once; a stream of them, one
 * broadcast per turn, goes in batches, and the system calls
 * (and the readers' wake-ups) per delivered message fall to a fraction,
 * where they were one per message per consumer.  A consumer being
 * closed, replaying or catching up is never kept back.  O(consumers).
 */
static void flush_consumers(struct stream_server *srv)
{
        struct consumer *c, *next;

        uint64_t turn = loop_turns(srv->loop);
        /* Busy: this iteration broadcast, and so did the one before (a
         * stream, one message per iteration or more).  A message after an
         * idle wait is written at once. */
        bool busy = srv->bcast_turn == turn && srv->prev_bcast_turn + 1 == turn;
        uint64_t now = busy ? mono_usec() : 0;

        for (c = srv->consumers; c; c = next) {
                next = c->next;
                if (c->q.len == 0 || c->full)
                        continue;
                if (c->state == CONSUMER_LIVE && busy && c->backlog < CORK_BYTES && now - c->queued_at < CORK_USEC &&
                    next_pass(srv))
                        continue;
                consumer_pump(c);
        }
}

static void flush_deferred(void *data)
{
        struct stream_server *srv = data;

        srv->flush_scheduled = false;
        flush_consumers(srv);
}

/* The next iteration's pass (next_pass()), unless that iteration has its
 * own pass queued (it broadcast), which comes after its broadcasts. */
static void flush_next(void *data)
{
        struct stream_server *srv = data;

        srv->next_scheduled = false;
        if (!srv->flush_scheduled)
                flush_consumers(srv);
}

/* The flush, when a deferred call could not be queued: deferred to the
 * end of the turn, after what the turn broadcasts, if it can be now. */
static void flush_all(struct loop_timer *t, void *data)
{
        struct stream_server *srv = data;

        (void)t;
        if (srv->flush_scheduled)
                return;
        if (loop_defer(srv->loop, flush_deferred, srv) == 0)
                srv->flush_scheduled = true;
        else
                flush_consumers(srv); /* out of memory: at once */
}

/* Copies cfg (strings and allow lists too) into a new srv, defaults for
 * what it leaves 0, and makes the history and the plugin map.  0 or
 * -ENOMEM (what was copied is srv's: stream_server_free() frees it). */
static int copy_config(struct stream_server *srv, const struct stream_server_config *cfg)
{
        srv->path = strdup(cfg->socket_path);
        srv->mode_name = strdup(cfg->mode_name ? cfg->mode_name : "incremental");
        srv->node_name = strdup(cfg->node_name ? cfg->node_name : "");
        srv->plugins = strmap_new();
        srv->socket_gid = cfg->set_socket_gid ? cfg->socket_gid : (gid_t)-1;
        if (cfg->n_allow_uids) {
                srv->allow_uids = malloc(cfg->n_allow_uids * sizeof(uid_t));
                if (srv->allow_uids) {
                        memcpy(srv->allow_uids, cfg->allow_uids, cfg->n_allow_uids * sizeof(uid_t));
                        srv->n_allow_uids = cfg->n_allow_uids;
                }
        }
        if (cfg->n_allow_gids) {
                srv->allow_gids = malloc(cfg->n_allow_gids * sizeof(gid_t));
                if (srv->allow_gids) {
                        memcpy(srv->allow_gids, cfg->allow_gids, cfg->n_allow_gids * sizeof(gid_t));
                        srv->n_allow_gids = cfg->n_allow_gids;
                }
        }
        srv->max_consumers = cfg->max_consumers ? cfg->max_consumers
                                                : STREAM_DEFAULT_MAX_CONSUMERS;
        srv->max_backlog = cfg->max_backlog ? cfg->max_backlog
                                            : STREAM_DEFAULT_MAX_BACKLOG;
        srv->hist_cap = cfg->history ? cfg->history : STREAM_DEFAULT_HISTORY;
        srv->hist_max_bytes = cfg->history_bytes ? cfg->history_bytes : STREAM_DEFAULT_HISTORY_BYTES;
        srv->hist = (struct ring)RING_INIT(struct hist_entry);
        srv->state_fn = cfg->state_fn;
        srv->state_data = cfg->state_data;
        srv->status_fn = cfg->status_fn;
        srv->status_data = cfg->status_data;
        srv->files_fn = cfg->files_fn;
        srv->files_data = cfg->files_data;
        srv->fd_fn = cfg->fd_fn;
        srv->fd_data = cfg->fd_data;
        srv->seq = wall_usec();
        srv->floor = srv->seq;
        if (!srv->path || !srv->mode_name || !srv->node_name || ring_reserve(&srv->hist, srv->hist_cap) < 0 ||
            !srv->plugins || srv->n_allow_uids != cfg->n_allow_uids || srv->n_allow_gids != cfg->n_allow_gids)
                return -ENOMEM;
        return 0;
}

/* ---- the socket file ----------------------------------------------------- */

/* ---- public -------------------------------------------------------------- */

int stream_server_new(struct loop *loop, const struct stream_server_config *cfg, struct stream_server **ret_srv,
                      struct buf *err)
{
        struct stream_server *srv = NULL;
        int r;

        if (!loop || !cfg || !cfg->socket_path || !cfg->socket_path[0])
                return buf_set_err(err, -EINVAL, "no socket path");
        srv = calloc(1, sizeof(*srv));
        if (!srv) {
                r = -ENOMEM;
                goto nomem;
        }
        srv->lis.fd = -1;
        srv->reserve_fd = -1;
        srv->loop = loop;
        srv->msgs = arena_new(MSG_SEGMENT);
        r = srv->msgs ? copy_config(srv, cfg) : -ENOMEM;
        if (r < 0)
                goto nomem;
        r = loop_timer_new(loop, flush_all, srv, &srv->flush_timer);
        if (r < 0)
                goto nomem;
        r = loop_timer_new(loop, accept_retry, srv, &srv->accept_timer);
        if (r < 0)
                goto nomem;
        r = reserve_take(srv);
        if (r < 0) {
                r = buf_set_err(err, r, "cannot open %s for the spare descriptor: %s", RESERVE_PATH, ERRNO_STR(r));
                goto fail;
        }
        r = unix_listen(srv->path, cfg->socket_mode ? cfg->socket_mode : STREAM_DEFAULT_SOCKET_MODE,
                        srv->socket_gid, &srv->lis, err);
        if (r < 0)
                goto fail;
        r = loop_io_add(loop, srv->lis.fd, EPOLLIN, listener_io, srv, &srv->io);
        if (r < 0) {
                r = buf_set_err(err, r, "socket \"%s\": %s", srv->path, ERRNO_STR(r));
                goto fail;
        }
        *ret_srv = srv;
        return 0;
nomem:
        if (err)
                buf_reset(err); /* a failure replaces what err held */
fail:
        stream_server_free(srv);
        return r;
}

void stream_server_free(struct stream_server *srv)
{
        struct msg *bye = NULL;
        size_t i;

        if (!srv)
                return;
        /* Best effort: one shared block, one write try, then close. */
        if (srv->consumers)
                (void)msg_error(srv, PROTO_ERROR_SHUTTING_DOWN, "the server is shutting down", &bye);
        while (srv->consumers) {
                struct consumer *c = srv->consumers;

                if (bye && c->state != CONSUMER_CLOSING)
                        (void)consumer_push(c, bye);
                (void)consumer_flush(c);
                consumer_free(c);
        }
        msg_unref(bye);
        loop_io_free(srv->io);
        unix_listener_close(&srv->lis);
        if (srv->reserve_fd >= 0)
                close(srv->reserve_fd);
        loop_defer_cancel(srv->loop, flush_deferred, srv);
        loop_defer_cancel(srv->loop, flush_next, srv);
        loop_timer_free(srv->flush_timer);
        loop_timer_free(srv->accept_timer);
        for (i = 0; i < srv->hist.len; i++)
                hist_entry_clear(ring_at(&srv->hist, i));
        ring_free(&srv->hist);
        for (i = 0; i < srv->n_ready; i++)
                free(srv->ready[i]);
        free(srv->ready);
        strmap_free(srv->plugins, free);
        strmap_free(srv->source_states, free);
        free(srv->allow_uids);
        free(srv->allow_gids);
        free(srv->path);
        free(srv->mode_name);
        free(srv->node_name);
        arena_close(srv->msgs);
        free(srv);
}

/* Remembers the loop iteration of a broadcast (see flush_consumers()). */
static void note_broadcast(struct stream_server *srv)
{
        uint64_t turn = loop_turns(srv->loop);

        if (srv->bcast_turn != turn) {
                srv->prev_bcast_turn = srv->bcast_turn;
                srv->bcast_turn = turn;
        }
}

/* Queues a broadcast block to every LIVE consumer; one that is still past
 * the bound once its socket took what it could gets SlowConsumer.  News is kept for GREETING consumers (a
 * state will not hold it); one that cannot keep it is cut, so it does not
 * start without it.  O(consumers). */
static void fan_out(struct stream_server *srv, struct msg *m)
{
        struct consumer *c, *next;

        note_broadcast(srv);
        for (c = srv->consumers; c; c = next) {
                next = c->next;
                if (c->files)
                        continue; /* they get stream_server_files() only */
                if (c->state == CONSUMER_GREETING && !c->status && m->news) {
                        if (news_keep(c, m) < 0) {
                                srv->dropped++;
                                consumer_fail(c, PROTO_ERROR_RESOURCE_EXHAUSTED,
                                              "out of memory keeping a message for this consumer; reconnect");
                        }
                        continue;
                }
                if (c->state != CONSUMER_LIVE)
                        continue;
                if (consumer_push(c, m) < 0) {
                        /* It would miss this message: cut it rather than
                         * let it believe it is in sync.  The message is in
                         * the history, so resuming gets it. */
                        srv->dropped++;
                        consumer_fail(c, PROTO_ERROR_RESOURCE_EXHAUSTED,
                                      "out of memory queueing a message; reconnect with resume_after");
                        continue;
                }
                /* Over the bound: what the socket takes now does not
                 * count (a burst of large messages in one loop pass must
                 * not cut a consumer that keeps up). */
                if (c->backlog > srv->max_backlog && consumer_flush(c) < 0) {
                        consumer_free(c); /* gone: dropped quietly */
                        continue;
                }
                if (c->backlog > srv->max_backlog) {
                        char text[160];

                        (void)snprintf(text, sizeof(text),
                                       "%zu unsent bytes passed the limit of %zu; "
                                       "reconnect with resume_after",
                                       c->backlog, srv->max_backlog);
                        srv->dropped++;
                        consumer_fail(c, PROTO_ERROR_SLOW_CONSUMER, text);
                }
        }
}

/*
 * A message for every live consumer could not be built, so none of them
 * can be told this change: each is cut with ResourceExhausted (a client
 * reconnects and resumes), and the floor rises past every number handed
 * out so far, so no resume can be answered by a replay that lacks the
 * lost message: a consumer resuming gets the full state.  A consumer
 * replaying would miss it too, and is cut the same way.  Consumers still
 * GREETING lose nothing: they are given the merger's state when they
 * start.  O(consumers).
 */
static void lose_broadcast(struct stream_server *srv)
{
        struct consumer *c, *next;

        for (c = srv->consumers; c; c = next) {
                next = c->next;
                if ((c->state != CONSUMER_LIVE && c->state != CONSUMER_REPLAY) || c->files)
                        continue;
                srv->dropped++;
                consumer_fail(c, PROTO_ERROR_RESOURCE_EXHAUSTED,
                              "out of memory building an update; reconnect with resume_after");
        }
        /* After the errors: a client resumes after its error's number. */
        srv->floor = srv->seq + 1;
}

/* The end of a broadcast whose message make (r, m) built: kept in the
 * history (with u, the record of a pods message) and queued to every
 * consumer.  A message that could not be made for want of memory is a
 * lost broadcast: consumers that missed it are cut (lose_broadcast). */
static int send_made(struct stream_server *srv, int r, struct msg *m, const struct pod_update *u)
{
        if (r == -ENOMEM)
                lose_broadcast(srv);
        if (r < 0)
                return r;
        history_push(srv, m, u);
        fan_out(srv, m);
        msg_unref(m);
        return 0;
}

int stream_server_broadcast(struct stream_server *srv, const struct pod_update *u)
{
        struct msg *m = NULL;
        int r;

        r = msg_pods(srv, u, &m);
        return send_made(srv, r, m, u);
}

int stream_server_plugin(struct stream_server *srv, const char *op, const char *socket,
                         const char *plugin_json, const char *error)
{
        struct msg *m = NULL;
        char *copy = NULL, *old = NULL;
        int r;

        if (!op || !socket || !plugin_json)
                return -EINVAL;
        if (strcmp(op, "REGISTERED") == 0) {
                copy = strdup(plugin_json);
                if (!copy || strmap_put(srv->plugins, socket, copy, (void **)&old) < 0) {
                        free(copy);
                        return -ENOMEM;
                }
                free(old);
        } else if (strcmp(op, "DEREGISTERED") == 0) {
                free(strmap_remove(srv->plugins, socket));
        }
        r = msg_plugin(srv, op, plugin_json, error, &m);
        if (r == 0)
                m->news = strcmp(op, "FAILED") == 0;
        return send_made(srv, r, m, NULL);
}

/* Keeps body as what source says (not live), or forgets it (live).  0
 * or -ENOMEM (nothing changed). */
static int keep_source_state(struct stream_server *srv, const char *source, bool live, const char *body)
{
        char *copy = NULL;
        void *old = NULL;

        if (live) {
                free(srv->source_states ? strmap_remove(srv->source_states, source) : NULL);
                return 0;
        }
        if (!srv->source_states && !(srv->source_states = strmap_new()))
                return -ENOMEM;
        if (!(copy = strdup(body)) || strmap_put(srv->source_states, source, copy, &old) < 0) {
                free(copy);
                return -ENOMEM;
        }
        free(old);
        return 0;
}

int stream_server_source_state(struct stream_server *srv, const char *source, const char *state, const char *members)
{
        struct buf body = BUF_INIT;
        struct msg *m = NULL;
        int r;

        if (!source || !state)
                return -EINVAL;
        if (buf_puts(&body, "\"source\":") < 0 || buf_json_string(&body, source, strlen(source)) < 0 ||
            buf_puts(&body, ",\"state\":") < 0 || buf_json_string(&body, state, strlen(state)) < 0 ||
            (members && buf_puts(&body, members) < 0) ||
            keep_source_state(srv, source, strcmp(state, PROTO_SERVING_LIVE) == 0, body.data) < 0) {
                buf_free(&body);
                return -ENOMEM;
        }
        /* Kept: a consumer cut now resumes, or gets the state, with it. */
        r = msg_source(srv, body.data, &m);
        buf_free(&body);
        return send_made(srv, r, m, NULL);
}

int stream_server_source_checkpoint(struct stream_server *srv, const char *source, uint64_t time_usec,
                                    const char *resource_version)
{
        struct buf m = BUF_INIT;
        int r;

        if (!resource_version)
                return -EINVAL;
        if (buf_puts(&m, ",\"checkpoint\":{\"time\":") < 0 || buf_json_time(&m, time_usec) < 0 ||
            buf_puts(&m, ",\"resource_version\":") < 0 ||
            buf_json_string(&m, resource_version, strlen(resource_version)) < 0 || buf_putc(&m, '}') < 0)
                r = -ENOMEM;
        else
                r = stream_server_source_state(srv, source, PROTO_SERVING_CHECKPOINT, m.data);
        buf_free(&m);
        return r;
}

int stream_server_sources_ready(struct stream_server *srv,
                                const char *const *sources, size_t n)
{
        struct msg *m = NULL;
        char **names = NULL;
        size_t i;
        int r;

        if (srv->is_ready)
                return 0; /* announced once; later calls change nothing */
        if (n > 0 && !sources)
                return -EINVAL;
        for (i = 0; i < n; i++)
                if (!sources[i])
                        return -EINVAL;
        names = calloc(n ? n : 1, sizeof(*names));
        if (!names)
                return -ENOMEM;
        for (i = 0; i < n; i++) {
                names[i] = strdup(sources[i]);
                if (!names[i]) {
                        r = -ENOMEM;
                        goto fail;
                }
        }
        srv->ready = names;
        srv->n_ready = n;
        r = msg_sources_ready(srv, &m);
        if (r < 0) {
                srv->ready = NULL;
                srv->n_ready = 0;
                goto fail;
        }
        srv->is_ready = true;
        history_push(srv, m, NULL);
        fan_out(srv, m);
        msg_unref(m);
        return 0;
fail:
        for (i = 0; i < n; i++)
                free(names[i]);
        free(names);
        return r;
}

/* Queues m to live files consumers, with the backlog bound (see
 * fan_out()); out of memory (m NULL included) cuts them. */
static void files_fan_out(struct stream_server *srv, struct msg *m)
{
        struct consumer *c, *next;

        note_broadcast(srv);
        for (c = srv->consumers; c; c = next) {
                next = c->next;
                if (!c->files || c->state != CONSUMER_LIVE)
                        continue;
                if (!m || consumer_push(c, m) < 0) {
                        srv->dropped++;
                        consumer_fail(c, PROTO_ERROR_RESOURCE_EXHAUSTED,
                                      "out of memory queueing a file's record; ask again");
                        continue;
                }
                if (c->backlog > srv->max_backlog && consumer_flush(c) < 0) {
                        consumer_free(c);
                        continue;
                }
                if (c->backlog > srv->max_backlog) {
                        char text[160];

                        (void)snprintf(text, sizeof(text), "%zu unsent bytes passed the limit of %zu; ask again",
                                       c->backlog, srv->max_backlog);
                        srv->dropped++;
                        consumer_fail(c, PROTO_ERROR_SLOW_CONSUMER, text);
                }
        }
}

int stream_server_files(struct stream_server *srv, const char *type, const char *members)
{
        struct msg *m = NULL;
        int r;

        if (!srv->n_files)
                return 0;
        r = msg_members(srv, type, members, &m);
        files_fan_out(srv, r < 0 ? NULL : m);
        msg_unref(m);
        return r;
}

bool stream_server_files_wanted(const struct stream_server *srv)
{
        return srv->n_files > 0;
}

size_t stream_server_consumers(const struct stream_server *srv)
{
        return srv->n_consumers;
}

uint64_t stream_server_last_seq(const struct stream_server *srv)
{
        return srv->seq;
}

size_t stream_server_plugins(const struct stream_server *srv)
{
        return strmap_size(srv->plugins);
}

uint64_t stream_server_dropped(const struct stream_server *srv)
{
        return srv->dropped;
}
