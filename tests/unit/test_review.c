/* Unit tests: TokenReview and SubjectAccessReview with their caches
 * (kube/review), against a small API server in this process, on the
 * loopback and on the test's own loop: it answers reviews from a table
 * of tokens and of allowed accesses, counts them, can hold its answers
 * (reviews in flight) and can stop listening (the API server
 * unreachable).  Time is the test's clock: nothing sleeps. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <json-c/json.h>
#include <openssl/err.h>

#include "failalloc.h"
#include "fake_http.h"
#include "log_capture.h"
#include "kube/review.h"
#include "unit.h"
#include "util/digest.h"
#include "util/json_get.h"
#include "util/log.h"

/* ---- the fake API server ---------------------------------------------------------------- */

struct fake {
        struct fake_http http;
        unsigned token_reviews, access_reviews;
        char last_access[4096]; /* the last SubjectAccessReview's body */
};

/* Who each token is; anything else is not authenticated. */
static const char *const tokens[][2] = {
        {"good-token-alice", "alice"},
        {"good-token-bob", "bob"},
        {"t1", "u1"},
        {"t2", "u2"},
        {"t3", "u3"},
        {"t4", "u4"},
};

/* alice may get and list default's pods; bob nothing. */
static bool allowed(const char *user, const char *verb, const char *ns)
{
        return strcmp(user, "alice") == 0 && strcmp(ns, "default") == 0 &&
               (strcmp(verb, "get") == 0 || strcmp(verb, "list") == 0);
}

/* Tokens whose review gets an answer that decides nothing, or is
 * broken, and the status it comes with. */
static const struct {
        const char *token;
        long status;
        const char *body;
} odd_answers[] = {
        {"answer-500", 500, "{\"kind\":\"Status\",\"reason\":\"InternalError\",\"message\":\"etcd down\"}"},
        {"answer-401", 401, "{\"kind\":\"Status\",\"reason\":\"Unauthorized\"}"},
        {"answer-garbage", 201, "<html>proxy</html>"},
        {"answer-no-status", 201, "{\"kind\":\"TokenReview\"}"},
        {"answer-error", 201, "{\"status\":{\"authenticated\":false,\"error\":\"webhook backend down\"}}"},
        {"answer-no-username", 201, "{\"status\":{\"authenticated\":true,\"user\":{\"uid\":\"x\"}}}"},
        {"answer-bad-groups", 201,
         "{\"status\":{\"authenticated\":true,\"user\":{\"username\":\"eve\",\"groups\":[1]}}}"},
        {"answer-bad-extra", 201,
         "{\"status\":{\"authenticated\":true,\"user\":{\"username\":\"eve\",\"extra\":{\"k\":\"v\"}}}}"},
};

/* What a TokenReview of tok is answered: the status, the body. */
static long token_answer(const char *tok, struct buf *out)
{
        const char *user = NULL;

        for (size_t i = 0; i < sizeof(odd_answers) / sizeof(odd_answers[0]); i++) {
                if (strcmp(tok, odd_answers[i].token) == 0) {
                        buf_puts(out, odd_answers[i].body);
                        return odd_answers[i].status;
                }
        }
        for (size_t i = 0; i < sizeof(tokens) / sizeof(tokens[0]); i++)
                if (strcmp(tok, tokens[i][0]) == 0)
                        user = tokens[i][1];
        if (user)
                buf_printf(out,
                           "{\"kind\":\"TokenReview\",\"status\":{\"authenticated\":true,\"user\":"
                           "{\"username\":\"%s\",\"uid\":\"uid-%s\",\"groups\":[\"system:authenticated\","
                           "\"team\"],\"extra\":{\"scopes\":[\"a\",\"b\"]}}}}",
                           user, user);
        else
                buf_puts(out, "{\"kind\":\"TokenReview\",\"status\":{\"authenticated\":false}}");
        return 201;
}

