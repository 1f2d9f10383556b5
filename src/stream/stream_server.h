/*
 * stream_server — the update stream (protocol 1, doc/protocol.md):
 * a unix stream socket, newline-delimited JSON, fan-out to many consumers,
 * a bounded history for resume_after, and per-consumer backlog limits.
 *
 * Owns: the listening socket, its file and lock file, one spare
 * descriptor, every consumer connection, the sequence counter, the
 * history of broadcast messages.
 * Never: knows how pods are merged.  The current state for a new consumer
 * comes from a callback (wired by main to the merger); the merger hands
 * records in with stream_server_broadcast().  It never blocks: a consumer
 * whose unsent backlog passes the bound is sent an error and closed.
 *
 * Sequence numbers start at the wall clock in microseconds when the server
 * starts, so a resume_after from an earlier run of the daemon is always
 * older than this run's history and gets a full state.
 *
 * Every message numbered after a consumer's hello reaches it, in order of
 * number.  A resume gets them from the history.  A full state cannot
 * resend the pods, REGISTERED, DEREGISTERED and sources_ready messages of
 * the wait for the client's line: the state, built when the wait ends,
 * already holds what they said (the merger's pods, the plugins registered
 * now, sources_ready after synced), so they would apply twice.  A plugin
 * FAILED is news that no state holds: those broadcast during the wait are
 * kept for the consumer and sent right after hello, before the state
 * (their numbers are lower than the state's).  So a full-state consumer
 * gets: hello, the FAILED messages since hello, its state (pods per
 * source, then REGISTERED per plugin), synced, a "source" message per
 * source not live, sources_ready if announced.
 *
 * A files consumer (a files request, stream_request.h) gets none of
 * that: hello, the messages the files callback emits (the per-file
 * records), synced, then what stream_server_files() sends, and nothing
 * else; it is never resumed (it asks again and gets the records).  The
 * same backlog bound cuts it.
 */
#ifndef PODMUX_STREAM_SERVER_H
#define PODMUX_STREAM_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/buf.h"
#include "util/loop.h"
#include "core/pod.h"

#define STREAM_PROTOCOL 1
#define STREAM_DEFAULT_SOCKET_MODE 0660
#define STREAM_DEFAULT_MAX_CONSUMERS 1024
#define STREAM_DEFAULT_MAX_BACKLOG (64u * 1024u * 1024u) /* bytes per consumer */
#define STREAM_DEFAULT_HISTORY 4096                      /* messages */
/* The history also stops at this many bytes of text, counted as a replay
 * would send them (oldest dropped first): a resume never makes the server
 * render more than this.  Pods messages are kept as references to the
 * shared pods, so what the history holds in memory is much less. */
#define STREAM_DEFAULT_HISTORY_BYTES (16u * 1024u * 1024u)
#define STREAM_MAX_CLIENT_LINE 4096 /* bytes of the one line a client sends */
/* How long a new consumer may take to send its resume line before it is
 * given the full state.  A client that sends "{}" skips the wait. */
#define STREAM_RESUME_GRACE_USEC (100u * 1000u)

struct stream_server;

/*
 * Fills *ret_updates with the current state as the notification mode would
 * present it: one record per source that has delivered (ADD in incremental
 * mode, SET otherwise), possibly with zero pods.  The server frees the
 * records and the array.  Returns 0 or -errno.
 */
typedef int (*stream_state_fn)(void *data, struct pod_update ***ret_updates, size_t *ret_n);

/*
 * Appends the daemon's own members to a status message (a status request,
 * see stream_request.h): text of the form ,"name":value... (a leading
 * comma, no closing brace).  0 or -ENOMEM.
 */
typedef int (*stream_status_fn)(void *data, struct buf *out);

/*
 * Emits a files consumer's first messages (doc/protocol.md "Files
 * request"): emit(ctx, type, members) once per message, which the server
 * sends as {"type":TYPE,"seq":N MEMBERS}, members being text of the form
 * ,"name":value... (a leading comma).  0 or -errno (emit's -ENOMEM
 * included); the consumer is then cut.
 */
typedef int (*stream_files_fn)(void *data, int (*emit)(void *ctx, const char *type, const char *members), void *ctx);

/*
 * Told when accepting a consumer first fails for want of descriptors (err
 * -EMFILE or -ENFILE, refused 0), and when descriptors are available again
 * (err 0; refused: the connections answered TooManyConsumers meanwhile).
 * Once each per episode, so the caller can log both without a limit.
 */
typedef void (*stream_fd_fn)(void *data, int err, uint64_t refused);

struct stream_server_config {
        const char *socket_path;
        mode_t socket_mode;    /* 0 means STREAM_DEFAULT_SOCKET_MODE */
        const char *mode_name; /* "incremental", "snapshot", "snapshot-and-updates" */
        const char *node_name;
        size_t max_consumers; /* 0: default */
        size_t max_backlog;   /* 0: default */
        size_t history;       /* messages; 0: default */
        size_t history_bytes; /* 0: default */
        stream_state_fn state_fn;
        void *state_data;
        stream_status_fn status_fn; /* may be NULL */
        void *status_data;
        stream_files_fn files_fn; /* NULL: a files request is refused (BadRequest) */
        void *files_data;
        stream_fd_fn fd_fn; /* may be NULL */
        void *fd_data;
        /* Group of the socket file (chown between bind and listen) when
         * set_socket_gid; otherwise the daemon's. */
        bool set_socket_gid;
        gid_t socket_gid;
        /* Peer-credential check (SO_PEERCRED): when either list is
         * non-empty, a consumer whose uid is not in allow_uids and whose
         * gid is not in allow_gids is refused with "Forbidden".  Root and
         * the daemon's own uid are always allowed.  Copied. */
        const uid_t *allow_uids;
        size_t n_allow_uids;
        const gid_t *allow_gids;
        size_t n_allow_gids;
};

