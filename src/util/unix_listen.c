/*
 * unix_listen — see src/util/unix_listen.h.
 *
 * One daemon per path.  Two daemons started together used to race: each
 * probed the path with connect(), and a socket the other had bound but not
 * yet listened on refuses connections exactly like a leftover, so the
 * second removed the first's socket and both served.  Now the path belongs
 * to whoever holds an exclusive flock() on "<path>.lock", taken before the
 * socket path is looked at and held until the listener is closed.  Under
 * the lock no other podmux can be between bind() and listen() at path, so
 * a socket file that refuses connections really is a leftover.
 *
 * The lock file.  We hold only a file we made, and we make it whole: our
 * pid is written into a private temporary file, which is locked and then
 * link()ed to the lock path, so a daemon that finds the lock held always
 * finds the holder's pid in it (create_lock()).  A file we find and can
 * lock is a leftover (its daemon died) or is being removed by its holder:
 * we remove it if the path still names the inode we locked, and start
 * over.  That check matters because a holder removes its file on the way
 * out (unix_listener_close(), before it releases the lock, so a clean stop
 * leaves the directory as it was): a daemon that opened the file just
 * before that locks an orphan, and must neither use it nor remove
 * whatever the path names by then.
 *
 * Group and mode are set with chown()/chmod() between bind() and listen():
 * no connection can be accepted before, and the file bind() makes is
 * owner-only until then (fchmod() of the socket first), whatever the
 * umask.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/dir.h"
#include "util/log.h" /* ERRNO_STR only */
#include "util/unix_listen.h"

/* Attempts at taking the lock when the lock file is removed or replaced
 * under us each time (each one means another daemon just exited or just
 * started): more than this is not a race but someone playing with it. */
#define LOCK_TRIES 16

/* path's directory, made as mkdir -p would when missing (a socket under
 * /run/podmux on a node where no unit made /run/podmux); 0, else -errno
 * with err set. */
static int make_dir(const char *path, struct buf *err)
{
        char *dir = strdup(path), *slash;
        int r;

        if (!dir)
                return -ENOMEM;
        slash = strrchr(dir, '/');
        if (!slash) {
                dir[0] = '.';
                dir[1] = '\0';
        } else {
                slash[slash == dir ? 1 : 0] = '\0';
        }
        r = dir_make(dir, DIR_PARENT_MODE, err);
        if (r < 0 && err && err->len)
                r = buf_set_err(err, r, "socket \"%s\": %s", path, err->data);
        free(dir);
        return r;
}

/* The pid the holder wrote in the lock file ("N\n"), or 0 if it is not
 * one. */
static long read_holder_pid(int fd)
{
        char text[32], *end;
        ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
        long pid;

        if (n <= 0)
                return 0;
        text[n] = '\0';
        if (text[0] < '0' || text[0] > '9')
                return 0;
        errno = 0;
        pid = strtol(text, &end, 10);
        if (errno || *end != '\n' || pid <= 0 || pid > INT_MAX)
                return 0;
        return pid;
}