/* The answer to a complete request in c->in. */
static void answer(struct fake_http *h, struct fake_http_conn *c, void *data)
{
        struct fake *f = data;
        const char *body = fake_http_body(c);
        json_object *o = json_tokener_parse(body), *spec = json_get(o, "spec");
        struct buf out = BUF_INIT;
        long status = 201;

        (void)h;

        if (strstr(c->in.data, "POST /apis/authentication.k8s.io/v1/tokenreviews ")) {
                f->token_reviews++;
                status = token_answer(json_get_str(spec, "token", ""), &out);
        } else if (strstr(c->in.data, "POST /apis/authorization.k8s.io/v1/subjectaccessreviews ") &&
                   strcmp(json_get_str(spec, "user", ""), "sar-500") == 0) {
                f->access_reviews++;
                status = 503;
                buf_puts(&out, "{\"kind\":\"Status\",\"reason\":\"ServiceUnavailable\"}");
        } else if (strstr(c->in.data, "POST /apis/authorization.k8s.io/v1/subjectaccessreviews ")) {
                json_object *ra = json_get(spec, "resourceAttributes");
                bool ok = allowed(json_get_str(spec, "user", ""), json_get_str(ra, "verb", ""),
                                  json_get_str(ra, "namespace", ""));

                f->access_reviews++;
                (void)snprintf(f->last_access, sizeof(f->last_access), "%s", body);
                buf_printf(&out, "{\"kind\":\"SubjectAccessReview\",\"status\":{\"allowed\":%s%s}}",
                           ok ? "true" : "false",
                           ok ? ""
                           : strcmp(json_get_str(spec, "user", ""), "sar-evaluation-error") == 0
                                   ? ",\"evaluationError\":\"cannot list roles\""
                                   : ",\"reason\":\"no RBAC rule\"");
        } else {
                buf_puts(&out, "{\"kind\":\"Status\",\"code\":404}");
        }
        fake_http_reply(c, status, &out);
        buf_free(&out);
        json_object_put(o);
}

/* ---- the fixture ---------------------------------------------------------------------- */

struct fixture {
        struct loop *loop;
        struct curl_loop *cl;
        struct kube_client *kube;
        struct review *r;
        struct fake fake;
        uint64_t clock;
};

/* What one caller got back. */
struct got {
        int calls;
        enum review_outcome outcome;
        struct review_user *user; /* a reference of the caller's */
        char reason[512];
};

static void init_curl(void)
{
        static bool done;

        if (!done)
                ck_assert_int_eq(curl_global_init(CURL_GLOBAL_DEFAULT), CURLE_OK);
        done = true;
}

static uint64_t test_now(void *data)
{
        return *(uint64_t *)data;
}

static void setup_cfg(struct fixture *f, size_t cache_max, size_t answer_max)
{
        struct kube_config kc = {0};
        struct review_config cfg = {.cache_max = cache_max, .answer_max = answer_max, .now = test_now};
        char url[64];

        init_curl();
        log_setup(LOG_LEVEL_ERROR, LOG_FORMAT_TEXT); /* the sweep's refusals are many */
        memset(f, 0, sizeof(*f));
        f->clock = 1000000;
        cfg.now_data = &f->clock;
        ck_assert_int_eq(loop_new(&f->loop), 0);
        ck_assert_int_eq(curl_loop_new(f->loop, &f->cl), 0);
        fake_http_start(&f->fake.http, f->loop, answer, &f->fake);
        (void)snprintf(url, sizeof(url), "http://127.0.0.1:%u", f->fake.http.port);
        ck_assert_ptr_nonnull(kc.server = strdup(url));
        ck_assert_ptr_nonnull(kc.token = strdup("podmux-own-token"));
        ck_assert_int_eq(kube_client_new(&kc, &f->kube, NULL), 0);
        cfg.kube = f->kube;
        ck_assert_int_eq(review_new(f->loop, f->cl, &cfg, &f->r), 0);
}

static void setup_max(struct fixture *f, size_t cache_max)
{
        setup_cfg(f, cache_max, 0);
}

static void setup(struct fixture *f)
{
        setup_max(f, 0);
}

static void got_clear(struct got *g)
{
        review_user_unref(g->user);
        memset(g, 0, sizeof(*g));
}

static void teardown(struct fixture *f)
{
        review_free(f->r);
        fake_http_stop(&f->fake.http);
        kube_client_free(f->kube);
        curl_loop_free(f->cl);
        loop_free(f->loop);
}

/* Each reason is logged as the API server's caller would log it, so
 * that test_no_token_in_log can read what was written. */
static void on_authn(void *data, enum review_outcome outcome, struct review_user *user, const char *reason)
{
        struct got *g = data;

        failalloc_hold();
        g->calls++;
        g->outcome = outcome;
        review_user_unref(g->user);
        g->user = review_user_ref(user);
        (void)snprintf(g->reason, sizeof(g->reason), "%s", reason ? reason : "");
        if (reason)
                log_warn("token review: %s", reason);
        else
                log_info("token review: user \"%s\"", user->username);
        failalloc_release();
}

static void on_authz(void *data, enum review_outcome outcome, const char *reason)
{
        struct got *g = data;

        failalloc_hold();
        g->calls++;
        g->outcome = outcome;
        (void)snprintf(g->reason, sizeof(g->reason), "%s", reason ? reason : "");
        if (reason)
                log_warn("access review: %s", reason);
        failalloc_release();
}

/* Runs the loop until g has been called (a bound on iterations, not a
 * time). */
static void run_until(struct fixture *f, const struct got *g)
{
        for (int i = 0; i < 100000 && !g->calls; i++)
                ck_assert_int_ge(loop_run_once(f->loop, 100000), 0);
        ck_assert_int_eq(g->calls, 1);
}

