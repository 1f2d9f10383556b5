/*
 * fake_http — a small HTTP/1.1 server on the loopback and on a test's own
 * loop, for unit tests that need an API server in their process (the
 * reviews of test_review.c and test_kube_api_auth.c).  It reads each
 * request whole (headers and Content-Length body) and hands it to the
 * test's answer function, which replies with fake_http_reply(); every
 * reply closes its connection.  Its own allocations are held out of
 * failalloc's count, so a sweep fails only the code under test.
 */
#ifndef PODMUX_TESTS_FAKE_HTTP_H
#define PODMUX_TESTS_FAKE_HTTP_H

#include <stdbool.h>

#include "util/buf.h"
#include "util/loop.h"

#define FAKE_HTTP_CONNS 32

struct fake_http_conn {
        int fd; /* -1: free */
        struct loop_io *io;
        struct buf in; /* what was read */
};

struct fake_http;
/* A whole request is in c->in: answer it with fake_http_reply(). */
typedef void (*fake_http_answer_fn)(struct fake_http *h, struct fake_http_conn *c, void *data);

struct fake_http {
        struct loop *loop;
        int lfd;
        unsigned port;
        struct loop_io *lio;
        struct fake_http_conn conns[FAKE_HTTP_CONNS];
        bool hold; /* requests read are not answered until fake_http_release() */
        fake_http_answer_fn answer;
        void *data;
};

/* Listens on 127.0.0.1 (h->port) and serves on loop. */
void fake_http_start(struct fake_http *h, struct loop *loop, fake_http_answer_fn answer, void *data);
/* Answers what was held, and no longer holds. */
void fake_http_release(struct fake_http *h);
/* The server goes away: connections are refused from now on.  Once or
 * more. */
void fake_http_stop(struct fake_http *h);
/* The body of the request in c. */
const char *fake_http_body(const struct fake_http_conn *c);
/* Writes a reply with status and body (JSON) and closes c. */
void fake_http_reply(struct fake_http_conn *c, long status, const struct buf *body);

#endif
