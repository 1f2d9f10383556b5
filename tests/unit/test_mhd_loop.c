/* Unit tests: a libmicrohttpd daemon on our loop (util/mhd_loop). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <microhttpd.h>

#include "failalloc.h"
#include "unit.h"
#include "util/loop.h"
#include "util/mhd_loop.h"

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *data, size_t *size, void **state)
{
        static const char body[] = "hello";
        struct MHD_Response *resp;
        enum MHD_Result ret;

        (void)cls;
        (void)url;
        (void)method;
        (void)version;
        (void)data;
        (void)size;
        if (!*state) {
                *state = conn;
                return MHD_YES;
        }
        resp = MHD_create_response_from_buffer(sizeof(body) - 1, (void *)body, MHD_RESPMEM_PERSISTENT);
        ret = MHD_queue_response(conn, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return ret;
}

/* A daemon on a unix socket of a temporary directory, in epoll mode. */
static struct MHD_Daemon *start(char *path, size_t size, unsigned flags)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        char dir[] = "/tmp/podmux-mhd-XXXXXX";

        ck_assert_int_ge(fd, 0);
        ck_assert_ptr_nonnull(mkdtemp(dir));
        (void)snprintf(path, size, "%s/s", dir);
        memcpy(sa.sun_path, path, strlen(path) + 1);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        ck_assert_int_eq(listen(fd, 8), 0);
        return MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_END);
}

static void cleanup(char *path)
{
        (void)unlink(path);
        *strrchr(path, '/') = '\0';
        (void)rmdir(path);
}

struct answer {
        struct loop *loop;
        int fd;
        char text[256];
        size_t len;
        struct loop_io *io;
};

static void on_answer(struct loop_io *io, int fd, uint32_t events, void *data)
{
        struct answer *a = data;
        ssize_t n = read(fd, a->text + a->len, sizeof(a->text) - 1 - a->len);

        (void)io;
        (void)events;
        if (n > 0)
                a->len += (size_t)n;
        a->text[a->len] = '\0';
        if (n <= 0 || strstr(a->text, "hello"))
                loop_stop(a->loop);
}

/* A request is answered by the loop alone: each wake-up runs the daemon. */
START_TEST(test_answers_on_the_loop)
{
        static const char req[] = "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        struct mhd_loop ml = {0};
        struct answer a = {0};
        char path[128];
        struct MHD_Daemon *mhd = start(path, sizeof(path), MHD_USE_EPOLL);

        ck_assert_ptr_nonnull(mhd);
        ck_assert_int_eq(loop_new(&a.loop), 0);
        ck_assert_int_eq(mhd_loop_attach(&ml, a.loop, mhd), 0);
        a.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        memcpy(sa.sun_path, path, strlen(path) + 1);
        ck_assert_int_eq(connect(a.fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        ck_assert_int_eq(write(a.fd, req, sizeof(req) - 1), (ssize_t)(sizeof(req) - 1));
        ck_assert_int_eq(loop_io_add(a.loop, a.fd, EPOLLIN, on_answer, &a, &a.io), 0);
        mhd_loop_kick(&ml);
        ck_assert_int_eq(loop_run(a.loop), 0);
        ck_assert_msg(strstr(a.text, "200 OK") && strstr(a.text, "hello"), "%s", a.text);
        loop_io_free(a.io);
        close(a.fd);
        mhd_loop_detach(&ml);
        mhd_loop_detach(&ml); /* twice: harmless */
        MHD_stop_daemon(mhd);
        loop_free(a.loop);
        cleanup(path);
}
END_TEST

/* A daemon without an epoll descriptor cannot be put on the loop: -EIO,
 * and nothing is left to detach. */
START_TEST(test_no_epoll_refused)
{
        struct mhd_loop ml = {0};
        struct loop *loop = NULL;
        char path[128];
        struct MHD_Daemon *mhd = start(path, sizeof(path), 0);

        ck_assert_ptr_nonnull(mhd);
        ck_assert_int_eq(loop_new(&loop), 0);
        ck_assert_int_eq(mhd_loop_attach(&ml, loop, mhd), -EIO);
        ck_assert_ptr_null(ml.io);
        ck_assert_ptr_null(ml.timer);
        mhd_loop_kick(&ml); /* allocates nothing, touches nothing */
        mhd_loop_detach(&ml);
        MHD_stop_daemon(mhd);
        loop_free(loop);
        cleanup(path);
}
END_TEST

/* Each allocation of the attach failing in turn: -ENOMEM, nothing held
 * (the loop may keep the room it grew until it is freed). */
START_TEST(test_attach_out_of_memory)
{
        long start_live = failalloc_live();
        char path[128];
        struct MHD_Daemon *mhd = start(path, sizeof(path), MHD_USE_EPOLL);
        struct loop *loop = NULL;

        ck_assert_ptr_nonnull(mhd);
        ck_assert_int_eq(loop_new(&loop), 0);
        if (failalloc_enabled()) {
                for (long n = 1;; n++) {
                        struct mhd_loop ml = {0};
                        int r;

                        failalloc_arm(n);
                        r = mhd_loop_attach(&ml, loop, mhd);
                        failalloc_arm(0);
                        if (r == 0) {
                                mhd_loop_detach(&ml);
                                ck_assert_int_gt(n, 1);
                                break;
                        }
                        ck_assert_int_eq(r, -ENOMEM);
                        ck_assert_ptr_null(ml.io);
                        ck_assert_ptr_null(ml.timer);
                }
        }
        MHD_stop_daemon(mhd);
        loop_free(loop);
        cleanup(path);
        ck_assert_int_eq(failalloc_live(), start_live);
}
END_TEST

UNIT_MAIN(test_answers_on_the_loop, test_no_epoll_refused, test_attach_out_of_memory)
