/*
 * test_pod — struct pod and struct pod_update (src/core/pod.h):
 * parsing, rendering with the local annotations spliced back, the digests
 * the merge rules compare (doc/pod-config.md 3.4), the merger's copy rules
 * (3.3), names, the op string table and the config.seen format (1.3).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "failalloc.h"
#include "util/buf.h"
#include "util/json_canon.h"
#include "util/json_parse.h"
#include "core/pod.h"
#include "unit.h"

/* ---- helpers ------------------------------------------------------------ */

static struct pod *pod_new_text(const char *json)
{
        struct buf err = BUF_INIT;
        struct pod *p = NULL;
        int r = pod_from_text(json, strlen(json), &p, &err);

        ck_assert_msg(r == 0 && p, "pod_from_text(%s) = %d (%s)", json, r,
                      err.data);
        buf_free(&err);
        return p;
}

/* Canonical JSON of a json-c tree (malloc'd). */
static char *canon_obj(json_object *o)
{
        struct buf b = BUF_INIT;

        ck_assert_int_eq(json_canon_append(&b, o), 0);
        return buf_steal(&b, NULL);
}

static char *canon_text(const char *json)
{
        json_object *o = NULL;
        struct buf err = BUF_INIT;
        char *s;
        int r = json_parse_text(json, strlen(json), &o, &err);

        ck_assert_msg(r == 0, "json_parse_text(%s) = %d (%s)", json, r,
                      err.data);
        s = canon_obj(o);
        json_object_put(o);
        buf_free(&err);
        return s;
}

static char *render(const struct pod *p)
{
        struct buf b = BUF_INIT;

        ck_assert_int_eq(pod_render(p, &b), 0);
        return buf_steal(&b, NULL);
}

static char *render_canon(const struct pod *p)
{
        char *t = render(p), *c = canon_text(t);

        free(t);
        return c;
}

/* Canonical JSON of the value at keys... (NULL-terminated) in the rendered
 * pod, or "<absent>". */
static char *field(const struct pod *p, ...)
{
        json_object *root = pod_to_json(p), *cur = root;
        const char *k;
        va_list ap;
        char *s;

        ck_assert_ptr_nonnull(root);
        va_start(ap, p);
        while ((k = va_arg(ap, const char *))) {
                if (!cur || !json_object_is_type(cur, json_type_object) ||
                    !json_object_object_get_ex(cur, k, &cur)) {
                        cur = NULL;
                        break;
                }
        }
        va_end(ap);
        s = cur ? canon_obj(cur) : strdup("<absent>");
        json_object_put(root);
        return s;
}

#define ASSERT_FIELD(p, expect, ...)                                         \
        do {                                                                  \
                char *f_ = field((p), __VA_ARGS__, (const char *)NULL);        \
                ck_assert_str_eq(f_, (expect));                                \
                free(f_);                                                     \
        } while (0)

static void assert_semantic_at(int line, const char *a, const char *b, bool expect)
{
        struct pod *pa = pod_new_text(a), *pb = pod_new_text(b);
        bool got = pod_semantic_equal(pa, pb);

        ck_assert_msg(got == expect,
                      "line %d: pod_semantic_equal:\n  %s\n  %s\n= %d, want %d", line, a,
                      b, got, expect);
        /* Symmetric. */
        ck_assert_msg(pod_semantic_equal(pb, pa) == got,
                      "pod_semantic_equal not symmetric for\n  %s\n  %s", a, b);
        pod_unref(pa);
        pod_unref(pb);
}

static void assert_status_at(int line, const char *a, const char *b, bool expect)
{
        struct pod *pa = pod_new_text(a), *pb = pod_new_text(b);
        bool got = pod_status_equal(pa, pb);

        ck_assert_msg(got == expect,
                      "line %d: pod_status_equal:\n  %s\n  %s\n= %d, want %d", line, a,
                      b, got, expect);
        pod_unref(pa);
        pod_unref(pb);
}

#define assert_semantic(a, b, expect) assert_semantic_at(__LINE__, (a), (b), (expect))
#define assert_status(a, b, expect) assert_status_at(__LINE__, (a), (b), (expect))

/* ---- parsing ------------------------------------------------------------- */

START_TEST(test_from_json_rejects_non_object)
{
        const char *bad[] = {"[]", "\"pod\"", "42", "null", "true", "[{}]"};

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct buf err = BUF_INIT;
                struct pod *p = NULL;
                int r = pod_from_text(bad[i], strlen(bad[i]), &p, &err);

                ck_assert_msg(r == -EINVAL, "pod_from_text(%s) = %d, want -EINVAL",
                              bad[i], r);
                ck_assert_msg(p == NULL, "pod_from_text(%s) wrote ret_pod", bad[i]);
                ck_assert_msg(err.len > 0, "pod_from_text(%s): no message", bad[i]);
                buf_free(&err);
        }
        {
                struct pod *p = NULL;

                /* A NULL tree and a NULL err buffer are fine. */
                ck_assert_int_eq(pod_from_json(NULL, &p, NULL), -EINVAL);
                ck_assert_ptr_null(p);
        }
}
END_TEST

START_TEST(test_from_json_rejects_bad_metadata)
{
        const char *bad[] = {
                "{\"metadata\":\"x\"}",
                "{\"metadata\":[]}",
                "{\"metadata\":7}",
                "{\"metadata\":{\"annotations\":[]}}",
                "{\"metadata\":{\"annotations\":\"a=b\"}}",
        };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct buf err = BUF_INIT;
                struct pod *p = NULL;
                int r = pod_from_text(bad[i], strlen(bad[i]), &p, &err);

                ck_assert_msg(r == -EINVAL, "pod_from_text(%s) = %d, want -EINVAL",
                              bad[i], r);
                ck_assert_msg(p == NULL, "pod_from_text(%s) wrote ret_pod", bad[i]);
                ck_assert_msg(err.len > 0, "pod_from_text(%s): no message", bad[i]);
                buf_free(&err);
        }
}
END_TEST

START_TEST(test_from_text_rejects_bad_json)
{
        const char *bad[] = {"", "{", "{\"a\":}", "{} {}", "{}x"};

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct buf err = BUF_INIT;
                struct pod *p = NULL;
                int r = pod_from_text(bad[i], strlen(bad[i]), &p, &err);

                ck_assert_msg(r < 0, "pod_from_text(\"%s\") = %d, want < 0", bad[i], r);
                ck_assert_msg(p == NULL, "pod_from_text(\"%s\") wrote ret_pod", bad[i]);
                ck_assert_msg(err.len > 0, "pod_from_text(\"%s\"): no message", bad[i]);
                buf_free(&err);
        }
}
END_TEST

START_TEST(test_from_json_missing_metadata_ok)
{
        struct pod *p = pod_new_text("{\"spec\":{\"containers\":[]}}");

        ck_assert_uint_eq(p->refs, 1);
        ck_assert_str_eq(pod_uid(p), "");
        ck_assert_str_eq(pod_name(p), "");
        ck_assert_str_eq(pod_namespace(p), "");
        ck_assert_ptr_null(p->source);
        ck_assert_ptr_null(p->seen.text);
        ck_assert_ptr_null(p->mirror);
        ck_assert(!p->deleting);
        ck_assert(!p->has_annotations);
        ASSERT_FIELD(p, "{\"containers\":[]}", "spec");
        pod_unref(p);

        /* "metadata": null is a missing metadata (Go: zero ObjectMeta). */
        p = pod_new_text("{\"metadata\":null}");
        ck_assert_str_eq(pod_uid(p), "");
        pod_unref(p);

        p = pod_new_text("{}");
        ck_assert_str_eq(pod_name(p), "");
        pod_unref(p);
}
END_TEST

START_TEST(test_from_json_fields)
{
        struct pod *p = pod_new_text(
                "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{"
                "\"uid\":\"u1\",\"name\":\"web\",\"namespace\":\"prod\","
                "\"deletionTimestamp\":\"2025-01-01T00:00:00Z\","
                "\"annotations\":{\"kubernetes.io/config.source\":\"file\","
                "\"kubernetes.io/config.seen\":\"2025-01-01T00:00:00Z\","
                "\"kubernetes.io/config.mirror\":\"abc\","
                "\"kubernetes.io/config.hash\":\"abc\"}},"
                "\"spec\":{}}");

        ck_assert_str_eq(pod_uid(p), "u1");
        ck_assert_str_eq(pod_name(p), "web");
        ck_assert_str_eq(pod_namespace(p), "prod");
        ck_assert_str_eq(p->source, "file");
        ck_assert_str_eq(p->seen.text, "2025-01-01T00:00:00Z");
        ck_assert_str_eq(p->mirror, "abc");
        ck_assert(p->deleting);
        ck_assert(p->has_annotations); /* config.hash is not local */
        /* Locals live in their fields, not in the text. */
        ck_assert_msg(!strstr(pod_text(p), "config.source") && !strstr(pod_text(p), "config.seen") &&
                              !strstr(pod_text(p), "config.mirror"),
                      "local annotation in text: %s", pod_text(p));
        ck_assert_msg(strstr(pod_text(p), "config.hash") != NULL, "hash missing: %s", pod_text(p));
        pod_unref(p);

        /* Non-string uid/name are treated as absent. */
        p = pod_new_text("{\"metadata\":{\"uid\":5,\"name\":null,\"namespace\":[]}}");
        ck_assert_str_eq(pod_uid(p), "");
        ck_assert_str_eq(pod_name(p), "");
        ck_assert_str_eq(pod_namespace(p), "");
        pod_unref(p);

        /* Only local annotations: has_annotations stays false. */
        p = pod_new_text("{\"metadata\":{\"annotations\":{\"kubernetes.io/config.source\":\"api\"}}}");
        ck_assert(!p->has_annotations);
        ck_assert_str_eq(p->source, "api");
        pod_unref(p);
}
END_TEST

