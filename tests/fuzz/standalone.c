/*
 * standalone — runs a fuzz target's LLVMFuzzerTestOneInput over files,
 * without libFuzzer, so every target builds with gcc and its corpus is a
 * regression test under `make check` (plain and sanitizer builds).
 *
 *     fuzz_NAME [FILE|DIR]...
 *
 * With no argument it runs $PODMUX_SRCDIR/tests/fuzz/corpus/NAME/ (NAME is
 * the program's name without "fuzz_", as `make check` runs it).  Prints TAP,
 * one line per input; a crash or a sanitizer report ends the run, which the
 * TAP driver reports as an error naming the last input started.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

struct list {
        char **v;
        size_t n, cap;
};

static int list_add(struct list *l, const char *dir, const char *name)
{
        size_t len = strlen(dir) + 1 + strlen(name) + 1;
        char *p = malloc(len);

        if (!p)
                return -ENOMEM;
        if (dir[0])
                snprintf(p, len, "%s/%s", dir, name);
        else
                snprintf(p, len, "%s", name);
        if (l->n == l->cap) {
                size_t cap = l->cap ? l->cap * 2 : 64;
                char **v = realloc(l->v, cap * sizeof(*v));

                if (!v) {
                        free(p);
                        return -ENOMEM;
                }
                l->v = v;
                l->cap = cap;
        }
        l->v[l->n++] = p;
        return 0;
}

static int cmp_name(const struct dirent **a, const struct dirent **b)
{
        return strcmp((*a)->d_name, (*b)->d_name);
}

static int skip_dot(const struct dirent *e)
{
        return e->d_name[0] != '.';
}

/* A directory contributes its files (not recursively), in name order. */
static int collect(struct list *l, const char *arg)
{
        struct dirent **ents = NULL;
        struct stat st;
        int n, r = 0;

        if (stat(arg, &st) < 0) {
                fprintf(stderr, "%s: %s\n", arg, strerror(errno));
                return -errno;
        }
        if (!S_ISDIR(st.st_mode))
                return list_add(l, "", arg);
        n = scandir(arg, &ents, skip_dot, cmp_name);
        if (n < 0) {
                fprintf(stderr, "%s: %s\n", arg, strerror(errno));
                return -errno;
        }
        for (int i = 0; i < n; i++) {
                if (r == 0)
                        r = list_add(l, arg, ents[i]->d_name);
                free(ents[i]);
        }
        free(ents);
        return r;
}

static int read_all(const char *path, uint8_t **ret, size_t *ret_len)
{
        FILE *f = fopen(path, "rb");
        uint8_t *data = NULL;
        size_t len = 0, cap = 0;
        int r = 0;

        if (!f)
                return -errno;
        for (;;) {
                size_t n;

                if (len == cap) {
                        size_t ncap = cap ? cap * 2 : 4096;
                        uint8_t *nd = realloc(data, ncap);

                        if (!nd) {
                                r = -ENOMEM;
                                break;
                        }
                        data = nd;
                        cap = ncap;
                }
                n = fread(data + len, 1, cap - len, f);
                len += n;
                if (n == 0) {
                        if (ferror(f))
                                r = -EIO;
                        break;
                }
        }
        fclose(f);
        if (r < 0) {
                free(data);
                return r;
        }
        /* Exactly len bytes, as libFuzzer hands them, so a read past the
         * end is caught by AddressSanitizer. */
        if (len > 0) {
                uint8_t *exact = malloc(len);

                if (!exact) {
                        free(data);
                        return -ENOMEM;
                }
                memcpy(exact, data, len);
                free(data);
                data = exact;
        } else {
                free(data);
                data = NULL;
        }
        *ret = data;
        *ret_len = len;
        return 0;
}

/* "corpus/x" for ".../corpus/x": short TAP lines that still say where. */
static const char *short_name(const char *path)
{
        const char *last = strrchr(path, '/');

        if (!last)
                return path;
        for (const char *p = last - 1; p >= path; p--)
                if (*p == '/')
                        return p + 1;
        return path;
}

int main(int argc, char **argv)
{
        struct list files = {0};
        char corpus[4096];
        int status = 0;

        if (argc > 1) {
                for (int i = 1; i < argc; i++)
                        if (collect(&files, argv[i]) < 0)
                                status = 1;
        } else {
                const char *top = getenv("PODMUX_SRCDIR");
                const char *base = strrchr(argv[0], '/');

                base = base ? base + 1 : argv[0];
                if (strncmp(base, "fuzz_", 5) == 0)
                        base += 5;
                if (!top || !top[0]) {
                        fprintf(stderr, "usage: %s FILE|DIR... (or set PODMUX_SRCDIR)\n", argv[0]);
                        return 2;
                }
                snprintf(corpus, sizeof(corpus), "%s/tests/fuzz/corpus/%s", top, base);
                if (collect(&files, corpus) < 0)
                        status = 1;
        }
        if (status == 0 && files.n == 0) {
                fprintf(stderr, "no inputs\n");
                status = 1;
        }
        printf("1..%zu\n", status ? (size_t)0 : files.n);
        fflush(stdout);
        for (size_t i = 0; status == 0 && i < files.n; i++) {
                uint8_t *data = NULL;
                size_t len = 0;
                int r = read_all(files.v[i], &data, &len);

                if (r < 0) {
                        printf("not ok %zu - %s: cannot read (%s)\n", i + 1, short_name(files.v[i]),
                               strerror(-r));
                        status = 1;
                        continue;
                }
                /* Named before the run, so a crash says which input. */
                fprintf(stderr, "# running %s\n", files.v[i]);
                LLVMFuzzerTestOneInput(data, len);
                free(data);
                printf("ok %zu - %s (%zu bytes)\n", i + 1, short_name(files.v[i]), len);
                fflush(stdout);
        }
        for (size_t i = 0; i < files.n; i++)
                free(files.v[i]);
        free(files.v);
        return status;
}
