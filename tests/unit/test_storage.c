/*
 * test_storage — the merger (src/core/storage.h) against
 * doc/pod-config.md sections 1-4: the kubelet's own tests from
 * pkg/kubelet/config/config_test.go (classic era, three modes), rewritten
 * case by case, then the decision table 3.7 in every mode, the worked
 * example 3.8 in every mode, and the finer rules of 1.3, 3.2-3.6 and 4.
 *
 * Every emitted record is collected through the emit callback and compared
 * as a string "OP@source:uid,uid;OP@source:..." so a failure prints the
 * whole sequence that was emitted.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/json_canon.h"
#include "core/mux.h"
#include "core/pod.h"
#include "core/storage.h"
#include "unit.h"

#define TEST_SOURCE "test"
#define T0 1735689600000000ull /* 2025-01-01T00:00:00Z */

/* ---- injected clock ------------------------------------------------------ */

static uint64_t fake_now = T0;

static uint64_t fake_clock(void)
{
        return fake_now;
}

/* ---- harness -------------------------------------------------------------- */

#define MAX_RECS 512
#define MAX_EVENTS 32

struct ev {
        char source[32];
        char uid[64];
        char reason[48];
};

struct h {
        struct storage *st;
        enum storage_mode mode;
        struct pod_update *recs[MAX_RECS];
        size_t n, next;
        struct ev events[MAX_EVENTS];
        size_t n_events;
};

static void on_emit(void *data, struct pod_update *u)
{
        struct h *h = data;

        ck_assert_msg(u != NULL, "emit called with NULL");
        ck_assert_msg(h->n < MAX_RECS, "too many records");
        h->recs[h->n++] = u;
}

static void on_event(void *data, const char *source, const struct pod *p,
                     const char *reason, const char *message)
{
        struct h *h = data;
        struct ev *e;

        ck_assert_msg(reason && reason[0], "event without reason");
        ck_assert_msg(message && message[0], "event without message");
        ck_assert_msg(h->n_events < MAX_EVENTS, "too many events");
        e = &h->events[h->n_events++];
        snprintf(e->source, sizeof(e->source), "%s", source);
        snprintf(e->uid, sizeof(e->uid), "%s", p ? pod_uid(p) : "(none)");
        snprintf(e->reason, sizeof(e->reason), "%s", reason);
}

static void h_init(struct h *h, enum storage_mode mode)
{
        struct storage_config cfg = {
                .mode = mode,
                .emit = on_emit,
                .emit_data = h,
                .event = on_event,
                .event_data = h,
                .wall_usec = fake_clock,
        };

        memset(h, 0, sizeof(*h));
        h->mode = mode;
        fake_now = T0;
        ck_assert_int_eq(storage_new(&cfg, &h->st), 0);
        ck_assert_ptr_nonnull(h->st);
}

static void h_free(struct h *h)
{
        for (size_t i = 0; i < h->n; i++)
                pod_update_free(h->recs[i]);
        h->n = h->next = 0;
        storage_free(h->st);
        h->st = NULL;
}

static const char *mode_name(enum storage_mode m)
{
        const char *s = storage_mode_to_string(m);

        return s ? s : "?";
}

/* ---- pods ------------------------------------------------------------------ */

static struct pod *podf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static struct pod *podf(const char *fmt, ...)
{
        struct buf b = BUF_INIT, err = BUF_INIT;
        struct pod *p = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        ck_assert_int_eq(buf_vprintf(&b, fmt, ap), 0);
        va_end(ap);
        r = pod_from_text(b.data, b.len, &p, &err);
        ck_assert_msg(r == 0, "pod_from_text(%s) = %d (%s)", b.data, r,
                      err.data);
        buf_free(&b);
        buf_free(&err);
        return p;
}

/* The kubelet test's CreateValidPod(name, namespace): UID name+namespace,
 * a fixed spec. */
#define VALID_SPEC                                                              \
        "{\"restartPolicy\":\"Always\",\"dnsPolicy\":\"ClusterFirst\","         \
        "\"containers\":[{\"name\":\"ctr\",\"image\":\"image\","                \
        "\"imagePullPolicy\":\"IfNotPresent\","                                 \
        "\"terminationMessagePolicy\":\"File\"}]}"
#define OTHER_SPEC                                                              \
        "{\"restartPolicy\":\"Always\",\"dnsPolicy\":\"ClusterFirst\","         \
        "\"containers\":[{\"name\":\"bar\",\"image\":\"test\","                 \
        "\"imagePullPolicy\":\"IfNotPresent\","                                 \
        "\"terminationMessagePolicy\":\"File\"}]}"

static struct pod *valid_pod(const char *name, const char *ns)
{
        return podf("{\"metadata\":{\"uid\":\"%s%s\",\"name\":\"%s\",\"namespace\":\"%s\"},"
                    "\"spec\":" VALID_SPEC "}",
                    name, ns, name, ns);
}

static struct pod *valid_pod_spec(const char *name, const char *ns, const char *spec)
{
        return podf("{\"metadata\":{\"uid\":\"%s%s\",\"name\":\"%s\",\"namespace\":\"%s\"},"
                    "\"spec\":%s}",
                    name, ns, name, ns, spec);
}

/* A pod for the spec-driven tests; every field optional.  JSON fragments
 * (labels, ann, meta, status) are inserted verbatim. */
struct pv {
        const char *uid;    /* required */
        const char *name;   /* default: uid */
        const char *ns;     /* default: "ns" */
        const char *image;  /* default: "img" */
        const char *labels; /* JSON object, default absent */
        const char *ann;    /* JSON object, default absent */
        const char *dt;     /* deletionTimestamp, default absent */
        const char *phase;  /* status.phase, default: no status */
        const char *meta;   /* extra metadata members, e.g. "\"generation\":1" */
        const char *spec;   /* whole spec JSON, overrides image */
};

static struct pod *pod_of(struct pv v)
{
        struct buf b = BUF_INIT;
        struct pod *p;

        ck_assert_ptr_nonnull(v.uid);
        buf_printf(&b, "{\"metadata\":{\"uid\":\"%s\",\"name\":\"%s\",\"namespace\":\"%s\"",
                   v.uid, v.name ? v.name : v.uid, v.ns ? v.ns : "ns");
        if (v.labels)
                buf_printf(&b, ",\"labels\":%s", v.labels);
        if (v.ann)
                buf_printf(&b, ",\"annotations\":%s", v.ann);
        if (v.dt)
                buf_printf(&b, ",\"deletionTimestamp\":\"%s\"", v.dt);
        if (v.meta)
                buf_printf(&b, ",%s", v.meta);
        if (v.spec)
                buf_printf(&b, "},\"spec\":%s", v.spec);
        else
                buf_printf(&b, "},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"%s\"}]}",
                           v.image ? v.image : "img");
        if (v.phase)
                buf_printf(&b, ",\"status\":{\"phase\":\"%s\"}", v.phase);
        buf_putc(&b, '}');
        p = podf("%s", b.data);
        buf_free(&b);
        return p;
}

#define POD(...) pod_of((struct pv){__VA_ARGS__})

/* Canonical JSON of the value at keys (NULL-terminated) in the rendered
 * pod, or "<absent>".  Caller frees. */
static char *field_at(const struct pod *p, const char *const *keys)
{
        json_object *root = pod_to_json(p), *cur = root;
        struct buf b = BUF_INIT;
        const char *k;

        ck_assert_ptr_nonnull(root);
        while ((k = *keys++)) {
                if (cur && json_object_is_type(cur, json_type_array) && k[0] >= '0' &&
                    k[0] <= '9') {
                        size_t idx = strtoul(k, NULL, 10);

                        cur = idx < json_object_array_length(cur)
                                      ? json_object_array_get_idx(cur, idx)
                                      : NULL;
                        if (!cur)
                                break;
                        continue;
                }
                if (!cur || !json_object_is_type(cur, json_type_object) ||
                    !json_object_object_get_ex(cur, k, &cur)) {
                        cur = NULL;
                        break;
                }
        }
        if (cur)
                ck_assert_int_eq(json_canon_append(&b, cur), 0);
        else
                buf_puts(&b, "<absent>");
        json_object_put(root);
        return buf_steal(&b, NULL);
}

/* The same, keys as arguments (NULL-terminated). */
static char *vfield(const struct pod *p, va_list ap)
{
        const char *keys[8];
        size_t n = 0;

        while (n < 7 && (keys[n] = va_arg(ap, const char *)))
                n++;
        keys[n] = NULL;
        return field_at(p, keys);
}

static char *field(const struct pod *p, ...)
{
        va_list ap;
        char *s;

        va_start(ap, p);
        s = vfield(p, ap);
        va_end(ap);
        return s;
}

#define ASSERT_FIELD(p, expect, ...)                                                                                   \
        do {                                                                                                           \
                char *f_ = field((p), __VA_ARGS__, (const char *)NULL);                                                \
                ck_assert_msg(strcmp(f_, (expect)) == 0, "%s: field %s of pod %s = %s, want %s", ctx, #__VA_ARGS__,    \
                              pod_uid(p), f_, (expect));                                                               \
                free(f_);                                                                                              \
        } while (0)

#define SEEN_KEY POD_ANNOTATION_SEEN
#define SOURCE_KEY POD_ANNOTATION_SOURCE

/* ---- sending and expecting --------------------------------------------------- */

static const char *ctx = "";

/* Sends one record (pods NULL-terminated; the caller's references pass). */
static int send_op(struct h *h, const char *source, enum pod_op op, ...)
{
        struct pod_update *u = pod_update_new(op, source);
        struct pod *p;
        va_list ap;

        ck_assert_ptr_nonnull(u);
        va_start(ap, op);
        while ((p = va_arg(ap, struct pod *))) {
                ck_assert_int_eq(pod_update_add(u, p), 0);
                pod_unref(p);
        }
        va_end(ap);
        return storage_merge(h->st, source, u);
}

#define SEND(h, op, ...) ck_assert_int_eq(send_op((h), TEST_SOURCE, (op), __VA_ARGS__, (struct pod *)NULL), 0)
#define SEND_EMPTY(h, op) ck_assert_int_eq(send_op((h), TEST_SOURCE, (op), (struct pod *)NULL), 0)
#define SEND_FROM(h, src, op, ...) ck_assert_int_eq(send_op((h), (src), (op), __VA_ARGS__, (struct pod *)NULL), 0)
#define SEND_EMPTY_FROM(h, src, op) ck_assert_int_eq(send_op((h), (src), (op), (struct pod *)NULL), 0)

static void describe(const struct pod_update *u, struct buf *out)
{
        const char *op = pod_op_to_string(u->op);

        buf_printf(out, "%s@%s:", op ? op : "?", u->source);
        for (size_t i = 0; i < u->n_pods; i++)
                buf_printf(out, "%s%s", i ? "," : "", pod_uid(u->pods[i]));
}

/* want: "OP[@source]:uid,uid;OP..." ("" = nothing); a segment without
 * "@source" means source "test".  Compares every record emitted since the
 * last expectation and consumes them. */
static void expect_seq(struct h *h, int line, const char *want)
{
        struct buf got = BUF_INIT, w = BUF_INIT;
        const char *s = want;

        for (size_t i = h->next; i < h->n; i++) {
                if (i > h->next)
                        buf_putc(&got, ';');
                describe(h->recs[i], &got);
        }
        while (*s) {
                const char *end = strchr(s, ';'), *colon = strchr(s, ':'), *at = strchr(s, '@');

                if (!end)
                        end = s + strlen(s);
                ck_assert_msg(colon && colon < end, "bad expectation \"%s\"", want);
                if (at && at < colon) {
                        buf_append(&w, s, (size_t)(end - s));
                } else {
                        buf_append(&w, s, (size_t)(colon - s));
                        buf_puts(&w, "@" TEST_SOURCE);
                        buf_append(&w, colon, (size_t)(end - colon));
                }
                s = end;
                if (*s == ';') {
                        buf_putc(&w, ';');
                        s++;
                }
        }
        ck_assert_msg(strcmp(got.data, w.data) == 0,
                      "line %d [%s]: emitted \"%s\", want \"%s\"", line, ctx,
                      got.data, w.data);
        h->next = h->n;
        buf_free(&got);
        buf_free(&w);
}

#define EXPECT(h, want) expect_seq((h), __LINE__, (want))
#define EXPECT_NONE(h) expect_seq((h), __LINE__, "")

/* The record emitted i-th (0-based, absolute). */
static struct pod_update *rec(struct h *h, size_t i)
{
        ck_assert_msg(i < h->n, "%s: record %zu not emitted (%zu records)", ctx, i, h->n);
        return h->recs[i];
}

/* The last emitted record's pod with this uid. */
static struct pod *last_pod(struct h *h, const char *uid)
{
        for (size_t i = h->n; i-- > 0;)
                for (size_t j = 0; j < h->recs[i]->n_pods; j++)
                        if (strcmp(pod_uid(h->recs[i]->pods[j]), uid) == 0)
                                return h->recs[i]->pods[j];
        ck_abort_msg("%s: no emitted pod with uid %s", ctx, uid);
        return NULL;
}

/* The stored version of a pod (borrowed from a SET kept alive by h). */
static struct pod *stored(struct h *h, const char *uid)
{
        struct pod_update *u = NULL;
        struct pod *found = NULL;

