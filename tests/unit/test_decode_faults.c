/*
 * test_decode_faults — the decoders of outside bytes under injected
 * allocation failures (failalloc.h), the way SQLite tests malloc failure:
 * manifests (YAML and JSON, one Pod or a PodList, good and bad), the API
 * server's list pages and watch stream, JSON text, and kubeconfig files.
 *
 * Each input is decoded once without faults; then, for every N, again
 * with the Nth allocation failing (once, and from N on), until a run no
 * longer reaches N.  The rule checked everywhere: the result is exactly
 * the fault-free one (same code, same output, same error message) or
 * -ENOMEM, never another error (that would drop a pod or stop retries)
 * and never a different value; and no block is left allocated.
 *
 * All or nothing, as the decoders' headers define it:
 *   - a list page that fails leaves the pages as they were;
 *   - a watch stream that fails has applied a prefix of its events, the
 *     store and resource version being exactly those after that prefix,
 *     so a watch resumed from that version ends in the right store.
 *
 * Under AddressSanitizer nothing can be interposed: each test then runs
 * its fault-free pass only.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "failalloc.h"
#include "kube/api_decode.h"
#include "util/json_canon.h"
#include "util/json_parse.h"
#include "kube/kubeconfig.h"
#include "sources/manifest.h"
#include "core/pod.h"
#include "unit.h"

/* The test's own work is never failed: failalloc_hold() and
 * failalloc_release() around it. */

/* An assertion where faults may be armed: Check allocates as it records
 * where a test got to. */
#define CHECK(...)                                                                                                     \
        do {                                                                                                           \
                failalloc_hold();                                                                                      \
                ck_assert_msg(__VA_ARGS__);                                                                            \
                failalloc_release();                                                                                   \
        } while (0)

/* FAULTS_ONLY=name runs the tests whose name contains it (debugging). */
#define ONLY(name)                                                        \
        do {                                                              \
                if (getenv("FAULTS_ONLY") && !strstr(name, getenv("FAULTS_ONLY"))) \
                        return;                                           \
        } while (0)

/* FAULTS_STRIDE=k runs every kth N (a quicker look while debugging). */
static long stride(void)
{
        const char *s = getenv("FAULTS_STRIDE");

        return s && atol(s) > 0 ? atol(s) : 1;
}

/* One result: the code, and the output or the error message. */
struct outcome {
        int r;
        char *text;
};

static void outcome_free(struct outcome *o)
{
        free(o->text);
        o->text = NULL;
}

static void expect_same_or_enomem(const char *what, long n, bool persist, const struct outcome *want,
                                  const struct outcome *got)
{
        if (got->r == -ENOMEM)
                return;
        ck_assert_msg(got->r == want->r, "%s, allocation %ld%s failing: result %d, fault-free %d (%s)", what, n,
                      persist ? " on" : "", got->r, want->r, got->text ? got->text : "");
        ck_assert_msg(strcmp(got->text, want->text) == 0,
                      "%s, allocation %ld%s failing: a different result:\n%s\nfault-free:\n%s", what, n,
                      persist ? " on" : "", got->text, want->text);
}

/*
 * Runs fn(arg, &outcome) fault-free, then for N = 1, 2, ... with the Nth
 * allocation failing (persist: and all after it) until a run does not
 * reach N.  Returns how many runs a fault hit.
 */
