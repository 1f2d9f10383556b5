/*
 * Unit tests: the API source's checkpoint (sources/checkpoint and
 * sources/checkpoint_writer, doc/checkpoint.md).
 *
 * What is checked: a state written and loaded comes back whole (pods,
 * resourceVersion, time); every refusal (missing, every flipped byte,
 * truncation at every length, another version, node, server or CA, too
 * old, from the future, another owner, a mode other than 0600, a
 * directory others may write, a link, a FIFO, too large) with its reason;
 * each system call of a write failing in turn (ENOSPC, EIO, EACCES) leaves
 * the previous checkpoint or the new one whole; a writer process killed
 * with SIGKILL at every point between two steps of a write leaves the
 * previous checkpoint or the new one whole, never a mix; the writer's
 * pacing (a burst is one write, at most one per interval, a refresh only
 * when the state's time moved), that the loop keeps running while a
 * write is stuck, and running out of memory anywhere.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>

#include "failalloc.h"
#include "sources/checkpoint.h"
#include "sources/checkpoint_writer.h"
#include "util/loop.h"
#include "core/pod.h"
#include "unit.h"

#define T0 1700000000000000ull /* a wall time, microseconds */
#define HOUR 3600000000ull
#define CA_FP "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" /* of "abc" */

static const struct checkpoint_identity ID = {
        .node = "node1",
        .server = "https://api.example:6443",
        .ca_sha256 = CA_FP,
};

static char dir[64];

static void make_dir(void)
{
        memcpy(dir, "/tmp/podmux-ckpt-XXXXXX", sizeof("/tmp/podmux-ckpt-XXXXXX"));
        ck_assert_ptr_nonnull(mkdtemp(dir));
}

static char *path_in(const char *name)
{
        char *p = NULL;

        ck_assert_int_ge(asprintf(&p, "%s/%s", dir, name), 0);
        return p;
}

static void remove_dir(void)
{
        char *cmd = NULL;

        ck_assert_int_ge(asprintf(&cmd, "rm -rf '%s'", dir), 0);
        ck_assert_int_eq(system(cmd), 0);
        free(cmd);
}

/* ---- states --------------------------------------------------------------- */

/* n pods of generation gen: names g<gen>-<i>, one with a mirror
 * annotation, one with no annotations at all, one with a newline and
 * quotes in a value. */
struct gen {
        struct pod **pods;
        size_t n;
        char rv[32];
        uint64_t time;
};

static struct pod *gen_pod(int gen, size_t i)
{
        char *text = NULL;
        struct pod *p = NULL;
        const char *ann = i % 3 == 0   ? "\"annotations\":{\"kubernetes.io/config.mirror\":\"abc\",\"x\":\"1\"},"
                          : i % 3 == 1 ? ""
                                       : "\"annotations\":{\"note\":\"a\\nb \\\"q\\\" \\u00e9\"},";

        ck_assert_int_ge(asprintf(&text,
                                  "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{%s\"name\":\"g%d-%zu\","
                                  "\"namespace\":\"ns\",\"uid\":\"uid-%d-%zu\",\"labels\":{\"gen\":\"%d\"}},"
                                  "\"spec\":{\"nodeName\":\"node1\",\"containers\":[{\"name\":\"c\",\"image\":"
                                  "\"img:%d\"}]},\"status\":{\"phase\":\"Running\"}}",
                                  ann, gen, i, gen, i, gen, gen),
                         0);
        ck_assert_int_eq(pod_from_text(text, strlen(text), &p, NULL), 0);
        free(text);
        return p;
}

static void gen_make(struct gen *g, int gen, size_t n, uint64_t time)
{
        g->pods = calloc(n ? n : 1, sizeof(*g->pods));
        ck_assert_ptr_nonnull(g->pods);
        for (size_t i = 0; i < n; i++)
                g->pods[i] = gen_pod(gen, i);
        g->n = n;
        (void)snprintf(g->rv, sizeof(g->rv), "%d00", gen);
        g->time = time;
}

static void gen_free(struct gen *g)
{
        for (size_t i = 0; i < g->n; i++)
                pod_unref(g->pods[i]);
        free(g->pods);
        memset(g, 0, sizeof(*g));
}

static struct checkpoint_state gen_state(const struct gen *g)
{
        return (struct checkpoint_state){.rv = g->rv, .time_usec = g->time, .pods = g->pods, .n_pods = g->n};
}

static void encode(const struct checkpoint_identity *id, const struct gen *g, struct buf *out)
{
        struct checkpoint_state st = gen_state(g);

        buf_reset(out);
        ck_assert_int_eq(checkpoint_encode(id, &st, out, NULL), 0);
}

static int open_dir(void)
{
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        ck_assert_int_ge(fd, 0);
        return fd;
}

/* Writes g as the checkpoint, with the library. */
static void write_gen(const struct gen *g)
{
        struct buf b = BUF_INIT, err = BUF_INIT;
        int fd = open_dir();
        int r;

        encode(&ID, g, &b);
        r = checkpoint_write(fd, dir, b.data, b.len, NULL, NULL, &err);
        ck_assert_msg(r == 0, "write: %d %s", r, err.data);
        close(fd);
        buf_free(&b);
        buf_free(&err);
}

/* Writes raw bytes as the checkpoint file, mode 0600. */
static void put_file(const void *p, size_t n)
{
        char *f = path_in(CHECKPOINT_FILE);
        int fd;

        unlink(f);
        fd = open(f, O_WRONLY | O_CREAT | O_EXCL, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, p, n), (ssize_t)n);
        close(fd);
        free(f);
}

static int load(uint64_t max_age, uint64_t now, struct checkpoint *c, struct buf *err)
{
        return checkpoint_load(dir, &ID, max_age, now, c, err);
}

/* c holds exactly g: every pod the same (text, layout, digests, mirror). */
static void assert_gen(const struct checkpoint *c, const struct gen *g)
{
        ck_assert_uint_eq(c->n_pods, g->n);
        ck_assert_str_eq(c->rv, g->rv);
        ck_assert_uint_eq(c->time_usec, g->time);
        for (size_t i = 0; i < g->n; i++) {
                ck_assert_msg(pod_same(c->pods[i], g->pods[i]), "pod %zu differs: %s vs %s", i, pod_text(c->pods[i]),
                              pod_text(g->pods[i]));
                ck_assert_int_eq(c->pods[i]->refs, 1);
        }
}

/* The checkpoint on disk is exactly g. */
static void assert_on_disk(const struct gen *g)
{
        struct checkpoint c = {0};
        struct buf err = BUF_INIT;
        int r = load(0, g->time + 1, &c, &err);

        ck_assert_msg(r == 0, "load: %d %s", r, err.data);
        assert_gen(&c, g);
        checkpoint_free(&c);
        buf_free(&err);
}

