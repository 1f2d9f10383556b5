/*
 * kube_client — how a request reaches the API server (see
 * src/kube/kube_client.h and doc/api-source.md sections 8-9).
 *
 * Every request is set up here from the one kubeconfig, so the API
 * source's and the Events recorder's requests cannot drift apart: the
 * same TLS material, the same token (read once for both), the same
 * tls-server-name routing.  A 401 to either makes both read the token
 * again.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <json-c/json.h>
#include <openssl/x509.h>

#include "kube/kube_client.h"
#include "util/clock.h"
#include "util/json_get.h"
#include "util/json_parse.h"
#include "util/str.h"

struct kube_client {
        struct kube_config kube;
        char *server_log; /* the server URL as it may be logged */
        /* What request URLs start with: the server URL, or with
         * tls-server-name its host replaced by that name; then
         * connect_to sends the connection to the real host, and
         * host_header names it (see server_name_setup). */
        char *base;
        struct curl_slist *connect_to;
        char *host_header;

        /* the token read from the token file */
        char *token;
        uint64_t token_at;
        bool token_stale;
        char *token_problem; /* the last problem reading it, for the caller */

        uint64_t prepared;
};

/* ---- setup ------------------------------------------------------------------------------ */

/* The server URL without user, password or query.  0, -EINVAL (err says
 * why) or -ENOMEM. */
static int server_log_setup(struct kube_client *kc, struct buf *err)
{
        CURLU *u = curl_url();
        char *s = NULL;
        CURLUcode uc = u ? curl_url_set(u, CURLUPART_URL, kc->kube.server, 0) : CURLUE_OUT_OF_MEMORY;
        int r = -ENOMEM;

        if (uc == CURLUE_OK) {
                curl_url_set(u, CURLUPART_USER, NULL, 0);
                curl_url_set(u, CURLUPART_PASSWORD, NULL, 0);
                curl_url_set(u, CURLUPART_QUERY, NULL, 0);
                if (curl_url_get(u, CURLUPART_URL, &s, 0) == CURLUE_OK) {
                        kc->server_log = strdup(s);
                        curl_free(s);
                }
                r = kc->server_log ? 0 : -ENOMEM;
        } else if (uc != CURLUE_OUT_OF_MEMORY) {
                r = buf_set_err(err, -EINVAL, "API server URL \"%s\" cannot be parsed", kc->kube.server);
        }
        curl_url_cleanup(u);
        return r;
}

/*
 * With tls-server-name (https only): requests name that host, so SNI and
 * the certificate check use it, while CURLOPT_CONNECT_TO sends the
 * connection to the server's own host and port and the Host header names
 * them, as client-go's ServerName does.  Without it, requests start with
 * the server URL.  Sets base, connect_to and host_header.  0, -EINVAL
 * (err says why) or -ENOMEM.
 */
static int server_name_setup(struct kube_client *kc, struct buf *err)
{
        CURLU *u = NULL;
        char *scheme = NULL, *host = NULL, *port = NULL, *url = NULL;
        struct buf b = BUF_INIT;
        CURLUcode uc;
        int r = -ENOMEM;

        if (!kc->kube.tls_server_name || !kc->kube.tls_server_name[0] ||
            strncasecmp(kc->kube.server, "https://", 8) != 0) {
                kc->base = strdup(kc->kube.server);
                return kc->base ? 0 : -ENOMEM;
        }
        u = curl_url();
        if (!u)
                return -ENOMEM;
        uc = curl_url_set(u, CURLUPART_URL, kc->kube.server, 0);
        if (uc == CURLUE_OK)
                uc = curl_url_get(u, CURLUPART_HOST, &host, 0);
        if (uc == CURLUE_OK)
                uc = curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
        if (uc == CURLUE_OK)
                uc = curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
        if (uc == CURLUE_OUT_OF_MEMORY)
                goto out;
        if (uc != CURLUE_OK) {
                r = buf_set_err(err, -EINVAL, "API server URL \"%s\" cannot be parsed", kc->kube.server);
                goto out;
        }
        /* The Host header says what the URL says: the port only if given. */
        {
                char *given = NULL;

                uc = curl_url_get(u, CURLUPART_PORT, &given, 0);
                if (uc == CURLUE_OUT_OF_MEMORY)
                        goto out;
                r = given ? buf_printf(&b, "Host: %s:%s", host, given) : buf_printf(&b, "Host: %s", host);
                curl_free(given);
                if (r < 0 || !(kc->host_header = buf_steal(&b, NULL)))
                        goto nomem;
        }
        if (buf_printf(&b, "%s:%s:%s:%s", kc->kube.tls_server_name, port, host, port) < 0 ||
            !(kc->connect_to = curl_slist_append(NULL, b.data)))
                goto nomem;
        uc = curl_url_set(u, CURLUPART_HOST, kc->kube.tls_server_name, 0);
        if (uc == CURLUE_OK)
                uc = curl_url_get(u, CURLUPART_URL, &url, 0);
        if (uc == CURLUE_OUT_OF_MEMORY)
                goto nomem;
        if (uc != CURLUE_OK) {
                r = buf_set_err(err, -EINVAL, "tls-server-name \"%s\" is not a host name", kc->kube.tls_server_name);
                goto out;
        }
        /* The server URL's own path stays; requests add theirs after it. */
        {
                size_t n = strlen(url);

                while (n > 8 && url[n - 1] == '/')
                        url[--n] = '\0';
                kc->base = strdup(url);
        }
        r = kc->base ? 0 : -ENOMEM;
        goto out;
nomem:
        r = -ENOMEM;
out:
        buf_free(&b);
        curl_free(scheme);
        curl_free(host);
        curl_free(port);
        curl_free(url);
        curl_url_cleanup(u);
        return r;
}