static long sweep(const char *what, void (*fn)(void *arg, struct outcome *o), void *arg, bool persist)
{
        struct outcome want = {0, NULL};
        long hits = 0;

        fn(arg, &want);
        ck_assert_msg(want.r != -ENOMEM, "%s: -ENOMEM without a fault", what);
        ck_assert_ptr_nonnull(want.text);
        if (!failalloc_enabled()) {
                outcome_free(&want);
                return 0;
        }
        for (long n = 1;; n += stride()) {
                struct outcome got = {0, NULL};
                long live0 = failalloc_live();
                bool hit;

                failalloc_persist(persist);
                failalloc_arm(n);
                fn(arg, &got);
                hit = failalloc_failed();
                failalloc_arm(0);
                expect_same_or_enomem(what, n, persist, &want, &got);
                outcome_free(&got);
                ck_assert_msg(failalloc_live() == live0, "%s, allocation %ld%s failing: %ld block(s) leaked", what,
                              n, persist ? " on" : "", failalloc_live() - live0);
                if (!hit)
                        break;
                hits++;
        }
        outcome_free(&want);
        ck_assert_msg(hits > 0, "%s: no allocation to fail", what);
        return hits;
}

/* Text of a json value (json_write: checked), or of an error. */
static char *text_of(json_object *v, const struct buf *err, int r)
{
        struct buf b = BUF_INIT;

        failalloc_hold();
        if (r == 0)
                ck_assert_int_eq(json_write(&b, v), 0);
        else
                ck_assert_int_eq(buf_printf(&b, "error %d: %s", r, err->data), 0);
        failalloc_release();
        return buf_steal(&b, NULL);
}

/* ---- manifests ------------------------------------------------------------ */

