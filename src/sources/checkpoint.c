/*
 * checkpoint — the API source's pod set on disk (see
 * src/sources/checkpoint.h and doc/checkpoint.md).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#include "sources/checkpoint.h"
#include "util/clock.h"
#include "util/file.h"
#include "util/json_get.h"
#include "util/json_parse.h"
#include "util/str.h"

#define SHA256_LEN 32u
/* Bytes of the header the checksum covers (all but the checksum). */
#define HEADER_SUMMED 24u
/* The content's first line is small: a bound on what is parsed as it. */
#define META_MAX_DEPTH 4u

_Static_assert(HEADER_SUMMED + SHA256_LEN == CHECKPOINT_HEADER_SIZE, "header layout");
_Static_assert(sizeof(CHECKPOINT_MAGIC) - 1 == 8, "magic is 8 bytes");

void checkpoint_free(struct checkpoint *c)
{
        if (!c)
                return;
        for (size_t i = 0; i < c->n_pods; i++)
                pod_unref(c->pods[i]);
        free(c->pods);
        free(c->rv);
        memset(c, 0, sizeof(*c));
}

/* ---- bytes -------------------------------------------------------------- */

static void put_le(unsigned char *p, uint64_t v, unsigned n)
{
        for (unsigned i = 0; i < n; i++)
                p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, unsigned n)
{
        uint64_t v = 0;

        for (unsigned i = 0; i < n; i++)
                v |= (uint64_t)p[i] << (8 * i);
        return v;
}

/* SHA-256 of a then b.  0 or -ENOMEM (libcrypto allocates a context).
 * A failure leaves nothing in libcrypto's error queue of this thread: on
 * the loop, libcurl reads that queue after its TLS calls, and its entries
 * hold memory until cleared. */
static int sha256_two(const void *a, size_t alen, const void *b, size_t blen, unsigned char out[SHA256_LEN])
{
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        unsigned len = 0;
        int ok;

        if (!ctx) {
                ERR_clear_error();
                return -ENOMEM;
        }
        ok = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) && EVP_DigestUpdate(ctx, a, alen) &&
             EVP_DigestUpdate(ctx, b, blen) && EVP_DigestFinal_ex(ctx, out, &len) && len == SHA256_LEN;
        EVP_MD_CTX_free(ctx);
        if (!ok)
                ERR_clear_error();
        return ok ? 0 : -ENOMEM;
}

int checkpoint_fingerprint(const void *data, size_t len, char out[CHECKPOINT_FINGERPRINT_SIZE])
{
        static const char hex[] = "0123456789abcdef";
        unsigned char md[SHA256_LEN];
        int r = sha256_two(data, len, "", 0, md);

        if (r < 0)
                return r;
        for (unsigned i = 0; i < SHA256_LEN; i++) {
                out[2 * i] = hex[md[i] >> 4];
                out[2 * i + 1] = hex[md[i] & 15];
        }
        out[2 * SHA256_LEN] = '\0';
        return 0;
}

/* "1h2m3s" (Go's spelling, whole seconds) into out. */
static const char *fmt_duration(uint64_t usec, char *out, size_t size)
{
        uint64_t s = usec / 1000000u;

        (void)snprintf(out, size, "%" PRIu64 "h%" PRIu64 "m%" PRIu64 "s", s / 3600, s / 60 % 60, s % 60);
        return out;
}
#define DURATION_STR(u) fmt_duration((u), (char[48]){0}, 48)

/* ---- trust ---------------------------------------------------------------- */

int checkpoint_dir_check(int fd, const char *name, struct buf *err)
{
        struct stat st;

        if (fstat(fd, &st) < 0) {
                int r = -errno;

                return buf_set_err(err, r, "directory \"%s\": %s", name, ERRNO_STR(r));
        }
        if (!S_ISDIR(st.st_mode))
                return buf_set_err(err, -EPERM, "\"%s\" is %s, not a directory", name, file_kind(st.st_mode));
        if (st.st_uid != geteuid())
                return buf_set_err(err, -EPERM, "directory \"%s\" is owned by uid %u, not by podmux's user (uid %u)",
                                   name, (unsigned)st.st_uid, (unsigned)geteuid());
        if (st.st_mode & (S_IWGRP | S_IWOTH))
                return buf_set_err(err, -EPERM, "directory \"%s\" is writable by its group or others (mode %04o)", name,
                                   (unsigned)(st.st_mode & 07777));
        return 0;
}

