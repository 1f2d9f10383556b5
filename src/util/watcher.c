/*
 * watcher — the thread that owns libinotifytools (see
 * src/util/watcher.h).
 *
 * Threads: the watcher thread only reads events, blocked in
 * inotifytools_next_event(-1).  Watches are added and removed by the loop
 * thread with inotify_add_watch()/inotify_rm_watch() on the library's own
 * descriptor, so the wd a handle is filed under is the one the kernel
 * answered.  The library's add files each watch by path and keeps the
 * paths of watches whose directory was moved or deleted, so asking it for
 * "the wd of this path" can answer with another inode's wd (a directory
 * created where a watched one was renamed away would get the old one's).
 * The thread is woken to stop by a write to a private unlinked file it
 * watches, so the stop is never missed.
 *
 * Events travel as records {wd, mask, name length, name} through a
 * non-blocking pipe.  If the pipe is full the thread drops the event and
 * raises an overflow flag, which the loop turns into an IN_Q_OVERFLOW for
 * every subscriber (they relist) — the same contract as the kernel's own
 * queue overflow, and no way for a slow loop to deadlock the thread.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pipe2, mkostemp, F_SETPIPE_SZ */
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <inotifytools/inotifytools.h>

#include "util/buf.h"
#include "util/watcher.h"

/* Bytes read from the pipe ahead of what was dispatched. */
#define WATCHER_BUFFER (64u * 1024u)

enum req_kind { REQ_NONE, REQ_STOP };

/* Events every handle is told, whatever its mask. */
#define ALWAYS_TOLD (IN_IGNORED | IN_UNMOUNT | IN_Q_OVERFLOW)

struct record {
        int32_t wd;
        uint32_t mask;
        uint32_t len;
};

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
        int pipe_rd, pipe_wr;
        int ino_fd; /* libinotifytools' descriptor (the library owns it) */
        int wake_fd;
        int wake_wd;
        pthread_t thread;
        int thread_started;
        atomic_int overflowed;
        atomic_ulong forwarded; /* records the thread has written */

        pthread_mutex_t mu;
        pthread_cond_t cv;
        enum req_kind req;
        int req_done;

        struct watcher_watch *watches; /* loop thread only */
        /* The next handle a walk over watches visits: unlink_watch()
         * moves it on, so a callback may remove any handle mid-walk. */
        struct watcher_watch *cursor;
        struct buf in;                 /* records read, not yet dispatched */
        struct loop_timer *more_timer; /* dispatches what is left in `in` */
        int dispatching;
};

/* ---- watcher thread ---------------------------------------------------------- */

static void thread_forward(struct watcher *w, int wd, uint32_t mask,
                           const char *name)
{
        char msg[sizeof(struct record) + NAME_MAX + 1];
        struct record rec;
        size_t nlen = name ? strnlen(name, NAME_MAX) : 0;
        ssize_t n;

        rec.wd = wd;
        rec.mask = mask;
        rec.len = (uint32_t)nlen;
        memcpy(msg, &rec, sizeof(rec));
        if (nlen)
                memcpy(msg + sizeof(rec), name, nlen);
        /* Records are at most PIPE_BUF bytes, so each write is atomic:
         * either the whole record or nothing (EAGAIN). */
        do {
                n = write(w->pipe_wr, msg, sizeof(rec) + nlen);
        } while (n < 0 && errno == EINTR);
        if (n < 0)
                atomic_store(&w->overflowed, 1);
        else
                atomic_fetch_add(&w->forwarded, 1);
}

/* Returns 1 when a stop was asked: decided under the same lock that
 * acknowledges it. */
static int thread_handle_request(struct watcher *w)
{
        int stop = 0;

        pthread_mutex_lock(&w->mu);
        if (!w->req_done && w->req == REQ_STOP) {
                stop = 1;
                w->req_done = 1;
                pthread_cond_signal(&w->cv);
        }
        pthread_mutex_unlock(&w->mu);
        return stop;
}

