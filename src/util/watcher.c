/*
 * watcher — libinotifytools' events, read on the loop (see
 * src/util/watcher.h).
 *
 * The library's descriptor is one of the loop's, made non-blocking: when
 * it is readable, the watcher reads the kernel's event records itself.
 * libinotifytools 3.22's own read cannot be used on a loop: it waits in
 * select() even with a timeout of 0.  No thread and no pipe stand between
 * the kernel and the subscribers, so a drop costs one wake-up, the loop's
 * (doc/design.md, "Performance").
 * Watches are added and removed with inotify_add_watch()/inotify_rm_watch()
 * on that descriptor, so the wd a handle is filed under is the one the
 * kernel answered.  The library's add files each watch by path and keeps
 * the paths of watches whose directory was moved or deleted, so asking it
 * for "the wd of this path" can answer with another inode's wd (a
 * directory created where a watched one was renamed away would get the
 * old one's).
 *
 * A burst is handed over WATCHER_BATCH events a turn.  What was read but
 * not yet handed over does not make the descriptor readable, so a full
 * batch arms the more timer, which goes on next turn.  Past
 * what the kernel queues (fs.inotify.max_queued_events) it says
 * IN_Q_OVERFLOW, and every subscriber relists.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <inotifytools/inotifytools.h>

#include "util/episode.h"
#include "util/watcher.h"

/* After a failed read of the descriptor, reading waits this long. */
#define WATCHER_RETRY_USEC (1000u * 1000u)

/* Events every handle is told, whatever its mask. */
#define ALWAYS_TOLD (IN_IGNORED | IN_UNMOUNT | IN_Q_OVERFLOW)

/*
 * One subscriber's watch of one path.  inotify has one watch (one wd) per
 * inode and instance, so handles of different subscribers may share a
 * wd: the kernel's mask is the union of theirs (IN_MASK_ADD), each is
 * told only the events of its own mask, and the kernel watch is removed
 * with the last of them.  A subscriber has at most one handle per wd.
 */
struct watcher_watch {
        struct watcher *w;
        int wd;
        uint32_t mask;
        char *path;
        watcher_event_fn fn;
        void *data;
        struct watcher_watch *next;
};

