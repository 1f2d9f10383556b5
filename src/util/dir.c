/*
 * dir — directory listings (see src/util/dir.h).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/dir.h"
#include "util/grow.h"
#include "util/path.h"
#include "util/str.h"

void dir_list_free(char **names, size_t n)
{
        for (size_t i = 0; names && i < n; i++)
                free(names[i]);
        free(names);
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

int dir_list(const char *dir, unsigned flags, char ***ret_names, size_t *ret_n, const char **ret_what)
{
        char **names = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        DIR *d;
        int r = 0;

        d = opendir(dir);
        if (!d) {
                *ret_what = "cannot open directory";
                return -errno;
        }
        for (;;) {
                const char *name;

                errno = 0;
                de = readdir(d);
                if (!de) {
                        r = -errno; /* 0 at the end */
                        *ret_what = "cannot read directory";
                        break;
                }
                name = de->d_name;
                if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
                    ((flags & DIR_LIST_NO_HIDDEN) && name[0] == '.'))
                        continue;
                if (GROW(names, cap, n + 1, 32) < 0) {
                        r = -ENOMEM;
                        *ret_what = "cannot list directory";
                        break;
                }
                names[n] = (flags & DIR_LIST_PATHS) ? path_join(dir, name) : strdup(name);
                if (!names[n]) {
                        r = -ENOMEM;
                        *ret_what = "cannot list directory";
                        break;
                }
                n++;
        }
        closedir(d);
        if (r < 0) {
                dir_list_free(names, n);
                return r;
        }
        if (n > 1)
                qsort(names, n, sizeof(*names), cmp_str);
        *ret_names = names;
        *ret_n = n;
        return 0;
}

/* path a directory: found, or made with mode. */
static int make_one(const char *path, mode_t mode, struct buf *err)
{
        struct stat st;
        int r;

        if (stat(path, &st) == 0) {
                if (S_ISDIR(st.st_mode))
                        return 0;
                return buf_set_err(err, -ENOTDIR, "cannot create directory \"%s\": %s (not a directory)", path,
                                   ERRNO_STR(-EEXIST));
        }
        if (errno != ENOENT) {
                r = -errno;
                return buf_set_err(err, r, "directory \"%s\": %s", path, ERRNO_STR(r));
        }
        if (mkdir(path, mode) == 0)
                return 0;
        r = -errno;
        /* Another process (a second podmux, an admin) made it meanwhile. */
        if (r == -EEXIST && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
                return 0;
        return buf_set_err(err, r, "cannot create directory \"%s\": %s", path, ERRNO_STR(r));
}

int dir_make(const char *dir, mode_t mode, struct buf *err)
{
        /* On the stack: a path the kernel would refuse is refused here,
         * and the helper allocates nothing (it runs at start, where each
         * allocation is one more out-of-memory path to test). */
        char p[PATH_MAX];
        size_t n = strlen(dir);
        int r = 0;

        if (n == 0)
                return buf_set_err(err, -ENOENT, "cannot create directory \"\": %s", ERRNO_STR(-ENOENT));
        if (n >= sizeof(p))
                return buf_set_err(err, -ENAMETOOLONG, "cannot create directory \"%s\": %s", dir,
                                   ERRNO_STR(-ENAMETOOLONG));
        memcpy(p, dir, n + 1);
        while (n > 1 && p[n - 1] == '/')
                p[--n] = '\0';
        /* Each prefix ending before a '/' is a parent; the whole is dir.
         * Starting at p + 1 leaves the root itself out ("/" alone is the
         * whole, found like any directory). */
        for (char *s = p + 1;; s++) {
                bool last = *s == '\0';

                if (!last && (*s != '/' || s[-1] == '/'))
                        continue;
                *s = '\0';
                r = make_one(p, last ? mode : DIR_PARENT_MODE, err);
                if (r < 0 || last)
                        break;
                *s = '/';
        }
        return r;
}
