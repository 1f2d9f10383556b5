/*
 * bench_client — libpodmux-client's decode-and-apply rate next to the raw
 * line-read rate of the same stream, and the daemon's fan-out rate to 50
 * consumers that the library must keep up with.  Prints figures; asserts
 * nothing.  Run by scripts/bench (its "client" line).
 *
 * Usage: bench_client PODS MESSAGES CONSUMERS [SET_PODS [DIR]]
 *
 * CONSUMERS 0 leaves out 1 and 2: the one-pod stream is still read
 * through the stream server by one reader, untimed.  scripts/bench
 * repeats the client figures (3 to 5) that way, without paying for the
 * fan-out each time.
 * 1. fan-out: the daemon's stream server (in process, on its own loop)
 *    with 1, 10 and CONSUMERS raw readers (one thread each, counting
 *    lines); MESSAGES "pods" messages of one ~1.3 KB pod each (ADD of
 *    PODS pods, then UPDATEs, all built before the clock starts), one
 *    broadcast per loop turn as the merger does: the time until every
 *    reader has them all, and the loop thread's CPU time per delivered
 *    message.  Next to each, in the same run, the same lines written
 *    by one thread to as many readers with one write() per message per
 *    reader (the reference).  The widest run's reader 0 keeps the bytes.
 *    At the widest, both again paced (MESSAGES / 10, each read by every
 *    reader before the next is sent: the writer sleeps between them).
 * 2. raw: those bytes written through a unix socket by a thread and read
 *    by a loop that only finds the newlines.
 * 3. library: the same bytes to libpodmux-client, from accept to the last
 *    message applied to its cache and handed to the handler.
 * 4. set: hello, synced (nothing yet), then SETS live SETs of SET_PODS
 *    (default 5,000) pods, each a new version of every pod, stamped with
 *    config.seen as the daemon sends them: the time per SET applied and
 *    handed on; then lookups by namespace and name in the cache they leave.
 * 5. restart: a full state of SET_PODS pods, the daemon's ShuttingDown,
 *    and on the next connection the same pods with every config.seen new:
 *    the time from the first synced to the second (reconnection without
 *    backoff, the state read, compared with the cache: nothing changed).
 * With DIR, the streams are written there for scripts/bench to run the
 * Python module and the Go package on the same bytes: one-pod.stream
 * (3), set.stream (4), restart-1.stream and restart-2.stream (5, the two
 * connections).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "util/buf.h"
#include "podmux/client.h"
#include "util/loop.h"
#include "core/pod.h"
#include "stream/stream_server.h"
#include "../../src/client/client_msg.h"

/* A pod of about 1.3 KB as the daemon sends it; the SET stream's pods
 * are named pod-NNNNN in namespaces of 100 (so the SET comes sorted). */
