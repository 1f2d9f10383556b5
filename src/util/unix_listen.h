/*
 * unix_listen — a listening unix stream socket at a path, made safely and
 * by one daemon at a time.
 *
 * Owns: the socket, its file, and the lock file beside it
 * ("<path>.lock", our pid in it), held with flock() from before the
 * socket path is touched until the listener is closed.
 * Whoever holds the lock owns the path: a second daemon fails at once
 * naming the holder's pid.  Only the holder replaces a socket file left
 * by a dead process; a live listener that is not ours (or any other
 * file) is never touched.  Group and mode are set between bind and
 * listen, so nobody connects through wider rights first.
 * Never: logs; blocks (the lock is taken with LOCK_NB); follows a
 * symbolic link at the lock path.
 * Used by the update stream and the metrics endpoint.
 */
#ifndef PODMUX_UNIX_LISTEN_H
#define PODMUX_UNIX_LISTEN_H

#include <stdbool.h>
#include <sys/types.h>

#include "util/buf.h"

/* Suffix of the lock file's name, after the socket path.  The file is
 * made with mode 0600: only the daemon's user may open it, so nobody else
 * can take the lock (flock needs only an open descriptor). */
#define UNIX_LISTEN_LOCK_SUFFIX ".lock"

/* Every member is valid only while path is set (between a successful
 * unix_listen() and unix_listener_close()); a zeroed listener is closed. */
struct unix_listener {
        char *path;
        int fd;    /* non-blocking, close-on-exec; -1 once closed */
        dev_t dev; /* of the socket file we made */
        ino_t ino;
        bool bound;      /* the file at path is ours */
        char *lock_path; /* path + UNIX_LISTEN_LOCK_SUFFIX */
        int lock_fd;     /* holds the flock; close-on-exec */
        dev_t lock_dev;  /* of the lock file we hold */
        ino_t lock_ino;
};

/*
 * Makes path's directory when missing, as mkdir -p does (util/dir.h
 * dir_make(): parents 0755, an existing directory untouched), takes the
 * lock, then creates, binds and listens on path.  gid (gid_t)-1
 * keeps the daemon's group.  On error returns -errno with a sentence
 * naming the path in err (may be NULL; util/buf.h: it replaces what err
 * held, and is empty after -ENOMEM; a success leaves err alone), and
 * holds nothing:
 *   -EADDRINUSE  another podmux holds the lock: err is exactly
 *                "another podmux (pid N) serves PATH" ("unknown pid" when
 *                the lock file names no live process); or a process that
 *                does not take the lock is listening on path;
 *   -EEXIST      path is not a socket, or the lock path is not a regular
 *                file or is a symbolic link;
 *   -EAGAIN      the lock file kept being replaced while we took it;
 *   -ENAMETOOLONG, -ENOENT, -EACCES, -ENOMEM, ...
 * *ret is filled only on success.  Costs a few system calls; never
 * waits.
 */
int unix_listen(const char *path, mode_t mode, gid_t gid, struct unix_listener *ret, struct buf *err);

/* Closes the socket, removes its file if it is still the one we made (a
 * second daemon may have replaced it), removes the lock file if it is
 * still ours, and only then releases the lock, so that whoever takes it
 * next finds the path clear.  Safe on a zeroed or closed listener, and
 * on one whose fd was already closed and set to -1 by its user. */
void unix_listener_close(struct unix_listener *l);

#endif
