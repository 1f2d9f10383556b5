/*
 * test_source_faults — the HTTP manifest source and the API server source
 * end to end (libcurl, the loop, the mux) under injected allocation
 * failures (failalloc.h), against small servers on loopback run by a
 * thread of this test (its allocations are never failed).
 *
 * A scenario starts fault-free and delivers a first state, then the server
 * changes (a new body; new watch events) while the Nth allocation fails,
 * once or from N on for a while.  For every N:
 *   - every SET the source hands the mux is exactly one of the states the
 *     fault-free run went through (never a partial or an empty one);
 *   - once faults stop, the source catches up with the server by itself
 *     (its retry timers: the poll period is an hour, and no new event
 *     comes), so the last SET is the server's state;
 *   - running out of memory is never counted as a parse error;
 *   - after teardown no block is left allocated.
 *
 * Under AddressSanitizer nothing can be interposed: the scenarios then run
 * once, fault-free.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "failalloc.h"
#include "sources/api_source.h"
#include "sources/checkpoint.h"
#include "util/file.h"
#include "util/curl_loop.h"
#include "util/digest.h"
#include "sources/http_source.h"
#include "util/log.h"
#include "util/loop.h"
#include "metrics/metrics.h"
#include "core/mux.h"
#include "core/pod.h"
#include "unit.h"

/* The test's own work is never failed: failalloc_hold() and
 * failalloc_release() around it. */

#define ONLY(name)                                                        \
        do {                                                              \
                if (getenv("FAULTS_ONLY") && !strstr(name, getenv("FAULTS_ONLY"))) \
                        return;                                           \
        } while (0)

/* What the C library allocates once and keeps, done before any leak is
 * counted (failalloc_warm_up()). */
static void warm_up(void)
{
        log_setup(getenv("FAULTS_VERBOSE") ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR, LOG_FORMAT_TEXT);
        failalloc_warm_up();
        (void)ERRNO_STR(ENOMEM);
}

/* The daemon's log lines during a sweep (thousands of expected errors)
 * go nowhere unless FAULTS_VERBOSE is set. */
static int saved_stderr = -1;

static void quiet(bool on)
{
        if (getenv("FAULTS_VERBOSE"))
                return;
        fflush(stderr);
        if (on) {
                int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

                saved_stderr = dup(STDERR_FILENO);
                ck_assert_int_ge(null, 0);
                ck_assert_int_ge(saved_stderr, 0);
                dup2(null, STDERR_FILENO);
                close(null);
        } else if (saved_stderr >= 0) {
                dup2(saved_stderr, STDERR_FILENO);
                close(saved_stderr);
                saved_stderr = -1;
        }
}

/* ---- a loopback server in a thread ------------------------------------------ */

/*
 * One connection at a time, no heap: requests are read into a fixed
 * buffer and answered by serve().  stop ends the thread.
 */
struct server {
        int fd;
        unsigned port;
        pthread_t thread;
        pthread_mutex_t lock;
        bool stop;
        void (*serve)(struct server *s, int fd, const char *request);
        unsigned requests;
        /* HTTP: the body served (under lock). */
        char body[8192];
        size_t body_len;
        /* API: how many events are published (under lock); see
         * api_serve(). */
        size_t n_events;
        unsigned watch_gen; /* bumped to end open watches */
        bool expire;        /* the next watch is refused as too old (410) */
        /* After that ERROR event: 0 the response ends; 1 it never ends
         * (until the client goes); 2 it goes on for 1 MiB. */
        int expire_then;
        bool no_bookmark;   /* a watch gets no bookmark */
        bool refuse;        /* every request is answered 503 */
        unsigned lists;     /* list requests answered */
        unsigned old_watches; /* watches from API_RV0, the checkpoint's version */
        unsigned streams;     /* streaming lists asked */
        /* The next throttle requests that hold throttle_match are
         * answered 429 with Retry-After: throttle_ra; throttled_at is
         * when the last was written, next_at when the request after it
         * came (0: none yet; monotonic microseconds). */
        unsigned throttle, throttle_ra;
        const char *throttle_match;
        uint64_t throttled_at, next_at;
};

static void write_all(int fd, const char *p, size_t n)
{
        while (n > 0) {
                ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return;
                p += w;
                n -= (size_t)w;
        }
}

static void *server_main(void *arg)
{
        struct server *s = arg;

        for (;;) {
                struct pollfd p = {.fd = s->fd, .events = POLLIN};
                char req[4096];
                size_t len = 0;
                bool stop;
                int c;

                pthread_mutex_lock(&s->lock);
                stop = s->stop;
                pthread_mutex_unlock(&s->lock);
                if (stop)
                        return NULL;
                if (poll(&p, 1, 20) <= 0)
                        continue;
                c = accept(s->fd, NULL, NULL);
                if (c < 0)
                        continue;
                while (len < sizeof(req) - 1) {
                        ssize_t n = recv(c, req + len, sizeof(req) - 1 - len, 0);

                        if (n <= 0)
                                break;
                        len += (size_t)n;
                        req[len] = '\0';
                        if (strstr(req, "\r\n\r\n"))
                                break;
                }
                req[len] = '\0';
                pthread_mutex_lock(&s->lock);
                s->requests++;
                pthread_mutex_unlock(&s->lock);
                if (len > 0)
                        s->serve(s, c, req);
                close(c);
        }
}

/* Started once for all runs: a thread's own allocations (its stack
 * cache) would otherwise look like leaks. */
static void server_start(struct server *s, void (*serve)(struct server *, int, const char *))
{
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t sl = sizeof(sa);

        s->serve = serve;
        s->stop = false;
        s->requests = 0;
        s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(s->fd, 0);
        ck_assert_int_eq(bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        ck_assert_int_eq(listen(s->fd, 16), 0);
        ck_assert_int_eq(getsockname(s->fd, (struct sockaddr *)&sa, &sl), 0);
        s->port = ntohs(sa.sin_port);
        ck_assert_int_eq(pthread_mutex_init(&s->lock, NULL), 0);
        ck_assert_int_eq(pthread_create(&s->thread, NULL, server_main, s), 0);
}

static void server_stop(struct server *s)
{
        pthread_mutex_lock(&s->lock);
        s->stop = true;
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->thread, NULL);
        close(s->fd);
        pthread_mutex_destroy(&s->lock);
}

/* ---- what the source hands the mux ---------------------------------------------- */

#define MAX_SETS 64

struct world {
        struct loop *loop;
        struct curl_loop *cl;
        struct mux *mux;
        struct mux_channel *ch;
        struct http_source *hs;
        struct api_source *as;
        struct kube_client *kube;
        struct source_stats stats;
        /* The source's state as the merger sees it: its last full SET
         * with the deltas since folded in. */
        struct pod_update *state;
        char *sets[MAX_SETS]; /* the pods of that state after each record, as text */
        bool checkpoint[MAX_SETS]; /* that record was a checkpoint's SET */
        size_t n_sets;
        size_t n_deltas; /* records that were deltas */
        char problem[512];
        /* The URL's record as last told: "state digest pods reason". */
        char record[160];
};

/* The pods of a record as text, in order (sources sort their SETs; the
 * HTTP source keeps the body's order, which is fixed too). */
static char *pods_text(const struct pod_update *u)
{
        struct buf b = BUF_INIT;

        for (size_t i = 0; i < u->n_pods; i++) {
                ck_assert_int_eq(pod_render(u->pods[i], &b), 0);
                ck_assert_int_eq(buf_putc(&b, '\n'), 0);
        }
        return buf_steal(&b, NULL);
}

