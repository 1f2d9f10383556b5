/*
 * Unit tests: the file source on a real directory, with the real watcher
 * and loop.  Each test drives the loop until the expected SET arrives
 * (bounded by an iteration count, never by a timing assertion).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "failalloc.h"
#include "util/digest.h"
#include "sources/file_source.h"
#include "metrics/metrics.h"
#include "core/mux.h"
#include "sources/static_pod.h"
#include "util/str.h"
#include "util/strmap.h"
#include "unit.h"

struct capture {
        struct pod_update *last; /* the source's state: its SETs with its deltas folded in */
        int sets;
        int deltas;
        size_t max_delta; /* most pods one delta carried */
        /* When set, each record merged is taken as broadcast, as podmux
         * run does: its pods stamped as the merger stamps them, and
         * file_source_carried() told with the next number. */
        struct file_source *carry_to;
        uint64_t carry_seq;
};

/* The merger's view of the source: a full SET replaces it, a delta is
 * folded into it (as the merger would apply it). */
static int capture(struct capture *c, const char *source, struct pod_update **up)
{
        struct pod_update *u = *up;

        ck_assert_str_eq(source, "file");
        ck_assert_int_eq(u->op, POD_OP_SET);
        if (c->carry_to) {
                for (size_t i = 0; i < u->n_pods; i++)
                        if (!u->pods[i]->stamped)
                                ck_assert_int_eq(pod_stamp(u->pods[i], POD_SOURCE_FILE, 1), 0);
                file_source_carried(c->carry_to, u, ++c->carry_seq);
        }
        if (u->delta) {
                ck_assert_ptr_nonnull(c->last); /* a delta follows a SET */
                if (u->n_pods + u->n_gone > c->max_delta)
                        c->max_delta = u->n_pods + u->n_gone;
                ck_assert_int_eq(pod_update_fold(c->last, u), 0);
                pod_update_sort(c->last);
                c->deltas++;
                return 0;
        }
        pod_update_free(c->last);
        c->last = u;
        *up = NULL; /* kept */
        c->sets++;
        return 0;
}

/* The test's own work (Check's assertions allocate) is never failed. */
static int capture_merge(void *data, const char *source, struct pod_update **up)
{
        int r;

        failalloc_hold();
        r = capture(data, source, up);
        failalloc_release();
        return r;
}

struct fixture {
        char dir[64];
        struct loop *loop;
        struct watcher *watcher;
        struct mux *mux;
        struct file_source *fs;
        struct capture cap;
        struct source_stats stats;
        /* The records as their changes told them: path -> JSON text. */
        struct strmap *told;
};

/* What the next setup() gives its source: --static-pod-file-pattern
 * globs, and a mux that merges only when a test drains it. */
static const char *const *next_patterns;
static size_t next_n_patterns;
static bool next_manual_mux;
static uint64_t next_retry_usec; /* 0: the default backoff base */

/* The record callback: what a consumer of the changes would hold. */
static void on_record(void *data, const struct file_record_view *v)
{
        struct fixture *fx = data;
        struct buf b = BUF_INIT;
        char *old = NULL;

        failalloc_hold();
        ck_assert_ptr_nonnull(file_record_state_name(v->state));
        /* Never a verdict told without its reason, nor a duplicate
         * without its pod, whatever ran out meanwhile. */
        ck_assert_msg(v->reason || (v->state != FILE_RECORD_REJECTED && v->state != FILE_RECORD_DUPLICATE &&
                                    v->state != FILE_RECORD_IGNORED),
                      "%s told %s without a reason", v->path, file_record_state_name(v->state));
        ck_assert_msg(v->state != FILE_RECORD_DUPLICATE || v->n_pods == 1, "%s told a duplicate without its pod",
                      v->path);
        if (v->state == FILE_RECORD_GONE) {
                free(strmap_remove(fx->told, v->path));
        } else {
                ck_assert_int_eq(file_record_render(v, &b), 0);
                ck_assert_int_eq(strmap_put(fx->told, v->path, buf_steal(&b, NULL), (void **)&old), 0);
                free(old);
        }
        buf_free(&b);
        failalloc_release();
}

static void write_file(const char *dir, const char *name, const char *text)
{
        char path[256], tmp[256];
        FILE *f;

        const char *slash = strrchr(name, '/');
        int dlen = slash ? (int)(slash - name) + 1 : 0;

        /* Written under a hidden name and renamed in: one event, whole file. */
        snprintf(tmp, sizeof(tmp), "%s/%.*s.tmp-%s", dir, dlen, name, name + dlen);
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(tmp, "w");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        fclose(f);
        ck_assert_int_eq(rename(tmp, path), 0);
}

static void pod_file(const char *dir, const char *file, const char *name)
{
        char text[512];

        snprintf(text, sizeof(text),
                 "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n"
                 "  containers:\n  - name: c\n    image: busybox:1.36\n",
                 name);
        write_file(dir, file, text);
}

/* A fixture whose source watches path_suffix under a new directory, or,
 * with relative, path_suffix as a path relative to it (the working
 * directory then). */