/* A refusal with code and a reason containing want. */
static void assert_refused(uint64_t max_age, uint64_t now, int code, const char *want)
{
        struct checkpoint c = {0};
        struct buf err = BUF_INIT;
        int r = load(max_age, now, &c, &err);

        ck_assert_msg(r == code, "load: %d (want %d): %s", r, code, err.data);
        ck_assert_msg(strstr(err.data, want), "reason \"%s\" lacks \"%s\"", err.data, want);
        ck_assert_ptr_null(c.pods);
        buf_free(&err);
}

/* SHA-256 of a then b, for files crafted with a good checksum. */
static void sha256_two(const void *a, size_t alen, const void *b, size_t blen, unsigned char out[32])
{
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        unsigned len = 0;

        ck_assert_ptr_nonnull(ctx);
        ck_assert(EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) && EVP_DigestUpdate(ctx, a, alen) &&
                  EVP_DigestUpdate(ctx, b, blen) && EVP_DigestFinal_ex(ctx, out, &len));
        EVP_MD_CTX_free(ctx);
}

/* A file of the given version and content whose header is consistent
 * and whose checksum holds. */
static void put_crafted(unsigned version, const char *content)
{
        size_t n = strlen(content);
        unsigned char *f = calloc(1, CHECKPOINT_HEADER_SIZE + n);

        ck_assert_ptr_nonnull(f);
        memcpy(f, CHECKPOINT_MAGIC, 8);
        for (int i = 0; i < 4; i++)
                f[8 + i] = (unsigned char)(version >> (8 * i));
        for (int i = 0; i < 8; i++)
                f[16 + i] = (unsigned char)((uint64_t)n >> (8 * i));
        memcpy(f + CHECKPOINT_HEADER_SIZE, content, n);
        sha256_two(f, 24, f + CHECKPOINT_HEADER_SIZE, n, f + 24);
        put_file(f, CHECKPOINT_HEADER_SIZE + n);
        free(f);
}

/* ---- the format ---------------------------------------------------------- */

