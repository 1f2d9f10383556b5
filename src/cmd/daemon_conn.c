/*
 * daemon_conn — a one-shot client of the stream socket (see
 * src/cmd/daemon_conn.h).
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon_conn.h"
#include "util/clock.h"
#include "util/json_parse.h"
#include "util/json_get.h"
#include "util/str.h"

/* Nesting a message may have (a pod is deep). */
#define DAEMON_CONN_DEPTH 128

int daemon_conn_open(struct daemon_conn *c, const char *path, const char *line, struct buf *err)
{
        struct sockaddr_un sa;
        struct buf out = BUF_INIT;
        size_t sent = 0;
        int r;

        daemon_conn_close(c);
        memset(&sa, 0, sizeof(sa));
        sa.sun_family = AF_UNIX;
        if (strlen(path) >= sizeof(sa.sun_path))
                return buf_set_err(err, -ENAMETOOLONG, "socket path \"%s\" is too long", path);
        memcpy(sa.sun_path, path, strlen(path) + 1);
        c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c->fd < 0)
                return buf_set_err(err, -errno, "cannot make a socket: %s", ERRNO_STR(-errno));
        if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                r = -errno;
                daemon_conn_close(c);
                return daemon_conn_connect_error(err, path, r);
        }
        if (buf_printf(&out, "%s\n", line) < 0) {
                daemon_conn_close(c);
                return -ENOMEM;
        }
        /* A daemon that refuses writes its error and closes unread: the
         * send may fail with EPIPE, and the answer is still there. */
        while (sent < out.len) {
                ssize_t n = send(c->fd, out.data + sent, out.len - sent, MSG_NOSIGNAL);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        break;
                sent += (size_t)n;
        }
        buf_free(&out);
        return 0;
}

/* Waits until fd is readable or deadline passes.  0, -ETIMEDOUT or -errno. */
static int wait_readable(int fd, uint64_t deadline)
{
        for (;;) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                uint64_t now = mono_usec();
                int ms = -1, n;

                if (deadline) {
                        if (now >= deadline)
                                return -ETIMEDOUT;
                        ms = (int)((deadline - now + 999) / 1000);
                }
                n = poll(&p, 1, ms);
                if (n > 0)
                        return 0;
                if (n < 0 && errno != EINTR)
                        return -errno;
        }
}

int daemon_conn_line(struct daemon_conn *c, uint64_t deadline, char **ret_line, struct buf *err)
{
        buf_consume(&c->in, c->taken);
        c->taken = 0;
        for (;;) {
                char chunk[65536], *nl = memchr(c->in.data, '\n', c->in.len);
                ssize_t n;
                int r;

                if (nl) {
                        *nl = '\0';
                        c->taken = (size_t)(nl - c->in.data) + 1;
                        *ret_line = c->in.data;
                        return 1;
                }
                if (c->in.len > DAEMON_CONN_MAX_LINE)
                        return buf_set_err(err, -EFBIG, "a line of the daemon is longer than %u bytes",
                                           DAEMON_CONN_MAX_LINE);
                if (c->fd < 0)
                        return 0;
                r = wait_readable(c->fd, deadline);
                if (r < 0)
                        return r == -ETIMEDOUT ? r : buf_set_err(err, r, "poll: %s", ERRNO_STR(r));
                n = recv(c->fd, chunk, sizeof(chunk), 0);
                if (n < 0 && (errno == EINTR || errno == EAGAIN))
                        continue;
                /* A reset after the daemon's last words: the end. */
                if (n == 0 || (n < 0 && errno == ECONNRESET)) {
                        buf_reset(&c->in);
                        return 0;
                }
                if (n < 0)
                        return buf_set_err(err, -errno, "reading the daemon: %s", ERRNO_STR(-errno));
                if (buf_append(&c->in, chunk, (size_t)n) < 0)
                        return -ENOMEM;
        }
}

void daemon_conn_close(struct daemon_conn *c)
{
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
        buf_free(&c->in);
        c->taken = 0;
}

/* One message of a files request into head or records; 1 at synced.
 * 0, 1 or -EPROTO (err says). */
