/*
 * test_watcher — the watcher and the events it hands to the loop
 * (src/util/watcher.h): every event arrives, in order per file, and
 * no loop turn hands over more than WATCHER_BATCH of them; a handle
 * belongs to its subscriber (a renamed directory's watch follows it, two
 * subscribers of one inode each keep theirs).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <errno.h>
#include <inotifytools/inotifytools.h>

#include "failalloc.h"
#include "log_capture.h"
#include "util/log.h"
#include "util/loop.h"
#include "util/watcher.h"
#include "unit.h"

struct counts {
        long created;
        long this_turn;
        long max_turn;
        long overflows;
};

static void on_event(void *data, const char *path, const char *name, uint32_t mask)
{
        struct counts *c = data;

        (void)path;
        if (mask & IN_Q_OVERFLOW) {
                c->overflows++;
                return;
        }
        if ((mask & IN_CREATE) && name[0])
                c->created++;
        c->this_turn++;
}

/* A burst far larger than one batch: every event arrives, and each loop
 * turn hands over at most WATCHER_BATCH, returning to epoll in between. */
START_TEST(test_burst_is_dispatched_in_batches)
{
        enum { FILES = 3 * WATCHER_BATCH + 100 };
        char dir[] = "/tmp/podmux-watch-XXXXXX", path[96], cmd[64];
        struct loop *loop = NULL;
        struct watcher *w = NULL;
        struct watcher_watch *ww = NULL;
        struct counts c = {0};
        int turns = 0, full = 0;

        ck_assert_ptr_nonnull(mkdtemp(dir));
        ck_assert_int_eq(loop_new(&loop), 0);
        ck_assert_int_eq(watcher_new(loop, &w), 0);
        ck_assert_int_eq(watcher_add(w, dir, IN_CREATE, on_event, &c, &ww), 0);
        for (int i = 0; i < FILES; i++) {
                int fd;

                snprintf(path, sizeof(path), "%s/f%05d", dir, i);
                fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
                ck_assert_int_ge(fd, 0);
                close(fd);
        }
        /* The whole burst is queued in the kernel before the loop looks,
         * so there is more than a batch to hand over.  Every event is
         * handed over, however many turns that takes. */
        while (c.created < FILES && turns < 10000) {
                c.this_turn = 0;
                loop_run_once(loop, 100 * 1000);
                if (c.this_turn > c.max_turn)
                        c.max_turn = c.this_turn;
                if (c.this_turn == WATCHER_BATCH)
                        full++;
                turns++;
        }
        ck_assert_int_eq(c.created, FILES);
        ck_assert_uint_eq(watcher_handed(w), FILES);
        ck_assert_int_eq(c.overflows, 0);
        ck_assert_msg(c.max_turn <= WATCHER_BATCH, "one turn handed over %ld events", c.max_turn);
        ck_assert_msg(full >= 2, "the burst never filled a batch (%d full turns)", full);
        watcher_remove(ww);
        watcher_free(w);
        loop_free(loop);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        ck_assert_int_eq(system(cmd), 0);
}
END_TEST


/* ---- handles: who owns them, what they are told -------------------------- */

#define MAX_SEEN 64

struct seen {
        int n;
        char what[MAX_SEEN][160]; /* "path|name|CREATE" */
        struct watcher_watch *remove_on_event; /* removed by the callback */
};

static void on_seen(void *data, const char *path, const char *name, uint32_t mask)
{
        struct seen *s = data;

        if (s->n < MAX_SEEN)
                snprintf(s->what[s->n++], sizeof(s->what[0]), "%s|%s|%s%s%s", path, name,
                         mask & IN_CREATE ? "CREATE" : "", mask & IN_DELETE ? "DELETE" : "",
                         mask & IN_IGNORED ? "IGNORED" : "");
        if (s->remove_on_event) {
                watcher_remove(s->remove_on_event);
                s->remove_on_event = NULL;
        }
}

