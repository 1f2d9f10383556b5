/*
 * bench_checkpoint — the API source's checkpoint (doc/checkpoint.md): what
 * one write costs (bytes, time on the writer's thread), what the loop
 * feels while writes run back to back (its timers' lateness, p50/p99/max,
 * next to the same loop with no write), and the bytes written per hour
 * for a node whose pods change status once a minute each, as the pacing
 * rules make it.  Prints figures; asserts nothing.  Run by scripts/bench.
 *
 * Usage: bench_checkpoint N SECONDS DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sources/api_source.h"
#include "sources/checkpoint_writer.h"
#include "util/loop.h"

#define TICK_USEC 1000u
#define MAX_SAMPLES 200000u

/* An API pod as the server sends it: spec, managed fields, a running
 * status with conditions and container statuses (about 4 KB). */
static struct pod *make_pod(int i)
{
        char text[8192];
        struct pod *p = NULL;
        struct buf err = BUF_INIT;

        snprintf(
                text, sizeof(text),
                "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web-%d\",\"namespace\":\"default\","
                "\"uid\":\"%08d-0000-4000-8000-000000000000\",\"resourceVersion\":\"%d\",\"generation\":1,"
                "\"creationTimestamp\":\"2026-01-01T00:00:00Z\",\"labels\":{\"app\":\"web\",\"pod-template-hash\":"
                "\"7c9f8d\"},\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":"
                "\"web-7c9f8d\",\"uid\":\"11111111-0000-4000-8000-000000000000\",\"controller\":true,"
                "\"blockOwnerDeletion\":true}],\"managedFields\":[{\"manager\":\"kube-controller-manager\","
                "\"operation\":\"Update\",\"apiVersion\":\"v1\",\"time\":\"2026-01-01T00:00:00Z\",\"fieldsType\":"
                "\"FieldsV1\",\"fieldsV1\":{\"f:metadata\":{\"f:labels\":{\".\":{},\"f:app\":{},\"f:pod-template-"
                "hash\":{}},\"f:ownerReferences\":{\".\":{}}},\"f:spec\":{\"f:containers\":{\"k:{\\\"name\\\":\\\""
                "app\\\"}\":{\".\":{},\"f:image\":{},\"f:name\":{},\"f:ports\":{}}}}}},{\"manager\":\"kubelet\","
                "\"operation\":\"Update\",\"apiVersion\":\"v1\",\"time\":\"2026-01-01T00:00:05Z\",\"fieldsType\":"
                "\"FieldsV1\",\"fieldsV1\":{\"f:status\":{\"f:conditions\":{},\"f:containerStatuses\":{},"
                "\"f:hostIP\":{},\"f:phase\":{},\"f:podIP\":{},\"f:startTime\":{}}},\"subresource\":\"status\"}]},"
                "\"spec\":{\"nodeName\":\"edge-1\",\"restartPolicy\":\"Always\",\"dnsPolicy\":\"ClusterFirst\","
                "\"terminationGracePeriodSeconds\":30,\"schedulerName\":\"default-scheduler\",\"serviceAccountName\":"
                "\"default\",\"securityContext\":{},\"enableServiceLinks\":true,\"priority\":0,"
                "\"tolerations\":[{\"key\":\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\",\"effect\":"
                "\"NoExecute\",\"tolerationSeconds\":300}],\"containers\":[{\"name\":\"app\",\"image\":"
                "\"registry.example/app:v1\",\"args\":[\"--port=8080\"],\"ports\":[{\"containerPort\":8080,"
                "\"protocol\":\"TCP\"}],\"resources\":{\"requests\":{\"cpu\":\"100m\",\"memory\":\"128Mi\"}},"
                "\"volumeMounts\":[{\"name\":\"kube-api-access\",\"readOnly\":true,\"mountPath\":"
                "\"/var/run/secrets/kubernetes.io/serviceaccount\"}],\"terminationMessagePath\":"
                "\"/dev/termination-log\",\"terminationMessagePolicy\":\"File\",\"imagePullPolicy\":\"IfNotPresent\"}],"
                "\"volumes\":[{\"name\":\"kube-api-access\",\"projected\":{\"sources\":[{\"serviceAccountToken\":{"
                "\"expirationSeconds\":3607,\"path\":\"token\"}}],\"defaultMode\":420}}]},"
                "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Initialized\",\"status\":\"True\","
                "\"lastTransitionTime\":\"2026-01-01T00:00:01Z\"},{\"type\":\"Ready\",\"status\":\"True\","
                "\"lastTransitionTime\":\"2026-01-01T00:00:05Z\"},{\"type\":\"ContainersReady\",\"status\":"
                "\"True\",\"lastTransitionTime\":\"2026-01-01T00:00:05Z\"},{\"type\":\"PodScheduled\",\"status\":"
                "\"True\",\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"}],\"hostIP\":\"10.0.0.1\",\"podIP\":"
                "\"10.244.0.%d\",\"podIPs\":[{\"ip\":\"10.244.0.%d\"}],\"startTime\":\"2026-01-01T00:00:01Z\","
                "\"containerStatuses\":[{\"name\":\"app\",\"state\":{\"running\":{\"startedAt\":"
                "\"2026-01-01T00:00:04Z\"}},\"lastState\":{},\"ready\":true,\"restartCount\":0,\"image\":"
                "\"registry.example/app:v1\",\"imageID\":\"registry.example/app@sha256:"
                "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\",\"containerID\":"
                "\"containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\",\"started\":"
                "true}],\"qosClass\":\"Burstable\"}}",
                i, i, 1000 + i, i % 250, i % 250);
        if (pod_from_text(text, strlen(text), &p, &err) < 0) {
                fprintf(stderr, "bench_checkpoint: %s\n", err.data);
                exit(1);
        }
        buf_free(&err);
        return p;
}