/* The checkpoint file open as fd: a regular file of ours, mode 0600, not
 * too large.  0 with *ret_size, or a refusal. */
static int file_check(int fd, const char *path, size_t *ret_size, struct buf *err)
{
        struct stat st;

        if (fstat(fd, &st) < 0) {
                int r = -errno;

                return buf_set_err(err, r, "\"%s\": %s", path, ERRNO_STR(r));
        }
        if (!S_ISREG(st.st_mode))
                return buf_set_err(err, -EPERM, "\"%s\" is %s", path, file_kind(st.st_mode));
        if (st.st_uid != geteuid())
                return buf_set_err(err, -EPERM, "\"%s\" is owned by uid %u, not by podmux's user (uid %u)", path,
                                   (unsigned)st.st_uid, (unsigned)geteuid());
        if ((st.st_mode & 07777) != 0600)
                return buf_set_err(err, -EPERM, "\"%s\" has mode %04o, not 0600", path, (unsigned)(st.st_mode & 07777));
        if ((uint64_t)st.st_size > CHECKPOINT_MAX_BYTES)
                return buf_set_err(err, -EFBIG, "\"%s\" is larger than %u bytes", path, CHECKPOINT_MAX_BYTES);
        *ret_size = (size_t)st.st_size;
        return 0;
}

/* ---- encoding ----------------------------------------------------------- */

/* The first line of the content. */
static int encode_meta(const struct checkpoint_identity *id, const struct checkpoint_state *st, struct buf *out)
{
        char when[CLOCK_RFC3339_MAX];
        const char *rv = st->rv ? st->rv : "";

        clock_rfc3339(st->time_usec, CLOCK_MICRO, when);
        if (buf_puts(out, "{\"node\":") < 0 || buf_json_string(out, id->node, strlen(id->node)) < 0 ||
            buf_puts(out, ",\"server\":") < 0 || buf_json_string(out, id->server, strlen(id->server)) < 0 ||
            buf_puts(out, ",\"caSHA256\":") < 0 || buf_json_string(out, id->ca_sha256, strlen(id->ca_sha256)) < 0 ||
            buf_puts(out, ",\"resourceVersion\":") < 0 || buf_json_string(out, rv, strlen(rv)) < 0 ||
            buf_printf(out, ",\"time\":\"%s\",\"pods\":%zu}\n", when, st->n_pods) < 0)
                return -ENOMEM;
        return 0;
}

/*
 * One pod's line: its text with config.mirror spliced back into the
 * annotations (src/core/pod.h: the text always holds an annotations
 * object, local ones left out).  config.source and config.seen are the
 * merger's stamp, not what was received: left out.  Reads only members a
 * pod never changes after it is built.
 */
static int encode_pod(const struct pod *p, struct buf *out)
{
        if (buf_append(out, pod_text(p), p->splice) < 0)
                return -ENOMEM;
        if (p->mirror && ((p->has_annotations && buf_putc(out, ',') < 0) ||
                          buf_json_string(out, POD_ANNOTATION_MIRROR, strlen(POD_ANNOTATION_MIRROR)) < 0 ||
                          buf_putc(out, ':') < 0 || buf_json_string(out, p->mirror, strlen(p->mirror)) < 0))
                return -ENOMEM;
        if (buf_append(out, pod_text(p) + p->splice, p->text_len - p->splice) < 0 || buf_putc(out, '\n') < 0)
                return -ENOMEM;
        return 0;
}

int checkpoint_encode(const struct checkpoint_identity *id, const struct checkpoint_state *st, struct buf *out,
                      struct buf *err)
{
        size_t start = out->len, content;
        unsigned char *h;
        int r = -ENOMEM;

