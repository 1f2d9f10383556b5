/*
 * fake_stream — a scripted podmux daemon for libpodmux-client's tests
 * (test_client.c, test_client_faults.c): a unix socket the test writes
 * protocol lines to by hand, and a recorder of what the client's handlers
 * saw, with a model that applies the records a handler saw in order (so a
 * test checks that they give exactly the client's cache).
 *
 * Everything runs on the test's thread: the test calls
 * podmux_client_process() itself (pump()), so there is no timing in it;
 * waiting for a reconnection is waiting for podmux_client_timeout().
 */
#ifndef PODMUX_TESTS_FAKE_STREAM_H
#define PODMUX_TESTS_FAKE_STREAM_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <check.h>

#include "util/buf.h"
#include "podmux/client.h"
#include "../../src/client/client_cache.h"

struct fake {
        char dir[64];
        char path[128];
        int lfd;
        int cfd;
        char first[256]; /* the client's first line on this connection */
};

static __attribute__((unused)) void fake_listen(struct fake *f)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};

        f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(f->lfd, 0);
        memcpy(sa.sun_path, f->path, strlen(f->path) + 1);
        ck_assert_int_eq(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        ck_assert_int_eq(listen(f->lfd, 16), 0);
}

static __attribute__((unused)) void fake_init(struct fake *f)
{
        memset(f, 0, sizeof(*f));
        snprintf(f->dir, sizeof(f->dir), "/tmp/podmux-client-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(f->dir));
        snprintf(f->path, sizeof(f->path), "%s/s.sock", f->dir);
        f->cfd = -1;
        fake_listen(f);
}

/* The daemon goes away: listener closed, socket file removed. */
static __attribute__((unused)) void fake_unlisten(struct fake *f)
{
        if (f->lfd >= 0)
                close(f->lfd);
        f->lfd = -1;
        unlink(f->path);
}

static __attribute__((unused)) void fake_close(struct fake *f)
{
        if (f->cfd >= 0)
                close(f->cfd);
        f->cfd = -1;
}

static __attribute__((unused)) void fake_free(struct fake *f)
{
        fake_close(f);
        fake_unlisten(f);
        rmdir(f->dir);
}

/* Runs the client until nothing is left to read right now. */
static __attribute__((unused)) void pump(struct podmux_client *c)
{
        for (int i = 0; i < 1000; i++) {
                struct pollfd p = {.fd = podmux_client_fd(c), .events = POLLIN};

                if (podmux_client_process(c) < 0)
                        return;
                if (poll(&p, 1, 0) <= 0)
                        return;
        }
}

/* Waits for the reconnection that is due and makes it. */
static __attribute__((unused)) int wait_due(struct podmux_client *c)
{
        int t = podmux_client_timeout(c);

        if (t > 0)
                poll(NULL, 0, t);
        return podmux_client_process(c);
}

/* The client connects (now or after its backoff); the fake accepts and
 * reads its first line. */
static __attribute__((unused)) void fake_accept(struct fake *f, struct podmux_client *c)
{
        size_t n = 0;

        fake_close(f);
        (void)wait_due(c);
        f->cfd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
        ck_assert_int_ge(f->cfd, 0);
        while (n < sizeof(f->first) - 1) {
                ssize_t k = read(f->cfd, f->first + n, 1);

                ck_assert_int_eq(k, 1);
                if (f->first[n] == '\n')
                        break;
                n++;
        }
        f->first[n] = '\0';
}

static __attribute__((unused)) void fake_write(struct fake *f, const char *s, size_t n)
{
        while (n > 0) {
                ssize_t k = write(f->cfd, s, n);

                if (k < 0 && (errno == EPIPE || errno == ECONNRESET))
                        return; /* the client closed first: it will be told again */
                ck_assert_int_gt(k, 0);
                s += k;
                n -= (size_t)k;
        }
}

/* Sends one line (a newline is added). */
static __attribute__((unused)) void fake_send(struct fake *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static __attribute__((unused)) void fake_send(struct fake *f, const char *fmt, ...)
{
        struct buf b = BUF_INIT;
        va_list ap;

        va_start(ap, fmt);
        ck_assert_int_eq(buf_vprintf(&b, fmt, ap), 0);
        va_end(ap);
        ck_assert_int_eq(buf_putc(&b, '\n'), 0);
        fake_write(f, b.data, b.len);
        buf_free(&b);
}

static __attribute__((unused)) void fake_hello(struct fake *f, uint64_t seq)
{
        fake_send(f, "{\"type\":\"hello\",\"protocol\":1,\"mode\":\"incremental\",\"node\":\"n1\",\"seq\":%" PRIu64 "}",
                  seq);
}

static __attribute__((unused)) void fake_synced(struct fake *f, uint64_t seq, bool resumed)
{
        fake_send(f, "{\"type\":\"synced\",\"seq\":%" PRIu64 ",\"resumed\":%s}", seq, resumed ? "true" : "false");
}

/* A pod's text: uid, namespace, name, source and a generation that makes
 * versions differ. */
static __attribute__((unused)) char *pod_text(const char *uid, const char *ns, const char *name, const char *src, int gen)
{
        char *s = NULL;

        ck_assert_int_ge(asprintf(&s,
                                  "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\",\"uid\":\"%s\","
                                  "\"annotations\":{\"kubernetes.io/config.source\":\"%s\"}},"
                                  "\"spec\":{\"gen\":%d}}",
                                  name, ns, uid, src, gen),
                         0);
        return s;
}

/* {"type":"pods",...} with n pod texts (freed). */
static __attribute__((unused)) void fake_pods(struct fake *f, uint64_t seq, const char *op, const char *src, size_t n, ...)
{
        struct buf b = BUF_INIT;
        va_list ap;

        ck_assert_int_eq(buf_printf(&b, "{\"type\":\"pods\",\"seq\":%" PRIu64 ",\"op\":\"%s\",\"source\":\"%s\",\"pods\":[",
                                    seq, op, src),
                         0);
        va_start(ap, n);
        for (size_t i = 0; i < n; i++) {
                char *p = va_arg(ap, char *);

                ck_assert_int_eq(buf_printf(&b, "%s%s", i ? "," : "", p), 0);
                free(p);
        }
        va_end(ap);
        ck_assert_int_eq(buf_puts(&b, "]}\n"), 0);
        fake_write(f, b.data, b.len);
        buf_free(&b);
}

/* ---- the recorder ---------------------------------------------------------- */

#define MODEL_MAX 256

struct model_pod {
        char *source, *uid, *json;
};

struct rec {
        struct buf log; /* one line per handler call */
        struct model_pod pods[MODEL_MAX];
        size_t n;
        int errors;
        enum podmux_error_kind last_kind;
        int last_err;
        bool last_fatal;
        char last_message[600];
        int reconnects;
        bool stop_on_pods;
        bool stop_on_source;
};

static __attribute__((unused)) void model_put(struct rec *r, const struct podmux_pod *p)
{
        for (size_t i = 0; i < r->n; i++) {
                if (strcmp(r->pods[i].source, podmux_pod_source(p)) == 0 &&
                    strcmp(r->pods[i].uid, podmux_pod_uid(p)) == 0) {
                        free(r->pods[i].json);
                        r->pods[i].json = strdup(podmux_pod_json(p, NULL));
                        return;
                }
        }
        ck_assert_uint_lt(r->n, MODEL_MAX);
        r->pods[r->n].source = strdup(podmux_pod_source(p));
        r->pods[r->n].uid = strdup(podmux_pod_uid(p));
        r->pods[r->n].json = strdup(podmux_pod_json(p, NULL));
        r->n++;
}

static __attribute__((unused)) void model_del(struct rec *r, size_t i)
{
        free(r->pods[i].source);
        free(r->pods[i].uid);
        free(r->pods[i].json);
        r->pods[i] = r->pods[--r->n];
}

static __attribute__((unused)) void model_clear(struct rec *r)
{
        while (r->n)
                model_del(r, r->n - 1);
}

/* Called on entering (true) and leaving (false) every handler: the fault
 * test stops injecting faults into the recorder's own allocations. */
static void (*rec_hook)(bool enter);
#define HOOK_IN() do { if (rec_hook) rec_hook(true); } while (0)
#define HOOK_OUT() do { if (rec_hook) rec_hook(false); } while (0)

static __attribute__((unused)) void on_pods(struct podmux_client *c, const struct podmux_update *u, void *data)
{
        struct rec *r = data;

        HOOK_IN();

        (void)buf_printf(&r->log, "pods %s %s%s", podmux_op_name(u->op), u->source, u->resync ? " resync" : "");
        if (u->op == PODMUX_OP_SET)
                model_clear(r);
        for (size_t i = 0; i < u->n_pods; i++) {
                const struct podmux_pod *p = u->pods[i];

                (void)buf_printf(&r->log, " %s", podmux_pod_uid(p));
                if (u->op == PODMUX_OP_REMOVE) {
                        for (size_t j = 0; j < r->n; j++)
                                if (strcmp(r->pods[j].source, podmux_pod_source(p)) == 0 &&
                                    strcmp(r->pods[j].uid, podmux_pod_uid(p)) == 0) {
                                        model_del(r, j);
                                        break;
                                }
                } else {
                        model_put(r, p);
                }
        }
        (void)buf_putc(&r->log, '\n');
        if (r->stop_on_pods)
                podmux_client_stop(c);
        HOOK_OUT();
}

static __attribute__((unused)) void on_synced(struct podmux_client *c, bool resumed, void *data)
{
        struct rec *r = data;

        HOOK_IN();

        (void)c;
        (void)buf_printf(&r->log, "synced %s\n", resumed ? "resumed" : "state");
        HOOK_OUT();
}

static __attribute__((unused)) void on_ready(struct podmux_client *c, const char *const *s, size_t n, void *data)
{
        struct rec *r = data;

        HOOK_IN();

        (void)c;
        (void)buf_puts(&r->log, "ready");
        for (size_t i = 0; i < n; i++)
                (void)buf_printf(&r->log, " %s", s[i]);
        (void)buf_putc(&r->log, '\n');
        HOOK_OUT();
}

static __attribute__((unused)) void on_source(struct podmux_client *c, const struct podmux_source_state *st, void *data)
{
        struct rec *r = data;
        struct podmux_source_state q;

        HOOK_IN();

        (void)buf_printf(&r->log, "source %s %s", st->source, st->state);
        if (st->checkpoint_time || st->checkpoint_resource_version)
                (void)buf_printf(&r->log, " %s %s", st->checkpoint_time ? st->checkpoint_time : "-",
                                 st->checkpoint_resource_version ? st->checkpoint_resource_version : "-");
        (void)buf_printf(&r->log, " %" PRIu64 "%s\n", st->seq, st->resync ? " resync" : "");
        /* The query says the same as the handler, from inside it. */
        ck_assert_int_eq(podmux_client_source_state(c, st->source, &q), st->serving != PODMUX_SERVING_LIVE);
        ck_assert_str_eq(q.state, st->state);
        if (r->stop_on_source)
                podmux_client_stop(c);
        HOOK_OUT();
}

static __attribute__((unused)) void on_plugin(struct podmux_client *c, const struct podmux_plugin_event *e, void *data)
{
        struct rec *r = data;

        HOOK_IN();

        (void)c;
        (void)buf_printf(&r->log, "plugin %s %s%s%s\n", e->op, e->socket, e->resync ? " resync" : "",
                         e->error ? " error" : "");
        HOOK_OUT();
}

static __attribute__((unused)) void on_error(struct podmux_client *c, const struct podmux_error *e, void *data)
{
        struct rec *r = data;

        HOOK_IN();

        (void)c;
        r->errors++;
        r->last_kind = e->kind;
        r->last_err = e->err;
        r->last_fatal = e->fatal;
        snprintf(r->last_message, sizeof(r->last_message), "%s", e->message);
        (void)buf_printf(&r->log, "error %d %s%s%s\n", (int)e->kind, e->reason ? e->reason : "-", getenv("REC_VERBOSE") ? e->message : "",
                         e->fatal ? " fatal" : "");
        HOOK_OUT();
}

static __attribute__((unused)) void on_reconnect(struct podmux_client *c, const struct podmux_reconnect *rc, void *data)
{
        struct rec *r = data;

        HOOK_IN();

        (void)c;
        r->reconnects++;
        if (rc->resume)
                (void)buf_printf(&r->log, "reconnect after %" PRIu64 "\n", rc->resume_after);
        else
                (void)buf_puts(&r->log, "reconnect\n");
        HOOK_OUT();
}

static __attribute__((unused)) void rec_attach(struct rec *r, struct podmux_client *c)
{
        podmux_client_on_pods(c, on_pods);
        podmux_client_on_synced(c, on_synced);
        podmux_client_on_sources_ready(c, on_ready);
        podmux_client_on_plugin(c, on_plugin);
        podmux_client_on_source(c, on_source);
        podmux_client_on_error(c, on_error);
        podmux_client_on_reconnect(c, on_reconnect);
}

/* Takes the log so far (the caller frees it). */
static __attribute__((unused)) char *rec_take(struct rec *r)
{
        char *s = buf_steal(&r->log, NULL);

        ck_assert_ptr_nonnull(s);
        return s;
}

static __attribute__((unused)) void rec_free(struct rec *r)
{
        model_clear(r);
        buf_free(&r->log);
}

/* The cache as "source/uid=json" lines in iteration order. */
static __attribute__((unused)) char *cache_dump(const struct podmux_client *c)
{
        struct buf b = BUF_INIT;

        for (const struct podmux_pod *p = podmux_client_pod_first(c); p; p = podmux_client_pod_next(c, p))
                ck_assert_int_eq(buf_printf(&b, "%s/%s=%s\n", podmux_pod_source(p), podmux_pod_uid(p),
                                            podmux_pod_json(p, NULL)),
                                 0);
        return buf_steal(&b, NULL);
}

/* The records the handlers saw, applied in order, give the cache: the
 * same pods, each with the text the handlers saw or one the same for the
 * resync diff (a restarted daemon's new config.seen, say: the cache takes
 * it, the handlers are not told). */
static __attribute__((unused)) size_t p_len(const struct podmux_pod *p)
{
        size_t n = 0;

        (void)podmux_pod_json(p, &n);
        return n;
}

static __attribute__((unused)) void check_model(const struct rec *r, const struct podmux_client *c)
{
        size_t n = 0;

        for (const struct podmux_pod *p = podmux_client_pod_first(c); p; p = podmux_client_pod_next(c, p)) {
                bool found = false;

                for (size_t i = 0; i < r->n && !found; i++)
                        found = strcmp(r->pods[i].source, podmux_pod_source(p)) == 0 &&
                                strcmp(r->pods[i].uid, podmux_pod_uid(p)) == 0 &&
                                client_pod_text_same(r->pods[i].json, strlen(r->pods[i].json), podmux_pod_json(p, NULL),
                                                     p_len(p)) == 1;
                ck_assert_msg(found, "cache pod %s/%s not what the handlers saw", podmux_pod_source(p),
                              podmux_pod_uid(p));
                n++;
        }
        ck_assert_uint_eq(n, r->n);
        ck_assert_uint_eq(n, podmux_client_pod_count(c));
}

/* ---- indexes ------------------------------------------------------------- */

/* A pod's spec.gen (-1 if none). */
static __attribute__((unused)) int pod_gen_of(const struct podmux_pod *p)
{
        const char *g = strstr(podmux_pod_json(p, NULL), "\"gen\":");

        return g ? (int)strtol(g + 6, NULL, 10) : -1;
}

/* The custom index "gen" of tests/fixtures/informer-scenarios.json: "odd"
 * for an odd spec.gen, and "gen=N" when N < 4 (a pod of gen 4 has none). */
static __attribute__((unused)) int index_gen(const struct podmux_pod *p, struct podmux_index_keys *keys, void *data)
{
        int n = pod_gen_of(p), r = 0;
        char key[32];

        (void)data;
        if (n % 2 == 1)
                r = podmux_index_keys_add(keys, "odd");
        if (r == 0 && n < 4) {
                snprintf(key, sizeof(key), "gen=%d", n);
                r = podmux_index_keys_add(keys, key);
        }
        return r;
}

/* The custom index "seen" of tests/fixtures/informer-scenarios.json: the
 * pod's kubernetes.io/config.seen annotation, if it has one. */
static __attribute__((unused)) int index_seen(const struct podmux_pod *p, struct podmux_index_keys *keys, void *data)
{
        static const char tag[] = "\"kubernetes.io/config.seen\":\"";
        const char *s = strstr(podmux_pod_json(p, NULL), tag), *e;
        char key[64];

        (void)data;
        if (!s)
                return 0;
        s += sizeof(tag) - 1;
        e = strchr(s, '"');
        if (!e || (size_t)(e - s) >= sizeof(key))
                return 0;
        memcpy(key, s, (size_t)(e - s));
        key[e - s] = '\0';
        return podmux_index_keys_add(keys, key);
}

/* Whether key is among p's keys in the index name (the built-ins and gen). */
static __attribute__((unused)) bool pod_has_key(const struct podmux_pod *p, const char *name, const char *key)
{
        int n = pod_gen_of(p);
        char g[32];

        if (strcmp(name, PODMUX_INDEX_NAMESPACE) == 0)
                return strcmp(podmux_pod_namespace(p), key) == 0;
        if (strcmp(name, PODMUX_INDEX_SOURCE) == 0)
                return strcmp(podmux_pod_source(p), key) == 0;
        snprintf(g, sizeof(g), "gen=%d", n);
        return (strcmp(key, "odd") == 0 && n % 2 == 1) || (n < 4 && strcmp(key, g) == 0);
}

/* Every index the tests use gives, for each key, the cache's pods that
 * have it, in the cache's order. */
static __attribute__((unused)) void check_indexes(struct podmux_client *c)
{
        static const char *const q[][2] = {
                {PODMUX_INDEX_NAMESPACE, "default"},
                {PODMUX_INDEX_NAMESPACE, "web"},
                {PODMUX_INDEX_NAMESPACE, "kube-system"},
                {PODMUX_INDEX_SOURCE, "file"},
                {PODMUX_INDEX_SOURCE, "http"},
                {PODMUX_INDEX_SOURCE, "api"},
                {"gen", "odd"},
                {"gen", "gen=1"},
                {"gen", "gen=2"},
                {"gen", "gen=3"},
        };

        for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
                const struct podmux_pod **v;
                size_t n, k = 0;

                ck_assert_int_eq(podmux_client_by_index(c, q[i][0], q[i][1], &v, &n), 0);
                for (const struct podmux_pod *p = podmux_client_pod_first(c); p; p = podmux_client_pod_next(c, p)) {
                        if (!pod_has_key(p, q[i][0], q[i][1]))
                                continue;
                        ck_assert_msg(k < n && v[k] == p, "index %s %s: %s/%s missing or out of order", q[i][0],
                                      q[i][1], podmux_pod_source(p), podmux_pod_uid(p));
                        k++;
                }
                ck_assert_msg(k == n, "index %s %s: %zu pods, the cache has %zu", q[i][0], q[i][1], n, k);
                free(v);
        }
}

/* Whether the source index holds p (by source and UID). */
static __attribute__((unused)) bool in_source_index(struct podmux_client *c, const struct podmux_pod *p)
{
        const struct podmux_pod **v;
        size_t n;
        bool found = false;

        ck_assert_int_eq(podmux_client_by_index(c, PODMUX_INDEX_SOURCE, podmux_pod_source(p), &v, &n), 0);
        for (size_t i = 0; i < n; i++)
                found |= strcmp(podmux_pod_uid(v[i]), podmux_pod_uid(p)) == 0;
        free(v);
        return found;
}

#endif
