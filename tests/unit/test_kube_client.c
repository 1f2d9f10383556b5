/* Unit tests: the kube client (kube/kube_client): request setup, the
 * token file, Status bodies, and the kind of a failure that
 * got no answer, made to happen on the loopback (refused, timed out) and
 * with a name that cannot resolve.  TLS and HTTP status failures of the
 * daemon are tested against real servers by
 * tests/integration/test_api_source.py. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "failalloc.h"
#include "kube/kube_client.h"
#include "unit.h"

static void init_curl(void)
{
        static bool done;

        if (!done)
                ck_assert_int_eq(curl_global_init(CURL_GLOBAL_DEFAULT), CURLE_OK);
        done = true;
}

static struct kube_client *client_for(const char *server, const char *token_file)
{
        struct kube_config kc = {0};
        struct kube_client *kube = NULL;
        struct buf err = BUF_INIT;

        kc.server = strdup(server);
        ck_assert_ptr_nonnull(kc.server);
        if (token_file) {
                kc.token_file = strdup(token_file);
                kc.token = strdup("inline");
        }
        ck_assert_msg(kube_client_new(&kc, &kube, &err) == 0, "%s", err.data);
        buf_free(&err);
        return kube;
}

/* A loopback TCP socket bound to a free port; listening or not. */
static int loopback_socket(bool listening, unsigned *ret_port)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(a);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        if (listening)
                ck_assert_int_eq(listen(fd, 8), 0);
        ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
        *ret_port = ntohs(a.sin_port);
        return fd;
}

/* One GET of /api through kube, blocking (a test may), with an overall
 * limit of timeout_ms; the failure's words into out. */
static CURLcode get(struct kube_client *kube, long timeout_ms, enum kube_failure *ret_kind, struct buf *out)
{
        CURL *e = curl_easy_init();
        struct curl_slist *hdrs = NULL;
        CURLcode result;

        ck_assert_ptr_nonnull(e);
        ck_assert_int_eq(kube_client_prepare(kube, e, "/api", &hdrs, NULL), 0);
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
        result = curl_easy_perform(e);
        if (result != CURLE_OK) {
                *ret_kind = kube_failure_kind(e, result);
                ck_assert_int_eq(kube_describe_failure(e, result, out), 0);
        }
        curl_easy_cleanup(e);
        curl_slist_free_all(hdrs);
        return result;
}

/* A port bound but not listening refuses the connection. */
START_TEST(test_refused)
{
        struct buf why = BUF_INIT;
        enum kube_failure kind;
        unsigned port;
        int fd = loopback_socket(false, &port);
        char url[64];
        struct kube_client *kube;

        init_curl();
        (void)snprintf(url, sizeof(url), "http://127.0.0.1:%u", port);
        kube = client_for(url, NULL);
        ck_assert_int_eq(get(kube, 10000, &kind, &why), CURLE_COULDNT_CONNECT);
        ck_assert_int_eq(kind, KUBE_FAILURE_REFUSED);
        ck_assert_str_eq(why.data, "connection refused");
        close(fd);
        buf_free(&why);
        kube_client_free(kube);
}
END_TEST

/* A server that takes the connection and never answers: timed out. */
START_TEST(test_timed_out)
{
        struct buf why = BUF_INIT;
        enum kube_failure kind;
        unsigned port;
        int fd = loopback_socket(true, &port);
        char url[64];
        struct kube_client *kube;

        init_curl();
        (void)snprintf(url, sizeof(url), "http://127.0.0.1:%u", port);
        kube = client_for(url, NULL);
        ck_assert_int_eq(get(kube, 200, &kind, &why), CURLE_OPERATION_TIMEDOUT);
        ck_assert_int_eq(kind, KUBE_FAILURE_TIMEOUT);
        ck_assert_str_eq(why.data, "timed out");
        close(fd);
        buf_free(&why);
        kube_client_free(kube);
}
END_TEST

/* A name under .invalid never resolves (RFC 2606). */
START_TEST(test_dns)
{
        struct buf why = BUF_INIT;
        enum kube_failure kind;
        struct kube_client *kube;

        init_curl();
        kube = client_for("http://nonexistent.invalid:6443", NULL);
        ck_assert_int_eq(get(kube, 10000, &kind, &why), CURLE_COULDNT_RESOLVE_HOST);
        ck_assert_int_eq(kind, KUBE_FAILURE_DNS);
        ck_assert_str_eq(why.data, "DNS: cannot resolve \"nonexistent.invalid\"");
        buf_free(&why);
        kube_client_free(kube);
}
END_TEST

/* The kinds libcurl's codes fall into, without a handle (TLS is made to
 * happen by the integration tests). */