        if (buf_reserve(out, CHECKPOINT_HEADER_SIZE) < 0)
                goto fail;
        out->len += CHECKPOINT_HEADER_SIZE;
        if (encode_meta(id, st, out) < 0)
                goto fail;
        for (size_t i = 0; i < st->n_pods; i++) {
                if (encode_pod(st->pods[i], out) < 0)
                        goto fail;
                if (out->len - start > CHECKPOINT_MAX_BYTES)
                        break;
        }
        content = out->len - start - CHECKPOINT_HEADER_SIZE;
        if (content + CHECKPOINT_HEADER_SIZE > CHECKPOINT_MAX_BYTES) {
                r = buf_set_err(err, -EFBIG, "the %zu pods take more than %u bytes", st->n_pods, CHECKPOINT_MAX_BYTES);
                goto fail;
        }
        h = (unsigned char *)out->data + start;
        memcpy(h, CHECKPOINT_MAGIC, 8);
        put_le(h + 8, CHECKPOINT_VERSION, 4);
        put_le(h + 12, 0, 4);
        put_le(h + 16, content, 8);
        if (sha256_two(h, HEADER_SUMMED, h + CHECKPOINT_HEADER_SIZE, content, h + HEADER_SUMMED) < 0)
                goto fail;
        return 0;
fail:
        out->len = start;
        if (out->cap)
                out->data[start] = '\0';
        if (r == -ENOMEM && err)
                buf_reset(err);
        return r;
}

/* ---- writing -------------------------------------------------------------- */

static void step_at(checkpoint_step_fn step, void *data, enum checkpoint_step s)
{
        if (step)
                step(data, s);
}

/* All of p[0..n) to fd; half way, the PARTIAL step.  0 or -errno. */
static int write_all(int fd, const unsigned char *p, size_t n, checkpoint_step_fn step, void *data)
{
        size_t done = 0, half = n / 2;
        bool halfway = false;

        while (done < n) {
                size_t want = !halfway && half > done ? half - done : n - done;
                ssize_t w = write(fd, p + done, want);

                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return -errno;
                if (w == 0)
                        return -EIO;
                done += (size_t)w;
                if (!halfway && done >= half) {
                        halfway = true;
                        step_at(step, data, CHECKPOINT_STEP_PARTIAL);
                }
        }
        return 0;
}

/* fsync, retried on EINTR.  0 or -errno. */
static int sync_fd(int fd)
{
        while (fsync(fd) < 0) {
                if (errno != EINTR)
                        return -errno;
        }
        return 0;
}

/* The temporary file, written whole and synced.  0 with *ret_fd, or
 * -errno with the step in *ret_what. */
static int write_tmp(int dirfd, const void *bytes, size_t len, checkpoint_step_fn step, void *data, int *ret_fd,
                     const char **ret_what)
{
        int fd, r;

        /* A crash may have left one; O_EXCL then refuses to reuse it, so
         * no link planted there is ever written through. */
        if (unlinkat(dirfd, CHECKPOINT_TMP_FILE, 0) < 0 && errno != ENOENT) {
                *ret_what = "remove the stale temporary file";
                return -errno;
        }
        fd = openat(dirfd, CHECKPOINT_TMP_FILE, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
                *ret_what = "create";
                return -errno;
        }
        *ret_fd = fd;
        /* The umask may have taken bits: the mode is exact. */
        if (fchmod(fd, 0600) < 0) {
                *ret_what = "chmod";
                return -errno;
        }
        step_at(step, data, CHECKPOINT_STEP_OPENED);
        if ((r = write_all(fd, bytes, len, step, data)) < 0) {
                *ret_what = "write";
                return r;
        }
        step_at(step, data, CHECKPOINT_STEP_WRITTEN);
        if ((r = sync_fd(fd)) < 0) {
                *ret_what = "fsync";
                return r;
        }
        step_at(step, data, CHECKPOINT_STEP_SYNCED);
        return 0;
}

