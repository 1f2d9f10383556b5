/*
 * curl_loop — libcurl multi on the epoll loop (see
 * src/util/curl_loop.h).
 *
 * libcurl tells us which sockets to watch (CURLMOPT_SOCKETFUNCTION) and when
 * to call it back (CURLMOPT_TIMERFUNCTION); we answer with
 * curl_multi_socket_action().  Finished transfers are collected after each
 * action and reported from a deferred call, so a done callback may start a
 * new transfer or free its handle without re-entering libcurl.
 *
 * Running out of memory never loses a transfer nor breaks the loop:
 *   - when the deferred call cannot be queued, a timer (armed without
 *     allocating) runs it instead;
 *   - when a socket cannot be watched, its transfer is ended with
 *     CURLE_OUT_OF_MEMORY from that timer (a socket callback that returns
 *     -1 would make libcurl mark the whole multi handle dead);
 *   - when libcurl itself runs out of memory in an action, it cannot say
 *     for which transfer, and its state may be damaged (libcurl 7.88 keeps
 *     a socket entry whose table it has freed, and divides by zero when
 *     the descriptor comes back): every transfer is ended the same way and
 *     the multi handle is replaced by a fresh one.  The owners start their
 *     transfers again, as after any failure.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "util/curl_loop.h"

struct transfer {
        CURL *easy;
        curl_loop_done_fn fn;
        void *data;
        bool failed; /* to be ended with CURLE_OUT_OF_MEMORY */
        struct transfer *next;
};

struct sock_watch {
        struct curl_loop *cl;
        struct loop_io *io;
        struct sock_watch *prev, *next;
};

struct curl_loop {
        struct loop *loop;
        CURLM *multi;      /* NULL after a replacement that found no memory */
        bool multi_broken; /* to be replaced once its transfers are out */
        struct loop_timer *timer;
        /* Runs run_done when it could not be deferred, and ends failed
         * transfers. */
        struct loop_timer *fallback;
        struct transfer *transfers;
        struct sock_watch *watches; /* every socket watched */
        int done_scheduled;
};

static void check_done(struct curl_loop *cl);

/* Ends every transfer (from the fallback timer) and replaces the multi
 * handle: libcurl ran out of memory somewhere in it. */
static void fail_all(struct curl_loop *cl)
{
        for (struct transfer *t = cl->transfers; t; t = t->next)
                t->failed = true;
        cl->multi_broken = true;
        loop_timer_arm(cl->fallback, 0);
}

static void on_io(struct loop_io *io, int fd, uint32_t events, void *data)
{
        struct curl_loop *cl = ((struct sock_watch *)data)->cl;
        int mask = 0, running;

        (void)io;
        if (!cl->multi || cl->multi_broken)
                return;
        if (events & EPOLLIN)
                mask |= CURL_CSELECT_IN;
        if (events & EPOLLOUT)
                mask |= CURL_CSELECT_OUT;
        if (events & (EPOLLERR | EPOLLHUP))
                mask |= CURL_CSELECT_ERR;
        if (curl_multi_socket_action(cl->multi, fd, mask, &running) == CURLM_OUT_OF_MEMORY)
                fail_all(cl);
        check_done(cl);
}

static void watch_free(struct curl_loop *cl, struct sock_watch *sw)
{
        if (sw->prev)
                sw->prev->next = sw->next;
        else
                cl->watches = sw->next;
        if (sw->next)
                sw->next->prev = sw->prev;
        loop_io_free(sw->io);
        free(sw);
}

/* A socket of easy cannot be watched: the transfer would hang, so it is
 * ended from the fallback timer (libcurl may not be re-entered here). */
static int socket_failed(struct curl_loop *cl, CURL *easy)
{
        for (struct transfer *t = cl->transfers; t; t = t->next) {
                if (t->easy == easy) {
                        t->failed = true;
                        loop_timer_arm(cl->fallback, 0);
                }
        }
        return 0;
}

static int socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
        struct curl_loop *cl = userp;
        struct sock_watch *sw = socketp;
        uint32_t ev = 0;

        if (what == CURL_POLL_REMOVE) {
                if (sw) {
                        watch_free(cl, sw);
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
                        return socket_failed(cl, easy);
                sw->cl = cl;
                if (loop_io_add(cl->loop, fd, ev, on_io, sw, &sw->io) < 0) {
                        free(sw);
                        return socket_failed(cl, easy);
                }
                sw->next = cl->watches;
                if (sw->next)
                        sw->next->prev = sw;
                cl->watches = sw;
                curl_multi_assign(cl->multi, fd, sw);
                return 0;
        }
        return loop_io_modify(sw->io, ev) < 0 ? socket_failed(cl, easy) : 0;
}

