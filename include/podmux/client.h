/*
 * podmux/client.h — libpodmux-client: a consumer of podmux's update stream
 * (protocol 1, doc/protocol.md), the way client-go's informers consume the
 * API server: an always-consistent local cache of the node's merged pods,
 * handlers that see each change once and in order, and the resync logic
 * (resume after a cut, replay or full state, reconnection with backoff)
 * hidden.  Installed, with podmux-client.pc; the man pages are
 * podmux_client(3) and the pages it lists.
 *
 * Owns: one connection to the daemon at a time, an epoll descriptor that
 * stays the same for the client's life (what the application polls), the
 * cache of pods and of registered plugins, the resume point.
 * Never: calls exit(), logs on its own (log lines go to the optional log
 * handler), blocks outside podmux_client_run(), installs signal handlers,
 * keeps global state.  Thread-compatible like libcurl: one client is used
 * by one thread at a time; different clients need no locking.
 *
 * Errors are negative errno values, 0 is success.  Out of memory never
 * leaves the cache wrong or loses a change: the message that could not be
 * applied is not applied, the error handler is told (PODMUX_ERROR_NOMEM),
 * and the client reconnects and resumes after the last message it applied
 * (a full state if that is no longer in the daemon's history).
 *
 * Handlers run inside podmux_client_process() (or _run()).  They may read
 * the cache and call podmux_client_stop(); they must not call
 * podmux_client_process(), _run() or _free() on the same client.
 */
#ifndef PODMUX_CLIENT_H
#define PODMUX_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The stream protocol this library speaks. */
#define PODMUX_CLIENT_PROTOCOL 1
/* The daemon's default socket. */
#define PODMUX_CLIENT_DEFAULT_SOCKET "/run/podmux/podmux.sock"
/* Reconnection backoff: the first retry after this, doubling to the max;
 * back to the first once a connection reaches "synced". */
#define PODMUX_CLIENT_BACKOFF_MIN_USEC (100u * 1000u)
#define PODMUX_CLIENT_BACKOFF_MAX_USEC (5u * 1000u * 1000u)
/* Default bound on one line from the daemon (a SET carries every pod of
 * the node); a longer line is PODMUX_ERROR_BAD_MESSAGE. */
#define PODMUX_CLIENT_DEFAULT_MAX_LINE (256u * 1024u * 1024u)

struct podmux_client;
struct podmux_pod;
struct json_object;

/* The ops of a "pods" message (doc/protocol.md). */
enum podmux_op {
        PODMUX_OP_SET,
        PODMUX_OP_ADD,
        PODMUX_OP_UPDATE,
        PODMUX_OP_DELETE,
        PODMUX_OP_REMOVE,
        PODMUX_OP_RECONCILE,
};
/* "SET", "ADD", ...; NULL for a value out of range. */
const char *podmux_op_name(enum podmux_op op);

/*
 * One change, given to the pods handler after the cache holds it.
 * Either a "pods" message as the daemon sent it (live or replayed after a
 * resume: resync false, seq its number), or a record the library computed
 * when a full state replaced the cache (resync true, seq 0): the
 * difference between the cache and that state, as REMOVE, ADD and UPDATE
 * records per source.  A SET is the whole merged state (snapshot modes):
 * the cache is replaced by its pods.  pods and what they point to are
 * valid during the call; podmux_pod_ref() keeps a pod longer.
 *
 * The difference counts a pod as changed the way the daemon's merger does
 * (doc/protocol.md, "Which pods changed"): pods are matched by source and
 * UID (a pod is its source and UID: the cache holds one per source and
 * UID, and an upsert under another name replaces it), and a matched pod is
 * an UPDATE only if its name, namespace, labels, annotations,
 * deletionTimestamp, deletionGracePeriodSeconds, spec or status differ,
 * leaving out the annotations kubernetes.io/config.source, .seen and
 * .mirror.  So a daemon restart is not a change: a pod whose only
 * difference is the new run's config.seen (or, for an API pod, the
 * resourceVersion and the other metadata each run keeps from the version
 * it first stored) is not handed on, but the cache takes its new text, and
 * a lookup shows the current run's config.seen.  Applied in order, the
 * records a handler sees give the cache up to those differences.
 *
 * A full state after a daemon restart lacks the sources the new run has
 * not heard from yet.  Their pods are held over, as the kubelet makes no
 * deletion before all its sources are seen (doc/protocol.md, "A restarted
 * daemon's late sources"): they stay in the cache and nothing is handed
 * on for them.  When the source delivers, a held-over pod that a live ADD
 * carries again is handed on only if it changed, as an UPDATE record
 * (resync true, seq 0) after the ADD, which goes on with its other pods
 * (maybe none); a live SET (snapshot modes) keeps the held-over pods it
 * does not carry and is handed on with the whole cache.  Another op on a
 * held-over pod goes as sent.  When sources_ready comes, the pods still
 * held over are removed: REMOVE records, resync true, before the
 * sources-ready handler.
 *
 * A client started with podmux_client_set_resume() holds only what came
 * after that point (the application holds the rest): a full state cannot
 * be compared with that, so it is handed on whole, as one SET of every pod
 * (source "*", resync true) and a REGISTERED for every plugin.  The
 * application replaces what it holds with these.
 */