int checkpoint_write(int dirfd, const char *name, const void *bytes, size_t len, checkpoint_step_fn step,
                     void *step_data, struct buf *err)
{
        const char *what = "write";
        int fd = -1, r;

        if ((r = checkpoint_dir_check(dirfd, name, err)) < 0)
                return r;
        r = write_tmp(dirfd, bytes, len, step, step_data, &fd, &what);
        if (fd >= 0)
                close(fd);
        if (r == 0 && renameat(dirfd, CHECKPOINT_TMP_FILE, dirfd, CHECKPOINT_FILE) < 0) {
                r = -errno;
                what = "rename";
        }
        if (r < 0) {
                /* The previous checkpoint is untouched; the new one is
                 * dropped whole. */
                (void)unlinkat(dirfd, CHECKPOINT_TMP_FILE, 0);
                return buf_set_err(err, r, "\"%s/%s\": %s: %s", name, CHECKPOINT_TMP_FILE, what, ERRNO_STR(r));
        }
        step_at(step, step_data, CHECKPOINT_STEP_RENAMED);
        if ((r = sync_fd(dirfd)) < 0)
                return buf_set_err(err, r, "directory \"%s\": fsync after the rename: %s", name, ERRNO_STR(r));
        step_at(step, step_data, CHECKPOINT_STEP_DONE);
        return 0;
}

/* ---- loading -------------------------------------------------------------- */

/* The whole file (size bytes, as fstat saw it; a file that changed since
 * is caught by the length and checksum) into *ret_data.  0 or -errno. */
static int read_whole(int fd, const char *path, size_t size, char **ret_data, size_t *ret_len, struct buf *err)
{
        char *data = malloc(size + 1);
        size_t len = 0;

        if (!data) {
                if (err)
                        buf_reset(err);
                return -ENOMEM;
        }
        while (len < size) {
                ssize_t n = read(fd, data + len, size - len);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        int r = -errno;

                        free(data);
                        return buf_set_err(err, r, "\"%s\": read: %s", path, ERRNO_STR(r));
                }
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        data[len] = '\0';
        *ret_data = data;
        *ret_len = len;
        return 0;
}

/* The header of data[0..len): magic, version, length, checksum.  0 with
 * the content's offset being CHECKPOINT_HEADER_SIZE, or a refusal. */
static int check_header(const char *path, const char *data, size_t len, struct buf *err)
{
        const unsigned char *h = (const unsigned char *)data;
        unsigned char md[SHA256_LEN];
        uint64_t version, content;
        int r;

        if (len < CHECKPOINT_HEADER_SIZE)
                return buf_set_err(err, -EBADMSG, "\"%s\": truncated: %zu bytes, shorter than the %u-byte header", path,
                                   len, CHECKPOINT_HEADER_SIZE);
        if (memcmp(h, CHECKPOINT_MAGIC, 8) != 0)
                return buf_set_err(err, -EBADMSG, "\"%s\": not a podmux checkpoint (bad magic)", path);
        version = get_le(h + 8, 4);
        if (version != CHECKPOINT_VERSION)
                return buf_set_err(err, -EPROTONOSUPPORT,
                                   "\"%s\": format version %" PRIu64 ", and this podmux reads version %u", path,
                                   version, CHECKPOINT_VERSION);
        content = get_le(h + 16, 8);
        if (content != len - CHECKPOINT_HEADER_SIZE)
                return buf_set_err(err, -EBADMSG,
                                   "\"%s\": truncated or corrupt: the header says %" PRIu64
                                   " bytes of content, the file holds %zu",
                                   path, content, len - CHECKPOINT_HEADER_SIZE);
        if ((r = sha256_two(h, HEADER_SUMMED, h + CHECKPOINT_HEADER_SIZE, (size_t)content, md)) < 0) {
                if (err)
                        buf_reset(err);
                return r;
        }
        if (memcmp(md, h + HEADER_SUMMED, SHA256_LEN) != 0)
                return buf_set_err(err, -EBADMSG, "\"%s\": checksum mismatch: corrupt", path);
        return 0;
}

/* A string member of the first line, or NULL. */
static const char *meta_str(json_object *meta, const char *key)
{
        json_object *v = json_get_type(meta, key, json_type_string);

        return v ? json_object_get_string(v) : NULL;
}

