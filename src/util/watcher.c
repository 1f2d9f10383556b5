/*
 * watcher — the thread that owns libinotifytools (see
 * include/podmux/watcher.h).
 *
 * Threads: the loop thread asks for watches (one request at a time, under a
 * mutex, answered through a condition variable); the watcher thread is the
 * only caller of the library after start-up.  It blocks in
 * inotifytools_next_event(-1), and is woken for a request by a write to a
 * private unlinked file it watches, so the request is never missed.
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

#include "podmux/buf.h"
#include "podmux/watcher.h"

/* Bytes read from the pipe ahead of what was dispatched. */
#define WATCHER_BUFFER (64u * 1024u)

enum req_kind { REQ_NONE, REQ_ADD, REQ_REMOVE, REQ_STOP };

struct record {
        int32_t wd;
        uint32_t mask;
        uint32_t len;
};

struct watcher_watch {
        struct watcher *w;
        int wd;
        char *path;
        watcher_event_fn fn;
        void *data;
        struct watcher_watch *next;
};

struct watcher {
        struct loop *loop;
        struct loop_io *io;
        int pipe_rd, pipe_wr;
        int wake_fd;
        int wake_wd;
        pthread_t thread;
        int thread_started;
        atomic_int overflowed;

        pthread_mutex_t mu;
        pthread_cond_t cv;
        enum req_kind req;
        const char *req_path;
        uint32_t req_mask;
        int req_wd;
        int req_result;
        int req_done;

        int dead_wds[64]; /* recently dropped by the kernel; thread only */
        unsigned n_dead;
        struct watcher_watch *watches; /* loop thread only */
        struct buf in;                 /* records read, not yet dispatched */
        struct loop_timer *more_timer; /* dispatches what is left in `in` */
        int dispatching;
};

/* ---- watcher thread ---------------------------------------------------------- */

/* A small ring of wds the kernel dropped; wds are not reused soon (they
 * count up), so the last 64 are plenty. */
static void mark_dead(struct watcher *w, int wd)
{
        w->dead_wds[w->n_dead++ % 64] = wd;
}

static int wd_is_dead(const struct watcher *w, int wd)
{
        unsigned n = w->n_dead < 64 ? w->n_dead : 64;

        for (unsigned i = 0; i < n; i++)
                if (w->dead_wds[i] == wd)
                        return 1;
        return 0;
}

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
}

/*
 * libinotifytools keeps the name of a watch the kernel dropped (the path was
 * deleted), so after the path is re-created and watched again, a lookup by
 * name would return the dead watch.  Renaming the dead entry to a name no
 * path can have makes the lookup find the new watch.
 */
static void forget_stale_name(struct watcher *w, const char *path)
{
        char name[PATH_MAX + 2];

        for (int slash = 0; slash < 2; slash++) {
                int wd;

                snprintf(name, sizeof(name), slash ? "%s/" : "%s", path);
                wd = inotifytools_wd_from_filename(name);
                if (wd >= 0 && wd_is_dead(w, wd)) {
                        char dead[64];

                        snprintf(dead, sizeof(dead), "\001dead-watch-%d", wd);
                        inotifytools_set_filename_by_wd(wd, dead);
                }
        }
}

/* Serves the pending request, if any.  Returns 1 when it was REQ_STOP:
 * decided under the same lock that acknowledges it, so a stop posted right
 * after an earlier request is never mistaken for one already served. */
static int thread_handle_request(struct watcher *w)
{
        int stop = 0;

        pthread_mutex_lock(&w->mu);
        if (w->req_done) {
                /* Spurious wake (the request was served by an earlier
                 * event): nothing to do. */
                pthread_mutex_unlock(&w->mu);
                return 0;
        }
        switch (w->req) {
        case REQ_ADD:
                forget_stale_name(w, w->req_path);
                if (inotifytools_watch_file(w->req_path, (int)w->req_mask)) {
                        w->req_wd = inotifytools_wd_from_filename(w->req_path);
                        if (w->req_wd < 0) {
                                /* The library files directories under
                                 * "<path>/". */
                                char dir[PATH_MAX + 2];

                                snprintf(dir, sizeof(dir), "%s/", w->req_path);
                                w->req_wd = inotifytools_wd_from_filename(dir);
                        }
                        w->req_result = w->req_wd >= 0 ? 0 : -EIO;
                } else {
                        int e = inotifytools_error();

                        w->req_result = e > 0 ? -e : -EIO;
                }
                break;
        case REQ_REMOVE:
                /* A watch the kernel already dropped (IN_IGNORED seen) is
                 * not removed again: the library would print an error. */
                if (!wd_is_dead(w, w->req_wd))
                        inotifytools_remove_watch_by_wd(w->req_wd);
                w->req_result = 0;
                break;
        case REQ_STOP:
                stop = 1;
                w->req_result = 0;
                break;
        case REQ_NONE:
                pthread_mutex_unlock(&w->mu);
                return 0;
        }
        w->req_done = 1;
        pthread_cond_signal(&w->cv);
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
                if (ev->mask & IN_IGNORED)
                        mark_dead(w, ev->wd);
                thread_forward(w, ev->wd, ev->mask, ev->len ? ev->name : NULL);
        }
        return NULL;
}

