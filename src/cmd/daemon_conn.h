/*
 * daemon_conn — a one-shot client's connection to the daemon's stream
 * socket (doc/protocol.md): podmux status --files, podmux validate's
 * view of the daemon, podmux wait.  Blocking, with deadlines on the
 * monotonic clock (poll(2)), so a stuck daemon cannot hang a command.
 *
 * Owns: the socket and the bytes read but not yet taken.  Never: logs
 * or prints (the commands do).
 */
#ifndef PODMUX_CMD_DAEMON_CONN_H
#define PODMUX_CMD_DAEMON_CONN_H

#include <stdint.h>

#include <json-c/json.h>

#include "util/buf.h"

/* The longest line taken (a status or a SET of many pods is less). */
#define DAEMON_CONN_MAX_LINE (256u * 1024u * 1024u)

struct daemon_conn {
        int fd;
        struct buf in;
        size_t taken; /* bytes of in given out by the last line */
};

#define DAEMON_CONN_INIT                                                                                               \
        {                                                                                                              \
                -1, BUF_INIT, 0                                                                                        \
        }

/*
 * Connects to the socket at path and writes line (a newline is added).
 * 0, or -errno with err saying what failed ("cannot connect to ...":
 * -ENOENT, -ECONNREFUSED when no daemon listens there).
 */
int daemon_conn_open(struct daemon_conn *c, const char *path, const char *line, struct buf *err);

/*
 * The next line, NUL-terminated in place, valid until the next call:
 * 1 with *ret_line; 0 at the end of the stream (a partial line is
 * dropped); -ETIMEDOUT once deadline (mono_usec(); 0 none) passes;
 * -EFBIG past DAEMON_CONN_MAX_LINE; -errno of the socket (err says).
 */
int daemon_conn_line(struct daemon_conn *c, uint64_t deadline, char **ret_line, struct buf *err);

void daemon_conn_close(struct daemon_conn *c); /* leaves c closed and empty */

/* The message of a failed connect(2) to path, r its -errno, with the hint
 * podmux watch gives (libpodmux-client's): who may connect for -EACCES and
 * -EPERM, else whether podmux run serves that path.  Returns r, or
 * -ENOMEM. */
int daemon_conn_connect_error(struct buf *err, const char *path, int r);

/*
 * A files request (doc/protocol.md "Files request") to the daemon at
 * path, read up to synced before deadline: *ret_head is the "files"
 * message, *ret_records an array of the records (the caller puts both).
 * 0; -EPROTO when the daemon refused (its error message in err, e.g. an
 * older daemon's BadRequest) or spoke another protocol; -ETIMEDOUT;
 * -errno of the connection.
 */
int daemon_files(const char *path, uint64_t deadline, json_object **ret_head, json_object **ret_records,
                 struct buf *err);

/*
 * A status request (doc/protocol.md "Status request") to the daemon at
 * path, read up to its status message before deadline: *ret_status (the
 * caller puts it).  0; -EPROTO when the daemon refused (err says) or
 * closed first; -ETIMEDOUT; -errno of the connection.
 */
int daemon_status(const char *path, uint64_t deadline, json_object **ret_status, struct buf *err);

#endif
