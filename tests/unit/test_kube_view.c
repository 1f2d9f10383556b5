/*
 * The Kubernetes API view (src/kubeapi/kube_view.h): identity rules
 * (ADDED, MODIFIED, DELETED; a rename and a UID change are DELETED then
 * ADDED), per-event versions from the stream's numbers, the bounded
 * history and its floor, selectors, and an allocation-failure sweep that
 * every failure leaves the view as it was.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "failalloc.h"
#include "kubeapi/kube_view.h"
#include "unit.h"

#define SEQ0 1732431600000000ull

static struct pod *mkpod_src(const char *ns, const char *name, const char *uid, const char *labels, const char *extra,
                             const char *source)
{
        char text[1024];
        struct pod *p = NULL;

        snprintf(text, sizeof(text),
                 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\","
                 "\"uid\":\"%s\",\"resourceVersion\":\"77\",\"annotations\":{\"a\":\"b\"}%s%s},"
                 "\"spec\":{\"nodeName\":\"node1\",\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]%s}}",
                 name, ns, uid, labels ? ",\"labels\":" : "", labels ? labels : "", extra ? extra : "");
        ck_assert_int_eq(pod_from_text(text, strlen(text), &p, NULL), 0);
        ck_assert_int_eq(pod_stamp(p, source, 1), 0);
        return p;
}

static struct pod *mkpod(const char *ns, const char *name, const char *uid, const char *labels, const char *extra)
{
        return mkpod_src(ns, name, uid, labels, extra, POD_SOURCE_FILE);
}

/* A record of op with the pods given (the record takes them). */
static struct pod_update *rec(enum pod_op op, struct pod **pods, size_t n)
{
        struct pod_update *u = pod_update_new(op, op == POD_OP_SET ? "*" : "file");

        ck_assert_ptr_nonnull(u);
        for (size_t i = 0; i < n; i++) {
                ck_assert_int_eq(pod_update_add(u, pods[i]), 0);
                pod_unref(pods[i]);
        }
        return u;
}

static struct kube_view *view_new(size_t history)
{
        struct kube_view_config cfg = {.history = history, .base_seq = SEQ0};
        struct kube_view *v = NULL;

        ck_assert_int_eq(kube_view_new(&cfg, &v), 0);
        return v;
}

static int apply1(struct kube_view *v, enum pod_op op, struct pod *p, uint64_t seq)
{
        struct pod_update *u = rec(op, &p, 1);
        int r = kube_view_apply(v, u, seq);

        pod_update_free(u);
        return r;
}

/* The events from position from on, as "TYPE ns/name uid" lines. */
static void events_text(const struct kube_view *v, size_t from, char *out, size_t size)
{
        size_t len = 0;

        out[0] = '\0';
        for (size_t i = from; i < kube_view_n_events(v); i++) {
                const struct kv_event *e = kube_view_event(v, i);

                len += (size_t)snprintf(out + len, size - len, "%s%s %s %s", len ? "; " : "", kv_type_name(e->type),
                                        e->obj->key, e->obj->uid);
        }
}

START_TEST(test_identity)
{
        struct kube_view *v = view_new(0);
        char text[1024];

        ck_assert_int_eq(apply1(v, POD_OP_ADD, mkpod("ns", "a", "u1", NULL, NULL), SEQ0 + 1), 1);
        /* A change keeping namespace, name and UID: MODIFIED. */
        ck_assert_int_eq(apply1(v, POD_OP_UPDATE, mkpod("ns", "a", "u1", "{\"x\":\"1\"}", NULL), SEQ0 + 2), 1);
        /* The same again: nothing a client sees changed, no event. */
        ck_assert_int_eq(apply1(v, POD_OP_RECONCILE, mkpod("ns", "a", "u1", "{\"x\":\"1\"}", NULL), SEQ0 + 3), 0);
        /* A rename carried as one UPDATE: DELETED old, ADDED new. */
        ck_assert_int_eq(apply1(v, POD_OP_UPDATE, mkpod("ns", "b", "u1", NULL, NULL), SEQ0 + 4), 2);
        /* A UID change: REMOVE then ADD in the stream. */
        ck_assert_int_eq(apply1(v, POD_OP_REMOVE, mkpod("ns", "b", "u1", NULL, NULL), SEQ0 + 5), 1);
        ck_assert_int_eq(apply1(v, POD_OP_ADD, mkpod("ns", "b", "u2", NULL, NULL), SEQ0 + 6), 1);
        events_text(v, 0, text, sizeof(text));
        ck_assert_str_eq(text, "ADDED ns/a u1; MODIFIED ns/a u1; DELETED ns/a u1; ADDED ns/b u1; DELETED ns/b u1; "
                               "ADDED ns/b u2");
        ck_assert_uint_eq(kube_view_count(v), 1);
        ck_assert_ptr_null(kube_view_get(v, "ns", "a"));
        ck_assert_str_eq(kube_view_get(v, "ns", "b")->uid, "u2");
        /* A get never allocates: out of memory is never "not found". */
        if (failalloc_enabled()) {
                const struct kv_obj *o;

                failalloc_arm(1);
                o = kube_view_get(v, "ns", "b");
                failalloc_arm(0);
                ck_assert_ptr_nonnull(o);
        }
        {
                char longname[600];

                memset(longname, 'x', sizeof(longname) - 1);
                longname[sizeof(longname) - 1] = '\0';
                ck_assert_ptr_null(kube_view_get(v, "ns", longname));
        }
        /* MODIFIED carries the object before the change. */
        ck_assert_ptr_nonnull(kube_view_event(v, 1)->prev);
        ck_assert_ptr_null(kube_view_event(v, 1)->prev->labels);
        kube_view_free(v);
}
END_TEST