static void bench_pod_text(char *text, size_t size, int i, int variant, bool in_set)
{
        char name[32], ns[32];

        if (in_set) {
                snprintf(name, sizeof(name), "pod-%05d", i);
                snprintf(ns, sizeof(ns), "ns-%02d", i / 100);
        } else {
                snprintf(name, sizeof(name), "pod-%d", i);
                snprintf(ns, sizeof(ns), "default");
        }
        snprintf(text, size,
                 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s-node1\","
                 "\"namespace\":\"%s\",\"uid\":\"%032d\",\"labels\":{\"app\":\"web-%d\",\"tier\":\"frontend\"},"
                 "\"annotations\":{\"kubernetes.io/config.source\":\"file\",\"kubernetes.io/config.hash\":\"%032d\"}},"
                 "\"spec\":{\"nodeName\":\"node1\",\"restartPolicy\":\"Always\",\"dnsPolicy\":\"ClusterFirst\","
                 "\"terminationGracePeriodSeconds\":30,\"schedulerName\":\"default-scheduler\","
                 "\"tolerations\":[{\"operator\":\"Exists\",\"effect\":\"NoExecute\"}],"
                 "\"containers\":[{\"name\":\"app\",\"image\":\"registry.example/app:v%d\","
                 "\"args\":[\"--port=8080\",\"--log-level=info\"],\"ports\":[{\"containerPort\":8080,\"protocol\":"
                 "\"TCP\"}],"
                 "\"env\":[{\"name\":\"MODE\",\"value\":\"prod\"},{\"name\":\"REGION\",\"value\":\"eu-1\"}],"
                 "\"resources\":{\"requests\":{\"cpu\":\"100m\",\"memory\":\"128Mi\"},\"limits\":{\"memory\":\"256Mi\"}"
                 "},"
                 "\"livenessProbe\":{\"httpGet\":{\"path\":\"/healthz\",\"port\":8080},\"periodSeconds\":10},"
                 "\"volumeMounts\":[{\"name\":\"data\",\"mountPath\":\"/data\"}],"
                 "\"terminationMessagePath\":\"/dev/termination-log\",\"terminationMessagePolicy\":\"File\","
                 "\"imagePullPolicy\":\"IfNotPresent\"},"
                 "{\"name\":\"sidecar\",\"image\":\"registry.example/"
                 "proxy:1.2\",\"ports\":[{\"containerPort\":9090,\"protocol\":\"TCP\"}],"
                 "\"terminationMessagePath\":\"/dev/termination-log\",\"terminationMessagePolicy\":\"File\","
                 "\"imagePullPolicy\":\"IfNotPresent\"}],"
                 "\"volumes\":[{\"name\":\"data\",\"hostPath\":{\"path\":\"/var/lib/"
                 "app-%d\",\"type\":\"DirectoryOrCreate\"}}]},"
                 "\"status\":{\"phase\":\"Pending\"}}",
                 name, ns, i, i, i, variant, i);
}

static struct pod *make_pod(int i, int variant)
{
        char text[4096];
        struct pod *p = NULL;
        struct buf err = BUF_INIT;

        bench_pod_text(text, sizeof(text), i, variant, false);
        if (pod_from_text(text, strlen(text), &p, &err) < 0) {
                fprintf(stderr, "bench_client: %s\n", err.data);
                exit(1);
        }
        buf_free(&err);
        return p;
}

/* ---- 1. fan-out ------------------------------------------------------------ */

struct reader {
        pthread_t th;
        int fd;
        long want; /* lines */
        bool keep;
        int done;   /* set by the thread, read with __atomic */
        long lines; /* so far, set by the thread, read with __atomic */
        struct buf bytes;
};

static void *reader_main(void *arg)
{
        struct reader *r = arg;
        char chunk[65536];
        long lines = 0;

        while (lines < r->want) {
                ssize_t n = read(r->fd, chunk, sizeof(chunk));

                if (n <= 0)
                        break;
                for (ssize_t i = 0; i < n; i++)
                        lines += chunk[i] == '\n';
                __atomic_store_n(&r->lines, lines, __ATOMIC_RELEASE);
                if (r->keep && buf_append(&r->bytes, chunk, (size_t)n) < 0)
                        exit(1);
        }
        __atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
        return NULL;
}

static int no_state(void *data, struct pod_update ***ret, size_t *ret_n)
{
        *ret = NULL;
        *ret_n = 0;
        return 0;
}

static int connect_to(const char *path)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        memcpy(sa.sun_path, path, strlen(path) + 1);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                perror("bench_client: connect");
                exit(1);
        }
        return fd;
}

/* Thread CPU time of the caller, microseconds: the daemon's share of a
 * fan-out is what its loop thread spends (the readers run on others). */
