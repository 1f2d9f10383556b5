/*
 * plugin_manager — the kubelet's plugin manager: watches the plugin
 * registry directory, keeps the desired and actual states, and reconciles
 * them through an executor that runs at most one operation per socket
 * path, with exponential backoff after failures (doc/plugin-manager.md).
 * A reconcile pass runs whenever something can have changed (the kubelet
 * polls every second; an idle podmux does not wake up).
 *
 * Owns: the directory watches, the caches, the handlers, the executor's
 * per-path state and the gRPC calls in flight.
 * Never: blocks the loop — a registration is a chain of asynchronous gRPC
 * calls with deadlines, so a hung plugin delays only its own path.  It
 * publishes through the event callback and never knows about consumers.
 */
#ifndef PODMUX_PLUGIN_MANAGER_H
#define PODMUX_PLUGIN_MANAGER_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/curl_loop.h"
#include "plugins/grpc_client.h"
#include "util/loop.h"
#include "util/watcher.h"

#define PLUGIN_DIAL_USEC 10000000ull
#define PLUGIN_GETINFO_USEC 1000000ull
#define PLUGIN_NOTIFY_USEC 5000000ull
/* The kubelet's exponential backoff per operation, one per socket path
 * (util/backoff.h): base PLUGIN_BACKOFF_INITIAL_USEC, doubling, cap
 * PLUGIN_BACKOFF_CAP_USEC, no jitter; a path is tried again only once
 * strictly more than the pause has passed since its last failure, and a
 * success forgets the path's state. */
#define PLUGIN_BACKOFF_INITIAL_USEC 500000ull
#define PLUGIN_BACKOFF_CAP_USEC 122000000ull /* 2 min 2 s */
/* After the registry could not be read in full: read again this soon. */
#define PLUGIN_RETRY_USEC 1000000ull

struct plugin_manager;

/* What consumers are told.  op: "REGISTERED", "DEREGISTERED", "FAILED". */
struct plugin_event {
        const char *op;
        const char *socket;
        const char *type; /* "" when unknown (GetInfo failed) */
        const char *name;
        const char *endpoint;
        char *const *versions;
        size_t n_versions;
        const char *error; /* FAILED only */
};

typedef void (*plugin_event_fn)(void *data, const struct plugin_event *ev);

/*
 * Test seam: the transport of the registration calls.  Unset (NULL, the
 * default), the manager uses grpc_call_start() / grpc_call_cancel() on the
 * loop and curl_loop given to plugin_manager_new(); nothing else changes.
 * Set, call replaces grpc_call_start with the same contract: 0 and the
 * call handle in *ret (or -errno, nothing started), then done(done_data,
 * ...) exactly once, later, from the loop (never inside call) — unless
 * cancel(call_data, handle) came first, after which done is never called.
 * The handle is opaque to the manager; it is over once done returns.
 * The dial timeout is not passed (a fake has no connection to make).
 * call and cancel are set together (-EINVAL otherwise).
 */
typedef int (*plugin_call_fn)(void *call_data, const char *socket, const char *method, const uint8_t *req, size_t len,
                              uint64_t deadline_usec, grpc_done_fn done, void *done_data, struct grpc_call **ret);
typedef void (*plugin_cancel_fn)(void *call_data, struct grpc_call *call);

struct plugin_manager_config {
        const char *dir;
        plugin_event_fn event;
        void *event_data;
        plugin_call_fn call; /* test seam, see above; NULL in the daemon */
        plugin_cancel_fn cancel;
        void *call_data;
};

/* watcher may be NULL (no events: the start-up walk only).  0; -EINVAL for
 * an empty directory or half a call hook, with the reason in err (may be
 * NULL; util/buf.h: it replaces what err held, a success leaves err
 * alone); -ENOMEM (err empty). */
int plugin_manager_new(struct loop *loop, struct watcher *watcher, struct curl_loop *cl,
                       const struct plugin_manager_config *cfg, struct plugin_manager **ret_pm, struct buf *err);
/* Creates the directory (0755, parents), watches and walks it, then runs
 * the first reconcile pass.  0, or -errno with a message in err (as for
 * plugin_manager_new). */
int plugin_manager_start(struct plugin_manager *pm, struct buf *err);
void plugin_manager_free(struct plugin_manager *pm); /* NULL-safe */

/* Renders ev's plugin as the stream's "plugin" object. */
int plugin_event_render(const struct plugin_event *ev, struct buf *out);

#endif