/* A SET (the snapshot modes) compared with the view: a changed UID is
 * DELETED before its successor is ADDED, unchanged pods make nothing. */
START_TEST(test_set)
{
        struct kube_view *v = view_new(0);
        struct pod *pods[3];
        struct pod_update *u;
        char text[1024];
        size_t n0;

        pods[0] = mkpod("ns", "a", "u1", NULL, NULL);
        pods[1] = mkpod("ns", "b", "u2", NULL, NULL);
        u = rec(POD_OP_SET, pods, 2);
        ck_assert_int_eq(kube_view_apply(v, u, SEQ0 + 1), 2);
        pod_update_free(u);
        n0 = kube_view_n_events(v);
        pods[0] = mkpod("ns", "a", "u1", NULL, NULL);
        pods[1] = mkpod("ns", "b", "u3", NULL, NULL);
        pods[2] = mkpod("ns", "c", "u4", NULL, NULL);
        u = rec(POD_OP_SET, pods, 3);
        ck_assert_int_eq(kube_view_apply(v, u, SEQ0 + 2), 3);
        pod_update_free(u);
        events_text(v, n0, text, sizeof(text));
        ck_assert_str_eq(text, "DELETED ns/b u2; ADDED ns/b u3; ADDED ns/c u4");
        kube_view_free(v);
}
END_TEST

/* Versions: one record of several pods gives several distinct,
 * increasing versions; the next record's are above them; every version
 * is above the base, itself above any of an earlier run. */
START_TEST(test_versions)
{
        struct kube_view *v = view_new(0);
        struct pod *pods[3] = {mkpod("ns", "a", "u1", NULL, NULL), mkpod("ns", "b", "u2", NULL, NULL),
                               mkpod("ns", "c", "u3", NULL, NULL)};
        struct pod_update *u = rec(POD_OP_ADD, pods, 3);
        uint64_t prev;

        ck_assert_uint_eq(kube_view_rv(v), SEQ0 * KUBE_VIEW_RV_PER_SEQ);
        ck_assert_int_eq(kube_view_apply(v, u, SEQ0 + 5), 3);
        pod_update_free(u);
        ck_assert_uint_eq(kube_view_event(v, 0)->rv, (SEQ0 + 5) * KUBE_VIEW_RV_PER_SEQ);
        ck_assert_uint_eq(kube_view_event(v, 1)->rv, (SEQ0 + 5) * KUBE_VIEW_RV_PER_SEQ + 1);
        ck_assert_uint_eq(kube_view_event(v, 2)->rv, (SEQ0 + 5) * KUBE_VIEW_RV_PER_SEQ + 2);
        ck_assert_uint_eq(kube_view_rv(v), kube_view_event(v, 2)->rv);
        /* Served objects carry the version of their last event. */
        ck_assert_uint_eq(kube_view_get(v, "ns", "b")->rv, kube_view_event(v, 1)->rv);
        /* A record whose number is not above the last version's share
         * still gets a higher one (a record of more than
         * KUBE_VIEW_RV_PER_SEQ pods borrows from the next numbers). */
        prev = kube_view_rv(v);
        ck_assert_int_eq(apply1(v, POD_OP_UPDATE, mkpod("ns", "a", "u1", "{\"k\":\"v\"}", NULL), SEQ0 + 5), 1);
        ck_assert_uint_gt(kube_view_rv(v), prev);
        ck_assert_uint_eq(kube_view_after(v, prev), 3);
        ck_assert_uint_eq(kube_view_after(v, 0), 0);
        ck_assert_uint_eq(kube_view_after(v, kube_view_rv(v)), 4);
        kube_view_free(v);
}
END_TEST

