/*
 * client_msg — one line of the update stream (doc/protocol.md) decoded for
 * libpodmux-client: the pods it carries become struct podmux_pod, each
 * with its JSON text exactly as the daemon wrote it.
 *
 * Owns: the decoded message and the pods it made (one reference each).
 * Never: does I/O, logs, or keeps anything between calls; no global state.
 * Private to the library (not installed).
 *
 * Cost: one pass over the line, checked as strictly as src/util/json_parse.c
 * checks JSON.  A pod builds no json-c tree: its members are stepped over
 * (json_skip_next()) but for the way to metadata.uid, name, namespace and
 * the source annotation, which are decoded as a tree would hold them; the
 * pod keeps its text and those four strings in one block, one allocation
 * (more only for an identity string with escapes).  The other members of
 * the line are small json-c values.
 */
#ifndef PODMUX_CLIENT_MSG_H
#define PODMUX_CLIENT_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/keymap.h"
#include "podmux/client.h"

/* Nesting a message may have (the line, a pod, and a pod's own 64). */
#define CLIENT_MSG_MAX_DEPTH 72

struct podmux_pod {
        unsigned refs;
        size_t len;
        char *json;          /* len bytes and a NUL, inside this block */
        const char *uid;     /* inside this block */
        const char *ns;
        const char *name;
        const char *ann_source; /* kubernetes.io/config.source, or "" */
        const char *source;  /* ann_source, the message's (own_source) */
        char *own_source;    /* set when source is not ann_source */
        /* Held over by the cache that holds it (client_cache.h): set and
         * cleared only by that cache; a pod is in one client's cache. */
        bool held;
};

enum client_msg_type {
        CLIENT_MSG_OTHER, /* a type this library does not know: ignored */
        CLIENT_MSG_HELLO,
        CLIENT_MSG_PODS,
        CLIENT_MSG_SYNCED,
        CLIENT_MSG_SOURCES_READY,
        CLIENT_MSG_PLUGIN,
        CLIENT_MSG_ERROR,
        CLIENT_MSG_SOURCE,
};

struct client_msg {
        enum client_msg_type type;
        uint64_t seq;
        /* hello: protocol is checked before anything else is read. */
        int64_t protocol;
        char *mode, *node;
        /* pods */
        enum podmux_op op;
        char *source;
        struct podmux_pod **pods;
        size_t n_pods;
        /* synced */
        bool resumed;
        /* sources_ready */
        char **sources;
        size_t n_sources;
        /* source: source is the source's name; state its word; the
         * checkpoint's time and resource_version (each NULL when absent) */
        char *state, *cp_time, *cp_rv;
        /* plugin: op is plugin_op; json is the "plugin" member's text */
        char *plugin_op, *plugin_json, *socket, *plugin_type, *plugin_name, *error;
        /* error */
        char *reason, *message;
};

/*
 * Decodes line[0..len) (no newline).  0 and *m filled (clear it with
 * client_msg_clear()); -EPROTONOSUPPORT for a hello whose protocol is not
 * PODMUX_CLIENT_PROTOCOL (m->protocol set, nothing else); -EINVAL with a
 * sentence in why (not JSON, no type or seq, a member of the wrong type,
 * a pod without metadata.uid or name, an unknown op); -ENOMEM.  On an
 * error *m is left cleared.
 */
int client_msg_parse(const char *line, size_t len, struct client_msg *m, struct buf *why);
void client_msg_clear(struct client_msg *m);

/* The pods of a message are made here; the cache shares them. */
struct podmux_pod *client_pod_ref(struct podmux_pod *p);
void client_pod_unref(struct podmux_pod *p);
/* The order of the cache and of a merged SET: namespace, name, uid, then
 * source. */
int client_pod_compare(const struct podmux_pod *a, const struct podmux_pod *b);
/* A pod's identity "source/uid" (the key of the informer's and the
 * indexes' keymaps): the bytes it takes with its NUL, and written to out,
 * which has that many. */
size_t client_pod_id_size(const struct podmux_pod *p);
void client_pod_id_write(const struct podmux_pod *p, char *out);
/* The item of keymap m whose key is p's identity (*ret NULL if none).  0
 * or -ENOMEM (a long identity is written to the heap). */
int client_pod_id_get(const struct keymap *m, const struct podmux_pod *p, void **ret);

/* The reconnection's backoff (util/backoff.h): base
 * PODMUX_CLIENT_BACKOFF_MIN_USEC, doubling, cap
 * PODMUX_CLIENT_BACKOFF_MAX_USEC, no jitter; reset when a connection
 * reaches "synced".
 *
 * For the library's tests only (not exported by the shared library): the
 * reconnection backoff's start and cap, so a test need not wait 100 ms
 * per reconnection.  Defined in src/client/client.c. */
void client_set_backoff(struct podmux_client *c, uint64_t min_usec, uint64_t max_usec);

#endif