struct podmux_update {
        enum podmux_op op;
        const char *source; /* "file", "http", "api", or "*" */
        const struct podmux_pod *const *pods;
        size_t n_pods;
        uint64_t seq;
        bool resync;
};

/*
 * A plugin message (REGISTERED, DEREGISTERED, FAILED).  The registered
 * plugins are cached by socket like the pods: after a full state the
 * library gives REGISTERED for the new or changed ones and DEREGISTERED
 * for the gone ones, with resync set.  FAILED is news, not state: only
 * live and replayed ones are seen.  Strings are valid during the call.
 */
struct podmux_plugin_event {
        const char *op;
        const char *socket;
        const char *type;   /* "CSIPlugin", "DevicePlugin", ... */
        const char *name;
        const char *plugin_json; /* the "plugin" object as JSON text */
        const char *error;  /* FAILED: the reason; else NULL */
        uint64_t seq;       /* 0 for a computed one */
        bool resync;
};

/*
 * What a source serves (the "source" message, doc/protocol.md): a source
 * never said to be anything else is live.  Today only "api" is said to
 * serve its checkpoint (doc/checkpoint.md): the pods the daemon kept from
 * before it started, because the API server has not answered since.
 */
enum podmux_serving {
        PODMUX_SERVING_LIVE,       /* the source reads its origin */
        PODMUX_SERVING_CHECKPOINT, /* the source serves its checkpoint */
        PODMUX_SERVING_UNKNOWN,    /* a state this library does not know: see state */
};
/* "live", "checkpoint"; NULL for a value out of range. */
const char *podmux_serving_name(enum podmux_serving s);

/*
 * A source's state, given to the source handler when it changes, and by
 * podmux_client_source_state().  The states hold across reconnections:
 * after every "synced" the daemon says again each state that is not live,
 * so a state kept from before that is not said again (the source went
 * live while the client was away, or the daemon restarted) ends as live:
 * told with resync true and seq 0 when the first message after synced
 * that is not a "source" message comes.  Strings are valid during the
 * call (for the query: until the next podmux_client_process()).
 */
struct podmux_source_state {
        const char *source; /* "api" */
        enum podmux_serving serving;
        /* The daemon's word: "live", "checkpoint", ... */
        const char *state;
        /* CHECKPOINT: when the server last confirmed its pods (RFC 3339
         * UTC) and their resourceVersion; else NULL. */
        const char *checkpoint_time;
        const char *checkpoint_resource_version;
        /* The source message's number; 0 for a computed state (resync). */
        uint64_t seq;
        bool resync;
};

enum podmux_error_kind {
        /* connect() failed: no daemon (-ENOENT, -ECONNREFUSED), a path
         * that is no socket (-ENOTSOCK) or too long (-ENAMETOOLONG). */
        PODMUX_ERROR_CONNECT,
        /* -EACCES/-EPERM on the socket file, or the daemon said
         * Forbidden (its --allow-uids/--allow-gids).  Fatal. */
        PODMUX_ERROR_PERMISSION,
        /* The daemon speaks a protocol number this library does not
         * (-EPROTONOSUPPORT).  Fatal. */
        PODMUX_ERROR_PROTOCOL,
        /* The daemon sent an error message and closes: reason is its
         * reason (SlowConsumer, ResourceExhausted, TooManyConsumers,
         * ShuttingDown, ...).  BadRequest is fatal, the others retried. */
        PODMUX_ERROR_SERVER,
        /* The connection ended without an error message (the daemon
         * exited or was killed, a reset). */
        PODMUX_ERROR_CLOSED,
        /* A line that is not a protocol 1 message (not JSON, a member of
         * the wrong type, a number going back, longer than the limit):
         * dropped with the connection; resumed after the last good one. */
        PODMUX_ERROR_BAD_MESSAGE,
        /* Memory ran out: nothing of the message was applied. */
        PODMUX_ERROR_NOMEM,
};

