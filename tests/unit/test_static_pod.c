/*
 * Unit tests: static_pod — listing a manifest directory, judging its
 * entries, loading a file and decoding a manifest-URL body into the pods
 * the sources emit; every allocation and directory call failed in turn.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "failalloc.h"
#include "util/dir.h"
#include "sources/manifest.h"
#include "util/path.h"
#include "sources/static_pod.h"
#include "unit.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static const char GOOD[] = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n"
                           "  labelz: {a: b}\nspec:\n  containers:\n  - name: c\n    image: nginx\n";

static char *tmpdir(void)
{
        char *d = strdup("/tmp/podmux-static-pod-XXXXXX");

        ck_assert_ptr_nonnull(d);
        ck_assert_ptr_nonnull(mkdtemp(d));
        return d;
}

static char *put(const char *dir, const char *name, const char *text)
{
        char *p = path_join(dir, name);
        FILE *f;

        ck_assert_ptr_nonnull(p);
        f = fopen(p, "w");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(fputs(text, f) >= 0, 1);
        ck_assert_int_eq(fclose(f), 0);
        return p;
}

static void rm_rf(const char *dir)
{
        char cmd[512];

        (void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_list_dir_sorted_hidden_skipped_all_or_nothing)
{
        char *d = tmpdir(), *sub, **names = NULL;
        const char *what = NULL;
        size_t n = 99;

        free(put(d, "b.yaml", GOOD));
        free(put(d, "a.yaml", GOOD));
        free(put(d, ".hidden.yaml", GOOD));
        free(put(d, "B.json", GOOD));
        sub = path_join(d, "sub");
        ck_assert_int_eq(mkdir(sub, 0755), 0);
        ck_assert_int_eq(dir_list(d, DIR_LIST_NO_HIDDEN | DIR_LIST_PATHS, &names, &n, &what), 0);
        ck_assert_uint_eq(n, 4);
        ck_assert(strstr(names[0], "/B.json") && strstr(names[1], "/a.yaml") && strstr(names[2], "/b.yaml") &&
                  strstr(names[3], "/sub"));
        ck_assert_int_eq(strncmp(names[0], d, strlen(d)), 0);
        dir_list_free(names, n);

        /* An empty directory: no names, success. */
        names = NULL;
        ck_assert_int_eq(dir_list(sub, DIR_LIST_NO_HIDDEN | DIR_LIST_PATHS, &names, &n, &what), 0);
        ck_assert_uint_eq(n, 0);
        dir_list_free(names, n);

        /* Missing: the error and the step, nothing returned. */
        names = NULL;
        rm_rf(sub);
        ck_assert_int_eq(dir_list(sub, DIR_LIST_NO_HIDDEN | DIR_LIST_PATHS, &names, &n, &what), -ENOENT);
        ck_assert_str_eq(what, "cannot open directory");
        ck_assert_ptr_null(names);

        /* A read error half way: the whole listing fails.  (Under the
         * sanitizers nothing is interposed: failalloc.h.) */
        if (failalloc_enabled()) {
                failsys_arm(FAILSYS_READDIR, 2, EIO);
                ck_assert_int_eq(dir_list(d, DIR_LIST_NO_HIDDEN | DIR_LIST_PATHS, &names, &n, &what), -EIO);
                failsys_arm(FAILSYS_READDIR, 0, 0);
                ck_assert_str_eq(what, "cannot read directory");
                ck_assert_ptr_null(names);
                failsys_arm(FAILSYS_OPENDIR, 1, EMFILE);
                ck_assert_int_eq(dir_list(d, DIR_LIST_NO_HIDDEN | DIR_LIST_PATHS, &names, &n, &what), -EMFILE);
                failsys_arm(FAILSYS_OPENDIR, 0, 0);
        }
        ck_assert(static_pod_resource_error(-EMFILE) && static_pod_resource_error(-ENOMEM) &&
                  !static_pod_resource_error(-EIO) && !static_pod_resource_error(-ENOENT));
        rm_rf(d);
        free(sub);
        free(d);
}
END_TEST