START_TEST(test_round_trip)
{
        struct gen g, empty;
        struct buf b = BUF_INIT;
        struct stat st;
        char *f;

        make_dir();
        gen_make(&g, 1, 6, T0);
        write_gen(&g);
        assert_on_disk(&g);
        /* The file: 0600, ours, the header as documented. */
        f = path_in(CHECKPOINT_FILE);
        ck_assert_int_eq(stat(f, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0600);
        encode(&ID, &g, &b);
        ck_assert_uint_eq((size_t)st.st_size, b.len);
        ck_assert_int_eq(memcmp(b.data, "PODMUXCP\1\0\0\0\0\0\0\0", 16), 0);
        ck_assert_uint_eq((unsigned char)b.data[16] | (size_t)(unsigned char)b.data[17] << 8 |
                                  (size_t)(unsigned char)b.data[18] << 16,
                          b.len - CHECKPOINT_HEADER_SIZE);
        /* The content: a line of identity, then a line per pod; the
         * mirror annotation kept, the merger's stamp left out. */
        ck_assert_ptr_nonnull(strstr(b.data + CHECKPOINT_HEADER_SIZE,
                                     "{\"node\":\"node1\",\"server\":\"https://api.example:6443\",\"caSHA256\":\"" CA_FP
                                     "\",\"resourceVersion\":\"100\",\"time\":\"2023-11-14T22:13:20.000000Z\","
                                     "\"pods\":6}\n"));
        ck_assert_ptr_nonnull(strstr(b.data + CHECKPOINT_HEADER_SIZE, "\"kubernetes.io/config.mirror\":\"abc\""));
        ck_assert_int_eq(pod_stamp(g.pods[0], "api", T0), 0);
        encode(&ID, &g, &b);
        ck_assert_ptr_nonnull(strstr(b.data + CHECKPOINT_HEADER_SIZE, "\"name\":\"g1-0\""));
        ck_assert_ptr_null(strstr(b.data + CHECKPOINT_HEADER_SIZE, "config.source"));
        ck_assert_ptr_null(strstr(b.data + CHECKPOINT_HEADER_SIZE, "config.seen"));
        /* No pods: still a checkpoint (the node has none). */
        gen_make(&empty, 2, 0, T0 + 5);
        write_gen(&empty);
        assert_on_disk(&empty);
        /* No temporary file is left behind. */
        free(f);
        f = path_in(CHECKPOINT_TMP_FILE);
        ck_assert_int_eq(access(f, F_OK), -1);
        free(f);
        gen_free(&g);
        gen_free(&empty);
        buf_free(&b);
        remove_dir();
}
END_TEST

START_TEST(test_fingerprint)
{
        char fp[CHECKPOINT_FINGERPRINT_SIZE];

        ck_assert_int_eq(checkpoint_fingerprint("abc", 3, fp), 0);
        ck_assert_str_eq(fp, CA_FP);
        ck_assert_int_eq(checkpoint_fingerprint("", 0, fp), 0);
        ck_assert_str_eq(fp, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}
END_TEST

START_TEST(test_refuse_missing)
{
        char *f;

        make_dir();
        assert_refused(0, T0, -ENOENT, "no checkpoint");
        f = path_in("gone");
        {
                struct checkpoint c = {0};
                struct buf err = BUF_INIT;

                ck_assert_int_eq(checkpoint_load(f, &ID, 0, T0, &c, &err), -ENOENT);
                ck_assert_ptr_nonnull(strstr(err.data, "gone"));
                buf_free(&err);
        }
        free(f);
        remove_dir();
}
END_TEST

/* Every byte of a small checkpoint flipped in turn: each is refused (the
 * version bytes as another version, all others as corrupt). */
START_TEST(test_refuse_every_corrupt_byte)
{
        struct gen g;
        struct buf b = BUF_INIT;

        make_dir();
        gen_make(&g, 1, 2, T0);
        encode(&ID, &g, &b);
        for (size_t i = 0; i < b.len; i++) {
                struct checkpoint c = {0};
                struct buf err = BUF_INIT;
                int r;

                b.data[i] ^= 0x20;
                put_file(b.data, b.len);
                b.data[i] ^= 0x20;
                r = load(0, T0 + 1, &c, &err);
                if (i >= 8 && i < 12)
                        ck_assert_msg(r == -EPROTONOSUPPORT, "byte %zu: %d %s", i, r, err.data);
                else
                        ck_assert_msg(r == -EBADMSG, "byte %zu: %d %s", i, r, err.data);
                ck_assert_ptr_null(c.pods);
                buf_free(&err);
        }
        /* The file as written loads. */
        put_file(b.data, b.len);
        assert_on_disk(&g);
        gen_free(&g);
        buf_free(&b);
        remove_dir();
}
END_TEST

/* Truncated at every length, and one byte longer: refused as such. */
START_TEST(test_refuse_every_truncation)
{
        struct gen g;
        struct buf b = BUF_INIT;

        make_dir();
        gen_make(&g, 1, 2, T0);
        encode(&ID, &g, &b);
        for (size_t n = 0; n < b.len; n++) {
                put_file(b.data, n);
                assert_refused(0, T0 + 1, -EBADMSG,
                               n < CHECKPOINT_HEADER_SIZE ? "truncated: " : "truncated or corrupt");
        }
        ck_assert_int_eq(buf_putc(&b, '\n'), 0);
        put_file(b.data, b.len);
        assert_refused(0, T0 + 1, -EBADMSG, "the header says");
        gen_free(&g);
        buf_free(&b);
        remove_dir();
}
END_TEST

START_TEST(test_refuse_other_version)
{
        struct gen g;
        struct buf b = BUF_INIT;

        make_dir();
        gen_make(&g, 1, 1, T0);
        encode(&ID, &g, &b);
        put_crafted(2, b.data + CHECKPOINT_HEADER_SIZE);
        assert_refused(0, T0 + 1, -EPROTONOSUPPORT, "format version 2, and this podmux reads version 1");
        put_crafted(1, b.data + CHECKPOINT_HEADER_SIZE);
        assert_on_disk(&g);
        b.data[0] = 'X';
        put_file(b.data, b.len);
        assert_refused(0, T0 + 1, -EBADMSG, "bad magic");
        gen_free(&g);
        buf_free(&b);
        remove_dir();
}
END_TEST

START_TEST(test_refuse_not_ours)
{
        struct checkpoint_identity other = ID;
        struct gen g;
        struct buf b = BUF_INIT;

        make_dir();
        gen_make(&g, 1, 1, T0);
        other.node = "node2";
        encode(&other, &g, &b);
        put_file(b.data, b.len);
        assert_refused(0, T0 + 1, -EXDEV, "written for node \"node2\", and this is node \"node1\"");
        other = ID;
        other.server = "https://other:6443";
        encode(&other, &g, &b);
        put_file(b.data, b.len);
        assert_refused(0, T0 + 1, -EXDEV,
                       "written for API server https://other:6443, and the server now is "
                       "https://api.example:6443");
        other = ID;
        other.ca_sha256 = "";
        encode(&other, &g, &b);
        put_file(b.data, b.len);
        assert_refused(0, T0 + 1, -EXDEV, "another CA bundle of the API server (SHA-256 none, now " CA_FP);
        gen_free(&g);
        buf_free(&b);
        remove_dir();
}
END_TEST

START_TEST(test_refuse_by_age)
{
        struct gen g;

        make_dir();
        gen_make(&g, 1, 1, T0);
        write_gen(&g);
        /* At the limit it loads; a microsecond later it does not. */
        {
                struct checkpoint c = {0};

                ck_assert_int_eq(load(HOUR, T0 + HOUR, &c, NULL), 0);
                checkpoint_free(&c);
        }
        assert_refused(HOUR, T0 + HOUR + 1, -ESTALE,
                       "written at 2023-11-14T22:13:20.000000Z, 1h0m0s ago: older than the maximum age 1h0m0s");
        assert_refused(0, T0 - 1, -ESTALE, "after the current time: is the clock right?");
        gen_free(&g);
        remove_dir();
}
END_TEST

START_TEST(test_refuse_untrusted)
{
        struct gen g;
        char *f, *tmp;

        make_dir();
        f = path_in(CHECKPOINT_FILE);
        tmp = path_in("elsewhere");
        gen_make(&g, 1, 1, T0);
        write_gen(&g);
        ck_assert_int_eq(chmod(f, 0644), 0);
        assert_refused(0, T0 + 1, -EPERM, "has mode 0644, not 0600");
        ck_assert_int_eq(chmod(f, 0400), 0);
        assert_refused(0, T0 + 1, -EPERM, "has mode 0400, not 0600");
        ck_assert_int_eq(chmod(f, 0600), 0);
        ck_assert_int_eq(chmod(dir, 0770), 0);
        assert_refused(0, T0 + 1, -EPERM, "is writable by its group or others (mode 0770)");
        ck_assert_int_eq(chmod(dir, 0702), 0);
        assert_refused(0, T0 + 1, -EPERM, "(mode 0702)");
        ck_assert_int_eq(chmod(dir, 0755), 0);
        assert_on_disk(&g);
        if (geteuid() == 0) {
                /* Another owner: only root can make one. */
                ck_assert_int_eq(chown(f, 4242, (gid_t)-1), 0);
                assert_refused(0, T0 + 1, -EPERM, "is owned by uid 4242, not by podmux's user (uid 0)");
                ck_assert_int_eq(chown(f, 0, (gid_t)-1), 0);
                ck_assert_int_eq(chown(dir, 4242, (gid_t)-1), 0);
                assert_refused(0, T0 + 1, -EPERM, "is owned by uid 4242");
                ck_assert_int_eq(chown(dir, 0, (gid_t)-1), 0);
        }
        /* A link to a good checkpoint is refused: never followed. */
        ck_assert_int_eq(rename(f, tmp), 0);
        ck_assert_int_eq(symlink(tmp, f), 0);
        assert_refused(0, T0 + 1, -EPERM, "is a symbolic link");
        ck_assert_int_eq(unlink(f), 0);
        ck_assert_int_eq(mkfifo(f, 0600), 0);
        assert_refused(0, T0 + 1, -EPERM, "is a FIFO");
        ck_assert_int_eq(unlink(f), 0);
        /* Larger than the limit (a sparse file: no disk used). */
        {
                int fd = open(f, O_WRONLY | O_CREAT, 0600);

                ck_assert_int_ge(fd, 0);
                ck_assert_int_eq(ftruncate(fd, (off_t)CHECKPOINT_MAX_BYTES + 1), 0);
                close(fd);
        }
        assert_refused(0, T0 + 1, -EFBIG, "is larger than");
        free(f);
        free(tmp);
        gen_free(&g);
        remove_dir();
}
END_TEST

/* Content whose checksum holds but that is not a checkpoint's (a bug, or
 * a file made by hand): refused as corrupt, each for its reason. */
START_TEST(test_refuse_bad_content)
{
        static const char meta[] = "{\"node\":\"node1\",\"server\":\"https://api.example:6443\",\"caSHA256\":\"" CA_FP
                                   "\",\"resourceVersion\":\"1\",\"time\":\"2023-11-14T22:13:20Z\",\"pods\":";
        static const struct {
                const char *content, *reason;
        } cases[] = {
                {"", "no first line"},
                {"[]\n", "the first line is not a JSON object"},
                {"{\"node\":\"node1\"}\n", "node, server or caSHA256 missing"},
                {"{\"node\":\"node1\",\"server\":\"https://api.example:6443\",\"caSHA256\":\"" CA_FP "\"}\n",
                 "no valid time"},
                {"{\"node\":\"node1\",\"server\":\"https://api.example:6443\",\"caSHA256\":\"" CA_FP
                 "\",\"time\":\"2023-11-14T22:13:20Z\"}\n",
                 "resourceVersion or pods missing"},
                {"1}\n", "0 pod lines, the count says 1"},
                {"1}\n{}\n{}\n", "pod lines do not match the count 1"},
                {"2}\n{}\n", "1 pod lines, the count says 2"},
                {"1}\n{}", "pod lines do not match"},
                {"1}\n[1]\n", "pod 1: a pod must be a JSON object"},
                {"1}\n{\"metadata\":\n", "pod 1:"},
                {"999999}\n{}\n", "999999 pods in 3 bytes"},
        };
        char *content = NULL;

        make_dir();
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                bool whole = cases[i].content[0] >= '0' && cases[i].content[0] <= '9';

                ck_assert_int_ge(asprintf(&content, "%s%s", whole ? meta : "", cases[i].content), 0);
                put_crafted(1, content);
                assert_refused(0, T0 + 1, -EBADMSG, cases[i].reason);
                free(content);
        }
        /* The same shape, well formed, loads. */
        ck_assert_int_ge(asprintf(&content, "%s1}\n{\"metadata\":{\"name\":\"a\"}}\n", meta), 0);
        put_crafted(1, content);
        {
                struct checkpoint c = {0};

                ck_assert_int_eq(load(0, T0 + 1, &c, NULL), 0);
                ck_assert_uint_eq(c.n_pods, 1);
                ck_assert_str_eq(pod_name(c.pods[0]), "a");
                checkpoint_free(&c);
        }
        free(content);
        remove_dir();
}
END_TEST

/* ---- write faults ----------------------------------------------------------- */

/* Each system call of a write fails in turn with each errno: the write
 * says which step failed, leaves no temporary file, and the checkpoint on
 * disk is the previous one whole, or, when only the directory's fsync
 * failed, the new one whole. */
START_TEST(test_write_faults)
{
        static const struct {
                enum failsys_call call;
                long nth;
                const char *step;
                bool renamed;
        } calls[] = {
                {FAILSYS_UNLINKAT, 1, "remove the stale temporary file", false},
                {FAILSYS_OPENAT, 1, "create", false},
                {FAILSYS_FCHMOD, 1, "chmod", false},
                {FAILSYS_WRITE, 1, "write", false},
                {FAILSYS_FSYNC, 1, "fsync", false},
                {FAILSYS_RENAMEAT, 1, "rename", false},
                {FAILSYS_FSYNC, 2, "fsync after the rename", true},
        };
        static const int errs[] = {ENOSPC, EIO, EACCES};
        struct gen a, b;
        struct buf bytes = BUF_INIT;
        char *tmp;

        if (!failalloc_enabled())
                return;
        make_dir();
        tmp = path_in(CHECKPOINT_TMP_FILE);
        gen_make(&a, 1, 3, T0);
        gen_make(&b, 2, 4, T0 + 10);
        encode(&ID, &b, &bytes);
        for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
                for (size_t e = 0; e < sizeof(errs) / sizeof(errs[0]); e++) {
                        struct buf err = BUF_INIT;
                        int fd, r;

                        write_gen(&a);
                        fd = open_dir();
                        failsys_arm(calls[i].call, calls[i].nth, errs[e]);
                        r = checkpoint_write(fd, dir, bytes.data, bytes.len, NULL, NULL, &err);
                        ck_assert(failsys_failed(calls[i].call));
                        failsys_arm(calls[i].call, 0, 0);
                        close(fd);
                        ck_assert_msg(r == -errs[e], "%s: %d %s", calls[i].step, r, err.data);
                        ck_assert_msg(strstr(err.data, calls[i].step), "%s: %s", calls[i].step, err.data);
                        ck_assert_msg(access(tmp, F_OK) < 0, "%s: temporary file left", calls[i].step);
                        if (calls[i].renamed) {
                                b.time = T0 + 10;
                                assert_on_disk(&b);
                        } else {
                                assert_on_disk(&a);
                        }
                        buf_free(&err);
                }
        }
        /* Short writes are written on. */
        {
                int fd = open_dir();

                failsys_arm(FAILSYS_WRITE, 1, 0);
                ck_assert_int_eq(checkpoint_write(fd, dir, bytes.data, bytes.len, NULL, NULL, NULL), 0);
                ck_assert(failsys_failed(FAILSYS_WRITE));
                failsys_arm(FAILSYS_WRITE, 0, 0);
                close(fd);
                assert_on_disk(&b);
        }
        free(tmp);
        gen_free(&a);
        gen_free(&b);
        buf_free(&bytes);
        remove_dir();
}
END_TEST