#define POD_YAML                                                                                  \
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: kube-system\n"            \
        "  labels: {app: web, tier: front, a: '1', b: '2', c: '3', d: '4', e: '5', f: '6',"       \
        " g: '7', h: '8', i: '9', j: '10', k: '11', l: '12'}\n"                                    \
        "  annotations: {note: \"caf\\u00e9\", x: y}\n"                                           \
        "spec:\n  hostNetwork: true\n  volumes:\n  - name: data\n    hostPath: {path: /var/lib/x}\n" \
        "  - name: scratch\n  containers:\n  - &c\n    name: main\n    image: nginx:1.25\n"         \
        "    command: [nginx, -g, 'daemon off;']\n    ports: [{containerPort: 80}]\n"               \
        "    env: [{name: A, value: 'b'}, {name: C, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]\n" \
        "    resources: {limits: {cpu: 100m, memory: 1.5e3}}\n"                                   \
        "    livenessProbe: {httpGet: {port: 80}}\n    volumeMounts: [{name: data, mountPath: /d}]\n" \
        "  - <<: *c\n    name: side\n    image: busybox\n"                                        \
        "  tolerations: [{operator: Exists, effect: NoExecute, tolerationSeconds: 3}]\n"

#define POD_JSON                                                                                  \
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"beta\",\"uid\":\"pinned-1\"," \
        "\"annotations\":{\"x\":\"1\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"redis:7\"," \
        "\"env\":[{\"name\":\"A\",\"value\":\"b\\n\\u00e9\"}],\"args\":[\"--port\",\"6379\"]," \
        "\"resources\":{\"limits\":{\"cpu\":1.25,\"memory\":12345678901234}}}],\"restartPolicy\":null}}\n"

#define POD_LIST_YAML                                                                             \
        "apiVersion: v1\nkind: PodList\nitems:\n"                                                 \
        "- apiVersion: v1\n  kind: Pod\n  metadata: {name: one}\n"                               \
        "  spec: {containers: [{name: c, image: busybox, args: [sleep, '3600']}]}\n"              \
        "- apiVersion: v1\n  kind: Pod\n  metadata: {name: two, namespace: ns2}\n"               \
        "  spec: {containers: [{name: c, image: 'etcd:3.5'}], dnsPolicy: Default}\n"

#define POD_LIST_JSON                                                                             \
        "{\"apiVersion\":\"v1\",\"kind\":\"PodList\",\"items\":[{\"apiVersion\":\"v1\",\"kind\":\"Pod\"," \
        "\"metadata\":{\"name\":\"a\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}," \
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"b\"},\"spec\":{\"containers\":" \
        "[{\"name\":\"c\",\"image\":\"y\",\"ports\":[{\"containerPort\":8080,\"protocol\":\"UDP\"}]}]}}]}"

static const struct {
        const char *name, *text;
} manifests[] = {
        {"YAML pod", POD_YAML},
        {"JSON pod", POD_JSON},
        {"YAML PodList", POD_LIST_YAML},
        {"JSON PodList", POD_LIST_JSON},
        /* Bad ones: the same message, or -ENOMEM. */
        {"YAML syntax error", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n   bad: [\n"},
        {"JSON syntax error", "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":}}"},
        /* Read as JSON once the YAML reader has refused it. */
        {"JSON pod YAML cannot read", "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"e\","
                                      "\"annotations\":{\"a\":\"\\ud83d\\ude00\"}},"
                                      "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x:v1\"}]}}"},
        {"JSON neither reads", "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\"\n:\"\\ud83d\" x}}"},
        {"invalid pod", "apiVersion: v1\nkind: Pod\nmetadata: {name: Bad_Name, labels: {'a b': c}}\n"
                        "spec:\n  containers:\n  - name: c\n  - name: c\n    image: ' x'\n"
                        "  volumes: [{name: v, secret: {secretName: s}}]\n"},
        {"not a pod", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n"},
        {"PodList with a bad item", "apiVersion: v1\nkind: PodList\nitems:\n- apiVersion: v1\n  kind: Pod\n"
                                    "  metadata: {name: ok}\n  spec: {containers: [{name: c, image: x}]}\n"
                                    "- apiVersion: v1\n  kind: Pod\n  metadata: {name: bad}\n  spec: {}\n"},
        {"empty", "# nothing\n"},
};

struct manifest_case {
        const char *text;
        bool list; /* manifest_decode_pods (the URL's form) */
};

static void decode_manifest(void *arg, struct outcome *o)
{
        const struct manifest_case *c = arg;
        struct manifest_ctx ctx = {
                .origin = c->list ? MANIFEST_ORIGIN_URL : MANIFEST_ORIGIN_FILE,
                .node_name = "Node-1",
                .location = c->list ? "http://127.0.0.1/pods" : "/etc/kubernetes/manifests/x.yaml",
        };
        struct buf err = BUF_INIT;
        json_object *v = NULL;

        if (c->list)
                o->r = manifest_decode_pods(c->text, strlen(c->text), &ctx, &v, NULL, &err);
        else
                o->r = manifest_decode_pod(c->text, strlen(c->text), &ctx, &v, NULL, &err);
        if (o->r == -ENOMEM) {
                /* Nothing else may come back with it. */
                CHECK(v == NULL, "-ENOMEM with a value");
                CHECK(err.len == 0, "-ENOMEM with a message: %s", err.data);
        } else {
                o->text = text_of(v, &err, o->r);
        }
        json_object_put(v);
        buf_free(&err);
}

static void sweep_manifests(bool persist)
{
        long total = 0;

        for (size_t i = 0; i < sizeof(manifests) / sizeof(manifests[0]); i++) {
                for (int list = 0; list < 2; list++) {
                        struct manifest_case c = {manifests[i].text, list};
                        char what[128];

                        snprintf(what, sizeof(what), "%s (%s)", manifests[i].name,
                                 list ? "manifest_decode_pods" : "manifest_decode_pod");
                        total += sweep(what, decode_manifest, &c, persist);
                }
        }
        fprintf(stderr, "# manifests: %ld allocation failure(s)%s survived\n", total, persist ? " (persistent)" : "");
}

START_TEST(test_manifest_alloc_sweep)
{
        ONLY("test_manifest_alloc_sweep");
        sweep_manifests(false);
}
END_TEST

START_TEST(test_manifest_alloc_sweep_persistent)
{
        ONLY("test_manifest_alloc_sweep_persistent");
        sweep_manifests(true);
}
END_TEST

/* ---- JSON text ------------------------------------------------------------- */

static void parse_json(void *arg, struct outcome *o)
{
        struct buf err = BUF_INIT;
        json_object *v = NULL;

        o->r = json_parse_text(arg, strlen(arg), &v, &err);
        if (o->r != -ENOMEM)
                o->text = text_of(v, &err, o->r);
        json_object_put(v);
        buf_free(&err);
}

START_TEST(test_json_parse_alloc_sweep)
{
        ONLY("test_json_parse_alloc_sweep");
        static const char *const texts[] = {
                "{\"a\":[1,-2,3.50,1e3,18446744073709551615,\"\\ud83d\\ude00\\u00e9\\n\",true,false,null],"
                "\"b\":{\"c\":{\"d\":[[],{}]},\"e\":\"" "a string longer than one block of json-c's buffer" "\"},"
                "\"k1\":1,\"k2\":2,\"k3\":3,\"k4\":4,\"k5\":5,\"k6\":6,\"k7\":7,\"k8\":8,\"k9\":9,\"k10\":10,"
                "\"k11\":11,\"k12\":12,\"k1\":13}",
                "{\"a\":[1,2,{\"b\":\"c\"}],\"d\":tru}",
                "[1,2,3] x",
        };

        for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
                sweep("JSON text", parse_json, (void *)texts[i], false);
                sweep("JSON text", parse_json, (void *)texts[i], true);
        }
}
END_TEST

/* ---- API list pages ---------------------------------------------------------- */

#define API_POD(ns, name, rv, image)                                                                \
        "{\"metadata\":{\"namespace\":\"" ns "\",\"name\":\"" name "\",\"uid\":\"u-" name "\","     \
        "\"resourceVersion\":\"" rv "\",\"labels\":{\"app\":\"" name "\"}},\"spec\":{\"nodeName\":\"n1\"," \
        "\"containers\":[{\"name\":\"c\",\"image\":\"" image "\"}]},\"status\":{\"phase\":\"Running\"}}"

/* The store in key order, each pod as it would be sent. */
static char *store_text(struct strmap *store, const char *rv)
{
        struct buf b = BUF_INIT;
        size_t n = strmap_size(store), i = 0, it = 0;
        const char **keys;
        const char *k;

        failalloc_hold();
        keys = calloc(n + 1, sizeof(*keys));
        ck_assert_ptr_nonnull(keys);
        while (strmap_next(store, &it, &k, NULL))
                keys[i++] = k;
        for (i = 1; i < n; i++)
                for (size_t j = i; j > 0 && strcmp(keys[j - 1], keys[j]) > 0; j--) {
                        const char *t = keys[j];

                        keys[j] = keys[j - 1];
                        keys[j - 1] = t;
                }
        ck_assert_int_eq(buf_printf(&b, "rv %s\n", rv ? rv : "(none)"), 0);
        for (i = 0; i < n; i++) {
                ck_assert_int_eq(buf_printf(&b, "%s: ", keys[i]), 0);
                ck_assert_int_eq(pod_render(strmap_get(store, keys[i]), &b), 0);
                ck_assert_int_eq(buf_putc(&b, '\n'), 0);
        }
        free(keys);
        failalloc_release();
        return buf_steal(&b, NULL);
}

static struct strmap *store_with(const char *const *pods)
{
        struct strmap *store;

        failalloc_hold();
        store = strmap_new();
        ck_assert_ptr_nonnull(store);
        for (size_t i = 0; pods[i]; i++) {
                struct pod *p = NULL, *old = NULL;
                struct buf key = BUF_INIT;

                ck_assert_int_eq(pod_from_text(pods[i], strlen(pods[i]), &p, NULL), 0);
                ck_assert_int_eq(pod_store_key(p, &key), 0);
                ck_assert_int_eq(strmap_put(store, key.data, p, (void **)&old), 0);
                pod_unref(old);
                buf_free(&key);
        }
        failalloc_release();
        return store;
}

/* The pages gathered so far: one earlier page. */
static const char *const earlier_page[] = {API_POD("default", "old", "3", "a:1"),
                                           API_POD("default", "keep", "4", "b:1"), NULL};

/* The page's bytes fed to one list decoder 5 at a time, as reads bring
 * them: the result is the whole page's. */
static int decode_in_reads(const char *page, struct strmap *pages, char **rv, char **cont, struct buf *err)
{
        struct list_decoder *d = list_decoder_new();
        size_t len = strlen(page);
        int r = d ? 0 : -ENOMEM;

        for (size_t at = 0; r == 0 && at < len; at += 5)
                r = list_decoder_feed(d, page + at, len - at < 5 ? len - at : 5, err);
        if (r == 0)
                r = list_decoder_finish(d, pages, rv, cont, err);
        list_decoder_free(d);
        return r;
}

static bool page_in_reads;

static void decode_page(void *arg, struct outcome *o)
{
        struct strmap *pages = store_with(earlier_page);
        char *before = store_text(pages, NULL), *rv = NULL, *cont = NULL;
        struct buf err = BUF_INIT;

        if (page_in_reads)
                o->r = decode_in_reads(arg, pages, &rv, &cont, &err);
        else
                o->r = api_decode_list_page(arg, strlen(arg), pages, &rv, &cont, &err);
        if (o->r < 0) {
                char *after = store_text(pages, NULL);

                /* All or nothing: a page that failed left nothing. */
                CHECK(strcmp(before, after) == 0, "a failed page (%d) changed the pages:\n%s", o->r, after);
                free(after);
        }
        if (o->r == -ENOMEM) {
                CHECK(rv == NULL && cont == NULL, "-ENOMEM with a resource version or a continue token");
        } else if (o->r == 0) {
                char *s = store_text(pages, rv);

                failalloc_hold();
                ck_assert_int_ge(asprintf(&o->text, "%scontinue %s\n", s, cont ? cont : "(none)"), 0);
                failalloc_release();
                free(s);
        } else {
                o->text = text_of(NULL, &err, o->r);
        }
        free(before);
        free(rv);
        free(cont);
        buf_free(&err);
        failalloc_hold();
        api_store_free(pages);
        failalloc_release();
}

START_TEST(test_list_page_alloc_sweep)
{
        ONLY("test_list_page_alloc_sweep");
        static const char *const pages[] = {
                "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"41\",\"continue\":\"c2\"},\"items\":["
                API_POD("default", "old", "40", "a:2") "," API_POD("kube-system", "new", "39", "c:1") ","
                API_POD("x", "y", "38", "d:1") "," API_POD("kube-system", "new", "42", "c:2") "]}",
                "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"43\"},\"items\":["
                API_POD("default", "c", "1", "e") ",42]}",
                "{\"kind\":\"Status\",\"code\":500}",
        };
        long hits = 0;

        for (int reads = 0; reads < 2; reads++) {
                page_in_reads = reads;
                for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
                        hits += sweep("list page", decode_page, (void *)pages[i], false);
                        hits += sweep("list page", decode_page, (void *)pages[i], true);
                }
        }
        fprintf(stderr, "# list pages: %ld allocation failure(s) survived\n", hits);
}
END_TEST

/* ---- the watch stream ---------------------------------------------------------- */

#define EVENT(type, obj) "{\"type\":\"" type "\",\"object\":" obj "}"

static const char *const watch_events[] = {
        EVENT("ADDED", API_POD("default", "a", "5", "one")),
        EVENT("MODIFIED", API_POD("default", "keep", "6", "two")),
        EVENT("BOOKMARK", "{\"metadata\":{\"resourceVersion\":\"7\"}}"),
        EVENT("DELETED", "{\"metadata\":{\"namespace\":\"default\",\"name\":\"old\",\"resourceVersion\":\"8\"}}"),
        EVENT("ADDED", API_POD("kube-system", "b", "9", "three")),
        EVENT("MODIFIED", API_POD("default", "a", "10", "four")),
};
#define N_EVENTS (sizeof(watch_events) / sizeof(watch_events[0]))

struct watch_run {
        size_t step; /* read size */
        size_t events;
};

static void count_event(void *arg, enum watch_event_type t, struct pod *old, struct pod *new)
{
        (void)old;
        (void)new;
        (void)t;
        ((struct watch_run *)arg)->events++;
}

/* Feeds events [from, N_EVENTS) in reads of step bytes; the result. */
static int feed_events(struct watch_decoder *d, size_t from, size_t step, struct strmap *store, char **rv,
                       struct watch_run *run, struct buf *err)
{
        struct buf text = BUF_INIT;
        long code = 0;
        int r = 0;

        failalloc_hold();
        for (size_t i = from; i < N_EVENTS; i++) {
                ck_assert_int_eq(buf_puts(&text, watch_events[i]), 0);
                ck_assert_int_eq(buf_puts(&text, i % 2 ? "\n" : " \r\n"), 0);
        }
        failalloc_release();
        for (size_t off = 0; r == 0 && off < text.len; off += step) {
                size_t n = off + step > text.len ? text.len - off : step;

                r = watch_decoder_feed(d, text.data + off, n, store, rv, count_event, run, &code, err);
        }
        buf_free(&text);
        return r;
}

/* The store and rv after each prefix of the events, fault-free. */
static char *prefix_state[N_EVENTS + 1];

static void learn_prefixes(void)
{
        struct strmap *store = store_with(earlier_page);
        struct watch_decoder *d = watch_decoder_new();
        struct buf err = BUF_INIT;
        char *rv = strdup("4");
        long code = 0;

        ck_assert_ptr_nonnull(d);
        prefix_state[0] = store_text(store, rv);
        for (size_t i = 0; i < N_EVENTS; i++) {
                ck_assert_int_eq(watch_decoder_feed(d, watch_events[i], strlen(watch_events[i]), store, &rv, NULL,
                                                    NULL, &code, &err),
                                 0);
                free(prefix_state[i + 1]);
                prefix_state[i + 1] = store_text(store, rv);
        }
        watch_decoder_free(d);
        api_store_free(store);
        buf_free(&err);
        free(rv);
}

/*
 * A watch that runs out of memory ends; the source watches again from the
 * last resource version.  The outcome is the store after the resumed
 * watch, which must be the fault-free one: the failed run must have
 * applied exactly the events it counted, no part of the next.
 */
static void watch_then_resume(void *arg, struct outcome *o)
{
        struct watch_run *run = arg;
        struct strmap *store = store_with(earlier_page);
        struct watch_decoder *d;
        struct buf err = BUF_INIT;
        char *rv = NULL;

        failalloc_hold();
        rv = strdup("4");
        failalloc_release();
        run->events = 0;
        d = watch_decoder_new();
        o->r = d ? feed_events(d, 0, run->step, store, &rv, run, &err) : -ENOMEM;
        watch_decoder_free(d);
        if (o->r == -ENOMEM) {
                char *now = store_text(store, rv);

                CHECK(strcmp(now, prefix_state[run->events]) == 0,
                              "after %zu event(s) and -ENOMEM the store is not that of the first %zu:\n%s\nwant:\n%s",
                              run->events, run->events, now, prefix_state[run->events]);
                free(now);
                /* Faults are over: the watch resumes after the last
                 * event applied (the server sends what follows rv). */
                failalloc_hold();
                d = watch_decoder_new();
                o->r = feed_events(d, run->events, run->step, store, &rv, run, &err);
                watch_decoder_free(d);
                failalloc_release();
        }
        CHECK(o->r == 0, "watch: %d %s", o->r, err.data);
        CHECK(run->events == N_EVENTS, "%zu event(s) applied", run->events);
        o->text = store_text(store, rv);
        buf_free(&err);
        free(rv);
        failalloc_hold();
        api_store_free(store);
        failalloc_release();
}

START_TEST(test_watch_alloc_sweep)
{
        ONLY("test_watch_alloc_sweep");
        static const size_t steps[] = {100000, 1, 97};
        long hits = 0;

        learn_prefixes();
        for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
                struct watch_run run = {steps[i], 0};

                hits += sweep("watch stream", watch_then_resume, &run, false);
                hits += sweep("watch stream", watch_then_resume, &run, true);
        }
        for (size_t i = 0; i <= N_EVENTS; i++)
                free(prefix_state[i]);
        fprintf(stderr, "# watch stream: %ld allocation failure(s) survived\n", hits);
}
END_TEST