        ck_assert_int_eq(storage_merged(h->st, &u), 0);
        for (size_t j = 0; j < u->n_pods; j++)
                if (strcmp(pod_uid(u->pods[j]), uid) == 0)
                        found = u->pods[j];
        ck_assert_msg(found, "%s: uid %s not stored", ctx, uid);
        pod_ref(found);
        pod_update_free(u);
        /* Keep it alive in a dummy record owned by the harness. */
        {
                struct pod_update *keep = pod_update_new(POD_OP_SET, "(stored)");

                ck_assert_int_eq(pod_update_add(keep, found), 0);
                pod_unref(found);
                ck_assert(h->n < MAX_RECS);
                /* stored() records are not emissions: hide them behind next. */
                ck_assert_msg(h->next == h->n, "stored() with unchecked records pending");
                h->recs[h->n++] = keep;
                h->next = h->n;
        }
        return found;
}

/* ==== the kubelet's config_test.go, case by case ============================= */

/* TestInvalidPodFiltered.  Newer form: the same pod again is no update.
 * Older form (2017): a pod without UID/namespace was dropped by validation
 * in the merger; that validation is gone (3.2.2, not kept), so it is
 * stored under the empty UID. */
START_TEST(test_kubelet_invalid_pod_filtered)
{
        struct h h;

        ctx = "TestInvalidPodFiltered";
        h_init(&h, STORAGE_MODE_INCREMENTAL);
        SEND(&h, POD_OP_ADD, valid_pod("foo", "new"));
        EXPECT(&h, "ADD:foonew");
        SEND(&h, POD_OP_ADD, valid_pod("foo", "new"));
        EXPECT_NONE(&h);
        ck_assert_uint_eq(h.n_events, 0);

        SEND(&h, POD_OP_UPDATE, podf("{\"metadata\":{\"name\":\"foo\"}}"));
        EXPECT(&h, "ADD:");
        ck_assert_uint_eq(rec(&h, h.n - 1)->n_pods, 1);
        ck_assert_str_eq(pod_name(rec(&h, h.n - 1)->pods[0]), "foo");
        ck_assert_uint_eq(storage_count(h.st, TEST_SOURCE), 2);
        h_free(&h);
}
END_TEST

/* TestNewPodAddedSnapshot */
START_TEST(test_kubelet_new_pod_added_snapshot)
{
        struct h h;

        ctx = "TestNewPodAddedSnapshot";
        h_init(&h, STORAGE_MODE_SNAPSHOT);
        SEND(&h, POD_OP_ADD, valid_pod("foo", "new"));
        EXPECT(&h, "SET:foonew");
        ck_assert_int_eq(storage_sync(h.st), 0);
        EXPECT(&h, "SET@*:foonew");
        /* in Snapshot mode the update is a SET of everything */
        SEND(&h, POD_OP_ADD, valid_pod_spec("foo", "new", OTHER_SPEC));
        EXPECT(&h, "SET:foonew");
        {
                char *img = field(last_pod(&h, "foonew"), "spec", (const char *)NULL);

                ck_assert_msg(strstr(img, "\"bar\"") != NULL, "SET carries old spec: %s", img);
                free(img);
        }
        h_free(&h);
}
END_TEST

/* TestNewPodAddedDelete */
START_TEST(test_kubelet_new_pod_added_delete)
{
        struct h h;

        ctx = "TestNewPodAddedDelete";
        h_init(&h, STORAGE_MODE_INCREMENTAL);
        SEND(&h, POD_OP_ADD, valid_pod("foo", "new"));
        EXPECT(&h, "ADD:foonew");
        SEND(&h, POD_OP_DELETE,
             podf("{\"metadata\":{\"uid\":\"foonew\",\"name\":\"foo\",\"namespace\":\"new\","
                  "\"deletionTimestamp\":\"2025-01-01T00:00:00Z\"},\"spec\":" VALID_SPEC "}"));
        EXPECT(&h, "DELETE:foonew");
        ASSERT_FIELD(last_pod(&h, "foonew"), "\"2025-01-01T00:00:00Z\"", "metadata",
                     "deletionTimestamp");
        ck_assert(last_pod(&h, "foonew")->deleting);
        /* a graceful delete keeps the pod stored */
        ck_assert_uint_eq(storage_count(h.st, TEST_SOURCE), 1);
        h_free(&h);
}
END_TEST

/* TestNewPodAddedSetReconciled, for inbound ADD and SET. */
static void reconciled_pods(struct h *h, enum pod_op op, const char *status,
                            const char *ctr_name)
{
        char spec[256];

        snprintf(spec, sizeof(spec),
                 "{\"containers\":[{\"name\":\"%s\",\"image\":\"image\"}]}", ctr_name);
        SEND(h, op,
             podf("{\"metadata\":{\"uid\":\"changeable-pod-0new\",\"name\":\"changeable-pod-0\","
                  "\"namespace\":\"new\"},\"spec\":%s%s%s%s}",
                  spec, status ? ",\"status\":{\"message\":\"" : "", status ? status : "",
                  status ? "\"}" : ""),
             valid_pod("constant-pod-1", "new"), valid_pod("constant-pod-2", "new"));
}

START_TEST(test_kubelet_new_pod_added_set_reconciled)
{
        const enum pod_op ops[] = {POD_OP_ADD, POD_OP_SET};

        for (size_t i = 0; i < 2; i++) {
                struct h h;

                ctx = i == 0 ? "TestNewPodAddedSetReconciled (ADD)"
                             : "TestNewPodAddedSetReconciled (SET)";
                h_init(&h, STORAGE_MODE_INCREMENTAL);
                reconciled_pods(&h, POD_OP_SET, NULL, "ctr");
                EXPECT(&h, "ADD:changeable-pod-0new,constant-pod-1new,constant-pod-2new");
                /* status not changed: no reconcile */
                reconciled_pods(&h, ops[i], NULL, "ctr");
                EXPECT_NONE(&h);
                /* status changed, pod not updated: reconcile */
                reconciled_pods(&h, ops[i], "1298498081", "ctr");
                EXPECT(&h, "RECONCILE:changeable-pod-0new");
                ASSERT_FIELD(last_pod(&h, "changeable-pod-0new"), "{\"message\":\"1298498081\"}",
                             "status");
                /* status and spec changed: update, no reconcile */
                reconciled_pods(&h, ops[i], "2019727887", "1427131847");
                EXPECT(&h, "UPDATE:changeable-pod-0new");
                ASSERT_FIELD(last_pod(&h, "changeable-pod-0new"), "{\"message\":\"2019727887\"}",
                             "status");
                ASSERT_FIELD(last_pod(&h, "changeable-pod-0new"), "\"1427131847\"", "spec",
                             "containers", "0", "name");
                h_free(&h);
        }
}
END_TEST

/* TestInitialEmptySet, in the three modes. */
START_TEST(test_kubelet_initial_empty_set)
{
        static const struct {
                enum storage_mode mode;
                const char *first, *then;
        } cases[] = {
                {STORAGE_MODE_INCREMENTAL, "ADD:", "ADD:foonew"},
                {STORAGE_MODE_SNAPSHOT, "SET:", "SET:foonew"},
                {STORAGE_MODE_SNAPSHOT_AND_UPDATES, "SET:", "SET:foonew"},
        };

        for (size_t i = 0; i < 3; i++) {
                struct h h;

                ctx = mode_name(cases[i].mode);
                h_init(&h, cases[i].mode);
                SEND_EMPTY(&h, POD_OP_SET);
                EXPECT(&h, cases[i].first);
                /* later empty SETs are ignored */
                SEND_EMPTY(&h, POD_OP_SET);
                EXPECT_NONE(&h);
                SEND(&h, POD_OP_ADD, valid_pod("foo", "new"));
                EXPECT(&h, cases[i].then);
                h_free(&h);
        }
}
END_TEST

/* TestPodConfigRace: creating channels and asking seen_all_sources
 * interleaved (podmux runs both on one thread, so this checks they
 * interleave correctly, not locking). */
static int race_merge(void *data, const char *source, struct pod_update **u)
{
        ck_assert_int_eq(storage_apply(data, source, *u), 0);
        return 0;
}

START_TEST(test_kubelet_pod_config_race)
{
        struct h h;
        struct mux *m = NULL;
        const char *const seen[] = {TEST_SOURCE};

        ctx = "TestPodConfigRace";
        h_init(&h, STORAGE_MODE_INCREMENTAL);
        ck_assert_int_eq(mux_new(NULL, race_merge, h.st, &m), 0);
        for (int i = 0; i < 100; i++) {
                struct mux_channel *ch = NULL;
                char name[16];
                size_t n = 0;
                const char *const *srcs;

                snprintf(name, sizeof(name), "%d", i);
                ck_assert_int_eq(mux_channel(m, name, &ch), 0);
                srcs = mux_sources(m, &n);
                ck_assert_uint_eq(n, (size_t)i + 1);
                /* the consumer has seen only "test"; no source sent a SET */
                ck_assert(!storage_seen_all(h.st, srcs, n));
                ck_assert(storage_seen_all(h.st, seen, 0));
        }
        mux_free(m);
        h_free(&h);
}
END_TEST

/* TestPodRestore: the classic RESTORE op (value 6 while it existed) is no
 * longer accepted; like any unknown op it is logged and ignored, emits
 * nothing and does not mark the source seen. */
START_TEST(test_kubelet_pod_restore)
{
        struct h h;

        ctx = "TestPodRestore";
        h_init(&h, STORAGE_MODE_INCREMENTAL);
        ck_assert_int_eq(send_op(&h, POD_SOURCE_API, (enum pod_op)6,
                                 valid_pod("api-server", "kube-default"), (struct pod *)NULL),
                         0);
        EXPECT_NONE(&h);
        ck_assert_uint_eq(storage_total(h.st), 0);
        ck_assert(!storage_source_seen(h.st, POD_SOURCE_API));
        ck_assert_uint_eq(h.n_events, 1);
        ck_assert_str_eq(h.events[0].source, POD_SOURCE_API);
        h_free(&h);
}
END_TEST

/* ==== 3.7 decision table, every row in every mode ============================ */

struct row {
        const char *what;
        /* the inbound ops this row is run with (0-terminated) */
        enum pod_op ops[5];
        /* the record sent after the setup SET [a, b] */
        struct pv pods[3];
        size_t n_pods;
        /* expected emissions per mode: incremental, snapshot, snapshot-and-updates */
        const char *inc, *snap, *sau;
        /* the stored pod a afterwards (NULL image: a is gone) */
        const char *a_image, *a_phase;
        size_t total;
};

#define UPSERTS {POD_OP_SET, POD_OP_ADD, POD_OP_UPDATE, POD_OP_DELETE, (enum pod_op)-1}
#define PA {.uid = "a", .phase = "Pending"}
#define PB {.uid = "b", .phase = "Pending"}
#define DT "2025-01-01T00:00:00Z"
/* A non-local annotation, for tests that must not depend on how a pod
 * without annotations compares after a change (see
 * test_no_spurious_update_after_change). */
#define K "{\"k\":\"v\"}"

static const struct row rows[] = {
        {"not stored, no deletionTimestamp -> ADD", UPSERTS,
         {PA, PB, {.uid = "n"}}, 3,
         "ADD:n", "SET:a,b,n", "SET:a,b,n", "img", "Pending", 3},
        {"not stored, deletionTimestamp -> ADD (even for inbound DELETE)", UPSERTS,
         {PA, PB, {.uid = "n", .dt = DT}}, 3,
         "ADD:n", "SET:a,b,n", "SET:a,b,n", "img", "Pending", 3},
        {"stored, equal -> nothing", UPSERTS,
         {PA, PB}, 2,
         "", "", "", "img", "Pending", 2},
        {"stored, status only -> RECONCILE", UPSERTS,
         {{.uid = "a", .phase = "Running"}, PB}, 2,
         "RECONCILE:a", "", "", "img", "Running", 2},
        {"stored, semantic, no deletionTimestamp, same status -> UPDATE", UPSERTS,
         {{.uid = "a", .phase = "Pending", .image = "v2"}, PB}, 2,
         "UPDATE:a", "SET:a,b", "UPDATE:a", "v2", "Pending", 2},
        {"stored, semantic, no deletionTimestamp, status differs -> UPDATE", UPSERTS,
         {{.uid = "a", .phase = "Running", .image = "v2"}, PB}, 2,
         "UPDATE:a", "SET:a,b", "UPDATE:a", "v2", "Running", 2},
        {"stored, semantic (labels), status differs -> UPDATE", UPSERTS,
         {{.uid = "a", .phase = "Running", .labels = "{\"k\":\"v\"}"}, PB}, 2,
         "UPDATE:a", "SET:a,b", "UPDATE:a", "img", "Running", 2},
        {"stored, deletionTimestamp, same status -> DELETE", UPSERTS,
         {{.uid = "a", .phase = "Pending", .dt = DT}, PB}, 2,
         "DELETE:a", "SET:a,b", "DELETE:a", "img", "Pending", 2},
        {"stored, deletionTimestamp, status differs -> DELETE", UPSERTS,
         {{.uid = "a", .phase = "Succeeded", .dt = DT}, PB}, 2,
         "DELETE:a", "SET:a,b", "DELETE:a", "img", "Succeeded", 2},
        {"stored, absent from an inbound SET -> REMOVE", {POD_OP_SET, (enum pod_op)-1},
         {PA}, 1,
         "REMOVE:b", "SET:a", "SET:a", "img", "Pending", 1},
        {"stored, listed in inbound REMOVE -> REMOVE", {POD_OP_REMOVE, (enum pod_op)-1},
         {PB}, 1,
         "REMOVE:b", "SET:a", "SET:a", "img", "Pending", 1},
        {"not stored, listed in inbound REMOVE -> nothing", {POD_OP_REMOVE, (enum pod_op)-1},
         {{.uid = "zz"}}, 1,
         "", "", "", "img", "Pending", 2},
        {"stored, listed in inbound REMOVE with other content -> REMOVE (by UID)",
         {POD_OP_REMOVE, (enum pod_op)-1},
         {{.uid = "a", .name = "renamed", .image = "v9"}}, 1,
         "REMOVE:a", "SET:b", "SET:b", NULL, NULL, 1},
};