/* The system calls of a load failing: each said, with the call and the
 * file. */
START_TEST(test_load_faults)
{
        static const struct {
                enum failsys_call call;
                int err;
                const char *want;
        } calls[] = {
                {FAILSYS_OPEN, EACCES, "directory \""},
                {FAILSYS_OPENAT, EACCES, "api.checkpoint\": Permission denied"},
                {FAILSYS_READ, EIO, "api.checkpoint\": read: Input/output error"},
        };
        struct gen g;

        if (!failalloc_enabled())
                return;
        make_dir();
        gen_make(&g, 1, 1, T0);
        write_gen(&g);
        for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
                struct checkpoint c = {0};
                struct buf err = BUF_INIT;
                int r;

                failsys_arm(calls[i].call, 1, calls[i].err);
                r = load(0, T0 + 1, &c, &err);
                ck_assert(failsys_failed(calls[i].call));
                failsys_arm(calls[i].call, 0, 0);
                ck_assert_msg(r == -calls[i].err, "%zu: %d %s", i, r, err.data);
                ck_assert_msg(strstr(err.data, calls[i].want), "%zu: %s", i, err.data);
                ck_assert_ptr_null(c.pods);
                buf_free(&err);
        }
        assert_on_disk(&g);
        gen_free(&g);
        remove_dir();
}
END_TEST

