/*
 * metrics_server — GET /metrics over libmicrohttpd on our loop (see
 * src/metrics/metrics_server.h).
 *
 * We make the listening socket ourselves (a unix socket with the same safe
 * creation as the update stream, or a TCP socket checked to be loopback)
 * and hand it over with MHD_OPTION_LISTEN_SOCKET.  libmicrohttpd runs in
 * "external epoll" mode: its epoll descriptor sits on our loop, and a
 * timer follows MHD_get_timeout() for idle connections.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "util/log.h" /* ERRNO_STR only: this module never logs */
#include "metrics/metrics_server.h"
#include "util/mhd_loop.h"
#include "util/tcp_listen.h"
#include "util/unix_listen.h"

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct metrics_server {
        struct loop *loop;
        struct unix_listener lis; /* unix socket; or just .fd for TCP */
        struct MHD_Daemon *mhd;
        struct mhd_loop ml;
        metrics_render_fn render;
        void *render_data;
        char *address;
};

static bool is_unix(const char *address)
{
        return address[0] == '/' || strncmp(address, "unix:", 5) == 0;
}

int metrics_address_check(const char *address, struct buf *err)
{
        char *host = NULL, *port = NULL, *end;
        unsigned long p;
        int r;

        if (!address || !address[0])
                return buf_set_err(err, -EINVAL, "empty address");
        if (is_unix(address)) {
                const char *path = address[0] == '/' ? address : address + 5;

                if (path[0] != '/')
                        return buf_set_err(err, -EINVAL, "\"%s\": a unix socket needs an absolute path", address);
                return 0;
        }
        r = tcp_split_host_port(address, &host, &port);
        if (r == -ENOMEM) {
                if (err)
                        buf_reset(err); /* a failure replaces what err held */
                return r;
        }
        if (r < 0)
                return buf_set_err(err, -EINVAL, "\"%s\": expected HOST:PORT (loopback) or a unix socket path",
                                   address);
        errno = 0;
        p = strtoul(port, &end, 10);
        if (!port[0] || *end || errno || p > 65535)
                r = buf_set_err(err, -EINVAL, "\"%s\": invalid port \"%s\"", address, port);
        else if (strcmp(host, "localhost") != 0 && strcmp(host, "::1") != 0 && strncmp(host, "127.", 4) != 0)
                r = buf_set_err(err, -EINVAL,
                                "\"%s\": the metrics endpoint listens on loopback only (127.0.0.1, ::1, localhost)",
                                address);
        free(host);
        free(port);
        return r;
}

static enum MHD_Result answer(struct MHD_Connection *conn, unsigned status, const char *text, size_t len,
                              enum MHD_ResponseMemoryMode mode)
{
        struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)text, mode);
        enum MHD_Result ret;

        if (!resp)
                return MHD_NO;
        (void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
        ret = MHD_queue_response(conn, status, resp);
        MHD_destroy_response(resp);
        return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_size,
                                  void **req_cls)
{
        static const char not_found[] = "not found: try /metrics\n";
        static const char bad_method[] = "only GET and HEAD\n";
        struct metrics_server *ms = cls;
        struct buf b = BUF_INIT;
        enum MHD_Result ret;
        char *text;
        size_t len;

        (void)version;
        (void)upload_data;
        /* A body is never wanted: refuse it on the first call, before any
         * of it is read. */
        if (*upload_size != 0)
                return MHD_NO;
        if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
                (void)req_cls;
                return answer(conn, MHD_HTTP_METHOD_NOT_ALLOWED, bad_method, sizeof(bad_method) - 1,
                              MHD_RESPMEM_PERSISTENT);
        }
        if (strcmp(url, "/metrics") != 0)
                return answer(conn, MHD_HTTP_NOT_FOUND, not_found, sizeof(not_found) - 1, MHD_RESPMEM_PERSISTENT);
        if (ms->render(ms->render_data, &b) < 0 || !(text = buf_steal(&b, &len))) {
                buf_free(&b);
                return answer(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n", 14, MHD_RESPMEM_PERSISTENT);
        }
        ret = answer(conn, MHD_HTTP_OK, text, len, MHD_RESPMEM_MUST_FREE);
        if (ret != MHD_YES)
                free(text);
        return ret;
}

int metrics_server_new(struct loop *loop, const struct metrics_server_config *cfg,
                       struct metrics_server **ret_ms, struct buf *err)
{
        struct metrics_server *ms;
        int r;

        r = metrics_address_check(cfg->address, err);
        if (r < 0)
                return r;
        ms = calloc(1, sizeof(*ms));
        if (!ms) {
                if (err)
                        buf_reset(err);
                return -ENOMEM;
        }
        ms->loop = loop;
        ms->lis.fd = -1;
        ms->render = cfg->render;
        ms->render_data = cfg->render_data;
        if (is_unix(cfg->address)) {
                const char *path = cfg->address[0] == '/' ? cfg->address : cfg->address + 5;

                r = unix_listen(path, cfg->socket_mode ? cfg->socket_mode : 0660, cfg->socket_gid, &ms->lis, err);
                if (r < 0)
                        goto fail;
                ms->address = malloc(strlen(path) + 6);
                if (!ms->address) {
                        r = -ENOMEM;
                        goto fail;
                }
                memcpy(ms->address, "unix:", 5);
                memcpy(ms->address + 5, path, strlen(path) + 1);
        } else {
                r = tcp_listen(cfg->address, true, "metrics address", &ms->lis.fd, &ms->address, err);
                if (r < 0)
                        goto fail;
        }
        /* No MHD_USE_ERROR_LOG: the library would write to stderr, past
         * our log format. */
        ms->mhd = MHD_start_daemon(MHD_USE_EPOLL, 0, NULL, NULL, on_request, ms, MHD_OPTION_LISTEN_SOCKET,
                                   ms->lis.fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned)METRICS_MAX_CONNECTIONS,
                                   MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)METRICS_CONNECTION_TIMEOUT_SEC,
                                   MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(32u * 1024u), MHD_OPTION_END);
        if (!ms->mhd) {
                r = buf_set_err(err, -EIO, "metrics endpoint \"%s\": libmicrohttpd could not start", cfg->address);
                goto fail;
        }
        if ((r = mhd_loop_attach(&ms->ml, loop, ms->mhd)) == -EIO) {
                r = buf_set_err(err, -EIO, "metrics endpoint \"%s\": libmicrohttpd has no epoll descriptor",
                                cfg->address);
                goto fail;
        }
        if (r < 0) {
                r = buf_set_err(err, r, "metrics endpoint \"%s\": %s", cfg->address, ERRNO_STR(r));
                goto fail;
        }
        *ret_ms = ms;
        return 0;
fail:
        if (r == -ENOMEM && err)
                buf_reset(err); /* a failure replaces what err held */
        metrics_server_free(ms);
        return r;
}

const char *metrics_server_address(const struct metrics_server *ms)
{
        return ms->address;
}

void metrics_server_free(struct metrics_server *ms)
{
        if (!ms)
                return;
        mhd_loop_detach(&ms->ml);
        /* MHD_stop_daemon closes the listening socket it was given. */
        if (ms->mhd) {
                MHD_stop_daemon(ms->mhd);
                ms->lis.fd = -1;
        }
        if (ms->lis.path)
                unix_listener_close(&ms->lis);
        else if (ms->lis.fd >= 0)
                close(ms->lis.fd);
        free(ms->address);
        free(ms);
}