/* ---- kubeconfig ---------------------------------------------------------------- */

static void load_kubeconfig(void *arg, struct outcome *o)
{
        struct kube_config c;
        struct buf err = BUF_INIT;

        memset(&c, 0, sizeof(c));
        /* A message from before must not read as this failure's. */
        failalloc_hold();
        ck_assert_int_eq(buf_puts(&err, "stale"), 0);
        failalloc_release();
        o->r = kubeconfig_load(arg, NULL, &c, &err);
        failalloc_hold();
        if (o->r == -ENOMEM)
                ck_assert_uint_eq(err.len, 0);
        if (o->r == 0)
                ck_assert_int_ge(asprintf(&o->text, "%s|%s|%s|%zu|%s|%s|%s|%d|%s|%s", c.server, c.ca_file,
                                          c.cert_file ? c.cert_file : "-", c.key_data.len,
                                          c.token ? c.token : "-", c.token_file ? c.token_file : "-",
                                          c.tls_server_name ? c.tls_server_name : "-", c.insecure, c.context,
                                          c.key_data.data ? c.key_data.data : "-"),
                                 0);
        else if (o->r != -ENOMEM)
                o->text = text_of(NULL, &err, o->r);
        failalloc_release();
        kube_config_free(&c);
        buf_free(&err);
}

