/*
 * Unit tests of manifest: reading, decoding, defaults, generated UIDs and
 * validation of static-pod manifests (doc/pod-config.md 5 and 9.1).  The
 * kubelet's own cases (common_test.go, file_linux_test.go, http_test.go)
 * are reproduced by intent near the end.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/digest.h"
#include "util/json_canon.h"
#include "util/file.h"
#include "sources/manifest.h"
#include "core/pod.h"
#include "util/yaml_json.h"
#include "unit.h"

#define NODE "random-test-hostname"
#define PATH "/etc/kubernetes/manifests/test_pod_manifest"

static const struct manifest_ctx file_ctx = {MANIFEST_ORIGIN_FILE, NODE, PATH};
static const struct manifest_ctx url_ctx = {MANIFEST_ORIGIN_URL, NODE, "http://example.test/pods"};

#define HEAD "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n"
#define ONE_C "spec:\n  containers:\n  - name: c\n    image: nginx:1.25\n"
#define SIMPLE HEAD ONE_C

/* ---- helpers ----------------------------------------------------------- */

static json_object *decode_ctx(const char *text, const struct manifest_ctx *ctx)
{
        struct buf err = BUF_INIT;
        json_object *pod = NULL;
        int r = manifest_decode_pod(text, strlen(text), ctx, &pod, NULL, &err);

        ck_assert_msg(r == 0, "decode failed (%d): %s\n--- input ---\n%s", r,
                      err.data, text);
        buf_free(&err);
        return pod;
}

static json_object *decode(const char *text)
{
        return decode_ctx(text, &file_ctx);
}

/* The error text; asserts the return code. */
static char *decode_err_ctx(const char *text, const struct manifest_ctx *ctx, int want)
{
        struct buf err = BUF_INIT;
        json_object *pod = NULL;
        int r = manifest_decode_pod(text, strlen(text), ctx, &pod, NULL, &err);

        if (r == 0)
                ck_abort_msg("decode succeeded, wanted %d:\n%s\n--- input ---\n%s", want,
                             json_object_to_json_string(pod), text);
        ck_assert_int_eq(r, want);
        ck_assert_ptr_null(pod);
        ck_assert_uint_gt(err.len, 0);
        /* One line, no trailing newline. */
        ck_assert_ptr_null(strchr(err.data, '\n'));
        return buf_steal(&err, NULL);
}

#define EXPECT_ERR(text, want)                                         \
        do {                                                           \
                char *e_ = decode_err_ctx(text, &file_ctx, -EINVAL);   \
                ck_assert_str_eq(e_, want);                            \
                free(e_);                                              \
        } while (0)

static char *canon(json_object *o)
{
        struct buf b = BUF_INIT;

        ck_assert_int_eq(json_canon_append(&b, o), 0);
        return buf_steal(&b, NULL);
}

/* Value at a dotted path ("spec.containers.0.name"); NULL if absent. */
static json_object *at(json_object *o, const char *path)
{
        char seg[128];
        const char *p = path;

        while (o && *p) {
                size_t n = strcspn(p, ".");

                ck_assert_uint_lt(n, sizeof(seg));
                memcpy(seg, p, n);
                seg[n] = '\0';
                p += n + (p[n] == '.');
                if (json_object_is_type(o, json_type_array))
                        o = json_object_array_get_idx(o, (size_t)strtoul(seg, NULL, 10));
                else if (!json_object_object_get_ex(o, seg, &o))
                        return NULL;
        }
        return o;
}

static const char *str_at(json_object *o, const char *path)
{
        json_object *v = at(o, path);

        if (!v)
                return "(absent)";
        return json_object_get_string(v);
}

/* Canonical JSON of the value at path, "(absent)" if none.  Static buffer:
 * one use per assertion. */
static const char *canon_at(json_object *o, const char *path)
{
        static char out[4096];
        json_object *v = at(o, path);
        char *c;

        if (!v)
                return "(absent)";
        c = canon(v);
        snprintf(out, sizeof(out), "%s", c);
        free(c);
        return out;
}

static char *uid_of(const char *text, const struct manifest_ctx *ctx)
{
        json_object *pod = decode_ctx(text, ctx);
        char *uid = strdup(str_at(pod, "metadata.uid"));

        ck_assert_ptr_nonnull(uid);
        json_object_put(pod);
        return uid;
}

static char tmpdir[64];

static void make_tmpdir(void)
{
        snprintf(tmpdir, sizeof(tmpdir), "/tmp/podmux-manifest-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static char *tmp_path(const char *name)
{
        struct buf b = BUF_INIT;

        ck_assert_int_eq(buf_printf(&b, "%s/%s", tmpdir, name), 0);
        return buf_steal(&b, NULL);
}

static void write_file(const char *path, const void *data, size_t len)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
        ck_assert_int_eq(close(fd), 0);
}

START_TEST(test_decode_size_limit)
{
        size_t n = MANIFEST_MAX_BYTES - 1;
        char *big = malloc(MANIFEST_MAX_BYTES + 1);
        struct buf err = BUF_INIT;
        json_object *pod = NULL;

        ck_assert_ptr_nonnull(big);
        /* A valid pod padded with a long comment to limit - 1 bytes. */
        memset(big, 'x', MANIFEST_MAX_BYTES);
        memcpy(big, SIMPLE "#", strlen(SIMPLE) + 1);
        big[n - 1] = '\n';
        ck_assert_int_eq(manifest_decode_pod(big, n, &file_ctx, &pod, NULL, &err), 0);
        ck_assert_str_eq(str_at(pod, "metadata.name"), "web-" NODE);
        json_object_put(pod);
        pod = NULL;
        ck_assert_int_eq(manifest_decode_pod(big, MANIFEST_MAX_BYTES, &file_ctx, &pod, NULL, &err), -EFBIG);
        ck_assert_str_eq(err.data, "manifest too large (10485760 bytes, limit 10485760)");
        ck_assert_ptr_null(pod);
        ck_assert_int_eq(manifest_decode_pods(big, MANIFEST_MAX_BYTES, &url_ctx, &pod, NULL, &err), -EFBIG);
        free(big);
        buf_free(&err);
}
END_TEST

/* ---- decoding: YAML level and type meta -------------------------------- */

START_TEST(test_empty_and_null_manifests)
{
        static const char *const empty[] = {"", "\n\n", "# nothing\n", "---\n", "null\n", "~",
                                            "--- null\n---\n" SIMPLE};

        for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++) {
                char *e = decode_err_ctx(empty[i], &file_ctx, -ENODATA);

                ck_assert_str_eq(e, "empty manifest: no YAML or JSON document");
                free(e);
        }
}
END_TEST

START_TEST(test_not_a_mapping)
{
        EXPECT_ERR("- a\n- b\n", "a manifest must be a YAML mapping or JSON object (got array)");
        EXPECT_ERR("hello", "a manifest must be a YAML mapping or JSON object (got string)");
        EXPECT_ERR("42", "a manifest must be a YAML mapping or JSON object (got integer)");
}
END_TEST

START_TEST(test_type_meta)
{
        /* Kind is checked before the version, as the kubelet's decoder does. */
        EXPECT_ERR("metadata: {name: x}\n", "Object 'Kind' is missing");
        EXPECT_ERR("apiVersion: v1\nkind: ''\n", "Object 'Kind' is missing");
        EXPECT_ERR("kind: Pod\nmetadata: {name: x}\n", "Object 'apiVersion' is missing");
        EXPECT_ERR("apiVersion: v1betta2\nkind: Pod\n", "no kind \"Pod\" is registered for version \"v1betta2\"");
        EXPECT_ERR("apiVersion: apps/v1\nkind: Pod\n", "no kind \"Pod\" is registered for version \"apps/v1\"");
        EXPECT_ERR("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n", "not a pod: kind Deployment");
        EXPECT_ERR("apiVersion: v1\nkind: List\nitems: []\n", "not a pod: kind List");
        /* The file source takes single pods only. */
        EXPECT_ERR("apiVersion: v1\nkind: PodList\nitems: []\n", "not a pod: kind PodList");
        EXPECT_ERR("apiVersion: v1\nkind: [Pod]\n", "kind: Invalid type: expected string, got array");
        EXPECT_ERR("apiVersion: 1\nkind: Pod\n", "apiVersion: Invalid type: expected string, got integer");
}
END_TEST

START_TEST(test_yaml_errors_pass_through)
{
        static const char nul[] = "apiVersion: v1\nkind: Pod\0\n";
        struct buf err = BUF_INIT;
        json_object *pod = NULL;

        EXPECT_ERR(HEAD "spec:\n  containers:\n  - name: c\n    image: x: y\n",
                   "line 8, column 13: mapping values are not allowed in this context");
        EXPECT_ERR(HEAD "spec: {containers: [}\n",
                   "line 5, column 21: did not find expected node content (while parsing a flow "
                   "node)");
        EXPECT_ERR("apiVersion: v1\nkind: Pod\nx: .inf\n",
                   "line 3, column 4: .inf: JSON cannot represent infinity or NaN");
        ck_assert_int_eq(manifest_decode_pod(nul, sizeof(nul) - 1, &file_ctx, &pod, NULL, &err), -EINVAL);
        ck_assert_str_eq(err.data, "line 2, column 10: NUL byte at offset 24: binary data is not "
                                   "a YAML or JSON manifest");
        buf_free(&err);
}
END_TEST

/* Text that starts as JSON goes to the kubelet's JSON decoder as it is:
 * JSON that YAML cannot read is accepted, as there (a surrogate pair
 * escaped, as Python's json.dumps() writes an emoji; a lone surrogate,
 * which becomes U+FFFD; a member's name and its colon on two lines).
 * Text both refuse gets the YAML reader's message; a YAML document with
 * the same escape is refused, as Go's YAML reader refuses it. */
START_TEST(test_json_read_as_json)
{
        static const char pair[] = "  \n{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\","
                                   "\"annotations\":{\"a\":\"smile \\ud83d\\ude00\"}},"
                                   "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x:v1\"}]}}\n";
        static const char lone[] = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\","
                                   "\"annotations\":{\"a\":\"x\\ud83dy\"}},"
                                   "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x:v1\"}]}}";
        static const char split[] = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\"\n:\"p\"},"
                                    "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x:v1\"}]}}";
        json_object *pod;
        char *e;

        pod = decode(pair);
        ck_assert_str_eq(str_at(pod, "metadata.annotations.a"), "smile \xf0\x9f\x98\x80");
        json_object_put(pod);
        pod = decode(lone);
        ck_assert_str_eq(str_at(pod, "metadata.annotations.a"), "x\xef\xbf\xbdy");
        json_object_put(pod);
        pod = decode(split);
        ck_assert_str_eq(str_at(pod, "metadata.name"), "p-random-test-hostname");
        json_object_put(pod);
        /* Refused by both: the YAML reader's message. */
        EXPECT_ERR("{\"apiVersion\": \"v1\",\n  bad\n",
                   "line 3, column 1: did not find expected ',' or '}' (while parsing a flow mapping at line "
                   "1, column 1)");
        /* Not JSON: YAML's rules alone. */
        e = decode_err_ctx(HEAD "  annotations: {a: \"smile \\ud83d\\ude00\"}\n"
                                "spec: {containers: [{name: c, image: 'x:v1'}]}\n",
                           &file_ctx, -EINVAL);
        ck_assert_msg(strstr(e, "found invalid Unicode character escape code"), "%s", e);
        free(e);
}
END_TEST