/*
 * Creates the socket with unix_listen() (src/util/unix_listen.h: the
 * lock file beside it is held until stream_server_free(); -EADDRINUSE and
 * "another podmux (pid N) serves PATH" when another daemon holds it), sets
 * its mode, and starts accepting on the loop.  Also keeps one spare
 * descriptor (on /dev/null): when accept() runs out of descriptors, the
 * spare is given up for one accept() so the client can be told
 * TooManyConsumers instead of being left hanging, then taken back (no
 * spare at start: -errno and a message).  Strings in cfg are copied.
 * err (may be NULL) follows util/buf.h: on failure it holds the one
 * message (empty after -ENOMEM); on success it is left as it was.
 */
int stream_server_new(struct loop *loop, const struct stream_server_config *cfg, struct stream_server **ret_srv,
                      struct buf *err);

/* Sends an error message to every consumer, closes them, closes and removes
 * the socket file, frees everything.  NULL-safe.  Call it before
 * loop_free(): its handles live on the loop. */
void stream_server_free(struct stream_server *srv);

/* Broadcasts one "pods" message built from u (not kept).  0 or -ENOMEM
 * (-EINVAL for an op out of range or no source).  On -ENOMEM no consumer
 * is left believing it is in sync: every live one is cut with the error
 * ResourceExhausted, and a resume gets the full state, so no consumer ever
 * misses a change.  A consumer whose queue cannot take a message is cut
 * the same way (the message is in the history: resuming gets it). */
int stream_server_broadcast(struct stream_server *srv, const struct pod_update *u);

/*
 * Broadcasts a "plugin" message: op is REGISTERED, DEREGISTERED or FAILED;
 * plugin_json is the rendered "plugin" object; error (FAILED) may be NULL.
 * REGISTERED plugins (keyed by socket) are sent to later consumers in
 * their initial state, until DEREGISTERED.  A FAILED is kept for the
 * consumers still waiting for their line (see above); one that cannot keep
 * it for want of memory is cut with ResourceExhausted.  0, -EINVAL or
 * -ENOMEM.
 */
int stream_server_plugin(struct stream_server *srv, const char *op, const char *socket, const char *plugin_json,
                         const char *error);

/* Broadcasts "sources_ready" with these names, once; remembered and sent to
 * later consumers after their "synced".  Later calls return 0 and change
 * nothing.  -ENOMEM: nothing was announced; call again later. */
int stream_server_sources_ready(struct stream_server *srv, const char *const *sources, size_t n);

/*
 * Broadcasts a "source" message: what source serves when it is not what it
 * reads from its origin now (doc/protocol.md): state (e.g. "checkpoint")
 * with members, a JSON fragment of further members with a leading comma
 * (may be NULL); or "live" when it reads its origin again.  A state other
 * than "live" is remembered and said again to every later consumer right
 * after its "synced"; "live" forgets it.  The caller sends it before the
 * records it applies to.  0, -EINVAL, or -ENOMEM (nothing changed, or,
 * the state kept, consumers that missed the message are cut with
 * ResourceExhausted as for any broadcast).
 */
int stream_server_source_state(struct stream_server *srv, const char *source, const char *state, const char *members);
/* The "checkpoint" state of source, rendered here (doc/protocol.md, the
 * "source" message): the checkpoint's time (wall clock, microseconds) and
 * resourceVersion.  As stream_server_source_state(). */
int stream_server_source_checkpoint(struct stream_server *srv, const char *source, uint64_t time_usec,
                                    const char *resource_version);

/*
 * Sends {"type":TYPE,"seq":N MEMBERS} (members as for stream_files_fn) to
 * every live files consumer; nothing when there is none.  0, or -ENOMEM:
 * every live files consumer is cut with ResourceExhausted (it asks again
 * and gets the records), as is one whose queue cannot take it.  Not kept
 * in the history.  O(files consumers).
 */
int stream_server_files(struct stream_server *srv, const char *type, const char *members);
/* Whether a files consumer is connected or starting (a caller need not
 * render for stream_server_files() otherwise). */
bool stream_server_files_wanted(const struct stream_server *srv);

/* Open connections, counting those still waiting for their resume line
 * and those being closed. */
size_t stream_server_consumers(const struct stream_server *srv);
uint64_t stream_server_last_seq(const struct stream_server *srv);
/* Plugins registered now (REGISTERED and not yet DEREGISTERED). */
size_t stream_server_plugins(const struct stream_server *srv);
/* Number of consumers dropped for a slow backlog since start. */
uint64_t stream_server_dropped(const struct stream_server *srv);

#endif