/* The history keeps its size: the oldest events go, and the floor says
 * from where a watch can still replay. */
START_TEST(test_history)
{
        struct kube_view *v = view_new(4);
        uint64_t first;

        for (int i = 0; i < 10; i++) {
                char name[16];

                snprintf(name, sizeof(name), "p%d", i);
                ck_assert_int_eq(apply1(v, POD_OP_ADD, mkpod("ns", name, name, NULL, NULL), SEQ0 + 1 + (uint64_t)i), 1);
        }
        ck_assert_uint_eq(kube_view_n_events(v), 4);
        first = kube_view_event(v, 0)->rv;
        ck_assert_uint_eq(kube_view_floor(v), (SEQ0 + 6) * KUBE_VIEW_RV_PER_SEQ);
        ck_assert_uint_lt(kube_view_floor(v), first);
        ck_assert_uint_eq(kube_view_after(v, kube_view_floor(v)), 0);
        ck_assert_uint_eq(kube_view_count(v), 10);
        kube_view_free(v);
}
END_TEST

/* Two sources hold the same namespace/name: the first is served, the
 * other is served when the first goes. */
START_TEST(test_shadow)
{
        struct kube_view *v = view_new(0);
        char text[512];

        ck_assert_int_eq(apply1(v, POD_OP_ADD, mkpod("ns", "x", "u1", NULL, NULL), SEQ0 + 1), 1);
        /* The same name from another source: hidden, no event. */
        ck_assert_int_eq(apply1(v, POD_OP_ADD, mkpod_src("ns", "x", "u2", NULL, NULL, POD_SOURCE_HTTP), SEQ0 + 2), 0);
        ck_assert_str_eq(kube_view_get(v, "ns", "x")->uid, "u1");
        ck_assert_int_eq(apply1(v, POD_OP_REMOVE, mkpod("ns", "x", "u1", NULL, NULL), SEQ0 + 3), 2);
        events_text(v, 1, text, sizeof(text));
        ck_assert_str_eq(text, "DELETED ns/x u1; ADDED ns/x u2");
        ck_assert_str_eq(kube_view_get(v, "ns", "x")->uid, "u2");
        kube_view_free(v);
}
END_TEST

/* The served text: apiVersion, kind, the view's version, the API
 * server's own kept as an annotation. */
START_TEST(test_text)
{
        struct kube_view *v = view_new(0);
        const struct kv_obj *o;

        ck_assert_int_eq(apply1(v, POD_OP_ADD, mkpod("ns", "a", "u1", "{\"app\":\"web\"}", NULL), SEQ0 + 1), 1);
        o = kube_view_get(v, "ns", "a");
        ck_assert_ptr_nonnull(o);
        /* The tail after the version: the rest of metadata, then spec. */
        ck_assert_msg(strncmp(o->text, "\",\"annotations\":{", 17) == 0, "text: %s", o->text);
        ck_assert_msg(strstr(o->text, "\"name\":\"a\",\"namespace\":\"ns\",\"uid\":\"u1\""), "text: %s", o->text);
        ck_assert_msg(strstr(o->text, "\"" KUBE_VIEW_ANNOTATION_SOURCE_RV "\":\"77\""), "text: %s", o->text);
        ck_assert_msg(!strstr(o->text, "\"resourceVersion\":\"77\""), "text: %s", o->text);
        ck_assert_str_eq(o->fields[KV_FIELD_NODE_NAME], "node1");
        ck_assert_str_eq(o->fields[KV_FIELD_PHASE], "");
        ck_assert_str_eq(o->fields[KV_FIELD_HOST_NETWORK], "false");
        kube_view_free(v);
}
END_TEST

static bool sel(const char *labels, const char *fields, const struct kv_obj *o, int *ret)
{
        struct kv_filter f = {0};
        struct buf err = BUF_INIT;
        bool m = false;

        *ret = kv_filter_parse(&f, labels, fields, &err);
        if (*ret == 0)
                m = kv_filter_match(&f, o);
        else
                ck_assert_msg(err.len > 0, "no message for %s / %s", labels, fields);
        kv_filter_free(&f);
        buf_free(&err);
        return m;
}

