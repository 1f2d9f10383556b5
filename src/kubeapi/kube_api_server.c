/*
 * kube_api_server — the pods through the Kubernetes API, over
 * libmicrohttpd on our loop (see src/kubeapi/kube_api_server.h and
 * doc/kube-api.md for the contract).
 *
 * HTTP is libmicrohttpd's: we make the unix socket (src/util/unix_listen.h)
 * and hand it over; its epoll descriptor is one of our loop's, and a
 * timer follows MHD_get_timeout().  A watch is a response whose body
 * comes from a callback: the callback writes one event per call (so each
 * event goes out as its own chunk), and when it has nothing to write it
 * suspends the connection; an update, or the watch's timer, resumes it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>
#include <netdb.h>

#include "kubeapi/kube_api_server.h"
#include "kubeapi/kube_view.h"
#include "util/base64.h"
#include "util/clock.h"
#include "util/log.h" /* ERRNO_STR only: this module never logs */
#include "util/mhd_loop.h"
#include "util/tcp_listen.h"
#include "util/unix_listen.h"

#define JSON_TYPE "application/json"
#define KV_PREFIX "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":\""
#define ANN_INITIAL_END "k8s.io/initial-events-end"
#define ANN_BLUEPRINT "kubernetes.io/initial-events-list-blueprint"

struct watch;
struct auth_req;

/* One libmicrohttpd daemon on the loop: the unix socket, or the TLS
 * address. */
struct endpoint {
        struct kube_api_server *srv;
        struct MHD_Daemon *mhd;
        struct mhd_loop ml;
        bool tls; /* clients authenticate (certificate or token) */
};

struct kube_api_server {
        struct loop *loop;
        struct unix_listener lis;
        int tcp_fd;
        struct endpoint ep[2];
        size_t n_ep;
        struct kube_view *view;
        /* Copies of the TLS PEM texts, which libmicrohttpd keeps pointers
         * to: certificate, key, client CA (NULL: none, tokens only). */
        char *pem[3];
        uid_t *allow_uids;
        size_t n_allow_uids;
        gid_t *allow_gids;
        size_t n_allow_gids;
        uint64_t min_timeout, bookmark_every;
        bool ready, stale, stopping;
        struct watch *watches; /* every watch, linked */
        char *address;
        struct review *review; /* borrowed; NULL: no tokens */
        bool authz_webhook;
        struct auth_req *waiting; /* requests suspended on a review */
};

/* One watch in progress; freed with its response. */
struct watch {
        struct kube_api_server *srv;
        struct endpoint *ep;
        struct MHD_Connection *conn;
        struct watch *prev, *next;
        struct kv_filter filter;
        uint64_t last_rv;     /* events up to this one are done */
        struct kv_obj **init; /* the initial events, ADDED */
        size_t n_init, i_init;
        bool init_end;  /* a bookmark marks the end of the initial events */
        bool bookmarks; /* allowWatchBookmarks */
        bool expired;   /* the version asked for is too old: 410, end */
        bool too_large; /* a WatchList above the current version: 504, end */
        bool suspended;
        bool finished;      /* the last line is written: end the stream */
        bool final_mark;    /* the bookmark before the deadline is written */
        uint64_t deadline;  /* monotonic */
        uint64_t next_mark; /* monotonic: the next periodic bookmark */
        uint64_t asked_rv;  /* for the 410's message */
        struct loop_timer *timer;
        struct buf out; /* the line being written */
        size_t out_pos;
};

/* ---- responses -------------------------------------------------------- */

static enum MHD_Result send_buf(struct MHD_Connection *conn, unsigned code, struct buf *b, const char *retry_after)
{
        struct MHD_Response *resp;
        enum MHD_Result ret;
        size_t len;
        /* Every body is some JSON: an empty one means it could not be
         * written (out of memory). */
        char *text = b->len ? buf_steal(b, &len) : NULL;

        if (!text) {
                static const char oom[] = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":"
                                          "\"Failure\",\"message\":\"out of memory\",\"reason\":"
                                          "\"InternalError\",\"code\":500}";

                resp = MHD_create_response_from_buffer(sizeof(oom) - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
                code = MHD_HTTP_INTERNAL_SERVER_ERROR;
        } else {
                resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
                if (!resp)
                        free(text);
        }
        if (!resp)
                return MHD_NO;
        (void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, JSON_TYPE);
        if (retry_after)
                (void)MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, retry_after);
        ret = MHD_queue_response(conn, code, resp);
        MHD_destroy_response(resp);
        return ret;
}

/* A Status body: {"kind":"Status",...}; details (may be NULL) is the
 * text of the details object. */
static int status_text(struct buf *b, unsigned code, const char *reason, const char *message, const char *details)
{
        int r;

        if ((r = buf_puts(b, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                             "\"message\":")) < 0 ||
            (r = buf_json_string(b, message, strlen(message))) < 0 ||
            (r = buf_printf(b, ",\"reason\":\"%s\"", reason)) < 0)
                return r;
        if (details && (r = buf_printf(b, ",\"details\":%s", details)) < 0)
                return r;
        return buf_printf(b, ",\"code\":%u}", code);
}

static enum MHD_Result send_status(struct MHD_Connection *conn, unsigned code, const char *reason, const char *message,
                                   const char *details, const char *retry_after)
{
        struct buf b = BUF_INIT;

        if (status_text(&b, code, reason, message, details) < 0)
                buf_free(&b); /* send_buf answers 500 */
        return send_buf(conn, code, &b, retry_after);
}

/* ---- discovery -------------------------------------------------------- */

static enum MHD_Result send_const(struct MHD_Connection *conn, const char *text)
{
        struct buf b = BUF_INIT;

        if (buf_puts(&b, text) < 0)
                buf_free(&b);
        return send_buf(conn, MHD_HTTP_OK, &b, NULL);
}

static const char api_versions[] =
        "{\"kind\":\"APIVersions\",\"versions\":[\"v1\"],\"serverAddressByClientCIDRs\":[{\"clientCIDR\":"
        "\"0.0.0.0/0\",\"serverAddress\":\"\"}]}";
static const char api_v1[] =
        "{\"kind\":\"APIResourceList\",\"groupVersion\":\"v1\",\"resources\":[{\"name\":\"pods\","
        "\"singularName\":\"pod\",\"namespaced\":true,\"kind\":\"Pod\",\"verbs\":[\"get\",\"list\",\"watch\"],"
        "\"shortNames\":[\"po\"],\"categories\":[\"all\"]}]}";
static const char apis[] = "{\"kind\":\"APIGroupList\",\"apiVersion\":\"v1\",\"groups\":[]}";
/* The Kubernetes API version whose behaviour is reproduced. */
static const char version[] =
        "{\"major\":\"1\",\"minor\":\"31\",\"gitVersion\":\"v1.31.0-podmux-" PODMUX_VERSION "\",\"gitCommit\":\"\","
        "\"gitTreeState\":\"\",\"buildDate\":\"\",\"goVersion\":\"\",\"compiler\":\"\",\"platform\":\"linux\"}";

/* ---- the peer --------------------------------------------------------- */

static bool peer_allowed(const struct kube_api_server *srv, struct MHD_Connection *conn)
{
        const union MHD_ConnectionInfo *ci;
        struct ucred cred;
        socklen_t len = sizeof(cred);

        if (!srv->n_allow_uids && !srv->n_allow_gids)
                return true;
        ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!ci || getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
                return false;
        if (cred.uid == 0 || cred.uid == geteuid())
                return true;
        for (size_t i = 0; i < srv->n_allow_uids; i++)
                if (srv->allow_uids[i] == cred.uid)
                        return true;
        for (size_t i = 0; i < srv->n_allow_gids; i++)
                if (srv->allow_gids[i] == cred.gid)
                        return true;
        return false;
}