START_TEST(test_entry_kinds_and_reasons)
{
        char *d = tmpdir(), *file = put(d, "a.yaml", GOOD);
        char *sub = path_join(d, "sub"), *fifo = path_join(d, "p.yaml"), *dang = path_join(d, "dangling.yaml");
        char *link = path_join(d, "link.yaml"), *gone = path_join(d, "gone.yaml"), *nowhere = path_join(d, "nowhere");
        struct buf why = BUF_INIT;

        ck_assert_int_eq(mkdir(sub, 0755), 0);
        ck_assert_int_eq(mkfifo(fifo, 0644), 0);
        ck_assert_int_eq(symlink(nowhere, dang), 0);
        ck_assert_int_eq(symlink(file, link), 0);
        ck_assert_int_eq(static_pod_entry(file, &why), STATIC_POD_MANIFEST);
        ck_assert_int_eq(static_pod_entry(link, &why), STATIC_POD_MANIFEST);
        ck_assert_int_eq(static_pod_entry(sub, &why), STATIC_POD_DIRECTORY);
        ck_assert_int_eq(static_pod_entry(gone, &why), STATIC_POD_GONE);
        ck_assert_int_eq(static_pod_entry(fifo, &why), STATIC_POD_BAD);
        ck_assert_str_eq(why.data, "not a regular file: skipped");
        ck_assert_int_eq(static_pod_entry(dang, &why), STATIC_POD_BAD);
        ck_assert_str_eq(why.data, "dangling symbolic link: skipped");
        /* A path through a file: stat's own error. */
        {
                char *through = path_join(file, "x");

                ck_assert_int_eq(static_pod_entry(through, &why), STATIC_POD_BAD);
                ck_assert_ptr_nonnull(strstr(why.data, "Not a directory"));
                free(through);
        }
        buf_free(&why);
        rm_rf(d);
        free(file);
        free(sub);
        free(fifo);
        free(dang);
        free(link);
        free(gone);
        free(nowhere);
        free(d);
}
END_TEST

/* The pod static_pod_load builds is the one the decoding steps give. */
START_TEST(test_load_is_decode_then_pod)
{
        char *d = tmpdir(), *file = put(d, "web.yaml", GOOD), *bad = put(d, "bad.yaml", "kind: Pod\n");
        char *missing = path_join(d, "missing.yaml");
        struct manifest_ctx ctx = {.origin = MANIFEST_ORIGIN_FILE, .node_name = "Node1", .location = file};
        struct v1_unknown u = {NULL, 0, 0};
        struct buf err = BUF_INIT, a = BUF_INIT, b = BUF_INIT, key = BUF_INIT;
        struct pod *p = NULL, *q = NULL;
        json_object *obj = NULL;
        int docs = -7;

        ck_assert_int_eq(static_pod_load(file, "Node1", &p, &u, NULL, NULL, &err), 0);
        ck_assert_int_eq(manifest_decode_pod(GOOD, strlen(GOOD), &ctx, &obj, NULL, &err), 0);
        ck_assert_int_eq(pod_from_json(obj, &q, &err), 0);
        ck_assert_int_eq(pod_render(p, &a), 0);
        ck_assert_int_eq(pod_render(q, &b), 0);
        ck_assert_str_eq(a.data, b.data);
        ck_assert_str_eq(pod_name(p), "web-node1");
        ck_assert_int_eq(pod_store_key(p, &key), 0);
        ck_assert_str_eq(key.data, "default/web-node1");
        ck_assert_uint_eq(u.total, 1);
        ck_assert_str_eq(u.paths[0], "metadata.labelz");
        v1_unknown_clear(&u);

        buf_reset(&err);
        ck_assert_int_eq(static_pod_load(bad, "n", &p, &u, &docs, NULL, &err), -EINVAL);
        ck_assert_int_eq(docs, -7); /* untouched on failure */
        ck_assert_uint_gt(err.len, 0);
        ck_assert_uint_eq(u.total, 0);
        buf_reset(&err);
        ck_assert_int_eq(static_pod_load(missing, "n", &p, NULL, NULL, NULL, &err), -ENOENT);
        ck_assert_ptr_nonnull(strstr(err.data, "No such file"));
        buf_reset(&err);
        ck_assert_int_eq(static_pod_load(d, "n", &p, NULL, NULL, NULL, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err.data, "not a regular file"));

        pod_unref(p);
        pod_unref(q);
        json_object_put(obj);
        buf_free(&err);
        buf_free(&a);
        buf_free(&b);
        buf_free(&key);
        rm_rf(d);
        free(file);
        free(bad);
        free(missing);
        free(d);
}
END_TEST

