/* Unit tests: whole-file reads within a caller's limit (util/file). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "failalloc.h"
#include "util/file.h"
#include "unit.h"

static char dir[64];

static char *path_in(const char *name)
{
        char *p = NULL;

        ck_assert_int_ge(asprintf(&p, "%s/%s", dir, name), 0);
        return p;
}

static void make_dir(void)
{
        memcpy(dir, "/tmp/podmux-file-XXXXXX", sizeof("/tmp/podmux-file-XXXXXX"));
        ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void put(const char *path, const char *text, size_t len)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
        ck_assert_int_eq(close(fd), 0);
}

START_TEST(test_read_whole_file)
{
        struct buf err = BUF_INIT;
        char *data = NULL, *f, *link;
        size_t len = 0;

        make_dir();
        f = path_in("a.yaml");
        link = path_in("link.yaml");
        put(f, "kind: Pod\n", 10);
        ck_assert_int_eq(file_read(f, 4096, &data, &len, &err), 0);
        ck_assert_uint_eq(len, 10);
        ck_assert_str_eq(data, "kind: Pod\n");
        free(data);

        /* Symlinks are followed. */
        ck_assert_int_eq(symlink(f, link), 0);
        ck_assert_int_eq(file_read(link, 4096, &data, &len, &err), 0);
        ck_assert_str_eq(data, "kind: Pod\n");
        free(data);

        /* An empty file is zero bytes, NUL-terminated. */
        put(f, "", 0);
        ck_assert_int_eq(file_read(f, 4096, &data, &len, &err), 0);
        ck_assert_uint_eq(len, 0);
        ck_assert_str_eq(data, "");
        free(data);
        ck_assert_uint_eq(err.len, 0); /* successes leave err alone */
        unlink(link);
        unlink(f);
        rmdir(dir);
        free(f);
        free(link);
        buf_free(&err);
}
END_TEST

/* What is not a regular file is refused with what it is; a FIFO never
 * makes the reader wait for a writer. */
START_TEST(test_refuses_what_is_not_a_file)
{
        struct buf err = BUF_INIT;
        char *data = NULL, *f, *dangling;
        size_t len = 0;

        make_dir();
        f = path_in("fifo");
        dangling = path_in("dangling");
        ck_assert_int_eq(symlink("/nonexistent/podmux", dangling), 0);
        ck_assert_int_eq(file_read(dangling, 4096, &data, &len, &err), -ENOENT);
        ck_assert_str_eq(err.data, "No such file or directory");
        ck_assert_int_eq(file_read(dir, 4096, &data, &len, &err), -EINVAL);
        ck_assert_str_eq(err.data, "is a directory, not a regular file");
        ck_assert_int_eq(mkfifo(f, 0600), 0);
        ck_assert_int_eq(file_read(f, 4096, &data, &len, &err), -EINVAL);
        ck_assert_str_eq(err.data, "is a FIFO, not a regular file");
        ck_assert_ptr_null(data);
        unlink(f);
        unlink(dangling);
        rmdir(dir);
        free(f);
        free(dangling);
        buf_free(&err);
}
END_TEST

/* The limit is the caller's: one byte under it is read, the limit itself
 * is too large. */
START_TEST(test_limit_is_the_callers)
{
        struct buf err = BUF_INIT;
        char *data = NULL, *f;
        size_t len = 0;
        int fd;

        make_dir();
        f = path_in("big");
        fd = open(f, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, 99999), 0);
        ck_assert_int_eq(file_read(f, 100000, &data, &len, &err), 0);
        ck_assert_uint_eq(len, 99999);
        ck_assert_int_eq(data[len], '\0');
        free(data);
        data = NULL;
        ck_assert_int_eq(ftruncate(fd, 100000), 0);
        ck_assert_int_eq(file_read(f, 100000, &data, &len, &err), -EFBIG);
        ck_assert_str_eq(err.data, "file too large (100000 bytes, limit 100000)");
        ck_assert_ptr_null(data);
        ck_assert_int_eq(file_read(f, 1000000, &data, &len, &err), 0);
        ck_assert_uint_eq(len, 100000);
        free(data);
        close(fd);
        unlink(f);
        rmdir(dir);
        free(f);
        buf_free(&err);
}
END_TEST

/* Every allocation failing in turn: -ENOMEM, nothing returned, nothing
 * leaked, err empty (buf.h's convention); the read then succeeds. */
START_TEST(test_out_of_memory)
{
        struct buf err = BUF_INIT;
        char *data = NULL, *f;
        size_t len = 0;
        long n, before;
        int r;

        if (!failalloc_enabled())
                return;
        make_dir();
        f = path_in("a");
        put(f, "0123456789", 10);
        before = failalloc_live();
        for (n = 1;; n++) {
                bool failed;

                /* A message from before must not read as this failure's. */
                ck_assert_int_eq(buf_puts(&err, "stale"), 0);
                failalloc_arm(n);
                r = file_read(f, 4096, &data, &len, &err);
                failed = failalloc_failed();
                failalloc_arm(0);
                if (!failed) {
                        ck_assert_int_eq(r, 0);
                        ck_assert_str_eq(data, "0123456789");
                        free(data);
                        break;
                }
                ck_assert_int_eq(r, -ENOMEM);
                ck_assert_uint_eq(err.len, 0);
                buf_free(&err);
                ck_assert_int_eq(failalloc_live(), before);
        }
        ck_assert_int_ge(n, 2);
        unlink(f);
        rmdir(dir);
        free(f);
        buf_free(&err);
}
END_TEST

/* file_read_stat() says what the descriptor read was: its size and
 * mtime, as fstat(2) gave them; a failure leaves the stat alone. */
START_TEST(test_read_with_stat)
{
        struct buf err = BUF_INIT;
        struct stat st, want;
        char *data = NULL, *f, *missing;
        size_t len = 0;

        make_dir();
        f = path_in("a.yaml");
        missing = path_in("none.yaml");
        put(f, "kind: Pod\n", 10);
        ck_assert_int_eq(stat(f, &want), 0);
        memset(&st, 0, sizeof(st));
        ck_assert_int_eq(file_read_stat(f, 4096, &data, &len, &st, &err), 0);
        ck_assert_int_eq(st.st_size, 10);
        ck_assert_int_eq(st.st_mtim.tv_sec, want.st_mtim.tv_sec);
        ck_assert_int_eq(st.st_mtim.tv_nsec, want.st_mtim.tv_nsec);
        ck_assert_int_eq(st.st_ino, want.st_ino);
        free(data);
        memset(&st, 0x5a, sizeof(st));
        ck_assert_int_eq(file_read_stat(missing, 4096, &data, &len, &st, &err), -ENOENT);
        ck_assert_int_eq((int)(st.st_size & 0xff), 0x5a);
        ck_assert_int_eq(file_read_stat(f, 4096, &data, &len, NULL, &err), 0);
        free(data);
        unlink(f);
        rmdir(dir);
        free(f);
        free(missing);
        buf_free(&err);
}
END_TEST

UNIT_MAIN(test_read_with_stat, test_read_whole_file, test_refuses_what_is_not_a_file, test_limit_is_the_callers,
          test_out_of_memory)