/* ---- request parameters ----------------------------------------------- */

struct req_params {
        const char *label_selector, *field_selector;
        const char *rv, *rv_match, *cont;
        const char *limit, *timeout;
        bool watch, bookmarks, initial, initial_given;
};

struct arg_find {
        const char *name;
        size_t len;
        const char *value;
        bool given;
};

static enum MHD_Result arg_match(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                 const char *value, size_t value_size)
{
        struct arg_find *a = cls;

        (void)kind;
        (void)value_size;
        if (key_size != a->len || memcmp(key, a->name, key_size) != 0)
                return MHD_YES;
        a->given = true;
        a->value = value;
        return MHD_NO; /* the first, as the API server takes it */
}

/* The query parameter of exactly this name (libmicrohttpd's own lookup
 * ignores case; the API server's does not: "?WATCH=1" is no watch): its
 * value, NULL if absent or given without one (*ret_given says which). */
static const char *arg_given(struct MHD_Connection *conn, const char *name, bool *ret_given)
{
        struct arg_find a = {.name = name, .len = strlen(name)};

        (void)MHD_get_connection_values_n(conn, MHD_GET_ARGUMENT_KIND, arg_match, &a);
        if (ret_given)
                *ret_given = a.given;
        return a.value;
}

static const char *arg(struct MHD_Connection *conn, const char *name)
{
        return arg_given(conn, name, NULL);
}

/* A boolean parameter as the API server decodes one: absent is false
 * (*ret_given false); "0" and "false" in any case are false; any other
 * value is true, an empty one too ("?watch"). */
static bool bool_arg(struct MHD_Connection *conn, const char *name, bool *ret_given)
{
        bool given;
        const char *v = arg_given(conn, name, &given);

        if (ret_given)
                *ret_given = given;
        if (!given || !v)
                return given;
        return strcmp(v, "0") != 0 && strcasecmp(v, "false") != 0;
}

static void read_params(struct MHD_Connection *conn, struct req_params *p)
{
        p->label_selector = arg(conn, "labelSelector");
        p->field_selector = arg(conn, "fieldSelector");
        p->rv = arg(conn, "resourceVersion");
        p->rv_match = arg(conn, "resourceVersionMatch");
        p->cont = arg(conn, "continue");
        p->limit = arg(conn, "limit");
        p->timeout = arg(conn, "timeoutSeconds");
        p->watch = bool_arg(conn, "watch", NULL);
        p->bookmarks = bool_arg(conn, "allowWatchBookmarks", NULL);
        p->initial = bool_arg(conn, "sendInitialEvents", &p->initial_given);
}

/* Whether s is an integer Go's strconv.ParseInt(s, 10, 64) takes, as the
 * API server reads timeoutSeconds ("+5", "-1"). */
static bool is_int64(const char *s)
{
        char *end;

        errno = 0;
        (void)strtoll(s, &end, 10);
        return end != s && !*end && errno == 0 && !isspace((unsigned char)*s);
}

static int parse_u64(const char *s, uint64_t *ret)
{
        char *end;
        unsigned long long v;

        if (!s || s[0] < '0' || s[0] > '9')
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno || *end)
                return -EINVAL;
        *ret = v;
        return 0;
}

/* ---- lists ------------------------------------------------------------ */

static int put_obj(struct buf *b, const struct kv_obj *o, uint64_t rv)
{
        int r;

        if ((r = buf_puts(b, KV_PREFIX)) < 0 || (r = buf_printf(b, "%" PRIu64, rv)) < 0)
                return r;
        return buf_append(b, o->text, o->len);
}

/* The continue token: the list's version and the last key sent, as
 * "RV.HEX". */
static int put_continue(struct buf *b, uint64_t rv, const char *key)
{
        int r = buf_printf(b, "\"%" PRIu64 ".", rv);

        for (const unsigned char *k = (const unsigned char *)key; r >= 0 && *k; k++)
                r = buf_printf(b, "%02x", *k);
        return r < 0 ? r : buf_putc(b, '"');
}

static int parse_continue(const char *tok, uint64_t *ret_rv, char **ret_key)
{
        const char *dot = strchr(tok, '.');
        char *num, *key;
        size_t n;
        int r;

        if (!dot || ((n = strlen(dot + 1)) & 1))
                return -EINVAL;
        if (!(num = strndup(tok, (size_t)(dot - tok))))
                return -ENOMEM;
        r = parse_u64(num, ret_rv);
        free(num);
        if (r < 0)
                return r;
        if (!(key = malloc(n / 2 + 1)))
                return -ENOMEM;
        for (size_t i = 0; i < n / 2; i++) {
                unsigned v;

                if (sscanf(dot + 1 + 2 * i, "%2x", &v) != 1 || v == 0) {
                        free(key);
                        return -EINVAL;
                }
                key[i] = (char)v;
        }
        key[n / 2] = '\0';
        *ret_key = key;
        return 0;
}

static void objs_free(struct kv_obj **objs, size_t n)
{
        for (size_t i = 0; i < n; i++)
                kv_obj_unref(objs[i]);
        free(objs);
}

/* The objects passing f, sorted, referenced.  O(n log n). */
static int matching(const struct kube_view *view, const struct kv_filter *f, struct kv_obj ***ret, size_t *ret_n)
{
        struct kv_obj **objs;
        size_t n, m = 0;
        int r = kube_view_snapshot(view, &objs, &n);

        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                if (kv_filter_match(f, objs[i]))
                        objs[m++] = objs[i];
                else
                        kv_obj_unref(objs[i]);
        }
        *ret = objs;
        *ret_n = m;
        return 0;
}

static enum MHD_Result too_old(struct MHD_Connection *conn, uint64_t asked, uint64_t floor)
{
        char msg[128];

        (void)snprintf(msg, sizeof(msg), "too old resource version: %" PRIu64 " (%" PRIu64 ")", asked, floor);
        return send_status(conn, MHD_HTTP_GONE, "Expired", msg, NULL, NULL);
}

/* The API server's words for a version above the current one. */
#define TOO_LARGE_DETAILS                                                                                              \
        "{\"causes\":[{\"reason\":\"ResourceVersionTooLarge\",\"message\":\"Too large resource version\"}],"           \
        "\"retryAfterSeconds\":1}"

static void too_large_msg(char *msg, size_t size, uint64_t asked, uint64_t current)
{
        (void)snprintf(msg, size, "Too large resource version: %" PRIu64 ", current: %" PRIu64, asked, current);
}

static enum MHD_Result too_large(struct MHD_Connection *conn, uint64_t asked, uint64_t current)
{
        char msg[160];

        too_large_msg(msg, sizeof(msg), asked, current);
        return send_status(conn, MHD_HTTP_GATEWAY_TIMEOUT, "Timeout", msg, TOO_LARGE_DETAILS, "1");
}

static enum MHD_Result invalid(struct MHD_Connection *conn, const char *msg)
{
        return send_status(conn, 422, "Invalid", msg, "{\"group\":\"meta.k8s.io\",\"kind\":\"ListOptions\"}", NULL);
}

