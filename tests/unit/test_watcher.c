/*
 * test_watcher — the watcher thread and the events it hands to the loop
 * (include/podmux/watcher.h): every event arrives, in order per file, and
 * no loop turn hands over more than WATCHER_BATCH of them.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "podmux/loop.h"
#include "podmux/watcher.h"
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
        /* Let the thread forward the burst before the loop looks (not a
         * timing assertion: the batches are checked whatever arrived). */
        usleep(300 * 1000);
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

UNIT_MAIN(test_burst_is_dispatched_in_batches)
