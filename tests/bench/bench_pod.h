/*
 * bench_pod.h — the static pod the benchmarks write as YAML: a printf
 * format taking the pod's name (%s), a number for its "index" label (%d)
 * and one for its hostPath (%d).  bench_drop drops it; bench_normalize
 * times its decoding.
 */
#ifndef PODMUX_BENCH_POD_H
#define PODMUX_BENCH_POD_H

#define BENCH_POD_YAML                                                                                                 \
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n"                                                           \
        "  labels: {app: web, tier: frontend, index: \"%d\"}\n"                                                        \
        "spec:\n  containers:\n  - name: app\n    image: registry.example/app:v1\n"                                    \
        "    args: [\"--port=8080\", \"--log-level=info\"]\n    ports: [{containerPort: 8080}]\n"                      \
        "    env: [{name: MODE, value: prod}, {name: REGION, value: eu-1}]\n"                                          \
        "    resources:\n      requests: {cpu: 100m, memory: 128Mi}\n      limits: {memory: 256Mi}\n"                  \
        "    livenessProbe:\n      httpGet: {path: /healthz, port: 8080}\n      periodSeconds: 10\n"                   \
        "    volumeMounts: [{name: data, mountPath: /data}]\n"                                                         \
        "  - name: sidecar\n    image: registry.example/proxy:1.2\n    ports: [{containerPort: 9090}]\n"               \
        "  volumes:\n  - name: data\n    hostPath: {path: /var/lib/app-%d, type: DirectoryOrCreate}\n"

#endif
