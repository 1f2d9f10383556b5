/*
 * bench_merge — the merger's cost for a SET of N pods with one pod changed
 * (a static-pod relist after one edit), and the resident size of the stored
 * pods.  Prints figures; asserts nothing.  Run by scripts/bench.
 *
 * Usage: bench_merge N ITERATIONS
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/loop.h"
#include "core/storage.h"

static size_t emitted;

static void on_emit(void *data, struct pod_update *u)
{
        emitted += u->n_pods;
        pod_update_free(u);
}

/* A typical static pod: two containers, probes, volumes, resources. */
static struct pod *make_pod(int i, int variant)
{
        char text[4096];
        struct pod *p = NULL;
        struct buf err = BUF_INIT;

        snprintf(text, sizeof(text),
                 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"pod-%d-node1\","
                 "\"namespace\":\"default\",\"uid\":\"%032d\",\"labels\":{\"app\":\"web-%d\",\"tier\":\"frontend\"},"
                 "\"annotations\":{\"kubernetes.io/config.hash\":\"%032d\"}},"
                 "\"spec\":{\"nodeName\":\"node1\",\"restartPolicy\":\"Always\",\"dnsPolicy\":\"ClusterFirst\","
                 "\"terminationGracePeriodSeconds\":30,\"schedulerName\":\"default-scheduler\","
                 "\"securityContext\":{},\"enableServiceLinks\":true,"
                 "\"tolerations\":[{\"operator\":\"Exists\",\"effect\":\"NoExecute\"}],"
                 "\"containers\":[{\"name\":\"app\",\"image\":\"registry.example/app:v%d\","
                 "\"args\":[\"--port=8080\",\"--log-level=info\"],\"ports\":[{\"containerPort\":8080,\"protocol\":\"TCP\"}],"
                 "\"env\":[{\"name\":\"MODE\",\"value\":\"prod\"},{\"name\":\"REGION\",\"value\":\"eu-1\"}],"
                 "\"resources\":{\"requests\":{\"cpu\":\"100m\",\"memory\":\"128Mi\"},\"limits\":{\"memory\":\"256Mi\"}},"
                 "\"livenessProbe\":{\"httpGet\":{\"path\":\"/healthz\",\"port\":8080},\"periodSeconds\":10},"
                 "\"volumeMounts\":[{\"name\":\"data\",\"mountPath\":\"/data\"}],"
                 "\"terminationMessagePath\":\"/dev/termination-log\",\"terminationMessagePolicy\":\"File\","
                 "\"imagePullPolicy\":\"IfNotPresent\"},"
                 "{\"name\":\"sidecar\",\"image\":\"registry.example/proxy:1.2\",\"ports\":[{\"containerPort\":9090,\"protocol\":\"TCP\"}],"
                 "\"terminationMessagePath\":\"/dev/termination-log\",\"terminationMessagePolicy\":\"File\","
                 "\"imagePullPolicy\":\"IfNotPresent\"}],"
                 "\"volumes\":[{\"name\":\"data\",\"hostPath\":{\"path\":\"/var/lib/app-%d\",\"type\":\"DirectoryOrCreate\"}}]},"
                 "\"status\":{\"phase\":\"Pending\"}}",
                 i, i, i, i, variant, i);
        if (pod_from_text(text, strlen(text), &p, &err) < 0) {
                fprintf(stderr, "bench_merge: %s\n", err.data);
                exit(1);
        }
        buf_free(&err);
        return p;
}

static long rss_kb(void)
{
        FILE *f = fopen("/proc/self/status", "r");
        char line[256];
        long kb = -1;

        while (f && fgets(line, sizeof(line), f))
                if (strncmp(line, "VmRSS:", 6) == 0)
                        kb = strtol(line + 6, NULL, 10);
        if (f)
                fclose(f);
        return kb;
}

int main(int argc, char **argv)
{
        int n = argc > 1 ? atoi(argv[1]) : 1000;
        int iters = argc > 2 ? atoi(argv[2]) : 200;
        struct storage_config cfg = {.mode = STORAGE_MODE_INCREMENTAL, .emit = on_emit};
        struct storage *s;
        struct pod **pods = calloc((size_t)n, sizeof(*pods));
        struct pod *alt[2];
        long rss0, rss1;
        uint64_t t0, t1;

        if (!pods || storage_new(&cfg, &s) < 0)
                return 1;
        for (int i = 0; i < n; i++)
                pods[i] = make_pod(i, 1);
        /* What the merger adds on top of the sender's pods (in the daemon
         * the file source's store holds those). */
        rss0 = rss_kb();
        alt[0] = pod_ref(pods[0]);
        alt[1] = make_pod(0, 2);
        {
                struct pod_update *u = pod_update_new(POD_OP_SET, "file");

                for (int i = 0; i < n; i++)
                        pod_update_add(u, pods[i]);
                storage_merge(s, "file", u);
        }
        rss1 = rss_kb();
        t0 = mono_usec();
        for (int it = 0; it < iters; it++) {
                struct pod_update *u = pod_update_new(POD_OP_SET, "file");

                /* pod 0 flips between two images: one UPDATE per merge */
                pod_update_add(u, alt[(it + 1) % 2]);
                for (int i = 1; i < n; i++)
                        pod_update_add(u, pods[i]);
                storage_merge(s, "file", u);
        }
        t1 = mono_usec();
        printf("merge_set_one_changed pods=%d iterations=%d usec_per_merge=%.1f usec_per_pod=%.3f\n",
               n, iters, (double)(t1 - t0) / iters, (double)(t1 - t0) / iters / n);
        printf("merger_store pods=%d rss_kb_growth=%ld bytes_per_pod=%.0f\n", n, rss1 - rss0,
               (double)(rss1 - rss0) * 1024.0 / n);
        for (int i = 0; i < n; i++)
                pod_unref(pods[i]);
        pod_unref(alt[0]);
        pod_unref(alt[1]);
        free(pods);
        storage_free(s);
        return 0;
}