START_TEST(test_selectors)
{
        struct kube_view *v = view_new(0);
        const struct kv_obj *o;
        int r;

        ck_assert_int_eq(
                apply1(v, POD_OP_ADD,
                       mkpod("ns", "a", "u1", "{\"app\":\"web\",\"tier\":\"fe\",\"n\":\"5\"}", ",\"hostNetwork\":true"),
                       SEQ0 + 1),
                1);
        o = kube_view_get(v, "ns", "a");
        ck_assert(sel("app=web", NULL, o, &r) && r == 0);
        ck_assert(sel("app==web", NULL, o, &r) && r == 0);
        ck_assert(!sel("app!=web", NULL, o, &r) && r == 0);
        ck_assert(sel("app!=db", NULL, o, &r) && r == 0);
        ck_assert(sel("app in (db, web)", NULL, o, &r) && r == 0);
        ck_assert(!sel("app notin (db,web)", NULL, o, &r) && r == 0);
        ck_assert(sel("missing notin (x)", NULL, o, &r) && r == 0);
        ck_assert(sel("tier", NULL, o, &r) && r == 0);
        ck_assert(sel("!missing", NULL, o, &r) && r == 0);
        ck_assert(!sel("!tier", NULL, o, &r) && r == 0);
        ck_assert(sel("n>4,n<6", NULL, o, &r) && r == 0);
        ck_assert(!sel("app=web,tier=be", NULL, o, &r) && r == 0);
        ck_assert(sel("", NULL, o, &r) && r == 0);
        ck_assert(sel(NULL, "metadata.name=a,metadata.namespace==ns", o, &r) && r == 0);
        ck_assert(sel(NULL, "spec.nodeName=node1", o, &r) && r == 0);
        ck_assert(sel(NULL, "status.phase!=Running", o, &r) && r == 0);
        ck_assert(sel(NULL, "spec.hostNetwork=true", o, &r) && r == 0);
        ck_assert(!sel(NULL, "metadata.name!=a", o, &r) && r == 0);
        /* Label selectors as the API server checks them: a Gt/Lt value is
         * a label value (no sign), a key's prefix a DNS subdomain, and
         * "\r" and "\n" are white space. */
        ck_assert(sel("app=web\r\n", NULL, o, &r) && r == 0);
        ck_assert(sel("\napp in (web)", NULL, o, &r) && r == 0);
        ck_assert(!sel("a.b-c/x=y", NULL, o, &r) && r == 0);
        sel("n>-1", NULL, o, &r);
        ck_assert_int_eq(r, -EINVAL);
        for (size_t i = 0; i < 5; i++) {
                static const char *const bad[] = {"a..b/x=y", "-a/x=y", "a-/x=y", "A/x=y", ".a/x=y"};

                sel(bad[i], NULL, o, &r);
                ck_assert_msg(r == -EINVAL, "%s: %d", bad[i], r);
        }
        /* As the API server parses them: empty terms skipped, spec.host
         * an old client's spec.nodeName, values unescaped. */
        ck_assert(sel(NULL, "metadata.name=a,,spec.host=node1,", o, &r) && r == 0);
        ck_assert(sel(NULL, ",", o, &r) && r == 0);
        ck_assert(!sel(NULL, "spec.host!=node1", o, &r) && r == 0);
        ck_assert(!sel(NULL, "metadata.name=a\\,b", o, &r) && r == 0);
        ck_assert(sel(NULL, "metadata.name!=a\\=b\\\\", o, &r) && r == 0);
        sel(NULL, "metadata.name=a=b", o, &r);
        ck_assert_int_eq(r, -EINVAL);
        sel(NULL, "metadata.name=a\\x", o, &r);
        ck_assert_int_eq(r, -EINVAL);
        sel(NULL, "metadata.name=a\\", o, &r);
        ck_assert_int_eq(r, -EINVAL);
        /* Bad selectors: a clear error. */
        sel("app in (web", NULL, o, &r);
        ck_assert_int_eq(r, -EINVAL);
        sel("-bad=x", NULL, o, &r);
        ck_assert_int_eq(r, -EINVAL);
        sel("app=we b", NULL, o, &r);
        ck_assert_int_eq(r, -EINVAL);
        sel("n>x", NULL, o, &r);
        ck_assert_int_eq(r, -EINVAL);
        sel("app,", NULL, o, &r);
        ck_assert_int_eq(r, -EINVAL);
        sel(NULL, "spec.unknown=x", o, &r);
        ck_assert_int_eq(r, -EINVAL);
        sel(NULL, "metadata.name", o, &r);
        ck_assert_int_eq(r, -EINVAL);
        kube_view_free(v);
}
END_TEST

