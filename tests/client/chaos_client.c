/*
 * chaos_client — a consumer built on libpodmux-client for scripts/chaos.
 *
 *   chaos_client SOCKET [--informer]
 *
 * With --informer it adds, before it connects, the index gen (the keys
 * of tests/fixtures/informer-scenarios.json, from the pod's label gen)
 * and an informer-style handler h1 (records as that table writes them,
 * with the label gen: "h1 add[*] source/uid gen", ...).
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
 *             "ready source,source...", "source NAME STATE[ resync]"
 *   source NAME  one JSON line: podmux_client_source_state() of NAME,
 *             {"not_live", "serving", "state", "time",
 *             "resource_version", "seq"} (time and resource_version null
 *             when none)
 *   stall MS  stop reading the stream for MS milliseconds (so the daemon
 *             cuts this consumer as slow and it must resume)
 *   handler NAME  adds an informer-style handler NAME (as h1 above)
 *   hlog      one JSON line: the informer handlers' records since the
 *             last "hlog", in order
 *   index NAME KEY  one JSON line: ["source/uid", ...] of the pods
 *             podmux_client_by_index() gives
 *   quit      exit 0
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <poll.h>
#include <stdarg.h>
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
        json_object *hlog;       /* the informer handlers' records, for "hlog" */
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

static void on_source(struct podmux_client *c, const struct podmux_source_state *st, void *data)
{
        struct st *s = data;
        char line[512];

        snprintf(line, sizeof(line), "source %s %s%s", st->source, st->state, st->resync ? " resync" : "");
        json_object_array_add(s->log, json_object_new_string(line));
}

/* The answer to "source NAME". */
static void source_answer(struct podmux_client *c, const char *name)
{
        struct podmux_source_state st;
        json_object *o = json_object_new_object();
        bool not_live = podmux_client_source_state(c, name, &st);

        json_object_object_add(o, "not_live", json_object_new_boolean(not_live));
        json_object_object_add(o, "serving", json_object_new_string(podmux_serving_name(st.serving)));
        json_object_object_add(o, "state", json_object_new_string(st.state));
        json_object_object_add(o, "time", st.checkpoint_time ? json_object_new_string(st.checkpoint_time) : NULL);
        json_object_object_add(o, "resource_version",
                               st.checkpoint_resource_version ? json_object_new_string(st.checkpoint_resource_version)
                                                              : NULL);
        json_object_object_add(o, "seq", json_object_new_uint64(st.seq));
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        fflush(stdout);
        json_object_put(o);
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

/* ---- informer-style handlers and indexes ------------------------------------ */

/* The pod's label gen as a number (-1 if none). */
static int label_gen(const struct podmux_pod *p)
{
        json_object *o = NULL, *m, *l, *g;
        int n = -1;

        if (podmux_pod_object(p, &o) < 0)
                return -1;
        if (json_object_object_get_ex(o, "metadata", &m) && json_object_object_get_ex(m, "labels", &l) &&
            json_object_object_get_ex(l, "gen", &g))
                n = (int)strtol(json_object_get_string(g), NULL, 10);
        json_object_put(o);
        return n;
}

/* The index gen: "odd" for an odd gen, "gen=N" when N < 4. */
static int index_gen(const struct podmux_pod *p, struct podmux_index_keys *keys, void *data)
{
        int n = label_gen(p), r = 0;
        char key[32];

        (void)data;
        if (n % 2 == 1)
                r = podmux_index_keys_add(keys, "odd");
        if (r == 0 && n >= 0 && n < 4) {
                snprintf(key, sizeof(key), "gen=%d", n);
                r = podmux_index_keys_add(keys, key);
        }
        return r;
}

struct hrec {
        char name[32];
        struct st *s;
};

static void hrec_add(struct hrec *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void hrec_add(struct hrec *h, const char *fmt, ...)
{
        char line[512];
        int k = snprintf(line, sizeof(line), "%s ", h->name);
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(line + k, sizeof(line) - (size_t)k, fmt, ap);
        va_end(ap);
        json_object_array_add(h->s->hlog, json_object_new_string(line));
}

static void h_add(struct podmux_client *c, const struct podmux_pod *p, bool initial, void *data)
{
        (void)c;
        hrec_add(data, "add%s %s/%s %d", initial ? "*" : "", podmux_pod_source(p), podmux_pod_uid(p), label_gen(p));
}

static void h_update(struct podmux_client *c, const struct podmux_pod *old, const struct podmux_pod *p, void *data)
{
        (void)c;
        hrec_add(data, "update %s/%s %d>%d", podmux_pod_source(p), podmux_pod_uid(p), label_gen(old), label_gen(p));
}

static void h_delete(struct podmux_client *c, const struct podmux_pod *old, void *data)
{
        (void)c;
        hrec_add(data, "delete %s/%s %d", podmux_pod_source(old), podmux_pod_uid(old), label_gen(old));
}

static void add_handler(struct podmux_client *c, struct st *s, const char *name)
{
        static const struct podmux_handler ops = {h_add, h_update, h_delete};
        struct hrec *h = calloc(1, sizeof(*h)); /* lives as long as the process */

        if (!h)
                abort();
        snprintf(h->name, sizeof(h->name), "%s", name);
        h->s = s;
        if (podmux_client_add_handler(c, &ops, h) < 0)
                abort();
}

/* args "NAME KEY": one JSON line, "source/uid" of each pod the index
 * NAME gives for KEY. */
static void index_answer(struct podmux_client *c, char *args)
{
        json_object *a = json_object_new_array();
        const struct podmux_pod **v = NULL;
        char id[512], *key = strchr(args, ' ');
        size_t n = 0;

        if (!key)
                abort();
        *key++ = '\0';
        if (podmux_client_by_index(c, args, key, &v, &n) < 0)
                abort();
        for (size_t i = 0; i < n; i++) {
                snprintf(id, sizeof(id), "%s/%s", podmux_pod_source(v[i]), podmux_pod_uid(v[i]));
                json_object_array_add(a, json_object_new_string(id));
        }
        free(v);
        puts(json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        fflush(stdout);
        json_object_put(a);
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
                       .log = json_object_new_array(),
                       .hlog = json_object_new_array()};
        struct podmux_client *c = NULL;
        char line[256];
        size_t have = 0;
        long long stall_until = 0;

        if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "--informer") != 0) ||
            podmux_client_new(argv[1], &s, &c) < 0) {
                fprintf(stderr, "usage: chaos_client SOCKET [--informer]\n");
                return 2;
        }
        if (argc == 3) {
                if (podmux_client_add_index(c, "gen", index_gen, NULL) < 0)
                        return 1;
                add_handler(c, &s, "h1");
        }
        podmux_client_on_pods(c, on_pods);
        podmux_client_on_synced(c, on_synced);
        podmux_client_on_sources_ready(c, on_ready);
        podmux_client_on_plugin(c, on_plugin);
        podmux_client_on_source(c, on_source);
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
                                else if (strcmp(line, "hlog") == 0)
                                        take(&s.hlog);
                                else if (strncmp(line, "handler ", 8) == 0)
                                        add_handler(c, &s, line + 8);
                                else if (strncmp(line, "source ", 7) == 0)
                                        source_answer(c, line + 7);
                                else if (strncmp(line, "index ", 6) == 0)
                                        index_answer(c, line + 6);
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
        json_object_put(s.hlog);
        return 0;
}