struct podmux_error {
        enum podmux_error_kind kind;
        int err;             /* a negative errno value */
        const char *reason;  /* PODMUX_ERROR_SERVER: the daemon's reason */
        const char *message; /* one line for a human, naming the socket */
        bool fatal;          /* the client has stopped: no reconnection */
};

/* A connection ended and another is scheduled. */
struct podmux_reconnect {
        uint64_t delay_usec; /* until the attempt */
        unsigned attempt;    /* 1 for the first retry after a good connection */
        bool resume;         /* it will ask to resume after resume_after */
        uint64_t resume_after;
};

enum podmux_log_level {
        PODMUX_LOG_ERROR,
        PODMUX_LOG_WARNING,
        PODMUX_LOG_INFO,
        PODMUX_LOG_DEBUG,
};

typedef void (*podmux_pods_fn)(struct podmux_client *c, const struct podmux_update *u, void *data);
/* resumed: what came before was a replay after the resume point (true)
 * or a full state (false).  Either way every change up to now has been
 * handed to the pods and plugin handlers; see podmux_client_has_synced()
 * for what the cache then holds. */
typedef void (*podmux_synced_fn)(struct podmux_client *c, bool resumed, void *data);
/* Every configured source has delivered; called when the list is first
 * seen or changes (a restarted daemon with other sources).  Pods held
 * over after a daemon restart and not delivered again are removed just
 * before (REMOVE records, resync), list changed or not. */
typedef void (*podmux_sources_ready_fn)(struct podmux_client *c, const char *const *sources,
                                        size_t n, void *data);
typedef void (*podmux_plugin_fn)(struct podmux_client *c, const struct podmux_plugin_event *e,
                                 void *data);
/* A source's state changed (struct podmux_source_state). */
typedef void (*podmux_source_fn)(struct podmux_client *c, const struct podmux_source_state *s, void *data);
typedef void (*podmux_error_fn)(struct podmux_client *c, const struct podmux_error *e, void *data);
typedef void (*podmux_reconnect_fn)(struct podmux_client *c, const struct podmux_reconnect *r,
                                    void *data);
/* line: one line without its newline. */
typedef void (*podmux_log_fn)(struct podmux_client *c, enum podmux_log_level level,
                              const char *line, void *data);

/* Every whole line as it arrives, before it is decoded (without its
 * newline; len bytes, not NUL-terminated).  For tracing and tools that
 * show the protocol itself (`podmux watch -o json`). */
typedef void (*podmux_line_fn)(struct podmux_client *c, const char *line, size_t len, void *data);

/* Flags for podmux_client_set_flags(). */
/* Do not reconnect: the first connection's end (or a failed connect)
 * stops the client; podmux_client_process() returns its error. */
#define PODMUX_CLIENT_NO_RECONNECT 0x1u

/*
 * A client of the socket at path (NULL: PODMUX_CLIENT_DEFAULT_SOCKET).
 * data is handed to every handler.  Nothing is connected yet: the first
 * podmux_client_process() connects (podmux_client_timeout() is 0 until
 * then), so set the handlers first.  0, -EINVAL (empty path), -ENOMEM,
 * or -errno from epoll_create1().  Free with podmux_client_free().
 */
int podmux_client_new(const char *path, void *data, struct podmux_client **ret_c);
/* Closes the connection and the descriptor, frees the cache (pods held
 * with podmux_pod_ref() stay valid).  NULL-safe. */
void podmux_client_free(struct podmux_client *c);

void podmux_client_on_pods(struct podmux_client *c, podmux_pods_fn fn);
void podmux_client_on_synced(struct podmux_client *c, podmux_synced_fn fn);
void podmux_client_on_sources_ready(struct podmux_client *c, podmux_sources_ready_fn fn);
void podmux_client_on_plugin(struct podmux_client *c, podmux_plugin_fn fn);
/* Called when a source's state changes (see struct podmux_source_state):
 * before the pods records that the new state applies to. */