START_TEST(test_binary_garbage)
{
        static const unsigned char gz[] = {0x1f, 0x8b, 0x08, 0x00, 0x12, 0x34, 0x56, 0x78, 0x00, 0x03};
        static const unsigned char latin1[] = {'a', 'p', 'i', ':', ' ', 0xe9, 0xe8, '\n'};
        struct buf err = BUF_INIT;
        json_object *pod = NULL;

        ck_assert_int_eq(manifest_decode_pod((const char *)gz, sizeof(gz), &file_ctx, &pod, NULL, &err),
                         -EINVAL);
        ck_assert_str_eq(err.data, "line 1, column 3: NUL byte at offset 3: binary data is not a "
                                   "YAML or JSON manifest");
        ck_assert_int_eq(manifest_decode_pod((const char *)latin1, sizeof(latin1), &file_ctx, &pod, NULL,
                                             &err),
                         -EINVAL);
        ck_assert_str_eq(err.data, "line 1, column 7: invalid trailing UTF-8 octet (byte 0xe8): "
                                   "not YAML or JSON text; is this a binary file?");
        ck_assert_ptr_null(pod);
        buf_free(&err);
}
END_TEST

START_TEST(test_first_document_only)
{
        json_object *pod = decode(SIMPLE "---\napiVersion: v1\nkind: Pod\nmetadata: {name: other}\n"
                                         "---\n: : not even valid\n");

        ck_assert_str_eq(str_at(pod, "metadata.name"), "web-" NODE);
        json_object_put(pod);
}
END_TEST

START_TEST(test_field_types)
{
        EXPECT_ERR("apiVersion: v1\nkind: Pod\nmetadata: {name: 5}\n",
                   "metadata.name: Invalid type: expected string, got integer");
        EXPECT_ERR("apiVersion: v1\nkind: Pod\nmetadata: [a]\n",
                   "metadata: Invalid type: expected object, got array");
        EXPECT_ERR(HEAD "  labels: {a: 1, b: yes}\n" ONE_C,
                   "metadata.labels.a: Invalid type: expected string, got integer; "
                   "metadata.labels.b: Invalid type: expected string, got boolean");
        EXPECT_ERR(HEAD "spec:\n  containers:\n  - name: c\n    image: x\n    ports: [{containerPort: '80'}]\n",
                   "spec.containers[0].ports[0].containerPort: Invalid type: expected integer, got string");
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: c, image: x, command: [sh, 1]}]\n",
                   "spec.containers[0].command[1]: Invalid type: expected string, got integer");
        EXPECT_ERR(HEAD "spec:\n  containers: {name: c}\n",
                   "spec.containers: Invalid type: expected array, got object");
        EXPECT_ERR(HEAD "spec:\n  containers: [c]\n",
                   "spec.containers[0]: Invalid type: expected object, got string");
        EXPECT_ERR(HEAD "spec:\n  terminationGracePeriodSeconds: 30.0\n  containers: [{name: c, image: x}]\n",
                   "spec.terminationGracePeriodSeconds: Invalid type: expected integer, got number");
        EXPECT_ERR(HEAD "spec:\n  hostNetwork: 'true'\n  containers: [{name: c, image: x}]\n",
                   "spec.hostNetwork: Invalid type: expected boolean, got string");
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: c, image: x, livenessProbe: {httpGet: {port: [1]}}}]\n",
                   "spec.containers[0].livenessProbe.httpGet.port: Invalid type: expected integer or "
                   "string, got array");
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: c, image: x}]\n  volumes: [{name: v, hostPath: {path: 1}}]\n",
                   "spec.volumes[0].hostPath.path: Invalid type: expected string, got integer");
        EXPECT_ERR(HEAD ONE_C "status: {phase: 1}\n", "status.phase: Invalid type: expected string, got integer");
}
END_TEST

START_TEST(test_yaml_11_scalars_in_pods)
{
        /* Go's YAML 1.1 reading: yes/off are booleans, 0x50 is 80. */
        json_object *pod = decode(HEAD "spec:\n  hostNetwork: yes\n  enableServiceLinks: off\n"
                                       "  containers:\n  - name: c\n    image: x:1\n"
                                       "    ports: [{containerPort: 0x50}]\n");

        ck_assert_str_eq(canon_at(pod, "spec.hostNetwork"), "true");
        ck_assert_str_eq(canon_at(pod, "spec.enableServiceLinks"), "false");
        ck_assert_str_eq(canon_at(pod, "spec.containers.0.ports.0"),
                         "{\"containerPort\":80,\"hostPort\":80,\"protocol\":\"TCP\"}");
        json_object_put(pod);
}
END_TEST

START_TEST(test_nulls_are_absent)
{
        json_object *pod = decode(HEAD "  labels: ~\n  namespace: null\nspec:\n  restartPolicy: null\n"
                                       "  securityContext: ~\n  tolerations: ~\n"
                                       "  containers:\n  - name: c\n    image: x:1\n    ports: ~\n");

        ck_assert_ptr_null(at(pod, "metadata.labels"));
        ck_assert_str_eq(str_at(pod, "metadata.namespace"), "default");
        ck_assert_str_eq(str_at(pod, "spec.restartPolicy"), "Always");
        ck_assert_str_eq(canon_at(pod, "spec.securityContext"), "{}");
        ck_assert_str_eq(canon_at(pod, "spec.tolerations"), "[{\"effect\":\"NoExecute\",\"operator\":\"Exists\"}]");
        ck_assert_ptr_null(at(pod, "spec.containers.0.ports"));
        json_object_put(pod);
}
END_TEST

/* Decodes text, expecting success, and returns the unknown fields
 * joined ("" for none). */
static char *unknown_of(const char *text, const struct manifest_ctx *ctx, bool list,
                        json_object **ret_pod)
{
        struct v1_unknown u = {NULL, 0, 0};
        struct buf err = BUF_INIT, joined = BUF_INIT;
        json_object *pod = NULL;
        int r = list ? manifest_decode_pods(text, strlen(text), ctx, &pod, &u, &err)
                     : manifest_decode_pod(text, strlen(text), ctx, &pod, &u, &err);

        ck_assert_msg(r == 0, "decode failed (%d): %s\n--- input ---\n%s", r,
                      err.data, text);
        ck_assert_int_eq(v1_unknown_join(&u, &joined), 0);
        ck_assert_int_eq(buf_puts(&joined, ""), 0);
        v1_unknown_clear(&u);
        buf_free(&err);
        if (ret_pod)
                *ret_pod = pod;
        else
                json_object_put(pod);
        return buf_steal(&joined, NULL);
}

START_TEST(test_unknown_fields_dropped)
{
        json_object *pod = NULL;
        char *u;

        /* The kubelet's decoder drops what v1 does not define; podmux
         * drops it too and says where, in document order. */
        u = unknown_of(HEAD "  x-custom: {a: 1}\n" ONE_C "    imagePullPolicyy: Never\n"
                            "    resources: {limits: {cpu: 1}, limitz: {}}\n"
                            "  futureField: [1, 2]\n  volumes: [{name: v, emptyDir: {size: 1}}]\n"
                            "status: {phaze: Running}\nextra: 1\n",
                       &file_ctx, false, &pod);
        ck_assert_str_eq(u, "\"metadata.x-custom\", \"spec.containers[0].imagePullPolicyy\", "
                            "\"spec.containers[0].resources.limitz\", \"spec.futureField\", "
                            "\"spec.volumes[0].emptyDir.size\", \"status.phaze\", \"extra\"");
        free(u);
        ck_assert_ptr_null(at(pod, "metadata.x-custom"));
        ck_assert_ptr_null(at(pod, "spec.futureField"));
        ck_assert_ptr_null(at(pod, "extra"));
        ck_assert_str_eq(canon_at(pod, "spec.containers.0.resources"),
                         "{\"limits\":{\"cpu\":\"1\"},\"requests\":{\"cpu\":\"1\"}}");
        ck_assert_str_eq(canon_at(pod, "spec.containers.0.imagePullPolicy"), "\"IfNotPresent\"");
        ck_assert_str_eq(canon_at(pod, "spec.volumes.0"), "{\"emptyDir\":{},\"name\":\"v\"}");
        ck_assert_str_eq(canon_at(pod, "status"), "{\"phase\":\"Pending\"}");
        json_object_put(pod);

        /* None: an empty list.  Case matters (Go's Kubernetes decoder is
         * case-sensitive). */
        u = unknown_of(SIMPLE, &file_ctx, false, NULL);
        ck_assert_str_eq(u, "");
        free(u);
        u = unknown_of(SIMPLE "  HostNetwork: true\n", &file_ctx, false, NULL);
        ck_assert_str_eq(u, "\"spec.HostNetwork\"");
        free(u);

        /* A PodList: the list's own members, then each item's, placed. */
        u = unknown_of("{\"apiVersion\":\"v1\",\"kind\":\"PodList\",\"bogus\":1,"
                       "\"metadata\":{\"resourceVersion\":\"7\",\"x\":1},\"items\":["
                       "{\"metadata\":{\"name\":\"a\"},\"spec\":{\"containers\":[{\"name\":\"c\","
                       "\"image\":\"x\"}]}},"
                       "{\"metadata\":{\"name\":\"b\"},\"spec\":{\"containers\":[{\"name\":\"c\","
                       "\"image\":\"x\",\"ttty\":true}]}}]}",
                       &url_ctx, true, NULL);
        ck_assert_str_eq(u, "\"bogus\", \"metadata.x\", \"items[1].spec.containers[0].ttty\"");
        free(u);
}
END_TEST

START_TEST(test_unknown_fields_bounded_and_optional)
{
        struct buf text = BUF_INIT, err = BUF_INIT;
        struct v1_unknown u = {NULL, 0, 0};
        json_object *pod = NULL;
        char *joined;

        ck_assert_int_eq(buf_puts(&text, HEAD), 0);
        for (int i = 0; i < V1_NORMALIZE_MAX_UNKNOWN + 10; i++)
                ck_assert_int_eq(buf_printf(&text, "  x%03d: 1\n", i), 0);
        ck_assert_int_eq(buf_puts(&text, ONE_C), 0);
        ck_assert_int_eq(manifest_decode_pod(text.data, text.len, &file_ctx, &pod, &u, &err), 0);
        ck_assert_uint_eq(u.n, V1_NORMALIZE_MAX_UNKNOWN);
        ck_assert_uint_eq(u.total, V1_NORMALIZE_MAX_UNKNOWN + 10);
        json_object_put(pod);
        pod = NULL;
        joined = unknown_of(text.data, &file_ctx, false, NULL);
        ck_assert_ptr_nonnull(strstr(joined, "\"metadata.x000\", \"metadata.x001\""));
        ck_assert_ptr_nonnull(strstr(joined, "\"metadata.x063\" (and 10 more)"));
        ck_assert_ptr_null(strstr(joined, "x064"));
        free(joined);

        /* A failure leaves the list empty; NULL means "not wanted". */
        ck_assert_int_eq(manifest_decode_pod(HEAD "  x: 1\n", strlen(HEAD) + 7, &file_ctx, &pod, &u,
                                             &err),
                         -EINVAL);
        ck_assert_uint_eq(u.n, 0);
        ck_assert_uint_eq(u.total, 0);
        ck_assert_ptr_null(u.paths);
        ck_assert_int_eq(manifest_decode_pod(text.data, text.len, &file_ctx, &pod, NULL, &err), 0);
        json_object_put(pod);
        v1_unknown_clear(&u);
        buf_free(&text);
        buf_free(&err);
}
END_TEST

/* ---- semantic equality: Go's decoder, not the text ---------------------- */

#define PHEAD "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  uid: pinned-1\n"

static char *decode_list_err(const char *text, int want);

static char *join2(const char *a, const char *b)
{
        struct buf t = BUF_INIT;

        ck_assert_int_eq(buf_puts(&t, a), 0);
        ck_assert_int_eq(buf_puts(&t, b), 0);
        return buf_steal(&t, NULL);
}

static struct pod *pod_of(const char *text)
{
        json_object *o = decode(text);
        struct pod *p = NULL;

        ck_assert_int_eq(pod_from_json(o, &p, NULL), 0);
        json_object_put(o);
        return p;
}