#define ONE "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: nginx\n"
static const char MULTI[] = ONE "---\nkind: Pod\nmetadata: {name: other}\n";

/* The documents a loaded file holds, of which only the first is used. */
START_TEST(test_load_counts_documents)
{
        static const struct {
                const char *tail; /* after a one-document manifest */
                int docs;
        } cases[] = {
                {"", 1},
                {"# ---\n# a comment\n", 1},
                {"...\n", 1}, /* an end marker, no second document */
                {"---\n", 2}, /* an empty second document */
                {"---\nkind: Pod\n---\nx: 1\n", 3},
                {"---\n[unclosed\n", 2}, /* too malformed to count: one more */
                {"--- {a: b}\n", 2},
        };
        char *d = tmpdir();
        struct buf text = BUF_INIT, err = BUF_INIT;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct pod *p = NULL;
                char *file;
                int docs = -1;

                buf_reset(&text);
                /* A "---" at the very start opens the first document. */
                ck_assert_int_eq(buf_printf(&text, "---\n%s%s", ONE, cases[i].tail), 0);
                file = put(d, "m.yaml", text.data);
                ck_assert_int_eq(static_pod_load(file, "n", &p, NULL, &docs, NULL, &err), 0);
                ck_assert_msg(docs == cases[i].docs, "case %zu: %d document(s), want %d", i, docs, cases[i].docs);
                pod_unref(p);
                free(file);
        }
        rm_rf(d);
        free(d);
        buf_free(&text);
        buf_free(&err);
}
END_TEST

START_TEST(test_decode_body)
{
        static const char list[] = "{\"apiVersion\":\"v1\",\"kind\":\"PodList\",\"items\":["
                                   "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\"},"
                                   "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}},"
                                   "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"b\"},"
                                   "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}]}";
        static const char empty[] = "{\"apiVersion\":\"v1\",\"kind\":\"PodList\",\"items\":[]}";
        static const char bad[] = "{\"apiVersion\":\"v1\",\"kind\":\"PodList\",\"items\":[{\"kind\":\"Pod\"}]}";
        struct buf err = BUF_INIT;
        struct pod **pods = NULL;
        size_t n = 0;

        ck_assert_int_eq(static_pod_decode_body(list, strlen(list), "http://h/x", "n1", &pods, &n, NULL, &err), 0);
        ck_assert_uint_eq(n, 2);
        ck_assert_str_eq(pod_name(pods[0]), "a-n1");
        ck_assert_str_eq(pod_name(pods[1]), "b-n1");
        static_pod_pods_free(pods, n);
        pods = NULL;
        ck_assert_int_eq(static_pod_decode_body(empty, strlen(empty), "http://h/x", "n1", &pods, &n, NULL, &err), 0);
        ck_assert_uint_eq(n, 0);
        ck_assert_ptr_nonnull(pods);
        static_pod_pods_free(pods, n);
        pods = NULL;
        ck_assert_int_lt(static_pod_decode_body(bad, strlen(bad), "http://h/x", "n1", &pods, &n, NULL, &err), 0);
        ck_assert_ptr_null(pods);
        ck_assert_uint_gt(err.len, 0);
        buf_free(&err);
}
END_TEST

/* ---- every allocation failed in turn -------------------------------------- */

struct job {
        const char *dir, *file;
        char *text; /* what the run gave: rendered pods or the error */
};