void podmux_client_on_source(struct podmux_client *c, podmux_source_fn fn);
void podmux_client_on_error(struct podmux_client *c, podmux_error_fn fn);
void podmux_client_on_reconnect(struct podmux_client *c, podmux_reconnect_fn fn);
void podmux_client_on_log(struct podmux_client *c, podmux_log_fn fn);
void podmux_client_on_line(struct podmux_client *c, podmux_line_fn fn);
void podmux_client_set_flags(struct podmux_client *c, unsigned flags);
/* The longest line accepted (0: the default). */
void podmux_client_set_max_line(struct podmux_client *c, size_t bytes);
/* Resume after seq on the first connection (a point saved from an earlier
 * run of this program, which holds the state up to it); later connections
 * resume after what was applied.  Call it before the first
 * podmux_client_process().  The cache then holds only what comes after
 * seq (podmux_client_has_synced() stays false) until a full state comes:
 * see struct podmux_update. */
void podmux_client_set_resume(struct podmux_client *c, uint64_t seq);
void *podmux_client_data(const struct podmux_client *c);

/*
 * Informer-style handlers, like client-go's ResourceEventHandler: any
 * number per client, each called for every change in the order they were
 * added, after the raw pods handler, once the cache holds the change.
 * The ops of a record map this way, pod by pod (a pod is its source and
 * UID):
 *
 *   ADD                       on_add(pod, initial false); on_update(old,
 *                             pod) if the handlers were given that pod
 *                             already.
 *   UPDATE, RECONCILE, DELETE on_update(old, pod), old being the text the
 *                             handlers were last given (a graceful DELETE
 *                             is an update that sets deletionTimestamp);
 *                             on_add(pod, false) for a pod not given yet.
 *   REMOVE                    on_delete(old); nothing for a pod not given.
 *   SET (snapshot modes, and  diffed against the pods given, matched by
 *   source "*" after a        source and UID: on_delete(old) for each pod
 *   saved resume point)       it lacks (in the cache's order), then for
 *                             each of its pods in order on_add(pod,
 *                             false), or on_update(old, pod) when the
 *                             texts differ by the rule of "Which pods
 *                             changed" (doc/protocol.md), or nothing.
 *
 * The records computed after a full state, the held-over pods' UPDATE and
 * REMOVE records (see struct podmux_update) map the same way.  old and
 * pod are valid during the call (podmux_pod_ref() keeps them).  A NULL
 * member is not called.  Handlers may read the cache and call
 * podmux_client_stop() (no handler is called after that).
 */
struct podmux_handler {
        /* initial: a synthetic ADD for a pod the cache held when the
         * handler was added (client-go's isInInitialList). */
        void (*on_add)(struct podmux_client *c, const struct podmux_pod *pod, bool initial, void *data);
        void (*on_update)(struct podmux_client *c, const struct podmux_pod *old, const struct podmux_pod *pod,
                          void *data);
        void (*on_delete)(struct podmux_client *c, const struct podmux_pod *old, void *data);
};
/*
 * Adds a handler (h is copied; data is handed to its calls).  It is at
 * once given every pod of the cache, in the cache's order, as on_add with
 * initial true, then each change from the next one on.  Not from a
 * handler of the same client.  0, -EINVAL (h NULL) or -ENOMEM
 * (not added).  The first handler costs a map of the pods handed on
 * (about 40 bytes a pod); a record costs O(its pods), a SET O(cache).
 * Out of memory while following a record is not lost: the changes are
 * handed on, diffed against the cache, at the end of the same
 * podmux_client_process(); if that fails too, the connection ends as
 * PODMUX_ERROR_NOMEM and it is tried again at each call until it
 * succeeds.
 */
int podmux_client_add_handler(struct podmux_client *c, const struct podmux_handler *h, void *data);

/*
 * Indexes, like client-go's Indexers: an index keys each pod of the cache
 * by zero or more strings, and podmux_client_by_index() gives the pods of
 * a key.  The indexes are changed with the cache, inside the same apply:
 * a message is applied to the cache and to every index or to none, so a
 * handler (of any kind) that reads an index sees the state after its
 * change.  Two are built in: PODMUX_INDEX_NAMESPACE (a pod's namespace,
 * "" for none) and PODMUX_INDEX_SOURCE ("file", "http", "api"); each is
 * built from the cache by its first lookup (O(cache)) and followed from
 * then on, so a client that never reads one pays nothing for it.
 * Cost: a message O(its pods x their keys): hash operations and a call
 * of each index function per pod it carries (a REMOVE calls none); a SET
 * and a full state rebuild every index from the new cache, O(cache);
 * about 100 bytes a pod and index plus its keys.
 */