static int seen_has(const struct seen *s, const char *path, const char *name, const char *op)
{
        char want[160];

        snprintf(want, sizeof(want), "%s|%s|%s", path, name, op);
        for (int i = 0; i < s->n; i++)
                if (strcmp(s->what[i], want) == 0)
                        return 1;
        return 0;
}

static const char *seen_all(const struct seen *s)
{
        static char out[MAX_SEEN * 162];

        out[0] = '\0';
        for (int i = 0; i < s->n; i++)
                snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s", i ? "; " : "", s->what[i]);
        return s->n ? out : "(none)";
}

/* Runs the loop until cond, at most about 10 s (a bound, not a wait). */
#define TURN_UNTIL(loop, cond)                                                  \
        do {                                                                    \
                for (int t_ = 0; t_ < 100 && !(cond); t_++)                     \
                        loop_run_once((loop), 100 * 1000);                      \
        } while (0)

static void touch(const char *dir, const char *name)
{
        char p[256];
        int fd;

        snprintf(p, sizeof(p), "%s/%s", dir, name);
        fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        ck_assert_msg(fd >= 0, "create %s: %m", p);
        close(fd);
}

struct tmp {
        char root[32];
        char a[64], b[64];
        struct loop *loop;
        struct watcher *w;
};

static void tmp_init(struct tmp *t)
{
        memcpy(t->root, "/tmp/podmux-watch-XXXXXX", sizeof("/tmp/podmux-watch-XXXXXX"));
        ck_assert_ptr_nonnull(mkdtemp(t->root));
        snprintf(t->a, sizeof(t->a), "%s/a", t->root);
        snprintf(t->b, sizeof(t->b), "%s/b", t->root);
        ck_assert_int_eq(mkdir(t->a, 0755), 0);
        ck_assert_int_eq(loop_new(&t->loop), 0);
        ck_assert_int_eq(watcher_new(t->loop, &t->w), 0);
}

/* tmp_init(), and a handle on a's IN_CREATE counting into c. */
static struct watcher_watch *tmp_watching(struct tmp *t, struct counts *c)
{
        struct watcher_watch *h = NULL;

        tmp_init(t);
        ck_assert_int_eq(watcher_add(t->w, t->a, IN_CREATE, on_event, c, &h), 0);
        return h;
}

static void tmp_done(struct tmp *t)
{
        char cmd[64];

        watcher_free(t->w);
        loop_free(t->loop);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", t->root);
        ck_assert_int_eq(system(cmd), 0);
}

/* A directory renamed and watched again by the same subscriber: inotify
 * answers with the same watch, and the handle follows it (same handle, 1,
 * events name the new path), so its owner's reference stays good.  A new
 * directory made under the old name is a new watch with a handle of its
 * own, and is told of its own events. */
START_TEST(test_renamed_directory_watch_follows)
{
        struct tmp t;
        struct seen s = {0};
        struct watcher_watch *h1 = NULL, *h2 = NULL, *h3 = NULL;

        tmp_init(&t);
        ck_assert_int_eq(watcher_add(t.w, t.a, IN_CREATE, on_seen, &s, &h1), 0);
        ck_assert_int_eq(rename(t.a, t.b), 0);
        ck_assert_int_eq(watcher_add(t.w, t.b, IN_CREATE, on_seen, &s, &h2), 1);
        ck_assert_ptr_eq(h2, h1);
        touch(t.b, "f1");
        TURN_UNTIL(t.loop, seen_has(&s, t.b, "f1", "CREATE"));
        ck_assert_msg(seen_has(&s, t.b, "f1", "CREATE"), "events: %s", seen_all(&s));
        /* The old name, now a new directory. */
        ck_assert_int_eq(mkdir(t.a, 0755), 0);
        ck_assert_int_eq(watcher_add(t.w, t.a, IN_CREATE, on_seen, &s, &h3), 0);
        ck_assert_ptr_ne(h3, h1);
        touch(t.a, "f2");
        touch(t.b, "f3");
        TURN_UNTIL(t.loop, seen_has(&s, t.a, "f2", "CREATE") && seen_has(&s, t.b, "f3", "CREATE"));
        ck_assert_msg(seen_has(&s, t.a, "f2", "CREATE") && seen_has(&s, t.b, "f3", "CREATE"),
                      "events: %s", seen_all(&s));
        ck_assert_msg(s.n == 3, "events told twice or misnamed: %s", seen_all(&s));
        /* Both handles are still the owner's to remove. */
        watcher_remove(h1);
        watcher_remove(h3);
        tmp_done(&t);
}
END_TEST

