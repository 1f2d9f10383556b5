/*
 * chaos_client — a consumer built on libpodmux-client for scripts/chaos.
 *
 *   chaos_client SOCKET
 *
 * Keeps the library's cache and, beside it, a model: the records its
 * handlers saw, applied in order (SET replaces, REMOVE drops, the others
 * replace).  Commands on standard input, one per line:
 *   dump      one JSON line on standard output: {"connected", "synced",
 *             "pods": [{"source","uid","pod"}...] (the cache, in its
 *             order), "plugins": {socket: plugin}, "model_ok" (the model
 *             equals the cache, pods and plugins; a pod's text as the
 *             handlers saw it or one the same for the resync diff, say
 *             with a restarted daemon's config.seen), "model_diff",
 *             "records", "resyncs", "reconnects", "errors": {kind: n}}
 *   resyncs   one JSON line: ["OP source namespace/name", ...] for every
 *             pod handed to the handler in a resync record since the last
 *             "resyncs", in order
 *   log       one JSON line: every handler call since the last "log", in
 *             order: "OP source name,name...[ resync]" for a pods record
 *             (names without their namespace), "synced state|resumed",
 *             "ready source,source..."
 *   stall MS  stop reading the stream for MS milliseconds (so the daemon
 *             cuts this consumer as slow and it must resume)
 *   quit      exit 0
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "podmux/client.h"
#include "../../src/client/client_cache.h"

struct st {
        json_object *model;   /* "source\nuid" -> pod text */
        json_object *mplugins; /* socket -> plugin text */
        json_object *resync_log; /* "OP source ns/name" of resync pods */
        json_object *log;        /* every handler call, for "log" */
        long records, resyncs, reconnects, errors[8];
};

static void on_pods(struct podmux_client *c, const struct podmux_update *u, void *data)
{
        struct st *s = data;

        s->records++;
        {
                char rec[4096];
                size_t at = (size_t)snprintf(rec, sizeof(rec), "%s %s ", podmux_op_name(u->op), u->source);

                for (size_t i = 0; i < u->n_pods && at < sizeof(rec); i++)
                        at += (size_t)snprintf(rec + at, sizeof(rec) - at, "%s%s", i ? "," : "",
                                               podmux_pod_name(u->pods[i]));
                if (u->resync && at < sizeof(rec))
                        snprintf(rec + at, sizeof(rec) - at, " resync");
                json_object_array_add(s->log, json_object_new_string(rec));
        }
        if (u->resync) {
                s->resyncs++;
                for (size_t i = 0; i < u->n_pods; i++) {
                        char line[1024];

                        snprintf(line, sizeof(line), "%s %s %s/%s", podmux_op_name(u->op),
                                 podmux_pod_source(u->pods[i]), podmux_pod_namespace(u->pods[i]),
                                 podmux_pod_name(u->pods[i]));
                        json_object_array_add(s->resync_log, json_object_new_string(line));
                }
        }
        if (u->op == PODMUX_OP_SET) {
                json_object_put(s->model);
                s->model = json_object_new_object();
        }
        for (size_t i = 0; i < u->n_pods; i++) {
                const struct podmux_pod *p = u->pods[i];
                char key[512];

                snprintf(key, sizeof(key), "%s\n%s", podmux_pod_source(p), podmux_pod_uid(p));
                if (u->op == PODMUX_OP_REMOVE)
                        json_object_object_del(s->model, key);
                else
                        json_object_object_add(s->model, key, json_object_new_string(podmux_pod_json(p, NULL)));
        }
}

static void on_plugin(struct podmux_client *c, const struct podmux_plugin_event *e, void *data)
{
        struct st *s = data;

        if (strcmp(e->op, "REGISTERED") == 0)
                json_object_object_add(s->mplugins, e->socket, json_object_new_string(e->plugin_json));
        else if (strcmp(e->op, "DEREGISTERED") == 0)
                json_object_object_del(s->mplugins, e->socket);
}

static void on_synced(struct podmux_client *c, bool resumed, void *data)
{
        struct st *s = data;

        json_object_array_add(s->log, json_object_new_string(resumed ? "synced resumed" : "synced state"));
}

static void on_ready(struct podmux_client *c, const char *const *sources, size_t n, void *data)
{
        struct st *s = data;
        char line[512] = "ready ";

        for (size_t i = 0; i < n; i++)
                snprintf(line + strlen(line), sizeof(line) - strlen(line), "%s%s", i ? "," : "", sources[i]);
        json_object_array_add(s->log, json_object_new_string(line));
}

static void on_error(struct podmux_client *c, const struct podmux_error *e, void *data)
{
        struct st *s = data;

        s->errors[e->kind & 7]++;
}

static void on_reconnect(struct podmux_client *c, const struct podmux_reconnect *r, void *data)
{
        ((struct st *)data)->reconnects++;
}