static enum MHD_Result do_list(struct kube_api_server *srv, struct MHD_Connection *conn, const struct req_params *p,
                               const struct kv_filter *f)
{
        uint64_t cur = kube_view_rv(srv->view), list_rv = cur, asked = 0, limit = 0, remaining = 0;
        struct kv_obj **objs = NULL;
        size_t n = 0, start = 0, end;
        char *after = NULL;
        struct buf b = BUF_INIT;
        bool exact = p->rv_match && strcmp(p->rv_match, "Exact") == 0;
        int r;

        if (p->rv_match && p->rv_match[0] && !exact && strcmp(p->rv_match, "NotOlderThan") != 0)
                return invalid(conn, "resourceVersionMatch: Unsupported value: must be one of \"Exact\", "
                                     "\"NotOlderThan\"");
        if (p->rv_match && p->rv_match[0] && (!p->rv || !p->rv[0]))
                return invalid(conn, "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless "
                                     "resourceVersion is provided");
        if (p->rv_match && p->rv_match[0] && p->cont && p->cont[0])
                return invalid(conn, "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when "
                                     "continue is provided");
        if (p->initial_given)
                return invalid(conn, "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list");
        if (p->timeout && p->timeout[0] && !is_int64(p->timeout))
                return send_status(conn, MHD_HTTP_BAD_REQUEST, "BadRequest", "invalid timeoutSeconds", NULL, NULL);
        if (p->rv && p->rv[0] && parse_u64(p->rv, &asked) < 0)
                return send_status(conn, MHD_HTTP_BAD_REQUEST, "BadRequest", "invalid resource version", NULL, NULL);
        if (exact && asked == 0)
                return invalid(conn, "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for "
                                     "resourceVersion \"0\"");
        if (p->limit && p->limit[0] && parse_u64(p->limit, &limit) < 0)
                return send_status(conn, MHD_HTTP_BAD_REQUEST, "BadRequest", "invalid limit", NULL, NULL);
        if (p->cont && p->cont[0]) {
                if (p->rv && p->rv[0] && strcmp(p->rv, "0") != 0)
                        return send_status(conn, MHD_HTTP_BAD_REQUEST, "BadRequest",
                                           "specifying resource version is not allowed when using continue", NULL,
                                           NULL);
                r = parse_continue(p->cont, &list_rv, &after);
                if (r == -ENOMEM)
                        return send_status(conn, 500, "InternalError", "out of memory", NULL, NULL);
                if (r < 0)
                        return send_status(conn, MHD_HTTP_BAD_REQUEST, "BadRequest", "invalid continue token", NULL,
                                           NULL);
                if (list_rv < kube_view_floor(srv->view) || list_rv > cur) {
                        free(after);
                        return send_status(conn, MHD_HTTP_GONE, "Expired",
                                           "The provided continue parameter is too old to display a consistent list "
                                           "result. You can start a new list without the continue parameter.",
                                           NULL, NULL);
                }
        } else if (asked > cur) {
                return too_large(conn, asked, cur);
        } else if (exact && asked != cur) {
                /* Only the latest state is kept: an older exact version
                 * is gone, as one compacted away is on the API server. */
                return too_old(conn, asked, cur);
        }
        if ((r = matching(srv->view, f, &objs, &n)) < 0) {
                free(after);
                return send_status(conn, 500, "InternalError", "out of memory", NULL, NULL);
        }
        if (after)
                while (start < n && strcmp(objs[start]->key, after) <= 0)
                        start++;
        end = limit && n - start > limit ? start + (size_t)limit : n;
        remaining = n - end;
        r = buf_printf(&b,
                       "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"%" PRIu64 "\"",
                       list_rv);
        if (r >= 0 && remaining) {
                r = buf_puts(&b, ",\"continue\":");
                if (r >= 0)
                        r = put_continue(&b, list_rv, objs[end - 1]->key);
                if (r >= 0 && !f->n_labels && !f->n_fields)
                        r = buf_printf(&b, ",\"remainingItemCount\":%" PRIu64, remaining);
        }
        if (r >= 0)
                r = buf_puts(&b, "},\"items\":[");
        for (size_t i = start; r >= 0 && i < end; i++) {
                if (i > start)
                        r = buf_putc(&b, ',');
                if (r >= 0)
                        r = put_obj(&b, objs[i], objs[i]->rv);
        }
        if (r >= 0)
                r = buf_puts(&b, "]}");
        if (r < 0)
                buf_free(&b);
        objs_free(objs, n);
        free(after);
        return send_buf(conn, MHD_HTTP_OK, &b, NULL);
}

/* ---- watches ---------------------------------------------------------- */

static void watch_arm(struct watch *w)
{
        uint64_t now = mono_usec(), at = w->deadline;

        if (w->bookmarks && w->next_mark < at)
                at = w->next_mark;
        loop_timer_arm(w->timer, at > now ? at - now : 0);
}

static void watch_wake(struct watch *w)
{
        if (w->suspended) {
                w->suspended = false;
                MHD_resume_connection(w->conn);
                /* libmicrohttpd takes the connection back on its next
                 * run: make that now, from the loop. */
                mhd_loop_kick(&w->ep->ml);
        }
}

static void on_watch_timer(struct loop_timer *t, void *data)
{
        struct watch *w = data;

        (void)t;
        watch_wake(w);
}

static int put_bookmark(struct buf *b, uint64_t rv, bool initial_end)
{
        static const char empty[] = "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{},\"items\":[]}";
        int r = buf_printf(b,
                           "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":"
                           "{\"resourceVersion\":\"%" PRIu64 "\"",
                           rv);

        if (r >= 0 && initial_end) {
                char *b64 = NULL;

                /* client-go 1.32+ rebuilds its list from this blueprint:
                 * an empty PodList in the encoding of the response. */
                r = base64_encode(empty, sizeof(empty) - 1, &b64);
                if (r >= 0)
                        r = buf_printf(
                                b, ",\"annotations\":{\"" ANN_INITIAL_END "\":\"true\",\"" ANN_BLUEPRINT "\":\"%s\"}",
                                b64);
                free(b64);
        }
        return r < 0 ? r : buf_puts(b, "}}}\n");
}

static int put_event(struct buf *b, const char *type, const struct kv_obj *o, uint64_t rv)
{
        int r = buf_printf(b, "{\"type\":\"%s\",\"object\":", type);

        if (r >= 0)
                r = put_obj(b, o, rv);
        return r < 0 ? r : buf_puts(b, "}\n");
}

/* An ERROR event: w's version too old (410 Expired), or for a WatchList
 * above the current one (504, as the API server's watch cache answers
 * one it cannot wait for). */
static int put_error(struct buf *b, const struct watch *w, uint64_t floor)
{
        int r = buf_printf(b, "{\"type\":\"ERROR\",\"object\":");
        char msg[160];

        if (w->too_large) {
                too_large_msg(msg, sizeof(msg), w->asked_rv, w->last_rv);
                if (r >= 0)
                        r = status_text(b, MHD_HTTP_GATEWAY_TIMEOUT, "Timeout", msg, TOO_LARGE_DETAILS);
        } else {
                (void)snprintf(msg, sizeof(msg), "too old resource version: %" PRIu64 " (%" PRIu64 ")", w->asked_rv,
                               floor);
                if (r >= 0)
                        r = status_text(b, MHD_HTTP_GONE, "Expired", msg, NULL);
        }
        return r < 0 ? r : buf_puts(b, "}\n");
}

/* The next line of w into w->out: 1 if one was written, 0 if there is
 * nothing to write now, -ENOMEM. */