/* Found by tests/fuzz/fuzz_api_list: json-c keeps a string's bytes as
 * they are, so a pod from the API server with bytes that are not UTF-8
 * reached consumers in a line that was not UTF-8.  Every such byte, in a
 * key or a value at any depth, becomes U+FFFD, as Go's decoder does, and
 * is written back as that character (as Go's encoder writes it). */
#define U "\xef\xbf\xbd"
START_TEST(test_render_invalid_utf8_becomes_ufffd)
{
        struct pod *p = pod_new_text("{\"metadata\":{\"name\":\"a\xff\",\"annotations\":"
                                     "{\"k\xc3\":\"\xed\xa0\x80\"}},\"spec\":{\"x\":[\"\xc3\xa9\xf8\"]}}");
        struct buf out = BUF_INIT;

        ck_assert_int_eq(pod_render(p, &out), 0);
        /* (the annotations come first in a pod's text) */
        ck_assert_str_eq(out.data, "{\"metadata\":{\"annotations\":{\"k" U "\":\"" U U U "\"},"
                                   "\"name\":\"a" U "\"},\"spec\":{\"x\":[\"\xc3\xa9" U "\"]}}");
        buf_free(&out);
        pod_unref(p);
}
END_TEST
#undef U

START_TEST(test_ref_unref)
{
        struct pod *p = pod_new_text("{\"metadata\":{\"uid\":\"u\"}}");

        ck_assert_ptr_eq(pod_ref(p), p);
        ck_assert_uint_eq(p->refs, 2);
        pod_unref(p);
        ck_assert_uint_eq(p->refs, 1);
        pod_unref(p); /* freed; ASan reports a leak otherwise */
        pod_unref(NULL);
        ck_assert_ptr_null(pod_ref(NULL));
}
END_TEST

/* ---- rendering ----------------------------------------------------------- */

/* pod_render -> parse gives the input back (as canonical JSON), with the
 * local annotations in metadata.annotations. */
START_TEST(test_render_round_trip)
{
        const char *in[] = {
                /* locals and non-locals */
                "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\","
                "\"namespace\":\"ns\",\"uid\":\"u\",\"resourceVersion\":\"7\","
                "\"labels\":{\"app\":\"x\"},\"annotations\":{\"z\":\"1\","
                "\"kubernetes.io/config.source\":\"file\",\"a\":\"2\","
                "\"kubernetes.io/config.seen\":\"2025-01-01T00:00:00.5Z\","
                "\"kubernetes.io/config.mirror\":\"m\"}},"
                "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\","
                "\"resources\":{\"limits\":{\"cpu\":\"1000m\"}}}],\"x\":1.50},"
                "\"status\":{\"phase\":\"Running\"}}",
                /* only non-locals */
                "{\"metadata\":{\"name\":\"a\",\"annotations\":{\"k\":\"v\"}},\"spec\":{}}",
                /* only locals */
                "{\"metadata\":{\"name\":\"a\",\"annotations\":"
                "{\"kubernetes.io/config.seen\":\"s\"}},\"spec\":{}}",
                /* empty annotations map */
                "{\"metadata\":{\"annotations\":{}}}",
                /* annotations first, other metadata after */
                "{\"status\":{},\"metadata\":{\"annotations\":{\"b\":\"\"},\"uid\":\"u\"},"
                "\"spec\":null}",
                /* nested values, arrays, numbers and booleans */
                "{\"metadata\":{\"annotations\":{\"x\":\"y\"},\"generation\":3,"
                "\"finalizers\":[\"a\",\"b\"],\"deletionGracePeriodSeconds\":30},"
                "\"spec\":{\"a\":[1,2.5,-3,true,false,null,{\"b\":[]}]}}",
        };

        for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
                struct pod *p = pod_new_text(in[i]);
                char *want = canon_text(in[i]), *got = render_canon(p);
                json_object *tree = pod_to_json(p);
                char *tree_c = canon_obj(tree);

                ck_assert_msg(strcmp(got, want) == 0,
                              "round trip of\n  %s\ngave\n  %s\nwant\n  %s", in[i], got, want);
                ck_assert_msg(strcmp(tree_c, want) == 0,
                              "pod_to_json of\n  %s\ngave\n  %s", in[i], tree_c);
                /* Parsing the rendering gives an equal pod. */
                {
                        char *t = render(p);
                        struct pod *q = pod_new_text(t);
                        char *again = render_canon(q);

                        ck_assert_str_eq(again, want);
                        ck_assert_msg(pod_semantic_equal(p, q) && pod_status_equal(p, q),
                                      "reparsed pod differs: %s", t);
                        free(again);
                        pod_unref(q);
                        free(t);
                }
                json_object_put(tree);
                free(tree_c);
                free(want);
                free(got);
                pod_unref(p);
        }
}
END_TEST

/* Removes metadata.annotations when it is {} or null, and metadata when it
 * is then {}: the rendering always writes an annotations map, which a
 * consumer cannot tell from an absent one (Go omits empty maps). */
static char *canon_without_empty_annotations(const char *json)
{
        json_object *o = NULL, *meta = NULL, *ann = NULL;
        char *s;

        ck_assert_int_eq(json_parse_text(json, strlen(json), &o, NULL), 0);
        if (json_object_object_get_ex(o, "metadata", &meta) &&
            json_object_is_type(meta, json_type_object)) {
                if (json_object_object_get_ex(meta, "annotations", &ann) &&
                    (!ann || (json_object_is_type(ann, json_type_object) &&
                              json_object_object_length(ann) == 0)))
                        json_object_object_del(meta, "annotations");
                if (json_object_object_length(meta) == 0)
                        json_object_object_del(o, "metadata");
        }
        s = canon_obj(o);
        json_object_put(o);
        return s;
}

/* A pod without annotations (or metadata) renders the same content; the
 * rendering may add an empty annotations map, and the re-parsed pod must be
 * semantically equal (a missing annotations map counts as empty, 3.4). */
START_TEST(test_render_round_trip_without_annotations)
{
        const char *in[] = {
                "{\"metadata\":{\"name\":\"a\",\"uid\":\"u\"},\"spec\":{\"c\":1}}",
                "{\"spec\":{\"c\":1},\"status\":{\"phase\":\"Pending\"}}",
                "{\"metadata\":{\"name\":\"a\",\"annotations\":null}}",
        };

        for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
                struct pod *p = pod_new_text(in[i]), *q;
                char *t = render(p);
                char *want = canon_without_empty_annotations(in[i]);
                char *got = canon_without_empty_annotations(t);

                ck_assert_msg(strcmp(got, want) == 0, "round trip of\n  %s\ngave\n  %s",
                              in[i], t);
                q = pod_new_text(t);
                ck_assert_msg(pod_semantic_equal(p, q),
                              "re-parsing the rendering of a pod without annotations "
                              "changes its semantic digest:\n  in:       %s\n  rendered: %s",
                              in[i], t);
                ck_assert(pod_status_equal(p, q));
                pod_unref(q);
                free(got);
                free(want);
                free(t);
                pod_unref(p);
        }
}
END_TEST

/* A source's name is kept once, not per pod; any other value is the
 * pod's own copy.  Either renders alike and is freed (or not) rightly. */
START_TEST(test_source_names_interned)
{
        struct pod *a = pod_new_text("{\"metadata\":{\"name\":\"a\",\"annotations\":"
                                     "{\"kubernetes.io/config.source\":\"file\"}}}");
        struct pod *b = pod_new_text("{\"metadata\":{\"name\":\"b\"}}"), *c, *d;
        char own[] = "file";

        ck_assert_int_eq(pod_clone(b, &c), 0);
        ck_assert_int_eq(pod_set_source(c, own), 0);
        ck_assert_ptr_eq(a->source, c->source);
        ck_assert_ptr_ne(c->source, own);
        ck_assert_int_eq(pod_clone(c, &d), 0);
        ck_assert_ptr_eq(d->source, c->source);
        ck_assert_int_eq(pod_set_source(d, "files"), 0);
        ck_assert_ptr_ne(d->source, c->source);
        ck_assert_str_eq(d->source, "files");
        ck_assert_int_eq(pod_set_source(c, POD_SOURCE_API), 0);
        ck_assert_str_eq(c->source, "api");
        pod_unref(a);
        pod_unref(b);
        pod_unref(c);
        pod_unref(d);
}
END_TEST

/* The name and the namespace are read from the store key. */
START_TEST(test_identity_from_the_key)
{
        struct pod *a = pod_new_text("{\"metadata\":{\"name\":\"web\",\"namespace\":\"kube-system\","
                                     "\"uid\":\"u1\"}}");
        struct pod *b = pod_new_text("{\"metadata\":{\"name\":\"web\",\"namespace\":\"\"}}");
        struct pod *c = pod_new_text("{\"metadata\":{}}");

        ck_assert_str_eq(pod_key(a), "kube-system/web");
        ck_assert_str_eq(pod_name(a), "web");
        ck_assert_str_eq(pod_namespace(a), "kube-system");
        ck_assert_str_eq(pod_uid(a), "u1");
        ck_assert_str_eq(pod_key(b), "web");
        ck_assert_str_eq(pod_name(b), "web");
        ck_assert_str_eq(pod_namespace(b), "");
        ck_assert_str_eq(pod_key(c), "");
        ck_assert_str_eq(pod_name(c), "");
        ck_assert_str_eq(pod_namespace(c), "");
        ck_assert_str_eq(pod_uid(c), "");
        pod_unref(a);
        pod_unref(b);
        pod_unref(c);
}
END_TEST

