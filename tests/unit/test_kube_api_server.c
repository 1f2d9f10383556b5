/*
 * The Kubernetes API server (src/kubeapi/kube_api_server.h) in-process,
 * on a loop of its own, with requests written on a unix socket: the view
 * that missed a record serves 503 until it is resynced, and every
 * allocation of a list, a get and a watch fails in turn (an answer is
 * then right, a 500 Status, or a closed connection; never a wrong body,
 * a leak, or a server that stops answering).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "failalloc.h"
#include "kubeapi/kube_api_server.h"
#include "unit.h"

#define SEQ0 1732431600000000ull

struct world {
        char dir[64];
        char path[128];
        struct loop *loop;
        struct kube_api_server *srv;
};

static void up(struct world *w)
{
        struct kube_api_server_config cfg = {0};
        struct buf err = BUF_INIT;

        snprintf(w->dir, sizeof(w->dir), "/tmp/kubeapi-test-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(w->dir));
        snprintf(w->path, sizeof(w->path), "%s/k.sock", w->dir);
        ck_assert_int_eq(loop_new(&w->loop), 0);
        cfg.socket_path = w->path;
        cfg.socket_gid = (gid_t)-1;
        cfg.base_seq = SEQ0;
        ck_assert_int_eq(kube_api_server_new(w->loop, &cfg, &w->srv, &err), 0);
        buf_free(&err);
}

static void down(struct world *w)
{
        kube_api_server_free(w->srv);
        loop_free(w->loop);
        rmdir(w->dir);
}

static struct pod *mkpod(const char *name, const char *uid)
{
        char text[512];
        struct pod *p = NULL;

        snprintf(text, sizeof(text),
                 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\","
                 "\"uid\":\"%s\",\"labels\":{\"app\":\"web\"}},\"spec\":{\"containers\":[]}}",
                 name, uid);
        ck_assert_int_eq(pod_from_text(text, strlen(text), &p, NULL), 0);
        ck_assert_int_eq(pod_stamp(p, POD_SOURCE_FILE, 1), 0);
        return p;
}

static struct pod_update *rec(enum pod_op op, const char *name, const char *uid)
{
        struct pod_update *u = pod_update_new(op, op == POD_OP_SET ? POD_SOURCE_ALL : POD_SOURCE_FILE);
        struct pod *p = mkpod(name, uid);

        ck_assert_int_eq(pod_update_add(u, p), 0);
        pod_unref(p);
        return u;
}

/* Connects and writes a GET of target.  The socket is the caller's. */
static int send_get(struct world *w, const char *target)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        char req[512];
        int fd = socket(AF_UNIX, SOCK_STREAM, 0), n;

        ck_assert_int_ge(fd, 0);
        memcpy(sa.sun_path, w->path, strlen(w->path) + 1);
        ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", target);
        ck_assert_int_eq(write(fd, req, (size_t)n), n);
        return fd;
}

/* Runs the loop until fd has said all it will (closed), or until want
 * appears in what it said when want is given.  What it said into out.
 * Nothing here asserts (Check allocates to record an assertion, which an
 * armed fault would fail): 0, or -1 when no answer came. */
static int read_answer(struct world *w, int fd, const char *want, char *out, size_t size)
{
        size_t len = 0;

        out[0] = '\0';
        for (int turns = 0; turns < 2000; turns++) {
                struct pollfd pfd = {.fd = fd, .events = POLLIN};

                if (loop_run_once(w->loop, 5000) < 0)
                        return -1;
                if (poll(&pfd, 1, 0) == 1) {
                        ssize_t r = read(fd, out + len, size - 1 - len);

                        if (r <= 0)
                                return 0;
                        len += (size_t)r;
                        out[len] = '\0';
                        if (want && strstr(out, want))
                                return 0;
                }
        }
        return -1;
}

static void get(struct world *w, const char *target, char *out, size_t size)
{
        int fd = send_get(w, target);

        ck_assert_msg(read_answer(w, fd, NULL, out, size) == 0, "%s: no answer; so far: %s", target, out);
        close(fd);
}