static void setup_at(struct fixture *fx, const char *path_suffix, int create, bool relative)
{
        struct file_source_config cfg = {0};
        struct mux_channel *ch;
        struct buf err = BUF_INIT;
        char path[128];

        memset(fx, 0, sizeof(*fx));
        strcpy(fx->dir, "/tmp/podmux-fs-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(fx->dir));
        snprintf(path, sizeof(path), "%s%s", relative ? "" : fx->dir, path_suffix);
        if (relative)
                ck_assert_int_eq(chdir(fx->dir), 0);
        if (create && path_suffix[0]) {
                char cmd[192];

                snprintf(cmd, sizeof(cmd), "mkdir -p %s", path);
                ck_assert_int_eq(system(cmd), 0);
        }
        ck_assert_int_eq(loop_new(&fx->loop), 0);
        ck_assert_int_eq(watcher_new(fx->loop, &fx->watcher), 0);
        ck_assert_int_eq(mux_new(next_manual_mux ? NULL : fx->loop, capture_merge, &fx->cap, &fx->mux), 0);
        ck_assert_int_eq(mux_channel(fx->mux, "file", &ch), 0);
        ck_assert_ptr_nonnull(fx->told = strmap_new());
        cfg.path = path;
        cfg.node_name = "Node1";
        cfg.period_usec = 3600ULL * 1000000; /* relist only when a test asks */
        cfg.stats = &fx->stats;
        cfg.record = on_record;
        cfg.record_data = fx;
        cfg.patterns = next_patterns;
        cfg.n_patterns = next_n_patterns;
        cfg.retry_usec = next_retry_usec;
        ck_assert_int_eq(file_source_new(fx->loop, fx->watcher, ch, &cfg, &fx->fs, &err), 0);
        buf_free(&err);
        next_patterns = NULL;
        next_n_patterns = 0;
        next_manual_mux = false;
        next_retry_usec = 0;
}

static void setup(struct fixture *fx, const char *path_suffix, int create)
{
        setup_at(fx, path_suffix, create, false);
}

static void teardown(struct fixture *fx)
{
        char cmd[128];

        file_source_free(fx->fs);
        watcher_free(fx->watcher);
        mux_free(fx->mux);
        loop_free(fx->loop);
        pod_update_free(fx->cap.last);
        strmap_free(fx->told, free);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", fx->dir);
        ck_assert_int_eq(system(cmd), 0);
}

static const char *names_of(struct fixture *fx, char *out, size_t size)
{
        out[0] = '\0';
        if (!fx->cap.last)
                return "(none)";
        for (size_t i = 0; i < fx->cap.last->n_pods; i++) {
                strncat(out, pod_name(fx->cap.last->pods[i]), size - strlen(out) - 2);
                strncat(out, ",", size - strlen(out) - 1);
        }
        return out;
}

typedef const char *describe_fn(struct fixture *fx, char *out, size_t size);

/* Drives the loop until describe(the last record) reads `want`. */
static void expect_described(struct fixture *fx, describe_fn *describe, const char *want)
{
        char got[1024];

        for (int i = 0; i < 400; i++) {
                if (fx->cap.last && strcmp(describe(fx, got, sizeof(got)), want) == 0)
                        return;
                loop_run_once(fx->loop, 50000);
        }
        ck_abort_msg("want \"%s\", the last record has \"%s\"", want, describe(fx, got, sizeof(got)));
}

/* Until the last SET names exactly `want` ("a,b," form). */
static void expect_names(struct fixture *fx, const char *want)
{
        expect_described(fx, names_of, want);
}

START_TEST(test_relist_at_start_reads_sorted_visible_files)
{
        struct fixture fx;

        setup(&fx, "/m", 1);
        pod_file(fx.dir + 0, "m/b.yaml", "bravo");
        pod_file(fx.dir, "m/a.yaml", "alpha");
        pod_file(fx.dir, "m/.hidden.yaml", "hidden");
        {
                char sub[128];

                snprintf(sub, sizeof(sub), "%s/m/subdir", fx.dir);
                ck_assert_int_eq(mkdir(sub, 0755), 0);
        }
        file_source_start(fx.fs);
        expect_names(&fx, "alpha-node1,bravo-node1,");
        ck_assert_str_eq(pod_namespace(fx.cap.last->pods[0]), "default");
        teardown(&fx);
}
END_TEST

/* A manifest renamed into the directory is merged in the loop turn that
 * hands its event over: no timer to wait for in between (the latency of
 * a drop, scripts/bench drop_c). */
START_TEST(test_drop_merged_in_the_turn_of_its_event)
{
        struct fixture fx;
        char tmp[128], dst[128];
        unsigned long before;

        setup(&fx, "/m", 1);
        file_source_start(fx.fs);
        expect_names(&fx, "");
        /* Written beside the watched directory: the rename is its one
         * event. */
        pod_file(fx.dir, "drop.yaml", "alpha");
        snprintf(tmp, sizeof(tmp), "%s/drop.yaml", fx.dir);
        snprintf(dst, sizeof(dst), "%s/m/drop.yaml", fx.dir);
        before = watcher_handed(fx.watcher);
        /* The kernel queues the event inside rename(): the next turn
         * reads it, and merges the file in that same turn. */
        ck_assert_int_eq(rename(tmp, dst), 0);
        ck_assert_int_eq(fx.cap.deltas, 0);
        loop_run_once(fx.loop, 1000000);
        ck_assert_uint_eq(watcher_handed(fx.watcher), before + 1);
        ck_assert_int_eq(fx.cap.deltas, 1);
        expect_names(&fx, "alpha-node1,");
        teardown(&fx);
}
END_TEST

START_TEST(test_empty_directory_sends_empty_set)
{
        struct fixture fx;

        setup(&fx, "/m", 1);
        file_source_start(&*fx.fs);
        expect_names(&fx, "");
        ck_assert_int_eq(fx.cap.sets, 1);
        teardown(&fx);
}
END_TEST

START_TEST(test_watch_add_edit_delete)
{
        struct fixture fx;
        char path[256];

        setup(&fx, "/m", 1);
        file_source_start(fx.fs);
        expect_names(&fx, "");
        pod_file(fx.dir, "m/a.yaml", "alpha");
        expect_names(&fx, "alpha-node1,");
        write_file(fx.dir, "m/b.json",
                 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"bravo\"},"
                 "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}");
        expect_names(&fx, "alpha-node1,bravo-node1,");
        snprintf(path, sizeof(path), "%s/m/a.yaml", fx.dir);
        ck_assert_int_eq(unlink(path), 0);
        expect_names(&fx, "bravo-node1,");
        teardown(&fx);
}
END_TEST

START_TEST(test_bad_file_is_left_out_and_others_stay)
{
        struct fixture fx;

        setup(&fx, "/m", 1);
        pod_file(fx.dir, "m/a.yaml", "alpha");
        write_file(fx.dir, "m/bad.yaml", "apiVersion: v1\nkind: Pod\nmetadata: [unclosed\n");
        file_source_start(fx.fs);
        expect_names(&fx, "alpha-node1,");
        /* The bad file becomes good: picked up by the watch. */
        pod_file(fx.dir, "m/bad.yaml", "fixed");
        expect_names(&fx, "alpha-node1,fixed-node1,");
        teardown(&fx);
}
END_TEST

/* Two files define one pod in directory m (under fx->dir): the first in
 * sorted order keeps it, and hands it over at once when it goes. */
static void duplicates_in(struct fixture *fx, const char *m)
{
        char path[256], a[64], b[64];

        snprintf(a, sizeof(a), "%s/a.yaml", m);
        snprintf(b, sizeof(b), "%s/b.yaml", m);
        write_file(fx->dir, a,
                   "apiVersion: v1\nkind: Pod\nmetadata:\n  name: same\n  labels: {from: a}\n"
                   "spec:\n  containers:\n  - name: c\n    image: x\n");
        write_file(fx->dir, b,
                   "apiVersion: v1\nkind: Pod\nmetadata:\n  name: same\n  labels: {from: b}\n"
                   "spec:\n  containers:\n  - name: c\n    image: x\n");
        file_source_start(fx->fs);
        expect_names(fx, "same-node1,");
        ck_assert_ptr_nonnull(strstr(pod_text(fx->cap.last->pods[0]), "\"from\":\"a\""));
        /* An edit of the losing file through the watch does not take over. */
        write_file(fx->dir, b,
                   "apiVersion: v1\nkind: Pod\nmetadata:\n  name: same\n  labels: {from: b2}\n"
                   "spec:\n  containers:\n  - name: c\n    image: x\n");
        file_source_relist(fx->fs);
        expect_names(fx, "same-node1,");
        ck_assert_ptr_nonnull(strstr(pod_text(fx->cap.last->pods[0]), "\"from\":\"a\""));
        /* Deleting the winner hands the pod to the other file at once. */
        snprintf(path, sizeof(path), "%s/%s", fx->dir, a);
        ck_assert_int_eq(unlink(path), 0);
        for (int i = 0; i < 400 && !strstr(pod_text(fx->cap.last->pods[0]), "\"from\":\"b2\""); i++) {
                loop_run_once(fx->loop, 50000);
                if (!fx->cap.last->n_pods)
                        continue;
        }
        ck_assert_uint_eq(fx->cap.last->n_pods, 1);
        ck_assert_ptr_nonnull(strstr(pod_text(fx->cap.last->pods[0]), "\"from\":\"b2\""));
        /* The loser's name is the holder's now: its deletion empties. */
        snprintf(path, sizeof(path), "%s/%s", fx->dir, b);
        ck_assert_int_eq(unlink(path), 0);
        expect_names(fx, "");
}

START_TEST(test_duplicate_name_first_file_wins)
{
        struct fixture fx;

        setup(&fx, "/m", 1);
        duplicates_in(&fx, "m");
        teardown(&fx);
}
END_TEST

/* The same with the source given a relative path: without a '/' (a file
 * is named by its whole path) and with one (by its name in the
 * directory). */
START_TEST(test_relative_paths)
{
        static const char *const paths[] = {"m", "w/m"};

        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
                struct fixture fx;
                char here[256];

                ck_assert_ptr_nonnull(getcwd(here, sizeof(here)));
                setup_at(&fx, paths[i], 1, true);
                duplicates_in(&fx, paths[i]);
                ck_assert_int_eq(chdir(here), 0);
                teardown(&fx);
        }
}
END_TEST

START_TEST(test_missing_directory_then_created)
{
        struct fixture fx;
        char path[256];

        setup(&fx, "/later", 0);
        file_source_start(fx.fs);
        expect_names(&fx, "");
        snprintf(path, sizeof(path), "%s/later", fx.dir);
        ck_assert_int_eq(mkdir(path, 0755), 0);
        pod_file(fx.dir, "later/a.yaml", "alpha");
        expect_names(&fx, "alpha-node1,");
        teardown(&fx);
}
END_TEST

START_TEST(test_directory_deleted_and_recreated)
{
        struct fixture fx;
        char cmd[256], path[256];

        setup(&fx, "/m", 1);
        pod_file(fx.dir, "m/a.yaml", "alpha");
        file_source_start(fx.fs);
        expect_names(&fx, "alpha-node1,");
        snprintf(cmd, sizeof(cmd), "rm -rf %s/m", fx.dir);
        ck_assert_int_eq(system(cmd), 0);
        expect_names(&fx, "");
        snprintf(path, sizeof(path), "%s/m", fx.dir);
        ck_assert_int_eq(mkdir(path, 0755), 0);
        pod_file(fx.dir, "m/b.yaml", "bravo");
        expect_names(&fx, "bravo-node1,");
        teardown(&fx);
}
END_TEST

START_TEST(test_single_file_path)
{
        struct fixture fx;
        char dir[64];

        setup(&fx, "/one.yaml", 0);
        strcpy(dir, fx.dir);
        pod_file(dir, "one.yaml", "solo");
        file_source_start(fx.fs);
        expect_names(&fx, "solo-node1,");
        teardown(&fx);
}
END_TEST

START_TEST(test_path_is_cleaned_for_uid_stability)
{
        struct fixture a, b;
        char uid[64];

        setup(&a, "/m", 1);
        pod_file(a.dir, "m/a.yaml", "alpha");
        file_source_start(a.fs);
        expect_names(&a, "alpha-node1,");
        snprintf(uid, sizeof(uid), "%s", pod_uid(a.cap.last->pods[0]));
        /* Same directory named with "//" and "/./" and a trailing slash. */
        {
                struct file_source_config cfg = {0};
                struct mux_channel *ch;
                struct buf err = BUF_INIT;
                char path[160];

                memset(&b, 0, sizeof(b));
                snprintf(path, sizeof(path), "%s//./m/", a.dir);
                ck_assert_int_eq(mux_new(a.loop, capture_merge, &b.cap, &b.mux), 0);
                ck_assert_int_eq(mux_channel(b.mux, "file", &ch), 0);
                cfg.path = path;
                cfg.node_name = "Node1";
                ck_assert_int_eq(file_source_new(a.loop, NULL, ch, &cfg, &b.fs, &err), 0);
                file_source_relist(b.fs);
                for (int i = 0; i < 100 && !b.cap.last; i++)
                        loop_run_once(a.loop, 10000);
                ck_assert_ptr_nonnull(b.cap.last);
                ck_assert_uint_eq(b.cap.last->n_pods, 1);
                ck_assert_str_eq(pod_uid(b.cap.last->pods[0]), uid);
                file_source_free(b.fs);
                mux_free(b.mux);
                pod_update_free(b.cap.last);
                buf_free(&err);
        }
        teardown(&a);
}
END_TEST


/* A burst of files: each is read once, the changes go as deltas of at
 * most FILE_SOURCE_BATCH pods per loop turn, and the state ends whole; an
 * unchanged re-read sends nothing; deleting them all empties it the same
 * way. */