static int on_merge(void *data, const char *source, struct pod_update **u)
{
        struct world *w = data;

        (void)source;
        failalloc_hold();
        if ((*u)->op != POD_OP_SET) {
                snprintf(w->problem, sizeof(w->problem), "the source sent op %d", (int)(*u)->op);
        } else if ((*u)->delta && !w->state) {
                snprintf(w->problem, sizeof(w->problem), "a delta before any SET");
        } else {
                if ((*u)->delta) {
                        w->n_deltas++;
                        ck_assert_int_eq(pod_update_fold(w->state, *u), 0);
                        pod_update_sort(w->state);
                } else {
                        pod_update_free(w->state);
                        w->state = *u;
                        *u = NULL; /* kept */
                }
                if (w->n_sets < MAX_SETS) {
                        /* A SET was kept (*u taken); a delta was folded. */
                        w->checkpoint[w->n_sets] = !*u && w->state->provisional;
                        w->sets[w->n_sets++] = pods_text(w->state);
                }
        }
        failalloc_release();
        return 0;
}

static void world_free_sets(struct world *w)
{
        for (size_t i = 0; i < w->n_sets; i++)
                free(w->sets[i]);
        w->n_sets = 0;
}

static const char *last_set(const struct world *w)
{
        return w->n_sets ? w->sets[w->n_sets - 1] : NULL;
}

static void run_for(struct world *w, uint64_t usec)
{
        uint64_t end = mono_usec() + usec;

        while (mono_usec() < end)
                loop_run_once(w->loop, 2000);
}

/* Runs until the last SET is want (or the time is up). */
static bool run_until_set(struct world *w, const char *want, uint64_t usec)
{
        uint64_t end = mono_usec() + usec;

        while (mono_usec() < end) {
                if (last_set(w) && strcmp(last_set(w), want) == 0)
                        return true;
                loop_run_once(w->loop, 2000);
        }
        return last_set(w) && strcmp(last_set(w), want) == 0;
}

/* Every SET from index from on is one of the allowed texts. */
static void check_sets(struct world *w, size_t from, char *const *allowed, size_t n_allowed)
{
        for (size_t i = from; i < w->n_sets && !w->problem[0]; i++) {
                bool ok = false;

                for (size_t j = 0; j < n_allowed && !ok; j++)
                        ok = strcmp(w->sets[i], allowed[j]) == 0;
                if (!ok)
                        snprintf(w->problem, sizeof(w->problem), "SET %zu is no state the server had:\n%.300s", i,
                                 w->sets[i]);
        }
}

struct fault {
        long n;
        bool persist;
};

/* Arms the fault (n 0: none). */
static void arm(const struct fault *f)
{
        if (f->n > 0) {
                failalloc_persist(f->persist);
                failalloc_arm(f->n);
        }
}

/* Releases a persistent fault after a while; returns whether it hit. */
static bool release(struct world *w, const struct fault *f, uint64_t usec)
{
        bool hit;

        if (f->n > 0 && f->persist)
                run_for(w, usec);
        hit = f->n > 0 && failalloc_failed();
        failalloc_arm(0);
        return hit;
}

/* ---- the HTTP source ----------------------------------------------------------------- */

static struct server http_srv;

#define HTTP_POD(name, image)                                                                        \
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"" name "\",\"labels\":{\"a\":\"b\"}}," \
        "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"" image "\",\"ports\":[{\"containerPort\":80}]}]}}"
static const char *const body_a = "{\"apiVersion\":\"v1\",\"kind\":\"PodList\",\"items\":[" HTTP_POD("one", "x:1") ","
                                  HTTP_POD("two", "y:1") "]}";
static const char *const body_b =
        "apiVersion: v1\nkind: PodList\nitems:\n"
        "- {apiVersion: v1, kind: Pod, metadata: {name: one}, spec: {containers: [{name: c, image: 'x:2'}]}}\n"
        "- apiVersion: v1\n  kind: Pod\n  metadata: {name: three, namespace: kube-system}\n"
        "  spec:\n    hostNetwork: true\n    containers:\n    - name: c\n      image: z:1\n"
        "      ports: [{containerPort: 8080}]\n      resources: {limits: {cpu: 100m}}\n";

/* What the server answers a request that lost its query: pods that
 * are no state of the scenario (libcurl drops the query when it runs out
 * of memory at the wrong moment). */
static const char *const body_other = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"other\"},"
                                      "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"o\"}]}}";