START_TEST(test_render_splices_locals)
{
        struct pod *p = pod_new_text("{\"metadata\":{\"name\":\"a\"},\"spec\":{}}"), *c;
        char *got;

        /* No annotations at all: the locals make the whole map. */
        ck_assert_int_eq(pod_clone(p, &c), 0);
        ck_assert_int_eq(pod_set_source(c, "api"), 0);
        ck_assert_int_eq(pod_set_seen(c, "2025-01-01T00:00:00Z"), 0);
        got = render_canon(c);
        ck_assert_str_eq(got, "{\"metadata\":{\"annotations\":{"
                              "\"kubernetes.io/config.seen\":\"2025-01-01T00:00:00Z\","
                              "\"kubernetes.io/config.source\":\"api\"},\"name\":\"a\"},"
                              "\"spec\":{}}");
        free(got);
        /* Removing them again. */
        ck_assert_int_eq(pod_set_source(c, NULL), 0);
        ck_assert_int_eq(pod_set_seen(c, NULL), 0);
        ck_assert_ptr_null(c->source);
        ASSERT_FIELD(c, "{}", "metadata", "annotations");
        pod_unref(c);
        pod_unref(p);

        /* Non-local annotations present: the locals join them. */
        p = pod_new_text("{\"metadata\":{\"annotations\":{\"x\":\"1\",\"y\":\"2\"}}}");
        ck_assert_int_eq(pod_clone(p, &c), 0);
        ck_assert_int_eq(pod_set_source(c, "file"), 0);
        ASSERT_FIELD(c, "{\"kubernetes.io/config.source\":\"file\",\"x\":\"1\",\"y\":\"2\"}",
                     "metadata", "annotations");
        /* Only one local set and a mirror from the input kept. */
        pod_unref(c);
        pod_unref(p);

        p = pod_new_text("{\"metadata\":{\"annotations\":{\"kubernetes.io/config.mirror\":\"h\","
                         "\"kubernetes.io/config.source\":\"api\"}}}");
        ck_assert_int_eq(pod_clone(p, &c), 0);
        ck_assert_int_eq(pod_set_source(c, "file"), 0);
        ASSERT_FIELD(c, "{\"kubernetes.io/config.mirror\":\"h\",\"kubernetes.io/config.source\":\"file\"}",
                     "metadata", "annotations");
        /* The original is untouched. */
        ASSERT_FIELD(p, "{\"kubernetes.io/config.mirror\":\"h\",\"kubernetes.io/config.source\":\"api\"}",
                     "metadata", "annotations");
        pod_unref(c);
        pod_unref(p);
}
END_TEST

START_TEST(test_render_escaping)
{
        /* Keys and values needing escapes, in non-local and local
         * annotations, and elsewhere in the pod. */
        const char *in =
                "{\"metadata\":{\"name\":\"q\\\"uote\",\"annotations\":{"
                "\"k\\\"ey\\\\/\":\"v\\\"al\\\\ue\\n\\t\\u0001/\\u00e9\\u2028\","
                "\"kubernetes.io/config.mirror\":\"m\\\"\\\\\\n\"}},"
                "\"spec\":{\"cmd\":[\"sh\",\"-c\",\"echo \\\"a\\\\b\\\" \\r\\f\\b\"]}}";
        struct pod *p = pod_new_text(in), *c;
        char *want = canon_text(in), *got = render_canon(p);

        ck_assert_str_eq(pod_name(p), "q\"uote");
        ck_assert_str_eq(p->mirror, "m\"\\\n");
        ck_assert_str_eq(got, want);
        free(got);

        /* Locals set by the merger with characters needing escapes. */
        ck_assert_int_eq(pod_clone(p, &c), 0);
        ck_assert_int_eq(pod_set_source(c, "s\"rc\\\n\x01"), 0);
        {
                char *t = render(c);
                struct pod *q = pod_new_text(t); /* must be valid JSON */

                ck_assert_str_eq(q->source, "s\"rc\\\n\x01");
                ck_assert_str_eq(q->mirror, "m\"\\\n");
                ck_assert_str_eq(pod_name(q), "q\"uote");
                ck_assert(pod_semantic_equal(p, q));
                pod_unref(q);
                free(t);
        }
        pod_unref(c);
        free(want);
        pod_unref(p);
}
END_TEST

/* ---- digests ------------------------------------------------------------- */

START_TEST(test_digest_key_order_whitespace)
{
        assert_semantic(
                "{\"metadata\":{\"uid\":\"u\",\"labels\":{\"a\":\"1\",\"b\":\"2\"},"
                "\"annotations\":{\"x\":\"1\",\"y\":\"2\"}},"
                "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}],\"dnsPolicy\":\"X\"},"
                "\"status\":{\"phase\":\"Running\",\"message\":\"m\"}}",
                " { \"status\" : { \"message\" : \"m\" , \"phase\" : \"Running\" } ,\n"
                "\"spec\":{\"dnsPolicy\":\"X\",\"containers\":[{\"image\":\"i\",\"name\":\"c\"}]},\n"
                "\"metadata\":{\"annotations\":{\"y\":\"2\",\"x\":\"1\"},"
                "\"labels\":{\"b\":\"2\",\"a\":\"1\"},\"uid\":\"u\"}}\n",
                true);
        assert_status("{\"status\":{\"phase\":\"Running\",\"message\":\"m\"}}",
                      "{\"status\":{ \"message\":\"m\",\n\"phase\":\"Running\"}}", true);
        /* String escapes that decode to the same value. */
        assert_semantic("{\"spec\":{\"a\":\"\\u0041/\"}}", "{\"spec\":{\"a\":\"A\\/\"}}", true);
        /* Array order matters. */
        assert_semantic("{\"spec\":{\"a\":[1,2]}}", "{\"spec\":{\"a\":[2,1]}}", false);
}
END_TEST

START_TEST(test_digest_absent_vs_empty)
{
        /* Go's deep equality: nil map != empty map, for labels and spec. */
        assert_semantic("{\"metadata\":{}}", "{\"metadata\":{\"labels\":{}}}", false);
        assert_semantic("{\"spec\":{}}", "{\"spec\":{\"volumes\":[]}}", false);
        assert_semantic("{}", "{\"spec\":{}}", false);
        /* null vs {} vs [] stay apart. */
        assert_semantic("{\"spec\":{\"a\":null}}", "{\"spec\":{\"a\":{}}}", false);
        assert_semantic("{\"spec\":{\"a\":[]}}", "{\"spec\":{\"a\":{}}}", false);
        /* status too. */
        assert_status("{}", "{\"status\":{}}", false);
        assert_status("{\"status\":{\"c\":[]}}", "{\"status\":{}}", false);
}
END_TEST

/* 3.4: "A missing annotations map counts as empty" (the kubelet's
 * isAnnotationMapEqual treats nil and {} alike). */
START_TEST(test_digest_missing_annotations_count_as_empty)
{
        assert_semantic("{\"metadata\":{\"uid\":\"u\"}}",
                        "{\"metadata\":{\"uid\":\"u\",\"annotations\":{}}}", true);
        /* Only local keys: the non-local part is empty. */
        assert_semantic("{\"metadata\":{\"uid\":\"u\"}}",
                        "{\"metadata\":{\"uid\":\"u\",\"annotations\":"
                        "{\"kubernetes.io/config.source\":\"api\"}}}",
                        true);
        assert_semantic("{\"metadata\":{\"uid\":\"u\",\"annotations\":null}}",
                        "{\"metadata\":{\"uid\":\"u\",\"annotations\":{}}}", true);
}
END_TEST

START_TEST(test_digest_locals_ignored)
{
        assert_semantic(
                "{\"metadata\":{\"annotations\":{\"x\":\"1\"}}}",
                "{\"metadata\":{\"annotations\":{\"x\":\"1\","
                "\"kubernetes.io/config.source\":\"file\","
                "\"kubernetes.io/config.seen\":\"2025-01-01T00:00:00Z\","
                "\"kubernetes.io/config.mirror\":\"h\"}}}",
                true);
        assert_semantic(
                "{\"metadata\":{\"annotations\":{\"kubernetes.io/config.source\":\"api\","
                "\"kubernetes.io/config.mirror\":\"h1\",\"x\":\"1\"}}}",
                "{\"metadata\":{\"annotations\":{\"kubernetes.io/config.source\":\"file\","
                "\"kubernetes.io/config.mirror\":\"h2\",\"x\":\"1\"}}}",
                true);
        /* config.hash is not local: a hash change alone is semantic. */
        assert_semantic(
                "{\"metadata\":{\"annotations\":{\"kubernetes.io/config.hash\":\"a\"}}}",
                "{\"metadata\":{\"annotations\":{\"kubernetes.io/config.hash\":\"b\"}}}",
                false);
        /* A non-local key added or removed, or a value changed. */
        assert_semantic("{\"metadata\":{\"annotations\":{\"x\":\"1\"}}}",
                        "{\"metadata\":{\"annotations\":{\"x\":\"1\",\"y\":\"\"}}}", false);
        assert_semantic("{\"metadata\":{\"annotations\":{\"x\":\"1\"}}}",
                        "{\"metadata\":{\"annotations\":{\"x\":\"2\"}}}", false);
        /* The locals do not change a pod's digests at all. */
        {
                struct pod *p = pod_new_text("{\"metadata\":{\"annotations\":{\"x\":\"1\"}}}"), *c;

                ck_assert_int_eq(pod_clone(p, &c), 0);
                ck_assert_int_eq(pod_set_source(c, "api"), 0);
                ck_assert_int_eq(pod_set_seen(c, "now"), 0);
                ck_assert(pod_semantic_equal(p, c));
                ck_assert(pod_status_equal(p, c));
                pod_unref(c);
                pod_unref(p);
        }
}
END_TEST