/* The same, with no assertion (under fault injection). */
static void run_quiet(struct fixture *f, const struct got *g)
{
        for (int i = 0; i < 100000 && !g->calls; i++)
                if (loop_run_once(f->loop, 100000) < 0)
                        break;
}

static void authenticate(struct fixture *f, const char *token, struct got *g)
{
        struct review_wait *w;

        got_clear(g);
        ck_assert_int_eq(review_authenticate(f->r, token, on_authn, g, &w), 0);
        run_until(f, g);
}

static void authorize(struct fixture *f, const struct review_user *u, const char *verb, const char *ns,
                      const char *name, struct got *g)
{
        struct review_access a = {.verb = verb, .namespace = ns, .name = name};
        struct review_wait *w;

        got_clear(g);
        ck_assert_int_eq(review_authorize(f->r, u, &a, on_authz, g, &w), 0);
        run_until(f, g);
}

/* ---- the tests ------------------------------------------------------------------------ */

/* A valid token is alice, with what the API server said of her; her get
 * is allowed, and the review carried everything the API server checks. */
START_TEST(test_valid_token_authorized)
{
        struct fixture f;
        struct got g = {0}, z = {0};
        json_object *o, *spec, *ra;

        setup(&f);
        authenticate(&f, "good-token-alice", &g);
        ck_assert_int_eq(g.outcome, REVIEW_OK);
        ck_assert_ptr_nonnull(g.user);
        ck_assert_str_eq(g.user->username, "alice");
        ck_assert_str_eq(g.user->uid, "uid-alice");
        ck_assert_uint_eq(g.user->n_groups, 2);
        ck_assert_str_eq(g.user->groups[1], "team");
        ck_assert_uint_eq(g.user->n_extra, 1);
        ck_assert_str_eq(g.user->extra[0].key, "scopes");
        ck_assert_uint_eq(g.user->extra[0].n_values, 2);

        authorize(&f, g.user, "get", "default", "web", &z);
        ck_assert_int_eq(z.outcome, REVIEW_OK);
        ck_assert_str_eq(z.reason, "");
        ck_assert_ptr_nonnull(o = json_tokener_parse(f.fake.last_access));
        spec = json_get(o, "spec");
        ra = json_get(spec, "resourceAttributes");
        ck_assert_str_eq(json_get_str(o, "kind", ""), "SubjectAccessReview");
        ck_assert_str_eq(json_get_str(spec, "user", ""), "alice");
        ck_assert_str_eq(json_get_str(spec, "uid", ""), "uid-alice");
        ck_assert_int_eq(json_object_array_length(json_get(spec, "groups")), 2);
        ck_assert_int_eq(json_object_array_length(json_get(json_get(spec, "extra"), "scopes")), 2);
        ck_assert_str_eq(json_get_str(ra, "verb", ""), "get");
        ck_assert_str_eq(json_get_str(ra, "resource", ""), "pods");
        ck_assert_str_eq(json_get_str(ra, "version", ""), "v1");
        ck_assert_str_eq(json_get_str(ra, "group", "x"), "");
        ck_assert_str_eq(json_get_str(ra, "namespace", ""), "default");
        ck_assert_str_eq(json_get_str(ra, "name", ""), "web");
        json_object_put(o);
        ck_assert_uint_eq(f.fake.token_reviews, 1);
        ck_assert_uint_eq(f.fake.access_reviews, 1);
        got_clear(&g);
        got_clear(&z);
        teardown(&f);
}
END_TEST

/* A valid token whose access the API server refuses: forbidden, with its
 * reason; remembered (no second review). */
START_TEST(test_valid_token_forbidden)
{
        struct fixture f;
        struct got g = {0}, z = {0};

        setup(&f);
        authenticate(&f, "good-token-bob", &g);
        ck_assert_int_eq(g.outcome, REVIEW_OK);
        authorize(&f, g.user, "list", "default", NULL, &z);
        ck_assert_int_eq(z.outcome, REVIEW_FORBIDDEN);
        ck_assert_msg(strstr(z.reason, "no RBAC rule"), "%s", z.reason);
        authorize(&f, g.user, "list", "default", NULL, &z);
        ck_assert_int_eq(z.outcome, REVIEW_FORBIDDEN);
        ck_assert_uint_eq(f.fake.access_reviews, 1);
        /* A list is not a get of a pod named "": its own decision. */
        authenticate(&f, "good-token-alice", &g);
        authorize(&f, g.user, "watch", "default", NULL, &z);
        ck_assert_int_eq(z.outcome, REVIEW_FORBIDDEN);
        authorize(&f, g.user, "list", "default", NULL, &z);
        ck_assert_int_eq(z.outcome, REVIEW_OK);
        ck_assert_uint_eq(f.fake.access_reviews, 3);
        got_clear(&g);
        got_clear(&z);
        teardown(&f);
}
END_TEST