static void http_serve(struct server *s, int fd, const char *request)
{
        bool asked = strncmp(request, "GET /pods?token=t ", 18) == 0;
        char head[256];
        int n;

        pthread_mutex_lock(&s->lock);
        n = snprintf(head, sizeof(head),
                     "HTTP/1.1 200 OK\r\nContent-Type: application/yaml\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     asked ? s->body_len : strlen(body_other));
        write_all(fd, head, (size_t)n);
        write_all(fd, asked ? s->body : body_other, asked ? s->body_len : strlen(body_other));
        pthread_mutex_unlock(&s->lock);
}

static void http_set_body(const char *body)
{
        pthread_mutex_lock(&http_srv.lock);
        http_srv.body_len = strlen(body);
        ck_assert_uint_lt(http_srv.body_len, sizeof(http_srv.body));
        memcpy(http_srv.body, body, http_srv.body_len);
        pthread_mutex_unlock(&http_srv.lock);
}

/* The URL's record, as a consumer of its changes holds it. */
static void on_record(void *data, const struct file_record_view *v)
{
        struct world *w = data;
        char d[DIGEST_TEXT_MAX] = "-";

        failalloc_hold();
        if (v->digest)
                digest_text(v->digest, d);
        snprintf(w->record, sizeof(w->record), "%s %s %zu %s", file_record_state_name(v->state), d, v->n_pods,
                 v->reason ? "reason" : "-");
        failalloc_release();
}

/* What the record says once body is applied. */
static void record_of_body(const char *body, size_t n_pods, char *out, size_t size)
{
        uint8_t d[DIGEST_LEN];
        char text[DIGEST_TEXT_MAX];

        ck_assert_int_eq(digest_sha256(body, strlen(body), d), 0);
        digest_text(d, text);
        snprintf(out, size, "applied %s %zu -", text, n_pods);
}

static void http_world_up(struct world *w)
{
        struct http_source_config cfg = {0};
        struct buf err = BUF_INIT;
        char url[64];

        memset(w, 0, sizeof(*w));
        snprintf(url, sizeof(url), "http://127.0.0.1:%u/pods?token=t", http_srv.port);
        cfg.url = url;
        cfg.node_name = "node1";
        cfg.period_usec = 3600ULL * 1000000; /* polls only when told or retrying */
        cfg.retry_usec = 1000;               /* retries fast */
        cfg.stats = &w->stats;
        cfg.record = on_record;
        cfg.record_data = w;
        ck_assert_int_eq(loop_new(&w->loop), 0);
        ck_assert_int_eq(curl_loop_new(w->loop, &w->cl), 0);
        ck_assert_int_eq(mux_new(w->loop, on_merge, w, &w->mux), 0);
        ck_assert_int_eq(mux_channel(w->mux, POD_SOURCE_HTTP, &w->ch), 0);
        ck_assert_int_eq(http_source_new(w->loop, w->cl, w->ch, &cfg, &w->hs, &err), 0);
        buf_free(&err);
}

static void world_down(struct world *w)
{
        http_source_free(w->hs);
        api_source_free(w->as);
        kube_client_free(w->kube);
        mux_free(w->mux);
        curl_loop_free(w->cl);
        loop_free(w->loop);
        world_free_sets(w);
        pod_update_free(w->state);
        w->state = NULL;
}

/* The fault-free texts of bodies A and B. */
static char *http_text[2];

static void http_learn(void)
{
        struct world w;

        http_set_body(body_a);
        http_world_up(&w);
        ck_assert_int_eq(http_source_start(w.hs), 0);
        while (w.n_sets < 1)
                loop_run_once(w.loop, 2000);
        http_set_body(body_b);
        http_source_poll(w.hs);
        while (w.n_sets < 2)
                loop_run_once(w.loop, 2000);
        ck_assert_uint_eq(w.stats.errors, 0);
        ck_assert_msg(strstr(w.sets[1], "three-node1") && strstr(w.sets[1], "x:2"), "%s", w.sets[1]);
        http_text[0] = strdup(w.sets[0]);
        http_text[1] = strdup(w.sets[1]);
        world_down(&w);
}

/* One run: A delivered, then B polled under the fault.  Returns whether
 * the fault hit. */
static bool http_run(const struct fault *f)
{
        struct world w;
        long live0 = failalloc_live();
        bool hit, converged;
        char problem[sizeof(w.problem)];

        if (getenv("FAULTS_VERBOSE"))
                fprintf(stderr, "# http run: allocation %ld%s\n", f->n, f->persist ? " on" : "");
        http_set_body(body_a);
        http_world_up(&w);
        ck_assert_int_eq(http_source_start(w.hs), 0);
        ck_assert_msg(run_until_set(&w, http_text[0], 5000000), "no first SET");
        http_set_body(body_b);
        arm(f);
        http_source_poll(w.hs);
        if (!f->persist)
                run_until_set(&w, http_text[1], 2000000);
        hit = release(&w, f, 30000);
        /* Faults are over: the retry timer polls again by itself. */
        converged = run_until_set(&w, http_text[1], 5000000);
        check_sets(&w, 1, http_text, 2);
        /* And the URL's record says so (the merge is told after it). */
        if (converged) {
                char want[160];

                record_of_body(body_b, 2, want, sizeof(want));
                for (int i = 0; i < 500 && strcmp(w.record, want) != 0; i++)
                        loop_run_once(w.loop, 2000);
                if (strcmp(w.record, want) != 0 && !w.problem[0])
                        snprintf(w.problem, sizeof(w.problem), "the URL's record says \"%s\", not \"%s\"", w.record,
                                 want);
        }
        if (!converged && !w.problem[0])
                snprintf(w.problem, sizeof(w.problem), "the pods of the body were never sent (%zu SETs, %llu errors)",
                         w.n_sets, (unsigned long long)w.stats.errors);
        if (w.stats.parse_errors && !w.problem[0])
                snprintf(w.problem, sizeof(w.problem), "out of memory counted as a parse error: %s",
                         w.stats.last_error);
        memcpy(problem, w.problem, sizeof(problem));
        world_down(&w);
        ck_assert_msg(!problem[0], "allocation %ld%s failing: %s", f->n, f->persist ? " on" : "", problem);
        ck_assert_msg(failalloc_live() == live0, "allocation %ld%s failing: %ld block(s) leaked", f->n,
                      f->persist ? " on" : "", failalloc_live() - live0);
        return hit;
}

/* A bad body polled under the fault, after body A: once faults stop,
 * the record says it is rejected (A's pods stay named), and the fault
 * is never counted as the body's parse error.  Returns whether the
 * fault hit. */
static const char *const body_bad = "apiVersion: v1\nkind: PodList\nitems: [\n";

static bool http_bad_run(const struct fault *f)
{
        struct world w;
        long live0 = failalloc_live();
        uint8_t d[DIGEST_LEN];
        char want[160], text[DIGEST_TEXT_MAX];
        bool hit;

        http_set_body(body_a);
        http_world_up(&w);
        ck_assert_int_eq(http_source_start(w.hs), 0);
        ck_assert_msg(run_until_set(&w, http_text[0], 5000000), "no first SET");
        http_set_body(body_bad);
        ck_assert_int_eq(digest_sha256(body_bad, strlen(body_bad), d), 0);
        digest_text(d, text);
        snprintf(want, sizeof(want), "rejected %s 2 reason", text);
        arm(f);
        http_source_poll(w.hs);
        for (int i = 0; !f->persist && i < 1000 && strcmp(w.record, want) != 0; i++)
                loop_run_once(w.loop, 2000);
        hit = release(&w, f, 30000);
        for (int i = 0; i < 2500 && strcmp(w.record, want) != 0; i++)
                loop_run_once(w.loop, 2000);
        ck_assert_msg(strcmp(w.record, want) == 0, "allocation %ld failing: the record says \"%s\"", f->n, w.record);
        ck_assert_uint_le(w.stats.parse_errors, 1);
        world_down(&w);
        ck_assert_msg(failalloc_live() == live0, "allocation %ld failing: %ld block(s) leaked", f->n,
                      failalloc_live() - live0);
        return hit;
}

static void http_sweep(bool persist, long stride)
{
        long hits = 0, bad = 0;

        curl_global_init(CURL_GLOBAL_DEFAULT);
        warm_up();
        server_start(&http_srv, http_serve);
        http_learn();
        if (failalloc_enabled()) {
                quiet(true);
                for (long n = getenv("FAULTS_FROM") ? atol(getenv("FAULTS_FROM")) : 1;; n += stride) {
                        struct fault f = {n, persist};

                        if (!http_run(&f))
                                break;
                        hits++;
                }
                for (long n = 1;; n += stride, bad++) {
                        struct fault f = {n, persist};

                        if (!http_bad_run(&f))
                                break;
                }
                quiet(false);
                fprintf(stderr, "# http source: %ld allocation failure(s)%s survived, %ld with a bad body\n", hits,
                        persist ? " (persistent)" : "", bad);
                ck_assert_int_gt(hits, 50);
                ck_assert_int_gt(bad, 5);
        }
        server_stop(&http_srv);
        free(http_text[0]);
        free(http_text[1]);
}

START_TEST(test_http_alloc_sweep)
{
        ONLY("test_http_alloc_sweep");
        http_sweep(false, 1);
}
END_TEST

START_TEST(test_http_alloc_sweep_persistent)
{
        ONLY("test_http_alloc_sweep_persistent");
        http_sweep(true, 3);
}
END_TEST

/* ---- the API server source --------------------------------------------------------- */

/*
 * The fake API server: the node's pods go through N_STATES states, one
 * event apart; api_srv.n_events says how many were published.  A list
 * answers the current state; a watch from version R sends every event
 * after R, then each new one as it is published (chunked), until the
 * client goes or the test ends.
 */
static struct server api_srv;

#define API_POD(name, rv, image)                                                                     \
        "{\"metadata\":{\"namespace\":\"default\",\"name\":\"" name "\",\"uid\":\"u-" name "\","      \
        "\"resourceVersion\":\"" rv "\"},\"spec\":{\"nodeName\":\"node1\",\"containers\":[{\"name\":" \
        "\"c\",\"image\":\"" image "\"}]},\"status\":{\"phase\":\"Running\"}}"
#define API_RV0 10
#define N_API_EVENTS 3

/* Items of each state, and the event leading to it. */
static const char *const api_items[N_API_EVENTS + 1] = {
        API_POD("a", "5", "one") "," API_POD("keep", "4", "two"),
        API_POD("a", "11", "three") "," API_POD("keep", "4", "two"),
        API_POD("a", "11", "three") "," API_POD("b", "12", "four") "," API_POD("keep", "4", "two"),
        API_POD("a", "11", "three") "," API_POD("b", "12", "four"),
};
static const char *const api_events[N_API_EVENTS] = {
        "{\"type\":\"MODIFIED\",\"object\":" API_POD("a", "11", "three") "}\n",
        "{\"type\":\"ADDED\",\"object\":" API_POD("b", "12", "four") "}\n",
        "{\"type\":\"DELETED\",\"object\":" API_POD("keep", "13", "two") "}\n",
};

/* The API source runs with --watch-list: its lists are streaming lists,
 * which api_serve() answers with the state as events. */
static bool api_watch_list;

static void chunk(int fd, const char *p, size_t n)
{
        char head[32];
        int h = snprintf(head, sizeof(head), "%zx\r\n", n);

        write_all(fd, head, (size_t)h);
        write_all(fd, p, n);
        write_all(fd, "\r\n", 2);
}

static void api_serve(struct server *s, int fd, const char *request)
{
        const char *rvp = strstr(request, "resourceVersion=");
        unsigned long from = rvp ? strtoul(rvp + 16, NULL, 10) : 0;
        char buf[2048];
        size_t sent;
        unsigned gen;
        int n;

        if (getenv("FAULTS_VERBOSE"))
                fprintf(stderr, "# api server: %.*s\n", (int)strcspn(request, "\r"), request);
        pthread_mutex_lock(&s->lock);
        if (s->refuse) {
                pthread_mutex_unlock(&s->lock);
                dprintf(fd, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                return;
        }
        if (strstr(request, "sendInitialEvents=true"))
                s->streams++;
        if (s->throttled_at && !s->next_at)
                s->next_at = mono_usec();
        if (s->throttle && strstr(request, s->throttle_match)) {
                s->throttle--;
                dprintf(fd, "HTTP/1.1 429 Too Many Requests\r\nRetry-After: %u\r\nContent-Length: 0\r\n"
                            "Connection: close\r\n\r\n",
                        s->throttle_ra);
                s->throttled_at = mono_usec();
                s->next_at = 0;
                pthread_mutex_unlock(&s->lock);
                return;
        }
        pthread_mutex_unlock(&s->lock);
        if (!strstr(request, "watch=true")) {
                /* Without the node's field selector (a request that lost
                 * its query): the pods of every node. */
                bool node = strstr(request, "fieldSelector=spec.nodeName%3Dnode1") != NULL;

                pthread_mutex_lock(&s->lock);
                s->lists++;
                n = snprintf(buf, sizeof(buf), "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"%lu\"},"
                                               "\"items\":[%s%s]}",
                             API_RV0 + (unsigned long)s->n_events, api_items[s->n_events],
                             node ? "" : "," API_POD("other-node", "3", "x"));
                pthread_mutex_unlock(&s->lock);
                dprintf(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                            "Connection: close\r\n\r\n", n);
                write_all(fd, buf, (size_t)n);
                return;
        }
        dprintf(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                    "Connection: close\r\n\r\n");
        pthread_mutex_lock(&s->lock);
        if (from == API_RV0)
                s->old_watches++;
        gen = s->watch_gen;
        if (s->expire) {
                static const char gone[] = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\","
                                           "\"status\":\"Failure\",\"reason\":\"Expired\",\"code\":410}}\n";

                int then = s->expire_then;

                s->expire = false;
                pthread_mutex_unlock(&s->lock);
                chunk(fd, gone, sizeof(gone) - 1);
                if (then == 1) {
                        struct pollfd p = {.fd = fd, .events = POLLIN};

                        while (poll(&p, 1, 50) == 0)
                                ;
                        return;
                }
                for (int i = 0; then == 2 && i < 1024; i++) {
                        char junk[1024];

                        memset(junk, ' ', sizeof(junk));
                        chunk(fd, junk, sizeof(junk));
                }
                write_all(fd, "0\r\n\r\n", 5);
                return;
        }
        pthread_mutex_unlock(&s->lock);
        /* Events after the version asked for (event i has API_RV0 + i + 1). */
        sent = from > API_RV0 ? from - API_RV0 : 0;
        bool marked = false;
        if (strstr(request, "sendInitialEvents=true")) {
                /* A streaming list: the state as events (the first state's
                 * pods, then the events since), then the bookmark that
                 * ends them, then the changes as any watch. */
                static const char *const first[] = {
                        "{\"type\":\"ADDED\",\"object\":" API_POD("a", "5", "one") "}\n",
                        "{\"type\":\"ADDED\",\"object\":" API_POD("keep", "4", "two") "}\n",
                };

                chunk(fd, first[0], strlen(first[0]));
                chunk(fd, first[1], strlen(first[1]));
                pthread_mutex_lock(&s->lock);
                for (sent = 0; sent < s->n_events; sent++)
                        chunk(fd, api_events[sent], strlen(api_events[sent]));
                n = snprintf(buf, sizeof(buf),
                             "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\","
                             "\"metadata\":{\"resourceVersion\":\"%lu\",\"annotations\":"
                             "{\"k8s.io/initial-events-end\":\"true\"}}}}\n",
                             API_RV0 + (unsigned long)sent);
                pthread_mutex_unlock(&s->lock);
                chunk(fd, buf, (size_t)n);
                marked = true;
        }
        for (;;) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                bool stop;

                pthread_mutex_lock(&s->lock);
                while (sent < s->n_events) {
                        const char *ev = api_events[sent++];

                        chunk(fd, ev, strlen(ev));
                }
                if (!marked && !s->no_bookmark && strstr(request, "allowWatchBookmarks=true")) {
                        /* After the events a watch from an old version
                         * replays, a bookmark at the current one, as the
                         * API server sends within a minute. */
                        n = snprintf(buf, sizeof(buf),
                                     "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\","
                                     "\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":"
                                     "\"%lu\"}}}\n",
                                     API_RV0 + (unsigned long)sent);
                        chunk(fd, buf, (size_t)n);
                        marked = true;
                }
                stop = s->stop || s->watch_gen != gen;
                pthread_mutex_unlock(&s->lock);
                if (stop)
                        break;
                /* The client went away (or sent something): done. */
                if (poll(&p, 1, 5) > 0)
                        return;
        }
        write_all(fd, "0\r\n\r\n", 5);
}

static void api_publish(size_t n_events)
{
        pthread_mutex_lock(&api_srv.lock);
        api_srv.n_events = n_events;
        pthread_mutex_unlock(&api_srv.lock);
}

/* A world whose API source keeps its checkpoint in dir (NULL: none). */
static void api_world_up_dir(struct world *w, const char *dir)
{
        struct api_source_config cfg = {0};
        struct kube_config kc;
        struct buf err = BUF_INIT;
        char url[64];

        memset(w, 0, sizeof(*w));
        memset(&kc, 0, sizeof(kc));
        snprintf(url, sizeof(url), "http://127.0.0.1:%u", api_srv.port);
        kc.server = strdup(url);
        kc.context = strdup("test");
        ck_assert_ptr_nonnull(kc.server);
        ck_assert_int_eq(kube_client_new(&kc, &w->kube, &err), 0);
        cfg.kube = w->kube;
        cfg.node_name = "node1";
        cfg.stats = &w->stats;
        cfg.watch_list = api_watch_list;
        cfg.checkpoint = (struct api_source_checkpoint){
                .dir = dir, .interval_usec = 1000, .grace_usec = 3600000000ull, /* served on a failed list only */
        };
        ck_assert_int_eq(loop_new(&w->loop), 0);
        ck_assert_int_eq(curl_loop_new(w->loop, &w->cl), 0);
        ck_assert_int_eq(mux_new(w->loop, on_merge, w, &w->mux), 0);
        ck_assert_int_eq(mux_channel(w->mux, POD_SOURCE_API, &w->ch), 0);
        ck_assert_msg(api_source_new(w->loop, w->cl, w->ch, &cfg, &w->as, &err) == 0, "%s", err.data);
        api_source_set_pauses(w->as, 1000, 1000); /* back off and retry fast */
        buf_free(&err);
}

static void api_world_up(struct world *w)
{
        api_world_up_dir(w, NULL);
}

/* The fault-free SET of each state. */
static char *api_text[N_API_EVENTS + 1];

static void api_learn(void)
{
        struct world w;

        api_publish(0);
        api_world_up(&w);
        ck_assert_int_eq(api_source_start(w.as), 0);
        while (w.n_sets < 1)
                loop_run_once(w.loop, 2000);
        /* One event at a time, so that each state is seen on its own (a
         * burst would be folded into fewer records). */
        for (size_t k = 1; k <= N_API_EVENTS; k++) {
                api_publish(k);
                while (w.n_sets < 1 + k)
                        loop_run_once(w.loop, 2000);
        }
        /* A watch event hands on only its change. */
        ck_assert_uint_eq(w.n_deltas, N_API_EVENTS);
        ck_assert_uint_eq(w.stats.errors, 0);
        for (size_t i = 0; i <= N_API_EVENTS; i++)
                api_text[i] = strdup(w.sets[i]);
        ck_assert_ptr_null(strstr(api_text[N_API_EVENTS], "\"keep\""));
        world_down(&w);
        /* The next watch ends with the world. */
        pthread_mutex_lock(&api_srv.lock);
        api_srv.watch_gen++;
        pthread_mutex_unlock(&api_srv.lock);
}

/* Every SET is a state the server went through, never an older one than
 * the SET before it. */
static void check_api_sets(struct world *w)
{
        size_t last = 0;

        for (size_t i = 0; i < w->n_sets && !w->problem[0]; i++) {
                size_t k;

                for (k = 0; k <= N_API_EVENTS && strcmp(w->sets[i], api_text[k]) != 0; k++)
                        ;
                if (k > N_API_EVENTS)
                        snprintf(w->problem, sizeof(w->problem), "SET %zu is no state the server had:\n%.300s", i,
                                 w->sets[i]);
                else if (k < last)
                        snprintf(w->problem, sizeof(w->problem), "SET %zu went back from state %zu to %zu", i, last,
                                 k);
                else
                        last = k;
        }
}

static bool api_run(const struct fault *f)
{
        struct world w;
        long live0 = failalloc_live();
        bool hit, converged;
        char problem[sizeof(w.problem)];

        if (getenv("FAULTS_VERBOSE"))
                fprintf(stderr, "# api run: allocation %ld%s\n", f->n, f->persist ? " on" : "");
        api_publish(0);
        api_world_up(&w);
        ck_assert_int_eq(api_source_start(w.as), 0);
        ck_assert_msg(run_until_set(&w, api_text[0], 5000000), "no first SET");
        arm(f);
        api_publish(N_API_EVENTS);
        if (!f->persist)
                run_until_set(&w, api_text[N_API_EVENTS], 2000000);
        hit = release(&w, f, 30000);
        /* Faults are over: no new event comes; the source catches up by
         * itself (a push retried, a watch resumed, a relist). */
        converged = run_until_set(&w, api_text[N_API_EVENTS], 5000000);
        check_api_sets(&w);
        if (!converged && !w.problem[0])
                snprintf(w.problem, sizeof(w.problem), "the server's pods were never sent (%zu SETs, %llu errors: %s)",
                         w.n_sets, (unsigned long long)w.stats.errors, w.stats.last_error);
        if (w.stats.parse_errors && !w.problem[0])
                snprintf(w.problem, sizeof(w.problem), "out of memory counted as a parse error: %s",
                         w.stats.last_error);
        memcpy(problem, w.problem, sizeof(problem));
        world_down(&w);
        pthread_mutex_lock(&api_srv.lock);
        api_srv.watch_gen++;
        pthread_mutex_unlock(&api_srv.lock);
        ck_assert_msg(!problem[0], "allocation %ld%s failing: %s", f->n, f->persist ? " on" : "", problem);
        ck_assert_msg(failalloc_live() == live0, "allocation %ld%s failing: %ld block(s) leaked", f->n,
                      f->persist ? " on" : "", failalloc_live() - live0);
        return hit;
}

static void api_sweep(bool persist, long stride)
{
        long hits = 0;

        curl_global_init(CURL_GLOBAL_DEFAULT);
        warm_up();
        server_start(&api_srv, api_serve);
        api_learn();
        if (failalloc_enabled()) {
                quiet(true);
                for (long n = getenv("FAULTS_FROM") ? atol(getenv("FAULTS_FROM")) : 1;; n += stride) {
                        struct fault f = {n, persist};

                        if (!api_run(&f))
                                break;
                        hits++;
                }
                quiet(false);
                fprintf(stderr, "# api source: %ld allocation failure(s)%s survived\n", hits,
                        persist ? " (persistent)" : "");
                ck_assert_int_gt(hits, 50);
        }
        server_stop(&api_srv);
        for (size_t i = 0; i <= N_API_EVENTS; i++)
                free(api_text[i]);
}

START_TEST(test_api_alloc_sweep)
{
        ONLY("test_api_alloc_sweep");
        api_sweep(false, 1);
}
END_TEST

START_TEST(test_api_alloc_sweep_persistent)
{
        ONLY("test_api_alloc_sweep_persistent");
        api_sweep(true, 3);
}
END_TEST

/* The same with --watch-list: a streaming list cut short by a failed
 * allocation (its URL, its events, the swap at its end) is started
 * again, never watched on, and no SET is a partial state. */
START_TEST(test_api_watch_list_alloc_sweep)
{
        ONLY("test_api_watch_list_alloc_sweep");
        api_watch_list = true;
        api_sweep(false, 1);
        api_watch_list = false;
}
END_TEST

/* The stored pod of name in the state the merger was sent, or NULL. */
static struct pod *state_pod(const struct world *w, const char *name)
{
        for (size_t i = 0; w->state && i < w->state->n_pods; i++)
                if (strcmp(pod_name(w->state->pods[i]), name) == 0)
                        return w->state->pods[i];
        return NULL;
}

/* --watch-list: the bound on a streaming list's initial events belongs
 * to one attempt.  The first streaming list is answered 429 with
 * Retry-After; the source waits it out and sends the same request again.
 * Before, the bound was armed once per streaming list, fired during that
 * wait, took the server for one that ignores streaming lists and sent a
 * LIST beside the retry already planned.  Counted, not timed: the bound
 * (2 s here, 30 s in the daemon) is far longer than a local answer, and
 * the Retry-After longer than the bound. */
START_TEST(test_api_watch_list_bound_per_attempt)
{
        struct world w;
        unsigned lists, streams, lists0, streams0;
        uint64_t end;

        ONLY("test_api_watch_list_bound_per_attempt");
        curl_global_init(CURL_GLOBAL_DEFAULT);
        server_start(&api_srv, api_serve);
        api_publish(0);
        pthread_mutex_lock(&api_srv.lock);
        api_srv.throttle = 1;
        api_srv.throttle_ra = 4; /* longer than the bound below */
        api_srv.throttle_match = "sendInitialEvents=true";
        lists0 = api_srv.lists;
        streams0 = api_srv.streams;
        pthread_mutex_unlock(&api_srv.lock);
        api_watch_list = true;
        api_world_up(&w);
        api_watch_list = false;
        api_source_set_watch_list_wait(w.as, 2000000);
        ck_assert_int_eq(api_source_start(w.as), 0);
        end = mono_usec() + 15000000ull;
        while (w.n_sets < 1 && mono_usec() < end)
                loop_run_once(w.loop, 2000);
        ck_assert_uint_eq(w.n_sets, 1);
        ck_assert_ptr_nonnull(state_pod(&w, "keep"));
        pthread_mutex_lock(&api_srv.lock);
        lists = api_srv.lists - lists0;
        streams = api_srv.streams - streams0;
        pthread_mutex_unlock(&api_srv.lock);
        ck_assert_uint_eq(lists, 0);   /* no LIST beside the retry */
        ck_assert_uint_eq(streams, 2); /* the one answered 429, then its retry */
        world_down(&w);
        pthread_mutex_lock(&api_srv.lock);
        api_srv.watch_gen++;
        pthread_mutex_unlock(&api_srv.lock);
        server_stop(&api_srv);
}
END_TEST

/* The fake API server up with n events published, a world on it, and
 * the source started and through its first list. */
static void api_world_synced(struct world *w, size_t n)
{
        curl_global_init(CURL_GLOBAL_DEFAULT);
        server_start(&api_srv, api_serve);
        api_publish(n);
        api_world_up(w);
        ck_assert_int_eq(api_source_start(w->as), 0);
        while (w->n_sets < 1)
                loop_run_once(w->loop, 2000);
}

/* A relist (here after the watch is refused as too old) that finds a pod
 * as it was keeps the pod the source already had: the merger stores that
 * one (src/core/pod.h), so the node holds one copy of it, not two.
 * A pod that changed is the new one. */
START_TEST(test_api_relist_keeps_unchanged_pods)
{
        struct world w;
        struct pod *a, *keep;
        size_t sets;

        ONLY("test_api_relist_keeps_unchanged_pods");
        api_world_synced(&w, 1);
        a = pod_ref(state_pod(&w, "a"));
        keep = pod_ref(state_pod(&w, "keep"));
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(keep);
        /* The open watch ends; the next one is refused: a relist. */
        sets = w.n_sets;
        pthread_mutex_lock(&api_srv.lock);
        api_srv.expire = true;
        api_srv.n_events = 2; /* b comes; a and keep are as they were */
        api_srv.watch_gen++;
        pthread_mutex_unlock(&api_srv.lock);
        for (int i = 0; i < 5000 && !state_pod(&w, "b"); i++)
                loop_run_once(w.loop, 2000);
        ck_assert_ptr_nonnull(state_pod(&w, "b"));
        ck_assert_uint_gt(w.n_sets, sets);
        ck_assert_uint_eq(w.n_deltas, 0); /* b came with the list, not the watch */
        ck_assert_ptr_eq(state_pod(&w, "a"), a);
        ck_assert_ptr_eq(state_pod(&w, "keep"), keep);
        pod_unref(a);
        pod_unref(keep);
        world_down(&w);
        pthread_mutex_lock(&api_srv.lock);
        api_srv.watch_gen++;
        pthread_mutex_unlock(&api_srv.lock);
        server_stop(&api_srv);
}
END_TEST

/* A watch answered 429 with Retry-After more often than it is retried
 * (API_MAX_RETRY_AFTER times) ends its cycle, and the backoff after it
 * still waits out the last Retry-After: the next request never comes
 * before the time the server asked for.  Before, it came after the
 * backoff alone (0.8 s in the daemon, 1 ms here).  The one bound asserted
 * is a lower one, which load cannot break; 50 ms are allowed for the
 * thread that stamps the 429 after writing it. */
START_TEST(test_api_retry_after_spent_still_waited)
{
        struct world w;
        uint64_t gap, end;
        unsigned left;

        ONLY("test_api_retry_after_spent_still_waited");
        api_world_synced(&w, 0);
        pthread_mutex_lock(&api_srv.lock);
        api_srv.throttle = API_MAX_RETRY_AFTER + 1;
        api_srv.throttle_ra = 1;
        api_srv.throttle_match = "watch=true";
        api_srv.throttled_at = api_srv.next_at = 0;
        api_srv.watch_gen++; /* the watch ends: the next ones are throttled */
        pthread_mutex_unlock(&api_srv.lock);
        end = mono_usec() + (API_MAX_RETRY_AFTER + 20) * 1000000ull;
        do {
                loop_run_once(w.loop, 2000);
                pthread_mutex_lock(&api_srv.lock);
                left = api_srv.throttle;
                gap = api_srv.next_at ? api_srv.next_at - api_srv.throttled_at : 0;
                pthread_mutex_unlock(&api_srv.lock);
        } while ((left || !gap) && mono_usec() < end);
        ck_assert_uint_eq(left, 0);
        ck_assert_msg(gap >= 950000, "the request after the last 429 came %.3f s after it, before its Retry-After (1 s)",
                      (double)gap / 1e6);
        world_down(&w);
        pthread_mutex_lock(&api_srv.lock);
        api_srv.throttled_at = api_srv.next_at = 0;
        api_srv.watch_gen++;
        pthread_mutex_unlock(&api_srv.lock);
        server_stop(&api_srv);
}
END_TEST

/* ---- the API source's checkpoint ------------------------------------------------- */

static char ckpt_dir[64];
static char *ckpt_bytes; /* the checkpoint of state 0 */
static size_t ckpt_len;

static char *ckpt_file(void)
{
        char *p = NULL;

        ck_assert_int_ge(asprintf(&p, "%s/%s", ckpt_dir, CHECKPOINT_FILE), 0);
        return p;
}

/* The checkpoint of the server's state 0, as the source writes it. */
static void ckpt_learn(void)
{
        struct world w;
        struct buf err = BUF_INIT;
        char *f;

        memcpy(ckpt_dir, "/tmp/podmux-faults-XXXXXX", sizeof("/tmp/podmux-faults-XXXXXX"));
        ck_assert_ptr_nonnull(mkdtemp(ckpt_dir));
        api_publish(0);
        api_world_up_dir(&w, ckpt_dir);
        ck_assert_int_eq(api_source_start(w.as), 0);
        ck_assert(run_until_set(&w, api_text[0], 5000000));
        ck_assert_int_eq(api_source_flush_checkpoint(w.as, &err), 0);
        world_down(&w);
        pthread_mutex_lock(&api_srv.lock);
        api_srv.watch_gen++;
        pthread_mutex_unlock(&api_srv.lock);
        f = ckpt_file();
        ck_assert_int_eq(file_read(f, CHECKPOINT_MAX_BYTES + 1, &ckpt_bytes, &ckpt_len, &err), 0);
        free(f);
        buf_free(&err);
}

/* Puts the checkpoint of state 0 back (a run that went live wrote its
 * own). */
static void ckpt_restore(void)
{
        char *f = ckpt_file();
        int fd;

        unlink(f);
        fd = open(f, O_WRONLY | O_CREAT | O_EXCL, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, ckpt_bytes, ckpt_len), (ssize_t)ckpt_len);
        close(fd);
        free(f);
}

