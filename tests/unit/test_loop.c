/* Unit tests: the event loop (timers, io, deferred calls). */
#include <sys/epoll.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/loop.h"
#include "unit.h"

static int order[16];
static int n_order;

static void timer_cb(struct loop_timer *t, void *data)
{
        order[n_order++] = (int)(intptr_t)data;
}

START_TEST(test_timers_fire_in_due_order)
{
        struct loop *l;
        struct loop_timer *t[3];

        n_order = 0;
        ck_assert_int_eq(loop_new(&l), 0);
        for (int i = 0; i < 3; i++)
                ck_assert_int_eq(loop_timer_new(l, timer_cb, (void *)(intptr_t)i, &t[i]), 0);
        loop_timer_arm(t[0], 30000);
        loop_timer_arm(t[1], 10000);
        loop_timer_arm(t[2], 20000);
        ck_assert(loop_timer_armed(t[0]));
        for (int i = 0; i < 100 && n_order < 3; i++)
                loop_run_once(l, 100000);
        ck_assert_int_eq(n_order, 3);
        ck_assert_int_eq(order[0], 1);
        ck_assert_int_eq(order[1], 2);
        ck_assert_int_eq(order[2], 0);
        ck_assert(!loop_timer_armed(t[0]));
        loop_free(l);
}
END_TEST

START_TEST(test_stopped_and_rearmed_timers)
{
        struct loop *l;
        struct loop_timer *a, *b;

        n_order = 0;
        ck_assert_int_eq(loop_new(&l), 0);
        loop_timer_new(l, timer_cb, (void *)1, &a);
        loop_timer_new(l, timer_cb, (void *)2, &b);
        loop_timer_arm(a, 1000);
        loop_timer_arm(b, 2000);
        loop_timer_stop(a);
        loop_timer_arm(b, 1000); /* re-arm moves it, never fires twice */
        for (int i = 0; i < 100 && n_order < 1; i++)
                loop_run_once(l, 100000);
        loop_run_once(l, 5000);
        ck_assert_int_eq(n_order, 1);
        ck_assert_int_eq(order[0], 2);
        loop_timer_free(a);
        loop_free(l);
}
END_TEST

static int io_hits;
static void io_cb(struct loop_io *io, int fd, uint32_t events, void *data)
{
        char c;

        io_hits++;
        ck_assert(events & EPOLLIN);
        ck_assert_int_eq(read(fd, &c, 1), 1);
        loop_io_free(io); /* freeing itself inside its callback is allowed */
}

START_TEST(test_io_readiness_and_self_free)
{
        struct loop *l;
        int p[2];

        io_hits = 0;
        ck_assert_int_eq(pipe(p), 0);
        ck_assert_int_eq(loop_new(&l), 0);
        ck_assert_int_eq(loop_io_add(l, p[0], EPOLLIN, io_cb, NULL, NULL), 0);
        ck_assert_int_eq(write(p[1], "ab", 2), 2);
        loop_run_once(l, 1000000);
        loop_run_once(l, 10000);
        ck_assert_int_eq(io_hits, 1);
        loop_free(l);
        close(p[0]);
        close(p[1]);
}
END_TEST

static uint64_t seen_turn;
static void turn_defer_cb(void *data)
{
        seen_turn = loop_turns(data);
}

/* Callbacks of one iteration see one number; the next iteration, the
 * next; between iterations, the number of those finished. */
START_TEST(test_turns_count_iterations)
{
        struct loop *l;

        ck_assert_int_eq(loop_new(&l), 0);
        ck_assert_uint_eq(loop_turns(l), 0);
        ck_assert_int_eq(loop_defer(l, turn_defer_cb, l), 0);
        loop_run_once(l, 0);
        ck_assert_uint_eq(seen_turn, 0);
        ck_assert_uint_eq(loop_turns(l), 1);
        loop_run_once(l, 0);
        ck_assert_uint_eq(loop_turns(l), 2);
        ck_assert_int_eq(loop_defer(l, turn_defer_cb, l), 0);
        loop_run_once(l, 0);
        ck_assert_uint_eq(seen_turn, 2);
        loop_free(l);
}
END_TEST