static uint64_t thread_cpu_usec(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

struct fan_result {
        double wall_usec; /* from the first message to every reader done */
        double cpu_usec;  /* of the writing thread, over the same span */
};

/* The messages of a fan-out, built before any is timed. */
static struct pod_update **fan_updates(int n_pods, long n_msgs)
{
        struct pod_update **ups = calloc((size_t)n_msgs, sizeof(*ups));
        struct pod **pods = calloc((size_t)n_pods, sizeof(*pods));

        if (!ups || !pods)
                exit(1);
        for (int i = 0; i < n_pods; i++)
                pods[i] = make_pod(i, 0);
        for (long m = 0; m < n_msgs; m++) {
                int i = (int)(m % n_pods);
                struct pod_update *u = pod_update_new(m < n_pods ? POD_OP_ADD : POD_OP_UPDATE, "file");
                struct pod *p = m < n_pods ? pod_ref(pods[i]) : make_pod(i, (int)(m / n_pods));

                if (!u || pod_update_add(u, p) < 0)
                        exit(1);
                pod_unref(p);
                ups[m] = u;
        }
        for (int i = 0; i < n_pods; i++)
                pod_unref(pods[i]);
        free(pods);
        return ups;
}

static void start_readers(struct reader *rd, int n_cons)
{
        for (int i = 0; i < n_cons; i++)
                pthread_create(&rd[i].th, NULL, reader_main, &rd[i]);
}

static bool readers_done(struct reader *rd, int n_cons)
{
        for (int i = 0; i < n_cons; i++)
                if (!__atomic_load_n(&rd[i].done, __ATOMIC_ACQUIRE))
                        return false;
        return true;
}

/* Whether every reader has read lines lines. */
static bool readers_at(struct reader *rd, int n_cons, long lines)
{
        for (int i = 0; i < n_cons; i++)
                if (__atomic_load_n(&rd[i].lines, __ATOMIC_ACQUIRE) < lines)
                        return false;
        return true;
}

static void join_readers(struct reader *rd, int n_cons)
{
        for (int i = 0; i < n_cons; i++) {
                pthread_join(rd[i].th, NULL);
                close(rd[i].fd);
        }
}

/* The stream server with n_cons raw readers: ups broadcast one per loop
 * turn.  Reader 0's bytes go to ret_bytes when it is not NULL. */
static struct fan_result fan_out(const char *dir, struct pod_update **ups, long n_msgs, int n_cons,
                                 struct buf *ret_bytes, bool paced)
{
        struct stream_server_config cfg = {0};
        struct stream_server *srv = NULL;
        struct loop *loop = NULL;
        struct reader *rd = calloc((size_t)n_cons, sizeof(*rd));
        struct buf err = BUF_INIT;
        struct fan_result res;
        char path[256];
        uint64_t t0, c0;

        snprintf(path, sizeof(path), "%s/fanout.sock", dir);
        for (int i = 0; rd && i < n_cons; i++)
                buf_init(&rd[i].bytes);
        cfg.socket_path = path;
        cfg.node_name = "node1";
        cfg.state_fn = no_state;
        cfg.max_backlog = 1u << 30;
        cfg.history = 16;
        if (!rd || loop_new(&loop) < 0 || stream_server_new(loop, &cfg, &srv, &err) < 0) {
                fprintf(stderr, "bench_client: %s\n", err.len ? err.data : "setup failed");
                exit(1);
        }
        for (int i = 0; i < n_cons; i++) {
                rd[i].fd = connect_to(path);
                rd[i].want = n_msgs + 2; /* hello, synced */
                rd[i].keep = i == 0 && ret_bytes;
                if (write(rd[i].fd, "{}\n", 3) != 3)
                        exit(1);
        }
        while (stream_server_consumers(srv) < (size_t)n_cons)
                loop_run_once(loop, 1000);
        for (int k = 0; k < 20; k++) /* each gets its hello and synced */
                loop_run_once(loop, 1000);
        start_readers(rd, n_cons);
        t0 = mono_usec();
        c0 = thread_cpu_usec();
        for (long m = 0; m < n_msgs; m++) {
                stream_server_broadcast(srv, ups[m]);
                loop_run_once(loop, 0); /* one merge per loop turn */
                while (paced && !readers_at(rd, n_cons, m + 3))
                        loop_run_once(loop, 1000);
        }
        while (!readers_done(rd, n_cons))
                loop_run_once(loop, 1000);
        res.cpu_usec = (double)(thread_cpu_usec() - c0);
        res.wall_usec = (double)(mono_usec() - t0);
        join_readers(rd, n_cons);
        if (ret_bytes)
                *ret_bytes = rd[0].bytes;
        stream_server_free(srv);
        loop_free(loop);
        free(rd);
        return res;
}

/* The reference, in the same run: the lines of bytes (after hello and
 * synced) written to n_cons readers the plain way, one blocking write()
 * per message per reader, as a server without batching or sharing would
 * (and as podmux did before messages were batched per wake-up). */
static struct fan_result fan_raw(const struct buf *bytes, long n_msgs, int n_cons, bool paced)
{
        struct reader *rd = calloc((size_t)n_cons, sizeof(*rd));
        int *wfd = calloc((size_t)n_cons, sizeof(*wfd));
        const char *at = bytes->data, *end = bytes->data + bytes->len;
        struct fan_result res;
        uint64_t t0, c0;

        if (!rd || !wfd)
                exit(1);
        for (int k = 0; k < 2; k++) /* hello, synced */
                at = memchr(at, '\n', (size_t)(end - at)) + 1;
        for (int i = 0; i < n_cons; i++) {
                int sv[2];

                if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                        exit(1);
                rd[i].fd = sv[0];
                wfd[i] = sv[1];
                rd[i].want = n_msgs;
        }
        start_readers(rd, n_cons);
        t0 = mono_usec();
        c0 = thread_cpu_usec();
        for (long m = 0; m < n_msgs && at < end; m++) {
                const char *nl = memchr(at, '\n', (size_t)(end - at));
                size_t len = (size_t)(nl - at) + 1;

                for (int i = 0; i < n_cons; i++)
                        if (write(wfd[i], at, len) != (ssize_t)len)
                                exit(1);
                at = nl + 1;
                while (paced && !readers_at(rd, n_cons, m + 1))
                        usleep(50);
        }
        while (!readers_done(rd, n_cons))
                usleep(100);
        res.cpu_usec = (double)(thread_cpu_usec() - c0);
        res.wall_usec = (double)(mono_usec() - t0);
        join_readers(rd, n_cons);
        for (int i = 0; i < n_cons; i++)
                close(wfd[i]);
        free(rd);
        free(wfd);
        return res;
}

/* Fan-out to 1, 10 and max_cons consumers, each next to the raw write
 * loop of the same run; the bytes of the widest go to ret_bytes. */
static struct fan_result fan_lines(const char *dir, int n_pods, long n_msgs, int max_cons, struct buf *ret_bytes)
{
        struct pod_update **ups = fan_updates(n_pods, n_msgs);
        int widths[3] = {1, 10, max_cons};
        struct fan_result fan = {0};

        for (int k = 0; k < 3; k++) {
                int n = widths[k];
                struct buf bytes = BUF_INIT;
                struct fan_result raw;
                double deliveries = (double)n_msgs * n;

                if (k > 0 && n <= widths[k - 1])
                        continue;
                fan = fan_out(dir, ups, n_msgs, n, &bytes, false);
                raw = fan_raw(&bytes, n_msgs, n, false);
                printf("daemon_fanout consumers=%d msgs_per_s=%.0f deliveries_per_s=%.0f cpu_us_per_delivery=%.3f\n", n,
                       n_msgs / (fan.wall_usec / 1e6), deliveries / (fan.wall_usec / 1e6), fan.cpu_usec / deliveries);
                printf("raw_write_fanout consumers=%d msgs_per_s=%.0f deliveries_per_s=%.0f cpu_us_per_delivery=%.3f\n",
                       n, n_msgs / (raw.wall_usec / 1e6), deliveries / (raw.wall_usec / 1e6),
                       raw.cpu_usec / deliveries);
                printf("ratio fanout_cpu daemon/raw_write consumers=%d: %.2f\n", n, fan.cpu_usec / raw.cpu_usec);
                if (n == max_cons) {
                        /* Each message waited for by every reader before
                         * the next: the daemon sleeps between them. */
                        long paced_msgs = n_msgs / 10;
                        struct fan_result p = fan_out(dir, ups, paced_msgs, n, NULL, true);
                        struct fan_result pr = fan_raw(&bytes, paced_msgs, n, true);

                        printf("daemon_fanout_paced consumers=%d msgs=%ld cpu_us_per_delivery=%.3f\n", n, paced_msgs,
                               p.cpu_usec / ((double)paced_msgs * n));
                        printf("raw_write_fanout_paced consumers=%d msgs=%ld cpu_us_per_delivery=%.3f\n", n, paced_msgs,
                               pr.cpu_usec / ((double)paced_msgs * n));
                }
                if (n == max_cons)
                        *ret_bytes = bytes;
                else
                        buf_free(&bytes);
        }
        for (long m = 0; m < n_msgs; m++)
                pod_update_free(ups[m]);
        free(ups);
        return fan;
}

/* ---- 2 and 3: the same bytes, raw and through the library -------------------- */

/* Serves bytes, then more on the next connection if there is one. */
struct writer {
        int lfd;
        const struct buf *bytes, *next;
};

static void serve_one(int lfd, const struct buf *bytes)
{
        int fd = accept(lfd, NULL, NULL);
        char first[64];
        size_t off = 0;

        if (fd < 0)
                return;
        (void)read(fd, first, sizeof(first)); /* the client's first line */
        while (off < bytes->len) {
                ssize_t n = write(fd, bytes->data + off, bytes->len - off);

                if (n <= 0)
                        break;
                off += (size_t)n;
        }
        close(fd);
}

static void *writer_main(void *arg)
{
        struct writer *w = arg;

        serve_one(w->lfd, w->bytes);
        if (w->next)
                serve_one(w->lfd, w->next);
        return NULL;
}

static int listen_at(const char *path)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        unlink(path);
        memcpy(sa.sun_path, path, strlen(path) + 1);
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 4) < 0) {
                perror("bench_client: listen");
                exit(1);
        }
        return fd;
}

