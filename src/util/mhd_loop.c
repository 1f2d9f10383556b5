/*
 * mhd_loop — a libmicrohttpd daemon driven by our loop (see
 * src/util/mhd_loop.h).
 *
 * libmicrohttpd in "external epoll" mode: its epoll descriptor sits on
 * our loop, readable whenever one of its sockets is; each wake-up runs the
 * daemon once and re-arms the timer to its next connection timeout.
 */
#include <errno.h>
#include <stddef.h>
#include <sys/epoll.h>

#include "util/mhd_loop.h"

static void rearm(struct mhd_loop *ml)
{
        MHD_UNSIGNED_LONG_LONG ms_left;

        if (MHD_get_timeout(ml->mhd, &ms_left) == MHD_YES)
                loop_timer_arm(ml->timer, (uint64_t)ms_left * 1000u);
        else
                loop_timer_stop(ml->timer);
}

static void on_io(struct loop_io *io, int fd, uint32_t events, void *data)
{
        struct mhd_loop *ml = data;

        (void)io;
        (void)fd;
        (void)events;
        (void)MHD_run(ml->mhd);
        rearm(ml);
}

static void on_timer(struct loop_timer *t, void *data)
{
        struct mhd_loop *ml = data;

        (void)t;
        (void)MHD_run(ml->mhd);
        rearm(ml);
}

int mhd_loop_attach(struct mhd_loop *ml, struct loop *loop, struct MHD_Daemon *mhd)
{
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(mhd, MHD_DAEMON_INFO_EPOLL_FD);
        int r;

        ml->mhd = mhd;
        if (!info || info->epoll_fd < 0)
                return -EIO;
        if ((r = loop_timer_new(loop, on_timer, ml, &ml->timer)) < 0 ||
            (r = loop_io_add(loop, info->epoll_fd, EPOLLIN, on_io, ml, &ml->io)) < 0) {
                mhd_loop_detach(ml);
                return r;
        }
        return 0;
}

void mhd_loop_kick(struct mhd_loop *ml)
{
        if (ml->timer)
                loop_timer_arm(ml->timer, 0);
}

void mhd_loop_detach(struct mhd_loop *ml)
{
        loop_io_free(ml->io);
        loop_timer_free(ml->timer);
        ml->io = NULL;
        ml->timer = NULL;
}