static int watch_fill(struct watch *w)
{
        struct kube_view *view = w->srv->view;
        uint64_t now;

        if (w->finished)
                return 0;
        if (w->expired || w->too_large) {
                w->finished = true;
                return put_error(&w->out, w, kube_view_floor(view)) < 0 ? -ENOMEM : 1;
        }
        if (w->i_init < w->n_init) {
                const struct kv_obj *o = w->init[w->i_init];

                if (put_event(&w->out, "ADDED", o, o->rv) < 0)
                        return -ENOMEM;
                w->i_init++;
                return 1;
        }
        if (w->init_end) {
                if (put_bookmark(&w->out, w->last_rv, true) < 0)
                        return -ENOMEM;
                w->init_end = false;
                return 1;
        }
        if (w->last_rv < kube_view_floor(view)) {
                /* Fell behind the history: the client lists again. */
                w->asked_rv = w->last_rv;
                w->expired = true;
                return watch_fill(w);
        }
        for (size_t i = kube_view_after(view, w->last_rv); i < kube_view_n_events(view); i++) {
                const struct kv_event *e = kube_view_event(view, i);
                bool now_in = kv_filter_match(&w->filter, e->obj);
                bool was_in = e->type == KV_MODIFIED ? kv_filter_match(&w->filter, e->prev) : now_in;
                const char *type = NULL;
                const struct kv_obj *o = e->obj;

                w->last_rv = e->rv;
                if (e->type != KV_MODIFIED)
                        type = now_in ? kv_type_name(e->type) : NULL;
                else if (now_in)
                        type = was_in ? "MODIFIED" : "ADDED";
                else if (was_in) {
                        type = "DELETED";
                        o = e->prev;
                }
                if (!type)
                        continue;
                if (put_event(&w->out, type, o, e->rv) < 0)
                        return -ENOMEM;
                return 1;
        }
        now = mono_usec();
        if (w->bookmarks && now >= w->next_mark && now < w->deadline) {
                w->last_rv = kube_view_rv(view);
                if (put_bookmark(&w->out, w->last_rv, false) < 0)
                        return -ENOMEM;
                w->next_mark = now + w->srv->bookmark_every;
                watch_arm(w);
                return 1;
        }
        if (now >= w->deadline || w->srv->stopping) {
                w->finished = true;
                if (w->bookmarks && !w->final_mark && !w->srv->stopping) {
                        /* The last word before the timeout: where to
                         * watch again from. */
                        w->final_mark = true;
                        w->last_rv = kube_view_rv(view);
                        return put_bookmark(&w->out, w->last_rv, false) < 0 ? -ENOMEM : 1;
                }
        }
        return 0;
}

static ssize_t watch_read(void *cls, uint64_t pos, char *out, size_t max)
{
        struct watch *w = cls;
        size_t n;

        (void)pos;
        if (w->out_pos == w->out.len) {
                int r;

                buf_reset(&w->out);
                w->out_pos = 0;
                r = watch_fill(w);
                if (r < 0)
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                if (r == 0) {
                        if (w->finished)
                                return MHD_CONTENT_READER_END_OF_STREAM;
                        /* Nothing now: an update or the timer resumes. */
                        w->suspended = true;
                        MHD_suspend_connection(w->conn);
                        return 0;
                }
        }
        n = w->out.len - w->out_pos;
        if (n > max)
                n = max;
        memcpy(out, w->out.data + w->out_pos, n);
        w->out_pos += n;
        return (ssize_t)n;
}

static void watch_free(void *cls)
{
        struct watch *w = cls;

        if (!w)
                return;
        if (w->prev)
                w->prev->next = w->next;
        else if (w->srv->watches == w)
                w->srv->watches = w->next;
        if (w->next)
                w->next->prev = w->prev;
        loop_timer_free(w->timer);
        kv_filter_free(&w->filter);
        objs_free(w->init, w->n_init);
        buf_free(&w->out);
        free(w);
}

static enum MHD_Result do_watch(struct endpoint *ep, struct MHD_Connection *conn, const struct req_params *p,
                                struct kv_filter *f)
{
        struct kube_api_server *srv = ep->srv;
        uint64_t cur = kube_view_rv(srv->view), asked = 0, timeout = 0, now = mono_usec();
        bool bookmarks = p->bookmarks, initial = p->initial, initial_given = p->initial_given, from_now;
        struct MHD_Response *resp;
        struct watch *w;
        enum MHD_Result ret;

        if (p->timeout && p->timeout[0] && parse_u64(p->timeout, &timeout) < 0)
                return send_status(conn, MHD_HTTP_BAD_REQUEST, "BadRequest", "invalid timeoutSeconds", NULL, NULL);
        if (p->rv && p->rv[0] && parse_u64(p->rv, &asked) < 0)
                return send_status(conn, MHD_HTTP_BAD_REQUEST, "BadRequest", "invalid resource version", NULL, NULL);
        if (initial_given) {
                if (initial && !bookmarks)
                        return invalid(conn, "allowWatchBookmarks: Forbidden: sendInitialEvents requires setting "
                                             "allowWatchBookmarks to true");
                if (!p->rv_match || strcmp(p->rv_match, "NotOlderThan") != 0)
                        return invalid(conn, "resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
                                             "resourceVersionMatch to NotOlderThan");
        } else if (p->rv_match && p->rv_match[0]) {
                return invalid(conn, "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch "
                                     "unless sendInitialEvents is provided");
        }
        /* "" and "0" start with the state as ADDED events, unless
         * sendInitialEvents says otherwise. */
        from_now = !p->rv || !p->rv[0] || asked == 0;
        if (!initial_given)
                initial = from_now;
        if (!(w = calloc(1, sizeof(*w))))
                return send_status(conn, 500, "InternalError", "out of memory", NULL, NULL);
        w->srv = srv;
        w->ep = ep;
        w->conn = conn;
        w->filter = *f;
        memset(f, 0, sizeof(*f)); /* the watch has it now */
        w->bookmarks = bookmarks;
        w->out = (struct buf)BUF_INIT;
        if (timeout > KUBE_API_MAX_TIMEOUT_SEC)
                timeout = KUBE_API_MAX_TIMEOUT_SEC;
        w->deadline = now + (timeout ? timeout * 1000000u : srv->min_timeout + clock_jitter(srv->min_timeout));
        w->next_mark = now + srv->bookmark_every;
        if (initial && asked > cur) {
                /* 200, then the 504 as an ERROR event. */
                w->too_large = true;
                w->asked_rv = asked;
                w->last_rv = cur;
        } else if (initial) {
                if (matching(srv->view, &w->filter, &w->init, &w->n_init) < 0)
                        goto oom;
                w->last_rv = cur;
                /* Only a WatchList ends its initial events with the
                 * annotated bookmark; a watch from "" or "0" does not,
                 * even with bookmarks (as the API server's watch cache). */
                w->init_end = bookmarks && initial_given;
        } else if (from_now) {
                w->last_rv = cur;
        } else {
                w->last_rv = asked;
                w->asked_rv = asked;
                /* Before the history, or from an earlier run: 410,
                 * after a 200, as the API server answers. */
                w->expired = asked < kube_view_floor(srv->view);
        }
        if (loop_timer_new(srv->loop, on_watch_timer, w, &w->timer) < 0)
                goto oom;
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, watch_read, w, watch_free);
        if (!resp)
                goto oom;
        /* Linked once the response owns w (watch_free unlinks it). */
        w->next = srv->watches;
        if (srv->watches)
                srv->watches->prev = w;
        srv->watches = w;
        (void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, JSON_TYPE);
        (void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache, private");
        (void)MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
        ret = MHD_queue_response(conn, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        if (ret == MHD_YES)
                watch_arm(w);
        return ret;
oom:
        watch_free(w);
        return send_status(conn, 500, "InternalError", "out of memory", NULL, NULL);
}

/* ---- routing ---------------------------------------------------------- */

static enum MHD_Result not_found_path(struct MHD_Connection *conn)
{
        return send_status(conn, MHD_HTTP_NOT_FOUND, "NotFound", "the server could not find the requested resource",
                           "{}", NULL);
}

/* A pods path, what follows "/api/v1/": "pods", "namespaces/NS/pods" or
 * "namespaces/NS/pods/NAME".  true with *ret_ns and *ret_ns_len the
 * namespace (NULL: every namespace) and *ret_name the pod's name (NULL: a
 * collection), pointing into rest; false for any other path (404). */
static bool pods_path(const char *rest, const char **ret_ns, size_t *ret_ns_len, const char **ret_name)
{
        const char *slash;

        *ret_ns = *ret_name = NULL;
        *ret_ns_len = 0;
        if (strcmp(rest, "pods") == 0)
                return true;
        if (strncmp(rest, "namespaces/", 11) != 0)
                return false;
        *ret_ns = rest + 11;
        slash = strchr(*ret_ns, '/');
        if (!slash || slash == *ret_ns || strncmp(slash, "/pods", 5) != 0)
                return false;
        *ret_ns_len = (size_t)(slash - *ret_ns);
        if (slash[5] == '/') {
                *ret_name = slash + 6;
                return (*ret_name)[0] && !strchr(*ret_name, '/');
        }
        return !slash[5];
}

/* The discovery document served at url ("/api", "/api/v1", "/apis",
 * "/version", each with a '/' or without), or NULL. */
static const char *discovery_doc(const char *url)
{
        static const struct {
                const char *path, *doc;
        } docs[] = {{"/api", api_versions}, {"/api/v1", api_v1}, {"/apis", apis}, {"/version", version}};

        for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
                size_t n = strlen(docs[i].path);

                if (strncmp(url, docs[i].path, n) == 0 && (!url[n] || strcmp(url + n, "/") == 0))
                        return docs[i].doc;
        }
        return NULL;
}