START_TEST(test_burst_in_batches_of_deltas)
{
        enum { FILES = 2 * FILE_SOURCE_BATCH + 150 };
        struct fixture fx;
        char name[64], path[256];
        int sets, deltas;

        setup(&fx, "/m", 1);
        file_source_start(fx.fs);
        expect_names(&fx, "");
        sets = fx.cap.sets;
        for (int i = 0; i < FILES; i++) {
                snprintf(name, sizeof(name), "m/p%04d.yaml", i);
                snprintf(path, sizeof(path), "p%04d", i);
                pod_file(fx.dir, name, path);
        }
        for (int i = 0; i < 2000 && (!fx.cap.last || fx.cap.last->n_pods < FILES); i++)
                loop_run_once(fx.loop, 50000);
        ck_assert_uint_eq(fx.cap.last->n_pods, FILES);
        ck_assert_int_eq(fx.cap.sets, sets); /* no full SET for events */
        ck_assert_msg(fx.cap.max_delta <= FILE_SOURCE_BATCH, "a delta of %zu pods", fx.cap.max_delta);
        ck_assert_int_ge(fx.cap.deltas, 3);
        /* Touching a file without changing it sends nothing. */
        deltas = fx.cap.deltas;
        snprintf(path, sizeof(path), "%s/m/p0007.yaml", fx.dir);
        ck_assert_int_eq(utimes(path, NULL), 0);
        for (int i = 0; i < 20; i++)
                loop_run_once(fx.loop, 20000);
        ck_assert_int_eq(fx.cap.deltas, deltas);
        /* All gone at once. */
        fx.cap.max_delta = 0;
        for (int i = 0; i < FILES; i++) {
                snprintf(path, sizeof(path), "%s/m/p%04d.yaml", fx.dir, i);
                ck_assert_int_eq(unlink(path), 0);
        }
        for (int i = 0; i < 2000 && fx.cap.last->n_pods > 0; i++)
                loop_run_once(fx.loop, 50000);
        ck_assert_uint_eq(fx.cap.last->n_pods, 0);
        ck_assert_int_eq(fx.cap.sets, sets);
        ck_assert_msg(fx.cap.max_delta <= FILE_SOURCE_BATCH, "a delta of %zu pods", fx.cap.max_delta);
        teardown(&fx);
}
END_TEST


/* A relist of many files is read a batch per loop turn: the loop answers
 * in between; a file changed while it runs (after the relist read it)
 * comes in right after its SET; a relist asked for meanwhile starts over. */
START_TEST(test_relist_in_batches)
{
        enum { FILES = 2 * FILE_SOURCE_BATCH + 100 };
        struct fixture fx;
        char name[64], pod[64];

        setup(&fx, "/m", 1);
        for (int i = 0; i < FILES; i++) {
                snprintf(name, sizeof(name), "m/p%04d.yaml", i);
                snprintf(pod, sizeof(pod), "p%04d", i);
                pod_file(fx.dir, name, pod);
        }
        file_source_start(fx.fs);
        loop_run_once(fx.loop, 0);
        ck_assert_ptr_null(fx.cap.last); /* one batch read, no SET yet */
        /* Started over: still no SET after the next turn. */
        file_source_relist(fx.fs);
        loop_run_once(fx.loop, 0);
        ck_assert_ptr_null(fx.cap.last);
        /* p0000 was read already; it changes now. */
        write_file(fx.dir, "m/p0000.yaml",
                   "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p0000\n  labels: {edited: \"yes\"}\n"
                   "spec:\n  containers:\n  - name: c\n    image: busybox:1.36\n");
        for (int i = 0; i < 400 && (!fx.cap.last || fx.cap.deltas == 0); i++)
                loop_run_once(fx.loop, 50000);
        ck_assert_int_eq(fx.cap.sets, 1);
        ck_assert_uint_eq(fx.cap.last->n_pods, FILES);
        ck_assert_ptr_nonnull(strstr(pod_text(fx.cap.last->pods[0]), "\"edited\":\"yes\""));
        teardown(&fx);
}
END_TEST

/* The pod of name in the source's state as the merger was sent it. */
static struct pod *sent_pod(struct fixture *fx, const char *name)
{
        for (size_t i = 0; fx->cap.last && i < fx->cap.last->n_pods; i++)
                if (strcmp(pod_name(fx->cap.last->pods[i]), name) == 0)
                        return fx->cap.last->pods[i];
        return NULL;
}

/* A file read again unchanged, by an event or by a relist, keeps the pod
 * the source had (the one the merger stores: src/core/pod.h), so
 * the node holds one copy of it; an event on it sends nothing.  A change
 * brings the new pod. */
START_TEST(test_unchanged_rereads_keep_the_pod)
{
        struct fixture fx;
        struct pod *a, *b;
        int deltas, sets;

        setup(&fx, "/m", 1);
        pod_file(fx.dir, "m/a.yaml", "alpha");
        pod_file(fx.dir, "m/b.yaml", "bravo");
        file_source_start(fx.fs);
        expect_names(&fx, "alpha-node1,bravo-node1,");
        a = pod_ref(sent_pod(&fx, "alpha-node1"));
        b = pod_ref(sent_pod(&fx, "bravo-node1"));
        /* The same bytes again, then a new file to know the event was read. */
        deltas = fx.cap.deltas;
        pod_file(fx.dir, "m/a.yaml", "alpha");
        pod_file(fx.dir, "m/c.yaml", "charlie");
        expect_names(&fx, "alpha-node1,bravo-node1,charlie-node1,");
        ck_assert_int_eq(fx.cap.deltas, deltas + 1); /* c's alone */
        ck_assert_ptr_eq(sent_pod(&fx, "alpha-node1"), a);
        /* A relist reads every file again. */
        sets = fx.cap.sets;
        file_source_relist(fx.fs);
        for (int i = 0; i < 400 && fx.cap.sets == sets; i++)
                loop_run_once(fx.loop, 50000);
        ck_assert_int_eq(fx.cap.sets, sets + 1);
        expect_names(&fx, "alpha-node1,bravo-node1,charlie-node1,");
        ck_assert_ptr_eq(sent_pod(&fx, "alpha-node1"), a);
        ck_assert_ptr_eq(sent_pod(&fx, "bravo-node1"), b);
        /* A change is a new pod. */
        write_file(fx.dir, "m/a.yaml",
                   "apiVersion: v1\nkind: Pod\nmetadata:\n  name: alpha\n  labels: {edited: \"yes\"}\n"
                   "spec:\n  containers:\n  - name: c\n    image: busybox:1.36\n");
        for (int i = 0; i < 400 && sent_pod(&fx, "alpha-node1") == a; i++)
                loop_run_once(fx.loop, 50000);
        ck_assert_ptr_ne(sent_pod(&fx, "alpha-node1"), a);
        ck_assert_ptr_nonnull(strstr(pod_text(sent_pod(&fx, "alpha-node1")), "\"edited\":\"yes\""));
        ck_assert_ptr_eq(sent_pod(&fx, "bravo-node1"), b);
        pod_unref(a);
        pod_unref(b);
        teardown(&fx);
}
END_TEST

/* What was said about a bad file is forgotten when a listing no longer
 * finds it (with no event to say so: this source has no watch), so the
 * same error is reported again, at error level, when the file is back. */
START_TEST(test_relist_forgets_reports_of_gone_files)
{
        struct fixture fx;
        struct file_source_config cfg = {0};
        struct source_stats stats = {0};
        struct mux_channel *ch;
        struct buf err = BUF_INIT;
        char path[128], file[160];
        uint64_t parse;

        setup(&fx, "/m", 1);
        file_source_free(fx.fs); /* again, without a watch and with stats */
        snprintf(path, sizeof(path), "%s/m", fx.dir);
        ck_assert_int_eq(mux_channel(fx.mux, "file", &ch), 0);
        cfg.path = path;
        cfg.node_name = "Node1";
        cfg.period_usec = 3600ULL * 1000000;
        cfg.stats = &stats;
        ck_assert_int_eq(file_source_new(fx.loop, NULL, ch, &cfg, &fx.fs, &err), 0);
        buf_free(&err);
        write_file(fx.dir, "m/bad.yaml", "kind: Pod\n");
        file_source_start(fx.fs);
        expect_names(&fx, "");
        ck_assert_uint_eq(stats.parse_errors, 1);
        /* Relisted with the file unchanged: said once only. */
        file_source_relist(fx.fs);
        expect_names(&fx, "");
        ck_assert_uint_eq(stats.parse_errors, 1);
        /* Gone at a relist, back at the next: said again. */
        snprintf(file, sizeof(file), "%s/m/bad.yaml", fx.dir);
        ck_assert_int_eq(unlink(file), 0);
        file_source_relist(fx.fs);
        for (int i = 0; i < 20; i++)
                loop_run_once(fx.loop, 10000);
        parse = stats.parse_errors;
        write_file(fx.dir, "m/bad.yaml", "kind: Pod\n");
        file_source_relist(fx.fs);
        for (int i = 0; i < 20 && stats.parse_errors == parse; i++)
                loop_run_once(fx.loop, 10000);
        ck_assert_uint_eq(stats.parse_errors, parse + 1);
        teardown(&fx);
}
END_TEST


/* The directory moved away: its pods go, a new directory at the path is
 * watched (files in it arrive by their events, not only at a relist), and
 * files written into the moved directory are not taken for the path's. */
