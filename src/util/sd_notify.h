/*
 * sd_notify — tells a service manager (systemd, Type=notify) how the
 * daemon is doing, without libsystemd: each message is one datagram of
 * "KEY=value" lines to the AF_UNIX socket named by $NOTIFY_SOCKET
 * (doc/design.md "Service manager").
 *
 * Owns: one datagram socket, made by sd_notify_open() so that a later
 * message never needs a descriptor (the daemon may have run out of them
 * exactly when the watchdog must be fed).
 * Never: logs (the caller does, once per reason); reads the environment
 * (the caller passes $NOTIFY_SOCKET and $WATCHDOG_*); blocks (a full
 * receiver is -EAGAIN); retries.
 * Cost: one sendto() per message.
 */
#ifndef PODMUX_SD_NOTIFY_H
#define PODMUX_SD_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

/* A zeroed struct is not valid: use SD_NOTIFY_INIT or sd_notify_open(). */
struct sd_notify {
        int fd;                  /* SOCK_DGRAM, close-on-exec; -1: off */
        struct sockaddr_un addr; /* the manager's socket */
        socklen_t addr_len;
};

#define SD_NOTIFY_INIT                                                                                                 \
        {                                                                                                              \
                .fd = -1                                                                                               \
        }

/*
 * Readies n for the socket at address: an absolute path, or "@name" for
 * an abstract socket (the '@' stands for the leading NUL byte).
 * Returns 1 when n is on, 0 when address is NULL or empty (n off: not run
 * by a service manager), -EINVAL for any other address or one too long
 * for sun_path, -errno from socket().  On every return n is either on or
 * off, never half made; sd_notify_close() takes it either way.
 */
int sd_notify_open(struct sd_notify *n, const char *address);

bool sd_notify_on(const struct sd_notify *n);

/*
 * Sends msg ("READY=1", "STATUS=...", several lines for several at once)
 * as one datagram.  Returns 0 when sent or when n is off, -errno from
 * sendto() otherwise (-ENOENT or -ECONNREFUSED: nobody listens there any
 * more; -EAGAIN: the manager's queue is full).
 */
int sd_notify_send(struct sd_notify *n, const char *msg);

/* Closes the socket; n is off afterwards.  NULL-safe. */
void sd_notify_close(struct sd_notify *n);

/*
 * Whether the manager asks for watchdog pings, from the values of
 * $WATCHDOG_USEC (the period, decimal microseconds, > 0) and $WATCHDOG_PID
 * (the process meant, decimal; when set and not self, the pings are
 * another process's business).  Returns 1 with *ret_usec set, 0 when
 * usec is NULL or empty or pid names another process, -EINVAL for a value
 * that is not a positive decimal number.  Ping at half the period.
 */
int sd_notify_watchdog(const char *usec, const char *pid, pid_t self, uint64_t *ret_usec);

#endif
