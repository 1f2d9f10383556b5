/*
 * file — whole-file reads within a limit (see src/util/file.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/file.h"
#include "util/str.h"

const char *file_kind(mode_t m)
{
        if (S_ISDIR(m))
                return "a directory";
        if (S_ISSOCK(m))
                return "a socket";
        if (S_ISFIFO(m))
                return "a FIFO";
        if (S_ISCHR(m))
                return "a character device";
        if (S_ISBLK(m))
                return "a block device";
        return "not a regular file";
}

/* A regular file under the limit, as st describes it: 0, or the error. */
static int check_file(const struct stat *st, size_t limit, struct buf *err)
{
        if (!S_ISREG(st->st_mode))
                return buf_set_err(err, -EINVAL, "is %s, not a regular file", file_kind(st->st_mode));
        if ((uint64_t)st->st_size >= limit)
                return buf_set_err(err, -EFBIG, "file too large (%lld bytes, limit %zu)", (long long)st->st_size,
                                   limit);
        return 0;
}

/* Opens path for reading once stat() and fstat() say it is a regular
 * file under the limit.  0 with *ret_fd and *ret_st (what fstat() saw),
 * or -errno with err set. */
static int open_checked(const char *path, size_t limit, int *ret_fd, struct stat *ret_st, struct buf *err)
{
        struct stat st;
        int fd, r;

        /* Looked at before it is opened, so no device or FIFO is ever
         * opened in the common case; and again once open (fstat), since
         * the path may have changed in between. */
        if (stat(path, &st) < 0) {
                r = -errno;
                return buf_set_err(err, r, "%s", ERRNO_STR(r));
        }
        if ((r = check_file(&st, limit, err)) < 0)
                return r;
        /* O_NONBLOCK: if a FIFO was swapped in after stat(), open() must
         * not wait for a writer.  It changes nothing for regular files. */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
                r = -errno;
                return buf_set_err(err, r, "%s", ERRNO_STR(r));
        }
        if (fstat(fd, &st) < 0) {
                r = -errno;
                r = buf_set_err(err, r, "%s", ERRNO_STR(r));
                goto fail;
        }
        if ((r = check_file(&st, limit, err)) < 0)
                goto fail;
        *ret_fd = fd;
        *ret_st = st;
        return 0;
fail:
        close(fd);
        return r;
}

/* Reads fd to EOF into a new NUL-terminated block, first sized for size
 * bytes (what fstat() said).  0 with *ret_data (the caller frees it) and
 * *ret_len, or -errno with err set (-EFBIG at the limit). */
static int read_to_end(int fd, size_t size, size_t limit, char **ret_data, size_t *ret_len, struct buf *err)
{
        char *data, *bigger;
        size_t len = 0, cap = size + 1;
        int r;

        if (cap < 4096)
                cap = 4096;
        if (cap > limit + 1)
                cap = limit + 1;
        data = malloc(cap);
        if (!data)
                return -ENOMEM;
        /* The file may grow after fstat(): read to EOF, stopping at the
         * limit (an input of exactly the limit is already too large). */
        for (;;) {
                ssize_t n;

                if (len == cap - 1) {
                        if (len >= limit) {
                                r = buf_set_err(err, -EFBIG, "file too large (at least %zu bytes, limit %zu)", len,
                                                limit);
                                goto fail;
                        }
                        cap = cap * 2 > limit + 1 ? limit + 1 : cap * 2;
                        bigger = realloc(data, cap);
                        if (!bigger) {
                                r = -ENOMEM;
                                goto fail;
                        }
                        data = bigger;
                }
                n = read(fd, data + len, cap - 1 - len);
                if (n < 0) {
                        if (errno == EINTR || errno == EAGAIN)
                                continue;
                        r = -errno;
                        r = buf_set_err(err, r, "read: %s", ERRNO_STR(r));
                        goto fail;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        if (len >= limit) {
                r = buf_set_err(err, -EFBIG, "file too large (%zu bytes, limit %zu)", len, limit);
                goto fail;
        }
        data[len] = '\0';
        *ret_data = data;
        *ret_len = len;
        return 0;
fail:
        free(data);
        return r;
}

int file_read_stat(const char *path, size_t limit, char **ret_data, size_t *ret_len, struct stat *ret_st,
                   struct buf *err)
{
        struct stat st;
        int fd = -1, r;

        r = open_checked(path, limit, &fd, &st, err);
        if (r < 0)
                return r;
        r = read_to_end(fd, (size_t)st.st_size, limit, ret_data, ret_len, err);
        close(fd);
        if (r == -ENOMEM && err)
                buf_reset(err); /* no message, and none left from before */
        if (r == 0 && ret_st)
                *ret_st = st;
        return r;
}

int file_read(const char *path, size_t limit, char **ret_data, size_t *ret_len, struct buf *err)
{
        return file_read_stat(path, limit, ret_data, ret_len, NULL, err);
}