START_TEST(test_digest_status_separate)
{
        const char *a = "{\"spec\":{\"x\":1},\"status\":{\"phase\":\"Pending\"}}";
        const char *b = "{\"spec\":{\"x\":1},\"status\":{\"phase\":\"Running\"}}";
        const char *c = "{\"spec\":{\"x\":2},\"status\":{\"phase\":\"Pending\"}}";

        assert_semantic(a, b, true);
        assert_status(a, b, false);
        assert_semantic(a, c, false);
        assert_status(a, c, true);
        /* Metadata outside the compared set changes neither digest. */
        assert_semantic("{\"metadata\":{\"resourceVersion\":\"1\",\"generation\":1,"
                        "\"finalizers\":[\"f\"],\"ownerReferences\":[],\"name\":\"a\"}}",
                        "{\"metadata\":{\"resourceVersion\":\"2\",\"generation\":2,"
                        "\"creationTimestamp\":\"x\",\"name\":\"b\"}}",
                        true);
        assert_status("{\"metadata\":{\"resourceVersion\":\"1\"},\"spec\":{\"x\":1}}",
                      "{\"metadata\":{\"resourceVersion\":\"2\"},\"spec\":{\"x\":2}}", true);
}
END_TEST

START_TEST(test_digest_deletion_fields)
{
        /* Same instant, different spelling. */
        assert_semantic("{\"metadata\":{\"deletionTimestamp\":\"2025-01-01T00:00:00Z\"}}",
                        "{\"metadata\":{\"deletionTimestamp\":\"2025-01-01T01:00:00+01:00\"}}",
                        true);
        assert_semantic("{\"metadata\":{\"deletionTimestamp\":\"2025-01-01T00:00:00Z\"}}",
                        "{\"metadata\":{\"deletionTimestamp\":\"2024-12-31T19:30:00-04:30\"}}",
                        true);
        assert_semantic("{\"metadata\":{\"deletionTimestamp\":\"2025-01-01T00:00:00.5Z\"}}",
                        "{\"metadata\":{\"deletionTimestamp\":\"2025-01-01T00:00:00.500000000Z\"}}",
                        true);
        /* Different instants. */
        assert_semantic("{\"metadata\":{\"deletionTimestamp\":\"2025-01-01T00:00:00Z\"}}",
                        "{\"metadata\":{\"deletionTimestamp\":\"2025-01-01T00:00:00+01:00\"}}",
                        false);
        assert_semantic("{\"metadata\":{\"deletionTimestamp\":\"2025-01-01T00:00:00Z\"}}",
                        "{\"metadata\":{\"deletionTimestamp\":\"2025-01-01T00:00:00.1Z\"}}",
                        false);
        /* Absent vs set. */
        assert_semantic("{\"metadata\":{}}",
                        "{\"metadata\":{\"deletionTimestamp\":\"2025-01-01T00:00:00Z\"}}", false);
        /* Grace period: absent vs 0 differ (nil pointer vs 0), same value equal. */
        assert_semantic("{\"metadata\":{}}",
                        "{\"metadata\":{\"deletionGracePeriodSeconds\":0}}", false);
        assert_semantic("{\"metadata\":{\"deletionGracePeriodSeconds\":30}}",
                        "{\"metadata\":{\"deletionGracePeriodSeconds\":30}}", true);
        assert_semantic("{\"metadata\":{\"deletionGracePeriodSeconds\":30}}",
                        "{\"metadata\":{\"deletionGracePeriodSeconds\":0}}", false);
        {
                struct pod *p = pod_new_text(
                        "{\"metadata\":{\"deletionTimestamp\":\"2025-01-01T00:00:00Z\"}}");

                ck_assert(p->deleting);
                pod_unref(p);
                p = pod_new_text("{\"metadata\":{\"deletionGracePeriodSeconds\":30}}");
                ck_assert(!p->deleting);
                pod_unref(p);
        }
}
END_TEST

/* JSON null decodes to a nil pointer in Go: the same as absent. */
START_TEST(test_digest_null_deletion_timestamp_is_absent)
{
        struct pod *p = pod_new_text("{\"metadata\":{\"deletionTimestamp\":null}}");

        ck_assert(!p->deleting);
        pod_unref(p);
        assert_semantic("{\"metadata\":{\"deletionGracePeriodSeconds\":null}}",
                        "{\"metadata\":{}}", true);
        assert_semantic("{\"metadata\":{\"deletionTimestamp\":null}}",
                        "{\"metadata\":{}}", true);
}
END_TEST

/* Likewise "labels": null is a nil map in Go, deep-equal to absent labels
 * (3.4 compares labels with Go's deep equality). */
START_TEST(test_digest_null_labels_is_absent)
{
        assert_semantic("{\"metadata\":{\"labels\":null}}", "{\"metadata\":{}}", true);
        /* ... while {} stays distinct from both. */
        assert_semantic("{\"metadata\":{\"labels\":null}}",
                        "{\"metadata\":{\"labels\":{}}}", false);
}
END_TEST

START_TEST(test_digest_quantities_by_spelling)
{
        /* Go compares resource.Quantity by its stored form: "1" != "1000m". */
        assert_semantic("{\"spec\":{\"containers\":[{\"resources\":{\"limits\":{\"cpu\":\"1\"}}}]}}",
                        "{\"spec\":{\"containers\":[{\"resources\":{\"limits\":{\"cpu\":\"1000m\"}}}]}}",
                        false);
        assert_semantic("{\"spec\":{\"containers\":[{\"resources\":{\"limits\":{\"memory\":\"1Gi\"}}}]}}",
                        "{\"spec\":{\"containers\":[{\"resources\":{\"limits\":{\"memory\":\"1024Mi\"}}}]}}",
                        false);
        /* Identical spelling: equal. */
        assert_semantic("{\"spec\":{\"containers\":[{\"resources\":{\"limits\":{\"cpu\":\"500m\"}}}]}}",
                        "{\"spec\":{\"containers\":[{\"resources\":{\"limits\":{\"cpu\":\"500m\"}}}]}}",
                        true);
}
END_TEST

START_TEST(test_digest_tags_do_not_collide)
{
        /* A value moved from one compared part to another changes the
         * digest (parts are tagged). */
        assert_semantic("{\"spec\":{\"a\":\"b\"}}",
                        "{\"metadata\":{\"labels\":{\"a\":\"b\"}}}", false);
        assert_semantic("{\"metadata\":{\"labels\":{\"a\":\"b\"}}}",
                        "{\"metadata\":{\"annotations\":{\"a\":\"b\"}}}", false);
        assert_semantic("{\"metadata\":{\"labels\":{\"a\":\"b\"},\"annotations\":{}}}",
                        "{\"metadata\":{\"labels\":{},\"annotations\":{\"a\":\"b\"}}}", false);
}
END_TEST

/* ---- the merger's copy rules ---------------------------------------------- */