static double raw_read(const char *path, const struct buf *bytes, long *ret_lines)
{
        struct writer w = {.lfd = listen_at(path), .bytes = bytes};
        pthread_t th;
        char chunk[262144];
        long lines = 0;
        uint64_t t0;
        int fd;

        pthread_create(&th, NULL, writer_main, &w);
        fd = connect_to(path);
        t0 = mono_usec();
        if (write(fd, "{}\n", 3) != 3)
                exit(1);
        for (;;) {
                ssize_t n = read(fd, chunk, sizeof(chunk));
                const char *at = chunk, *end = chunk + (n > 0 ? n : 0);

                if (n <= 0)
                        break;
                while ((at = memchr(at, '\n', (size_t)(end - at)))) {
                        lines++;
                        at++;
                }
        }
        *ret_lines = lines;
        t0 = mono_usec() - t0;
        pthread_join(th, NULL);
        close(fd);
        close(w.lfd);
        return (double)t0;
}

struct count {
        long msgs, pods;
        long want;
};

static void on_pods(struct podmux_client *c, const struct podmux_update *u, void *data)
{
        struct count *n = data;

        n->msgs++;
        n->pods += (long)u->n_pods;
        if (n->msgs >= n->want)
                podmux_client_stop(c);
}

static double library(const char *path, const struct buf *bytes, long n_msgs, struct count *n)
{
        struct writer w = {.lfd = listen_at(path), .bytes = bytes};
        struct podmux_client *c = NULL;
        pthread_t th;
        uint64_t t0;

        pthread_create(&th, NULL, writer_main, &w);
        n->want = n_msgs;
        if (podmux_client_new(path, n, &c) < 0)
                exit(1);
        podmux_client_on_pods(c, on_pods);
        t0 = mono_usec();
        (void)podmux_client_run(c, 600 * 1000);
        t0 = mono_usec() - t0;
        pthread_join(th, NULL);
        printf("client_cache pods=%zu\n", podmux_client_pod_count(c));
        podmux_client_free(c);
        close(w.lfd);
        return (double)t0;
}