/*
 * a and b (after the metadata head) as the merger would see them: with a
 * pinned UID, equal semantic digests mean no UPDATE; without one, equal
 * generated UIDs mean the pod is not replaced.  Both must follow Go.
 */
static void check_pair(const char *a, const char *b, bool equal)
{
        char *pa = join2(PHEAD, a), *pb = join2(PHEAD, b);
        char *ua = join2(HEAD, a), *ub = join2(HEAD, b);
        struct pod *x = pod_of(pa), *y = pod_of(pb);
        char *uid_a = uid_of(ua, &file_ctx), *uid_b = uid_of(ub, &file_ctx);

        ck_assert_msg(pod_semantic_equal(x, y) == equal, "semantic digests %s:\n%s---\n%s",
                      equal ? "differ" : "are equal", a, b);
        ck_assert_msg((strcmp(uid_a, uid_b) == 0) == equal, "generated UIDs %s:\n%s---\n%s",
                      equal ? "differ" : "are equal", a, b);
        pod_unref(x);
        pod_unref(y);
        free(uid_a);
        free(uid_b);
        free(pa);
        free(pb);
        free(ua);
        free(ub);
}

START_TEST(test_semantic_equality_as_go_decodes)
{
        static const struct {
                const char *a, *b;
        } same[] = {
                /* a quantity as a number or as the same spelling quoted;
                 * Go's YAML step writes 1.0 as 1 and 0.50 as 0.5 */
                {ONE_C "    resources: {limits: {cpu: 1}}\n", ONE_C "    resources: {limits: {cpu: '1'}}\n"},
                {ONE_C "    resources: {limits: {cpu: 1.0}}\n", ONE_C "    resources: {limits: {cpu: '1'}}\n"},
                {ONE_C "    resources: {limits: {memory: 0.50}}\n",
                 ONE_C "    resources: {limits: {memory: ' 0.5 '}}\n"},
                {ONE_C "    resources: {requests: {cpu: 2e3}}\n", ONE_C "    resources: {requests: {cpu: '2000'}}\n"},
                /* plain scalars at their zero value, omitempty or not */
                {ONE_C, ONE_C "  hostNetwork: false\n"},
                {ONE_C, ONE_C "  hostname: ''\n"},
                {ONE_C, ONE_C "    tty: false\n"},
                {ONE_C, ONE_C "    workingDir: ''\n    stdin: false\n"},
                {ONE_C "    ports: [{containerPort: 80}]\n", ONE_C "    ports: [{containerPort: 80, hostPort: 0, name: ''}]\n"},
                {ONE_C "    livenessProbe: {tcpSocket: {host: h}}\n",
                 ONE_C "    livenessProbe: {tcpSocket: {host: h, port: 0}}\n"},
                /* fields v1 does not define */
                {ONE_C, ONE_C "    imagePullPolicyy: Never\n  bogus: {a: 1}\n"},
                {"  labels: {a: b}\n" ONE_C, "  labels: {a: b}\n  labelz: {c: d}\n" ONE_C},
                /* null is absent; a plain struct left empty is absent */
                {ONE_C, ONE_C "  nodeSelector: null\n  terminationGracePeriodSeconds: ~\n"},
                {ONE_C, ONE_C "    resources: {}\n"},
                {ONE_C, ONE_C "    resources: {limits: null}\n"},
                {ONE_C "status: {}\n", ONE_C},
                /* a null element is the element's zero value */
                {ONE_C "    command: [a, '']\n", ONE_C "    command: [a, null]\n"},
        };
        static const struct {
                const char *a, *b;
        } differ[] = {
                /* pointers at their zero value are not absent */
                {ONE_C, ONE_C "  automountServiceAccountToken: false\n"},
                {ONE_C, ONE_C "  terminationGracePeriodSeconds: 0\n"},
                {ONE_C "  securityContext: {}\n", ONE_C "  securityContext: {runAsUser: 0}\n"},
                {ONE_C, ONE_C "    securityContext: {}\n"},
                /* nil and empty slices and maps differ */
                {ONE_C, ONE_C "  volumes: []\n"},
                {ONE_C, "  labels: {}\n" ONE_C},
                {ONE_C, ONE_C "    resources: {limits: {}}\n"},
                /* other spellings of a quantity, an int or a string */
                {ONE_C "    resources: {limits: {cpu: 1}}\n", ONE_C "    resources: {limits: {cpu: 1000m}}\n"},
                {ONE_C "    resources: {limits: {cpu: '1'}}\n", ONE_C "    resources: {limits: {cpu: '1.0'}}\n"},
                {ONE_C "    livenessProbe: {tcpSocket: {port: 80}}\n",
                 ONE_C "    livenessProbe: {tcpSocket: {port: '80'}}\n"},
                {ONE_C "    livenessProbe: {tcpSocket: {host: h}}\n",
                 ONE_C "    livenessProbe: {tcpSocket: {host: h, port: ''}}\n"},
        };

        for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++)
                check_pair(same[i].a, same[i].b, true);
        for (size_t i = 0; i < sizeof(differ) / sizeof(differ[0]); i++)
                check_pair(differ[i].a, differ[i].b, false);
}
END_TEST

START_TEST(test_normalized_form)
{
        json_object *pod = decode(HEAD "  labels: {a: null}\n" ONE_C "    tty: false\n"
                                       "    resources: {limits: {cpu: 1, memory: 1.5e9, x/y: 0.0000001}}\n"
                                       "    args: [a, null]\n"
                                       "  hostNetwork: false\n  automountServiceAccountToken: false\n"
                                       "  volumes: []\n  overhead: {cpu: null}\n");

        /* What consumers get: zero plain scalars gone, pointers and empty
         * slices kept, quantities as strings, nulls as zero values. */
        ck_assert_str_eq(canon_at(pod, "metadata.labels"), "{\"a\":\"\"}");
        ck_assert_ptr_null(at(pod, "spec.containers.0.tty"));
        ck_assert_ptr_null(at(pod, "spec.hostNetwork"));
        ck_assert_str_eq(canon_at(pod, "spec.automountServiceAccountToken"), "false");
        ck_assert_str_eq(canon_at(pod, "spec.volumes"), "[]");
        ck_assert_str_eq(canon_at(pod, "spec.containers.0.resources.limits"),
                         "{\"cpu\":\"1\",\"memory\":\"1500000000\",\"x/y\":\"1e-7\"}");
        ck_assert_str_eq(canon_at(pod, "spec.containers.0.args"), "[\"a\",\"\"]");
        ck_assert_str_eq(canon_at(pod, "spec.overhead"), "{\"cpu\":\"0\"}");
        json_object_put(pod);
}
END_TEST

START_TEST(test_normalize_type_errors)
{
        /* Go's typed decoding fails on these; fields the early type pass
         * does not cover are checked by the normalization. */
        EXPECT_ERR(SIMPLE "  hostname: 5\n", "spec.hostname: Invalid type: expected string, got integer");
        EXPECT_ERR(SIMPLE "  securityContext: {runAsUser: '0'}\n",
                   "spec.securityContext.runAsUser: Invalid type: expected integer, got string");
        EXPECT_ERR(SIMPLE "    livenessProbe: {periodSeconds: 3000000000}\n",
                   "spec.containers[0].livenessProbe.periodSeconds: Invalid value: 3000000000: out of "
                   "range for int32");
        EXPECT_ERR(SIMPLE "  activeDeadlineSeconds: 18446744073709551615\n",
                   "spec.activeDeadlineSeconds: Invalid value: 18446744073709551615: out of range for int64");
        EXPECT_ERR(SIMPLE "    livenessProbe: {tcpSocket: {port: 65536000000}}\n",
                   "spec.containers[0].livenessProbe.tcpSocket.port: Invalid value: 65536000000: out of "
                   "range for int32");
        EXPECT_ERR(SIMPLE "    resources: {limits: {cpu: abc}}\n",
                   "spec.containers[0].resources.limits.cpu: Invalid value: \"abc\": quantities must "
                   "match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'");
        EXPECT_ERR(SIMPLE "    resources: {limits: {cpu: 1ki}}\n",
                   "spec.containers[0].resources.limits.cpu: Invalid value: \"1ki\": unable to parse "
                   "quantity's suffix");
        EXPECT_ERR(SIMPLE "    resources: {limits: {cpu: ''}}\n",
                   "spec.containers[0].resources.limits.cpu: Invalid value: \"\": quantities must "
                   "match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'");
        EXPECT_ERR(SIMPLE "    resources: {limits: {cpu: true}}\n",
                   "spec.containers[0].resources.limits.cpu: Invalid type: expected quantity (string or "
                   "number), got boolean");
        EXPECT_ERR(SIMPLE "  overhead: [1]\n  hostUsers: 'no'\n",
                   "spec.overhead: Invalid type: expected object, got array; "
                   "spec.hostUsers: Invalid type: expected boolean, got string");
        EXPECT_ERR(SIMPLE "  readinessGates: [{conditionType: 1}, 2]\n",
                   "spec.readinessGates[0].conditionType: Invalid type: expected string, got integer; "
                   "spec.readinessGates[1]: Invalid type: expected object, got integer");
        EXPECT_ERR(SIMPLE "  nodeSelector: {a: 1}\n",
                   "spec.nodeSelector.a: Invalid type: expected string, got integer");
        EXPECT_ERR(SIMPLE "  hostAliases: {}\n", "spec.hostAliases: Invalid type: expected array, got object");
        {
                char *e = decode_list_err("{\"apiVersion\":\"v1\",\"kind\":\"PodList\",\"metadata\":"
                                          "{\"continue\":1},\"items\":[]}",
                                          -EINVAL);

                ck_assert_str_eq(e, "metadata.continue: Invalid type: expected string, got integer");
                free(e);
                e = decode_list_err("{\"apiVersion\":\"v1\",\"kind\":\"PodList\",\"items\":[{"
                                    "\"metadata\":{\"name\":\"a\"},\"spec\":{\"hostname\":5,"
                                    "\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}]}",
                                    -EINVAL);
                ck_assert_str_eq(e, "items[0]: spec.hostname: Invalid type: expected string, got integer");
                free(e);
        }
}
END_TEST

/* Quantities Go's parser takes, in Go's odd corners too. */
START_TEST(test_quantity_spellings)
{
        static const char *const ok[] = {"1", "-1", "+1", "1.", ".5", "0", "00", "1e3", "1E3",
                                         "1e+3", "1e-3", "5Ei", "5E", "1Gi", "100m", "1n", "1u"};
        static const char *const bad[] = {"1ki", "1e", "1 m", "1mm", "1Gi2", "1.2.3", "0x10",
                                          "1e99999999999999999999"};

        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
                char text[256];
                json_object *pod;

                /* Quoted in YAML so the spelling reaches the quantity parser. */
                snprintf(text, sizeof(text), SIMPLE "    resources: {limits: {cpu: '%s'}}\n", ok[i]);
                pod = decode(text);
                ck_assert_str_eq(str_at(pod, "spec.containers.0.resources.limits.cpu"), ok[i]);
                json_object_put(pod);
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char text[256], *e;

                snprintf(text, sizeof(text), SIMPLE "    resources: {limits: {cpu: '%s'}}\n", bad[i]);
                e = decode_err_ctx(text, &file_ctx, -EINVAL);
                ck_assert_msg(strstr(e, "spec.containers[0].resources.limits.cpu: Invalid value") == e,
                              "%s: %s", bad[i], e);
                free(e);
        }
}
END_TEST

/* ---- API defaults (5.2) ------------------------------------------------ */