/* A stale temporary file (a crash) is replaced, even a link planted in
 * its place: O_EXCL never writes through one. */
START_TEST(test_write_over_stale_tmp)
{
        struct gen g;
        char *tmp, *victim;
        struct stat st;

        make_dir();
        tmp = path_in(CHECKPOINT_TMP_FILE);
        victim = path_in("victim");
        put_file("x", 1);
        {
                char *f = path_in(CHECKPOINT_FILE);

                ck_assert_int_eq(rename(f, victim), 0);
                free(f);
        }
        ck_assert_int_eq(symlink(victim, tmp), 0);
        gen_make(&g, 1, 2, T0);
        write_gen(&g);
        assert_on_disk(&g);
        ck_assert_int_eq(stat(victim, &st), 0);
        ck_assert_int_eq(st.st_size, 1);
        /* A directory we may not trust is not written to. */
        ck_assert_int_eq(chmod(dir, 0777), 0);
        {
                struct buf b = BUF_INIT, err = BUF_INIT;
                int fd = open_dir();

                encode(&ID, &g, &b);
                ck_assert_int_eq(checkpoint_write(fd, dir, b.data, b.len, NULL, NULL, &err), -EPERM);
                ck_assert_ptr_nonnull(strstr(err.data, "writable by its group or others"));
                close(fd);
                buf_free(&b);
                buf_free(&err);
        }
        ck_assert_int_eq(chmod(dir, 0700), 0);
        free(tmp);
        free(victim);
        gen_free(&g);
        remove_dir();
}
END_TEST

/* ---- a writer killed between every two steps ------------------------------ */

struct crash {
        enum checkpoint_step at;
        int fd; /* told when the writer is there */
};

/* On the writer thread: at the step, tell the parent and wait for the
 * SIGKILL. */
static void crash_step(void *data, enum checkpoint_step step)
{
        struct crash *c = data;

        if (step != c->at)
                return;
        if (write(c->fd, "x", 1) != 1)
                _exit(3);
        for (;;)
                pause();
}

static int snap_gen(void *data, struct checkpoint_snapshot *ret);

/* The child: a writer (with its thread) writing g, stopped at step. */
static void crash_child(const struct gen *g, enum checkpoint_step at, int fd)
{
        struct crash c = {.at = at, .fd = fd};
        struct checkpoint_writer_config cfg = {
                .dir = dir,
                .id = ID,
                .interval_usec = HOUR,
                .snapshot = snap_gen,
                .snapshot_data = (void *)g,
                .step = crash_step,
                .step_data = &c,
        };
        struct checkpoint_writer *w = NULL;
        struct loop *l = NULL;

        if (loop_new(&l) < 0 || checkpoint_writer_new(l, &cfg, &w, NULL) < 0)
                _exit(2);
        checkpoint_writer_changed(w);
        for (;;)
                (void)loop_run_once(l, -1);
}

/* Runs a writer of g in a child, killed with SIGKILL at step at. */
static void write_killed_at(const struct gen *g, enum checkpoint_step at)
{
        int p[2], status;
        char x;
        pid_t pid;

        ck_assert_int_eq(pipe(p), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                close(p[0]);
                crash_child(g, at, p[1]);
        }
        close(p[1]);
        ck_assert_msg(read(p[0], &x, 1) == 1, "the writer never reached step %d", (int)at);
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        close(p[0]);
}

START_TEST(test_killed_at_every_step)
{
        struct gen a, b;

        make_dir();
        gen_make(&a, 1, 3, T0);
        gen_make(&b, 2, 5, T0 + 10);
        for (int at = 0; at < _CHECKPOINT_STEP_MAX; at++) {
                bool renamed = at >= CHECKPOINT_STEP_RENAMED;

                /* No checkpoint before: none after, or the new one. */
                remove_dir();
                ck_assert_int_eq(mkdir(dir, 0700), 0);
                write_killed_at(&b, (enum checkpoint_step)at);
                if (renamed)
                        assert_on_disk(&b);
                else
                        assert_refused(0, T0 + 11, -ENOENT, "no checkpoint");
                /* A previous one: it, or the new one, whole. */
                write_gen(&a);
                write_killed_at(&b, (enum checkpoint_step)at);
                assert_on_disk(renamed ? &b : &a);
                /* Whatever the crash left, the next write works. */
                write_gen(&a);
                assert_on_disk(&a);
        }
        gen_free(&a);
        gen_free(&b);
        remove_dir();
}
END_TEST

/* ---- the writer ------------------------------------------------------------ */

/* The state the writer takes, and what it saw. */
struct src {
        struct gen g;
        int snapshots;
        int fail_snapshots; /* the next ones fail with -ENOMEM */
        bool nothing;       /* snapshot says "nothing to write" */
        uint64_t snap_at[16];
        int done, errors;
        int last_error;
        size_t last_bytes;
        pthread_t loop_thread;
        bool done_on_loop;
};

static int snap_gen(void *data, struct checkpoint_snapshot *ret)
{
        const struct gen *g = data;

        ret->rv = strdup(g->rv);
        ret->pods = calloc(g->n ? g->n : 1, sizeof(*ret->pods));
        if (!ret->rv || !ret->pods) {
                free(ret->rv);
                free(ret->pods);
                memset(ret, 0, sizeof(*ret));
                return -ENOMEM;
        }
        for (size_t i = 0; i < g->n; i++)
                ret->pods[i] = pod_ref(g->pods[i]);
        ret->n_pods = g->n;
        ret->time_usec = g->time;
        return 0;
}

static int snap_src(void *data, struct checkpoint_snapshot *ret)
{
        struct src *s = data;

        if (s->nothing)
                return 1;
        if (s->fail_snapshots > 0) {
                s->fail_snapshots--;
                return -ENOMEM;
        }
        if (s->snapshots < 16)
                s->snap_at[s->snapshots] = mono_usec();
        s->snapshots++;
        return snap_gen(&s->g, ret);
}

static void done_src(void *data, const struct checkpoint_result *res)
{
        struct src *s = data;

        s->done++;
        s->done_on_loop = pthread_equal(pthread_self(), s->loop_thread);
        s->last_error = res->error;
        s->last_bytes = res->bytes;
        if (res->error)
                s->errors++;
}

static struct checkpoint_writer_config src_config(struct src *s, uint64_t interval, struct checkpoint_stats *stats)
{
        s->loop_thread = pthread_self();
        return (struct checkpoint_writer_config){
                .dir = dir,
                .id = ID,
                .interval_usec = interval,
                .snapshot = snap_src,
                .snapshot_data = s,
                .done = done_src,
                .done_data = s,
                .stats = stats,
        };
}

