/* Unit tests: making a directory as mkdir -p does (util/dir). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "failalloc.h"
#include "unit.h"
#include "util/dir.h"

static char top[64];

static void make_top(void)
{
        memcpy(top, "/tmp/podmux-dir-XXXXXX", sizeof("/tmp/podmux-dir-XXXXXX"));
        ck_assert_ptr_nonnull(mkdtemp(top));
}

static char *in_top(const char *name)
{
        char *p = NULL;

        ck_assert_int_ge(asprintf(&p, "%s/%s", top, name), 0);
        return p;
}

static unsigned mode_of(const char *path)
{
        struct stat st;

        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert(S_ISDIR(st.st_mode));
        return (unsigned)(st.st_mode & 07777);
}

static void rm(const char *name)
{
        char *p = in_top(name);

        (void)rmdir(p);
        (void)unlink(p);
        free(p);
}

/* The missing parents are made 0755 and the directory itself with its
 * mode; what exists keeps its mode; a second call finds it all. */
START_TEST(test_makes_parents)
{
        struct buf err = BUF_INIT;
        char *a, *ab, *abc, *deep;
        mode_t old = umask(022);

        make_top();
        a = in_top("a");
        ab = in_top("a/b");
        abc = in_top("a/b/c");
        deep = in_top("a//b/c/");
        ck_assert_int_eq(mkdir(a, 0711), 0);
        ck_assert_int_eq(chmod(a, 0711), 0);
        ck_assert_int_eq(dir_make(deep, 0700, &err), 0);
        ck_assert_uint_eq(mode_of(a), 0711); /* existed: left alone */
        ck_assert_uint_eq(mode_of(ab), 0755);
        ck_assert_uint_eq(mode_of(abc), 0700);
        ck_assert_uint_eq(err.len, 0);
        /* All there: nothing changes, not even the last one's mode. */
        ck_assert_int_eq(chmod(abc, 0750), 0);
        ck_assert_int_eq(dir_make(abc, 0700, &err), 0);
        ck_assert_uint_eq(mode_of(abc), 0750);
        ck_assert_int_eq(dir_make("/", 0700, &err), 0);
        ck_assert_int_eq(dir_make(".", 0700, &err), 0);
        rm("a/b/c");
        rm("a/b");
        rm("a");
        ck_assert_int_eq(rmdir(top), 0);
        umask(old);
        free(a);
        free(ab);
        free(abc);
        free(deep);
        buf_free(&err);
}
END_TEST

/* A relative path is made from the working directory. */
START_TEST(test_relative)
{
        struct buf err = BUF_INIT;
        char cwd[4096];

        make_top();
        ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
        ck_assert_int_eq(chdir(top), 0);
        ck_assert_int_eq(dir_make("x/y", 0700, &err), 0);
        ck_assert_uint_eq(mode_of("x") & 0700, 0700);
        ck_assert_uint_eq(mode_of("x/y"), 0700 & ~0u);
        ck_assert_int_eq(rmdir("x/y"), 0);
        ck_assert_int_eq(rmdir("x"), 0);
        ck_assert_int_eq(chdir(cwd), 0);
        ck_assert_int_eq(rmdir(top), 0);
        buf_free(&err);
}
END_TEST

/* A file in the way stops it with one sentence naming that path; the
 * empty path is refused. */
