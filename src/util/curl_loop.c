/*
 * curl_loop — libcurl multi on the epoll loop (see
 * include/podmux/curl_loop.h).
 *
 * libcurl tells us which sockets to watch (CURLMOPT_SOCKETFUNCTION) and when
 * to call it back (CURLMOPT_TIMERFUNCTION); we answer with
 * curl_multi_socket_action().  Finished transfers are collected after each
 * action and reported from a deferred call, so a done callback may start a
 * new transfer or free its handle without re-entering libcurl.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "podmux/curl_loop.h"

struct transfer {
        CURL *easy;
        curl_loop_done_fn fn;
        void *data;
        struct transfer *next;
};

struct curl_loop {
        struct loop *loop;
        CURLM *multi;
        struct loop_timer *timer;
        struct transfer *transfers;
        int done_scheduled;
};

struct sock_watch {
        struct curl_loop *cl;
        struct loop_io *io;
};

static void check_done(struct curl_loop *cl);

static void on_io(struct loop_io *io, int fd, uint32_t events, void *data)
{
        struct curl_loop *cl = ((struct sock_watch *)data)->cl;
        int mask = 0, running;

        if (events & EPOLLIN)
                mask |= CURL_CSELECT_IN;
        if (events & EPOLLOUT)
                mask |= CURL_CSELECT_OUT;
        if (events & (EPOLLERR | EPOLLHUP))
                mask |= CURL_CSELECT_ERR;
        curl_multi_socket_action(cl->multi, fd, mask, &running);
        check_done(cl);
}

static int socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
        struct curl_loop *cl = userp;
        struct sock_watch *sw = socketp;
        uint32_t ev = 0;

        if (what == CURL_POLL_REMOVE) {
                if (sw) {
                        loop_io_free(sw->io);
                        free(sw);
                        curl_multi_assign(cl->multi, fd, NULL);
                }
                return 0;
        }
        if (what & CURL_POLL_IN)
                ev |= EPOLLIN;
        if (what & CURL_POLL_OUT)
                ev |= EPOLLOUT;
        if (!sw) {
                sw = calloc(1, sizeof(*sw));
                if (!sw)
                        return -1;
                sw->cl = cl;
                if (loop_io_add(cl->loop, fd, ev, on_io, sw, &sw->io) < 0) {
                        free(sw);
                        return -1;
                }
                curl_multi_assign(cl->multi, fd, sw);
                return 0;
        }
        return loop_io_modify(sw->io, ev) < 0 ? -1 : 0;
}

static void on_timer(struct loop_timer *t, void *data)
{
        struct curl_loop *cl = data;
        int running;

        curl_multi_socket_action(cl->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        check_done(cl);
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
        struct curl_loop *cl = userp;

        if (timeout_ms < 0)
                loop_timer_stop(cl->timer);
        else
                loop_timer_arm(cl->timer, (uint64_t)timeout_ms * 1000u);
        return 0;
}

static void run_done(void *data)
{
        struct curl_loop *cl = data;
        CURLMsg *msg;
        int left;

        cl->done_scheduled = 0;
        while ((msg = curl_multi_info_read(cl->multi, &left))) {
                struct transfer **pt, *t = NULL;

                if (msg->msg != CURLMSG_DONE)
                        continue;
                for (pt = &cl->transfers; *pt; pt = &(*pt)->next) {
                        if ((*pt)->easy == msg->easy_handle) {
                                t = *pt;
                                *pt = t->next;
                                break;
                        }
                }
                {
                        CURL *easy = msg->easy_handle;
                        CURLcode result = msg->data.result;

                        /* msg is invalid after the remove. */
                        curl_multi_remove_handle(cl->multi, easy);
                        if (t) {
                                t->fn(t->data, easy, result);
                                free(t);
                        }
                }
        }
}

static void check_done(struct curl_loop *cl)
{
        if (!cl->done_scheduled && loop_defer(cl->loop, run_done, cl) == 0)
                cl->done_scheduled = 1;
}

int curl_loop_new(struct loop *loop, struct curl_loop **ret_cl)
{
        struct curl_loop *cl = calloc(1, sizeof(*cl));
        int r = -ENOMEM;

        if (!cl)
                return -ENOMEM;
        cl->loop = loop;
        cl->multi = curl_multi_init();
        if (!cl->multi)
                goto fail;
        if ((r = loop_timer_new(loop, on_timer, cl, &cl->timer)) < 0)
                goto fail;
        curl_multi_setopt(cl->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
        curl_multi_setopt(cl->multi, CURLMOPT_SOCKETDATA, cl);
        curl_multi_setopt(cl->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
        curl_multi_setopt(cl->multi, CURLMOPT_TIMERDATA, cl);
        *ret_cl = cl;
        return 0;
fail:
        curl_loop_free(cl);
        return r;
}

void curl_loop_free(struct curl_loop *cl)
{
        if (!cl)
                return;
        while (cl->transfers) {
                struct transfer *t = cl->transfers;

                cl->transfers = t->next;
                curl_multi_remove_handle(cl->multi, t->easy);
                free(t);
        }
        if (cl->done_scheduled)
                loop_defer_cancel(cl->loop, run_done, cl);
        if (cl->multi)
                curl_multi_cleanup(cl->multi);
        loop_timer_free(cl->timer);
        free(cl);
}

int curl_loop_add(struct curl_loop *cl, CURL *easy, curl_loop_done_fn fn, void *data)
{
        struct transfer *t = calloc(1, sizeof(*t));

        if (!t)
                return -ENOMEM;
        t->easy = easy;
        t->fn = fn;
        t->data = data;
        if (curl_multi_add_handle(cl->multi, easy) != CURLM_OK) {
                free(t);
                return -EIO;
        }
        t->next = cl->transfers;
        cl->transfers = t;
        return 0;
}

void curl_loop_remove(struct curl_loop *cl, CURL *easy)
{
        if (!cl || !easy)
                return;
        for (struct transfer **pt = &cl->transfers; *pt; pt = &(*pt)->next) {
                if ((*pt)->easy == easy) {
                        struct transfer *t = *pt;

                        *pt = t->next;
                        free(t);
                        curl_multi_remove_handle(cl->multi, easy);
                        return;
                }
        }
}