START_TEST(test_api_defaults)
{
        json_object *pod = decode(HEAD "spec:\n  initContainers:\n  - name: init\n    image: busybox\n"
                                       "  containers:\n  - name: c\n    image: nginx:1.25\n"
                                       "    ports: [{containerPort: 80}, {containerPort: 53, protocol: UDP}]\n");

        ck_assert_str_eq(str_at(pod, "spec.restartPolicy"), "Always");
        ck_assert_str_eq(str_at(pod, "spec.dnsPolicy"), "ClusterFirst");
        ck_assert_str_eq(canon_at(pod, "spec.terminationGracePeriodSeconds"), "30");
        ck_assert_str_eq(str_at(pod, "spec.schedulerName"), "default-scheduler");
        ck_assert_str_eq(canon_at(pod, "spec.securityContext"), "{}");
        ck_assert_str_eq(canon_at(pod, "spec.enableServiceLinks"), "true");
        for (int i = 0; i < 2; i++) {
                const char *c = i ? "spec.containers.0" : "spec.initContainers.0";
                char p[96];

                snprintf(p, sizeof(p), "%s.terminationMessagePath", c);
                ck_assert_str_eq(str_at(pod, p), "/dev/termination-log");
                snprintf(p, sizeof(p), "%s.terminationMessagePolicy", c);
                ck_assert_str_eq(str_at(pod, p), "File");
        }
        ck_assert_str_eq(str_at(pod, "spec.initContainers.0.imagePullPolicy"), "Always");
        ck_assert_str_eq(str_at(pod, "spec.containers.0.imagePullPolicy"), "IfNotPresent");
        ck_assert_str_eq(str_at(pod, "spec.containers.0.ports.0.protocol"), "TCP");
        ck_assert_str_eq(str_at(pod, "spec.containers.0.ports.1.protocol"), "UDP");
        ck_assert_ptr_null(at(pod, "spec.containers.0.ports.0.hostPort"));
        json_object_put(pod);
}
END_TEST

START_TEST(test_api_defaults_keep_given_values)
{
        json_object *pod = decode(HEAD "spec:\n  restartPolicy: Never\n  dnsPolicy: Default\n"
                                       "  terminationGracePeriodSeconds: 0\n  schedulerName: mine\n"
                                       "  securityContext: {runAsUser: 1000}\n  enableServiceLinks: false\n"
                                       "  containers:\n  - name: c\n    image: nginx\n"
                                       "    imagePullPolicy: Never\n    terminationMessagePath: /tmp/t\n"
                                       "    terminationMessagePolicy: FallbackToLogsOnError\n"
                                       "    ports: [{containerPort: 80, protocol: SCTP}]\n");

        ck_assert_str_eq(str_at(pod, "spec.restartPolicy"), "Never");
        ck_assert_str_eq(str_at(pod, "spec.dnsPolicy"), "Default");
        ck_assert_str_eq(canon_at(pod, "spec.terminationGracePeriodSeconds"), "0");
        ck_assert_str_eq(str_at(pod, "spec.schedulerName"), "mine");
        ck_assert_str_eq(canon_at(pod, "spec.securityContext"), "{\"runAsUser\":1000}");
        ck_assert_str_eq(canon_at(pod, "spec.enableServiceLinks"), "false");
        ck_assert_str_eq(str_at(pod, "spec.containers.0.imagePullPolicy"), "Never");
        ck_assert_str_eq(str_at(pod, "spec.containers.0.terminationMessagePath"), "/tmp/t");
        ck_assert_str_eq(str_at(pod, "spec.containers.0.terminationMessagePolicy"), "FallbackToLogsOnError");
        ck_assert_str_eq(str_at(pod, "spec.containers.0.ports.0.protocol"), "SCTP");
        json_object_put(pod);

        /* "" is the Go zero value: defaulted like an absent field. */
        pod = decode(HEAD "spec:\n  restartPolicy: ''\n  containers: [{name: c, image: x:1, imagePullPolicy: ''}]\n");
        ck_assert_str_eq(str_at(pod, "spec.restartPolicy"), "Always");
        ck_assert_str_eq(str_at(pod, "spec.containers.0.imagePullPolicy"), "IfNotPresent");
        json_object_put(pod);
}
END_TEST