/* Whether url names something this server serves: the discovery
 * documents and the pods paths.  A write to one is 405, to anything else
 * 404, as on the API server. */
static bool known_path(const char *url)
{
        const char *ns, *name;
        size_t ns_len;

        return discovery_doc(url) ||
               (strncmp(url, "/api/v1/", 8) == 0 && pods_path(url + 8, &ns, &ns_len, &name));
}

static enum MHD_Result do_get(struct kube_api_server *srv, struct MHD_Connection *conn, const char *ns,
                              const char *name)
{
        const struct kv_obj *o = kube_view_get(srv->view, ns, name);
        struct buf b = BUF_INIT;

        if (!o) {
                struct buf msg = BUF_INIT, det = BUF_INIT;
                enum MHD_Result ret;

                if (buf_printf(&msg, "pods \"%s\" not found", name) < 0 || buf_puts(&det, "{\"name\":") < 0 ||
                    buf_json_string(&det, name, strlen(name)) < 0 || buf_puts(&det, ",\"kind\":\"pods\"}") < 0)
                        ret = send_status(conn, 500, "InternalError", "out of memory", NULL, NULL);
                else
                        ret = send_status(conn, MHD_HTTP_NOT_FOUND, "NotFound", msg.data, det.data, NULL);
                buf_free(&msg);
                buf_free(&det);
                return ret;
        }
        if (put_obj(&b, o, o->rv) < 0)
                buf_free(&b);
        return send_buf(conn, MHD_HTTP_OK, &b, NULL);
}

/* /api/v1/pods, /api/v1/namespaces/NS/pods, /api/v1/namespaces/NS/pods/NAME */
static enum MHD_Result do_pods(struct endpoint *ep, struct MHD_Connection *conn, const char *rest)
{
        struct kube_api_server *srv = ep->srv;
        const char *ns = NULL, *name = NULL;
        size_t ns_len;
        char *ns_copy = NULL;
        struct req_params p;
        struct kv_filter f = {0};
        struct buf err = BUF_INIT;
        enum MHD_Result ret;
        int r;

        if (!pods_path(rest, &ns, &ns_len, &name))
                return not_found_path(conn);
        if (ns && !(ns_copy = strndup(ns, ns_len)))
                return send_status(conn, 500, "InternalError", "out of memory", NULL, NULL);
        if (!srv->ready || srv->stale) {
                free(ns_copy);
                return send_status(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "ServiceUnavailable",
                                   srv->stale ? "podmux is rebuilding its view of the pods"
                                              : "podmux has not yet received every configured source's pods",
                                   "{\"retryAfterSeconds\":1}", "1");
        }
        read_params(conn, &p);
        if (name && !p.watch) {
                ret = do_get(srv, conn, ns_copy, name);
                free(ns_copy);
                return ret;
        }
        f.ns = ns_copy;
        if ((p.label_selector && strlen(p.label_selector) > KUBE_API_MAX_SELECTOR) ||
            (p.field_selector && strlen(p.field_selector) > KUBE_API_MAX_SELECTOR))
                r = buf_set_err(&err, -EINVAL, "selector longer than %d bytes", KUBE_API_MAX_SELECTOR);
        else
                r = kv_filter_parse(&f, p.label_selector, p.field_selector, &err);
        if (r >= 0 && name) {
                /* A watch of one pod: /pods/NAME?watch=1. */
                struct buf sel = BUF_INIT;

                /* The name escaped, as a field selector's value. */
                r = buf_puts(&sel, "metadata.name=");
                for (const char *c = name; r >= 0 && *c; c++) {
                        if (strchr("\\,=", *c))
                                r = buf_putc(&sel, '\\');
                        if (r >= 0)
                                r = buf_putc(&sel, *c);
                }
                if (r >= 0)
                        r = kv_filter_parse(&f, NULL, sel.data, &err);
                buf_free(&sel);
        }
        if (r == -ENOMEM)
                ret = send_status(conn, 500, "InternalError", "out of memory", NULL, NULL);
        else if (r < 0)
                ret = send_status(conn, MHD_HTTP_BAD_REQUEST, "BadRequest", err.data, NULL, NULL);
        else if (p.watch)
                ret = do_watch(ep, conn, &p, &f);
        else
                ret = do_list(srv, conn, &p, &f);
        kv_filter_free(&f);
        buf_free(&err);
        return ret;
}

/* Whether the TLS client showed a certificate the client CA signed:
 * libmicrohttpd asks for one (MHD_OPTION_HTTPS_MEM_TRUST) but lets a
 * client without one in, so anonymous requests are refused here. */
static bool client_verified(const struct kube_api_server *srv, struct MHD_Connection *conn)
{
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        unsigned status = 0;

        /* No client CA: no certificate is asked for, and none is an
         * identity, whoever signed it. */
        if (!srv->pem[2] || !ci || !ci->tls_session)
                return false;
        return gnutls_certificate_verify_peers2((gnutls_session_t)ci->tls_session, &status) == 0 && status == 0;
}

/* ---- who the client is, and what it may read (the TLS address) -------- */

/*
 * One request on the address, from its headers to its end
 * (MHD_OPTION_NOTIFY_COMPLETED frees it).  The handler is called again
 * after each suspension, and goes on from where the request is: not yet
 * authenticated, authenticated (user), authorized, or refused.
 */
