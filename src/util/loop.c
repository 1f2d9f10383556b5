/*
 * loop — epoll event loop with one timerfd and a binary heap of timers
 * (see src/util/loop.h).
 *
 * Handles are freed lazily: loop_io_free() inside a callback only marks the
 * handle dead; it is reaped after the current batch of events, so a later
 * event in the same epoll batch never touches freed memory.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "util/loop.h"
#include "util/grow.h"

#define LOOP_MAX_EVENTS 64

struct loop_io {
        struct loop *loop;
        int fd;
        uint32_t events;
        loop_io_fn fn;
        void *data;
        int dead;
        struct loop_io *next; /* all handles, for reaping and loop_free */
};

struct loop_timer {
        struct loop *loop;
        loop_timer_fn fn;
        void *data;
        uint64_t due;   /* monotonic µs */
        size_t heap_ix; /* index in the heap, or SIZE_MAX when not armed */
        /* Armed with loop_timer_soon(): on the soon list, not the heap. */
        bool soon;
        uint64_t soon_seq; /* see run_soon() */
        struct loop_timer *soon_prev, *soon_next;
        int dead;
        struct loop_timer *next;
};

struct loop_defer {
        loop_defer_fn fn;
        void *data;
        struct loop_defer *next;
};

struct loop {
        int epfd;
        int tfd;
        int stopped;
        uint64_t tfd_due; /* what the timerfd is set to, 0 = disarmed */
        struct loop_io *ios;
        struct loop_timer *timers;
        struct loop_timer **heap;
        /* heap_cap >= n_timers always, so arming never allocates. */
        size_t heap_len, heap_cap, n_timers;
        struct loop_defer *defer_head, *defer_tail;
        /* loop_defer_next(): moved to the list above as an iteration
         * starts, which then does not wait. */
        struct loop_defer *next_head, *next_tail;
        int need_reap;
        /* Timers armed with loop_timer_soon(), in the order armed. */
        struct loop_timer *soon_head, *soon_tail;
        uint64_t soon_seq; /* soon timers armed so far */
        uint64_t turns;    /* iterations finished */
};

/* ---- timer heap (min-heap on due) ---------------------------------------- */

static void heap_swap(struct loop *l, size_t a, size_t b)
{
        struct loop_timer *t = l->heap[a];

        l->heap[a] = l->heap[b];
        l->heap[b] = t;
        l->heap[a]->heap_ix = a;
        l->heap[b]->heap_ix = b;
}

static void heap_up(struct loop *l, size_t i)
{
        while (i > 0) {
                size_t p = (i - 1) / 2;

                if (l->heap[p]->due <= l->heap[i]->due)
                        break;
                heap_swap(l, p, i);
                i = p;
        }
}

static void heap_down(struct loop *l, size_t i)
{
        for (;;) {
                size_t c = 2 * i + 1, m = i;

                if (c < l->heap_len && l->heap[c]->due < l->heap[m]->due)
                        m = c;
                if (c + 1 < l->heap_len && l->heap[c + 1]->due < l->heap[m]->due)
                        m = c + 1;
                if (m == i)
                        return;
                heap_swap(l, i, m);
                i = m;
        }
}

static void heap_remove(struct loop *l, struct loop_timer *t)
{
        size_t i = t->heap_ix;

        if (i == SIZE_MAX)
                return;
        l->heap_len--;
        if (i != l->heap_len) {
                l->heap[i] = l->heap[l->heap_len];
                l->heap[i]->heap_ix = i;
                heap_down(l, i);
                heap_up(l, i);
        }
        t->heap_ix = SIZE_MAX;
}

/*
 * Points the timerfd at the earliest due timer, lazily: it is set again
 * only when the earliest deadline comes sooner than what it is set to.
 * A deadline that moves later (an idle timeout pushed back on every read,
 * libcurl's timer after each socket action) costs no syscall: the timerfd
 * fires early once, run_timers() finds nothing due and sets it again.
 */