START_TEST(test_merge_update_copy_rules)
{
        struct pod *e = pod_new_text(
                "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"uid\":\"u\","
                "\"name\":\"a\",\"namespace\":\"ns\",\"resourceVersion\":\"1\","
                "\"generation\":1,\"creationTimestamp\":\"2025-01-01T00:00:00Z\","
                "\"finalizers\":[\"f1\"],\"ownerReferences\":[{\"name\":\"o1\"}],"
                "\"labels\":{\"l\":\"1\"},"
                "\"annotations\":{\"x\":\"1\",\"gone\":\"g\","
                "\"kubernetes.io/config.source\":\"api\","
                "\"kubernetes.io/config.seen\":\"T0\","
                "\"kubernetes.io/config.mirror\":\"M1\"}},"
                "\"spec\":{\"image\":\"v1\"},\"status\":{\"phase\":\"Pending\"}}");
        struct pod *r = pod_new_text(
                "{\"apiVersion\":\"v9\",\"kind\":\"Other\",\"metadata\":{\"uid\":\"u\","
                "\"name\":\"a\",\"namespace\":\"ns\",\"resourceVersion\":\"2\","
                "\"generation\":2,\"creationTimestamp\":\"2026-01-01T00:00:00Z\","
                "\"finalizers\":[\"f2\"],\"ownerReferences\":[],"
                "\"labels\":{\"l\":\"2\"},"
                "\"deletionTimestamp\":\"2025-06-01T00:00:00Z\","
                "\"deletionGracePeriodSeconds\":30,"
                "\"annotations\":{\"x\":\"2\",\"y\":\"3\","
                "\"kubernetes.io/config.source\":\"file\","
                "\"kubernetes.io/config.seen\":\"T1\","
                "\"kubernetes.io/config.mirror\":\"M2\"}},"
                "\"spec\":{\"image\":\"v2\"},\"status\":{\"phase\":\"Running\"}}");
        struct pod *m = NULL;

        ck_assert_int_eq(pod_merge_update(e, r, &m), 0);
        ck_assert_uint_eq(m->refs, 1);
        /* Copied from ref. */
        ASSERT_FIELD(m, "{\"image\":\"v2\"}", "spec");
        ASSERT_FIELD(m, "{\"phase\":\"Running\"}", "status");
        ASSERT_FIELD(m, "{\"l\":\"2\"}", "metadata", "labels");
        ASSERT_FIELD(m, "\"2025-06-01T00:00:00Z\"", "metadata", "deletionTimestamp");
        ASSERT_FIELD(m, "30", "metadata", "deletionGracePeriodSeconds");
        ASSERT_FIELD(m, "2", "metadata", "generation");
        /* ref's annotations; existing's local keys win. */
        ASSERT_FIELD(m,
                     "{\"kubernetes.io/config.mirror\":\"M1\","
                     "\"kubernetes.io/config.seen\":\"T0\","
                     "\"kubernetes.io/config.source\":\"api\",\"x\":\"2\",\"y\":\"3\"}",
                     "metadata", "annotations");
        /* Frozen at existing's value. */
        ASSERT_FIELD(m, "\"1\"", "metadata", "resourceVersion");
        ASSERT_FIELD(m, "\"2025-01-01T00:00:00Z\"", "metadata", "creationTimestamp");
        ASSERT_FIELD(m, "[\"f1\"]", "metadata", "finalizers");
        ASSERT_FIELD(m, "[{\"name\":\"o1\"}]", "metadata", "ownerReferences");
        ASSERT_FIELD(m, "\"v1\"", "apiVersion");
        ASSERT_FIELD(m, "\"Pod\"", "kind");
        ck_assert_str_eq(pod_uid(m), "u");
        ck_assert_str_eq(m->source, "api");
        ck_assert_str_eq(m->seen.text, "T0");
        ck_assert_str_eq(m->mirror, "M1");
        ck_assert(m->deleting);
        ck_assert(pod_semantic_equal(m, r));
        ck_assert(pod_status_equal(m, r));
        /* Inputs untouched. */
        ASSERT_FIELD(e, "{\"image\":\"v1\"}", "spec");
        ASSERT_FIELD(r, "\"2\"", "metadata", "resourceVersion");
        pod_unref(m);
        pod_unref(r);

        /* ref lacking labels, deletion fields, generation, status, spec and
         * annotations: they are removed from the result (Go's zero values,
         * omitted from JSON); existing's locals remain. */
        r = pod_new_text("{\"metadata\":{\"uid\":\"u\",\"name\":\"a\",\"namespace\":\"ns\"}}");
        ck_assert_int_eq(pod_merge_update(e, r, &m), 0);
        ASSERT_FIELD(m, "<absent>", "spec");
        ASSERT_FIELD(m, "<absent>", "status");
        ASSERT_FIELD(m, "<absent>", "metadata", "labels");
        ASSERT_FIELD(m, "<absent>", "metadata", "generation");
        ASSERT_FIELD(m, "<absent>", "metadata", "deletionTimestamp");
        ASSERT_FIELD(m,
                     "{\"kubernetes.io/config.mirror\":\"M1\","
                     "\"kubernetes.io/config.seen\":\"T0\","
                     "\"kubernetes.io/config.source\":\"api\"}",
                     "metadata", "annotations");
        ASSERT_FIELD(m, "\"1\"", "metadata", "resourceVersion");
        ck_assert(!m->deleting);
        pod_unref(m);
        pod_unref(r);
        pod_unref(e);

        /* existing without a mirror: ref's mirror is taken. */
        e = pod_new_text("{\"metadata\":{\"uid\":\"u\",\"annotations\":"
                         "{\"kubernetes.io/config.source\":\"api\"}}}");
        r = pod_new_text("{\"metadata\":{\"uid\":\"u\",\"annotations\":"
                         "{\"kubernetes.io/config.mirror\":\"M\",\"z\":\"1\"}}}");
        ck_assert_int_eq(pod_merge_update(e, r, &m), 0);
        ck_assert_str_eq(m->mirror, "M");
        ck_assert_str_eq(m->source, "api");
        ck_assert_ptr_null(m->seen.text);
        ASSERT_FIELD(m, "{\"kubernetes.io/config.mirror\":\"M\","
                        "\"kubernetes.io/config.source\":\"api\",\"z\":\"1\"}",
                     "metadata", "annotations");
        pod_unref(m);
        pod_unref(r);
        pod_unref(e);
}
END_TEST

START_TEST(test_merge_status_copy_rules)
{
        struct pod *e = pod_new_text(
                "{\"metadata\":{\"uid\":\"u\",\"resourceVersion\":\"1\",\"labels\":{\"l\":\"1\"},"
                "\"annotations\":{\"x\":\"1\",\"kubernetes.io/config.seen\":\"T0\"}},"
                "\"spec\":{\"image\":\"v1\"},\"status\":{\"phase\":\"Pending\"}}");
        struct pod *r = pod_new_text(
                "{\"metadata\":{\"uid\":\"u\",\"resourceVersion\":\"2\",\"labels\":{\"l\":\"2\"},"
                "\"annotations\":{\"x\":\"2\",\"kubernetes.io/config.seen\":\"T1\"}},"
                "\"spec\":{\"image\":\"v2\"},\"status\":{\"phase\":\"Running\"}}");
        struct pod *m = NULL;

        ck_assert_int_eq(pod_merge_status(e, r, &m), 0);
        ASSERT_FIELD(m, "{\"phase\":\"Running\"}", "status");
        ASSERT_FIELD(m, "{\"image\":\"v1\"}", "spec");
        ASSERT_FIELD(m, "{\"l\":\"1\"}", "metadata", "labels");
        ASSERT_FIELD(m, "\"1\"", "metadata", "resourceVersion");
        ASSERT_FIELD(m, "{\"kubernetes.io/config.seen\":\"T0\",\"x\":\"1\"}", "metadata",
                     "annotations");
        ck_assert(pod_semantic_equal(m, e));
        ck_assert(pod_status_equal(m, r));
        pod_unref(m);
        pod_unref(r);

        /* ref without status: status removed. */
        r = pod_new_text("{\"metadata\":{\"uid\":\"u\"}}");
        ck_assert_int_eq(pod_merge_status(e, r, &m), 0);
        ASSERT_FIELD(m, "<absent>", "status");
        ck_assert(pod_semantic_equal(m, e));
        pod_unref(m);
        pod_unref(r);
        pod_unref(e);
}
END_TEST

/* The merged pod of a pod without annotations compares equal to the next
 * identical version (else every later SET is a spurious UPDATE). */
START_TEST(test_merge_keeps_semantic_digest_without_annotations)
{
        const char *v1 = "{\"metadata\":{\"uid\":\"u\",\"name\":\"a\"},\"spec\":{\"i\":1},"
                         "\"status\":{\"p\":\"A\"}}";
        const char *v2 = "{\"metadata\":{\"uid\":\"u\",\"name\":\"a\"},\"spec\":{\"i\":2},"
                         "\"status\":{\"p\":\"B\"}}";
        struct pod *p1 = pod_new_text(v1), *p2 = pod_new_text(v2), *e, *m;

        /* As the merger stores a new pod: a clone with source and seen. */
        ck_assert_int_eq(pod_clone(p1, &e), 0);
        ck_assert_int_eq(pod_set_source(e, "api"), 0);
        ck_assert_int_eq(pod_set_seen(e, "T0"), 0);

        ck_assert_int_eq(pod_merge_status(e, p2, &m), 0);
        ck_assert_msg(pod_semantic_equal(m, p1),
                      "after pod_merge_status the stored pod no longer equals the "
                      "unchanged incoming version (annotations absent vs only-local)");
        pod_unref(m);

        ck_assert_int_eq(pod_merge_update(e, p2, &m), 0);
        ck_assert_msg(pod_semantic_equal(m, p2),
                      "after pod_merge_update the stored pod no longer equals the "
                      "incoming version it was built from");
        pod_unref(m);
        pod_unref(e);
        pod_unref(p1);
        pod_unref(p2);
}
END_TEST

/* The merger's stamp: source and the first-seen time, rendered in the
 * config.seen format, carried by clones and merges, and never allocating
 * for a source that is one of ours. */