static void api_refuse(bool on)
{
        pthread_mutex_lock(&api_srv.lock);
        api_srv.refuse = on;
        pthread_mutex_unlock(&api_srv.lock);
}

/* Runs until the last SET is the checkpoint's (or the time is up). */
static bool run_until_checkpoint(struct world *w, uint64_t usec)
{
        uint64_t end = mono_usec() + usec;

        while (mono_usec() < end) {
                if (w->n_sets && w->checkpoint[w->n_sets - 1])
                        return true;
                loop_run_once(w->loop, 2000);
        }
        return w->n_sets && w->checkpoint[w->n_sets - 1];
}

/* Every SET is the checkpoint's (state 0, marked) before any live one
 * (unmarked, a state of the server). */
static void check_checkpoint_sets(struct world *w)
{
        bool live = false;

        for (size_t i = 0; i < w->n_sets && !w->problem[0]; i++) {
                if (w->checkpoint[i] && (live || strcmp(w->sets[i], api_text[0]) != 0))
                        snprintf(w->problem, sizeof(w->problem), "SET %zu: a checkpoint's%s:\n%.300s", i,
                                 live ? " after a live one" : " that is not the checkpoint", w->sets[i]);
                live = live || !w->checkpoint[i];
        }
}

static void *idle_thread(void *arg)
{
        pthread_barrier_wait(arg);
        return NULL;
}