static void run_all(struct job *j)
{
        static const char body[] = "{\"apiVersion\":\"v1\",\"kind\":\"PodList\",\"items\":["
                                   "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\",\"x\":1},"
                                   "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}]}";
        struct buf out = BUF_INIT, err = BUF_INIT, why = BUF_INIT;
        struct v1_unknown u = {NULL, 0, 0};
        struct static_pod_read rd;
        struct pod *p = NULL, **pods = NULL;
        const char *what = NULL;
        char **names = NULL;
        size_t n = 0;
        int r, docs = 0;

        r = dir_list(j->dir, DIR_LIST_NO_HIDDEN | DIR_LIST_PATHS, &names, &n, &what);
        if (r == 0) {
                for (size_t i = 0; i < n && r >= 0; i++)
                        r = static_pod_entry(names[i], &why);
                dir_list_free(names, n);
        }
        if (r >= 0)
                r = static_pod_load(j->file, "n1", &p, &u, &docs, &rd, &err);
        if (r == 0) {
                r = pod_render(p, &out);
                pod_unref(p);
        }
        if (r == 0) {
                char text[DIGEST_TEXT_MAX];

                digest_text(rd.digest, text);
                r = buf_printf(&out, " %s %d", text, rd.read);
        }
        if (r == 0)
                r = buf_printf(&out, " %d document(s) ", docs);
        if (r == 0)
                r = static_pod_decode_body(body, strlen(body), "http://h/", "n1", &pods, &n, &u, &err);
        if (r == 0) {
                r = pod_render(pods[0], &out);
                static_pod_pods_free(pods, n);
        }
        failalloc_pause(true);
        if (r < 0) {
                buf_reset(&out);
                ck_assert_int_eq(buf_printf(&out, "error %d", r), 0);
        }
        j->text = buf_steal(&out, NULL);
        failalloc_pause(false);
        v1_unknown_clear(&u);
        buf_free(&out);
        buf_free(&err);
        buf_free(&why);
}

START_TEST(test_every_allocation_failed_in_turn)
{
        /* Two documents: the count is taken too. */
        char *d = tmpdir(), *file = put(d, "web.yaml", MULTI), *fifo = path_join(d, "p");
        struct job want = {d, file, NULL};
        long hits = 0;

        free(put(d, "b.yaml", GOOD));
        ck_assert_int_eq(mkfifo(fifo, 0644), 0);
        run_all(&want);
        ck_assert_ptr_null(strstr(want.text, "error"));
        ck_assert_ptr_nonnull(strstr(want.text, " 2 document(s) "));
        for (long k = 1; failalloc_enabled(); k++) {
                struct job got = {d, file, NULL};
                long live0 = failalloc_live();
                bool hit;

                failalloc_arm(k);
                run_all(&got);
                hit = failalloc_failed();
                failalloc_arm(0);
                ck_assert_msg(strcmp(got.text, want.text) == 0 || strcmp(got.text, "error -12") == 0,
                              "allocation %ld failing: %s", k, got.text);
                free(got.text);
                ck_assert_msg(failalloc_live() == live0, "allocation %ld failing: %ld block(s) leaked", k,
                              failalloc_live() - live0);
                if (!hit)
                        break;
                hits++;
        }
        ck_assert(!failalloc_enabled() || hits > 10);
        free(want.text);
        rm_rf(d);
        free(file);
        free(fifo);
        free(d);
}
END_TEST

/* path_absolute(): one name per file however it is spelled; relative to
 * a base or the working directory; the working directory gone is an
 * error, not a guess; out of memory leaks nothing. */
