/*
 * loop — the daemon's one event loop (epoll + one timerfd).
 *
 * Owns: the epoll descriptor, the timer heap and the deferred-call list.
 * Never: reads or writes the descriptors it watches (callbacks do), nor
 * closes them.
 *
 * Timers run on the monotonic clock in microseconds.  An idle loop sleeps in
 * epoll_wait until a descriptor is ready or the earliest timer is due: no
 * periodic wake-ups of its own.  Callbacks run on the loop's thread only.
 * Cost: timer arm/stop O(log n); a wake-up O(ready fds + due timers).
 */
#ifndef PODMUX_LOOP_H
#define PODMUX_LOOP_H

#include <stdbool.h>
#include <stdint.h>

#include "util/clock.h" /* the loop's time is mono_usec() */

struct loop;
struct loop_io;
struct loop_timer;

/* events is a mask of EPOLLIN / EPOLLOUT / EPOLLERR / EPOLLHUP. */
typedef void (*loop_io_fn)(struct loop_io *io, int fd, uint32_t events, void *data);
typedef void (*loop_timer_fn)(struct loop_timer *t, void *data);
typedef void (*loop_defer_fn)(void *data);

int loop_new(struct loop **ret_loop);
/* Frees the loop and every io/timer handle still registered.  NULL-safe. */
void loop_free(struct loop *l);
/* Runs until loop_stop() is called.  Returns 0 or -errno from epoll. */
int loop_run(struct loop *l);
/* Runs one iteration, waiting at most timeout_usec (-1: until an event).
 * Returns the number of callbacks run, or -errno. */
int loop_run_once(struct loop *l, int64_t timeout_usec);
void loop_stop(struct loop *l);
/* Iterations finished so far: what runs in one iteration, or between two
 * (outside any callback), sees one number; the next iteration's, the
 * next.  Lets a caller tell work in consecutive iterations (a stream)
 * from work after an idle wait.  O(1). */
uint64_t loop_turns(const struct loop *l);
/* Whether loop_stop() was called (tests only). */
bool loop_stopped(const struct loop *l);

/* Watches fd; the loop does not own fd.  The handle is owned by the loop
 * until loop_io_free(). */
int loop_io_add(struct loop *l, int fd, uint32_t events, loop_io_fn fn, void *data, struct loop_io **ret_io);
int loop_io_modify(struct loop_io *io, uint32_t events);
/* Stops watching and frees the handle; safe inside its own callback.
 * NULL-safe. */
void loop_io_free(struct loop_io *io);

int loop_timer_new(struct loop *l, loop_timer_fn fn, void *data, struct loop_timer **ret_timer);
/* (Re)arms the timer to fire once, delay_usec from now.  Never fails: the
 * timer's heap slot was reserved by loop_timer_new(). */
void loop_timer_arm(struct loop_timer *t, uint64_t delay_usec);
/* (Re)arms the timer to run once at the end of this iteration, after the
 * ready descriptors' callbacks and the deferred calls (from outside a
 * callback: in the next iteration, which then does not wait); armed so
 * by its own callback, in the next iteration.  No system call, and it
 * never fails (loop_defer() may).  A timer armed at 0 instead runs after
 * the next wait: that lets the loop look at its descriptors first. */
void loop_timer_soon(struct loop_timer *t);
void loop_timer_stop(struct loop_timer *t);
bool loop_timer_armed(const struct loop_timer *t);
/* NULL-safe; safe inside its own callback. */
void loop_timer_free(struct loop_timer *t);

/* Runs fn(data) once, at the end of the current iteration (or the next one
 * if called from outside a callback).  Calls are run in FIFO order.
 * Returns 0 or -ENOMEM. */
int loop_defer(struct loop *l, loop_defer_fn fn, void *data);
/* Runs fn(data) once, at the end of the next iteration (from outside a
 * callback, of the one that runs next, as loop_defer()), which then does
 * not wait for events.  Lets work look at the next iteration without a
 * timer.  Returns 0 or -ENOMEM. */
int loop_defer_next(struct loop *l, loop_defer_fn fn, void *data);
/* Drops pending deferred calls of fn with data, of both kinds (an object
 * being freed cancels what it scheduled).  NULL-safe. */
void loop_defer_cancel(struct loop *l, loop_defer_fn fn, void *data);

#endif