struct watcher {
        struct loop *loop;
        struct loop_io *io;
        int ino_fd; /* libinotifytools' descriptor (the library owns it) */
        int initialized;
        unsigned long handed; /* events handed over so far */
        /* Events read, rd[off, len) not yet handed over.  Room for at
         * least one event with the longest name. */
        char rd[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
        size_t off, len;
        bool drained; /* the read that filled rd emptied the kernel's queue */

        struct watcher_watch *watches;
        /* The next handle a walk over watches visits: unlink_watch()
         * moves it on, so a callback may remove any handle mid-walk. */
        struct watcher_watch *cursor;
        struct loop_timer *more_timer; /* a full batch: go on next turn */
        struct episode failing;        /* reads of ino_fd that failed */
};

/* This subscriber's handle on wd, or NULL.  O(watches). */
static struct watcher_watch *find_own(struct watcher *w, int wd, watcher_event_fn fn, void *data)
{
        for (struct watcher_watch *ww = w->watches; ww; ww = ww->next)
                if (ww->wd == wd && ww->fn == fn && ww->data == data)
                        return ww;
        return NULL;
}

/* Any handle on wd, or NULL.  O(watches). */
static struct watcher_watch *find_wd(struct watcher *w, int wd)
{
        for (struct watcher_watch *ww = w->watches; ww; ww = ww->next)
                if (ww->wd == wd)
                        return ww;
        return NULL;
}

/* Unlinks and frees one handle; the kernel watch is the caller's
 * business.  A walk in progress (cursor) moves past it. */
static void unlink_watch(struct watcher *w, struct watcher_watch *ww)
{
        if (w->cursor == ww)
                w->cursor = ww->next;
        for (struct watcher_watch **p = &w->watches; *p; p = &(*p)->next) {
                if (*p == ww) {
                        *p = ww->next;
                        break;
                }
        }
        free(ww->path);
        free(ww);
}

/*
 * Tells every handle on wd of an event (those whose mask has it), then,
 * for IN_IGNORED (the kernel dropped the watch), forgets them.  A callback
 * may add or remove watches, any of them: the walk goes on from the
 * cursor, and handles added meanwhile (at the head) are not told of an
 * event that came before them.  O(watches).
 */
static void deliver(struct watcher *w, int wd, const char *name, uint32_t mask)
{
        struct watcher_watch *ww;

        for (ww = w->watches; ww; ww = w->cursor) {
                w->cursor = ww->next;
                if (ww->wd == wd && (mask & (ww->mask | ALWAYS_TOLD)))
                        ww->fn(ww->data, ww->path, name, mask);
        }
        w->cursor = NULL;
        if (mask & IN_IGNORED)
                while ((ww = find_wd(w, wd)))
                        unlink_watch(w, ww);
}

static void dispatch_all_overflow(struct watcher *w)
{
        struct watcher_watch *ww;

        for (ww = w->watches; ww; ww = w->cursor) {
                w->cursor = ww->next;
                ww->fn(ww->data, ww->path, "", IN_Q_OVERFLOW);
        }
        w->cursor = NULL;
}

/*
 * Hands at most WATCHER_BATCH events to their subscribers, then returns
 * to the loop; a full batch arms the more timer for the rest (what is
 * left in the buffer does not make the descriptor readable).  A failed
 * read: every subscriber relists, and reading waits WATCHER_RETRY_USEC,
 * so that a descriptor that keeps failing does not spin the loop.  The
 * failure is logged once per reason (a warning), and its end once.
 */
static void dispatch(struct watcher *w)
{
        unsigned n = 0;

        while (n < WATCHER_BATCH) {
                const struct inotify_event *ev;

                if (w->off == w->len) {
                        ssize_t got;

                        /* The last read left room for one more event of
                         * the longest name: it took all the kernel had.
                         * What came since makes the descriptor readable
                         * (level-triggered), so this turn need not ask
                         * again only to hear EAGAIN: a drop costs one
                         * read, not two. */
                        if (w->drained) {
                                w->drained = false;
                                return;
                        }
                        got = read(w->ino_fd, w->rd, sizeof(w->rd));
                        w->off = w->len = 0;
                        if (got < 0 && errno == EINTR)
                                continue;
                        if (got < 0 && errno == EAGAIN)
                                return;
                        if (got <= 0) {
                                const char *reason = got < 0 ? ERRNO_STR(errno) : "end of file";

                                episode_log(&w->failing, LOG_LEVEL_WARN, reason,
                                            "watcher: reading the inotify descriptor failed: %s; "
                                            "every watched path is read again, and the descriptor "
                                            "in %u s",
                                            reason, WATCHER_RETRY_USEC / 1000000u);
                                dispatch_all_overflow(w);
                                if (w->io && loop_io_modify(w->io, 0) == 0)
                                        loop_timer_arm(w->more_timer, WATCHER_RETRY_USEC);
                                return;
                        }
                        w->len = (size_t)got;
                        w->drained = w->len + sizeof(struct inotify_event) + NAME_MAX + 1 <= sizeof(w->rd);
                        if (episode_failing(&w->failing))
                                episode_clear(&w->failing,
                                              "watcher: reading the inotify descriptor works again "
                                              "after %u failed reads",
                                              w->failing.failures);
                }
                /* The kernel writes whole events, aligned for the type. */
                ev = (const struct inotify_event *)(void *)(w->rd + w->off);
                w->off += sizeof(*ev) + ev->len;
                w->handed++;
                n++;
                if (ev->wd < 0 || (ev->mask & IN_Q_OVERFLOW)) {
                        dispatch_all_overflow(w);
                        continue;
                }
                deliver(w, ev->wd, ev->len ? ev->name : "", ev->mask);
        }
        loop_timer_arm(w->more_timer, 0);
}

unsigned long watcher_handed(const struct watcher *w)
{
        return w->handed;
}

/* The rest of a full batch, or reading again after a failed read. */
static void on_more(struct loop_timer *t, void *data)
{
        struct watcher *w = data;

        (void)t;
        if (w->io && loop_io_modify(w->io, EPOLLIN) < 0) {
                loop_timer_arm(w->more_timer, WATCHER_RETRY_USEC);
                return;
        }
        dispatch(w);
}

/* While the more timer is armed, the rest of a batch (or a retry) is
 * its to read: a turn where both are ready hands over one batch. */
static void on_inotify(struct loop_io *io, int fd, uint32_t events, void *data)
{
        struct watcher *w = data;

        (void)io;
        (void)fd;
        (void)events;
        if (!loop_timer_armed(w->more_timer))
                dispatch(w);
}

/* The lowest descriptor number not in use: the one the next open takes. */
static int lowest_free_fd(void)
{
        int fd = 0;

        while (fcntl(fd, F_GETFD) >= 0)
                fd++;
        return fd;
}

/*
 * libinotifytools opens its instance with inotify_init(), which takes the
 * lowest free descriptor, and does not say which one it is.  probe is that
 * number, read just before.  A watch added to it and removed at once
 * proves it is an inotify descriptor (its IN_IGNORED names a wd no handle
 * has); the library's is the only one in the process.  -EIO if it is not
 * (the library was already initialised, or another thread opened a
 * descriptor in between).
 */
static int library_fd(struct watcher *w, int probe)
{
        int wd = inotify_add_watch(probe, "/", IN_DELETE_SELF);

        if (wd < 0)
                return errno == EINVAL || errno == EBADF ? -EIO : -errno;
        (void)inotify_rm_watch(probe, wd);
        w->ino_fd = probe;
        return 0;
}

/* The probe's IN_IGNORED, the only event of the new instance, is read
 * and dropped: no subscriber's, and not one to count. */
static void drop_probe_event(struct watcher *w)
{
        ssize_t got;

        do {
                got = read(w->ino_fd, w->rd, sizeof(w->rd));
        } while (got < 0 && errno == EINTR);
}

int watcher_new(struct loop *loop, struct watcher **ret_w)
{
        struct watcher *w = calloc(1, sizeof(*w));
        int probe, r;

        if (!w)
                return -ENOMEM;
        w->loop = loop;
        w->ino_fd = -1;
        probe = lowest_free_fd();
        if (!inotifytools_initialize()) {
                r = -inotifytools_error();
                if (r == 0)
                        r = -EIO;
                goto fail;
        }
        w->initialized = 1;
        r = library_fd(w, probe);
        if (r < 0)
                goto fail;
        /* Read on the loop: a read with nothing queued must not block. */
        if (fcntl(w->ino_fd, F_SETFL, fcntl(w->ino_fd, F_GETFL) | O_NONBLOCK) < 0) {
                r = -errno;
                goto fail;
        }
        drop_probe_event(w);
        r = loop_io_add(loop, w->ino_fd, EPOLLIN, on_inotify, w, &w->io);
        if (r < 0)
                goto fail;
        r = loop_timer_new(loop, on_more, w, &w->more_timer);
        if (r < 0)
                goto fail;
        *ret_w = w;
        return 0;
fail:
        watcher_free(w);
        return r;
}

void watcher_free(struct watcher *w)
{
        if (!w)
                return;
        while (w->watches)
                unlink_watch(w, w->watches);
        loop_io_free(w->io);
        loop_timer_free(w->more_timer);
        episode_free(&w->failing);
        /* Closes ino_fd, and with it every kernel watch. */
        if (w->initialized)
                inotifytools_cleanup();
        free(w);
}

/*
 * Everything that can fail (the handle and its path) is allocated before
 * the kernel is asked, so nothing has to be undone after it answered: an
 * inotify_rm_watch() could not be undone for another subscriber of the
 * same inode.
 */
int watcher_add(struct watcher *w, const char *path, uint32_t mask,
                watcher_event_fn fn, void *data,
                struct watcher_watch **ret_watch)
{
        struct watcher_watch *ww = calloc(1, sizeof(*ww)), *own;
        int wd;