/* ---- 4 and 5: SETs of many pods, lookups, and a restart's resync ------------- */

/* A SET of n pods (version variant, stamped seen_usec and on) to out. */
static void set_message(struct buf *out, uint64_t seq, int n, int variant, uint64_t seen_usec)
{
        char text[4096];
        struct buf err = BUF_INIT;

        if (buf_printf(out, "{\"type\":\"pods\",\"seq\":%" PRIu64 ",\"op\":\"SET\",\"source\":\"file\",\"pods\":[",
                       seq) < 0)
                exit(1);
        for (int i = 0; i < n; i++) {
                struct pod *p = NULL;

                bench_pod_text(text, sizeof(text), i, variant, true);
                if (pod_from_text(text, strlen(text), &p, &err) < 0 ||
                    (i && buf_putc(out, ',') < 0) || pod_stamp(p, "file", seen_usec + (uint64_t)i) < 0 ||
                    pod_render(p, out) < 0) {
                        fprintf(stderr, "bench_client: %s\n", err.len ? err.data : "out of memory");
                        exit(1);
                }
                pod_unref(p);
        }
        if (buf_puts(out, "]}\n") < 0)
                exit(1);
        buf_free(&err);
}

/* hello, synced (an empty full state), then n_sets live SETs of n pods
 * each (each SET a new version of every pod). */