/* Runs the loop until *count reaches want (a generous failure bound). */
static void run_until(struct loop *l, const int *count, int want)
{
        uint64_t deadline = mono_usec() + 60000000u;

        while (*count < want) {
                ck_assert_msg(mono_usec() < deadline, "waited for %d, have %d", want, *count);
                ck_assert_int_ge(loop_run_once(l, 100000), 0);
        }
}

/* A burst of changes is one write; changes after it wait for the
 * interval; a flush writes what changed since; nothing new, nothing. */
START_TEST(test_writer_coalesces)
{
        struct src s = {0};
        struct checkpoint_stats stats = {0};
        struct checkpoint_writer_config cfg = src_config(&s, HOUR, &stats);
        struct checkpoint_writer *w = NULL;
        struct loop *l = NULL;

        make_dir();
        gen_make(&s.g, 1, 3, T0);
        ck_assert_int_eq(loop_new(&l), 0);
        ck_assert_int_eq(checkpoint_writer_new(l, &cfg, &w, NULL), 0);
        for (int i = 0; i < 100; i++)
                checkpoint_writer_changed(w);
        run_until(l, &s.done, 1);
        ck_assert_int_eq(s.snapshots, 1);
        ck_assert(s.done_on_loop);
        ck_assert_int_eq(s.last_error, 0);
        ck_assert_uint_eq(stats.writes, 1);
        ck_assert_uint_eq(stats.bytes, s.last_bytes);
        ck_assert_uint_eq(stats.last_bytes, s.last_bytes);
        ck_assert_uint_eq(stats.written_time, T0);
        assert_on_disk(&s.g);
        /* Within the hour: nothing is written, however many changes. */
        gen_free(&s.g);
        gen_make(&s.g, 2, 2, T0 + 5);
        for (int i = 0; i < 10; i++) {
                checkpoint_writer_changed(w);
                ck_assert_int_ge(loop_run_once(l, 1000), 0);
        }
        ck_assert_int_eq(s.snapshots, 1);
        /* At shutdown the latest state is written, once. */
        ck_assert_int_eq(checkpoint_writer_flush(w, NULL), 0);
        ck_assert_int_eq(s.snapshots, 2);
        ck_assert_uint_eq(stats.writes, 2);
        assert_on_disk(&s.g);
        ck_assert_int_eq(checkpoint_writer_flush(w, NULL), 0);
        ck_assert_uint_eq(stats.writes, 2);
        checkpoint_writer_free(w);
        loop_free(l);
        gen_free(&s.g);
        remove_dir();
}
END_TEST

/* With a short interval: the second write starts an interval after the
 * first, not before. */
START_TEST(test_writer_interval)
{
        const uint64_t interval = 200000;
        struct src s = {0};
        struct checkpoint_writer_config cfg = src_config(&s, interval, NULL);
        struct checkpoint_writer *w = NULL;
        struct loop *l = NULL;

        make_dir();
        gen_make(&s.g, 1, 1, T0);
        ck_assert_int_eq(loop_new(&l), 0);
        ck_assert_int_eq(checkpoint_writer_new(l, &cfg, &w, NULL), 0);
        checkpoint_writer_changed(w);
        run_until(l, &s.done, 1);
        checkpoint_writer_changed(w);
        run_until(l, &s.done, 2);
        ck_assert_int_eq(s.snapshots, 2);
        ck_assert_uint_ge(s.snap_at[1] - s.snap_at[0], interval);
        checkpoint_writer_free(w);
        loop_free(l);
        gen_free(&s.g);
        remove_dir();
}
END_TEST

/* Refresh: the state is taken again every refresh period and written
 * only when its time moved on. */
START_TEST(test_writer_refresh)
{
        struct src s = {0};
        struct checkpoint_stats stats = {0};
        struct checkpoint_writer_config cfg = src_config(&s, 1000, &stats);
        struct checkpoint_writer *w = NULL;
        struct loop *l = NULL;

        cfg.refresh_usec = 20000;
        make_dir();
        gen_make(&s.g, 1, 1, T0);
        ck_assert_int_eq(loop_new(&l), 0);
        ck_assert_int_eq(checkpoint_writer_new(l, &cfg, &w, NULL), 0);
        checkpoint_writer_changed(w);
        run_until(l, &s.done, 1);
        /* Two refreshes find the same time: no write. */
        run_until(l, &s.snapshots, 3);
        ck_assert_int_eq(s.done, 1);
        /* The server confirmed the state: the next refresh writes it. */
        s.g.time = T0 + 1;
        run_until(l, &s.done, 2);
        ck_assert_uint_eq(stats.written_time, T0 + 1);
        assert_on_disk(&s.g);
        /* Nothing to write (no state of the source's own): nothing. */
        s.nothing = true;
        s.g.time = T0 + 2;
        checkpoint_writer_changed(w);
        for (int i = 0; i < 5; i++)
                ck_assert_int_ge(loop_run_once(l, 30000), 0);
        ck_assert_int_eq(s.done, 2);
        checkpoint_writer_free(w);
        loop_free(l);
        gen_free(&s.g);
        remove_dir();
}
END_TEST

/* The loop goes on while a write is stuck (as in a slow fsync), and
 * hears of it when it ends. */
struct stuck {
        int rd, wr; /* the test writes to wr to let the writer go on */
        int at_rd, at_wr;
};

static void stuck_step(void *data, enum checkpoint_step step)
{
        struct stuck *st = data;
        char x;

        if (step != CHECKPOINT_STEP_WRITTEN)
                return;
        if (write(st->at_wr, "x", 1) != 1 || read(st->rd, &x, 1) != 1)
                abort();
}

static void count_tick(struct loop_timer *t, void *data)
{
        (*(int *)data)++;
        loop_timer_arm(t, 1000);
}

