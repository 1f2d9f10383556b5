/*
 * metrics_server — the optional metrics endpoint (--metrics-address):
 * GET /metrics answers Prometheus text, on a unix socket or a loopback
 * TCP port.  HTTP is libmicrohttpd's, run on our loop (its epoll fd is one
 * of our descriptors; no thread of its own).
 *
 * Owns: the listening socket (and its file for a unix socket), the
 * libmicrohttpd daemon.  Never: listens on an address that is not
 * loopback; logs.
 */
#ifndef PODMUX_METRICS_SERVER_H
#define PODMUX_METRICS_SERVER_H

#include <stdbool.h>
#include <sys/types.h>

#include "util/buf.h"
#include "util/loop.h"

/* Connections served at once, and how long an idle one is kept. */
#define METRICS_MAX_CONNECTIONS 16
#define METRICS_CONNECTION_TIMEOUT_SEC 10

/* Appends the exposition text.  0 or -ENOMEM. */
typedef int (*metrics_render_fn)(void *data, struct buf *out);

struct metrics_server_config {
        /* A unix socket: "/path" or "unix:/path"; or a loopback TCP port:
         * "127.0.0.1:PORT", "[::1]:PORT", "localhost:PORT" (PORT 0: any
         * free port, see metrics_server_address()). */
        const char *address;
        mode_t socket_mode; /* unix socket; 0: 0660 */
        gid_t socket_gid;   /* unix socket; (gid_t)-1: the daemon's */
        metrics_render_fn render;
        void *render_data;
};

struct metrics_server;

/* Checks the syntax of an address (not whether it can be bound): 0, or
 * -EINVAL with a sentence in err, -ENOMEM.  A TCP address must be
 * loopback.  err (may be NULL) here and below follows util/buf.h: on
 * failure it holds the one message (empty after -ENOMEM); on success it
 * is left as it was. */
int metrics_address_check(const char *address, struct buf *err);
/* Listens at cfg->address and serves on loop; -errno with a message. */
int metrics_server_new(struct loop *loop, const struct metrics_server_config *cfg, struct metrics_server **ret_ms,
                       struct buf *err);
/* Where it listens ("unix:/path" or "127.0.0.1:PORT"), for the log. */
const char *metrics_server_address(const struct metrics_server *ms);
void metrics_server_free(struct metrics_server *ms); /* NULL-safe */

#endif