START_TEST(test_kubeconfig_alloc_sweep)
{
        ONLY("test_kubeconfig_alloc_sweep");
        static const char *const configs[] = {
                "apiVersion: v1\nkind: Config\ncurrent-context: c1\n"
                "clusters:\n- name: k1\n  cluster:\n    server: https://10.0.0.1:6443/prefix/\n"
                "    certificate-authority: ca.crt\n    tls-server-name: api.local\n"
                "users:\n- name: u1\n  user:\n    client-certificate: certs/c.pem\n"
                "    client-key-data: a2V5IG1hdGVyaWFs\n    token: abc\n    tokenFile: /t\n"
                "contexts:\n- name: c1\n  context: {cluster: k1, user: u1}\n",
                "apiVersion: v1\nkind: Config\ncurrent-context: c1\n"
                "clusters:\n- name: k1\n  cluster:\n    server: https://10.0.0.1\n"
                "users:\n- name: u1\n  user:\n    exec: {command: x}\n"
                "contexts:\n- name: c1\n  context: {cluster: k1, user: u1}\n",
        };
        char path[64];

        for (size_t i = 0; i < sizeof(configs) / sizeof(configs[0]); i++) {
                FILE *f;

                snprintf(path, sizeof(path), "/tmp/podmux-kc-%ld-%zu.yaml", (long)getpid(), i);
                f = fopen(path, "w");
                ck_assert_ptr_nonnull(f);
                fputs(configs[i], f);
                ck_assert_int_eq(fclose(f), 0);
                sweep("kubeconfig", load_kubeconfig, path, false);
                unlink(path);
        }
}
END_TEST

UNIT_MAIN(test_manifest_alloc_sweep, test_manifest_alloc_sweep_persistent, test_json_parse_alloc_sweep,
          test_list_page_alloc_sweep, test_watch_alloc_sweep, test_kubeconfig_alloc_sweep)
