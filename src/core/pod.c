/*
 * pod — compact, reference-counted pods and update records (see
 * src/core/pod.h).
 *
 * A pod's text is built once from the decoded tree; the merge rules compare
 * two 16-byte digests; only a semantic change (UPDATE/DELETE) or a status
 * change (RECONCILE) re-parses a stored pod.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "util/grow.h"
#include "util/digest.h"
#include "util/json_canon.h"
#include "util/json_parse.h"
#include "util/json_get.h"
#include "core/pod.h"
#include "util/strmap.h"

/* The immutable JSON text and the pod's identity strings, shared between
 * a pod and its clones: text, NUL, uid, NUL, name, NUL, namespace, NUL. */
/* Where the metadata starts its annotations map: every pod's text opens
 * with these bytes (see struct pod in src/core/pod.h). */
#define TEXT_HEAD "{\"metadata\":{\"annotations\":{"
#define TEXT_HEAD_LEN (sizeof(TEXT_HEAD) - 1)

/* The metadata members the merger copies from the newer version (its
 * other metadata stays as stored); spec and status are copied too. */
static const char *const copied_meta[] = {"labels", "deletionTimestamp", "deletionGracePeriodSeconds",
                                          "generation"};

static bool is_copied_meta(const char *k)
{
        for (size_t i = 0; i < sizeof(copied_meta) / sizeof(copied_meta[0]); i++)
                if (strcmp(k, copied_meta[i]) == 0)
                        return true;
        return false;
}

static const char *const local_keys[] = {
        POD_ANNOTATION_SOURCE,
        POD_ANNOTATION_SEEN,
        POD_ANNOTATION_MIRROR,
};

/* ---- timestamps ------------------------------------------------------------ */


void pod_format_seen(uint64_t wall, char *out, size_t size)
{
        char text[CLOCK_RFC3339_MAX];

        snprintf(out, size, "%s", clock_rfc3339(wall, CLOCK_NANO, text));
}

/* ---- digests -------------------------------------------------------------------- */

/* Each part is tagged and length-prefixed so no two different inputs can
 * produce the same byte stream; "absent" is a tag of its own. */
static int digest_part(struct fnv128 *h, struct buf *scratch, char tag,
                       json_object *v, bool present)
{
        uint64_t len;

        fnv128_update(h, &tag, 1);
        if (!present) {
                fnv128_update(h, "-", 1);
                return 0;
        }
        buf_reset(scratch);
        if (json_canon_append(scratch, v) < 0)
                return -ENOMEM;
        len = scratch->len;
        fnv128_update(h, "+", 1);
        fnv128_update(h, &len, sizeof(len));
        fnv128_update(h, scratch->data, scratch->len);
        return 0;
}

static int compute_digests(struct pod *p, json_object *obj, json_object *meta,
                           json_object *annotations, struct buf *scratch)
{
        struct fnv128 h;
        json_object *v, *dt = NULL;
        bool present;
        int r;

        fnv128_init(&h);
        present = json_object_object_get_ex(obj, "spec", &v);
        if ((r = digest_part(&h, scratch, 's', v, present)) < 0)
                return r;
        /* Go decodes "labels": null to a nil map, the same as absent. */
        present = meta && json_object_object_get_ex(meta, "labels", &v) &&
                  !json_object_is_type(v, json_type_null);
        if ((r = digest_part(&h, scratch, 'l', v, present)) < 0)
                return r;
        present = meta && json_object_object_get_ex(meta, "deletionTimestamp", &dt) &&
                  !json_object_is_type(dt, json_type_null);
        p->deleting = present;
        if (present && json_object_is_type(dt, json_type_string)) {
                int64_t sec;
                long nsec;
                char inst[64];

                if (clock_parse_rfc3339(json_object_get_string(dt), &sec, &nsec) == 0) {
                        snprintf(inst, sizeof(inst), "%lld.%09ld", (long long)sec, nsec);
                        fnv128_update(&h, "t", 1);
                        fnv128_update(&h, inst, strlen(inst) + 1);
                        present = false;
                        dt = NULL;
                }
        }
        if (dt && (r = digest_part(&h, scratch, 'd', dt, present)) < 0)
                return r;
        present = meta && json_object_object_get_ex(meta, "deletionGracePeriodSeconds", &v) &&
                  !json_object_is_type(v, json_type_null);
        if ((r = digest_part(&h, scratch, 'g', v, present)) < 0)
                return r;
        /* A missing annotations map counts as empty (doc/pod-config.md 3.4); local keys
         * were already taken out of this object.  Rendering always writes
         * an annotations map, so absent and empty must digest alike. */
        if ((r = digest_part(&h, scratch, 'a', annotations,
                             annotations && json_object_object_length(annotations) > 0)) < 0)
                return r;
        fnv128_final(&h, p->semantic);

        fnv128_init(&h);
        present = json_object_object_get_ex(obj, "status", &v);
        if ((r = digest_part(&h, scratch, 'S', v, present)) < 0)
                return r;
        fnv128_final(&h, p->status);
        return 0;
}