        if (!ww)
                return -ENOMEM;
        ww->path = strdup(path);
        if (!ww->path) {
                free(ww);
                return -ENOMEM;
        }
        /* IN_MASK_ADD: another subscriber of this inode keeps its events. */
        wd = inotify_add_watch(w->ino_fd, path, mask | IN_MASK_ADD);
        if (wd < 0) {
                int r = -errno;

                free(ww->path);
                free(ww);
                return r;
        }
        own = find_own(w, wd, fn, data);
        if (own) {
                /* This subscriber already watches the inode, under the
                 * path it had then: the watch follows it here. */
                free(own->path);
                own->path = ww->path;
                own->mask |= mask;
                free(ww);
                if (ret_watch)
                        *ret_watch = own;
                return 1;
        }
        ww->w = w;
        ww->wd = wd;
        ww->mask = mask;
        ww->fn = fn;
        ww->data = data;
        ww->next = w->watches;
        w->watches = ww;
        if (ret_watch)
                *ret_watch = ww;
        return 0;
}

void watcher_remove(struct watcher_watch *ww)
{
        struct watcher *w;
        int wd;

        if (!ww)
                return;
        w = ww->w;
        wd = ww->wd;
        unlink_watch(w, ww);
        /* The kernel watch goes with the inode's last subscriber.  EINVAL:
         * the kernel dropped it already (its IN_IGNORED finds no handle). */
        if (!find_wd(w, wd))
                (void)inotify_rm_watch(w->ino_fd, wd);
}