START_TEST(test_image_pull_policy)
{
        static const struct {
                const char *image, *policy;
        } cases[] = {
                {"nginx", "Always"},
                {"nginx:latest", "Always"},
                {"nginx:1.25", "IfNotPresent"},
                {"library/nginx:1.25-alpine", "IfNotPresent"},
                {"registry.k8s.io/etcd:3.5.9-0", "IfNotPresent"},
                {"localhost:5000/nginx", "Always"},
                {"localhost:5000/nginx:v1", "IfNotPresent"},
                {"localhost:5000/nginx:latest", "Always"},
                {"nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "IfNotPresent"},
                {"nginx:1.25@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "IfNotPresent"},
                {"nginx:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "Always"},
                {"nginx:Latest", "IfNotPresent"},
        };
        char text[512];

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                json_object *pod;

                snprintf(text, sizeof(text), HEAD "spec:\n  containers: [{name: c, image: '%s'}]\n",
                         cases[i].image);
                pod = decode(text);
                ck_assert_msg(strcmp(str_at(pod, "spec.containers.0.imagePullPolicy"), cases[i].policy) == 0,
                              "image %s: got %s, want %s", cases[i].image,
                              str_at(pod, "spec.containers.0.imagePullPolicy"), cases[i].policy);
                json_object_put(pod);
        }
}
END_TEST

START_TEST(test_grace_period)
{
        json_object *pod = decode(HEAD "spec:\n  terminationGracePeriodSeconds: -5\n  containers: [{name: c, image: x:1}]\n");

        ck_assert_str_eq(canon_at(pod, "spec.terminationGracePeriodSeconds"), "1");
        json_object_put(pod);
        pod = decode(HEAD "spec:\n  terminationGracePeriodSeconds: 120\n  containers: [{name: c, image: x:1}]\n");
        ck_assert_str_eq(canon_at(pod, "spec.terminationGracePeriodSeconds"), "120");
        json_object_put(pod);
}
END_TEST

START_TEST(test_further_api_defaults)
{
        json_object *pod = decode(
                HEAD "spec:\n  hostNetwork: true\n  containers:\n  - name: c\n    image: x:1\n"
                     "    ports: [{containerPort: 8080}, {containerPort: 9090, hostPort: 9090}]\n"
                     "    env: [{name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]\n"
                     "    resources: {limits: {cpu: 500m, memory: 1Gi}, requests: {cpu: 100m}}\n"
                     "    livenessProbe: {httpGet: {port: 8080}}\n"
                     "    readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 5}\n"
                     "    lifecycle: {preStop: {httpGet: {port: 1, path: /stop}}}\n"
                     "  volumes:\n  - name: scratch\n  - name: host\n    hostPath: {path: /var/log}\n"
                     "  - name: info\n    downwardAPI: {items: [{path: labels, fieldRef: {fieldPath: metadata.labels}}]}\n");

        ck_assert_str_eq(canon_at(pod, "spec.containers.0.ports"),
                         "[{\"containerPort\":8080,\"hostPort\":8080,\"protocol\":\"TCP\"},"
                         "{\"containerPort\":9090,\"hostPort\":9090,\"protocol\":\"TCP\"}]");
        ck_assert_str_eq(canon_at(pod, "spec.containers.0.env.0.valueFrom.fieldRef"),
                         "{\"apiVersion\":\"v1\",\"fieldPath\":\"spec.nodeName\"}");
        ck_assert_str_eq(canon_at(pod, "spec.containers.0.resources"),
                         "{\"limits\":{\"cpu\":\"500m\",\"memory\":\"1Gi\"},"
                         "\"requests\":{\"cpu\":\"100m\",\"memory\":\"1Gi\"}}");
        ck_assert_str_eq(canon_at(pod, "spec.containers.0.livenessProbe"),
                         "{\"failureThreshold\":3,\"httpGet\":{\"path\":\"/\",\"port\":8080,"
                         "\"scheme\":\"HTTP\"},\"periodSeconds\":10,\"successThreshold\":1,"
                         "\"timeoutSeconds\":1}");
        ck_assert_str_eq(canon_at(pod, "spec.containers.0.readinessProbe"),
                         "{\"failureThreshold\":3,\"periodSeconds\":5,\"successThreshold\":1,"
                         "\"tcpSocket\":{\"port\":8080},\"timeoutSeconds\":1}");
        ck_assert_str_eq(canon_at(pod, "spec.containers.0.lifecycle.preStop.httpGet"),
                         "{\"path\":\"/stop\",\"port\":1,\"scheme\":\"HTTP\"}");
        ck_assert_str_eq(canon_at(pod, "spec.volumes"),
                         "[{\"emptyDir\":{},\"name\":\"scratch\"},"
                         "{\"hostPath\":{\"path\":\"/var/log\",\"type\":\"\"},\"name\":\"host\"},"
                         "{\"downwardAPI\":{\"defaultMode\":420,\"items\":[{\"fieldRef\":{"
                         "\"apiVersion\":\"v1\",\"fieldPath\":\"metadata.labels\"},\"path\":"
                         "\"labels\"}]},\"name\":\"info\"}]");
        json_object_put(pod);
}
END_TEST

/* ---- source defaults (5.3) --------------------------------------------- */

START_TEST(test_source_defaults)
{
        struct manifest_ctx ctx = {MANIFEST_ORIGIN_FILE, "Node-1.Example", PATH};
        json_object *pod = decode_ctx(HEAD "  annotations: {team: a}\n" ONE_C
                                           "  nodeName: elsewhere\n"
                                           "status:\n  phase: Running\n  podIP: 10.0.0.1\n",
                                      &ctx);
        const char *uid = str_at(pod, "metadata.uid");

        ck_assert_uint_eq(strlen(uid), 32);
        ck_assert_uint_eq(strspn(uid, "0123456789abcdef"), 32);
        ck_assert_str_eq(str_at(pod, "metadata.name"), "web-node-1.example");
        ck_assert_str_eq(str_at(pod, "metadata.namespace"), "default");
        ck_assert_str_eq(str_at(pod, "spec.nodeName"), "Node-1.Example");
        ck_assert_str_eq(json_object_get_string(json_object_object_get(at(pod, "metadata.annotations"),
                                                                       "kubernetes.io/config.hash")),
                         uid);
        ck_assert_str_eq(str_at(pod, "metadata.annotations.team"), "a");
        ck_assert_str_eq(canon_at(pod, "status"), "{\"phase\":\"Pending\",\"podIP\":\"10.0.0.1\"}");
        json_object_put(pod);

        /* A namespace in the manifest is kept; annotations are created. */
        pod = decode("apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: kube-system}\n" ONE_C);
        ck_assert_str_eq(str_at(pod, "metadata.namespace"), "kube-system");
        ck_assert_int_eq(json_object_object_length(at(pod, "metadata.annotations")), 1);
        json_object_put(pod);
}
END_TEST

START_TEST(test_toleration_added)
{
        json_object *pod = decode(SIMPLE);

        ck_assert_str_eq(canon_at(pod, "spec.tolerations"), "[{\"effect\":\"NoExecute\",\"operator\":\"Exists\"}]");
        json_object_put(pod);
        /* Other tolerations are kept, and ours comes last. */
        pod = decode(SIMPLE "  tolerations:\n  - {key: a, operator: Equal, value: b, effect: NoSchedule}\n"
                            "  - {operator: Exists, effect: NoSchedule}\n");
        ck_assert_str_eq(canon_at(pod, "spec.tolerations"),
                         "[{\"effect\":\"NoSchedule\",\"key\":\"a\",\"operator\":\"Equal\",\"value\":\"b\"},"
                         "{\"effect\":\"NoSchedule\",\"operator\":\"Exists\"},"
                         "{\"effect\":\"NoExecute\",\"operator\":\"Exists\"}]");
        json_object_put(pod);
}
END_TEST

START_TEST(test_toleration_identical_kept)
{
        json_object *pod = decode(SIMPLE "  tolerations:\n  - {key: a, operator: Exists}\n"
                                         "  - {effect: NoExecute, operator: Exists}\n");

        ck_assert_str_eq(canon_at(pod, "spec.tolerations"),
                         "[{\"key\":\"a\",\"operator\":\"Exists\"},{\"effect\":\"NoExecute\",\"operator\":\"Exists\"}]");
        json_object_put(pod);
}
END_TEST

START_TEST(test_toleration_replaced_in_place)
{
        json_object *pod = decode(SIMPLE "  tolerations:\n  - {key: a, operator: Exists}\n"
                                         "  - {operator: Exists, effect: NoExecute, tolerationSeconds: 300}\n"
                                         "  - {key: z, operator: Exists}\n");

        ck_assert_str_eq(canon_at(pod, "spec.tolerations"),
                         "[{\"key\":\"a\",\"operator\":\"Exists\"},{\"effect\":\"NoExecute\",\"operator\":\"Exists\"},"
                         "{\"key\":\"z\",\"operator\":\"Exists\"}]");
        json_object_put(pod);
        /* key: "" and value: "" are the same as absent for matching. */
        pod = decode(SIMPLE "  tolerations:\n  - {key: '', value: '', operator: Exists, effect: NoExecute, "
                            "tolerationSeconds: 5}\n");
        ck_assert_str_eq(canon_at(pod, "spec.tolerations"), "[{\"effect\":\"NoExecute\",\"operator\":\"Exists\"}]");
        json_object_put(pod);
}
END_TEST

START_TEST(test_http_origin_adds_no_toleration)
{
        json_object *pod = decode_ctx(SIMPLE, &url_ctx);

        ck_assert_ptr_null(at(pod, "spec.tolerations"));
        ck_assert_str_eq(str_at(pod, "status.phase"), "Pending");
        json_object_put(pod);
        pod = decode_ctx(SIMPLE "  tolerations: [{operator: Exists, effect: NoExecute, tolerationSeconds: 1}]\n",
                         &url_ctx);
        ck_assert_str_eq(canon_at(pod, "spec.tolerations"),
                         "[{\"effect\":\"NoExecute\",\"operator\":\"Exists\",\"tolerationSeconds\":1}]");
        json_object_put(pod);
}
END_TEST

/* ---- generated UID (9.1) ----------------------------------------------- */

/* The documented algorithm, computed independently of manifest.c. */
static void expected_uid(const char *text, const char *salt, char out[33])
{
        struct buf c = BUF_INIT, err = BUF_INIT;
        json_object *o = NULL;
        struct fnv128 h;
        uint8_t d[16];

        ck_assert_int_eq(yaml_to_json(text, strlen(text), &o, &err), 0);
        ck_assert_int_eq(json_canon_append(&c, o), 0);
        fnv128_init(&h);
        fnv128_update(&h, c.data, c.len);
        fnv128_update(&h, salt, strlen(salt));
        fnv128_final(&h, d);
        fnv128_hex(d, out);
        json_object_put(o);
        buf_free(&c);
        buf_free(&err);
}

START_TEST(test_uid_algorithm)
{
        const char *text = SIMPLE "  restartPolicy: Never\n";
        char want[33];
        char *got;

        /* Over the manifest as written, then the origin: host + file for
         * files, url for URLs.  A manifest that normalization leaves as it
         * is hashes exactly as it did before normalization existed. */
        expected_uid(text, "host:" NODE "file:" PATH, want);
        got = uid_of(text, &file_ctx);
        ck_assert_str_eq(got, want);
        free(got);
        expected_uid(text, "url:http://example.test/pods", want);
        got = uid_of(text, &url_ctx);
        ck_assert_str_eq(got, want);
        free(got);
        /* What normalization removes is not hashed: a null is absent. */
        got = uid_of(SIMPLE "  restartPolicy: null\n", &file_ctx);
        expected_uid(SIMPLE, "host:" NODE "file:" PATH, want);
        ck_assert_str_eq(got, want);
        free(got);
}
END_TEST

START_TEST(test_uid_stable_across_encodings)
{
        static const char *const same[] = {
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels: {app: web}\n"
                "spec:\n  containers:\n  - name: c\n    image: nginx:1.25\n",
                "# reordered, commented, flow style, quoted\n"
                "spec: {containers: [{image: 'nginx:1.25', name: \"c\"}]}\n"
                "metadata: {labels: {app: web}, name: web}  # trailing comment\n"
                "kind: Pod\napiVersion: \"v1\"\n",
                "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"web\",\"labels\":"
                "{\"app\":\"web\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"nginx:1.25\"}]}}",
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: &n web\n  labels: {app: *n}\n"
                "spec:\n  containers:\n  - name: c\n    image: nginx:1.25\n"
                "---\napiVersion: v1\nkind: Pod\nmetadata: {name: ignored}\n",
                "\xef\xbb\xbf" "apiVersion: v1\r\nkind: Pod\r\nmetadata:\r\n  name: web\r\n  labels:\r\n"
                "    app: >-\r\n      web\r\nspec:\r\n  containers:\r\n  - name: c\r\n    image: nginx:1.25\r\n",
        };
        char *first = uid_of(same[0], &file_ctx);

        for (size_t i = 1; i < sizeof(same) / sizeof(same[0]); i++) {
                char *u = uid_of(same[i], &file_ctx);

                ck_assert_msg(strcmp(u, first) == 0, "variant %zu: %s != %s", i, u, first);
                free(u);
        }
        free(first);
}
END_TEST

START_TEST(test_uid_changes_with_content_and_origin)
{
        static const char *const variants[] = {
                SIMPLE,
                HEAD "  labels: {app: web}\n" ONE_C,
                HEAD "  annotations: {a: b}\n" ONE_C,
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web2\n" ONE_C,
                HEAD "  namespace: default\n" ONE_C,
                HEAD "spec:\n  containers:\n  - name: c\n    image: nginx:1.26\n",
                SIMPLE "status: {phase: Running}\n",
                SIMPLE "  restartPolicy: Always\n", /* an explicit default is content too */
                SIMPLE "  hostNetwork: true\n",
                SIMPLE "    livenessProbe: {tcpSocket: {port: 80}}\n",
                SIMPLE "    livenessProbe: {tcpSocket: {port: '80'}}\n", /* quoting that changes the type */
                SIMPLE "    resources: {limits: {cpu: 1}}\n",
                SIMPLE "    resources: {limits: {cpu: 1000m}}\n", /* another spelling */
                SIMPLE "  automountServiceAccountToken: false\n", /* a pointer at zero */
                SIMPLE "  volumes: []\n",                           /* an empty slice */
        };
        const size_t n = sizeof(variants) / sizeof(variants[0]);
        struct manifest_ctx other_node = file_ctx, other_path = file_ctx, url_same = url_ctx;
        char *uids[sizeof(variants) / sizeof(variants[0]) + 4];

        for (size_t i = 0; i < n; i++)
                uids[i] = uid_of(variants[i], &file_ctx);
        other_node.node_name = "node-2";
        other_path.location = PATH ".bak";
        url_same.location = PATH; /* same string, other origin */
        uids[n] = uid_of(SIMPLE, &other_node);
        uids[n + 1] = uid_of(SIMPLE, &other_path);
        uids[n + 2] = uid_of(SIMPLE, &url_same);
        uids[n + 3] = uid_of(SIMPLE, &url_ctx);
        for (size_t i = 0; i < n + 4; i++)
                for (size_t j = i + 1; j < n + 4; j++)
                        ck_assert_msg(strcmp(uids[i], uids[j]) != 0, "uid %zu == uid %zu: %s", i, j, uids[i]);
        for (size_t i = 0; i < n + 4; i++)
                free(uids[i]);
}
END_TEST

START_TEST(test_uid_pinned)
{
        const char *text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  uid: Pinned-UID_1\n" ONE_C;
        struct manifest_ctx other = {MANIFEST_ORIGIN_URL, "n9", "http://x"};
        json_object *pod = decode(text);

        ck_assert_str_eq(str_at(pod, "metadata.uid"), "Pinned-UID_1");
        ck_assert_str_eq(json_object_get_string(json_object_object_get(at(pod, "metadata.annotations"),
                                                                       "kubernetes.io/config.hash")),
                         "Pinned-UID_1");
        json_object_put(pod);
        pod = decode_ctx(text, &other);
        ck_assert_str_eq(str_at(pod, "metadata.uid"), "Pinned-UID_1");
        json_object_put(pod);
        /* An empty uid is generated. */
        pod = decode("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  uid: ''\n" ONE_C);
        ck_assert_uint_eq(strlen(str_at(pod, "metadata.uid")), 32);
        json_object_put(pod);
}
END_TEST

/* ---- validation (5.5) -------------------------------------------------- */

START_TEST(test_name_required)
{
        EXPECT_ERR("apiVersion: v1\nkind: Pod\n" ONE_C, "metadata.name: Required value: name is needed for the pod");
        EXPECT_ERR("apiVersion: v1\nkind: Pod\nmetadata: {name: ''}\n" ONE_C,
                   "metadata.name: Required value: name is needed for the pod");
        /* Checked before the rest of validation. */
        EXPECT_ERR("apiVersion: v1\nkind: Pod\nmetadata: {namespace: BAD}\n",
                   "metadata.name: Required value: name is needed for the pod");
}
END_TEST

#define LABEL_MSG                                                                              \
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', " \
        "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "  \
        "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
#define SUBDOMAIN_MSG                                                                          \
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' " \
        "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "    \
        "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"

START_TEST(test_validation_names)
{
        char text[1024], want[1024], name[260];

        EXPECT_ERR("apiVersion: v1\nkind: Pod\nmetadata: {name: Web}\n" ONE_C,
                   "metadata.name: Invalid value: \"Web-" NODE "\": " SUBDOMAIN_MSG);
        EXPECT_ERR("apiVersion: v1\nkind: Pod\nmetadata: {name: web_1}\n" ONE_C,
                   "metadata.name: Invalid value: \"web_1-" NODE "\": " SUBDOMAIN_MSG);
        /* 253 with the suffix is fine, 254 is not. */
        memset(name, 'a', sizeof(name));
        name[253 - strlen("-" NODE)] = '\0';
        snprintf(text, sizeof(text), "apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\n" ONE_C, name);
        json_object_put(decode(text));
        name[253 - strlen("-" NODE)] = 'a';
        name[254 - strlen("-" NODE)] = '\0';
        snprintf(text, sizeof(text), "apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\n" ONE_C, name);
        snprintf(want, sizeof(want), "metadata.name: Invalid value: \"%s-" NODE "\": must be no more than 253 characters",
                 name);
        EXPECT_ERR(text, want);
        EXPECT_ERR(HEAD "  namespace: Kube-System\n" ONE_C,
                   "metadata.namespace: Invalid value: \"Kube-System\": " LABEL_MSG);
        EXPECT_ERR(HEAD "  namespace: a.b\n" ONE_C, "metadata.namespace: Invalid value: \"a.b\": " LABEL_MSG);
        EXPECT_ERR(HEAD "  labels: {'bad key': x}\n" ONE_C,
                   "metadata.labels: Invalid value: \"bad key\": name part must consist of alphanumeric "
                   "characters, '-', '_' or '.', and must start and end with an alphanumeric character "
                   "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
                   "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')");
        EXPECT_ERR(HEAD "  labels: {app: -x}\n" ONE_C,
                   "metadata.labels: Invalid value: \"-x\": a valid label must be an empty string or "
                   "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                   "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
                   "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')");
        EXPECT_ERR(HEAD "  labels: {Example.com/app: x}\n" ONE_C,
                   "metadata.labels: Invalid value: \"Example.com/app\": prefix part " SUBDOMAIN_MSG);
        EXPECT_ERR(HEAD "  annotations: {'a/b/c': x}\n" ONE_C,
                   "metadata.annotations: Invalid value: \"a/b/c\": a qualified name must consist of "
                   "alphanumeric characters, '-', '_' or '.', with an optional DNS subdomain prefix and "
                   "'/' (e.g. 'example.com/MyName')");
        /* Upper-case annotation keys are fine (checked lower-cased). */
        json_object_put(decode(HEAD "  annotations: {Example.COM/Key: v}\n  labels: {app.kubernetes.io/Name: ''}\n" ONE_C));
}
END_TEST

START_TEST(test_validation_containers)
{
        EXPECT_ERR(HEAD "spec: {}\n", "spec.containers: Required value");
        EXPECT_ERR(HEAD "spec: {containers: []}\n", "spec.containers: Required value");
        EXPECT_ERR("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\n", "spec.containers: Required value");
        EXPECT_ERR(HEAD "spec:\n  containers: [{image: x}]\n", "spec.containers[0].name: Required value");
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: _INVALID_, image: x}]\n",
                   "spec.containers[0].name: Invalid value: \"_INVALID_\": " LABEL_MSG);
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: a, image: x}, {name: a, image: z}]\n",
                   "spec.containers[1].name: Duplicate value: \"a\"");
        EXPECT_ERR(HEAD "spec:\n  initContainers: [{name: a, image: x}]\n  containers: [{name: a, image: z}]\n",
                   "spec.initContainers[0].name: Duplicate value: \"a\"");
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: a}]\n", "spec.containers[0].image: Required value");
        EXPECT_ERR(HEAD "spec:\n  initContainers: [{name: i}]\n  containers: [{name: a, image: x}]\n",
                   "spec.initContainers[0].image: Required value");
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: a, image: ' x'}]\n",
                   "spec.containers[0].image: Invalid value: \" x\": must not have leading or trailing whitespace");
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: a, image: x, imagePullPolicy: Sometimes}]\n",
                   "spec.containers[0].imagePullPolicy: Unsupported value: \"Sometimes\": supported values: "
                   "\"Always\", \"IfNotPresent\", \"Never\"");
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: a, image: x, terminationMessagePolicy: Log}]\n",
                   "spec.containers[0].terminationMessagePolicy: Unsupported value: \"Log\": supported "
                   "values: \"File\", \"FallbackToLogsOnError\"");
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: a, image: x, env: [{value: v}]}]\n",
                   "spec.containers[0].env[0].name: Required value");
        EXPECT_ERR(HEAD "spec:\n  ephemeralContainers: [{name: e, image: x}]\n  containers: [{name: a, image: x}]\n",
                   "spec.ephemeralContainers: Forbidden: cannot be set on create");
        /* Several problems are reported together. */
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: A}]\n  restartPolicy: Sometimes\n",
                   "spec.containers[0].name: Invalid value: \"A\": " LABEL_MSG "; "
                   "spec.containers[0].image: Required value; "
                   "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", "
                   "\"OnFailure\", \"Never\"");
}
END_TEST