int kube_client_new(struct kube_config *cfg, struct kube_client **ret_kc, struct buf *err)
{
        struct kube_client *kc = calloc(1, sizeof(*kc));
        int r;

        if (!kc) {
                kube_config_free(cfg);
                memset(cfg, 0, sizeof(*cfg));
                if (err)
                        buf_reset(err);
                return -ENOMEM;
        }
        kc->kube = *cfg;
        memset(cfg, 0, sizeof(*cfg));
        if ((r = server_log_setup(kc, err)) < 0 || (r = server_name_setup(kc, err)) < 0) {
                if (r == -ENOMEM && err)
                        buf_reset(err); /* a failure replaces what err held */
                kube_client_free(kc);
                return r;
        }
        *ret_kc = kc;
        return 0;
}

void kube_client_free(struct kube_client *kc)
{
        if (!kc)
                return;
        if (kc->token)
                memset(kc->token, 0, strlen(kc->token));
        free(kc->token);
        free(kc->token_problem);
        free(kc->server_log);
        free(kc->base);
        free(kc->host_header);
        curl_slist_free_all(kc->connect_to);
        kube_config_free(&kc->kube);
        free(kc);
}

const char *kube_client_server(const struct kube_client *kc)
{
        return kc->server_log;
}

const struct kube_config *kube_client_config(const struct kube_client *kc)
{
        return &kc->kube;
}

void kube_client_unauthorized(struct kube_client *kc)
{
        kc->token_stale = true;
}

uint64_t kube_client_prepared(const struct kube_client *kc)
{
        return kc->prepared;
}

/* ---- the token ------------------------------------------------------------------------- */

/* A problem with the token file, kept for the caller to log.  Out of
 * memory keeps a shorter text that still names the kind. */
static const char *token_problem(struct kube_client *kc, const char *what)
{
        struct buf b = BUF_INIT;

        if (buf_printf(&b, "token file \"%s\": %s", kc->kube.token_file, what) == 0) {
                free(kc->token_problem);
                kc->token_problem = buf_steal(&b, NULL);
        }
        buf_free(&b);
        return kc->token_problem ? kc->token_problem : "the token file cannot be used";
}

/* The bearer token: from the token file (re-read about every 50 s and after
 * a 401, as client-go does), else the inline token.  NULL if none, and
 * *ret_oom set when the file's token could not be kept; *ret_problem
 * when the file could not be used. */
static const char *current_token(struct kube_client *kc, bool *ret_oom, const char **ret_problem)
{
        uint64_t now = mono_usec();

        if (!kc->kube.token_file)
                return kc->kube.token;
        if (!kc->token || kc->token_stale || now - kc->token_at >= KUBE_TOKEN_REFRESH_USEC) {
                FILE *f = fopen(kc->kube.token_file, "re");
                char buf[KUBE_TOKEN_MAX + 1];
                size_t n = 0;

                if (f) {
                        n = fread(buf, 1, sizeof(buf) - 1, f);
                        fclose(f);
                }
                buf[n] = '\0';
                /* Surrounding whitespace is not part of the token. */
                {
                        char *s = buf, *e = buf + n;

                        while (*s && isspace((unsigned char)*s))
                                s++;
                        while (e > s && isspace((unsigned char)e[-1]))
                                *--e = '\0';
                        if (!f || !*s) {
                                *ret_problem = token_problem(kc, f ? "empty" : "cannot be read");
                                if (!kc->token)
                                        return kc->kube.token;
                        } else {
                                char *copy = strdup(s);

                                if (!copy) {
                                        /* Not sent without it, nor with
                                         * a stale one: tried again. */
                                        memset(buf, 0, sizeof(buf));
                                        *ret_oom = true;
                                        return NULL;
                                }
                                if (kc->token)
                                        memset(kc->token, 0, strlen(kc->token));
                                free(kc->token);
                                kc->token = copy;
                        }
                }
                memset(buf, 0, sizeof(buf));
                kc->token_at = now;
                kc->token_stale = false;
        }
        return kc->token ? kc->token : kc->kube.token;
}

