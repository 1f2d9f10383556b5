/*
 * plugin_manager — the kubelet's plugin manager: watches the plugin
 * registry directory, keeps the desired and actual states, and reconciles
 * them through an executor that runs at most one operation per socket
 * path, with exponential backoff after failures (spec/plugin-manager.md).
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

#include "podmux/buf.h"
#include "podmux/curl_loop.h"
#include "podmux/loop.h"
#include "podmux/watcher.h"

#define PLUGIN_DIAL_USEC 10000000ull
#define PLUGIN_GETINFO_USEC 1000000ull
#define PLUGIN_NOTIFY_USEC 5000000ull
#define PLUGIN_BACKOFF_INITIAL_USEC 500000ull
#define PLUGIN_BACKOFF_CAP_USEC 122000000ull /* 2 min 2 s */

struct plugin_manager;

/* What consumers are told.  op: "REGISTERED", "DEREGISTERED", "FAILED". */
struct plugin_event {
        const char *op;
        const char *socket;
        const char *type;     /* "" when unknown (GetInfo failed) */
        const char *name;
        const char *endpoint;
        char *const *versions;
        size_t n_versions;
        const char *error;    /* FAILED only */
};

typedef void (*plugin_event_fn)(void *data, const struct plugin_event *ev);

struct plugin_manager_config {
        const char *dir;
        plugin_event_fn event;
        void *event_data;
};

/* watcher may be NULL (no events: the start-up walk only). */
int plugin_manager_new(struct loop *loop, struct watcher *watcher, struct curl_loop *cl,
                       const struct plugin_manager_config *cfg, struct plugin_manager **ret_pm,
                       struct buf *err);
/* Creates the directory (0755, parents), watches and walks it, then runs
 * the first reconcile pass.  0, or -errno with a message in err. */
int plugin_manager_start(struct plugin_manager *pm, struct buf *err);
void plugin_manager_free(struct plugin_manager *pm); /* NULL-safe */

/* Renders ev's plugin as the stream's "plugin" object. */
int plugin_event_render(const struct plugin_event *ev, struct buf *out);

#endif