/* A token the API server does not know: unauthenticated, remembered; an
 * empty one is refused with no review. */
START_TEST(test_bad_token)
{
        struct fixture f;
        struct got g = {0};
        struct review_wait *w;
        struct review_stats st;

        setup(&f);
        authenticate(&f, "nobody-knows-me", &g);
        ck_assert_int_eq(g.outcome, REVIEW_UNAUTHENTICATED);
        ck_assert_ptr_null(g.user);
        ck_assert_msg(strstr(g.reason, "did not authenticate"), "%s", g.reason);
        authenticate(&f, "nobody-knows-me", &g);
        ck_assert_int_eq(g.outcome, REVIEW_UNAUTHENTICATED);
        ck_assert_uint_eq(f.fake.token_reviews, 1);
        got_clear(&g);
        ck_assert_int_eq(review_authenticate(f.r, "", on_authn, &g, &w), 0);
        ck_assert_int_eq(g.calls, 1);
        ck_assert_int_eq(g.outcome, REVIEW_UNAUTHENTICATED);
        ck_assert_uint_eq(f.fake.token_reviews, 1);
        review_get_stats(f.r, &st);
        ck_assert_uint_eq(st.hits, 1);
        got_clear(&g);
        teardown(&f);
}
END_TEST

/* With the API server gone, what was decided holds and what was not is
 * refused (closed, never open), and that refusal is not remembered. */
START_TEST(test_unreachable)
{
        struct fixture f;
        struct got g = {0}, z = {0}, n = {0};
        struct review_stats st;

        setup(&f);
        authenticate(&f, "good-token-alice", &g);
        authorize(&f, g.user, "get", "default", "web", &z);
        ck_assert_int_eq(z.outcome, REVIEW_OK);
        fake_http_stop(&f.fake.http);

        authenticate(&f, "good-token-alice", &n); /* cached */
        ck_assert_int_eq(n.outcome, REVIEW_OK);
        ck_assert_str_eq(n.user->username, "alice");
        authorize(&f, g.user, "get", "default", "web", &z);
        ck_assert_int_eq(z.outcome, REVIEW_OK);

        authenticate(&f, "good-token-bob", &n); /* never seen */
        ck_assert_int_eq(n.outcome, REVIEW_UNAUTHENTICATED);
        ck_assert_ptr_null(n.user);
        ck_assert_msg(strstr(n.reason, "connection refused"), "%s", n.reason);
        authorize(&f, g.user, "list", "default", NULL, &z);
        ck_assert_int_eq(z.outcome, REVIEW_FORBIDDEN);
        ck_assert_msg(strstr(z.reason, "connection refused"), "%s", z.reason);
        review_get_stats(f.r, &st);
        ck_assert_uint_eq(st.failed, 2);
        ck_assert_uint_eq(st.tokens, 1); /* the refusal is not kept */
        ck_assert_uint_eq(st.accesses, 1);
        ck_assert_uint_eq(f.fake.token_reviews, 1);
        got_clear(&g);
        got_clear(&z);
        got_clear(&n);
        teardown(&f);
}
END_TEST

/* Decisions expire on the review's clock: a token after
 * REVIEW_TOKEN_TTL_USEC, an allowed access after REVIEW_ALLOWED_TTL_USEC,
 * a refused one after REVIEW_DENIED_TTL_USEC. */
START_TEST(test_ttl)
{
        struct fixture f;
        struct got g = {0}, z = {0};

        setup(&f);
        authenticate(&f, "good-token-alice", &g);
        authorize(&f, g.user, "get", "default", "web", &z);
        authorize(&f, g.user, "watch", "default", NULL, &z);
        ck_assert_int_eq(z.outcome, REVIEW_FORBIDDEN);
        ck_assert_uint_eq(f.fake.access_reviews, 2);

        f.clock += REVIEW_DENIED_TTL_USEC - 1;
        authorize(&f, g.user, "watch", "default", NULL, &z);
        ck_assert_uint_eq(f.fake.access_reviews, 2);
        f.clock += 1;
        authorize(&f, g.user, "watch", "default", NULL, &z); /* expired */
        ck_assert_uint_eq(f.fake.access_reviews, 3);
        authorize(&f, g.user, "get", "default", "web", &z);
        ck_assert_uint_eq(f.fake.access_reviews, 3);

        f.clock = 1000000 + REVIEW_TOKEN_TTL_USEC - 1;
        authenticate(&f, "good-token-alice", &g);
        ck_assert_uint_eq(f.fake.token_reviews, 1);
        f.clock += 1;
        authenticate(&f, "good-token-alice", &g);
        ck_assert_int_eq(g.outcome, REVIEW_OK);
        ck_assert_uint_eq(f.fake.token_reviews, 2);

        f.clock = 1000000 + REVIEW_ALLOWED_TTL_USEC - 1;
        authorize(&f, g.user, "get", "default", "web", &z);
        ck_assert_uint_eq(f.fake.access_reviews, 3);
        f.clock += 1;
        authorize(&f, g.user, "get", "default", "web", &z);
        ck_assert_int_eq(z.outcome, REVIEW_OK);
        ck_assert_uint_eq(f.fake.access_reviews, 4);
        got_clear(&g);
        got_clear(&z);
        teardown(&f);
}
END_TEST