START_TEST(test_not_ready_stale_resync)
{
        struct world w;
        struct pod_update *u;
        char out[8192];

        up(&w);
        get(&w, "/api/v1/pods", out, sizeof(out));
        ck_assert_msg(strstr(out, "HTTP/1.1 503") && strstr(out, "Retry-After: 1"), "%s", out);
        get(&w, "/api", out, sizeof(out)); /* discovery at once */
        ck_assert_msg(strstr(out, "HTTP/1.1 200"), "%s", out);
        kube_api_server_set_ready(w.srv, true);
        u = rec(POD_OP_ADD, "a", "u1");
        ck_assert_int_eq(kube_api_server_update(w.srv, u, SEQ0 + 1), 0);
        pod_update_free(u);
        if (failalloc_enabled()) {
                /* A record the view cannot take: stale, 503, and later
                 * records wait for the resync. */
                u = rec(POD_OP_ADD, "b", "u2");
                failalloc_arm(1);
                ck_assert_int_eq(kube_api_server_update(w.srv, u, SEQ0 + 2), -ENOMEM);
                failalloc_arm(0);
                pod_update_free(u);
                ck_assert(kube_api_server_stale(w.srv));
                get(&w, "/api/v1/pods", out, sizeof(out));
                ck_assert_msg(strstr(out, "HTTP/1.1 503") && strstr(out, "rebuilding"), "%s", out);
                u = rec(POD_OP_SET, "b", "u2"); /* the merged state: only b */
                ck_assert_int_eq(kube_api_server_resync(w.srv, u, SEQ0 + 3), 0);
                pod_update_free(u);
                ck_assert(!kube_api_server_stale(w.srv));
                get(&w, "/api/v1/pods", out, sizeof(out));
                ck_assert_msg(strstr(out, "HTTP/1.1 200") && strstr(out, "\"name\":\"b\"") &&
                                      !strstr(out, "\"name\":\"a\""),
                              "%s", out);
        }
        down(&w);
}
END_TEST

/* Every allocation of a request fails in turn.  streamed: the answer is
 * a watch, whose 200 goes out before its events, so it may be cut after
 * it (the client watches again). */
static void sweep(const char *target, const char *want, bool streamed)
{
        long hits = 0;

        if (!failalloc_enabled())
                return;
        failalloc_warm_up();
        for (long n = 1;; n++) {
                struct world w;
                struct pod_update *u;
                char out[16384];
                long live0;
                int fd, r;
                bool failed;

                live0 = failalloc_live();
                up(&w);
                kube_api_server_set_ready(w.srv, true);
                u = rec(POD_OP_ADD, "a", "u1");
                ck_assert_int_eq(kube_api_server_update(w.srv, u, SEQ0 + 1), 0);
                pod_update_free(u);
                fd = send_get(&w, target);
                failalloc_arm(n);
                r = read_answer(&w, fd, want, out, sizeof(out));
                failed = failalloc_failed();
                failalloc_arm(0);
                ck_assert_msg(r == 0, "%s %ld: no answer; so far: %s", target, n, out);
                close(fd);
                if (failed) {
                        hits++;
                        /* Right, a 500, or cut: never another answer. */
                        ck_assert_msg(!out[0] || strstr(out, want) || strstr(out, "HTTP/1.1 500") ||
                                              (streamed && strstr(out, "HTTP/1.1 200")),
                                      "%s %ld: %s", target, n, out);
                        /* The server answers on (read up to want: a
                         * watch would hold the connection until its
                         * timeout). */
                        fd = send_get(&w, target);
                        r = read_answer(&w, fd, want, out, sizeof(out));
                        close(fd);
                        ck_assert_msg(r == 0 && strstr(out, want), "%s %ld, then: %s", target, n, out);
                } else {
                        ck_assert_msg(strstr(out, want), "%s: %s", target, out);
                }
                down(&w);
                ck_assert_msg(failalloc_live() == live0, "%s %ld: %ld block(s) leaked", target, n,
                              failalloc_live() - live0);
                if (!failed)
                        break;
        }
        ck_assert_int_gt(hits, 3);
}

START_TEST(test_list_alloc_sweep)
{
        sweep("/api/v1/pods?labelSelector=app%3Dweb&limit=5", "\"items\":[{", false);
}
END_TEST

START_TEST(test_get_alloc_sweep)
{
        sweep("/api/v1/namespaces/ns/pods/a", "\"name\":\"a\"", false);
}
END_TEST

START_TEST(test_watch_alloc_sweep)
{
#define WATCH_LIST "watch=1&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
        sweep("/api/v1/pods?" WATCH_LIST "&timeoutSeconds=1", "initial-events-end", true);
        /* One pod's: its name made a field selector's value. */
        sweep("/api/v1/namespaces/ns/pods/a?" WATCH_LIST "&timeoutSeconds=1", "initial-events-end", true);
        /* From "": the state as ADDED events. */
        sweep("/api/v1/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=1", "\"type\":\"ADDED\"", true);
#undef WATCH_LIST
}
END_TEST

UNIT_MAIN(test_not_ready_stale_resync, test_list_alloc_sweep, test_get_alloc_sweep, test_watch_alloc_sweep)
