/* Unit tests: messages to a service manager's notify socket (util/sd_notify),
 * received on a datagram socket the test binds itself. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/sd_notify.h"
#include "unit.h"

/* A receiving socket, as systemd binds it. */
struct receiver {
        int fd;
        char dir[64];
        char address[128]; /* what $NOTIFY_SOCKET would hold */
};

/* Binds a datagram socket at a path in a new directory, or in the
 * abstract namespace. */
static void receiver_open(struct receiver *rc, int abstract)
{
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        socklen_t len;

        rc->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(rc->fd, 0);
        rc->dir[0] = '\0';
        if (abstract) {
                (void)snprintf(rc->address, sizeof(rc->address), "@podmux-test-sd-notify-%ld", (long)getpid());
                memcpy(a.sun_path + 1, rc->address + 1, strlen(rc->address) - 1);
                len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(rc->address));
        } else {
                (void)snprintf(rc->dir, sizeof(rc->dir), "/tmp/podmux-sd-notify-XXXXXX");
                ck_assert_ptr_nonnull(mkdtemp(rc->dir));
                (void)snprintf(rc->address, sizeof(rc->address), "%s/notify", rc->dir);
                memcpy(a.sun_path, rc->address, strlen(rc->address) + 1);
                len = (socklen_t)sizeof(a);
        }
        ck_assert_int_eq(bind(rc->fd, (struct sockaddr *)&a, len), 0);
}

static void receiver_close(struct receiver *rc)
{
        if (rc->fd >= 0)
                close(rc->fd);
        rc->fd = -1;
        if (rc->dir[0]) {
                (void)unlink(rc->address);
                (void)rmdir(rc->dir);
                rc->dir[0] = '\0';
        }
}

/* The next datagram, as a string (the test never sends more than 255). */
static const char *receive(struct receiver *rc, char *buf, size_t size)
{
        ssize_t n = recv(rc->fd, buf, size - 1, MSG_DONTWAIT);

        ck_assert_int_ge(n, 0);
        buf[n] = '\0';
        return buf;
}

START_TEST(test_off_without_address)
{
        struct sd_notify n = SD_NOTIFY_INIT;

        ck_assert_int_eq(sd_notify_open(&n, NULL), 0);
        ck_assert(!sd_notify_on(&n));
        ck_assert_int_eq(sd_notify_send(&n, "READY=1"), 0);
        sd_notify_close(&n);
        ck_assert_int_eq(sd_notify_open(&n, ""), 0);
        ck_assert(!sd_notify_on(&n));
        sd_notify_close(&n);
        sd_notify_close(NULL);
}
END_TEST

START_TEST(test_bad_addresses)
{
        /* Relative, bare prefixes, other families (systemd's vsock:), and
         * one byte too long for sun_path (a path also needs its NUL). */
        char path108[110], abstract109[111];
        const char *bad[] = {"notify", "./notify", "/", "@", "vsock:2:1234", path108, abstract109};
        struct sd_notify n = SD_NOTIFY_INIT;

        memset(path108, 'a', 108);
        path108[0] = '/';
        path108[108] = '\0';
        memset(abstract109, 'a', 109);
        abstract109[0] = '@';
        abstract109[109] = '\0';
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ck_assert_msg(sd_notify_open(&n, bad[i]) == -EINVAL, "address \"%s\" accepted", bad[i]);
                ck_assert(!sd_notify_on(&n));
                ck_assert_int_eq(sd_notify_send(&n, "READY=1"), 0);
                sd_notify_close(&n);
        }
        /* The longest of each that fits. */
        path108[107] = '\0';
        ck_assert_int_eq(sd_notify_open(&n, path108), 1);
        sd_notify_close(&n);
        abstract109[108] = '\0';
        ck_assert_int_eq(sd_notify_open(&n, abstract109), 1);
        sd_notify_close(&n);
}
END_TEST

