/* A listening TCP socket at "HOST:PORT": see tcp_listen.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "util/tcp_listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/str.h"

int tcp_split_host_port(const char *address, char **ret_host, char **ret_port)
{
        const char *colon;
        char *host;

        if (address[0] == '[') {
                const char *end = strchr(address, ']');

                if (!end || end[1] != ':')
                        return -EINVAL;
                host = strndup(address + 1, (size_t)(end - address - 1));
                colon = end + 1;
        } else {
                colon = strrchr(address, ':');
                if (!colon || strchr(address, ':') != colon)
                        return -EINVAL;
                host = strndup(address, (size_t)(colon - address));
        }
        if (!host)
                return -ENOMEM;
        if (!(*ret_port = strdup(colon + 1))) {
                free(host);
                return -ENOMEM;
        }
        *ret_host = host;
        return 0;
}

static bool is_loopback(const struct sockaddr *sa)
{
        if (sa->sa_family == AF_INET)
                return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
        if (sa->sa_family == AF_INET6)
                return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
        return false;
}

/* The address fd is bound to, as "ip:port" or "[ip]:port".  0 or -ENOMEM. */
static int bound_name(int fd, char **ret)
{
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        char ip[INET6_ADDRSTRLEN] = "?";
        unsigned port = 0;
        bool v6 = false;

        if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
                if (ss.ss_family == AF_INET) {
                        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, ip, sizeof(ip));
                        port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
                } else if (ss.ss_family == AF_INET6) {
                        v6 = true;
                        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, ip, sizeof(ip));
                        port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
                }
        }
        return asprintf(ret, v6 ? "[%s]:%u" : "%s:%u", ip, port) < 0 ? -ENOMEM : 0;
}

int tcp_listen(const char *address, bool loopback_only, const char *what, int *ret_fd, char **ret_name,
               struct buf *err)
{
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV | AI_PASSIVE}, *res = NULL;
        char *host = NULL, *port = NULL;
        int r, fd = -1, one = 1;

        if ((r = tcp_split_host_port(address, &host, &port)) < 0) {
                if (r == -ENOMEM) {
                        if (err)
                                buf_reset(err);
                        return r;
                }
                return buf_set_err(err, r, "%s \"%s\": expected HOST:PORT", what, address);
        }
        r = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
        if (r != 0) {
                if (r == EAI_MEMORY) {
                        r = -ENOMEM;
                        if (err)
                                buf_reset(err);
                } else {
                        r = buf_set_err(err, -EINVAL, "%s \"%s\": %s", what, address, gai_strerror(r));
                }
                goto out;
        }
        r = -EADDRNOTAVAIL;
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                if (loopback_only && !is_loopback(ai->ai_addr))
                        continue;
                fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
                if (fd < 0) {
                        r = -errno;
                        continue;
                }
                (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
                if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0)
                        break;
                r = -errno;
                close(fd);
                fd = -1;
        }
        if (fd < 0) {
                r = buf_set_err(err, r, "%s \"%s\": %s", what, address,
                                loopback_only && r == -EADDRNOTAVAIL ? "not a loopback address" : ERRNO_STR(r));
                goto out;
        }
        if (ret_name && (r = bound_name(fd, ret_name)) < 0) {
                close(fd);
                if (err)
                        buf_reset(err);
                goto out;
        }
        *ret_fd = fd;
        r = 0;
out:
        if (res)
                freeaddrinfo(res);
        free(host);
        free(port);
        return r;
}