static struct loop *defer_loop;
static void defer_cb(void *data)
{
        order[n_order++] = (int)(intptr_t)data;
        if ((intptr_t)data == 1)
                loop_defer(defer_loop, defer_cb, (void *)3);
}

START_TEST(test_deferred_calls_run_fifo_without_waiting)
{
        n_order = 0;
        ck_assert_int_eq(loop_new(&defer_loop), 0);
        loop_defer(defer_loop, defer_cb, (void *)1);
        loop_defer(defer_loop, defer_cb, (void *)2);
        /* A pending deferred call makes the wait zero even with timeout -1. */
        loop_run_once(defer_loop, -1);
        ck_assert_int_eq(n_order, 3);
        ck_assert_int_eq(order[0], 1);
        ck_assert_int_eq(order[1], 2);
        ck_assert_int_eq(order[2], 3);
        loop_free(defer_loop);
}
END_TEST

static void next_cb(void *data)
{
        order[n_order++] = (int)(intptr_t)data;
        if ((intptr_t)data < 3)
                ck_assert_int_eq(loop_defer_next(defer_loop, next_cb, (void *)((intptr_t)data + 1)), 0);
}

/* A call queued for the next iteration runs at its end, after what was
 * deferred before it, and that iteration does not wait (timeout -1); a
 * cancelled one does not run; loop_free() frees what is left. */
START_TEST(test_deferred_to_the_next_iteration)
{
        n_order = 0;
        ck_assert_int_eq(loop_new(&defer_loop), 0);
        ck_assert_int_eq(loop_defer_next(defer_loop, next_cb, (void *)1), 0);
        ck_assert_int_eq(loop_defer(defer_loop, defer_cb, (void *)0), 0);
        ck_assert_int_eq(loop_run_once(defer_loop, -1), 2);
        ck_assert_int_eq(n_order, 2);
        ck_assert_int_eq(order[0], 0);
        ck_assert_int_eq(order[1], 1);
        ck_assert_int_eq(loop_run_once(defer_loop, -1), 1); /* 2, which queues 3 */
        ck_assert_int_eq(n_order, 3);
        ck_assert_int_eq(order[2], 2);
        loop_defer_cancel(defer_loop, next_cb, (void *)3);
        ck_assert_int_eq(loop_run_once(defer_loop, 0), 0);
        ck_assert_int_eq(n_order, 3);
        ck_assert_int_eq(loop_defer_next(defer_loop, next_cb, (void *)3), 0);
        loop_free(defer_loop);
}
END_TEST

static void stop_cb(struct loop_timer *t, void *data)
{
        loop_stop(data);
}

START_TEST(test_run_until_stop)
{
        struct loop *l;
        struct loop_timer *t;

        ck_assert_int_eq(loop_new(&l), 0);
        loop_timer_new(l, stop_cb, l, &t);
        loop_timer_arm(t, 1000);
        ck_assert_int_eq(loop_run(l), 0);
        ck_assert(loop_stopped(l));
        loop_free(l);
}
END_TEST

/* The timerfd is set lazily (only sooner, never later): a deadline pushed
 * back many times, or every timer stopped, may wake the loop early, but a
 * timer never runs before its own deadline, and one brought forward runs
 * at its new one. */
static uint64_t due_at[2], ran_at[2];

static void stamp_cb(struct loop_timer *t, void *data)
{
        (void)t;
        ran_at[(intptr_t)data] = mono_usec();
}