static void dump(struct podmux_client *c, struct st *s)
{
        static const char *const kinds[] = {"connect", "permission", "protocol", "server",
                                            "closed", "bad_message", "nomem", "?"};
        json_object *o = json_object_new_object(), *pods = json_object_new_array();
        json_object *plugins = json_object_new_object(), *errs = json_object_new_object();
        const char *sock, *text;
        char diff[1024] = "";
        size_t n = 0, it = 0, np = 0;
        bool ok = true;

        for (const struct podmux_pod *p = podmux_client_pod_first(c); p; p = podmux_client_pod_next(c, p)) {
                json_object *e = json_object_new_object(), *obj = NULL, *m = NULL;
                char key[512];

                podmux_pod_object(p, &obj);
                json_object_object_add(e, "source", json_object_new_string(podmux_pod_source(p)));
                json_object_object_add(e, "uid", json_object_new_string(podmux_pod_uid(p)));
                json_object_object_add(e, "pod", obj);
                json_object_array_add(pods, e);
                snprintf(key, sizeof(key), "%s\n%s", podmux_pod_source(p), podmux_pod_uid(p));
                if (!json_object_object_get_ex(s->model, key, &m) ||
                    client_pod_text_same(json_object_get_string(m), (size_t)json_object_get_string_len(m),
                                         podmux_pod_json(p, NULL), strlen(podmux_pod_json(p, NULL))) != 1) {
                        if (ok)
                                snprintf(diff, sizeof(diff), "pod %s/%s: %s", podmux_pod_source(p),
                                         podmux_pod_uid(p), m ? "differs" : "not seen by the handlers");
                        ok = false;
                }
                n++;
        }
        if (ok && (size_t)json_object_object_length(s->model) != n) {
                snprintf(diff, sizeof(diff), "the handlers saw %d pods, the cache holds %zu",
                         json_object_object_length(s->model), n);
                ok = false;
        }
        while (podmux_client_plugin_next(c, &it, &sock, &text)) {
                json_object *m = NULL;

                json_object_object_add(plugins, sock, json_tokener_parse(text));
                if (!json_object_object_get_ex(s->mplugins, sock, &m) || strcmp(json_object_get_string(m), text)) {
                        if (ok)
                                snprintf(diff, sizeof(diff), "plugin %s not as the handlers saw it", sock);
                        ok = false;
                }
                np++;
        }
        if (ok && (size_t)json_object_object_length(s->mplugins) != np) {
                snprintf(diff, sizeof(diff), "the handlers saw %d plugins, the cache holds %zu",
                         json_object_object_length(s->mplugins), np);
                ok = false;
        }
        for (int i = 0; i < 8; i++)
                if (s->errors[i])
                        json_object_object_add(errs, kinds[i], json_object_new_int64(s->errors[i]));
        json_object_object_add(o, "connected", json_object_new_boolean(podmux_client_timeout(c) < 0));
        json_object_object_add(o, "synced", json_object_new_boolean(podmux_client_has_synced(c)));
        json_object_object_add(o, "pods", pods);
        json_object_object_add(o, "plugins", plugins);
        json_object_object_add(o, "model_ok", json_object_new_boolean(ok));
        json_object_object_add(o, "model_diff", json_object_new_string(diff));
        json_object_object_add(o, "records", json_object_new_int64(s->records));
        json_object_object_add(o, "resyncs", json_object_new_int64(s->resyncs));
        json_object_object_add(o, "reconnects", json_object_new_int64(s->reconnects));
        json_object_object_add(o, "errors", errs);
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        fflush(stdout);
        json_object_put(o);
}

/* Prints the array *a as one line and starts a new one. */
static void take(json_object **a)
{
        puts(json_object_to_json_string_ext(*a, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        fflush(stdout);
        json_object_put(*a);
        *a = json_object_new_array();
}

static long long now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
        struct st s = {.model = json_object_new_object(),
                       .mplugins = json_object_new_object(),
                       .resync_log = json_object_new_array(),
                       .log = json_object_new_array()};
        struct podmux_client *c = NULL;
        char line[256];
        size_t have = 0;
        long long stall_until = 0;

        if (argc != 2 || podmux_client_new(argv[1], &s, &c) < 0) {
                fprintf(stderr, "usage: chaos_client SOCKET\n");
                return 2;
        }
        podmux_client_on_pods(c, on_pods);
        podmux_client_on_synced(c, on_synced);
        podmux_client_on_sources_ready(c, on_ready);
        podmux_client_on_plugin(c, on_plugin);
        podmux_client_on_error(c, on_error);
        podmux_client_on_reconnect(c, on_reconnect);
        for (;;) {
                struct pollfd p[2] = {{.fd = STDIN_FILENO, .events = POLLIN},
                                      {.fd = podmux_client_fd(c), .events = POLLIN}};
                bool stalled = now_ms() < stall_until;
                int t = stalled ? (int)(stall_until - now_ms()) : podmux_client_timeout(c);

                if (poll(p, stalled ? 1 : 2, t) < 0)
                        continue;
                if (!stalled && podmux_client_process(c) < 0)
                        return 1;
                if (p[0].revents) {
                        ssize_t k = read(STDIN_FILENO, line + have, sizeof(line) - 1 - have);
                        char *nl;

                        if (k <= 0)
                                break;
                        have += (size_t)k;
                        line[have] = '\0';
                        while ((nl = strchr(line, '\n'))) {
                                *nl = '\0';
                                if (strcmp(line, "dump") == 0)
                                        dump(c, &s);
                                else if (strcmp(line, "resyncs") == 0)
                                        take(&s.resync_log);
                                else if (strcmp(line, "log") == 0)
                                        take(&s.log);
                                else if (strncmp(line, "stall ", 6) == 0)
                                        stall_until = now_ms() + strtoll(line + 6, NULL, 10);
                                else if (strcmp(line, "quit") == 0)
                                        goto out;
                                have -= (size_t)(nl + 1 - line);
                                memmove(line, nl + 1, have + 1);
                        }
                }
        }
out:
        podmux_client_free(c);
        json_object_put(s.model);
        json_object_put(s.mplugins);
        json_object_put(s.resync_log);
        json_object_put(s.log);
        return 0;
}