/* Callers asking about one token while its review is in flight share
 * it: one review, every caller answered in turn; a cancelled wait is
 * not called.  The same for an access. */
START_TEST(test_in_flight_shared)
{
        struct fixture f;
        struct got g[5] = {{0}}, z[3] = {{0}};
        struct review_wait *w[5];
        struct review_stats st;
        struct review_access a = {.verb = "list", .namespace = "default"};
        struct review_user *alice;

        setup(&f);
        f.fake.http.hold = true;
        for (int i = 0; i < 5; i++) {
                ck_assert_int_eq(review_authenticate(f.r, "good-token-alice", on_authn, &g[i], &w[i]), 0);
                ck_assert_ptr_nonnull(w[i]);
        }
        review_cancel(f.r, w[2]);
        for (int i = 0; i < 100 && f.fake.token_reviews == 0; i++) {
                ck_assert_int_ge(loop_run_once(f.loop, 100000), 0);
                if (f.fake.http.conns[0].fd >= 0 || f.fake.http.conns[1].fd >= 0)
                        fake_http_release(&f.fake.http);
        }
        run_until(&f, &g[4]);
        ck_assert_uint_eq(f.fake.token_reviews, 1);
        for (int i = 0; i < 5; i++) {
                ck_assert_int_eq(g[i].calls, i == 2 ? 0 : 1);
                if (i != 2)
                        ck_assert_str_eq(g[i].user->username, "alice");
        }
        review_get_stats(f.r, &st);
        ck_assert_uint_eq(st.shared, 4);
        ck_assert_uint_eq(st.sent, 1);

        alice = review_user_ref(g[0].user);
        f.fake.http.hold = true;
        for (int i = 0; i < 3; i++)
                ck_assert_int_eq(review_authorize(f.r, alice, &a, on_authz, &z[i], &w[i]), 0);
        for (int i = 0; i < 100 && f.fake.access_reviews == 0; i++) {
                ck_assert_int_ge(loop_run_once(f.loop, 100000), 0);
                fake_http_release(&f.fake.http);
        }
        run_until(&f, &z[2]);
        ck_assert_uint_eq(f.fake.access_reviews, 1);
        for (int i = 0; i < 3; i++)
                ck_assert_int_eq(z[i].outcome, REVIEW_OK);
        review_user_unref(alice);
        for (int i = 0; i < 5; i++)
                got_clear(&g[i]);
        teardown(&f);
}
END_TEST

/* A cache holds cache_max entries: the next decision evicts the oldest;
 * a cache full of reviews in flight refuses a new one at once. */
START_TEST(test_cache_bound)
{
        struct fixture f;
        struct got g = {0}, h[4] = {{0}};
        struct review_wait *w;
        struct review_stats st;
        static const char *const t[] = {"t1", "t2", "t3", "t4"};

        setup_max(&f, 3);
        for (int i = 0; i < 3; i++)
                authenticate(&f, t[i], &g);
        review_get_stats(f.r, &st);
        ck_assert_uint_eq(st.tokens, 3);
        ck_assert_uint_eq(st.evicted, 0);
        authenticate(&f, "t4", &g); /* t1 goes */
        review_get_stats(f.r, &st);
        ck_assert_uint_eq(st.tokens, 3);
        ck_assert_uint_eq(st.evicted, 1);
        ck_assert_uint_eq(f.fake.token_reviews, 4);
        authenticate(&f, "t2", &g);
        ck_assert_uint_eq(f.fake.token_reviews, 4);
        authenticate(&f, "t1", &g); /* asked again; t2 goes */
        ck_assert_int_eq(g.outcome, REVIEW_OK);
        ck_assert_uint_eq(f.fake.token_reviews, 5);
        got_clear(&g);
        teardown(&f);

        setup_max(&f, 3);
        f.fake.http.hold = true;
        for (int i = 0; i < 3; i++)
                ck_assert_int_eq(review_authenticate(f.r, t[i], on_authn, &h[i], &w), 0);
        ck_assert_int_eq(review_authenticate(f.r, t[3], on_authn, &h[3], &w), 0);
        ck_assert_int_eq(h[3].calls, 1);
        ck_assert_int_eq(h[3].outcome, REVIEW_UNAUTHENTICATED);
        ck_assert_str_eq(h[3].reason, "too many reviews in flight");
        ck_assert_ptr_null(w);
        for (int i = 0; i < 1000 && !h[2].calls; i++) {
                ck_assert_int_ge(loop_run_once(f.loop, 100000), 0);
                fake_http_release(&f.fake.http);
                f.fake.http.hold = true;
        }
        for (int i = 0; i < 3; i++)
                run_until(&f, &h[i]);
        for (int i = 0; i < 4; i++)
                got_clear(&h[i]);
        teardown(&f);
}
END_TEST