static void *thread_main(void *arg)
{
        struct watcher *w = arg;

        for (;;) {
                struct inotify_event *ev = inotifytools_next_event(-1);

                if (!ev) {
                        int e = inotifytools_error();

                        if (e == EINTR || e == 0)
                                continue;
                        /* The library lost events or its descriptor failed:
                         * tell subscribers to relist. */
                        atomic_store(&w->overflowed, 1);
                        thread_forward(w, -1, IN_Q_OVERFLOW, NULL);
                        continue;
                }
                if (ev->wd == w->wake_wd) {
                        if (thread_handle_request(w))
                                break;
                        continue;
                }
                thread_forward(w, ev->wd, ev->mask, ev->len ? ev->name : NULL);
        }
        return NULL;
}

/* ---- loop thread --------------------------------------------------------------- */

/* Asks the thread to stop and waits until it has seen the request. */
static int request_stop(struct watcher *w)
{
        pthread_mutex_lock(&w->mu);
        w->req = REQ_STOP;
        w->req_done = 0;
        /* A write to the unlinked wake file produces IN_MODIFY on its watch. */
        if (pwrite(w->wake_fd, "w", 1, 0) != 1) {
                int r = -errno;

                w->req = REQ_NONE;
                pthread_mutex_unlock(&w->mu);
                return r;
        }
        while (!w->req_done)
                pthread_cond_wait(&w->cv, &w->mu);
        pthread_mutex_unlock(&w->mu);
        return 0;
}

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

/* The pipe's bytes cannot be framed any more (some were lost): drop what
 * is buffered and what is in the pipe, which ends on a record boundary
 * (records are written whole), and have every subscriber relist. */
static void lose_events(struct watcher *w)
{
        char chunk[8192];

        while (read(w->pipe_rd, chunk, sizeof(chunk)) > 0)
                ;
        buf_reset(&w->in);
        atomic_store(&w->overflowed, 1);
}

/*
 * Hands at most WATCHER_BATCH buffered records to their subscribers, then
 * returns to the loop: the rest waits for the next turn (the more timer),
 * so a burst of events never keeps the loop from its other descriptors.
 */
static void dispatch(struct watcher *w)
{
        size_t off = 0, n = 0;

        while (n < WATCHER_BATCH && w->in.len - off >= sizeof(struct record)) {
                struct record rec;
                char name[NAME_MAX + 1];

                memcpy(&rec, w->in.data + off, sizeof(rec));
                if (w->in.len - off < sizeof(rec) + rec.len)
                        break;
                memcpy(name, w->in.data + off + sizeof(rec), rec.len);
                name[rec.len] = '\0';
                off += sizeof(rec) + rec.len;
                n++;
                if (rec.wd < 0) {
                        dispatch_all_overflow(w);
                        continue;
                }
                deliver(w, rec.wd, name, rec.mask);
        }
        buf_consume(&w->in, off);
        /* A burst grew the buffer to WATCHER_BUFFER and more; once it is
         * drained, that memory goes back rather than stay for good. */
        if (w->in.len == 0 && w->in.cap > WATCHER_KEEP)
                buf_free(&w->in);
        if (atomic_exchange(&w->overflowed, 0))
                dispatch_all_overflow(w);
        /* Whole records left over, with nothing more to read, would wait
         * for an event that may never come: continue next turn. */
        if (w->in.len >= sizeof(struct record))
                loop_timer_arm(w->more_timer, 0);
}

size_t watcher_buffer_bytes(const struct watcher *w)
{
        return w->in.cap;
}

unsigned long watcher_forwarded(const struct watcher *w)
{
        return atomic_load(&w->forwarded);
}

static void on_more(struct loop_timer *t, void *data)
{
        (void)t;
        dispatch(data);
}

/* Reads at most WATCHER_BUFFER bytes ahead of what was dispatched; the
 * rest stays in the pipe (and past the pipe, the thread reports an
 * overflow: the subscribers relist).  Memory stays bounded in any burst. */
