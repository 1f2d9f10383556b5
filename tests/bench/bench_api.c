/*
 * bench_api — what the API source's bytes cost in process, next to the
 * cost of merely parsing them: a PodList of N pods (as an API server
 * serves an RV=0 list, unpaged) decoded into pods and merged, and watch
 * events (one pod's status changed) decoded, merged and rendered for a
 * consumer.  Prints figures; asserts nothing.  Run by scripts/bench.
 *
 * Usage: bench_api N EVENTS [LIST_FILE]
 * With LIST_FILE the list body is written there (for the daemon run of
 * scripts/bench to serve the same bytes).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "kube/api_decode.h"
#include "util/json_parse.h"
#include "util/loop.h"
#include "core/storage.h"
#include "util/strmap.h"

static size_t rendered;

/* What the stream server does with a merged record: render it. */
static void on_emit(void *data, struct pod_update *u)
{
        struct buf b = BUF_INIT;

        (void)data;
        for (size_t i = 0; i < u->n_pods; i++)
                if (pod_render(u->pods[i], &b) < 0)
                        exit(1);
        rendered += b.len;
        buf_free(&b);
        pod_update_free(u);
}

/* An API server's pod: about 800 bytes, as Go writes it (no spaces). */
static int put_pod(struct buf *b, int i, int gen)
{
        return buf_printf(
                b,
                "{\"metadata\":{\"name\":\"web-%05d\",\"namespace\":\"default\","
                "\"uid\":\"6a1c0b8e-4b7a-4c9e-9d1e-%012d\",\"resourceVersion\":\"%d\","
                "\"creationTimestamp\":\"2026-01-01T00:00:00Z\",\"labels\":{\"app\":\"web\","
                "\"pod-template-hash\":\"7d4b9c8f5\"},\"annotations\":{\"example.com/owner\":\"team-a\"},"
                "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"web-7d4b9c8f5\","
                "\"uid\":\"5f1c0b8e-4b7a-4c9e-9d1e-0a1b2c3d4e5f\",\"controller\":true,\"blockOwnerDeletion\":true}]},"
                "\"spec\":{\"containers\":[{\"name\":\"web\",\"image\":\"registry.example/web:1.25\","
                "\"ports\":[{\"containerPort\":8080,\"protocol\":\"TCP\"}],\"resources\":{\"requests\":{\"cpu\":\"100m\","
                "\"memory\":\"128Mi\"}},\"terminationMessagePath\":\"/dev/termination-log\","
                "\"terminationMessagePolicy\":\"File\",\"imagePullPolicy\":\"IfNotPresent\"}],"
                "\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\":30,\"dnsPolicy\":\"ClusterFirst\","
                "\"serviceAccountName\":\"default\",\"nodeName\":\"bench\",\"schedulerName\":\"default-scheduler\","
                "\"tolerations\":[{\"key\":\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\","
                "\"effect\":\"NoExecute\",\"tolerationSeconds\":300}]},"
                "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}],"
                "\"hostIP\":\"10.0.0.1\",\"podIP\":\"10.1.%d.%d\",\"message\":\"g%d\"}}",
                i, i, 1000 + i + gen, i / 250, i % 250, gen);
}

static double secs(uint64_t a, uint64_t b)
{
        return (double)(b - a) / 1e6;
}

int main(int argc, char **argv)
{
        int n = argc > 1 ? atoi(argv[1]) : 5000;
        int events = argc > 2 ? atoi(argv[2]) : 2000;
        struct storage_config cfg = {.mode = STORAGE_MODE_INCREMENTAL, .emit = on_emit};
        struct buf list = BUF_INIT, ev = BUF_INIT, err = BUF_INIT;
        struct strmap *pages = strmap_new();
        struct storage *s = NULL;
        struct pod_update *u;
        struct watch_decoder *d = watch_decoder_new();
        char *rv = NULL, *cont = NULL;
        json_object *o;
        uint64_t t0, t1;
        double jsonc, ours, decode, merge, per_event;
        long code;
        size_t it = 0;
        void *v;

        if (!pages || !d || storage_new(&cfg, &s) < 0)
                return 1;
        buf_puts(&list, "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"9999\"},"
                        "\"items\":[");
        for (int i = 0; i < n; i++) {
                if (i)
                        buf_putc(&list, ',');
                put_pod(&list, i, 0);
        }
        buf_puts(&list, "]}");
        if (argc > 3) {
                FILE *f = fopen(argv[3], "w");

                if (!f || fwrite(list.data, 1, list.len, f) != list.len || fclose(f) != 0)
                        return 1;
        }
        /* The floor: json-c's own parser over the bytes, and ours. */
        t0 = mono_usec();
        o = json_tokener_parse(list.data);
        t1 = mono_usec();
        jsonc = secs(t0, t1);
        json_object_put(o);
        t0 = mono_usec();
        if (json_parse_text(list.data, list.len, &o, NULL) < 0)
                return 1;
        t1 = mono_usec();
        ours = secs(t0, t1);
        json_object_put(o);
        /* The list into pods, then into the merger (and rendered). */
        t0 = mono_usec();
        if (api_decode_list_page(list.data, list.len, pages, &rv, &cont, &err) < 0) {
                fprintf(stderr, "bench_api: %s\n", err.len ? err.data : "decode failed");
                return 1;
        }
        t1 = mono_usec();
        decode = secs(t0, t1);
        u = pod_update_new(POD_OP_SET, "api");
        while (strmap_next(pages, &it, NULL, &v))
                pod_update_add(u, v);
        pod_update_sort(u);
        t0 = mono_usec();
        storage_merge(s, "api", u);
        t1 = mono_usec();
        merge = secs(t0, t1);
        printf("list pods=%d bytes=%zu  json-c parse %.1f ms (%.0f MB/s)  our parse %.1f ms  "
               "decode to pods %.1f ms (%.2fx json-c)  merge+render %.1f ms  total %.2fx json-c\n",
               n, list.len, jsonc * 1e3, list.len / jsonc / 1e6, ours * 1e3, decode * 1e3, decode / jsonc,
               merge * 1e3, (decode + merge) / jsonc);
        /* Watch events: one pod's status changes each time. */
        t0 = mono_usec();
        for (int k = 0; k < events; k++) {
                buf_reset(&ev);
                buf_puts(&ev, "{\"type\":\"MODIFIED\",\"object\":");
                put_pod(&ev, k % n, k + 1);
                buf_puts(&ev, "}\n");
                if (watch_decoder_feed(d, ev.data, ev.len, pages, &rv, NULL, NULL, &code, &err) < 0)
                        return 1;
                {
                        struct buf key = BUF_INIT;
                        struct pod *p;
                        char name[32];

                        snprintf(name, sizeof(name), "default/web-%05d", k % n);
                        p = strmap_get(pages, name);
                        u = pod_update_new_delta("api");
                        pod_update_add(u, p);
                        storage_merge(s, "api", u);
                        buf_free(&key);
                }
        }
        t1 = mono_usec();
        per_event = secs(t0, t1) / events;
        printf("watch events=%d pods=%d  %.1f us per event (decode, merge, render)\n", events, n, per_event * 1e6);
        api_store_free(pages);
        watch_decoder_free(d);
        storage_free(s);
        buf_free(&list);
        buf_free(&ev);
        buf_free(&err);
        free(rv);
        free(cont);
        return 0;
}