/* Nothing written to the log while reviewing holds the token's text:
 * stderr is captured across accepted, refused and unreachable reviews,
 * with curl's own reasons among them. */
START_TEST(test_no_token_in_log)
{
        static const char secret[] = "good-token-alice";
        struct fixture f;
        struct got g = {0}, z = {0};
        struct log_capture c;
        char text[65536];

        setup(&f);
        log_setup(LOG_LEVEL_TRACE, LOG_FORMAT_TEXT);
        log_capture_start(&c);
        authenticate(&f, secret, &g);
        authorize(&f, g.user, "watch", "default", NULL, &z);
        authenticate(&f, "bad-secret-token", &z);
        fake_http_stop(&f.fake.http);
        authenticate(&f, "another-secret-token", &z);
        authenticate(&f, secret, &z);
        got_clear(&g);
        got_clear(&z);
        teardown(&f);
        log_capture_end(&c, text, sizeof(text));
        ck_assert_int_gt(strlen(text), 0);
        ck_assert_msg(strstr(text, "connection refused"), "%s", text);
        ck_assert_msg(strstr(text, "user \"alice\""), "%s", text);
        ck_assert_msg(!strstr(text, "token-alice") && !strstr(text, "secret-token") &&
                              !strstr(text, "podmux-own-token"),
                      "%s", text);
}
END_TEST

/* Answers that decide nothing refuse (closed), say why, are not kept
 * (the next ask reviews again), and cost nothing else: a good token
 * still authenticates. */
START_TEST(test_odd_answers_refuse)
{
        static const char *const why[] = {
                "HTTP 500 InternalError: etcd down",
                "HTTP 401 Unauthorized",
                "not a review",
                "not a review",
                "webhook backend down",
                "not a review",
                "not a review",
                "not a review",
        };
        struct fixture f;
        struct got g = {0};
        unsigned n = 0;

        setup(&f);
        for (size_t i = 0; i < sizeof(odd_answers) / sizeof(odd_answers[0]); i++) {
                for (int again = 0; again < 2; again++) {
                        authenticate(&f, odd_answers[i].token, &g);
                        ck_assert_int_eq(g.outcome, REVIEW_UNAUTHENTICATED);
                        ck_assert_ptr_null(g.user);
                        ck_assert_msg(strstr(g.reason, why[i]), "%s: %s", odd_answers[i].token, g.reason);
                        ck_assert_uint_eq(f.fake.token_reviews, ++n);
                }
        }
        authenticate(&f, "good-token-alice", &g);
        ck_assert_int_eq(g.outcome, REVIEW_OK);
        got_clear(&g);
        teardown(&f);
}
END_TEST

/* The same for an access: a 503 refuses and is not kept; a refusal
 * with an evaluation error says so, and is kept with its words. */
START_TEST(test_odd_access_answers)
{
        struct fixture f;
        struct got z = {0};
        struct review_user u = {.refs = 1, .username = (char *)"sar-500"};
        struct review_user v = {.refs = 1, .username = (char *)"sar-evaluation-error"};

        setup(&f);
        for (unsigned n = 1; n <= 2; n++) {
                authorize(&f, &u, "list", "default", NULL, &z);
                ck_assert_int_eq(z.outcome, REVIEW_FORBIDDEN);
                ck_assert_msg(strstr(z.reason, "HTTP 503 ServiceUnavailable"), "%s", z.reason);
                ck_assert_uint_eq(f.fake.access_reviews, n);
        }
        authorize(&f, &v, "list", "default", NULL, &z);
        ck_assert_int_eq(z.outcome, REVIEW_FORBIDDEN);
        ck_assert_msg(strstr(z.reason, "cannot list roles"), "%s", z.reason);
        authorize(&f, &v, "list", "default", NULL, &z);
        ck_assert_msg(strstr(z.reason, "cannot list roles"), "%s", z.reason); /* the same words */
        ck_assert_uint_eq(f.fake.access_reviews, 3);
        teardown(&f);
}
END_TEST