START_TEST(test_lazy_timerfd_never_fires_a_timer_early)
{
        struct loop *l;
        struct loop_timer *a, *b;

        ck_assert_int_eq(loop_new(&l), 0);
        ck_assert_int_eq(loop_timer_new(l, stamp_cb, (void *)0, &a), 0);
        ck_assert_int_eq(loop_timer_new(l, stamp_cb, (void *)1, &b), 0);
        ran_at[0] = ran_at[1] = 0;
        /* Pushed later and later: the timerfd stays at the first deadline. */
        for (int i = 1; i <= 20; i++) {
                due_at[0] = mono_usec() + (uint64_t)i * 2000;
                loop_timer_arm(a, (uint64_t)i * 2000);
        }
        /* Stopped, then armed again far out: a wake with nothing due. */
        loop_timer_arm(b, 1000);
        loop_timer_stop(b);
        for (int i = 0; i < 200 && !ran_at[0]; i++)
                loop_run_once(l, 100000);
        ck_assert_uint_ne(ran_at[0], 0);
        ck_assert_uint_ge(ran_at[0], due_at[0]);
        ck_assert_uint_eq(ran_at[1], 0);
        /* Far out, then brought forward: runs at the sooner deadline. */
        loop_timer_arm(b, 3600ull * 1000000);
        due_at[1] = mono_usec() + 5000;
        loop_timer_arm(b, 5000);
        for (int i = 0; i < 200 && !ran_at[1]; i++)
                loop_run_once(l, 100000);
        ck_assert_uint_ge(ran_at[1], due_at[1]);
        ck_assert(!loop_timer_armed(b));
        loop_timer_free(a);
        loop_timer_free(b);
        loop_free(l);
}
END_TEST

/* A timer armed soon by a descriptor's callback runs in that iteration,
 * after its deferred calls; armed soon again by its own callback, in the
 * next iteration, which does not wait; stopped, it does not run. */
static struct loop_timer *soon_timer;
static uint64_t soon_turn[2];
static int soon_runs;

static void soon_defer_cb(void *data)
{
        (void)data;
        order[n_order++] = 1;
}

static void soon_timer_cb(struct loop_timer *t, void *data)
{
        soon_turn[soon_runs++] = loop_turns(data);
        order[n_order++] = 2;
        if (soon_runs < 2)
                loop_timer_soon(t);
}

static void soon_io_cb(struct loop_io *io, int fd, uint32_t events, void *data)
{
        char c;

        (void)events;
        order[n_order++] = 0;
        ck_assert_int_eq(read(fd, &c, 1), 1);
        loop_timer_soon(soon_timer);
        ck_assert_int_eq(loop_defer(data, soon_defer_cb, NULL), 0);
        loop_io_free(io);
}

START_TEST(test_timer_soon_runs_in_the_same_iteration)
{
        struct loop *l;
        int p[2];

        n_order = soon_runs = 0;
        ck_assert_int_eq(pipe(p), 0);
        ck_assert_int_eq(loop_new(&l), 0);
        ck_assert_int_eq(loop_timer_new(l, soon_timer_cb, l, &soon_timer), 0);
        ck_assert_int_eq(loop_io_add(l, p[0], EPOLLIN, soon_io_cb, l, NULL), 0);
        ck_assert_int_eq(write(p[1], "a", 1), 1);
        ck_assert_int_eq(loop_run_once(l, 10000000), 3);
        ck_assert_int_eq(n_order, 3);
        ck_assert_int_eq(order[0], 0);
        ck_assert_int_eq(order[1], 1);
        ck_assert_int_eq(order[2], 2);
        ck_assert_int_eq(soon_runs, 1);
        ck_assert_uint_eq(soon_turn[0], 0);
        ck_assert(loop_timer_armed(soon_timer));
        ck_assert_int_eq(loop_run_once(l, 10000000), 1);
        ck_assert_int_eq(soon_runs, 2);
        ck_assert_uint_eq(soon_turn[1], 1);
        ck_assert(!loop_timer_armed(soon_timer));
        loop_timer_soon(soon_timer);
        loop_timer_stop(soon_timer);
        ck_assert(!loop_timer_armed(soon_timer));
        ck_assert_int_eq(loop_run_once(l, 0), 0);
        ck_assert_int_eq(soon_runs, 2);
        loop_free(l);
        close(p[0]);
        close(p[1]);
}
END_TEST

UNIT_MAIN(test_turns_count_iterations, test_timers_fire_in_due_order, test_stopped_and_rearmed_timers,
          test_lazy_timerfd_never_fires_a_timer_early, test_io_readiness_and_self_free,
          test_deferred_calls_run_fifo_without_waiting, test_deferred_to_the_next_iteration, test_run_until_stop,
          test_timer_soon_runs_in_the_same_iteration)