static void timerfd_sync(struct loop *l)
{
        struct itimerspec its;
        uint64_t due = l->heap_len ? l->heap[0]->due : 0;

        if (due == l->tfd_due || (l->tfd_due && (!due || l->tfd_due < due)))
                return;
        memset(&its, 0, sizeof(its));
        if (due) {
                /* TFD_TIMER_ABSTIME on CLOCK_MONOTONIC; 0 would disarm. */
                its.it_value.tv_sec = (time_t)(due / 1000000u);
                its.it_value.tv_nsec = (long)(due % 1000000u) * 1000;
                if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
                        its.it_value.tv_nsec = 1;
        }
        timerfd_settime(l->tfd, TFD_TIMER_ABSTIME, &its, NULL);
        l->tfd_due = due;
}

/* ---- lifecycle -------------------------------------------------------------- */

int loop_new(struct loop **ret_loop)
{
        struct loop *l = calloc(1, sizeof(*l));
        struct epoll_event ev;
        int r;

        if (!l)
                return -ENOMEM;
        l->tfd = -1;
        l->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (l->epfd < 0) {
                r = -errno;
                goto fail;
        }
        l->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (l->tfd < 0) {
                r = -errno;
                goto fail;
        }
        memset(&ev, 0, sizeof(ev));
        ev.events = EPOLLIN;
        ev.data.ptr = NULL; /* NULL marks the timerfd */
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->tfd, &ev) < 0) {
                r = -errno;
                goto fail;
        }
        *ret_loop = l;
        return 0;
fail:
        loop_free(l);
        return r;
}

void loop_free(struct loop *l)
{
        if (!l)
                return;
        while (l->ios) {
                struct loop_io *io = l->ios;

                l->ios = io->next;
                free(io);
        }
        while (l->timers) {
                struct loop_timer *t = l->timers;

                l->timers = t->next;
                free(t);
        }
        while (l->defer_head) {
                struct loop_defer *d = l->defer_head;

                l->defer_head = d->next;
                free(d);
        }
        while (l->next_head) {
                struct loop_defer *d = l->next_head;

                l->next_head = d->next;
                free(d);
        }
        free(l->heap);
        if (l->tfd >= 0)
                close(l->tfd);
        if (l->epfd >= 0)
                close(l->epfd);
        free(l);
}

void loop_stop(struct loop *l)
{
        l->stopped = 1;
}

bool loop_stopped(const struct loop *l)
{
        return l->stopped;
}

/* ---- io ------------------------------------------------------------------------ */

int loop_io_add(struct loop *l, int fd, uint32_t events, loop_io_fn fn,
                void *data, struct loop_io **ret_io)
{
        struct loop_io *io = calloc(1, sizeof(*io));
        struct epoll_event ev;

        if (!io)
                return -ENOMEM;
        io->loop = l;
        io->fd = fd;
        io->events = events;
        io->fn = fn;
        io->data = data;
        memset(&ev, 0, sizeof(ev));
        ev.events = events;
        ev.data.ptr = io;
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
                int r = -errno;

                free(io);
                return r;
        }
        io->next = l->ios;
        l->ios = io;
        if (ret_io)
                *ret_io = io;
        return 0;
}

int loop_io_modify(struct loop_io *io, uint32_t events)
{
        struct epoll_event ev;

        if (io->events == events)
                return 0;
        memset(&ev, 0, sizeof(ev));
        ev.events = events;
        ev.data.ptr = io;
        if (epoll_ctl(io->loop->epfd, EPOLL_CTL_MOD, io->fd, &ev) < 0)
                return -errno;
        io->events = events;
        return 0;
}

void loop_io_free(struct loop_io *io)
{
        if (!io || io->dead)
                return;
        epoll_ctl(io->loop->epfd, EPOLL_CTL_DEL, io->fd, NULL);
        io->dead = 1;
        io->loop->need_reap = 1;
}

/* ---- timers ---------------------------------------------------------------------- */

int loop_timer_new(struct loop *l, loop_timer_fn fn, void *data,
                   struct loop_timer **ret_timer)
{
        struct loop_timer *t;