START_TEST(test_decision_table)
{
        static const enum storage_mode modes[] = {
                STORAGE_MODE_INCREMENTAL, STORAGE_MODE_SNAPSHOT,
                STORAGE_MODE_SNAPSHOT_AND_UPDATES,
        };
        char where[256];

        for (size_t mi = 0; mi < 3; mi++) {
                for (size_t ri = 0; ri < sizeof(rows) / sizeof(rows[0]); ri++) {
                        const struct row *r = &rows[ri];

                        for (size_t oi = 0; (int)r->ops[oi] != -1; oi++) {
                                struct h h;
                                struct pod_update *u;
                                const char *want;

                                snprintf(where, sizeof(where), "mode %s, row \"%s\", inbound %s",
                                         mode_name(modes[mi]), r->what,
                                         pod_op_to_string(r->ops[oi]));
                                ctx = where;
                                h_init(&h, modes[mi]);
                                SEND(&h, POD_OP_SET, POD(.uid = "a", .phase = "Pending"),
                                     POD(.uid = "b", .phase = "Pending"));
                                EXPECT(&h, modes[mi] == STORAGE_MODE_INCREMENTAL ? "ADD:a,b"
                                                                                 : "SET:a,b");
                                fake_now += 1000000;

                                u = pod_update_new(r->ops[oi], TEST_SOURCE);
                                for (size_t pi = 0; pi < r->n_pods; pi++) {
                                        struct pod *p = pod_of(r->pods[pi]);

                                        ck_assert_int_eq(pod_update_add(u, p), 0);
                                        pod_unref(p);
                                }
                                ck_assert_int_eq(storage_merge(h.st, TEST_SOURCE, u), 0);
                                want = modes[mi] == STORAGE_MODE_INCREMENTAL ? r->inc
                                       : modes[mi] == STORAGE_MODE_SNAPSHOT ? r->snap
                                                                            : r->sau;
                                EXPECT(&h, want);
                                ck_assert_msg(storage_total(h.st) == r->total,
                                              "%s: %zu pods stored, want %zu", ctx,
                                              storage_total(h.st), r->total);
                                if (r->a_image) {
                                        struct pod *a = stored(&h, "a");
                                        char img[64], ph[64];

                                        snprintf(img, sizeof(img), "\"%s\"", r->a_image);
                                        snprintf(ph, sizeof(ph), "\"%s\"", r->a_phase);
                                        ASSERT_FIELD(a, img, "spec", "containers", "0", "image");
                                        ASSERT_FIELD(a, ph, "status", "phase");
                                        /* first-seen time from the setup */
                                        ASSERT_FIELD(a, "\"2025-01-01T00:00:00Z\"", "metadata",
                                                     "annotations", SEEN_KEY);
                                }
                                /* emitted pods carry source and seen */
                                for (size_t i = 0; i < h.n; i++)
                                        for (size_t j = 0; j < h.recs[i]->n_pods; j++) {
                                                const struct pod *p = h.recs[i]->pods[j];
                                                char seen[POD_SEEN_MAX];

                                                ck_assert_msg(p->source && strcmp(p->source, TEST_SOURCE) == 0,
                                                              "%s: pod %s source %s", ctx, pod_uid(p),
                                                              p->source ? p->source : "(null)");
                                                ck_assert_msg(pod_seen(p, seen) != NULL, "%s: pod %s has no seen", ctx,
                                                              pod_uid(p));
                                        }
                                h_free(&h);
                        }
                }
        }
        ctx = "";
}
END_TEST

/* ==== 3.8 worked example, every mode, plain and annotated pods ============== */

struct step {
        const char *source;
        const char *pods; /* letters: a b B(b') c C(c') d D(d'') */
        const char *inc, *snap, *sau;
};

static const struct step worked[] = {
        {TEST_SOURCE, "abc", "ADD:a,b,c", "SET:a,b,c", "SET:a,b,c"},
        {TEST_SOURCE, "abc", "", "", ""},
        {TEST_SOURCE, "aBcd", "ADD:d;UPDATE:b", "SET:a,b,c,d", "SET:a,b,c,d;UPDATE:b"},
        {TEST_SOURCE, "aBCd", "RECONCILE:c", "", ""},
        {TEST_SOURCE, "BCd", "REMOVE:a", "SET:b,c,d", "SET:b,c,d"},
        {TEST_SOURCE, "BCD", "DELETE:d", "SET:b,c,d", "DELETE:d"},
        {TEST_SOURCE, "", "REMOVE:b,c,d", "SET:", "SET:"},
        {"other", "", "ADD@other:", "SET@other:", "SET@other:"},
        {"other", "", "", "", ""},
        {TEST_SOURCE, "", "", "", ""},
};

static struct pod *worked_pod(char c, bool annotated)
{
        const char *ann = annotated ? "{\"kubernetes.io/config.hash\":\"h\"}" : NULL;

        switch (c) {
        case 'a': return POD(.uid = "a", .ann = ann, .phase = "Running");
        case 'b': return POD(.uid = "b", .ann = ann, .phase = "Running");
        case 'B': return POD(.uid = "b", .ann = ann, .phase = "Running", .image = "new");
        case 'c': return POD(.uid = "c", .ann = ann, .phase = "Running");
        case 'C': return POD(.uid = "c", .ann = ann, .phase = "Failed");
        case 'd': return POD(.uid = "d", .ann = ann, .phase = "Running");
        case 'D': return POD(.uid = "d", .ann = ann, .phase = "Running", .dt = DT);
        }
        ck_abort_msg("bad pod letter %c", c);
        return NULL;
}

static void run_worked_example(enum storage_mode mode, bool annotated)
{
        char where[160];
        struct h h;

        h_init(&h, mode);
        for (size_t i = 0; i < sizeof(worked) / sizeof(worked[0]); i++) {
                const struct step *s = &worked[i];
                struct pod_update *u = pod_update_new(POD_OP_SET, s->source);

                snprintf(where, sizeof(where), "worked example, mode %s, %s pods, step %zu (SET [%s] from %s)",
                         mode_name(mode), annotated ? "annotated" : "plain", i + 1, s->pods,
                         s->source);
                ctx = where;
                for (const char *c = s->pods; *c; c++) {
                        struct pod *p = worked_pod(*c, annotated);

                        ck_assert_int_eq(pod_update_add(u, p), 0);
                        pod_unref(p);
                }
                ck_assert_int_eq(storage_merge(h.st, s->source, u), 0);
                EXPECT(&h, mode == STORAGE_MODE_INCREMENTAL ? s->inc
                           : mode == STORAGE_MODE_SNAPSHOT  ? s->snap
                                                            : s->sau);
                fake_now += 1000000;
        }
        ck_assert(storage_source_seen(h.st, "other"));
        ck_assert_uint_eq(storage_total(h.st), 0);
        h_free(&h);
        ctx = "";
}

START_TEST(test_worked_example_incremental)
{
        run_worked_example(STORAGE_MODE_INCREMENTAL, false);
}
END_TEST

START_TEST(test_worked_example_snapshot)
{
        run_worked_example(STORAGE_MODE_SNAPSHOT, false);
}
END_TEST

START_TEST(test_worked_example_snapshot_and_updates)
{
        run_worked_example(STORAGE_MODE_SNAPSHOT_AND_UPDATES, false);
}
END_TEST

/* Same example with pods that carry a non-local annotation (as file and
 * HTTP pods do: config.hash). */
START_TEST(test_worked_example_annotated_all_modes)
{
        run_worked_example(STORAGE_MODE_INCREMENTAL, true);
        run_worked_example(STORAGE_MODE_SNAPSHOT, true);
        run_worked_example(STORAGE_MODE_SNAPSHOT_AND_UPDATES, true);
}
END_TEST

/* ==== scripted cases: records in, records out ================================ */

/*
 * Most cases are a fresh merger, records sent one by one, and after each
 * the records it must emit; a table holds them (test_scripts runs it), so
 * a case is its steps and nothing else.  Cases that look into the merger
 * beyond its records (counts, events, seen) stay functions below.
 */

#define SCRIPT_PODS 6
#define SCRIPT_CHECKS 3
#define SCRIPT_STEPS 6

/* The value at a path of keys separated by spaces (annotation keys hold
 * '.' and '/') in the last emitted pod with this uid. */
struct script_check {
        const char *uid, *path, *want;
};

struct script_step {
        bool sync;          /* storage_sync instead of a record */
        const char *source; /* NULL: TEST_SOURCE */
        enum pod_op op;
        struct pv pods[SCRIPT_PODS]; /* up to the first without a uid */
        const char *want;            /* as EXPECT; NULL ends the steps */
        struct script_check checks[SCRIPT_CHECKS];
        struct {
                bool on;
                size_t n;
        } total; /* pods stored afterwards, when on (TOTAL) */
};

struct script {
        const char *what;
        enum storage_mode mode;
        struct script_step steps[SCRIPT_STEPS];
};

/* The kubelet test's CreateValidPod(name, namespace): UID name+namespace,
 * a fixed spec (VALID_SPEC). */
#define VP(n, s)                                                                                                       \
        {                                                                                                              \
                .uid = n s, .name = n, .ns = s, .spec = VALID_SPEC                                                     \
        }
#define VP_SPEC(n, s, sp)                                                                                              \
        {                                                                                                              \
                .uid = n s, .name = n, .ns = s, .spec = sp                                                             \
        }
#define FOO2(key, v)                                                                                                   \
        {                                                                                                              \
                .uid = "foo2new", .name = "foo2", .ns = "new", .key = v, .spec = VALID_SPEC                            \
        }
#define TOTAL(n) .total = {true, n}
#define SYNCED(w)                                                                                                      \
        {                                                                                                              \
                .sync = true, .want = w                                                                                \
        }
#define CPU_SPEC(q)                                                                                                    \
        "{\"containers\":[{\"name\":\"c\",\"image\":\"i\","                                                            \
        "\"resources\":{\"limits\":{\"cpu\":\"" q "\"}}}]}"

