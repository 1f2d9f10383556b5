/*
 * kube_client — one API server as requests reach it: what the API
 * source's list and watch, the Events recorder's writes (and later the
 * local API's reviews) share, so that each request leaves with the same
 * URL, TLS, credentials and timeouts (doc/api-source.md sections 8-9).
 *
 * Owns: the connection settings (moved in from kubeconfig), the request
 * base URL and, with tls-server-name, the connect-to rule and Host header
 * (as client-go's ServerName), the server's URL as it may be logged, and
 * the bearer token read from the token file (re-read about every
 * KUBE_TOKEN_REFRESH_USEC and after a 401, as client-go does).
 * Never: starts a transfer, logs, or puts a token or key into a message
 * or a log line.  Each user starts and ends its own transfers.
 *
 * Also the one reading of what a server answered: a Status body
 * (kube_describe_status), and the kind of a failure that got no answer
 * (kube_describe_failure).  A Retry-After header, and what it asks of
 * the request, are util/retry_after.h's.
 */
#ifndef PODMUX_KUBE_CLIENT_H
#define PODMUX_KUBE_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include <curl/curl.h>

#include "kube/kubeconfig.h"
#include "util/buf.h"

/* client-go re-reads a token file this often. */
#define KUBE_TOKEN_REFRESH_USEC 50000000ull
/* A connection not made within this long has failed. */
#define KUBE_CONNECT_TIMEOUT_MS 30000L
/* The longest token taken from a token file (bytes). */
#define KUBE_TOKEN_MAX 16383u

struct kube_client;

/* *cfg is moved in (zeroed).  0; -EINVAL for a server URL or
 * tls-server-name that cannot be used, with the reason in err (may be
 * NULL; util/buf.h); -ENOMEM (err empty; cfg is still moved and freed). */
int kube_client_new(struct kube_config *cfg, struct kube_client **ret_kc, struct buf *err);
void kube_client_free(struct kube_client *kc); /* NULL-safe */

/* The server URL without credentials or query, as it may be logged; also
 * the server's identity a checkpoint records.  Lives as long as kc. */
const char *kube_client_server(const struct kube_client *kc);
/* The settings as loaded (the CA bundle's fingerprint is taken from them). */
const struct kube_config *kube_client_config(const struct kube_client *kc);

/*
 * Sets easy up for a request to path (from "/api/..."): the URL, Accept,
 * the Host header for tls-server-name, the bearer token as it is now,
 * TLS, the user agent, the connect timeout and TCP keep-alive.  The
 * header list goes to *hdrs (appended to; the caller frees it once the
 * transfer is over and may append to it).  A token file that cannot be
 * read or is empty does not stop the request (the token held before, or
 * the inline one, goes): *ret_token_problem (may be NULL) then says why,
 * for the caller to log, and is NULL otherwise.  0 or -ENOMEM.
 */
int kube_client_prepare(struct kube_client *kc, CURL *easy, const char *path, struct curl_slist **hdrs,
                        const char **ret_token_problem);
/* A request was answered 401: the token file is read again before the
 * next request, whoever makes it. */
void kube_client_unauthorized(struct kube_client *kc);
/* Requests set up so far (tests). */
uint64_t kube_client_prepared(const struct kube_client *kc);

/* "HTTP <status>[ <reason>][: <message>]" from an answer's Status body
 * (any body: what is not a Status adds nothing), appended to out.  0 or
 * -ENOMEM. */
int kube_describe_status(const char *body, size_t len, long status, struct buf *out);

/* The kinds of failure of a request that got no HTTP answer. */
enum kube_failure {
        KUBE_FAILURE_REFUSED, /* connection refused */
        KUBE_FAILURE_CONNECT, /* no route, network unreachable and the like */
        KUBE_FAILURE_TIMEOUT, /* no connection or no answer in time */
        KUBE_FAILURE_DNS,     /* the host name did not resolve */
        KUBE_FAILURE_TLS,     /* handshake, certificate or key */
        KUBE_FAILURE_LOST,    /* the connection reset or closed */
        KUBE_FAILURE_OTHER,
};

/* The kind of result (not CURLE_OK) on easy (before its cleanup). */
enum kube_failure kube_failure_kind(CURL *easy, CURLcode result);
/*
 * One line naming the kind first, appended to out: "connection refused",
 * "timed out", "DNS: cannot resolve \"HOST\"", "TLS: <what failed>", ...
 * The same failure gives the same words (no times or counts in them), so
 * a caller may log it once per distinct text.  easy may be NULL (then
 * less is said).  0 or -ENOMEM.
 */
int kube_describe_failure(CURL *easy, CURLcode result, struct buf *out);

#endif