START_TEST(test_writer_never_blocks_the_loop)
{
        struct src s = {0};
        struct stuck st;
        struct checkpoint_writer_config cfg = src_config(&s, HOUR, NULL);
        struct checkpoint_writer *w = NULL;
        struct loop_timer *t = NULL;
        struct loop *l = NULL;
        int p[2], q[2], ticks = 0;
        char x;

        ck_assert_int_eq(pipe(p), 0);
        ck_assert_int_eq(pipe(q), 0);
        st = (struct stuck){.rd = p[0], .wr = p[1], .at_rd = q[0], .at_wr = q[1]};
        cfg.step = stuck_step;
        cfg.step_data = &st;
        make_dir();
        gen_make(&s.g, 1, 2, T0);
        ck_assert_int_eq(loop_new(&l), 0);
        ck_assert_int_eq(checkpoint_writer_new(l, &cfg, &w, NULL), 0);
        ck_assert_int_eq(loop_timer_new(l, count_tick, &ticks, &t), 0);
        checkpoint_writer_changed(w);
        /* The writer reaches its stuck step... */
        while (s.snapshots == 0)
                ck_assert_int_ge(loop_run_once(l, 100000), 0);
        ck_assert_int_eq(read(st.at_rd, &x, 1), 1);
        /* ... and the loop runs its timers meanwhile. */
        loop_timer_arm(t, 1000);
        run_until(l, &ticks, 5);
        ck_assert_int_eq(s.done, 0);
        /* Let go: the loop hears of the write. */
        ck_assert_int_eq(write(st.wr, "x", 1), 1);
        run_until(l, &s.done, 1);
        ck_assert_int_eq(s.last_error, 0);
        ck_assert(s.done_on_loop);
        assert_on_disk(&s.g);
        loop_timer_free(t);
        checkpoint_writer_free(w);
        loop_free(l);
        gen_free(&s.g);
        for (int i = 0; i < 2; i++) {
                close(p[i]);
                close(q[i]);
        }
        remove_dir();
}
END_TEST

/* A failed write is counted, told, and tried again an interval later;
 * a snapshot that ran out of memory is taken again after a pause. */
START_TEST(test_writer_errors_retried)
{
        struct src s = {0};
        struct checkpoint_stats stats = {0};
        struct checkpoint_writer_config cfg = src_config(&s, 20000, &stats);
        struct checkpoint_writer *w = NULL;
        struct loop *l = NULL;

        make_dir();
        gen_make(&s.g, 1, 1, T0);
        ck_assert_int_eq(loop_new(&l), 0);
        ck_assert_int_eq(checkpoint_writer_new(l, &cfg, &w, NULL), 0);
        ck_assert_int_eq(chmod(dir, 0777), 0);
        checkpoint_writer_changed(w);
        run_until(l, &s.done, 1);
        ck_assert_int_eq(s.last_error, -EPERM);
        ck_assert_uint_eq(stats.write_errors, 1);
        ck_assert_ptr_nonnull(strstr(stats.last_error, "writable by its group or others"));
        ck_assert_uint_ne(stats.last_error_at, 0);
        ck_assert_int_eq(chmod(dir, 0700), 0);
        run_until(l, &s.done, 2);
        ck_assert_int_eq(s.last_error, 0);
        ck_assert_uint_eq(stats.writes, 1);
        assert_on_disk(&s.g);
        /* A snapshot that cannot be taken is taken again. */
        s.fail_snapshots = 1;
        s.g.time = T0 + 1;
        checkpoint_writer_changed(w);
        run_until(l, &s.done, 3);
        ck_assert_int_eq(s.fail_snapshots, 0);
        assert_on_disk(&s.g);
        /* A flush that fails says why. */
        {
                struct buf err = BUF_INIT;

                s.g.time = T0 + 2;
                checkpoint_writer_changed(w);
                ck_assert_int_eq(chmod(dir, 0777), 0);
                ck_assert_int_eq(checkpoint_writer_flush(w, &err), -EPERM);
                ck_assert_ptr_nonnull(strstr(err.data, "writable by its group or others"));
                ck_assert_int_eq(chmod(dir, 0700), 0);
                buf_free(&err);
        }
        checkpoint_writer_free(w);
        loop_free(l);
        gen_free(&s.g);
        remove_dir();
}
END_TEST