/* A token of REVIEW_TOKEN_MAX bytes is reviewed; one byte more is
 * refused with no review. */
START_TEST(test_token_limit)
{
        struct fixture f;
        struct got g = {0};
        char *tok = malloc(REVIEW_TOKEN_MAX + 2);

        ck_assert_ptr_nonnull(tok);
        memset(tok, 'x', REVIEW_TOKEN_MAX);
        tok[REVIEW_TOKEN_MAX] = '\0';
        setup(&f);
        authenticate(&f, tok, &g);
        ck_assert_int_eq(g.outcome, REVIEW_UNAUTHENTICATED);
        ck_assert_msg(strstr(g.reason, "did not authenticate"), "%s", g.reason);
        ck_assert_uint_eq(f.fake.token_reviews, 1);
        tok[REVIEW_TOKEN_MAX] = 'x';
        tok[REVIEW_TOKEN_MAX + 1] = '\0';
        authenticate(&f, tok, &g);
        ck_assert_int_eq(g.outcome, REVIEW_UNAUTHENTICATED);
        ck_assert_str_eq(g.reason, "the token is too long");
        ck_assert_uint_eq(f.fake.token_reviews, 1);
        free(tok);
        teardown(&f);
}
END_TEST

/* An answer of answer_max bytes is read; one byte more is no answer. */
START_TEST(test_answer_limit)
{
        struct fixture f;
        struct got g = {0};
        struct buf body = BUF_INIT;

        token_answer("good-token-alice", &body);
        setup_cfg(&f, 0, body.len);
        authenticate(&f, "good-token-alice", &g);
        ck_assert_int_eq(g.outcome, REVIEW_OK);
        teardown(&f);
        setup_cfg(&f, 0, body.len - 1);
        authenticate(&f, "good-token-alice", &g);
        ck_assert_int_eq(g.outcome, REVIEW_UNAUTHENTICATED);
        ck_assert_msg(strstr(g.reason, "too long"), "%s", g.reason);
        got_clear(&g);
        buf_free(&body);
        teardown(&f);
}
END_TEST

/* The default bound: REVIEW_CACHE_MAX decisions are kept, and the next
 * one evicts the oldest. */
START_TEST(test_default_cache_bound)
{
        struct fixture f;
        struct got g = {0};
        struct review_stats st;
        char tok[32];

        setup(&f);
        for (unsigned i = 0; i < REVIEW_CACHE_MAX; i++) {
                (void)snprintf(tok, sizeof(tok), "unknown-%u", i);
                authenticate(&f, tok, &g);
        }
        review_get_stats(f.r, &st);
        ck_assert_uint_eq(st.tokens, REVIEW_CACHE_MAX);
        ck_assert_uint_eq(st.evicted, 0);
        authenticate(&f, "unknown-0", &g);
        ck_assert_uint_eq(f.fake.token_reviews, REVIEW_CACHE_MAX);
        authenticate(&f, "one-more", &g);
        review_get_stats(f.r, &st);
        ck_assert_uint_eq(st.tokens, REVIEW_CACHE_MAX);
        ck_assert_uint_eq(st.evicted, 1);
        authenticate(&f, "unknown-0", &g); /* the oldest went */
        ck_assert_uint_eq(f.fake.token_reviews, REVIEW_CACHE_MAX + 2);
        teardown(&f);
}
END_TEST

/* Bad arguments: no kube client; an access with no verb. */
START_TEST(test_bad_arguments)
{
        struct fixture f;
        struct review_config cfg = {0};
        struct review *r = NULL;
        struct review_user u = {.refs = 1, .username = (char *)"alice"};
        struct review_access a = {.verb = "", .namespace = "default"};
        struct review_wait *w;
        struct got z = {0};

        ck_assert_int_eq(review_new(NULL, NULL, &cfg, &r), -EINVAL);
        setup(&f);
        ck_assert_int_eq(review_authorize(f.r, &u, &a, on_authz, &z, &w), -EINVAL);
        ck_assert_int_eq(z.calls, 0);
        teardown(&f);
}
END_TEST

/* What libcrypto allocates once per thread when an allocation fails in
 * a digest (its error state), and keeps: made before anything is
 * counted, by failing each allocation of a digest in turn.  A first
 * digest without faults loads its configuration: an allocation failing
 * inside that one-time start would leave every later digest failing
 * (when this test is the process's first, as under CK_FORK=yes). */
static void warm_up_crypto(void)
{
        uint8_t d[DIGEST_LEN];
        bool failed = true;

        ck_assert_int_eq(digest_sha256("", 0, d), 0);
        for (long n = 1; failed; n++) {
                failalloc_arm(n);
                (void)digest_sha256("", 0, d);
                failed = failalloc_failed();
                failalloc_arm(0);
        }
        ERR_clear_error();
}