/* One datagram per message, lines kept together. */
static void check_delivery(int abstract)
{
        struct receiver rc;
        struct sd_notify n = SD_NOTIFY_INIT;
        char buf[256];

        receiver_open(&rc, abstract);
        ck_assert_int_eq(sd_notify_open(&n, rc.address), 1);
        ck_assert(sd_notify_on(&n));
        ck_assert_int_eq(sd_notify_send(&n, "READY=1\nSTATUS=serving"), 0);
        ck_assert_int_eq(sd_notify_send(&n, "WATCHDOG=1"), 0);
        ck_assert_str_eq(receive(&rc, buf, sizeof(buf)), "READY=1\nSTATUS=serving");
        ck_assert_str_eq(receive(&rc, buf, sizeof(buf)), "WATCHDOG=1");
        sd_notify_close(&n);
        ck_assert(!sd_notify_on(&n));
        sd_notify_close(&n);
        receiver_close(&rc);
}

START_TEST(test_path_socket)
{
        check_delivery(0);
}
END_TEST

START_TEST(test_abstract_socket)
{
        check_delivery(1);
}
END_TEST

/* The manager's socket gone (removed, or its file left behind by a
 * closed socket), and its queue full: sendto's error, nothing retried. */
START_TEST(test_send_errors)
{
        struct receiver rc;
        struct sd_notify n = SD_NOTIFY_INIT;
        int r = 0;

        receiver_open(&rc, 0);
        ck_assert_int_eq(sd_notify_open(&n, rc.address), 1);
        for (int i = 0; i < 1000000 && r == 0; i++)
                r = sd_notify_send(&n, "WATCHDOG=1");
        ck_assert_int_eq(r, -EAGAIN);
        close(rc.fd);
        rc.fd = -1;
        ck_assert_int_eq(sd_notify_send(&n, "READY=1"), -ECONNREFUSED);
        ck_assert_int_eq(unlink(rc.address), 0);
        ck_assert_int_eq(sd_notify_send(&n, "READY=1"), -ENOENT);
        sd_notify_close(&n);
        receiver_close(&rc);
}
END_TEST

/* No descriptor left for the socket: the error, and n off. */
START_TEST(test_no_descriptor)
{
        struct sd_notify n = SD_NOTIFY_INIT;
        struct rlimit saved, none;

        ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &saved), 0);
        none = saved;
        none.rlim_cur = 0;
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &none), 0);
        int r = sd_notify_open(&n, "/run/systemd/notify");
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &saved), 0);
        ck_assert_int_eq(r, -EMFILE);
        ck_assert(!sd_notify_on(&n));
        sd_notify_close(&n);
}
END_TEST

START_TEST(test_watchdog)
{
        pid_t self = getpid();
        char me[32], other[32];
        uint64_t usec = 7;
        const char *bad[] = {"abc", "-5", "0", "12x", " 5", "99999999999999999999"};

        (void)snprintf(me, sizeof(me), "%ld", (long)self);
        (void)snprintf(other, sizeof(other), "%ld", (long)self + 1);
        ck_assert_int_eq(sd_notify_watchdog(NULL, NULL, self, &usec), 0);
        ck_assert_int_eq(sd_notify_watchdog("", me, self, &usec), 0);
        ck_assert_uint_eq(usec, 7);
        ck_assert_int_eq(sd_notify_watchdog("30000000", NULL, self, &usec), 1);
        ck_assert_uint_eq(usec, 30000000);
        ck_assert_int_eq(sd_notify_watchdog("2000000", me, self, &usec), 1);
        ck_assert_uint_eq(usec, 2000000);
        ck_assert_int_eq(sd_notify_watchdog("2000000", "", self, &usec), 1);
        /* Meant for another process: not ours to ping. */
        usec = 7;
        ck_assert_int_eq(sd_notify_watchdog("2000000", other, self, &usec), 0);
        ck_assert_uint_eq(usec, 7);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ck_assert_msg(sd_notify_watchdog(bad[i], NULL, self, &usec) == -EINVAL, "WATCHDOG_USEC \"%s\"",
                              bad[i]);
                ck_assert_msg(sd_notify_watchdog("1000", bad[i], self, &usec) == -EINVAL, "WATCHDOG_PID \"%s\"",
                              bad[i]);
        }
        ck_assert_uint_eq(usec, 7);
}
END_TEST

UNIT_MAIN(test_off_without_address, test_bad_addresses, test_path_socket, test_abstract_socket, test_send_errors,
          test_no_descriptor, test_watchdog)