START_TEST(test_snapshot)
{
        struct kube_view *v = view_new(0);
        struct kv_obj **objs;
        size_t n;

        ck_assert_int_eq(apply1(v, POD_OP_ADD, mkpod("b", "x", "u1", NULL, NULL), SEQ0 + 1), 1);
        ck_assert_int_eq(apply1(v, POD_OP_ADD, mkpod("a-b", "x", "u2", NULL, NULL), SEQ0 + 2), 1);
        ck_assert_int_eq(apply1(v, POD_OP_ADD, mkpod("a", "y", "u3", NULL, NULL), SEQ0 + 3), 1);
        ck_assert_int_eq(kube_view_snapshot(v, &objs, &n), 0);
        ck_assert_uint_eq(n, 3);
        /* The API server's order: by "namespace/name" as etcd keys. */
        ck_assert_str_eq(objs[0]->key, "a-b/x");
        ck_assert_str_eq(objs[1]->key, "a/y");
        ck_assert_str_eq(objs[2]->key, "b/x");
        for (size_t i = 0; i < n; i++)
                kv_obj_unref(objs[i]);
        free(objs);
        kube_view_free(v);
}
END_TEST

/* Every allocation of an apply fails in turn: -ENOMEM, the view exactly
 * as it was (same events, same objects), nothing leaked; then the same
 * record applies. */
START_TEST(test_alloc_sweep)
{
        long hits = 0;

        if (!failalloc_enabled())
                return;
        for (long n = 1;; n++) {
                struct kube_view *v = view_new(3);
                struct pod *pods[3];
                struct pod_update *u;
                long live0;
                char before[1024], after[1024];
                int r;

                ck_assert_int_eq(apply1(v, POD_OP_ADD, mkpod("ns", "a", "u1", NULL, NULL), SEQ0 + 1), 1);
                ck_assert_int_eq(apply1(v, POD_OP_ADD, mkpod("ns", "b", "u2", NULL, NULL), SEQ0 + 2), 1);
                pods[0] = mkpod("ns", "a", "u1", "{\"x\":\"y\"}", NULL);
                pods[1] = mkpod("ns", "c", "u2", NULL, NULL); /* renamed */
                pods[2] = mkpod("ns", "d", "u3", NULL, NULL);
                u = rec(POD_OP_SET, pods, 3);
                events_text(v, 0, before, sizeof(before));
                live0 = failalloc_live();
                failalloc_arm(n);
                r = kube_view_apply(v, u, SEQ0 + 3);
                failalloc_arm(0);
                if (r >= 0) {
                        ck_assert_int_eq(r, 4);
                        pod_update_free(u);
                        kube_view_free(v);
                        break;
                }
                hits++;
                ck_assert_int_eq(r, -ENOMEM);
                ck_assert_int_eq(failalloc_live(), live0);
                events_text(v, 0, after, sizeof(after));
                ck_assert_str_eq(after, before);
                ck_assert_uint_eq(kube_view_count(v), 2);
                ck_assert_int_eq(kube_view_apply(v, u, SEQ0 + 3), 4);
                ck_assert_uint_eq(kube_view_count(v), 3);
                pod_update_free(u);
                kube_view_free(v);
        }
        ck_assert_int_gt(hits, 10);
}
END_TEST

/* The same for a selector parse: -ENOMEM, never a wrong -EINVAL. */
START_TEST(test_filter_alloc_sweep)
{
        if (!failalloc_enabled())
                return;
        for (long n = 1;; n++) {
                struct kv_filter f = {0};
                struct buf err = BUF_INIT;
                long live0 = failalloc_live();
                int r;

                failalloc_arm(n);
                r = kv_filter_parse(&f, "a=b,c in (d,e),!f,g,x.io/n>4",
                                    "metadata.name=x\\,y\\=z,,spec.host==n,status.phase!=Failed", &err);
                failalloc_arm(0);
                kv_filter_free(&f);
                buf_free(&err);
                ck_assert_int_eq(failalloc_live(), live0);
                if (r == 0)
                        break;
                ck_assert_int_eq(r, -ENOMEM);
        }
}
END_TEST

UNIT_MAIN(test_identity, test_set, test_versions, test_history, test_shadow, test_text, test_selectors, test_snapshot,
          test_alloc_sweep, test_filter_alloc_sweep)