/* ---- requests -------------------------------------------------------------------------- */

/* libcurl copies strings and blobs, which may run out of memory. */
static int set_copied(CURL *e, CURLoption opt, const void *v)
{
        return curl_easy_setopt(e, opt, v) == CURLE_OUT_OF_MEMORY ? -ENOMEM : 0;
}

/* One PEM item: in-memory bytes (a *-data field) win over a file path. */
static int set_pem(CURL *e, CURLoption blob_opt, CURLoption file_opt, const struct kube_blob *data, const char *file)
{
        if (data->data) {
                struct curl_blob blob = {data->data, data->len, CURL_BLOB_COPY};

                return set_copied(e, blob_opt, &blob);
        }
        return file ? set_copied(e, file_opt, file) : 0;
}

static int set_tls(const struct kube_config *k, CURL *e)
{
        int r;

        if ((r = set_pem(e, CURLOPT_CAINFO_BLOB, CURLOPT_CAINFO, &k->ca_data, k->ca_file)) < 0 ||
            (r = set_pem(e, CURLOPT_SSLCERT_BLOB, CURLOPT_SSLCERT, &k->cert_data, k->cert_file)) < 0 ||
            (r = set_pem(e, CURLOPT_SSLKEY_BLOB, CURLOPT_SSLKEY, &k->key_data, k->key_file)) < 0)
                return r;
        if ((k->cert_data.data || k->cert_file) && (r = set_copied(e, CURLOPT_SSLCERTTYPE, "PEM")) < 0)
                return r;
        if ((k->key_data.data || k->key_file) && (r = set_copied(e, CURLOPT_SSLKEYTYPE, "PEM")) < 0)
                return r;
        if (k->insecure) {
                curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
                curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
        }
        return 0;
}

#define USER_AGENT "podmux/" PODMUX_VERSION " (linux) podmux"

int kube_client_prepare(struct kube_client *kc, CURL *e, const char *path, struct curl_slist **hdrs,
                        const char **ret_token_problem)
{
        struct buf h = BUF_INIT;
        const char *token, *problem = NULL;
        struct curl_slist *n;
        bool token_oom = false;
        int r;

        if (ret_token_problem)
                *ret_token_problem = NULL;
        if (!(n = curl_slist_append(*hdrs, "Accept: application/json")))
                return -ENOMEM;
        *hdrs = n;
        if (kc->host_header && !(n = curl_slist_append(*hdrs, kc->host_header)))
                return -ENOMEM;
        *hdrs = n;
        token = current_token(kc, &token_oom, &problem);
        if (ret_token_problem)
                *ret_token_problem = problem;
        if (token_oom)
                return -ENOMEM;
        if (token) {
                n = buf_printf(&h, "Authorization: Bearer %s", token) == 0 ? curl_slist_append(*hdrs, h.data) : NULL;
                if (h.len)
                        memset(h.data, 0, h.len);
                buf_free(&h);
                if (!n)
                        return -ENOMEM;
                *hdrs = n;
        }
        if ((r = buf_printf(&h, "%s%s", kc->base, path)) < 0)
                return r;
        r = set_copied(e, CURLOPT_URL, h.data);
        buf_free(&h);
        if (r < 0 || (r = set_copied(e, CURLOPT_USERAGENT, USER_AGENT)) < 0 ||
            (r = set_copied(e, CURLOPT_PROTOCOLS_STR, "http,https")) < 0 ||
            (r = set_copied(e, CURLOPT_ACCEPT_ENCODING, "")) < 0 || (r = set_tls(&kc->kube, e)) < 0)
                return r;
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, *hdrs);
        if (kc->connect_to)
                curl_easy_setopt(e, CURLOPT_CONNECT_TO, kc->connect_to);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, KUBE_CONNECT_TIMEOUT_MS);
        curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
        curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 30L);
        kc->prepared++;
        return 0;
}

