/* A small HTTP server for unit tests: see fake_http.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fake_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "failalloc.h"
#include <check.h>

static void conn_close(struct fake_http_conn *c)
{
        loop_io_free(c->io);
        close(c->fd);
        buf_free(&c->in);
        memset(c, 0, sizeof(*c));
        c->fd = -1;
}

/* Whether c->in holds a whole request (headers and Content-Length). */
static bool complete(const struct fake_http_conn *c)
{
        const char *end = strstr(c->in.data, "\r\n\r\n"), *cl = strcasestr(c->in.data, "content-length:");

        return end && cl && c->in.len - (size_t)(end + 4 - c->in.data) >= strtoul(cl + 15, NULL, 10);
}

const char *fake_http_body(const struct fake_http_conn *c)
{
        return strstr(c->in.data, "\r\n\r\n") + 4;
}

void fake_http_reply(struct fake_http_conn *c, long status, const struct buf *body)
{
        struct buf resp = BUF_INIT;

        buf_printf(&resp,
                   "HTTP/1.1 %ld Whatever\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                   "Connection: close\r\n\r\n%s",
                   status, body->len, body->data);
        ck_assert_int_eq(write(c->fd, resp.data, resp.len), (ssize_t)resp.len);
        buf_free(&resp);
        conn_close(c);
}

static void on_conn(struct loop_io *io, int fd, uint32_t events, void *data)
{
        struct fake_http *h = data;
        struct fake_http_conn *c = NULL;
        char b[4096];
        ssize_t n;

        (void)io;
        (void)events;
        failalloc_hold();
        for (int i = 0; i < FAKE_HTTP_CONNS; i++)
                if (h->conns[i].fd == fd)
                        c = &h->conns[i];
        n = read(fd, b, sizeof(b));
        if (n <= 0) {
                conn_close(c);
        } else {
                ck_assert_int_eq(buf_append(&c->in, b, (size_t)n), 0);
                if (complete(c) && !h->hold)
                        h->answer(h, c, h->data);
                else if (complete(c))
                        loop_io_modify(c->io, 0); /* held */
        }
        failalloc_release();
}

static void on_accept(struct loop_io *io, int fd, uint32_t events, void *data)
{
        struct fake_http *h = data;
        int cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

        (void)io;
        (void)events;
        if (cfd < 0)
                return;
        failalloc_hold();
        for (int i = 0; i < FAKE_HTTP_CONNS; i++) {
                if (h->conns[i].fd < 0) {
                        h->conns[i].fd = cfd;
                        buf_init(&h->conns[i].in);
                        ck_assert_int_eq(loop_io_add(h->loop, cfd, EPOLLIN, on_conn, h, &h->conns[i].io), 0);
                        failalloc_release();
                        return;
                }
        }
        ck_abort_msg("too many connections");
}

void fake_http_start(struct fake_http *h, struct loop *loop, fake_http_answer_fn answer, void *data)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(a);

        memset(h, 0, sizeof(*h));
        h->loop = loop;
        h->answer = answer;
        h->data = data;
        for (int i = 0; i < FAKE_HTTP_CONNS; i++)
                h->conns[i].fd = -1;
        h->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ck_assert_int_ge(h->lfd, 0);
        ck_assert_int_eq(bind(h->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
        ck_assert_int_eq(listen(h->lfd, 64), 0);
        ck_assert_int_eq(getsockname(h->lfd, (struct sockaddr *)&a, &len), 0);
        h->port = ntohs(a.sin_port);
        ck_assert_int_eq(loop_io_add(loop, h->lfd, EPOLLIN, on_accept, h, &h->lio), 0);
}

void fake_http_release(struct fake_http *h)
{
        h->hold = false;
        for (int i = 0; i < FAKE_HTTP_CONNS; i++)
                if (h->conns[i].fd >= 0 && complete(&h->conns[i]))
                        h->answer(h, &h->conns[i], h->data);
}

void fake_http_stop(struct fake_http *h)
{
        for (int i = 0; i < FAKE_HTTP_CONNS; i++)
                if (h->conns[i].fd >= 0)
                        conn_close(&h->conns[i]);
        loop_io_free(h->lio);
        h->lio = NULL;
        if (h->lfd >= 0)
                close(h->lfd);
        h->lfd = -1;
}
