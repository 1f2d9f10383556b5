/*
 * kube_api_server — the node's pods served read-only through the
 * Kubernetes API itself (--kube-api-socket), so that kubectl, client-go
 * informers and the other Kubernetes clients read podmux unmodified
 * (doc/kube-api.md).
 *
 * Serves discovery (/api, /api/v1, /apis, /version) and pods: get, list
 * (label and field selectors, limit and continue, resourceVersion and
 * resourceVersionMatch) and watch (replay from a version, bookmarks,
 * timeouts, 410 for a version too old, WatchList's initial events), over
 * libmicrohttpd in external-epoll mode on our loop, as the metrics
 * endpoint does (src/metrics/metrics_server.c).  Watches are chunked
 * responses, one JSON line per event, written as the view changes: a
 * watch with nothing to send is suspended and resumed on the next event.
 *
 * On --kube-api-address, a client is authenticated by a certificate of
 * the client CA (when one is given) or by a bearer token the API server
 * vouches for (TokenReview), and with Webhook authorization each pods
 * request is asked of the API server (SubjectAccessReview), both
 * through src/kube/review.h; a request waiting for a review is
 * suspended, and resumed by the review's answer.
 *
 * Owns: the view (src/kubeapi/kube_view.h), the listening unix socket and
 * its lock, the TCP listener of --kube-api-address, a libmicrohttpd daemon
 * for each, one timer per watch, the waits of requests on reviews.
 * Never: logs; answers a write; serves TCP without TLS, or an
 * unauthenticated TLS client; decides an access the API server could not
 * decide (it refuses).
 * Cost: an update costs what kube_view_apply() costs, plus O(watches) to
 * wake them; each watch then spends O(log history) to find its place and
 * O(1) per event, filtered by its selectors.  A list or a watch's initial
 * events are O(n log n) in the pods served, inherently.
 */
#ifndef PODMUX_KUBE_API_SERVER_H
#define PODMUX_KUBE_API_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/pod.h"
#include "kube/review.h"
#include "util/buf.h"
#include "util/loop.h"

/* Connections served at once (every watch holds one). */
#define KUBE_API_MAX_CONNECTIONS 512
/* How long an idle connection that is not a watch is kept. */
#define KUBE_API_CONNECTION_TIMEOUT_SEC 60
/* A watch without timeoutSeconds ends after a time drawn from [t, 2t),
 * t being this by default (the API server's --min-request-timeout). */
#define KUBE_API_DEFAULT_MIN_REQUEST_TIMEOUT_USEC (1800ull * 1000000ull)
/* Bookmarks, when asked for, about this often. */
#define KUBE_API_DEFAULT_BOOKMARK_USEC (60ull * 1000000ull)
/* The longest timeoutSeconds taken; longer is cut to it. */
#define KUBE_API_MAX_TIMEOUT_SEC (24 * 3600)
/* Selectors longer than this are refused (400). */
#define KUBE_API_MAX_SELECTOR 8192

struct kube_api_server_config {
        const char *socket_path; /* NULL: no unix socket */
        mode_t socket_mode;      /* 0: 0660 */
        gid_t socket_gid;        /* (gid_t)-1: the daemon's */
        /* As the stream's (--allow-uids, --allow-gids): empty lists let
         * every peer the socket's mode admits in; otherwise root, the
         * daemon's user and the listed ids only.  Copied. */
        const uid_t *allow_uids;
        size_t n_allow_uids;
        const gid_t *allow_gids;
        size_t n_allow_gids;
        size_t history;                    /* watch events kept; 0: the view's default */
        uint64_t base_seq;                 /* the stream's last number now */
        uint64_t min_request_timeout_usec; /* 0: the default */
        uint64_t bookmark_usec;            /* 0: the default */
        /* --kube-api-address HOST:PORT (NULL: none), always TLS: the
         * serving certificate and key, and the CA whose certificates
         * identify clients, as PEM text (src/kubeapi/kube_tls.h reads
         * them); copied.  Without a client CA (NULL), no certificate is
         * asked for nor taken, and only tokens authenticate: review is
         * then needed (-EINVAL without).  Anonymous requests get 401. */
        const char *address;
        const char *tls_cert_pem, *tls_key_pem, *client_ca_pem;
        /* Borrowed, outlives the server: bearer tokens are verified by
         * TokenReview through it; NULL (no API server): a token is
         * refused (401), certificates only. */
        struct review *review;
        /* --kube-api-authorization-mode Webhook: every pods request on the
         * address is asked by SubjectAccessReview (needs review; else
         * every authenticated client reads every pod, AlwaysAllow).
         * Discovery needs authentication only, as the API server's
         * system:discovery role grants it to every authenticated user. */
        bool authz_webhook;
};

struct kube_api_server;

/* Checks the syntax of --kube-api-address: HOST:PORT or [V6]:PORT, HOST
 * possibly empty (every address).  0, or -EINVAL with a message in err,
 * -ENOMEM. */
int kube_api_address_check(const char *address, struct buf *err);
/* Listens and serves on loop.  Until kube_api_server_set_ready(), lists,
 * gets and watches get 503.  0, or -errno with a message in err
 * (util/buf.h). */
int kube_api_server_new(struct loop *loop, const struct kube_api_server_config *cfg, struct kube_api_server **ret_srv,
                        struct buf *err);
/* Every configured source has delivered (or a checkpoint is served). */
void kube_api_server_set_ready(struct kube_api_server *srv, bool ready);
/* A record the merger emitted, numbered seq by the stream (u is only
 * read).  0, or -ENOMEM: the view is unchanged, serves 503 from now on,
 * and needs kube_api_server_resync(). */
int kube_api_server_update(struct kube_api_server *srv, const struct pod_update *u, uint64_t seq);
/* Whether the view missed a record and waits for a resync. */
bool kube_api_server_stale(const struct kube_api_server *srv);
/* Brings a stale view to the merged state (a SET of every pod), as the
 * events that make the difference.  0 or -ENOMEM (still stale). */
int kube_api_server_resync(struct kube_api_server *srv, const struct pod_update *set, uint64_t seq);
/* "unix:/path", for the log. */
const char *kube_api_server_address(const struct kube_api_server *srv);
void kube_api_server_free(struct kube_api_server *srv); /* NULL-safe */

#endif