static const struct script scripts[] = {
        {"TestNewPodAdded",
         STORAGE_MODE_INCREMENTAL,
         {{.op = POD_OP_ADD, .pods = {VP("foo", "new")}, .want = "ADD:foonew"}, SYNCED("SET@*:foonew")}},
        /* an empty namespace is not the merger's business */
        {"TestNewPodAddedInvalidNamespace",
         STORAGE_MODE_INCREMENTAL,
         {{.op = POD_OP_ADD, .pods = {VP("foo", "")}, .want = "ADD:foo"}, SYNCED("SET@*:foo")}},
        {"TestNewPodAddedDefaultNamespace",
         STORAGE_MODE_INCREMENTAL,
         {{.op = POD_OP_ADD, .pods = {VP("foo", "default")}, .want = "ADD:foodefault"}, SYNCED("SET@*:foodefault")}},
        {"TestNewPodAddedDifferentNamespaces",
         STORAGE_MODE_INCREMENTAL,
         {{.op = POD_OP_ADD, .pods = {VP("foo", "default")}, .want = "ADD:foodefault"},
          {.op = POD_OP_ADD, .pods = {VP("foo", "new")}, .want = "ADD:foonew"},
          SYNCED("SET@*:foodefault,foonew")}},
        /* container updates are separated as UPDATE */
        {"TestNewPodAddedSnapshotAndUpdates",
         STORAGE_MODE_SNAPSHOT_AND_UPDATES,
         {{.op = POD_OP_ADD, .pods = {VP("foo", "new")}, .want = "SET:foonew"},
          SYNCED("SET@*:foonew"),
          {.op = POD_OP_ADD,
           .pods = {VP_SPEC("foo", "new", OTHER_SPEC)},
           .want = "UPDATE:foonew",
           .checks = {{"foonew", "spec containers 0 name", "\"bar\""}}}}},
        {"TestNewPodAddedUpdatedSet",
         STORAGE_MODE_INCREMENTAL,
         {{.op = POD_OP_ADD,
           .pods = {VP("foo", "new"), VP("foo2", "new"), VP("foo3", "new")},
           .want = "ADD:foonew,foo2new,foo3new"},
          {.op = POD_OP_SET,
           .pods = {VP_SPEC("foo2", "new", OTHER_SPEC), VP("foo3", "new"), VP("foo4", "new")},
           .want = "REMOVE:foonew;ADD:foo4new;UPDATE:foo2new"}}},
        {"TestPodUpdateAnnotations",
         STORAGE_MODE_INCREMENTAL,
         {{.op = POD_OP_SET,
           .pods = {VP("foo1", "new"), FOO2(ann, "{\"kubernetes.io/blah\":\"blah\"}"), VP("foo3", "new")},
           .want = "ADD:foo1new,foo2new,foo3new",
           .checks = {{"foo2new", "metadata annotations kubernetes.io/blah", "\"blah\""}}},
          {.op = POD_OP_SET,
           .pods = {VP("foo1", "new"), FOO2(ann, "{\"kubernetes.io/blah\":\"superblah\"}"), VP("foo3", "new")},
           .want = "UPDATE:foo2new",
           .checks = {{"foo2new", "metadata annotations kubernetes.io/blah", "\"superblah\""}}},
          {.op = POD_OP_SET,
           .pods = {VP("foo1", "new"),
                    FOO2(ann, "{\"kubernetes.io/blah\":\"superblah\",\"kubernetes.io/otherblah\":\"doh\"}"),
                    VP("foo3", "new")},
           .want = "UPDATE:foo2new",
           .checks = {{"foo2new", "metadata annotations kubernetes.io/otherblah", "\"doh\""}}},
          {.op = POD_OP_SET,
           .pods = {VP("foo1", "new"), FOO2(ann, "{\"kubernetes.io/otherblah\":\"doh\"}"), VP("foo3", "new")},
           .want = "UPDATE:foo2new",
           .checks = {{"foo2new", "metadata annotations kubernetes.io/blah", "<absent>"},
                      {"foo2new", "metadata annotations " SOURCE_KEY, "\"" TEST_SOURCE "\""}}}}},
        {"TestPodUpdateLabels",
         STORAGE_MODE_INCREMENTAL,
         {{.op = POD_OP_SET, .pods = {FOO2(labels, "{\"key\":\"value\"}")}, .want = "ADD:foo2new"},
          {.op = POD_OP_SET,
           .pods = {FOO2(labels, "{\"key\":\"newValue\"}")},
           .want = "UPDATE:foo2new",
           .checks = {{"foo2new", "metadata labels", "{\"key\":\"newValue\"}"}}}}},
        /* After an UPDATE or a RECONCILE, sending the same version again is
         * "nothing" (3.3), also for pods without annotations. */
        {"no spurious update (pods without annotations)",
         STORAGE_MODE_INCREMENTAL,
         {{.op = POD_OP_SET,
           .pods = {{.uid = "a", .phase = "Pending"}, {.uid = "b", .phase = "Pending"}},
           .want = "ADD:a,b"},
          {.op = POD_OP_SET,
           .pods = {{.uid = "a", .phase = "Pending", .image = "v2"}, {.uid = "b", .phase = "Running"}},
           .want = "UPDATE:a;RECONCILE:b"},
          {.op = POD_OP_SET,
           .pods = {{.uid = "a", .phase = "Pending", .image = "v2"}, {.uid = "b", .phase = "Running"}},
           .want = ""},
          {.op = POD_OP_SET,
           .pods = {{.uid = "a", .phase = "Pending", .image = "v2"}, {.uid = "b", .phase = "Running"}},
           .want = ""}}},
        /* 3.4: absent and empty labels differ. */
        {"labels absent vs empty",
         STORAGE_MODE_INCREMENTAL,
         {{.op = POD_OP_SET, .pods = {{.uid = "a", .ann = K}}, .want = "ADD:a"},
          {.op = POD_OP_SET,
           .pods = {{.uid = "a", .ann = K, .labels = "{}"}},
           .want = "UPDATE:a",
           .checks = {{"a", "metadata labels", "{}"}}},
          {.op = POD_OP_SET, .pods = {{.uid = "a", .ann = K, .labels = "{}"}}, .want = ""},
          {.op = POD_OP_SET,
           .pods = {{.uid = "a", .ann = K}},
           .want = "UPDATE:a",
           .checks = {{"a", "metadata labels", "<absent>"}}},
          /* the same for a list in the spec */
          {.op = POD_OP_SET,
           .pods = {{.uid = "a",
                     .ann = K,
                     .spec = "{\"containers\":[{\"name\":\"c\",\"image\":\"img\"}],\"volumes\":[]}"}},
           .want = "UPDATE:a"}}},
        /* 3.4: quantities by spelling ("1" and "1000m" differ, as in Go). */
        {"quantities by spelling",
         STORAGE_MODE_INCREMENTAL,
         {{.op = POD_OP_SET, .pods = {{.uid = "a", .ann = K, .spec = CPU_SPEC("1")}}, .want = "ADD:a"},
          {.op = POD_OP_SET, .pods = {{.uid = "a", .ann = K, .spec = CPU_SPEC("1000m")}}, .want = "UPDATE:a"},
          {.op = POD_OP_SET, .pods = {{.uid = "a", .ann = K, .spec = CPU_SPEC("1000m")}}, .want = ""}}},
        /* 1.3 / 3.4: config.hash is not local; a hash change alone is
         * semantic. */
        {"config.hash change",
         STORAGE_MODE_INCREMENTAL,
         {{.source = POD_SOURCE_FILE,
           .op = POD_OP_SET,
           .pods = {{.uid = "a", .ann = "{\"kubernetes.io/config.hash\":\"h1\"}"}},
           .want = "ADD@file:a"},
          {.source = POD_SOURCE_FILE,
           .op = POD_OP_SET,
           .pods = {{.uid = "a", .ann = "{\"kubernetes.io/config.hash\":\"h2\"}"}},
           .want = "UPDATE@file:a",
           .checks = {{"a", "metadata annotations " POD_ANNOTATION_HASH, "\"h2\""}}}}},
        /* 3.6 Incremental step 5: the empty ADD marks a source's first SET
         * when A, U, D are empty, even if R or C are not; it comes before
         * RECONCILE. */
        {"ADD marker: pods delivered by ADD first, then a first SET without them",
         STORAGE_MODE_INCREMENTAL,
         {{.op = POD_OP_ADD, .pods = {{.uid = "x"}}, .want = "ADD:x"},
          {.op = POD_OP_SET, .want = "REMOVE:x;ADD:"},
          {.op = POD_OP_SET, .want = ""}}},
        {"ADD marker: first SET with only a status change",
         STORAGE_MODE_INCREMENTAL,
         {{.op = POD_OP_ADD, .pods = {{.uid = "x", .phase = "P"}}, .want = "ADD:x"},
          {.op = POD_OP_SET, .pods = {{.uid = "x", .phase = "Q"}}, .want = "ADD:;RECONCILE:x"}}},
        {"ADD marker: first SET with an UPDATE: no marker",
         STORAGE_MODE_INCREMENTAL,
         {{.op = POD_OP_ADD, .pods = {{.uid = "x"}}, .want = "ADD:x"},
          {.op = POD_OP_SET, .pods = {{.uid = "x", .image = "v2"}}, .want = "UPDATE:x"}}},
        {"ADD marker: first SET with a DELETE: no marker",
         STORAGE_MODE_INCREMENTAL,
         {{.op = POD_OP_ADD, .pods = {{.uid = "x"}}, .want = "ADD:x"},
          {.op = POD_OP_SET, .pods = {{.uid = "x", .dt = DT}}, .want = "DELETE:x"}}},
        {"ADD marker: first SET equal to what ADD delivered: the marker alone",
         STORAGE_MODE_INCREMENTAL,
         {{.op = POD_OP_ADD, .pods = {{.uid = "x"}}, .want = "ADD:x"},
          {.op = POD_OP_SET, .pods = {{.uid = "x"}}, .want = "ADD:"}}},
        /* snapshot modes: the first SET always emits the state, status-only
         * or not */
        {"ADD marker: snapshot-and-updates",
         STORAGE_MODE_SNAPSHOT_AND_UPDATES,
         {{.op = POD_OP_ADD, .pods = {{.uid = "x", .ann = K, .phase = "P"}}, .want = "SET:x"},
          {.op = POD_OP_SET,
           .pods = {{.uid = "x", .ann = K, .phase = "Q"}},
           .want = "SET:x",
           .checks = {{"x", "status", "{\"phase\":\"Q\"}"}}},
          {.op = POD_OP_SET, .pods = {{.uid = "x", .ann = K, .phase = "R"}}, .want = ""}}},
        {"ADD marker: snapshot",
         STORAGE_MODE_SNAPSHOT,
         {{.op = POD_OP_ADD, .pods = {{.uid = "x", .ann = K}}, .want = "SET:x"},
          {.op = POD_OP_SET, .pods = {{.uid = "x", .ann = K}}, .want = "SET:x"}}},
        /* 3.5: lists keep the incoming order (except REMOVE from a SET,
         * which podmux sorts); merged state is sorted. */
        {"record order",
         STORAGE_MODE_INCREMENTAL,
         {{.op = POD_OP_SET,
           .pods = {{.uid = "c", .ns = "z"}, {.uid = "a"}, {.uid = "b"}, {.uid = "e"}, {.uid = "d", .ns = "a"}},
           .want = "ADD:c,a,b,e,d"},
          {.op = POD_OP_SET,
           .pods = {{.uid = "e", .phase = "X"},
                    {.uid = "c", .ns = "z", .image = "2"},
                    {.uid = "b", .phase = "X"},
                    {.uid = "a", .image = "2"}},
           .want = "REMOVE:d;UPDATE:c,a;RECONCILE:e,b"},
          {.op = POD_OP_SET, .pods = {{.uid = "q"}}, .want = "REMOVE:a,b,e,c;ADD:q"}}},
        {"record order, snapshot-and-updates",
         STORAGE_MODE_SNAPSHOT_AND_UPDATES,
         {{.op = POD_OP_SET, .pods = {{.uid = "c", .ns = "z"}, {.uid = "a"}, {.uid = "b"}}, .want = "SET:a,b,c"},
          {.op = POD_OP_SET,
           .pods = {{.uid = "c", .ns = "z", .dt = DT}, {.uid = "a", .dt = DT}, {.uid = "b", .image = "2"}},
           .want = "UPDATE:b;DELETE:c,a"}}},
        {"TestNewPodAddedUpdatedRemoved",
         STORAGE_MODE_INCREMENTAL,
         {{.op = POD_OP_ADD, .pods = {VP("foo", "new")}, .want = "ADD:foonew"},
          /* an ADD of a known UID with a new spec becomes UPDATE */
          {.op = POD_OP_ADD, .pods = {VP_SPEC("foo", "new", OTHER_SPEC)}, .want = "UPDATE:foonew"},
          /* REMOVE carrying the old version removes by UID and emits the
           * stored (updated) version */
          {.op = POD_OP_REMOVE,
           .pods = {VP("foo", "new")},
           .want = "REMOVE:foonew",
           TOTAL(0),
           .checks = {{"foonew", "spec containers 0 name", "\"bar\""}}}}},
        /* 3.5: duplicate UIDs inside one record: the last one is
         * authoritative. */
        {"duplicate UIDs",
         STORAGE_MODE_INCREMENTAL,
         {{.op = POD_OP_SET,
           .pods = {{.uid = "u", .name = "n1", .image = "first"},
                    {.uid = "v"},
                    {.uid = "u", .name = "n2", .image = "last"}},
           .want = "ADD:v,u",
           TOTAL(2),
           .checks = {{"u", "metadata name", "\"n2\""}, {"u", "spec containers 0 image", "\"last\""}}},
          /* against a stored UID: one UPDATE with the last version */
          {.op = POD_OP_ADD,
           .pods = {{.uid = "u", .name = "n3", .image = "x"}, {.uid = "u", .name = "n4", .image = "y"}},
           .want = "UPDATE:u",
           .checks = {{"u", "spec containers 0 image", "\"y\""}}}}},
        /* The same pod (same UID and same full name) twice in one record:
         * the name rule keeps the first occurrence, so exactly one version
         * must survive. */
        {"same UID and name twice in one record",
         STORAGE_MODE_INCREMENTAL,
         {{.op = POD_OP_SET,
           .pods = {{.uid = "u", .image = "first"}, {.uid = "u", .image = "second"}},
           .want = "ADD:u",
           TOTAL(1),
           .checks = {{"u", "spec containers 0 image", "\"first\""}}},
          /* a stored pod sent twice in a SET must not be removed */
          {.op = POD_OP_SET,
           .pods = {{.uid = "u", .image = "first"}, {.uid = "u", .image = "first"}},
           .want = "",
           TOTAL(1)}}},
        /* The UID rule ("last one authoritative") must apply to the pods
         * that survive the name rule: here the last pod with UID u repeats
         * the name of an earlier pod and is dropped, so the first pod with
         * UID u must be kept (the kubelet drops names first, then merges
         * [u/a, v/b]). */
        {"last UID occurrence dropped by the name rule",
         STORAGE_MODE_INCREMENTAL,
         {{.op = POD_OP_SET,
           .pods = {{.uid = "u", .name = "a"}, {.uid = "v", .name = "b"}, {.uid = "u", .name = "b"}},
           .want = "ADD:u,v",
           TOTAL(2),
           .checks = {{"u", "metadata name", "\"a\""}}}}},
        /* 3.6: in snapshot modes the SET carries all pods of all sources,
         * with source = the merging source. */
        {"snapshot merged state",
         STORAGE_MODE_SNAPSHOT,
         {{.source = POD_SOURCE_FILE, .op = POD_OP_SET, .pods = {{.uid = "f", .ns = "b"}}, .want = "SET@file:f"},
          {.source = POD_SOURCE_API, .op = POD_OP_SET, .pods = {{.uid = "a", .ns = "c"}}, .want = "SET@api:f,a"},
          /* status-only: silent */
          {.source = POD_SOURCE_API, .op = POD_OP_SET, .pods = {{.uid = "a", .ns = "c", .phase = "R"}}, .want = ""},
          /* the silent status change is in the next SET */
          {.source = POD_SOURCE_FILE,
           .op = POD_OP_SET,
           .pods = {{.uid = "f", .ns = "b", .image = "2"}},
           .want = "SET@file:f,a",
           .checks = {{"a", "status", "{\"phase\":\"R\"}"},
                      {"a", "metadata annotations " SOURCE_KEY, "\"api\""},
                      {"f", "metadata annotations " SOURCE_KEY, "\"file\""}}}}},
};

static void script_check(struct h *h, const struct script_check *c)
{
        const char *keys[8];
        char path[256], *k = path;
        size_t n = 0;
        char *got;

        snprintf(path, sizeof(path), "%s", c->path);
        while (k && n < 7) {
                keys[n++] = k;
                k = strchr(k, ' ');
                if (k)
                        *k++ = '\0';
        }
        keys[n] = NULL;
        got = field_at(last_pod(h, c->uid), keys);
        ck_assert_msg(strcmp(got, c->want) == 0, "%s: field %s of pod %s = %s, want %s", ctx, c->path, c->uid, got,
                      c->want);
        free(got);
}