/* Whether the first line says it is ours: node, server, CA. */
static int check_identity(const char *path, json_object *meta, const struct checkpoint_identity *id, struct buf *err)
{
        const char *node = meta_str(meta, "node"), *server = meta_str(meta, "server");
        const char *ca = meta_str(meta, "caSHA256");

        if (!node || !server || !ca)
                return buf_set_err(err, -EBADMSG, "\"%s\": corrupt: node, server or caSHA256 missing", path);
        if (strcmp(node, id->node) != 0)
                return buf_set_err(err, -EXDEV, "\"%s\": written for node \"%s\", and this is node \"%s\"", path, node,
                                   id->node);
        if (strcmp(server, id->server) != 0)
                return buf_set_err(err, -EXDEV, "\"%s\": written for API server %s, and the server now is %s", path,
                                   server, id->server);
        if (strcmp(ca, id->ca_sha256) != 0)
                return buf_set_err(err, -EXDEV,
                                   "\"%s\": written for another CA bundle of the API server (SHA-256 %s, now %s)", path,
                                   ca[0] ? ca : "none", id->ca_sha256[0] ? id->ca_sha256 : "none");
        return 0;
}

/* The time of the first line, in bounds: not older than max_age, not
 * after now.  0 with *ret_usec, or a refusal. */
static int check_time(const char *path, json_object *meta, uint64_t max_age, uint64_t now, uint64_t *ret_usec,
                      struct buf *err)
{
        const char *t = meta_str(meta, "time");
        int64_t sec;
        long nsec;
        uint64_t at;

        if (!t || clock_parse_rfc3339(t, &sec, &nsec) < 0 || sec < 0)
                return buf_set_err(err, -EBADMSG, "\"%s\": corrupt: no valid time", path);
        at = (uint64_t)sec * 1000000u + (uint64_t)nsec / 1000u;
        if (at > now)
                return buf_set_err(err, -ESTALE, "\"%s\": written at %s, after the current time: is the clock right?",
                                   path, t);
        if (max_age && now - at > max_age)
                return buf_set_err(err, -ESTALE, "\"%s\": written at %s, %s ago: older than the maximum age %s", path,
                                   t, DURATION_STR(now - at), DURATION_STR(max_age));
        *ret_usec = at;
        return 0;
}

/* The first line of the content: identity, time, resourceVersion and the
 * pod count into c (rv, time_usec) and *ret_n. */
static int parse_meta(const char *path, const char *line, size_t len, const struct checkpoint_identity *id,
                      uint64_t max_age, uint64_t now, struct checkpoint *c, size_t *ret_n, struct buf *err)
{
        json_object *meta = NULL, *n;
        const char *rv;
        int r = json_parse(line, len, META_MAX_DEPTH, &meta, NULL);

        if (r == -ENOMEM)
                goto out;
        if (r < 0 || !json_object_is_type(meta, json_type_object)) {
                r = buf_set_err(err, -EBADMSG, "\"%s\": corrupt: the first line is not a JSON object", path);
                goto out;
        }
        if ((r = check_identity(path, meta, id, err)) < 0 ||
            (r = check_time(path, meta, max_age, now, &c->time_usec, err)) < 0)
                goto out;
        rv = meta_str(meta, "resourceVersion");
        n = json_get_type(meta, "pods", json_type_int);
        if (!rv || !n || json_object_get_int64(n) < 0) {
                r = buf_set_err(err, -EBADMSG, "\"%s\": corrupt: resourceVersion or pods missing", path);
                goto out;
        }
        *ret_n = (size_t)json_object_get_int64(n);
        r = str_set(&c->rv, rv);
out:
        if (r == -ENOMEM && err)
                buf_reset(err);
        json_object_put(meta);
        return r;
}