/* ---- construction ------------------------------------------------------------------ */

/* The values of a local annotation that are kept once, not per pod: the
 * sources' names, which every stored pod carries as config.source. */
static const char *const interned[] = {POD_SOURCE_FILE, POD_SOURCE_HTTP, POD_SOURCE_API};

/* A copy of s (NULL: NULL), or the interned constant equal to it.  0 or
 * -ENOMEM. */
static int local_dup(const char *s, char **ret)
{
        *ret = NULL;
        if (!s)
                return 0;
        for (size_t i = 0; i < sizeof(interned) / sizeof(interned[0]); i++) {
                if (strcmp(s, interned[i]) == 0) {
                        *ret = (char *)interned[i]; /* never written through */
                        return 0;
                }
        }
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

static void local_free(char *s)
{
        for (size_t i = 0; i < sizeof(interned) / sizeof(interned[0]); i++)
                if (s == interned[i])
                        return;
        free(s);
}

/* Sets a local annotation's slot to a copy of value (NULL removes it).
 * 0 or -ENOMEM (the slot unchanged). */
static int local_set(char **slot, const char *value)
{
        char *n;

        if (local_dup(value, &n) < 0)
                return -ENOMEM;
        local_free(*slot);
        *slot = n;
        return 0;
}

/* Frees p's config.seen text, if it has one (a stamp is a number). */
static void seen_free(struct pod *p)
{
        if (!p->stamped)
                local_free(p->seen.text);
}

/* Gives p (no seen of its own yet) the config.seen of src.  0 or -ENOMEM. */
static int copy_seen(struct pod *p, const struct pod *src)
{
        if (src->stamped) {
                p->seen.usec = src->seen.usec;
                p->stamped = true;
                return 0;
        }
        return local_dup(src->seen.text, &p->seen.text);
}

/* One 112-byte malloc block per pod on 64-bit glibc (see struct pod). */
_Static_assert(sizeof(struct pod) <= 104, "struct pod outgrew its malloc block");

static void pod_free(struct pod *p)
{
        local_free(p->source);
        seen_free(p);
        local_free(p->mirror);
        if (p->body && --p->body->refs == 0)
                free(p->body);
        free(p);
}

/* ,"key":value */
static int put_member(struct buf *b, const char *key, json_object *v)
{
        if (buf_putc(b, ',') < 0 || buf_json_string(b, key, strlen(key)) < 0 || buf_putc(b, ':') < 0)
                return -ENOMEM;
        return json_write(b, v);
}

/*
 * Gives p its body: the text in t (len bytes) followed by the UID, the
 * namespace and the store key ("namespace/name", or the name alone), each
 * NUL-terminated, in one block (see struct pod), found there by pod_uid()
 * and pod_key().  0 or -ENOMEM (p unchanged).
 */
static int give_body(struct pod *p, const char *t, size_t len, const char *uid, const char *name,
                     const char *ns)
{
        size_t lu = strlen(uid) + 1, ln = strlen(name) + 1, ls = strlen(ns) + 1;
        size_t lk = ls > 1 ? ls + ln : ln;
        struct pod_body *b;
        char *at;

        b = malloc(sizeof(*b) + len + 1 + lu + ls + lk);
        if (!b)
                return -ENOMEM;
        b->refs = 1;
        memcpy(b->text, t, len);
        b->text[len] = '\0';
        at = b->text + len + 1;
        memcpy(at, uid, lu);
        at += lu;
        memcpy(at, ns, ls);
        at += ls;
        if (ls > 1) {
                memcpy(at, ns, ls - 1);
                at[ls - 1] = '/';
                at += ls;
        }
        memcpy(at, name, ln);
        /* Both shorter than the text, which holds them. */
        p->uid_len = (uint32_t)(lu - 1);
        p->ns_len = (uint32_t)(ls - 1);
        p->body = b;
        p->text_len = (uint32_t)len;
        return 0;
}

/*
 * The checks a pod passes before anything is built: obj is an object, and
 * its metadata and metadata.annotations are objects when present (null
 * counts as absent).  0 with *ret_meta and *ret_ann (NULL when absent), or
 * -EINVAL with err set.
 */
static int check_pod(json_object *obj, json_object **ret_meta, json_object **ret_ann, struct buf *err)
{
        json_object *meta, *ann;

        if (!obj || !json_object_is_type(obj, json_type_object))
                return buf_set_err(err, -EINVAL, "a pod must be a JSON object");
        meta = json_get(obj, "metadata");
        if (meta && json_object_is_type(meta, json_type_null))
                meta = NULL;
        if (meta && !json_object_is_type(meta, json_type_object))
                return buf_set_err(err, -EINVAL, "metadata must be an object");
        ann = json_get(meta, "annotations");
        if (ann && !json_object_is_type(ann, json_type_object)) {
                if (!json_object_is_type(ann, json_type_null))
                        return buf_set_err(err, -EINVAL, "metadata.annotations must be an object");
                ann = NULL;
        }
        *ret_meta = meta;
        *ret_ann = ann;
        return 0;
}

/* Copies the local annotations of ann (source, seen, mirror) into p's
 * strings, and adds a reference to each of the others to nonlocal.  0 or
 * -ENOMEM (what was taken so far stays, for the caller to free). */
static int split_annotations(struct pod *p, json_object *ann, json_object *nonlocal)
{
        json_object_object_foreach(ann, k, v) {
                char **slot = NULL;

                if (strcmp(k, POD_ANNOTATION_SOURCE) == 0)
                        slot = &p->source;
                else if (strcmp(k, POD_ANNOTATION_SEEN) == 0)
                        slot = &p->seen.text;
                else if (strcmp(k, POD_ANNOTATION_MIRROR) == 0)
                        slot = &p->mirror;
                if (slot) {
                        struct buf t = BUF_INIT;

                        if (json_object_is_type(v, json_type_string)) {
                                (void)local_dup(json_object_get_string(v), slot);
                        } else {
                                *slot = json_write(&t, v) < 0 ? NULL : buf_steal(&t, NULL);
                                buf_free(&t);
                        }
                        if (!*slot)
                                return -ENOMEM;
                        continue;
                }
                if (json_put(nonlocal, k, json_object_get(v)) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/*
 * Writes the pod's text to text and its offsets to p.  The layout (struct
 * pod): the annotations first, so the local ones are spliced in at a fixed
 * place; the metadata the merger copies, and spec and status, each in a
 * span of its own, so a merge takes spans of the two versions and parses
 * nothing.  0 or -ENOMEM.
 */
static int render_text(struct pod *p, json_object *obj, json_object *meta, json_object *nonlocal, struct buf *text)
{
        json_object *spec = NULL, *status = NULL;

        if (buf_puts(text, TEXT_HEAD) < 0)
                return -ENOMEM;
        if (nonlocal) {
                bool afirst = true;

                json_object_object_foreach(nonlocal, k, v) {
                        if ((!afirst && buf_putc(text, ',') < 0) || buf_json_string(text, k, strlen(k)) < 0 ||
                            buf_putc(text, ':') < 0 || json_write(text, v) < 0)
                                return -ENOMEM;
                        afirst = false;
                }
        }
        p->splice = (uint32_t)text->len;
        if (buf_putc(text, '}') < 0)
                return -ENOMEM;
        if (meta) {
                json_object_object_foreach(meta, k, v) {
                        if (strcmp(k, "annotations") == 0 || is_copied_meta(k))
                                continue;
                        if (put_member(text, k, v) < 0)
                                return -ENOMEM;
                }
        }
        p->copied_off = (uint32_t)text->len;
        for (size_t i = 0; meta && i < sizeof(copied_meta) / sizeof(copied_meta[0]); i++) {
                json_object *v;

                if (json_object_object_get_ex(meta, copied_meta[i], &v) && put_member(text, copied_meta[i], v) < 0)
                        return -ENOMEM;
        }
        p->meta_end = (uint32_t)text->len;
        if (buf_putc(text, '}') < 0)
                return -ENOMEM;
        json_object_object_foreach(obj, k, v) {
                if (strcmp(k, "metadata") == 0 || strcmp(k, "spec") == 0 || strcmp(k, "status") == 0)
                        continue;
                if (put_member(text, k, v) < 0)
                        return -ENOMEM;
        }
        p->spec_off = (uint32_t)text->len;
        if (json_object_object_get_ex(obj, "spec", &spec) && put_member(text, "spec", spec) < 0)
                return -ENOMEM;
        p->status_off = (uint32_t)text->len;
        if (json_object_object_get_ex(obj, "status", &status) && put_member(text, "status", status) < 0)
                return -ENOMEM;
        if (buf_putc(text, '}') < 0)
                return -ENOMEM;
        return 0;
}

int pod_from_json(json_object *obj, struct pod **ret_pod, struct buf *err)
{
        struct buf text = BUF_INIT, scratch = BUF_INIT;
        json_object *meta = NULL, *ann = NULL, *nonlocal = NULL;
        struct pod *p;
        int r;

        r = check_pod(obj, &meta, &ann, err);
        if (r < 0)
                return r;
        p = calloc(1, sizeof(*p));
        if (!p) {
                if (err)
                        buf_reset(err);
                return -ENOMEM;
        }
        p->refs = 1;
        r = -ENOMEM;
        if (ann) {
                nonlocal = json_object_new_object();
                if (!nonlocal || split_annotations(p, ann, nonlocal) < 0)
                        goto fail;
                p->has_annotations = json_object_object_length(nonlocal) > 0;
        }
        if (compute_digests(p, obj, meta, nonlocal, &scratch) < 0)
                goto fail;
        if (render_text(p, obj, meta, nonlocal, &text) < 0)
                goto fail;
        /* The offsets are 32 bits; inputs are megabytes at most (manifest
         * and event limits), so this is a bound, not a case. */
        if (text.len >= UINT32_MAX) {
                r = buf_set_err(err, -EFBIG, "a pod's text is larger than 4 GiB");
                goto fail;
        }
        if (give_body(p, text.data, text.len, json_get_str(meta, "uid", ""), json_get_str(meta, "name", ""),
                      json_get_str(meta, "namespace", "")) < 0)
                goto fail;
        buf_free(&text);
        json_object_put(nonlocal);
        buf_free(&scratch);
        *ret_pod = p;
        return 0;
fail:
        if (r == -ENOMEM && err)
                buf_reset(err); /* a failure replaces what err held */
        json_object_put(nonlocal);
        buf_free(&text);
        buf_free(&scratch);
        pod_free(p);
        return r;
}

int pod_from_text(const char *text, size_t len, struct pod **ret_pod,
                  struct buf *err)
{
        json_object *obj = NULL;
        int r;

        r = json_parse_text(text, len, &obj, err);
        if (r < 0)
                return r;
        r = pod_from_json(obj, ret_pod, err);
        json_object_put(obj);
        return r;
}

struct pod *pod_ref(struct pod *p)
{
        if (p)
                p->refs++;
        return p;
}

void pod_unref(struct pod *p)
{
        if (!p)
                return;
        if (--p->refs == 0)
                pod_free(p);
}

int pod_clone(const struct pod *src, struct pod **ret_pod)
{
        struct pod *p = calloc(1, sizeof(*p));

        if (!p)
                return -ENOMEM;
        *p = *src;
        p->refs = 1;
        p->source = p->mirror = NULL;
        p->seen.text = NULL;
        p->stamped = false;
        p->body->refs++; /* text and identity are shared */
        if (local_dup(src->source, &p->source) < 0 || copy_seen(p, src) < 0 || local_dup(src->mirror, &p->mirror) < 0) {
                pod_free(p);
                return -ENOMEM;
        }
        *ret_pod = p;
        return 0;
}

int pod_set_source(struct pod *p, const char *value)
{
        return local_set(&p->source, value);
}

int pod_set_seen(struct pod *p, const char *value)
{
        char *n;

        if (local_dup(value, &n) < 0)
                return -ENOMEM;
        seen_free(p);
        p->seen.text = n;
        p->stamped = false;
        return 0;
}

int pod_stamp(struct pod *p, const char *source, uint64_t wall_usec)
{
        if (local_set(&p->source, source) < 0)
                return -ENOMEM;
        seen_free(p);
        p->seen.usec = wall_usec;
        p->stamped = true;
        return 0;
}

const char *pod_seen(const struct pod *p, char buf[POD_SEEN_MAX])
{
        if (!p->stamped)
                return p->seen.text;
        pod_format_seen(p->seen.usec, buf, POD_SEEN_MAX);
        return buf;
}

bool pod_same(const struct pod *a, const struct pod *b)
{
        if (a == b)
                return true;
        if (a->text_len != b->text_len || a->splice != b->splice || a->copied_off != b->copied_off ||
            a->meta_end != b->meta_end || a->spec_off != b->spec_off || a->status_off != b->status_off ||
            a->deleting != b->deleting || a->has_annotations != b->has_annotations || !pod_semantic_equal(a, b) ||
            !pod_status_equal(a, b))
                return false;
        if ((a->mirror == NULL) != (b->mirror == NULL) || (a->mirror && strcmp(a->mirror, b->mirror) != 0))
                return false;
        return memcmp(pod_text(a), pod_text(b), a->text_len) == 0;
}

bool pod_semantic_equal(const struct pod *a, const struct pod *b)
{
        return memcmp(a->semantic, b->semantic, POD_DIGEST_LEN) == 0;
}

bool pod_status_equal(const struct pod *a, const struct pod *b)
{
        return memcmp(a->status, b->status, POD_DIGEST_LEN) == 0;
}

/* ---- rendering ---------------------------------------------------------------------- */

int pod_render(const struct pod *p, struct buf *out)
{
        char seen[POD_SEEN_MAX];
        const char *vals[3] = {p->source, pod_seen(p, seen), p->mirror};
        bool comma = p->has_annotations;

        if (buf_append(out, pod_text(p), p->splice) < 0)
                return -ENOMEM;
        for (int i = 0; i < 3; i++) {
                if (!vals[i])
                        continue;
                if ((comma && buf_putc(out, ',') < 0) ||
                    buf_json_string(out, local_keys[i], strlen(local_keys[i])) < 0 ||
                    buf_putc(out, ':') < 0 ||
                    buf_json_string(out, vals[i], strlen(vals[i])) < 0)
                        return -ENOMEM;
                comma = true;
        }
        return buf_append(out, pod_text(p) + p->splice, p->text_len - p->splice);
}

json_object *pod_to_json(const struct pod *p)
{
        struct buf b = BUF_INIT;
        json_object *obj = NULL;

        if (pod_render(p, &b) == 0 && json_parse_text(b.data, b.len, &obj, NULL) < 0)
                obj = NULL;
        buf_free(&b);
        return obj;
}

/* ---- the merger's copy rules ---------------------------------------------------------- */

/*
 * A pod from spans of two versions' texts, laid out as pod_from_json lays
 * them out (struct pod): the annotations, the copied metadata, spec and
 * status of `ann_meta_spec` (the newer version) or of `status_only`, the
 * rest of the metadata and the other members of `keep` (the stored one),
 * whose identity comes along.  Nothing is parsed: O(text length).
 */
static int assemble(const struct pod *keep, const struct pod *from, bool status_only,
                    struct pod **ret_pod)
{
        const struct pod *ann = status_only ? keep : from, *meta = status_only ? keep : from;
        const struct pod *spec = status_only ? keep : from;
        struct buf t = BUF_INIT;
        struct pod *p;
        int r = -ENOMEM;

        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        *p = *keep;
        p->refs = 1;
        p->body = NULL;
        p->source = p->mirror = NULL;
        p->seen.text = NULL;
        p->stamped = false;
        /* annotations of ann | rest of keep's metadata | copied metadata
         * of meta | keep's other members | spec of spec | status of from */
        if (buf_append(&t, pod_text(ann), ann->splice + 1) < 0)
                goto out;
        p->splice = ann->splice;
        if (buf_append(&t, pod_text(keep) + keep->splice + 1, keep->copied_off - keep->splice - 1) < 0)
                goto out;
        p->copied_off = (uint32_t)t.len;
        if (buf_append(&t, pod_text(meta) + meta->copied_off, meta->meta_end - meta->copied_off) < 0)
                goto out;
        p->meta_end = (uint32_t)t.len;
        if (buf_append(&t, pod_text(keep) + keep->meta_end, keep->spec_off - keep->meta_end) < 0)
                goto out;
        p->spec_off = (uint32_t)t.len;
        if (buf_append(&t, pod_text(spec) + spec->spec_off, spec->status_off - spec->spec_off) < 0)
                goto out;
        p->status_off = (uint32_t)t.len;
        if (buf_append(&t, pod_text(from) + from->status_off, from->text_len - from->status_off) < 0)
                goto out;
        if (t.len >= UINT32_MAX) {
                r = -EFBIG;
                goto out;
        }
        /* What is compared comes with the spans it was computed from. */
        memcpy(p->semantic, status_only ? keep->semantic : from->semantic, POD_DIGEST_LEN);
        memcpy(p->status, from->status, POD_DIGEST_LEN);
        p->deleting = status_only ? keep->deleting : from->deleting;
        p->has_annotations = ann->has_annotations;
        /* The stored version's local annotations win; the newer one's fill
         * in those it lacks. */
        r = -ENOMEM;
        if (local_dup(keep->source ? keep->source : from->source, &p->source) < 0 ||
            copy_seen(p, keep->stamped || keep->seen.text ? keep : from) < 0 ||
            local_dup(keep->mirror ? keep->mirror : from->mirror, &p->mirror) < 0 ||
            give_body(p, t.data, t.len, pod_uid(keep), pod_name(keep), pod_namespace(keep)) < 0)
                goto out;
        buf_free(&t);
        *ret_pod = p;
        return 0;
out:
        buf_free(&t);
        pod_free(p);
        return r;
}

int pod_merge_update(const struct pod *existing, const struct pod *ref, struct pod **ret_pod)
{
        return assemble(existing, ref, false, ret_pod);
}

int pod_merge_status(const struct pod *existing, const struct pod *ref, struct pod **ret_pod)
{
        return assemble(existing, ref, true, ret_pod);
}

/* ---- names and order ------------------------------------------------------------------ */

int pod_full_name(const struct pod *p, struct buf *out)
{
        buf_reset(out);
        return buf_printf(out, "%s_%s", pod_name(p), pod_namespace(p));
}

int pod_store_key(const struct pod *p, struct buf *out)
{
        buf_reset(out);
        return buf_puts(out, pod_key(p));
}

int pod_compare(const struct pod *a, const struct pod *b)
{
        int c = strcmp(pod_namespace(a), pod_namespace(b));

        if (c)
                return c;
        c = strcmp(pod_name(a), pod_name(b));
        if (c)
                return c;
        return strcmp(pod_uid(a), pod_uid(b));
}

int pod_compare_ptr(const void *a, const void *b)
{
        return pod_compare(*(struct pod *const *)a, *(struct pod *const *)b);
}

/* ---- ops and records ------------------------------------------------------------------- */

static const char *const op_names[_POD_OP_MAX] = {
        [POD_OP_SET] = PROTO_OP_SET,       [POD_OP_ADD] = PROTO_OP_ADD,       [POD_OP_DELETE] = PROTO_OP_DELETE,
        [POD_OP_REMOVE] = PROTO_OP_REMOVE, [POD_OP_UPDATE] = PROTO_OP_UPDATE, [POD_OP_RECONCILE] = PROTO_OP_RECONCILE,
};

const char *pod_op_to_string(enum pod_op op)
{
        if ((int)op < 0 || op >= _POD_OP_MAX)
                return NULL;
        return op_names[op];
}

enum pod_op pod_op_from_string(const char *s)
{
        for (int i = 0; i < _POD_OP_MAX; i++)
                if (s && strcmp(s, op_names[i]) == 0)
                        return (enum pod_op)i;
        return _POD_OP_INVALID;
}

struct pod_update *pod_update_new(enum pod_op op, const char *source)
{
        struct pod_update *u = calloc(1, sizeof(*u));

        if (!u)
                return NULL;
        u->op = op;
        u->sorted = true;
        u->source = strdup(source ? source : "");
        if (!u->source) {
                free(u);
                return NULL;
        }
        return u;
}

/* Room for n more pointers in *arr.  0 or -ENOMEM (nothing changed). */
static int reserve_pods(struct pod ***arr, size_t *cap, size_t len, size_t n)
{
        return GROW(*arr, *cap, len + n, 8);
}

int pod_update_add(struct pod_update *u, struct pod *p)
{
        if (reserve_pods(&u->pods, &u->cap_pods, u->n_pods, 1) < 0)
                return -ENOMEM;
        /* Kept in step when present (a record being folded into). */
        if (u->pods_ix && (strmap_reserve(u->pods_ix, 1) < 0 ||
                           strmap_put(u->pods_ix, pod_uid(p), (void *)(uintptr_t)(u->n_pods + 1), NULL) < 0))
                return -ENOMEM;
        u->pods[u->n_pods++] = pod_ref(p);
        if (u->n_pods > 1 && pod_compare(u->pods[u->n_pods - 2], p) > 0)
                u->sorted = false;
        return 0;
}

int pod_update_share(const struct pod_update *u, struct pod_update **ret_copy)
{
        struct pod_update *c;

        if (u->delta)
                return -EINVAL;
        c = pod_update_new(u->op, u->source);
        if (!c)
                return -ENOMEM;
        if (u->n_pods > 0) {
                c->pods = malloc(u->n_pods * sizeof(*c->pods));
                if (!c->pods) {
                        pod_update_free(c);
                        return -ENOMEM;
                }
                c->cap_pods = u->n_pods;
        }
        for (size_t i = 0; i < u->n_pods; i++)
                c->pods[c->n_pods++] = pod_ref(u->pods[i]);
        c->sorted = u->sorted;
        c->provisional = u->provisional;
        *ret_copy = c;
        return 0;
}

struct pod_update *pod_update_new_delta(const char *source)
{
        struct pod_update *u = pod_update_new(POD_OP_SET, source);

        if (u)
                u->delta = true;
        return u;
}

int pod_update_add_gone(struct pod_update *u, struct pod *p)
{
        if (reserve_pods(&u->gone, &u->cap_gone, u->n_gone, 1) < 0)
                return -ENOMEM;
        if (u->gone_ix && (strmap_reserve(u->gone_ix, 1) < 0 ||
                           strmap_put(u->gone_ix, pod_uid(p), (void *)(uintptr_t)(u->n_gone + 1), NULL) < 0))
                return -ENOMEM;
        u->gone[u->n_gone++] = pod_ref(p);
        return 0;
}

bool pod_update_foldable(const struct pod_update *u)
{
        return u->op == POD_OP_SET;
}

/* An index UID -> position + 1 of arr[0..n), keys borrowed from the pods.
 * NULL on ENOMEM.  O(n). */
static struct strmap *index_pods(struct pod **arr, size_t n)
{
        struct strmap *ix = strmap_new_borrowed();

        if (!ix || strmap_reserve(ix, n) < 0) {
                strmap_free(ix, NULL);
                return NULL;
        }
        for (size_t i = 0; i < n; i++)
                (void)strmap_put(ix, pod_uid(arr[i]), (void *)(uintptr_t)(i + 1), NULL); /* reserved */
        return ix;
}

/* Position of uid in an index, or SIZE_MAX. */
static size_t ix_get(const struct strmap *ix, const char *uid)
{
        uintptr_t v = (uintptr_t)strmap_get(ix, uid);

        return v ? (size_t)v - 1 : SIZE_MAX;
}

/* Takes arr[i] out by moving the last pointer into its place; never
 * allocates. */
static void swap_remove(struct pod **arr, size_t *n, struct strmap *ix, size_t i)
{
        struct pod *gone = arr[i];

        (void)strmap_remove(ix, pod_uid(gone));
        (*n)--;
        if (i != *n) {
                arr[i] = arr[*n];
                (void)strmap_put(ix, pod_uid(arr[i]), (void *)(uintptr_t)(i + 1), NULL); /* present */
        }
        pod_unref(gone);
}

int pod_update_fold(struct pod_update *u, const struct pod_update *next)
{
        size_t i;

        if (!pod_update_foldable(u) || !pod_update_foldable(next))
                return -EINVAL;
        if (!next->delta) {
                /* A whole state: nothing of u counts any more. */
                struct pod **pods = NULL, **gone = u->gone;
                size_t cap = 0;

                if (reserve_pods(&pods, &cap, 0, next->n_pods) < 0)
                        return -ENOMEM;
                for (i = 0; i < u->n_pods; i++)
                        pod_unref(u->pods[i]);
                for (i = 0; i < u->n_gone; i++)
                        pod_unref(gone[i]);
                free(u->pods);
                free(gone);
                strmap_free(u->pods_ix, NULL);
                strmap_free(u->gone_ix, NULL);
                u->pods_ix = u->gone_ix = NULL;
                u->gone = NULL;
                u->n_gone = u->cap_gone = 0;
                u->pods = pods;
                u->cap_pods = cap;
                for (i = 0; i < next->n_pods; i++)
                        pods[i] = pod_ref(next->pods[i]);
                u->n_pods = next->n_pods;
                u->sorted = next->sorted;
                u->delta = false;
                u->provisional = next->provisional;
                return 0;
        }
        /* Everything that can fail comes first; then nothing can. */
        if (!u->pods_ix && !(u->pods_ix = index_pods(u->pods, u->n_pods)))
                return -ENOMEM;
        if (u->delta && !u->gone_ix && !(u->gone_ix = index_pods(u->gone, u->n_gone)))
                return -ENOMEM;
        if (reserve_pods(&u->pods, &u->cap_pods, u->n_pods, next->n_pods) < 0 ||
            strmap_reserve(u->pods_ix, next->n_pods) < 0)
                return -ENOMEM;
        if (u->delta && (reserve_pods(&u->gone, &u->cap_gone, u->n_gone, next->n_gone) < 0 ||
                         strmap_reserve(u->gone_ix, next->n_gone) < 0))
                return -ENOMEM;
        for (i = 0; i < next->n_gone; i++) {
                struct pod *g = next->gone[i];
                size_t at = ix_get(u->pods_ix, pod_uid(g));

                if (at != SIZE_MAX) {
                        swap_remove(u->pods, &u->n_pods, u->pods_ix, at);
                        u->sorted = false;
                }
                if (u->delta && ix_get(u->gone_ix, pod_uid(g)) == SIZE_MAX) {
                        u->gone[u->n_gone] = pod_ref(g);
                        (void)strmap_put(u->gone_ix, pod_uid(g), (void *)(uintptr_t)(u->n_gone + 1), NULL);
                        u->n_gone++;
                }
        }
        for (i = 0; i < next->n_pods; i++) {
                struct pod *p = next->pods[i];
                size_t at;

                if (u->delta && (at = ix_get(u->gone_ix, pod_uid(p))) != SIZE_MAX)
                        swap_remove(u->gone, &u->n_gone, u->gone_ix, at);
                at = ix_get(u->pods_ix, pod_uid(p));
                if (at != SIZE_MAX) {
                        struct pod *old = u->pods[at];

                        /* The index borrows old's UID: it takes p's first. */
                        (void)strmap_put(u->pods_ix, pod_uid(p), (void *)(uintptr_t)(at + 1), NULL);
                        u->pods[at] = pod_ref(p);
                        pod_unref(old);
                } else {
                        u->pods[u->n_pods] = pod_ref(p);
                        (void)strmap_put(u->pods_ix, pod_uid(p), (void *)(uintptr_t)(u->n_pods + 1), NULL);
                        u->n_pods++;
                }
                u->sorted = false;
        }
        return 0;
}

void pod_update_free(struct pod_update *u)
{
        if (!u)
                return;
        for (size_t i = 0; i < u->n_pods; i++)
                pod_unref(u->pods[i]);
        free(u->pods);
        for (size_t i = 0; i < u->n_gone; i++)
                pod_unref(u->gone[i]);
        free(u->gone);
        strmap_free(u->pods_ix, NULL);
        strmap_free(u->gone_ix, NULL);
        free(u->source);
        free(u);
}

/* A pod and its place in the list, for pod_update_sort_listed(). */
struct listed {
        struct pod *p;
        size_t at;
};

static int cmp_listed(const void *a, const void *b)
{
        const struct listed *x = a, *y = b;
        int c = strcmp(pod_namespace(x->p), pod_namespace(y->p));

        if (!c)
                c = strcmp(pod_name(x->p), pod_name(y->p));
        if (!c && strcmp(pod_uid(x->p), pod_uid(y->p)) != 0)
                c = x->at < y->at ? -1 : 1;
        return c;
}

int pod_update_sort_listed(struct pod_update *u)
{
        struct listed *l;

        if (u->sorted || u->n_pods < 2)
                return 0;
        l = malloc(u->n_pods * sizeof(*l));
        if (!l)
                return -ENOMEM;
        for (size_t i = 0; i < u->n_pods; i++)
                l[i] = (struct listed){u->pods[i], i};
        qsort(l, u->n_pods, sizeof(*l), cmp_listed);
        for (size_t i = 0; i < u->n_pods; i++)
                u->pods[i] = l[i].p;
        free(l);
        strmap_free(u->pods_ix, NULL);
        u->pods_ix = NULL;
        u->sorted = true;
        return 0;
}

void pod_update_sort(struct pod_update *u)
{
        if (u->n_pods > 1)
                qsort(u->pods, u->n_pods, sizeof(*u->pods), pod_compare_ptr);
        /* Positions moved: the index is rebuilt if it is needed again. */
        strmap_free(u->pods_ix, NULL);
        u->pods_ix = NULL;
        u->sorted = true;
}