START_TEST(test_file_in_the_way)
{
        struct buf err = BUF_INIT;
        char *f = NULL, *under = NULL, *want = NULL;
        int fd;

        make_top();
        f = in_top("f");
        under = in_top("f/x/y");
        fd = open(f, O_WRONLY | O_CREAT, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(close(fd), 0);
        ck_assert_int_eq(dir_make(under, 0700, &err), -ENOTDIR);
        ck_assert_int_ge(asprintf(&want, "cannot create directory \"%s\": File exists (not a directory)", f), 0);
        ck_assert_str_eq(err.data, want);
        ck_assert_int_eq(dir_make(f, 0700, &err), -ENOTDIR);
        ck_assert_str_eq(err.data, want);
        ck_assert_int_eq(dir_make("", 0700, &err), -ENOENT);
        ck_assert_str_eq(err.data, "cannot create directory \"\": No such file or directory");
        ck_assert_int_eq(dir_make(under, 0700, NULL), -ENOTDIR);
        rm("f");
        ck_assert_int_eq(rmdir(top), 0);
        free(f);
        free(under);
        free(want);
        buf_free(&err);
}
END_TEST

/* mkdir(2) failing at each level in turn: the error names the one
 * directory that could not be made and its errno, and what was made
 * before it stays (as with mkdir -p); a later call completes the path. */
START_TEST(test_mkdir_fails)
{
        static const char *const made[] = {"a", "a/b", "a/b/c"};
        struct buf err = BUF_INIT;
        char *path, *want = NULL;

        if (!failalloc_enabled())
                return; /* no interposition under the sanitizers */
        make_top();
        path = in_top("a/b/c");
        for (size_t i = 0; i < 3; i++) {
                char *at = in_top(made[i]);

                failsys_arm(FAILSYS_MKDIR, (long)i + 1, EACCES);
                ck_assert_int_eq(dir_make(path, 0700, &err), -EACCES);
                ck_assert(failsys_failed(FAILSYS_MKDIR));
                failsys_arm(FAILSYS_MKDIR, 0, 0);
                ck_assert_int_ge(asprintf(&want, "cannot create directory \"%s\": Permission denied", at), 0);
                ck_assert_str_eq(err.data, want);
                ck_assert_int_eq(access(at, F_OK), -1);
                free(want);
                free(at);
                rm("a/b/c");
                rm("a/b");
                rm("a");
        }
        /* Failing at the last level leaves the parents; a retry ends it. */
        failsys_arm(FAILSYS_MKDIR, 3, EIO);
        ck_assert_int_eq(dir_make(path, 0700, &err), -EIO);
        failsys_arm(FAILSYS_MKDIR, 0, 0);
        ck_assert_uint_eq(mode_of(top) != 0, 1);
        ck_assert_int_eq(dir_make(path, 0700, &err), 0);
        ck_assert_uint_eq(mode_of(path) & 0777, 0700);
        rm("a/b/c");
        rm("a/b");
        rm("a");
        ck_assert_int_eq(rmdir(top), 0);
        free(path);
        buf_free(&err);
}
END_TEST

/* Nothing is allocated but the message: memory running out while it is
 * written gives -ENOMEM with err empty, and nothing leaks. */
START_TEST(test_out_of_memory)
{
        struct buf err = BUF_INIT;
        long before;
        int r;

        if (!failalloc_enabled())
                return;
        before = failalloc_live();
        ck_assert_int_eq(buf_puts(&err, "stale"), 0);
        failalloc_arm(1);
        r = dir_make("", 0700, &err);
        ck_assert(failalloc_failed());
        failalloc_arm(0);
        ck_assert_int_eq(r, -ENOMEM);
        ck_assert_uint_eq(err.len, 0);
        buf_free(&err);
        ck_assert_int_eq(failalloc_live(), before);
}
END_TEST

/* A path the kernel would refuse as too long is refused, naming it. */
START_TEST(test_too_long)
{
        struct buf err = BUF_INIT;
        char *p = malloc(PATH_MAX + 1);

        ck_assert_ptr_nonnull(p);
        memset(p, 'a', PATH_MAX);
        p[0] = '/';
        p[PATH_MAX] = '\0';
        ck_assert_int_eq(dir_make(p, 0700, &err), -ENAMETOOLONG);
        ck_assert_ptr_nonnull(strstr(err.data, "File name too long"));
        ck_assert_ptr_nonnull(strstr(err.data, "cannot create directory \"/aaa"));
        free(p);
        buf_free(&err);
}
END_TEST

UNIT_MAIN(test_makes_parents, test_relative, test_file_in_the_way, test_mkdir_fails, test_out_of_memory,
          test_too_long)