#define PODMUX_INDEX_NAMESPACE "namespace"
#define PODMUX_INDEX_SOURCE "source"

/* The keys an index function gives (owned by the library). */
struct podmux_index_keys;
/* Adds a copy of key to keys (a key given twice counts once).  0, -EINVAL
 * (keys or key NULL), -ENOMEM. */
int podmux_index_keys_add(struct podmux_index_keys *keys, const char *key);
/*
 * An index function: gives pod's keys with podmux_index_keys_add() (none
 * is fine).  It must depend only on the pod's text and data, and must not
 * call the client.  0, or a negative errno: only for out of memory (pass
 * on what podmux_index_keys_add() returned): a pod it cannot key gets no
 * keys.  An error is handled as the library's own out of memory is: the
 * message is not applied (the cache and every index stay as they were),
 * the error handler is told PODMUX_ERROR_NOMEM, and the client
 * reconnects and resumes after the last message applied.
 */
typedef int (*podmux_index_fn)(const struct podmux_pod *pod, struct podmux_index_keys *keys, void *data);
/*
 * Adds the index name (copied), keyed by fn (data handed to its calls),
 * and builds it from the cache at once: O(cache) calls of fn.  0, -EINVAL
 * (name or fn NULL), -EEXIST (the name is taken, a built-in's among
 * them), -ENOMEM or fn's error (nothing added).  May be called from a
 * handler.
 */
int podmux_client_add_index(struct podmux_client *c, const char *name, podmux_index_fn fn, void *data);
/*
 * The pods of the cache whose keys in the index name include key, in the
 * cache's order (namespace, name, UID, source, as
 * podmux_client_pod_first()).  *ret_pods is a new array the caller
 * frees with free() (NULL when there is none, *ret_n 0); the pods in it
 * are the cache's, valid until the next podmux_client_process() or
 * _run() (podmux_pod_ref() keeps one longer).  0, -EINVAL (an argument
 * NULL), -ENOENT (no such index), -ENOMEM.  Cost: O(k) for k pods found
 * (each key keeps its pods in order); the first lookup of a built-in
 * index O(cache).
 */
int podmux_client_by_index(struct podmux_client *c, const char *name, const char *key,
                           const struct podmux_pod ***ret_pods, size_t *ret_n);

/* ---- event-loop integration ---------------------------------------------- */

/*
 * The descriptor to poll for reading.  It stays the same across
 * reconnections (an epoll instance holding the current connection), so it
 * is added to the application's loop once.  When it is readable, call
 * podmux_client_process().
 */
int podmux_client_fd(const struct podmux_client *c);
/*
 * Milliseconds until podmux_client_process() must be called even if the
 * descriptor is not readable (a reconnection is due): 0 now, -1 none.
 */
int podmux_client_timeout(const struct podmux_client *c);
/*
 * Does what is due without blocking: connects or reconnects when the
 * backoff has run out, reads what the socket holds (at most a few MiB per
 * call, so the application's loop keeps turning; the descriptor stays
 * readable while more is there) and dispatches every whole line to the
 * handlers.  0 while the client runs (errors it recovers from go to the
 * error handler); once the client has stopped, -ECANCELED after
 * podmux_client_stop() or the fatal error (also given to the error
 * handler): -EACCES, -EPROTONOSUPPORT, or with PODMUX_CLIENT_NO_RECONNECT
 * the error that ended the connection (-ECONNRESET for a plain close,
 * -ESHUTDOWN when the daemon said ShuttingDown).
 */
int podmux_client_process(struct podmux_client *c);
/*
 * The blocking convenience: polls and processes until timeout_ms have
 * passed (-1: no limit), a handler calls podmux_client_stop(), or the
 * client stops on a fatal error.  0 on the timeout, else what
 * podmux_client_process() returns; -EINTR when a signal interrupted the
 * wait (call again to go on).
 */
int podmux_client_run(struct podmux_client *c, int timeout_ms);
/* Stops the client: nothing more is applied or dispatched after the
 * current handler returns, the connection is closed by the next
 * _process() (podmux_client_timeout() says 0 until then), and
 * _process()/_run() return -ECANCELED.  The cache stays readable. */
void podmux_client_stop(struct podmux_client *c);

/* ---- the cache ------------------------------------------------------------ */