        /* The heap gets its slot now: arming a timer cannot fail. */
        if (GROW(l->heap, l->heap_cap, l->n_timers + 1, 16) < 0)
                return -ENOMEM;
        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        l->n_timers++;
        t->loop = l;
        t->fn = fn;
        t->data = data;
        t->heap_ix = SIZE_MAX;
        t->next = l->timers;
        l->timers = t;
        *ret_timer = t;
        return 0;
}

static void soon_remove(struct loop *l, struct loop_timer *t)
{
        if (!t->soon)
                return;
        if (t->soon_prev)
                t->soon_prev->soon_next = t->soon_next;
        else
                l->soon_head = t->soon_next;
        if (t->soon_next)
                t->soon_next->soon_prev = t->soon_prev;
        else
                l->soon_tail = t->soon_prev;
        t->soon_prev = t->soon_next = NULL;
        t->soon = false;
}

void loop_timer_arm(struct loop_timer *t, uint64_t delay_usec)
{
        struct loop *l = t->loop;

        if (t->dead)
                return;
        soon_remove(l, t);
        heap_remove(l, t);
        t->due = mono_usec() + delay_usec;
        t->heap_ix = l->heap_len;
        l->heap[l->heap_len++] = t;
        heap_up(l, t->heap_ix);
        timerfd_sync(l);
}

/*
 * No timerfd: arming and firing through it would cost two
 * timerfd_settime() calls and one more wake-up, on the path of every
 * watched file's change to the consumers (scripts/bench drop_c).  O(1).
 */
void loop_timer_soon(struct loop_timer *t)
{
        struct loop *l = t->loop;

        if (t->dead)
                return;
        heap_remove(l, t);
        soon_remove(l, t);
        t->soon = true;
        t->soon_seq = l->soon_seq++;
        t->soon_prev = l->soon_tail;
        if (l->soon_tail)
                l->soon_tail->soon_next = t;
        else
                l->soon_head = t;
        l->soon_tail = t;
}

void loop_timer_stop(struct loop_timer *t)
{
        if (!t)
                return;
        soon_remove(t->loop, t);
        heap_remove(t->loop, t);
        timerfd_sync(t->loop);
}

bool loop_timer_armed(const struct loop_timer *t)
{
        return t->heap_ix != SIZE_MAX || t->soon;
}

void loop_timer_free(struct loop_timer *t)
{
        if (!t || t->dead)
                return;
        loop_timer_stop(t);
        t->dead = 1;
        t->loop->need_reap = 1;
}

/* ---- deferred calls ---------------------------------------------------------------- */

static int defer_append(struct loop_defer **head, struct loop_defer **tail, loop_defer_fn fn, void *data)
{
        struct loop_defer *d = malloc(sizeof(*d));

        if (!d)
                return -ENOMEM;
        d->fn = fn;
        d->data = data;
        d->next = NULL;
        if (*tail)
                (*tail)->next = d;
        else
                *head = d;
        *tail = d;
        return 0;
}

int loop_defer(struct loop *l, loop_defer_fn fn, void *data)
{
        return defer_append(&l->defer_head, &l->defer_tail, fn, data);
}

int loop_defer_next(struct loop *l, loop_defer_fn fn, void *data)
{
        return defer_append(&l->next_head, &l->next_tail, fn, data);
}

static void defer_drop(struct loop_defer **head, struct loop_defer **tail, loop_defer_fn fn, void *data)
{
        struct loop_defer **pd = head, *prev = NULL;

        while (*pd) {
                struct loop_defer *d = *pd;

                if (d->fn == fn && d->data == data) {
                        *pd = d->next;
                        free(d);
                        continue;
                }
                prev = d;
                pd = &d->next;
        }
        *tail = prev;
}

void loop_defer_cancel(struct loop *l, loop_defer_fn fn, void *data)
{
        if (!l)
                return;
        defer_drop(&l->defer_head, &l->defer_tail, fn, data);
        defer_drop(&l->next_head, &l->next_tail, fn, data);
}