struct auth_req {
        struct endpoint *ep;
        struct MHD_Connection *conn;
        struct auth_req *prev, *next; /* in srv->waiting while suspended */
        struct review_wait *wait;     /* the review it waits for */
        struct loop_io *hup;          /* the peer, while suspended */
        struct review_user *user;     /* authenticated: a reference */
        char *reason;                 /* why an access was refused */
        unsigned refused;             /* 0, or the status answered */
        bool authorized, suspended, gone, headers_seen;
};

static void auth_resume(struct auth_req *a)
{
        if (!a->suspended)
                return;
        a->suspended = false;
        if (a->prev)
                a->prev->next = a->next;
        else
                a->ep->srv->waiting = a->next;
        if (a->next)
                a->next->prev = a->prev;
        a->prev = a->next = NULL;
        loop_io_free(a->hup);
        a->hup = NULL;
        MHD_resume_connection(a->conn);
        /* libmicrohttpd takes the connection back on its next run. */
        mhd_loop_kick(&a->ep->ml);
}

/* The peer went away while its request waited: the review goes on for
 * the cache, without this request. */
static void on_auth_hup(struct loop_io *io, int fd, uint32_t events, void *data)
{
        struct auth_req *a = data;

        (void)io;
        (void)fd;
        (void)events;
        review_cancel(a->ep->srv->review, a->wait);
        a->wait = NULL;
        a->gone = true;
        auth_resume(a);
}

static void auth_suspend(struct auth_req *a)
{
        struct kube_api_server *srv = a->ep->srv;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(a->conn, MHD_CONNECTION_INFO_CONNECTION_FD);

        a->suspended = true;
        a->next = srv->waiting;
        if (srv->waiting)
                srv->waiting->prev = a;
        srv->waiting = a;
        MHD_suspend_connection(a->conn);
        /* libmicrohttpd does not watch a suspended connection: we do, so
         * that a client gone drops its wait at once.  Without the watch
         * (out of memory) the wait still ends with the review, within
         * REVIEW_TIMEOUT_USEC. */
        if (ci)
                (void)loop_io_add(srv->loop, ci->connect_fd, EPOLLRDHUP, on_auth_hup, a, &a->hup);
}

static void on_authn(void *data, enum review_outcome outcome, struct review_user *user, const char *reason)
{
        struct auth_req *a = data;

        (void)reason; /* says nothing a 401 should tell the client */
        a->wait = NULL;
        if (outcome == REVIEW_OK)
                a->user = review_user_ref(user);
        else
                a->refused = MHD_HTTP_UNAUTHORIZED;
        auth_resume(a);
}

static void on_authz(void *data, enum review_outcome outcome, const char *reason)
{
        struct auth_req *a = data;

        a->wait = NULL;
        a->authorized = outcome == REVIEW_OK;
        if (!a->authorized) {
                a->refused = MHD_HTTP_FORBIDDEN;
                free(a->reason);
                a->reason = reason ? strdup(reason) : NULL; /* NULL: said without it */
        }
        auth_resume(a);
}

/* The certificate's user, as the API server's x509 authenticator reads
 * it: the subject's CN is the name, its O values the groups.  0,
 * -ENOENT (no CN), -ENOMEM. */
static int cert_user(struct MHD_Connection *conn, struct review_user **ret_user)
{
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        const gnutls_datum_t *certs;
        unsigned n_certs = 0;
        gnutls_x509_crt_t crt = NULL;
        struct review_user *u = NULL;
        char name[1024];
        size_t len = sizeof(name);
        int r = -ENOENT;

        if (!ci || !(certs = gnutls_certificate_get_peers((gnutls_session_t)ci->tls_session, &n_certs)) || !n_certs ||
            gnutls_x509_crt_init(&crt) < 0)
                return -ENOENT;
        if (gnutls_x509_crt_import(crt, &certs[0], GNUTLS_X509_FMT_DER) < 0 ||
            gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, name, &len) < 0 || !name[0])
                goto out;
        r = -ENOMEM;
        if (!(u = calloc(1, sizeof(*u))))
                goto out;
        u->refs = 1;
        if (!(u->username = strdup(name)) || !(u->uid = strdup("")))
                goto out;
        for (unsigned i = 0;; i++) {
                char **g;

                len = sizeof(name);
                if (gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_ORGANIZATION_NAME, i, 0, name, &len) < 0)
                        break;
                if (!(g = realloc(u->groups, (u->n_groups + 1) * sizeof(*g))))
                        goto out;
                u->groups = g;
                if (!(g[u->n_groups] = strdup(name)))
                        goto out;
                u->n_groups++;
        }
        *ret_user = u;
        u = NULL;
        r = 0;
out:
        review_user_unref(u);
        gnutls_x509_crt_deinit(crt);
        return r;
}

/* "Bearer TOKEN" of the Authorization header, or NULL. */
static const char *bearer(struct MHD_Connection *conn)
{
        const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);

        if (!h || strncasecmp(h, "Bearer ", 7) != 0)
                return NULL;
        h += 7;
        while (*h == ' ')
                h++;
        return *h ? h : NULL;
}

/* Authentication: a certificate of the client CA, else a bearer token
 * the API server vouches for; anyone else is refused.  May suspend. */
static void authenticate(struct auth_req *a)
{
        struct kube_api_server *srv = a->ep->srv;
        const char *token;

        if (client_verified(srv, a->conn)) {
                int r = cert_user(a->conn, &a->user);

                if (r < 0)
                        a->refused = r == -ENOMEM ? MHD_HTTP_INTERNAL_SERVER_ERROR : MHD_HTTP_UNAUTHORIZED;
                return;
        }
        token = bearer(a->conn);
        if (!token || !srv->review) {
                a->refused = MHD_HTTP_UNAUTHORIZED;
                return;
        }
        /* A cached decision calls on_authn before this returns.  Out of
         * memory is ours, not the token's: a 500, which a client retries,
         * where a 401 would tell it its credentials are bad (refused
         * either way). */
        if (review_authenticate(srv->review, token, on_authn, a, &a->wait) < 0)
                a->refused = MHD_HTTP_INTERNAL_SERVER_ERROR;
        else if (a->wait)
                auth_suspend(a);
}

/* The access a pods path asks for: 1 and the attributes (ns and name
 * pointing into storage), 0 for another path (discovery, or 404),
 * -ENOMEM. */
static int pods_access(struct MHD_Connection *conn, const char *url, struct review_access *ret, char **ret_ns)
{
        const char *ns, *name;
        size_t ns_len;

        *ret_ns = NULL;
        if (strncmp(url, "/api/v1/", 8) != 0 || !pods_path(url + 8, &ns, &ns_len, &name))
                return 0;
        if (ns && !(*ret_ns = strndup(ns, ns_len)))
                return -ENOMEM;
        *ret = (struct review_access){.verb = "list", .namespace = *ret_ns ? *ret_ns : "", .name = name};
        if (bool_arg(conn, "watch", NULL))
                ret->verb = "watch";
        else if (name)
                ret->verb = "get";
        return 1;
}

/* Authorization by SubjectAccessReview, for a pods path.  The user's
 * groups are sent with system:authenticated, which the API server adds
 * to every authenticated user.  May suspend. */
