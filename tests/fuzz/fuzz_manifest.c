/*
 * fuzz_manifest — a static-pod manifest as the file source reads it (one
 * Pod, YAML or JSON) and a manifest URL body as the HTTP source reads it
 * (a Pod or a PodList): decoding, API and source defaults, validation,
 * then the pod as the merger keeps it and as consumers get it.
 *
 * Every input goes both ways.  Checked: a failure has a message and no
 * unknown-field list; a success yields pods with a name, namespace and UID
 * whose stream text is valid JSON in UTF-8, and that are already normal
 * (normalizing again changes nothing and finds no unknown field).
 */
#include "fuzz.h"

#include "util/buf.h"
#include "util/json_canon.h"
#include "sources/manifest.h"
#include "core/pod.h"
#include "kube/v1_normalize.h"

static void check_normal(json_object *obj)
{
        struct buf before = BUF_INIT, after = BUF_INIT;
        struct v1_unknown unknown = {NULL, 0, 0};
        int r;

        if (json_canon_append(&before, obj) < 0)
                goto out;
        r = v1_normalize(obj, &v1_types[V1_TYPE_POD], "", &unknown, NULL);
        if (r == -ENOMEM)
                goto out;
        FUZZ_ASSERT(r == 0 && unknown.total == 0);
        if (json_canon_append(&after, obj) < 0)
                goto out;
        FUZZ_ASSERT(before.len == after.len && memcmp(before.data, after.data, before.len) == 0);
out:
        v1_unknown_clear(&unknown);
        buf_free(&before);
        buf_free(&after);
}

static void check_pod(json_object *obj)
{
        struct buf out = BUF_INIT, key = BUF_INIT;
        struct pod *p = NULL;

        check_normal(obj);
        FUZZ_ASSERT(pod_from_json(obj, &p, NULL) == 0);
        FUZZ_ASSERT(pod_name(p)[0] && pod_namespace(p)[0] && pod_uid(p)[0]);
        FUZZ_ASSERT(pod_store_key(p, &key) == 0);
        FUZZ_ASSERT(pod_render(p, &out) == 0);
        fuzz_check_json(out.data, out.len, "a decoded pod's stream text");
        pod_unref(p);
        buf_free(&out);
        buf_free(&key);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const struct manifest_ctx file = {
                .origin = MANIFEST_ORIGIN_FILE,
                .node_name = "Fuzz-Node",
                .location = "/etc/kubernetes/manifests/fuzz.yaml",
        };
        const struct manifest_ctx url = {
                .origin = MANIFEST_ORIGIN_URL,
                .node_name = "fuzz-node",
                .location = "http://manifests.example/pods",
        };
        const char *text = (const char *)data;
        struct v1_unknown unknown = {NULL, 0, 0};
        struct buf err = BUF_INIT;
        json_object *obj = NULL;
        int r;

        r = manifest_decode_pod(text, size, &file, &obj, &unknown, &err);
        if (r == 0) {
                FUZZ_ASSERT(obj != NULL);
                FUZZ_ASSERT(unknown.n <= V1_NORMALIZE_MAX_UNKNOWN && unknown.n <= unknown.total);
                check_pod(obj);
        } else {
                FUZZ_ASSERT(r == -EINVAL || r == -ENODATA || r == -EFBIG || r == -ENOMEM);
                FUZZ_ASSERT(obj == NULL && err.len > 0);
                FUZZ_ASSERT(unknown.total == 0);
        }
        json_object_put(obj);
        obj = NULL;
        buf_reset(&err);

        r = manifest_decode_pods(text, size, &url, &obj, &unknown, &err);
        if (r == 0) {
                FUZZ_ASSERT(json_object_is_type(obj, json_type_array));
                for (size_t i = 0; i < json_object_array_length(obj); i++)
                        check_pod(json_object_array_get_idx(obj, i));
        } else {
                FUZZ_ASSERT(r == -EINVAL || r == -ENODATA || r == -EFBIG || r == -ENOMEM);
                FUZZ_ASSERT(obj == NULL && err.len > 0);
                FUZZ_ASSERT(unknown.total == 0);
        }
        json_object_put(obj);
        v1_unknown_clear(&unknown);
        buf_free(&err);
        return 0;
}
