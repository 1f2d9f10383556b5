/*
 * static_pod — from a static-pod path to the pods the sources emit (see
 * src/sources/static_pod.h).  The rules are the file source's
 * (src/sources/file_source.c); this file holds them so that `podmux
 * validate` runs the same code.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/file.h"
#include "util/log.h"
#include "sources/manifest.h"
#include "util/path.h"
#include "sources/static_pod.h"
#include "util/yaml_json.h"

bool static_pod_resource_error(int r)
{
        return r == -ENOMEM || r == -EMFILE || r == -ENFILE || r == -ENOBUFS;
}

/* Whether errno e of stat(2) or open(2) says the path leads to no file,
 * rather than that the file there could not be looked at. */
static bool no_file(int e)
{
        return e == ENOENT || e == ENOTDIR || e == ELOOP || e == ENAMETOOLONG;
}

bool static_pod_unreadable(int r, const struct static_pod_read *rd)
{
        /* Before the bytes were read, file_read() refuses what is not a
         * regular file (-EINVAL) or too large (-EFBIG): verdicts on what
         * is there.  Any other error of its stat, open or read is the
         * system's. */
        return r < 0 && !rd->read && !static_pod_resource_error(r) && !no_file(-r) && r != -EINVAL && r != -EFBIG;
}

enum static_pod_name static_pod_name_kind(const char *base, const char *const *patterns, size_t n_patterns)
{
        if (base[0] == '.')
                return STATIC_POD_NAME_DOT;
        for (size_t i = 0; i < n_patterns; i++)
                if (fnmatch(patterns[i], base, 0) == 0)
                        return STATIC_POD_NAME_READ;
        return n_patterns ? STATIC_POD_NAME_FILTERED : STATIC_POD_NAME_READ;
}

int static_pod_entry(const char *path, struct buf *reason)
{
        struct stat st, lst;
        int e;

        buf_reset(reason);
        if (stat(path, &st) == 0) {
                if (S_ISDIR(st.st_mode))
                        return STATIC_POD_DIRECTORY;
                if (S_ISREG(st.st_mode))
                        return STATIC_POD_MANIFEST;
                return buf_puts(reason, "not a regular file: skipped") < 0 ? -ENOMEM : STATIC_POD_BAD;
        }
        e = errno;
        if (static_pod_resource_error(-e))
                return -e;
        /* The file could not be looked at (EIO, EACCES...): loading it
         * meets the same error, which says so (static_pod_unreadable()). */
        if (!no_file(e))
                return STATIC_POD_MANIFEST;
        /* Gone since the listing: nothing to say.  A link to nothing: an
         * error of the entry, said once by the caller. */
        if (e == ENOENT && !(lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)))
                return STATIC_POD_GONE;
        if (e == ENOENT)
                return buf_puts(reason, "dangling symbolic link: skipped") < 0 ? -ENOMEM : STATIC_POD_BAD;
        return buf_puts(reason, ERRNO_STR(-e)) < 0 ? -ENOMEM : STATIC_POD_BAD;
}

/* Whether text may hold a document after its first: a line that starts
 * with a document marker ("---" or "...") somewhere after the start.  A
 * marker inside a scalar would be a syntax error, so without one there is
 * exactly one document.  O(len), without parsing. */
static bool may_have_more_documents(const char *text, size_t len)
{
        return memmem(text, len, "\n---", 4) || memmem(text, len, "\n...", 4);
}

/* The documents of text, whose first was decoded: see static_pod_load().
 * A count or -ENOMEM. */
static int count_documents(const char *text, size_t len)
{
        int n;

        if (!may_have_more_documents(text, len))
                return 1;
        n = yaml_count_documents(text, len, NULL);
        if (n == -ENOMEM)
                return n;
        /* A later document too malformed to count: at least two. */
        return n < 0 ? 2 : n;
}

int static_pod_load(const char *path, const char *node_name, struct pod **ret_pod, struct v1_unknown *ret_unknown,
                    int *ret_docs, struct static_pod_read *ret_read, struct buf *err)
{
        struct manifest_ctx ctx = {
                .origin = MANIFEST_ORIGIN_FILE,
                .node_name = node_name,
                .location = path,
        };
        json_object *obj = NULL;
        struct static_pod_read rd = {.read = false};
        char *data = NULL;
        size_t len = 0;
        int r, docs = 1;

        r = file_read_stat(path, MANIFEST_MAX_BYTES, &data, &len, &rd.st, err);
        if (r == 0 && ret_read) {
                r = digest_sha256(data, len, rd.digest);
                rd.read = r == 0;
                if (r < 0 && err)
                        buf_reset(err); /* util/buf.h: -ENOMEM leaves it empty */
        }
        if (r == 0)
                r = manifest_decode_pod(data, len, &ctx, &obj, ret_unknown, err);
        if (r == 0 && ret_docs && (docs = count_documents(data, len)) < 0) {
                r = docs;
                if (err)
                        buf_reset(err); /* util/buf.h: -ENOMEM leaves it empty */
        }
        if (r == 0)
                r = pod_from_json(obj, ret_pod, err);
        if (r == 0 && ret_docs)
                *ret_docs = docs;
        if (ret_read)
                *ret_read = rd;
        if (r < 0 && ret_unknown)
                v1_unknown_clear(ret_unknown);
        json_object_put(obj);
        free(data);
        return r;
}

void static_pod_pods_free(struct pod **pods, size_t n)
{
        for (size_t i = 0; pods && i < n; i++)
                pod_unref(pods[i]);
        free(pods);
}

int static_pod_decode_body(const char *data, size_t len, const char *url, const char *node_name,
                           struct pod ***ret_pods, size_t *ret_n, struct v1_unknown *ret_unknown,
                           struct buf *err)
{
        struct manifest_ctx ctx = {
                .origin = MANIFEST_ORIGIN_URL,
                .node_name = node_name,
                .location = url,
        };
        json_object *arr = NULL;
        struct pod **pods = NULL;
        size_t n = 0, i;
        int r;

        r = manifest_decode_pods(data, len, &ctx, &arr, ret_unknown, err);
        if (r < 0)
                goto out;
        n = json_object_array_length(arr);
        pods = calloc(n ? n : 1, sizeof(*pods));
        if (!pods) {
                r = -ENOMEM;
                goto out;
        }
        for (i = 0; i < n; i++) {
                r = pod_from_json(json_object_array_get_idx(arr, i), &pods[i], err);
                if (r < 0)
                        goto out;
        }
        *ret_pods = pods;
        *ret_n = n;
        pods = NULL;
        r = 0;
out:
        if (r == -ENOMEM && err)
                buf_reset(err); /* a failure replaces what err held */
        if (r < 0 && ret_unknown)
                v1_unknown_clear(ret_unknown);
        static_pod_pods_free(pods, n);
        json_object_put(arr);
        return r;
}