static void set_stream(int n, int n_sets, struct buf *out)
{
        if (buf_puts(out, "{\"type\":\"hello\",\"protocol\":1,\"mode\":\"snapshot\",\"node\":\"node1\",\"seq\":10}\n"
                          "{\"type\":\"synced\",\"seq\":11,\"resumed\":false}\n") < 0)
                exit(1);
        for (int k = 0; k < n_sets; k++)
                set_message(out, 12 + (uint64_t)k, n, k, 1700000000000000ull);
}

/* hello, a full state of n pods stamped seen_usec, synced; with bye, the
 * daemon's ShuttingDown. */
static void restart_stream(int n, uint64_t seen_usec, bool bye, struct buf *out)
{
        if (buf_puts(out, "{\"type\":\"hello\",\"protocol\":1,\"mode\":\"snapshot\",\"node\":\"node1\",\"seq\":10}\n") <
            0)
                exit(1);
        set_message(out, 12, n, 0, seen_usec);
        if (buf_puts(out, "{\"type\":\"synced\",\"seq\":13,\"resumed\":false}\n") < 0 ||
            (bye && buf_puts(out, "{\"type\":\"error\",\"seq\":14,\"reason\":\"ShuttingDown\",\"message\":\"\"}\n") < 0))
                exit(1);
}

/* n lookups in the built-in namespace index of c (ns each): the pods of
 * a namespace (nss[i] for a pod i) sorted into the cache's order, as the
 * Python and Go benchmarks do.  The first builds the index (not timed). */
static double index_lookups(struct podmux_client *c, char (*nss)[32], int n_pods, long n)
{
        const struct podmux_pod **v;
        size_t k_found, total = 0;
        uint64_t t0;

        if (podmux_client_by_index(c, PODMUX_INDEX_NAMESPACE, nss[0], &v, &k_found) < 0)
                exit(1);
        free(v);
        t0 = mono_usec();
        for (long k = 0; k < n; k++) {
                if (podmux_client_by_index(c, PODMUX_INDEX_NAMESPACE, nss[(k * 7919) % n_pods], &v, &k_found) < 0)
                        exit(1);
                total += k_found;
                free(v);
        }
        if (total == 0)
                exit(1);
        return (double)(mono_usec() - t0) * 1000.0 / (double)n;
}

/* The SETs through the library (ms each, from accept to the last one
 * applied), then n_lookups lookups by namespace and name in the cache
 * they leave (ns each), and n_lookups / 100 in the namespace index. */
