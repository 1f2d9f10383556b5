/*
 * unix_listen — a listening unix stream socket at a path, made safely:
 * the directory must exist; a socket file left by a dead process is
 * replaced, a live one (or any other file) is never touched; group and
 * mode are set between bind and listen, so nobody connects through wider
 * rights first.  Used by the update stream and the metrics endpoint.
 */
#ifndef PODMUX_UNIX_LISTEN_H
#define PODMUX_UNIX_LISTEN_H

#include <stdbool.h>
#include <sys/types.h>

#include "podmux/buf.h"

struct unix_listener {
        char *path;
        int fd;     /* non-blocking, close-on-exec; -1 when closed */
        dev_t dev;  /* of the socket file we made */
        ino_t ino;
        bool bound; /* the file at path is ours */
};

/*
 * Creates, binds and listens on path.  gid (gid_t)-1 keeps the daemon's
 * group.  On error returns -errno with a sentence naming the path in err:
 * -EADDRINUSE when another process is serving on it, -EEXIST when the path
 * is not a socket, -ENAMETOOLONG, ...  *ret is filled only on success.
 */
int unix_listen(const char *path, mode_t mode, gid_t gid, struct unix_listener *ret, struct buf *err);

/* Closes the socket and removes its file if it is still the one we made
 * (a second daemon may have replaced it).  Safe on a zeroed or closed
 * listener. */
void unix_listener_close(struct unix_listener *l);

#endif