START_TEST(test_directory_moved_away)
{
        struct fixture fx;
        char from[256], to[256];

        setup(&fx, "/m", 1);
        pod_file(fx.dir, "m/a.yaml", "alpha");
        file_source_start(fx.fs);
        expect_names(&fx, "alpha-node1,");
        snprintf(from, sizeof(from), "%s/m", fx.dir);
        snprintf(to, sizeof(to), "%s/old", fx.dir);
        ck_assert_int_eq(rename(from, to), 0);
        expect_names(&fx, "");
        pod_file(fx.dir, "old/x.yaml", "stray");
        ck_assert_int_eq(mkdir(from, 0755), 0);
        pod_file(fx.dir, "m/b.yaml", "bravo");
        expect_names(&fx, "bravo-node1,");
        pod_file(fx.dir, "m/c.yaml", "charlie");
        expect_names(&fx, "bravo-node1,charlie-node1,");
        teardown(&fx);
}
END_TEST

/* A manifest named `name`, labelled from=`from`, with a pinned UID if
 * uid is not NULL. */
static void labelled_file(const char *dir, const char *file, const char *name, const char *from, const char *uid)
{
        char text[512];

        snprintf(text, sizeof(text),
                 "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n%s%s%s  labels: {from: %s}\n"
                 "spec:\n  containers:\n  - name: c\n    image: busybox:1.36\n",
                 name, uid ? "  uid: " : "", uid ? uid : "", uid ? "\n" : "", from);
        write_file(dir, file, text);
}

/* The source's state as "name=from," for each pod (the name without its
 * node suffix), sorted. */
static const char *state_of(struct fixture *fx, char *out, size_t size)
{
        out[0] = '\0';
        if (!fx->cap.last)
                return "(none)";
        for (size_t i = 0; i < fx->cap.last->n_pods; i++) {
                const struct pod *p = fx->cap.last->pods[i];
                const char *from = strstr(pod_text(p), "\"from\":\"");
                const char *suffix = strstr(pod_name(p), "-node1");
                int len = 0;

                from = from ? from + 8 : "";
                while (from[len] && from[len] != '"')
                        len++;
                snprintf(out + strlen(out), size - strlen(out), "%.*s=%.*s,",
                         suffix ? (int)(suffix - pod_name(p)) : (int)strlen(pod_name(p)), pod_name(p), len, from);
        }
        return out;
}

static void expect_state(struct fixture *fx, const char *want)
{
        expect_described(fx, state_of, want);
}

static void remove_file(struct fixture *fx, const char *name)
{
        char path[256];

        snprintf(path, sizeof(path), "%s/%s", fx->dir, name);
        ck_assert_int_eq(unlink(path), 0);
}

/*
 * The bookkeeping behind duplicates and shared UIDs, one event at a time:
 * several files naming one pod (the winner deleted, a loser deleted, a
 * loser renaming its pod), and pods sharing a pinned UID (one goes, one
 * changes, one takes over another's name).  A file that renames its pod
 * gives the old one up at once, to the next file defining it if any: the
 * state after each event is the one a relist would find, and no relist
 * runs until the end.
 */
START_TEST(test_duplicates_and_shared_uids)
{
        struct fixture fx;

        setup(&fx, "/m", 1);
        labelled_file(fx.dir, "m/a.yaml", "same", "a", NULL);
        labelled_file(fx.dir, "m/b.yaml", "same", "b", NULL);
        labelled_file(fx.dir, "m/c.yaml", "same", "c", NULL);
        labelled_file(fx.dir, "m/u1.yaml", "one", "u1", "shared");
        labelled_file(fx.dir, "m/u2.yaml", "two", "u2", "shared");
        file_source_start(fx.fs);
        expect_state(&fx, "one=u1,same=a,two=u2,");
        remove_file(&fx, "m/a.yaml");
        expect_state(&fx, "one=u1,same=b,two=u2,");
        /* b's pod is renamed: c, the next file defining same, takes it. */
        labelled_file(fx.dir, "m/b.yaml", "other", "b2", NULL);
        expect_state(&fx, "one=u1,other=b2,same=c,two=u2,");
        remove_file(&fx, "m/c.yaml");
        remove_file(&fx, "m/b.yaml");
        expect_state(&fx, "one=u1,two=u2,");
        remove_file(&fx, "m/u1.yaml");
        expect_state(&fx, "two=u2,");
        labelled_file(fx.dir, "m/u2.yaml", "two", "u2b", "shared");
        expect_state(&fx, "two=u2b,");
        labelled_file(fx.dir, "m/u3.yaml", "three", "u3", "shared");
        expect_state(&fx, "three=u3,two=u2b,");
        /* u3 now names two, which u2 (sorting first) keeps; three goes. */
        labelled_file(fx.dir, "m/u3.yaml", "two", "u3b", "shared");
        labelled_file(fx.dir, "m/d.yaml", "delta", "d", NULL);
        expect_state(&fx, "delta=d,two=u2b,");
        remove_file(&fx, "m/u2.yaml");
        expect_state(&fx, "delta=d,two=u3b,");
        remove_file(&fx, "m/u3.yaml");
        expect_state(&fx, "delta=d,");
        labelled_file(fx.dir, "m/e.yaml", "delta", "e", "shared");
        labelled_file(fx.dir, "m/f.yaml", "same", "f", "shared");
        expect_state(&fx, "delta=d,same=f,");
        /* A relist finds the same. */
        file_source_relist(fx.fs);
        expect_state(&fx, "delta=d,same=f,");
        remove_file(&fx, "m/d.yaml");
        expect_state(&fx, "delta=e,same=f,");
        remove_file(&fx, "m/e.yaml");
        remove_file(&fx, "m/f.yaml");
        expect_state(&fx, "");
        teardown(&fx);
}
END_TEST

/* ---- a file's pod changing identity, with no relist ------------------------- */

/* A manifest for pod ns/name (no namespace if ns is NULL), labelled
 * from=`from`, with a pinned UID if uid is not NULL. */
static void ident_file(struct fixture *fx, const char *file, const char *ns, const char *name, const char *from,
                       const char *uid)
{
        char text[512];

        snprintf(text, sizeof(text),
                 "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n%s%s%s%s%s%s  labels: {from: %s}\n"
                 "spec:\n  containers:\n  - name: c\n    image: busybox:1.36\n",
                 name, ns ? "  namespace: " : "", ns ? ns : "", ns ? "\n" : "", uid ? "  uid: " : "",
                 uid ? uid : "", uid ? "\n" : "", from);
        write_file(fx->dir, file, text);
}

static void move_file(struct fixture *fx, const char *from, const char *to)
{
        char a[256], b[256];

        snprintf(a, sizeof(a), "%s/%s", fx->dir, from);
        snprintf(b, sizeof(b), "%s/%s", fx->dir, to);
        ck_assert_int_eq(rename(a, b), 0);
}

/* "namespace/name=from@uid," per pod, with the node suffix cut and the
 * UID shown only when pinned ("pin-..."), unless full. */
static const char *ident_state(struct fixture *fx, char *out, size_t size, bool full)
{
        char names[1024];

        out[0] = '\0';
        if (!fx->cap.last)
                return "(none)";
        state_of(fx, names, sizeof(names));
        for (size_t i = 0, at = 0; i < fx->cap.last->n_pods; i++) {
                const struct pod *p = fx->cap.last->pods[i];
                const char *uid = pod_uid(p), *end = strchr(names + at, ',');
                bool show = full || strncmp(uid, "pin-", 4) == 0;

                snprintf(out + strlen(out), size - strlen(out), "%s/%.*s%s%s,", pod_namespace(p),
                         (int)(end - names - at), names + at, show ? "@" : "", show ? uid : "");
                at = (size_t)(end - names) + 1;
        }
        return out;
}

static const char *ident_short(struct fixture *fx, char *out, size_t size)
{
        return ident_state(fx, out, size, false);
}

/* Until the pods sent (SETs with their deltas folded in) read want; then
 * a relist, a full recomputation from the files, must find exactly the
 * same pods, UIDs included. */
static void expect_ident(struct fixture *fx, const char *want)
{
        char delta[2048], relisted[2048];
        int sets;

        expect_described(fx, ident_short, want);
        for (int i = 0; i < 5; i++)
                loop_run_once(fx->loop, 10000); /* nothing more is on its way */
        ident_state(fx, delta, sizeof(delta), true);
        ck_assert_str_eq(ident_short(fx, relisted, sizeof(relisted)), want);
        sets = fx->cap.sets;
        file_source_relist(fx->fs);
        for (int i = 0; i < 400 && fx->cap.sets == sets; i++)
                loop_run_once(fx->loop, 10000);
        ck_assert_int_gt(fx->cap.sets, sets);
        ck_assert_str_eq(ident_state(fx, relisted, sizeof(relisted), true), delta);
}

/*
 * Every way a file's pod can change identity, each applied by the events
 * alone (the relist period is an hour) and then checked against a relist:
 * a new name, a new namespace (also to none), both, a pinned UID that
 * stays or changes with a new name, a name handed over to the next file
 * defining it, a name taken from a file that sorts later, and a file
 * holding a name turning bad.
 */