static void set_apply(const char *path, const struct buf *bytes, int n_pods, int n_sets, long n_lookups,
                      double *ret_set_ms, double *ret_lookup_ns, double *ret_index_ns)
{
        struct writer w = {.lfd = listen_at(path), .bytes = bytes};
        struct podmux_client *c = NULL;
        struct count n = {.want = n_sets};
        char(*names)[32] = calloc((size_t)n_pods, sizeof(*names));
        char(*nss)[32] = calloc((size_t)n_pods, sizeof(*nss));
        long found = 0;
        pthread_t th;
        uint64_t t0;

        if (!names || !nss || podmux_client_new(path, &n, &c) < 0)
                exit(1);
        pthread_create(&th, NULL, writer_main, &w);
        podmux_client_on_pods(c, on_pods);
        t0 = mono_usec();
        (void)podmux_client_run(c, 600 * 1000);
        *ret_set_ms = (double)(mono_usec() - t0) / 1000.0 / n_sets;
        pthread_join(th, NULL);
        if (n.msgs != n_sets || podmux_client_pod_count(c) != (size_t)n_pods) {
                fprintf(stderr, "bench_client: %ld SETs, %zu pods after them\n", n.msgs, podmux_client_pod_count(c));
                exit(1);
        }
        for (int i = 0; i < n_pods; i++) {
                snprintf(names[i], sizeof(names[i]), "pod-%05d-node1", i);
                snprintf(nss[i], sizeof(nss[i]), "ns-%02d", i / 100);
        }
        t0 = mono_usec();
        for (long k = 0; k < n_lookups; k++) {
                int i = (int)((k * 7919) % n_pods);

                found += podmux_client_pod_by_name(c, nss[i], names[i]) != NULL;
        }
        *ret_lookup_ns = (double)(mono_usec() - t0) * 1000.0 / (double)n_lookups;
        if (found != n_lookups)
                exit(1);
        *ret_index_ns = index_lookups(c, nss, n_pods, n_lookups / 100);
        podmux_client_free(c);
        close(w.lfd);
        unlink(path);
        free(names);
        free(nss);
}

struct timing {
        int synced;
        long records;
        uint64_t t_synced1;
};

static void time_pods(struct podmux_client *c, const struct podmux_update *u, void *data)
{
        struct timing *tm = data;

        (void)c;
        (void)u;
        tm->records++;
}

static void time_synced(struct podmux_client *c, bool resumed, void *data)
{
        struct timing *tm = data;

        (void)resumed;
        if (++tm->synced == 1)
                tm->t_synced1 = mono_usec();
        else
                podmux_client_stop(c);
}

/* A client on the two connections' streams, reconnecting without
 * backoff: the microseconds from its first synced to its second. */
static double restart_resync(const char *path, const struct buf *first, const struct buf *next, struct timing *tm)
{
        struct writer w = {.lfd = listen_at(path), .bytes = first, .next = next};
        struct podmux_client *c = NULL;
        pthread_t th;
        uint64_t t;

        pthread_create(&th, NULL, writer_main, &w);
        if (podmux_client_new(path, tm, &c) < 0)
                exit(1);
        client_set_backoff(c, 0, 0);
        podmux_client_on_pods(c, time_pods);
        podmux_client_on_synced(c, time_synced);
        (void)podmux_client_run(c, 600 * 1000);
        t = mono_usec() - tm->t_synced1;
        pthread_join(th, NULL);
        podmux_client_free(c);
        close(w.lfd);
        unlink(path);
        return (double)t;
}

static void save(const char *dir, const char *name, const struct buf *b)
{
        char path[512];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "wb");
        if (!f || fwrite(b->data, 1, b->len, f) != b->len || fclose(f) != 0) {
                perror(path);
                exit(1);
        }
}