/* What the C library keeps of threads that ended: their stacks, with the
 * loader's per-thread block, are cached for the next thread.  A run makes
 * the checkpoint writer's thread, and libcurl may make its own: a few
 * cached stacks, made before anything is counted, serve them all. */
static void warm_up_threads(void)
{
        pthread_t t[4];
        pthread_barrier_t b;

        ck_assert_int_eq(pthread_barrier_init(&b, NULL, 5), 0);
        for (int i = 0; i < 4; i++)
                ck_assert_int_eq(pthread_create(&t[i], NULL, idle_thread, &b), 0);
        pthread_barrier_wait(&b);
        for (int i = 0; i < 4; i++)
                pthread_join(t[i], NULL);
        pthread_barrier_destroy(&b);
}

/* One run: the server refuses, the checkpoint is served under the fault,
 * then the server answers with its last state. */
static bool ckpt_run(const struct fault *f)
{
        struct world w;
        long live0 = failalloc_live();
        bool hit, served, converged;
        char problem[sizeof(w.problem)];

        if (getenv("FAULTS_VERBOSE"))
                fprintf(stderr, "# checkpoint run: allocation %ld%s\n", f->n, f->persist ? " on" : "");
        ckpt_restore();
        api_refuse(true);
        api_publish(N_API_EVENTS);
        api_world_up_dir(&w, ckpt_dir);
        ck_assert_int_eq(api_source_start(w.as), 0);
        arm(f);
        if (!f->persist)
                run_until_checkpoint(&w, 2000000);
        hit = release(&w, f, 30000);
        /* Faults are over: a later failed list serves it. */
        served = run_until_checkpoint(&w, 5000000);
        api_refuse(false);
        converged = run_until_set(&w, api_text[N_API_EVENTS], 5000000) && !w.checkpoint[w.n_sets - 1];
        check_checkpoint_sets(&w);
        check_sets(&w, 0, api_text, N_API_EVENTS + 1);
        if (!served && !w.problem[0])
                snprintf(w.problem, sizeof(w.problem), "the checkpoint was never served (%zu SETs)", w.n_sets);
        if (!converged && !w.problem[0])
                snprintf(w.problem, sizeof(w.problem), "the server's pods never replaced the checkpoint's (%zu SETs)",
                         w.n_sets);
        memcpy(problem, w.problem, sizeof(problem));
        world_down(&w);
        pthread_mutex_lock(&api_srv.lock);
        api_srv.watch_gen++;
        pthread_mutex_unlock(&api_srv.lock);
        ck_assert_msg(!problem[0], "allocation %ld%s failing: %s", f->n, f->persist ? " on" : "", problem);
        ck_assert_msg(failalloc_live() == live0, "allocation %ld%s failing: %ld block(s) leaked", f->n,
                      f->persist ? " on" : "", failalloc_live() - live0);
        return hit;
}

