/* path — lexical path cleaning and joining (see src/util/path.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/path.h"

/*
 * Lexical cleaning as Go's filepath.Clean: one '/' between elements, no
 * "." elements, ".." removes the element before it (or vanishes at the
 * root), no trailing '/', "" becomes ".".  No realpath: symlinks stay,
 * as the file source keeps the path it was given.  The caller frees.
 */
char *path_clean(const char *in)
{
        size_t n = strlen(in), w = 0, i = 0, dotdot = 0;
        bool rooted = n > 0 && in[0] == '/';
        char *out = malloc(n + 2);

        if (!out)
                return NULL;
        if (rooted) {
                out[w++] = '/';
                i = 1;
                dotdot = 1;
        }
        while (i < n) {
                if (in[i] == '/') {
                        i++;
                } else if (in[i] == '.' && (i + 1 == n || in[i + 1] == '/')) {
                        i++;
                } else if (in[i] == '.' && in[i + 1] == '.' && (i + 2 == n || in[i + 2] == '/')) {
                        i += 2;
                        if (w > dotdot) {
                                /* Back up over the last element. */
                                w--;
                                while (w > dotdot && out[w] != '/')
                                        w--;
                        } else if (!rooted) {
                                if (w > 0)
                                        out[w++] = '/';
                                out[w++] = '.';
                                out[w++] = '.';
                                dotdot = w;
                        }
                } else {
                        if ((rooted && w != 1) || (!rooted && w != 0))
                                out[w++] = '/';
                        while (i < n && in[i] != '/')
                                out[w++] = in[i++];
                }
        }
        if (w == 0)
                out[w++] = '.';
        out[w] = '\0';
        return out;
}

char *path_join(const char *dir, const char *name)
{
        struct buf b = BUF_INIT;

        if (buf_puts(&b, dir) < 0 ||
            (strcmp(dir, "/") != 0 && buf_putc(&b, '/') < 0) || buf_puts(&b, name) < 0) {
                buf_free(&b);
                return NULL;
        }
        return buf_steal(&b, NULL);
}

int path_absolute(const char *path, const char *base, char **ret)
{
        char *cwd = NULL, *joined = NULL, *clean;

        if (path[0] != '/') {
                if (!base) {
                        /* glibc allocates it to the name's length; the
                         * physical name, not $PWD, so that a daemon and a
                         * shell in one directory agree. */
                        cwd = getcwd(NULL, 0);
                        if (!cwd)
                                return errno == ENOMEM ? -ENOMEM : -errno;
                        base = cwd;
                }
                joined = path_join(base, path);
                free(cwd);
                if (!joined)
                        return -ENOMEM;
                path = joined;
        }
        clean = path_clean(path);
        free(joined);
        if (!clean)
                return -ENOMEM;
        *ret = clean;
        return 0;
}