static void on_pipe(struct loop_io *io, int fd, uint32_t events, void *data)
{
        struct watcher *w = data;
        char chunk[8192];
        ssize_t n;

        while (w->in.len < WATCHER_BUFFER) {
                size_t room = WATCHER_BUFFER - w->in.len;

                n = read(fd, chunk, room < sizeof(chunk) ? room : sizeof(chunk));
                if (n <= 0)
                        break;
                if (buf_append(&w->in, chunk, (size_t)n) < 0) {
                        lose_events(w);
                        break;
                }
        }
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
 * number, read just before; adding the wake watch to it directly proves it
 * is an inotify descriptor, and the library's is the only one in the
 * process.  -EIO if it is not (the library was already initialised, or
 * another thread opened a descriptor in between).
 */
static int library_fd(struct watcher *w, int probe, const char *wake_path)
{
        w->wake_wd = inotify_add_watch(probe, wake_path, IN_MODIFY);
        if (w->wake_wd < 0)
                return errno == EINVAL || errno == EBADF ? -EIO : -errno;
        w->ino_fd = probe;
        return 0;
}

int watcher_new(struct loop *loop, struct watcher **ret_w)
{
        struct watcher *w = calloc(1, sizeof(*w));
        char tmpl[] = "/tmp/podmux-wake-XXXXXX";
        const char *dir = getenv("TMPDIR");
        struct buf path = BUF_INIT;
        int fds[2], probe, r;

        if (!w)
                return -ENOMEM;
        w->loop = loop;
        buf_init(&w->in);
        w->pipe_rd = w->pipe_wr = w->wake_fd = w->ino_fd = -1;
        pthread_mutex_init(&w->mu, NULL);
        pthread_cond_init(&w->cv, NULL);
        if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0) {
                r = -errno;
                goto fail;
        }
        w->pipe_rd = fds[0];
        w->pipe_wr = fds[1];
        /* A bigger pipe absorbs bursts (rm -rf of a large directory). */
        fcntl(w->pipe_wr, F_SETPIPE_SZ, 1024 * 1024);

        if (dir && dir[0])
                r = buf_printf(&path, "%s/podmux-wake-XXXXXX", dir);
        else
                r = buf_puts(&path, tmpl);
        if (r < 0)
                goto fail;
        w->wake_fd = mkostemp(path.data, O_CLOEXEC);
        if (w->wake_fd < 0) {
                r = -errno;
                goto fail;
        }
        probe = lowest_free_fd();
        if (!inotifytools_initialize()) {
                r = -inotifytools_error();
                if (r == 0)
                        r = -EIO;
                unlink(path.data);
                goto fail;
        }
        r = library_fd(w, probe, path.data);
        unlink(path.data);
        if (r < 0)
                goto fail;
        r = loop_io_add(loop, w->pipe_rd, EPOLLIN, on_pipe, w, &w->io);
        if (r < 0)
                goto fail;
        r = loop_timer_new(loop, on_more, w, &w->more_timer);
        if (r < 0)
                goto fail;
        r = -pthread_create(&w->thread, NULL, thread_main, w);
        if (r < 0)
                goto fail;
        w->thread_started = 1;
        buf_free(&path);
        *ret_w = w;
        return 0;
fail:
        buf_free(&path);
        watcher_free(w);
        return r;
}

void watcher_free(struct watcher *w)
{
        if (!w)
                return;
        if (w->thread_started) {
                request_stop(w);
                pthread_join(w->thread, NULL);
        }
        while (w->watches)
                unlink_watch(w, w->watches);
        loop_io_free(w->io);
        loop_timer_free(w->more_timer);
        /* Closes ino_fd, and with it every kernel watch. */
        inotifytools_cleanup();
        if (w->wake_fd >= 0)
                close(w->wake_fd);
        if (w->pipe_rd >= 0)
                close(w->pipe_rd);
        if (w->pipe_wr >= 0)
                close(w->pipe_wr);
        buf_free(&w->in);
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
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