START_TEST(test_validation_ports)
{
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: a, image: x, ports: [{containerPort: 0}]}]\n",
                   "spec.containers[0].ports[0].containerPort: Required value");
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: a, image: x, ports: [{name: http}]}]\n",
                   "spec.containers[0].ports[0].containerPort: Required value");
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: a, image: x, ports: [{containerPort: 65536}]}]\n",
                   "spec.containers[0].ports[0].containerPort: Invalid value: 65536: must be between 1 "
                   "and 65535, inclusive");
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: a, image: x, ports: [{containerPort: -1}]}]\n",
                   "spec.containers[0].ports[0].containerPort: Invalid value: -1: must be between 1 and "
                   "65535, inclusive");
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: a, image: x, ports: [{containerPort: 80, hostPort: 70000}]}]\n",
                   "spec.containers[0].ports[0].hostPort: Invalid value: 70000: must be between 1 and "
                   "65535, inclusive");
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: a, image: x, ports: [{containerPort: 80, protocol: ICMP}]}]\n",
                   "spec.containers[0].ports[0].protocol: Unsupported value: \"ICMP\": supported values: "
                   "\"SCTP\", \"TCP\", \"UDP\"");
        EXPECT_ERR(HEAD "spec:\n  hostNetwork: true\n  containers: [{name: a, image: x, ports: [{containerPort: 80, hostPort: 81}]}]\n",
                   "spec.containers[0].ports[0].hostPort: Invalid value: 81: must match `containerPort` "
                   "when `hostNetwork` is true");
        json_object_put(decode(HEAD "spec:\n  containers: [{name: a, image: x, ports: [{containerPort: 1}, "
                                    "{containerPort: 65535, hostPort: 65535}]}]\n"));
}
END_TEST

START_TEST(test_validation_volumes)
{
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: a, image: x}]\n  volumes: [{name: _INVALID_}]\n",
                   "spec.volumes[0].name: Invalid value: \"_INVALID_\": " LABEL_MSG);
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: a, image: x}]\n  volumes: [{name: repeated}, {name: repeated}]\n",
                   "spec.volumes[1].name: Duplicate value: \"repeated\"");
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: a, image: x}]\n  volumes: [{emptyDir: {}}]\n",
                   "spec.volumes[0].name: Required value");
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: a, image: x}]\n  volumes: [{name: v, emptyDir: {}, hostPath: {path: /}}]\n",
                   "spec.volumes[0]: Forbidden: may not specify more than 1 volume type");
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: a, image: x}]\n  volumes: [{name: v, hostPath: {}}]\n",
                   "spec.volumes[0].hostPath.path: Required value");
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: a, image: x}]\n  volumes: [{name: v, hostPath: {path: /, type: Dir}}]\n",
                   "spec.volumes[0].hostPath.type: Unsupported value: \"Dir\": supported values: \"\", "
                   "\"DirectoryOrCreate\", \"Directory\", \"FileOrCreate\", \"File\", \"Socket\", "
                   "\"CharDevice\", \"BlockDevice\"");
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: a, image: x, volumeMounts: [{name: data, mountPath: /d}]}]\n",
                   "spec.containers[0].volumeMounts[0].name: Not found: \"data\"");
        EXPECT_ERR(HEAD "spec:\n  containers: [{name: a, image: x, volumeMounts: [{name: v}]}]\n  volumes: [{name: v}]\n",
                   "spec.containers[0].volumeMounts[0].mountPath: Required value");
}
END_TEST

START_TEST(test_validation_pod_fields)
{
        EXPECT_ERR(SIMPLE "  restartPolicy: sometimes\n",
                   "spec.restartPolicy: Unsupported value: \"sometimes\": supported values: \"Always\", "
                   "\"OnFailure\", \"Never\"");
        EXPECT_ERR(SIMPLE "  dnsPolicy: Cluster\n",
                   "spec.dnsPolicy: Unsupported value: \"Cluster\": supported values: "
                   "\"ClusterFirstWithHostNet\", \"ClusterFirst\", \"Default\", \"None\"");
        EXPECT_ERR(SIMPLE "  dnsPolicy: None\n",
                   "spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None");
        json_object_put(decode(SIMPLE "  dnsPolicy: None\n  dnsConfig: {nameservers: [1.1.1.1]}\n"));
        EXPECT_ERR(SIMPLE "  tolerations: [{key: k, operator: Maybe}]\n",
                   "spec.tolerations[0].operator: Unsupported value: \"Maybe\": supported values: \"Equal\", "
                   "\"Exists\"");
        EXPECT_ERR(SIMPLE "  tolerations: [{operator: Equal, value: v}]\n",
                   "spec.tolerations[0].operator: Invalid value: \"Equal\": operator must be Exists when "
                   "`key` is empty, which means \"match all values and all keys\"");
        EXPECT_ERR(SIMPLE "  tolerations: [{key: k, operator: Exists, value: v}]\n",
                   "spec.tolerations[0].operator: Invalid value: \"v\": value must be empty when `operator` "
                   "is 'Exists'");
        EXPECT_ERR(SIMPLE "  tolerations: [{key: k, operator: Exists, effect: Evict}]\n",
                   "spec.tolerations[0].effect: Unsupported value: \"Evict\": supported values: "
                   "\"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"");
        EXPECT_ERR(SIMPLE "  tolerations: [{key: k, operator: Exists, effect: NoSchedule, tolerationSeconds: 5}]\n",
                   "spec.tolerations[0].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' "
                   "when `tolerationSeconds` is set");
}
END_TEST

/* ---- static pods may not reference API objects (5.5) ------------------- */

START_TEST(test_api_references_rejected)
{
#define C1 "spec:\n  containers:\n  - name: c\n    image: x:1\n"
        static const struct {
                const char *spec, *want;
        } cases[] = {
                {C1 "  serviceAccountName: sa\n",
                 "spec.serviceAccountName: static pods may not reference serviceaccounts"},
                {C1 "  serviceAccount: sa\n",
                 "spec.serviceAccount: static pods may not reference serviceaccounts"},
                {C1 "  imagePullSecrets: [{name: regcred}]\n",
                 "spec.imagePullSecrets[0]: static pods may not reference secrets"},
                {C1 "    env: [{name: A, value: x}, {name: P, valueFrom: {secretKeyRef: {name: s, key: k}}}]\n",
                 "spec.containers[0].env[1].valueFrom.secretKeyRef: static pods may not reference secrets"},
                {C1 "    envFrom: [{secretRef: {name: s}}]\n",
                 "spec.containers[0].envFrom[0].secretRef: static pods may not reference secrets"},
                {"spec:\n  initContainers: [{name: i, image: x:1, env: [{name: A, valueFrom: "
                 "{configMapKeyRef: {name: cm, key: k}}}]}]\n  containers: [{name: c, image: x:1}]\n",
                 "spec.initContainers[0].env[0].valueFrom.configMapKeyRef: static pods may not reference configmaps"},
                {C1 "    envFrom: [{configMapRef: {name: cm}}]\n",
                 "spec.containers[0].envFrom[0].configMapRef: static pods may not reference configmaps"},
                {C1 "  volumes: [{name: v, hostPath: {path: /}}, {name: s, secret: {secretName: tls}}]\n",
                 "spec.volumes[1].secret: static pods may not reference secrets"},
                {C1 "  volumes: [{name: s, secret: {}}]\n",
                 "spec.volumes[0].secret: static pods may not reference secrets (via secret volumes)"},
                {C1 "  volumes: [{name: c, configMap: {name: cm}}]\n",
                 "spec.volumes[0].configMap: static pods may not reference configmaps"},
                {C1 "  volumes: [{name: c, configMap: {}}]\n",
                 "spec.volumes[0].configMap: static pods may not reference configmaps (via configmap volumes)"},
                {C1 "  volumes: [{name: p, projected: {sources: [{downwardAPI: {}}, {secret: {name: s}}]}}]\n",
                 "spec.volumes[0].projected.sources[1].secret: static pods may not reference secrets"},
                {C1 "  volumes: [{name: p, projected: {sources: [{configMap: {name: c}}]}}]\n",
                 "spec.volumes[0].projected.sources[0].configMap: static pods may not reference configmaps"},
                {C1 "  volumes: [{name: p, projected: {sources: [{serviceAccountToken: {path: t}}]}}]\n",
                 "spec.volumes[0].projected.sources[0].serviceAccountToken: static pods may not reference "
                 "serviceaccounts (via projected volumes)"},
                {C1 "  volumes: [{name: p, projected: {sources: [{clusterTrustBundle: {name: b, path: p}}]}}]\n",
                 "spec.volumes[0].projected.sources[0].clusterTrustBundle: static pods may not reference "
                 "clustertrustbundles"},
                {C1 "  volumes: [{name: p, projected: {sources: [{podCertificate: {signerName: x/y}}]}}]\n",
                 "spec.volumes[0].projected.sources[0].podCertificate: static pods may not reference "
                 "podcertificates"},
                {C1 "  volumes: [{name: p, projected: {sources: [{mystery: {}}]}}]\n",
                 "spec.volumes[0].projected.sources[0]: static pods may not use an unknown projected "
                 "volume source (volume \"p\")"},
                {C1 "  resourceClaims: [{name: gpu, resourceClaimName: c}]\n",
                 "spec.resourceClaims: static pods may not reference resourceclaims"},
                {C1 "  volumes: [{name: d, persistentVolumeClaim: {claimName: c}}]\n",
                 "spec.volumes[0].persistentVolumeClaim: static pods may not reference persistentvolumeclaims"},
                {C1 "  volumes: [{name: d, ephemeral: {volumeClaimTemplate: {spec: {}}}}]\n",
                 "spec.volumes[0].ephemeral: static pods may not reference persistentvolumeclaims (via "
                 "ephemeral volumes)"},
                {C1 "  volumes: [{name: d, csi: {driver: x}}]\n",
                 "spec.volumes[0].csi: static pods may not reference csidrivers (via CSI volumes)"},
                {C1 "  volumes: [{name: d, csi: {driver: x, nodePublishSecretRef: {name: s}}}]\n",
                 "spec.volumes[0].csi.nodePublishSecretRef: static pods may not reference secrets"},
                {C1 "  volumes: [{name: d, glusterfs: {endpoints: e, path: p}}]\n",
                 "spec.volumes[0].glusterfs: static pods may not reference endpoints (via glusterFS volumes)"},
                {C1 "  volumes: [{name: d, azureFile: {shareName: s}}]\n",
                 "spec.volumes[0].azureFile: static pods may not reference secrets (via azureFile volumes)"},
                {C1 "  volumes: [{name: d, azureFile: {secretName: s, shareName: s}}]\n",
                 "spec.volumes[0].azureFile.secretName: static pods may not reference secrets"},
                {C1 "  volumes: [{name: d, cephfs: {monitors: [m], secretRef: {name: s}}}]\n",
                 "spec.volumes[0].cephfs.secretRef: static pods may not reference secrets"},
                {C1 "  volumes: [{name: d, hostpath: {path: /}}]\n",
                 "spec.volumes[0]: static pods may not use unknown volume type \"hostpath\" (volume \"d\")"},
                /* Order: the service account is reported before secrets. */
                {C1 "  serviceAccountName: sa\n  volumes: [{name: s, secret: {secretName: x}}]\n",
                 "spec.serviceAccountName: static pods may not reference serviceaccounts"},
        };
        char text[1024];

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char *e;

                snprintf(text, sizeof(text), HEAD "%s", cases[i].spec);
                e = decode_err_ctx(text, &file_ctx, -EINVAL);
                ck_assert_msg(strcmp(e, cases[i].want) == 0, "case %zu:\n got %s\nwant %s", i, e,
                              cases[i].want);
                free(e);
        }
#undef C1
}
END_TEST