static int files_message(json_object *m, json_object **head, json_object *records, struct buf *err)
{
        const char *type = json_get_str(m, "type", "");
        json_object *f;

        if (strcmp(type, "hello") == 0) {
                json_object *p = json_get(m, "protocol");

                if (!p || json_object_get_int(p) != 1)
                        return buf_set_err(err, -EPROTO, "the daemon speaks protocol %s, not 1",
                                           p ? json_object_get_string(p) : "?");
        } else if (strcmp(type, "error") == 0) {
                return buf_set_err(err, -EPROTO, "the daemon refused: %s: %s", json_get_str(m, "reason", "?"),
                                   json_get_str(m, "message", ""));
        } else if (strcmp(type, "files") == 0 && !*head) {
                *head = json_object_get(m);
        } else if (strcmp(type, "file") == 0 && (f = json_get_type(m, "file", json_type_object))) {
                if (json_object_array_add(records, json_object_get(f)) != 0) {
                        json_object_put(f);
                        return -ENOMEM;
                }
        } else if (strcmp(type, "synced") == 0) {
                return 1;
        }
        return 0;
}

int daemon_files(const char *path, uint64_t deadline, json_object **ret_head, json_object **ret_records,
                 struct buf *err)
{
        struct daemon_conn c = DAEMON_CONN_INIT;
        json_object *head = NULL, *records = json_object_new_array();
        char *line;
        int r;

        if (!records)
                return -ENOMEM;
        r = daemon_conn_open(&c, path, "{\"request\":\"files\"}", err);
        while (r >= 0 && (r = daemon_conn_line(&c, deadline, &line, err)) > 0) {
                json_object *m = NULL;

                if (json_parse_text(line, strlen(line), &m, NULL) < 0)
                        continue;
                r = files_message(m, &head, records, err);
                json_object_put(m);
                if (r == 1)
                        break;
        }
        if (r == 0)
                r = buf_set_err(err, -EPROTO, "\"%s\" closed before the files were listed", path);
        daemon_conn_close(&c);
        if (r == 1 && !head)
                r = buf_set_err(err, -EPROTO, "\"%s\" sent no files message", path);
        if (r < 0) {
                json_object_put(head);
                json_object_put(records);
                return r == -ETIMEDOUT ? buf_set_err(err, r, "\"%s\": no answer in time", path) : r;
        }
        *ret_head = head;
        *ret_records = records;
        return 0;
}

int daemon_status(const char *path, uint64_t deadline, json_object **ret_status, struct buf *err)
{
        struct daemon_conn c = DAEMON_CONN_INIT;
        json_object *st = NULL;
        char *line;
        int r;

        r = daemon_conn_open(&c, path, "{\"request\":\"status\"}", err);
        while (r >= 0 && !st && (r = daemon_conn_line(&c, deadline, &line, err)) > 0) {
                json_object *m = NULL;
                const char *type;

                if (json_parse_text(line, strlen(line), &m, NULL) < 0)
                        continue;
                type = json_get_str(m, "type", "");
                if (strcmp(type, "error") == 0)
                        r = buf_set_err(err, -EPROTO, "the daemon refused: %s: %s", json_get_str(m, "reason", "?"),
                                        json_get_str(m, "message", ""));
                else if (strcmp(type, "status") == 0)
                        st = json_object_get(m);
                json_object_put(m);
        }
        daemon_conn_close(&c);
        if (r == 0)
                r = buf_set_err(err, -EPROTO, "\"%s\" closed before its status", path);
        if (r < 0) {
                json_object_put(st);
                return r == -ETIMEDOUT ? buf_set_err(err, r, "\"%s\": no answer in time", path) : r;
        }
        *ret_status = st;
        return 0;
}

int daemon_conn_connect_error(struct buf *err, const char *path, int r)
{
        if (r == -EACCES || r == -EPERM)
                return buf_set_err(err, r,
                                   "cannot connect to \"%s\": %s (the socket's mode and group decide who may read "
                                   "the stream)",
                                   path, ERRNO_STR(r));
        return buf_set_err(err, r, "cannot connect to \"%s\": %s (is podmux run serving this path?)", path,
                           ERRNO_STR(r));
}
