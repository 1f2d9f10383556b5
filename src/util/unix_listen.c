/*
 * unix_listen — see include/podmux/unix_listen.h.
 *
 * A socket file nobody listens on (connect() is refused) is a leftover of
 * a dead daemon and is replaced; a live one, or anything that is not a
 * socket, is left alone.  Group and mode are set with chown()/chmod()
 * between bind() and listen(): no connection can be accepted before.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "podmux/log.h" /* ERRNO_STR only */
#include "podmux/unix_listen.h"

/* Checks path's directory and what is at path now: 0 when the path is
 * free (a stale socket was removed), else -errno with err set. */
static int clear_path(const char *path, const struct sockaddr_un *sa, struct buf *err)
{
        struct stat st;
        char *dir = strdup(path), *slash;
        int probe = -1, r;

        if (!dir)
                return -ENOMEM;
        slash = strrchr(dir, '/');
        if (!slash) {
                dir[0] = '.';
                dir[1] = '\0';
        } else {
                slash[slash == dir ? 1 : 0] = '\0';
        }
        r = stat(dir, &st) < 0 ? -errno : S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
        if (r < 0) {
                buf_printf(err, "socket \"%s\": directory \"%s\": %s", path, dir, ERRNO_STR(r));
                goto done;
        }
        if (lstat(path, &st) < 0) {
                r = errno == ENOENT ? 0 : -errno;
                if (r < 0)
                        buf_printf(err, "socket \"%s\": %s", path, ERRNO_STR(r));
                goto done;
        }
        if (!S_ISSOCK(st.st_mode)) {
                r = -EEXIST;
                buf_printf(err, "\"%s\" exists and is not a socket; not replacing it", path);
                goto done;
        }
        probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (probe < 0) {
                r = -errno;
                buf_printf(err, "socket: %s", ERRNO_STR(r));
                goto done;
        }
        if (connect(probe, (const struct sockaddr *)sa, sizeof(*sa)) == 0 || errno == EAGAIN ||
            errno == EINPROGRESS) {
                /* EAGAIN: its backlog is full, it is alive. */
                r = -EADDRINUSE;
                buf_printf(err, "another podmux is serving on %s", path);
        } else if (errno == ECONNREFUSED) {
                r = unlink(path) < 0 && errno != ENOENT ? -errno : 0;
                if (r < 0)
                        buf_printf(err, "cannot remove stale socket \"%s\": %s", path, ERRNO_STR(r));
        } else if (errno != ENOENT) {
                r = -errno;
                buf_printf(err, "cannot check socket \"%s\": %s", path, ERRNO_STR(r));
        } else {
                r = 0;
        }
done:
        if (probe >= 0)
                close(probe);
        free(dir);
        return r;
}

int unix_listen(const char *path, mode_t mode, gid_t gid, struct unix_listener *ret, struct buf *err)
{
        struct unix_listener l = {.fd = -1};
        struct sockaddr_un sa;
        struct stat st;
        int r;

        buf_reset(err);
        memset(&sa, 0, sizeof(sa));
        sa.sun_family = AF_UNIX;
        if (strlen(path) >= sizeof(sa.sun_path)) {
                buf_printf(err, "socket path \"%s\" is longer than %zu bytes", path, sizeof(sa.sun_path) - 1);
                return -ENAMETOOLONG;
        }
        memcpy(sa.sun_path, path, strlen(path) + 1);
        r = clear_path(path, &sa, err);
        if (r < 0)
                return r;
        l.path = strdup(path);
        if (!l.path)
                return -ENOMEM;
        l.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (l.fd < 0) {
                r = -errno;
                buf_printf(err, "socket: %s", ERRNO_STR(r));
                goto fail;
        }
        if (bind(l.fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                r = -errno;
                if (r == -EADDRINUSE)
                        buf_printf(err, "another podmux is serving on %s", path);
                else
                        buf_printf(err, "cannot bind socket \"%s\": %s", path, ERRNO_STR(r));
                goto fail;
        }
        if (lstat(path, &st) < 0) {
                r = -errno;
                buf_printf(err, "socket \"%s\": %s", path, ERRNO_STR(r));
                goto fail;
        }
        l.bound = true;
        l.dev = st.st_dev;
        l.ino = st.st_ino;
        if (gid != (gid_t)-1 && chown(path, (uid_t)-1, gid) < 0) {
                r = -errno;
                buf_printf(err, "cannot set group %u on socket \"%s\": %s", (unsigned)gid, path, ERRNO_STR(r));
                goto fail;
        }
        if (chmod(path, mode) < 0) {
                r = -errno;
                buf_printf(err, "cannot set mode %04o on socket \"%s\": %s", (unsigned)mode, path, ERRNO_STR(r));
                goto fail;
        }
        if (listen(l.fd, SOMAXCONN) < 0) {
                r = -errno;
                buf_printf(err, "cannot listen on socket \"%s\": %s", path, ERRNO_STR(r));
                goto fail;
        }
        *ret = l;
        return 0;
fail:
        unix_listener_close(&l);
        return r;
}

void unix_listener_close(struct unix_listener *l)
{
        struct stat st;

        if (l->fd >= 0)
                close(l->fd);
        l->fd = -1;
        if (l->bound && l->path && lstat(l->path, &st) == 0 && st.st_dev == l->dev && st.st_ino == l->ino)
                (void)unlink(l->path);
        l->bound = false;
        free(l->path);
        l->path = NULL;
}