static void on_timer(struct loop_timer *t, void *data)
{
        struct curl_loop *cl = data;
        int running;

        (void)t;
        if (!cl->multi || cl->multi_broken)
                return;
        if (curl_multi_socket_action(cl->multi, CURL_SOCKET_TIMEOUT, 0, &running) == CURLM_OUT_OF_MEMORY)
                fail_all(cl);
        check_done(cl);
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
        struct curl_loop *cl = userp;

        (void)multi;
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
        while (cl->multi && (msg = curl_multi_info_read(cl->multi, &left))) {
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
        if (cl->done_scheduled)
                return;
        if (loop_defer(cl->loop, run_done, cl) == 0)
                cl->done_scheduled = 1;
        else
                loop_timer_arm(cl->fallback, 0); /* cannot fail */
}

/* A multi handle set up for the loop.  0 or -ENOMEM. */
static int multi_setup(struct curl_loop *cl)
{
        cl->multi = curl_multi_init();
        if (!cl->multi)
                return -ENOMEM;
        curl_multi_setopt(cl->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
        curl_multi_setopt(cl->multi, CURLMOPT_SOCKETDATA, cl);
        curl_multi_setopt(cl->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
        curl_multi_setopt(cl->multi, CURLMOPT_TIMERDATA, cl);
        return 0;
}

/* Cleans the multi handle up (its transfers removed first) and forgets
 * the sockets it left watched. */
static void multi_drop(struct curl_loop *cl)
{
        if (cl->multi)
                curl_multi_cleanup(cl->multi);
        cl->multi = NULL;
        while (cl->watches)
                watch_free(cl, cl->watches);
        loop_timer_stop(cl->timer);
}

static void on_fallback(struct loop_timer *timer, void *data)
{
        struct curl_loop *cl = data;
        struct transfer *ended = NULL, **pt = &cl->transfers;

        (void)timer;
        if (!cl->multi_broken)
                run_done(cl);
        /* Out of the multi handle first, then the callbacks: they may
         * start transfers again, on the new handle. */
        while (*pt) {
                struct transfer *t = *pt;

                if (!t->failed) {
                        pt = &t->next;
                        continue;
                }
                *pt = t->next;
                if (cl->multi)
                        curl_multi_remove_handle(cl->multi, t->easy);
                t->next = ended;
                ended = t;
        }
        if (cl->multi_broken) {
                cl->multi_broken = false;
                multi_drop(cl);
                (void)multi_setup(cl); /* else at the next curl_loop_add() */
        }
        while (ended) {
                struct transfer *t = ended;

                ended = t->next;
                t->fn(t->data, t->easy, CURLE_OUT_OF_MEMORY);
                free(t);
        }
}

int curl_loop_new(struct loop *loop, struct curl_loop **ret_cl)
{
        struct curl_loop *cl = calloc(1, sizeof(*cl));
        int r = -ENOMEM;

        if (!cl)
                return -ENOMEM;
        cl->loop = loop;
        if ((r = multi_setup(cl)) < 0 || (r = loop_timer_new(loop, on_timer, cl, &cl->timer)) < 0 ||
            (r = loop_timer_new(loop, on_fallback, cl, &cl->fallback)) < 0)
                goto fail;
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
                if (cl->multi)
                        curl_multi_remove_handle(cl->multi, t->easy);
                free(t);
        }
        if (cl->done_scheduled)
                loop_defer_cancel(cl->loop, run_done, cl);
        multi_drop(cl);
        loop_timer_free(cl->timer);
        loop_timer_free(cl->fallback);
        free(cl);
}

int curl_loop_add(struct curl_loop *cl, CURL *easy, curl_loop_done_fn fn, void *data)
{
        struct transfer *t;

        if (!cl->multi && multi_setup(cl) < 0)
                return -ENOMEM;
        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->easy = easy;
        t->fn = fn;
        t->data = data;
        switch (curl_multi_add_handle(cl->multi, easy)) {
        case CURLM_OK:
                break;
        case CURLM_OUT_OF_MEMORY:
                free(t);
                return -ENOMEM;
        default:
                free(t);
                return -EIO;
        }
        t->next = cl->transfers;
        cl->transfers = t;
        /* Broken meanwhile: this one goes with the others. */
        if (cl->multi_broken)
                t->failed = true;
        return 0;
}

void curl_loop_cancel(struct curl_loop *cl, CURL **easy)
{
        if (!*easy)
                return;
        curl_loop_remove(cl, *easy);
        curl_easy_cleanup(*easy);
        *easy = NULL;
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
                        if (cl->multi)
                                curl_multi_remove_handle(cl->multi, easy);
                        return;
                }
        }
}

/* ---- the request-line guard -------------------------------------------------- */

static int guard_debug(CURL *easy, curl_infotype type, char *data, size_t size, void *userp)
{
        struct curl_guard *g = userp;
        const char *url = NULL, *q, *sp, *target, *end;

        if (type != CURLINFO_HEADER_OUT || g->mangled)
                return 0;
        /* "METHOD SP target SP version": anything else is not a request
         * line (a later piece of the same headers). */
        sp = memchr(data, ' ', size);
        if (!sp || sp == data || !(data[0] >= 'A' && data[0] <= 'Z'))
                return 0;
        target = sp + 1;
        end = memchr(target, ' ', size - (size_t)(target - data));
        if (!end || (size_t)(data + size - end) < 6 || memcmp(end, " HTTP/", 6) != 0)
                return 0;
        if (curl_easy_getinfo(easy, CURLINFO_EFFECTIVE_URL, &url) != CURLE_OK || !url)
                return 0;
        q = strchr(url, '?');
        /* A query that is there in the URL must be in the request. */
        if (q && q[1] && q[1] != '#' && !memchr(target, '?', (size_t)(end - target)))
                g->mangled = true;
        return 0;
}

void curl_guard_arm(CURL *easy, struct curl_guard *g)
{
        g->mangled = false;
        curl_easy_setopt(easy, CURLOPT_DEBUGFUNCTION, guard_debug);
        curl_easy_setopt(easy, CURLOPT_DEBUGDATA, g);
        curl_easy_setopt(easy, CURLOPT_VERBOSE, 1L);
}