/* The pod lines of p[0..len): exactly n, each a pod, into c. */
static int parse_pods(const char *path, const char *p, size_t len, size_t n, struct checkpoint *c, struct buf *err)
{
        struct buf why = BUF_INIT;
        int r = 0;

        /* Each pod takes at least 3 bytes ("{}\n"): a count above that is
         * a lie, refused before anything is allocated for it. */
        if (n > len / 3 + 1)
                return buf_set_err(err, -EBADMSG, "\"%s\": corrupt: %zu pods in %zu bytes", path, n, len);
        c->pods = calloc(n ? n : 1, sizeof(*c->pods));
        if (!c->pods)
                goto nomem;
        while (len > 0) {
                const char *nl = memchr(p, '\n', len);
                size_t l = nl ? (size_t)(nl - p) : len;

                if (!nl || c->n_pods == n) {
                        r = buf_set_err(err, -EBADMSG, "\"%s\": corrupt: pod lines do not match the count %zu", path,
                                        n);
                        goto out;
                }
                r = pod_from_text(p, l, &c->pods[c->n_pods], &why);
                if (r == -ENOMEM)
                        goto nomem;
                if (r < 0) {
                        r = buf_set_err(err, -EBADMSG, "\"%s\": corrupt: pod %zu: %s", path, c->n_pods + 1,
                                        why.len ? why.data : "not a pod");
                        goto out;
                }
                c->n_pods++;
                p += l + 1;
                len -= l + 1;
        }
        if (c->n_pods != n)
                r = buf_set_err(err, -EBADMSG, "\"%s\": corrupt: %zu pod lines, the count says %zu", path, c->n_pods,
                                n);
        goto out;
nomem:
        r = -ENOMEM;
        if (err)
                buf_reset(err);
out:
        buf_free(&why);
        return r;
}

/* The content (after a good header) into c. */
static int parse_content(const char *path, const char *p, size_t len, const struct checkpoint_identity *id,
                         uint64_t max_age, uint64_t now, struct checkpoint *c, struct buf *err)
{
        const char *nl = memchr(p, '\n', len);
        size_t n = 0;
        int r;

        if (!nl)
                return buf_set_err(err, -EBADMSG, "\"%s\": corrupt: no first line", path);
        if ((r = parse_meta(path, p, (size_t)(nl - p), id, max_age, now, c, &n, err)) < 0)
                return r;
        return parse_pods(path, nl + 1, len - (size_t)(nl - p) - 1, n, c, err);
}

/* The directory and the file, open and checked.  0 with *ret_fd. */
static int open_checked(const char *dir, const char *path, int *ret_fd, size_t *ret_size, struct buf *err)
{
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd = -1, r;

        if (dfd < 0) {
                r = -errno;
                return buf_set_err(err, r, "directory \"%s\": %s", dir, ERRNO_STR(r));
        }
        if ((r = checkpoint_dir_check(dfd, dir, err)) < 0)
                goto out;
        /* Never follows a link, and never waits on a FIFO. */
        fd = openat(dfd, CHECKPOINT_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) {
                r = -errno;
                if (r == -ELOOP)
                        r = buf_set_err(err, -EPERM, "\"%s\" is a symbolic link", path);
                else if (r == -ENOENT)
                        r = buf_set_err(err, r, "no checkpoint \"%s\"", path);
                else
                        r = buf_set_err(err, r, "\"%s\": %s", path, ERRNO_STR(r));
                goto out;
        }
        if ((r = file_check(fd, path, ret_size, err)) < 0)
                goto out;
        *ret_fd = fd;
        fd = -1;
out:
        if (fd >= 0)
                close(fd);
        close(dfd);
        return r;
}

int checkpoint_load(const char *dir, const struct checkpoint_identity *id, uint64_t max_age_usec, uint64_t now_usec,
                    struct checkpoint *ret, struct buf *err)
{
        struct checkpoint c = {0};
        struct buf path = BUF_INIT;
        char *data = NULL;
        size_t size = 0, len = 0;
        int fd = -1, r;

        if (buf_printf(&path, "%s/%s", dir, CHECKPOINT_FILE) < 0) {
                r = -ENOMEM;
                if (err)
                        buf_reset(err);
                goto out;
        }
        if ((r = open_checked(dir, path.data, &fd, &size, err)) < 0 ||
            (r = read_whole(fd, path.data, size, &data, &len, err)) < 0 ||
            (r = check_header(path.data, data, len, err)) < 0)
                goto out;
        r = parse_content(path.data, data + CHECKPOINT_HEADER_SIZE, len - CHECKPOINT_HEADER_SIZE, id, max_age_usec,
                          now_usec, &c, err);
        if (r < 0)
                goto out;
        c.bytes = len;
        *ret = c;
        memset(&c, 0, sizeof(c));
out:
        if (fd >= 0)
                close(fd);
        checkpoint_free(&c);
        free(data);
        buf_free(&path);
        return r;
}