/* Two subscribers of one inode: each keeps its handle and is told only
 * the events of its own mask; the kernel watch stays until the last goes. */
START_TEST(test_two_subscribers_of_one_inode)
{
        struct tmp t;
        struct seen x = {0}, y = {0};
        struct watcher_watch *hx = NULL, *hy = NULL;
        char p[96];

        tmp_init(&t);
        ck_assert_int_eq(watcher_add(t.w, t.a, IN_CREATE, on_seen, &x, &hx), 0);
        ck_assert_int_eq(watcher_add(t.w, t.a, IN_DELETE, on_seen, &y, &hy), 0);
        ck_assert_ptr_ne(hx, hy);
        touch(t.a, "f");
        snprintf(p, sizeof(p), "%s/f", t.a);
        ck_assert_int_eq(unlink(p), 0);
        TURN_UNTIL(t.loop, x.n >= 1 && y.n >= 1);
        ck_assert_msg(x.n == 1 && seen_has(&x, t.a, "f", "CREATE"), "x: %s", seen_all(&x));
        ck_assert_msg(y.n == 1 && seen_has(&y, t.a, "f", "DELETE"), "y: %s", seen_all(&y));
        /* x goes; y is still told. */
        watcher_remove(hx);
        touch(t.a, "g");
        snprintf(p, sizeof(p), "%s/g", t.a);
        ck_assert_int_eq(unlink(p), 0);
        TURN_UNTIL(t.loop, y.n >= 2);
        ck_assert_msg(y.n == 2 && seen_has(&y, t.a, "g", "DELETE"), "y: %s", seen_all(&y));
        ck_assert_int_eq(x.n, 1);
        watcher_remove(hy);
        tmp_done(&t);
}
END_TEST

/* A callback may remove any handle, also one that shares the event and
 * has not been told yet: it is not told, and nothing is touched after. */
START_TEST(test_callback_removes_another_handle)
{
        struct tmp t;
        struct seen x = {0}, y = {0};
        struct watcher_watch *hx = NULL, *hy = NULL;

        tmp_init(&t);
        ck_assert_int_eq(watcher_add(t.w, t.a, IN_CREATE, on_seen, &x, &hx), 0);
        ck_assert_int_eq(watcher_add(t.w, t.a, IN_CREATE, on_seen, &y, &hy), 0);
        /* Whichever is told first removes the other. */
        x.remove_on_event = hy;
        y.remove_on_event = hx;
        touch(t.a, "f");
        TURN_UNTIL(t.loop, x.n + y.n >= 1);
        ck_assert_msg(x.n + y.n == 1, "x: %s; y: %s", seen_all(&x), seen_all(&y));
        watcher_remove(x.n ? hx : hy);
        tmp_done(&t);
}
END_TEST

/* Errors change nothing: a missing path, and the allocations (the handle,
 * its path) made before the kernel is asked. */