START_TEST(test_stamp)
{
        struct pod *p =
                pod_new_text("{\"metadata\":{\"uid\":\"u\",\"name\":\"n\",\"annotations\":{\"x\":\"1\","
                             "\"kubernetes.io/config.seen\":\"sent\"}},\"spec\":{\"a\":1},\"status\":{\"s\":1}}");
        struct pod *q = pod_new_text("{\"metadata\":{\"uid\":\"u\",\"name\":\"n\",\"annotations\":{\"x\":\"1\"}},"
                                     "\"spec\":{\"a\":2},\"status\":{\"s\":2}}");
        struct pod *c = NULL, *m = NULL;
        char buf[POD_SEEN_MAX], *t;
        long n;
        int r0;

        ck_assert(!p->stamped);
        ck_assert_str_eq(pod_seen(p, buf), "sent");
        failalloc_arm(LONG_MAX);
        r0 = pod_stamp(p, POD_SOURCE_FILE, 1735689600123456ull);
        n = failalloc_count();
        failalloc_arm(0);
        ck_assert_int_eq(r0, 0);
        ck_assert_int_eq(n, 0);
        ck_assert(p->stamped);
        ck_assert_str_eq(p->source, POD_SOURCE_FILE);
        ck_assert_str_eq(pod_seen(p, buf), "2025-01-01T00:00:00.123456Z");
        t = render(p);
        ck_assert_ptr_nonnull(strstr(t, "\"kubernetes.io/config.source\":\"file\","
                                        "\"kubernetes.io/config.seen\":\"2025-01-01T00:00:00.123456Z\""));
        free(t);
        /* Clones and merges carry the time; a merge keeps the stored one. */
        ck_assert_int_eq(pod_clone(p, &c), 0);
        ck_assert(c->stamped);
        ck_assert_str_eq(pod_seen(c, buf), "2025-01-01T00:00:00.123456Z");
        ck_assert_int_eq(pod_merge_update(p, q, &m), 0);
        ck_assert(m->stamped);
        ck_assert_str_eq(pod_seen(m, buf), "2025-01-01T00:00:00.123456Z");
        pod_unref(m);
        ck_assert_int_eq(pod_merge_status(q, p, &m), 0); /* q has no seen: p's fills in */
        ck_assert_str_eq(pod_seen(m, buf), "2025-01-01T00:00:00.123456Z");
        pod_unref(m);
        /* Text set again replaces the time. */
        ck_assert_int_eq(pod_set_seen(c, "T"), 0);
        ck_assert(!c->stamped);
        ck_assert_str_eq(pod_seen(c, buf), "T");
        ck_assert_int_eq(pod_set_seen(c, NULL), 0);
        ck_assert_ptr_null(pod_seen(c, buf));
        /* A source of another name is copied; failing that, nothing changes. */
        if (failalloc_enabled()) {
                int r;

                failalloc_arm(1);
                r = pod_stamp(c, "elsewhere", 5);
                failalloc_arm(0);
                ck_assert_int_eq(r, -ENOMEM);
                ck_assert(!c->stamped);
                ck_assert_str_eq(c->source, POD_SOURCE_FILE);
        }
        ck_assert_int_eq(pod_stamp(c, "elsewhere", 5), 0);
        ck_assert_str_eq(c->source, "elsewhere");
        ck_assert_str_eq(pod_seen(c, buf), "1970-01-01T00:00:00.000005Z");
        pod_unref(c);
        pod_unref(p);
        pod_unref(q);
}
END_TEST

/* pod_same: what a source may keep in place of a new read.  The same text
 * read twice is the same, whatever config.source and .seen say; a change
 * of text, status or config.mirror is not. */
START_TEST(test_same)
{
        static const char *const head = "{\"metadata\":{\"uid\":\"u\",\"name\":\"n\",\"annotations\":{%s}},"
                                        "\"spec\":{\"a\":1},\"status\":{\"s\":%d}}";
        struct {
                const char *ann;
                int status;
                bool same;
        } cases[] = {
                {"\"x\":\"1\"", 1, true},
                {"\"x\":\"1\",\"kubernetes.io/config.seen\":\"t\",\"kubernetes.io/config.source\":\"api\"", 1, true},
                {"\"x\":\"2\"", 1, false},
                {"\"x\":\"1\"", 2, false},
                {"\"x\":\"1\",\"kubernetes.io/config.mirror\":\"m\"", 1, false},
        };
        char text[512];
        struct pod *base;

        snprintf(text, sizeof(text), head, cases[0].ann, cases[0].status);
        base = pod_new_text(text);
        ck_assert_int_eq(pod_stamp(base, POD_SOURCE_API, 7), 0);
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct pod *p;

                snprintf(text, sizeof(text), head, cases[i].ann, cases[i].status);
                p = pod_new_text(text);
                ck_assert_msg(pod_same(base, p) == cases[i].same && pod_same(p, base) == cases[i].same,
                              "case %zu: want %s", i, cases[i].same ? "same" : "different");
                pod_unref(p);
        }
        ck_assert(pod_same(base, base));
        pod_unref(base);
}
END_TEST

START_TEST(test_clone)
{
        struct pod *p = pod_new_text(
                "{\"metadata\":{\"uid\":\"u\",\"name\":\"n\",\"namespace\":\"ns\","
                "\"annotations\":{\"x\":\"1\",\"kubernetes.io/config.source\":\"file\","
                "\"kubernetes.io/config.mirror\":\"m\"}},\"spec\":{\"a\":1}}");
        struct pod *c = NULL;
        char *a, *b;

        pod_ref(p); /* refs == 2: the clone must still start at 1 */
        ck_assert_int_eq(pod_clone(p, &c), 0);
        ck_assert_ptr_ne(c, p);
        ck_assert_uint_eq(c->refs, 1);
        ck_assert_str_eq(pod_uid(c), "u");
        ck_assert_str_eq(pod_name(c), "n");
        ck_assert_str_eq(pod_namespace(c), "ns");
        ck_assert_str_eq(c->source, "file");
        ck_assert_ptr_null(c->seen.text);
        ck_assert_str_eq(c->mirror, "m");
        /* The text and identity are shared (immutable); the locals are
         * the clone's own (a source's name is kept once: see
         * test_source_names_interned). */
        ck_assert_ptr_eq(pod_text(c), pod_text(p));
        ck_assert_ptr_eq(pod_uid(c), pod_uid(p));
        ck_assert_ptr_ne(c->mirror, p->mirror);
        ck_assert_uint_eq(c->text_len, p->text_len);
        ck_assert_uint_eq(c->splice, p->splice);
        ck_assert(c->has_annotations == p->has_annotations);
        ck_assert(pod_semantic_equal(c, p));
        ck_assert(pod_status_equal(c, p));
        a = render(p);
        b = render(c);
        ck_assert_str_eq(a, b);
        free(b);
        /* Changing the clone's locals leaves the original alone. */
        ck_assert_int_eq(pod_set_source(c, "api"), 0);
        ck_assert_int_eq(pod_set_seen(c, "T"), 0);
        ck_assert_str_eq(p->source, "file");
        ck_assert_ptr_null(p->seen.text);
        b = render(p);
        ck_assert_str_eq(a, b);
        free(b);
        free(a);
        /* The clone outlives the original (shared text stays valid). */
        pod_unref(p);
        pod_unref(p);
        a = render(c);
        ck_assert_msg(strstr(a, "\"kubernetes.io/config.source\":\"api\"") &&
                              strstr(a, "\"x\":\"1\"") && strstr(a, "\"spec\":{\"a\":1}"),
                      "clone after the original was freed renders %s", a);
        free(a);
        pod_unref(c);
}
END_TEST

/* ---- names and order ------------------------------------------------------ */

START_TEST(test_names)
{
        struct pod *p = pod_new_text("{\"metadata\":{\"name\":\"web\",\"namespace\":\"prod\"}}");
        struct pod *q = pod_new_text("{\"metadata\":{\"name\":\"web\"}}");
        struct buf b = BUF_INIT;

        ck_assert_int_eq(pod_full_name(p, &b), 0);
        ck_assert_str_eq(b.data, "web_prod");
        ck_assert_int_eq(pod_store_key(p, &b), 0); /* resets first */
        ck_assert_str_eq(b.data, "prod/web");
        ck_assert_int_eq(pod_full_name(q, &b), 0);
        ck_assert_str_eq(b.data, "web_");
        ck_assert_int_eq(pod_store_key(q, &b), 0);
        ck_assert_str_eq(b.data, "web");
        buf_free(&b);
        pod_unref(p);
        pod_unref(q);
}
END_TEST

START_TEST(test_compare_order)
{
        /* namespace, then name, then uid */
        const char *sorted[] = {
                "{\"metadata\":{\"name\":\"z\",\"uid\":\"1\"}}",
                "{\"metadata\":{\"namespace\":\"a\",\"name\":\"b\",\"uid\":\"9\"}}",
                "{\"metadata\":{\"namespace\":\"a\",\"name\":\"c\",\"uid\":\"1\"}}",
                "{\"metadata\":{\"namespace\":\"a\",\"name\":\"c\",\"uid\":\"2\"}}",
                "{\"metadata\":{\"namespace\":\"b\",\"name\":\"a\",\"uid\":\"0\"}}",
        };
        enum { N = sizeof(sorted) / sizeof(sorted[0]) };
        struct pod *p[N];

        for (int i = 0; i < N; i++)
                p[i] = pod_new_text(sorted[i]);
        for (int i = 0; i < N; i++) {
                for (int j = 0; j < N; j++) {
                        int c = pod_compare(p[i], p[j]);
                        int want = i < j ? -1 : i > j ? 1 : 0;

                        ck_assert_msg((c < 0 ? -1 : c > 0 ? 1 : 0) == want,
                                      "pod_compare(%s, %s) = %d, want sign %d", sorted[i],
                                      sorted[j], c, want);
                        ck_assert_int_eq(pod_compare_ptr(&p[i], &p[j]), c);
                }
        }
        for (int i = 0; i < N; i++)
                pod_unref(p[i]);
}
END_TEST

/* ---- config.seen format ----------------------------------------------------- */

