/*
 * checkpoint_writer — the checkpoint written off the loop, coalesced (see
 * src/sources/checkpoint_writer.h and doc/checkpoint.md).
 *
 * The loop side (every function but writer_main and run_job) and the
 * thread share the job under the mutex: the loop hands a snapshot over
 * (job_ready), the thread writes it and hands the result back (job_done)
 * and wakes the loop through the eventfd.  While a job is in flight the
 * loop never touches the snapshot, and the thread touches nothing else.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sources/checkpoint_writer.h"
#include "util/clock.h"
#include "util/dir.h"
#include "util/str.h"

/* What the thread (or a flush) did with one snapshot. */
struct job_result {
        int r;
        struct buf err;
        size_t bytes;
        uint64_t took;
};

struct checkpoint_writer {
        struct loop *loop;
        char *dir;
        char *node, *server, *ca;
        struct checkpoint_identity id;
        uint64_t interval, refresh;
        checkpoint_snapshot_fn snapshot;
        void *snapshot_data;
        checkpoint_done_fn done;
        void *done_data;
        struct checkpoint_stats *stats;
        checkpoint_step_fn step;
        void *step_data;

        int dirfd;
        int efd;
        struct loop_io *io;
        struct loop_timer *timer;
        pthread_t thread;
        bool thread_started;
        pthread_mutex_t mu;
        pthread_cond_t cv;

        /* Under mu. */
        bool stop;
        bool job_ready; /* handed over, not yet taken by the thread */
        bool job_done;  /* written, result not yet taken by the loop */
        struct checkpoint_snapshot job;
        struct job_result res;

        /* Loop thread only. */
        bool dirty;          /* changed since the last snapshot */
        bool in_flight;      /* a job is handed over */
        uint64_t last_start; /* mono: when the last write started, 0 never */
        uint64_t next_refresh;
        uint64_t written_time; /* the time of the state on disk, 0 none */
};

void checkpoint_snapshot_clear(struct checkpoint_snapshot *s)
{
        if (!s)
                return;
        for (size_t i = 0; i < s->n_pods; i++)
                pod_unref(s->pods[i]);
        free(s->pods);
        free(s->rv);
        memset(s, 0, sizeof(*s));
}

/* ---- the write itself (the thread, or a flush) ------------------------------- */

/* Sorts s's pods (so one state is always the same bytes), encodes and
 * writes it.  Allocates and frees on the calling thread only; reads the
 * pods' immutable members (pod_compare reads their identity). */
static void run_job(struct checkpoint_writer *w, struct checkpoint_snapshot *s, struct job_result *res)
{
        struct checkpoint_state st = {
                .rv = s->rv,
                .time_usec = s->time_usec,
                .pods = s->pods,
                .n_pods = s->n_pods,
        };
        struct buf bytes = BUF_INIT;
        uint64_t t0 = mono_usec();

        qsort(s->pods, s->n_pods, sizeof(*s->pods), pod_compare_ptr);
        res->r = checkpoint_encode(&w->id, &st, &bytes, &res->err);
        if (res->r == 0)
                res->r = checkpoint_write(w->dirfd, w->dir, bytes.data, bytes.len, w->step, w->step_data, &res->err);
        res->bytes = bytes.len;
        res->took = mono_usec() - t0;
        buf_free(&bytes);
}

static void *writer_main(void *arg)
{
        struct checkpoint_writer *w = arg;
        const uint64_t one = 1;

        pthread_mutex_lock(&w->mu);
        for (;;) {
                struct job_result res = {.err = BUF_INIT};

                while (!w->stop && !w->job_ready)
                        pthread_cond_wait(&w->cv, &w->mu);
                if (w->stop)
                        break;
                w->job_ready = false;
                pthread_mutex_unlock(&w->mu);
                run_job(w, &w->job, &res);
                pthread_mutex_lock(&w->mu);
                w->res = res;
                w->job_done = true;
                pthread_cond_broadcast(&w->cv);
                /* The counter cannot overflow: the loop reads it after
                 * each job, and there is one job at a time. */
                if (write(w->efd, &one, sizeof(one)) < 0) {
                        /* Nothing to do: only EAGAIN is possible, and
                         * then the loop is woken already. */
                }
        }
        pthread_mutex_unlock(&w->mu);
        return NULL;
}

/* ---- the loop side ------------------------------------------------------------ */

static void schedule(struct checkpoint_writer *w);

/* A job's result: counted, told, the snapshot released, the next write
 * scheduled. */
