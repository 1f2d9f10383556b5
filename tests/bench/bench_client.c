/*
 * bench_client — libpodmux-client's decode-and-apply rate next to the raw
 * line-read rate of the same stream, and the daemon's fan-out rate to 50
 * consumers that the library must keep up with.  Prints figures; asserts
 * nothing.  Run by scripts/bench (its "client" line).
 *
 * Usage: bench_client PODS MESSAGES CONSUMERS [DIR]
 *
 * 1. fan-out: the daemon's stream server (in process, on its own loop)
 *    with CONSUMERS raw readers (one thread each, counting lines);
 *    MESSAGES "pods" messages of one ~1.3 KB pod each (ADD of PODS pods,
 *    then UPDATEs), one broadcast per loop turn as the merger does: the
 *    time until every reader has them all.  Reader 0 keeps the bytes.
 * 2. raw: those bytes written through a unix socket by a thread and read
 *    by a loop that only finds the newlines.
 * 3. library: the same bytes to libpodmux-client, from accept to the last
 *    message applied to its cache and handed to the handler.
 * 4. a SET of 5,000 pods applied (10 of them live after an empty state),
 *    and a lookup by namespace and name in the cache they leave.
 * With DIR, the streams of 3 and 4 are written there (onepod.stream,
 * set.stream) for the Go package's benchmark to read the same bytes.
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
#include <unistd.h>

#include "podmux/buf.h"
#include "podmux/client.h"
#include "podmux/loop.h"
#include "podmux/pod.h"
#include "podmux/stream_server.h"

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
        int done; /* set by the thread, read with __atomic */
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

static double fan_out(const char *dir, int n_pods, long n_msgs, int n_cons, struct buf *ret_bytes)
{
        struct stream_server_config cfg = {0};
        struct stream_server *srv = NULL;
        struct loop *loop = NULL;
        struct reader *rd = calloc((size_t)n_cons, sizeof(*rd));
        struct pod **pods = calloc((size_t)n_pods, sizeof(*pods));
        struct buf err = BUF_INIT;
        char path[256];
        uint64_t t0, t1;

        snprintf(path, sizeof(path), "%s/fanout.sock", dir);
        for (int i = 0; rd && i < n_cons; i++)
                buf_init(&rd[i].bytes);
        cfg.socket_path = path;
        cfg.node_name = "node1";
        cfg.state_fn = no_state;
        cfg.max_backlog = 1u << 30;
        cfg.history = 16;
        if (!rd || !pods || loop_new(&loop) < 0 || stream_server_new(loop, &cfg, &srv, &err) < 0) {
                fprintf(stderr, "bench_client: %s\n", err.len ? err.data : "setup failed");
                exit(1);
        }
        for (int i = 0; i < n_pods; i++)
                pods[i] = make_pod(i, 0);
        for (int i = 0; i < n_cons; i++) {
                rd[i].fd = connect_to(path);
                rd[i].want = n_msgs + 2; /* hello, synced */
                rd[i].keep = i == 0;
                if (write(rd[i].fd, "{}\n", 3) != 3)
                        exit(1);
        }
        while (stream_server_consumers(srv) < (size_t)n_cons)
                loop_run_once(loop, 1000);
        for (int k = 0; k < 20; k++) /* each gets its hello and synced */
                loop_run_once(loop, 1000);
        for (int i = 0; i < n_cons; i++)
                pthread_create(&rd[i].th, NULL, reader_main, &rd[i]);
        t0 = mono_usec();
        for (long m = 0; m < n_msgs; m++) {
                int i = (int)(m % n_pods);
                struct pod_update *u = pod_update_new(m < n_pods ? POD_OP_ADD : POD_OP_UPDATE, "file");
                struct pod *p = m < n_pods ? pod_ref(pods[i]) : make_pod(i, (int)(m / n_pods));

                pod_update_add(u, p);
                pod_unref(p);
                stream_server_broadcast(srv, u);
                pod_update_free(u);
                loop_run_once(loop, 0); /* one merge per loop turn */
        }
        for (;;) {
                bool done = true;

                for (int i = 0; i < n_cons; i++)
                        done = done && __atomic_load_n(&rd[i].done, __ATOMIC_ACQUIRE);
                if (done)
                        break;
                loop_run_once(loop, 1000);
        }
        t1 = mono_usec();
        for (int i = 0; i < n_cons; i++)
                pthread_join(rd[i].th, NULL);
        *ret_bytes = rd[0].bytes;
        for (int i = 0; i < n_cons; i++)
                close(rd[i].fd);
        for (int i = 0; i < n_pods; i++)
                pod_unref(pods[i]);
        stream_server_free(srv);
        loop_free(loop);
        free(rd);
        free(pods);
        return (double)(t1 - t0);
}

/* ---- 2 and 3: the same bytes, raw and through the library -------------------- */

struct writer {
        int lfd;
        const struct buf *bytes;
};