/* ---- loop thread --------------------------------------------------------------- */

static int request(struct watcher *w, enum req_kind kind, const char *path,
                   uint32_t mask, int wd, int *ret_wd)
{
        int r;

        pthread_mutex_lock(&w->mu);
        w->req = kind;
        w->req_path = path;
        w->req_mask = mask;
        w->req_wd = wd;
        w->req_done = 0;
        /* A write to the unlinked wake file produces IN_MODIFY on its watch. */
        if (pwrite(w->wake_fd, "w", 1, 0) != 1) {
                w->req = REQ_NONE;
                pthread_mutex_unlock(&w->mu);
                return -errno;
        }
        while (!w->req_done)
                pthread_cond_wait(&w->cv, &w->mu);
        r = w->req_result;
        if (ret_wd)
                *ret_wd = w->req_wd;
        if (kind != REQ_STOP)
                w->req = REQ_NONE;
        pthread_mutex_unlock(&w->mu);
        return r;
}

static struct watcher_watch *find_wd(struct watcher *w, int wd)
{
        for (struct watcher_watch *ww = w->watches; ww; ww = ww->next)
                if (ww->wd == wd)
                        return ww;
        return NULL;
}

static void unlink_watch(struct watcher *w, struct watcher_watch *ww)
{
        for (struct watcher_watch **p = &w->watches; *p; p = &(*p)->next) {
                if (*p == ww) {
                        *p = ww->next;
                        break;
                }
        }
        free(ww->path);
        free(ww);
}

static void dispatch_all_overflow(struct watcher *w)
{
        struct watcher_watch *ww = w->watches, *next;

        for (; ww; ww = next) {
                next = ww->next;
                ww->fn(ww->data, ww->path, "", IN_Q_OVERFLOW);
        }
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
                struct watcher_watch *ww;

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
                ww = find_wd(w, rec.wd);
                if (!ww)
                        continue;
                ww->fn(ww->data, ww->path, name, rec.mask);
                /* The kernel has dropped this watch: forget it after telling
                 * the subscriber (who may re-arm with a new watcher_add). */
                if (rec.mask & IN_IGNORED) {
                        ww = find_wd(w, rec.wd);
                        if (ww)
                                unlink_watch(w, ww);
                }
        }
        buf_consume(&w->in, off);
        if (atomic_exchange(&w->overflowed, 0))
                dispatch_all_overflow(w);
        /* Whole records left over, with nothing more to read, would wait
         * for an event that may never come: continue next turn. */
        if (w->in.len >= sizeof(struct record))
                loop_timer_arm(w->more_timer, 0);
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

int watcher_new(struct loop *loop, struct watcher **ret_w)
{
        struct watcher *w = calloc(1, sizeof(*w));
        char tmpl[] = "/tmp/podmux-wake-XXXXXX";
        const char *dir = getenv("TMPDIR");
        struct buf path = BUF_INIT;
        int fds[2], r;

        if (!w)
                return -ENOMEM;
        w->loop = loop;
        w->pipe_rd = w->pipe_wr = w->wake_fd = -1;
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

        if (!inotifytools_initialize()) {
                r = -inotifytools_error();
                if (r == 0)
                        r = -EIO;
                goto fail;
        }
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
        if (!inotifytools_watch_file(path.data, IN_MODIFY)) {
                r = -inotifytools_error();
                unlink(path.data);
                goto fail;
        }
        w->wake_wd = inotifytools_wd_from_filename(path.data);
        unlink(path.data);
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
                request(w, REQ_STOP, NULL, 0, -1, NULL);
                pthread_join(w->thread, NULL);
        }
        while (w->watches)
                unlink_watch(w, w->watches);
        loop_io_free(w->io);
        loop_timer_free(w->more_timer);
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

int watcher_add(struct watcher *w, const char *path, uint32_t mask,
                watcher_event_fn fn, void *data,
                struct watcher_watch **ret_watch)
{
        struct watcher_watch *ww = calloc(1, sizeof(*ww));
        int wd = -1, r;

        if (!ww)
                return -ENOMEM;
        ww->path = strdup(path);
        if (!ww->path) {
                free(ww);
                return -ENOMEM;
        }
        r = request(w, REQ_ADD, path, mask, -1, &wd);
        if (r < 0) {
                free(ww->path);
                free(ww);
                return r;
        }
        /* inotify returns the same wd for an inode already watched: the
         * newest subscriber takes it over. */
        {
                struct watcher_watch *old = find_wd(w, wd);

                if (old)
                        unlink_watch(w, old);
        }
        ww->w = w;
        ww->wd = wd;
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

        if (!ww)
                return;
        w = ww->w;
        request(w, REQ_REMOVE, NULL, 0, ww->wd, NULL);
        unlink_watch(w, ww);
}