static void complete(struct checkpoint_writer *w, struct checkpoint_snapshot *s, struct job_result *res)
{
        struct checkpoint_result out = {
                .error = res->r,
                .reason = res->r < 0 ? (res->err.len ? res->err.data : "out of memory") : "",
                .bytes = res->bytes,
                .time_usec = s->time_usec,
                .took_usec = res->took,
        };

        if (res->r == 0) {
                w->written_time = s->time_usec;
                if (w->stats) {
                        w->stats->writes++;
                        w->stats->bytes += res->bytes;
                        w->stats->last_bytes = res->bytes;
                        w->stats->last_write_usec = res->took;
                        w->stats->last_write_at = wall_usec();
                        w->stats->written_time = s->time_usec;
                }
        } else {
                /* Tried again an interval later. */
                w->dirty = true;
                checkpoint_stats_error(w->stats, "%s", out.reason);
        }
        w->next_refresh = w->refresh ? mono_usec() + w->refresh : 0;
        if (w->done)
                w->done(w->done_data, &out);
        checkpoint_snapshot_clear(s);
        buf_free(&res->err);
}

/* Takes the thread's result, if there is one.  Loop thread. */
static void collect(struct checkpoint_writer *w)
{
        struct job_result res;
        struct checkpoint_snapshot s;

        pthread_mutex_lock(&w->mu);
        if (!w->job_done) {
                pthread_mutex_unlock(&w->mu);
                return;
        }
        w->job_done = false;
        res = w->res;
        s = w->job;
        memset(&w->job, 0, sizeof(w->job));
        buf_init(&w->res.err);
        pthread_mutex_unlock(&w->mu);
        w->in_flight = false;
        complete(w, &s, &res);
}

static void on_event(struct loop_io *io, int fd, uint32_t events, void *data)
{
        struct checkpoint_writer *w = data;
        uint64_t n;

        (void)io;
        (void)events;
        if (read(fd, &n, sizeof(n)) < 0) {
                /* EAGAIN: a spurious wake-up; the result is read below
                 * all the same. */
        }
        collect(w);
        schedule(w);
}

/* Takes the state: 0 with *s worth writing, 1 when there is nothing (new)
 * to write, -ENOMEM. */
static int take(struct checkpoint_writer *w, struct checkpoint_snapshot *s)
{
        int r = w->snapshot(w->snapshot_data, s);

        if (r != 0)
                return r;
        if (!w->dirty && s->time_usec <= w->written_time) {
                /* A refresh that found nothing newer than the disk. */
                checkpoint_snapshot_clear(s);
                return 1;
        }
        return 0;
}

/* A write may start now: the state is taken and handed to the thread. */
static void start(struct checkpoint_writer *w)
{
        struct checkpoint_snapshot s = {0};
        int r = take(w, &s);

        if (r < 0) {
                loop_timer_arm(w->timer, CHECKPOINT_RETRY_USEC);
                return;
        }
        w->dirty = false;
        if (r > 0) {
                w->next_refresh = w->refresh ? mono_usec() + w->refresh : 0;
                schedule(w);
                return;
        }
        w->in_flight = true;
        w->last_start = mono_usec();
        pthread_mutex_lock(&w->mu);
        w->job = s;
        w->job_ready = true;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
}

static void on_timer(struct loop_timer *t, void *data)
{
        struct checkpoint_writer *w = data;
        uint64_t now = mono_usec();

        (void)t;
        if (w->in_flight)
                return;
        if (w->dirty || (w->next_refresh && now >= w->next_refresh))
                start(w);
        else
                schedule(w);
}

/* Arms the timer for the next write that may start: a change waits for
 * the interval since the last start; a refresh for its own time. */
static void schedule(struct checkpoint_writer *w)
{
        uint64_t now = mono_usec(), due;

        if (w->in_flight)
                return;
        if (w->dirty)
                due = w->last_start ? w->last_start + w->interval : now;
        else if (w->next_refresh)
                due = w->next_refresh;
        else {
                loop_timer_stop(w->timer);
                return;
        }
        if (w->last_start && due < w->last_start + w->interval)
                due = w->last_start + w->interval;
        /* Never at once: the snapshot is taken on the loop's next turn,
         * outside whatever code said the state changed. */
        loop_timer_arm(w->timer, due > now ? due - now : 0);
}

void checkpoint_writer_changed(struct checkpoint_writer *w)
{
        if (!w || w->dirty)
                return;
        w->dirty = true;
        schedule(w);
}

int checkpoint_writer_flush(struct checkpoint_writer *w, struct buf *err)
{
        struct checkpoint_snapshot s = {0};
        struct job_result res = {.err = BUF_INIT};
        int r;

        pthread_mutex_lock(&w->mu);
        while (w->in_flight && !w->job_done)
                pthread_cond_wait(&w->cv, &w->mu);
        pthread_mutex_unlock(&w->mu);
        collect(w);
        loop_timer_stop(w->timer);
        r = take(w, &s);
        if (r != 0) {
                if (r == -ENOMEM && err)
                        buf_reset(err);
                return r > 0 ? 0 : r;
        }
        w->dirty = false;
        run_job(w, &s, &res);
        r = res.r;
        if (r < 0 && err) {
                if (res.err.len)
                        (void)buf_set_err(err, r, "%s", res.err.data);
                else
                        buf_reset(err);
        }
        complete(w, &s, &res);
        return r;
}

