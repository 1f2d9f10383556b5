/*
 * dir — directory listings (see src/util/dir.h).
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/dir.h"
#include "util/grow.h"
#include "util/path.h"

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