int main(int argc, char **argv)
{
        int n_pods = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 1000;
        long n_msgs = argc > 2 ? strtol(argv[2], NULL, 10) : 20000;
        int n_cons = argc > 3 ? (int)strtol(argv[3], NULL, 10) : 50;
        int n_set = argc > 4 ? (int)strtol(argv[4], NULL, 10) : 5000, n_sets = 10;
        const char *save_dir = argc > 5 ? argv[5] : NULL;
        struct buf set = BUF_INIT, r1 = BUF_INIT, r2 = BUF_INIT;
        struct timing tm = {0};
        double set_ms, lookup_ns, index_ns, restart_us;
        char dir[] = "/tmp/podmux-bench-client-XXXXXX", path[256];
        struct buf bytes = BUF_INIT;
        struct count n = {0};
        long lines = 0;
        double fan = 0, raw = 0, lib;

        if (!mkdtemp(dir))
                return 1;
        if (n_cons > 0) {
                fan = fan_lines(dir, n_pods, n_msgs, n_cons, &bytes).wall_usec;
                snprintf(path, sizeof(path), "%s/raw.sock", dir);
                raw = raw_read(path, &bytes, &lines);
                unlink(path);
        } else {
                struct pod_update **ups = fan_updates(n_pods, n_msgs);

                fan_out(dir, ups, n_msgs, 1, &bytes, false);
                for (long m = 0; m < n_msgs; m++)
                        pod_update_free(ups[m]);
                free(ups);
        }
        snprintf(path, sizeof(path), "%s/lib.sock", dir);
        lib = library(path, &bytes, n_msgs, &n);
        unlink(path);
        printf("stream messages=%ld bytes=%zu bytes_per_message=%.0f\n", n_msgs, bytes.len,
               (double)bytes.len / (double)n_msgs);
        if (n_cons > 0)
                printf("raw_line_read msgs_per_s=%.0f lines=%ld\n", lines / (raw / 1e6), lines);
        printf("library_decode_apply msgs_per_s=%.0f us_per_msg=%.2f ns_per_pod=%.0f applied=%ld\n",
               n.msgs / (lib / 1e6), lib / (double)(n.msgs ? n.msgs : 1), lib * 1000.0 / (double)(n.pods ? n.pods : 1),
               n.msgs);
        if (n_cons > 0)
                printf("ratio library/fanout=%.2f library/raw=%.3f\n", (n.msgs / lib) / (n_msgs / fan),
                       (n.msgs / lib) / (lines / raw));
        set_stream(n_set, n_sets, &set);
        snprintf(path, sizeof(path), "%s/set.sock", dir);
        set_apply(path, &set, n_set, n_sets, 1000000, &set_ms, &lookup_ns, &index_ns);
        printf("library_set_apply pods=%d sets=%d bytes_per_set=%zu ms_per_set=%.2f\n", n_set, n_sets,
               set.len / (size_t)n_sets, set_ms);
        printf("library_lookup_by_name pods=%d ns_per_lookup=%.0f\n", n_set, lookup_ns);
        printf("library_lookup_by_index pods=%d namespaces=%d ns_per_lookup=%.0f\n", n_set, (n_set + 99) / 100,
               index_ns);
        restart_stream(n_set, 1700000000000000ull, true, &r1);
        restart_stream(n_set, 1800000000000000ull, false, &r2);
        restart_us = restart_resync(path, &r1, &r2, &tm);
        printf("library_restart_resync pods=%d ms=%.2f us_per_pod=%.2f records=%ld\n", n_set, restart_us / 1000.0,
               restart_us / n_set, tm.records);
        /* For the other clients' benchmarks (scripts/bench): the same bytes. */
        if (save_dir) {
                save(save_dir, "one-pod.stream", &bytes);
                save(save_dir, "set.stream", &set);
                save(save_dir, "restart-1.stream", &r1);
                save(save_dir, "restart-2.stream", &r2);
        }
        buf_free(&set);
        buf_free(&r1);
        buf_free(&r2);
        buf_free(&bytes);
        rmdir(dir);
        return 0;
}