START_TEST(test_format_seen)
{
        static const struct {
                uint64_t usec;
                const char *want;
        } cases[] = {
                {1735689600000000ull, "2025-01-01T00:00:00Z"},
                {1735689600123456ull, "2025-01-01T00:00:00.123456Z"},
                {1735689600100000ull, "2025-01-01T00:00:00.1Z"},
                {1735689600120000ull, "2025-01-01T00:00:00.12Z"},
                {1735689600000001ull, "2025-01-01T00:00:00.000001Z"},
                {1735689600000010ull, "2025-01-01T00:00:00.00001Z"},
                {1740830400123456ull, "2025-03-01T12:00:00.123456Z"},
                {0, "1970-01-01T00:00:00Z"},
                {951782400999999ull, "2000-02-29T00:00:00.999999Z"},
                {4102444799000000ull, "2099-12-31T23:59:59Z"},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char out[40];

                memset(out, 'x', sizeof(out));
                pod_format_seen(cases[i].usec, out, sizeof(out));
                ck_assert_msg(strcmp(out, cases[i].want) == 0,
                              "pod_format_seen(%llu) = \"%s\", want \"%s\"",
                              (unsigned long long)cases[i].usec, out, cases[i].want);
        }
        {
                /* A short buffer is truncated, still terminated. */
                char out[11];

                pod_format_seen(1735689600123456ull, out, sizeof(out));
                ck_assert_str_eq(out, "2025-01-01");
        }
}
END_TEST

/* ---- ops and records -------------------------------------------------------- */

START_TEST(test_op_strings)
{
        static const struct {
                enum pod_op op;
                const char *name;
                int value;
        } ops[] = {
                {POD_OP_SET, "SET", 0},       {POD_OP_ADD, "ADD", 1},
                {POD_OP_DELETE, "DELETE", 2}, {POD_OP_REMOVE, "REMOVE", 3},
                {POD_OP_UPDATE, "UPDATE", 4}, {POD_OP_RECONCILE, "RECONCILE", 5},
        };
        const char *unknown[] = {"", "add", "Add", "ADD ", " ADD", "RESTORE", "SET\n",
                                 "UNKNOWN", "*", "ADDX"};

        ck_assert_int_eq(_POD_OP_MAX, 6);
        for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
                ck_assert_int_eq((int)ops[i].op, ops[i].value);
                ck_assert_str_eq(pod_op_to_string(ops[i].op), ops[i].name);
                ck_assert_int_eq(pod_op_from_string(ops[i].name), ops[i].op);
                ck_assert_int_eq(pod_op_from_string(pod_op_to_string(ops[i].op)), ops[i].op);
        }
        for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++)
                ck_assert_msg(pod_op_from_string(unknown[i]) == -EINVAL,
                              "pod_op_from_string(\"%s\") = %d, want -EINVAL", unknown[i],
                              (int)pod_op_from_string(unknown[i]));
        ck_assert_int_eq(pod_op_from_string(NULL), -EINVAL);
        ck_assert_ptr_null(pod_op_to_string(_POD_OP_MAX));
        ck_assert_ptr_null(pod_op_to_string((enum pod_op)-1));
        ck_assert_ptr_null(pod_op_to_string(_POD_OP_INVALID));
        ck_assert_ptr_null(pod_op_to_string((enum pod_op)100));
}
END_TEST

START_TEST(test_update_add_sort_free)
{
        struct pod_update *u = pod_update_new(POD_OP_SET, "file");
        struct pod *pods[20];
        char json[128];

        ck_assert_ptr_nonnull(u);
        ck_assert_int_eq(u->op, POD_OP_SET);
        ck_assert_str_eq(u->source, "file");
        ck_assert_uint_eq(u->n_pods, 0);
        /* Added in reverse order, past the initial capacity. */
        for (int i = 0; i < 20; i++) {
                snprintf(json, sizeof(json),
                         "{\"metadata\":{\"namespace\":\"ns%d\",\"name\":\"p%02d\",\"uid\":\"u%02d\"}}",
                         (19 - i) % 3, 19 - i, 19 - i);
                pods[i] = pod_new_text(json);
                ck_assert_int_eq(pod_update_add(u, pods[i]), 0);
                ck_assert_uint_eq(pods[i]->refs, 2);
        }
        ck_assert_uint_eq(u->n_pods, 20);
        ck_assert_uint_ge(u->cap_pods, 20);
        /* Incoming order kept until sorted. */
        for (int i = 0; i < 20; i++)
                ck_assert_ptr_eq(u->pods[i], pods[i]);
        pod_update_sort(u);
        for (size_t i = 1; i < u->n_pods; i++)
                ck_assert_msg(pod_compare(u->pods[i - 1], u->pods[i]) < 0, "not sorted at %zu: %s/%s then %s/%s", i,
                              pod_namespace(u->pods[i - 1]), pod_name(u->pods[i - 1]), pod_namespace(u->pods[i]),
                              pod_name(u->pods[i]));
        ck_assert_str_eq(pod_namespace(u->pods[0]), "ns0");
        ck_assert_str_eq(pod_name(u->pods[0]), "p00");
        ck_assert_str_eq(pod_namespace(u->pods[19]), "ns2");
        ck_assert_str_eq(pod_name(u->pods[19]), "p17");
        pod_update_free(u);
        /* The record dropped exactly its own references. */
        for (int i = 0; i < 20; i++) {
                ck_assert_uint_eq(pods[i]->refs, 1);
                pod_unref(pods[i]);
        }
        pod_update_free(NULL);

        /* NULL source is an empty string; an empty record sorts fine. */
        u = pod_update_new(POD_OP_ADD, NULL);
        ck_assert_ptr_nonnull(u);
        ck_assert_str_eq(u->source, "");
        pod_update_sort(u);
        ck_assert_uint_eq(u->n_pods, 0);
        pod_update_free(u);

        /* The same pod twice holds two references. */
        u = pod_update_new(POD_OP_ADD, "x");
        pods[0] = pod_new_text("{}");
        ck_assert_int_eq(pod_update_add(u, pods[0]), 0);
        ck_assert_int_eq(pod_update_add(u, pods[0]), 0);
        ck_assert_uint_eq(pods[0]->refs, 3);
        pod_update_free(u);
        ck_assert_uint_eq(pods[0]->refs, 1);
        pod_unref(pods[0]);
}
END_TEST


/* A pod named ns/name with uid and one label value (to tell versions). */
static struct pod *fold_pod(const char *name, const char *uid, const char *v)
{
        char json[256];

        snprintf(json, sizeof(json),
                 "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"%s\",\"uid\":\"%s\","
                 "\"labels\":{\"v\":\"%s\"}},\"spec\":{}}", name, uid, v);
        return pod_new_text(json);
}

/* "name=v,..." of the pods (in record order), and "|gone:uid,..." */
static const char *fold_desc(const struct pod_update *u, char *out, size_t size)
{
        size_t off = 0;

        out[0] = '\0';
        for (size_t i = 0; i < u->n_pods; i++) {
                char *v = field(u->pods[i], "metadata", "labels", "v", NULL);
                size_t vl = strlen(v);

                /* The label's canonical JSON is a quoted string. */
                off += (size_t)snprintf(out + off, size - off, "%s%s=%.*s", i ? "," : "", pod_name(u->pods[i]),
                                        (int)(vl - 2), v + 1);
                free(v);
        }
        if (u->n_gone) {
                off += (size_t)snprintf(out + off, size - off, "|gone:");
                for (size_t i = 0; i < u->n_gone; i++)
                        off += (size_t)snprintf(out + off, size - off, "%s%s", i ? "," : "", pod_uid(u->gone[i]));
        }
        return out;
}

static void add_new(struct pod_update *u, struct pod *p, bool gone)
{
        ck_assert_int_eq(gone ? pod_update_add_gone(u, p) : pod_update_add(u, p), 0);
        pod_unref(p);
}

START_TEST(test_fold_delta_into_set)
{
        struct pod_update *set = pod_update_new(POD_OP_SET, "file");
        struct pod_update *d = pod_update_new_delta("file");
        char out[256];

        add_new(set, fold_pod("a", "ua", "1"), false);
        add_new(set, fold_pod("b", "ub", "1"), false);
        add_new(set, fold_pod("c", "uc", "1"), false);
        ck_assert(set->sorted);
        add_new(d, fold_pod("b", "ub", "2"), false);  /* changed */
        add_new(d, fold_pod("d", "ud", "1"), false);  /* new */
        add_new(d, fold_pod("a", "ua", "1"), true);   /* gone */
        add_new(d, fold_pod("z", "uz", "1"), true);   /* gone, never there */
        ck_assert(pod_update_foldable(set) && pod_update_foldable(d));
        ck_assert_int_eq(pod_update_fold(set, d), 0);
        ck_assert(!set->delta);
        ck_assert(!set->sorted);
        ck_assert_uint_eq(set->n_gone, 0); /* a SET has no gone list */
        pod_update_sort(set);
        ck_assert_str_eq(fold_desc(set, out, sizeof(out)), "b=2,c=1,d=1");
        /* d was only read. */
        ck_assert_str_eq(fold_desc(d, out, sizeof(out)), "b=2,d=1|gone:ua,uz");
        /* Folding again (an index exists now) keeps it in step. */
        pod_update_free(d);
        d = pod_update_new_delta("file");
        add_new(d, fold_pod("c", "uc", "3"), false);
        add_new(d, fold_pod("b", "ub", "x"), true);
        ck_assert_int_eq(pod_update_fold(set, d), 0);
        pod_update_sort(set);
        ck_assert_str_eq(fold_desc(set, out, sizeof(out)), "c=3,d=1");
        pod_update_free(d);
        pod_update_free(set);
}
END_TEST