static bool pid_alive(long pid)
{
        return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

/*
 * Makes the lock file, already locked by us and holding our pid: the pid
 * goes into a private temporary file, which is locked and then linked to
 * the lock path.  So nobody ever finds a lock file without its holder's
 * pid.  0 and *ret_fd; -EEXIST when a file appeared at the lock path
 * meanwhile (the caller looks at that one); else -errno with err set.
 */
static int create_lock(const char *lock_path, int *ret_fd, struct buf *err)
{
        static const char suffix[] = ".XXXXXX";
        size_t n = strlen(lock_path);
        char *tmp = malloc(n + sizeof(suffix)), text[32];
        int fd, len, r;
        ssize_t w;

        if (!tmp)
                return -ENOMEM;
        memcpy(tmp, lock_path, n);
        memcpy(tmp + n, suffix, sizeof(suffix));
        fd = mkostemp(tmp, O_CLOEXEC); /* mode 0600 */
        if (fd < 0) {
                r = -errno;
                r = buf_set_err(err, r, "cannot create lock file \"%s\": %s", lock_path, ERRNO_STR(r));
                free(tmp);
                return r;
        }
        len = snprintf(text, sizeof(text), "%ld\n", (long)getpid());
        w = pwrite(fd, text, (size_t)len, 0);
        if (w != len) {
                r = w < 0 ? -errno : -EIO;
                r = buf_set_err(err, r, "cannot write our pid to lock file \"%s\": %s", lock_path, ERRNO_STR(r));
                goto out;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                r = -errno;
                r = buf_set_err(err, r, "cannot lock \"%s\": %s", lock_path, ERRNO_STR(r));
                goto out;
        }
        r = link(tmp, lock_path) < 0 ? -errno : 0;
        if (r < 0 && r != -EEXIST)
                r = buf_set_err(err, r, "cannot create lock file \"%s\": %s", lock_path, ERRNO_STR(r));
out:
        (void)unlink(tmp);
        free(tmp);
        if (r < 0)
                close(fd);
        else
                *ret_fd = fd;
        return r;
}

/*
 * One look at a lock file that exists, open as fd (closed here, whatever
 * the outcome): 0 when nobody held it (it was removed if the path still
 * names it), 1 when a holder whose pid names no live process held it (it
 * is on its way out), else -errno with err set (-EADDRINUSE with "another
 * podmux (pid N) serves <path>" when a live daemon holds it).  Either way
 * the caller opens the lock path again.
 */
static int look_at_lock(struct unix_listener *l, int fd, struct buf *err)
{
        struct stat st, now;
        int r;

        if (fstat(fd, &st) < 0) {
                r = -errno;
                r = buf_set_err(err, r, "lock file \"%s\": %s", l->lock_path, ERRNO_STR(r));
                goto fail;
        }
        if (!S_ISREG(st.st_mode)) {
                r = -EEXIST;
                r = buf_set_err(err, r, "\"%s\" is not a regular file; not using it as the lock file", l->lock_path);
                goto fail;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                long pid;

                r = -errno;
                if (r != -EWOULDBLOCK) {
                        r = buf_set_err(err, r, "cannot lock \"%s\": %s", l->lock_path, ERRNO_STR(r));
                        goto fail;
                }
                pid = read_holder_pid(fd);
                close(fd);
                if (pid > 0 && pid_alive(pid))
                        return buf_set_err(err, -EADDRINUSE, "another podmux (pid %ld) serves %s", pid, l->path);
                sched_yield(); /* let it finish removing the file */
                return 1;
        }
        /* Nobody holds it.  Remove it (while locked) only if the
         * path still names it: its holder may have removed it
         * between our open() and flock(), and a new one made. */
        if (lstat(l->lock_path, &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino &&
            unlink(l->lock_path) < 0 && errno != ENOENT) {
                r = -errno;
                r = buf_set_err(err, r, "cannot remove stale lock file \"%s\": %s", l->lock_path, ERRNO_STR(r));
                goto fail;
        }
        r = 0;
fail:
        close(fd);
        return r;
}

/* Keeps fd, the lock file create_lock() made, in l.  0, or -errno with
 * err set (the file is removed and fd closed). */
static int keep_lock(struct unix_listener *l, int fd, struct buf *err)
{
        struct stat st;
        int r;

        if (fstat(fd, &st) < 0) {
                r = -errno;
                r = buf_set_err(err, r, "lock file \"%s\": %s", l->lock_path, ERRNO_STR(r));
                (void)unlink(l->lock_path);
                close(fd);
                return r;
        }
        l->lock_fd = fd;
        l->lock_dev = st.st_dev;
        l->lock_ino = st.st_ino;
        return 0;
}

/*
 * Takes the lock: fills l->lock_fd, lock_dev, lock_ino.  -EADDRINUSE with
 * "another podmux (pid N) serves <path>" when someone holds it.
 *
 * We only ever hold a lock file we made (create_lock()).  A file we find
 * and can lock has no holder: its daemon died, or is removing it on its
 * way out.  We remove it if the path still names it, and start over.
 * A holder whose file names no live process is in that step, about to
 * remove it: we look again a few times before saying "unknown pid".
 */
static int take_lock(struct unix_listener *l, struct buf *err)
{
        bool held = false;
        int fd = -1, r = 0, tries;

        for (tries = 0; tries < LOCK_TRIES; tries++) {
                /* O_NOFOLLOW: a link planted at the name is not followed.
                 * O_NONBLOCK: a FIFO planted there does not hang us. */
                fd = open(l->lock_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
                if (fd < 0 && errno == ENOENT) {
                        r = create_lock(l->lock_path, &fd, err);
                        if (r == 0)
                                return keep_lock(l, fd, err);
                        if (r != -EEXIST)
                                return r;
                        continue;
                }
                if (fd < 0) {
                        r = -errno;
                        if (r == -ELOOP) {
                                r = -EEXIST;
                                r = buf_set_err(err, r, "\"%s\" is a symbolic link; not using it as the lock file",
                                                l->lock_path);
                        } else {
                                r = buf_set_err(err, r, "cannot open lock file \"%s\": %s", l->lock_path, ERRNO_STR(r));
                        }
                        return r;
                }
                r = look_at_lock(l, fd, err);
                if (r < 0)
                        return r;
                held = r > 0;
        }
        if (held)
                return buf_set_err(err, -EADDRINUSE, "another podmux (unknown pid) serves %s", l->path);
        return buf_set_err(err, -EAGAIN, "lock file \"%s\" was replaced %d times while we took it; giving up",
                           l->lock_path, LOCK_TRIES);
}

/* With the lock held: 0 when path is free (a leftover socket file was
 * removed), else -errno with err set. */
static int clear_path(const char *path, const struct sockaddr_un *sa, struct buf *err)
{
        struct stat st;
        int probe = -1, r;

        if (lstat(path, &st) < 0) {
                r = errno == ENOENT ? 0 : -errno;
                if (r < 0)
                        r = buf_set_err(err, r, "socket \"%s\": %s", path, ERRNO_STR(r));
                return r;
        }
        if (!S_ISSOCK(st.st_mode))
                return buf_set_err(err, -EEXIST, "\"%s\" exists and is not a socket; not replacing it", path);
        /* The lock says no podmux is using the file.  Something that does
         * not take the lock (another program, an older podmux) may still
         * listen on it: that one answers, and we leave it alone.  One that
         * has bound but not yet listened cannot be told from a leftover;
         * only the lock can protect against that, so it is replaced. */
        probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (probe < 0) {
                r = -errno;
                r = buf_set_err(err, r, "socket: %s", ERRNO_STR(r));
                return r;
        }
        if (connect(probe, (const struct sockaddr *)sa, sizeof(*sa)) == 0 || errno == EAGAIN ||
            errno == EINPROGRESS) {
                /* EAGAIN: its backlog is full, it is alive. */
                r = -EADDRINUSE;
                r = buf_set_err(err, r, "a process that is not podmux is listening on %s; not replacing it", path);
        } else if (errno == ECONNREFUSED) {
                r = unlink(path) < 0 && errno != ENOENT ? -errno : 0;
                if (r < 0)
                        r = buf_set_err(err, r, "cannot remove stale socket \"%s\": %s", path, ERRNO_STR(r));
        } else if (errno != ENOENT) {
                r = -errno;
                r = buf_set_err(err, r, "cannot check socket \"%s\": %s", path, ERRNO_STR(r));
        } else {
                r = 0;
        }
        close(probe);
        return r;
}

int unix_listen(const char *path, mode_t mode, gid_t gid, struct unix_listener *ret, struct buf *err)
{
        struct unix_listener l = {.fd = -1, .lock_fd = -1};
        struct sockaddr_un sa;
        struct stat st;
        size_t len = strlen(path);
        int r;

        memset(&sa, 0, sizeof(sa));
        sa.sun_family = AF_UNIX;
        if (len >= sizeof(sa.sun_path))
                return buf_set_err(err, -ENAMETOOLONG, "socket path \"%s\" is longer than %zu bytes", path,
                                   sizeof(sa.sun_path) - 1);
        memcpy(sa.sun_path, path, len + 1);
        r = make_dir(path, err);
        if (r < 0)
                goto fail;
        l.path = strdup(path);
        l.lock_path = malloc(len + sizeof(UNIX_LISTEN_LOCK_SUFFIX));
        if (!l.path || !l.lock_path) {
                r = -ENOMEM;
                goto fail;
        }
        memcpy(l.lock_path, path, len);
        memcpy(l.lock_path + len, UNIX_LISTEN_LOCK_SUFFIX, sizeof(UNIX_LISTEN_LOCK_SUFFIX));
        r = take_lock(&l, err);
        if (r < 0)
                goto fail;
        r = clear_path(path, &sa, err);
        if (r < 0)
                goto fail;
        l.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (l.fd < 0) {
                r = -errno;
                r = buf_set_err(err, r, "socket: %s", ERRNO_STR(r));
                goto fail;
        }
        /* On Linux the file bind() makes takes the socket's own mode (less
         * the umask): owner-only here, so that the file is never wider than
         * asked, nor open to a group before it is ours (chmod() below
         * gives the mode asked).  Best effort: where fchmod() cannot do
         * that, no connection is taken before listen() anyway. */
        (void)fchmod(l.fd, mode & 0700);
        if (bind(l.fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                r = -errno;
                if (r == -EADDRINUSE)
                        r = buf_set_err(err, r, "a process that is not podmux created %s while we replaced it", path);
                else
                        r = buf_set_err(err, r, "cannot bind socket \"%s\": %s", path, ERRNO_STR(r));
                goto fail;
        }
        if (lstat(path, &st) < 0) {
                r = -errno;
                r = buf_set_err(err, r, "socket \"%s\": %s", path, ERRNO_STR(r));
                goto fail;
        }
        l.bound = true;
        l.dev = st.st_dev;
        l.ino = st.st_ino;
        if (gid != (gid_t)-1 && chown(path, (uid_t)-1, gid) < 0) {
                r = -errno;
                r = buf_set_err(err, r, "cannot set group %u on socket \"%s\": %s", (unsigned)gid, path, ERRNO_STR(r));
                goto fail;
        }
        if (chmod(path, mode) < 0) {
                r = -errno;
                r = buf_set_err(err, r, "cannot set mode %04o on socket \"%s\": %s", (unsigned)mode, path,
                                ERRNO_STR(r));
                goto fail;
        }
        if (listen(l.fd, SOMAXCONN) < 0) {
                r = -errno;
                r = buf_set_err(err, r, "cannot listen on socket \"%s\": %s", path, ERRNO_STR(r));
                goto fail;
        }
        *ret = l;
        return 0;
fail:
        if (r == -ENOMEM && err)
                buf_reset(err); /* a failure replaces what err held */
        if (!l.path) {
                free(l.lock_path);
                return r;
        }
        unix_listener_close(&l);
        return r;
}

void unix_listener_close(struct unix_listener *l)
{
        struct stat st;

        if (!l->path)
                return;
        if (l->fd >= 0)
                close(l->fd);
        l->fd = -1;
        if (l->bound && lstat(l->path, &st) == 0 && st.st_dev == l->dev && st.st_ino == l->ino)
                (void)unlink(l->path);
        l->bound = false;
        /* Removed while still locked: see the top of this file. */
        if (l->lock_fd >= 0) {
                if (lstat(l->lock_path, &st) == 0 && st.st_dev == l->lock_dev && st.st_ino == l->lock_ino)
                        (void)unlink(l->lock_path);
                close(l->lock_fd);
        }
        l->lock_fd = -1;
        free(l->lock_path);
        l->lock_path = NULL;
        free(l->path);
        l->path = NULL;
}