START_TEST(test_kinds_without_a_handle)
{
        struct buf why = BUF_INIT;

        ck_assert_int_eq(kube_failure_kind(NULL, CURLE_PEER_FAILED_VERIFICATION), KUBE_FAILURE_TLS);
        ck_assert_int_eq(kube_failure_kind(NULL, CURLE_SSL_CONNECT_ERROR), KUBE_FAILURE_TLS);
        ck_assert_int_eq(kube_failure_kind(NULL, CURLE_RECV_ERROR), KUBE_FAILURE_LOST);
        ck_assert_int_eq(kube_failure_kind(NULL, CURLE_COULDNT_CONNECT), KUBE_FAILURE_CONNECT);
        ck_assert_int_eq(kube_failure_kind(NULL, CURLE_OUT_OF_MEMORY), KUBE_FAILURE_OTHER);
        ck_assert_int_eq(kube_describe_failure(NULL, CURLE_PEER_FAILED_VERIFICATION, &why), 0);
        ck_assert_msg(strncmp(why.data, "TLS: ", 5) == 0, "%s", why.data);
        buf_reset(&why);
        ck_assert_int_eq(kube_describe_failure(NULL, CURLE_COULDNT_CONNECT, &why), 0);
        ck_assert_str_eq(why.data, "cannot connect");
        buf_free(&why);
}
END_TEST

START_TEST(test_describe_status)
{
        static const char status[] = "{\"kind\":\"Status\",\"reason\":\"Forbidden\",\"message\":\"pods is forbidden\"}";
        struct buf why = BUF_INIT;

        ck_assert_int_eq(kube_describe_status(status, strlen(status), 403, &why), 0);
        ck_assert_str_eq(why.data, "HTTP 403 Forbidden: pods is forbidden");
        buf_reset(&why);
        ck_assert_int_eq(kube_describe_status("<html>", 6, 502, &why), 0);
        ck_assert_str_eq(why.data, "HTTP 502");
        buf_free(&why);
}
END_TEST

/* The logged server URL has no credentials or query; a URL that cannot
 * be parsed is refused with its reason. */
START_TEST(test_server_identity_and_bad_url)
{
        struct kube_client *kube = client_for("https://user:secret@api.example:6443/prefix?x=1", NULL);
        struct kube_config kc = {0};
        struct buf err = BUF_INIT;

        ck_assert_str_eq(kube_client_server(kube), "https://api.example:6443/prefix");
        kube_client_free(kube);
        kc.server = strdup("http://[::1");
        kube = NULL;
        ck_assert_int_eq(kube_client_new(&kc, &kube, &err), -EINVAL);
        ck_assert_ptr_null(kube);
        ck_assert_ptr_null(kc.server); /* moved in, and freed */
        ck_assert_str_eq(err.data, "API server URL \"http://[::1\" cannot be parsed");
        buf_free(&err);
}
END_TEST

/* A token file that cannot be read does not stop the request: the
 * inline token goes, and the caller is told why. */
START_TEST(test_token_file_problem)
{
        struct kube_client *kube;
        struct curl_slist *hdrs = NULL;
        const char *problem = NULL;
        CURL *e;
        bool bearer = false;

        init_curl();
        kube = client_for("http://127.0.0.1:1", "/nonexistent/podmux-token");
        e = curl_easy_init();
        ck_assert_int_eq(kube_client_prepare(kube, e, "/api", &hdrs, &problem), 0);
        ck_assert_ptr_nonnull(problem);
        ck_assert_str_eq(problem, "token file \"/nonexistent/podmux-token\": cannot be read");
        for (struct curl_slist *h = hdrs; h; h = h->next)
                bearer |= strcmp(h->data, "Authorization: Bearer inline") == 0;
        ck_assert(bearer);
        ck_assert_uint_eq(kube_client_prepared(kube), 1);
        curl_easy_cleanup(e);
        curl_slist_free_all(hdrs);
        kube_client_free(kube);
}
END_TEST

/* Each allocation of kube_client_new() and of a request's setup fails in
 * turn: -ENOMEM, nothing leaked. */
START_TEST(test_fails_cleanly)
{
        long live;

        if (!failalloc_enabled())
                return;
        init_curl();
        live = failalloc_live();
        for (long n = 1;; n++) {
                struct kube_config kc = {0};
                struct kube_client *kube = NULL;
                bool failed;
                int r;

                kc.server = strdup("https://10.0.0.1:6443");
                kc.tls_server_name = strdup("kubernetes");
                ck_assert_ptr_nonnull(kc.tls_server_name);
                failalloc_arm(n);
                r = kube_client_new(&kc, &kube, NULL);
                failed = failalloc_failed();
                failalloc_arm(0);
                if (!failed) {
                        ck_assert_int_eq(r, 0);
                        kube_client_free(kube);
                        break;
                }
                ck_assert_int_eq(r, -ENOMEM);
                ck_assert_ptr_null(kc.server);
        }
        ck_assert_int_eq(failalloc_live(), live);
        for (long n = 1;; n++) {
                struct kube_client *kube = client_for("http://127.0.0.1:1", NULL);
                struct curl_slist *hdrs = NULL;
                CURL *e = curl_easy_init();
                bool failed;
                int r;

                failalloc_arm(n);
                r = kube_client_prepare(kube, e, "/api", &hdrs, NULL);
                failed = failalloc_failed();
                failalloc_arm(0);
                curl_easy_cleanup(e);
                curl_slist_free_all(hdrs);
                kube_client_free(kube);
                if (!failed) {
                        ck_assert_int_eq(r, 0);
                        break;
                }
                ck_assert_int_eq(r, -ENOMEM);
        }
        ck_assert_int_eq(failalloc_live(), live);
}
END_TEST

UNIT_MAIN(test_refused, test_timed_out, test_dns, test_kinds_without_a_handle, test_describe_status,
          test_server_identity_and_bad_url, test_token_file_problem, test_fails_cleanly)