START_TEST(test_identity_changes_without_relist)
{
        struct fixture fx;

        setup(&fx, "/m", 1);
        ident_file(&fx, "m/b.yaml", NULL, "keep", "b", NULL);
        ident_file(&fx, "m/m.yaml", NULL, "one", "m", NULL);
        file_source_start(fx.fs);
        expect_ident(&fx, "default/keep=b,default/one=m,");
        ident_file(&fx, "m/m.yaml", NULL, "two", "m2", NULL);
        expect_ident(&fx, "default/keep=b,default/two=m2,");
        ident_file(&fx, "m/m.yaml", "ns-b", "two", "m3", NULL);
        expect_ident(&fx, "default/keep=b,ns-b/two=m3,");
        ident_file(&fx, "m/m.yaml", NULL, "two", "m4", NULL);
        expect_ident(&fx, "default/keep=b,default/two=m4,");
        ident_file(&fx, "m/m.yaml", "ns-c", "three", "m5", NULL);
        expect_ident(&fx, "default/keep=b,ns-c/three=m5,");
        ident_file(&fx, "m/m.yaml", "ns-c", "three", "m6", "pin-1");
        expect_ident(&fx, "default/keep=b,ns-c/three=m6@pin-1,");
        ident_file(&fx, "m/m.yaml", "ns-c", "four", "m7", "pin-1");
        expect_ident(&fx, "default/keep=b,ns-c/four=m7@pin-1,");
        ident_file(&fx, "m/m.yaml", "ns-d", "five", "m8", "pin-2");
        expect_ident(&fx, "default/keep=b,ns-d/five=m8@pin-2,");
        ident_file(&fx, "m/m.yaml", "ns-d", "five", "m9", NULL);
        expect_ident(&fx, "default/keep=b,ns-d/five=m9,");
        /* c defines keep too; b keeps it, then hands it over. */
        ident_file(&fx, "m/c.yaml", NULL, "keep", "c", NULL);
        expect_ident(&fx, "default/keep=b,ns-d/five=m9,");
        ident_file(&fx, "m/b.yaml", NULL, "other", "b2", NULL);
        expect_ident(&fx, "default/keep=c,default/other=b2,ns-d/five=m9,");
        /* a sorts first and takes keep from c; then gives it back. */
        ident_file(&fx, "m/a.yaml", NULL, "keep", "a", NULL);
        expect_ident(&fx, "default/keep=a,default/other=b2,ns-d/five=m9,");
        ident_file(&fx, "m/a.yaml", "ns-a", "keep", "a2", NULL);
        expect_ident(&fx, "default/keep=c,default/other=b2,ns-a/keep=a2,ns-d/five=m9,");
        /* The file holding a name turns bad: its pod goes at once. */
        write_file(fx.dir, "m/c.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n");
        expect_ident(&fx, "default/other=b2,ns-a/keep=a2,ns-d/five=m9,");
        ident_file(&fx, "m/c.yaml", NULL, "keep", "c2", NULL);
        expect_ident(&fx, "default/keep=c2,default/other=b2,ns-a/keep=a2,ns-d/five=m9,");
        /* The holder c moves over g, whose event is queued first: g is
         * read while c's is still on its way, and must not take keep
         * from e, which sorts before it. */
        ident_file(&fx, "m/e.yaml", NULL, "keep", "e", NULL);
        expect_ident(&fx, "default/keep=c2,default/other=b2,ns-a/keep=a2,ns-d/five=m9,");
        ident_file(&fx, "m/g.yaml", "ns-g", "gee", "g", NULL);
        move_file(&fx, "m/c.yaml", "m/g.yaml");
        expect_ident(&fx, "default/keep=e,default/other=b2,ns-a/keep=a2,ns-d/five=m9,");
        teardown(&fx);
}
END_TEST

/* ---- records ------------------------------------------------------------------- */

struct listing {
        char *out;
        size_t size;
};

static int list_one(void *data, const struct file_record_view *v)
{
        struct listing *l = data;
        const char *slash = strrchr(v->path, '/');
        size_t len = strlen(l->out);

        snprintf(l->out + len, l->size - len, "%s=%s,", slash ? slash + 1 : v->path, file_record_state_name(v->state));
        return 0;
}

/* "name=state," of each record, in path order. */
static const char *records_of(struct fixture *fx, char *out, size_t size)
{
        struct listing l = {out, size};

        out[0] = '\0';
        ck_assert_int_eq(file_source_records(fx->fs, list_one, &l), 0);
        return out;
}

/* Drives the loop until the records read want. */
static void expect_records(struct fixture *fx, const char *want)
{
        char got[2048];

        for (int i = 0; i < 400; i++) {
                if (strcmp(records_of(fx, got, sizeof(got)), want) == 0)
                        return;
                loop_run_once(fx->loop, 20000);
        }
        ck_abort_msg("records: want \"%s\", have \"%s\"", want, got);
}

static int check_one(void *data, const struct file_record_view *v)
{
        struct fixture *fx = data;
        struct buf b = BUF_INIT;
        const char *told = strmap_get(fx->told, v->path);

        ck_assert_int_eq(file_record_render(v, &b), 0);
        ck_assert_msg(told && strcmp(told, b.data) == 0, "told %s, listed %s", told ? told : "nothing", b.data);
        buf_free(&b);
        return 0;
}

/* What the changes told adds up to the records as listed: a consumer of
 * the changes holds exactly the source's records. */
static void check_told(struct fixture *fx)
{
        ck_assert_int_eq(file_source_records(fx->fs, check_one, fx), 0);
        ck_assert_uint_eq(strmap_size(fx->told), file_source_record_count(fx->fs));
}

struct find {
        const char *name;
        json_object *rec;
};

static int find_one(void *data, const struct file_record_view *v)
{
        struct find *f = data;
        const char *slash = strrchr(v->path, '/');
        struct buf b = BUF_INIT;

        if (strcmp(slash ? slash + 1 : v->path, f->name) != 0)
                return 0;
        ck_assert_int_eq(file_record_render(v, &b), 0);
        f->rec = json_tokener_parse(b.data);
        buf_free(&b);
        return 0;
}

/* The record of the file called name, as its JSON object (put it). */
static json_object *record_of(struct fixture *fx, const char *name)
{
        struct find f = {name, NULL};

        ck_assert_int_eq(file_source_records(fx->fs, find_one, &f), 0);
        ck_assert_msg(f.rec != NULL, "no record of %s", name);
        return f.rec;
}

static const char *member(json_object *o, const char *key)
{
        json_object *v = NULL;

        return json_object_object_get_ex(o, key, &v) && v ? json_object_get_string(v) : NULL;
}

/* The digest text of a file's bytes. */
static void file_digest(struct fixture *fx, const char *name, char out[DIGEST_TEXT_MAX])
{
        char path[256], *data = NULL;
        uint8_t d[DIGEST_LEN];
        size_t len = 0;
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", fx->dir, name);
        f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        data = malloc(65536);
        len = fread(data, 1, 65536, f);
        fclose(f);
        ck_assert_int_eq(digest_sha256(data, len, d), 0);
        digest_text(d, out);
        free(data);
}

/*
 * Every state a file can be in, with what the record says: applied with
 * its digest, size, pod and UID; rejected with the words podmux validate
 * prints; a duplicate naming the file holding the pod; ignored, and why
 * (a dot file, a directory, not a regular file, a dangling link).
 */
