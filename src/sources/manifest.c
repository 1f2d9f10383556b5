/*
 * manifest — static-pod manifests: read, decode, default, validate
 * (see src/sources/manifest.h and doc/pod-config.md 5.1-5.5, 9.1).
 *
 * One manifest goes through these steps, in the kubelet's order:
 *   1. YAML/JSON text -> json-c tree (first document only; yaml_json);
 *   2. type meta: kind and apiVersion (v1 Pod, or v1 PodList for HTTP);
 *   3. types of the fields this module reads or writes (the kubelet's typed
 *      decoding fails on a string where an int belongs; we say where);
 *   4. normalized through the core/v1 table (v1_normalize): unknown
 *      members dropped and listed, nulls and plain zero values removed,
 *      number quantities spelled as strings, every other type checked, so
 *      that what Go decodes alike is alike here;
 *   5. metadata.name required;
 *   6. the UID, if the manifest has none (9.1), hashed over the manifest
 *      as written but normalized: before any default, and blind to what
 *      step 4 removed or respelled;
 *   7. API defaults (5.2, plus the few listed at api_defaults());
 *   8. source defaults (5.3);
 *   9. pod validation, a documented subset of ValidatePodCreate (5.5);
 *  10. the static-pod API reference rule, strict (gated) form (5.5).
 * Any failure rejects the manifest with one message naming the field path.
 *
 * One piece, on purpose (about 1,800 lines): the ten steps are one
 * pipeline in the kubelet's order, each reading what the one before left
 * in the tree; the parts that stand alone already live apart (yaml_json,
 * v1_normalize, static_pod).
 *
 * Cost: a few walks over the tree plus one canonical serialization for the
 * UID; all linear in the manifest size.  Step 4 is one walk with a binary
 * search per member (tests/bench/bench_normalize measures it).
 */

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/digest.h"
#include "util/json_canon.h"
#include "util/json_parse.h"
#include "util/json_get.h"
#include "util/log.h"
#include "util/proto_words.h"
#include "sources/manifest.h"
#include "kube/v1_normalize.h"
#include "util/yaml_json.h"

#define CONFIG_HASH_ANNOTATION PROTO_ANNOTATION_HASH
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define ANNOTATIONS_MAX_BYTES (256 * 1024)

/* ---- error collection and field paths -------------------------------- */

/* Validation reports every problem it finds, "; "-separated, like the
 * kubelet's aggregated field errors.  b may be NULL (errors only counted). */
struct errs {
        struct buf *b;
        int n;
        /* A check, or the message, could not allocate: the result is
         * -ENOMEM (a message with pieces missing is never reported). */
        bool oom;
};

/* Counts one more error; true when its text is to be written to e->b
 * next.  The first error replaces what b held (the convention of
 * util/buf.h: a failure's message is the only one in err). */
static bool errs_next(struct errs *e)
{
        e->n++;
        if (!e->b)
                return false;
        if (e->n == 1) {
                buf_reset(e->b);
        } else if (buf_puts(e->b, "; ") < 0) {
                e->oom = true;
                return false;
        }
        return true;
}

static void errs_vadd(struct errs *e, const char *path, const char *fmt, va_list ap)
{
        if (!errs_next(e))
                return;
        if ((path && *path && (buf_puts(e->b, path) < 0 || buf_puts(e->b, ": ") < 0)) || buf_vprintf(e->b, fmt, ap) < 0)
                e->oom = true;
}