struct bench {
        struct loop *loop;
        struct checkpoint_writer *w;
        struct pod **pods;
        size_t n;
        /* the loop's lateness, one sample per tick */
        uint64_t *late;
        size_t n_late;
        uint64_t due;
        struct loop_timer *tick;
        bool writing; /* start the next write when one ends */
        unsigned writes;
        uint64_t write_usec, bytes;
};

static int snapshot(void *data, struct checkpoint_snapshot *ret)
{
        struct bench *b = data;

        ret->pods = malloc(b->n * sizeof(*ret->pods));
        ret->rv = strdup("1000");
        if (!ret->pods || !ret->rv)
                exit(1);
        for (size_t i = 0; i < b->n; i++)
                ret->pods[i] = pod_ref(b->pods[i]);
        ret->n_pods = b->n;
        ret->time_usec = wall_usec(); /* always newer: every write goes */
        return 0;
}

static void done(void *data, const struct checkpoint_result *res)
{
        struct bench *b = data;

        if (res->error) {
                fprintf(stderr, "bench_checkpoint: %s\n", res->reason);
                exit(1);
        }
        b->writes++;
        b->write_usec += res->took_usec;
        b->bytes = res->bytes;
        if (b->writing)
                checkpoint_writer_changed(b->w);
}

static void on_tick(struct loop_timer *t, void *data)
{
        struct bench *b = data;
        uint64_t now = mono_usec();

        if (b->n_late < MAX_SAMPLES)
                b->late[b->n_late++] = now > b->due ? now - b->due : 0;
        b->due = now + TICK_USEC;
        loop_timer_arm(t, TICK_USEC);
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

        return x < y ? -1 : x > y;
}

/* Runs the loop for secs with ticks; prints the lateness. */
static void measure(struct bench *b, double secs, const char *what)
{
        uint64_t end = mono_usec() + (uint64_t)(secs * 1e6);

        b->n_late = 0;
        b->due = mono_usec() + TICK_USEC;
        loop_timer_arm(b->tick, TICK_USEC);
        while (mono_usec() < end)
                (void)loop_run_once(b->loop, 10000);
        loop_timer_stop(b->tick);
        qsort(b->late, b->n_late, sizeof(*b->late), cmp_u64);
        printf("loop_latency pods=%zu %s ticks=%zu p50_us=%llu p99_us=%llu max_us=%llu\n", b->n, what, b->n_late,
               (unsigned long long)b->late[b->n_late / 2], (unsigned long long)b->late[b->n_late * 99 / 100],
               (unsigned long long)b->late[b->n_late - 1]);
}

int main(int argc, char **argv)
{
        size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 110;
        double secs = argc > 2 ? strtod(argv[2], NULL) : 2.0;
        const char *dir = argc > 3 ? argv[3] : "/tmp/podmux-bench-checkpoint";
        struct bench b = {.n = n};
        struct checkpoint_writer_config cfg = {
                .dir = dir,
                .id = {.node = "edge-1", .server = "https://10.0.0.1:6443/", .ca_sha256 = ""},
                .interval_usec = 1,
                .snapshot = snapshot,
                .snapshot_data = &b,
                .done = done,
                .done_data = &b,
        };
        struct buf err = BUF_INIT;
        double per_write;

        b.pods = calloc(n, sizeof(*b.pods));
        b.late = calloc(MAX_SAMPLES, sizeof(*b.late));
        if (!b.pods || !b.late || loop_new(&b.loop) < 0 || loop_timer_new(b.loop, on_tick, &b, &b.tick) < 0)
                return 1;
        for (size_t i = 0; i < n; i++)
                b.pods[i] = make_pod((int)i);
        if (checkpoint_writer_new(b.loop, &cfg, &b.w, &err) < 0) {
                fprintf(stderr, "bench_checkpoint: %s\n", err.data);
                return 1;
        }
        measure(&b, secs, "idle");
        b.writing = true;
        checkpoint_writer_changed(b.w);
        measure(&b, secs, "writing");
        b.writing = false;
        while (b.writes == 0)
                (void)loop_run_once(b.loop, 10000);
        per_write = (double)b.write_usec / b.writes;
        printf("write pods=%zu bytes=%llu bytes_per_pod=%.0f writes=%u ms_per_write=%.2f\n", n,
               (unsigned long long)b.bytes, (double)b.bytes / n, b.writes, per_write / 1e3);
        /* The pacing (src/sources/checkpoint_writer.h): a status-only
         * change waits for the refresh; a change of what runs is written
         * within the interval, at most one write per interval. */
        printf("bytes_per_hour pods=%zu status_update_per_pod_per_minute writes=%.0f bytes=%.0f "
               "(worst case, a change of what runs every minute: writes=%.0f bytes=%.0f)\n",
               n, 3600e6 / API_CHECKPOINT_REFRESH_USEC, (double)b.bytes * 3600e6 / API_CHECKPOINT_REFRESH_USEC,
               3600e6 / API_CHECKPOINT_INTERVAL_USEC, (double)b.bytes * 3600e6 / API_CHECKPOINT_INTERVAL_USEC);
        checkpoint_writer_free(b.w);
        loop_timer_free(b.tick);
        loop_free(b.loop);
        for (size_t i = 0; i < n; i++)
                pod_unref(b.pods[i]);
        free(b.pods);
        free(b.late);
        return 0;
}