/* The API source serving its checkpoint (doc/checkpoint.md) with every
 * allocation from its start failing in turn (an odd one once, an even one
 * and all after it for a while): the checkpoint is served whole, marked,
 * before any live SET, and once the server answers its state replaces it;
 * nothing leaks. */
START_TEST(test_api_checkpoint_alloc_sweep)
{
        long hits = 0;

        ONLY("test_api_checkpoint_alloc_sweep");
        curl_global_init(CURL_GLOBAL_DEFAULT);
        warm_up();
        server_start(&api_srv, api_serve);
        api_learn();
        ckpt_learn();
        warm_up_threads();
        quiet(failalloc_enabled());
        for (long n = failalloc_enabled() ? (getenv("FAULTS_FROM") ? atol(getenv("FAULTS_FROM")) : 1) : 0;; n++) {
                struct fault f = {n, n % 2 == 0};

                if (!ckpt_run(&f) || n == 0)
                        break;
                hits++;
        }
        quiet(false);
        fprintf(stderr, "# api source checkpoint: %ld allocation failure(s) survived\n", hits);
        if (failalloc_enabled())
                ck_assert_int_gt(hits, 20);
        server_stop(&api_srv);
        for (size_t i = 0; i <= N_API_EVENTS; i++)
                free(api_text[i]);
        free(ckpt_bytes);
        {
                char cmd[96];

                (void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", ckpt_dir);
                ck_assert_int_eq(system(cmd), 0);
        }
}
END_TEST

/* Runs until the last SET is want and live (or the time is up). */
static bool run_until_live(struct world *w, const char *want, uint64_t usec)
{
        uint64_t end = mono_usec() + usec;
        bool ok = false;

        while (!ok && mono_usec() < end) {
                loop_run_once(w->loop, 2000);
                ok = last_set(w) && strcmp(last_set(w), want) == 0 && !w->checkpoint[w->n_sets - 1];
        }
        return ok;
}

/* One resumed start: the checkpoint of state 0 is on disk, the server has
 * moved on to its last state; the watch from the checkpoint's version
 * brings the events.  Without a fault: one SET, the last state, and no
 * list. */
static bool resume_run(const struct fault *f)
{
        struct world w;
        long live0 = failalloc_live();
        bool hit, converged;
        unsigned lists;
        int started;
        char problem[sizeof(w.problem)];

        if (getenv("FAULTS_VERBOSE"))
                fprintf(stderr, "# resume run: allocation %ld%s\n", f->n, f->persist ? " on" : "");
        ckpt_restore();
        api_publish(N_API_EVENTS);
        pthread_mutex_lock(&api_srv.lock);
        lists = api_srv.lists;
        pthread_mutex_unlock(&api_srv.lock);
        api_world_up_dir(&w, ckpt_dir);
        /* From the start: the checkpoint's load and the resume fail too. */
        arm(f);
        started = api_source_start(w.as);
        if (!f->persist)
                run_until_set(&w, api_text[N_API_EVENTS], 2000000);
        hit = release(&w, f, 30000);
        ck_assert_int_eq(started, 0);
        converged = run_until_live(&w, api_text[N_API_EVENTS], 5000000);
        /* Served before the watch is confirmed (a failure): the
         * checkpoint with the events applied so far, a state the server
         * had, marked; never after a live one, never going back. */
        for (size_t i = 1; i < w.n_sets && !w.problem[0]; i++)
                if (w.checkpoint[i] && !w.checkpoint[i - 1])
                        snprintf(w.problem, sizeof(w.problem), "SET %zu: a checkpoint's after a live one", i);
        check_api_sets(&w);
        pthread_mutex_lock(&api_srv.lock);
        lists = api_srv.lists - lists;
        pthread_mutex_unlock(&api_srv.lock);
        if (!converged && !w.problem[0])
                snprintf(w.problem, sizeof(w.problem), "the server's last state never came (%zu SETs)", w.n_sets);
        if (f->n == 0 && !w.problem[0] && (w.n_sets != 1 || lists != 0))
                snprintf(w.problem, sizeof(w.problem), "a resumed start: %zu SET(s), %u list(s); want 1 and 0",
                         w.n_sets, lists);
        memcpy(problem, w.problem, sizeof(problem));
        world_down(&w);
        pthread_mutex_lock(&api_srv.lock);
        api_srv.watch_gen++;
        pthread_mutex_unlock(&api_srv.lock);
        ck_assert_msg(!problem[0], "allocation %ld%s failing: %s", f->n, f->persist ? " on" : "", problem);
        ck_assert_msg(failalloc_live() == live0, "allocation %ld%s failing: %ld block(s) leaked", f->n,
                      f->persist ? " on" : "", failalloc_live() - live0);
        return hit;
}

static void ckpt_cleanup(void)
{
        char cmd[96];

        free(ckpt_bytes);
        (void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", ckpt_dir);
        ck_assert_int_eq(system(cmd), 0);
}

/* A start with a checkpoint watches from its resourceVersion, with every
 * allocation from the start failing in turn (an odd one once, an even one
 * and all after it for a while): only states the server had reach the
 * merger, a checkpoint's only before any live one, the last state comes,
 * nothing leaks; with no fault, no list is sent and the one SET is the
 * server's last state (doc/checkpoint.md section 7). */
START_TEST(test_api_resume_alloc_sweep)
{
        long hits = 0;

        ONLY("test_api_resume_alloc_sweep");
        curl_global_init(CURL_GLOBAL_DEFAULT);
        warm_up();
        server_start(&api_srv, api_serve);
        api_learn();
        ckpt_learn();
        warm_up_threads();
        /* First with no fault: the start as it should be. */
        resume_run(&(struct fault){0, false});
        quiet(failalloc_enabled());
        for (long n = getenv("FAULTS_FROM") ? atol(getenv("FAULTS_FROM")) : 1; failalloc_enabled(); n++) {
                struct fault f = {n, n % 2 == 0};

                if (!resume_run(&f))
                        break;
                hits++;
        }
        quiet(false);
        fprintf(stderr, "# api source resume: %ld allocation failure(s) survived\n", hits);
        if (failalloc_enabled())
                ck_assert_int_gt(hits, 20);
        server_stop(&api_srv);
        for (size_t i = 0; i <= N_API_EVENTS; i++)
                free(api_text[i]);
        ckpt_cleanup();
}
END_TEST

/* A resumed watch refused as too old (410): one list, its state, and the
 * checkpoint never served (the server answered). */
START_TEST(test_api_resume_expired)
{
        struct world w;
        unsigned lists;

        ONLY("test_api_resume_expired");
        curl_global_init(CURL_GLOBAL_DEFAULT);
        server_start(&api_srv, api_serve);
        api_learn();
        ckpt_learn();
        ckpt_restore();
        api_publish(N_API_EVENTS);
        pthread_mutex_lock(&api_srv.lock);
        lists = api_srv.lists;
        api_srv.old_watches = 0;
        api_srv.expire = true;
        pthread_mutex_unlock(&api_srv.lock);
        api_world_up_dir(&w, ckpt_dir);
        ck_assert_int_eq(api_source_start(w.as), 0);
        ck_assert(run_until_set(&w, api_text[N_API_EVENTS], 5000000));
        ck_assert_uint_eq(w.n_sets, 1);
        ck_assert(!w.checkpoint[0]);
        pthread_mutex_lock(&api_srv.lock);
        ck_assert_uint_eq(api_srv.lists - lists, 1);
        ck_assert_uint_eq(api_srv.old_watches, 1); /* the resume, refused */
        pthread_mutex_unlock(&api_srv.lock);
        world_down(&w);
        pthread_mutex_lock(&api_srv.lock);
        api_srv.watch_gen++;
        pthread_mutex_unlock(&api_srv.lock);
        server_stop(&api_srv);
        for (size_t i = 0; i <= N_API_EVENTS; i++)
                free(api_text[i]);
        ckpt_cleanup();
}
END_TEST

/* A watch's ERROR event is read to the end of its response (the
 * connection is kept), but within bounds: a response that never ends
 * after it, or goes on past API_DRAIN_MAX_BYTES, is cut off, and the
 * relist comes as after any 410. */
START_TEST(test_api_error_drain_bounded)
{
        ONLY("test_api_error_drain_bounded");
        curl_global_init(CURL_GLOBAL_DEFAULT);
        server_start(&api_srv, api_serve);
        for (int then = 1; then <= 2; then++) {
                struct world w;
                unsigned lists;

                api_publish(0);
                api_world_up(&w);
                pthread_mutex_lock(&api_srv.lock);
                lists = api_srv.lists;
                api_srv.expire = true; /* the first watch */
                api_srv.expire_then = then;
                pthread_mutex_unlock(&api_srv.lock);
                ck_assert_int_eq(api_source_start(w.as), 0);
                for (int i = 0; i < 5000; i++) {
                        bool again;

                        pthread_mutex_lock(&api_srv.lock);
                        again = api_srv.lists > lists + 1;
                        pthread_mutex_unlock(&api_srv.lock);
                        if (again)
                                break;
                        loop_run_once(w.loop, 2000);
                }
                pthread_mutex_lock(&api_srv.lock);
                /* The start's list, then the relist after the 410. */
                ck_assert_msg(api_srv.lists > lists + 1, "ERROR event then %d: %u list(s) since", then,
                              api_srv.lists - lists);
                api_srv.expire_then = 0;
                api_srv.watch_gen++;
                pthread_mutex_unlock(&api_srv.lock);
                world_down(&w);
        }
        server_stop(&api_srv);
}
END_TEST

/* A resumed watch that gets no bookmark is confirmed when it runs its
 * course (the server ends it whole): the last state goes as live then,
 * not before; no list. */
START_TEST(test_api_resume_confirmed_by_clean_end)
{
        struct world w;
        unsigned lists;

        ONLY("test_api_resume_confirmed_by_clean_end");
        curl_global_init(CURL_GLOBAL_DEFAULT);
        server_start(&api_srv, api_serve);
        api_learn();
        ckpt_learn();
        ckpt_restore();
        api_publish(N_API_EVENTS);
        pthread_mutex_lock(&api_srv.lock);
        lists = api_srv.lists;
        api_srv.old_watches = 0;
        api_srv.no_bookmark = true;
        pthread_mutex_unlock(&api_srv.lock);
        api_world_up_dir(&w, ckpt_dir);
        ck_assert_int_eq(api_source_start(w.as), 0);
        for (int i = 0; i < 5000; i++) {
                bool open;

                pthread_mutex_lock(&api_srv.lock);
                open = api_srv.old_watches == 1;
                pthread_mutex_unlock(&api_srv.lock);
                if (open)
                        break;
                loop_run_once(w.loop, 2000);
        }
        run_for(&w, 100000); /* the events come; nothing may be sent */
        ck_assert_uint_eq(w.n_sets, 0);
        pthread_mutex_lock(&api_srv.lock);
        api_srv.watch_gen++; /* the watch ends whole */
        pthread_mutex_unlock(&api_srv.lock);
        ck_assert(run_until_live(&w, api_text[N_API_EVENTS], 5000000));
        ck_assert_uint_eq(w.n_sets, 1);
        pthread_mutex_lock(&api_srv.lock);
        ck_assert_uint_eq(api_srv.lists - lists, 0);
        api_srv.no_bookmark = false;
        api_srv.watch_gen++;
        pthread_mutex_unlock(&api_srv.lock);
        world_down(&w);
        server_stop(&api_srv);
        for (size_t i = 0; i <= N_API_EVENTS; i++)
                free(api_text[i]);
        ckpt_cleanup();
}
END_TEST

UNIT_MAIN(test_http_alloc_sweep, test_http_alloc_sweep_persistent, test_api_alloc_sweep,
          test_api_alloc_sweep_persistent, test_api_watch_list_alloc_sweep, test_api_watch_list_bound_per_attempt,
          test_api_retry_after_spent_still_waited, test_api_relist_keeps_unchanged_pods,
          test_api_checkpoint_alloc_sweep, test_api_resume_alloc_sweep, test_api_resume_expired,
          test_api_error_drain_bounded, test_api_resume_confirmed_by_clean_end)