START_TEST(test_writer_directory)
{
        struct src s = {0};
        struct checkpoint_writer_config cfg = src_config(&s, HOUR, NULL);
        struct checkpoint_writer *w = NULL, *w2 = NULL;
        struct buf err = BUF_INIT;
        struct loop *l = NULL;
        char *sub, *deep, *parent;
        struct stat st;
        int fd;

        make_dir();
        ck_assert_int_eq(loop_new(&l), 0);
        /* Missing: made, 0700. */
        sub = path_in("ckpt");
        deep = path_in("no/such");
        parent = path_in("no");
        cfg.dir = sub;
        ck_assert_int_eq(checkpoint_writer_new(l, &cfg, &w, &err), 0);
        ck_assert_int_eq(stat(sub, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0700);
        /* One writer per directory. */
        ck_assert_int_eq(checkpoint_writer_new(l, &cfg, &w2, &err), -EBUSY);
        ck_assert_ptr_nonnull(strstr(err.data, "another process writes its checkpoint"));
        checkpoint_writer_free(w);
        /* Not to be trusted: refused at once. */
        ck_assert_int_eq(chmod(sub, 0775), 0);
        ck_assert_int_eq(checkpoint_writer_new(l, &cfg, &w, &err), -EPERM);
        ck_assert_ptr_nonnull(strstr(err.data, "writable by its group or others (mode 0775)"));
        /* Missing with its parent: both made (mkdir -p), the parent 0755. */
        cfg.dir = deep;
        ck_assert_int_eq(checkpoint_writer_new(l, &cfg, &w, &err), 0);
        checkpoint_writer_free(w);
        ck_assert_int_eq(stat(deep, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0700);
        ck_assert_int_eq(stat(parent, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0755);
        /* A parent that cannot be made: one sentence naming it. */
        ck_assert_int_eq(rmdir(deep), 0);
        ck_assert_int_eq(rmdir(parent), 0);
        fd = open(parent, O_WRONLY | O_CREAT, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(close(fd), 0);
        ck_assert_int_eq(checkpoint_writer_new(l, &cfg, &w, &err), -ENOTDIR);
        ck_assert_ptr_nonnull(strstr(err.data, "cannot create directory"));
        ck_assert_ptr_nonnull(strstr(err.data, "/no\": File exists (not a directory)"));
        ck_assert_int_eq(unlink(parent), 0);
        /* System calls that fail. */
        if (failalloc_enabled()) {
                ck_assert_int_eq(chmod(sub, 0700), 0);
                cfg.dir = sub;
                failsys_arm(FAILSYS_OPEN, 1, EACCES);
                ck_assert_int_eq(checkpoint_writer_new(l, &cfg, &w, &err), -EACCES);
                failsys_arm(FAILSYS_OPEN, 0, 0);
                ck_assert_ptr_nonnull(strstr(err.data, "ckpt\": Permission denied"));
                failsys_arm(FAILSYS_EVENTFD, 1, EMFILE);
                ck_assert_int_eq(checkpoint_writer_new(l, &cfg, &w, &err), -EMFILE);
                failsys_arm(FAILSYS_EVENTFD, 0, 0);
                ck_assert_str_eq(err.data, "eventfd: Too many open files");
                ck_assert_int_eq(loop_run_once(l, 0), 0);
                /* mkdir(2) refused on the missing parent: named, nothing made. */
                cfg.dir = deep;
                failsys_arm(FAILSYS_MKDIR, 1, EACCES);
                ck_assert_int_eq(checkpoint_writer_new(l, &cfg, &w, &err), -EACCES);
                failsys_arm(FAILSYS_MKDIR, 0, 0);
                ck_assert_ptr_nonnull(strstr(err.data, "cannot create directory \""));
                ck_assert_ptr_nonnull(strstr(err.data, "/no\": Permission denied"));
                ck_assert_int_eq(stat(parent, &st), -1);
        }
        free(sub);
        free(deep);
        free(parent);
        buf_free(&err);
        loop_free(l);
        remove_dir();
}
END_TEST

/* ---- out of memory ------------------------------------------------------------- */

/* What libcrypto allocates once per thread when an allocation fails in
 * a digest (its error state), and keeps: made before anything is counted,
 * by failing each allocation of a fingerprint in turn. */
static void warm_up_crypto(void)
{
        char fp[CHECKPOINT_FINGERPRINT_SIZE];
        bool failed = true;

        /* First without faults: libcrypto 3.0 loads its configuration on
         * the first digest, and an allocation failing in that one-time
         * start leaves it broken (the next digest crashes inside it).
         * This test can be the process's first, as under CK_FORK=yes. */
        ck_assert_int_eq(checkpoint_fingerprint("", 0, fp), 0);
        for (long n = 1; failed; n++) {
                failalloc_arm(n);
                (void)checkpoint_fingerprint("", 0, fp);
                failed = failalloc_failed();
                failalloc_arm(0);
        }
        ERR_clear_error();
}

static void no_tick(struct loop_timer *t, void *data)
{
        (void)t;
        (void)data;
}

/* What the loop keeps once it has had a timer: its heap. */
static void warm_up_loop(struct loop *l)
{
        struct loop_timer *t = NULL;

        ck_assert_int_eq(loop_timer_new(l, no_tick, NULL, &t), 0);
        loop_timer_free(t);
        ck_assert_int_ge(loop_run_once(l, 0), 0);
}

/* Every allocation of an encode, a load, a writer's start and a flush
 * fails in turn: each fails whole (-ENOMEM, err empty, nothing leaked)
 * or succeeds with the right result. */
START_TEST(test_out_of_memory)
{
        struct gen g;
        struct buf b = BUF_INIT;
        long before, n;

        if (!failalloc_enabled())
                return;
        make_dir();
        gen_make(&g, 1, 3, T0);
        write_gen(&g);
        encode(&ID, &g, &b);
        warm_up_crypto();
        before = failalloc_live();
        for (n = 1;; n++) {
                struct checkpoint_state st = gen_state(&g);
                struct buf out = BUF_INIT, err = BUF_INIT;
                struct checkpoint c = {0};
                int r1, r2;
                bool failed;

                failalloc_arm(n);
                r1 = checkpoint_encode(&ID, &st, &out, &err);
                r2 = load(0, T0 + 1, &c, &err);
                failed = failalloc_failed();
                failalloc_arm(0);
                ck_assert(r1 == 0 || (r1 == -ENOMEM && out.len == 0 && err.len == 0));
                if (r1 == 0)
                        ck_assert(out.len == b.len && memcmp(out.data, b.data, b.len) == 0);
                ck_assert_msg(r2 == 0 || (r2 == -ENOMEM && err.len == 0), "n=%ld: %d %s", n, r2, err.data);
                if (r2 == 0)
                        assert_gen(&c, &g);
                checkpoint_free(&c);
                buf_free(&out);
                buf_free(&err);
                ck_assert_msg(failalloc_live() == before, "n=%ld: %ld blocks leaked", n, failalloc_live() - before);
                if (!failed)
                        break;
        }
        ck_assert_int_ge(n, 10);
        gen_free(&g);
        buf_free(&b);
        remove_dir();
}
END_TEST

START_TEST(test_writer_out_of_memory)
{
        struct src s = {0};
        struct checkpoint_stats stats = {0};
        struct checkpoint_writer_config cfg = src_config(&s, HOUR, &stats);
        struct loop *l = NULL;
        long before, n;
        char *f;

        if (!failalloc_enabled())
                return;
        make_dir();
        f = path_in(CHECKPOINT_FILE);
        gen_make(&s.g, 1, 2, T0);
        ck_assert_int_eq(loop_new(&l), 0);
        warm_up_crypto();
        warm_up_loop(l);
        failalloc_warm_up();
        before = failalloc_live();
        for (n = 1;; n++) {
                struct checkpoint_writer *w = NULL;
                struct buf err = BUF_INIT;
                int r1, r2 = 0;
                bool failed;

                unlink(f);
                s.g.time = T0 + (uint64_t)n;
                failalloc_arm(n);
                r1 = checkpoint_writer_new(l, &cfg, &w, &err);
                if (r1 == 0) {
                        checkpoint_writer_changed(w);
                        r2 = checkpoint_writer_flush(w, &err);
                }
                failed = failalloc_failed();
                failalloc_arm(0);
                ck_assert_msg(r1 == 0 || (r1 == -ENOMEM && err.len == 0), "n=%ld: %d %s", n, r1, err.data);
                ck_assert_msg(r2 == 0 || (r2 == -ENOMEM && err.len == 0), "n=%ld: %d %s", n, r2, err.data);
                if (r1 == 0 && r2 == 0)
                        assert_on_disk(&s.g);
                checkpoint_writer_free(w);
                buf_free(&err);
                /* The loop frees a handle on its next turn. */
                ck_assert_int_ge(loop_run_once(l, 0), 0);
                ck_assert_msg(failalloc_live() == before, "n=%ld: %ld blocks leaked", n, failalloc_live() - before);
                if (!failed)
                        break;
        }
        ck_assert_int_ge(n, 5);
        free(f);
        loop_free(l);
        gen_free(&s.g);
        remove_dir();
}
END_TEST

UNIT_MAIN(test_round_trip, test_fingerprint, test_refuse_missing, test_refuse_every_corrupt_byte,
          test_refuse_every_truncation, test_refuse_other_version, test_refuse_not_ours, test_refuse_by_age,
          test_refuse_untrusted, test_refuse_bad_content, test_write_faults, test_load_faults,
          test_write_over_stale_tmp, test_killed_at_every_step, test_writer_coalesces, test_writer_interval,
          test_writer_refresh, test_writer_never_blocks_the_loop, test_writer_errors_retried, test_writer_directory,
          test_out_of_memory, test_writer_out_of_memory)