START_TEST(test_records_every_state)
{
        char path[256], link[256], want[DIGEST_TEXT_MAX], *rejected;
        struct buf err = BUF_INIT;
        struct pod *p = NULL;
        json_object *r, *pods;
        struct fixture fx;

        setup(&fx, "/m", 1);
        pod_file(fx.dir, "m/a.yaml", "alpha");
        pod_file(fx.dir, "m/b.yaml", "alpha");
        write_file(fx.dir, "m/bad.yaml", "apiVersion: v1\nkind: Pod\nmetadata: [unclosed\n");
        pod_file(fx.dir, "m/.hidden.yaml", "hidden");
        snprintf(path, sizeof(path), "%s/m/sub", fx.dir);
        ck_assert_int_eq(mkdir(path, 0755), 0);
        snprintf(path, sizeof(path), "%s/m/fifo", fx.dir);
        ck_assert_int_eq(mkfifo(path, 0644), 0);
        snprintf(link, sizeof(link), "%s/m/link.yaml", fx.dir);
        ck_assert_int_eq(symlink("/nonexistent/podmux", link), 0);
        file_source_start(fx.fs);
        expect_names(&fx, "alpha-node1,");
        expect_records(&fx, ".hidden.yaml=ignored,a.yaml=applied,b.yaml=duplicate,bad.yaml=rejected,fifo=ignored,"
                            "link.yaml=ignored,sub=ignored,");
        check_told(&fx);

        r = record_of(&fx, "a.yaml");
        file_digest(&fx, "m/a.yaml", want);
        ck_assert_str_eq(member(r, "digest"), want);
        ck_assert_str_eq(member(r, "source"), "file");
        ck_assert_ptr_null(member(r, "reason"));
        ck_assert(json_object_object_get_ex(r, "pods", &pods));
        ck_assert_uint_eq(json_object_array_length(pods), 1);
        ck_assert_str_eq(member(json_object_array_get_idx(pods, 0), "name"), "alpha-node1");
        ck_assert_str_eq(member(json_object_array_get_idx(pods, 0), "uid"), pod_uid(fx.cap.last->pods[0]));
        ck_assert_ptr_nonnull(member(r, "mtime"));
        ck_assert_int_gt(atoi(member(r, "size")), 50);
        json_object_put(r);

        r = record_of(&fx, "b.yaml");
        snprintf(path, sizeof(path), "%s/m/a.yaml", fx.dir);
        ck_assert_ptr_nonnull(strstr(member(r, "reason"), path));
        ck_assert_ptr_nonnull(strstr(member(r, "reason"), "default/alpha-node1"));
        snprintf(path, sizeof(path), "%s/m/b.yaml", fx.dir);
        ck_assert_int_eq(static_pod_load(path, "Node1", &p, NULL, NULL, NULL, &err), 0);
        ck_assert(json_object_object_get_ex(r, "pods", &pods));
        ck_assert_str_eq(member(json_object_array_get_idx(pods, 0), "uid"), pod_uid(p));
        ck_assert_str_ne(pod_uid(p), pod_uid(fx.cap.last->pods[0]));
        ck_assert_ptr_null(member(r, "seq"));
        pod_unref(p);
        json_object_put(r);

        /* The words podmux validate prints: static_pod_load()'s. */
        snprintf(path, sizeof(path), "%s/m/bad.yaml", fx.dir);
        ck_assert_int_lt(static_pod_load(path, "Node1", &p, NULL, NULL, NULL, &err), 0);
        rejected = strdup(err.data);
        r = record_of(&fx, "bad.yaml");
        ck_assert_str_eq(member(r, "reason"), rejected);
        file_digest(&fx, "m/bad.yaml", want);
        ck_assert_str_eq(member(r, "digest"), want);
        json_object_put(r);
        free(rejected);

        r = record_of(&fx, ".hidden.yaml");
        ck_assert_str_eq(member(r, "reason"), STATIC_POD_DOT_REASON);
        ck_assert_ptr_null(member(r, "digest"));
        ck_assert_ptr_nonnull(member(r, "size"));
        json_object_put(r);
        r = record_of(&fx, "sub");
        ck_assert_str_eq(member(r, "reason"), "a directory (the file source does not recurse)");
        json_object_put(r);
        r = record_of(&fx, "fifo");
        ck_assert_str_eq(member(r, "reason"), "not a regular file");
        json_object_put(r);
        r = record_of(&fx, "link.yaml");
        ck_assert_str_eq(member(r, "reason"), "dangling symbolic link");
        json_object_put(r);

        /* The same after a relist; and events bring each change. */
        file_source_relist(fx.fs);
        expect_records(&fx, ".hidden.yaml=ignored,a.yaml=applied,b.yaml=duplicate,bad.yaml=rejected,fifo=ignored,"
                            "link.yaml=ignored,sub=ignored,");
        check_told(&fx);
        remove_file(&fx, "m/.hidden.yaml");
        remove_file(&fx, "m/a.yaml");
        pod_file(fx.dir, "m/bad.yaml", "fixed");
        expect_records(&fx, "b.yaml=applied,bad.yaml=applied,fifo=ignored,link.yaml=ignored,sub=ignored,");
        expect_names(&fx, "alpha-node1,fixed-node1,");
        check_told(&fx);
        buf_free(&err);
        teardown(&fx);
}
END_TEST

/*
 * Pending until merged: a record is pending from the event until the
 * broadcast that carries its pod (its seq) or, when none does, until its
 * send is merged; a newer version in flight is waited for; bytes that make
 * the same pod are applied at once, with the seq that carried it; a file
 * gone stays pending until its removal is merged, then is told gone.
 */
START_TEST(test_records_pending_until_merged)
{
        char want[DIGEST_TEXT_MAX];
        json_object *r;
        struct fixture fx;

        next_manual_mux = true;
        setup(&fx, "/m", 1);
        pod_file(fx.dir, "m/a.yaml", "alpha");
        file_source_start(fx.fs);
        expect_records(&fx, "a.yaml=pending,");
        check_told(&fx);
        /* Merged, no broadcast carried it: applied without a seq. */
        ck_assert_uint_eq(mux_drain(fx.mux), 1);
        expect_records(&fx, "a.yaml=applied,");
        check_told(&fx);
        fx.cap.carry_to = fx.fs;
        fx.cap.carry_seq = 500;
        labelled_file(fx.dir, "m/a.yaml", "alpha", "v2", NULL);
        expect_records(&fx, "a.yaml=pending,");
        r = record_of(&fx, "a.yaml");
        file_digest(&fx, "m/a.yaml", want);
        ck_assert_str_eq(member(r, "digest"), want);
        json_object_put(r);
        ck_assert_uint_eq(mux_drain(fx.mux), 1);
        r = record_of(&fx, "a.yaml");
        ck_assert_str_eq(member(r, "state"), "applied");
        ck_assert_str_eq(member(r, "seq"), "501");
        json_object_put(r);
        check_told(&fx);
        /* Other bytes, the same pod: applied at once, as carried. */
        write_file(fx.dir, "m/a.yaml",
                   "# a comment\napiVersion: v1\nkind: Pod\nmetadata:\n  name: alpha\n  labels: {from: v2}\n"
                   "spec:\n  containers:\n  - name: c\n    image: busybox:1.36\n");
        file_digest(&fx, "m/a.yaml", want);
        for (int i = 0; i < 400; i++) {
                const char *d;

                r = record_of(&fx, "a.yaml");
                d = member(r, "digest");
                if (strcmp(d, want) == 0)
                        break;
                json_object_put(r);
                r = NULL;
                loop_run_once(fx.loop, 20000);
        }
        ck_assert_ptr_nonnull(r);
        ck_assert_str_eq(member(r, "state"), "applied");
        ck_assert_str_eq(member(r, "seq"), "501");
        json_object_put(r);
        /* Two versions in flight: the first's broadcast does not do. */
        labelled_file(fx.dir, "m/a.yaml", "alpha", "v3", NULL);
        expect_records(&fx, "a.yaml=pending,");
        for (int i = 0; i < 20; i++)
                loop_run_once(fx.loop, 10000);
        labelled_file(fx.dir, "m/a.yaml", "alpha", "v4", NULL);
        file_digest(&fx, "m/a.yaml", want);
        for (int i = 0; i < 400; i++) {
                r = record_of(&fx, "a.yaml");
                if (strcmp(member(r, "digest"), want) == 0)
                        break;
                json_object_put(r);
                r = NULL;
                loop_run_once(fx.loop, 20000);
        }
        ck_assert_ptr_nonnull(r);
        json_object_put(r);
        ck_assert_uint_eq(mux_drain(fx.mux), 2);
        r = record_of(&fx, "a.yaml");
        ck_assert_str_eq(member(r, "state"), "applied");
        ck_assert_str_eq(member(r, "seq"), "503");
        json_object_put(r);
        check_told(&fx);
        /* Gone: pending (nothing read) until the removal is merged. */
        remove_file(&fx, "m/a.yaml");
        for (int i = 0; i < 400; i++) {
                r = record_of(&fx, "a.yaml");
                if (!member(r, "digest"))
                        break;
                json_object_put(r);
                r = NULL;
                loop_run_once(fx.loop, 20000);
        }
        ck_assert_ptr_nonnull(r);
        ck_assert_str_eq(member(r, "state"), "pending");
        json_object_put(r);
        check_told(&fx);
        ck_assert_uint_eq(mux_drain(fx.mux), 1);
        expect_records(&fx, "");
        check_told(&fx);
        expect_names(&fx, "");
        teardown(&fx);
}
END_TEST

/*
 * --static-pod-file-pattern: only matching names are read; another name
 * is ignored, or a duplicate when its pod is one a read file defines
 * (whichever sorts first), and follows that file as it comes and goes,
 * by events and by a relist alike.
 */
START_TEST(test_records_patterns)
{
        static const char *const pats[] = {"*.yaml", "*.json"};
        json_object *r;
        struct fixture fx;

        next_patterns = pats;
        next_n_patterns = 2;
        setup(&fx, "/m", 1);
        pod_file(fx.dir, "m/x.yaml", "ex");
        pod_file(fx.dir, "m/x.yaml~", "ex");
        pod_file(fx.dir, "m/a.bak", "ex");
        pod_file(fx.dir, "m/y.bak", "why");
        write_file(fx.dir, "m/z.txt", "not yaml: [");
        file_source_start(fx.fs);
        expect_names(&fx, "ex-node1,");
        expect_records(&fx, "a.bak=duplicate,x.yaml=applied,x.yaml~=duplicate,y.bak=ignored,z.txt=ignored,");
        r = record_of(&fx, "a.bak");
        ck_assert_ptr_nonnull(strstr(member(r, "reason"), "--static-pod-file-pattern"));
        ck_assert_ptr_nonnull(strstr(member(r, "reason"), "x.yaml\""));
        json_object_put(r);
        r = record_of(&fx, "y.bak");
        ck_assert_str_eq(member(r, "reason"), "does not match --static-pod-file-pattern");
        json_object_put(r);
        check_told(&fx);
        /* The holder goes: the copies are only left out now; it comes
         * back: they are its duplicates again. */
        remove_file(&fx, "m/x.yaml");
        expect_names(&fx, "");
        expect_records(&fx, "a.bak=ignored,x.yaml~=ignored,y.bak=ignored,z.txt=ignored,");
        check_told(&fx);
        pod_file(fx.dir, "m/x.json", "ex");
        expect_names(&fx, "ex-node1,");
        expect_records(&fx, "a.bak=duplicate,x.json=applied,x.yaml~=duplicate,y.bak=ignored,z.txt=ignored,");
        check_told(&fx);
        /* A left-out copy changes what it defines. */
        pod_file(fx.dir, "m/y.bak", "ex");
        pod_file(fx.dir, "m/a.bak", "other");
        expect_records(&fx, "a.bak=ignored,x.json=applied,x.yaml~=duplicate,y.bak=duplicate,z.txt=ignored,");
        check_told(&fx);
        file_source_relist(fx.fs);
        expect_records(&fx, "a.bak=ignored,x.json=applied,x.yaml~=duplicate,y.bak=duplicate,z.txt=ignored,");
        expect_names(&fx, "ex-node1,");
        check_told(&fx);
        teardown(&fx);
}
END_TEST

