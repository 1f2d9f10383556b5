/*
 * Unit tests: a TCP listener at "HOST:PORT" (util/tcp_listen), as the
 * metrics endpoint (loopback only) and the local Kubernetes API use it:
 * the address forms, the name of what was bound, loopback only, the
 * errors, and every allocation failing in turn.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "failalloc.h"
#include "unit.h"
#include "util/tcp_listen.h"

static void split_ok(const char *address, const char *host, const char *port)
{
        char *h = NULL, *p = NULL;

        ck_assert_int_eq(tcp_split_host_port(address, &h, &p), 0);
        ck_assert_str_eq(h, host);
        ck_assert_str_eq(p, port);
        free(h);
        free(p);
}

START_TEST(test_split)
{
        char *h = NULL, *p = NULL;

        split_ok("127.0.0.1:10255", "127.0.0.1", "10255");
        split_ok("[::1]:8080", "::1", "8080");
        split_ok(":6443", "", "6443");
        split_ok("localhost:", "localhost", "");
        /* A bare IPv6 address is ambiguous: its last colon is no port. */
        ck_assert_int_eq(tcp_split_host_port("::1:80", &h, &p), -EINVAL);
        ck_assert_int_eq(tcp_split_host_port("no-port", &h, &p), -EINVAL);
        ck_assert_int_eq(tcp_split_host_port("[::1]80", &h, &p), -EINVAL);
        ck_assert_int_eq(tcp_split_host_port("[::1", &h, &p), -EINVAL);
        ck_assert_ptr_null(h);
        ck_assert_ptr_null(p);
}
END_TEST

/* The port fd listens on. */
static unsigned port_of(int fd)
{
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);

        ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&ss, &len), 0);
        return ss.ss_family == AF_INET ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
                                       : ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

START_TEST(test_listen_loopback_names_what_it_bound)
{
        struct buf err = BUF_INIT;
        char *name = NULL, want[64];
        int fd = -1, c;
        struct sockaddr_in sin = {.sin_family = AF_INET};

        ck_assert_int_eq(tcp_listen("127.0.0.1:0", true, "test address", &fd, &name, &err), 0);
        ck_assert_int_ge(fd, 0);
        ck_assert(fcntl(fd, F_GETFL) & O_NONBLOCK);
        ck_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        (void)snprintf(want, sizeof(want), "127.0.0.1:%u", port_of(fd));
        ck_assert_str_eq(name, want);
        ck_assert_uint_eq(err.len, 0);

        /* It listens: a client connects. */
        sin.sin_port = htons((unsigned short)port_of(fd));
        sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        c = socket(AF_INET, SOCK_STREAM, 0);
        ck_assert_int_eq(connect(c, (struct sockaddr *)&sin, sizeof(sin)), 0);
        close(c);

        /* The same port again, while it is held. */
        (void)snprintf(want, sizeof(want), "127.0.0.1:%u", port_of(fd));
        {
                int fd2 = -1;

                ck_assert_int_eq(tcp_listen(want, true, "test address", &fd2, NULL, &err), -EADDRINUSE);
                ck_assert_int_eq(fd2, -1);
                ck_assert_ptr_nonnull(strstr(err.data, "test address \"127.0.0.1:"));
        }
        close(fd);
        free(name);
        buf_free(&err);
}
END_TEST

START_TEST(test_listen_v6_name_has_brackets)
{
        struct buf err = BUF_INIT;
        char *name = NULL;
        int fd = -1;

        if (tcp_listen("[::1]:0", true, "test address", &fd, &name, &err) < 0) {
                /* A host without IPv6 (some containers) cannot test it. */
                ck_assert_ptr_nonnull(err.data);
                buf_free(&err);
                return;
        }
        ck_assert_int_eq(strncmp(name, "[::1]:", 6), 0);
        close(fd);
        free(name);
        buf_free(&err);
}
END_TEST

START_TEST(test_listen_errors)
{
        struct buf err = BUF_INIT;
        int fd = -1;

        /* Every address but loopback is refused when loopback is asked. */
        ck_assert_int_eq(tcp_listen("0.0.0.0:0", true, "metrics address", &fd, NULL, &err), -EADDRNOTAVAIL);
        ck_assert_str_eq(err.data, "metrics address \"0.0.0.0:0\": not a loopback address");
        ck_assert_int_eq(fd, -1);
        ck_assert_int_eq(tcp_listen(":0", true, "metrics address", &fd, NULL, &err), -EADDRNOTAVAIL);

        ck_assert_int_eq(tcp_listen("nohostport", false, "--kube-api-address", &fd, NULL, &err), -EINVAL);
        ck_assert_str_eq(err.data, "--kube-api-address \"nohostport\": expected HOST:PORT");

        /* A port that is not a number: getaddrinfo() is told so. */
        ck_assert_int_eq(tcp_listen("127.0.0.1:http", false, "--kube-api-address", &fd, NULL, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err.data, "--kube-api-address \"127.0.0.1:http\": "));
        ck_assert_int_eq(fd, -1);

        /* Without loopback_only, an empty host is every address. */
        ck_assert_int_eq(tcp_listen(":0", false, "--kube-api-address", &fd, NULL, &err), 0);
        ck_assert_int_ge(fd, 0);
        close(fd);
        buf_free(&err);
}
END_TEST

/* Every allocation fails in turn: -ENOMEM with nothing open and nothing
 * leaked, or a listener (libc's resolver absorbs some of its own failed
 * allocations and goes on). */
START_TEST(test_listen_alloc_sweep)
{
        long enomem = 0;

        if (!failalloc_enabled())
                return;
        for (long n = 1;; n++) {
                struct buf err = BUF_INIT;
                char *name = NULL;
                int fd = -1, r, fds0 = dup(0);
                long live0 = failalloc_live();
                bool failed;

                close(fds0);
                failalloc_arm(n);
                r = tcp_listen("127.0.0.1:0", true, "test address", &fd, &name, &err);
                failed = failalloc_failed();
                failalloc_arm(0);
                ck_assert_msg(r == 0 || (failed && r == -ENOMEM), "allocation %ld: %d", n, r);
                if (r < 0) {
                        enomem++;
                        ck_assert_int_eq(fd, -1);
                        ck_assert_ptr_null(name);
                        /* No descriptor left open: the next one is the
                         * lowest free, as before. */
                        {
                                int probe = dup(0);

                                ck_assert_int_eq(probe, fds0);
                                close(probe);
                        }
                } else {
                        ck_assert_int_eq(r, 0);
                        close(fd);
                        free(name);
                }
                buf_free(&err);
                ck_assert_msg(failalloc_live() == live0, "allocation %ld: %ld block(s) leaked", n,
                              failalloc_live() - live0);
                if (!failed)
                        break;
        }
        /* Our own allocations (the split, the name) were among them. */
        ck_assert_int_ge(enomem, 3);
}
END_TEST

UNIT_MAIN(test_split, test_listen_loopback_names_what_it_bound, test_listen_v6_name_has_brackets, test_listen_errors,
          test_listen_alloc_sweep)