/*
 * Every allocation of a whole authentication then authorization fails in
 * turn: each ask either fails with -ENOMEM and no call, or is answered,
 * and an answer that is not REVIEW_OK is a refusal (closed), never a
 * user or an access that was not granted.  Nothing leaks.
 */
START_TEST(test_alloc_sweep)
{
        long live, n_seen, n_swallowed;

        if (!failalloc_enabled())
                return;
        init_curl();
        warm_up_crypto();
        live = failalloc_live();
        n_seen = n_swallowed = 0;
        for (long n = 1;; n++) {
                struct fixture f;
                struct got g = {0}, z = {0};
                struct review_wait *w;
                struct review_access a = {.verb = "get", .namespace = "default", .name = "web"};
                bool failed, swallowed;
                int qa, qz = 1;

                setup(&f);
                /* No assertion while armed: Check allocates in them. */
                failalloc_arm(n);
                qa = review_authenticate(f.r, "good-token-alice", on_authn, &g, &w);
                if (qa == 0)
                        run_quiet(&f, &g);
                if (qa == 0 && g.calls == 1 && g.outcome == REVIEW_OK) {
                        qz = review_authorize(f.r, g.user, &a, on_authz, &z, &w);
                        if (qz == 0)
                                run_quiet(&f, &z);
                }
                failed = failalloc_failed();
                failalloc_arm(0);
                ck_assert_msg(qa == 0 || qa == -ENOMEM, "%d", qa);
                if (qa == 0) {
                        ck_assert_int_eq(g.calls, 1);
                        if (g.outcome == REVIEW_OK)
                                ck_assert_str_eq(g.user->username, "alice");
                        else
                                ck_assert_ptr_null(g.user);
                }
                ck_assert_msg(qz == 1 || qz == 0 || qz == -ENOMEM, "%d", qz);
                if (qz == 0)
                        ck_assert_int_eq(z.calls, 1);
                if (!failed) {
                        ck_assert_int_eq(g.outcome, REVIEW_OK);
                        ck_assert_int_eq(z.calls, 1);
                        ck_assert_int_eq(z.outcome, REVIEW_OK);
                        got_clear(&g);
                        teardown(&f);
                        break;
                }
                /* A failure no caller saw was libcurl's own: it
                 * retried or did without (libcurl 7.88 then keeps a
                 * block for good at one such point of its timer
                 * path, found by bisecting this sweep).  Any other
                 * failure leaves nothing behind. */
                swallowed = qa == 0 && g.outcome == REVIEW_OK && qz == 0 && z.outcome == REVIEW_OK;
                /* After the failure, the same asks succeed. */
                got_clear(&g);
                authenticate(&f, "good-token-alice", &g);
                ck_assert_int_eq(g.outcome, REVIEW_OK);
                authorize(&f, g.user, "get", "default", "web", &z);
                ck_assert_int_eq(z.outcome, REVIEW_OK);
                got_clear(&g);
                teardown(&f);
                if (swallowed) {
                        live = failalloc_live();
                        n_swallowed++;
                } else {
                        ck_assert_msg(failalloc_live() == live, "allocation %ld: %ld blocks left", n,
                                      failalloc_live() - live);
                        n_seen++;
                }
        }
        ck_assert_int_eq(failalloc_live(), live);
        /* Most failures reach the caller as a refusal or -ENOMEM. */
        ck_assert_msg(n_seen > 3 * n_swallowed, "%ld seen, %ld not", n_seen, n_swallowed);
}
END_TEST

/* Making a review fails cleanly at each of its allocations. */
START_TEST(test_new_fails_cleanly)
{
        struct fixture f;
        long live;

        if (!failalloc_enabled())
                return;
        setup(&f);
        live = failalloc_live();
        for (long n = 1;; n++) {
                struct review_config cfg = {.kube = f.kube};
                struct review *r = NULL;
                bool failed;
                int q;

                failalloc_arm(n);
                q = review_new(f.loop, f.cl, &cfg, &r);
                failed = failalloc_failed();
                failalloc_arm(0);
                if (!failed) {
                        ck_assert_int_eq(q, 0);
                        review_free(r);
                        break;
                }
                ck_assert_int_eq(q, -ENOMEM);
        }
        ck_assert_int_eq(failalloc_live(), live);
        teardown(&f);
}
END_TEST

UNIT_MAIN(test_valid_token_authorized, test_valid_token_forbidden, test_bad_token, test_unreachable, test_ttl,
          test_in_flight_shared, test_cache_bound, test_default_cache_bound, test_odd_answers_refuse,
          test_odd_access_answers, test_token_limit, test_answer_limit, test_no_token_in_log, test_bad_arguments,
          test_alloc_sweep, test_new_fails_cleanly)
