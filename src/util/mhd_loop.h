/*
 * mhd_loop — a libmicrohttpd daemon driven by our loop.
 *
 * Owns: the loop_io on the daemon's epoll descriptor and the timer that
 * follows MHD_get_timeout() for idle connections.  Never owns the daemon
 * itself (the caller starts and stops it) and never logs.  The daemon
 * must have been started with MHD_USE_EPOLL and no thread of its own.
 *
 * Cost: each wake-up is one MHD_run() plus re-arming one timer.
 */
#ifndef PODMUX_MHD_LOOP_H
#define PODMUX_MHD_LOOP_H

#include <microhttpd.h>

#include "util/loop.h"

struct mhd_loop {
        struct MHD_Daemon *mhd; /* borrowed */
        struct loop_io *io;
        struct loop_timer *timer;
};

/* Puts mhd's epoll descriptor on loop.  0, -EIO (the daemon has no epoll
 * descriptor) or -ENOMEM; on failure ml holds nothing to detach, and
 * mhd_loop_detach() is still safe on it. */
int mhd_loop_attach(struct mhd_loop *ml, struct loop *loop, struct MHD_Daemon *mhd);

/* Runs the daemon at the loop's next turn: after MHD_resume_connection(),
 * whose connection waits for the daemon to run.  Allocates nothing. */
void mhd_loop_kick(struct mhd_loop *ml);

/* Takes the descriptor off the loop; the daemon stays the caller's.
 * Safe on a zeroed or half-attached mhd_loop. */
void mhd_loop_detach(struct mhd_loop *ml);

#endif