static void script_run(const struct script *sc)
{
        char where[192];
        struct h h;

        h_init(&h, sc->mode);
        for (size_t i = 0; i < SCRIPT_STEPS && sc->steps[i].want; i++) {
                const struct script_step *s = &sc->steps[i];
                const char *source = s->source ? s->source : TEST_SOURCE;

                snprintf(where, sizeof(where), "%s, step %zu", sc->what, i + 1);
                ctx = where;
                if (s->sync) {
                        ck_assert_int_eq(storage_sync(h.st), 0);
                } else {
                        struct pod_update *u = pod_update_new(s->op, source);

                        ck_assert_ptr_nonnull(u);
                        for (size_t j = 0; j < SCRIPT_PODS && s->pods[j].uid; j++) {
                                struct pod *p = pod_of(s->pods[j]);

                                ck_assert_int_eq(pod_update_add(u, p), 0);
                                pod_unref(p);
                        }
                        ck_assert_int_eq(storage_merge(h.st, source, u), 0);
                }
                EXPECT(&h, s->want);
                for (size_t j = 0; j < SCRIPT_CHECKS && s->checks[j].uid; j++)
                        script_check(&h, &s->checks[j]);
                ck_assert_msg(!s->total.on || storage_total(h.st) == s->total.n, "%s: %zu pods stored, want %zu", ctx,
                              storage_total(h.st), s->total.n);
        }
        h_free(&h);
        ctx = "";
}

START_TEST(test_scripts)
{
        for (size_t i = 0; i < sizeof(scripts) / sizeof(scripts[0]); i++)
                script_run(&scripts[i]);
}
END_TEST

/* ==== finer rules ============================================================= */

/* 2.1: emitted records are values.  Pods are immutable, so check that a pod
 * emitted earlier still renders the old content after a later update, and
 * that dropping emitted records does not disturb the store. */
START_TEST(test_emitted_pods_independent)
{
        struct h h;
        struct pod *sent, *first;
        struct pod_update *snap = NULL;

        ctx = "emitted pods independent";
        h_init(&h, STORAGE_MODE_INCREMENTAL);
        fake_now = T0;
        sent = POD(.uid = "a", .image = "v1", .phase = "Pending");
        pod_ref(sent);
        SEND(&h, POD_OP_SET, sent);
        EXPECT(&h, "ADD:a");
        first = rec(&h, 0)->pods[0];
        ck_assert_int_eq(storage_merged(h.st, &snap), 0);

        SEND(&h, POD_OP_SET, POD(.uid = "a", .image = "v2", .phase = "Running",
                                 .labels = "{\"x\":\"y\"}"));
        EXPECT(&h, "UPDATE:a");
        ck_assert_ptr_ne(rec(&h, 1)->pods[0], first);
        ASSERT_FIELD(first, "\"v1\"", "spec", "containers", "0", "image");
        ASSERT_FIELD(first, "{\"phase\":\"Pending\"}", "status");
        ASSERT_FIELD(first, "<absent>", "metadata", "labels");
        ASSERT_FIELD(snap->pods[0], "\"v1\"", "spec", "containers", "0", "image");
        ASSERT_FIELD(rec(&h, 1)->pods[0], "\"v2\"", "spec", "containers", "0", "image");

        /* The merger stored the sender's own pod, stamped once; the
         * update built a new one and left it as it was. */
        ck_assert_ptr_eq(first, sent);
        ck_assert(sent->stamped);
        ck_assert_str_eq(sent->source, TEST_SOURCE);
        ASSERT_FIELD(sent, "\"" TEST_SOURCE "\"", "metadata", "annotations", SOURCE_KEY);
        ASSERT_FIELD(sent, "\"2025-01-01T00:00:00Z\"", "metadata", "annotations", SEEN_KEY);

        /* Stamped pods are never stamped again: the same pod sent again
         * once the merger has let it go is stored as a stamped copy, and
         * the records that carry the original still render its first
         * stamp. */
        SEND_EMPTY(&h, POD_OP_SET);
        EXPECT(&h, "REMOVE:a");
        fake_now = T0 + 7000000;
        SEND(&h, POD_OP_SET, pod_ref(sent));
        EXPECT(&h, "ADD:a");
        ck_assert_ptr_ne(rec(&h, 3)->pods[0], sent);
        ck_assert_ptr_eq(pod_text(rec(&h, 3)->pods[0]), pod_text(sent));
        ASSERT_FIELD(rec(&h, 3)->pods[0], "\"2025-01-01T00:00:07Z\"", "metadata", "annotations", SEEN_KEY);
        ASSERT_FIELD(first, "\"2025-01-01T00:00:00Z\"", "metadata", "annotations", SEEN_KEY);
        fake_now = T0;
        SEND(&h, POD_OP_SET, POD(.uid = "a", .image = "v2", .phase = "Running", .labels = "{\"x\":\"y\"}"));
        EXPECT(&h, "UPDATE:a");
        pod_unref(sent);

        /* Consumers dropping everything they got leaves the store intact. */
        pod_update_free(snap);
        for (size_t i = 0; i < h.n; i++)
                pod_update_free(h.recs[i]);
        h.n = h.next = 0;
        ASSERT_FIELD(stored(&h, "a"), "\"v2\"", "spec", "containers", "0", "image");
        SEND(&h, POD_OP_SET, POD(.uid = "a", .image = "v3", .phase = "Running",
                                 .labels = "{\"x\":\"y\"}"));
        EXPECT(&h, "UPDATE:a");
        h_free(&h);
}
END_TEST

/* 1.3: config.seen is stamped at the first ADD and never changes after. */
START_TEST(test_seen_never_changes)
{
        struct h h;
        const char *t0 = "\"2025-01-01T00:00:00.25Z\"";

        ctx = "config.seen never changes";
        h_init(&h, STORAGE_MODE_INCREMENTAL);
        fake_now = T0 + 250000;
        /* an incoming config.seen is replaced by now on ADD */
        SEND(&h, POD_OP_SET, POD(.uid = "a", .phase = "P",
                                 .ann = "{\"kubernetes.io/config.seen\":\"bogus\",\"x\":\"1\"}"));
        EXPECT(&h, "ADD:a");
        ASSERT_FIELD(last_pod(&h, "a"), t0, "metadata", "annotations", SEEN_KEY);

        fake_now += 3600000000ull;
        SEND(&h, POD_OP_UPDATE, POD(.uid = "a", .phase = "P", .image = "v2",
                                    .ann = "{\"kubernetes.io/config.seen\":\"later\",\"x\":\"1\"}"));
        EXPECT(&h, "UPDATE:a");
        ASSERT_FIELD(last_pod(&h, "a"), t0, "metadata", "annotations", SEEN_KEY);

        fake_now += 1000000;
        SEND(&h, POD_OP_SET, POD(.uid = "a", .phase = "Q", .image = "v2",
                                 .ann = "{\"x\":\"1\"}"));
        EXPECT(&h, "RECONCILE:a");
        ASSERT_FIELD(last_pod(&h, "a"), t0, "metadata", "annotations", SEEN_KEY);

        fake_now += 1000000;
        SEND(&h, POD_OP_DELETE, POD(.uid = "a", .phase = "Q", .image = "v2", .dt = DT,
                                    .ann = "{\"x\":\"1\"}"));
        EXPECT(&h, "DELETE:a");
        ASSERT_FIELD(last_pod(&h, "a"), t0, "metadata", "annotations", SEEN_KEY);

        ck_assert_int_eq(storage_sync(h.st), 0);
        EXPECT(&h, "SET@*:a");
        ASSERT_FIELD(last_pod(&h, "a"), t0, "metadata", "annotations", SEEN_KEY);

        SEND_EMPTY(&h, POD_OP_SET);
        EXPECT(&h, "REMOVE:a");
        ASSERT_FIELD(last_pod(&h, "a"), t0, "metadata", "annotations", SEEN_KEY);

        /* Removed and added again: a new first-seen time. */
        fake_now = T0 + 7200000000ull;
        SEND(&h, POD_OP_SET, POD(.uid = "a"));
        EXPECT(&h, "ADD:a");
        ASSERT_FIELD(last_pod(&h, "a"), "\"2025-01-01T02:00:00Z\"", "metadata", "annotations",
                     SEEN_KEY);
        h_free(&h);
}
END_TEST

/* 1.3: RFC 3339, fraction trimmed of trailing zeros, "Z". */
START_TEST(test_seen_format)
{
        static const struct {
                uint64_t now;
                const char *want;
        } cases[] = {
                {T0, "\"2025-01-01T00:00:00Z\""},
                {T0 + 123456, "\"2025-01-01T00:00:00.123456Z\""},
                {T0 + 100000, "\"2025-01-01T00:00:00.1Z\""},
                {T0 + 1, "\"2025-01-01T00:00:00.000001Z\""},
                {T0 + 86399999990ull, "\"2025-01-01T23:59:59.99999Z\""},
        };
        struct h h;
        char uid[8];

        ctx = "config.seen format";
        h_init(&h, STORAGE_MODE_INCREMENTAL);
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                fake_now = cases[i].now;
                snprintf(uid, sizeof(uid), "p%zu", i);
                SEND(&h, POD_OP_ADD, POD(.uid = uid));
                ASSERT_FIELD(last_pod(&h, uid), cases[i].want, "metadata", "annotations", SEEN_KEY);
        }
        h_free(&h);
}
END_TEST

/* 1.3: config.source is overwritten on every incoming pod. */
START_TEST(test_source_annotation_overwritten)
{
        struct h h;

        ctx = "source annotation overwritten";
        h_init(&h, STORAGE_MODE_INCREMENTAL);
        /* a mirror pod coming back from the API with "file" becomes "api" */
        SEND_FROM(&h, POD_SOURCE_API, POD_OP_SET,
                  POD(.uid = "m", .ann = "{\"kubernetes.io/config.source\":\"file\","
                                         "\"kubernetes.io/config.mirror\":\"h\"}"));
        EXPECT(&h, "ADD@api:m");
        ASSERT_FIELD(last_pod(&h, "m"), "\"api\"", "metadata", "annotations", SOURCE_KEY);
        ASSERT_FIELD(last_pod(&h, "m"), "\"h\"", "metadata", "annotations", POD_ANNOTATION_MIRROR);
        SEND_FROM(&h, POD_SOURCE_API, POD_OP_SET,
                  POD(.uid = "m", .image = "v2",
                      .ann = "{\"kubernetes.io/config.source\":\"http\","
                             "\"kubernetes.io/config.mirror\":\"h\"}"));
        EXPECT(&h, "UPDATE@api:m");
        ASSERT_FIELD(last_pod(&h, "m"), "\"api\"", "metadata", "annotations", SOURCE_KEY);
        /* a pod without annotations gets the map */
        SEND_FROM(&h, POD_SOURCE_FILE, POD_OP_ADD, POD(.uid = "f"));
        EXPECT(&h, "ADD@file:f");
        ASSERT_FIELD(last_pod(&h, "f"), "\"file\"", "metadata", "annotations", SOURCE_KEY);
        /* only source differs: no change at all */
        SEND_FROM(&h, POD_SOURCE_API, POD_OP_SET,
                  POD(.uid = "m", .image = "v2",
                      .ann = "{\"kubernetes.io/config.source\":\"file\","
                             "\"kubernetes.io/config.mirror\":\"h\"}"));
        EXPECT_NONE(&h);
        h_free(&h);
}
END_TEST

/* 3.3: on UPDATE the annotations become ref's, then existing's local keys
 * win. */
START_TEST(test_annotations_rule_on_update)
{
        struct h h;
        struct pod *p;

        ctx = "annotations rule on update";
        h_init(&h, STORAGE_MODE_INCREMENTAL);
        SEND_FROM(&h, POD_SOURCE_API, POD_OP_SET,
                  POD(.uid = "a", .ann = "{\"x\":\"1\",\"gone\":\"g\","
                                         "\"kubernetes.io/config.mirror\":\"M1\"}"));
        EXPECT(&h, "ADD@api:a");
        fake_now += 1000000;
        SEND_FROM(&h, POD_SOURCE_API, POD_OP_SET,
                  POD(.uid = "a", .ann = "{\"x\":\"2\",\"y\":\"3\","
                                         "\"kubernetes.io/config.source\":\"file\","
                                         "\"kubernetes.io/config.seen\":\"bogus\","
                                         "\"kubernetes.io/config.mirror\":\"M2\"}"));
        EXPECT(&h, "UPDATE@api:a");
        p = last_pod(&h, "a");
        ASSERT_FIELD(p,
                     "{\"kubernetes.io/config.mirror\":\"M1\","
                     "\"kubernetes.io/config.seen\":\"2025-01-01T00:00:00Z\","
                     "\"kubernetes.io/config.source\":\"api\",\"x\":\"2\",\"y\":\"3\"}",
                     "metadata", "annotations");
        /* ref without the mirror: existing's mirror stays (a local key) */
        SEND_FROM(&h, POD_SOURCE_API, POD_OP_SET, POD(.uid = "a", .ann = "{\"y\":\"3\"}"));
        EXPECT(&h, "UPDATE@api:a");
        ASSERT_FIELD(last_pod(&h, "a"),
                     "{\"kubernetes.io/config.mirror\":\"M1\","
                     "\"kubernetes.io/config.seen\":\"2025-01-01T00:00:00Z\","
                     "\"kubernetes.io/config.source\":\"api\",\"y\":\"3\"}",
                     "metadata", "annotations");

        /* existing without a mirror: ref's mirror is taken */
        SEND_FROM(&h, POD_SOURCE_API, POD_OP_ADD, POD(.uid = "b", .ann = "{\"k\":\"1\"}"));
        EXPECT(&h, "ADD@api:b");
        SEND_FROM(&h, POD_SOURCE_API, POD_OP_ADD,
                  POD(.uid = "b", .ann = "{\"k\":\"2\",\"kubernetes.io/config.mirror\":\"M\"}"));
        EXPECT(&h, "UPDATE@api:b");
        ASSERT_FIELD(last_pod(&h, "b"), "\"M\"", "metadata", "annotations", POD_ANNOTATION_MIRROR);

        /* a change of a local key alone is no change */
        SEND_FROM(&h, POD_SOURCE_API, POD_OP_ADD,
                  POD(.uid = "b", .ann = "{\"k\":\"2\",\"kubernetes.io/config.mirror\":\"other\"}"));
        EXPECT_NONE(&h);
        h_free(&h);
}
END_TEST