START_TEST(test_add_errors_change_nothing)
{
        struct tmp t;
        struct seen s = {0};
        struct watcher_watch *h = NULL, *h1 = NULL;
        char missing[96];

        tmp_init(&t);
        snprintf(missing, sizeof(missing), "%s/missing", t.root);
        ck_assert_int_eq(watcher_add(t.w, missing, IN_CREATE, on_seen, &s, &h), -ENOENT);
        ck_assert_ptr_null(h);
        if (failalloc_enabled()) {
                for (long n = 1; n <= 2; n++) {
                        failalloc_arm(n);
                        ck_assert_int_eq(watcher_add(t.w, t.a, IN_CREATE, on_seen, &s, &h), -ENOMEM);
                        ck_assert(failalloc_failed());
                        failalloc_arm(0);
                        ck_assert_ptr_null(h);
                }
                /* The follow step allocates nothing after the kernel
                 * answered: a failed re-add leaves the handle as it was. */
                ck_assert_int_eq(watcher_add(t.w, t.a, IN_CREATE, on_seen, &s, &h1), 0);
                ck_assert_int_eq(rename(t.a, t.b), 0);
                for (long n = 1; n <= 2; n++) {
                        failalloc_arm(n);
                        ck_assert_int_eq(watcher_add(t.w, t.b, IN_CREATE, on_seen, &s, &h), -ENOMEM);
                        failalloc_arm(0);
                }
                touch(t.b, "f");
                TURN_UNTIL(t.loop, s.n >= 1);
                ck_assert_msg(s.n == 1 && seen_has(&s, t.a, "f", "CREATE"), "events: %s", seen_all(&s));
                ck_assert_int_eq(watcher_add(t.w, t.b, IN_CREATE, on_seen, &s, &h), 1);
                ck_assert_ptr_eq(h, h1);
                watcher_remove(h1);
        }
        tmp_done(&t);
}
END_TEST

/* A failed read of the inotify descriptor: every subscriber is told to
 * relist (IN_Q_OVERFLOW) once, reading pauses instead of spinning, and
 * the event the read missed is still handed over afterwards.  The log
 * (at the default level) says the failure with its reason once, and
 * that it is over once. */
START_TEST(test_failed_read_relists_then_reads_on)
{
        struct tmp t;
        struct counts c = {0};
        struct watcher_watch *h = NULL;
        struct log_capture cap;
        char text[4096];

        /* Under the sanitizers nothing is interposed (failalloc.h). */
        if (!failalloc_enabled())
                return;
        h = tmp_watching(&t, &c);
        touch(t.a, "f");
        log_setup(LOG_LEVEL_INFO, LOG_FORMAT_TEXT);
        log_capture_start(&cap);
        failsys_arm(FAILSYS_READ, 1, EIO);
        loop_run_once(t.loop, 100 * 1000);
        ck_assert(failsys_failed(FAILSYS_READ));
        failsys_arm(FAILSYS_READ, 0, 0);
        ck_assert_int_eq(c.overflows, 1);
        ck_assert_int_eq(c.created, 0);
        /* Paused: the event waiting in the kernel does not wake the loop
         * again before the retry. */
        loop_run_once(t.loop, 0);
        ck_assert_int_eq(c.overflows, 1);
        ck_assert_int_eq(c.created, 0);
        TURN_UNTIL(t.loop, c.created == 1);
        log_capture_end(&cap, text, sizeof(text));
        ck_assert_int_eq(c.created, 1);
        ck_assert_int_eq(c.overflows, 1);
        ck_assert_msg(log_capture_count(text, "warn  watcher: reading the inotify descriptor failed: "
                                              "Input/output error; every watched path is read again") == 1,
                      "%s", text);
        ck_assert_msg(log_capture_count(text, "info  watcher: reading the inotify descriptor works again "
                                              "after 1 failed reads\n") == 1,
                      "%s", text);
        ck_assert_int_eq(log_capture_count(text, "\n"), 2);
        watcher_remove(h);
        tmp_done(&t);
}
END_TEST

/* The pause after a failed read cannot be set up (epoll_ctl fails):
 * reading goes on at the next turn instead, and nothing is lost.  The
 * resume after the pause fails: it is tried again a pause later. */