START_TEST(test_fold_delta_into_delta)
{
        struct pod_update *u = pod_update_new_delta("file");
        struct pod_update *d = pod_update_new_delta("file");
        char out[256];

        add_new(u, fold_pod("a", "ua", "1"), false);
        add_new(u, fold_pod("b", "ub", "1"), false);
        add_new(u, fold_pod("x", "ux", "1"), true);
        /* a goes, x comes back, b changes again */
        add_new(d, fold_pod("x", "ux", "2"), false);
        add_new(d, fold_pod("b", "ub", "2"), false);
        add_new(d, fold_pod("a", "ua", "1"), true);
        ck_assert_int_eq(pod_update_fold(u, d), 0);
        ck_assert(u->delta);
        pod_update_sort(u);
        ck_assert_str_eq(fold_desc(u, out, sizeof(out)), "b=2,x=2|gone:ua");
        pod_update_free(d);
        /* No UID is both upserted and gone. */
        d = pod_update_new_delta("file");
        add_new(d, fold_pod("a", "ua", "3"), false);
        add_new(d, fold_pod("x", "ux", "2"), true);
        ck_assert_int_eq(pod_update_fold(u, d), 0);
        pod_update_sort(u);
        ck_assert_str_eq(fold_desc(u, out, sizeof(out)), "a=3,b=2|gone:ux");
        pod_update_free(d);
        pod_update_free(u);
}
END_TEST

START_TEST(test_fold_set_replaces_and_plain_ops_refused)
{
        struct pod_update *u = pod_update_new_delta("api");
        struct pod_update *set = pod_update_new(POD_OP_SET, "api");
        struct pod_update *add = pod_update_new(POD_OP_ADD, "api");
        struct pod *keep = fold_pod("k", "uk", "1");
        char out[256];

        add_new(u, fold_pod("a", "ua", "1"), false);
        add_new(u, fold_pod("g", "ug", "1"), true);
        ck_assert_int_eq(pod_update_add(set, keep), 0);
        ck_assert_int_eq(pod_update_fold(u, set), 0);
        ck_assert(!u->delta);
        ck_assert_str_eq(fold_desc(u, out, sizeof(out)), "k=1");
        ck_assert_uint_eq(keep->refs, 3);
        /* Plain ops do not fold, either way. */
        ck_assert(!pod_update_foldable(add));
        ck_assert_int_eq(pod_update_fold(u, add), -EINVAL);
        ck_assert_int_eq(pod_update_fold(add, u), -EINVAL);
        ck_assert_str_eq(fold_desc(u, out, sizeof(out)), "k=1");
        /* A checkpoint's SET then a live one: the live one's flag wins,
         * as its content does; a share keeps the flag. */
        {
                struct pod_update *live = pod_update_new(POD_OP_SET, "api"), *copy = NULL;

                ck_assert_ptr_nonnull(live);
                u->provisional = true;
                ck_assert_int_eq(pod_update_share(u, &copy), 0);
                ck_assert(copy->provisional);
                ck_assert_int_eq(pod_update_fold(u, live), 0);
                ck_assert(!u->provisional);
                live->provisional = true;
                ck_assert_int_eq(pod_update_fold(copy, live), 0);
                ck_assert(copy->provisional);
                pod_update_free(live);
                pod_update_free(copy);
        }
        pod_update_free(u);
        pod_update_free(set);
        pod_update_free(add);
        ck_assert_uint_eq(keep->refs, 1);
        pod_unref(keep);
}
END_TEST

/* A pod text from random parts: any of the metadata members (locals
 * included), top-level members in random order, spec and status or not. */
static unsigned mrand_state;

static unsigned mrand(unsigned n)
{
        mrand_state = mrand_state * 1103515245u + 12345u;
        return (mrand_state >> 8) % n;
}

static char *random_pod(unsigned variant)
{
        static const char *const meta[] = {
                "\"uid\":\"u1\"", "\"name\":\"a\"", "\"namespace\":\"ns\"", "\"resourceVersion\":\"%u\"",
                "\"generation\":%u", "\"labels\":{\"l\":\"%u\"}", "\"labels\":{}",
                "\"deletionTimestamp\":\"2025-06-01T00:00:0%uZ\"", "\"deletionGracePeriodSeconds\":%u",
                "\"finalizers\":[\"f%u\"]", "\"ownerReferences\":[{\"name\":\"o%u\"}]",
                "\"annotations\":{\"x\":\"%u\",\"kubernetes.io/config.seen\":\"T%u\"}",
                "\"annotations\":{\"kubernetes.io/config.mirror\":\"M%u\",\"z\":\"1\"}",
                "\"annotations\":{}",
        };
        static const char *const top[] = {
                "\"apiVersion\":\"v%u\"", "\"kind\":\"Pod\"", "\"spec\":{\"image\":\"i%u\",\"x\":[1,%u]}",
                "\"status\":{\"phase\":\"P%u\"}", "\"extra\":{\"k\":%u}",
        };
        struct buf b = BUF_INIT;
        bool used_ann = false;
        unsigned nm = mrand(6), nt = mrand(5);

        buf_puts(&b, "{\"metadata\":{\"uid\":\"u1\",\"name\":\"a\"");
        for (unsigned i = 0; i < nm; i++) {
                unsigned k = 3 + mrand(sizeof(meta) / sizeof(meta[0]) - 3);
                char one[128];

                if (strstr(meta[k], "annotations") || strstr(meta[k], "labels")) {
                        if (used_ann && strstr(meta[k], "annotations"))
                                continue;
                        used_ann = used_ann || strstr(meta[k], "annotations");
                }
                snprintf(one, sizeof(one), meta[k], variant + i, variant);
                if (strstr(b.data, one) || (strstr(one, "labels") && strstr(b.data, "labels")) ||
                    (strstr(one, "deletionTimestamp") && strstr(b.data, "deletionTimestamp")))
                        continue;
                buf_putc(&b, ',');
                buf_puts(&b, one);
        }
        buf_putc(&b, '}');
        for (unsigned i = 0; i < nt; i++) {
                unsigned k = mrand(sizeof(top) / sizeof(top[0]));
                char one[128], key[32];

                snprintf(one, sizeof(one), top[k], variant + i);
                snprintf(key, sizeof(key), "%.*s", (int)(strchr(one + 1, '"') - one + 1), one);
                if (strstr(b.data, key))
                        continue;
                buf_putc(&b, ',');
                buf_puts(&b, one);
        }
        buf_putc(&b, '}');
        return buf_steal(&b, NULL);
}

/* A merged pod is what building it from its own text gives: the same
 * text, digests and flags (so the spans and digests a merge takes from
 * two versions are put together right). */
START_TEST(test_merge_spans_consistent)
{
        mrand_state = 7;
        for (unsigned it = 0; it < 3000; it++) {
                char *ta = random_pod(it), *tb = random_pod(it + 1000);
                struct pod *a = pod_new_text(ta), *b = pod_new_text(tb), *m = NULL, *again;
                char *rm;

                for (int status = 0; status < 2; status++) {
                        ck_assert_int_eq(status ? pod_merge_status(a, b, &m) : pod_merge_update(a, b, &m), 0);
                        rm = render(m);
                        again = pod_new_text(rm);
                        ck_assert_msg(again->text_len == m->text_len &&
                                              memcmp(pod_text(again), pod_text(m), m->text_len) == 0,
                                      "merge %d of\n%s\n%s\ngave\n%.*s\nrebuilt\n%.*s", status, ta, tb,
                                      (int)m->text_len, pod_text(m), (int)again->text_len, pod_text(again));
                        ck_assert_msg(pod_semantic_equal(again, m) && pod_status_equal(again, m) &&
                                              again->deleting == m->deleting &&
                                              again->has_annotations == m->has_annotations,
                                      "digests of the merge of\n%s\n%s", ta, tb);
                        ck_assert(again->splice == m->splice && again->copied_off == m->copied_off &&
                                  again->meta_end == m->meta_end && again->spec_off == m->spec_off &&
                                  again->status_off == m->status_off);
                        ck_assert_str_eq(pod_uid(again), pod_uid(a));
                        free(rm);
                        pod_unref(again);
                        pod_unref(m);
                }
                pod_unref(a);
                pod_unref(b);
                free(ta);
                free(tb);
        }
}
END_TEST

UNIT_MAIN(test_stamp, test_same, test_source_names_interned, test_identity_from_the_key, test_merge_spans_consistent,
          test_fold_delta_into_set, test_fold_delta_into_delta, test_fold_set_replaces_and_plain_ops_refused,
          test_from_json_rejects_non_object, test_from_json_rejects_bad_metadata, test_from_text_rejects_bad_json,
          test_from_json_missing_metadata_ok, test_from_json_fields, test_ref_unref, test_render_round_trip,
          test_render_round_trip_without_annotations, test_render_splices_locals, test_render_escaping,
          test_digest_key_order_whitespace, test_digest_absent_vs_empty, test_digest_missing_annotations_count_as_empty,
          test_digest_locals_ignored, test_digest_status_separate, test_digest_deletion_fields,
          test_digest_null_deletion_timestamp_is_absent, test_digest_null_labels_is_absent,
          test_digest_quantities_by_spelling, test_digest_tags_do_not_collide, test_merge_update_copy_rules,
          test_merge_status_copy_rules, test_merge_keeps_semantic_digest_without_annotations, test_clone, test_names,
          test_compare_order, test_format_seen, test_op_strings, test_update_add_sort_free,
          test_render_invalid_utf8_becomes_ufffd)