/* 1.1: metadata outside the copied set stays at the first version's value. */
START_TEST(test_frozen_metadata)
{
        struct h h;

        ctx = "frozen metadata";
        h_init(&h, STORAGE_MODE_INCREMENTAL);
        SEND(&h, POD_OP_SET,
             POD(.uid = "a", .ann = K, .phase = "P",
                 .meta = "\"resourceVersion\":\"1\",\"generation\":1,"
                         "\"creationTimestamp\":\"2025-01-01T00:00:00Z\","
                         "\"finalizers\":[\"f1\"],\"ownerReferences\":[{\"name\":\"o1\"}]"));
        EXPECT(&h, "ADD:a");
        SEND(&h, POD_OP_SET,
             POD(.uid = "a", .ann = K, .phase = "P", .image = "v2", .labels = "{\"l\":\"2\"}",
                 .meta = "\"resourceVersion\":\"2\",\"generation\":2,"
                         "\"creationTimestamp\":\"2026-01-01T00:00:00Z\","
                         "\"finalizers\":[\"f2\"],\"ownerReferences\":[],"
                         "\"deletionGracePeriodSeconds\":30"));
        EXPECT(&h, "UPDATE:a");
        ASSERT_FIELD(last_pod(&h, "a"), "\"1\"", "metadata", "resourceVersion");
        ASSERT_FIELD(last_pod(&h, "a"), "\"2025-01-01T00:00:00Z\"", "metadata", "creationTimestamp");
        ASSERT_FIELD(last_pod(&h, "a"), "[\"f1\"]", "metadata", "finalizers");
        ASSERT_FIELD(last_pod(&h, "a"), "[{\"name\":\"o1\"}]", "metadata", "ownerReferences");
        /* copied: generation (newer code), labels, grace period, spec */
        ASSERT_FIELD(last_pod(&h, "a"), "2", "metadata", "generation");
        ASSERT_FIELD(last_pod(&h, "a"), "{\"l\":\"2\"}", "metadata", "labels");
        ASSERT_FIELD(last_pod(&h, "a"), "30", "metadata", "deletionGracePeriodSeconds");
        ASSERT_FIELD(last_pod(&h, "a"), "\"v2\"", "spec", "containers", "0", "image");

        /* RECONCILE copies only the status */
        SEND(&h, POD_OP_SET,
             POD(.uid = "a", .ann = K, .phase = "Q", .image = "v2", .labels = "{\"l\":\"2\"}",
                 .meta = "\"resourceVersion\":\"3\",\"generation\":3,"
                         "\"deletionGracePeriodSeconds\":30"));
        EXPECT(&h, "RECONCILE:a");
        ASSERT_FIELD(last_pod(&h, "a"), "\"1\"", "metadata", "resourceVersion");
        ASSERT_FIELD(last_pod(&h, "a"), "2", "metadata", "generation");
        ASSERT_FIELD(last_pod(&h, "a"), "[\"f1\"]", "metadata", "finalizers");
        ASSERT_FIELD(last_pod(&h, "a"), "{\"phase\":\"Q\"}", "status");
        /* generation or resourceVersion alone is no change */
        SEND(&h, POD_OP_SET,
             POD(.uid = "a", .ann = K, .phase = "Q", .image = "v2", .labels = "{\"l\":\"2\"}",
                 .meta = "\"resourceVersion\":\"4\",\"generation\":4,"
                         "\"deletionGracePeriodSeconds\":30"));
        EXPECT_NONE(&h);
        h_free(&h);
}
END_TEST

/* 3.4: deletionTimestamp compared as an instant; 3.7: DELETE repeats on
 * every later semantic change. */
START_TEST(test_deletion_timestamp_instant)
{
        struct h h;

        ctx = "deletionTimestamp instant";
        h_init(&h, STORAGE_MODE_INCREMENTAL);
        SEND(&h, POD_OP_SET, POD(.uid = "a", .ann = "{\"k\":\"v\"}", .phase = "Running"));
        EXPECT(&h, "ADD:a");
        SEND(&h, POD_OP_SET, POD(.uid = "a", .ann = "{\"k\":\"v\"}", .phase = "Running",
                                 .dt = "2025-01-01T00:00:00Z"));
        EXPECT(&h, "DELETE:a");
        /* the same instant spelled differently: nothing */
        SEND(&h, POD_OP_SET, POD(.uid = "a", .ann = "{\"k\":\"v\"}", .phase = "Running",
                                 .dt = "2025-01-01T01:00:00+01:00"));
        EXPECT_NONE(&h);
        /* ... but a status change there is a RECONCILE */
        SEND(&h, POD_OP_SET, POD(.uid = "a", .ann = "{\"k\":\"v\"}", .phase = "Succeeded",
                                 .dt = "2025-01-01T01:00:00+01:00"));
        EXPECT(&h, "RECONCILE:a");
        /* another semantic change while deleting: DELETE again */
        SEND(&h, POD_OP_SET, POD(.uid = "a", .ann = "{\"k\":\"v\"}", .phase = "Succeeded",
                                 .dt = "2025-01-01T00:00:00Z", .labels = "{\"x\":\"1\"}"));
        EXPECT(&h, "DELETE:a");
        /* a different instant: DELETE again */
        SEND(&h, POD_OP_SET, POD(.uid = "a", .ann = "{\"k\":\"v\"}", .phase = "Succeeded",
                                 .dt = "2025-01-01T00:00:01Z", .labels = "{\"x\":\"1\"}"));
        EXPECT(&h, "DELETE:a");
        ASSERT_FIELD(last_pod(&h, "a"), "\"2025-01-01T00:00:01Z\"", "metadata", "deletionTimestamp");
        /* deletion withdrawn: UPDATE, timestamp gone */
        SEND(&h, POD_OP_SET, POD(.uid = "a", .ann = "{\"k\":\"v\"}", .phase = "Succeeded",
                                 .labels = "{\"x\":\"1\"}"));
        EXPECT(&h, "UPDATE:a");
        ASSERT_FIELD(last_pod(&h, "a"), "<absent>", "metadata", "deletionTimestamp");
        ck_assert(!last_pod(&h, "a")->deleting);
        h_free(&h);
}
END_TEST

/* 1.2: the same UID in two sources is two unrelated entries. */
START_TEST(test_sources_kept_apart)
{
        static const enum storage_mode modes[] = {
                STORAGE_MODE_INCREMENTAL, STORAGE_MODE_SNAPSHOT,
                STORAGE_MODE_SNAPSHOT_AND_UPDATES,
        };
        static const char *const want[][5] = {
                {"ADD@file:u1", "ADD@api:u1", "REMOVE@api:u1", "ADD@http:u2", "REMOVE@http:u2"},
                {"SET@file:u1", "SET@api:u1,u1", "SET@api:u1", "SET@http:u1,u2", "SET@http:u1"},
                {"SET@file:u1", "SET@api:u1,u1", "SET@api:u1", "SET@http:u1,u2", "SET@http:u1"},
        };

        for (size_t mi = 0; mi < 3; mi++) {
                struct h h;
                char where[64];

                snprintf(where, sizeof(where), "sources kept apart, mode %s", mode_name(modes[mi]));
                ctx = where;
                h_init(&h, modes[mi]);
                SEND_FROM(&h, POD_SOURCE_FILE, POD_OP_SET, POD(.uid = "u1", .image = "f"));
                EXPECT(&h, want[mi][0]);
                /* same UID, other content, other source: an ADD, not an UPDATE */
                SEND_FROM(&h, POD_SOURCE_API, POD_OP_SET, POD(.uid = "u1", .image = "a"));
                EXPECT(&h, want[mi][1]);
                ck_assert_uint_eq(storage_total(h.st), 2);
                ck_assert_uint_eq(storage_count(h.st, POD_SOURCE_FILE), 1);
                ck_assert_uint_eq(storage_count(h.st, POD_SOURCE_API), 1);
                /* a SET from api without it removes only api's */
                SEND_EMPTY_FROM(&h, POD_SOURCE_API, POD_OP_SET);
                EXPECT(&h, want[mi][2]);
                ck_assert_uint_eq(storage_count(h.st, POD_SOURCE_FILE), 1);
                ck_assert_uint_eq(storage_count(h.st, POD_SOURCE_API), 0);
                ASSERT_FIELD(stored(&h, "u1"), "\"f\"", "spec", "containers", "0", "image");
                /* REMOVE by UID touches only its own source */
                SEND_FROM(&h, POD_SOURCE_HTTP, POD_OP_ADD, POD(.uid = "u2"));
                EXPECT(&h, want[mi][3]);
                SEND_FROM(&h, POD_SOURCE_HTTP, POD_OP_REMOVE, POD(.uid = "u1"), POD(.uid = "u2"));
                EXPECT(&h, want[mi][4]);
                ck_assert_uint_eq(storage_count(h.st, POD_SOURCE_FILE), 1);
                ck_assert_uint_eq(storage_count(h.st, POD_SOURCE_HTTP), 0);
                ck_assert_uint_eq(storage_count(h.st, "nosuch"), 0);
                h_free(&h);
        }
        ctx = "";
}
END_TEST

/* 4.1: seen only by a SET; vacuous truth for no sources. */
START_TEST(test_seen_all_sources)
{
        const char *const all[] = {POD_SOURCE_API, POD_SOURCE_FILE, POD_SOURCE_HTTP};
        struct h h;

        ctx = "seen_all_sources";
        h_init(&h, STORAGE_MODE_INCREMENTAL);
        ck_assert(storage_seen_all(h.st, NULL, 0));
        ck_assert(storage_seen_all(h.st, all, 0));
        ck_assert(!storage_seen_all(h.st, all, 3));
        ck_assert(!storage_source_seen(h.st, POD_SOURCE_FILE));

        /* ADD, UPDATE, DELETE and REMOVE never mark a source seen */
        SEND_FROM(&h, POD_SOURCE_FILE, POD_OP_ADD, POD(.uid = "a"));
        SEND_FROM(&h, POD_SOURCE_FILE, POD_OP_UPDATE, POD(.uid = "a", .image = "2"));
        SEND_FROM(&h, POD_SOURCE_FILE, POD_OP_DELETE, POD(.uid = "a", .dt = DT));
        SEND_FROM(&h, POD_SOURCE_FILE, POD_OP_REMOVE, POD(.uid = "a"));
        SEND_EMPTY_FROM(&h, POD_SOURCE_FILE, POD_OP_ADD);
        EXPECT(&h, "ADD@file:a;UPDATE@file:a;DELETE@file:a;REMOVE@file:a");
        ck_assert(!storage_source_seen(h.st, POD_SOURCE_FILE));
        ck_assert(!storage_seen_all(h.st, all + 1, 1));

        SEND_EMPTY_FROM(&h, POD_SOURCE_FILE, POD_OP_SET);
        EXPECT(&h, "ADD@file:");
        ck_assert(storage_source_seen(h.st, POD_SOURCE_FILE));
        ck_assert(storage_seen_all(h.st, all + 1, 1));
        ck_assert(!storage_seen_all(h.st, all, 3));

        SEND_FROM(&h, POD_SOURCE_API, POD_OP_SET, POD(.uid = "b"));
        EXPECT(&h, "ADD@api:b");
        ck_assert(!storage_seen_all(h.st, all, 3));
        SEND_EMPTY_FROM(&h, POD_SOURCE_HTTP, POD_OP_SET);
        EXPECT(&h, "ADD@http:");
        ck_assert(storage_seen_all(h.st, all, 3));
        /* a name that never sent anything */
        {
                const char *const more[] = {POD_SOURCE_API, "never"};

                ck_assert(!storage_seen_all(h.st, more, 2));
        }
        /* readiness never goes back */
        SEND_EMPTY_FROM(&h, POD_SOURCE_API, POD_OP_SET);
        SEND_FROM(&h, POD_SOURCE_HTTP, POD_OP_REMOVE, POD(.uid = "zz"));
        EXPECT(&h, "REMOVE@api:b");
        ck_assert(storage_seen_all(h.st, all, 3));
        h_free(&h);

        /* a source that only sends ADD never becomes seen, in any mode */
        h_init(&h, STORAGE_MODE_SNAPSHOT);
        SEND_FROM(&h, POD_SOURCE_HTTP, POD_OP_ADD, POD(.uid = "a"));
        EXPECT(&h, "SET@http:a");
        ck_assert(!storage_source_seen(h.st, POD_SOURCE_HTTP));
        ck_assert(!storage_seen_all(h.st, all + 2, 1));
        h_free(&h);
}
END_TEST

/* A checkpoint's SET (doc/pod-config.md 4.3) is merged as any SET but
 * marks nothing seen and announces nothing (no marker); the live SET
 * after it is the source's first: seen, and only the differences go out. */
