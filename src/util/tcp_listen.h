/*
 * tcp_listen — a listening TCP socket at "HOST:PORT", for the endpoints
 * that may be asked to listen on TCP (the metrics endpoint, loopback
 * only; the local Kubernetes API, always behind TLS).
 *
 * Owns: nothing after it returns; the caller owns the descriptor.
 * Never: logs; listens anywhere but where it was asked.
 */
#ifndef PODMUX_TCP_LISTEN_H
#define PODMUX_TCP_LISTEN_H

#include <stdbool.h>

#include "util/buf.h"

/*
 * Splits "host:port" or "[v6]:port" into fresh copies (host may be empty:
 * every address).  0, -EINVAL for anything else (a bare IPv6 address
 * without brackets included), or -ENOMEM.
 */
int tcp_split_host_port(const char *address, char **ret_host, char **ret_port);

/*
 * Binds and listens on address, trying each address the host resolves to
 * (a numeric port only) in turn; an empty host is every address.  With
 * loopback_only, addresses outside 127.0.0.0/8 and ::1 are skipped, and a
 * host with none fails with "not a loopback address".  what names the
 * endpoint in errors (e.g. "metrics address").
 *
 * On success *ret_fd is a non-blocking, close-on-exec listener and, when
 * ret_name is given, *ret_name the bound address as "ip:port" or
 * "[ip]:port" (the port the kernel chose for port 0).  On error -errno
 * with a sentence in err (util/buf.h: empty after -ENOMEM), nothing open.
 */
int tcp_listen(const char *address, bool loopback_only, const char *what, int *ret_fd, char **ret_name,
               struct buf *err);

#endif