/* ---- allocation failures on duplicates and shared UIDs ------------------------- */

/* The files every sweep run starts from: three files naming one pod, two
 * pods sharing a pinned UID. */
static void sweep_files(struct fixture *fx)
{
        labelled_file(fx->dir, "m/a.yaml", "same", "a", NULL);
        labelled_file(fx->dir, "m/b.yaml", "same", "b", NULL);
        labelled_file(fx->dir, "m/c.yaml", "same", "c", NULL);
        labelled_file(fx->dir, "m/u1.yaml", "one", "u1", "shared");
        labelled_file(fx->dir, "m/u2.yaml", "two", "u2", "shared");
}

#define SWEEP_START "one=u1,same=a,two=u2,"

static void op_delete_winner(struct fixture *fx)
{
        remove_file(fx, "m/a.yaml");
}

static void op_rename_loser(struct fixture *fx)
{
        labelled_file(fx->dir, "m/b.yaml", "other", "b2", NULL);
}

static void op_rename_winner(struct fixture *fx)
{
        labelled_file(fx->dir, "m/a.yaml", "other", "a2", NULL);
}

static void op_break_winner(struct fixture *fx)
{
        write_file(fx->dir, "m/a.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n");
}

static void op_delete_shared(struct fixture *fx)
{
        remove_file(fx, "m/u1.yaml");
}

static void op_rename_shared(struct fixture *fx)
{
        labelled_file(fx->dir, "m/u1.yaml", "three", "u1b", "shared");
}

static void op_pin_winner(struct fixture *fx)
{
        labelled_file(fx->dir, "m/a.yaml", "same", "a2", "shared");
}

static void op_relist(struct fixture *fx)
{
        file_source_relist(fx->fs);
}

struct sweep_op {
        const char *what;
        void (*op)(struct fixture *fx);
        long stride;          /* every stride-th allocation fails in turn */
        const char *after;    /* the state the event (or relist) leaves */
        const char *relisted; /* the state a relist then finds */
        const char *records;  /* and the files' records then */
};

#define SWEEP_RECORDS "a.yaml=applied,b.yaml=duplicate,c.yaml=duplicate,u1.yaml=applied,u2.yaml=applied,"

static const struct sweep_op sweep_ops[] = {
        {"delete the winner", op_delete_winner, 1, "one=u1,same=b,two=u2,", "one=u1,same=b,two=u2,",
         "b.yaml=applied,c.yaml=duplicate,u1.yaml=applied,u2.yaml=applied,"},
        {"rename a loser's pod", op_rename_loser, 1, "one=u1,other=b2,same=a,two=u2,", "one=u1,other=b2,same=a,two=u2,",
         "a.yaml=applied,b.yaml=applied,c.yaml=duplicate,u1.yaml=applied,u2.yaml=applied,"},
        {"rename the winner's pod", op_rename_winner, 1, "one=u1,other=a2,same=b,two=u2,",
         "one=u1,other=a2,same=b,two=u2,",
         "a.yaml=applied,b.yaml=applied,c.yaml=duplicate,u1.yaml=applied,u2.yaml=applied,"},
        {"the winner turns bad", op_break_winner, 1, "one=u1,same=b,two=u2,", "one=u1,same=b,two=u2,",
         "a.yaml=rejected,b.yaml=applied,c.yaml=duplicate,u1.yaml=applied,u2.yaml=applied,"},
        {"delete a shared UID", op_delete_shared, 1, "same=a,two=u2,", "same=a,two=u2,",
         "a.yaml=applied,b.yaml=duplicate,c.yaml=duplicate,u2.yaml=applied,"},
        {"rename a shared UID's pod", op_rename_shared, 1, "same=a,three=u1b,two=u2,", "same=a,three=u1b,two=u2,",
         SWEEP_RECORDS},
        {"pin the winner's UID", op_pin_winner, 1, "one=u1,same=a2,two=u2,", "one=u1,same=a2,two=u2,", SWEEP_RECORDS},
        /* Five files read: about 1,100 allocations, mostly parsing, which
         * test_faults' incremental sweep fails one by one. */
        {"relist", op_relist, 5, SWEEP_START, SWEEP_START, SWEEP_RECORDS},
};

/* Runs the loop until a turn of 1 ms runs nothing.  A write queues its
 * inotify event before it returns, and what the source does about one
 * runs at once or from a timer due at once: by then all of it is done.
 * (A fixed wait of 30 ms here made the sweep's 3,700 runs last two
 * minutes.) */
static void drain(struct fixture *fx)
{
        for (int i = 0; i < 1000 && loop_run_once(fx->loop, 1000) > 0; i++)
                ;
}

/* Drives the loop until a SET or delta more than seen brings state want
 * (false if none does in about two seconds). */
static bool settle(struct fixture *fx, int seen, const char *want)
{
        char got[1024];

        for (int i = 0; i < 200; i++) {
                if (fx->cap.sets + fx->cap.deltas > seen && strcmp(state_of(fx, got, sizeof(got)), want) == 0)
                        return true;
                loop_run_once(fx->loop, 10000);
        }
        return false;
}

/*
 * One run: the files as they start, relisted; then op with the nth
 * allocation failing (and, persistent, all after it), until the change
 * arrives or the source says it failed; then a relist without faults.
 * What the source has sent by then adds up to the state after op, or,
 * if the fault was hit, maybe still the one before it, never a mix; and
 * the relist finds the files' state.
 * Returns whether the fault was hit.
 */
static bool sweep_run(struct fixture *fx, const struct sweep_op *op, long n, bool persist)
{
        uint64_t errors;
        char got[1024];
        bool hit;
        int seen;

        sweep_files(fx);
        seen = fx->cap.sets + fx->cap.deltas;
        file_source_relist(fx->fs);
        ck_assert_msg(settle(fx, seen, SWEEP_START), "%s %ld: no start: %s", op->what, n,
                      state_of(fx, got, sizeof(got)));
        drain(fx); /* the rewrites' events */
        seen = fx->cap.sets + fx->cap.deltas;
        errors = fx->stats.errors;
        failalloc_persist(persist);
        failalloc_arm(n);
        failalloc_hold();
        op->op(fx);
        failalloc_release();
        for (int i = 0; i < 200 && fx->stats.errors == errors; i++) {
                if (fx->cap.sets + fx->cap.deltas > seen && strcmp(state_of(fx, got, sizeof(got)), op->after) == 0)
                        break;
                loop_run_once(fx->loop, 10000);
        }
        hit = failalloc_failed();
        failalloc_arm(0);
        state_of(fx, got, sizeof(got));
        ck_assert_msg((hit && strcmp(got, SWEEP_START) == 0) || strcmp(got, op->after) == 0, "%s %ld%s: sent \"%s\"",
                      op->what, n, persist ? " (persistent)" : "", got);
        seen = fx->cap.sets + fx->cap.deltas;
        file_source_relist(fx->fs);
        ck_assert_msg(settle(fx, seen, op->relisted), "%s %ld%s: relisted \"%s\"", op->what, n,
                      persist ? " (persistent)" : "", state_of(fx, got, sizeof(got)));
        /* The records too, as their changes told them. */
        for (int i = 0; i < 200 && strcmp(records_of(fx, got, sizeof(got)), op->records) != 0; i++)
                loop_run_once(fx->loop, 10000);
        ck_assert_msg(strcmp(got, op->records) == 0, "%s %ld%s: records \"%s\"", op->what, n,
                      persist ? " (persistent)" : "", got);
        check_told(fx);
        return hit;
}

/* Every event on duplicates and shared UIDs (and a relist of them) with
 * each of its allocations failing in turn, once and from then on: the
 * source sends a whole state or nothing, finds the files again when
 * faults stop, and leaks nothing.  Under AddressSanitizer, each op runs
 * once without faults. */
START_TEST(test_duplicates_alloc_sweep)
{
        uint8_t d[DIGEST_LEN];
        struct fixture fx;
        long runs = 0;

        /* What the libraries allocate once and keep, before any count:
         * the C library's (failalloc_warm_up()), OpenSSL's configuration,
         * loaded on the first digest of a file's text (some 3,000 blocks,
         * counted as leaked when this test was the first of its process,
         * as under CK_FORK=yes), and whatever the first setup allocates
         * for good. */
        failalloc_warm_up();
        ck_assert_int_eq(digest_sha256("", 0, d), 0);
        setup(&fx, "/m", 1);
        teardown(&fx);
        for (size_t i = 0; i < sizeof(sweep_ops) / sizeof(sweep_ops[0]); i++) {
                for (int persist = 0; persist < 2; persist++) {
                        long live0 = failalloc_live();

                        setup(&fx, "/m", 1);
                        file_source_start(fx.fs);
                        expect_names(&fx, "");
                        for (long n = 1;; n += sweep_ops[i].stride, runs++)
                                if (!sweep_run(&fx, &sweep_ops[i], failalloc_enabled() ? n : 0, persist) ||
                                    !failalloc_enabled())
                                        break;
                        teardown(&fx);
                        ck_assert_msg(failalloc_live() == live0, "%s%s: %ld block(s) leaked", sweep_ops[i].what,
                                      persist ? " (persistent)" : "", failalloc_live() - live0);
                }
        }
        fprintf(stderr, "# file source: %ld allocation failure(s) survived\n", runs);
        ck_assert(!failalloc_enabled() || runs > 1000);
}
END_TEST