/* True when the cache is the daemon's whole state (as of the last message
 * applied): once a connection reached "synced" with a full state, and
 * from then on (a resume keeps the cache, a replay adds to it).  After a
 * daemon restart, until sources_ready, the cache is the daemon's state
 * plus the pods held over from the sources it has not heard from yet
 * (see struct podmux_update), each with the text last handed on.  After
 * podmux_client_set_resume() a replay does not make it true: the cache
 * holds only the pods the replay carried, and the synced handler (resumed
 * true) says the application is up to date.  It becomes true when a full
 * state comes (the point was too old, or the daemon restarted). */
bool podmux_client_has_synced(const struct podmux_client *c);
/* The resume point: the number of the last message applied (false before
 * the first synced and without podmux_client_set_resume()). */
bool podmux_client_resume_point(const struct podmux_client *c, uint64_t *ret_seq);
size_t podmux_client_pod_count(const struct podmux_client *c);
/* The pod with this UID (the first in the daemon's order if two sources
 * hold the same UID), or NULL.  O(1). */
const struct podmux_pod *podmux_client_pod_by_uid(const struct podmux_client *c, const char *uid);
/* The pod namespace/name (the first in the daemon's order if several
 * sources hold one), or NULL.  O(log n). */
const struct podmux_pod *podmux_client_pod_by_name(const struct podmux_client *c,
                                                   const char *namespace_, const char *name);
/*
 * Iteration in the daemon's order (namespace, name, UID, then source: the
 * order of a merged SET).  first: NULL when empty; next: NULL after the
 * last.  The cache must not change during an iteration (handlers of the
 * same client run only from podmux_client_process()).  O(log n) a step.
 */
const struct podmux_pod *podmux_client_pod_first(const struct podmux_client *c);
const struct podmux_pod *podmux_client_pod_next(const struct podmux_client *c,
                                                const struct podmux_pod *p);
/* Registered plugins, by socket: *it starts at 0; false after the last. */
bool podmux_client_plugin_next(const struct podmux_client *c, size_t *it, const char **ret_socket,
                               const char **ret_plugin_json);
/* The sources of the last sources_ready (false if none was seen). */
bool podmux_client_sources_ready(const struct podmux_client *c, const char *const **ret_sources,
                                 size_t *ret_n);

/* What source serves now: true when it is not live (*ret_state says
 * what it serves), false when it is live as far as the client knows (no
 * state said, or "live" said since; *ret_state then says live).
 * ret_state may be NULL; its strings stay valid until the next
 * podmux_client_process() or _run(). */
bool podmux_client_source_state(const struct podmux_client *c, const char *source,
                                struct podmux_source_state *ret_state);

/* ---- pods ------------------------------------------------------------------ */

/* The pod's compact JSON text as the daemon sent it (NUL-terminated;
 * *ret_len may be NULL). */
const char *podmux_pod_json(const struct podmux_pod *p, size_t *ret_len);
const char *podmux_pod_uid(const struct podmux_pod *p);
const char *podmux_pod_namespace(const struct podmux_pod *p);
const char *podmux_pod_name(const struct podmux_pod *p);
/* "file", "http" or "api": the pod's source (its
 * kubernetes.io/config.source annotation in a SET). */
const char *podmux_pod_source(const struct podmux_pod *p);
/* A new json-c tree of the pod (the caller puts it with
 * json_object_put()).  0, or -ENOMEM. */
int podmux_pod_object(const struct podmux_pod *p, struct json_object **ret_obj);
/* Pods are reference counted and immutable: ref returns p. */
const struct podmux_pod *podmux_pod_ref(const struct podmux_pod *p);
void podmux_pod_unref(const struct podmux_pod *p);

/* ---- per-file records ----------------------------------------------------- */

/*
 * The path a record of the files request names, byte for byte (doc/protocol.md
 * "Files request", "Paths that are not UTF-8"): record is a "file" message's
 * record or the "files" message, as json-c parsed it.  The path's bytes come
 * from its "path_hex" member when there is one (a name that is not UTF-8,
 * which "path" shows with U+FFFD), else from "path".  *ret_path
 * (NUL-terminated; *ret_len bytes without the NUL, ret_len may be NULL) is
 * the caller's, to free().  0; -ENOENT when record names no path (the
 * manifest URL's record, a daemon without a static pod path); -EINVAL when
 * a member is not a string, "path_hex" is not whole bytes of hex digits, or
 * the path holds a zero byte; -ENOMEM.  *ret_path is written only on
 * success.
 */
int podmux_record_path(struct json_object *record, char **ret_path, size_t *ret_len);

#ifdef __cplusplus
}
#endif

#endif