START_TEST(test_failed_read_pause_and_resume_fail)
{
        struct tmp t;
        struct counts c = {0};
        struct watcher_watch *h = NULL;

        if (!failalloc_enabled())
                return;
        h = tmp_watching(&t, &c);
        touch(t.a, "f");
        failsys_arm(FAILSYS_READ, 1, EIO);
        failsys_arm(FAILSYS_EPOLL_CTL, 1, ENOMEM);
        loop_run_once(t.loop, 100 * 1000);
        ck_assert(failsys_failed(FAILSYS_READ));
        ck_assert(failsys_failed(FAILSYS_EPOLL_CTL));
        failsys_arm(FAILSYS_READ, 0, 0);
        failsys_arm(FAILSYS_EPOLL_CTL, 0, 0);
        ck_assert_int_eq(c.overflows, 1);
        loop_run_once(t.loop, 100 * 1000);
        ck_assert_int_eq(c.created, 1);

        touch(t.a, "g");
        failsys_arm(FAILSYS_READ, 1, EIO);
        loop_run_once(t.loop, 100 * 1000);
        failsys_arm(FAILSYS_READ, 0, 0);
        ck_assert_int_eq(c.overflows, 2);
        failsys_arm(FAILSYS_EPOLL_CTL, 1, ENOMEM);
        TURN_UNTIL(t.loop, failsys_failed(FAILSYS_EPOLL_CTL));
        ck_assert(failsys_failed(FAILSYS_EPOLL_CTL));
        failsys_arm(FAILSYS_EPOLL_CTL, 0, 0);
        ck_assert_int_eq(c.created, 1);
        TURN_UNTIL(t.loop, c.created == 2);
        ck_assert_int_eq(c.created, 2);
        ck_assert_int_eq(c.overflows, 2);
        watcher_remove(h);
        tmp_done(&t);
}
END_TEST

/* A read that took everything the kernel had is not followed by one
 * that hears EAGAIN: a drop costs one read() of the descriptor.  Events
 * that come after it wake the loop again (the descriptor is
 * level-triggered), and none is lost, one at a time or many. */
START_TEST(test_one_read_per_wake)
{
        struct tmp t;
        struct counts c = {0};
        struct watcher_watch *h = NULL;

        if (!failalloc_enabled())
                return;
        h = tmp_watching(&t, &c);
        for (long k = 1; k <= 3; k++) {
                char name[16];

                snprintf(name, sizeof(name), "f%ld", k);
                touch(t.a, name);
                failsys_arm(FAILSYS_READ, 1000, EIO); /* counts, fails nothing */
                loop_run_once(t.loop, 1000 * 1000);
                ck_assert_int_eq(failsys_count(FAILSYS_READ), 1);
                failsys_arm(FAILSYS_READ, 0, 0);
                ck_assert_int_eq(c.created, k);
        }
        /* Many at once: still every one, whatever the reads. */
        for (int k = 0; k < 300; k++) {
                char name[16];

                snprintf(name, sizeof(name), "g%d", k);
                touch(t.a, name);
        }
        TURN_UNTIL(t.loop, c.created == 303);
        ck_assert_int_eq(c.created, 303);
        ck_assert_int_eq(c.overflows, 0);
        watcher_remove(h);
        tmp_done(&t);
}
END_TEST

/* The library's descriptor cannot be told apart (here: the library was
 * initialised already, so no new descriptor appears): -EIO, no watcher. */
START_TEST(test_library_descriptor_not_found)
{
        struct loop *loop = NULL;
        struct watcher *w = NULL;

        ck_assert_int_eq(loop_new(&loop), 0);
        ck_assert(inotifytools_initialize());
        ck_assert_int_eq(watcher_new(loop, &w), -EIO);
        ck_assert_ptr_null(w);
        inotifytools_cleanup();
        /* ... and a watcher works again afterwards. */
        ck_assert_int_eq(watcher_new(loop, &w), 0);
        watcher_free(w);
        loop_free(loop);
}
END_TEST

UNIT_MAIN(test_burst_is_dispatched_in_batches, test_renamed_directory_watch_follows, test_two_subscribers_of_one_inode,
          test_callback_removes_another_handle, test_add_errors_change_nothing, test_failed_read_relists_then_reads_on,
          test_failed_read_pause_and_resume_fail, test_one_read_per_wake, test_library_descriptor_not_found)