/* ---- read errors (doc/pod-config.md 6.8) ------------------------------------------ */

/* An event on name that keeps its inode (the fault is the inode's). */
static void touch_file(struct fixture *fx, const char *name)
{
        char path[256];

        snprintf(path, sizeof(path), "%s/%s", fx->dir, name);
        ck_assert_int_eq(chmod(path, 0600), 0);
        ck_assert_int_eq(chmod(path, 0644), 0);
}

static void fail_file(struct fixture *fx, const char *name, enum failsys_call call, int err)
{
        char path[256];

        snprintf(path, sizeof(path), "%s/%s", fx->dir, name);
        ck_assert_int_eq(failsys_file(path, call, err), 0);
}

/* The state of name's record, and its pod's UID ("-" none). */
static const char *rec_state(struct fixture *fx, const char *name, char *uid, size_t size)
{
        static char state[32];
        struct find f = {name, NULL};
        json_object *r, *pods = NULL;

        snprintf(uid, size, "-");
        ck_assert_int_eq(file_source_records(fx->fs, find_one, &f), 0);
        if (!(r = f.rec))
                return "none";
        snprintf(state, sizeof(state), "%s", member(r, "state"));
        if (json_object_object_get_ex(r, "pods", &pods) && json_object_array_length(pods) == 1)
                snprintf(uid, size, "%s", member(json_object_array_get_idx(pods, 0), "uid"));
        json_object_put(r);
        return state;
}

static void expect_rec_state(struct fixture *fx, const char *name, const char *want)
{
        char uid[300];

        for (int i = 0; i < 400; i++) {
                if (strcmp(rec_state(fx, name, uid, sizeof(uid)), want) == 0)
                        return;
                loop_run_once(fx->loop, 20000);
        }
        ck_abort_msg("%s: want %s, have %s", name, want, rec_state(fx, name, uid, sizeof(uid)));
}

/*
 * A file whose bytes cannot be read (open or read failing with EIO or
 * EACCES) keeps the pod it gave, on its event and in a relist; the record
 * says unreadable, the error is counted once however often it is retried,
 * and once readable the file gives the same pod (the same UID).  A file
 * unreadable at its first reading gives no pod until it can be read.
 */
START_TEST(test_unreadable_keeps_its_pod)
{
        static const struct {
                enum failsys_call call;
                int err;
        } faults[] = {{FAILSYS_OPEN, EIO}, {FAILSYS_OPEN, EACCES}, {FAILSYS_READ, EIO}, {FAILSYS_READ, EACCES}};

        if (!failalloc_enabled())
                return; /* nothing is interposed under the sanitizers */
        for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
                char uid0[300], uid[300];
                struct fixture fx;
                uint64_t errors;
                int sets;

                next_retry_usec = 20000;
                setup(&fx, "/m", 1);
                labelled_file(fx.dir, "m/a.yaml", "alpha", "a", NULL);
                labelled_file(fx.dir, "m/b.yaml", "bravo", "b", NULL);
                file_source_start(fx.fs);
                expect_state(&fx, "alpha=a,bravo=b,");
                expect_rec_state(&fx, "a.yaml", "applied");
                (void)rec_state(&fx, "a.yaml", uid0, sizeof(uid0));
                errors = fx.stats.errors;

                /* The watch path. */
                fail_file(&fx, "m/a.yaml", faults[i].call, faults[i].err);
                touch_file(&fx, "m/a.yaml");
                expect_rec_state(&fx, "a.yaml", "unreadable");
                ck_assert_str_eq(rec_state(&fx, "a.yaml", uid, sizeof(uid)), "unreadable");
                ck_assert_str_eq(uid, uid0);
                expect_state(&fx, "alpha=a,bravo=b,");
                ck_assert_uint_eq(fx.stats.errors, errors + 1);

                /* A relist with the same error, and the retries. */
                sets = fx.cap.sets;
                file_source_relist(fx.fs);
                for (int k = 0; k < 400 && fx.cap.sets == sets; k++)
                        loop_run_once(fx.loop, 20000);
                ck_assert_int_gt(fx.cap.sets, sets);
                expect_state(&fx, "alpha=a,bravo=b,");
                ck_assert_str_eq(rec_state(&fx, "a.yaml", uid, sizeof(uid)), "unreadable");
                for (int k = 0; k < 20; k++)
                        loop_run_once(fx.loop, 20000);
                ck_assert_uint_eq(fx.stats.errors, errors + 1);
                check_told(&fx);

                /* A new file unreadable at its first reading: no pod. */
                labelled_file(fx.dir, "m/c.yaml", "charlie", "c", NULL);
                fail_file(&fx, "m/c.yaml", faults[i].call, faults[i].err);
                expect_rec_state(&fx, "c.yaml", "unreadable");
                ck_assert_str_eq(rec_state(&fx, "c.yaml", uid, sizeof(uid)), "unreadable");
                ck_assert_str_eq(uid, "-");
                expect_state(&fx, "alpha=a,bravo=b,");

                /* Readable again: the same pod, and charlie at last. */
                failsys_files_clear();
                expect_rec_state(&fx, "a.yaml", "applied");
                expect_rec_state(&fx, "c.yaml", "applied");
                expect_state(&fx, "alpha=a,bravo=b,charlie=c,");
                ck_assert_str_eq(rec_state(&fx, "a.yaml", uid, sizeof(uid)), "applied");
                ck_assert_str_eq(uid, uid0);
                check_told(&fx);
                teardown(&fx);
        }
}
END_TEST

/*
 * Deltas stay exact with read errors: one file of the sweep's set (the
 * winner of a duplicate, a loser, a pod sharing a pinned UID) cannot be
 * read, then each sweep op happens; what the events left is what a
 * relist with the same error finds, and the unreadable file lost
 * nothing it had.
 */
START_TEST(test_unreadable_sweep)
{
        static const char *const victims[] = {"m/a.yaml", "m/b.yaml", "m/c.yaml", "m/u1.yaml"};
        static const enum failsys_call calls[] = {FAILSYS_OPEN, FAILSYS_READ};

        if (!failalloc_enabled())
                return;
        for (size_t v = 0; v < sizeof(victims) / sizeof(victims[0]); v++)
                for (size_t o = 0; o + 1 < sizeof(sweep_ops) / sizeof(sweep_ops[0]); o++)
                        for (size_t c = 0; c < 2; c++) {
                                char after[1024], relisted[1024];
                                struct fixture fx;
                                int seen;

                                setup(&fx, "/m", 1);
                                file_source_start(fx.fs);
                                expect_names(&fx, "");
                                sweep_files(&fx);
                                expect_state(&fx, SWEEP_START);
                                expect_records(&fx, SWEEP_RECORDS);
                                fail_file(&fx, victims[v], calls[c], EIO);
                                touch_file(&fx, victims[v]);
                                expect_rec_state(&fx, victims[v] + 2, "unreadable");
                                ck_assert_str_eq(state_of(&fx, after, sizeof(after)), SWEEP_START);
                                seen = fx.cap.sets + fx.cap.deltas;
                                sweep_ops[o].op(&fx);
                                for (int k = 0; k < 200 && fx.cap.sets + fx.cap.deltas == seen; k++)
                                        loop_run_once(fx.loop, 10000);
                                for (int k = 0; k < 10; k++)
                                        loop_run_once(fx.loop, 10000);
                                state_of(&fx, after, sizeof(after));
                                seen = fx.cap.sets;
                                file_source_relist(fx.fs);
                                for (int k = 0; k < 400 && fx.cap.sets == seen; k++)
                                        loop_run_once(fx.loop, 10000);
                                state_of(&fx, relisted, sizeof(relisted));
                                ck_assert_msg(strcmp(after, relisted) == 0,
                                              "%s unreadable (%s), %s: events left \"%s\", a relist finds \"%s\"",
                                              victims[v], c ? "read" : "open", sweep_ops[o].what, after, relisted);
                                check_told(&fx);
                                failsys_files_clear();
                                teardown(&fx);
                        }
}
END_TEST

UNIT_MAIN(test_unreadable_keeps_its_pod, test_unreadable_sweep, test_records_every_state,
          test_records_pending_until_merged, test_records_patterns, test_identity_changes_without_relist,
          test_relative_paths, test_unchanged_rereads_keep_the_pod, test_duplicates_alloc_sweep,
          test_duplicates_and_shared_uids, test_directory_moved_away, test_relist_forgets_reports_of_gone_files,
          test_relist_in_batches, test_burst_in_batches_of_deltas, test_relist_at_start_reads_sorted_visible_files,
          test_empty_directory_sends_empty_set, test_drop_merged_in_the_turn_of_its_event, test_watch_add_edit_delete, test_bad_file_is_left_out_and_others_stay,
          test_duplicate_name_first_file_wins, test_missing_directory_then_created,
          test_directory_deleted_and_recreated, test_single_file_path, test_path_is_cleaned_for_uid_stability)