static int run_deferred(struct loop *l)
{
        int n = 0;

        /* Calls queued by a deferred call run in the same pass, in order. */
        while (l->defer_head) {
                struct loop_defer *d = l->defer_head;

                l->defer_head = d->next;
                if (!l->defer_head)
                        l->defer_tail = NULL;
                d->fn(d->data);
                free(d);
                n++;
        }
        return n;
}

static void reap(struct loop *l)
{
        struct loop_io **pio = &l->ios;
        struct loop_timer **pt = &l->timers;

        if (!l->need_reap)
                return;
        while (*pio) {
                struct loop_io *io = *pio;

                if (io->dead) {
                        *pio = io->next;
                        free(io);
                } else {
                        pio = &io->next;
                }
        }
        while (*pt) {
                struct loop_timer *t = *pt;

                if (t->dead) {
                        *pt = t->next;
                        l->n_timers--;
                        free(t);
                } else {
                        pt = &t->next;
                }
        }
        l->need_reap = 0;
}

static int run_timers(struct loop *l)
{
        uint64_t now = mono_usec(), buf;
        int n = 0;
        ssize_t rd = read(l->tfd, &buf, sizeof(buf));

        (void)rd;
        while (l->heap_len && l->heap[0]->due <= now) {
                struct loop_timer *t = l->heap[0];

                heap_remove(l, t);
                if (!t->dead) {
                        t->fn(t, t->data);
                        n++;
                }
        }
        l->tfd_due = (uint64_t)-1; /* force a re-arm */
        timerfd_sync(l);
        return n;
}

/*
 * Runs the soon timers armed before this pass began, oldest first; one a
 * callback here arms (again) waits for the next iteration, so a timer that
 * keeps re-arming itself still lets the loop look at its descriptors
 * between two runs.  A callback may stop, re-arm or free any timer: each
 * is taken off the list before it runs.
 */
static int run_soon(struct loop *l)
{
        uint64_t limit = l->soon_seq;
        int n = 0;

        while (l->soon_head && l->soon_head->soon_seq < limit) {
                struct loop_timer *t = l->soon_head;

                soon_remove(l, t);
                t->fn(t, t->data);
                n++;
        }
        return n;
}

int loop_run_once(struct loop *l, int64_t timeout_usec)
{
        struct epoll_event evs[LOOP_MAX_EVENTS];
        int n, i, ran = 0, timeout_ms;

        /* What loop_defer_next() queued runs in this iteration, after
         * what was deferred before it. */
        if (l->next_head) {
                if (l->defer_tail)
                        l->defer_tail->next = l->next_head;
                else
                        l->defer_head = l->next_head;
                l->defer_tail = l->next_tail;
                l->next_head = l->next_tail = NULL;
        }
        if (l->defer_head || l->soon_head)
                timeout_usec = 0;
        if (timeout_usec < 0)
                timeout_ms = -1;
        else
                timeout_ms = (int)((timeout_usec + 999) / 1000);
        n = epoll_wait(l->epfd, evs, LOOP_MAX_EVENTS, timeout_ms);
        if (n < 0) {
                if (errno == EINTR)
                        return 0;
                return -errno;
        }
        for (i = 0; i < n; i++) {
                struct loop_io *io = evs[i].data.ptr;

                if (!io) {
                        ran += run_timers(l);
                        continue;
                }
                if (io->dead)
                        continue;
                io->fn(io, io->fd, evs[i].events, io->data);
                ran++;
        }
        ran += run_deferred(l);
        if (l->soon_head) {
                ran += run_soon(l);
                /* What they deferred (a merge, a flush to consumers)
                 * finishes in this iteration too. */
                ran += run_deferred(l);
        }
        reap(l);
        l->turns++;
        return ran;
}

uint64_t loop_turns(const struct loop *l)
{
        return l->turns;
}

int loop_run(struct loop *l)
{
        l->stopped = 0;
        while (!l->stopped) {
                int r = loop_run_once(l, -1);

                if (r < 0)
                        return r;
        }
        return 0;
}