START_TEST(test_path_absolute)
{
        static const struct {
                const char *path, *base, *want;
        } cases[] = {
                {"/a//b/../c/", NULL, "/a/c"},
                {"x/./y", "/base/", "/base/x/y"},
                {"../../x", "/b", "/x"},
                {"./", "/b/c", "/b/c"},
                {"", "/b", "/b"},
                {"a", "/", "/a"},
        };
        char *cwd = getcwd(NULL, 0), *d = tmpdir(), *gone = path_join(d, "gone"), *got = NULL, *want = NULL;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                ck_assert_int_eq(path_absolute(cases[i].path, cases[i].base, &got), 0);
                ck_assert_msg(strcmp(got, cases[i].want) == 0, "\"%s\" from \"%s\": \"%s\"", cases[i].path,
                              cases[i].base, got);
                free(got);
        }
        ck_assert_int_eq(chdir(d), 0);
        ck_assert_int_eq(path_absolute("./m/../n.yaml", NULL, &got), 0);
        want = path_join(d, "n.yaml");
        ck_assert_str_eq(got, want);
        free(got);
        for (long n = 1; failalloc_enabled(); n++) {
                long live0 = failalloc_live();
                bool failed;
                int r;

                got = NULL;
                failalloc_arm(n);
                r = path_absolute("n.yaml", NULL, &got);
                failed = failalloc_failed();
                failalloc_arm(0);
                if (r == 0) {
                        /* glibc's getcwd() keeps its larger buffer when
                         * its last realloc fails: a success too. */
                        ck_assert_str_eq(got, want);
                        free(got);
                        if (!failed)
                                break;
                        continue;
                }
                ck_assert(failed);
                ck_assert_int_eq(r, -ENOMEM);
                ck_assert_ptr_null(got);
                ck_assert_int_eq(failalloc_live(), live0);
        }
        ck_assert_int_eq(mkdir(gone, 0755), 0);
        ck_assert_int_eq(chdir(gone), 0);
        ck_assert_int_eq(rmdir(gone), 0);
        ck_assert_int_eq(path_absolute("n.yaml", NULL, &got), -ENOENT);
        ck_assert_int_eq(path_absolute("/n.yaml", NULL, &got), 0); /* needs no working directory */
        ck_assert_str_eq(got, "/n.yaml");
        free(got);
        ck_assert_int_eq(chdir(cwd), 0);
        rm_rf(d);
        free(want);
        free(gone);
        free(cwd);
        free(d);
}
END_TEST

/* What a load read: the bytes' digest and stat, whether they decode or
 * not; nothing when they could not be read. */
START_TEST(test_load_says_what_it_read)
{
        char *d = tmpdir(), *file = put(d, "web.yaml", GOOD), *bad = put(d, "bad.yaml", "kind: Pod\n");
        char *missing = path_join(d, "missing.yaml");
        struct static_pod_read rd;
        struct buf err = BUF_INIT;
        struct pod *p = NULL;
        uint8_t want[DIGEST_LEN];

        memset(&rd, 0, sizeof(rd));
        ck_assert_int_eq(static_pod_load(file, "Node1", &p, NULL, NULL, &rd, &err), 0);
        ck_assert(rd.read);
        ck_assert_int_eq(digest_sha256(GOOD, strlen(GOOD), want), 0);
        ck_assert_int_eq(memcmp(rd.digest, want, DIGEST_LEN), 0);
        ck_assert_int_eq(rd.st.st_size, (off_t)strlen(GOOD));
        pod_unref(p);
        p = NULL;
        memset(&rd, 0, sizeof(rd));
        ck_assert_int_eq(static_pod_load(bad, "n", &p, NULL, NULL, &rd, &err), -EINVAL);
        ck_assert(rd.read);
        ck_assert_int_eq(digest_sha256("kind: Pod\n", 10, want), 0);
        ck_assert_int_eq(memcmp(rd.digest, want, DIGEST_LEN), 0);
        rd.read = true;
        ck_assert_int_eq(static_pod_load(missing, "n", &p, NULL, NULL, &rd, &err), -ENOENT);
        ck_assert(!rd.read);
        rd.read = true;
        ck_assert_int_eq(static_pod_load(d, "n", &p, NULL, NULL, &rd, &err), -EINVAL);
        ck_assert(!rd.read);
        buf_free(&err);
        rm_rf(d);
        free(file);
        free(bad);
        free(missing);
        free(d);
}
END_TEST

UNIT_MAIN(test_load_says_what_it_read, test_list_dir_sorted_hidden_skipped_all_or_nothing, test_entry_kinds_and_reasons,
          test_load_is_decode_then_pod, test_load_counts_documents, test_decode_body,
          test_every_allocation_failed_in_turn, test_path_absolute)