static void send_checkpoint(struct h *h, struct pod *a, struct pod *b)
{
        struct pod_update *u = pod_update_new(POD_OP_SET, POD_SOURCE_API);

        ck_assert_ptr_nonnull(u);
        u->provisional = true;
        for (struct pod *p = a; p; p = p == a ? b : NULL) {
                ck_assert_int_eq(pod_update_add(u, p), 0);
                pod_unref(p);
        }
        ck_assert_int_eq(storage_merge(h->st, POD_SOURCE_API, u), 0);
}

START_TEST(test_checkpoint_set_not_seen)
{
        const char *const api[] = {POD_SOURCE_API};
        struct h h;

        ctx = "checkpoint";
        h_init(&h, STORAGE_MODE_INCREMENTAL);
        send_checkpoint(&h, NULL, NULL);
        EXPECT_NONE(&h);
        ck_assert(!storage_seen_all(h.st, api, 1));
        send_checkpoint(&h, POD(.uid = "a"), POD(.uid = "b", .phase = "P"));
        EXPECT(&h, "ADD@api:a,b");
        ck_assert(!storage_seen_all(h.st, api, 1));
        /* Live: a unchanged, b's status changed, c new; the source is
         * seen now. */
        SEND_FROM(&h, POD_SOURCE_API, POD_OP_SET, POD(.uid = "a"), POD(.uid = "b", .phase = "Q"), POD(.uid = "c"));
        EXPECT(&h, "ADD@api:c;RECONCILE@api:b");
        ck_assert(storage_seen_all(h.st, api, 1));
        h_free(&h);

        /* Deleted during the outage: REMOVE; an empty live set after an
         * empty checkpoint: the marker, once, with the live SET. */
        h_init(&h, STORAGE_MODE_INCREMENTAL);
        send_checkpoint(&h, POD(.uid = "a"), NULL);
        EXPECT(&h, "ADD@api:a");
        SEND_EMPTY_FROM(&h, POD_SOURCE_API, POD_OP_SET);
        EXPECT(&h, "REMOVE@api:a;ADD@api:");
        h_free(&h);
        h_init(&h, STORAGE_MODE_INCREMENTAL);
        send_checkpoint(&h, NULL, NULL);
        SEND_EMPTY_FROM(&h, POD_SOURCE_API, POD_OP_SET);
        EXPECT(&h, "ADD@api:");
        h_free(&h);

        /* Snapshot modes: the checkpoint's pods go out as the state; the
         * live SET equal to it is the source's first: the state again. */
        h_init(&h, STORAGE_MODE_SNAPSHOT);
        send_checkpoint(&h, POD(.uid = "a"), NULL);
        EXPECT(&h, "SET@api:a");
        ck_assert(!storage_seen_all(h.st, api, 1));
        SEND_FROM(&h, POD_SOURCE_API, POD_OP_SET, POD(.uid = "a"));
        EXPECT(&h, "SET@api:a");
        ck_assert(storage_seen_all(h.st, api, 1));
        h_free(&h);
}
END_TEST

/* 3.5: REMOVE by UID only, stored version emitted, unknown UIDs ignored, no
 * pre-processing. */
START_TEST(test_remove_by_uid)
{
        struct h h;

        ctx = "REMOVE by UID";
        h_init(&h, STORAGE_MODE_INCREMENTAL);
        SEND(&h, POD_OP_SET, POD(.uid = "a", .image = "stored"), POD(.uid = "b"), POD(.uid = "c"));
        EXPECT(&h, "ADD:a,b,c");
        /* other name, other content, same UID: removed, stored version out */
        SEND(&h, POD_OP_REMOVE, POD(.uid = "a", .name = "other", .ns = "x", .image = "sent"),
             POD(.uid = "unknown"));
        EXPECT(&h, "REMOVE:a");
        ck_assert_str_eq(pod_name(last_pod(&h, "a")), "a");
        ASSERT_FIELD(last_pod(&h, "a"), "\"stored\"", "spec", "containers", "0", "image");
        ASSERT_FIELD(last_pod(&h, "a"), "\"" TEST_SOURCE "\"", "metadata", "annotations", SOURCE_KEY);
        /* duplicate names in a REMOVE are not filtered; listed order kept */
        SEND(&h, POD_OP_REMOVE, POD(.uid = "c", .name = "same"), POD(.uid = "b", .name = "same"));
        EXPECT(&h, "REMOVE:c,b");
        ck_assert_uint_eq(h.n_events, 0);
        /* removing again: nothing */
        SEND(&h, POD_OP_REMOVE, POD(.uid = "b"));
        EXPECT_NONE(&h);
        ck_assert_uint_eq(storage_total(h.st), 0);
        /* from a source never heard of: nothing */
        SEND_FROM(&h, "nosuch", POD_OP_REMOVE, POD(.uid = "b"));
        EXPECT_NONE(&h);
        h_free(&h);
}
END_TEST

/* 3.5: an inbound DELETE of an unknown UID is an ADD; the inbound op name
 * is irrelevant for known UIDs. */
START_TEST(test_inbound_delete_unknown_is_add)
{
        struct h h;

        ctx = "inbound DELETE of unknown UID";
        h_init(&h, STORAGE_MODE_INCREMENTAL);
        SEND(&h, POD_OP_DELETE, POD(.uid = "a", .dt = DT));
        EXPECT(&h, "ADD:a");
        ck_assert(last_pod(&h, "a")->deleting);
        SEND(&h, POD_OP_DELETE, POD(.uid = "b"));
        EXPECT(&h, "ADD:b");
        /* inbound DELETE without a deletionTimestamp on a known UID: UPDATE */
        SEND(&h, POD_OP_DELETE, POD(.uid = "b", .image = "v2"));
        EXPECT(&h, "UPDATE:b");
        /* inbound UPDATE carrying a deletionTimestamp: DELETE */
        SEND(&h, POD_OP_UPDATE, POD(.uid = "b", .image = "v2", .dt = DT));
        EXPECT(&h, "DELETE:b");
        /* inbound UPDATE of an unknown UID: ADD */
        SEND(&h, POD_OP_UPDATE, POD(.uid = "c"));
        EXPECT(&h, "ADD:c");
        /* upserts never remove */
        SEND(&h, POD_OP_ADD, POD(.uid = "d"));
        EXPECT(&h, "ADD:d");
        ck_assert_uint_eq(storage_total(h.st), 4);
        h_free(&h);
}
END_TEST

/* 3.5: anything else (including RECONCILE) is logged and ignored. */
START_TEST(test_unknown_op_ignored)
{
        const enum pod_op ops[] = {POD_OP_RECONCILE, (enum pod_op)6, (enum pod_op)99,
                                   (enum pod_op)-5};
        static const enum storage_mode modes[] = {
                STORAGE_MODE_INCREMENTAL, STORAGE_MODE_SNAPSHOT,
                STORAGE_MODE_SNAPSHOT_AND_UPDATES,
        };

        for (size_t mi = 0; mi < 3; mi++) {
                struct h h;

                ctx = mode_name(modes[mi]);
                h_init(&h, modes[mi]);
                SEND(&h, POD_OP_ADD, POD(.uid = "a"));
                h.next = h.n;
                for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
                        ck_assert_int_eq(send_op(&h, TEST_SOURCE, ops[i], POD(.uid = "a", .image = "x"),
                                                 POD(.uid = "n"), (struct pod *)NULL),
                                         0);
                        EXPECT_NONE(&h);
                        ck_assert_uint_eq(h.n_events, i + 1);
                        ck_assert_str_eq(h.events[i].source, TEST_SOURCE);
                }
                ck_assert_uint_eq(storage_total(h.st), 1);
                ck_assert(!storage_source_seen(h.st, TEST_SOURCE));
                /* an unknown op from a new source creates nothing */
                ck_assert_int_eq(send_op(&h, "fresh", POD_OP_RECONCILE, (struct pod *)NULL), 0);
                {
                        struct pod_update **st = NULL;
                        size_t n = 99;

                        ck_assert_int_eq(storage_state(h.st, &st, &n), 0);
                        for (size_t i = 0; i < n; i++) {
                                ck_assert_str_ne(st[i]->source, "fresh");
                                pod_update_free(st[i]);
                        }
                        free(st);
                }
                h_free(&h);
        }
        ctx = "";
}
END_TEST

/* Sync: one SET "*" with every pod of every source, in any mode. */
START_TEST(test_sync)
{
        static const enum storage_mode modes[] = {
                STORAGE_MODE_INCREMENTAL, STORAGE_MODE_SNAPSHOT,
                STORAGE_MODE_SNAPSHOT_AND_UPDATES,
        };

        for (size_t mi = 0; mi < 3; mi++) {
                struct h h;

                ctx = mode_name(modes[mi]);
                h_init(&h, modes[mi]);
                ck_assert_int_eq(storage_sync(h.st), 0);
                EXPECT(&h, "SET@*:");
                SEND_FROM(&h, POD_SOURCE_FILE, POD_OP_SET, POD(.uid = "f2", .name = "z", .ns = "a"),
                          POD(.uid = "f1", .name = "b", .ns = "b"));
                /* same name, two UIDs: two records (one record would drop
                 * the second as a duplicate name) */
                SEND_FROM(&h, POD_SOURCE_API, POD_OP_ADD, POD(.uid = "a1", .name = "a", .ns = "b"));
                SEND_FROM(&h, POD_SOURCE_API, POD_OP_ADD, POD(.uid = "a0", .name = "a", .ns = "b"));
                h.next = h.n;
                ck_assert_int_eq(storage_sync(h.st), 0);
                /* sorted by namespace, name, uid */
                EXPECT(&h, "SET@*:f2,a0,a1,f1");
                /* Sync does not mark anything seen or change the store */
                ck_assert(!storage_source_seen(h.st, POD_SOURCE_API));
                ck_assert_uint_eq(storage_total(h.st), 4);
                ck_assert_int_eq(storage_sync(h.st), 0);
                EXPECT(&h, "SET@*:f2,a0,a1,f1");
                h_free(&h);
        }
        ctx = "";
}
END_TEST

static void expect_state(struct h *h, int line, const char *want)
{
        struct pod_update **st = NULL;
        size_t n = 0;
        struct buf got = BUF_INIT;

        ck_assert_int_eq(storage_state(h->st, &st, &n), 0);
        for (size_t i = 0; i < n; i++) {
                if (i)
                        buf_putc(&got, ';');
                describe(st[i], &got);
                pod_update_free(st[i]);
        }
        free(st);
        ck_assert_msg(strcmp(got.data, want) == 0,
                      "line %d [%s]: storage_state \"%s\", want \"%s\"", line, ctx,
                      got.data, want);
        buf_free(&got);
}

/* storage_state: what a new consumer gets (ADD per source in incremental
 * mode; otherwise per source a SET of the merged state, labelled with it). */
START_TEST(test_storage_state)
{
        static const struct {
                enum storage_mode mode;
                const char *empty, *full, *after;
        } cases[] = {
                {STORAGE_MODE_INCREMENTAL, "", "ADD@api:c;ADD@file:a,b;ADD@http:",
                 "ADD@api:c;ADD@file:;ADD@http:"},
                {STORAGE_MODE_SNAPSHOT, "", "SET@api:a,b,c;SET@file:a,b,c;SET@http:a,b,c",
                 "SET@api:c;SET@file:c;SET@http:c"},
                {STORAGE_MODE_SNAPSHOT_AND_UPDATES, "", "SET@api:a,b,c;SET@file:a,b,c;SET@http:a,b,c",
                 "SET@api:c;SET@file:c;SET@http:c"},
        };

        for (size_t i = 0; i < 3; i++) {
                struct h h;

                ctx = mode_name(cases[i].mode);
                h_init(&h, cases[i].mode);
                expect_state(&h, __LINE__, cases[i].empty);
                /* a REMOVE from an unknown source leaves no trace */
                SEND_FROM(&h, "ghost", POD_OP_REMOVE, POD(.uid = "x"));
                expect_state(&h, __LINE__, cases[i].empty);
                SEND_FROM(&h, POD_SOURCE_FILE, POD_OP_SET, POD(.uid = "b"), POD(.uid = "a"));
                SEND_FROM(&h, POD_SOURCE_API, POD_OP_ADD, POD(.uid = "c")); /* not seen */
                SEND_EMPTY_FROM(&h, POD_SOURCE_HTTP, POD_OP_SET);          /* seen, empty */
                expect_state(&h, __LINE__, cases[i].full);
                SEND_EMPTY_FROM(&h, POD_SOURCE_FILE, POD_OP_SET);
                expect_state(&h, __LINE__, cases[i].after);
                /* the state is a copy: dropping it changes nothing */
                ck_assert_uint_eq(storage_total(h.st), 1);
                h_free(&h);
        }
        ctx = "";
}
END_TEST

/* 3.2.1: a full name seen earlier in the same list is dropped (first wins),
 * with a FailedValidation event; across records both are stored. */
START_TEST(test_duplicate_names)
{
        struct h h;

        ctx = "duplicate names";
        h_init(&h, STORAGE_MODE_INCREMENTAL);
        SEND(&h, POD_OP_SET, POD(.uid = "u1", .name = "foo"), POD(.uid = "u2", .name = "bar"),
             POD(.uid = "u3", .name = "foo"), POD(.uid = "u4", .name = "foo", .ns = "other"));
        EXPECT(&h, "ADD:u1,u2,u4");
        ck_assert_uint_eq(h.n_events, 1);
        ck_assert_str_eq(h.events[0].reason, "FailedValidation");
        ck_assert_str_eq(h.events[0].uid, "u3");
        ck_assert_str_eq(h.events[0].source, TEST_SOURCE);
        /* another record with the same name and another UID is stored */
        SEND(&h, POD_OP_ADD, POD(.uid = "u5", .name = "foo"));
        EXPECT(&h, "ADD:u5");
        ck_assert_uint_eq(storage_total(h.st), 4);
        /* the dropped pod is not in the new set: a SET with a duplicate
         * removes the stored UID it carries */
        SEND(&h, POD_OP_SET, POD(.uid = "u1", .name = "foo"), POD(.uid = "u2", .name = "bar"),
             POD(.uid = "u4", .name = "foo", .ns = "other"), POD(.uid = "u5", .name = "foo"));
        EXPECT(&h, "REMOVE:u5");
        ck_assert_uint_eq(h.n_events, 2);
        ck_assert_str_eq(h.events[1].uid, "u5");
        h_free(&h);
}
END_TEST