static void *writer_main(void *arg)
{
        struct writer *w = arg;
        int fd = accept(w->lfd, NULL, NULL);
        char first[64];
        size_t off = 0;

        if (fd < 0)
                return NULL;
        (void)read(fd, first, sizeof(first)); /* the client's first line */
        while (off < w->bytes->len) {
                ssize_t n = write(fd, w->bytes->data + off, w->bytes->len - off);

                if (n <= 0)
                        break;
                off += (size_t)n;
        }
        close(fd);
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

/* ---- 4. a SET of many pods, and lookups in the cache it leaves ------------- */

/* hello, synced (an empty full state), then n_sets live SETs of n_pods
 * pods each (each set a new version of every pod). */
static void set_stream(struct buf *b, int n_pods, int n_sets)
{
        char text[4096];

        if (buf_puts(b, "{\"type\":\"hello\",\"protocol\":1,\"mode\":\"snapshot\",\"node\":\"node1\",\"seq\":1}\n"
                        "{\"type\":\"synced\",\"seq\":2,\"resumed\":false}\n") < 0)
                exit(1);
        for (int k = 0; k < n_sets; k++) {
                if (buf_printf(b, "{\"type\":\"pods\",\"seq\":%d,\"op\":\"SET\",\"source\":\"file\",\"pods\":[",
                               3 + k) < 0)
                        exit(1);
                for (int i = 0; i < n_pods; i++) {
                        bench_pod_text(text, sizeof(text), i, k, true);
                        if (buf_printf(b, "%s%s", i ? "," : "", text) < 0)
                                exit(1);
                }
                if (buf_puts(b, "]}\n") < 0)
                        exit(1);
        }
}

/* The SETs through the library (ms each, from accept to the last one
 * applied), then n_lookups lookups by namespace and name in the cache
 * they leave (ns each). */
static void set_apply(const char *path, const struct buf *bytes, int n_pods, int n_sets, long n_lookups,
                      double *ret_set_ms, double *ret_lookup_ns)
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
        if (podmux_client_pod_count(c) != (size_t)n_pods) {
                fprintf(stderr, "bench_client: %zu pods after the SETs\n", podmux_client_pod_count(c));
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
        podmux_client_free(c);
        close(w.lfd);
        free(names);
        free(nss);
}

static void write_file(const char *dir, const char *name, const struct buf *b)
{
        char path[512];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "wb");
        if (!f || fwrite(b->data, 1, b->len, f) != b->len || fclose(f) != 0) {
                perror("bench_client: writing the stream");
                exit(1);
        }
}

int main(int argc, char **argv)
{
        int n_pods = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 1000;
        long n_msgs = argc > 2 ? strtol(argv[2], NULL, 10) : 20000;
        int n_cons = argc > 3 ? (int)strtol(argv[3], NULL, 10) : 50;
        const char *out_dir = argc > 4 ? argv[4] : NULL;
        int set_pods = 5000, n_sets = 10;
        struct buf set_bytes = BUF_INIT;
        double set_ms, lookup_ns;
        char dir[] = "/tmp/podmux-bench-client-XXXXXX", path[256];
        struct buf bytes = BUF_INIT;
        struct count n = {0};
        long lines = 0;
        double fan, raw, lib;

        if (!mkdtemp(dir))
                return 1;
        fan = fan_out(dir, n_pods, n_msgs, n_cons, &bytes);
        snprintf(path, sizeof(path), "%s/raw.sock", dir);
        raw = raw_read(path, &bytes, &lines);
        snprintf(path, sizeof(path), "%s/lib.sock", dir);
        lib = library(path, &bytes, n_msgs, &n);
        printf("stream messages=%ld bytes=%zu bytes_per_message=%.0f\n", n_msgs, bytes.len,
               (double)bytes.len / (double)n_msgs);
        printf("daemon_fanout consumers=%d msgs_per_s=%.0f\n", n_cons, n_msgs / (fan / 1e6));
        printf("raw_line_read msgs_per_s=%.0f lines=%ld\n", lines / (raw / 1e6), lines);
        printf("library_decode_apply msgs_per_s=%.0f us_per_msg=%.2f ns_per_pod=%.0f applied=%ld\n",
               n.msgs / (lib / 1e6), lib / (double)(n.msgs ? n.msgs : 1), lib * 1000.0 / (double)(n.pods ? n.pods : 1),
               n.msgs);
        printf("ratio library/fanout=%.2f library/raw=%.3f\n", (n.msgs / lib) / (n_msgs / fan),
               (n.msgs / lib) / (lines / raw));
        set_stream(&set_bytes, set_pods, n_sets);
        unlink(path);
        set_apply(path, &set_bytes, set_pods, n_sets, 1000000, &set_ms, &lookup_ns);
        printf("library_set_apply pods=%d sets=%d ms_per_set=%.2f\n", set_pods, n_sets, set_ms);
        printf("library_lookup_by_name pods=%d ns_per_lookup=%.0f\n", set_pods, lookup_ns);
        /* For another client's benchmark (scripts/bench): the same bytes. */
        if (out_dir) {
                write_file(out_dir, "onepod.stream", &bytes);
                write_file(out_dir, "set.stream", &set_bytes);
        }
        buf_free(&bytes);
        buf_free(&set_bytes);
        unlink(path);
        snprintf(path, sizeof(path), "%s/raw.sock", dir);
        unlink(path);
        rmdir(dir);
        return 0;
}