static void errs_add(struct errs *e, const char *path, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void errs_add(struct errs *e, const char *path, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        errs_vadd(e, path, fmt, ap);
        va_end(ap);
}

/* "<path>: <what>: "<value>"<tail>" with the value quoted as JSON. */
static void errs_value(struct errs *e, const char *path, const char *what,
                       const char *value, const char *tail)
{
        if (!errs_next(e))
                return;
        if (buf_printf(e->b, "%s: %s: ", path, what) < 0 || buf_json_string(e->b, value, strlen(value)) < 0 ||
            (tail && buf_puts(e->b, tail) < 0))
                e->oom = true;
}

static void errs_invalid(struct errs *e, const char *path, const char *value, const char *msg)
{
        char tail[600];

        snprintf(tail, sizeof(tail), ": %s", msg);
        errs_value(e, path, "Invalid value", value, tail);
}

/* supported: NULL-terminated list, printed as Go does ("A", "B"). */
static void errs_unsupported(struct errs *e, const char *path, const char *value,
                             const char *const *supported)
{
        char tail[300];
        size_t n;

        n = (size_t)snprintf(tail, sizeof(tail), ": supported values: ");
        for (size_t i = 0; supported[i] && n < sizeof(tail); i++)
                n += (size_t)snprintf(tail + n, sizeof(tail) - n, "%s\"%s\"", i ? ", " : "",
                                      supported[i]);
        errs_value(e, path, "Unsupported value", value, tail);
}

struct path {
        char s[320];
        size_t n;
};

static size_t path_push(struct path *p, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

/* Appends to the path; returns the length to pop back to. */
static size_t path_push(struct path *p, const char *fmt, ...)
{
        size_t old = p->n;
        va_list ap;
        int w;

        if (p->n < sizeof(p->s) - 1) {
                va_start(ap, fmt);
                w = vsnprintf(p->s + p->n, sizeof(p->s) - p->n, fmt, ap);
                va_end(ap);
                if (w > 0)
                        p->n += (size_t)w;
                if (p->n > sizeof(p->s) - 1)
                        p->n = sizeof(p->s) - 1;
        }
        return old;
}

/* Appends len bytes of s, cut where the path is full (as path_push()
 * cuts): the two callers below run for every field of every pod, where
 * a printf() per field showed in scripts/bench's normalize line. */
static void path_append(struct path *p, const char *s, size_t len)
{
        size_t room = sizeof(p->s) - 1 - p->n;

        if (len > room)
                len = room;
        memcpy(p->s + p->n, s, len);
        p->n += len;
        p->s[p->n] = '\0';
}

static size_t path_key(struct path *p, const char *key)
{
        size_t old = p->n;

        if (p->n)
                path_append(p, ".", 1);
        path_append(p, key, strlen(key));
        return old;
}

static size_t path_idx(struct path *p, size_t i)
{
        char digits[24];
        size_t k = sizeof(digits);
        size_t old = p->n;

        digits[--k] = ']';
        do {
                digits[--k] = (char)('0' + i % 10);
                i /= 10;
        } while (i);
        digits[--k] = '[';
        path_append(p, digits + k, sizeof(digits) - k);
        return old;
}

static void path_pop(struct path *p, size_t old)
{
        p->n = old;
        p->s[old] = '\0';
}

static void path_init(struct path *p, const char *base)
{
        p->n = 0;
        p->s[0] = '\0';
        path_push(p, "%s", base);
}

/* ---- small JSON helpers ------------------------------------------------ */

static size_t arr_len(json_object *a)
{
        return a && json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;
}

static json_object *arr_obj(json_object *a, size_t i)
{
        json_object *v = json_object_array_get_idx(a, i);

        return v && json_object_is_type(v, json_type_object) ? v : NULL;
}

/* Takes v (NULL means allocation failed). */
static int put(json_object *o, const char *key, json_object *v)
{
        if (!v)
                return -ENOMEM;
        return json_put(o, key, v);
}

static int put_str(json_object *o, const char *key, const char *s)
{
        return put(o, key, json_object_new_string(s));
}

/* Go cannot tell an absent string from "": both get the default. */
static int default_str(json_object *o, const char *key, const char *s)
{
        if (*json_get_str(o, key, ""))
                return 0;
        return put_str(o, key, s);
}

/* zero_unset: Go's int32 (not pointer) fields, where 0 means unset. */
static int default_int(json_object *o, const char *key, int64_t d, bool zero_unset)
{
        json_object *v = json_get(o, key);

        if (v && !(zero_unset && json_object_get_int64(v) == 0))
                return 0;
        return put(o, key, json_object_new_int64(d));
}

static int ensure(json_object *o, const char *key, json_type t, json_object **ret)
{
        json_object *v = json_get_type(o, key, t);
        int r;

        if (!v) {
                r = put(o, key, t == json_type_array ? json_object_new_array()
                                                     : json_object_new_object());
                if (r < 0)
                        return r;
                v = json_object_object_get(o, key);
        }
        *ret = v;
        return 0;
}

/* ---- step 3: types of the fields we touch ------------------------------ */

enum ftype { T_STR, T_INT, T_BOOL, T_OBJ, T_ARR, T_STRMAP, T_STRARR, T_INTSTR };

/* sub: members of an object, or of each element of an array of objects. */
struct field {
        const char *key;
        enum ftype type;
        const struct field *sub;
};

static const struct field f_localref[] = {
        {"name", T_STR, NULL}, {"optional", T_BOOL, NULL}, {NULL, 0, NULL}};
static const struct field f_keyref[] = {
        {"name", T_STR, NULL}, {"key", T_STR, NULL}, {"optional", T_BOOL, NULL},
        {NULL, 0, NULL}};
static const struct field f_fieldref[] = {
        {"apiVersion", T_STR, NULL}, {"fieldPath", T_STR, NULL}, {NULL, 0, NULL}};
static const struct field f_valuefrom[] = {
        {"secretKeyRef", T_OBJ, f_keyref}, {"configMapKeyRef", T_OBJ, f_keyref},
        {"fieldRef", T_OBJ, f_fieldref}, {"resourceFieldRef", T_OBJ, NULL},
        {NULL, 0, NULL}};
static const struct field f_env[] = {
        {"name", T_STR, NULL}, {"value", T_STR, NULL}, {"valueFrom", T_OBJ, f_valuefrom},
        {NULL, 0, NULL}};
static const struct field f_envfrom[] = {
        {"prefix", T_STR, NULL}, {"secretRef", T_OBJ, f_localref},
        {"configMapRef", T_OBJ, f_localref}, {NULL, 0, NULL}};
static const struct field f_port[] = {
        {"name", T_STR, NULL}, {"containerPort", T_INT, NULL}, {"hostPort", T_INT, NULL},
        {"protocol", T_STR, NULL}, {"hostIP", T_STR, NULL}, {NULL, 0, NULL}};
static const struct field f_mount[] = {
        {"name", T_STR, NULL}, {"mountPath", T_STR, NULL}, {"subPath", T_STR, NULL},
        {"readOnly", T_BOOL, NULL}, {NULL, 0, NULL}};
static const struct field f_httpget[] = {
        {"path", T_STR, NULL}, {"port", T_INTSTR, NULL}, {"host", T_STR, NULL},
        {"scheme", T_STR, NULL}, {NULL, 0, NULL}};
static const struct field f_handler[] = {
        {"httpGet", T_OBJ, f_httpget}, {"tcpSocket", T_OBJ, NULL}, {"exec", T_OBJ, NULL},
        {NULL, 0, NULL}};
static const struct field f_lifecycle[] = {
        {"postStart", T_OBJ, f_handler}, {"preStop", T_OBJ, f_handler}, {NULL, 0, NULL}};
static const struct field f_probe[] = {
        {"httpGet", T_OBJ, f_httpget}, {"tcpSocket", T_OBJ, NULL}, {"exec", T_OBJ, NULL},
        {"grpc", T_OBJ, NULL}, {"initialDelaySeconds", T_INT, NULL},
        {"timeoutSeconds", T_INT, NULL}, {"periodSeconds", T_INT, NULL},
        {"successThreshold", T_INT, NULL}, {"failureThreshold", T_INT, NULL},
        {"terminationGracePeriodSeconds", T_INT, NULL}, {NULL, 0, NULL}};
static const struct field f_resources[] = {
        {"limits", T_OBJ, NULL}, {"requests", T_OBJ, NULL}, {"claims", T_ARR, NULL},
        {NULL, 0, NULL}};
static const struct field f_container[] = {
        {"name", T_STR, NULL}, {"image", T_STR, NULL}, {"imagePullPolicy", T_STR, NULL},
        {"command", T_STRARR, NULL}, {"args", T_STRARR, NULL}, {"workingDir", T_STR, NULL},
        {"ports", T_ARR, f_port}, {"env", T_ARR, f_env}, {"envFrom", T_ARR, f_envfrom},
        {"resources", T_OBJ, f_resources}, {"volumeMounts", T_ARR, f_mount},
        {"livenessProbe", T_OBJ, f_probe}, {"readinessProbe", T_OBJ, f_probe},
        {"startupProbe", T_OBJ, f_probe}, {"lifecycle", T_OBJ, f_lifecycle},
        {"terminationMessagePath", T_STR, NULL}, {"terminationMessagePolicy", T_STR, NULL},
        {"securityContext", T_OBJ, NULL}, {"restartPolicy", T_STR, NULL},
        {"stdin", T_BOOL, NULL}, {"tty", T_BOOL, NULL}, {NULL, 0, NULL}};
static const struct field f_secretref_holder[] = {
        {"secretRef", T_OBJ, f_localref}, {NULL, 0, NULL}};
static const struct field f_items[] = {
        {"path", T_STR, NULL}, {"fieldRef", T_OBJ, f_fieldref}, {NULL, 0, NULL}};
static const struct field f_downward[] = {
        {"items", T_ARR, f_items}, {"defaultMode", T_INT, NULL}, {NULL, 0, NULL}};
static const struct field f_projection[] = {
        {"secret", T_OBJ, f_localref}, {"configMap", T_OBJ, f_localref},
        {"downwardAPI", T_OBJ, f_downward}, {"serviceAccountToken", T_OBJ, NULL},
        {"clusterTrustBundle", T_OBJ, NULL}, {"podCertificate", T_OBJ, NULL},
        {NULL, 0, NULL}};
static const struct field f_projected[] = {
        {"sources", T_ARR, f_projection}, {"defaultMode", T_INT, NULL}, {NULL, 0, NULL}};
static const struct field f_hostpath[] = {
        {"path", T_STR, NULL}, {"type", T_STR, NULL}, {NULL, 0, NULL}};
static const struct field f_secretvol[] = {
        {"secretName", T_STR, NULL}, {"defaultMode", T_INT, NULL}, {NULL, 0, NULL}};
static const struct field f_configmapvol[] = {
        {"name", T_STR, NULL}, {"defaultMode", T_INT, NULL}, {NULL, 0, NULL}};
static const struct field f_azurefile[] = {{"secretName", T_STR, NULL}, {NULL, 0, NULL}};
static const struct field f_csi[] = {
        {"driver", T_STR, NULL}, {"nodePublishSecretRef", T_OBJ, f_localref},
        {NULL, 0, NULL}};

/*
 * The v1 VolumeSource members (k8s.io/api/core/v1).  Volume members that
 * are not in this table are unknown volume types: the kubelet's decoder
 * would drop them and default the volume to emptyDir; podmux rejects a
 * volume that has only unknown types (a typo like "hostpath" would
 * otherwise silently become an empty directory).
 */
static const struct field f_volume[] = {
        {"name", T_STR, NULL},
        {"hostPath", T_OBJ, f_hostpath},
        {"emptyDir", T_OBJ, NULL},
        {"gcePersistentDisk", T_OBJ, NULL},
        {"awsElasticBlockStore", T_OBJ, NULL},
        {"gitRepo", T_OBJ, NULL},
        {"secret", T_OBJ, f_secretvol},
        {"nfs", T_OBJ, NULL},
        {"iscsi", T_OBJ, f_secretref_holder},
        {"glusterfs", T_OBJ, NULL},
        {"persistentVolumeClaim", T_OBJ, NULL},
        {"rbd", T_OBJ, f_secretref_holder},
        {"flexVolume", T_OBJ, f_secretref_holder},
        {"cinder", T_OBJ, f_secretref_holder},
        {"cephfs", T_OBJ, f_secretref_holder},
        {"flocker", T_OBJ, NULL},
        {"downwardAPI", T_OBJ, f_downward},
        {"fc", T_OBJ, NULL},
        {"azureFile", T_OBJ, f_azurefile},
        {"configMap", T_OBJ, f_configmapvol},
        {"vsphereVolume", T_OBJ, NULL},
        {"quobyte", T_OBJ, NULL},
        {"azureDisk", T_OBJ, NULL},
        {"photonPersistentDisk", T_OBJ, NULL},
        {"projected", T_OBJ, f_projected},
        {"portworxVolume", T_OBJ, NULL},
        {"scaleIO", T_OBJ, f_secretref_holder},
        {"storageos", T_OBJ, f_secretref_holder},
        {"csi", T_OBJ, f_csi},
        {"ephemeral", T_OBJ, NULL},
        {"image", T_OBJ, NULL},
        {NULL, 0, NULL}};
/* f_volume without "name": the volume source keys. */
#define VOLUME_SOURCES (f_volume + 1)

static const struct field f_toleration[] = {
        {"key", T_STR, NULL}, {"operator", T_STR, NULL}, {"value", T_STR, NULL},
        {"effect", T_STR, NULL}, {"tolerationSeconds", T_INT, NULL}, {NULL, 0, NULL}};
static const struct field f_spec[] = {
        {"containers", T_ARR, f_container}, {"initContainers", T_ARR, f_container},
        {"ephemeralContainers", T_ARR, f_container}, {"volumes", T_ARR, f_volume},
        {"restartPolicy", T_STR, NULL}, {"dnsPolicy", T_STR, NULL},
        {"dnsConfig", T_OBJ, NULL}, {"schedulerName", T_STR, NULL},
        {"serviceAccountName", T_STR, NULL}, {"serviceAccount", T_STR, NULL},
        {"nodeName", T_STR, NULL}, {"terminationGracePeriodSeconds", T_INT, NULL},
        {"activeDeadlineSeconds", T_INT, NULL}, {"enableServiceLinks", T_BOOL, NULL},
        {"hostNetwork", T_BOOL, NULL}, {"hostPID", T_BOOL, NULL}, {"hostIPC", T_BOOL, NULL},
        {"securityContext", T_OBJ, NULL}, {"tolerations", T_ARR, f_toleration},
        {"imagePullSecrets", T_ARR, f_localref}, {"resourceClaims", T_ARR, NULL},
        {"nodeSelector", T_STRMAP, NULL}, {"priority", T_INT, NULL},
        {"priorityClassName", T_STR, NULL}, {NULL, 0, NULL}};
static const struct field f_metadata[] = {
        {"name", T_STR, NULL}, {"namespace", T_STR, NULL}, {"uid", T_STR, NULL},
        {"generateName", T_STR, NULL}, {"labels", T_STRMAP, NULL},
        {"annotations", T_STRMAP, NULL}, {NULL, 0, NULL}};
static const struct field f_status[] = {{"phase", T_STR, NULL}, {NULL, 0, NULL}};
static const struct field f_pod[] = {
        {"metadata", T_OBJ, f_metadata}, {"spec", T_OBJ, f_spec}, {"status", T_OBJ, f_status},
        {NULL, 0, NULL}};

static const char *const ftype_names[] = {
        [T_STR] = "string", [T_INT] = "integer", [T_BOOL] = "boolean",
        [T_OBJ] = "object", [T_ARR] = "array", [T_STRMAP] = "map of strings",
        [T_STRARR] = "array of strings", [T_INTSTR] = "integer or string"};

static void check_fields(struct errs *e, struct path *p, json_object *o,
                         const struct field *fields);

static void type_error(struct errs *e, struct path *p, enum ftype want, json_object *v)
{
        errs_add(e, p->s, "Invalid type: expected %s, got %s", ftype_names[want], json_type_word(v));
}

/* A JSON null is accepted anywhere: Go decodes it as "absent". */
static void check_value(struct errs *e, struct path *p, json_object *v,
                        const struct field *f)
{
        json_type t = json_object_get_type(v);
        size_t n, old;

        if (!v)
                return;
        switch (f->type) {
        case T_STR:
                if (t != json_type_string)
                        type_error(e, p, f->type, v);
                return;
        case T_INT:
                if (t != json_type_int)
                        type_error(e, p, f->type, v);
                return;
        case T_BOOL:
                if (t != json_type_boolean)
                        type_error(e, p, f->type, v);
                return;
        case T_INTSTR:
                if (t != json_type_int && t != json_type_string)
                        type_error(e, p, f->type, v);
                return;
        case T_OBJ:
                if (t != json_type_object)
                        type_error(e, p, f->type, v);
                else if (f->sub)
                        check_fields(e, p, v, f->sub);
                return;
        case T_STRMAP:
                if (t != json_type_object) {
                        type_error(e, p, f->type, v);
                        return;
                }
                json_object_object_foreach(v, k, mv) {
                        if (mv && !json_object_is_type(mv, json_type_string)) {
                                old = path_key(p, k);
                                type_error(e, p, T_STR, mv);
                                path_pop(p, old);
                        }
                }
                return;
        case T_ARR:
        case T_STRARR:
                if (t != json_type_array) {
                        type_error(e, p, f->type, v);
                        return;
                }
                n = json_object_array_length(v);
                for (size_t i = 0; i < n; i++) {
                        json_object *el = json_object_array_get_idx(v, i);

                        old = path_idx(p, i);
                        if (f->type == T_STRARR) {
                                if (el && !json_object_is_type(el, json_type_string))
                                        type_error(e, p, T_STR, el);
                        } else if (f->sub) {
                                if (!json_object_is_type(el, json_type_object))
                                        type_error(e, p, T_OBJ, el);
                                else
                                        check_fields(e, p, el, f->sub);
                        }
                        path_pop(p, old);
                }
                return;
        }
}

static void check_fields(struct errs *e, struct path *p, json_object *o,
                         const struct field *fields)
{
        for (const struct field *f = fields; f->key; f++) {
                json_object *v = json_object_object_get(o, f->key);
                size_t old;

                if (!v)
                        continue;
                old = path_key(p, f->key);
                check_value(e, p, v, f);
                path_pop(p, old);
        }
}

/* ---- step 6: generated UID (9.1) -------------------------------------- */

/*
 * FNV-1a-128 over the canonical JSON of the manifest AS WRITTEN, once
 * normalized (step 4) and before any default, then "host:<node>" and
 * "file:<path>" for a file, or "url:<url>" for a URL.  Hashing the written
 * content, not the defaulted object, keeps UIDs stable when podmux learns
 * more defaults; key order, whitespace, comments and YAML-vs-JSON do not
 * reach the canonical text, and neither does anything the normalization
 * removes (unknown fields, nulls, plain zero values) or respells (a
 * quantity as a number), so what makes no semantic difference makes no
 * new UID.  A manifest without any of those hashes exactly as before
 * normalization existed.  The kubelet hashes a Go deep dump instead,
 * which no C program can reproduce (doc/pod-config.md 5.4).
 */
static int generate_uid(json_object *pod, const struct manifest_ctx *ctx, char out[33])
{
        struct buf canon = BUF_INIT;
        struct fnv128 h;
        uint8_t digest[16];
        const char *node = ctx->node_name ? ctx->node_name : "";
        const char *loc = ctx->location ? ctx->location : "";
        int r;

        r = json_canon_append(&canon, pod);
        if (r < 0)
                goto out;
        fnv128_init(&h);
        fnv128_update(&h, canon.data, canon.len);
        if (ctx->origin == MANIFEST_ORIGIN_FILE) {
                fnv128_update(&h, "host:", 5);
                fnv128_update(&h, node, strlen(node));
                fnv128_update(&h, "file:", 5);
                fnv128_update(&h, loc, strlen(loc));
        } else {
                fnv128_update(&h, "url:", 4);
                fnv128_update(&h, loc, strlen(loc));
        }
        fnv128_final(&h, digest);
        fnv128_hex(digest, out);
out:
        buf_free(&canon);
        return r;
}

/* ---- step 7: API defaults (5.2) ---------------------------------------- */

/*
 * imagePullPolicy by the image's tag, as the v1 defaults do through the
 * reference parser: tag "latest", or no tag and no digest -> Always;
 * anything else -> IfNotPresent.  The tag is what follows the last ':'
 * after the last '/' (a registry port "host:5000/x" is not a tag).  The
 * reference is not otherwise validated.
 */
static const char *pull_policy_for(const char *image)
{
        size_t n = strlen(image), name_start = 0, colon = SIZE_MAX;
        const char *at = strchr(image, '@');

        if (n == 0)
                return "IfNotPresent"; /* the parser fails: no tag */
        if (at)
                n = (size_t)(at - image);
        for (size_t i = 0; i < n; i++) {
                if (image[i] == '/') {
                        name_start = i + 1;
                        colon = SIZE_MAX;
                } else if (image[i] == ':' && i >= name_start) {
                        colon = i;
                }
        }
        if (colon == SIZE_MAX)
                return at ? "IfNotPresent" : "Always";
        if (n - colon - 1 == 6 && memcmp(image + colon + 1, "latest", 6) == 0)
                return "Always";
        return "IfNotPresent";
}

static int default_http_get(json_object *holder)
{
        json_object *hg = json_get(holder, "httpGet");
        int r;

        if (!hg)
                return 0;
        r = default_str(hg, "path", "/");
        if (r == 0)
                r = default_str(hg, "scheme", "HTTP");
        return r;
}

static int default_field_ref(json_object *holder)
{
        json_object *fr = json_get(holder, "fieldRef");

        return fr ? default_str(fr, "apiVersion", "v1") : 0;
}

static int default_downward_items(json_object *dapi)
{
        json_object *items = json_get(dapi, "items");

        for (size_t i = 0; i < arr_len(items); i++) {
                int r = default_field_ref(arr_obj(items, i));

                if (r < 0)
                        return r;
        }
        return 0;
}

static int default_container(json_object *c, bool host_network)
{
        static const char *const probes[] = {"livenessProbe", "readinessProbe", "startupProbe"};
        json_object *ports = json_get(c, "ports"), *env = json_get(c, "env"), *res, *limits, *lc;
        int r;

        r = default_str(c, "terminationMessagePath", "/dev/termination-log");
        if (r == 0)
                r = default_str(c, "terminationMessagePolicy", "File");
        if (r == 0)
                r = default_str(c, "imagePullPolicy", pull_policy_for(json_get_str(c, "image", "")));
        for (size_t i = 0; r == 0 && i < arr_len(ports); i++) {
                json_object *p = arr_obj(ports, i), *cp = json_get(p, "containerPort");

                r = default_str(p, "protocol", "TCP");
                /* With the host's network the container port is the host
                 * port. */
                if (r == 0 && host_network && cp)
                        r = default_int(p, "hostPort", json_object_get_int64(cp), true);
        }
        for (size_t i = 0; r == 0 && i < arr_len(env); i++)
                r = default_field_ref(json_get(arr_obj(env, i), "valueFrom"));
        for (size_t i = 0; r == 0 && i < 3; i++) {
                json_object *pr = json_get(c, probes[i]);

                if (!pr)
                        continue;
                r = default_int(pr, "timeoutSeconds", 1, true);
                if (r == 0)
                        r = default_int(pr, "periodSeconds", 10, true);
                if (r == 0)
                        r = default_int(pr, "successThreshold", 1, true);
                if (r == 0)
                        r = default_int(pr, "failureThreshold", 3, true);
                if (r == 0)
                        r = default_http_get(pr);
        }
        lc = json_get(c, "lifecycle");
        if (r == 0 && lc)
                r = default_http_get(json_get(lc, "postStart"));
        if (r == 0 && lc)
                r = default_http_get(json_get(lc, "preStop"));
        /* Requests default to the limits, resource by resource. */
        res = json_get(c, "resources");
        limits = json_get(res, "limits");
        if (r == 0 && limits && json_object_object_length(limits) > 0) {
                json_object *req = NULL;

                r = ensure(res, "requests", json_type_object, &req);
                json_object_object_foreach(limits, k, v) {
                        json_object *copy = NULL;

                        if (r < 0)
                                break;
                        if (json_object_object_get_ex(req, k, NULL))
                                continue;
                        r = json_copy(v, &copy);
                        if (r == 0)
                                r = json_put(req, k, copy);
                }
        }
        return r;
}

static int default_volume(json_object *v)
{
        json_object *src;
        int r = 0;

        /* No member besides the name: v1 defaults an empty source to an
         * emptyDir. */
        if (json_object_object_length(v) == (json_get(v, "name") ? 1 : 0))
                return put(v, "emptyDir", json_object_new_object());
        if ((src = json_get(v, "hostPath")) && !json_get(src, "type"))
                r = put_str(src, "type", "");
        if (r == 0 && (src = json_get(v, "secret")))
                r = default_int(src, "defaultMode", 0644, false);
        if (r == 0 && (src = json_get(v, "configMap")))
                r = default_int(src, "defaultMode", 0644, false);
        if (r == 0 && (src = json_get(v, "downwardAPI"))) {
                r = default_int(src, "defaultMode", 0644, false);
                if (r == 0)
                        r = default_downward_items(src);
        }
        if (r == 0 && (src = json_get(v, "projected"))) {
                json_object *sources = json_get(src, "sources");

                r = default_int(src, "defaultMode", 0644, false);
                for (size_t i = 0; r == 0 && i < arr_len(sources); i++) {
                        json_object *s = arr_obj(sources, i), *sat;

                        r = default_downward_items(json_get(s, "downwardAPI"));
                        if (r == 0 && (sat = json_get(s, "serviceAccountToken")))
                                r = default_int(sat, "expirationSeconds", 3600, false);
                }
        }
        return r;
}

/*
 * The v1 defaults a static pod visibly gets (5.2), plus: probe timings and
 * httpGet path/scheme, fieldRef apiVersion, requests copied from limits,
 * hostPort = containerPort under hostNetwork, volume defaults (emptyDir
 * for a bare volume, hostPath type "", defaultMode 0644, projected token
 * expiration 3600).  Each applies only where the field is absent (or the
 * Go zero value the kubelet cannot tell from absent).
 */
static int api_defaults(json_object *pod)
{
        static const char *const lists[] = {"initContainers", "containers"};
        json_object *spec = NULL, *tgps, *vols;
        bool host_net;
        int r;

        r = ensure(pod, "spec", json_type_object, &spec);
        if (r == 0)
                r = default_str(spec, "restartPolicy", "Always");
        if (r == 0)
                r = default_str(spec, "dnsPolicy", "ClusterFirst");
        if (r == 0)
                r = default_str(spec, "schedulerName", "default-scheduler");
        if (r == 0)
                r = default_int(spec, "terminationGracePeriodSeconds", 30, false);
        /* A negative grace period means "now" to newer kubelets: 1 s. */
        tgps = json_get(spec, "terminationGracePeriodSeconds");
        if (r == 0 && json_object_get_int64(tgps) < 0)
                r = put(spec, "terminationGracePeriodSeconds", json_object_new_int64(1));
        if (r == 0 && !json_get(spec, "securityContext"))
                r = put(spec, "securityContext", json_object_new_object());
        if (r == 0 && !json_get(spec, "enableServiceLinks"))
                r = put(spec, "enableServiceLinks", json_object_new_boolean(1));
        host_net = json_object_get_boolean(json_get(spec, "hostNetwork"));
        for (size_t l = 0; r == 0 && l < 2; l++) {
                json_object *cs = json_get(spec, lists[l]);

                for (size_t i = 0; r == 0 && i < arr_len(cs); i++)
                        r = default_container(arr_obj(cs, i), host_net);
        }
        vols = json_get(spec, "volumes");
        for (size_t i = 0; r == 0 && i < arr_len(vols); i++)
                r = default_volume(arr_obj(vols, i));
        return r;
}

/* ---- step 8: source defaults (5.3) ------------------------------------- */

static bool toleration_matches(json_object *t)
{
        /* Go's MatchToleration: same key, operator, value and effect. */
        return !*json_get_str(t, "key", "") && strcmp(json_get_str(t, "operator", ""), "Exists") == 0 &&
               !*json_get_str(t, "value", "") && strcmp(json_get_str(t, "effect", ""), "NoExecute") == 0;
}

static json_object *new_static_toleration(void)
{
        json_object *t = json_object_new_object();

        if (!t)
                return NULL;
        if (put_str(t, "operator", "Exists") < 0 || put_str(t, "effect", "NoExecute") < 0) {
                json_object_put(t);
                return NULL;
        }
        return t;
}

/*
 * AddOrUpdateTolerationInPod with {operator: Exists, effect: NoExecute}:
 * every matching toleration that differs (e.g. has tolerationSeconds) is
 * replaced in place; an identical one is left alone; with no match the
 * toleration is appended.
 */
static int add_static_toleration(json_object *spec)
{
        json_object *tols = NULL;
        bool matched = false;
        int r;

        r = ensure(spec, "tolerations", json_type_array, &tols);
        if (r < 0)
                return r;
        for (size_t i = 0; i < json_object_array_length(tols); i++) {
                json_object *t = arr_obj(tols, i), *nt;

                if (!t || !toleration_matches(t))
                        continue;
                matched = true;
                if (json_object_object_length(t) == 2)
                        continue; /* exactly {operator, effect}: identical */
                nt = new_static_toleration();
                if (!nt)
                        return -ENOMEM;
                if (json_object_array_put_idx(tols, i, nt) != 0) {
                        json_object_put(nt);
                        return -ENOMEM;
                }
        }
        if (matched)
                return 0;
        {
                json_object *nt = new_static_toleration();

                if (!nt)
                        return -ENOMEM;
                if (json_object_array_add(tols, nt) != 0) {
                        json_object_put(nt);
                        return -ENOMEM;
                }
        }
        return 0;
}

static int source_defaults(json_object *pod, const struct manifest_ctx *ctx, const char *uid)
{
        const char *node = ctx->node_name ? ctx->node_name : "";
        json_object *meta = NULL, *spec = NULL, *ann = NULL, *status = NULL;
        struct buf name = BUF_INIT;
        int r;

        r = ensure(pod, "metadata", json_type_object, &meta);
        if (r < 0)
                goto out;
        r = put_str(meta, "uid", uid);
        if (r < 0)
                goto out;
        /* <name>-<lowercase(node)>: ASCII lower-casing (node names are DNS
         * names). */
        r = buf_printf(&name, "%s-", json_get_str(meta, "name", ""));
        for (const char *s = node; r == 0 && *s; s++)
                r = buf_putc(&name, (*s >= 'A' && *s <= 'Z') ? (char)(*s - 'A' + 'a') : *s);
        if (r == 0)
                r = put_str(meta, "name", name.data);
        if (r == 0)
                r = default_str(meta, "namespace", "default");
        if (r == 0)
                r = ensure(pod, "spec", json_type_object, &spec);
        if (r == 0)
                r = put_str(spec, "nodeName", node);
        if (r == 0)
                r = ensure(meta, "annotations", json_type_object, &ann);
        if (r == 0)
                r = put_str(ann, CONFIG_HASH_ANNOTATION, uid);
        if (r == 0 && ctx->origin == MANIFEST_ORIGIN_FILE)
                r = add_static_toleration(spec);
        if (r == 0)
                r = ensure(pod, "status", json_type_object, &status);
        if (r == 0)
                r = put_str(status, "phase", "Pending");
out:
        buf_free(&name);
        return r;
}

/* ---- step 9: validation (5.5) ------------------------------------------ */

#define DNS1123_LABEL_MSG                                                                      \
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "   \
        "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "    \
        "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
#define DNS1123_SUBDOMAIN_MSG                                                                  \
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, " \
        "'-' or '.', and must start and end with an alphanumeric character (e.g. "            \
        "'example.com', regex used for validation is "                                        \
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
#define QUALIFIED_NAME_MSG                                                                     \
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start " \
        "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "          \
        "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
#define LABEL_VALUE_MSG                                                                        \
        "a valid label must be an empty string or consist of alphanumeric characters, '-', "  \
        "'_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  " \
        "or 'my_value',  or '12345', regex used for validation is "                           \
        "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"

static bool is_lower_alnum(char ch)
{
        return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
}

static bool is_alnum(char ch)
{
        return is_lower_alnum(ch) || (ch >= 'A' && ch <= 'Z');
}

/* [a-z0-9]([-a-z0-9]*[a-z0-9])? over s[0..n) */
static bool dns_label_chars(const char *s, size_t n)
{
        if (n == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_lower_alnum(s[i]) && s[i] != '-')
                        return false;
        return true;
}

static bool dns_subdomain_chars(const char *s, size_t n)
{
        size_t start = 0;

        if (n == 0)
                return false;
        for (size_t i = 0; i <= n; i++) {
                if (i == n || s[i] == '.') {
                        if (!dns_label_chars(s + start, i - start))
                                return false;
                        start = i + 1;
                }
        }
        return true;
}

/* ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9], non-empty */
static bool qualified_chars(const char *s, size_t n)
{
        if (n == 0 || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
                        return false;
        return true;
}

static void check_dns_label(struct errs *e, const char *path, const char *v)
{
        if (strlen(v) > 63)
                errs_invalid(e, path, v, "must be no more than 63 characters");
        if (!dns_label_chars(v, strlen(v)))
                errs_invalid(e, path, v, DNS1123_LABEL_MSG);
}

static void check_dns_subdomain(struct errs *e, const char *path, const char *v)
{
        if (strlen(v) > 253)
                errs_invalid(e, path, v, "must be no more than 253 characters");
        if (!dns_subdomain_chars(v, strlen(v)))
                errs_invalid(e, path, v, DNS1123_SUBDOMAIN_MSG);
}

/* IsQualifiedName: [prefix/]name, prefix a DNS subdomain, name <= 63. */
static void check_qualified_name(struct errs *e, const char *path, const char *v)
{
        const char *slash = strchr(v, '/');
        const char *name = slash ? slash + 1 : v;
        size_t n = strlen(name);

        if (slash && strchr(name, '/')) {
                errs_invalid(e, path, v,
                             "a qualified name must consist of alphanumeric characters, "
                             "'-', '_' or '.', with an optional DNS subdomain prefix "
                             "and '/' (e.g. 'example.com/MyName')");
                return;
        }
        if (slash) {
                size_t pn = (size_t)(slash - v);

                if (pn == 0)
                        errs_invalid(e, path, v, "prefix part must be non-empty");
                else if (pn > 253)
                        errs_invalid(e, path, v, "prefix part must be no more than 253 characters");
                else if (!dns_subdomain_chars(v, pn))
                        errs_invalid(e, path, v, "prefix part " DNS1123_SUBDOMAIN_MSG);
        }
        if (n == 0)
                errs_invalid(e, path, v, "name part must be non-empty");
        else if (n > 63)
                errs_invalid(e, path, v, "name part must be no more than 63 characters");
        else if (!qualified_chars(name, n))
                errs_invalid(e, path, v, QUALIFIED_NAME_MSG);
}

static void validate_metadata(struct errs *e, json_object *meta)
{
        json_object *labels = json_get(meta, "labels"), *ann = json_get(meta, "annotations");
        size_t total = 0;

        check_dns_subdomain(e, "metadata.name", json_get_str(meta, "name", ""));
        check_dns_label(e, "metadata.namespace", json_get_str(meta, "namespace", ""));
        if (labels) {
                json_object_object_foreach(labels, k, v) {
                        const char *s = json_object_get_string(v);

                        check_qualified_name(e, "metadata.labels", k);
                        if (strlen(s) > 63)
                                errs_invalid(e, "metadata.labels", s,
                                             "must be no more than 63 characters");
                        else if (*s && !qualified_chars(s, strlen(s)))
                                errs_invalid(e, "metadata.labels", s, LABEL_VALUE_MSG);
                }
        }
        if (ann) {
                json_object_object_foreach(ann, k, v) {
                        char lower[320];
                        size_t i;

                        /* Annotation keys are checked lower-cased, as Go does. */
                        for (i = 0; k[i] && i < sizeof(lower) - 1; i++)
                                lower[i] = (k[i] >= 'A' && k[i] <= 'Z') ? (char)(k[i] + 32) : k[i];
                        lower[i] = '\0';
                        if (k[i])
                                errs_invalid(e, "metadata.annotations", k,
                                             "name part must be no more than 63 characters");
                        else
                                check_qualified_name(e, "metadata.annotations", lower);
                        total += strlen(k) + (size_t)json_object_get_string_len(v);
                }
                if (total > ANNOTATIONS_MAX_BYTES)
                        errs_add(e, "metadata.annotations", "Too long: must have at most %d bytes",
                                 ANNOTATIONS_MAX_BYTES);
        }
}

static bool str_in(const char *s, const char *const *list)
{
        for (; *list; list++)
                if (strcmp(s, *list) == 0)
                        return true;
        return false;
}

static const char *const pull_policies[] = {"Always", "IfNotPresent", "Never", NULL};
static const char *const message_policies[] = {"File", "FallbackToLogsOnError", NULL};
static const char *const protocols[] = {"SCTP", "TCP", "UDP", NULL};
static const char *const restart_policies[] = {"Always", "OnFailure", "Never", NULL};
static const char *const dns_policies[] = {"ClusterFirstWithHostNet", "ClusterFirst", "Default",
                                           "None", NULL};
static const char *const tol_operators[] = {"Equal", "Exists", NULL};
static const char *const tol_effects[] = {"NoSchedule", "PreferNoSchedule", "NoExecute", NULL};
static const char *const host_path_types[] = {"", "DirectoryOrCreate", "Directory",
                                              "FileOrCreate", "File", "Socket",
                                              "CharDevice", "BlockDevice", NULL};

static void validate_port_num(struct errs *e, const char *path, int64_t v)
{
        if (v < 1 || v > 65535)
                errs_add(e, path, "Invalid value: %lld: must be between 1 and 65535, inclusive",
                         (long long)v);
}

/* Adds name to a set (a json object used as a hash set, so duplicate
 * checks stay linear in the number of names).  True if it was there. */
static bool set_seen(struct errs *e, json_object *set, const char *name)
{
        if (json_object_object_get_ex(set, name, NULL))
                return true;
        if (json_put(set, name, NULL) < 0)
                e->oom = true;
        return false;
}

/* cnames: container names so far (containers, then init containers, as
 * Go checks them); vnames: the pod's volume names. */
static void validate_container(struct errs *e, struct path *p, json_object *c,
                               json_object *cnames, json_object *vnames, bool host_net)
{
        const char *name = json_get_str(c, "name", ""), *image = json_get_str(c, "image", ""), *s;
        json_object *ports = json_get(c, "ports"), *mounts = json_get(c, "volumeMounts");
        json_object *env = json_get(c, "env");
        size_t old, old2;

        old = path_key(p, "name");
        if (!*name) {
                errs_add(e, p->s, "Required value");
        } else {
                check_dns_label(e, p->s, name);
                if (set_seen(e, cnames, name))
                        errs_value(e, p->s, "Duplicate value", name, NULL);
        }
        path_pop(p, old);
        old = path_key(p, "image");
        if (!*image)
                errs_add(e, p->s, "Required value");
        else if (strchr(" \t\r\n", image[0]) || strchr(" \t\r\n", image[strlen(image) - 1]))
                errs_invalid(e, p->s, image, "must not have leading or trailing whitespace");
        path_pop(p, old);
        old = path_key(p, "imagePullPolicy");
        if (!str_in(s = json_get_str(c, "imagePullPolicy", ""), pull_policies))
                errs_unsupported(e, p->s, s, pull_policies);
        path_pop(p, old);
        old = path_key(p, "terminationMessagePolicy");
        if (!str_in(s = json_get_str(c, "terminationMessagePolicy", ""), message_policies))
                errs_unsupported(e, p->s, s, message_policies);
        path_pop(p, old);
        for (size_t i = 0; i < arr_len(ports); i++) {
                json_object *port = arr_obj(ports, i), *cp = json_get(port, "containerPort"),
                            *hp = json_get(port, "hostPort");

                old = path_push(p, ".ports[%zu]", i);
                old2 = path_key(p, "containerPort");
                if (!cp || json_object_get_int64(cp) == 0)
                        errs_add(e, p->s, "Required value");
                else
                        validate_port_num(e, p->s, json_object_get_int64(cp));
                path_pop(p, old2);
                old2 = path_key(p, "hostPort");
                if (hp && json_object_get_int64(hp) != 0)
                        validate_port_num(e, p->s, json_object_get_int64(hp));
                if (host_net && hp && cp && json_object_get_int64(hp) != json_object_get_int64(cp))
                        errs_add(e, p->s, "Invalid value: %lld: must match `containerPort` "
                                          "when `hostNetwork` is true",
                                 (long long)json_object_get_int64(hp));
                path_pop(p, old2);
                old2 = path_key(p, "protocol");
                if (!str_in(s = json_get_str(port, "protocol", ""), protocols))
                        errs_unsupported(e, p->s, s, protocols);
                path_pop(p, old);
        }
        for (size_t i = 0; i < arr_len(mounts); i++) {
                json_object *m = arr_obj(mounts, i);

                old = path_push(p, ".volumeMounts[%zu]", i);
                old2 = path_key(p, "name");
                s = json_get_str(m, "name", "");
                if (!*s)
                        errs_add(e, p->s, "Required value");
                else if (!json_object_object_get_ex(vnames, s, NULL))
                        errs_value(e, p->s, "Not found", s, NULL);
                path_pop(p, old2);
                path_key(p, "mountPath");
                if (!*json_get_str(m, "mountPath", ""))
                        errs_add(e, p->s, "Required value");
                path_pop(p, old);
        }
        for (size_t i = 0; i < arr_len(env); i++) {
                old = path_push(p, ".env[%zu].name", i);
                if (!*json_get_str(arr_obj(env, i), "name", ""))
                        errs_add(e, p->s, "Required value");
                path_pop(p, old);
        }
}

/* How many known volume source members v has (unknown ones ignored). */
static size_t volume_source_count(json_object *v, const char **ret_first)
{
        size_t n = 0;

        for (const struct field *f = VOLUME_SOURCES; f->key; f++) {
                if (json_get(v, f->key)) {
                        if (n++ == 0 && ret_first)
                                *ret_first = f->key;
                }
        }
        return n;
}

static void validate_volumes(struct errs *e, json_object *vols, json_object *vnames)
{
        struct path p;

        for (size_t i = 0; i < arr_len(vols); i++) {
                json_object *v = arr_obj(vols, i), *hp;
                const char *name = json_get_str(v, "name", ""), *s;
                size_t old;

                path_init(&p, "spec.volumes");
                path_idx(&p, i);
                old = path_key(&p, "name");
                if (!*name) {
                        errs_add(e, p.s, "Required value");
                } else {
                        check_dns_label(e, p.s, name);
                        if (set_seen(e, vnames, name))
                                errs_value(e, p.s, "Duplicate value", name, NULL);
                }
                path_pop(&p, old);
                if (volume_source_count(v, NULL) > 1)
                        errs_add(e, p.s, "Forbidden: may not specify more than 1 volume type");
                if ((hp = json_get(v, "hostPath"))) {
                        old = path_key(&p, "hostPath.path");
                        if (!*json_get_str(hp, "path", ""))
                                errs_add(e, p.s, "Required value");
                        path_pop(&p, old);
                        path_key(&p, "hostPath.type");
                        if (!str_in(s = json_get_str(hp, "type", ""), host_path_types))
                                errs_unsupported(e, p.s, s, host_path_types);
                }
        }
}

static void validate_tolerations(struct errs *e, json_object *tols)
{
        struct path p;

        for (size_t i = 0; i < arr_len(tols); i++) {
                json_object *t = arr_obj(tols, i);
                const char *key = json_get_str(t, "key", ""), *op = json_get_str(t, "operator", ""),
                           *val = json_get_str(t, "value", ""), *eff = json_get_str(t, "effect", "");
                size_t old;

                path_init(&p, "spec.tolerations");
                path_idx(&p, i);
                if (*key) {
                        old = path_key(&p, "key");
                        check_qualified_name(e, p.s, key);
                        path_pop(&p, old);
                }
                old = path_key(&p, "operator");
                if (*op && !str_in(op, tol_operators))
                        errs_unsupported(e, p.s, op, tol_operators);
                else if (!*key && strcmp(op, "Exists") != 0)
                        errs_invalid(e, p.s, op,
                                     "operator must be Exists when `key` is empty, which means "
                                     "\"match all values and all keys\"");
                else if (strcmp(op, "Exists") == 0 && *val)
                        errs_invalid(e, p.s, val,
                                     "value must be empty when `operator` is 'Exists'");
                path_pop(&p, old);
                old = path_key(&p, "effect");
                if (*eff && !str_in(eff, tol_effects))
                        errs_unsupported(e, p.s, eff, tol_effects);
                else if (json_get(t, "tolerationSeconds") && strcmp(eff, "NoExecute") != 0)
                        errs_invalid(e, p.s, eff,
                                     "effect must be 'NoExecute' when `tolerationSeconds` is set");
                path_pop(&p, old);
        }
}

/*
 * The subset of ValidatePodCreate podmux applies: names (pod DNS
 * subdomain, namespace DNS label, label and annotation keys/values),
 * at least one container, container and volume names (DNS labels, unique
 * across containers and init containers), image required, pull and
 * termination-message policies, ports (range, protocol, hostNetwork),
 * volume mounts naming a volume, env names, one type per volume, hostPath,
 * restartPolicy, dnsPolicy (None needs dnsConfig), tolerations, and no
 * ephemeral containers on create.
 */
static void validate_pod(json_object *pod, struct errs *e)
{
        static const char *const lists[] = {"containers", "initContainers"};
        json_object *spec = json_get(pod, "spec");
        json_object *cnames = json_object_new_object(), *vnames = json_object_new_object();
        bool host_net = json_object_get_boolean(json_get(spec, "hostNetwork"));
        struct path p;
        const char *s;

        if (!cnames || !vnames) {
                e->oom = true;
                goto out;
        }
        validate_metadata(e, json_get(pod, "metadata"));
        /* Volumes first, as Go does: mounts are checked against them. */
        validate_volumes(e, json_get(spec, "volumes"), vnames);
        if (arr_len(json_get(spec, "containers")) == 0)
                errs_add(e, "spec.containers", "Required value");
        for (size_t l = 0; l < 2; l++) {
                json_object *cs = json_get(spec, lists[l]);

                for (size_t i = 0; i < arr_len(cs); i++) {
                        path_init(&p, "spec.");
                        path_push(&p, "%s[%zu]", lists[l], i);
                        validate_container(e, &p, arr_obj(cs, i), cnames, vnames, host_net);
                }
        }
        if (arr_len(json_get(spec, "ephemeralContainers")) > 0)
                errs_add(e, "spec.ephemeralContainers", "Forbidden: cannot be set on create");
        if (!str_in(s = json_get_str(spec, "restartPolicy", ""), restart_policies))
                errs_unsupported(e, "spec.restartPolicy", s, restart_policies);
        if (!str_in(s = json_get_str(spec, "dnsPolicy", ""), dns_policies))
                errs_unsupported(e, "spec.dnsPolicy", s, dns_policies);
        else if (strcmp(s, "None") == 0 && !json_get(spec, "dnsConfig"))
                errs_add(e, "spec.dnsConfig",
                         "Required value: must provide `dnsConfig` when `dnsPolicy` is None");
        validate_tolerations(e, json_get(spec, "tolerations"));
out:
        json_object_put(cnames);
        json_object_put(vnames);
}

/* ---- step 10: API object references (5.5, strict form) ----------------- */

/* The resource a reference names, with where it was found. */
struct apiref {
        char path[320];
        const char *resource;
        char detail[200]; /* for unknown types: replaces the generic text */
};

static bool found(struct apiref *a, const struct path *p, const char *resource)
{
        snprintf(a->path, sizeof(a->path), "%s", p->s);
        a->resource = resource;
        return true;
}

/* name of holder[key] is non-empty: Go skips references with empty names
 * in these visits. */
static bool ref_named(json_object *holder, const char *key)
{
        return *json_get_str(json_get(holder, key), "name", "") != '\0';
}

static const char *const container_lists[] = {"initContainers", "containers",
                                              "ephemeralContainers"};

/* envFrom[].<from> and env[].valueFrom.<key_ref>, every container kind. */
static bool container_refs(json_object *spec, const char *from, const char *key_ref,
                           const char *resource, struct apiref *a)
{
        struct path p;

        for (size_t l = 0; l < 3; l++) {
                json_object *cs = json_get(spec, container_lists[l]);

                for (size_t i = 0; i < arr_len(cs); i++) {
                        json_object *c = arr_obj(cs, i);
                        json_object *ef = json_get(c, "envFrom"), *env = json_get(c, "env");

                        for (size_t j = 0; j < arr_len(ef); j++) {
                                if (!ref_named(arr_obj(ef, j), from))
                                        continue;
                                path_init(&p, "spec.");
                                path_push(&p, "%s[%zu].envFrom[%zu].%s", container_lists[l], i,
                                          j, from);
                                return found(a, &p, resource);
                        }
                        for (size_t j = 0; j < arr_len(env); j++) {
                                if (!ref_named(json_get(arr_obj(env, j), "valueFrom"), key_ref))
                                        continue;
                                path_init(&p, "spec.");
                                path_push(&p, "%s[%zu].env[%zu].valueFrom.%s", container_lists[l], i, j,
                                          key_ref);
                                return found(a, &p, resource);
                        }
                }
        }
        return false;
}

/* VisitPodSecretNames: pull secrets, containers, then the volume types
 * that carry a secret reference. */
static bool secret_refs(json_object *spec, struct apiref *a)
{
        static const char *const secret_ref_vols[] = {"cephfs", "cinder", "flexVolume", "rbd",
                                                      "scaleIO", "iscsi", "storageos", NULL};
        json_object *ips = json_get(spec, "imagePullSecrets"), *vols = json_get(spec, "volumes");
        struct path p;

        for (size_t i = 0; i < arr_len(ips); i++) {
                if (!*json_get_str(arr_obj(ips, i), "name", ""))
                        continue;
                path_init(&p, "spec.imagePullSecrets");
                path_idx(&p, i);
                return found(a, &p, "secrets");
        }
        if (container_refs(spec, "secretRef", "secretKeyRef", "secrets", a))
                return true;
        for (size_t i = 0; i < arr_len(vols); i++) {
                json_object *v = arr_obj(vols, i), *src, *srcs;

                path_init(&p, "spec.volumes");
                path_idx(&p, i);
                if ((src = json_get(v, "azureFile")) && *json_get_str(src, "secretName", "")) {
                        path_key(&p, "azureFile.secretName");
                        return found(a, &p, "secrets");
                }
                for (size_t k = 0; secret_ref_vols[k]; k++) {
                        if (ref_named(json_get(v, secret_ref_vols[k]), "secretRef")) {
                                path_push(&p, ".%s.secretRef", secret_ref_vols[k]);
                                return found(a, &p, "secrets");
                        }
                }
                srcs = json_get(json_get(v, "projected"), "sources");
                for (size_t j = 0; j < arr_len(srcs); j++) {
                        if (ref_named(arr_obj(srcs, j), "secret")) {
                                path_push(&p, ".projected.sources[%zu].secret", j);
                                return found(a, &p, "secrets");
                        }
                }
                if ((src = json_get(v, "secret")) && *json_get_str(src, "secretName", "")) {
                        path_key(&p, "secret");
                        return found(a, &p, "secrets");
                }
                if (ref_named(json_get(v, "csi"), "nodePublishSecretRef")) {
                        path_key(&p, "csi.nodePublishSecretRef");
                        return found(a, &p, "secrets");
                }
        }
        return false;
}

static bool configmap_refs(json_object *spec, struct apiref *a)
{
        json_object *vols = json_get(spec, "volumes");
        struct path p;

        if (container_refs(spec, "configMapRef", "configMapKeyRef", "configmaps", a))
                return true;
        for (size_t i = 0; i < arr_len(vols); i++) {
                json_object *v = arr_obj(vols, i), *srcs = json_get(json_get(v, "projected"), "sources");

                path_init(&p, "spec.volumes");
                path_idx(&p, i);
                for (size_t j = 0; j < arr_len(srcs); j++) {
                        if (ref_named(arr_obj(srcs, j), "configMap")) {
                                path_push(&p, ".projected.sources[%zu].configMap", j);
                                return found(a, &p, "configmaps");
                        }
                }
                if (*json_get_str(json_get(v, "configMap"), "name", "")) {
                        path_key(&p, "configMap");
                        return found(a, &p, "configmaps");
                }
        }
        return false;
}

/* Volume types a static pod may use: node-local or with no API object. */
static const char *const allowed_volume_types[] = {
        "awsElasticBlockStore", "azureDisk", "cephfs", "cinder", "downwardAPI", "emptyDir",
        "fc", "flexVolume", "flocker", "gcePersistentDisk", "gitRepo", "hostPath", "image",
        "iscsi", "nfs", "photonPersistentDisk", "portworxVolume", "quobyte", "rbd",
        "scaleIO", "storageos", "vsphereVolume", NULL};

static const struct {
        const char *key, *resource;
} rejected_volume_types[] = {
        {"configMap", "configmaps (via configmap volumes)"},
        {"secret", "secrets (via secret volumes)"},
        {"csi", "csidrivers (via CSI volumes)"},
        {"glusterfs", "endpoints (via glusterFS volumes)"},
        {"persistentVolumeClaim", "persistentvolumeclaims"},
        {"ephemeral", "persistentvolumeclaims (via ephemeral volumes)"},
        {"azureFile", "secrets (via azureFile volumes)"},
};

static const struct {
        const char *key, *resource;
} rejected_projections[] = {
        {"configMap", "configmaps (via projected volumes)"},
        {"secret", "secrets (via projected volumes)"},
        {"serviceAccountToken", "serviceaccounts (via projected volumes)"},
        {"clusterTrustBundle", "clustertrustbundles"},
        {"podCertificate", "podcertificates"},
};

/*
 * podmux deviation: the kubelet's decoder drops a volume source member v1
 * does not define, and a volume left with no source is defaulted to an
 * emptyDir.  A typo ("hostpath") would silently give the pod an empty
 * directory where a host path was meant, so podmux refuses the first
 * volume that has members but no known source.  Looked for before step 4
 * drops the unknown members; reported in step 10, in the kubelet's order.
 */
struct unknown_volume {
        bool found;
        size_t index;
        char type[64];
};

static void find_unknown_volume(json_object *pod, struct unknown_volume *uv)
{
        json_object *vols = json_get(json_get(pod, "spec"), "volumes");

        memset(uv, 0, sizeof(*uv));
        for (size_t i = 0; i < arr_len(vols); i++) {
                json_object *v = arr_obj(vols, i);

                if (!v || volume_source_count(v, NULL) > 0)
                        continue;
                json_object_object_foreach(v, k, val) {
                        if (val && strcmp(k, "name") != 0) {
                                uv->found = true;
                                uv->index = i;
                                snprintf(uv->type, sizeof(uv->type), "%s", k);
                                return;
                        }
                }
        }
}

static bool volume_type_refs(json_object *spec, const struct unknown_volume *uv,
                             struct apiref *a)
{
        json_object *vols = json_get(spec, "volumes");
        struct path p;

        for (size_t i = 0; i < arr_len(vols); i++) {
                json_object *v = arr_obj(vols, i), *srcs;
                const char *type = NULL;

                path_init(&p, "spec.volumes");
                path_idx(&p, i);
                if (uv->found && uv->index == i) {
                        found(a, &p, NULL);
                        snprintf(a->detail, sizeof(a->detail),
                                 "static pods may not use unknown volume type \"%s\" "
                                 "(volume \"%s\")",
                                 uv->type, json_get_str(v, "name", ""));
                        return true;
                }
                if (volume_source_count(v, &type) == 0)
                        continue; /* defaulted to an emptyDir */
                if (str_in(type, allowed_volume_types))
                        continue;
                for (size_t k = 0; k < ARRAY_SIZE(rejected_volume_types); k++) {
                        if (strcmp(type, rejected_volume_types[k].key) == 0) {
                                path_key(&p, type);
                                return found(a, &p, rejected_volume_types[k].resource);
                        }
                }
                if (strcmp(type, "projected") != 0)
                        continue; /* unreachable: every known type is listed */
                srcs = json_get(json_get(v, "projected"), "sources");
                for (size_t j = 0; j < arr_len(srcs); j++) {
                        json_object *s = arr_obj(srcs, j);
                        size_t old = path_push(&p, ".projected.sources[%zu]", j);
                        bool known = false;

                        for (size_t k = 0; k < ARRAY_SIZE(rejected_projections); k++) {
                                if (json_get(s, rejected_projections[k].key)) {
                                        path_key(&p, rejected_projections[k].key);
                                        return found(a, &p, rejected_projections[k].resource);
                                }
                        }
                        known = json_get(s, "downwardAPI") != NULL;
                        if (!known) {
                                found(a, &p, NULL);
                                snprintf(a->detail, sizeof(a->detail),
                                         "static pods may not use an unknown projected volume "
                                         "source (volume \"%s\")",
                                         json_get_str(v, "name", ""));
                                return true;
                        }
                        path_pop(&p, old);
                }
        }
        return false;
}

/* podutil.HasAPIObjectReference, in its order; the first hit is reported. */
static bool api_object_reference(json_object *pod, const struct unknown_volume *uv,
                                 struct apiref *a)
{
        json_object *spec = json_get(pod, "spec");
        struct path p;

        memset(a, 0, sizeof(*a));
        if (*json_get_str(spec, "serviceAccountName", "")) {
                path_init(&p, "spec.serviceAccountName");
                return found(a, &p, "serviceaccounts");
        }
        /* The deprecated alias: v1 -> internal conversion copies it into
         * serviceAccountName when that is empty. */
        if (*json_get_str(spec, "serviceAccount", "")) {
                path_init(&p, "spec.serviceAccount");
                return found(a, &p, "serviceaccounts");
        }
        if (secret_refs(spec, a) || configmap_refs(spec, a))
                return true;
        if (arr_len(json_get(spec, "resourceClaims")) > 0) {
                path_init(&p, "spec.resourceClaims");
                return found(a, &p, "resourceclaims");
        }
        return volume_type_refs(spec, uv, a);
}

/* ---- the pipeline ------------------------------------------------------ */

/* Failures are reported with buf_set_err(): code, or -ENOMEM when the
 * message cannot be written, so a manifest is never rejected without its
 * reason (the caller retries instead). */

/* Steps 3-10 on one pod object (a manifest or a PodList item), in place.
 * Errors go to msg (appended); unknown members to unknown, their paths
 * starting with where ("" or "items[i]"). */
static int decode_one(json_object *pod, const struct manifest_ctx *ctx, const char *where,
                      struct v1_unknown *unknown, struct buf *msg)
{
        struct errs e = {msg, 0, false};
        struct unknown_volume uv;
        struct path p;
        struct apiref a;
        char generated[33];
        char *pinned = NULL;
        const char *uid;
        int r;

        path_init(&p, "");
        check_fields(&e, &p, pod, f_pod);
        if (e.n > 0)
                return e.oom ? -ENOMEM : -EINVAL;
        find_unknown_volume(pod, &uv);
        r = v1_normalize(pod, &v1_types[V1_TYPE_POD], where, unknown, msg);
        if (r < 0)
                return r;
        if (!*json_get_str(json_get(pod, "metadata"), "name", "")) {
                errs_add(&e, "metadata.name", "Required value: name is needed for the pod");
                return e.oom ? -ENOMEM : -EINVAL;
        }
        /* A pinned UID is used verbatim (and so is its config.hash); it is
         * copied because source_defaults() rewrites the member. */
        uid = json_get_str(json_get(pod, "metadata"), "uid", "");
        if (*uid) {
                pinned = strdup(uid);
                if (!pinned)
                        return -ENOMEM;
                uid = pinned;
        } else {
                r = generate_uid(pod, ctx, generated);
                if (r < 0)
                        goto out;
                uid = generated;
        }
        r = api_defaults(pod);
        if (r == 0)
                r = source_defaults(pod, ctx, uid);
        if (r < 0)
                goto out;
        validate_pod(pod, &e);
        if (e.oom) {
                r = -ENOMEM;
                goto out;
        }
        if (e.n > 0) {
                r = -EINVAL;
                goto out;
        }
        if (api_object_reference(pod, &uv, &a)) {
                if (a.resource)
                        errs_add(&e, a.path, "static pods may not reference %s", a.resource);
                else
                        errs_add(&e, a.path, "%s", a.detail);
                r = e.oom ? -ENOMEM : -EINVAL;
        }
out:
        free(pinned);
        return r;
}

static const char *str_member(json_object *o, const char *key, bool *ret_bad_type)
{
        json_object *v = json_get(o, key);

        *ret_bad_type = v && !json_object_is_type(v, json_type_string);
        return v && !*ret_bad_type ? json_object_get_string(v) : "";
}

/* Step 2.  *ret_kind is "Pod" or "PodList" on success. */
static int check_type_meta(json_object *root, bool allow_list, const char **ret_kind,
                           struct buf *err)
{
        const char *kind, *version;
        bool bad;

        if (!json_object_is_type(root, json_type_object))
                return buf_set_err(err, -EINVAL, "a manifest must be a YAML mapping or JSON object (got %s)",
                                   json_type_word(root));
        kind = str_member(root, "kind", &bad);
        if (bad)
                return buf_set_err(err, -EINVAL, "kind: Invalid type: expected string, got %s",
                                   json_type_word(json_get(root, "kind")));
        if (!*kind)
                return buf_set_err(err, -EINVAL, "Object 'Kind' is missing");
        version = str_member(root, "apiVersion", &bad);
        if (bad)
                return buf_set_err(err, -EINVAL, "apiVersion: Invalid type: expected string, got %s",
                                   json_type_word(json_get(root, "apiVersion")));
        if (strcmp(kind, "Pod") != 0 && !(allow_list && strcmp(kind, "PodList") == 0)) {
                if (allow_list)
                        return buf_set_err(err, -EINVAL, "neither a Pod nor a PodList: kind %s", kind);
                return buf_set_err(err, -EINVAL, "not a pod: kind %s", kind);
        }
        if (!*version)
                return buf_set_err(err, -EINVAL, "Object 'apiVersion' is missing");
        if (strcmp(version, "v1") != 0)
                return buf_set_err(err, -EINVAL, "no kind \"%s\" is registered for version \"%s\"", kind, version);
        *ret_kind = strcmp(kind, "Pod") == 0 ? "Pod" : "PodList";
        return 0;
}

/* Whether the first byte that is not white space is '{': text the
 * kubelet hands to its JSON decoder as it is, without reading it as
 * YAML. */
static bool has_json_prefix(const char *data, size_t len)
{
        size_t i = 0;

        while (i < len && data[i] && strchr(" \t\n\r\v\f", data[i]))
                i++;
        return i < len && data[i] == '{';
}

/*
 * Step 1.  YAML (JSON being YAML) into a tree.  Text that starts as JSON
 * and that the YAML reader refuses is read as JSON: the kubelet decodes
 * such text as JSON alone, and JSON that YAML cannot read is accepted
 * there (a \u escape of a surrogate pair or a lone surrogate, as
 * Python's json.dumps() writes any character past U+FFFF; a member's name
 * and its colon on two lines).  Text both refuse gets the YAML reader's
 * message, as before; what YAML reads is read as before, so no UID of a
 * manifest that was accepted changes.
 */
static int parse(const char *data, size_t len, json_object **ret_root, struct buf *err)
{
        bool json = has_json_prefix(data, len);
        struct buf yerr = BUF_INIT; /* the YAML reader's message, while JSON may still read it */
        int r;

        if (len >= MANIFEST_MAX_BYTES)
                return buf_set_err(err, -EFBIG, "manifest too large (%zu bytes, limit %u)", len, MANIFEST_MAX_BYTES);
        r = yaml_to_json(data, len, ret_root, json && err ? &yerr : err);
        if (r == -EINVAL && json)
                r = json_parse_text(data, len, ret_root, NULL);
        if (json && err && r < 0 && r != -ENOMEM) {
                buf_free(err);
                *err = yerr;
                yerr = (struct buf)BUF_INIT;
        }
        buf_free(&yerr);
        if (r == -ENOMEM && err)
                buf_reset(err); /* util/buf.h: -ENOMEM leaves it empty */
        if (r == -ENODATA)
                return buf_set_err(err, r, "empty manifest: no YAML or JSON document");
        return r;
}

int manifest_decode_pod(const char *data, size_t len, const struct manifest_ctx *ctx,
                        json_object **ret_pod, struct v1_unknown *ret_unknown,
                        struct buf *err)
{
        json_object *root = NULL;
        const char *kind;
        int r;

        v1_unknown_clear(ret_unknown);
        r = parse(data, len, &root, err);
        if (r == 0)
                r = check_type_meta(root, false, &kind, err);
        if (r == 0)
                r = decode_one(root, ctx, "", ret_unknown, err);
        if (r == 0) {
                *ret_pod = root;
                root = NULL;
        } else {
                if (r == -ENOMEM && err)
                        buf_reset(err); /* nothing half-written */
                v1_unknown_clear(ret_unknown);
        }
        json_object_put(root);
        return r;
}

int manifest_decode_pods(const char *data, size_t len, const struct manifest_ctx *ctx,
                         json_object **ret_pods, struct v1_unknown *ret_unknown,
                         struct buf *err)
{
        json_object *root = NULL, *items = NULL, *out = NULL;
        struct buf msg = BUF_INIT;
        char where[32];
        const char *kind;
        int r;

        v1_unknown_clear(ret_unknown);
        r = parse(data, len, &root, err);
        if (r < 0)
                goto done;
        r = check_type_meta(root, true, &kind, err);
        if (r < 0)
                goto done;
        out = json_object_new_array();
        if (!out) {
                r = -ENOMEM;
                goto done;
        }
        if (strcmp(kind, "Pod") == 0) {
                r = decode_one(root, ctx, "", ret_unknown, err);
                if (r == 0) {
                        r = json_object_array_add(out, root) == 0 ? 0 : -ENOMEM;
                        if (r == 0)
                                root = NULL;
                }
                goto done;
        }
        items = json_object_get(json_object_object_get(root, "items"));
        if (items && !json_object_is_type(items, json_type_array)) {
                r = buf_set_err(err, -EINVAL, "items: Invalid type: expected array, got %s", json_type_word(items));
                goto done;
        }
        /* The list's own members (metadata, unknown ones) first; the items
         * one by one below, so their errors read "items[i]: <path>: ...". */
        json_object_object_del(root, "items");
        r = v1_normalize(root, &v1_types[V1_TYPE_POD_LIST], "", ret_unknown, err);
        if (r < 0)
                goto done;
        /* All or nothing: the first failing item rejects the whole list. */
        for (size_t i = 0; i < arr_len(items); i++) {
                json_object *item = json_object_array_get_idx(items, i);

                if (!json_object_is_type(item, json_type_object)) {
                        r = buf_set_err(err, -EINVAL, "items[%zu]: Invalid type: expected object, got %s", i,
                                        json_type_word(item));
                        goto done;
                }
                buf_reset(&msg);
                snprintf(where, sizeof(where), "items[%zu]", i);
                r = decode_one(item, ctx, where, ret_unknown, &msg);
                if (r < 0) {
                        if (r != -ENOMEM)
                                r = buf_set_err(err, r, "items[%zu]: %s", i, msg.data);
                        goto done;
                }
                if (json_object_array_add(out, json_object_get(item)) != 0) {
                        json_object_put(item);
                        r = -ENOMEM;
                        goto done;
                }
        }
done:
        if (r == 0) {
                *ret_pods = out;
                out = NULL;
        } else {
                v1_unknown_clear(ret_unknown);
                if (r == -ENOMEM && err)
                        buf_reset(err);
        }
        json_object_put(items);
        json_object_put(out);
        json_object_put(root);
        buf_free(&msg);
        return r;
}
