/*
 * bench_normalize — what normalizing a pod through the core/v1 table
 * (src/kube/v1_normalize.c) costs next to json-c parsing the same bytes,
 * for a typical static pod: clean, and with what normalization rewrites
 * (number quantities, zero plain fields, unknown fields).  Also the whole
 * manifest decode and pod build, for scale.  Prints figures; asserts
 * nothing.  Run by scripts/bench.
 *
 * Usage: bench_normalize [ITERATIONS]
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_pod.h"
#include "util/json_parse.h"
#include "sources/manifest.h"
#include "core/pod.h"
#include "kube/v1_normalize.h"

/* The pod of tests/bench/bench_merge.c, as a manifest author writes it. */
static const char clean[] =
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"pod-7\","
        "\"labels\":{\"app\":\"web-7\",\"tier\":\"frontend\"}},"
        "\"spec\":{\"containers\":[{\"name\":\"app\",\"image\":\"registry.example/app:v1\","
        "\"args\":[\"--port=8080\",\"--log-level=info\"],\"ports\":[{\"containerPort\":8080}],"
        "\"env\":[{\"name\":\"MODE\",\"value\":\"prod\"},{\"name\":\"REGION\",\"value\":\"eu-1\"}],"
        "\"resources\":{\"requests\":{\"cpu\":\"100m\",\"memory\":\"128Mi\"},\"limits\":{\"memory\":\"256Mi\"}},"
        "\"livenessProbe\":{\"httpGet\":{\"path\":\"/healthz\",\"port\":8080},\"periodSeconds\":10},"
        "\"volumeMounts\":[{\"name\":\"data\",\"mountPath\":\"/data\"}]},"
        "{\"name\":\"sidecar\",\"image\":\"registry.example/proxy:1.2\",\"ports\":[{\"containerPort\":9090}]}],"
        "\"volumes\":[{\"name\":\"data\",\"hostPath\":{\"path\":\"/var/lib/app-7\",\"type\":\"DirectoryOrCreate\"}}]}}";

/* The same pod with work for the normalizer in it. */
static const char dirty[] =
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"pod-7\",\"creationTimestamp\":null,"
        "\"labels\":{\"app\":\"web-7\",\"tier\":\"frontend\"}},"
        "\"spec\":{\"hostNetwork\":false,\"hostname\":\"\",\"containers\":[{\"name\":\"app\","
        "\"image\":\"registry.example/app:v1\",\"tty\":false,\"imagePullPolicyy\":\"Never\","
        "\"args\":[\"--port=8080\",\"--log-level=info\"],\"ports\":[{\"containerPort\":8080,\"hostPort\":0}],"
        "\"env\":[{\"name\":\"MODE\",\"value\":\"prod\"},{\"name\":\"REGION\",\"value\":\"eu-1\"}],"
        "\"resources\":{\"requests\":{\"cpu\":0.1,\"memory\":\"128Mi\"},\"limits\":{\"cpu\":1,\"memory\":\"256Mi\"}},"
        "\"livenessProbe\":{\"httpGet\":{\"path\":\"/healthz\",\"port\":8080},\"periodSeconds\":10},"
        "\"volumeMounts\":[{\"name\":\"data\",\"mountPath\":\"/data\"}]},"
        "{\"name\":\"sidecar\",\"image\":\"registry.example/proxy:1.2\",\"ports\":[{\"containerPort\":9090}],"
        "\"resources\":{}}],"
        "\"volumes\":[{\"name\":\"data\",\"hostPath\":{\"path\":\"/var/lib/app-7\",\"type\":\"DirectoryOrCreate\"}}]},"
        "\"status\":{}}";

static double now(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static json_object *parse(const char *text)
{
        json_object *o = NULL;

        if (json_parse_text(text, strlen(text), &o, NULL) < 0) {
                fprintf(stderr, "bench_normalize: cannot parse\n");
                exit(1);
        }
        return o;
}

/* Parses (and normalizes) each copy right away, as the manifest decoder
 * does, so both loops see a warm tree; the difference is the walk. */
static double parse_loop(const char *text, int n, bool normalize)
{
        struct v1_unknown u = {NULL, 0, 0};
        double t0 = now();

        for (int i = 0; i < n; i++) {
                json_object *o = parse(text);

                if (normalize && v1_normalize(o, &v1_types[V1_TYPE_POD], "", &u, NULL) < 0) {
                        fprintf(stderr, "bench_normalize: normalize failed\n");
                        exit(1);
                }
                v1_unknown_clear(&u);
                json_object_put(o);
        }
        return now() - t0;
}

/* manifest_decode_pod() and pod_from_json() of text, per pod. */
static void decode_loop(const char *text, int n, double *ret_decode, double *ret_pod)
{
        const struct manifest_ctx ctx = {MANIFEST_ORIGIN_FILE, "node1", "/etc/kubernetes/manifests/p.yaml"};
        struct v1_unknown u = {NULL, 0, 0};
        double t0, t_decode = 0, t_pod = 0;

        for (int i = 0; i < n; i++) {
                json_object *o = NULL;
                struct pod *p = NULL;

                t0 = now();
                if (manifest_decode_pod(text, strlen(text), &ctx, &o, &u, NULL) < 0) {
                        fprintf(stderr, "bench_normalize: decode failed\n");
                        exit(1);
                }
                t_decode += now() - t0;
                t0 = now();
                if (pod_from_json(o, &p, NULL) < 0) {
                        fprintf(stderr, "bench_normalize: pod_from_json failed\n");
                        exit(1);
                }
                t_pod += now() - t0;
                pod_unref(p);
                json_object_put(o);
                v1_unknown_clear(&u);
        }
        *ret_decode = t_decode / n * 1e6;
        *ret_pod = t_pod / n * 1e6;
}

static void run(const char *what, const char *text, int n)
{
        double t_parse, t_both, t_decode, t_pod;

        parse_loop(text, n / 10 + 1, true); /* warm the allocator */
        t_parse = parse_loop(text, n, false);
        t_both = parse_loop(text, n, true);
        decode_loop(text, n, &t_decode, &t_pod);
        printf("%-6s pod (%zu bytes of JSON), %d runs, per pod:\n", what, strlen(text), n);
        printf("  json-c parse          %7.2f us\n", t_parse / n * 1e6);
        printf("  v1_normalize          %7.2f us  (%.0f%% of the parse)\n",
               (t_both - t_parse) / n * 1e6, 100.0 * (t_both - t_parse) / t_parse);
        printf("  manifest_decode_pod   %7.2f us  (YAML reader, normalize, UID, defaults, "
               "validation)\n",
               t_decode);
        printf("  pod_from_json         %7.2f us  (digests and text)\n", t_pod);
}

int main(int argc, char **argv)
{
        int n = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 20000;

        if (n <= 0)
                n = 1;
        run("clean", clean, n);
        run("dirty", dirty, n);
        {
                /* The pod bench_drop drops (bench_pod.h). */
                char yaml[2048];
                double t_decode, t_pod;

                (void)snprintf(yaml, sizeof(yaml), BENCH_POD_YAML, "pod-7", 7, 7);
                decode_loop(yaml, n / 10 + 1, &t_decode, &t_pod);
                decode_loop(yaml, n, &t_decode, &t_pod);
                printf("yaml   pod (%zu bytes of YAML, bench_drop's), %d runs, per pod:\n", strlen(yaml), n);
                printf("  manifest_decode_pod   %7.2f us\n", t_decode);
                printf("  pod_from_json         %7.2f us\n", t_pod);
        }
        return 0;
}