/* ---- answers --------------------------------------------------------------------------- */

int kube_describe_status(const char *body, size_t len, long status, struct buf *out)
{
        json_object *o = NULL, *v;
        int r = buf_printf(out, "HTTP %ld", status);

        if (r == 0 && len && json_parse_text(body, len, &o, NULL) == 0 && json_object_is_type(o, json_type_object)) {
                if ((v = json_get(o, "reason")) && json_object_is_type(v, json_type_string))
                        r = buf_printf(out, " %s", json_object_get_string(v));
                if (r == 0 && (v = json_get(o, "message")) && json_object_is_type(v, json_type_string))
                        r = buf_printf(out, ": %s", json_object_get_string(v));
        }
        json_object_put(o);
        return r < 0 ? -ENOMEM : 0;
}

enum kube_failure kube_failure_kind(CURL *easy, CURLcode result)
{
        long os_errno = 0;

        switch (result) {
        case CURLE_COULDNT_CONNECT:
                if (easy)
                        curl_easy_getinfo(easy, CURLINFO_OS_ERRNO, &os_errno);
                return os_errno == ECONNREFUSED ? KUBE_FAILURE_REFUSED
                       : os_errno == ETIMEDOUT  ? KUBE_FAILURE_TIMEOUT
                                                : KUBE_FAILURE_CONNECT;
        case CURLE_OPERATION_TIMEDOUT:
                return KUBE_FAILURE_TIMEOUT;
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
                return KUBE_FAILURE_DNS;
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_CIPHER:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_ENGINE_NOTFOUND:
        case CURLE_SSL_ENGINE_SETFAILED:
        case CURLE_SSL_ENGINE_INITFAILED:
        case CURLE_SSL_SHUTDOWN_FAILED:
        case CURLE_SSL_CRL_BADFILE:
        case CURLE_SSL_ISSUER_ERROR:
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
        case CURLE_SSL_INVALIDCERTSTATUS:
        case CURLE_SSL_CLIENTCERT:
        case CURLE_USE_SSL_FAILED:
                return KUBE_FAILURE_TLS;
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_PARTIAL_FILE:
                return KUBE_FAILURE_LOST;
        default:
                return KUBE_FAILURE_OTHER;
        }
}

/* The host of easy's URL, or NULL (to be curl_free()d). */
static char *url_host(CURL *easy)
{
        char *url = NULL, *host = NULL;
        CURLU *u;

        if (!easy || curl_easy_getinfo(easy, CURLINFO_EFFECTIVE_URL, &url) != CURLE_OK || !url || !(u = curl_url()))
                return NULL;
        if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK)
                host = NULL;
        curl_url_cleanup(u);
        return host;
}

int kube_describe_failure(CURL *easy, CURLcode result, struct buf *out)
{
        long os_errno = 0, verify = 0;
        char *host = NULL;
        int r;

        switch (kube_failure_kind(easy, result)) {
        case KUBE_FAILURE_REFUSED:
                return buf_puts(out, "connection refused");
        case KUBE_FAILURE_CONNECT:
                if (easy)
                        curl_easy_getinfo(easy, CURLINFO_OS_ERRNO, &os_errno);
                return os_errno > 0 ? buf_printf(out, "cannot connect: %s", ERRNO_STR((int)os_errno))
                                    : buf_puts(out, "cannot connect");
        case KUBE_FAILURE_TIMEOUT:
                return buf_puts(out, "timed out");
        case KUBE_FAILURE_DNS:
                host = url_host(easy);
                r = host ? buf_printf(out, "DNS: cannot resolve \"%s\"", host)
                         : buf_printf(out, "DNS: %s", curl_easy_strerror(result));
                curl_free(host);
                return r;
        case KUBE_FAILURE_TLS:
                /* The certificate check says best what is wrong. */
                if (easy)
                        curl_easy_getinfo(easy, CURLINFO_SSL_VERIFYRESULT, &verify);
                return verify > 0 ? buf_printf(out, "TLS: certificate verify failed: %s",
                                               X509_verify_cert_error_string(verify))
                                  : buf_printf(out, "TLS: %s", curl_easy_strerror(result));
        case KUBE_FAILURE_LOST:
                return buf_printf(out, "connection lost: %s", curl_easy_strerror(result));
        case KUBE_FAILURE_OTHER:
                break;
        }
        return buf_puts(out, curl_easy_strerror(result));
}