/* ---- life ------------------------------------------------------------------------ */

/* The directory, created 0700 when missing with its missing parents
 * (0755, as mkdir -p: /var/lib/podmux on a fresh node), opened, checked
 * and locked.  0 with w->dirfd, or the error. */
static int open_dir(struct checkpoint_writer *w, struct buf *err)
{
        int r;

        if ((r = dir_make(w->dir, 0700, err)) < 0)
                return r;
        w->dirfd = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (w->dirfd < 0) {
                r = -errno;
                return buf_set_err(err, r, "directory \"%s\": %s", w->dir, ERRNO_STR(r));
        }
        if ((r = checkpoint_dir_check(w->dirfd, w->dir, err)) < 0)
                return r;
        if (flock(w->dirfd, LOCK_EX | LOCK_NB) < 0) {
                r = errno == EWOULDBLOCK ? -EBUSY : -errno;
                return buf_set_err(err, r, "directory \"%s\": %s", w->dir,
                                   r == -EBUSY ? "another process writes its checkpoint (it is locked)" : ERRNO_STR(r));
        }
        return 0;
}

/* The thread, with every signal blocked from its first instruction. */
static int start_thread(struct checkpoint_writer *w)
{
        sigset_t all, old;
        int r;

        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        r = -pthread_create(&w->thread, NULL, writer_main, w);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        w->thread_started = r == 0;
        return r;
}

/* The copies of cfg's strings.  0 or -ENOMEM. */
static int copy_config(struct checkpoint_writer *w, const struct checkpoint_writer_config *cfg)
{
        if (str_set(&w->dir, cfg->dir) < 0 || str_set(&w->node, cfg->id.node) < 0 ||
            str_set(&w->server, cfg->id.server) < 0 || str_set(&w->ca, cfg->id.ca_sha256) < 0)
                return -ENOMEM;
        w->id = (struct checkpoint_identity){.node = w->node, .server = w->server, .ca_sha256 = w->ca};
        w->interval = cfg->interval_usec ? cfg->interval_usec : 1;
        w->refresh = cfg->refresh_usec;
        w->snapshot = cfg->snapshot;
        w->snapshot_data = cfg->snapshot_data;
        w->done = cfg->done;
        w->done_data = cfg->done_data;
        w->stats = cfg->stats;
        w->step = cfg->step;
        w->step_data = cfg->step_data;
        return 0;
}

int checkpoint_writer_new(struct loop *loop, const struct checkpoint_writer_config *cfg,
                          struct checkpoint_writer **ret_w, struct buf *err)
{
        struct checkpoint_writer *w = calloc(1, sizeof(*w));
        int r = -ENOMEM;

        if (!w)
                goto fail;
        w->loop = loop;
        w->dirfd = w->efd = -1;
        buf_init(&w->res.err);
        pthread_mutex_init(&w->mu, NULL);
        pthread_cond_init(&w->cv, NULL);
        if ((r = copy_config(w, cfg)) < 0 || (r = open_dir(w, err)) < 0)
                goto fail;
        w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (w->efd < 0) {
                r = -errno;
                r = buf_set_err(err, r, "eventfd: %s", ERRNO_STR(r));
                goto fail;
        }
        if ((r = loop_io_add(loop, w->efd, EPOLLIN, on_event, w, &w->io)) < 0 ||
            (r = loop_timer_new(loop, on_timer, w, &w->timer)) < 0)
                goto fail;
        if ((r = start_thread(w)) < 0) {
                r = buf_set_err(err, r, "cannot start the checkpoint thread: %s", ERRNO_STR(r));
                goto fail;
        }
        *ret_w = w;
        return 0;
fail:
        if (r == -ENOMEM && err)
                buf_reset(err);
        checkpoint_writer_free(w);
        return r;
}

void checkpoint_writer_free(struct checkpoint_writer *w)
{
        if (!w)
                return;
        if (w->thread_started) {
                pthread_mutex_lock(&w->mu);
                /* A job in flight is finished first: the file is never
                 * left half written by our own exit. */
                while (w->in_flight && !w->job_done)
                        pthread_cond_wait(&w->cv, &w->mu);
                w->stop = true;
                pthread_cond_broadcast(&w->cv);
                pthread_mutex_unlock(&w->mu);
                pthread_join(w->thread, NULL);
        }
        checkpoint_snapshot_clear(&w->job);
        buf_free(&w->res.err);
        loop_io_free(w->io);
        loop_timer_free(w->timer);
        if (w->efd >= 0)
                close(w->efd);
        if (w->dirfd >= 0)
                close(w->dirfd); /* and the lock with it */
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        free(w->dir);
        free(w->node);
        free(w->server);
        free(w->ca);
        free(w);
}