static void authorize(struct auth_req *a, const char *url)
{
        struct kube_api_server *srv = a->ep->srv;
        struct review_access acc;
        struct review_user u = *a->user;
        char *ns = NULL;
        const char **groups = NULL;
        bool has = false;
        int r = pods_access(a->conn, url, &acc, &ns);

        if (r == 0) {
                a->authorized = true;
                return;
        }
        if (r > 0) {
                for (size_t i = 0; i < u.n_groups; i++)
                        has = has || strcmp(u.groups[i], "system:authenticated") == 0;
                r = -ENOMEM;
                if ((groups = malloc((u.n_groups + 1) * sizeof(*groups)))) {
                        memcpy(groups, u.groups, u.n_groups * sizeof(*groups));
                        if (!has)
                                groups[u.n_groups++] = "system:authenticated";
                        u.groups = (char **)groups;
                        r = review_authorize(srv->review, &u, &acc, on_authz, a, &a->wait);
                }
        }
        if (r < 0)
                a->refused = MHD_HTTP_INTERNAL_SERVER_ERROR;
        else if (a->wait)
                auth_suspend(a);
        free(groups);
        free(ns);
}

/* The API server's words for a refused access. */
static enum MHD_Result send_forbidden(struct auth_req *a, const char *url)
{
        struct review_access acc;
        char *ns = NULL;
        struct buf msg = BUF_INIT;
        enum MHD_Result ret;
        int r = pods_access(a->conn, url, &acc, &ns);

        if (r > 0) {
                r = buf_printf(&msg, "pods%s%s is forbidden: User \"%s\" cannot %s resource \"pods\" in API group \"\"",
                               acc.name ? " " : "", acc.name ? acc.name : "", a->user->username, acc.verb);
                if (r >= 0)
                        r = acc.namespace[0] ? buf_printf(&msg, " in the namespace \"%s\"", acc.namespace)
                                             : buf_puts(&msg, " at the cluster scope");
                if (r >= 0 && a->reason)
                        r = buf_printf(&msg, ": %s", a->reason);
        }
        if (r < 0)
                ret = send_status(a->conn, 500, "InternalError", "out of memory", NULL, NULL);
        else
                ret = send_status(a->conn, MHD_HTTP_FORBIDDEN, "Forbidden", msg.len ? msg.data : "forbidden",
                                  "{\"kind\":\"pods\"}", NULL);
        buf_free(&msg);
        free(ns);
        return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls, enum MHD_RequestTerminationCode toe)
{
        struct auth_req *a = *req_cls;

        (void)cls;
        (void)conn;
        (void)toe;
        if (!a)
                return;
        if (a->wait)
                review_cancel(a->ep->srv->review, a->wait);
        loop_io_free(a->hup);
        review_user_unref(a->user);
        free(a->reason);
        free(a);
        *req_cls = NULL;
}

static bool is_read(const char *method)
{
        return strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
}

/* The address's gate: 0 to serve, else the answer was queued (or the
 * request waits, suspended) and *ret is the handler's result. */
static int auth_gate(struct endpoint *ep, struct MHD_Connection *conn, const char *url, const char *method,
                     void **req_cls, enum MHD_Result *ret)
{
        struct kube_api_server *srv = ep->srv;
        struct auth_req *a = *req_cls;

        *ret = MHD_YES;
        if (!a) {
                if (!(a = calloc(1, sizeof(*a)))) {
                        *ret = send_status(conn, 500, "InternalError", "out of memory", NULL, NULL);
                        return 1;
                }
                a->ep = ep;
                a->conn = conn;
                *req_cls = a;
                authenticate(a);
        }
        if (a->suspended)
                return 1;
        if (a->gone) {
                *ret = MHD_NO;
                return 1;
        }
        /* A write is answered 405 whoever asks: nothing to authorize. */
        if (!a->refused && a->user && !a->authorized && srv->authz_webhook && is_read(method))
                authorize(a, url);
        if (a->suspended)
                return 1;
        if (a->refused == MHD_HTTP_FORBIDDEN)
                *ret = send_forbidden(a, url);
        else if (a->refused == MHD_HTTP_INTERNAL_SERVER_ERROR)
                *ret = send_status(conn, 500, "InternalError", "out of memory", NULL, NULL);
        else if (a->refused || !a->user || (srv->authz_webhook && !a->authorized && is_read(method)))
                *ret = send_status(conn, MHD_HTTP_UNAUTHORIZED, "Unauthorized", "Unauthorized", NULL, NULL);
        else
                return 0;
        return 1;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *http_version, const char *upload_data, size_t *upload_size,
                                  void **req_cls)
{
        struct endpoint *ep = cls;
        struct kube_api_server *srv = ep->srv;
        enum MHD_Result ret;
        const char *doc;

        (void)http_version;
        (void)upload_data;
        if (ep->tls && auth_gate(ep, conn, url, method, req_cls, &ret))
                return ret;
        if (!ep->tls && !peer_allowed(srv, conn))
                return send_status(conn, MHD_HTTP_FORBIDDEN, "Forbidden",
                                   "this user may not read the pods here (--allow-uids, --allow-gids)", NULL, NULL);
        /* The first call has the headers alone, and nothing is answered
         * in it: libmicrohttpd closes a connection whose response is
         * queued that early (no keep-alive: a new connection, and a TLS
         * handshake, for every request).  A body is then read and
         * dropped before the answer, as the API server reads a write's
         * (and ignores a read's): a client still sending would otherwise
         * see the connection reset instead of the answer. */
        if (ep->tls ? !((struct auth_req *)*req_cls)->headers_seen : !*req_cls) {
                static char headers_seen;

                if (ep->tls)
                        ((struct auth_req *)*req_cls)->headers_seen = true;
                else
                        *req_cls = &headers_seen;
                return MHD_YES;
        }
        if (*upload_size) {
                *upload_size = 0; /* a body, dropped: nothing here takes one */
                return MHD_YES;
        }
        if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
                if (!known_path(url))
                        return not_found_path(conn);
                return send_status(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed",
                                   "the server does not allow this method on the requested resource", "{}", NULL);
        }
        if ((doc = discovery_doc(url)))
                return send_const(conn, doc);
        if (strncmp(url, "/api/v1/", 8) == 0)
                return do_pods(ep, conn, url + 8);
        return not_found_path(conn);
}

/* ---- the daemon on our loop ------------------------------------------- */

static int copy_ids(const void *src, size_t n, size_t size, void **ret)
{
        if (!n)
                return 0;
        if (!(*ret = malloc(n * size)))
                return -ENOMEM;
        memcpy(*ret, src, n * size);
        return 0;
}

int kube_api_address_check(const char *address, struct buf *err)
{
        char *host = NULL, *port = NULL, *end;
        unsigned long p;
        int r = tcp_split_host_port(address, &host, &port);

        if (r == -ENOMEM) {
                if (err)
                        buf_reset(err);
                return r;
        }
        if (r < 0)
                return buf_set_err(err, -EINVAL, "--kube-api-address \"%s\": expected HOST:PORT", address);
        errno = 0;
        p = strtoul(port, &end, 10);
        if (!port[0] || *end || errno || p == 0 || p > 65535)
                r = buf_set_err(err, -EINVAL, "--kube-api-address \"%s\": invalid port \"%s\"", address, port);
        free(host);
        free(port);
        return r;
}

/* Starts libmicrohttpd on fd (taken, closed on failure) as endpoint
 * srv->ep[srv->n_ep]. */
