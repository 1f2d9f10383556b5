/*
 * iofault — an LD_PRELOAD shim that makes chosen files unreadable in a
 * real process, for the integration tests (tests/integration/
 * test_file_delta.py).  The unit tests fail one inode from inside the
 * process (tests/unit/failalloc.c); a daemon under test needs the same
 * from outside, without a rebuild.
 *
 * $PODMUX_IOFAULT_FILE names a control file the test rewrites between
 * steps (by rename, so it is never seen half written).  Each line is
 *
 *     CALL ERRNO PATH
 *
 * CALL is `open` (open(2) of PATH fails) or `read` (the open succeeds,
 * every read(2) of that descriptor fails); ERRNO is a number (5 EIO,
 * 13 EACCES...).  PATH is compared byte for byte with the path the
 * process passes (made absolute against the working directory or the
 * directory descriptor of openat()), so a symbolic link's target is
 * failed only when it is listed itself.
 *
 * The control file is read again at every open: a few microseconds, for
 * a test process only.  A descriptor opened for a `read` fault keeps it
 * until closed, as an I/O error on a real disk would.
 *
 * Under ASan the sanitizer's runtime must come first in LD_PRELOAD (the
 * test puts it there); this file is built without sanitizers and takes
 * the real functions with dlsym(RTLD_NEXT), which is then ASan's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* Descriptors past this are never failed (the tests hold a few dozen). */
#define IOFAULT_FDS 4096
/* The control file's size limit: a handful of lines. */
#define IOFAULT_CONTROL_MAX 16384

enum { CALL_NONE, CALL_OPEN, CALL_READ };

/* fd -> the errno its reads fail with, 0 for none.  Written by open and
 * close of that fd only, so threads never race on one slot. */
static int read_faults[IOFAULT_FDS];

static int (*real_open)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static ssize_t (*real_read)(int, void *, size_t);
static int (*real_close)(int);

static void resolve(void)
{
        if (!real_open) {
                real_open = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
                real_openat = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat");
                real_read = (ssize_t (*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
                real_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
        }
}

/* path as an absolute path (dirfd as openat() takes it) into out;
 * false if it cannot be made so. */
static bool absolute(int dirfd, const char *path, char *out, size_t size)
{
        char dir[PATH_MAX], link[64];
        ssize_t n;

        if (path[0] == '/')
                return (size_t)snprintf(out, size, "%s", path) < size;
        if (dirfd == AT_FDCWD) {
                if (!getcwd(dir, sizeof(dir)))
                        return false;
        } else {
                (void)snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
                n = readlink(link, dir, sizeof(dir) - 1);
                if (n < 0)
                        return false;
                dir[n] = '\0';
        }
        return (size_t)snprintf(out, size, "%s/%s", dir, path) < size;
}

/* The fault the control file sets on path: CALL_* with *ret_err. */
static int lookup(int dirfd, const char *path, int *ret_err)
{
        static const char *const calls[] = {[CALL_OPEN] = "open", [CALL_READ] = "read"};
        const char *control = getenv("PODMUX_IOFAULT_FILE");
        char want[PATH_MAX], buf[IOFAULT_CONTROL_MAX];
        size_t len = 0;
        char *line, *next;
        int fd, found = CALL_NONE;
        ssize_t n;

        if (!control || !absolute(dirfd, path, want, sizeof(want)) || strcmp(want, control) == 0)
                return CALL_NONE;
        fd = real_open(control, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return CALL_NONE;
        while (len < sizeof(buf) - 1 && (n = real_read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
                len += (size_t)n;
        real_close(fd);
        buf[len] = '\0';
        for (line = buf; line && *line && found == CALL_NONE; line = next) {
                char *e1, *e2;
                long err;

                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                e1 = strchr(line, ' ');
                if (!e1)
                        continue;
                *e1++ = '\0';
                err = strtol(e1, &e2, 10);
                if (e2 == e1 || *e2 != ' ' || err <= 0 || strcmp(e2 + 1, want) != 0)
                        continue;
                for (int c = CALL_OPEN; c <= CALL_READ; c++)
                        if (strcmp(line, calls[c]) == 0) {
                                found = c;
                                *ret_err = (int)err;
                        }
        }
        return found;
}

static int opened(int fd, int call, int err)
{
        if (fd >= 0 && fd < IOFAULT_FDS)
                __atomic_store_n(&read_faults[fd], call == CALL_READ ? err : 0, __ATOMIC_RELAXED);
        return fd;
}

static int do_openat(int dirfd, const char *path, int flags, mode_t mode)
{
        int err = 0, call;

        resolve();
        call = lookup(dirfd, path, &err);
        if (call == CALL_OPEN) {
                errno = err;
                return -1;
        }
        return opened(real_openat(dirfd, path, flags, mode), call, err);
}

static mode_t mode_arg(int flags, va_list ap)
{
        return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

/* The exported names: prototypes here since no header declares a shim. */
int open(const char *path, int flags, ...);
int open64(const char *path, int flags, ...);
int openat(int dirfd, const char *path, int flags, ...);
int openat64(int dirfd, const char *path, int flags, ...);
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
ssize_t read(int fd, void *data, size_t size);
int close(int fd);

int open(const char *path, int flags, ...)
{
        va_list ap;
        mode_t mode;

        va_start(ap, flags);
        mode = mode_arg(flags, ap);
        va_end(ap);
        return do_openat(AT_FDCWD, path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
        va_list ap;
        mode_t mode;

        va_start(ap, flags);
        mode = mode_arg(flags, ap);
        va_end(ap);
        return do_openat(AT_FDCWD, path, flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...)
{
        va_list ap;
        mode_t mode;

        va_start(ap, flags);
        mode = mode_arg(flags, ap);
        va_end(ap);
        return do_openat(dirfd, path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...)
{
        va_list ap;
        mode_t mode;

        va_start(ap, flags);
        mode = mode_arg(flags, ap);
        va_end(ap);
        return do_openat(dirfd, path, flags, mode);
}

/* What _FORTIFY_SOURCE calls for an open() without O_CREAT. */
int __open_2(const char *path, int flags)
{
        return do_openat(AT_FDCWD, path, flags, 0);
}

int __open64_2(const char *path, int flags)
{
        return do_openat(AT_FDCWD, path, flags, 0);
}

int __openat_2(int dirfd, const char *path, int flags)
{
        return do_openat(dirfd, path, flags, 0);
}

ssize_t read(int fd, void *data, size_t size)
{
        int err = fd >= 0 && fd < IOFAULT_FDS ? __atomic_load_n(&read_faults[fd], __ATOMIC_RELAXED) : 0;

        resolve();
        if (err) {
                errno = err;
                return -1;
        }
        return real_read(fd, data, size);
}

int close(int fd)
{
        resolve();
        if (fd >= 0 && fd < IOFAULT_FDS)
                __atomic_store_n(&read_faults[fd], 0, __ATOMIC_RELAXED);
        return real_close(fd);
}
