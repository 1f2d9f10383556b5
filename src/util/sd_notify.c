/*
 * sd_notify — see src/util/sd_notify.h.
 *
 * The protocol is systemd's sd_notify(3): the service manager binds a
 * datagram socket, passes its address in $NOTIFY_SOCKET, and reads one
 * message per datagram; it learns who sent it from the kernel (it sets
 * SO_PASSCRED), so nothing but the text is sent.  An address starting
 * with '@' is in the abstract namespace: the '@' becomes a NUL byte and
 * the address length ends at the name, with no terminating NUL.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/sd_notify.h"

/* Fills addr from address; 0 or -EINVAL. */
static int parse_address(const char *address, struct sockaddr_un *addr, socklen_t *ret_len)
{
        size_t len = strlen(address);

        if ((address[0] != '/' && address[0] != '@') || len < 2 || len > sizeof(addr->sun_path) ||
            (address[0] == '/' && len == sizeof(addr->sun_path)))
                return -EINVAL;
        memset(addr, 0, sizeof(*addr));
        addr->sun_family = AF_UNIX;
        memcpy(addr->sun_path, address, len);
        if (address[0] == '@') {
                addr->sun_path[0] = '\0';
                *ret_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
        } else {
                *ret_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
        }
        return 0;
}

int sd_notify_open(struct sd_notify *n, const char *address)
{
        int fd, r;

        n->fd = -1;
        if (!address || !address[0])
                return 0;
        if ((r = parse_address(address, &n->addr, &n->addr_len)) < 0)
                return r;
        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        n->fd = fd;
        return 1;
}

bool sd_notify_on(const struct sd_notify *n)
{
        return n->fd >= 0;
}

int sd_notify_send(struct sd_notify *n, const char *msg)
{
        ssize_t w;

        if (n->fd < 0)
                return 0;
        do
                w = sendto(n->fd, msg, strlen(msg), MSG_NOSIGNAL | MSG_DONTWAIT, (const struct sockaddr *)&n->addr,
                           n->addr_len);
        while (w < 0 && errno == EINTR);
        return w < 0 ? -errno : 0;
}

void sd_notify_close(struct sd_notify *n)
{
        if (!n)
                return;
        if (n->fd >= 0)
                close(n->fd);
        n->fd = -1;
}

/* A positive decimal number that fits in 63 bits, or -EINVAL. */
static int parse_positive(const char *s, uint64_t *ret)
{
        uint64_t v = 0;

        if (!*s)
                return -EINVAL;
        for (; *s; s++) {
                if (*s < '0' || *s > '9' || v > (UINT64_MAX / 2 - 9) / 10)
                        return -EINVAL;
                v = v * 10 + (uint64_t)(*s - '0');
        }
        if (v == 0)
                return -EINVAL;
        *ret = v;
        return 0;
}

int sd_notify_watchdog(const char *usec, const char *pid, pid_t self, uint64_t *ret_usec)
{
        uint64_t u, p;

        if (!usec || !usec[0])
                return 0;
        if (parse_positive(usec, &u) < 0)
                return -EINVAL;
        if (pid && pid[0]) {
                if (parse_positive(pid, &p) < 0)
                        return -EINVAL;
                if (p != (uint64_t)self)
                        return 0;
        }
        *ret_usec = u;
        return 1;
}