START_TEST(test_api_references_allowed)
{
        json_object *pod = decode(
                HEAD "spec:\n  containers:\n  - name: c\n    image: x:1\n"
                     "    env: [{name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]\n"
                     "    envFrom: [{secretRef: {}}]\n"
                     "  imagePullSecrets: [{}]\n  serviceAccountName: ''\n  resourceClaims: []\n"
                     "  volumes:\n  - {name: a, hostPath: {path: /etc}}\n  - {name: b, emptyDir: {medium: Memory}}\n"
                     "  - {name: c, downwardAPI: {items: []}}\n"
                     "  - {name: d, projected: {sources: [{downwardAPI: {items: []}}]}}\n"
                     "  - {name: e, nfs: {server: s, path: /}}\n  - {name: f, cephfs: {monitors: [m]}}\n"
                     "  - {name: g, image: {reference: 'x:1'}}\n"
                     "  - {name: h, hostPath: {path: /}, extraKey: ignored}\n");

        ck_assert_uint_eq(json_object_array_length(at(pod, "spec.volumes")), 8);
        json_object_put(pod);
}
END_TEST

/* ---- PodList (HTTP form) ------------------------------------------------ */

static json_object *decode_list(const char *text, const struct manifest_ctx *ctx)
{
        struct buf err = BUF_INIT;
        json_object *pods = NULL;
        int r = manifest_decode_pods(text, strlen(text), ctx, &pods, NULL, &err);

        ck_assert_msg(r == 0, "decode_pods failed (%d): %s", r, err.data);
        ck_assert(json_object_is_type(pods, json_type_array));
        buf_free(&err);
        return pods;
}

static char *decode_list_err(const char *text, int want)
{
        struct buf err = BUF_INIT;
        json_object *pods = NULL;
        int r = manifest_decode_pods(text, strlen(text), &url_ctx, &pods, NULL, &err);

        ck_assert_int_eq(r, want);
        ck_assert_ptr_null(pods);
        return buf_steal(&err, NULL);
}

#define EXPECT_LIST_ERR(text, want)                              \
        do {                                                     \
                char *e_ = decode_list_err(text, -EINVAL);       \
                ck_assert_str_eq(e_, want);                      \
                free(e_);                                        \
        } while (0)

START_TEST(test_podlist)
{
        /* The kubelet's "Multiple pods" HTTP case: items carry no kind. */
        json_object *pods = decode_list(
                "kind: PodList\napiVersion: v1\nitems:\n"
                "- metadata: {name: foo, uid: '111'}\n"
                "  spec: {nodeName: different-value, containers: [{name: '1', image: foo, imagePullPolicy: Always}]}\n"
                "- metadata: {name: bar, uid: '222'}\n"
                "  spec: {containers: [{name: '2', image: 'bar:bartag'}]}\n",
                &(struct manifest_ctx){MANIFEST_ORIGIN_URL, "different-value", "http://x/y"});

        ck_assert_uint_eq(json_object_array_length(pods), 2);
        ck_assert_str_eq(str_at(pods, "0.metadata.name"), "foo-different-value");
        ck_assert_str_eq(str_at(pods, "0.metadata.uid"), "111");
        ck_assert_str_eq(str_at(pods, "0.metadata.namespace"), "default");
        ck_assert_str_eq(str_at(pods, "1.metadata.name"), "bar-different-value");
        ck_assert_str_eq(str_at(pods, "1.spec.containers.0.imagePullPolicy"), "IfNotPresent");
        ck_assert_str_eq(str_at(pods, "1.spec.nodeName"), "different-value");
        ck_assert_ptr_null(at(pods, "0.spec.tolerations"));
        ck_assert_str_eq(str_at(pods, "1.status.phase"), "Pending");
        json_object_put(pods);

        /* A single Pod in the HTTP form: an array of one. */
        pods = decode_list(SIMPLE, &url_ctx);
        ck_assert_uint_eq(json_object_array_length(pods), 1);
        ck_assert_str_eq(str_at(pods, "0.metadata.name"), "web-" NODE);
        json_object_put(pods);

        /* Empty lists are empty arrays. */
        pods = decode_list("kind: PodList\napiVersion: v1\nitems: []\n", &url_ctx);
        ck_assert_uint_eq(json_object_array_length(pods), 0);
        json_object_put(pods);
        pods = decode_list("{\"kind\": \"PodList\", \"apiVersion\": \"v1\", \"items\": null}", &url_ctx);
        ck_assert_uint_eq(json_object_array_length(pods), 0);
        json_object_put(pods);
        pods = decode_list("kind: PodList\napiVersion: v1\n", &url_ctx);
        ck_assert_uint_eq(json_object_array_length(pods), 0);
        json_object_put(pods);
}
END_TEST

START_TEST(test_podlist_all_or_nothing)
{
        EXPECT_LIST_ERR("kind: PodList\napiVersion: v1\nitems:\n"
                        "- metadata: {name: good}\n  spec: {containers: [{name: c, image: x}]}\n"
                        "- metadata: {name: bad}\n  spec: {containers: [{name: c}]}\n",
                        "items[1]: spec.containers[0].image: Required value");
        EXPECT_LIST_ERR("kind: PodList\napiVersion: v1\nitems:\n- spec: {containers: [{name: c, image: x}]}\n",
                        "items[0]: metadata.name: Required value: name is needed for the pod");
        EXPECT_LIST_ERR("kind: PodList\napiVersion: v1\nitems:\n- metadata: {name: a}\n"
                        "  spec: {containers: [{name: c, image: x}], volumes: [{name: s, secret: {secretName: s}}]}\n",
                        "items[0]: spec.volumes[0].secret: static pods may not reference secrets");
        EXPECT_LIST_ERR("kind: PodList\napiVersion: v1\nitems: [1]\n",
                        "items[0]: Invalid type: expected object, got integer");
        EXPECT_LIST_ERR("kind: PodList\napiVersion: v1\nitems: {a: 1}\n",
                        "items: Invalid type: expected array, got object");
        EXPECT_LIST_ERR("kind: PodList\napiVersion: v2\nitems: []\n",
                        "no kind \"PodList\" is registered for version \"v2\"");
        EXPECT_LIST_ERR("kind: Deployment\napiVersion: apps/v1\n", "neither a Pod nor a PodList: kind Deployment");
        EXPECT_LIST_ERR("apiVersion: v1\nitems: []\n", "Object 'Kind' is missing");
        EXPECT_LIST_ERR("kind: PodList\nitems: []\n", "Object 'apiVersion' is missing");
        {
                char *e = decode_list_err("", -ENODATA);

                ck_assert_str_eq(e, "empty manifest: no YAML or JSON document");
                free(e);
        }
}
END_TEST

/* ---- the kubelet's own test cases, by intent --------------------------- */

/* file_linux_test.go "Simple pod": written to a file, read back, decoded
 * with hostname random-test-hostname; the whole result is compared. */
START_TEST(test_kubelet_file_simple_pod)
{
        const char *manifest =
                "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"test\","
                "\"namespace\":\"mynamespace\",\"uid\":\"12345\",\"creationTimestamp\":null},"
                "\"spec\":{\"containers\":[{\"name\":\"image\",\"image\":\"test/image\","
                "\"resources\":{},\"securityContext\":{\"privileged\":false}}],"
                "\"securityContext\":{},\"schedulerName\":\"default-scheduler\"},"
                "\"status\":{\"phase\":\"Pending\"}}\n";
        struct buf err = BUF_INIT;
        json_object *pod = NULL;
        char *data = NULL, *f, *c;
        size_t len = 0;

        make_tmpdir();
        f = tmp_path("test_pod_manifest");
        write_file(f, manifest, strlen(manifest));
        ck_assert_int_eq(file_read(f, MANIFEST_MAX_BYTES, &data, &len, &err), 0);
        ck_assert_int_eq(manifest_decode_pod(data, len,
                                             &(struct manifest_ctx){MANIFEST_ORIGIN_FILE, NODE, f},
                                             &pod, NULL, &err),
                         0);
        c = canon(pod);
        /* As the kubelet's expected pod, except "resources":{}: a plain
         * struct that is empty decodes like an absent one, so podmux drops
         * it (Go's encoder would write it back; a Go reader sees no
         * difference). */
        ck_assert_str_eq(c,
                         "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"annotations\":{"
                         "\"kubernetes.io/config.hash\":\"12345\"},\"name\":\"test-" NODE "\","
                         "\"namespace\":\"mynamespace\",\"uid\":\"12345\"},\"spec\":{\"containers\":[{"
                         "\"image\":\"test/image\",\"imagePullPolicy\":\"Always\",\"name\":\"image\","
                         "\"securityContext\":{\"privileged\":false},"
                         "\"terminationMessagePath\":\"/dev/termination-log\","
                         "\"terminationMessagePolicy\":\"File\"}],\"dnsPolicy\":\"ClusterFirst\","
                         "\"enableServiceLinks\":true,\"nodeName\":\"" NODE "\",\"restartPolicy\":\"Always\","
                         "\"schedulerName\":\"default-scheduler\",\"securityContext\":{},"
                         "\"terminationGracePeriodSeconds\":30,\"tolerations\":[{\"effect\":\"NoExecute\","
                         "\"operator\":\"Exists\"}]},\"status\":{\"phase\":\"Pending\"}}");
        free(c);
        json_object_put(pod);
        free(data);
        unlink(f);
        rmdir(tmpdir);
        free(f);
        buf_free(&err);
}
END_TEST