/* 3.2.1 through the mux, as a manifest URL's PodList comes: the first of
 * two pods with one name in the list's order is kept, whatever their
 * UIDs, and the event names the other; what is kept is merged sorted. */
START_TEST(test_duplicate_names_in_list_order_through_the_mux)
{
        static const char *const orders[][3] = {{"u9", "u1", "ADD:u2,u9"}, {"u1", "u9", "ADD:u2,u1"}};

        for (size_t i = 0; i < 2; i++) {
                struct mux_channel *ch = NULL;
                struct mux *m = NULL;
                struct pod_update *u;
                struct h h;

                ctx = "duplicate names through the mux";
                h_init(&h, STORAGE_MODE_INCREMENTAL);
                ck_assert_int_eq(mux_new(NULL, race_merge, h.st, &m), 0);
                ck_assert_int_eq(mux_channel(m, TEST_SOURCE, &ch), 0);
                ck_assert_ptr_nonnull(u = pod_update_new(POD_OP_SET, TEST_SOURCE));
                {
                        struct pod *ps[] = {POD(.uid = orders[i][0], .name = "foo"), POD(.uid = "u2", .name = "bar"),
                                            POD(.uid = orders[i][1], .name = "foo")};

                        for (size_t k = 0; k < 3; k++) {
                                ck_assert_int_eq(pod_update_add(u, ps[k]), 0);
                                pod_unref(ps[k]);
                        }
                }
                ck_assert_int_eq(mux_channel_send(ch, u), 0);
                ck_assert_uint_eq(mux_drain(m), 1);
                EXPECT(&h, orders[i][2]);
                ck_assert_uint_eq(h.n_events, 1);
                ck_assert_str_eq(h.events[0].reason, "FailedValidation");
                ck_assert_str_eq(h.events[0].uid, orders[i][1]);
                mux_free(m);
                h_free(&h);
        }
}
END_TEST

START_TEST(test_api_errors)
{
        struct h h;
        struct storage *s = NULL;
        struct storage_config cfg = {.mode = STORAGE_MODE_INCREMENTAL, .emit = on_emit};
        enum storage_mode m;

        ctx = "API errors";
        h_init(&h, STORAGE_MODE_INCREMENTAL);
        /* the record is freed on error too (ASan checks) */
        ck_assert_int_eq(send_op(&h, "", POD_OP_SET, POD(.uid = "a"), (struct pod *)NULL), -EINVAL);
        ck_assert_int_eq(storage_merge(h.st, NULL, pod_update_new(POD_OP_SET, "x")), -EINVAL);
        EXPECT_NONE(&h);
        ck_assert_uint_eq(storage_total(h.st), 0);
        h_free(&h);
        storage_free(NULL);

        /* storage_new validates the mode and the emit callback */
        cfg.mode = (enum storage_mode)0;
        ck_assert_int_eq(storage_new(&cfg, &s), -EINVAL);
        cfg.mode = (enum storage_mode)4;
        ck_assert_int_eq(storage_new(&cfg, &s), -EINVAL);
        cfg.mode = STORAGE_MODE_SNAPSHOT;
        cfg.emit = NULL;
        ck_assert_int_eq(storage_new(&cfg, &s), -EINVAL);
        ck_assert_int_eq(storage_new(NULL, &s), -EINVAL);
        ck_assert_ptr_null(s);
        /* wall clock by default */
        cfg.emit = on_emit;
        cfg.emit_data = &h;
        memset(&h, 0, sizeof(h));
        ck_assert_int_eq(storage_new(&cfg, &s), 0);
        h.st = s;
        SEND(&h, POD_OP_SET, POD(.uid = "a"));
        EXPECT(&h, "SET:a");
        {
                char buf[POD_SEEN_MAX];
                const char *seen = pod_seen(last_pod(&h, "a"), buf);

                ck_assert_msg(seen && strlen(seen) >= 20 && seen[4] == '-' && seen[10] == 'T' &&
                                      seen[strlen(seen) - 1] == 'Z',
                              "config.seen from the wall clock: %s", seen ? seen : "(null)");
        }
        h_free(&h);

        /* mode names round-trip; unknown names are errors */
        for (int i = 1; i <= 3; i++) {
                const char *name = storage_mode_to_string((enum storage_mode)i);

                ck_assert_ptr_nonnull(name);
                ck_assert_int_eq(storage_mode_from_string(name, &m), 0);
                ck_assert_int_eq(m, i);
        }
        ck_assert_str_eq(storage_mode_to_string(STORAGE_MODE_INCREMENTAL), "incremental");
        ck_assert_str_eq(storage_mode_to_string(STORAGE_MODE_SNAPSHOT), "snapshot");
        ck_assert_str_eq(storage_mode_to_string(STORAGE_MODE_SNAPSHOT_AND_UPDATES),
                         "snapshot-and-updates");
        ck_assert_ptr_null(storage_mode_to_string((enum storage_mode)0));
        ck_assert_ptr_null(storage_mode_to_string((enum storage_mode)4));
        m = STORAGE_MODE_SNAPSHOT;
        ck_assert_int_eq(storage_mode_from_string("Incremental", &m), -EINVAL);
        ck_assert_int_eq(storage_mode_from_string("", &m), -EINVAL);
        ck_assert_int_eq(storage_mode_from_string(NULL, &m), -EINVAL);
        ck_assert_int_eq(storage_mode_from_string("unknown", &m), -EINVAL);
        ck_assert_int_eq(m, STORAGE_MODE_SNAPSHOT); /* untouched on error */
        ctx = "";
}
END_TEST

/* ---- deltas decide exactly as the SETs they stand for -------------------- */

/* xorshift: the same sequence on every run. */
static uint64_t rng_state;

static unsigned rnd(unsigned n)
{
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        return (unsigned)(rng_state % n);
}

#define EQ_NAMES 10

struct eq_pod {
        int present;
        int gen;  /* UID generation: a new UID is a new pod of the same name */
        int v;    /* label value (spec change) */
        int ph;   /* status phase */
        int del;  /* deletionTimestamp set */
};

static struct pod *eq_make(int i, const struct eq_pod *e)
{
        return podf("{\"metadata\":{\"name\":\"p%d\",\"namespace\":\"ns\",\"uid\":\"p%d-g%d\","
                    "\"labels\":{\"v\":\"%d\"}%s},\"spec\":{\"containers\":[]},"
                    "\"status\":{\"phase\":\"P%d\"}}",
                    i, i, e->gen, e->v,
                    e->del ? ",\"deletionTimestamp\":\"2025-01-01T00:00:00Z\"" : "", e->ph);
}

static void eq_record(const struct pod_update *u, struct buf *out)
{
        ck_assert_int_eq(buf_printf(out, "%s@%s[", pod_op_to_string(u->op), u->source), 0);
        for (size_t i = 0; i < u->n_pods; i++) {
                ck_assert_int_eq(pod_render(u->pods[i], out), 0);
                ck_assert_int_eq(buf_putc(out, ';'), 0);
        }
        ck_assert_int_eq(buf_puts(out, "]\n"), 0);
}

/* Every record emitted so far, as op@source and each pod's text; the
 * records are then dropped. */
static void eq_describe(struct h *h, struct buf *out)
{
        for (size_t i = 0; i < h->n; i++) {
                eq_record(h->recs[i], out);
                pod_update_free(h->recs[i]);
        }
        h->n = 0;
}

/*
 * Two mergers: one is told each batch of changes as the source's full SET
 * (what sources sent before deltas existed), the other as deltas folded
 * together the way the mux folds them.  Random changes (new pods, spec,
 * status and deletion changes, UID changes, removals), many seeds, every
 * mode: the records emitted and the state held must be identical.
 */
static void deltas_match_sets(enum storage_mode mode, uint64_t seed)
{
        struct h a, b;
        struct eq_pod st[EQ_NAMES];
        struct buf da = BUF_INIT, db = BUF_INIT;
        struct pod_update **sa = NULL, **sb = NULL;
        size_t na = 0, nb = 0;

        memset(st, 0, sizeof(st));
        rng_state = seed;
        h_init(&a, mode);
        h_init(&b, mode);
        for (int step = 0; step < 60; step++) {
                struct pod_update *set = pod_update_new(POD_OP_SET, TEST_SOURCE), *fold = NULL;
                int changes = 1 + (int)rnd(3), first = step == 0;

                /* Some batches are several deltas folded into one record. */
                for (int c = 0; c < changes; c++) {
                        struct pod_update *d = pod_update_new_delta(TEST_SOURCE);
                        int i = (int)rnd(EQ_NAMES);
                        struct eq_pod old = st[i];

                        switch (rnd(6)) {
                        case 0: st[i].present = !st[i].present; st[i].del = 0; break;
                        case 1: st[i].v++; st[i].present = 1; break;
                        case 2: st[i].ph++; st[i].present = 1; break;
                        case 3: st[i].del = 1; st[i].present = 1; break;
                        case 4: st[i].gen++; st[i].present = 1; st[i].del = 0; break;
                        default: break; /* an unchanged re-read */
                        }
                        if (st[i].present) {
                                struct pod *p = eq_make(i, &st[i]);

                                ck_assert_int_eq(pod_update_add(d, p), 0);
                                pod_unref(p);
                        }
                        if (old.present && (!st[i].present || old.gen != st[i].gen)) {
                                struct pod *p = eq_make(i, &old);

                                ck_assert_int_eq(pod_update_add_gone(d, p), 0);
                                pod_unref(p);
                        }
                        if (!fold)
                                fold = d;
                        else {
                                ck_assert_int_eq(pod_update_fold(fold, d), 0);
                                pod_update_free(d);
                        }
                }
                for (int i = 0; i < EQ_NAMES; i++) {
                        if (st[i].present) {
                                struct pod *p = eq_make(i, &st[i]);

                                ck_assert_int_eq(pod_update_add(set, p), 0);
                                pod_unref(p);
                        }
                }
                pod_update_sort(set);
                if (first) {
                        /* A source starts with a full SET. */
                        pod_update_free(fold);
                        fold = pod_update_new(POD_OP_SET, TEST_SOURCE);
                        ck_assert_int_eq(pod_update_fold(fold, set), 0);
                }
                pod_update_sort(fold);
                fake_now += 1000000;
                ck_assert_int_eq(storage_merge(a.st, TEST_SOURCE, set), 0);
                ck_assert_int_eq(storage_merge(b.st, TEST_SOURCE, fold), 0);
                buf_reset(&da);
                buf_reset(&db);
                eq_describe(&a, &da);
                eq_describe(&b, &db);
                ck_assert_msg(strcmp(da.data, db.data) == 0,
                              "mode %s seed %llu step %d:\nSET gave:\n%s\ndelta gave:\n%s", mode_name(mode),
                              (unsigned long long)seed, step, da.data, db.data);
        }
        ck_assert_int_eq(storage_state(a.st, &sa, &na), 0);
        ck_assert_int_eq(storage_state(b.st, &sb, &nb), 0);
        ck_assert_uint_eq(na, nb);
        for (size_t i = 0; i < na; i++) {
                buf_reset(&da);
                buf_reset(&db);
                eq_record(sa[i], &da);
                eq_record(sb[i], &db);
                ck_assert_str_eq(da.data, db.data);
                pod_update_free(sa[i]);
                pod_update_free(sb[i]);
        }
        free(sa);
        free(sb);
        buf_free(&da);
        buf_free(&db);
        h_free(&a);
        h_free(&b);
}

START_TEST(test_deltas_decide_as_sets)
{
        static const enum storage_mode modes[] = {STORAGE_MODE_INCREMENTAL, STORAGE_MODE_SNAPSHOT,
                                                  STORAGE_MODE_SNAPSHOT_AND_UPDATES};

        for (size_t m = 0; m < 3; m++)
                for (uint64_t seed = 1; seed <= 40; seed++)
                        deltas_match_sets(modes[m], seed * 0x9e3779b97f4a7c15ull);
}
END_TEST

UNIT_MAIN(test_duplicate_names_in_list_order_through_the_mux, test_deltas_decide_as_sets, test_scripts,
          test_kubelet_invalid_pod_filtered, test_kubelet_new_pod_added_snapshot, test_kubelet_new_pod_added_delete,
          test_kubelet_new_pod_added_set_reconciled, test_kubelet_initial_empty_set, test_kubelet_pod_config_race,
          test_kubelet_pod_restore, test_decision_table, test_worked_example_incremental, test_worked_example_snapshot,
          test_worked_example_snapshot_and_updates, test_worked_example_annotated_all_modes,
          test_emitted_pods_independent, test_seen_never_changes, test_seen_format, test_source_annotation_overwritten,
          test_annotations_rule_on_update, test_frozen_metadata, test_deletion_timestamp_instant,
          test_sources_kept_apart, test_seen_all_sources, test_remove_by_uid, test_inbound_delete_unknown_is_add,
          test_unknown_op_ignored, test_sync, test_storage_state, test_duplicate_names, test_api_errors,
          test_checkpoint_set_not_seen)