static int endpoint_start(struct kube_api_server *srv, int fd, bool tls, const char *what, struct buf *err)
{
        struct endpoint *ep = &srv->ep[srv->n_ep];
        int r;

        ep->srv = srv;
        ep->tls = tls;
        /* No MHD_USE_ERROR_LOG: the library would write to stderr, past
         * our log format.  The client CA comes last: without one, its
         * place ends the options, and no certificate is asked for. */
        if (tls)
                ep->mhd = MHD_start_daemon(
                        MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TLS, 0, NULL, NULL, on_request, ep,
                        MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned)KUBE_API_MAX_CONNECTIONS,
                        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)KUBE_API_CONNECTION_TIMEOUT_SEC,
                        MHD_OPTION_HTTPS_MEM_CERT, srv->pem[0], MHD_OPTION_HTTPS_MEM_KEY, srv->pem[1],
                        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
                        srv->pem[2] ? MHD_OPTION_HTTPS_MEM_TRUST : MHD_OPTION_END, srv->pem[2], MHD_OPTION_END);
        else
                ep->mhd = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL, on_request, ep,
                                           MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
                                           (unsigned)KUBE_API_MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
                                           (unsigned)KUBE_API_CONNECTION_TIMEOUT_SEC, MHD_OPTION_END);
        if (!ep->mhd) {
                close(fd);
                return buf_set_err(err, -EIO, "kube-api \"%s\": libmicrohttpd could not start%s", what,
                                   tls ? " (is the certificate, its key and any client CA PEM?)" : "");
        }
        srv->n_ep++;
        if ((r = mhd_loop_attach(&ep->ml, srv->loop, ep->mhd)) == -EIO)
                return buf_set_err(err, r, "kube-api \"%s\": libmicrohttpd has no epoll descriptor", what);
        if (r < 0)
                return buf_set_err(err, r, "kube-api \"%s\": %s", what, ERRNO_STR(r));
        return 0;
}

int kube_api_server_new(struct loop *loop, const struct kube_api_server_config *cfg, struct kube_api_server **ret_srv,
                        struct buf *err)
{
        struct kube_api_server *srv = calloc(1, sizeof(*srv));
        struct kube_view_config vc = {.history = cfg->history, .base_seq = cfg->base_seq};
        char *address = NULL;
        int r = -ENOMEM;

        if (!srv)
                goto fail;
        srv->loop = loop;
        srv->lis.fd = -1;
        srv->tcp_fd = -1;
        srv->min_timeout = cfg->min_request_timeout_usec ? cfg->min_request_timeout_usec
                                                         : KUBE_API_DEFAULT_MIN_REQUEST_TIMEOUT_USEC;
        srv->bookmark_every = cfg->bookmark_usec ? cfg->bookmark_usec : KUBE_API_DEFAULT_BOOKMARK_USEC;
        srv->review = cfg->review;
        srv->authz_webhook = cfg->authz_webhook;
        if (copy_ids(cfg->allow_uids, cfg->n_allow_uids, sizeof(uid_t), (void **)&srv->allow_uids) < 0 ||
            copy_ids(cfg->allow_gids, cfg->n_allow_gids, sizeof(gid_t), (void **)&srv->allow_gids) < 0)
                goto fail;
        srv->n_allow_uids = cfg->n_allow_uids;
        srv->n_allow_gids = cfg->n_allow_gids;
        if ((r = kube_view_new(&vc, &srv->view)) < 0)
                goto fail;
        if (asprintf(&address, "%s%s%s%s", cfg->socket_path ? "unix:" : "", cfg->socket_path ? cfg->socket_path : "",
                     cfg->socket_path && cfg->address ? " and https://"
                     : cfg->address                   ? "https://"
                                                      : "",
                     cfg->address ? cfg->address : "") < 0) {
                address = NULL;
                r = -ENOMEM;
                goto fail;
        }
        srv->address = address;
        if (cfg->socket_path) {
                r = unix_listen(cfg->socket_path, cfg->socket_mode ? cfg->socket_mode : 0660, cfg->socket_gid,
                                &srv->lis, err);
                if (r < 0)
                        goto fail;
                r = endpoint_start(srv, srv->lis.fd, false, address, err);
                srv->lis.fd = -1; /* libmicrohttpd's now, or closed */
                if (r < 0)
                        goto fail;
        }
        if (cfg->address) {
                int fd = -1;

                r = -ENOMEM;
                if (!cfg->tls_cert_pem || !cfg->tls_key_pem) {
                        r = buf_set_err(err, -EINVAL, "kube-api \"%s\": TLS needs a certificate and its key",
                                        cfg->address);
                        goto fail;
                }
                if (!cfg->client_ca_pem && !cfg->review) {
                        r = buf_set_err(err, -EINVAL,
                                        "kube-api \"%s\": nobody could authenticate: no client CA, and no API "
                                        "server to verify tokens",
                                        cfg->address);
                        goto fail;
                }
                if (!(srv->pem[0] = strdup(cfg->tls_cert_pem)) || !(srv->pem[1] = strdup(cfg->tls_key_pem)) ||
                    (cfg->client_ca_pem && !(srv->pem[2] = strdup(cfg->client_ca_pem))))
                        goto fail;

                if ((r = tcp_listen(cfg->address, false, "--kube-api-address", &fd, NULL, err)) < 0)
                        goto fail;
                if ((r = endpoint_start(srv, fd, true, cfg->address, err)) < 0)
                        goto fail;
        }
        *ret_srv = srv;
        return 0;
fail:
        if (r == -ENOMEM && err)
                buf_reset(err); /* a failure replaces what err held */
        kube_api_server_free(srv);
        return r;
}

static void wake_all(struct kube_api_server *srv)
{
        for (struct watch *w = srv->watches; w; w = w->next)
                watch_wake(w);
}

void kube_api_server_set_ready(struct kube_api_server *srv, bool ready)
{
        srv->ready = ready;
}

int kube_api_server_update(struct kube_api_server *srv, const struct pod_update *u, uint64_t seq)
{
        int r;

        if (srv->stale)
                return -ENOMEM; /* the resync brings the whole state */
        r = kube_view_apply(srv->view, u, seq);
        if (r < 0) {
                srv->stale = true;
                return r;
        }
        if (r > 0)
                wake_all(srv);
        return 0;
}

bool kube_api_server_stale(const struct kube_api_server *srv)
{
        return srv->stale;
}

int kube_api_server_resync(struct kube_api_server *srv, const struct pod_update *set, uint64_t seq)
{
        int r = kube_view_apply(srv->view, set, seq);

        if (r < 0)
                return r;
        srv->stale = false;
        if (r > 0)
                wake_all(srv);
        return 0;
}

const char *kube_api_server_address(const struct kube_api_server *srv)
{
        return srv->address;
}

void kube_api_server_free(struct kube_api_server *srv)
{
        if (!srv)
                return;
        /* libmicrohttpd refuses to stop with a connection suspended:
         * resume them all, to end. */
        srv->stopping = true;
        wake_all(srv);
        while (srv->waiting) {
                struct auth_req *a = srv->waiting;

                review_cancel(srv->review, a->wait);
                a->wait = NULL;
                a->gone = true;
                auth_resume(a);
        }
        for (size_t i = 0; i < srv->n_ep; i++)
                mhd_loop_detach(&srv->ep[i].ml);
        /* Stopping frees every watch, and closes the socket it was given. */
        for (size_t i = 0; i < srv->n_ep; i++)
                MHD_stop_daemon(srv->ep[i].mhd);
        if (srv->lis.path)
                unix_listener_close(&srv->lis);
        else if (srv->lis.fd >= 0)
                close(srv->lis.fd);
        kube_view_free(srv->view);
        for (size_t i = 0; i < 3; i++)
                free(srv->pem[i]);
        free(srv->allow_uids);
        free(srv->allow_gids);
        free(srv->address);
        free(srv);
}