/* common_test.go TestDecodeSinglePod: a fully specified pod decodes, and
 * what it already had (status podIP, podIPs) survives. */
START_TEST(test_kubelet_decode_single_pod)
{
        const char *json =
                "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"test\",\"namespace\":"
                "\"mynamespace\",\"uid\":\"12345\"},\"spec\":{\"containers\":[{\"name\":\"image\","
                "\"image\":\"test/image\",\"terminationMessagePath\":\"/dev/termination-log\","
                "\"terminationMessagePolicy\":\"File\",\"imagePullPolicy\":\"IfNotPresent\","
                "\"securityContext\":{\"capabilities\":{\"drop\":[\"ALL\"]}}}],\"restartPolicy\":\"Always\","
                "\"terminationGracePeriodSeconds\":30,\"dnsPolicy\":\"ClusterFirst\",\"securityContext\":{},"
                "\"schedulerName\":\"default-scheduler\",\"enableServiceLinks\":true},"
                "\"status\":{\"podIP\":\"1.2.3.4\",\"podIPs\":[{\"ip\":\"1.2.3.4\"}]}}";
        const char *yaml = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: test\n  namespace: mynamespace\n"
                           "  uid: \"12345\"\nspec:\n  containers:\n  - image: test/image\n"
                           "    imagePullPolicy: IfNotPresent\n    name: image\n"
                           "    securityContext:\n      capabilities:\n        drop:\n        - ALL\n"
                           "    terminationMessagePath: /dev/termination-log\n"
                           "    terminationMessagePolicy: File\n  dnsPolicy: ClusterFirst\n"
                           "  enableServiceLinks: true\n  restartPolicy: Always\n"
                           "  schedulerName: default-scheduler\n  securityContext: {}\n"
                           "  terminationGracePeriodSeconds: 30\nstatus:\n  podIP: 1.2.3.4\n"
                           "  podIPs:\n  - ip: 1.2.3.4\n";
        json_object *a = decode(json), *b = decode(yaml);
        char *ca = canon(a), *cb = canon(b);

        ck_assert_str_eq(ca, cb);
        ck_assert_str_eq(canon_at(a, "status"),
                         "{\"phase\":\"Pending\",\"podIP\":\"1.2.3.4\",\"podIPs\":[{\"ip\":\"1.2.3.4\"}]}");
        ck_assert_str_eq(canon_at(a, "spec.containers.0.securityContext"), "{\"capabilities\":{\"drop\":[\"ALL\"]}}");
        free(ca);
        free(cb);
        json_object_put(a);
        json_object_put(b);
}
END_TEST

/* common_test.go: ClusterTrustBundle projections and resource claims. */
START_TEST(test_kubelet_rejects_ctb_and_claims)
{
        char *e = decode_err_ctx(
                "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"test\",\"uid\":\"12345\","
                "\"namespace\":\"mynamespace\"},\"spec\":{\"containers\":[{\"name\":\"image\",\"image\":"
                "\"test/image\",\"volumeMounts\":[{\"name\":\"ctb-volume\",\"mountPath\":\"/var/run/ctb-volume\"}]}],"
                "\"volumes\":[{\"name\":\"ctb-volume\",\"projected\":{\"sources\":[{\"clusterTrustBundle\":"
                "{\"name\":\"my-ctb\",\"path\":\"ctb-file\"}}]}}]}}",
                &file_ctx, -EINVAL);

        ck_assert_ptr_nonnull(strstr(e, "may not reference clustertrustbundles"));
        free(e);
        e = decode_err_ctx(
                "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"test\",\"uid\":\"12345\"},"
                "\"spec\":{\"containers\":[{\"name\":\"image\",\"image\":\"test/image\",\"resources\":"
                "{\"claims\":[{\"name\":\"my-claim\"}]}}],\"resourceClaims\":[{\"name\":\"my-claim\","
                "\"resourceClaimName\":\"some-external-claim\"}]}}",
                &file_ctx, -EINVAL);
        ck_assert_ptr_nonnull(strstr(e, "may not reference resourceclaims"));
        free(e);
}
END_TEST

/* common_test.go TestStaticPodNameGenerate. */
START_TEST(test_kubelet_static_pod_name_generate)
{
        static const struct {
                const char *node, *pod, *want;
        } cases[] = {
                {"node1", "static-pod1", "static-pod1-node1"},
                {"Node1", "static-pod1", "static-pod1-node1"},
                {"NODE1", "static-pod1", "static-pod1-node1"},
        };
        char text[256];

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct manifest_ctx ctx = {MANIFEST_ORIGIN_FILE, cases[i].node, PATH};
                json_object *pod;

                snprintf(text, sizeof(text), "apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\n" ONE_C,
                         cases[i].pod);
                pod = decode_ctx(text, &ctx);
                ck_assert_str_eq(str_at(pod, "metadata.name"), cases[i].want);
                ck_assert_str_eq(str_at(pod, "spec.nodeName"), cases[i].node);
                json_object_put(pod);
        }
        /* A name that is itself upper-case fails validation on metadata.name. */
        {
                char *e = decode_err_ctx("apiVersion: v1\nkind: Pod\nmetadata: {name: static-pod1-NODE1}\n" ONE_C,
                                         &file_ctx, -EINVAL);

                ck_assert_int_eq(strncmp(e, "metadata.name: Invalid value: ", 30), 0);
                free(e);
        }
}
END_TEST

/* http_test.go TestExtractInvalidPods: json.Marshal'ed pods, as the Go test
 * sends them (no kind at all), then the same with kind and name so the
 * named rule itself is what fails. */
START_TEST(test_kubelet_invalid_pods)
{
        static const struct {
                const char *marshalled, *with_kind, *want;
        } cases[] = {
                {"{\"metadata\":{\"creationTimestamp\":null},\"spec\":{\"containers\":null},\"status\":{}}",
                 "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"x\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}",
                 "Object 'apiVersion' is missing"},
                {"{\"apiVersion\":\"v1betta2\",\"metadata\":{\"creationTimestamp\":null},\"spec\":{\"containers\":null},\"status\":{}}",
                 "{\"kind\":\"Pod\",\"apiVersion\":\"v1betta2\",\"metadata\":{\"name\":\"x\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}",
                 "no kind \"Pod\" is registered for version \"v1betta2\""},
                {"{\"apiVersion\":\"v1\",\"metadata\":{\"creationTimestamp\":null},\"spec\":{\"volumes\":[{\"name\":\"_INVALID_\"}],\"containers\":null},\"status\":{}}",
                 "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"x\"},\"spec\":{\"volumes\":[{\"name\":\"_INVALID_\"}],\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}",
                 "spec.volumes[0].name: Invalid value: \"_INVALID_\": " LABEL_MSG},
                {"{\"apiVersion\":\"v1\",\"metadata\":{\"creationTimestamp\":null},\"spec\":{\"volumes\":[{\"name\":\"repeated\"},{\"name\":\"repeated\"}],\"containers\":null},\"status\":{}}",
                 "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"x\"},\"spec\":{\"volumes\":[{\"name\":\"repeated\"},{\"name\":\"repeated\"}],\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}",
                 "spec.volumes[1].name: Duplicate value: \"repeated\""},
                {"{\"apiVersion\":\"v1\",\"metadata\":{\"creationTimestamp\":null},\"spec\":{\"containers\":[{\"name\":\"\",\"resources\":{}}]},\"status\":{}}",
                 "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"x\"},\"spec\":{\"containers\":[{\"name\":\"\",\"image\":\"i\"}]}}",
                 "spec.containers[0].name: Required value"},
                {"{\"apiVersion\":\"v1\",\"metadata\":{\"creationTimestamp\":null},\"spec\":{\"containers\":[{\"name\":\"_INVALID_\",\"resources\":{}}]},\"status\":{}}",
                 "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"x\"},\"spec\":{\"containers\":[{\"name\":\"_INVALID_\",\"image\":\"i\"}]}}",
                 "spec.containers[0].name: Invalid value: \"_INVALID_\": " LABEL_MSG},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char *e = decode_list_err(cases[i].marshalled, -EINVAL);

                ck_assert_str_eq(e, "Object 'Kind' is missing");
                free(e);
                e = decode_list_err(cases[i].with_kind, -EINVAL);
                ck_assert_msg(strcmp(e, cases[i].want) == 0, "case %zu:\n got %s\nwant %s", i, e,
                              cases[i].want);
                free(e);
        }
}
END_TEST

START_TEST(test_error_buffer_optional)
{
        json_object *pod = NULL;

        ck_assert_int_eq(manifest_decode_pod("kind: Pod", 9, &file_ctx, &pod, NULL, NULL), -EINVAL);
        ck_assert_int_eq(manifest_decode_pod(SIMPLE "  restartPolicy: x\n", strlen(SIMPLE) + 19,
                                             &file_ctx, &pod, NULL, NULL),
                         -EINVAL);
        ck_assert_ptr_null(pod);
        ck_assert_int_eq(manifest_decode_pod(SIMPLE, strlen(SIMPLE), &file_ctx, &pod, NULL, NULL), 0);
        json_object_put(pod);
}
END_TEST

START_TEST(test_many_containers_stay_linear)
{
        /* Duplicate checks use hash sets: 30000 containers and volumes
         * (a ~2 MB manifest) are checked in well under the test timeout. */
        const size_t n = 30000;
        struct buf text = BUF_INIT;
        char *e, want[96];

        ck_assert_int_eq(buf_puts(&text, HEAD "spec:\n  containers:\n"), 0);
        for (size_t i = 0; i < n; i++)
                ck_assert_int_eq(buf_printf(&text, "  - {name: c%zu, image: x, volumeMounts: "
                                                   "[{name: v%zu, mountPath: /m}]}\n",
                                            i % (n - 1), i), 0);
        ck_assert_int_eq(buf_puts(&text, "  volumes:\n"), 0);
        for (size_t i = 0; i < n; i++)
                ck_assert_int_eq(buf_printf(&text, "  - {name: v%zu}\n", i), 0);
        e = decode_err_ctx(text.data, &file_ctx, -EINVAL);
        snprintf(want, sizeof(want), "spec.containers[%zu].name: Duplicate value: \"c0\"", n - 1);
        ck_assert_str_eq(e, want);
        free(e);
        buf_free(&text);
}
END_TEST

UNIT_MAIN(test_decode_size_limit, test_empty_and_null_manifests, test_not_a_mapping, test_type_meta,
          test_yaml_errors_pass_through, test_json_read_as_json, test_binary_garbage, test_first_document_only,
          test_field_types, test_yaml_11_scalars_in_pods, test_nulls_are_absent, test_unknown_fields_dropped,
          test_unknown_fields_bounded_and_optional, test_semantic_equality_as_go_decodes, test_normalized_form,
          test_normalize_type_errors, test_quantity_spellings, test_api_defaults, test_api_defaults_keep_given_values,
          test_image_pull_policy, test_grace_period, test_further_api_defaults, test_source_defaults,
          test_toleration_added, test_toleration_identical_kept, test_toleration_replaced_in_place,
          test_http_origin_adds_no_toleration, test_uid_algorithm, test_uid_stable_across_encodings,
          test_uid_changes_with_content_and_origin, test_uid_pinned, test_name_required, test_validation_names,
          test_validation_containers, test_validation_ports, test_validation_volumes, test_validation_pod_fields,
          test_api_references_rejected, test_api_references_allowed, test_podlist, test_podlist_all_or_nothing,
          test_kubelet_file_simple_pod, test_kubelet_decode_single_pod, test_kubelet_rejects_ctb_and_claims,
          test_kubelet_static_pod_name_generate, test_kubelet_invalid_pods, test_error_buffer_optional,
          test_many_containers_stay_linear)
